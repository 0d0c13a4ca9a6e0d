/* filterbench_range.c - filterbench --range: kv's range filter
 * (<kv/range_filter.h>) asked about empty ranges.
 *
 *   filterbench --range [--keys N] [--bits LIST] [--widths LIST]
 *                       [--shape uniform|kvbench|prefixed|both|all]
 *                       [--stride S] [--id_bytes B] [--queries Q]
 *                       [--tables T] [--seed X] [--csv FILE] [--svg FILE]
 *
 * For each shape of keys and each bits per key of LIST (default 4:24:2;
 * FROM:TO:STEP or a comma list) it builds T range filters (default 4) of N
 * keys each (default 250,000, a typical table; each with keys and a seed
 * of its own) and asks them about Q empty ranges of each width (default
 * 1,000,000 per width and placement, shared out over the T filters; widths
 * 1,16,256,4096). A "maybe" for an empty range is a false positive.
 * Reported per shape, bits and width: the filter's real bits per key
 * (encoded bytes * 8 / keys), build ns per key (builder new, adds,
 * finish), the measured FPR beside the expected one (kv_rfilter_may_hold's
 * expectation for each query, averaged), the worst table's FPR, the FPR of
 * "near" ranges, and ns per query. Then, per shape and width, the bits per
 * key at which the measured FPR falls to 1% and 5%, and the smallest bits
 * per key of LIST at which every table skips at least 95% of width-16
 * empty ranges.
 *
 * Widths count keys of the key space: how many keys of the shape a range
 * could hold, as kvbench's --range_width counts them.
 *  - uniform: N distinct random 64-bit integers as 8 big-endian bytes; the
 *    key space is every 8-byte string, so a range of width w is [x, x + w)
 *    as integers.
 *  - kvbench: kvbench's keys, key index j written as the 16 decimal digits
 *    of 2j; a table holds indexes base + i * S (i < N, S the stride,
 *    kvbench --key_stride, default 64, base random); a range of width w is
 *    [key(j), key(j + w)): w key indexes. An empty range must fit between
 *    two keys, so a width of S or more is measured on tables built with
 *    stride 2w instead (each row says its stride).
 *  - prefixed (only with --shape prefixed or all): a random id of B bytes
 *    (--id_bytes, default 4) then an 8-byte big-endian counter, 256 keys
 *    per id at counters t0 + i * S: a device and its timestamps. A range of
 *    width w is w consecutive counters within one id, placed as kvbench's
 *    are. With 8-byte ids the plain map's 64 bits would hold little but the
 *    id: the filter takes the ids into a dictionary (encoding version 2).
 * Ranges are placed two ways:
 *  - "empty": uniform keys: x uniform over the table's key span, drawn
 *    again while [x, x + w) holds a key; kvbench keys: after a random key,
 *    at an offset uniform over those that keep the range empty;
 *  - "near": starting right after a stored key (x = key + 1; kvbench:
 *    offset 1): the correlated queries of a workload that asks about the
 *    neighbourhood of keys it wrote.
 * Every filter is also asked about [key, next possible key) for a sample
 * of its keys: a "no" there is a false negative, a fault (exit 1). The
 * queries are made before the clock starts. --csv writes one row per cell;
 * --svg charts measured and expected FPR against bits per key, one panel
 * per shape. */
#define _POSIX_C_SOURCE 200809L /* sysconf */
#include "filterbench_range.h"

#include <kv/range_filter.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"
#include "kvbench/chart.h"

#define MAX_LIST 64
#define MAX_TABLES 64
#define MAX_NUM 1e12 /* the largest number an option takes */
#define KVBENCH_DIGITS 16
#define CHECK_KEYS 4096 /* keys per filter whose ranges must answer "maybe" */

enum { SHAPE_UNIFORM, SHAPE_KVBENCH, SHAPE_PREFIXED, NSHAPES };
static const char *const shape_names[NSHAPES] = {"uniform", "kvbench", "prefixed"};
#define PREFIX_KEYS 256          /* prefixed keys: keys per id */
#define PREFIX_T0 1700000000000u /* prefixed keys: the first counter value */

enum { P_EMPTY, P_NEAR, NPLACES };

struct ropts {
    uint64_t keys, queries, stride, seed;
    unsigned tables, nbits, nwidths, id_bytes;
    double bits[MAX_LIST];
    uint64_t widths[MAX_LIST];
    int shape[NSHAPES];
    const char *csv, *svg;
};

/* One cell: a shape, a bits per key, a width; sums over the tables. */
struct cell {
    uint64_t stride;           /* kvbench: the tables' stride */
    uint64_t queries[NPLACES]; /* asked, per placement */
    uint64_t maybe[NPLACES];   /* answered "maybe" */
    double expected[NPLACES];  /* sum of the per-query expectations */
    double query_ns;           /* all empty-placement queries */
    double build_ns, bpk;      /* sums of per-table figures */
    double worst;              /* the largest one table's FPR (empty) */
    unsigned tables;
};

/* One table's keys: n keys of ksize bytes at k; uniform keys also as
 * sorted integers. */
struct table {
    int shape;
    uint8_t *k;
    uint64_t *ints;
    uint64_t n, base, stride;
    uint64_t nids; /* prefixed keys: their ids, sorted, in ints */
    size_t ksize;
};

static inline uint64_t rnd(uint64_t *s)
{
    *s += 0x9E3779B97F4A7C15ull;
    return splitmix64(*s);
}

