/* bench.h - what the files of kvbench share: its options, a run's state
 * and results, the benchmark table, and the functions one file calls in
 * another. Private to tools/kvbench/, whose files are
 *   main.c       the command line (the flags against each other), setup and teardown, main
 *   flags.c      the table of flags: each one's parsing, range and --help text
 *   run.c        one benchmark: keys, workers and their ops, the monitor
 *   benches.c    the databases, compact/stats/nofilter, the --benchmarks list
 *   report.c     a result as text or JSON
 *   sweep.c      --sweep and its CSV and SVG chart
 *   scaling.c    --scaling and --scaling_chart: cost against database size
 *   timeline.c   --timeline and --timeline_chart: a fill's figures over time
 *   chart.c      the SVG pieces the charts share (chart.h)
 *   common.c     the clock and small formatting helpers
 *   engine_kv.c  kv behind the engine interface (kvbench.h)
 *   engine_lmdb.c  LMDB behind it (always built: kv depends on LMDB)
 *   peers.c      LevelDB and RocksDB behind it (-DKV_BENCH_PEERS=ON only)
 *   memlimit.c   --memory_limit: a memory cgroup, or direct reads and a block cache */
#ifndef KVBENCH_BENCH_H
#define KVBENCH_BENCH_H

#include <kv/kv.h>

#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "kvbench.h"

#define MAX_KEY_SIZE 1024
#define MAX_THREADS 256
#define MAX_SWEEP 64
#define MAX_SCALING 32              /* database sizes of one --scaling */
#define MAX_ENGINES 4               /* kv, lmdb, leveldb, rocksdb */
#define COPY_BATCH 1000             /* entries per batch of nofilter's copy, */
#define COPY_BATCH_BYTES (8u << 20) /* ... or bytes, whichever comes first */
#define DEFAULT_BENCHMARKS "fillrandom,compact,readrandom,readmissing,nofilter"

/* ---- options ------------------------------------------------------------------- */

struct options {
    const char *db;      /* --db; NULL: a temporary directory */
    uint64_t num, reads; /* reads 0: as many as num */
    size_t key_size, value_size;
    const char *benchmarks; /* NULL: DEFAULT_BENCHMARKS */
    double bloom_bits;
    int filter_layout;
    size_t cache_size, write_buffer_size, block_size;
    int compression;
    int sync, use_existing_db, histogram, json, drop_cache;
    int read_only;              /* kv: open --db as a read-only handle (kv_options.read_only) */
    int memtable_filter;        /* kv: a filter beside each memtable (default 1) */
    int filter_policy;          /* kv: KV_FILTER_UNIFORM (default) or KV_FILTER_MONKEY */
    int use_direct_reads;       /* kv: table data blocks read with O_DIRECT (default 0) */
    size_t table_memory_budget; /* kv: indexes and filters kept (0: all, the default) */
    int filter_keyed_hash;      /* kv: filters hash keys with SipHash under a secret (default 0) */
    size_t compression_dict_bytes; /* kv: zstd dictionary per table (kv's default) */
    int compression_min_level;     /* kv: levels below it uncompressed (kv's default) */
    int compression_level;         /* kv: zstd level (kv's default) */
    size_t compressed_block_size;  /* kv: block size of compressed tables (kv's default) */
    size_t delayed_write_rate;     /* kv: the write controller's starting rate (kv's default) */
    int background_nice;           /* kv: background threads' nice increment (kv's default) */
    int idle_compaction_ms;        /* kv: ms without a write before level 0 merges down (kv's
                               * default) */
    size_t min_blob_size;          /* kv: values of this many bytes or more go to blob files
                               * (kv's default; KV_BLOB_NEVER: none); RocksDB: its blob
                               * files, when min_blob_size_set */
    int min_blob_size_set;         /* --min_blob_size was given */
    int idle_compaction_ms_set;    /* --idle_compaction_ms was given */
    int dynamic_level_bytes;       /* kv: level sizes follow the database's size (kv's default);
                               * RocksDB: its level_compaction_dynamic_level_bytes, when
                               * dynamic_level_bytes_set */
    int dynamic_level_bytes_set;   /* --level_compaction_dynamic_level_bytes was given */
    size_t blob_file_size;         /* kv: bytes per blob file (kv's default) */
    double blob_gc_threshold;      /* kv: garbage share that relocates a blob file (kv's default) */
    unsigned threads;
    uint64_t seed;
    double stats_interval; /* seconds; 0: off */
    const char *report_dir;
    double sweep[MAX_SWEEP]; /* bits/key, ascending */
    unsigned nsweep;
    const char *engine;
    size_t batch_size;   /* keys per multi-get (multireadrandom, multireadmissing) */
    uint64_t range_size; /* keys per range of deleterange */
    uint64_t deletes;    /* ranges of deleterange; 0: num / (5 * range_size), at least 1 */
    int reads_set;       /* --reads was given */
    /* --scaling: the database sizes, ascending; the engines (--engines)
     * in the order given; rounds of each (--rounds) */
    uint64_t scaling[MAX_SCALING];
    unsigned nscaling;
    const char *engines[MAX_ENGINES];
    unsigned nengines;
    unsigned rounds;
    const char *scaling_chart;  /* --scaling_chart=CSV: chart it, run nothing */
    int timeline;               /* --timeline: a fill per engine (--engines), its
                               * stats.csv rows into REPORT_DIR/timeline.csv */
    const char *timeline_chart; /* --timeline_chart=CSV: chart it, run nothing */
    /* --checkpoint_at=F (0 < F < 1; 0: off) and --checkpoint_dir=D: once a
     * fraction F of the first worker benchmark's ops is done, a side thread
     * takes one checkpoint into D (kv_checkpoint) while the ops go on. */
    double checkpoint_at;
    const char *checkpoint_dir;
    /* Range queries: seekempty and seekshort ranges span range_width key
     * indexes; the fills write key indexes i * key_stride (1: every one);
     * the filters that gate them (bench_config.prefix_len and
     * range_filter_bits); sweep_range: --sweep=range_filter_bits=... (the
     * settings in sweep[]) instead of bloom_bits. */
    uint64_t range_width, key_stride;
    size_t prefix_len;
    double range_filter_bits;
    int sweep_range;
    /* Issue 54. kv: kv_options.compaction_style, runs_per_level and
     * max_background_jobs (kv's defaults); RocksDB: lazy_leveled is its
     * universal compaction, and the jobs (with as many subcompactions)
     * are set only when given (the *_set flags). memory_limit: bytes the
     * engine may use (memlimit.c), 0: no limit. cache_size_set and
     * use_direct_reads_set: given, so --memory_limit's fallback leaves
     * them as they are. */
    int compaction_style, runs_per_level, max_background_jobs;
    int compaction_style_set, runs_per_level_set, max_background_jobs_set;
    uint64_t memory_limit;
    int cache_size_set, use_direct_reads_set;
};

