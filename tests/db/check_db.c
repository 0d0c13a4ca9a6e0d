/* check_db.c - the store through its public API (kv.h): binary keys and
 * limits, a million writes across many flushes and compactions with the
 * filters' false-positive rate measured, deletes across flushes, atomic
 * batches and sync durability across SIGKILL, damaged log tails and tables,
 * threads, the directory lock, metrics and open options. */
#define _XOPEN_SOURCE 700
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <kv/kv.h>
#include <kv/sstable.h>

#include "util/tally.h" /* KV_TALLY_STRIPES: how many threads to start */
#include "fixture.h"

/* ---- helpers -------------------------------------------------------------------- */

static void fill_bytes(uint64_t seed, uint8_t *p, size_t n)
{
    uint64_t x = seed;
    for (size_t i = 0; i < n; i += 8) {
        x = splitmix(x);
        memcpy(p + i, &x, n - i < 8 ? n - i : 8);
    }
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Whole-buffer write/read on a pipe (8-byte records are atomic on pipes). */
static int write_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Acknowledgements from a child: 8-byte indexes 0, 1, 2, ... in order. */
struct acks {
    int fd;
    uint8_t part[8];
    size_t have;
    uint64_t count; /* acknowledgements received */
    int out_of_order, eof;
};

static void acks_take(struct acks *a, const uint8_t *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        a->part[a->have++] = buf[i];
        if (a->have == 8) {
            uint64_t v;
            memcpy(&v, a->part, 8);
            if (v != a->count)
                a->out_of_order = 1;
            a->count++;
            a->have = 0;
        }
    }
}

/* Reads what is there, waiting at most timeout_ms for something. */
static void acks_poll(struct acks *a, int timeout_ms)
{
    if (a->eof)
        return;
    struct pollfd pf = {.fd = a->fd, .events = POLLIN};
    int r = poll(&pf, 1, timeout_ms);
    if (r <= 0)
        return;
    uint8_t buf[4096];
    ssize_t n = read(a->fd, buf, sizeof buf);
    if (n == 0)
        a->eof = 1;
    else if (n > 0)
        acks_take(a, buf, (size_t)n);
}

/* Reads to the end (the child is dead: the write end is closed). */
static void acks_drain(struct acks *a)
{
    uint8_t buf[4096];
    while (!a->eof) {
        ssize_t n = read(a->fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            a->eof = 1;
        else
            acks_take(a, buf, (size_t)n);
    }
}

/* SIGKILLs the child and reaps it; it must not have exited on its own. */
static void kill_child(pid_t pid)
{
    kill(pid, SIGKILL);
    int st;
    while (waitpid(pid, &st, 0) < 0)
        ck_assert_int_eq(errno, EINTR);
    ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
                  "child ended by itself before the kill (exit code %d)",
                  WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

/* ---- basics: binary keys, limits, arguments, options ------------------------------ */

/* Keys past 64 KiB (the limit before issue 51) up to KV_MAX_KEY_SIZE: put,
 * read back, range-deleted and iterated, through the log, flushes, a
 * compaction and a reopen; values big enough for blob files stay in the
 * tables (a blob record's key is at most 64 KiB), and the database is
 * marked format version 2 before the log holds such a key. */
static void long_key(uint8_t *k, size_t n, int i)
{
    memset(k, 'L', n);
    k[0] = (uint8_t)('a' + i);
    k[n - 1] = (uint8_t)i;
}

START_TEST(long_keys_round_trip)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_options o;
    kv_options_init(&o);
    o.min_blob_size = 512;
    o.write_buffer_size = (size_t)1 << 20;
    kv_db *db = open_db(p, &o);
    static const size_t lens[] = {(size_t)64 << 10, ((size_t)64 << 10) + 1, 99900,
                                  (size_t)256 << 10, KV_MAX_KEY_SIZE};
    enum { N = sizeof lens / sizeof lens[0] };
    uint8_t *k = malloc(KV_MAX_KEY_SIZE + 1), *big = malloc(4096);
    ck_assert_ptr_nonnull(k);
    ck_assert_ptr_nonnull(big);
    memset(big, 'v', 4096);
    kv_dir_info *info;
    ck_assert_int_eq(kv_inspect(p, &info), KV_OK);
    ck_assert_uint_eq(info->format_version, 1);
    kv_inspect_free(info);
    for (int i = 0; i < N; i++) {
        long_key(k, lens[i], i);
        big[0] = (uint8_t)i;
        /* Even ones small, odd ones of blob size. */
        put_kv(db, k, lens[i], big, i % 2 ? 4096 : 10);
    }
    ck_assert_int_eq(kv_put(db, k, KV_MAX_KEY_SIZE + 1, "x", 1), KV_EINVAL);
    ck_assert_int_eq(kv_inspect(p, &info), KV_OK);
    ck_assert_uint_eq(info->format_version, 2);
    kv_inspect_free(info);
    for (int pass = 0; pass < 3; pass++) {
        for (int i = 0; i < N; i++) {
            long_key(k, lens[i], i);
            big[0] = (uint8_t)i;
            expect_value(db, k, lens[i], big, i % 2 ? 4096 : 10);
        }
        kv_iter *it;
        ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
        int seen = 0;
        for (kv_iter_seek_first(it); kv_iter_valid(it); kv_iter_next(it)) {
            size_t kl;
            const void *key = kv_iter_key(it, &kl);
            ck_assert_uint_eq(kl, lens[seen]);
            long_key(k, lens[seen], seen);
            ck_assert_mem_eq(key, k, kl);
            seen++;
        }
        ck_assert_int_eq(seen, N);
        kv_iter_free(it);
        if (pass == 0)
            ck_assert_int_eq(kv_flush(db), KV_OK);
        if (pass == 1) {
            compact_all(db);
            db = reopen_db(db, p, &o);
        }
    }
    struct kv_stats st;
    get_stats(db, &st);
    ck_assert_uint_eq(st.blob_files, 0); /* every key over 64 KiB */
    /* A range delete whose ends are long keys. */
    uint8_t *e = malloc(KV_MAX_KEY_SIZE);
    ck_assert_ptr_nonnull(e);
    long_key(k, lens[1], 1);
    long_key(e, lens[3], 3);
    ck_assert_int_eq(kv_delete_range(db, k, lens[1], e, lens[3]), KV_OK);
    expect_absent(db, k, lens[1]);
    long_key(k, lens[2], 2);
    expect_absent(db, k, lens[2]);
    long_key(k, lens[3], 3);
    big[0] = 3;
    expect_value(db, k, lens[3], big, 4096);
    close_db(db);
    free(e);
    free(k);
    free(big);
}
END_TEST

START_TEST(binary_keys_and_limits)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_db *db = open_db(p, NULL);

    /* Keys with NUL bytes are distinct from their prefixes. */
    static const char k1[] = {'a', 0, 'b'}, k2[] = {'a', 0, 'c'}, k3[] = {'a', 0}, k4[] = {'a'};
    ck_assert_int_eq(kv_put(db, k1, 3, "v1", 2), KV_OK);
    ck_assert_int_eq(kv_put(db, k2, 3, "v2\0x", 4), KV_OK);
    ck_assert_int_eq(kv_put(db, k3, 2, "v3", 2), KV_OK);
    ck_assert_int_eq(kv_put(db, k4, 1, "v4", 2), KV_OK);
    expect_value(db, k1, 3, "v1", 2);
    expect_value(db, k2, 3, "v2\0x", 4);
    expect_value(db, k3, 2, "v3", 2);
    expect_value(db, k4, 1, "v4", 2);
    expect_absent(db, "a\0a", 3);
    expect_absent(db, "a\0b\0", 4);

    /* The empty key, given as NULL or as a pointer. */
    expect_absent(db, "", 0);
    ck_assert_int_eq(kv_put(db, NULL, 0, "empty key", 9), KV_OK);
    expect_value(db, "", 0, "empty key", 9);
    expect_value(db, NULL, 0, "empty key", 9);
    ck_assert_int_eq(kv_put(db, "", 0, "empty key 2", 11), KV_OK);
    expect_value(db, NULL, 0, "empty key 2", 11);
    expect_value(db, k4, 1, "v4", 2);

    /* The empty value: KV_OK, length 0, a buffer all the same. */
    ck_assert_int_eq(kv_put(db, "ev", 2, NULL, 0), KV_OK);
    ck_assert_int_eq(kv_put(db, "ev2", 3, "", 0), KV_OK);
    for (int i = 0; i < 2; i++) {
        void *v = NULL;
        size_t n = 99;
        ck_assert_int_eq(kv_get(db, "ev2", 2 + (size_t)i, &v, &n), KV_OK);
        ck_assert_ptr_nonnull(v);
        ck_assert_uint_eq(n, 0);
        kv_free(v);
    }

    /* Overwrite, delete, delete of an absent key. */
    ck_assert_int_eq(kv_put(db, "ow", 2, "first", 5), KV_OK);
    ck_assert_int_eq(kv_put(db, "ow", 2, "second!", 7), KV_OK);
    expect_value(db, "ow", 2, "second!", 7);
    ck_assert_int_eq(kv_delete(db, "ow", 2), KV_OK);
    expect_absent(db, "ow", 2);
    ck_assert_int_eq(kv_delete(db, "ow", 2), KV_OK);
    ck_assert_int_eq(kv_delete(db, "never there", 11), KV_OK);
    expect_absent(db, "never there", 11);
    ck_assert_int_eq(kv_put(db, "ow", 2, "third", 5), KV_OK);
    expect_value(db, "ow", 2, "third", 5);
    ck_assert_int_eq(kv_delete(db, k1, 3), KV_OK);
    expect_absent(db, k1, 3);
    expect_value(db, k2, 3, "v2\0x", 4);

    /* A key of exactly KV_MAX_KEY_SIZE bytes; one byte more is refused and
     * changes nothing (the longer key starts with the maximal one). */
    uint8_t *bigk = malloc(KV_MAX_KEY_SIZE + 1);
    ck_assert_ptr_nonnull(bigk);
    fill_bytes(7, bigk, KV_MAX_KEY_SIZE + 1);
    ck_assert_int_eq(kv_put(db, bigk, KV_MAX_KEY_SIZE, "max key", 7), KV_OK);
    expect_value(db, bigk, KV_MAX_KEY_SIZE, "max key", 7);
    ck_assert_int_eq(kv_put(db, bigk, KV_MAX_KEY_SIZE + 1, "too long", 8), KV_EINVAL);
    ck_assert_int_eq(kv_delete(db, bigk, KV_MAX_KEY_SIZE + 1), KV_EINVAL);
    {
        void *v = NULL;
        size_t n;
        ck_assert_int_eq(kv_get(db, bigk, KV_MAX_KEY_SIZE + 1, &v, &n), KV_EINVAL);
    }
    expect_value(db, bigk, KV_MAX_KEY_SIZE, "max key", 7);
    expect_absent(db, bigk, KV_MAX_KEY_SIZE - 1);

    /* A value of exactly KV_MAX_VALUE_SIZE; one byte more is refused and
     * the key keeps its value. */
    uint8_t *bigv = malloc(KV_MAX_VALUE_SIZE + 1);
    ck_assert_ptr_nonnull(bigv);
    fill_bytes(8, bigv, KV_MAX_VALUE_SIZE + 1);
    ck_assert_int_eq(kv_put(db, "bigv", 4, bigv, KV_MAX_VALUE_SIZE), KV_OK);
    expect_value(db, "bigv", 4, bigv, KV_MAX_VALUE_SIZE);
    ck_assert_int_eq(kv_put(db, "bigv", 4, bigv + 1, KV_MAX_VALUE_SIZE + 1), KV_EINVAL);
    ck_assert_int_eq(kv_put(db, "k", 1, bigv, KV_MAX_VALUE_SIZE + 1), KV_EINVAL);
    expect_value(db, "bigv", 4, bigv, KV_MAX_VALUE_SIZE);
    expect_absent(db, "k", 1);

    /* All of it survives a flush, and a close and open. */
    ck_assert_int_eq(kv_flush(db), KV_OK);
    expect_value(db, "bigv", 4, bigv, KV_MAX_VALUE_SIZE);
    expect_value(db, bigk, KV_MAX_KEY_SIZE, "max key", 7);
    close_db(db);
    db = open_db(p, NULL);
    expect_value(db, "bigv", 4, bigv, KV_MAX_VALUE_SIZE);
    expect_value(db, bigk, KV_MAX_KEY_SIZE, "max key", 7);
    expect_value(db, NULL, 0, "empty key 2", 11);
    expect_value(db, k2, 3, "v2\0x", 4);
    expect_value(db, k3, 2, "v3", 2);
    expect_value(db, k4, 1, "v4", 2);
    expect_value(db, "ow", 2, "third", 5);
    expect_value(db, "ev", 2, "", 0);
    expect_absent(db, k1, 3);
    expect_absent(db, bigk, KV_MAX_KEY_SIZE - 1);
    free(bigk);
    free(bigv);
    close_db(db);
}
END_TEST

