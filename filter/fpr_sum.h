/* fpr_sum.h - the expected false-positive rate of a filter of blocks, as a
 * Poisson sum, and the size search built on it: what the blocked Bloom
 * filter's exact sizing (bloom_size.c) and the counting filter
 * (counting_bloom.c) share. Each filter gives its own per-block figure;
 * the sum and the search are written once, here and in bloom_size.c.
 *
 * Private to filter/. */
#ifndef KV_FILTER_FPR_SUM_H
#define KV_FILTER_FPR_SUM_H

#include <stdint.h>

#include "bloom_impl.h" /* KV_BLOOM_HIDDEN */

/* Keys per block the sums go up to at most: past lambda + 12 sqrt(lambda)
 * + 40 keys, for lambda <= KV_FPR_SUM_MAX_LAMBDA, the Poisson mass left is
 * below 1e-20. A table of per-block figures needs this many entries. */
#define KV_FPR_SUM_MAX_NJ 448
#define KV_FPR_SUM_MAX_LAMBDA 200.0

/* sum over j of Pois(j; lambda) * g[j], for j below lambda + 12 sqrt(lambda)
 * + 40, capped at 1: the FPR of a filter whose blocks hold Poisson(lambda)
 * keys each, where g[j] is the FPR of a block of j keys. lambda in
 * (0, KV_FPR_SUM_MAX_LAMBDA]; g has KV_FPR_SUM_MAX_NJ entries. Cannot fail. */
KV_BLOOM_HIDDEN double kv_fpr_poisson_sum(const double *g, double lambda);

/* The expected FPR of `blocks` blocks holding n keys with k probes each. */
typedef double kv_fpr_blocks_fn(uint64_t blocks, uint64_t n, unsigned k);

/* The fewest blocks, and the k for them, whose fpr(blocks, n, k) is at most
 * p, over k in [1, max_k] and blocks in [1, max_blocks]: for each k the
 * FPR falls as blocks grow, so a binary search finds its fewest blocks; the
 * k needing fewest wins (the smaller k on a tie: fewer probes per key).
 * KV_EINVAL when no k gets there; then *blocks_out, *k_out are untouched. */
KV_BLOOM_HIDDEN int kv_fpr_fewest_blocks(kv_fpr_blocks_fn *fpr, uint64_t n, double p,
                                         unsigned max_k, uint64_t max_blocks, uint64_t *blocks_out,
                                         unsigned *k_out);

#endif /* KV_FILTER_FPR_SUM_H */
