/* get.c - the filter-gated Get walk: the memtables, then the tables that
 * may hold the key (kv_get, kv_get_at, kv_get_into, and the traced walk
 * kv_explain_get runs), blob values, and the read views kv_multi_get holds.
 *
 * A Get loads last_seq, then holds the published view (the memtables and
 * the version) through a reader slot, all without the lock (view.c,
 * doc/concurrency.md), and searches (doc/database.md, "Get"). */
#include "db.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/ikey.h"
#include "util/error.h"
#include "order.h"

#define COUNT KV_COUNT

/* The Get path, written once. kv_get_at walks with tr NULL, kv_explain_get
 * (through kv_db_get_traced) with a trace to fill. The walk is inlined into
 * both: in kv_get_at every `if (tr)` is on a constant NULL and compiles to
 * nothing, so the plain Get pays nothing for the trace. */
#define GET_INLINE static inline __attribute__((always_inline))

static int copy_value(const void *src, size_t n, void **val, size_t *vlen)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        return KV_ENOMEM;
    if (n)
        memcpy(p, src, n);
    *val = p;
    *vlen = n;
    return KV_OK;
}

/* Where kv_get_into wants a found value: the caller's buffer of cap
 * bytes. The other Gets pass none (NULL) and get a new buffer. */
struct get_dest {
    void *buf;
    size_t cap;
};

/* A found value of n bytes at src, to *val (dest NULL: a new buffer) or to
 * dest's buffer when it fits (else KV_ERANGE, nothing written); *vlen = n
 * either way. */
GET_INLINE int put_value(const void *src, size_t n, void **val, size_t *vlen,
                         const struct get_dest *dest)
{
    if (!dest)
        return copy_value(src, n, val, vlen);
    *vlen = n;
    if (n > dest->cap)
        return KV_ERANGE;
    if (n)
        memcpy(dest->buf, src, n);
    return KV_OK;
}

/* A new step in the trace, zeroed, or NULL without a trace. */
GET_INLINE struct kv_get_step *trace_step(struct kv_get_trace *tr, int where)
{
    if (!tr)
        return NULL;
    struct kv_get_step *st = &tr->steps[tr->nsteps++];
    memset(st, 0, sizeof *st);
    st->s.where = where;
    return st;
}

/* What a walk carries from step to step besides the answer: the newest
 * range tombstone covering the key seen so far (0: none), and whether an
 * entry was found that the plain walk leaves to the full one (a merge
 * operand: full_walk collects them). */
struct get_state {
    uint64_t cov;
    int full;
};

/* The source's range tombstones (rt, NULL for none) raise g->cov. */
GET_INLINE void cover(struct get_state *g, const kv_rtset *rt, const void *key, size_t klen,
                      uint64_t snap)
{
    if (rt) {
        uint64_t c = kv_rtset_cover(rt, key, klen, snap);
        if (c > g->cov)
            g->cov = c;
    }
}

/* Nothing of the key in a source, but a range tombstone of it or of a
 * newer one covers the key: the Get ends here (every version below is
 * older than the tombstone: db.h, the tables' key ranges). */
GET_INLINE int range_deleted(const struct get_state *g, int *decided, struct kv_get_step *st)
{
    if (!g->cov)
        return KV_NOTFOUND;
    *decided = 1;
    if (st) {
        st->s.seq = g->cov;
        st->s.outcome = KV_EXPLAIN_RANGE_DELETED;
    }
    return KV_NOTFOUND;
}

/* One entry found (the newest at or below the snapshot in its source):
 * what it decides. A value at val (vlen bytes, timed ones with their
 * stamp) is put where the Get wants it; with `placed`, it is already
 * there (a table read it) and only a timed value's stamp is cut off. */
GET_INLINE int decide_entry(kv_db *db, struct get_state *g, uint64_t seq, int kind,
                            const uint8_t *v, size_t n, void **val, size_t *vlen,
                            const struct get_dest *dest, int *decided, struct kv_get_step *st)
{
    *decided = 1;
    if (st)
        st->s.seq = seq;
    if (seq < g->cov) {
        if (st) {
            st->s.seq = g->cov;
            st->s.outcome = KV_EXPLAIN_RANGE_DELETED;
        }
        return KV_NOTFOUND;
    }
    switch (kind) {
    case KV_KIND_VALUE:
        if (st)
            st->s.outcome = KV_EXPLAIN_FOUND;
        return put_value(v, n, val, vlen, dest);
    case KV_KIND_TVALUE:
        if (n < KV_TTL_STAMP)
            return KV_ECORRUPT;
        if (kv_ttl_expired(db->o.ttl_seconds, (uint64_t)time(NULL), kind, v, n)) {
            COUNT(db, expired_read, 1);
            if (st)
                st->s.outcome = KV_EXPLAIN_EXPIRED;
            return KV_NOTFOUND;
        }
        if (st)
            st->s.outcome = KV_EXPLAIN_FOUND;
        return put_value(v, n - KV_TTL_STAMP, val, vlen, dest);
    case KV_KIND_MERGE:
    case KV_KIND_TMERGE:
        g->full = 1; /* full_walk takes it from the top */
        return KV_NOTFOUND;
    case KV_KIND_TOMBSTONE:
        if (st)
            st->s.outcome = KV_EXPLAIN_DELETED;
        return KV_NOTFOUND;
    default:
        if (st)
            st->s.outcome = KV_EXPLAIN_FAILED;
        return KV_ECORRUPT;
    }
}

