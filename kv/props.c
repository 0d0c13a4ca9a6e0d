/* props.c - kv_approximate_sizes (the bytes the tables hold for key
 * ranges, from the tables' in-memory indexes) and kv_property (named
 * figures as text: the levels table, the live tables, files per level,
 * memory).
 *
 * Both read the current version under a reference taken with db->mu held
 * (kv_db_ref_version) and then work without the lock: a flush or
 * compaction that installs a new version meanwhile neither waits for them
 * nor pulls a table from under them. Neither reads a data block.
 *
 * Every comparison of user keys here goes through user_cmp, the one place
 * that knows how the store orders its keys. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "order.h"
#include "util/error.h"
#include "util/ikey.h"
#include "util/keycmp.h"

/* The store's order of user keys (order.h): the database's comparator,
 * or bytewise, then the shorter first. */
static int user_cmp(const kv_db *db, const void *a, size_t alen, const void *b, size_t blen)
{
    return kv_sst_cmp(db->cmp, a, alen, b, blen);
}

/* ---- approximate sizes ----------------------------------------------------------------- */

/* One end of a range: the user key, and the prefix every stored key of it
 * begins with (ikey.h), which is what a table's index is searched for.
 * open: no key, past every key (a NULL limit). */
struct bound {
    const uint8_t *key;
    size_t klen;
    int open;
    uint8_t *ikey; /* buf, or malloc'd when longer */
    size_t ilen;
    uint8_t buf[256];
};

static int bound_init(struct bound *b, const void *key, size_t klen, int open)
{
    b->key = key;
    b->klen = klen;
    b->open = open;
    b->ikey = b->buf;
    b->ilen = 0;
    if (open)
        return KV_OK;
    size_t need = kv_ikey_prefix_len(key, klen);
    if (need > sizeof b->buf && !(b->ikey = malloc(need)))
        return KV_ENOMEM;
    b->ilen = kv_ikey_put_prefix(b->ikey, key, klen);
    return KV_OK;
}

static void bound_free(struct bound *b)
{
    if (b->ikey != b->buf)
        free(b->ikey);
}

/* The position of b in t's file, in bytes: 0 at or before its smallest
 * key; the whole file past its largest, so that a table wholly inside a
 * range counts its file (data, index, properties, filter); else the offset
 * of the data block that holds the first key >= b, scaled by file size /
 * data size. The scaling spreads the bytes after the data (which grow with
 * the keys: an index entry per block, filter bits per key) over the data
 * in proportion, so that a range that ends past the table's last key does
 * not take all of them in, and a range's share of the table is its share
 * of the data. Positions never fall as b rises, so the sizes of adjacent
 * ranges add up to their union's. */
static int table_pos(const kv_db *db, const struct kv_table *t, const struct bound *b,
                     uint64_t *out)
{
    const kv_table_meta *m = &t->meta;
    kv_sst_properties p;
    kv_sst_reader_properties(t->reader, &p);
    if (b->open || user_cmp(db, b->key, b->klen, m->largest, m->largest_len) > 0) {
        *out = p.file_size;
        return KV_OK;
    }
    if (user_cmp(db, b->key, b->klen, m->smallest, m->smallest_len) <= 0) {
        *out = 0;
        return KV_OK;
    }
    uint64_t off, end = kv_sst_reader_data_end(t->reader);
    int rc = kv_sst_approximate_offset(t->reader, b->ikey, b->ilen, &off);
    if (rc != KV_OK)
        return rc;
    /* off < end: b is at or below the largest key, held by the last block.
     * Doubles hold these sizes exactly (< 2^53) and their rounding keeps
     * the order. */
    double pos = end ? (double)off * ((double)p.file_size / (double)end) : 0;
    *out = pos < (double)p.file_size ? (uint64_t)pos : p.file_size;
    return KV_OK;
}

/* The bytes of t between two bounds: its share of the range. */
static int table_span(const kv_db *db, const struct kv_table *t, const struct bound *lo,
                      const struct bound *hi, uint64_t *sum)
{
    uint64_t a, z;
    int rc = table_pos(db, t, lo, &a);
    if (rc == KV_OK)
        rc = table_pos(db, t, hi, &z);
    if (rc == KV_OK && z > a)
        *sum += z - a;
    return rc;
}

/* The bytes of v's tables in [lo, hi). Level 0's tables overlap: each is
 * asked. A sorted run of a deeper level holds sorted, disjoint tables: a
 * binary search finds the first that may hold keys >= lo, and the walk
 * stops at the first that begins at or after hi. */
