/* counting_bloom.h - a counting Bloom filter: a Bloom filter that can also
 * forget a key (Fan, Cao, Almeida, Broder 2000).
 *
 * Each slot is a 4-bit counter instead of a bit. Adding a key increments its
 * k counters, removing it decrements them, and a key may be in the filter
 * when all of its counters are nonzero. A key is hashed once, with XXH3-64
 * and the filter's seed, as in <kv/bloom.h>.
 *
 * Layout: blocked. The counters are grouped in 64-byte blocks (one cache
 * line) of 128 counters; a key's block is chosen by its hash and all of its
 * k counters lie in that block, so an add, a remove or a query touches one
 * cache line. A key's k positions are distinct counters (two probes that
 * land on the same counter count it once).
 *
 * Saturation: a counter stops at 15. An add leaves a counter at 15 where it
 * is, and a remove never decrements a counter at 15, since it no longer
 * knows how many keys share it. Such a slot stays set for good: it can only
 * raise the false-positive rate a little, never cause a false negative. At
 * the sizes new() picks a counter reaches 15 with probability below 1e-12
 * unless one key is added many times over (each add of the same key counts
 * again: add a key 20 times and 20 removes leave it found, as its counters
 * saturated).
 *
 * False negatives: none, as long as only keys that were added are removed
 * (each no more often than it was added). Removing a key that was never
 * added but happens to be a false positive decrements other keys' counters
 * and can make them false negatives: that is in the nature of counting
 * filters. kv_counting_bloom_remove refuses a key with any counter at zero
 * (KV_NOTFOUND, nothing changes): such a key cannot be in the filter.
 *
 * FPR: kv_counting_bloom_new picks the number of blocks and k so that the
 * expected false-positive rate with expected_keys keys is at most fpr. The
 * expectation is exact for uniform hashes: the keys of a block follow a
 * Poisson law, and for j keys in a block the chance that a query's k
 * counters are all set is computed from the distribution of the number of
 * distinct counters the j keys' j*k probes set (kv_counting_bloom_expected_fpr).
 * Memory: about 4 times that of a plain Bloom filter for the same FPR, a
 * little more because 128-counter blocks fill less evenly than 512-bit ones
 * (1%: 44 bits per key; 0.1%: 76 bits per key).
 *
 * Concurrency: add, remove and may_contain may run from any number of
 * threads at once on one filter. Each counter update is an atomic
 * compare-and-swap of the 64-bit word holding it (16 counters), and a
 * query reads words with atomic loads and takes no lock. Every add or
 * remove that returned before a query started is seen by it. An add or a
 * remove is not one atomic step over its k counters: a query that runs
 * concurrently with the add of the same key may answer either way, and
 * remove's check that every counter is nonzero and its decrements are two
 * steps (so two threads that remove the same key, added once, both succeed:
 * remove each added key once). Encoding concurrently with adds encodes each
 * word as it was at some moment. Freeing a filter while another thread uses
 * it is the caller's bug.
 *
 * Errors: every call that returns an error sets kv_error_text to the call
 * and the reason. The encoding is documented byte by byte in
 * doc/filter_format.md ("Counting filter"). */
#ifndef KV_COUNTING_BLOOM_H
#define KV_COUNTING_BLOOM_H

#include <stddef.h>
#include <stdint.h>

#include <kv/status.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kv_counting_bloom kv_counting_bloom;

/* k, the counters per key, is within [1, KV_COUNTING_BLOOM_MAX_K]. */
#define KV_COUNTING_BLOOM_MAX_K 16u
/* Largest counter array: 2^31 blocks of 64 bytes (128 GiB). */
#define KV_COUNTING_BLOOM_MAX_BLOCKS ((uint64_t)1 << 31)

/* Creates an empty filter for `expected_keys` keys (0 counts as 1) at an
 * expected false-positive rate of at most `fpr`, in (0, 1). Memory:
 * 64 bytes per block plus a small header (kv_counting_bloom_bytes).
 * KV_EINVAL: NULL out, fpr not in (0, 1), or a filter above
 * KV_COUNTING_BLOOM_MAX_BLOCKS would be needed (fpr below about 1e-18 for
 * a million keys, 1e-24 for one; or
 * billions of keys). KV_ENOMEM: allocation failed. On error *out is NULL. */
KV_API int kv_counting_bloom_new(uint64_t expected_keys, double fpr, uint64_t seed,
                                 kv_counting_bloom **out);

/* Frees the filter. NULL is a no-op. */
KV_API void kv_counting_bloom_free(kv_counting_bloom *f);

/* Adds a key: increments each of its k counters that is below 15. `key`
 * may be NULL when len is 0. KV_OK; KV_EINVAL when f is NULL, or key is
 * NULL with len > 0 (nothing changes). Cannot fail otherwise. */
KV_API int kv_counting_bloom_add(kv_counting_bloom *f, const void *key, size_t len);

/* Removes a key once: KV_OK after decrementing each of its counters that
 * is below 15; KV_NOTFOUND when one of its counters is zero (the key cannot
 * be in the filter; nothing changes); KV_EINVAL as for add. Remove only
 * keys you added (see "False negatives" above). */
KV_API int kv_counting_bloom_remove(kv_counting_bloom *f, const void *key, size_t len);

/* 1 when the key may be in the filter (all k counters nonzero), 0 when it
 * is certainly not. 0 for a NULL f, or a NULL key with len > 0. Cannot
 * fail. */
KV_API int kv_counting_bloom_may_contain(const kv_counting_bloom *f, const void *key, size_t len);

/* Keys in the filter: adds minus successful removes (as decoded, plus
 * those since); 0 if that is negative (keys never added were removed).
 * 0 for NULL. Cannot fail. */
KV_API uint64_t kv_counting_bloom_count(const kv_counting_bloom *f);

/* Bytes of the counter array. 0 for NULL. Cannot fail. */
KV_API size_t kv_counting_bloom_bytes(const kv_counting_bloom *f);

/* The expected false-positive rate with kv_counting_bloom_count keys in
 * the filter (see "FPR" above); 1.0 for NULL. Takes bounded time (above
 * 200 keys per block it uses the Poisson mean alone). Cannot fail. */
KV_API double kv_counting_bloom_expected_fpr(const kv_counting_bloom *f);

/* Serialises the filter into a new buffer that the caller frees with
 * kv_free. KV_EINVAL on NULL arguments; KV_ENOMEM. */
KV_API int kv_counting_bloom_encode(const kv_counting_bloom *f, void **buf, size_t *len);

/* Rebuilds a filter from kv_counting_bloom_encode's bytes. Every field is
 * checked before the counters are read, and the checksum covers every
 * byte: any truncated, altered or foreign buffer gives KV_ECORRUPT.
 * KV_EINVAL on NULL arguments; KV_ENOMEM. On error *out is NULL. */
KV_API int kv_counting_bloom_decode(const void *buf, size_t len, kv_counting_bloom **out);

#ifdef __cplusplus
}
#endif

#endif /* KV_COUNTING_BLOOM_H */
