/* internal.h - what sstable/ gives the store (kv/) and no other user of a
 * table: filter hashes of the caller's own (a store's tables hash user
 * keys, its stored keys carry a trailer), keyed filters, lookups gated and
 * batched across tables, pools of open table and blob files, a table's
 * data offsets for size estimates, and the block cache's counters.
 * sstable.h, which it includes, is the public part: writing, reading and
 * iterating one table, and reading blob files.
 *
 * Exported by the sstable module to kv/ (as "sstable/internal.h") and
 * reached by the tests; never installed. These functions are not in the
 * shared library's exported symbols.
 *
 * A reader keeps its file open for its whole life, or, opened with a pool
 * of files (kv_sst_files), only while the pool has room for it: the pool
 * holds at most a given number of table files open and closes the least
 * recently used when it needs room, and the reader opens its file again
 * when it next reads a data block. A pool of files is thread-safe and may
 * be shared by many readers. */
#ifndef KV_SST_INTERNAL_H
#define KV_SST_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <kv/sstable.h>

/* ---- writer ---------------------------------------------------------------- */

/* Adds a pair whose filter entry is the caller's 64-bit hash (the store
 * passes the hash of the user key; its stored keys carry a trailer).
 * Consecutive pairs with equal hashes make one filter key. A table's pairs
 * are all added one way or all the other: the first add decides, and the
 * other function then gives KV_EINVAL. Such a table's filter is consulted
 * only by the _hashed lookups; kv_sst_get, which cannot know the caller's
 * hashes, reads the data block instead. */
int kv_sst_writer_add_hashed(kv_sst_writer *w, const void *key, size_t klen, const void *val,
                             size_t vlen, uint64_t filter_hash);

/* Marks the table's filter keyed, before its first add: the hashes the
 * caller will pass to kv_sst_writer_add_hashed are SipHash-2-4 of each user
 * key under a secret whose check value (kv_bloom_secret_check) is
 * `secret_check`. The table then records KV_SST_FILTER_HASH_KEYED and the
 * check value (as its filter_seed), so that a reader can tell which secret
 * its filter needs without the table holding it; kv_sst_writer_add gives
 * KV_EINVAL on such a writer. KV_EINVAL: NULL w, or pairs already added. */
int kv_sst_writer_set_keyed(kv_sst_writer *w, uint64_t secret_check);

/* Scan filters (kv_options.prefix_len, kv_options.range_filter_bits;
 * doc/sstable_format.md, format version 4). Each is set before the first
 * add, else KV_EINVAL; a table with either is written as format version 4
 * (properties version 6), every other table as before, byte for byte.
 *
 * kv_sst_writer_set_range_filter: the table carries a range filter
 * (<kv/range_filter.h>) of about bits_per_key bits per distinct key, hashed
 * with `seed`, in its own block. Its keys are those the caller passes to
 * kv_sst_writer_add_range_key (a store passes each distinct user key, in
 * order; its stored keys carry a trailer; any table written with
 * kv_sst_writer_add_hashed takes its range keys this way), or, for a table
 * written with kv_sst_writer_add, the keys that function takes, and then
 * none other: the first add or range key decides, and mixing the two is
 * KV_EINVAL (a range key after such an add, or such an add after a range
 * key). kv_sst_writer_finish refuses (KV_EINVAL, nothing written) a table
 * of pairs whose range filter was given no key, or more keys than the
 * table has pairs. KV_EINVAL (NULL w, set already, pairs added, bits out
 * of KV_RFILTER_MIN_BITS .. KV_RFILTER_MAX_BITS, a writer with a
 * comparator: the filter keeps bytewise order only), KV_ENOMEM. */
int kv_sst_writer_set_range_filter(kv_sst_writer *w, double bits_per_key, uint64_t seed);
/* Adds `key` to the range filter: keys in bytewise non-decreasing order
 * (an equal one again is a no-op). KV_EINVAL (no range filter set, a
 * table whose kv_sst_writer_add adds give its range keys, a key out of
 * order), KV_ENOMEM. */
int kv_sst_writer_add_range_key(kv_sst_writer *w, const void *key, size_t klen);

