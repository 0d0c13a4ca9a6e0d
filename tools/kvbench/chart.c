/* chart.c - the SVG pieces kvbench's charts share: escaped text, and plot
 * panels with linear or log10 axes (chart.h). */
#define _XOPEN_SOURCE 700
#include <math.h>

#include "chart.h"

void svg_begin(FILE *f, double w, double h)
{
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n",
            w, h, w, h);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"#fafafa\"/>\n");
}

void svg_escape(FILE *f, const char *s)
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

void svg_text(FILE *f, double x, double y, const char *anchor, const char *extra,
              const char *text)
{
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\"%s>", x, y, anchor, extra);
    svg_escape(f, text);
    fputs("</text>\n", f);
}

double panel_x(const struct panel *p, double v)
{
    double f = p->xlog ? (log10(v) - log10(p->xmin)) / (log10(p->xmax) - log10(p->xmin))
                       : (v - p->xmin) / (p->xmax - p->xmin);
    return p->x + f * p->w;
}

double panel_y(const struct panel *p, double v)
{
    double f = p->log ? (log10(v) - log10(p->ymin)) / (log10(p->ymax) - log10(p->ymin))
                      : (v - p->ymin) / (p->ymax - p->ymin);
    return p->y + p->h - f * p->h;
}

double nice_step(double span)
{
    double raw = span / 5, mag = pow(10, floor(log10(raw)));
    double n = raw / mag;
    return (n <= 1 ? 1 : n <= 2 ? 2 : n <= 5 ? 5 : 10) * mag;
}

void panel_range(struct panel *p, const double *v, size_t n)
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

void draw_panel(FILE *f, const struct panel *p, const double *xs, size_t nx)
{
    char buf[64];
    fprintf(f, "<g class=\"panel\">\n");
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#fff\" "
               "stroke=\"#444\"/>\n", p->x, p->y, p->w, p->h);
    svg_text(f, p->x + p->w / 2, p->y - 10, "middle", " font-weight=\"bold\"", p->title);
    /* y grid and labels */
    if (p->log) {
        /* a narrow axis also gets 2 and 5 times each power of ten */
        int minor = p->ymax <= p->ymin * 100 * 1.0001;
        for (double d = p->ymin; d <= p->ymax * 1.0001; d *= 10)
            for (int m = 1; m <= 5; m += m == 1 ? 1 : 3) {
                double v = d * m;
                if ((m > 1 && !minor) || v > p->ymax * 1.0001)
                    continue;
                double y = panel_y(p, v);
                fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                           "stroke=\"%s\"/>\n", p->x, y, p->x + p->w, y, m > 1 ? "#eee" : "#ddd");
                int e = (int)floor(log10(v) + 1e-9);
                if (p->yfmt)
                    p->yfmt(buf, sizeof buf, v);
                else if (e < -3)
                    snprintf(buf, sizeof buf, "%de%d", m, e);
                else
                    snprintf(buf, sizeof buf, "%g", v);
                svg_text(f, p->x - 6, y + 4, "end", "", buf);
            }
    } else {
        double step = nice_step(p->ymax - p->ymin);
        for (double v = p->ymin; v <= p->ymax + step / 1000; v += step) {
            double y = panel_y(p, v);
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
                    p->x, y, p->x + p->w, y);
            snprintf(buf, sizeof buf, "%g", fabs(v) < step / 1000 ? 0.0 : v);
            svg_text(f, p->x - 6, y + 4, "end", "", buf);
        }
    }
    /* x ticks at every given x (every other one when crowded) */
    size_t every = nx > 12 ? 2 : 1;
    for (size_t i = 0; i < nx; i += every) {
        double x = panel_x(p, xs[i]);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444\"/>\n", x,
                p->y + p->h, x, p->y + p->h + 5);
        if (p->xfmt)
            p->xfmt(buf, sizeof buf, xs[i]);
        else
            snprintf(buf, sizeof buf, "%g", xs[i]);
        svg_text(f, x, p->y + p->h + 18, "middle", "", buf);
    }
    svg_text(f, p->x + p->w / 2, p->y + p->h + 36, "middle", "", p->xlabel);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(-90 %.1f "
               "%.1f)\">", p->x - 52, p->y + p->h / 2, p->x - 52, p->y + p->h / 2);
    svg_escape(f, p->ylabel);
    fputs("</text>\n</g>\n", f);
}

void fmt_count(char *buf, size_t n, double v)
{
    if (v >= 1e9)
        snprintf(buf, n, "%gG", v / 1e9);
    else if (v >= 1e6)
        snprintf(buf, n, "%gM", v / 1e6);
    else if (v >= 1e3)
        snprintf(buf, n, "%gK", v / 1e3);
    else
        snprintf(buf, n, "%g", v);
}
