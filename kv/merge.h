/* merge.h - the merging iterator: one k-way merge over sorted sources
 * (memtables, runs of tables, lone table readers), forward and backward,
 * and the shadowing rule that decides which of a key's versions count.
 * The user iterator (iter.c), compaction (compact.c) and repair (repair.c)
 * all read through it.
 *
 * Two layers, as LevelDB stacks its merger under its DB iterator:
 *
 * 1. The heap (kv_merge_*). Each source yields entries in internal order:
 *    user key ascending under the database's comparator (order.h,
 *    kv_sst_cmp), then sequence descending (newest first). The valid sources
 *    sit in a binary heap ordered for the current direction (forward: the
 *    smallest entry on top; backward: the largest); a step moves only the
 *    top source and sifts it down, so with one source, or disjoint ones,
 *    a step costs one or two comparisons. Equal (key, sequence) pairs (a
 *    damaged input, or a write read twice by repair) are ordered by source
 *    index, so the merge is deterministic. The comparisons are compiled
 *    once for bytewise order and once for a comparator, so the default
 *    order pays no indirect call per comparison.
 *
 * 2. The shadowing rule, in one place (merge.c):
 *    - a reader at snapshot S (kv_merge_next_visible,
 *      kv_merge_prev_visible) passes over versions newer than S; the
 *      newest version at or below S decides the key, and a tombstone
 *      there hides it and every older version;
 *    - a flush or compaction (kv_dropper_drop, declared in db.h) drops a
 *      version when a newer version of its key is visible to every
 *      snapshot (its sequence at or below the oldest snapshot, the
 *      horizon), and a tombstone visible to every snapshot when nothing
 *      below the output could hold its key (the bottom, `base`). Repair
 *      runs the same rule with no snapshot and everything merged.
 *
 * Bounds: a merge may be given user-key bounds (kv_merge_set_bounds):
 * a run of tables then does not open a table that lies wholly outside
 * them. The entries themselves are bounded by the caller.
 *
 * The gate (kv_merge.gate; a user iterator's range query sets it, no
 * flush, compaction or repair merge has one): before a table is opened,
 * its prefix filter and range filter are asked whether it may hold a key
 * of the range asked (doc/database.md, "Filters that gate scans"). On
 * "no" it is not opened (no index search, no block read) and a run of
 * tables goes on to its next table within the bounds (its previous one,
 * backward); on "maybe" it is opened and positioned, and if its first
 * entry then lies outside the range, the filters that said maybe count a
 * false positive. The range asked: forward [max(lower, target), upper),
 * backward [lower, min(upper, target)), target the key a positioning
 * seeks (none for first/last); after the positioning, while the sources
 * step, the bounds. A merge without a gate pays one branch per table
 * opened.
 *
 * Internal to kv: not installed. */
#ifndef KV_MERGE_H
#define KV_MERGE_H

#include <stddef.h>
#include <stdint.h>

#include "db.h"
#include "memtable.h"
#include "order.h"

enum kv_merge_type {
    KV_MERGE_MEM,    /* a memtable (user keys, no internal keys) */
    KV_MERGE_TABLES, /* sorted, disjoint tables one after another (one for a level-0 table) */
    KV_MERGE_READER  /* one table reader, owned by the caller (repair) */
};

/* One sorted source and its current entry. Set up with kv_merge_add_*;
 * the fields below `valid` are read-only to callers and valid while the
 * source stands where it is. */
struct kv_merge_source {
    enum kv_merge_type type;
    kv_mem_iter mi;            /* MEM */
    struct kv_table *const *t; /* TABLES */
    size_t n, i;               /* TABLES: count, and the table si reads */
    kv_sst_reader *rd;         /* READER */
    kv_sst_iter *si;           /* TABLES, READER */
    size_t index;              /* its place among the merge's sources */
    int valid;
    const uint8_t *key; /* user key */
    size_t klen;
    uint64_t seq;
    int kind; /* KV_KIND_* */
    const uint8_t *val;
    size_t vlen;
    const uint8_t *ikey; /* the stored internal key (TABLES, READER); MEM: NULL */
    size_t ilen;
    uint8_t *buf; /* a table entry's user key, when it had to be unescaped */
    size_t cap;
    /* The gate's verdict on the table just opened, due once it is
     * positioned: KV_GATE_PENDING, with the filters that said maybe;
     * the FPR the range filter predicted; its trace step (SIZE_MAX: none). */
    unsigned pend;
    double pend_fpr;
    size_t step;
};

/* kv_merge_source.pend */
enum { KV_GATE_PENDING = 1, KV_GATE_PREFIX_MAYBE = 2, KV_GATE_RANGE_MAYBE = 4 };

