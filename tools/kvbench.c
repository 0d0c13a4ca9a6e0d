/* kvbench - db_bench for kv: fills and reads a database the way LevelDB's
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
 *                                  every bits/key for both filter layouts:
 *                                  DIR/sweep.csv and the chart DIR/sweep.svg
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
 * The per-get figures are deltas of kv_stats across the run; the expected
 * FPR weights each table's expected_fpr (kv_table_stats_get) by the absent-
 * key probes it served during the run. --histogram adds two clock reads per
 * op into a log-bucketed histogram (16 buckets per power of two, ~6%).
 *
 * Exit status: 0, 1 on a failed run, 2 on a bad command line, 130 when
 * interrupted; the temporary directory is removed in every case. */
#define _XOPEN_SOURCE 700
#include <kv/kv.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "kvbench.h"

#define MAX_KEY_SIZE 1024
#define MAX_THREADS 256
#define MAX_SWEEP 64
#define COPY_BATCH 1000
#define DEFAULT_BENCHMARKS "fillrandom,compact,readrandom,readmissing,nofilter"

/* ---- options ------------------------------------------------------------------- */

struct options {
    const char *db;           /* --db; NULL: a temporary directory */
    uint64_t num, reads;      /* reads 0: as many as num */
    size_t key_size, value_size;
    const char *benchmarks;   /* NULL: DEFAULT_BENCHMARKS */
    double bloom_bits;
    int filter_layout;
    size_t cache_size, write_buffer_size, block_size;
    int compression;
    int sync, use_existing_db, histogram, json, drop_cache;
    unsigned threads;
    uint64_t seed;
    double stats_interval;    /* seconds; 0: off */
    const char *report_dir;
    double sweep[MAX_SWEEP];  /* bits/key, ascending */
    unsigned nsweep;
    const char *engine;
};

/* ---- the run's state --------------------------------------------------------------- */

enum kind { K_WRITE, K_READ, K_SCAN, K_OTHER };

struct worker;
struct bench_def {
    const char *name;
    enum kind kind;
    /* One op: 0 done, 1 no more data (readseq's end), < 0 engine error. */
    int (*op)(struct worker *w, uint64_t i);
    int fresh;       /* starts from an empty database */
    int iter;        /* each thread needs an iterator */
    const char *help;
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
    double seconds;
    double probed, negatives, false_pos, block_reads, bytes_read;
    double cache_hits; /* per get: blocks found in the block cache */
    double cache_hit_ratio, measured_fpr, expected_fpr;
    size_t fpr_tables;        /* tables with absent-key probes */
    uint64_t fpr_probes;      /* probes the FPR is measured over */
    int has_hist;
    double p50, p95, p99, p999, pmax;
    double bloom_bits;
    int layout;
    struct bench_counters after, delta;
};

struct ctx {
    struct options o;
    const struct bench_engine *e;
    char *tmp_root;           /* made by mkdtemp, removed at exit; NULL if none */
    struct target main;
    uint8_t *pool;            /* value bytes: values are slices of it */
    size_t pool_len;
    FILE *text;               /* human output: stdout, or stderr with --json */
    FILE *stats_csv;          /* --stats_interval */
    int progress;             /* stderr is a terminal */
    struct result last_missing; /* the latest readmissing with filters on */
    int have_last_missing;
};

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

/* Internal results besides 0 and the engines' (negative) codes. */
#define E_INTERRUPTED 1000 /* a run stopped by SIGINT/SIGTERM */
#define E_FAIL 1001        /* failed, and the reason is printed already */

/* ---- small helpers --------------------------------------------------------------- */

static double now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

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

static uint64_t hash_name(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

static char *dup_printf(const char *fmt, const char *a, const char *b)
{
    size_t n = strlen(fmt) + strlen(a) + strlen(b) + 1;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, fmt, a, b);
    return p;
}

static void human_bytes(char *buf, size_t n, double bytes)
{
    if (bytes >= 1024.0 * 1024 * 1024)
        snprintf(buf, n, "%.1f GB", bytes / (1024.0 * 1024 * 1024));
    else if (bytes >= 1024.0 * 1024)
        snprintf(buf, n, "%.1f MB", bytes / (1024.0 * 1024));
    else if (bytes >= 1024.0)
        snprintf(buf, n, "%.1f KB", bytes / 1024.0);
    else
        snprintf(buf, n, "%.0f bytes", bytes);
}

static const char *layout_name(int layout)
{
    return layout == KV_BLOOM_CLASSIC ? "classic" : "blocked";
}

/* ---- keys and values ----------------------------------------------------------------- */

/* Key `i` (missing: its absent twin) as key_size decimal digits. */
static inline void make_key(uint8_t *k, size_t size, uint64_t i, int missing)
{
    uint64_t x = 2 * i + (missing ? 1 : 0);
    for (size_t j = size; j-- > 0;) {
        k[j] = (uint8_t)('0' + x % 10);
        x /= 10;
    }
}

/* A permutation of [0, n): a 4-round Feistel network on the smallest even
 * number of bits covering n, walking cycles until it lands below n. */
struct perm {
    uint64_t n, mask;
    unsigned half;
    uint64_t keys[4];
};

static void perm_init(struct perm *p, uint64_t n, uint64_t seed)
{
    unsigned bits = 2;
    while (bits < 62 && ((uint64_t)1 << bits) < n)
        bits += 2;
    p->n = n;
    p->half = bits / 2;
    p->mask = ((uint64_t)1 << p->half) - 1;
    for (int i = 0; i < 4; i++)
        p->keys[i] = splitmix64(seed + 0x51ED270B27ull * (uint64_t)(i + 1));
}

static inline uint64_t perm_at(const struct perm *p, uint64_t i)
{
    uint64_t x = i;
    do {
        uint64_t l = x >> p->half, r = x & p->mask;
        for (int k = 0; k < 4; k++) {
            uint64_t t = l ^ (splitmix64(r ^ p->keys[k]) & p->mask);
            l = r;
            r = t;
        }
        x = (l << p->half) | r;
    } while (x >= p->n);
    return x;
}

/* Values are slices of a pool in which every 100-byte piece is 50 random
 * printable bytes followed by a copy of them, so that blocks compress to
 * about half, as db_bench's values do. */
static int make_pool(struct ctx *c)
{
    size_t len = (size_t)1 << 20;
    if (len < 2 * c->o.value_size)
        len = 2 * c->o.value_size;
    c->pool = malloc(len + 100);
    if (!c->pool)
        return -1;
    uint64_t x = c->o.seed ^ 0xA5A5A5A5u;
    for (size_t off = 0; off < len; off += 100) {
        for (size_t j = 0; j < 50; j++) {
            x = splitmix64(x);
            c->pool[off + j] = (uint8_t)(' ' + x % 95);
        }
        memcpy(c->pool + off + 50, c->pool + off, 50);
    }
    c->pool_len = len;
    return 0;
}

static inline const uint8_t *value_for(const struct ctx *c, uint64_t i)
{
    return c->pool + splitmix64(i) % (c->pool_len - c->o.value_size + 1);
}

/* ---- histogram ------------------------------------------------------------------- */

/* Latencies in ns: values below 16 exactly, then 16 buckets per power of two. */
#define HIST_SUB 16
#define HIST_BUCKETS (HIST_SUB + 60 * HIST_SUB)

struct histogram {
    uint64_t count, min, max;
    uint64_t b[HIST_BUCKETS];
};

static inline unsigned hist_bucket(uint64_t v)
{
    if (v < HIST_SUB)
        return (unsigned)v;
    unsigned e = 63u - (unsigned)__builtin_clzll(v); /* >= 4 */
    return HIST_SUB + (e - 4) * HIST_SUB + (unsigned)((v >> (e - 4)) & (HIST_SUB - 1));
}

static inline void hist_add(struct histogram *h, uint64_t v)
{
    h->b[hist_bucket(v)]++;
    if (h->count++ == 0 || v < h->min)
        h->min = v;
    if (v > h->max)
        h->max = v;
}

static void hist_merge(struct histogram *into, const struct histogram *h)
{
    if (!h->count)
        return;
    if (!into->count || h->min < into->min)
        into->min = h->min;
    if (h->max > into->max)
        into->max = h->max;
    into->count += h->count;
    for (unsigned i = 0; i < HIST_BUCKETS; i++)
        into->b[i] += h->b[i];
}

/* The p-quantile (0..1) in ns, interpolated within its bucket. */
static double hist_quantile(const struct histogram *h, double p)
{
    if (!h->count)
        return 0;
    double rank = p * (double)h->count, cum = 0;
    for (unsigned i = 0; i < HIST_BUCKETS; i++) {
        if (!h->b[i] || cum + (double)h->b[i] < rank) {
            cum += (double)h->b[i];
            continue;
        }
        double low = i, width = 1;
        if (i >= HIST_SUB) {
            unsigned e = (i - HIST_SUB) / HIST_SUB + 4, s = (i - HIST_SUB) % HIST_SUB;
            low = (double)((uint64_t)(HIST_SUB + s) << (e - 4));
            width = (double)((uint64_t)1 << (e - 4));
        }
        double v = low + width * (rank - cum) / (double)h->b[i];
        if (v < (double)h->min)
            v = (double)h->min;
        return v > (double)h->max ? (double)h->max : v;
    }
    return (double)h->max;
}

/* ---- the kv engine --------------------------------------------------------------------- */

static int kv_e_open(const struct bench_config *c, const char *dir, void **out)
{
    kv_options o;
    kv_options_init(&o);
    o.create_if_missing = c->create;
    o.bloom_bits_per_key = c->bloom_bits;
    o.filter_layout = c->filter_layout;
    o.block_cache_size = c->cache_size;
    o.write_buffer_size = c->write_buffer_size;
    o.block_size = c->block_size;
    o.compression = c->compression;
    o.sync = c->sync;
    kv_db *db = NULL;
    int rc = kv_open(dir, &o, &db);
    *out = db;
    return rc;
}

static void kv_e_close(void *db)
{
    int rc = kv_close(db);
    if (rc != KV_OK)
        fprintf(stderr, "kvbench: close: %s\n", kv_strerror(rc));
}

static int kv_e_put(void *db, const void *k, size_t kl, const void *v, size_t vl, int sync)
{
    if (!sync)
        return kv_put(db, k, kl, v, vl);
    kv_batch *b;
    int rc = kv_batch_new(&b);
    if (rc != KV_OK)
        return rc;
    kv_write_options wo = {.sync = 1};
    if ((rc = kv_batch_put(b, k, kl, v, vl)) == KV_OK)
        rc = kv_write_opts(db, &wo, b);
    kv_batch_free(b);
    return rc;
}

static int kv_e_del(void *db, const void *k, size_t kl, int sync)
{
    if (!sync)
        return kv_delete(db, k, kl);
    kv_batch *b;
    int rc = kv_batch_new(&b);
    if (rc != KV_OK)
        return rc;
    kv_write_options wo = {.sync = 1};
    if ((rc = kv_batch_delete(b, k, kl)) == KV_OK)
        rc = kv_write_opts(db, &wo, b);
    kv_batch_free(b);
    return rc;
}

