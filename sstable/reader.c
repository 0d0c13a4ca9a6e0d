/* reader.c - opening a table, filter-gated gets, verification; the data
 * block read path the iterator (table_iter.c) shares through reader.h.
 * Nothing read from the file is trusted: every offset, length and checksum
 * is checked before use. Layout: doc/sstable_format.md. */
#define _POSIX_C_SOURCE 200809L
#include <kv/sstable.h>

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "block.h"
#include "cache.h"
#include "format.h"
#include "reader.h"
#include "util/error.h"
#include "util/file.h"
#include "util/hash.h"
#include "util/keycmp.h"
#include "util/tally.h"

#define COUNT(r, field, n)                                                                     \
    do {                                                                                       \
        unsigned slot_ = kv_tally_slot();                                                      \
        kv_tally_add(&(r)->tally[slot_].field, slot_, (n));                                    \
    } while (0)

/* ---- zstd decompression contexts -------------------------------------------- */

/* ZSTD_decompress makes and frees a context per call, which costs more
 * than decompressing a 4 KiB block: each thread keeps one context for
 * every table it reads, made on its first compressed block and freed when
 * the thread exits (a thread-specific key's destructor), so a read takes
 * no lock to get it. Where the key cannot be made, each read makes its
 * own. */
static pthread_key_t zctx_key;
static int zctx_key_ok;
static pthread_once_t zctx_once = PTHREAD_ONCE_INIT;
static _Thread_local ZSTD_DCtx *zctx_mine;

static void zctx_free(void *z)
{
    ZSTD_freeDCtx(z);
}

static void zctx_key_make(void)
{
    zctx_key_ok = pthread_key_create(&zctx_key, zctx_free) == 0;
}

/* This thread's context, or a new one the caller frees (*own); NULL:
 * out of memory. */
static ZSTD_DCtx *zctx_get(int *own)
{
    *own = 0;
    if (zctx_mine)
        return zctx_mine;
    ZSTD_DCtx *z = ZSTD_createDCtx();
    pthread_once(&zctx_once, zctx_key_make);
    if (z && zctx_key_ok && pthread_setspecific(zctx_key, z) == 0)
        zctx_mine = z;
    else
        *own = z != NULL;
    return z;
}

/* ---- errors ------------------------------------------------------------------- */

const char *kv_sst_error_text(void)
{
    return kv_error_text();
}

int kv_sst_fail(int rc, const char *path, uint64_t off, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return kv_error_set(rc, "%s: offset %llu: %s (%s)", path ? path : "?",
                        (unsigned long long)off, what, kv_strerror(rc));
}

/* ---- blocks --------------------------------------------------------------------- */

_Static_assert(KV_SST_DIRECT_ALIGN == KV_FILE_DIRECT_ALIGN, "sstable.h names util's alignment");

/* The n bytes at off as read_block fetches them through the window ra of a
 * direct file: a copy out of the window, which is read anew (one device
 * read, counted in *device_bytes) when it lacks them. */
static int read_ahead(kv_sst_reader *r, struct kv_sst_readahead *ra, uint64_t off, size_t n,
                      uint8_t **out, uint64_t *device_bytes)
{
    *out = NULL;
    if (!ra->buf || off < ra->off || off + n > ra->off + ra->len) {
        /* forward from the block, or back from its end when the reader
         * has gone backward past the window; never past the data blocks */
        int back = ra->buf && off < ra->off;
        kv_sst_readahead_free(ra);
        uint64_t lo = off, hi = off + n; /* the block, at least */
        if (back) {
            lo = hi > KV_SST_READAHEAD ? hi - KV_SST_READAHEAD : 0;
            if (lo > off)
                lo = off;
        } else {
            uint64_t end = off + KV_SST_READAHEAD;
            if (end > r->data_end)
                end = r->data_end;
            if (end > hi)
                hi = end;
        }
        int rc = kv_file_read_alloc(r->file, lo, (size_t)(hi - lo), &ra->buf, device_bytes);
        if (rc != KV_OK)
            return rc;
        ra->off = lo;
        ra->len = (size_t)(hi - lo);
    }
    if (!(*out = malloc(n ? n : 1)))
        return KV_ENOMEM;
    memcpy(*out, ra->buf + (off - ra->off), n);
    return KV_OK;
}

void kv_sst_readahead_free(struct kv_sst_readahead *ra)
{
    if (!ra)
        return;
    free(ra->buf);
    ra->buf = NULL;
    ra->off = 0;
    ra->len = 0;
}

/* Reads the block at (off, size) plus its trailer, checks the checksum
 * (unless `checked` says it passed in the mapping before) and returns the
 * raw payload: *out, *out_len. *owned is the malloc'ed buffer that holds
 * it, for the caller to free; NULL when *out points into the table's
 * mapping (an uncompressed block of a mapped table: no copy at all). The
 * table is mapped only once it is open, so the blocks open reads are
 * always owned. allow_zstd: data blocks only. *device_bytes: what the
 * read asked of the device (a file opened with O_DIRECT: the aligned
 * range around the block; else 0). */
static int read_block(kv_sst_reader *r, uint64_t off, uint64_t size, int allow_zstd, int checked,
                      const uint8_t **out, size_t *out_len, uint8_t **owned,
                      uint64_t *device_bytes, struct kv_sst_readahead *ra)
{
    *out = NULL;
    *owned = NULL;
    *device_bytes = 0;
    if (size > KV_SST_MAX_RAW_BLOCK)
        return kv_sst_fail(KV_ECORRUPT, r->path, off, "block of %llu bytes",
                           (unsigned long long)size);
    size_t n = (size_t)size + KV_SST_BLOCK_TRAILER;
    const uint8_t *in;
    uint8_t *buf = NULL; /* `in` when it was copied out of the file */
    int rc;
    if (r->map) {
        rc = kv_file_view(r->file, off, n, &in);
    } else {
        /* One read into memory of its own, which the block cache may keep:
         * with O_DIRECT the aligned range around the block, the block then
         * moved to the buffer's start (a copy of 4 KiB, beside a device
         * read). */
        if (ra && kv_file_direct(r->file))
            rc = read_ahead(r, ra, off, n, &buf, device_bytes);
        else
            rc = kv_file_read_alloc(r->file, off, n, &buf, device_bytes);
        in = buf;
    }
    if (rc != KV_OK) {
        free(buf);
        return kv_sst_fail(rc, r->path, off,
                           rc == KV_ECORRUPT ? "file ends inside a block" : "read failed");
    }
    /* checked: read from this mapping before, uncompressed and intact */
    uint8_t kind = checked ? KV_COMPRESSION_NONE : in[size];
    if (!checked && XXH3_64bits(in, (size_t)size + 1) != kv_get64(in + size + 1)) {
        free(buf);
        return kv_sst_fail(KV_ECORRUPT, r->path, off, "block checksum mismatch");
    }
    if (kind == KV_COMPRESSION_NONE) {
        *out = in;
        *out_len = (size_t)size;
        *owned = buf;
        return KV_OK;
    }
    if ((kind != KV_COMPRESSION_ZSTD && kind != KV_SST_BLOCK_ZSTD_DICT) || !allow_zstd ||
        (kind == KV_SST_BLOCK_ZSTD_DICT && !r->ddict)) {
        free(buf);
        return kv_sst_fail(KV_ECORRUPT, r->path, off, "unknown block compression %u", kind);
    }
    unsigned long long raw = ZSTD_getFrameContentSize(in, (size_t)size);
    if (raw == ZSTD_CONTENTSIZE_ERROR || raw == ZSTD_CONTENTSIZE_UNKNOWN ||
        raw > KV_SST_MAX_RAW_BLOCK) {
        free(buf);
        return kv_sst_fail(KV_ECORRUPT, r->path, off, "bad zstd frame");
    }
    /* The size is the frame's claim: nothing is allocated for more than
     * the frame's bytes could hold. */
    if (raw / KV_SST_ZSTD_MAX_RATIO > size) {
        free(buf);
        return kv_sst_fail(KV_ECORRUPT, r->path, off,
                           "zstd frame of %llu bytes claims %llu bytes decompressed",
                           (unsigned long long)size, raw);
    }
    uint8_t *dst = malloc(raw ? (size_t)raw : 1);
    if (!dst) {
        free(buf);
        return KV_ENOMEM;
    }
    int own;
    ZSTD_DCtx *z = zctx_get(&own);
    if (!z) {
        free(buf);
        free(dst);
        return KV_ENOMEM;
    }
    size_t got = kind == KV_SST_BLOCK_ZSTD_DICT
                     ? ZSTD_decompress_usingDDict(z, dst, (size_t)raw, in, (size_t)size, r->ddict)
                     : ZSTD_decompressDCtx(z, dst, (size_t)raw, in, (size_t)size);
    if (own)
        ZSTD_freeDCtx(z);
    free(buf);
    if (ZSTD_isError(got) || got != raw) {
        free(dst);
        return kv_sst_fail(KV_ECORRUPT, r->path, off, "zstd: cannot decompress");
    }
    *out = dst;
    *out_len = (size_t)raw;
    *owned = dst;
    return KV_OK;
}

