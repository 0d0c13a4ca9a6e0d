/* scaling.c - --scaling: what each engine's writes and reads cost as its
 * database grows. For each size, each round and each engine in turn (the
 * engines interleaved within a round, so that they share the machine's
 * conditions, the first one rotating from round to round), a fresh
 * database gets fillrandom, stats, readrandom, readmissing,
 * waitforcompaction and reopen. Every such run is one row of
 * REPORT_DIR/scaling.csv, written as soon as the run ends; the medians over
 * rounds go to the chart REPORT_DIR/scaling.svg and to a table on the text
 * stream. --scaling_chart=CSV draws the chart and the table again from a
 * CSV alone (or several concatenated), running nothing.
 *
 * Each run is a child process (fork): its rss_bytes is its engine's alone,
 * not what engines before it left in the heap, and no engine's background
 * threads outlive its run. The child sends its results back through a pipe
 * as the bytes of struct scaling_run: the same program on both ends. */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "chart.h"

#define ENGINE_NAME 32 /* bytes of an engine's name in a row, NUL included */
#define NBENCH 3       /* fillrandom, readrandom, readmissing */

static const char *const bench_title[NBENCH] = {"fillrandom", "readrandom", "readmissing"};

/* One run: an engine's database of `keys` keys in round `round` (from 1). */
struct scaling_run {
    char engine[ENGINE_NAME];
    uint64_t keys, reads;
    unsigned round;
    struct result fill, stats, random, missing, wait, reopen;
};

/* ---- the CSV ---------------------------------------------------------------------------- */

/* The columns a row has: the figures (as the JSON lines have them), then
 * the settings of the run, so that a CSV assembled from several sessions
 * says what each row measured. *_ops are operations per second. */
static const char *const scaling_header =
    "engine,keys,round,fill_ops,fill_p999_us,slowed_seconds,fill_seconds,write_amplification,"
    "tables,db_bytes,reopen_seconds,rss_bytes,filter_bytes,index_bytes,memtable_bytes,"
    "rss_file_bytes,readrandom_ops,"
    "readrandom_p999_us,readrandom_probed,readmissing_ops,readmissing_p999_us,"
    "readmissing_probed,waitforcompaction_seconds,reads,readrandom_found,key_size,value_size,"
    "bloom_bits,cache_size,write_buffer_size,block_size,compression,threads,"
    "compaction_style,max_background_jobs,memory_limit,memory_limit_mechanism";

static double ops_per_sec(const struct result *r)
{
    return r->seconds > 0 ? (double)r->ops / r->seconds : 0;
}

/* A number, or an empty field where the engine does not report it. */
static void csv_num(FILE *f, int have, const char *fmt, double v)
{
    fputc(',', f);
    if (have && isfinite(v))
        fprintf(f, fmt, v);
}

static void csv_u64(FILE *f, int have, uint64_t v)
{
    fputc(',', f);
    if (have)
        fprintf(f, "%llu", (unsigned long long)v);
}

/* Where a figure comes from, by engine: kv has the tree, its waits and the
 * per-get counts; RocksDB its waits (stall.micros: stalls and delays
 * together) and filter tickers; LMDB its file; LevelDB's C API counts
 * nothing. */
