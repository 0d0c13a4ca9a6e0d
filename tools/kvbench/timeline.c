/* timeline.c - --timeline: how a fill's throughput and tail latency move
 * over time, beside the engine's flushes and compactions. For each engine
 * of --engines in turn, a child process (run_in_child, as --scaling runs
 * its workloads) fills a fresh database with fillrandom of --num keys
 * while the monitor writes a row every --stats_interval seconds (the
 * columns of stats.csv, an engine column first) into
 * REPORT_DIR/timeline.csv. The chart REPORT_DIR/timeline.svg and a table
 * on the text stream are drawn from that CSV once every engine has run;
 * --timeline_chart=CSV draws them from a CSV alone, running nothing. */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "chart.h"

#define TL_ENGINES 16   /* engines one chart tells apart */
#define TL_NAME 32      /* bytes of an engine's name, NUL included */
#define SLOW_US 1000.0  /* the table counts intervals whose p99.9 is above it */

/* What a child sends back: its fill, as a --benchmarks run reports it. */
struct timeline_run {
    struct result fill;
};

/* One interval of one engine, from a row of the CSV. */
struct tl_point {
    double t0, t1;   /* seconds since the fill began */
    double ops, ops_per_sec;
    double p999;     /* microseconds; NAN when no op completed in it */
    int compacting;  /* 1, 0, or -1 when the engine does not say */
};

struct tl_series {
    char engine[TL_NAME];
    struct tl_point *p;
    size_t n, cap;
    const struct result *fill; /* --timeline: the child's; NULL from a CSV alone */
};

struct timeline {
    struct tl_series s[TL_ENGINES];
    size_t ne;
    double interval; /* the rows' median interval_s, for the subtitle */
};

static void timeline_free(struct timeline *tl)
{
    for (size_t e = 0; e < tl->ne; e++)
        free(tl->s[e].p);
}

/* ---- the CSV back into series ----------------------------------------------------------- */

