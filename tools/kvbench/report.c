/* report.c - a benchmark's result as db_bench's text line with kv's
 * filter figures, or as one JSON object (--json). */
#define _XOPEN_SOURCE 700
#include <math.h>
#include <string.h>

#include "bench.h"

/* ---- reporting ----------------------------------------------------------------------- */

static void json_double(const char *name, double v)
{
    if (!isfinite(v))
        v = 0;
    printf(",\"%s\":%.6g", name, v);
}

static void json_u64(const char *name, uint64_t v)
{
    printf(",\"%s\":%llu", name, (unsigned long long)v);
}

/* How a batched benchmark got its keys: the engine's multi-get, or one get
 * per key. */
static const char *multi_get_how(const struct ctx *c)
{
    return c->e->multi_get ? c->e->multi_get_name : "get per key";
}

/* readseq and readreverse return every pair: their rate in bytes says
 * what a scan costs beside the device's and memory's bandwidth. */
static int scans_bytes(const struct bench_def *d)
{
    return d && d->kind == K_SCAN && strcmp(d->name, "seekrandom") != 0 && !range_bench(d);
}

/* seekempty and seekshort's figures per seek (one range query per op).
 * kv's data_block_reads and device_reads count gets only: a seek's block
 * reads are the read calls (/proc/self/io syscr), each a device read with
 * O_DIRECT (kv maps its tables otherwise: no call). */
static void range_json(const struct ctx *c, const struct result *r)
{
    json_u64("range_width", c->o.range_width);
    json_u64("key_stride", c->o.key_stride);
    json_u64("prefix_len", r->prefix_len);
    json_double("range_filter_bits", r->range_filter_bits);
    json_u64("seeks", r->seeks);
    json_u64("entries", r->entries);
    if (r->after.have_range_figures) {
        json_double("tables_checked_per_seek", r->checked);
        json_double("prefix_filter_skips_per_seek", r->prefix_skips);
        json_double("prefix_filter_false_positives_per_seek", r->prefix_fp);
        json_double("range_filter_skips_per_seek", r->range_skips);
        json_double("range_filter_false_positives_per_seek", r->range_fp);
        json_double("tables_read_per_seek", r->tables_read);
        json_double("memtable_skips_per_seek", r->memtable_skips);
        json_double("range_measured_fpr", r->range_measured_fpr);
        json_double("range_expected_fpr", r->range_expected_fpr);
        json_u64("range_empty_checks", r->range_absent);
        json_u64("range_filter_bytes", r->after.range_filter_bytes);
    }
    if (r->read_calls >= 0)
        json_double("read_calls_per_seek", r->read_calls);
    if (r->read_calls >= 0 && r->after.direct_reads)
        json_double("device_reads_per_seek", r->read_calls);
    if (r->after.have_rocksdb) {
        json_double("data_block_reads_per_seek", r->seek_block_reads);
        json_double("index_block_reads_per_seek", r->index_misses);
        json_double("rocksdb_prefix_checked_per_seek", r->prefix_checked);
        json_double("rocksdb_prefix_useful_per_seek", r->prefix_useful);
    }
}

/* The text lines of seekempty and seekshort: per seek, and the range FPR. */
static void range_text(FILE *f, const struct ctx *c, const struct result *r)
{
    fprintf(f, "    ranges   : %llu entries read, %.2f per seek\n", (unsigned long long)r->entries,
            r->seeks ? (double)r->entries / (double)r->seeks : 0);
    if (r->after.have_range_figures) {
        fprintf(f,
                "    per seek : %.4f tables checked, skipped %.4f by prefix filter and %.4f by "
                "range filter; false positives %.4f prefix, %.4f range\n",
                r->checked, r->prefix_skips, r->range_skips, r->prefix_fp, r->range_fp);
        fprintf(f,
                "               %.4f tables read (index or data block touched); %.4f memtables "
                "not searched\n",
                r->tables_read, r->memtable_skips);
        if (r->range_absent)
            fprintf(f,
                    "    range FPR: measured %.4f%% over %llu empty table checks, expected "
                    "%.4f%% (range_filter_bits %g)\n",
                    100 * r->range_measured_fpr, (unsigned long long)r->range_absent,
                    100 * r->range_expected_fpr, r->range_filter_bits);
        else
            fprintf(f, "    range FPR: (no range filter answered: range_filter_bits %g)\n",
                    r->range_filter_bits);
    } else if (r->after.have_rocksdb) {
        fprintf(f,
                "    per seek : %.4f prefix filter checks, %.4f skipped "
                "(bloom.filter.prefix.checked/.useful); %.4f data-block and %.4f index-block "
                "reads (block.cache.data/index.miss; none counted without a block cache)\n",
                r->prefix_checked, r->prefix_useful, r->seek_block_reads, r->index_misses);
        fprintf(f, "               (RocksDB's statistics count no tables checked or read per "
                   "seek, and it has no range filter)\n");
    } else {
        fprintf(f, "    per seek : (the %s engine counts no range figures)\n", c->e->name);
    }
    if (r->read_calls < 0)
        return;
    fprintf(f, "    reads    : %.4f read calls per seek (/proc/self/io syscr; %s)\n", r->read_calls,
            c->e->no_filters              ? "LMDB maps its file: reads make no call"
            : !r->after.have_device_reads ? "each a block read from the file"
            : r->after.direct_reads       ? "O_DIRECT: each a device read"
            : r->direct                   ? "O_DIRECT refused: page cache reads"
                        : "kv maps its tables without O_DIRECT: block reads make no call");
}

