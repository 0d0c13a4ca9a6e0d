/* sstable.h - sorted string tables: an immutable file of sorted key/value
 * pairs with one Bloom filter in its footer region, and a shared block cache.
 *
 * A writer takes strictly increasing keys and, at finish, writes the index,
 * the properties, the filter (sized exactly for the table's keys) and a
 * fixed trailer, syncs, and only then gives the file its final name. A
 * reader keeps the trailer, index, properties and filter in memory, so a get
 * whose filter says "no" does no I/O at all, and a "maybe" reads at most one
 * data block. On 64-bit systems an open table is mapped read-only, and an
 * uncompressed block is read where it lies in the mapping, without a copy;
 * a compressed block is read once, decompressed and kept in the cache (or,
 * without a mapping, every block is read with one pread). A reader opened
 * with KV_SST_OPEN_DIRECT maps nothing and reads with O_DIRECT, past the
 * page cache (kv_sst_reader_open_cmp).
 *
 * Damaged files (truncated, flipped, empty, foreign) give KV_ECORRUPT and a
 * message naming the file and the offset (kv_sst_error_text); they never
 * crash the reader or make it serve wrong data. Byte layout:
 * doc/sstable_format.md.
 *
 * The keys of tables the store writes (an escaped user key and a sequence
 * trailer) are decoded by kv_sst_store_key_decode.
 *
 * Threads: a writer is used by one thread. A reader may be used by many
 * threads at once (gets, iterators); each iterator by one thread. A cache
 * is thread-safe and may be shared by many readers.
 *
 * What the store alone calls (filter hashes of its own, batched and gated
 * lookups, pools of open files, sizes from the index) is declared in
 * sstable/internal.h, which is not installed. */
#ifndef KV_SSTABLE_H
#define KV_SSTABLE_H

#include <stddef.h>
#include <stdint.h>

#include <kv/bloom.h>  /* kv_bloom_layout, kv_bloom_info */
#include <kv/common.h> /* kv_comparator, KV_COMPRESSION_* */
#include <kv/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a table's filter holds (kv_sst_properties.filter_hash). */
enum {
    KV_SST_FILTER_HASH_NONE = 0,   /* the table has no filter */
    KV_SST_FILTER_HASH_KEY = 1,    /* XXH3-64 of each whole key, seeded (kv_sst_writer_add) */
    KV_SST_FILTER_HASH_CALLER = 2, /* hashes its writer was given (kv_sst_writer_add_hashed,
                                    * sstable/internal.h: the store's tables) */
    /* Keyed hashes its writer was given (kv_sst_writer_set_keyed, then
     * kv_sst_writer_add_hashed, sstable/internal.h): SipHash-2-4 under a
     * secret the table does not hold; filter_seed holds the secret's check
     * value (kv_bloom_secret_check), never the secret. */
    KV_SST_FILTER_HASH_KEYED = 3
};

/* Largest key and value a table accepts (KV_EINVAL beyond). */
#define KV_SST_MAX_KEY   ((size_t)1 << 20)
#define KV_SST_MAX_VALUE ((size_t)1 << 26)

typedef struct {
    size_t block_size;         /* target data block size before compression; 2048 */
    unsigned restart_interval; /* entries between restart points; 8 */
    int compression;           /* KV_COMPRESSION_ZSTD (default) or _NONE */
    int compression_level;     /* zstd level; 1 */
    double bits_per_key;       /* filter density; 10; 0: no filter */
    kv_bloom_layout filter_layout; /* KV_BLOOM_BLOCKED */
    uint64_t seed;             /* the filter's hash seed; 0 */
    const char *note;          /* free-form creation note kept in the properties; NULL */
    /* The order of the keys (kv_comparator, common.h); NULL: bytewise. The
     * table does not record it: a reader must be opened with the same one
     * (kv_sst_reader_open_cmp), or it finds the keys out of order. */
    const kv_comparator *comparator;
    /* The most bytes of a zstd dictionary trained for this table from
     * samples of its own data blocks (the first 32 times this many bytes of
     * them), kept in the table and used for every data block; 0: none
     * (format version 1, as before dictionaries). 0 .. 1 MiB (KV_EINVAL
     * beyond); below 256, and without zstd, no dictionary is made. A
     * table too small to train one (under 8 data blocks) is written
     * without. */
    size_t dict_bytes;
    /* 1: kv_sst_writer_finish renames the table to its final name without
     * syncing the directory, and the caller syncs it before anything
     * durable names the table (a store syncs once for all the tables of a
     * flush or compaction, before its manifest commit: each sync of a
     * directory is a disk write and a cache flush). 0 (default): finish
     * syncs it. */
    int defer_dir_sync;
} kv_sst_options;

