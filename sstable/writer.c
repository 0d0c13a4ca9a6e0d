/* writer.c - building a table: data blocks as keys arrive, then index,
 * properties, dictionary, range tombstones, filter and trailer at finish.
 * Layout: doc/sstable_format.md. */
#define _POSIX_C_SOURCE 200809L

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>
#define ZDICT_STATIC_LINKING_ONLY /* ZDICT_trainFromBuffer_fastCover */
#include <zdict.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "block.h"
#include <kv/range_filter.h>
#include "internal.h"
#include "util/hash.h"
#include "order.h"
#include "util/error.h"
#include "util/file.h"
#include "format.h"

/* A table is appended in pieces of up to OUT_BUF bytes, not a write() per
 * block and trailer: a compaction writes hundreds of megabytes, and each
 * call costs the kernel more than the copy. Nothing is lost by holding
 * them: a table counts only once it is whole, synced and renamed. */
#define OUT_BUF ((size_t)256 << 10)

/* Written bytes are handed to the disk every WRITEBACK_STEP bytes as the
 * table grows (kv_file_start_writeback), so that the sync that ends a
 * table of many megabytes waits for its last step, not for all of it.
 * Each step becomes disk writes of up to the device's request size, and
 * the completion of each stops whatever runs on the CPU that takes the
 * disk's interrupts, a Get included: 8 MiB steps make requests as large
 * as the device takes, fewer than half as many as 1 MiB steps made
 * (doc/database.md, "Disk interrupts"). */
#define WRITEBACK_STEP ((uint64_t)8 << 20)

struct kv_sst_writer {
    kv_sst_options o;
    char *path, *tmp;
    char *note;
    kv_file *file;
    uint64_t offset; /* bytes written (those in out[] included) */
    uint64_t written_back; /* bytes handed to kv_file_start_writeback */
    uint8_t *out;    /* bytes not yet appended to the file: up to OUT_BUF */
    size_t out_len;
    kv_blockb data, index;
    ZSTD_CCtx *zc;
    uint8_t *zbuf;
    size_t zcap;
    /* Dictionary (o.dict_bytes > 0 with zstd). Until it is trained, the
     * finished data blocks wait in pend (raw, back to back; pend_sizes,
     * and their last keys in pend_keys, each u32 length then bytes): they
     * are the samples it is trained on, and are then compressed with it.
     * sampling: still gathering; 0 once trained or given up. */
    int sampling;
    uint8_t *pend, *pend_keys;
    size_t pend_len, pend_cap, pend_klen, pend_kcap;
    size_t *pend_sizes;
    size_t npend, pend_scap;
    uint8_t *dict;       /* the trained dictionary, dict_len bytes; NULL: none */
    size_t dict_len;
    ZSTD_CDict *cdict;
    uint8_t *last;   /* last key added */
    size_t last_len, last_cap;
    uint64_t entries, raw_keys, raw_values, blocks, data_raw, data_stored;
    uint64_t *hashes;  /* filter entries, consecutive duplicates dropped */
    size_t nhashes, hcap;
    int filter_hash;   /* KV_SST_FILTER_HASH_*: set by the first add */
    int keyed;         /* kv_sst_writer_set_keyed: add_hashed's hashes are keyed */
    uint8_t *smallest;
    size_t smallest_len;
    uint8_t *rt; /* the range tombstone block's payload (rt_len > 0), or NULL: none */
    size_t rt_len;
    /* Scan filters (format version 4). rf: the range filter's builder, or
     * NULL: none. rf_mode: which keys it takes, decided by the first add
     * or range key (RF_*). */
    kv_rfilter_builder *rf;
    int rf_mode;
    /* prefix_len > 0: the point filter also holds the caller's prefix
     * hashes, phashes (consecutive duplicates dropped). */
    size_t prefix_len;
    uint64_t *phashes;
    size_t nphashes, phcap;
};

/* Which keys a range filter takes: not yet known; the caller's
 * (kv_sst_writer_add_range_key, and every add_hashed table); the table's
 * own (a table written with kv_sst_writer_add that was given none). */
enum { RF_UNDECIDED = 0, RF_CALLER = 1, RF_OWN = 2 };

