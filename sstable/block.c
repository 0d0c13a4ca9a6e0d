/* block.c - building and decoding prefix-compressed blocks. */
#include "block.h"
#include "order.h"

#include <stdlib.h>
#include <string.h>

#include "util/coding.h"

static int grow(uint8_t **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return KV_OK;
    size_t n = *cap ? *cap : 256;
    while (n < need)
        n *= 2;
    uint8_t *p = realloc(*buf, n);
    if (!p)
        return KV_ENOMEM;
    *buf = p;
    *cap = n;
    return KV_OK;
}

/* ---- builder ------------------------------------------------------------------- */

void kv_blockb_init(kv_blockb *b, unsigned restart_interval)
{
    memset(b, 0, sizeof *b);
    b->interval = restart_interval ? restart_interval : 16;
}

void kv_blockb_free(kv_blockb *b)
{
    free(b->buf);
    free(b->restarts);
    free(b->last);
    memset(b, 0, sizeof *b);
}

void kv_blockb_reset(kv_blockb *b)
{
    b->len = 0;
    b->nrestarts = 0;
    b->counter = 0;
    b->last_len = 0;
    b->entries = 0;
}

size_t kv_blockb_size(const kv_blockb *b)
{
    return b->len + 4 * (b->nrestarts + 1) + (b->nrestarts == 0 ? 4 : 0);
}

int kv_blockb_add(kv_blockb *b, const void *key, size_t klen, const void *val, size_t vlen)
{
    size_t shared = 0;
    if (b->counter < b->interval && b->entries > 0) {
        size_t n = klen < b->last_len ? klen : b->last_len;
        const uint8_t *k = key;
        while (shared < n && b->last[shared] == k[shared])
            shared++;
    } else {
        if (b->len > UINT32_MAX)
            return KV_EINVAL;
        if (b->nrestarts == b->rcap) {
            size_t nc = b->rcap ? 2 * b->rcap : 16;
            uint32_t *r = realloc(b->restarts, nc * sizeof *r);
            if (!r)
                return KV_ENOMEM;
            b->restarts = r;
            b->rcap = nc;
        }
        b->restarts[b->nrestarts++] = (uint32_t)b->len;
        b->counter = 0;
    }
    size_t unshared = klen - shared;
    if (grow(&b->buf, &b->cap, b->len + 30 + unshared + vlen) != KV_OK ||
        grow(&b->last, &b->last_cap, klen + 1) != KV_OK)
        return KV_ENOMEM;
    uint8_t *p = b->buf + b->len;
    p += kv_put_varint(p, shared);
    p += kv_put_varint(p, unshared);
    p += kv_put_varint(p, vlen);
    if (unshared)
        memcpy(p, (const uint8_t *)key + shared, unshared);
    p += unshared;
    if (vlen)
        memcpy(p, val, vlen);
    p += vlen;
    b->len = (size_t)(p - b->buf);
    if (unshared)
        memcpy(b->last + shared, (const uint8_t *)key + shared, unshared);
    b->last_len = klen;
    b->counter++;
    b->entries++;
    return KV_OK;
}

int kv_blockb_finish(kv_blockb *b)
{
    if (b->nrestarts == 0) { /* an empty block still has one restart */
        b->restarts = b->restarts ? b->restarts : malloc(sizeof *b->restarts);
        if (!b->restarts)
            return KV_ENOMEM;
        b->rcap = b->rcap ? b->rcap : 1;
        b->restarts[b->nrestarts++] = 0;
    }
    if (grow(&b->buf, &b->cap, b->len + 4 * (b->nrestarts + 1)) != KV_OK)
        return KV_ENOMEM;
    for (size_t i = 0; i < b->nrestarts; i++, b->len += 4)
        kv_put32(b->buf + b->len, b->restarts[i]);
    kv_put32(b->buf + b->len, (uint32_t)b->nrestarts);
    b->len += 4;
    return KV_OK;
}

/* ---- cursor ---------------------------------------------------------------------- */

/* Restart points whose keys kv_blockc_prefetch asks the cache for. */
#define BLOCK_PREFETCH_RESTARTS 16

static inline void prefetch(const void *p)
{
#if defined(__GNUC__)
    __builtin_prefetch(p);
#else
    (void)p;
#endif
}

