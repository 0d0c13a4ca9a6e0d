/* format.h - constants of the table file format (doc/sstable_format.md),
 * shared by the writer and the reader. Internal to sstable/. */
#ifndef KV_SST_FORMAT_H
#define KV_SST_FORMAT_H

#define KV_SST_MAGIC "kvSSTbl1"   /* 8 bytes at the start of the trailer */
#define KV_SST_VERSION 1u
#define KV_SST_CHECKSUM_XXH3 1u   /* XXH3-64, seed 0 */

/* Every block is followed by: u8 compression | u64le checksum of the
 * stored payload and that byte. */
#define KV_SST_BLOCK_TRAILER 9u

/* The trailer: magic[8] | u32 version | u32 checksum kind |
 * u64 index off, size | u64 properties off, size | u64 filter off, size |
 * u64 checksum of the 64 bytes before it. */
#define KV_SST_TRAILER 72u

/* Properties block versions: 1 has a 100-byte fixed part; 2 (written now)
 * appends a u32 saying what the filter's hashes are (KV_SST_FILTER_HASH_*). */
#define KV_SST_PROPS_VERSION 2u
#define KV_SST_PROPS_FIXED_V1 100u
#define KV_SST_PROPS_FIXED 104u

/* A raw (uncompressed) block may not claim more than this. */
#define KV_SST_MAX_RAW_BLOCK ((size_t)256 << 20)

#endif /* KV_SST_FORMAT_H */
