/* kv.h - the kv store's public API.
 *
 * A kv_db is an LSM key-value store in one directory: writes go to a
 * write-ahead log and an in-memory table (memtable); a full memtable is
 * flushed on a background thread to an immutable table file (SSTable) with
 * its own Bloom filter, and a Get skips every table whose filter rules the
 * key out without touching the disk.
 *
 *     kv_db *db;
 *     if (kv_open("/tmp/mydb", NULL, &db) != KV_OK) return 1;
 *     kv_put(db, "k", 1, "v", 1);
 *     void *v; size_t n;
 *     if (kv_get(db, "k", 1, &v, &n) == KV_OK) { use(v, n); kv_free(v); }
 *     kv_close(db);
 *
 * Keys and values are byte strings: any bytes, NUL included; a key may be
 * empty, a value may be empty. Keys compare bytewise (memcmp, then length).
 * Every function returns KV_OK or a negative KV_E... code (see status.h;
 * kv_strerror names each) unless its comment says why it cannot fail, and
 * every error it returns comes with a text (kv_error_text, status.h) that
 * names the database's directory or file and the reason -- also an error
 * met on the background thread. KV_EPERM: the system refused access to a
 * file or directory (EACCES, EPERM) or its file system is read-only
 * (EROFS); KV_EINVAL is kept for bad arguments.
 *
 * Threads: a kv_db is safe for use from any number of threads at once.
 * A kv_batch is not: one thread at a time.
 *
 * Durability (doc/wal_format.md): a write with sync set survives a crash of
 * the process or the machine once it returns KV_OK. A write without sync
 * survives a crash of the process; after a machine crash, what survives is
 * a prefix of the acknowledged writes, with no holes. If a sync of any
 * file fails (the log, a table, a blob file, the manifest, a directory),
 * or a write to the log, or a flush or compaction fails, the handle stops:
 * that write and every later write, flush and compaction return the error
 * (KV_EIO for any failed sync: never retried), kv_close returns it, and
 * reads go on working; reopening recovers every write acknowledged before
 * it. A full disk (KV_ENOSPC from a write) alone is retried: the handle
 * goes on by itself once there is room again, or at kv_resume
 * (doc/reliability.md, "fsync errors" and "Full disks").
 *
 * Flow control (doc/database.md, "Write flow control"): a write controller
 * delays writes while compaction falls behind (level 0 at
 * l0_slowdown_trigger tables or more, or the memtable filling while the
 * previous one is still being flushed), spreading the delay over many
 * writes at a rate that falls while the debt grows and rises while it
 * shrinks; it never asks one write to wait more than KV_WRITE_DELAY_MAX_MICROS.
 * Writers stop (a stall, counted in kv_stats) only at the hard limits: the
 * memtable full while the previous one is still being flushed, or level 0
 * at l0_stop_trigger tables. */
#ifndef KV_KV_H
#define KV_KV_H

#include <stddef.h>
#include <stdint.h>

#include <kv/common.h> /* kv_comparator, KV_BLOOM_*, KV_COMPRESSION_* */
#include <kv/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- opening and closing --------------------------------------------------- */

typedef struct kv_db kv_db;

/* kv_options.version: kv_options_init sets KV_OPTIONS_VERSION, and kv_open
 * refuses any other value (so a struct that was never initialised is
 * caught) but an older version's. A field is only ever appended, and each
 * append bumps the version; a caller built against older headers passes
 * its shorter struct, which kv_open reads up to the field that version
 * ended at, the later fields taking their defaults:
 *   1  max_bytes_for_level_base (the headers before memtable_filter)
 *   2  memtable_filter
 *   3  use_direct_reads
 *   4  filter_keyed_hash
 *   5  compressed_block_size
 *   6  background_nice
 *   7  blob_gc_threshold
 *   8  idle_compaction_ms
 *   9  dynamic_level_bytes
 *  10  merge_operator, compaction_filter, ttl_seconds
 *  11  read_only
 *  12  prefix_len, range_filter_bits
 *  13  compaction_style, runs_per_level, max_background_jobs,
 *      table_memory_budget (this version) */
#define KV_OPTIONS_VERSION 13u

/* kv_options.range_filter_bits: the value doc/filter_science.md ("Range
 * filters") recommends when range filters are wanted: a width-16 empty
 * range is skipped in at least 95% of tables. The option's default is 0
 * (off). */
#define KV_RANGE_FILTER_BITS_DEFAULT 12.0

/* kv_options.min_blob_size: every value stays in the tables. */
#define KV_BLOB_NEVER ((size_t)-1)

/* The longest the write controller asks one write to wait, in microseconds
 * (kv_stats.write_delay_max_micros: the longest it asked). */
#define KV_WRITE_DELAY_MAX_MICROS 1000

/* kv_options.filter_policy: how the filter memory (bloom_bits_per_key on
 * average over all keys) is shared among the levels. */
enum {
    KV_FILTER_UNIFORM = 0, /* every table gets bloom_bits_per_key */
    KV_FILTER_MONKEY = 1   /* each level the false-positive rate that minimises the
                            * expected false positives per missing-key get
                            * (doc/options.md, "filter_policy") */
};

/* kv_options.compaction_style: how levels 1 and deeper are kept
 * (doc/database.md, "Compaction styles"). */
enum {
    KV_COMPACTION_LEVELED = 0,     /* one sorted run per level: a level over its
                                    * target merges a table into the level below */
    KV_COMPACTION_LAZY_LEVELED = 1 /* Dostoevsky's lazy leveling: the levels above
                                    * the last hold up to runs_per_level sorted
                                    * runs each, merged together into the level
                                    * below only when it fills; the last level
                                    * holds one run */
};

/* kv_options.max_background_jobs: the most it may be (and the most its
 * default, the online CPUs, is taken as). */
#define KV_MAX_BACKGROUND_JOBS 64
#define KV_DEFAULT_BACKGROUND_JOBS_CAP 16

/* A merge operator (kv_merge; doc/database.md, "Merges"): how a key's
 * operands combine with its value. Read-only to kv; must outlive the kv_db. */
typedef struct kv_merge_operator {
    const char *name; /* kept with the database; reopening with another name: KV_EINVAL */
    void *state;      /* passed to the callbacks, which may run on any thread at once */
    /* existing: the key's value, or NULL, 0 when it has none (never written,
     * deleted, range-deleted, expired); operands oldest first; *result from
     * malloc(), freed by kv with free(). Returns 0; non-zero: the read or
     * compaction fails with an error code and the stored data stays as it
     * was. */
    int (*full_merge)(void *state, const void *key, size_t klen, const void *existing,
                      size_t existing_len, const void *const *operands, const size_t *operand_lens,
                      size_t n, void **result, size_t *result_len);
    /* Optional (NULL: none): operands alone, oldest first, into one operand;
     * non-zero declines (the operands stay as they are). */
    int (*partial_merge)(void *state, const void *key, size_t klen, const void *const *operands,
                         const size_t *operand_lens, size_t n, void **result, size_t *result_len);
} kv_merge_operator;

/* kv's uint64 add: operands and values are 8-byte little-endian unsigned
 * integers, summed modulo 2^64 (a missing value counts 0; a value or
 * operand of another length fails the merge: KV_ECORRUPT). Its name is
 * "kv.uint64add". Cannot fail; the operator is static. */
KV_API const kv_merge_operator *kv_merge_uint64_add(void);

/* A compaction filter's verdict on one value. */
typedef enum {
    KV_FILTER_KEEP = 0,   /* the value stays */
    KV_FILTER_REMOVE = 1, /* the key reads as deleted from then on */
    KV_FILTER_CHANGE = 2  /* *new_value replaces the value */
} kv_filter_decision;

/* A compaction filter (doc/database.md, "Compaction filters"): asked about
 * values as flushes and compactions rewrite them. Must outlive the kv_db. */
typedef struct kv_compaction_filter {
    const char *name;
    void *state;
    /* Called in flushes and compactions for the newest value of a key that
     * no live snapshot can see an older state of. REMOVE: the key reads as
     * deleted afterwards, no older version reappears. CHANGE: *new_value
     * (malloc'd, freed by kv) replaces the value. Any thread. */
    kv_filter_decision (*filter)(void *state, int level, const void *key, size_t klen,
                                 const void *value, size_t vlen, void **new_value, size_t *new_len);
} kv_compaction_filter;

/* What kv_open takes. Fill it with kv_options_init, then change what you
 * need. kv_open reads the options once; none changes while the database is
 * open. Each may differ from one open to the next, and what was written
 * under the old values stays readable, unless its comment says otherwise.
 * Why each default is what it is, with the measurements: doc/options.md. */