static inline void be64(uint64_t x, uint8_t *k)
{
    for (int i = 7; i >= 0; i--, x >>= 8)
        k[i] = (uint8_t)x;
}

/* kvbench's key of index j: the decimal digits of 2j (tools/kvbench/run.c). */
static inline void kvbench_key(uint64_t j, uint8_t *k)
{
    uint64_t x = 2 * j;
    for (size_t i = KVBENCH_DIGITS; i-- > 0; x /= 10)
        k[i] = (uint8_t)('0' + x % 10);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The bytes of a key of the shape. */
static size_t key_size(const struct ropts *o, int shape)
{
    return shape == SHAPE_UNIFORM ? 8 : shape == SHAPE_KVBENCH ? KVBENCH_DIGITS : o->id_bytes + 8;
}

/* A prefixed key: the id's low id_bytes bytes, then the counter, both
 * big-endian. */
static inline void prefixed_key(uint64_t id, unsigned id_bytes, uint64_t counter, uint8_t *k)
{
    for (unsigned i = 0; i < id_bytes; i++)
        k[i] = (uint8_t)(id >> (8 * (id_bytes - 1 - i)));
    be64(counter, k + id_bytes);
}

/* The stride a kvbench or prefixed table needs for empty ranges of width w. */
static uint64_t stride_for(const struct ropts *o, uint64_t w)
{
    return o->stride > w ? o->stride : 2 * w;
}

/* Makes table t's keys. 0, or -1 when out of memory. */
static int table_make(struct table *t, const struct ropts *o, int shape, unsigned ti,
                      uint64_t stride)
{
    *t =
        (struct table){.shape = shape, .n = o->keys, .stride = stride, .ksize = key_size(o, shape)};
    uint64_t s = o->seed * 1000003 + ti * 7919 + (uint64_t)shape;
    if (shape == SHAPE_PREFIXED) /* whole ids: N rounded up */
        t->n = (t->n + PREFIX_KEYS - 1) / PREFIX_KEYS * PREFIX_KEYS;
    t->k = malloc(t->n * t->ksize);
    if (!t->k)
        return -1;
    if (shape == SHAPE_KVBENCH) {
        /* somewhere in a store of 20 such tables */
        t->base = (rnd(&s) % (19 * t->n)) * stride;
        for (uint64_t i = 0; i < t->n; i++)
            kvbench_key(t->base + i * stride, t->k + i * t->ksize);
        return 0;
    }
    t->ints = malloc(t->n * sizeof *t->ints);
    if (!t->ints)
        return -1;
    uint64_t mask = shape == SHAPE_UNIFORM || o->id_bytes == 8
                        ? UINT64_MAX
                        : ((uint64_t)1 << (8 * o->id_bytes)) - 1;
    if (shape == SHAPE_PREFIXED)
        t->n /= PREFIX_KEYS; /* ids, in t->ints */
    for (uint64_t i = 0; i < t->n; i++)
        t->ints[i] = rnd(&s) & mask;
    qsort(t->ints, t->n, sizeof *t->ints, cmp_u64);
    uint64_t m = 0; /* distinct, in order */
    for (uint64_t i = 0; i < t->n; i++)
        if (m == 0 || t->ints[i] != t->ints[m - 1])
            t->ints[m++] = t->ints[i];
    t->n = m;
    if (shape == SHAPE_PREFIXED) { /* each id's keys: PREFIX_KEYS counters, stride apart */
        t->nids = m;
        t->n = m * PREFIX_KEYS;
        for (uint64_t i = 0; i < t->n; i++)
            prefixed_key(t->ints[i / PREFIX_KEYS], o->id_bytes,
                         PREFIX_T0 + (i % PREFIX_KEYS) * stride, t->k + i * t->ksize);
        return 0;
    }
    for (uint64_t i = 0; i < m; i++)
        be64(t->ints[i], t->k + i * t->ksize);
    return 0;
}

static void table_free(struct table *t)
{
    free(t->k);
    free(t->ints);
}

/* The index of the first uniform key >= x (n when none). */
static uint64_t lower_bound(const struct table *t, uint64_t x)
{
    uint64_t lo = 0, hi = t->n;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (t->ints[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Fills lo[] and hi[] with q empty ranges of width w placed as `place`
 * says (see the top of the file). */
static void make_ranges(const struct table *t, uint64_t w, int place, uint64_t q, uint64_t *s,
                        uint8_t *lo, uint8_t *hi)
{
    size_t ks = t->ksize;
    for (uint64_t i = 0; i < q; i++) {
        if (t->shape == SHAPE_PREFIXED) { /* within one id, as kvbench's between two keys */
            uint64_t id = t->ints[rnd(s) % t->nids], at = rnd(s) % (PREFIX_KEYS - 1);
            uint64_t off = place == P_NEAR ? 1 : 1 + rnd(s) % (t->stride - w);
            uint64_t c = PREFIX_T0 + at * t->stride + off;
            prefixed_key(id, (unsigned)(ks - 8), c, lo + i * ks);
            prefixed_key(id, (unsigned)(ks - 8), c + w, hi + i * ks);
            continue;
        }
        uint64_t k = rnd(s) % (t->n - 1);
        if (t->shape == SHAPE_KVBENCH) {
            uint64_t off = place == P_NEAR ? 1 : 1 + rnd(s) % (t->stride - w);
            uint64_t j = t->base + k * t->stride + off;
            kvbench_key(j, lo + i * ks);
            kvbench_key(j + w, hi + i * ks);
            continue;
        }
        uint64_t x;
        for (;;) {
            if (place == P_NEAR)
                x = t->ints[k] + 1;
            else
                x = t->ints[0] + rnd(s) % (t->ints[t->n - 1] - t->ints[0] - w);
            uint64_t at = lower_bound(t, x);
            if (at == t->n || t->ints[at] - x >= w)
                break;
            k = rnd(s) % (t->n - 1);
        }
        be64(x, lo + i * ks);
        be64(x + w, hi + i * ks);
    }
}

/* Builds t's filter at `bits` per key: *enc (kv_free) and *len, and the
 * ns per key it took. KV_OK or the builder's error. */
static int build(const struct table *t, double bits, uint64_t seed, uint8_t **enc, size_t *len,
                 double *ns_per_key)
{
    double t0 = now_ns();
    kv_rfilter_builder *b;
    int rc = kv_rfilter_builder_new(bits, seed, &b);
    if (rc != KV_OK)
        return rc;
    size_t ks = t->ksize;
    for (const uint8_t *k = t->k, *end = t->k + t->n * ks; k < end && rc == KV_OK; k += ks)
        rc = kv_rfilter_builder_add(b, k, ks);
    if (rc == KV_OK)
        rc = kv_rfilter_builder_finish(b, enc, len);
    kv_rfilter_builder_free(b);
    *ns_per_key = (now_ns() - t0) / (double)t->n;
    return rc;
}

/* Asks f about [key, next possible key) for a sample of t's keys; the
 * number answered "no" (false negatives). */
static uint64_t false_negatives(const kv_rfilter *f, const struct table *t)
{
    uint8_t lo[KVBENCH_DIGITS], hi[KVBENCH_DIGITS];
    uint64_t bad = 0, step = t->n > CHECK_KEYS ? t->n / CHECK_KEYS : 1;
    for (uint64_t i = 0; i < t->n; i += step) {
        if (t->shape == SHAPE_PREFIXED) {
            uint64_t c = PREFIX_T0 + (i % PREFIX_KEYS) * t->stride, id = t->ints[i / PREFIX_KEYS];
            prefixed_key(id, (unsigned)(t->ksize - 8), c, lo);
            prefixed_key(id, (unsigned)(t->ksize - 8), c + 1, hi);
        } else if (t->shape == SHAPE_KVBENCH) {
            kvbench_key(t->base + i * t->stride, lo);
            kvbench_key(t->base + i * t->stride + 1, hi);
        } else {
            be64(t->ints[i], lo);
            if (t->ints[i] == UINT64_MAX) { /* no next key: to the end */
                bad += !kv_rfilter_may_hold(f, lo, 8, NULL, 0, NULL);
                continue;
            }
            be64(t->ints[i] + 1, hi);
        }
        bad += !kv_rfilter_may_hold(f, lo, t->ksize, hi, t->ksize, NULL);
    }
    return bad;
}

/* Asks f about the q ranges; adds to the cell's sums for `place`. */
static void ask(const kv_rfilter *f, const uint8_t *lo, const uint8_t *hi, size_t ks, uint64_t q,
                int place, struct cell *c, uint64_t *maybe_out)
{
    uint64_t maybe = 0;
    double exp_sum = 0;
    double t0 = now_ns();
    for (uint64_t i = 0; i < q; i++) {
        double e;
        maybe += (uint64_t)kv_rfilter_may_hold(f, lo + i * ks, ks, hi + i * ks, ks, &e);
        exp_sum += e;
    }
    double ns = now_ns() - t0;
    if (place == P_EMPTY)
        c->query_ns += ns;
    c->queries[place] += q;
    c->maybe[place] += maybe;
    c->expected[place] += exp_sum;
    *maybe_out = maybe;
}

/* Uniform keys asked about ranges as wide as kvbench's key-index unit would
 * be at their density (the mean gap over the stride), per bits per key. */
struct gap_probe {
    uint64_t width, queries[MAX_LIST], maybe[MAX_LIST];
};

#define GAP_QUERIES 10000

/* The widths measured on tables of this shape and stride. */
static int width_in_group(const struct ropts *o, int shape, uint64_t stride, uint64_t w)
{
    return shape == SHAPE_UNIFORM || stride_for(o, w) == stride;
}

/* Builds and decodes table t's filter at each bits per key, checks it for
 * false negatives and adds its size and build time to the cells of the
 * group's widths. 0, or -1 (reported). */
static int build_all(const struct ropts *o, const struct table *t, unsigned ti, uint64_t stride,
                     struct cell *cells, uint8_t **enc, kv_rfilter **f)
{
    uint64_t seed = splitmix64(o->seed ^ ((uint64_t)ti << 8 | (uint64_t)t->shape));
    for (unsigned bi = 0; bi < o->nbits; bi++) {
        size_t len = 0;
        double ns;
        int rc = build(t, o->bits[bi], seed, &enc[bi], &len, &ns);
        if (rc == KV_OK)
            rc = kv_rfilter_decode(enc[bi], len, &f[bi]);
        if (rc != KV_OK) {
            fprintf(stderr, "filterbench: range filter at %g bits per key: %s (%s)\n", o->bits[bi],
                    kv_strerror(rc), kv_error_text());
            return -1;
        }
        uint64_t bad = false_negatives(f[bi], t);
        if (bad) {
            fprintf(stderr, "filterbench: %s keys, %g bits per key: %llu FALSE NEGATIVES\n",
                    shape_names[t->shape], o->bits[bi], (unsigned long long)bad);
            return -1;
        }
        for (unsigned wi = 0; wi < o->nwidths; wi++) {
            if (!width_in_group(o, t->shape, stride, o->widths[wi]))
                continue;
            struct cell *c = &cells[bi * o->nwidths + wi];
            c->stride = t->shape != SHAPE_UNIFORM ? stride : 0;
            c->build_ns += ns;
            c->bpk += (double)len * 8 / (double)t->n;
            c->tables++;
        }
    }
    return 0;
}

/* Uniform keys only: ranges of gap->width integers, empty, placed
 * uniformly, asked of each filter. */
static void ask_gap(const struct ropts *o, const struct table *t, kv_rfilter **f,
                    struct gap_probe *gap, uint8_t *lo, uint8_t *hi, uint64_t *s)
{
    uint64_t q = GAP_QUERIES / o->tables + 1;
    make_ranges(t, gap->width, P_EMPTY, q, s, lo, hi);
    for (unsigned bi = 0; bi < o->nbits; bi++) {
        for (uint64_t i = 0; i < q; i++)
            gap->maybe[bi] += (uint64_t)kv_rfilter_may_hold(f[bi], lo + i * 8, 8, hi + i * 8, 8,
                                                            NULL);
        gap->queries[bi] += q;
    }
}

/* Measures one shape on tables of one stride (uniform: every width; kvbench:
 * the widths stride_for gives this stride): the cells [bits][width]. 0, or
 * 1 (reported). */
static int run_group(const struct ropts *o, int shape, uint64_t stride, struct cell *cells,
                     struct gap_probe *gap)
{
    size_t ks = key_size(o, shape);
    uint64_t per = o->queries / o->tables ? o->queries / o->tables : 1;
    if (per < GAP_QUERIES / o->tables + 1)
        per = GAP_QUERIES / o->tables + 1;
    uint8_t *lo = malloc(per * ks), *hi = malloc(per * ks);
    uint8_t *enc[MAX_LIST] = {0};
    kv_rfilter *f[MAX_LIST] = {0};
    int rc = lo && hi ? 0 : 1;
    for (unsigned ti = 0; ti < o->tables && rc == 0; ti++) {
        struct table t;
        if (table_make(&t, o, shape, ti, stride) != 0)
            rc = 1;
        else if (build_all(o, &t, ti, stride, cells, enc, f) != 0)
            rc = 1;
        uint64_t s = splitmix64(o->seed + 0x5151 * (ti + 1) + stride);
        for (unsigned wi = 0; wi < o->nwidths && rc == 0; wi++) {
            uint64_t w = o->widths[wi];
            if (!width_in_group(o, shape, stride, w))
                continue;
            struct cell *row = &cells[wi];
            for (int place = 0; place < NPLACES; place++) {
                make_ranges(&t, w, place, per, &s, lo, hi);
                for (unsigned bi = 0; bi < o->nbits; bi++) {
                    struct cell *c = &row[bi * o->nwidths];
                    uint64_t maybe;
                    ask(f[bi], lo, hi, ks, per, place, c, &maybe);
                    if (place == P_EMPTY && (double)maybe / (double)per > c->worst)
                        c->worst = (double)maybe / (double)per;
                }
            }
        }
        if (rc == 0 && shape == SHAPE_UNIFORM && gap)
            ask_gap(o, &t, f, gap, lo, hi, &s);
        for (unsigned bi = 0; bi < o->nbits; bi++) {
            kv_rfilter_free(f[bi]);
            kv_free(enc[bi]);
            f[bi] = NULL;
            enc[bi] = NULL;
        }
        table_free(&t);
    }
    if (!lo || !hi)
        fprintf(stderr, "filterbench: out of memory\n");
    free(lo);
    free(hi);
    return rc;
}

/* ---- what it found ---------------------------------------------------------- */

static double fpr_of(const struct cell *c, int place)
{
    return c->queries[place] ? (double)c->maybe[place] / (double)c->queries[place] : 0;
}

static double expected_of(const struct cell *c, int place)
{
    return c->queries[place] ? c->expected[place] / (double)c->queries[place] : 0;
}

static double bpk_of(const struct cell *c)
{
    return c->tables ? c->bpk / c->tables : 0;
}

/* The real bits per key at which the measured FPR of a width's cells
 * (cells[bi * stride], bits increasing) falls to `target`: log-linear
 * between the two points either side; -1 when even the most bits do not
 * reach it, 0 when the fewest already do. */
static double bits_for(const struct ropts *o, const struct cell *cells, size_t step, double target)
{
    for (unsigned bi = 0; bi < o->nbits; bi++) {
        const struct cell *c = &cells[bi * step];
        double f = fpr_of(c, P_EMPTY);
        if (f > target)
            continue;
        if (bi == 0)
            return 0;
        const struct cell *p = &cells[(bi - 1) * step];
        double fp = fpr_of(p, P_EMPTY), b0 = bpk_of(p), b1 = bpk_of(c);
        if (!(f > 0))
            return b1;
        return b0 + (log(target) - log(fp)) / (log(f) - log(fp)) * (b1 - b0);
    }
    return -1;
}

/* The CPU's name from /proc/cpuinfo ("unknown CPU"), how many are online
 * and the load average when the run starts. */
static void cpu_name(char *out, size_t cap)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    char name[200] = "unknown CPU";
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !colon)
            continue;
        colon += 1 + (colon[1] == ' ');
        colon[strcspn(colon, "\n")] = 0;
        snprintf(name, sizeof name, "%s", colon);
        break;
    }
    if (f)
        fclose(f);
    double load = -1;
    f = fopen("/proc/loadavg", "r");
    if (f && fscanf(f, "%lf", &load) != 1)
        load = -1;
    if (f)
        fclose(f);
    if (load >= 0) /* a shared machine slows the timings, never the rates */
        snprintf(out, cap, "%s, %ld CPUs, load average %.1f", name, n, load);
    else
        snprintf(out, cap, "%s, %ld CPUs", name, n);
}

static void print_cells(const struct ropts *o, struct cell *const cells[NSHAPES])
{
    printf("%-8s %6s %5s %8s %8s %6s %9s %9s %6s %9s %9s %8s\n", "shape", "stride", "bits",
           "bits/key", "build ns", "width", "fpr %", "expect %", "ratio", "worst %", "near %",
           "query ns");
    for (int sh = 0; sh < NSHAPES; sh++)
        for (unsigned wi = 0; cells[sh] && wi < o->nwidths; wi++)
            for (unsigned bi = 0; bi < o->nbits; bi++) {
                const struct cell *c = &cells[sh][bi * o->nwidths + wi];
                double f = fpr_of(c, P_EMPTY), e = expected_of(c, P_EMPTY);
                char ratio[16] = "-", stride[24] = "-";
                if (f > 0 && e > 0)
                    snprintf(ratio, sizeof ratio, "%.3f", f / e);
                if (c->stride)
                    snprintf(stride, sizeof stride, "%llu", (unsigned long long)c->stride);
                printf("%-8s %6s %5g %8.2f %8.1f %6llu %9.4f %9.4f %6s %9.4f %9.4f %8.1f\n",
                       shape_names[sh], stride, o->bits[bi], bpk_of(c),
                       c->tables ? c->build_ns / c->tables : 0, (unsigned long long)o->widths[wi],
                       100 * f, 100 * e, ratio, 100 * c->worst, 100 * fpr_of(c, P_NEAR),
                       c->queries[P_EMPTY] ? c->query_ns / (double)c->queries[P_EMPTY] : 0);
            }
}

/* bits_for's answer as text. */
static void fmt_bits(char *buf, size_t n, double b, const struct ropts *o)
{
    if (b < 0)
        snprintf(buf, n, "> %g", o->bits[o->nbits - 1]);
    else if (b == 0)
        snprintf(buf, n, "<= %g", o->bits[0]);
    else
        snprintf(buf, n, "%.1f", b);
}

/* Per shape and width: the bits per key for 1% and 5%, the FPR at 16. */
static void print_memory(const struct ropts *o, struct cell *const cells[NSHAPES])
{
    int at16 = -1;
    for (unsigned bi = 0; bi < o->nbits; bi++)
        if (o->bits[bi] == 16)
            at16 = (int)bi;
    printf("\nreal bits per key at which the measured FPR of empty ranges falls to 1%% and 5%%\n"
           "(log-linear between the settings either side), and the FPR at 16 bits per key:\n\n");
    printf("%-8s %6s %6s %8s %8s %10s\n", "shape", "width", "stride", "1%", "5%", "fpr@16 %");
    for (int sh = 0; sh < NSHAPES; sh++)
        for (unsigned wi = 0; cells[sh] && wi < o->nwidths; wi++) {
            const struct cell *col = &cells[sh][wi];
            char b1[24], b5[24], f16[24] = "-", stride[24] = "-";
            fmt_bits(b1, sizeof b1, bits_for(o, col, o->nwidths, 0.01), o);
            fmt_bits(b5, sizeof b5, bits_for(o, col, o->nwidths, 0.05), o);
            if (at16 >= 0)
                snprintf(f16, sizeof f16, "%.4f",
                         100 * fpr_of(&col[(unsigned)at16 * o->nwidths], P_EMPTY));
            if (col->stride)
                snprintf(stride, sizeof stride, "%llu", (unsigned long long)col->stride);
            printf("%-8s %6llu %6s %8s %8s %10s\n", shape_names[sh],
                   (unsigned long long)o->widths[wi], stride, b1, b5, f16);
        }
}

/* The default's rule: the fewest bits per key of the list at which every
 * table skips at least 95% of width-16 empty ranges of kvbench keys. */
static void print_default(const struct ropts *o, struct cell *const cells[NSHAPES])
{
    int w16 = -1;
    for (unsigned wi = 0; wi < o->nwidths; wi++)
        if (o->widths[wi] == 16)
            w16 = (int)wi;
    if (!cells[SHAPE_KVBENCH] || w16 < 0)
        return;
    for (unsigned bi = 0; bi < o->nbits; bi++) {
        const struct cell *c = &cells[SHAPE_KVBENCH][bi * o->nwidths + (unsigned)w16];
        if (c->worst > 0.05)
            continue;
        printf("\ndefault rule: kvbench keys, stride %llu, width 16: every table skips >= 95%% of "
               "empty ranges\nfrom %g bits per key (real %.2f): FPR %.3f%% over all tables, "
               "%.3f%% the worst, %.3f%% expected\n",
               (unsigned long long)c->stride, o->bits[bi], bpk_of(c), 100 * fpr_of(c, P_EMPTY),
               100 * c->worst, 100 * expected_of(c, P_EMPTY));
        return;
    }
    printf(
        "\ndefault rule: no setting of the list makes every table skip 95%% of width-16 ranges\n");
}

static void print_gap(const struct ropts *o, const struct gap_probe *gap)
{
    printf("\nuniform keys, empty ranges of the mean gap / %llu (%llu integers, one kvbench key "
           "index at this density):\nmeasured FPR %%",
           (unsigned long long)o->stride, (unsigned long long)gap->width);
    for (unsigned bi = 0; bi < o->nbits; bi++)
        printf(" %g:%.1f", o->bits[bi],
               gap->queries[bi] ? 100.0 * (double)gap->maybe[bi] / (double)gap->queries[bi] : 0);
    printf("  (bits per key:FPR)\n");
}

static int write_csv(const struct ropts *o, struct cell *const cells[NSHAPES])
{
    FILE *f = fopen(o->csv, "w");
    if (!f) {
        fprintf(stderr, "filterbench: cannot write %s\n", o->csv);
        return -1;
    }
    fprintf(f, "shape,stride,keys,tables,bits,bits_per_key,build_ns_per_key,width,queries,fpr,"
               "expected_fpr,worst_table_fpr,near_queries,near_fpr,near_expected_fpr,query_ns\n");
    for (int sh = 0; sh < NSHAPES; sh++)
        for (unsigned wi = 0; cells[sh] && wi < o->nwidths; wi++)
            for (unsigned bi = 0; bi < o->nbits; bi++) {
                const struct cell *c = &cells[sh][bi * o->nwidths + wi];
                fprintf(f,
                        "%s,%llu,%llu,%u,%g,%.4f,%.2f,%llu,%llu,%.6g,%.6g,%.6g,%llu,%.6g,%.6g,"
                        "%.2f\n",
                        shape_names[sh], (unsigned long long)c->stride, (unsigned long long)o->keys,
                        c->tables, o->bits[bi], bpk_of(c), c->tables ? c->build_ns / c->tables : 0,
                        (unsigned long long)o->widths[wi], (unsigned long long)c->queries[P_EMPTY],
                        fpr_of(c, P_EMPTY), expected_of(c, P_EMPTY), c->worst,
                        (unsigned long long)c->queries[P_NEAR], fpr_of(c, P_NEAR),
                        expected_of(c, P_NEAR),
                        c->queries[P_EMPTY] ? c->query_ns / (double)c->queries[P_EMPTY] : 0);
            }
    return fclose(f) == 0 ? 0 : -1;
}

/* ---- the chart ---------------------------------------------------------------- */

static const char *const colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                                      "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};
#define NCOLOURS (sizeof colours / sizeof colours[0])

/* One width's measured (solid, with dots) or expected (dashed) FPR by bits
 * per key; values the log axis cannot show (0: no false positive met) are
 * left out. */
static void svg_series(FILE *f, const struct panel *p, const struct ropts *o,
                       const struct cell *col, int expected, const char *colour)
{
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%s\"%s points=\"", colour,
            expected ? "1.5" : "2", expected ? " stroke-dasharray=\"5 4\"" : "");
    for (unsigned bi = 0; bi < o->nbits; bi++) {
        const struct cell *c = &col[bi * o->nwidths];
        double v = expected ? expected_of(c, P_EMPTY) : fpr_of(c, P_EMPTY);
        if (v >= p->ymin)
            fprintf(f, " %.1f,%.1f", panel_x(p, o->bits[bi]), panel_y(p, v));
    }
    fputs("\"/>\n", f);
    for (unsigned bi = 0; !expected && bi < o->nbits; bi++) {
        const struct cell *c = &col[bi * o->nwidths];
        double v = fpr_of(c, P_EMPTY);
        if (v >= p->ymin)
            fprintf(f,
                    "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title>%g bits per "
                    "key (real %.2f): measured %.4g%%, expected %.4g%%</title></circle>\n",
                    panel_x(p, o->bits[bi]), panel_y(p, v), colour, o->bits[bi], bpk_of(c), 100 * v,
                    100 * expected_of(c, P_EMPTY));
    }
}

