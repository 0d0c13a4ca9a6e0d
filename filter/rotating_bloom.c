/* rotating_bloom.c - the rotating (sliding-window) Bloom filter of
 * rotating_bloom.h, and its codec (doc/filter_format.md, "Rotating filter").
 *
 * The generations' bit arrays lie one after another in one 64-byte aligned
 * allocation, each `nblocks` blocks of 512 bits with the probe placement of
 * the blocked Bloom filter (bloom_block.h): a key's block is fastrange(h,
 * nblocks) in every generation, and its bits there are kv_bloom_probe_bit.
 *
 * Invariants: the current generation is rotations % generations; a
 * rotation (under `rotate`) clears generation (rotations + 1) % G, zeroes
 * its count, and only then stores rotations + 1 (release). An add reads
 * rotations (acquire), claims a place in that generation's count with one
 * atomic increment, and sets its bits; a claim at or beyond
 * keys_per_generation rotates instead (unless another thread already has)
 * and tries again. A generation holds min(count, keys_per_generation) keys. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <kv/rotating_bloom.h>

#include "bloom_impl.h"
#include "filter_format.h"
#include "util/coding.h"
#include "util/error.h"
#include "util/hash.h"

struct generation {
    _Alignas(CACHE_LINE) _Atomic uint64_t count; /* adds that claimed a place */
};

struct kv_rotating_bloom {
    _Atomic uint64_t rotations;
    _Atomic uint64_t *words; /* G * nblocks * 8 words */
    struct generation *gens; /* G */
    unsigned ngens;
    unsigned k;
    uint64_t nblocks;
    uint64_t per_gen;
    uint64_t seed;
    double fpr;
    pthread_mutex_t rotate; /* held while a rotation runs */
};

/* A key's block index and its 8-word bit mask inside the block. */
static inline uint64_t locate(const kv_rotating_bloom *f, const void *key, size_t len,
                              uint64_t mask[BLOCK_WORDS])
{
    uint64_t h = kv_hash_key(key, len, f->seed);
    uint32_t x = (uint32_t)h;
    memset(mask, 0, BLOCK_WORDS * sizeof *mask);
    for (unsigned i = 0; i < f->k; i++) {
        unsigned b = kv_bloom_probe_bit(x, i);
        mask[b >> 6] |= (uint64_t)1 << (b & 63);
    }
    return kv_fastrange64(h, f->nblocks);
}

/* The first word of block `block` of generation g. */
static inline _Atomic uint64_t *block_of(const kv_rotating_bloom *f, unsigned g, uint64_t block)
{
    return f->words + ((uint64_t)g * f->nblocks + block) * BLOCK_WORDS;
}

/* Generation size for n keys per generation at window FPR p over G of
 * them: p_g = 1 - (1 - p)^(1/G). */
static int size_for(uint64_t n, unsigned G, double p, uint64_t *bits, unsigned *k)
{
    double pg = -expm1(log1p(-p) / (double)G);
    if (kv_bloom_blocked_size_exact(n, pg, bits, k) != KV_OK ||
        *bits > KV_BLOOM_MAX_BITS / G)
        return KV_EINVAL;
    return KV_OK;
}

static int alloc_filter(uint64_t per_gen, unsigned G, double fpr, uint64_t seed, uint64_t bits,
                        unsigned k, kv_rotating_bloom **out)
{
    kv_rotating_bloom *f = calloc(1, sizeof *f);
    if (!f)
        return KV_ENOMEM;
    size_t bytes = (size_t)(bits / 8) * G;
    f->words = aligned_alloc(CACHE_LINE, bytes);
    f->gens = aligned_alloc(CACHE_LINE, G * sizeof *f->gens);
    if (!f->words || !f->gens || pthread_mutex_init(&f->rotate, NULL) != 0) {
        free((void *)f->words);
        free(f->gens);
        free(f);
        return KV_ENOMEM;
    }
    memset((void *)f->words, 0, bytes);
    for (unsigned g = 0; g < G; g++)
        atomic_init(&f->gens[g].count, 0);
    atomic_init(&f->rotations, 0);
    f->ngens = G;
    f->k = k;
    f->nblocks = bits / BLOCK_BITS;
    f->per_gen = per_gen;
    f->seed = seed;
    f->fpr = fpr;
    *out = f;
    return KV_OK;
}

