/* table_iter.c - the table iterator: walks a table's data blocks in key
 * order, forward and backward, checking as it goes that every key lies
 * where the index says it does. Layout: doc/sstable_format.md. */
#define _POSIX_C_SOURCE 200809L
#include <kv/sstable.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "block.h"
#include "format.h"
#include "reader.h"
#include "util/keycmp.h"

struct kv_sst_iter {
    kv_sst_reader *r;
    /* The table's index, held from the first seek (ix_held) while the
     * iterator lives: the kept one, or a paged one's cache handle
     * (reader.h, kv_sst_index_get). An iterator made and never sought
     * (a merge makes one per table) reads no paged index. */
    struct ixref ix;
    int ix_held;
    size_t block;         /* index entry of the current block */
    struct blockref b;    /* its data (b.data NULL: none loaded) */
    kv_blockc c;
    int status;
    struct kv_sst_readahead ra; /* a table read with O_DIRECT: the blocks around */
    uint64_t adv_lo, adv_hi;    /* a mapped table: the range last advised (WILLNEED) */
};

int kv_sst_iter_new(kv_sst_reader *r, kv_sst_iter **out)
{
    if (!out)
        return KV_EINVAL;
    *out = NULL;
    if (!r)
        return KV_EINVAL;
    kv_sst_iter *it = calloc(1, sizeof *it);
    if (!it)
        return KV_ENOMEM;
    it->r = r;
    it->block = r->nindex;
    *out = it;
    return KV_OK;
}

static void drop_block(kv_sst_iter *it)
{
    kv_blockc_free(&it->c);
    kv_sst_release(it->r, &it->b);
    memset(&it->c, 0, sizeof it->c);
}

void kv_sst_iter_free(kv_sst_iter *it)
{
    if (!it)
        return;
    drop_block(it);
    kv_sst_readahead_free(&it->ra);
    if (it->ix_held)
        kv_sst_use_put(it->r, &it->ix.u);
    free(it);
}

/* Loads block i; the cursor is left unpositioned. 0 on failure. */
static int load_block(kv_sst_iter *it, size_t i)
{
    size_t was = it->block; /* r->nindex: none */
    drop_block(it);
    it->block = i;
    if (i >= it->r->nindex)
        return 0;
    int hit;
    uint64_t dev; /* counted in the reader's counters; an iterator has no probe */
    int rc = kv_sst_data_block_ra(it->r, it->ix.ix, i, 1, &it->b, &hit, &dev, &it->ra);
    /* A scan stepping into the next block (or the one before) read in
     * place in the mapping (the pin holds the file open): when it lies
     * past the range advised last, ask for the next 256 KiB in the
     * direction of travel, so that a scan of a table the page cache lacks
     * waits for one read-ahead, not a fault per page. A seek asks for
     * nothing: a system call per random seek would cost more than its
     * block. */
    const struct index_entry *e = &it->ix.ix->index[i];
    int step = was < it->r->nindex && (i == was + 1 || i + 1 == was);
    if (rc == KV_OK && step && it->b.pinned && (e->off < it->adv_lo || e->off >= it->adv_hi)) {
        int back = it->adv_hi && e->off < it->adv_lo;
        uint64_t end = e->off + e->size + KV_SST_BLOCK_TRAILER;
        it->adv_lo = back ? (end > KV_SST_READAHEAD ? end - KV_SST_READAHEAD : 0) : e->off;
        it->adv_hi = back ? end : e->off + KV_SST_READAHEAD;
        kv_file_willneed(it->r->file, it->adv_lo, it->adv_hi - it->adv_lo);
    }
    if (rc == KV_OK) {
        rc = kv_blockc_init(&it->c, it->b.data, it->b.len, it->r->cmp);
        if (rc != KV_OK)
            kv_sst_fail(rc, it->r->path, it->ix.ix->index[i].off, "bad data block");
    }
    if (rc != KV_OK) {
        it->status = rc;
        drop_block(it);
        it->block = it->r->nindex;
        return 0;
    }
    return 1;
}

/* After the cursor moved: step to later blocks at a block's end; check that
 * every key is where the index says it is. */
static void settle(kv_sst_iter *it)
{
    for (;;) {
        if (it->c.err) {
            it->status = kv_sst_fail(it->c.err, it->r->path, it->ix.ix->index[it->block].off,
                                     "bad data block entry");
            drop_block(it);
            it->block = it->r->nindex;
            return;
        }
        if (it->c.valid) {
            const struct index_entry *e = &it->ix.ix->index[it->block];
            if (kv_sst_cmp(it->r->cmp, it->c.key, it->c.klen, e->key, e->klen) > 0) {
                it->status =
                    kv_sst_fail(KV_ECORRUPT, it->r->path, e->off, "key beyond its index entry");
                drop_block(it);
                it->block = it->r->nindex;
            }
            return;
        }
        if (!load_block(it, it->block + 1))
            return;
        kv_blockc_first(&it->c);
        /* Within a block the cursor checks the order; across blocks, the
         * first key must be past the previous block's index key. */
        const struct index_entry *p = &it->ix.ix->index[it->block - 1];
        if (it->c.valid && kv_sst_cmp(it->r->cmp, it->c.key, it->c.klen, p->key, p->klen) <= 0) {
            it->status = kv_sst_fail(KV_ECORRUPT, it->r->path, it->ix.ix->index[it->block].off,
                                     "keys out of order");
            drop_block(it);
            it->block = it->r->nindex;
            return;
        }
    }
}