int kv_sst_read_meta_block(kv_sst_reader *r, uint64_t off, uint64_t size, const uint8_t **out,
                           size_t *out_len, uint8_t **owned, uint64_t *device_bytes)
{
    return read_block(r, off, size, 0, 0, out, out_len, owned, device_bytes, NULL);
}

/* What a table's reader knows of each data block (r->seen): CHECKED, read
 * in place in the mapping and its checksum checked; CACHED, read through
 * the block cache (the block is compressed, or the file was not mapped),
 * so a later read looks in the cache before it needs the file. */
enum { BLOCK_UNSEEN = 0, BLOCK_CHECKED = 1, BLOCK_CACHED = 2 };

/* A data block. An uncompressed block of a mapped table is read in place
 * (no copy) and bypasses the block cache, as the page cache holds it
 * already; its checksum is checked the first time it is read through this
 * reader, as a block cache checks a block once when it fills (a table
 * never changes while it is open). Any other block goes through the block
 * cache, when there is one, and so does every block of a table opened
 * with O_DIRECT, which is not mapped. Counts reads; *hit says whether the
 * cache had it. A pooled reader's file is pinned while it is read, and a block read
 * in place keeps the pin until kv_sst_release; a block found in the cache
 * needs no file. */
int kv_sst_data_block(kv_sst_reader *r, const struct sst_index *ix, size_t i, int use_cache,
                      struct blockref *b, int *hit, uint64_t *device_bytes)
{
    return kv_sst_data_block_ra(r, ix, i, use_cache, b, hit, device_bytes, NULL);
}

int kv_sst_data_block_ra(kv_sst_reader *r, const struct sst_index *ix, size_t i, int use_cache,
                         struct blockref *b, int *hit, uint64_t *device_bytes,
                         struct kv_sst_readahead *ra)
{
    const struct index_entry *e = &ix->index[i];
    *hit = 0;
    *device_bytes = 0;
    b->h = NULL;
    b->data = NULL;
    b->len = 0;
    b->pinned = 0;
    /* A block known to go through the cache is sought there before the
     * file is pinned; any other may lie in the mapping, which only a pin
     * shows. */
    int seen = r->seen ? atomic_load_explicit(&r->seen[i], memory_order_relaxed) : BLOCK_UNSEEN;
    int pinned = 0;
    if (seen != BLOCK_CACHED && (pinned = kv_sst_pin(r)) < 0)
        return pinned;
    /* In place: an uncompressed block of a mapped table. The kind byte is
     * looked at once (in bounds: open checked that every block and trailer
     * lies below data_end); later reads of the block use what r->seen
     * remembers and touch no byte of it but those they need. */
    if (seen == BLOCK_UNSEEN && r->seen &&
        (!r->map || r->map[e->off + e->size] != KV_COMPRESSION_NONE))
        atomic_store_explicit(&r->seen[i], seen = BLOCK_CACHED, memory_order_relaxed);
    int in_place = seen != BLOCK_CACHED && r->map; /* r->map only under a pin */
    if (!in_place && use_cache && r->cache && (b->h = kv_cache_lookup(r->cache, r->id, e->off))) {
        if (pinned)
            kv_sst_unpin(r);
        COUNT(r, hits, 1);
        *hit = 1;
        b->data = kv_cache_data(b->h, &b->len);
        return KV_OK;
    }
    if (!pinned && (pinned = kv_sst_pin(r)) < 0) /* not in the cache: read from the file */
        return pinned;
    const uint8_t *raw;
    uint8_t *owned;
    size_t len;
    COUNT(r, reads, 1);
    COUNT(r, bytes, e->size + KV_SST_BLOCK_TRAILER);
    int checked = in_place && seen == BLOCK_CHECKED;
    uint64_t dev = 0;
    int rc = read_block(r, e->off, e->size, 1, checked, &raw, &len, &owned, &dev, ra);
    if (dev) { /* O_DIRECT: it reached the device, whether or not it is sound */
        COUNT(r, dev_reads, 1);
        COUNT(r, dev_bytes, dev);
        *device_bytes = dev;
    }
    if (rc != KV_OK || owned) { /* the block is in memory of its own: the file may go */
        if (pinned)
            kv_sst_unpin(r);
        pinned = 0;
    }
    if (rc != KV_OK)
        return rc;
    if (!owned) {
        if (!checked)
            atomic_store_explicit(&r->seen[i], BLOCK_CHECKED, memory_order_relaxed);
#if defined(__GNUC__)
        /* A search of the block hops from the restart array at its end to
         * restart keys and on through entries, each hop a cache miss when
         * the block is cold: ask for all of its lines at once, restart
         * array first, so the hops wait for one memory latency, not five. */
        if (checked)
            for (size_t at = len; at > 0; at = at > 64 ? at - 64 : 0)
                __builtin_prefetch(raw + at - 1);
#endif
        b->data = raw;
        b->len = len;
        b->pinned = pinned;
        return KV_OK;
    }
    b->h = kv_cache_insert(use_cache ? r->cache : NULL, r->id, e->off, owned, len);
    if (!b->h)
        return KV_ENOMEM;
    b->data = kv_cache_data(b->h, &b->len);
    return KV_OK;
}

void kv_sst_release(kv_sst_reader *r, struct blockref *b)
{
    if (b->h)
        kv_cache_release(r->cache, b->h);
    if (b->pinned)
        kv_sst_unpin(r);
    b->h = NULL;
    b->data = NULL;
    b->pinned = 0;
}

/* ---- open ---------------------------------------------------------------------- */

void kv_sst_index_free(struct sst_index *ix)
{
    if (!ix)
        return;
    free(ix->keys);
    free(ix->index);
    free(ix->word);
    free(ix->fence);
    free(ix);
}

static int parse_index_into(kv_sst_reader *r, const uint8_t *raw, size_t len, uint64_t at,
                            struct sst_index *ix, size_t *nindex);

int kv_sst_parse_index(kv_sst_reader *r, const uint8_t *raw, size_t len, uint64_t at,
                       struct sst_index **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    struct sst_index *ix = calloc(1, sizeof *ix);
    if (!ix)
        return KV_ENOMEM;
    int rc = parse_index_into(r, raw, len, at, ix, n);
    if (rc != KV_OK) {
        kv_sst_index_free(ix);
        return rc;
    }
    *out = ix;
    return KV_OK;
}

/* The index block's entries into ix, *nindex of them: each checked (its
 * handle follows the last, its key above the last's) and the whole
 * covering the data blocks. */
