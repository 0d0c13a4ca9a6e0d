/* iter.c - kv_iter: ordered reads over the memtables and every level, as
 * of a snapshot, with bounds and values in blob files.
 *
 * An iterator pins what it reads (the memtables and the version of tables
 * when it was made), so flushes and compactions under it change nothing it
 * sees. It reads through the merging iterator (merge.h): its sources are
 * the memtable, the immutable memtable, each level-0 table, and each
 * deeper level as one run of disjoint tables; the merge's reader rule
 * decides which version of each key a reader at the snapshot sees.
 *
 * Forward, the iterator stands on the decided entry: its key and value
 * point into the merge's top source, uncopied. Backward, the sources have
 * moved past the decided key by the time it is known, so the pair is
 * copied (into the merge's buffers).
 *
 * Direction changes only when the caller's does: then every source is
 * repositioned once around the current key (before it, or after it) and
 * the heap rebuilt the other way.
 *
 * Bounds (kv_iter_set_bounds): every move stops at them, and a level's
 * run does not open a table that lies wholly outside them.
 *
 * Range queries (doc/database.md, "Filters that gate scans"): with both
 * bounds set, or bounds inside one prefix of prefix_len bytes (or a
 * kv_iter_seek_prefix of at least that many), the merge gets a gate
 * (merge.h) that asks each table's scan filters before opening it; each
 * seek, seek_first, seek_last and seek_prefix is then one range query. An
 * iterator without one pays one branch per positioning and per table
 * opened. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "db.h"
#include "merge.h"
#include "order.h"
#include "util/error.h"
#include "util/ikey.h"

struct bound {
    uint8_t *k;
    size_t len, cap; /* cap: k's room, kept from bound to bound (no malloc per query) */
    int set;
};

struct kv_iter {
    kv_db *db;
    const kv_comparator *cmp; /* db->cmp: the user key order (order.h) */
    uint64_t snap;
    struct kv_view_hold hold; /* a long hold on the view it reads (view.h) */
    struct kv_memref *mem, *imm; /* the view's */
    struct kv_version *v;
    struct kv_merge m; /* its sources; m.dir is the direction of the last move */
    int valid, status;
    char *text;         /* status's text (status.h), kept for kv_iter_status; may be NULL */
    unsigned long long mark; /* kv_error_mark when the current call began */
    /* The current pair: forward, into the top source; backward, into m.sk/m.sv. */
    const uint8_t *key, *val;
    size_t klen, vlen;
    /* The current value lives in a blob file: val/vlen hold its reference,
     * and the value is read into bv the first time kv_iter_value asks for
     * it (bv_ready), so a scan of keys alone reads no blob. */
    int blob, bv_ready;
    /* The current entry is a merge operand: its value is the merge of the
     * key's versions, worked out (into bv) the first time it is asked for,
     * by kv_get's walk at this iterator's view and snapshot. */
    int merged;
    uint8_t *bv;
    size_t bvlen, bvcap;
    struct bound lo, hi; /* lower (inclusive) and upper (exclusive) bounds */
    struct kv_merge_gate gate; /* m.gate points here while the bounds make a range query */
};

static void stop(kv_iter *it, int rc)
{
    it->valid = 0;
    it->m.hn = 0;
    if (rc != KV_OK && it->status == KV_OK) {
        it->status = rc;
        char t[KV_DB_TEXT];
        kv_db_keep_text(it->db, t, "iterator", it->mark, rc);
        it->text = strdup(t); /* NULL: kv_iter_status says less */
    }
}

/* ---- visibility (merge.c has the rule) ---------------------------------------------- */

/* Stands the iterator on the decided entry of source s (NULL: none). */
static inline void take(kv_iter *it, const struct kv_merge_source *s)
{
    it->valid = s != NULL;
    if (!s)
        return;
    it->key = s->key;
    it->klen = s->klen;
    it->val = s->val;
    it->vlen = s->vlen;
    it->blob = s->kind == KV_KIND_BLOB;
    it->merged = s->kind == KV_KIND_MERGE || s->kind == KV_KIND_TMERGE;
    if (s->kind == KV_KIND_TVALUE && it->vlen >= KV_TTL_STAMP)
        it->vlen -= KV_TTL_STAMP; /* its write time follows the value */
    it->bv_ready = 0;
}

