/* check_view.c - reads without the lock (doc/concurrency.md): kv_get_into's
 * contract; that a table a compaction replaced stays open and on disk while
 * a reader that could see it lives, and goes once the last one ends; more
 * iterators and snapshots than the database has reader slots; and a stress
 * run of writers, readers (kv_get, kv_get_into, kv_multi_get, iterators,
 * snapshots), flushes and compactions at once, checking that no read shows
 * a key older than one its thread already saw or than a write completed
 * before it began, and that a snapshot's answers never change. */
#define _XOPEN_SOURCE 700
#include <check.h>
#include <dirent.h>
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <kv/kv.h>

#include "fixture.h"

/* ---- fixture ------------------------------------------------------------------------ */

static char dbpath[600];

/* The fixture's directory, and the store's path in it. */
static void setup_files(void)
{
    test_setup();
    test_path(dbpath, sizeof dbpath, "db");
}

/* Small memtables and tables, so that a short run flushes and compacts;
 * the background thread at the process's priority, so that it keeps
 * flushing while the stress test's threads keep both cores busy (at the
 * small-machine default, nice 19, it got 3 flushes done in 3 s under
 * TSan: kv.h, background_nice). */
static kv_db *open_small(void)
{
    kv_options o;
    kv_options_init(&o);
    o.background_nice = 0;
    o.write_buffer_size = 64 << 10;
    o.target_file_size = 64 << 10;
    o.max_bytes_for_level_base = 256 << 10;
    o.l0_compaction_trigger = 2;
    o.block_cache_size = 64 << 10;
    return open_db(dbpath, &o);
}

/* The numbers of the database's .sst files, sorted, in out[] (at most cap). */
static size_t list_tables(uint64_t *out, size_t cap)
{
    DIR *d = opendir(dbpath);
    ck_assert_ptr_nonnull(d);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len > 4 && strcmp(e->d_name + len - 4, ".sst") == 0 && n < cap)
            out[n++] = strtoull(e->d_name, NULL, 10);
    }
    closedir(d);
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && out[j - 1] > out[j]; j--) {
            uint64_t t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    return n;
}

static int table_exists(uint64_t number)
{
    char p[700];
    snprintf(p, sizeof p, "%s/%06" PRIu64 ".sst", dbpath, number);
    return access(p, F_OK) == 0;
}

/* ---- kv_get_into ------------------------------------------------------------------------ */

#define GUARD 0xA5

/* kv_get_into of key into a buffer of cap bytes followed by guard bytes:
 * the status, the length, and a check that no byte past what the status
 * allows was written (KV_OK: the value's; otherwise none at all). */
static int get_into_guarded(kv_db *db, const kv_snapshot *snap, const char *key, size_t cap,
                            char *out, size_t *vlen)
{
    unsigned char buf[300];
    ck_assert_uint_le(cap + 16, sizeof buf);
    memset(buf, GUARD, sizeof buf);
    *vlen = 12345;
    int rc = kv_get_into(db, snap, key, strlen(key), cap ? buf : NULL, cap, vlen);
    size_t wrote = rc == KV_OK ? *vlen : 0;
    for (size_t i = wrote; i < sizeof buf; i++)
        ck_assert_msg(buf[i] == GUARD, "byte %zu written (cap %zu, rc %d)", i, cap, rc);
    if (rc == KV_OK && out) {
        memcpy(out, buf, *vlen);
        out[*vlen] = 0;
    }
    return rc;
}

