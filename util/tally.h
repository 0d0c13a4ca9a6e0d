/* tally.h - event counters that many threads bump at once, each without a
 * locked instruction.
 *
 * An atomic add is a locked read-modify-write, many times the cost of a
 * plain add and a full barrier besides, and a Get that misses counts a
 * dozen events (gets, tables probed, filter answers, per database and per
 * table); a Bloom filter counts every key added. A
 * counter set is therefore kept as KV_TALLY_STRIPES + 1 copies ("stripes"),
 * each on its own cache lines. The first time a thread counts, it takes a
 * stripe of its own and keeps it until it exits; only it writes there, so
 * an increment is a plain load and store (relaxed atomics: exact, and
 * race-free for the sanitizers). Threads beyond KV_TALLY_STRIPES share the
 * last stripe with atomic adds. A reader of a counter sums its stripes, as
 * exact as any relaxed atomic counter.
 *
 * Part of util/, the bottom layer: used by filter/, sstable/ and kv/; not
 * installed. */
#ifndef KV_TALLY_H
#define KV_TALLY_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define KV_TALLY_STRIPES 16

#if defined(__GNUC__)
/* The slot is read on every count: initial-exec reaches it with one
 * %fs-relative load, where the shared library's default model would call
 * __tls_get_addr. */
#define KV_TALLY_TLS _Thread_local __attribute__((tls_model("initial-exec")))
#else
#define KV_TALLY_TLS _Thread_local
#endif

/* This thread's stripe, or -1 before its first count. */
extern KV_TALLY_TLS int kv_tally_my_slot;

/* Takes a free stripe for this thread (returned at thread exit), or the
 * shared one, KV_TALLY_STRIPES, when all are taken. Cannot fail. */
unsigned kv_tally_claim(void);

/* The stripe this thread counts in. */
static inline unsigned kv_tally_slot(void)
{
    int s = kv_tally_my_slot;
    return s >= 0 ? (unsigned)s : kv_tally_claim();
}

/* Adds n to counter c of stripe `slot`, which must be kv_tally_slot(). */
static inline void kv_tally_add(_Atomic uint64_t *c, unsigned slot, uint64_t n)
{
    if (slot < KV_TALLY_STRIPES)
        atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                              memory_order_relaxed);
    else
        atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

/* The sum of a counter over all stripes: `first` is the counter in stripe
 * 0, `stride` the size of a stripe. */
static inline uint64_t kv_tally_sum(const void *first, size_t stride)
{
    uint64_t sum = 0;
    for (size_t i = 0; i <= KV_TALLY_STRIPES; i++) {
        const char *at = (const char *)first + i * stride;
        sum += atomic_load_explicit((_Atomic uint64_t *)(uintptr_t)at, memory_order_relaxed);
    }
    return sum;
}

/* An array of KV_TALLY_STRIPES + 1 stripes of `size` bytes (a multiple of
 * 64), zeroed and 64-byte aligned, freed with free(); NULL when out of
 * memory. */
void *kv_tally_new(size_t size);

#endif /* KV_TALLY_H */