/* A rate as a percentage with the digits it needs: 10%, 0.01%, 0.00001%. */
static void pct_fmt(char *buf, size_t n, double v)
{
    double p = 100 * v;
    int digits = p >= 1 ? 0 : (int)ceil(-log10(p) - 1e-9);
    snprintf(buf, n, "%.*f%%", digits, p);
}

static int write_svg(const struct ropts *o, struct cell *const cells[NSHAPES], const char *cpu)
{
    FILE *f = fopen(o->svg, "w");
    if (!f) {
        fprintf(stderr, "filterbench: cannot write %s\n", o->svg);
        return -1;
    }
    int panels = 0;
    for (int sh = 0; sh < NSHAPES; sh++)
        panels += cells[sh] != NULL;
    const double W = panels > 2 ? 100 + 480 * panels : 1000, H = 540;
    double lo = o->bits[0], hi = o->bits[o->nbits - 1];
    struct panel p = {.y = 130,
                      .w = 390,
                      .h = 320,
                      .log = 1,
                      .xmin = lo,
                      .xmax = hi > lo ? hi : lo + 1,
                      .xlabel = "bits per key (asked)",
                      .ylabel = "false-positive rate",
                      .yfmt = pct_fmt};
    /* one y range for every panel: every value shows */
    double *v = malloc(2 * NSHAPES * (size_t)o->nbits * o->nwidths * sizeof *v);
    size_t nv = 0;
    for (int sh = 0; v && sh < NSHAPES; sh++)
        for (size_t i = 0; cells[sh] && i < (size_t)o->nbits * o->nwidths; i++) {
            v[nv++] = fpr_of(&cells[sh][i], P_EMPTY);
            v[nv++] = expected_of(&cells[sh][i], P_EMPTY);
        }
    panel_range(&p, v, nv);
    free(v);
    svg_begin(f, W, H);
    svg_text(f, W / 2, 28, "middle", " font-size=\"18\" font-weight=\"bold\"",
             "kv range filter: false positives of empty ranges, measured and expected");
    char sub[512];
    snprintf(sub, sizeof sub, "%llu keys per table, %u tables, %llu ranges per width; %s",
             (unsigned long long)o->keys, o->tables, (unsigned long long)o->queries, cpu);
    svg_text(f, W / 2, 48, "middle", " fill=\"#555\"", sub);
    for (unsigned wi = 0; wi < o->nwidths; wi++) {
        double x = 120 + 110 * wi;
        char label[48];
        snprintf(label, sizeof label, "width %llu", (unsigned long long)o->widths[wi]);
        fprintf(f,
                "<line x1=\"%.0f\" y1=\"78\" x2=\"%.0f\" y2=\"78\" stroke=\"%s\" "
                "stroke-width=\"3\"/>\n",
                x, x + 24, colours[wi % NCOLOURS]);
        svg_text(f, x + 30, 82, "start", "", label);
    }
    fprintf(f, "<line x1=\"640\" y1=\"78\" x2=\"664\" y2=\"78\" stroke=\"#444\" "
               "stroke-width=\"2\"/>\n");
    svg_text(f, 670, 82, "start", "", "measured");
    fprintf(f, "<line x1=\"750\" y1=\"78\" x2=\"774\" y2=\"78\" stroke=\"#444\" "
               "stroke-dasharray=\"5 4\"/>\n");
    svg_text(f, 780, 82, "start", "", "expected (per query)");
    char title[NSHAPES][96];
    snprintf(title[SHAPE_UNIFORM], sizeof title[0], "uniform 64-bit keys (width: integers)");
    snprintf(title[SHAPE_KVBENCH], sizeof title[0],
             "kvbench keys, stride %llu (width: key indexes)", (unsigned long long)o->stride);
    snprintf(title[SHAPE_PREFIXED], sizeof title[0], "%u-byte ids + counter, stride %llu",
             o->id_bytes, (unsigned long long)o->stride);
    for (int sh = 0, k = 0; sh < NSHAPES; sh++) {
        if (!cells[sh])
            continue;
        p.x = 90 + 480 * k++;
        p.title = title[sh];
        draw_panel(f, &p, o->bits, o->nbits);
        for (unsigned wi = 0; wi < o->nwidths; wi++) {
            svg_series(f, &p, o, &cells[sh][wi], 1, colours[wi % NCOLOURS]);
            svg_series(f, &p, o, &cells[sh][wi], 0, colours[wi % NCOLOURS]);
        }
    }
    svg_text(f, W / 2, H - 16, "middle", " fill=\"#555\"",
             "kvbench widths of the stride or more are measured at stride 2 x width; "
             "points with no false positive met are left out");
    fputs("</svg>\n", f);
    return fclose(f) == 0 ? 0 : -1;
}

