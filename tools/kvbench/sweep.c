/* sweep.c - --sweep: every bits/key in both filter layouts and both filter
 * policies, each read through the page cache and with O_DIRECT, written
 * as DIR/sweep.csv and charted as DIR/sweep.svg; --sweep=range_filter_bits:
 * every range filter bits/key under seekempty and seekshort, written as
 * DIR/range_sweep.csv and charted as DIR/range_sweep.svg beside it. */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "chart.h"

/* ---- the sweep: every bits/key, both layouts, both policies, both read modes ----------- */

/* The series: a layout under a policy. Monkey is swept in the blocked
 * layout, kv's default. */
#define NSERIES 3
static const struct series {
    int layout, policy;
    const char *name, *color, *label;
} series[NSERIES] = {
    {KV_BLOOM_BLOCKED, KV_FILTER_UNIFORM, "blocked-uniform", "#1f77b4", "blocked, uniform"},
    {KV_BLOOM_CLASSIC, KV_FILTER_UNIFORM, "classic-uniform", "#d62728", "classic, uniform"},
    {KV_BLOOM_BLOCKED, KV_FILTER_MONKEY, "blocked-monkey", "#2ca02c", "blocked, Monkey"},
};

/* Missing-key gets of the direct-read pass at most: each false positive
 * there is a device read (some 0.1 ms), and without filters every probe. */
#define DIRECT_READS 10000u

struct sweep_row {
    int series;
    double bits;
    uint64_t filter_bytes, filter_keys;
    struct result missing, random, direct;
    double build_seconds;
};

static const char *const sweep_header =
    "layout,policy,bloom_bits,filter_bytes,filter_bytes_per_key,measured_fpr,expected_fpr,"
    "missing_tables_probed_per_get,missing_false_positives_per_get,"
    "missing_expected_false_positives_per_get,missing_micros_per_get,missing_p999_us,"
    "missing_data_block_reads_per_get,direct_missing_micros_per_get,direct_missing_p999_us,"
    "direct_missing_device_reads_per_get,direct_reads,random_micros_per_get,random_p999_us,"
    "random_data_block_reads_per_get,random_found,reads,build_seconds";

static double micros_per_op(const struct result *r)
{
    return r->ops ? r->seconds * 1e6 / (double)r->ops : 0;
}

static double bytes_per_key(const struct sweep_row *s)
{
    return s->filter_keys ? (double)s->filter_bytes / (double)s->filter_keys : 0;
}

/* False positives per missing get that the probed tables' filters predict:
 * their expected FPR (weighted by probes) times the probes per get. */
static double expected_fp(const struct result *r)
{
    return r->expected_fpr * r->probed;
}

static int write_sweep_csv(const char *path, const struct sweep_row *rows, size_t n)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "%s\n", sweep_header);
    for (size_t i = 0; i < n; i++) {
        const struct sweep_row *s = &rows[i];
        const struct series *e = &series[s->series];
        fprintf(f,
                "%s,%s,%g,%llu,%.4f,%.6g,%.6g,%.4f,%.6g,%.6g,%.4f,%.2f,%.6f,%.4f,%.2f,%.6f,%llu,"
                "%.4f,%.2f,%.6f,%llu,%llu,%.3f\n",
                layout_name(e->layout), e->policy == KV_FILTER_MONKEY ? "monkey" : "uniform",
                s->bits, (unsigned long long)s->filter_bytes, bytes_per_key(s),
                s->missing.measured_fpr, s->missing.expected_fpr, s->missing.probed,
                s->missing.false_pos, expected_fp(&s->missing), micros_per_op(&s->missing),
                s->missing.p999, s->missing.block_reads, micros_per_op(&s->direct), s->direct.p999,
                s->direct.device_reads, (unsigned long long)s->direct.ops,
                micros_per_op(&s->random), s->random.p999, s->random.block_reads,
                (unsigned long long)s->random.found, (unsigned long long)s->missing.ops,
                s->build_seconds);
    }
    return fclose(f) == 0 ? 0 : -1;
}

/* One line of a series in one panel; points that a log axis cannot show
 * (0) break the line. Markers: circles (blocked, uniform), squares
 * (classic), triangles (Monkey); hollow on a dashed (expected) line. */