static int parse_index_into(kv_sst_reader *r, const uint8_t *raw, size_t len, uint64_t at,
                            struct sst_index *ix, size_t *nindex)
{
    kv_blockc c;
    int rc = kv_blockc_init(&c, raw, len, r->cmp);
    if (rc != KV_OK)
        return kv_sst_fail(rc, r->path, at, "bad index block");
    size_t n = 0;
    size_t cap = 0;
    uint64_t next_off = 0;
    /* Every index entry is a restart point, so its whole key is stored in
     * the block: the keys kept here add up to at most the block's bytes
     * (entries that share a prefix would let a small block spell out a
     * quadratic amount of key bytes), so room for them is had at once, and
     * cut to their size once they are all in. */
    size_t key_bytes = 0;
    uint8_t *keys = malloc(len);
    if (!keys) {
        kv_blockc_free(&c);
        return KV_ENOMEM;
    }
    for (kv_blockc_first(&c); c.valid; kv_blockc_next(&c)) {
        const uint8_t *p = c.val, *end = c.val + c.vlen;
        uint64_t off, size;
        if (c.klen > len - key_bytes) {
            kv_blockc_free(&c);
            free(keys);
            return kv_sst_fail(KV_ECORRUPT, r->path, at,
                               "index entry %zu: keys add up to more than the block's %zu bytes", n,
                               len);
        }
        if (!kv_get_varint(&p, end, &off) || !kv_get_varint(&p, end, &size) || p != end ||
            off != next_off || size > UINT32_MAX || size > r->data_end ||
            off > r->data_end - size || r->data_end - size - off < KV_SST_BLOCK_TRAILER ||
            (n > 0 &&
             kv_sst_cmp(r->cmp, ix->index[n - 1].key, ix->index[n - 1].klen, c.key, c.klen) >= 0)) {
            kv_blockc_free(&c);
            free(keys);
            return kv_sst_fail(KV_ECORRUPT, r->path, at, "bad index entry %zu", n);
        }
        if (n == cap) {
            size_t nc = cap ? 2 * cap : 64;
            struct index_entry *ni = realloc(ix->index, nc * sizeof *ni);
            if (!ni) {
                kv_blockc_free(&c);
                free(keys);
                return KV_ENOMEM;
            }
            ix->index = ni;
            cap = nc;
        }
        struct index_entry *e = &ix->index[n];
        memcpy(keys + key_bytes, c.key, c.klen);
        e->key = keys + key_bytes;
        e->klen = (uint32_t)c.klen;
        e->off = off;
        e->size = (uint32_t)size;
        key_bytes += c.klen;
        n++;
        next_off = off + size + KV_SST_BLOCK_TRAILER;
    }
    /* The keys move to room of their own size (the block's bytes hold
     * each entry's handle and restart besides), the entries to theirs. */
    ix->keys = malloc(key_bytes ? key_bytes : 1);
    if (ix->keys) {
        if (key_bytes)
            memcpy(ix->keys, keys, key_bytes);
        for (size_t i = 0; i < n; i++)
            ix->index[i].key = ix->keys + (ix->index[i].key - keys);
    }
    free(keys);
    if (!ix->keys) {
        kv_blockc_free(&c);
        n = 0;
        return KV_ENOMEM;
    }
    if (n && n < cap) {
        struct index_entry *ni = realloc(ix->index, n * sizeof *ni);
        if (ni)
            ix->index = ni;
    }
    rc = c.err;
    kv_blockc_free(&c);
    if (rc != KV_OK)
        return kv_sst_fail(rc, r->path, at, "bad index block entry");
    if (next_off != r->data_end)
        return kv_sst_fail(KV_ECORRUPT, r->path, at, "index does not cover the data blocks");
    /* The search words stand for bytewise order only: under a comparator
     * the index is searched key by key (kv_sst_index_lower_bound). */
    if (n && !r->cmp) {
        const struct index_entry *a = &ix->index[0], *z = &ix->index[n - 1];
        size_t skip = kv_key_common_prefix(a->key, a->klen, z->key, z->klen);
        ix->skip = skip;
        size_t line = KV_WORD_LINE * sizeof *ix->word;
        size_t wbytes = (n * sizeof *ix->word + line - 1) / line * line;
        if (!(ix->word = aligned_alloc(line, wbytes)) ||
            !(ix->fence = malloc(kv_word_fence_count(n) * sizeof *ix->fence)))
            return KV_ENOMEM;
        for (size_t i = 0; i < n; i++)
            ix->word[i] = kv_key_word(ix->index[i].key, ix->index[i].klen, skip);
        kv_word_fence_build(ix->word, n, ix->fence);
    }
    /* What this index holds: per data block its entry, search word, a
     * fence word per 8 blocks and its key. */
    ix->bytes = sizeof *ix + key_bytes + n * (sizeof *ix->index + sizeof *ix->word) +
                kv_word_fence_count(n) * sizeof *ix->fence;
    *nindex = n;
    return KV_OK;
}

/* The scan filter fields of version-6 properties (a format version 4
 * table), checked against each other and the filter fields parsed before
 * them: a range filter or prefix entries, or both (a table with neither is
 * written at an older version); prefixes only in a filter of the caller's
 * hashes, which counts them among its keys. */
static int parse_scan_props(kv_sst_reader *r, const uint8_t *raw, uint64_t at)
{
    kv_sst_properties *p = &r->props;
    uint64_t rf = kv_get64(raw + KV_SST_PROPS_OFF_RF_SIZE);
    uint32_t plen = kv_get32(raw + KV_SST_PROPS_OFF_PREFIX_LEN);
    uint32_t rf_keys = kv_get32(raw + KV_SST_PROPS_OFF_RF_KEYS);
    uint64_t pkeys = kv_get64(raw + KV_SST_PROPS_OFF_PREFIX_KEYS);
    const char *why = NULL;
    if (rf > r->size || rf > KV_SST_MAX_RAW_BLOCK)
        why = "range filter block larger than the file";
    else if (rf_keys > KV_SST_RF_KEYS_OWN || (rf_keys == KV_SST_RF_KEYS_OWN && rf == 0))
        why = "bad range filter key kind";
    else if ((plen == 0) != (pkeys == 0))
        why = "prefix length and prefix count disagree";
    else if (rf == 0 && pkeys == 0)
        why = "version 4 table with neither a range filter nor prefixes";
    else if (pkeys && p->filter_hash != KV_SST_FILTER_HASH_CALLER &&
             p->filter_hash != KV_SST_FILTER_HASH_KEYED)
        why = "prefixes in a filter that does not hold the caller's hashes";
    else if (pkeys > p->filter_keys || pkeys > p->entries || p->filter_keys - pkeys > p->entries)
        why = "prefix count disagrees with the filter's keys and the entries";
    if (why)
        return kv_sst_fail(KV_ECORRUPT, r->path, at,
                           "%s (range filter %llu bytes, prefix length "
                           "%u, %llu prefixes, %llu filter keys, %llu entries)",
                           why, (unsigned long long)rf, plen, (unsigned long long)pkeys,
                           (unsigned long long)p->filter_keys, (unsigned long long)p->entries);
    r->rf_len = (size_t)rf; /* its bytes are read after the range tombstones' */
    r->rf_keys = rf_keys;
    p->prefix_len = plen;
    p->prefix_keys = pkeys;
    return KV_OK;
}

