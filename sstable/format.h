/* format.h - constants of the table file format (doc/sstable_format.md),
 * shared by the writer and the reader. Internal to sstable/. */
#ifndef KV_SST_FORMAT_H
#define KV_SST_FORMAT_H

#define KV_SST_MAGIC "kvSSTbl1"   /* 8 bytes at the start of the trailer */
/* Format version 1: no dictionary. Version 2: a zstd dictionary block
 * between the properties and the filter (properties version 4 give its
 * size), and data blocks of compression kind KV_SST_BLOCK_ZSTD_DICT. A
 * table is written at the lowest version that holds it: a table without
 * a dictionary is a version-1 table, byte for byte as before. */
/* Version 3: a range tombstone block after the dictionary (if any) and
 * before the filter, properties version 5 giving its size (and the
 * dictionary's, 0 when none); written only for a table with range
 * tombstones, so tables without are written at version 1 or 2 as before. */
/* Version 4: a range filter block after the range tombstones (if any) and
 * before the filter, and/or prefix entries in the filter, properties
 * version 6 giving the range filter's size, the prefix length and the
 * prefix count; written only for a table with a range filter or prefix
 * entries, so every other table is written at version 1, 2 or 3 as before. */
#define KV_SST_VERSION 4u
#define KV_SST_VERSION_RT 3u
#define KV_SST_VERSION_DICT 2u
#define KV_SST_VERSION_NO_DICT 1u
#define KV_SST_CHECKSUM_XXH3 1u   /* XXH3-64, seed 0 */

/* Every block is followed by: u8 compression | u64le checksum of the
 * stored payload and that byte. */
#define KV_SST_BLOCK_TRAILER 9u

/* The compression byte of a block trailer: KV_COMPRESSION_NONE (0),
 * KV_COMPRESSION_ZSTD (1), or 2: a zstd frame compressed with the table's
 * dictionary (version 2 tables with a dictionary only). */
#define KV_SST_BLOCK_ZSTD_DICT 2u

/* A dictionary block holds at most this many bytes (a zstd dictionary in
 * zstd's own format, magic 0xEC30A437). */
#define KV_SST_MAX_DICT ((size_t)1 << 20)
#define KV_SST_DICT_MAGIC 0xEC30A437u /* u32le at its start */

/* The trailer: the last KV_SST_TRAILER bytes of the file. All integers
 * little-endian. */
#define KV_SST_TRAILER 72u
#define KV_SST_TRAILER_OFF_MAGIC               0  /* u8[8]: KV_SST_MAGIC */
#define KV_SST_TRAILER_OFF_VERSION             8  /* u32: KV_SST_VERSION */
#define KV_SST_TRAILER_OFF_CHECKSUM_KIND      12  /* u32: KV_SST_CHECKSUM_XXH3 */
#define KV_SST_TRAILER_OFF_INDEX_OFF          16  /* u64: block handle of the index */
#define KV_SST_TRAILER_OFF_INDEX_SIZE         24  /* u64 */
#define KV_SST_TRAILER_OFF_PROPS_OFF          32  /* u64: block handle of the properties */
#define KV_SST_TRAILER_OFF_PROPS_SIZE         40  /* u64 */
#define KV_SST_TRAILER_OFF_FILTER_OFF         48  /* u64: block handle of the filter */
#define KV_SST_TRAILER_OFF_FILTER_SIZE        56  /* u64: 0 when there is no filter */
#define KV_SST_TRAILER_OFF_CHECKSUM           64  /* u64: XXH3-64 of bytes [0, 64) */

/* Properties block versions: 1 has a 100-byte fixed part; 2 appends a u32
 * saying what the filter's hashes are (KV_SST_FILTER_HASH_* up to CALLER);
 * 3 is laid out as 2 and may also say KV_SST_FILTER_HASH_KEYED, its filter
 * seed then being the secret's check value. A table is written at the
 * lowest version that holds it: 3 for a keyed filter, else 2, so that
 * unkeyed tables stay readable by readers that know only version 2.
 * The fixed part, all integers little-endian, is followed by the smallest
 * key, the largest key and the note (lengths at _OFF_SMALLEST_LEN..). */
/* Version 4 (tables with a dictionary only) is laid out as 3, its fixed
 * part 8 bytes longer: the dictionary block's payload size. */
/* Version 5 (tables with range tombstones, format version 3, only) is
 * laid out as 4, its fixed part 8 bytes longer again: the range tombstone
 * block's payload size (> 0); its dict_size may be 0 (no dictionary). */