static int range_size(const kv_db *db, const struct kv_version *v, const struct bound *lo,
                      const struct bound *hi, uint64_t *out)
{
    uint64_t sum = 0;
    int rc = KV_OK;
    for (size_t i = v->start[0]; i < v->start[1] && rc == KV_OK; i++)
        rc = table_span(db, v->tables[i], lo, hi, &sum);
    for (size_t r = v->level_run[1]; r < v->nruns && rc == KV_OK; r++) {
        size_t a = v->run_start[r], z = v->run_start[r + 1];
        while (a < z) { /* the first table whose largest key is >= lo */
            size_t mid = a + (z - a) / 2;
            const kv_table_meta *m = &v->tables[mid]->meta;
            if (user_cmp(db, m->largest, m->largest_len, lo->key, lo->klen) < 0)
                a = mid + 1;
            else
                z = mid;
        }
        for (size_t i = a; i < v->run_start[r + 1] && rc == KV_OK; i++) {
            const kv_table_meta *m = &v->tables[i]->meta;
            if (!hi->open && user_cmp(db, m->smallest, m->smallest_len, hi->key, hi->klen) >= 0)
                break;
            rc = table_span(db, v->tables[i], lo, hi, &sum);
        }
    }
    *out = sum;
    return rc;
}

int kv_approximate_sizes(kv_db *db, size_t n, const void *const *starts, const size_t *slens,
                         const void *const *limits, const size_t *llens, uint64_t *sizes)
{
    static const char call[] = "kv_approximate_sizes";
    if (!db)
        return kv_db_einval(db, call, "db is NULL");
    if (n == 0)
        return KV_OK;
    if (!starts || !slens || !limits || !llens || !sizes)
        return kv_db_einval(db, call, "%s is NULL with n %zu",
                            !starts ? "starts" : !slens ? "slens" : !limits ? "limits"
                                               : !llens ? "llens" : "sizes", n);
    for (size_t i = 0; i < n; i++)
        if ((!starts[i] && slens[i]) || (!limits[i] && llens[i]))
            return kv_db_einval(db, call, "range %zu: NULL %s with length %zu", i,
                                !starts[i] && slens[i] ? "start" : "limit",
                                !starts[i] && slens[i] ? slens[i] : llens[i]);
    unsigned long long mark = kv_error_mark();
    struct kv_version *v = kv_db_ref_version(db);
    int rc = KV_OK;
    for (size_t i = 0; i < n && rc == KV_OK; i++) {
        sizes[i] = 0;
        int open = !limits[i]; /* NULL limit (length 0): no upper bound */
        if (!open && user_cmp(db, limits[i], llens[i], starts[i], slens[i]) <= 0)
            continue; /* an empty range */
        struct bound lo, hi;
        rc = bound_init(&lo, starts[i], slens[i], 0);
        if (rc == KV_OK) {
            rc = bound_init(&hi, limits[i], llens[i], open);
            if (rc == KV_OK) {
                rc = range_size(db, v, &lo, &hi, &sizes[i]);
                bound_free(&hi);
            }
            bound_free(&lo);
        }
    }
    kv_version_unref(v);
    return kv_db_fail(db, call, mark, rc);
}

/* ---- properties ------------------------------------------------------------------------- */

/* Bytes as text: printable ASCII as is; '\', '"' and every other byte as
 * \xNN (kvtool prints keys the same way), so any key prints on one line. */
static void put_escaped(struct kv_text *t, const uint8_t *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        size_t run = 0; /* bytes that print as themselves */
        while (i + run < n && p[i + run] >= 0x20 && p[i + run] < 0x7F && p[i + run] != '\\' &&
               p[i + run] != '"')
            run++;
        if (run) { /* n is a table's key (<= KV_MAX_KEY_SIZE) or a cut name: an int */
            kv_text_put(t, "%.*s", (int)run, (const char *)p + i);
            i += run;
        } else
            kv_text_put(t, "\\x%02x", p[i++]);
    }
}

/* The memory kv.approximate-memory-usage reports, from kv_stats' fields
 * and the block cache's charge. */
static uint64_t memory_bytes(const kv_db *db, const struct kv_stats *s, uint64_t *cache)
{
    kv_sst_cache_stats cs = {0};
    if (db->cache)
        kv_sst_cache_stats_get(db->cache, &cs);
    *cache = cs.charge;
    return s->memtable_bytes + cs.charge + s->filter_bytes + s->index_bytes;
}

static double mb(uint64_t bytes)
{
    return (double)bytes / (1024.0 * 1024.0);
}

/* One row of the levels table. */
struct level_row {
    uint64_t tables, bytes, entries, filter_bytes, probes, negatives, false_pos;
    double filter_bits; /* bits of the level's filters: bits/key times keys */
    uint64_t filter_keys;
};

