/* db.h - the inside of a kv_db, and the functions the files of kv/ call on
 * it. Its users: db.c (open, close, snapshots), write.c (writes, the write
 * controller), get.c (the Get walk), options.c (the options), recover.c
 * (recovery at open), background.c (the background thread), compact.c
 * (compactions, table building), iter.c (iterators), explain.c
 * (kv_explain_get), stats.c (kv_stats, kv_table_stats_get,
 * kv_metrics_text), multiget.c (kv_multi_get), props.c
 * (kv_approximate_sizes, kv_property).
 *
 * Locking: db->mu guards the fields marked [mu]. Readers take no lock:
 * they load last_seq (an atomic) and hold the published view (view.h: the
 * memtables and the version) through a reader slot, the protocol view.c
 * and doc/concurrency.md describe. Counters are per-thread stripes
 * (util/tally.h), read without the lock.
 *
 * Internal to kv: not installed. */
#ifndef KV_DB_H
#define KV_DB_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <kv/kv.h>
#include "counters.h"
#include "manifest.h"
#include "memtable.h"
#include "sstable/internal.h"
#include "util/coding.h"
#include "util/error.h"
#include "util/hash.h"
#include "util/siphash.h"
#include "util/tally.h"
#include "version.h"
#include "view.h"
#include "wal.h"

/* A memtable and the number of the log its writes went to. */
struct kv_memref {
    _Atomic int refs;
    kv_mem *mem;
    uint64_t max_seq;  /* of its entries (written by the commit leader) */
    uint64_t next_log; /* set when it becomes immutable: the log that follows it */
    uint64_t large;    /* bytes of values bound for blob files (commit leader) */
    /* Its range tombstones, fragmented (NULL: none). Replaced, never
     * changed, by the commit leader under mu when a range delete lands,
     * and republished in a view before the write's sequence is; a reader
     * takes the set of the view it holds (kv_view.mem_rt), never this. */
    kv_rtset *rt;
    /* The table whose range filter's map buckets the memtable's occupancy
     * gate (kv_mem_set_range_map), held while the memtable lives; NULL:
     * no gate. */
    struct kv_table *map_table;
};

/* Bytes of an error text the handle keeps (util/status.c keeps as many). */
#define KV_DB_TEXT 512

/* A thread inside kv_write or kv_flush, waiting in line. */
struct kv_writer {
    const struct kv_batch *batch; /* NULL: a kv_flush */
    int sync, done, rc;
    pthread_cond_t cv;
    struct kv_writer *next;
    char text[KV_DB_TEXT]; /* rc's text, copied by the leader that set rc: the
                            * error text is per thread (status.h) */
};

/* Writes one table (builder.c), for flushes, compactions and repair alike. */
struct kv_builder {
    kv_db *db;
    kv_sst_writer *w;
    kv_table_meta meta; /* filled as entries are added */
    size_t largest_cap;
    uint64_t bytes;     /* keys and values added */
    kv_rt *rts;         /* range tombstones added (kv_builder_add_range): borrowed keys */
    size_t nrt, rtcap;
    int have_range; /* meta.smallest/largest hold something */
    /* Scan filters (kv_options.prefix_len, range_filter_bits): which the
     * table gets (KV_BUILD_PREFIX, KV_BUILD_RANGE), and the prefix of the
     * last key added, whose hash went to the filter. */
    unsigned scan;
    uint8_t *pfx;
    size_t pfxlen, pfxcap;
    int have_pfx;
};
enum { KV_BUILD_PREFIX = 1, KV_BUILD_RANGE = 2 };

/* One entry a dropper hands on (kv_dropper_add): kept, made anew, or dropped. */
struct kv_dropper_out {
    uint64_t seq;
    int kind;           /* KV_KIND_* (TOMBSTONE, VALUE, BLOB, MERGE, TVALUE, TMERGE) */
    const uint8_t *val; /* valid during the call */
    size_t vlen;
    int same;   /* 1: the entry given to kv_dropper_add, as it was given */
    int keep;   /* 0: dropped (then same is 1): a blob reference's record is garbage */
    int pinned; /* kept only because a snapshot could still read it */
};

/* A merge operand waiting for what lies below it (merge.c). */
struct kv_dropper_op {
    uint8_t *p;
    size_t len, cap;
    uint64_t seq;
    int kind;
};

/* Decides which entries a flush or compaction keeps (merge.c, the shadowing rule). */
struct kv_dropper {
    uint64_t horizon;   /* every snapshot sees entries at or below it */
    uint8_t *key;       /* the current key */
    size_t len, cap;
    int have;
    uint64_t newer_seq; /* of the previous entry of the current key */
    int pinned;         /* the last entry kept was kept only for a snapshot */
    /* kv_dropper_add's setting: */
    kv_db *db;          /* merge operator, compaction filter, ttl_seconds, counters (NULL: none) */
    const kv_rtset *rt; /* the range tombstones over the entries, every sequence (NULL: none) */
    int level;          /* of the output, for the compaction filter */
    int lenient;        /* a full merge that fails keeps the operands as they are (a
                         * flush: it must not stop writes); else it fails the job */
    uint64_t now;       /* time(NULL) at the job's start, for ttl_seconds */
    void *ctx;
    int (*emit)(void *ctx, const struct kv_dropper_out *o);
    /* 1 when a table below the output could hold key (NULL: always 1). */
    int (*below)(void *ctx, const uint8_t *key, size_t klen);
    /* A blob reference's value, malloc'd (NULL: blob values are not read). */
    int (*blob)(void *ctx, const uint8_t *key, size_t klen, const uint8_t *ref, size_t rlen,
                void **val, size_t *vlen);
    /* kv_dropper_add's state for the current key: */
    int closed;                /* an entry every snapshot sees decided it: older ones go */
    int rdel;                  /* ... and that was a range tombstone */
    int base;                  /* nothing below holds it: 1, 0, -1 not asked yet */
    uint64_t cover;            /* newest covering range tombstone <= horizon, 0 none, */
                               /* UINT64_MAX not looked up yet */
    struct kv_dropper_op *ops; /* operands at or below the horizon, newest first */
    size_t nops, opcap;
    uint8_t *buf; /* a value made anew (a stamp appended) */
    size_t bufcap;
};

