/* main.c - kvbench, db_bench for kv: fills and reads a database the way LevelDB's
 * and RocksDB's db_bench do, with their flags, benchmark names and result
 * lines, and shows what kv's per-table Bloom filters do for every Get:
 * tables probed, filter negatives, false positives, data blocks read, and
 * the measured false-positive rate beside the expected one.
 *
 *   kvbench                        the default run: 1,000,000 keys in a
 *                                  temporary directory; fillrandom, compact,
 *                                  readrandom, readmissing, readmissing again
 *                                  with filters off, and what filters saved
 *   kvbench --benchmarks=a,b ...   db_bench style (kvbench --help)
 *   kvbench --sweep=bloom_bits=0,2,...,20 --report_dir=DIR
 *                                  every bits/key for both filter layouts
 *                                  and both policies, page cache and
 *                                  O_DIRECT: DIR/sweep.csv, DIR/sweep.svg
 *   kvbench --scaling=1M,5M,20M [--engines=kv,leveldb,rocksdb,lmdb]
 *           [--rounds=N] --report_dir=DIR
 *                                  cost against database size: for each size,
 *                                  round and engine (interleaved), a fresh
 *                                  database, fillrandom, stats, readrandom,
 *                                  readmissing, waitforcompaction, reopen;
 *                                  DIR/scaling.csv, the chart DIR/scaling.svg
 *   kvbench --scaling_chart=CSV    that chart again, from a CSV alone
 *   kvbench --timeline --num=N [--engines=kv,rocksdb] [--stats_interval=S]
 *           --report_dir=DIR
 *                                  a fill over time: for each engine in
 *                                  turn, fillrandom on a fresh database, a
 *                                  row every S seconds (1) into
 *                                  DIR/timeline.csv, the chart
 *                                  DIR/timeline.svg and a table
 *   kvbench --timeline_chart=CSV   that chart and table again, from a CSV
 *
 * Keys: key i is the decimal number 2i zero-padded to --key_size bytes, so
 * every stored key is even and readmissing asks for odd numbers (2i+1):
 * absent by construction, yet inside the tables' key ranges, so that each
 * such Get reaches a table and asks its filter. Which keys a benchmark
 * touches and in what order follows from --seed and the benchmark's name
 * alone (two readmissing runs ask for the same keys). fillrandom writes
 * every key of [0, num) once, in an order given by a seeded permutation, so
 * that readrandom afterwards finds all it asks for.
 *
 * Measuring: a benchmark's ops are split over --threads threads, which start
 * together at a barrier; the clock runs from the barrier to the last join.
 * readwhilewriting (db_bench's) runs readrandom's --threads readers and
 * one writer more, which puts random keys of [0, num) from the barrier
 * until the last reader is done: ops/sec counts reads, writes_per_sec the
 * writes over the same seconds.
 * The per-get figures are deltas of kv_stats across the run; the expected
 * FPR weights each table's expected_fpr (kv_table_stats_get) by the absent-
 * key probes it served during the run. --histogram adds two clock reads per
 * op into a log-bucketed histogram (16 buckets per power of two, ~6%).
 * multireadrandom and multireadmissing count keys, not batches: ops/sec
 * and the per-get figures are per key, and each key of a batch of
 * --batch_size is charged the batch's time over its keys (two clock reads
 * per batch).
 *
 * The database: --db=DIR must be missing, an empty directory, or hold a
 * database of --engine (kv: a MANIFEST kv_inspect reads; LevelDB: CURRENT
 * without RocksDB's IDENTITY; RocksDB: CURRENT and IDENTITY; LMDB: data.mdb
 * and lock.mdb). A fresh run removes that database file by file as its
 * engine knows them (kv_inspect's listing, DestroyDB, LMDB's two files),
 * never another file; a directory with other things
 * and no such database is refused, unless --use_existing_db, which deletes
 * nothing. The same holds for DIR.nofilter, nofilter's second database.
 *
 * With --scaling, --db=DIR is every run's database in turn (checked as
 * above against the first engine); each run removes its database when it
 * ends, so the next engine finds the directory empty.
 *
 * Exit status: 0, 1 on a failed run (or a CSV --scaling_chart or
 * --timeline_chart cannot read), 2 on a bad command line (a --db that is
 * not a directory, or is refused as above, included; --scaling or
 * --timeline with none of its engines built),
 * 130 when interrupted; the temporary directory is removed in every case.
 *
 * This file: the command line (each flag is parsed by flags.c's table;
 * here, the flags against each other), setup and teardown, and main. The
 * rest of kvbench: bench.h lists its files and what each holds. */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

/* atomic, lock-free on every target we build for, so both the handler and
 * the worker threads may touch it */
atomic_int stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

/* ---- command line ----------------------------------------------------------------------- */