/* --memory_limit's mechanisms (memlimit.c), in the order they are tried. */
enum memlimit_mech {
    MEM_NONE,      /* no --memory_limit */
    MEM_CGROUP_V2, /* a child cgroup with memory.max */
    MEM_CGROUP_V1, /* a child memory cgroup with memory.limit_in_bytes */
    MEM_DIRECT     /* no writable cgroup: direct reads and a block cache of the limit
                    * (kv, RocksDB); LevelDB and LMDB are not limited */
};

struct memlimit {
    int mech;        /* enum memlimit_mech */
    char group[512]; /* the child cgroup's directory (cgroup mechanisms) */
    char home[512];  /* the directory of the group the process came from */
};

/* The columns of stats.csv, one row per --stats_interval of a benchmark;
 * timeline.csv has an engine column first. The first eleven are per
 * interval; p99_us and p999_us are of the ops completed in the interval
 * (empty when none did); then the engine's write path (bench_sample):
 * counts and times in the interval, l0_files and pending_compaction_bytes
 * at its end, compaction_bytes written in it, and compacting 1 when a flush
 * or compaction was seen running (or wrote bytes) in it. A figure the
 * engine does not report is an empty cell. */
#define STATS_CSV_HEADER                                                                           \
    "benchmark,time_s,interval_s,ops,ops_per_sec,gets,tables_probed_per_get,"                      \
    "false_positives_per_get,data_block_reads_per_get,compactions,stalls,p99_us,p999_us,"          \
    "write_delays,write_delay_us,write_stops,write_stop_us,l0_files,"                              \
    "pending_compaction_bytes,compaction_bytes,compacting"

/* ---- the run's state --------------------------------------------------------------- */

enum kind { K_WRITE, K_READ, K_SCAN, K_OTHER };

struct worker;
struct bench_def {
    const char *name;
    enum kind kind;
    /* One op: 0 done, 1 no more data (readseq's end), < 0 engine error. */
    int (*op)(struct worker *w, uint64_t i);
    int fresh; /* starts from an empty database */
    int iter;  /* each thread needs an iterator */
    const char *help;
    int batched; /* one op is --batch_size keys (multi-gets): it is timed
                      * as a whole and counted as that many ops */
    int writer;  /* beside the --threads readers, one thread writes random
                      * keys of [0, num) until the readers are done
                      * (readwhilewriting) */
};

