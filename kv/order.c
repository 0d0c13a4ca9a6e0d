/* order.c - the table order under a comparator, and a sort that passes one
 * (order.h). */
#include "order.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/ikey.h"

/* An internal key split at its terminator: the user key (in the key's own
 * bytes when it holds no 0x00, else unescaped into a buffer), then the
 * tail: the terminator and what follows it. */
struct split {
    const uint8_t *user;
    size_t ulen;
    const uint8_t *tail;
    size_t tlen;
    uint8_t *heap; /* a buffer of its own, for a long key with 0x00 bytes; freed by the caller */
};

/* 1 when k[0, klen) is an escaped user key and then one of the tails the
 * store makes: the terminator 0x00 0x01 and a trailer (an entry, or a seek
 * for one); 0x00 0x01 alone (a bare prefix, which sorts before every entry
 * of its user key); 0x00 0x02 alone (a compaction's bound, after every
 * entry of its user key and before any larger one). Else 0 (s->heap stays
 * NULL). An escaped key longer than `cap` bytes with a 0x00 in it is
 * unescaped into a new buffer; 0 when that cannot be had. Under bytewise
 * order these tails order themselves; here too, compared bytewise once the
 * user keys are equal. */
static int split(const uint8_t *k, size_t klen, uint8_t *buf, size_t cap, struct split *s)
{
    s->heap = NULL;
    const uint8_t *z = klen ? memchr(k, 0, klen) : NULL;
    if (!z || (size_t)(z - k) + 1 >= klen)
        return 0;
    size_t at = (size_t)(z - k);
    if (z[1] != 0xFF) { /* no 0x00 in the user key: it is the key's first bytes */
        s->user = k;
        s->ulen = at;
    } else {
        uint8_t *out = buf;
        if (klen > cap && !(out = s->heap = malloc(klen)))
            return 0;
        size_t n = 0, i = 0;
        for (;;) {
            if (i + 1 >= klen)
                goto bad;
            if (k[i] != 0x00) {
                out[n++] = k[i++];
                continue;
            }
            if (k[i + 1] != 0xFF)
                break;
            out[n++] = 0x00;
            i += 2;
        }
        at = i;
        s->user = out;
        s->ulen = n;
    }
    s->tail = k + at;
    s->tlen = klen - at;
    if (!(s->tail[1] == 0x01 && (s->tlen == 2 || s->tlen == 2 + KV_IKEY_TRAILER)) &&
        !(s->tail[1] == 0x02 && s->tlen == 2))
        goto bad;
    return 1;
bad:
    free(s->heap);
    s->heap = NULL;
    return 0;
}

int kv_ikey_compare(void *ctx, const void *a, size_t alen, const void *b, size_t blen)
{
    const kv_comparator *cmp = ctx;
    uint8_t abuf[256], bbuf[256];
    struct split x, y;
    if (!split(a, alen, abuf, sizeof abuf, &x))
        return kv_key_cmp(a, alen, b, blen);
    if (!split(b, blen, bbuf, sizeof bbuf, &y)) {
        free(x.heap);
        return kv_key_cmp(a, alen, b, blen);
    }
    int c = cmp->compare(cmp->ctx, x.user, x.ulen, y.user, y.ulen);
    if (c == 0) /* the tails: a bare prefix, then the entries newest first, then a bound */
        c = kv_key_cmp(x.tail, x.tlen, y.tail, y.tlen);
    free(x.heap);
    free(y.heap);
    return c;
}

void kv_ikey_comparator_init(kv_comparator *out, const kv_comparator *cmp)
{
    out->name = "kv.internal";
    out->compare = kv_ikey_compare;
    out->ctx = (void *)cmp;
}

static void swap_bytes(uint8_t *a, uint8_t *b, size_t size)
{
    while (size--) {
        uint8_t t = *a;
        *a++ = *b;
        *b++ = t;
    }
}

static void sift(uint8_t *base, size_t i, size_t n, size_t size,
                 int (*compare)(const void *, const void *, void *), void *ctx)
{
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        if (l < n && compare(base + l * size, base + m * size, ctx) > 0)
            m = l;
        if (l + 1 < n && compare(base + (l + 1) * size, base + m * size, ctx) > 0)
            m = l + 1;
        if (m == i)
            return;
        swap_bytes(base + i * size, base + m * size, size);
        i = m;
    }
}

void kv_order_sort(void *base, size_t n, size_t size,
                   int (*compare)(const void *a, const void *b, void *ctx), void *ctx)
{
    uint8_t *p = base;
    if (n < 2)
        return;
    for (size_t i = n / 2; i-- > 0;)
        sift(p, i, n, size, compare, ctx);
    for (size_t end = n - 1; end > 0; end--) {
        swap_bytes(p, p + end * size, size);
        sift(p, 0, end, size, compare, ctx);
    }
}