/* Every option at its default: db_bench's, or kv's (kv_options_init). */
static void default_options(struct options *o)
{
    kv_options d;
    kv_options_init(&d);
    *o = (struct options){.num = 1000000,
                          .key_size = 16,
                          .value_size = 100,
                          .bloom_bits = d.bloom_bits_per_key,
                          .filter_layout = d.filter_layout,
                          .cache_size = d.block_cache_size,
                          .write_buffer_size = d.write_buffer_size,
                          .block_size = d.block_size,
                          .compression = KV_COMPRESSION_NONE,
                          .threads = 1,
                          .seed = 42,
                          .memtable_filter = d.memtable_filter,
                          .filter_policy = d.filter_policy,
                          .use_direct_reads = d.use_direct_reads,
                          .filter_keyed_hash = d.filter_keyed_hash,
                          .compression_dict_bytes = d.compression_dict_bytes,
                          .compression_min_level = d.compression_min_level,
                          .compression_level = d.compression_level,
                          .compressed_block_size = d.compressed_block_size,
                          .delayed_write_rate = d.delayed_write_rate,
                          .background_nice = d.background_nice,
                          .idle_compaction_ms = d.idle_compaction_ms,
                          .dynamic_level_bytes = d.dynamic_level_bytes,
                          .min_blob_size = d.min_blob_size,
                          .blob_file_size = d.blob_file_size,
                          .blob_gc_threshold = d.blob_gc_threshold,
                          .compaction_style = d.compaction_style,
                          .runs_per_level = d.runs_per_level,
                          .max_background_jobs = d.max_background_jobs,
                          .engine = "kv",
                          .batch_size = 32,
                          .range_size = 100,
                          .range_width = 16,
                          .key_stride = 1};
}

/* The flags given that decide which run it is, or that one run refuses. */
struct given {
    int sweeping, scaling, num, engine, engines, rounds, interval;
};

/* The flags against each other, once all are parsed: the run they ask
 * for (--sweep, --scaling, --timeline, a chart, or benchmarks), the
 * defaults that run implies, and the flags it refuses. 0, or -1 after a
 * message. */
static int check_runs(struct options *o, const struct given *g)
{
    int sweeping = g->sweeping, scaling = g->scaling, set_num = g->num;
    int set_engine = g->engine, set_engines = g->engines, set_rounds = g->rounds;
    if (!sweeping) {
        o->nsweep = 0;
        o->sweep_range = 0;
    }
    if (!scaling)
        o->nscaling = 0;
    if (o->scaling_chart && scaling) {
        fprintf(stderr, "kvbench: --scaling_chart draws a CSV and runs nothing; drop --scaling\n");
        return -1;
    }
    if (o->timeline_chart && (scaling || o->timeline || o->scaling_chart)) {
        fprintf(stderr, "kvbench: --timeline_chart draws a CSV and runs nothing; drop %s\n",
                scaling       ? "--scaling"
                : o->timeline ? "--timeline"
                              : "--scaling_chart");
        return -1;
    }
    if (o->scaling_chart || o->timeline_chart)
        return 0; /* draws a CSV: no other flag applies but --report_dir */
    const char *conflict = !o->timeline    ? NULL
                           : scaling       ? "--timeline and --scaling are two runs: pick one"
                           : sweeping      ? "--timeline and --sweep are two runs: pick one"
                           : o->benchmarks ? "--timeline runs fillrandom; drop --benchmarks"
                           : o->use_existing_db
                               ? "--timeline fills a fresh database; drop --use_existing_db"
                           : set_engine ? "--timeline runs the engines of --engines; drop --engine"
                           : set_rounds ? "--rounds applies to --scaling only"
                                        : NULL;
    if (conflict) {
        fprintf(stderr, "kvbench: %s\n", conflict);
        return -1;
    }
    if (o->timeline) {
        o->histogram = 1; /* the table's p99.9, p99.99 and max */
        if (!g->interval)
            o->stats_interval = 1;
        if (!o->nengines) {
            o->engines[o->nengines++] = "kv";
            o->engines[o->nengines++] = "rocksdb";
        }
    }
    conflict = !scaling && !o->timeline && set_engines
                   ? "--engines applies to --scaling and --timeline only"
               : !scaling && set_rounds ? "--rounds applies to --scaling only"
               : !scaling               ? NULL
               : sweeping               ? "--sweep and --scaling are two runs: "
                                          "pick one"
               : o->benchmarks          ? "--scaling runs its own benchmarks; drop --benchmarks"
               : o->use_existing_db     ? "--scaling builds every database afresh; drop "
                                          "--use_existing_db"
               : set_num                ? "--scaling gives the sizes; drop --num"
               : set_engine             ? "--scaling runs the engines of --engines; drop --engine"
               : o->stats_interval > 0  ? "--scaling writes no stats.csv; drop "
                                          "--stats_interval"
                                        : NULL;
    if (conflict) {
        fprintf(stderr, "kvbench: %s\n", conflict);
        return -1;
    }
    if (scaling) {
        o->num = o->scaling[o->nscaling - 1]; /* the largest, for the key_size check */
        o->histogram = 1;                     /* the p99.9 columns */
        if (!o->rounds)
            o->rounds = 1;
        if (!o->nengines)
            for (unsigned i = 0; i < MAX_ENGINES; i++)
                o->engines[o->nengines++] = engine_names[i];
    }
    uint64_t limit = 1; /* keys are 2i+1 in key_size decimal digits */
    for (size_t k = 0; k < o->key_size && limit <= (uint64_t)1e18; k++)
        limit *= 10;
    /* the largest key index: num * key_stride, plus a range past the last key */
    double top = ((double)o->num + 1) * (double)o->key_stride + (double)o->range_width;
    if (2 * top > (double)limit) {
        fprintf(stderr,
                "kvbench: --key_size=%zu is too small for %s%llu%s (keys are 2*num%s "
                "in decimal)\n",
                o->key_size, scaling ? "a database of " : "--num=", (unsigned long long)o->num,
                o->key_stride > 1 ? " with --key_stride" : "",
                o->key_stride > 1 ? "*key_stride" : "");
        return -1;
    }
    /* seekempty's ranges lie strictly inside the gap between two keys */
    int empty_ranges = (o->benchmarks && strstr(o->benchmarks, "seekempty")) || o->sweep_range;
    if (empty_ranges && o->key_stride <= o->range_width + 1) {
        fprintf(stderr,
                "kvbench: seekempty needs gaps wider than its ranges: --key_stride=%llu must "
                "be at least --range_width + 2 = %llu (e.g. --key_stride=%llu)\n",
                (unsigned long long)o->key_stride, (unsigned long long)o->range_width + 2,
                (unsigned long long)o->range_width * 4);
        return -1;
    }
    if ((o->stats_interval > 0 || sweeping || scaling || o->timeline) && !o->report_dir)
        o->report_dir = "kvbench-report";
    if (sweeping && o->benchmarks) {
        fprintf(stderr, "kvbench: --sweep runs its own benchmarks; drop --benchmarks\n");
        return -1;
    }
    if (sweeping && o->use_existing_db) {
        fprintf(stderr, "kvbench: --sweep rebuilds the database; drop --use_existing_db\n");
        return -1;
    }
    if (!o->benchmarks)
        o->benchmarks = DEFAULT_BENCHMARKS;
    return 0;
}

