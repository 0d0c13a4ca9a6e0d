/* bloom_impl.h - the filter object and the pieces of it that the hot paths
 * of filter/ inline: the struct, probe placement by fastrange, the block
 * locks of shared blocked adds and the owner's side of the lone-writer
 * protocol (bloom_shared.c). Every function here that an add or a query
 * runs per key is static inline, so that splitting filter/ into files costs
 * the hot paths no call.
 *
 * Private to filter/. */
#ifndef KV_BLOOM_IMPL_H
#define KV_BLOOM_IMPL_H

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <kv/bloom.h>

#include "bits.h"
#include "bloom_block.h"
#include "util/hash.h"
#include "util/siphash.h"
#include "util/tally.h"

#define BLOCK_BITS KV_BLOOM_BLOCK_BITS
#define BLOCK_WORDS KV_BLOOM_BLOCK_WORDS
#define CACHE_LINE 64u
#define MAX_LOCKS 1024u /* lock words of a filter at most (8 KiB): see block_lock */
#define MAX_REGIONS 64u /* regions of a filter at most (4 KiB): see bloom_shared.c */

/* Rare paths kept out of line, so that the hot ones around them make no
 * call (and save no registers for one). Those defined in this header are
 * static, not inline (which noinline contradicts), and `unused` spares the
 * files that do not call them a warning; being static, they stay in the
 * file of their caller, where the compiler knows which registers they use. */
#if defined(__GNUC__)
#define KV_COLD __attribute__((cold, noinline, unused))
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
 * lock words ("block locks" below), block i locked by word i &
 * lock_mask, for good; or &kv_bloom_no_locks if that table could not be allocated,
 * and then every shared add of this filter uses atomic ORs. regions: see
 * "lone writers" in bloom_shared.c; block i lies in region i >> region_shift, and a
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
    _Atomic uint64_t base_keys; /* keys counted before this process (from decode), or
                                 * set by kv_bloom_intersect / kv_bloom_clear */
    /* A filter in a shared file (kv_bloom_open_shared, bloom_file.c): the
     * file's mapping, which kv_bloom_free unmaps, and the key counters in
     * its header (KV_BLOOM_SHM_STRIPES of them, one per cache line), which
     * every process adds to. NULL for a filter in private memory. */
    void *map;
    size_t map_len;
    _Atomic uint64_t *map_keys;
    unsigned map_stripe; /* this process's first stripe (from its pid) */
    /* A keyed filter hashes keys with SipHash-2-4 under `sip` instead of
     * XXH3 with `seed`; its seed then holds the secret's check value
     * (kv_bloom_secret_check), which is what its encoding records. */
    bool keyed;
    kv_sipkey sip;
};

/* Values of region.owner other than an owner's token ("lone writers"). */
#define OWNER_NONE ((uintptr_t)0)     /* no add yet */
#define OWNER_SHARED ((uintptr_t)1)   /* every add takes the shared path */
#define OWNER_REVOKING ((uintptr_t)2) /* a revoker waits for the owner's add */

/* Symbols shared by the files of filter/ alone: hidden from the library's
 * users, and reached without the GOT. */
#if defined(__GNUC__)
#define KV_BLOOM_HIDDEN __attribute__((visibility("hidden")))
#else
#define KV_BLOOM_HIDDEN
#endif

/* Marks a filter whose lock table could not be allocated (bloom_shared.c). */
extern KV_BLOOM_HIDDEN _Atomic uint64_t kv_bloom_no_locks;

/* ---- small arithmetic helpers --------------------------------------------- */

/* Prefetch with the compiler's builtin: (address, 1 to write, locality). */
#if defined(__GNUC__)
#define KV_PREFETCH(p, rw, locality) __builtin_prefetch((p), (rw), (locality))
#else
#define KV_PREFETCH(p, rw, locality) ((void)(p))
#endif