/* Version 6 (format version 4 tables, only) is laid out as 5, its fixed
 * part 24 bytes longer: the range filter block's payload size (0: none),
 * the prefix length and which keys the range filter holds (u32 each), and
 * the prefix count; its dict_size and rt_size may be 0. */
#define KV_SST_PROPS_VERSION 6u      /* the newest version read and written */
#define KV_SST_PROPS_VERSION_RT 5u   /* written for range tombstones, no scan filter */
#define KV_SST_PROPS_VERSION_DICT 4u /* written for a dictionary, no range tombstones */
#define KV_SST_PROPS_VERSION_KEYED 3u /* written for a keyed filter, no dictionary */
#define KV_SST_PROPS_VERSION_UNKEYED 2u /* written for tables without a keyed filter */
/* The offsets stay aligned, as in doc/sstable_format.md's table. */
/* clang-format off */
#define KV_SST_PROPS_FIXED_V1 100u
#define KV_SST_PROPS_FIXED 104u
#define KV_SST_PROPS_FIXED_V4 112u
#define KV_SST_PROPS_FIXED_V5 120u
#define KV_SST_PROPS_FIXED_V6 144u
#define KV_SST_PROPS_OFF_VERSION               0  /* u32: 1 .. 6 */
#define KV_SST_PROPS_OFF_COMPRESSION           4  /* u32: the writer's KV_COMPRESSION_* */
#define KV_SST_PROPS_OFF_ENTRIES               8  /* u64 */
#define KV_SST_PROPS_OFF_RAW_KEY_BYTES        16  /* u64 */
#define KV_SST_PROPS_OFF_RAW_VALUE_BYTES      24  /* u64 */
#define KV_SST_PROPS_OFF_DATA_BLOCKS          32  /* u64: = index entries */
#define KV_SST_PROPS_OFF_DATA_RAW_BYTES       40  /* u64: before compression */
#define KV_SST_PROPS_OFF_DATA_STORED_BYTES    48  /* u64: payloads as stored */
#define KV_SST_PROPS_OFF_FILTER_LAYOUT        56  /* u32: kv_bloom_layout */
#define KV_SST_PROPS_OFF_FILTER_K             60  /* u32: 0 without a filter */
#define KV_SST_PROPS_OFF_BITS_PER_KEY         64  /* u64: IEEE 754 binary64; 0: no filter */
#define KV_SST_PROPS_OFF_FILTER_KEYS          72  /* u64 */
#define KV_SST_PROPS_OFF_FILTER_SEED          80  /* u64 */
#define KV_SST_PROPS_OFF_SMALLEST_LEN         88  /* u32: S */
#define KV_SST_PROPS_OFF_LARGEST_LEN          92  /* u32: L */
#define KV_SST_PROPS_OFF_NOTE_LEN             96  /* u32: N */
#define KV_SST_PROPS_OFF_FILTER_HASH         100  /* u32, versions 2 .. 6: KV_SST_FILTER_HASH_* */
#define KV_SST_PROPS_OFF_DICT_SIZE           104  /* u64, versions 4 (> 0), 5 and 6 (0: none) */
#define KV_SST_PROPS_OFF_RT_SIZE             112  /* u64, versions 5 (> 0) and 6 (0: none) */
#define KV_SST_PROPS_OFF_RF_SIZE             120  /* u64, version 6: range filter bytes (0: none) */
#define KV_SST_PROPS_OFF_PREFIX_LEN          128  /* u32, version 6: 0 iff prefix_keys is 0 */
#define KV_SST_PROPS_OFF_RF_KEYS             132  /* u32, version 6: KV_SST_RF_KEYS_* */
#define KV_SST_PROPS_OFF_PREFIX_KEYS         136  /* u64, version 6: prefix hashes in the filter */
/* clang-format on */

/* Which keys a version-6 table's range filter holds (rf_keys): the
 * caller's (kv_sst_writer_add_range_key: a store's user keys; also 0 when
 * the table has no range filter), or the table's own keys (a table written
 * with kv_sst_writer_add), which kv_sst_verify can then check it against. */
#define KV_SST_RF_KEYS_CALLER 0u
#define KV_SST_RF_KEYS_OWN 1u

/* A raw (uncompressed) block may not claim more than this. */
#define KV_SST_MAX_RAW_BLOCK ((size_t)256 << 20)

/* The most a zstd frame can decompress to, per byte of it: a zstd block
 * holds at most 128 KiB and takes at least 4 bytes (a 3-byte header and
 * one byte repeated), so a frame of n bytes decompresses to less than
 * 32768 n. The reader refuses a frame that claims more. */
#define KV_SST_ZSTD_MAX_RATIO 32768u

#endif /* KV_SST_FORMAT_H */
