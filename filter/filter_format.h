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

/* The shared filter file (kv_bloom_open_shared; doc/filter_format.md,
 * "Shared filter file"): a header page, then the bit array. */
#define KV_BLOOM_SHM_MAGIC   "KVBS"  /* 4B 56 42 53 */
#define KV_BLOOM_SHM_VERSION 1

#define KV_BLOOM_SHM_OFF_MAGIC       0   /* u8[4] */
#define KV_BLOOM_SHM_OFF_VERSION     4   /* u8 */
#define KV_BLOOM_SHM_OFF_LAYOUT      5   /* u8: 0 blocked, 1 classic */
#define KV_BLOOM_SHM_OFF_HASH        6   /* u8: hash kind (KV_BLOOM_FMT_HASH_XXH3_64) */
#define KV_BLOOM_SHM_OFF_K           7   /* u8: probes, 1..30 */
#define KV_BLOOM_SHM_OFF_SEED        8   /* u64le */
#define KV_BLOOM_SHM_OFF_BITS       16   /* u64le: m */
#define KV_BLOOM_SHM_OFF_EXPECTED   24   /* u64le: expected_keys it was made for */
#define KV_BLOOM_SHM_OFF_BPK        32   /* u64le: bits_per_key, IEEE-754 binary64 bits */
#define KV_BLOOM_SHM_OFF_DATA_OFF   40   /* u64le: where the bit array starts (4096) */
#define KV_BLOOM_SHM_OFF_DATA_LEN   48   /* u64le: bytes of bit array */
#define KV_BLOOM_SHM_OFF_CHECKSUM   56   /* u64le: XXH3-64 of bytes [0, 56) */
#define KV_BLOOM_SHM_FIELDS         64   /* bytes of fixed fields */
#define KV_BLOOM_SHM_OFF_KEYS     1024   /* u64le key counters, one per 64-byte line */
#define KV_BLOOM_SHM_STRIPES        16   /* counters */
#define KV_BLOOM_SHM_STRIPE_WORDS    8   /* u64 words from one counter to the next */
#define KV_BLOOM_SHM_HEADER       4096   /* the bit array starts here */

/* ---- the other kinds (doc/filter_format.md, "Other kinds of filter") ---- */

/* Counting filter (counting_bloom.c). */
#define KV_CBF_FMT_MAGIC   "KVCB"  /* 4B 56 43 42 */
#define KV_CBF_FMT_VERSION 1
#define KV_CBF_FMT_OFF_MAGIC      0   /* u8[4] */
#define KV_CBF_FMT_OFF_VERSION    4   /* u8 */
#define KV_CBF_FMT_OFF_HASH       5   /* u8: hash kind, KV_BLOOM_FMT_HASH_XXH3_64 */
#define KV_CBF_FMT_OFF_K          6   /* u8: counters per key, 1..16 */
#define KV_CBF_FMT_OFF_RESERVED   7   /* u8: 0 */
#define KV_CBF_FMT_OFF_SEED       8   /* u64le */
#define KV_CBF_FMT_OFF_EXPECTED  16   /* u64le: expected_keys given to new */
#define KV_CBF_FMT_OFF_FPR       24   /* f64le: fpr given to new */
#define KV_CBF_FMT_OFF_BLOCKS    32   /* u64le: 64-byte blocks */
#define KV_CBF_FMT_OFF_KEYS      40   /* u64le: keys in the filter */
#define KV_CBF_FMT_HEADER        48   /* counters start here */

/* Scalable filter (scalable_bloom.c). */
#define KV_SBF_FMT_MAGIC   "KVSB"  /* 4B 56 53 42 */
#define KV_SBF_FMT_VERSION 1
#define KV_SBF_FMT_OFF_MAGIC      0   /* u8[4] */
#define KV_SBF_FMT_OFF_VERSION    4   /* u8 */
#define KV_SBF_FMT_OFF_HASH       5   /* u8: hash kind */
#define KV_SBF_FMT_OFF_GROWTH     6   /* u8: 2 */
#define KV_SBF_FMT_OFF_STAGES     7   /* u8: 1..KV_SCALABLE_BLOOM_MAX_STAGES */
#define KV_SBF_FMT_OFF_SEED       8   /* u64le */
#define KV_SBF_FMT_OFF_INITIAL   16   /* u64le: initial_keys */
#define KV_SBF_FMT_OFF_FPR       24   /* f64le: fpr */
#define KV_SBF_FMT_OFF_RATIO     32   /* f64le: tightening ratio, 0.9 */
#define KV_SBF_FMT_HEADER        40   /* the stages start here */
#define KV_SBF_FMT_STAGE_HEADER  24   /* capacity, keys, length: u64le each */

/* Rotating filter (rotating_bloom.c). */
#define KV_RBF_FMT_MAGIC   "KVRB"  /* 4B 56 52 42 */
#define KV_RBF_FMT_VERSION 1
#define KV_RBF_FMT_OFF_MAGIC      0   /* u8[4] */
#define KV_RBF_FMT_OFF_VERSION    4   /* u8 */
#define KV_RBF_FMT_OFF_HASH       5   /* u8: hash kind */
#define KV_RBF_FMT_OFF_K          6   /* u8: probes, 1..30 */
#define KV_RBF_FMT_OFF_GENS       7   /* u8: generations, 1..64 */
#define KV_RBF_FMT_OFF_SEED       8   /* u64le */
#define KV_RBF_FMT_OFF_PER_GEN   16   /* u64le: keys_per_generation */
#define KV_RBF_FMT_OFF_FPR       24   /* f64le: fpr */
#define KV_RBF_FMT_OFF_BITS      32   /* u64le: bits of one generation */
#define KV_RBF_FMT_OFF_ROTATIONS 40   /* u64le: rotations so far */
#define KV_RBF_FMT_HEADER        48   /* then a u64le key count per generation */

#endif /* KV_FILTER_FORMAT_H */
