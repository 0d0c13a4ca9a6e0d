/* db.h - the inside of a kv_db, shared by db.c (opening, writing, reading,
 * flushing) and stats.c (kv_stats, kv_table_stats_get, kv_metrics_text).
 *
 * Locking: db->mu guards the fields marked [mu]. Readers take references
 * to the memtables and the current version under mu and then search them
 * without it. Counters are relaxed atomics, read without the lock.
 *
 * Internal to kv: not installed. */
#ifndef KV_DB_H
#define KV_DB_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "kv.h"
#include "manifest.h"
#include "memtable.h"
#include "wal.h"

/* A live table: its manifest record and an open reader (index and filter
 * in memory). Shared by the versions that list it. */
struct kv_table {
    _Atomic int refs;
    kv_table_meta meta; /* owns its key range */
    kv_sst_reader *reader;
    _Atomic uint64_t probes; /* gets that probed it */
};

/* An immutable list of live tables, newest first. A reader holds a
 * reference for the length of its search, so a flush that installs a new
 * version never pulls tables from under it. */
struct kv_version {
    _Atomic int refs;
    struct kv_table **tables;
    size_t n;
};

/* A memtable and the number of the log its writes went to. */
struct kv_memref {
    _Atomic int refs;
    kv_mem *mem;
    uint64_t max_seq;  /* of its entries (written by the commit leader) */
    uint64_t next_log; /* set when it becomes immutable: the log that follows it */
};

/* A thread inside kv_write or kv_flush, waiting in line. */
struct kv_writer {
    const struct kv_batch *batch; /* NULL: a kv_flush */
    int sync, done, rc;
    pthread_cond_t cv;
    struct kv_writer *next;
};

/* Counters, in kv_stats order. */
struct kv_counters {
    _Atomic uint64_t gets, puts, deletes, writes, memtable_hits;
    _Atomic uint64_t tables_probed, filter_negatives, filter_positives, false_positives;
    _Atomic uint64_t block_reads, block_read_bytes, cache_hits, cache_misses;
    _Atomic uint64_t flushes, flush_bytes, wal_bytes, wal_syncs, write_groups;
    _Atomic uint64_t stalls, stall_micros;
};

struct kv_db {
    char *path;
    kv_options o;
    int lock_fd;
    uint64_t seed; /* filter hash seed, fixed at creation */
    kv_manifest *man; /* used by kv_open and then only by the flush thread */
    kv_sst_cache *cache;

    pthread_mutex_t mu;
    pthread_cond_t work_cv; /* the flush thread waits for an immutable memtable */
    pthread_cond_t done_cv; /* a flush ended: stalled writers and kv_flush wait */
    struct kv_memref *mem, *imm;     /* [mu] */
    struct kv_version *current;      /* [mu] */
    kv_manifest_state state;         /* [mu] as last committed */
    uint64_t next_file;              /* [mu] */
    uint64_t last_seq;               /* [mu] newest sequence visible to reads */
    kv_wal *wal;                     /* [mu] swapped; written by the commit leader */
    uint64_t wal_number;             /* [mu] */
    struct kv_writer *queue, *queue_tail; /* [mu] */
    int write_error;                 /* [mu] sticky: the log failed */
    int bg_error;                    /* [mu] sticky: a flush failed */
    int closing;                     /* [mu] */
    pthread_t bg;
    int bg_running;

    uint8_t *group;  /* the commit leader's buffer for a merged batch */
    size_t group_cap;

    struct kv_counters c;
    uint64_t recovered_records, recovery_dropped, recovery_damaged; /* set by kv_open */
};

/* References (db.c). */
struct kv_version *kv_db_ref_version(kv_db *db); /* takes mu */
void kv_db_unref_version(struct kv_version *v);

#endif /* KV_DB_H */
