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
    KV_EPERM    = -8    /* permission denied: the system refused access to a file
                         * or directory (EACCES, EPERM), or its file system is
                         * mounted read-only (EROFS) */
} kv_status;

/* A short static description of `err`, never NULL; an unknown code gives
 * "unknown error". Cannot fail. */
KV_API const char *kv_strerror(int err);

/* The message of the last KV_ECORRUPT or KV_EIO this thread got from a
 * call that explains its errors -- kv_open (a damaged or missing manifest or
 * table) and every table read (gets, iterators, compactions, kv_sst_*):
 * the file, where, and what was wrong. "" until then; never NULL. Cannot
 * fail. kv_sst_error_text returns the same text. */
KV_API const char *kv_error_text(void);

/* Frees memory that kv handed to the caller (encoded filters, values, text).
 * NULL is a no-op. Cannot fail. */
KV_API void kv_free(void *p);

#ifdef __cplusplus
}
#endif

#endif /* KV_STATUS_H */
