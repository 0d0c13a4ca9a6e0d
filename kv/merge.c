/* merge.c - the merging iterator and the shadowing rule (merge.h).
 *
 * A source of tables reads one table at a time: past a table's end (or
 * before its start, backward) it opens the next (previous) one, unless
 * that one lies wholly outside the merge's bounds, where the source ends.
 * A table entry's user key is the internal key's own first bytes when it
 * holds no 0x00 (no copy), else it is unescaped into the source's buffer. */
#define _POSIX_C_SOURCE 200809L
#include "merge.h"

#include <stdlib.h>
#include <string.h>

#include "util/coding.h"
#include "util/error.h"
#include "util/ikey.h"

/* ---- sources ------------------------------------------------------------------------- */

int kv_merge_grow(uint8_t **p, size_t *cap, size_t need)
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

/* Reads the source's entry after a move; KV_OK or an error. */
static int load(struct kv_merge_source *s)
{
    s->valid = 0;
    if (s->type == KV_MERGE_MEM) {
        if (!kv_mem_iter_valid(&s->mi))
            return KV_OK;
        kv_mem_entry e;
        kv_mem_iter_entry(&s->mi, &e);
        s->key = e.key;
        s->klen = e.klen;
        s->seq = e.seq;
        s->kind = e.kind;
        s->val = e.val;
        s->vlen = e.vlen;
        s->valid = 1;
        return KV_OK;
    }
    if (!s->si || !kv_sst_iter_valid(s->si))
        return s->si ? kv_sst_iter_status(s->si) : KV_OK;
    size_t ilen;
    const uint8_t *ik = kv_sst_iter_key(s->si, &ilen);
    s->ikey = ik;
    s->ilen = ilen;
    if (kv_ikey_plain(ik, ilen, &s->klen, &s->seq, &s->kind)) {
        s->key = ik; /* valid until the source moves, as the value is */
    } else {
        if (kv_merge_grow(&s->buf, &s->cap, ilen) != KV_OK)
            return KV_ENOMEM;
        if (!kv_ikey_decode(ik, ilen, s->buf, ilen, &s->klen, &s->seq, &s->kind))
            return KV_ECORRUPT;
        s->key = s->buf;
    }
    if (!kv_kind_stored(s->kind))
        return KV_ECORRUPT;
    s->val = kv_sst_iter_value(s->si, &s->vlen);
    s->valid = 1;
    return KV_OK;
}

/* 1 when table i of s may hold keys inside m's bounds (lower inclusive,
 * upper exclusive). Inlined in open_table, as it was before open_gated
 * became its second caller. */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline int
table_in_bounds(const struct kv_merge *m, const struct kv_merge_source *s, size_t i)
{
    const kv_table_meta *t = &s->t[i]->meta;
    if (m->hi && kv_sst_cmp(m->cmp, t->smallest, t->smallest_len, m->hi, m->hilen) >= 0)
        return 0;
    if (m->lo && kv_sst_cmp(m->cmp, t->largest, t->largest_len, m->lo, m->lolen) < 0)
        return 0;
    return 1;
}

/* ---- the gate (merge.h) ------------------------------------------------------------------ */

/* A new step at the end of the trace, zeroed; NULL when no room could be
 * made (the trace's err says so). */
static struct kv_get_step *trace_step(struct kv_merge_trace *tr)
{
    if (tr->n == tr->cap) {
        size_t nc = tr->cap ? 2 * tr->cap : 16;
        struct kv_get_step *n = realloc(tr->steps, nc * sizeof *n);
        if (!n) {
            tr->err = KV_ENOMEM;
            return NULL;
        }
        tr->steps = n;
        tr->cap = nc;
    }
    struct kv_get_step *st = &tr->steps[tr->n++];
    memset(st, 0, sizeof *st);
    return st;
}

/* 1 when user key k, where a source moving forward (back: backward) was
 * positioned, lies in the range asked. The end it moves towards is
 * compared; the end it came from only when the positioning had no target
 * (g->near: a seek stands at or past its target by construction). */
static int in_query(const struct kv_merge *m, const uint8_t *k, size_t klen, int back)
{
    const struct kv_merge_gate *g = m->gate;
    if (back) {
        if (g->qlo && kv_sst_cmp(m->cmp, k, klen, g->qlo, g->qlolen) < 0)
            return 0;
        return !g->near || !g->qhi || kv_sst_cmp(m->cmp, k, klen, g->qhi, g->qhilen) < 0;
    }
    if (g->qhi && kv_sst_cmp(m->cmp, k, klen, g->qhi, g->qhilen) >= 0)
        return 0;
    return !g->near || !g->qlo || kv_sst_cmp(m->cmp, k, klen, g->qlo, g->qlolen) >= 0;
}

/* Sets the range asked: the bounds, narrowed by a positioning's target
 * (key; NULL: none) on its side (back: the upper end, else the lower).
 * g->near stays 0 only where the sources then stand inside that end: the
 * target is the bound itself (the caller's pointer) or narrowed it. */
static inline void gate_range(const struct kv_merge *m, const uint8_t *key, size_t klen, int back)
{
    struct kv_merge_gate *g = m->gate;
    g->near = 1;
    g->qlo = m->lo;
    g->qlolen = m->lolen;
    g->qhi = m->hi;
    g->qhilen = m->hilen;
    if (!key)
        return;
    if (back ? key == m->hi : key == m->lo) {
        g->near = 0;
    } else if (!back && (!m->lo || kv_sst_cmp(m->cmp, key, klen, m->lo, m->lolen) > 0)) {
        g->qlo = key;
        g->qlolen = klen;
        g->near = 0;
    } else if (back && (!m->hi || kv_sst_cmp(m->cmp, key, klen, m->hi, m->hilen) < 0)) {
        g->qhi = key;
        g->qhilen = klen;
        g->near = 0;
    }
}

/* An exact filter predicts 0: no add (each add is a locked instruction,
 * which waits for the probe's loads). */
static void count_fpr(struct kv_table *t, double fpr)
{
    uint64_t units = (uint64_t)(fpr * KV_TABLE_FPR_UNIT + 0.5);
    if (units)
        atomic_fetch_add_explicit(&t->range_fpr_sum, units, memory_order_relaxed);
}

#define BUMP(x) atomic_fetch_add_explicit(&(x), 1, memory_order_relaxed)

/* range_worth_asking: a filter whose moving share of "maybe" answers is at
 * or below 15/16 (in units of 2^-16) is asked every time. */
#define RANGE_USEFUL_BELOW ((uint32_t)15 << 12)