static void draw_line(FILE *f, const struct panel *p, const struct sweep_row *rows, size_t n,
                      int s, double (*get)(const struct sweep_row *), const char *dash,
                      const char *what)
{
    int open = 0;
    for (size_t i = 0; i < n; i++) {
        if (rows[i].series != s)
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
        fprintf(f, "%s%.1f,%.1f", open ? " " : "", panel_x(p, rows[i].bits), panel_y(p, v));
        open = 1;
    }
    if (open)
        fputs("\"/>\n", f);
    for (size_t i = 0; i < n; i++) {
        double v = get(&rows[i]);
        if (rows[i].series != s || (p->log && !(v > 0)))
            continue;
        char tip[160];
        snprintf(tip, sizeof tip, "%s, %g bits/key: %s %.4g", series[s].label, rows[i].bits,
                 what, v);
        double x = panel_x(p, rows[i].bits), y = panel_y(p, v);
        const char *hollow = *dash ? " fill=\"#fff\"" : "";
        const char *tag = s == 1 ? "rect" : s == 2 ? "polygon" : "circle";
        if (s == 1)
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"6\" height=\"6\"%s><title>", x - 3,
                    y - 3, hollow);
        else if (s == 2)
            fprintf(f, "<polygon points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\"%s><title>", x,
                    y - 4.5, x - 4, y + 3, x + 4, y + 3, hollow);
        else
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\"%s><title>", x, y, hollow);
        svg_escape(f, tip);
        fprintf(f, "</title></%s>\n", tag);
    }
}

static double g_measured(const struct sweep_row *s) { return s->missing.measured_fpr; }
static double g_expected(const struct sweep_row *s) { return s->missing.expected_fpr; }
/* A missing key's data-block reads: its false positives, and with no
 * filter every probe (what a false positive costs, every time). */
static double g_fp(const struct sweep_row *s) { return s->missing.block_reads; }
static double g_fp_expected(const struct sweep_row *s) { return expected_fp(&s->missing); }
static double g_micros(const struct sweep_row *s) { return micros_per_op(&s->missing); }
static double g_direct(const struct sweep_row *s) { return micros_per_op(&s->direct); }
static double g_device(const struct sweep_row *s) { return s->direct.device_reads; }
static double g_memory(const struct sweep_row *s) { return bytes_per_key(s); }

#define NPANELS 6

