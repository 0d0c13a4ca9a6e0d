/* check_tablemem.c - kv_options.table_memory_budget: a database whose
 * tables' indexes and filters do not all fit the budget pages some of them
 * through the block cache (kv/tablemem.c, sstable/paged.c) and answers
 * exactly as one that keeps them all.
 *
 *   model   ~200k keys in many tables under a 64 KiB budget: every get and
 *           a whole scan equal a model; indexes and filters are paged; the
 *           memory kept is within the bound doc/database.md states.
 *   filters the same missing-key gets on the same database, reopened
 *           without a budget and with one that pages filters: the same
 *           filter checks, negatives and false positives.
 *   threads readers (gets and scans against a model) while a writer's
 *           flushes and compactions move tables between kept and paged
 *           (label concurrency: the ThreadSanitizer pass). */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kv/kv.h>

#include "fixture.h"

#define NKEYS 200000u /* keys written: the even numbers below 2 * NKEYS */
#define BUDGET (64u << 10)

static void small_tables(kv_options *o, size_t budget)
{
    kv_options_init(o);
    o->write_buffer_size = 256 << 10;
    o->target_file_size = 128 << 10;
    o->block_cache_size = 1 << 20;
    o->table_memory_budget = budget;
}

static size_t key(char *k, uint64_t i)
{
    return key_of(k, 32, "k", 10, i);
}

/* Key 2i's value at generation g (0: absent). */
static size_t value(char *v, uint64_t i, int g)
{
    return (size_t)snprintf(v, 64, "value-%llu-gen-%d-padding-padding", (unsigned long long)i, g);
}

/* Writes the model's keys: every even key, then every fifth overwritten
 * and every seventh deleted; gen[i] is key 2i's generation (0: absent). */
static void fill(kv_db *db, int *gen)
{
    char k[32], v[64];
    for (uint64_t i = 0; i < NKEYS; i++) {
        uint64_t j = splitmix(i) % NKEYS; /* in no order: tables overlap, levels fill */
        size_t kl = key(k, 2 * j);
        if (gen[j] == 0) {
            gen[j] = 1;
            put_kv(db, k, kl, v, value(v, j, 1));
        }
    }
    for (uint64_t j = 0; j < NKEYS; j++) {
        if (gen[j] == 0) {
            gen[j] = 1;
            put_kv(db, k, key(k, 2 * j), v, value(v, j, 1));
        }
        if (j % 5 == 0) {
            gen[j] = 2;
            put_kv(db, k, key(k, 2 * j), v, value(v, j, 2));
        }
        if (j % 7 == 0) {
            gen[j] = 0;
            ck_assert_int_eq(kv_delete(db, k, key(k, 2 * j)), KV_OK);
        }
    }
}

static void check_model(kv_db *db, const int *gen)
{
    char k[32], v[64];
    for (uint64_t j = 0; j < NKEYS; j++) {
        size_t kl = key(k, 2 * j);
        if (gen[j])
            expect_value(db, k, kl, v, value(v, j, gen[j]));
        else
            expect_absent(db, k, kl);
        if (j % 10 == 0)
            expect_absent(db, k, key(k, 2 * j + 1));
    }
    kv_iter *it;
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    uint64_t j = 0;
    for (kv_iter_seek_first(it); kv_iter_valid(it); kv_iter_next(it)) {
        while (j < NKEYS && !gen[j])
            j++;
        ck_assert_uint_lt(j, NKEYS);
        size_t kl, vl;
        const void *ik = kv_iter_key(it, &kl), *iv = kv_iter_value(it, &vl);
        size_t wkl = key(k, 2 * j), wvl = value(v, j, gen[j]);
        ck_assert(kl == wkl && memcmp(ik, k, kl) == 0);
        ck_assert(vl == wvl && memcmp(iv, v, vl) == 0);
        j++;
    }
    ck_assert_int_eq(kv_iter_status(it), KV_OK);
    while (j < NKEYS && !gen[j])
        j++;
    ck_assert_uint_eq(j, NKEYS);
    kv_iter_free(it);
}

/* The choice follows each install on the background thread: a test that
 * looks right after one waits (at most 5 s) until it has paged. */
static void wait_paged(kv_db *db, struct kv_stats *s, size_t budget)
{
    for (int i = 0; i < 500; i++) {
        get_stats(db, s);
        if (s->table_memory_bytes <= budget && s->tables_index_paged > 0)
            return;
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    }
}

/* The bound doc/database.md states, once the choice after the last
 * install has run and no reader holds what it paged: the budget, plus
 * (for a choice that raced with the stats) one table's index and filter. */
