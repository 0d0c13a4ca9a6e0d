/* multi.c - lookups of many keys in one table at once: the filter asked
 * about all of them in one batch (kv_sst_seek_gate_many), then the index
 * searched and each data block read once for all the keys that land in it
 * (kv_sst_seek_gated_many). The store's kv_multi_get calls them table by
 * table; each key's answer, probe and counts are those of the single-key
 * lookup (reader.c), so a batch changes how fast the keys are answered,
 * never what is answered or counted. */
#include <kv/sstable.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "block.h"
#include "format.h"
#include "reader.h"
#include "util/keycmp.h"
#include "util/tally.h"

/* Hashes the gate hands kv_bloom_may_contain_batch at a time: enough for
 * its prefetching to run ahead, and a small array on the stack. */
#define GATE_CHUNK 64

/* Counts into this thread's stripe of r's counters (reader.h). */
#define TALLY(r, slot, field, n) kv_tally_add(&(r)->tally[slot].field, (slot), (n))

/* KV_EINVAL for a NULL reader, or NULL reqs or a NULL req with n > 0. */
static int bad_reqs(const kv_sst_reader *r, kv_sst_seek_req *const *reqs, size_t n)
{
    if (!r || (n && !reqs))
        return 1;
    for (size_t i = 0; i < n; i++)
        if (!reqs[i])
            return 1;
    return 0;
}

/* Clears q's results; 0, with rc KV_EINVAL, when its key cannot be
 * sought (kv_sst_seek_gate's and _gated's argument check). */
static int req_reset(kv_sst_seek_req *q)
{
    q->val = NULL;
    q->vlen = 0;
    q->suffix_len = 0;
    if ((q->klen && !q->key) || q->prefix_len > q->klen) {
        q->rc = KV_EINVAL;
        return 0;
    }
    return 1;
}

int kv_sst_seek_gate_many(kv_sst_reader *r, kv_sst_seek_req *const *reqs, size_t n)
{
    if (bad_reqs(r, reqs, n))
        return KV_EINVAL;
    unsigned slot = kv_tally_slot();
    uint64_t gets = 0, checks = 0, negatives = 0;
    /* The keys in range go to the filter a chunk at a time: their hashes
     * side by side, as the batch query takes them. */
    uint64_t hashes[GATE_CHUNK];
    kv_sst_seek_req *asked[GATE_CHUNK];
    uint8_t maybe[GATE_CHUNK];
    size_t m = 0;
    /* A paged filter that cannot be read gates nothing: the search reads
     * the blocks (and meets the error there, if it is the file's). */
    kv_bloom *f;
    struct sst_use fu;
    if (kv_sst_filter_get(r, &f, &fu) != KV_OK)
        f = NULL;
    for (size_t i = 0; i <= n; i++) {
        if (i < n) {
            kv_sst_seek_req *q = reqs[i];
            memset(&q->probe, 0, sizeof q->probe);
            q->hint_reader = NULL;
            if (!req_reset(q))
                continue;
            gets++;
            q->rc = q->in_range || kv_sst_range_may_hold(r, q->key, q->klen, q->prefix_len, 0) ? KV_OK : KV_NOTFOUND;
            if (q->rc != KV_OK || !f)
                continue;
            hashes[m] = q->filter_hash;
            asked[m++] = q;
            if (m < GATE_CHUNK)
                continue;
        }
        if (m)
            kv_bloom_may_contain_batch(f, hashes, m, maybe);
        for (size_t j = 0; j < m; j++) {
            asked[j]->probe.filter_checked = 1;
            if (!maybe[j]) {
                asked[j]->probe.filter_negative = 1;
                asked[j]->rc = KV_NOTFOUND;
                negatives++;
            }
        }
        checks += m;
        m = 0;
    }
    kv_sst_use_put(r, &fu);
    TALLY(r, slot, gets, gets);
    TALLY(r, slot, checks, checks);
    TALLY(r, slot, negatives, negatives);
    return KV_OK;
}