/* Key and value bytes returned per second, in MB (10^6 bytes, as db_bench). */
static double mb_per_sec(const struct result *r)
{
    return r->seconds > 0 ? (double)r->scanned / 1e6 / r->seconds : 0;
}

/* Issue 54's fields: device reads per get, the memory limit and how it
 * held, the compaction style and jobs, and the level report. */
static void styles_json(const struct ctx *c, const struct result *r, const struct bench_def *d)
{
    if (d && d->kind == K_READ && r->dev_how) {
        /* every engine's figure, counted as device_reads_counted_by says
         * (kv's own device_reads_per_get above counts O_DIRECT reads only) */
        json_double("device_reads_per_get_measured", r->dev_reads);
        if (!r->after.have_device_reads)
            json_double("device_reads_per_get", r->dev_reads);
        printf(",\"device_reads_counted_by\":\"%s\"", r->dev_how);
        if (r->dev_bytes >= 0)
            json_double("io_read_bytes_per_get", r->dev_bytes);
    }
    if (c->o.memory_limit) {
        json_u64("memory_limit", c->o.memory_limit);
        printf(",\"memory_limit_mechanism\":\"%s\"", memlimit_mech_name(c, c->e));
    }
    if (c->e == &bench_kv_engine || !strcmp(c->e->name, "rocksdb")) {
        printf(",\"compaction_style\":\"%s\"",
               c->o.compaction_style == KV_COMPACTION_LAZY_LEVELED
                   ? (c->e == &bench_kv_engine ? "lazy_leveled" : "universal")
                   : "leveled");
        if (c->e == &bench_kv_engine || c->o.max_background_jobs_set)
            json_u64("max_background_jobs", (uint64_t)c->o.max_background_jobs);
        if (c->e == &bench_kv_engine && c->o.compaction_style == KV_COMPACTION_LAZY_LEVELED)
            json_u64("runs_per_level", (uint64_t)c->o.runs_per_level);
    }
    if (r->show_levels && r->after.have_levels) {
        char name[32];
        for (int l = 0; l < 7; l++) {
            snprintf(name, sizeof name, "level%d_runs", l);
            json_u64(name, r->after.level_runs[l]);
            snprintf(name, sizeof name, "level%d_bytes", l);
            json_u64(name, r->after.level_bytes[l]);
            snprintf(name, sizeof name, "level%d_write_amp", l);
            json_double(name, r->after.level_write_amp[l]);
        }
    }
}