/* Where the last size-triggered compaction of a level ended. */
struct kv_compact_pointer {
    uint8_t *key;
    size_t len;
    int have;
};

/* A live snapshot: its sequence, in the database's list. */
struct kv_snapshot {
    uint64_t seq;
    /* A read-only handle's snapshot holds the view it was taken in (one of
     * its holders, view.h), so that reads through it keep that view after a
     * kv_catch_up: the writer's compactions never knew of its sequence.
     * NULL on a writer's handle. */
    struct kv_view *view;
    /* Registered in a reader slot (view.h), or, when every slot was
     * taken (slot NULL), in the database's list under mu. */
    struct kv_view_slot *slot;
    struct kv_snapshot *prev, *next; /* [mu] in the list */
};

/* The store's event counters (counters.h, the TALLY rows): one stripe of
 * them per counting thread (tally.h), bumped with KV_COUNT and read with
 * KV_LOAD. */
struct kv_counters {
    _Alignas(64) struct {
        KV_METRICS(KV_COUNTER_FIELD, KV_COUNTER_NONE, KV_COUNTER_LEVELS, KV_COUNTER_NONE)
    };
};

/* A timed entry's write time (KV_KIND_TVALUE, KV_KIND_TMERGE: its value's
 * last KV_TTL_STAMP bytes; vlen >= KV_TTL_STAMP, which the batch and table
 * readers check). */
static inline uint64_t kv_ttl_stamp(const uint8_t *val, size_t vlen)
{
    return kv_get64(val + vlen - KV_TTL_STAMP);
}

/* 1 when an entry of this kind and value has expired at `now` (seconds)
 * under ttl seconds (0: nothing expires): written more than ttl seconds
 * ago. Untimed kinds never expire. */
static inline int kv_ttl_expired(uint64_t ttl, uint64_t now, int kind, const uint8_t *val,
                                 size_t vlen)
{
    if (!ttl || (kind != KV_KIND_TVALUE && kind != KV_KIND_TMERGE) || vlen < KV_TTL_STAMP)
        return 0;
    uint64_t t = kv_ttl_stamp(val, vlen);
    return now > t && now - t > ttl;
}

#define KV_COUNT(db, field, n)                                                                 \
    do {                                                                                       \
        unsigned slot_ = kv_tally_slot();                                                      \
        kv_tally_add(&(db)->c[slot_].field, slot_, (n));                                       \
    } while (0)
#define KV_LOAD(db, field) kv_tally_sum(&(db)->c[0].field, sizeof *(db)->c)

/* One log a read-only handle replayed into its memtable, and how far. */
struct kv_ro_log {
    uint64_t number;
    uint64_t bytes; /* of the file taken: records up to here are in the memtable */
};

/* A read-only handle's side (readonly.c; kv_options.read_only). */
struct kv_ro {
    pthread_mutex_t mu;      /* kv_catch_up, one at a time; kv_db_ro_cut */
    kv_manifest_pin *pin;    /* [mu] the pin of db->current (it holds a reference) */
    kv_manifest_state state; /* [mu] the manifest state db->current was built from */
    struct kv_ro_log *logs;  /* [mu] the logs (>= state.log_number) in db->mem, oldest first */
    size_t nlogs, logcap;    /* [mu] */
    uint64_t next_seq;       /* [mu] the sequence the next log record must start at (0: any
                               * at or below state.last_seq + 1) */
    int stale;               /* [mu] db->mem cannot take more: the next catch-up starts a
                               * fresh memtable (a replay that stopped part-way) */
};

/* What a read-only handle's reads see, for kv_checkpoint (checkpoint.c):
 * taken by kv_db_ro_cut with a reference to each of pin and v, freed with
 * kv_db_ro_cut_free. The tables and blob files are v's; the writes past
 * state.last_seq are the first bytes[i] bytes of each log logs[i] (their
 * files kept by the pin: the writer defers their deletion as a table's). */
struct kv_ro_cut {
    kv_manifest_pin *pin;
    kv_manifest_state state; /* as pinned; last_seq is the tables' */
    struct kv_version *v;
    struct kv_ro_log *logs; /* malloc'd copy */
    size_t nlogs;
    uint64_t last_seq; /* the newest sequence the handle reads */
};