void kv_sst_seek_prefetch_many(kv_sst_reader *r, kv_sst_seek_req *const *reqs, size_t n,
                               int depth)
{
    if (!r || !reqs || !n)
        return;
    /* First every key's index entry (the lower bound asks for its line),
     * then, in a second pass, what the entries point to. A prefetch of a
     * paged index that cannot be read asks for nothing. */
    struct ixref ix;
    if (kv_sst_index_get(r, &ix) != KV_OK)
        return;
    for (size_t k = 0; depth == 0 && k < n; k++) {
        kv_sst_seek_req *q = reqs[k];
        if (!q || (q->klen && !q->key))
            continue;
        q->hint_reader = r;
        q->hint_block = kv_sst_index_lower_bound(r, ix.ix, q->key, q->klen);
    }
    /* The mapping is there only under a pin; the search that follows
     * would take one (and open the file again) too. */
    int pinned = kv_sst_pin(r);
    if (pinned < 0) {
        kv_sst_use_put(r, &ix.u);
        return; /* the search will meet the error and say it */
    }
    for (size_t k = 0; r->map && k < n; k++) {
        const kv_sst_seek_req *q = reqs[k];
        if (!q || q->hint_reader != r || q->hint_block >= r->nindex)
            continue;
        const struct index_entry *e = &ix.ix->index[q->hint_block];
        const uint8_t *block = r->map + e->off;
        if (depth == 0)
            kv_blockc_prefetch_end(block, (size_t)e->size);
        else if (block[e->size] == KV_COMPRESSION_NONE) /* the trailer's kind byte */
            kv_blockc_prefetch(block, (size_t)e->size);
    }
    if (pinned)
        kv_sst_unpin(r);
    kv_sst_use_put(r, &ix.u);
}

/* The data block that the keys searched one after the other share while
 * they land in it. */
struct held {
    const struct sst_index *ix; /* the table's index, held for the call */
    size_t i;          /* its index entry; r->nindex: none held */
    int rc;            /* of reading it (and of checking its restarts) */
    int in_cache;      /* it came from the block cache or went into it */
    uint64_t dev;      /* its read went to the device, asking it for this many bytes */
    struct blockref b; /* while rc is KV_OK */
    kv_blockc c;       /* its cursor, while rc is KV_OK */
    const kv_sst_seek_req *first; /* a key whose first entry >= lies in it */
};

static void held_drop(kv_sst_reader *r, struct held *h)
{
    if (h->i != r->nindex && h->rc == KV_OK) {
        kv_blockc_free(&h->c);
        kv_sst_release(r, &h->b);
    }
    h->i = r->nindex;
}

/* Makes block i the held one: reads it (counted by kv_sst_data_block as a
 * single lookup's read would be) and opens its cursor. */
static void held_read(kv_sst_reader *r, struct held *h, size_t i, kv_sst_seek_req *q)
{
    held_drop(r, h);
    int hit = 0;
    h->i = i;
    h->first = q;
    h->rc = kv_sst_data_block(r, h->ix, i, 1, &h->b, &hit, &h->dev);
    kv_sst_probe_block(&q->probe, hit, h->ix->index[i].size + KV_SST_BLOCK_TRAILER, h->dev);
    h->in_cache = h->rc == KV_OK && (hit || (h->b.h && r->cache));
    if (h->rc == KV_OK && (h->rc = kv_blockc_init(&h->c, h->b.data, h->b.len, r->cmp)) != KV_OK) {
        kv_sst_fail(h->rc, r->path, h->ix->index[i].off, "bad data block");
        kv_sst_release(r, &h->b);
    }
}

/* The first entry >= q's key in the held block, when it begins with q's
 * prefix: its value copied to q->val, its suffix to q->suffix. */