static void put_level_row(struct kv_text *t, const char *name, const struct level_row *r)
{
    uint64_t absent = r->negatives + r->false_pos;
    kv_text_put(t, "%5s %6llu %10.2f %11llu %10.1f %8.2f %10llu %10llu %9llu %7.3f%%\n", name,
                (unsigned long long)r->tables, mb(r->bytes), (unsigned long long)r->entries,
                (double)r->filter_bytes / 1024.0,
                r->filter_keys ? r->filter_bits / (double)r->filter_keys : 0.0,
                (unsigned long long)r->probes, (unsigned long long)r->negatives,
                (unsigned long long)r->false_pos,
                absent ? 100.0 * (double)r->false_pos / (double)absent : 0.0);
}

/* kv.stats: the levels table from kv_table_stats_get (each level's
 * tables, file bytes, entries and filters: memory, bits per key, the gets
 * that probed its tables, what the filters answered, the measured FPR),
 * then kv_stats' figures of memory, flushes and compactions, write stalls
 * and gets. */
static int prop_stats(kv_db *db, struct kv_text *t)
{
    kv_table_stats *ts;
    size_t n;
    int rc = kv_table_stats_get(db, &ts, &n);
    if (rc != KV_OK)
        return rc;
    struct kv_stats s;
    kv_stats(db, &s);
    struct level_row rows[KV_LEVELS], all;
    memset(rows, 0, sizeof rows);
    memset(&all, 0, sizeof all);
    for (size_t i = 0; i < n; i++) {
        const kv_table_stats *x = &ts[i];
        for (int k = 0; k < 2; k++) {
            struct level_row *r = k ? &all : x->level < KV_LEVELS ? &rows[x->level] : NULL;
            if (!r)
                continue;
            r->tables++;
            r->bytes += x->file_size;
            r->entries += x->entries;
            r->filter_bytes += x->filter_bytes;
            r->filter_bits += x->bits_per_key * (double)x->filter_keys;
            r->filter_keys += x->filter_keys;
            r->probes += x->probes;
            r->negatives += x->filter_negatives;
            r->false_pos += x->filter_false_positives;
        }
    }
    kv_free(ts);
    kv_text_put(t, "%5s %6s %10s %11s %10s %8s %10s %10s %9s %8s\n", "level", "tables",
                "size MB", "entries", "filter KB", "bits/key", "probes", "negatives", "false pos",
                "FPR");
    for (int l = 0; l < KV_LEVELS; l++) {
        char name[8];
        snprintf(name, sizeof name, "%d", l);
        put_level_row(t, name, &rows[l]);
    }
    put_level_row(t, "total", &all);
    uint64_t cache;
    uint64_t mem = memory_bytes(db, &s, &cache);
    kv_text_put(t, "memory: %llu bytes (memtables %llu, block cache %llu, filters %llu, "
                   "indexes %llu)\n",
                (unsigned long long)mem, (unsigned long long)s.memtable_bytes,
                (unsigned long long)cache, (unsigned long long)s.filter_bytes,
                (unsigned long long)s.index_bytes);
    kv_text_put(t, "flushes: %llu (%.2f MB written); compactions: %llu (%llu idle, %.2f MB "
                   "read, %.2f MB written); pending %llu, running %llu\n",
                (unsigned long long)s.flushes, mb(s.flush_bytes),
                (unsigned long long)s.compactions, (unsigned long long)s.idle_compactions,
                mb(s.compaction_read_bytes),
                mb(s.compaction_written_bytes), (unsigned long long)s.compaction_pending,
                (unsigned long long)s.compaction_running);
    kv_text_put(t, "writes: %.2f MB of keys and values, %.2f MB to the log; write "
                   "amplification %.2f\n",
                mb(s.user_bytes), mb(s.wal_bytes), s.write_amplification);
    kv_text_put(t, "stalls: %llu (%.3f s); slowdowns: %llu (%.3f s)\n",
                (unsigned long long)s.stalls, (double)s.stall_micros / 1e6,
                (unsigned long long)s.slowdowns, (double)s.slowdown_micros / 1e6);
    kv_text_put(t, "gets: %llu (memtable hits %llu); tables probed %llu, filter negatives %llu, "
                   "false positives %llu; data blocks read %llu (%.2f MB), block cache hits "
                   "%llu\n",
                (unsigned long long)s.gets, (unsigned long long)s.memtable_hits,
                (unsigned long long)s.tables_probed, (unsigned long long)s.filter_negatives,
                (unsigned long long)s.filter_false_positives,
                (unsigned long long)s.data_block_reads, mb(s.data_block_read_bytes),
                (unsigned long long)s.block_cache_hits);
    return KV_OK;
}

/* kv.sstables: every level's heading, then one line per live table of it
 * in search order (level 0 newest first, deeper levels by key), a sorted
 * run other than 0 (lazy leveling) under a heading of its own. */