/* kv_sst_writer_set_prefix: the table's point filter also holds, for each
 * distinct prefix of prefix_len bytes among its keys (a shorter key: the
 * whole key), one hash the caller passes to kv_sst_writer_add_prefix_hash;
 * the properties record prefix_len and the count (prefix_keys), and the
 * filter is sized for whole keys and prefixes together at the writer's
 * bits per key (filter_keys counts both), so a whole key's false positive
 * rate stays what it is without prefixes. A table given no prefix hash
 * records no prefix length. KV_EINVAL (NULL w, prefix_len 0 or above
 * 2^32 - 1, pairs added, a writer without a filter); the pairs must then
 * be added with kv_sst_writer_add_hashed (kv_sst_writer_add gives
 * KV_EINVAL). */
int kv_sst_writer_set_prefix(kv_sst_writer *w, size_t prefix_len);
/* One prefix's hash, when the prefix changes (consecutive equal hashes add
 * once). kv_sst_writer_finish refuses (KV_EINVAL) more distinct prefix
 * hashes than the table has pairs. KV_EINVAL (no prefix set), KV_ENOMEM. */
int kv_sst_writer_add_prefix_hash(kv_sst_writer *w, uint64_t prefix_hash);

/* ---- block cache ------------------------------------------------------------ */

typedef struct {
    uint64_t hits, misses, inserts, evictions;
    uint64_t charge;   /* bytes held now */
    uint64_t capacity; /* bytes */
} kv_sst_cache_stats;

/* The most bytes one cached block or object may take: a shard's share of
 * the capacity (0: no cache, NULL c). Cannot fail. */
size_t kv_sst_cache_shard_bytes(const kv_sst_cache *c);

/* The cache's counters. Cannot fail (NULL arguments leave nothing written). */
void kv_sst_cache_stats_get(const kv_sst_cache *c, kv_sst_cache_stats *out);

/* ---- pool of open table files ------------------------------------------------- */

typedef struct {
    uint64_t max_open;    /* the budget kv_sst_files_new was given */
    uint64_t open_now;    /* table files open now (descriptor and mapping each) */
    uint64_t peak_open;   /* the most open at once */
    uint64_t opens;       /* files opened: first opens and reopens */
    uint64_t reopens;     /* files opened again after the pool closed them */
    uint64_t evictions;   /* files the pool closed to make room */
    uint64_t over_budget; /* opens past max_open, every open file being in use */
} kv_sst_files_stats;

/* A pool of open table files for the readers opened with it
 * (kv_sst_reader_open_pooled): at most max_open (>= 1) of their files are
 * open at once, each a descriptor and a mapping. A reader keeps its
 * trailer, index, properties and filter in memory whether its file is open
 * or not; its file is needed only to read a data block. To open a file
 * when max_open are open, the pool closes the least recently used one (a
 * CLOCK) that no thread is reading. A file is in use from the moment a
 * read of one of its data blocks begins until the read ends, and for as
 * long as an iterator's current block lies in its mapping; when every open
 * file is in use the pool opens one more anyway (counted in over_budget),
 * and later opens close the excess once files fall out of use. Reads of open files
 * take no lock; opening and closing take the pool's. KV_EINVAL (NULL out,
 * max_open 0), KV_ENOMEM. */
int kv_sst_files_new(size_t max_open, kv_sst_files **out);
/* Frees the pool, after every reader opened with it is closed. NULL is a
 * no-op. */
void kv_sst_files_free(kv_sst_files *f);
/* Its counters (read without the lock: each exact, not a snapshot of all).
 * Cannot fail (NULL arguments leave nothing written). */
void kv_sst_files_stats_get(const kv_sst_files *f, kv_sst_files_stats *out);

/* ---- reader ------------------------------------------------------------------ */

/* kv_sst_reader_open, or kv_sst_reader_open_pooled when `files` is not
 * NULL, with `flags` (KV_SST_OPEN_*, or 0: as those functions). KV_EINVAL
 * also for an unknown flag. */
int kv_sst_reader_open_ex(const char *path, kv_sst_cache *cache, kv_sst_files *files,
                          uint64_t table_id, unsigned flags, kv_sst_reader **out);