/* The contract at one place the value lives (memtable or table). */
static void check_into_contract(kv_db *db, const char *key, const char *want)
{
    size_t n = strlen(want), vlen;
    char got[300];
    /* Room to spare, and an exact fit. */
    ck_assert_int_eq(get_into_guarded(db, NULL, key, 200, got, &vlen), KV_OK);
    ck_assert_uint_eq(vlen, n);
    ck_assert_str_eq(got, want);
    ck_assert_int_eq(get_into_guarded(db, NULL, key, n, got, &vlen), KV_OK);
    ck_assert_uint_eq(vlen, n);
    ck_assert_str_eq(got, want);
    /* One byte short, and no buffer at all: KV_ERANGE with the length. */
    ck_assert_int_eq(get_into_guarded(db, NULL, key, n - 1, NULL, &vlen), KV_ERANGE);
    ck_assert_uint_eq(vlen, n);
    ck_assert_ptr_nonnull(strstr(kv_error_text(), "kv_get_into"));
    ck_assert_int_eq(get_into_guarded(db, NULL, key, 0, NULL, &vlen), KV_ERANGE);
    ck_assert_uint_eq(vlen, n);
    /* Absent and deleted keys. */
    ck_assert_int_eq(get_into_guarded(db, NULL, "absent", 200, NULL, &vlen), KV_NOTFOUND);
    ck_assert_uint_eq(vlen, 0);
    ck_assert_int_eq(get_into_guarded(db, NULL, "gone", 200, NULL, &vlen), KV_NOTFOUND);
    /* The empty value fits in no buffer at all. */
    ck_assert_int_eq(get_into_guarded(db, NULL, "empty", 0, NULL, &vlen), KV_OK);
    ck_assert_uint_eq(vlen, 0);
    /* The same answer as kv_get. */
    void *v = NULL;
    size_t gl = 0;
    ck_assert_int_eq(kv_get(db, key, strlen(key), &v, &gl), KV_OK);
    ck_assert_uint_eq(gl, n);
    ck_assert_int_eq(memcmp(v, want, n), 0);
    kv_free(v);
}

START_TEST(get_into_fits_exact_short_missing)
{
    kv_db *db = open_small();
    const char *want = "a value of thirty-one bytes ...";
    put_str(db, "key", want);
    put_str(db, "gone", "x");
    ck_assert_int_eq(kv_delete(db, "gone", 4), KV_OK);
    ck_assert_int_eq(kv_put(db, "empty", 5, "", 0), KV_OK);
    check_into_contract(db, "key", want); /* from the memtable */
    ck_assert_int_eq(kv_flush(db), KV_OK);
    check_into_contract(db, "key", want); /* from a table */
    ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 0), KV_OK);
    check_into_contract(db, "key", want); /* from a deeper level */
    close_db(db);
}
END_TEST

START_TEST(get_into_reads_at_a_snapshot)
{
    kv_db *db = open_small();
    put_str(db, "k", "old");
    kv_snapshot *snap;
    ck_assert_int_eq(kv_snapshot_new(db, &snap), KV_OK);
    put_str(db, "k", "newer and longer");
    put_str(db, "born", "after");
    for (int round = 0; round < 2; round++) {
        char got[300];
        size_t vlen;
        ck_assert_int_eq(get_into_guarded(db, snap, "k", 3, got, &vlen), KV_OK);
        ck_assert_str_eq(got, "old");
        ck_assert_int_eq(get_into_guarded(db, snap, "born", 100, NULL, &vlen), KV_NOTFOUND);
        ck_assert_int_eq(get_into_guarded(db, NULL, "k", 3, NULL, &vlen), KV_ERANGE);
        ck_assert_uint_eq(vlen, 16);
        ck_assert_int_eq(kv_flush(db), KV_OK); /* again, from a table */
    }
    kv_snapshot_release(db, snap);
    close_db(db);
}
END_TEST

START_TEST(get_into_bad_arguments)
{
    kv_db *db = open_small();
    put_str(db, "k", "v");
    char buf[8];
    size_t vlen = 7;
    ck_assert_int_eq(kv_get_into(NULL, NULL, "k", 1, buf, sizeof buf, &vlen), KV_EINVAL);
    ck_assert_ptr_nonnull(strstr(kv_error_text(), "db is NULL"));
    ck_assert_int_eq(kv_get_into(db, NULL, "k", 1, buf, sizeof buf, NULL), KV_EINVAL);
    ck_assert_ptr_nonnull(strstr(kv_error_text(), "vlen is NULL"));
    ck_assert_int_eq(kv_get_into(db, NULL, "k", 1, NULL, 4, &vlen), KV_EINVAL);
    ck_assert_ptr_nonnull(strstr(kv_error_text(), "NULL buf"));
    ck_assert_int_eq(kv_get_into(db, NULL, NULL, 3, buf, sizeof buf, &vlen), KV_EINVAL);
    ck_assert_ptr_nonnull(strstr(kv_error_text(), "NULL key"));
    ck_assert_int_eq(kv_get_into(db, NULL, "k", KV_MAX_KEY_SIZE + 1, buf, sizeof buf, &vlen),
                     KV_EINVAL);
    ck_assert_str_eq(kv_strerror(KV_ERANGE), "buffer too small for the value");
    ck_assert_int_eq(KV_ERANGE, -9);
    close_db(db);
}
END_TEST

