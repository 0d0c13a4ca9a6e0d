/* stats.c - the store's statistics: kv_stats (a struct), kv_table_stats_get
 * (one row per live table) and kv_metrics_text (Prometheus text format). */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "util/error.h"

#define LOAD KV_LOAD

/* The bytes compaction must still rewrite to bring every level of v within
 * its target (RocksDB's estimate of pending compaction bytes): level 0's
 * bytes once it holds l0_compaction_trigger tables, with the base level's
 * bytes they merge with; and for each deeper level over its target, the excess
 * times 11 (it merges with ten times as much below), the excess carried
 * down as the next level's growth. */
static uint64_t pending_bytes(const kv_db *db, const struct kv_version *v,
                              const struct kv_shape *shape)
{
    uint64_t pending = 0, carry = 0;
    if (v->start[1] - v->start[0] >= (size_t)db->o.l0_compaction_trigger) {
        carry = shape->bytes[0];
        pending = carry + shape->bytes[shape->base];
    }
    for (int l = shape->base; l < KV_LEVELS - 1; l++) {
        double target = shape->target[l];
        uint64_t size = shape->bytes[l] + carry;
        carry = 0;
        if ((double)size > target) {
            carry = size - (uint64_t)target;
            pending += carry * 11;
        }
    }
    return pending;
}

int kv_stats(kv_db *db, struct kv_stats *out)
{
    if (!db || !out)
        return kv_db_einval(db, "kv_stats", "%s is NULL", db ? "out" : "db");
    memset(out, 0, sizeof *out);
    out->gets = LOAD(db, gets);
    out->puts = LOAD(db, puts);
    out->deletes = LOAD(db, deletes);
    out->writes = LOAD(db, writes);
    out->memtable_hits = LOAD(db, memtable_hits);
    out->memtable_filter_negatives = LOAD(db, memtable_filter_negatives);
    out->tables_probed = LOAD(db, tables_probed);
    out->filter_negatives = LOAD(db, filter_negatives);
    out->filter_positives = LOAD(db, filter_positives);
    out->filter_false_positives = LOAD(db, false_positives);
    out->data_block_reads = LOAD(db, block_reads);
    out->data_block_read_bytes = LOAD(db, block_read_bytes);
    out->block_cache_hits = LOAD(db, cache_hits);
    out->block_cache_misses = LOAD(db, cache_misses);
    out->flushes = LOAD(db, flushes);
    out->flush_bytes = LOAD(db, flush_bytes);
    out->wal_bytes = LOAD(db, wal_bytes);
    out->wal_syncs = LOAD(db, wal_syncs);
    out->write_groups = LOAD(db, write_groups);
    out->stalls = LOAD(db, stalls);
    out->stall_micros = LOAD(db, stall_micros);
    out->slowdowns = LOAD(db, slowdowns);
    out->slowdown_micros = LOAD(db, slowdown_micros);
    out->compactions = LOAD(db, compactions);
    out->compaction_read_bytes = LOAD(db, compaction_read_bytes);
    out->compaction_written_bytes = LOAD(db, compaction_written_bytes);
    out->user_bytes = LOAD(db, user_bytes);
    out->device_reads = LOAD(db, device_reads);
    out->device_read_bytes = LOAD(db, device_read_bytes);
    out->direct_reads_refused = atomic_load_explicit(&db->direct_refused, memory_order_relaxed);
    out->direct_reads = db->o.use_direct_reads && out->direct_reads_refused == 0;
    out->blob_reads = LOAD(db, blob_reads);
    out->blob_read_bytes = LOAD(db, blob_read_bytes);
    out->blob_written_bytes = LOAD(db, blob_written_bytes);
    out->blob_relocated_bytes = LOAD(db, blob_relocated_bytes);
    for (int l = 0; l < 7; l++)
        out->level_written_bytes[l] = LOAD(db, level_written[l]);
    out->idle_compactions = LOAD(db, idle_compactions);
    uint64_t written = out->wal_bytes + out->flush_bytes + out->compaction_written_bytes +
                       out->blob_written_bytes;
    out->write_amplification = out->user_bytes ? (double)written / (double)out->user_bytes : 0;
    out->recovered_records = db->recovered_records;
    out->recovery_dropped_bytes = db->recovery_dropped;
    out->recovery_tail_damaged = db->recovery_damaged;
    kv_sst_files_stats fs;
    kv_sst_files_stats_get(db->files, &fs);
    out->table_files_open = fs.open_now;
    out->table_file_reopens = fs.reopens;
    out->table_file_evictions = fs.evictions;

    pthread_mutex_lock(&db->mu);
    out->last_sequence = db->last_seq;
    out->memtable_bytes = kv_mem_bytes(db->mem->mem) + (db->imm ? kv_mem_bytes(db->imm->mem) : 0);
    out->compaction_running = (uint64_t)db->bg_busy;
    /* Work to do now, or level 0 waiting for a quiet spell to go down
     * (kv.h: so that whoever waits for 0 finds level 0 empty). */
    out->compaction_pending =
        !db->bg_error && (db->imm || db->manual_pending || kv_compaction_needed(db) ||
                          kv_idle_compaction_armed(db));
    out->write_delay_max_micros = db->ctl.max_delay;
    out->delayed_write_rate = (uint64_t)db->ctl.rate;
    struct kv_version *v = db->current;
    atomic_fetch_add(&v->refs, 1);
    struct kv_shape shape;
    kv_level_shape(db, v, &shape);
    out->pending_compaction_bytes = pending_bytes(db, v, &shape);
    out->base_level = (uint64_t)shape.base;
    for (int l = 1; l < KV_LEVELS; l++)
        out->level_target_bytes[l] = (uint64_t)shape.target[l];
    pthread_mutex_unlock(&db->mu);
    out->tables = v->n;
    out->blob_files = v->nblobs;
    for (size_t i = 0; i < v->nblobs; i++) {
        out->blob_bytes += v->blobs[i]->file_size;
        out->blob_garbage_bytes +=
            atomic_load_explicit(&v->blobs[i]->garbage_bytes, memory_order_relaxed);
    }
    for (size_t i = 0; i < v->n; i++) {
        kv_sst_properties p;
        kv_sst_reader_properties(v->tables[i]->reader, &p);
        uint32_t l = v->tables[i]->meta.level;
        out->l0_tables += l == 0;
        if (l < KV_LEVELS) {
            out->level_tables[l]++;
            out->level_bytes[l] += p.file_size;
        }
        out->table_bytes += p.file_size;
        out->filter_bytes += p.filter_bytes;
        out->index_bytes += p.index_bytes;
        out->filter_keys += p.filter_keys;
    }
    kv_version_unref(v);
    return KV_OK;
}

