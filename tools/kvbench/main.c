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
 * This file: the command line, setup and teardown, and main. The rest of
 * kvbench: bench.h lists its files and what each holds. */
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

static void usage(FILE *f)
{
    fprintf(f,
"usage: kvbench [--name=value ...]   (db_bench's flags; no flags: the default run)\n"
"  --benchmarks=LIST     comma list (default %s):\n",
            DEFAULT_BENCHMARKS);
    for (size_t i = 0; i < nbenches; i++)
        fprintf(f, "      %-13s %s\n", benches[i].name, benches[i].help);
    fprintf(f,
"  --num=N               keys in the database (1000000)\n"
"  --reads=N             ops of each read benchmark (default: num); a multiread\n"
"                        benchmark's ops are keys\n"
"  --batch_size=N        keys per multi-get of multireadrandom and multireadmissing\n"
"                        (32); kv, RocksDB: one multi-get call (kv_multi_get,\n"
"                        rocksdb_batched_multi_get_cf); LevelDB, LMDB have none:\n"
"                        a get per key. Latency per key: batch time / batch size\n"
"  --key_size=N          bytes per key, decimal digits (16)\n"
"  --value_size=N        bytes per value (100), up to 16777216\n"
"  --bloom_bits=B        filter bits per key; 0 disables filters (10)\n"
"  --filter_layout=L     blocked | classic (blocked)\n"
"  --filter_policy=P     kv: uniform | monkey (uniform): every table --bloom_bits,\n"
"                        or each level the bits that minimise false positives\n"
"                        per missing get at the same memory (Monkey)\n"
"  --cache_size=BYTES    block cache; 0 disables it (8388608)\n"
"  --write_buffer_size=BYTES  memtable size (4194304)\n"
"  --memtable_filter[=0|1]  kv: a filter beside each memtable (1)\n"
"  --filter_keyed_hash[=0|1]  kv: filters hash keys with SipHash-2-4 under the\n"
"                        database's secret instead of seeded XXH3 (0)\n"
"  --use_direct_reads[=0|1]  kv: read table data blocks with O_DIRECT, past the page\n"
"                        cache (0): a block the block cache misses is a device\n"
"                        read (device_reads_per_get); with --cache_size=0 every\n"
"                        one. Filters and indexes stay in memory. Where the file\n"
"                        system refuses O_DIRECT (tmpfs), a warning, and reads go\n"
"                        through the page cache\n"
"  --block_size=BYTES    data block size, every engine (kv's default, 2048)\n"
"  --compression_type=T  none | zstd | snappy (none; zstd is kv's own default;\n"
"                        snappy: LevelDB only, its own default)\n"
"  --compression_dict_bytes=N  kv: zstd dictionary per table, 0: none (kv's default)\n"
"  --compression_min_level=N  kv: levels below N stored uncompressed (kv's default)\n"
"  --compression_level=N  kv: zstd level, -7 .. 22 (kv's default)\n"
"  --compressed_block_size=BYTES  kv: block size of compressed tables, 0: --block_size\n"
"                        (kv's default)\n"
"  --delayed_write_rate=BYTES  kv: bytes/s the write controller starts delaying at\n"
"                        (kv's default)\n"
"  --background_nice=N   kv: nice increment of the background threads, 0 .. 19, or -1:\n"
"                        19 on a machine of at most 4 CPUs, else 0 (kv's default)\n"
"  --idle_compaction_ms=N  kv: milliseconds without a write after which level 0 is\n"
"                        merged into level 1, 0 .. 86400000, 0: never (kv's default;\n"
"                        0 with fillsettled and --sweep, unless given)\n"
"  --level_compaction_dynamic_level_bytes=0|1  kv: level sizes follow the database's\n"
"                        size, level 0 merging into the base level (1, kv's default),\n"
"                        or level 1 holds 32 MiB and each level below ten times more\n"
"                        (0). RocksDB: sets its option of that name; without the\n"
"                        flag, RocksDB's default\n"
"  --min_blob_size=N     kv: values of N bytes or more go to blob files, apart from\n"
"                        the keys (kv's default); never (or -1): every value stays\n"
"                        in the tables. RocksDB: turns its blob files on\n"
"                        (enable_blob_files, min_blob_size N, enable_blob_gc);\n"
"                        without the flag, or with never, RocksDB's default: none.\n"
"                        LevelDB and LMDB have none: ignored\n"
"  --blob_file_size=BYTES  kv: bytes a compaction writes to one blob file (kv's\n"
"                        default)\n"
"  --blob_gc_threshold=F  kv: a blob file's share of garbage, above 0 and at most 1,\n"
"                        from which compactions move its live values out (kv's\n"
"                        default)\n"
"  --sync[=0|1]          sync every write\n"
"  --threads=N           threads sharing each benchmark's ops (1); readwhilewriting:\n"
"                        the readers, and one writer besides\n"
"  --use_existing_db[=0|1]  keep the database at --db; skip the fill benchmarks\n"
"  --db=DIR              database directory (default: a temporary one, removed);\n"
"                        new, empty, or a database of --engine, whose files alone\n"
"                        a fresh run deletes\n"
"  --seed=N              keys and their order follow from it (42)\n"
"  --histogram[=0|1]     latency percentiles p50 p95 p99 p99.9 p99.99 max\n"
"  --json[=0|1]          one JSON object per benchmark on stdout; text to stderr\n"
"                        Every object has bytes_written (bytes the process wrote to\n"
"                        storage while the benchmark ran: /proc/self/io write_bytes;\n"
"                        nothing on tmpfs), write_amp (bytes_written over the key and\n"
"                        value bytes the benchmark wrote; only where it wrote some),\n"
"                        db_bytes (the database's files at its end), blob_bytes and\n"
"                        blob_garbage_bytes (kv, RocksDB); kv's reads add\n"
"                        blob_reads_per_get\n"
"  --drop_cache[=0|1]    evict the database's files from the page cache before\n"
"                        each read benchmark (posix_fadvise DONTNEED)\n"
"  --stats_interval=S    every S seconds, a row of REPORT_DIR/stats.csv: ops/s,\n"
"                        p99_us and p999_us of the ops completed in the interval\n"
"                        (every op is timed), write_delays, write_delay_us,\n"
"                        write_stops, write_stop_us, l0_files,\n"
"                        pending_compaction_bytes, compaction_bytes, compacting\n"
"                        (empty where the engine does not say)\n"
"  --report_dir=DIR      where stats.csv, sweep.csv and .svg, scaling.csv and .svg,\n"
"                        timeline.csv and .svg go (kvbench-report)\n"
"  --sweep[=bloom_bits=B,B,...]  for each bits/key (default 0,2,...,20) and each of\n"
"                        blocked-uniform, classic-uniform, blocked-monkey:\n"
"                        fillsettled, readmissing, readrandom, then readmissing\n"
"                        with O_DIRECT and no block cache (at most 10000 gets);\n"
"                        write REPORT_DIR/sweep.csv and the chart REPORT_DIR/sweep.svg\n"
"  --scaling=N,N,...     database sizes (K, M, G: 10^3, 10^6, 10^9; 1M,5M,20M):\n"
"                        for each size, round and engine in turn, on a fresh\n"
"                        database: fillrandom, stats, readrandom, readmissing,\n"
"                        waitforcompaction, reopen, with --histogram; each run a\n"
"                        row of REPORT_DIR/scaling.csv; medians over rounds in\n"
"                        the chart REPORT_DIR/scaling.svg and a table. --reads\n"
"                        defaults to 1000000, or N when smaller\n"
"  --engines=E,E,...     --scaling's engines, interleaved in each round (default\n"
"                        kv,leveldb,rocksdb,lmdb), or --timeline's, in turn\n"
"                        (default kv,rocksdb); those not built are skipped\n"
"  --rounds=N            --scaling's rounds of each size and engine (1)\n"
"  --scaling_chart=CSV   run nothing: the chart and table again from a CSV that\n"
"                        --scaling wrote (several may be concatenated); the chart\n"
"                        goes beside the CSV, or to --report_dir\n"
"  --timeline[=0|1]      for each of --engines in turn, in a process of its own:\n"
"                        fillrandom of --num keys on a fresh database, with\n"
"                        --histogram and a row every --stats_interval seconds\n"
"                        (default 1) into REPORT_DIR/timeline.csv (stats.csv's\n"
"                        columns after an engine column); the chart\n"
"                        REPORT_DIR/timeline.svg (ops/s and p99.9 per interval,\n"
"                        flushes and compactions as bands) and a table: fill\n"
"                        ops/s, p99.9, p99.99, max, intervals with p99.9 > 1 ms\n"
"  --timeline_chart=CSV  run nothing: the timeline chart and table again from a\n"
"                        CSV that --timeline wrote; beside it, or to --report_dir\n"
"  --engine=E            kv | lmdb | leveldb | rocksdb (LMDB: a B-tree without\n"
"                        filters, always built; LevelDB and RocksDB need a build\n"
"                        with -DKV_BENCH_PEERS=ON)\n"
"  --help                this text\n");
}

