/* status.c - names of the library-wide error codes, and kv_free. */
#include <kv/status.h>

#include <stdlib.h>

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
