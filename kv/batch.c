/* batch.c - write batches: building them, and reading them back from the
 * WAL without trusting a byte. Encoding: batch.h and doc/wal_format.md. */
#include "batch.h"

#include <stdlib.h>
#include <string.h>

#include "util/coding.h"
#include "util/error.h"
#include <kv/kv.h>
#include "memtable.h" /* KV_KIND_* */

/* ---- building ------------------------------------------------------------------ */

int kv_batch_new(kv_batch **out)
{
    if (!out)
        return kv_error_set(KV_EINVAL, "kv_batch_new: out is NULL");
    *out = NULL;
    kv_batch *b = calloc(1, sizeof *b);
    if (!b)
        return kv_error_set(KV_ENOMEM, "kv_batch_new: out of memory");
    b->cap = 256;
    b->rep = calloc(1, b->cap);
    if (!b->rep) {
        free(b);
        return kv_error_set(KV_ENOMEM, "kv_batch_new: out of memory");
    }
    b->len = KV_BATCH_HEADER;
    *out = b;
    return KV_OK;
}

static int add_entry(kv_batch *b, int kind, const void *key, size_t klen, const void *val,
                     size_t vlen)
{
    const char *call = kind == KV_KIND_VALUE       ? "kv_batch_put"
                       : kind == KV_KIND_MERGE     ? "kv_batch_merge"
                       : kind == KV_KIND_RANGE_DEL ? "kv_batch_delete_range"
                                                   : "kv_batch_delete";
    if (!b)
        return kv_error_set(KV_EINVAL, "%s: the batch is NULL", call);
    if (klen && !key)
        return kv_error_set(KV_EINVAL, "%s: NULL key with length %zu", call, klen);
    if (vlen && !val)
        return kv_error_set(KV_EINVAL, "%s: NULL value with length %zu", call, vlen);
    if (klen > KV_MAX_KEY_SIZE)
        return kv_error_set(KV_EINVAL, "%s: key of %zu bytes, over KV_MAX_KEY_SIZE (%zu)", call,
                            klen, KV_MAX_KEY_SIZE);
    if (vlen > KV_MAX_VALUE_SIZE)
        return kv_error_set(KV_EINVAL, "%s: value of %zu bytes, over KV_MAX_VALUE_SIZE (%zu)",
                            call, vlen, KV_MAX_VALUE_SIZE);
    if (kind == KV_KIND_RANGE_DEL && vlen > KV_MAX_KEY_SIZE)
        return kv_error_set(KV_EINVAL, "%s: end key of %zu bytes, over KV_MAX_KEY_SIZE (%zu)", call,
                            vlen, KV_MAX_KEY_SIZE);
    if (b->count == UINT32_MAX)
        return kv_error_set(KV_EINVAL, "%s: the batch holds %u entries already", call,
                            (unsigned)UINT32_MAX);
    size_t need = 1 + 10 + klen + (kv_batch_kind_has_value(kind) ? 10 + vlen : 0);
    if (need > KV_MAX_BATCH_SIZE - b->len)
        return kv_error_set(KV_EINVAL, "%s: the batch would pass KV_MAX_BATCH_SIZE (%zu bytes)",
                            call, KV_MAX_BATCH_SIZE);
    if (b->len + need > b->cap) {
        size_t ncap = b->cap;
        while (ncap < b->len + need)
            ncap *= 2;
        uint8_t *r = realloc(b->rep, ncap);
        if (!r)
            return kv_error_set(KV_ENOMEM, "%s: out of memory", call);
        b->rep = r;
        b->cap = ncap;
    }
    b->len += kv_batch_put_entry(b->rep + b->len, kind, key, klen, val, vlen);
    b->count++;
    b->kinds |= kv_batch_entry_kinds(kind, klen, vlen);
    b->user_bytes += klen + vlen;
    /* The count field stays current, so rep is always a whole batch. */
    kv_put32(b->rep + 8, b->count);
    return KV_OK;
}

