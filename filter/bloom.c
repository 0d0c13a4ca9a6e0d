/* bloom.c - Bloom filters: sizing, the blocked and classic layouts,
 * concurrent adds, batch queries with prefetch, and the codec.
 * Encoding byte by byte: doc/filter_format.md. The blocked layout's probes
 * also run as AVX-512 code (bloom_avx512.h) where the CPU has it. */
#if defined(__linux__) && !defined(_DEFAULT_SOURCE)
#define _DEFAULT_SOURCE /* madvise, syscall */
#endif
#include <kv/bloom.h>

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <linux/membarrier.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "bloom_avx512.h"
#include "bloom_block.h"
#include "filter_format.h"
#include "util/coding.h"
#include "util/hash.h"
#include "util/tally.h"

#define BLOCK_BITS KV_BLOOM_BLOCK_BITS
#define BLOCK_WORDS KV_BLOOM_BLOCK_WORDS
#define CACHE_LINE 64u
#define MAX_LOCKS 1024u /* lock words of a filter at most (8 KiB): see block_lock */
#define MAX_REGIONS 64u /* regions of a filter at most (4 KiB): see "lone writers" */
#define LN2 0.69314718055994530942

/* Rare paths kept out of line, so that the hot ones around them make no
 * call (and save no registers for one). */
#if defined(__GNUC__)
#define KV_COLD __attribute__((cold, noinline))
#else
#define KV_COLD
#endif
/* Every call inside the function inlined (but noinline ones): for the few
 * hot paths where xxHash's every-length entry point must melt down to its
 * short-input code. GCC; clang inlines these on its own. */
#if defined(__GNUC__) && !defined(__clang__)
#define KV_FLATTEN __attribute__((flatten))
#else
#define KV_FLATTEN
#endif

/* The key count, striped per adding thread (tally.h) so that threads adding
 * at once do not bounce one cache line between cores. */
struct stripe {
    _Alignas(CACHE_LINE) _Atomic uint64_t adds;
};

/* Invariants: words holds nwords 64-bit words, 64-byte aligned; blocked:
 * bits == nblocks * 512 == nwords * 64; classic: nblocks == 0, bits <=
 * nwords * 64 and the bits past `bits` stay zero. keys = base_keys + the sum
 * of the stripes + the keys counted in the lock words + the regions' adds.
 * locks (blocked only): NULL until the first shared add, then lock_mask + 1
 * lock words ("shared blocked adds" below), block i locked by word i &
 * lock_mask, for good; or &no_locks if that table could not be allocated,
 * and then every shared add of this filter uses atomic ORs. regions: see
 * "lone writers" below; block i lies in region i >> region_shift, and a
 * classic filter is one region. */
typedef void kv_bloom_add_fn(kv_bloom *f, uint64_t h);        /* one add */
typedef int kv_bloom_query_fn(const kv_bloom *f, uint64_t h); /* 0: absent, 1: maybe */
typedef int kv_bloom_query_key_fn(const kv_bloom *f, const void *key, size_t len);
typedef void kv_bloom_batch_fn(const kv_bloom *f, const uint64_t *hashes, size_t n, uint8_t *out);

/* A region's writer ("lone writers" below), on a line of its own: its
 * owner writes busy and adds on every add. */
struct region {
    _Alignas(CACHE_LINE) _Atomic uintptr_t owner; /* its token, or OWNER_* */
    _Atomic unsigned busy;                        /* 1 while the owner adds */
    _Atomic uint64_t adds;                        /* keys the owner added */
};

struct kv_bloom {
    struct stripe adds[KV_TALLY_STRIPES + 1];
    /* What adds and queries read, together in one cache line. */
    kv_bloom_query_key_fn *query_key; /* hashing included (pick_paths) */
    kv_bloom_query_fn *query;         /* (pick_paths) */
    kv_bloom_add_fn *add;             /* a shared add, counted (pick_paths) */
    kv_bloom_add_fn *add_owned;       /* a plain add, not counted (pick_paths) */
    _Atomic uint64_t *words;
    uint64_t nblocks;
    struct region *regions;
    uint64_t seed;
    /* The rest: what the adds read next, then what they seldom read. */
    unsigned k;
    unsigned region_shift;
    _Atomic(_Atomic uint64_t *) locks;
    uint64_t lock_mask;
    unsigned nregions;
    kv_bloom_layout layout;
    kv_bloom_batch_fn *batch; /* (pick_paths) n > 0 */
    bool simd;                /* blocked probes by bloom_avx512.h */
    uint64_t bits;
    uint64_t nwords;
    uint64_t base_keys; /* keys counted before this process (from decode) */
};

/* Values of region.owner other than an owner's token ("lone writers"). */
#define OWNER_NONE ((uintptr_t)0)     /* no add yet */
#define OWNER_SHARED ((uintptr_t)1)   /* every add takes the shared path */
#define OWNER_REVOKING ((uintptr_t)2) /* a revoker waits for the owner's add */

/* Marks a filter whose lock table could not be allocated. */
static _Atomic uint64_t no_locks;

/* ---- small arithmetic helpers --------------------------------------------- */

/* floor(x * n / 2^64): maps a uniform 64-bit x onto [0, n) without '%'
 * (Lemire's multiply-shift "fastrange"). */
static inline uint64_t fastrange64(uint64_t x, uint64_t n)
{
#ifdef __SIZEOF_INT128__
    __extension__ typedef unsigned __int128 u128;
    return (uint64_t)(((u128)x * n) >> 64);
#else
    uint64_t xl = (uint32_t)x, xh = x >> 32, nl = (uint32_t)n, nh = n >> 32;
    uint64_t ll = xl * nl, lh = xl * nh, hl = xh * nl, hh = xh * nh;
    uint64_t mid = (ll >> 32) + (uint32_t)lh + (uint32_t)hl;
    return hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
#endif
}

static inline unsigned popcount64(uint64_t x)
{
#if defined(__GNUC__)
    return (unsigned)__builtin_popcountll(x);
#else
    unsigned c = 0;
    for (; x; x &= x - 1)
        c++;
    return c;
#endif
}