void kv_sst_options_init(kv_sst_options *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->block_size = 2048;
    o->restart_interval = 8;
    o->compression = KV_COMPRESSION_ZSTD;
    o->compression_level = 1;
    o->bits_per_key = 10;
    o->filter_layout = KV_BLOOM_BLOCKED;
    o->dict_bytes = 0;
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

static void writer_free(kv_sst_writer *w)
{
    kv_blockb_free(&w->data);
    kv_blockb_free(&w->index);
    ZSTD_freeCCtx(w->zc);
    ZSTD_freeCDict(w->cdict);
    free(w->dict);
    free(w->pend);
    free(w->pend_keys);
    free(w->pend_sizes);
    free(w->zbuf);
    free(w->out);
    free(w->last);
    free(w->hashes);
    free(w->smallest);
    free(w->rt);
    kv_rfilter_builder_free(w->rf);
    free(w->phashes);
    free(w->note);
    free(w->path);
    free(w->tmp);
    free(w);
}

int kv_sst_writer_new(const char *path, const kv_sst_options *opts, kv_sst_writer **out)
{
    if (!out)
        return KV_EINVAL;
    *out = NULL;
    kv_sst_options o;
    if (opts)
        o = *opts;
    else
        kv_sst_options_init(&o);
    if (!path || o.block_size < 64 || o.block_size > ((size_t)64 << 20) ||
        o.restart_interval < 1 || o.restart_interval > 65536 ||
        (o.compression != KV_COMPRESSION_NONE && o.compression != KV_COMPRESSION_ZSTD) ||
        (o.compression == KV_COMPRESSION_ZSTD &&
         (o.compression_level < ZSTD_minCLevel() || o.compression_level > ZSTD_maxCLevel())) ||
        !(o.bits_per_key == 0 || (o.bits_per_key > 0 && o.bits_per_key <= 1000)) ||
        (o.filter_layout != KV_BLOOM_BLOCKED && o.filter_layout != KV_BLOOM_CLASSIC) ||
        (o.note && strlen(o.note) > 65536) || (o.comparator && !o.comparator->compare) ||
        o.dict_bytes > KV_SST_MAX_DICT)
        return KV_EINVAL;
    if (access(path, F_OK) == 0)
        return KV_EINVAL; /* a table is never overwritten */
    kv_sst_writer *w = calloc(1, sizeof *w);
    if (!w)
        return KV_ENOMEM;
    w->o = o;
    size_t plen = strlen(path);
    w->path = dup_str(path);
    w->tmp = malloc(plen + 5);
    w->note = dup_str(o.note ? o.note : "");
    w->out = malloc(OUT_BUF);
    if (!w->path || !w->tmp || !w->note || !w->out) {
        writer_free(w);
        return KV_ENOMEM;
    }
    memcpy(w->tmp, path, plen);
    memcpy(w->tmp + plen, ".tmp", 5);
    w->o.note = w->note;
    kv_blockb_init(&w->data, o.restart_interval);
    kv_blockb_init(&w->index, 1);
    if (o.compression == KV_COMPRESSION_ZSTD && !(w->zc = ZSTD_createCCtx())) {
        writer_free(w);
        return KV_ENOMEM;
    }
    /* A dictionary needs room for at least one zstd header and some
     * content; below 256 bytes none is tried. */
    w->sampling = o.compression == KV_COMPRESSION_ZSTD && o.dict_bytes >= 256;
    int rc = kv_file_create(w->tmp, &w->file);
    if (rc != KV_OK) {
        writer_free(w);
        return rc;
    }
    *out = w;
    return KV_OK;
}

void kv_sst_writer_abandon(kv_sst_writer *w)
{
    if (!w)
        return;
    kv_file_close(w->file);
    unlink(w->tmp);
    writer_free(w);
}

/* Appends what out[] holds to the file. */
static int out_flush(kv_sst_writer *w)
{
    if (w->out_len == 0)
        return KV_OK;
    int rc = kv_file_append(w->file, w->out, w->out_len);
    if (rc == KV_OK) {
        w->out_len = 0; /* so the file holds w->offset bytes */
        if (w->offset - w->written_back >= WRITEBACK_STEP) {
            rc = kv_file_start_writeback(w->file, w->written_back, w->offset - w->written_back);
            w->written_back = w->offset;
        }
    }
    return rc;
}

/* Appends len bytes to the table, through out[]; counts them in offset. */
static int out_write(kv_sst_writer *w, const void *p, size_t len)
{
    int rc = KV_OK;
    if (w->out_len + len > OUT_BUF)
        rc = out_flush(w);
    if (rc == KV_OK && len >= OUT_BUF) {
        rc = kv_file_append(w->file, p, len); /* a large block goes as it is */
    } else if (rc == KV_OK && len) {
        memcpy(w->out + w->out_len, p, len);
        w->out_len += len;
    }
    if (rc == KV_OK)
        w->offset += len;
    return rc;
}

/* Appends a block's payload and its trailer; *handle_off gets where it went. */
static int write_block(kv_sst_writer *w, const uint8_t *payload, size_t len, uint8_t kind,
                       uint64_t *handle_off)
{
    uint8_t trailer[KV_SST_BLOCK_TRAILER];
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, payload, len);
    XXH3_64bits_update(&st, &kind, 1);
    trailer[0] = kind;
    kv_put64(trailer + 1, XXH3_64bits_digest(&st));
    *handle_off = w->offset;
    int rc = out_write(w, payload, len);
    if (rc == KV_OK)
        rc = out_write(w, trailer, sizeof trailer);
    return rc;
}

