/* check_scanfilter_store.c - the store's side of the filters that gate
 * scans (kv_options.prefix_len, range_filter_bits; doc/database.md,
 * "Filters that gate scans"), through kv.h: which positionings are range
 * queries, that every table a query meets is either skipped or read, that
 * skipped tables never held a key of the range (the answers match a
 * model), the per-table counts against kv_stats', and kv_explain_seek.
 *
 * The tables' filters are sstable/'s and filter/'s work: where they are
 * not built yet (their placeholders answer "maybe" and record no prefix),
 * the assertions that need them are made only when kv_table_stats shows
 * the tables carry them, so each test means something either way. */
#define _XOPEN_SOURCE 700
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kv/kv.h>

#include "fixture.h"

/* ---- a database of interleaved level-0 tables --------------------------------------- */

#define TABLES 12u
#define PER_TABLE 400u
#define STRIDE 10u /* keys are k<8 digits> of multiples of STRIDE: gaps between them */

/* Key n (of TABLES * PER_TABLE) as text: "d<dev>/k<8 digits>", dev = 2 *
 * (n / 1000) in three digits, so that a prefix of 4 bytes ("d002") holds
 * 1000 keys and those between ("d001", "d003") none. */
static size_t key_n(char *k, size_t cap, uint64_t n)
{
    int len = snprintf(k, cap, "d%03u/k%08llu", (unsigned)(n / 1000 * 2),
                       (unsigned long long)(n * STRIDE));
    ck_assert(len > 0 && (size_t)len < cap);
    return (size_t)len;
}

/* The model: key n is live when live[n] (n < nkeys). */
#define MAXKEYS 8000u
static unsigned char live[MAXKEYS];
static uint64_t nkeys;

/* Level 0 stays as it is written: no compaction until asked. */
static void options(kv_options *o, size_t prefix_len, double range_bits)
{
    kv_options_init(o);
    o->l0_compaction_trigger = 30;
    o->l0_slowdown_trigger = 40;
    o->l0_stop_trigger = 50;
    o->idle_compaction_ms = 0;
    o->compression = KV_COMPRESSION_NONE;
    o->prefix_len = prefix_len;
    o->range_filter_bits = range_bits;
}

/* TABLES level-0 tables, table j holding keys n with n % TABLES == j: each
 * table's key range spans the whole key space, so every query meets every
 * table and only the filters can rule one out. */
static kv_db *fill(const kv_options *o)
{
    kv_db *db = open_db("db", o);
    char k[32];
    for (uint64_t j = 0; j < TABLES; j++) {
        for (uint64_t i = 0; i < PER_TABLE; i++) {
            size_t kl = key_n(k, sizeof k, i * TABLES + j);
            put_kv(db, k, kl, k, kl);
        }
        ck_assert_int_eq(kv_flush(db), KV_OK);
    }
    nkeys = TABLES * PER_TABLE;
    memset(live, 1, nkeys);
    return db;
}

/* The live keys in [lo, hi), counted. */
static size_t model_count(const char *lo, const char *hi)
{
    size_t n = 0;
    char k[32];
    for (uint64_t i = 0; i < nkeys; i++) {
        key_n(k, sizeof k, i);
        n += live[i] && strcmp(k, lo) >= 0 && strcmp(k, hi) < 0;
    }
    return n;
}

/* Keys an iterator with bounds [lo, hi) reads forward, from seek_first. */
static size_t scan_count(kv_db *db, const char *lo, const char *hi)
{
    kv_iter *it;
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    ck_assert_int_eq(kv_iter_set_bounds(it, lo, strlen(lo), hi, strlen(hi)), KV_OK);
    size_t n = 0;
    for (kv_iter_seek_first(it); kv_iter_valid(it); kv_iter_next(it))
        n++;
    ck_assert_int_eq(kv_iter_status(it), KV_OK);
    kv_iter_free(it);
    return n;
}