/* How r reads its data blocks (kv_sst_reader_direct). */
enum {
    KV_SST_DIRECT_OFF = 0,    /* through the page cache: not asked */
    KV_SST_DIRECT_ON = 1,     /* with O_DIRECT: a read the block cache misses reaches the device */
    KV_SST_DIRECT_REFUSED = 2 /* asked, but the file system refused O_DIRECT (or has no
                               * device: tmpfs), so through the page cache */
};

/* KV_SST_DIRECT_*, as decided when r was opened. Cannot fail (NULL: OFF). */
int kv_sst_reader_direct(const kv_sst_reader *r);

/* kv_sst_reader_open, with its file in the pool `files`: opened (in room
 * the pool makes for it) and read as there, then left open in the pool
 * until the pool needs the room. A later read of a data block whose file
 * the pool closed opens it again (the reads a get or an iterator makes, and
 * kv_sst_verify); if that fails they return KV_ECORRUPT (the file is gone
 * or its size changed) or the error of the open (KV_EIO: the process is
 * out of descriptors, KV_EPERM, KV_ENOMEM), with the error text set.
 * Errors as kv_sst_reader_open; KV_EINVAL also for a NULL pool. */
int kv_sst_reader_open_pooled(const char *path, kv_sst_cache *cache, kv_sst_files *files,
                              uint64_t table_id, kv_sst_reader **out);

/* Frees the table's filter: from now on every lookup searches the table's
 * blocks as for a table without one (a "maybe" from no filter), and
 * kv_sst_reader_filter_info says KV_NOTFOUND; the properties still say
 * what the filter was. For a caller that cannot compute the hashes the
 * filter holds (a keyed filter whose secret it lacks): asking the filter
 * with other hashes would answer "absent" for keys the table holds. Call
 * it before any other thread uses r. NULL: no-op. Cannot fail. */
void kv_sst_reader_drop_filter(kv_sst_reader *r);

/* ---- table memory budget (paged.c) --------------------------------------
 *
 * A pageable reader's index and filter may each be kept in memory
 * ("pinned", as every reader's are from open) or paged: read through the
 * block cache, as data blocks are (cached under the table's id at the
 * index or filter block's offset, evictable, charged their decoded
 * size), on each use. A paged filter is the same filter decoded from the
 * same bytes: it answers exactly as the kept one did. The database
 * (kv/tablemem.c) chooses which to page under
 * kv_options.table_memory_budget; readers need not stop meanwhile. */

/* What paged reads cost, counted by every pageable reader that shares it:
 * indexes and filters read from the file (block cache misses). */
typedef struct kv_sst_page_sink {
    _Atomic uint64_t index_reads, filter_reads;
} kv_sst_page_sink;

/* Makes r pageable (its index and filter stay kept until
 * kv_sst_reader_keep says otherwise), counting paged reads into sink
 * (NULL: nowhere). Call it before any other thread uses r: a reader that
 * is not pageable keeps both for its life and pays nothing for paging.
 * NULL r: no-op. Cannot fail. */
void kv_sst_reader_pageable(kv_sst_reader *r, kv_sst_page_sink *sink);

/* Keeps (1) or pages (0) r's index and its filter (a table without a
 * usable filter: keep_filter is ignored). Keeping reads and decodes the
 * block from the file (KV_EIO, KV_ECORRUPT, KV_ENOMEM, with the error
 * text set; the reader is then unchanged and still answers). Paging
 * frees the kept one once no use of it is left: at once, or at a later
 * kv_sst_reader_keep or kv_sst_reader_reclaim. Calls on one reader must
 * not overlap (the caller serializes them); lookups may run meanwhile.
 * KV_EINVAL: r NULL or not pageable. */
int kv_sst_reader_keep(kv_sst_reader *r, int keep_index, int keep_filter);

/* Frees what kv_sst_reader_keep paged and a use still held then, when no
 * use holds it now. Serialized as kv_sst_reader_keep. NULL: no-op. */
void kv_sst_reader_reclaim(kv_sst_reader *r);

/* A reader's table memory now: kept, the bytes of its kept index and
 * filter plus those paged but not yet freed; index and filter, the bytes
 * each takes decoded, kept or not (0: no filter, or dropped); the paged
 * flags. Read without order: a switch meanwhile shows either side. */
typedef struct kv_sst_table_memory {
    uint64_t kept, index, filter;
    int index_paged, filter_paged;
} kv_sst_table_memory;
void kv_sst_reader_memory(const kv_sst_reader *r, kv_sst_table_memory *out);