static int kv_e_write(void *db, const struct bench_kv *kvs, size_t n, int sync)
{
    kv_batch *b;
    int rc = kv_batch_new(&b);
    if (rc != KV_OK)
        return rc;
    for (size_t i = 0; rc == KV_OK && i < n; i++)
        rc = kv_batch_put(b, kvs[i].key, kvs[i].klen, kvs[i].val, kvs[i].vlen);
    kv_write_options wo = {.sync = sync};
    if (rc == KV_OK)
        rc = kv_write_opts(db, &wo, b);
    kv_batch_free(b);
    return rc;
}

static int kv_e_get(void *db, const void *k, size_t kl, size_t *vlen)
{
    void *v;
    int rc = kv_get(db, k, kl, &v, vlen);
    if (rc == KV_NOTFOUND)
        return 0;
    if (rc != KV_OK)
        return rc;
    kv_free(v);
    return 1;
}

static int kv_e_compact(void *db)
{
    return kv_compact_range(db, NULL, 0, NULL, 0);
}

static int kv_e_counters(void *db, struct bench_counters *out)
{
    struct kv_stats s;
    int rc = kv_stats(db, &s);
    memset(out, 0, sizeof *out);
    if (rc != KV_OK)
        return rc;
    out->gets = s.gets;
    out->memtable_hits = s.memtable_hits;
    out->tables_probed = s.tables_probed;
    out->filter_negatives = s.filter_negatives;
    out->filter_positives = s.filter_positives;
    out->false_positives = s.filter_false_positives;
    out->data_block_reads = s.data_block_reads;
    out->data_block_read_bytes = s.data_block_read_bytes;
    out->cache_hits = s.block_cache_hits;
    out->cache_misses = s.block_cache_misses;
    out->compactions = s.compactions;
    out->stalls = s.stalls;
    out->slowdowns = s.slowdowns;
    out->stall_micros = s.stall_micros;
    out->flushes = s.flushes;
    out->tables = s.tables;
    out->table_bytes = s.table_bytes;
    out->filter_bytes = s.filter_bytes;
    out->filter_keys = s.filter_keys;
    memcpy(out->level_tables, s.level_tables, sizeof out->level_tables);
    out->write_amplification = s.write_amplification;
    out->have_filter_figures = 1;
    out->have_tables = 1;
    return KV_OK;
}

static int kv_e_tables(void *db, struct bench_table **out, size_t *n)
{
    kv_table_stats *t;
    size_t nt;
    int rc = kv_table_stats_get(db, &t, &nt);
    *out = NULL;
    *n = 0;
    if (rc != KV_OK)
        return rc;
    if (nt) {
        *out = calloc(nt, sizeof **out);
        if (!*out) {
            kv_free(t);
            return KV_ENOMEM;
        }
    }
    for (size_t i = 0; i < nt; i++) {
        (*out)[i].number = t[i].number;
        (*out)[i].absent_probes = t[i].filter_negatives + t[i].filter_false_positives;
        (*out)[i].expected_fpr = t[i].expected_fpr;
        (*out)[i].has_filter = t[i].filter_layout >= 0;
    }
    *n = nt;
    kv_free(t);
    return KV_OK;
}

static int kv_e_iter_new(void *db, void **it)
{
    kv_iter *i = NULL;
    int rc = kv_iter_new(db, NULL, &i);
    *it = i;
    return rc;
}

static void kv_e_seek(void *it, const void *k, size_t kl) { kv_iter_seek(it, k, kl); }
static void kv_e_seek_first(void *it) { kv_iter_seek_first(it); }
static void kv_e_seek_last(void *it) { kv_iter_seek_last(it); }
static void kv_e_next(void *it) { kv_iter_next(it); }
static void kv_e_prev(void *it) { kv_iter_prev(it); }
static int kv_e_valid(void *it) { return kv_iter_valid(it); }
static const void *kv_e_key(void *it, size_t *n) { return kv_iter_key(it, n); }
static const void *kv_e_value(void *it, size_t *n) { return kv_iter_value(it, n); }
static int kv_e_iter_status(void *it) { return kv_iter_status(it); }
static void kv_e_iter_free(void *it) { kv_iter_free(it); }

static const struct bench_engine kv_engine = {
    .name = "kv",
    .open = kv_e_open,
    .close = kv_e_close,
    .put = kv_e_put,
    .del = kv_e_del,
    .write = kv_e_write,
    .get = kv_e_get,
    .compact = kv_e_compact,
    .counters = kv_e_counters,
    .tables = kv_e_tables,
    .iter_new = kv_e_iter_new,
    .iter_seek = kv_e_seek,
    .iter_seek_first = kv_e_seek_first,
    .iter_seek_last = kv_e_seek_last,
    .iter_next = kv_e_next,
    .iter_prev = kv_e_prev,
    .iter_valid = kv_e_valid,
    .iter_key = kv_e_key,
    .iter_value = kv_e_value,
    .iter_status = kv_e_iter_status,
    .iter_free = kv_e_iter_free,
    .errstr = kv_strerror,
};

/* ---- workers ---------------------------------------------------------------------- */

struct run;

struct worker {
    alignas(64) _Atomic uint64_t done; /* ops finished; read by the monitor */
    struct run *run;
    uint64_t from, to;                 /* this thread's ops: [from, to) */
    uint64_t rng;
    uint64_t found;
    void *iter;
    int positioned;                    /* readseq/readreverse: iterator placed */
    struct histogram *hist;
    int rc;
    char err[256];                     /* rc's text, taken on this thread */
    pthread_t tid;
    uint8_t key[MAX_KEY_SIZE];
};

struct run {
    struct ctx *c;
    const struct bench_def *def;
    struct target *t;
    uint64_t ops;
    struct perm perm;
    struct worker *w;
    unsigned nw;
    int sync;             /* writes are synced (--sync, fillsync) */
    double t0;
    /* Workers wait on cv until `go` (or `abort`); the monitor (progress
     * bar, --stats_interval) sleeps on it until `finished`. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned ready;
    int go, abort, finished;
    struct sample *first; /* --stats_interval: the counters at the start */
};

static inline struct ctx *wctx(const struct worker *w)
{
    return w->run->c;
}

static int do_put(struct worker *w, uint64_t idx)
{
    const struct ctx *c = wctx(w);
    make_key(w->key, c->o.key_size, idx, 0);
    int rc = c->e->put(w->run->t->h, w->key, c->o.key_size, value_for(c, idx), c->o.value_size,
                       w->run->sync);
    return rc < 0 ? rc : 0;
}

static int do_get(struct worker *w, uint64_t idx, int missing)
{
    const struct ctx *c = wctx(w);
    make_key(w->key, c->o.key_size, idx, missing);
    size_t vlen;
    int rc = c->e->get(w->run->t->h, w->key, c->o.key_size, &vlen);
    if (rc < 0)
        return rc;
    w->found += (uint64_t)rc;
    return 0;
}

static int op_fillseq(struct worker *w, uint64_t i)
{
    return do_put(w, i);
}

static int op_fillrandom(struct worker *w, uint64_t i)
{
    return do_put(w, perm_at(&w->run->perm, i));
}

static int op_overwrite(struct worker *w, uint64_t i)
{
    (void)i;
    return do_put(w, rng_below(&w->rng, wctx(w)->o.num));
}

static int op_readrandom(struct worker *w, uint64_t i)
{
    (void)i;
    return do_get(w, rng_below(&w->rng, wctx(w)->o.num), 0);
}

static int op_readmissing(struct worker *w, uint64_t i)
{
    (void)i;
    return do_get(w, rng_below(&w->rng, wctx(w)->o.num), 1);
}

static int op_readhot(struct worker *w, uint64_t i)
{
    (void)i;
    uint64_t hot = wctx(w)->o.num / 100;
    return do_get(w, rng_below(&w->rng, hot ? hot : 1), 0);
}

static int op_deleterandom(struct worker *w, uint64_t i)
{
    (void)i;
    const struct ctx *c = wctx(w);
    make_key(w->key, c->o.key_size, rng_below(&w->rng, c->o.num), 0);
    int rc = c->e->del(w->run->t->h, w->key, c->o.key_size, w->run->sync);
    return rc < 0 ? rc : 0;
}

static int op_seekrandom(struct worker *w, uint64_t i)
{
    (void)i;
    const struct ctx *c = wctx(w);
    make_key(w->key, c->o.key_size, rng_below(&w->rng, c->o.num), 0);
    c->e->iter_seek(w->iter, w->key, c->o.key_size);
    size_t kl;
    if (c->e->iter_valid(w->iter)) {
        const void *k = c->e->iter_key(w->iter, &kl);
        w->found += kl == c->o.key_size && memcmp(k, w->key, kl) == 0;
        return 0;
    }
    int rc = c->e->iter_status(w->iter);
    return rc < 0 ? rc : 0;
}

/* readseq and readreverse: one thread walks the whole database; with more,
 * thread t starts at the key its share of the ops would reach. */
static int scan_step(struct worker *w, uint64_t i, int forward)
{
    const struct ctx *c = wctx(w);
    const struct bench_engine *e = c->e;
    if (!w->positioned) {
        w->positioned = 1;
        if (w->run->nw == 1 || i == 0) {
            if (forward)
                e->iter_seek_first(w->iter);
            else
                e->iter_seek_last(w->iter);
        } else {
            uint64_t idx = forward ? i : (i < c->o.num ? c->o.num - 1 - i : 0);
            make_key(w->key, c->o.key_size, idx, 0);
            e->iter_seek(w->iter, w->key, c->o.key_size);
            if (!forward) {
                if (!e->iter_valid(w->iter))
                    e->iter_seek_last(w->iter);
                else {
                    size_t kl;
                    const void *k = e->iter_key(w->iter, &kl);
                    if (kl != c->o.key_size || memcmp(k, w->key, kl) != 0)
                        e->iter_prev(w->iter);
                }
            }
        }
    } else if (forward)
        e->iter_next(w->iter);
    else
        e->iter_prev(w->iter);
    if (!e->iter_valid(w->iter)) {
        int rc = e->iter_status(w->iter);
        return rc < 0 ? rc : 1;
    }
    size_t kl, vl;
    e->iter_key(w->iter, &kl);
    e->iter_value(w->iter, &vl);
    w->found++;
    return 0;
}

static int op_readseq(struct worker *w, uint64_t i)
{
    return scan_step(w, i, 1);
}

static int op_readreverse(struct worker *w, uint64_t i)
{
    return scan_step(w, i, 0);
}

