/* siphash.c - SipHash-2-4, written from the paper's specification
 * (Aumasson and Bernstein 2012, section 2): four 64-bit words of state
 * initialised from the key and the constants "somepseudorandomlygeneratedbytes",
 * the message in little-endian 8-byte words with the last word holding the
 * leftover bytes and the length's low byte in its top byte, c = 2 SipRounds
 * per word, then 0xff xored into v2 and d = 4 SipRounds; the output is the
 * xor of the four words. tests/unit/check_keyed.c holds the paper's vectors. */
#include "siphash.h"

#include "coding.h"

static inline uint64_t rotl(uint64_t x, unsigned b)
{
    return (x << b) | (x >> (64 - b));
}

/* One SipRound: the ARX network of the paper's figure 2.1. */
#define SIPROUND(v0, v1, v2, v3)                                                  \
    do {                                                                          \
        v0 += v1;                                                                 \
        v1 = rotl(v1, 13);                                                        \
        v1 ^= v0;                                                                 \
        v0 = rotl(v0, 32);                                                        \
        v2 += v3;                                                                 \
        v3 = rotl(v3, 16);                                                        \
        v3 ^= v2;                                                                 \
        v0 += v3;                                                                 \
        v3 = rotl(v3, 21);                                                        \
        v3 ^= v0;                                                                 \
        v2 += v1;                                                                 \
        v1 = rotl(v1, 17);                                                        \
        v1 ^= v2;                                                                 \
        v2 = rotl(v2, 32);                                                        \
    } while (0)

void kv_sipkey_init(kv_sipkey *key, const uint8_t secret[KV_SIPHASH_SECRET])
{
    key->k0 = kv_get64(secret);
    key->k1 = kv_get64(secret + 8);
}

uint64_t kv_siphash24(const kv_sipkey *key, const void *msg, size_t len)
{
    uint64_t v0 = key->k0 ^ 0x736f6d6570736575ull; /* "somepseu" */
    uint64_t v1 = key->k1 ^ 0x646f72616e646f6dull; /* "dorandom" */
    uint64_t v2 = key->k0 ^ 0x6c7967656e657261ull; /* "lygenera" */
    uint64_t v3 = key->k1 ^ 0x7465646279746573ull; /* "tedbytes" */
    const uint8_t *p = msg;
    size_t whole = len & ~(size_t)7;
    for (size_t i = 0; i < whole; i += 8) {
        uint64_t m = kv_get64(p + i);
        v3 ^= m;
        SIPROUND(v0, v1, v2, v3);
        SIPROUND(v0, v1, v2, v3);
        v0 ^= m;
    }
    /* The last word: the 0..7 bytes left, and len mod 256 in the top byte. */
    uint64_t last = (uint64_t)(len & 0xff) << 56;
    for (size_t i = 0; i < (len & 7); i++)
        last |= (uint64_t)p[whole + i] << (8 * i);
    v3 ^= last;
    SIPROUND(v0, v1, v2, v3);
    SIPROUND(v0, v1, v2, v3);
    v0 ^= last;
    v2 ^= 0xff;
    SIPROUND(v0, v1, v2, v3);
    SIPROUND(v0, v1, v2, v3);
    SIPROUND(v0, v1, v2, v3);
    SIPROUND(v0, v1, v2, v3);
    return v0 ^ v1 ^ v2 ^ v3;
}
