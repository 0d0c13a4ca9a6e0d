/* testutil.h - small helpers shared by the test programs. The program must
 * define _XOPEN_SOURCE (500 or later) before its first include, for nftw. */
#ifndef KV_TESTUTIL_H
#define KV_TESTUTIL_H

#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

/* SplitMix64's output function: a well-mixed 64-bit value from any seed, for
 * reproducible keys and values. */
static inline uint64_t splitmix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* An nftw callback that removes each entry: with FTW_DEPTH | FTW_PHYS it
 * removes a whole directory tree. */
static inline int remove_one(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb;
    (void)flag;
    (void)f;
    return remove(p);
}

/* Reads f to its end into a NUL-terminated buffer the caller frees, its
 * length (without the NUL) in *len; NULL when out of memory. */
static inline char *read_all(FILE *f, size_t *len)
{
    size_t cap = 4096, n = 0, got;
    char *b = malloc(cap);
    while (b && (got = fread(b + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (cap - n - 1 == 0) {
            char *bigger = realloc(b, cap * 2);
            if (!bigger)
                free(b);
            b = bigger;
            cap *= 2;
        }
    }
    if (b) {
        b[n] = 0;
        *len = n;
    }
    return b;
}

#endif /* KV_TESTUTIL_H */