static void write_row(FILE *f, const struct ctx *c, const struct scaling_run *s)
{
    const struct bench_counters *k = &s->stats.after;
    const struct bench_engine *e = c->e;
    int tree = k->have_tables;
    int per_get = !e->no_filters && s->random.after.have_filter_figures;
    double slowed = tree ? (double)(k->stall_micros + k->slowdown_micros) / 1e6
                    : k->have_rocksdb ? (double)k->stall_micros / 1e6 : NAN;
    fprintf(f, "%s,%llu,%u", s->engine, (unsigned long long)s->keys, s->round);
    csv_num(f, 1, "%.1f", ops_per_sec(&s->fill));
    csv_num(f, 1, "%.2f", s->fill.p999);
    csv_num(f, 1, "%.6f", slowed);
    csv_num(f, 1, "%.6f", s->fill.seconds);
    csv_num(f, tree, "%.3f", k->write_amplification);
    csv_u64(f, tree, k->tables);
    csv_u64(f, tree || k->have_lmdb, tree ? k->table_bytes : k->lmdb_file_bytes);
    csv_num(f, 1, "%.6f", s->reopen.seconds);
    csv_u64(f, s->stats.rss_bytes > 0, s->stats.rss_bytes);
    csv_u64(f, tree, k->filter_bytes);
    csv_u64(f, tree, k->index_bytes);
    csv_u64(f, tree, k->memtable_bytes);
    csv_u64(f, s->stats.rss_bytes > 0, s->stats.rss_file_bytes);
    csv_num(f, 1, "%.1f", ops_per_sec(&s->random));
    csv_num(f, 1, "%.2f", s->random.p999);
    csv_num(f, per_get, "%.4f", s->random.probed);
    csv_num(f, 1, "%.1f", ops_per_sec(&s->missing));
    csv_num(f, 1, "%.2f", s->missing.p999);
    csv_num(f, per_get, "%.4f", s->missing.probed);
    csv_num(f, 1, "%.6f", s->wait.seconds);
    csv_u64(f, 1, s->reads);
    csv_u64(f, 1, s->random.found);
    const struct options *o = &c->o;
    fprintf(f, ",%zu,%zu,%g,%zu,%zu,%zu,%s,%u", o->key_size, o->value_size, o->bloom_bits,
            o->cache_size, o->write_buffer_size, o->block_size,
            o->compression == KV_COMPRESSION_ZSTD ? "zstd" : "none", o->threads);
    /* issue 54's: the style as the engine ran it (RocksDB's universal for
     * lazy_leveled), its jobs where set, the memory limit and how it held */
    int kv = e == &bench_kv_engine, rdb = !strcmp(e->name, "rocksdb");
    int lazy = o->compaction_style == KV_COMPACTION_LAZY_LEVELED;
    fprintf(f, ",%s",
            kv    ? (lazy ? "lazy_leveled" : "leveled")
            : rdb ? (lazy ? "universal" : "leveled")
                  : "");
    csv_u64(f, kv || (rdb && o->max_background_jobs_set), (uint64_t)o->max_background_jobs);
    fprintf(f, ",%llu,%s\n", (unsigned long long)o->memory_limit, memlimit_mech_name(c, e));
    fflush(f);
}

/* ---- what the chart and the table show -------------------------------------------------- */

/* One row as the chart and the table need it: from a run, or read back
 * from a CSV. NAN where a figure is missing. */
struct point {
    char engine[ENGINE_NAME];
    uint64_t keys;
    double ops[NBENCH], p999[NBENCH];
    char settings[256]; /* in words; "" when the CSV does not say */
};

/* The settings of a row, as the CSV has them. */
struct settings {
    double key_size, value_size, bloom_bits, cache_size, write_buffer_size, block_size;
    const char *compression;
    double threads;
};

/* The settings in words, for the chart's subtitle. */
static void settings_text(char *buf, size_t n, const struct settings *s)
{
    char cs[32], ws[32];
    human_bytes(cs, sizeof cs, s->cache_size);
    human_bytes(ws, sizeof ws, s->write_buffer_size);
    snprintf(buf, n, "%g-byte keys, %g-byte values, %g bits/key, %s block cache, %s write "
                     "buffer, %g-byte blocks, %s compression, %g thread%s",
             s->key_size, s->value_size, s->bloom_bits, s->cache_size > 0 ? cs : "no", ws,
             s->block_size, !strcmp(s->compression, "zstd") ? "zstd" : "no", s->threads,
             s->threads == 1 ? "" : "s");
}

static void point_of_run(const struct ctx *c, const struct scaling_run *s, struct point *p)
{
    const struct options *o = &c->o;
    memset(p, 0, sizeof *p);
    snprintf(p->engine, sizeof p->engine, "%s", s->engine);
    p->keys = s->keys;
    const struct result *r[NBENCH] = {&s->fill, &s->random, &s->missing};
    for (int b = 0; b < NBENCH; b++) {
        p->ops[b] = ops_per_sec(r[b]);
        p->p999[b] = r[b]->p999;
    }
    struct settings set = {(double)o->key_size, (double)o->value_size, o->bloom_bits,
                           (double)o->cache_size, (double)o->write_buffer_size,
                           (double)o->block_size,
                           o->compression == KV_COMPRESSION_ZSTD ? "zstd" : "none", o->threads};
    settings_text(p->settings, sizeof p->settings, &set);
}

/* The medians over rounds, per engine (in order of first appearance) and
 * size (ascending). */
struct medians {
    char (*engines)[ENGINE_NAME];
    size_t ne;
    double *keys; /* as doubles: they are the chart's x */
    size_t nk;
    double *ops, *p999; /* [(e * nk + k) * NBENCH + b]; NAN where no run */
    unsigned *rounds;   /* [e * nk + k] */
    unsigned min_rounds, max_rounds;
    const char *settings; /* the rows' settings, or why there are none */
};