START_TEST(bad_arguments)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_db *db = open_db(p, NULL);
    ck_assert_int_eq(kv_put(db, "k", 1, "v", 1), KV_OK);
    void *v = NULL;
    size_t n = 0;
    struct kv_stats s;
    char *text = NULL;
    kv_table_stats *ts = NULL;
    size_t nt = 0;

    ck_assert_int_eq(kv_put(NULL, "k", 1, "v", 1), KV_EINVAL);
    ck_assert_int_eq(kv_delete(NULL, "k", 1), KV_EINVAL);
    ck_assert_int_eq(kv_get(NULL, "k", 1, &v, &n), KV_EINVAL);
    ck_assert_int_eq(kv_flush(NULL), KV_EINVAL);
    ck_assert_int_eq(kv_stats(NULL, &s), KV_EINVAL);
    ck_assert_int_eq(kv_stats(db, NULL), KV_EINVAL);
    ck_assert_int_eq(kv_metrics_text(NULL, &text), KV_EINVAL);
    ck_assert_int_eq(kv_metrics_text(db, NULL), KV_EINVAL);
    ck_assert_int_eq(kv_table_stats_get(NULL, &ts, &nt), KV_EINVAL);
    ck_assert_int_eq(kv_table_stats_get(db, NULL, &nt), KV_EINVAL);
    ck_assert_int_eq(kv_table_stats_get(db, &ts, NULL), KV_EINVAL);

    /* NULL bytes with a nonzero length. */
    ck_assert_int_eq(kv_put(db, NULL, 1, "v", 1), KV_EINVAL);
    ck_assert_int_eq(kv_put(db, "k", 1, NULL, 1), KV_EINVAL);
    ck_assert_int_eq(kv_delete(db, NULL, 1), KV_EINVAL);
    ck_assert_int_eq(kv_get(db, NULL, 1, &v, &n), KV_EINVAL);
    /* NULL out pointers. */
    ck_assert_int_eq(kv_get(db, "k", 1, NULL, &n), KV_EINVAL);
    ck_assert_int_eq(kv_get(db, "k", 1, &v, NULL), KV_EINVAL);
    /* None of that changed anything. */
    expect_value(db, "k", 1, "v", 1);
    struct kv_stats s2;
    get_stats(db, &s2);
    ck_assert_uint_eq(s2.puts, 1);
    ck_assert_uint_eq(s2.deletes, 0);
    close_db(db);

    ck_assert_int_eq(kv_close(NULL), KV_OK);
    db = (kv_db *)test_dir; /* a stale pointer, which a failed open must clear */
    ck_assert_int_eq(kv_open(NULL, NULL, &db), KV_EINVAL);
    ck_assert_ptr_null(db);
    ck_assert_int_eq(kv_open(p, NULL, NULL), KV_EINVAL);

    /* kv_strerror: every code has its own text. */
    static const int codes[] = {KV_OK,       KV_NOTFOUND, KV_EINVAL, KV_ENOMEM, KV_ECORRUPT,
                                KV_EIO,      KV_EBUSY,    KV_ENOSPC, KV_EPERM};
    size_t nc = sizeof codes / sizeof codes[0];
    for (size_t i = 0; i < nc; i++) {
        const char *a = kv_strerror(codes[i]);
        ck_assert_ptr_nonnull(a);
        ck_assert_uint_gt(strlen(a), 0);
        for (size_t j = 0; j < i; j++)
            ck_assert_str_ne(a, kv_strerror(codes[j]));
        ck_assert_str_ne(a, kv_strerror(-1000));
    }
    ck_assert_ptr_nonnull(kv_strerror(-1000));
    ck_assert_ptr_nonnull(kv_strerror(12345));
}
END_TEST

START_TEST(bad_options)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_options o;

    /* A struct that was never initialised (version 0). */
    memset(&o, 0, sizeof o);
    kv_db *db = (kv_db *)test_dir;
    ck_assert_int_eq(kv_open(p, &o, &db), KV_EINVAL);
    ck_assert_ptr_null(db);
    kv_options_init(&o);
    ck_assert_uint_eq(o.version, KV_OPTIONS_VERSION);
    o.version = 0;
    ck_assert_int_eq(kv_open(p, &o, &db), KV_EINVAL);
    o.version = KV_OPTIONS_VERSION + 1;
    ck_assert_int_eq(kv_open(p, &o, &db), KV_EINVAL);
    kv_options_init(NULL); /* a no-op */

    for (int bad = 0; bad < 6; bad++) {
        kv_options_init(&o);
        switch (bad) {
        case 0: o.write_buffer_size = 0; break;
        case 1: o.write_buffer_size = ((size_t)64 << 10) - 1; break;
        case 2: o.bloom_bits_per_key = -1; break;
        case 3: o.filter_layout = 7; break;
        case 4: o.compression = 9; break;
        case 5: o.bloom_bits_per_key = 1001; break;
        }
        db = (kv_db *)test_dir;
        ck_assert_msg(kv_open(p, &o, &db) == KV_EINVAL, "bad option %d accepted", bad);
        ck_assert_ptr_null(db);
    }

    /* The smallest allowed write buffer is fine, and no failed open left
     * the directory locked. */
    kv_options_init(&o);
    o.write_buffer_size = (size_t)64 << 10;
    db = open_db(p, &o);
    ck_assert_int_eq(kv_put(db, "k", 1, "v", 1), KV_OK);
    expect_value(db, "k", 1, "v", 1);
    close_db(db);
}
END_TEST

/* ---- bulk: a million puts, reopen, every last value; the filters' FPR ----------- */

#define BULK_PUTS 1000000u
#define BULK_ABSENT 1000000u

static void bulk_key(uint32_t id, uint8_t k[16])
{
    uint64_t a = splitmix(0xB01C0000ull + id), b = splitmix(a);
    memcpy(k, &a, 8);
    memcpy(k + 8, &b, 8);
}

/* The value of version `ver` of key `id`: 16..100 bytes. */
static size_t bulk_value(uint32_t id, uint32_t ver, uint8_t v[100])
{
    uint64_t seed = splitmix(((uint64_t)id << 20) ^ ver ^ 0x7A7A000000000000ull);
    size_t len = 16 + (size_t)(seed % 85);
    fill_bytes(seed, v, len);
    memcpy(v, &id, 4);
    memcpy(v + 4, &ver, 4);
    return len;
}

/* The weighted expected FPR over the probes made between two listings. */
static double probe_weighted_fpr(const kv_table_stats *t0, size_t n0, const kv_table_stats *t1,
                                 size_t n1, uint64_t *probes)
{
    double w = 0;
    uint64_t total = 0;
    for (size_t i = 0; i < n1; i++) {
        uint64_t before = 0;
        for (size_t j = 0; j < n0; j++)
            if (t0[j].number == t1[i].number)
                before = t0[j].probes;
        ck_assert_uint_ge(t1[i].probes, before);
        uint64_t d = t1[i].probes - before;
        total += d;
        w += (double)d * t1[i].expected_fpr;
    }
    *probes = total;
    return total ? w / (double)total : 0;
}

