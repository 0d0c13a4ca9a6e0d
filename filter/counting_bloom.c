/* counting_bloom.c - the counting Bloom filter of counting_bloom.h: 4-bit
 * counters in 64-byte blocks, sizing by the exact expected FPR, and its
 * codec (doc/filter_format.md, "Counting filter").
 *
 * A block is 8 words of 16 counters; counter c (0..127) of a block is bits
 * 4(c mod 16) .. 4(c mod 16)+3 of word c / 16. A key's block is
 * fastrange(h, blocks); with x the low 32 bits of h, its probe i is
 * counter (x * kv_bloom_probe_mul[i]) >> 25, the top 7 bits of the product
 * the blocked Bloom filter takes its top 9 from. Every operation first
 * turns the key into `want`, per word of its block a mask with bit 0 of
 * each of the key's counters in that word (probes that land on one counter
 * set one bit), and then works on whole words with nibble arithmetic. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <kv/counting_bloom.h>

#include "bloom_impl.h"
#include "filter_format.h"
#include "fpr_sum.h"
#include "util/coding.h"
#include "util/error.h"
#include "util/hash.h"
#include "util/tally.h"

#define SLOTS 128u                /* counters per block */
#define WORDS 8u                  /* 64-bit words per block */
#define LOW_BITS 0x1111111111111111ull /* bit 0 of each counter */
#define CAP 15u                        /* a counter saturates here */

struct kv_counting_bloom {
    _Atomic uint64_t *words; /* blocks * 8, 64-byte aligned */
    uint64_t blocks;
    uint64_t seed;
    unsigned k;
    uint64_t expected_keys; /* as given to new (for the encoding) */
    double fpr;             /* as given to new */
    uint64_t base_keys;     /* keys counted before this process (from decode) */
    /* Adds minus successful removes since, counted per thread (tally.h: no
     * locked instruction on the add's path), mod 2^64. */
    struct key_stripe *stripes;
};

struct key_stripe {
    _Alignas(CACHE_LINE) _Atomic uint64_t keys;
};

/* Bit 0 of each counter of `w` that is nonzero. */
static inline uint64_t nonzero(uint64_t w)
{
    return (w | w >> 1 | w >> 2 | w >> 3) & LOW_BITS;
}

/* Bit 0 of each counter of `w` that is saturated (15). */
static inline uint64_t saturated(uint64_t w)
{
    return w & w >> 1 & w >> 2 & w >> 3 & LOW_BITS;
}

/* The key's block (its first word) and its counter masks. */
static inline _Atomic uint64_t *locate(const kv_counting_bloom *f, const void *key, size_t len,
                                       uint64_t want[WORDS])
{
    uint64_t h = kv_hash_key(key, len, f->seed);
    uint32_t x = (uint32_t)h;
    memset(want, 0, WORDS * sizeof *want);
    for (unsigned i = 0; i < f->k; i++) {
        unsigned c = (x * kv_bloom_probe_mul[i]) >> 25;
        want[c >> 4] |= (uint64_t)1 << ((c & 15) * 4);
    }
    return f->words + kv_fastrange64(h, f->blocks) * WORDS;
}

/* ---- expected FPR ------------------------------------------------------------ */

/* block_fpr[k - 1][j]: P(all k probes of a query hit set counters) in a
 * block of j keys, for j < KV_FPR_SUM_MAX_NJ. With X_t the number of distinct
 * counters that t uniform probes set (an occupancy law, by recurrence on
 * t), it is E[(X_{jk} / 128)^k]. Computed once per process (~15M
 * multiply-adds): sizing then costs only Poisson sums. */
static double block_fpr[KV_COUNTING_BLOOM_MAX_K][KV_FPR_SUM_MAX_NJ];
static pthread_once_t block_fpr_once = PTHREAD_ONCE_INIT;

static void block_fpr_init(void)
{
    for (unsigned k = 1; k <= KV_COUNTING_BLOOM_MAX_K; k++) {
        double dist[SLOTS + 1] = {1.0}, pw[SLOTS + 1];
        for (unsigned x = 0; x <= SLOTS; x++)
            pw[x] = pow((double)x / SLOTS, (double)k);
        for (long j = 0; j < KV_FPR_SUM_MAX_NJ; j++) {
            double s = 0;
            for (unsigned x = 0; x <= SLOTS; x++)
                s += dist[x] * pw[x];
            block_fpr[k - 1][j] = s;
            for (unsigned t = 0; t < k; t++) { /* k more probes: one key more */
                for (unsigned x = SLOTS; x > 0; x--)
                    dist[x] = dist[x] * ((double)x / SLOTS) +
                              dist[x - 1] * ((double)(SLOTS - x + 1) / SLOTS);
                dist[0] = 0;
            }
        }
    }
}

