/* hashes.h - non-cryptographic hashes for filterbench --hashes, written here
 * from their public descriptions: FNV-1a 64 (Fowler, Noll, Vo) and
 * MurmurHash3 x64_128 (Austin Appleby, public domain algorithm). Tool-only
 * code: the library hashes with XXH3 (util/hash.h) or SipHash-2-4
 * (util/siphash.h) and never with these. */
#ifndef KV_TOOLS_HASHES_H
#define KV_TOOLS_HASHES_H

#include <stddef.h>
#include <stdint.h>

/* FNV-1a, 64-bit: from the offset basis 0xcbf29ce484222325, each byte is
 * xored in and the state multiplied by the prime 0x100000001b3. */
uint64_t fnv1a64(const void *key, size_t len);

/* MurmurHash3 x64_128 with a 32-bit seed: out[0] and out[1] are h1 and h2,
 * the first and second 8 bytes of the reference output read little-endian. */
void murmur3_x64_128(const void *key, size_t len, uint32_t seed, uint64_t out[2]);

#endif /* KV_TOOLS_HASHES_H */
