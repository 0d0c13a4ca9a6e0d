/* check_semantics_threads.c - merges, range deletes and reads on many
 * threads at once, with flushes and compactions running (for the
 * ThreadSanitizer pass, ctest -L concurrency):
 *
 *  - merger threads add to 16 counters with kv_merge and kv_batch_merge
 *    (kv_merge_uint64_add()); each addition is counted as started before
 *    the call and as acknowledged after it;
 *  - reader threads read the counters with kv_get, kv_get_into,
 *    kv_multi_get and bounded iterators: every value read lies between the
 *    acknowledged sum before the read and the started sum after it, and a
 *    thread never sees a counter go down (no range delete covers them);
 *  - a range-delete thread cycles 64 keys "r/..." through three states:
 *    all written by one batch (a put and a merge each, same value), the
 *    first half removed by a range delete, all removed by an overlapping
 *    one; readers scanning them at any moment must find one of those
 *    states whole (range deletes and batches are atomic);
 *  - a maintenance thread flushes and compacts all the while.
 * At the end every counter holds exactly what was added, before and after
 * a full compaction and a reopen. */
#define _XOPEN_SOURCE 700
#include <check.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kv/kv.h>

#include "fixture.h"

#define COUNTERS 16
#define MERGERS 3
#define READERS 2
#define RKEYS 64

static struct {
    kv_db *db;
    atomic_ullong started[COUNTERS], acked[COUNTERS];
    atomic_int stop, failed;
    atomic_ulong rounds, reads, scans, rstates[3];
    pthread_mutex_t why_lock;
    char why[600];
} sh;

static void th_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void th_fail(const char *fmt, ...)
{
    pthread_mutex_lock(&sh.why_lock);
    if (!atomic_load(&sh.failed)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(sh.why, sizeof sh.why, fmt, ap);
        va_end(ap);
        atomic_store(&sh.failed, 1);
    }
    pthread_mutex_unlock(&sh.why_lock);
}

static int running(void)
{
    return !atomic_load(&sh.stop) && !atomic_load(&sh.failed);
}

static size_t ckey(int j, char *k)
{
    return (size_t)sprintf(k, "c/%02d", j);
}

static size_t rkey(int i, char *k)
{
    return (size_t)sprintf(k, "r/%03d", i);
}

static void le64(uint64_t x, uint8_t b[8])
{
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(x >> (8 * i));
}

static uint64_t from_le64(const void *p)
{
    const uint8_t *b = p;
    uint64_t x = 0;
    for (int i = 7; i >= 0; i--)
        x = x << 8 | b[i];
    return x;
}

static void *merger(void *arg)
{
    uint64_t r = 0x3E46E5ull + (uintptr_t)arg;
    kv_batch *b = NULL;
    if (kv_batch_new(&b) != KV_OK) {
        th_fail("kv_batch_new");
        return NULL;
    }
    while (running()) {
        r = splitmix(r);
        if (r % 4 == 0) { /* a batch of 2..6 additions, a counter maybe twice */
            int n = 2 + (int)(r >> 8) % 5, js[6];
            uint64_t ds[6];
            kv_batch_clear(b);
            for (int i = 0; i < n; i++) {
                r = splitmix(r);
                js[i] = (int)(r % COUNTERS);
                ds[i] = 1 + (r >> 32) % 3;
                char k[16];
                uint8_t d[8];
                le64(ds[i], d);
                if (kv_batch_merge(b, k, ckey(js[i], k), d, 8) != KV_OK) {
                    th_fail("kv_batch_merge");
                    break;
                }
            }
            for (int i = 0; i < n; i++)
                atomic_fetch_add(&sh.started[js[i]], ds[i]);
            int rc = kv_write(sh.db, b);
            if (rc != KV_OK) {
                th_fail("kv_write of merges: %s", kv_strerror(rc));
                break;
            }
            for (int i = 0; i < n; i++)
                atomic_fetch_add(&sh.acked[js[i]], ds[i]);
        } else {
            int j = (int)((r >> 8) % COUNTERS);
            uint64_t d = 1 + (r >> 32) % 3;
            char k[16];
            uint8_t db[8];
            le64(d, db);
            atomic_fetch_add(&sh.started[j], d);
            int rc = kv_merge(sh.db, k, ckey(j, k), db, 8);
            if (rc != KV_OK) {
                th_fail("kv_merge: %s", kv_strerror(rc));
                break;
            }
            atomic_fetch_add(&sh.acked[j], d);
        }
    }
    kv_batch_free(b);
    return NULL;
}