#define TL_FIELDS 64

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* tl->interval: the median length of the intervals (the last one of each
 * engine's fill is a part of one). */
static int median_interval(struct timeline *tl)
{
    size_t n = 0, k = 0;
    for (size_t e = 0; e < tl->ne; e++)
        n += tl->s[e].n;
    double *v = malloc((n + 1) * sizeof *v);
    if (!v)
        return -1;
    for (size_t e = 0; e < tl->ne; e++)
        for (size_t i = 0; i < tl->s[e].n; i++)
            v[k++] = tl->s[e].p[i].t1 - tl->s[e].p[i].t0;
    qsort(v, n, sizeof *v, cmp_double);
    tl->interval = n ? v[n / 2] : 0;
    free(v);
    return 0;
}

/* Reads every row of the CSV at path into tl, engines in order of first
 * appearance; repeated header lines (CSVs concatenated) and blank lines
 * are skipped. `what` names the flag in messages. 0, or -1 after saying why. */
static int read_timeline(const char *path, const char *what, struct timeline *tl)
{
    memset(tl, 0, sizeof *tl);
    FILE *in = open_csv_input(what, path); /* a regular file only */
    if (!in)
        return -1;
    enum { C_ENGINE, C_TIME, C_INTERVAL, C_OPS, C_OPS_PER_SEC, C_P999, C_COMPACTING, C_ALL };
    static const char *const names[C_ALL] = {"engine", "time_s", "interval_s", "ops",
                                             "ops_per_sec", "p999_us", "compacting"};
    int col[C_ALL];
    char *line = NULL, *header = NULL, *f[TL_FIELDS];
    size_t cap = 0, nfields = 0, lineno = 0;
    ssize_t len;
    int rc = 0;
    while (rc == 0 && (len = getline(&line, &cap, in)) >= 0) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = 0;
        if (!len || (header && !strcmp(line, header)))
            continue;
        if (!header) {
            if (!(header = strdup(line))) {
                fprintf(stderr, "kvbench: out of memory\n");
                rc = -1;
                break;
            }
            nfields = csv_split(line, f, TL_FIELDS);
            for (int k = 0; k < C_ALL && rc == 0; k++) {
                col[k] = -1;
                for (size_t i = 0; i < nfields && i < TL_FIELDS; i++)
                    if (!strcmp(f[i], names[k]))
                        col[k] = (int)i;
                if (col[k] < 0) {
                    fprintf(stderr, "kvbench: %s%s: no column %s (want a CSV that kvbench "
                                    "--timeline wrote)\n", what, path, names[k]);
                    rc = -1;
                }
            }
            continue;
        }
        if (csv_split(line, f, TL_FIELDS) != nfields) {
            fprintf(stderr, "kvbench: %s%s: line %zu has not the header's %zu fields\n", what,
                    path, lineno, nfields);
            rc = -1;
            break;
        }
        double v[C_ALL];
        const char *bad = NULL, *name = f[col[C_ENGINE]];
        if (!*name || strlen(name) >= TL_NAME)
            bad = names[C_ENGINE];
        for (int k = C_TIME; k < C_ALL && !bad; k++)
            if (csv_number(f[col[k]], &v[k]) != 0 ||
                (k != C_P999 && k != C_COMPACTING && !isfinite(v[k])) || v[k] < 0)
                bad = names[k];
        if (!bad && isfinite(v[C_COMPACTING]) && v[C_COMPACTING] != 0 && v[C_COMPACTING] != 1)
            bad = names[C_COMPACTING];
        if (bad) {
            fprintf(stderr, "kvbench: %s%s: line %zu: bad %s\n", what, path, lineno, bad);
            rc = -1;
            break;
        }
        size_t e = 0;
        while (e < tl->ne && strcmp(tl->s[e].engine, name) != 0)
            e++;
        if (e == TL_ENGINES) {
            fprintf(stderr, "kvbench: %s%s: more than %d engines\n", what, path, TL_ENGINES);
            rc = -1;
            break;
        }
        struct tl_series *s = &tl->s[e];
        if (e == tl->ne)
            snprintf(tl->s[tl->ne++].engine, TL_NAME, "%s", name);
        if (s->n == s->cap) {
            size_t room = s->cap ? 2 * s->cap : 64;
            struct tl_point *grown = realloc(s->p, room * sizeof *grown);
            if (!grown) {
                fprintf(stderr, "kvbench: out of memory\n");
                rc = -1;
                break;
            }
            s->p = grown;
            s->cap = room;
        }
        s->p[s->n++] = (struct tl_point){
            .t0 = v[C_TIME] - v[C_INTERVAL], .t1 = v[C_TIME], .ops = v[C_OPS],
            .ops_per_sec = v[C_OPS_PER_SEC], .p999 = v[C_P999],
            .compacting = isfinite(v[C_COMPACTING]) ? (int)v[C_COMPACTING] : -1};
    }
    if (rc == 0 && ferror(in)) {
        fprintf(stderr, "kvbench: %s%s: %s\n", what, path, strerror(errno));
        rc = -1;
    }
    fclose(in);
    free(line);
    free(header);
    if (rc == 0 && !tl->ne) {
        fprintf(stderr, "kvbench: %s%s: no rows\n", what, path);
        rc = -1;
    }
    if (rc == 0 && median_interval(tl) != 0) {
        fprintf(stderr, "kvbench: out of memory\n");
        rc = -1;
    }
    if (rc != 0)
        timeline_free(tl);
    return rc;
}

/* ---- the table -------------------------------------------------------------------------- */

static void print_table(FILE *f, const struct timeline *tl)
{
    int from_csv = 0;
    fprintf(f, "------------------------------------------------\n");
    fprintf(f, "Timeline: fillrandom, p99.9 of each interval of %.3g s from the ops "
               "completed in it\n", tl->interval);
    fprintf(f, "%-8s %12s %10s %10s %10s  %s\n", "engine", "fill ops/s", "p99.9 us",
            "p99.99 us", "max us", "intervals p99.9 > 1 ms");
    for (size_t e = 0; e < tl->ne; e++) {
        const struct tl_series *s = &tl->s[e];
        double ops = 0, secs = 0;
        size_t slow = 0, timed = 0;
        for (size_t i = 0; i < s->n; i++) {
            ops += s->p[i].ops;
            secs += s->p[i].t1 - s->p[i].t0;
            timed += isfinite(s->p[i].p999);
            slow += isfinite(s->p[i].p999) && s->p[i].p999 > SLOW_US;
        }
        const struct result *r = s->fill;
        fprintf(f, "%-8s %12.0f", s->engine,
                r && r->seconds > 0 ? (double)r->ops / r->seconds : secs > 0 ? ops / secs : 0);
        if (r && r->has_hist)
            fprintf(f, " %10.2f %10.2f %10.2f", r->p999, r->p9999, r->pmax);
        else
            fprintf(f, " %10s %10s %10s", "-", "-", "-");
        from_csv |= !r;
        fprintf(f, "  %zu of %zu\n", slow, timed);
    }
    if (from_csv)
        fprintf(f, "(from the CSV alone: ops/s over its intervals; the whole fill's "
                   "percentiles are not in it)\n");
    fflush(f);
}

