/* check_props.c - kv_approximate_sizes and kv_property through kv.h: sizes
 * of key ranges against the tables' file sizes (kv_stats,
 * kv_table_stats_get), their additivity over adjacent ranges, empty and
 * between-keys ranges, no data block read; every property against kv_stats,
 * names that are not properties, and bad arguments. */
#define _XOPEN_SOURCE 700
#include <check.h>
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kv/kv.h>

#include "fixture.h"

/* ---- helpers --------------------------------------------------------------------------- */

#define BLOCK 4096
#define VLEN 100

/* The store test_dir/name: small tables, the given cache and compression. */
static kv_db *open_props(const char *name, size_t cache, int compression)
{
    kv_options o;
    kv_options_init(&o);
    o.write_buffer_size = (size_t)1 << 20; /* 5000 keys of a round: one table */
    o.target_file_size = (size_t)64 << 10;
    o.block_size = BLOCK;
    o.block_cache_size = cache;
    o.compression = compression;
    o.idle_compaction_ms = 0; /* the tests compare level 0 across calls: no idle merge */
    return open_db(name, &o);
}

/* Puts keys [from, to) with VLEN-byte values: random bytes (zstd cannot
 * shrink them), or, compressible, a letter repeated. */
static void put_keys(kv_db *db, uint64_t from, uint64_t to, int compressible)
{
    char k[16];
    uint8_t v[VLEN];
    for (uint64_t i = from; i < to; i++) {
        for (size_t j = 0; j < VLEN; j += 8) {
            uint64_t x = compressible ? 0x6161616161616161ull : splitmix(i * 31 + j);
            memcpy(v + j, &x, VLEN - j < 8 ? VLEN - j : 8);
        }
        ck_assert_int_eq(kv_put(db, k, key_of(k, sizeof k, "k", 8, i), v, VLEN), KV_OK);
    }
}

/* The size of one range [start, limit); limit NULL: no upper bound. */
static uint64_t size_of(kv_db *db, const char *start, const char *limit)
{
    const void *s[1] = {start}, *l[1] = {limit};
    size_t sl[1] = {strlen(start)}, ll[1] = {limit ? strlen(limit) : 0};
    uint64_t out[1] = {UINT64_MAX};
    int rc = kv_approximate_sizes(db, 1, s, sl, l, ll, out);
    ck_assert_msg(rc == KV_OK, "kv_approximate_sizes: %s", kv_error_text());
    return out[0];
}

static uint64_t key_size(kv_db *db, uint64_t a, uint64_t b)
{
    char ka[16], kb[16];
    key_of(ka, sizeof ka, "k", 8, a);
    key_of(kb, sizeof kb, "k", 8, b);
    return size_of(db, ka, kb);
}

/* The property's text; it must exist. */
static char *prop(kv_db *db, const char *name)
{
    char *v = NULL;
    int rc = kv_property(db, name, &v);
    ck_assert_msg(rc == KV_OK, "kv_property(%s): %s: %s", name, kv_strerror(rc),
                  kv_error_text());
    ck_assert_ptr_nonnull(v);
    return v;
}

static uint64_t prop_u64(kv_db *db, const char *name)
{
    char *v = prop(db, name), *end;
    ck_assert_msg(v[0] >= '0' && v[0] <= '9', "%s: \"%s\"", name, v);
    unsigned long long x = strtoull(v, &end, 10);
    ck_assert_msg(*end == '\0', "%s: \"%s\" is not a decimal number", name, v);
    kv_free(v);
    return x;
}

/* ---- approximate sizes --------------------------------------------------------------------- */