/* The expected FPR of `blocks` blocks holding n keys with k counters each:
 * sum over j of Pois(j; lambda) * block_fpr(j), lambda = n / blocks
 * (kv_fpr_poisson_sum). Above KV_FPR_SUM_MAX_LAMBDA keys per block it uses
 * the Poisson mean alone (the exact sum would take too long, and the
 * filter is useless). */
static double expected_fpr(uint64_t blocks, uint64_t n, unsigned k)
{
    if (n == 0)
        return 0.0;
    double lambda = (double)n / (double)blocks;
    if (!(lambda <= KV_FPR_SUM_MAX_LAMBDA)) {
        double set = -expm1((double)k * lambda * log1p(-1.0 / SLOTS));
        return pow(set, (double)k);
    }
    pthread_once(&block_fpr_once, block_fpr_init);
    return kv_fpr_poisson_sum(block_fpr[k - 1], lambda);
}

/* The fewest blocks, and the k for them, that expect at most p false
 * positives with n keys (kv_fpr_fewest_blocks; on a tie the smaller k:
 * fewer counters to touch). KV_EINVAL when no k gets there within
 * KV_COUNTING_BLOOM_MAX_BLOCKS. */
static int size_for(uint64_t n, double p, uint64_t *blocks_out, unsigned *k_out)
{
    return kv_fpr_fewest_blocks(expected_fpr, n, p, KV_COUNTING_BLOOM_MAX_K,
                                KV_COUNTING_BLOOM_MAX_BLOCKS, blocks_out, k_out);
}

/* ---- the filter ------------------------------------------------------------- */

static int alloc_filter(uint64_t blocks, unsigned k, uint64_t seed, kv_counting_bloom **out)
{
    kv_counting_bloom *f = calloc(1, sizeof *f);
    if (!f)
        return KV_ENOMEM;
    f->words = aligned_alloc(CACHE_LINE, (size_t)blocks * CACHE_LINE);
    f->stripes = kv_tally_new(sizeof *f->stripes);
    if (!f->words || !f->stripes) {
        free((void *)f->words);
        free(f->stripes);
        free(f);
        return KV_ENOMEM;
    }
    memset((void *)f->words, 0, (size_t)blocks * CACHE_LINE);
    f->blocks = blocks;
    f->k = k;
    f->seed = seed;
    *out = f;
    return KV_OK;
}

int kv_counting_bloom_new(uint64_t expected_keys, double fpr, uint64_t seed,
                          kv_counting_bloom **out)
{
    if (!out)
        return kv_error_set(KV_EINVAL, "kv_counting_bloom_new: out is NULL");
    *out = NULL;
    if (!(fpr > 0 && fpr < 1))
        return kv_error_set(KV_EINVAL, "kv_counting_bloom_new: fpr %g is not in (0, 1)", fpr);
    uint64_t n = expected_keys ? expected_keys : 1, blocks;
    unsigned k;
    if (size_for(n, fpr, &blocks, &k) != KV_OK)
        return kv_error_set(KV_EINVAL,
                            "kv_counting_bloom_new: %llu keys at fpr %g need more than %llu blocks",
                            (unsigned long long)n, fpr,
                            (unsigned long long)KV_COUNTING_BLOOM_MAX_BLOCKS);
    if (alloc_filter(blocks, k, seed, out) != KV_OK)
        return kv_error_set(KV_ENOMEM, "kv_counting_bloom_new: out of memory for %llu bytes",
                            (unsigned long long)blocks * CACHE_LINE);
    (*out)->expected_keys = expected_keys;
    (*out)->fpr = fpr;
    return KV_OK;
}

void kv_counting_bloom_free(kv_counting_bloom *f)
{
    if (!f)
        return;
    free((void *)f->words);
    free(f->stripes);
    free(f);
}

static int bad_args(const char *call, const void *f, const void *key, size_t len)
{
    if (!f)
        return kv_error_set(KV_EINVAL, "%s: filter is NULL", call);
    if (!key && len)
        return kv_error_set(KV_EINVAL, "%s: key is NULL with length %zu", call, len);
    return KV_OK;
}