/* Maps every page of the table's file into the process now, so that the
 * first reads of its blocks do not each stop for a page fault (a table's
 * file is mapped read-only; without this a page is mapped on the first
 * read that touches it). Meant for a table just written, whose pages the
 * page cache still holds: cheap then (~0.5 ms per 8 MiB), while for a file
 * the page cache lacks it reads the whole file. A reader whose file is not
 * mapped (a 32-bit process, a failed mapping) or cannot be opened again:
 * nothing. NULL: no-op. Cannot fail: it changes no answer. */
void kv_sst_reader_prefault(kv_sst_reader *r);

/* Scan filters, reader side. kv_sst_reader_prefix_len: the prefix length
 * the table's filter holds prefixes of (0: none, a table without a
 * filter, or one whose filter was dropped: kv_sst_reader_drop_filter
 * frees the prefixes with it). kv_sst_filter_may_hold: 0 when the
 * table's filter says `filter_hash` (a whole key's or a prefix's, as the
 * caller added them) is absent, else 1 (also with no filter, or a dropped
 * one); counted in nothing. Both cannot fail (NULL r: 0 and 1).
 *
 * kv_sst_range_filter_may_hold: 0 when the table's range filter says no key of
 * the table lies in [lo, hi) (user keys, as the caller added them; NULL
 * lo or hi: open), else 1 (also with no range filter);
 * *expected_fpr as kv_rfilter_may_hold's (NULL: not wanted; 1 with no
 * range filter). kv_sst_reader_has_range_filter: 1 when the table has one.
 * Cannot fail. */
size_t kv_sst_reader_prefix_len(const kv_sst_reader *r);
int kv_sst_filter_may_hold(const kv_sst_reader *r, uint64_t filter_hash);
int kv_sst_reader_has_range_filter(const kv_sst_reader *r);
int kv_sst_range_filter_may_hold(const kv_sst_reader *r, const void *lo, size_t lolen,
                                 const void *hi, size_t hilen, double *expected_fpr);
/* Memory of the table's range filter (its block's payload), 0 with none;
 * its distinct keys. Cannot fail. */
size_t kv_sst_reader_range_filter_bytes(const kv_sst_reader *r);
uint64_t kv_sst_reader_range_filter_keys(const kv_sst_reader *r);
/* The table's decoded range filter (NULL: none), valid while r is open: a
 * memtable's occupancy gate buckets keys by its map (kv/memtable.h). */
const struct kv_rfilter *kv_sst_reader_range_filter(const kv_sst_reader *r);

/* kv_sst_seek_prefixed in two halves, for a caller that asks several
 * tables about one key (a Get walking the levels) and wants their filters'
 * memory latencies to overlap:
 *  - kv_sst_filter_prefetch starts fetching the filter lines a check of
 *    filter_hash reads, and returns at once (NULL r: no-op; cannot fail);
 *  - kv_sst_seek_gate checks the table's key range and filter as
 *    kv_sst_seek_prefixed would (same counters, same *probe): KV_OK when
 *    the table's blocks must be searched, KV_NOTFOUND when they need not
 *    be (no I/O), KV_EINVAL on NULL arguments;
 *  - kv_sst_seek_gated, called only after the gate said KV_OK, with the
 *    probe it filled, searches the blocks and returns what
 *    kv_sst_seek_prefixed would. */
void kv_sst_filter_prefetch(const kv_sst_reader *r, uint64_t filter_hash);
int kv_sst_seek_gate(kv_sst_reader *r, const void *key, size_t klen, size_t prefix_len,
                     uint64_t filter_hash, kv_sst_probe *probe);
int kv_sst_seek_gated(kv_sst_reader *r, const void *key, size_t klen, size_t prefix_len,
                      kv_sst_probe *probe, void **val, size_t *vlen, uint8_t *suffix,
                      size_t suffix_cap, size_t *suffix_len);
/* kv_sst_seek_gated with the value copied into the caller's buffer
 * buf[0, cap) instead of a new one (no allocation): KV_OK when it fits;
 * KV_ERANGE when it does not, with nothing written to buf; either way
 * *vlen is the value's length and the suffix is copied as
 * kv_sst_seek_gated copies it. Other results as kv_sst_seek_gated's. */