/* After a backward positioning in block i: a damaged block stops the
 * iterator; no entry means the last entry of an earlier block. */
static void settle_back(kv_sst_iter *it)
{
    while (!it->c.err && !it->c.valid && it->block > 0) {
        if (!load_block(it, it->block - 1))
            return;
        kv_blockc_last(&it->c);
    }
    if (!it->c.err && !it->c.valid) { /* nothing before: not valid */
        drop_block(it);
        it->block = it->r->nindex;
        return;
    }
    settle(it);
}

/* 1 when the iterator holds the table's index (taken now if need be);
 * 0, with the status set, when a paged index cannot be read. */
static int held_index(kv_sst_iter *it)
{
    if (it->ix_held)
        return 1;
    int rc = kv_sst_index_get(it->r, &it->ix);
    if (rc != KV_OK) {
        it->status = rc;
        return 0;
    }
    it->ix_held = 1;
    return 1;
}

void kv_sst_iter_seek_last(kv_sst_iter *it)
{
    if (!it || it->status || it->r->nindex == 0 || !held_index(it))
        return;
    if (load_block(it, it->r->nindex - 1)) {
        kv_blockc_last(&it->c);
        settle_back(it);
    }
}

void kv_sst_iter_seek_before(kv_sst_iter *it, const void *key, size_t klen)
{
    if (!it || it->status || (klen && !key) || !held_index(it))
        return;
    size_t i = kv_sst_index_lower_bound(it->r, it->ix.ix, key, klen);
    if (i == it->r->nindex) { /* every key is below */
        kv_sst_iter_seek_last(it);
        return;
    }
    if (load_block(it, i)) {
        kv_blockc_seek_before(&it->c, key, klen);
        settle_back(it);
    }
}

/* One step back: the entry before in the same block (kv_blockc_prev), else
 * the last entry of an earlier block. A search by key (seek_before) would
 * compare the key with every entry from the restart point on: with long
 * keys that share long prefixes, a backward scan of a block whose restart
 * interval is long then took time cubic in its entries; this costs one
 * pass over part of one interval, without comparing keys. The keys must
 * still decrease. */
void kv_sst_iter_prev(kv_sst_iter *it)
{
    if (!kv_sst_iter_valid(it))
        return;
    uint8_t small[256];
    size_t klen = it->c.klen;
    uint8_t *k = klen <= sizeof small ? small : malloc(klen);
    if (!k) {
        it->status = KV_ENOMEM;
        drop_block(it);
        return;
    }
    memcpy(k, it->c.key, klen);
    kv_blockc_prev(&it->c);
    settle_back(it);
    if (kv_sst_iter_valid(it) && kv_sst_cmp(it->r->cmp, it->c.key, it->c.klen, k, klen) >= 0) {
        it->status = kv_sst_fail(KV_ECORRUPT, it->r->path, it->ix.ix->index[it->block].off,
                                 "keys out of order");
        drop_block(it);
        it->block = it->r->nindex;
    }
    if (k != small)
        free(k);
}

void kv_sst_iter_seek_first(kv_sst_iter *it)
{
    if (!it || it->status || !held_index(it))
        return;
    if (load_block(it, 0)) {
        kv_blockc_first(&it->c);
        settle(it);
    }
}

void kv_sst_iter_seek(kv_sst_iter *it, const void *key, size_t klen)
{
    if (!it || it->status || (klen && !key) || !held_index(it))
        return;
    if (load_block(it, kv_sst_index_lower_bound(it->r, it->ix.ix, key, klen))) {
        kv_blockc_seek(&it->c, key, klen);
        settle(it);
    }
}

void kv_sst_iter_next(kv_sst_iter *it)
{
    if (!kv_sst_iter_valid(it))
        return;
    kv_blockc_next(&it->c); /* checks that the key increased */
    settle(it);
}

int kv_sst_iter_valid(const kv_sst_iter *it)
{
    return it && !it->status && it->b.data && it->c.valid;
}

const void *kv_sst_iter_key(const kv_sst_iter *it, size_t *klen)
{
    if (!kv_sst_iter_valid(it)) {
        if (klen)
            *klen = 0;
        return NULL;
    }
    if (klen)
        *klen = it->c.klen;
    return it->c.key;
}

const void *kv_sst_iter_value(const kv_sst_iter *it, size_t *vlen)
{
    if (!kv_sst_iter_valid(it)) {
        if (vlen)
            *vlen = 0;
        return NULL;
    }
    if (vlen)
        *vlen = it->c.vlen;
    return it->c.val;
}

int kv_sst_iter_status(const kv_sst_iter *it)
{
    return it ? it->status : KV_EINVAL;
}