typedef struct kv_options {
    /* The fields' comments are aligned by hand: */
    /* clang-format off */
    unsigned version;           /* KV_OPTIONS_VERSION, set by kv_options_init */
    int create_if_missing;      /* 1 (default): kv_open creates a missing database;
                                 * 0: KV_NOTFOUND */
    int error_if_exists;        /* 1: kv_open of an existing database is KV_EINVAL;
                                 * default 0 */
    int sync;                   /* 1: fdatasync the log before a write returns; default 0
                                 * (kv_write_opts sets it per call) */
    size_t write_buffer_size;   /* bytes of memtable entries before a flush; default
                                 * 4 MiB; 64 KiB .. 4 GiB. A value bound for a blob file
                                 * counts 1/64 of its bytes, up to 16 times this in all
                                 * (doc/database.md, "Blob files") */
    size_t block_size;          /* bytes of entries per data block of a raw table;
                                 * default 2048; 64 .. 64 MiB (doc/database.md, "Block
                                 * size") */
    size_t block_cache_size;    /* bytes of decompressed data blocks kept; default 8 MiB;
                                 * 0 disables */
    double bloom_bits_per_key;  /* filter bits per key, on average over the tables;
                                 * default 10; 0: no filters; 0 .. 1000 */
    int filter_layout;          /* KV_BLOOM_BLOCKED (default) or KV_BLOOM_CLASSIC */
    int compression;            /* of the deeper levels' tables (compression_min_level):
                                 * KV_COMPRESSION_ZSTD (default) or KV_COMPRESSION_NONE */
    int compression_level;      /* zstd level; default -1; -131072 .. 22
                                 * (doc/options.md, "Compression") */
    int max_open_files;         /* table and blob files open at once: a budget, not a
                                 * limit on tables; default 1000; >= 16. A process needs
                                 * max_open_files + KV_EXTRA_FILES descriptors per
                                 * database (doc/database.md, "Open table files") */
    /* Compaction and flow control (doc/database.md, "Compaction", "The
     * defaults, and why", "Write flow control"): */
    int l0_compaction_trigger;  /* level-0 tables that start a compaction; default 8; >= 1 */
    int l0_slowdown_trigger;    /* level-0 tables from which the write controller delays
                                 * writes; default 24; >= l0_compaction_trigger */
    int l0_stop_trigger;        /* level-0 tables that make writes wait; default 40;
                                 * >= l0_slowdown_trigger */
    size_t target_file_size;    /* bytes of a compaction's output tables; default 32 MiB;
                                 * >= 64 KiB */
    size_t max_bytes_for_level_base; /* bytes of the base level (dynamic_level_bytes);
                                      * default 32 MiB; >= target_file_size */
    /* Version 2: */
    int memtable_filter;        /* 1 (default): a whole-key filter beside each memtable,
                                 * asked before its skiplist; 0: none. 0 or 1
                                 * (doc/database.md, "The memtable filter") */
    /* Version 3: */
    int filter_policy;          /* KV_FILTER_UNIFORM (default) or KV_FILTER_MONKEY */
    int use_direct_reads;       /* 1: table data read with O_DIRECT, past the page cache;
                                 * default 0; 0 or 1 (doc/database.md, "Direct reads") */
    /* Version 4: */
    const kv_comparator *comparator; /* key order; default NULL: bytewise. Fixed when the
                                      * database is made (another is KV_EINVAL); must
                                      * outlive the kv_db. A NULL name or compare, or a
                                      * name not 1 .. 255 bytes: KV_EINVAL (doc/database.md,
                                      * "Key order") */
    int filter_keyed_hash;      /* 1: filters hash keys with SipHash-2-4 under a secret
                                 * kept in the manifest; default 0: seeded XXH3. 0 or 1
                                 * (doc/options.md, "filter_keyed_hash") */
    /* Version 5: */
    size_t compression_dict_bytes; /* most bytes of a zstd dictionary per table; default 0:
                                    * none; at most 1 MiB (doc/options.md, "Compression") */
    int compression_min_level;  /* tables written to a level below it (the base level
                                 * counting as 1) are stored raw, unless that level is the
                                 * deepest holding data; default 2; 0: every level
                                 * compressed; 0 .. 7 (doc/database.md, "Compression") */
    size_t compressed_block_size; /* block_size of tables written compressed; default
                                   * 2048; 0: block_size; else 64 .. 64 MiB */
    /* Version 6: */
    size_t delayed_write_rate;  /* bytes/s the write controller starts at when it delays
                                 * writes; default 16 MiB; 1 KiB .. 1 TiB (doc/database.md,
                                 * "Write flow control") */
    int background_nice;        /* nice increment of the background threads; default -1:
                                 * 19 on a machine of at most 4 CPUs, else 0; -1 .. 19;
                                 * Linux only (doc/database.md, "Background priority") */
    /* Version 7: large values apart from the keys (doc/database.md, "Blob files"). */
    size_t min_blob_size;       /* bytes from which a value goes to a blob file, its table
                                 * keeping a reference; default 512; 0: every value;
                                 * KV_BLOB_NEVER: none. Blob files stay readable whatever
                                 * these three options say */
    size_t blob_file_size;      /* bytes a compaction writes to one blob file before it
                                 * starts another; default 256 MiB; >= 64 KiB */
    double blob_gc_threshold;   /* share of a blob file's bytes that are garbage from which
                                 * its live values are moved to a new file; default 0.25;
                                 * 0 < t <= 1 (1: only whole-garbage files go, no move) */
    /* Version 8: */
    int idle_compaction_ms;     /* milliseconds without a write after which an idle
                                 * background thread merges level 0 into the base level,
                                 * then under lazy leveling each level's runs into one;
                                 * default 1000; 0: never; 0 .. 86400000 (doc/database.md,
                                 * "Idle compaction") */
    /* Version 9: */
    int dynamic_level_bytes;    /* 1 (default): level sizes follow the database's size;
                                 * 0: level 1 holds max_bytes_for_level_base, each deeper
                                 * level ten times more. 0 or 1 (doc/database.md, "Level
                                 * sizes") */
    /* Version 10 (doc/database.md, "Range deletes, merges, filters and TTL"): */
    const kv_merge_operator *merge_operator; /* default NULL: kv_merge is KV_EINVAL.
                                 * Its name is kept with the database: another
                                 * name later is KV_EINVAL */
    const kv_compaction_filter *compaction_filter; /* default NULL: none */
    uint64_t ttl_seconds;       /* default 0: values never expire; else a put or merge
                                 * written more than this many seconds ago (wall clock
                                 * at read time) is never read, and compaction drops
                                 * it. Entries written while it was 0 never expire;
                                 * at most 2^40 */
    /* Version 11 (doc/operations.md, "Read-only handles"): */
    int read_only;              /* 1: open beside the database's one writer (another
                                 * process, or a kv_db of this one) and any number of
                                 * other read-only handles. It never writes a byte into
                                 * the directory and never takes the writer's LOCK; it
                                 * sees the database as of its open (writes in the
                                 * writer's log that had reached the operating system
                                 * included) until kv_catch_up. Writes through it:
                                 * KV_EINVAL. A read never fails because the writer
                                 * compacted or deleted a file meanwhile. create_if_missing
                                 * is ignored (a missing database is KV_NOTFOUND).
                                 * Default 0; 0 or 1 */
    /* Version 12 (doc/database.md, "Filters that gate scans"): */
    size_t prefix_len;          /* 0 (default): off. Else each new table's filter also
                                 * holds every key's first prefix_len bytes (a shorter
                                 * key: the whole key), and an iterator positioned by
                                 * kv_iter_seek_prefix with at least that many bytes, or
                                 * whose bounds share their first prefix_len bytes,
                                 * skips a table whose filter says the prefix is absent
                                 * (no index search, no block read). Needs filters
                                 * (bloom_bits_per_key > 0); with a comparator:
                                 * KV_EINVAL. 0 .. 65536 */
    double range_filter_bits;   /* 0 (default): off. Else each new table also carries a
                                 * range filter of about this many bits per key
                                 * (<kv/range_filter.h>), and an iterator with both
                                 * bounds set skips a table whose range filter says
                                 * [lower, upper) holds none of its keys. With a
                                 * comparator: KV_EINVAL (the filter maps keys in
                                 * bytewise order). 0, or 4 .. 64
                                 * (KV_RANGE_FILTER_BITS_DEFAULT: the recommended value) */
    /* Version 13 (doc/database.md, "Compaction styles", "Background jobs",
     * "Table memory budget"): */
    int compaction_style;       /* KV_COMPACTION_LEVELED (default) or
                                 * KV_COMPACTION_LAZY_LEVELED. A database written
                                 * under either opens under the other: levels that
                                 * hold more runs than the style allows are merged
                                 * down by compactions */
    int runs_per_level;         /* lazy leveling: sorted runs a level above the last
                                 * holds before they are merged into the level below
                                 * (Dostoevsky's K); default 4; 2 .. 32. Ignored when
                                 * leveled */
    int max_background_jobs;    /* flushes and compactions that may run at once, on
                                 * threads of their own (a flush never waits behind a
                                 * compaction; compactions of disjoint levels or key
                                 * ranges run side by side; a large one is split into
                                 * as many parts as jobs are free); default: the
                                 * online CPUs, at most 16; 1 .. 64 */
    size_t table_memory_budget; /* bytes of table indexes and filters kept in memory;
                                 * default 0: every table's are. Past it the least
                                 * used tables' indexes, then the deepest level's
                                 * filters, are read through the block cache when
                                 * needed instead of kept (doc/database.md, "Table
                                 * memory budget") */
    /* clang-format on */
} kv_options;

/* Fills *opts with the defaults above. Cannot fail (NULL is a no-op). What
 * each option does beyond its line above, and why its default is what it
 * is: doc/options.md, which links the sections of doc/database.md that
 * explain the rest. */
KV_API void kv_options_init(kv_options *opts);

/* Descriptors a database holds beyond the max_open_files table and blob
 * files (doc/database.md, "Open table files"), with max_background_jobs
 * at most 2; each job past 2 adds 2 more (the table and the blob file a
 * compaction part writes). */
#define KV_EXTRA_FILES 13

