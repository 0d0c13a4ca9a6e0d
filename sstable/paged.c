/* paged.c - a table's index and filter, kept in memory or paged through
 * the block cache (kv_options.table_memory_budget: kv/tablemem.c chooses
 * which; internal.h, "table memory budget", says what each call does).
 *
 * Why a switch is safe while readers use the table. A use of a pageable
 * reader's kept index or filter (reader.h, kv_sst_index_get and
 * kv_sst_filter_get) adds one to `uses` in its thread's stripe, then
 * loads the pointer, both sequentially consistent, and subtracts the one
 * again (release, in the same stripe, from whatever thread ends the use)
 * once it is done with what it read. A switch to paged stores NULL
 * (sequentially consistent), keeps the old one on r->retired, and frees
 * it only when a later sum of every stripe's `uses` (sequentially
 * consistent loads) is 0. A use that read the old pointer added its one
 * before that load, and the load came before the store of NULL (it did
 * not see it): so its add comes before the sum's loads, which see it
 * until its subtract, whose release orders the use's last read before
 * the free. A use that adds later reads NULL (or a newer pointer) and
 * goes to the cache. No stripe ever goes below 0 (a use subtracts in the
 * stripe it added to), so a sum of 0 means none. A retired one whose uses
 * outlast the switch (an iterator holds its table's index while it
 * lives) is freed by a later keep or reclaim, or when the reader closes.
 * A switch to kept stores a fresh decoded copy; the paged copy in the
 * cache stays there until evicted, and uses holding it keep it alive by
 * their handles, as data blocks are kept.
 *
 * A reader that is not pageable never changes either pointer after open:
 * its uses read them plainly and count nothing. */
#define _POSIX_C_SOURCE 200809L
#include <kv/sstable.h>

#include <stdatomic.h>
#include <stdlib.h>

#include "cache.h"
#include "reader.h"
#include "util/tally.h"

/* Paged out, not yet freed: an index or a filter (either may be NULL). */
struct sst_retired {
    struct sst_retired *next;
    struct sst_index *ix;
    kv_bloom *f;
    uint64_t bytes;
};

void kv_sst_reader_pageable(kv_sst_reader *r, kv_sst_page_sink *sink)
{
    if (!r)
        return;
    r->pageable = 1;
    r->sink = sink;
}