int kv_sst_seek_gated_into(kv_sst_reader *r, const void *key, size_t klen, size_t prefix_len,
                           kv_sst_probe *probe, void *buf, size_t cap, size_t *vlen,
                           uint8_t *suffix, size_t suffix_cap, size_t *suffix_len);

/* One key of a batched lookup (kv_sst_seek_gate_many, kv_sst_seek_gated_many):
 * what kv_sst_seek_gate and kv_sst_seek_gated take, and what they give. */
typedef struct {
    /* In, as kv_sst_seek_prefixed's arguments of the same names. */
    const void *key;
    size_t klen, prefix_len;
    uint64_t filter_hash;
    uint8_t *suffix; /* room for suffix_cap bytes; may be NULL when suffix_cap is 0 */
    size_t suffix_cap;
    /* In, for the gate: 1 when the caller has made sure that the key lies in
     * the table's range (the table's smallest key, cut to prefix_len bytes,
     * is <= the key's prefix, and the key is <= its largest key; a store
     * knows it of a user key below the table's largest), so that the gate
     * does not compare it with them again; 0: the gate checks. A key marked
     * wrongly goes on to the filter where the gate would have stopped it:
     * its answer stays KV_NOTFOUND, or is KV_ECORRUPT for a key past the
     * index, never a read out of bounds, but its counts are not those of
     * kv_sst_seek_gate. */
    int in_range;
    /* Out. */
    int rc;             /* what the single-key call would have returned */
    kv_sst_probe probe; /* what it would have filled in */
    void *val;          /* rc KV_OK after the search: a new buffer (kv_free); else NULL */
    size_t vlen;
    size_t suffix_len;
    /* Private to these functions: the data block kv_sst_seek_prefetch_many
     * found for the key, in which table, for the search to use. */
    const kv_sst_reader *hint_reader;
    size_t hint_block;
} kv_sst_seek_req;

/* kv_sst_seek_gate and kv_sst_seek_gated for n keys of one table (a
 * multi-key Get asking the table about every key whose range it holds):
 *  - kv_sst_seek_gate_many sets each req's rc and probe as
 *    kv_sst_seek_gate would (KV_OK: search it; KV_NOTFOUND: no entry, no
 *    I/O; KV_EINVAL: a NULL key with a nonzero klen, or prefix_len > klen),
 *    asking the filter about every key in range in one batch
 *    (kv_bloom_may_contain_batch), so that the keys' memory latencies
 *    overlap;
 *  - kv_sst_seek_gated_many, given the reqs the gate passed (rc KV_OK,
 *    their probes as the gate left them), searches them and sets rc, val,
 *    vlen, suffix and suffix_len as kv_sst_seek_gated would. Consecutive
 *    reqs whose keys land in one data block share it: the index is searched
 *    and the block read (and its checksum checked) once for all of them, so
 *    with keys in ascending order every block is read at most once. A bad
 *    block fails each key that lands in it.
 * Counting is per key, as the single-key calls made one after the other
 * would count: each req's probe and the reader's counters (kv_sst_counters)
 * say what its own lookup would have done, so a key that shares a block
 * read before it counts a cache hit when that block is in the block cache
 * (it came from there, or went there), else a read of its own.
 * Either function: KV_EINVAL (nothing done) for a NULL r, or NULL reqs or
 * a NULL req with n > 0; else KV_OK, the outcome of each key in its rc.
 * n 0 is KV_OK. Neither allocates but the values (and a block the cache
 * does not hold); kv_sst_seek_gated_many's errors per key are
 * kv_sst_seek_gated's (KV_ECORRUPT, KV_EIO, KV_ENOMEM, with the error text
 * of the last one set). */
int kv_sst_seek_gate_many(kv_sst_reader *r, kv_sst_seek_req *const *reqs, size_t n);
int kv_sst_seek_gated_many(kv_sst_reader *r, kv_sst_seek_req *const *reqs, size_t n);