static int parse_properties(kv_sst_reader *r, uint8_t *raw, size_t len, uint64_t at,
                            uint32_t table_version)
{
    /* Version 1 lacks the filter_hash field: its filters hold whole keys.
     * Version 4, a table with a dictionary (format version 2) and only
     * such a table, adds its size; version 5, a table with range
     * tombstones (format version 3) and only such a table, adds theirs
     * (and may have no dictionary: dict_size 0); version 6, a table with
     * scan filters (format version 4) and only such a table, adds theirs
     * (and may have neither: dict_size and rt_size 0). */
    uint32_t version = len >= 4 ? kv_get32(raw + KV_SST_PROPS_OFF_VERSION) : 0;
    size_t fixed = version == 1   ? KV_SST_PROPS_FIXED_V1
                   : version == 4 ? KV_SST_PROPS_FIXED_V4
                   : version == 5 ? KV_SST_PROPS_FIXED_V5
                   : version == 6 ? KV_SST_PROPS_FIXED_V6
                                  : KV_SST_PROPS_FIXED;
    if (version < 1 || version > KV_SST_PROPS_VERSION || len < fixed ||
        (version == 4) != (table_version == KV_SST_VERSION_DICT) ||
        (version == 5) != (table_version == KV_SST_VERSION_RT) ||
        (version == 6) != (table_version == KV_SST_VERSION))
        return kv_sst_fail(KV_ECORRUPT, r->path, at, "bad properties block");
    uint64_t dict = version >= 4 ? kv_get64(raw + KV_SST_PROPS_OFF_DICT_SIZE) : 0;
    if ((version == 4 && dict == 0) || dict > KV_SST_MAX_DICT)
        return kv_sst_fail(KV_ECORRUPT, r->path, at, "dictionary of %llu bytes",
                           (unsigned long long)dict);
    uint64_t rt = version >= 5 ? kv_get64(raw + KV_SST_PROPS_OFF_RT_SIZE) : 0;
    if ((version == 5 && rt == 0) || rt > r->size)
        return kv_sst_fail(KV_ECORRUPT, r->path, at, "range tombstone block of %llu bytes",
                           (unsigned long long)rt);
    r->rt_len = (size_t)rt; /* its bytes are read after the dictionary's */
    kv_sst_properties *p = &r->props;
    uint64_t slen = kv_get32(raw + KV_SST_PROPS_OFF_SMALLEST_LEN),
             llen = kv_get32(raw + KV_SST_PROPS_OFF_LARGEST_LEN),
             nlen = kv_get32(raw + KV_SST_PROPS_OFF_NOTE_LEN);
    if (fixed + slen + llen + nlen != len)
        return kv_sst_fail(KV_ECORRUPT, r->path, at, "bad properties lengths");
    uint64_t bpk = kv_get64(raw + KV_SST_PROPS_OFF_BITS_PER_KEY); /* all bits 0: no filter */
    int has_filter = bpk != 0;
    p->filter_hash = version == 1 ? (has_filter ? KV_SST_FILTER_HASH_KEY : KV_SST_FILTER_HASH_NONE)
                                  : (int)kv_get32(raw + KV_SST_PROPS_OFF_FILTER_HASH);
    /* Versions 3 to 6 alone may hold a keyed filter. */
    int max_hash = version >= 3 ? KV_SST_FILTER_HASH_KEYED : KV_SST_FILTER_HASH_CALLER;
    if (p->filter_hash < KV_SST_FILTER_HASH_NONE || p->filter_hash > max_hash ||
        (p->filter_hash == KV_SST_FILTER_HASH_NONE) != !has_filter)
        return kv_sst_fail(KV_ECORRUPT, r->path, at, "bad filter hash kind");
    r->note = malloc((size_t)nlen + 1);
    if (!r->note)
        return KV_ENOMEM;
    memcpy(r->note, raw + fixed + slen + llen, (size_t)nlen);
    r->note[nlen] = '\0';
    p->format_version = table_version;
    p->dict_bytes = (size_t)dict;
    p->compression = (int)kv_get32(raw + KV_SST_PROPS_OFF_COMPRESSION);
    p->entries = kv_get64(raw + KV_SST_PROPS_OFF_ENTRIES);
    p->raw_key_bytes = kv_get64(raw + KV_SST_PROPS_OFF_RAW_KEY_BYTES);
    p->raw_value_bytes = kv_get64(raw + KV_SST_PROPS_OFF_RAW_VALUE_BYTES);
    p->data_blocks = kv_get64(raw + KV_SST_PROPS_OFF_DATA_BLOCKS);
    p->data_raw_bytes = kv_get64(raw + KV_SST_PROPS_OFF_DATA_RAW_BYTES);
    p->data_stored_bytes = kv_get64(raw + KV_SST_PROPS_OFF_DATA_STORED_BYTES);
    p->filter_layout = (kv_bloom_layout)kv_get32(raw + KV_SST_PROPS_OFF_FILTER_LAYOUT);
    p->filter_k = kv_get32(raw + KV_SST_PROPS_OFF_FILTER_K);
    p->filter_bits_per_key = kv_bits_f64(bpk);
    p->filter_keys = kv_get64(raw + KV_SST_PROPS_OFF_FILTER_KEYS);
    p->filter_seed = kv_get64(raw + KV_SST_PROPS_OFF_FILTER_SEED);
    p->smallest = raw + fixed;
    p->smallest_len = (size_t)slen;
    p->largest = raw + fixed + slen;
    p->largest_len = (size_t)llen;
    p->note = r->note;
    p->file_size = r->size;
    const struct sst_index *ix = atomic_load_explicit(&r->ix, memory_order_relaxed); /* open's */
    if (p->data_blocks != r->nindex ||
        (r->nindex && (p->largest_len != ix->index[r->nindex - 1].klen ||
                       (p->largest_len &&
                        memcmp(p->largest, ix->index[r->nindex - 1].key, p->largest_len) != 0))) ||
        kv_sst_cmp(r->cmp, p->smallest, p->smallest_len, p->largest, p->largest_len) > 0)
        return kv_sst_fail(KV_ECORRUPT, r->path, at, "properties disagree with the index");
    int rc = version == 6 ? parse_scan_props(r, raw, at) : KV_OK;
    if (rc != KV_OK)
        return rc;
    r->props_buf = raw;
    return KV_OK;
}

void kv_sst_reader_range_tombstones(const kv_sst_reader *r, const uint8_t **p, size_t *len)
{
    if (p)
        *p = r ? r->rt : NULL;
    if (len)
        *len = r ? r->rt_len : 0;
}

size_t kv_sst_range_tombstone_count(const kv_sst_reader *r)
{
    /* The block's first 4 bytes: its fragment count (checked at open). */
    return r && r->rt ? kv_get32(r->rt) : 0;
}

/* The table's range tombstones as a set. Bytewise, its order is checked;
 * under a comparator, it may be a store's, whose comparator orders stored
 * keys, not the user keys of its tombstones: there only their shape is. */
static int decode_rt(const kv_sst_reader *r, kv_rtset **s)
{
    return r->cmp ? kv_rtset_decode_unordered(r->rt, r->rt_len, s)
                  : kv_rtset_decode(NULL, r->rt, r->rt_len, s);
}

int kv_sst_range_tombstone_get(const kv_sst_reader *r, size_t i, kv_sst_range_tombstone *out)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (!r || !out || i >= kv_sst_range_tombstone_count(r))
        return KV_EINVAL;
    kv_sst_reader *w = (kv_sst_reader *)r; /* rt_set is made once, then fixed */
    kv_rtset *s = atomic_load_explicit(&w->rt_set, memory_order_acquire);
    if (!s) {
        int rc = decode_rt(r, &s);
        if (rc != KV_OK)
            return rc; /* KV_ENOMEM: it was checked at open */
        kv_rtset *none = NULL;
        if (!atomic_compare_exchange_strong_explicit(&w->rt_set, &none, s, memory_order_acq_rel,
                                                     memory_order_acquire)) {
            kv_rtset_unref(s); /* another thread's came first */
            s = none;
        }
    }
    kv_rt_fragment f;
    kv_rtset_fragment(s, i, &f);
    *out = (kv_sst_range_tombstone){f.start, f.slen, f.end, f.elen, f.seqs, f.nseq};
    return KV_OK;
}

void kv_sst_reader_drop_filter(kv_sst_reader *r)
{
    if (!r)
        return;
    kv_bloom_free(atomic_load_explicit(&r->filter, memory_order_relaxed));
    atomic_store_explicit(&r->filter, NULL, memory_order_relaxed);
    r->has_filter = 0; /* its prefixes go with it: kv_sst_reader_prefix_len says 0 */
}

void kv_sst_reader_close(kv_sst_reader *r)
{
    if (!r)
        return;
    if (r->files)
        kv_sst_files_remove(r); /* closes the file, if open */
    kv_sst_index_free(atomic_load_explicit(&r->ix, memory_order_relaxed));
    free((void *)r->seen);
    kv_bloom_free(atomic_load_explicit(&r->filter, memory_order_relaxed));
    kv_sst_reader_free_retired(r);
    ZSTD_freeDDict(r->ddict);
    free(r->rt);
    kv_rtset_unref(atomic_load_explicit(&r->rt_set, memory_order_relaxed));
    kv_rfilter_free(r->rfilter);
    free(r->rf_buf);
    free(r->props_buf);
    free(r->note);
    kv_file_close(r->file);
    free(r->path);
    free(r->tally);
    free(r);
}

/* Where a table's blocks are, as its trailer gives them. */
struct block_places {
    uint64_t toff;       /* the trailer */
    uint64_t ioff, ilen; /* the index block */
    uint64_t poff, plen; /* the properties block */
    uint64_t foff, flen; /* the filter block (flen 0: none) */
    uint32_t version;    /* KV_SST_VERSION, _RT, _DICT or _NO_DICT */
};

/* Reads r's trailer (the last KV_SST_TRAILER of r->size bytes) and checks
 * its magic, checksum, format version and checksum kind, and that the
 * block handles it holds are in place: data < index < properties <
 * (dictionary, versions 2 and 3) < (range tombstones, version 3) < filter
 * <= trailer. The sizes of the blocks between the properties and the
 * filter are in the properties: read_between checks that they fill that
 * gap. A version this reader does not know is refused here, by number. */
