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

/* ln Pois(mode; lambda) = -lambda + mode ln(lambda) - ln(mode!) for the
 * mode = floor(lambda). Below 16 the factorial is an exact sum. Above, with
 * Stirling's series for ln(mode!) (error < 1e-12) the big terms cancel
 * analytically: with d = lambda - mode in [0, 1) it is
 * -d + mode ln(1 + d/mode) - ln(2 pi mode)/2 - (1/12m - 1/360m^3 + 1/1260m^5),
 * which keeps full precision where the plain form would lose the digits of
 * lambda (1e-11 relative at 20,000 keys per block). */
static double log_poisson_mode(double lambda, double mode)
{
    if (mode < 16) {
        double lf = 0;
        for (double i = 2; i <= mode; i++)
            lf += log(i);
        return -lambda + (mode > 0 ? mode * log(lambda) : 0) - lf;
    }
    double d = lambda - mode, inv = 1.0 / mode, inv2 = inv * inv;
    return -d + mode * log1p(d / mode) - 0.5 * log(2.0 * 3.14159265358979323846 * mode) -
           inv * (1.0 / 12 - inv2 * (1.0 / 360 - inv2 / 1260));
}

/* Above this many keys per block every block a key can land in is so full
 * that the FPR is 1 to double precision: a block of j >= 20,000 keys answers
 * "maybe" with probability >= 1 - k e^(-k j / 512) > 1 - 1.1e-16 for every
 * k >= 1, and a Poisson law of mean 30,000 puts less than e^-1600 of its mass
 * below 20,000. */
#define SATURATED_LAMBDA 30000.0

/* Poisson terms whose bound on everything still to add is below this share
 * of the sum so far are dropped: far below double precision. */
#define TAIL_SHARE 1e-17

/* FPR of a blocked filter whose blocks hold Poisson(lambda) keys each:
 * sum_j Pois(j; lambda) f(j), f(j) = (1 - (1 - 1/512)^(k j))^k. The weights
 * are summed outward from the mode by recurrence (lgamma is avoided: it
 * writes the global signgam, a data race between threads), each direction
 * stopping once a bound on its remaining tail is negligible:
 * - going down, f and the weights both fall, so the tail below j is at most
 *   (j + 1) Pois(j) f(j);
 * - going up, f <= 1 and past lambda the weights shrink at least by the ratio
 *   r = lambda / (j + 1) < 1 per step, so the tail is at most Pois(j) / (1 - r).
 * Both cuts come within about 10 sqrt(lambda) terms of the mode, and lambda
 * is at most SATURATED_LAMBDA here, so a call costs at most ~4,000 terms
 * whatever its arguments (a filter that claims 2^62 keys included). */
static double blocked_fpr(double lambda, unsigned k)
{
    if (!(lambda <= SATURATED_LAMBDA)) /* also NaN: such a filter rejects nothing */
        return 1.0;
    const double stay = log1p(-1.0 / BLOCK_BITS); /* ln(1 - 1/512) */
    const double kd = (double)k;
    long mode = (long)floor(lambda);
    double p_mode = exp(log_poisson_mode(lambda, (double)mode));
    double sum = 0, p = p_mode;
    for (long j = mode; j >= 0 && p >= 1e-300; j--) { /* p(j-1) = p(j) j / lambda */
        double term = p * pow(-expm1(kd * (double)j * stay), kd);
        sum += term;
        if (term * (double)(j + 1) < sum * TAIL_SHARE)
            break;
        p *= (double)j / lambda;
    }
    p = p_mode * lambda / (double)(mode + 1);
    for (long j = mode + 1; p >= 1e-300; j++) { /* p(j+1) = p(j) lambda / (j+1) */
        sum += p * pow(-expm1(kd * (double)j * stay), kd);
        double r = lambda / (double)(j + 1);
        p *= r;
        if (r < 1 && p / (1 - r) < sum * TAIL_SHARE)
            break;
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
    /* The bits per key the target implies must be in kv_bloom_new's range:
     * below about 1e-209 no filter of k <= 30 gets there. */
    double bpk = -log(target_fpr) / (LN2 * LN2);
    if (!(bpk <= 1000))
        return KV_EINVAL;
    uint64_t m = round_bits(layout, (double)expected_keys * bpk);
    if (!m)
        return KV_EINVAL;
    if (layout == KV_BLOOM_CLASSIC)
        return kv_bloom_alloc(layout, m, clamp_k(round(bpk * LN2)), seed, out);
    unsigned k;
    int rc = kv_bloom_blocked_size_fpr(expected_keys, target_fpr, &m, &k);
    return rc == KV_OK ? kv_bloom_alloc(layout, m, k, seed, out) : rc;
}

int kv_bloom_blocked_size_fpr(uint64_t n, double p, uint64_t *m_out, unsigned *k_out)
{
    if (!(p > 0 && p < 1))
        return KV_EINVAL;
    double bpk = -log(p) / (LN2 * LN2);
    if (!(bpk <= 1000))
        return KV_EINVAL;
    uint64_t m = round_bits(KV_BLOOM_BLOCKED, (double)n * bpk);
    if (!m)
        return KV_EINVAL;
    /* Blocks fill unevenly, so the blocked layout needs a little more room
     * for the same FPR: grow m by ~1.5% steps until it gets there. */
    unsigned k = choose_k(KV_BLOOM_BLOCKED, m, n, bpk);
    while (n && kv_bloom_expected_fpr(KV_BLOOM_BLOCKED, m, n, k) > p) {
        m = round_bits(KV_BLOOM_BLOCKED, (double)m * 1.015);
        if (!m)
            return KV_EINVAL;
        k = choose_k(KV_BLOOM_BLOCKED, m, n, bpk);
    }
    *m_out = m;
    *k_out = k;
    return KV_OK;
}


double kv_bloom_fpr_at(kv_bloom_layout layout, double bits_per_key)
{
    if (!kv_bloom_layout_ok(layout) || !(bits_per_key > 0))
        return 1.0;
    if (bits_per_key > 1000)
        bits_per_key = 1000;
    if (layout == KV_BLOOM_BLOCKED) {
        double lambda = BLOCK_BITS / bits_per_key;
        return blocked_fpr(lambda, blocked_best_k(lambda));
    }
    return classic_fpr(bits_per_key, 1.0, clamp_k(round(bits_per_key * LN2)));
}
