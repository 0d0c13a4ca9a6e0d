/* reader.h - what the table reader (reader.c) and the table iterator
 * (table_iter.c) share: the open reader's state, the data block read path
 * and the index search. Private to sstable/: not installed. */
#ifndef KV_SST_READER_H
#define KV_SST_READER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <kv/range_filter.h>

#include "cache.h"
#include "internal.h"
#include "order.h"
#include "util/file.h"
#include "util/tally.h"

/* One index entry: the handle of one data block, 24 bytes. */
struct index_entry {
    const uint8_t *key; /* last key of the block, in its sst_index's keys */
    uint32_t klen;
    uint32_t size; /* stored payload, without the block trailer */
    uint64_t off;
};

/* A table's decoded index: per data block its entry, and the search
 * words: every index key shares its first `skip` bytes (the common prefix
 * of the first and last); word[i] holds the next 8 bytes of key i,
 * big-endian, zero-padded, so a binary search compares integers in one
 * small array and reads a key only on a tie. Fixed once made; kept by the
 * reader or held in the block cache (paged). */
struct sst_index {
    struct index_entry *index;
    uint8_t *keys; /* every index key, end to end: one allocation */
    size_t skip;
    uint64_t *word;  /* on a cache line of its own (keycmp.h, fenced search);
                      * NULL under a comparator */
    uint64_t *fence; /* kv_word_fence_build over word */
    size_t bytes;    /* the memory of all of it */
};

/* What a reader counts (kv_sst_counters), striped per thread (tally.h),
 * and, for a pooled reader, its pins (files.c): each stripe holds the pins
 * taken by its thread less those it dropped, modulo 2^64, so a pin dropped
 * on another thread than took it still sums right. Two cache lines: the
 * first holds what every get counts; the device reads, on the second, are
 * counted only by readers opened with KV_SST_OPEN_DIRECT. */
struct reader_tally {
    _Alignas(64) _Atomic uint64_t gets;
    _Atomic uint64_t checks, negatives, false_pos, reads, bytes, hits;
    _Atomic uint64_t pins;
    _Alignas(64) _Atomic uint64_t dev_reads, dev_bytes;
    _Atomic uint64_t uses; /* a pageable reader's kept index or filter in use (paged.c) */
};

/* A pooled reader's file (kv_sst_reader.fstate; files.c). */
enum { KV_SST_FILE_CLOSED = 0, KV_SST_FILE_OPEN = 1, KV_SST_FILE_CLOSING = 2 };

/* An open table. Fixed after kv_sst_reader_open returns, but for the
 * atomic `seen` marks and the striped counters, so many threads may read
 * through it at once; and, in a reader opened with a pool of files
 * (kv_sst_reader_open_pooled), for its file: see files.c. */
