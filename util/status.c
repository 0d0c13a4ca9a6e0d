/* status.c - names of the library-wide error codes, the per-thread text of
 * the last error (kv_error_text), the errno map, and kv_free. */
#include <kv/status.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "error.h"

static _Thread_local char err_text[512] = "";

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
    return rc;
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
    }
    return "unknown error";
}

void kv_free(void *p)
{
    free(p);
}