int kv_blockc_init(kv_blockc *c, const uint8_t *data, size_t len, const kv_comparator *cmp)
{
    memset(c, 0, sizeof *c);
    c->cmp = cmp;
    c->key = c->short_key;
    c->kcap = sizeof c->short_key;
    if (len < 8)
        return KV_ECORRUPT;
    uint32_t n = kv_get32(data + len - 4);
    if (n == 0 || (uint64_t)n * 4 + 4 > len)
        return KV_ECORRUPT;
    c->data = data;
    c->nrestarts = n;
    c->entries_end = len - 4 - (size_t)n * 4;
    c->restarts = data + c->entries_end;
    uint32_t prev = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t r = kv_get32(c->restarts + 4 * i);
        if ((i == 0 && r != 0) || (i > 0 && r <= prev) || (r >= c->entries_end && c->entries_end))
            return KV_ECORRUPT;
        prev = r;
    }
    return KV_OK;
}

void kv_blockc_prefetch_end(const uint8_t *data, size_t len)
{
    /* The restart count is the last 4 bytes; the restarts of a block of
     * the usual size lie in the 64 bytes before them. */
    if (len)
        prefetch(data + len - 1);
    if (len > 64)
        prefetch(data + len - 65);
}

void kv_blockc_prefetch(const uint8_t *data, size_t len)
{
    /* A seek's binary search reads one restart key after another, each a
     * cache miss in a cold block: ask for all their lines now, so that
     * they arrive together (a few lines for a block of the usual size; a
     * huge block's search reads few of its many restarts, and is left
     * alone). */
    uint32_t n = len >= 8 ? kv_get32(data + len - 4) : 0;
    if (n == 0 || n > BLOCK_PREFETCH_RESTARTS || (uint64_t)n * 4 + 4 > len)
        return;
    size_t entries_end = len - 4 - (size_t)n * 4;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t r = kv_get32(data + entries_end + 4 * i);
        if (r < entries_end)
            prefetch(data + r);
    }
}

/* What kv_blockc_prev decoded of one restart interval: the offset of each
 * entry up to the one it stepped back from, and each one's whole key, so
 * that the next steps back within the interval take an entry from here
 * instead of decoding the interval again from its restart (which made a
 * reverse scan decode half an interval per entry). */
struct kv_blockc_back {
    const uint8_t *data; /* the block the entries are of */
    size_t n, pos;       /* entries held; the cursor's among them */
    size_t cap;
    size_t *off;         /* [cap] entry offsets */
    size_t *kend;        /* [cap] end of each entry's key in keys */
    uint8_t *keys;
    size_t kcap;
};

static void back_free(struct kv_blockc_back *b)
{
    if (!b)
        return;
    free(b->off);
    free(b->kend);
    free(b->keys);
    free(b);
}

void kv_blockc_free(kv_blockc *c)
{
    back_free(c->back);
    c->back = NULL;
    if (c->key != c->short_key)
        free(c->key);
    c->key = NULL;
    free(c->prev);
    c->prev = NULL;
    c->prev_cap = 0;
    c->kcap = 0;
    c->valid = 0;
}

/* Whether the key made of the cursor's first `shared` bytes and then
 * `unshared` bytes at p is greater than the cursor's key. Only the bytes
 * from `shared` on differ, and usually the first of them decides. */
static int greater(const kv_blockc *c, size_t shared, const uint8_t *p, size_t unshared)
{
    size_t rest = c->klen - shared;
    size_t n = unshared < rest ? unshared : rest;
    int d = n ? memcmp(p, c->key + shared, n) : 0;
    return d > 0 || (d == 0 && unshared > rest);
}

/* Decodes the entry at `off` into the cursor. With `after_prev` the
 * previous entry's key is in c->key[0, c->klen) and, with `bytewise`, the
 * new key must be strictly greater (checked here, from the bytes that
 * differ, so that no caller copies keys to catch entries out of order);
 * without after_prev (a restart) the entry shares nothing. Sets valid = 0
 * at the end of the entries, err on damage. Called with constants for
 * after_prev and bytewise, so each caller gets the code it needs. */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline void decode_entry(kv_blockc *c, size_t off, int after_prev, int bytewise)
{
    c->valid = 0;
    if (c->err || off >= c->entries_end)
        return;
    if (!after_prev)
        c->klen = 0;
    const uint8_t *p = c->data + off, *end = c->data + c->entries_end;
    uint64_t shared, unshared, vlen;
    if (!kv_get_varint(&p, end, &shared) || !kv_get_varint(&p, end, &unshared) ||
        !kv_get_varint(&p, end, &vlen) || shared > c->klen ||
        unshared > (uint64_t)(end - p) || vlen > (uint64_t)(end - p) - unshared ||
        (after_prev && bytewise && !greater(c, (size_t)shared, p, (size_t)unshared))) {
        c->err = KV_ECORRUPT;
        return;
    }
    size_t klen = (size_t)(shared + unshared);
    if (klen + 1 > c->kcap && c->key == c->short_key) { /* leaves short_key */
        uint8_t *k = malloc(2 * klen + 2);
        if (!k) {
            c->err = KV_ENOMEM;
            return;
        }
        memcpy(k, c->short_key, sizeof c->short_key);
        c->key = k;
        c->kcap = 2 * klen + 2;
    }
    if (grow(&c->key, &c->kcap, klen + 1) != KV_OK) {
        c->err = KV_ENOMEM;
        return;
    }
    if (unshared)
        memcpy(c->key + shared, p, (size_t)unshared);
    c->klen = klen;
    c->val = p + unshared;
    c->vlen = (size_t)vlen;
    c->off = off;
    c->next = (size_t)(c->val + vlen - c->data);
    c->valid = 1;
}

