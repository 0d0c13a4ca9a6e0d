/* block.h - the sorted, prefix-compressed blocks that hold a table's data
 * and index: a builder, and a cursor that checks every byte it decodes.
 *
 *   entry*  : varint shared | varint unshared | varint vlen | key[shared:] | value
 *   restarts: u32le offset of each restart entry (shared = 0 there)
 *   u32le   : number of restarts (>= 1)
 *
 * Internal to sstable/. */
#ifndef KV_SST_BLOCK_H
#define KV_SST_BLOCK_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "coding.h"
#include "status.h"

/* ---- builder ------------------------------------------------------------------- */

typedef struct {
    uint8_t *buf;
    size_t len, cap;
    uint32_t *restarts;
    size_t nrestarts, rcap;
    unsigned interval, counter;
    uint8_t *last;
    size_t last_len, last_cap;
    uint64_t entries;
} kv_blockb;

void kv_blockb_init(kv_blockb *b, unsigned restart_interval);
void kv_blockb_free(kv_blockb *b);
void kv_blockb_reset(kv_blockb *b);
/* Keys must increase; the builder does not check (the writer does). */
int kv_blockb_add(kv_blockb *b, const void *key, size_t klen, const void *val, size_t vlen);
/* Bytes the block would have if finished now. */
size_t kv_blockb_size(const kv_blockb *b);
/* Appends the restart array; the block is b->buf[0, b->len). */
int kv_blockb_finish(kv_blockb *b);

/* ---- cursor ---------------------------------------------------------------------- */

typedef struct {
    const uint8_t *data;   /* the block */
    size_t entries_end;    /* where the restart array starts */
    const uint8_t *restarts;
    uint32_t nrestarts;
    /* current entry */
    size_t off, next;
    uint8_t *key;
    size_t klen, kcap;
    const uint8_t *val;
    size_t vlen;
    int valid;
    int err; /* KV_ECORRUPT once a bad entry was met */
} kv_blockc;

/* Checks the restart array of a block of `len` bytes; KV_ECORRUPT. */
int kv_blockc_init(kv_blockc *c, const uint8_t *data, size_t len);
void kv_blockc_free(kv_blockc *c);
/* Positioning. Afterwards c->valid says whether the cursor is on an entry;
 * c->err is set (and sticks) when the block is damaged: an entry runs past
 * the block's end, or a key is not greater than the one before it. */
void kv_blockc_first(kv_blockc *c);
void kv_blockc_last(kv_blockc *c);
void kv_blockc_next(kv_blockc *c);
/* First entry whose key is >= key (valid = 0 when there is none). */
void kv_blockc_seek(kv_blockc *c, const void *key, size_t klen);
/* Last entry whose key is < key (valid = 0 when there is none). */
void kv_blockc_seek_before(kv_blockc *c, const void *key, size_t klen);

/* Bytewise comparison, then by length. */
int kv_key_cmp(const void *a, size_t alen, const void *b, size_t blen);

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

#endif /* KV_SST_BLOCK_H */