/* compact, stats and nofilter are run by run_special(). */
static const struct bench_def benches[] = {
    {"fillseq", K_WRITE, op_fillseq, 1, 0, "write num keys in key order, into a new database"},
    {"fillrandom", K_WRITE, op_fillrandom, 1, 0,
     "write num keys in random order (each once), into a new database"},
    {"overwrite", K_WRITE, op_overwrite, 0, 0,
     "write num random keys (with repeats) over the database"},
    {"fillsync", K_WRITE, op_fillrandom, 1, 0, "fillrandom of num/1000 keys, each write synced"},
    {"readrandom", K_READ, op_readrandom, 0, 0, "gets random keys that were written"},
    {"readmissing", K_READ, op_readmissing, 0, 0, "gets random keys that are absent (never written)"},
    {"readhot", K_READ, op_readhot, 0, 0, "gets random keys of the first 1% of the key space"},
    {"readseq", K_SCAN, op_readseq, 0, 1, "reads keys in order with an iterator"},
    {"readreverse", K_SCAN, op_readreverse, 0, 1, "reads keys in reverse order with an iterator"},
    {"seekrandom", K_SCAN, op_seekrandom, 0, 1, "seeks an iterator to random keys"},
    {"deleterandom", K_WRITE, op_deleterandom, 0, 0, "delete num random keys (with repeats)"},
    {"compact", K_OTHER, NULL, 0, 0, "compact the whole database"},
    {"stats", K_OTHER, NULL, 0, 0, "print the database's levels, sizes and counters"},
    {"nofilter", K_OTHER, NULL, 0, 0,
     "readmissing on a copy without filters (--bloom_bits=0); what filters saved"},
};

static const struct bench_def *find_bench(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++)
        if (strlen(benches[i].name) == len && !strncmp(benches[i].name, name, len))
            return &benches[i];
    return NULL;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct run *r = w->run;
    pthread_mutex_lock(&r->mu);
    r->ready++;
    pthread_cond_broadcast(&r->cv);
    while (!r->go && !r->abort)
        pthread_cond_wait(&r->cv, &r->mu);
    int abort = r->abort;
    pthread_mutex_unlock(&r->mu);
    if (abort)
        return NULL;
    const int timed = w->hist != NULL;
    for (uint64_t i = w->from; i < w->to; i++) {
        if (stop_requested) {
            w->rc = E_INTERRUPTED;
            break;
        }
        uint64_t t0 = timed ? now_ns() : 0;
        int rc = r->def->op(w, i);
        if (rc != 0) {
            if (rc < 0) { /* an engine's message may live in this thread */
                w->rc = rc;
                snprintf(w->err, sizeof w->err, "%s", r->c->e->errstr(rc));
            }
            break;
        }
        if (timed)
            hist_add(w->hist, now_ns() - t0);
        atomic_store_explicit(&w->done, i - w->from + 1, memory_order_relaxed);
    }
    return NULL;
}

static uint64_t run_done(const struct run *r)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < r->nw; i++)
        n += atomic_load_explicit(&r->w[i].done, memory_order_relaxed);
    return n;
}

/* ---- the monitor: progress bar and --stats_interval -------------------------------- */

static void draw_progress(const struct run *r, double elapsed)
{
    uint64_t done = run_done(r);
    double frac = r->ops ? (double)done / (double)r->ops : 0;
    char bar[31];
    int fill = (int)(frac * 30);
    for (int i = 0; i < 30; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[30] = 0;
    fprintf(stderr, "\r%-12s [%s] %3.0f%% %10.0f ops/sec", r->def->name, bar, 100 * frac,
            elapsed > 0 ? (double)done / elapsed : 0);
    fflush(stderr);
}

/* One row of stats.csv: what happened between two samples. */
struct sample {
    double t;
    uint64_t done;
    struct bench_counters k;
};

static void take_sample(const struct run *r, struct sample *s)
{
    s->t = now_sec();
    s->done = run_done(r);
    if (r->c->e->counters(r->t->h, &s->k) != 0)
        memset(&s->k, 0, sizeof s->k);
}

static double per(uint64_t n, uint64_t d)
{
    return d ? (double)n / (double)d : 0;
}

static void write_sample(const struct run *r, const struct sample *a, const struct sample *b)
{
    double dt = b->t - a->t;
    uint64_t gets = b->k.gets - a->k.gets;
    fprintf(r->c->stats_csv, "%s,%.3f,%.3f,%llu,%.1f,%llu,%.4f,%.6f,%.6f,%llu,%llu\n",
            r->def->name, b->t - r->t0, dt, (unsigned long long)(b->done - a->done),
            dt > 0 ? (double)(b->done - a->done) / dt : 0, (unsigned long long)gets,
            per(b->k.tables_probed - a->k.tables_probed, gets),
            per(b->k.false_positives - a->k.false_positives, gets),
            per(b->k.data_block_reads - a->k.data_block_reads, gets),
            (unsigned long long)(b->k.compactions - a->k.compactions),
            (unsigned long long)(b->k.stalls - a->k.stalls));
    fflush(r->c->stats_csv);
}

static void *monitor_main(void *arg)
{
    struct run *r = arg;
    const struct ctx *c = r->c;
    double interval = c->o.stats_interval;
    double tick = c->progress ? 0.25 : interval;
    if (interval > 0 && interval < tick)
        tick = interval;
    struct sample last = {0}, cur;
    if (r->first)
        last = *r->first;
    last.t = r->t0;
    double next_sample = r->t0 + interval;
    pthread_mutex_lock(&r->mu);
    while (!r->finished) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        double until = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 + tick;
        ts.tv_sec = (time_t)until;
        ts.tv_nsec = (long)((until - (double)ts.tv_sec) * 1e9);
        pthread_cond_timedwait(&r->cv, &r->mu, &ts);
        if (r->finished)
            break;
        pthread_mutex_unlock(&r->mu);
        double now = now_sec();
        if (c->progress)
            draw_progress(r, now - r->t0);
        if (c->stats_csv && now >= next_sample) {
            take_sample(r, &cur);
            write_sample(r, &last, &cur);
            last = cur;
            next_sample += interval;
        }
        pthread_mutex_lock(&r->mu);
    }
    pthread_mutex_unlock(&r->mu);
    if (c->stats_csv) { /* the last, partial interval */
        take_sample(r, &cur);
        write_sample(r, &last, &cur);
    }
    if (c->progress)
        fprintf(stderr, "\r%*s\r", 70, "");
    return NULL;
}

/* ---- one benchmark --------------------------------------------------------------------- */

static uint64_t bench_ops(const struct ctx *c, const struct bench_def *d)
{
    if (!strcmp(d->name, "fillsync"))
        return c->o.num / 1000 ? c->o.num / 1000 : 1;
    if (d->kind == K_WRITE)
        return c->o.num;
    return c->o.reads ? c->o.reads : c->o.num;
}

/* posix_fadvise(DONTNEED) on every file of the database: the next reads go
 * to the disk (kv's own block cache is not touched: see --cache_size). */
static int drop_cache(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "kvbench: --drop_cache: %s: %s\n", dir, strerror(errno));
        return -1;
    }
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char *p = dup_printf("%s/%s", dir, de->d_name);
        if (!p) {
            rc = -1;
            break;
        }
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
            fdatasync(fd); /* dirty pages cannot be dropped */
            int e = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
            if (e != 0) {
                fprintf(stderr, "kvbench: --drop_cache: %s: %s\n", p, strerror(e));
                rc = -1;
            }
        } else if (fd < 0 && errno != ENOENT) { /* ENOENT: removed by a compaction */
            fprintf(stderr, "kvbench: --drop_cache: %s: %s\n", p, strerror(errno));
            rc = -1;
        }
        if (fd >= 0)
            close(fd);
        free(p);
    }
    closedir(d);
    return rc;
}

static int find_table(const struct bench_table *t, size_t n, uint64_t number)
{
    for (size_t i = 0; i < n; i++)
        if (t[i].number == number)
            return (int)i;
    return -1;
}

/* The figures of a read run from counter deltas and table snapshots (the
 * expected FPR from the engine's formula when it has no table figures). */
static void read_figures(const struct bench_engine *e, struct result *res,
                         const struct bench_table *t0, size_t n0, const struct bench_table *t1,
                         size_t n1)
{
    const struct bench_counters *d = &res->delta;
    uint64_t g = d->gets;
    res->gets = g;
    res->probed = per(d->tables_probed, g);
    res->negatives = per(d->filter_negatives, g);
    res->false_pos = per(d->false_positives, g);
    res->block_reads = per(d->data_block_reads, g);
    res->bytes_read = per(d->data_block_read_bytes, g);
    res->cache_hits = per(d->cache_hits, g);
    res->cache_hit_ratio = per(d->cache_hits, d->cache_hits + d->cache_misses);
    uint64_t answered = d->filter_negatives + d->false_positives;
    /* Probes of tables without a filter that found nothing: each passes. */
    uint64_t from_tables = res->found > d->memtable_hits ? res->found - d->memtable_hits : 0;
    uint64_t unfiltered = d->tables_probed - d->filter_negatives - d->filter_positives;
    int no_filters = d->filter_negatives + d->filter_positives == 0 && unfiltered > from_tables;
    res->measured_fpr = answered ? (double)d->false_positives / (double)answered : no_filters;
    res->fpr_probes = answered ? answered : no_filters ? unfiltered - from_tables : 0;

    double wsum = 0, w = 0;
    res->fpr_tables = 0;
    for (size_t i = 0; i < n1; i++) {
        if (!t1[i].has_filter)
            continue;
        int j = find_table(t0, n0, t1[i].number);
        uint64_t before = j >= 0 ? t0[j].absent_probes : 0;
        uint64_t probes = t1[i].absent_probes - before;
        if (!probes)
            continue;
        wsum += (double)probes * t1[i].expected_fpr;
        w += (double)probes;
        res->fpr_tables++;
    }
    res->expected_fpr = w > 0 ? wsum / w : no_filters;
    if (!e->tables && e->expected_fpr && answered)
        res->expected_fpr = e->expected_fpr(res->bloom_bits);
    if (!e->tables && res->bloom_bits == 0) { /* peers without filters: all pass */
        res->measured_fpr = res->expected_fpr = 1;
        res->fpr_probes = g > res->found ? g - res->found : 0;
    }
}

static void counters_delta(struct bench_counters *d, const struct bench_counters *a,
                           const struct bench_counters *b)
{
    *d = *b;
#define DELTA(f) d->f = b->f - a->f
    DELTA(gets);
    DELTA(memtable_hits);
    DELTA(tables_probed);
    DELTA(filter_negatives);
    DELTA(filter_positives);
    DELTA(false_positives);
    DELTA(data_block_reads);
    DELTA(data_block_read_bytes);
    DELTA(cache_hits);
    DELTA(cache_misses);
    DELTA(compactions);
    DELTA(stalls);
    DELTA(slowdowns);
    DELTA(stall_micros);
    DELTA(flushes);
    DELTA(rocksdb_useful);
    DELTA(rocksdb_full_positive);
    DELTA(rocksdb_full_true_positive);
#undef DELTA
}

/* Prints an engine's error code (once) and returns E_FAIL; E_FAIL and
 * E_INTERRUPTED pass through. */
static int engine_fail(const struct ctx *c, const char *what, const char *where, int rc)
{
    if (rc == E_INTERRUPTED || rc == E_FAIL)
        return rc;
    fprintf(stderr, "kvbench: %s: %s: %s\n", what, where, c->e->errstr(rc));
    return E_FAIL;
}

