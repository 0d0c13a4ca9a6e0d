/* check_ttl.c - kv_options.ttl_seconds through kv.h: a put or merge written
 * more than ttl_seconds ago is never returned by kv_get, kv_get_into,
 * kv_get_at, kv_multi_get or an iterator (either way, with bounds), no
 * older version of its key reappears (values written while the TTL was 0,
 * which never expire, lie under timed ones after a reopen), fresh writes
 * stay readable, and a compaction drops the expired entries (kv_stats
 * expired_dropped).
 *
 * The clock is the wall clock in seconds: an entry stamped t is expired
 * once now - t > ttl. The checks that expect a timed entry still readable
 * run only while no second boundary can have expired it (they say so when
 * skipped); the test sleeps once, about ttl + 1 seconds. */
#define _XOPEN_SOURCE 700
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <kv/kv.h>

#include "fixture.h"

#define TTL 1
#define N 100 /* keys per group */

/* Append: existing "," operands (existing NULL: operands alone). */
static int append_full(void *state, const void *key, size_t klen, const void *existing,
                       size_t existing_len, const void *const *ops, const size_t *lens, size_t n,
                       void **result, size_t *result_len)
{
    (void)state, (void)key, (void)klen;
    size_t total = existing ? existing_len + 1 : 0;
    for (size_t i = 0; i < n; i++)
        total += lens[i] + 1;
    char *r = malloc(total + 1);
    if (!r)
        return -1;
    size_t p = 0;
    if (existing) {
        memcpy(r, existing, existing_len);
        p = existing_len;
    }
    for (size_t i = 0; i < n; i++) {
        if (existing || i > 0)
            r[p++] = ',';
        memcpy(r + p, ops[i], lens[i]);
        p += lens[i];
    }
    *result = r;
    *result_len = p;
    return 0;
}

static const kv_merge_operator append_op = {"check_ttl.append", NULL, append_full, NULL};

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The expected state of each key: NULL absent, else its value. */
typedef struct {
    char key[32];
    const char *want;
} kstate;

enum {
    G_OLD,    /* written with TTL 0 only: never expire */
    G_OVER,   /* TTL 0 value, overwritten by a timed put: absent once expired */
    G_TIMED,  /* timed puts only */
    G_MERGE0, /* TTL 0 value and TTL 0 operands: never expire */
    G_MERGET, /* TTL 0 value, then timed operands: absent once expired */
    G_TMERGE, /* timed operands only */
    G_DEL,    /* TTL 0 value, timed put, then a delete */
    G_N
};

static kstate ks[G_N][N];