/* kv_explain_seek's record of a gated merge: one step per memtable
 * positioned and per table the gate met, in the merge's order (the
 * table's meta stays valid while the caller holds the version). */
struct kv_merge_trace {
    struct kv_get_step *steps;
    size_t n, cap;
    int err;                /* KV_ENOMEM when a step could not be kept */
    uint64_t hits0, reads0; /* the open table's block counters before it was positioned */
};

/* A range query's scan-filter gate. The owner (iter.c) fills it when its
 * bounds are set and keeps it where the merge points to it. */
struct kv_merge_gate {
    kv_db *db;
    int count;  /* 1: a range query (counted in kv_stats and the tables); 0: a trace alone */
    int prefix; /* 1: ask prefix filters of plen bytes (db->o.prefix_len) the prefix kh.key */
    size_t plen;
    struct kv_key_hashes kh; /* the prefix and its hashes, computed on first use */
    int range;               /* 1: ask range filters (both bounds set) */
    /* The range asked (merge.c sets it: the positioning's, then the bounds);
     * near: no target narrowed it (a source may stand before its start). */
    const uint8_t *qlo, *qhi;
    size_t qlolen, qhilen;
    int near;
    struct kv_merge_trace *trace; /* NULL: none */
};

enum { KV_MERGE_FWD, KV_MERGE_REV };

struct kv_merge {
    const kv_comparator *cmp;  /* user-key order; NULL: bytewise */
    const kv_comparator *tcmp; /* the tables' order (db->tcmp) for table seeks */
    struct kv_merge_source *src;
    size_t n, max;
    struct kv_merge_source **heap; /* the valid sources, top first for dir */
    size_t hn;
    int dir;                /* KV_MERGE_FWD or KV_MERGE_REV */
    const uint8_t *lo, *hi; /* bounds on the tables opened (NULL: none); the caller's */
    size_t lolen, hilen;
    uint8_t *scratch; /* internal keys for table seeks */
    size_t scap;
    /* The reader's rule (kv_merge_next_visible / prev_visible): */
    uint8_t *skip; /* forward: the key whose older versions are passed */
    size_t skiplen, skipcap;
    uint8_t *sk, *sv; /* backward: the decided pair, copied */
    size_t sklen, svlen, skcap, svcap;
    int skind; /* backward: the decided entry's kind */
    /* What else hides a version from a reader, besides a tombstone
     * (kv_merge_set_hiders; none unless set): range tombstones (a version
     * older than a tombstone covering its key, at or below the snapshot)
     * and expiry (ttl seconds at `now`). `special` says whether either is
     * set, so a merge without them pays one branch. */
    const kv_rtset *rts[3];
    size_t nrts;
    uint64_t ttl, now;
    int special;
    struct kv_merge_gate *gate; /* NULL: none (see above); the caller's */
};

/* What hides versions from this merge's reader besides tombstones: up to 3
 * range tombstone sets (NULL ones skipped; they must outlive their use)
 * and, with ttl > 0, timed entries expired at now. Cannot fail. */
void kv_merge_set_hiders(struct kv_merge *m, const kv_rtset *const *rts, size_t n, uint64_t ttl,
                         uint64_t now);

/* Sets m up for at most `max` sources ordered by user comparator cmp (NULL:
 * bytewise), table order tcmp (db->tcmp). KV_OK or KV_ENOMEM (then
 * kv_merge_free is still safe). */
int kv_merge_init(struct kv_merge *m, const kv_comparator *cmp, const kv_comparator *tcmp,
                  size_t max);
/* Frees what m holds: table iterators, buffers (not the tables, readers
 * or memtables). NULL-safe on a zeroed m. */
void kv_merge_free(struct kv_merge *m);

/* Makes the buffer *p of *cap bytes hold at least need bytes (doubling from
 * 64; its contents kept). KV_OK, or KV_ENOMEM with *p and *cap as they were.
 * The merge's own key buffers use it, and so does iter.c's blob value. */
int kv_merge_grow(uint8_t **p, size_t *cap, size_t need);

/* Adds a source (room for it: kv_merge_init's max). Nothing is positioned
 * until a kv_merge_first/last/seek*. Cannot fail. */
void kv_merge_add_mem(struct kv_merge *m, const kv_mem *mem);
void kv_merge_add_tables(struct kv_merge *m, struct kv_table *const *t, size_t n);
void kv_merge_add_reader(struct kv_merge *m, kv_sst_reader *rd);

/* Bounds on the tables a run opens (either NULL: open); the keys stay the
 * caller's and must outlive their use. Takes effect at the next
 * positioning. */