/* The parsers return NULL when the value is good, else what is wrong with
 * it (the caller adds what it wants). */

static const char *parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    if (!*s)
        return "empty";
    char *end;
    errno = 0;
    double d = strtod(s, &end); /* 1e6 as well as 1000000 */
    if (end == s || *end || isnan(d))
        return "not a number";
    if (d != floor(d))
        return "not an integer";
    if (errno == ERANGE || !(d >= (double)lo && d <= (double)hi))
        return "out of range";
    *out = (uint64_t)d;
    return NULL;
}

static const char *parse_size(const char *s, uint64_t lo, uint64_t hi, size_t *out)
{
    uint64_t u;
    const char *why = parse_u64(s, lo, hi, &u);
    if (!why)
        *out = (size_t)u;
    return why;
}

static const char *parse_double(const char *s, double lo, double hi, double *out)
{
    if (!*s)
        return "empty";
    char *end;
    errno = 0;
    double d = strtod(s, &end);
    if (end == s || *end || isnan(d))
        return "not a number";
    if (errno == ERANGE || !(d >= lo && d <= hi))
        return "out of range";
    *out = d;
    return NULL;
}

/* A flag given alone (val NULL) is 1. */
static const char *parse_bool(const char *s, int *out)
{
    if (!s || !strcmp(s, "1") || !strcmp(s, "true"))
        *out = 1;
    else if (!strcmp(s, "0") || !strcmp(s, "false"))
        *out = 0;
    else
        return "not a boolean";
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static const char *parse_sweep(const char *s, struct options *o)
{
    if (!s) {
        o->nsweep = 0;
        for (int b = 0; b <= 20; b += 2)
            o->sweep[o->nsweep++] = b;
        return NULL;
    }
    if (strncmp(s, "bloom_bits=", 11) != 0)
        return "does not start with bloom_bits=";
    s += 11;
    o->nsweep = 0;
    while (*s) {
        char *end;
        double d = strtod(s, &end);
        if (end == s || (*end && *end != ',') || isnan(d))
            return "a setting is not a number";
        if (!(d >= 0 && d <= 1000))
            return "a setting is out of range";
        if (o->nsweep == MAX_SWEEP)
            return "too many settings";
        o->sweep[o->nsweep++] = d;
        s = *end ? end + 1 : end;
    }
    if (!o->nsweep)
        return "no settings";
    qsort(o->sweep, o->nsweep, sizeof o->sweep[0], cmp_double);
    unsigned m = 1;
    for (unsigned i = 1; i < o->nsweep; i++)
        if (o->sweep[i] != o->sweep[m - 1])
            o->sweep[m++] = o->sweep[i];
    o->nsweep = m;
    return NULL;
}

/* One database size of --scaling: an integer, or a number with a suffix
 * K, M or G (10^3, 10^6, 10^9): 50000, 50K, 2.5M, 1e6. */
static const char *parse_count(const char *s, size_t len, uint64_t *out)
{
    char buf[64];
    if (!len)
        return "an empty size";
    if (len >= sizeof buf)
        return "a size is not a number";
    memcpy(buf, s, len);
    buf[len] = 0;
    double mult = 1;
    char last = buf[len - 1];
    if (strchr("kKmMgG", last)) {
        mult = last == 'k' || last == 'K' ? 1e3 : last == 'm' || last == 'M' ? 1e6 : 1e9;
        buf[--len] = 0;
    }
    char *end;
    double d = strtod(buf, &end);
    if (!len || end != buf + len || isnan(d))
        return "a size is not a number";
    d *= mult;
    if (d != floor(d))
        return "a size is not a whole number of keys";
    if (!(d >= 1 && d <= 1e12))
        return "a size is out of range";
    *out = (uint64_t)d;
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static const char *parse_scaling(const char *s, struct options *o)
{
    o->nscaling = 0;
    for (const char *p = s;; p++) {
        size_t len = strcspn(p, ",");
        if (o->nscaling == MAX_SCALING)
            return "too many sizes";
        const char *why = parse_count(p, len, &o->scaling[o->nscaling++]);
        if (why)
            return why;
        p += len;
        if (!*p)
            break;
    }
    qsort(o->scaling, o->nscaling, sizeof o->scaling[0], cmp_u64);
    unsigned m = 1;
    for (unsigned i = 1; i < o->nscaling; i++)
        if (o->scaling[i] != o->scaling[m - 1])
            o->scaling[m++] = o->scaling[i];
    o->nscaling = m;
    return NULL;
}

static const char *const engine_names[MAX_ENGINES] = {"kv", "leveldb", "rocksdb", "lmdb"};

static const char *parse_engines(const char *s, struct options *o)
{
    o->nengines = 0;
    for (const char *p = s;; p++) {
        size_t len = strcspn(p, ",");
        const char *name = NULL;
        for (unsigned i = 0; i < MAX_ENGINES; i++)
            if (strlen(engine_names[i]) == len && !strncmp(p, engine_names[i], len))
                name = engine_names[i];
        if (!name)
            return len ? "unknown engine" : "an empty name";
        for (unsigned i = 0; i < o->nengines; i++)
            if (o->engines[i] == name)
                return "an engine named twice";
        o->engines[o->nengines++] = name;
        p += len;
        if (!*p)
            break;
    }
    return NULL;
}

static int check_benchmarks(const char *list)
{
    int any = 0;
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        if (len && !find_bench(p, len)) {
            fprintf(stderr, "kvbench: unknown benchmark \"%.*s\" (kvbench --help lists them)\n",
                    (int)len, p);
            return -1;
        }
        any |= len > 0;
        p += len + (p[len] == ',');
    }
    if (!any)
        fprintf(stderr, "kvbench: --benchmarks is empty\n");
    return any ? 0 : -1;
}

/* One --name=value; returns 0, or -1 after a one-line message that names
 * the flag, the value, what is wrong with it and what the flag wants:
 *   kvbench: --reads=abc: not a number (want an integer from 1 to 1e15, or -1 for num) */
static int set_flag(struct options *o, const char *name, const char *val)
{
    const char *want = NULL, *why = NULL;
    uint64_t u;
    /* Flags that take a value: none given is an error of its own. */
    if (!val && strcmp(name, "sweep") != 0 && strcmp(name, "sync") != 0 &&
        strcmp(name, "use_existing_db") != 0 && strcmp(name, "histogram") != 0 &&
        strcmp(name, "json") != 0 && strcmp(name, "drop_cache") != 0 &&
        strcmp(name, "memtable_filter") != 0 && strcmp(name, "use_direct_reads") != 0 &&
        strcmp(name, "filter_keyed_hash") != 0 && strcmp(name, "timeline") != 0)
        why = "no value";
    if (!strcmp(name, "db")) {
        want = "a directory";
        if (!why && !*val)
            why = "empty";
        else if (!why)
            o->db = val;
    } else if (!strcmp(name, "num")) {
        want = "an integer from 1 to 1e15";
        if (!why)
            why = parse_u64(val, 1, 1000000000000000ull, &o->num);
    } else if (!strcmp(name, "reads")) {
        want = "an integer from 1 to 1e15, or -1 for num";
        if (!why && !strcmp(val, "-1"))
            o->reads = 0;
        else if (!why)
            why = parse_u64(val, 1, 1000000000000000ull, &o->reads);
    } else if (!strcmp(name, "batch_size")) {
        want = "an integer from 1 to 65536";
        if (!why && !(why = parse_u64(val, 1, 65536, &u)))
            o->batch_size = (size_t)u;
    } else if (!strcmp(name, "key_size")) {
        want = "an integer from 1 to 1024";
        if (!why)
            why = parse_size(val, 1, MAX_KEY_SIZE, &o->key_size);
    } else if (!strcmp(name, "value_size")) {
        want = "an integer from 0 to 16777216";
        if (!why)
            why = parse_size(val, 0, KV_MAX_VALUE_SIZE, &o->value_size);
    } else if (!strcmp(name, "benchmarks")) {
        want = "a comma list of the benchmarks kvbench --help lists";
        if (!why && check_benchmarks(val))
            return -1; /* it said which */
        if (!why)
            o->benchmarks = val;
    } else if (!strcmp(name, "bloom_bits")) {
        want = "a number from 0 to 1000";
        if (!why)
            why = parse_double(val, 0, 1000, &o->bloom_bits);
    } else if (!strcmp(name, "filter_layout")) {
        want = "blocked or classic";
        if (!why && !strcmp(val, "blocked"))
            o->filter_layout = KV_BLOOM_BLOCKED;
        else if (!why && !strcmp(val, "classic"))
            o->filter_layout = KV_BLOOM_CLASSIC;
        else if (!why)
            why = "unknown layout";
    } else if (!strcmp(name, "filter_policy")) {
        want = "uniform or monkey";
        if (!why && !strcmp(val, "uniform"))
            o->filter_policy = KV_FILTER_UNIFORM;
        else if (!why && !strcmp(val, "monkey"))
            o->filter_policy = KV_FILTER_MONKEY;
        else if (!why)
            why = "unknown policy";
    } else if (!strcmp(name, "cache_size")) {
        want = "a size in bytes, up to 2^46";
        if (!why)
            why = parse_size(val, 0, (uint64_t)1 << 46, &o->cache_size);
    } else if (!strcmp(name, "write_buffer_size")) {
        want = "a size in bytes from 65536 to 2^40";
        if (!why)
            why = parse_size(val, 64 * 1024, (uint64_t)1 << 40, &o->write_buffer_size);
    } else if (!strcmp(name, "block_size")) {
        want = "a size in bytes from 64 to 67108864";
        if (!why)
            why = parse_size(val, 64, 64u << 20, &o->block_size);
    } else if (!strcmp(name, "compression_type")) {
        want = "none or zstd";
        if (!why && !strcmp(val, "none"))
            o->compression = KV_COMPRESSION_NONE;
        else if (!why && !strcmp(val, "zstd"))
            o->compression = KV_COMPRESSION_ZSTD;
        else if (!why && !strcmp(val, "snappy"))
            o->compression = KVB_COMPRESSION_SNAPPY;
        else if (!why)
            why = "unknown compression";
    } else if (!strcmp(name, "compression_dict_bytes")) {
        want = "a size in bytes up to 1048576";
        if (!why)
            why = parse_size(val, 0, 1u << 20, &o->compression_dict_bytes);
    } else if (!strcmp(name, "compression_min_level")) {
        want = "a level from 0 to 7";
        if (!why && !(why = parse_u64(val, 0, 7, &u)))
            o->compression_min_level = (int)u;
    } else if (!strcmp(name, "compressed_block_size")) {
        want = "0, or a size in bytes from 64 to 67108864";
        if (!why)
            why = parse_size(val, 0, 64u << 20, &o->compressed_block_size);
        if (!why && o->compressed_block_size && o->compressed_block_size < 64)
            why = "below 64";
    } else if (!strcmp(name, "delayed_write_rate")) {
        want = "a rate in bytes per second from 1024 to 2^40";
        if (!why)
            why = parse_size(val, 1024, (uint64_t)1 << 40, &o->delayed_write_rate);
    } else if (!strcmp(name, "background_nice")) {
        want = "-1, or a nice increment from 0 to 19";
        if (!why && !strcmp(val, "-1"))
            o->background_nice = -1;
        else if (!why && !(why = parse_u64(val, 0, 19, &u)))
            o->background_nice = (int)u;
    } else if (!strcmp(name, "idle_compaction_ms")) {
        want = "milliseconds from 0 to 86400000 (0: never)";
        if (!why && !(why = parse_u64(val, 0, 86400000, &u))) {
            o->idle_compaction_ms = (int)u;
            o->idle_compaction_ms_set = 1;
        }
    } else if (!strcmp(name, "level_compaction_dynamic_level_bytes")) {
        want = "0 or 1";
        if (!why && !(why = parse_u64(val, 0, 1, &u))) {
            o->dynamic_level_bytes = (int)u;
            o->dynamic_level_bytes_set = 1;
        }
    } else if (!strcmp(name, "min_blob_size")) {
        want = "a size in bytes up to 2^40, or never (or -1): every value in the tables";
        if (!why && (!strcmp(val, "never") || !strcmp(val, "-1")))
            o->min_blob_size = KV_BLOB_NEVER;
        else if (!why)
            why = parse_size(val, 0, (uint64_t)1 << 40, &o->min_blob_size);
        o->min_blob_size_set |= !why;
    } else if (!strcmp(name, "blob_file_size")) {
        want = "a size in bytes from 65536 to 2^40";
        if (!why)
            why = parse_size(val, 64 * 1024, (uint64_t)1 << 40, &o->blob_file_size);
    } else if (!strcmp(name, "blob_gc_threshold")) {
        want = "a share of a file's bytes, above 0 and at most 1";
        if (!why)
            why = parse_double(val, 0, 1, &o->blob_gc_threshold);
        if (!why && o->blob_gc_threshold == 0)
            why = "not above 0";
    } else if (!strcmp(name, "compression_level")) {
        want = "an integer from -7 to 22";
        if (!why && !(why = parse_u64(val[0] == '-' ? val + 1 : val, 0,
                                      val[0] == '-' ? 7 : 22, &u)))
            o->compression_level = val[0] == '-' ? -(int)u : (int)u;
    } else if (!strcmp(name, "threads")) {
        want = "an integer from 1 to 256";
        if (!why && !(why = parse_u64(val, 1, MAX_THREADS, &u)))
            o->threads = (unsigned)u;
    } else if (!strcmp(name, "seed")) {
        want = "an integer from 0 to 1e15";
        if (!why)
            why = parse_u64(val, 0, 1000000000000000ull, &o->seed);
    } else if (!strcmp(name, "stats_interval")) {
        want = "seconds, from 0.001 to 86400";
        if (!why)
            why = parse_double(val, 0.001, 86400, &o->stats_interval);
    } else if (!strcmp(name, "report_dir")) {
        want = "a directory";
        if (!why && !*val)
            why = "empty";
        else if (!why)
            o->report_dir = val;
    } else if (!strcmp(name, "sweep")) {
        want = "bloom_bits=B,B,...: at most 64 numbers from 0 to 1000";
        why = parse_sweep(val, o);
    } else if (!strcmp(name, "scaling")) {
        want = "database sizes N,N,...: at most 32, each from 1 to 1e12, with K, M or G "
               "for 10^3, 10^6, 10^9";
        if (!why)
            why = parse_scaling(val, o);
    } else if (!strcmp(name, "engines")) {
        want = "a comma list of kv, leveldb, rocksdb and lmdb";
        if (!why)
            why = parse_engines(val, o);
    } else if (!strcmp(name, "rounds")) {
        want = "an integer from 1 to 1000";
        if (!why && !(why = parse_u64(val, 1, 1000, &u)))
            o->rounds = (unsigned)u;
    } else if (!strcmp(name, "scaling_chart")) {
        want = "a CSV that kvbench --scaling wrote";
        if (!why && !*val)
            why = "empty";
        else if (!why)
            o->scaling_chart = val;
    } else if (!strcmp(name, "timeline_chart")) {
        want = "a CSV that kvbench --timeline wrote";
        if (!why && !*val)
            why = "empty";
        else if (!why)
            o->timeline_chart = val;
    } else if (!strcmp(name, "engine")) {
        want = "kv, lmdb, leveldb or rocksdb";
        if (!why && strcmp(val, "kv") && strcmp(val, "lmdb") && strcmp(val, "leveldb") &&
            strcmp(val, "rocksdb"))
            why = "unknown engine";
        else if (!why)
            o->engine = val;
    } else {
        int *flag = !strcmp(name, "sync")              ? &o->sync
                    : !strcmp(name, "use_existing_db") ? &o->use_existing_db
                    : !strcmp(name, "histogram")       ? &o->histogram
                    : !strcmp(name, "json")            ? &o->json
                    : !strcmp(name, "drop_cache")      ? &o->drop_cache
                    : !strcmp(name, "memtable_filter") ? &o->memtable_filter
                    : !strcmp(name, "use_direct_reads") ? &o->use_direct_reads
                    : !strcmp(name, "filter_keyed_hash") ? &o->filter_keyed_hash
                    : !strcmp(name, "timeline")        ? &o->timeline
                                                       : NULL;
        if (!flag) {
            fprintf(stderr, "kvbench: unknown flag --%s (kvbench --help lists them)\n", name);
            return -1;
        }
        want = "0, 1, true or false; alone: 1";
        why = parse_bool(val, flag);
    }
    if (!why)
        return 0;
    if (val)
        fprintf(stderr, "kvbench: --%s=%s: %s (want %s)\n", name, val, why, want);
    else
        fprintf(stderr, "kvbench: --%s needs a value: --%s=VALUE (want %s)\n", name, name, want);
    return -1;
}

/* Returns 0, 1 for --help (printed), or -1 after a message. */
static int parse_args(int argc, char **argv, struct options *o)
{
    kv_options d;
    kv_options_init(&d);
    *o = (struct options){.num = 1000000, .key_size = 16, .value_size = 100,
                          .bloom_bits = d.bloom_bits_per_key, .filter_layout = d.filter_layout,
                          .cache_size = d.block_cache_size,
                          .write_buffer_size = d.write_buffer_size, .block_size = d.block_size,
                          .compression = KV_COMPRESSION_NONE, .threads = 1, .seed = 42,
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
                          .engine = "kv", .batch_size = 32};
    int sweeping = 0, scaling = 0, set_num = 0, set_engine = 0, set_rounds = 0;
    int set_engines = 0, set_interval = 0;
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
        sweeping |= !strcmp(name, "sweep");
        scaling |= !strcmp(name, "scaling");
        set_num |= !strcmp(name, "num");
        set_engine |= !strcmp(name, "engine");
        set_engines |= !strcmp(name, "engines");
        set_rounds |= !strcmp(name, "rounds");
        set_interval |= !strcmp(name, "stats_interval");
        o->reads_set |= !strcmp(name, "reads");
    }
    if (!sweeping)
        o->nsweep = 0;
    if (!scaling)
        o->nscaling = 0;
    if (o->scaling_chart && scaling) {
        fprintf(stderr, "kvbench: --scaling_chart draws a CSV and runs nothing; drop --scaling\n");
        return -1;
    }
    if (o->timeline_chart && (scaling || o->timeline || o->scaling_chart)) {
        fprintf(stderr, "kvbench: --timeline_chart draws a CSV and runs nothing; drop %s\n",
                scaling ? "--scaling" : o->timeline ? "--timeline" : "--scaling_chart");
        return -1;
    }
    if (o->scaling_chart || o->timeline_chart)
        return 0; /* draws a CSV: no other flag applies but --report_dir */
    const char *conflict =
        !o->timeline         ? NULL
        : scaling            ? "--timeline and --scaling are two runs: pick one"
        : sweeping           ? "--timeline and --sweep are two runs: pick one"
        : o->benchmarks      ? "--timeline runs fillrandom; drop --benchmarks"
        : o->use_existing_db ? "--timeline fills a fresh database; drop --use_existing_db"
        : set_engine         ? "--timeline runs the engines of --engines; drop --engine"
        : set_rounds         ? "--rounds applies to --scaling only"
                             : NULL;
    if (conflict) {
        fprintf(stderr, "kvbench: %s\n", conflict);
        return -1;
    }
    if (o->timeline) {
        o->histogram = 1; /* the table's p99.9, p99.99 and max */
        if (!set_interval)
            o->stats_interval = 1;
        if (!o->nengines) {
            o->engines[o->nengines++] = "kv";
            o->engines[o->nengines++] = "rocksdb";
        }
    }
    conflict = !scaling && !o->timeline && set_engines
                                       ? "--engines applies to --scaling and --timeline only"
                           : !scaling && set_rounds ? "--rounds applies to --scaling only"
                           : !scaling              ? NULL
                           : sweeping              ? "--sweep and --scaling are two runs: "
                                                     "pick one"
                           : o->benchmarks ? "--scaling runs its own benchmarks; drop --benchmarks"
                           : o->use_existing_db ? "--scaling builds every database afresh; drop "
                                                  "--use_existing_db"
                           : set_num ? "--scaling gives the sizes; drop --num"
                           : set_engine ? "--scaling runs the engines of --engines; drop --engine"
                           : o->stats_interval > 0 ? "--scaling writes no stats.csv; drop "
                                                     "--stats_interval"
                                                   : NULL;
    if (conflict) {
        fprintf(stderr, "kvbench: %s\n", conflict);
        return -1;
    }
    if (scaling) {
        o->num = o->scaling[o->nscaling - 1]; /* the largest, for the key_size check */
        o->histogram = 1; /* the p99.9 columns */
        if (!o->rounds)
            o->rounds = 1;
        if (!o->nengines)
            for (unsigned i = 0; i < MAX_ENGINES; i++)
                o->engines[o->nengines++] = engine_names[i];
    }
    uint64_t limit = 1; /* keys are 2i+1 in key_size decimal digits */
    for (size_t k = 0; k < o->key_size && limit <= (uint64_t)1e18; k++)
        limit *= 10;
    if (2 * o->num > limit) {
        fprintf(stderr, "kvbench: --key_size=%zu is too small for %s%llu (keys are 2*num "
                        "in decimal)\n", o->key_size, scaling ? "a database of " : "--num=",
                (unsigned long long)o->num);
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
        fprintf(stderr, "kvbench: --engine=%s needs a build with LevelDB and RocksDB: apt-get "
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
            fprintf(f, "%-13s: %s skipped: this kvbench was built without it (apt-get "
                       "install libleveldb-dev librocksdb-dev, then cmake -DKV_BENCH_PEERS=ON)\n",
                    mode, name);
        else if (why)
            fprintf(f, "%-13s: %s skipped: %s\n", mode, name, why);
        else
            c->scaling_engines[c->nscaling_engines++] = e;
    }
    if (!c->nscaling_engines) {
        fprintf(stderr, "kvbench: --%s: none of the engines asked for can run (see above)\n",
                mode);
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
        snprintf(kv, sizeof kv, "values of %zu bytes or more%s, %s files, a file's live "
                                "values moved out at %g%% garbage", o->min_blob_size,
                 o->min_blob_size_set ? "" : " (kv's default)", fsize,
                 100 * o->blob_gc_threshold);
    if (c->main.cfg.blob_files)
        snprintf(rdb, sizeof rdb, "values of %zu bytes or more (enable_blob_files, "
                                  "enable_blob_gc)", o->min_blob_size);
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
        fprintf(f, "Filters:     %g bits/key, each engine's own Bloom filter (kv's: %s "
                   "layout)%s\n", o->bloom_bits, layout_name(o->filter_layout),
                lmdb ? "; LMDB has none" : "");
    else if (several)
        fprintf(f, "Filters:     off (--bloom_bits=0)\n");
    else if (o->nsweep)
        fprintf(f, "Filters:     sweep over %u settings of bits/key: blocked and classic "
                   "(uniform), blocked (Monkey)\n", o->nsweep);
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
    fprintf(f, "Compression: %s\n", o->compression == KV_COMPRESSION_ZSTD     ? "zstd"
                                     : o->compression == KVB_COMPRESSION_SNAPPY ? "snappy"
                                                                                 : "none");
    print_blob_line(c, several);
    fprintf(f, "Memtable:    %s write buffer%s; %zu-byte blocks%s\n", wb,
            c->e == &bench_kv_engine && !o->memtable_filter ? ", no memtable filter" : "",
            o->block_size, o->sync ? "; every write synced" : "");
    if (o->use_direct_reads)
        fprintf(f, "Direct I/O:  %s\n",
                c->e == &bench_kv_engine || several
                    ? "table data blocks with O_DIRECT, past the page cache (kv only)"
                    : "--use_direct_reads does not apply to this engine (kv only)");
    fprintf(f, "Threads:     %u\n", o->threads);
    fprintf(f, "Database:    %s%s%s\n", c->main.path,
            c->tmp_root ? " (temporary, removed at exit)" : "",
            several ? "; one run at a time, removed after each" : "");
    fprintf(f, "Benchmarks:  %s\n",
            o->nsweep ? "sweep (fillsettled, readmissing, readrandom; readmissing with O_DIRECT)"
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
    c->main.cfg = (struct bench_config){
        .bloom_bits = o->bloom_bits, .filter_layout = o->filter_layout,
        .cache_size = o->cache_size, .write_buffer_size = o->write_buffer_size,
        .block_size = o->block_size, .compression = o->compression, .sync = o->sync,
        .memtable_filter = o->memtable_filter, .filter_policy = o->filter_policy,
        .use_direct_reads = o->use_direct_reads,
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
        .idle_compaction_ms =
            o->idle_compaction_ms_set ||
                    !(o->nsweep || (o->benchmarks && strstr(o->benchmarks, "fillsettled")))
                ? o->idle_compaction_ms
                : 0,
        .dynamic_level_bytes = o->dynamic_level_bytes,
        .dynamic_level_bytes_set = o->dynamic_level_bytes_set,
        .min_blob_size = o->min_blob_size,
        .blob_files = o->min_blob_size_set && o->min_blob_size != KV_BLOB_NEVER,
        .blob_file_size = o->blob_file_size,
        .blob_gc_threshold = o->blob_gc_threshold,
        .create = !o->use_existing_db};
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
    if (c.o.nsweep && c.e != &bench_kv_engine) {
        fprintf(stderr, "kvbench: --sweep runs on --engine=kv only (it sweeps kv's layouts)\n");
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    int rc = setup(&c);
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
    return rc == 0 ? 0 : rc == E_INTERRUPTED ? 130 : rc == E_REFUSED ? 2 : 1;
}