START_TEST(sizes_of_an_empty_database_and_bad_arguments)
{
    kv_db *db = open_props("db", 0, KV_COMPRESSION_NONE);
    ck_assert_uint_eq(size_of(db, "", NULL), 0);
    ck_assert_uint_eq(size_of(db, "a", "z"), 0);
    /* Writes in the memtable count nothing: no table holds them yet. */
    put_keys(db, 0, 1000, 0);
    ck_assert_uint_eq(size_of(db, "", NULL), 0);

    /* n = 0 reads no array; any NULL array with n > 0 is KV_EINVAL, and
     * so is a NULL key with a length. Nothing is written then. */
    ck_assert_int_eq(kv_approximate_sizes(db, 0, NULL, NULL, NULL, NULL, NULL), KV_OK);
    const void *s[1] = {"a"}, *l[1] = {"b"};
    size_t sl[1] = {1}, ll[1] = {1};
    uint64_t out[1] = {77};
    ck_assert_int_eq(kv_approximate_sizes(NULL, 1, s, sl, l, ll, out), KV_EINVAL);
    ck_assert_int_eq(kv_approximate_sizes(db, 1, NULL, sl, l, ll, out), KV_EINVAL);
    ck_assert_ptr_nonnull(strstr(kv_error_text(), "starts"));
    ck_assert_int_eq(kv_approximate_sizes(db, 1, s, NULL, l, ll, out), KV_EINVAL);
    ck_assert_int_eq(kv_approximate_sizes(db, 1, s, sl, NULL, ll, out), KV_EINVAL);
    ck_assert_int_eq(kv_approximate_sizes(db, 1, s, sl, l, NULL, out), KV_EINVAL);
    ck_assert_int_eq(kv_approximate_sizes(db, 1, s, sl, l, ll, NULL), KV_EINVAL);
    ck_assert_ptr_nonnull(strstr(kv_error_text(), "sizes"));
    const void *ns[1] = {NULL};
    ck_assert_int_eq(kv_approximate_sizes(db, 1, ns, sl, l, ll, out), KV_EINVAL);
    ck_assert_ptr_nonnull(strstr(kv_error_text(), "NULL start"));
    ck_assert_int_eq(kv_approximate_sizes(db, 1, s, sl, ns, ll, out), KV_EINVAL);
    ck_assert_ptr_nonnull(strstr(kv_error_text(), "NULL limit"));
    ck_assert_uint_eq(out[0], 77);
    /* NULL with length 0: the empty key as a start, no bound as a limit. */
    size_t zero[1] = {0};
    ck_assert_int_eq(kv_approximate_sizes(db, 1, ns, zero, ns, zero, out), KV_OK);
    ck_assert_uint_eq(out[0], 0);
    close_db(db);
}
END_TEST

/* Checks the sizes of db holding keys [0, n) in tables: the whole range is
 * exactly the tables' bytes; adjacent ranges add up to their union;
 * half of the keys is about half; empty ranges are 0 and a range between
 * two adjacent keys at most one block; and no data block is read. */
