/* memtable.h - the store's in-memory write buffer: a skiplist on an arena.
 *
 * Entries are (user key, sequence number, kind, value), ordered by user key
 * (bytewise) and, for one key, newest sequence first, so the first entry at
 * or after (key, snapshot) is the answer to a read at that snapshot.
 *
 * Concurrency: one writer at a time (the caller serialises kv_mem_add);
 * any number of readers at once, without locks, also while the writer adds.
 * Memory is only released by kv_mem_free, so a reader's pointers into the
 * memtable stay valid as long as it holds the memtable.
 *
 * Internal to kv: not installed, symbols hidden. */
#ifndef KV_MEMTABLE_H
#define KV_MEMTABLE_H

#include <stddef.h>
#include <stdint.h>

#include <kv/status.h>

/* The kind of an entry, the low byte of its trailer (sequence << 8 | kind). */
enum { KV_KIND_TOMBSTONE = 0, KV_KIND_VALUE = 1 };

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

/* Creates an empty memtable. KV_ENOMEM. */
int kv_mem_new(kv_mem **out);

/* Frees the memtable and every entry. NULL is a no-op. */
void kv_mem_free(kv_mem *m);

/* Adds an entry (one writer at a time). seq <= KV_MAX_SEQ, kind a KV_KIND_*,
 * klen and vlen below 2^32; a (key, seq) pair already present is KV_EINVAL.
 * KV_ENOMEM leaves the memtable as it was. */
int kv_mem_add(kv_mem *m, uint64_t seq, int kind, const void *key, size_t klen,
               const void *val, size_t vlen);

/* The newest entry for `key` with sequence <= snapshot: KV_OK with *out
 * filled (a tombstone is also an answer), or KV_NOTFOUND. */
int kv_mem_get(const kv_mem *m, const void *key, size_t klen, uint64_t snapshot,
               kv_mem_entry *out);

/* Bytes of memory held (arena blocks). */
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
void kv_mem_iter_entry(const kv_mem_iter *it, kv_mem_entry *out);

#endif /* KV_MEMTABLE_H */