/* Returns 0, 1 for --help (printed), or -1 after a message. */
static int parse_args(int argc, char **argv, struct options *o)
{
    struct given g = {0};
    default_options(o);
    char name[64];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 1;
        }
        if (strncmp(a, "--", 2) != 0 || !a[2]) {
            fprintf(stderr, "kvbench: unexpected argument \"%s\" (flags are --name=value)\n", a);
            return -1;
        }
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        if (len >= sizeof name) {
            fprintf(stderr, "kvbench: unknown flag %s\n", a);
            return -1;
        }
        memcpy(name, a + 2, len);
        name[len] = 0;
        const char *val = eq ? eq + 1 : NULL;
        /* The spelling, "--sweep bloom_bits=...", takes the next word. */
        if (!strcmp(name, "sweep") && !val && i + 1 < argc && strncmp(argv[i + 1], "--", 2))
            val = argv[++i];
        if (set_flag(o, name, val) != 0)
            return -1;
        g.sweeping |= !strcmp(name, "sweep");
        g.scaling |= !strcmp(name, "scaling");
        g.num |= !strcmp(name, "num");
        g.engine |= !strcmp(name, "engine");
        g.engines |= !strcmp(name, "engines");
        g.rounds |= !strcmp(name, "rounds");
        g.interval |= !strcmp(name, "stats_interval");
        o->reads_set |= !strcmp(name, "reads");
        o->min_blob_size_set |= !strcmp(name, "min_blob_size");
        o->idle_compaction_ms_set |= !strcmp(name, "idle_compaction_ms");
        o->dynamic_level_bytes_set |= !strcmp(name, "level_compaction_dynamic_level_bytes");
        o->compaction_style_set |= !strcmp(name, "compaction_style");
        o->runs_per_level_set |= !strcmp(name, "runs_per_level");
        o->max_background_jobs_set |= !strcmp(name, "max_background_jobs");
        o->cache_size_set |= !strcmp(name, "cache_size");
        o->use_direct_reads_set |= !strcmp(name, "use_direct_reads");
    }
    return check_runs(o, &g);
}