/* A counter's value v read between lo (acknowledged before) and hi
 * (started after), and not below what this thread saw last. */
static int counter_ok(int j, uint64_t v, uint64_t lo, uint64_t hi, uint64_t *last, const char *how)
{
    if (v < lo || v > hi || v < *last) {
        th_fail("%s c/%02d = %llu: acknowledged before %llu, started after %llu, seen before "
                "%llu",
                how, j, (unsigned long long)v, (unsigned long long)lo, (unsigned long long)hi,
                (unsigned long long)*last);
        return 0;
    }
    *last = v;
    return 1;
}

/* The decimal number in p[0, n): a key's bytes are not NUL-terminated,
 * so atoi could read past them into whatever follows. -1 for a non-digit. */
static int digits(const char *p, size_t n)
{
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        v = v * 10 + (p[i] - '0');
    }
    return v;
}

/* A scan of the "r/" keys at one moment: none, the second half, or all of
 * them, every value the same. */
static void check_rkeys(kv_iter *it, const char *how)
{
    kv_iter_seek_prefix(it, "r/", 2);
    int n = 0, first = -1;
    uint64_t val = 0;
    for (; kv_iter_valid(it); kv_iter_next(it), n++) {
        size_t kl, vl;
        const char *k = kv_iter_key(it, &kl);
        const void *v = kv_iter_value(it, &vl);
        char want[16];
        if (first < 0)
            first = kl > 2 ? digits(k + 2, kl - 2) : -1;
        rkey(first + n, want);
        if (kl != 5 || memcmp(k, want, 5) != 0 || vl != 8) {
            th_fail("%s: r/ scan at %.*s (%zu bytes), expected %s", how, (int)kl, k, vl, want);
            return;
        }
        if (n == 0)
            val = from_le64(v);
        else if (from_le64(v) != val) {
            th_fail("%s: r/ scan: %s = %llu, the keys before %llu", how, want,
                    (unsigned long long)from_le64(v), (unsigned long long)val);
            return;
        }
    }
    if (kv_iter_status(it) != KV_OK) {
        th_fail("%s: r/ scan: %s", how, kv_strerror(kv_iter_status(it)));
        return;
    }
    int state = n == 0 ? 0 : n == RKEYS / 2 && first == RKEYS / 2 ? 1 : n == RKEYS ? 2 : -1;
    if (state < 0 || (n && val % 2 != 0)) {
        th_fail("%s: r/ scan found %d keys from r/%03d (value %llu): not a state the "
                "writes ever made",
                how, n, first, (unsigned long long)val);
        return;
    }
    atomic_fetch_add(&sh.rstates[state], 1);
    /* Backward: the same keys. */
    kv_iter_seek_last(it);
    int m = 0;
    for (; kv_iter_valid(it); kv_iter_prev(it))
        m++;
    if (m != n)
        th_fail("%s: r/ scan forward found %d keys, backward %d", how, n, m);
}