struct kv_sst_reader {
    char *path;
    /* The open file and its mapping. Without a pool they live as long as
     * the reader. With one they are there while fstate is OPEN, and are
     * read only under a pin (kv_sst_pin), which keeps them there; the pool
     * closes and reopens them under its lock, when no pin is held. */
    kv_file *file;
    const uint8_t *map; /* the whole file mapped read-only, or NULL (pread) */
    int direct;         /* KV_SST_DIRECT_*: ON, the file is opened with O_DIRECT (each
                         * reopen too) and never mapped */
    kv_sst_files *files;  /* the pool, or NULL */
    _Atomic int fstate;   /* KV_SST_FILE_*: pooled readers only */
    _Atomic unsigned char referenced; /* used since the clock hand passed (files.c) */
    kv_sst_reader *ring_prev, *ring_next; /* [the pool's lock] open files, clock order */
    _Atomic uint8_t *seen; /* per data block: BLOCK_* (reader.c); NULL: out of memory at open */
    kv_sst_cache *cache;
    uint64_t id, size;
    const kv_comparator *cmp; /* the keys' order (order.h); NULL: bytewise */
    size_t nindex;            /* data blocks: index entries */
    /* The decoded index and the point filter, kept in memory ("pinned")
     * or, for a pageable reader (kv_sst_reader_pageable: a database with a
     * table_memory_budget), NULL while paged: each use then finds them in
     * the block cache or reads them from the file (paged.c's comment says
     * how a reader that uses the kept ones is safe from a switch). A reader
     * that is not pageable keeps both from open to close. */
    _Atomic(struct sst_index *) ix;
    _Atomic(kv_bloom *) filter;
    int has_filter; /* a usable filter: the file has one and it was not dropped */
    int pageable;
    uint64_t ioff, ilen, foff, flen; /* the index and filter blocks */
    struct kv_sst_page_sink *sink;   /* counts paged reads (NULL: none) */
    struct sst_retired *retired;     /* [keep's caller] unpinned, freed once unused */
    _Atomic uint64_t retired_bytes;  /* their memory */
    uint64_t data_end;               /* data blocks lie in [0, data_end) */
    void *ddict;        /* ZSTD_DDict of the table's dictionary (format version 2), made
                         * once at open and shared by every read; NULL: none */
    kv_sst_properties props;
    uint8_t *props_buf; /* keeps smallest, largest and note */
    /* The range tombstone block's payload (format version 3), checked at
     * open; NULL, rt_len 0: none. rt_set: the same decoded, made by the
     * first call that wants it (kv_sst_range_tombstone_get) and then fixed;
     * the store decodes the bytes into a set of its own instead. */
    uint8_t *rt;
    size_t rt_len;
    _Atomic(kv_rtset *) rt_set;
    /* The range filter (format version 4): its block's payload, checked
     * and decoded at open, and the decoded view of those bytes (which it
     * reads in place, so they live as long as it). NULL, rf_len 0: none.
     * rf_len is the properties' rf_size until the block is read. */
    uint8_t *rf_buf;
    size_t rf_len;
    kv_rfilter *rfilter;
    unsigned rf_keys; /* KV_SST_RF_KEYS_* (format.h) */
    char *note;
    struct reader_tally *tally; /* KV_TALLY_STRIPES + 1 stripes */
};

/* A data block being read: its bytes, and the cache handle that keeps them
 * alive (NULL when they lie in the table's mapping). A pooled reader's
 * block in the mapping holds a pin on the file (`pinned`), dropped by
 * kv_sst_release: the mapping stays while the bytes are in use. */
struct blockref {
    kv_cache_handle *h;
    const uint8_t *data;
    size_t len;
    int pinned;
};

/* Records what went wrong (file, offset, reason) as this thread's error
 * text (kv_sst_error_text) and returns rc. */