int kv_rotating_bloom_new(uint64_t keys_per_generation, unsigned generations, double fpr,
                          uint64_t seed, kv_rotating_bloom **out)
{
    if (!out)
        return kv_error_set(KV_EINVAL, "kv_rotating_bloom_new: out is NULL");
    *out = NULL;
    if (keys_per_generation == 0)
        return kv_error_set(KV_EINVAL, "kv_rotating_bloom_new: keys_per_generation is 0");
    if (generations < 1 || generations > KV_ROTATING_BLOOM_MAX_GENERATIONS)
        return kv_error_set(KV_EINVAL, "kv_rotating_bloom_new: %u generations, not 1..%u",
                            generations, KV_ROTATING_BLOOM_MAX_GENERATIONS);
    if (!(fpr > 0 && fpr < 1))
        return kv_error_set(KV_EINVAL, "kv_rotating_bloom_new: fpr %g is not in (0, 1)", fpr);
    uint64_t bits;
    unsigned k;
    if (size_for(keys_per_generation, generations, fpr, &bits, &k) != KV_OK)
        return kv_error_set(KV_EINVAL, "kv_rotating_bloom_new: %u generations of %llu keys at "
                                       "fpr %g need more than KV_BLOOM_MAX_BITS bits",
                            generations, (unsigned long long)keys_per_generation, fpr);
    if (alloc_filter(keys_per_generation, generations, fpr, seed, bits, k, out) != KV_OK)
        return kv_error_set(KV_ENOMEM, "kv_rotating_bloom_new: out of memory for %llu bytes",
                            (unsigned long long)(bits / 8 * generations));
    return KV_OK;
}

void kv_rotating_bloom_free(kv_rotating_bloom *f)
{
    if (!f)
        return;
    pthread_mutex_destroy(&f->rotate);
    free((void *)f->words);
    free(f->gens);
    free(f);
}

/* The rotation count after r. The current generation is the count mod G,
 * so the next one must be (r mod G + 1) mod G; r + 1 is that except when
 * it wraps past 2^64 - 1 (no filter rotates that often, but a decoded one
 * may claim any count): 2^64 mod G is 1 only for G = 1, so the wrapped 0
 * would name a generation other than the next, and the rotation would
 * clear the current one, keys just added with it (a false negative from a
 * crafted file). There the count restarts at r mod G + 1, which names the
 * same next generation. */
static uint64_t next_rotation(uint64_t r, unsigned ngens)
{
    return r == UINT64_MAX ? r % ngens + 1 : r + 1;
}

/* One rotation; the caller holds f->rotate. */
static void rotate_locked(kv_rotating_bloom *f)
{
    uint64_t next = next_rotation(atomic_load_explicit(&f->rotations, memory_order_relaxed),
                                  f->ngens);
    unsigned g = (unsigned)(next % f->ngens);
    _Atomic uint64_t *w = block_of(f, g, 0);
    for (uint64_t i = 0; i < f->nblocks * BLOCK_WORDS; i++)
        atomic_store_explicit(&w[i], 0, memory_order_relaxed);
    atomic_store_explicit(&f->gens[g].count, 0, memory_order_relaxed);
    atomic_store_explicit(&f->rotations, next, memory_order_release);
}

int kv_rotating_bloom_rotate(kv_rotating_bloom *f)
{
    if (!f)
        return kv_error_set(KV_EINVAL, "kv_rotating_bloom_rotate: filter is NULL");
    pthread_mutex_lock(&f->rotate);
    rotate_locked(f);
    pthread_mutex_unlock(&f->rotate);
    return KV_OK;
}

int kv_rotating_bloom_add(kv_rotating_bloom *f, const void *key, size_t len)
{
    if (!f)
        return kv_error_set(KV_EINVAL, "kv_rotating_bloom_add: filter is NULL");
    if (!key && len)
        return kv_error_set(KV_EINVAL, "kv_rotating_bloom_add: key is NULL with length %zu", len);
    uint64_t mask[BLOCK_WORDS];
    uint64_t block = locate(f, key, len, mask);
    for (;;) {
        uint64_t r = atomic_load_explicit(&f->rotations, memory_order_acquire);
        unsigned g = (unsigned)(r % f->ngens);
        _Atomic uint64_t *c = &f->gens[g].count;
        if (atomic_load_explicit(c, memory_order_relaxed) < f->per_gen &&
            atomic_fetch_add_explicit(c, 1, memory_order_relaxed) < f->per_gen) {
            _Atomic uint64_t *b = block_of(f, g, block);
            /* A locked OR only for words that miss some of the key's bits:
             * bits are only ever cleared with their whole generation. */
            for (unsigned w = 0; w < BLOCK_WORDS; w++)
                if (mask[w] & ~atomic_load_explicit(&b[w], memory_order_relaxed))
                    atomic_fetch_or_explicit(&b[w], mask[w], memory_order_relaxed);
            return KV_OK;
        }
        /* Full: rotate, unless another thread has since r. */
        pthread_mutex_lock(&f->rotate);
        if (atomic_load_explicit(&f->rotations, memory_order_relaxed) == r)
            rotate_locked(f);
        pthread_mutex_unlock(&f->rotate);
    }
}