/* ---- the chart -------------------------------------------------------------------------- */

static void fmt_seconds(char *buf, size_t n, double v)
{
    snprintf(buf, n, "%g", v);
}

/* Engine s's line through the middle of each interval: ops/sec, or p99.9
 * (intervals without one break the line). */
static void draw_line(FILE *f, const struct panel *p, const struct tl_series *s, int latency)
{
    int open = 0;
    for (size_t i = 0; i < s->n; i++) {
        double y = latency ? s->p[i].p999 : s->p[i].ops_per_sec;
        if (latency && !(y > 0)) {
            if (open)
                fputs("\"/>\n", f);
            open = 0;
            continue;
        }
        if (!open)
            fputs("<polyline fill=\"none\" stroke-width=\"1.5\" points=\"", f);
        fprintf(f, "%s%.1f,%.1f", open ? " " : "", panel_x(p, (s->p[i].t0 + s->p[i].t1) / 2),
                panel_y(p, y));
        open = 1;
    }
    if (open)
        fputs("\"/>\n", f);
}

/* Engine e's band row at y: a light box, shaded over each run of intervals
 * in which a flush or compaction was active. */
static void draw_band(FILE *f, const struct panel *p, const struct tl_series *s, size_t e,
                      double y, double h)
{
    const char *col = engine_color(s->engine, e);
    int known = 0;
    for (size_t i = 0; i < s->n; i++)
        known |= s->p[i].compacting >= 0;
    fprintf(f, "<g class=\"band\" data-engine=\"");
    svg_escape(f, s->engine);
    fprintf(f, "\">\n<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#fff\" "
               "stroke=\"#ccc\"/>\n", p->x, y, p->w, h);
    svg_text(f, p->x - 6, y + h - 3, "end", "", s->engine);
    if (!known)
        svg_text(f, p->x + 6, y + h - 3, "start", " fill=\"#999\"", "not reported");
    for (size_t i = 0; i < s->n;) {
        if (s->p[i].compacting != 1) {
            i++;
            continue;
        }
        size_t j = i;
        while (j + 1 < s->n && s->p[j + 1].compacting == 1)
            j++;
        double x0 = panel_x(p, s->p[i].t0), x1 = panel_x(p, s->p[j].t1);
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" "
                   "fill-opacity=\"0.3\"/>\n", x0, y, x1 - x0 > 0.5 ? x1 - x0 : 0.5, h, col);
        i = j + 1;
    }
    fprintf(f, "</g>\n");
}

