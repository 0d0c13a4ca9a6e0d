/* check_jobs.c - background jobs (kv_options.max_background_jobs,
 * doc/database.md "Background jobs"): flushes on a thread of their own,
 * compactions of disjoint tables at once, a large compaction cut into as
 * many parts as jobs are free.
 *
 * "stress" runs 8 jobs (on whatever cores there are: 2 in CI, so the
 * threads are oversubscribed) under writers, readers and kv_compact_range
 * calls, with a small write buffer and small tables so that many
 * compactions are due together; every read must return a value written to
 * its key, and at the end every key must hold what the model says, before
 * and after a reopen. Which compactions overlap depends on the scheduler:
 * the workload is repeated (at most ROUNDS times, on the same database)
 * until kv_stats has seen two compactions run at once, and the test fails
 * only if that never happened. "one" runs the same with one job: never two
 * compactions at once. Labelled concurrency: CI runs it under TSan. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fixture.h"

#define WRITERS 4
#define READERS 2
#define KEYS 5000 /* per writer */
#define OPS 3000  /* per writer and round */
#define ROUNDS 8  /* at most, until two compactions ran at once */
#define VALUE_MAX 300

/* The model: the version each key's last write left (0: absent). Each
 * writer owns its keys, so its own order is the order of their writes. */
static uint32_t model[WRITERS][KEYS];

struct run {
    kv_db *db;
    unsigned round;
    _Atomic int writers_left;
    _Atomic unsigned long reads;
    _Atomic int bad; /* a read returned a value not written to its key */
    char bad_text[256];
};

static size_t make_key(char *k, size_t cap, unsigned t, uint32_t i)
{
    return (size_t)snprintf(k, cap, "w%u/%05u", t, (unsigned)i);
}

/* Version ver of key (t, i): "<key>=<ver>;" and filler up to a length
 * drawn from the three. */
static size_t make_value(char *v, unsigned t, uint32_t i, uint32_t ver)
{
    int n = snprintf(v, VALUE_MAX, "w%u/%05u=%u;", t, (unsigned)i, (unsigned)ver);
    size_t len = 40 + splitmix(((uint64_t)t << 48) ^ ((uint64_t)i << 20) ^ ver) % 240;
    uint64_t x = ver; /* filler that does not compress: the tables stay large */
    for (size_t j = (size_t)n; j < len; j++) {
        x = splitmix(x);
        v[j] = (char)(' ' + x % 95);
    }
    return len;
}

struct writer {
    struct run *r;
    unsigned t;
};

static void *writer_main(void *arg)
{
    struct writer *w = arg;
    kv_db *db = w->r->db;
    char k[32], v[VALUE_MAX];
    uint64_t x = splitmix(w->t * 1000003u + w->r->round);
    for (uint32_t op = 0; op < OPS; op++) {
        x = splitmix(x);
        uint32_t i = (uint32_t)(x % KEYS);
        size_t kl = make_key(k, sizeof k, w->t, i);
        int rc;
        if ((x >> 32) % 8 == 0) {
            rc = kv_delete(db, k, kl);
            model[w->t][i] = 0;
        } else {
            uint32_t ver = w->r->round * OPS + op + 1;
            rc = kv_put(db, k, kl, v, make_value(v, w->t, i, ver));
            model[w->t][i] = ver;
        }
        ck_assert_msg(rc == KV_OK, "write of %s: %s (%s)", k, kv_strerror(rc), kv_error_text());
    }
    atomic_fetch_sub(&w->r->writers_left, 1);
    return NULL;
}

/* Reads random keys until the writers are done: a value found must be one
 * written to that key. */