/* From the merge's top (forward), the next key visible at the snapshot and
 * not deleted, below the upper bound; the iterator then stands on that
 * entry, its key and value uncopied. With `skipping`: m.skip is a key
 * already decided, whose remaining versions are passed. */
static void find_forward(kv_iter *it, int skipping)
{
    struct kv_merge_source *s;
    int rc = kv_merge_next_visible(&it->m, it->snap, it->hi.set ? it->hi.k : NULL, it->hi.len,
                                   skipping, &s);
    if (rc != KV_OK)
        stop(it, rc);
    else
        take(it, s);
}

/* From the merge's top (backward), the previous visible key, not below the
 * lower bound. The pair is copied (the sources stand before it
 * afterwards). */
static void find_backward(kv_iter *it)
{
    int found;
    int rc = kv_merge_prev_visible(&it->m, it->snap, it->lo.set ? it->lo.k : NULL, it->lo.len,
                                   &found);
    if (rc != KV_OK) {
        stop(it, rc);
        return;
    }
    it->valid = found;
    it->key = it->m.sk;
    it->klen = it->m.sklen;
    it->val = it->m.sv;
    it->vlen = it->m.svlen;
    it->blob = found && it->m.skind == KV_KIND_BLOB;
    it->merged = found && (it->m.skind == KV_KIND_MERGE || it->m.skind == KV_KIND_TMERGE);
    if (found && it->m.skind == KV_KIND_TVALUE && it->vlen >= KV_TTL_STAMP)
        it->vlen -= KV_TTL_STAMP;
    it->bv_ready = 0;
}

/* ---- public ------------------------------------------------------------------------ */

int kv_iter_new(kv_db *db, const kv_snapshot *snap, kv_iter **out)
{
    if (!db || !out)
        return kv_db_einval(db, "kv_iter_new", "%s is NULL", db ? "out" : "db");
    *out = NULL;
    kv_iter *it = calloc(1, sizeof *it);
    if (!it)
        return kv_error_set(KV_ENOMEM, "%s: kv_iter_new: out of memory", db->path);
    it->db = db;
    it->cmp = db->cmp;
    /* The view and its sequence, without the lock (view.c). The view
     * stays held, in a reader slot of its own, until kv_iter_free. */
    it->snap = kv_view_enter(db, 1, snap, &it->hold);
    if (!it->hold.slot) { /* every slot taken: kv_close counts it here */
        pthread_mutex_lock(&db->mu);
        db->iters++; /* kv_iter_free takes it back, last */
        pthread_mutex_unlock(&db->mu);
    }
    it->mem = it->hold.view->mem;
    it->imm = it->hold.view->imm;
    it->v = it->hold.view->v;

    const struct kv_version *v = it->v;
    size_t n = 2 + v->nruns;
    if (kv_merge_init(&it->m, db->cmp, db->tcmp, n) != KV_OK) {
        kv_iter_free(it);
        return kv_error_set(KV_ENOMEM, "%s: kv_iter_new: out of memory", db->path);
    }
    /* Sources: the memtables, each level-0 table, each sorted run of a
     * deeper level (its tables disjoint) as one. */
    kv_merge_add_mem(&it->m, it->mem->mem);
    if (it->imm)
        kv_merge_add_mem(&it->m, it->imm->mem);
    for (size_t i = v->start[0]; i < v->start[1]; i++)
        kv_merge_add_tables(&it->m, &v->tables[i], 1);
    for (size_t r = v->level_run[1]; r < v->nruns; r++)
        kv_merge_add_tables(&it->m, &v->tables[v->run_start[r]],
                            v->run_start[r + 1] - v->run_start[r]);
    /* Range tombstones and expiry hide versions too (none: nothing set,
     * and the scan pays nothing for them). */
    const kv_rtset *rts[3] = {it->hold.view->mem_rt, it->hold.view->imm_rt, NULL};
    if (kv_version_rt(it->v, &rts[2]) != KV_OK) {
        kv_iter_free(it);
        return kv_error_set(KV_ENOMEM, "%s: kv_iter_new: out of memory", db->path);
    }
    if (rts[0] || rts[1] || rts[2] || db->o.ttl_seconds)
        kv_merge_set_hiders(&it->m, rts, 3, db->o.ttl_seconds,
                            db->o.ttl_seconds ? (uint64_t)time(NULL) : 0);
    *out = it;
    return KV_OK;
}