/* ---- command line ------------------------------------------------------------ */

static void usage(FILE *to)
{
    fprintf(to, "usage: filterbench --range [--keys N] [--bits LIST] [--widths LIST]\n"
                "                   [--shape uniform|kvbench|prefixed|both|all] [--stride S]\n"
                "                   [--id_bytes B] [--queries Q] [--tables T] [--seed X]\n"
                "                   [--csv FILE] [--svg FILE]\n"
                "LIST: FROM:TO:STEP or a comma list\n"
                "defaults: --keys 250000 --bits 4:24:2 --widths 1,16,256,4096 --shape both\n"
                "          --stride 64 --id_bytes 4 --queries 1000000 --tables 4 --seed 42\n"
                "(both: uniform and kvbench; all: the three)\n");
}

/* A list of numbers in [lo, hi], FROM:TO:STEP or a,b,c: 0 or -1. */
static int parse_list(const char *s, double lo, double hi, double *out, unsigned *n)
{
    char buf[512];
    if (strlen(s) >= sizeof buf)
        return -1;
    snprintf(buf, sizeof buf, "%s", s);
    double a, b, step;
    char *c1 = strchr(buf, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (c1 && c2) {
        *c1 = *c2 = 0;
        if (parse_num(buf, lo, hi, &a) || parse_num(c1 + 1, lo, hi, &b) ||
            parse_num(c2 + 1, 1e-3, hi, &step) || b < a)
            return -1;
        *n = 0;
        for (double x = a; x <= b + step / 1000 && *n < MAX_LIST; x += step)
            out[(*n)++] = x;
        return *n ? 0 : -1;
    }
    *n = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (*n == MAX_LIST || parse_num(tok, lo, hi, &out[*n]) ||
            (*n > 0 && out[*n] <= out[*n - 1]))
            return -1;
        (*n)++;
    }
    return *n ? 0 : -1;
}

