/* bloom.c - the filter object: allocation, the adds and queries of the
 * blocked and classic layouts (portable and AVX-512, bloom_avx512.h), batch
 * queries with prefetch, the choice of paths per filter, and stats.
 * Sizing: bloom_size.c; many threads adding at once: bloom_shared.c; the
 * codec: bloom_codec.c; union, intersection and clear: bloom_ops.c; files
 * and the shared filter: bloom_file.c; the struct: bloom_impl.h. */
#if defined(__linux__) && !defined(_DEFAULT_SOURCE)
#define _DEFAULT_SOURCE /* madvise */
#endif
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bloom_avx512.h"
#include "bloom_impl.h"
#include "filter_format.h"
#include "util/hash.h"
#include "util/tally.h"

/* ---- small arithmetic helpers --------------------------------------------- */

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
    return f->words + kv_fastrange64(h, f->nblocks) * BLOCK_WORDS;
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
        uint64_t pos = kv_fastrange64(g, f->bits);
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

/* The filter object of kv_bloom_alloc and kv_bloom_alloc_mapped, without
 * its bit array; NULL when out of memory. */
static kv_bloom *alloc_object(kv_bloom_layout layout, uint64_t bits, unsigned k, uint64_t seed)
{
    kv_bloom *f = aligned_alloc(CACHE_LINE, sizeof *f);
    if (!f)
        return NULL;
    memset(f, 0, sizeof *f);
    f->layout = layout;
    f->k = k;
    f->bits = bits;
    f->nwords = (bits + 63) / 64;
    f->nblocks = layout == KV_BLOOM_BLOCKED ? bits / BLOCK_BITS : 0;
    f->seed = seed;
    f->simd = layout == KV_BLOOM_BLOCKED && simd_wanted();
    pick_paths(f);
    if (kv_bloom_shared_init(f) != KV_OK) {
        free(f);
        return NULL;
    }
    for (unsigned i = 0; i <= KV_TALLY_STRIPES; i++)
        atomic_init(&f->adds[i].adds, 0);
    atomic_init(&f->base_keys, 0);
    return f;
}

int kv_bloom_alloc(kv_bloom_layout layout, uint64_t bits, unsigned k, uint64_t seed,
                   kv_bloom **out)
{
    kv_bloom *f = alloc_object(layout, bits, k, seed);
    if (!f)
        return KV_ENOMEM;
    f->words = alloc_words((size_t)f->nwords * 8);
    if (!f->words) {
        kv_bloom_shared_free(f);
        free(f);
        return KV_ENOMEM;
    }
    *out = f;
    return KV_OK;
}

static void pick_mapped_paths(kv_bloom *f);

int kv_bloom_alloc_mapped(kv_bloom_layout layout, uint64_t bits, unsigned k, uint64_t seed,
                          void *map, size_t map_len, _Atomic uint64_t *words,
                          _Atomic uint64_t *keys, kv_bloom **out)
{
    kv_bloom *f = alloc_object(layout, bits, k, seed);
    if (!f)
        return KV_ENOMEM;
    f->words = words;
    f->map = map;
    f->map_len = map_len;
    f->map_keys = keys;
    f->map_stripe = (unsigned)getpid();
    /* Other processes add to these bits, where neither this process's
     * block locks nor membarrier reach: no region ever gets a lone writer,
     * and the lock table is "none" for good, so that every shared path
     * ORs atomically. */
    for (unsigned i = 0; i < f->nregions; i++)
        atomic_store_explicit(&f->regions[i].owner, OWNER_SHARED, memory_order_relaxed);
    atomic_store_explicit(&f->locks, &kv_bloom_no_locks, memory_order_relaxed);
    pick_mapped_paths(f);
    *out = f;
    return KV_OK;
}

void kv_bloom_free(kv_bloom *f)
{
    if (!f)
        return;
    kv_bloom_shared_free(f);
    if (f->map)
        munmap(f->map, f->map_len);
    else
        free((void *)f->words);
    free(f);
}