int kv_rotating_bloom_may_contain(const kv_rotating_bloom *f, const void *key, size_t len)
{
    if (!f || (!key && len))
        return 0;
    uint64_t mask[BLOCK_WORDS];
    uint64_t block = locate(f, key, len, mask);
    /* Ask for the key's line in every generation first: the misses overlap. */
    for (unsigned g = 0; g < f->ngens; g++)
        KV_PREFETCH((const void *)block_of(f, g, block), 0, 3);
    for (unsigned g = 0; g < f->ngens; g++) {
        _Atomic uint64_t *b = block_of(f, g, block);
        uint64_t missing = 0;
        for (unsigned w = 0; w < BLOCK_WORDS; w++)
            missing |= mask[w] & ~atomic_load_explicit(&b[w], memory_order_relaxed);
        if (!missing)
            return 1;
    }
    return 0;
}

/* Keys generation g holds. */
static uint64_t gen_keys(const kv_rotating_bloom *f, unsigned g)
{
    uint64_t c = atomic_load_explicit(&f->gens[g].count, memory_order_relaxed);
    return c < f->per_gen ? c : f->per_gen;
}

uint64_t kv_rotating_bloom_count(const kv_rotating_bloom *f)
{
    uint64_t sum = 0;
    for (unsigned g = 0; f && g < f->ngens; g++)
        sum += gen_keys(f, g);
    return sum;
}

uint64_t kv_rotating_bloom_rotations(const kv_rotating_bloom *f)
{
    return f ? atomic_load_explicit(&f->rotations, memory_order_acquire) : 0;
}

size_t kv_rotating_bloom_bytes(const kv_rotating_bloom *f)
{
    return f ? (size_t)f->nblocks * CACHE_LINE * f->ngens : 0;
}

double kv_rotating_bloom_expected_fpr(const kv_rotating_bloom *f)
{
    if (!f)
        return 1.0;
    double none = 1.0;
    for (unsigned g = 0; g < f->ngens; g++)
        none *= 1.0 - kv_bloom_blocked_exact_fpr(f->nblocks * BLOCK_BITS, gen_keys(f, g), f->k);
    return 1.0 - none;
}

/* ---- codec ------------------------------------------------------------------ */

int kv_rotating_bloom_encode(const kv_rotating_bloom *f, void **buf, size_t *len)
{
    if (!f || !buf || !len)
        return kv_error_set(KV_EINVAL, "kv_rotating_bloom_encode: NULL argument");
    *buf = NULL;
    *len = 0;
    size_t nwords = (size_t)f->nblocks * BLOCK_WORDS * f->ngens;
    size_t counts = (size_t)8 * f->ngens;
    size_t total = KV_RBF_FMT_HEADER + counts + nwords * 8 + 8;
    uint8_t *p = malloc(total);
    if (!p)
        return kv_error_set(KV_ENOMEM, "kv_rotating_bloom_encode: out of memory for %zu bytes",
                            total);
    memcpy(p + KV_RBF_FMT_OFF_MAGIC, KV_RBF_FMT_MAGIC, 4);
    p[KV_RBF_FMT_OFF_VERSION] = KV_RBF_FMT_VERSION;
    p[KV_RBF_FMT_OFF_HASH] = KV_BLOOM_FMT_HASH_XXH3_64;
    p[KV_RBF_FMT_OFF_K] = (uint8_t)f->k;
    p[KV_RBF_FMT_OFF_GENS] = (uint8_t)f->ngens;
    kv_put64(p + KV_RBF_FMT_OFF_SEED, f->seed);
    kv_put64(p + KV_RBF_FMT_OFF_PER_GEN, f->per_gen);
    kv_put64(p + KV_RBF_FMT_OFF_FPR, kv_f64_bits(f->fpr));
    kv_put64(p + KV_RBF_FMT_OFF_BITS, f->nblocks * BLOCK_BITS);
    kv_put64(p + KV_RBF_FMT_OFF_ROTATIONS, kv_rotating_bloom_rotations(f));
    uint8_t *q = p + KV_RBF_FMT_HEADER;
    for (unsigned g = 0; g < f->ngens; g++, q += 8)
        kv_put64(q, gen_keys(f, g));
    for (size_t i = 0; i < nwords; i++, q += 8)
        kv_put64(q, atomic_load_explicit(&f->words[i], memory_order_relaxed));
    kv_put64(q, XXH3_64bits(p, total - 8));
    *buf = p;
    *len = total;
    return KV_OK;
}