/* ---- table lifetime -------------------------------------------------------------------- */

/* Writes keys [0, n) with values tagged `tag`, then flushes. */
static void fill(kv_db *db, int n, int tag)
{
    for (int i = 0; i < n; i++) {
        char k[32], v[64];
        snprintf(k, sizeof k, "key%06d", i);
        snprintf(v, sizeof v, "value %d of key %d, padded to some length", tag, i);
        put_str(db, k, v);
    }
    ck_assert_int_eq(kv_flush(db), KV_OK);
}

START_TEST(replaced_table_outlives_its_last_iterator)
{
    kv_db *db = open_small();
    fill(db, 300, 1);
    uint64_t before[64];
    size_t nbefore = list_tables(before, 64);
    ck_assert_uint_ge(nbefore, 1);

    /* Two readers that can see the first tables: an iterator, and a
     * second one opened at a snapshot. */
    kv_iter *it, *it2;
    kv_snapshot *snap;
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    ck_assert_int_eq(kv_snapshot_new(db, &snap), KV_OK);
    ck_assert_int_eq(kv_iter_new(db, snap, &it2), KV_OK);
    kv_snapshot_release(db, snap);

    fill(db, 300, 2);
    ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 0), KV_OK);
    /* Every table of the first fill was replaced, but both iterators can
     * still see them: the files stay. */
    for (size_t i = 0; i < nbefore; i++)
        ck_assert_msg(table_exists(before[i]), "table %" PRIu64 " deleted under a reader",
                      before[i]);
    /* ... and are read: both iterators see the first fill, whole. */
    kv_iter *its[2] = {it, it2};
    for (int j = 0; j < 2; j++) {
        int n = 0;
        for (kv_iter_seek_first(its[j]); kv_iter_valid(its[j]); kv_iter_next(its[j]), n++) {
            size_t vlen;
            const char *v = kv_iter_value(its[j], &vlen);
            ck_assert_int_eq(memcmp(v, "value 1 ", 8), 0);
        }
        ck_assert_int_eq(kv_iter_status(its[j]), KV_OK);
        ck_assert_int_eq(n, 300);
    }
    kv_iter_free(it);
    for (size_t i = 0; i < nbefore; i++) /* the second still holds them */
        ck_assert(table_exists(before[i]));
    kv_iter_free(it2);
    /* The last reader that could see them is gone: so are they. */
    for (size_t i = 0; i < nbefore; i++)
        ck_assert_msg(!table_exists(before[i]), "table %" PRIu64 " left behind", before[i]);
    void *v;
    size_t vlen;
    ck_assert_int_eq(kv_get(db, "key000007", 9, &v, &vlen), KV_OK);
    ck_assert_int_eq(memcmp(v, "value 2 ", 8), 0);
    kv_free(v);
    close_db(db);
}
END_TEST

struct getter {
    kv_db *db;
    atomic_int stop;
    atomic_ulong gets;
    atomic_int bad;
};

static void *getter_run(void *arg)
{
    struct getter *g = arg;
    uint64_t x = 7;
    while (!atomic_load(&g->stop)) {
        char k[32], buf[128];
        x = splitmix(x);
        snprintf(k, sizeof k, "key%06d", (int)(x % 300));
        size_t vlen;
        int rc = kv_get_into(g->db, NULL, k, strlen(k), buf, sizeof buf, &vlen);
        if (rc != KV_OK || memcmp(buf, "value ", 6) != 0)
            atomic_fetch_add(&g->bad, 1);
        atomic_fetch_add(&g->gets, 1);
    }
    return NULL;
}