static int read_trailer(kv_sst_reader *r, struct block_places *bp)
{
    const char *path = r->path;
    if (r->size < KV_SST_TRAILER)
        return kv_sst_fail(KV_ECORRUPT, path, 0, "file of %llu bytes is too small for a table",
                           (unsigned long long)r->size);
    uint8_t t[KV_SST_TRAILER];
    uint64_t toff = r->size - KV_SST_TRAILER;
    int rc = kv_file_pread(r->file, toff, t, sizeof t);
    if (rc != KV_OK)
        return kv_sst_fail(rc, path, toff, "cannot read the trailer");
    if (memcmp(t + KV_SST_TRAILER_OFF_MAGIC, KV_SST_MAGIC, 8) != 0)
        return kv_sst_fail(KV_ECORRUPT, path, toff, "not a kv table (bad magic)");
    if (XXH3_64bits(t, KV_SST_TRAILER_OFF_CHECKSUM) != kv_get64(t + KV_SST_TRAILER_OFF_CHECKSUM))
        return kv_sst_fail(KV_ECORRUPT, path, toff, "trailer checksum mismatch");
    uint32_t version = kv_get32(t + KV_SST_TRAILER_OFF_VERSION);
    if (version < KV_SST_VERSION_NO_DICT || version > KV_SST_VERSION ||
        kv_get32(t + KV_SST_TRAILER_OFF_CHECKSUM_KIND) != KV_SST_CHECKSUM_XXH3)
        return kv_sst_fail(KV_ECORRUPT, path, toff, "unknown format version %u or checksum kind %u",
                           version, kv_get32(t + KV_SST_TRAILER_OFF_CHECKSUM_KIND));
    uint64_t ioff = kv_get64(t + KV_SST_TRAILER_OFF_INDEX_OFF),
             ilen = kv_get64(t + KV_SST_TRAILER_OFF_INDEX_SIZE),
             poff = kv_get64(t + KV_SST_TRAILER_OFF_PROPS_OFF),
             plen = kv_get64(t + KV_SST_TRAILER_OFF_PROPS_SIZE),
             foff = kv_get64(t + KV_SST_TRAILER_OFF_FILTER_OFF),
             flen = kv_get64(t + KV_SST_TRAILER_OFF_FILTER_SIZE);
    const uint64_t B = KV_SST_BLOCK_TRAILER;
    if (ilen > toff || ioff > toff - ilen || toff - ilen - ioff < B || poff != ioff + ilen + B ||
        plen > toff || poff > toff - plen || toff - plen - poff < B ||
        (version == KV_SST_VERSION_NO_DICT ? foff != poff + plen + B
                                           : foff < poff + plen + B || foff > toff) ||
        (flen ? flen + B : 0) != toff - foff)
        return kv_sst_fail(KV_ECORRUPT, path, toff, "block handles out of place");
    *bp = (struct block_places){toff, ioff, ilen, poff, plen, foff, flen, version};
    return KV_OK;
}

/* A block read at open and kept while the table is open (range
 * tombstones, range filter): *len bytes of payload at off, checked, in a
 * buffer of its own at *out. On failure *size is zeroed, so that nothing
 * reads the block. */
static int read_kept(kv_sst_reader *r, uint64_t off, size_t *size, uint8_t **out, size_t *len)
{
    const uint8_t *data;
    uint8_t *raw = NULL;
    uint64_t dev; /* open's reads are not data-block reads: not counted */
    *len = 0;
    int rc = read_block(r, off, *size, 0, 0, &data, len, &raw, &dev, NULL);
    if (rc != KV_OK) {
        *size = 0;
        return rc;
    }
    memmove(raw, data, *len); /* open's reads are owned (not mapped yet) */
    *out = raw;
    return KV_OK;
}

/* The range tombstone block of a version-3 table, at roff: read, checked
 * (its encoding, in the reader's key order) and kept. */
static int read_range_tombstones(kv_sst_reader *r, uint64_t roff)
{
    size_t len;
    int rc = read_kept(r, roff, &r->rt_len, &r->rt, &len);
    if (rc != KV_OK)
        return rc;
    kv_rtset *s = NULL;
    rc = decode_rt(r, &s);
    if (rc == KV_ECORRUPT) {
        char why[256]; /* the text is about to be replaced by one naming the file */
        snprintf(why, sizeof why, "%s", kv_error_text());
        return kv_sst_fail(KV_ECORRUPT, r->path, roff, "%s", why);
    }
    if (rc == KV_OK && !s) /* a writer writes no block for no tombstone */
        rc = kv_sst_fail(KV_ECORRUPT, r->path, roff, "range tombstone block without fragments");
    kv_rtset_unref(s);
    return rc;
}

/* The dictionary block (after the properties), dlen bytes at doff: it
 * must hold a zstd dictionary. */
static int read_dictionary(kv_sst_reader *r, uint64_t doff, uint64_t dlen)
{
    uint8_t *raw = NULL;
    const uint8_t *data;
    size_t len = 0;
    uint64_t dev; /* open's reads are not data-block reads: not counted */
    int rc = read_block(r, doff, dlen, 0, 0, &data, &len, &raw, &dev, NULL);
    if (rc != KV_OK)
        return rc;
    /* zstd's own format only (magic, entropy tables, content), so that
     * damage zstd can see is refused here, not met later. The block's
     * checksum covered every byte. */
    r->ddict = len >= 8 && kv_get32(data) == KV_SST_DICT_MAGIC ? ZSTD_createDDict(data, len) : NULL;
    free(raw);
    if (!r->ddict)
        return kv_sst_fail(KV_ECORRUPT, r->path, doff, "bad dictionary block");
    r->props.dict_bytes = (size_t)dlen;
    return KV_OK;
}

/* The range filter block of a version-4 table, at off: read, checked
 * (stored uncompressed, and its own encoding) and kept with its decoded
 * view, which reads those bytes in place. */
static int read_range_filter(kv_sst_reader *r, uint64_t off)
{
    size_t len;
    int rc = read_kept(r, off, &r->rf_len, &r->rf_buf, &len);
    if (rc != KV_OK)
        return rc;
    rc = kv_rfilter_decode(r->rf_buf, len, &r->rfilter);
    if (rc == KV_ECORRUPT || rc == KV_EINVAL) {
        char why[256]; /* the text is about to be replaced by one naming the file */
        snprintf(why, sizeof why, "%s", kv_error_text());
        return kv_sst_fail(KV_ECORRUPT, r->path, off, "bad range filter block: %s", why);
    }
    if (rc == KV_OK) {
        kv_rfilter_info info;
        kv_rfilter_info_get(r->rfilter, &info);
        r->props.range_filter_bytes = len;
        r->props.range_filter_keys = info.keys;
        r->props.range_bits_per_key = info.keys ? (double)len * 8 / (double)info.keys : 0;
    }
    return rc;
}

/* The blocks of a version-2, -3 or -4 table between the properties and
 * the filter: the dictionary (dict_bytes, 0: none), the range tombstones
 * (rt_len, 0: none) and the range filter (rf_len, 0: none), whose sizes
 * the properties give; they must fill the gap exactly. */
static int read_between(kv_sst_reader *r, const struct block_places *bp)
{
    const uint64_t B = KV_SST_BLOCK_TRAILER;
    uint64_t doff = bp->poff + bp->plen + B, dlen = r->props.dict_bytes;
    uint64_t roff = doff + (dlen ? dlen + B : 0), rlen = r->rt_len;
    uint64_t foff = roff + (rlen ? rlen + B : 0), flen = r->rf_len;
    /* Each size is at most the file's (parse_properties), so no sum wraps. */
    if (bp->foff - doff != foff - doff + (flen ? flen + B : 0)) {
        r->rt_len = 0;
        r->rf_len = 0;
        return kv_sst_fail(KV_ECORRUPT, r->path, doff,
                           "dictionary of %llu bytes, range tombstones of %llu bytes and range "
                           "filter of %llu bytes do not fill their place",
                           (unsigned long long)dlen, (unsigned long long)rlen,
                           (unsigned long long)flen);
    }
    int rc = dlen ? read_dictionary(r, doff, dlen) : KV_OK;
    if (rc == KV_OK && rlen)
        rc = read_range_tombstones(r, roff);
    if (rc == KV_OK && flen)
        rc = read_range_filter(r, foff);
    return rc;
}

/* The filter block (if any), checked against the properties, which must
 * say the same: a filter exactly when they give bits per key, and its
 * key count theirs. Sets the properties' filter figures. */
static int read_filter(kv_sst_reader *r, const struct block_places *bp)
{
    int rc = KV_OK;
    kv_bloom *f = NULL;
    r->foff = bp->foff;
    r->flen = bp->flen;
    if (bp->flen) {
        uint8_t *raw = NULL;
        const uint8_t *data;
        size_t len = 0;
        uint64_t dev; /* open's reads are not data-block reads: not counted */
        if ((rc = read_block(r, bp->foff, bp->flen, 0, 0, &data, &len, &raw, &dev, NULL)) ==
            KV_OK) {
            rc = kv_bloom_decode(raw, len, &f);
            free(raw);
            atomic_store_explicit(&r->filter, f, memory_order_relaxed);
            r->has_filter = f != NULL;
            /* KV_EINVAL: a keyed filter's encoding, which no writer puts in
             * a table (a keyed table's filter holds its caller's hashes). */
            if (rc == KV_ECORRUPT || rc == KV_EINVAL)
                rc = kv_sst_fail(KV_ECORRUPT, r->path, bp->foff, "bad filter block");
        }
    }
    if (rc == KV_OK && (f != NULL) != (r->props.filter_bits_per_key > 0))
        rc = kv_sst_fail(KV_ECORRUPT, r->path, bp->poff, "filter and properties disagree");
    if (rc == KV_OK && f) {
        kv_bloom_info info;
        kv_bloom_stats(f, &info);
        /* The writer records the filter's own count in the properties, and
         * never hashes more keys than the table holds, besides its
         * prefixes (parse_scan_props: prefix_keys <= filter_keys). */
        if (info.keys_added != r->props.filter_keys ||
            r->props.filter_keys - r->props.prefix_keys > r->props.entries)
            rc = kv_sst_fail(KV_ECORRUPT, r->path, bp->foff,
                             "filter claims %llu keys, properties %llu of %llu entries",
                             (unsigned long long)info.keys_added,
                             (unsigned long long)r->props.filter_keys,
                             (unsigned long long)r->props.entries);
        r->props.filter_expected_fpr = info.expected_fpr;
        r->props.filter_bits = info.bits;
        r->props.filter_bytes = info.bytes;
    }
    return rc;
}