/* Opens the database in directory `path` (opts NULL: defaults). A missing
 * directory is created when create_if_missing is set, else KV_NOTFOUND; an
 * existing database with error_if_exists set is KV_EINVAL. Recovery replays
 * the write-ahead log up to its first damaged record (the loss is reported
 * in kv_stats) and removes files the manifest does not name.
 *
 * KV_EBUSY: the database is open already, in this process or another.
 * KV_EINVAL: NULL path or out, bad options, a path that is not a
 * directory. KV_ECORRUPT: the manifest or a live table is damaged or
 * missing; or a name the store opens holds no regular file: a FIFO,
 * device, directory or socket in place of a table, a live log, MANIFEST,
 * MANIFEST-lock or LOCK (refused at once, never waited on), or a symbolic
 * link as MANIFEST, MANIFEST-lock or LOCK (never followed: kv creates no
 * file outside the directory; tables and logs may be links); doc/database.md,
 * "What stands at these names". KV_EPERM: a file or directory may not be
 * read or written (a read-only directory, a LOCK that cannot be created;
 * a directory whose mode has no write bit at all, such as 0555, is refused
 * to a writer even where root could write it: open it read_only).
 * KV_EIO, KV_ENOSPC, KV_ENOMEM. Every error sets kv_error_text to the file
 * at fault and why ("/data/db/MANIFEST: not a regular file (a FIFO)").
 * On error *out is NULL and nothing is left locked. */
KV_API int kv_open(const char *path, const kv_options *opts, kv_db **out);

/* Waits for a flush in progress, stops the background thread and frees the
 * handle. The memtable is not flushed (its writes are in the log and are
 * replayed by the next open). Returns the first background error the
 * database hit, if any (with its text); the handle is freed either way.
 * NULL: KV_OK.
 *
 * KV_EBUSY while an iterator or a snapshot of the database is still live
 * (not yet kv_iter_free'd or kv_snapshot_release'd): they point into the
 * handle. Then nothing is closed or stopped and the handle stays fully
 * usable; free them, and kv_close again. Call it when no other thread is
 * using the handle. */
KV_API int kv_close(kv_db *db);

/* After a full disk (doc/reliability.md, "Full disks"): retries at once
 * what failed for want of space (the flush or compaction; after a failed
 * log append, a new log and a flush of the memtable), as the handle
 * itself does in the background (100 ms after the error, then twice as
 * late each time up to every 2 s), and returns KV_OK when writes go on, or
 * the error still in force with its text: KV_ENOSPC while there is still
 * no room; KV_EIO (a failed fsync, which is never retried) or any other
 * error until kv_close. Nothing in force: KV_OK. NULL: KV_EINVAL. */
KV_API int kv_resume(kv_db *db);

/* ---- writing ------------------------------------------------------------------ */

/* Largest key and value, in bytes (inclusive). Larger ones get KV_EINVAL
 * and change nothing. Keys were limited to 64 KiB before issue 51; a
 * database that holds a longer one is marked (format version 2,
 * doc/manifest.md) so that a kv from before then refuses to open it. A
 * value whose key is over 64 KiB stays in its table, never in a blob file
 * (whose records keep keys of up to 64 KiB). */
#define KV_MAX_KEY_SIZE ((size_t)512 * 1024)
#define KV_MAX_VALUE_SIZE ((size_t)16 * 1024 * 1024)
/* Largest encoded batch (keys, values and a few bytes per entry). */
#define KV_MAX_BATCH_SIZE ((size_t)1 << 30)

/* Stores or replaces a value; kv_delete removes a key (an absent key is
 * fine: KV_OK). NULL bytes are allowed only with length 0. KV_EINVAL (NULL
 * db, sizes over the limits), KV_EIO / KV_ENOSPC (the log could not be
 * written or synced, or a flush failed: see the durability note above),
 * KV_EPERM (the next log could not be created), KV_ENOMEM. */
KV_API int kv_put(kv_db *db, const void *key, size_t klen, const void *val, size_t vlen);
KV_API int kv_delete(kv_db *db, const void *key, size_t klen);

/* Removes every key k with begin <= k < end in the database's key order
 * (its comparator). begin == end: KV_OK, nothing removed. end before begin:
 * KV_EINVAL, nothing changed. Atomic; visible to later reads, hidden from
 * snapshots taken before it. Errors otherwise as kv_put. */
KV_API int kv_delete_range(kv_db *db, const void *begin, size_t begin_len, const void *end,
                           size_t end_len);

/* Appends a merge operand to key (doc/database.md, "Merges"): reads then
 * see the operator's full_merge of the key's value and its operands.
 * Needs kv_options.merge_operator, else KV_EINVAL. Errors otherwise as
 * kv_put. */
KV_API int kv_merge(kv_db *db, const void *key, size_t klen, const void *operand, size_t olen);

/* A write batch: puts and deletes applied all together or not at all, also
 * across a crash. Entries apply in the order they were added (a later put
 * of the same key wins). A batch is not thread-safe; it may be reused after
 * kv_batch_clear, and is unchanged by kv_write. */
typedef struct kv_batch kv_batch;

/* Creates an empty batch. KV_EINVAL (NULL out), KV_ENOMEM. */
KV_API int kv_batch_new(kv_batch **out);

/* Adds a put or a delete. KV_EINVAL: NULL batch, NULL bytes with a nonzero
 * length, a key or value over the limits, or the batch would exceed
 * KV_MAX_BATCH_SIZE; KV_ENOMEM. On error the batch is unchanged. */
KV_API int kv_batch_put(kv_batch *b, const void *key, size_t klen, const void *val, size_t vlen);
KV_API int kv_batch_delete(kv_batch *b, const void *key, size_t klen);
/* A range delete (as kv_delete_range: KV_EINVAL when end is before begin
 * in bytewise order; kv_write checks again under the database's
 * comparator) and a merge operand (kv_write of a batch holding one needs
 * a merge operator, else KV_EINVAL). */
KV_API int kv_batch_delete_range(kv_batch *b, const void *begin, size_t begin_len, const void *end,
                                 size_t end_len);
KV_API int kv_batch_merge(kv_batch *b, const void *key, size_t klen, const void *operand,
                          size_t olen);

/* Removes every entry. Cannot fail; NULL is a no-op. */
KV_API void kv_batch_clear(kv_batch *b);

/* Entries in the batch. Cannot fail; NULL counts 0. */
KV_API uint32_t kv_batch_count(const kv_batch *b);

/* Reads a batch back: calls put(ctx, key, klen, val, vlen) for each put and
 * del(ctx, key, klen) for each delete, in the order they were added. The
 * pointers point into the batch: valid until it is next changed or freed,
 * which a callback must not do. A callback's nonzero return stops the walk,
 * and kv_batch_foreach returns that value; else KV_OK. KV_EINVAL: NULL
 * batch, put or del (then nothing is called). Range deletes and merge
 * operands are passed over: neither callback sees them. */
KV_API int kv_batch_foreach(const kv_batch *b, void *ctx,
                            int (*put)(void *ctx, const void *key, size_t klen,
                                       const void *val, size_t vlen),
                            int (*del)(void *ctx, const void *key, size_t klen));

/* Frees the batch. NULL is a no-op. */
KV_API void kv_batch_free(kv_batch *b);

/* Per-call write options. */
typedef struct kv_write_options {
    int sync; /* 1: fdatasync the log before returning; 0: don't */
} kv_write_options;

/* Applies a batch atomically with the database's `sync` option; an empty
 * batch is KV_OK and writes nothing. Errors as kv_put; KV_EINVAL for NULL
 * db or batch. Writers running at once are committed together (one log
 * append, one sync) in the order they arrived. */
KV_API int kv_write(kv_db *db, const kv_batch *batch);

/* kv_write with its own options (NULL: the database's). */
KV_API int kv_write_opts(kv_db *db, const kv_write_options *wo, const kv_batch *batch);

/* ---- reading ------------------------------------------------------------------ */

/* The newest value of `key`: *val (a new buffer, freed with kv_free; never
 * NULL on KV_OK, even for an empty value) and *vlen. KV_NOTFOUND when the
 * key is absent or deleted. KV_ECORRUPT when a table the read touches is
 * damaged (other keys stay readable), KV_EIO, KV_ENOMEM, KV_EINVAL. */
KV_API int kv_get(kv_db *db, const void *key, size_t klen, void **val, size_t *vlen);

/* ---- snapshots -------------------------------------------------------------------- */

/* A snapshot sees exactly the writes acknowledged before it was taken,
 * whatever flushes and compactions run after; compaction keeps the
 * versions it needs until it is released. */
typedef struct kv_snapshot kv_snapshot;

/* KV_EINVAL (NULL arguments), KV_ENOMEM. */
KV_API int kv_snapshot_new(kv_db *db, kv_snapshot **out);
/* Releases it (before kv_close, which refuses with KV_EBUSY while a
 * snapshot lives). NULL snap is a no-op. Cannot fail. */
KV_API void kv_snapshot_release(kv_db *db, kv_snapshot *snap);
/* kv_get as of the snapshot (NULL: now). */
KV_API int kv_get_at(kv_db *db, const kv_snapshot *snap, const void *key, size_t klen,
                     void **val, size_t *vlen);

/* kv_get_at with the value copied into the caller's buffer buf[0, cap):
 * no allocation. KV_OK: the value fits, *vlen is its length. KV_NOTFOUND:
 * absent or deleted (*vlen 0). KV_ERANGE: the value is longer than cap;
 * *vlen is the length it needs and no byte of buf was written (call again
 * with a buffer that big). snap NULL: now. KV_EINVAL (NULL db or vlen, a
 * NULL buf with a nonzero cap, a bad key), and kv_get's errors (*vlen 0).
 * Like every read, it takes no lock (doc/concurrency.md). */