/* Starts fetching what kv_sst_seek_gated_many will wait for with these
 * reqs (the gate's passes), and returns without waiting: a caller about to
 * search several tables calls it for each of them first, so that their
 * memory latencies overlap, in two rounds:
 *  - depth 0: finds each key's index entry (kept in the req for the
 *    search, so its key must not change until then) and asks for the end
 *    of its data block -- its restart array, and the address translation
 *    of its page -- where the block is read in place from the table's
 *    mapping (uncompressed blocks);
 *  - depth 1, for the same reqs once the first round's lines had time to
 *    come in: reads those block ends and asks for the restart keys a seek
 *    compares.
 * Changes no answer and counts nothing; it may open the table's file again
 * when its pool had closed it, as the search would. NULL r or reqs, or a
 * NULL req: nothing is done for it. Cannot fail. */
void kv_sst_seek_prefetch_many(kv_sst_reader *r, kv_sst_seek_req *const *reqs, size_t n, int depth);

/* Where the data of the keys >= key begins in the table's file, found in
 * the index alone (held in memory since open: no data block is read, no
 * I/O): the offset of the first data block whose last key is >= key. So 0
 * for a key at or before the table's first key, and the end of the data
 * blocks (the offset of the index block) for a key past its last key; the
 * difference of two keys' offsets is the stored bytes (block trailers
 * included) of the data blocks between them, exact to within one block at
 * each end. Keys compare as the table's do (bytewise; for a store's table
 * give the prefix kv_sst_store_key_encode writes with with_trailer 0).
 * KV_OK; KV_EINVAL (with text) for a NULL r or out, or a NULL key with a
 * nonzero klen. */
int kv_sst_approximate_offset(const kv_sst_reader *r, const void *key, size_t klen, uint64_t *out);

/* The end of the table's data blocks: the offset where its index block
 * begins (what kv_sst_approximate_offset gives a key past the last; 0 for
 * a table without entries). The file's bytes after it -- index,
 * properties, filter, trailer -- describe the data. Cannot fail (NULL: 0). */
uint64_t kv_sst_reader_data_end(const kv_sst_reader *r);

/* ---- blob files --------------------------------------------------------------- */

/* Bytes the file holds so far (header and records). Cannot fail. */
uint64_t kv_blob_writer_size(const kv_blob_writer *w);

/* A pool of blob file descriptors, for a store with more blob files than
 * it may keep open: at most max_open (>= 1) descriptors of the readers
 * opened with it are open at once. The least recently read is closed to
 * make room (a CLOCK), never one a read is using; a later read of its
 * file opens it again (KV_ECORRUPT if it is gone or changed size). When
 * every open one is in use the pool opens one more anyway. Thread-safe.
 * KV_EINVAL (NULL out, max_open 0), KV_ENOMEM. */
typedef struct kv_blob_files kv_blob_files;
int kv_blob_files_new(size_t max_open, kv_blob_files **out);
/* Frees the pool, after every reader opened with it is closed. NULL: no-op. */
void kv_blob_files_free(kv_blob_files *f);
/* kv_blob_reader_open, with its descriptor in `pool` (KV_EINVAL when
 * NULL): open until the pool needs the room. */
int kv_blob_reader_open_pooled(const char *path, uint64_t number, kv_blob_files *pool,
                               kv_blob_reader **out);


/* ---- range tombstones ------------------------------------------------------------ */

/* A set of range tombstones, fragmented: sorted, non-overlapping fragments
 * [start, end) of user keys, each with the sequences of every tombstone
 * that covers it, newest first. Built once, then immutable and shared by
 * reference count (any thread). The store keeps one per memtable and one
 * per open table that has range tombstones; none (NULL) when there are
 * none. Keys are ordered by the comparator it was built with (NULL:
 * bytewise), which must outlive it. Sequences are > 0. */
typedef struct kv_rtset kv_rtset;

/* One range tombstone as written: every key k with start <= k < end, at seq. */
typedef struct {
    const uint8_t *start;
    size_t slen;
    const uint8_t *end;
    size_t elen;
    uint64_t seq;
} kv_rt;

/* One fragment of a set; the pointers stay valid while the set lives. */
typedef struct {
    const uint8_t *start;
    size_t slen;
    const uint8_t *end;
    size_t elen;
    const uint64_t *seqs; /* newest first */
    size_t nseq;
} kv_rt_fragment;

