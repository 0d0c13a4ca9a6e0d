/* status.c - names of the library-wide error codes, the per-thread text of
 * the last error (kv_error_text), the errno map, and kv_free. */
#define _POSIX_C_SOURCE 200809L /* the XSI strerror_r, which returns an int */
#include <kv/status.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

static _Thread_local char err_text[512] = "";
static _Thread_local unsigned long long err_sets; /* kv_error_set calls: kv_error_mark */

const char *kv_error_text(void)
{
    return err_text;
}

int kv_error_set(int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_text, sizeof err_text, fmt, ap);
    va_end(ap);
    err_sets++;
    return rc;
}

int kv_error_errno(int e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err_text, sizeof err_text, fmt, ap);
    va_end(ap);
    size_t used = n < 0 ? 0 : (size_t)n < sizeof err_text ? (size_t)n : sizeof err_text - 1;
    char why[128];
    if (strerror_r(e, why, sizeof why) != 0)
        snprintf(why, sizeof why, "error %d", e);
    snprintf(err_text + used, sizeof err_text - used, ": %s", why);
    err_sets++;
    return kv_errno_status(e);
}

unsigned long long kv_error_mark(void)
{
    return err_sets;
}

int kv_error_since(unsigned long long mark)
{
    return err_sets != mark;
}

int kv_errno_status(int e)
{
    switch (e) {
    case ENOENT:
        return KV_NOTFOUND;
    case ENOSPC:
    case EDQUOT:
        return KV_ENOSPC;
    case ENOMEM:
        return KV_ENOMEM;
    case EACCES:
    case EPERM:
    case EROFS:
        return KV_EPERM;
    case ENOTDIR:
    case ENAMETOOLONG:
    case EEXIST:
    case EINVAL:
        return KV_EINVAL;
    default:
        return KV_EIO;
    }
}

const char *kv_strerror(int err)
{
    switch (err) {
    case KV_OK:       return "ok";
    case KV_NOTFOUND: return "not found";
    case KV_EINVAL:   return "invalid argument";
    case KV_ENOMEM:   return "out of memory";
    case KV_ECORRUPT: return "corrupt data";
    case KV_EIO:      return "I/O error";
    case KV_EBUSY:    return "resource busy";
    case KV_ENOSPC:   return "no space left on device";
    case KV_EPERM:    return "permission denied";
    case KV_ERANGE:   return "buffer too small for the value";
    }
    return "unknown error";
}

void kv_free(void *p)
{
    free(p);
}
