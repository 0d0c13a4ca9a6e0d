/* engine_kv.c - kv behind kvbench's engine interface (kvbench.h): opens,
 * reads, writes and counts through the public API <kv/kv.h>. */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"

/* ---- the kv engine --------------------------------------------------------------------- */

/* An error as a line: kv's name for the code, then its text (kv_error_text:
 * the file at fault and why), read on the thread that got the error. */
static const char *kv_e_errstr(int rc)
{
    static _Thread_local char buf[768];
    const char *text = kv_error_text();
    snprintf(buf, sizeof buf, "%s%s%s", kv_strerror(rc), text[0] ? ": " : "", text);
    return buf;
}

/* The options a database of c is opened with (and fillbulk's tables written with). */
static void kv_e_options(const struct bench_config *c, kv_options *out)
{
    kv_options o;
    kv_options_init(&o);
    o.create_if_missing = c->create;
    o.read_only = c->read_only;
    o.bloom_bits_per_key = c->bloom_bits;
    o.filter_layout = c->filter_layout;
    o.block_cache_size = c->cache_size;
    o.write_buffer_size = c->write_buffer_size;
    o.block_size = c->block_size;
    o.compression = c->compression;
    o.sync = c->sync;
    o.memtable_filter = c->memtable_filter;
    o.filter_policy = c->filter_policy;
    o.use_direct_reads = c->use_direct_reads;
    o.table_memory_budget = c->table_memory_budget;
    o.filter_keyed_hash = c->filter_keyed_hash;
    o.compression_dict_bytes = c->compression_dict_bytes;
    o.compression_min_level = c->compression_min_level;
    o.compression_level = c->compression_level;
    o.compressed_block_size = c->compressed_block_size;
    o.delayed_write_rate = c->delayed_write_rate;
    o.background_nice = c->background_nice;
    o.idle_compaction_ms = c->idle_compaction_ms;
    o.dynamic_level_bytes = c->dynamic_level_bytes;
    o.min_blob_size = c->min_blob_size;
    o.blob_file_size = c->blob_file_size;
    o.blob_gc_threshold = c->blob_gc_threshold;
    if (c->merge_uint64_add)
        o.merge_operator = kv_merge_uint64_add();
    o.prefix_len = c->prefix_len;
    o.range_filter_bits = c->range_filter_bits;
    o.compaction_style = c->compaction_style;
    o.runs_per_level = c->runs_per_level;
    o.max_background_jobs = c->max_background_jobs;
    *out = o;
}

static int kv_e_open(const struct bench_config *c, const char *dir, void **out)
{
    kv_options o;
    kv_e_options(c, &o);
    kv_db *db = NULL;
    int rc = kv_open(dir, &o, &db);
    *out = db;
    return rc;
}

static void kv_e_close(void *db)
{
    int rc = kv_close(db);
    if (rc != KV_OK)
        fprintf(stderr, "kvbench: close: %s\n", kv_e_errstr(rc));
}

static int kv_e_put(void *db, const void *k, size_t kl, const void *v, size_t vl, int sync)
{
    if (!sync)
        return kv_put(db, k, kl, v, vl);
    kv_batch *b;
    int rc = kv_batch_new(&b);
    if (rc != KV_OK)
        return rc;
    kv_write_options wo = {.sync = 1};
    if ((rc = kv_batch_put(b, k, kl, v, vl)) == KV_OK)
        rc = kv_write_opts(db, &wo, b);
    kv_batch_free(b);
    return rc;
}

static int kv_e_del(void *db, const void *k, size_t kl, int sync)
{
    if (!sync)
        return kv_delete(db, k, kl);
    kv_batch *b;
    int rc = kv_batch_new(&b);
    if (rc != KV_OK)
        return rc;
    kv_write_options wo = {.sync = 1};
    if ((rc = kv_batch_delete(b, k, kl)) == KV_OK)
        rc = kv_write_opts(db, &wo, b);
    kv_batch_free(b);
    return rc;
}