KV_API int kv_get_into(kv_db *db, const kv_snapshot *snap, const void *key, size_t klen,
                       void *buf, size_t cap, size_t *vlen);

/* ---- reading many keys at once ------------------------------------------------------ */

/* Looks up n keys at one snapshot (NULL: the database as it is when the
 * call begins), in any order and with repeats: key i is keys[i], klens[i]
 * bytes long. Each key is answered as kv_get_at(db, snap, ...) would
 * answer it alone -- the memtables, then level 0 newest first, then each
 * deeper level; the first entry found decides -- and all n at the same
 * point in time:
 *   statuses[i] KV_OK: vals[i] is a new buffer (free it with kv_free;
 *               never NULL, even for an empty value), vlens[i] its length;
 *   KV_NOTFOUND: the key is absent or deleted;
 *   an error: KV_EINVAL for that key alone (NULL with klens[i] > 0, or
 *               longer than KV_MAX_KEY_SIZE), KV_ECORRUPT (a damaged table:
 *               other keys stay readable), KV_EIO, KV_ENOMEM.
 * Unless statuses[i] is KV_OK, vals[i] is NULL and vlens[i] 0. A repeated
 * key gets a value of its own at each place it appears.
 *
 * The call returns KV_OK when it ran, whatever the keys' statuses; then,
 * when some key failed, kv_error_text holds the text of the first error
 * met (invalid keys are met first), followed by the key's index
 * ("... (keys[3])"). KV_EINVAL: NULL db, or n > 0 with a NULL array
 * (n = 0 is KV_OK, with any arrays: nothing is read or written).
 * KV_ENOMEM: no memory for the call's working arrays (about 13 KiB of
 * stack hold them for up to 32 keys of up to 59 bytes; more keys, or
 * longer ones, take one allocation); then nothing was looked up, every
 * statuses[i] of a valid key is KV_ENOMEM, the others KV_EINVAL.
 *
 * The work is shared: every key is hashed once, each table is asked about
 * all its keys together (their filter lines fetched in one batch), and
 * keys that land in one data block share the index search and the read of
 * the block. kv_stats counts as n kv_get_at calls would (gets counts the
 * valid keys, and each key the tables it probed, its filter answers and
 * the block it searched: a block shared by several keys is counted for
 * each, as a cache hit when it is in the block cache, else as a read). */
KV_API int kv_multi_get(kv_db *db, const kv_snapshot *snap, size_t n, const void *const *keys,
                        const size_t *klens, void **vals, size_t *vlens, int *statuses);

/* ---- iterators ------------------------------------------------------------------- */

/* An iterator walks the keys in order (bytewise, or kv_options.comparator's),
 * forward and backward, as of a snapshot (NULL: the moment it is made),
 * hiding deleted keys and older versions. It pins the memtables and tables it reads, so flushes
 * and compactions under it change nothing it sees; free it before
 * kv_close (which refuses with KV_EBUSY while an iterator lives). One
 * thread at a time per iterator. A new iterator is not valid
 * until a seek. An error (KV_ECORRUPT, KV_EIO, KV_ENOMEM) stops it for
 * good: it is then not valid and kv_iter_status returns the error. */
typedef struct kv_iter kv_iter;

/* KV_EINVAL (NULL db or out), KV_ENOMEM. */
KV_API int kv_iter_new(kv_db *db, const kv_snapshot *snap, kv_iter **out);
/* Positioning; failures are reported by kv_iter_status. A step costs
 * constant amortised time both ways (a step back in a memtable costs a
 * search, O(log n)); changing direction repositions every source once. */
KV_API void kv_iter_seek_first(kv_iter *it);
KV_API void kv_iter_seek_last(kv_iter *it);
KV_API void kv_iter_seek(kv_iter *it, const void *key, size_t klen); /* first key >= key */
KV_API void kv_iter_next(kv_iter *it); /* no-op when not valid */
KV_API void kv_iter_prev(kv_iter *it); /* no-op when not valid */
/* 1 on a pair, else 0. Cannot fail. */
KV_API int kv_iter_valid(const kv_iter *it);
/* The current pair, valid until the iterator moves or is freed; NULL (and
 * length 0) when not valid. kv_iter_key cannot fail. A value kept in a
 * blob file (doc/database.md, "Blob files") is read the first time
 * kv_iter_value asks for it; if that read fails, the iterator stops
 * (NULL, length 0, not valid) and kv_iter_status says why. */
KV_API const void *kv_iter_key(const kv_iter *it, size_t *klen);
KV_API const void *kv_iter_value(const kv_iter *it, size_t *vlen);
/* Bounds: the iterator shows only keys k with lower <= k < upper (NULL:
 * that side unbounded; llen/ulen are then ignored). They are copied, hold
 * for every later seek and step until set again, and leave the iterator not
 * valid until the next seek. kv_iter_seek_first starts at the lower bound
 * and kv_iter_seek_last at the last key below the upper one; kv_iter_seek
 * to a key below the lower bound starts there. A scan stops at a bound
 * without reading past it: a table wholly outside the bounds is never
 * opened (RocksDB's iterate_lower_bound / iterate_upper_bound).
 * KV_EINVAL (NULL it, lower > upper), KV_ENOMEM (bounds as before). */
KV_API int kv_iter_set_bounds(kv_iter *it, const void *lower, size_t llen, const void *upper,
                              size_t ulen);
/* A prefix scan: sets the bounds to the keys that start with the plen
 * bytes at prefix (lower: the prefix; upper: the first key after all of
 * them, none when the prefix is only 0xFF bytes), then seeks to the first
 * of them; kv_iter_next then stops after the last, kv_iter_seek_last finds
 * the last. Positioning failures as for the seeks (kv_iter_status); returns
 * KV_EINVAL (NULL it, NULL prefix with plen > 0, or a database ordered by a
 * comparator, where the keys with a prefix need not be adjacent: use
 * kv_iter_set_bounds) or KV_ENOMEM from setting the bounds, else KV_OK. */
KV_API int kv_iter_seek_prefix(kv_iter *it, const void *prefix, size_t plen);
/* KV_OK or the error that stopped the iterator (its text set again, as
 * when it stopped); KV_EINVAL for NULL. */
KV_API int kv_iter_status(const kv_iter *it);
/* NULL is a no-op. */
KV_API void kv_iter_free(kv_iter *it);

/* ---- maintenance --------------------------------------------------------------- */

/* Turns the memtable into a table now and waits until the table is live
 * (a no-op when the memtable is empty). KV_EINVAL (NULL db), or the error
 * that made the flush fail. */
KV_API int kv_flush(kv_db *db);

/* Flushes the memtable, then compacts every table whose range overlaps
 * [start, end] (NULL with length 0: open at that end) down to the deepest
 * level that holds data, and waits. Errors as kv_flush. */
KV_API int kv_compact_range(kv_db *db, const void *start, size_t slen, const void *end,
                            size_t elen);

/* For each of the n ranges [starts[i], limits[i]) writes to sizes[i] the
 * approximate bytes the tables use on disk for keys in that range, from the
 * positions of the tables' index entries (held in memory: no data block is
 * read, no file is touched); the memtables count nothing, so writes not yet
 * flushed are not in it. A NULL limit with length 0 is no upper bound (a
 * NULL start with length 0 is the empty key, the smallest); the keys need
 * not exist. 0 for an empty range (limit <= start).
 *
 * How it counts: for each live table (of every level, under one reference
 * to the current version) it takes the position of each end in the table's
 * file -- 0 at or before the table's smallest key; the whole file size past
 * its largest; else the offset of the data block holding the first key >=
 * the end (kv_sst_approximate_offset), scaled by the file's size over its
 * data's (kv_sst_reader_data_end) -- and adds the difference. So a table
 * wholly inside the range counts its whole file (data blocks, index,
 * properties, filter: the full range's size is kv_stats' table_bytes); a
 * table the range cuts counts the data blocks between the ends, to within
 * a block at each end, with their share of the table's index and filter
 * (a few percent: those grow with the keys); and the sizes of adjacent
 * ranges add up to that of their union. Several versions of a key, and
 * tombstones, count as the bytes they take until a compaction drops them.
 * About 0.2 us per range over 33 tables (doc/database.md, "Sizes and
 * properties").
 *
 * KV_OK; n 0 does nothing (the arrays may then be NULL). KV_EINVAL (with
 * text, nothing written): NULL db; n > 0 with a NULL array; a NULL start or
 * limit with a nonzero length. KV_ENOMEM: no memory for a key's encoding
 * (only keys over about 120 bytes take any); sizes[] is then partly
 * written. */
KV_API int kv_approximate_sizes(kv_db *db, size_t n, const void *const *starts,
                                const size_t *slens, const void *const *limits,
                                const size_t *llens, uint64_t *sizes);