/* Whether to ask t's range filter about this query. A probe costs about
 * 0.1 us (a few cache misses); a "no" saves a table read of 1-2 us (index
 * search and data block), so asking pays while more than about 1 in 16
 * answers is "no". A table whose filter answered "maybe" to more than
 * 15/16 of its recent queries (a moving average over about the last 16
 * asked) -- ranges that hold its keys, as short scans do -- is asked on
 * one query in 16 only, which is enough to see the workload turn to empty
 * ranges. Not asking is a "maybe": it never skips a table, so it never
 * loses a key. A trace (kv_explain_seek) always asks. */
static int range_worth_asking(const struct kv_merge_gate *g, struct kv_table *t)
{
    if (!g->count ||
        atomic_load_explicit(&t->range_maybe_avg, memory_order_relaxed) <= RANGE_USEFUL_BELOW)
        return 1;
    uint32_t n = atomic_load_explicit(&t->range_unasked, memory_order_relaxed) + 1;
    atomic_store_explicit(&t->range_unasked, n, memory_order_relaxed);
    return (n & 15) == 0;
}

/* Folds one answer of t's range filter into its moving average (1/16 per
 * answer). */
static void range_answered(struct kv_table *t, int maybe)
{
    uint32_t a = atomic_load_explicit(&t->range_maybe_avg, memory_order_relaxed);
    int64_t d = ((int64_t)(maybe ? 1 : 0) << 16) - (int64_t)a;
    if (d / 16) /* (a table answering "no" throughout is not written to) */
        atomic_store_explicit(&t->range_maybe_avg, (uint32_t)((int64_t)a + d / 16),
                              memory_order_relaxed);
}

/* Table t, about to be opened for s: its prefix filter (when it holds
 * prefixes of the gate's length), then its range filter (with both
 * bounds), asked about the range. 0 when one said no; else 1, with the
 * verdict pending (s->pend: which said maybe). Counted and traced. */
static int gate_ask(const struct kv_merge *m, struct kv_merge_source *s, struct kv_table *t)
{
    struct kv_merge_gate *g = m->gate;
    kv_db *db = g->db;
    int pf = KV_EXPLAIN_FILTER_NOT_ASKED, rf = KV_EXPLAIN_FILTER_NOT_ASKED;
    double fpr = 0;
    if (g->prefix && kv_sst_reader_prefix_len(t->reader) == g->plen)
        pf = kv_sst_filter_may_hold(t->reader, kv_prefix_mix(kv_table_key_hash(db, &g->kh, t)))
                 ? KV_EXPLAIN_FILTER_MAYBE
                 : KV_EXPLAIN_FILTER_NEGATIVE;
    if (pf != KV_EXPLAIN_FILTER_NEGATIVE && g->range && kv_sst_reader_has_range_filter(t->reader) &&
        range_worth_asking(g, t)) {
        rf = kv_sst_range_filter_may_hold(t->reader, g->qlo, g->qlolen, g->qhi, g->qhilen, &fpr)
                 ? KV_EXPLAIN_FILTER_MAYBE
                 : KV_EXPLAIN_FILTER_NEGATIVE;
        range_answered(t, rf == KV_EXPLAIN_FILTER_MAYBE);
    }
    int pass = pf != KV_EXPLAIN_FILTER_NEGATIVE && rf != KV_EXPLAIN_FILTER_NEGATIVE;
    if (g->count) {
        KV_COUNT(db, range_checked, 1);
        if (pf == KV_EXPLAIN_FILTER_NEGATIVE) {
            KV_COUNT(db, prefix_skips, 1);
            BUMP(t->prefix_negatives);
        }
        if (rf == KV_EXPLAIN_FILTER_MAYBE)
            BUMP(t->range_maybes);
        if (rf == KV_EXPLAIN_FILTER_NEGATIVE) {
            KV_COUNT(db, range_skips, 1);
            BUMP(t->range_negatives);
            count_fpr(t, fpr);
        }
        if (pass)
            KV_COUNT(db, range_read, 1);
    }
    s->step = SIZE_MAX;
    struct kv_get_step *st = g->trace ? trace_step(g->trace) : NULL;
    if (st) {
        st->s.where = KV_EXPLAIN_TABLE;
        st->s.level = t->meta.level;
        st->s.number = t->meta.number;
        st->s.filter = pf;
        st->s.range_filter = rf;
        st->s.range_expected_fpr = rf != KV_EXPLAIN_FILTER_NOT_ASKED ? fpr : 0;
        st->meta = &t->meta;
        s->step = (size_t)(st - g->trace->steps);
        kv_sst_counters c;
        kv_sst_reader_counters(t->reader, &c);
        g->trace->hits0 = c.cache_hits;
        g->trace->reads0 = c.data_block_reads;
    }
    if (!pass)
        return 0;
    s->pend = KV_GATE_PENDING | (pf == KV_EXPLAIN_FILTER_MAYBE ? KV_GATE_PREFIX_MAYBE : 0) |
              (rf == KV_EXPLAIN_FILTER_MAYBE ? KV_GATE_RANGE_MAYBE : 0);
    s->pend_fpr = fpr;
    return 1;
}

/* The verdict on the table gate_ask let through, once s is positioned in
 * it (moving back or forward): a filter's maybe was false when its first
 * entry lies outside the range asked (or it has none there). The entry,
 * when there is one, is loaded: s is then valid and settled. KV_OK, or
 * load's error. */
static int gate_verdict(const struct kv_merge *m, struct kv_merge_source *s, int back)
{
    unsigned said = s->pend;
    s->pend = 0;
    if (!s->si || kv_sst_iter_status(s->si) != KV_OK)
        return KV_OK; /* a failed table: settling reports it */
    int in = 0;
    if (kv_sst_iter_valid(s->si)) {
        int rc = load(s);
        if (rc != KV_OK)
            return rc;
        in = in_query(m, s->key, s->klen, back);
    }
    struct kv_merge_gate *g = m->gate;
    struct kv_table *t = s->t[s->i];
    int fp = !in && (said & (KV_GATE_PREFIX_MAYBE | KV_GATE_RANGE_MAYBE));
    if (fp && g->count && (said & KV_GATE_PREFIX_MAYBE)) {
        KV_COUNT(g->db, prefix_fp, 1);
        BUMP(t->prefix_fp);
    }
    if (fp && g->count && (said & KV_GATE_RANGE_MAYBE)) {
        KV_COUNT(g->db, range_fp, 1);
        BUMP(t->range_fp);
        count_fpr(t, s->pend_fpr);
    }
    if (g->trace && s->step != SIZE_MAX) {
        kv_explain_step *st = &g->trace->steps[s->step].s;
        st->outcome = in ? KV_EXPLAIN_FOUND : KV_EXPLAIN_ABSENT;
        st->seq = in ? s->seq : 0;
        st->false_positive = fp;
        kv_sst_counters c;
        kv_sst_reader_counters(t->reader, &c);
        st->block = c.data_block_reads > g->trace->reads0 ? KV_EXPLAIN_BLOCK_FILE
                    : c.cache_hits > g->trace->hits0      ? KV_EXPLAIN_BLOCK_CACHE
                                                          : KV_EXPLAIN_BLOCK_NONE;
    }
    return KV_OK;
}