static inline unsigned ctz32(unsigned x) /* x != 0 */
{
#if defined(__GNUC__)
    return (unsigned)__builtin_ctz(x);
#else
    unsigned n = 0;
    for (; !(x & 1); x >>= 1)
        n++;
    return n;
#endif
}

/* Prefetches: the line at p comes into L1 (prefetch), into L2 only
 * (prefetch_l2), or into L1 for writing (prefetch_for_write, the line that
 * an add is about to rewrite). No-ops where the compiler has no builtin. */
#if defined(__GNUC__)
#define KV_PREFETCH(p, rw, locality) __builtin_prefetch((p), (rw), (locality))
#else
#define KV_PREFETCH(p, rw, locality) ((void)(p))
#endif

static inline void prefetch(const void *p)
{
    KV_PREFETCH(p, 0, 3);
}

static inline void prefetch_l2(const void *p)
{
    KV_PREFETCH(p, 0, 2);
}

static inline void prefetch_for_write(const void *p)
{
    KV_PREFETCH(p, 1, 3);
}

static unsigned clamp_k(double k)
{
    if (!(k >= KV_BLOOM_MIN_K))
        return KV_BLOOM_MIN_K;
    if (k > KV_BLOOM_MAX_K)
        return KV_BLOOM_MAX_K;
    return (unsigned)k;
}

/* ---- probe positions -------------------------------------------------------
 * Blocked: the block is fastrange(h, nblocks), which is decided by the high
 * bits of h; the k bit positions inside the block come from the low 32 bits,
 * re-mixed by a multiplication per probe, 9 bits each (512 = 2^9).
 * Classic: g_i = h1 + i*h2 (Kirsch-Mitzenmacher) over 64 bits, each mapped
 * onto [0, m) by fastrange. */

/* Probe i of a blocked key: kv_bloom_probe_bit (bloom_block.h), bits 23..31
 * of x * 0x9E3779B9^(i+1), x being the low 32 bits of the hash. */
static inline _Atomic uint64_t *block_of(const kv_bloom *f, uint64_t h)
{
    return f->words + fastrange64(h, f->nblocks) * BLOCK_WORDS;
}

static inline uint64_t classic_step(uint64_t h)
{
    /* Independent of h1 = h in the bits fastrange looks at; odd so that the
     * k positions of one key do not collapse onto each other. */
    return ((h >> 32) | (h << 32)) * 0x9E3779B97F4A7C15ull | 1;
}

static inline int classic_test(const kv_bloom *f, uint64_t h)
{
    uint64_t g = h, step = classic_step(h);
    for (unsigned i = 0; i < f->k; i++, g += step) {
        uint64_t pos = fastrange64(g, f->bits);
        uint64_t w = atomic_load_explicit(&f->words[pos >> 6], memory_order_relaxed);
        if (!(w & ((uint64_t)1 << (pos & 63))))
            return 0;
    }
    return 1;
}

/* A blocked query loads the word of each probe (all in one cache line) and
 * ANDs the bits together: no branch on the data, so absent and present keys
 * cost the same, and the k loads issue at once. The probes are unrolled by
 * a switch that falls through from case k down to case 1, so each probe's
 * multiplier is an immediate; k above 12 loops over the extra probes first. */
#define PROBE_OK(i)                                                              \
    do {                                                                         \
        unsigned bit_ = kv_bloom_probe_bit(x, i);                                \
        ok &= atomic_load_explicit(&b[bit_ >> 6], memory_order_relaxed) >> (bit_ & 63); \
    } while (0)

static inline int blocked_test(const kv_bloom *f, uint64_t h)
{
    const _Atomic uint64_t *b = block_of(f, h);
    uint32_t x = (uint32_t)h;
    uint64_t ok = 1;
    switch (f->k) {
    default:
        for (unsigned i = 12; i < f->k; i++)
            PROBE_OK(i);
        /* fall through */
    case 12: PROBE_OK(11); /* fall through */
    case 11: PROBE_OK(10); /* fall through */
    case 10: PROBE_OK(9);  /* fall through */
    case 9: PROBE_OK(8);   /* fall through */
    case 8: PROBE_OK(7);   /* fall through */
    case 7: PROBE_OK(6);   /* fall through */
    case 6: PROBE_OK(5);   /* fall through */
    case 5: PROBE_OK(4);   /* fall through */
    case 4: PROBE_OK(3);   /* fall through */
    case 3: PROBE_OK(2);   /* fall through */
    case 2: PROBE_OK(1);   /* fall through */
    case 1: PROBE_OK(0);
    }
    return (int)(ok & 1);
}

/* ---- expected FPR and sizing ---------------------------------------------- */

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

/* Filters larger than this get their bit array on huge pages where the
 * system offers them: a query on a filter that outgrows the caches then
 * costs one cache miss and no TLB miss (4 KiB pages would need a page walk
 * on nearly every query). */
#define HUGE_PAGE (2u << 20)

/* A zeroed, 64-byte aligned array of `bytes` bytes (a multiple of 8). */
static _Atomic uint64_t *alloc_words(size_t bytes)
{
    size_t align = bytes >= 2 * HUGE_PAGE ? HUGE_PAGE : CACHE_LINE;
    size_t alloc = (bytes + align - 1) / align * align;
    void *p = aligned_alloc(align, alloc);
    if (!p)
        return NULL;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (align == HUGE_PAGE)
        (void)madvise(p, alloc, MADV_HUGEPAGE); /* only a hint: may fail */
#endif
    memset(p, 0, alloc);
    return p;
}

/* Whether blocked filters made now use the AVX-512 code: when the CPU can
 * run it, unless the environment says KV_BLOOM_SIMD=0 (to compare the two,
 * or to rule the vector code out). */
static bool simd_wanted(void)
{
#if KV_BLOOM_AVX512
    static _Atomic int usable = -1; /* -1: not asked yet */
    int u = atomic_load_explicit(&usable, memory_order_relaxed);
    if (u < 0) {
        u = kv_bloom_avx512_usable();
        atomic_store_explicit(&usable, u, memory_order_relaxed);
    }
    const char *env = getenv("KV_BLOOM_SIMD");
    return u && !(env && strcmp(env, "0") == 0);
#else
    return false;
#endif
}

