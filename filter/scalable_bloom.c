/* scalable_bloom.c - the scalable Bloom filter of scalable_bloom.h: a
 * series of blocked Bloom filters, and its codec (doc/filter_format.md,
 * "Scalable filter").
 *
 * Invariants: stages[0 .. nstages) are set, each before nstages counts it
 * (release store; readers load nstages with acquire), and are never changed
 * or freed before the filter is; stage i has capacity initial << i and
 * target fpr (1 - r) r^i. An add claims place `claimed` of the newest stage
 * with one atomic increment; a claim at or beyond the capacity goes to the
 * next stage instead (which the claimer starts, under `grow`, if nobody has
 * yet), so a stage holds min(claimed, capacity) keys, and every stage but
 * the newest is full. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <kv/scalable_bloom.h>

#include "bloom_impl.h"
#include "filter_format.h"
#include "util/coding.h"
#include "util/error.h"
#include "util/hash.h"

struct stage {
    _Alignas(CACHE_LINE) _Atomic uint64_t claimed; /* adds that claimed a place */
    kv_bloom *bloom;
    uint64_t capacity;
    double fpr;
};

struct kv_scalable_bloom {
    _Atomic unsigned nstages;
    struct stage *stages[KV_SCALABLE_BLOOM_MAX_STAGES];
    uint64_t seed;
    uint64_t initial;
    double fpr;
    pthread_mutex_t grow; /* held while a stage is started */
};

/* Stage i's hash of a key with hash h: a splitmix64 remix, so that the
 * stages' probe positions are independent of each other. */