static uint64_t one_table(kv_db *db)
{
    kv_table_stats *t;
    size_t n;
    ck_assert_int_eq(kv_table_stats_get(db, &t, &n), KV_OK);
    uint64_t most = 0;
    for (size_t i = 0; i < n; i++)
        if (t[i].filter_bytes > most)
            most = t[i].filter_bytes;
    kv_free(t);
    struct kv_stats s;
    get_stats(db, &s);
    return most + (s.tables ? 2 * s.index_bytes / s.tables : 0);
}

START_TEST(model)
{
    kv_options o;
    small_tables(&o, BUDGET);
    kv_db *db = open_db("db", &o);
    int *gen = calloc(NKEYS, sizeof *gen);
    ck_assert_ptr_nonnull(gen);
    fill(db, gen);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    struct kv_stats s;
    wait_paged(db, &s, BUDGET);
    ck_assert_uint_gt(s.tables, 8);
    ck_assert_uint_gt(s.index_bytes + s.filter_bytes, 4 * BUDGET);
    ck_assert_uint_gt(s.tables_index_paged, 0);
    ck_assert_uint_gt(s.tables_filter_paged, 0);
    ck_assert_uint_le(s.table_memory_bytes, BUDGET + one_table(db));
    check_model(db, gen);
    get_stats(db, &s);
    ck_assert_uint_gt(s.index_block_reads, 0);
    ck_assert_uint_gt(s.filter_block_reads, 0);
    /* Reopened, the tables open kept and the first choice pages them. */
    db = reopen_db(db, "db", &o);
    wait_paged(db, &s, BUDGET);
    ck_assert_uint_le(s.table_memory_bytes, BUDGET + one_table(db));
    ck_assert_uint_gt(s.tables_index_paged, 0);
    check_model(db, gen);
    /* Without a budget nothing is paged, and everything is kept. */
    small_tables(&o, 0);
    db = reopen_db(db, "db", &o);
    get_stats(db, &s);
    ck_assert_uint_eq(s.tables_index_paged + s.tables_filter_paged, 0);
    ck_assert_uint_eq(s.index_block_reads + s.filter_block_reads, 0);
    ck_assert_uint_ge(s.table_memory_bytes, s.filter_bytes);
    check_model(db, gen);
    close_db(db);
    free(gen);
}
END_TEST

/* The filter counters of n missing-key gets on db. */
static void missing_gets(kv_db *db, uint64_t n, struct kv_stats *s)
{
    char k[32];
    for (uint64_t i = 0; i < n; i++) {
        uint64_t j = splitmix(i + 12345) % NKEYS;
        expect_absent(db, k, key(k, 2 * j + 1));
    }
    get_stats(db, s);
}

START_TEST(filters)
{
    kv_options o;
    small_tables(&o, 0);
    kv_db *db = open_db("db", &o);
    int *gen = calloc(NKEYS, sizeof *gen);
    ck_assert_ptr_nonnull(gen);
    fill(db, gen);
    compact_all(db);
    struct kv_stats kept, paged;
    db = reopen_db(db, "db", &o);
    missing_gets(db, 50000, &kept);
    /* A budget below the filters alone: every index and some filters paged. */
    small_tables(&o, 16 << 10);
    db = reopen_db(db, "db", &o);
    wait_paged(db, &paged, 16 << 10);
    ck_assert_uint_gt(paged.tables_filter_paged, 0);
    ck_assert_uint_eq(paged.tables, kept.tables);
    missing_gets(db, 50000, &paged);
    ck_assert_uint_gt(kept.filter_negatives, 0);
    ck_assert_uint_eq(paged.filter_negatives, kept.filter_negatives);
    ck_assert_uint_eq(paged.filter_positives, kept.filter_positives);
    ck_assert_uint_eq(paged.filter_false_positives, kept.filter_false_positives);
    ck_assert_uint_gt(paged.filter_block_reads, 0);
    close_db(db);
    free(gen);
}
END_TEST

/* ---- readers while tables move -------------------------------------------------------- */

#define TKEYS 20000u /* the readers' keys: "k" keys 2i, fixed */

struct shared {
    kv_db *db;
    atomic_int done;
    atomic_ullong reads, wrong;
};

