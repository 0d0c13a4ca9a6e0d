/* coding.h - the byte encodings every on-disk format in kv uses:
 * little-endian fixed-width integers, doubles as the 64 bits of their IEEE
 * 754 binary64 form, and LEB128 varints (7 bits a byte, low group first,
 * high bit set on all but the last byte, at most 10).
 *
 * Part of util/, the bottom layer: used by every module above it; not
 * installed. */
#ifndef KV_CODING_H
#define KV_CODING_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline void kv_put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline void kv_put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline void kv_put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint16_t kv_get16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t kv_get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t kv_get64(const uint8_t *p)
{
    return (uint64_t)kv_get32(p) | (uint64_t)kv_get32(p + 4) << 32;
}

/* A double's IEEE 754 binary64 bits, and back, bit for bit (NaN payloads,
 * -0.0 and all): stored with kv_put64 and read with kv_get64. */
static inline uint64_t kv_f64_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static inline double kv_bits_f64(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* Writes v at p (room for 10 bytes needed); returns the bytes written. */
static inline size_t kv_put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

/* Reads a varint from [*p, end) and advances *p; 0 when it is truncated or
 * longer than 64 bits. */
static inline int kv_get_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t r = 0;
    for (unsigned shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        if (shift == 63 && b > 1)
            return 0;
        r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = r;
            return 1;
        }
    }
    return 0;
}

#endif /* KV_CODING_H */
