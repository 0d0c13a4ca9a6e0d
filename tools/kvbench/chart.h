/* chart.h - the SVG pieces kvbench's charts share (sweep.svg, scaling.svg):
 * escaped text and plot panels with their grid, ticks and axis labels.
 * Plain SVG written with fprintf, no plotting library. */
#ifndef KVBENCH_CHART_H
#define KVBENCH_CHART_H

#include <stddef.h>
#include <stdio.h>

/* One plot panel: its area in pixels, the x and y ranges it shows, and
 * its labels. The caller sets the x range; panel_range sets the y range. */
struct panel {
    double x, y, w, h;
    double xmin, xmax, ymin, ymax;
    int log;  /* y axis: log10 */
    int xlog; /* x axis: log10 */
    const char *title, *xlabel, *ylabel;
    /* A tick's text for value v; NULL: "%g" (and "1e-4" below 0.001 on a
     * log y axis). */
    void (*xfmt)(char *buf, size_t n, double v);
    void (*yfmt)(char *buf, size_t n, double v);
};

/* SVG text with &, <, >, " and ' escaped. */
/* Starts an SVG document of w x h pixels: the XML declaration, the <svg>
 * element (sans-serif, 12 px) and a light background; end it with </svg>. */
void svg_begin(FILE *f, double w, double h);
void svg_escape(FILE *f, const char *s);
/* <text> at (x, y); anchor: start, middle or end; extra: more attributes,
 * each with a leading space ("" for none). */
void svg_text(FILE *f, double x, double y, const char *anchor, const char *extra,
              const char *text);

/* Where value v falls in the panel, in pixels. */
double panel_x(const struct panel *p, double v);
double panel_y(const struct panel *p, double v);
/* Sets ymin and ymax to cover the n values v: whole powers of ten on a log
 * axis (values <= 0, which it cannot show, are left out), else from 0 to a
 * "nice" number a little above the largest. */
void panel_range(struct panel *p, const double *v, size_t n);
/* The frame, title, y grid with its labels (on a log axis each power of
 * ten, and 2 and 5 times it too when the axis spans two powers or fewer),
 * an x tick at each of xs[nx] (every other one when more than 12) and
 * both axis labels. */
void draw_panel(FILE *f, const struct panel *p, const double *xs, size_t nx);
/* A "nice" step (1, 2 or 5 times a power of ten) for about five ticks
 * over span. */
double nice_step(double span);
/* A count as a tick's text: 50K, 2.5M, 1G; below 1000 as it is. */
void fmt_count(char *buf, size_t n, double v);

#endif /* KVBENCH_CHART_H */