/* A named property of the database as text, in a new NUL-terminated
 * string the caller frees with kv_free. The names (LevelDB's "leveldb.*"
 * properties of the same suffixes map onto them one to one):
 *
 *   "kv.num-files-at-level<N>"  the live tables of level N, in decimal
 *       ("12"); N is 0 .. 6 in decimal without a sign, spaces or leading
 *       zeros; any other N (7, 07, -1, none) is not a property.
 *   "kv.approximate-memory-usage"  bytes, in decimal: the memtables
 *       (active and immutable, their filters included), the block cache's
 *       blocks, and the live tables' filters and decoded indexes -- kv_stats'
 *       memtable_bytes + filter_bytes + index_bytes, plus the bytes the block
 *       cache holds now (at most block_cache_size). Table files are mapped,
 *       not counted: their pages are the page cache's.
 *   "kv.stats"  a table of the levels, a header line and a row per level
 *       0 .. 6 and a "total" row, columns separated by spaces: level,
 *       tables, size MB (of their files), entries, filter KB (filter memory),
 *       bits/key (filter bits over filter keys), probes (gets that probed
 *       the level's tables), negatives (probes its filters answered "absent"),
 *       false pos (filter "maybe"s whose table lacked the key), FPR (false
 *       pos / (negatives + false pos), in percent); then lines of kv_stats'
 *       figures: "memory: <bytes> bytes (memtables .., block cache ..,
 *       filters .., indexes ..)" (the bytes of
 *       kv.approximate-memory-usage), flushes and compactions (count, MB
 *       read and written, pending, running), writes and write
 *       amplification, stalls and slowdowns, gets (memtable hits, tables
 *       probed, filter negatives and false positives, data blocks read,
 *       block cache hits). Meant for people: the columns may grow.
 *   "kv.sstables"  for each level 0 .. 6 a line "--- level <L> ---",
 *       then one line per live table of it in search order (level 0 newest
 *       first, deeper levels by key): "<number>.sst <file bytes> bytes,
 *       <entries> entries, seq <min>..<max> ["<smallest>" .. "<largest>"]",
 *       the number in at least 6 digits as the file is named, the keys
 *       escaped: printable ASCII as is, '\', '"' and every other byte as
 *       \xNN (the text is printable ASCII and newlines).
 *
 * Figures come from the current version (one reference) and the counters,
 * without the lock held while the text is made; nothing is read from disk.
 * KV_OK with *value set. KV_NOTFOUND: no such property (the text names
 * it); KV_EINVAL: NULL db, name or value; KV_ENOMEM. On error *value is
 * NULL (when value is not NULL). */
KV_API int kv_property(kv_db *db, const char *name, char **value);

/* ---- repairing and removing a database ------------------------------------- */

/* Rebuilds the manifest of the database in `path` from the tables and logs
 * there, for a database whose MANIFEST was lost or damaged (kv_open then
 * fails with KV_ECORRUPT); it works on a sound database too. Under the
 * database's LOCK:
 *
 *  - every <n>.sst is read whole (every block and its checksum, every key
 *    decoded, keys in order); one that fails is moved to <path>/lost/
 *    (created when needed), never deleted;
 *  - every <n>.blob is read whole (every record and its checksum); one
 *    whose header or footer fails goes to lost/; one with a damaged
 *    record stays, its records checked one by one as the tables name
 *    them, and loses the damaged records alone; a table entry whose value
 *    lies in a blob file that is lost or missing, in no sound record of
 *    it, or whose reference does not decode, is dropped (not its table),
 *    so its key reads as its next older version or as absent (counted in
 *    values_lost), never as a wrong value; a blob file no kept entry
 *    refers to goes to lost/ too; each kept file's garbage is counted
 *    from the kept tables (a damaged record is garbage);
 *  - the logs (<n>.log) are replayed, oldest first, each into a new
 *    table, up to the first damaged record; what follows damage (the rest
 *    of that log and the later logs: replaying them would leave a hole) is
 *    kept in lost/ too, as the log files;
 *  - when the tables could serve Gets as they are (the filters hashed with
 *    one seed, and level 0's order, by file number, is the order of their
 *    sequence numbers wherever their key ranges overlap), they all go to
 *    level 0 unchanged; else they are merged into new tables at the level
 *    their size fits, keeping the newest version of each key (no snapshot
 *    can need an older one) and no tombstone (nothing lies below them);
 *  - the new manifest (last sequence: the highest any table or replayed
 *    log holds; next file number above every number in the directory) is
 *    written and synced in <path>/repair.tmp/, then renamed over MANIFEST;
 *    an existing MANIFEST is moved to lost/ first. Logs and tables whose
 *    writes are now in the new tables are deleted after that.
 *
 * A crash or kill at any point leaves the database as it was, or repaired:
 * running kv_repair again finishes the work. opts: NULL for the defaults;
 * its table options (block size, compression, bloom_bits_per_key,
 * filter_layout, target_file_size, ...) shape the tables repair writes,
 * and its comparator must be the database's: tables read in another order
 * would all look damaged and go to lost/, so while the old MANIFEST still
 * opens and names another comparator, repair refuses with KV_EINVAL and
 * both names (with the MANIFEST gone it cannot tell). The secret of keyed
 * filters (filter_keyed_hash) lives only in the manifest: tables whose
 * filters need it are merged under new filters of the plain hash. Anything
 * in lost/ is the caller's to look at or remove (kv_destroy leaves it).
 *
 * KV_OK: the database opens with kv_open and holds every write any
 * readable table or log held. KV_EINVAL: NULL or empty path, bad options,
 * a comparator other than the one the old MANIFEST names.
 * KV_NOTFOUND: no such directory. KV_EBUSY: the database is open (in this
 * process or another). KV_EIO, KV_ENOSPC, KV_EPERM: a file could not be
 * read, written, moved or synced (nothing is lost: run it again once the
 * cause is fixed). KV_ENOMEM. KV_ECORRUPT: no file number is left above
 * those in the directory. Every error sets kv_error_text. */
KV_API int kv_repair(const char *path, const kv_options *opts);

/* What kv_repair_ex did. The counts are of this run. */
typedef struct {
    uint64_t tables_found;      /* <n>.sst files found */
    uint64_t tables_lost;       /* ... moved to lost/ (unreadable or damaged) */
    uint64_t tables_kept;       /* ... named by the new manifest as they are */
    uint64_t tables_merged;     /* ... merged into new tables (rewritten is set) */
    uint64_t tables_written;    /* new tables: from the logs, and the merge's */
    uint64_t logs_found;        /* <n>.log files found */
    uint64_t logs_replayed;     /* ... replayed to their end */
    uint64_t logs_lost;         /* ... moved to lost/ (damaged, or after damage) */
    uint64_t records_recovered; /* log records replayed into tables */
    uint64_t last_seq;          /* the new manifest's last sequence number */
    uint64_t next_file;         /* ... and next file number */
    int rewritten;              /* 1: the tables were merged into new ones */
    char *text;                 /* one line per thing done, NUL-terminated; NULL
                                 * when nothing was done; kv_repair_free */
    /* Blob files (doc/database.md, "Blob files" and "Repair"); these fields
     * were appended after the ones above, which keep their places. */
    uint64_t blobs_found;       /* <n>.blob files found */
    uint64_t blobs_lost;        /* ... moved to lost/ (unreadable or damaged) */
    uint64_t blobs_kept;        /* ... named by the new manifest */
    uint64_t blobs_unused;      /* ... moved to lost/ as no kept entry refers to them */
    uint64_t values_lost;       /* entries dropped because their value lay in a blob
                                 * file that is missing or damaged (or in no record
                                 * of it): their keys read as their next older
                                 * version, or as absent */
} kv_repair_report;

/* kv_repair, telling what it did in *report (NULL: as kv_repair). On
 * success the report is filled; on error it holds what was done before
 * the error (text may be NULL). Free it with kv_repair_free either way.
 * Errors as kv_repair. */
KV_API int kv_repair_ex(const char *path, const kv_options *opts, kv_repair_report *report);

/* Frees what a report holds (its text) and zeroes it. NULL is a no-op. */
KV_API void kv_repair_free(kv_repair_report *report);

/* Removes the database in `path`: the files kv makes there (MANIFEST and
 * MANIFEST-lock, <n>.sst, <n>.sst.tmp, <n>.log, <n>.blob, a repair's leftover
 * repair.tmp/ and LOCK) and then the directory itself when that leaves it
 * empty. Anything else stays, and so does the directory that holds it:
 * other files, and lost/, which holds what kv_repair rescued (the caller's
 * to remove). A name of kv's that is not a regular file (a directory, a
 * link) is not kv's and stays. Takes the LOCK first.
 *
 * KV_OK: done, and also when `path` does not exist (nothing to remove).
 * KV_EINVAL: NULL or empty path, or path not a directory. KV_EBUSY: the
 * database is open (in this process or another); nothing is removed.
 * KV_EPERM, KV_EIO: a file could not be removed (the rest were tried;
 * the text names the first). KV_ENOMEM. Every error sets kv_error_text. */
KV_API int kv_destroy(const char *path);

/* ---- data in and out: checkpoints, read-only handles, bulk ingest ----------------
 *
 * How to back up, restore and verify, and how these work: doc/operations.md. */

/* Makes `dir` (which must not exist; its parent must) an openable database
 * holding exactly the state as of the call: every write acknowledged before
 * the call, none begun after it; synced before it returns. Immutable files
 * (tables, blob files) are hard-linked where dir is on the same file system,
 * copied otherwise; the live logs are copied up to the call's point. Writers
 * and readers go on meanwhile. On a read-only handle: the state it sees (as of
 * its open or last kv_catch_up). KV_EINVAL: NULL arguments, dir exists
 * (nothing written), or its parent does not. KV_EIO, KV_ENOSPC (dir removed
 * again), KV_ENOMEM. */
KV_API int kv_checkpoint(kv_db *db, const char *dir);

/* Moves a read-only handle (kv_options.read_only) to the writer's current
 * state: the manifest's tables now, and the writer's logs as they reached the
 * operating system. Snapshots and iterators taken before keep their view.
 * KV_EINVAL: NULL, or not a read-only handle. KV_EIO, KV_ENOMEM,
 * KV_ECORRUPT; after an error the handle keeps its previous view. */
KV_API int kv_catch_up(kv_db *db);

/* A table written outside any database, for kv_ingest. One thread at a time. */
typedef struct kv_table_writer kv_table_writer;