int kv_counting_bloom_add(kv_counting_bloom *f, const void *key, size_t len)
{
    if (__builtin_expect(!f || (!key && len), 0))
        return bad_args("kv_counting_bloom_add", f, key, len);
    uint64_t want[WORDS];
    _Atomic uint64_t *b = locate(f, key, len, want);
    for (unsigned w = 0; w < WORDS; w++) {
        if (!want[w])
            continue;
        uint64_t old = atomic_load_explicit(&b[w], memory_order_relaxed), neu;
        do /* +1 on each of the key's counters below 15: no carry between them */
            neu = old + (want[w] & ~saturated(old));
        while (!atomic_compare_exchange_weak_explicit(&b[w], &old, neu, memory_order_relaxed,
                                                      memory_order_relaxed));
    }
    unsigned slot = kv_tally_slot();
    kv_tally_add(&f->stripes[slot].keys, slot, 1);
    return KV_OK;
}

int kv_counting_bloom_remove(kv_counting_bloom *f, const void *key, size_t len)
{
    if (__builtin_expect(!f || (!key && len), 0))
        return bad_args("kv_counting_bloom_remove", f, key, len);
    uint64_t want[WORDS];
    _Atomic uint64_t *b = locate(f, key, len, want);
    for (unsigned w = 0; w < WORDS; w++)
        if (want[w] & ~nonzero(atomic_load_explicit(&b[w], memory_order_relaxed)))
            return KV_NOTFOUND; /* a counter of the key is zero: it is not here */
    for (unsigned w = 0; w < WORDS; w++) {
        if (!want[w])
            continue;
        uint64_t old = atomic_load_explicit(&b[w], memory_order_relaxed), neu;
        do /* -1 on each of the key's counters that is neither 0 nor 15 */
            neu = old - (want[w] & ~saturated(old) & nonzero(old));
        while (!atomic_compare_exchange_weak_explicit(&b[w], &old, neu, memory_order_relaxed,
                                                      memory_order_relaxed));
    }
    unsigned slot = kv_tally_slot();
    kv_tally_add(&f->stripes[slot].keys, slot, UINT64_MAX); /* -1 mod 2^64 */
    return KV_OK;
}

int kv_counting_bloom_may_contain(const kv_counting_bloom *f, const void *key, size_t len)
{
    if (__builtin_expect(!f || (!key && len), 0))
        return 0;
    uint64_t want[WORDS];
    _Atomic uint64_t *b = locate(f, key, len, want);
    uint64_t missing = 0;
    for (unsigned w = 0; w < WORDS; w++)
        missing |= want[w] & ~nonzero(atomic_load_explicit(&b[w], memory_order_relaxed));
    return missing == 0;
}

uint64_t kv_counting_bloom_count(const kv_counting_bloom *f)
{
    if (!f)
        return 0;
    /* Below 0 only when keys that were never added were removed. */
    uint64_t n = f->base_keys + kv_tally_sum(&f->stripes[0].keys, sizeof *f->stripes);
    return n > (uint64_t)INT64_MAX ? 0 : n;
}

size_t kv_counting_bloom_bytes(const kv_counting_bloom *f)
{
    return f ? (size_t)f->blocks * CACHE_LINE : 0;
}

double kv_counting_bloom_expected_fpr(const kv_counting_bloom *f)
{
    return f ? expected_fpr(f->blocks, kv_counting_bloom_count(f), f->k) : 1.0;
}

/* ---- codec ------------------------------------------------------------------ */

