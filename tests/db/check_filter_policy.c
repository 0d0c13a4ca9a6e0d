/* check_filter_policy.c - kv_options.filter_policy through kv.h: with
 * KV_FILTER_MONKEY each table's filter gets the bits its level earns
 * (kv_bloom_allocate over the tree's runs), at the memory of the uniform
 * policy, with fewer false positives per missing get, expected and
 * measured; the bits are recorded per table and survive reopen; answers
 * never change. */
#define _XOPEN_SOURCE 700
#include <check.h>
#include <ftw.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kv/bloom.h>
#include <kv/kv.h>

#include "fixture.h"

/* ---- fixture: one temporary directory per test ------------------------------------ */

/* Small tables and levels, so that 196,000 keys (23 MB) make a tree of
 * four levels: level 0 (tables of 256 KiB memtables), 1 (1 MiB), 2 (10
 * MiB) and 3 (the rest); tables of 256 KiB hold some 2,000 keys, so that
 * rounding a filter up to whole 512-bit blocks adds at most 0.25 bits
 * per key. fill() flushes every 1,400 keys, 140 times in all: level 0
 * ends with 4 tables (140 mod 8), as many as Monkey's allocation counts on
 * (l0_compaction_trigger / 2); each one more or less moves the memory by
 * about 1% (level 0's tables are small runs: some 20 bits per key). */
static void small_tree(kv_options *o, int policy)
{
    kv_options_init(o);
    o->write_buffer_size = (size_t)256 << 10;
    o->target_file_size = (size_t)256 << 10;
    o->max_bytes_for_level_base = (size_t)1 << 20;
    o->compression = KV_COMPRESSION_NONE;
    o->filter_policy = policy;
    o->idle_compaction_ms = 0; /* level 0 keeps its 4 tables: no idle merge */
}

#define KEYS 196000u