/* Sets up each worker's share of the ops, its random stream, histogram
 * and iterator. */
static int init_workers(struct run *r)
{
    struct ctx *c = r->c;
    uint64_t seed = c->o.seed ^ hash_name(r->def->name);
    for (unsigned i = 0; i < r->nw; i++) {
        struct worker *w = &r->w[i];
        w->run = r;
        w->from = r->ops * i / r->nw;
        w->to = r->ops * (i + 1) / r->nw;
        w->rng = splitmix64(seed + i);
        if (c->o.histogram && !(w->hist = calloc(1, sizeof *w->hist)))
            return KV_ENOMEM;
        if (r->def->iter) {
            int rc = c->e->iter_new(r->t->h, &w->iter);
            if (rc != 0) {
                w->iter = NULL;
                return rc;
            }
        }
    }
    return 0;
}

/* Adds up the workers' counts and latencies and frees what they hold. */
static int collect_workers(struct run *r, struct result *res)
{
    struct histogram all = {0};
    int rc = 0;
    for (unsigned i = 0; i < r->nw; i++) {
        struct worker *w = &r->w[i];
        res->ops += atomic_load(&w->done);
        res->found += w->found;
        if (w->hist)
            hist_merge(&all, w->hist);
        if (w->iter)
            r->c->e->iter_free(w->iter);
        free(w->hist);
        if (rc == 0 && w->rc < 0) {
            fprintf(stderr, "kvbench: %s: %s\n", r->def->name, w->err);
            rc = E_FAIL;
        } else if (rc == 0 && w->rc != 0)
            rc = w->rc;
    }
    if (r->c->o.histogram) {
        res->has_hist = 1;
        res->p50 = hist_quantile(&all, 0.50) / 1e3;
        res->p95 = hist_quantile(&all, 0.95) / 1e3;
        res->p99 = hist_quantile(&all, 0.99) / 1e3;
        res->p999 = hist_quantile(&all, 0.999) / 1e3;
        res->pmax = (double)all.max / 1e3;
    }
    return rc;
}

/* Runs the workers: they start together once all are ready, and the clock
 * runs from that moment to the last join. */
static int run_workers(struct run *r, struct result *res)
{
    struct ctx *c = r->c;
    r->nw = c->o.threads < r->ops ? c->o.threads : (unsigned)r->ops;
    r->w = calloc(r->nw, sizeof *r->w);
    if (!r->w || pthread_mutex_init(&r->mu, NULL) != 0) {
        free(r->w);
        fprintf(stderr, "kvbench: out of memory\n");
        return E_FAIL;
    }
    pthread_condattr_t ca; /* the monitor's deadlines are CLOCK_MONOTONIC */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r->cv, &ca);
    pthread_condattr_destroy(&ca);
    int rc = init_workers(r);
    unsigned started = 0;
    for (; rc == 0 && started < r->nw; started++)
        if (pthread_create(&r->w[started].tid, NULL, worker_main, &r->w[started]) != 0) {
            fprintf(stderr, "kvbench: cannot start %u threads\n", r->nw);
            rc = E_FAIL;
            break;
        }
    struct sample first;
    pthread_mutex_lock(&r->mu);
    while (rc == 0 && r->ready < started)
        pthread_cond_wait(&r->cv, &r->mu);
    if (rc == 0 && c->stats_csv) {
        take_sample(r, &first);
        r->first = &first;
    }
    r->t0 = now_sec();
    r->go = rc == 0;
    r->abort = rc != 0;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_t mon;
    int monitor = rc == 0 && (c->progress || c->stats_csv) &&
                  pthread_create(&mon, NULL, monitor_main, r) == 0;
    for (unsigned i = 0; i < started; i++)
        pthread_join(r->w[i].tid, NULL);
    res->seconds = now_sec() - r->t0;
    pthread_mutex_lock(&r->mu);
    r->finished = 1;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    if (monitor)
        pthread_join(mon, NULL);
    int wrc = collect_workers(r, res);
    if (rc == 0)
        rc = wrc;
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    free(r->w);
    r->w = NULL;
    return rc;
}

static const struct bench_def *bench_named(const char *name)
{
    return find_bench(name, strlen(name));
}

/* Runs a worker benchmark against t and fills *res. */
static int run_bench(struct ctx *c, const struct bench_def *d, struct target *t,
                     struct result *res)
{
    memset(res, 0, sizeof *res);
    res->name = d->name;
    res->bloom_bits = t->cfg.bloom_bits;
    res->layout = t->cfg.filter_layout;
    if ((d->kind == K_READ || d->kind == K_SCAN) && c->o.drop_cache && drop_cache(t->path) != 0)
        return E_FAIL;
    struct run r = {.c = c, .def = d, .t = t, .ops = bench_ops(c, d),
                    .sync = t->cfg.sync || !strcmp(d->name, "fillsync")};
    perm_init(&r.perm, c->o.num, c->o.seed ^ hash_name(d->name));
    struct bench_counters k0;
    struct bench_table *t0 = NULL, *t1 = NULL;
    size_t n0 = 0, n1 = 0;
    int want_tables = d->kind == K_READ && c->e->tables;
    int rc = c->e->counters(t->h, &k0);
    if (rc == 0 && want_tables)
        rc = c->e->tables(t->h, &t0, &n0);
    if (rc == 0)
        rc = run_workers(&r, res);
    if (rc == 0)
        rc = c->e->counters(t->h, &res->after);
    if (rc == 0 && want_tables)
        rc = c->e->tables(t->h, &t1, &n1);
    if (rc == 0) {
        counters_delta(&res->delta, &k0, &res->after);
        if (d->kind == K_READ)
            read_figures(c->e, res, t0, n0, t1, n1);
    }
    free(t0);
    free(t1);
    return rc == 0 ? 0 : engine_fail(c, d->name, d->kind == K_WRITE ? "write" : "read", rc);
}

/* ---- reporting ----------------------------------------------------------------------- */

static void json_double(const char *name, double v)
{
    if (!isfinite(v))
        v = 0;
    printf(",\"%s\":%.6g", name, v);
}

static void json_u64(const char *name, uint64_t v)
{
    printf(",\"%s\":%llu", name, (unsigned long long)v);
}

static void report_json(const struct ctx *c, const struct result *r, int stats)
{
    double mpo = r->ops ? r->seconds * 1e6 / (double)r->ops : 0;
    double ops_s = r->seconds > 0 ? (double)r->ops / r->seconds : 0;
    printf("{\"benchmark\":\"%s\",\"engine\":\"%s\"", r->name, c->e->name);
    json_u64("ops", r->ops);
    json_double("seconds", r->seconds);
    json_double("micros_per_op", mpo);
    json_double("ops_per_sec", ops_s);
    json_u64("found", r->found);
    json_u64("gets", r->gets);
    json_double("tables_probed_per_get", r->probed);
    json_double("filter_negatives_per_get", r->negatives);
    json_double("false_positives_per_get", r->false_pos);
    json_double("data_block_reads_per_get", r->block_reads);
    json_double("blocks_sought_per_get", r->block_reads + r->cache_hits);
    json_double("bytes_read_per_get", r->bytes_read);
    json_double("cache_hit_ratio", r->cache_hit_ratio);
    json_double("measured_fpr", r->measured_fpr);
    json_double("expected_fpr", r->expected_fpr);
    json_double("bloom_bits", r->bloom_bits);
    printf(",\"filter_layout\":\"%s\"", layout_name(r->layout));
    json_u64("threads", c->o.threads);
    json_u64("num", c->o.num);
    json_u64("key_size", c->o.key_size);
    json_u64("value_size", c->o.value_size);
    json_u64("cache_size", c->o.cache_size);
    printf(",\"compression\":\"%s\"", c->o.compression == KV_COMPRESSION_ZSTD ? "zstd" : "none");
    if (r->has_hist) {
        json_double("p50_us", r->p50);
        json_double("p95_us", r->p95);
        json_double("p99_us", r->p99);
        json_double("p999_us", r->p999);
        json_double("max_us", r->pmax);
    }
    if (r->after.have_rocksdb) {
        json_u64("rocksdb_bloom_filter_useful", r->delta.rocksdb_useful);
        json_u64("rocksdb_bloom_filter_full_positive", r->delta.rocksdb_full_positive);
        json_u64("rocksdb_bloom_filter_full_true_positive", r->delta.rocksdb_full_true_positive);
    }
    if (stats) {
        const struct bench_counters *k = &r->after;
        json_u64("tables", k->tables);
        json_u64("table_bytes", k->table_bytes);
        json_u64("filter_bytes", k->filter_bytes);
        json_double("filter_bits_per_key",
                    k->filter_keys ? 8.0 * (double)k->filter_bytes / (double)k->filter_keys : 0);
        json_double("write_amplification", k->write_amplification);
        json_u64("compactions", k->compactions);
        json_u64("stalls", k->stalls);
    }
    printf("}\n");
    fflush(stdout);
}

/* Measured beside expected FPR, and what they rest on. */
static void print_fpr(FILE *f, const struct result *r)
{
    if (!r->fpr_probes) {
        fprintf(f, "    FPR      : (no probe was for an absent key)\n");
        return;
    }
    fprintf(f, "    FPR      : measured %.3f%%, expected %.3f%%", 100 * r->measured_fpr,
            100 * r->expected_fpr);
    if (r->fpr_tables)
        fprintf(f, " (weighted by each table's absent-key probes, %zu tables)", r->fpr_tables);
    else if (r->bloom_bits == 0)
        fprintf(f, " (no filters: every probe reads a block)");
    fprintf(f, "\n");
}

/* db_bench's result line (RocksDB's form), then the filter-gated figures. */
static void report_text(const struct ctx *c, const struct result *r, const struct bench_def *d)
{
    FILE *f = c->text;
    double mpo = r->ops ? r->seconds * 1e6 / (double)r->ops : 0;
    long ops_s = r->seconds > 0 ? (long)((double)r->ops / r->seconds) : 0;
    fprintf(f, "%-12s : %11.3f micros/op %ld ops/sec %.3f seconds %lu operations;", r->name, mpo,
            ops_s, r->seconds, (unsigned long)r->ops);
    if (d->kind == K_READ || d->kind == K_SCAN)
        fprintf(f, " (%llu of %llu found)", (unsigned long long)r->found,
                (unsigned long long)r->ops);
    fprintf(f, "\n");
    if (d->kind == K_READ && !r->after.have_filter_figures)
        fprintf(f, "    per get  : (the %s engine counts no filter statistics)\n", c->e->name);
    if (d->kind == K_READ && r->gets && r->after.have_filter_figures) {
        fprintf(f, "    per get  : %.4f tables probed, %.4f filter negatives, "
                   "%.4f false positives\n", r->probed, r->negatives, r->false_pos);
        fprintf(f, "               %.4f data-block reads", r->block_reads);
        if (r->after.have_tables) /* kv counts the bytes too */
            fprintf(f, " (%.1f bytes read)", r->bytes_read);
        fprintf(f, ", block cache hit ratio %.3f\n", r->cache_hit_ratio);
        print_fpr(f, r);
    }
    if (r->after.have_rocksdb && d->kind == K_READ)
        fprintf(f, "    rocksdb  : bloom.filter.useful %llu, full.positive %llu, "
                   "full.true.positive %llu\n",
                (unsigned long long)r->delta.rocksdb_useful,
                (unsigned long long)r->delta.rocksdb_full_positive,
                (unsigned long long)r->delta.rocksdb_full_true_positive);
    if (r->has_hist)
        fprintf(f, "    latency  : p50 %.2f, p95 %.2f, p99 %.2f, p99.9 %.2f, max %.2f micros\n",
                r->p50, r->p95, r->p99, r->p999, r->pmax);
    fflush(f);
}

