/* scalable_bloom.h - a Bloom filter for an unknown number of keys
 * (Almeida, Baquero, Preguica, Hutchison 2007, "Scalable Bloom Filters").
 *
 * The filter is a series of stages, each a blocked Bloom filter (<kv/bloom.h>)
 * larger and tighter than the one before: stage i holds up to
 * initial_keys * 2^i keys (growth s = 2) at a false-positive rate of
 * fpr * (1 - r) * r^i, with tightening ratio r = 0.9. Adds go to the newest
 * stage until it holds its capacity; the next add starts a new stage. A
 * query asks every stage, newest first. A key is in the filter if any stage
 * says so, so the filter's false-positive rate is at most the sum of the
 * stages' rates, fpr (1 - r)(1 + r + r^2 + ...) < fpr, however many keys
 * arrive. Each stage is sized by the blocked layout's exact expected FPR
 * (which counts a query's probes that coincide; kv_bloom_expected_fpr's
 * closed form is 1-4% lower), so the guarantee on the expected FPR holds at
 * every size (tests/unit/check_filter_kinds.c
 * shows it up to 1000 times initial_keys). No key added is ever missed.
 *
 * Why r = 0.9 (and s = 2): stage i needs about 1.44 log2(1 / fpr_i) bits per
 * key, and the newest stages hold most keys. A small r makes later stages
 * dearer (each stage log2(1/r) / ln 2 bits per key more: 0.22 at 0.9, 0.46
 * at 0.8); a large r makes the first ones dearer (fpr (1 - r) is fpr / 10 at
 * 0.9, fpr / 5 at 0.8: 1 bit per key more). Over a growth of 1000x (ten
 * stages) the ideal filter needs 16.1 bits per key at r = 0.9 against 16.7
 * at 0.8 and 0.95 (fpr 1%), and the paper, too, finds 0.8..0.9 best for
 * s = 2. s = 2 keeps the number of stages, and so the cost of a query,
 * logarithmic in the growth.
 *
 * Memory: about 1.44 log2(1 / fpr_i) bits per key in stage i, plus the
 * blocked layout's few percent; 1,000,000 keys from initial_keys 1000
 * (10 stages) take 18.2 bits per key at fpr 1%, 25.3 at 0.1%
 * (kv_scalable_bloom_bytes). A key is hashed once (XXH3-64 with the seed);
 * each stage takes a remix of that hash, so that the stages' answers are
 * independent.
 *
 * Concurrency: add and may_contain may run from any number of threads at
 * once. The stages are published in a fixed array whose length is read
 * with an acquire load, so queries take no lock; an add claims a place in
 * the newest stage with one atomic increment and adds with <kv/bloom.h>'s
 * concurrent add. Only the add that finds the newest stage full takes a
 * mutex to start the next stage (once per stage). Every add that returned
 * before a query started is seen by it. Freeing a filter while another
 * thread uses it is the caller's bug.
 *
 * Errors: every call that returns an error sets kv_error_text. The
 * encoding is documented byte by byte in doc/filter_format.md ("Scalable
 * filter"). */
#ifndef KV_SCALABLE_BLOOM_H
#define KV_SCALABLE_BLOOM_H

#include <stddef.h>
#include <stdint.h>

#include <kv/status.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kv_scalable_bloom kv_scalable_bloom;

/* A filter has at most this many stages: 2^48 - 1 times initial_keys keys
 * (the 2^40-bit limit of one stage, KV_BLOOM_MAX_BITS, comes first unless
 * initial_keys is small). */
#define KV_SCALABLE_BLOOM_MAX_STAGES 48u
/* Growth s and tightening ratio r (see above). */
#define KV_SCALABLE_BLOOM_GROWTH 2u
#define KV_SCALABLE_BLOOM_RATIO 0.9

/* Creates a filter whose first stage holds `initial_keys` keys (>= 1) at
 * a total false-positive rate below `fpr`, in (0, 1), at any size. The
 * first stage is allocated now. KV_EINVAL: NULL out, initial_keys 0, fpr
 * not in (0, 1), or a first stage larger than KV_BLOOM_MAX_BITS.
 * KV_ENOMEM: allocation failed. On error *out is NULL. */
KV_API int kv_scalable_bloom_new(uint64_t initial_keys, double fpr, uint64_t seed,
                                 kv_scalable_bloom **out);

/* Frees the filter and its stages. NULL is a no-op. */
KV_API void kv_scalable_bloom_free(kv_scalable_bloom *f);

/* Adds a key; `key` may be NULL when len is 0. KV_OK. KV_ENOMEM when the
 * filter must grow and cannot: the next stage could not be allocated, it
 * would exceed KV_BLOOM_MAX_BITS, or the filter already has
 * KV_SCALABLE_BLOOM_MAX_STAGES stages; the key was not added, the filter is
 * unchanged and still answers for every key added before. KV_EINVAL when f
 * is NULL, or key is NULL with len > 0. */
KV_API int kv_scalable_bloom_add(kv_scalable_bloom *f, const void *key, size_t len);

/* 1 when the key may be in the filter, 0 when it certainly is not. 0 for a
 * NULL f, or a NULL key with len > 0. Cannot fail. */
KV_API int kv_scalable_bloom_may_contain(const kv_scalable_bloom *f, const void *key, size_t len);

/* Keys added (as decoded, plus those since). 0 for NULL. Cannot fail. */
KV_API uint64_t kv_scalable_bloom_count(const kv_scalable_bloom *f);

/* Stages so far (>= 1); 0 for NULL. Cannot fail. */
KV_API unsigned kv_scalable_bloom_stages(const kv_scalable_bloom *f);

/* Bytes of the stages' bit arrays. 0 for NULL. Cannot fail. */
KV_API size_t kv_scalable_bloom_bytes(const kv_scalable_bloom *f);

/* The expected false-positive rate with the keys the filter holds now:
 * 1 - prod_i (1 - e_i), e_i stage i's exact expected FPR for its keys
 * (see above). Always below fpr. 1.0 for NULL. Cannot fail. */
KV_API double kv_scalable_bloom_expected_fpr(const kv_scalable_bloom *f);

/* Serialises the filter into a new buffer that the caller frees with
 * kv_free. KV_EINVAL on NULL arguments; KV_ENOMEM. */
KV_API int kv_scalable_bloom_encode(const kv_scalable_bloom *f, void **buf, size_t *len);

/* Rebuilds a filter from kv_scalable_bloom_encode's bytes. Every field is
 * checked before it is used, and the checksum covers every byte: any
 * truncated, altered or foreign buffer gives KV_ECORRUPT. KV_EINVAL on
 * NULL arguments; KV_ENOMEM. On error *out is NULL. */
KV_API int kv_scalable_bloom_decode(const void *buf, size_t len, kv_scalable_bloom **out);

#ifdef __cplusplus
}
#endif

#endif /* KV_SCALABLE_BLOOM_H */