static void *reader(void *arg)
{
    uint64_t r = 0x4EADull + (uintptr_t)arg, last[COUNTERS] = {0};
    while (running()) {
        r = splitmix(r);
        int j = (int)(r % COUNTERS), how = (int)((r >> 8) % 5);
        char k[16];
        size_t kl = ckey(j, k);
        if (how <= 1) {
            uint64_t lo = atomic_load(&sh.acked[j]);
            void *v = NULL;
            size_t vl = 0;
            uint8_t buf[8];
            int rc = how == 0 ? kv_get(sh.db, k, kl, &v, &vl)
                              : kv_get_into(sh.db, NULL, k, kl, buf, sizeof buf, &vl);
            uint64_t hi = atomic_load(&sh.started[j]);
            if (rc == KV_NOTFOUND && lo == 0) {
                continue;
            } else if (rc != KV_OK || vl != 8) {
                th_fail("%s c/%02d: %s, %zu bytes", how ? "get_into" : "get", j, kv_strerror(rc),
                        vl);
            } else {
                counter_ok(j, from_le64(how == 0 ? v : buf), lo, hi, &last[j],
                           how ? "get_into" : "get");
            }
            kv_free(v);
        } else if (how == 2) {
            const void *keys[COUNTERS];
            size_t klens[COUNTERS], vlens[COUNTERS];
            void *vals[COUNTERS];
            int st[COUNTERS];
            char ks[COUNTERS][16];
            uint64_t lo[COUNTERS], hi[COUNTERS];
            for (int i = 0; i < COUNTERS; i++) {
                klens[i] = ckey(i, ks[i]);
                keys[i] = ks[i];
                lo[i] = atomic_load(&sh.acked[i]);
            }
            int rc = kv_multi_get(sh.db, NULL, COUNTERS, keys, klens, vals, vlens, st);
            for (int i = 0; i < COUNTERS; i++)
                hi[i] = atomic_load(&sh.started[i]);
            if (rc != KV_OK) {
                th_fail("kv_multi_get: %s", kv_strerror(rc));
                break;
            }
            for (int i = 0; i < COUNTERS; i++) {
                if (st[i] == KV_NOTFOUND && lo[i] == 0)
                    continue;
                if (st[i] != KV_OK || vlens[i] != 8)
                    th_fail("multi_get c/%02d: %s", i, kv_strerror(st[i]));
                else
                    counter_ok(i, from_le64(vals[i]), lo[i], hi[i], &last[i], "multi_get");
                kv_free(vals[i]);
            }
        } else {
            /* An iterator over the counters, within bounds, and then the
             * r/ keys at the same moment. */
            uint64_t lo[COUNTERS], hi[COUNTERS];
            for (int i = 0; i < COUNTERS; i++)
                lo[i] = atomic_load(&sh.acked[i]);
            kv_iter *it = NULL;
            if (kv_iter_new(sh.db, NULL, &it) != KV_OK) {
                th_fail("kv_iter_new");
                break;
            }
            for (int i = 0; i < COUNTERS; i++)
                hi[i] = atomic_load(&sh.started[i]);
            kv_iter_set_bounds(it, "c/", 2, "c0", 2);
            int back = how == 4;
            if (back)
                kv_iter_seek_last(it);
            else
                kv_iter_seek_first(it);
            for (; kv_iter_valid(it); back ? kv_iter_prev(it) : kv_iter_next(it)) {
                size_t kl2, vl;
                const char *ik = kv_iter_key(it, &kl2);
                const void *v = kv_iter_value(it, &vl);
                int i = kl2 == 4 ? digits(ik + 2, 2) : -1;
                if (i < 0 || i >= COUNTERS || vl != 8) {
                    th_fail("iterator over c/: %.*s (%zu bytes)", (int)kl2, ik, vl);
                    break;
                }
                counter_ok(i, from_le64(v), lo[i], hi[i], &last[i],
                           back ? "iterator (backward)" : "iterator");
            }
            if (kv_iter_status(it) != KV_OK)
                th_fail("iterator over c/: %s", kv_strerror(kv_iter_status(it)));
            kv_iter_set_bounds(it, NULL, 0, NULL, 0);
            check_rkeys(it, "reader");
            kv_iter_free(it);
            atomic_fetch_add(&sh.scans, 1);
        }
        atomic_fetch_add(&sh.reads, 1);
    }
    return NULL;
}