/* Grows *buf (capacity *cap) to hold need bytes. */
static int reserve(uint8_t **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return KV_OK;
    size_t nc = *cap ? *cap : 4096;
    while (nc < need)
        nc *= 2;
    uint8_t *b = realloc(*buf, nc);
    if (!b)
        return KV_ENOMEM;
    *buf = b;
    *cap = nc;
    return KV_OK;
}

/* Compresses (when it pays), writes and indexes one finished data block
 * of len raw bytes whose last key is last[0, last_len). */
static int emit_block(kv_sst_writer *w, const uint8_t *raw, size_t len, const uint8_t *last,
                      size_t last_len)
{
    const uint8_t *payload = raw;
    size_t stored = len;
    uint8_t kind = KV_COMPRESSION_NONE;
    if (w->zc) {
        size_t bound = ZSTD_compressBound(len);
        int rc = reserve(&w->zbuf, &w->zcap, bound);
        if (rc != KV_OK)
            return rc;
        size_t n = w->cdict ? ZSTD_compress2(w->zc, w->zbuf, bound, raw, len)
                            : ZSTD_compressCCtx(w->zc, w->zbuf, bound, raw, len,
                                                w->o.compression_level);
        if (!ZSTD_isError(n) && n < len - len / 8) { /* keep it only if it saves 1/8 */
            payload = w->zbuf;
            stored = n;
            kind = w->cdict ? KV_SST_BLOCK_ZSTD_DICT : KV_COMPRESSION_ZSTD;
        }
    }
    uint64_t off;
    int rc = write_block(w, payload, stored, kind, &off);
    if (rc != KV_OK)
        return rc;
    w->blocks++;
    w->data_raw += len;
    w->data_stored += stored;
    uint8_t handle[20];
    uint8_t *p = handle;
    p += kv_put_varint(p, off);
    p += kv_put_varint(p, stored);
    return kv_blockb_add(&w->index, last, last_len, handle, (size_t)(p - handle));
}

/* Ends the sampling: trains the dictionary on the blocks waiting in pend
 * (none if zstd cannot make one of them: too few or too alike), then
 * compresses and writes them in order. */
static int end_sampling(kv_sst_writer *w)
{
    w->sampling = 0;
    int rc = KV_OK;
    if (w->npend >= 8) { /* fewer samples than this train nothing useful */
        w->dict = malloc(w->o.dict_bytes);
        if (!w->dict)
            return KV_ENOMEM;
        /* fastCover with fixed parameters: one pass, a few milliseconds per
         * MiB of samples (the searching variants take ten times longer).
         * k, the segment size, and d, the hashed prefix, are zstd's own
         * defaults for its optimizer's starting point. */
        ZDICT_fastCover_params_t p;
        memset(&p, 0, sizeof p);
        p.k = 200;
        p.d = 8;
        p.f = 20;
        p.accel = 1;
        p.zParams.compressionLevel = w->o.compression_level;
        size_t n = ZDICT_trainFromBuffer_fastCover(w->dict, w->o.dict_bytes, w->pend,
                                                   w->pend_sizes, (unsigned)w->npend, p);
        if (!ZDICT_isError(n) && n > 0) {
            w->dict_len = n;
            w->cdict = ZSTD_createCDict(w->dict, n, w->o.compression_level);
            if (!w->cdict)
                return KV_ENOMEM;
            /* Frames without the dictionary's ID (4 bytes each): the table
             * has one dictionary, and its reader knows it. */
            size_t e = ZSTD_CCtx_setParameter(w->zc, ZSTD_c_dictIDFlag, 0);
            if (!ZSTD_isError(e))
                e = ZSTD_CCtx_refCDict(w->zc, w->cdict);
            if (ZSTD_isError(e))
                return KV_ENOMEM;
        } else {
            free(w->dict);
            w->dict = NULL;
        }
    }
    const uint8_t *raw = w->pend, *k = w->pend_keys;
    for (size_t i = 0; i < w->npend && rc == KV_OK; i++) {
        uint32_t klen = kv_get32(k);
        rc = emit_block(w, raw, w->pend_sizes[i], k + 4, klen);
        raw += w->pend_sizes[i];
        k += 4 + klen;
    }
    free(w->pend);
    free(w->pend_keys);
    free(w->pend_sizes);
    w->pend = w->pend_keys = NULL;
    w->pend_sizes = NULL;
    w->npend = w->pend_len = w->pend_klen = w->pend_cap = w->pend_kcap = w->pend_scap = 0;
    return rc;
}