/* kv_sst_reader_open_ex: opens the file (in room the pool reserved, if
 * any; with O_DIRECT for KV_SST_OPEN_DIRECT), reads what stays in memory
 * (trailer, index, properties, dictionary, filter), maps it (not a file
 * read with O_DIRECT). */
static int open_reader(const char *path, kv_sst_cache *cache, uint64_t table_id,
                       unsigned flags, const kv_comparator *cmp, kv_sst_reader **out)
{
    kv_sst_reader *r = calloc(1, sizeof *r);
    if (!r)
        return KV_ENOMEM;
    size_t plen = strlen(path) + 1;
    r->path = malloc(plen);
    r->tally = kv_tally_new(sizeof *r->tally);
    if (!r->path || !r->tally) {
        free(r->path);
        free(r->tally);
        free(r);
        return KV_ENOMEM;
    }
    memcpy(r->path, path, plen);
    r->cmp = cmp;
    r->cache = cache;
    r->id = table_id;
    int rc, refused = 0;
    if (flags & KV_SST_OPEN_DIRECT) {
        rc = kv_file_open_direct(path, &refused, &r->file);
        r->direct = refused ? KV_SST_DIRECT_REFUSED : KV_SST_DIRECT_ON;
    } else
        rc = kv_file_open(path, &r->file);
    if (rc == KV_OK && (rc = kv_file_size(r->file, &r->size)) != KV_OK)
        kv_sst_fail(rc, path, 0, "cannot stat it");
    else if (rc != KV_OK && rc != KV_ECORRUPT) /* KV_ECORRUPT: not a regular file, said */
        kv_sst_fail(rc, path, 0, "cannot open");
    struct block_places bp = {0};
    if (rc == KV_OK && (rc = read_trailer(r, &bp)) == KV_OK)
        r->data_end = bp.ioff;
    uint8_t *raw = NULL;
    const uint8_t *data;
    size_t len = 0;
    uint64_t dev; /* open's reads are not data-block reads: not counted */
    if (rc == KV_OK &&
        (rc = read_block(r, bp.ioff, bp.ilen, 0, 0, &data, &len, &raw, &dev, NULL)) == KV_OK) {
        struct sst_index *ix = NULL;
        rc = kv_sst_parse_index(r, raw, len, bp.ioff, &ix, &r->nindex);
        free(raw);
        atomic_store_explicit(&r->ix, ix, memory_order_relaxed);
        r->ioff = bp.ioff;
        r->ilen = bp.ilen;
        /* What the index holds while the table is open: the decoded index
         * and per data block its state byte (r->seen). */
        if (ix)
            r->props.index_bytes = ix->bytes + r->nindex * sizeof *r->seen;
    }
    if (rc == KV_OK &&
        (rc = read_block(r, bp.poff, bp.plen, 0, 0, &data, &len, &raw, &dev, NULL)) == KV_OK) {
        rc = parse_properties(r, raw, len, bp.poff, bp.version);
        if (rc != KV_OK)
            free(raw);
    }
    if (rc == KV_OK && bp.version >= KV_SST_VERSION_DICT)
        rc = read_between(r, &bp);
    if (rc == KV_OK)
        rc = read_filter(r, &bp);
    if (rc != KV_OK) {
        kv_sst_reader_close(r);
        return rc;
    }
    /* Data blocks are read in place from here on where the file can be
     * mapped (64-bit systems); else, or if mapping fails, with pread. A
     * file opened with O_DIRECT is not mapped: its blocks are read with
     * pread, past the page cache. */
    r->seen = calloc(r->nindex ? r->nindex : 1, sizeof *r->seen);
    if (!r->seen || r->direct == KV_SST_DIRECT_ON ||
        kv_file_map(r->file, r->size, &r->map) != KV_OK)
        r->map = NULL;
    *out = r;
    return KV_OK;
}

int kv_sst_reader_open_cmp(const char *path, kv_sst_cache *cache, kv_sst_files *files,
                           uint64_t table_id, unsigned flags, const kv_comparator *cmp,
                           kv_sst_reader **out)
{
    if (!out)
        return KV_EINVAL;
    *out = NULL;
    if (!path || (flags & ~(unsigned)KV_SST_OPEN_DIRECT) || (cmp && !cmp->compare))
        return KV_EINVAL;
    if (!files)
        return open_reader(path, cache, table_id, flags, cmp, out);
    kv_sst_files_reserve(files);
    int rc = open_reader(path, cache, table_id, flags, cmp, out);
    if (rc != KV_OK) {
        kv_sst_files_unreserve(files);
        return rc;
    }
    kv_sst_files_add(files, *out);
    return KV_OK;
}

int kv_sst_reader_open_ex(const char *path, kv_sst_cache *cache, kv_sst_files *files,
                          uint64_t table_id, unsigned flags, kv_sst_reader **out)
{
    return kv_sst_reader_open_cmp(path, cache, files, table_id, flags, NULL, out);
}

int kv_sst_reader_open(const char *path, kv_sst_cache *cache, uint64_t table_id,
                       kv_sst_reader **out)
{
    return kv_sst_reader_open_ex(path, cache, NULL, table_id, 0, out);
}

int kv_sst_reader_open_pooled(const char *path, kv_sst_cache *cache, kv_sst_files *files,
                              uint64_t table_id, kv_sst_reader **out)
{
    if (out && !files) {
        *out = NULL;
        return KV_EINVAL;
    }
    return kv_sst_reader_open_ex(path, cache, files, table_id, 0, out);
}

int kv_sst_reader_direct(const kv_sst_reader *r)
{
    return r ? r->direct : KV_SST_DIRECT_OFF;
}

void kv_sst_reader_properties(const kv_sst_reader *r, kv_sst_properties *out)
{
    if (r && out)
        *out = r->props;
}

void kv_sst_reader_counters(const kv_sst_reader *r, kv_sst_counters *out)
{
    if (!r || !out)
        return;
#define SUM(field) kv_tally_sum(&r->tally[0].field, sizeof *r->tally)
    out->gets = SUM(gets);
    out->filter_checks = SUM(checks);
    out->filter_negatives = SUM(negatives);
    out->filter_false_positives = SUM(false_pos);
    out->data_block_reads = SUM(reads);
    out->bytes_read = SUM(bytes);
    out->cache_hits = SUM(hits);
    out->device_reads = SUM(dev_reads);
    out->device_read_bytes = SUM(dev_bytes);
#undef SUM
}

int kv_sst_approximate_offset(const kv_sst_reader *r, const void *key, size_t klen,
                              uint64_t *out)
{
    if (!r || !out || (!key && klen))
        return kv_error_set(KV_EINVAL, "kv_sst_approximate_offset: %s",
                            !r ? "r is NULL" : !out ? "out is NULL" : "NULL key with a length");
    /* The index is in memory: the search reads no data block. The block
     * holding the first key >= key is the first whose last key is >= key;
     * the data of the keys below it lies before its offset. */
    struct ixref ix;
    int rc = kv_sst_index_get((kv_sst_reader *)r, &ix); /* a paged index: held meanwhile */
    if (rc != KV_OK)
        return rc;
    size_t i = kv_sst_index_lower_bound(r, ix.ix, key, klen);
    *out = i < r->nindex ? ix.ix->index[i].off : r->data_end;
    kv_sst_use_put((kv_sst_reader *)r, &ix.u);
    return KV_OK;
}

uint64_t kv_sst_reader_data_end(const kv_sst_reader *r)
{
    return r ? r->data_end : 0;
}