void report_json(const struct ctx *c, const struct result *r, int stats)
{
    const struct bench_def *d = bench_named(r->name);
    double mpo = r->ops ? r->seconds * 1e6 / (double)r->ops : 0;
    double ops_s = r->seconds > 0 ? (double)r->ops / r->seconds : 0;
    printf("{\"benchmark\":\"%s\",\"engine\":\"%s\"", r->name, c->e->name);
    json_u64("ops", r->ops);
    json_double("seconds", r->seconds);
    json_double("micros_per_op", mpo);
    json_double("ops_per_sec", ops_s);
    json_u64("found", r->found);
    if (d && d->writer) {
        json_u64("writes", r->writes);
        json_double("writes_per_sec", r->writes_per_sec);
    }
    if (scans_bytes(d))
        json_double("mb_per_sec", mb_per_sec(r));
    if (!c->e->no_filters) { /* LMDB: no filter, no block cache, no counter to claim */
        json_u64("gets", r->gets);
        json_double("tables_probed_per_get", r->probed);
        json_double("filter_negatives_per_get", r->negatives);
        if (r->after.have_memtable_filter)
            json_double("memtable_filter_negatives_per_get", r->mem_negatives);
        json_double("false_positives_per_get", r->false_pos);
        json_double("data_block_reads_per_get", r->block_reads);
        if (r->after.have_device_reads) {
            json_double("device_reads_per_get", r->device_reads);
            json_double("device_read_bytes_per_get", r->device_bytes);
        }
        json_double("blocks_sought_per_get", r->block_reads + r->cache_hits);
        json_double("bytes_read_per_get", r->bytes_read);
        if (r->after.have_blob_reads)
            json_double("blob_reads_per_get", r->blob_reads);
        json_double("cache_hit_ratio", r->cache_hit_ratio);
        json_double("measured_fpr", r->measured_fpr);
        json_double("expected_fpr", r->expected_fpr);
    }
    json_double("bloom_bits", r->bloom_bits);
    if (!c->e->no_filters)
        printf(",\"filter_layout\":\"%s\"", layout_name(r->layout));
    if (r->after.have_memtable_filter) {
        json_u64("memtable_filter", (uint64_t)c->o.memtable_filter);
        json_u64("filter_keyed_hash", (uint64_t)c->o.filter_keyed_hash);
        printf(",\"filter_policy\":\"%s\"",
               r->policy == KV_FILTER_MONKEY ? "monkey" : "uniform");
    }
    if (r->after.have_device_reads) {
        json_u64("use_direct_reads", (uint64_t)r->direct);
        json_u64("direct_reads", r->after.direct_reads);
    }
    styles_json(c, r, d);
    json_u64("threads", c->o.threads);
    json_u64("num", c->o.num);
    json_u64("key_size", c->o.key_size);
    json_u64("value_size", c->o.value_size);
    json_u64("cache_size", r->cache_size);
    printf(",\"compression\":\"%s\"", c->o.compression == KV_COMPRESSION_ZSTD     ? "zstd"
                                     : c->o.compression == KVB_COMPRESSION_SNAPPY ? "snappy"
                                                                                 : "none");
    if (c->e == &bench_kv_engine || (c->main.cfg.blob_files && !strcmp(c->e->name, "rocksdb"))) {
        if (c->o.min_blob_size == KV_BLOB_NEVER)
            printf(",\"min_blob_size\":-1"); /* never */
        else
            json_u64("min_blob_size", c->o.min_blob_size);
    }
    /* Storage: what the benchmark wrote, and the database at its end. */
    json_u64("bytes_written", r->bytes_written);
    if (r->written_by_rusage)
        printf(",\"bytes_written_source\":\"getrusage ru_oublock\"");
    if (r->user_bytes)
        json_double("write_amp", (double)r->bytes_written / (double)r->user_bytes);
    json_u64("db_bytes", r->db_bytes);
    json_u64("blob_bytes", r->after.blob_bytes);
    json_u64("blob_garbage_bytes", r->after.blob_garbage_bytes);
    if (d && d->batched) {
        json_u64("batch_size", c->o.batch_size);
        printf(",\"multi_get\":\"%s\"", multi_get_how(c));
        /* ops, found, the per-get figures and the latencies are per key */
        printf(",\"latency_per_key\":\"batch time / batch size\"");
    }
    if (r->has_hist) {
        json_double("p50_us", r->p50);
        json_double("p95_us", r->p95);
        json_double("p99_us", r->p99);
        json_double("p999_us", r->p999);
        json_double("p9999_us", r->p9999);
        json_double("max_us", r->pmax);
    }
    if (range_bench(d))
        range_json(c, r);
    if (r->after.have_rocksdb) {
        json_u64("rocksdb_bloom_filter_useful", r->delta.rocksdb_useful);
        json_u64("rocksdb_bloom_filter_full_positive", r->delta.rocksdb_full_positive);
        json_u64("rocksdb_bloom_filter_full_true_positive", r->delta.rocksdb_full_true_positive);
    }
    if (stats) { /* the process, whatever the engine */
        json_u64("open_files", r->open_files);
        json_u64("rss_bytes", r->rss_bytes);
        json_u64("rss_file_bytes", r->rss_file_bytes);
    }
    if (stats && r->after.have_lmdb) {
        const struct bench_counters *k = &r->after;
        json_u64("lmdb_entries", k->lmdb_entries);
        json_u64("lmdb_depth", k->lmdb_depth);
        json_u64("lmdb_branch_pages", k->lmdb_branch_pages);
        json_u64("lmdb_leaf_pages", k->lmdb_leaf_pages);
        json_u64("lmdb_overflow_pages", k->lmdb_overflow_pages);
        json_u64("lmdb_page_size", k->lmdb_page_size);
        json_u64("lmdb_file_bytes", k->lmdb_file_bytes);
    } else if (stats) {
        const struct bench_counters *k = &r->after;
        json_u64("tables", k->tables);
        json_u64("table_bytes", k->table_bytes);
        json_u64("blob_files", k->blob_files);
        json_u64("filter_bytes", k->filter_bytes);
        json_u64("index_bytes", k->index_bytes);
        json_u64("memtable_bytes", k->memtable_bytes);
        json_double("filter_bits_per_key",
                    k->filter_keys ? 8.0 * (double)k->filter_bytes / (double)k->filter_keys : 0);
        json_double("write_amplification", k->write_amplification);
        json_u64("compactions", k->compactions);
        json_u64("stalls", k->stalls);
        json_u64("write_slowdowns", k->slowdowns);
        if (c->e == &bench_kv_engine) { /* where the writes went, level by level */
            char name[32];
            for (int l = 0; l < 7; l++) {
                snprintf(name, sizeof name, "level%d_written_bytes", l);
                json_u64(name, k->level_written[l]);
            }
            for (int l = 0; l < 7; l++) {
                snprintf(name, sizeof name, "level%d_bytes", l);
                json_u64(name, k->level_bytes[l]);
            }
            for (int l = 1; l < 7; l++) {
                snprintf(name, sizeof name, "level%d_target_bytes", l);
                json_u64(name, k->level_target[l]);
            }
            json_u64("base_level", k->base_level);
        }
        json_double("write_slowdown_seconds", (double)k->slowdown_micros / 1e6);
        json_double("write_stall_seconds", (double)k->stall_micros / 1e6);
    }
    printf("}\n");
    fflush(stdout);
}

