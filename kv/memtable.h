/* memtable.h - the store's in-memory write buffer: a skiplist on an arena.
 *
 * Entries are (user key, sequence number, kind, value), ordered by user key
 * (bytewise, or under a comparator: kv_mem_set_comparator) and, for one
 * key, newest sequence first, so the first entry at
 * or after (key, snapshot) is the answer to a read at that snapshot.
 *
 * Concurrency: one writer at a time (the caller serialises kv_mem_add);
 * any number of readers at once, without locks, also while the writer adds.
 * Memory is only released by kv_mem_free, so a reader's pointers into the
 * memtable stay valid as long as it holds the memtable.
 *
 * Filter: a memtable may have a whole-key Bloom filter beside its skiplist
 * (kv_mem_new), so that a read of a key it lacks can skip the skiplist
 * walk. kv_mem_add sets the key's bits before it links the entry, so a
 * reader that can find an entry also finds its bits set: the filter never
 * answers "absent" for a key whose entry a reader can see. The filter holds
 * hashes, never keys: the caller hashes each key (the store: kv_hash_key
 * with its seed) and passes the same hash to kv_mem_add and
 * kv_mem_may_contain.
 *
 * Occupancy gate: a memtable may also have a bitmap of the keys it holds,
 * bucketed in key order by a range filter's map (kv_mem_set_range_map),
 * so that a range query whose bounds' buckets are all clear skips the
 * skiplist search (kv_mem_range_may_hold). kv_mem_add sets the key's bit
 * before it links the entry, under the same rule as the filter's.
 *
 * Internal to kv: not installed, symbols hidden. */
#ifndef KV_MEMTABLE_H
#define KV_MEMTABLE_H

#include <stddef.h>
#include <stdint.h>

#include <kv/sstable.h>
#include <kv/status.h>

/* The kind of an entry, the low byte of its trailer (sequence << 8 | kind). */
enum {
    KV_KIND_TOMBSTONE = 0,
    KV_KIND_VALUE = 1,
    KV_KIND_BLOB = 2,      /* in tables only: the value is a blob reference (blob.h) */
    KV_KIND_MERGE = 3,     /* a merge operand (kv_merge) */
    KV_KIND_RANGE_DEL = 4, /* in batches and logs only: key = begin, value = end; memtables
                            * and tables keep range tombstones apart (kv_rtset) */
    KV_KIND_TVALUE = 5,    /* a value written with ttl_seconds > 0: the value's last 8
                            * bytes are its write time, u64le seconds since the epoch */
    KV_KIND_TMERGE = 6     /* a merge operand likewise timed */
};

/* The write time a timed entry (KV_KIND_TVALUE, KV_KIND_TMERGE) carries. */
#define KV_TTL_STAMP 8u

/* 1 for the kinds a data block of a table may hold. */
static inline int kv_kind_stored(int kind)
{
    return kind >= KV_KIND_TOMBSTONE && kind <= KV_KIND_TMERGE && kind != KV_KIND_RANGE_DEL;
}

/* Sequence numbers fit in 56 bits (the trailer keeps 8 for the kind). */
#define KV_MAX_SEQ (((uint64_t)1 << 56) - 1)

typedef struct kv_mem kv_mem;

/* One entry as a reader sees it; the pointers stay valid while the
 * memtable lives. */
typedef struct {
    const uint8_t *key;
    size_t klen;
    const uint8_t *val;
    size_t vlen;
    uint64_t seq;
    int kind;
} kv_mem_entry;

typedef struct {
    const kv_mem *mem;
    const void *node;
} kv_mem_iter;

/* Creates an empty memtable; with filter_keys > 0, with a whole-key filter
 * of the blocked layout (one cache miss per query) sized for filter_keys
 * keys at bits_per_key bits each (kv_bloom_new's rules). More keys than
 * that only raise its false-positive rate. filter_keys 0: no filter
 * (bits_per_key is ignored). KV_EINVAL (NULL out, or a filter kv_bloom_new
 * refuses), KV_ENOMEM; on error *out is NULL. */
int kv_mem_new(uint64_t filter_keys, double bits_per_key, kv_mem **out);

/* Orders m's keys by cmp (NULL, the default: bytewise); cmp must outlive
 * m. Called before the first kv_mem_add and before m is shared. Two keys
 * equal under cmp must be equal in bytes (sstable.h). NULL m: no-op. */
void kv_mem_set_comparator(kv_mem *m, const kv_comparator *cmp);