static int kv_e_delete_range(void *db, const void *b, size_t bl, const void *e, size_t el, int sync)
{
    if (!sync)
        return kv_delete_range(db, b, bl, e, el);
    kv_batch *batch;
    int rc = kv_batch_new(&batch);
    if (rc != KV_OK)
        return rc;
    kv_write_options wo = {.sync = 1};
    if ((rc = kv_batch_delete_range(batch, b, bl, e, el)) == KV_OK)
        rc = kv_write_opts(db, &wo, batch);
    kv_batch_free(batch);
    return rc;
}

static int kv_e_merge(void *db, const void *k, size_t kl, const void *op, size_t ol, int sync)
{
    if (!sync)
        return kv_merge(db, k, kl, op, ol);
    kv_batch *b;
    int rc = kv_batch_new(&b);
    if (rc != KV_OK)
        return rc;
    kv_write_options wo = {.sync = 1};
    if ((rc = kv_batch_merge(b, k, kl, op, ol)) == KV_OK)
        rc = kv_write_opts(db, &wo, b);
    kv_batch_free(b);
    return rc;
}

static int kv_e_write(void *db, const struct bench_kv *kvs, size_t n, int sync)
{
    kv_batch *b;
    int rc = kv_batch_new(&b);
    if (rc != KV_OK)
        return rc;
    for (size_t i = 0; rc == KV_OK && i < n; i++)
        rc = kv_batch_put(b, kvs[i].key, kvs[i].klen, kvs[i].val, kvs[i].vlen);
    kv_write_options wo = {.sync = sync};
    if (rc == KV_OK)
        rc = kv_write_opts(db, &wo, b);
    kv_batch_free(b);
    return rc;
}

static int kv_e_get(void *db, const void *k, size_t kl, size_t *vlen)
{
    void *v;
    int rc = kv_get(db, k, kl, &v, vlen);
    if (rc == KV_NOTFOUND)
        return 0;
    if (rc != KV_OK)
        return rc;
    kv_free(v);
    return 1;
}

/* Keys per multi-get whose results fit on the stack. */
#define KV_E_STACK_BATCH 64

/* kv_multi_get: the values are freed at once; a key's error fails the
 * batch (kv_multi_get left the first one's text in kv_error_text). */
static int kv_e_multi_get(void *db, size_t n, const void *const *keys, const size_t *klens)
{
    void *vstack[KV_E_STACK_BATCH], **vals = vstack;
    size_t lstack[KV_E_STACK_BATCH], *vlens = lstack;
    int sstack[KV_E_STACK_BATCH], *st = sstack;
    if (n > KV_E_STACK_BATCH) {
        vals = malloc(n * sizeof *vals);
        vlens = malloc(n * sizeof *vlens);
        st = malloc(n * sizeof *st);
    }
    int rc = vals && vlens && st ? kv_multi_get(db, NULL, n, keys, klens, vals, vlens, st)
                                 : KV_ENOMEM;
    int found = 0, err = KV_OK;
    for (size_t i = 0; rc == KV_OK && i < n; i++) {
        if (st[i] == KV_OK) {
            found++;
            kv_free(vals[i]);
        } else if (st[i] != KV_NOTFOUND && err == KV_OK)
            err = st[i];
    }
    if (rc == KV_OK)
        rc = err;
    if (vals != vstack) {
        free(vals);
        free(vlens);
        free(st);
    }
    return rc == KV_OK ? found : rc;
}

static int kv_e_catch_up(void *db)
{
    return kv_catch_up(db);
}

static int kv_e_compact(void *db)
{
    return kv_compact_range(db, NULL, 0, NULL, 0);
}