static int held_search(kv_sst_reader *r, struct held *h, kv_sst_seek_req *q)
{
    kv_blockc *c = &h->c;
    kv_blockc_seek(c, q->key, q->klen);
    if (c->err) {
        int rc = c->err;
        if (rc == KV_ECORRUPT)
            kv_sst_fail(rc, r->path, h->ix->index[h->i].off, "bad data block");
        /* The error sticks to the cursor: the next key seeks with a fresh
         * one, as its own lookup would. */
        kv_blockc_free(c);
        kv_blockc_init(c, h->b.data, h->b.len, r->cmp); /* it passed once: cannot fail now */
        return rc;
    }
    if (!c->valid || c->klen < q->prefix_len || memcmp(c->key, q->key, q->prefix_len) != 0)
        return KV_NOTFOUND;
    if (!(q->val = malloc(c->vlen ? c->vlen : 1)))
        return KV_ENOMEM;
    memcpy(q->val, c->val, c->vlen);
    q->vlen = c->vlen;
    q->suffix_len = c->klen - q->prefix_len;
    if (q->suffix && q->suffix_cap)
        memcpy(q->suffix, c->key + q->prefix_len,
               q->suffix_len < q->suffix_cap ? q->suffix_len : q->suffix_cap);
    return KV_OK;
}

int kv_sst_seek_gated_many(kv_sst_reader *r, kv_sst_seek_req *const *reqs, size_t n)
{
    if (bad_reqs(r, reqs, n))
        return KV_EINVAL;
    struct ixref ix;
    int rc = kv_sst_index_get(r, &ix);
    if (rc != KV_OK) {
        for (size_t k = 0; k < n; k++)
            if (req_reset(reqs[k]))
                reqs[k]->rc = rc;
        return KV_OK;
    }
    unsigned slot = kv_tally_slot();
    struct held h = {.ix = ix.ix, .i = r->nindex};
    for (size_t k = 0; k < n; k++) {
        kv_sst_seek_req *q = reqs[k];
        if (!req_reset(q))
            continue;
        /* The block kv_sst_seek_prefetch_many found; else, between a key
         * that landed in the held block and that block's last key, a key
         * lands in the same block; else the index says. */
        size_t i = h.i;
        if (q->hint_reader == r && q->hint_block <= r->nindex)
            i = q->hint_block;
        else if (i == r->nindex ||
                 kv_sst_cmp(r->cmp, q->key, q->klen, h.first->key, h.first->klen) < 0 ||
                 kv_sst_cmp(r->cmp, q->key, q->klen, ix.ix->index[i].key, ix.ix->index[i].klen) > 0)
            i = kv_sst_index_lower_bound(r, ix.ix, q->key, q->klen);
        if (i == r->nindex) { /* cannot happen past the gate's largest-key check */
            q->rc = kv_sst_fail(KV_ECORRUPT, r->path, r->data_end,
                                "index ends before the largest key");
            continue;
        }
        q->probe.block_offset = ix.ix->index[i].off;
        q->probe.block_bytes = ix.ix->index[i].size + KV_SST_BLOCK_TRAILER;
        if (i != h.i) {
            held_read(r, &h, i, q);
        } else if (h.in_cache) { /* its own lookup would find the block cached */
            q->probe.cache_hit = 1;
            TALLY(r, slot, hits, 1);
        } else { /* ... or read it again */
            q->probe.block_read = 1;
            q->probe.bytes_read = q->probe.block_bytes;
            TALLY(r, slot, reads, 1);
            TALLY(r, slot, bytes, q->probe.bytes_read);
            if (h.dev) { /* its own read would have gone to the device */
                q->probe.device_read = 1;
                q->probe.device_bytes = h.dev;
                TALLY(r, slot, dev_reads, 1);
                TALLY(r, slot, dev_bytes, h.dev);
            }
        }
        q->rc = h.rc == KV_OK ? held_search(r, &h, q) : h.rc;
        if (q->rc == KV_NOTFOUND && q->probe.filter_checked) {
            q->probe.false_positive = 1;
            TALLY(r, slot, false_pos, 1);
        }
    }
    held_drop(r, &h);
    kv_sst_use_put(r, &ix.u);
    return KV_OK;
}