static void table_row(const struct kv_table *t, kv_table_stats *s)
{
    kv_sst_properties p;
    kv_sst_counters c;
    kv_sst_reader_properties(t->reader, &p);
    kv_sst_reader_counters(t->reader, &c);
    memset(s, 0, sizeof *s);
    s->number = t->meta.number;
    s->level = t->meta.level;
    s->entries = p.entries;
    s->file_size = p.file_size;
    s->filter_layout = p.filter_bits ? (int)p.filter_layout : -1;
    s->bits_per_key = p.filter_keys ? (double)p.filter_bits / (double)p.filter_keys : 0;
    s->k = p.filter_k;
    s->filter_keys = p.filter_keys;
    s->filter_bytes = p.filter_bytes;
    s->probes = c.gets; /* each probe is one lookup in the table */
    s->filter_negatives = c.filter_negatives;
    s->filter_false_positives = c.filter_false_positives;
    uint64_t absent = c.filter_negatives + c.filter_false_positives;
    s->measured_fpr = absent ? (double)c.filter_false_positives / (double)absent : 0;
    s->expected_fpr = p.filter_bits ? p.filter_expected_fpr : 1;
}

int kv_table_stats_get(kv_db *db, kv_table_stats **tables, size_t *n)
{
    if (!db || !tables || !n)
        return kv_db_einval(db, "kv_table_stats_get", "%s is NULL",
                            !db ? "db" : !tables ? "tables" : "n");
    *tables = NULL;
    *n = 0;
    struct kv_version *v = kv_db_ref_version(db);
    int rc = KV_OK;
    if (v->n) {
        /* The rows, then every table's smallest and largest key. */
        size_t bytes = v->n * sizeof **tables;
        for (size_t i = 0; i < v->n; i++)
            bytes += v->tables[i]->meta.smallest_len + v->tables[i]->meta.largest_len;
        *tables = malloc(bytes);
        if (!*tables)
            rc = kv_error_set(KV_ENOMEM, "%s: kv_table_stats_get: out of memory", db->path);
        else {
            uint8_t *keys = (uint8_t *)(*tables + v->n);
            for (size_t i = 0; i < v->n; i++) {
                const kv_table_meta *m = &v->tables[i]->meta;
                kv_table_stats *row = &(*tables)[i];
                table_row(v->tables[i], row);
                memcpy(keys, m->smallest, m->smallest_len);
                row->smallest = keys;
                row->smallest_len = m->smallest_len;
                keys += m->smallest_len;
                memcpy(keys, m->largest, m->largest_len);
                row->largest = keys;
                row->largest_len = m->largest_len;
                keys += m->largest_len;
            }
            *n = v->n;
        }
    }
    kv_version_unref(v);
    return rc;
}