static int write_svg(const char *path, const struct timeline *tl)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    const double W = 1000, PX = 90, PW = 860, PH = 220, BAND = 14;
    const double top = 110, low = top + PH + 80, bands = low + PH + 70;
    const double H = bands + (BAND + 4) * (double)tl->ne + 50;
    double xmax = 0;
    size_t nall = 0;
    for (size_t e = 0; e < tl->ne; e++)
        for (size_t i = 0; i < tl->s[e].n; i++, nall++)
            if (tl->s[e].p[i].t1 > xmax)
                xmax = tl->s[e].p[i].t1;
    double step = nice_step(xmax > 0 ? xmax : 1);
    xmax = ceil((xmax > 0 ? xmax : 1) / step) * step;
    double xs[64];
    size_t nx = 0;
    for (double x = 0; x <= xmax + step / 1000 && nx < 64; x += step)
        xs[nx++] = x;
    double *ops = malloc((nall + 1) * sizeof *ops), *lat = malloc((nall + 1) * sizeof *lat);
    if (!ops || !lat) {
        free(ops);
        free(lat);
        fclose(f);
        errno = ENOMEM;
        return -1;
    }
    size_t k = 0;
    for (size_t e = 0; e < tl->ne; e++)
        for (size_t i = 0; i < tl->s[e].n; i++, k++) {
            ops[k] = tl->s[e].p[i].ops_per_sec;
            lat[k] = tl->s[e].p[i].p999;
        }
    struct panel p[2] = {
        {.x = PX, .y = top, .w = PW, .h = PH, .xmin = 0, .xmax = xmax,
         .title = "fillrandom: ops/sec per interval", .xlabel = "seconds since the fill began",
         .ylabel = "ops/sec", .xfmt = fmt_seconds},
        {.x = PX, .y = low, .w = PW, .h = PH, .xmin = 0, .xmax = xmax, .log = 1,
         .title = "p99.9 latency of the ops completed in each interval",
         .xlabel = "seconds since the fill began", .ylabel = "p99.9 microseconds (log scale)",
         .xfmt = fmt_seconds}};
    panel_range(&p[0], ops, nall);
    panel_range(&p[1], lat, nall);
    free(ops);
    free(lat);

    svg_begin(f, W, H);
    svg_text(f, W / 2, 28, "middle", " font-size=\"17\" font-weight=\"bold\"",
             "kvbench timeline: a fill, interval by interval");
    char sub[160];
    snprintf(sub, sizeof sub, "one point per interval of %.3g s; bands: a flush or compaction "
                              "active in the interval", tl->interval);
    svg_text(f, W / 2, 48, "middle", " fill=\"#555\"", sub);
    fprintf(f, "<g class=\"legend\">\n");
    double lx = W / 2 - 130.0 * (double)tl->ne / 2;
    for (size_t e = 0; e < tl->ne; e++) {
        double x = lx + 130.0 * (double)e;
        fprintf(f, "<line x1=\"%.1f\" y1=\"76\" x2=\"%.1f\" y2=\"76\" stroke=\"%s\" "
                   "stroke-width=\"2\"/>\n", x, x + 30, engine_color(tl->s[e].engine, e));
        svg_text(f, x + 36, 80, "start", "", tl->s[e].engine);
    }
    fprintf(f, "</g>\n");
    draw_panel(f, &p[0], xs, nx);
    draw_panel(f, &p[1], xs, nx);
    if (SLOW_US > p[1].ymin && SLOW_US < p[1].ymax) { /* the table's threshold */
        double y = panel_y(&p[1], SLOW_US);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#999\" "
                   "stroke-dasharray=\"4 3\"/>\n", PX, y, PX + PW, y);
        svg_text(f, PX + PW - 4, y - 4, "end", " fill=\"#777\"", "1 ms");
    }
    for (size_t e = 0; e < tl->ne; e++) {
        fprintf(f, "<g class=\"series\" data-engine=\"");
        svg_escape(f, tl->s[e].engine);
        fprintf(f, "\" stroke=\"%s\">\n", engine_color(tl->s[e].engine, e));
        draw_line(f, &p[0], &tl->s[e], 0);
        draw_line(f, &p[1], &tl->s[e], 1);
        fprintf(f, "</g>\n");
    }
    svg_text(f, PX + PW / 2, bands - 8, "middle", " font-weight=\"bold\"",
             "flush or compaction active");
    for (size_t e = 0; e < tl->ne; e++)
        draw_band(f, &p[1], &tl->s[e], e, bands + (BAND + 4) * (double)e, BAND);
    svg_text(f, W / 2, H - 14, "middle", " fill=\"#555\"",
             "Each engine: fillrandom of every key once in random order into a fresh database, "
             "in a process of its own; latency from a log-bucketed histogram (about 6%).");
    fprintf(f, "</svg>\n");
    return fclose(f) == 0 ? 0 : -1;
}

/* The chart at svg_path and the table on `text` from the CSV at csv_path;
 * fills, when not NULL, are the children's (names[i]'s), for the table. */
static int chart_and_table(FILE *text, const char *what, const char *csv_path,
                           const char *svg_path, const struct result *fills,
                           const char *const *names, size_t nfills)
{
    struct timeline tl;
    if (read_timeline(csv_path, what, &tl) != 0)
        return -1;
    for (size_t e = 0; e < tl.ne; e++)
        for (size_t i = 0; i < nfills; i++)
            if (!strcmp(tl.s[e].engine, names[i]))
                tl.s[e].fill = &fills[i];
    print_table(text, &tl);
    int rc = 0;
    if (write_svg(svg_path, &tl) != 0) {
        fprintf(stderr, "kvbench: cannot write %s: %s\n", svg_path, strerror(errno));
        rc = -1;
    }
    timeline_free(&tl);
    return rc;
}

/* ---- the runs --------------------------------------------------------------------------- */