/* The memtable m's answer: KV_OK (a value, copied), KV_NOTFOUND with
 * *decided set (a tombstone, a range tombstone, an expired value), or
 * KV_NOTFOUND (ask the next one). Its filter, asked with the Get's hash h,
 * may spare the skiplist walk: a "no" is sure for every entry at or below
 * snap (apply_entry says why). Its range tombstones (rt) count even then. */
GET_INLINE int mem_lookup(kv_db *db, const struct kv_memref *m, const kv_rtset *rt, int where,
                          const void *key, size_t klen, uint64_t h, uint64_t snap, void **val,
                          size_t *vlen, const struct get_dest *dest, int *decided,
                          struct get_state *g, struct kv_get_trace *tr)
{
    if (!m)
        return KV_NOTFOUND;
    struct kv_get_step *st = trace_step(tr, where);
    cover(g, rt, key, klen, snap);
    if (kv_mem_has_filter(m->mem)) {
        if (!kv_mem_may_contain(m->mem, h)) {
            COUNT(db, memtable_filter_negatives, 1);
            if (st)
                st->s.filter = KV_EXPLAIN_FILTER_NEGATIVE;
            return range_deleted(g, decided, st);
        }
        if (st)
            st->s.filter = KV_EXPLAIN_FILTER_MAYBE;
    }
    kv_mem_entry e;
    if (kv_mem_get(m->mem, key, klen, snap, &e) != KV_OK)
        return range_deleted(g, decided, st);
    if (e.kind == KV_KIND_VALUE && !g->cov) { /* the common case, as before */
        *decided = 1;
        if (st) {
            st->s.seq = e.seq;
            st->s.outcome = KV_EXPLAIN_FOUND;
        }
        return put_value(e.val, e.vlen, val, vlen, dest);
    }
    return decide_entry(db, g, e.seq, e.kind, e.val, e.vlen, val, vlen, dest, decided, st);
}

/* The memtables' answer at rv->seq: the active one, then the immutable
 * one, as mem_lookup gives it (*decided set when one of them decided). */
GET_INLINE int memtables_lookup(kv_db *db, const struct kv_read_view *rv, const void *key,
                                size_t klen, uint64_t h, void **val, size_t *vlen,
                                const struct get_dest *dest, int *decided, struct get_state *g,
                                struct kv_get_trace *tr)
{
    const struct kv_view *view = rv->hold.view;
    int rc = mem_lookup(db, rv->mem, view->mem_rt, KV_EXPLAIN_MEMTABLE, key, klen, h, rv->seq, val,
                        vlen, dest, decided, g, tr);
    if (!*decided)
        rc = mem_lookup(db, rv->imm, view->imm_rt, KV_EXPLAIN_IMMUTABLE, key, klen, h, rv->seq, val,
                        vlen, dest, decided, g, tr);
    return rc;
}

/* Probes one table, counting what the probe did: its key range and
 * filter first (the gate), then, when they let the key through, its index
 * and one data block. Returns KV_NOTFOUND (the Get goes on), or with
 * *decided set: KV_OK (*val), KV_NOTFOUND (a tombstone) or an error. */
/* A table's entry of kind KV_KIND_BLOB was found: its value, a blob
 * reference, is in *val (dest NULL) or dest's buffer (rc KV_OK), or did
 * not fit there (rc KV_ERANGE); reads the value it names into the same
 * place (blob.h, kv_blob_get). */
static int blob_lookup(kv_db *db, const struct kv_version *v, struct kv_table *t,
                       const uint8_t *ikey, size_t ilen, size_t plen, const kv_sst_probe *pr,
                       int rc, const void *key, size_t klen, void **val, size_t *vlen,
                       const struct get_dest *dest, struct kv_get_step *st)
{
    uint8_t ref[KV_BLOB_REF_MAX];
    size_t rlen = *vlen;
    if (rc == KV_ERANGE) { /* the reference did not fit the caller's buffer: read it again */
        kv_sst_probe again = *pr;
        uint8_t trailer[KV_IKEY_TRAILER];
        size_t tlen;
        rc = kv_sst_seek_gated_into(t->reader, ikey, ilen, plen, &again, ref, sizeof ref, &rlen,
                                    trailer, sizeof trailer, &tlen);
    } else { /* in the caller's buffer, or in a new one that goes now */
        const void *src = dest ? dest->buf : *val;
        if (rlen <= sizeof ref)
            memcpy(ref, src, rlen);
        else
            rc = KV_ERANGE;
        if (!dest) {
            kv_free(*val);
            *val = NULL;
        }
    }
    if (rc == KV_ERANGE) /* longer than any reference */
        return kv_error_set(KV_ECORRUPT, "%s: a blob reference of %zu bytes", t->path, rlen);
    if (rc != KV_OK)
        return rc;
    kv_blob_ref where = {0}; /* kv_blob_get sets it only once the reference decodes */
    struct kv_blob_dest bd = {dest ? dest->buf : NULL, dest ? dest->cap : 0};
    rc = kv_blob_get(db, v->blobs, v->nblobs, ref, rlen, key, klen, val, vlen, dest ? &bd : NULL,
                     &where);
    if (st && where.number) {
        st->s.blob_number = where.number;
        st->s.blob_offset = where.offset;
        st->s.blob_bytes = kv_blob_record_size(klen, where.size);
    }
    return rc;
}