/* The r/ keys through their three states, over and over; a snapshot now
 * and then, read after the next step. */
static void *deleter(void *arg)
{
    (void)arg;
    kv_batch *b = NULL;
    if (kv_batch_new(&b) != KV_OK) {
        th_fail("kv_batch_new");
        return NULL;
    }
    char lo[16], mid[16];
    rkey(0, lo);
    rkey(RKEYS / 2, mid);
    for (uint64_t gen = 2; running(); gen += 2) {
        /* All 64 keys: gen - 1 put, + 1 merged: gen. */
        kv_batch_clear(b);
        uint8_t v[8], one[8];
        le64(gen - 1, v);
        le64(1, one);
        for (int i = 0; i < RKEYS; i++) {
            char k[16];
            size_t kl = rkey(i, k);
            if (kv_batch_put(b, k, kl, v, 8) != KV_OK || kv_batch_merge(b, k, kl, one, 8))
                th_fail("batch");
        }
        int rc = kv_write(sh.db, b);
        kv_snapshot *snap = NULL;
        if (rc == KV_OK && gen % 8 == 0)
            rc = kv_snapshot_new(sh.db, &snap);
        if (rc == KV_OK)
            rc = kv_delete_range(sh.db, lo, 5, mid, 5);
        if (rc == KV_OK)
            rc = kv_delete_range(sh.db, "r/", 2, "r0", 2);
        if (rc != KV_OK) {
            th_fail("r/ keys, generation %llu: %s", (unsigned long long)gen, kv_strerror(rc));
            break;
        }
        if (snap) { /* taken after the batch: all 64, at gen */
            kv_iter *it = NULL;
            if (kv_iter_new(sh.db, snap, &it) != KV_OK) {
                th_fail("kv_iter_new at a snapshot");
            } else {
                kv_iter_seek_prefix(it, "r/", 2);
                int n = 0;
                for (; kv_iter_valid(it); kv_iter_next(it)) {
                    size_t vl;
                    const void *vv = kv_iter_value(it, &vl);
                    if (vl != 8 || from_le64(vv) != gen)
                        th_fail("r/ at a snapshot after generation %llu: value %llu",
                                (unsigned long long)gen,
                                vl == 8 ? (unsigned long long)from_le64(vv) : 0ull);
                    n++;
                }
                if (n != RKEYS)
                    th_fail("r/ at a snapshot after generation %llu: %d keys",
                            (unsigned long long)gen, n);
                kv_iter_free(it);
            }
            kv_snapshot_release(sh.db, snap);
        }
        atomic_fetch_add(&sh.rounds, 1);
    }
    kv_batch_free(b);
    return NULL;
}

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void *maint(void *arg)
{
    uint64_t r = 0x3A1Dull + (uintptr_t)arg;
    while (running()) {
        r = splitmix(r);
        int rc;
        switch (r % 4) {
        case 0: rc = kv_compact_range(sh.db, NULL, 0, NULL, 0); break;
        case 1: rc = kv_compact_range(sh.db, "c/", 2, "c/08", 4); break;
        case 2: rc = kv_compact_range(sh.db, "r/", 2, "r/040", 5); break;
        default: rc = kv_flush(sh.db); break;
        }
        if (rc != KV_OK) {
            th_fail("maintenance: %s (%s)", kv_strerror(rc), kv_error_text());
            break;
        }
        nap_ms(5 + (long)(r >> 40) % 20);
    }
    return NULL;
}