/* Measured beside expected FPR, and what they rest on. */
static void print_fpr(FILE *f, const struct result *r)
{
    if (!r->fpr_probes) {
        fprintf(f, "    FPR      : (no probe was for an absent key)\n");
        return;
    }
    fprintf(f, "    FPR      : measured %.3f%%, expected %.3f%%", 100 * r->measured_fpr,
            100 * r->expected_fpr);
    if (r->fpr_tables)
        fprintf(f, " (weighted by each table's absent-key probes, %zu tables)", r->fpr_tables);
    else if (r->bloom_bits == 0)
        fprintf(f, " (no filters: every probe reads a block)");
    fprintf(f, "\n");
}

/* What a benchmark that writes (or compacts) wrote, and the database it left. */
static void report_storage(FILE *f, const struct result *r)
{
    char w[32], db[32], blob[32], garbage[32];
    human_bytes(w, sizeof w, (double)r->bytes_written);
    human_bytes(db, sizeof db, (double)r->db_bytes);
    fprintf(f, "    storage  : %s written%s", w,
            r->written_by_rusage ? " (getrusage: /proc/self/io unreadable)" : "");
    if (r->user_bytes)
        fprintf(f, ", write amplification %.2f", (double)r->bytes_written / (double)r->user_bytes);
    fprintf(f, "; database %s", db);
    if (r->after.blob_bytes) {
        human_bytes(blob, sizeof blob, (double)r->after.blob_bytes);
        human_bytes(garbage, sizeof garbage, (double)r->after.blob_garbage_bytes);
        fprintf(f, ", of which blob files %s (%s garbage)", blob, garbage);
    }
    fprintf(f, "\n");
}