/* A timed value a table lookup placed (its stamp included: *vlen bytes in
 * *val, or in dest's buffer; with rc KV_ERANGE, not placed: it did not
 * fit) is cut to its bytes, or found expired (KV_NOTFOUND, *expired set). */
static int timed_value(kv_db *db, struct kv_table *t, const uint8_t *ikey, size_t plen,
                       const kv_sst_probe *pr, int rc, void **val, size_t *vlen,
                       const struct get_dest *dest, int *expired)
{
    uint8_t *tmp = NULL;
    const uint8_t *v = dest ? dest->buf : *val;
    size_t n = *vlen;
    if (rc == KV_ERANGE) { /* read it whole to see its stamp */
        kv_sst_probe again = *pr;
        uint8_t trailer[KV_IKEY_TRAILER];
        size_t tlen;
        void *p = NULL;
        rc = kv_sst_seek_gated(t->reader, ikey, plen + KV_IKEY_TRAILER, plen, &again, &p, &n,
                               trailer, sizeof trailer, &tlen);
        if (rc != KV_OK)
            return rc;
        v = tmp = p;
    }
    if (n < KV_TTL_STAMP) {
        free(tmp);
        return kv_error_set(KV_ECORRUPT, "%s: a timed value of %zu bytes", t->path, n);
    }
    if (kv_ttl_expired(db->o.ttl_seconds, (uint64_t)time(NULL), KV_KIND_TVALUE, v, n)) {
        COUNT(db, expired_read, 1);
        *expired = 1;
        free(tmp);
        return KV_NOTFOUND;
    }
    *vlen = n - KV_TTL_STAMP;
    if (tmp) {
        rc = put_value(tmp, n - KV_TTL_STAMP, val, vlen, dest);
        free(tmp);
        return rc;
    }
    return KV_OK;
}