/* What the live tables carry, from kv_table_stats. */
struct carry {
    size_t tables, with_range, with_prefix;
    uint64_t checks, negatives, fps, prefix_negatives, prefix_fps;
};

static struct carry carried(kv_db *db, size_t prefix_len)
{
    kv_table_stats *t;
    size_t n;
    ck_assert_int_eq(kv_table_stats_get(db, &t, &n), KV_OK);
    struct carry c = {.tables = n};
    for (size_t i = 0; i < n; i++) {
        c.with_range += t[i].range_filter_bytes > 0;
        c.with_prefix += prefix_len && t[i].prefix_len == prefix_len;
        c.checks += t[i].range_checks;
        c.negatives += t[i].range_negatives;
        c.fps += t[i].range_false_positives;
        c.prefix_negatives += t[i].prefix_negatives;
        c.prefix_fps += t[i].prefix_false_positives;
        uint64_t empty = t[i].range_negatives + t[i].range_false_positives;
        ck_assert(t[i].range_negatives + t[i].range_false_positives <= t[i].range_checks);
        if (empty) {
            ck_assert(t[i].range_measured_fpr >= 0 && t[i].range_measured_fpr <= 1);
            ck_assert(t[i].range_expected_fpr >= 0 && t[i].range_expected_fpr <= 1);
        } else {
            ck_assert(t[i].range_measured_fpr == 0 && t[i].range_expected_fpr == 0);
        }
    }
    kv_free(t);
    return c;
}

/* Every table checked is either skipped by one filter or read. */
static void expect_balance(const struct kv_stats *s)
{
    ck_assert_uint_eq(s->range_tables_checked,
                      s->prefix_filter_skips + s->range_filter_skips + s->range_tables_read);
    ck_assert(s->range_filter_false_positives <= s->range_tables_read);
    ck_assert(s->prefix_filter_false_positives <= s->range_tables_read);
}

/* ---- which positionings are range queries ------------------------------------------- */

START_TEST(range_queries_count_positionings)
{
    kv_options o;
    options(&o, 0, 16);
    kv_db *db = fill(&o);
    struct kv_stats s0, s;
    get_stats(db, &s0);
    kv_iter *it;
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    /* No bounds, or one: no range query. */
    kv_iter_seek_first(it);
    kv_iter_seek(it, "d002", 4);
    kv_iter_seek_last(it);
    ck_assert_int_eq(kv_iter_set_bounds(it, "d002", 4, NULL, 0), KV_OK);
    kv_iter_seek_first(it);
    get_stats(db, &s);
    ck_assert_uint_eq(s.range_queries, s0.range_queries);
    ck_assert_uint_eq(s.range_tables_checked, s0.range_tables_checked);
    /* Both bounds: each positioning is one, a step is none. */
    ck_assert_int_eq(kv_iter_set_bounds(it, "d002/k", 6, "d003/k", 6), KV_OK);
    kv_iter_seek_first(it);
    ck_assert(kv_iter_valid(it));
    kv_iter_next(it);
    kv_iter_next(it);
    kv_iter_prev(it); /* a change of direction repositions, but is no query */
    kv_iter_seek(it, "d002/k00015000", 14);
    kv_iter_seek_last(it);
    ck_assert(kv_iter_valid(it));
    kv_iter_prev(it);
    ck_assert_int_eq(kv_iter_seek_prefix(it, "d004", 4), KV_OK); /* bounds [d004, d005) */
    ck_assert(kv_iter_valid(it));
    ck_assert_int_eq(kv_iter_status(it), KV_OK);
    kv_iter_free(it);
    get_stats(db, &s);
    ck_assert_uint_eq(s.range_queries - s0.range_queries, 4);
    /* Each query met every table (their ranges span the key space). */
    ck_assert(s.range_tables_checked - s0.range_tables_checked >= 4 * TABLES);
    expect_balance(&s);
    close_db(db);
}
END_TEST

/* ---- empty ranges: skipped, never wrongly ------------------------------------------- */