START_TEST(million_puts_and_filter_fpr)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_options o;
    kv_options_init(&o);
    o.write_buffer_size = (size_t)256 << 10;
    o.target_file_size = (size_t)1 << 20;
    kv_db *db = open_db(p, &o);

    uint16_t *ver = calloc(BULK_PUTS, sizeof *ver);
    ck_assert_ptr_nonnull(ver);
    uint32_t ids = 0, overwrites = 0;
    uint8_t k[16], v[100];
    uint64_t t0 = now_ms();
    for (uint32_t i = 0; i < BULK_PUTS; i++) {
        uint64_t x = splitmix(0x5EED0000ull + i);
        uint32_t id;
        if (ids > 0 && x % 8 == 0) {
            id = (uint32_t)((x >> 8) % ids); /* an overwrite */
            overwrites++;
        } else
            id = ids++;
        ver[id]++;
        bulk_key(id, k);
        size_t vl = bulk_value(id, ver[id], v);
        int rc = kv_put(db, k, 16, v, vl);
        if (rc != KV_OK)
            ck_abort_msg("put %u: %s", i, kv_strerror(rc));
    }
    ck_assert_uint_gt(overwrites, BULK_PUTS / 10);
    struct kv_stats s;
    get_stats(db, &s);
    ck_assert_uint_eq(s.puts, BULK_PUTS);
    ck_assert_uint_gt(s.flushes, 20);
    fprintf(stderr, "bulk: %u puts (%u keys) in %llu ms; %llu flushes, %llu compactions, "
            "%llu stalls, %llu slowdowns\n", BULK_PUTS, ids,
            (unsigned long long)(now_ms() - t0), (unsigned long long)s.flushes,
            (unsigned long long)s.compactions, (unsigned long long)s.stalls,
            (unsigned long long)s.slowdowns);
    close_db(db);

    /* Reopen with no block cache (every data block a read from the file),
     * and with compaction out of reach, so that the tables stay put while
     * the probes are counted. */
    kv_options_init(&o);
    o.block_cache_size = 0;
    o.l0_compaction_trigger = 1 << 20;
    o.l0_slowdown_trigger = 1 << 20;
    o.l0_stop_trigger = 1 << 20;
    o.max_bytes_for_level_base = (size_t)1 << 40;
    o.idle_compaction_ms = 0; /* nor an idle one: it would merge level 0 away */
    db = open_db(p, &o);

    t0 = now_ms();
    uint32_t bad = 0, first_bad = 0;
    for (uint32_t id = 0; id < ids; id++) {
        bulk_key(id, k);
        size_t vl = bulk_value(id, ver[id], v);
        void *got = NULL;
        size_t n = 0;
        int rc = kv_get(db, k, 16, &got, &n);
        if (rc != KV_OK || n != vl || memcmp(got, v, vl) != 0) {
            if (!bad++)
                first_bad = id;
        }
        if (rc == KV_OK)
            kv_free(got);
    }
    ck_assert_msg(bad == 0, "%u of %u keys lack their last value (first: id %u)", bad, ids,
                  first_bad);
    free(ver);
    fprintf(stderr, "bulk: %u gets in %llu ms\n", ids, (unsigned long long)(now_ms() - t0));

    kv_table_stats *ts0 = NULL, *ts1 = NULL;
    size_t n0 = 0, n1 = 0;
    ck_assert_int_eq(kv_table_stats_get(db, &ts0, &n0), KV_OK);
    ck_assert_uint_ge(n0, 20);
    for (size_t i = 0; i < n0; i++) {
        ck_assert_int_ne(ts0[i].filter_layout, -1);
        ck_assert_double_gt(ts0[i].expected_fpr, 0);
        ck_assert_double_lt(ts0[i].expected_fpr, 0.05);
    }
    struct kv_stats a, b;
    get_stats(db, &a);
    ck_assert_uint_eq(a.tables, n0);

    /* Absent keys: 17 bytes long, so none can be one of the 16-byte keys. */
    t0 = now_ms();
    uint8_t q[17];
    for (uint32_t i = 0; i < BULK_ABSENT; i++) {
        fill_bytes(0xAB5E47ull * 1000003 + i, q, 17);
        void *got = NULL;
        size_t n = 0;
        int rc = kv_get(db, q, 17, &got, &n);
        if (rc != KV_NOTFOUND)
            ck_abort_msg("absent key %u: %s", i, kv_strerror(rc));
    }
    get_stats(db, &b);
    ck_assert_int_eq(kv_table_stats_get(db, &ts1, &n1), KV_OK);
    ck_assert_uint_eq(n1, n0); /* nothing compacted meanwhile */

    uint64_t gets = b.gets - a.gets;
    uint64_t probed = b.tables_probed - a.tables_probed;
    uint64_t neg = b.filter_negatives - a.filter_negatives;
    uint64_t pos = b.filter_positives - a.filter_positives;
    uint64_t fps = b.filter_false_positives - a.filter_false_positives;
    uint64_t reads = b.data_block_reads - a.data_block_reads;
    uint64_t table_probes;
    double expected = probe_weighted_fpr(ts0, n0, ts1, n1, &table_probes);
    double measured = probed ? (double)fps / (double)probed : 0;
    fprintf(stderr, "bulk: %u absent gets in %llu ms: %zu tables, %llu probes, %llu false "
            "positives, FPR %.5f (expected %.5f)\n", BULK_ABSENT,
            (unsigned long long)(now_ms() - t0), n1, (unsigned long long)probed,
            (unsigned long long)fps, measured, expected);
    ck_assert_uint_eq(gets, BULK_ABSENT);
    ck_assert_uint_eq(b.memtable_hits, a.memtable_hits);
    ck_assert_uint_ge(probed, BULK_ABSENT / 2);
    ck_assert_uint_eq(table_probes, probed);
    ck_assert_uint_eq(neg + pos, probed);
    ck_assert_uint_eq(pos, fps); /* no key is there: every "maybe" is false */
    ck_assert_uint_eq(reads, fps);
    ck_assert_uint_eq(b.block_cache_hits, a.block_cache_hits);
    ck_assert_uint_gt(b.data_block_read_bytes, a.data_block_read_bytes);
    ck_assert_uint_gt(fps, 1000);
    ck_assert_msg(measured > expected * 0.75 && measured < expected * 1.25,
                  "measured FPR %g, expected %g", measured, expected);
    kv_free(ts0);
    kv_free(ts1);
    close_db(db);
}
END_TEST

/* ---- deletes across flushes ------------------------------------------------------- */

#define DEL_KEYS 3000

static size_t del_key(int i, char *k)
{
    return (size_t)sprintf(k, "del-%05d", i);
}

static size_t del_value(int i, int gen, char *v)
{
    return (size_t)sprintf(v, "value %d of key %d, padded to a few dozen bytes", gen, i);
}

/* Even keys deleted (a tombstone in a table); 1 mod 4 deleted (a tombstone
 * in the memtable or a later table); 0 mod 8 written again (generation 2). */
static void check_deletes(kv_db *db)
{
    char k[32], v[96];
    for (int i = 0; i < DEL_KEYS; i++) {
        size_t kl = del_key(i, k);
        if (i % 8 == 0)
            expect_value(db, k, kl, v, del_value(i, 2, v));
        else if (i % 2 == 0 || i % 4 == 1)
            expect_absent(db, k, kl);
        else
            expect_value(db, k, kl, v, del_value(i, 1, v));
    }
}

START_TEST(deletes_across_flushes)
{
    char p[600], k[32], v[96];
    test_path(p, sizeof p, "db");
    kv_db *db = open_db(p, NULL);
    for (int i = 0; i < DEL_KEYS; i++)
        ck_assert_int_eq(kv_put(db, k, del_key(i, k), v, del_value(i, 1, v)), KV_OK);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    for (int i = 0; i < DEL_KEYS; i += 2)
        ck_assert_int_eq(kv_delete(db, k, del_key(i, k)), KV_OK);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    for (int i = 1; i < DEL_KEYS; i += 4)
        ck_assert_int_eq(kv_delete(db, k, del_key(i, k)), KV_OK);
    for (int i = 0; i < DEL_KEYS; i += 8)
        ck_assert_int_eq(kv_put(db, k, del_key(i, k), v, del_value(i, 2, v)), KV_OK);
    check_deletes(db);
    struct kv_stats s;
    get_stats(db, &s);
    ck_assert_uint_ge(s.tables, 1);
    close_db(db);

    db = open_db(p, NULL);
    check_deletes(db);
    /* Compacting everything drops what the tombstones hide, not more. */
    ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 0), KV_OK);
    check_deletes(db);
    close_db(db);
    db = open_db(p, NULL);
    check_deletes(db);
    close_db(db);
}
END_TEST

/* ---- batches --------------------------------------------------------------------- */

