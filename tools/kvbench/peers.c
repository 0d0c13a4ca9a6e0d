/* peers.c - LevelDB and RocksDB behind kvbench's engine interface
 * (kvbench.h), through their C APIs (leveldb/c.h, rocksdb/c.h), so that
 * `kvbench --engine=leveldb|rocksdb` runs the same workloads with the same
 * keys as kv. Built only with -DKV_BENCH_PEERS=ON.
 *
 * Each engine gets what kvbench's flags set and kv has too: a Bloom filter
 * of --bloom_bits bits per key (none at 0), an LRU block cache of
 * --cache_size bytes (none at 0), --write_buffer_size, --block_size,
 * --compression_type (LevelDB 1.23 has no zstd: refused), --sync. All else
 * stays at the engine's defaults, but for --min_blob_size=N, which turns on
 * RocksDB's integrated blob files (enable_blob_files, min_blob_size N,
 * enable_blob_gc; blob_file_size and blob_gc_age_cutoff, 0.25, stay
 * RocksDB's); LevelDB has no blob files and ignores it.
 *
 * Counters: LevelDB's C API exposes none, so its per-get figures are absent.
 * RocksDB runs with statistics on; its tickers give gets (and MultiGet's
 * keys), filter negatives (bloom.filter.useful), positives
 * (bloom.filter.full.positive), true positives
 * (bloom.filter.full.true.positive) and data blocks read and cached
 * (block.cache.data.miss/hit), read from the statistics text. */
#define _POSIX_C_SOURCE 200809L
#include <leveldb/c.h>
#include <rocksdb/c.h>

#include <kv/bloom.h>
#include <kv/kv.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "kvbench.h"

#define PEER_ERR (-100) /* the message is in last_error */

static _Thread_local char last_error[512];

/* Takes an engine's error string (freeing it); returns PEER_ERR or 0. */
static int take_error(char *err, void (*release)(void *))
{
    if (!err)
        return 0;
    snprintf(last_error, sizeof last_error, "%s", err);
    release(err);
    return PEER_ERR;
}

static int refuse(const char *msg)
{
    snprintf(last_error, sizeof last_error, "%s", msg);
    return PEER_ERR;
}

static const char *peer_errstr(int rc)
{
    if (rc == PEER_ERR)
        return last_error;
    return kv_strerror(rc);
}

/* The FPR a filter of `bits` bits per key and k probes should reach, from
 * kv's own model of the layout (classic: LevelDB's; 512-bit blocks:
 * RocksDB's FastLocalBloom, like kv's blocked layout). */
static double bloom_fpr(kv_bloom_layout layout, double bits, unsigned k)
{
    const uint64_t n = 1000000;
    return bits > 0 ? kv_bloom_expected_fpr(layout, (uint64_t)(bits * (double)n), n, k) : 1;
}

/* Whether dir/name exists (whatever it is). */
static int has_file(const char *dir, const char *name)
{
    char p[4096];
    struct stat st;
    return snprintf(p, sizeof p, "%s/%s", dir, name) < (int)sizeof p && lstat(p, &st) == 0;
}

/* ---- LevelDB ------------------------------------------------------------------------ */

struct ldb {
    leveldb_t *db;
    leveldb_options_t *opts;
    leveldb_cache_t *cache;
    leveldb_filterpolicy_t *filter;
    leveldb_readoptions_t *ro;
    leveldb_writeoptions_t *wo, *wo_sync;
};

static void ldb_free(struct ldb *d)
{
    if (d->db)
        leveldb_close(d->db);
    if (d->opts)
        leveldb_options_destroy(d->opts);
    if (d->cache)
        leveldb_cache_destroy(d->cache);
    if (d->filter)
        leveldb_filterpolicy_destroy(d->filter);
    if (d->ro)
        leveldb_readoptions_destroy(d->ro);
    if (d->wo)
        leveldb_writeoptions_destroy(d->wo);
    if (d->wo_sync)
        leveldb_writeoptions_destroy(d->wo_sync);
    free(d);
}

static int ldb_open(const struct bench_config *c, const char *dir, void **out)
{
    *out = NULL;
    if (c->compression == KV_COMPRESSION_ZSTD)
        return refuse("LevelDB 1.23 has no zstd: use --compression_type=none or snappy");
    struct ldb *d = calloc(1, sizeof *d);
    if (!d)
        return KV_ENOMEM;
    d->opts = leveldb_options_create();
    leveldb_options_set_create_if_missing(d->opts, (unsigned char)c->create);
    leveldb_options_set_write_buffer_size(d->opts, c->write_buffer_size);
    leveldb_options_set_block_size(d->opts, c->block_size);
    leveldb_options_set_compression(d->opts, c->compression == KVB_COMPRESSION_SNAPPY
                                                 ? leveldb_snappy_compression
                                                 : leveldb_no_compression);
    if (c->cache_size) {
        d->cache = leveldb_cache_create_lru(c->cache_size);
        leveldb_options_set_cache(d->opts, d->cache);
    }
    if (c->bloom_bits > 0) {
        d->filter = leveldb_filterpolicy_create_bloom((int)lround(c->bloom_bits));
        leveldb_options_set_filter_policy(d->opts, d->filter);
    }
    d->ro = leveldb_readoptions_create();
    d->wo = leveldb_writeoptions_create();
    d->wo_sync = leveldb_writeoptions_create();
    leveldb_writeoptions_set_sync(d->wo, (unsigned char)c->sync);
    leveldb_writeoptions_set_sync(d->wo_sync, 1);
    char *err = NULL;
    d->db = leveldb_open(d->opts, dir, &err);
    int rc = take_error(err, leveldb_free);
    if (rc != 0) {
        d->db = NULL;
        ldb_free(d);
        return rc;
    }
    *out = d;
    return 0;
}