/* db_bench's result line (RocksDB's form), then the filter-gated figures. */
static void report_text(const struct ctx *c, const struct result *r, const struct bench_def *d)
{
    FILE *f = c->text;
    double mpo = r->ops ? r->seconds * 1e6 / (double)r->ops : 0;
    long ops_s = r->seconds > 0 ? (long)((double)r->ops / r->seconds) : 0;
    fprintf(f, "%-12s : %11.3f micros/op %ld ops/sec %.3f seconds %lu operations;", r->name, mpo,
            ops_s, r->seconds, (unsigned long)r->ops);
    if (scans_bytes(d)) /* db_bench's figure: the bytes of the pairs returned */
        fprintf(f, " %.1f MB/s", mb_per_sec(r));
    if (d->kind == K_READ || d->kind == K_SCAN)
        fprintf(f, " (%llu of %llu found)", (unsigned long long)r->found,
                (unsigned long long)r->ops);
    fprintf(f, "\n");
    if (d->writer)
        fprintf(f, "    writer   : %llu writes beside the reads, %.0f writes/sec\n",
                (unsigned long long)r->writes, r->writes_per_sec);
    if (d->batched)
        fprintf(f, "    batches  : %zu keys each, %s%s; ops, per-get figures and latency are per "
                   "key\n", c->o.batch_size, multi_get_how(c),
                c->e->multi_get ? "" : " (the engine has no multi-get)");
    if (d->kind == K_READ && c->e->no_filters)
        fprintf(f, "    per get  : (%s has no filters: every get searches its B-tree)\n",
                c->e->name);
    else if (d->kind == K_READ && !r->after.have_filter_figures)
        fprintf(f, "    per get  : (the %s engine counts no filter statistics)\n", c->e->name);
    if (d->kind == K_READ && r->gets && r->after.have_filter_figures) {
        fprintf(f, "    per get  : %.4f tables probed, %.4f filter negatives, "
                   "%.4f false positives\n", r->probed, r->negatives, r->false_pos);
        if (r->after.have_memtable_filter)
            fprintf(f, "               %.4f memtable filter negatives\n", r->mem_negatives);
        fprintf(f, "               %.4f data-block reads", r->block_reads);
        if (r->after.have_tables) /* kv counts the bytes too */
            fprintf(f, " (%.1f bytes read)", r->bytes_read);
        fprintf(f, ", block cache hit ratio %.3f\n", r->cache_hit_ratio);
        if (r->after.have_blob_reads)
            fprintf(f, "               %.4f blob reads\n", r->blob_reads);
        if (r->after.have_device_reads)
            fprintf(f, "               %.4f device reads (%.1f bytes; %s)\n", r->device_reads,
                    r->device_bytes,
                    r->after.direct_reads ? "O_DIRECT: past the page cache"
                    : r->direct ? "O_DIRECT refused: through the page cache"
                                            : "--use_direct_reads=0: through the page cache");
        print_fpr(f, r);
    }
    if (d->kind == K_READ && r->dev_how) {
        fprintf(f, "    device   : %.4f device reads per get (%s)", r->dev_reads, r->dev_how);
        if (r->dev_bytes >= 0)
            fprintf(f, "; %.1f bytes from the device per get", r->dev_bytes);
        fprintf(f, "\n");
    } else if (d->kind == K_READ)
        fprintf(f, "    device   : device reads per get not measurable (/proc/self/io "
                   "unreadable)\n");
    if (range_bench(d))
        range_text(f, c, r);
    if (r->after.have_rocksdb && d->kind == K_READ)
        fprintf(f, "    rocksdb  : bloom.filter.useful %llu, full.positive %llu, "
                   "full.true.positive %llu\n",
                (unsigned long long)r->delta.rocksdb_useful,
                (unsigned long long)r->delta.rocksdb_full_positive,
                (unsigned long long)r->delta.rocksdb_full_true_positive);
    if (d->kind == K_WRITE || d->kind == K_OTHER || d->writer)
        report_storage(f, r);
    if (r->show_levels)
        print_levels(c, r);
    if (r->has_hist)
        fprintf(f, "    latency  : p50 %.2f, p95 %.2f, p99 %.2f, p99.9 %.2f, p99.99 %.2f, max "
                   "%.2f micros%s\n",
                r->p50, r->p95, r->p99, r->p999, r->p9999, r->pmax,
                d->batched ? " per key (batch time / batch size)" : "");
    fflush(f);
}

void report(const struct ctx *c, const struct result *r, const struct bench_def *d)
{
    report_text(c, r, d);
    if (c->o.json)
        report_json(c, r, 0);
}