static void expect_totals(const char *when)
{
    for (int j = 0; j < COUNTERS; j++) {
        char k[16];
        size_t kl = ckey(j, k);
        uint64_t want = atomic_load(&sh.acked[j]);
        ck_assert_uint_eq(want, atomic_load(&sh.started[j]));
        void *v = NULL;
        size_t vl = 0;
        int rc = kv_get(sh.db, k, kl, &v, &vl);
        if (want == 0) {
            ck_assert_int_eq(rc, KV_NOTFOUND);
            continue;
        }
        ck_assert_msg(rc == KV_OK && vl == 8, "%s: c/%02d: %s", when, j, kv_strerror(rc));
        ck_assert_msg(from_le64(v) == want, "%s: c/%02d = %llu, %llu were added", when, j,
                      (unsigned long long)from_le64(v), (unsigned long long)want);
        kv_free(v);
    }
    kv_iter *it = NULL;
    ck_assert_int_eq(kv_iter_new(sh.db, NULL, &it), KV_OK);
    check_rkeys(it, when);
    kv_iter_free(it);
    ck_assert_msg(!atomic_load(&sh.failed), "%s", sh.why);
}

START_TEST(merges_range_deletes_reads)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_options o;
    kv_options_init(&o);
    o.write_buffer_size = (size_t)64 << 10;
    o.target_file_size = (size_t)64 << 10;
    o.max_bytes_for_level_base = (size_t)128 << 10;
    o.l0_compaction_trigger = 2;
    o.merge_operator = kv_merge_uint64_add();
    memset(&sh, 0, sizeof sh);
    pthread_mutex_init(&sh.why_lock, NULL);
    sh.db = open_db(p, &o);

    const char *e = getenv("KV_TEST_LONG");
    long ms = e && *e && strcmp(e, "0") != 0 ? 8000 : 2500;
    pthread_t t[MERGERS + READERS + 2];
    int n = 0;
    for (int i = 0; i < MERGERS; i++)
        ck_assert_int_eq(pthread_create(&t[n++], NULL, merger, (void *)(uintptr_t)i), 0);
    for (int i = 0; i < READERS; i++)
        ck_assert_int_eq(pthread_create(&t[n++], NULL, reader, (void *)(uintptr_t)i), 0);
    ck_assert_int_eq(pthread_create(&t[n++], NULL, deleter, NULL), 0);
    ck_assert_int_eq(pthread_create(&t[n++], NULL, maint, NULL), 0);
    for (long waited = 0; waited < ms && !atomic_load(&sh.failed); waited += 50)
        nap_ms(50);
    atomic_store(&sh.stop, 1);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    ck_assert_msg(!atomic_load(&sh.failed), "%s", sh.why);

    struct kv_stats s;
    get_stats(sh.db, &s);
    uint64_t added = 0;
    for (int j = 0; j < COUNTERS; j++)
        added += atomic_load(&sh.acked[j]);
    fprintf(stderr,
            "threads: %llu added to the counters in %llu merges, %lu r/ rounds, %lu "
            "reads (%lu scans: r/ seen empty %lu, half %lu, whole %lu), %llu flushes, %llu "
            "compactions, %llu operands merged at reads, %llu in compactions\n",
            (unsigned long long)added, (unsigned long long)s.merges, atomic_load(&sh.rounds),
            atomic_load(&sh.reads), atomic_load(&sh.scans), atomic_load(&sh.rstates[0]),
            atomic_load(&sh.rstates[1]), atomic_load(&sh.rstates[2]), (unsigned long long)s.flushes,
            (unsigned long long)s.compactions, (unsigned long long)s.merge_operands_read,
            (unsigned long long)s.merge_operands_compacted);
    ck_assert_uint_gt(atomic_load(&sh.rounds), 0);
    expect_totals("at the end");
    compact_all(sh.db);
    expect_totals("after a full compaction");
    close_db(sh.db);
    sh.db = open_db(p, &o);
    expect_totals("reopened");
    close_db(sh.db);
    pthread_mutex_destroy(&sh.why_lock);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("semantics_threads");
    TCase *tc = test_tcase(s, "threads", 600, 1);
    tcase_add_test(tc, merges_range_deletes_reads);
    return s;
}