static int write_sweep_svg(const struct ctx *c, const char *path, const struct sweep_row *rows,
                           size_t n, int direct_on)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    const double W = 980, H = 1080;
    struct panel p[NPANELS] = {
        {.x = 90, .y = 130, .w = 360, .h = 220, .log = 1,
         .title = "False-positive rate per probed table", .ylabel = "FPR (fraction, log scale)"},
        {.x = 590, .y = 130, .w = 360, .h = 220, .log = 1,
         .title = "False positives per missing-key get",
         .ylabel = "blocks read per get (log scale)"},
        {.x = 90, .y = 450, .w = 360, .h = 220, .title = "Time per missing-key get, page cache",
         .ylabel = "microseconds per get"},
        {.x = 590, .y = 450, .w = 360, .h = 220, .log = 1,
         .title = direct_on ? "Time per missing-key get, O_DIRECT, no block cache"
                            : "Time per missing-key get, O_DIRECT refused: page cache",
         .ylabel = "microseconds per get (log scale)"},
        {.x = 90, .y = 770, .w = 360, .h = 220, .log = 1,
         .title = "Device reads per missing-key get (O_DIRECT)",
         .ylabel = "device reads per get (log scale)"},
        {.x = 590, .y = 770, .w = 360, .h = 220, .title = "Filter memory per key",
         .ylabel = "bytes per key"},
    };
    for (int k = 0; k < NPANELS; k++)
        p[k].xlabel = "filter bits per key";
    double xs[MAX_SWEEP];
    for (unsigned i = 0; i < c->o.nsweep; i++)
        xs[i] = c->o.sweep[i];
    double *v = malloc(2 * n * sizeof *v + 1);
    if (!v) {
        fclose(f);
        return -1;
    }
    double (*const getters[NPANELS][2])(const struct sweep_row *) = {
        {g_measured, g_expected}, {g_fp, g_fp_expected}, {g_micros, NULL},
        {g_direct, NULL},         {g_device, NULL},      {g_memory, NULL}};
    for (int k = 0; k < NPANELS; k++) {
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

    svg_begin(f, W, H);
    char title[256], sub[320], sub2[200];
    snprintf(title, sizeof title,
             "kv filter sweep: %llu keys, missing-key gets on a settled tree",
             (unsigned long long)c->o.num);
    char cache[32];
    human_bytes(cache, sizeof cache, (double)c->o.cache_size);
    snprintf(sub, sizeof sub,
             "%zu-byte keys, %zu-byte values, %zu-byte blocks, %s compression, %s block cache "
             "(none with O_DIRECT)",
             c->o.key_size, c->o.value_size, c->o.block_size,
             c->o.compression == KV_COMPRESSION_ZSTD ? "zstd" : "no",
             c->o.cache_size ? cache : "no");
    snprintf(sub2, sizeof sub2,
             "%llu gets per point in the page cache, %llu with O_DIRECT; the tree: fillsettled, "
             "the same for every series at a setting",
             (unsigned long long)rows[0].missing.ops, (unsigned long long)rows[0].direct.ops);
    svg_text(f, W / 2, 28, "middle", " font-size=\"18\" font-weight=\"bold\"", title);
    svg_text(f, W / 2, 48, "middle", " fill=\"#555\"", sub);
    svg_text(f, W / 2, 66, "middle", " fill=\"#555\"", sub2);
    /* legend */
    fprintf(f, "<g class=\"legend\">\n");
    for (int s = 0; s < NSERIES; s++) {
        double x = 150 + 165 * s;
        fprintf(f, "<line x1=\"%.0f\" y1=\"88\" x2=\"%.0f\" y2=\"88\" stroke=\"%s\" "
                   "stroke-width=\"2\"/>\n", x, x + 30, series[s].color);
        if (s == 1)
            fprintf(f, "<rect x=\"%.0f\" y=\"85\" width=\"6\" height=\"6\" fill=\"%s\"/>\n",
                    x + 12, series[s].color);
        else if (s == 2)
            fprintf(f, "<polygon points=\"%.0f,83.5 %.0f,91 %.0f,91\" fill=\"%s\"/>\n", x + 15,
                    x + 11, x + 19, series[s].color);
        else
            fprintf(f, "<circle cx=\"%.0f\" cy=\"88\" r=\"3.5\" fill=\"%s\"/>\n", x + 15,
                    series[s].color);
        svg_text(f, x + 36, 92, "start", "", series[s].label);
    }
    fprintf(f, "<line x1=\"650\" y1=\"88\" x2=\"680\" y2=\"88\" stroke=\"#333\" "
               "stroke-width=\"2\"/>\n");
    svg_text(f, 686, 92, "start", "", "measured");
    fprintf(f, "<line x1=\"760\" y1=\"88\" x2=\"790\" y2=\"88\" stroke=\"#333\" "
               "stroke-width=\"2\" stroke-dasharray=\"6 4\"/>\n");
    svg_text(f, 796, 92, "start", "", "expected (theory)");
    fprintf(f, "</g>\n");
    for (int k = 0; k < NPANELS; k++)
        draw_panel(f, &p[k], xs, c->o.nsweep);
    for (int s = 0; s < NSERIES; s++) {
        fprintf(f,
                "<g class=\"series\" data-layout=\"%s\" data-policy=\"%s\" stroke=\"%s\" "
                "fill=\"%s\">\n",
                layout_name(series[s].layout),
                series[s].policy == KV_FILTER_MONKEY ? "monkey" : "uniform", series[s].color,
                series[s].color);
        draw_line(f, &p[0], rows, n, s, g_measured, "", "measured FPR");
        draw_line(f, &p[0], rows, n, s, g_expected, " stroke-dasharray=\"6 4\"", "expected FPR");
        draw_line(f, &p[1], rows, n, s, g_fp, "", "false positives (blocks read) per get");
        draw_line(f, &p[1], rows, n, s, g_fp_expected, " stroke-dasharray=\"6 4\"",
                  "expected false positives per get");
        draw_line(f, &p[2], rows, n, s, g_micros, "", "micros per get");
        draw_line(f, &p[3], rows, n, s, g_direct, "", "micros per get, O_DIRECT");
        draw_line(f, &p[4], rows, n, s, g_device, "", "device reads per get");
        draw_line(f, &p[5], rows, n, s, g_memory, "", "filter bytes per key");
        fprintf(f, "</g>\n");
    }
    svg_text(f, W / 2, H - 16, "middle", " fill=\"#555\"",
             "0 bits/key: no filter, every probe reads a data block (FPR 1; counted as a false "
             "positive). Points with none at all are left off the log scales.");
    fprintf(f, "</svg>\n");
    return fclose(f) == 0 ? 0 : -1;
}