/* ---- block locks --------------------------------------------------------------
 * Shared blocked adds: a thread ORs a key's 512-bit mask into its block
 * while it holds the block's lock, a 64-bit word in a small table beside
 * the filter (at most MAX_LOCKS words; blocks share them). That is one
 * locked instruction per key, where an atomic OR per word the key touches
 * would take about five. Queries never lock. Bits 1..63 of a lock word
 * count the keys added under it, so the filter's exact key count costs the
 * add nothing more: the holder bumps it as it unlocks. */
/* The lock word of `block`, or NULL when the filter has no lock table (and
 * adds use atomic ORs). The table is allocated by the first add that needs
 * it; every adder sees the same answer: the table, or &kv_bloom_no_locks for good. */
static KV_COLD _Atomic uint64_t *first_lock_table(kv_bloom *f)
{
    _Atomic uint64_t *locks = NULL;
    _Atomic uint64_t *mine = calloc((size_t)f->lock_mask + 1, sizeof *mine);
    _Atomic uint64_t *want = mine ? mine : &kv_bloom_no_locks;
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
    return locks == &kv_bloom_no_locks ? NULL : &locks[block & f->lock_mask];
}

/* One step of a wait for another thread: a pause for the first 1024 steps
 * (the other thread is mid-add, a dozen instructions), then the CPU is
 * yielded (it was switched out there). */
static inline void backoff(unsigned spins)
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

/* ---- lone writers: the owner's side (the protocol: bloom_shared.c) ------------ */

/* Its address names this thread as a region's owner; no two live threads
 * share it, and none is OWNER_NONE, OWNER_SHARED or OWNER_REVOKING. */
extern KV_BLOOM_HIDDEN KV_TALLY_TLS char kv_bloom_self_token;

/* The region of f that a key with hash h adds to. */
static inline struct region *region_of(const kv_bloom *f, uint64_t h)
{
    return &f->regions[kv_fastrange64(h, f->nblocks) >> f->region_shift];
}

/* The owner's add, in two halves around the plain stores: owner_begin
 * announces the add and checks the ownership (false, having announced
 * nothing, when this thread is not the region's owner); owner_end counts
 * the key in the region's adds, which only its owner writes, and ends the
 * announcement. */
static inline bool owner_begin(struct region *r)
{
    uintptr_t me = (uintptr_t)&kv_bloom_self_token;
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
    return true;
}

