/* iter.c - kv_iter: ordered reads over the memtables and every level, as
 * of a snapshot.
 *
 * An iterator pins what it reads (the memtables and the version of tables
 * when it was made), so flushes and compactions under it change nothing it
 * sees. Its sources ("children") are the memtable, the immutable memtable,
 * each level-0 table, and each deeper level as one run of disjoint tables.
 * Each child yields entries in internal order: user key ascending, then
 * newest first, and steps both ways by itself.
 *
 * Two layers. The merge keeps the valid children in a binary heap ordered
 * for the current direction (forward: smallest entry on top; backward:
 * largest), and a step moves only the top child and sifts it down: with
 * one child, or disjoint ones, the top rarely changes and a step costs one
 * or two comparisons. Over it, the visibility rules, as LevelDB's DB
 * iterator has them:
 *
 * Forward: the top is the newest version of the smallest key; versions
 * newer than the snapshot are passed over, the newest visible one decides
 * (a tombstone hides the key), older ones are skipped. The iterator then
 * stands on that entry: its key and value point into the child, uncopied.
 *
 * Backward: entries come largest first, so a key's versions come oldest
 * first; the last visible one seen before the key changes is the newest,
 * and decides. The children have by then moved past the key, so its key
 * and value are copied.
 *
 * Direction changes only when the caller's does: then every child is
 * repositioned once around the current key (before it, or after it) and
 * the heap rebuilt the other way.
 *
 * Bounds (kv_iter_set_bounds): every move stops at them, and a level's
 * child does not open a table that lies wholly outside them. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "order.h"
#include "util/error.h"
#include "util/ikey.h"

enum child_kind { MEM, TABLES };

struct child {
    enum child_kind kind;
    kv_mem_iter mi;              /* MEM */
    struct kv_table **t;         /* TABLES: sorted, disjoint (one for level 0) */
    size_t n, i;
    kv_sst_iter *si;
    /* the current entry */
    int valid;
    const uint8_t *key;          /* user key */
    size_t klen;
    uint64_t seq;
    int kind_of;                 /* KV_KIND_* */
    const uint8_t *val;
    size_t vlen;
    uint8_t *buf;                /* decoded user key of a table entry */
    size_t cap;
};

enum { FWD, REV };

struct bound {
    uint8_t *k;
    size_t len;
    int set;
};

struct kv_iter {
    kv_db *db;
    const kv_comparator *cmp; /* db->cmp: the user key order (order.h) */
    uint64_t snap;
    struct kv_view_hold hold; /* a long hold on the view it reads (view.h) */
    struct kv_memref *mem, *imm; /* the view's */
    struct kv_version *v;
    struct child *c;
    size_t nc;
    struct child **heap; /* the valid children, top first for dir */
    size_t hn;
    int dir;            /* FWD or REV: how the heap is ordered */
    int valid, status;
    char *text;         /* status's text (status.h), kept for kv_iter_status; may be NULL */
    unsigned long long mark; /* kv_error_mark when the current call began */
    /* The current pair: forward, into the top child; backward, into sk/sv. */
    const uint8_t *key, *val;
    size_t klen, vlen;
    uint8_t *sk, *sv;   /* backward: the copied pair */
    size_t skcap, svcap;
    /* The current value lives in a blob file: val/vlen hold its reference,
     * and the value is read into bv the first time kv_iter_value asks for
     * it (bv_ready), so a scan of keys alone reads no blob. */
    int blob, bv_ready;
    uint8_t *bv;
    size_t bvlen, bvcap;
    uint8_t *skip;      /* forward: the key whose older versions are passed */
    size_t skiplen, skipcap;
    uint8_t *scratch;   /* encoded internal keys for table seeks */
    size_t scap;
    struct bound lo, hi; /* lower (inclusive) and upper (exclusive) bounds */
};

/* ---- children ------------------------------------------------------------------------ */

static int grow(uint8_t **p, size_t *cap, size_t need)
{
    if (need <= *cap)
        return KV_OK;
    size_t nc = *cap ? *cap : 64;
    while (nc < need)
        nc *= 2;
    uint8_t *n = realloc(*p, nc);
    if (!n)
        return KV_ENOMEM;
    *p = n;
    *cap = nc;
    return KV_OK;
}