GET_INLINE int table_lookup(kv_db *db, const struct kv_version *v, struct kv_table *t,
                            unsigned level, const void *key, size_t klen, const uint8_t *ikey,
                            size_t plen, uint64_t h, uint64_t snap, void **val, size_t *vlen,
                            const struct get_dest *dest, int *decided, struct get_state *g,
                            struct kv_get_trace *tr)
{
    struct kv_get_step *st = trace_step(tr, KV_EXPLAIN_TABLE);
    COUNT(db, tables_probed, 1);
    cover(g, t->rt, key, klen, snap);
    /* A blob reference is read into dest's buffer before its value is
     * known not to fit: the bytes it covered are put back then (kv.h: a
     * KV_ERANGE writes nothing). */
    uint8_t saved[KV_BLOB_REF_MAX];
    size_t nsaved = dest && v->nblobs ? (dest->cap < sizeof saved ? dest->cap : sizeof saved) : 0;
    if (nsaved)
        memcpy(saved, dest->buf, nsaved);
    kv_sst_probe pr;
    uint8_t trailer[KV_IKEY_TRAILER];
    size_t tlen = 0;
    size_t ilen = plen + KV_IKEY_TRAILER;
    int rc = kv_sst_seek_gate(t->reader, ikey, ilen, plen, h, &pr);
    if (rc == KV_OK && dest)
        rc = kv_sst_seek_gated_into(t->reader, ikey, ilen, plen, &pr, dest->buf, dest->cap, vlen,
                                    trailer, sizeof trailer, &tlen);
    else if (rc == KV_OK)
        rc = kv_sst_seek_gated(t->reader, ikey, ilen, plen, &pr, val, vlen, trailer, sizeof trailer,
                               &tlen);
    if (pr.filter_negative)
        COUNT(db, filter_negatives, 1);
    else if (pr.filter_checked)
        COUNT(db, filter_positives, 1);
    if (pr.false_positive)
        COUNT(db, false_positives, 1);
    if (pr.block_read) {
        COUNT(db, block_reads, 1);
        COUNT(db, block_read_bytes, pr.bytes_read);
        if (pr.device_read) {
            COUNT(db, device_reads, 1);
            COUNT(db, device_read_bytes, pr.device_bytes);
        }
        if (db->cache)
            COUNT(db, cache_misses, 1);
    }
    if (pr.cache_hit)
        COUNT(db, cache_hits, 1);
    if (st) {
        st->meta = &t->meta;
        st->s.level = level;
        st->s.number = t->meta.number;
        st->s.filter = pr.filter_negative  ? KV_EXPLAIN_FILTER_NEGATIVE
                       : pr.filter_checked ? KV_EXPLAIN_FILTER_MAYBE
                                           : KV_EXPLAIN_FILTER_NOT_ASKED;
        st->s.block = pr.cache_hit    ? KV_EXPLAIN_BLOCK_CACHE
                      : pr.block_read ? KV_EXPLAIN_BLOCK_FILE
                                      : KV_EXPLAIN_BLOCK_NONE;
        if (st->s.block != KV_EXPLAIN_BLOCK_NONE) {
            st->s.block_offset = pr.block_offset;
            st->s.block_bytes = pr.block_bytes;
        }
        st->s.false_positive = pr.false_positive;
    }
    if (rc == KV_NOTFOUND)
        return range_deleted(g, decided, st);
    *decided = 1;
    if (rc != KV_OK && rc != KV_ERANGE) { /* KV_ERANGE: a value too big for dest */
        if (st)
            st->s.outcome = KV_EXPLAIN_FAILED;
        return rc;
    }
    uint64_t seq;
    int kind;
    if (!kv_ikey_get_trailer(trailer, tlen, &seq, &kind) || !kv_kind_stored(kind)) {
        rc = KV_ECORRUPT;
        if (st)
            st->s.outcome = KV_EXPLAIN_FAILED;
    } else if (seq < g->cov) { /* older than a range tombstone of this table's */
        rc = KV_NOTFOUND;
        if (st) {
            st->s.seq = g->cov;
            st->s.outcome = KV_EXPLAIN_RANGE_DELETED;
        }
    } else if (kind == KV_KIND_MERGE || kind == KV_KIND_TMERGE) {
        g->full = 1; /* full_walk takes it from the top */
        rc = KV_NOTFOUND;
    } else {
        int expired = 0;
        if (kind == KV_KIND_TOMBSTONE)
            rc = KV_NOTFOUND;
        else if (kind == KV_KIND_BLOB)
            rc = blob_lookup(db, v, t, ikey, plen + KV_IKEY_TRAILER, plen, &pr, rc, key, klen, val,
                             vlen, dest, st);
        else if (kind == KV_KIND_TVALUE)
            rc = timed_value(db, t, ikey, plen, &pr, rc, val, vlen, dest, &expired);
        if (st) {
            st->s.seq = seq;
            st->s.outcome = expired                          ? KV_EXPLAIN_EXPIRED
                            : rc == KV_OK || rc == KV_ERANGE ? KV_EXPLAIN_FOUND
                            : rc == KV_NOTFOUND              ? KV_EXPLAIN_DELETED
                                                             : KV_EXPLAIN_FAILED;
        }
    }
    if (rc != KV_OK && nsaved)
        memcpy(dest->buf, saved, nsaved);
    if (rc != KV_OK && rc != KV_ERANGE) {
        if (!dest)
            kv_free(*val);
        *val = NULL;
        *vlen = 0;
    }
    return rc;
}

/* kv_db_view_take, inlined into the Get. */
GET_INLINE void view_take(kv_db *db, const kv_snapshot *snap, struct kv_read_view *out)
{
    out->seq = kv_view_enter(db, 0, snap, &out->hold);
    out->mem = out->hold.view->mem;
    out->imm = out->hold.view->imm;
    out->v = out->hold.view->v;
}

/* Candidates a Get keeps on its stack: level-0 tables beyond this many
 * (more than l0_stop_trigger allows in any sane setting) take a malloc. */
#define GET_STACK_CANDIDATES 64

/* A table that may hold the key, its level, and the hash its filter takes. */
struct get_candidate {
    struct kv_table *t;
    unsigned level;
    uint64_t h;
};

/* The tables that could hold the key, in the order a Get must ask them:
 * every level-0 table whose range holds it, newest first, then at most one
 * table per sorted run of each deeper level, newest run first (a run's
 * ranges are disjoint). Each one's filter
 * lines are asked for as it is found, so the filters are fetched from
 * memory together, and the probes that follow wait for about one memory
 * latency instead of one per table. Returns how many (at most v->nruns,
 * the room `out` has). */
GET_INLINE size_t find_candidates(const kv_db *db, const struct kv_version *v, const void *key,
                                  size_t klen, struct kv_key_hashes *kh, struct get_candidate *out)
{
    size_t n = 0;
    for (size_t i = v->start[0]; i < v->start[1]; i++) {
        struct kv_table *t = v->tables[i];
        if (kv_sst_cmp(v->cmp, key, klen, t->meta.smallest, t->meta.smallest_len) < 0 ||
            kv_sst_cmp(v->cmp, key, klen, t->meta.largest, t->meta.largest_len) > 0)
            continue; /* outside its key range: not probed */
        uint64_t h = kv_table_key_hash(db, kh, t);
        kv_sst_filter_prefetch(t->reader, h);
        out[n++] = (struct get_candidate){t, 0, h};
    }
    for (size_t r = v->level_run[1]; r < v->nruns; r++) {
        size_t j = kv_version_find_run(v, r, key, klen);
        if (j == SIZE_MAX)
            continue;
        uint64_t h = kv_table_key_hash(db, kh, v->tables[j]);
        kv_sst_filter_prefetch(v->tables[j]->reader, h);
        out[n++] = (struct get_candidate){v->tables[j], v->tables[j]->meta.level, h};
    }
    return n;
}