static void *reader_main(void *arg)
{
    struct run *r = arg;
    uint64_t x = splitmix((uint64_t)(uintptr_t)&x ^ r->round);
    char k[32], want[32];
    while (atomic_load(&r->writers_left) > 0) {
        x = splitmix(x);
        unsigned t = (unsigned)(x % WRITERS);
        uint32_t i = (uint32_t)((x >> 8) % KEYS);
        size_t kl = make_key(k, sizeof k, t, i);
        void *v;
        size_t vl;
        int rc = kv_get(r->db, k, kl, &v, &vl);
        if (rc == KV_OK) {
            int n = snprintf(want, sizeof want, "%s=", k);
            if (vl < (size_t)n || memcmp(v, want, (size_t)n) != 0) {
                snprintf(r->bad_text, sizeof r->bad_text, "%s read %.*s", k,
                         (int)(vl < 40 ? vl : 40), (const char *)v);
                atomic_store(&r->bad, 1);
            }
            kv_free(v);
        } else if (rc != KV_NOTFOUND) {
            snprintf(r->bad_text, sizeof r->bad_text, "%s: %s", k, kv_strerror(rc));
            atomic_store(&r->bad, 1);
        }
        /* Readers that never paused would take the cores from the
         * background threads (niced on small machines) and the writers. */
        if (atomic_fetch_add(&r->reads, 1) % 16 == 15) {
            struct timespec pause = {0, 200000};
            nanosleep(&pause, NULL);
        }
    }
    return NULL;
}

/* A writer-side caller of kv_compact_range over one writer's keys, twice
 * per round: the flush thread then runs it alone (the jobs drained). */
static void *ranger_main(void *arg)
{
    struct run *r = arg;
    for (int j = 0; j < 2 && atomic_load(&r->writers_left) > 0; j++) {
        char lo[32], hi[32];
        unsigned t = (r->round + (unsigned)j) % WRITERS;
        size_t ll = make_key(lo, sizeof lo, t, 0), hl = make_key(hi, sizeof hi, t, KEYS);
        int rc = kv_compact_range(r->db, lo, ll, hi, hl);
        ck_assert_msg(rc == KV_OK, "kv_compact_range: %s (%s)", kv_strerror(rc), kv_error_text());
    }
    return NULL;
}

static void run_round(kv_db *db, unsigned round)
{
    struct run r = {.db = db, .round = round, .writers_left = WRITERS};
    pthread_t w[WRITERS], rd[READERS], rg;
    struct writer ws[WRITERS];
    for (unsigned t = 0; t < WRITERS; t++) {
        ws[t] = (struct writer){&r, t};
        ck_assert_int_eq(pthread_create(&w[t], NULL, writer_main, &ws[t]), 0);
    }
    for (int i = 0; i < READERS; i++)
        ck_assert_int_eq(pthread_create(&rd[i], NULL, reader_main, &r), 0);
    ck_assert_int_eq(pthread_create(&rg, NULL, ranger_main, &r), 0);
    for (unsigned t = 0; t < WRITERS; t++)
        pthread_join(w[t], NULL);
    for (int i = 0; i < READERS; i++)
        pthread_join(rd[i], NULL);
    pthread_join(rg, NULL);
    ck_assert_msg(!atomic_load(&r.bad), "a read during round %u: %s", round, r.bad_text);
}

/* Every key as the model says, by Get and by a scan. */
static void check_model(kv_db *db)
{
    char k[32], v[VALUE_MAX];
    size_t present = 0;
    for (unsigned t = 0; t < WRITERS; t++)
        for (uint32_t i = 0; i < KEYS; i++) {
            size_t kl = make_key(k, sizeof k, t, i);
            if (model[t][i]) {
                expect_value(db, k, kl, v, make_value(v, t, i, model[t][i]));
                present++;
            } else {
                expect_absent(db, k, kl);
            }
        }
    kv_iter *it;
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    size_t n = 0;
    for (kv_iter_seek_first(it); kv_iter_valid(it); kv_iter_next(it))
        n++;
    ck_assert_int_eq(kv_iter_status(it), KV_OK);
    kv_iter_free(it);
    ck_assert_uint_eq(n, present);
}

static void jobs_options(kv_options *o, int jobs)
{
    kv_options_init(o);
    o->max_background_jobs = jobs;
    o->write_buffer_size = 64u << 10;
    o->target_file_size = 64u << 10;
    o->max_bytes_for_level_base = 256u << 10;
    o->dynamic_level_bytes = 0;   /* levels 1, 2 and 3 fill within a few rounds */
    o->l0_compaction_trigger = 4; /* level 0 down leaves level 1 well over its size: */
    o->block_size = 1024;         /* several of its tables then go down at once */
}