/* In the child: fillrandom on a fresh database, reported as a --benchmarks
 * run reports it, its rows going to c->stats_csv; the database goes after. */
static int timeline_work(struct ctx *c, void *out)
{
    struct timeline_run *run = out;
    struct target *t = &c->main;
    const struct bench_def *d = bench_named("fillrandom");
    int rc = reset_target(c, t);
    if (rc == 0 && (rc = run_bench(c, d, t, &run->fill)) == 0)
        report(c, &run->fill, d);
    close_target(c, t);
    if (destroy_db(c, t->path, 0) != 0 && rc == 0)
        rc = -1;
    if (stop_requested)
        rc = E_INTERRUPTED;
    return rc;
}

int run_timeline(struct ctx *c)
{
    struct options *o = &c->o;
    const unsigned ne = c->nscaling_engines;
    char *csv_path = dup_printf("%s/%s", o->report_dir, "timeline.csv");
    char *svg_path = dup_printf("%s/%s", o->report_dir, "timeline.svg");
    struct timeline_run *runs = calloc(ne, sizeof *runs);
    struct result *fills = calloc(ne, sizeof *fills);
    const char *names[MAX_ENGINES];
    FILE *csv = NULL;
    int rc = 0;
    size_t done = 0;
    if (!csv_path || !svg_path || !runs || !fills) {
        fprintf(stderr, "kvbench: out of memory\n");
        rc = -1;
        goto out;
    }
    /* The header, then the file again for appending: every child's rows
     * land after those before them, whatever its FILE thinks the offset is. */
    csv = fopen(csv_path, "w");
    if (csv && (fprintf(csv, "engine,%s\n", STATS_CSV_HEADER) < 0 || fclose(csv) != 0))
        csv = NULL;
    else if (csv)
        csv = fopen(csv_path, "a");
    if (!csv) {
        fprintf(stderr, "kvbench: cannot write %s: %s\n", csv_path, strerror(errno));
        rc = -1;
        goto out;
    }
    c->stats_csv = csv;
    c->stats_engine_column = 1;
    for (unsigned j = 0; j < ne && rc == 0; j++) {
        c->e = c->scaling_engines[j];
        c->main.cfg.bloom_bits = c->e->no_filters ? 0 : o->bloom_bits;
        fprintf(c->text, "--- %s: fillrandom of %llu keys, a row every %g s ---\n", c->e->name,
                (unsigned long long)o->num, o->stats_interval);
        if ((rc = run_in_child(c, timeline_work, &runs[j], sizeof runs[j])) != 0)
            break;
        fills[done] = runs[j].fill;
        names[done++] = c->e->name;
    }
    c->stats_csv = NULL;
    c->stats_engine_column = 0;
    if (fclose(csv) != 0 && rc == 0) {
        fprintf(stderr, "kvbench: writing %s: %s\n", csv_path, strerror(errno));
        rc = -1;
    }
    /* what ran is charted even when a later run failed or was interrupted */
    if (done && chart_and_table(c->text, "", csv_path, svg_path, fills, names, done) != 0 &&
        rc == 0)
        rc = -1;
    if (done)
        fprintf(c->text, "timeline     : wrote %s and %s\n", csv_path, svg_path);
out:
    free(csv_path);
    free(svg_path);
    free(runs);
    free(fills);
    return rc;
}

int timeline_chart(struct ctx *c)
{
    const char *csv_path = c->o.timeline_chart;
    FILE *text = c->o.json ? stderr : stdout;
    char *svg_path;
    /* next to the CSV unless --report_dir says where */
    if (c->o.report_dir) {
        svg_path = dup_printf("%s/%s", c->o.report_dir, "timeline.svg");
    } else {
        const char *slash = strrchr(csv_path, '/');
        char *dir = slash ? strndup(csv_path, (size_t)(slash - csv_path) + (slash == csv_path))
                          : strdup(".");
        svg_path = dir ? dup_printf("%s/%s", dir, "timeline.svg") : NULL;
        free(dir);
    }
    if (!svg_path) {
        fprintf(stderr, "kvbench: out of memory\n");
        return -1;
    }
    int rc = chart_and_table(text, "--timeline_chart=", csv_path, svg_path, NULL, NULL, 0);
    if (rc == 0)
        fprintf(text, "timeline     : drew %s from %s\n", svg_path, csv_path);
    free(svg_path);
    return rc;
}