/* Keeps a finished data block in pend until the dictionary is trained. */
static int hold_block(kv_sst_writer *w)
{
    const kv_blockb *d = &w->data;
    int rc = reserve(&w->pend, &w->pend_cap, w->pend_len + d->len);
    if (rc == KV_OK)
        rc = reserve(&w->pend_keys, &w->pend_kcap, w->pend_klen + 4 + d->last_len);
    if (rc == KV_OK && w->npend == w->pend_scap) {
        size_t nc = w->pend_scap ? 2 * w->pend_scap : 64;
        size_t *ns = realloc(w->pend_sizes, nc * sizeof *ns);
        if (!ns)
            return KV_ENOMEM;
        w->pend_sizes = ns;
        w->pend_scap = nc;
    }
    if (rc != KV_OK)
        return rc;
    memcpy(w->pend + w->pend_len, d->buf, d->len);
    w->pend_len += d->len;
    kv_put32(w->pend_keys + w->pend_klen, (uint32_t)d->last_len);
    if (d->last_len)
        memcpy(w->pend_keys + w->pend_klen + 4, d->last, d->last_len);
    w->pend_klen += 4 + d->last_len;
    w->pend_sizes[w->npend++] = d->len;
    /* 32 times the dictionary's size in samples, as zstd advises for a
     * dictionary (its training wants about 100 times; 32 keeps the blocks
     * a writer holds, and the training's time, small). */
    if (w->pend_len >= 32 * w->o.dict_bytes)
        return end_sampling(w);
    return KV_OK;
}

static int flush_data_block(kv_sst_writer *w)
{
    if (w->data.entries == 0)
        return KV_OK;
    int rc = kv_blockb_finish(&w->data);
    if (rc != KV_OK)
        return rc;
    if (w->sampling)
        rc = hold_block(w);
    else
        rc = emit_block(w, w->data.buf, w->data.len, w->data.last, w->data.last_len);
    kv_blockb_reset(&w->data);
    return rc;
}