static void pick_paths(kv_bloom *f);

/* Allocates an empty filter of exactly `bits` bits (a multiple of 512 for
 * the blocked layout) and `k` probes. */
static int bloom_alloc(kv_bloom_layout layout, uint64_t bits, unsigned k, uint64_t seed,
                       kv_bloom **out)
{
    kv_bloom *f = aligned_alloc(CACHE_LINE, sizeof *f);
    if (!f)
        return KV_ENOMEM;
    memset(f, 0, sizeof *f);
    f->layout = layout;
    f->k = k;
    f->bits = bits;
    f->nwords = (bits + 63) / 64;
    f->nblocks = layout == KV_BLOOM_BLOCKED ? bits / BLOCK_BITS : 0;
    f->seed = seed;
    f->simd = layout == KV_BLOOM_BLOCKED && simd_wanted();
    pick_paths(f);
    uint64_t nlocks = 1;
    while (nlocks < f->nblocks && nlocks < MAX_LOCKS)
        nlocks *= 2;
    f->lock_mask = nlocks - 1;
    atomic_init(&f->locks, NULL);
    /* Regions of 2^region_shift whole blocks, as few as that makes at most
     * MAX_REGIONS of them: from 33 to 64 once there are 33 blocks. */
    while (f->nblocks && ((f->nblocks - 1) >> f->region_shift) + 1 > MAX_REGIONS)
        f->region_shift++;
    f->nregions = f->nblocks ? (unsigned)(((f->nblocks - 1) >> f->region_shift) + 1) : 1;
    f->regions = aligned_alloc(CACHE_LINE, f->nregions * sizeof *f->regions);
    if (!f->regions) {
        free(f);
        return KV_ENOMEM;
    }
    for (unsigned i = 0; i < f->nregions; i++) {
        atomic_init(&f->regions[i].owner, OWNER_NONE);
        atomic_init(&f->regions[i].busy, 0);
        atomic_init(&f->regions[i].adds, 0);
    }
    f->words = alloc_words((size_t)f->nwords * 8);
    if (!f->words) {
        free(f->regions);
        free(f);
        return KV_ENOMEM;
    }
    for (unsigned i = 0; i <= KV_TALLY_STRIPES; i++)
        atomic_init(&f->adds[i].adds, 0);
    *out = f;
    return KV_OK;
}

static bool layout_ok(kv_bloom_layout layout)
{
    return layout == KV_BLOOM_BLOCKED || layout == KV_BLOOM_CLASSIC;
}

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
    if (!layout_ok(layout) || !(bits_per_key > 0 && bits_per_key <= 1000))
        return KV_EINVAL;
    uint64_t m = round_bits(layout, (double)expected_keys * bits_per_key);
    if (!m)
        return KV_EINVAL;
    return bloom_alloc(layout, m, choose_k(layout, m, expected_keys, bits_per_key), seed, out);
}

int kv_bloom_new_fpr(kv_bloom_layout layout, uint64_t expected_keys, double target_fpr,
                     uint64_t seed, kv_bloom **out)
{
    if (!out)
        return KV_EINVAL;
    *out = NULL;
    if (!layout_ok(layout) || !(target_fpr > 0 && target_fpr < 1))
        return KV_EINVAL;
    double bpk = -log(target_fpr) / (LN2 * LN2);
    uint64_t m = round_bits(layout, (double)expected_keys * bpk);
    if (!m)
        return KV_EINVAL;
    if (layout == KV_BLOOM_CLASSIC)
        return bloom_alloc(layout, m, clamp_k(round(bpk * LN2)), seed, out);
    /* Blocks fill unevenly, so the blocked layout needs a little more room
     * for the same FPR: grow m by ~1.5% steps until it gets there. */
    unsigned k = choose_k(layout, m, expected_keys, bpk);
    while (expected_keys && kv_bloom_expected_fpr(layout, m, expected_keys, k) > target_fpr) {
        m = round_bits(layout, (double)m * 1.015);
        if (!m)
            return KV_EINVAL;
        k = choose_k(layout, m, expected_keys, bpk);
    }
    return bloom_alloc(layout, m, k, seed, out);
}

void kv_bloom_free(kv_bloom *f)
{
    if (!f)
        return;
    _Atomic uint64_t *locks = atomic_load_explicit(&f->locks, memory_order_relaxed);
    if (locks != &no_locks)
        free((void *)locks);
    free((void *)f->words);
    free(f->regions);
    free(f);
}

/* ---- adding and querying --------------------------------------------------- */

/* The exported functions are thin wrappers over these static ones, which
 * the compiler may inline into each other (an exported function in a shared
 * library may be interposed, so calls to it are not inlined). */
static inline uint64_t hash_key(const kv_bloom *f, const void *key, size_t len)
{
    return kv_hash_key(key, len, f ? f->seed : 0);
}

uint64_t kv_bloom_hash(const kv_bloom *f, const void *key, size_t len)
{
    return hash_key(f, key, len);
}

static inline void count_add(kv_bloom *f, uint64_t n)
{
    unsigned slot = kv_tally_slot();
    kv_tally_add(&f->adds[slot].adds, slot, n);
}

/* ---- classic adds ---------------------------------------------------------- */

/* Sets the k bits of a classic key: an atomic OR each when other threads
 * may add at the same time (shared), else a plain load and store. */
static void classic_add(kv_bloom *f, uint64_t h, bool shared)
{
    uint64_t g = h, step = classic_step(h);
    for (unsigned i = 0; i < f->k; i++, g += step) {
        uint64_t pos = fastrange64(g, f->bits);
        _Atomic uint64_t *w = &f->words[pos >> 6];
        uint64_t bit = (uint64_t)1 << (pos & 63);
        if (shared)
            atomic_fetch_or_explicit(w, bit, memory_order_relaxed);
        else
            atomic_store_explicit(w, atomic_load_explicit(w, memory_order_relaxed) | bit,
                                  memory_order_relaxed);
    }
}

/* ---- blocked adds ---------------------------------------------------------- */

/* The k bits of a blocked key as one mask per word of its block (unrolled
 * like blocked_test); returns the set of words with bits to set (bit w:
 * word w). */