START_TEST(batch_applies_all)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_db *db = open_db(p, NULL);
    ck_assert_int_eq(kv_put(db, "a", 1, "old a", 5), KV_OK);
    ck_assert_int_eq(kv_put(db, "b", 1, "old b", 5), KV_OK);

    kv_batch *b = NULL;
    ck_assert_int_eq(kv_batch_new(&b), KV_OK);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(kv_batch_count(b), 0);
    ck_assert_int_eq(kv_batch_put(b, "c", 1, "new c", 5), KV_OK);
    ck_assert_int_eq(kv_batch_delete(b, "a", 1), KV_OK);
    ck_assert_int_eq(kv_batch_put(b, "b", 1, "new b", 5), KV_OK);
    ck_assert_int_eq(kv_batch_put(b, "d", 1, "d", 1), KV_OK);
    ck_assert_int_eq(kv_batch_delete(b, "d", 1), KV_OK);
    ck_assert_int_eq(kv_batch_put(b, "e", 1, "e1", 2), KV_OK);
    ck_assert_int_eq(kv_batch_put(b, "e", 1, "e2", 2), KV_OK);
    ck_assert_int_eq(kv_batch_put(b, "\0z", 2, NULL, 0), KV_OK);
    ck_assert_uint_eq(kv_batch_count(b), 8);

    /* Entries that cannot be added leave the batch as it was. */
    uint8_t *big = calloc(1, KV_MAX_VALUE_SIZE + 1);
    ck_assert_ptr_nonnull(big);
    ck_assert_int_eq(kv_batch_put(b, big, KV_MAX_KEY_SIZE + 1, "v", 1), KV_EINVAL);
    ck_assert_int_eq(kv_batch_put(b, "x", 1, big, KV_MAX_VALUE_SIZE + 1), KV_EINVAL);
    ck_assert_int_eq(kv_batch_delete(b, big, KV_MAX_KEY_SIZE + 1), KV_EINVAL);
    ck_assert_int_eq(kv_batch_put(b, NULL, 1, "v", 1), KV_EINVAL);
    ck_assert_int_eq(kv_batch_put(b, "x", 1, NULL, 1), KV_EINVAL);
    ck_assert_int_eq(kv_batch_delete(b, NULL, 1), KV_EINVAL);
    ck_assert_int_eq(kv_batch_put(NULL, "x", 1, "v", 1), KV_EINVAL);
    ck_assert_int_eq(kv_batch_delete(NULL, "x", 1), KV_EINVAL);
    ck_assert_int_eq(kv_batch_new(NULL), KV_EINVAL);
    free(big);
    ck_assert_uint_eq(kv_batch_count(b), 8);
    ck_assert_uint_eq(kv_batch_count(NULL), 0);
    ck_assert_int_eq(kv_write(NULL, b), KV_EINVAL);
    ck_assert_int_eq(kv_write(db, NULL), KV_EINVAL);
    expect_value(db, "a", 1, "old a", 5);
    expect_absent(db, "c", 1);

    struct kv_stats s0, s1;
    get_stats(db, &s0);
    ck_assert_int_eq(kv_write(db, b), KV_OK);
    ck_assert_uint_eq(kv_batch_count(b), 8); /* unchanged by kv_write */
    get_stats(db, &s1);
    ck_assert_uint_eq(s1.puts - s0.puts, 6);
    ck_assert_uint_eq(s1.deletes - s0.deletes, 2);
    ck_assert_uint_eq(s1.writes - s0.writes, 1);
    ck_assert_uint_eq(s1.last_sequence - s0.last_sequence, 8);

    expect_absent(db, "a", 1);
    expect_value(db, "b", 1, "new b", 5);
    expect_value(db, "c", 1, "new c", 5);
    expect_absent(db, "d", 1);
    expect_value(db, "e", 1, "e2", 2);
    expect_value(db, "\0z", 2, "", 0);

    /* An empty batch writes nothing; a cleared batch is reusable. */
    kv_batch_clear(b);
    kv_batch_clear(NULL);
    ck_assert_uint_eq(kv_batch_count(b), 0);
    ck_assert_int_eq(kv_write(db, b), KV_OK);
    kv_write_options wo = {.sync = 1};
    ck_assert_int_eq(kv_write_opts(db, &wo, b), KV_OK);
    get_stats(db, &s0);
    ck_assert_uint_eq(s0.last_sequence, s1.last_sequence);
    ck_assert_uint_eq(s0.writes, s1.writes);
    ck_assert_int_eq(kv_batch_put(b, "a", 1, "again", 5), KV_OK);
    ck_assert_int_eq(kv_batch_delete(b, "e", 1), KV_OK);
    ck_assert_int_eq(kv_write_opts(db, &wo, b), KV_OK);
    ck_assert_int_eq(kv_write_opts(db, NULL, b), KV_OK); /* twice: the same result */
    expect_value(db, "a", 1, "again", 5);
    expect_absent(db, "e", 1);
    kv_batch_free(b);
    kv_batch_free(NULL);

    close_db(db);
    db = open_db(p, NULL);
    expect_value(db, "a", 1, "again", 5);
    expect_value(db, "b", 1, "new b", 5);
    expect_value(db, "c", 1, "new c", 5);
    expect_absent(db, "d", 1);
    expect_absent(db, "e", 1);
    expect_value(db, "\0z", 2, "", 0);
    close_db(db);
}
END_TEST

#define CRASH_BATCH_KEYS 50
#define CRASH_MAX_BATCHES 4000

static size_t crash_key(int cycle, uint64_t i, int j, char *k)
{
    return (size_t)sprintf(k, "c%d-b%llu-%d", cycle, (unsigned long long)i, j);
}

static size_t crash_value(int cycle, uint64_t i, int j, uint8_t *v)
{
    size_t len = (size_t)sprintf((char *)v, "batch %llu of cycle %d, entry %d:",
                                 (unsigned long long)i, cycle, j);
    size_t pad = 8 + (size_t)(splitmix(i * 131 + (uint64_t)cycle) % 40);
    fill_bytes(i ^ ((uint64_t)cycle << 40), v + len, pad);
    return len + pad;
}

/* The child: writes batches until killed, acknowledging each on `fd`.
 * No Check assertions here; any failure is an exit code. */
static void batch_writer_child(const char *p, int cycle, int sync, int fd)
{
    kv_db *db = NULL;
    if (kv_open(p, NULL, &db) != KV_OK)
        _exit(2);
    kv_batch *b = NULL;
    if (kv_batch_new(&b) != KV_OK)
        _exit(3);
    kv_write_options wo = {.sync = sync};
    char k[64];
    uint8_t v[128];
    for (uint64_t i = 0; i < CRASH_MAX_BATCHES; i++) {
        kv_batch_clear(b);
        for (int j = 0; j < CRASH_BATCH_KEYS; j++)
            if (kv_batch_put(b, k, crash_key(cycle, i, j, k), v, crash_value(cycle, i, j, v)) !=
                KV_OK)
                _exit(4);
        if (kv_write_opts(db, &wo, b) != KV_OK)
            _exit(5);
        if (write_all(fd, &i, 8) != 0)
            _exit(6);
    }
    for (;;)
        pause(); /* until killed */
}

/* How many of batch i's keys are there (each with its right value). */
static int batch_present(kv_db *db, int cycle, uint64_t i)
{
    char k[64];
    uint8_t v[128];
    int present = 0;
    for (int j = 0; j < CRASH_BATCH_KEYS; j++) {
        size_t kl = crash_key(cycle, i, j, k), vl = crash_value(cycle, i, j, v);
        void *got = NULL;
        size_t n = 0;
        int rc = kv_get(db, k, kl, &got, &n);
        if (rc == KV_OK) {
            ck_assert_msg(n == vl && memcmp(got, v, vl) == 0,
                          "cycle %d batch %llu key %d: wrong value", cycle,
                          (unsigned long long)i, j);
            kv_free(got);
            present++;
        } else
            ck_assert_msg(rc == KV_NOTFOUND, "get: %s", kv_strerror(rc));
    }
    return present;
}

START_TEST(batch_crash_atomicity)
{
    char p[600];
    test_path(p, sizeof p, "db");
    uint64_t rng = 0xBA7C4;
    uint64_t acked_in[6] = {0};
    for (int cycle = 0; cycle < 6; cycle++) {
        int sync = cycle % 2;
        int fds[2];
        ck_assert_int_eq(pipe(fds), 0);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            close(fds[0]);
            batch_writer_child(p, cycle, sync, fds[1]);
            _exit(1);
        }
        close(fds[1]);
        struct acks a = {.fd = fds[0]};
        rng = splitmix(rng);
        uint64_t deadline = now_ms() + 20 + rng % 181;
        for (uint64_t t; !a.eof && (t = now_ms()) < deadline;)
            acks_poll(&a, (int)(deadline - t));
        kill_child(pid);
        acks_drain(&a);
        close(fds[0]);
        ck_assert(!a.out_of_order);

        /* Acknowledged batches are all there (a process crash loses no
         * acknowledged write); the one in flight is all there or not at
         * all; none after it was begun. */
        kv_db *db = open_db(p, NULL);
        uint64_t acked = a.count;
        int seen_absent = 0;
        for (uint64_t i = 0; i < acked + 4; i++) {
            int n = batch_present(db, cycle, i);
            ck_assert_msg(n == 0 || n == CRASH_BATCH_KEYS,
                          "cycle %d: batch %llu half applied (%d of %d keys)", cycle,
                          (unsigned long long)i, n, CRASH_BATCH_KEYS);
            if (i < acked)
                ck_assert_msg(n == CRASH_BATCH_KEYS, "cycle %d: acknowledged batch %llu lost",
                              cycle, (unsigned long long)i);
            if (i > acked)
                ck_assert_msg(n == 0, "cycle %d: batch %llu present, never begun", cycle,
                              (unsigned long long)i);
            if (n == 0)
                seen_absent = 1;
            else
                ck_assert_msg(!seen_absent, "cycle %d: batch %llu present after a missing one",
                              cycle, (unsigned long long)i);
        }
        /* Earlier cycles' acknowledged batches are intact too (a loaded
         * machine may kill a child before it acknowledged any). */
        acked_in[cycle] = acked;
        for (int c = 0; c < cycle; c++)
            for (uint64_t i = 0; i < acked_in[c]; i++)
                ck_assert_msg(batch_present(db, c, i) == CRASH_BATCH_KEYS,
                              "cycle %d: cycle %d's acknowledged batch %llu lost", cycle, c,
                              (unsigned long long)i);
        fprintf(stderr, "batch crash cycle %d (sync %d): %llu batches acknowledged\n", cycle,
                sync, (unsigned long long)acked);
        close_db(db);
    }
}
END_TEST

/* ---- sync durability across SIGKILL --------------------------------------------- */