int kv_sst_fail(int rc, const char *path, uint64_t off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Reads data block i of r into *b (see reader.c); use_cache: through the
 * block cache, when r has one. *hit says whether the cache had it;
 * *device_bytes, the bytes a read asked of the device (0: none went there,
 * the cache or the page cache had it). Counts the read into r's counters.
 * Release *b with kv_sst_release. */
int kv_sst_data_block(kv_sst_reader *r, const struct sst_index *ix, size_t i, int use_cache,
                      struct blockref *b, int *hit, uint64_t *device_bytes);

/* Readahead for a reader of blocks in order (an iterator) of a table read
 * with O_DIRECT: a block the window lacks is read with the next
 * KV_SST_READAHEAD bytes after it (or before it, going backward) in one
 * device read, and later blocks come from the window. A compaction reads
 * its inputs this way at a device read per 256 KiB, not per block. */
#define KV_SST_READAHEAD ((size_t)256 << 10)
struct kv_sst_readahead {
    uint8_t *buf;  /* the bytes of [off, off + len) of the file; NULL: none */
    uint64_t off;
    size_t len;
};

/* kv_sst_data_block through the window ra (may be NULL: as kv_sst_data_block).
 * The window is used only for a table read with O_DIRECT. */
int kv_sst_data_block_ra(kv_sst_reader *r, const struct sst_index *ix, size_t i, int use_cache,
                         struct blockref *b, int *hit, uint64_t *device_bytes,
                         struct kv_sst_readahead *ra);

/* Frees the window's bytes; ra is empty after. */
void kv_sst_readahead_free(struct kv_sst_readahead *ra);

/* Gives back what kv_sst_data_block handed out; b may be empty. */
void kv_sst_release(kv_sst_reader *r, struct blockref *b);

/* ---- the index and filter in use (paged.c) -------------------------------------
 *
 * A use of r's index or filter holds it from get to put: the kept one
 * (counted in r's `uses`, so that a switch to paged frees it only once no
 * use holds it), or a block cache handle on the paged one, or nothing (a
 * reader that is not pageable: its kept ones live as long as it). */
struct sst_use {
    kv_cache_handle *h; /* a paged one's handle */
    int slot;           /* the stripe of `uses` counted; -1: none */
};

struct ixref {
    const struct sst_index *ix;
    struct sst_use u;
};

/* The index, or an error (a paged index unreadable: KV_EIO, KV_ECORRUPT,
 * KV_ENOMEM, with the error text set). Put it back with kv_sst_index_put. */
int kv_sst_index_get_slow(kv_sst_reader *r, struct ixref *ref);
void kv_sst_use_put_slow(kv_sst_reader *r, struct sst_use *u);

static inline int kv_sst_index_get(kv_sst_reader *r, struct ixref *ref)
{
    ref->u.h = NULL;
    ref->u.slot = -1;
    if (!r->pageable) {
        ref->ix = atomic_load_explicit(&r->ix, memory_order_relaxed);
        return KV_OK;
    }
    return kv_sst_index_get_slow(r, ref);
}

static inline void kv_sst_use_put(kv_sst_reader *r, struct sst_use *u)
{
    if (u->h || u->slot >= 0)
        kv_sst_use_put_slow(r, u);
}

/* The filter (NULL: the table has none, or it was dropped) for one use,
 * or an error as kv_sst_index_get's; put it back with kv_sst_use_put. */
int kv_sst_filter_get_slow(kv_sst_reader *r, kv_bloom **f, struct sst_use *u);

static inline int kv_sst_filter_get(kv_sst_reader *r, kv_bloom **f, struct sst_use *u)
{
    u->h = NULL;
    u->slot = -1;
    if (!r->pageable || !r->has_filter) {
        *f = r->has_filter ? atomic_load_explicit(&r->filter, memory_order_relaxed) : NULL;
        return KV_OK;
    }
    return kv_sst_filter_get_slow(r, f, u);
}

/* Decodes the index block's payload (raw, len; at `at`, for errors) into
 * *out, checked against r's data_end (paged.c shares it with open). */
int kv_sst_parse_index(kv_sst_reader *r, const uint8_t *raw, size_t len, uint64_t at,
                       struct sst_index **out, size_t *n);
void kv_sst_index_free(struct sst_index *ix);

/* Frees every retired index and filter (paged.c): at close, when no use is left. */
void kv_sst_reader_free_retired(kv_sst_reader *r);

/* reader.c's read of one block's payload, for paged.c: see read_block. */
int kv_sst_read_meta_block(kv_sst_reader *r, uint64_t off, uint64_t size, const uint8_t **out,
                           size_t *out_len, uint8_t **owned, uint64_t *device_bytes);

/* ---- pins (files.c) ----------------------------------------------------------
 *
 * A pooled reader's file may be read only under a pin. kv_sst_pin takes
 * one: 1 when it did (the file is open, and stays so until kv_sst_unpin),
 * 0 for a reader without a pool (its file is always open: nothing to pin),
 * or an error when the file had been closed and could not be opened again
 * (KV_ECORRUPT, KV_EIO, KV_ENOMEM, with the error text set). The fast path
 * is one atomic add on this thread's stripe and one load; the pool's lock
 * is taken only when the file is closed (or being closed). */
int kv_sst_pin_slow(kv_sst_reader *r);

static inline int kv_sst_pin(kv_sst_reader *r)
{
    if (!r->files)
        return 0;
    unsigned s = kv_tally_slot();
    /* Sequentially consistent, with the evictor's store of CLOSING and its
     * loads of the pins: either it sees this pin, or this load sees
     * CLOSING (or CLOSED) and the pin is given back (files.c). */
    atomic_fetch_add_explicit(&r->tally[s].pins, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&r->fstate, memory_order_seq_cst) == KV_SST_FILE_OPEN) {
        if (!atomic_load_explicit(&r->referenced, memory_order_relaxed))
            atomic_store_explicit(&r->referenced, 1, memory_order_relaxed);
        return 1;
    }
    atomic_fetch_sub_explicit(&r->tally[s].pins, 1, memory_order_release);
    return kv_sst_pin_slow(r);
}

/* Drops a pin kv_sst_pin took (on any thread). The release orders every
 * read of the file before it, ahead of the evictor's close. */