static int add(kv_sst_writer *w, const void *key, size_t klen, const void *val, size_t vlen,
               uint64_t hash, int how)
{
    if (!w || (klen && !key) || (vlen && !val) || klen > KV_SST_MAX_KEY || vlen > KV_SST_MAX_VALUE)
        return KV_EINVAL;
    if (w->entries > 0 && w->filter_hash != how)
        return KV_EINVAL; /* a table's filter entries are all of one kind */
    /* A plain add's range keys are the table's own; a table given range
     * keys (or prefix hashes, which need the caller's filter hashes) is
     * written with kv_sst_writer_add_hashed. */
    if (how == KV_SST_FILTER_HASH_KEY && (w->rf_mode == RF_CALLER || w->prefix_len))
        return KV_EINVAL;
    if (w->entries > 0 && kv_sst_cmp(w->o.comparator, w->last, w->last_len, key, klen) >= 0)
        return kv_error_set(KV_EINVAL, "%s: entry %llu is not above the one before it%s", w->path,
                            (unsigned long long)w->entries,
                            w->o.comparator
                                ? ": the keys came in the comparator's order, so the comparator "
                                  "does not order keys consistently (each call must give the "
                                  "same answer, a < b exactly when b > a, and the order must be "
                                  "transitive)"
                                : " (keys are added in strictly ascending order)");
    if (w->o.bits_per_key > 0 && w->nhashes == w->hcap) {
        size_t nc = w->hcap ? 2 * w->hcap : 1024;
        uint64_t *h = realloc(w->hashes, nc * sizeof *h);
        if (!h)
            return KV_ENOMEM;
        w->hashes = h;
        w->hcap = nc;
    }
    if (klen + 1 > w->last_cap) {
        uint8_t *l = realloc(w->last, klen + 1);
        if (!l)
            return KV_ENOMEM;
        w->last = l;
        w->last_cap = klen + 1;
    }
    if (w->entries == 0) {
        w->smallest = malloc(klen + 1);
        if (!w->smallest)
            return KV_ENOMEM;
        if (klen)
            memcpy(w->smallest, key, klen);
        w->smallest_len = klen;
    }
    if (w->rf && w->rf_mode == RF_UNDECIDED)
        w->rf_mode = how == KV_SST_FILTER_HASH_KEY ? RF_OWN : RF_CALLER;
    /* Keys strictly increase (checked above), so the builder takes each. */
    int rc = w->rf_mode == RF_OWN ? kv_rfilter_builder_add(w->rf, key, klen) : KV_OK;
    if (rc == KV_OK)
        rc = kv_blockb_add(&w->data, key, klen, val, vlen);
    if (rc != KV_OK)
        return rc;
    if (klen)
        memcpy(w->last, key, klen);
    w->last_len = klen;
    /* Consecutive equal hashes (one user key stored at several sequence
     * numbers) are one filter key: it sets the same bits, and the filter is
     * sized for distinct keys. */
    if (w->o.bits_per_key > 0 && (w->nhashes == 0 || w->hashes[w->nhashes - 1] != hash))
        w->hashes[w->nhashes++] = hash;
    w->filter_hash = how;
    w->entries++;
    w->raw_keys += klen;
    w->raw_values += vlen;
    if (kv_blockb_size(&w->data) >= w->o.block_size)
        return flush_data_block(w);
    return KV_OK;
}

int kv_sst_writer_add(kv_sst_writer *w, const void *key, size_t klen, const void *val,
                      size_t vlen)
{
    if (!w || (klen && !key) || w->keyed)
        return KV_EINVAL; /* checked before the key is hashed */
    uint64_t h = kv_hash_key(key, klen, w->o.seed);
    return add(w, key, klen, val, vlen, h, KV_SST_FILTER_HASH_KEY);
}

int kv_sst_writer_add_hashed(kv_sst_writer *w, const void *key, size_t klen, const void *val,
                             size_t vlen, uint64_t filter_hash)
{
    return add(w, key, klen, val, vlen, filter_hash,
               w && w->keyed ? KV_SST_FILTER_HASH_KEYED : KV_SST_FILTER_HASH_CALLER);
}

int kv_sst_writer_set_range_tombstones(kv_sst_writer *w, const uint8_t *block, size_t len)
{
    if (!w || (len && !block) || len > KV_SST_MAX_RAW_BLOCK)
        return KV_EINVAL;
    /* Checked as a reader will check it, so that a table is never written
     * that its reader refuses; a block of no fragment is no block. */
    kv_rtset *s;
    int rc = (w->o.comparator ? kv_rtset_decode_unordered(block, len, &s)
                              : kv_rtset_decode(NULL, block, len, &s));
    if (rc != KV_OK)
        return rc == KV_ECORRUPT ? KV_EINVAL : rc;
    uint8_t *copy = NULL;
    if (s) {
        kv_rtset_unref(s);
        if (!(copy = malloc(len)))
            return KV_ENOMEM;
        memcpy(copy, block, len);
    }
    free(w->rt);
    w->rt = copy;
    w->rt_len = copy ? len : 0;
    return KV_OK;
}

int kv_sst_writer_set_keyed(kv_sst_writer *w, uint64_t secret_check)
{
    if (!w || w->entries > 0)
        return KV_EINVAL;
    w->keyed = 1;
    w->o.seed = secret_check; /* recorded as the filter seed: the secret's check */
    return KV_OK;
}

/* A table with a range filter or prefix entries is written at format
 * version 4 (properties version 6); every other one as before them. */
static int scan_filtered(const kv_sst_writer *w)
{
    return w->rf != NULL || w->nphashes > 0;
}