/* Starts a table file at `path` (which must not exist). opts: NULL for the
 * defaults; its comparator, bloom_bits_per_key, filter_layout, block_size,
 * compression and compression_level apply (the table is written as a
 * database's deepest level would be). KV_EINVAL (NULL, bad options, path
 * exists), KV_EIO, KV_ENOSPC, KV_ENOMEM. */
KV_API int kv_table_writer_open(const char *path, const kv_options *opts, kv_table_writer **w);
/* Adds a put. Keys strictly ascending in the comparator's order, else
 * KV_EINVAL and nothing added; key 1 .. KV_MAX_KEY_SIZE bytes, value at most
 * KV_MAX_VALUE_SIZE. KV_EIO, KV_ENOSPC (the writer is then only good for
 * abandon or finish, which fail). */
KV_API int kv_table_writer_put(kv_table_writer *w, const void *key, size_t klen, const void *val,
                               size_t vlen);
/* Adds a deletion of `key` (it hides the key's older versions once
 * ingested). Order and errors as kv_table_writer_put. */
KV_API int kv_table_writer_delete(kv_table_writer *w, const void *key, size_t klen);
/* Adds a merge operand (the database that ingests it needs a merge operator).
 * Order and errors as kv_table_writer_put. */
KV_API int kv_table_writer_merge(kv_table_writer *w, const void *key, size_t klen,
                                 const void *operand, size_t olen);
/* Adds a range deletion of [begin, end) under the comparator: once ingested it
 * hides every older version of the keys in it. Range deletions may come in
 * any order beside the point entries; begin >= end is KV_EINVAL. */
KV_API int kv_table_writer_delete_range(kv_table_writer *w, const void *begin, size_t blen,
                                        const void *end, size_t elen);
/* Finishes, syncs and frees the writer, also on error (then no file is left).
 * No entry at all: KV_EINVAL, no file left. NULL: KV_EINVAL. */
KV_API int kv_table_writer_finish(kv_table_writer *w);
/* Frees an unfinished writer and removes its partial file. NULL is a no-op. */
KV_API void kv_table_writer_abandon(kv_table_writer *w);

/* Adds the finished tables at paths[0, n), all or none: their entries become
 * newer than every entry already in the database (memtable included), and
 * snapshots taken before do not see them. Each goes to the deepest level
 * where it overlaps nothing (doc/operations.md, "Bulk ingest"). move = 1: the
 * files are moved in (renamed, or linked and unlinked) and are gone from
 * paths afterwards; 0: copied (a later change to them never reaches the
 * database), the originals stay. KV_EINVAL: NULL arguments, n 0, tables overlapping each
 * other, a read-only handle, a table of merges without a merge operator, or
 * one written under another comparator; KV_ECORRUPT naming the file: not a
 * valid table. Nothing is ingested on any error. KV_EIO, KV_ENOSPC, KV_ENOMEM. */
KV_API int kv_ingest(kv_db *db, const char *const *paths, size_t n, int move);

/* ---- statistics ------------------------------------------------------------------
 *
 * Counters run from kv_open. A Get goes through the memtables (each one's
 * filter asked first, when memtable_filter is on: a "no" skips its skiplist
 * and counts in memtable_filter_negatives), then through
 * each table whose key range holds the key, newest first: each of those is
 * "probed": its filter is asked (filter_negatives: "absent", no I/O;
 * filter_positives: "maybe"), and a "maybe" reads one data block, from the
 * block cache or the disk. A positive whose block lacks the key is a false
 * positive. Tables without a filter count as probed and read, not as
 * positives. The same figures are in kv_metrics_text. */
struct kv_stats {
    uint64_t gets, puts, deletes;     /* calls; a batch counts each entry */
    uint64_t writes;                  /* kv_put/kv_delete/kv_write calls that wrote */
    uint64_t memtable_hits;           /* gets answered by a memtable */
    uint64_t memtable_filter_negatives; /* memtables whose filter said "absent" to a get (the
                                       * active and the immutable one: up to 2 per get), each
                                       * sparing a skiplist walk; 0 with memtable_filter off */
    uint64_t tables_probed;
    uint64_t filter_negatives, filter_positives, filter_false_positives;
    uint64_t data_block_reads;        /* blocks read from disk by gets */
    uint64_t data_block_read_bytes;
    uint64_t block_cache_hits, block_cache_misses; /* data blocks sought by gets */
    uint64_t flushes, flush_bytes;    /* memtables flushed; bytes of their tables */
    uint64_t wal_bytes, wal_syncs;    /* written to and synced in the log */
    uint64_t write_groups;            /* log appends (a group commits one or more writers) */
    uint64_t stalls, stall_micros;    /* writes that waited for a flush or for level 0 to
                                       * fall below l0_stop_trigger, and how long */
    uint64_t slowdowns;               /* writes the write controller delayed */
    uint64_t slowdown_micros;         /* time those delays took (stall_micros: the stalls') */
    uint64_t compactions;
    uint64_t compaction_pending;      /* 1: work waits for the background thread (a memtable
                                       * to flush, a kv_compact_range, a level over its
                                       * target), or level 0 holds tables that an idle
                                       * compaction will merge down (idle_compaction_ms >
                                       * 0), or under lazy leveling a level holds runs it
                                       * will merge: waiting for 0 here (and
                                       * compaction_running 0) waits until level 0 is empty
                                       * and each level one run too; 0 also after a
                                       * background error, which stops that work */
    uint64_t compaction_running;      /* 1: the background thread is flushing or compacting */
    uint64_t compaction_read_bytes, compaction_written_bytes;
    uint64_t user_bytes;              /* keys and values the caller wrote */
    double write_amplification;       /* (log + flush + compaction + blob bytes) / user_bytes */
    uint64_t recovered_records;       /* log records replayed at open */
    uint64_t recovery_dropped_bytes;  /* log bytes lost to a damaged tail at open */
    uint64_t recovery_tail_damaged;   /* logs whose replay stopped at damage */
    uint64_t last_sequence;           /* of the newest write */
    uint64_t memtable_bytes;          /* active + immutable memtable memory */
    uint64_t tables, l0_tables;       /* live tables (all levels, level 0) */
    uint64_t table_bytes;             /* their file sizes */
    uint64_t filter_bytes;            /* memory of their filters (kept or paged:
                                       * table_memory_bytes says what is kept) */
    uint64_t index_bytes;             /* memory of their decoded indexes (the same) */
    uint64_t filter_keys;             /* keys in their filters */
    uint64_t level_tables[7], level_bytes[7]; /* per level (0..6) */
    uint64_t table_files_open;        /* table files open now (max_open_files budgets them) */
    uint64_t table_file_reopens;      /* table files opened again, after being closed for room */
    uint64_t table_file_evictions;    /* table files closed to make room for another */
    /* use_direct_reads (kv_options): */
    uint64_t device_reads;            /* of data_block_reads, those that went to the device
                                       * (O_DIRECT; the block cache missed them) */
    uint64_t device_read_bytes;       /* bytes they asked of it: each block's aligned
                                       * 4096-byte units, so >= their share of
                                       * data_block_read_bytes */
    uint64_t direct_reads;            /* 1: table data reads bypass the page cache
                                       * (use_direct_reads, and no table refused); 0: off
                                       * or refused */
    uint64_t direct_reads_refused;    /* tables opened (at open, by flushes, by
                                       * compactions) through the page cache because the
                                       * file system refused O_DIRECT (or keeps its files
                                       * in memory: tmpfs) */
    /* The write controller (doc/database.md, "Write flow control"): */
    uint64_t write_delay_max_micros;  /* the longest single delay it asked for (slowdowns;
                                       * at most KV_WRITE_DELAY_MAX_MICROS) */
    uint64_t delayed_write_rate;      /* bytes/s it lets writers through while delaying
                                       * (0: not delaying now) */
    uint64_t pending_compaction_bytes; /* estimated bytes compaction must rewrite to bring
                                       * every level within its target (RocksDB's
                                       * estimate-pending-compaction-bytes) */
    /* Blob files (doc/database.md, "Blob files"): */
    uint64_t blob_files;              /* live blob files */
    uint64_t blob_bytes;              /* their sizes */
    uint64_t blob_garbage_bytes;      /* of blob_bytes, records no table refers to any more */
    uint64_t blob_reads;              /* values read from blob files (gets, iterators) */
    uint64_t blob_read_bytes;         /* bytes of those reads */
    uint64_t blob_written_bytes;      /* written to blob files by flushes and compactions */
    uint64_t blob_relocated_bytes;    /* of those, values compactions moved out of files
                                       * past blob_gc_threshold */
    uint64_t level_written_bytes[7];  /* table bytes written into each level: level 0 by
                                       * flushes, the others by compactions (their share
                                       * of write_amplification, level by level) */
    uint64_t idle_compactions;        /* of compactions, those that merged level 0 down
                                       * (or under lazy leveling a slice of a level's runs
                                       * in place) because no write came for
                                       * idle_compaction_ms */
    uint64_t base_level;              /* the level level 0 merges into: 1, or with
                                       * dynamic_level_bytes the shallowest the
                                       * database's size calls for */
    uint64_t level_target_bytes[7];   /* bytes each level may hold before it is
                                       * compacted (level 0: 0, it goes by its tables;
                                       * levels above base_level are empty) */
    /* Range deletes, merges, compaction filters and TTL (doc/database.md): */
    uint64_t range_deletes;            /* range deletes written (a batch counts each) */
    uint64_t merges;                   /* merge operands written (a batch counts each) */
    uint64_t range_tombstones_live;    /* range tombstone fragments in the memtables and
                                        * live tables, each as its tables hold it */
    uint64_t range_tombstone_bytes;    /* memory those fragments take */
    uint64_t merge_operands_read;      /* operands reads passed to full_merge */
    uint64_t merge_operands_compacted; /* operands flushes and compactions merged (fully,
                                        * or partially into one) */
    uint64_t expired_reads;            /* entries reads passed over as expired (ttl_seconds) */
    uint64_t expired_dropped;          /* entries flushes and compactions dropped as expired */
    uint64_t range_deleted_dropped;    /* entries they dropped under a range tombstone */
    uint64_t filter_kept;              /* compaction filter verdicts: KV_FILTER_KEEP, */
    uint64_t filter_removed;           /* _REMOVE */
    uint64_t filter_changed;           /* and _CHANGE */
    /* Data in and out (doc/operations.md): */
    uint64_t checkpoints;     /* kv_checkpoint calls that succeeded */
    uint64_t ingested_tables; /* tables kv_ingest added */
    uint64_t ingested_bytes;  /* bytes of those tables */
    uint64_t catch_ups;       /* kv_catch_up calls that succeeded */
    /* Errors that stop writes (doc/reliability.md, "fsync errors" and "Full disks"): */
    int64_t background_error;   /* the error in force, a negative KV_E code (KV_EIO: a
                                 * failed sync, kept until close; KV_ENOSPC: a full
                                 * disk, retried); 0: none */
    uint64_t background_errors; /* times the handle entered that state */
    uint64_t resumes;           /* times it left it (retried by itself, or kv_resume) */
    /* Filters that gate scans (prefix_len, range_filter_bits; doc/database.md,
     * "Filters that gate scans"). A range query is one positioning (a seek,
     * seek_first, seek_last, seek_prefix) of an iterator that has both bounds
     * set or a prefix of prefix_len bytes; each table whose key range meets
     * it is checked: */
    uint64_t range_queries;                 /* such positionings */
    uint64_t range_tables_checked;          /* tables whose key range met one (each asked
                                            * its prefix and range filters) */
    uint64_t prefix_filter_skips;           /* of those, skipped: the prefix filter said the
                                            * prefix is absent */
    uint64_t prefix_filter_false_positives; /* prefix filter said maybe, and the table held
                                            * no key in the bounds */
    uint64_t range_filter_skips;            /* skipped: the range filter said the bounds hold
                                            * none of the table's keys */
    uint64_t range_filter_false_positives;  /* range filter said maybe, and the table held
                                            * no key in the bounds */
    uint64_t range_tables_read;             /* tables whose index or data block a range query
                                            * touched (not skipped) */
    uint64_t range_filter_bytes;            /* memory of the live tables' range filters */
    uint64_t memtable_range_skips;          /* memtables a range query did not search: their
                                            * occupancy gate said the range holds none of
                                            * their keys */
    /* Compaction styles, background jobs, table memory (doc/database.md): */
    uint64_t level_runs[7];             /* sorted runs each level holds (level 0: its tables;
                                     * leveled: 1 for each level holding data) */
    uint64_t background_jobs;           /* max_background_jobs in force */
    uint64_t flushes_running;           /* flushes running now */
    uint64_t compactions_running;       /* compactions running now */
    uint64_t compactions_parallel_max;  /* the most compactions that ran at once */
    uint64_t subcompactions;            /* parts compactions were split into, beyond the first */
    uint64_t table_memory_bytes;        /* memory of the indexes and filters kept now, those
                                     * paged but still in a reader's use included */
    uint64_t tables_index_paged;        /* live tables whose index is read through the block
                                     * cache (table_memory_budget) */
    uint64_t tables_filter_paged;       /* live tables whose filter is */
    uint64_t index_block_reads;         /* paged indexes read from the file (cache misses) */
    uint64_t filter_block_reads;        /* paged filters read from the file (cache misses) */
    uint64_t compaction_max_read_bytes; /* the most table bytes one compaction read since
                                      * open: what one job holds a thread (and level 0
                                      * waits) for */
    double level_write_amp[7];          /* level_written_bytes[l] / user_bytes: each level's
                                     * share of write_amplification */
};

