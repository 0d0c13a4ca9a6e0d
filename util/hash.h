/* hash.h - the seeded key hash: XXH3-64 of a key's bytes with a 64-bit
 * seed. A store hashes each user key once with its seed (kept in the
 * manifest and copied into every table's filter), and the filters, the
 * tables and the store all use this one function, so that the hash a Get
 * computes is the hash a table writer gave its filter.
 *
 * xxHash is compiled inline into each file that includes this header
 * (XXH_INLINE_ALL), so that no xxHash symbol leaves the library and the
 * short-key path melts into the caller.
 *
 * Part of util/, the bottom layer: used by filter/, sstable/ and kv/, not
 * installed. */
#ifndef KV_UTIL_HASH_H
#define KV_UTIL_HASH_H

#include <stddef.h>
#include <stdint.h>

#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL
#endif
#include <xxhash.h>

/* Every call inside the function inlined (but noinline ones): xxHash's
 * every-length entry point must melt down to its short-input code. GCC;
 * clang inlines these on its own. */
#if defined(__GNUC__) && !defined(__clang__)
#define KV_HASH_FLATTEN __attribute__((flatten))
#else
#define KV_HASH_FLATTEN
#endif

/* XXH3 of a key of at most 16 bytes (most keys), with all but xxHash's
 * short-input path dropped: an out-of-line call would cost more than the
 * hash. */
static KV_HASH_FLATTEN inline uint64_t kv_hash_short(const void *key, size_t len, uint64_t seed)
{
    if (len > 16)
        __builtin_unreachable();
    return XXH3_64bits_withSeed(key, len, seed);
}


/* floor(x * n / 2^64): maps a uniform 64-bit x (a hash) onto [0, n)
 * without '%' (Lemire's multiply-shift "fastrange"); non-decreasing in x. */
static inline uint64_t kv_fastrange64(uint64_t x, uint64_t n)
{
#ifdef __SIZEOF_INT128__
    __extension__ typedef unsigned __int128 u128;
    return (uint64_t)(((u128)x * n) >> 64);
#else
    uint64_t xl = (uint32_t)x, xh = x >> 32, nl = (uint32_t)n, nh = n >> 32;
    uint64_t ll = xl * nl, lh = xl * nh, hl = xh * nl, hh = xh * nh;
    uint64_t mid = (ll >> 32) + (uint32_t)lh + (uint32_t)hl;
    return hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
#endif
}
/* The hash of key[0, len) with `seed`. A NULL key of length 0 hashes as
 * the empty key. Cannot fail. */
static inline uint64_t kv_hash_key(const void *key, size_t len, uint64_t seed)
{
    static const char empty[1];
    if (!key || !len)
        return XXH3_64bits_withSeed(empty, 0, seed);
    if (len <= 16)
        return kv_hash_short(key, len, seed);
    return XXH3_64bits_withSeed(key, len, seed);
}

#endif /* KV_UTIL_HASH_H */