/* ---- the full walk: merge operands --------------------------------------------------- */

/* A full walk's state: the operands collected (copies, newest first), the
 * value below them once found (a copy), and where the walk stands. */
struct full_walk {
    kv_db *db;
    const struct kv_version *v;
    const void *key;
    size_t klen;
    uint64_t snap, cov, now;
    void **ops;
    size_t *olens;
    size_t nops, cap;
    void *base; /* the value below the operands: malloc'd; NULL: none */
    size_t base_len;
    int done;
    struct kv_get_step *st;
};

static int push_operand(struct full_walk *f, const void *p, size_t n)
{
    if (f->nops == f->cap) {
        size_t nc = f->cap ? 2 * f->cap : 8;
        void **o = realloc(f->ops, nc * sizeof *o);
        if (!o)
            return KV_ENOMEM;
        f->ops = o;
        size_t *l = realloc(f->olens, nc * sizeof *l);
        if (!l)
            return KV_ENOMEM;
        f->olens = l;
        f->cap = nc;
    }
    void *c = malloc(n ? n : 1);
    if (!c)
        return KV_ENOMEM;
    if (n)
        memcpy(c, p, n);
    f->ops[f->nops] = c;
    f->olens[f->nops++] = n;
    if (f->st)
        f->st->s.merge_operands++;
    return KV_OK;
}

/* One version of the key, newest first (seq <= the snapshot): an operand
 * is collected; anything else ends the walk (f->done), a value becoming
 * the base (a blob reference read through the version's blob files). */
static int full_version(struct full_walk *f, uint64_t seq, int kind, const uint8_t *val,
                        size_t vlen)
{
    kv_db *db = f->db;
    struct kv_get_step *st = f->st;
    if (seq < f->cov) {
        f->done = 1;
        if (st) {
            st->s.seq = f->cov;
            st->s.outcome = KV_EXPLAIN_RANGE_DELETED;
        }
        return KV_OK;
    }
    if ((kind == KV_KIND_TVALUE || kind == KV_KIND_TMERGE) && vlen < KV_TTL_STAMP)
        return kv_error_set(KV_ECORRUPT, "%s: a timed entry of %zu bytes", db->path, vlen);
    if (kv_ttl_expired(db->o.ttl_seconds, f->now, kind, val, vlen)) {
        COUNT(db, expired_read, 1);
        f->done = 1;
        if (st) {
            st->s.seq = seq;
            st->s.outcome = KV_EXPLAIN_EXPIRED;
        }
        return KV_OK;
    }
    switch (kind) {
    case KV_KIND_MERGE: return push_operand(f, val, vlen);
    case KV_KIND_TMERGE: return push_operand(f, val, vlen - KV_TTL_STAMP);
    case KV_KIND_TOMBSTONE:
        f->done = 1;
        if (st) {
            st->s.seq = seq;
            st->s.outcome = KV_EXPLAIN_DELETED;
        }
        return KV_OK;
    case KV_KIND_VALUE:
    case KV_KIND_TVALUE:
    case KV_KIND_BLOB: {
        f->done = 1;
        if (st) {
            st->s.seq = seq;
            st->s.outcome = KV_EXPLAIN_FOUND;
        }
        if (kind == KV_KIND_BLOB) {
            kv_blob_ref where = {0};
            return kv_blob_get(db, f->v->blobs, f->v->nblobs, val, vlen, f->key, f->klen, &f->base,
                               &f->base_len, NULL, &where);
        }
        size_t n = kind == KV_KIND_TVALUE ? vlen - KV_TTL_STAMP : vlen;
        return copy_value(val, n, &f->base, &f->base_len);
    }
    default: return kv_error_set(KV_ECORRUPT, "%s: an entry of kind %d", db->path, kind);
    }
}

/* A source read to its end without deciding: a range tombstone of it (or a
 * newer one's) covering the key ends the walk there, as in the plain walk. */
static int source_end(struct full_walk *f, int rc)
{
    if (rc == KV_OK && !f->done && f->cov) {
        f->done = 1;
        if (f->st) {
            f->st->s.seq = f->cov;
            f->st->s.outcome = KV_EXPLAIN_RANGE_DELETED;
        }
    }
    return rc;
}

/* The versions of the key in memtable m, newest first from the snapshot. */
static int full_mem(struct full_walk *f, const struct kv_memref *m, const kv_rtset *rt, int where,
                    struct kv_get_trace *tr)
{
    if (!m)
        return KV_OK;
    f->st = trace_step(tr, where);
    if (rt) {
        uint64_t c = kv_rtset_cover(rt, f->key, f->klen, f->snap);
        f->cov = c > f->cov ? c : f->cov;
    }
    kv_mem_iter it;
    kv_mem_iter_init(&it, m->mem);
    kv_mem_iter_seek(&it, f->key, f->klen, f->snap);
    int rc = KV_OK;
    for (; rc == KV_OK && !f->done && kv_mem_iter_valid(&it); kv_mem_iter_next(&it)) {
        kv_mem_entry e;
        kv_mem_iter_entry(&it, &e);
        if (e.klen != f->klen || (e.klen && memcmp(e.key, f->key, e.klen) != 0))
            break;
        rc = full_version(f, e.seq, e.kind, e.val, e.vlen);
    }
    return source_end(f, rc);
}

