/* bloom_size.c - sizing a filter: m and k from bits per key or from a
 * target FPR, and the expected FPR of either layout (kv_bloom_expected_fpr). */
#include <math.h>

#include "bloom_impl.h"

#define LN2 0.69314718055994530942

static unsigned clamp_k(double k)
{
    if (!(k >= KV_BLOOM_MIN_K))
        return KV_BLOOM_MIN_K;
    if (k > KV_BLOOM_MAX_K)
        return KV_BLOOM_MAX_K;
    return (unsigned)k;
}


/* ---- expected FPR ------------------------------------------------------------ */

static double classic_fpr(double m, double n, unsigned k)
{
    return pow(1.0 - exp(-(double)k * n / m), (double)k);
}

/* ln(n!): exact sum for small n, Stirling's series beyond (error < 1e-12). */
static double log_factorial(double n)
{
    if (n < 16) {
        double s = 0;
        for (double i = 2; i <= n; i++)
            s += log(i);
        return s;
    }
    double inv = 1.0 / n, inv2 = inv * inv;
    return n * log(n) - n + 0.5 * log(2.0 * 3.14159265358979323846 * n) +
           inv * (1.0 / 12 - inv2 * (1.0 / 360 - inv2 / 1260));
}

/* FPR of a blocked filter whose blocks hold Poisson(lambda) keys each. The
 * Poisson weights are summed outward from the mode by recurrence (lgamma is
 * avoided: it writes the global signgam, a data race between threads).
 * Going down, every weight is summed until it underflows. Going up, a term's
 * FPR factor grows towards 1, so the tail is cut only once the weights shrink
 * at least geometrically (j > 2 lambda) and are negligible even times 1. */
static double blocked_fpr(double lambda, unsigned k)
{
    const double stay = log1p(-1.0 / BLOCK_BITS); /* ln(1 - 1/512) */
    double mode = floor(lambda);
    double p_mode = exp(-lambda + mode * log(lambda) - log_factorial(mode));
    double sum = 0, p = p_mode;
    for (double j = mode; j >= 0 && p >= 1e-300; j--) { /* p(j-1) = p(j) j / lambda */
        sum += p * pow(-expm1((double)k * j * stay), (double)k);
        p *= j / lambda;
    }
    p = p_mode * lambda / (mode + 1);
    for (double j = mode + 1; p >= 1e-300; j++) { /* p(j+1) = p(j) lambda / (j+1) */
        sum += p * pow(-expm1((double)k * j * stay), (double)k);
        if (j + 1 > 2 * lambda && p < sum * 1e-18)
            break;
        p *= lambda / (j + 1);
    }
    return sum < 1.0 ? sum : 1.0;
}

double kv_bloom_expected_fpr(kv_bloom_layout layout, uint64_t m_bits, uint64_t n_keys, unsigned k)
{
    if (m_bits == 0 || k == 0)
        return 1.0;
    if (n_keys == 0)
        return 0.0;
    if (layout == KV_BLOOM_BLOCKED)
        return blocked_fpr((double)BLOCK_BITS * (double)n_keys / (double)m_bits, k);
    return classic_fpr((double)m_bits, (double)n_keys, k);
}

/* The k that minimises the blocked layout's FPR at `lambda` keys per block.
 * The FPR is unimodal in k, so walk up from 1 while it improves. */
static unsigned blocked_best_k(double lambda)
{
    unsigned best = KV_BLOOM_MIN_K;
    double best_fpr = blocked_fpr(lambda, best);
    for (unsigned k = best + 1; k <= KV_BLOOM_MAX_K; k++) {
        double fpr = blocked_fpr(lambda, k);
        if (!(fpr < best_fpr))
            break;
        best = k;
        best_fpr = fpr;
    }
    return best;
}

/* ---- sizing ----------------------------------------------------------------- */

/* Rounds `want` bits (a real number >= 0) up to the layout's granularity:
 * whole 512-bit blocks for blocked, whole bits (at least 64) for classic.
 * Returns 0 when the result would exceed KV_BLOOM_MAX_BITS. */
static uint64_t round_bits(kv_bloom_layout layout, double want)
{
    if (!(want <= (double)KV_BLOOM_MAX_BITS))
        return 0;
    uint64_t m = (uint64_t)ceil(want);
    if (layout == KV_BLOOM_BLOCKED)
        m = (m + BLOCK_BITS - 1) / BLOCK_BITS * BLOCK_BITS;
    if (m < (layout == KV_BLOOM_BLOCKED ? BLOCK_BITS : 64))
        m = layout == KV_BLOOM_BLOCKED ? BLOCK_BITS : 64;
    return m <= KV_BLOOM_MAX_BITS ? m : 0;
}

/* k for a filter of m bits built for n keys at `bits_per_key`. Blocked: the
 * k with the lowest expected FPR for the m and n the filter really has.
 * Classic: round(bits_per_key ln 2), from the requested density rather than
 * m/n, which rounding m up to 64 bits distorts for tiny n. */
static unsigned choose_k(kv_bloom_layout layout, uint64_t m, uint64_t n, double bits_per_key)
{
    if (layout == KV_BLOOM_BLOCKED)
        return blocked_best_k(n ? (double)BLOCK_BITS * (double)n / (double)m
                                : BLOCK_BITS / bits_per_key);
    return clamp_k(round(bits_per_key * LN2));
}

int kv_bloom_new(kv_bloom_layout layout, uint64_t expected_keys, double bits_per_key,
                 uint64_t seed, kv_bloom **out)
{
    if (!out)
        return KV_EINVAL;
    *out = NULL;
    if (!kv_bloom_layout_ok(layout) || !(bits_per_key > 0 && bits_per_key <= 1000))
        return KV_EINVAL;
    uint64_t m = round_bits(layout, (double)expected_keys * bits_per_key);
    if (!m)
        return KV_EINVAL;
    return kv_bloom_alloc(layout, m, choose_k(layout, m, expected_keys, bits_per_key), seed, out);
}

int kv_bloom_new_fpr(kv_bloom_layout layout, uint64_t expected_keys, double target_fpr,
                     uint64_t seed, kv_bloom **out)
{
    if (!out)
        return KV_EINVAL;
    *out = NULL;
    if (!kv_bloom_layout_ok(layout) || !(target_fpr > 0 && target_fpr < 1))
        return KV_EINVAL;
    double bpk = -log(target_fpr) / (LN2 * LN2);
    uint64_t m = round_bits(layout, (double)expected_keys * bpk);
    if (!m)
        return KV_EINVAL;
    if (layout == KV_BLOOM_CLASSIC)
        return kv_bloom_alloc(layout, m, clamp_k(round(bpk * LN2)), seed, out);
    /* Blocks fill unevenly, so the blocked layout needs a little more room
     * for the same FPR: grow m by ~1.5% steps until it gets there. */
    unsigned k = choose_k(layout, m, expected_keys, bpk);
    while (expected_keys && kv_bloom_expected_fpr(layout, m, expected_keys, k) > target_fpr) {
        m = round_bits(layout, (double)m * 1.015);
        if (!m)
            return KV_EINVAL;
        k = choose_k(layout, m, expected_keys, bpk);
    }
    return kv_bloom_alloc(layout, m, k, seed, out);
}