static inline void kv_merge_set_bounds(struct kv_merge *m, const uint8_t *lo, size_t lolen,
                                       const uint8_t *hi, size_t hilen)
{
    m->lo = lo;
    m->lolen = lolen;
    m->hi = hi;
    m->hilen = hilen;
}

/* Position every source and rebuild the heap. Forward: at the first entry,
 * at the first entry >= (key, seq), at the first entry of a user key
 * above key (seek_past). Backward: at the last entry, at the last entry of
 * a user key below key (seek_before). KV_OK or the first error (the heap
 * is then empty). */
int kv_merge_first(struct kv_merge *m);
int kv_merge_last(struct kv_merge *m);
int kv_merge_seek(struct kv_merge *m, const uint8_t *key, size_t klen, uint64_t seq);
int kv_merge_seek_past(struct kv_merge *m, const uint8_t *key, size_t klen);
int kv_merge_seek_before(struct kv_merge *m, const uint8_t *key, size_t klen);

/* The source holding the current entry (the smallest forward, the largest
 * backward), or NULL when every source is done. */
static inline struct kv_merge_source *kv_merge_top(const struct kv_merge *m)
{
    return m->hn ? m->heap[0] : NULL;
}

/* Moves the top source one entry in the heap's direction and restores the
 * heap. REQUIRES: a top. KV_OK or an error (the heap is then empty). */
int kv_merge_step(struct kv_merge *m);

/* <0, 0 or >0 as entry a sorts before, with or after entry b in internal
 * order (user key, then newest first). */
static inline int kv_merge_entry_cmp(const kv_comparator *cmp, const struct kv_merge_source *a,
                                     const struct kv_merge_source *b)
{
    int d = kv_sst_cmp(cmp, a->key, a->klen, b->key, b->klen);
    if (d)
        return d;
    return a->seq > b->seq ? -1 : a->seq < b->seq;
}

/* ---- the reader's rule ------------------------------------------------------------------ */

/* Is a version of sequence seq visible to a reader at snapshot snap? */
static inline int kv_merge_visible(uint64_t seq, uint64_t snap)
{
    return seq <= snap;
}

/* Forward, from the top: the first key whose newest version visible at
 * snap is not a tombstone, below `hi` (NULL: no bound). With `skipping`,
 * the versions of m->skip (a key already decided) are passed first.
 * *out: the source standing on the decided entry (its key and value are
 * valid until the merge moves), or NULL when there is none. KV_OK or an
 * error. */
int kv_merge_next_visible(struct kv_merge *m, uint64_t snap, const uint8_t *hi, size_t hilen,
                          int skipping, struct kv_merge_source **out);

/* Forward, from the top standing on a version of `key` (a decided key,
 * which may point into the top source): the next key as
 * kv_merge_next_visible finds it, every version of `key` passed. One call
 * for kv_iter_next's step. */
int kv_merge_next_key(struct kv_merge *m, uint64_t snap, const uint8_t *hi, size_t hilen,
                      const uint8_t *key, size_t klen, struct kv_merge_source **out);

/* Backward, from the top: the previous key visible at snap and not
 * deleted, not below `lo` (NULL: no bound). A key's versions come oldest
 * first; the last visible one before the key changes decides it. The
 * decided pair is copied into m->sk/sklen, m->sv/svlen, its kind into
 * m->skind (the sources stand before it afterwards); *found says whether
 * there is one. KV_OK or an error. */
int kv_merge_prev_visible(struct kv_merge *m, uint64_t snap, const uint8_t *lo, size_t lolen,
                          int *found);

/* Copies key into m->skip: the key whose versions the next
 * kv_merge_next_visible with skipping passes. KV_OK or KV_ENOMEM. */
int kv_merge_set_skip(struct kv_merge *m, const uint8_t *key, size_t klen);

/* 1 when the dropper's current key is `id` and an entry of it was already
 * decided: the next entry of it is an older version (kv_dropper_drop then
 * drops it unless a snapshot needs it). Cannot fail. */
int kv_dropper_shadowed(const struct kv_dropper *d, const uint8_t *id, size_t idlen);

/* iter.c, for kv_explain_seek: kv_iter_seek_first with every memtable
 * positioned and every table the gate meets recorded in tr (a gate made
 * for the call where the bounds make no range query: then nothing is
 * counted as one); *snapshot and *live_tables: the iterator's sequence and
 * its version's tables. The steps' meta stay valid while it lives. */
void kv_iter_seek_first_traced(kv_iter *it, struct kv_merge_trace *tr, uint64_t *snapshot,
                               size_t *live_tables);

#endif /* KV_MERGE_H */
