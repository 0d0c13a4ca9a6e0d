/* check_flow.c - write flow control and reads that do not wait: the write
 * controller's promises checked through its counters (kv_stats), not by
 * timing, and a Get that returns while the manifest commit is blocked. */
#define _GNU_SOURCE
#include <check.h>
#include <lmdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <kv/kv.h>
#include "fixture.h"

/* A value that says which key and which round wrote it. */
static size_t value_of(char *v, size_t n, unsigned i, unsigned round)
{
    int len = snprintf(v, n, "v%u.%u.", i, round);
    memset(v + len, 'a' + (char)(i % 26), n - (size_t)len);
    return n;
}

/* Writes keys [0, n) in a scattered order, round `round`, values of vsize
 * bytes (at most 100). */
static void fill_sized(kv_db *db, unsigned n, unsigned round, size_t vsize)
{
    char k[32], v[100];
    for (unsigned j = 0; j < n; j++) {
        unsigned i = (unsigned)(((uint64_t)j * 2654435761u) % n);
        key_of(k, sizeof k, "key", 12, i);
        size_t vl = value_of(v, vsize, i, round);
        ck_assert_int_eq(kv_put(db, k, strlen(k), v, vl), KV_OK);
    }
}

static void check_sized(kv_db *db, unsigned n, unsigned round, size_t vsize)
{
    char k[32], v[100];
    for (unsigned i = 0; i < n; i++) {
        key_of(k, sizeof k, "key", 12, i);
        size_t vl = value_of(v, vsize, i, round);
        void *got;
        size_t glen;
        ck_assert_int_eq(kv_get(db, k, strlen(k), &got, &glen), KV_OK);
        ck_assert_uint_eq(glen, vl);
        ck_assert_int_eq(memcmp(got, v, vl), 0);
        kv_free(got);
    }
}

static void fill(kv_db *db, unsigned n, unsigned round)
{
    fill_sized(db, n, round, 100);
}

static void check_all(kv_db *db, unsigned n, unsigned round)
{
    check_sized(db, n, round, 100);
}

/* Options under which compaction falls behind a writer at once: a small
 * memtable and level-0 delays from three tables on, the level-0 stop 37
 * tables further. The background thread keeps the process's priority
 * (background_nice 0): at the default 19 on a small machine, other tests
 * or programs keeping both cores busy left it so little CPU that a flush
 * outlasted the runway the controller's delays give (1 to 3 stops in 4
 * of 8 runs beside two busy loops), which is starvation, not pacing. */
static void tight_options(kv_options *o)
{
    kv_options_init(o);
    o->background_nice = 0;
    o->write_buffer_size = 256 << 10;
    o->l0_compaction_trigger = 2;
    o->l0_slowdown_trigger = 3;
    o->l0_stop_trigger = 40;
    o->target_file_size = 256 << 10;
    o->max_bytes_for_level_base = 1 << 20;
    o->compression = KV_COMPRESSION_NONE;
}

/* The controller engages (writes are delayed), never asks one write to
 * wait longer than its documented maximum, keeps writers from the hard
 * stops at settings where pacing is enough, and loses nothing. Pacing is
 * enough when the writes in the last quarter of a memtable, each held up
 * to 1 ms, outlast a flush: 20-byte values put about 1,400 writes there,
 * over a second of runway, which a flush of 256 KiB keeps within even
 * under ThreadSanitizer beside other tests. */