/* The engine of that name, or NULL when this build does not have it. */
static const struct bench_engine *find_engine(const char *name)
{
    if (!strcmp(name, "kv"))
        return &bench_kv_engine;
    if (!strcmp(name, "lmdb"))
        return &bench_lmdb_engine;
#ifdef KV_BENCH_PEERS
    return bench_peer_engine(name);
#else
    return NULL;
#endif
}

static const struct bench_engine *pick_engine(const char *name)
{
    const struct bench_engine *e = find_engine(name);
    if (!e)
        fprintf(stderr,
                "kvbench: --engine=%s needs a build with LevelDB and RocksDB: apt-get "
                "install libleveldb-dev librocksdb-dev, then cmake -DKV_BENCH_PEERS=ON\n",
                name);
    return e;
}

/* Why engine e cannot run with these options, or NULL when it can. */
static const char *engine_refuses(const struct bench_engine *e, const struct options *o)
{
    if (o->compression == KV_COMPRESSION_ZSTD && !strcmp(e->name, "leveldb"))
        return "LevelDB 1.23 has no zstd: use --compression_type=none";
    if (o->compression == KVB_COMPRESSION_SNAPPY && strcmp(e->name, "leveldb") != 0)
        return "--compression_type=snappy is LevelDB's alone";
    if (o->compression == KV_COMPRESSION_ZSTD && !strcmp(e->name, "lmdb"))
        return "LMDB does not compress: use --compression_type=none";
    return NULL;
}

/* --scaling, --timeline: the engines of --engines this build has and the
 * options allow, in c->scaling_engines; one line on the text stream for
 * each engine skipped. 0, or -1 (said why) when none is left. */
static int pick_scaling_engines(struct ctx *c)
{
    FILE *f = c->o.json ? stderr : stdout;
    const char *mode = c->o.timeline ? "timeline" : "scaling";
    for (unsigned i = 0; i < c->o.nengines; i++) {
        const char *name = c->o.engines[i];
        const struct bench_engine *e = find_engine(name);
        const char *why = e ? engine_refuses(e, &c->o) : NULL;
        if (!e)
            fprintf(f,
                    "%-13s: %s skipped: this kvbench was built without it (apt-get "
                    "install libleveldb-dev librocksdb-dev, then cmake -DKV_BENCH_PEERS=ON)\n",
                    mode, name);
        else if (why)
            fprintf(f, "%-13s: %s skipped: %s\n", mode, name, why);
        else
            c->scaling_engines[c->nscaling_engines++] = e;
    }
    if (!c->nscaling_engines) {
        fprintf(stderr, "kvbench: --%s: none of the engines asked for can run (see above)\n", mode);
        return -1;
    }
    c->e = c->scaling_engines[0];
    return 0;
}

/* ---- setup, header, teardown ----------------------------------------------------------- */

static void cpu_model(char *buf, size_t n)
{
    snprintf(buf, n, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0)
            continue;
        const char *p = strchr(line, ':');
        if (!p)
            break;
        for (p++; *p == ' ' || *p == '\t'; p++)
            ;
        snprintf(buf, n, "%.*s", (int)strcspn(p, "\n"), p);
        break;
    }
    fclose(f);
}

/* The header's line on blob files: kv's settings, whether RocksDB's are
 * on, or that the engine has none (said only when --min_blob_size asks). */
static void print_blob_line(const struct ctx *c, int several)
{
    FILE *f = c->text;
    const struct options *o = &c->o;
    char fsize[32], kv[160], rdb[96];
    human_bytes(fsize, sizeof fsize, (double)o->blob_file_size);
    if (o->min_blob_size == KV_BLOB_NEVER)
        snprintf(kv, sizeof kv, "off (--min_blob_size=never)");
    else
        snprintf(kv, sizeof kv,
                 "values of %zu bytes or more%s, %s files, a file's live "
                 "values moved out at %g%% garbage",
                 o->min_blob_size, o->min_blob_size_set ? "" : " (kv's default)", fsize,
                 100 * o->blob_gc_threshold);
    if (c->main.cfg.blob_files)
        snprintf(rdb, sizeof rdb,
                 "values of %zu bytes or more (enable_blob_files, "
                 "enable_blob_gc)",
                 o->min_blob_size);
    else
        snprintf(rdb, sizeof rdb, "off (its default; --min_blob_size=N turns them on)");
    if (several)
        fprintf(f, "Blob files:  kv: %s; RocksDB: %s; LevelDB, LMDB: none\n", kv, rdb);
    else if (c->e == &bench_kv_engine)
        fprintf(f, "Blob files:  %s\n", kv);
    else if (!strcmp(c->e->name, "rocksdb"))
        fprintf(f, "Blob files:  %s\n", rdb);
    else if (o->min_blob_size_set)
        fprintf(f, "Blob files:  --min_blob_size does not apply (%s has none)\n", c->e->name);
}