void kv_iter_free(kv_iter *it)
{
    if (!it)
        return;
    kv_merge_free(&it->m);
    free(it->bv);
    free(it->lo.k);
    free(it->hi.k);
    free(it->text);
    /* Last: once the hold is given back (and, without a slot, the count
     * is down), kv_close may free the handle; the views and tables freed
     * on the way use its block cache. */
    kv_db *db = it->db;
    struct kv_view_hold hold = it->hold;
    free(it);
    kv_view_leave(db, &hold);
    if (!hold.slot) {
        pthread_mutex_lock(&db->mu);
        db->iters--;
        pthread_mutex_unlock(&db->mu);
    }
}

/* One range query begins (kv_stats.range_queries), if the bounds make one. */
static inline void range_query(const kv_iter *it)
{
    if (it->m.gate && it->m.gate->count)
        KV_COUNT(it->db, range_queries, 1);
}

void kv_iter_seek_first(kv_iter *it)
{
    if (!it || it->status)
        return;
    it->mark = kv_error_mark();
    range_query(it);
    /* With a lower bound, the range starts there. */
    int rc = it->lo.set ? kv_merge_seek(&it->m, it->lo.k, it->lo.len, it->snap)
                        : kv_merge_first(&it->m);
    if (rc != KV_OK)
        stop(it, rc);
    else
        find_forward(it, 0);
}

void kv_iter_seek(kv_iter *it, const void *key, size_t klen)
{
    if (!it || it->status)
        return;
    it->mark = kv_error_mark();
    if (klen && !key) {
        kv_db_einval(it->db, "kv_iter_seek", "NULL key with length %zu", klen);
        stop(it, KV_EINVAL);
        return;
    }
    if (it->lo.set && kv_sst_cmp(it->cmp, key, klen, it->lo.k, it->lo.len) < 0) {
        key = it->lo.k;
        klen = it->lo.len;
    }
    range_query(it);
    int rc = kv_merge_seek(&it->m, key, klen, it->snap);
    if (rc != KV_OK)
        stop(it, rc);
    else
        find_forward(it, 0);
}

void kv_iter_seek_last(kv_iter *it)
{
    if (!it || it->status)
        return;
    it->mark = kv_error_mark();
    range_query(it);
    /* With an upper bound, the last key below it. */
    int rc = it->hi.set ? kv_merge_seek_before(&it->m, it->hi.k, it->hi.len)
                        : kv_merge_last(&it->m);
    if (rc != KV_OK)
        stop(it, rc);
    else
        find_backward(it);
}

void kv_iter_next(kv_iter *it)
{
    if (!kv_iter_valid(it))
        return;
    it->mark = kv_error_mark();
    if (it->m.dir == KV_MERGE_FWD) { /* the common case: one call */
        struct kv_merge_source *s;
        int rc = kv_merge_next_key(&it->m, it->snap, it->hi.set ? it->hi.k : NULL, it->hi.len,
                                   it->key, it->klen, &s);
        if (rc != KV_OK)
            stop(it, rc);
        else
            take(it, s);
        return;
    }
    /* The sources stand before the current key: put them at its newest
     * visible version, then pass its versions as forward. */
    int rc = kv_merge_set_skip(&it->m, it->key, it->klen);
    if (rc == KV_OK)
        rc = kv_merge_seek(&it->m, it->m.skip, it->m.skiplen, it->snap);
    if (rc != KV_OK)
        stop(it, rc);
    else
        find_forward(it, 1);
}

void kv_iter_prev(kv_iter *it)
{
    if (!kv_iter_valid(it))
        return;
    it->mark = kv_error_mark();
    if (it->m.dir == KV_MERGE_FWD) {
        /* The sources stand at the current key's newest visible version
         * or after: put them before its first version. The key points
         * into a source that moves, so it is copied first. */
        int rc = kv_merge_set_skip(&it->m, it->key, it->klen);
        if (rc == KV_OK)
            rc = kv_merge_seek_before(&it->m, it->m.skip, it->m.skiplen);
        if (rc != KV_OK) {
            stop(it, rc);
            return;
        }
    }
    /* Backward the sources already stand before the current key. */
    find_backward(it);
}