START_TEST(empty_ranges_skip_tables)
{
    kv_options o;
    options(&o, 0, 16);
    kv_db *db = fill(&o);
    struct kv_stats s0, s;
    get_stats(db, &s0);
    struct carry c0 = carried(db, 0);
    char lo[32], hi[32];
    const unsigned queries = 200;
    for (unsigned q = 0; q < queries; q++) {
        /* Between key n and key n + 1: 9 missing keys, none in the model. */
        uint64_t n = splitmix(q) % (TABLES * PER_TABLE - 1);
        key_n(lo, sizeof lo, n);
        key_n(hi, sizeof hi, n + 1);
        lo[strlen(lo) - 1] = '1';
        ck_assert_uint_eq(model_count(lo, hi), 0);
        ck_assert_uint_eq(scan_count(db, lo, hi), 0);
    }
    get_stats(db, &s);
    struct carry c = carried(db, 0);
    uint64_t checked = s.range_tables_checked - s0.range_tables_checked;
    uint64_t skips = s.range_filter_skips - s0.range_filter_skips;
    uint64_t fps = s.range_filter_false_positives - s0.range_filter_false_positives;
    ck_assert_uint_eq(s.range_queries - s0.range_queries, queries);
    ck_assert_uint_eq(checked, (uint64_t)queries * TABLES);
    expect_balance(&s);
    /* The tables' counts add up to the database's. */
    ck_assert_uint_eq(c.negatives - c0.negatives, skips);
    ck_assert_uint_eq(c.fps - c0.fps, fps);
    if (c.with_range == c.tables) {
        /* Every table asked, every answer about an empty range: a skip or
         * a false positive; at 16 bits per key, mostly skips. */
        ck_assert_uint_eq(c.checks - c0.checks, checked);
        ck_assert_uint_eq(skips + fps, checked);
        ck_assert_msg(skips * 10 >= checked * 9, "%llu of %llu tables skipped",
                      (unsigned long long)skips, (unsigned long long)checked);
    } else {
        /* No range filter yet (the placeholder): nothing asked, all read. */
        ck_assert_uint_eq(c.with_range, 0);
        ck_assert_uint_eq(skips + fps, 0);
        ck_assert_uint_eq(s.range_tables_read - s0.range_tables_read, checked);
    }
    close_db(db);
}
END_TEST

/* A range filter that answers "maybe" to nearly every query (ranges that
 * hold its keys) stops being asked on every query, but keeps being asked
 * now and then; once the ranges turn empty it is asked every time again.
 * Either way every range reads what the model holds. */
START_TEST(useless_filters_asked_less)
{
    kv_options o;
    options(&o, 0, 16);
    kv_db *db = fill(&o);
    ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 0), KV_OK);
    char lo[32], hi[32];
    const unsigned queries = 320;
    struct carry c0 = carried(db, 0);
    for (unsigned q = 0; q < queries; q++) { /* each range holds 1 .. 8 keys */
        uint64_t n = splitmix(q) % (TABLES * PER_TABLE - 8);
        key_n(lo, sizeof lo, n);
        key_n(hi, sizeof hi, n + 1 + q % 8);
        ck_assert_uint_eq(scan_count(db, lo, hi), model_count(lo, hi));
    }
    struct carry c1 = carried(db, 0);
    ck_assert_uint_eq(c1.with_range, c1.tables);
    /* Asked while its answers were news (about the first 16 of each
     * table), then on one query in 16. */
    uint64_t asked = c1.checks - c0.checks;
    ck_assert_msg(asked > 0 && asked * 3 < (uint64_t)queries * c1.tables,
                  "asked %llu times for %u queries over %zu tables", (unsigned long long)asked,
                  queries, c1.tables);
    for (unsigned q = 0; q < queries; q++) { /* empty ranges between two keys */
        uint64_t n = splitmix(q + 7777) % (TABLES * PER_TABLE - 1);
        key_n(lo, sizeof lo, n);
        key_n(hi, sizeof hi, n + 1);
        lo[strlen(lo) - 1] = '1';
        ck_assert_uint_eq(scan_count(db, lo, hi), 0);
    }
    struct carry c2 = carried(db, 0);
    /* One "no" makes a filter worth asking again: all but the first few
     * empty ranges skip the tables they meet. */
    ck_assert_msg((c2.negatives - c1.negatives) * 10 >= (uint64_t)queries * 8,
                  "%llu skips for %u empty ranges",
                  (unsigned long long)(c2.negatives - c1.negatives), queries);
    close_db(db);
}
END_TEST