/* One point: a settled tree at row's setting; readmissing and readrandom
 * through the page cache; then, reopened with O_DIRECT and no block cache,
 * readmissing again (at most DIRECT_READS gets). */
static int sweep_one(struct ctx *c, struct sweep_row *row)
{
    struct target *t = &c->main;
    const struct series *e = &series[row->series];
    close_target(c, t);
    t->cfg.bloom_bits = row->bits;
    t->cfg.prefix_len = row->bits > 0 ? c->o.prefix_len : 0; /* prefixes need a filter */
    t->cfg.filter_layout = e->layout;
    t->cfg.filter_policy = e->policy;
    t->cfg.use_direct_reads = 0;
    t->cfg.cache_size = c->o.cache_size;
    fprintf(c->text, "--- bloom_bits=%g filter_layout=%s filter_policy=%s ---\n", row->bits,
            layout_name(e->layout), e->policy == KV_FILTER_MONKEY ? "monkey" : "uniform");
    double t0 = now_sec();
    struct result r;
    int rc = reset_target(c, t);
    if (rc == 0 && (rc = run_bench(c, bench_named("fillsettled"), t, &r)) == 0)
        report(c, &r, bench_named("fillsettled"));
    row->build_seconds = now_sec() - t0;
    if (rc == 0 && (rc = run_bench(c, bench_named("readmissing"), t, &row->missing)) == 0)
        report(c, &row->missing, bench_named("readmissing"));
    if (rc == 0 && (rc = run_bench(c, bench_named("readrandom"), t, &row->random)) == 0)
        report(c, &row->random, bench_named("readrandom"));
    row->filter_bytes = row->random.after.filter_bytes;
    row->filter_keys = row->random.after.filter_keys;
    /* The same tree, its data blocks read past the page cache. */
    t->cfg.use_direct_reads = 1;
    t->cfg.cache_size = 0;
    if (rc == 0 && (rc = bench_reopen(c, t, &r)) == 0) {
        uint64_t reads = c->o.reads;
        uint64_t want = reads ? reads : c->o.num;
        c->o.reads = want < DIRECT_READS ? want : DIRECT_READS;
        if ((rc = run_bench(c, bench_named("readmissing"), t, &row->direct)) == 0)
            report(c, &row->direct, bench_named("readmissing"));
        c->o.reads = reads;
    }
    t->cfg.use_direct_reads = 0;
    t->cfg.cache_size = c->o.cache_size;
    return rc;
}

/* ---- --sweep=range_filter_bits: the range filter's bits per key ------------------------- */

/* Empty seeks of the direct-read pass at most (each false positive, and
 * without a range filter each table that meets the range, a device read). */
#define RANGE_DIRECT_SEEKS 5000u

struct range_row {
    double bits;
    uint64_t filter_bytes, keys; /* range filters' bytes, the tables' filter keys */
    struct result empty, shrt, direct;
};

static const char *const range_header =
    "range_filter_bits,range_filter_bytes,range_bits_per_key_measured,range_width,key_stride,"
    "measured_fpr,expected_fpr,empty_checks,empty_seeks_per_sec,empty_p999_us,"
    "empty_tables_checked_per_seek,empty_range_skips_per_seek,empty_tables_read_per_seek,"
    "short_seeks_per_sec,short_p999_us,short_tables_read_per_seek,direct_empty_seeks_per_sec,"
    "direct_empty_device_reads_per_seek,direct_seeks";