static size_t sync_key(int cycle, uint64_t i, char *k)
{
    return (size_t)sprintf(k, "s%02d-%06llu", cycle, (unsigned long long)i);
}

static size_t sync_value(int cycle, uint64_t i, uint8_t *v)
{
    size_t len = 10 + (size_t)(splitmix(i + ((uint64_t)cycle << 32)) % 200);
    fill_bytes(i * 7919 + (uint64_t)cycle, v, len);
    return len;
}

static void sync_writer_child(const char *p, int cycle, int fd)
{
    kv_options o;
    kv_options_init(&o);
    o.sync = 1;
    kv_db *db = NULL;
    if (kv_open(p, &o, &db) != KV_OK)
        _exit(2);
    char k[64];
    uint8_t v[256];
    for (uint64_t i = 0;; i++) {
        if (kv_put(db, k, sync_key(cycle, i, k), v, sync_value(cycle, i, v)) != KV_OK)
            _exit(3);
        if (write_all(fd, &i, 8) != 0)
            _exit(4);
    }
}

START_TEST(sync_crash_durability)
{
    char p[600];
    test_path(p, sizeof p, "db");
    enum { CYCLES = 24 };
    uint64_t acked_at[CYCLES];
    uint64_t rng = 0x5C5C;
    for (int cycle = 0; cycle < CYCLES; cycle++) {
        int fds[2];
        ck_assert_int_eq(pipe(fds), 0);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            close(fds[0]);
            sync_writer_child(p, cycle, fds[1]);
            _exit(1);
        }
        close(fds[1]);
        struct acks a = {.fd = fds[0]};
        /* Wait for the first acknowledgement (the open takes a while), then
         * kill after a random number of them or a random short time. */
        uint64_t t, deadline = now_ms() + 10000;
        while (!a.eof && a.count == 0 && (t = now_ms()) < deadline)
            acks_poll(&a, (int)(deadline - t));
        ck_assert_msg(a.count > 0, "cycle %d: no write acknowledged", cycle);
        rng = splitmix(rng);
        uint64_t want = 1 + rng % 300;
        deadline = now_ms() + 10 + (rng >> 32) % 90;
        while (!a.eof && a.count < want && (t = now_ms()) < deadline)
            acks_poll(&a, (int)(deadline - t));
        kill_child(pid);
        acks_drain(&a);
        close(fds[0]);
        ck_assert(!a.out_of_order);
        acked_at[cycle] = a.count;

        kv_db *db = open_db(p, NULL);
        char k[64];
        uint8_t v[256];
        for (int c = 0; c <= cycle; c++)
            for (uint64_t i = 0; i < acked_at[c]; i++)
                expect_value(db, k, sync_key(c, i, k), v, sync_value(c, i, v));
        /* The put in flight may or may not be there; later ones never began. */
        {
            size_t kl = sync_key(cycle, a.count, k), vl = sync_value(cycle, a.count, v);
            void *got = NULL;
            size_t n = 0;
            int rc = kv_get(db, k, kl, &got, &n);
            ck_assert(rc == KV_OK || rc == KV_NOTFOUND);
            if (rc == KV_OK) {
                ck_assert(n == vl && memcmp(got, v, vl) == 0);
                kv_free(got);
            }
            expect_absent(db, k, sync_key(cycle, a.count + 1, k));
        }
        close_db(db);
    }
    uint64_t total = 0;
    for (int c = 0; c < CYCLES; c++)
        total += acked_at[c];
    fprintf(stderr, "sync crash: %d cycles, %llu acknowledged puts\n", CYCLES,
            (unsigned long long)total);

    /* A kill cannot tell a synced write from one only handed to the kernel:
     * the log's syncs are counted instead. One writer at a time, so no
     * group shares a sync. */
    struct kv_stats s0, s1;
    kv_options o;
    kv_options_init(&o);
    o.sync = 1;
    kv_db *db = open_db(p, &o);
    kv_batch *b;
    ck_assert_int_eq(kv_batch_new(&b), KV_OK);
    ck_assert_int_eq(kv_batch_put(b, "x", 1, "y", 1), KV_OK);
    kv_write_options nosync = {.sync = 0}, sync = {.sync = 1};
    get_stats(db, &s0);
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(kv_put(db, "x", 1, "y", 1), KV_OK);
    ck_assert_int_eq(kv_write(db, b), KV_OK);
    get_stats(db, &s1);
    ck_assert_uint_ge(s1.wal_syncs - s0.wal_syncs, 11);
    ck_assert_int_eq(kv_write_opts(db, &nosync, b), KV_OK);
    get_stats(db, &s0);
    ck_assert_uint_eq(s0.wal_syncs, s1.wal_syncs);
    close_db(db);
    db = open_db(p, NULL); /* sync off */
    get_stats(db, &s0);
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(kv_put(db, "x", 1, "z", 1), KV_OK);
    get_stats(db, &s1);
    ck_assert_uint_eq(s1.wal_syncs, s0.wal_syncs);
    ck_assert_int_eq(kv_write_opts(db, &sync, b), KV_OK);
    get_stats(db, &s0);
    ck_assert_uint_eq(s0.wal_syncs - s1.wal_syncs, 1);
    kv_batch_free(b);
    close_db(db);
}
END_TEST

/* ---- damaged log tails ----------------------------------------------------------- */

/* The newest nonempty log of the database in p: dir/<number>.log. */
static void newest_log(const char *p, char *out, size_t outlen, off_t *size)
{
    DIR *d = opendir(p);
    ck_assert_ptr_nonnull(d);
    unsigned long long best = 0;
    int found = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name), digits = 0;
        while (digits < n && e->d_name[digits] >= '0' && e->d_name[digits] <= '9')
            digits++;
        if (digits < 6 || strcmp(e->d_name + digits, ".log") != 0)
            continue;
        char f[1200];
        snprintf(f, sizeof f, "%s/%s", p, e->d_name);
        struct stat st;
        ck_assert_int_eq(stat(f, &st), 0);
        unsigned long long num = strtoull(e->d_name, NULL, 10);
        if (st.st_size > 0 && (!found || num > best)) {
            found = 1;
            best = num;
            snprintf(out, outlen, "%s", f);
            *size = st.st_size;
        }
    }
    closedir(d);
    ck_assert_msg(found, "no nonempty log in %s", p);
}

#define TAIL_RECORDS 100

static size_t tail_value(int i, uint8_t *v)
{
    size_t len = i == TAIL_RECORDS - 1 ? 2000 : 50 + (size_t)i;
    fill_bytes(0x7A11ull + (uint64_t)i, v, len);
    return len;
}

/* Writes the records with sync and closes; returns the log's path. */
static void write_tail_db(const char *p, char *log, size_t loglen, off_t *size)
{
    kv_options o;
    kv_options_init(&o);
    o.sync = 1;
    kv_db *db = open_db(p, &o);
    char k[32];
    uint8_t v[2048];
    for (int i = 0; i < TAIL_RECORDS; i++) {
        size_t kl = (size_t)sprintf(k, "w%03d", i);
        ck_assert_int_eq(kv_put(db, k, kl, v, tail_value(i, v)), KV_OK);
    }
    close_db(db);
    newest_log(p, log, loglen, size);
    ck_assert_int_gt(*size, 2000);
}

/* After the damage: it opens, reports the loss, and holds every record but
 * possibly the last; it takes new writes, which the next open finds. */
static void check_tail_db(const char *p)
{
    kv_db *db = open_db(p, NULL);
    struct kv_stats s;
    get_stats(db, &s);
    ck_assert_msg(s.recovery_dropped_bytes > 0 || s.recovery_tail_damaged > 0,
                  "damage not reported: dropped %llu, damaged %llu",
                  (unsigned long long)s.recovery_dropped_bytes,
                  (unsigned long long)s.recovery_tail_damaged);
    char k[32];
    uint8_t v[2048];
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < TAIL_RECORDS; i++) {
            size_t kl = (size_t)sprintf(k, "w%03d", i), vl = tail_value(i, v);
            if (i < TAIL_RECORDS - 1) {
                expect_value(db, k, kl, v, vl);
                continue;
            }
            void *got = NULL;
            size_t n = 0;
            int rc = kv_get(db, k, kl, &got, &n);
            ck_assert_msg(rc == KV_NOTFOUND || rc == KV_OK, "last record: %s",
                          kv_strerror(rc));
            if (rc == KV_OK) {
                ck_assert(n == vl && memcmp(got, v, vl) == 0);
                kv_free(got);
            }
        }
        if (round == 0) {
            ck_assert_int_eq(kv_put(db, "after", 5, "the damage", 10), KV_OK);
            close_db(db);
            db = open_db(p, NULL);
        }
        expect_value(db, "after", 5, "the damage", 10);
    }
    close_db(db);
}

/* Writes without sync that fill memtable after memtable sync no log:
 * each old log's entries are made durable by its memtable's flush, and
 * the log is then deleted (wal_format.md, Durability). A sync write that
 * follows a switch returns once everything before it is durable: after
 * a reopen, every key is there. */