static inline void kv_sst_unpin(kv_sst_reader *r)
{
    unsigned s = kv_tally_slot();
    _Atomic uint64_t *p = &r->tally[s].pins;
    if (s < KV_TALLY_STRIPES) /* this thread's own stripe: no locked instruction */
        atomic_store_explicit(p, atomic_load_explicit(p, memory_order_relaxed) - 1,
                              memory_order_release);
    else
        atomic_fetch_sub_explicit(p, 1, memory_order_release);
}

/* Room in the pool for one more file, closing unpinned files first, least
 * recently used first; the caller then opens one (and calls
 * kv_sst_files_add) or gives the room back (kv_sst_files_unreserve). */
void kv_sst_files_reserve(kv_sst_files *f);
void kv_sst_files_unreserve(kv_sst_files *f);
/* r's file, opened in reserved room, joins the pool. */
void kv_sst_files_add(kv_sst_files *f, kv_sst_reader *r);
/* At kv_sst_reader_close: r leaves the pool, its file closed if open. */
void kv_sst_files_remove(kv_sst_reader *r);

/* Records in probe how its data block of `bytes` (with trailer) was had:
 * from the block cache (hit), or read, from the device when dev (the
 * bytes asked of it) is not 0. */
static inline void kv_sst_probe_block(kv_sst_probe *probe, int hit, uint64_t bytes, uint64_t dev)
{
    if (hit) {
        probe->cache_hit = 1;
        return;
    }
    probe->block_read = 1;
    probe->bytes_read = bytes;
    probe->device_read = dev > 0;
    probe->device_bytes = dev;
}

/* The gate's key-range check: 0 when no entry can match, because the key
 * is past the table's largest key, or every key of the table is above the
 * key's first prefix_len bytes, or (exact) the key is below the smallest;
 * else 1 (the filter and the blocks decide). Under a comparator, a cut
 * key has no place in its order: only the largest key (and, exact, the
 * smallest) is checked, and the search decides the rest. */
static inline int kv_sst_range_may_hold(const kv_sst_reader *r, const void *key, size_t klen,
                                        size_t prefix_len, int exact)
{
    const kv_sst_properties *p = &r->props;
    if (r->cmp)
        return p->entries > 0 && kv_sst_cmp(r->cmp, key, klen, p->largest, p->largest_len) <= 0 &&
               (!exact || kv_sst_cmp(r->cmp, key, klen, p->smallest, p->smallest_len) >= 0);
    size_t s_cut = p->smallest_len < prefix_len ? p->smallest_len : prefix_len;
    return p->entries > 0 && kv_key_cmp(key, klen, p->largest, p->largest_len) <= 0 &&
           kv_key_cmp(p->smallest, s_cut, key, prefix_len) <= 0 &&
           (!exact || kv_key_cmp(key, klen, p->smallest, p->smallest_len) >= 0);
}

/* The first index entry whose last key is >= key, or nindex. A key that
 * shares the index keys' common prefix is searched by ix->word; any other
 * (it lies outside their range), and every key under a comparator (no
 * word), key by key. */
static inline size_t kv_sst_index_lower_bound(const kv_sst_reader *r, const struct sst_index *ix,
                                              const void *key, size_t klen)
{
    size_t lo = 0, hi = r->nindex;
    size_t skip = ix->skip;
    if (ix->word && klen >= skip && (!skip || memcmp(key, ix->index[0].key, skip) == 0)) {
        uint64_t w = kv_key_word(key, klen, skip);
        size_t line = 0;
        lo = kv_word_lower_bound_fenced(ix->fence, ix->word, hi, w, &line);
#if defined(__GNUC__)
        /* The entry the Get reads next is among this line's: its lines
         * come in while the line of words is searched. */
        if (lo < hi) {
            const struct index_entry *e = &ix->index[line];
            for (size_t k = 0; k < KV_WORD_LINE * sizeof *e; k += 64)
                __builtin_prefetch((const char *)e + k);
            if (r->seen)
                __builtin_prefetch(&r->seen[line]);
        }
#endif
        if (lo < hi && ix->word[lo] == w) { /* a tie: the keys decide among the tied */
            while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                const struct index_entry *e = &ix->index[mid];
                if (ix->word[mid] == w && kv_key_cmp(e->key, e->klen, key, klen) < 0)
                    lo = mid + 1;
                else
                    hi = mid;
            }
        }
        return lo;
    }
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (kv_sst_cmp(r->cmp, ix->index[mid].key, ix->index[mid].klen, key, klen) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

#endif /* KV_SST_READER_H */