/* Fills *o with the defaults above. Cannot fail (NULL is a no-op). */
KV_API void kv_sst_options_init(kv_sst_options *o);

/* ---- writer ---------------------------------------------------------------- */

typedef struct kv_sst_writer kv_sst_writer;

/* Starts a table that will be named `path` when finished (it is written as
 * `path`.tmp until then). opts NULL: defaults. KV_EINVAL (bad options, NULL
 * arguments, path exists), KV_EIO, KV_ENOSPC, KV_ENOMEM. */
KV_API int kv_sst_writer_new(const char *path, const kv_sst_options *opts, kv_sst_writer **out);

/* Adds a pair; keys must strictly increase (in the order of the options'
 * comparator: bytewise, then by length, by default), else KV_EINVAL. The
 * filter key is the whole key. */
KV_API int kv_sst_writer_add(kv_sst_writer *w, const void *key, size_t klen, const void *val,
                             size_t vlen);

/* Writes index, properties, filter and trailer, syncs, renames the file to
 * its final name, syncs the directory (unless defer_dir_sync), and frees
 * the writer (also on error, when the temporary file is removed).
 * *file_size (may be NULL) gets the table's size. */
KV_API int kv_sst_writer_finish(kv_sst_writer *w, uint64_t *file_size);

/* Drops the table: removes the temporary file and frees the writer. NULL is a
 * no-op. Cannot fail in a way the caller could act on. */
KV_API void kv_sst_writer_abandon(kv_sst_writer *w);

/* ---- block cache ------------------------------------------------------------ */

typedef struct kv_sst_cache kv_sst_cache;

/* A cache of decompressed data blocks, capacity in bytes: it holds the
 * blocks that would otherwise be read and decompressed again (zstd
 * blocks, and every block of a table that is not mapped). Uncompressed
 * blocks of a mapped table need no cache: the page cache holds them.
 * Capacity 0 is valid and caches nothing. A CLOCK cache in 16 shards: a
 * hit takes no lock (one atomic add on the block's own slot), a miss's
 * insert and its evictions take the shard's lock. The charge never passes
 * the capacity: a block that finds no room (every cached block in use) is
 * handed to its reader alone and freed after. Besides the blocks, its
 * table costs 64 bytes per 2 KiB of capacity. */
KV_API int kv_sst_cache_new(size_t capacity, kv_sst_cache **out);
KV_API void kv_sst_cache_free(kv_sst_cache *c); /* after every reader using it */

/* A pool of open table files, which the store's readers share
 * (sstable/internal.h); a reader opened without one passes NULL. */
typedef struct kv_sst_files kv_sst_files;

/* ---- reader ------------------------------------------------------------------ */

typedef struct kv_sst_reader kv_sst_reader;

typedef struct {
    uint32_t format_version;
    uint64_t entries;
    uint64_t raw_key_bytes, raw_value_bytes;
    uint64_t data_blocks, data_raw_bytes, data_stored_bytes;
    uint64_t file_size;
    int compression;
    kv_bloom_layout filter_layout;
    double filter_bits_per_key; /* 0: the table has no filter */
    unsigned filter_k;
    uint64_t filter_keys;       /* keys hashed into the filter */
    uint64_t filter_seed;
    int filter_hash;            /* KV_SST_FILTER_HASH_*: what the filter holds */
    double filter_expected_fpr; /* for filter_keys keys, from the filter's m and k */
    uint64_t filter_bits;       /* m: bits of the filter's array (0 without one) */
    size_t filter_bytes;        /* memory the filter's array takes while open */
    size_t index_bytes;         /* memory the decoded index takes while open: per data
                                 * block its entry, search word and state byte, and
                                 * its last key (all keys in one allocation) */
    const uint8_t *smallest, *largest; /* valid while the reader is open */
    size_t smallest_len, largest_len;
    const char *note;  /* NUL-terminated, "" when none */
    size_t dict_bytes; /* the table's zstd dictionary (0: none; format version 2) */
    /* Scan filters (format version 4, properties version 6; 0 otherwise;
     * doc/sstable_format.md, "Range filter block" and "Prefix entries"): */
    size_t prefix_len;          /* the filter also holds prefixes of this many bytes (what
                                 * the table records, even once its filter is dropped) */
    uint64_t prefix_keys;       /* of filter_keys, the distinct prefixes */
    size_t range_filter_bytes;  /* the range filter block's payload, held while open (0: none) */
    uint64_t range_filter_keys; /* distinct values it stores (kv_rfilter_info.keys) */
    double range_bits_per_key;  /* range_filter_bytes * 8 / range_filter_keys (0: no key) */
} kv_sst_properties;