/* Random ranges, forward and backward, against the model: a range with a
 * key is never skipped, over level 0 and then after a compaction. */
START_TEST(random_ranges_match_the_model)
{
    kv_options o;
    options(&o, 4, 12);
    kv_db *db = fill(&o);
    char lo[32], hi[32];
    for (int round = 0; round < 2; round++) {
        for (unsigned q = 0; q < 150; q++) {
            uint64_t a = splitmix(q * 7 + (uint64_t)round) % (TABLES * PER_TABLE);
            uint64_t w = splitmix(q * 13 + 1) % (q % 3 == 0 ? 3 : q % 3 == 1 ? 40 : 2000);
            uint64_t b = a + w < TABLES * PER_TABLE ? a + w : TABLES * PER_TABLE - 1;
            key_n(lo, sizeof lo, a);
            key_n(hi, sizeof hi, b);
            if ((q & 1) && b > a) /* a bound between keys */
                lo[strlen(lo) - 1] = '5';
            size_t want = model_count(lo, hi);
            ck_assert_uint_eq(scan_count(db, lo, hi), want);
            /* Backward from seek_last: the same count. */
            kv_iter *it;
            ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
            ck_assert_int_eq(kv_iter_set_bounds(it, lo, strlen(lo), hi, strlen(hi)), KV_OK);
            size_t n = 0;
            for (kv_iter_seek_last(it); kv_iter_valid(it); kv_iter_prev(it))
                n++;
            ck_assert_uint_eq(n, want);
            /* A seek inside: the keys from there. */
            kv_iter_seek(it, hi, strlen(hi) - 1);
            ck_assert_int_eq(kv_iter_status(it), KV_OK);
            kv_iter_free(it);
        }
        compact_all(db);
    }
    struct kv_stats s;
    get_stats(db, &s);
    expect_balance(&s);
    close_db(db);
}
END_TEST

/* Levels of many small tables, range tombstones (which widen a table's
 * range past its keys), deletes and a memtable: every key of a random
 * range read, in order, forward and backward. */