static void medians_free(struct medians *m)
{
    free(m->engines);
    free(m->keys);
    free(m->ops);
    free(m->p999);
    free(m->rounds);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of the finite values of v[n] (reordered); NAN when none. */
static double median(double *v, size_t n)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(v[i]))
            v[m++] = v[i];
    if (!m)
        return NAN;
    qsort(v, m, sizeof *v, cmp_double);
    return m % 2 ? v[m / 2] : (v[m / 2 - 1] + v[m / 2]) / 2;
}

static int compute_medians(const struct point *pts, size_t n, struct medians *m)
{
    memset(m, 0, sizeof *m);
    m->engines = calloc(n ? n : 1, sizeof *m->engines);
    m->keys = calloc(n ? n : 1, sizeof *m->keys);
    double *tmp = calloc(n ? n : 1, sizeof *tmp);
    if (!m->engines || !m->keys || !tmp)
        goto out_nomem;
    for (size_t i = 0; i < n; i++) {
        size_t e = 0, k = 0;
        while (e < m->ne && strcmp(m->engines[e], pts[i].engine) != 0)
            e++;
        if (e == m->ne)
            memcpy(m->engines[m->ne++], pts[i].engine, ENGINE_NAME);
        while (k < m->nk && m->keys[k] != (double)pts[i].keys)
            k++;
        if (k == m->nk)
            m->keys[m->nk++] = (double)pts[i].keys;
    }
    qsort(m->keys, m->nk, sizeof *m->keys, cmp_double);
    size_t cells = m->ne * m->nk;
    m->ops = calloc(cells * NBENCH + 1, sizeof *m->ops);
    m->p999 = calloc(cells * NBENCH + 1, sizeof *m->p999);
    m->rounds = calloc(cells + 1, sizeof *m->rounds);
    if (!m->ops || !m->p999 || !m->rounds)
        goto out_nomem;
    m->min_rounds = UINT32_MAX;
    for (size_t e = 0; e < m->ne; e++)
        for (size_t k = 0; k < m->nk; k++) {
            size_t cell = e * m->nk + k;
            for (int b = 0; b < NBENCH; b++)
                for (int what = 0; what < 2; what++) {
                    size_t got = 0;
                    for (size_t i = 0; i < n; i++)
                        if ((double)pts[i].keys == m->keys[k] &&
                            !strcmp(pts[i].engine, m->engines[e]))
                            tmp[got++] = what ? pts[i].p999[b] : pts[i].ops[b];
                    (what ? m->p999 : m->ops)[cell * NBENCH + b] = median(tmp, got);
                    m->rounds[cell] = (unsigned)got;
                }
            if (m->rounds[cell] && m->rounds[cell] < m->min_rounds)
                m->min_rounds = m->rounds[cell];
            if (m->rounds[cell] > m->max_rounds)
                m->max_rounds = m->rounds[cell];
        }
    m->settings = n && pts[0].settings[0] ? pts[0].settings : "settings: not in the CSV";
    for (size_t i = 1; i < n; i++)
        if (strcmp(pts[i].settings, pts[0].settings) != 0)
            m->settings = "settings differ between rows: see the CSV";
    free(tmp);
    return 0;
out_nomem:
    free(tmp);
    medians_free(m);
    fprintf(stderr, "kvbench: out of memory\n");
    return -1;
}

/* ---- the table -------------------------------------------------------------------------- */

static void print_table(FILE *f, const struct medians *m)
{
    fprintf(f, "------------------------------------------------\n");
    if (m->min_rounds == m->max_rounds)
        fprintf(f, "Scaling: medians of %u round%s per engine and size, ops/sec (p99.9 micros)\n",
                m->max_rounds, m->max_rounds == 1 ? "" : "s");
    else
        fprintf(f, "Scaling: medians of %u to %u rounds per engine and size, ops/sec (p99.9 "
                   "micros)\n", m->min_rounds, m->max_rounds);
    fprintf(f, "%-8s %12s", "engine", "keys");
    for (int b = 0; b < NBENCH; b++)
        fprintf(f, "  %21s", bench_title[b]);
    fprintf(f, "\n");
    for (size_t e = 0; e < m->ne; e++)
        for (size_t k = 0; k < m->nk; k++) {
            size_t cell = e * m->nk + k;
            if (!m->rounds[cell])
                continue;
            fprintf(f, "%-8s %12.0f", m->engines[e], m->keys[k]);
            for (int b = 0; b < NBENCH; b++) {
                double ops = m->ops[cell * NBENCH + b], p = m->p999[cell * NBENCH + b];
                if (isfinite(ops) && isfinite(p))
                    fprintf(f, "  %10.0f (%8.2f)", ops, p);
                else if (isfinite(ops))
                    fprintf(f, "  %10.0f %10s", ops, "");
                else
                    fprintf(f, "  %21s", "-");
            }
            fprintf(f, "\n");
        }
    fflush(f);
}