/* ---- text (kv_metrics_text; kv_property in props.c) ------------------------------------ */

void kv_text_put(struct kv_text *b, const char *fmt, ...)
{
    if (b->err)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->err = KV_ENOMEM;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t nc = 2 * b->cap + (size_t)n;
        char *q = realloc(b->p, nc);
        if (!q) {
            b->err = KV_ENOMEM;
            return;
        }
        b->p = q;
        b->cap = nc;
    }
}

static void metric(struct kv_text *b, const char *name, const char *type, const char *help,
                   double value)
{
    kv_text_put(b, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, value);
}

static void counter(struct kv_text *b, const char *name, const char *help, uint64_t v)
{
    kv_text_put(b, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", name, help, name, name,
        (unsigned long long)v);
}

int kv_metrics_text(kv_db *db, char **text)
{
    if (!db || !text)
        return kv_db_einval(db, "kv_metrics_text", "%s is NULL", db ? "text" : "db");
    *text = NULL;
    struct kv_stats s;
    kv_stats(db, &s);
    kv_table_stats *t;
    size_t n;
    int rc = kv_table_stats_get(db, &t, &n);
    if (rc != KV_OK)
        return rc;
    struct kv_text b = {.cap = 8192};
    if (!(b.p = malloc(b.cap))) {
        free(t);
        return kv_error_set(KV_ENOMEM, "%s: kv_metrics_text: out of memory", db->path);
    }
    b.p[0] = '\0';
    counter(&b, "kv_gets_total", "Gets.", s.gets);
    counter(&b, "kv_puts_total", "Puts (a batch counts each put).", s.puts);
    counter(&b, "kv_deletes_total", "Deletes (a batch counts each delete).", s.deletes);
    counter(&b, "kv_writes_total", "Write calls that committed.", s.writes);
    counter(&b, "kv_memtable_hits_total", "Gets answered by a memtable.", s.memtable_hits);
    counter(&b, "kv_memtable_filter_negatives_total",
            "Memtables whose filter answered absent to a get (no skiplist search).",
            s.memtable_filter_negatives);
    counter(&b, "kv_tables_probed_total", "Tables whose key range held a looked-up key.",
            s.tables_probed);
    counter(&b, "kv_filter_negatives_total", "Probes a filter answered absent (no I/O).",
            s.filter_negatives);
    counter(&b, "kv_filter_positives_total", "Probes a filter answered maybe.",
            s.filter_positives);
    counter(&b, "kv_filter_false_positives_total", "Filter maybes whose table lacked the key.",
            s.filter_false_positives);
    counter(&b, "kv_data_block_reads_total", "Data blocks read from disk by gets.",
            s.data_block_reads);
    counter(&b, "kv_data_block_read_bytes_total", "Bytes of those reads.",
            s.data_block_read_bytes);
    counter(&b, "kv_device_reads_total",
            "Of those, reads that went to the device (use_direct_reads: O_DIRECT).",
            s.device_reads);
    counter(&b, "kv_device_read_bytes_total",
            "Bytes those device reads asked for (aligned to 4096 bytes).", s.device_read_bytes);
    metric(&b, "kv_direct_reads", "gauge",
           "1 when table data reads bypass the page cache (O_DIRECT), else 0.",
           (double)s.direct_reads);
    counter(&b, "kv_direct_reads_refused_total",
            "Tables opened through the page cache because the file system refused O_DIRECT.",
            s.direct_reads_refused);
    counter(&b, "kv_block_cache_hits_total", "Data blocks gets found in the block cache.",
            s.block_cache_hits);
    counter(&b, "kv_block_cache_misses_total", "Data blocks gets did not find in the cache.",
            s.block_cache_misses);
    counter(&b, "kv_flushes_total", "Memtables flushed to tables.", s.flushes);
    counter(&b, "kv_flush_written_bytes_total", "Bytes of tables written by flushes.",
            s.flush_bytes);
    counter(&b, "kv_wal_written_bytes_total", "Bytes appended to the write-ahead log.",
            s.wal_bytes);
    counter(&b, "kv_wal_syncs_total", "fdatasync calls on the write-ahead log.", s.wal_syncs);
    counter(&b, "kv_write_groups_total", "Log appends (group commits).", s.write_groups);
    counter(&b, "kv_stalls_total", "Writes that waited for a flush.", s.stalls);
    metric(&b, "kv_stall_seconds_total", "counter", "Time writes waited for a flush.",
           (double)s.stall_micros / 1e6);
    counter(&b, "kv_slowdowns_total", "Writes the write controller delayed.", s.slowdowns);
    metric(&b, "kv_slowdown_seconds_total", "counter", "Time writes were delayed by the write controller.",
           (double)s.slowdown_micros / 1e6);
    metric(&b, "kv_write_delay_max_seconds", "gauge", "Longest single delay the write controller asked for.",
           (double)s.write_delay_max_micros / 1e6);
    metric(&b, "kv_delayed_write_rate_bytes", "gauge",
           "Bytes per second the write controller lets through (0: not delaying).",
           (double)s.delayed_write_rate);
    metric(&b, "kv_pending_compaction_bytes", "gauge",
           "Estimated bytes compaction must rewrite to bring every level within its target.",
           (double)s.pending_compaction_bytes);
    metric(&b, "kv_base_level", "gauge",
           "The level level 0 merges into (dynamic_level_bytes: the shallowest the size calls for).",
           (double)s.base_level);
    counter(&b, "kv_compactions_total", "Compactions.", s.compactions);
    counter(&b, "kv_idle_compactions_total",
            "Of those, level 0 merged down after idle_compaction_ms without a write.",
            s.idle_compactions);
    metric(&b, "kv_compaction_pending", "gauge",
           "1 while a flush or compaction waits for the background thread, or level 0 "
           "waits for an idle compaction.",
           (double)s.compaction_pending);
    metric(&b, "kv_compaction_running", "gauge",
           "1 while the background thread flushes or compacts.", (double)s.compaction_running);
    counter(&b, "kv_compaction_read_bytes_total", "Bytes of tables compactions read.",
            s.compaction_read_bytes);
    counter(&b, "kv_compaction_written_bytes_total", "Bytes of tables compactions wrote.",
            s.compaction_written_bytes);
    counter(&b, "kv_user_written_bytes_total", "Bytes of keys and values written by callers.",
            s.user_bytes);
    metric(&b, "kv_write_amplification_ratio", "gauge",
           "(log + flush + compaction + blob bytes written) / user bytes written.",
           s.write_amplification);
    metric(&b, "kv_blob_files", "gauge", "Live blob files.", (double)s.blob_files);
    metric(&b, "kv_blob_size_bytes", "gauge", "Bytes of live blob files.", (double)s.blob_bytes);
    metric(&b, "kv_blob_garbage_bytes", "gauge",
           "Bytes of blob records no table refers to any more.", (double)s.blob_garbage_bytes);
    counter(&b, "kv_blob_reads_total", "Values read from blob files.", s.blob_reads);
    counter(&b, "kv_blob_read_bytes_total", "Bytes of those reads.", s.blob_read_bytes);
    counter(&b, "kv_blob_written_bytes_total",
            "Bytes written to blob files by flushes and compactions.", s.blob_written_bytes);
    counter(&b, "kv_blob_relocated_bytes_total",
            "Of those, values compactions moved out of files past the GC threshold.",
            s.blob_relocated_bytes);
    kv_text_put(&b, "# HELP kv_level_tables Tables per level.\n# TYPE kv_level_tables gauge\n");
    for (int l = 0; l < KV_LEVELS; l++)
        kv_text_put(&b, "kv_level_tables{level=\"%d\"} %llu\n", l,
                    (unsigned long long)s.level_tables[l]);
    kv_text_put(&b, "# HELP kv_level_size_bytes Bytes of table files per level.\n"
                    "# TYPE kv_level_size_bytes gauge\n");
    for (int l = 0; l < KV_LEVELS; l++)
        kv_text_put(&b, "kv_level_size_bytes{level=\"%d\"} %llu\n", l,
                    (unsigned long long)s.level_bytes[l]);
    kv_text_put(&b, "# HELP kv_level_target_bytes Bytes a level may hold before it is compacted.\n"
                    "# TYPE kv_level_target_bytes gauge\n");
    for (int l = 1; l < KV_LEVELS; l++)
        kv_text_put(&b, "kv_level_target_bytes{level=\"%d\"} %llu\n", l,
                    (unsigned long long)s.level_target_bytes[l]);
    kv_text_put(&b, "# HELP kv_level_written_bytes_total Table bytes written into each level "
                    "(level 0 by flushes, the others by compactions).\n"
                    "# TYPE kv_level_written_bytes_total counter\n");
    for (int l = 0; l < KV_LEVELS; l++)
        kv_text_put(&b, "kv_level_written_bytes_total{level=\"%d\"} %llu\n", l,
                    (unsigned long long)s.level_written_bytes[l]);
    counter(&b, "kv_recovered_records_total", "Log records replayed at open.",
            s.recovered_records);
    counter(&b, "kv_recovery_dropped_bytes_total", "Log bytes lost to a damaged tail at open.",
            s.recovery_dropped_bytes);
    metric(&b, "kv_last_sequence", "gauge", "Sequence number of the newest write.",
           (double)s.last_sequence);
    metric(&b, "kv_memtable_bytes", "gauge", "Memory of the memtables.",
           (double)s.memtable_bytes);
    metric(&b, "kv_tables", "gauge", "Live tables.", (double)s.tables);
    metric(&b, "kv_table_size_bytes_sum", "gauge", "Bytes of the live tables' files.",
           (double)s.table_bytes);
    metric(&b, "kv_filter_size_bytes", "gauge", "Memory of the live tables' filters.",
           (double)s.filter_bytes);
    metric(&b, "kv_index_size_bytes", "gauge", "Memory of the live tables' decoded indexes.",
           (double)s.index_bytes);
    metric(&b, "kv_filter_keys", "gauge", "Keys in the live tables' filters.",
           (double)s.filter_keys);
    metric(&b, "kv_table_files_open", "gauge",
           "Table files open now (descriptor and mapping; max_open_files budgets them).",
           (double)s.table_files_open);
    counter(&b, "kv_table_file_reopens_total",
            "Table files opened again after being closed for room.", s.table_file_reopens);
    counter(&b, "kv_table_file_evictions_total", "Table files closed to make room for another.",
            s.table_file_evictions);

    /* Per table: one family per figure, one series per table. */
    static const struct {
        const char *name, *type, *help;
    } fam[] = {
        {"kv_table_entries", "gauge", "Entries in the table."},
        {"kv_table_file_size_bytes", "gauge", "Size of the table's file."},
        {"kv_table_filter_bits_per_key", "gauge", "Filter bits per filter key."},
        {"kv_table_filter_k", "gauge", "Probes per filter key."},
        {"kv_table_filter_size_bytes", "gauge", "Memory of the table's filter."},
        {"kv_table_probes_total", "counter", "Gets that probed the table."},
        {"kv_table_filter_negatives_total", "counter", "Probes its filter answered absent."},
        {"kv_table_filter_false_positives_total", "counter", "Its filter's false positives."},
        {"kv_table_filter_measured_fpr_ratio", "gauge",
         "False positives / (negatives + false positives)."},
        {"kv_table_filter_expected_fpr_ratio", "gauge", "FPR the filter's m, k and n predict."},
    };
    for (size_t f = 0; f < sizeof fam / sizeof fam[0]; f++) {
        kv_text_put(&b, "# HELP %s %s\n# TYPE %s %s\n", fam[f].name, fam[f].help, fam[f].name,
            fam[f].type);
        for (size_t i = 0; i < n; i++) {
            const kv_table_stats *r = &t[i];
            double v[] = {(double)r->entries, (double)r->file_size, r->bits_per_key,
                          (double)r->k, (double)r->filter_bytes, (double)r->probes,
                          (double)r->filter_negatives, (double)r->filter_false_positives,
                          r->measured_fpr, r->expected_fpr};
            kv_text_put(&b, "%s{table=\"%llu\",level=\"%u\"} %.17g\n", fam[f].name,
                (unsigned long long)r->number, r->level, v[f]);
        }
    }
    free(t);
    if (b.err) {
        free(b.p);
        return kv_error_set(b.err, "%s: kv_metrics_text: %s", db->path, kv_strerror(b.err));
    }
    *text = b.p;
    return KV_OK;
}