START_TEST(old_logs_unsynced)
{
    char p[600];
    test_path(p, sizeof p, "oldlogs");
    kv_options o;
    kv_options_init(&o);
    o.write_buffer_size = 64 << 10;
    kv_db *db = open_db(p, &o);
    struct kv_stats s0, s1;
    get_stats(db, &s0);
    char k[32], v[200];
    memset(v, 'v', sizeof v);
    for (int i = 0; i < 3000; i++) { /* about ten memtables */
        snprintf(k, sizeof k, "key%06d", i);
        ck_assert_int_eq(kv_put(db, k, strlen(k), v, sizeof v), KV_OK);
    }
    ck_assert_int_eq(kv_flush(db), KV_OK);
    get_stats(db, &s1);
    ck_assert_uint_ge(s1.flushes - s0.flushes, 5);
    ck_assert_uint_eq(s1.wal_syncs, s0.wal_syncs);
    kv_write_options sync = {.sync = 1};
    for (int i = 3000; i < 4000; i++) { /* switches, each followed by sync writes */
        snprintf(k, sizeof k, "key%06d", i);
        kv_batch *b;
        ck_assert_int_eq(kv_batch_new(&b), KV_OK);
        ck_assert_int_eq(kv_batch_put(b, k, strlen(k), v, sizeof v), KV_OK);
        ck_assert_int_eq(kv_write_opts(db, i % 100 == 0 ? &sync : NULL, b), KV_OK);
        kv_batch_free(b);
    }
    get_stats(db, &s0);
    ck_assert_uint_ge(s0.wal_syncs - s1.wal_syncs, 10);
    close_db(db);
    db = open_db(p, &o);
    for (int i = 0; i < 4000; i++) {
        snprintf(k, sizeof k, "key%06d", i);
        void *got;
        size_t n;
        ck_assert_int_eq(kv_get(db, k, strlen(k), &got, &n), KV_OK);
        ck_assert_uint_eq(n, sizeof v);
        ck_assert(memcmp(got, v, n) == 0);
        free(got);
    }
    close_db(db);
}
END_TEST

START_TEST(wal_tail_truncated)
{
    char p[600], log[1200];
    off_t size;
    test_path(p, sizeof p, "a");
    write_tail_db(p, log, sizeof log, &size);
    ck_assert_int_eq(truncate(log, size - 3), 0);
    check_tail_db(p);
}
END_TEST

START_TEST(wal_tail_flipped)
{
    char p[600], log[1200];
    off_t size;
    test_path(p, sizeof p, "b");
    write_tail_db(p, log, sizeof log, &size);
    /* 100 bytes from the end: inside the last record's 2000-byte value. */
    int fd = open(log, O_RDWR);
    ck_assert_int_ge(fd, 0);
    uint8_t c;
    ck_assert_int_eq(pread(fd, &c, 1, size - 100), 1);
    c ^= 0x40;
    ck_assert_int_eq(pwrite(fd, &c, 1, size - 100), 1);
    close(fd);
    check_tail_db(p);
}
END_TEST

/* ---- a damaged table --------------------------------------------------------------- */

#define CORRUPT_KEYS 2000

static size_t corrupt_key(int i, char *k)
{
    return (size_t)sprintf(k, "t%06d", i);
}

static size_t corrupt_value(int i, uint8_t *v)
{
    fill_bytes(0xC0221ull + (uint64_t)i, v, 64);
    return 64;
}

START_TEST(table_corrupt)
{
    char p[600], k[32];
    uint8_t v[64];
    test_path(p, sizeof p, "db");
    kv_options o;
    kv_options_init(&o);
    o.block_size = 1024;
    o.compression = KV_COMPRESSION_NONE;
    kv_db *db = open_db(p, &o);
    for (int i = 0; i < CORRUPT_KEYS; i++)
        ck_assert_int_eq(kv_put(db, k, corrupt_key(i, k), v, corrupt_value(i, v)), KV_OK);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    close_db(db);

    /* The table: the largest *.sst file. */
    DIR *d = opendir(p);
    ck_assert_ptr_nonnull(d);
    char sst[1200] = "";
    off_t best = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 4, ".sst") != 0)
            continue;
        char f[1200];
        snprintf(f, sizeof f, "%s/%s", p, e->d_name);
        struct stat st;
        ck_assert_int_eq(stat(f, &st), 0);
        if (st.st_size > best) {
            best = st.st_size;
            snprintf(sst, sizeof sst, "%s", f);
        }
    }
    closedir(d);
    ck_assert_msg(best > 100000, "no table of the expected size (largest: %lld bytes)",
                  (long long)best);

    int fd = open(sst, O_RDWR);
    ck_assert_int_ge(fd, 0);
    uint8_t c;
    ck_assert_int_eq(pread(fd, &c, 1, 100), 1);
    c ^= 0x01;
    ck_assert_int_eq(pwrite(fd, &c, 1, 100), 1);
    close(fd);

    /* Opening reads only the index, filter and properties: it succeeds. */
    kv_options_init(&o);
    o.block_cache_size = 0;
    o.idle_compaction_ms = 0; /* an idle compaction would meet the damage and stop writes */
    db = open_db(p, &o);
    int corrupt_first = 0, corrupt_total = 0;
    for (int i = 0; i < CORRUPT_KEYS; i++) {
        size_t kl = corrupt_key(i, k), vl = corrupt_value(i, v);
        void *got = NULL;
        size_t n = 0;
        int rc = kv_get(db, k, kl, &got, &n);
        ck_assert_msg(rc == KV_OK || rc == KV_ECORRUPT, "key %d: %s", i, kv_strerror(rc));
        if (rc == KV_OK) {
            ck_assert_msg(n == vl && memcmp(got, v, vl) == 0, "key %d: wrong value", i);
            kv_free(got);
        } else {
            corrupt_total++;
            if (i < 5)
                corrupt_first++;
            ck_assert_msg(i < CORRUPT_KEYS - 100, "key %d, in a later block: corrupt", i);
        }
    }
    ck_assert_msg(corrupt_first > 0, "no damage seen among the smallest keys");
    ck_assert_int_lt(corrupt_total, CORRUPT_KEYS / 2);
    /* The damage is stable, and the handle still works. */
    {
        void *got = NULL;
        size_t n;
        ck_assert_int_eq(kv_get(db, k, corrupt_key(0, k), &got, &n), KV_ECORRUPT);
    }
    ck_assert_int_eq(kv_put(db, "new", 3, "value", 5), KV_OK);
    expect_value(db, "new", 3, "value", 5);
    kv_close(db); /* may report the damage; the handle is freed either way */
}
END_TEST

/* ---- threads ----------------------------------------------------------------------- */

#define TH_WRITERS 4
#define TH_READERS 4
#define TH_KEYS 64
#define TH_MAX_ROUNDS 3000

struct th_shared {
    kv_db *db;
    atomic_int stop;
    atomic_int errors;
    atomic_ullong puts, found;
    pthread_mutex_t mu;
    char first_error[256];
    uint32_t last_ver[TH_WRITERS][TH_KEYS]; /* each writer's own row */
};

struct th_arg {
    struct th_shared *sh;
    int id;
};

__attribute__((format(printf, 2, 3))) static void th_error(struct th_shared *sh,
                                                           const char *fmt, ...)
{
    pthread_mutex_lock(&sh->mu);
    if (atomic_load(&sh->errors) == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(sh->first_error, sizeof sh->first_error, fmt, ap);
        va_end(ap);
    }
    atomic_fetch_add(&sh->errors, 1);
    pthread_mutex_unlock(&sh->mu);
}

static size_t th_key(int w, int k, char *buf)
{
    return (size_t)sprintf(buf, "T%d-%02d", w, k);
}

static size_t th_value(int w, int k, uint32_t ver, char *v)
{
    int len = sprintf(v, "w=%d k=%d v=%u|", w, k, ver);
    size_t total = 40 + (ver * 7u + (unsigned)k) % 60;
    for (size_t i = (size_t)len; i < total; i++)
        v[i] = (char)('a' + (w + k + (int)ver + (int)i) % 26);
    return total;
}

/* Parses and checks a value; returns its version, 0 when malformed. */
static uint32_t th_parse(int w, int k, const void *val, size_t n)
{
    char buf[128];
    if (n >= sizeof buf)
        return 0;
    memcpy(buf, val, n);
    buf[n] = 0;
    int pw, pk;
    unsigned ver;
    if (sscanf(buf, "w=%d k=%d v=%u|", &pw, &pk, &ver) != 3 || pw != w || pk != k || ver == 0)
        return 0;
    char want[128];
    size_t wl = th_value(w, k, ver, want);
    return wl == n && memcmp(want, buf, n) == 0 ? ver : 0;
}

static void *th_writer(void *p)
{
    struct th_arg *a = p;
    struct th_shared *sh = a->sh;
    char k[32], v[128];
    for (uint32_t ver = 1; ver <= TH_MAX_ROUNDS && !atomic_load(&sh->stop); ver++)
        for (int i = 0; i < TH_KEYS; i++) {
            int rc = kv_put(sh->db, k, th_key(a->id, i, k), v, th_value(a->id, i, ver, v));
            if (rc != KV_OK) {
                th_error(sh, "writer %d key %d: put failed: %s", a->id, i, kv_strerror(rc));
                return NULL;
            }
            sh->last_ver[a->id][i] = ver;
            atomic_fetch_add(&sh->puts, 1);
        }
    return NULL;
}

static void *th_reader(void *p)
{
    struct th_arg *a = p;
    struct th_shared *sh = a->sh;
    uint32_t seen[TH_WRITERS][TH_KEYS] = {{0}};
    uint64_t rng = 0x12345 + (uint64_t)a->id;
    char k[32];
    for (uint64_t op = 0; !atomic_load(&sh->stop); op++) {
        rng = splitmix(rng);
        int w = (int)(rng % TH_WRITERS), i = (int)((rng >> 16) % TH_KEYS);
        void *val = NULL;
        size_t n = 0;
        int rc = kv_get(sh->db, k, th_key(w, i, k), &val, &n);
        if (rc == KV_OK) {
            uint32_t ver = th_parse(w, i, val, n);
            kv_free(val);
            if (ver == 0)
                th_error(sh, "key T%d-%d: malformed value", w, i);
            else if (ver < seen[w][i])
                th_error(sh, "key T%d-%d: version went back to %u", w, i, ver);
            else
                seen[w][i] = ver;
            atomic_fetch_add(&sh->found, 1);
        } else if (rc == KV_NOTFOUND) {
            if (seen[w][i])
                th_error(sh, "key T%d-%d vanished after version %u", w, i, seen[w][i]);
        } else
            th_error(sh, "key T%d-%d: get failed: %s", w, i, kv_strerror(rc));
        if (a->id == 0 && op % 256 == 0) {
            struct kv_stats s;
            if (kv_stats(sh->db, &s) != KV_OK)
                th_error(sh, "kv_stats failed");
            char *text = NULL;
            if (kv_metrics_text(sh->db, &text) != KV_OK || !text ||
                !strstr(text, "kv_gets_total"))
                th_error(sh, "kv_metrics_text failed");
            kv_free(text);
            kv_table_stats *ts = NULL;
            size_t nt = 0;
            if (kv_table_stats_get(sh->db, &ts, &nt) != KV_OK)
                th_error(sh, "kv_table_stats_get failed");
            kv_free(ts);
        }
    }
    return NULL;
}