int kv_counting_bloom_encode(const kv_counting_bloom *f, void **buf, size_t *len)
{
    if (!f || !buf || !len)
        return kv_error_set(KV_EINVAL, "kv_counting_bloom_encode: NULL argument");
    *buf = NULL;
    *len = 0;
    size_t payload = (size_t)f->blocks * CACHE_LINE;
    size_t total = KV_CBF_FMT_HEADER + payload + 8;
    uint8_t *p = malloc(total);
    if (!p)
        return kv_error_set(KV_ENOMEM, "kv_counting_bloom_encode: out of memory for %zu bytes",
                            total);
    memcpy(p + KV_CBF_FMT_OFF_MAGIC, KV_CBF_FMT_MAGIC, 4);
    p[KV_CBF_FMT_OFF_VERSION] = KV_CBF_FMT_VERSION;
    p[KV_CBF_FMT_OFF_HASH] = KV_BLOOM_FMT_HASH_XXH3_64;
    p[KV_CBF_FMT_OFF_K] = (uint8_t)f->k;
    p[KV_CBF_FMT_OFF_RESERVED] = 0;
    kv_put64(p + KV_CBF_FMT_OFF_SEED, f->seed);
    kv_put64(p + KV_CBF_FMT_OFF_EXPECTED, f->expected_keys);
    kv_put64(p + KV_CBF_FMT_OFF_FPR, kv_f64_bits(f->fpr));
    kv_put64(p + KV_CBF_FMT_OFF_BLOCKS, f->blocks);
    kv_put64(p + KV_CBF_FMT_OFF_KEYS, kv_counting_bloom_count(f));
    uint8_t *q = p + KV_CBF_FMT_HEADER;
    for (uint64_t i = 0; i < f->blocks * WORDS; i++, q += 8)
        kv_put64(q, atomic_load_explicit(&f->words[i], memory_order_relaxed));
    kv_put64(q, XXH3_64bits(p, KV_CBF_FMT_HEADER + payload));
    *buf = p;
    *len = total;
    return KV_OK;
}

static int corrupt(const char *why)
{
    return kv_error_set(KV_ECORRUPT, "kv_counting_bloom_decode: %s", why);
}

int kv_counting_bloom_decode(const void *buf, size_t len, kv_counting_bloom **out)
{
    if (!out)
        return kv_error_set(KV_EINVAL, "kv_counting_bloom_decode: out is NULL");
    *out = NULL;
    if (!buf)
        return kv_error_set(KV_EINVAL, "kv_counting_bloom_decode: buf is NULL");
    const uint8_t *p = buf;
    if (len < KV_CBF_FMT_HEADER + 8)
        return corrupt("shorter than a header and checksum");
    if (memcmp(p + KV_CBF_FMT_OFF_MAGIC, KV_CBF_FMT_MAGIC, 4) != 0)
        return corrupt("bad magic");
    if (p[KV_CBF_FMT_OFF_VERSION] != KV_CBF_FMT_VERSION)
        return corrupt("unknown version");
    if (p[KV_CBF_FMT_OFF_HASH] != KV_BLOOM_FMT_HASH_XXH3_64 || p[KV_CBF_FMT_OFF_RESERVED] != 0)
        return corrupt("unknown hash kind or nonzero reserved byte");
    unsigned k = p[KV_CBF_FMT_OFF_K];
    if (k < 1 || k > KV_COUNTING_BLOOM_MAX_K)
        return corrupt("k out of range");
    double fpr = kv_bits_f64(kv_get64(p + KV_CBF_FMT_OFF_FPR));
    if (!(fpr > 0 && fpr < 1))
        return corrupt("fpr not in (0, 1)");
    uint64_t blocks = kv_get64(p + KV_CBF_FMT_OFF_BLOCKS);
    if (blocks < 1 || blocks > KV_COUNTING_BLOOM_MAX_BLOCKS)
        return corrupt("block count out of range");
    if ((uint64_t)len - KV_CBF_FMT_HEADER - 8 != blocks * CACHE_LINE)
        return corrupt("length does not match the block count");
    uint64_t keys = kv_get64(p + KV_CBF_FMT_OFF_KEYS);
    if (keys > (uint64_t)INT64_MAX)
        return corrupt("key count out of range");
    size_t covered = len - 8;
    if (XXH3_64bits(p, covered) != kv_get64(p + covered))
        return corrupt("checksum mismatch");

    kv_counting_bloom *f;
    if (alloc_filter(blocks, k, kv_get64(p + KV_CBF_FMT_OFF_SEED), &f) != KV_OK)
        return kv_error_set(KV_ENOMEM, "kv_counting_bloom_decode: out of memory");
    const uint8_t *q = p + KV_CBF_FMT_HEADER;
    for (uint64_t i = 0; i < blocks * WORDS; i++, q += 8)
        atomic_init(&f->words[i], kv_get64(q));
    f->expected_keys = kv_get64(p + KV_CBF_FMT_OFF_EXPECTED);
    f->fpr = fpr;
    f->base_keys = keys;
    *out = f;
    return KV_OK;
}
