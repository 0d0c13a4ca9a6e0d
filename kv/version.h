/* version.h - the live tables, shared and reference-counted.
 *
 * A version is an immutable list of the live tables in search order:
 * level 0 newest first (its tables overlap, each one a sorted run of its
 * own), then each deeper level's sorted runs, newest (largest run id)
 * first, each sorted by key (a run's tables hold disjoint key ranges).
 * Under leveled compaction a deeper level is one run (id 0); lazy leveling
 * (compact.c) keeps several. For any key, a version in level L is newer
 * than any in level L + 1, and within a level a newer run's version is
 * newer than an older run's: a search asks the runs in this order. A reader or iterator holds a
 * reference to the version it started with, and through it to the tables,
 * so a flush or compaction that installs a new version never pulls a table
 * from under it. A table that a compaction replaced is marked obsolete and
 * its file is deleted when the last reference to it goes.
 *
 * Internal to kv: not installed. */
#ifndef KV_VERSION_H
#define KV_VERSION_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "blob.h"
#include "manifest.h"
#include "sstable/internal.h"

#define KV_LEVELS KV_MANIFEST_LEVELS /* 7 */

/* A live table: its manifest record and an open reader (index, properties
 * and filter in memory; its file in the database's pool, kv_sst_files). */
struct kv_table {
    _Atomic int refs;
    kv_table_meta meta;      /* owns its key range */
    kv_sst_reader *reader;
    /* Which hash a lookup hands the table's filter: 1 SipHash under the
     * database's secret (a keyed filter whose secret check matches), 0
     * seeded XXH3. A keyed filter whose secret the database lacks is
     * dropped at open (kv_sst_reader_drop_filter: the table is read
     * without it) and takes the database's own hash, which it ignores. */
    int filter_keyed;
    /* filter_keyed KV_TABLE_FILTER_OWN_SEED: the filter holds seeded XXH3
     * hashes under this seed, not the database's (an ingested table,
     * ingest.c); a lookup hashes the key with it. A compaction's output
     * takes the database's seed again. */
    uint64_t filter_seed;
    char *path;
    _Atomic int obsolete;    /* delete the file with the last reference */
    /* As kv_blob's: the writer's manifest (NULL: a read-only handle's
     * table), and the LMDB transaction of the commit that removed it (0:
     * never named): the file goes once no reader slot holds an older
     * state (kv_manifest_unlink). */
    kv_manifest *man;
    _Atomic uint64_t dead_txn;
    /* kv_db.gc_gen when the table was found to refer to no blob file past
     * blob_gc_threshold (written by a compaction that relocated them all);
     * 0: not known. Flush thread. */
    _Atomic uint64_t gc_clean_gen;
    /* Its range tombstones (the table's range tombstone block, decoded with
     * the database's comparator when it was opened); NULL: none. */
    kv_rtset *rt;
    /* What range queries met here (merge.c's gate; kv_table_stats): each
     * count bumped relaxed, read without order (a "no" bumps one count
     * only: the checks are range_negatives + range_maybes). range_fpr_sum
     * adds, over
     * the queries counted in range_negatives and range_fp (the empty ones
     * its range filter was asked), the FPR its parameters predicted for
     * each, in units of KV_TABLE_FPR_UNIT. */
    _Atomic uint64_t prefix_negatives, prefix_fp;
    _Atomic uint64_t range_maybes, range_negatives, range_fp, range_fpr_sum;
    /* Whether asking its range filter pays (merge.c, range_worth_asking):
     * the share of recent answers that were "maybe", a moving average in
     * units of 2^-16 (0: none yet, taken as useful), and the queries that
     * met the table without asking it since it last asked. Loaded and
     * stored relaxed, never read-modify-written: a lost update only
     * shifts when the filter is asked, which never changes an answer. */
    _Atomic uint32_t range_maybe_avg, range_unasked;
};

/* kv_table.range_fpr_sum's unit: a predicted FPR of 1 adds 10^9. */
#define KV_TABLE_FPR_UNIT 1e9

/* kv_table.filter_keyed: the filter's hashes take the table's own seed. */
#define KV_TABLE_FILTER_OWN_SEED 2