/* Reads the child's entry after a move; KV_OK or an error. */
static int load(struct child *c)
{
    c->valid = 0;
    if (c->kind == MEM) {
        if (!kv_mem_iter_valid(&c->mi))
            return KV_OK;
        kv_mem_entry e;
        kv_mem_iter_entry(&c->mi, &e);
        c->key = e.key;
        c->klen = e.klen;
        c->seq = e.seq;
        c->kind_of = e.kind;
        c->val = e.val;
        c->vlen = e.vlen;
        c->valid = 1;
        return KV_OK;
    }
    if (!c->si || !kv_sst_iter_valid(c->si))
        return c->si ? kv_sst_iter_status(c->si) : KV_OK;
    size_t ilen;
    const uint8_t *ik = kv_sst_iter_key(c->si, &ilen);
    if (kv_ikey_plain(ik, ilen, &c->klen, &c->seq, &c->kind_of)) {
        /* no 0x00 in the user key: it is the internal key's first bytes,
         * valid until this child moves, as the value is */
        c->key = ik;
    } else {
        if (grow(&c->buf, &c->cap, ilen) != KV_OK)
            return KV_ENOMEM;
        if (!kv_ikey_decode(ik, ilen, c->buf, ilen, &c->klen, &c->seq, &c->kind_of))
            return KV_ECORRUPT;
        c->key = c->buf;
    }
    if (c->kind_of != KV_KIND_VALUE && c->kind_of != KV_KIND_TOMBSTONE &&
        c->kind_of != KV_KIND_BLOB)
        return KV_ECORRUPT;
    c->val = kv_sst_iter_value(c->si, &c->vlen);
    c->valid = 1;
    return KV_OK;
}

/* 1 when table i of c may hold keys inside the iterator's bounds. */
static int table_in_bounds(const kv_iter *it, const struct child *c, size_t i)
{
    const kv_table_meta *m = &c->t[i]->meta;
    if (it->hi.set && kv_ucmp(it->cmp, m->smallest, m->smallest_len, it->hi.k, it->hi.len) >= 0)
        return 0;
    if (it->lo.set && kv_ucmp(it->cmp, m->largest, m->largest_len, it->lo.k, it->lo.len) < 0)
        return 0;
    return 1;
}

/* Opens table i of a TABLES child (no positioning); with *opened 0 when
 * the table lies outside the bounds (nothing opened, child not valid). */
static int open_table(const kv_iter *it, struct child *c, size_t i, int *opened)
{
    kv_sst_iter_free(c->si);
    c->si = NULL;
    c->valid = 0;
    c->i = i;
    *opened = 0;
    if (i >= c->n || !table_in_bounds(it, c, i))
        return KV_OK;
    *opened = 1;
    return kv_sst_iter_new(c->t[i]->reader, &c->si);
}

/* For TABLES: past a table's end, the next table's first entry. */
static int settle_forward(const kv_iter *it, struct child *c)
{
    for (;;) {
        if (c->si && kv_sst_iter_valid(c->si))
            return load(c);
        int rc = c->si ? kv_sst_iter_status(c->si) : KV_OK;
        if (rc != KV_OK || c->i + 1 >= c->n) {
            c->valid = 0;
            return rc;
        }
        int opened;
        if ((rc = open_table(it, c, c->i + 1, &opened)) != KV_OK || !opened)
            return rc;
        kv_sst_iter_seek_first(c->si);
    }
}

/* For TABLES: before a table's start, the previous table's last entry. */
static int settle_backward(const kv_iter *it, struct child *c)
{
    for (;;) {
        if (c->si && kv_sst_iter_valid(c->si))
            return load(c);
        int rc = c->si ? kv_sst_iter_status(c->si) : KV_OK;
        if (rc != KV_OK || c->i == 0) {
            c->valid = 0;
            return rc;
        }
        int opened;
        if ((rc = open_table(it, c, c->i - 1, &opened)) != KV_OK || !opened)
            return rc;
        kv_sst_iter_seek_last(c->si);
    }
}