static void count(_Atomic uint64_t *c)
{
    if (c)
        atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

/* r's kept filter (filter) or index; NULL: paged (or no filter). */
static void *load_kept(kv_sst_reader *r, int filter, memory_order mo)
{
    return filter ? (void *)atomic_load_explicit(&r->filter, mo)
                  : (void *)atomic_load_explicit(&r->ix, mo);
}

static void store_kept(kv_sst_reader *r, int filter, void *o)
{
    if (filter)
        atomic_store_explicit(&r->filter, o, memory_order_seq_cst);
    else
        atomic_store_explicit(&r->ix, o, memory_order_seq_cst);
}

/* Adds a use in this thread's stripe and loads the kept one: non-NULL,
 * held (u->slot) until kv_sst_use_put; NULL, nothing held. */
static void *use_kept(kv_sst_reader *r, int filter, struct sst_use *u)
{
    unsigned s = kv_tally_slot();
    atomic_fetch_add_explicit(&r->tally[s].uses, 1, memory_order_seq_cst);
    void *kept = load_kept(r, filter, memory_order_seq_cst);
    if (kept) {
        u->slot = (int)s;
        return kept;
    }
    atomic_fetch_sub_explicit(&r->tally[s].uses, 1, memory_order_release);
    return NULL;
}

void kv_sst_use_put_slow(kv_sst_reader *r, struct sst_use *u)
{
    if (u->slot >= 0)
        atomic_fetch_sub_explicit(&r->tally[u->slot].uses, 1, memory_order_release);
    if (u->h)
        kv_cache_release(r->cache, u->h);
    u->slot = -1;
    u->h = NULL;
}

/* The index or filter block's payload, read from the file under a pin,
 * handed to decode (which copies what it keeps). */
static int read_meta(kv_sst_reader *r, uint64_t off, uint64_t size,
                     int (*decode)(kv_sst_reader *, const uint8_t *, size_t, uint64_t, void **),
                     void **out)
{
    *out = NULL;
    int pinned = kv_sst_pin(r);
    if (pinned < 0)
        return pinned;
    const uint8_t *data;
    uint8_t *owned = NULL;
    size_t len = 0;
    uint64_t dev = 0;
    int rc = kv_sst_read_meta_block(r, off, size, &data, &len, &owned, &dev);
    if (rc == KV_OK)
        rc = decode(r, data, len, off, out);
    free(owned);
    if (pinned)
        kv_sst_unpin(r);
    return rc;
}

static int decode_index(kv_sst_reader *r, const uint8_t *raw, size_t len, uint64_t at, void **out)
{
    struct sst_index *ix = NULL;
    size_t n = 0;
    int rc = kv_sst_parse_index(r, raw, len, at, &ix, &n);
    if (rc == KV_OK && n != r->nindex) { /* the file never changes: damage */
        kv_sst_index_free(ix);
        return kv_sst_fail(KV_ECORRUPT, r->path, at, "index changed since open");
    }
    *out = ix;
    return rc;
}

static int decode_filter(kv_sst_reader *r, const uint8_t *raw, size_t len, uint64_t at, void **out)
{
    kv_bloom *f = NULL;
    int rc = kv_bloom_decode(raw, len, &f);
    if (rc == KV_ECORRUPT || rc == KV_EINVAL)
        return kv_sst_fail(KV_ECORRUPT, r->path, at, "bad filter block");
    *out = f;
    return rc;
}

static void free_index(void *ix)
{
    kv_sst_index_free(ix);
}

static void free_filter(void *f)
{
    kv_bloom_free(f);
}

/* A filter's memory, as kv_stats' filter_bytes counts it: its bits. */
static uint64_t filter_bytes(const kv_sst_reader *r)
{
    return r->props.filter_bytes;
}

/* A paged index or filter for one use: from the block cache, or read,
 * decoded and put there (counted in the sink). */
static int use_paged(kv_sst_reader *r, int filter, void **obj, struct sst_use *u)
{
    uint64_t off = filter ? r->foff : r->ioff;
    kv_cache_handle *h = kv_cache_lookup(r->cache, r->id, off);
    if (!h) {
        void *o;
        int rc = filter ? read_meta(r, off, r->flen, decode_filter, &o)
                        : read_meta(r, off, r->ilen, decode_index, &o);
        if (rc != KV_OK)
            return rc;
        size_t bytes = filter ? filter_bytes(r) : ((struct sst_index *)o)->bytes;
        h = kv_cache_insert_obj(r->cache, r->id, off, o, bytes, filter ? free_filter : free_index);
        if (!h)
            return KV_ENOMEM;
        if (r->sink)
            count(filter ? &r->sink->filter_reads : &r->sink->index_reads);
    }
    size_t size;
    *obj = (void *)kv_cache_data(h, &size);
    u->h = h;
    return KV_OK;
}

int kv_sst_index_get_slow(kv_sst_reader *r, struct ixref *ref)
{
    void *ix = use_kept(r, 0, &ref->u);
    int rc = ix ? KV_OK : use_paged(r, 0, &ix, &ref->u);
    ref->ix = ix;
    return rc;
}

int kv_sst_filter_get_slow(kv_sst_reader *r, kv_bloom **f, struct sst_use *u)
{
    void *kept = use_kept(r, 1, u);
    int rc = kept ? KV_OK : use_paged(r, 1, &kept, u);
    *f = kept;
    return rc;
}

static uint64_t uses_now(const kv_sst_reader *r)
{
    uint64_t n = 0;
    for (size_t i = 0; i <= KV_TALLY_STRIPES; i++)
        n += atomic_load_explicit(&r->tally[i].uses, memory_order_seq_cst);
    return n;
}

void kv_sst_reader_free_retired(kv_sst_reader *r)
{
    while (r->retired) {
        struct sst_retired *d = r->retired;
        r->retired = d->next;
        kv_sst_index_free(d->ix);
        kv_bloom_free(d->f);
        atomic_fetch_sub_explicit(&r->retired_bytes, d->bytes, memory_order_relaxed);
        free(d);
    }
}

void kv_sst_reader_reclaim(kv_sst_reader *r)
{
    if (r && r->retired && uses_now(r) == 0)
        kv_sst_reader_free_retired(r);
}

/* One of r's two: kept (a fresh copy read from the file) or paged (the
 * kept one retired). Only this caller stores *p. */
static int switch_one(kv_sst_reader *r, int filter, int keep)
{
    void *now = load_kept(r, filter, memory_order_relaxed);
    if (keep && !now) {
        void *o;
        int rc = filter ? read_meta(r, r->foff, r->flen, decode_filter, &o)
                        : read_meta(r, r->ioff, r->ilen, decode_index, &o);
        if (rc == KV_OK)
            store_kept(r, filter, o);
        return rc;
    }
    if (!keep && now) {
        struct sst_retired *d = calloc(1, sizeof *d);
        if (!d)
            return KV_ENOMEM; /* stays kept */
        d->bytes = filter ? filter_bytes(r) : ((struct sst_index *)now)->bytes;
        if (filter)
            d->f = now;
        else
            d->ix = now;
        store_kept(r, filter, NULL);
        d->next = r->retired;
        r->retired = d;
        atomic_fetch_add_explicit(&r->retired_bytes, d->bytes, memory_order_relaxed);
    }
    return KV_OK;
}

int kv_sst_reader_keep(kv_sst_reader *r, int keep_index, int keep_filter)
{
    if (!r || !r->pageable)
        return KV_EINVAL;
    int rc = switch_one(r, 0, keep_index);
    if (r->has_filter) {
        int rc2 = switch_one(r, 1, keep_filter);
        if (rc == KV_OK)
            rc = rc2;
    }
    kv_sst_reader_reclaim(r);
    return rc;
}

void kv_sst_reader_memory(const kv_sst_reader *r, kv_sst_table_memory *out)
{
    if (!out)
        return;
    *out = (kv_sst_table_memory){0};
    if (!r)
        return;
    /* Only the pointers are read (never what they point to): no use needed. */
    int ix = atomic_load_explicit(&r->ix, memory_order_relaxed) != NULL;
    int f = r->has_filter && atomic_load_explicit(&r->filter, memory_order_relaxed) != NULL;
    out->index = r->props.index_bytes;
    out->filter = r->has_filter ? filter_bytes(r) : 0;
    out->index_paged = !ix;
    out->filter_paged = r->has_filter && !f;
    out->kept = (ix ? out->index : 0) + (f ? out->filter : 0) +
                atomic_load_explicit(&r->retired_bytes, memory_order_relaxed);
}
