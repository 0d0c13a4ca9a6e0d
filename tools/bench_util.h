/* bench_util.h - the small helpers filterbench's three modes share
 * (filterbench.c, filterbench_mixed.c, hashbench.c): the clock, medians,
 * thread pinning, key bits and number parsing. Tool-only code, compiled
 * into filterbench alone. */
#ifndef KV_TOOLS_BENCH_UTIL_H
#define KV_TOOLS_BENCH_UTIL_H

#include <pthread.h>
#include <stdint.h>

/* splitmix64's output function: a well-mixed 64 bits from x, for
 * generating keys (inline: key generation loops over millions). */
static inline uint64_t splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* CLOCK_MONOTONIC in ns. */
double now_ns(void);

/* The median of v[0 .. n) (n >= 1; the mean of the middle two when n is
 * even); sorts v. */
double median(double *v, unsigned n);

/* Attributes that start thread i on the i-th CPU this process may use
 * (modulo their number): left to itself, the scheduler may start two
 * threads on one CPU and move one only milliseconds later, about as long
 * as a fill of a cache-resident filter takes. Default attributes where
 * CPUs cannot be chosen. The caller destroys *attr. */
void pin_attr(pthread_attr_t *attr, unsigned i);

/* Reads all of s as strtod does (so 1e6 as well as 1000000): 0 with *out
 * set when it is a number in [lo, hi], else -1. */
int parse_num(const char *s, double lo, double hi, double *out);

/* As parse_num, for a whole number in [0, max]. */
int parse_u64(const char *s, double max, uint64_t *out);

#endif /* KV_TOOLS_BENCH_UTIL_H */