static int kv_e_counters(void *db, struct bench_counters *out)
{
    struct kv_stats s;
    int rc = kv_stats(db, &s);
    memset(out, 0, sizeof *out);
    if (rc != KV_OK)
        return rc;
    out->gets = s.gets;
    out->memtable_hits = s.memtable_hits;
    out->memtable_filter_negatives = s.memtable_filter_negatives;
    out->have_memtable_filter = 1;
    out->tables_probed = s.tables_probed;
    out->filter_negatives = s.filter_negatives;
    out->filter_positives = s.filter_positives;
    out->false_positives = s.filter_false_positives;
    out->data_block_reads = s.data_block_reads;
    out->data_block_read_bytes = s.data_block_read_bytes;
    out->cache_hits = s.block_cache_hits;
    out->cache_misses = s.block_cache_misses;
    /* A paged index or filter read from a table opened with O_DIRECT
     * (table_memory_budget) is a device read beside the data blocks'. */
    out->device_reads = s.device_reads +
                        (s.direct_reads ? s.index_block_reads + s.filter_block_reads : 0);
    out->device_read_bytes = s.device_read_bytes;
    out->table_memory_bytes = s.table_memory_bytes;
    out->tables_index_paged = s.tables_index_paged;
    out->tables_filter_paged = s.tables_filter_paged;
    out->direct_reads = s.direct_reads;
    out->direct_reads_refused = s.direct_reads_refused;
    out->have_device_reads = 1;
    out->compactions = s.compactions;
    out->stalls = s.stalls;
    out->slowdowns = s.slowdowns;
    out->stall_micros = s.stall_micros;
    out->slowdown_micros = s.slowdown_micros;
    out->flushes = s.flushes;
    out->tables = s.tables;
    out->table_bytes = s.table_bytes;
    out->filter_bytes = s.filter_bytes;
    out->index_bytes = s.index_bytes;
    out->memtable_bytes = s.memtable_bytes;
    out->filter_keys = s.filter_keys;
    memcpy(out->level_tables, s.level_tables, sizeof out->level_tables);
    out->base_level = s.base_level;
    for (int l = 0; l < 7; l++) {
        out->level_runs[l] = s.level_runs[l];
        out->level_write_amp[l] = s.level_write_amp[l];
    }
    out->have_levels = 1;
    out->write_amplification = s.write_amplification;
    out->have_filter_figures = 1;
    out->have_tables = 1;
    out->blob_files = s.blob_files;
    out->blob_bytes = s.blob_bytes;
    out->blob_garbage_bytes = s.blob_garbage_bytes;
    for (int l = 0; l < 7; l++) {
        out->level_written[l] = s.level_written_bytes[l];
        out->level_bytes[l] = s.level_bytes[l];
        out->level_target[l] = s.level_target_bytes[l];
    }
    out->blob_reads = s.blob_reads;
    out->blob_read_bytes = s.blob_read_bytes;
    out->have_blob_reads = 1;
    out->range_queries = s.range_queries;
    out->range_checked = s.range_tables_checked;
    out->prefix_skips = s.prefix_filter_skips;
    out->prefix_fp = s.prefix_filter_false_positives;
    out->range_skips = s.range_filter_skips;
    out->range_fp = s.range_filter_false_positives;
    out->range_read = s.range_tables_read;
    out->range_filter_bytes = s.range_filter_bytes;
    out->memtable_range_skips = s.memtable_range_skips;
    out->have_range_figures = 1;
    return KV_OK;
}

/* kv_stats has every figure of a sample; pending_compaction_bytes is the
 * engine's own estimate (0 where it makes none). */
static int kv_e_sample(void *db, struct bench_sample *out)
{
    struct kv_stats s;
    int rc = kv_stats(db, &s);
    memset(out, 0, sizeof *out);
    if (rc != KV_OK)
        return rc;
    out->write_delays = s.slowdowns;
    out->write_delay_micros = s.slowdown_micros;
    out->write_stops = s.stalls;
    out->write_stop_micros = s.stall_micros;
    out->l0_files = s.l0_tables;
    out->pending_compaction_bytes = s.pending_compaction_bytes;
    out->compaction_bytes = s.compaction_written_bytes + s.flush_bytes;
    out->compacting = s.compaction_running != 0;
    out->have = SAMPLE_DELAYS | SAMPLE_DELAY_MICROS | SAMPLE_STOPS | SAMPLE_STOP_MICROS |
                SAMPLE_L0_FILES | SAMPLE_PENDING_BYTES | SAMPLE_COMPACTION_BYTES |
                SAMPLE_COMPACTING;
    return KV_OK;
}

