/* blob_format.h - constants of the blob file format (doc/blob_format.md),
 * shared by the blob writer and reader (blob.c). Internal to sstable/.
 *
 *   header (32 bytes) | record* | footer (32 bytes, at EOF)
 *   record := klen u32 | vlen u32 | compression u8 | key | value | checksum u64
 *
 * All integers little-endian; every checksum is XXH3-64, seed 0, of the
 * bytes before it in its header, record or footer. */
#ifndef KV_BLOB_FORMAT_H
#define KV_BLOB_FORMAT_H

#define KV_BLOB_VERSION 1u /* the only version written and read */

/* The header: the first KV_BLOB_HEADER bytes of the file. */
#define KV_BLOB_HEADER 32u
#define KV_BLOB_HEADER_MAGIC "kvBlobHd"    /* 8 bytes, no NUL */
#define KV_BLOB_HEADER_OFF_MAGIC        0  /* u8[8]: KV_BLOB_HEADER_MAGIC */
#define KV_BLOB_HEADER_OFF_VERSION      8  /* u32: KV_BLOB_VERSION */
#define KV_BLOB_HEADER_OFF_FLAGS       12  /* u32: 0 (version 1 defines no flag) */
#define KV_BLOB_HEADER_OFF_NUMBER      16  /* u64: the file's number */
#define KV_BLOB_HEADER_OFF_CHECKSUM    24  /* u64: XXH3-64 of bytes [0, 24) */

/* The footer: the last KV_BLOB_FOOTER bytes of the file. */
#define KV_BLOB_FOOTER 32u
#define KV_BLOB_FOOTER_MAGIC "kvBlobFt"    /* 8 bytes, no NUL */
#define KV_BLOB_FOOTER_OFF_MAGIC        0  /* u8[8]: KV_BLOB_FOOTER_MAGIC */
#define KV_BLOB_FOOTER_OFF_RECORDS      8  /* u64: records in the file */
#define KV_BLOB_FOOTER_OFF_BYTES       16  /* u64: their bytes = file size - 64 */
#define KV_BLOB_FOOTER_OFF_CHECKSUM    24  /* u64: XXH3-64 of bytes [0, 24) */

/* A record: a fixed head, the key, the value, then the checksum of all
 * that comes before it in the record. kv_blob_record_size(klen, vlen) is
 * KV_BLOB_RECORD_OVERHEAD + klen + vlen. */
#define KV_BLOB_RECORD_HEAD 9u
#define KV_BLOB_RECORD_OFF_KLEN         0  /* u32: key bytes, 0 .. KV_BLOB_MAX_KEY */
#define KV_BLOB_RECORD_OFF_VLEN         4  /* u32: value bytes */
#define KV_BLOB_RECORD_OFF_COMPRESSION  8  /* u8: KV_BLOB_RAW, the only kind of version 1 */
#define KV_BLOB_RECORD_CHECKSUM 8u         /* u64 after the value */
#define KV_BLOB_RECORD_OVERHEAD (KV_BLOB_RECORD_HEAD + KV_BLOB_RECORD_CHECKSUM) /* 17 */
#define KV_BLOB_RAW 0u

/* Largest key and value of a record (kv_blob_writer_add: KV_EINVAL beyond;
 * a reader takes a larger klen for damage). */
#define KV_BLOB_MAX_KEY ((size_t)64 << 10)
#define KV_BLOB_MAX_VALUE 0xFFFFFFFFull

#endif /* KV_BLOB_FORMAT_H */