static void report(const struct ctx *c, const struct result *r, const struct bench_def *d)
{
    report_text(c, r, d);
    if (c->o.json)
        report_json(c, r, 0);
}

/* ---- databases ------------------------------------------------------------------------ */

/* Whether a file name is one an engine (kv, LevelDB, RocksDB) writes. */
static int engine_file(const char *n)
{
    static const char *exact[] = {"LOCK", "CURRENT", "IDENTITY", "LOG", "MANIFEST",
                                  "MANIFEST-lock"};
    static const char *prefix[] = {"MANIFEST-", "LOG.old", "OPTIONS-"};
    static const char *suffix[] = {".sst", ".sst.tmp", ".log", ".ldb", ".dbtmp"};
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
        if (!strcmp(n, exact[i]))
            return 1;
    for (size_t i = 0; i < sizeof prefix / sizeof prefix[0]; i++)
        if (!strncmp(n, prefix[i], strlen(prefix[i])))
            return 1;
    size_t len = strlen(n);
    for (size_t i = 0; i < sizeof suffix / sizeof suffix[0]; i++) {
        size_t sl = strlen(suffix[i]);
        if (len > sl && !strcmp(n + len - sl, suffix[i]))
            return 1;
    }
    return 0;
}

/* Removes a database's files (and nothing else) from dir, then dir itself
 * when that leaves it empty and `rmdir_too`. A missing dir is fine. */
static int destroy_db(const char *dir, int rmdir_too)
{
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : -1;
    int rc = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!engine_file(de->d_name))
            continue;
        char *p = dup_printf("%s/%s", dir, de->d_name);
        if (!p || (unlink(p) != 0 && errno != ENOENT)) {
            fprintf(stderr, "kvbench: cannot remove %s: %s\n", p ? p : de->d_name,
                    strerror(errno));
            rc = -1;
        }
        free(p);
    }
    closedir(d);
    if (rc == 0 && rmdir_too)
        rmdir(dir); /* fails, harmlessly, when other files remain */
    return rc;
}

static int open_target(struct ctx *c, struct target *t)
{
    if (t->h)
        return 0;
    int rc = c->e->open(&t->cfg, t->path, &t->h);
    if (rc != 0) {
        t->h = NULL;
        fprintf(stderr, "kvbench: open %s: %s\n", t->path, c->e->errstr(rc));
        return -1;
    }
    return 0;
}

static void close_target(const struct ctx *c, struct target *t)
{
    if (t->h)
        c->e->close(t->h);
    t->h = NULL;
}

/* A fresh, empty database at t->path. */
static int reset_target(struct ctx *c, struct target *t)
{
    close_target(c, t);
    if (destroy_db(t->path, 0) != 0)
        return -1;
    return open_target(c, t);
}

/* ---- benchmarks that are not worker loops ----------------------------------------------- */

static int bench_compact(struct ctx *c, struct target *t, struct result *res)
{
    memset(res, 0, sizeof *res);
    res->name = "compact";
    res->bloom_bits = t->cfg.bloom_bits;
    res->layout = t->cfg.filter_layout;
    struct bench_counters k0;
    int rc = c->e->counters(t->h, &k0);
    double t0 = now_sec();
    if (rc == 0)
        rc = c->e->compact(t->h);
    res->seconds = now_sec() - t0;
    res->ops = 1;
    if (rc == 0)
        rc = c->e->counters(t->h, &res->after);
    if (rc != 0)
        return engine_fail(c, "compact", t->path, rc);
    counters_delta(&res->delta, &k0, &res->after);
    return 0;
}

static void print_stats(const struct ctx *c, const struct result *r)
{
    FILE *f = c->text;
    const struct bench_counters *k = &r->after;
    char size[32], fsize[32];
    if (!k->have_tables) {
        fprintf(f, "stats        : (the %s engine reports no table statistics)\n", c->e->name);
        return;
    }
    human_bytes(size, sizeof size, (double)k->table_bytes);
    human_bytes(fsize, sizeof fsize, (double)k->filter_bytes);
    fprintf(f, "stats        : %llu tables (", (unsigned long long)k->tables);
    int first = 1;
    for (int l = 0; l < 7; l++)
        if (k->level_tables[l] || l == 0) {
            fprintf(f, "%sL%d %llu", first ? "" : ", ", l, (unsigned long long)k->level_tables[l]);
            first = 0;
        }
    fprintf(f, "), %s on disk; filters %s for %llu keys (%.2f bits/key)\n", size, fsize,
            (unsigned long long)k->filter_keys,
            k->filter_keys ? 8.0 * (double)k->filter_bytes / (double)k->filter_keys : 0.0);
    fprintf(f, "               %llu flushes, %llu compactions, write amplification %.2f, "
               "%llu stalls, %llu 1-ms slowdowns (%.1f ms waiting)\n",
            (unsigned long long)k->flushes, (unsigned long long)k->compactions,
            k->write_amplification, (unsigned long long)k->stalls,
            (unsigned long long)k->slowdowns, (double)k->stall_micros / 1e3);
    fflush(f);
}

static int bench_stats(struct ctx *c, struct target *t)
{
    struct result r = {.name = "stats", .bloom_bits = t->cfg.bloom_bits,
                       .layout = t->cfg.filter_layout};
    int rc = c->e->counters(t->h, &r.after);
    if (rc != 0)
        return engine_fail(c, "stats", t->path, rc);
    print_stats(c, &r);
    if (c->o.json)
        report_json(c, &r, 1);
    return 0;
}

/* Copies every entry of `from` into `to` in batches. */
static int copy_db(struct ctx *c, struct target *from, struct target *to, uint64_t *copied)
{
    const struct bench_engine *e = c->e;
    size_t unit = c->o.key_size + c->o.value_size + 64, cap = unit * COPY_BATCH;
    uint8_t *buf = malloc(cap);
    struct bench_kv *kvs = malloc(COPY_BATCH * sizeof *kvs);
    void *it = NULL;
    int rc = buf && kvs ? e->iter_new(from->h, &it) : KV_ENOMEM;
    *copied = 0;
    if (rc == 0)
        e->iter_seek_first(it);
    while (rc == 0 && e->iter_valid(it)) {
        size_t n = 0, used = 0;
        while (n < COPY_BATCH && e->iter_valid(it)) {
            size_t kl, vl;
            const void *k = e->iter_key(it, &kl), *v = e->iter_value(it, &vl);
            if (used + kl + vl > cap) {
                if (n == 0) { /* larger than a whole batch: written on its own */
                    struct bench_kv one = {k, v, kl, vl};
                    rc = e->write(to->h, &one, 1, 0);
                    ++*copied;
                    e->iter_next(it);
                }
                break;
            }
            memcpy(buf + used, k, kl);
            memcpy(buf + used + kl, v, vl);
            kvs[n++] = (struct bench_kv){buf + used, buf + used + kl, kl, vl};
            used += kl + vl;
            e->iter_next(it);
        }
        if (rc == 0 && n) {
            rc = e->write(to->h, kvs, n, 0);
            *copied += n;
        }
        if (rc == 0 && stop_requested)
            rc = E_INTERRUPTED;
    }
    if (rc == 0 && it)
        rc = e->iter_status(it);
    if (it)
        e->iter_free(it);
    free(buf);
    free(kvs);
    return rc;
}

static void print_summary(const struct ctx *c, const struct result *with,
                          const struct result *without)
{
    FILE *f = c->text;
    double mw = with->ops ? with->seconds * 1e6 / (double)with->ops : 0;
    double mo = without->ops ? without->seconds * 1e6 / (double)without->ops : 0;
    char fmem[32];
    human_bytes(fmem, sizeof fmem, (double)with->after.filter_bytes);
    fprintf(f, "------------------------------------------------\n");
    fprintf(f, "What the filters saved, per missing-key get (readmissing, %llu gets each):\n",
            (unsigned long long)with->ops);
    char label[64];
    if (c->e == &kv_engine)
        snprintf(label, sizeof label, "%g bits/key (%s)", with->bloom_bits,
                 layout_name(with->layout));
    else
        snprintf(label, sizeof label, "%g bits/key", with->bloom_bits);
    if (!with->after.have_filter_figures) { /* LevelDB: time alone */
        fprintf(f, "  %-24s %10s\n", "", "micros");
        fprintf(f, "  %-24s %10.3f\n", label, mw);
        fprintf(f, "  %-24s %10.3f\n", "filters off", mo);
        fprintf(f, "  %-24s %10.3f", "saved by the filters", mo - mw);
        if (mw > 0)
            fprintf(f, "  (%.1fx faster)", mo / mw);
        fprintf(f, "\n");
        fflush(f);
        return;
    }
    double sw = with->block_reads + with->cache_hits;
    double so = without->block_reads + without->cache_hits;
    fprintf(f, "  %-22s %14s %17s %10s\n", "", "blocks sought", "data-block reads", "micros");
    fprintf(f, "  %-22s %14.4f %17.4f %10.3f\n", label, sw, with->block_reads, mw);
    fprintf(f, "  %-22s %14.4f %17.4f %10.3f\n", "filters off", so, without->block_reads, mo);
    fprintf(f, "  %-22s %14.4f %17.4f %10.3f", "saved by the filters", so - sw,
            without->block_reads - with->block_reads, mo - mw);
    if (mw > 0)
        fprintf(f, "  (%.1fx faster)", mo / mw);
    fprintf(f, "\n");
    if (with->after.filter_keys)
        fprintf(f, "  filters cost %s of memory for %llu keys (%.2f bits/key)\n", fmem,
                (unsigned long long)with->after.filter_keys,
                8.0 * (double)with->after.filter_bytes / (double)with->after.filter_keys);
    fflush(f);
}

/* A second database with the same data and no filters: readmissing there,
 * then the comparison with the latest readmissing on the main database. */