/* The versions of the key in table t (its filter asked first). */
static int full_table(struct full_walk *f, struct kv_table *t, unsigned level, const uint8_t *ikey,
                      size_t plen, uint64_t h, struct kv_get_trace *tr)
{
    kv_db *db = f->db;
    f->st = trace_step(tr, KV_EXPLAIN_TABLE);
    if (f->st) {
        f->st->meta = &t->meta;
        f->st->s.level = level;
        f->st->s.number = t->meta.number;
    }
    COUNT(db, tables_probed, 1);
    if (t->rt) {
        uint64_t c = kv_rtset_cover(t->rt, f->key, f->klen, f->snap);
        f->cov = c > f->cov ? c : f->cov;
    }
    kv_sst_probe pr;
    int rc = kv_sst_seek_gate(t->reader, ikey, plen + KV_IKEY_TRAILER, plen, h, &pr);
    if (pr.filter_negative)
        COUNT(db, filter_negatives, 1);
    else if (pr.filter_checked)
        COUNT(db, filter_positives, 1);
    if (f->st)
        f->st->s.filter = pr.filter_negative  ? KV_EXPLAIN_FILTER_NEGATIVE
                          : pr.filter_checked ? KV_EXPLAIN_FILTER_MAYBE
                                              : KV_EXPLAIN_FILTER_NOT_ASKED;
    if (rc == KV_OK) {
        kv_sst_iter *it;
        if ((rc = kv_sst_iter_new(t->reader, &it)) != KV_OK)
            return rc;
        kv_sst_iter_seek(it, ikey, plen + KV_IKEY_TRAILER);
        for (; rc == KV_OK && !f->done && kv_sst_iter_valid(it); kv_sst_iter_next(it)) {
            size_t kl, vl;
            const uint8_t *k = kv_sst_iter_key(it, &kl);
            const uint8_t *val = kv_sst_iter_value(it, &vl);
            uint64_t seq;
            int kind;
            if (kl != plen + KV_IKEY_TRAILER || memcmp(k, ikey, plen) != 0)
                break;
            if (!kv_ikey_get_trailer(k + plen, KV_IKEY_TRAILER, &seq, &kind) ||
                !kv_kind_stored(kind))
                rc = kv_error_set(KV_ECORRUPT, "%s: an entry of kind %d", t->path, kind);
            else
                rc = full_version(f, seq, kind, val, vl);
        }
        if (rc == KV_OK)
            rc = kv_sst_iter_status(it);
        kv_sst_iter_free(it);
    } else if (rc == KV_NOTFOUND) {
        rc = KV_OK;
    }
    return source_end(f, rc);
}

/* The merge itself: the operator's full_merge of the base (or none) and
 * the operands, oldest first. The result is the operator's (malloc):
 * returned as it is, or copied into dest. */
static int full_merge(struct full_walk *f, void **val, size_t *vlen, const struct get_dest *dest)
{
    kv_db *db = f->db;
    const kv_merge_operator *op = db->o.merge_operator;
    if (!op)
        return kv_error_set(KV_EINVAL,
                            "%s: the key has merge operands and the database no "
                            "merge operator (kv_options.merge_operator)",
                            db->path);
    /* Oldest first: the collected order reversed, in place. */
    for (size_t i = 0, j = f->nops - 1; i < j; i++, j--) {
        void *p = f->ops[i];
        f->ops[i] = f->ops[j];
        f->ops[j] = p;
        size_t n = f->olens[i];
        f->olens[i] = f->olens[j];
        f->olens[j] = n;
    }
    void *res = NULL;
    size_t rlen = 0;
    int r = op->full_merge(op->state, f->key, f->klen, f->base, f->base ? f->base_len : 0,
                           (const void *const *)f->ops, f->olens, f->nops, &res, &rlen);
    COUNT(db, merge_read, f->nops);
    if (r != 0) {
        free(res);
        return kv_error_set(KV_ECORRUPT, "%s: merge operator %s failed (%d) on %zu operands",
                            db->path, op->name ? op->name : "(unnamed)", r, f->nops);
    }
    if (!res && rlen)
        return kv_error_set(KV_ECORRUPT, "%s: merge operator %s gave no result", db->path,
                            op->name ? op->name : "(unnamed)");
    if (!dest) {
        if (!res && !(res = malloc(1)))
            return KV_ENOMEM;
        *val = res;
        *vlen = rlen;
        return KV_OK;
    }
    int rc = put_value(res, rlen, val, vlen, dest);
    free(res);
    return rc;
}