static void expect_state(kv_db *db, const kv_snapshot *snap, const char *when)
{
    for (int g = 0; g < G_N; g++)
        for (int i = 0; i < N; i++) {
            const kstate *s = &ks[g][i];
            void *v = NULL;
            size_t vl = 0;
            int rc = kv_get_at(db, snap, s->key, strlen(s->key), &v, &vl);
            if (s->want) {
                ck_assert_msg(rc == KV_OK && vl == strlen(s->want) && memcmp(v, s->want, vl) == 0,
                              "%s: get %s: %s \"%.*s\", expected \"%s\"", when, s->key,
                              kv_strerror(rc), rc == KV_OK ? (int)vl : 0,
                              rc == KV_OK ? (char *)v : "", s->want);
            } else {
                ck_assert_msg(rc == KV_NOTFOUND, "%s: get %s: %s \"%.*s\", expected absent", when,
                              s->key, kv_strerror(rc), rc == KV_OK ? (int)vl : 0,
                              rc == KV_OK ? (char *)v : "");
            }
            kv_free(v);
            /* kv_get_into, the buffer one byte short half the time. */
            char buf[128];
            size_t want = s->want ? strlen(s->want) : 0, cap = (i & 1) && want ? want - 1 : 128;
            rc = kv_get_into(db, snap, s->key, strlen(s->key), buf, cap, &vl);
            if (!s->want)
                ck_assert_msg(rc == KV_NOTFOUND, "%s: get_into %s: %s, expected absent", when,
                              s->key, kv_strerror(rc));
            else if (cap < want)
                ck_assert_msg(rc == KV_ERANGE && vl == want, "%s: get_into %s (cap %zu): %s %zu",
                              when, s->key, cap, kv_strerror(rc), vl);
            else
                ck_assert_msg(rc == KV_OK && vl == want && memcmp(buf, s->want, vl) == 0,
                              "%s: get_into %s: %s", when, s->key, kv_strerror(rc));
        }

    /* kv_multi_get of each group at once. */
    for (int g = 0; g < G_N; g++) {
        const void *keys[N];
        size_t klens[N], vlens[N];
        void *vals[N];
        int st[N];
        for (int i = 0; i < N; i++) {
            keys[i] = ks[g][i].key;
            klens[i] = strlen(ks[g][i].key);
        }
        ck_assert_int_eq(kv_multi_get(db, snap, N, keys, klens, vals, vlens, st), KV_OK);
        for (int i = 0; i < N; i++) {
            const kstate *s = &ks[g][i];
            if (s->want)
                ck_assert_msg(st[i] == KV_OK && vlens[i] == strlen(s->want) &&
                                  memcmp(vals[i], s->want, vlens[i]) == 0,
                              "%s: multi_get %s: %s, expected \"%s\"", when, s->key,
                              kv_strerror(st[i]), s->want);
            else
                ck_assert_msg(st[i] == KV_NOTFOUND, "%s: multi_get %s: %s, expected absent", when,
                              s->key, kv_strerror(st[i]));
            kv_free(vals[i]);
        }
    }

    /* Iterators: the whole database forward and backward, and each group
     * within bounds, must show exactly the keys present, in order. The keys
     * sort by group, then by index ("<g>/<3 digits>"). */
    for (int pass = 0; pass < 2 + G_N; pass++) {
        kv_iter *it = NULL;
        ck_assert_int_eq(kv_iter_new(db, snap, &it), KV_OK);
        int g0 = 0, g1 = G_N, back = pass == 1;
        if (pass >= 2) {
            g0 = pass - 2;
            g1 = g0 + 1;
            char lo[8], up[8];
            snprintf(lo, sizeof lo, "%d/", g0);
            snprintf(up, sizeof up, "%d0", g0); /* '0' follows '/' */
            ck_assert_int_eq(kv_iter_set_bounds(it, lo, strlen(lo), up, strlen(up)), KV_OK);
            back = pass & 1;
        }
        if (back)
            kv_iter_seek_last(it);
        else
            kv_iter_seek_first(it);
        for (int step = 0; step < (g1 - g0) * N; step++) {
            int idx = back ? (g1 - g0) * N - 1 - step : step;
            const kstate *s = &ks[g0 + idx / N][idx % N];
            if (!s->want)
                continue;
            ck_assert_msg(kv_iter_valid(it), "%s: iterator (pass %d) ended before %s (%s)", when,
                          pass, s->key, kv_strerror(kv_iter_status(it)));
            size_t kl, vl;
            const char *k = kv_iter_key(it, &kl);
            const char *v = kv_iter_value(it, &vl);
            ck_assert_msg(kl == strlen(s->key) && memcmp(k, s->key, kl) == 0,
                          "%s: iterator (pass %d) at %.*s, expected %s", when, pass, (int)kl, k,
                          s->key);
            ck_assert_msg(vl == strlen(s->want) && memcmp(v, s->want, vl) == 0,
                          "%s: iterator (pass %d) at %s: \"%.*s\", expected \"%s\"", when, pass,
                          s->key, (int)vl, v, s->want);
            if (back)
                kv_iter_prev(it);
            else
                kv_iter_next(it);
        }
        size_t kl = 0;
        const char *k = kv_iter_key(it, &kl);
        ck_assert_msg(!kv_iter_valid(it), "%s: iterator (pass %d) shows %.*s past the last key",
                      when, pass, (int)kl, k ? k : "");
        ck_assert_int_eq(kv_iter_status(it), KV_OK);
        kv_iter_free(it);
    }
}

