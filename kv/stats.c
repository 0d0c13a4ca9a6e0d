/* stats.c - the store's statistics: kv_stats (a struct), kv_table_stats_get
 * (one row per live table) and kv_metrics_text (Prometheus text format),
 * the figures and their names from one table (counters.h). */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "tablemem.h"
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
#define COPY_TALLY(field, tally, name, type, div, help) out->field = LOAD(db, tally);
#define COPY_TALLY_LEVELS(field, tally, first, name, type, help)                                   \
    for (int l = 0; l < KV_LEVELS; l++)                                                            \
        out->field[l] = LOAD(db, tally[l]);
    KV_METRICS(COPY_TALLY, KV_COUNTER_NONE, COPY_TALLY_LEVELS, KV_COUNTER_NONE)
#undef COPY_TALLY
#undef COPY_TALLY_LEVELS
    out->direct_reads_refused = atomic_load_explicit(&db->direct_refused, memory_order_relaxed);
    out->direct_reads = db->o.use_direct_reads && out->direct_reads_refused == 0;
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
    out->compaction_running = db->bg_busy != 0;
    out->flushes_running = (uint64_t)db->flushes_running;
    out->compactions_running = (uint64_t)db->compactions_running;
    out->compactions_parallel_max = (uint64_t)db->compactions_parallel_max;
    out->compaction_max_read_bytes = db->compaction_max_read;
    for (int i = 0; i < 2; i++) {
        const struct kv_memref *m = i ? db->imm : db->mem;
        if (m && m->rt) {
            out->range_tombstones_live += kv_rtset_count(m->rt);
            out->range_tombstone_bytes += kv_rtset_bytes(m->rt);
        }
    }
    /* Work to do now, or level 0 waiting for a quiet spell to go down
     * (kv.h: so that whoever waits for 0 finds level 0 empty). */
    out->compaction_pending = !kv_db_stopped(db) &&
                              (db->imm || db->manual_pending || kv_compaction_needed(db) ||
                               kv_idle_compaction_armed(db));
    /* A retry of a full disk clears bg_error while it runs (background.c,
     * resume): the disk is still full until it succeeds. */
    out->background_error = db->write_error ? db->write_error
                            : db->bg_error  ? db->bg_error
                            : db->resuming  ? KV_ENOSPC
                                            : 0;
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
        out->range_tombstones_live += kv_rtset_count(v->tables[i]->rt);
        out->range_tombstone_bytes += kv_rtset_bytes(v->tables[i]->rt);
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
        out->range_filter_bytes += p.range_filter_bytes;
        kv_sst_table_memory m; /* table_memory_budget: what is kept, what paged */
        kv_sst_reader_memory(v->tables[i]->reader, &m);
        out->table_memory_bytes += m.kept;
        out->tables_index_paged += (uint64_t)m.index_paged;
        out->tables_filter_paged += (uint64_t)m.filter_paged;
    }
    kv_tablemem_reads(db->tm, &out->index_block_reads, &out->filter_block_reads);
    /* Sorted runs (version.h): level 0's tables each, a deeper level's as
     * many as its tables' run ids. */
    for (int l = 0; l < KV_LEVELS; l++)
        out->level_runs[l] = v->level_run[l + 1] - v->level_run[l];
    kv_version_unref(v);
    out->background_jobs = (uint64_t)db->o.max_background_jobs;
    out->subcompactions = atomic_load_explicit(&db->subcompactions, memory_order_relaxed);
    for (int l = 0; l < KV_LEVELS; l++)
        out->level_write_amp[l] = out->user_bytes ? (double)out->level_written_bytes[l] /
                                                        (double)out->user_bytes
                                                  : 0;
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
    /* Scan filters: the gate's counts (merge.c), relaxed. */
#define RD(x) atomic_load_explicit(&t->x, memory_order_relaxed)
    s->prefix_len = p.prefix_len;
    s->prefix_negatives = RD(prefix_negatives);
    s->prefix_false_positives = RD(prefix_fp);
    s->range_bits_per_key = p.range_bits_per_key;
    s->range_filter_bytes = p.range_filter_bytes;
    s->range_negatives = RD(range_negatives);
    s->range_checks = s->range_negatives + RD(range_maybes);
    s->range_false_positives = RD(range_fp);
    uint64_t empty = s->range_negatives + s->range_false_positives;
    s->range_measured_fpr = empty ? (double)s->range_false_positives / (double)empty : 0;
    s->range_expected_fpr = empty ? (double)RD(range_fpr_sum) / KV_TABLE_FPR_UNIT / (double)empty
                                  : 0;
#undef RD
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

/* One family of one sample: the figure v as an integer (div 0), else as
 * a real, v / div. */
static void put_family(struct kv_text *b, const char *name, const char *type, const char *help,
                       double div, uint64_t v, double real)
{
    kv_text_put(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
    if (div)
        kv_text_put(b, "%s %.17g\n", name, real / div);
    else
        kv_text_put(b, "%s %llu\n", name, (unsigned long long)v);
}

/* One family of a sample per level, from level `first` on. */
static void put_levels(struct kv_text *b, const char *name, const char *type, const char *help,
                       const uint64_t *v, int first)
{
    kv_text_put(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
    for (int l = first; l < KV_LEVELS; l++)
        kv_text_put(b, "%s{level=\"%d\"} %llu\n", name, l, (unsigned long long)v[l]);
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
    /* The database's figures (counters.h), then one family per table figure
     * with one series per table. */
#define PUT_STAT(field, name, type, div, help)                                                     \
    put_family(&b, name, type, help, div, (uint64_t)s.field, (double)s.field);
#define PUT_TALLY(field, tally, name, type, div, help) PUT_STAT(field, name, type, div, help)
#define PUT_STAT_LEVELS(field, first, name, type, help)                                            \
    put_levels(&b, name, type, help, s.field, first);
#define PUT_TALLY_LEVELS(field, tally, first, name, type, help)                                    \
    PUT_STAT_LEVELS(field, first, name, type, help)
    KV_METRICS(PUT_TALLY, PUT_STAT, PUT_TALLY_LEVELS, PUT_STAT_LEVELS)
#define PUT_TABLES(field, name, type, help)                                                        \
    kv_text_put(&b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);                       \
    for (size_t i = 0; i < n; i++)                                                                 \
        kv_text_put(&b, "%s{table=\"%llu\",level=\"%u\"} %.17g\n", name,                           \
                    (unsigned long long)t[i].number, t[i].level, (double)t[i].field);
    KV_TABLE_METRICS(PUT_TABLES)
#undef PUT_STAT
#undef PUT_TALLY
#undef PUT_STAT_LEVELS
#undef PUT_TALLY_LEVELS
#undef PUT_TABLES
    free(t);
    if (b.err) {
        free(b.p);
        return kv_error_set(b.err, "%s: kv_metrics_text: %s", db->path, kv_strerror(b.err));
    }
    *text = b.p;
    return KV_OK;
}