static void check_sizes(kv_db *db, uint64_t n)
{
    struct kv_stats before, after;
    get_stats(db, &before);
    ck_assert_uint_gt(before.tables, 0);
    uint64_t full = size_of(db, "", NULL);
    ck_assert_uint_eq(full, before.table_bytes);
    ck_assert_uint_eq(size_of(db, "k", "l"), full); /* every key lies in [k, l) */
    ck_assert_uint_eq(key_size(db, 0, n), full);        /* the first key to past the last */

    /* Adjacent ranges: their sizes sum to the size of their union. */
    uint64_t q[5] = {0, n / 4, n / 2, 3 * n / 4, n};
    char ks[5][16];
    const void *starts[4], *limits[4];
    size_t slens[4], llens[4];
    for (int i = 0; i < 5; i++)
        key_of(ks[i], sizeof ks[i], "k", 8, q[i]);
    for (int i = 0; i < 4; i++) {
        starts[i] = ks[i];
        slens[i] = strlen(ks[i]);
        limits[i] = i < 3 ? ks[i + 1] : NULL; /* the last quarter: no upper bound */
        llens[i] = i < 3 ? strlen(ks[i + 1]) : 0;
    }
    uint64_t quarter[4];
    ck_assert_int_eq(kv_approximate_sizes(db, 4, starts, slens, limits, llens, quarter), KV_OK);
    uint64_t sum = 0;
    for (int i = 0; i < 4; i++) {
        ck_assert_msg(quarter[i] > full / 8 && quarter[i] < full * 3 / 8,
                      "quarter %d: %" PRIu64 " of %" PRIu64, i, quarter[i], full);
        sum += quarter[i];
    }
    ck_assert_uint_eq(sum, full);

    /* Half the keys, about half the bytes. */
    uint64_t half = key_size(db, 0, n / 2);
    ck_assert_msg(half >= full / 4 && half <= full * 3 / 4, "half: %" PRIu64 " of %" PRIu64,
                  half, full);
    ck_assert_uint_eq(key_size(db, n / 2, n) + half, full);

    /* Empty ranges. */
    ck_assert_uint_eq(key_size(db, n / 3, n / 3), 0);     /* limit == start */
    ck_assert_uint_eq(key_size(db, n / 2, n / 3), 0);     /* limit < start */
    ck_assert_uint_eq(size_of(db, "a", "b"), 0);          /* before every key */
    ck_assert_uint_eq(size_of(db, "z", NULL), 0);         /* after every key */
    char a[24], b[24];
    key_of(a, sizeof a, "k", 8, n / 3);
    key_of(b, sizeof b, "k", 8, n / 3);
    strcat(a, "a");
    strcat(b, "b");
    ck_assert_uint_eq(size_of(db, a, b), 0); /* between two keys, holding none */
    /* One key's range [k, k + NUL) lies in one block, or none: its size
     * is at most a block's, scaled by the table's file over its data (an
     * index entry per block and filter bits per key: a few percent). This
     * holds for a table's largest key too: past it lies the rest of the
     * file, but only the share of it that goes with the last block. */
    for (uint64_t i = 0; i < n; i += n / 50) {
        char k[16];
        size_t kl = key_of(k, sizeof k, "k", 8, i);
        const void *s[1] = {k}, *l[1] = {k};
        size_t sl[1] = {kl}, ll[1] = {kl + 1}; /* k and its NUL: the next key up */
        uint64_t out[1];
        ck_assert_int_eq(kv_approximate_sizes(db, 1, s, sl, l, ll, out), KV_OK);
        ck_assert_msg(out[0] < (BLOCK + VLEN + 64) * 11 / 10, "key %" PRIu64 ": %" PRIu64, i,
                      out[0]);
    }
    /* And the largest key of every table, whose range ends past it. */
    kv_table_stats *t;
    size_t nt;
    ck_assert_int_eq(kv_table_stats_get(db, &t, &nt), KV_OK);
    for (size_t j = 0; j < nt; j++) {
        char k[80];
        ck_assert_uint_lt(t[j].largest_len, sizeof k);
        memcpy(k, t[j].largest, t[j].largest_len);
        const void *s[1] = {k}, *l[1] = {k};
        size_t sl[1] = {t[j].largest_len}, ll[1] = {t[j].largest_len + 1};
        uint64_t out[1];
        k[t[j].largest_len] = '\0';
        ck_assert_int_eq(kv_approximate_sizes(db, 1, s, sl, l, ll, out), KV_OK);
        ck_assert_msg(out[0] > 0 && out[0] < (BLOCK + VLEN + 64) * 11 / 10,
                      "table %" PRIu64 "'s last key: %" PRIu64, t[j].number, out[0]);
    }
    kv_free(t);

    /* All of it from the indexes: no get ran, no block was read. */
    get_stats(db, &after);
    ck_assert_uint_eq(after.data_block_reads, before.data_block_reads);
    ck_assert_uint_eq(after.block_cache_hits, before.block_cache_hits);
    ck_assert_uint_eq(after.block_cache_misses, before.block_cache_misses);
}

