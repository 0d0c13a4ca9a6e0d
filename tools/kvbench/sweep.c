/* sweep.c - --sweep: every bits/key in both filter layouts, written as
 * DIR/sweep.csv and charted as DIR/sweep.svg. */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "chart.h"

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
        fprintf(f, "%s%.1f,%.1f", open ? " " : "", panel_x(p, rows[i].bits), panel_y(p, v));
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
        double x = panel_x(p, rows[i].bits), y = panel_y(p, v);
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
        {.x = 90, .y = 120, .w = 360, .h = 220, .log = 1,
         .title = "False-positive rate of missing-key probes",
         .ylabel = "FPR (fraction, log scale)"},
        {.x = 590, .y = 120, .w = 360, .h = 220,
         .title = "Data-block reads per missing-key get", .ylabel = "data blocks read per get"},
        {.x = 90, .y = 460, .w = 360, .h = 220, .title = "Time per missing-key get",
         .ylabel = "microseconds per get"},
        {.x = 590, .y = 460, .w = 360, .h = 220, .title = "Filter memory per key",
         .ylabel = "bytes per key"},
    };
    for (int k = 0; k < 4; k++)
        p[k].xlabel = "filter bits per key";
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

    svg_begin(f, W, H);
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

int run_sweep(struct ctx *c)
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