START_TEST(replaced_table_goes_once_running_gets_end)
{
    /* Gets run all along; the tables kv_compact_range replaced go once
     * the Gets that could read them have ended (a Get holds its view for
     * one call only), while Gets still run. */
    kv_db *db = open_small();
    fill(db, 300, 1);
    struct getter g = {.db = db};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, getter_run, &g), 0);
    for (int round = 2; round < 6; round++) {
        uint64_t before[64];
        size_t nbefore = list_tables(before, 64);
        fill(db, 300, round);
        ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 0), KV_OK);
        /* kv_compact_range waits (up to a second) for the Gets reading
         * them; a loaded machine may preempt a getter for longer, so the
         * check allows the background thread's later passes (every 1 ms)
         * up to 20 seconds. A table still there then was leaked. */
        int left = 1;
        uint64_t gone = 0;
        for (int tries = 0; left && tries < 2000; tries++) {
            uint64_t after[64];
            size_t nafter = list_tables(after, 64);
            left = 0;
            for (size_t i = 0; i < nbefore; i++)
                for (size_t j = 0; j < nafter; j++)
                    if (before[i] == after[j]) {
                        left = 1;
                        gone = before[i];
                    }
            if (left) {
                struct timespec ms10 = {0, 10000000};
                nanosleep(&ms10, NULL);
            }
        }
        ck_assert_msg(!left, "round %d: table %" PRIu64 " left behind", round, gone);
    }
    atomic_store(&g.stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    ck_assert_int_eq(atomic_load(&g.bad), 0);
    ck_assert_uint_gt(atomic_load(&g.gets), 0);
    close_db(db);
}
END_TEST

START_TEST(more_readers_than_slots)
{
    /* 100 iterators and 100 snapshots: more than the reader slots (64
     * per database), so some register under the lock; all read right,
     * kv_close counts them all, and they all go. */
    enum { N = 100 };
    kv_db *db = open_small();
    fill(db, 50, 1);
    kv_iter *it[N];
    kv_snapshot *sn[N];
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(kv_iter_new(db, NULL, &it[i]), KV_OK);
        ck_assert_int_eq(kv_snapshot_new(db, &sn[i]), KV_OK);
    }
    fill(db, 50, 2);
    ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 0), KV_OK);
    ck_assert_int_eq(kv_close(db), KV_EBUSY);
    ck_assert_msg(strstr(kv_error_text(), "100 iterators and 100 snapshots"), "%s",
                  kv_error_text());
    for (int i = 0; i < N; i++) {
        kv_iter_seek(it[i], "key000010", 9);
        ck_assert(kv_iter_valid(it[i]));
        size_t vlen;
        ck_assert_int_eq(memcmp(kv_iter_value(it[i], &vlen), "value 1 ", 8), 0);
        char buf[128];
        ck_assert_int_eq(kv_get_into(db, sn[i], "key000010", 9, buf, sizeof buf, &vlen), KV_OK);
        ck_assert_int_eq(memcmp(buf, "value 1 ", 8), 0);
    }
    for (int i = 0; i < N; i++) {
        kv_iter_free(it[i]);
        kv_snapshot_release(db, sn[i]);
    }
    uint64_t t[64];
    size_t n = list_tables(t, 64);
    struct kv_stats st;
    ck_assert_int_eq(kv_stats(db, &st), KV_OK);
    ck_assert_uint_eq(n, st.tables); /* no replaced table left behind */
    close_db(db);
}
END_TEST

/* ---- the stress run -------------------------------------------------------------------- */

/* Keys are owned by writers (key i by writer i % WRITERS); each write of a
 * key carries the key's next counter. A value: "c=<counter, 12 digits>;k=
 * <key>;" then padding whose length depends on the counter, so values
 * change size and kv_get_into meets both outcomes. */
enum { KEYS = 64, WRITERS = 2, READERS = 4, MG = 8 };

struct stress {
    kv_db *db;
    atomic_int stop;
    _Atomic uint64_t done[KEYS]; /* the counter of the last completed write */
    atomic_ulong reads, writes, scans, snaps, flushes;
    atomic_int failures;
    char why[256];
    pthread_mutex_t why_mu;
};