/* ---- adding and querying --------------------------------------------------- */

/* The exported functions are thin wrappers over these static ones, which
 * the compiler may inline into each other (an exported function in a shared
 * library may be interposed, so calls to it are not inlined). */
static inline uint64_t hash_key(const kv_bloom *f, const void *key, size_t len)
{
    if (f && __builtin_expect(f->keyed, 0))
        return kv_siphash24(&f->sip, key, len);
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
        uint64_t pos = kv_fastrange64(g, f->bits);
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

/* An atomic OR per word the key touches, uncounted. */
static void blocked_or_atomic(kv_bloom *f, _Atomic uint64_t *b, uint64_t h)
{
    uint64_t mask[BLOCK_WORDS];
    for (unsigned used = blocked_mask(f, (uint32_t)h, mask); used; used &= used - 1) {
        unsigned w = ctz32(used);
        atomic_fetch_or_explicit(&b[w], mask[w], memory_order_relaxed);
    }
}

/* With no lock table: an atomic OR per word the key touches. */
static void blocked_add_unlocked(kv_bloom *f, _Atomic uint64_t *b, uint64_t h)
{
    blocked_or_atomic(f, b, h);
    count_add(f, 1);
}

/* Adds a blocked key (portable code). shared: other threads may add at the
 * same time, so the block's lock is held while its words are rewritten,
 * and counts the key. Otherwise the caller owns the filter (and counts). */
static void blocked_add(kv_bloom *f, uint64_t h, bool shared)
{
    uint64_t block = kv_fastrange64(h, f->nblocks);
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

/* How many queries ahead a batch prefetches: enough queries to cover a
 * memory latency, which lasts many times as long as one query. The blocked
 * batch prefetches into L2 only (prefetch_l2): a prefetch into L1 holds one
 * of the core's few L1 fill buffers until its line arrives, which caps the
 * lines in flight, while L2 tracks several times more. A classic query
 * fetches k lines, so its batch looks less far ahead. (On a filter far
 * larger than the caches, L2 prefetches 64 ahead beat L1 prefetches 32
 * ahead; on filters nearer the caches' size the two were even.) */
#define BLOCKED_AHEAD 64
#define CLASSIC_AHEAD 16

static void prefetch_probes(const kv_bloom *f, uint64_t h)
{
    uint64_t g = h, step = classic_step(h);
    for (unsigned i = 0; i < f->k; i++, g += step)
        prefetch(&f->words[kv_fastrange64(g, f->bits) >> 6]);
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
    uint64_t block = kv_fastrange64(h, f->nblocks);
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

/* ---- keyed filters ----------------------------------------------------------- */

/* A keyed filter's query by key: SipHash, then the layout's query by hash
 * (whichever code pick_paths chose for it). */
static int keyed_query_key(const kv_bloom *f, const void *key, size_t len)
{
    return f->query(f, kv_siphash24(&f->sip, key, len));
}

/* The message whose SipHash is a secret's check value: 16 ASCII bytes. */
static const char secret_check_msg[16] = {'k', 'v', ' ', 'f', 'i', 'l', 't', 'e',
                                          'r', ' ', 's', 'e', 'c', 'r', 'e', 't'};

uint64_t kv_bloom_secret_check(const uint8_t secret[KV_BLOOM_SECRET_BYTES])
{
    if (!secret)
        return 0;
    kv_sipkey k;
    kv_sipkey_init(&k, secret);
    return kv_siphash24(&k, secret_check_msg, sizeof secret_check_msg);
}

void kv_bloom_make_keyed(kv_bloom *f, const uint8_t secret[KV_BLOOM_SECRET_BYTES])
{
    f->keyed = true;
    kv_sipkey_init(&f->sip, secret);
    f->seed = kv_bloom_secret_check(secret);
    f->query_key = keyed_query_key;
}

int kv_bloom_new_keyed(kv_bloom_layout layout, uint64_t expected_keys, double bits_per_key,
                       const uint8_t secret[KV_BLOOM_SECRET_BYTES], kv_bloom **out)
{
    if (!secret) {
        if (out)
            *out = NULL;
        return KV_EINVAL;
    }
    int rc = kv_bloom_new(layout, expected_keys, bits_per_key, 0, out);
    if (rc == KV_OK)
        kv_bloom_make_keyed(*out, secret);
    return rc;
}

int kv_bloom_is_keyed(const kv_bloom *f)
{
    return f && f->keyed;
}

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

/* ---- a filter in a shared file (kv_bloom_open_shared) ------------------------
 * Other processes add to the same bits: every add is an atomic OR per word
 * it touches (so a process killed mid-add leaves no lock held), counted
 * with an atomic add in one of the file's counter stripes, which this
 * process picks by its pid and the thread's tally slot. */
static inline void count_mapped(kv_bloom *f, uint64_t n)
{
    unsigned s = (f->map_stripe + kv_tally_slot()) % KV_BLOOM_SHM_STRIPES;
    _Atomic uint64_t *c = &f->map_keys[s * KV_BLOOM_SHM_STRIPE_WORDS];
    /* A counter at the top (a file written so) stays there, not wrapped to
     * a small count; no process's adds get near it otherwise. */
    if (atomic_fetch_add_explicit(c, n, memory_order_relaxed) > UINT64_MAX - n)
        atomic_store_explicit(c, UINT64_MAX, memory_order_relaxed);
}

static void blocked_add_mapped(kv_bloom *f, uint64_t h)
{
    blocked_or_atomic(f, block_of(f, h), h);
    count_mapped(f, 1);
}

static void blocked_or_mapped(kv_bloom *f, uint64_t h)
{
    blocked_or_atomic(f, block_of(f, h), h);
}

static void classic_add_mapped(kv_bloom *f, uint64_t h)
{
    classic_add(f, h, true);
    count_mapped(f, 1);
}

static void classic_or_mapped(kv_bloom *f, uint64_t h)
{
    classic_add(f, h, true);
}

/* The adds of a mapped filter (its queries are any filter's). */
static void pick_mapped_paths(kv_bloom *f)
{
    bool blocked = f->layout == KV_BLOOM_BLOCKED;
    f->add = blocked ? blocked_add_mapped : classic_add_mapped;
    f->add_owned = blocked ? blocked_or_mapped : classic_or_mapped;
}

void kv_bloom_count_keys(kv_bloom *f, uint64_t n)
{
    if (f->map)
        count_mapped(f, n);
    else
        atomic_fetch_add_explicit(&f->base_keys, n, memory_order_relaxed);
}

void kv_bloom_reset_keys(kv_bloom *f, uint64_t n)
{
    for (unsigned i = 0; i <= KV_TALLY_STRIPES; i++)
        atomic_store_explicit(&f->adds[i].adds, 0, memory_order_relaxed);
    for (unsigned i = 0; i < f->nregions; i++)
        atomic_store_explicit(&f->regions[i].adds, 0, memory_order_relaxed);
    _Atomic uint64_t *locks = atomic_load_explicit(&f->locks, memory_order_acquire);
    if (locks && locks != &kv_bloom_no_locks)
        for (uint64_t i = 0; i <= f->lock_mask; i++) /* the count, not the lock bit */
            atomic_fetch_and_explicit(&locks[i], 1, memory_order_relaxed);
    if (f->map_keys) {
        for (unsigned i = 0; i < KV_BLOOM_SHM_STRIPES; i++)
            atomic_store_explicit(&f->map_keys[i * KV_BLOOM_SHM_STRIPE_WORDS], 0,
                                  memory_order_relaxed);
        atomic_store_explicit(&f->base_keys, 0, memory_order_relaxed);
        count_mapped(f, n);
    } else {
        atomic_store_explicit(&f->base_keys, n, memory_order_relaxed);
    }
}

/* ---- add and check ------------------------------------------------------------
 * kv_bloom_add_check: the add of kv_bloom_add, which also tells whether
 * every bit it sets was set before, read in the same pass that sets them:
 * a plain load and store per word on the lone writer's path and under a
 * block lock; an atomic OR that returns the old word elsewhere. Bits only
 * ever get set, so a bit a key's earlier probe set and a later probe finds
 * set was clear when the earlier one read it: the answer is "all k bits
 * were set before this add", exactly. */

/* Merges a blocked key's mask into its block with plain loads and stores
 * (the caller holds the block: its lone writer, or its lock); 1 when every
 * bit of the mask was set already. */
static inline int blocked_merge_check(_Atomic uint64_t *b, const uint64_t mask[BLOCK_WORDS])
{
    int had = 1;
    for (unsigned w = 0; w < BLOCK_WORDS; w++) {
        uint64_t old = atomic_load_explicit(&b[w], memory_order_relaxed);
        had &= (old & mask[w]) == mask[w];
        atomic_store_explicit(&b[w], old | mask[w], memory_order_relaxed);
    }
    return had;
}

/* Adds a blocked key with an atomic OR per word it touches (no lock table,
 * or a mapped filter); uncounted. 1 when every bit was set before. */
static int blocked_or_check_atomic(kv_bloom *f, uint64_t h)
{
    _Atomic uint64_t *b = block_of(f, h);
    uint64_t mask[BLOCK_WORDS];
    int had = 1;
    for (unsigned used = blocked_mask(f, (uint32_t)h, mask); used; used &= used - 1) {
        unsigned w = ctz32(used);
        uint64_t old = atomic_fetch_or_explicit(&b[w], mask[w], memory_order_relaxed);
        had &= (old & mask[w]) == mask[w];
    }
    return had;
}

/* Adds a classic key, each bit by an atomic OR (shared) or a plain load
 * and store; uncounted. 1 when every bit was set before. */
static int classic_or_check(kv_bloom *f, uint64_t h, bool shared)
{
    uint64_t g = h, step = classic_step(h);
    int had = 1;
    for (unsigned i = 0; i < f->k; i++, g += step) {
        uint64_t pos = kv_fastrange64(g, f->bits);
        _Atomic uint64_t *w = &f->words[pos >> 6];
        uint64_t bit = (uint64_t)1 << (pos & 63), old;
        if (shared) {
            old = atomic_fetch_or_explicit(w, bit, memory_order_relaxed);
        } else {
            old = atomic_load_explicit(w, memory_order_relaxed);
            atomic_store_explicit(w, old | bit, memory_order_relaxed);
        }
        had &= (old & bit) != 0;
    }
    return had;
}

/* add_check on the lone writer's path (the caller is the region's owner). */
static int owned_add_check(kv_bloom *f, uint64_t h)
{
    if (f->layout == KV_BLOOM_CLASSIC)
        return classic_or_check(f, h, false);
    uint64_t mask[BLOCK_WORDS];
    (void)blocked_mask(f, (uint32_t)h, mask);
    return blocked_merge_check(block_of(f, h), mask);
}

/* add_check on the shared path, counted as the shared add counts. */
static int shared_add_check(kv_bloom *f, uint64_t h)
{
    int had;
    if (f->layout == KV_BLOOM_CLASSIC) {
        had = classic_or_check(f, h, true);
    } else {
        uint64_t block = kv_fastrange64(h, f->nblocks);
        _Atomic uint64_t *lock = f->map ? NULL : block_lock(f, block);
        if (lock) {
            uint64_t mask[BLOCK_WORDS];
            (void)blocked_mask(f, (uint32_t)h, mask);
            uint64_t held = take_lock(lock);
            had = blocked_merge_check(f->words + block * BLOCK_WORDS, mask);
            release_lock_counting(lock, held); /* counts the key */
            return had;
        }
        had = blocked_or_check_atomic(f, h);
    }
    if (f->map)
        count_mapped(f, 1);
    else
        count_add(f, 1);
    return had;
}

int kv_bloom_add_check_hash(kv_bloom *f, uint64_t h)
{
    if (!f)
        return 1; /* as a query of no filter: "maybe" */
    struct region *r = region_of(f, h);
    if (owner_begin(r)) {
        int had = owned_add_check(f, h);
        owner_end(r);
        return had;
    }
    uintptr_t o = atomic_load_explicit(&r->owner, memory_order_acquire);
    if (o != OWNER_SHARED && kv_bloom_settle_owner(r, o) != OWNER_SHARED && owner_begin(r)) {
        int had = owned_add_check(f, h);
        owner_end(r);
        return had;
    }
    return shared_add_check(f, h);
}

int kv_bloom_add_check(kv_bloom *f, const void *key, size_t len)
{
    if (!f)
        return 1;
    return kv_bloom_add_check_hash(f, hash_key(f, key, len));
}

/* Adds h and counts it: by the owner's path when this thread owns the
 * key's region, else by the shared one. */
static inline void add_counted(kv_bloom *f, uint64_t h)
{
    struct region *r = region_of(f, h);
    if (owner_add(f, r, h))
        return;
    uintptr_t o = atomic_load_explicit(&r->owner, memory_order_acquire);
    if (__builtin_expect(o != OWNER_SHARED, 0) && kv_bloom_settle_owner(r, o) != OWNER_SHARED &&
        owner_add(f, r, h))
        return;
    f->add(f, h);
}


void kv_bloom_add_hashes_owned(kv_bloom *f, const uint64_t *hashes, size_t n)
{
    if (!f || !hashes)
        return;
    if (f->map) { /* other processes may add: never plain stores */
        for (size_t i = 0; i < n; i++)
            f->add(f, hashes[i]);
        return;
    }
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

void kv_bloom_prefetch_hash(const kv_bloom *f, uint64_t h)
{
    if (!f)
        return;
    if (f->layout == KV_BLOOM_BLOCKED)
        prefetch(block_of(f, h));
    else
        prefetch_probes(f, h);
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

size_t kv_bloom_bytes(const kv_bloom *f)
{
    return f ? (size_t)f->nwords * sizeof *f->words : 0;
}

int kv_bloom_uses_avx512(const kv_bloom *f)
{
    return f && f->simd;
}

/* a + b, or 2^64 - 1 when that does not fit. */
static inline uint64_t add_sat(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* The sum of every counter, saturating at 2^64 - 1: a count that reached
 * the top (kv_bloom_union's, or a decoded one near it) stays there rather
 * than wrap to a small number. */
uint64_t kv_bloom_keys_added(const kv_bloom *f)
{
    uint64_t keys = add_sat(atomic_load_explicit(&f->base_keys, memory_order_relaxed),
                            kv_tally_sum(&f->adds[0].adds, sizeof f->adds[0]));
    if (f->map_keys)
        for (unsigned i = 0; i < KV_BLOOM_SHM_STRIPES; i++)
            keys = add_sat(keys, atomic_load_explicit(&f->map_keys[i * KV_BLOOM_SHM_STRIPE_WORDS],
                                                      memory_order_relaxed));
    for (unsigned i = 0; i < f->nregions; i++)
        keys = add_sat(keys, atomic_load_explicit(&f->regions[i].adds, memory_order_relaxed));
    _Atomic uint64_t *locks = atomic_load_explicit(&f->locks, memory_order_acquire);
    if (locks && locks != &kv_bloom_no_locks)
        for (uint64_t i = 0; i <= f->lock_mask; i++)
            keys = add_sat(keys, atomic_load_explicit(&locks[i], memory_order_relaxed) >> 1);
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
    out->keys_added = kv_bloom_keys_added(f);
    out->bits_set = set;
    out->fill = (double)set / (double)f->bits;
    out->estimated_keys = -((double)f->bits / f->k) * log1p(-out->fill);
    out->expected_fpr = kv_bloom_expected_fpr(f->layout, f->bits, out->keys_added, f->k);
    out->bytes = kv_bloom_bytes(f);
}