static int prop_sstables(kv_db *db, struct kv_text *t)
{
    struct kv_version *v = kv_db_ref_version(db);
    for (int l = 0; l < KV_LEVELS; l++) {
        kv_text_put(t, "--- level %d ---\n", l);
        for (size_t i = v->start[l]; i < v->start[l + 1]; i++) {
            const kv_table_meta *m = &v->tables[i]->meta;
            if (m->run && (i == v->start[l] || v->tables[i - 1]->meta.run != m->run))
                kv_text_put(t, "--- level %d run %llu ---\n", l, (unsigned long long)m->run);
            kv_sst_properties p;
            kv_sst_reader_properties(v->tables[i]->reader, &p);
            kv_text_put(t, "%06llu.sst %llu bytes, %llu entries, seq %llu..%llu [\"",
                        (unsigned long long)m->number, (unsigned long long)p.file_size,
                        (unsigned long long)m->entries, (unsigned long long)m->min_seq,
                        (unsigned long long)m->max_seq);
            put_escaped(t, m->smallest, m->smallest_len);
            kv_text_put(t, "\" .. \"");
            put_escaped(t, m->largest, m->largest_len);
            /* how it was compressed: per table, so per level (compression_min_level) */
            if (p.compression == KV_COMPRESSION_ZSTD && p.dict_bytes)
                kv_text_put(t, "\"] zstd, dictionary %zu bytes\n", p.dict_bytes);
            else
                kv_text_put(t, "\"] %s\n", p.compression == KV_COMPRESSION_ZSTD ? "zstd" : "none");
        }
    }
    kv_version_unref(v);
    return KV_OK;
}

/* "<prefix><N>", N a level written in decimal without leading zeros: its
 * level, or -1. */
static int level_suffix(const char *name, const char *prefix)
{
    size_t pl = strlen(prefix);
    if (strncmp(name, prefix, pl) != 0)
        return -1;
    const char *d = name + pl;
    if (d[0] < '0' || d[0] > '9' || (d[0] == '0' && d[1] != '\0'))
        return -1;
    int level = 0;
    for (; *d; d++) {
        if (*d < '0' || *d > '9' || level >= KV_LEVELS)
            return -1;
        level = level * 10 + (*d - '0');
    }
    return level < KV_LEVELS ? level : -1;
}

int kv_property(kv_db *db, const char *name, char **value)
{
    static const char call[] = "kv_property";
    if (value)
        *value = NULL;
    if (!db || !name || !value)
        return kv_db_einval(db, call, "%s is NULL", !db ? "db" : !name ? "name" : "value");
    struct kv_text t = {.cap = 1024};
    if (!(t.p = malloc(t.cap)))
        return kv_error_set(KV_ENOMEM, "%s: %s: out of memory", db->path, call);
    t.p[0] = '\0';
    int rc = KV_OK, level;
    if (strcmp(name, "kv.stats") == 0)
        rc = prop_stats(db, &t);
    else if (strcmp(name, "kv.sstables") == 0)
        rc = prop_sstables(db, &t);
    else if (strcmp(name, "kv.approximate-memory-usage") == 0) {
        struct kv_stats s;
        uint64_t cache;
        kv_stats(db, &s);
        kv_text_put(&t, "%llu", (unsigned long long)memory_bytes(db, &s, &cache));
    } else if ((level = level_suffix(name, "kv.num-files-at-level")) >= 0) {
        struct kv_version *v = kv_db_ref_version(db);
        kv_text_put(&t, "%zu", v->start[level + 1] - v->start[level]);
        kv_version_unref(v);
    } else {
        /* The name in the text, escaped and cut short: it may be anything. */
        struct kv_text esc = {.cap = 128};
        char shown[128] = "";
        if ((esc.p = malloc(esc.cap)) != NULL) {
            esc.p[0] = '\0';
            size_t len = strlen(name);
            put_escaped(&esc, (const uint8_t *)name, len < 64 ? len : 64);
            snprintf(shown, sizeof shown, "%s%s", esc.p, len > 64 ? "..." : "");
            free(esc.p);
        }
        free(t.p);
        return kv_error_set(KV_NOTFOUND,
                            "%s: %s: no property \"%s\" (kv.stats, kv.sstables, "
                            "kv.num-files-at-level<0..%d>, kv.approximate-memory-usage)",
                            db->path, call, shown, KV_LEVELS - 1);
    }
    if (rc == KV_OK && t.err)
        rc = kv_error_set(t.err, "%s: %s: %s: out of memory", db->path, call, name);
    if (rc != KV_OK) {
        free(t.p);
        return rc;
    }
    *value = t.p;
    return KV_OK;
}