START_TEST(sizes_grow_with_data)
{
    kv_db *db = open_props("db", (size_t)1 << 20, KV_COMPRESSION_NONE);
    const uint64_t round = 5000;
    uint64_t last = 0;
    for (uint64_t r = 1; r <= 4; r++) {
        put_keys(db, (r - 1) * round, r * round, 0);
        ck_assert_int_eq(kv_flush(db), KV_OK);
        uint64_t full = size_of(db, "", NULL);
        ck_assert_msg(full > last, "round %" PRIu64 ": %" PRIu64 " after %" PRIu64, r, full,
                      last);
        /* The tables hold the keys and values, uncompressed, plus their
         * per-entry and per-table overhead. */
        uint64_t raw = r * round * (VLEN + 9);
        ck_assert_msg(full >= raw && full < 2 * raw, "%" PRIu64 " bytes for %" PRIu64 " raw",
                      full, raw);
        /* The round's keys are one new table, wholly in their range: its
         * whole file, which is what the size grew by. */
        ck_assert_uint_eq(key_size(db, (r - 1) * round, r * round), full - last);
        last = full;
    }
    check_sizes(db, 4 * round);

    /* Compacted into a deeper level's disjoint tables: the same answers,
     * and a range from one table's smallest key to the next one's is
     * exactly the first table's file. */
    ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 0), KV_OK);
    struct kv_stats s;
    get_stats(db, &s);
    ck_assert_uint_eq(s.l0_tables, 0);
    ck_assert_uint_gt(s.tables, 4);
    check_sizes(db, 4 * round);
    kv_table_stats *t;
    size_t nt;
    ck_assert_int_eq(kv_table_stats_get(db, &t, &nt), KV_OK);
    ck_assert_uint_eq(nt, s.tables);
    for (size_t i = 0; i + 1 < nt; i++) {
        ck_assert_uint_eq(t[i].level, t[i + 1].level);
        const void *st[1] = {t[i].smallest}, *li[1] = {t[i + 1].smallest};
        size_t sl[1] = {t[i].smallest_len}, ll[1] = {t[i + 1].smallest_len};
        uint64_t out[1];
        ck_assert_int_eq(kv_approximate_sizes(db, 1, st, sl, li, ll, out), KV_OK);
        ck_assert_uint_eq(out[0], t[i].file_size);
    }
    kv_free(t);

    /* More keys in level 0 above the compacted ones: both levels count. */
    put_keys(db, 4 * round, 5 * round, 0);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    get_stats(db, &s);
    ck_assert_uint_gt(s.l0_tables, 0);
    ck_assert_uint_eq(size_of(db, "", NULL), s.table_bytes);
    check_sizes(db, 5 * round);
    close_db(db);
}
END_TEST

/* ---- properties ---------------------------------------------------------------------------- */

/* A database with tables on two levels and a binary key among them. */
static kv_db *two_levels(const char *name, size_t cache, int compression)
{
    kv_db *db = open_props(name, cache, compression);
    put_keys(db, 0, 8000, compression == KV_COMPRESSION_ZSTD);
    ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 0), KV_OK);
    put_keys(db, 8000, 9000, compression == KV_COMPRESSION_ZSTD);
    ck_assert_int_eq(kv_put(db, "\0bin\"\\\xff", 7, "v", 1), KV_OK);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    put_keys(db, 9000, 9100, 0); /* and some in the memtable */
    return db;
}