/* A memtable's step in the trace, once it is positioned (back: by a
 * backward positioning). */
static void gate_mem(const struct kv_merge *m, const struct kv_merge_source *s, int back)
{
    struct kv_get_step *st = trace_step(m->gate->trace);
    if (!st)
        return;
    /* iter.c adds the memtable first, then the immutable one. */
    st->s.where = s->index ? KV_EXPLAIN_IMMUTABLE : KV_EXPLAIN_MEMTABLE;
    if (m->gate->range && kv_mem_has_range_map(s->mi.mem))
        st->s.filter = KV_EXPLAIN_FILTER_MAYBE; /* its occupancy gate let it through */
    if (s->valid && in_query(m, s->key, s->klen, back)) {
        st->s.outcome = KV_EXPLAIN_FOUND;
        st->s.seq = s->seq;
    }
}

/* Before a memtable source is positioned by a range query (both ends of
 * the range asked set): 1 when the memtable's occupancy gate says it holds
 * no key there that this reader may see (memtable.h): the source is then
 * empty for this positioning, with no skiplist search, and its trace
 * step, if traced, shows the gate's "no". 0: position it. */
static int mem_gated_out(const struct kv_merge *m, struct kv_merge_source *s)
{
    const struct kv_merge_gate *g = m->gate;
    if (!g || !g->range || !g->qlo || !g->qhi ||
        kv_mem_range_may_hold(s->mi.mem, g->qlo, g->qlolen, g->qhi, g->qhilen))
        return 0;
    s->mi.node = NULL;
    s->valid = 0;
    if (g->count)
        KV_COUNT(g->db, mem_range_skips, 1);
    struct kv_get_step *st = g->trace ? trace_step(g->trace) : NULL;
    if (st) {
        st->s.where = s->index ? KV_EXPLAIN_IMMUTABLE : KV_EXPLAIN_MEMTABLE;
        st->s.filter = KV_EXPLAIN_FILTER_NEGATIVE;
    }
    return 1;
}

/* After a memtable source was positioned: its trace step, if traced. */
static inline int mem_positioned(const struct kv_merge *m, const struct kv_merge_source *s, int rc,
                                 int back)
{
    if (m->gate && m->gate->trace && rc == KV_OK)
        gate_mem(m, s, back);
    return rc;
}

/* open_table under a gate, from table i (within the bounds): a table the
 * gate rules out is passed for the run's next one (back: previous one)
 * within the bounds. Apart, so that a merge without a gate keeps
 * open_table as small as it was. */
static int open_gated(const struct kv_merge *m, struct kv_merge_source *s, size_t i, int back,
                      int *opened)
{
    s->pend = 0;
    while (!gate_ask(m, s, s->t[i])) {
        if (back ? i == 0 : i + 1 >= s->n)
            return KV_OK;
        i = back ? i - 1 : i + 1;
        if (!table_in_bounds(m, s, i))
            return KV_OK;
    }
    s->i = i;
    *opened = 1;
    return kv_sst_iter_new(s->t[i]->reader, &s->si);
}

/* Opens table i of a TABLES source (no positioning); *opened 0 when the
 * table lies outside the bounds or past the run (nothing opened, source
 * not valid). With a gate, open_gated. A READER source opens its reader
 * once. */
static int open_table(const struct kv_merge *m, struct kv_merge_source *s, size_t i, int back,
                      int *opened)
{
    kv_sst_iter_free(s->si);
    s->si = NULL;
    s->valid = 0;
    s->i = i;
    *opened = 0;
    if (s->type == KV_MERGE_READER) {
        if (i != 0)
            return KV_OK;
        *opened = 1;
        return kv_sst_iter_new(s->rd, &s->si);
    }
    if (i >= s->n || !table_in_bounds(m, s, i))
        return KV_OK;
    if (m->gate)
        return open_gated(m, s, i, back, opened);
    *opened = 1;
    return kv_sst_iter_new(s->t[i]->reader, &s->si);
}

/* Past a table's end, the next table's first entry. */
static int settle_forward(const struct kv_merge *m, struct kv_merge_source *s)
{
    for (;;) {
        if (s->si && kv_sst_iter_valid(s->si))
            return load(s);
        int rc = s->si ? kv_sst_iter_status(s->si) : KV_OK;
        if (rc != KV_OK || s->i + 1 >= s->n) {
            s->valid = 0;
            return rc;
        }
        int opened;
        if ((rc = open_table(m, s, s->i + 1, 0, &opened)) != KV_OK || !opened)
            return rc;
        kv_sst_iter_seek_first(s->si);
        if (s->pend && ((rc = gate_verdict(m, s, 0)) != KV_OK || s->valid))
            return rc;
    }
}

/* Before a table's start, the previous table's last entry. */
static int settle_backward(const struct kv_merge *m, struct kv_merge_source *s)
{
    for (;;) {
        if (s->si && kv_sst_iter_valid(s->si))
            return load(s);
        int rc = s->si ? kv_sst_iter_status(s->si) : KV_OK;
        if (rc != KV_OK || s->i == 0) {
            s->valid = 0;
            return rc;
        }
        int opened;
        if ((rc = open_table(m, s, s->i - 1, 1, &opened)) != KV_OK || !opened)
            return rc;
        kv_sst_iter_seek_last(s->si);
        if (s->pend && ((rc = gate_verdict(m, s, 1)) != KV_OK || s->valid))
            return rc;
    }
}

static int source_first(const struct kv_merge *m, struct kv_merge_source *s)
{
    if (s->type == KV_MERGE_MEM) {
        if (m->gate && mem_gated_out(m, s))
            return KV_OK;
        kv_mem_iter_first(&s->mi);
        return mem_positioned(m, s, load(s), 0);
    }
    int opened, rc = open_table(m, s, 0, 0, &opened);
    if (rc != KV_OK || !opened)
        return rc;
    kv_sst_iter_seek_first(s->si);
    if (s->pend && ((rc = gate_verdict(m, s, 0)) != KV_OK || s->valid))
        return rc; /* the verdict loaded its entry */
    return settle_forward(m, s);
}

static int source_last(const struct kv_merge *m, struct kv_merge_source *s)
{
    if (s->type == KV_MERGE_MEM) {
        if (m->gate && mem_gated_out(m, s))
            return KV_OK;
        kv_mem_iter_last(&s->mi);
        return mem_positioned(m, s, load(s), 1);
    }
    int opened, rc = open_table(m, s, s->n ? s->n - 1 : 0, 1, &opened);
    if (rc != KV_OK || !opened)
        return rc;
    kv_sst_iter_seek_last(s->si);
    if (s->pend && ((rc = gate_verdict(m, s, 1)) != KV_OK || s->valid))
        return rc; /* the verdict loaded its entry */
    return settle_backward(m, s);
}