START_TEST(levels_match_the_model)
{
    kv_options o;
    options(&o, 4, 16);
    o.write_buffer_size = (size_t)64 << 10;
    o.target_file_size = (size_t)64 << 10;
    o.max_bytes_for_level_base = (size_t)256 << 10;
    o.l0_compaction_trigger = 4;
    o.l0_slowdown_trigger = 20;
    o.l0_stop_trigger = 30;
    kv_db *db = open_db("db", &o);
    nkeys = MAXKEYS;
    memset(live, 0, sizeof live);
    char k[32], v[120];
    memset(v, 'v', sizeof v);
    for (uint64_t i = 0; i < 3 * MAXKEYS; i++) {
        uint64_t n = splitmix(i) % MAXKEYS;
        size_t kl = key_n(k, sizeof k, n);
        if (i % 7 == 3) {
            ck_assert_int_eq(kv_delete(db, k, kl), KV_OK);
            live[n] = 0;
        } else if (i % 997 == 5) { /* a few keys' worth, from n */
            char e[32];
            uint64_t m = n + 1 + splitmix(i + 1) % 40 < MAXKEYS ? n + 1 + splitmix(i + 1) % 40
                                                                : MAXKEYS - 1;
            size_t el = key_n(e, sizeof e, m);
            ck_assert_int_eq(kv_delete_range(db, k, kl, e, el), KV_OK);
            memset(live + n, 0, m - n);
        } else {
            put_kv(db, k, kl, v, sizeof v);
            live[n] = 1;
        }
        if (i == 2 * MAXKEYS) /* the rest over a tree of runs */
            compact_all(db);
    }
    char lo[32], hi[32], got[32];
    for (unsigned q = 0; q < 300; q++) {
        uint64_t a = splitmix(q * 3 + 11) % MAXKEYS;
        uint64_t w = splitmix(q * 5 + 12) % (q % 2 ? 4 : 300);
        uint64_t b = a + w < MAXKEYS ? a + w : MAXKEYS - 1;
        key_n(lo, sizeof lo, a);
        key_n(hi, sizeof hi, b);
        if ((q & 2) && b > a)
            lo[strlen(lo) - 1] = '5';
        kv_iter *it;
        ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
        ck_assert_int_eq(kv_iter_set_bounds(it, lo, strlen(lo), hi, strlen(hi)), KV_OK);
        for (int back = 0; back < 2; back++) {
            /* the model's keys in the range, in the direction of travel */
            uint64_t n = back ? b + 1 : a;
            if (back)
                kv_iter_seek_last(it);
            else
                kv_iter_seek_first(it);
            for (;; back ? kv_iter_prev(it) : kv_iter_next(it)) {
                for (;;) { /* the next live key of the model inside the range */
                    if (back ? n == 0 : n > b) {
                        n = UINT64_MAX;
                        break;
                    }
                    uint64_t c = back ? --n : n++;
                    key_n(k, sizeof k, c);
                    if (live[c] && strcmp(k, lo) >= 0 && strcmp(k, hi) < 0)
                        break;
                }
                if (n == UINT64_MAX || !kv_iter_valid(it))
                    break;
                size_t gl;
                const void *g = kv_iter_key(it, &gl);
                ck_assert(gl < sizeof got);
                memcpy(got, g, gl);
                got[gl] = 0;
                ck_assert_str_eq(got, k);
            }
            ck_assert_int_eq(kv_iter_status(it), KV_OK);
            ck_assert_msg(n == UINT64_MAX && !kv_iter_valid(it), "[%s, %s) %s: ends differ", lo, hi,
                          back ? "backward" : "forward");
        }
        kv_iter_free(it);
    }
    struct kv_stats s;
    get_stats(db, &s);
    expect_balance(&s);
    uint64_t deep = 0;
    for (int l = 1; l < 7; l++)
        deep = s.level_tables[l] > deep ? s.level_tables[l] : deep;
    ck_assert_msg(deep > 4, "a run of %llu tables", (unsigned long long)deep);
    close_db(db);
}
END_TEST

/* ---- prefixes -------------------------------------------------------------------------- */