static int write_properties(kv_sst_writer *w, kv_bloom *filter, size_t rf_len, uint64_t *off,
                            uint64_t *len)
{
    size_t nlen = strlen(w->note);
    int v6 = scan_filtered(w);
    size_t fixed = v6        ? KV_SST_PROPS_FIXED_V6
                   : w->rt   ? KV_SST_PROPS_FIXED_V5
                   : w->dict ? KV_SST_PROPS_FIXED_V4
                             : KV_SST_PROPS_FIXED;
    size_t total = fixed + w->smallest_len + w->last_len + nlen;
    uint8_t *p = calloc(1, total);
    if (!p)
        return KV_ENOMEM;
    kv_bloom_info info = {0};
    if (filter)
        kv_bloom_stats(filter, &info);
    double bits_per_key = filter ? w->o.bits_per_key : 0;
    int kind = filter ? (w->filter_hash ? w->filter_hash : KV_SST_FILTER_HASH_KEY)
                      : KV_SST_FILTER_HASH_NONE;
    if (filter && w->keyed)
        kind = KV_SST_FILTER_HASH_KEYED; /* keyed even with no pair added */
    kv_put32(p + KV_SST_PROPS_OFF_VERSION, v6        ? KV_SST_PROPS_VERSION
                                           : w->rt   ? KV_SST_PROPS_VERSION_RT
                                           : w->dict ? KV_SST_PROPS_VERSION_DICT
                                           : kind == KV_SST_FILTER_HASH_KEYED
                                               ? KV_SST_PROPS_VERSION_KEYED
                                               : KV_SST_PROPS_VERSION_UNKEYED);
    kv_put32(p + KV_SST_PROPS_OFF_COMPRESSION, (uint32_t)w->o.compression);
    kv_put64(p + KV_SST_PROPS_OFF_ENTRIES, w->entries);
    kv_put64(p + KV_SST_PROPS_OFF_RAW_KEY_BYTES, w->raw_keys);
    kv_put64(p + KV_SST_PROPS_OFF_RAW_VALUE_BYTES, w->raw_values);
    kv_put64(p + KV_SST_PROPS_OFF_DATA_BLOCKS, w->blocks);
    kv_put64(p + KV_SST_PROPS_OFF_DATA_RAW_BYTES, w->data_raw);
    kv_put64(p + KV_SST_PROPS_OFF_DATA_STORED_BYTES, w->data_stored);
    kv_put32(p + KV_SST_PROPS_OFF_FILTER_LAYOUT, (uint32_t)w->o.filter_layout);
    kv_put32(p + KV_SST_PROPS_OFF_FILTER_K, info.k);
    kv_put64(p + KV_SST_PROPS_OFF_BITS_PER_KEY, kv_f64_bits(bits_per_key));
    kv_put64(p + KV_SST_PROPS_OFF_FILTER_KEYS, info.keys_added);
    kv_put64(p + KV_SST_PROPS_OFF_FILTER_SEED, w->o.seed);
    kv_put32(p + KV_SST_PROPS_OFF_SMALLEST_LEN, (uint32_t)w->smallest_len);
    kv_put32(p + KV_SST_PROPS_OFF_LARGEST_LEN, (uint32_t)(w->entries ? w->last_len : 0));
    kv_put32(p + KV_SST_PROPS_OFF_NOTE_LEN, (uint32_t)nlen);
    kv_put32(p + KV_SST_PROPS_OFF_FILTER_HASH, (uint32_t)kind);
    if (w->dict || w->rt || v6)
        kv_put64(p + KV_SST_PROPS_OFF_DICT_SIZE, w->dict ? w->dict_len : 0);
    if (w->rt || v6)
        kv_put64(p + KV_SST_PROPS_OFF_RT_SIZE, w->rt ? w->rt_len : 0);
    if (v6) {
        kv_put64(p + KV_SST_PROPS_OFF_RF_SIZE, rf_len);
        kv_put32(p + KV_SST_PROPS_OFF_PREFIX_LEN, w->nphashes ? (uint32_t)w->prefix_len : 0);
        kv_put32(p + KV_SST_PROPS_OFF_RF_KEYS,
                 w->rf_mode == RF_OWN ? KV_SST_RF_KEYS_OWN : KV_SST_RF_KEYS_CALLER);
        kv_put64(p + KV_SST_PROPS_OFF_PREFIX_KEYS, w->nphashes);
    }
    uint8_t *q = p + fixed;
    if (w->smallest_len)
        memcpy(q, w->smallest, w->smallest_len);
    q += w->smallest_len;
    if (w->entries && w->last_len)
        memcpy(q, w->last, w->last_len);
    q += w->entries ? w->last_len : 0;
    memcpy(q, w->note, nlen);
    q += nlen;
    *len = (uint64_t)(q - p);
    int rc = write_block(w, p, (size_t)*len, KV_COMPRESSION_NONE, off);
    free(p);
    return rc;
}

