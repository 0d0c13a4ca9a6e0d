/* cache.h - the block cache's internal interface, used by the table reader
 * and its iterator (reader.c, table_iter.c).
 * Handles are reference-counted: a block stays alive while a handle to it
 * is held, and the cache evicts no block a handle holds (cache.c). A
 * lookup takes no lock; an insert takes its shard's.
 *
 * Internal to sstable/. */
#ifndef KV_SST_CACHE_H
#define KV_SST_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

typedef struct kv_cache_entry kv_cache_handle;

/* The block (id, offset), or NULL (a miss). Counts a hit or a miss. */
kv_cache_handle *kv_cache_lookup(kv_sst_cache *c, uint64_t id, uint64_t offset);

/* Hands `data` (malloc'ed, `size` bytes) to the cache and returns a handle
 * to it; when the block does not fit (capacity 0, a block over a shard's
 * share, or every block the cache could evict is held) the handle is
 * private and frees the block on release. When the block is cached
 * already (another reader inserted it), the handle is to that copy and
 * `data` is freed. NULL only when out of memory, and then `data` has
 * been freed. */
kv_cache_handle *kv_cache_insert(kv_sst_cache *c, uint64_t id, uint64_t offset, uint8_t *data,
                                 size_t size);

/* kv_cache_insert for an object of the caller's (a table's decoded index
 * or filter, reader.c), charged `size` bytes and freed by free_fn when it
 * leaves the cache (or on release of a private handle). Its key must be
 * no block's: the reader keys it by the offset of the index or filter
 * block, where no data block lies. kv_cache_data gives the object back. */
kv_cache_handle *kv_cache_insert_obj(kv_sst_cache *c, uint64_t id, uint64_t offset, void *obj,
                                     size_t size, void (*free_fn)(void *));

const uint8_t *kv_cache_data(const kv_cache_handle *h, size_t *size);
void kv_cache_release(kv_sst_cache *c, kv_cache_handle *h);

#endif /* KV_SST_CACHE_H */
