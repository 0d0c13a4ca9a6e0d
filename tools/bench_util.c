/* bench_util.c - the helpers filterbench's modes share (bench_util.h). */
#define _GNU_SOURCE /* pthread_attr_setaffinity_np, sched_getaffinity */
#include "bench_util.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double median(double *v, unsigned n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void pin_attr(pthread_attr_t *attr, unsigned i)
{
    pthread_attr_init(attr);
#if defined(__linux__)
    cpu_set_t allowed, one;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) == 0)
        return;
    unsigned want = i % (unsigned)CPU_COUNT(&allowed);
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &allowed) || want-- != 0)
            continue;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        pthread_attr_setaffinity_np(attr, sizeof one, &one);
        return;
    }
#endif
}

int parse_num(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double d = strtod(s, &end);
    if (errno || end == s || *end || !(d >= lo && d <= hi))
        return -1;
    *out = d;
    return 0;
}

int parse_u64(const char *s, double max, uint64_t *out)
{
    double d;
    if (parse_num(s, 0, max, &d) != 0 || d != floor(d))
        return -1;
    *out = (uint64_t)d;
    return 0;
}