/* A new set: the fragments of `sets` (n of them; NULL entries skipped) and
 * of the tombstones `rts` (nrt of them, any order, overlapping or not;
 * empty ones, start >= end, ignored) together. *out is NULL when that
 * leaves no fragment. keep (NULL: keep all): called with each fragment's
 * sequences, newest first, it may shorten the list in place and returns
 * the new count (0 drops the fragment): a compaction drops the sequences
 * no snapshot needs. KV_OK, KV_ENOMEM; KV_EINVAL for a sequence of 0 or
 * above 2^56 - 1, or NULL arrays with nonzero counts. */
int kv_rtset_union(const kv_comparator *cmp, const kv_rtset *const *sets, size_t n,
                   const kv_rt *rts, size_t nrt,
                   size_t (*keep)(void *ctx, const uint8_t *start, size_t slen, const uint8_t *end,
                                  size_t elen, uint64_t *seqs, size_t nseq),
                   void *ctx, kv_rtset **out);

void kv_rtset_ref(kv_rtset *s);   /* NULL: no-op */
void kv_rtset_unref(kv_rtset *s); /* the last reference frees it; NULL: no-op */

/* The newest sequence <= snap of a tombstone covering key, or 0 when none
 * does. O(log fragments). NULL s: 0. Cannot fail. */
uint64_t kv_rtset_cover(const kv_rtset *s, const void *key, size_t klen, uint64_t snap);

/* Fragments; the index of the first fragment whose end is after key
 * (count when none); fragment i. NULL s counts 0. Cannot fail. */
size_t kv_rtset_count(const kv_rtset *s);
size_t kv_rtset_seek(const kv_rtset *s, const void *key, size_t klen);
void kv_rtset_fragment(const kv_rtset *s, size_t i, kv_rt_fragment *out);

/* Bytes of memory the set holds; its highest sequence. NULL: 0. */
size_t kv_rtset_bytes(const kv_rtset *s);
uint64_t kv_rtset_max_seq(const kv_rtset *s);

/* The set as a table's range tombstone block holds it
 * (doc/sstable_format.md, "Range tombstone block"): *out from malloc().
 * KV_OK, KV_ENOMEM. */
int kv_rtset_encode(const kv_rtset *s, uint8_t **out, size_t *len);

/* A set from such a block's bytes, checked: KV_ECORRUPT (a truncated or
 * inconsistent encoding: fragments out of order or overlapping under cmp,
 * an empty fragment, a sequence of 0 or out of order), KV_ENOMEM. An empty
 * block gives *out NULL. */
int kv_rtset_decode(const kv_comparator *cmp, const uint8_t *p, size_t len, kv_rtset **out);

/* kv_rtset_decode checking everything but the keys' order: for a table
 * whose comparator orders its stored keys, not the user keys its range
 * tombstones hold (a store's table under a comparator: the store checks
 * the order with its own comparator when it opens the table). The set is
 * for walking its fragments only, never for kv_rtset_cover or a union. */
int kv_rtset_decode_unordered(const uint8_t *p, size_t len, kv_rtset **out);

/* The writer: the table's range tombstone block (kv_rtset_encode's bytes,
 * copied), written at kv_sst_writer_finish. A table with one is a
 * version-3 table; a table may have range tombstones and no pairs. Call
 * before kv_sst_writer_finish. A block of no fragment is no block.
 * KV_EINVAL (NULL w, finished, a block that does not decode or of more
 * than 256 MiB), KV_ENOMEM. */
int kv_sst_writer_set_range_tombstones(kv_sst_writer *w, const uint8_t *block, size_t len);

/* The reader: the bytes of the table's range tombstone block, read and
 * checked when the table was opened and held while the reader lives;
 * *len 0 (and *p NULL) when it has none. Cannot fail. */
void kv_sst_reader_range_tombstones(const kv_sst_reader *r, const uint8_t **p, size_t *len);

/* Checks that the data blocks tile [0, data_end) as the index says, and each
 * block's checksum and compression byte, without decoding any entry:
 * kv_sst_verify's guard against damage, for a table whose entries are known
 * to be in order (kv_ingest of a file this process's kv_table_writer
 * finished). KV_OK or KV_ECORRUPT naming the file; KV_EIO, KV_ENOMEM. */
int kv_sst_verify_blocks(kv_sst_reader *r);

#endif /* KV_SST_INTERNAL_H */
