/* kvbench.h - the engine interface of kvbench: the few operations its
 * benchmarks use, so that kv (engine_kv.c), LMDB (engine_lmdb.c) and, when
 * built with -DKV_BENCH_PEERS=ON, LevelDB and RocksDB (peers.c) run the
 * same workloads with the same keys. */
#ifndef KVBENCH_H
#define KVBENCH_H

#include <stddef.h>
#include <stdint.h>

/* How a database is opened; every engine maps what it has. */
/* --compression_type=snappy: LevelDB's own default; no other engine has it. */
#define KVB_COMPRESSION_SNAPPY 100

struct bench_config {
    double bloom_bits;        /* bits per key; 0: no filter */
    int filter_layout;        /* KV_BLOOM_BLOCKED or KV_BLOOM_CLASSIC (kv only) */
    size_t cache_size;        /* block cache bytes; 0: none */
    size_t write_buffer_size; /* memtable bytes */
    size_t block_size;        /* data block bytes */
    int compression;          /* KV_COMPRESSION_NONE, KV_COMPRESSION_ZSTD or
                               * KVB_COMPRESSION_SNAPPY (LevelDB only) */
    int sync;                 /* every write synced */
    int memtable_filter;      /* a filter beside each memtable (kv only) */
    int filter_policy;        /* KV_FILTER_UNIFORM or KV_FILTER_MONKEY (kv only) */
    int use_direct_reads;     /* table data blocks read with O_DIRECT (kv only) */
    size_t table_memory_budget; /* indexes and filters kept; 0: all (kv only) */
    int filter_keyed_hash;    /* filters hash keys with SipHash under a secret (kv only) */
    size_t compression_dict_bytes; /* zstd dictionary per table (kv only) */
    int compression_min_level; /* levels below it uncompressed (kv only) */
    int compression_level;    /* zstd level (kv only) */
    size_t compressed_block_size; /* block size of compressed tables (kv only) */
    size_t delayed_write_rate; /* the write controller's starting rate, bytes/s (kv only) */
    int background_nice;      /* background threads' nice increment, -1: auto (kv only) */
    int idle_compaction_ms;   /* ms without a write before level 0 merges down, 0: never
                               * (kv only) */
    int dynamic_level_bytes;  /* kv: kv_options.dynamic_level_bytes; RocksDB: its
                               * level_compaction_dynamic_level_bytes when
                               * dynamic_level_bytes_set, else its default */
    int dynamic_level_bytes_set;
    /* Blob files: values of at least min_blob_size bytes kept apart from
     * the keys (kv: kv_options.min_blob_size, KV_BLOB_NEVER: none, and
     * blob_file_size, blob_gc_threshold; RocksDB: its integrated blob
     * files, with garbage collection, when blob_files is set, else its
     * default configuration; LevelDB, LMDB: none) */
    size_t min_blob_size;
    int blob_files;           /* --min_blob_size was given, and not never (RocksDB) */
    size_t blob_file_size;    /* kv only */
    double blob_gc_threshold; /* kv only */
    int create;               /* create the database when missing */
    int read_only;            /* a read-only handle (kv only: kv_options.read_only) */
    /* Opened with a uint64-add merge operator (8-byte little-endian
     * operands and values, summed modulo 2^64): kv's kv_merge_uint64_add(),
     * RocksDB one of kvbench's through its C API. Set when --benchmarks
     * names mergerandom, and only then, so that other runs open the
     * database as they always did. */
    int merge_uint64_add;
    /* Filters that gate scans: kv: kv_options.prefix_len and
     * range_filter_bits; RocksDB: a fixed-length prefix extractor of
     * prefix_len bytes (none at 0), no range filter; others: neither. */
    size_t prefix_len;
    double range_filter_bits;
    /* Issue 54. kv: kv_options.compaction_style, runs_per_level,
     * max_background_jobs. RocksDB: KV_COMPACTION_LAZY_LEVELED is its
     * universal compaction, else its leveled one; max_background_jobs
     * (and max_subcompactions, the same) only when max_background_jobs_set.
     * use_direct_reads above applies to RocksDB too. LevelDB, LMDB: none. */
    int compaction_style, runs_per_level, max_background_jobs, max_background_jobs_set;
};

