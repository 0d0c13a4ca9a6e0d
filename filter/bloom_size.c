/* bloom_size.c - sizing a filter: m and k from bits per key or from a
 * target FPR, and the expected FPR of either layout (kv_bloom_expected_fpr). */
#include <math.h>
#include <pthread.h>

#include "bloom_impl.h"
#include "fpr_sum.h"
#include "util/error.h"

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

int kv_bloom_size(kv_bloom_layout layout, uint64_t expected_keys, double bits_per_key,
                  uint64_t *m, unsigned *k)
{
    if (!kv_bloom_layout_ok(layout) || !(bits_per_key > 0 && bits_per_key <= 1000))
        return KV_EINVAL;
    *m = round_bits(layout, (double)expected_keys * bits_per_key);
    if (!*m)
        return KV_EINVAL;
    *k = choose_k(layout, *m, expected_keys, bits_per_key);
    return KV_OK;
}

int kv_bloom_new(kv_bloom_layout layout, uint64_t expected_keys, double bits_per_key,
                 uint64_t seed, kv_bloom **out)
{
    if (!out)
        return KV_EINVAL;
    *out = NULL;
    uint64_t m;
    unsigned k;
    int rc = kv_bloom_size(layout, expected_keys, bits_per_key, &m, &k);
    return rc != KV_OK ? rc : kv_bloom_alloc(layout, m, k, seed, out);
}

int kv_bloom_size_fpr(kv_bloom_layout layout, uint64_t expected_keys, double target_fpr,
                      uint64_t *m_out, unsigned *k_out)
{
    if (!m_out || !k_out || !kv_bloom_layout_ok(layout) || !(target_fpr > 0 && target_fpr < 1))
        return KV_EINVAL;
    /* The bits per key the target implies must be in kv_bloom_new's range:
     * below about 1e-209 no filter of k <= 30 gets there. */
    double bpk = -log(target_fpr) / (LN2 * LN2);
    if (!(bpk <= 1000))
        return KV_EINVAL;
    uint64_t m = round_bits(layout, (double)expected_keys * bpk);
    if (!m)
        return KV_EINVAL;
    if (layout == KV_BLOOM_CLASSIC) {
        *m_out = m;
        *k_out = clamp_k(round(bpk * LN2));
        return KV_OK;
    }
    return kv_bloom_blocked_size_fpr(expected_keys, target_fpr, m_out, k_out);
}