#define PROBE_SET(i)                                                             \
    do {                                                                         \
        unsigned bit_ = kv_bloom_probe_bit(x, i);                                \
        mask[bit_ >> 6] |= (uint64_t)1 << (bit_ & 63);                           \
        used |= 1u << (bit_ >> 6);                                               \
    } while (0)

static inline unsigned blocked_mask(const kv_bloom *f, uint32_t x, uint64_t mask[BLOCK_WORDS])
{
    unsigned used = 0;
    memset(mask, 0, BLOCK_WORDS * sizeof mask[0]);
    switch (f->k) {
    default:
        for (unsigned i = 12; i < f->k; i++)
            PROBE_SET(i);
        /* fall through */
    case 12: PROBE_SET(11); /* fall through */
    case 11: PROBE_SET(10); /* fall through */
    case 10: PROBE_SET(9);  /* fall through */
    case 9: PROBE_SET(8);   /* fall through */
    case 8: PROBE_SET(7);   /* fall through */
    case 7: PROBE_SET(6);   /* fall through */
    case 6: PROBE_SET(5);   /* fall through */
    case 5: PROBE_SET(4);   /* fall through */
    case 4: PROBE_SET(3);   /* fall through */
    case 3: PROBE_SET(2);   /* fall through */
    case 2: PROBE_SET(1);   /* fall through */
    case 1: PROBE_SET(0);
    }
    return used;
}

/* Shared blocked adds: a thread ORs a key's 512-bit mask into its block
 * while it holds the block's lock, a 64-bit word in a small table beside
 * the filter (at most MAX_LOCKS words; blocks share them). That is one
 * locked instruction per key, where an atomic OR per word the key touches
 * would take about five. Queries never lock. Bits 1..63 of a lock word
 * count the keys added under it, so the filter's exact key count costs the
 * add nothing more: the holder bumps it as it unlocks. */
/* The lock word of `block`, or NULL when the filter has no lock table (and
 * adds use atomic ORs). The table is allocated by the first add that needs
 * it; every adder sees the same answer: the table, or &no_locks for good. */
static KV_COLD _Atomic uint64_t *first_lock_table(kv_bloom *f)
{
    _Atomic uint64_t *locks = NULL;
    _Atomic uint64_t *mine = calloc((size_t)f->lock_mask + 1, sizeof *mine);
    _Atomic uint64_t *want = mine ? mine : &no_locks;
    if (atomic_compare_exchange_strong_explicit(&f->locks, &locks, want, memory_order_acq_rel,
                                                memory_order_acquire))
        return want;
    free((void *)mine); /* another thread's table won: locks holds it */
    return locks;
}

static inline _Atomic uint64_t *block_lock(kv_bloom *f, uint64_t block)
{
    _Atomic uint64_t *locks = atomic_load_explicit(&f->locks, memory_order_acquire);
    if (__builtin_expect(!locks, 0))
        locks = first_lock_table(f);
    return locks == &no_locks ? NULL : &locks[block & f->lock_mask];
}

/* One step of a wait for another thread: a pause for the first 1024 steps
 * (the other thread is mid-add, a dozen instructions), then the CPU is
 * yielded (it was switched out there). */