static void th_check_final(kv_db *db, struct th_shared *sh)
{
    char k[32];
    for (int w = 0; w < TH_WRITERS; w++)
        for (int i = 0; i < TH_KEYS; i++) {
            uint32_t want = sh->last_ver[w][i];
            if (!want) {
                expect_absent(db, k, th_key(w, i, k));
                continue;
            }
            void *val = NULL;
            size_t n = 0;
            ck_assert_int_eq(kv_get(db, k, th_key(w, i, k), &val, &n), KV_OK);
            uint32_t ver = th_parse(w, i, val, n);
            kv_free(val);
            ck_assert_msg(ver == want, "key T%d-%d: version %u, last written %u", w, i, ver,
                          want);
        }
}

START_TEST(threads_read_while_writing)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_options o;
    kv_options_init(&o);
    o.write_buffer_size = (size_t)64 << 10;
    static struct th_shared sh;
    memset(&sh, 0, sizeof sh);
    pthread_mutex_init(&sh.mu, NULL);
    sh.db = open_db(p, &o);

    pthread_t t[TH_WRITERS + TH_READERS];
    struct th_arg args[TH_WRITERS + TH_READERS];
    for (int i = 0; i < TH_WRITERS + TH_READERS; i++) {
        args[i].sh = &sh;
        args[i].id = i < TH_WRITERS ? i : i - TH_WRITERS;
        ck_assert_int_eq(pthread_create(&t[i], NULL, i < TH_WRITERS ? th_writer : th_reader,
                                        &args[i]),
                         0);
    }
    sleep_ms(2000);
    atomic_store(&sh.stop, 1);
    for (int i = 0; i < TH_WRITERS + TH_READERS; i++)
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
    ck_assert_msg(atomic_load(&sh.errors) == 0, "%d errors, the first: %s",
                  atomic_load(&sh.errors), sh.first_error);
    struct kv_stats s;
    get_stats(sh.db, &s);
    fprintf(stderr, "threads: %llu puts, %llu gets found a value, %llu flushes, "
            "%llu compactions\n", (unsigned long long)atomic_load(&sh.puts),
            (unsigned long long)atomic_load(&sh.found), (unsigned long long)s.flushes,
            (unsigned long long)s.compactions);
    ck_assert_uint_gt(atomic_load(&sh.puts), 1000);
    ck_assert_uint_gt(atomic_load(&sh.found), 100);
    ck_assert_uint_ge(s.flushes, 1);
    ck_assert_uint_eq(s.puts, atomic_load(&sh.puts));
    th_check_final(sh.db, &sh);
    close_db(sh.db);
    kv_db *db = open_db(p, NULL);
    th_check_final(db, &sh);
    close_db(db);
    pthread_mutex_destroy(&sh.mu);
}
END_TEST

/* ---- counters from many threads ------------------------------------------------------ */

struct count_job {
    kv_db *db;
    int id;
    unsigned found, missed, bad;
};

/* 3,000 gets: even keys were written, odd ones never. */
static void *count_reader(void *p)
{
    struct count_job *j = p;
    char k[32];
    for (int i = 0; i < 3000; i++) {
        int key = (j->id * 7919 + i * 13) % 4000;
        size_t kl = (size_t)snprintf(k, sizeof k, "count-%06d", key);
        void *v = NULL;
        size_t vl = 0;
        int rc = kv_get(j->db, k, kl, &v, &vl);
        if (rc == KV_OK && key % 2 == 0 && vl == kl && memcmp(v, k, kl) == 0)
            j->found++;
        else if (rc == KV_NOTFOUND && key % 2)
            j->missed++;
        else
            j->bad++;
        kv_free(v);
    }
    return NULL;
}

/* The counters are striped per thread (more threads than stripes share
 * one; a thread's stripe passes to a later thread when it exits): no
 * count may be lost, whatever the number of threads. */
START_TEST(counters_exact_from_many_threads)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_options o;
    kv_options_init(&o);
    o.idle_compaction_ms = 0; /* the two tables stay: an idle compaction would merge them */
    kv_db *db = open_db(p, &o);
    char k[32];
    for (int key = 0; key < 4000; key += 2) {
        size_t kl = (size_t)snprintf(k, sizeof k, "count-%06d", key);
        ck_assert_int_eq(kv_put(db, k, kl, k, kl), KV_OK);
        if (key == 2000)
            ck_assert_int_eq(kv_flush(db), KV_OK); /* two tables */
    }
    ck_assert_int_eq(kv_flush(db), KV_OK);
    struct kv_stats before, after;
    get_stats(db, &before);
    enum { WAVE = KV_TALLY_STRIPES + 4 }; /* more threads than stripes */
    unsigned found = 0, missed = 0;
    for (int wave = 0; wave < 2; wave++) {
        pthread_t t[WAVE];
        struct count_job jobs[WAVE];
        for (int i = 0; i < WAVE; i++) {
            jobs[i] = (struct count_job){.db = db, .id = wave * WAVE + i};
            ck_assert_int_eq(pthread_create(&t[i], NULL, count_reader, &jobs[i]), 0);
        }
        for (int i = 0; i < WAVE; i++) {
            ck_assert_int_eq(pthread_join(t[i], NULL), 0);
            ck_assert_uint_eq(jobs[i].bad, 0);
            found += jobs[i].found;
            missed += jobs[i].missed;
        }
    }
    get_stats(db, &after);
    ck_assert_uint_eq(after.gets - before.gets, 2 * WAVE * 3000);
    ck_assert_uint_eq(found + missed, 2 * WAVE * 3000);
    uint64_t probed = after.tables_probed - before.tables_probed;
    ck_assert_uint_ge(probed, missed); /* each missing key probed a table at least */
    ck_assert_uint_eq(after.filter_negatives + after.filter_positives, after.tables_probed);
    /* Per table: probes and filter answers add up to the store's. */
    kv_table_stats *ts = NULL;
    size_t n = 0;
    ck_assert_int_eq(kv_table_stats_get(db, &ts, &n), KV_OK);
    ck_assert_uint_ge(n, 2);
    uint64_t probes = 0, negatives = 0;
    for (size_t i = 0; i < n; i++) {
        probes += ts[i].probes;
        negatives += ts[i].filter_negatives;
    }
    kv_free(ts);
    ck_assert_uint_eq(probes, after.tables_probed);
    ck_assert_uint_eq(negatives, after.filter_negatives);
    close_db(db);
}
END_TEST

/* ---- the directory lock ---------------------------------------------------------- */

/* A child that waits for a byte on `go`, tries kv_open and exits with
 * -(its result): 0 opened, 6 KV_EBUSY. */
static pid_t fork_opener(const char *p, int *go_fd)
{
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fds[1]);
        char c;
        if (read(fds[0], &c, 1) != 1)
            _exit(100);
        kv_db *db = NULL;
        int rc = kv_open(p, NULL, &db);
        if (rc == KV_OK && kv_close(db) != KV_OK)
            _exit(101);
        if (rc != KV_OK && db != NULL)
            _exit(102);
        _exit(-rc);
    }
    close(fds[0]);
    *go_fd = fds[1];
    return pid;
}

static int opener_result(pid_t pid, int go_fd)
{
    ck_assert_int_eq(write_all(go_fd, "g", 1), 0);
    close(go_fd);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFEXITED(st));
    return WEXITSTATUS(st);
}

START_TEST(busy)
{
    char p[600];
    test_path(p, sizeof p, "db");
    /* The children are forked before this process starts kv's threads. */
    int go1, go2;
    pid_t c1 = fork_opener(p, &go1), c2 = fork_opener(p, &go2);

    kv_db *db = open_db(p, NULL);
    ck_assert_int_eq(kv_put(db, "k", 1, "v", 1), KV_OK);
    kv_db *db2 = (kv_db *)test_dir;
    ck_assert_int_eq(kv_open(p, NULL, &db2), KV_EBUSY);
    ck_assert_ptr_null(db2);
    ck_assert_int_eq(opener_result(c1, go1), -KV_EBUSY);
    /* The first handle is unharmed. */
    ck_assert_int_eq(kv_put(db, "k2", 2, "v2", 2), KV_OK);
    expect_value(db, "k", 1, "v", 1);
    expect_value(db, "k2", 2, "v2", 2);
    close_db(db);

    ck_assert_int_eq(opener_result(c2, go2), 0);
    db = open_db(p, NULL);
    expect_value(db, "k", 1, "v", 1);
    expect_value(db, "k2", 2, "v2", 2);
    close_db(db);
}
END_TEST

/* ---- metrics and counters -------------------------------------------------------- */

/* The value of the sample line "name value" (no labels); -1 if none. */
static double metric_value(const char *text, const char *name)
{
    size_t nl = strlen(name);
    for (const char *line = text; line && *line;) {
        if (strncmp(line, name, nl) == 0 && line[nl] == ' ')
            return strtod(line + nl + 1, NULL);
        line = strchr(line, '\n');
        if (line)
            line++;
    }
    return -1;
}

/* "# TYPE name type" present; and at least one sample line of name. */
static void expect_metric(const char *text, const char *name, const char *type)
{
    char want[160];
    snprintf(want, sizeof want, "\n# TYPE %s %s\n", name, type);
    ck_assert_msg(strstr(text, want) || (strncmp(text, want + 1, strlen(want + 1)) == 0),
                  "no \"# TYPE %s %s\" line", name, type);
    size_t nl = strlen(name);
    int samples = 0;
    for (const char *line = text; line && *line;) {
        if (strncmp(line, name, nl) == 0 && (line[nl] == ' ' || line[nl] == '{'))
            samples++;
        line = strchr(line, '\n');
        if (line)
            line++;
    }
    ck_assert_msg(samples > 0, "no sample of %s", name);
}