/* Frees the memtable and every entry. NULL is a no-op. */
void kv_mem_free(kv_mem *m);

/* Adds an entry (one writer at a time). hash: the key's hash, set in the
 * filter before the entry is linked (unused without a filter). seq <=
 * KV_MAX_SEQ, kind a KV_KIND_*, klen and vlen below 2^32; a (key, seq) pair
 * already present is KV_EINVAL. KV_ENOMEM leaves the skiplist as it was
 * (the filter may keep the key's bits: a false positive, never a wrong
 * answer). */
int kv_mem_add(kv_mem *m, uint64_t hash, uint64_t seq, int kind, const void *key, size_t klen,
               const void *val, size_t vlen);

/* 1 when m has a filter. Cannot fail (NULL: 0). */
int kv_mem_has_filter(const kv_mem *m);

/* 0 when the filter rules out every entry of the key with this hash (the
 * hash kv_mem_add was given for it), so kv_mem_get would return
 * KV_NOTFOUND; 1 when it may hold one, and always without a filter.
 * Lock-free, safe beside kv_mem_add. Cannot fail (NULL m: 1). */
int kv_mem_may_contain(const kv_mem *m, uint64_t hash);

typedef struct kv_rfilter kv_rfilter;

/* Gives m an occupancy gate: a bitmap of `bits` bits (a power of two, 64
 * .. 2^32), bit floor(map_lower(key) bits / (top + 1)) set for each key
 * added (map_lower, top: kv_rfilter_map_lower and kv_rfilter_map_top of
 * `map`, which must outlive m; any map is right, one fitted to keys like
 * the memtable's spreads them best). Called before the first kv_mem_add
 * and before m is shared. The bitmap counts in kv_mem_bytes. KV_EINVAL
 * (NULL arguments, bits not a power of two in range, a map already set,
 * entries already added), KV_ENOMEM (m is unchanged). */
int kv_mem_set_range_map(kv_mem *m, const kv_rfilter *map, uint64_t bits);

/* 1 when m has an occupancy gate. Cannot fail (NULL: 0). */
int kv_mem_has_range_map(const kv_mem *m);

/* 0 when m holds no key in [lo, hi) that a reader whose snapshot was taken
 * before this call may see: every bucket from lo's to hi's (inclusive) is
 * clear. 1 ("maybe") without a gate, with a NULL bound, or when the
 * buckets span more than 64 words of the bitmap. Lock-free, safe beside
 * kv_mem_add. Cannot fail. */
int kv_mem_range_may_hold(const kv_mem *m, const void *lo, size_t lolen, const void *hi,
                          size_t hilen);

/* The newest entry for `key` with sequence <= snapshot: KV_OK with *out
 * filled (a tombstone is also an answer), or KV_NOTFOUND. */
int kv_mem_get(const kv_mem *m, const void *key, size_t klen, uint64_t snapshot,
               kv_mem_entry *out);

/* Bytes of memory held (arena blocks and the filter's bits). */
size_t kv_mem_bytes(const kv_mem *m);

/* Bytes the entries take (nodes, keys, values), for deciding when to
 * flush: unlike kv_mem_bytes it does not jump by a whole arena block. */
size_t kv_mem_used(const kv_mem *m);

/* Number of entries added. */
uint64_t kv_mem_count(const kv_mem *m);

/* Iteration in order. An iterator is valid until kv_mem_free. */
void kv_mem_iter_init(kv_mem_iter *it, const kv_mem *m);
void kv_mem_iter_first(kv_mem_iter *it);
/* First entry >= (key, seq): with seq = KV_MAX_SEQ, the newest of key. */
void kv_mem_iter_seek(kv_mem_iter *it, const void *key, size_t klen, uint64_t seq);
/* Last entry whose key is < key (every version of key is skipped). */
void kv_mem_iter_seek_before(kv_mem_iter *it, const void *key, size_t klen);
void kv_mem_iter_last(kv_mem_iter *it);
int kv_mem_iter_valid(const kv_mem_iter *it);
void kv_mem_iter_next(kv_mem_iter *it);
/* The entry before the current one (not valid at the first). REQUIRES:
 * valid. A search from the head, O(log n): a backward scan costs that per
 * step. */
void kv_mem_iter_prev(kv_mem_iter *it);
void kv_mem_iter_entry(const kv_mem_iter *it, kv_mem_entry *out);

#endif /* KV_MEMTABLE_H */