static void must(int rc, const char *what)
{
    ck_assert_msg(rc == KV_OK, "%s: %s (%s)", what, kv_strerror(rc), kv_error_text());
}

static void options(kv_options *o, uint64_t ttl)
{
    kv_options_init(o);
    o->write_buffer_size = (size_t)64 << 10;
    o->target_file_size = (size_t)64 << 10;
    o->merge_operator = &append_op;
    o->ttl_seconds = ttl;
    o->idle_compaction_ms = 0; /* compactions when the test asks */
}

START_TEST(ttl_expiry)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_options o;
    for (int g = 0; g < G_N; g++)
        for (int i = 0; i < N; i++)
            snprintf(ks[g][i].key, sizeof ks[g][i].key, "%d/%03d", g, i);

    /* 1. TTL 0: values that never expire, some of them flushed and
     * compacted to the bottom, the rest left in the log. */
    options(&o, 0);
    kv_db *db = open_db(p, &o);
    for (int g = 0; g < G_N; g++) {
        if (g == G_TIMED || g == G_TMERGE)
            continue;
        for (int i = 0; i < N; i++) {
            must(kv_put(db, ks[g][i].key, strlen(ks[g][i].key), "v0", 2), "put v0");
            ks[g][i].want = "v0";
        }
        if (g == G_MERGE0)
            for (int i = 0; i < N; i++) {
                must(kv_merge(db, ks[g][i].key, strlen(ks[g][i].key), "a", 1), "merge a");
                ks[g][i].want = "v0,a";
            }
        if (g == G_OVER)
            compact_all(db); /* to the bottom level */
    }
    expect_state(db, NULL, "ttl 0");

    /* 2. Reopened with the TTL: timed writes over them and beside them, half
     * of each group flushed and compacted, the rest in the memtable. */
    options(&o, TTL);
    db = reopen_db(db, p, &o);
    time_t t0 = time(NULL);
    kv_batch *b = NULL;
    must(kv_batch_new(&b), "batch");
    for (int i = 0; i < N; i++) {
        const char *k;
        k = ks[G_OVER][i].key;
        must(kv_put(db, k, strlen(k), "v1", 2), "put v1");
        ks[G_OVER][i].want = "v1";
        k = ks[G_TIMED][i].key;
        if (i % 3 == 0) { /* through a batch, a merge and a put mixed */
            must(kv_batch_put(b, k, strlen(k), "t0", 2), "batch put");
            must(kv_batch_merge(b, k, strlen(k), "t1", 2), "batch merge");
            ks[G_TIMED][i].want = "t0,t1";
        } else {
            must(kv_put(db, k, strlen(k), "t", 1), "put t");
            ks[G_TIMED][i].want = "t";
        }
        k = ks[G_MERGET][i].key;
        must(kv_merge(db, k, strlen(k), "b", 1), "merge b");
        ks[G_MERGET][i].want = "v0,b";
        k = ks[G_TMERGE][i].key;
        must(kv_merge(db, k, strlen(k), "c", 1), "merge c");
        must(kv_merge(db, k, strlen(k), "d", 1), "merge d");
        ks[G_TMERGE][i].want = "c,d";
        k = ks[G_DEL][i].key;
        must(kv_put(db, k, strlen(k), "v1", 2), "put v1");
        must(kv_delete(db, k, strlen(k)), "delete");
        ks[G_DEL][i].want = NULL;
        if (i == N / 2) {
            must(kv_write(db, b), "write");
            kv_batch_clear(b);
            must(kv_flush(db), "flush");
            compact_all(db); /* not yet expired: compaction keeps them */
        }
    }
    must(kv_write(db, b), "write");
    kv_batch_free(b);
    kv_snapshot *snap = NULL;
    must(kv_snapshot_new(db, &snap), "snapshot");
    time_t t1 = time(NULL);
    if (time(NULL) - t0 <= TTL) /* stamped >= t0: nothing can have expired yet */
        expect_state(db, NULL, "fresh");
    else
        fprintf(stderr, "ttl: writing took %lld s: the fresh check is skipped\n",
                (long long)(time(NULL) - t0));

    /* 3. Past the TTL (every stamp <= t1): each timed entry is expired. */
    while (time(NULL) <= t1 + TTL)
        nap_ms(50);
    for (int i = 0; i < N; i++) {
        ks[G_OVER][i].want = NULL; /* v0 must not come back */
        ks[G_TIMED][i].want = NULL;
        ks[G_MERGET][i].want = NULL; /* the expired operand reads as a deletion */
        ks[G_TMERGE][i].want = NULL;
    }
    struct kv_stats s0, s1;
    get_stats(db, &s0);
    expect_state(db, NULL, "expired");
    expect_state(db, snap, "expired, at a snapshot taken before");
    get_stats(db, &s1);
    ck_assert_uint_gt(s1.expired_reads, s0.expired_reads);
    kv_snapshot_release(db, snap);

    /* 4. Fresh writes after expiry: readable; a merge onto an expired key
     * sees no existing value. */
    time_t t2 = time(NULL);
    for (int i = 0; i < N; i += 2) {
        const char *k = ks[G_OVER][i].key;
        must(kv_merge(db, k, strlen(k), "n", 1), "merge n");
        ks[G_OVER][i].want = "n";
        k = ks[G_TIMED][i].key;
        must(kv_put(db, k, strlen(k), "fresh", 5), "put fresh");
        ks[G_TIMED][i].want = "fresh";
    }
    time_t t3 = time(NULL); /* every stamp of step 4 is <= t3 */
    int fresh_ok = t3 - t2 <= TTL;
    if (fresh_ok)
        expect_state(db, NULL, "fresh writes after expiry");

    /* 5. Compaction drops the expired entries and changes no answer. */
    get_stats(db, &s0);
    compact_all(db);
    get_stats(db, &s1);
    fprintf(stderr, "ttl: compaction dropped %llu expired entries; reads passed over %llu\n",
            (unsigned long long)(s1.expired_dropped - s0.expired_dropped),
            (unsigned long long)s1.expired_reads);
    ck_assert_uint_gt(s1.expired_dropped, s0.expired_dropped);
    if (fresh_ok && time(NULL) - t2 <= TTL)
        expect_state(db, NULL, "after compaction");

    /* 6. Reopened once the fresh writes expired too: they are gone, the
     * values written under TTL 0 are still there, before and after a
     * compaction. */
    close_db(db);
    while (time(NULL) <= t3 + TTL)
        nap_ms(50);
    for (int i = 0; i < N; i += 2) {
        ks[G_OVER][i].want = NULL;
        ks[G_TIMED][i].want = NULL;
    }
    options(&o, TTL);
    db = open_db(p, &o);
    expect_state(db, NULL, "reopened, all timed entries expired");
    compact_all(db);
    expect_state(db, NULL, "reopened and compacted");
    close_db(db);
}
END_TEST

/* A long TTL (ten years) expires nothing. */
START_TEST(ttl_huge)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_options o;
    options(&o, 10ull * 365 * 24 * 3600);
    kv_db *db = open_db(p, &o);
    put_str(db, "a", "1");
    must(kv_merge(db, "a", 1, "2", 1), "merge");
    must(kv_flush(db), "flush");
    compact_all(db);
    expect_value(db, "a", 1, "1,2", 3);
    close_db(db);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("ttl");
    TCase *tc = test_tcase(s, "ttl", 120, 1);
    tcase_add_test(tc, ttl_expiry);
    tcase_add_test(tc, ttl_huge);
    return s;
}