/* Gives the merge a gate when the bounds (just set) make a range query:
 * `range` with both of them, `prefix` when every key inside them has the
 * lower bound's first prefix_len bytes. The prefix's hashes are computed
 * once, when the first table asks. */
static void set_gate(kv_iter *it, int range, int prefix)
{
    struct kv_merge_gate *g = &it->gate;
    memset(g, 0, sizeof *g);
    g->db = it->db;
    g->count = 1;
    g->range = range;
    g->prefix = prefix;
    g->plen = it->db->o.prefix_len;
    g->kh.key = it->lo.k;
    g->kh.klen = prefix ? g->plen : 0;
    it->m.gate = range || prefix ? g : NULL;
}

/* Makes b's buffer hold at least len bytes, its bytes kept (a failure
 * leaves b as it was). */
static int bound_room(struct bound *b, size_t len)
{
    if (len <= b->cap && b->k)
        return KV_OK;
    size_t cap = len > 2 * b->cap ? len : 2 * b->cap;
    uint8_t *n = malloc(cap ? cap : 1);
    if (!n)
        return KV_ENOMEM;
    if (b->k && b->set)
        memcpy(n, b->k, b->len);
    free(b->k);
    b->k = n;
    b->cap = cap ? cap : 1;
    return KV_OK;
}

static void set_bound(struct bound *b, const void *k, size_t len)
{
    b->set = k != NULL;
    b->len = k ? len : 0;
    if (k && len)
        memmove(b->k, k, len);
}

int kv_iter_set_bounds(kv_iter *it, const void *lower, size_t llen, const void *upper,
                       size_t ulen)
{
    if (!it)
        return kv_db_einval(NULL, "kv_iter_set_bounds", "it is NULL");
    if (lower && upper && kv_sst_cmp(it->cmp, lower, llen, upper, ulen) > 0)
        return kv_db_einval(it->db, "kv_iter_set_bounds", "lower bound above upper bound");
    /* Room for both first, so that a failure changes neither. */
    if ((lower && bound_room(&it->lo, llen) != KV_OK) ||
        (upper && bound_room(&it->hi, ulen) != KV_OK))
        return kv_error_set(KV_ENOMEM, "%s: kv_iter_set_bounds: out of memory", it->db->path);
    set_bound(&it->lo, lower, llen);
    set_bound(&it->hi, upper, ulen);
    struct bound lo = it->lo, hi = it->hi;
    /* A run of tables opens none wholly outside them. */
    kv_merge_set_bounds(&it->m, lo.set ? lo.k : NULL, lo.len, hi.set ? hi.k : NULL, hi.len);
    size_t p = it->db->o.prefix_len;
    set_gate(it, lo.set && hi.set,
             p && lo.set && hi.set && lo.len >= p && hi.len >= p && memcmp(lo.k, hi.k, p) == 0);
    /* Sources may stand on tables the new bounds exclude: a seek puts
     * everything right. */
    it->valid = 0;
    it->m.hn = 0;
    return KV_OK;
}

int kv_iter_seek_prefix(kv_iter *it, const void *prefix, size_t plen)
{
    if (!it)
        return kv_db_einval(NULL, "kv_iter_seek_prefix", "it is NULL");
    if (plen && !prefix)
        return kv_db_einval(it->db, "kv_iter_seek_prefix", "NULL prefix with length %zu", plen);
    /* Under a comparator the keys with a prefix need not be adjacent: only
     * bytewise order makes them a range. */
    if (it->cmp)
        return kv_db_einval(it->db, "kv_iter_seek_prefix",
                            "the database orders keys by comparator \"%s\": a prefix is not a "
                            "range (use kv_iter_set_bounds)",
                            it->cmp->name);
    /* The keys with the prefix are [prefix, successor): the successor
     * drops trailing 0xFF bytes and adds one to the last byte left; a
     * prefix of 0xFF bytes only (or none) has no upper end. */
    size_t n = plen;
    const uint8_t *p = prefix;
    while (n && p[n - 1] == 0xFF)
        n--;
    uint8_t small[64], *up = n <= sizeof small ? small : malloc(n);
    if (!up)
        return kv_error_set(KV_ENOMEM, "%s: kv_iter_seek_prefix: out of memory", it->db->path);
    if (n) {
        memcpy(up, p, n);
        up[n - 1]++;
    }
    int rc = kv_iter_set_bounds(it, plen ? prefix : "", plen, n ? up : NULL, n);
    if (up != small)
        free(up);
    if (rc != KV_OK)
        return rc;
    /* Every key with the prefix has its first prefix_len bytes, though the
     * bounds (the prefix and its successor) may not share them. */
    if (it->db->o.prefix_len && plen >= it->db->o.prefix_len)
        set_gate(it, it->hi.set, 1);
    kv_iter_seek_first(it);
    return KV_OK;
}