static void backoff(unsigned spins)
{
    if (spins >= 1024) {
        sched_yield();
        return;
    }
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* take_lock's wait for a lock another thread holds: out of line, so that the
 * uncontended path makes no call, around which the compiler would save the
 * caller's vector registers on every add. */
static KV_COLD uint64_t lock_contended(_Atomic uint64_t *lock)
{
    for (;;) {
        for (unsigned spins = 0; atomic_load_explicit(lock, memory_order_relaxed) & 1; spins++)
            backoff(spins);
        if (!(atomic_fetch_or_explicit(lock, 1, memory_order_acquire) & 1))
            return atomic_load_explicit(lock, memory_order_relaxed);
    }
}

/* Takes a block lock (bit 0 of *lock: one `lock bts` when free) and returns
 * the word as it now stands. A waiter spins on plain loads; the holder
 * keeps the lock for a dozen instructions, so a waiter yields its CPU only
 * when the holder was descheduled. */
static inline uint64_t take_lock(_Atomic uint64_t *lock)
{
    if (__builtin_expect((atomic_fetch_or_explicit(lock, 1, memory_order_acquire) & 1) != 0, 0))
        return lock_contended(lock);
    /* Held: no other thread writes the word until the unlock. */
    return atomic_load_explicit(lock, memory_order_relaxed);
}

/* Releases a lock taken by take_lock, which returned `held`, counting one more
 * key added under it: (count << 1 | 1) + 1 == (count + 1) << 1. */
static inline void release_lock_counting(_Atomic uint64_t *lock, uint64_t held)
{
    atomic_store_explicit(lock, held + 1, memory_order_release);
}

/* With no lock table: an atomic OR per word the key touches. */
static void blocked_add_unlocked(kv_bloom *f, _Atomic uint64_t *b, uint64_t h)
{
    uint64_t mask[BLOCK_WORDS];
    for (unsigned used = blocked_mask(f, (uint32_t)h, mask); used; used &= used - 1) {
        unsigned w = ctz32(used);
        atomic_fetch_or_explicit(&b[w], mask[w], memory_order_relaxed);
    }
    count_add(f, 1);
}

/* Adds a blocked key (portable code). shared: other threads may add at the
 * same time, so the block's lock is held while its words are rewritten,
 * and counts the key. Otherwise the caller owns the filter (and counts). */
static void blocked_add(kv_bloom *f, uint64_t h, bool shared)
{
    uint64_t block = fastrange64(h, f->nblocks);
    _Atomic uint64_t *b = f->words + block * BLOCK_WORDS;
    prefetch_for_write(b); /* the line comes in while the mask is built */
    _Atomic uint64_t *lock = NULL;
    if (shared && !(lock = block_lock(f, block))) {
        blocked_add_unlocked(f, b, h);
        return;
    }
    uint64_t mask[BLOCK_WORDS], held = 0;
    (void)blocked_mask(f, (uint32_t)h, mask);
    if (lock)
        held = take_lock(lock);
    for (unsigned w = 0; w < BLOCK_WORDS; w++) /* all eight: no branch to mispredict */
        atomic_store_explicit(&b[w], atomic_load_explicit(&b[w], memory_order_relaxed) | mask[w],
                              memory_order_relaxed);
    if (lock)
        release_lock_counting(lock, held);
}

/* ---- batched queries ------------------------------------------------------- */

/* How many queries ahead a batch prefetches: enough to cover a memory
 * latency (~100-150 ns in a virtual machine) with queries of a few ns each.
 * The blocked batch prefetches into L2 only (prefetch_l2): a prefetch into
 * L1 holds one of the core's ~16 L1 fill buffers until its line arrives,
 * which caps the lines in flight, while L2 tracks several times more. A
 * classic query fetches k lines, so its batch looks less far ahead.
 * (Measured at 100M keys, 125 MB: blocked batch 9.1 ns per key with L1
 * prefetches 32 ahead, 7.8 ns with L2 prefetches 64 ahead; no change at
 * 1M and 10M keys.) */
#define BLOCKED_AHEAD 64
#define CLASSIC_AHEAD 16

static void prefetch_probes(const kv_bloom *f, uint64_t h)
{
    uint64_t g = h, step = classic_step(h);
    for (unsigned i = 0; i < f->k; i++, g += step)
        prefetch(&f->words[fastrange64(g, f->bits) >> 6]);
}

static void classic_batch(const kv_bloom *f, const uint64_t *hashes, size_t n, uint8_t *out)
{
    for (size_t i = 0; i < n && i < CLASSIC_AHEAD; i++)
        prefetch_probes(f, hashes[i]);
    for (size_t i = 0; i < n; i++) {
        if (i + CLASSIC_AHEAD < n)
            prefetch_probes(f, hashes[i + CLASSIC_AHEAD]);
        out[i] = (uint8_t)classic_test(f, hashes[i]);
    }
}

/* A blocked batch: query i runs while the blocks of queries up to
 * i + BLOCKED_AHEAD are on their way. `query` is inlined where the caller
 * names a static function. */
static inline __attribute__((always_inline)) void
blocked_batch_with(const kv_bloom *f, const uint64_t *hashes, size_t n, uint8_t *out,
                   kv_bloom_query_fn *query)
{
    size_t i = 0;
    for (size_t j = 0; j < n && j < BLOCKED_AHEAD; j++)
        prefetch_l2(block_of(f, hashes[j]));
    for (; i + BLOCKED_AHEAD < n; i++) {
        prefetch_l2(block_of(f, hashes[i + BLOCKED_AHEAD]));
        out[i] = (uint8_t)query(f, hashes[i]);
    }
    for (; i < n; i++)
        out[i] = (uint8_t)query(f, hashes[i]);
}

static void blocked_batch(const kv_bloom *f, const uint64_t *hashes, size_t n, uint8_t *out)
{
    blocked_batch_with(f, hashes, n, out, blocked_test);
}

/* A query by key through the filter's query by hash: the queries by key
 * below fall back on it for keys longer than 16 bytes. Never inlined, so
 * that those flattened queries stay small. */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static int query_key_by_hash(const kv_bloom *f, const void *key, size_t len)
{
    return f->query(f, hash_key(f, key, len));
}

/* The body of every query by key specialised for a query by hash (a
 * static function the caller names): the hash of a key of 1 to 16 bytes
 * inlined, any other key through query_key_by_hash. */
static inline __attribute__((always_inline)) int
query_key_with(const kv_bloom *f, const void *key, size_t len, kv_bloom_query_fn *query)
{
    if (__builtin_expect(!key || len - 1 >= 16, 0))
        return query_key_by_hash(f, key, len);
    return query(f, kv_hash_short(key, len, f->seed));
}

/* Queries by key of the portable code. */
static KV_FLATTEN int classic_query_key(const kv_bloom *f, const void *key, size_t len)
{
    return query_key_with(f, key, len, classic_test);
}

static KV_FLATTEN int blocked_query_key(const kv_bloom *f, const void *key, size_t len)
{
    return query_key_with(f, key, len, blocked_test);
}

#if KV_BLOOM_AVX512
/* blocked_add with AVX-512, for one k known to the compiler. */
KV_AVX512_FN static inline __attribute__((always_inline)) void
blocked_add_avx512_k(kv_bloom *f, uint64_t h, bool shared, unsigned k)
{
    uint64_t block = fastrange64(h, f->nblocks);
    _Atomic uint64_t *b = f->words + block * BLOCK_WORDS;
    prefetch_for_write(b);
    if (!shared) {
        kv_bloom_avx512_or(b, kv_bloom_avx512_mask((uint32_t)h, k));
        return;
    }
    _Atomic uint64_t *lock = block_lock(f, block);
    if (__builtin_expect(!lock, 0)) {
        blocked_add_unlocked(f, b, h);
        return;
    }
    __m512i mask = kv_bloom_avx512_mask((uint32_t)h, k);
    uint64_t held = take_lock(lock);
    kv_bloom_avx512_or(b, mask);
    release_lock_counting(lock, held);
}

/* A shared add, an owned add, a query (by hash and by key, the hash of a
 * key of at most 16 bytes inlined) and a batch per k up to 16, each with
 * its probes unrolled; larger k share looping ones. */
#define KV_AVX512_PAIR(name, kexpr)                                              \
    KV_AVX512_FN static void add_avx512_##name(kv_bloom *f, uint64_t h)          \
    {                                                                            \
        blocked_add_avx512_k(f, h, true, kexpr);                                 \
    }                                                                            \
    KV_AVX512_FN static void add_owned_avx512_##name(kv_bloom *f, uint64_t h)    \
    {                                                                            \
        blocked_add_avx512_k(f, h, false, kexpr);                                \
    }                                                                            \
    KV_AVX512_FN static int query_avx512_##name(const kv_bloom *f, uint64_t h)   \
    {                                                                            \
        return kv_bloom_avx512_test(block_of(f, h), (uint32_t)h, kexpr);         \
    }                                                                            \
    KV_AVX512_FN KV_FLATTEN static int query_key_avx512_##name(const kv_bloom *f, \
                                                               const void *key, size_t len) \
    {                                                                            \
        return query_key_with(f, key, len, query_avx512_##name);                 \
    }                                                                            \
    KV_AVX512_FN static void batch_avx512_##name(const kv_bloom *f, const uint64_t *hashes, \
                                                 size_t n, uint8_t *out)         \
    {                                                                            \
        blocked_batch_with(f, hashes, n, out, query_avx512_##name);              \
    }
KV_AVX512_PAIR(1, 1) KV_AVX512_PAIR(2, 2) KV_AVX512_PAIR(3, 3) KV_AVX512_PAIR(4, 4)
KV_AVX512_PAIR(5, 5) KV_AVX512_PAIR(6, 6) KV_AVX512_PAIR(7, 7) KV_AVX512_PAIR(8, 8)
KV_AVX512_PAIR(9, 9) KV_AVX512_PAIR(10, 10) KV_AVX512_PAIR(11, 11) KV_AVX512_PAIR(12, 12)
KV_AVX512_PAIR(13, 13) KV_AVX512_PAIR(14, 14) KV_AVX512_PAIR(15, 15) KV_AVX512_PAIR(16, 16)
KV_AVX512_PAIR(any, f->k)
#undef KV_AVX512_PAIR

#endif

/* ---- adding and querying, whatever the layout -------------------------------- */

static void classic_add_shared(kv_bloom *f, uint64_t h)
{
    classic_add(f, h, true);
    count_add(f, 1);
}

static void classic_add_owned(kv_bloom *f, uint64_t h)
{
    classic_add(f, h, false);
}

static void blocked_add_shared(kv_bloom *f, uint64_t h)
{
    blocked_add(f, h, true);
}

static void blocked_add_owned(kv_bloom *f, uint64_t h)
{
    blocked_add(f, h, false);
}

/* Chooses f's adds and query for its layout, k and code (f->simd): one
 * indirect call then reaches code specialised for them, with no further
 * dispatch on the hot path. */
static void pick_paths(kv_bloom *f)
{
    if (f->layout == KV_BLOOM_CLASSIC) {
        f->add = classic_add_shared;
        f->add_owned = classic_add_owned;
        f->query = classic_test;
        f->query_key = classic_query_key;
        f->batch = classic_batch;
        return;
    }
    f->add = blocked_add_shared;
    f->add_owned = blocked_add_owned;
    f->query = blocked_test;
    f->query_key = blocked_query_key;
    f->batch = blocked_batch;
#if KV_BLOOM_AVX512
    if (!f->simd)
        return;
#define KV_AVX512_TABLE(kind)                                                    \
    {                                                                            \
        kind##_any, kind##_1, kind##_2, kind##_3, kind##_4, kind##_5, kind##_6,  \
            kind##_7, kind##_8, kind##_9, kind##_10, kind##_11, kind##_12,       \
            kind##_13, kind##_14, kind##_15, kind##_16,                          \
    }
    static kv_bloom_add_fn *const adds[17] = KV_AVX512_TABLE(add_avx512);
    static kv_bloom_add_fn *const owned[17] = KV_AVX512_TABLE(add_owned_avx512);
    static kv_bloom_query_fn *const queries[17] = KV_AVX512_TABLE(query_avx512);
    static kv_bloom_query_key_fn *const key_queries[17] = KV_AVX512_TABLE(query_key_avx512);
    static kv_bloom_batch_fn *const batches[17] = KV_AVX512_TABLE(batch_avx512);
#undef KV_AVX512_TABLE
    unsigned i = f->k <= 16 ? f->k : 0;
    f->add = adds[i];
    f->add_owned = owned[i];
    f->query = queries[i];
    f->query_key = key_queries[i];
    f->batch = batches[i];
#endif
}

/* ---- lone writers ----------------------------------------------------------- */

/* Most filters are filled by one thread, yet kv_bloom_add must stay safe
 * while several add at once, and what makes it safe (the block's lock, or
 * an atomic OR per word) is a locked instruction per add: ~6 ns here, and a
 * full barrier, so the next add's cache miss cannot overlap this one's.
 * Hence a filter is cut into regions (a classic filter is one; a blocked
 * one up to MAX_REGIONS runs of whole blocks), and the first thread to add
 * to a region becomes its owner and adds there with plain loads and stores
 * while no other thread has added there. The first add of another thread
 * to the region revokes the ownership for good; from then on every add to
 * the region, the owner's too, takes the shared path. Threads that each add
 * the keys of their own part of the filter (kv_bloom_partition) thus all
 * add with plain stores, and touch no line another one writes.
 *
 * The hand-over is Dekker's: the owner announces an add (busy = 1), then
 * checks that it still owns the region; the revoker marks the region
 * REVOKING, then waits until no add is announced. Each side's load must see
 * the other's store, which takes a full barrier on both sides. On the
 * owner's side it would cost as much as the lock, so the revoker pays for
 * both: membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) returns only after
 * every running thread of the process has executed a full barrier (a thread
 * not running passes one when it is switched in). After that, either the
 * owner's announcement is visible, and the revoker waits for busy = 0, which
 * the owner stores after its plain stores (release); or the owner's check
 * comes after the barrier and sees REVOKING. That barrier costs a few
 * microseconds, paid at most once per region. A process that cannot use
 * membarrier (not Linux, an old kernel, a sandbox that forbids it) gives no
 * region an owner. */

/* Its address names this thread as an owner; no two live threads share it,
 * and none is OWNER_NONE, OWNER_SHARED or OWNER_REVOKING. */
static KV_TALLY_TLS char self_token;

static inline uintptr_t self(void)
{
    return (uintptr_t)&self_token;
}

/* Whether this process may use MEMBARRIER_CMD_PRIVATE_EXPEDITED; the first
 * call registers for it. */
static bool membarrier_ready(void)
{
#if defined(__linux__) && defined(SYS_membarrier)
    static _Atomic int state; /* 0: not asked yet, 1: ready, -1: unavailable */
    int st = atomic_load_explicit(&state, memory_order_acquire);
    if (st == 0) {
        long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
        bool ok = cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
                  syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
        st = ok ? 1 : -1;
        atomic_store_explicit(&state, st, memory_order_release);
    }
    return st > 0;
#else
    return false;
#endif
}

/* A full barrier on every thread of the process (membarrier_ready() was
 * 1). Should the registered command fail (EPERM: a process that was never
 * registered, such as a child of fork() on a kernel that does not carry the
 * registration over), it registers again; else the global command (every
 * thread of every process, slower) serves. */
static void barrier_all_threads(void)
{
#if defined(__linux__) && defined(SYS_membarrier)
    for (;;) {
        if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
            return;
        if (errno == EPERM &&
            syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0)
            continue;
        if (syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) == 0)
            return;
        sched_yield();
    }
#endif
}