int kv_sst_reader_filter_info(const kv_sst_reader *r, kv_bloom_info *out)
{
    if (!r || !out)
        return KV_EINVAL;
    memset(out, 0, sizeof *out);
    kv_bloom *f;
    struct sst_use u;
    int rc = kv_sst_filter_get((kv_sst_reader *)r, &f, &u);
    if (rc != KV_OK || !f)
        return rc != KV_OK ? rc : KV_NOTFOUND;
    kv_bloom_stats(f, out);
    kv_sst_use_put((kv_sst_reader *)r, &u);
    return KV_OK;
}

uint64_t kv_sst_filter_hash(const kv_sst_reader *r, const void *key, size_t klen)
{
    if (!key) /* NULL bytes hash as the empty key (this cannot fail) */
        klen = 0;
    return kv_hash_key(key, klen, r ? r->props.filter_seed : 0);
}

/* ---- get ------------------------------------------------------------------------ */

/* The lookup behind every get: the first entry >= key that begins with
 * key[0, prefix_len) (exact: that is key itself), gated by the filter when
 * use_filter is set. Counts into the reader and into *probe. */
/* A lookup in two halves. The gate: 0 when the table holds no entry for
 * the key, as its key range or its filter shows without a block read; 1
 * when its blocks must be searched. Fills *probe's filter fields. */
static int lookup_gate(kv_sst_reader *r, const void *key, size_t klen, size_t prefix_len,
                       int exact, int use_filter, uint64_t filter_hash, kv_sst_probe *probe)
{
    memset(probe, 0, sizeof *probe);
    COUNT(r, gets, 1);
    if (!kv_sst_range_may_hold(r, key, klen, prefix_len, exact))
        return 0; /* absent: no filter check, no I/O */
    if (r->has_filter && use_filter) {
        /* A paged filter that cannot be read says "maybe": the blocks
         * decide (and the search meets the error, if it is the file's). */
        kv_bloom *f;
        struct sst_use u;
        if (kv_sst_filter_get(r, &f, &u) != KV_OK || !f)
            return 1;
        probe->filter_checked = 1;
        COUNT(r, checks, 1);
        int maybe = kv_bloom_may_contain_hash(f, filter_hash);
        kv_sst_use_put(r, &u);
        if (!maybe) {
            probe->filter_negative = 1;
            COUNT(r, negatives, 1);
            return 0;
        }
    }
    return 1;
}

/* Where a found value goes: a new buffer in *val (into NULL), or the
 * caller's buffer into->buf of into->cap bytes (kv_sst_seek_gated_into). */
struct value_dest {
    void *buf;
    size_t cap;
};

static int search_block(kv_sst_reader *r, const struct sst_index *ix, const void *key, size_t klen,
                        size_t prefix_len, int exact, kv_sst_probe *probe, void **val, size_t *vlen,
                        uint8_t *suffix, size_t suffix_cap, size_t *suffix_len,
                        const struct value_dest *into);

/* The search, once the gate said 1: the index (held meanwhile), then one
 * data block. */
static int lookup_search(kv_sst_reader *r, const void *key, size_t klen, size_t prefix_len,
                         int exact, kv_sst_probe *probe, void **val, size_t *vlen,
                         uint8_t *suffix, size_t suffix_cap, size_t *suffix_len,
                         const struct value_dest *into)
{
    struct ixref ix;
    int rc = kv_sst_index_get(r, &ix);
    if (rc != KV_OK)
        return rc;
    rc = search_block(r, ix.ix, key, klen, prefix_len, exact, probe, val, vlen, suffix, suffix_cap,
                      suffix_len, into);
    kv_sst_use_put(r, &ix.u);
    return rc;
}

static int search_block(kv_sst_reader *r, const struct sst_index *ix, const void *key, size_t klen,
                        size_t prefix_len, int exact, kv_sst_probe *probe, void **val, size_t *vlen,
                        uint8_t *suffix, size_t suffix_cap, size_t *suffix_len,
                        const struct value_dest *into)
{
    size_t i = kv_sst_index_lower_bound(r, ix, key, klen);
    if (i == r->nindex) /* cannot happen past the largest-key check */
        return kv_sst_fail(KV_ECORRUPT, r->path, r->data_end, "index ends before the largest key");
    probe->block_offset = ix->index[i].off;
    probe->block_bytes = ix->index[i].size + KV_SST_BLOCK_TRAILER;
    struct blockref b;
    int hit = 0;
    uint64_t dev = 0;
    int rc = kv_sst_data_block(r, ix, i, 1, &b, &hit, &dev);
    kv_sst_probe_block(probe, hit, ix->index[i].size + KV_SST_BLOCK_TRAILER, dev);
    if (rc != KV_OK)
        return rc;
    kv_blockc c;
    rc = kv_blockc_init(&c, b.data, b.len, r->cmp);
    if (rc == KV_OK) {
        kv_blockc_seek(&c, key, klen);
        if (c.err)
            rc = c.err;
        else if (c.valid && c.klen >= prefix_len && (!exact || c.klen == klen) &&
                 memcmp(c.key, key, prefix_len) == 0) {
            if (into) {
                /* Copied only when it fits: a short buffer gets no byte. */
                if (c.vlen <= into->cap) {
                    if (c.vlen)
                        memcpy(into->buf, c.val, c.vlen);
                } else
                    rc = KV_ERANGE;
            } else if (!(*val = malloc(c.vlen ? c.vlen : 1)))
                rc = KV_ENOMEM;
            else
                memcpy(*val, c.val, c.vlen);
            if (rc == KV_OK || rc == KV_ERANGE) {
                *vlen = c.vlen;
                if (suffix_len) {
                    size_t n = c.klen - prefix_len;
                    if (suffix && suffix_cap)
                        memcpy(suffix, c.key + prefix_len, n < suffix_cap ? n : suffix_cap);
                    *suffix_len = n;
                }
            }
        } else
            rc = KV_NOTFOUND;
    }
    if (rc == KV_ECORRUPT)
        kv_sst_fail(rc, r->path, ix->index[i].off, "bad data block");
    kv_blockc_free(&c);
    kv_sst_release(r, &b);
    if (rc == KV_NOTFOUND && probe->filter_checked) {
        probe->false_positive = 1;
        COUNT(r, false_pos, 1);
    }
    return rc;
}

static int lookup(kv_sst_reader *r, const void *key, size_t klen, size_t prefix_len, int exact,
                  int use_filter, uint64_t filter_hash, kv_sst_probe *probe, void **val,
                  size_t *vlen, uint8_t *suffix, size_t suffix_cap, size_t *suffix_len)
{
    kv_sst_probe scratch;
    if (!probe)
        probe = &scratch;
    memset(probe, 0, sizeof *probe);
    if (!r || (klen && !key) || prefix_len > klen || !val || !vlen)
        return KV_EINVAL;
    *val = NULL;
    *vlen = 0;
    if (!lookup_gate(r, key, klen, prefix_len, exact, use_filter, filter_hash, probe))
        return KV_NOTFOUND;
    return lookup_search(r, key, klen, prefix_len, exact, probe, val, vlen, suffix, suffix_cap,
                         suffix_len, NULL);
}

int kv_sst_get_hashed(kv_sst_reader *r, const void *key, size_t klen, uint64_t filter_hash,
                      void **val, size_t *vlen)
{
    return lookup(r, key, klen, klen, 1, 1, filter_hash, NULL, val, vlen, NULL, 0, NULL);
}

int kv_sst_get(kv_sst_reader *r, const void *key, size_t klen, void **val, size_t *vlen)
{
    /* A table whose filter holds its writer's own hashes cannot be asked
     * with the hash of a whole key: read the block instead. */
    if (!r || (klen && !key))
        return KV_EINVAL; /* checked before the key is hashed */
    int use_filter = r->props.filter_hash == KV_SST_FILTER_HASH_KEY;
    return lookup(r, key, klen, klen, 1, use_filter, kv_sst_filter_hash(r, key, klen), NULL, val,
                  vlen, NULL, 0, NULL);
}

int kv_sst_seek_prefixed(kv_sst_reader *r, const void *key, size_t klen, size_t prefix_len,
                         uint64_t filter_hash, kv_sst_probe *probe, void **val, size_t *vlen,
                         uint8_t *suffix, size_t suffix_cap, size_t *suffix_len)
{
    if (suffix_len)
        *suffix_len = 0;
    return lookup(r, key, klen, prefix_len, 0, 1, filter_hash, probe, val, vlen, suffix,
                  suffix_cap, suffix_len);
}

