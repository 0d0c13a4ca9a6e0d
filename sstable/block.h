/* block.h - the sorted, prefix-compressed blocks that hold a table's data
 * and index: a builder, and a cursor that checks every byte it decodes.
 *
 *   entry*  : varint shared | varint unshared | varint vlen | key[shared:] | value
 *   restarts: u32le offset of each restart entry (shared = 0 there)
 *   u32le   : number of restarts (>= 1)
 *
 * Internal to sstable/. */
#ifndef KV_SST_BLOCK_H
#define KV_SST_BLOCK_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <kv/sstable.h>
#include <kv/status.h>

#include "util/coding.h"

/* ---- builder ------------------------------------------------------------------- */

typedef struct {
    uint8_t *buf;
    size_t len, cap;
    uint32_t *restarts;
    size_t nrestarts, rcap;
    unsigned interval, counter;
    uint8_t *last;
    size_t last_len, last_cap;
    uint64_t entries;
} kv_blockb;

void kv_blockb_init(kv_blockb *b, unsigned restart_interval);
void kv_blockb_free(kv_blockb *b);
void kv_blockb_reset(kv_blockb *b);
/* Keys must increase; the builder does not check (the writer does). */
int kv_blockb_add(kv_blockb *b, const void *key, size_t klen, const void *val, size_t vlen);
/* Bytes the block would have if finished now. */
size_t kv_blockb_size(const kv_blockb *b);
/* Appends the restart array; the block is b->buf[0, b->len). */
int kv_blockb_finish(kv_blockb *b);

/* ---- cursor ---------------------------------------------------------------------- */

typedef struct {
    const uint8_t *data;   /* the block */
    size_t entries_end;    /* where the restart array starts */
    const uint8_t *restarts;
    uint32_t nrestarts;
    /* current entry */
    size_t off, next;
    uint8_t *key;          /* short_key, or a buffer of its own for longer keys */
    size_t klen, kcap;
    const uint8_t *val;
    size_t vlen;
    int valid;
    int err; /* KV_ECORRUPT once a bad entry was met */
    uint8_t short_key[48]; /* a Get's seek allocates nothing for keys this short */
    /* The key order (order.h); NULL: bytewise. Under a comparator the
     * check that each key is greater than the one before it needs the
     * previous key whole, kept in prev. */
    const kv_comparator *cmp;
    uint8_t *prev;
    size_t prev_cap;
    /* kv_blockc_prev's memory of the restart interval it decoded last
     * (block.c); NULL until the first step back. */
    struct kv_blockc_back *back;
} kv_blockc;

/* Checks the restart array of a block of `len` bytes whose keys are in
 * cmp's order (NULL: bytewise); KV_ECORRUPT. */
int kv_blockc_init(kv_blockc *c, const uint8_t *data, size_t len, const kv_comparator *cmp);
void kv_blockc_free(kv_blockc *c);
/* Asks for the cache lines of the restart keys a seek in the block of
 * `len` bytes at data will read, and returns at once: for a caller about to seek in several
 * blocks, so that their lines come in together. Reads only the block's
 * restart count and array, within [data, data + len), checked or not:
 * a damaged block gets useless prefetches, nothing worse. Cannot fail. */
void kv_blockc_prefetch(const uint8_t *data, size_t len);
/* Asks for the lines of the block's end, where its restart count and
 * array lie: what kv_blockc_init reads first, and kv_blockc_prefetch
 * needs. Reads nothing. Cannot fail. */
void kv_blockc_prefetch_end(const uint8_t *data, size_t len);
/* Positioning. Afterwards c->valid says whether the cursor is on an entry;
 * c->err is set (and sticks) when the block is damaged: an entry runs past
 * the block's end, or a key is not greater than the one before it. */
void kv_blockc_first(kv_blockc *c);
void kv_blockc_last(kv_blockc *c);
void kv_blockc_next(kv_blockc *c);
/* First entry whose key is >= key (valid = 0 when there is none). */
void kv_blockc_seek(kv_blockc *c, const void *key, size_t klen);
/* Last entry whose key is < key (valid = 0 when there is none). */
void kv_blockc_seek_before(kv_blockc *c, const void *key, size_t klen);
/* The entry before the current one (valid = 0 at the first). It decodes
 * forward from the last restart point before the current entry, so it
 * costs one restart interval's entries, and does not compare keys: the
 * caller checks the order it needs. */
void kv_blockc_prev(kv_blockc *c);

#endif /* KV_SST_BLOCK_H */