/* Waits until no compaction is due or runs (the jobs' catch-up after the
 * writes, where most of them overlap); *s the stats then. */
static void settle(kv_db *db, struct kv_stats *s)
{
    for (int i = 0; i < 60000; i++) {
        get_stats(db, s);
        if (!s->compaction_pending && !s->compaction_running)
            return;
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    ck_abort_msg("compactions still pending after a minute");
}

/* Rounds of the workload until two compactions ran at once (at most
 * ROUNDS); then the model, closed and reopened. Returns the stats seen. */
static void run_jobs(int jobs, struct kv_stats *s)
{
    kv_options o;
    jobs_options(&o, jobs);
    memset(model, 0, sizeof model);
    kv_db *db = open_db("db", &o);
    unsigned round = 0;
    do {
        run_round(db, round++);
        settle(db, s);
    } while (round < ROUNDS && s->compactions_parallel_max < 2 && jobs > 1);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    check_model(db);
    ck_assert_uint_eq(s->background_jobs, (uint64_t)jobs);
    db = reopen_db(db, "db", &o);
    check_model(db);
    compact_all(db);
    check_model(db);
    struct kv_stats after;
    get_stats(db, &after);
    s->subcompactions = after.subcompactions;
    close_db(db);
}

START_TEST(test_stress)
{
    struct kv_stats s;
    run_jobs(8, &s);
    ck_assert_msg(s.compactions_parallel_max >= 2,
                  "no two compactions ran at once in %d rounds (%llu compactions)", ROUNDS,
                  (unsigned long long)s.compactions);
    ck_assert_uint_le(s.compactions_parallel_max, 8);
}
END_TEST

START_TEST(test_one)
{
    struct kv_stats s;
    run_jobs(1, &s);
    ck_assert_uint_eq(s.compactions_parallel_max, 1);
    ck_assert_uint_gt(s.compactions, 0);
}
END_TEST

/* A large compaction cut into parts: level 0 of many tables merged down
 * by kv_compact_range, with every job free. */
START_TEST(test_parts)
{
    kv_options o;
    jobs_options(&o, 4);
    o.l0_compaction_trigger = 1000; /* level 0 grows; kv_compact_range takes it */
    o.l0_slowdown_trigger = o.l0_stop_trigger = 2000;
    kv_db *db = open_db("db", &o);
    char k[32], v[VALUE_MAX];
    for (uint32_t i = 0; i < 4000; i++) {
        size_t kl = make_key(k, sizeof k, i % WRITERS, i / WRITERS);
        put_kv(db, k, kl, v, make_value(v, i % WRITERS, i / WRITERS, 1));
        if (i % 500 == 499) /* tables spread over the key space */
            ck_assert_int_eq(kv_flush(db), KV_OK);
    }
    compact_all(db); /* level 0 into level 1: several tables */
    for (uint32_t i = 0; i < 4000; i++) {
        size_t kl = make_key(k, sizeof k, i % WRITERS, i / WRITERS);
        put_kv(db, k, kl, v, make_value(v, i % WRITERS, i / WRITERS, 2));
        if (i % 500 == 499)
            ck_assert_int_eq(kv_flush(db), KV_OK);
    }
    compact_all(db); /* ... and again over them: cut at level 1's tables */
    struct kv_stats s;
    get_stats(db, &s);
    ck_assert_uint_gt(s.subcompactions, 0);
    ck_assert_uint_eq(s.compactions_running, 0);
    ck_assert_uint_eq(s.flushes_running, 0);
    for (uint32_t i = 0; i < 4000; i++) {
        size_t kl = make_key(k, sizeof k, i % WRITERS, i / WRITERS);
        expect_value(db, k, kl, v, make_value(v, i % WRITERS, i / WRITERS, 2));
    }
    close_db(db);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("jobs");
    TCase *tc = test_tcase(s, "stress", 600, 1);
    tcase_add_test(tc, test_stress);
    tc = test_tcase(s, "one", 300, 1);
    tcase_add_test(tc, test_one);
    tc = test_tcase(s, "parts", 300, 1);
    tcase_add_test(tc, test_parts);
    return s;
}