struct kv_db {
    char *path;
    /* Set for a read-only handle (kv_options.read_only), NULL for the
     * writer's: no LOCK, no log, no background thread, no manifest writes. */
    struct kv_ro *ro;
    kv_options o;
    /* The order of user keys (order.h): o.comparator, or NULL for bytewise
     * (also for a comparator named "kv.bytewise"). tcmp: what the tables
     * are written and read with: NULL (bytewise internal keys are in the
     * store's order), or &icmp, the internal-key order under cmp. */
    const kv_comparator *cmp;
    const kv_comparator *tcmp;
    kv_comparator icmp;
    int lock_fd;
    uint64_t seed; /* filter hash seed, fixed at creation */
    /* Keyed filters (kv_options.filter_keyed_hash, doc/manifest.md
     * "filter_secret"): the secret is read from the manifest at open
     * whenever it holds one, so that tables written keyed keep their
     * filters even when the database is opened unkeyed; `keyed` says
     * whether this open writes keyed filters (and keys its memtables'). */
    int keyed;             /* o.filter_keyed_hash: new filters hash with sip */
    int have_secret;       /* the manifest holds a secret: sip and secret_check are set */
    kv_sipkey sip;         /* the secret, expanded */
    uint64_t secret_check; /* kv_bloom_secret_check of it: what keyed tables record */
    kv_manifest *man; /* used by kv_open and then only by the flush thread */
    kv_sst_cache *cache;
    struct kv_tablemem *tm; /* table_memory_budget's chooser (tablemem.c); NULL: none */
    kv_sst_files *files; /* the open table files: max_open_files less blob_files' (kv.h) */
    kv_blob_files *blob_files; /* the open blob files: an eighth of max_open_files */
    /* Tables opened with use_direct_reads whose file system refused O_DIRECT
     * (kv_stats: direct_reads_refused). */
    _Atomic uint64_t direct_refused;
    /* Entries of the last memtable flushed: the size of a level-0 run, for
     * filter_policy KV_FILTER_MONKEY (kv_filter_bits). 0: none yet. */
    _Atomic uint64_t l0_run_keys;

    pthread_mutex_t mu;
    pthread_cond_t work_cv; /* the flush thread waits for work (an immutable memtable,
                             * a kv_compact_range, kv_close), or until an idle
                             * compaction or a view reclaim is due (background.c) */
    pthread_cond_t done_cv; /* a flush ended: stalled writers and kv_flush wait */
    struct kv_memref *mem, *imm;     /* [mu] */
    /* The last flush's table, when it has a range filter of some keys: the
     * next memtable made buckets its occupancy gate by that filter's map
     * (kv_memref_new); held until replaced or kv_close. [mu] */
    struct kv_table *mem_map;
    struct kv_version *current;      /* [mu] */
    /* What readers see of the three above (view.h): republished under mu
     * whenever one of them changes. Readers load it without the lock. */
    _Atomic(struct kv_view *) view;
    struct kv_view *retired;         /* [mu] replaced views, freed once unheld */
    int reclaim_pending;             /* [mu] Gets alone hold a retired view: the
                                      * background thread looks again in 1 ms */
    struct kv_view_slot *slots;      /* KV_VIEW_SLOTS reader slots */
    kv_manifest_state state;         /* [mu] as last committed */
    uint64_t next_file;              /* [mu] */
    /* Newest sequence visible to reads: stored (release) by the commit
     * leader under mu, loaded (acquire) by readers without it. */
    _Atomic uint64_t last_seq;
    kv_wal *wal;                     /* [mu] swapped; written by the commit leader */
    /* [mu] The log before `wal`, set at a memtable switch: neither its tail
     * nor the directory entry of `wal` is synced yet. The background thread
     * closes it and clears this once the flush of the memtable that log
     * holds has committed, syncing the directory entry (and the log's tail
     * only if the flush failed); a sync write waits for that, and when
     * sync_waiters is not 0 as the flush starts (or kv_options.sync), the
     * log is synced and closed first (background.c, sync_old_log). Until then a
     * machine crash may lose that log's tail, and replay then stops before
     * `wal` (recover.c: the sequences of consecutive records must follow
     * on), so what survives is a prefix. */
    kv_wal *old_wal;
    int sync_waiters;                /* [mu] sync writes waiting for old_wal */
    uint64_t wal_number;             /* [mu] */
    struct kv_writer *queue, *queue_tail; /* [mu] */
    int write_error;                 /* [mu] sticky: the log failed */
    int bg_error;                    /* [mu] sticky: a flush or compaction failed */
    /* Both stop writes and background work (kv_db_stopped). KV_ENOSPC in
     * either (and nothing else in the other) is a full disk, which the
     * background thread retries (background.c, resume): a failed sync of
     * any file is KV_EIO (util/file.c), never retried, kept until close. */
    uint64_t dead_log;       /* [mu] the log whose append met KV_ENOSPC
                                      * (write_error): rolled over at resume */
    uint64_t resume_at;      /* [mu] next retry (kv_db_now_ns; 0: none due) */
    uint64_t resume_backoff; /* [mu] its interval, ns: 100 ms doubling to 2 s */
    uint64_t resume_asked;   /* [mu] kv_resume's requests, */
    uint64_t resume_done;    /* [mu] and those a retry answered */
    int resuming;            /* [mu] a retry runs: its failures are not new errors */
    /* Their texts, kept from the thread that met the error and set again on
     * each thread a call returns it to (status.h: every error has its text). */
    char write_text[KV_DB_TEXT];     /* [mu] */
    char bg_text[KV_DB_TEXT];        /* [mu] */
    int closing;                     /* [mu] */
    _Atomic int stopping;            /* kv_close: a compaction abandons its work */
    _Atomic int imm_pending;         /* an immutable memtable waits for its flush */
    int manual_pending;              /* [mu] kv_compact_range requests waiting */
    int manual_running;              /* [mu] */
    int bg_busy;                     /* [mu] background threads flushing or compacting now
                                      * (kv_ingest waits for 0 with bg_paused set) */
    int bg_paused;                   /* [mu] kv_ingest commits: the background thread
                                      * starts no job while set */
    uint64_t manual_done;            /* [mu] requests served */
    int manual_rc;                   /* [mu] result of the last one */
    char manual_text[KV_DB_TEXT];    /* [mu] its error's text */
    const uint8_t *manual_lo, *manual_hi; /* [mu] its range (NULL: open) */
    size_t manual_lolen, manual_hilen;
    struct kv_compact_pointer compact_pointer[KV_LEVELS]; /* [mu] (kv_compact_claim) */
    struct kv_snapshot snapshots;    /* [mu] list head; snapshots.next is the oldest */
    size_t iters;                    /* [mu] live iterators without a slot (view.h;
                                      * those with one are counted there): while any
                                      * iterator or snapshot lives, kv_close refuses
                                      * with KV_EBUSY */
    pthread_t bg;
    int bg_running;
    /* Background jobs (kv_options.max_background_jobs, doc/database.md
     * "Background jobs"): with more than one, `bg` flushes (and runs
     * kv_compact_range, idle compactions and full-disk retries) and
     * job threads jobs[0, njobs) run compactions, each claiming its inputs
     * (kv_table.busy) and its output range (claims) under mu. Commits are
     * serialized by commit_mu (taken before mu, never under it). */
    pthread_t *jobs;
    int njobs;                       /* job threads started */
    pthread_cond_t job_cv;           /* job threads wait here for a compaction to claim */
    pthread_mutex_t commit_mu;       /* one commit at a time (background.c, commit_blobs) */
    int drain;                       /* [mu] job threads claim nothing while set: the
                                      * flush thread runs a compaction alone */
    int flushes_running;             /* [mu] 0 or 1 */
    int compactions_running;         /* [mu] claimed, manual and idle ones */
    int compactions_parallel_max;    /* [mu] the most compactions_running was */
    int threads_busy;                /* [mu] compactions and their extra parts running:
                                      * what free jobs are counted from (not flushes:
                                      * short, and on a thread of their own) */
    _Atomic uint64_t subcompactions; /* parts beyond a compaction's first, summed */
    uint64_t compaction_max_read;    /* [mu] the most bytes one compaction read */
    /* [mu] The output ranges of the running claimed compactions: a
     * compaction is not claimed whose output overlaps one of the same
     * level. */
    struct kv_claim {
        int out_level;
        const kv_table_meta *lo, *hi; /* smallest from lo, largest from hi */
    } claims[KV_MAX_BACKGROUND_JOBS];
    int nclaims;

