/* run.c - running one benchmark: keys and values, the latency histogram,
 * the worker threads and their ops, the progress and --stats_interval
 * monitor, and the figures taken around a run. */
#define _XOPEN_SOURCE 700
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

/* ---- keys and values ----------------------------------------------------------------- */

/* x as `size` decimal digits: key index x / 2 (odd x: an absent twin). */
static inline void key_digits(uint8_t *k, size_t size, uint64_t x)
{
    /* Two digits a step: the harness's own cost, off every figure. */
    static const char pairs[201] = "00010203040506070809101112131415161718192021222324"
                                   "25262728293031323334353637383940414243444546474849"
                                   "50515253545556575859606162636465666768697071727374"
                                   "75767778798081828384858687888990919293949596979899";
    size_t j = size;
    for (; j >= 2 && x; j -= 2) {
        memcpy(k + j - 2, pairs + 2 * (x % 100), 2);
        x /= 100;
    }
    while (j-- > 0) {
        k[j] = (uint8_t)('0' + x % 10);
        x /= 10;
    }
}

/* Key `i` (missing: its absent twin): key index i * key_stride, as
 * key_size decimal digits of twice it (plus 1 when missing). The key of
 * index x is key_digits(2x), so key indexes [a, b) are the keys
 * [key_digits(2a), key_digits(2b)). */