/* The walk for a key that has merge operands: every version of it at or
 * below the snapshot, newest first, source by source, down to a value, a
 * deletion (a tombstone, a covering range tombstone, an expired entry) or
 * the bottom, then the merge. Slower than the plain walk (a table iterator
 * per table whose filter lets the key through), and taken only when the
 * plain walk found an operand. */
static int full_walk(kv_db *db, const struct kv_read_view *rv, const void *key, size_t klen,
                     const struct get_candidate *cands, size_t ncands, const uint8_t *ikey,
                     size_t plen, void **val, size_t *vlen, const struct get_dest *dest,
                     struct kv_get_trace *tr)
{
    struct full_walk f = {.db = db,
                          .v = rv->v,
                          .key = key,
                          .klen = klen,
                          .snap = rv->seq,
                          .now = db->o.ttl_seconds ? (uint64_t)time(NULL) : 0};
    if (tr)
        tr->nsteps = 0; /* the trace shows this walk */
    const struct kv_view *view = rv->hold.view;
    int rc = full_mem(&f, rv->mem, view->mem_rt, KV_EXPLAIN_MEMTABLE, tr);
    if (rc == KV_OK && !f.done)
        rc = full_mem(&f, rv->imm, view->imm_rt, KV_EXPLAIN_IMMUTABLE, tr);
    for (size_t i = 0; rc == KV_OK && !f.done && i < ncands; i++) {
        rc = full_table(&f, cands[i].t, cands[i].level, ikey, plen, cands[i].h, tr);
    }
    if (rc == KV_OK) {
        if (f.nops) {
            rc = full_merge(&f, val, vlen, dest);
            if (f.st && rc == KV_OK) {
                f.st->s.outcome = KV_EXPLAIN_MERGED;
                f.st->s.merge_operands = f.nops;
            }
        } else if (f.base) {
            rc = put_value(f.base, f.base_len, val, vlen, dest);
        } else {
            rc = KV_NOTFOUND;
        }
    }
    if (rc != KV_OK && rc != KV_NOTFOUND && rc != KV_ERANGE && f.st)
        f.st->s.outcome = KV_EXPLAIN_FAILED;
    for (size_t i = 0; i < f.nops; i++)
        free(f.ops[i]);
    free(f.ops);
    free(f.olens);
    free(f.base);
    return rc;
}

/* ---- the walk ------------------------------------------------------------------------- */

/* The walk: the memtables, then the candidate tables (find_candidates) in
 * order. The first entry found decides; tables after it are not asked,
 * so the counters say what a walk table by table would have done. A range
 * tombstone covering the key in a source where nothing newer was found
 * decides too (KV_NOTFOUND). A merge operand hands the key to full_walk.
 * With a trace, its steps are allocated here (once the version, and so the
 * most steps it can take, is known) and the trace keeps the version's
 * reference. rv: the view the walk reads, held by the caller. */
GET_INLINE int walk_view(kv_db *db, const struct kv_read_view *rv, const void *key, size_t klen,
                         void **val, size_t *vlen, const struct get_dest *dest,
                         struct kv_get_trace *tr)
{
    *val = NULL;
    *vlen = 0;
    /* The key's hash for the memtables' filters and the tables of this
     * database's own kind; a table of the other kind (the database
     * switched between keyed and unkeyed) gets its hash computed then. */
    struct kv_key_hashes kh = {.key = key, .klen = klen};
    uint64_t h = kv_key_hash(db, &kh, db->keyed);
    struct kv_version *v = rv->v;
    uint64_t snap = rv->seq;

    int decided = 0, rc = KV_NOTFOUND;
    struct get_state g = {0, 0};
    struct get_candidate stack_cands[GET_STACK_CANDIDATES + KV_LEVELS], *cands = stack_cands;
    size_t ncands = 0;
    uint8_t stack[512];
    uint8_t *ikey = stack;
    size_t plen = 0;
    if (tr) {
        tr->hash = h;
        tr->snapshot = snap;
        tr->live_tables = v->n;
        kv_version_ref(v);
        tr->version = v; /* the caller drops it */
        tr->nsteps = 0;
        if (!(tr->steps = malloc((2 + v->n) * sizeof *tr->steps))) {
            rc = KV_ENOMEM;
            goto out;
        }
    }

    rc = memtables_lookup(db, rv, key, klen, h, val, vlen, dest, &decided, &g, tr);
    if (decided && !g.full) {
        COUNT(db, memtable_hits, 1);
        goto out;
    }