void kv_iter_seek_first_traced(kv_iter *it, struct kv_merge_trace *tr, uint64_t *snapshot,
                               size_t *live_tables)
{
    /* A gate even where the bounds make no range query, to trace the
     * memtables and tables met; counted only where they do. */
    struct kv_merge_gate *was = it->m.gate;
    if (!was)
        set_gate(it, 0, 0);
    it->gate.count = was != NULL;
    it->gate.trace = tr;
    it->m.gate = &it->gate;
    kv_iter_seek_first(it);
    it->gate.trace = NULL;
    it->gate.count = 1;
    it->m.gate = was;
    *snapshot = it->snap;
    *live_tables = it->v->n;
}

int kv_iter_valid(const kv_iter *it)
{
    return it && !it->status && it->valid;
}

const void *kv_iter_key(const kv_iter *it, size_t *klen)
{
    int ok = kv_iter_valid(it);
    if (klen)
        *klen = ok ? it->klen : 0;
    return ok ? it->key : NULL;
}

/* Works out the current key's merged value into it->bv. */
static int load_merged(kv_iter *it)
{
    struct kv_read_view rv = {it->mem, it->imm, it->v, it->snap, it->hold};
    void *val = NULL;
    size_t n = 0;
    int rc = kv_db_view_get(it->db, &rv, it->key, it->klen, &val, &n);
    if (rc == KV_NOTFOUND) /* hidden after all: cannot be, the newest version is an operand */
        rc = kv_error_set(KV_ECORRUPT, "%s: iterator: a merged key vanished", it->db->path);
    if (rc == KV_OK && (rc = kv_merge_grow(&it->bv, &it->bvcap, n ? n : 1)) == KV_OK) {
        if (n)
            memcpy(it->bv, val, n);
        it->bvlen = n;
        it->bv_ready = 1;
    }
    kv_free(val);
    return rc;
}

/* Reads the current value from its blob file into it->bv. */
static int load_blob(kv_iter *it)
{
    for (;;) {
        struct kv_blob_dest d = {it->bv, it->bvcap};
        size_t n = 0;
        int rc = kv_blob_get(it->db, it->v->blobs, it->v->nblobs, it->val, it->vlen, it->key,
                             it->klen, NULL, &n, &d, NULL);
        if (rc == KV_ERANGE && kv_merge_grow(&it->bv, &it->bvcap, n ? n : 1) == KV_OK)
            continue;
        if (rc == KV_OK) {
            it->bvlen = n;
            it->bv_ready = 1;
        }
        return rc;
    }
}

const void *kv_iter_value(const kv_iter *cit, size_t *vlen)
{
    /* The iterator is the caller's, never const underneath: reading a
     * value from a blob file keeps it in the iterator's buffer. */
    kv_iter *it = (kv_iter *)cit;
    int ok = kv_iter_valid(it);
    if (ok && (it->blob || it->merged) && !it->bv_ready) {
        it->mark = kv_error_mark();
        int rc = it->merged ? load_merged(it) : load_blob(it);
        if (rc != KV_OK) {
            stop(it, rc);
            ok = 0;
        }
    }
    int inbv = ok && (it->blob || it->merged);
    if (vlen)
        *vlen = !ok ? 0 : inbv ? it->bvlen : it->vlen;
    return !ok ? NULL : inbv ? (it->bv ? it->bv : (const uint8_t *)"") : it->val;
}

int kv_iter_status(const kv_iter *it)
{
    if (!it)
        return kv_db_einval(NULL, "kv_iter_status", "it is NULL");
    if (it->status != KV_OK && it->text)
        kv_error_set(it->status, "%s", it->text);
    else if (it->status != KV_OK)
        kv_error_set(it->status, "%s: iterator: %s", it->db->path, kv_strerror(it->status));
    return it->status;
}