START_TEST(prefix_gate_skips_absent_prefixes)
{
    kv_options o;
    options(&o, 4, 0);
    kv_db *db = fill(&o);
    struct kv_stats s0, s;
    get_stats(db, &s0);
    struct carry c0 = carried(db, 4);
    kv_iter *it;
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    /* "d001", "d003", "d005" and "d007" hold no key, but lie inside the
     * tables' ranges ("d000/..." .. "d008/..."): only a filter rules them
     * out. */
    const unsigned queries = 4;
    for (unsigned q = 0; q < queries; q++) {
        char p[8];
        snprintf(p, sizeof p, "d00%u", 1 + 2 * q);
        ck_assert_int_eq(kv_iter_seek_prefix(it, p, 4), KV_OK);
        ck_assert(!kv_iter_valid(it));
    }
    /* Bounds inside one prefix are a range query of that prefix too. */
    ck_assert_int_eq(kv_iter_set_bounds(it, "d002/k", 6, "d002/l", 6), KV_OK);
    kv_iter_seek_first(it);
    ck_assert(kv_iter_valid(it));
    ck_assert_int_eq(kv_iter_status(it), KV_OK);
    kv_iter_free(it);
    get_stats(db, &s);
    struct carry c = carried(db, 4);
    ck_assert_uint_eq(s.range_queries - s0.range_queries, queries + 1);
    expect_balance(&s);
    uint64_t skips = s.prefix_filter_skips - s0.prefix_filter_skips;
    ck_assert_uint_eq(c.prefix_negatives - c0.prefix_negatives, skips);
    ck_assert_uint_eq(c.prefix_fps - c0.prefix_fps,
                      s.prefix_filter_false_positives - s0.prefix_filter_false_positives);
    ck_assert_uint_eq(s.range_filter_skips, 0); /* no range filters */
    if (c.with_prefix == c.tables) {
        /* 10 bits per key: a table says maybe to an absent prefix ~1% of
         * the time. */
        ck_assert_msg(skips * 10 >= (uint64_t)queries * TABLES * 9, "%llu skips",
                      (unsigned long long)skips);
    } else {
        ck_assert_uint_eq(c.with_prefix, 0);
        ck_assert_uint_eq(skips, 0);
    }
    /* Reopened with another prefix_len, the tables are never asked. */
    o.prefix_len = 3;
    db = reopen_db(db, "db", &o);
    get_stats(db, &s0);
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    ck_assert_int_eq(kv_iter_seek_prefix(it, "d003", 4), KV_OK);
    ck_assert(!kv_iter_valid(it));
    ck_assert_int_eq(kv_iter_seek_prefix(it, "d002", 4), KV_OK);
    ck_assert(kv_iter_valid(it));
    kv_iter_free(it);
    get_stats(db, &s);
    ck_assert_uint_eq(s.prefix_filter_skips, s0.prefix_filter_skips);
    ck_assert_uint_eq(s.range_queries - s0.range_queries, 2);
    close_db(db);
}
END_TEST

/* Keyed filters: the prefix hash is the keyed hash, and a table written
 * keyed is asked with it after a reopen without filter_keyed_hash too. */
START_TEST(prefix_gate_keyed)
{
    kv_options o;
    options(&o, 4, 16);
    o.filter_keyed_hash = 1;
    kv_db *db = fill(&o);
    for (int round = 0; round < 2; round++) {
        struct kv_stats s0, s;
        get_stats(db, &s0);
        kv_iter *it;
        ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
        for (unsigned d = 0; d < 9; d++) {
            char p[8];
            snprintf(p, sizeof p, "d00%u", d);
            ck_assert_int_eq(kv_iter_seek_prefix(it, p, 4), KV_OK);
            ck_assert_int_eq(kv_iter_valid(it), d % 2 == 0); /* d000, d002, ... hold keys */
        }
        ck_assert_int_eq(kv_iter_status(it), KV_OK);
        kv_iter_free(it);
        get_stats(db, &s);
        expect_balance(&s);
        struct carry c = carried(db, 4);
        if (c.with_prefix == c.tables) /* 4 absent prefixes, 12 tables each */
            ck_assert(s.prefix_filter_skips - s0.prefix_filter_skips +
                          (s.range_filter_skips - s0.range_filter_skips) >=
                      4 * TABLES * 9 / 10);
        o.filter_keyed_hash = 0;
        db = reopen_db(db, "db", &o);
    }
    close_db(db);
}
END_TEST

/* ---- kv_explain_seek ---------------------------------------------------------------------- */