START_TEST(controller_delays_instead_of_stopping)
{
    kv_options o;
    tight_options(&o);
    kv_db *db;
    ck_assert_int_eq(kv_open(test_dir, &o, &db), KV_OK);
    const unsigned n = 200000; /* about 9 MB of entries: some 35 memtables */
    fill_sized(db, n, 1, 20);
    struct kv_stats s;
    ck_assert_int_eq(kv_stats(db, &s), KV_OK);
    if (getenv("KV_TEST_VERBOSE"))
        fprintf(stderr, "delays %llu (%.3f s, longest asked %llu us), stops %llu (%.3f s), "
                "rate now %llu B/s, pending %llu B, l0 %llu\n",
                (unsigned long long)s.slowdowns, (double)s.slowdown_micros / 1e6,
                (unsigned long long)s.write_delay_max_micros, (unsigned long long)s.stalls,
                (double)s.stall_micros / 1e6, (unsigned long long)s.delayed_write_rate,
                (unsigned long long)s.pending_compaction_bytes,
                (unsigned long long)s.l0_tables);
    ck_assert_uint_gt(s.slowdowns, 0);
    ck_assert_uint_gt(s.write_delay_max_micros, 0);
    ck_assert_uint_le(s.write_delay_max_micros, KV_WRITE_DELAY_MAX_MICROS);
    ck_assert_uint_eq(s.stalls, 0);
    ck_assert_uint_eq(s.stall_micros, 0);
    check_sized(db, n, 1, 20);
    ck_assert_int_eq(kv_close(db), KV_OK);
    ck_assert_int_eq(kv_open(test_dir, &o, &db), KV_OK);
    check_sized(db, n, 1, 20);
    ck_assert_int_eq(kv_close(db), KV_OK);
}
END_TEST

/* A large batch runs the controller's clock far ahead: the wait is still
 * cut at the maximum, the rest paid by the writes after it. */
START_TEST(large_batches_wait_at_most_the_maximum)
{
    kv_options o;
    tight_options(&o);
    o.delayed_write_rate = 64 << 10; /* a 200 KiB batch is 3 s of rate */
    kv_db *db;
    ck_assert_int_eq(kv_open(test_dir, &o, &db), KV_OK);
    char k[32], v[100];
    unsigned next = 0;
    for (int b = 0; b < 40; b++) {
        kv_batch *batch;
        ck_assert_int_eq(kv_batch_new(&batch), KV_OK);
        for (int j = 0; j < 1500; j++, next++) {
            key_of(k, sizeof k, "key", 12, next);
            size_t vl = value_of(v, sizeof v, next, 2);
            ck_assert_int_eq(kv_batch_put(batch, k, strlen(k), v, vl), KV_OK);
        }
        ck_assert_int_eq(kv_write(db, batch), KV_OK);
        kv_batch_free(batch);
    }
    struct kv_stats s;
    ck_assert_int_eq(kv_stats(db, &s), KV_OK);
    ck_assert_uint_gt(s.slowdowns, 0);
    ck_assert_uint_eq(s.write_delay_max_micros, KV_WRITE_DELAY_MAX_MICROS);
    check_all(db, next, 2);
    ck_assert_int_eq(kv_close(db), KV_OK);
}
END_TEST

/* Without debt the controller stays out of the way. */
START_TEST(no_debt_no_delay)
{
    kv_options o;
    kv_options_init(&o);
    o.l0_compaction_trigger = o.l0_slowdown_trigger = o.l0_stop_trigger = 1000;
    kv_db *db;
    ck_assert_int_eq(kv_open(test_dir, &o, &db), KV_OK);
    fill(db, 5000, 3);
    struct kv_stats s;
    ck_assert_int_eq(kv_stats(db, &s), KV_OK);
    ck_assert_uint_eq(s.slowdowns, 0);
    ck_assert_uint_eq(s.delayed_write_rate, 0);
    ck_assert_uint_eq(s.write_delay_max_micros, 0);
    ck_assert_int_eq(kv_close(db), KV_OK);
}
END_TEST

START_TEST(options_version_6_fields)
{
    kv_options o;
    kv_options_init(&o);
    ck_assert_uint_ge(o.version, 6);
    ck_assert_uint_eq(o.delayed_write_rate, 16u << 20);
    ck_assert_int_eq(o.background_nice, -1);
    kv_options old = o;
    old.version = 5;
    old.delayed_write_rate = 1; /* past the version-5 struct: never read */
    old.background_nice = 99;
    kv_db *db;
    ck_assert_int_eq(kv_open(test_dir, &old, &db), KV_OK);
    ck_assert_int_eq(kv_close(db), KV_OK);
    o.delayed_write_rate = 1023;
    ck_assert_int_eq(kv_open(test_dir, &o, &db), KV_EINVAL);
    ck_assert_ptr_null(db);
    kv_options_init(&o);
    o.background_nice = 20;
    ck_assert_int_eq(kv_open(test_dir, &o, &db), KV_EINVAL);
    kv_options_init(&o);
    o.background_nice = 19;
    ck_assert_int_eq(kv_open(test_dir, &o, &db), KV_OK);
    fill(db, 2000, 4);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    check_all(db, 2000, 4);
    ck_assert_int_eq(kv_close(db), KV_OK);
}
END_TEST