START_TEST(num_files_at_level_matches_stats)
{
    kv_db *db = two_levels("db", 0, KV_COMPRESSION_NONE);
    struct kv_stats s;
    get_stats(db, &s);
    int deep = 0;
    for (int l = 0; l < 7; l++) {
        char name[64];
        snprintf(name, sizeof name, "kv.num-files-at-level%d", l);
        ck_assert_uint_eq(prop_u64(db, name), s.level_tables[l]);
        deep += l > 0 && s.level_tables[l] > 0;
    }
    ck_assert_uint_gt(s.level_tables[0], 0);
    ck_assert_int_eq(deep, 1);

    /* Levels that do not exist, and names that only look like one. */
    static const char *const bad[] = {
        "kv.num-files-at-level7", "kv.num-files-at-level",   "kv.num-files-at-level07x",
        "kv.num-files-at-level07", "kv.num-files-at-level00", "kv.num-files-at-level-1",
        "kv.num-files-at-level 1", "kv.num-files-at-level1 ", "kv.num-files-at-level+1",
        "kv.num-files-at-level99999999999999999999", "kv.num-files-at-levelx",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *v = (char *)"untouched";
        ck_assert_msg(kv_property(db, bad[i], &v) == KV_NOTFOUND, "%s", bad[i]);
        ck_assert_ptr_null(v);
    }
    close_db(db);
}
END_TEST

START_TEST(memory_usage_is_the_stats_memory)
{
    /* No block cache: exactly the memtables, filters and indexes. */
    kv_db *db = two_levels("db", 0, KV_COMPRESSION_NONE);
    struct kv_stats s;
    get_stats(db, &s);
    uint64_t sum = s.memtable_bytes + s.filter_bytes + s.index_bytes;
    ck_assert_uint_gt(s.memtable_bytes, 0);
    ck_assert_uint_gt(s.filter_bytes, 0);
    ck_assert_uint_gt(s.index_bytes, 0);
    ck_assert_uint_eq(prop_u64(db, "kv.approximate-memory-usage"), sum);
    /* More in the memtable: more memory. */
    put_keys(db, 20000, 21000, 0);
    get_stats(db, &s);
    uint64_t more = prop_u64(db, "kv.approximate-memory-usage");
    ck_assert_uint_eq(more, s.memtable_bytes + s.filter_bytes + s.index_bytes);
    ck_assert_uint_gt(more, sum);
    close_db(db);

    /* With a cache of zstd blocks: its blocks count too, within its capacity. */
    const size_t cap = (size_t)1 << 20;
    db = two_levels("cached", cap, KV_COMPRESSION_ZSTD);
    get_stats(db, &s);
    sum = s.memtable_bytes + s.filter_bytes + s.index_bytes;
    uint64_t mem = prop_u64(db, "kv.approximate-memory-usage");
    ck_assert_uint_ge(mem, sum);
    ck_assert_uint_le(mem, sum + cap);
    char k[16];
    for (uint64_t i = 0; i < 8000; i += 40) {
        void *v;
        size_t vl;
        ck_assert_int_eq(kv_get(db, k, key_of(k, sizeof k, "k", 8, i), &v, &vl), KV_OK);
        kv_free(v);
    }
    get_stats(db, &s);
    ck_assert_uint_gt(s.block_cache_misses, 0);
    sum = s.memtable_bytes + s.filter_bytes + s.index_bytes;
    mem = prop_u64(db, "kv.approximate-memory-usage");
    ck_assert_uint_gt(mem, sum); /* the blocks the gets put in the cache */
    ck_assert_uint_le(mem, sum + cap);
    close_db(db);
}
END_TEST

/* The [start, end) of the part of text under "--- level L ---". */
static void level_part(const char *text, int l, const char **start, const char **end)
{
    char h[32];
    snprintf(h, sizeof h, "--- level %d ---\n", l);
    *start = strstr(text, h);
    ck_assert_msg(*start != NULL, "no heading for level %d", l);
    snprintf(h, sizeof h, "--- level %d ---\n", l + 1);
    *end = l + 1 < 7 ? strstr(text, h) : text + strlen(text);
    ck_assert_ptr_nonnull(*end);
}