    if (v->nruns > GET_STACK_CANDIDATES + KV_LEVELS &&
        !(cands = malloc(v->nruns * sizeof *cands))) {
        cands = stack_cands;
        rc = KV_ENOMEM;
        goto out;
    }
    ncands = find_candidates(db, v, key, klen, &kh, cands);
    if (ncands || g.full) {
        size_t need = 2 * klen + 2 + KV_IKEY_TRAILER;
        if (need > sizeof stack && !(ikey = malloc(need))) {
            ikey = stack;
            rc = KV_ENOMEM;
            goto out;
        }
        plen = kv_ikey_put_prefix(ikey, key, klen);
        /* The smallest trailer of sequence `snap`: the lookup lands on the
         * newest entry with a sequence <= snap. */
        kv_ikey_put_trailer(ikey + plen, snap, 0xFF);
        for (size_t i = 0; !decided && i < ncands; i++)
            rc = table_lookup(db, v, cands[i].t, cands[i].level, key, klen, ikey, plen, cands[i].h,
                              snap, val, vlen, dest, &decided, &g, tr);
    }
    if (g.full)
        rc = full_walk(db, rv, key, klen, cands, ncands, ikey, plen, val, vlen, dest, tr);
    else if (!decided)
        rc = KV_NOTFOUND;
out:
    if (ikey != stack)
        free(ikey);
    if (cands != stack_cands)
        free(cands);
    return rc;
}

GET_INLINE int get_walk(kv_db *db, const kv_snapshot *snapshot, const void *key, size_t klen,
                        void **val, size_t *vlen, const struct get_dest *dest,
                        struct kv_get_trace *tr)
{
    COUNT(db, gets, 1);
    struct kv_read_view rv;
    view_take(db, snapshot, &rv);
    int rc = walk_view(db, &rv, key, klen, val, vlen, dest, tr);
    kv_view_leave(db, &rv.hold);
    return rc;
}

int kv_get_at(kv_db *db, const kv_snapshot *snapshot, const void *key, size_t klen, void **val,
              size_t *vlen)
{
    if (!db || !val || !vlen)
        return kv_db_einval(db, "kv_get", "%s is NULL", !db ? "db" : !val ? "val" : "vlen");
    if (kv_db_check_key(db, "kv_get", key, klen) != KV_OK)
        return KV_EINVAL;
    unsigned long long mark = kv_error_mark();
    int rc = get_walk(db, snapshot, key, klen, val, vlen, NULL, NULL);
    return rc == KV_NOTFOUND ? rc : kv_db_fail(db, "kv_get", mark, rc);
}

int kv_get_into(kv_db *db, const kv_snapshot *snap, const void *key, size_t klen, void *buf,
                size_t cap, size_t *vlen)
{
    if (!db || !vlen || (cap && !buf))
        return kv_db_einval(db, "kv_get_into", "%s",
                            !db     ? "db is NULL"
                            : !vlen ? "vlen is NULL"
                                    : "NULL buf with a nonzero cap");
    if (kv_db_check_key(db, "kv_get_into", key, klen) != KV_OK)
        return KV_EINVAL;
    unsigned long long mark = kv_error_mark();
    struct get_dest dest = {buf, cap};
    void *unused = NULL;
    size_t n = 0;
    int rc;
    if (db->o.merge_operator) {
        /* A table's merge operand would be read into buf before the merge's
         * result is known: with a merge operator, the value comes in a
         * buffer of its own and is copied when it fits (nothing written
         * otherwise). */
        rc = get_walk(db, snap, key, klen, &unused, &n, NULL, NULL);
        if (rc == KV_OK && n > cap)
            rc = KV_ERANGE;
        else if (rc == KV_OK && n)
            memcpy(buf, unused, n);
        kv_free(unused);
    } else {
        rc = get_walk(db, snap, key, klen, &unused, &n, &dest, NULL);
    }
    *vlen = rc == KV_OK || rc == KV_ERANGE ? n : 0;
    if (rc == KV_ERANGE)
        return kv_error_set(rc, "%s: kv_get_into: value of %zu bytes, buffer of %zu", db->path, n,
                            cap);
    return rc == KV_NOTFOUND ? rc : kv_db_fail(db, "kv_get_into", mark, rc);
}

int kv_db_get_traced(kv_db *db, const void *key, size_t klen, void **val, size_t *vlen,
                     struct kv_get_trace *tr)
{
    return get_walk(db, NULL, key, klen, val, vlen, NULL, tr);
}

int kv_get(kv_db *db, const void *key, size_t klen, void **val, size_t *vlen)
{
    return kv_get_at(db, NULL, key, klen, val, vlen);
}

/* ---- reads from other files (multiget.c) ------------------------------------------ */

void kv_db_view_take(kv_db *db, const kv_snapshot *snap, struct kv_read_view *out)
{
    view_take(db, snap, out);
}

void kv_db_view_drop(kv_db *db, struct kv_read_view *rv)
{
    kv_view_leave(db, &rv->hold);
}

int kv_db_view_mem_get(kv_db *db, const struct kv_read_view *rv, const void *key, size_t klen,
                       uint64_t h, void **val, size_t *vlen, int *decided)
{
    *decided = 0;
    struct get_state g = {0, 0};
    int rc = memtables_lookup(db, rv, key, klen, h, val, vlen, NULL, decided, &g, NULL);
    if (g.full) /* an operand: the whole walk, at the same view */
        rc = walk_view(db, rv, key, klen, val, vlen, NULL, NULL);
    return rc;
}

int kv_db_view_get(kv_db *db, const struct kv_read_view *rv, const void *key, size_t klen,
                   void **val, size_t *vlen)
{
    return walk_view(db, rv, key, klen, val, vlen, NULL, NULL);
}
