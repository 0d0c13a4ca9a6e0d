/* reader.h - what the table reader (reader.c) and the table iterator
 * (table_iter.c) share: the open reader's state, the data block read path
 * and the index search. Private to sstable/: not installed. */
#ifndef KV_SST_READER_H
#define KV_SST_READER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <kv/sstable.h>

#include "cache.h"
#include "util/file.h"
#include "util/keycmp.h"

/* One index entry: the handle of one data block. */
struct index_entry {
    uint8_t *key; /* last key of the block */
    size_t klen;
    uint64_t off, size; /* stored payload, without the block trailer */
};

struct reader_tally; /* reader.c */

/* An open table. Fixed after kv_sst_reader_open returns, but for the
 * atomic `seen` marks and the striped counters, so many threads may read
 * through it at once. */
struct kv_sst_reader {
    char *path;
    kv_file *file;
    const uint8_t *map; /* the whole file mapped read-only, or NULL (pread) */
    _Atomic uint8_t *seen; /* per data block, for mapped tables: BLOCK_* (reader.c) */
    kv_sst_cache *cache;
    uint64_t id, size;
    struct index_entry *index;
    size_t nindex;
    /* The index's search keys: every index key shares its first ix_skip
     * bytes (the common prefix of the first and last); ix_word[i] holds the
     * next 8 bytes of key i, big-endian, zero-padded, so a binary search
     * compares integers in one small array and reads a key only on a tie. */
    size_t ix_skip;
    uint64_t *ix_word;
    uint64_t data_end; /* data blocks lie in [0, data_end) */
    kv_bloom *filter;
    kv_sst_properties props;
    uint8_t *props_buf; /* keeps smallest, largest and note */
    char *note;
    struct reader_tally *tally; /* KV_TALLY_STRIPES + 1 stripes */
};

/* A data block being read: its bytes, and the cache handle that keeps them
 * alive (NULL when they lie in the table's mapping). */
struct blockref {
    kv_cache_handle *h;
    const uint8_t *data;
    size_t len;
};

/* Records what went wrong (file, offset, reason) as this thread's error
 * text (kv_sst_error_text) and returns rc. */
int kv_sst_fail(int rc, const char *path, uint64_t off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Reads data block i of r into *b (see reader.c); use_cache: through the
 * block cache, when r has one. *hit says whether the cache had it. Counts
 * the read into r's counters. Release *b with kv_sst_release. */
int kv_sst_data_block(kv_sst_reader *r, size_t i, int use_cache, struct blockref *b, int *hit);

/* Gives back what kv_sst_data_block handed out; b may be empty. */
void kv_sst_release(kv_sst_reader *r, struct blockref *b);

/* The first index entry whose last key is >= key, or nindex. A key that
 * shares the index keys' common prefix is searched by ix_word; any other
 * (it lies outside their range) key by key. */
static inline size_t kv_sst_index_lower_bound(const kv_sst_reader *r, const void *key, size_t klen)
{
    size_t lo = 0, hi = r->nindex;
    size_t skip = r->ix_skip;
    if (r->ix_word && klen >= skip && (!skip || memcmp(key, r->index[0].key, skip) == 0)) {
        uint64_t w = kv_key_word(key, klen, skip);
        lo = kv_word_lower_bound(r->ix_word, hi, w);
        if (lo < hi && r->ix_word[lo] == w) { /* a tie: the keys decide among the tied */
            while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                const struct index_entry *e = &r->index[mid];
                if (r->ix_word[mid] == w && kv_key_cmp(e->key, e->klen, key, klen) < 0)
                    lo = mid + 1;
                else
                    hi = mid;
            }
        }
        return lo;
    }
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (kv_key_cmp(r->index[mid].key, r->index[mid].klen, key, klen) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

#endif /* KV_SST_READER_H */