static double per_sec(const struct result *r)
{
    return r->seconds > 0 ? (double)r->ops / r->seconds : 0;
}

static double range_bits_measured(const struct range_row *s)
{
    return s->keys ? 8.0 * (double)s->filter_bytes / (double)s->keys : 0;
}

/* 0 bits: no range filter, every table that meets a range is read (FPR 1,
 * as the point filter's sweep counts no filter). */
static double rg_measured(const struct range_row *s)
{
    return s->bits > 0 ? s->empty.range_measured_fpr : 1;
}
static double rg_expected(const struct range_row *s)
{
    return s->bits > 0 ? s->empty.range_expected_fpr : 1;
}
static double rg_empty(const struct range_row *s)
{
    return per_sec(&s->empty);
}
static double rg_short(const struct range_row *s)
{
    return per_sec(&s->shrt);
}
static double rg_read(const struct range_row *s)
{
    return s->empty.tables_read;
}
static double rg_device(const struct range_row *s)
{
    return s->direct.read_calls > 0 ? s->direct.read_calls : 0;
}
static double rg_memory(const struct range_row *s)
{
    return range_bits_measured(s);
}

static int write_range_csv(const struct ctx *c, const char *path, const struct range_row *rows,
                           size_t n)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "%s\n", range_header);
    for (size_t i = 0; i < n; i++) {
        const struct range_row *s = &rows[i];
        fprintf(f,
                "%g,%llu,%.4f,%llu,%llu,%.6g,%.6g,%llu,%.1f,%.2f,%.4f,%.4f,%.4f,%.1f,%.2f,%.4f,"
                "%.1f,%.4f,%llu\n",
                s->bits, (unsigned long long)s->filter_bytes, range_bits_measured(s),
                (unsigned long long)c->o.range_width, (unsigned long long)c->o.key_stride,
                rg_measured(s), rg_expected(s), (unsigned long long)s->empty.range_absent,
                per_sec(&s->empty), s->empty.p999, s->empty.checked, s->empty.range_skips,
                s->empty.tables_read, per_sec(&s->shrt), s->shrt.p999, s->shrt.tables_read,
                per_sec(&s->direct), rg_device(s), (unsigned long long)s->direct.ops);
    }
    return fclose(f) == 0 ? 0 : -1;
}

/* One line in a panel: solid (measured) or dashed (expected); points a
 * log axis cannot show (0) break it. */
static void range_line(FILE *f, const struct panel *p, const struct range_row *rows, size_t n,
                       double (*get)(const struct range_row *), const char *color, int dashed,
                       const char *what)
{
    int open = 0;
    for (size_t i = 0; i < n; i++) {
        double v = get(&rows[i]);
        if (p->log && !(v > 0)) {
            if (open)
                fputs("\"/>\n", f);
            open = 0;
            continue;
        }
        if (!open)
            fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"",
                    color, dashed ? " stroke-dasharray=\"6 4\"" : "");
        fprintf(f, "%s%.1f,%.1f", open ? " " : "", panel_x(p, rows[i].bits), panel_y(p, v));
        open = 1;
    }
    if (open)
        fputs("\"/>\n", f);
    for (size_t i = 0; i < n; i++) {
        double v = get(&rows[i]);
        if (p->log && !(v > 0))
            continue;
        char tip[160];
        snprintf(tip, sizeof tip, "%g bits/key: %s %.4g", rows[i].bits, what, v);
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" stroke=\"%s\" fill=\"%s\"><title>",
                panel_x(p, rows[i].bits), panel_y(p, v), color, dashed ? "#fff" : color);
        svg_escape(f, tip);
        fputs("</title></circle>\n", f);
    }
}

#define RPANELS 4