/* One database: its directory, handle and the settings it was opened with. */
struct target {
    char *path;
    void *h;
    struct bench_config cfg;
};

/* One benchmark's figures. Per-get figures are 0 when there were no gets. */
struct result {
    const char *name;
    uint64_t ops, found, gets;
    uint64_t scanned; /* readseq, readreverse: key and value bytes the scan returned */
    double seconds;
    double probed, negatives, false_pos, block_reads, bytes_read;
    double mem_negatives;              /* per get: memtables whose filter said "absent" (kv) */
    double cache_hits;                 /* per get: blocks found in the block cache */
    double device_reads, device_bytes; /* per get: data-block reads that went to the device */
    double cache_hit_ratio, measured_fpr, expected_fpr;
    size_t fpr_tables;   /* tables with absent-key probes */
    uint64_t fpr_probes; /* probes the FPR is measured over */
    int has_hist;
    double p50, p95, p99, p999, p9999, pmax;
    /* A benchmark with a writer beside its readers (readwhilewriting):
     * the writes it did while they ran, and their rate over `seconds`. */
    uint64_t writes;
    double writes_per_sec;
    double bloom_bits;
    int layout;
    /* the target's settings the run had (the sweep changes them) */
    int policy, direct;
    size_t cache_size;
    struct bench_counters after, delta;
    uint64_t open_files, rss_bytes; /* the process's, for stats */
    uint64_t rss_file_bytes; /* of rss_bytes, pages of mapped files (tables the engine maps) */
    /* Storage: the bytes the process wrote while the benchmark ran
     * (proc_write_bytes, before and after), the keys and values it asked
     * the engine to write (0 for a benchmark that writes none: no
     * write_amp), and the size of the database's files at its end. */
    uint64_t bytes_written, user_bytes, db_bytes;
    int written_by_rusage; /* bytes_written is ru_oublock's: /proc/self/io was unreadable */
    double blob_reads;     /* per get: values read from blob files (kv) */
    /* seekempty, seekshort: per seek (range query), from counter deltas
     * (kv: kv_stats; RocksDB: its tickers), and the range filter's FPR
     * measured (false positives / (skips + false positives)) and expected
     * (the tables' range_expected_fpr weighted by their empty queries) */
    uint64_t seeks, range_absent;
    uint64_t entries; /* entries the ranges held (found: the seeks with one or more) */
    double checked, prefix_skips, prefix_fp, range_skips, range_fp, tables_read;
    double memtable_skips; /* kv: memtables the occupancy gate spared a search */
    double seek_block_reads, seek_device_reads, index_misses;
    double prefix_checked, prefix_useful; /* RocksDB's */
    double read_calls; /* read system calls per seek (proc_read_calls); -1: unknown */
    double range_measured_fpr, range_expected_fpr;
    double range_filter_bits;
    size_t prefix_len;
    /* Read benchmarks: device reads per get, as dev_how says they were
     * counted (NULL: not measurable), and the bytes the block device
     * delivered per get (/proc/self/io read_bytes; -1: unreadable). */
    double dev_reads, dev_bytes;
    const char *dev_how;
    int show_levels; /* a fill or waitforcompaction: its level report is shown */
};

struct ctx {
    struct options o;
    const struct bench_engine *e;
    char *tmp_root; /* made by mkdtemp, removed at exit; NULL if none */
    struct target main;
    uint8_t *pool; /* value bytes: values are slices of it */
    size_t pool_len;
    FILE *text;                 /* human output: stdout, or stderr with --json */
    FILE *stats_csv;            /* --stats_interval; --timeline: timeline.csv */
    int stats_engine_column;    /* its rows start with the engine's name (--timeline) */
    int progress;               /* stderr is a terminal */
    struct result last_missing; /* the latest readmissing with filters on */
    int have_last_missing;
    int warned_refused;   /* the O_DIRECT refusal was told (run_bench) */
    int checkpoint_taken; /* --checkpoint_at: the one checkpoint was taken (or tried) */
    /* --scaling, --timeline: of o.engines, those this build has; e is each
     * in turn */
    const struct bench_engine *scaling_engines[MAX_ENGINES];
    unsigned nscaling_engines;
    struct memlimit mem; /* --memory_limit: how it is held (memlimit.c) */
};


/* Internal results besides 0 and the engines' (negative) codes. */
#define E_INTERRUPTED 1000 /* a run stopped by SIGINT/SIGTERM */
#define E_FAIL 1001        /* failed, and the reason is printed already */
#define E_REFUSED 1002     /* --db refused (the reason is printed): exit 2 */