static int child_first(const kv_iter *it, struct child *c)
{
    if (c->kind == MEM) {
        kv_mem_iter_first(&c->mi);
        return load(c);
    }
    int opened, rc = open_table(it, c, 0, &opened);
    if (rc != KV_OK || !opened)
        return rc;
    kv_sst_iter_seek_first(c->si);
    return settle_forward(it, c);
}

static int child_last(const kv_iter *it, struct child *c)
{
    if (c->kind == MEM) {
        kv_mem_iter_last(&c->mi);
        return load(c);
    }
    int opened, rc = open_table(it, c, c->n ? c->n - 1 : 0, &opened);
    if (rc != KV_OK || !opened)
        return rc;
    kv_sst_iter_seek_last(c->si);
    return settle_backward(it, c);
}

static int child_next(const kv_iter *it, struct child *c)
{
    if (c->kind == MEM) {
        kv_mem_iter_next(&c->mi);
        return load(c);
    }
    kv_sst_iter_next(c->si);
    return settle_forward(it, c);
}

static int child_prev(const kv_iter *it, struct child *c)
{
    if (c->kind == MEM) {
        kv_mem_iter_prev(&c->mi);
        return load(c);
    }
    kv_sst_iter_prev(c->si);
    return settle_backward(it, c);
}

/* First entry >= (key, seq): `ik` is the internal key of that. */
static int child_seek(const kv_iter *it, struct child *c, const uint8_t *key, size_t klen,
                      uint64_t seq, const uint8_t *ik, size_t iklen)
{
    if (c->kind == MEM) {
        kv_mem_iter_seek(&c->mi, key, klen, seq);
        return load(c);
    }
    size_t at = kv_tables_at_or_after(c->t, c->n, key, klen, it->cmp);
    int opened, rc = open_table(it, c, at, &opened);
    if (rc != KV_OK || !opened)
        return rc;
    kv_sst_iter_seek(c->si, ik, iklen);
    return settle_forward(it, c);
}

/* Last entry of a user key < key: `prefix` is key's escaped form, which
 * sorts after every internal key of a smaller user key and before every
 * one of key itself. */
static int child_seek_before(const kv_iter *it, struct child *c, const uint8_t *key,
                             size_t klen, const uint8_t *prefix, size_t plen)
{
    if (c->kind == MEM) {
        kv_mem_iter_seek_before(&c->mi, key, klen);
        return load(c);
    }
    /* The last table whose smallest key is < key. */
    size_t lo = 0, hi = c->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const kv_table_meta *m = &c->t[mid]->meta;
        if (kv_ucmp(it->cmp, m->smallest, m->smallest_len, key, klen) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0) {
        c->valid = 0;
        return KV_OK;
    }
    int opened, rc = open_table(it, c, lo - 1, &opened);
    if (rc != KV_OK || !opened)
        return rc;
    kv_sst_iter_seek_before(c->si, prefix, plen);
    return settle_backward(it, c);
}

/* ---- the merge --------------------------------------------------------------------- */

/* Internal order of two child entries. */
static inline int entry_cmp(const kv_comparator *cmp, const struct child *a,
                            const struct child *b)
{
    int d = kv_ucmp(cmp, a->key, a->klen, b->key, b->klen);
    if (d)
        return d;
    return a->seq > b->seq ? -1 : a->seq < b->seq;
}

/* 1 when a comes before b in the heap's direction. */
static inline int before(const kv_iter *it, const struct child *a, const struct child *b)
{
    int d = entry_cmp(it->cmp, a, b);
    return it->dir == FWD ? d < 0 : d > 0;
}

static void sift_down(kv_iter *it, size_t i)
{
    struct child **h = it->heap, *x = h[i];
    for (;;) {
        size_t l = 2 * i + 1;
        if (l >= it->hn)
            break;
        if (l + 1 < it->hn && before(it, h[l + 1], h[l]))
            l++;
        if (!before(it, h[l], x))
            break;
        h[i] = h[l];
        i = l;
    }
    h[i] = x;
}

/* After every child was positioned: the heap of the valid ones, for dir. */
static void heap_build(kv_iter *it, int dir)
{
    it->dir = dir;
    it->hn = 0;
    for (size_t i = 0; i < it->nc; i++)
        if (it->c[i].valid)
            it->heap[it->hn++] = &it->c[i];
    for (size_t i = it->hn / 2; i-- > 0;)
        sift_down(it, i);
}