/* Running totals since open. What an engine cannot count stays 0, with its
 * flag clear: have_filter_figures for the per-get figures (kv, RocksDB),
 * have_rocksdb for RocksDB's own filter tickers. */
struct bench_counters {
    uint64_t gets, memtable_hits, tables_probed;
    uint64_t memtable_filter_negatives; /* kv: have_memtable_filter */
    uint64_t filter_negatives, filter_positives, false_positives;
    uint64_t data_block_reads, data_block_read_bytes, cache_hits, cache_misses;
    /* stall_micros: time in stalls (kv) or in stalls and delays together
     * (RocksDB's stall.micros); slowdown_micros: kv's 1-ms delays */
    uint64_t compactions, stalls, slowdowns, stall_micros, slowdown_micros, flushes;
    uint64_t tables, table_bytes, filter_bytes, index_bytes, filter_keys;
    uint64_t memtable_bytes;  /* memory of the memtables (kv) */
    uint64_t level_tables[7];
    double write_amplification;
    int have_filter_figures, have_tables;
    /* Blob files now (kv: kv_stats; RocksDB: its total-blob-file-size and
     * live-blob-file-garbage-size properties; others 0), and values read
     * from them (kv only: have_blob_reads) */
    uint64_t blob_files, blob_bytes, blob_garbage_bytes;
    uint64_t level_written[7]; /* kv: table bytes written into each level */
    uint64_t level_bytes[7];   /* kv: table bytes each level holds */
    uint64_t level_target[7];  /* kv: bytes each level may hold (level 0: 0) */
    uint64_t base_level;       /* kv: the level level 0 merges into */
    uint64_t blob_reads, blob_read_bytes;
    int have_blob_reads;
    int have_memtable_filter; /* memtable_filter_negatives is counted (kv) */
    /* kv: of data_block_reads, those that went to the device (O_DIRECT);
     * direct_reads 1 while they bypass the page cache; direct_reads_refused:
     * tables the file system would not open with O_DIRECT */
    uint64_t device_reads, device_read_bytes, direct_reads, direct_reads_refused;
    int have_device_reads;
    /* RocksDB: rocksdb.bloom.filter.useful, .bloom.filter.full.positive,
     * .bloom.filter.full.true.positive */
    uint64_t rocksdb_useful, rocksdb_full_positive, rocksdb_full_true_positive;
    int have_rocksdb;
    /* LMDB: mdb_env_stat's B-tree, and the bytes of the file in use */
    uint64_t lmdb_depth, lmdb_branch_pages, lmdb_leaf_pages, lmdb_overflow_pages;
    uint64_t lmdb_entries, lmdb_page_size, lmdb_file_bytes;
    int have_lmdb;
    /* Range queries (seekempty, seekshort). kv (have_range_figures): its
     * kv_stats range_queries, range_tables_checked, prefix_filter_skips,
     * prefix_filter_false_positives, range_filter_skips,
     * range_filter_false_positives, range_tables_read, range_filter_bytes,
     * memtable_range_skips.
     * RocksDB (have_rocksdb): number.db.seek, bloom.filter.prefix.checked
     * and .useful, block.cache.index.miss. */
    uint64_t range_queries, range_checked, prefix_skips, prefix_fp, range_skips, range_fp;
    uint64_t range_read, range_filter_bytes;
    uint64_t memtable_range_skips; /* kv: memtables a range query did not search */
    int have_range_figures;
    uint64_t rocksdb_seeks, rocksdb_prefix_checked, rocksdb_prefix_useful, index_misses;
    /* Levels as sorted runs (have_levels). kv: kv_stats.level_runs,
     * level_bytes, level_write_amp. RocksDB: from its live files, runs
     * are level 0's files plus one for each deeper level that holds any
     * (under leveled and universal compaction alike), level_bytes their
     * sizes, level_write_amp the bytes written into the level (level 0:
     * flushes, flush.write.bytes; deeper: its LOG's compaction_finished
     * total_output_size by output_level) over its bytes.written ticker.
     * RocksDB's levels past 6 are counted in level 6. */
    uint64_t level_runs[7];
    double level_write_amp[7];
    int have_levels;
    int direct_io; /* RocksDB: opened with use_direct_reads */
    /* kv: table indexes and filters kept in memory now, and the live
     * tables whose index or filter is paged through the block cache
     * (table_memory_budget) */
    uint64_t table_memory_bytes, tables_index_paged, tables_filter_paged;
};