static int bench_nofilter(struct ctx *c)
{
    if (c->main.cfg.bloom_bits == 0) {
        fprintf(c->text, "nofilter     : skipped: filters are already off (--bloom_bits=0)\n");
        return 0;
    }
    struct target t2 = {.cfg = c->main.cfg};
    t2.cfg.bloom_bits = 0;
    t2.cfg.create = 1;
    t2.path = dup_printf("%s%s", c->main.path, ".nofilter");
    if (!t2.path) {
        fprintf(stderr, "kvbench: out of memory\n");
        return -1;
    }
    uint64_t copied = 0;
    double t0 = now_sec();
    int rc = destroy_db(t2.path, 0);
    if (rc == 0)
        rc = open_target(c, &t2);
    if (rc == 0 && (rc = copy_db(c, &c->main, &t2, &copied)) != 0)
        rc = engine_fail(c, "nofilter", "copy", rc);
    if (rc == 0 && (rc = c->e->compact(t2.h)) != 0)
        rc = engine_fail(c, "nofilter", "compact", rc);
    if (rc == 0) {
        fprintf(c->text,
                "nofilter     : a second database with the same %llu keys and filters off "
                "(--bloom_bits=0), written and compacted in %.1f seconds\n",
                (unsigned long long)copied, now_sec() - t0);
        struct result r;
        rc = run_bench(c, bench_named("readmissing"), &t2, &r);
        if (rc == 0) {
            report(c, &r, bench_named("readmissing"));
            if (c->have_last_missing)
                print_summary(c, &c->last_missing, &r);
            else
                fprintf(c->text, "nofilter     : (run readmissing before nofilter to see "
                                 "what the filters saved)\n");
        }
    }
    close_target(c, &t2);
    if (destroy_db(t2.path, 1) != 0 && rc == 0)
        rc = -1;
    free(t2.path);
    return rc;
}

/* ---- the benchmark list ------------------------------------------------------------------ */

static int run_one(struct ctx *c, const struct bench_def *d)
{
    if (d->fresh && c->o.use_existing_db) {
        fprintf(c->text, "%-12s : skipped (--use_existing_db is set)\n", d->name);
        return 0;
    }
    int rc = d->fresh ? reset_target(c, &c->main) : open_target(c, &c->main);
    if (rc != 0)
        return rc;
    if (!strcmp(d->name, "stats"))
        return bench_stats(c, &c->main);
    if (!strcmp(d->name, "nofilter"))
        return bench_nofilter(c);
    struct result r;
    if (!strcmp(d->name, "compact"))
        rc = bench_compact(c, &c->main, &r);
    else
        rc = run_bench(c, d, &c->main, &r);
    if (rc != 0)
        return rc;
    report(c, &r, d);
    if (!strcmp(d->name, "readmissing") && r.bloom_bits > 0) {
        c->last_missing = r;
        c->have_last_missing = 1;
    }
    return 0;
}

static int run_benchmarks(struct ctx *c)
{
    const char *p = c->o.benchmarks;
    int rc = 0;
    while (rc == 0 && *p) {
        size_t len = strcspn(p, ",");
        if (len) {
            rc = run_one(c, find_bench(p, len)); /* names were checked when parsed */
            if (stop_requested)
                rc = E_INTERRUPTED;
        }
        p += len + (p[len] == ',');
    }
    return rc;
}

/* ---- the sweep: every bits/key in both layouts, as CSV and SVG ---------------------- */

struct sweep_row {
    int layout;
    double bits;
    uint64_t filter_bytes, filter_keys;
    struct result missing, random;
    double build_seconds;
};

static const char *const sweep_header =
    "layout,bloom_bits,filter_bytes,filter_bytes_per_key,measured_fpr,expected_fpr,"
    "missing_micros_per_get,missing_data_block_reads_per_get,missing_tables_probed_per_get,"
    "random_micros_per_get,random_data_block_reads_per_get,random_found,reads,build_seconds";

static double micros_per_op(const struct result *r)
{
    return r->ops ? r->seconds * 1e6 / (double)r->ops : 0;
}

static double bytes_per_key(const struct sweep_row *s)
{
    return s->filter_keys ? (double)s->filter_bytes / (double)s->filter_keys : 0;
}

static int write_sweep_csv(const char *path, const struct sweep_row *rows, size_t n)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "%s\n", sweep_header);
    for (size_t i = 0; i < n; i++) {
        const struct sweep_row *s = &rows[i];
        fprintf(f, "%s,%g,%llu,%.4f,%.6g,%.6g,%.4f,%.6f,%.4f,%.4f,%.6f,%llu,%llu,%.3f\n",
                layout_name(s->layout), s->bits, (unsigned long long)s->filter_bytes,
                bytes_per_key(s), s->missing.measured_fpr, s->missing.expected_fpr,
                micros_per_op(&s->missing), s->missing.block_reads, s->missing.probed,
                micros_per_op(&s->random), s->random.block_reads,
                (unsigned long long)s->random.found, (unsigned long long)s->missing.ops,
                s->build_seconds);
    }
    return fclose(f) == 0 ? 0 : -1;
}

/* SVG text with &, <, >, " and ' escaped. */
static void svg_escape(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        default: fputc(*s, f);
        }
    }
}

static void svg_text(FILE *f, double x, double y, const char *anchor, const char *extra,
                     const char *text)
{
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\"%s>", x, y, anchor, extra);
    svg_escape(f, text);
    fputs("</text>\n", f);
}

/* One chart panel: plot area, x range (bits/key), y range, linear or log. */
struct panel {
    double x, y, w, h;
    double xmin, xmax, ymin, ymax;
    int log;
    const char *title, *ylabel;
};

static double px(const struct panel *p, double v)
{
    return p->x + (v - p->xmin) / (p->xmax - p->xmin) * p->w;
}

static double py(const struct panel *p, double v)
{
    double f = p->log ? (log10(v) - log10(p->ymin)) / (log10(p->ymax) - log10(p->ymin))
                      : (v - p->ymin) / (p->ymax - p->ymin);
    return p->y + p->h - f * p->h;
}

/* A "nice" step (1, 2 or 5 times a power of ten) for about five ticks. */
static double nice_step(double span)
{
    double raw = span / 5, mag = pow(10, floor(log10(raw)));
    double n = raw / mag;
    return (n <= 1 ? 1 : n <= 2 ? 2 : n <= 5 ? 5 : 10) * mag;
}

static void panel_range(struct panel *p, const double *v, size_t n)
{
    double lo = INFINITY, hi = 0;
    for (size_t i = 0; i < n; i++) {
        if (p->log && !(v[i] > 0))
            continue;
        if (v[i] < lo)
            lo = v[i];
        if (v[i] > hi)
            hi = v[i];
    }
    if (p->log) {
        if (!(hi > 0)) {
            lo = 1e-4;
            hi = 1;
        }
        p->ymin = pow(10, floor(log10(lo)));
        p->ymax = pow(10, ceil(log10(hi)));
        if (p->ymax <= p->ymin)
            p->ymax = p->ymin * 10;
    } else {
        p->ymin = 0;
        double step = nice_step(hi > 0 ? hi : 1);
        p->ymax = ceil((hi > 0 ? hi : 1) / step) * step;
        if (p->ymax < hi * 1.02)
            p->ymax += step;
    }
}

static void draw_panel(FILE *f, const struct panel *p, const double *xs, size_t nx)
{
    char buf[64];
    fprintf(f, "<g class=\"panel\">\n");
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#fff\" "
               "stroke=\"#444\"/>\n", p->x, p->y, p->w, p->h);
    svg_text(f, p->x + p->w / 2, p->y - 10, "middle", " font-weight=\"bold\"", p->title);
    /* y grid and labels */
    if (p->log) {
        for (double v = p->ymin; v <= p->ymax * 1.0001; v *= 10) {
            double y = py(p, v);
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
                    p->x, y, p->x + p->w, y);
            int e = (int)lround(log10(v));
            if (e < -3)
                snprintf(buf, sizeof buf, "1e%d", e);
            else
                snprintf(buf, sizeof buf, "%g", v);
            svg_text(f, p->x - 6, y + 4, "end", "", buf);
        }
    } else {
        double step = nice_step(p->ymax - p->ymin);
        for (double v = p->ymin; v <= p->ymax + step / 1000; v += step) {
            double y = py(p, v);
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
                    p->x, y, p->x + p->w, y);
            snprintf(buf, sizeof buf, "%g", fabs(v) < step / 1000 ? 0.0 : v);
            svg_text(f, p->x - 6, y + 4, "end", "", buf);
        }
    }
    /* x ticks at every swept bits/key (every other one when crowded) */
    size_t every = nx > 12 ? 2 : 1;
    for (size_t i = 0; i < nx; i += every) {
        double x = px(p, xs[i]);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444\"/>\n", x,
                p->y + p->h, x, p->y + p->h + 5);
        snprintf(buf, sizeof buf, "%g", xs[i]);
        svg_text(f, x, p->y + p->h + 18, "middle", "", buf);
    }
    svg_text(f, p->x + p->w / 2, p->y + p->h + 36, "middle", "", "filter bits per key");
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(-90 %.1f "
               "%.1f)\">", p->x - 52, p->y + p->h / 2, p->x - 52, p->y + p->h / 2);
    svg_escape(f, p->ylabel);
    fputs("</text>\n</g>\n", f);
}

/* One line of a series in one panel; points that a log axis cannot show
 * (0) break the line. */
static void draw_line(FILE *f, const struct panel *p, const struct sweep_row *rows, size_t n,
                      int layout, double (*get)(const struct sweep_row *), const char *dash,
                      const char *what)
{
    int open = 0;
    for (size_t i = 0; i < n; i++) {
        if (rows[i].layout != layout)
            continue;
        double v = get(&rows[i]);
        if (p->log && !(v > 0)) {
            if (open)
                fputs("\"/>\n", f);
            open = 0;
            continue;
        }
        if (!open)
            fprintf(f, "<polyline fill=\"none\" stroke-width=\"2\"%s points=\"", dash);
        fprintf(f, "%s%.1f,%.1f", open ? " " : "", px(p, rows[i].bits), py(p, v));
        open = 1;
    }
    if (open)
        fputs("\"/>\n", f);
    for (size_t i = 0; i < n; i++) {
        double v = get(&rows[i]);
        if (rows[i].layout != layout || (p->log && !(v > 0)))
            continue;
        char tip[160];
        snprintf(tip, sizeof tip, "%s, %g bits/key: %s %.4g", layout_name(layout), rows[i].bits,
                 what, v);
        /* blocked: circles, classic: squares, so that equal values stay visible */
        double x = px(p, rows[i].bits), y = py(p, v);
        const char *hollow = *dash ? " fill=\"#fff\"" : "";
        if (layout == KV_BLOOM_CLASSIC)
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"6\" height=\"6\"%s><title>", x - 3,
                    y - 3, hollow);
        else
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\"%s><title>", x, y, hollow);
        svg_escape(f, tip);
        fprintf(f, "</title></%s>\n", layout == KV_BLOOM_CLASSIC ? "rect" : "circle");
    }
}

static double g_measured(const struct sweep_row *s) { return s->missing.measured_fpr; }
static double g_expected(const struct sweep_row *s) { return s->missing.expected_fpr; }
static double g_reads(const struct sweep_row *s) { return s->missing.block_reads; }
static double g_micros(const struct sweep_row *s) { return micros_per_op(&s->missing); }
static double g_memory(const struct sweep_row *s) { return bytes_per_key(s); }