int kv_batch_put(kv_batch *b, const void *key, size_t klen, const void *val, size_t vlen)
{
    return add_entry(b, KV_KIND_VALUE, key, klen, val, vlen);
}

int kv_batch_delete(kv_batch *b, const void *key, size_t klen)
{
    return add_entry(b, KV_KIND_TOMBSTONE, key, klen, NULL, 0);
}

int kv_batch_merge(kv_batch *b, const void *key, size_t klen, const void *operand, size_t olen)
{
    return add_entry(b, KV_KIND_MERGE, key, klen, operand, olen);
}

int kv_batch_delete_range(kv_batch *b, const void *begin, size_t begin_len, const void *end,
                          size_t end_len)
{
    /* Bytewise here (a batch knows no comparator); kv_write checks again
     * under the database's. */
    if (b && (!begin_len || begin) && (!end_len || end)) {
        size_t n = begin_len < end_len ? begin_len : end_len;
        int d = n ? memcmp(begin, end, n) : 0;
        if (d > 0 || (d == 0 && begin_len > end_len))
            return kv_error_set(KV_EINVAL, "kv_batch_delete_range: end is before begin");
    }
    return add_entry(b, KV_KIND_RANGE_DEL, begin, begin_len, end, end_len);
}

void kv_batch_clear(kv_batch *b)
{
    if (!b)
        return;
    memset(b->rep, 0, KV_BATCH_HEADER);
    b->len = KV_BATCH_HEADER;
    b->count = 0;
    b->kinds = 0;
    b->user_bytes = 0;
}

uint32_t kv_batch_count(const kv_batch *b)
{
    return b ? b->count : 0;
}

void kv_batch_free(kv_batch *b)
{
    if (!b)
        return;
    free(b->rep);
    free(b);
}

void kv_batch_set_seq(uint8_t *rep, uint64_t seq)
{
    kv_put64(rep, seq);
}

/* ---- reading --------------------------------------------------------------------- */

/* One pass over the entries; with fn NULL it only checks the encoding. */
static int walk(const uint8_t *rep, size_t len,
                int (*fn)(void *, uint64_t, int, const uint8_t *, size_t, const uint8_t *, size_t),
                void *ctx)
{
    if (len < KV_BATCH_HEADER)
        return KV_ECORRUPT;
    uint64_t seq = kv_get64(rep);
    uint32_t count = (uint32_t)rep[8] | (uint32_t)rep[9] << 8 | (uint32_t)rep[10] << 16 |
                     (uint32_t)rep[11] << 24;
    const uint8_t *p = rep + KV_BATCH_HEADER, *end = rep + len;
    for (uint32_t i = 0; i < count; i++) {
        if (p >= end)
            return KV_ECORRUPT;
        int kind = *p++;
        uint64_t klen, vlen = 0;
        if (kind == KV_KIND_BLOB || kind > KV_KIND_TMERGE || !kv_get_varint(&p, end, &klen) ||
            klen > KV_MAX_KEY_SIZE || klen > (uint64_t)(end - p))
            return KV_ECORRUPT;
        const uint8_t *key = p, *val = p;
        p += klen;
        if (kv_batch_kind_has_value(kind)) {
            uint64_t most = kind == KV_KIND_RANGE_DEL ? KV_MAX_KEY_SIZE
                            : kind == KV_KIND_TVALUE || kind == KV_KIND_TMERGE
                                ? KV_MAX_VALUE_SIZE + KV_TTL_STAMP
                                : KV_MAX_VALUE_SIZE;
            if (!kv_get_varint(&p, end, &vlen) || vlen > most || vlen > (uint64_t)(end - p) ||
                ((kind == KV_KIND_TVALUE || kind == KV_KIND_TMERGE) && vlen < KV_TTL_STAMP))
                return KV_ECORRUPT;
            val = p;
            p += vlen;
        }
        if (fn) {
            int rc = fn(ctx, seq + i, kind, key, (size_t)klen, val, (size_t)vlen);
            if (rc != 0)
                return rc;
        }
    }
    return p == end ? KV_OK : KV_ECORRUPT;
}