static void ldb_close(void *h)
{
    ldb_free(h);
}

static int ldb_put(void *h, const void *k, size_t kl, const void *v, size_t vl, int sync)
{
    struct ldb *d = h;
    char *err = NULL;
    leveldb_put(d->db, sync ? d->wo_sync : d->wo, k, kl, v, vl, &err);
    return take_error(err, leveldb_free);
}

static int ldb_del(void *h, const void *k, size_t kl, int sync)
{
    struct ldb *d = h;
    char *err = NULL;
    leveldb_delete(d->db, sync ? d->wo_sync : d->wo, k, kl, &err);
    return take_error(err, leveldb_free);
}

static int ldb_write(void *h, const struct bench_kv *kvs, size_t n, int sync)
{
    struct ldb *d = h;
    leveldb_writebatch_t *b = leveldb_writebatch_create();
    for (size_t i = 0; i < n; i++)
        leveldb_writebatch_put(b, kvs[i].key, kvs[i].klen, kvs[i].val, kvs[i].vlen);
    char *err = NULL;
    leveldb_write(d->db, sync ? d->wo_sync : d->wo, b, &err);
    leveldb_writebatch_destroy(b);
    return take_error(err, leveldb_free);
}

static int ldb_get(void *h, const void *k, size_t kl, size_t *vlen)
{
    struct ldb *d = h;
    char *err = NULL;
    char *v = leveldb_get(d->db, d->ro, k, kl, vlen, &err);
    int rc = take_error(err, leveldb_free);
    if (rc != 0)
        return rc;
    if (!v)
        return 0;
    leveldb_free(v);
    return 1;
}

static int ldb_compact(void *h)
{
    struct ldb *d = h;
    leveldb_compact_range(d->db, NULL, 0, NULL, 0);
    return 0;
}

/* LevelDB says nothing about pending work through its C API, so this applies
 * its own triggers (db/version_set.cc): level 0 holds fewer than 4 files and
 * level L >= 1 at most 10^L MiB ("leveldb.stats"), and the stats text stays
 * the same across a 100 ms poll (no compaction finished meanwhile). A
 * compaction that a read's seeks triggered is not foreseen. */
static int ldb_settled(const char *stats)
{
    const char *p = strstr(stats, "--------------------------------------------------\n");
    if (!p)
        return 0;
    p = strchr(p, '\n') + 1;
    int level, files;
    double mb;
    while (sscanf(p, "%d %d %lf", &level, &files, &mb) == 3) {
        if (level == 0 ? files >= 4 : mb > pow(10.0, level) * 1.048576)
            return 0;
        const char *nl = strchr(p, '\n');
        if (!nl)
            break;
        p = nl + 1;
    }
    return 1;
}

static int ldb_wait_compaction(void *h)
{
    struct ldb *d = h;
    char *prev = NULL;
    for (;;) {
        char *now = leveldb_property_value(d->db, "leveldb.stats");
        if (!now)
            return 0;
        int done = prev && strcmp(prev, now) == 0 && ldb_settled(now);
        leveldb_free(prev);
        prev = now;
        if (done)
            break;
        struct timespec ts = {0, 100 * 1000000L};
        nanosleep(&ts, NULL);
    }
    leveldb_free(prev);
    return 0;
}

static int ldb_counters(void *h, struct bench_counters *out)
{
    (void)h;
    memset(out, 0, sizeof *out); /* LevelDB's C API has no counters */
    return 0;
}

/* LevelDB's C API tells the files of a level ("leveldb.num-files-at-
 * level0") and nothing of its writers' waits or of compactions in hand. */
static int ldb_sample(void *h, struct bench_sample *out)
{
    struct ldb *d = h;
    memset(out, 0, sizeof *out);
    char *v = leveldb_property_value(d->db, "leveldb.num-files-at-level0");
    if (v) {
        out->l0_files = strtoull(v, NULL, 10);
        out->have |= SAMPLE_L0_FILES;
    }
    leveldb_free(v);
    return 0;
}

static double ldb_expected_fpr(double bits)
{
    /* LevelDB: k = bits * ln 2, rounded down, in [1, 30] */
    double b = floor(bits + 0.5), k = floor(b * 0.69);
    return bloom_fpr(KV_BLOOM_CLASSIC, b, k < 1 ? 1 : k > 30 ? 30 : (unsigned)k);
}

static int ldb_iter_new(void *h, void **it)
{
    struct ldb *d = h;
    *it = leveldb_create_iterator(d->db, d->ro);
    return *it ? 0 : KV_ENOMEM;
}

static void ldb_seek(void *it, const void *k, size_t kl) { leveldb_iter_seek(it, k, kl); }
static void ldb_seek_first(void *it) { leveldb_iter_seek_to_first(it); }
static void ldb_seek_last(void *it) { leveldb_iter_seek_to_last(it); }
static void ldb_next(void *it) { leveldb_iter_next(it); }
static void ldb_prev(void *it) { leveldb_iter_prev(it); }
static int ldb_valid(void *it) { return leveldb_iter_valid(it); }
static const void *ldb_key(void *it, size_t *n) { return leveldb_iter_key(it, n); }
static const void *ldb_value(void *it, size_t *n) { return leveldb_iter_value(it, n); }
static void ldb_iter_free(void *it) { leveldb_iter_destroy(it); }

static int ldb_iter_status(void *it)
{
    char *err = NULL;
    leveldb_iter_get_error(it, &err);
    return take_error(err, leveldb_free);
}

/* LevelDB's own test (DB::Open's "exists"): a CURRENT file. RocksDB
 * writes one too, and an IDENTITY, which LevelDB does not. */
static int ldb_is_db(const char *dir, char *why, size_t n)
{
    if (!has_file(dir, "CURRENT"))
        snprintf(why, n, "no LevelDB CURRENT file");
    else if (has_file(dir, "IDENTITY"))
        snprintf(why, n, "its IDENTITY file is RocksDB's");
    else
        return 1;
    return 0;
}