/* The point filter (whole-key hashes and prefix hashes, sized for both
 * at the writer's bits per key, so that a whole key's false positive rate
 * is what it is without prefixes) and the range filter, encoded. */
static int build_filters(kv_sst_writer *w, kv_bloom **filter, void **fbuf, size_t *flen,
                         uint8_t **rfbuf, size_t *rflen)
{
    int rc = KV_OK;
    if (w->rf) {
        uint64_t keys = kv_rfilter_builder_keys(w->rf);
        /* A table of pairs whose range filter holds no key, or more keys
         * than it has pairs, was given the wrong keys: its filter would
         * skip ranges that hold its pairs. */
        if ((w->entries > 0 && keys == 0) || keys > w->entries)
            return kv_error_set(KV_EINVAL,
                                "%s: a range filter of %llu keys for a table of %llu entries",
                                w->path, (unsigned long long)keys, (unsigned long long)w->entries);
        rc = kv_rfilter_builder_finish(w->rf, rfbuf, rflen);
        if (rc == KV_OK && *rflen > KV_SST_MAX_RAW_BLOCK)
            rc = KV_EINVAL;
    }
    if (rc == KV_OK && w->nphashes > w->entries)
        return kv_error_set(KV_EINVAL, "%s: %zu prefixes for a table of %llu entries", w->path,
                            w->nphashes, (unsigned long long)w->entries);
    if (rc == KV_OK && w->o.bits_per_key > 0) {
        rc = kv_bloom_new(w->o.filter_layout, (uint64_t)w->nhashes + w->nphashes, w->o.bits_per_key,
                          w->o.seed, filter);
        if (rc == KV_OK) { /* ours alone until the table is read back */
            kv_bloom_add_hashes_owned(*filter, w->hashes, w->nhashes);
            kv_bloom_add_hashes_owned(*filter, w->phashes, w->nphashes);
            rc = kv_bloom_encode(*filter, fbuf, flen);
        }
    }
    return rc;
}

int kv_sst_writer_finish(kv_sst_writer *w, uint64_t *file_size)
{
    if (!w)
        return KV_EINVAL;
    kv_bloom *filter = NULL;
    void *fbuf = NULL;
    uint8_t *rfbuf = NULL;
    size_t flen = 0, rflen = 0;
    uint64_t ioff = 0, ilen = 0, poff = 0, plen = 0, foff = 0, fsize = 0;
    int rc = flush_data_block(w);
    if (rc == KV_OK && w->sampling)
        rc = end_sampling(w); /* a table smaller than the samples wanted */
    if (rc == KV_OK)
        rc = build_filters(w, &filter, &fbuf, &flen, &rfbuf, &rflen);
    if (rc == KV_OK)
        rc = kv_blockb_finish(&w->index);
    if (rc == KV_OK) {
        ilen = w->index.len;
        rc = write_block(w, w->index.buf, w->index.len, KV_COMPRESSION_NONE, &ioff);
    }
    if (rc == KV_OK)
        rc = write_properties(w, filter, rflen, &poff, &plen);
    if (rc == KV_OK && w->dict) { /* version 2: the dictionary, after the properties */
        uint64_t doff;
        rc = write_block(w, w->dict, w->dict_len, KV_COMPRESSION_NONE, &doff);
    }
    if (rc == KV_OK && w->rt) { /* version 3: the range tombstones, after the dictionary */
        uint64_t roff;
        rc = write_block(w, w->rt, w->rt_len, KV_COMPRESSION_NONE, &roff);
    }
    if (rc == KV_OK && rfbuf) { /* version 4: the range filter, after the range tombstones */
        uint64_t rfoff;
        rc = write_block(w, rfbuf, rflen, KV_COMPRESSION_NONE, &rfoff);
    }
    if (rc == KV_OK) {
        foff = w->offset;
        if (fbuf) {
            fsize = flen;
            rc = write_block(w, fbuf, flen, KV_COMPRESSION_NONE, &foff);
        }
    }
    if (rc == KV_OK) {
        uint8_t t[KV_SST_TRAILER];
        memcpy(t + KV_SST_TRAILER_OFF_MAGIC, KV_SST_MAGIC, 8);
        kv_put32(t + KV_SST_TRAILER_OFF_VERSION, scan_filtered(w) ? KV_SST_VERSION
                                                 : w->rt          ? KV_SST_VERSION_RT
                                                 : w->dict        ? KV_SST_VERSION_DICT
                                                                  : KV_SST_VERSION_NO_DICT);
        kv_put32(t + KV_SST_TRAILER_OFF_CHECKSUM_KIND, KV_SST_CHECKSUM_XXH3);
        kv_put64(t + KV_SST_TRAILER_OFF_INDEX_OFF, ioff);
        kv_put64(t + KV_SST_TRAILER_OFF_INDEX_SIZE, ilen);
        kv_put64(t + KV_SST_TRAILER_OFF_PROPS_OFF, poff);
        kv_put64(t + KV_SST_TRAILER_OFF_PROPS_SIZE, plen);
        kv_put64(t + KV_SST_TRAILER_OFF_FILTER_OFF, foff);
        kv_put64(t + KV_SST_TRAILER_OFF_FILTER_SIZE, fsize);
        kv_put64(t + KV_SST_TRAILER_OFF_CHECKSUM, XXH3_64bits(t, KV_SST_TRAILER_OFF_CHECKSUM));
        rc = out_write(w, t, sizeof t);
    }
    if (rc == KV_OK)
        rc = out_flush(w);
    if (rc == KV_OK)
        rc = kv_file_sync(w->file);
    int crc = kv_file_close(w->file);
    w->file = NULL;
    if (rc == KV_OK)
        rc = crc;
    if (rc == KV_OK)
        rc = w->o.defer_dir_sync ? kv_file_rename_unsynced(w->tmp, w->path)
                                 : kv_file_rename(w->tmp, w->path);
    if (rc != KV_OK)
        unlink(w->tmp); /* never a half-written table under either name */
    else if (file_size)
        *file_size = w->offset;
    kv_free(fbuf);
    kv_free(rfbuf);
    kv_bloom_free(filter);
    writer_free(w);
    return rc;
}

