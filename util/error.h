/* error.h - how a failing call explains itself: the per-thread text that
 * kv_error_text returns, and the one map from errno values to kv_status
 * codes that every module uses (status.c).
 *
 * Part of util/, the bottom layer: not installed. */
#ifndef KV_UTIL_ERROR_H
#define KV_UTIL_ERROR_H

/* Formats the message of an error this thread is about to return: name the
 * file first. Returns rc, so that `return kv_error_set(KV_ECORRUPT, ...)`
 * reads as one statement. */
int kv_error_set(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The status for an errno value from a failed system call:
 *   ENOENT                                   KV_NOTFOUND
 *   ENOSPC, EDQUOT                           KV_ENOSPC
 *   ENOMEM                                   KV_ENOMEM
 *   EACCES, EPERM, EROFS, ENOTDIR, ENAMETOOLONG, EEXIST, EINVAL   KV_EINVAL
 *   anything else                            KV_EIO
 * (the caller's path or arguments are wrong in the KV_EINVAL cases; the
 * device failed in the KV_EIO ones). Cannot fail. */
int kv_errno_status(int e);

#endif /* KV_UTIL_ERROR_H */