/* The region of f that a key with hash h adds to. */
static inline struct region *region_of(const kv_bloom *f, uint64_t h)
{
    return &f->regions[fastrange64(h, f->nblocks) >> f->region_shift];
}

/* The owner's add: announce it, check the ownership, add with plain stores
 * and count in the region's adds, which only its owner writes. false,
 * having done nothing, when this thread is not the region's owner. */
static inline bool owner_add(kv_bloom *f, struct region *r, uint64_t h)
{
    uintptr_t me = self();
    if (atomic_load_explicit(&r->owner, memory_order_relaxed) != me)
        return false;
    atomic_store_explicit(&r->busy, 1, memory_order_relaxed);
    /* Keeps the compiler from moving the check above the announcement; the
     * CPU's half of the fence is the revoker's membarrier. */
    atomic_signal_fence(memory_order_seq_cst);
    if (__builtin_expect(atomic_load_explicit(&r->owner, memory_order_relaxed) != me, 0)) {
        atomic_store_explicit(&r->busy, 0, memory_order_release);
        return false;
    }
    f->add_owned(f, h);
    atomic_store_explicit(&r->adds, atomic_load_explicit(&r->adds, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    atomic_store_explicit(&r->busy, 0, memory_order_release);
    return true;
}

/* Settles who may add to a region, for a thread that found it not its own
 * (its owner word was o): claims a region nobody has added to, revokes
 * another thread's ownership or waits for a revocation under way. Returns
 * this thread's token when it now owns the region, else OWNER_SHARED. */
static KV_COLD uintptr_t settle_owner(struct region *r, uintptr_t o)
{
    uintptr_t me = self();
    for (unsigned spins = 0;; spins++) {
        if (o == OWNER_SHARED || o == me)
            return o;
        if (o == OWNER_NONE) {
            uintptr_t want = membarrier_ready() ? me : OWNER_SHARED;
            if (atomic_compare_exchange_strong_explicit(&r->owner, &o, want, memory_order_acq_rel,
                                                        memory_order_acquire))
                return want;
        } else if (o == OWNER_REVOKING) {
            backoff(spins);
            o = atomic_load_explicit(&r->owner, memory_order_acquire);
        } else if (atomic_compare_exchange_strong_explicit(&r->owner, &o, OWNER_REVOKING,
                                                           memory_order_acq_rel,
                                                           memory_order_acquire)) {
            barrier_all_threads();
            for (unsigned w = 0; atomic_load_explicit(&r->busy, memory_order_acquire); w++)
                backoff(w);
            atomic_store_explicit(&r->owner, OWNER_SHARED, memory_order_release);
            return OWNER_SHARED;
        }
    }
}

/* Adds h and counts it: by the owner's path when this thread owns the
 * key's region, else by the shared one. */
static inline void add_counted(kv_bloom *f, uint64_t h)
{
    struct region *r = region_of(f, h);
    if (owner_add(f, r, h))
        return;
    uintptr_t o = atomic_load_explicit(&r->owner, memory_order_acquire);
    if (__builtin_expect(o != OWNER_SHARED, 0) && settle_owner(r, o) != OWNER_SHARED &&
        owner_add(f, r, h))
        return;
    f->add(f, h);
}

unsigned kv_bloom_partition(const kv_bloom *f, uint64_t h, unsigned parts)
{
    if (!f || parts <= 1)
        return 0;
    if (f->nregions == 1) /* nothing to split: parts only share the keys out */
        return (unsigned)fastrange64(h, parts);
    /* A region goes to the part its middle block would, so each boundary
     * between parts lies within half a region of where an even split puts
     * it, and a part within a region (1/33 of the filter at most) of its
     * share. nblocks <= 2^31, so the product fits. */
    uint64_t first = (uint64_t)(region_of(f, h) - f->regions) << f->region_shift;
    uint64_t part = (first + ((uint64_t)1 << f->region_shift >> 1)) * parts / f->nblocks;
    return part < parts ? (unsigned)part : parts - 1; /* the last region may be short */
}

void kv_bloom_add_hashes_owned(kv_bloom *f, const uint64_t *hashes, size_t n)
{
    if (!f || !hashes)
        return;
    for (size_t i = 0; i < n; i++)
        f->add_owned(f, hashes[i]);
    count_add(f, n);
}

void kv_bloom_add_hash(kv_bloom *f, uint64_t h)
{
    if (f)
        add_counted(f, h);
}

void kv_bloom_add(kv_bloom *f, const void *key, size_t len)
{
    if (f)
        add_counted(f, hash_key(f, key, len));
}

static inline int test_hash(const kv_bloom *f, uint64_t h)
{
    if (!f)
        return 1; /* no filter rejects nothing: never a false negative */
    return f->query(f, h);
}

int kv_bloom_may_contain_hash(const kv_bloom *f, uint64_t h)
{
    return test_hash(f, h);
}

int kv_bloom_may_contain(const kv_bloom *f, const void *key, size_t len)
{
    if (!f)
        return 1; /* as test_hash */
    return f->query_key(f, key, len);
}

void kv_bloom_may_contain_batch(const kv_bloom *f, const uint64_t *hashes, size_t n,
                                uint8_t *out)
{
    if (!hashes || !out || n == 0)
        return;
    if (!f) {
        memset(out, 1, n);
        return;
    }
    f->batch(f, hashes, n, out);
}

/* ---- metrics --------------------------------------------------------------- */

int kv_bloom_uses_avx512(const kv_bloom *f)
{
    return f && f->simd;
}

static uint64_t keys_added(const kv_bloom *f)
{
    uint64_t keys = f->base_keys + kv_tally_sum(&f->adds[0].adds, sizeof f->adds[0]);
    for (unsigned i = 0; i < f->nregions; i++)
        keys += atomic_load_explicit(&f->regions[i].adds, memory_order_relaxed);
    _Atomic uint64_t *locks = atomic_load_explicit(&f->locks, memory_order_acquire);
    if (locks && locks != &no_locks)
        for (uint64_t i = 0; i <= f->lock_mask; i++)
            keys += atomic_load_explicit(&locks[i], memory_order_relaxed) >> 1;
    return keys;
}

void kv_bloom_stats(const kv_bloom *f, kv_bloom_info *out)
{
    if (!f || !out)
        return;
    uint64_t set = 0;
    for (uint64_t i = 0; i < f->nwords; i++)
        set += popcount64(atomic_load_explicit(&f->words[i], memory_order_relaxed));
    memset(out, 0, sizeof *out);
    out->layout = f->layout;
    out->bits = f->bits;
    out->k = f->k;
    out->keys_added = keys_added(f);
    out->bits_set = set;
    out->fill = (double)set / (double)f->bits;
    out->estimated_keys = -((double)f->bits / f->k) * log1p(-out->fill);
    out->expected_fpr = kv_bloom_expected_fpr(f->layout, f->bits, out->keys_added, f->k);
    out->bytes = (size_t)f->nwords * 8;
}

/* ---- codec ----------------------------------------------------------------- */

/* Payload bytes a well-formed filter of this layout and m must carry, or 0
 * when m itself is not well formed. */
static uint64_t payload_bytes(unsigned layout, uint64_t m)
{
    if (m == 0 || m > KV_BLOOM_MAX_BITS)
        return 0;
    if (layout == KV_BLOOM_BLOCKED)
        return m % BLOCK_BITS ? 0 : m / 8;
    return (m + 63) / 64 * 8;
}

int kv_bloom_encode(const kv_bloom *f, void **buf, size_t *len)
{
    if (!f || !buf || !len)
        return KV_EINVAL;
    *buf = NULL;
    *len = 0;
    size_t payload = (size_t)f->nwords * 8;
    size_t total = KV_BLOOM_FMT_HEADER + payload + KV_BLOOM_FMT_CHECKSUM;
    uint8_t *p = malloc(total);
    if (!p)
        return KV_ENOMEM;
    memcpy(p + KV_BLOOM_FMT_OFF_MAGIC, KV_BLOOM_FMT_MAGIC, 4);
    p[KV_BLOOM_FMT_OFF_VERSION] = KV_BLOOM_FMT_VERSION;
    p[KV_BLOOM_FMT_OFF_LAYOUT] = (uint8_t)f->layout;
    p[KV_BLOOM_FMT_OFF_HASH] = KV_BLOOM_FMT_HASH_XXH3_64;
    p[KV_BLOOM_FMT_OFF_K] = (uint8_t)f->k;
    kv_put64(p + KV_BLOOM_FMT_OFF_SEED, f->seed);
    kv_put64(p + KV_BLOOM_FMT_OFF_BITS, f->bits);
    kv_put64(p + KV_BLOOM_FMT_OFF_KEYS, keys_added(f));
    kv_put64(p + KV_BLOOM_FMT_OFF_PAYLOAD_LEN, payload);
    uint8_t *q = p + KV_BLOOM_FMT_HEADER;
    for (uint64_t i = 0; i < f->nwords; i++, q += 8)
        kv_put64(q, atomic_load_explicit(&f->words[i], memory_order_relaxed));
    kv_put64(q, XXH3_64bits(p, KV_BLOOM_FMT_HEADER + payload));
    *buf = p;
    *len = total;
    return KV_OK;
}

int kv_bloom_decode(const void *buf, size_t len, kv_bloom **out)
{
    if (!out)
        return KV_EINVAL;
    *out = NULL;
    if (!buf)
        return KV_EINVAL;
    const uint8_t *p = buf;
    /* Every header field is checked before the payload is touched. */
    if (len < KV_BLOOM_FMT_HEADER + KV_BLOOM_FMT_CHECKSUM)
        return KV_ECORRUPT;
    if (memcmp(p + KV_BLOOM_FMT_OFF_MAGIC, KV_BLOOM_FMT_MAGIC, 4) != 0 ||
        p[KV_BLOOM_FMT_OFF_VERSION] != KV_BLOOM_FMT_VERSION ||
        p[KV_BLOOM_FMT_OFF_HASH] != KV_BLOOM_FMT_HASH_XXH3_64)
        return KV_ECORRUPT;
    unsigned layout = p[KV_BLOOM_FMT_OFF_LAYOUT];
    unsigned k = p[KV_BLOOM_FMT_OFF_K];
    uint64_t bits = kv_get64(p + KV_BLOOM_FMT_OFF_BITS);
    uint64_t payload = kv_get64(p + KV_BLOOM_FMT_OFF_PAYLOAD_LEN);
    if (!layout_ok((kv_bloom_layout)layout) || k < KV_BLOOM_MIN_K || k > KV_BLOOM_MAX_K)
        return KV_ECORRUPT;
    uint64_t want = payload_bytes(layout, bits);
    if (want == 0 || payload != want ||
        (uint64_t)len - KV_BLOOM_FMT_HEADER - KV_BLOOM_FMT_CHECKSUM != payload)
        return KV_ECORRUPT;
    size_t covered = KV_BLOOM_FMT_HEADER + (size_t)payload;
    if (XXH3_64bits(p, covered) != kv_get64(p + covered))
        return KV_ECORRUPT;

    kv_bloom *f;
    int rc = bloom_alloc((kv_bloom_layout)layout, bits, k, kv_get64(p + KV_BLOOM_FMT_OFF_SEED), &f);
    if (rc != KV_OK)
        return rc;
    const uint8_t *q = p + KV_BLOOM_FMT_HEADER;
    for (uint64_t i = 0; i < f->nwords; i++, q += 8)
        atomic_init(&f->words[i], kv_get64(q));
    f->base_keys = kv_get64(p + KV_BLOOM_FMT_OFF_KEYS);
    *out = f;
    return KV_OK;
}