static int kv_e_tables(void *db, struct bench_table **out, size_t *n)
{
    kv_table_stats *t;
    size_t nt;
    int rc = kv_table_stats_get(db, &t, &nt);
    *out = NULL;
    *n = 0;
    if (rc != KV_OK)
        return rc;
    if (nt) {
        *out = calloc(nt, sizeof **out);
        if (!*out) {
            kv_free(t);
            return KV_ENOMEM;
        }
    }
    for (size_t i = 0; i < nt; i++) {
        (*out)[i].number = t[i].number;
        (*out)[i].absent_probes = t[i].filter_negatives + t[i].filter_false_positives;
        (*out)[i].expected_fpr = t[i].expected_fpr;
        (*out)[i].has_filter = t[i].filter_layout >= 0;
        (*out)[i].range_absent = t[i].range_negatives + t[i].range_false_positives;
        (*out)[i].range_expected_fpr = t[i].range_expected_fpr;
        (*out)[i].has_range_filter = t[i].range_bits_per_key > 0;
    }
    *n = nt;
    kv_free(t);
    return KV_OK;
}

static int kv_e_iter_new(void *db, void **it)
{
    kv_iter *i = NULL;
    int rc = kv_iter_new(db, NULL, &i);
    *it = i;
    return rc;
}

static void kv_e_seek(void *it, const void *k, size_t kl) { kv_iter_seek(it, k, kl); }
static void kv_e_seek_first(void *it) { kv_iter_seek_first(it); }
static void kv_e_seek_last(void *it) { kv_iter_seek_last(it); }
static void kv_e_next(void *it) { kv_iter_next(it); }
static void kv_e_prev(void *it) { kv_iter_prev(it); }
static int kv_e_valid(void *it) { return kv_iter_valid(it); }
static const void *kv_e_key(void *it, size_t *n) { return kv_iter_key(it, n); }
static const void *kv_e_value(void *it, size_t *n) { return kv_iter_value(it, n); }
static int kv_e_iter_status(void *it) { return kv_iter_status(it); }
static void kv_e_iter_free(void *it) { kv_iter_free(it); }

static int kv_e_iter_set_bounds(void *it, const void *lo, size_t ll, const void *hi, size_t hl)
{
    return kv_iter_set_bounds(it, lo, ll, hi, hl);
}

/* A kv database has a MANIFEST and a LOCK (kv_open makes LOCK first), and
 * kv_inspect reads it. LOCK is looked for first because kv_inspect would
 * create one, and a foreign directory gets no new file. */
static int kv_e_is_db(const char *dir, char *why, size_t n)
{
    struct stat st;
    char *m = dup_printf("%s/%s", dir, "MANIFEST"), *l = dup_printf("%s/%s", dir, "LOCK");
    int have = m && l && lstat(m, &st) == 0 && lstat(l, &st) == 0;
    free(m);
    free(l);
    if (!have) {
        snprintf(why, n, "no kv MANIFEST and LOCK");
        return 0;
    }
    kv_dir_info *info = NULL;
    int rc = kv_inspect(dir, &info);
    kv_inspect_free(info);
    if (rc == KV_EBUSY)
        snprintf(why, n, "the kv database there is open: its LOCK is held");
    else if (rc != KV_OK)
        snprintf(why, n, "kv cannot read its MANIFEST: %s",
                 rc == KV_ECORRUPT || rc == KV_EIO ? kv_error_text() : kv_strerror(rc));
    return rc == KV_OK;
}

/* Removes what kv_inspect lists as kv's (tables, logs, temporary files,
 * the manifest, LOCK); KV_FILE_OTHER stays. */