static inline uint64_t stage_hash(uint64_t h, unsigned i)
{
    uint64_t z = h + (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Capacity and target FPR of stage i; 0 capacity when it would overflow. */
static uint64_t stage_capacity(uint64_t initial, unsigned i)
{
    return initial <= (UINT64_MAX >> 2) >> i ? initial << i : 0;
}

static double stage_fpr(double fpr, unsigned i)
{
    double p = fpr * (1 - KV_SCALABLE_BLOOM_RATIO);
    for (unsigned j = 0; j < i; j++)
        p *= KV_SCALABLE_BLOOM_RATIO;
    return p;
}

/* Allocates stage i of f (not yet published). KV_ENOMEM also when the
 * stage would be too large: the filter cannot grow. */
static int new_stage(const kv_scalable_bloom *f, unsigned i, struct stage **out)
{
    uint64_t cap = stage_capacity(f->initial, i);
    if (i >= KV_SCALABLE_BLOOM_MAX_STAGES || cap == 0)
        return kv_error_set(KV_ENOMEM, "kv_scalable_bloom: cannot grow past %u stages", i);
    struct stage *s = aligned_alloc(CACHE_LINE, sizeof *s);
    if (!s)
        return kv_error_set(KV_ENOMEM, "kv_scalable_bloom: out of memory for stage %u", i);
    s->capacity = cap;
    s->fpr = stage_fpr(f->fpr, i);
    atomic_init(&s->claimed, 0);
    /* Sized by the exact expected FPR (bloom_impl.h), not kv_bloom_new_fpr's
     * closed form, which is a few percent optimistic: the stages' sum must
     * stay below fpr. */
    uint64_t m;
    unsigned k;
    int rc = kv_bloom_blocked_size_exact(cap, s->fpr, &m, &k);
    if (rc == KV_OK)
        rc = kv_bloom_alloc(KV_BLOOM_BLOCKED, m, k, f->seed, &s->bloom);
    if (rc != KV_OK) {
        double fpr = s->fpr;
        free(s);
        return kv_error_set(KV_ENOMEM,
                            "kv_scalable_bloom: stage %u (%llu keys at fpr %g): %s", i,
                            (unsigned long long)cap, fpr,
                            rc == KV_EINVAL ? "above KV_BLOOM_MAX_BITS" : "out of memory");
    }
    *out = s;
    return KV_OK;
}

static void free_stage(struct stage *s)
{
    if (s) {
        kv_bloom_free(s->bloom);
        free(s);
    }
}

/* An empty filter with no stage. */
static int alloc_filter(uint64_t initial, double fpr, uint64_t seed, kv_scalable_bloom **out)
{
    kv_scalable_bloom *f = calloc(1, sizeof *f);
    if (!f)
        return KV_ENOMEM;
    if (pthread_mutex_init(&f->grow, NULL) != 0) {
        free(f);
        return KV_ENOMEM;
    }
    atomic_init(&f->nstages, 0);
    f->initial = initial;
    f->fpr = fpr;
    f->seed = seed;
    *out = f;
    return KV_OK;
}

void kv_scalable_bloom_free(kv_scalable_bloom *f)
{
    if (!f)
        return;
    unsigned n = atomic_load_explicit(&f->nstages, memory_order_acquire);
    for (unsigned i = 0; i < n; i++)
        free_stage(f->stages[i]);
    pthread_mutex_destroy(&f->grow);
    free(f);
}

int kv_scalable_bloom_new(uint64_t initial_keys, double fpr, uint64_t seed,
                          kv_scalable_bloom **out)
{
    if (!out)
        return kv_error_set(KV_EINVAL, "kv_scalable_bloom_new: out is NULL");
    *out = NULL;
    if (initial_keys == 0)
        return kv_error_set(KV_EINVAL, "kv_scalable_bloom_new: initial_keys is 0");
    if (!(fpr > 0 && fpr < 1))
        return kv_error_set(KV_EINVAL, "kv_scalable_bloom_new: fpr %g is not in (0, 1)", fpr);
    uint64_t m;
    unsigned k;
    if (kv_bloom_blocked_size_exact(initial_keys, stage_fpr(fpr, 0), &m, &k) != KV_OK)
        return kv_error_set(KV_EINVAL, "kv_scalable_bloom_new: %llu keys at fpr %g: first stage "
                                       "above KV_BLOOM_MAX_BITS",
                            (unsigned long long)initial_keys, fpr);
    kv_scalable_bloom *f;
    if (alloc_filter(initial_keys, fpr, seed, &f) != KV_OK)
        return kv_error_set(KV_ENOMEM, "kv_scalable_bloom_new: out of memory");
    int rc = new_stage(f, 0, &f->stages[0]);
    if (rc != KV_OK) {
        kv_scalable_bloom_free(f);
        return rc;
    }
    atomic_store_explicit(&f->nstages, 1, memory_order_release);
    *out = f;
    return KV_OK;
}

/* Starts stage n unless another thread already has: called by an add that
 * found stage n - 1, the newest, full. */
static int grow(kv_scalable_bloom *f, unsigned n)
{
    int rc = KV_OK;
    pthread_mutex_lock(&f->grow);
    if (atomic_load_explicit(&f->nstages, memory_order_relaxed) == n) {
        struct stage *s;
        rc = new_stage(f, n, &s);
        if (rc == KV_OK) {
            f->stages[n] = s;
            atomic_store_explicit(&f->nstages, n + 1, memory_order_release);
        }
    }
    pthread_mutex_unlock(&f->grow);
    return rc;
}

int kv_scalable_bloom_add(kv_scalable_bloom *f, const void *key, size_t len)
{
    if (!f)
        return kv_error_set(KV_EINVAL, "kv_scalable_bloom_add: filter is NULL");
    if (!key && len)
        return kv_error_set(KV_EINVAL, "kv_scalable_bloom_add: key is NULL with length %zu", len);
    uint64_t h = kv_hash_key(key, len, f->seed);
    for (;;) {
        unsigned n = atomic_load_explicit(&f->nstages, memory_order_acquire);
        struct stage *s = f->stages[n - 1];
        if (atomic_load_explicit(&s->claimed, memory_order_relaxed) < s->capacity &&
            atomic_fetch_add_explicit(&s->claimed, 1, memory_order_relaxed) < s->capacity) {
            kv_bloom_add_hash(s->bloom, stage_hash(h, n - 1));
            return KV_OK;
        }
        int rc = grow(f, n);
        if (rc != KV_OK)
            return rc;
    }
}

int kv_scalable_bloom_may_contain(const kv_scalable_bloom *f, const void *key, size_t len)
{
    if (!f || (!key && len))
        return 0;
    uint64_t h = kv_hash_key(key, len, f->seed);
    unsigned n = atomic_load_explicit(&f->nstages, memory_order_acquire);
    uint64_t hs[KV_SCALABLE_BLOOM_MAX_STAGES];
    /* Ask for every stage's line first, so that their misses overlap. */
    for (unsigned i = 0; i < n; i++) {
        hs[i] = stage_hash(h, i);
        kv_bloom_prefetch_hash(f->stages[i]->bloom, hs[i]);
    }
    for (unsigned i = n; i-- > 0;) /* newest first: it holds the most keys */
        if (kv_bloom_may_contain_hash(f->stages[i]->bloom, hs[i]))
            return 1;
    return 0;
}

/* Keys stage s holds. */
static uint64_t stage_keys(const struct stage *s)
{
    uint64_t c = atomic_load_explicit(&s->claimed, memory_order_relaxed);
    return c < s->capacity ? c : s->capacity;
}

uint64_t kv_scalable_bloom_count(const kv_scalable_bloom *f)
{
    if (!f)
        return 0;
    uint64_t sum = 0;
    unsigned n = atomic_load_explicit(&f->nstages, memory_order_acquire);
    for (unsigned i = 0; i < n; i++)
        sum += stage_keys(f->stages[i]);
    return sum;
}

unsigned kv_scalable_bloom_stages(const kv_scalable_bloom *f)
{
    return f ? atomic_load_explicit(&f->nstages, memory_order_acquire) : 0;
}

size_t kv_scalable_bloom_bytes(const kv_scalable_bloom *f)
{
    if (!f)
        return 0;
    size_t sum = 0;
    unsigned n = atomic_load_explicit(&f->nstages, memory_order_acquire);
    for (unsigned i = 0; i < n; i++)
        sum += kv_bloom_bytes(f->stages[i]->bloom);
    return sum;
}

/* Stage s's expected FPR with n keys. */
static double stage_expected(const struct stage *s, uint64_t n)
{
    return kv_bloom_blocked_exact_fpr(s->bloom->bits, n, s->bloom->k);
}

double kv_scalable_bloom_expected_fpr(const kv_scalable_bloom *f)
{
    if (!f)
        return 1.0;
    double none = 1.0;
    unsigned n = atomic_load_explicit(&f->nstages, memory_order_acquire);
    for (unsigned i = 0; i < n; i++)
        none *= 1.0 - stage_expected(f->stages[i], stage_keys(f->stages[i]));
    return 1.0 - none;
}

/* ---- codec ------------------------------------------------------------------ */

int kv_scalable_bloom_encode(const kv_scalable_bloom *f, void **buf, size_t *len)
{
    if (!f || !buf || !len)
        return kv_error_set(KV_EINVAL, "kv_scalable_bloom_encode: NULL argument");
    *buf = NULL;
    *len = 0;
    unsigned n = atomic_load_explicit(&f->nstages, memory_order_acquire);
    void *enc[KV_SCALABLE_BLOOM_MAX_STAGES];
    size_t enc_len[KV_SCALABLE_BLOOM_MAX_STAGES], total = KV_SBF_FMT_HEADER + 8;
    uint64_t keys[KV_SCALABLE_BLOOM_MAX_STAGES];
    unsigned done = 0;
    int rc = KV_OK;
    for (; done < n; done++) {
        /* The count before the bits: what the bits hold is at least that. */
        keys[done] = stage_keys(f->stages[done]);
        if ((rc = kv_bloom_encode(f->stages[done]->bloom, &enc[done], &enc_len[done])) != KV_OK)
            break;
        total += KV_SBF_FMT_STAGE_HEADER + enc_len[done];
    }
    uint8_t *p = rc == KV_OK ? malloc(total) : NULL;
    if (!p) {
        for (unsigned i = 0; i < done; i++)
            kv_free(enc[i]);
        return kv_error_set(KV_ENOMEM, "kv_scalable_bloom_encode: out of memory");
    }
    memcpy(p + KV_SBF_FMT_OFF_MAGIC, KV_SBF_FMT_MAGIC, 4);
    p[KV_SBF_FMT_OFF_VERSION] = KV_SBF_FMT_VERSION;
    p[KV_SBF_FMT_OFF_HASH] = KV_BLOOM_FMT_HASH_XXH3_64;
    p[KV_SBF_FMT_OFF_GROWTH] = KV_SCALABLE_BLOOM_GROWTH;
    p[KV_SBF_FMT_OFF_STAGES] = (uint8_t)n;
    kv_put64(p + KV_SBF_FMT_OFF_SEED, f->seed);
    kv_put64(p + KV_SBF_FMT_OFF_INITIAL, f->initial);
    kv_put64(p + KV_SBF_FMT_OFF_FPR, kv_f64_bits(f->fpr));
    kv_put64(p + KV_SBF_FMT_OFF_RATIO, kv_f64_bits(KV_SCALABLE_BLOOM_RATIO));
    uint8_t *q = p + KV_SBF_FMT_HEADER;
    for (unsigned i = 0; i < n; i++) {
        kv_put64(q, f->stages[i]->capacity);
        kv_put64(q + 8, keys[i]);
        kv_put64(q + 16, enc_len[i]);
        memcpy(q + KV_SBF_FMT_STAGE_HEADER, enc[i], enc_len[i]);
        q += KV_SBF_FMT_STAGE_HEADER + enc_len[i];
        kv_free(enc[i]);
    }
    kv_put64(q, XXH3_64bits(p, total - 8));
    *buf = p;
    *len = total;
    return KV_OK;
}

static int corrupt(unsigned stage, const char *why)
{
    if (stage == ~0u)
        return kv_error_set(KV_ECORRUPT, "kv_scalable_bloom_decode: %s", why);
    return kv_error_set(KV_ECORRUPT, "kv_scalable_bloom_decode: stage %u: %s", stage, why);
}

int kv_scalable_bloom_decode(const void *buf, size_t len, kv_scalable_bloom **out)
{
    if (!out)
        return kv_error_set(KV_EINVAL, "kv_scalable_bloom_decode: out is NULL");
    *out = NULL;
    if (!buf)
        return kv_error_set(KV_EINVAL, "kv_scalable_bloom_decode: buf is NULL");
    const uint8_t *p = buf;
    if (len < KV_SBF_FMT_HEADER + 8)
        return corrupt(~0u, "shorter than a header and checksum");
    if (memcmp(p + KV_SBF_FMT_OFF_MAGIC, KV_SBF_FMT_MAGIC, 4) != 0)
        return corrupt(~0u, "bad magic");
    if (p[KV_SBF_FMT_OFF_VERSION] != KV_SBF_FMT_VERSION)
        return corrupt(~0u, "unknown version");
    if (p[KV_SBF_FMT_OFF_HASH] != KV_BLOOM_FMT_HASH_XXH3_64 ||
        p[KV_SBF_FMT_OFF_GROWTH] != KV_SCALABLE_BLOOM_GROWTH ||
        kv_bits_f64(kv_get64(p + KV_SBF_FMT_OFF_RATIO)) != KV_SCALABLE_BLOOM_RATIO)
        return corrupt(~0u, "unknown hash kind, growth or ratio");
    unsigned n = p[KV_SBF_FMT_OFF_STAGES];
    uint64_t seed = kv_get64(p + KV_SBF_FMT_OFF_SEED);
    uint64_t initial = kv_get64(p + KV_SBF_FMT_OFF_INITIAL);
    double fpr = kv_bits_f64(kv_get64(p + KV_SBF_FMT_OFF_FPR));
    if (n < 1 || n > KV_SCALABLE_BLOOM_MAX_STAGES || initial < 1 || !(fpr > 0 && fpr < 1))
        return corrupt(~0u, "stage count, initial_keys or fpr out of range");
    /* The checksum before the stages: they are walked only if it is right. */
    if (XXH3_64bits(p, len - 8) != kv_get64(p + len - 8))
        return corrupt(~0u, "checksum mismatch");

    kv_scalable_bloom *f;
    if (alloc_filter(initial, fpr, seed, &f) != KV_OK)
        return kv_error_set(KV_ENOMEM, "kv_scalable_bloom_decode: out of memory");
    const uint8_t *q = p + KV_SBF_FMT_HEADER, *end = p + len - 8;
    int rc = KV_OK;
    unsigned i = 0;
    for (; i < n; i++) {
        if ((size_t)(end - q) < KV_SBF_FMT_STAGE_HEADER) {
            rc = corrupt(i, "truncated stage header");
            break;
        }
        uint64_t cap = kv_get64(q), keys = kv_get64(q + 8), elen = kv_get64(q + 16);
        q += KV_SBF_FMT_STAGE_HEADER;
        if (cap == 0 || cap != stage_capacity(initial, i) || keys > cap ||
            (i + 1 < n && keys != cap)) {
            rc = corrupt(i, "capacity or key count does not fit the series");
            break;
        }
        if (elen > (uint64_t)(end - q)) {
            rc = corrupt(i, "filter longer than the buffer");
            break;
        }
        struct stage *s = aligned_alloc(CACHE_LINE, sizeof *s);
        if (!s) {
            rc = kv_error_set(KV_ENOMEM, "kv_scalable_bloom_decode: out of memory");
            break;
        }
        s->capacity = cap;
        s->fpr = stage_fpr(fpr, i);
        atomic_init(&s->claimed, keys);
        rc = kv_bloom_decode(q, (size_t)elen, &s->bloom);
        if (rc != KV_OK) {
            free(s);
            rc = rc == KV_ENOMEM ? kv_error_set(KV_ENOMEM, "kv_scalable_bloom_decode: out of memory")
                                 : corrupt(i, "its Bloom filter does not decode");
            break;
        }
        f->stages[i] = s;
        atomic_store_explicit(&f->nstages, i + 1, memory_order_relaxed);
        /* The stage must be the one the series calls for: blocked, the
         * filter's seed, and meeting its share of the FPR when full. */
        if (s->bloom->layout != KV_BLOOM_BLOCKED || s->bloom->seed != seed ||
            !(stage_expected(s, cap) <= s->fpr * (1 + 1e-9))) {
            rc = corrupt(i, "its Bloom filter is not the stage's");
            break;
        }
        q += elen;
    }
    if (rc == KV_OK && q != end)
        rc = corrupt(~0u, "bytes after the last stage");
    if (rc != KV_OK) {
        kv_scalable_bloom_free(f);
        return rc;
    }
    atomic_store_explicit(&f->nstages, n, memory_order_release);
    *out = f;
    return KV_OK;
}