/* decode_entry for a bytewise block, or for any entry after a restart
 * (which shares nothing and is not compared). */
static void decode_at(kv_blockc *c, size_t off, int after_prev)
{
    decode_entry(c, off, after_prev, 1);
}

/* The next entry of a block under a comparator: its key against the
 * previous one, whole (the bytes that differ say nothing of its order). */
static void next_under_cmp(kv_blockc *c)
{
    size_t prev_len = c->klen;
    if (grow(&c->prev, &c->prev_cap, prev_len + 1) != KV_OK) {
        c->err = KV_ENOMEM;
        c->valid = 0;
        return;
    }
    if (prev_len)
        memcpy(c->prev, c->key, prev_len);
    decode_entry(c, c->next, 1, 0);
    if (c->valid && c->cmp->compare(c->cmp->ctx, c->prev, prev_len, c->key, c->klen) >= 0) {
        c->err = KV_ECORRUPT;
        c->valid = 0;
    }
}

void kv_blockc_first(kv_blockc *c)
{
    decode_at(c, 0, 0);
}

void kv_blockc_next(kv_blockc *c)
{
    if (!c->valid)
        return;
    if (c->cmp)
        next_under_cmp(c);
    else
        decode_at(c, c->next, 1);
}

static size_t restart_at(const kv_blockc *c, uint32_t i)
{
    return kv_get32(c->restarts + 4 * i);
}

/* The cursor's key against key: bytewise, or (custom) under c->cmp. The
 * seek below is compiled once for each, so a bytewise seek compares with
 * no test of the comparator. */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline int cursor_cmp(const kv_blockc *c, const void *key, size_t klen, int custom)
{
    return custom ? c->cmp->compare(c->cmp->ctx, c->key, c->klen, key, klen)
                  : kv_key_cmp(c->key, c->klen, key, klen);
}

/* The last restart whose key is < key, or -1 when restart 0's is not. */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline int64_t restart_below(kv_blockc *c, const void *key, size_t klen, int custom)
{
    int64_t lo = -1, hi = c->nrestarts; /* restart lo < key <= restart hi */
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        decode_at(c, restart_at(c, (uint32_t)mid), 0);
        if (c->err)
            return -1;
        if (!c->valid || cursor_cmp(c, key, klen, custom) >= 0)
            hi = mid;
        else
            lo = mid;
    }
    return lo;
}

#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline void seek(kv_blockc *c, const void *key, size_t klen, int custom)
{
    /* From the last restart below the key (or the first entry), forward. */
    int64_t r = restart_below(c, key, klen, custom);
    if (c->err)
        return;
    decode_at(c, restart_at(c, r < 0 ? 0 : (uint32_t)r), 0);
    while (c->valid && cursor_cmp(c, key, klen, custom) < 0) {
        if (custom)
            next_under_cmp(c);
        else
            decode_at(c, c->next, 1);
    }
}

void kv_blockc_seek(kv_blockc *c, const void *key, size_t klen)
{
    if (c->cmp)
        seek(c, key, klen, 1);
    else
        seek(c, key, klen, 0);
}

/* From restart r, the last entry before `limit` entries' end: counts the
 * entries that qualify, then decodes again up to the last of them. */
static void last_from(kv_blockc *c, uint32_t r, const void *key, size_t klen, int bounded)
{
    size_t n = 0;
    for (decode_at(c, restart_at(c, r), 0);
         c->valid && (!bounded || kv_sst_cmp(c->cmp, c->key, c->klen, key, klen) < 0);
         kv_blockc_next(c))
        n++;
    if (c->err || n == 0) {
        c->valid = 0;
        return;
    }
    decode_at(c, restart_at(c, r), 0);
    while (--n > 0 && c->valid)
        kv_blockc_next(c);
}