static int write_sweep_svg(const struct ctx *c, const char *path, const struct sweep_row *rows,
                           size_t n)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    const double W = 980, H = 760;
    struct panel p[4] = {
        {90, 120, 360, 220, 0, 0, 0, 0, 1, "False-positive rate of missing-key probes",
         "FPR (fraction, log scale)"},
        {590, 120, 360, 220, 0, 0, 0, 0, 0, "Data-block reads per missing-key get",
         "data blocks read per get"},
        {90, 460, 360, 220, 0, 0, 0, 0, 0, "Time per missing-key get",
         "microseconds per get"},
        {590, 460, 360, 220, 0, 0, 0, 0, 0, "Filter memory per key", "bytes per key"},
    };
    double xs[MAX_SWEEP];
    for (unsigned i = 0; i < c->o.nsweep; i++)
        xs[i] = c->o.sweep[i];
    double *v = malloc(2 * n * sizeof *v + 1);
    if (!v) {
        fclose(f);
        return -1;
    }
    double (*const getters[4][2])(const struct sweep_row *) = {
        {g_measured, g_expected}, {g_reads, NULL}, {g_micros, NULL}, {g_memory, NULL}};
    for (int k = 0; k < 4; k++) {
        p[k].xmin = xs[0];
        p[k].xmax = c->o.nsweep > 1 ? xs[c->o.nsweep - 1] : xs[0] + 1;
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            for (int g = 0; g < 2; g++)
                if (getters[k][g])
                    v[m++] = getters[k][g](&rows[i]);
        panel_range(&p[k], v, m);
    }
    free(v);

    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n",
            W, H, W, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"#fafafa\"/>\n");
    char title[256], sub[256];
    snprintf(title, sizeof title, "kv filter sweep: %llu keys, readmissing after compaction",
             (unsigned long long)c->o.num);
    char cache[32];
    human_bytes(cache, sizeof cache, (double)c->o.cache_size);
    snprintf(sub, sizeof sub,
             "%zu-byte keys, %zu-byte values, %zu-byte blocks, %s compression, "
             "%s block cache, %llu missing-key gets per point",
             c->o.key_size, c->o.value_size, c->o.block_size,
             c->o.compression == KV_COMPRESSION_ZSTD ? "zstd" : "no",
             c->o.cache_size ? cache : "no", (unsigned long long)rows[0].missing.ops);
    svg_text(f, W / 2, 28, "middle", " font-size=\"18\" font-weight=\"bold\"", title);
    svg_text(f, W / 2, 48, "middle", " fill=\"#555\"", sub);
    /* legend */
    static const char *const colors[2] = {"#1f77b4", "#d62728"};
    fprintf(f, "<g class=\"legend\">\n");
    for (int l = 0; l < 2; l++) {
        double x = 250 + 170 * l;
        fprintf(f, "<line x1=\"%.0f\" y1=\"70\" x2=\"%.0f\" y2=\"70\" stroke=\"%s\" "
                   "stroke-width=\"2\"/>\n", x, x + 30, colors[l]);
        if (l)
            fprintf(f, "<rect x=\"%.0f\" y=\"67\" width=\"6\" height=\"6\" fill=\"%s\"/>\n",
                    x + 12, colors[l]);
        else
            fprintf(f, "<circle cx=\"%.0f\" cy=\"70\" r=\"3.5\" fill=\"%s\"/>\n", x + 15,
                    colors[l]);
        svg_text(f, x + 36, 74, "start", "", l ? "classic layout" : "blocked layout");
    }
    fprintf(f, "<line x1=\"590\" y1=\"70\" x2=\"620\" y2=\"70\" stroke=\"#333\" "
               "stroke-width=\"2\"/>\n");
    svg_text(f, 626, 74, "start", "", "measured");
    fprintf(f, "<line x1=\"700\" y1=\"70\" x2=\"730\" y2=\"70\" stroke=\"#333\" "
               "stroke-width=\"2\" stroke-dasharray=\"6 4\"/>\n");
    svg_text(f, 736, 74, "start", "", "expected (theory)");
    fprintf(f, "</g>\n");
    for (int k = 0; k < 4; k++)
        draw_panel(f, &p[k], xs, c->o.nsweep);
    for (int l = 0; l < 2; l++) {
        int layout = l ? KV_BLOOM_CLASSIC : KV_BLOOM_BLOCKED;
        fprintf(f, "<g class=\"series\" data-layout=\"%s\" stroke=\"%s\" fill=\"%s\">\n",
                layout_name(layout), colors[l], colors[l]);
        draw_line(f, &p[0], rows, n, layout, g_measured, "", "measured FPR");
        draw_line(f, &p[0], rows, n, layout, g_expected, " stroke-dasharray=\"6 4\"",
                  "expected FPR");
        draw_line(f, &p[1], rows, n, layout, g_reads, "", "data-block reads per get");
        draw_line(f, &p[2], rows, n, layout, g_micros, "", "micros per get");
        draw_line(f, &p[3], rows, n, layout, g_memory, "", "filter bytes per key");
        fprintf(f, "</g>\n");
    }
    svg_text(f, W / 2, H - 16, "middle", " fill=\"#555\"",
             "0 bits/key: no filter, every probe reads a data block (FPR 1). Points with no "
             "false positive at all are left off the log scale.");
    fprintf(f, "</svg>\n");
    return fclose(f) == 0 ? 0 : -1;
}

static int sweep_one(struct ctx *c, struct sweep_row *row)
{
    struct target *t = &c->main;
    close_target(c, t);
    t->cfg.bloom_bits = row->bits;
    t->cfg.filter_layout = row->layout;
    fprintf(c->text, "--- bloom_bits=%g filter_layout=%s ---\n", row->bits,
            layout_name(row->layout));
    double t0 = now_sec();
    struct result r;
    int rc = reset_target(c, t);
    if (rc == 0 && (rc = run_bench(c, bench_named("fillseq"), t, &r)) == 0)
        report(c, &r, bench_named("fillseq"));
    if (rc == 0 && (rc = bench_compact(c, t, &r)) == 0)
        report(c, &r, bench_named("compact"));
    row->build_seconds = now_sec() - t0;
    if (rc == 0 && (rc = run_bench(c, bench_named("readmissing"), t, &row->missing)) == 0)
        report(c, &row->missing, bench_named("readmissing"));
    if (rc == 0 && (rc = run_bench(c, bench_named("readrandom"), t, &row->random)) == 0)
        report(c, &row->random, bench_named("readrandom"));
    row->filter_bytes = row->random.after.filter_bytes;
    row->filter_keys = row->random.after.filter_keys;
    return rc;
}

static int run_sweep(struct ctx *c)
{
    size_t n = 2 * (size_t)c->o.nsweep;
    struct sweep_row *rows = calloc(n, sizeof *rows);
    if (!rows) {
        fprintf(stderr, "kvbench: out of memory\n");
        return -1;
    }
    int rc = 0;
    for (unsigned i = 0; i < c->o.nsweep && rc == 0; i++)
        for (int l = 0; l < 2 && rc == 0; l++) {
            struct sweep_row *row = &rows[2 * i + (size_t)l];
            row->bits = c->o.sweep[i];
            row->layout = l ? KV_BLOOM_CLASSIC : KV_BLOOM_BLOCKED;
            rc = sweep_one(c, row);
        }
    if (rc == 0) {
        char *csv = dup_printf("%s/%s", c->o.report_dir, "sweep.csv");
        char *svg = dup_printf("%s/%s", c->o.report_dir, "sweep.svg");
        if (!csv || !svg || write_sweep_csv(csv, rows, n) != 0 ||
            write_sweep_svg(c, svg, rows, n) != 0) {
            fprintf(stderr, "kvbench: cannot write %s/sweep.csv and sweep.svg: %s\n",
                    c->o.report_dir, strerror(errno));
            rc = -1;
        } else
            fprintf(c->text, "sweep        : wrote %s and %s\n", csv, svg);
        free(csv);
        free(svg);
    }
    free(rows);
    return rc;
}

/* ---- command line ----------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
"usage: kvbench [--name=value ...]   (db_bench's flags; no flags: the default run)\n"
"  --benchmarks=LIST     comma list (default %s):\n",
            DEFAULT_BENCHMARKS);
    for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++)
        fprintf(f, "      %-13s %s\n", benches[i].name, benches[i].help);
    fprintf(f,
"  --num=N               keys in the database (1000000)\n"
"  --reads=N             ops of each read benchmark (default: num)\n"
"  --key_size=N          bytes per key, decimal digits (16)\n"
"  --value_size=N        bytes per value (100)\n"
"  --bloom_bits=B        filter bits per key; 0 disables filters (10)\n"
"  --filter_layout=L     blocked | classic (blocked)\n"
"  --cache_size=BYTES    block cache; 0 disables it (8388608)\n"
"  --write_buffer_size=BYTES  memtable size (4194304)\n"
"  --block_size=BYTES    data block size (4096)\n"
"  --compression_type=T  none | zstd (none; zstd is kv's own default)\n"
"  --sync[=0|1]          sync every write\n"
"  --threads=N           threads sharing each benchmark's ops (1)\n"
"  --use_existing_db[=0|1]  keep the database at --db; skip the fill benchmarks\n"
"  --db=DIR              database directory (default: a temporary one, removed)\n"
"  --seed=N              keys and their order follow from it (42)\n"
"  --histogram[=0|1]     latency percentiles p50 p95 p99 p99.9 max\n"
"  --json[=0|1]          one JSON object per benchmark on stdout; text to stderr\n"
"  --drop_cache[=0|1]    evict the database's files from the page cache before\n"
"                        each read benchmark (posix_fadvise DONTNEED)\n"
"  --stats_interval=S    every S seconds, a row of REPORT_DIR/stats.csv\n"
"  --report_dir=DIR      where stats.csv, sweep.csv and sweep.svg go (kvbench-report)\n"
"  --sweep[=bloom_bits=B,B,...]  for each bits/key (default 0,2,...,20) and both\n"
"                        layouts: build, compact, readmissing, readrandom; write\n"
"                        REPORT_DIR/sweep.csv and the chart REPORT_DIR/sweep.svg\n"
"  --engine=E            kv | leveldb | rocksdb (peers need -DKV_BENCH_PEERS=ON)\n"
"  --help                this text\n");
}

static int parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    double d = strtod(s, &end); /* 1e6 as well as 1000000 */
    if (errno || *end || !(d >= (double)lo && d <= (double)hi) || d != floor(d))
        return -1;
    *out = (uint64_t)d;
    return 0;
}

static int parse_size(const char *s, uint64_t lo, uint64_t hi, size_t *out)
{
    uint64_t u;
    if (parse_u64(s, lo, hi, &u) != 0)
        return -1;
    *out = (size_t)u;
    return 0;
}

static int parse_double(const char *s, double lo, double hi, double *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    double d = strtod(s, &end);
    if (errno || *end || !(d >= lo && d <= hi))
        return -1;
    *out = d;
    return 0;
}