/* DestroyDB removes the files LevelDB names (CURRENT, LOCK, LOG, LOG.old,
 * MANIFEST-n, n.log, n.ldb, n.sst, n.dbtmp), then the directory if empty. */
static int ldb_destroy(const char *dir)
{
    leveldb_options_t *o = leveldb_options_create();
    char *err = NULL;
    leveldb_destroy_db(o, dir, &err);
    leveldb_options_destroy(o);
    return take_error(err, leveldb_free);
}

static const struct bench_engine leveldb_engine = {
    .name = "leveldb",
    .open = ldb_open,
    .close = ldb_close,
    .put = ldb_put,
    .del = ldb_del,
    .write = ldb_write,
    .get = ldb_get,
    .compact = ldb_compact,
    .wait_compaction = ldb_wait_compaction,
    .counters = ldb_counters,
    .sample = ldb_sample,
    .tables = NULL,
    .expected_fpr = ldb_expected_fpr,
    .iter_new = ldb_iter_new,
    .iter_seek = ldb_seek,
    .iter_seek_first = ldb_seek_first,
    .iter_seek_last = ldb_seek_last,
    .iter_next = ldb_next,
    .iter_prev = ldb_prev,
    .iter_valid = ldb_valid,
    .iter_key = ldb_key,
    .iter_value = ldb_value,
    .iter_status = ldb_iter_status,
    .iter_free = ldb_iter_free,
    .is_db = ldb_is_db,
    .destroy = ldb_destroy,
    .errstr = peer_errstr,
};

/* ---- RocksDB ------------------------------------------------------------------------- */

struct rdb {
    rocksdb_t *db;
    rocksdb_column_family_handle_t *cf; /* the default column family, for the batched MultiGet */
    rocksdb_options_t *opts;
    rocksdb_block_based_table_options_t *table;
    rocksdb_cache_t *cache;
    rocksdb_readoptions_t *ro;
    rocksdb_writeoptions_t *wo, *wo_sync;
    size_t prefix_len; /* its fixed-length prefix extractor's; 0: none */
    char *dir;         /* the database directory: its LOG, for the level report */
    int direct;        /* opened with use_direct_reads */
    int universal;     /* opened with universal compaction */
};

static void rdb_free(struct rdb *d)
{
    if (d->cf)
        rocksdb_column_family_handle_destroy(d->cf);
    if (d->db)
        rocksdb_close(d->db);
    if (d->opts)
        rocksdb_options_destroy(d->opts);
    if (d->table)
        rocksdb_block_based_options_destroy(d->table); /* owns the filter policy */
    if (d->cache)
        rocksdb_cache_destroy(d->cache);
    if (d->ro)
        rocksdb_readoptions_destroy(d->ro);
    if (d->wo)
        rocksdb_writeoptions_destroy(d->wo);
    if (d->wo_sync)
        rocksdb_writeoptions_destroy(d->wo_sync);
    free(d->dir);
    free(d);
}

/* ---- RocksDB's uint64-add merge operator, through its C API ---------------------------- */

/* The same arithmetic as kv_merge_uint64_add (kv/merge_ops.c), written
 * against RocksDB's callbacks: 8-byte little-endian values and operands,
 * summed modulo 2^64, a missing value 0; any other length declines the
 * merge (*success 0: RocksDB fails the read or compaction). Results come
 * from malloc and go back through rdb_merge_free. */
static uint64_t rdb_le64(const char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | (uint8_t)p[i];
    return v;
}

static char *rdb_merge_sum(uint64_t sum, const char *const *ops, const size_t *lens, int n,
                           unsigned char *success, size_t *len)
{
    *success = 0;
    for (int i = 0; i < n; i++) {
        if (lens[i] != 8)
            return NULL;
        sum += rdb_le64(ops[i]);
    }
    char *out = malloc(8);
    if (!out)
        return NULL;
    for (int i = 0; i < 8; i++)
        out[i] = (char)(uint8_t)(sum >> (8 * i));
    *success = 1;
    *len = 8;
    return out;
}

static char *rdb_merge_full(void *state, const char *key, size_t klen, const char *existing,
                            size_t elen, const char *const *ops, const size_t *lens, int n,
                            unsigned char *success, size_t *len)
{
    (void)state;
    (void)key;
    (void)klen;
    if (existing && elen != 8) {
        *success = 0;
        return NULL;
    }
    return rdb_merge_sum(existing ? rdb_le64(existing) : 0, ops, lens, n, success, len);
}

static char *rdb_merge_partial(void *state, const char *key, size_t klen, const char *const *ops,
                               const size_t *lens, int n, unsigned char *success, size_t *len)
{
    (void)state;
    (void)key;
    (void)klen;
    return rdb_merge_sum(0, ops, lens, n, success, len);
}

static void rdb_merge_free(void *state, const char *value, size_t len)
{
    (void)state;
    (void)len;
    free((void *)value);
}

static void rdb_merge_destroy(void *state)
{
    (void)state;
}

static const char *rdb_merge_name(void *state)
{
    (void)state;
    return "kvbench.uint64add";
}