/* ---- a Get while the manifest commit is blocked ------------------------------------- */

/* A child process holds the manifest's LMDB write transaction (LMDB's
 * writer lock is shared between processes), so the background thread's
 * commit of a flush blocks inside LMDB until the child lets go. */
static pid_t hold_manifest(const char *path, int *release_fd)
{
    int ready[2], release[2];
    ck_assert_int_eq(pipe(ready), 0);
    ck_assert_int_eq(pipe(release), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(ready[0]);
        close(release[1]);
        MDB_env *env;
        MDB_txn *txn;
        char ok = 0;
        if (mdb_env_create(&env) == 0 && mdb_env_set_maxdbs(env, 2) == 0 &&
            mdb_env_open(env, path, MDB_NOSUBDIR | MDB_NOTLS, 0644) == 0 &&
            mdb_txn_begin(env, NULL, 0, &txn) == 0)
            ok = 1;
        if (write(ready[1], &ok, 1) != 1)
            _exit(2);
        char c;
        if (read(release[0], &c, 1) < 0)
            _exit(3);
        if (ok) {
            mdb_txn_abort(txn);
            mdb_env_close(env);
        }
        _exit(ok ? 0 : 1);
    }
    close(ready[1]);
    close(release[0]);
    char ok = 0;
    ck_assert_int_eq(read(ready[0], &ok, 1), 1);
    ck_assert_int_eq(ok, 1);
    close(ready[0]);
    *release_fd = release[1];
    return pid;
}

struct flusher {
    kv_db *db;
    int rc;
    atomic_int done;
};

static void *flush_thread(void *arg)
{
    struct flusher *f = arg;
    f->rc = kv_flush(f->db);
    atomic_store(&f->done, 1);
    return NULL;
}

START_TEST(get_returns_while_manifest_commit_is_blocked)
{
    kv_options o;
    kv_options_init(&o);
    kv_db *db;
    ck_assert_int_eq(kv_open(test_dir, &o, &db), KV_OK);
    fill(db, 3000, 5);
    ck_assert_int_eq(kv_flush(db), KV_OK); /* some of it in a table */
    fill(db, 1000, 6);                     /* and newer values in the memtable */
    char man[300];
    snprintf(man, sizeof man, "%s/MANIFEST", test_dir);
    int release;
    pid_t child = hold_manifest(man, &release);

    struct flusher f = {.db = db};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, flush_thread, &f), 0);
    /* The flush writes its table, then waits in the commit. */
    struct timespec ms = {0, 200 * 1000000L};
    nanosleep(&ms, NULL);
    ck_assert_int_eq(atomic_load(&f.done), 0);

    /* Gets (the table, the immutable memtable being flushed) answer at
     * once; Check's timeout fails the test if one waits for the commit. */
    char k[32], v[100];
    for (unsigned i = 0; i < 3000; i++) {
        key_of(k, sizeof k, "key", 12, i);
        size_t vl = value_of(v, sizeof v, i, i < 1000 ? 6 : 5);
        void *got;
        size_t glen;
        ck_assert_int_eq(kv_get(db, k, strlen(k), &got, &glen), KV_OK);
        ck_assert_uint_eq(glen, vl);
        ck_assert_int_eq(memcmp(got, v, vl), 0);
        kv_free(got);
    }
    key_of(k, sizeof k, "key", 12, 99999);
    void *got;
    size_t glen;
    ck_assert_int_eq(kv_get(db, k, strlen(k), &got, &glen), KV_NOTFOUND);
    struct kv_stats s;
    ck_assert_int_eq(kv_stats(db, &s), KV_OK); /* so do the stats */
    ck_assert_uint_eq(s.compaction_running, 1);
    ck_assert_int_eq(atomic_load(&f.done), 0); /* the commit was blocked all along */

    ck_assert_int_eq(write(release, "x", 1), 1);
    close(release);
    int status;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(f.rc, KV_OK);
    ck_assert_int_eq(kv_close(db), KV_OK);
    ck_assert_int_eq(kv_open(test_dir, &o, &db), KV_OK);
    for (unsigned i = 0; i < 3000; i++) {
        key_of(k, sizeof k, "key", 12, i);
        size_t vl = value_of(v, sizeof v, i, i < 1000 ? 6 : 5);
        ck_assert_int_eq(kv_get(db, k, strlen(k), &got, &glen), KV_OK);
        ck_assert_int_eq(memcmp(got, v, vl), 0);
        kv_free(got);
    }
    ck_assert_int_eq(kv_close(db), KV_OK);
}
END_TEST