/* Appends the cursor's entry to b; 0 when out of memory. */
static int back_push(struct kv_blockc_back *b, const kv_blockc *c)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 32;
        size_t *off = realloc(b->off, cap * sizeof *off);
        if (!off)
            return 0;
        b->off = off;
        size_t *kend = realloc(b->kend, cap * sizeof *kend);
        if (!kend)
            return 0;
        b->kend = kend;
        b->cap = cap;
    }
    size_t at = b->n ? b->kend[b->n - 1] : 0;
    if (grow(&b->keys, &b->kcap, at + c->klen + 1) != KV_OK)
        return 0;
    memcpy(b->keys + at, c->key, c->klen);
    b->off[b->n] = c->off;
    b->kend[b->n] = at + c->klen;
    b->n++;
    return 1;
}

/* Puts the cursor on entry i of b: its key from b, the rest from the
 * entry's header (checked when the interval was decoded). */
static void back_load(kv_blockc *c, struct kv_blockc_back *b, size_t i)
{
    const uint8_t *p = c->data + b->off[i], *end = c->data + c->entries_end;
    uint64_t shared, unshared, vlen;
    size_t k0 = i ? b->kend[i - 1] : 0, klen = b->kend[i] - k0;
    if (!kv_get_varint(&p, end, &shared) || !kv_get_varint(&p, end, &unshared) ||
        !kv_get_varint(&p, end, &vlen)) {
        c->valid = 0; /* cannot happen: decode_at read this header before */
        c->err = KV_ECORRUPT;
        return;
    }
    if (klen + 1 > c->kcap && c->key == c->short_key) { /* leaves short_key */
        uint8_t *k = malloc(2 * klen + 2);
        if (!k) {
            c->valid = 0;
            c->err = KV_ENOMEM;
            return;
        }
        c->key = k;
        c->kcap = 2 * klen + 2;
    }
    if (grow(&c->key, &c->kcap, klen + 1) != KV_OK) {
        c->valid = 0;
        c->err = KV_ENOMEM;
        return;
    }
    memcpy(c->key, b->keys + k0, klen);
    c->klen = klen;
    c->val = p + unshared;
    c->vlen = (size_t)vlen;
    c->off = b->off[i];
    c->next = (size_t)(c->val + vlen - c->data);
    c->valid = 1;
    b->pos = i;
}

void kv_blockc_prev(kv_blockc *c)
{
    if (!c->valid)
        return;
    size_t target = c->off;
    if (target == 0) { /* the first entry (restart 0 is at 0) */
        c->valid = 0;
        return;
    }
    struct kv_blockc_back *b = c->back;
    /* Within the interval decoded last: the entry before, from memory. */
    if (b && b->data == c->data && b->pos < b->n && b->off[b->pos] == target && b->pos > 0) {
        back_load(c, b, b->pos - 1);
        return;
    }
    /* The last restart before the current entry (restart offsets increase,
     * kv_blockc_init checked), then forward to the entry that ends where
     * the current one begins: no key is compared, so a step back costs one
     * pass over part of one restart interval, whatever the keys' length.
     * Each entry passed is kept, so the next steps back in this interval
     * cost no decoding. */
    uint32_t lo = 0, hi = c->nrestarts;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (restart_at(c, mid) < target)
            lo = mid;
        else
            hi = mid;
    }
    if (!b && (b = c->back = calloc(1, sizeof *b)) == NULL) {
        c->valid = 0;
        c->err = KV_ENOMEM;
        return;
    }
    b->data = c->data;
    b->n = 0;
    decode_at(c, restart_at(c, lo), 0);
    while (c->valid && c->next < target) {
        if (!back_push(b, c)) {
            c->valid = 0;
            c->err = KV_ENOMEM;
            return;
        }
        kv_blockc_next(c);
    }
    if (c->valid && c->next != target) { /* the restart's entries skip over it */
        c->valid = 0;
        c->err = KV_ECORRUPT;
        return;
    }
    if (c->valid && !back_push(b, c)) {
        c->valid = 0;
        c->err = KV_ENOMEM;
        return;
    }
    b->pos = b->n ? b->n - 1 : 0;
}

void kv_blockc_seek_before(kv_blockc *c, const void *key, size_t klen)
{
    int64_t r = c->cmp ? restart_below(c, key, klen, 1) : restart_below(c, key, klen, 0);
    if (c->err || r < 0) {
        c->valid = 0;
        return;
    }
    last_from(c, (uint32_t)r, key, klen, 1);
}

void kv_blockc_last(kv_blockc *c)
{
    if (c->nrestarts == 0 || c->entries_end == 0) {
        c->valid = 0;
        return;
    }
    last_from(c, c->nrestarts - 1, NULL, 0, 0);
}