static inline struct child *top(const kv_iter *it)
{
    return it->hn ? it->heap[0] : NULL;
}

static void stop(kv_iter *it, int rc)
{
    it->valid = 0;
    it->hn = 0;
    if (rc != KV_OK && it->status == KV_OK) {
        it->status = rc;
        char t[KV_DB_TEXT];
        kv_db_keep_text(it->db, t, "iterator", it->mark, rc);
        it->text = strdup(t); /* NULL: kv_iter_status says less */
    }
}

/* Moves the top child one step in the heap's direction and sifts it down:
 * one or two comparisons while it stays on top. 0 after an error. */
static int step(kv_iter *it)
{
    struct child *m = it->heap[0];
    int rc = it->dir == FWD ? child_next(it, m) : child_prev(it, m);
    if (rc != KV_OK) {
        stop(it, rc);
        return 0;
    }
    if (!m->valid) {
        it->heap[0] = it->heap[--it->hn];
        if (it->hn)
            sift_down(it, 0);
    } else if (it->hn > 1)
        sift_down(it, 0);
    return 1;
}

/* Every child at (key, snapshot), heap forward. */
static void seek_all(kv_iter *it, const uint8_t *key, size_t klen)
{
    if (grow(&it->scratch, &it->scap, 2 * klen + 2 + KV_IKEY_TRAILER) != KV_OK) {
        stop(it, KV_ENOMEM);
        return;
    }
    size_t plen = kv_ikey_put_prefix(it->scratch, key, klen);
    kv_ikey_put_trailer(it->scratch + plen, it->snap, 0xFF);
    for (size_t i = 0; i < it->nc; i++) {
        int rc = child_seek(it, &it->c[i], key, klen, it->snap, it->scratch,
                            plen + KV_IKEY_TRAILER);
        if (rc != KV_OK) {
            stop(it, rc);
            return;
        }
    }
    heap_build(it, FWD);
}

/* Every child at its last entry of a user key < key, heap backward. */
static void seek_before_all(kv_iter *it, const uint8_t *key, size_t klen)
{
    if (grow(&it->scratch, &it->scap, 2 * klen + 2) != KV_OK) {
        stop(it, KV_ENOMEM);
        return;
    }
    size_t plen = kv_ikey_put_prefix(it->scratch, key, klen);
    for (size_t i = 0; i < it->nc; i++) {
        int rc = child_seek_before(it, &it->c[i], key, klen, it->scratch, plen);
        if (rc != KV_OK) {
            stop(it, rc);
            return;
        }
    }
    heap_build(it, REV);
}

/* ---- visibility -------------------------------------------------------------------- */

/* From the heap's top (forward), the next key visible at the snapshot and
 * not deleted, below the upper bound. With it->skiplen set (skipping): a
 * key already decided, whose remaining versions are passed. */
static void find_forward(kv_iter *it, int skipping)
{
    for (;;) {
        struct child *m = top(it);
        if (!m || (it->hi.set && kv_ucmp(it->cmp, m->key, m->klen, it->hi.k, it->hi.len) >= 0)) {
            it->valid = 0;
            return;
        }
        if (m->seq <= it->snap &&
            !(skipping && kv_ucmp(it->cmp, m->key, m->klen, it->skip, it->skiplen) == 0)) {
            if (m->kind_of != KV_KIND_TOMBSTONE) {
                it->key = m->key;
                it->klen = m->klen;
                it->val = m->val;
                it->vlen = m->vlen;
                it->blob = m->kind_of == KV_KIND_BLOB;
                it->bv_ready = 0;
                it->valid = 1;
                return;
            }
            /* A tombstone: the key's older versions are passed too. */
            if (grow(&it->skip, &it->skipcap, m->klen + 1) != KV_OK) {
                stop(it, KV_ENOMEM);
                return;
            }
            memcpy(it->skip, m->key, m->klen);
            it->skiplen = m->klen;
            skipping = 1;
        }
        if (!step(it))
            return;
    }
}

