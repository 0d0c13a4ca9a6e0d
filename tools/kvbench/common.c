/* common.c - kvbench's small helpers: the clock, name hashing, formatting. */
#define _XOPEN_SOURCE 700
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

/* ---- small helpers --------------------------------------------------------------- */

double now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t hash_name(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

char *dup_printf(const char *fmt, const char *a, const char *b)
{
    size_t n = strlen(fmt) + strlen(a) + strlen(b) + 1;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, fmt, a, b);
    return p;
}

void human_bytes(char *buf, size_t n, double bytes)
{
    if (bytes >= 1024.0 * 1024 * 1024)
        snprintf(buf, n, "%.1f GB", bytes / (1024.0 * 1024 * 1024));
    else if (bytes >= 1024.0 * 1024)
        snprintf(buf, n, "%.1f MB", bytes / (1024.0 * 1024));
    else if (bytes >= 1024.0)
        snprintf(buf, n, "%.1f KB", bytes / 1024.0);
    else
        snprintf(buf, n, "%.0f bytes", bytes);
}

const char *layout_name(int layout)
{
    return layout == KV_BLOOM_CLASSIC ? "classic" : "blocked";
}

