/* bloom_owned.h - building a filter that no other thread can see yet.
 *
 * kv_bloom_add is safe from many threads at once, so it sets bits with
 * atomic ORs: a locked instruction per word a key touches. A table writer
 * builds its filter alone, before anyone else holds it, and needs none.
 *
 * Internal to kv: not installed. */
#ifndef KV_BLOOM_OWNED_H
#define KV_BLOOM_OWNED_H

#include <stddef.h>
#include <stdint.h>

#include "bloom.h"

/* Adds n hashes, as kv_bloom_add_hash would each, with plain loads and
 * stores. The caller guarantees that no other thread adds to or reads f
 * meanwhile (a filter it made and has not shared). NULL f or hashes: no-op. */
void kv_bloom_add_hashes_owned(kv_bloom *f, const uint64_t *hashes, size_t n);

#endif /* KV_BLOOM_OWNED_H */