static inline void owner_end(struct region *r)
{
    atomic_store_explicit(&r->adds, atomic_load_explicit(&r->adds, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    atomic_store_explicit(&r->busy, 0, memory_order_release);
}

/* The owner's add of h with plain stores; false, having done nothing, when
 * this thread is not the region's owner. */
static inline bool owner_add(kv_bloom *f, struct region *r, uint64_t h)
{
    if (!owner_begin(r))
        return false;
    f->add_owned(f, h);
    owner_end(r);
    return true;
}

/* ---- between the files of filter/ ---------------------------------------------- */

static inline bool kv_bloom_layout_ok(kv_bloom_layout layout)
{
    return layout == KV_BLOOM_BLOCKED || layout == KV_BLOOM_CLASSIC;
}

/* bloom.c: allocates an empty filter of exactly `bits` bits (a multiple of
 * 512 for the blocked layout) and `k` probes. */
KV_BLOOM_HIDDEN int kv_bloom_alloc(kv_bloom_layout layout, uint64_t bits, unsigned k,
                                   uint64_t seed, kv_bloom **out);

/* bloom_size.c: m (a multiple of 512) and k of the blocked filter that
 * kv_bloom_new_fpr builds for n keys at target FPR p: the smallest m on its
 * ~1.5% growth steps whose expected FPR at n keys, with the best k, is at
 * most p. KV_EINVAL as kv_bloom_new_fpr (p outside (0, 1), more than 1000
 * bits per key, or m above KV_BLOOM_MAX_BITS); then *m_out, *k_out are
 * untouched. */
KV_BLOOM_HIDDEN int kv_bloom_blocked_size_fpr(uint64_t n, double p, uint64_t *m_out,
                                              unsigned *k_out);

/* bloom_size.c: the blocked layout's exact expected FPR for n keys in m
 * bits with k probes (uniform hashes), which counts a query's probes that
 * coincide; kv_bloom_expected_fpr's closed form is 1-4% lower at k = 7..12.
 * Above 200 keys per block it returns kv_bloom_expected_fpr's value.
 * Thread-safe; the first call computes a table (~50 ms). Cannot fail. */
KV_BLOOM_HIDDEN double kv_bloom_blocked_exact_fpr(uint64_t m_bits, uint64_t n_keys, unsigned k);

/* bloom_size.c: the fewest bits (whole blocks), over k in [1, 30], whose
 * exact expected FPR (above) for n keys is at most p, and that k.
 * KV_EINVAL when p is not in (0, 1) or no filter of at most
 * KV_BLOOM_MAX_BITS gets there; then *m_out, *k_out are untouched. */
KV_BLOOM_HIDDEN int kv_bloom_blocked_size_exact(uint64_t n, double p, uint64_t *m_out,
                                                unsigned *k_out);

/* bloom.c: the keys added to f, as kv_bloom_stats reports them. */
KV_BLOOM_HIDDEN uint64_t kv_bloom_keys_added(const kv_bloom *f);

/* bloom.c: counts n more keys added to f (kv_bloom_union), atomically. */
KV_BLOOM_HIDDEN void kv_bloom_count_keys(kv_bloom *f, uint64_t n);

/* bloom.c: makes f's key count n (kv_bloom_intersect, kv_bloom_clear).
 * No other thread may add to f meanwhile (in a shared file, adds of other
 * processes at that moment may or may not be counted). */
KV_BLOOM_HIDDEN void kv_bloom_reset_keys(kv_bloom *f, uint64_t n);

/* bloom.c: a filter over a shared file's mapping (bloom_file.c): `words`
 * (nwords of them, 64-byte aligned) and `keys` (the header's counter
 * stripes) lie in `map`, which kv_bloom_free unmaps; every add is an atomic
 * OR counted in the file. KV_ENOMEM, and then the caller unmaps. */
KV_BLOOM_HIDDEN int kv_bloom_alloc_mapped(kv_bloom_layout layout, uint64_t bits, unsigned k,
                                          uint64_t seed, void *map, size_t map_len,
                                          _Atomic uint64_t *words, _Atomic uint64_t *keys,
                                          kv_bloom **out);

/* bloom_size.c: the bits m and probes k kv_bloom_new gives a filter of
 * `expected_keys` keys at `bits_per_key`; KV_EINVAL as kv_bloom_new. */
KV_BLOOM_HIDDEN int kv_bloom_size(kv_bloom_layout layout, uint64_t expected_keys,
                                  double bits_per_key, uint64_t *m, unsigned *k);
/* Makes a new, empty filter keyed with `secret` (bloom.c): its hash
 * becomes SipHash-2-4 under the secret, its seed the secret's check. */
KV_BLOOM_HIDDEN void kv_bloom_make_keyed(kv_bloom *f, const uint8_t secret[KV_BLOOM_SECRET_BYTES]);

/* bloom_shared.c: sizes f's lock table (allocated by the first shared add)
 * and allocates its regions, for f's layout and nblocks. KV_OK or
 * KV_ENOMEM, and then nothing to undo. */
KV_BLOOM_HIDDEN int kv_bloom_shared_init(kv_bloom *f);

/* bloom_shared.c: frees what kv_bloom_shared_init and the adds allocated. */
KV_BLOOM_HIDDEN void kv_bloom_shared_free(kv_bloom *f);

/* bloom_shared.c: settles who may add to region r, for a thread that found
 * it not its own (its owner word was o). Returns this thread's token when
 * it now owns the region, else OWNER_SHARED. */
KV_BLOOM_HIDDEN KV_COLD uintptr_t kv_bloom_settle_owner(struct region *r, uintptr_t o);

#endif /* KV_BLOOM_IMPL_H */
