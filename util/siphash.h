/* siphash.h - SipHash-2-4 (Aumasson and Bernstein, "SipHash: a fast
 * short-input PRF", 2012) with a 64-bit output: a keyed hash. Whoever does
 * not know the 128-bit secret cannot tell which of two keys hashes where,
 * so cannot pick keys that all set the same filter bits, as they can for a
 * seeded XXH3 whose seed they have learnt (a seed is an input to a
 * function built for speed, not a secret; SipHash is built to stay
 * unpredictable without its key).
 *
 * The secret is 16 bytes, read as two little-endian 64-bit words k0, k1,
 * as the paper specifies; kv_sipkey holds them so that a caller expands a
 * secret once, not once per key.
 *
 * Part of util/, the bottom layer: used by filter/ (keyed filters) and kv/
 * (keyed stores); not installed. */
#ifndef KV_UTIL_SIPHASH_H
#define KV_UTIL_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

/* Bytes of a SipHash secret. */
#define KV_SIPHASH_SECRET 16

/* An expanded secret: k0 = bytes 0..7, k1 = bytes 8..15, little-endian. */
typedef struct {
    uint64_t k0, k1;
} kv_sipkey;

/* Expands a 16-byte secret. Cannot fail. */
void kv_sipkey_init(kv_sipkey *key, const uint8_t secret[KV_SIPHASH_SECRET]);

/* SipHash-2-4 of msg[0, len) under `key`: two compression rounds per 8-byte
 * word, four finalisation rounds. msg may be NULL when len is 0. Cannot
 * fail. */
uint64_t kv_siphash24(const kv_sipkey *key, const void *msg, size_t len);

#endif /* KV_UTIL_SIPHASH_H */
