/* filter_format.h - byte offsets and constants of the filter encoding,
 * shared by the encoder and decoder. Layout: doc/filter_format.md. */
#ifndef KV_FILTER_FORMAT_H
#define KV_FILTER_FORMAT_H

#define KV_BLOOM_FMT_MAGIC   "KVBF"  /* 4B 56 42 46 */
/* Version 2 adds hash kind 2 (keyed). An unkeyed filter is still written
 * as version 1, byte for byte as before, so that decoders that know only
 * version 1 read it; a keyed one is version 2. */
#define KV_BLOOM_FMT_VERSION 2
#define KV_BLOOM_FMT_VERSION_UNKEYED 1
#define KV_BLOOM_FMT_HASH_XXH3_64 1  /* XXH3-64 of the key with the seed */
#define KV_BLOOM_FMT_HASH_SIPHASH24 2 /* SipHash-2-4 under a secret that is never
                                       * encoded; the seed field holds the
                                       * secret's check (kv_bloom_secret_check) */

#define KV_BLOOM_FMT_OFF_MAGIC        0   /* u8[4] */
#define KV_BLOOM_FMT_OFF_VERSION      4   /* u8 */
#define KV_BLOOM_FMT_OFF_LAYOUT       5   /* u8: 0 blocked, 1 classic */
#define KV_BLOOM_FMT_OFF_HASH         6   /* u8: hash kind */
#define KV_BLOOM_FMT_OFF_K            7   /* u8: probes, 1..30 */
#define KV_BLOOM_FMT_OFF_SEED         8   /* u64le */
#define KV_BLOOM_FMT_OFF_BITS        16   /* u64le: m */
#define KV_BLOOM_FMT_OFF_KEYS        24   /* u64le: keys added */
#define KV_BLOOM_FMT_OFF_PAYLOAD_LEN 32   /* u64le: bytes of bit array */
#define KV_BLOOM_FMT_HEADER          40   /* payload starts here */
#define KV_BLOOM_FMT_CHECKSUM         8   /* u64le XXH3-64 after the payload */

#endif /* KV_FILTER_FORMAT_H */