START_TEST(sstables_and_stats_name_every_table_and_level)
{
    kv_db *db = two_levels("db", 0, KV_COMPRESSION_NONE);
    kv_table_stats *t;
    size_t nt;
    ck_assert_int_eq(kv_table_stats_get(db, &t, &nt), KV_OK);
    struct kv_stats s;
    get_stats(db, &s);

    /* kv.sstables: a heading per level, each table's line under its own. */
    char *text = prop(db, "kv.sstables");
    for (const char *p = text; *p; p++)
        ck_assert_msg(*p == '\n' || (*p >= 0x20 && *p < 0x7F), "byte 0x%02x printed raw",
                      (unsigned char)*p);
    for (size_t i = 0; i < nt; i++) {
        char line[96];
        snprintf(line, sizeof line, "%06" PRIu64 ".sst %" PRIu64 " bytes, %" PRIu64 " entries",
                 t[i].number, t[i].file_size, t[i].entries);
        const char *at = strstr(text, line), *from, *to;
        ck_assert_msg(at != NULL, "table %s missing from:\n%s", line, text);
        level_part(text, (int)t[i].level, &from, &to);
        ck_assert_msg(at > from && at < to, "table %s not under level %u", line, t[i].level);
    }
    size_t lines = 0;
    for (const char *p = text; *p; p++)
        lines += *p == '\n';
    ck_assert_uint_eq(lines, 7 + nt);
    /* The binary key, escaped: 0x00 bin " \ 0xff. */
    ck_assert_ptr_nonnull(strstr(text, "[\"\\x00bin\\x22\\x5c\\xff\" .. "));
    kv_free(text);

    /* kv.stats: a row per level with its tables, a total, and the memory. */
    text = prop(db, "kv.stats");
    for (int l = 0; l < 7; l++) {
        char row[32];
        snprintf(row, sizeof row, "\n%5d %6" PRIu64 " ", l, s.level_tables[l]);
        ck_assert_msg(strstr(text, row) != NULL, "no row \"%s\" in:\n%s", row + 1, text);
    }
    char row[64];
    snprintf(row, sizeof row, "\ntotal %6" PRIu64 " ", s.tables);
    ck_assert_msg(strstr(text, row) != NULL, "no total row in:\n%s", text);
    snprintf(row, sizeof row, "\nmemory: %" PRIu64 " bytes",
             prop_u64(db, "kv.approximate-memory-usage"));
    ck_assert_msg(strstr(text, row) != NULL, "no \"%s\" in:\n%s", row + 1, text);
    snprintf(row, sizeof row, "compactions: %" PRIu64 " ", s.compactions);
    ck_assert_msg(strstr(text, row) != NULL, "no \"%s\" in:\n%s", row, text);
    kv_free(text);
    kv_free(t);
    close_db(db);

    /* An empty database: every level, no table. */
    kv_db *e = open_props("empty", 0, KV_COMPRESSION_NONE);
    text = prop(e, "kv.sstables");
    ck_assert_str_eq(text, "--- level 0 ---\n--- level 1 ---\n--- level 2 ---\n"
                           "--- level 3 ---\n--- level 4 ---\n--- level 5 ---\n"
                           "--- level 6 ---\n");
    kv_free(text);
    text = prop(e, "kv.stats");
    ck_assert_ptr_nonnull(strstr(text, "\ntotal      0 "));
    kv_free(text);
    close_db(e);
}
END_TEST

START_TEST(unknown_names_and_bad_arguments)
{
    kv_db *db = open_props("db", 0, KV_COMPRESSION_NONE);
    static const char *const unknown[] = {"", "kv.", "kv.statsx", "KV.STATS", "leveldb.stats",
                                          "kv.stats\n", "kv.approximate-memory-usage2"};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        char *v = (char *)"untouched";
        ck_assert_msg(kv_property(db, unknown[i], &v) == KV_NOTFOUND, "\"%s\"", unknown[i]);
        ck_assert_ptr_null(v);
    }
    char *v;
    ck_assert_int_eq(kv_property(db, "no.such-thing", &v), KV_NOTFOUND);
    ck_assert_msg(strstr(kv_error_text(), "\"no.such-thing\"") != NULL, "%s", kv_error_text());
    ck_assert_int_eq(kv_property(db, "bad\x01name", &v), KV_NOTFOUND);
    ck_assert_msg(strstr(kv_error_text(), "\"bad\\x01name\"") != NULL, "%s", kv_error_text());

    ck_assert_int_eq(kv_property(NULL, "kv.stats", &v), KV_EINVAL);
    ck_assert_ptr_null(v);
    ck_assert_int_eq(kv_property(db, NULL, &v), KV_EINVAL);
    ck_assert_ptr_nonnull(strstr(kv_error_text(), "name"));
    ck_assert_int_eq(kv_property(db, "kv.stats", NULL), KV_EINVAL);
    close_db(db);
}
END_TEST