static int rdb_open(const struct bench_config *c, const char *dir, void **out)
{
    *out = NULL;
    struct rdb *d = calloc(1, sizeof *d);
    if (!d)
        return KV_ENOMEM;
    d->opts = rocksdb_options_create();
    rocksdb_options_set_create_if_missing(d->opts, (unsigned char)c->create);
    rocksdb_options_set_write_buffer_size(d->opts, c->write_buffer_size);
    rocksdb_options_set_compression(d->opts, c->compression == KV_COMPRESSION_ZSTD
                                                 ? rocksdb_zstd_compression
                                                 : rocksdb_no_compression);
    rocksdb_options_enable_statistics(d->opts);
    if (c->dynamic_level_bytes_set)
        rocksdb_options_set_level_compaction_dynamic_level_bytes(d->opts,
                                                                (unsigned char)c->dynamic_level_bytes);
    /* --compaction_style=lazy_leveled: universal compaction, RocksDB's
     * nearest (sorted runs merged by size ratio, no per-level filters);
     * leveled is its default. --max_background_jobs=N: N jobs, a large
     * compaction split in up to N subcompactions, as kv splits its own. */
    rocksdb_options_set_compaction_style(d->opts, c->compaction_style == KV_COMPACTION_LAZY_LEVELED
                                                      ? rocksdb_universal_compaction
                                                      : rocksdb_level_compaction);
    if (c->max_background_jobs_set) {
        rocksdb_options_set_max_background_jobs(d->opts, c->max_background_jobs);
        rocksdb_options_set_max_subcompactions(d->opts, (uint32_t)c->max_background_jobs);
    }
    if (c->use_direct_reads)
        rocksdb_options_set_use_direct_reads(d->opts, 1);
    d->direct = c->use_direct_reads;
    d->universal = c->compaction_style == KV_COMPACTION_LAZY_LEVELED;
    d->dir = strdup(dir);
    if (!d->dir) {
        rdb_free(d);
        return KV_ENOMEM;
    }
    if (c->blob_files) {
        rocksdb_options_set_enable_blob_files(d->opts, 1);
        rocksdb_options_set_min_blob_size(d->opts, (uint64_t)c->min_blob_size);
        rocksdb_options_set_enable_blob_gc(d->opts, 1);
    }
    d->table = rocksdb_block_based_options_create();
    rocksdb_block_based_options_set_block_size(d->table, c->block_size);
    if (c->cache_size) {
        d->cache = rocksdb_cache_create_lru(c->cache_size);
        rocksdb_block_based_options_set_block_cache(d->table, d->cache);
    } else
        rocksdb_block_based_options_set_no_block_cache(d->table, 1);
    if (c->bloom_bits > 0)
        rocksdb_block_based_options_set_filter_policy(
            d->table, rocksdb_filterpolicy_create_bloom_full(c->bloom_bits));
    rocksdb_options_set_block_based_table_factory(d->opts, d->table);
    /* --prefix_len: a fixed-length prefix extractor; the filter then holds
     * each key's prefix beside the whole key (whole_key_filtering, its
     * default), and seeks within one prefix ask it (rdb_iter_set_bounds). */
    if (c->prefix_len) {
        rocksdb_options_set_prefix_extractor(d->opts, rocksdb_slicetransform_create_fixed_prefix(
                                                          c->prefix_len));
        d->prefix_len = c->prefix_len;
    }
    /* The options own the operator from here (a shared pointer); the
     * column family below is opened with these options, so it has it. */
    if (c->merge_uint64_add)
        rocksdb_options_set_merge_operator(d->opts,
                                           rocksdb_mergeoperator_create(NULL, rdb_merge_destroy,
                                                                        rdb_merge_full,
                                                                        rdb_merge_partial,
                                                                        rdb_merge_free,
                                                                        rdb_merge_name));
    d->ro = rocksdb_readoptions_create();
    d->wo = rocksdb_writeoptions_create();
    d->wo_sync = rocksdb_writeoptions_create();
    rocksdb_writeoptions_set_sync(d->wo, (unsigned char)c->sync);
    rocksdb_writeoptions_set_sync(d->wo_sync, 1);
    char *err = NULL;
    /* Opened with its one column family named, for the handle the C API's
     * batched MultiGet (rocksdb_batched_multi_get_cf) takes. */
    const char *cf_name = "default";
    const rocksdb_options_t *cf_opts = d->opts;
    d->db = rocksdb_open_column_families(d->opts, dir, 1, &cf_name, &cf_opts, &d->cf, &err);
    int rc = take_error(err, rocksdb_free);
    if (rc != 0) {
        d->db = NULL;
        rdb_free(d);
        return rc;
    }
    *out = d;
    return 0;
}

static void rdb_close(void *h)
{
    rdb_free(h);
}

static int rdb_put(void *h, const void *k, size_t kl, const void *v, size_t vl, int sync)
{
    struct rdb *d = h;
    char *err = NULL;
    rocksdb_put(d->db, sync ? d->wo_sync : d->wo, k, kl, v, vl, &err);
    return take_error(err, rocksdb_free);
}

static int rdb_del(void *h, const void *k, size_t kl, int sync)
{
    struct rdb *d = h;
    char *err = NULL;
    rocksdb_delete(d->db, sync ? d->wo_sync : d->wo, k, kl, &err);
    return take_error(err, rocksdb_free);
}

/* DeleteRange on the default column family: one range tombstone. */
static int rdb_delete_range(void *h, const void *b, size_t bl, const void *e, size_t el, int sync)
{
    struct rdb *d = h;
    char *err = NULL;
    rocksdb_delete_range_cf(d->db, sync ? d->wo_sync : d->wo, d->cf, b, bl, e, el, &err);
    return take_error(err, rocksdb_free);
}

static int rdb_merge(void *h, const void *k, size_t kl, const void *op, size_t ol, int sync)
{
    struct rdb *d = h;
    char *err = NULL;
    rocksdb_merge(d->db, sync ? d->wo_sync : d->wo, k, kl, op, ol, &err);
    return take_error(err, rocksdb_free);
}

static int rdb_write(void *h, const struct bench_kv *kvs, size_t n, int sync)
{
    struct rdb *d = h;
    rocksdb_writebatch_t *b = rocksdb_writebatch_create();
    for (size_t i = 0; i < n; i++)
        rocksdb_writebatch_put(b, kvs[i].key, kvs[i].klen, kvs[i].val, kvs[i].vlen);
    char *err = NULL;
    rocksdb_write(d->db, sync ? d->wo_sync : d->wo, b, &err);
    rocksdb_writebatch_destroy(b);
    return take_error(err, rocksdb_free);
}