static int write_range_svg(const struct ctx *c, const char *path, const struct range_row *rows,
                           size_t n)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    const double W = 980, H = 760;
    struct panel p[RPANELS] = {
        {.x = 90,
         .y = 130,
         .w = 360,
         .h = 220,
         .log = 1,
         .title = "Range false-positive rate per empty table check",
         .ylabel = "FPR (fraction, log scale)"},
        {.x = 590,
         .y = 130,
         .w = 360,
         .h = 220,
         .title = "Range queries per second",
         .ylabel = "seeks per second"},
        {.x = 90,
         .y = 450,
         .w = 360,
         .h = 220,
         .log = 1,
         .title = "Tables read per empty seek",
         .ylabel = "tables (log scale)"},
        {.x = 590,
         .y = 450,
         .w = 360,
         .h = 220,
         .title = "Range filter memory per key",
         .ylabel = "bits per key (measured)"},
    };
    double (*const get[RPANELS][2])(const struct range_row *) = {{rg_measured, rg_expected},
                                                                 {rg_empty, rg_short},
                                                                 {rg_read, rg_device},
                                                                 {rg_memory, NULL}};
    double xs[MAX_SWEEP], *v = malloc(2 * n * sizeof *v + 1);
    if (!v) {
        fclose(f);
        return -1;
    }
    for (unsigned i = 0; i < c->o.nsweep; i++)
        xs[i] = c->o.sweep[i];
    for (int k = 0; k < RPANELS; k++) {
        p[k].xlabel = "range filter bits per key";
        p[k].xmin = xs[0];
        p[k].xmax = c->o.nsweep > 1 ? xs[c->o.nsweep - 1] : xs[0] + 1;
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            for (int g = 0; g < 2; g++)
                if (get[k][g])
                    v[m++] = get[k][g](&rows[i]);
        panel_range(&p[k], v, m);
    }
    free(v);
    svg_begin(f, W, H);
    char title[256], sub[320];
    snprintf(title, sizeof title,
             "kv range filter sweep: %llu keys, empty range queries of %llu "
             "key indexes",
             (unsigned long long)c->o.num, (unsigned long long)c->o.range_width);
    snprintf(sub, sizeof sub,
             "keys every %llu key indexes; %zu-byte keys, %zu-byte values, %g bits/key point "
             "filters, prefix_len %zu; %llu empty and short seeks per point, %llu with O_DIRECT",
             (unsigned long long)c->o.key_stride, c->o.key_size, c->o.value_size, c->o.bloom_bits,
             c->o.prefix_len, (unsigned long long)rows[0].empty.ops,
             (unsigned long long)rows[0].direct.ops);
    svg_text(f, W / 2, 28, "middle", " font-size=\"18\" font-weight=\"bold\"", title);
    svg_text(f, W / 2, 48, "middle", " fill=\"#555\"", sub);
    static const char *const color[2] = {"#1f77b4", "#d62728"};
    static const char *const label[RPANELS][2] = {{"measured FPR", "expected FPR"},
                                                  {"seekempty", "seekshort"},
                                                  {"tables read (page cache)",
                                                   "device reads (O_DIRECT, no cache)"},
                                                  {"range filter bits per key", NULL}};
    fprintf(f, "<g class=\"legend\">\n");
    svg_text(f, W / 2, 80, "middle", " fill=\"#555\"",
             "left top: solid measured, dashed expected; right top: blue seekempty, red "
             "seekshort; left bottom: blue tables read, red device reads (O_DIRECT)");
    fprintf(f, "</g>\n");
    for (int k = 0; k < RPANELS; k++) {
        draw_panel(f, &p[k], xs, c->o.nsweep);
        for (int g = 0; g < 2; g++)
            if (get[k][g])
                range_line(f, &p[k], rows, n, get[k][g], color[k == 0 ? 0 : g], k == 0 && g,
                           label[k][g]);
    }
    svg_text(f, W / 2, H - 16, "middle", " fill=\"#555\"",
             "0 bits/key: no range filter, every table that meets a range is read (FPR 1). "
             "Expected: each table's range_expected_fpr, weighted by its empty checks.");
    fprintf(f, "</svg>\n");
    return fclose(f) == 0 ? 0 : -1;
}