static int corrupt(const char *why)
{
    return kv_error_set(KV_ECORRUPT, "kv_rotating_bloom_decode: %s", why);
}

int kv_rotating_bloom_decode(const void *buf, size_t len, kv_rotating_bloom **out)
{
    if (!out)
        return kv_error_set(KV_EINVAL, "kv_rotating_bloom_decode: out is NULL");
    *out = NULL;
    if (!buf)
        return kv_error_set(KV_EINVAL, "kv_rotating_bloom_decode: buf is NULL");
    const uint8_t *p = buf;
    if (len < KV_RBF_FMT_HEADER + 8)
        return corrupt("shorter than a header and checksum");
    if (memcmp(p + KV_RBF_FMT_OFF_MAGIC, KV_RBF_FMT_MAGIC, 4) != 0)
        return corrupt("bad magic");
    if (p[KV_RBF_FMT_OFF_VERSION] != KV_RBF_FMT_VERSION)
        return corrupt("unknown version");
    if (p[KV_RBF_FMT_OFF_HASH] != KV_BLOOM_FMT_HASH_XXH3_64)
        return corrupt("unknown hash kind");
    unsigned k = p[KV_RBF_FMT_OFF_K], G = p[KV_RBF_FMT_OFF_GENS];
    if (k < KV_BLOOM_MIN_K || k > KV_BLOOM_MAX_K)
        return corrupt("k out of range");
    if (G < 1 || G > KV_ROTATING_BLOOM_MAX_GENERATIONS)
        return corrupt("generations out of range");
    uint64_t per_gen = kv_get64(p + KV_RBF_FMT_OFF_PER_GEN);
    double fpr = kv_bits_f64(kv_get64(p + KV_RBF_FMT_OFF_FPR));
    uint64_t bits = kv_get64(p + KV_RBF_FMT_OFF_BITS);
    if (per_gen == 0 || !(fpr > 0 && fpr < 1))
        return corrupt("keys_per_generation or fpr out of range");
    if (bits == 0 || bits % BLOCK_BITS || bits > KV_BLOOM_MAX_BITS / G)
        return corrupt("bits out of range");
    uint64_t want = KV_RBF_FMT_HEADER + 8 * (uint64_t)G + bits / 8 * G + 8;
    if ((uint64_t)len != want)
        return corrupt("length does not match the header");
    const uint8_t *q = p + KV_RBF_FMT_HEADER;
    for (unsigned g = 0; g < G; g++)
        if (kv_get64(q + 8 * g) > per_gen)
            return corrupt("a generation holds more than keys_per_generation keys");
    if (XXH3_64bits(p, len - 8) != kv_get64(p + len - 8))
        return corrupt("checksum mismatch");

    kv_rotating_bloom *f;
    if (alloc_filter(per_gen, G, fpr, kv_get64(p + KV_RBF_FMT_OFF_SEED), bits, k, &f) != KV_OK)
        return kv_error_set(KV_ENOMEM, "kv_rotating_bloom_decode: out of memory");
    atomic_init(&f->rotations, kv_get64(p + KV_RBF_FMT_OFF_ROTATIONS));
    for (unsigned g = 0; g < G; g++, q += 8)
        atomic_init(&f->gens[g].count, kv_get64(q));
    size_t nwords = (size_t)f->nblocks * BLOCK_WORDS * G;
    for (size_t i = 0; i < nwords; i++, q += 8)
        atomic_init(&f->words[i], kv_get64(q));
    *out = f;
    return KV_OK;
}