typedef struct {
    uint64_t gets;
    uint64_t filter_checks;    /* gets that consulted the filter */
    uint64_t filter_negatives; /* ... and were told "absent": no I/O */
    uint64_t filter_false_positives; /* "maybe", but the key was not there */
    uint64_t data_block_reads; /* data blocks read from the file (or mapping) */
    uint64_t bytes_read;       /* bytes of those reads */
    uint64_t cache_hits;       /* data blocks found in the cache */
    /* Of data_block_reads, those that went to the device: a reader opened
     * with KV_SST_OPEN_DIRECT reads with O_DIRECT what the cache lacks. The
     * bytes are those asked of the device: the aligned range around the
     * block (KV_SST_DIRECT_ALIGN), so at least bytes_read's share. */
    uint64_t device_reads;
    uint64_t device_read_bytes;
} kv_sst_counters;

/* Opens a table: reads the trailer, then the index, properties and filter
 * (a constant number of reads), verifying each checksum. `cache` may be
 * NULL (no cache); `table_id` keys its blocks in the cache and must be
 * unique among readers sharing one. A symbolic link is followed; what it
 * names must be a regular file: a FIFO, device or directory is KV_ECORRUPT
 * at once, without blocking. KV_ECORRUPT (see kv_sst_error_text),
 * KV_NOTFOUND, KV_EIO, KV_ENOMEM, KV_EINVAL. */
KV_API int kv_sst_reader_open(const char *path, kv_sst_cache *cache, uint64_t table_id,
                              kv_sst_reader **out);

/* kv_sst_reader_open_cmp flags. KV_SST_OPEN_DIRECT: the file is opened for
 * reads that bypass the page cache (O_DIRECT) and is not mapped: every
 * data block is read with one aligned pread of the KV_SST_DIRECT_ALIGN-byte
 * units around it (offset, length and memory aligned) and then kept in the
 * block cache like a compressed block; with no cache (NULL, or capacity 0)
 * every read of a block goes to the device. The trailer, index, properties
 * and filter are read the same way at open and stay in memory, as always.
 * Gets, iterators and kv_sst_verify all read this way. Where the file
 * system refuses O_DIRECT (or keeps its files in memory: tmpfs), the table
 * is opened as without the flag (mapped, read through the page cache), and
 * kv_sst_reader_direct (sstable/internal.h) says so. */
enum { KV_SST_OPEN_DIRECT = 1 };
#define KV_SST_DIRECT_ALIGN 4096u

/* kv_sst_reader_open for a table written under `cmp` (the writer's
 * kv_sst_options.comparator; NULL: bytewise), with `flags` (KV_SST_OPEN_*,
 * or 0; KV_EINVAL for an unknown flag), its file in the pool `files` when
 * that is not NULL (a store's: sstable/internal.h; others pass NULL).
 * Every search and check of key order in the table uses it; cmp must
 * outlive the reader. A table read under another order than it was
 * written in is KV_ECORRUPT at open when its index or properties show it
 * (keys out of order), else its searches miss keys: the caller keeps
 * track of the order (the store keeps its comparator's name in its
 * manifest). */
KV_API int kv_sst_reader_open_cmp(const char *path, kv_sst_cache *cache, kv_sst_files *files,
                                  uint64_t table_id, unsigned flags, const kv_comparator *cmp,
                                  kv_sst_reader **out);

/* Closes the reader (and its file, taking it out of its pool). NULL is a
 * no-op. */
KV_API void kv_sst_reader_close(kv_sst_reader *r);