/* The header's line on range queries, when the run has any. */
static void print_ranges(FILE *f, const struct ctx *c)
{
    const struct options *o = &c->o;
    if (o->key_stride > 1 || o->prefix_len || o->range_filter_bits > 0 || o->sweep_range ||
        (o->benchmarks && strstr(o->benchmarks, "seek")))
        fprintf(f,
                "Ranges:      %llu key indexes wide (--range_width), keys every %llu indexes "
                "(--key_stride); prefix_len %zu%s, range_filter_bits %g%s\n",
                (unsigned long long)o->range_width, (unsigned long long)o->key_stride,
                o->prefix_len,
                !strcmp(c->e->name, "rocksdb") && o->prefix_len ? " (fixed prefix extractor)" : "",
                o->range_filter_bits, c->e == &bench_kv_engine ? "" : " (kv only)");
}

/* The header's "Compaction:" line: kv's style and jobs, what RocksDB
 * makes of them, or that they do not apply (said only when asked for). */
static void print_compaction(FILE *f, const struct ctx *c, int several)
{
    const struct options *o = &c->o;
    char kv[200], rdb[300], jobs[96];
    int lazy = o->compaction_style == KV_COMPACTION_LAZY_LEVELED;
    int given = o->compaction_style_set || o->runs_per_level_set || o->max_background_jobs_set;
    snprintf(kv, sizeof kv, "%s%s, %d background jobs%s", lazy ? "lazy leveled" : "leveled",
             !o->compaction_style_set ? " (kv's default)" : "", o->max_background_jobs,
             o->max_background_jobs_set ? "" : " (kv's default: online CPUs, at most 16)");
    if (lazy) {
        size_t n = strlen(kv);
        snprintf(kv + n, sizeof kv - n, "; %d runs per level above the last%s", o->runs_per_level,
                 o->runs_per_level_set ? "" : " (kv's default)");
    }
    if (o->max_background_jobs_set)
        snprintf(jobs, sizeof jobs, "max_background_jobs %d, max_subcompactions %d",
                 o->max_background_jobs, o->max_background_jobs);
    else
        snprintf(jobs, sizeof jobs,
                 "its default jobs (max_background_jobs 2, "
                 "max_subcompactions 1)");
    snprintf(rdb, sizeof rdb, "%s; %s%s",
             lazy ? "universal compaction (kCompactionStyleUniversal: RocksDB's nearest to lazy "
                    "leveling, the blunt version)"
                  : "level compaction (kCompactionStyleLevel)",
             jobs, o->runs_per_level_set ? "; --runs_per_level does not apply" : "");
    if (several)
        fprintf(f, "Compaction:  kv: %s; RocksDB: %s; LevelDB, LMDB: the flags do not apply\n", kv,
                rdb);
    else if (c->e == &bench_kv_engine)
        fprintf(f, "Compaction:  %s\n", kv);
    else if (!strcmp(c->e->name, "rocksdb"))
        fprintf(f, "Compaction:  RocksDB %s\n", rdb);
    else if (given)
        fprintf(f,
                "Compaction:  --compaction_style, --runs_per_level and --max_background_jobs do "
                "not apply to %s (%s)\n",
                c->e->name,
                c->e->no_filters ? "a B-tree: no compaction" : "one background thread, leveled");
}