START_TEST(explain_seek_shows_each_table)
{
    kv_options o;
    options(&o, 4, 16);
    kv_db *db = fill(&o);
    put_str(db, "d002/k00010005", "in the memtable");
    struct kv_stats s0, s;
    get_stats(db, &s0);
    kv_explain *x;
    /* A range holding keys: the first is the answer. */
    ck_assert_int_eq(kv_explain_seek(db, "d002/k00010001", 14, "d002/k00010100", 14, &x), KV_OK);
    ck_assert_int_eq(x->result, KV_OK);
    ck_assert_uint_eq(x->value_len, 14);
    ck_assert(memcmp(x->value, "d002/k00010005", 14) == 0);
    ck_assert_uint_eq(x->live_tables, TABLES);
    ck_assert(x->hash != 0);                  /* the bounds share a prefix of prefix_len bytes */
    ck_assert_uint_eq(x->nsteps, 1 + TABLES); /* the memtable, then each table */
    ck_assert_int_eq(x->steps[0].where, KV_EXPLAIN_MEMTABLE);
    ck_assert_int_eq(x->steps[0].outcome, KV_EXPLAIN_FOUND);
    size_t found = 0;
    for (size_t i = 1; i < x->nsteps; i++) {
        const kv_explain_step *st = &x->steps[i];
        ck_assert_int_eq(st->where, KV_EXPLAIN_TABLE);
        ck_assert(st->number > 0 && st->smallest_len > 0 && st->largest_len > 0);
        found += st->outcome == KV_EXPLAIN_FOUND;
        if (st->range_filter == KV_EXPLAIN_FILTER_NEGATIVE ||
            st->filter == KV_EXPLAIN_FILTER_NEGATIVE)
            ck_assert_int_eq(st->block, KV_EXPLAIN_BLOCK_NONE);
        if (st->outcome == KV_EXPLAIN_FOUND)
            ck_assert(!st->false_positive && st->seq > 0);
    }
    /* Keys 1001 .. 1009 (n * 10 in 10010 .. 10090) lie in 9 tables. */
    ck_assert_uint_eq(found, 9);
    kv_free(x);
    /* An empty range: KV_NOTFOUND, and no table found anything. */
    ck_assert_int_eq(kv_explain_seek(db, "d002/k00010011", 14, "d002/k00010019", 14, &x), KV_OK);
    ck_assert_int_eq(x->result, KV_NOTFOUND);
    ck_assert(x->value == NULL);
    for (size_t i = 0; i < x->nsteps; i++) {
        ck_assert_int_eq(x->steps[i].outcome, KV_EXPLAIN_ABSENT);
        if (x->steps[i].where == KV_EXPLAIN_TABLE &&
            x->steps[i].range_filter == KV_EXPLAIN_FILTER_MAYBE)
            ck_assert(x->steps[i].false_positive);
    }
    kv_free(x);
    get_stats(db, &s);
    ck_assert_uint_eq(s.range_queries - s0.range_queries, 2); /* each counted as one */
    /* An open bound: explained, not a range query. */
    ck_assert_int_eq(kv_explain_seek(db, "d004", 4, NULL, 0, &x), KV_OK);
    ck_assert_int_eq(x->result, KV_OK);
    ck_assert_uint_eq(x->hash, 0);
    ck_assert(x->nsteps >= 1);
    kv_free(x);
    get_stats(db, &s0);
    ck_assert_uint_eq(s0.range_queries, s.range_queries);
    /* Bad arguments. */
    ck_assert_int_eq(kv_explain_seek(db, "b", 1, "a", 1, &x), KV_EINVAL);
    ck_assert(x == NULL);
    /* A NULL bound is open whatever its length (as kv_iter_set_bounds takes it). */
    ck_assert_int_eq(kv_explain_seek(db, NULL, 3, "a", 1, &x), KV_OK);
    ck_assert(x != NULL);
    kv_free(x);
    ck_assert_int_eq(kv_explain_seek(db, "a", 1, "b", 1, NULL), KV_EINVAL);
    close_db(db);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("scanfilter_store");
    TCase *tc = test_tcase(s, "counters", 60, 1);
    tcase_add_test(tc, range_queries_count_positionings);
    tcase_add_test(tc, empty_ranges_skip_tables);
    tcase_add_test(tc, useless_filters_asked_less);
    tcase_add_test(tc, prefix_gate_skips_absent_prefixes);
    tcase_add_test(tc, prefix_gate_keyed);
    tc = test_tcase(s, "answers", 120, 1);
    tcase_add_test(tc, random_ranges_match_the_model);
    tcase_add_test(tc, levels_match_the_model);
    tc = test_tcase(s, "explain", 60, 1);
    tcase_add_test(tc, explain_seek_shows_each_table);
    return s;
}