/* ---- while the tables change ----------------------------------------------------------- */

struct writer {
    kv_db *db;
    _Atomic int done;
};

static void *write_and_flush(void *arg)
{
    struct writer *w = arg;
    for (uint64_t r = 0; r < 12; r++) {
        put_keys(w->db, r * 3000, (r + 1) * 3000, 0);
        if (kv_flush(w->db) != KV_OK)
            break;
    }
    atomic_store(&w->done, 1);
    return NULL;
}

/* Sizes and properties read while another thread writes, flushes and
 * (past the level-0 trigger) compacts: every call sees one version, so
 * within one kv_approximate_sizes call adjacent ranges still add up, and
 * every property parses. For ThreadSanitizer (ctest -L concurrency). */
START_TEST(sizes_and_properties_while_tables_change)
{
    kv_db *db = open_props("db", (size_t)1 << 20, KV_COMPRESSION_ZSTD);
    struct writer w = {.db = db};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, write_and_flush, &w), 0);
    uint64_t calls = 0, seen_tables = 0;
    while (!atomic_load(&w.done) || calls < 50) {
        char a[16], b[16];
        key_of(a, sizeof a, "k", 8, calls * 97 % 36000);
        key_of(b, sizeof b, "k", 8, calls * 97 % 36000 + 5000);
        const void *st[3] = {a, b, a}, *li[3] = {b, NULL, NULL};
        size_t sl[3] = {strlen(a), strlen(b), strlen(a)}, ll[3] = {strlen(b), 0, 0};
        uint64_t out[3];
        ck_assert_int_eq(kv_approximate_sizes(db, 3, st, sl, li, ll, out), KV_OK);
        ck_assert_uint_eq(out[0] + out[1], out[2]);
        uint64_t files = 0;
        for (int l = 0; l < 7; l++) {
            char name[48];
            snprintf(name, sizeof name, "kv.num-files-at-level%d", l);
            files += prop_u64(db, name);
        }
        seen_tables = files > seen_tables ? files : seen_tables;
        ck_assert_uint_gt(prop_u64(db, "kv.approximate-memory-usage"), 0);
        char *text = prop(db, calls % 2 ? "kv.stats" : "kv.sstables");
        ck_assert_ptr_nonnull(strstr(text, calls % 2 ? "\ntotal " : "--- level 6 ---\n"));
        kv_free(text);
        calls++;
    }
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_uint_gt(seen_tables, 0);
    struct kv_stats s;
    get_stats(db, &s);
    ck_assert_uint_eq(size_of(db, "", NULL), s.table_bytes);
    close_db(db);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("props");
    TCase *tc = tcase_create("sizes");
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, sizes_of_an_empty_database_and_bad_arguments);
    tcase_add_test(tc, sizes_grow_with_data);
    suite_add_tcase(s, tc);
    tc = tcase_create("properties");
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, num_files_at_level_matches_stats);
    tcase_add_test(tc, memory_usage_is_the_stats_memory);
    tcase_add_test(tc, sstables_and_stats_name_every_table_and_level);
    tcase_add_test(tc, unknown_names_and_bad_arguments);
    suite_add_tcase(s, tc);
    tc = tcase_create("threads");
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, sizes_and_properties_while_tables_change);
    suite_add_tcase(s, tc);
    return s;
}