static inline int source_next(const struct kv_merge *m, struct kv_merge_source *s)
{
    if (s->type == KV_MERGE_MEM) {
        kv_mem_iter_next(&s->mi);
        return load(s);
    }
    kv_sst_iter_next(s->si);
    return settle_forward(m, s);
}

static inline int source_prev(const struct kv_merge *m, struct kv_merge_source *s)
{
    if (s->type == KV_MERGE_MEM) {
        kv_mem_iter_prev(&s->mi);
        return load(s);
    }
    kv_sst_iter_prev(s->si);
    return settle_backward(m, s);
}

/* The first table of s that may hold `key` (its largest key >= key). */
static size_t table_at_or_after(const struct kv_merge *m, const struct kv_merge_source *s,
                                const uint8_t *key, size_t klen)
{
    if (s->type == KV_MERGE_READER)
        return 0;
    return kv_tables_at_or_after(s->t, s->n, key, klen, m->cmp);
}

/* First entry >= (key, seq), `ik` that as an internal key; with `past`,
 * the first entry of a user key above key, `ik` then the key's escaped
 * form closed by 0x00 0x02 (order.h: after every version of key, before
 * any larger key). */
static int source_seek(const struct kv_merge *m, struct kv_merge_source *s, const uint8_t *key,
                       size_t klen, uint64_t seq, int past, const uint8_t *ik, size_t iklen)
{
    if (s->type == KV_MERGE_MEM) {
        if (m->gate && mem_gated_out(m, s))
            return KV_OK;
        kv_mem_iter_seek(&s->mi, key, klen, seq);
        int rc = load(s);
        while (rc == KV_OK && past && s->valid && s->klen == klen &&
               kv_sst_cmp(m->cmp, s->key, s->klen, key, klen) == 0) {
            kv_mem_iter_next(&s->mi);
            rc = load(s);
        }
        return mem_positioned(m, s, rc, 0);
    }
    int opened, rc = open_table(m, s, table_at_or_after(m, s, key, klen), 0, &opened);
    if (rc != KV_OK || !opened)
        return rc;
    kv_sst_iter_seek(s->si, ik, iklen);
    if (s->pend && ((rc = gate_verdict(m, s, 0)) != KV_OK || s->valid))
        return rc; /* the verdict loaded its entry */
    return settle_forward(m, s);
}

/* Last entry of a user key < key: `prefix` is key's escaped form, which
 * sorts after every internal key of a smaller user key and before every
 * one of key itself. */