    /* The write controller (write.c, write_ctl_delay): [mu], used by the
     * commit leader. rate 0: not delaying. */
    struct kv_write_ctl {
        double rate;          /* bytes/s let through now */
        double adapt;         /* the factor debt changes moved the rate by, (0, 1] */
        uint64_t paid_ns;     /* when the bytes let through so far are paid for */
        uint64_t debt;        /* the level-0 debt at the last look (write.c,
                               * write_pressure) */
        uint64_t max_delay;   /* the longest delay asked for, microseconds */
        double flush_rate;    /* memtable bytes per second of the recent flushes
                               * (moving average; 0: none yet), set by background.c */
        uint64_t imm_since_ns; /* when db->imm became immutable (CLOCK_MONOTONIC) */
    } ctl;
    /* [mu] Blob GC (compact.c, gc_candidate): moves on each time a live
     * blob file's garbage passes blob_gc_threshold, so that tables found
     * clean of such files before are looked at again. Starts at 1. */
    uint64_t gc_gen;
    uint8_t *group;  /* the commit leader's buffer for a merged batch */
    size_t group_cap;

    struct kv_counters *c; /* KV_TALLY_STRIPES + 1 stripes */
    uint64_t recovered_records, recovery_dropped, recovery_damaged; /* set by kv_open */
    char recovery_text[2048];  /* kv_recovery_report: one line per damaged or skipped log */
};

/* db.c */
/* Error texts at kv.h's boundary (util/error.h, status.h). kv_db_fail:
 * rc, returned by the call `call` that began at `mark`; an error no lower
 * layer explained gets "<dir>: <call>: <kv_strerror(rc)>" (db NULL: no
 * dir). kv_db_einval: KV_EINVAL for a bad argument, with the reason. */
