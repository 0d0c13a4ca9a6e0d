/* block.c - building and decoding prefix-compressed blocks. */
#include "block.h"

#include <stdlib.h>
#include <string.h>

#include "coding.h"

int kv_key_cmp(const void *a, size_t alen, const void *b, size_t blen)
{
    size_t n = alen < blen ? alen : blen;
    int c = n ? memcmp(a, b, n) : 0;
    if (c)
        return c;
    return alen < blen ? -1 : alen > blen;
}

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

int kv_blockc_init(kv_blockc *c, const uint8_t *data, size_t len)
{
    memset(c, 0, sizeof *c);
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

void kv_blockc_free(kv_blockc *c)
{
    free(c->key);
    c->key = NULL;
    c->kcap = 0;
    c->valid = 0;
}

/* Decodes the entry at `off` into the cursor, given the previous key in
 * c->key[0, c->klen). Sets valid = 0 at the end, err on damage. */
static void decode_at(kv_blockc *c, size_t off)
{
    c->valid = 0;
    if (c->err || off >= c->entries_end)
        return;
    const uint8_t *p = c->data + off, *end = c->data + c->entries_end;
    uint64_t shared, unshared, vlen;
    if (!kv_get_varint(&p, end, &shared) || !kv_get_varint(&p, end, &unshared) ||
        !kv_get_varint(&p, end, &vlen) || shared > c->klen ||
        unshared > (uint64_t)(end - p) || vlen > (uint64_t)(end - p) - unshared) {
        c->err = KV_ECORRUPT;
        return;
    }
    size_t klen = (size_t)(shared + unshared);
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

void kv_blockc_first(kv_blockc *c)
{
    c->klen = 0;
    decode_at(c, 0);
}

void kv_blockc_next(kv_blockc *c)
{
    if (c->valid)
        decode_at(c, c->next);
}

void kv_blockc_seek(kv_blockc *c, const void *key, size_t klen)
{
    /* The last restart whose key is < key; restart entries have shared = 0. */
    uint32_t lo = 0, hi = c->nrestarts;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        c->klen = 0;
        decode_at(c, kv_get32(c->restarts + 4 * mid));
        if (c->err)
            return;
        if (!c->valid || kv_key_cmp(c->key, c->klen, key, klen) >= 0)
            hi = mid;
        else
            lo = mid;
    }
    c->klen = 0;
    decode_at(c, kv_get32(c->restarts + 4 * lo));
    while (c->valid && kv_key_cmp(c->key, c->klen, key, klen) < 0)
        kv_blockc_next(c);
}
