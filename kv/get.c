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

/* The memtable m's answer: KV_OK (a value, copied), KV_NOTFOUND with
 * *decided set (a tombstone), or KV_NOTFOUND (ask the next one). Its
 * filter, asked with the Get's hash h, may spare the skiplist walk: a "no"
 * is sure for every entry at or below snap (apply_entry says why). */
GET_INLINE int mem_lookup(kv_db *db, const struct kv_memref *m, int where, const void *key,
                          size_t klen, uint64_t h, uint64_t snap, void **val, size_t *vlen,
                          const struct get_dest *dest, int *decided, struct kv_get_trace *tr)
{
    if (!m)
        return KV_NOTFOUND;
    struct kv_get_step *st = trace_step(tr, where);
    if (kv_mem_has_filter(m->mem)) {
        if (!kv_mem_may_contain(m->mem, h)) {
            COUNT(db, memtable_filter_negatives, 1);
            if (st)
                st->s.filter = KV_EXPLAIN_FILTER_NEGATIVE;
            return KV_NOTFOUND;
        }
        if (st)
            st->s.filter = KV_EXPLAIN_FILTER_MAYBE;
    }
    kv_mem_entry e;
    if (kv_mem_get(m->mem, key, klen, snap, &e) != KV_OK)
        return KV_NOTFOUND;
    *decided = 1;
    if (st) {
        st->s.seq = e.seq;
        st->s.outcome = e.kind == KV_KIND_VALUE ? KV_EXPLAIN_FOUND : KV_EXPLAIN_DELETED;
    }
    return e.kind == KV_KIND_VALUE ? put_value(e.val, e.vlen, val, vlen, dest) : KV_NOTFOUND;
}

/* The memtables' answer at rv->seq: the active one, then the immutable
 * one, as mem_lookup gives it (*decided set when one of them decided). */
