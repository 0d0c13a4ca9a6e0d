/* rotating_bloom.h - a Bloom filter over a sliding window of keys: the
 * last `generations` generations, each of up to keys_per_generation keys
 * (or each one tick of the caller's clock).
 *
 * The filter is `generations` blocked Bloom filters of the same size (the
 * layout of <kv/bloom.h>: 512-bit blocks, all of a key's probes in one
 * cache line). Adds go to the current generation. When it holds
 * keys_per_generation keys, the next add first starts a new generation by
 * itself: the oldest generation is cleared and becomes the current one.
 * kv_rotating_bloom_rotate does the same at once, for windows in time (the
 * caller calls it from a timer: one generation per minute, say). A query
 * asks every generation (their lines are prefetched together, and a key's
 * block has the same index in each), so:
 *   - a key added within the last `generations` generations (the current
 *     one included) is always found;
 *   - a key added before that is gone with its generation: it "fades" to
 *     the false-positive rate, as any key never added;
 *   - the expected false-positive rate of the whole window is at most
 *     fpr: each generation is sized for keys_per_generation keys at a rate
 *     p_g with 1 - (1 - p_g)^generations = fpr, and a key is a false
 *     positive of the window only if it is one of some generation. The
 *     sizing uses the blocked layout's exact expected FPR, which counts a
 *     query's probes that coincide (kv_bloom_expected_fpr's closed form is
 *     1-4% lower at these k).
 * A window that the caller rotates by time still rotates early when a
 * generation fills, so no generation ever holds more than
 * keys_per_generation keys and the bound holds whichever rotates first.
 *
 * Memory: generations times a blocked Bloom filter of keys_per_generation
 * keys at p_g (kv_rotating_bloom_bytes); p_g ~ fpr / generations, so about
 * 1.44 log2(generations) bits per key more than one filter for the window.
 *
 * Concurrency: add, rotate and may_contain may run from any number of
 * threads at once. Bits are set with atomic ORs and read with atomic
 * loads; queries take no lock. Rotations (by rotate, or by an add that
 * found the current generation full) are serialized by a mutex: a rotation
 * clears the oldest generation, then publishes it as the current one with
 * a release store of the rotation count, which adds read with an acquire
 * load. An add that overlaps a rotation lands in the generation that was
 * current when it began, which stays in the window for `generations` - 1
 * more rotations; every add that returned before a query started is seen by
 * it until its generation is cleared. A query that overlaps the clearing of
 * the oldest generation may or may not see that generation's keys (they are
 * leaving the window). Freeing a filter while another thread uses it is the
 * caller's bug.
 *
 * Errors: every call that returns an error sets kv_error_text. The
 * encoding is documented byte by byte in doc/filter_format.md ("Rotating
 * filter"). */
#ifndef KV_ROTATING_BLOOM_H
#define KV_ROTATING_BLOOM_H

#include <stddef.h>
#include <stdint.h>

#include <kv/status.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kv_rotating_bloom kv_rotating_bloom;

/* generations is within [1, KV_ROTATING_BLOOM_MAX_GENERATIONS]. */
#define KV_ROTATING_BLOOM_MAX_GENERATIONS 64u

/* Creates an empty filter of `generations` generations of up to
 * `keys_per_generation` keys (>= 1) each, whose false-positive rate over
 * the whole window is at most `fpr`, in (0, 1). All generations are
 * allocated now. KV_EINVAL: NULL out, keys_per_generation 0, generations
 * out of range, fpr not in (0, 1), or more than KV_BLOOM_MAX_BITS bits in
 * all. KV_ENOMEM: allocation failed. On error *out is NULL. */
KV_API int kv_rotating_bloom_new(uint64_t keys_per_generation, unsigned generations, double fpr,
                                 uint64_t seed, kv_rotating_bloom **out);

/* Frees the filter. NULL is a no-op. */
KV_API void kv_rotating_bloom_free(kv_rotating_bloom *f);

/* Adds a key to the current generation, first starting a new one (as
 * kv_rotating_bloom_rotate) when the current one holds keys_per_generation
 * keys. `key` may be NULL when len is 0. KV_OK; KV_EINVAL when f is NULL,
 * or key is NULL with len > 0. Cannot fail otherwise (nothing is
 * allocated). */
KV_API int kv_rotating_bloom_add(kv_rotating_bloom *f, const void *key, size_t len);

/* Starts a new generation now: clears the oldest one (its keys leave the
 * window) and makes it the current one. O(bits of one generation).
 * KV_OK; KV_EINVAL when f is NULL. */
KV_API int kv_rotating_bloom_rotate(kv_rotating_bloom *f);

/* 1 when the key may have been added within the window, 0 when it
 * certainly was not. 0 for a NULL f, or a NULL key with len > 0. Cannot
 * fail. */
KV_API int kv_rotating_bloom_may_contain(const kv_rotating_bloom *f, const void *key, size_t len);

/* Keys in the window: the sum of the generations' counts. 0 for NULL.
 * Cannot fail. */
KV_API uint64_t kv_rotating_bloom_count(const kv_rotating_bloom *f);

/* Rotations so far (by rotate or by add; as decoded, plus those since).
 * The current generation is this count mod generations. A count of
 * 2^64 - 1 (only a decoded filter can have one) is followed by
 * (2^64 - 1) mod generations + 1, not by 0, so that the count keeps
 * naming the right generation. 0 for NULL. Cannot fail. */
KV_API uint64_t kv_rotating_bloom_rotations(const kv_rotating_bloom *f);

/* Bytes of the generations' bit arrays. 0 for NULL. Cannot fail. */
KV_API size_t kv_rotating_bloom_bytes(const kv_rotating_bloom *f);

/* The expected false-positive rate of the window with the keys it holds
 * now: 1 - prod_g (1 - e_g), e_g generation g's exact expected FPR for
 * its keys (see above). At most fpr when every generation is full.
 * 1.0 for NULL. Cannot fail. */
KV_API double kv_rotating_bloom_expected_fpr(const kv_rotating_bloom *f);

/* Serialises the filter into a new buffer that the caller frees with
 * kv_free. KV_EINVAL on NULL arguments; KV_ENOMEM. */
KV_API int kv_rotating_bloom_encode(const kv_rotating_bloom *f, void **buf, size_t *len);

/* Rebuilds a filter from kv_rotating_bloom_encode's bytes. Every field is
 * checked before the bits are read, and the checksum covers every byte:
 * any truncated, altered or foreign buffer gives KV_ECORRUPT. KV_EINVAL on
 * NULL arguments; KV_ENOMEM. On error *out is NULL. */
KV_API int kv_rotating_bloom_decode(const void *buf, size_t len, kv_rotating_bloom **out);

#ifdef __cplusplus
}
#endif

#endif /* KV_ROTATING_BLOOM_H */