/* ---- the chart -------------------------------------------------------------------------- */

/* kv, LevelDB, RocksDB and LMDB keep their colours in every chart; other
 * names (a CSV may hold any) take the rest in turn. */
const char *engine_color(const char *name, size_t i)
{
    static const char *const known[][2] = {
        {"kv", "#1f77b4"}, {"leveldb", "#2ca02c"}, {"rocksdb", "#d62728"}, {"lmdb", "#9467bd"}};
    static const char *const other[] = {"#ff7f0e", "#8c564b", "#e377c2", "#7f7f7f", "#17becf"};
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
        if (!strcmp(name, known[k][0]))
            return known[k][1];
    return other[i % (sizeof other / sizeof other[0])];
}

/* Engine i's marker at (x, y): circle, square, triangle, diamond in turn,
 * so that lines on top of each other stay told apart; tip: the text of its
 * <title> (shown on hover), or "" for none. */
static void marker(FILE *f, size_t i, double x, double y, const char *tip)
{
    static const char *const tag[4] = {"circle", "rect", "polygon", "polygon"};
    switch (i % 4) {
    case 0: fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\">", x, y); break;
    case 1: fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"6\" height=\"6\">", x - 3, y - 3); break;
    case 2:
        fprintf(f, "<polygon points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\">", x, y - 4.5, x + 4, y + 3,
                x - 4, y + 3);
        break;
    default:
        fprintf(f, "<polygon points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f %.1f,%.1f\">", x, y - 4.5,
                x + 4.5, y, x, y + 4.5, x - 4.5, y);
    }
    if (*tip) {
        fputs("<title>", f);
        svg_escape(f, tip);
        fputs("</title>", f);
    }
    fprintf(f, "</%s>\n", tag[i % 4]);
}

/* Engine e's line in one panel: medians (p999 or ops) of benchmark b;
 * sizes without a figure break the line. */
static void draw_series(FILE *f, const struct panel *p, const struct medians *m, size_t e, int b,
                        int latency)
{
    const double *v = latency ? m->p999 : m->ops;
    int open = 0;
    for (size_t k = 0; k < m->nk; k++) {
        double y = v[(e * m->nk + k) * NBENCH + b];
        if (!(y > 0)) {
            if (open)
                fputs("\"/>\n", f);
            open = 0;
            continue;
        }
        if (!open)
            fputs("<polyline fill=\"none\" stroke-width=\"2\" points=\"", f);
        fprintf(f, "%s%.1f,%.1f", open ? " " : "", panel_x(p, m->keys[k]), panel_y(p, y));
        open = 1;
    }
    if (open)
        fputs("\"/>\n", f);
    for (size_t k = 0; k < m->nk; k++) {
        size_t cell = e * m->nk + k;
        double y = v[cell * NBENCH + b];
        if (!(y > 0))
            continue;
        char keys[32], tip[200];
        fmt_count(keys, sizeof keys, m->keys[k]);
        snprintf(tip, sizeof tip, "%s, %s keys: %s %.0f ops/sec, p99.9 %.2f micros "
                 "(median of %u round%s)", m->engines[e], keys, bench_title[b],
                 m->ops[cell * NBENCH + b], m->p999[cell * NBENCH + b], m->rounds[cell],
                 m->rounds[cell] == 1 ? "" : "s");
        marker(f, e, panel_x(p, m->keys[k]), panel_y(p, y), tip);
    }
}

