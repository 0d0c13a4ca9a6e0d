/* bloom_avx512.h - the blocked layout's probes as AVX-512 code, included by
 * bloom.c alone (static functions, so that bloom.c inlines them into its
 * own AVX-512 paths).
 *
 * A query loads its 512-bit block once, gathers the word of each of its
 * probes into one lane (vpermq), shifts each lane's bit down (vpsrlvq) and
 * tests the lanes at once: about a dozen instructions for k <= 8, where
 * the portable code spends about fifty, so the CPU's out-of-order window
 * holds more queries and their cache misses overlap. An add builds its
 * 512-bit mask in a register and ORs it into the block with one load and
 * one store. The bits are bloom_block.h's, the portable code's; tests
 * compare the two bit for bit.
 *
 * KV_BLOOM_AVX512 is 1 where this code is compiled: x86-64, GCC or Clang,
 * and not under ThreadSanitizer, which cannot see a 64-byte vector access
 * as the relaxed atomic word accesses the portable code makes, and would
 * report the filter's benign races (a query reading a block while an add
 * writes it sees each word before or after, never a bit taken away). The
 * functions carry target attributes, so nothing else may use AVX-512
 * instructions; bloom.c calls them only after kv_bloom_avx512_usable(). */
#ifndef KV_BLOOM_AVX512_H
#define KV_BLOOM_AVX512_H

#include "bloom_block.h"

#if defined(__SANITIZE_THREAD__)
#define KV_BLOOM_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KV_BLOOM_TSAN 1
#endif
#endif

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(KV_BLOOM_TSAN)
#define KV_BLOOM_AVX512 1
#else
#define KV_BLOOM_AVX512 0
#endif

#if KV_BLOOM_AVX512

#include <immintrin.h>

#define KV_AVX512_FN __attribute__((target("avx2,avx512f")))

/* 1 when this CPU runs AVX2 and AVX-512F (and the OS saves their state). */
static inline int kv_bloom_avx512_usable(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("avx512f");
}

/* The bit positions of probes g..g+7, one per 64-bit lane. */
KV_AVX512_FN static inline __m512i kv_bloom_avx512_bits8(uint32_t x, unsigned g)
{
    __m256i mul = _mm256_loadu_si256((const __m256i *)(kv_bloom_probe_mul + g));
    __m256i bits = _mm256_srli_epi32(_mm256_mullo_epi32(_mm256_set1_epi32((int)x), mul), 23);
    return _mm512_cvtepu32_epi64(bits);
}

/* 1 when all k probes of x are set in `block` (64-byte aligned). */
KV_AVX512_FN static inline int kv_bloom_avx512_test(const _Atomic uint64_t *block, uint32_t x,
                                                    unsigned k)
{
    const __m512i words = _mm512_load_si512((const void *)block);
    const __m512i low6 = _mm512_set1_epi64(63), one = _mm512_set1_epi64(1);
    for (unsigned g = 0; g < k; g += 8) {
        __m512i bits = kv_bloom_avx512_bits8(x, g);
        __m512i w = _mm512_permutexvar_epi64(_mm512_srli_epi64(bits, 6), words);
        w = _mm512_srlv_epi64(w, _mm512_and_si512(bits, low6));
        unsigned need = k - g >= 8 ? 0xFFu : (1u << (k - g)) - 1;
        if ((_mm512_test_epi64_mask(w, one) & need) != need)
            return 0;
    }
    return 1;
}

/* The 512-bit mask of x's k probes, eight probes per vector multiply.
 * Lane w must collect every probe bit b of word w, as 1 << (b - 64 w):
 * with the probes' positions rotated by r lanes (valignq, an immediate),
 * lane w sees probe (w + r) mod 8, and where b - 64 w is not in [0, 64)
 * the shift count is out of range (a negative one wraps to a huge one) and
 * vpsllvq gives 0. Eight rotations show every lane every probe; lanes past
 * k hold a position no lane accepts. Inlined with a constant k, the loops
 * unroll. */
KV_AVX512_FN static inline __attribute__((always_inline)) __m512i
kv_bloom_avx512_mask(uint32_t x, unsigned k)
{
    const __m512i lane_base = _mm512_set_epi64(448, 384, 320, 256, 192, 128, 64, 0);
    const __m512i one = _mm512_set1_epi64(1), nowhere = _mm512_set1_epi64(1 << 20);
    __m512i mask = _mm512_setzero_si512();
    for (unsigned g = 0; g < k; g += 8) {
        __m512i bits = kv_bloom_avx512_bits8(x, g);
        if (k - g < 8)
            bits = _mm512_mask_mov_epi64(nowhere, (__mmask8)((1u << (k - g)) - 1), bits);
#define ROTATED(r)                                                               \
    _mm512_sllv_epi64(one, _mm512_sub_epi64(_mm512_alignr_epi64(bits, bits, r), lane_base))
        mask = _mm512_or_si512(mask, _mm512_sllv_epi64(one, _mm512_sub_epi64(bits, lane_base)));
        mask = _mm512_or_si512(mask, ROTATED(1));
        mask = _mm512_or_si512(mask, ROTATED(2));
        mask = _mm512_or_si512(mask, ROTATED(3));
        mask = _mm512_or_si512(mask, ROTATED(4));
        mask = _mm512_or_si512(mask, ROTATED(5));
        mask = _mm512_or_si512(mask, ROTATED(6));
        mask = _mm512_or_si512(mask, ROTATED(7));
#undef ROTATED
    }
    return mask;
}

/* ORs mask into `block` with one load and one store: the caller holds the
 * block's lock, or owns the filter. */
KV_AVX512_FN static inline void kv_bloom_avx512_or(_Atomic uint64_t *block, __m512i mask)
{
    __m512i words = _mm512_load_si512((const void *)block);
    _mm512_store_si512((void *)block, _mm512_or_si512(words, mask));
}

#endif /* KV_BLOOM_AVX512 */
#endif /* KV_BLOOM_AVX512_H */