static inline void make_key(const struct options *o, uint8_t *k, uint64_t i, int missing)
{
    key_digits(k, o->key_size, 2 * i * o->key_stride + (missing ? 1 : 0));
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
int make_pool(struct ctx *c)
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

/* n latencies of v ns each: a batch's keys, each charged an even share. */
static inline void hist_add_n(struct histogram *h, uint64_t v, uint64_t n)
{
    h->b[hist_bucket(v)] += n;
    if (h->count == 0 || v < h->min)
        h->min = v;
    if (v > h->max)
        h->max = v;
    h->count += n;
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

/* Bucket i holds the values [low, low + *width). */
static uint64_t hist_low(unsigned i, uint64_t *width)
{
    *width = 1;
    if (i < HIST_SUB)
        return i;
    unsigned e = (i - HIST_SUB) / HIST_SUB + 4, s = (i - HIST_SUB) % HIST_SUB;
    *width = (uint64_t)1 << (e - 4);
    return (uint64_t)(HIST_SUB + s) << (e - 4);
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
        uint64_t w;
        double low = (double)hist_low(i, &w), width = (double)w;
        double v = low + width * (rank - cum) / (double)h->b[i];
        if (v < (double)h->min)
            v = (double)h->min;
        return v > (double)h->max ? (double)h->max : v;
    }
    return (double)h->max;
}

/* --stats_interval: each worker's latencies go into buckets of its own
 * that the monitor reads while the worker runs. One writer per bucket, so
 * a relaxed load and store (no lock, no read-modify-write instruction)
 * suffice; the monitor keeps the sums it read for the previous row, and a
 * row's percentiles are of the difference: the ops that completed in its
 * interval. Nothing is reset, so nothing is lost between two reads. */
struct live_hist {
    _Atomic uint64_t b[HIST_BUCKETS];
};

static inline void live_add(struct live_hist *h, uint64_t v, uint64_t n)
{
    _Atomic uint64_t *p = &h->b[hist_bucket(v)];
    atomic_store_explicit(p, atomic_load_explicit(p, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

/* The histogram of the counts in now[] less those in then[]: its min and
 * max are the bounds of its lowest and highest bucket. */
static void hist_between(struct histogram *h, const uint64_t *now, const uint64_t *then)
{
    memset(h, 0, sizeof *h);
    for (unsigned i = 0; i < HIST_BUCKETS; i++) {
        uint64_t n = now[i] - then[i], w;
        if (!n)
            continue;
        h->b[i] = n;
        uint64_t low = hist_low(i, &w);
        if (!h->count)
            h->min = low;
        h->max = low + w - 1;
        h->count += n;
    }
}

/* ---- workers ---------------------------------------------------------------------- */

struct run;

struct worker {
    alignas(64) _Atomic uint64_t done; /* ops finished; read by the monitor */
    struct run *run;
    uint64_t from, to;                 /* this thread's ops: [from, to) */
    uint64_t rng;
    uint64_t found;
    uint64_t scanned;                  /* readseq/readreverse: key + value bytes seen */
    uint64_t entries;                  /* seekempty/seekshort: entries the ranges held */
    void *iter;
    int positioned;                    /* readseq/readreverse: iterator placed */
    struct histogram *hist;
    struct histogram *cp_hist;         /* --checkpoint_at: ops that ran during it */
    struct live_hist *live;            /* --stats_interval: read by the monitor */
    /* Batched benchmarks: the keys of the op running now (1 for the
     * others), and room for --batch_size keys and their pointers. */
    uint64_t batch;
    uint8_t *bkeys;
    const void **bptrs;
    size_t *blens;
    int rc;
    char err[256];                     /* rc's text, taken on this thread */
    pthread_t tid;
    /* fillbulk: the table being written (NULL: none), its bytes so far,
     * and the paths of this thread's tables, in key order. */
    void *bulk;
    uint64_t bulk_bytes;
    char **bulk_paths;
    size_t nbulk;
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
    /* A benchmark with a writer (readwhilewriting): the writer's state, and
     * the readers still running, which it writes until there are none. */
    struct worker *writer;
    atomic_uint readers_left;
    char *bulk_dir;       /* fillbulk: where the tables are written (beside the database) */
    uint64_t bulk_target; /* ... and the bytes of keys and values of each */
    /* --checkpoint_at: the side thread's checkpoint, from begin_ns to end_ns
     * (now_ns; 0: not begun, not ended), its result and what it made. */
    struct {
        int on;
        pthread_t tid;
        _Atomic uint64_t begin_ns, end_ns;
        int rc;
        char err[256];
        uint64_t files, linked, copied;
    } cp;
};

static inline struct ctx *wctx(const struct worker *w)
{
    return w->run->c;
}

static int do_put(struct worker *w, uint64_t idx)
{
    const struct ctx *c = wctx(w);
    make_key(&c->o, w->key, idx, 0);
    int rc = c->e->put(w->run->t->h, w->key, c->o.key_size, value_for(c, idx), c->o.value_size,
                       w->run->sync);
    return rc < 0 ? rc : 0;
}

static int do_get(struct worker *w, uint64_t idx, int missing)
{
    const struct ctx *c = wctx(w);
    make_key(&c->o, w->key, idx, missing);
    size_t vlen;
    int rc = c->e->get(w->run->t->h, w->key, c->o.key_size, &vlen);
    if (rc < 0)
        return rc;
    w->found += (uint64_t)rc;
    return 0;
}

/* w->batch random keys (missing: their absent twins) in one multi-get, or
 * one get after another where the engine has no multi-get. */
static int do_multi_get(struct worker *w, int missing)
{
    const struct ctx *c = wctx(w);
    size_t n = (size_t)w->batch, ks = c->o.key_size;
    for (size_t k = 0; k < n; k++) {
        make_key(&c->o, w->bkeys + k * ks, rng_below(&w->rng, c->o.num), missing);
        w->bptrs[k] = w->bkeys + k * ks;
        w->blens[k] = ks;
    }
    void *h = w->run->t->h;
    if (c->e->multi_get) {
        int rc = c->e->multi_get(h, n, w->bptrs, w->blens);
        if (rc < 0)
            return rc;
        w->found += (uint64_t)rc;
        return 0;
    }
    for (size_t k = 0; k < n; k++) {
        size_t vlen;
        int rc = c->e->get(h, w->bptrs[k], ks, &vlen);
        if (rc < 0)
            return rc;
        w->found += (uint64_t)rc;
    }
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

/* fillrandom, but every memtable's worth of keys (nine tenths of
 * write_buffer_size over an entry's bytes, so that no flush comes first)
 * is flushed and its compactions waited for before the next: the tree's
 * shape then depends on the keys alone, not on how the background thread
 * kept pace (with --threads=1), so that runs that differ in one setting
 * compare the same tree. Its time counts the flushes and compactions. */
static int op_fillsettled(struct worker *w, uint64_t i)
{
    const struct ctx *c = wctx(w);
    int rc = do_put(w, perm_at(&w->run->perm, i));
    uint64_t chunk = (uint64_t)c->o.write_buffer_size * 9 / 10 /
                     (c->o.key_size + c->o.value_size + 48);
    if (rc == 0 && ((i + 1) % (chunk ? chunk : 1) == 0 || i + 1 == c->o.num) && c->e->flush &&
        (rc = c->e->flush(w->run->t->h)) == 0)
        rc = c->e->wait_compaction(w->run->t->h);
    return rc < 0 ? rc : 0;
}

static int op_overwrite(struct worker *w, uint64_t i)
{
    (void)i;
    return do_put(w, rng_below(&w->rng, wctx(w)->o.num));
}

/* fillbulk: key i (the thread's keys come in order) into the thread's
 * table, a new one when none is open; a table ends at kv's default
 * target_file_size of keys and values, or at the thread's last key. */
static int op_fillbulk(struct worker *w, uint64_t i)
{
    const struct ctx *c = wctx(w);
    struct target *t = w->run->t;
    int rc = 0;
    if (!w->bulk) {
        char **n = realloc(w->bulk_paths, (w->nbulk + 1) * sizeof *n);
        char *p = malloc(strlen(w->run->bulk_dir) + 64);
        if (n)
            w->bulk_paths = n;
        if (!n || !p) {
            free(p);
            return E_FAIL;
        }
        sprintf(p, "%s/%06u-%06zu.sst", w->run->bulk_dir, (unsigned)(w - w->run->w), w->nbulk);
        w->bulk_paths[w->nbulk++] = p;
        if ((rc = c->e->bulk_open(t->h, &t->cfg, p, &w->bulk)) != 0) {
            w->bulk = NULL;
            return rc;
        }
    }
    make_key(&c->o, w->key, i, 0);
    rc = c->e->bulk_put(w->bulk, w->key, c->o.key_size, value_for(c, i), c->o.value_size);
    w->bulk_bytes += c->o.key_size + c->o.value_size;
    if (rc != 0 || w->bulk_bytes >= w->run->bulk_target || i + 1 == w->to) {
        int frc = c->e->bulk_finish(w->bulk);
        w->bulk = NULL;
        w->bulk_bytes = 0;
        rc = rc ? rc : frc;
    }
    return rc < 0 ? rc : 0;
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

static int op_multireadrandom(struct worker *w, uint64_t i)
{
    (void)i;
    return do_multi_get(w, 0);
}

static int op_multireadmissing(struct worker *w, uint64_t i)
{
    (void)i;
    return do_multi_get(w, 1);
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
    make_key(&c->o, w->key, rng_below(&w->rng, c->o.num), 0);
    int rc = c->e->del(w->run->t->h, w->key, c->o.key_size, w->run->sync);
    return rc < 0 ? rc : 0;
}

/* deleterange's ranges: the key space [0, num) cut into `deletes` equal
 * strides, range i within stride i at an offset drawn from the seed and i
 * alone (the same ranges with any --threads), so that the ranges spread
 * over the whole key space and never overlap while range_size fits a
 * stride; a longer range runs into the next strides, cut at num. */
uint64_t deleterange_count(const struct options *o)
{
    if (o->deletes)
        return o->deletes;
    uint64_t n = o->num / 5 / o->range_size;
    return n ? n : 1;
}

void deleterange_at(const struct options *o, uint64_t i, uint64_t *begin, uint64_t *end)
{
    uint64_t count = deleterange_count(o);
    /* floor(i * num / count), without overflow: i, num % count < count <= 1e9 */
    uint64_t q = o->num / count, r = o->num % count;
    uint64_t lo = i * q + i * r / count, hi = (i + 1) * q + (i + 1) * r / count;
    uint64_t slack = hi - lo > o->range_size ? hi - lo - o->range_size : 0;
    uint64_t b = lo + splitmix64(o->seed ^ hash_name("deleterange") ^ splitmix64(i)) % (slack + 1);
    *begin = b;
    *end = o->num - b > o->range_size ? b + o->range_size : o->num;
}

/* One range delete of range i: [key(begin), key(end)) holds the range's
 * keys and their absent twins, nothing else. */
static int op_deleterange(struct worker *w, uint64_t i)
{
    const struct ctx *c = wctx(w);
    uint64_t b, e;
    deleterange_at(&c->o, i, &b, &e);
    uint8_t end[MAX_KEY_SIZE];
    make_key(&c->o, w->key, b, 0);
    make_key(&c->o, end, e, 0);
    int rc = c->e->delete_range(w->run->t->h, w->key, c->o.key_size, end, c->o.key_size,
                                w->run->sync);
    return rc < 0 ? rc : 0;
}

/* A merge operand of 1 (8 bytes, little-endian) on a random key: after n
 * of them the values of all keys sum to n. */
static int op_mergerandom(struct worker *w, uint64_t i)
{
    (void)i;
    const struct ctx *c = wctx(w);
    static const uint8_t one[8] = {1, 0, 0, 0, 0, 0, 0, 0};
    make_key(&c->o, w->key, rng_below(&w->rng, c->o.num), 0);
    int rc = c->e->merge(w->run->t->h, w->key, c->o.key_size, one, sizeof one, w->run->sync);
    return rc < 0 ? rc : 0;
}

static int op_seekrandom(struct worker *w, uint64_t i)
{
    (void)i;
    const struct ctx *c = wctx(w);
    make_key(&c->o, w->key, rng_below(&w->rng, c->o.num), 0);
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
            make_key(&c->o, w->key, idx, 0);
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
    w->scanned += kl + vl;
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

/* ---- range queries: seekempty and seekshort ----------------------------------------- */

/* One range query: w's iterator bounded to key indexes [lo, hi) (where
 * the engine takes bounds; else it stops at hi itself), sought to lo, then
 * every entry below hi read, key and value. The entries read, or a
 * negative code. */
static int64_t read_range(struct worker *w, uint64_t lo, uint64_t hi)
{
    const struct ctx *c = wctx(w);
    const struct bench_engine *e = c->e;
    size_t ks = c->o.key_size;
    uint8_t upper[MAX_KEY_SIZE];
    key_digits(w->key, ks, 2 * lo);
    key_digits(upper, ks, 2 * hi);
    if (e->iter_set_bounds) {
        int rc = e->iter_set_bounds(w->iter, w->key, ks, upper, ks);
        if (rc != 0)
            return rc < 0 ? rc : -rc;
    }
    e->iter_seek(w->iter, w->key, ks);
    int64_t n = 0;
    for (; e->iter_valid(w->iter); e->iter_next(w->iter)) {
        size_t kl, vl;
        const void *k = e->iter_key(w->iter, &kl);
        int cmp = memcmp(k, upper, kl < ks ? kl : ks);
        if (cmp > 0 || (cmp == 0 && kl >= ks)) /* at or past the upper bound */
            break;
        e->iter_value(w->iter, &vl);
        w->scanned += kl + vl;
        n++;
    }
    int rc = e->iter_status(w->iter);
    return rc < 0 ? rc : n;
}

/* seekempty: range_width key indexes strictly inside the gap after a
 * random key (key_stride > range_width + 1, checked at the start): the
 * range holds nothing, and an entry found there is an error. */
static int op_seekempty(struct worker *w, uint64_t i)
{
    (void)i;
    const struct options *o = &wctx(w)->o;
    uint64_t s = o->key_stride, width = o->range_width;
    uint64_t lo = rng_below(&w->rng, o->num) * s + 1 + rng_below(&w->rng, s - width - 1);
    int64_t n = read_range(w, lo, lo + width);
    if (n < 0)
        return (int)n;
    if (n > 0) {
        fprintf(stderr,
                "kvbench: seekempty: %lld entries in key indexes [%llu, %llu), which "
                "were never written\n",
                (long long)n, (unsigned long long)lo, (unsigned long long)(lo + width));
        return E_FAIL;
    }
    return 0;
}

/* seekshort: a range from a random key over k * key_stride key indexes,
 * k = 1..range_width: it holds k keys (fewer at the end of the key
 * space), and finding another count is an error. */
static int op_seekshort(struct worker *w, uint64_t i)
{
    (void)i;
    const struct options *o = &wctx(w)->o;
    uint64_t k = 1 + rng_below(&w->rng, o->range_width), idx = rng_below(&w->rng, o->num);
    uint64_t want = o->num - idx < k ? o->num - idx : k;
    int64_t n = read_range(w, idx * o->key_stride, (idx + k) * o->key_stride);
    if (n < 0)
        return (int)n;
    if ((uint64_t)n != want) {
        fprintf(stderr,
                "kvbench: seekshort: %lld entries in key indexes [%llu, %llu), which "
                "hold %llu keys\n",
                (long long)n, (unsigned long long)(idx * o->key_stride),
                (unsigned long long)((idx + k) * o->key_stride), (unsigned long long)want);
        return E_FAIL;
    }
    w->found += n > 0;
    w->entries += (uint64_t)n;
    return 0;
}

int range_bench(const struct bench_def *d)
{
    return d && (d->op == op_seekempty || d->op == op_seekshort);
}

/* compact, stats and nofilter are run by run_special(). */
const struct bench_def benches[] = {
    {"fillseq", K_WRITE, op_fillseq, 1, 0, "write num keys in key order, into a new database", 0,
     0},
    {"fillrandom", K_WRITE, op_fillrandom, 1, 0,
     "write num keys in random order (each once), into a new database", 0, 0},
    {"fillsettled", K_WRITE, op_fillsettled, 1, 0,
     "fillrandom, each memtable's worth flushed and its compactions waited for (kv): a "
     "tree that depends on the keys alone",
     0, 0},
    {"overwrite", K_WRITE, op_overwrite, 0, 0,
     "write num random keys of fillrandom's key space (with repeats) over the database "
     "as it is (after a fill, or --use_existing_db)",
     0, 0},
    {"fillsync", K_WRITE, op_fillrandom, 1, 0, "fillrandom of num/1000 keys, each write synced", 0,
     0},
    {"fillbulk", K_WRITE, op_fillbulk, 1, 0,
     "write num keys in key order into table files (kv: kv_table_writer, RocksDB: its "
     "SstFileWriter) of kv's target_file_size beside the database, then move them all in with "
     "one ingest (kv_ingest; IngestExternalFile); timed whole, latencies of the puts",
     0, 0},
    {"readrandom", K_READ, op_readrandom, 0, 0, "gets random keys that were written", 0, 0},
    {"readmissing", K_READ, op_readmissing, 0, 0,
     "gets random keys that are absent (never written)", 0, 0},
    {"readhot", K_READ, op_readhot, 0, 0, "gets random keys of the first 1% of the key space", 0,
     0},
    {"readwhilewriting", K_READ, op_readrandom, 0, 0,
     "readrandom by --threads threads while one more writes random keys of the key space "
     "(ops count reads; JSON: writes_per_sec)",
     0, 1},
    {"multireadrandom", K_READ, op_multireadrandom, 0, 0,
     "readrandom, --batch_size keys per multi-get (figures per key)", 1, 0},
    {"multireadmissing", K_READ, op_multireadmissing, 0, 0,
     "readmissing, --batch_size keys per multi-get (figures per key)", 1, 0},
    {"readseq", K_SCAN, op_readseq, 0, 1, "reads keys in order with an iterator", 0, 0},
    {"readreverse", K_SCAN, op_readreverse, 0, 1, "reads keys in reverse order with an iterator", 0,
     0},
    {"seekrandom", K_SCAN, op_seekrandom, 0, 1, "seeks an iterator to random keys", 0, 0},
    {"seekempty", K_SCAN, op_seekempty, 0, 1,
     "range queries that hold no key: an iterator bounded to --range_width key indexes "
     "inside the gap after a random key (needs --key_stride >= range_width + 2), sought to "
     "the lower bound and read to the upper; an entry found is an error",
     0, 0},
    {"seekshort", K_SCAN, op_seekshort, 0, 1,
     "range queries that hold 1..--range_width keys: an iterator bounded from a random key "
     "over k * key_stride key indexes (k random), sought and read to the upper bound; the "
     "count is checked",
     0, 0},
    {"deleterandom", K_WRITE, op_deleterandom, 0, 0, "delete num random keys (with repeats)", 0, 0},
    {"deleterange", K_WRITE, op_deleterange, 0, 0,
     "delete --deletes ranges of --range_size keys each, spread evenly over the key space "
     "(each range at a random place in its share), one range delete per op (kv, RocksDB)",
     0, 0},
    {"mergerandom", K_WRITE, op_mergerandom, 1, 0,
     "num merges of 1 (an 8-byte little-endian uint64 add operand) on random keys of the key "
     "space, into a new database opened with a uint64-add merge operator (kv, RocksDB)",
     0, 0},
    {"compact", K_OTHER, NULL, 0, 0, "compact the whole database", 0, 0},
    {"waitforcompaction", K_OTHER, NULL, 0, 0,
     "wait until no flush or compaction is pending or running (JSON: seconds)", 0, 0},
    {"reopen", K_OTHER, NULL, 0, 0, "close the database, then time opening it (JSON: seconds)", 0,
     0},
    {"stats", K_OTHER, NULL, 0, 0, "print the database's levels, sizes and counters", 0, 0},
    {"catchup", K_OTHER, NULL, 0, 0,
     "kv: --reads rounds (20 when 0) of a memtable's worth of random puts, then one timed "
     "kv_catch_up of a read-only handle in this process; with --read_only, timed "
     "kv_catch_up calls of --db's handle while another process writes (latency "
     "percentiles)",
     0, 0},
    {"nofilter", K_OTHER, NULL, 0, 0,
     "readmissing on a copy without filters (--bloom_bits=0); what filters saved", 0, 0},
};

const size_t nbenches = sizeof benches / sizeof benches[0];

const struct bench_def *find_bench(const char *name, size_t len)
{
    for (size_t i = 0; i < nbenches; i++)
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
    if (abort) {
        atomic_fetch_sub_explicit(&r->readers_left, 1, memory_order_release);
        return NULL;
    }
    const int timed = w->hist != NULL || w->live != NULL || w->cp_hist != NULL;
    /* A batched benchmark's op takes `step` keys (the last one what is
     * left), timed as a whole: each key is charged the batch's time over
     * its keys. */
    const uint64_t step = r->def->batched ? r->c->o.batch_size : 1;
    for (uint64_t i = w->from; i < w->to; i += w->batch) {
        if (stop_requested) {
            w->rc = E_INTERRUPTED;
            break;
        }
        w->batch = w->to - i < step ? w->to - i : step;
        uint64_t t0 = timed ? now_ns() : 0;
        int rc = r->def->op(w, i);
        if (rc != 0) {
            if (rc < 0) { /* an engine's message may live in this thread */
                w->rc = rc;
                snprintf(w->err, sizeof w->err, "%s", r->c->e->errstr(rc));
            } else if (rc != 1) { /* E_FAIL: said already */
                w->rc = rc;
            }
            break;
        }
        if (timed) {
            uint64_t t1 = now_ns(), ns = (t1 - t0) / w->batch;
            if (w->cp_hist) { /* the op and the checkpoint overlapped */
                uint64_t b = atomic_load_explicit(&r->cp.begin_ns, memory_order_relaxed);
                uint64_t e = atomic_load_explicit(&r->cp.end_ns, memory_order_relaxed);
                if (b && t1 >= b && (!e || t0 <= e))
                    hist_add_n(w->cp_hist, ns, w->batch);
            }
            if (w->hist && w->batch == 1)
                hist_add(w->hist, ns);
            else if (w->hist)
                hist_add_n(w->hist, ns, w->batch);
            if (w->live)
                live_add(w->live, ns, w->batch);
        }
        atomic_store_explicit(&w->done, i - w->from + w->batch, memory_order_relaxed);
    }
    atomic_fetch_sub_explicit(&r->readers_left, 1, memory_order_release);
    return NULL;
}

/* readwhilewriting's writer: random keys of [0, num), each put as
 * fillrandom puts it, from the moment the readers start until the last
 * of them is done (readers_left reaches 0), an error, or SIGINT. */
static void *writer_main(void *arg)
{
    struct worker *w = arg;
    struct run *r = w->run;
    pthread_mutex_lock(&r->mu);
    while (!r->go && !r->abort)
        pthread_cond_wait(&r->cv, &r->mu);
    int abort = r->abort;
    pthread_mutex_unlock(&r->mu);
    if (abort)
        return NULL;
    uint64_t n = 0;
    while (atomic_load_explicit(&r->readers_left, memory_order_acquire) > 0) {
        if (stop_requested) {
            w->rc = E_INTERRUPTED;
            break;
        }
        int rc = do_put(w, rng_below(&w->rng, r->c->o.num));
        if (rc < 0) {
            w->rc = rc;
            snprintf(w->err, sizeof w->err, "%s", r->c->e->errstr(rc));
            break;
        }
        atomic_store_explicit(&w->done, ++n, memory_order_relaxed);
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

/* --checkpoint_at: waits (1 ms polls) until that share of the ops is
 * done, then takes the checkpoint, timing it, and counts what it made:
 * files with another link (the database's) and the bytes of the rest. */
static void *checkpoint_main(void *arg)
{
    struct run *r = arg;
    struct ctx *c = r->c;
    uint64_t due = (uint64_t)(c->o.checkpoint_at * (double)r->ops);
    for (;;) {
        pthread_mutex_lock(&r->mu);
        int over = r->finished || r->abort, go = r->go;
        pthread_mutex_unlock(&r->mu);
        if (over || stop_requested) {
            r->cp.rc = E_INTERRUPTED; /* the benchmark ended first */
            return NULL;
        }
        if (go && run_done(r) >= due)
            break;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    atomic_store(&r->cp.begin_ns, now_ns());
    int rc = c->e->checkpoint(r->t->h, c->o.checkpoint_dir);
    atomic_store(&r->cp.end_ns, now_ns());
    r->cp.rc = rc;
    if (rc != 0) {
        snprintf(r->cp.err, sizeof r->cp.err, "%s", c->e->errstr(rc));
        return NULL;
    }
    DIR *d = opendir(c->o.checkpoint_dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        char p[4096];
        struct stat st;
        if (e->d_name[0] == '.' ||
            snprintf(p, sizeof p, "%s/%s", c->o.checkpoint_dir, e->d_name) >= (int)sizeof p ||
            stat(p, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        r->cp.files++;
        if (st.st_nlink > 1)
            r->cp.linked++;
        else
            r->cp.copied += (uint64_t)st.st_size;
    }
    if (d)
        closedir(d);
    return NULL;
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

/* What the monitor reads at each row's end: the clock, the ops done, the
 * engine's counters and its write path (bench_sample), and the workers'
 * latency buckets summed. A row of stats.csv is what changed between two. */
struct sample {
    double t;
    uint64_t done;
    struct bench_counters k;
    struct bench_sample s;
    uint64_t lat[HIST_BUCKETS];
};

/* The workers' live buckets, summed. */
static void read_live(const struct run *r, uint64_t *sum)
{
    memset(sum, 0, HIST_BUCKETS * sizeof *sum);
    for (unsigned i = 0; i < r->nw; i++) {
        const struct live_hist *h = r->w[i].live;
        for (unsigned b = 0; h && b < HIST_BUCKETS; b++)
            sum[b] += atomic_load_explicit(&h->b[b], memory_order_relaxed);
    }
}

/* The engine's write path now; nothing known when it cannot say. */
static void sample_engine(const struct run *r, struct bench_sample *s)
{
    memset(s, 0, sizeof *s);
    if (r->c->e->sample && r->c->e->sample(r->t->h, s) != 0)
        memset(s, 0, sizeof *s);
}

static void take_sample(const struct run *r, struct sample *s)
{
    s->t = now_sec();
    s->done = run_done(r);
    read_live(r, s->lat);
    if (r->c->e->counters(r->t->h, &s->k) != 0)
        memset(&s->k, 0, sizeof s->k);
    sample_engine(r, &s->s);
}

static double per(uint64_t n, uint64_t d)
{
    return d ? (double)n / (double)d : 0;
}

/* ",v", or "," alone (an empty cell) when the engine does not say. */
static void cell_u64(FILE *f, int have, uint64_t v)
{
    fputc(',', f);
    if (have)
        fprintf(f, "%llu", (unsigned long long)v);
}

/* A row (STATS_CSV_HEADER) for the interval from sample a to sample b;
 * compacting: a flush or compaction was seen running at a's end, at b's or
 * at a poll between them. */
static void write_sample(const struct run *r, const struct sample *a, const struct sample *b,
                         int compacting)
{
    FILE *f = r->c->stats_csv;
    double dt = b->t - a->t;
    uint64_t gets = b->k.gets - a->k.gets;
    if (r->c->stats_engine_column)
        fprintf(f, "%s,", r->c->e->name);
    fprintf(f, "%s,%.3f,%.3f,%llu,%.1f,%llu,%.4f,%.6f,%.6f,%llu,%llu",
            r->def->name, b->t - r->t0, dt, (unsigned long long)(b->done - a->done),
            dt > 0 ? (double)(b->done - a->done) / dt : 0, (unsigned long long)gets,
            per(b->k.tables_probed - a->k.tables_probed, gets),
            per(b->k.false_positives - a->k.false_positives, gets),
            per(b->k.data_block_reads - a->k.data_block_reads, gets),
            (unsigned long long)(b->k.compactions - a->k.compactions),
            (unsigned long long)(b->k.stalls - a->k.stalls));
    /* the latencies of the ops that completed in the interval: none, no figure */
    struct histogram h;
    hist_between(&h, b->lat, a->lat);
    if (h.count)
        fprintf(f, ",%.2f,%.2f", hist_quantile(&h, 0.99) / 1e3, hist_quantile(&h, 0.999) / 1e3);
    else
        fputs(",,", f);
    const struct bench_sample *x = &a->s, *y = &b->s;
    unsigned have = x->have & y->have;
    cell_u64(f, have & SAMPLE_DELAYS, y->write_delays - x->write_delays);
    cell_u64(f, have & SAMPLE_DELAY_MICROS, y->write_delay_micros - x->write_delay_micros);
    cell_u64(f, have & SAMPLE_STOPS, y->write_stops - x->write_stops);
    cell_u64(f, have & SAMPLE_STOP_MICROS, y->write_stop_micros - x->write_stop_micros);
    cell_u64(f, y->have & SAMPLE_L0_FILES, y->l0_files);
    cell_u64(f, y->have & SAMPLE_PENDING_BYTES, y->pending_compaction_bytes);
    uint64_t written = y->compaction_bytes - x->compaction_bytes;
    cell_u64(f, have & SAMPLE_COMPACTION_BYTES, written);
    /* a compaction that ended in the interval wrote its bytes in it */
    cell_u64(f, have & (SAMPLE_COMPACTING | SAMPLE_COMPACTION_BYTES),
             (uint64_t)(compacting || ((have & SAMPLE_COMPACTION_BYTES) && written > 0)));
    fputc('\n', f);
    fflush(f);
}

/* Wakes every tick: redraws the progress bar, writes a row of stats.csv
 * every --stats_interval, and in between asks the engine (when it can say)
 * whether a flush or compaction is running, so that a row notes one that
 * ran only between two rows. */
static void *monitor_main(void *arg)
{
    struct run *r = arg;
    const struct ctx *c = r->c;
    double interval = c->o.stats_interval;
    double tick = c->progress ? 0.25 : interval;
    if (interval > 0 && interval < tick)
        tick = interval;
    int polling = c->stats_csv && c->e->sample;
    if (polling && tick > interval / 4)
        tick = interval / 4 < 0.1 ? interval / 4 : 0.1;
    struct sample *last = malloc(sizeof *last), *cur = malloc(sizeof *cur);
    if (!last || !cur) {
        free(last);
        free(cur);
        fprintf(stderr, "kvbench: out of memory: no progress and no stats.csv rows\n");
        return NULL;
    }
    if (r->first)
        *last = *r->first;
    else
        memset(last, 0, sizeof *last);
    last->t = r->t0;
    int compacting = last->s.compacting;
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
            take_sample(r, cur);
            write_sample(r, last, cur, compacting || cur->s.compacting);
            struct sample *t = last;
            last = cur;
            cur = t;
            compacting = last->s.compacting; /* running on: active in the next one too */
            next_sample += interval;
        } else if (polling) {
            struct bench_sample s;
            sample_engine(r, &s);
            compacting |= s.compacting;
        }
        pthread_mutex_lock(&r->mu);
    }
    pthread_mutex_unlock(&r->mu);
    if (c->stats_csv) { /* the last, partial interval */
        take_sample(r, cur);
        write_sample(r, last, cur, compacting || cur->s.compacting);
    }
    if (c->progress)
        fprintf(stderr, "\r%*s\r", 70, "");
    free(last);
    free(cur);
    return NULL;
}

/* ---- one benchmark --------------------------------------------------------------------- */

static uint64_t bench_ops(const struct ctx *c, const struct bench_def *d)
{
    if (!strcmp(d->name, "fillsync"))
        return c->o.num / 1000 ? c->o.num / 1000 : 1;
    if (d->op == op_deleterange)
        return deleterange_count(&c->o);
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
    res->mem_negatives = per(d->memtable_filter_negatives, g);
    res->negatives = per(d->filter_negatives, g);
    res->false_pos = per(d->false_positives, g);
    res->block_reads = per(d->data_block_reads, g);
    res->bytes_read = per(d->data_block_read_bytes, g);
    res->cache_hits = per(d->cache_hits, g);
    res->device_reads = per(d->device_reads, g);
    res->device_bytes = per(d->device_read_bytes, g);
    res->blob_reads = per(d->blob_reads, g);
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

/* The per-seek figures of seekempty and seekshort from the counter
 * deltas (per op: one seek each), and the range filter's FPR measured
 * and expected: the tables' range_expected_fpr weighted by the empty
 * queries each answered in the run. */
static void range_figures(struct result *res, const struct bench_table *t0, size_t n0,
                          const struct bench_table *t1, size_t n1)
{
    const struct bench_counters *d = &res->delta;
    uint64_t n = res->ops;
    res->seeks = n;
    res->checked = per(d->range_checked, n);
    res->prefix_skips = per(d->prefix_skips, n);
    res->prefix_fp = per(d->prefix_fp, n);
    res->range_skips = per(d->range_skips, n);
    res->range_fp = per(d->range_fp, n);
    res->tables_read = per(d->range_read, n);
    res->memtable_skips = per(d->memtable_range_skips, n);
    res->seek_block_reads = per(d->data_block_reads, n);
    res->seek_device_reads = per(d->device_reads, n);
    res->index_misses = per(d->index_misses, n);
    res->prefix_checked = per(d->rocksdb_prefix_checked, n);
    res->prefix_useful = per(d->rocksdb_prefix_useful, n);
    res->cache_hit_ratio = per(d->cache_hits, d->cache_hits + d->cache_misses);
    res->range_absent = d->range_skips + d->range_fp;
    res->range_measured_fpr = per(d->range_fp, res->range_absent);
    double wsum = 0, w = 0;
    for (size_t i = 0; i < n1; i++) {
        if (!t1[i].has_range_filter)
            continue;
        int j = find_table(t0, n0, t1[i].number);
        uint64_t q = t1[i].range_absent - (j >= 0 ? t0[j].range_absent : 0);
        wsum += (double)q * t1[i].range_expected_fpr;
        w += (double)q;
    }
    res->range_expected_fpr = w > 0 ? wsum / w : 0;
}

void counters_delta(struct bench_counters *d, const struct bench_counters *a,
                           const struct bench_counters *b)
{
    *d = *b;
#define DELTA(f) d->f = b->f - a->f
    DELTA(gets);
    DELTA(memtable_hits);
    DELTA(memtable_filter_negatives);
    DELTA(tables_probed);
    DELTA(filter_negatives);
    DELTA(filter_positives);
    DELTA(false_positives);
    DELTA(data_block_reads);
    DELTA(data_block_read_bytes);
    DELTA(cache_hits);
    DELTA(cache_misses);
    DELTA(device_reads);
    DELTA(device_read_bytes);
    DELTA(compactions);
    DELTA(stalls);
    DELTA(slowdowns);
    DELTA(stall_micros);
    DELTA(slowdown_micros);
    DELTA(flushes);
    DELTA(rocksdb_useful);
    DELTA(rocksdb_full_positive);
    DELTA(rocksdb_full_true_positive);
    DELTA(blob_reads);
    DELTA(blob_read_bytes);
    DELTA(range_queries);
    DELTA(range_checked);
    DELTA(prefix_skips);
    DELTA(prefix_fp);
    DELTA(range_skips);
    DELTA(range_fp);
    DELTA(range_read);
    DELTA(memtable_range_skips);
    DELTA(rocksdb_seeks);
    DELTA(rocksdb_prefix_checked);
    DELTA(rocksdb_prefix_useful);
    DELTA(index_misses);
#undef DELTA
}

/* Prints an engine's error code (once) and returns E_FAIL; E_FAIL and
 * E_INTERRUPTED pass through. */
int engine_fail(const struct ctx *c, const char *what, const char *where, int rc)
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
        if ((c->o.histogram || r->cp.on) && !(w->hist = calloc(1, sizeof *w->hist)))
            return KV_ENOMEM;
        if (r->cp.on && !(w->cp_hist = calloc(1, sizeof *w->cp_hist)))
            return KV_ENOMEM;
        if (c->stats_csv && !(w->live = calloc(1, sizeof *w->live)))
            return KV_ENOMEM;
        size_t b = r->def->batched ? c->o.batch_size : 0;
        if (b && (!(w->bkeys = malloc(b * c->o.key_size)) ||
                  !(w->bptrs = malloc(b * sizeof *w->bptrs)) ||
                  !(w->blens = malloc(b * sizeof *w->blens))))
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
    struct histogram all = {0}, during = {0};
    int rc = 0;
    for (unsigned i = 0; i < r->nw; i++) {
        struct worker *w = &r->w[i];
        res->ops += atomic_load(&w->done);
        res->found += w->found;
        res->scanned += w->scanned;
        res->entries += w->entries;
        if (w->hist)
            hist_merge(&all, w->hist);
        if (w->cp_hist)
            hist_merge(&during, w->cp_hist);
        free(w->cp_hist);
        if (w->iter)
            r->c->e->iter_free(w->iter);
        free(w->hist);
        free(w->live);
        free(w->bkeys);
        free(w->bptrs);
        free(w->blens);
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
        res->p9999 = hist_quantile(&all, 0.9999) / 1e3;
        res->pmax = (double)all.max / 1e3;
    }
    if (r->cp.on && r->cp.rc == 0) {
        double ms = (double)(r->cp.end_ns - r->cp.begin_ns) / 1e6;
        fprintf(r->c->text,
                "checkpoint    : at %.0f%% of %s: %.1f ms, %llu files (%llu linked), %llu bytes "
                "copied; p99.9 %.1f us during it (%llu ops), %.1f us over the whole run\n",
                r->c->o.checkpoint_at * 100, r->def->name, ms, (unsigned long long)r->cp.files,
                (unsigned long long)r->cp.linked, (unsigned long long)r->cp.copied,
                hist_quantile(&during, 0.999) / 1e3, (unsigned long long)during.count,
                hist_quantile(&all, 0.999) / 1e3);
    } else if (r->cp.on && r->cp.rc == E_INTERRUPTED && !stop_requested) {
        fprintf(stderr,
                "kvbench: %s: no checkpoint: the benchmark ended before %.0f%% of its "
                "ops were done\n",
                r->def->name, r->c->o.checkpoint_at * 100);
    } else if (r->cp.on && r->cp.rc < 0 && rc == 0) {
        fprintf(stderr, "kvbench: %s: checkpoint: %s\n", r->def->name, r->cp.err);
        rc = E_FAIL;
    }
    return rc;
}

/* fillbulk: the directory its tables are written in, beside the database
 * (the same file system, so that the ingest moves them by a link). */
static int bulk_prepare(struct run *r)
{
    const char *db = r->t->path;
    kv_options ko;
    kv_options_init(&ko);
    r->bulk_target = ko.target_file_size;
    if (!(r->bulk_dir = malloc(strlen(db) + 8)))
        return E_FAIL;
    sprintf(r->bulk_dir, "%s.bulk", db);
    if (mkdir(r->bulk_dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "kvbench: fillbulk: mkdir %s: %s\n", r->bulk_dir, strerror(errno));
        return E_FAIL;
    }
    return 0;
}

/* fillbulk, after the workers: every thread's tables in one ingest (timed
 * with the puts), then the directory removed with what is left in it. */
static int bulk_ingest(struct run *r, int rc)
{
    size_t n = 0;
    for (unsigned i = 0; i < r->nw; i++)
        n += r->w[i].nbulk;
    const char **paths = malloc((n ? n : 1) * sizeof *paths);
    n = 0;
    for (unsigned i = 0; paths && i < r->nw; i++)
        for (size_t j = 0; j < r->w[i].nbulk; j++)
            paths[n++] = r->w[i].bulk_paths[j];
    if (rc == 0 && !paths)
        rc = E_FAIL;
    if (rc == 0 && n) {
        int irc = r->c->e->bulk_ingest(r->t->h, paths, n);
        if (irc != 0)
            rc = engine_fail(r->c, "fillbulk", "ingest", irc);
    }
    for (unsigned i = 0; i < r->nw; i++) {
        if (r->w[i].bulk)
            r->c->e->bulk_finish(r->w[i].bulk);
        for (size_t j = 0; j < r->w[i].nbulk; j++) {
            unlink(r->w[i].bulk_paths[j]);
            free(r->w[i].bulk_paths[j]);
        }
        free(r->w[i].bulk_paths);
    }
    free(paths);
    rmdir(r->bulk_dir);
    free(r->bulk_dir);
    return rc;
}

/* Runs the workers: they start together once all are ready, and the clock
 * runs from that moment to the last join. */
static int run_workers(struct run *r, struct result *res)
{
    struct ctx *c = r->c;
    r->nw = c->o.threads < r->ops ? c->o.threads : (unsigned)r->ops;
    /* The writer, if the benchmark has one, is one worker more, after the
     * readers: r->w[nw]. */
    r->w = calloc(r->nw + (r->def->writer ? 1 : 0), sizeof *r->w);
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
    if (rc == 0 && r->def->op == op_fillbulk)
        rc = bulk_prepare(r);
    unsigned started = 0;
    atomic_init(&r->readers_left, r->nw);
    for (; rc == 0 && started < r->nw; started++)
        if (pthread_create(&r->w[started].tid, NULL, worker_main, &r->w[started]) != 0) {
            fprintf(stderr, "kvbench: cannot start %u threads\n", r->nw);
            rc = E_FAIL;
            break;
        }
    int writing = 0;
    if (rc == 0 && r->def->writer) {
        struct worker *wr = &r->w[r->nw];
        wr->run = r;
        wr->rng = splitmix64(c->o.seed ^ hash_name("readwhilewriting writer"));
        if (pthread_create(&wr->tid, NULL, writer_main, wr) != 0) {
            fprintf(stderr, "kvbench: cannot start the writer thread\n");
            rc = E_FAIL;
        } else {
            r->writer = wr;
            writing = 1;
        }
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
    int checkpointing = rc == 0 && r->cp.on &&
                        pthread_create(&r->cp.tid, NULL, checkpoint_main, r) == 0;
    for (unsigned i = 0; i < started; i++)
        pthread_join(r->w[i].tid, NULL);
    if (r->bulk_dir) {
        int wrc = 0;
        for (unsigned i = 0; i < started && !wrc; i++)
            wrc = r->w[i].rc;
        rc = bulk_ingest(r, rc ? rc : wrc ? E_FAIL : 0);
    }
    res->seconds = now_sec() - r->t0;
    if (writing) { /* it stops once the readers are done */
        pthread_join(r->writer->tid, NULL);
        res->writes = atomic_load(&r->writer->done);
        res->writes_per_sec = res->seconds > 0 ? (double)res->writes / res->seconds : 0;
        if (r->writer->rc < 0) {
            fprintf(stderr, "kvbench: %s: writer: %s\n", r->def->name, r->writer->err);
            rc = E_FAIL;
        } else if (rc == 0 && r->writer->rc != 0) {
            rc = r->writer->rc;
        }
    }
    pthread_mutex_lock(&r->mu);
    r->finished = 1;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    if (monitor)
        pthread_join(mon, NULL);
    if (checkpointing)
        pthread_join(r->cp.tid, NULL);
    else if (r->cp.on)
        r->cp.rc = E_INTERRUPTED;
    int wrc = collect_workers(r, res);
    if (rc == 0)
        rc = wrc;
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    free(r->w);
    r->w = NULL;
    return rc;
}

const struct bench_def *bench_named(const char *name)
{
    return find_bench(name, strlen(name));
}

void storage_figures(struct result *res, const struct target *t, uint64_t written0)
{
    int rusage;
    uint64_t w = proc_write_bytes(&rusage);
    res->bytes_written = w > written0 ? w - written0 : 0;
    res->written_by_rusage = rusage;
    res->db_bytes = dir_bytes(t->path);
}

void result_settings(struct result *res, const struct target *t)
{
    res->bloom_bits = t->cfg.bloom_bits;
    res->layout = t->cfg.filter_layout;
    res->policy = t->cfg.filter_policy;
    res->direct = t->cfg.use_direct_reads;
    res->cache_size = t->cfg.cache_size;
    res->range_filter_bits = t->cfg.range_filter_bits;
    res->prefix_len = t->cfg.prefix_len;
}

/* A read benchmark's device reads per get (res->ops: keys, for batches
 * too), counted the most direct way the engine allows: kv with O_DIRECT
 * counts them itself (kv_stats.device_reads); RocksDB with O_DIRECT makes
 * one read call per block its block cache misses (/proc/self/io syscr);
 * through the page cache (any engine), the bytes the block device
 * delivered (/proc/self/io read_bytes, readahead included) in 4-KiB
 * pages. io: the /proc figures were read (bytes, calls: their changes). */
static void device_figures(struct result *res, int io, uint64_t bytes, uint64_t calls)
{
    double n = (double)(res->ops ? res->ops : 1);
    res->dev_bytes = io ? (double)bytes / n : -1;
    res->dev_how = NULL;
    if (res->after.have_device_reads && res->after.direct_reads) {
        res->dev_reads = res->device_reads;
        res->dev_how = "kv_stats.device_reads: O_DIRECT block reads";
    } else if (res->after.direct_io && io) {
        res->dev_reads = (double)calls / n;
        res->dev_how = "read calls, /proc/self/io syscr: O_DIRECT, one per block read";
    } else if (io) {
        res->dev_reads = (double)bytes / 4096.0 / n;
        res->dev_how = "/proc/self/io read_bytes / 4096: pages the device delivered";
    }
}

/* Runs a worker benchmark against t and fills *res. */
int run_bench(struct ctx *c, const struct bench_def *d, struct target *t,
                     struct result *res)
{
    memset(res, 0, sizeof *res);
    res->name = d->name;
    result_settings(res, t);
    if ((d->kind == K_READ || d->kind == K_SCAN) && c->o.drop_cache && drop_cache(t->path) != 0)
        return E_FAIL;
    struct run r = {.c = c, .def = d, .t = t, .ops = bench_ops(c, d),
                    .sync = t->cfg.sync || !strcmp(d->name, "fillsync")};
    if (c->o.checkpoint_at > 0 && !c->checkpoint_taken) { /* the first worker benchmark's */
        r.cp.on = 1;
        c->checkpoint_taken = 1;
    }
    /* fillsettled writes fillrandom's keys in fillrandom's order */
    perm_init(&r.perm, c->o.num,
              c->o.seed ^ hash_name(strcmp(d->name, "fillsettled") ? d->name : "fillrandom"));
    struct bench_counters k0;
    struct bench_table *t0 = NULL, *t1 = NULL;
    size_t n0 = 0, n1 = 0;
    int want_tables = (d->kind == K_READ || range_bench(d)) && c->e->tables;
    int rc = c->e->counters(t->h, &k0);
    if (rc == 0 && want_tables)
        rc = c->e->tables(t->h, &t0, &n0);
    int rusage;
    uint64_t written0 = proc_write_bytes(&rusage), calls0 = 0, calls1 = 0;
    int calls = (range_bench(d) || d->kind == K_READ) && proc_read_calls(&calls0) == 0;
    uint64_t rbytes0 = 0, rbytes1 = 0;
    int io = d->kind == K_READ && proc_read_bytes(&rbytes0) == 0;
    if (rc == 0)
        rc = run_workers(&r, res);
    calls = calls && proc_read_calls(&calls1) == 0;
    io = io && calls && proc_read_bytes(&rbytes1) == 0;
    storage_figures(res, t, written0);
    /* the keys and values asked of the engine (a delete: its key) */
    if (d->kind == K_WRITE)
        res->user_bytes = res->ops * (d->op == op_deleterandom  ? c->o.key_size
                                      : d->op == op_deleterange ? 2 * c->o.key_size
                                      : d->op == op_mergerandom ? c->o.key_size + 8
                                                                : c->o.key_size + c->o.value_size);
    res->user_bytes += res->writes * (c->o.key_size + c->o.value_size);
    if (rc == 0)
        rc = c->e->counters(t->h, &res->after);
    if (rc == 0 && want_tables)
        rc = c->e->tables(t->h, &t1, &n1);
    if (rc == 0) {
        counters_delta(&res->delta, &k0, &res->after);
        if (d->kind == K_READ) {
            read_figures(c->e, res, t0, n0, t1, n1);
            device_figures(res, io, rbytes1 - rbytes0, calls1 - calls0);
        }
        if (range_bench(d))
            range_figures(res, t0, n0, t1, n1);
        res->read_calls = !calls || !range_bench(d)
                              ? -1
                              : (double)(calls1 - calls0) / (double)(res->ops ? res->ops : 1);
    }
    /* Said once, as soon as a table was refused: the device reads the
     * figures would show are page-cache reads. */
    if (rc == 0 && t->cfg.use_direct_reads && res->after.direct_reads_refused &&
        !c->warned_refused) {
        fprintf(stderr, "kvbench: warning: the file system of %s refused O_DIRECT (or keeps "
                        "its files in memory: tmpfs); data blocks are read through the page "
                        "cache\n", t->path);
        c->warned_refused = 1;
    }
    free(t0);
    free(t1);
    return rc == 0 ? 0 : engine_fail(c, d->name, d->kind == K_WRITE ? "write" : "read", rc);
}


/* ---- catchup --------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One round of catchup's writes: a memtable's worth (nine tenths of
 * write_buffer_size) of random keys of [0, num), through the writer t. */
static int catchup_writes(struct ctx *c, struct target *t, uint64_t round)
{
    size_t ks = c->o.key_size, vs = c->o.value_size;
    uint64_t n = (uint64_t)c->o.write_buffer_size * 9 / 10 / (ks + vs + 12);
    uint8_t key[256];
    for (uint64_t i = 0; i < n; i++) {
        uint64_t x = splitmix64(c->o.seed ^ (round << 32) ^ i) % c->o.num;
        make_key(&c->o, key, x, 0);
        int rc = c->e->put(t->h, key, ks, value_for(c, x), vs, 0);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int bench_catchup(struct ctx *c, struct target *t, struct result *res)
{
    memset(res, 0, sizeof *res);
    res->name = "catchup";
    result_settings(res, t);
    if (!c->e->catch_up) {
        fprintf(c->text, "%-12s : not supported by %s (it has no read-only handles)\n", "catchup",
                c->e->name);
        return 0;
    }
    /* The handle timed: t's own when it is read-only (another process
     * writes), else a read-only handle beside t, which writes. */
    void *reader = t->h;
    if (!t->cfg.read_only) {
        struct bench_config rc = t->cfg;
        rc.read_only = 1;
        rc.create = 0;
        int e = c->e->open(&rc, t->path, &reader);
        if (e != 0)
            return engine_fail(c, "catchup", "open read-only", e);
    }
    uint64_t rounds = c->o.reads ? c->o.reads : 20;
    double *ms = malloc(rounds * sizeof *ms);
    int rc = ms ? 0 : E_FAIL;
    for (uint64_t i = 0; rc == 0 && i < rounds; i++) {
        if (!t->cfg.read_only && (rc = catchup_writes(c, t, i)) != 0)
            break;
        double t0 = now_sec();
        rc = c->e->catch_up(reader);
        ms[i] = (now_sec() - t0) * 1e3;
        res->seconds += ms[i] / 1e3;
        res->ops++;
    }
    if (rc == 0 && res->ops) {
        qsort(ms, res->ops, sizeof *ms, cmp_double);
        uint64_t n = res->ops;
        fprintf(c->text,
                "catchup      : %llu kv_catch_up calls%s: min %.2f ms, median %.2f ms, "
                "p99 %.2f ms, max %.2f ms\n",
                (unsigned long long)n,
                t->cfg.read_only ? "" : ", each after a memtable's worth of puts", ms[0], ms[n / 2],
                ms[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1], ms[n - 1]);
    }
    free(ms);
    if (reader != t->h)
        c->e->close(reader);
    if (rc == 0)
        rc = c->e->counters(t->h, &res->after);
    return rc == 0 ? 0 : engine_fail(c, "catchup", "catch up", rc);
}
