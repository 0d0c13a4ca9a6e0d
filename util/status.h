/* status.h - error codes, kv_strerror and kv_free, shared by every kv module.
 *
 * Every public function in kv returns one of these codes (KV_OK or a negative
 * KV_E... value) unless its comment says why it cannot fail. Codes are only
 * ever appended, never renumbered: a program may store or compare them. */
#ifndef KV_STATUS_H
#define KV_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#  define KV_API
#elif defined(__GNUC__) && __GNUC__ >= 4
#  define KV_API __attribute__((visibility("default")))
#else
#  define KV_API
#endif

typedef enum kv_status {
    KV_OK       =  0,   /* success */
    KV_NOTFOUND = -1,   /* the key is absent (not an error of the call) */
    KV_EINVAL   = -2,   /* bad argument: NULL handle, size out of range, ... */
    KV_ENOMEM   = -3,   /* an allocation failed; nothing was changed */
    KV_ECORRUPT = -4,   /* stored or encoded data failed a check */
    KV_EIO      = -5,   /* the operating system reported an I/O error */
    KV_EBUSY    = -6,   /* the resource is in use (e.g. database locked) */
    KV_ENOSPC   = -7,   /* no space left on the device */
    KV_EPERM    = -8,   /* permission denied: the system refused access to a file
                         * or directory (EACCES, EPERM), or its file system is
                         * mounted read-only (EROFS) */
    KV_ERANGE   = -9    /* the caller's buffer is too small for the answer
                         * (kv_get_into: the length needed is given back) */
} kv_status;

/* A short static description of `err`, never NULL; an unknown code gives
 * "unknown error". Cannot fail. */
KV_API const char *kv_strerror(int err);

/* Why the last call that failed on this thread failed: the file or the
 * database directory first, then the reason, e.g.
 *   "/data/db/000012.log: write of 4096 bytes at offset 8192: Input/output error"
 *   "/data/db/LOCK: open: Is a directory"
 *   "/data/db: kv_put: key of 65537 bytes, over KV_MAX_KEY_SIZE (65536)"
 * "" until the first error; never NULL. Cannot fail.
 *
 * The rule: a call that returns an error sets the text before it returns;
 * a call that succeeds leaves it as it was (so read it right after the call
 * that failed, on the thread that made it). Every call of kv.h sets it on
 * every error it returns -- KV_EINVAL included, naming the argument; not
 * KV_NOTFOUND from kv_get and kv_get_at, which is an answer, not an error --
 * also for an error that arose on the database's background thread (a
 * failed flush or compaction): the handle keeps that error's text and sets
 * it again on the caller's thread whenever a call returns the error. Table
 * calls (sstable.h) set it for every error from a file or its contents
 * (KV_ECORRUPT, KV_EIO, KV_EPERM, KV_ENOSPC, a missing file's KV_NOTFOUND);
 * after their KV_EINVAL or KV_ENOMEM, and after any error of bloom.h's
 * in-memory calls, whose comments give the cause, the text is an older
 * call's. bloom.h's file calls (kv_bloom_save, kv_bloom_load,
 * kv_bloom_open_shared) set it on every error, naming the file. The
 * counting, scalable and rotating filters set it for every error they
 * return (not for kv_counting_bloom_remove's KV_NOTFOUND, an answer). kv_sst_error_text
 * returns the same text. */
KV_API const char *kv_error_text(void);

/* Frees memory that kv handed to the caller (encoded filters, values, text).
 * NULL is a no-op. Cannot fail. */
KV_API void kv_free(void *p);

#ifdef __cplusplus
}
#endif

#endif /* KV_STATUS_H */