/* The write path at one moment, for --stats_interval rows and --timeline:
 * running totals since open (a row shows their change over its interval)
 * and levels at the moment. A figure whose bit is clear in `have` is one
 * the engine does not report: an empty CSV cell. */
enum {
    SAMPLE_DELAYS = 1 << 0,           /* write_delays */
    SAMPLE_DELAY_MICROS = 1 << 1,     /* write_delay_micros */
    SAMPLE_STOPS = 1 << 2,            /* write_stops */
    SAMPLE_STOP_MICROS = 1 << 3,      /* write_stop_micros */
    SAMPLE_L0_FILES = 1 << 4,         /* l0_files */
    SAMPLE_PENDING_BYTES = 1 << 5,    /* pending_compaction_bytes */
    SAMPLE_COMPACTION_BYTES = 1 << 6, /* compaction_bytes */
    SAMPLE_COMPACTING = 1 << 7        /* compacting */
};

struct bench_sample {
    unsigned have;                    /* SAMPLE_* bits */
    /* Writes the engine slowed down (kv: slowdowns, its delays; RocksDB:
     * the times its write controller began a delay) and stopped (kv:
     * stalls; RocksDB: the times it stopped writes), and the time they
     * took (kv only: RocksDB's stall.micros does not tell them apart). */
    uint64_t write_delays, write_delay_micros, write_stops, write_stop_micros;
    uint64_t l0_files;                /* level-0 tables now */
    uint64_t pending_compaction_bytes; /* the engine's estimate, now */
    uint64_t compaction_bytes;        /* bytes flushes and compactions have written */
    int compacting;                   /* a flush or compaction is running now */
};

/* One live table's filter counters, for the probe-weighted expected FPR. */
struct bench_table {
    uint64_t number;
    uint64_t absent_probes; /* filter negatives + false positives */
    double expected_fpr;
    int has_filter;
    /* its range filter: empty range queries it answered (negatives +
     * false positives), and the FPR expected over them */
    uint64_t range_absent;
    double range_expected_fpr;
    int has_range_filter;
};

/* One entry of a batch write. */
struct bench_kv {
    const void *key, *val;
    size_t klen, vlen;
};

/* Every call returns 0 or a negative code that errstr turns into a line of
 * text (valid until the same thread's next call); get returns 1 (found, value
 * length in *vlen) or 0 (absent). A handle may be used by several threads at
 * once; an iterator by one. */