static int source_seek_before(const struct kv_merge *m, struct kv_merge_source *s,
                              const uint8_t *key, size_t klen, const uint8_t *prefix, size_t plen)
{
    if (s->type == KV_MERGE_MEM) {
        if (m->gate && mem_gated_out(m, s))
            return KV_OK;
        kv_mem_iter_seek_before(&s->mi, key, klen);
        return mem_positioned(m, s, load(s), 1);
    }
    size_t lo = 0, hi = s->type == KV_MERGE_READER ? 1 : s->n;
    if (s->type == KV_MERGE_TABLES) { /* the last table whose smallest key is < key */
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            const kv_table_meta *t = &s->t[mid]->meta;
            if (kv_sst_cmp(m->cmp, t->smallest, t->smallest_len, key, klen) < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
    } else {
        lo = 1;
    }
    if (lo == 0) {
        s->valid = 0;
        return KV_OK;
    }
    int opened, rc = open_table(m, s, lo - 1, 1, &opened);
    if (rc != KV_OK || !opened)
        return rc;
    kv_sst_iter_seek_before(s->si, prefix, plen);
    if (s->pend && ((rc = gate_verdict(m, s, 1)) != KV_OK || s->valid))
        return rc; /* the verdict loaded its entry */
    return settle_backward(m, s);
}

/* ---- the heap -------------------------------------------------------------------------- */

int kv_merge_init(struct kv_merge *m, const kv_comparator *cmp, const kv_comparator *tcmp,
                  size_t max)
{
    memset(m, 0, sizeof *m);
    m->cmp = cmp;
    m->tcmp = tcmp;
    m->max = max;
    m->src = calloc(max ? max : 1, sizeof *m->src);
    m->heap = calloc(max ? max : 1, sizeof *m->heap);
    return m->src && m->heap ? KV_OK : KV_ENOMEM;
}

void kv_merge_free(struct kv_merge *m)
{
    for (size_t i = 0; m->src && i < m->n; i++) {
        kv_sst_iter_free(m->src[i].si);
        free(m->src[i].buf);
    }
    free(m->src);
    free(m->heap);
    free(m->scratch);
    free(m->skip);
    free(m->sk);
    free(m->sv);
    memset(m, 0, sizeof *m);
}

static struct kv_merge_source *add(struct kv_merge *m, enum kv_merge_type type)
{
    struct kv_merge_source *s = &m->src[m->n];
    memset(s, 0, sizeof *s);
    s->type = type;
    s->index = m->n++;
    return s;
}

void kv_merge_add_mem(struct kv_merge *m, const kv_mem *mem)
{
    kv_mem_iter_init(&add(m, KV_MERGE_MEM)->mi, mem);
}

void kv_merge_add_tables(struct kv_merge *m, struct kv_table *const *t, size_t n)
{
    struct kv_merge_source *s = add(m, KV_MERGE_TABLES);
    s->t = t;
    s->n = n;
}

void kv_merge_add_reader(struct kv_merge *m, kv_sst_reader *rd)
{
    struct kv_merge_source *s = add(m, KV_MERGE_READER);
    s->rd = rd;
    s->n = 1;
}

/* 1 when a comes before b in direction `rev` (0: forward); equal entries
 * by source index. `custom` is a constant where this is inlined, so that
 * a bytewise merge tests no comparator. */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline int
before(const kv_comparator *cmp, const struct kv_merge_source *a, const struct kv_merge_source *b,
       int rev, int custom)
{
    int d = custom ? cmp->compare(cmp->ctx, a->key, a->klen, b->key, b->klen)
                   : kv_key_cmp(a->key, a->klen, b->key, b->klen);
    if (!d)
        d = a->seq > b->seq ? -1 : a->seq < b->seq ? 1 : a->index < b->index ? -1 : 1;
    return rev ? d > 0 : d < 0;
}

#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline void
sift_down_in(struct kv_merge *m, size_t i, int rev, int custom)
{
    struct kv_merge_source **h = m->heap, *x = h[i];
    const kv_comparator *cmp = m->cmp;
    for (;;) {
        size_t l = 2 * i + 1;
        if (l >= m->hn)
            break;
        if (l + 1 < m->hn && before(cmp, h[l + 1], h[l], rev, custom))
            l++;
        if (!before(cmp, h[l], x, rev, custom))
            break;
        h[i] = h[l];
        i = l;
    }
    h[i] = x;
}

/* Compiled once per direction and order. */
static void sift_down(struct kv_merge *m, size_t i)
{
    if (m->cmp) {
        if (m->dir == KV_MERGE_REV)
            sift_down_in(m, i, 1, 1);
        else
            sift_down_in(m, i, 0, 1);
    } else if (m->dir == KV_MERGE_REV)
        sift_down_in(m, i, 1, 0);
    else
        sift_down_in(m, i, 0, 0);
}

/* After every source was positioned: the heap of the valid ones, for dir. */
static void heap_build(struct kv_merge *m, int dir)
{
    m->dir = dir;
    m->hn = 0;
    for (size_t i = 0; i < m->n; i++)
        if (m->src[i].valid)
            m->heap[m->hn++] = &m->src[i];
    for (size_t i = m->hn / 2; i-- > 0;)
        sift_down(m, i);
}

/* An error while positioning: nothing on the heap. */
static int fail(struct kv_merge *m, int rc)
{
    m->hn = 0;
    return rc;
}

int kv_merge_first(struct kv_merge *m)
{
    if (m->gate)
        gate_range(m, NULL, 0, 0);
    for (size_t i = 0; i < m->n; i++) {
        int rc = source_first(m, &m->src[i]);
        if (rc != KV_OK)
            return fail(m, rc);
    }
    heap_build(m, KV_MERGE_FWD);
    return KV_OK;
}

int kv_merge_last(struct kv_merge *m)
{
    if (m->gate)
        gate_range(m, NULL, 0, 1);
    for (size_t i = 0; i < m->n; i++) {
        int rc = source_last(m, &m->src[i]);
        if (rc != KV_OK)
            return fail(m, rc);
    }
    heap_build(m, KV_MERGE_REV);
    return KV_OK;
}

static int seek_all(struct kv_merge *m, const uint8_t *key, size_t klen, uint64_t seq, int past)
{
    if (kv_merge_grow(&m->scratch, &m->scap, 2 * klen + 2 + KV_IKEY_TRAILER) != KV_OK)
        return fail(m, KV_ENOMEM);
    size_t n = kv_ikey_put_prefix(m->scratch, key, klen);
    if (past) {
        m->scratch[n - 1] = 0x02; /* above every version of the key, below any larger key */
    } else {
        kv_ikey_put_trailer(m->scratch + n, seq, 0xFF);
        n += KV_IKEY_TRAILER;
    }
    if (m->gate)
        gate_range(m, key, klen, 0);
    for (size_t i = 0; i < m->n; i++) {
        int rc = source_seek(m, &m->src[i], key, klen, past ? 0 : seq, past, m->scratch, n);
        if (rc != KV_OK)
            return fail(m, rc);
    }
    heap_build(m, KV_MERGE_FWD);
    if (m->gate) /* the sources step on: the bounds */
        gate_range(m, NULL, 0, 0);
    return KV_OK;
}

int kv_merge_seek(struct kv_merge *m, const uint8_t *key, size_t klen, uint64_t seq)
{
    return seek_all(m, key, klen, seq, 0);
}

int kv_merge_seek_past(struct kv_merge *m, const uint8_t *key, size_t klen)
{
    return seek_all(m, key, klen, 0, 1);
}

int kv_merge_seek_before(struct kv_merge *m, const uint8_t *key, size_t klen)
{
    if (kv_merge_grow(&m->scratch, &m->scap, 2 * klen + 2) != KV_OK)
        return fail(m, KV_ENOMEM);
    size_t plen = kv_ikey_put_prefix(m->scratch, key, klen);
    if (m->gate)
        gate_range(m, key, klen, 1);
    for (size_t i = 0; i < m->n; i++) {
        int rc = source_seek_before(m, &m->src[i], key, klen, m->scratch, plen);
        if (rc != KV_OK)
            return fail(m, rc);
    }
    heap_build(m, KV_MERGE_REV);
    if (m->gate)
        gate_range(m, NULL, 0, 1);
    return KV_OK;
}

/* kv_merge_step, inlined into the reader's loops below. */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline int
step(struct kv_merge *m)
{
    struct kv_merge_source *s = m->heap[0];
    int rc = m->dir == KV_MERGE_FWD ? source_next(m, s) : source_prev(m, s);
    if (rc != KV_OK)
        return fail(m, rc);
    if (!s->valid) {
        m->heap[0] = m->heap[--m->hn];
        if (m->hn)
            sift_down(m, 0);
    } else if (m->hn > 1)
        sift_down(m, 0);
    return KV_OK;
}

int kv_merge_step(struct kv_merge *m)
{
    return step(m);
}

/* ---- the shadowing rule ------------------------------------------------------------------ */

int kv_merge_set_skip(struct kv_merge *m, const uint8_t *key, size_t klen)
{
    if (kv_merge_grow(&m->skip, &m->skipcap, klen + 1) != KV_OK)
        return KV_ENOMEM;
    memcpy(m->skip, key, klen);
    m->skiplen = klen;
    return KV_OK;
}

void kv_merge_set_hiders(struct kv_merge *m, const kv_rtset *const *rts, size_t n, uint64_t ttl,
                         uint64_t now)
{
    m->nrts = 0;
    for (size_t i = 0; i < n && m->nrts < 3; i++)
        if (rts[i])
            m->rts[m->nrts++] = rts[i];
    m->ttl = ttl;
    m->now = now;
    m->special = m->nrts || ttl;
}

/* A version hidden by a range tombstone or expired (kv_merge_set_hiders). */
static int hidden_special(const struct kv_merge *m, const struct kv_merge_source *s, uint64_t snap)
{
    for (size_t i = 0; i < m->nrts; i++)
        if (kv_rtset_cover(m->rts[i], s->key, s->klen, snap) > s->seq)
            return 1;
    return kv_ttl_expired(m->ttl, m->now, s->kind, s->val, s->vlen);
}

/* 1 when the newest visible version s of its key hides the key from the
 * reader: a tombstone, a range tombstone over it, or an expired entry. */
static inline int hides(const struct kv_merge *m, const struct kv_merge_source *s, uint64_t snap)
{
    if (s->kind == KV_KIND_TOMBSTONE)
        return 1;
    return m->special && hidden_special(m, s, snap);
}

/* kv_merge_next_visible, inlined into kv_merge_next_key: the hot loop of
 * a forward scan. */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline int
next_visible(struct kv_merge *m, uint64_t snap, const uint8_t *hi, size_t hilen, int skipping,
             struct kv_merge_source **out)
{
    *out = NULL;
    for (;;) {
        struct kv_merge_source *s = kv_merge_top(m);
        if (!s || (hi && kv_sst_cmp(m->cmp, s->key, s->klen, hi, hilen) >= 0))
            return KV_OK;
        if (kv_merge_visible(s->seq, snap) &&
            !(skipping && kv_sst_cmp(m->cmp, s->key, s->klen, m->skip, m->skiplen) == 0)) {
            if (!hides(m, s, snap)) { /* the newest visible version decides */
                *out = s;
                return KV_OK;
            }
            /* A tombstone (or a version range-deleted or expired): the
             * key's older versions are passed too. */
            if (kv_merge_set_skip(m, s->key, s->klen) != KV_OK)
                return fail(m, KV_ENOMEM);
            skipping = 1;
        }
        int rc = step(m);
        if (rc != KV_OK)
            return rc;
    }
}

int kv_merge_next_visible(struct kv_merge *m, uint64_t snap, const uint8_t *hi, size_t hilen,
                          int skipping, struct kv_merge_source **out)
{
    return next_visible(m, snap, hi, hilen, skipping, out);
}

int kv_merge_next_key(struct kv_merge *m, uint64_t snap, const uint8_t *hi, size_t hilen,
                      const uint8_t *key, size_t klen, struct kv_merge_source **out)
{
    int rc = KV_OK;
    if (klen + 1 > m->skipcap)
        rc = kv_merge_grow(&m->skip, &m->skipcap, klen + 1);
    if (rc == KV_OK) {
        memcpy(m->skip, key, klen);
        m->skiplen = klen;
        rc = step(m);
    }
    if (rc != KV_OK) {
        *out = NULL;
        return fail(m, rc);
    }
    return next_visible(m, snap, hi, hilen, 1, out);
}

int kv_merge_prev_visible(struct kv_merge *m, uint64_t snap, const uint8_t *lo, size_t lolen,
                          int *found)
{
    int have = 0; /* sk/sv hold a visible value */
    for (;;) {
        struct kv_merge_source *s = kv_merge_top(m);
        if (!s || (lo && kv_sst_cmp(m->cmp, s->key, s->klen, lo, lolen) < 0))
            break;
        if (kv_merge_visible(s->seq, snap)) {
            if (have && kv_sst_cmp(m->cmp, s->key, s->klen, m->sk, m->sklen) < 0)
                break; /* the key before the decided one */
            if (hides(m, s, snap)) {
                have = 0; /* a newer tombstone hides what was seen of the key */
            } else {
                if (kv_merge_grow(&m->sk, &m->skcap, s->klen + 1) != KV_OK ||
                    kv_merge_grow(&m->sv, &m->svcap, s->vlen + 1) != KV_OK)
                    return fail(m, KV_ENOMEM);
                memcpy(m->sk, s->key, s->klen);
                m->sklen = s->klen;
                if (s->vlen)
                    memcpy(m->sv, s->val, s->vlen);
                m->svlen = s->vlen;
                m->skind = s->kind;
                have = 1;
            }
        }
        int rc = step(m);
        if (rc != KV_OK)
            return rc;
    }
    *found = have;
    return KV_OK;
}

/* Entries arrive in internal-key order: by key, then newest first. An
 * entry is dropped when a newer entry of the same key is visible to every
 * snapshot (no reader can reach the older one), and a tombstone also when
 * every snapshot sees it and no older table below could hold the key
 * (`base`: nothing for it to hide). */
int kv_dropper_drop(struct kv_dropper *d, const uint8_t *id, size_t idlen, uint64_t seq, int kind,
                    int base)
{
    if (!d->have || idlen != d->len || (idlen && memcmp(id, d->key, idlen) != 0)) {
        if (idlen > d->cap) {
            uint8_t *n = realloc(d->key, idlen);
            if (!n)
                return -1;
            d->key = n;
            d->cap = idlen;
        }
        if (idlen)
            memcpy(d->key, id, idlen);
        d->len = idlen;
        d->have = 1;
        d->newer_seq = UINT64_MAX; /* no newer entry of this key yet */
    }
    int drop = d->newer_seq <= d->horizon ||
               (kind == KV_KIND_TOMBSTONE && seq <= d->horizon && base);
    /* Kept, though with no snapshot it would go: a snapshot pins it. */
    d->pinned = !drop && (d->newer_seq != UINT64_MAX || (kind == KV_KIND_TOMBSTONE && base));
    d->newer_seq = seq;
    return drop;
}

int kv_dropper_shadowed(const struct kv_dropper *d, const uint8_t *id, size_t idlen)
{
    return d->have && d->newer_seq != UINT64_MAX && idlen == d->len &&
           (!idlen || memcmp(id, d->key, idlen) == 0);
}

void kv_dropper_free(struct kv_dropper *d)
{
    free(d->key);
    d->key = NULL;
    for (size_t i = 0; i < d->opcap; i++)
        free(d->ops[i].p);
    free(d->ops);
    d->ops = NULL;
    d->nops = d->opcap = 0;
    free(d->buf);
    d->buf = NULL;
    d->bufcap = 0;
}

/* ---- range tombstones, merge operands, the compaction filter and TTL ------------------- */

size_t kv_dropper_keep_seqs(uint64_t horizon, int base, uint64_t *seqs, size_t nseq)
{
    /* Newest first: those above the horizon, then the newest at or below
     * it, which every snapshot sees and which hides the older ones from
     * every snapshot; it goes too when nothing below could hold a key it
     * covers (the entries of the job it covers go with it). */
    size_t n = 0;
    while (n < nseq && seqs[n] > horizon)
        n++;
    if (n < nseq && !base)
        n++;
    return n;
}

/* Is the entry (value or operand with its stamp) expired under ttl_seconds? */
static int dropper_expired(const struct kv_dropper *d, int kind, size_t vlen, const uint8_t *val)
{
    return d->db && kv_ttl_expired(d->db->o.ttl_seconds, d->now, kind, val, vlen);
}

static int dropper_base(struct kv_dropper *d)
{
    if (d->base < 0)
        d->base = d->below ? !d->below(d->ctx, d->key, d->len) : 0;
    return d->base;
}

static int dropper_emit(struct kv_dropper *d, uint64_t seq, int kind, const uint8_t *val,
                        size_t vlen, int same, int keep, int pinned)
{
    struct kv_dropper_out o = {.seq = seq,
                               .kind = kind,
                               .val = val,
                               .vlen = vlen,
                               .same = same,
                               .keep = keep,
                               .pinned = pinned};
    if (keep)
        d->pinned = pinned;
    return d->emit(d->ctx, &o);
}

/* Emits v (vlen bytes) followed, when stamp is not NULL, by that stamp. */
static int dropper_emit_new(struct kv_dropper *d, uint64_t seq, int kind, const void *v,
                            size_t vlen, const uint8_t *stamp)
{
    if (!stamp)
        return dropper_emit(d, seq, kind, v, vlen, 0, 1, 0);
    if (kv_merge_grow(&d->buf, &d->bufcap, vlen + KV_TTL_STAMP) != KV_OK)
        return KV_ENOMEM;
    if (vlen)
        memcpy(d->buf, v, vlen);
    memcpy(d->buf + vlen, stamp, KV_TTL_STAMP);
    return dropper_emit(d, seq, kind, d->buf, vlen + KV_TTL_STAMP, 0, 1, 0);
}

/* The operand bytes of op, its stamp left off. */
static size_t op_len(const struct kv_dropper_op *op)
{
    return op->kind == KV_KIND_TMERGE && op->len >= KV_TTL_STAMP ? op->len - KV_TTL_STAMP : op->len;
}

/* The pending operands, as they are. */
static int ops_emit_all(struct kv_dropper *d)
{
    int rc = KV_OK;
    for (size_t i = 0; rc == KV_OK && i < d->nops; i++)
        rc = dropper_emit(d, d->ops[i].seq, d->ops[i].kind, d->ops[i].p, d->ops[i].len, 0, 1, 0);
    d->nops = 0;
    return rc;
}

/* Settles the pending operands: with `full`, merged over `existing` (NULL:
 * none) into one value; else merged into one operand when the operator can
 * (partial_merge), or kept as they are. *merged: they became a value. */
static int ops_settle(struct kv_dropper *d, int full, const void *existing, size_t elen,
                      int *merged)
{
    *merged = 0;
    if (!d->nops)
        return KV_OK;
    const kv_merge_operator *mo = d->db ? d->db->o.merge_operator : NULL;
    if (!mo || (!full && (!mo->partial_merge || d->nops < 2)))
        return ops_emit_all(d);
    size_t n = d->nops;
    const void *stackv[16];
    size_t stackl[16];
    const void **v = n <= 16 ? stackv : malloc(n * sizeof *v);
    size_t *l = n <= 16 ? stackl : malloc(n * sizeof *l);
    int rc = KV_OK;
    if (!v || !l) {
        rc = KV_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < n; i++) { /* oldest first */
        v[i] = d->ops[n - 1 - i].p;
        l[i] = op_len(&d->ops[n - 1 - i]);
    }
    const struct kv_dropper_op *newest = &d->ops[0];
    const uint8_t *stamp = newest->kind == KV_KIND_TMERGE && newest->len >= KV_TTL_STAMP
                               ? newest->p + newest->len - KV_TTL_STAMP
                               : NULL;
    void *res = NULL;
    size_t rlen = 0;
    if (full) {
        int mr = mo->full_merge(mo->state, d->key, d->len, existing, existing ? elen : 0,
                                (const void *const *)v, l, n, &res, &rlen);
        if (mr != 0 && d->lenient) { /* left for a read or a compaction to merge */
            free(res);
            rc = ops_emit_all(d);
            goto out;
        }
        if (mr != 0) {
            free(res);
            rc = kv_error_set(mr <= KV_EINVAL && mr >= KV_ERANGE ? mr : KV_EINVAL,
                              "merge operator \"%s\": full_merge failed (%d) on a key of %zu "
                              "bytes in a flush or compaction",
                              mo->name ? mo->name : "", mr, d->len);
            goto out;
        }
        rc = dropper_emit_new(d, newest->seq, stamp ? KV_KIND_TVALUE : KV_KIND_VALUE, res, rlen,
                              stamp);
        *merged = 1;
    } else if (mo->partial_merge(mo->state, d->key, d->len, (const void *const *)v, l, n, &res,
                                 &rlen) == 0) {
        rc = dropper_emit_new(d, newest->seq, stamp ? KV_KIND_TMERGE : KV_KIND_MERGE, res, rlen,
                              stamp);
    } else {
        rc = ops_emit_all(d);
        n = 0;
    }
    free(res);
    if (rc == KV_OK && n && d->db)
        KV_COUNT(d->db, merge_compacted, n);
    d->nops = 0;
out:
    if (v != stackv)
        free((void *)v);
    if (l != stackl)
        free(l);
    return rc;
}

static int ops_push(struct kv_dropper *d, uint64_t seq, int kind, const uint8_t *val, size_t vlen)
{
    if (d->nops == d->opcap) {
        size_t nc = d->opcap ? 2 * d->opcap : 8;
        struct kv_dropper_op *n = realloc(d->ops, nc * sizeof *n);
        if (!n)
            return KV_ENOMEM;
        memset(n + d->opcap, 0, (nc - d->opcap) * sizeof *n);
        d->ops = n;
        d->opcap = nc;
    }
    struct kv_dropper_op *op = &d->ops[d->nops];
    if (kv_merge_grow(&op->p, &op->cap, vlen ? vlen : 1) != KV_OK)
        return KV_ENOMEM;
    if (vlen)
        memcpy(op->p, val, vlen);
    op->len = vlen;
    op->seq = seq;
    op->kind = kind;
    d->nops++;
    return KV_OK;
}

/* The newest entry at or below the horizon reads as deleted (expired, or
 * the filter removed it): a tombstone at its sequence, or nothing at all
 * when nothing below could hold its key. */
static int dropper_remove(struct kv_dropper *d, uint64_t seq, int kind, const uint8_t *val,
                          size_t vlen, int first)
{
    d->closed = 1;
    if (dropper_base(d) || kind == KV_KIND_BLOB) {
        int rc = dropper_emit(d, seq, kind, val, vlen, 1, 0, 0);
        if (rc != KV_OK || dropper_base(d))
            return rc;
    }
    return dropper_emit(d, seq, KV_KIND_TOMBSTONE, NULL, 0, 0, 1, !first);
}

/* The value bytes of a value entry (a timed one's stamp left off; a blob's
 * read, *owned then set and freed by the caller); *have 0 when a blob's
 * value cannot be read here. */
static int value_bytes(struct kv_dropper *d, int kind, const uint8_t *val, size_t vlen,
                       const void **out, size_t *olen, void **owned, int *have)
{
    *owned = NULL;
    *have = 1;
    *out = val;
    *olen = vlen;
    if (kind == KV_KIND_TVALUE)
        *olen = vlen >= KV_TTL_STAMP ? vlen - KV_TTL_STAMP : 0;
    else if (kind == KV_KIND_BLOB) {
        if (!d->blob) {
            *have = 0;
            return KV_OK;
        }
        int rc = d->blob(d->ctx, d->key, d->len, val, vlen, owned, olen);
        if (rc != KV_OK)
            return rc;
        *out = *owned;
    }
    return KV_OK;
}

/* The newest entry of the key at or below the horizon, a value, with no
 * operand above it: expired, or asked of the compaction filter. */
static int dropper_value(struct kv_dropper *d, uint64_t seq, int kind, const uint8_t *val,
                         size_t vlen, int first)
{
    if (dropper_expired(d, kind, vlen, val)) {
        if (d->db)
            KV_COUNT(d->db, expired_dropped, 1);
        return dropper_remove(d, seq, kind, val, vlen, first);
    }
    d->closed = 1;
    /* Asked only of the key's newest value: one a snapshot reads under a
     * newer version is no value the filter decides (kv.h). */
    const kv_compaction_filter *f = d->db && first ? d->db->o.compaction_filter : NULL;
    if (!f || !f->filter)
        return dropper_emit(d, seq, kind, val, vlen, 1, 1, !first);
    const void *v;
    size_t vl;
    void *owned;
    int have;
    int rc = value_bytes(d, kind, val, vlen, &v, &vl, &owned, &have);
    if (rc != KV_OK)
        return rc;
    if (!have) /* a blob value this job cannot read: not filtered */
        return dropper_emit(d, seq, kind, val, vlen, 1, 1, !first);
    void *nv = NULL;
    size_t nl = 0;
    kv_filter_decision fd = f->filter(f->state, d->level, d->key, d->len, v, vl, &nv, &nl);
    free(owned);
    switch (fd) {
    case KV_FILTER_REMOVE:
        free(nv);
        KV_COUNT(d->db, filter_removed, 1);
        return dropper_remove(d, seq, kind, val, vlen, first);
    case KV_FILTER_CHANGE:
        KV_COUNT(d->db, filter_changed, 1);
        if (kind == KV_KIND_BLOB) /* its record is garbage: the new value replaces it */
            rc = dropper_emit(d, seq, kind, val, vlen, 1, 0, 0);
        if (rc == KV_OK)
            rc = dropper_emit_new(d, seq, kind == KV_KIND_BLOB ? KV_KIND_VALUE : kind, nv ? nv : "",
                                  nv ? nl : 0,
                                  kind == KV_KIND_TVALUE ? val + vlen - KV_TTL_STAMP : NULL);
        free(nv);
        return rc;
    default:
        free(nv);
        KV_COUNT(d->db, filter_kept, 1);
        return dropper_emit(d, seq, kind, val, vlen, 1, 1, !first);
    }
}

int kv_dropper_end(struct kv_dropper *d)
{
    if (!d->have || !d->nops)
        return KV_OK;
    int merged;
    return ops_settle(d, dropper_base(d), NULL, 0, &merged);
}

int kv_dropper_add(struct kv_dropper *d, const uint8_t *key, size_t klen, uint64_t seq, int kind,
                   const uint8_t *val, size_t vlen)
{
    int rc;
    if (!d->have || klen != d->len || (klen && memcmp(key, d->key, klen) != 0)) {
        if ((rc = kv_dropper_end(d)) != KV_OK)
            return rc;
        if (klen > d->cap) {
            uint8_t *n = realloc(d->key, klen);
            if (!n)
                return KV_ENOMEM;
            d->key = n;
            d->cap = klen;
        }
        if (klen)
            memcpy(d->key, key, klen);
        d->len = klen;
        d->have = 1;
        d->newer_seq = UINT64_MAX;
        d->closed = d->rdel = 0;
        d->base = -1;
        d->cover = UINT64_MAX;
        d->nops = 0;
    }
    int first = d->newer_seq == UINT64_MAX;
    d->newer_seq = seq;
    if (d->closed) { /* every snapshot reads a newer entry, or nothing */
        if (d->rdel && d->db)
            KV_COUNT(d->db, rdel_dropped, 1);
        return dropper_emit(d, seq, kind, val, vlen, 1, 0, 0);
    }
    if (seq > d->horizon) /* a snapshot may read it: as it is */
        return dropper_emit(d, seq, kind, val, vlen, 1, 1,
                            !first || (kind == KV_KIND_TOMBSTONE && dropper_base(d)));
    if (d->cover == UINT64_MAX)
        d->cover = d->rt ? kv_rtset_cover(d->rt, d->key, d->len, d->horizon) : 0;
    int merged;
    if (d->cover > seq) {
        /* A range tombstone every snapshot sees deletes it and all older. */
        if ((rc = ops_settle(d, 1, NULL, 0, &merged)) != KV_OK)
            return rc;
        d->closed = d->rdel = 1;
        if (d->db)
            KV_COUNT(d->db, rdel_dropped, 1);
        return dropper_emit(d, seq, kind, val, vlen, 1, 0, 0);
    }
    int expired = dropper_expired(d, kind, vlen, val);
    switch (kind) {
    case KV_KIND_MERGE:
    case KV_KIND_TMERGE:
        if (!expired)
            return ops_push(d, seq, kind, val, vlen);
        if (d->db)
            KV_COUNT(d->db, expired_dropped, 1);
        if ((rc = ops_settle(d, 1, NULL, 0, &merged)) != KV_OK)
            return rc;
        if (merged) { /* the value made above hides it */
            d->closed = 1;
            return dropper_emit(d, seq, kind, val, vlen, 1, 0, 0);
        }
        return dropper_remove(d, seq, kind, val, vlen, first);
    case KV_KIND_TOMBSTONE:
        if ((rc = ops_settle(d, 1, NULL, 0, &merged)) != KV_OK)
            return rc;
        d->closed = 1;
        if (merged || dropper_base(d))
            return dropper_emit(d, seq, kind, val, vlen, 1, 0, 0);
        return dropper_emit(d, seq, kind, val, vlen, 1, 1, !first);
    default: /* VALUE, TVALUE, BLOB */
        if (!d->nops)
            return dropper_value(d, seq, kind, val, vlen, first);
        if (expired) {
            if (d->db)
                KV_COUNT(d->db, expired_dropped, 1);
            rc = ops_settle(d, 1, NULL, 0, &merged);
        } else {
            const void *v;
            size_t vl;
            void *owned;
            int have;
            if ((rc = value_bytes(d, kind, val, vlen, &v, &vl, &owned, &have)) != KV_OK)
                return rc;
            if (have)
                rc = ops_settle(d, 1, v, vl, &merged);
            else /* a blob value this job cannot read: the operands stay */
                rc = ops_emit_all(d), merged = 0;
            free(owned);
        }
        if (rc != KV_OK)
            return rc;
        d->closed = 1;
        if (merged)
            return dropper_emit(d, seq, kind, val, vlen, 1, 0, 0);
        return expired ? dropper_remove(d, seq, kind, val, vlen, first)
                       : dropper_emit(d, seq, kind, val, vlen, 1, 1, 0);
    }
}