static void report(struct stress *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report(struct stress *s, const char *fmt, ...)
{
    if (atomic_fetch_add(&s->failures, 1) == 0) {
        va_list ap;
        va_start(ap, fmt);
        pthread_mutex_lock(&s->why_mu);
        vsnprintf(s->why, sizeof s->why, fmt, ap);
        pthread_mutex_unlock(&s->why_mu);
        va_end(ap);
    }
}

static size_t value_of(int i, uint64_t c, char *v)
{
    int n = snprintf(v, 64, "c=%012" PRIu64 ";k=%04d;", c, i);
    size_t pad = (size_t)(c * 7 % 90);
    memset(v + n, 'a' + (int)(c % 26), pad);
    return (size_t)n + pad;
}

/* The counter a value carries, after checking that it is the value of key
 * i with that counter, byte for byte; UINT64_MAX when it is not. */
static uint64_t counter_of(int i, const void *val, size_t vlen)
{
    char want[160];
    if (vlen < 2 + 12)
        return UINT64_MAX;
    const char *p = val;
    uint64_t c = 0;
    for (int j = 2; j < 14; j++) {
        if (p[j] < '0' || p[j] > '9')
            return UINT64_MAX;
        c = c * 10 + (uint64_t)(p[j] - '0');
    }
    size_t n = value_of(i, c, want);
    return n == vlen && memcmp(want, val, n) == 0 ? c : UINT64_MAX;
}

static void *stress_writer(void *arg)
{
    struct stress *s = ((void **)arg)[0];
    int w = (int)(intptr_t)((void **)arg)[1];
    uint64_t next[KEYS] = {0};
    uint64_t x = (uint64_t)w * 1000 + 1;
    while (!atomic_load(&s->stop)) {
        x = splitmix(x);
        int i = (int)(x % (KEYS / WRITERS)) * WRITERS + w;
        char k[16], v[160];
        key_of(k, sizeof k, "sk", 4, i);
        size_t vlen = value_of(i, ++next[i], v);
        int rc = kv_put(s->db, k, strlen(k), v, vlen);
        if (rc != KV_OK) {
            report(s, "kv_put: %s", kv_error_text());
            break;
        }
        atomic_store_explicit(&s->done[i], next[i], memory_order_release);
        atomic_fetch_add(&s->writes, 1);
    }
    return NULL;
}

/* Checks one answer for key i: present once a write completed, never older
 * than `floor` (the completed write before the read began, or what this
 * thread saw already); raises seen[i]. */
static void check_answer(struct stress *s, const char *how, int i, int rc, const void *val,
                         size_t vlen, uint64_t floor, uint64_t *seen)
{
    if (rc == KV_NOTFOUND) {
        if (floor > 0)
            report(s, "%s: key %d not found after counter %" PRIu64, how, i, floor);
        return;
    }
    if (rc != KV_OK) {
        report(s, "%s: key %d: rc %d: %s", how, i, rc, kv_error_text());
        return;
    }
    uint64_t c = counter_of(i, val, vlen);
    if (c == UINT64_MAX)
        report(s, "%s: key %d: a value not written (%zu bytes)", how, i, vlen);
    else if (c < floor)
        report(s, "%s: key %d: counter %" PRIu64 " after %" PRIu64, how, i, c, floor);
    else if (c > seen[i])
        seen[i] = c;
}

static uint64_t floor_of(struct stress *s, int i, const uint64_t *seen)
{
    uint64_t d = atomic_load_explicit(&s->done[i], memory_order_acquire);
    return d > seen[i] ? d : seen[i];
}

/* A snapshot's answers, read once and then again later: the same. */
struct snap_check {
    kv_snapshot *snap;
    int rc[KEYS];
    uint64_t c[KEYS];
};

static void snap_read(struct stress *s, struct snap_check *sc, int first)
{
    for (int i = 0; i < KEYS; i++) {
        char k[16], buf[160];
        key_of(k, sizeof k, "sk", 4, i);
        size_t vlen = 0;
        int rc = kv_get_into(s->db, sc->snap, k, strlen(k), buf, sizeof buf, &vlen);
        uint64_t c = rc == KV_OK ? counter_of(i, buf, vlen) : 0;
        if (rc != KV_OK && rc != KV_NOTFOUND)
            report(s, "snapshot read of key %d: rc %d", i, rc);
        if (first) {
            sc->rc[i] = rc;
            sc->c[i] = c;
        } else if (sc->rc[i] != rc || sc->c[i] != c) {
            report(s, "snapshot answer of key %d changed: rc %d counter %" PRIu64
                 " then rc %d counter %" PRIu64, i, sc->rc[i], sc->c[i], rc, c);
        }
    }
}

static void *stress_reader(void *arg)
{
    struct stress *s = ((void **)arg)[0];
    int r = (int)(intptr_t)((void **)arg)[1];
    uint64_t seen[KEYS] = {0};
    uint64_t x = (uint64_t)r * 77 + 5;
    struct snap_check sc = {0};
    unsigned long n = 0;
    while (!atomic_load(&s->stop) && !atomic_load(&s->failures)) {
        x = splitmix(x);
        int i = (int)(x % KEYS);
        char k[16];
        key_of(k, sizeof k, "sk", 4, i);
        uint64_t floor = floor_of(s, i, seen);
        switch ((x >> 32) % 16) {
        case 0: case 1: case 2: case 3: case 4: { /* kv_get */
            void *v = NULL;
            size_t vlen = 0;
            int rc = kv_get(s->db, k, strlen(k), &v, &vlen);
            check_answer(s, "kv_get", i, rc, v, vlen, floor, seen);
            kv_free(v);
            break;
        }
        case 5: case 6: case 7: case 8: { /* kv_get_into, sometimes too small */
            char buf[160];
            size_t cap = (x >> 40) % 2 ? sizeof buf : 40, vlen = 0;
            int rc = kv_get_into(s->db, NULL, k, strlen(k), buf, cap, &vlen);
            if (rc == KV_ERANGE) {
                if (vlen <= cap)
                    report(s, "KV_ERANGE with length %zu for a buffer of %zu", vlen, cap);
                rc = kv_get_into(s->db, NULL, k, strlen(k), buf, sizeof buf, &vlen);
            }
            check_answer(s, "kv_get_into", i, rc, buf, vlen, floor, seen);
            break;
        }
        case 9: case 10: case 11: { /* kv_multi_get of MG keys */
            const void *keys[MG];
            size_t klens[MG], vlens[MG];
            void *vals[MG];
            int st[MG], idx[MG];
            char kb[MG][16];
            uint64_t floors[MG];
            for (int j = 0; j < MG; j++) {
                idx[j] = (i + j * 5) % KEYS;
                key_of(kb[j], sizeof kb[j], "sk", 4, idx[j]);
                keys[j] = kb[j];
                klens[j] = strlen(kb[j]);
                floors[j] = floor_of(s, idx[j], seen);
            }
            int rc = kv_multi_get(s->db, NULL, MG, keys, klens, vals, vlens, st);
            if (rc != KV_OK)
                report(s, "kv_multi_get: rc %d", rc);
            for (int j = 0; j < MG && rc == KV_OK; j++) {
                check_answer(s, "kv_multi_get", idx[j], st[j], vals[j], vlens[j], floors[j],
                             seen);
                kv_free(vals[j]);
            }
            break;
        }
        case 12: case 13: { /* an iterator over everything */
            uint64_t floors[KEYS];
            for (int j = 0; j < KEYS; j++)
                floors[j] = floor_of(s, j, seen);
            kv_iter *it;
            if (kv_iter_new(s->db, NULL, &it) != KV_OK) {
                report(s, "kv_iter_new: %s", kv_error_text());
                break;
            }
            int count[KEYS] = {0};
            for (kv_iter_seek_first(it); kv_iter_valid(it); kv_iter_next(it)) {
                size_t klen, vlen;
                const char *key = kv_iter_key(it, &klen);
                const void *val = kv_iter_value(it, &vlen);
                int j = klen == 6 ? atoi(key + 2) : -1;
                if (j < 0 || j >= KEYS) {
                    report(s, "iterator: a key not written");
                    break;
                }
                count[j]++;
                check_answer(s, "iterator", j, KV_OK, val, vlen, floors[j], seen);
            }
            if (kv_iter_status(it) != KV_OK)
                report(s, "iterator: %s", kv_error_text());
            for (int j = 0; j < KEYS; j++)
                if (count[j] > 1 || (count[j] == 0 && floors[j] > 0))
                    report(s, "iterator: key %d seen %d times", j, count[j]);
            kv_iter_free(it);
            atomic_fetch_add(&s->scans, 1);
            break;
        }
        default: /* snapshots: take one, or re-read and release it */
            if (!sc.snap) {
                if (kv_snapshot_new(s->db, &sc.snap) != KV_OK) {
                    report(s, "kv_snapshot_new: %s", kv_error_text());
                    break;
                }
                snap_read(s, &sc, 1);
            } else {
                snap_read(s, &sc, 0);
                if ((x >> 48) % 4 == 0) {
                    kv_snapshot_release(s->db, sc.snap);
                    sc.snap = NULL;
                    atomic_fetch_add(&s->snaps, 1);
                }
            }
            break;
        }
        n++;
    }
    if (sc.snap)
        kv_snapshot_release(s->db, sc.snap);
    atomic_fetch_add(&s->reads, n);
    return NULL;
}

static void *stress_compactor(void *arg)
{
    struct stress *s = arg;
    int round = 0;
    while (!atomic_load(&s->stop) && !atomic_load(&s->failures)) {
        int rc = round++ % 3 == 2 ? kv_compact_range(s->db, NULL, 0, NULL, 0) : kv_flush(s->db);
        if (rc != KV_OK)
            report(s, "flush or compaction: %s", kv_error_text());
        atomic_fetch_add(&s->flushes, 1);
        struct timespec ms = {0, 2000000};
        nanosleep(&ms, NULL);
    }
    return NULL;
}

START_TEST(stress_readers_writers_compactions)
{
    struct stress *s = calloc(1, sizeof *s);
    ck_assert_ptr_nonnull(s);
    pthread_mutex_init(&s->why_mu, NULL);
    s->db = open_small();
    pthread_t w[WRITERS], r[READERS], c;
    void *wa[WRITERS][2], *ra[READERS][2];
    for (int i = 0; i < WRITERS; i++) {
        wa[i][0] = s;
        wa[i][1] = (void *)(intptr_t)i;
        ck_assert_int_eq(pthread_create(&w[i], NULL, stress_writer, wa[i]), 0);
    }
    for (int i = 0; i < READERS; i++) {
        ra[i][0] = s;
        ra[i][1] = (void *)(intptr_t)i;
        ck_assert_int_eq(pthread_create(&r[i], NULL, stress_reader, ra[i]), 0);
    }
    ck_assert_int_eq(pthread_create(&c, NULL, stress_compactor, s), 0);
    /* Seconds: KV_STRESS_SECONDS, else 3. */
    const char *e = getenv("KV_STRESS_SECONDS");
    int secs = e && atoi(e) > 0 ? atoi(e) : 3;
    for (int t = 0; t < secs * 10 && !atomic_load(&s->failures); t++) {
        struct timespec ms = {0, 100000000};
        nanosleep(&ms, NULL);
    }
    atomic_store(&s->stop, 1);
    for (int i = 0; i < WRITERS; i++)
        pthread_join(w[i], NULL);
    for (int i = 0; i < READERS; i++)
        pthread_join(r[i], NULL);
    pthread_join(c, NULL);
    ck_assert_msg(atomic_load(&s->failures) == 0, "%d failures; first: %s",
                  atomic_load(&s->failures), s->why);
    if (getenv("KV_TEST_VERBOSE"))
        fprintf(stderr, "stress: %lu writes, %lu reads, %lu scans, %lu snapshots, %lu flushes "
                "and compactions\n", atomic_load(&s->writes), atomic_load(&s->reads),
                atomic_load(&s->scans), atomic_load(&s->snaps), atomic_load(&s->flushes));
    ck_assert_uint_gt(atomic_load(&s->writes), 100);
    ck_assert_uint_gt(atomic_load(&s->reads), 100);
    ck_assert_uint_gt(atomic_load(&s->flushes), 3);
    /* Everything written is there, newest last. */
    for (int i = 0; i < KEYS; i++) {
        char k[16];
        key_of(k, sizeof k, "sk", 4, i);
        void *v = NULL;
        size_t vlen;
        uint64_t d = atomic_load(&s->done[i]);
        int rc = kv_get(s->db, k, strlen(k), &v, &vlen);
        if (d == 0)
            ck_assert_int_eq(rc, KV_NOTFOUND);
        else {
            ck_assert_int_eq(rc, KV_OK);
            ck_assert_uint_eq(counter_of(i, v, vlen), d);
        }
        kv_free(v);
    }
    close_db(s->db);
    pthread_mutex_destroy(&s->why_mu);
    free(s);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("view");
    TCase *tc = tcase_create("get_into");
    tcase_add_checked_fixture(tc, setup_files, test_teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, get_into_fits_exact_short_missing);
    tcase_add_test(tc, get_into_reads_at_a_snapshot);
    tcase_add_test(tc, get_into_bad_arguments);
    suite_add_tcase(s, tc);
    tc = tcase_create("lifetime");
    tcase_add_checked_fixture(tc, setup_files, test_teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, replaced_table_outlives_its_last_iterator);
    tcase_add_test(tc, replaced_table_goes_once_running_gets_end);
    tcase_add_test(tc, more_readers_than_slots);
    suite_add_tcase(s, tc);
    tc = tcase_create("stress");
    tcase_add_checked_fixture(tc, setup_files, test_teardown);
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, stress_readers_writers_compactions);
    suite_add_tcase(s, tc);
    return s;
}