int kv_db_fail(const kv_db *db, const char *call, unsigned long long mark, int rc);
int kv_db_einval(const kv_db *db, const char *call, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* On the thread that met `rc` in what began at `mark`: keeps its text
 * (this thread's, or "<dir>: <what>: <kv_strerror(rc)>" when none was set)
 * in dst, to be set again on the thread a later call returns rc to. Under
 * mu when dst is a [mu] field. */
void kv_db_keep_text(const kv_db *db, char dst[KV_DB_TEXT], const char *what,
                     unsigned long long mark, int rc);
/* Under mu: the error that stops writes (the log's, else the background
 * thread's), with its text set on this thread; KV_OK when there is none. */
/* Under mu, on the thread that met rc in what began at `mark`: the handle
 * stops with rc in *slot (&db->write_error or &db->bg_error, text kept in
 * `text`, the slot's) unless that slot holds an error already; counted in
 * kv_stats.background_errors when it held none before, and the background
 * thread woken (a full disk is retried). */
void kv_db_stop(kv_db *db, int *slot, char text[KV_DB_TEXT], const char *what,
                unsigned long long mark, int rc);
/* Under mu: 1 while an error stops writes and background work. */
static inline int kv_db_stopped(const kv_db *db)
{
    return db->write_error || db->bg_error;
}
/* Under mu: 1 when the error in force is a full disk alone (KV_ENOSPC
 * from a write, never a sync), which resume may clear. */
static inline int kv_db_recoverable(const kv_db *db)
{
    return kv_db_stopped(db) && (!db->write_error || db->write_error == KV_ENOSPC) &&
           (!db->bg_error || db->bg_error == KV_ENOSPC);
}
static inline int kv_db_sticky_error(const kv_db *db)
{
    if (db->write_error)
        return kv_error_set(db->write_error, "%s", db->write_text);
    if (db->bg_error)
        return kv_error_set(db->bg_error, "%s", db->bg_text);
    return KV_OK;
}
/* The check of a key argument that kv_get, kv_put and the others make:
 * KV_OK, or KV_EINVAL with its text ("<dir>: <call>: NULL key with length
 * 3") for a NULL key with a nonzero length or a key over KV_MAX_KEY_SIZE
 * (db may be NULL). Inline: every Get and put makes it. */
static inline int kv_db_check_key(const kv_db *db, const char *call, const void *key, size_t klen)
{
    if (klen && !key)
        return kv_db_einval(db, call, "NULL key with length %zu", klen);
    if (klen > KV_MAX_KEY_SIZE)
        return kv_db_einval(db, call, "key of %zu bytes, over KV_MAX_KEY_SIZE (%zu)", klen,
                            KV_MAX_KEY_SIZE);
    return KV_OK;
}
/* A new, empty memtable with one reference, with a filter when
 * db->o.memtable_filter is set (sized from write_buffer_size); NULL when out
 * of memory. */
struct kv_memref *kv_memref_new(const kv_db *db);
/* Drops a reference to a memtable (the last one frees it). */
void kv_memref_unref(struct kv_memref *m);
/* The current version, with a reference (takes mu). */
struct kv_version *kv_db_ref_version(kv_db *db);
/* The next file number: *out = next_file, which moves on. Under mu, or
 * in kv_open before the database is shared. Past KV_DBFILE_MAX_NUMBER
 * (dbfiles.h) there is none: KV_ECORRUPT, with text; the counter never
 * wraps onto live numbers. */
int kv_db_new_file_number(kv_db *db, uint64_t *out);
/* Opens a table the manifest names (or is about to); takes meta's keys. */
int kv_db_table_open(kv_db *db, kv_table_meta *meta, struct kv_table **out);
/* The sequence every live snapshot sees (the oldest, or the last
 * sequence when there is none). Under mu. */
uint64_t kv_db_oldest_snapshot(kv_db *db);

/* get.c */
/* What a read sees: the memtables and the current version of the view it
 * holds, and the sequence it reads at. kv_multi_get (multiget.c) holds
 * one for a whole batch of keys. */
struct kv_read_view {
    struct kv_memref *mem, *imm; /* imm: NULL when there is none */
    struct kv_version *v;
    uint64_t seq;                /* the snapshot's, or last_seq at the take */
    struct kv_view_hold hold;
};

/* Takes a short hold on the published view, without a lock (view.h); seq
 * is snap's (NULL: the newest write's, loaded before the view). Cannot
 * fail. */
void kv_db_view_take(kv_db *db, const kv_snapshot *snap, struct kv_read_view *out);
/* Gives it back. Cannot fail. */
void kv_db_view_drop(kv_db *db, struct kv_read_view *rv);
/* The memtables' answer for `key` (whose kv_hash_key is h) at rv->seq,
 * as kv_get takes it (mem, then imm, each skipped when its filter says
 * no, counted in db's memtable_filter_negatives): with *decided set, KV_OK
 * (*val copied, kv_free), KV_NOTFOUND (a tombstone) or KV_ENOMEM; else
 * KV_NOTFOUND (the tables decide). */
/* Range deletes gathered from a batch or a log for one kv_rtset_union
 * (write.c, recover.c, repair.c). With `copy`, each one's keys are copied
 * (a log record's bytes go with the record); else they point into the
 * caller's bytes, which must outlive the list. */
struct kv_rt_list {
    kv_rt *v;
    size_t n, cap;
    int copy;
};
/* Adds [b, e) at seq. KV_OK or KV_ENOMEM (the list as it was). */
int kv_rt_list_add(struct kv_rt_list *l, uint64_t seq, const uint8_t *b, size_t blen,
                   const uint8_t *e, size_t elen);
/* Frees the list (and the copies). Cannot fail. */
void kv_rt_list_free(struct kv_rt_list *l);

/* kv_get's whole walk at rv: KV_OK (*val, kv_free), KV_NOTFOUND or an
 * error. multiget.c's answer for a key its own walk cannot decide (merge
 * operands, range tombstones, timed values). */
int kv_db_view_get(kv_db *db, const struct kv_read_view *rv, const void *key, size_t klen,
                   void **val, size_t *vlen);
int kv_db_view_mem_get(kv_db *db, const struct kv_read_view *rv, const void *key, size_t klen,
                       uint64_t h, void **val, size_t *vlen, int *decided);
/* One step of a traced Get: the public step, and the table it probed (its
 * key range is copied by the caller while the trace holds the version). */
struct kv_get_step {
    kv_explain_step s;
    const kv_table_meta *meta; /* table steps; NULL for memtable steps */
};

/* What kv_db_get_traced records for kv_explain_get. */
struct kv_get_trace {
    struct kv_get_step *steps; /* malloc'd by the walk: two + one per live table */
    size_t nsteps;
    uint64_t hash, snapshot;
    size_t live_tables;
    struct kv_version *version; /* a reference the caller drops: the steps'
                                 * meta point into it */
};

/* kv_get, recording each step in *tr (the caller frees tr->steps and drops
 * tr->version, both set even on error where not NULL). The same walk as
 * kv_get_at: same hash, memtables, tables in the same order, same counters.
 * An error that is not a step's (KV_ENOMEM) leaves the last step short of
 * outcome KV_EXPLAIN_FAILED. */
int kv_db_get_traced(kv_db *db, const void *key, size_t klen, void **val, size_t *vlen,
                     struct kv_get_trace *tr);

/* write.c */
/* kv_ingest's hold on the write path, under mu: kv_db_writes_hold puts w
 * (uninitialised) at the head of the write queue, so that no write commits
 * and no writer switches the memtable until kv_db_writes_release (w's rc
 * rc): KV_OK, or KV_ENOMEM and nothing held. kv_db_writes_flush, holding
 * it, hands a non-empty memtable to the flush thread and waits for its
 * flush (kv_flush's): KV_OK or the error that stops writes. */
int kv_db_writes_hold(kv_db *db, struct kv_writer *w);
int kv_db_writes_flush(kv_db *db);
void kv_db_writes_release(kv_db *db, struct kv_writer *w, int rc);

/* options.c */
/* The options a call runs with: opts (NULL: the defaults; an older
 * version's struct: its fields, the later ones at their defaults) checked.
 * KV_OK; KV_EINVAL with text ("<path>: <call>: bad option: ...") for a bad
 * option or a NULL or empty path. Used by kv_open and kv_repair. */
int kv_db_options(const char *path, const char *call, const kv_options *opts, kv_options *o);
/* db.c */
/* A handle with the database's LOCK taken, its options, counters, block
 * cache and table-file pool, and nothing else yet (no manifest, version,
 * log, memtable or background thread): kv_open recovers into it,
 * kv_repair (repair.c) builds tables with it. KV_EBUSY when the database
 * is open; the lock's errors (kv_dbfile_lock); KV_ENOMEM. Every error has
 * its text. */
int kv_db_bare(const char *path, const kv_options *o, kv_db **out);
/* Frees a handle whose background thread is not running (or never ran),
 * with whatever it holds; the LOCK goes with it. NULL is a no-op. */
void kv_db_free(kv_db *db);

/* The format version of a database as a whole, in the manifest's state. */
#define KV_FORMAT_VERSION 1u
/* ... and of one that used range deletes, merges or ttl_seconds (doc/manifest.md):
 * an older kv refuses it. kv reads both. */
#define KV_FORMAT_VERSION_FEATURES 2u

/* repair.c */
/* The directory kv_repair builds its new manifest in, inside the
 * database's directory; a kill leaves it behind, and the next kv_repair or
 * kv_destroy removes it. */
#define KV_REPAIR_DIR "repair.tmp"
/* The directory kv_repair moves what it cannot use to (never deleted). */
#define KV_LOST_DIR "lost"

/* recover.c */
/* Under the LOCK, before the database takes writes: opens the manifest and
 * the live tables, removes unnamed files, replays the live logs into a table
 * and commits it with a fresh log (db->wal, db->mem ready). */
int kv_db_recover(kv_db *db);
/* A random filter seed for a new database (getrandom, else the clock and
 * the process id). Cannot fail. */
uint64_t kv_db_random_seed(void);

/* readonly.c */
/* kv_open's work for a read-only handle, in place of kv_db_recover: the
 * manifest opened read-only (manifest.h), its state pinned, the tables and
 * blob files opened, the writer's live logs replayed into db->mem (a torn
 * tail tolerated), the first view published. Writes nothing. */
int kv_db_ro_open(kv_db *db);
/* Frees db->ro (after the version that holds its pin). */
void kv_db_ro_free(kv_db *db);
/* The check every write entry point makes (write.c): KV_EINVAL with text
 * ("<dir>: <call>: the handle is read-only") on a read-only handle. */
static inline int kv_db_check_writable(const kv_db *db, const char *call)
{
    return db->ro ? kv_db_einval(db, call, "the handle is read-only (kv_options.read_only)")
                  : KV_OK;
}
/* A read-only handle's cut (struct kv_ro_cut); KV_EINVAL on a writer's
 * handle, KV_ENOMEM. Consistent with the published view: taken under the
 * catch-up lock. */
int kv_db_ro_cut(kv_db *db, struct kv_ro_cut *out);
void kv_db_ro_cut_free(struct kv_ro_cut *c);

/* background.c */
/* Starts the flush thread and, with max_background_jobs > 1, the job
 * threads (db->jobs). KV_OK, or KV_ENOMEM with text when a thread cannot
 * start: those started are stopped and joined again. */
int kv_db_background_start(kv_db *db);
/* Joins the threads kv_db_background_start started, after kv_close set
 * closing and woke them (work_cv, job_cv). Cannot fail. */
void kv_db_background_join(kv_db *db);
/* Writes a memtable as a level-0 table (*out NULL when nothing is left to
 * write), its values of min_blob_size bytes or more to a blob file of bo
 * (NULL: every value in the table), which is finished and synced when this
 * returns KV_OK; the caller commits it and frees bo. Versions no snapshot at `horizon` or above can see are dropped;
 * tombstones are kept, since older tables may hold their keys. rt: the
 * memtable's range tombstones (NULL: none), written as the table's range
 * tombstone block (a memtable of range tombstones alone still makes a
 * table); the entries they cover for every snapshot are dropped. */
int kv_db_flush_memtable(kv_db *db, const kv_mem *mem, const kv_rtset *rt, uint64_t horizon,
                         struct kv_blob_out *bo, struct kv_table **out);
/* One manifest transaction (state: NULL keeps the current one but for
 * next_file), then the new version is installed and removed tables are
 * marked obsolete. Any thread: commits take commit_mu, one at a time
 * (kv_open, kv_ingest and the background threads). */
int kv_db_commit(kv_db *db, const kv_manifest_state *state, const uint64_t *remove,
                 size_t nremove, struct kv_table *const *add, size_t nadd);
/* kv_db_commit with the blob side of the jobs outs[0, nouts) (blob.h): their
 * new files join the version and the manifest, their garbage is added to
 * the live files' counts, and a file left with nothing but garbage leaves
 * both (deleted when no version holds it). KV_ECORRUPT for garbage in a
 * file that is not live, or more garbage than a file holds. */
int kv_db_commit_blobs(kv_db *db, const kv_manifest_state *state, const uint64_t *remove,
                       size_t nremove, struct kv_table *const *add, size_t nadd,
                       struct kv_blob_out *const *outs, size_t nouts);
/* Flushes the immutable memtable if one waits (flush thread only). */
int kv_db_flush_pending(kv_db *db);

/* compact.c */
/* The bits per key of the filter of a table written to `level` of v, as
 * the filter policy gives it (kv_options.filter_policy): for Monkey, the
 * allocation (kv_bloom_allocate) over v's runs once the job's output of
 * run_keys keys is in `level` (a new run, for level 0) and the tables
 * gone[] (its inputs) have left. */
double kv_filter_bits(kv_db *db, const struct kv_version *v, int level, uint64_t run_keys,
                      struct kv_table *const *gone, size_t ngone);
/* kv_filter_bits for an output that joins sorted run `run` of `level`
 * (version.h; one of its own when the level keeps no such run, as a new
 * run of lazy leveling, UINT64_MAX, does). kv_filter_bits is run 0. */
double kv_filter_bits_run(kv_db *db, const struct kv_version *v, int level, uint64_t run,
                          uint64_t run_keys, struct kv_table *const *gone, size_t ngone);
/* Starts a table of `level` with a filter of bits_per_key (0: none). */
int kv_builder_start(kv_db *db, struct kv_builder *b, uint32_t level, double bits_per_key,
                     const char *note);
int kv_builder_add(struct kv_builder *b, const uint8_t *ikey, size_t ilen, const uint8_t *ukey,
                   size_t uklen, uint64_t hash, uint64_t seq, const void *val, size_t vlen);
/* Finishes, syncs and opens the table (*out, one reference). On error the
 * file is gone. */
int kv_builder_finish(struct kv_builder *b, struct kv_table **out);
/* Adds a range tombstone fragment to the table's range tombstone block; the
 * fragment's keys and sequences must live until kv_builder_finish. The
 * table's range grows to cover [start, end]. KV_OK or KV_ENOMEM. */
int kv_builder_add_range(struct kv_builder *b, const kv_rt_fragment *f);
/* Notes that the entry just added refers to blob file `number` (the
 * table's blob_lo/blob_hi). Cannot fail. */
void kv_builder_note_blob(struct kv_builder *b, uint64_t number);
void kv_builder_abandon(struct kv_builder *b);
/* 1 to drop the entry, 0 to keep it, -1 out of memory. `id` identifies the
 * key (equal bytes, equal key); `base`: nothing below could hold it. */
int kv_dropper_drop(struct kv_dropper *d, const uint8_t *id, size_t idlen, uint64_t seq, int kind,
                    int base);
void kv_dropper_free(struct kv_dropper *d);
/* The rule of issue 49 on top of kv_dropper_drop's: entries in internal-key
 * order go in, and what the output holds comes out through d->emit, in the
 * same order (doc/database.md, "Range deletes, merges, filters and TTL"):
 * entries a range tombstone visible to every snapshot covers go, operands at
 * or below the horizon are merged (full over a value, tombstone, covering
 * tombstone, expired entry or the bottom; else partial), and the newest
 * entry at or below the horizon is expired or filtered. kv_dropper_end
 * after the last entry. KV_OK, KV_ENOMEM, a merge operator's failure, or
 * what emit, below or blob returned. */
int kv_dropper_add(struct kv_dropper *d, const uint8_t *key, size_t klen, uint64_t seq, int kind,
                   const uint8_t *val, size_t vlen);
int kv_dropper_end(struct kv_dropper *d);
/* Range tombstone sequences a flush or compaction keeps (kv_rtset_union's
 * keep): every one above the horizon, and the newest at or below it unless
 * `base` (no table below the output holds a key of the fragment). */
size_t kv_dropper_keep_seqs(uint64_t horizon, int base, uint64_t *seqs, size_t nseq);
/* The write path calls it under mu before the first range delete or merge
 * of the database reaches the log: the manifest then says that the
 * database uses them (format version 2, doc/manifest.md), once. KV_OK or
 * the manifest's error. */
int kv_db_note_features(kv_db *db);
/* The tree's shape for a version (doc/database.md, "Level sizes"): the
 * level that level 0 merges into (1 under fixed sizes; with
 * dynamic_level_bytes the one that the database's size calls for, every
 * level above it empty), the bytes each level >= 1 may hold before it is
 * compacted, and the bytes each level holds. Under mu, or on a version
 * nobody changes. */
struct kv_shape {
    int base;
    double target[KV_LEVELS];
    uint64_t bytes[KV_LEVELS];
};
void kv_level_shape(const kv_db *db, const struct kv_version *v, struct kv_shape *s);

/* CLOCK_MONOTONIC in nanoseconds (write.c): the write controller's clock and
 * the idle watch's (background.c). Cannot fail. */
uint64_t kv_db_now_ns(void);
/* Under mu: does some level need a compaction? */
int kv_compaction_needed(const kv_db *db);
/* Under mu: is an idle compaction armed, that is, would the background
 * thread merge level 0 down once no write came for idle_compaction_ms
 * (kv.h)? idle_compaction_ms > 0 and level 0 holds tables. Apart from
 * kv_compaction_needed: this is work that waits for a quiet spell, not
 * work to start now; kv_stats counts both as compaction_pending. */
int kv_idle_compaction_armed(const kv_db *db);
/* The idle compaction: all of level 0 down into the base level (counted in
 * idle_compactions). KV_OK, KV_NOTFOUND when level 0 is empty, KV_EBUSY
 * when abandoned for kv_close, or an error. Flush thread only. */
int kv_compact_idle(kv_db *db);
/* A compaction a background job claimed (compact.c). */
struct kv_compaction;
/* Under mu: claims the most needed compaction that can run beside those
 * running now (doc/database.md, "Background jobs"): its inputs marked busy,
 * its output range noted in db->claims; *out NULL when none can. flushes:
 * the caller is the flush thread, which flushes a waiting memtable while
 * it merges. KV_OK or KV_ENOMEM. */
int kv_compact_claim(kv_db *db, int flushes, struct kv_compaction **out);
/* Runs a claimed compaction (without mu) and commits it, then releases the
 * claim (whatever the outcome) and frees c: KV_OK, KV_EBUSY when abandoned
 * for kv_close, or an error. */
int kv_compact_run(kv_db *db, struct kv_compaction *c);
/* Claims and runs the most needed compaction (the flush thread's): KV_OK,
 * KV_NOTFOUND when none is needed or none can start, KV_EBUSY when
 * abandoned for kv_close, or an error. */
int kv_compact_step(kv_db *db);
/* Compacts the tables overlapping [lo, hi] down to the deepest level, then
 * rewrites that level's tables in range that kept entries for snapshots. */
int kv_compact_manual(kv_db *db, const uint8_t *lo, size_t lolen, const uint8_t *hi,
                      size_t hilen);

/* stats.c */
/* A growing NUL-terminated text, for the calls that hand text out
 * (kv_metrics_text, kv_property). The caller starts it with p holding cap
 * > 0 bytes (p[0] = 0); kv_text_put appends printf-style, growing p with
 * realloc; the first failure is kept in err (KV_ENOMEM) and later puts do
 * nothing, so a caller checks err once at the end. */
struct kv_text {
    char *p;
    size_t len, cap;
    int err;
};
void kv_text_put(struct kv_text *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* ---- the filter hashes of a user key ---------------------------------------------- */

/* The hash the database's new filters take (memtables, tables being
 * written): SipHash-2-4 under the secret when the database is open keyed,
 * else XXH3-64 with its seed. */
static inline uint64_t kv_db_hash(const kv_db *db, const void *key, size_t klen)
{
    return db->keyed ? kv_siphash24(&db->sip, key, klen) : kv_hash_key(key, klen, db->seed);
}

/* The prefix filter's hash (kv_options.prefix_len) from the filter hash h
 * of a key's first prefix_len bytes (the whole key when shorter): mixed so
 * that a prefix's entry in a table's filter is not the entry of the key
 * made of those bytes alone. The builder adds it (builder.c), an iterator
 * asks it (merge.c); doc/database.md, "Filters that gate scans". */
static inline uint64_t kv_prefix_mix(uint64_t h)
{
    h ^= 0x9e3779b97f4a7c15ull;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31;
    return h;
}

/* The prefix hash of user key `key` that a new table's filter takes. */
static inline uint64_t kv_prefix_hash(const kv_db *db, const void *key, size_t klen)
{
    size_t n = klen < db->o.prefix_len ? klen : db->o.prefix_len;
    return kv_prefix_mix(kv_db_hash(db, key, n));
}

/* The two hashes a read of one user key may need, each computed on first
 * use: h[0] the seeded XXH3, h[1] the keyed SipHash. A database that
 * switched between keyed and unkeyed holds tables of both kinds
 * (kv_table.filter_keyed says which one a table's filter takes); a read
 * that meets only one kind computes only that hash. */
struct kv_key_hashes {
    const void *key;
    size_t klen;
    uint64_t h[2];
    unsigned have; /* bit i: h[i] is computed */
};

static inline uint64_t kv_key_hash(const kv_db *db, struct kv_key_hashes *kh, int keyed)
{
    keyed = keyed != 0;
    if (!(kh->have & (1u << keyed))) {
        kh->h[keyed] = keyed ? kv_siphash24(&db->sip, kh->key, kh->klen)
                             : kv_hash_key(kh->key, kh->klen, db->seed);
        kh->have |= 1u << keyed;
    }
    return kh->h[keyed];
}

/* kv_key_hash for table t's filter: its own seed's hash for a table
 * hashed under another seed (KV_TABLE_FILTER_OWN_SEED, an ingested table),
 * computed each time; else the cached one. */
static inline uint64_t kv_table_key_hash(const kv_db *db, struct kv_key_hashes *kh,
                                         const struct kv_table *t)
{
#if defined(__GNUC__)
    if (__builtin_expect(t->filter_keyed == KV_TABLE_FILTER_OWN_SEED, 0))
#else
    if (t->filter_keyed == KV_TABLE_FILTER_OWN_SEED)
#endif
        return kv_hash_key(kh->key, kh->klen, t->filter_seed);
    return kv_key_hash(db, kh, t->filter_keyed);
}

/* Reads the filter secret at open (recover.c): loads it when the manifest
 * has one, and makes one (getrandom, 16 bytes) when it has none and the
 * database is opened keyed. KV_ECORRUPT when the record is damaged. */
int kv_db_secret_load(kv_db *db);

#endif /* KV_DB_H */
