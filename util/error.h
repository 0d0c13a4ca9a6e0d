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

/* kv_error_set for a system call that failed with errno e: the text is the
 * formatted one, ": " and strerror(e); returns kv_errno_status(e). */
int kv_error_errno(int e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The rule of status.h (every error return sets the text) at a public
 * call's boundary: the call takes a mark when it starts, and before it
 * returns an error asks kv_error_since(mark) whether a lower layer set the
 * text during the call; if none did, it sets a text of its own. The mark
 * counts this thread's kv_error_set calls. Cannot fail. */
unsigned long long kv_error_mark(void);
int kv_error_since(unsigned long long mark);

/* The status for an errno value from a failed system call:
 *   ENOENT                                   KV_NOTFOUND
 *   ENOSPC, EDQUOT                           KV_ENOSPC
 *   ENOMEM                                   KV_ENOMEM
 *   EACCES, EPERM, EROFS                     KV_EPERM
 *   ENOTDIR, ENAMETOOLONG, EEXIST, EINVAL    KV_EINVAL
 *   anything else                            KV_EIO
 * (the system refused access in the KV_EPERM cases -- a read-only file
 * system too: like a missing permission it is the setup that is wrong, not
 * the device, and retrying will not help until someone changes it; the
 * caller's path or arguments are wrong in the KV_EINVAL cases; the device
 * failed in the KV_EIO ones). Cannot fail. */
int kv_errno_status(int e);

#endif /* KV_UTIL_ERROR_H */