#ifdef __linux__
/* The nice value of thread tid of this process (/proc, field 19), or 99
 * when it cannot be read. */
static int nice_of(long tid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%ld/stat", tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 99;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* the name may hold spaces */
    int nice = 99;
    /* After ")": state (field 3) ... nice (field 19), 16 fields on. */
    for (int field = 3; p && field <= 19; field++) {
        p = strchr(p + 1, ' ');
        if (p && field == 19)
            nice = atoi(p + 1);
    }
    return nice;
}

/* The highest nice value among this process's threads. */
static int highest_nice(void)
{
    DIR *d = opendir("/proc/self/task");
    ck_assert_ptr_nonnull(d);
    int best = -100;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        int n = nice_of(atol(e->d_name));
        if (n != 99 && n > best)
            best = n;
    }
    closedir(d);
    return best;
}

/* Waits up to 2 s for a thread of nice `want` to appear (the background
 * thread lowers itself as it starts); the highest nice seen. */
static int wait_for_nice(int want)
{
    int n = highest_nice();
    for (int i = 0; i < 200 && n != want; i++) {
        struct timespec ms = {0, 10000000};
        nanosleep(&ms, NULL);
        n = highest_nice();
    }
    return n;
}

/* The background thread runs background_nice levels below the process:
 * by default 19 on a machine of at most four CPUs, else 0; as set, else. */
START_TEST(background_thread_priority)
{
    int base = nice_of((long)getpid());
    ck_assert_int_ne(base, 99);
    ck_assert_int_eq(highest_nice(), base); /* no thread lowered yet */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int inc = cpus > 0 && cpus <= 4 ? 19 : 0;
    int want = base + inc > 19 ? 19 : base + inc;
    kv_options o;
    kv_options_init(&o);
    kv_db *db;
    ck_assert_int_eq(kv_open(test_dir, &o, &db), KV_OK);
    ck_assert_int_eq(wait_for_nice(want), want);
    ck_assert_int_eq(kv_close(db), KV_OK);
    o.background_nice = 5;
    want = base + 5 > 19 ? 19 : base + 5;
    ck_assert_int_eq(kv_open(test_dir, &o, &db), KV_OK);
    ck_assert_int_eq(wait_for_nice(want), want);
    ck_assert_int_eq(kv_close(db), KV_OK);
}
END_TEST
#endif

Suite *test_suite(void)
{
    Suite *s = suite_create("flow");
    TCase *tc = tcase_create("controller");
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, controller_delays_instead_of_stopping);
    tcase_add_test(tc, large_batches_wait_at_most_the_maximum);
    tcase_add_test(tc, no_debt_no_delay);
    tcase_add_test(tc, options_version_6_fields);
#ifdef __linux__
    tcase_add_test(tc, background_thread_priority);
#endif
    suite_add_tcase(s, tc);
    tc = tcase_create("reads");
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, get_returns_while_manifest_commit_is_blocked);
    suite_add_tcase(s, tc);
    return s;
}