static int rdb_get(void *h, const void *k, size_t kl, size_t *vlen)
{
    struct rdb *d = h;
    char *err = NULL;
    char *v = rocksdb_get(d->db, d->ro, k, kl, vlen, &err);
    int rc = take_error(err, rocksdb_free);
    if (rc != 0)
        return rc;
    if (!v)
        return 0;
    rocksdb_free(v);
    return 1;
}

/* Keys per MultiGet whose results fit on the stack. */
#define RDB_STACK_BATCH 64

/* RocksDB's batched MultiGet (db_bench's multireadrandom): the keys of a
 * batch sorted and looked up together, level by level. */
static int rdb_multi_get(void *h, size_t n, const void *const *keys, const size_t *klens)
{
    struct rdb *d = h;
    rocksdb_pinnableslice_t *vstack[RDB_STACK_BATCH], **vals = vstack;
    char *estack[RDB_STACK_BATCH], **errs = estack;
    if (n > RDB_STACK_BATCH) {
        vals = malloc(n * sizeof *vals);
        errs = malloc(n * sizeof *errs);
        if (!vals || !errs) {
            free(vals);
            free(errs);
            return KV_ENOMEM;
        }
    }
    memset(vals, 0, n * sizeof *vals); /* left as they are for a key not found */
    memset(errs, 0, n * sizeof *errs);
    rocksdb_batched_multi_get_cf(d->db, d->ro, d->cf, n, (const char *const *)keys, klens, vals,
                                 errs, 0);
    int found = 0, rc = 0;
    for (size_t i = 0; i < n; i++) {
        if (vals[i]) {
            found++;
            rocksdb_pinnableslice_destroy(vals[i]);
        }
        if (errs[i] && rc == 0)
            rc = take_error(errs[i], rocksdb_free);
        else if (errs[i])
            rocksdb_free(errs[i]);
    }
    if (vals != vstack) {
        free(vals);
        free(errs);
    }
    return rc != 0 ? rc : found;
}

static int rdb_compact(void *h)
{
    struct rdb *d = h;
    rocksdb_compact_range(d->db, NULL, 0, NULL, 0);
    return 0;
}

/* An integer property of RocksDB's ("rocksdb.compaction-pending", ...). */
static uint64_t rdb_int_property(struct rdb *d, const char *name)
{
    char *v = rocksdb_property_value(d->db, name);
    uint64_t n = v ? strtoull(v, NULL, 10) : 0;
    rocksdb_free(v);
    return n;
}

/* Blob garbage collection (enable_blob_gc) is no job of its own in RocksDB's
 * integrated blob files: compactions relocate the live values of the
 * oldest files as they rewrite the tables that refer to them, and a file
 * goes once no table does. Waiting for the compactions waits for it.
 * Universal compaction may leave compaction-pending at 1 for good: it is
 * set once the sorted runs reach level0_file_num_compaction_trigger, but
 * the picker merges only runs its size ratio allows. There, a second with
 * nothing pending to flush and no flush or compaction running is done. */
static int rdb_wait_compaction(void *h)
{
    struct rdb *d = h;
    int idle_ms = 0;
    while (rdb_int_property(d, "rocksdb.mem-table-flush-pending") ||
           rdb_int_property(d, "rocksdb.num-running-flushes") ||
           rdb_int_property(d, "rocksdb.num-running-compactions") ||
           (rdb_int_property(d, "rocksdb.compaction-pending") &&
            (!d->universal || ++idle_ms < 1000))) {
        if (rdb_int_property(d, "rocksdb.num-running-compactions"))
            idle_ms = 0;
        struct timespec ts = {0, 1000000L};
        nanosleep(&ts, NULL);
    }
    return 0;
}

/* An integer property into *out; 0 when RocksDB does not know the name. */
static int rdb_property_is(struct rdb *d, const char *name, uint64_t *out)
{
    char *v = rocksdb_property_value(d->db, name);
    if (!v)
        return 0;
    *out = strtoull(v, NULL, 10);
    rocksdb_free(v);
    return 1;
}

/* "rocksdb.<name> COUNT : <n>" from the statistics text; 0 when absent. */
static uint64_t ticker(const char *text, const char *name)
{
    char pat[128];
    snprintf(pat, sizeof pat, "rocksdb.%s COUNT : ", name);
    const char *p = strstr(text, pat);
    return p ? strtoull(p + strlen(pat), NULL, 10) : 0;
}

static int rdb_levels(struct rdb *d, struct bench_counters *out);