static int write_scaling_svg(const char *path, const struct medians *m)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    const double W = 1100, H = 820;
    struct panel p[2][NBENCH];
    static const char *const lat_title[NBENCH] = {
        "fillrandom: p99.9 latency", "readrandom: p99.9 latency", "readmissing: p99.9 latency"};
    double *v = malloc((m->ne * m->nk + 1) * sizeof *v);
    if (!v) {
        fclose(f);
        return -1;
    }
    for (int row = 0; row < 2; row++)
        for (int b = 0; b < NBENCH; b++) {
            struct panel *q = &p[row][b];
            *q = (struct panel){.x = 90 + 365 * b, .y = 140 + 330 * row, .w = 250, .h = 230,
                                .log = 1, .xlog = 1, .xfmt = fmt_count,
                                .title = row ? lat_title[b] : bench_title[b],
                                .xlabel = "keys in the database (log scale)",
                                .ylabel = row ? "p99.9 microseconds (log scale)"
                                              : "ops/sec (log scale)"};
            if (!row)
                q->yfmt = fmt_count;
            /* a little room either side, so that no marker sits on the frame */
            q->xmin = m->nk ? m->keys[0] / 1.25 : 1;
            q->xmax = m->nk ? m->keys[m->nk - 1] * 1.25 : 10;
            size_t n = 0;
            for (size_t cell = 0; cell < m->ne * m->nk; cell++)
                v[n++] = (row ? m->p999 : m->ops)[cell * NBENCH + b];
            panel_range(q, v, n);
        }
    free(v);

    svg_begin(f, W, H);
    char sub[320];
    if (m->min_rounds == m->max_rounds)
        snprintf(sub, sizeof sub, "median of %u round%s per point; %s", m->max_rounds,
                 m->max_rounds == 1 ? "" : "s", m->settings);
    else
        snprintf(sub, sizeof sub, "median of %u to %u rounds per point; %s", m->min_rounds,
                 m->max_rounds, m->settings);
    svg_text(f, W / 2, 28, "middle", " font-size=\"18\" font-weight=\"bold\"",
             "kvbench scaling: throughput and p99.9 latency against database size");
    svg_text(f, W / 2, 48, "middle", " fill=\"#555\"", sub);
    /* legend: one entry per engine, centred */
    fprintf(f, "<g class=\"legend\">\n");
    double lx = W / 2 - 130.0 * (double)m->ne / 2;
    for (size_t e = 0; e < m->ne; e++) {
        double x = lx + 130.0 * (double)e;
        const char *col = engine_color(m->engines[e], e);
        fprintf(f, "<g stroke=\"%s\" fill=\"%s\">\n", col, col);
        fprintf(f, "<line x1=\"%.1f\" y1=\"80\" x2=\"%.1f\" y2=\"80\" stroke-width=\"2\"/>\n", x,
                x + 30);
        marker(f, e, x + 15, 80, "");
        fprintf(f, "</g>\n");
        svg_text(f, x + 36, 84, "start", "", m->engines[e]);
    }
    fprintf(f, "</g>\n");
    double xs[MAX_SCALING * 8];
    size_t nx = m->nk < sizeof xs / sizeof xs[0] ? m->nk : sizeof xs / sizeof xs[0];
    memcpy(xs, m->keys, nx * sizeof xs[0]);
    for (int row = 0; row < 2; row++)
        for (int b = 0; b < NBENCH; b++)
            draw_panel(f, &p[row][b], xs, nx);
    for (size_t e = 0; e < m->ne; e++) {
        const char *col = engine_color(m->engines[e], e);
        fprintf(f, "<g class=\"series\" data-engine=\"");
        svg_escape(f, m->engines[e]);
        fprintf(f, "\" stroke=\"%s\" fill=\"%s\">\n", col, col);
        for (int row = 0; row < 2; row++)
            for (int b = 0; b < NBENCH; b++)
                draw_series(f, &p[row][b], m, e, b, row);
        fprintf(f, "</g>\n");
    }
    svg_text(f, W / 2, H - 30, "middle", " fill=\"#555\"",
             "Each run: a fresh database, fillrandom of every key once in random order, then "
             "readrandom and readmissing (keys never written)");
    svg_text(f, W / 2, H - 14, "middle", " fill=\"#555\"",
             "while compactions may still run; latency p99.9 from a log-bucketed histogram "
             "(about 6%). Hover a point for its figures.");
    fprintf(f, "</svg>\n");
    return fclose(f) == 0 ? 0 : -1;
}

/* The table on the text stream and the chart at svg_path, from n points. */
static int chart_and_table(FILE *text, const char *svg_path, const struct point *pts, size_t n)
{
    struct medians m;
    if (compute_medians(pts, n, &m) != 0)
        return -1;
    print_table(text, &m);
    int rc = 0;
    if (write_scaling_svg(svg_path, &m) != 0) {
        fprintf(stderr, "kvbench: cannot write %s: %s\n", svg_path, strerror(errno));
        rc = -1;
    }
    medians_free(&m);
    return rc;
}