static void wait_idle(kv_db *db)
{
    for (;;) {
        struct kv_stats s;
        ck_assert_int_eq(kv_stats(db, &s), KV_OK);
        if (!s.compaction_pending && !s.compaction_running)
            return;
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
}

static void fill(kv_db *db)
{
    char k[17], v[100];
    for (uint64_t i = 0; i < KEYS; i++) {
        key_of_hex(k, i * 2);
        for (size_t j = 0; j < sizeof v; j += 8) {
            uint64_t x = splitmix(i * 131 + j);
            memcpy(v + j, &x, sizeof v - j < 8 ? sizeof v - j : 8);
        }
        ck_assert_int_eq(kv_put(db, k, 16, v, sizeof v), KV_OK);
        /* a memtable's worth at a time, flushed and compacted before the
         * next (as kvbench's fillsettled): the tree's shape depends on the
         * keys alone, the same under both policies */
        if ((i + 1) % 1400 == 0) {
            ck_assert_int_eq(kv_flush(db), KV_OK);
            wait_idle(db);
        }
    }
    ck_assert_int_eq(kv_flush(db), KV_OK);
    wait_idle(db);
}

/* What the live tables say of the filters. */
struct shape {
    int levels;                  /* deepest level + 1 */
    double bits[7];              /* per level: filter bits / filter keys */
    uint64_t keys[7];            /* filter keys per level */
    double filter_bits, filter_keys;
    double expected_fp;          /* per missing get: each level-0 table, one table per level */
    size_t tables;
};

static void shape_of(kv_db *db, struct shape *sh)
{
    memset(sh, 0, sizeof *sh);
    kv_table_stats *t;
    size_t n;
    ck_assert_int_eq(kv_table_stats_get(db, &t, &n), KV_OK);
    double fbits[7] = {0}, fpr_keys[7] = {0};
    uint64_t entries[7] = {0};
    for (size_t i = 0; i < n; i++) {
        unsigned l = t[i].level;
        ck_assert_uint_lt(l, 7);
        double b = t[i].bits_per_key * (double)t[i].filter_keys;
        fbits[l] += b;
        sh->keys[l] += t[i].filter_keys;
        sh->filter_bits += b;
        sh->filter_keys += (double)t[i].filter_keys;
        entries[l] += t[i].entries;
        if (l == 0)
            sh->expected_fp += t[i].expected_fpr;
        else
            fpr_keys[l] += t[i].expected_fpr * (double)t[i].entries;
        if (getenv("KV_TEST_VERBOSE") && getenv("KV_TEST_TABLES"))
            fprintf(stderr, "  L%u #%llu %llu keys %.2f bits\n", l,
                    (unsigned long long)t[i].number, (unsigned long long)t[i].filter_keys,
                    t[i].bits_per_key);
        if ((int)l + 1 > sh->levels)
            sh->levels = (int)l + 1;
    }
    for (int l = 0; l < 7; l++) {
        sh->bits[l] = sh->keys[l] ? fbits[l] / (double)sh->keys[l] : 0;
        if (l > 0 && entries[l])
            sh->expected_fp += fpr_keys[l] / (double)entries[l];
    }
    sh->tables = n;
    kv_free(t);
}

/* False positives per missing get, measured over `n` keys never written. */
static double measured_fp(kv_db *db, unsigned n)
{
    struct kv_stats a, b;
    ck_assert_int_eq(kv_stats(db, &a), KV_OK);
    char k[17];
    for (unsigned i = 0; i < n; i++) {
        key_of_hex(k, i * 2 + 1);
        void *v;
        size_t vl;
        ck_assert_int_eq(kv_get(db, k, 16, &v, &vl), KV_NOTFOUND);
    }
    ck_assert_int_eq(kv_stats(db, &b), KV_OK);
    return (double)(b.filter_positives - a.filter_positives) / n;
}

/* Over the gets so far (the missing ones of measured_fp): the false
 * positives the tables' filters let through, what their expected FPRs
 * predict for the probes each table had, and what 10 bits per key in every
 * table would predict for the same probes. */
struct probes {
    double measured, expected, uniform_here;
};

static void probes_of(kv_db *db, unsigned gets, struct probes *p)
{
    kv_table_stats *t;
    size_t n;
    ck_assert_int_eq(kv_table_stats_get(db, &t, &n), KV_OK);
    memset(p, 0, sizeof *p);
    for (size_t i = 0; i < n; i++) {
        p->measured += (double)t[i].filter_false_positives;
        p->expected += (double)t[i].probes * t[i].expected_fpr;
        p->uniform_here += (double)t[i].probes * kv_bloom_fpr_at(KV_BLOOM_BLOCKED, 10);
    }
    kv_free(t);
    p->measured /= gets;
    p->expected /= gets;
    p->uniform_here /= gets;
}

/* The same keys, written alike, make the same tree under both policies
 * (fill: the same tables probed per get). Monkey's filters take the same
 * memory (within 3%), its upper levels have more bits per key than the
 * deepest, and its false positives per missing get are at most three
 * quarters of uniform's, measured, and on its own tree below what 10 bits
 * in every table would give for the same probes; under both policies the
 * false positives measured agree with those the probed tables' filters
 * predict. Every key is found. */
START_TEST(monkey_beats_uniform_at_equal_memory)
{
    kv_options o;
    struct shape sh[2];
    struct probes pr[2];
    for (int p = 0; p < 2; p++) {
        small_tree(&o, p ? KV_FILTER_MONKEY : KV_FILTER_UNIFORM);
        kv_db *db = open_db(p ? "monkey" : "uniform", &o);
        fill(db);
        shape_of(db, &sh[p]);
        double fp = measured_fp(db, 40000);
        probes_of(db, 40000, &pr[p]);
        ck_assert_double_eq_tol(fp, pr[p].measured, 1e-9); /* the counters agree */
        char k[17];
        for (uint64_t i = 0; i < KEYS; i += 7) {
            key_of_hex(k, i * 2);
            void *v;
            size_t vl;
            ck_assert_int_eq(kv_get(db, k, 16, &v, &vl), KV_OK);
            kv_free(v);
        }
        close_db(db);
        if (getenv("KV_TEST_VERBOSE"))
            fprintf(stderr,
                    "%s: %zu tables, bits per level %.2f %.2f %.2f %.2f, memory %.3f bits/key; "
                    "false positives per missing get: measured %.4f, expected %.4f, "
                    "at 10 bits everywhere %.4f\n",
                    p ? "monkey" : "uniform", sh[p].tables, sh[p].bits[0], sh[p].bits[1],
                    sh[p].bits[2], sh[p].bits[3], sh[p].filter_bits / sh[p].filter_keys,
                    pr[p].measured, pr[p].expected, pr[p].uniform_here);
    }
    const struct shape *u = &sh[0], *m = &sh[1];
    ck_assert_int_ge(m->levels, 3);
    /* uniform: every table at 10 bits, but for rounding up to whole
     * 512-bit blocks (which a compaction's small last table feels most) */
    for (int l = 0; l < u->levels; l++)
        if (u->keys[l])
            ck_assert_double_eq_tol(u->bits[l], 10, 0.5);
    /* The small runs get the bits: each level-0 table, then level 1, far
     * above the deepest level, which holds most keys. */
    int deepest = m->levels - 1, first = 1; /* the shallowest level below 0 with keys */
    while (first < deepest && !m->keys[first])
        first++;
    ck_assert_int_lt(first, deepest);
    ck_assert_double_gt(m->bits[first], m->bits[deepest] + 1.5);
    if (m->keys[0])
        ck_assert_double_gt(m->bits[0], m->bits[first] + 3);
    double mem_u = u->filter_bits / u->filter_keys, mem_m = m->filter_bits / m->filter_keys;
    ck_assert_msg(fabs(mem_m - mem_u) <= 0.03 * mem_u, "memory: monkey %.3f, uniform %.3f bits/key",
                  mem_m, mem_u);
    ck_assert_msg(pr[1].measured < 0.75 * pr[0].measured, "measured: monkey %.4f, uniform %.4f",
                  pr[1].measured, pr[0].measured);
    ck_assert_msg(pr[1].expected < 0.75 * pr[1].uniform_here, "expected %.4f, uniform here %.4f",
                  pr[1].expected, pr[1].uniform_here);
    /* some 500 false positives over 40,000 gets: +-20% is over 4 sigma */
    for (int p = 0; p < 2; p++)
        ck_assert_msg(fabs(pr[p].measured - pr[p].expected) < 0.2 * pr[p].expected,
                      "policy %d: measured %.4f, expected %.4f", p, pr[p].measured,
                      pr[p].expected);
}
END_TEST

/* Each table keeps the bits it was built with: after reopen the same
 * tables have the same filters (nothing is rebuilt at open), and the
 * uniform options may open a Monkey database (and go on uniformly). */
START_TEST(bits_are_per_table_and_survive_reopen)
{
    kv_options o;
    small_tree(&o, KV_FILTER_MONKEY);
    kv_db *db = open_db("db", &o);
    fill(db);
    kv_table_stats *a, *b;
    size_t na, nb;
    ck_assert_int_eq(kv_table_stats_get(db, &a, &na), KV_OK);
    close_db(db);
    o.filter_policy = KV_FILTER_UNIFORM;
    db = open_db("db", &o);
    ck_assert_int_eq(kv_table_stats_get(db, &b, &nb), KV_OK);
    /* the same tables, and one more when open flushed what the log held */
    int differ = 0;
    size_t same = 0;
    for (size_t i = 0; i < na; i++)
        for (size_t j = 0; j < nb; j++)
            if (a[i].number == b[j].number) {
                same++;
                ck_assert_double_eq(a[i].bits_per_key, b[j].bits_per_key);
                ck_assert_uint_eq(a[i].k, b[j].k);
                ck_assert_uint_eq(a[i].level, b[j].level);
                differ += fabs(a[i].bits_per_key - 10) > 1;
            }
    ck_assert_uint_eq(same, na);
    ck_assert_uint_le(nb, na + 1);
    ck_assert_int_gt(differ, 0);
    kv_free(b);
    /* tables written under the uniform policy get 10 bits again (those
     * compact_range leaves alone keep theirs) */
    ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 0), KV_OK);
    ck_assert_int_eq(kv_table_stats_get(db, &b, &nb), KV_OK);
    uint64_t fresh = 0;
    double fresh_bits = 0;
    for (size_t i = 0; i < nb; i++) {
        int old = 0;
        for (size_t j = 0; j < na; j++)
            old |= a[j].number == b[i].number;
        if (!old) {
            fresh += b[i].filter_keys;
            fresh_bits += b[i].bits_per_key * (double)b[i].filter_keys;
        }
    }
    ck_assert_uint_gt(fresh, 0);
    ck_assert_double_eq_tol(fresh_bits / (double)fresh, 10, 0.25);
    kv_free(a);
    kv_free(b);
    close_db(db);
}
END_TEST

/* With bloom_bits_per_key 0 Monkey has nothing to share: no filters. */
START_TEST(no_bits_no_filters)
{
    kv_options o;
    small_tree(&o, KV_FILTER_MONKEY);
    o.bloom_bits_per_key = 0;
    kv_db *db = open_db("db", &o);
    char k[17];
    for (uint64_t i = 0; i < 20000; i++) {
        key_of_hex(k, i * 2);
        ck_assert_int_eq(kv_put(db, k, 16, "v", 1), KV_OK);
    }
    wait_idle(db);
    kv_table_stats *t;
    size_t n;
    ck_assert_int_eq(kv_table_stats_get(db, &t, &n), KV_OK);
    ck_assert_uint_gt(n, 0);
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(t[i].filter_layout, -1);
    kv_free(t);
    close_db(db);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("filter_policy");
    TCase *tc = tcase_create("monkey");
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, monkey_beats_uniform_at_equal_memory);
    tcase_add_test(tc, bits_are_per_table_and_survive_reopen);
    tcase_add_test(tc, no_bits_no_filters);
    suite_add_tcase(s, tc);
    return s;
}