/* One point: a settled tree with range filters of row->bits; seekempty
 * and seekshort through the page cache and the block cache; then,
 * reopened with O_DIRECT and no block cache, seekempty again (at most
 * RANGE_DIRECT_SEEKS seeks). */
static int range_sweep_one(struct ctx *c, struct range_row *row)
{
    struct target *t = &c->main;
    close_target(c, t);
    t->cfg.range_filter_bits = row->bits;
    t->cfg.use_direct_reads = 0;
    t->cfg.cache_size = c->o.cache_size;
    fprintf(c->text, "--- range_filter_bits=%g ---\n", row->bits);
    struct result r;
    int rc = reset_target(c, t);
    if (rc == 0 && (rc = run_bench(c, bench_named("fillsettled"), t, &r)) == 0)
        report(c, &r, bench_named("fillsettled"));
    if (rc == 0 && (rc = run_bench(c, bench_named("seekempty"), t, &row->empty)) == 0)
        report(c, &row->empty, bench_named("seekempty"));
    if (rc == 0 && (rc = run_bench(c, bench_named("seekshort"), t, &row->shrt)) == 0)
        report(c, &row->shrt, bench_named("seekshort"));
    row->filter_bytes = row->shrt.after.range_filter_bytes;
    row->keys = row->shrt.after.filter_keys;
    t->cfg.use_direct_reads = 1;
    t->cfg.cache_size = 0;
    if (rc == 0 && (rc = bench_reopen(c, t, &r)) == 0) {
        uint64_t reads = c->o.reads, want = reads ? reads : c->o.num;
        c->o.reads = want < RANGE_DIRECT_SEEKS ? want : RANGE_DIRECT_SEEKS;
        if ((rc = run_bench(c, bench_named("seekempty"), t, &row->direct)) == 0)
            report(c, &row->direct, bench_named("seekempty"));
        c->o.reads = reads;
    }
    t->cfg.use_direct_reads = 0;
    t->cfg.cache_size = c->o.cache_size;
    return rc;
}

static int run_range_sweep(struct ctx *c)
{
    size_t n = c->o.nsweep;
    struct range_row *rows = calloc(n, sizeof *rows);
    if (!rows) {
        fprintf(stderr, "kvbench: out of memory\n");
        return -1;
    }
    int rc = 0;
    c->o.histogram = 1;
    for (size_t i = 0; i < n && rc == 0; i++) {
        rows[i].bits = c->o.sweep[i];
        rc = range_sweep_one(c, &rows[i]);
    }
    if (rc == 0) {
        char *csv = dup_printf("%s/%s", c->o.report_dir, "range_sweep.csv");
        char *svg = dup_printf("%s/%s", c->o.report_dir, "range_sweep.svg");
        if (!csv || !svg || write_range_csv(c, csv, rows, n) != 0 ||
            write_range_svg(c, svg, rows, n) != 0) {
            fprintf(stderr, "kvbench: cannot write %s/range_sweep.csv and range_sweep.svg: %s\n",
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

int run_sweep(struct ctx *c)
{
    if (c->o.sweep_range)
        return run_range_sweep(c);
    size_t n = NSERIES * (size_t)c->o.nsweep;
    struct sweep_row *rows = calloc(n, sizeof *rows);
    if (!rows) {
        fprintf(stderr, "kvbench: out of memory\n");
        return -1;
    }
    int rc = 0, direct_on = 1;
    c->o.histogram = 1; /* p99.9 beside every mean */
    for (unsigned i = 0; i < c->o.nsweep && rc == 0; i++)
        for (int s = 0; s < NSERIES && rc == 0; s++) {
            struct sweep_row *row = &rows[NSERIES * i + (size_t)s];
            row->bits = c->o.sweep[i];
            row->series = s;
            rc = sweep_one(c, row);
            direct_on &= row->direct.after.direct_reads != 0;
        }
    if (rc == 0) {
        char *csv = dup_printf("%s/%s", c->o.report_dir, "sweep.csv");
        char *svg = dup_printf("%s/%s", c->o.report_dir, "sweep.svg");
        if (!csv || !svg || write_sweep_csv(csv, rows, n) != 0 ||
            write_sweep_svg(c, svg, rows, n, direct_on) != 0) {
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