/* Looks a key up. *val (freed with kv_free) and *vlen receive the value.
 * KV_NOTFOUND, KV_ECORRUPT, KV_EIO, KV_ENOMEM; KV_EINVAL on NULL arguments
 * (key may be NULL when klen is 0). The _hashed form uses the
 * caller's filter hash instead of hashing the key. */
KV_API int kv_sst_get(kv_sst_reader *r, const void *key, size_t klen, void **val, size_t *vlen);
KV_API int kv_sst_get_hashed(kv_sst_reader *r, const void *key, size_t klen, uint64_t filter_hash,
                             void **val, size_t *vlen);

/* What one lookup did, for callers that keep their own statistics. */
typedef struct {
    int filter_checked;  /* the filter was asked */
    int filter_negative; /* ... and said "absent": no I/O */
    int false_positive;  /* the filter said "maybe" and nothing matched */
    int block_read;      /* a data block was read from the file */
    int cache_hit;       /* a data block was found in the cache */
    uint64_t bytes_read; /* bytes of that read, block trailer included */
    /* The data block looked at (read or found in the cache), for tools that
     * show a lookup step by step (kv_explain_get): its offset in the file
     * and its stored size, block trailer included (block_bytes 0: none). */
    uint64_t block_offset;
    uint64_t block_bytes;
    /* The read (block_read) went to the device (KV_SST_OPEN_DIRECT), asking
     * it for device_bytes: the aligned range around the block. */
    int device_read;
    uint64_t device_bytes;
} kv_sst_probe;

/* The first entry whose key is >= key, provided it begins with the first
 * `prefix_len` bytes of key (prefix_len <= klen), gated by the filter with
 * `filter_hash` as the prefix's filter entry. This is the store's lookup:
 * its stored keys are an encoded user key (the prefix) followed by a
 * sequence trailer, so the first entry at or after (user key, snapshot)
 * that shares the prefix is the newest version visible at the snapshot.
 *
 * On KV_OK: *val (new buffer, kv_free; never NULL) and *vlen get the value,
 * and the bytes of the found key after the prefix are copied to
 * suffix[0, min(length, suffix_cap)) with *suffix_len their full length.
 * KV_NOTFOUND when no entry matches (a key range or filter miss costs no
 * I/O). *probe (may be NULL) says what the lookup did. KV_ECORRUPT, KV_EIO,
 * KV_ENOMEM, KV_EINVAL. */
KV_API int kv_sst_seek_prefixed(kv_sst_reader *r, const void *key, size_t klen, size_t prefix_len,
                                uint64_t filter_hash, kv_sst_probe *probe, void **val,
                                size_t *vlen, uint8_t *suffix, size_t suffix_cap,
                                size_t *suffix_len);

/* The filter hash of `key` for this table (XXH3-64 with its seed). Not the
 * hash a keyed table's filter holds (KV_SST_FILTER_HASH_KEYED): that one is
 * SipHash-2-4 under a secret the table does not hold, which only its
 * writer's caller can compute. Cannot fail. */
KV_API uint64_t kv_sst_filter_hash(const kv_sst_reader *r, const void *key, size_t klen);

/* Reads and checks every block; KV_OK or the first problem. */
KV_API int kv_sst_verify(kv_sst_reader *r);

/* Properties; the pointers in it live as long as the reader. Cannot fail
 * (NULL arguments leave nothing written). */
KV_API void kv_sst_reader_properties(const kv_sst_reader *r, kv_sst_properties *out);

/* Counters since open. Cannot fail. */
KV_API void kv_sst_reader_counters(const kv_sst_reader *r, kv_sst_counters *out);

/* The table's filter as kv_bloom_stats describes it (m, k, keys, bits set,
 * fill, expected FPR, bytes). The filter was read when the table was
 * opened, past the trailer's checksum, the filter block's checksum and the
 * filter encoding's own checks, so this reads no file. KV_OK; KV_NOTFOUND
 * when the table has no filter (*out zeroed); KV_EINVAL on NULL arguments. */
KV_API int kv_sst_reader_filter_info(const kv_sst_reader *r, kv_bloom_info *out);

/* The message of the last error this thread got from a table function's
 * file or its contents (KV_ECORRUPT, KV_EIO, KV_EPERM, KV_ENOSPC, a missing
 * file): the file, the offset where there is one, and what was wrong.
 * Never NULL. The same text as kv_error_text (status.h, which gives the
 * rule: set on every such error, left alone by a success). */