/* Set by SIGINT/SIGTERM (main.c); runs stop at the next op. */
extern atomic_int stop_requested;

/* The benchmarks by name (run.c), nbenches of them. */
extern const struct bench_def benches[];
extern const size_t nbenches;

/* kv itself behind the engine interface (engine_kv.c). */
extern const struct bench_engine bench_kv_engine;
/* LMDB, a B-tree without filters (engine_lmdb.c). */
extern const struct bench_engine bench_lmdb_engine;

static inline uint64_t splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* A random number in [0, n), from a splitmix64 stream. */
static inline uint64_t rng_below(uint64_t *state, uint64_t n)
{
    *state += 0x9E3779B97F4A7C15ull;
    return splitmix64(*state) % n;
}

/* common.c */
double now_sec(void);
uint64_t now_ns(void);
uint64_t hash_name(const char *s);
/* The process's open descriptors (/proc/self/fd) and resident memory
 * (/proc/self/statm); 0 where /proc is not there. */
uint64_t proc_open_files(void);
uint64_t proc_rss_bytes(void);
/* Of the resident bytes, those of mapped files and shared memory (statm's
 * "shared"): page cache the process maps, not its heap. 0 when unknown. */
uint64_t proc_rss_file_bytes(void);
/* The bytes this process (all its threads, the engine's background ones
 * too) has caused to be written to storage since it started: write_bytes
 * of /proc/self/io, counted as the kernel dirties page-cache pages of
 * files on a block device (a file system in memory, tmpfs, counts none),
 * or, where that file cannot be read, getrusage's ru_oublock in 512-byte
 * blocks, the same counter on Linux; *rusage is set then. */
uint64_t proc_write_bytes(int *rusage);
/* The read system calls this process (all its threads) has made: syscr
 * of /proc/self/io. A table block read with pread (kv with O_DIRECT,
 * RocksDB, LevelDB) is one; a read of a mapped table (kv without O_DIRECT,
 * LMDB) none. 0, or -1 where the file cannot be read. */
int proc_read_calls(uint64_t *out);
/* The bytes this process (all its threads) has had the block device read
 * for it: read_bytes of /proc/self/io, counted as reads are submitted
 * (page-cache misses and their readahead, faults of mapped files, O_DIRECT
 * reads). 0, or -1 where the file cannot be read. */
int proc_read_bytes(uint64_t *out);
/* The sizes of the regular files under dir (its subdirectories too); 0
 * when it cannot be read. A file removed while it is walked is skipped. */
uint64_t dir_bytes(const char *dir);
char *dup_printf(const char *fmt, const char *a, const char *b);
/* Opens the CSV a chart flag names (`flag` is "--scaling_chart=" or the
 * like) for reading: it must be a regular file. A FIFO would block the open
 * (and a pipe's writer may never come), a device such as /dev/zero never
 * ends, a directory cannot be read: each is refused, with a line naming
 * the flag, the path and what it is. NULL after saying why. */
FILE *open_csv_input(const char *flag, const char *path);
void human_bytes(char *buf, size_t n, double bytes);
const char *layout_name(int layout);

/* flags.c */
/* --help, from the table of flags. */
void usage(FILE *f);
/* One --name=value (val NULL: --name alone) into o; 0, or -1 after a
 * one-line message naming the flag, the value, what is wrong and what the
 * flag wants. */
int set_flag(struct options *o, const char *name, const char *val);
/* The engines --engines may name, in --scaling's default order. */
extern const char *const engine_names[MAX_ENGINES];

/* run.c */
int make_pool(struct ctx *c);
/* deleterange: how many ranges, and range i as key indexes [*begin, *end). */
uint64_t deleterange_count(const struct options *o);
void deleterange_at(const struct options *o, uint64_t i, uint64_t *begin, uint64_t *end);
const struct bench_def *find_bench(const char *name, size_t len);
void counters_delta(struct bench_counters *d, const struct bench_counters *a,
                    const struct bench_counters *b);
int engine_fail(const struct ctx *c, const char *what, const char *where, int rc);
const struct bench_def *bench_named(const char *name);
/* Whether d is a range query benchmark (seekempty, seekshort). */
int range_bench(const struct bench_def *d);
int run_bench(struct ctx *c, const struct bench_def *d, struct target *t, struct result *res);
/* Copies into res the settings of t that a result reports (bits, layout,
 * policy, direct reads, block cache). */