static void print_header(const struct ctx *c)
{
    FILE *f = c->text;
    const struct options *o = &c->o;
    char cpu[256], host[256] = "", when[64] = "", cache[32], wb[32], raw[32];
    cpu_model(cpu, sizeof cpu);
    struct utsname u;
    if (uname(&u) == 0)
        snprintf(host, sizeof host, "%s %s %s", u.sysname, u.release, u.machine);
    time_t now = time(NULL);
    struct tm tm;
    if (localtime_r(&now, &tm))
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S %Z", &tm);
    human_bytes(cache, sizeof cache, (double)o->cache_size);
    human_bytes(wb, sizeof wb, (double)o->write_buffer_size);
    human_bytes(raw, sizeof raw, (double)o->num * (double)(o->key_size + o->value_size));
    const int several = o->nscaling || o->timeline; /* engines: c->scaling_engines */
    if (several) {
        fprintf(f, "kvbench:     engines");
        for (unsigned i = 0; i < c->nscaling_engines; i++)
            fprintf(f, "%s %s", i ? "," : "", c->scaling_engines[i]->name);
        fprintf(f, o->timeline ? " (one after another)\n" : " (interleaved in each round)\n");
    } else
        fprintf(f, "kvbench:     engine %s\n", c->e->name);
    fprintf(f, "Date:        %s\n", when);
    fprintf(f, "CPU:         %ld * %s\n", sysconf(_SC_NPROCESSORS_ONLN), cpu);
    fprintf(f, "OS:          %s\n", host);
    fprintf(f, "Keys:        %zu bytes each (decimal, even; readmissing asks for odd ones)\n",
            o->key_size);
    fprintf(f, "Values:      %zu bytes each (half of each compresses away)\n", o->value_size);
    if (o->nscaling) {
        fprintf(f, "Entries:     ");
        for (unsigned i = 0; i < o->nscaling; i++)
            fprintf(f, "%s%llu", i ? ", " : "", (unsigned long long)o->scaling[i]);
        fprintf(f, "; %u round%s of each\n", o->rounds, o->rounds == 1 ? "" : "s");
        if (o->reads_set && o->reads)
            fprintf(f, "Reads:       %llu per read benchmark\n", (unsigned long long)o->reads);
        else if (o->reads_set)
            fprintf(f, "Reads:       as many as the database has keys, per read benchmark\n");
        else
            fprintf(f, "Reads:       1000000 per read benchmark, or as many as the database has "
                       "keys when fewer\n");
        fprintf(f, "RawSize:     up to %s (estimated)\n", raw);
    } else {
        fprintf(f, "Entries:     %llu\n", (unsigned long long)o->num);
        if (!o->timeline) /* it reads nothing */
            fprintf(f, "Reads:       %llu per read benchmark\n",
                    (unsigned long long)(o->reads ? o->reads : o->num));
        fprintf(f, "RawSize:     %s (estimated)\n", raw);
    }
    int lmdb = 0; /* among --scaling's engines */
    for (unsigned i = 0; i < c->nscaling_engines; i++)
        lmdb |= c->scaling_engines[i]->no_filters;
    if (several && o->bloom_bits > 0)
        fprintf(f,
                "Filters:     %g bits/key, each engine's own Bloom filter (kv's: %s "
                "layout)%s\n",
                o->bloom_bits, layout_name(o->filter_layout), lmdb ? "; LMDB has none" : "");
    else if (several)
        fprintf(f, "Filters:     off (--bloom_bits=0)\n");
    else if (o->nsweep && o->sweep_range)
        fprintf(f,
                "Filters:     %g bits/key point filters; range filters swept over %u "
                "settings of bits/key\n",
                o->bloom_bits, o->nsweep);
    else if (o->nsweep)
        fprintf(f,
                "Filters:     sweep over %u settings of bits/key: blocked and classic "
                "(uniform), blocked (Monkey)\n",
                o->nsweep);
    else if (c->e->no_filters)
        fprintf(f, "Filters:     none (%s has no filters; --bloom_bits does not apply)\n",
                c->e->name);
    else if (o->bloom_bits > 0 && c->e != &bench_kv_engine)
        fprintf(f, "Filters:     %g bits/key, %s's Bloom filter\n", o->bloom_bits, c->e->name);
    else if (o->bloom_bits > 0)
        fprintf(f, "Filters:     %g bits/key%s, %s layout\n", o->bloom_bits,
                o->filter_policy == KV_FILTER_MONKEY ? " on average, shared among the levels "
                                                       "by Monkey (--filter_policy=monkey)"
                                                     : "",
                layout_name(o->filter_layout));
    else
        fprintf(f, "Filters:     off (--bloom_bits=0)\n");
    if (o->filter_keyed_hash)
        fprintf(f, "Filter hash: %s\n",
                c->e == &bench_kv_engine || several
                    ? "keyed: SipHash-2-4 under the database's secret (--filter_keyed_hash)"
                    : "--filter_keyed_hash does not apply to this engine (kv only)");
    fprintf(f, "Cache:       %s block cache\n", o->cache_size ? cache : "no");
    fprintf(f, "Compression: %s\n",
            o->compression == KV_COMPRESSION_ZSTD      ? "zstd"
            : o->compression == KVB_COMPRESSION_SNAPPY ? "snappy"
                                                       : "none");
    print_blob_line(c, several);
    fprintf(f, "Memtable:    %s write buffer%s; %zu-byte blocks%s\n", wb,
            c->e == &bench_kv_engine && !o->memtable_filter ? ", no memtable filter" : "",
            o->block_size, o->sync ? "; every write synced" : "");
    if (o->use_direct_reads)
        fprintf(f, "Direct I/O:  %s\n",
                several ? "table data blocks with O_DIRECT, past the page cache (kv, RocksDB)"
                : c->e == &bench_kv_engine || !strcmp(c->e->name, "rocksdb")
                    ? "table data blocks with O_DIRECT, past the page cache"
                    : "--use_direct_reads does not apply to this engine (kv and RocksDB only)");
    print_compaction(f, c, several);
    memlimit_print(f, c, several);
    print_ranges(f, c);
    fprintf(f, "Threads:     %u\n", o->threads);
    fprintf(f, "Database:    %s%s%s\n", c->main.path,
            c->tmp_root ? " (temporary, removed at exit)" : "",
            several ? "; one run at a time, removed after each" : "");
    fprintf(f, "Benchmarks:  %s\n",
            o->nsweep && o->sweep_range ? "range filter sweep (fillsettled, seekempty, "
                                          "seekshort; seekempty with O_DIRECT)"
            : o->nsweep ? "sweep (fillsettled, readmissing, readrandom; readmissing with O_DIRECT)"
            : o->nscaling ? "scaling (fillrandom, stats, readrandom, readmissing, "
                            "waitforcompaction, reopen), each run in a process of its own"
            : o->timeline ? "timeline (fillrandom, a row every --stats_interval), each engine "
                            "in a process of its own"
                          : o->benchmarks);
    fprintf(f, "------------------------------------------------\n");
    fflush(f);
}