/* The function below holds the name kv_stats, so the struct is reached by
 * its tag (C keeps tags apart from functions) or by this typedef. */
typedef struct kv_stats kv_stats_t;

/* Fills *out. KV_EINVAL (NULL arguments). */
KV_API int kv_stats(kv_db *db, struct kv_stats *out);

/* What this handle's kv_open found in the logs it replayed: one line per
 * log whose replay stopped at damage ("000012.log: KV_ECORRUPT at byte
 * 40960 (a torn or damaged record): replay stopped after 311 records, 2048
 * bytes dropped") and per later log left unreplayed because of it; "" when
 * every log replayed to a clean end. kv_stats counts the same
 * (recovery_tail_damaged, recovery_dropped_bytes). *text is freed with
 * kv_free. KV_EINVAL, KV_ENOMEM. */
KV_API int kv_recovery_report(kv_db *db, char **text);

/* One live table. */
typedef struct kv_table_stats {
    uint64_t number;          /* file <number>.sst */
    unsigned level;
    uint64_t entries, file_size;
    int filter_layout;        /* kv_bloom_layout; -1: no filter */
    double bits_per_key;      /* filter bits / filter keys */
    unsigned k;
    uint64_t filter_keys, filter_bytes;
    uint64_t probes;          /* gets that probed it */
    uint64_t filter_negatives, filter_false_positives;
    double measured_fpr;      /* false positives / (negatives + false positives); 0 when none */
    double expected_fpr;      /* from the filter's m, k and keys */
    const uint8_t *smallest, *largest; /* its user-key range; inside *tables' block */
    /* Filters that gate scans (kv_stats' range_* figures, for this table): */
    size_t prefix_len; /* its filter holds prefixes of this length; 0: none */
    uint64_t prefix_negatives, prefix_false_positives;
    double range_bits_per_key; /* its range filter's; 0: none */
    uint64_t range_filter_bytes;
    uint64_t range_checks;          /* range queries that asked its range filter */
    uint64_t range_negatives;       /* it said "none here": the table was skipped */
    uint64_t range_false_positives; /* it said "maybe" and the table held none */
    double range_measured_fpr;      /* false positives / (negatives + false positives) */
    double range_expected_fpr;      /* the mean, over those same empty queries, of the
                                       * FPR its parameters predict for each query's
                                       * width: the widths seen */
    size_t smallest_len, largest_len;
} kv_table_stats;

/* Every live table, level 0 newest first, then each deeper level in key
 * order: *tables (one block with the key ranges inside, freed with one
 * kv_free; NULL when there are none) and *n. KV_EINVAL, KV_ENOMEM. */
KV_API int kv_table_stats_get(kv_db *db, kv_table_stats **tables, size_t *n);

/* The statistics in Prometheus text exposition format (version 0.0.4):
 * counters named kv_..._total, sizes in _bytes, ratios in _ratio, per-table
 * series labelled {table="<number>",level="<level>"}. *text is
 * NUL-terminated and freed with kv_free. KV_EINVAL, KV_ENOMEM. */
KV_API int kv_metrics_text(kv_db *db, char **text);

/* ---- explaining a Get -----------------------------------------------------------------
 *
 * kv_explain_get runs one Get the way kv_get does -- the key hashed once
 * with the database's seed, the memtable, the immutable memtable, then the
 * same tables in the same order (level 0 newest first among those whose key
 * range holds the key, then at most one table per deeper level), each gated
 * by its filter (the memtables too, with memtable_filter on) -- and records
 * every step: where it looked, what the filter
 * answered, which data block it read and from where, what it found. It is
 * a real Get: counted in kv_stats and in the tables' counters like any
 * other, and it fills the block cache the same way. `kvtool db explain`
 * prints it. */

/* kv_explain_step.where */
enum { KV_EXPLAIN_MEMTABLE = 0, KV_EXPLAIN_IMMUTABLE = 1, KV_EXPLAIN_TABLE = 2 };

/* kv_explain_step.outcome: what the step decided. */
enum {
    KV_EXPLAIN_ABSENT = 0,        /* nothing of the key here: the Get goes on */
    KV_EXPLAIN_FOUND = 1,         /* the key's newest value: the Get returns it */
    KV_EXPLAIN_DELETED = 2,       /* a tombstone: the Get returns KV_NOTFOUND */
    KV_EXPLAIN_FAILED = 3,        /* the lookup failed: kv_explain.result says how */
    KV_EXPLAIN_RANGE_DELETED = 4, /* a range tombstone (seq: its sequence) covers the key,
                                   * newer than anything found: KV_NOTFOUND, nothing
                                   * below is probed */
    KV_EXPLAIN_MERGED = 5,        /* merge operands were collected down to here and merged
                             * (merge_operands of them): the Get returns the result */
    KV_EXPLAIN_EXPIRED = 6        /* the entry found was written more than ttl_seconds ago:
                             * it reads as deleted */
};

/* kv_explain_step.filter: the filter's answer, of the table or (with
 * memtable_filter on) of the memtable. */
enum {
    KV_EXPLAIN_FILTER_NOT_ASKED = 0, /* the table has no filter, or its own range of
                                      * (key, sequence) pairs ruled the key out; the
                                      * memtable has none (memtable_filter 0) */
    KV_EXPLAIN_FILTER_NEGATIVE = 1,  /* "absent": no data block is looked at (a
                                      * memtable: its skiplist is not searched) */
    KV_EXPLAIN_FILTER_MAYBE = 2      /* "maybe": one data block is looked at (a
                                      * memtable: its skiplist is searched) */
};