/* ---- the runs --------------------------------------------------------------------------- */

/* The fixed workload on a fresh database, reported as a --benchmarks run
 * reports it; the database is removed at the end. In the child. */
static int workload(struct ctx *c, struct scaling_run *s)
{
    struct target *t = &c->main;
    int rc = reset_target(c, t);
    if (rc == 0 && (rc = run_bench(c, bench_named("fillrandom"), t, &s->fill)) == 0)
        report(c, &s->fill, bench_named("fillrandom"));
    if (rc == 0)
        rc = bench_stats(c, t, &s->stats);
    if (rc == 0 && (rc = run_bench(c, bench_named("readrandom"), t, &s->random)) == 0)
        report(c, &s->random, bench_named("readrandom"));
    if (rc == 0 && (rc = run_bench(c, bench_named("readmissing"), t, &s->missing)) == 0)
        report(c, &s->missing, bench_named("readmissing"));
    if (rc == 0 && (rc = bench_wait_compaction(c, t, &s->wait)) == 0)
        report(c, &s->wait, bench_named("waitforcompaction"));
    if (rc == 0 && (rc = bench_reopen(c, t, &s->reopen)) == 0)
        report(c, &s->reopen, bench_named("reopen"));
    close_target(c, t);
    if (destroy_db(c, t->path, 0) != 0 && rc == 0)
        rc = -1;
    if (stop_requested)
        rc = E_INTERRUPTED;
    return rc;
}

int run_in_child(struct ctx *c, int (*work)(struct ctx *c, void *out), void *out, size_t len)
{
    int fd[2];
    if (pipe(fd) != 0) {
        fprintf(stderr, "kvbench: pipe: %s\n", strerror(errno));
        return E_FAIL;
    }
    fflush(NULL); /* nothing buffered is written twice */
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "kvbench: fork: %s\n", strerror(errno));
        close(fd[0]);
        close(fd[1]);
        return E_FAIL;
    }
    if (pid == 0) {
        close(fd[0]);
        int rc = work(c, out);
        const char *p = out;
        for (size_t left = len; rc == 0 && left;) {
            ssize_t n = write(fd[1], p, left);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                rc = E_FAIL;
            else
                p += n, left -= (size_t)n;
        }
        fflush(NULL);
        _exit(rc == 0 ? 0 : rc == E_INTERRUPTED ? 130 : 1);
    }
    close(fd[1]);
    /* A signal meant for kvbench alone (kill PID, not Ctrl-C's whole group)
     * interrupts the read or the wait here: the child gets it too. */
    int forwarded = 0;
    size_t got = 0;
    char *p = out;
    while (got < len) {
        if (stop_requested && !forwarded)
            forwarded = kill(pid, SIGTERM) == 0;
        ssize_t n = read(fd[0], p + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        if (stop_requested && !forwarded)
            forwarded = kill(pid, SIGTERM) == 0;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && got == len)
        return 0;
    if (stop_requested || (WIFEXITED(st) && WEXITSTATUS(st) == 130))
        return E_INTERRUPTED;
    if (WIFSIGNALED(st))
        fprintf(stderr, "kvbench: the %s run of %llu keys was killed by signal %d%s\n",
                c->e->name, (unsigned long long)c->o.num, WTERMSIG(st),
                WTERMSIG(st) == SIGKILL ? " (out of memory?)" : "");
    else if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        fprintf(stderr, "kvbench: the %s run of %llu keys sent back %zu of %zu bytes\n",
                c->e->name, (unsigned long long)c->o.num, got, len);
    /* else the child said why; either way, what it left of the database goes */
    destroy_db(c, c->main.path, 0);
    return E_FAIL;
}

/* The scaling workload, as run_in_child wants it. */
static int scaling_work(struct ctx *c, void *out)
{
    return workload(c, out);
}