int kv_bloom_new_fpr(kv_bloom_layout layout, uint64_t expected_keys, double target_fpr,
                     uint64_t seed, kv_bloom **out)
{
    if (!out)
        return KV_EINVAL;
    *out = NULL;
    uint64_t m;
    unsigned k;
    int rc = kv_bloom_size_fpr(layout, expected_keys, target_fpr, &m, &k);
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
     * for the same FPR: grow m by ~1.5% steps until it gets there, but
     * never past KV_BLOOM_BLOCKED_MAX_RATIO times the classic m (at least
     * one block). Beyond that the keys do not justify the memory: near
     * p = 1 every block saturates (2^40 keys at p = 0.999999 would take
     * 10 GB, the classic layout 2.3M bits), and below about 1e-19 the
     * density passes 1000 bits per key. The walk then ends after at most
     * ~190 steps, before anything is allocated. */
    uint64_t cap = round_bits(KV_BLOOM_BLOCKED, (double)n * bpk * KV_BLOOM_BLOCKED_MAX_RATIO);
    unsigned k = choose_k(KV_BLOOM_BLOCKED, m, n, bpk);
    while (n && kv_bloom_expected_fpr(KV_BLOOM_BLOCKED, m, n, k) > p) {
        m = round_bits(KV_BLOOM_BLOCKED, (double)m * 1.015);
        if (!m || (cap && m > cap))
            return kv_error_set(KV_EINVAL, "kv_bloom_new_fpr: the blocked layout would need "
                                           "more than 16 times the classic layout's bits to "
                                           "reach this rate for these keys: refused");
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


/* ---- the blocked layout's exact expected FPR -------------------------------- */

/* kv_bloom_expected_fpr's blocked sum takes a query's k probes as k
 * independent chances of (1 - (1 - 1/512)^(kj)) each; but some of them
 * land on the same bit (two of 12 probes do with probability ~12%), and a
 * query with D < k distinct bits is a positive more often. That makes the
 * closed form optimistic: by 1.2% at k = 7, 3.8% at k = 12. The exact
 * chance that a block of j keys answers "maybe" for a query is
 * sum_D P(D) * P(all D bits set), where P(D) is the law of the number of
 * distinct bits among k uniform probes and P(all D given bits set) follows
 * from the j k probes of the keys by recurrence on h, the given bits hit so
 * far (a probe hits a new one with probability (D - h) / 512). Every term is
 * a probability: no cancellation, whatever k.
 *
 * exact_g[k - 1][j] holds it for j < KV_FPR_SUM_MAX_NJ keys per block,
 * computed once per process (~50M multiply-adds); then an expected FPR is
 * a Poisson sum (kv_fpr_poisson_sum). */
static double exact_g[KV_BLOOM_MAX_K][KV_FPR_SUM_MAX_NJ];
static pthread_once_t exact_once = PTHREAD_ONCE_INIT;

static void exact_init(void)
{
    for (unsigned k = 1; k <= KV_BLOOM_MAX_K; k++) {
        /* dq[D]: P(k probes fall on D distinct bits). */
        double dq[KV_BLOOM_MAX_K + 1] = {1.0};
        for (unsigned t = 0; t < k; t++) {
            for (unsigned x = t + 1; x > 0; x--)
                dq[x] = dq[x] * ((double)x / BLOCK_BITS) +
                        dq[x - 1] * ((double)(BLOCK_BITS - x + 1) / BLOCK_BITS);
            dq[0] = 0;
        }
        /* hit[D][h]: P(h of D given bits are set) after the keys so far. */
        double hit[KV_BLOOM_MAX_K + 1][KV_BLOOM_MAX_K + 1];
        for (unsigned D = 0; D <= k; D++)
            for (unsigned h = 0; h <= k; h++)
                hit[D][h] = h == 0;
        for (unsigned j = 0; j < KV_FPR_SUM_MAX_NJ; j++) {
            double g = 0;
            for (unsigned D = 1; D <= k; D++)
                g += dq[D] * hit[D][D];
            exact_g[k - 1][j] = g;
            for (unsigned t = 0; t < k; t++) /* the next key's k probes */
                for (unsigned D = 1; D <= k; D++) {
                    for (unsigned h = D; h > 0; h--)
                        hit[D][h] = hit[D][h] * (1.0 - (double)(D - h) / BLOCK_BITS) +
                                    hit[D][h - 1] * ((double)(D - h + 1) / BLOCK_BITS);
                    hit[D][0] *= 1.0 - (double)D / BLOCK_BITS;
                }
        }
    }
}

double kv_bloom_blocked_exact_fpr(uint64_t m_bits, uint64_t n_keys, unsigned k)
{
    if (m_bits == 0 || k == 0)
        return 1.0;
    if (n_keys == 0)
        return 0.0;
    if (k > KV_BLOOM_MAX_K)
        k = KV_BLOOM_MAX_K;
    double lambda = (double)BLOCK_BITS * (double)n_keys / (double)m_bits;
    if (!(lambda <= KV_FPR_SUM_MAX_LAMBDA)) /* a filter this full answers "maybe" to almost all */
        return kv_bloom_expected_fpr(KV_BLOOM_BLOCKED, m_bits, n_keys, k);
    pthread_once(&exact_once, exact_init);
    return kv_fpr_poisson_sum(exact_g[k - 1], lambda);
}

static double exact_fpr_of_blocks(uint64_t blocks, uint64_t n, unsigned k)
{
    return kv_bloom_blocked_exact_fpr(blocks * BLOCK_BITS, n, k);
}

int kv_bloom_blocked_size_exact(uint64_t n, double p, uint64_t *m_out, unsigned *k_out)
{
    if (!(p > 0 && p < 1))
        return KV_EINVAL;
    uint64_t blocks;
    int rc = kv_fpr_fewest_blocks(exact_fpr_of_blocks, n, p, KV_BLOOM_MAX_K,
                                  KV_BLOOM_MAX_BITS / BLOCK_BITS, &blocks, k_out);
    if (rc == KV_OK)
        *m_out = blocks * BLOCK_BITS;
    return rc;
}

/* ---- the Poisson sum and the size search (fpr_sum.h) ------------------------ */

double kv_fpr_poisson_sum(const double *g, double lambda)
{
    long nj = (long)(lambda + 12 * sqrt(lambda) + 40);
    double p = exp(-lambda), sum = 0;
    for (long j = 0; j < nj; j++) {
        sum += p * g[j];
        p *= lambda / (double)(j + 1);
    }
    return sum < 1.0 ? sum : 1.0;
}

int kv_fpr_fewest_blocks(kv_fpr_blocks_fn *fpr, uint64_t n, double p, unsigned max_k,
                         uint64_t max_blocks, uint64_t *blocks_out, unsigned *k_out)
{
    uint64_t best = 0;
    unsigned best_k = 0;
    for (unsigned k = 1; k <= max_k; k++) {
        uint64_t lo = 1, hi = best ? best : max_blocks; /* more than the best cannot win */
        if (fpr(hi, n, k) > p)
            continue;
        while (lo < hi) { /* the FPR falls as blocks grow: the fewest that reach p */
            uint64_t mid = lo + (hi - lo) / 2;
            if (fpr(mid, n, k) <= p)
                hi = mid;
            else
                lo = mid + 1;
        }
        if (!best || lo < best) {
            best = lo;
            best_k = k;
        }
    }
    if (!best)
        return KV_EINVAL;
    *blocks_out = best;
    *k_out = best_k;
    return KV_OK;
}