KV_API const char *kv_sst_error_text(void);

/* ---- range tombstones ------------------------------------------------------------ */

/* A table written by the store may hold range tombstones (format version
 * 3; tables of versions 1 and 2 hold none): a tombstone [start, end) at
 * sequence S deletes, in the store, every version older than S of every
 * user key k with start <= k < end. The table keeps them fragmented:
 * non-overlapping ranges [start, end) of user keys (not stored keys), in
 * the table's key order (bytewise unless it was written under a
 * comparator), start < end, each with the sequences of every tombstone
 * that covers it, newest first, each > 0 and < 2^56. Byte layout:
 * doc/sstable_format.md, "Range tombstone block". The reader read and
 * checked them when it opened the table. */
typedef struct {
    const uint8_t *start;
    size_t start_len;
    const uint8_t *end; /* exclusive */
    size_t end_len;
    const uint64_t *seqs; /* newest first */
    size_t nseq;          /* >= 1 */
} kv_sst_range_tombstone;

/* The table's range tombstone fragments: 0 when it has none. Cannot fail
 * (NULL: 0). */
KV_API size_t kv_sst_range_tombstone_count(const kv_sst_reader *r);

/* Fragment i (0 <= i < kv_sst_range_tombstone_count), in key order; its
 * pointers stay valid while the reader is open. The first call decodes the
 * block into memory the reader keeps (about 24 bytes per fragment, 8 per
 * sequence, and the keys). Thread-safe. KV_OK; KV_EINVAL on NULL arguments
 * or i out of range (*out zeroed when out is not NULL); KV_ENOMEM. */
KV_API int kv_sst_range_tombstone_get(const kv_sst_reader *r, size_t i,
                                      kv_sst_range_tombstone *out);

/* ---- keys of tables written by the store ---------------------------------------- */

/* The store (kv.h) writes tables whose keys are its internal keys, built so
 * that bytewise order is "user key ascending, then newest first"
 * (doc/sstable_format.md, "Tables written by the store"):
 *
 *   the user key, each 0x00 byte written as 0x00 0xFF
 *   the terminator 0x00 0x01
 *   8 bytes, big-endian: the bitwise NOT of (sequence << 8 | kind)
 *
 * The escaped key and the terminator are the prefix every version of a user
 * key shares: the prefix of kv_sst_seek_prefixed. These functions encode
 * and decode such keys for programs that read a store's tables (tools). */
enum {
    KV_SST_KIND_DELETE = 0, /* a tombstone: its value is empty */
    KV_SST_KIND_PUT = 1,
    KV_SST_KIND_BLOB = 2,  /* the value is a kv_blob_ref's encoding (kv_blob_ref_decode) */
    KV_SST_KIND_MERGE = 3, /* the value is a merge operand (kv_merge) */
    /* Kind 4, a range delete, is never a stored key's: a table keeps its
     * range tombstones in a block of their own (kv_sst_range_tombstone_get). */
    KV_SST_KIND_TPUT = 5,  /* a put written with a TTL: the value, then its write time
                            * (KV_SST_TTL_STAMP bytes, u64le seconds since the epoch) */
    KV_SST_KIND_TMERGE = 6 /* a merge operand written with a TTL, stamped the same way */
};

/* Bytes of the write time at the end of a KV_SST_KIND_TPUT or _TMERGE value. */
#define KV_SST_TTL_STAMP 8u

/* Longest encoding of a user key of n bytes (every byte 0x00). */
#define KV_SST_STORE_KEY_MAX(n) (2 * (size_t)(n) + 10)

typedef struct {
    size_t user_len;   /* bytes of the user key */
    size_t prefix_len; /* bytes of the escaped user key and terminator */
    uint64_t sequence; /* < 2^56 */
    int kind;          /* the trailer's low byte, 0..255: KV_SST_KIND_* (not 4) in
                          a sound table; any other value is left to the caller */
} kv_sst_store_key;

/* Decodes a stored key: the user key's first min(user_len, user_cap) bytes
 * go to user (NULL when user_cap is 0), so a buffer of klen bytes always
 * holds it; *out gets the parts. KV_OK; KV_ECORRUPT when key is not such a
 * key (shorter than 10 bytes, a 0x00 followed by neither 0xFF nor the
 * terminator, the terminator not 8 bytes before the end), with no message
 * (kv_sst_error_text names files); KV_EINVAL on NULL arguments. */