static int kv_e_destroy(const char *dir)
{
    kv_dir_info *info = NULL;
    int rc = kv_inspect(dir, &info);
    if (rc == KV_NOTFOUND)
        return 0; /* no directory, or no database in it */
    if (rc != KV_OK)
        return rc;
    for (size_t i = 0; i < info->nfiles && rc == KV_OK; i++) {
        if (info->files[i].kind == KV_FILE_OTHER)
            continue;
        char *p = dup_printf("%s/%s", dir, info->files[i].name);
        if (!p) {
            rc = KV_ENOMEM;
        } else if (unlink(p) != 0 && errno != ENOENT) {
            fprintf(stderr, "kvbench: cannot remove %s: %s\n", p, strerror(errno));
            rc = KV_EIO;
        }
        free(p);
    }
    kv_inspect_free(info);
    return rc;
}

static int kv_e_flush(void *h)
{
    return kv_flush(h);
}

static int kv_e_checkpoint(void *h, const char *dir)
{
    return kv_checkpoint(h, dir);
}

/* Polls kv_stats every millisecond until the background thread has
 * nothing waiting and nothing in hand. */
static int kv_e_wait_compaction(void *h)
{
    for (;;) {
        struct kv_stats s;
        int rc = kv_stats(h, &s);
        if (rc != KV_OK)
            return rc;
        if (!s.compaction_pending && !s.compaction_running)
            return 0;
        struct timespec ts = {0, 1000000L};
        nanosleep(&ts, NULL);
    }
}

static int kv_e_bulk_open(void *db, const struct bench_config *c, const char *path, void **w)
{
    (void)db;
    kv_options o;
    kv_e_options(c, &o);
    kv_table_writer *tw = NULL;
    int rc = kv_table_writer_open(path, &o, &tw);
    *w = tw;
    return rc;
}

static int kv_e_bulk_put(void *w, const void *k, size_t kl, const void *v, size_t vl)
{
    return kv_table_writer_put(w, k, kl, v, vl);
}

static int kv_e_bulk_finish(void *w)
{
    return kv_table_writer_finish(w);
}

static int kv_e_bulk_ingest(void *db, const char *const *paths, size_t n)
{
    return kv_ingest(db, paths, n, 1);
}

const struct bench_engine bench_kv_engine = {
    .name = "kv",
    .open = kv_e_open,
    .close = kv_e_close,
    .put = kv_e_put,
    .del = kv_e_del,
    .write = kv_e_write,
    .delete_range = kv_e_delete_range,
    .merge = kv_e_merge,
    .get = kv_e_get,
    .multi_get = kv_e_multi_get,
    .multi_get_name = "kv_multi_get",
    .compact = kv_e_compact,
    .catch_up = kv_e_catch_up,
    .flush = kv_e_flush,
    .counters = kv_e_counters,
    .sample = kv_e_sample,
    .tables = kv_e_tables,
    .iter_new = kv_e_iter_new,
    .iter_seek = kv_e_seek,
    .iter_seek_first = kv_e_seek_first,
    .iter_seek_last = kv_e_seek_last,
    .iter_next = kv_e_next,
    .iter_prev = kv_e_prev,
    .iter_valid = kv_e_valid,
    .iter_key = kv_e_key,
    .iter_value = kv_e_value,
    .iter_status = kv_e_iter_status,
    .iter_free = kv_e_iter_free,
    .iter_set_bounds = kv_e_iter_set_bounds,
    .bulk_open = kv_e_bulk_open,
    .bulk_put = kv_e_bulk_put,
    .bulk_finish = kv_e_bulk_finish,
    .bulk_ingest = kv_e_bulk_ingest,
    .errstr = kv_e_errstr,
    .is_db = kv_e_is_db,
    .wait_compaction = kv_e_wait_compaction,
    .destroy = kv_e_destroy,
    .checkpoint = kv_e_checkpoint,
};
