/* bloom_block.h - the blocked layout's probe positions, shared by the
 * portable code (bloom.c) and the AVX-512 code (bloom_avx512.h), so that
 * both set and test the very same bits.
 *
 * A key of a blocked filter owns one 512-bit block (one cache line). Its k
 * bit positions inside the block come from x, the low 32 bits of its hash:
 * probe i is bits 23..31 of x * kv_bloom_probe_mul[i].
 *
 * Private to filter/. */
#ifndef KV_BLOOM_BLOCK_H
#define KV_BLOOM_BLOCK_H

#include <stdint.h>

#include <kv/bloom.h>

#define KV_BLOOM_BLOCK_BITS 512u
#define KV_BLOOM_BLOCK_WORDS (KV_BLOOM_BLOCK_BITS / 64u)

/* kv_bloom_probe_mul[i] for probe i < k: 0x9E3779B9^(i+1) mod 2^32 (odd,
 * so each product is a bijection of x, and the k products do not wait on
 * each other). KV_BLOOM_MAX_K entries, padded to a whole number of 8-lane
 * vectors. Defined in this header so that the compiler sees the values:
 * unrolled probes multiply by immediates. */
#define KV_BLOOM_PROBE_MULS 32u
static const uint32_t kv_bloom_probe_mul[KV_BLOOM_PROBE_MULS] = {
    0x9E3779B9u, 0xE35E67B1u, 0x734297E9u, 0x35FBE861u, 0xDEB7C719u,
    0x0448B211u, 0x3459B749u, 0xAB25F4C1u, 0x52941879u, 0x9C95E071u,
    0xF5AB9AA9u, 0x2D6BA521u, 0x8BEDEDD9u, 0x9BFB72D1u, 0x3AE1C209u,
    0x7FCA7981u, 0xC576C739u, 0xD23EE931u, 0x0335AD69u, 0xC04FF1E1u,
    0x98702499u, 0x7535C391u, 0x9F70DCC9u, 0x0E198E41u, 0xF2AB85F9u,
    0xE6C581F1u, 0xC7ECD029u, 0x6F54CEA1u, 0x4C8A6B59u, 0xBAE3A451u,
    0xF2930789u, 0xF73F3301u, /* padding, never a probe */
};

/* Bit position (0..511) of probe i of a key whose hash has low bits x. */
static inline unsigned kv_bloom_probe_bit(uint32_t x, unsigned i)
{
    return (x * kv_bloom_probe_mul[i]) >> 23;
}

#endif /* KV_BLOOM_BLOCK_H */