static void *reader(void *arg)
{
    struct shared *sh = arg;
    char k[32], v[64];
    uint64_t x = (uint64_t)(uintptr_t)&k;
    for (uint64_t n = 0; !atomic_load(&sh->done) || n < 2000; n++) {
        uint64_t j = splitmix(x + n) % TKEYS;
        void *got = NULL;
        size_t gl = 0;
        int rc = kv_get(sh->db, k, key(k, 2 * j), &got, &gl);
        size_t vl = value(v, j, 1);
        if (rc != KV_OK || gl != vl || memcmp(got, v, vl) != 0)
            atomic_fetch_add(&sh->wrong, 1);
        kv_free(got);
        if (kv_get(sh->db, k, key(k, 2 * j + 1), &got, &gl) != KV_NOTFOUND)
            atomic_fetch_add(&sh->wrong, 1);
        /* The writer's keys too: its new tables are used (and kept or
         * paged by their use) while they move. */
        rc = kv_get(sh->db, k, key_of(k, sizeof k, "w", 10, splitmix(x ^ n) % 100000), &got, &gl);
        if (rc != KV_OK && rc != KV_NOTFOUND)
            atomic_fetch_add(&sh->wrong, 1);
        kv_free(got);
        if (n % 64 == 0) { /* a short scan from key 2j */
            kv_iter *it;
            if (kv_iter_new(sh->db, NULL, &it) != KV_OK) {
                atomic_fetch_add(&sh->wrong, 1);
                continue;
            }
            kv_iter_seek(it, k, key(k, 2 * j));
            for (uint64_t i = j; i < j + 16 && i < TKEYS; i++, kv_iter_next(it)) {
                size_t kl, il, wk = key(k, 2 * i), wv = value(v, i, 1);
                const void *ik = kv_iter_valid(it) ? kv_iter_key(it, &kl) : NULL;
                const void *iv = ik ? kv_iter_value(it, &il) : NULL;
                if (!ik || kl != wk || memcmp(ik, k, kl) != 0 || il != wv ||
                    memcmp(iv, v, il) != 0) {
                    atomic_fetch_add(&sh->wrong, 1);
                    break;
                }
            }
            if (kv_iter_status(it) != KV_OK)
                atomic_fetch_add(&sh->wrong, 1);
            kv_iter_free(it);
        }
        atomic_fetch_add(&sh->reads, 1);
    }
    return NULL;
}

/* Keys after the readers' ("w" keys): flushes and compactions that move
 * the tables, and with them what is kept and what paged. */
static void *writer(void *arg)
{
    struct shared *sh = arg;
    char k[32], v[64];
    for (uint64_t i = 0; i < 40000; i++) {
        size_t kl = key_of(k, sizeof k, "w", 10, splitmix(i) % 100000);
        if (kv_put(sh->db, k, kl, v, value(v, i, 3)) != KV_OK)
            atomic_fetch_add(&sh->wrong, 1);
        if (i % 15000 == 14999 && kv_compact_range(sh->db, NULL, 0, NULL, 0) != KV_OK)
            atomic_fetch_add(&sh->wrong, 1);
    }
    atomic_store(&sh->done, 1);
    return NULL;
}

START_TEST(threads)
{
    kv_options o;
    /* A budget that keeps some tables' indexes: which ones changes with
     * their use and with each install. */
    small_tables(&o, 24 << 10);
    o.write_buffer_size = 128 << 10;
    o.block_cache_size = 256 << 10;
    struct shared *sh = calloc(1, sizeof *sh);
    ck_assert_ptr_nonnull(sh);
    sh->db = open_db("db", &o);
    char k[32], v[64];
    for (uint64_t j = 0; j < TKEYS; j++)
        put_kv(sh->db, k, key(k, 2 * j), v, value(v, j, 1));
    ck_assert_int_eq(kv_flush(sh->db), KV_OK);
    pthread_t w, r[3];
    ck_assert_int_eq(pthread_create(&w, NULL, writer, sh), 0);
    for (int j = 0; j < 3; j++)
        ck_assert_int_eq(pthread_create(&r[j], NULL, reader, sh), 0);
    pthread_join(w, NULL);
    for (int j = 0; j < 3; j++)
        pthread_join(r[j], NULL);
    ck_assert_uint_eq(atomic_load(&sh->wrong), 0);
    ck_assert_uint_gt(atomic_load(&sh->reads), 0);
    struct kv_stats s;
    get_stats(sh->db, &s);
    ck_assert_uint_gt(s.index_block_reads, 0);
    close_db(sh->db);
    free(sh);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("tablemem");
    TCase *tc = test_tcase(s, "model", 120, 1);
    tcase_add_test(tc, model);
    tc = test_tcase(s, "filters", 120, 1);
    tcase_add_test(tc, filters);
    tc = test_tcase(s, "threads", 300, 1);
    tcase_add_test(tc, threads);
    return s;
}
