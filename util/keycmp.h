/* keycmp.h - the order of keys: bytewise, then by length, as memcmp
 * would give it on the common prefix. Every sorted structure in kv -- the
 * memtable's skiplist, a table's blocks and index, a level's table ranges,
 * the merging iterators -- compares keys with these.
 *
 * Part of util/, the bottom layer: used by sstable/ and kv/, not installed. */
#ifndef KV_UTIL_KEYCMP_H
#define KV_UTIL_KEYCMP_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* How many leading bytes keys a and b share. */
static inline size_t kv_key_common_prefix(const void *a, size_t alen, const void *b, size_t blen)
{
    const uint8_t *x = a, *y = b;
    size_t n = alen < blen ? alen : blen, i = 0;
    while (i < n && x[i] == y[i])
        i++;
    return i;
}

/* Bytes [at, at + 8) of a key as a big-endian integer, zero past the key's
 * end. For two keys that share their first `at` bytes, a smaller word means
 * a smaller key (equal words say nothing): binary searches over many keys
 * with a common prefix compare these words and read the keys only on a tie. */
static inline uint64_t kv_key_word(const void *key, size_t klen, size_t at)
{
    uint64_t w = 0;
    if (at >= klen)
        return 0;
    const uint8_t *p = (const uint8_t *)key + at;
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (klen - at >= 8) {
        memcpy(&w, p, 8);
        return __builtin_bswap64(w);
    }
#endif
    for (size_t i = 0; i < 8; i++)
        w = w << 8 | (i < klen - at ? p[i] : 0);
    return w;
}

/* memcmp's sign for n bytes: whole 8-byte words first (no call for the
 * short keys most stores hold), then memcmp for the last 1..7 bytes. */
static inline int kv_bytes_cmp(const void *a, const void *b, size_t n)
{
    const uint8_t *x = a, *y = b;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t u = kv_key_word(x, n, i), v = kv_key_word(y, n, i);
        if (u != v)
            return u < v ? -1 : 1;
    }
    return i < n ? memcmp(x + i, y + i, n - i) : 0;
}

/* Bytewise comparison, then by length: negative, 0 or positive, as memcmp. */
static inline int kv_key_cmp(const void *a, size_t alen, const void *b, size_t blen)
{
    size_t n = alen < blen ? alen : blen;
    int c = kv_bytes_cmp(a, b, n);
    if (c)
        return c;
    return alen < blen ? -1 : alen > blen;
}

/* The first i < n with words[i] >= w, or n. Branch-free (a conditional
 * move per step), so a search whose path the CPU cannot predict does not
 * pay a mispredicted branch per step. */
static inline size_t kv_word_lower_bound(const uint64_t *words, size_t n, uint64_t w)
{
    if (n == 0)
        return 0;
    size_t base = 0;
    while (n > 1) {
        size_t half = n / 2;
        base = words[base + half] < w ? base + half : base;
        n -= half;
    }
    return base + (words[base] < w);
}

/* A sorted word array laid out for searches that miss the cache: `words`
 * starts on a cache line (KV_WORD_LINE words to a line) and fence[j] holds
 * the last word of line j (the last word of all, for a short last line),
 * so a search reads the small fence array (a few KB for thousands of
 * words; it stays cached when the arrays it stands for do not) and then
 * one line of words, instead of a line of words at each of its first
 * steps. kv_word_fence_count: the fence's length for n words. */
#define KV_WORD_LINE 8
static inline size_t kv_word_fence_count(size_t n)
{
    return (n + KV_WORD_LINE - 1) / KV_WORD_LINE;
}

/* Fills fence (kv_word_fence_count(n) words) for words[0, n). */
static inline void kv_word_fence_build(const uint64_t *words, size_t n, uint64_t *fence)
{
    for (size_t j = 0; j < kv_word_fence_count(n); j++) {
        size_t last = (j + 1) * KV_WORD_LINE - 1;
        fence[j] = words[last < n ? last : n - 1];
    }
}

/* kv_word_lower_bound over words[0, n) by way of their fence: the first
 * line whose last word is >= w holds the answer (every earlier line's
 * words are < w), or there is none (n). *line (may be NULL) gets that
 * line's first index, so a caller can ask for what it keeps per word in
 * the same range before the line arrives. */
static inline size_t kv_word_lower_bound_fenced(const uint64_t *fence, const uint64_t *words,
                                                size_t n, uint64_t w, size_t *line)
{
    size_t m = kv_word_fence_count(n);
    size_t j = kv_word_lower_bound(fence, m, w);
    if (j == m)
        return n;
    size_t base = j * KV_WORD_LINE;
    if (line)
        *line = base;
    size_t len = n - base < KV_WORD_LINE ? n - base : KV_WORD_LINE;
    return base + kv_word_lower_bound(words + base, len, w);
}

#endif /* KV_UTIL_KEYCMP_H */