/* ---- scan filters ------------------------------------------------------------------ */

int kv_sst_writer_set_range_filter(kv_sst_writer *w, double bits_per_key, uint64_t seed)
{
    /* The filter maps keys in bytewise order: a table in another order
     * would have its ranges asked in an order the filter does not keep. */
    if (!w || w->entries > 0 || w->rf || w->o.comparator ||
        !(bits_per_key >= KV_RFILTER_MIN_BITS && bits_per_key <= KV_RFILTER_MAX_BITS))
        return KV_EINVAL;
    return kv_rfilter_builder_new(bits_per_key, seed, &w->rf);
}

int kv_sst_writer_add_range_key(kv_sst_writer *w, const void *key, size_t klen)
{
    if (!w || !w->rf || (klen && !key) || w->rf_mode == RF_OWN)
        return KV_EINVAL; /* RF_OWN: the table's adds give its keys already */
    w->rf_mode = RF_CALLER;
    return kv_rfilter_builder_add(w->rf, key, klen);
}

int kv_sst_writer_set_prefix(kv_sst_writer *w, size_t prefix_len)
{
    /* Prefix hashes are the caller's, like its whole-key hashes: a table
     * written with kv_sst_writer_add (whose filter hashes whole keys
     * itself) refuses them at its first add. */
    if (!w || w->entries > 0 || prefix_len == 0 || prefix_len > UINT32_MAX ||
        w->o.bits_per_key <= 0 || w->filter_hash == KV_SST_FILTER_HASH_KEY)
        return KV_EINVAL;
    w->prefix_len = prefix_len;
    return KV_OK;
}

int kv_sst_writer_add_prefix_hash(kv_sst_writer *w, uint64_t prefix_hash)
{
    if (!w || !w->prefix_len)
        return KV_EINVAL;
    if (w->nphashes && w->phashes[w->nphashes - 1] == prefix_hash)
        return KV_OK; /* the same prefix as the key before: one filter key */
    if (w->nphashes == w->phcap) {
        size_t nc = w->phcap ? 2 * w->phcap : 256;
        uint64_t *h = realloc(w->phashes, nc * sizeof *h);
        if (!h)
            return KV_ENOMEM;
        w->phashes = h;
        w->phcap = nc;
    }
    w->phashes[w->nphashes++] = prefix_hash;
    return KV_OK;
}