static int parse_bool(const char *s, int *out)
{
    if (!s || !strcmp(s, "1") || !strcmp(s, "true"))
        *out = 1;
    else if (!strcmp(s, "0") || !strcmp(s, "false"))
        *out = 0;
    else
        return -1;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int parse_sweep(const char *s, struct options *o)
{
    if (!s) {
        o->nsweep = 0;
        for (int b = 0; b <= 20; b += 2)
            o->sweep[o->nsweep++] = b;
        return 0;
    }
    if (strncmp(s, "bloom_bits=", 11) != 0)
        return -1;
    s += 11;
    o->nsweep = 0;
    while (*s) {
        char *end;
        double d = strtod(s, &end);
        if (end == s || (*end && *end != ',') || !(d >= 0 && d <= 1000) || o->nsweep == MAX_SWEEP)
            return -1;
        o->sweep[o->nsweep++] = d;
        s = *end ? end + 1 : end;
    }
    if (!o->nsweep)
        return -1;
    qsort(o->sweep, o->nsweep, sizeof o->sweep[0], cmp_double);
    unsigned m = 1;
    for (unsigned i = 1; i < o->nsweep; i++)
        if (o->sweep[i] != o->sweep[m - 1])
            o->sweep[m++] = o->sweep[i];
    o->nsweep = m;
    return 0;
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

/* One --name=value; returns 0, or -1 after a one-line message. */
static int set_flag(struct options *o, const char *name, const char *val)
{
    const char *want = NULL;
    uint64_t u;
    if (!strcmp(name, "db")) {
        if (!val || !*val)
            want = "a directory";
        else
            o->db = val;
    } else if (!strcmp(name, "num")) {
        if (parse_u64(val, 1, 1000000000000000ull, &o->num))
            want = "an integer from 1 to 1e15";
    } else if (!strcmp(name, "reads")) {
        if (val && !strcmp(val, "-1"))
            o->reads = 0;
        else if (parse_u64(val, 1, 1000000000000000ull, &o->reads))
            want = "an integer from 1 to 1000000000000000ull, or -1 for num";
    } else if (!strcmp(name, "key_size")) {
        if (parse_size(val, 1, MAX_KEY_SIZE, &o->key_size))
            want = "an integer from 1 to 1024";
    } else if (!strcmp(name, "value_size")) {
        if (parse_size(val, 0, KV_MAX_VALUE_SIZE, &o->value_size))
            want = "an integer from 0 to 16777216";
    } else if (!strcmp(name, "benchmarks")) {
        if (!val || check_benchmarks(val))
            return -1;
        o->benchmarks = val;
    } else if (!strcmp(name, "bloom_bits")) {
        if (parse_double(val, 0, 1000, &o->bloom_bits))
            want = "a number from 0 to 1000";
    } else if (!strcmp(name, "filter_layout")) {
        if (val && !strcmp(val, "blocked"))
            o->filter_layout = KV_BLOOM_BLOCKED;
        else if (val && !strcmp(val, "classic"))
            o->filter_layout = KV_BLOOM_CLASSIC;
        else
            want = "blocked or classic";
    } else if (!strcmp(name, "cache_size")) {
        if (parse_size(val, 0, (uint64_t)1 << 46, &o->cache_size))
            want = "a size in bytes";
    } else if (!strcmp(name, "write_buffer_size")) {
        if (parse_size(val, 64 * 1024, (uint64_t)1 << 40, &o->write_buffer_size))
            want = "a size in bytes, at least 65536";
    } else if (!strcmp(name, "block_size")) {
        if (parse_size(val, 64, 64u << 20, &o->block_size))
            want = "a size in bytes from 64 to 67108864";
    } else if (!strcmp(name, "compression_type")) {
        if (val && !strcmp(val, "none"))
            o->compression = KV_COMPRESSION_NONE;
        else if (val && !strcmp(val, "zstd"))
            o->compression = KV_COMPRESSION_ZSTD;
        else
            want = "none or zstd";
    } else if (!strcmp(name, "threads")) {
        if (parse_u64(val, 1, MAX_THREADS, &u))
            want = "an integer from 1 to 256";
        else
            o->threads = (unsigned)u;
    } else if (!strcmp(name, "seed")) {
        if (parse_u64(val, 0, 1000000000000000ull, &o->seed))
            want = "an integer from 0 to 1e15";
    } else if (!strcmp(name, "stats_interval")) {
        if (parse_double(val, 0.001, 86400, &o->stats_interval))
            want = "seconds, from 0.001 to 86400";
    } else if (!strcmp(name, "report_dir")) {
        if (!val || !*val)
            want = "a directory";
        else
            o->report_dir = val;
    } else if (!strcmp(name, "sweep")) {
        if (parse_sweep(val, o))
            want = "bloom_bits=B,B,... (numbers from 0 to 1000, at most 64)";
    } else if (!strcmp(name, "engine")) {
        if (!val || (strcmp(val, "kv") && strcmp(val, "leveldb") && strcmp(val, "rocksdb")))
            want = "kv, leveldb or rocksdb";
        else
            o->engine = val;
    } else {
        int *flag = !strcmp(name, "sync")              ? &o->sync
                    : !strcmp(name, "use_existing_db") ? &o->use_existing_db
                    : !strcmp(name, "histogram")       ? &o->histogram
                    : !strcmp(name, "json")            ? &o->json
                    : !strcmp(name, "drop_cache")      ? &o->drop_cache
                                                       : NULL;
        if (!flag) {
            fprintf(stderr, "kvbench: unknown flag --%s (kvbench --help lists them)\n", name);
            return -1;
        }
        if (parse_bool(val, flag))
            want = "0, 1, true or false";
    }
    if (!want)
        return 0;
    if (val)
        fprintf(stderr, "kvbench: bad value for --%s: \"%s\" (want %s)\n", name, val, want);
    else
        fprintf(stderr, "kvbench: --%s needs a value: --%s=VALUE (%s)\n", name, name, want);
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
                          .engine = "kv"};
    int sweeping = 0;
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
    }
    if (!sweeping)
        o->nsweep = 0;
    uint64_t limit = 1; /* keys are 2i+1 in key_size decimal digits */
    for (size_t k = 0; k < o->key_size && limit <= (uint64_t)1e18; k++)
        limit *= 10;
    if (2 * o->num > limit) {
        fprintf(stderr, "kvbench: --key_size=%zu is too small for --num=%llu (keys are 2*num "
                        "in decimal)\n", o->key_size, (unsigned long long)o->num);
        return -1;
    }
    if ((o->stats_interval > 0 || sweeping) && !o->report_dir)
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

static const struct bench_engine *pick_engine(const char *name)
{
    if (!strcmp(name, "kv"))
        return &kv_engine;
#ifdef KV_BENCH_PEERS
    const struct bench_engine *e = bench_peer_engine(name);
    if (e)
        return e;
#endif
    fprintf(stderr, "kvbench: --engine=%s needs a build with LevelDB and RocksDB: apt-get install "
                    "libleveldb-dev librocksdb-dev, then cmake -DKV_BENCH_PEERS=ON\n", name);
    return NULL;
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
    fprintf(f, "kvbench:     engine %s\n", c->e->name);
    fprintf(f, "Date:        %s\n", when);
    fprintf(f, "CPU:         %ld * %s\n", sysconf(_SC_NPROCESSORS_ONLN), cpu);
    fprintf(f, "OS:          %s\n", host);
    fprintf(f, "Keys:        %zu bytes each (decimal, even; readmissing asks for odd ones)\n",
            o->key_size);
    fprintf(f, "Values:      %zu bytes each (half of each compresses away)\n", o->value_size);
    fprintf(f, "Entries:     %llu\n", (unsigned long long)o->num);
    fprintf(f, "Reads:       %llu per read benchmark\n",
            (unsigned long long)(o->reads ? o->reads : o->num));
    fprintf(f, "RawSize:     %s (estimated)\n", raw);
    if (o->nsweep)
        fprintf(f, "Filters:     sweep over %u settings of bits/key, blocked and classic\n",
                o->nsweep);
    else if (o->bloom_bits > 0 && c->e != &kv_engine)
        fprintf(f, "Filters:     %g bits/key, %s's Bloom filter\n", o->bloom_bits, c->e->name);
    else if (o->bloom_bits > 0)
        fprintf(f, "Filters:     %g bits/key, %s layout\n", o->bloom_bits,
                layout_name(o->filter_layout));
    else
        fprintf(f, "Filters:     off (--bloom_bits=0)\n");
    fprintf(f, "Cache:       %s block cache\n", o->cache_size ? cache : "no");
    fprintf(f, "Compression: %s\n", o->compression == KV_COMPRESSION_ZSTD ? "zstd" : "none");
    fprintf(f, "Memtable:    %s write buffer; %zu-byte blocks%s\n", wb, o->block_size,
            o->sync ? "; every write synced" : "");
    fprintf(f, "Threads:     %u\n", o->threads);
    fprintf(f, "Database:    %s%s\n", c->main.path,
            c->tmp_root ? " (temporary, removed at exit)" : "");
    fprintf(f, "Benchmarks:  %s\n", o->nsweep ? "sweep (fillseq, compact, readmissing, readrandom)"
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
        .create = !o->use_existing_db};
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
    if (o->report_dir && make_dir(o->report_dir) != 0)
        return -1;
    if (o->stats_interval > 0) {
        char *p = dup_printf("%s/%s", o->report_dir, "stats.csv");
        c->stats_csv = p ? fopen(p, "w") : NULL;
        if (!c->stats_csv) {
            fprintf(stderr, "kvbench: cannot write %s/stats.csv: %s\n", o->report_dir,
                    strerror(errno));
            free(p);
            return -1;
        }
        free(p);
        fprintf(c->stats_csv, "benchmark,time_s,interval_s,ops,ops_per_sec,gets,"
                              "tables_probed_per_get,false_positives_per_get,"
                              "data_block_reads_per_get,compactions,stalls\n");
    }
    /* Fresh unless told otherwise, as db_bench does. */
    if (!o->use_existing_db && destroy_db(c->main.path, 0) != 0)
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
        if (destroy_db(c->main.path, 1) != 0 || rmdir(c->tmp_root) != 0) {
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
    if (!(c.e = pick_engine(c.o.engine)))
        return 2;
    if (c.o.compression == KV_COMPRESSION_ZSTD && !strcmp(c.e->name, "leveldb")) {
        fprintf(stderr, "kvbench: LevelDB 1.23 has no zstd: use --compression_type=none\n");
        return 2;
    }
    if (c.o.nsweep && c.e != &kv_engine) {
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
        rc = c.o.nsweep ? run_sweep(&c) : run_benchmarks(&c);
    }
    if (stop_requested) {
        fprintf(stderr, "kvbench: interrupted\n");
        rc = E_INTERRUPTED;
    }
    if (teardown(&c) != 0 && rc == 0)
        rc = -1;
    return rc == 0 ? 0 : rc == E_INTERRUPTED ? 130 : 1;
}