/* mkdir -p */
static int make_dir(const char *p)
{
    char *d = strdup(p);
    int rc = d ? 0 : -1;
    for (char *s = d ? d + 1 : NULL; s && rc == 0; s = strchr(s + 1, '/')) {
        char c = *s;
        *s = 0;
        if (*d && mkdir(d, 0777) != 0 && errno != EEXIST)
            rc = -1;
        *s = c;
        if (!c)
            break;
    }
    if (rc == 0 && mkdir(p, 0777) != 0 && errno != EEXIST)
        rc = -1;
    struct stat st;
    if (rc == 0 && (stat(p, &st) != 0 || !S_ISDIR(st.st_mode))) {
        errno = ENOTDIR;
        rc = -1;
    }
    if (rc != 0)
        fprintf(stderr, "kvbench: cannot create %s: %s\n", p, strerror(errno));
    free(d);
    return rc;
}

static int setup(struct ctx *c)
{
    const struct options *o = &c->o;
    c->text = o->json ? stderr : stdout;
    c->progress = isatty(2);
    c->main.cfg =
        (struct bench_config){.bloom_bits = o->bloom_bits,
                              .filter_layout = o->filter_layout,
                              .cache_size = o->cache_size,
                              .write_buffer_size = o->write_buffer_size,
                              .block_size = o->block_size,
                              .compression = o->compression,
                              .sync = o->sync,
                              .memtable_filter = o->memtable_filter,
                              .filter_policy = o->filter_policy,
                              .use_direct_reads = o->use_direct_reads,
                              .table_memory_budget = o->table_memory_budget,
                              .filter_keyed_hash = o->filter_keyed_hash,
                              .compression_dict_bytes = o->compression_dict_bytes,
                              .compression_min_level = o->compression_min_level,
                              .compression_level = o->compression_level,
                              .compressed_block_size = o->compressed_block_size,
                              .delayed_write_rate = o->delayed_write_rate,
                              .background_nice = o->background_nice,
                              /* fillsettled waits for compaction after each memtable: an idle
         * merge of level 0 would add a second to each wait and leave a
         * tree without level 0 (the sweep's, too), unless asked for. */
                              .idle_compaction_ms = o->idle_compaction_ms_set ||
                                                            !(o->nsweep || (o->benchmarks &&
                                                                            strstr(o->benchmarks,
                                                                                   "fillsettled")))
                                                        ? o->idle_compaction_ms
                                                        : 0,
                              .dynamic_level_bytes = o->dynamic_level_bytes,
                              .dynamic_level_bytes_set = o->dynamic_level_bytes_set,
                              .min_blob_size = o->min_blob_size,
                              .blob_files = o->min_blob_size_set &&
                                            o->min_blob_size != KV_BLOB_NEVER,
                              .blob_file_size = o->blob_file_size,
                              .blob_gc_threshold = o->blob_gc_threshold,
                              .create = !o->use_existing_db && !o->read_only,
                              .read_only = o->read_only,
                              .merge_uint64_add = o->benchmarks &&
                                                  strstr(o->benchmarks, "mergerandom") != NULL,
                              .prefix_len = o->prefix_len,
                              .range_filter_bits = o->range_filter_bits,
                              .compaction_style = o->compaction_style,
                              .runs_per_level = o->runs_per_level,
                              .max_background_jobs = o->max_background_jobs,
                              .max_background_jobs_set = o->max_background_jobs_set};
    if (c->e->no_filters)
        c->main.cfg.bloom_bits = 0; /* reported as 0: there is no filter */
    if (make_pool(c) != 0) {
        fprintf(stderr, "kvbench: out of memory\n");
        return -1;
    }
    if (o->db) {
        c->main.path = strdup(o->db);
    } else {
        const char *t = getenv("TMPDIR");
        c->tmp_root = dup_printf("%s/%s", t && *t ? t : "/tmp", "kvbench-XXXXXX");
        if (!c->tmp_root || !mkdtemp(c->tmp_root)) {
            fprintf(stderr, "kvbench: cannot create a temporary directory under %s: %s\n",
                    t && *t ? t : "/tmp", strerror(errno));
            free(c->tmp_root);
            c->tmp_root = NULL;
            return -1;
        }
        c->main.path = dup_printf("%s/%s", c->tmp_root, "db");
    }
    if (!c->main.path) {
        fprintf(stderr, "kvbench: out of memory\n");
        return -1;
    }
    /* Before anything is written: a --db that is not a directory, or holds
     * someone else's files, is refused (exit 2), and nothing is touched. */
    if (o->db && check_db_dir(c, c->main.path, "--db=", o->use_existing_db) != 0)
        return E_REFUSED;
    if (o->report_dir && make_dir(o->report_dir) != 0)
        return -1;
    if (o->stats_interval > 0 && !o->timeline) { /* --timeline: timeline.csv (timeline.c) */
        char *p = dup_printf("%s/%s", o->report_dir, "stats.csv");
        c->stats_csv = p ? fopen(p, "w") : NULL;
        if (!c->stats_csv) {
            fprintf(stderr, "kvbench: cannot write %s/stats.csv: %s\n", o->report_dir,
                    strerror(errno));
            free(p);
            return -1;
        }
        free(p);
        fprintf(c->stats_csv, "%s\n", STATS_CSV_HEADER);
    }
    /* Fresh unless told otherwise, as db_bench does; but only a database of
     * the engine goes, file by file as the engine knows them (checked above). */
    if (!o->use_existing_db && destroy_db(c, c->main.path, 0) != 0)
        return -1;
    return 0;
}