/* kv_explain_step.block: where the data block came from. */
enum { KV_EXPLAIN_BLOCK_NONE = 0, KV_EXPLAIN_BLOCK_CACHE = 1, KV_EXPLAIN_BLOCK_FILE = 2 };

typedef struct kv_explain_step {
    int where;             /* KV_EXPLAIN_MEMTABLE, _IMMUTABLE or _TABLE */
    int outcome;           /* KV_EXPLAIN_ABSENT, _FOUND, _DELETED or _FAILED */
    uint64_t seq;          /* _FOUND, _DELETED: the entry's sequence number; else 0 */
    /* Table steps only (zero in memtable steps), but for filter: */
    unsigned level;
    uint64_t number;       /* the file <number>.sst */
    const uint8_t *smallest, *largest; /* its user-key range; inside the block */
    size_t smallest_len, largest_len;
    int filter;            /* KV_EXPLAIN_FILTER_*: table and memtable steps */
    int block;             /* KV_EXPLAIN_BLOCK_* */
    uint64_t block_offset; /* the data block's offset in the file */
    uint64_t block_bytes;  /* its stored size, block trailer included (the bytes
                            * read when block is _FILE); 0 without a block */
    int false_positive;    /* the filter said "maybe" and the block lacked the key */
    /* A value kept in a blob file (doc/database.md, "Blob files"): the entry
     * found holds a reference, and the value was read from blob file
     * <blob_number>.blob, blob_bytes (its record) at blob_offset. All 0 for
     * a value kept in the table. */
    uint64_t blob_number, blob_offset, blob_bytes;
    /* Merge operands this step found (the Get collects them down to a value,
     * a deletion or the bottom); on the step with outcome _MERGED, all of
     * them merged. */
    /* kv_explain_seek steps only (0 in a Get's): the range filter's answer
     * (KV_EXPLAIN_FILTER_*: _NOT_ASKED when the table has none or the
     * query has an open bound) and what its parameters predict. */
    int range_filter;
    double range_expected_fpr;
    size_t merge_operands;
} kv_explain_step;

typedef struct kv_explain {
    int result;            /* what kv_get returns: KV_OK, KV_NOTFOUND or an error */
    uint64_t hash;         /* XXH3-64 of the key with the database's seed: what
                            * every table's filter is asked */
    uint64_t snapshot;     /* the sequence number the Get read at */
    size_t live_tables;    /* tables in the database: those whose key range misses
                            * the key, and those after the step that decided,
                            * are not probed and have no step */
    const void *value;     /* result KV_OK: the value (inside the block); else NULL */
    size_t value_len;
    kv_explain_step *steps; /* in the order taken; inside the block */
    size_t nsteps;
} kv_explain;

/* Explains a Get of `key` (as kv_get). KV_OK whatever the Get found (see
 * ->result; a damaged table is a step with outcome _FAILED), with *out one
 * block freed with kv_free. KV_EINVAL (NULL db or out, NULL key with a
 * nonzero length, a key over KV_MAX_KEY_SIZE), KV_ENOMEM; on error *out is
 * NULL. */
KV_API int kv_explain_get(kv_db *db, const void *key, size_t klen, kv_explain **out);
/* Explains a range query: an iterator with bounds [lower, upper) (either
 * NULL: open) positioned at its first key, as kv_iter_seek_first does,
 * counted like one. One step per memtable and per table whose key range
 * meets the bounds, in the merge's order: `filter` is the prefix filter's
 * answer (KV_EXPLAIN_FILTER_NOT_ASKED when it does not apply), range_filter
 * the range filter's with range_expected_fpr its prediction for this width,
 * outcome KV_EXPLAIN_FOUND when the source held an entry in the bounds
 * (seq: that entry's) else KV_EXPLAIN_ABSENT, block KV_EXPLAIN_BLOCK_NONE
 * when nothing of the table was touched, false_positive when a filter said
 * maybe and the table held nothing in the bounds. ->result is KV_OK with
 * ->value the first visible key in the bounds, or KV_NOTFOUND. Errors as
 * kv_explain_get (also KV_EINVAL for lower > upper). */
KV_API int kv_explain_seek(kv_db *db, const void *lower, size_t llen, const void *upper,
                           size_t ulen, kv_explain **out);

/* ---- inspecting a database without opening it -----------------------------------------
 *
 * kv_inspect reads a database's manifest and lists its directory without
 * any recovery: nothing is replayed, written or deleted (kv_open deletes the
 * files the manifest does not name; this shows them). It takes the
 * database's LOCK when no writer holds it, or, while one does, reads under a
 * pin of the manifest as a read-only handle does (kv_options.read_only: the
 * writer then keeps every file the listed state names); it keeps either until
 * kv_inspect_free, so that the files stay as listed while the caller reads
 * them (kvtool db info, db verify). On a live database, files the writer made
 * after the pin are listed as orphans. */

/* kv_dir_file.kind */
enum {
    KV_FILE_TABLE = 0,    /* <n>.sst that the manifest names */
    KV_FILE_ORPHAN = 1,   /* <n>.sst that it does not name (left by a crash); kv_open
                           * deletes it */
    KV_FILE_TEMP = 2,     /* <n>.sst.tmp, never live; kv_open deletes it */
    KV_FILE_LOG = 3,      /* <n>.log numbered >= log_number: replayed by kv_open */
    KV_FILE_OLD_LOG = 4,  /* <n>.log below log_number (in tables); kv_open deletes it */
    KV_FILE_MANIFEST = 5, /* MANIFEST and LMDB's MANIFEST-lock */
    KV_FILE_LOCK = 6,     /* LOCK */
    KV_FILE_OTHER = 7,    /* anything else; kv leaves it alone and does not count
                           * its number. Also a numbered name kv does not give:
                           * above 2^63 - 1, 2^32 or more above next_file, or
                           * not written as "%06llu" (doc/database.md, "File
                           * numbers") */
    KV_FILE_BLOB = 8,     /* <n>.blob that the manifest names (a blob file: large
                           * values apart from the tables) */
    KV_FILE_BLOB_ORPHAN = 9 /* <n>.blob that it does not name; kv_open deletes it */
};

/* One entry of the directory. */
typedef struct kv_dir_file {
    const char *name;     /* NUL-terminated; inside the block */
    int kind;             /* KV_FILE_* */
    uint64_t number;      /* tables, temporary tables and logs: the <n> of the name */
    uint64_t size;        /* bytes */
} kv_dir_file;

/* One live table, as the manifest records it. */
typedef struct kv_dir_table {
    uint64_t number;      /* the file <number>.sst */
    unsigned level;
    uint64_t file_size;   /* recorded */
    int present;          /* 1: the file is in the directory */
    uint64_t disk_size;   /* its size there; 0 when absent */
    uint64_t entries;     /* values and tombstones */
    uint64_t min_seq, max_seq;
    int filter_layout;    /* kv_bloom_layout */
    double bits_per_key;  /* the filter's setting; 0: no filter */
    unsigned k;
    uint64_t filter_keys;
    const uint8_t *smallest, *largest; /* its user-key range; inside the block */
    size_t smallest_len, largest_len;
    uint64_t run; /* level >= 1: its sorted run's id (0 under leveled; lazy
                           * leveling's runs: doc/manifest.md, version 4) */
} kv_dir_table;

typedef struct kv_dir_info {
    uint32_t format_version; /* of the database as a whole */
    uint64_t next_file;   /* the next number for a table or log */
    uint64_t last_seq;    /* the newest sequence number held by a table */
    uint64_t log_number;  /* logs numbered >= this are live */
    uint64_t seed;        /* the hash seed of every table's filter */
    kv_dir_table *tables; /* search order: level 0 newest first, then each
                           * deeper level's runs newest (largest id) first,
                           * each by smallest key; inside the block */
    size_t ntables;
    kv_dir_file *files;   /* every name in the directory but "." and "..",
                           * sorted bytewise; inside the block */
    size_t nfiles;
    /* Keyed filters (kv_options.filter_keyed_hash): 1 when the manifest
     * holds a filter secret, and its check value (kv_bloom_secret_check),
     * which every table with a keyed filter records as its filter seed.
     * The secret itself is never given out. */
    int has_filter_secret;
    uint64_t filter_secret_check;
    /* Live blob files (doc/database.md, "Blob files"), by number; inside
     * the block. */
    struct kv_dir_blob {
        uint64_t number;      /* the file <number>.blob */
        uint64_t file_size;   /* recorded */
        int present;          /* 1: the file is in the directory */
        uint64_t disk_size;   /* its size there; 0 when absent */
        uint64_t records, record_bytes;          /* all of its values' records */
        uint64_t garbage_records, garbage_bytes; /* ... no table refers to any more */
    } *blobs;
    size_t nblobs;
} kv_dir_info;

/* Reads the database in directory `path`: KV_OK with *out, which holds the
 * database's lock, or its pin, until kv_inspect_free. KV_NOTFOUND: no
 * database there (no manifest). KV_ECORRUPT: the manifest is damaged. KV_EPERM: the directory or the
 * manifest may not be read. KV_EINVAL (NULL arguments), KV_EIO, KV_ENOMEM.
 * On error *out is NULL and nothing is left locked. */
KV_API int kv_inspect(const char *path, kv_dir_info **out);

/* Releases the lock and frees the block. NULL is a no-op. */
KV_API void kv_inspect_free(kv_dir_info *info);

#ifdef __cplusplus
}
#endif

#endif /* KV_KV_H */