struct kv_version {
    _Atomic int refs;
    struct kv_table **tables; /* search order */
    size_t n;
    size_t start[KV_LEVELS + 1]; /* level L is tables[start[L], start[L+1]) */
    /* The sorted runs in search order: run r is tables[run_start[r],
     * run_start[r + 1]), level L's runs are [level_run[L], level_run[L+1]);
     * each level-0 table is a run of its own. nruns + 1 entries. */
    size_t *run_start;
    size_t nruns;
    size_t level_run[KV_LEVELS + 1];
    /* For kv_version_find_run: every key of a run r of a level >= 1 shares
     * its first skip[r] bytes (the common prefix of the run's smallest and
     * largest keys); lword[i] and sword[i] hold the next 8 bytes of table
     * i's largest and smallest keys (kv_key_word), so a search compares
     * integers in two small arrays and reads keys only on a tie. */
    size_t *skip;
    uint64_t *lword, *sword; /* unset (skip 0) under a comparator: words are bytewise */
    const kv_comparator *cmp; /* the user key order (order.h); NULL: bytewise */
    /* The live blob files (blob.h), by number: every file a table of this
     * version refers to is here, so a read holding the version can read it. */
    struct kv_blob **blobs;
    size_t nblobs;
    size_t rt_tables; /* tables with range tombstones (kv_table.rt) */
    /* Every table's range tombstones in one set, built by the first reader
     * that asks (kv_version_rt): an iterator checks one set, not one per
     * table. */
    _Atomic(kv_rtset *) rt_union;
    /* A read-only handle's version: the manifest state it was built from,
     * pinned (one reference) while the version lives, so that the writer
     * keeps its files (manifest.h, kv_manifest_pin). NULL: a writer's. */
    kv_manifest_pin *pin;
};

/* The blob side of a version edit: files added, and files removed (every
 * record garbage), by number. */
struct kv_blob_edit {
    struct kv_blob *const *add;
    size_t nadd;
    const uint64_t *remove;
    size_t nremove;
};

void kv_table_ref(struct kv_table *t);
void kv_table_unref(struct kv_table *t);

/* A version of base's tables (NULL: none) minus those numbered in remove[],
 * plus add[], their key ranges in cmp's order (NULL: bytewise); one
 * reference each, and the version's own count is 1. NULL when out of
 * memory. */
struct kv_version *kv_version_edit(const struct kv_version *base, const uint64_t *remove,
                                   size_t nremove, struct kv_table *const *add, size_t nadd,
                                   const kv_comparator *cmp);
/* kv_version_edit, and base's blob files minus be->remove plus be->add (be
 * NULL: base's as they are), one reference each. */
struct kv_version *kv_version_edit_blobs(const struct kv_version *base, const uint64_t *remove,
                                         size_t nremove, struct kv_table *const *add,
                                         size_t nadd, const kv_comparator *cmp,
                                         const struct kv_blob_edit *be);

/* The range tombstones of all v's tables as one set (*out NULL: none),
 * built on the first call and kept with v: valid while v is held. KV_OK
 * or KV_ENOMEM. */
int kv_version_rt(struct kv_version *v, const kv_rtset **out);

void kv_version_ref(struct kv_version *v);
void kv_version_unref(struct kv_version *v); /* NULL is a no-op; the last drops v->pin */

/* Bytes of the files of level L. */
uint64_t kv_version_level_bytes(const struct kv_version *v, int level);

/* Of tables t[0, n) (sorted by key under cmp, disjoint), the first whose
 * largest key is >= key, or n: a binary search on whole keys. */
size_t kv_tables_at_or_after(struct kv_table *const *t, size_t n, const void *key, size_t klen,
                             const kv_comparator *cmp);
/* In run r (any level): the index in tables[] of the table whose range
 * may hold the user key, or SIZE_MAX. */
size_t kv_version_find_run(const struct kv_version *v, size_t r, const void *key, size_t klen);

/* The run ids of level L (>= 1): how many runs it holds. */
static inline size_t kv_version_level_runs(const struct kv_version *v, int level)
{
    return v->level_run[level + 1] - v->level_run[level];
}

/* The run id of run r (0 for level 0's). */
static inline uint64_t kv_version_run_id(const struct kv_version *v, size_t r)
{
    return v->tables[v->run_start[r]]->meta.run;
}

/* 1 when some table of a level >= `level` has a range that holds the key. */
int kv_version_key_below(const struct kv_version *v, int level, const void *key, size_t klen);

/* 1 when some table of level `level` (>= 1) in a run older than `run`
 * (a smaller id), or of a deeper level, has a range that holds the key:
 * what a compaction writing run `run` of `level` has below its output. */
int kv_version_key_older(const struct kv_version *v, int level, uint64_t run, const void *key,
                         size_t klen);

#endif /* KV_VERSION_H */