int kv_batch_iterate(const uint8_t *rep, size_t len,
                     int (*fn)(void *ctx, uint64_t seq, int kind, const uint8_t *key,
                               size_t klen, const uint8_t *val, size_t vlen),
                     void *ctx)
{
    if (!rep || !fn)
        return KV_EINVAL;
    int rc = walk(rep, len, NULL, NULL); /* all of it is sound before any is applied */
    return rc == KV_OK ? walk(rep, len, fn, ctx) : rc;
}

/* kv_batch_foreach's callbacks, and the walk's callback that picks one. */
struct foreach_ctx {
    void *ctx;
    int (*put)(void *ctx, const void *key, size_t klen, const void *val, size_t vlen);
    int (*del)(void *ctx, const void *key, size_t klen);
};

static int foreach_entry(void *arg, uint64_t seq, int kind, const uint8_t *key, size_t klen,
                         const uint8_t *val, size_t vlen)
{
    struct foreach_ctx *f = arg;
    (void)seq;
    if (kind == KV_KIND_TVALUE) /* never in a kv_batch: there for completeness */
        return f->put(f->ctx, key, klen, val, vlen - KV_TTL_STAMP);
    if (kind != KV_KIND_VALUE && kind != KV_KIND_TOMBSTONE)
        return 0; /* range deletes and merge operands: passed over (kv.h) */
    return kind == KV_KIND_VALUE ? f->put(f->ctx, key, klen, val, vlen)
                                 : f->del(f->ctx, key, klen);
}

int kv_batch_foreach(const kv_batch *b, void *ctx,
                     int (*put)(void *ctx, const void *key, size_t klen, const void *val,
                                size_t vlen),
                     int (*del)(void *ctx, const void *key, size_t klen))
{
    if (!b || !put || !del)
        return kv_error_set(KV_EINVAL, "kv_batch_foreach: %s is NULL",
                            !b ? "the batch" : !put ? "put" : "del");
    struct foreach_ctx f = {ctx, put, del};
    /* The batch was built by kv_batch_put and kv_batch_delete, so its
     * encoding is sound: the walk has nothing to check first. */
    return walk(b->rep, b->len, foreach_entry, &f);
}

size_t kv_batch_stamp(uint8_t *dst, const uint8_t *src, size_t len, uint32_t n, uint64_t now)
{
    const uint8_t *p = src, *end = src + len;
    uint8_t *q = dst;
    for (uint32_t i = 0; i < n && p < end; i++) {
        int kind = *p++;
        uint64_t klen = 0, vlen = 0;
        kv_get_varint(&p, end, &klen);
        const uint8_t *key = p;
        p += klen;
        const uint8_t *val = NULL;
        if (kv_batch_kind_has_value(kind)) {
            kv_get_varint(&p, end, &vlen);
            val = p;
            p += vlen;
        }
        if (kind != KV_KIND_VALUE && kind != KV_KIND_MERGE) {
            q += kv_batch_put_entry(q, kind, key, (size_t)klen, val, (size_t)vlen);
            continue;
        }
        *q++ = (uint8_t)(kind == KV_KIND_VALUE ? KV_KIND_TVALUE : KV_KIND_TMERGE);
        q += kv_put_varint(q, klen);
        memcpy(q, key, (size_t)klen);
        q += klen;
        q += kv_put_varint(q, vlen + KV_TTL_STAMP);
        if (vlen)
            memcpy(q, val, (size_t)vlen);
        q += vlen;
        kv_put64(q, now);
        q += KV_TTL_STAMP;
    }
    return (size_t)(q - dst);
}