int run_scaling(struct ctx *c)
{
    struct options *o = &c->o;
    const uint64_t reads = o->reads;
    const unsigned ne = c->nscaling_engines;
    size_t cap = (size_t)o->nscaling * o->rounds * ne;
    struct point *pts = calloc(cap, sizeof *pts);
    struct scaling_run *s = malloc(sizeof *s);
    char *csv_path = dup_printf("%s/%s", o->report_dir, "scaling.csv");
    char *svg_path = dup_printf("%s/%s", o->report_dir, "scaling.svg");
    FILE *csv = csv_path ? fopen(csv_path, "w") : NULL;
    int rc = 0;
    if (!pts || !s || !csv_path || !svg_path) {
        fprintf(stderr, "kvbench: out of memory\n");
        rc = -1;
        goto out;
    }
    if (!csv) {
        fprintf(stderr, "kvbench: cannot write %s: %s\n", csv_path, strerror(errno));
        rc = -1;
        goto out;
    }
    fprintf(csv, "%s\n", scaling_header);
    size_t n = 0;
    for (unsigned i = 0; i < o->nscaling && rc == 0; i++)
        for (unsigned r = 0; r < o->rounds && rc == 0; r++)
            for (unsigned j = 0; j < ne && rc == 0; j++) {
                c->e = c->scaling_engines[(r + j) % ne]; /* round r starts at engine r */
                o->num = o->scaling[i];
                o->reads = o->reads_set ? reads : o->num < 1000000 ? o->num : 1000000;
                c->main.cfg.bloom_bits = c->e->no_filters ? 0 : o->bloom_bits;
                fprintf(c->text, "--- %s, %llu keys, round %u of %u ---\n", c->e->name,
                        (unsigned long long)o->num, r + 1, o->rounds);
                memset(s, 0, sizeof *s);
                snprintf(s->engine, sizeof s->engine, "%s", c->e->name);
                s->keys = o->num;
                s->reads = o->reads ? o->reads : o->num;
                s->round = r + 1;
                if ((rc = run_in_child(c, scaling_work, s, sizeof *s)) != 0)
                    break;
                write_row(csv, c, s);
                point_of_run(c, s, &pts[n++]);
                if (stop_requested)
                    rc = E_INTERRUPTED;
            }
    if (fclose(csv) != 0 && rc == 0) {
        fprintf(stderr, "kvbench: writing %s: %s\n", csv_path, strerror(errno));
        rc = -1;
    }
    /* what ran is charted even when a later run failed or was interrupted */
    if (n && chart_and_table(c->text, svg_path, pts, n) != 0 && rc == 0)
        rc = -1;
    if (n)
        fprintf(c->text, "scaling      : wrote %s and %s\n", csv_path, svg_path);
out:
    free(pts);
    free(s);
    free(csv_path);
    free(svg_path);
    return rc;
}

/* ---- --scaling_chart: a CSV back into points -------------------------------------------- */

size_t csv_split(char *line, char **f, size_t max)
{
    size_t n = 0;
    for (char *p = line;;) {
        if (n < max)
            f[n] = p;
        n++;
        char *comma = strchr(p, ',');
        if (!comma)
            return n;
        *comma = 0;
        p = comma + 1;
    }
}

int csv_number(const char *s, double *out)
{
    if (!*s) {
        *out = NAN;
        return 0;
    }
    char *end;
    *out = strtod(s, &end);
    return end != s && *end == 0 ? 0 : -1;
}

#define MAX_FIELDS 64