static int rdb_counters(void *h, struct bench_counters *out)
{
    struct rdb *d = h;
    memset(out, 0, sizeof *out);
    char *text = rocksdb_options_statistics_get_string(d->opts);
    if (!text)
        return refuse("RocksDB statistics are off");
    /* Gets, and the keys of MultiGets (counted apart), so that the
     * per-get figures of a batched run are per key. */
    out->gets = ticker(text, "number.keys.read") + ticker(text, "number.multiget.keys.read");
    out->memtable_hits = ticker(text, "memtable.hit");
    out->rocksdb_useful = ticker(text, "bloom.filter.useful");
    out->rocksdb_full_positive = ticker(text, "bloom.filter.full.positive");
    out->rocksdb_full_true_positive = ticker(text, "bloom.filter.full.true.positive");
    out->filter_negatives = out->rocksdb_useful;
    out->filter_positives = out->rocksdb_full_positive;
    out->false_positives = out->rocksdb_full_positive - out->rocksdb_full_true_positive;
    out->tables_probed = out->rocksdb_useful + out->rocksdb_full_positive;
    out->cache_hits = ticker(text, "block.cache.data.hit");
    out->cache_misses = ticker(text, "block.cache.data.miss");
    out->data_block_reads = out->cache_misses;
    out->stall_micros = ticker(text, "stall.micros");
    out->rocksdb_seeks = ticker(text, "number.db.seek");
    out->rocksdb_prefix_checked = ticker(text, "bloom.filter.prefix.checked");
    out->rocksdb_prefix_useful = ticker(text, "bloom.filter.prefix.useful");
    out->index_misses = ticker(text, "block.cache.index.miss");
    out->have_filter_figures = 1;
    out->have_rocksdb = 1;
    rocksdb_free(text);
    /* 0 without blob files (or a RocksDB that lacks the properties) */
    rdb_property_is(d, "rocksdb.num-blob-files", &out->blob_files);
    rdb_property_is(d, "rocksdb.total-blob-file-size", &out->blob_bytes);
    rdb_property_is(d, "rocksdb.live-blob-file-garbage-size", &out->blob_garbage_bytes);
    out->direct_io = d->direct;
    return rdb_levels(d, out);
}

/* The number after `"name": ` in a LOG event line; 0 when absent. */
static uint64_t event_field(const char *line, const char *name)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", name);
    const char *p = strstr(line, pat);
    return p ? strtoull(p + strlen(pat), NULL, 10) : 0;
}

/* Bytes compactions wrote into each level since open: the LOG's
 * compaction_finished events (this open's LOG; trivial moves write
 * nothing and log none). */
static void rdb_compaction_bytes(const struct rdb *d, uint64_t written[7])
{
    char path[4096];
    snprintf(path, sizeof path, "%s/LOG", d->dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char line[8192];
    while (fgets(line, sizeof line, f)) {
        if (!strstr(line, "\"event\": \"compaction_finished\""))
            continue;
        uint64_t l = event_field(line, "output_level");
        written[l < 7 ? l : 6] += event_field(line, "total_output_size");
    }
    fclose(f);
}

/* The level report (kvbench.h, bench_counters.have_levels): files and
 * bytes per level from its live files, runs counted as level 0's files
 * plus one per deeper level that holds any, bytes written per level over
 * the bytes the user wrote. */
static int rdb_levels(struct rdb *d, struct bench_counters *out)
{
    const rocksdb_livefiles_t *lf = rocksdb_livefiles(d->db);
    if (!lf)
        return 0;
    for (int i = 0, n = rocksdb_livefiles_count(lf); i < n; i++) {
        int l = rocksdb_livefiles_level(lf, i);
        l = l < 0 ? 0 : l > 6 ? 6 : l;
        out->level_tables[l]++;
        out->level_bytes[l] += rocksdb_livefiles_size(lf, i);
    }
    rocksdb_livefiles_destroy(lf);
    out->level_runs[0] = out->level_tables[0];
    for (int l = 1; l < 7; l++)
        out->level_runs[l] = out->level_tables[l] > 0;
    char *text = rocksdb_options_statistics_get_string(d->opts);
    uint64_t user = text ? ticker(text, "bytes.written") : 0;
    out->level_written[0] = text ? ticker(text, "flush.write.bytes") : 0;
    rocksdb_free(text);
    rdb_compaction_bytes(d, out->level_written);
    for (int l = 0; l < 7; l++)
        out->level_write_amp[l] = user ? (double)out->level_written[l] / (double)user : 0;
    out->have_levels = 1;
    return 0;
}

/* The number before `what` in RocksDB's "Stalls(count): 68 level0_slowdown,
 * ..." line; 0 when the line or the name is missing. */
static uint64_t stall_count(const char *line, const char *what)
{
    size_t wl = strlen(what);
    for (const char *p = line; (p = strstr(p, what)) != NULL; p += wl) {
        if (p[wl] != ',' || p - line < 2 || p[-1] != ' ')
            continue;
        const char *q = p - 1;
        while (q > line && q[-1] >= '0' && q[-1] <= '9')
            q--;
        return strtoull(q, NULL, 10);
    }
    return 0;
}

/* Properties: level-0 files, the pending-compaction estimate, running
 * flushes and compactions. The statistics: bytes flushes and compactions
 * wrote (flush.write.bytes, compact.write.bytes). The column family's
 * stats text: its "Stalls(count)" line, which counts the times the write
 * controller began a delay (level0_slowdown, slowdown for
 * pending_compaction_bytes, memtable_slowdown) or a stop (level0_numfiles,
 * stop for pending_compaction_bytes, memtable_compaction); the *_with_
 * compaction counts are parts of those and left out. */
static int rdb_sample(void *h, struct bench_sample *out)
{
    struct rdb *d = h;
    memset(out, 0, sizeof *out);
    uint64_t compactions, flushes;
    if (rdb_property_is(d, "rocksdb.num-files-at-level0", &out->l0_files))
        out->have |= SAMPLE_L0_FILES;
    if (rdb_property_is(d, "rocksdb.estimate-pending-compaction-bytes",
                        &out->pending_compaction_bytes))
        out->have |= SAMPLE_PENDING_BYTES;
    if (rdb_property_is(d, "rocksdb.num-running-compactions", &compactions) &&
        rdb_property_is(d, "rocksdb.num-running-flushes", &flushes)) {
        out->compacting = compactions + flushes > 0;
        out->have |= SAMPLE_COMPACTING;
    }
    char *text = rocksdb_options_statistics_get_string(d->opts);
    if (text) {
        out->compaction_bytes =
            ticker(text, "compact.write.bytes") + ticker(text, "flush.write.bytes");
        out->have |= SAMPLE_COMPACTION_BYTES;
        rocksdb_free(text);
    }
    text = rocksdb_property_value(d->db, "rocksdb.cfstats-no-file-histogram");
    const char *line = text ? strstr(text, "Stalls(count): ") : NULL;
    if (line) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = 0;
        out->write_delays = stall_count(line, "level0_slowdown") +
                            stall_count(line, "slowdown for pending_compaction_bytes") +
                            stall_count(line, "memtable_slowdown");
        out->write_stops = stall_count(line, "level0_numfiles") +
                           stall_count(line, "stop for pending_compaction_bytes") +
                           stall_count(line, "memtable_compaction");
        out->have |= SAMPLE_DELAYS | SAMPLE_STOPS;
    }
    rocksdb_free(text);
    return 0;
}

