/* bits.h - the bit arithmetic filter/ shares: population counts and
 * trailing zeros (the range reduction is util/hash.h's kv_fastrange64).
 * Internal to the filter module: not installed. */
#ifndef KV_FILTER_BITS_H
#define KV_FILTER_BITS_H

#include <stdint.h>

/* Per byte of x, the count of its set bits (each byte 0..8). */
static inline uint64_t byte_counts(uint64_t x)
{
    x = x - ((x >> 1) & 0x5555555555555555ull);
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    return (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
}

/* Without the popcnt instruction, GCC's builtin is a call into libgcc's
 * table-driven routine: slower than these few operations. */
static inline unsigned popcount64(uint64_t x)
{
#if defined(__GNUC__) && defined(__POPCNT__)
    return (unsigned)__builtin_popcountll(x);
#else
    return (unsigned)((byte_counts(x) * 0x0101010101010101ull) >> 56);
#endif
}

static inline unsigned ctz64(uint64_t x) /* x != 0 */
{
#if defined(__GNUC__)
    return (unsigned)__builtin_ctzll(x);
#else
    unsigned n = 0;
    for (; !(x & 1); x >>= 1)
        n++;
    return n;
#endif
}

#endif /* KV_FILTER_BITS_H */