GET_INLINE int memtables_lookup(kv_db *db, const struct kv_read_view *rv, const void *key,
                                size_t klen, uint64_t h, void **val, size_t *vlen,
                                const struct get_dest *dest, int *decided, struct kv_get_trace *tr)
{
    int rc = mem_lookup(db, rv->mem, KV_EXPLAIN_MEMTABLE, key, klen, h, rv->seq, val, vlen, dest,
                        decided, tr);
    if (!*decided)
        rc = mem_lookup(db, rv->imm, KV_EXPLAIN_IMMUTABLE, key, klen, h, rv->seq, val, vlen, dest,
                        decided, tr);
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

GET_INLINE int table_lookup(kv_db *db, const struct kv_version *v, struct kv_table *t,
                            unsigned level, const void *key, size_t klen, const uint8_t *ikey,
                            size_t plen, uint64_t h, void **val, size_t *vlen,
                            const struct get_dest *dest, int *decided, struct kv_get_trace *tr)
{
    struct kv_get_step *st = trace_step(tr, KV_EXPLAIN_TABLE);
    COUNT(db, tables_probed, 1);
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
        return rc;
    *decided = 1;
    if (rc != KV_OK && rc != KV_ERANGE) { /* KV_ERANGE: a value too big for dest */
        if (st)
            st->s.outcome = KV_EXPLAIN_FAILED;
        return rc;
    }
    uint64_t seq;
    int kind;
    if (!kv_ikey_get_trailer(trailer, tlen, &seq, &kind) ||
        (kind != KV_KIND_VALUE && kind != KV_KIND_TOMBSTONE && kind != KV_KIND_BLOB)) {
        rc = KV_ECORRUPT;
        if (st)
            st->s.outcome = KV_EXPLAIN_FAILED;
    } else {
        if (kind == KV_KIND_TOMBSTONE)
            rc = KV_NOTFOUND;
        else if (kind == KV_KIND_BLOB)
            rc = blob_lookup(db, v, t, ikey, plen + KV_IKEY_TRAILER, plen, &pr, rc, key, klen, val,
                             vlen, dest, st);
        if (st) {
            st->s.seq = seq;
            st->s.outcome = rc == KV_OK || rc == KV_ERANGE ? KV_EXPLAIN_FOUND
                            : rc == KV_NOTFOUND            ? KV_EXPLAIN_DELETED
                                                           : KV_EXPLAIN_FAILED;
        }
    }
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
 * table per deeper level (their ranges are disjoint). Each one's filter
 * lines are asked for as it is found, so the filters are fetched from
 * memory together, and the probes that follow wait for about one memory
 * latency instead of one per table. Returns how many (at most
 * level-0 tables + KV_LEVELS - 1, the room `out` has). */
GET_INLINE size_t find_candidates(const kv_db *db, const struct kv_version *v, const void *key,
                                  size_t klen, struct kv_key_hashes *kh, struct get_candidate *out)
{
    size_t n = 0;
    for (size_t i = v->start[0]; i < v->start[1]; i++) {
        struct kv_table *t = v->tables[i];
        if (kv_sst_cmp(v->cmp, key, klen, t->meta.smallest, t->meta.smallest_len) < 0 ||
            kv_sst_cmp(v->cmp, key, klen, t->meta.largest, t->meta.largest_len) > 0)
            continue; /* outside its key range: not probed */
        uint64_t h = kv_key_hash(db, kh, t->filter_keyed);
        kv_sst_filter_prefetch(t->reader, h);
        out[n++] = (struct get_candidate){t, 0, h};
    }
    for (int level = 1; level < KV_LEVELS; level++) {
        if (v->start[level] == v->start[level + 1])
            continue;
        size_t j = kv_version_find(v, level, key, klen);
        if (j == SIZE_MAX)
            continue;
        uint64_t h = kv_key_hash(db, kh, v->tables[j]->filter_keyed);
        kv_sst_filter_prefetch(v->tables[j]->reader, h);
        out[n++] = (struct get_candidate){v->tables[j], (unsigned)level, h};
    }
    return n;
}

/* The walk: the memtables, then the candidate tables (find_candidates) in
 * order. The first entry found decides; tables after it are not asked,
 * so the counters say what a walk table by table would have done. With a
 * trace, its steps are allocated here (once the version, and so the most
 * steps it can take, is known) and the trace keeps the version's
 * reference. */
GET_INLINE int get_walk(kv_db *db, const kv_snapshot *snapshot, const void *key, size_t klen,
                        void **val, size_t *vlen, const struct get_dest *dest,
                        struct kv_get_trace *tr)
{
    *val = NULL;
    *vlen = 0;
    COUNT(db, gets, 1);
    /* The key's hash for the memtables' filters and the tables of this
     * database's own kind; a table of the other kind (the database
     * switched between keyed and unkeyed) gets its hash computed then. */
    struct kv_key_hashes kh = {.key = key, .klen = klen};
    uint64_t h = kv_key_hash(db, &kh, db->keyed);

    struct kv_read_view rv;
    view_take(db, snapshot, &rv);
    struct kv_version *v = rv.v;
    uint64_t snap = rv.seq;

    int decided = 0, rc = KV_NOTFOUND;
    struct get_candidate stack_cands[GET_STACK_CANDIDATES + KV_LEVELS], *cands = stack_cands;
    uint8_t stack[512];
    uint8_t *ikey = stack;
    if (tr) {
        tr->hash = h;
        tr->snapshot = snap;
        tr->live_tables = v->n;
        kv_version_ref(v);
        tr->version = v; /* the caller drops it */
        tr->nsteps = 0;
        if (!(tr->steps = malloc((2 + v->n) * sizeof *tr->steps))) {
            rc = KV_ENOMEM;
            goto out_unref;
        }
    }

    rc = memtables_lookup(db, &rv, key, klen, h, val, vlen, dest, &decided, tr);
    if (decided) {
        COUNT(db, memtable_hits, 1);
        goto out_unref;
    }

    size_t l0 = v->start[1] - v->start[0];
    if (l0 > GET_STACK_CANDIDATES && !(cands = malloc((l0 + KV_LEVELS) * sizeof *cands))) {
        cands = stack_cands;
        rc = KV_ENOMEM;
        goto out_unref;
    }
    size_t ncands = find_candidates(db, v, key, klen, &kh, cands);
    if (ncands) {
        size_t need = 2 * klen + 2 + KV_IKEY_TRAILER;
        if (need > sizeof stack && !(ikey = malloc(need))) {
            ikey = stack;
            rc = KV_ENOMEM;
            goto out_unref;
        }
        size_t plen = kv_ikey_put_prefix(ikey, key, klen);
        /* The smallest trailer of sequence `snap`: the lookup lands on the
         * newest entry with a sequence <= snap. */
        kv_ikey_put_trailer(ikey + plen, snap, 0xFF);
        for (size_t i = 0; !decided && i < ncands; i++)
            rc = table_lookup(db, v, cands[i].t, cands[i].level, key, klen, ikey, plen, cands[i].h,
                              val, vlen, dest, &decided, tr);
    }
    if (!decided)
        rc = KV_NOTFOUND;
out_unref:
    if (ikey != stack)
        free(ikey);
    if (cands != stack_cands)
        free(cands);
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
    int rc = get_walk(db, snap, key, klen, &unused, &n, &dest, NULL);
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
    return memtables_lookup(db, rv, key, klen, h, val, vlen, NULL, decided, NULL);
}