/* From the heap's top (backward), the previous visible key, not below the
 * lower bound: a key's versions come oldest first, and the last visible
 * one before the key changes decides it. The pair is copied (sk, sv): the
 * children stand before it afterwards. */
static void find_backward(kv_iter *it)
{
    int have = 0; /* sk/sv hold a visible value */
    for (;;) {
        struct child *m = top(it);
        if (!m || (it->lo.set && kv_ucmp(it->cmp, m->key, m->klen, it->lo.k, it->lo.len) < 0))
            break;
        if (m->seq <= it->snap) {
            if (have && kv_ucmp(it->cmp, m->key, m->klen, it->sk, it->klen) < 0)
                break; /* the key before the decided one */
            if (m->kind_of == KV_KIND_TOMBSTONE)
                have = 0;
            else {
                if (grow(&it->sk, &it->skcap, m->klen + 1) != KV_OK ||
                    grow(&it->sv, &it->svcap, m->vlen + 1) != KV_OK) {
                    stop(it, KV_ENOMEM);
                    return;
                }
                memcpy(it->sk, m->key, m->klen);
                it->klen = m->klen;
                memcpy(it->sv, m->val, m->vlen);
                it->vlen = m->vlen;
                it->blob = m->kind_of == KV_KIND_BLOB;
                it->bv_ready = 0;
                have = 1;
            }
        }
        if (!step(it))
            return;
    }
    it->valid = have;
    it->key = it->sk;
    it->val = it->sv;
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
    size_t n = 2 + (v->start[1] - v->start[0]) + (KV_LEVELS - 1);
    it->c = calloc(n, sizeof *it->c);
    it->heap = calloc(n, sizeof *it->heap);
    if (!it->c || !it->heap) {
        kv_iter_free(it);
        return kv_error_set(KV_ENOMEM, "%s: kv_iter_new: out of memory", db->path);
    }
    it->c[it->nc].kind = MEM;
    kv_mem_iter_init(&it->c[it->nc++].mi, it->mem->mem);
    if (it->imm) {
        it->c[it->nc].kind = MEM;
        kv_mem_iter_init(&it->c[it->nc++].mi, it->imm->mem);
    }
    for (size_t i = v->start[0]; i < v->start[1]; i++)
        it->c[it->nc++] = (struct child){.kind = TABLES, .t = &v->tables[i], .n = 1};
    for (int l = 1; l < KV_LEVELS; l++)
        if (v->start[l + 1] > v->start[l])
            it->c[it->nc++] = (struct child){.kind = TABLES, .t = &v->tables[v->start[l]],
                                             .n = v->start[l + 1] - v->start[l]};
    *out = it;
    return KV_OK;
}