KV_API int kv_sst_store_key_decode(const void *key, size_t klen, uint8_t *user, size_t user_cap,
                                   kv_sst_store_key *out);

/* Encodes (user key, sequence, kind) into out[0, *out_len). With
 * with_trailer 0 only the prefix is written (escaped key and terminator;
 * sequence and kind are ignored): every stored key of the user key begins
 * with it, and every stored key of a smaller user key sorts before it.
 * KV_OK; KV_EINVAL on NULL arguments (user may be NULL when ulen is 0),
 * sequence >= 2^56 or kind outside 0..255, or cap too small (*out_len then
 * says how many bytes it takes; KV_SST_STORE_KEY_MAX(ulen) always do). */
KV_API int kv_sst_store_key_encode(const void *user, size_t ulen, uint64_t sequence, int kind,
                                   int with_trailer, uint8_t *out, size_t cap, size_t *out_len);

/* ---- blob files: large values apart from the tables ------------------------------ */

/* A blob file holds values the store keeps apart from its keys: each value
 * is one record (its key, the value and a checksum over both), written
 * once, in the order given, and never changed; a table keeps a reference
 * (kv_blob_ref: file number, record offset, value size) in its place, under
 * kind KV_SST_KIND_BLOB. A file starts with a header (magic, version, its
 * own number) and ends with a footer (record count and bytes, checksummed),
 * so a lone file says what it is and a truncated one is seen at open.
 * Byte layout: doc/blob_format.md.
 *
 * Threads: a writer is used by one thread; a reader by any number at once
 * (each read is one pread, or one preadv, on a descriptor the reader keeps
 * open for its whole life). */

/* Where a value lies: in blob file `number`, the record at `offset`, whose
 * value is `size` bytes. */
typedef struct {
    uint64_t number;
    uint64_t offset;
    uint64_t size;
} kv_blob_ref;

/* Most bytes kv_blob_ref_encode writes. */
#define KV_BLOB_REF_MAX 30

/* Encodes ref into out (at least KV_BLOB_REF_MAX bytes); returns the bytes
 * written (three varints). Cannot fail. */
KV_API size_t kv_blob_ref_encode(const kv_blob_ref *ref, uint8_t *out);
/* Decodes the n bytes at p, which must be exactly one encoding: three
 * varints, each in its shortest form, nothing after them, and a size of at
 * most 2^32 - 1. KV_OK; KV_ECORRUPT (no message: the caller names the
 * table) for anything else; KV_EINVAL when ref is NULL, or p with n > 0. */
KV_API int kv_blob_ref_decode(const void *p, size_t n, kv_blob_ref *ref);

/* Bytes of the record of a value of vlen bytes under a key of klen bytes:
 * what a reference's record takes in its file, counted as garbage when no
 * table refers to it any more: 17 + klen + vlen (UINT64_MAX where that
 * would not fit). Cannot fail. */
KV_API uint64_t kv_blob_record_size(size_t klen, uint64_t vlen);

/* What a finished file holds (kv_blob_writer_finish, kv_blob_reader_info). */
typedef struct {
    uint64_t number;
    uint64_t file_size;
    uint64_t records;
    uint64_t record_bytes; /* sum of kv_blob_record_size over the records */
} kv_blob_file_info;

typedef struct kv_blob_writer kv_blob_writer;

/* Creates the file at `path` (O_EXCL: an existing file is KV_EINVAL with
 * text) and writes its header, for file number `number`. KV_EIO, KV_ENOSPC,
 * KV_EPERM, KV_ENOMEM, KV_EINVAL, with text (kv_sst_error_text). */
KV_API int kv_blob_writer_new(const char *path, uint64_t number, kv_blob_writer **out);
/* The longest key a blob record holds (doc/blob_format.md). */
#define KV_BLOB_KEY_MAX ((size_t)64 << 10)

/* Appends one record; *ref says where it lies. Keys up to 64 KiB, values
 * up to 4 GiB - 1 (else KV_EINVAL). Buffered: KV_EIO, KV_ENOSPC when a
 * buffer's write fails (the writer must then be abandoned). */