void kv_sst_reader_prefault(kv_sst_reader *r)
{
    if (!r)
        return;
    int pinned = kv_sst_pin(r);
    if (pinned < 0)
        return; /* the first read will meet this again, and say so */
    if (r->map)
        kv_file_prefault(r->file);
    if (pinned)
        kv_sst_unpin(r);
}

void kv_sst_filter_prefetch(const kv_sst_reader *r, uint64_t filter_hash)
{
    /* A pageable reader's kept filter may go at any time but under a use:
     * its prefetch is skipped (it would read the filter's handle). */
    if (r && !r->pageable)
        kv_bloom_prefetch_hash(atomic_load_explicit(&r->filter, memory_order_relaxed), filter_hash);
}

int kv_sst_seek_gate(kv_sst_reader *r, const void *key, size_t klen, size_t prefix_len,
                     uint64_t filter_hash, kv_sst_probe *probe)
{
    if (!r || !probe || (klen && !key) || prefix_len > klen)
        return KV_EINVAL;
    return lookup_gate(r, key, klen, prefix_len, 0, 1, filter_hash, probe) ? KV_OK
                                                                            : KV_NOTFOUND;
}

int kv_sst_seek_gated(kv_sst_reader *r, const void *key, size_t klen, size_t prefix_len,
                      kv_sst_probe *probe, void **val, size_t *vlen, uint8_t *suffix,
                      size_t suffix_cap, size_t *suffix_len)
{
    if (suffix_len)
        *suffix_len = 0;
    if (!r || !probe || (klen && !key) || prefix_len > klen || !val || !vlen)
        return KV_EINVAL;
    *val = NULL;
    *vlen = 0;
    return lookup_search(r, key, klen, prefix_len, 0, probe, val, vlen, suffix, suffix_cap,
                         suffix_len, NULL);
}

int kv_sst_seek_gated_into(kv_sst_reader *r, const void *key, size_t klen, size_t prefix_len,
                           kv_sst_probe *probe, void *buf, size_t cap, size_t *vlen,
                           uint8_t *suffix, size_t suffix_cap, size_t *suffix_len)
{
    if (suffix_len)
        *suffix_len = 0;
    if (!r || !probe || (klen && !key) || prefix_len > klen || (cap && !buf) || !vlen)
        return KV_EINVAL;
    *vlen = 0;
    struct value_dest into = {buf, cap};
    void *unused = NULL;
    return lookup_search(r, key, klen, prefix_len, 0, probe, &unused, vlen, suffix, suffix_cap,
                         suffix_len, &into);
}

/* ---- verify ------------------------------------------------------------------------ */

int kv_sst_verify_blocks(kv_sst_reader *r)
{
    struct ixref ix;
    int rc = kv_sst_index_get(r, &ix);
    if (rc != KV_OK)
        return rc;
    int pinned = kv_sst_pin(r); /* the file open (and mapped, when it is) meanwhile */
    if (pinned < 0) {
        kv_sst_use_put(r, &ix.u);
        return pinned;
    }
    uint64_t at = 0;
    for (size_t i = 0; rc == KV_OK && i < r->nindex; i++) {
        const struct index_entry *e = &ix.ix->index[i];
        if (e->off != at || e->size > KV_SST_MAX_RAW_BLOCK ||
            e->off + e->size + KV_SST_BLOCK_TRAILER > r->data_end) {
            rc = kv_sst_fail(KV_ECORRUPT, r->path, e->off, "data block %zu out of place", i);
            break;
        }
        size_t n = (size_t)e->size + KV_SST_BLOCK_TRAILER;
        const uint8_t *in = NULL;
        uint8_t *buf = NULL;
        uint64_t device = 0;
        rc = r->map ? kv_file_view(r->file, e->off, n, &in)
                    : kv_file_read_alloc(r->file, e->off, n, &buf, &device);
        if (rc != KV_OK) {
            rc = kv_sst_fail(rc, r->path, e->off,
                             rc == KV_ECORRUPT ? "file ends inside a block" : "read failed");
            break;
        }
        if (!r->map)
            in = buf;
        uint8_t kind = in[e->size];
        if (XXH3_64bits(in, (size_t)e->size + 1) != kv_get64(in + e->size + 1))
            rc = kv_sst_fail(KV_ECORRUPT, r->path, e->off, "block checksum mismatch");
        else if (kind != KV_COMPRESSION_NONE && kind != KV_COMPRESSION_ZSTD &&
                 (kind != KV_SST_BLOCK_ZSTD_DICT || !r->ddict))
            rc = kv_sst_fail(KV_ECORRUPT, r->path, e->off, "unknown block compression %u", kind);
        free(buf);
        at = e->off + n;
    }
    if (rc == KV_OK && at != r->data_end)
        rc = kv_sst_fail(KV_ECORRUPT, r->path, at, "data blocks end before the index");
    if (pinned)
        kv_sst_unpin(r);
    kv_sst_use_put(r, &ix.u);
    return rc;
}

int kv_sst_verify(kv_sst_reader *r)
{
    if (!r)
        return KV_EINVAL;
    kv_sst_iter *it;
    int rc = kv_sst_iter_new(r, &it);
    if (rc != KV_OK)
        return rc;
    uint64_t n = 0, kbytes = 0, vbytes = 0;
    /* A range filter of the table's own keys must say "maybe" for each of
     * them: asked [key, key + "\0"), which holds that key alone. */
    int rf_check = r->rfilter && r->rf_keys == KV_SST_RF_KEYS_OWN;
    uint8_t *hi = NULL;
    size_t hcap = 0;
    for (kv_sst_iter_seek_first(it); kv_sst_iter_valid(it); kv_sst_iter_next(it)) {
        size_t klen, vlen;
        const uint8_t *key = kv_sst_iter_key(it, &klen);
        kv_sst_iter_value(it, &vlen);
        if (rf_check && klen + 1 > hcap) {
            free(hi);
            hcap = 2 * (klen + 1);
            if (!(hi = malloc(hcap))) {
                rc = KV_ENOMEM;
                break;
            }
        }
        if (rf_check) {
            if (klen)
                memcpy(hi, key, klen);
            hi[klen] = 0;
            if (!kv_rfilter_may_hold(r->rfilter, key, klen, hi, klen + 1, NULL)) {
                rc = kv_sst_fail(KV_ECORRUPT, r->path, r->data_end,
                                 "the range filter says entry %llu is absent",
                                 (unsigned long long)n);
                break;
            }
        }
        n++;
        kbytes += klen;
        vbytes += vlen;
    }
    free(hi);
    if (rc == KV_OK)
        rc = kv_sst_iter_status(it);
    kv_sst_iter_free(it);
    if (rc == KV_OK && (n != r->props.entries || kbytes != r->props.raw_key_bytes ||
                        vbytes != r->props.raw_value_bytes))
        rc = kv_sst_fail(KV_ECORRUPT, r->path, r->data_end,
                         "data blocks disagree with the properties");
    return rc;
}

/* ---- scan filters ----------------------------------------------------------------- */

size_t kv_sst_reader_prefix_len(const kv_sst_reader *r)
{
    /* A dropped filter takes its prefixes with it: nobody is to ask. */
    return r && r->has_filter ? r->props.prefix_len : 0;
}

int kv_sst_filter_may_hold(const kv_sst_reader *r, uint64_t filter_hash)
{
    kv_bloom *f;
    struct sst_use u;
    if (!r || kv_sst_filter_get((kv_sst_reader *)r, &f, &u) != KV_OK || !f)
        return 1; /* unreadable: "maybe", as with no filter */
    int maybe = kv_bloom_may_contain_hash(f, filter_hash);
    kv_sst_use_put((kv_sst_reader *)r, &u);
    return maybe;
}

int kv_sst_reader_has_range_filter(const kv_sst_reader *r)
{
    return r && r->rfilter;
}

int kv_sst_range_filter_may_hold(const kv_sst_reader *r, const void *lo, size_t lolen,
                                 const void *hi, size_t hilen, double *expected_fpr)
{
    if (!r || !r->rfilter) {
        if (expected_fpr)
            *expected_fpr = 1;
        return 1;
    }
    return kv_rfilter_may_hold(r->rfilter, lo, lolen, hi, hilen, expected_fpr);
}

size_t kv_sst_reader_range_filter_bytes(const kv_sst_reader *r)
{
    return r && r->rfilter ? r->rf_len : 0;
}

uint64_t kv_sst_reader_range_filter_keys(const kv_sst_reader *r)
{
    return r && r->rfilter ? r->props.range_filter_keys : 0;
}

const struct kv_rfilter *kv_sst_reader_range_filter(const kv_sst_reader *r)
{
    return r ? r->rfilter : NULL;
}