static double rdb_expected_fpr(double bits)
{
    /* RocksDB's FastLocalBloom (format_version 5) picks k from millibits
     * per key (FastLocalBloomImpl::ChooseNumProbes); the cache-local
     * layout adds a little to the ideal rate, ignored here. */
    static const int limits[] = {2080, 3580, 5100, 6640, 8300, 10070, 11720, 14001,
                                 16050, 18300, 22001, 25501};
    int millibits = (int)lround(bits * 1000), k = 0;
    while (k < 12 && millibits > limits[k])
        k++;
    k = k < 12 ? k + 1 : millibits > 50000 ? 24 : (millibits - 1) / 2000 - 1;
    return bloom_fpr(KV_BLOOM_BLOCKED, bits, (unsigned)k);
}

/* An iterator of kvbench's on RocksDB. Unbounded, it is one iterator on
 * the database's read options. Once bounded (rdb_iter_set_bounds), each
 * seek goes to one of two iterators with read options of their own, whose
 * iterate_lower_bound and iterate_upper_bound are lo and hi here: the C
 * API keeps a Slice of the caller's buffer in the options and an iterator
 * a pointer to that Slice, so bounds rewritten in place hold from the next
 * seek on (the buffers never move). With a prefix extractor, a range whose
 * bounds share their first prefix_len bytes goes to the prefix iterator
 * (prefix_same_as_start: its seeks ask the prefix Bloom filter); any other
 * range to a total-order one, since a prefix seek may miss the keys of
 * the next prefix. That is what RocksDB's auto_prefix_mode decides, which
 * its C API (7.8) does not offer. Without one, only the total-order one. */
struct rdb_iter {
    struct rdb *d;
    rocksdb_iterator_t *cur; /* seeks and steps go to it */
    rocksdb_iterator_t *plain, *total, *prefix;
    rocksdb_readoptions_t *ro_total, *ro_prefix;
    size_t ll, hl;
    char lo[1024], hi[1024];
};

static int rdb_iter_new(void *h, void **it)
{
    struct rdb *d = h;
    struct rdb_iter *i = calloc(1, sizeof *i);
    *it = NULL;
    if (!i)
        return KV_ENOMEM;
    i->d = d;
    i->cur = i->plain = rocksdb_create_iterator(d->db, d->ro);
    if (!i->plain) {
        free(i);
        return KV_ENOMEM;
    }
    *it = i;
    return 0;
}

/* A bounded iterator on read options ro (made here) of the bounds lo, hi. */
static int rdb_bounded(struct rdb_iter *i, rocksdb_readoptions_t **ro, rocksdb_iterator_t **it,
                       int prefix)
{
    if (*it)
        return 0;
    if (!*ro && !(*ro = rocksdb_readoptions_create()))
        return KV_ENOMEM;
    rocksdb_readoptions_set_total_order_seek(*ro, (unsigned char)!prefix);
    rocksdb_readoptions_set_prefix_same_as_start(*ro, (unsigned char)prefix);
    rocksdb_readoptions_set_iterate_lower_bound(*ro, i->lo, i->ll);
    rocksdb_readoptions_set_iterate_upper_bound(*ro, i->hi, i->hl);
    *it = rocksdb_create_iterator(i->d->db, *ro);
    return *it ? 0 : KV_ENOMEM;
}

static int rdb_iter_set_bounds(void *h, const void *lo, size_t ll, const void *hi, size_t hl)
{
    struct rdb_iter *i = h;
    if (ll > sizeof i->lo || hl > sizeof i->hi)
        return refuse("a bound longer than 1024 bytes");
    memcpy(i->lo, lo, ll);
    memcpy(i->hi, hi, hl);
    i->ll = ll;
    i->hl = hl;
    size_t p = i->d->prefix_len;
    int prefix = p && ll >= p && hl >= p && !memcmp(lo, hi, p);
    rocksdb_readoptions_t **ro = prefix ? &i->ro_prefix : &i->ro_total;
    rocksdb_iterator_t **it = prefix ? &i->prefix : &i->total;
    int rc = rdb_bounded(i, ro, it, prefix);
    if (rc != 0)
        return rc;
    /* the same buffers, new lengths: the Slices the iterators point at */
    rocksdb_readoptions_set_iterate_lower_bound(*ro, i->lo, i->ll);
    rocksdb_readoptions_set_iterate_upper_bound(*ro, i->hi, i->hl);
    i->cur = *it;
    return 0;
}

static void rdb_seek(void *it, const void *k, size_t kl)
{
    rocksdb_iter_seek(((struct rdb_iter *)it)->cur, k, kl);
}
static void rdb_seek_first(void *it)
{
    rocksdb_iter_seek_to_first(((struct rdb_iter *)it)->cur);
}
static void rdb_seek_last(void *it)
{
    rocksdb_iter_seek_to_last(((struct rdb_iter *)it)->cur);
}
static void rdb_next(void *it)
{
    rocksdb_iter_next(((struct rdb_iter *)it)->cur);
}
static void rdb_prev(void *it)
{
    rocksdb_iter_prev(((struct rdb_iter *)it)->cur);
}
static int rdb_valid(void *it)
{
    return rocksdb_iter_valid(((struct rdb_iter *)it)->cur);
}
static const void *rdb_key(void *it, size_t *n)
{
    return rocksdb_iter_key(((struct rdb_iter *)it)->cur, n);
}
static const void *rdb_value(void *it, size_t *n)
{
    return rocksdb_iter_value(((struct rdb_iter *)it)->cur, n);
}