int scaling_chart(struct ctx *c)
{
    const char *csv_path = c->o.scaling_chart;
    FILE *text = c->o.json ? stderr : stdout;
    FILE *in = open_csv_input("--scaling_chart=", csv_path); /* a regular file only */
    if (!in)
        return -1;
    /* the columns the chart needs (before C_SET), and the settings, found by name */
    enum { C_ENGINE, C_KEYS, C_OPS, C_P999 = C_OPS + NBENCH, C_SET = C_P999 + NBENCH,
           C_KEY_SIZE = C_SET, C_VALUE_SIZE, C_BITS, C_CACHE, C_WBUF, C_BLOCK, C_COMPRESSION,
           C_THREADS, C_ALL };
    static const char *const names[C_ALL] = {
        "engine", "keys", "fill_ops", "readrandom_ops", "readmissing_ops", "fill_p999_us",
        "readrandom_p999_us", "readmissing_p999_us", "key_size", "value_size", "bloom_bits",
        "cache_size", "write_buffer_size", "block_size", "compression", "threads"};
    int col[C_ALL];
    char *line = NULL, *header = NULL, *f[MAX_FIELDS];
    size_t cap = 0, n = 0, room = 0, nfields = 0, lineno = 0;
    struct point *pts = NULL;
    int rc = 0;
    ssize_t len;
    while (rc == 0 && (len = getline(&line, &cap, in)) >= 0) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = 0;
        if (!len || (header && !strcmp(line, header)))
            continue; /* blank, or the header again: CSVs concatenated */
        if (!header) {
            if (!(header = strdup(line))) {
                fprintf(stderr, "kvbench: out of memory\n");
                rc = -1;
                break;
            }
            nfields = csv_split(line, f, MAX_FIELDS);
            for (int k = 0; k < C_ALL; k++) {
                col[k] = -1;
                for (size_t i = 0; i < nfields && i < MAX_FIELDS; i++)
                    if (!strcmp(f[i], names[k]))
                        col[k] = (int)i;
                if (col[k] < 0 && k < C_SET) {
                    fprintf(stderr, "kvbench: --scaling_chart=%s: no column %s (want a CSV "
                                    "that kvbench --scaling wrote)\n", csv_path, names[k]);
                    rc = -1;
                    break;
                }
            }
            continue;
        }
        if (csv_split(line, f, MAX_FIELDS) != nfields) {
            fprintf(stderr, "kvbench: --scaling_chart=%s: line %zu has not the header's %zu "
                            "fields\n", csv_path, lineno, nfields);
            rc = -1;
            break;
        }
        if (n == room) {
            room = room ? 2 * room : 64;
            struct point *grown = realloc(pts, room * sizeof *pts);
            if (!grown) {
                fprintf(stderr, "kvbench: out of memory\n");
                rc = -1;
                break;
            }
            pts = grown;
        }
        struct point *p = &pts[n];
        memset(p, 0, sizeof *p);
        double v[C_ALL], keys;
        const char *bad = NULL;
        if (!*f[col[C_ENGINE]] || strlen(f[col[C_ENGINE]]) >= ENGINE_NAME)
            bad = names[C_ENGINE];
        if (csv_number(f[col[C_KEYS]], &keys) != 0 || !(keys >= 1) || keys != floor(keys))
            bad = names[C_KEYS];
        for (int k = C_OPS; k < C_ALL && !bad; k++)
            if (col[k] >= 0 && k != C_COMPRESSION && csv_number(f[col[k]], &v[k]) != 0)
                bad = names[k];
        if (bad) {
            fprintf(stderr, "kvbench: --scaling_chart=%s: line %zu: bad %s\n", csv_path, lineno,
                    bad);
            rc = -1;
            break;
        }
        snprintf(p->engine, sizeof p->engine, "%s", f[col[C_ENGINE]]);
        p->keys = (uint64_t)keys;
        for (int b = 0; b < NBENCH; b++) {
            p->ops[b] = v[C_OPS + b];
            p->p999[b] = v[C_P999 + b];
        }
        int have_settings = 1; /* every settings column there, and filled in */
        for (int k = C_SET; k < C_ALL; k++)
            have_settings &= col[k] >= 0 && (k == C_COMPRESSION ? *f[col[k]] != 0
                                                                : isfinite(v[k]));
        if (have_settings) {
            struct settings set = {v[C_KEY_SIZE], v[C_VALUE_SIZE], v[C_BITS], v[C_CACHE],
                                   v[C_WBUF], v[C_BLOCK], f[col[C_COMPRESSION]], v[C_THREADS]};
            settings_text(p->settings, sizeof p->settings, &set);
        }
        n++;
    }
    if (rc == 0 && ferror(in)) {
        fprintf(stderr, "kvbench: --scaling_chart=%s: %s\n", csv_path, strerror(errno));
        rc = -1;
    }
    fclose(in);
    free(line);
    free(header);
    if (rc == 0 && !n) {
        fprintf(stderr, "kvbench: --scaling_chart=%s: no rows\n", csv_path);
        rc = -1;
    }
    /* next to the CSV unless --report_dir says where */
    char *svg_path = NULL;
    if (rc == 0 && c->o.report_dir) {
        svg_path = dup_printf("%s/%s", c->o.report_dir, "scaling.svg");
    } else if (rc == 0) {
        const char *slash = strrchr(csv_path, '/');
        char *dir = slash ? strndup(csv_path, (size_t)(slash - csv_path) + (slash == csv_path))
                          : strdup(".");
        svg_path = dir ? dup_printf("%s/%s", dir, "scaling.svg") : NULL;
        free(dir);
    }
    if (rc == 0 && !svg_path) {
        fprintf(stderr, "kvbench: out of memory\n");
        rc = -1;
    }
    if (rc == 0 && (rc = chart_and_table(text, svg_path, pts, n)) == 0)
        fprintf(text, "scaling      : drew %s from %zu rows of %s\n", svg_path, n, csv_path);
    free(svg_path);
    free(pts);
    return rc;
}