static int teardown(struct ctx *c)
{
    int rc = 0;
    close_target(c, &c->main);
    if (c->stats_csv && fclose(c->stats_csv) != 0) {
        fprintf(stderr, "kvbench: writing stats.csv: %s\n", strerror(errno));
        rc = -1;
    }
    if (c->tmp_root) {
        if (destroy_db(c, c->main.path, 1) != 0 || rmdir(c->tmp_root) != 0) {
            fprintf(stderr, "kvbench: cannot remove %s: %s\n", c->tmp_root, strerror(errno));
            rc = -1;
        }
        free(c->tmp_root);
    }
    free(c->main.path);
    free(c->pool);
    return rc;
}

int main(int argc, char **argv)
{
    struct ctx c;
    memset(&c, 0, sizeof c);
    int prc = parse_args(argc, argv, &c.o);
    if (prc != 0)
        return prc > 0 ? 0 : 2;
    if (c.o.scaling_chart)
        return (c.o.report_dir && make_dir(c.o.report_dir) != 0) || scaling_chart(&c) != 0;
    if (c.o.timeline_chart)
        return (c.o.report_dir && make_dir(c.o.report_dir) != 0) || timeline_chart(&c) != 0;
    if (c.o.nscaling || c.o.timeline) {
        if (pick_scaling_engines(&c) != 0)
            return 2;
    } else if (!(c.e = pick_engine(c.o.engine))) {
        return 2;
    } else if (engine_refuses(c.e, &c.o)) {
        fprintf(stderr, "kvbench: %s\n", engine_refuses(c.e, &c.o));
        return 2;
    }
    if ((c.o.checkpoint_at > 0) != (c.o.checkpoint_dir != NULL)) {
        fprintf(stderr, "kvbench: --checkpoint_at and --checkpoint_dir go together\n");
        return 2;
    }
    if (c.o.checkpoint_at > 0 && (c.o.nsweep || c.o.nscaling || c.o.timeline || !c.e->checkpoint)) {
        fprintf(stderr, "kvbench: --checkpoint_at needs --engine=kv and a --benchmarks run\n");
        return 2;
    }
    if (c.o.nsweep && c.e != &bench_kv_engine) {
        fprintf(stderr, "kvbench: --sweep runs on --engine=kv only (it sweeps kv's layouts)\n");
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    int rc = memlimit_enter(&c);
    if (rc == 0)
        rc = setup(&c);
    if (rc == 0) {
        print_header(&c);
        rc = c.o.nsweep     ? run_sweep(&c)
             : c.o.nscaling ? run_scaling(&c)
             : c.o.timeline ? run_timeline(&c)
                            : run_benchmarks(&c);
    }
    if (stop_requested) {
        fprintf(stderr, "kvbench: interrupted\n");
        rc = E_INTERRUPTED;
    }
    if (teardown(&c) != 0 && rc == 0)
        rc = -1;
    memlimit_leave(&c);
    return rc == 0 ? 0 : rc == E_INTERRUPTED ? 130 : rc == E_REFUSED ? 2 : 1;
}