KV_API int kv_blob_writer_add(kv_blob_writer *w, const void *key, size_t klen, const void *val,
                              size_t vlen, kv_blob_ref *ref);
/* Writes the footer, fdatasyncs and closes the file, frees w (on error
 * too); *info (may be NULL) says what it holds. The caller syncs the
 * directory. KV_EIO, KV_ENOSPC with text; the file is then removed. */
KV_API int kv_blob_writer_finish(kv_blob_writer *w, kv_blob_file_info *info);
/* Closes and removes the file, frees w. NULL is a no-op. */
KV_API void kv_blob_writer_abandon(kv_blob_writer *w);

typedef struct kv_blob_reader kv_blob_reader;

/* Opens a blob file: reads and checks its header and footer (magic,
 * version, checksums, that the header names `number`, that the footer's
 * sizes fit the file). A symbolic link is followed; what it names must be
 * a regular file (a link that loops, ELOOP, is KV_ECORRUPT, as damage
 * is). KV_NOTFOUND (no file), KV_ECORRUPT, KV_EIO, KV_ENOMEM,
 * with text. */
KV_API int kv_blob_reader_open(const char *path, uint64_t number, kv_blob_reader **out);
/* Closes it (and takes it out of its pool). NULL is a no-op. */
KV_API void kv_blob_reader_close(kv_blob_reader *r);
/* What it holds (from the footer). Cannot fail. */
KV_API void kv_blob_reader_info(const kv_blob_reader *r, kv_blob_file_info *out);

/* Reads the value `ref` names, stored under `key`, into buf (cap >=
 * ref->size, else KV_ERANGE and nothing read): one read of the record,
 * whose checksum, key and sizes must match (KV_ECORRUPT with the file and
 * offset in the text otherwise, also for a ref outside the file's records
 * or of another file). *bytes_read (may be NULL) gets the bytes read from
 * the file, also when a check then fails. On any error buf's first
 * ref->size bytes are undefined. KV_EIO with text; KV_EINVAL for NULL
 * arguments (key and buf may be NULL when klen, cap are 0) or a key over
 * 64 KiB. */
KV_API int kv_blob_read(kv_blob_reader *r, const kv_blob_ref *ref, const void *key, size_t klen,
                        void *buf, size_t cap, uint64_t *bytes_read);

/* Walks the records in file order, checking each: calls fn(ctx, key, klen,
 * value, vlen, ref) for each (valid for the call only); a nonzero return
 * from fn stops the walk and is returned. KV_OK at the end when the
 * records are exactly the footer's count and bytes; KV_ECORRUPT (with the
 * offset) at the first bad record; KV_EIO, KV_ENOMEM. kvtool and repair use
 * it to verify and list a file. */
typedef int kv_blob_visit_fn(void *ctx, const void *key, size_t klen, const void *val,
                             size_t vlen, const kv_blob_ref *ref);
KV_API int kv_blob_scan(kv_blob_reader *r, kv_blob_visit_fn *fn, void *ctx);

/* ---- iterator ------------------------------------------------------------------ */

typedef struct kv_sst_iter kv_sst_iter;

KV_API int kv_sst_iter_new(kv_sst_reader *r, kv_sst_iter **out);
KV_API void kv_sst_iter_free(kv_sst_iter *it);
KV_API void kv_sst_iter_seek_first(kv_sst_iter *it);
KV_API void kv_sst_iter_seek(kv_sst_iter *it, const void *key, size_t klen); /* first key >= key */
KV_API void kv_sst_iter_seek_last(kv_sst_iter *it);
KV_API void kv_sst_iter_seek_before(kv_sst_iter *it, const void *key, size_t klen); /* last key < key */
KV_API void kv_sst_iter_next(kv_sst_iter *it);
KV_API void kv_sst_iter_prev(kv_sst_iter *it); /* no-op when not valid */
KV_API int kv_sst_iter_valid(const kv_sst_iter *it);
/* Valid until the iterator moves. */
KV_API const void *kv_sst_iter_key(const kv_sst_iter *it, size_t *klen);
KV_API const void *kv_sst_iter_value(const kv_sst_iter *it, size_t *vlen);
/* KV_OK, or the error that stopped the iterator (it is then not valid). */
KV_API int kv_sst_iter_status(const kv_sst_iter *it);

#ifdef __cplusplus
}
#endif

#endif /* KV_SSTABLE_H */