static int parse_value(struct ropts *o, const char *a, const char *v)
{
    uint64_t u;
    double d[MAX_LIST];
    unsigned n;
    if (!strcmp(a, "--keys") && !parse_u64(v, 1e8, &u) && u >= 16)
        o->keys = u;
    else if (!strcmp(a, "--queries") && !parse_u64(v, MAX_NUM, &u) && u >= 1)
        o->queries = u;
    else if (!strcmp(a, "--stride") && !parse_u64(v, 1e6, &u) && u >= 2)
        o->stride = u;
    else if (!strcmp(a, "--tables") && !parse_u64(v, MAX_TABLES, &u) && u >= 1)
        o->tables = (unsigned)u;
    else if (!strcmp(a, "--seed") && !parse_u64(v, MAX_NUM, &u))
        o->seed = u;
    else if (!strcmp(a, "--csv"))
        o->csv = v;
    else if (!strcmp(a, "--svg"))
        o->svg = v;
    else if (!strcmp(a, "--bits") &&
             !parse_list(v, KV_RFILTER_MIN_BITS, KV_RFILTER_MAX_BITS, o->bits, &o->nbits))
        ;
    else if (!strcmp(a, "--widths") && !parse_list(v, 1, 1e6, d, &n)) {
        o->nwidths = n;
        for (unsigned i = 0; i < n; i++)
            o->widths[i] = (uint64_t)d[i];
    } else if (!strcmp(a, "--id_bytes") && !parse_u64(v, 8, &u) && u >= 1)
        o->id_bytes = (unsigned)u;
    else if (!strcmp(a, "--shape")) {
        int all = !strcmp(v, "all"), both = all || !strcmp(v, "both");
        o->shape[SHAPE_UNIFORM] = both || !strcmp(v, "uniform");
        o->shape[SHAPE_KVBENCH] = both || !strcmp(v, "kvbench");
        o->shape[SHAPE_PREFIXED] = all || !strcmp(v, "prefixed");
        if (!o->shape[SHAPE_UNIFORM] && !o->shape[SHAPE_KVBENCH] && !o->shape[SHAPE_PREFIXED])
            return -1;
    } else
        return -1;
    return 0;
}