void kv_iter_free(kv_iter *it)
{
    if (!it)
        return;
    for (size_t i = 0; i < it->nc; i++) {
        kv_sst_iter_free(it->c[i].si);
        free(it->c[i].buf);
    }
    free(it->c);
    free(it->heap);
    free(it->sk);
    free(it->sv);
    free(it->bv);
    free(it->skip);
    free(it->lo.k);
    free(it->hi.k);
    free(it->scratch);
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

void kv_iter_seek_first(kv_iter *it)
{
    if (!it || it->status)
        return;
    it->mark = kv_error_mark();
    if (it->lo.set) { /* the bound is where the range starts */
        seek_all(it, it->lo.k, it->lo.len);
    } else {
        for (size_t i = 0; i < it->nc; i++) {
            int rc = child_first(it, &it->c[i]);
            if (rc != KV_OK) {
                stop(it, rc);
                return;
            }
        }
        heap_build(it, FWD);
    }
    if (it->status == KV_OK)
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
    if (it->lo.set && kv_ucmp(it->cmp, key, klen, it->lo.k, it->lo.len) < 0) {
        key = it->lo.k;
        klen = it->lo.len;
    }
    seek_all(it, key, klen);
    if (it->status == KV_OK)
        find_forward(it, 0);
}

void kv_iter_seek_last(kv_iter *it)
{
    if (!it || it->status)
        return;
    it->mark = kv_error_mark();
    if (it->hi.set) { /* the last key below the bound */
        seek_before_all(it, it->hi.k, it->hi.len);
    } else {
        for (size_t i = 0; i < it->nc; i++) {
            int rc = child_last(it, &it->c[i]);
            if (rc != KV_OK) {
                stop(it, rc);
                return;
            }
        }
        heap_build(it, REV);
    }
    if (it->status == KV_OK)
        find_backward(it);
}

void kv_iter_next(kv_iter *it)
{
    if (!kv_iter_valid(it))
        return;
    it->mark = kv_error_mark();
    if (grow(&it->skip, &it->skipcap, it->klen + 1) != KV_OK) {
        stop(it, KV_ENOMEM);
        return;
    }
    memcpy(it->skip, it->key, it->klen);
    it->skiplen = it->klen;
    if (it->dir == REV) {
        /* The children stand before the current key: put them at its
         * newest visible version, then pass its versions as forward. */
        seek_all(it, it->skip, it->skiplen);
        if (it->status != KV_OK)
            return;
    } else if (!step(it)) /* off the current entry */
        return;
    find_forward(it, 1);
}

void kv_iter_prev(kv_iter *it)
{
    if (!kv_iter_valid(it))
        return;
    it->mark = kv_error_mark();
    if (it->dir == FWD) {
        /* The children stand at the current key's newest visible version
         * or after: put them before its first version. The key points
         * into a child that moves, so it is copied first. */
        if (grow(&it->skip, &it->skipcap, it->klen + 1) != KV_OK) {
            stop(it, KV_ENOMEM);
            return;
        }
        memcpy(it->skip, it->key, it->klen);
        it->skiplen = it->klen;
        seek_before_all(it, it->skip, it->skiplen);
        if (it->status != KV_OK)
            return;
    }
    /* Backward the children already stand before the current key. */
    find_backward(it);
}

static int set_bound(struct bound *b, const void *k, size_t len)
{
    if (!k) {
        b->set = 0;
        return KV_OK;
    }
    uint8_t *n = malloc(len ? len : 1);
    if (!n)
        return KV_ENOMEM;
    memcpy(n, k, len);
    free(b->k);
    b->k = n;
    b->len = len;
    b->set = 1;
    return KV_OK;
}

int kv_iter_set_bounds(kv_iter *it, const void *lower, size_t llen, const void *upper,
                       size_t ulen)
{
    if (!it)
        return kv_db_einval(NULL, "kv_iter_set_bounds", "it is NULL");
    if (lower && upper && kv_ucmp(it->cmp, lower, llen, upper, ulen) > 0)
        return kv_db_einval(it->db, "kv_iter_set_bounds", "lower bound above upper bound");
    struct bound lo = {0}, hi = {0};
    if (set_bound(&lo, lower, llen) != KV_OK || set_bound(&hi, upper, ulen) != KV_OK) {
        free(lo.k);
        return kv_error_set(KV_ENOMEM, "%s: kv_iter_set_bounds: out of memory", it->db->path);
    }
    free(it->lo.k);
    free(it->hi.k);
    it->lo = lo;
    it->hi = hi;
    /* Children may stand on tables the new bounds exclude: a seek puts
     * everything right. */
    it->valid = 0;
    it->hn = 0;
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
    kv_iter_seek_first(it);
    return KV_OK;
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

/* Reads the current value from its blob file into it->bv. */
static int load_blob(kv_iter *it)
{
    for (;;) {
        struct kv_blob_dest d = {it->bv, it->bvcap};
        size_t n = 0;
        int rc = kv_blob_get(it->db, it->v->blobs, it->v->nblobs, it->val, it->vlen, it->key,
                             it->klen, NULL, &n, &d, NULL);
        if (rc == KV_ERANGE && grow(&it->bv, &it->bvcap, n ? n : 1) == KV_OK)
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
    if (ok && it->blob && !it->bv_ready) {
        it->mark = kv_error_mark();
        int rc = load_blob(it);
        if (rc != KV_OK) {
            stop(it, rc);
            ok = 0;
        }
    }
    if (vlen)
        *vlen = !ok ? 0 : it->blob ? it->bvlen : it->vlen;
    return !ok ? NULL : it->blob ? (it->bv ? it->bv : (const uint8_t *)"") : it->val;
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
