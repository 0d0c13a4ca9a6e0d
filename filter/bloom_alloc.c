/* bloom_alloc.c - Monkey: how many bits per key each run's filter gets,
 * for a total filter memory, so that a missing key meets the fewest false
 * positives (kv_bloom_allocate; the derivation: doc/filter_science.md).
 *
 * The problem: minimise sum_i f(b_i) subject to sum_i n_i b_i = B N, where
 * run i holds n_i keys, gets b_i bits per key, and f is the layout's FPR at
 * b bits per key (kv_bloom_fpr_at). Were f convex, giving each next bit to
 * the run whose FPR it lowers most (the largest -f'(b_i) / n_i) would be
 * exact. f is not quite convex: it is flat near 0 (a filter of a fraction
 * of a bit per key rejects almost nothing) and has kinks where the best k
 * changes. So the greedy walks the lower convex hull of f sampled on a
 * grid: each step moves one run to the next hull vertex, the run with the
 * largest FPR drop per bit spent that the budget still affords. On the
 * hull the drops per bit only fall, so the greedy is exact there, and the
 * hull's vertices are points of f itself. */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "bloom_impl.h"

#define STEPS_PER_BIT 16                      /* grid: 1/16 bit per key */
#define GRID_BITS 64                          /* up to 64 bits per key */
#define NPOINTS (GRID_BITS * STEPS_PER_BIT + 1)
#define UNIFORM_FROM 32.0 /* at and above: every run bits_per_key */

/* f on the grid, and its lower convex hull as grid indices (from 0 to
 * NPOINTS - 1, f falling). */
struct curve {
    double fpr[NPOINTS];
    int hull[NPOINTS];
    int nhull;
};

static struct curve curves[2]; /* by layout: KV_BLOOM_BLOCKED, KV_BLOOM_CLASSIC */
static pthread_once_t once[2] = {PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT};

static void curve_init(struct curve *c, kv_bloom_layout layout)
{
    for (int j = 0; j < NPOINTS; j++)
        c->fpr[j] = kv_bloom_fpr_at(layout, (double)j / STEPS_PER_BIT);
    /* Andrew's monotone chain, lower half: drop the last vertex while it
     * lies on or above the segment from the one before it to point j. */
    int n = 0;
    for (int j = 0; j < NPOINTS; j++) {
        while (n >= 2) {
            int a = c->hull[n - 2], b = c->hull[n - 1];
            double cross = (double)(b - a) * (c->fpr[j] - c->fpr[a]) -
                           (c->fpr[b] - c->fpr[a]) * (double)(j - a);
            if (cross > 0) /* b lies below the segment a..j: it stays */
                break;
            n--;
        }
        c->hull[n++] = j;
    }
    c->nhull = n;
}

static void init_blocked(void) { curve_init(&curves[0], KV_BLOOM_BLOCKED); }
static void init_classic(void) { curve_init(&curves[1], KV_BLOOM_CLASSIC); }

static const struct curve *curve_of(kv_bloom_layout layout)
{
    if (layout == KV_BLOOM_BLOCKED) {
        pthread_once(&once[0], init_blocked);
        return &curves[0];
    }
    pthread_once(&once[1], init_classic);
    return &curves[1];
}

int kv_bloom_allocate(kv_bloom_layout layout, const uint64_t *run_keys, size_t nruns,
                      double bits_per_key, double *run_bits)
{
    if (!kv_bloom_layout_ok(layout) || !(bits_per_key >= 0 && bits_per_key <= 1000) ||
        (nruns && (!run_keys || !run_bits)))
        return KV_EINVAL;
    double keys = 0;
    for (size_t i = 0; i < nruns; i++) {
        keys += (double)run_keys[i];
        run_bits[i] = bits_per_key; /* the uniform allocation, until a better one is found */
    }
    if (keys == 0 || bits_per_key == 0 || bits_per_key >= UNIFORM_FROM)
        return KV_OK;
    const struct curve *c = curve_of(layout);

    /* The greedy: at[i] is run i's position on the hull (hull[at[i]] grid
     * steps). A run of no keys is left out: it costs nothing. */
    int stack_at[64];
    int *at = nruns <= 64 ? stack_at : malloc(nruns * sizeof *at);
    if (!at)
        return KV_OK; /* out of memory: the uniform allocation, which is valid */
    for (size_t i = 0; i < nruns; i++)
        at[i] = 0;
    double left = bits_per_key * keys; /* bits not yet given out */
    for (;;) {
        size_t best = SIZE_MAX;
        double best_gain = 0, best_cost = 0;
        for (size_t i = 0; i < nruns; i++) {
            if (!run_keys[i] || at[i] + 1 >= c->nhull)
                continue;
            int from = c->hull[at[i]], to = c->hull[at[i] + 1];
            double cost = (double)run_keys[i] * (double)(to - from) / STEPS_PER_BIT;
            if (cost > left)
                continue;
            double gain = (c->fpr[from] - c->fpr[to]) / cost;
            if (gain > best_gain) {
                best = i;
                best_gain = gain;
                best_cost = cost;
            }
        }
        if (best == SIZE_MAX)
            break;
        at[best]++;
        left -= best_cost;
    }
    /* What is left buys part of one more step: of the runs the budget
     * could not move a whole step, the one whose next step gains most per
     * bit moves that far along it (on the hull, a fraction of a step gains
     * that fraction of the step's drop), so the memory is exactly the
     * budget. Only when every run is at the grid's end (a budget of over
     * 64 bits per key for some) is it spread over the runs evenly. */
    double stack_bits[64], *b = stack_bits;
    if (nruns > 64 && !(b = malloc(nruns * sizeof *b))) {
        if (at != stack_at)
            free(at);
        return KV_OK;
    }
    size_t part = SIZE_MAX;
    double part_gain = 0;
    for (size_t i = 0; i < nruns; i++) {
        b[i] = (double)c->hull[at[i]] / STEPS_PER_BIT;
        if (!run_keys[i] || at[i] + 1 >= c->nhull)
            continue;
        int from = c->hull[at[i]], to = c->hull[at[i] + 1];
        double gain = (c->fpr[from] - c->fpr[to]) / ((double)run_keys[i] * (double)(to - from));
        if (gain > part_gain) {
            part = i;
            part_gain = gain;
        }
    }
    if (part != SIZE_MAX)
        b[part] += left / (double)run_keys[part];
    else
        for (size_t i = 0; i < nruns; i++)
            b[i] += left / keys;
    double monkey = 0, uniform = 0, at_avg = kv_bloom_fpr_at(layout, bits_per_key);
    for (size_t i = 0; i < nruns; i++) {
        if (!run_keys[i])
            continue;
        uniform += at_avg;
        monkey += kv_bloom_fpr_at(layout, b[i]);
    }
    /* Off the grid's points the curve may lie a hair above its hull; the
     * allocation is kept only where it really beats the uniform one (on a
     * single run, the two are the same allocation). */
    if (monkey < uniform)
        for (size_t i = 0; i < nruns; i++)
            if (run_keys[i])
                run_bits[i] = b[i];
    if (at != stack_at)
        free(at);
    if (b != stack_bits)
        free(b);
    return KV_OK;
}