static int parse_args(int argc, char **argv, struct ropts *o)
{
    *o = (struct ropts){.keys = 250000,
                        .queries = 1000000,
                        .stride = 64,
                        .seed = 42,
                        .tables = 4,
                        .nwidths = 4,
                        .widths = {1, 16, 256, 4096},
                        .shape = {1, 1, 0},
                        .id_bytes = 4};
    for (double b = 4; b <= 24; b += 2)
        o->bits[o->nbits++] = b;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--range"))
            continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        }
        if (i + 1 >= argc || parse_value(o, a, argv[i + 1]) != 0) {
            fprintf(stderr, "filterbench: bad argument: %s%s%s\n", a, i + 1 < argc ? " " : "",
                    i + 1 < argc ? argv[i + 1] : "");
            usage(stderr);
            return -1;
        }
        i++;
    }
    /* kvbench keys are 16 digits of 2j, j below 20 tables' worth of keys */
    uint64_t widest = stride_for(o, o->widths[o->nwidths - 1]);
    if (o->shape[SHAPE_KVBENCH] && 40.0 * (double)o->keys * (double)widest >= 1e16) {
        fprintf(stderr, "filterbench: --keys times the stride is too large for 16 digits\n");
        return -1;
    }
    return 0;
}

int filterbench_range(int argc, char **argv)
{
    struct ropts o;
    if (parse_args(argc, argv, &o) != 0)
        return 2;
    struct cell *cells[NSHAPES] = {0};
    struct gap_probe gap = {0};
    char cpu[256];
    cpu_name(cpu, sizeof cpu);
    printf("filterbench --range: %llu keys per table, %u tables per setting, %llu empty and %llu "
           "near ranges per width\n%s; widths in keys of the key space (filterbench_range.c)\n\n",
           (unsigned long long)o.keys, o.tables, (unsigned long long)o.queries,
           (unsigned long long)o.queries, cpu);
    fflush(stdout);
    int rc = 0;
    for (int sh = 0; sh < NSHAPES && rc == 0; sh++) {
        if (!o.shape[sh])
            continue;
        cells[sh] = calloc((size_t)o.nbits * o.nwidths, sizeof **cells);
        if (!cells[sh]) {
            fprintf(stderr, "filterbench: out of memory\n");
            rc = 1;
            break;
        }
        if (sh == SHAPE_UNIFORM) {
            /* the mean gap of N uniform keys over the stride */
            gap.width = (uint64_t)(18446744073709551615.0 / (double)o.keys / (double)o.stride);
            rc = run_group(&o, sh, 0, cells[sh], &gap);
            continue;
        }
        /* one group of tables per distinct stride the widths need */
        for (unsigned wi = 0; wi < o.nwidths && rc == 0; wi++) {
            uint64_t stride = stride_for(&o, o.widths[wi]);
            int seen = 0;
            for (unsigned wj = 0; wj < wi; wj++)
                seen |= stride_for(&o, o.widths[wj]) == stride;
            if (!seen)
                rc = run_group(&o, sh, stride, cells[sh], NULL);
        }
    }
    if (rc == 0) {
        print_cells(&o, cells);
        print_memory(&o, cells);
        print_default(&o, cells);
        if (cells[SHAPE_UNIFORM])
            print_gap(&o, &gap);
        if (o.csv && write_csv(&o, cells) != 0)
            rc = 1;
        if (o.svg && write_svg(&o, cells, cpu) != 0)
            rc = 1;
    }
    for (int sh = 0; sh < NSHAPES; sh++)
        free(cells[sh]);
    return rc;
}