START_TEST(metrics_and_counters)
{
    char p[600], k[32];
    test_path(p, sizeof p, "db");
    kv_db *db = open_db(p, NULL);
    for (int i = 0; i < 30; i++)
        ck_assert_int_eq(kv_put(db, k, (size_t)sprintf(k, "m%02d", i), "value", 5), KV_OK);
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(kv_delete(db, k, (size_t)sprintf(k, "m%02d", i)), KV_OK);
    struct kv_stats s;
    get_stats(db, &s);
    ck_assert_uint_eq(s.puts, 30);
    ck_assert_uint_eq(s.deletes, 10);
    ck_assert_uint_eq(s.writes, 40);
    ck_assert_uint_eq(s.gets, 0);
    ck_assert_uint_eq(s.memtable_hits, 0);

    /* From the memtable: 20 values and 10 tombstones decide; 5 keys the
     * memtable lacks do not (and no table holds them). */
    for (int i = 0; i < 30; i++) {
        size_t kl = (size_t)sprintf(k, "m%02d", i);
        if (i < 10)
            expect_absent(db, k, kl);
        else
            expect_value(db, k, kl, "value", 5);
    }
    for (int i = 0; i < 5; i++)
        expect_absent(db, k, (size_t)sprintf(k, "zz%d", i));
    get_stats(db, &s);
    ck_assert_uint_eq(s.gets, 35);
    ck_assert_uint_eq(s.memtable_hits, 30);
    ck_assert_uint_eq(s.tables_probed, 0);

    /* From a table: not memtable hits; each probes the table. */
    ck_assert_int_eq(kv_flush(db), KV_OK);
    for (int i = 10; i < 20; i++)
        expect_value(db, k, (size_t)sprintf(k, "m%02d", i), "value", 5);
    get_stats(db, &s);
    ck_assert_uint_eq(s.gets, 45);
    ck_assert_uint_eq(s.memtable_hits, 30);
    ck_assert_uint_ge(s.tables_probed, 10);
    ck_assert_uint_ge(s.flushes, 1);
    ck_assert_uint_ge(s.tables, 1);
    ck_assert_uint_ge(s.filter_keys, 20);
    ck_assert_uint_gt(s.filter_bytes, 0);

    char *text = NULL;
    ck_assert_int_eq(kv_metrics_text(db, &text), KV_OK);
    ck_assert_ptr_nonnull(text);
    static const char *counters[] = {
        "kv_gets_total",           "kv_puts_total",
        "kv_deletes_total",        "kv_tables_probed_total",
        "kv_filter_negatives_total", "kv_filter_positives_total",
        "kv_filter_false_positives_total", "kv_data_block_reads_total",
        "kv_data_block_read_bytes_total", "kv_block_cache_hits_total",
        "kv_block_cache_misses_total", "kv_device_reads_total",
        "kv_device_read_bytes_total", "kv_direct_reads_refused_total",
    };
    for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++)
        expect_metric(text, counters[i], "counter");
    expect_metric(text, "kv_filter_size_bytes", "gauge");
    expect_metric(text, "kv_direct_reads", "gauge");
    /* use_direct_reads is off: no read goes to the device. */
    ck_assert_double_eq(metric_value(text, "kv_device_reads_total"), 0);
    ck_assert_double_eq(metric_value(text, "kv_direct_reads"), 0);
    ck_assert_double_eq(metric_value(text, "kv_gets_total"), 45);
    ck_assert_double_eq(metric_value(text, "kv_puts_total"), 30);
    ck_assert_double_eq(metric_value(text, "kv_deletes_total"), 10);
    ck_assert_double_eq(metric_value(text, "kv_tables_probed_total"), (double)s.tables_probed);
    ck_assert_double_eq(metric_value(text, "kv_filter_size_bytes"), (double)s.filter_bytes);
    kv_free(text);

    /* N more gets: the counter moves by exactly N. */
    for (int i = 0; i < 17; i++)
        expect_absent(db, k, (size_t)sprintf(k, "zz%d", i));
    ck_assert_int_eq(kv_metrics_text(db, &text), KV_OK);
    ck_assert_double_eq(metric_value(text, "kv_gets_total"), 62);
    kv_free(text);
    close_db(db);
}
END_TEST

/* ---- open options --------------------------------------------------------------- */

START_TEST(open_options)
{
    char p[600], missing[600];
    test_path(p, sizeof p, "db");
    test_path(missing, sizeof missing, "missing");
    kv_options o;

    kv_options_init(&o);
    o.create_if_missing = 0;
    kv_db *db = (kv_db *)test_dir;
    ck_assert_int_eq(kv_open(missing, &o, &db), KV_NOTFOUND);
    ck_assert_ptr_null(db);
    struct stat st;
    ck_assert_int_ne(stat(missing, &st), 0); /* not created */

    kv_options_init(&o);
    o.error_if_exists = 1;
    db = open_db(p, &o); /* new: fine */
    ck_assert_int_eq(kv_put(db, "k", 1, "v", 1), KV_OK);
    close_db(db);
    db = (kv_db *)test_dir;
    ck_assert_int_eq(kv_open(p, &o, &db), KV_EINVAL);
    ck_assert_ptr_null(db);

    kv_options_init(&o);
    o.create_if_missing = 0;
    db = open_db(p, &o); /* exists: fine, and not left locked */
    expect_value(db, "k", 1, "v", 1);
    close_db(db);
}
END_TEST

/* Default options write uncompressed data blocks of about 2048 bytes
 * (kv.h, block_size): the table a flush writes has its entries' bytes
 * spread over blocks of that size. */
START_TEST(default_block_size)
{
    kv_options o;
    kv_options_init(&o);
    ck_assert_uint_eq(o.block_size, 2048);
    o.compression = KV_COMPRESSION_NONE; /* compressed tables have a size of their own */
    kv_db *db;
    ck_assert_int_eq(kv_open(test_dir, &o, &db), KV_OK);
    char k[32], v[100];
    memset(v, 'v', sizeof v);
    for (unsigned i = 0; i < 4000; i++) {
        snprintf(k, sizeof k, "key%012u", i);
        ck_assert_int_eq(kv_put(db, k, strlen(k), v, sizeof v), KV_OK);
    }
    ck_assert_int_eq(kv_flush(db), KV_OK);
    ck_assert_int_eq(kv_close(db), KV_OK);
    DIR *d = opendir(test_dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    int tables = 0;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 4 || strcmp(e->d_name + n - 4, ".sst") != 0)
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", test_dir, e->d_name);
        kv_sst_reader *r;
        ck_assert_int_eq(kv_sst_reader_open(path, NULL, 1, &r), KV_OK);
        kv_sst_properties p;
        kv_sst_reader_properties(r, &p);
        /* Every block but the last closes once it reaches 2048 bytes,
         * within one entry (about 130 bytes) past it. */
        ck_assert_uint_ge(p.data_blocks, 2);
        uint64_t full = p.data_raw_bytes / p.data_blocks;
        ck_assert_msg(full >= 1900 && full <= 2300, "%llu bytes per block",
                      (unsigned long long)full);
        kv_sst_reader_close(r);
        tables++;
    }
    closedir(d);
    ck_assert_int_gt(tables, 0);
}
END_TEST

/* The documented default table size (kv.h): 32 MiB, set for the reads
 * that run beside a compaction (doc/database.md, "Disk interrupts"). That
 * a compaction cuts its tables at target_file_size is check_compact's. */
START_TEST(default_table_size)
{
    kv_options o;
    kv_options_init(&o);
    ck_assert_uint_eq(o.target_file_size, (size_t)32 << 20);
    ck_assert_uint_ge(o.max_bytes_for_level_base, o.target_file_size);
    kv_db *db;
    ck_assert_int_eq(kv_open(test_dir, &o, &db), KV_OK); /* the defaults pass validation */
    ck_assert_int_eq(kv_close(db), KV_OK);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("db");
    TCase *tc = tcase_create("basics");
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, binary_keys_and_limits);
    tcase_add_test(tc, long_keys_round_trip);
    tcase_add_test(tc, bad_arguments);
    tcase_add_test(tc, bad_options);
    tcase_add_test(tc, default_block_size);
    tcase_add_test(tc, default_table_size);
    suite_add_tcase(s, tc);
    tc = tcase_create("bulk");
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_set_timeout(tc, 1100);
    tcase_add_test(tc, million_puts_and_filter_fpr);
    suite_add_tcase(s, tc);
    tc = tcase_create("deletes");
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, deletes_across_flushes);
    suite_add_tcase(s, tc);
    tc = tcase_create("batches");
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, batch_applies_all);
    tcase_add_test(tc, batch_crash_atomicity);
    suite_add_tcase(s, tc);
    tc = tcase_create("sync_crash");
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, sync_crash_durability);
    tcase_add_test(tc, old_logs_unsynced);
    suite_add_tcase(s, tc);
    tc = tcase_create("wal_tail");
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, wal_tail_truncated);
    tcase_add_test(tc, wal_tail_flipped);
    suite_add_tcase(s, tc);
    tc = tcase_create("table_corrupt");
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, table_corrupt);
    suite_add_tcase(s, tc);
    tc = tcase_create("threads");
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, threads_read_while_writing);
    tcase_add_test(tc, counters_exact_from_many_threads);
    suite_add_tcase(s, tc);
    tc = tcase_create("busy");
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, busy);
    suite_add_tcase(s, tc);
    tc = tcase_create("metrics");
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, metrics_and_counters);
    suite_add_tcase(s, tc);
    tc = tcase_create("options");
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, open_options);
    suite_add_tcase(s, tc);
    return s;
}