struct bench_engine {
    const char *name;
    /* An engine without filters of any kind (LMDB): --bloom_bits does not
     * apply, nofilter is skipped and no filter figure is reported. */
    int no_filters;
    int (*open)(const struct bench_config *c, const char *dir, void **db);
    void (*close)(void *db);
    int (*put)(void *db, const void *key, size_t klen, const void *val, size_t vlen, int sync);
    int (*del)(void *db, const void *key, size_t klen, int sync);
    int (*write)(void *db, const struct bench_kv *kvs, size_t n, int sync); /* all or nothing */
    /* Optional (NULL: the engine has none, and deleterange says so):
     * removes every key k with begin <= k < end, in one call of the
     * engine's own range delete (kv_delete_range, RocksDB's DeleteRange). */
    int (*delete_range)(void *db, const void *begin, size_t blen, const void *end, size_t elen,
                        int sync);
    /* Optional (NULL: none, and mergerandom says so): appends a merge
     * operand to key, for the uint64-add operator the database was opened
     * with (bench_config.merge_uint64_add). */
    int (*merge)(void *db, const void *key, size_t klen, const void *operand, size_t olen,
                 int sync);
    int (*get)(void *db, const void *key, size_t klen, size_t *vlen);
    /* Optional: gets n keys at once, keys[i] of klens[i] bytes (any order,
     * repeats allowed); returns how many were found, or a negative code.
     * multi_get_name names the call in the output (kv_multi_get, ...).
     * NULL for an engine without one: kvbench then gets the keys one by
     * one with `get`, and says so. */
    int (*multi_get)(void *db, size_t n, const void *const *keys, const size_t *klens);
    const char *multi_get_name;
    int (*compact)(void *db); /* everything, and waits */
    /* Optional: moves a read-only handle to the writer's state (kv:
     * kv_catch_up; NULL: the engine has none). */
    int (*catch_up)(void *db);
    /* Optional: the memtable into a table now, waiting until it is live
     * (fillsettled; NULL: the engine has none, and fillsettled is
     * fillrandom). */
    int (*flush)(void *db);
    int (*counters)(void *db, struct bench_counters *out);
    /* Optional: fills *out (zeroed first, `have` saying what the engine
     * knows). Called by the monitor every few tens of milliseconds while a
     * benchmark runs: it should be cheap. NULL: nothing known (LMDB). */
    int (*sample)(void *db, struct bench_sample *out);
    /* Live tables (*out freed with free), or NULL when the engine has none. */
    int (*tables)(void *db, struct bench_table **out, size_t *n);
    /* Without `tables`: the FPR the engine's filter should reach at this many
     * bits per key (or NULL). */
    double (*expected_fpr)(double bits_per_key);
    int (*iter_new)(void *db, void **it);
    void (*iter_seek)(void *it, const void *key, size_t klen);
    void (*iter_seek_first)(void *it);
    void (*iter_seek_last)(void *it);
    void (*iter_next)(void *it);
    void (*iter_prev)(void *it);
    int (*iter_valid)(void *it);
    const void *(*iter_key)(void *it, size_t *klen);
    const void *(*iter_value)(void *it, size_t *vlen);
    int (*iter_status)(void *it);
    void (*iter_free)(void *it);
    /* Optional (NULL: none; seekempty and seekshort then stop at the upper
     * bound themselves): the iterator shows only keys in [lo, hi) from its
     * next seek on (kv_iter_set_bounds; RocksDB: iterate_lower_bound and
     * iterate_upper_bound, with its prefix extractor where both bounds
     * share a prefix). 0, or a code for errstr. */
    int (*iter_set_bounds)(void *it, const void *lo, size_t llen, const void *hi, size_t hlen);
    /* fillbulk: a table file at path (which must not exist) that the
     * engine's database, opened with c, can ingest; its puts in key order;
     * its end (synced, and the handle freed, also on error); then one
     * ingest of the finished files, which moves them in. NULL when the
     * engine has no such thing. */
    int (*bulk_open)(void *db, const struct bench_config *c, const char *path, void **w);
    int (*bulk_put)(void *w, const void *key, size_t klen, const void *val, size_t vlen);
    int (*bulk_finish)(void *w);
    int (*bulk_ingest)(void *db, const char *const *paths, size_t n);
    const char *(*errstr)(int rc);
    /* The database directory. is_db: whether `dir`, a directory that holds
     * something, holds a database of this engine, judged by files only this
     * engine writes; 0 with a short reason in why[n] when it does not.
     * destroy: removes the database in `dir` as the engine itself knows its
     * files (kv: kv_inspect's listing; LevelDB, RocksDB: their DestroyDB;
     * LMDB: data.mdb and lock.mdb),
     * never a file the engine did not write; a missing directory or one
     * without a database is fine. 0, or a code for errstr. */
    int (*is_db)(const char *dir, char *why, size_t n);
    int (*destroy)(const char *dir);
    /* Returns once no flush or compaction is pending or running (db_bench's
     * waitforcompaction); NULL for an engine that compacts nothing in the
     * background. 0, or a code for errstr. */
    int (*wait_compaction)(void *db);
    /* Optional (NULL: none, and --checkpoint_at says so): makes `dir`, which
     * must not exist, a checkpoint of the database (kv_checkpoint) while
     * other threads go on using it. 0, or a code for errstr. */
    int (*checkpoint)(void *db, const char *dir);
};

#ifdef KV_BENCH_PEERS
/* peers.c: "leveldb" or "rocksdb"; NULL for any other name. */
const struct bench_engine *bench_peer_engine(const char *name);
#endif

#endif /* KVBENCH_H */