static void rdb_iter_free(void *h)
{
    struct rdb_iter *i = h;
    if (!i)
        return;
    rocksdb_iterator_t *its[3] = {i->plain, i->total, i->prefix};
    for (int k = 0; k < 3; k++)
        if (its[k])
            rocksdb_iter_destroy(its[k]);
    if (i->ro_total)
        rocksdb_readoptions_destroy(i->ro_total);
    if (i->ro_prefix)
        rocksdb_readoptions_destroy(i->ro_prefix);
    free(i);
}

static int rdb_iter_status(void *it)
{
    char *err = NULL;
    rocksdb_iter_get_error(((struct rdb_iter *)it)->cur, &err);
    return take_error(err, rocksdb_free);
}

static int rdb_is_db(const char *dir, char *why, size_t n)
{
    if (!has_file(dir, "CURRENT") || !has_file(dir, "IDENTITY")) {
        snprintf(why, n, "no RocksDB CURRENT and IDENTITY files");
        return 0;
    }
    return 1;
}

/* DestroyDB removes the files RocksDB names (its logs, tables, MANIFEST-n,
 * OPTIONS-n, CURRENT, IDENTITY, LOCK, LOG*), then the directory if empty. */
static int rdb_destroy(const char *dir)
{
    rocksdb_options_t *o = rocksdb_options_create();
    char *err = NULL;
    rocksdb_destroy_db(o, dir, &err);
    rocksdb_options_destroy(o);
    return take_error(err, rocksdb_free);
}

/* fillbulk: an SstFileWriter with the database's own options. */
struct rdb_bulk {
    rocksdb_envoptions_t *env;
    rocksdb_sstfilewriter_t *w;
};

static int rdb_bulk_finish(void *h)
{
    struct rdb_bulk *b = h;
    char *err = NULL;
    rocksdb_sstfilewriter_finish(b->w, &err);
    rocksdb_sstfilewriter_destroy(b->w);
    rocksdb_envoptions_destroy(b->env);
    free(b);
    return take_error(err, rocksdb_free);
}

static int rdb_bulk_open(void *h, const struct bench_config *c, const char *path, void **out)
{
    (void)c;
    struct rdb *d = h;
    struct rdb_bulk *b = calloc(1, sizeof *b);
    *out = NULL;
    if (!b)
        return KV_ENOMEM;
    b->env = rocksdb_envoptions_create();
    b->w = rocksdb_sstfilewriter_create(b->env, d->opts);
    char *err = NULL;
    rocksdb_sstfilewriter_open(b->w, path, &err);
    int rc = take_error(err, rocksdb_free);
    if (rc != 0) {
        rocksdb_sstfilewriter_destroy(b->w);
        rocksdb_envoptions_destroy(b->env);
        free(b);
        return rc;
    }
    *out = b;
    return 0;
}

static int rdb_bulk_put(void *h, const void *k, size_t kl, const void *v, size_t vl)
{
    struct rdb_bulk *b = h;
    char *err = NULL;
    rocksdb_sstfilewriter_put(b->w, k, kl, v, vl, &err);
    return take_error(err, rocksdb_free);
}

/* IngestExternalFile with move_files: linked in, as kv_ingest(move = 1). */
static int rdb_bulk_ingest(void *h, const char *const *paths, size_t n)
{
    struct rdb *d = h;
    rocksdb_ingestexternalfileoptions_t *o = rocksdb_ingestexternalfileoptions_create();
    rocksdb_ingestexternalfileoptions_set_move_files(o, 1);
    char *err = NULL;
    rocksdb_ingest_external_file(d->db, paths, n, o, &err);
    rocksdb_ingestexternalfileoptions_destroy(o);
    return take_error(err, rocksdb_free);
}

static const struct bench_engine rocksdb_engine = {
    .name = "rocksdb",
    .open = rdb_open,
    .close = rdb_close,
    .put = rdb_put,
    .del = rdb_del,
    .write = rdb_write,
    .delete_range = rdb_delete_range,
    .merge = rdb_merge,
    .get = rdb_get,
    .multi_get = rdb_multi_get,
    .multi_get_name = "rocksdb_batched_multi_get_cf",
    .compact = rdb_compact,
    .wait_compaction = rdb_wait_compaction,
    .counters = rdb_counters,
    .sample = rdb_sample,
    .tables = NULL,
    .expected_fpr = rdb_expected_fpr,
    .iter_new = rdb_iter_new,
    .iter_seek = rdb_seek,
    .iter_seek_first = rdb_seek_first,
    .iter_seek_last = rdb_seek_last,
    .iter_next = rdb_next,
    .iter_prev = rdb_prev,
    .iter_valid = rdb_valid,
    .iter_key = rdb_key,
    .iter_value = rdb_value,
    .iter_status = rdb_iter_status,
    .iter_free = rdb_iter_free,
    .iter_set_bounds = rdb_iter_set_bounds,
    .is_db = rdb_is_db,
    .destroy = rdb_destroy,
    .bulk_open = rdb_bulk_open,
    .bulk_put = rdb_bulk_put,
    .bulk_finish = rdb_bulk_finish,
    .bulk_ingest = rdb_bulk_ingest,
    .errstr = peer_errstr,
};

const struct bench_engine *bench_peer_engine(const char *name)
{
    if (!strcmp(name, "leveldb"))
        return &leveldb_engine;
    if (!strcmp(name, "rocksdb"))
        return &rocksdb_engine;
    return NULL;
}