void result_settings(struct result *res, const struct target *t);
/* res->bytes_written since the process had written written0 bytes
 * (proc_write_bytes, read as the benchmark began), and res->db_bytes:
 * the files in t's directory now. */
void storage_figures(struct result *res, const struct target *t, uint64_t written0);

/* report.c */
void report_json(const struct ctx *c, const struct result *r, int stats);
void report(const struct ctx *c, const struct result *r, const struct bench_def *d);

/* benches.c */
/* Whether dir may hold the database a run starts afresh: 0 when it does
 * not exist, is an empty directory, or holds a database of the engine
 * (whose files, and only those, destroy_db then removes); with `keep` (it
 * is used as it is), any directory. Else -1, after one line on stderr that
 * says why, naming dir after the prefix `what` ("--db=", "nofilter: "). */
int check_db_dir(const struct ctx *c, const char *dir, const char *what, int keep);
/* Removes the engine's database in dir (e->destroy: only files the engine
 * writes), then dir itself when `rmdir_too` and it is empty. A missing dir
 * is fine. 0, or -1 after saying why. */
int destroy_db(const struct ctx *c, const char *dir, int rmdir_too);
void close_target(const struct ctx *c, struct target *t);
int reset_target(struct ctx *c, struct target *t);
int bench_compact(struct ctx *c, struct target *t, struct result *res);
int bench_wait_compaction(struct ctx *c, struct target *t, struct result *res);
/* reopen: closes t, then times opening it again. */
int bench_reopen(struct ctx *c, struct target *t, struct result *res);
/* catchup (kv): rounds of a memtable's worth of new log, then one timed
 * kv_catch_up of a read-only handle (run.c). */
int bench_catchup(struct ctx *c, struct target *t, struct result *res);
/* stats: prints t's tree and counters (and its JSON object with --json);
 * res gets them, with the process's open files and resident memory. */
int bench_stats(struct ctx *c, struct target *t, struct result *res);
int run_benchmarks(struct ctx *c);

/* memlimit.c */
/* --memory_limit: moves the process into a memory cgroup of that size (v2,
 * else v1), or, where no cgroup is writable, turns on direct reads and a
 * block cache of that size in c->o (unless given). Before setup. 0, or -1
 * after saying why (a cgroup that was made and then failed is removed). */
int memlimit_enter(struct ctx *c);
/* Moves the process back into the group it came from and removes the
 * child group; nothing when none was made. Safe to call twice. */
void memlimit_leave(struct ctx *c);
/* The header's "Memory:" line (nothing without --memory_limit). */
void memlimit_print(FILE *f, const struct ctx *c, int several);
/* The mechanism for engine e, as the JSON and CSV name it: "cgroup_v2",
 * "cgroup_v1", "direct_reads", "not_limited" (a fallback run of an engine
 * without direct reads) or "none". */
const char *memlimit_mech_name(const struct ctx *c, const struct bench_engine *e);

/* benches.c: the per-level report of a fill and of waitforcompaction */
void print_levels(const struct ctx *c, const struct result *r);

/* sweep.c */
int run_sweep(struct ctx *c);

/* scaling.c */
/* --scaling: every size, round and engine; REPORT_DIR/scaling.csv and .svg. */
int run_scaling(struct ctx *c);
/* --scaling_chart=CSV: the chart and the table of medians from a CSV that
 * --scaling wrote (or several, concatenated). 0, or -1 after saying why. */
int scaling_chart(struct ctx *c);
/* Runs work(c, out) in a child process (fork) and copies the len bytes it
 * leaves at out back into the parent's out: the same program on both ends.
 * The child's engine threads and heap end with it. 0, E_INTERRUPTED, or
 * E_FAIL after saying why (c->main's database then removed). */
int run_in_child(struct ctx *c, int (*work)(struct ctx *c, void *out), void *out, size_t len);
/* A CSV line split at commas in place: the count of fields (those past
 * max not stored). */
size_t csv_split(char *line, char **f, size_t max);
/* A field as a number: NAN when empty; -1 when not a number. */
int csv_number(const char *s, double *out);
/* The colour an engine keeps in every chart (kv, leveldb, rocksdb, lmdb;
 * other names, the i-th, take the rest in turn). */
const char *engine_color(const char *name, size_t i);

/* timeline.c */
/* --timeline: fillrandom on a fresh database per engine, each in a process
 * of its own; REPORT_DIR/timeline.csv and .svg, and a table. */
int run_timeline(struct ctx *c);
/* --timeline_chart=CSV: the chart and the table from a CSV alone. */
int timeline_chart(struct ctx *c);

#endif /* KVBENCH_BENCH_H */
