/* status.c - names of the library-wide error codes, the per-thread text of
 * the last error (kv_error_text), and kv_free. */
#include <kv/status.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "errtext.h"

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
