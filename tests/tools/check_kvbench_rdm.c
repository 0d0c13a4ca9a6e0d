/* check_kvbench_rdm.c - kvbench's deleterange and mergerandom, run as a
 * program (KVBENCH_PATH) at tiny sizes, and what they left read back
 * through the kv API: after fillseq and deleterange, exactly the keys of
 * --deletes runs of --range_size keys are gone, one run in each equal share
 * of the key space, and gets agree with a scan (before and after the
 * ranges reach tables, and across a reopen); after mergerandom of N
 * operands of 1, the values of all keys sum to N (scan and gets, before
 * and after compaction). readrandom and readmissing run after them in the
 * same list with --histogram (p999_us on every line). RocksDB, when kvbench
 * was built with -DKV_BENCH_PEERS=ON: the same ranges leave the same keys
 * (its readseq counts them) and mergerandom runs with readrandom after it;
 * LevelDB and LMDB say "not supported by" and run the rest of the list. */
#define _XOPEN_SOURCE 700

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <kv/kv.h>

#include "fixture.h"

#ifndef KVBENCH_PATH
#error "KVBENCH_PATH: the kvbench binary (set by tests/CMakeLists.txt)"
#endif

#define KEY_SIZE 16

/* ---- running kvbench ------------------------------------------------------------------ */

struct output {
    int status;
    char *out, *err; /* stdout (JSON lines), stderr (text) */
};

static char *slurp(const char *p)
{
    FILE *f = fopen(p, "rb");
    ck_assert_msg(f != NULL, "%s: %s", p, strerror(errno));
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    ck_assert_ptr_nonnull(buf);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (cap - n < 2) {
            buf = realloc(buf, cap *= 2);
            ck_assert_ptr_nonnull(buf);
        }
    }
    fclose(f);
    buf[n] = 0;
    return buf;
}

/* Runs kvbench with args (NULL-terminated); its output into o. */
static void run(struct output *o, const char *const *args)
{
    char out[700], err[700];
    test_path(out, sizeof out, "stdout");
    test_path(err, sizeof err, "stderr");
    const char *argv[40] = {KVBENCH_PATH};
    int n = 1;
    for (; args[n - 1]; n++) {
        ck_assert_int_lt(n, 39);
        argv[n] = args[n - 1];
    }
    argv[n] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0)
            _exit(126);
        dup2(fo, 1);
        dup2(fe, 2);
        execv(KVBENCH_PATH, (char *const *)argv);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        ck_assert_int_eq(errno, EINTR);
    o->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    o->out = slurp(out);
    o->err = slurp(err);
}

static void run_ok(struct output *o, const char *const *args)
{
    run(o, args);
    ck_assert_msg(o->status == 0, "kvbench exited %d: %s", o->status, o->err);
}

static void output_free(struct output *o)
{
    free(o->out);
    free(o->err);
}

/* The k-th JSON line (from 0) of benchmark `name` in out. */
static const char *line_of(const char *out, const char *name, int k)
{
    char want[80];
    snprintf(want, sizeof want, "{\"benchmark\":\"%s\",", name);
    for (const char *p = out; (p = strstr(p, want)) != NULL; p++)
        if ((p == out || p[-1] == '\n') && k-- == 0)
            return p;
    ck_abort_msg("no JSON line for %s (%d)", name, k);
    return NULL;
}

/* A number field of the JSON line at line; -1 when absent. */
static double field(const char *line, const char *name)
{
    char want[80];
    snprintf(want, sizeof want, "\"%s\":", name);
    const char *end = strchr(line, '\n'), *p = strstr(line, want);
    if (!p || (end && p > end))
        return -1;
    return strtod(p + strlen(want), NULL);
}

/* Every result line of a write or read benchmark: ops/s and p99.9. */
static void check_line(const char *line, double ops)
{
    ck_assert_double_eq(field(line, "ops"), ops);
    ck_assert_double_gt(field(line, "ops_per_sec"), 0);
    ck_assert_double_gt(field(line, "p999_us"), 0);
    ck_assert_double_ge(field(line, "p999_us"), field(line, "p99_us"));
}

/* ---- the database kvbench left --------------------------------------------------------- */

/* kvbench's key i: 2i in KEY_SIZE decimal digits. */
static void kvb_key(char *k, uint64_t i)
{
    snprintf(k, KEY_SIZE + 1, "%0*llu", KEY_SIZE, (unsigned long long)(2 * i));
}

static uint64_t index_of(const void *k, size_t kl)
{
    ck_assert_uint_eq(kl, KEY_SIZE);
    char buf[KEY_SIZE + 1];
    memcpy(buf, k, KEY_SIZE);
    buf[KEY_SIZE] = 0;
    uint64_t x = strtoull(buf, NULL, 10);
    ck_assert_msg(x % 2 == 0, "odd key %s", buf);
    return x / 2;
}

static uint64_t le64(const void *v)
{
    const uint8_t *p = v;
    uint64_t x = 0;
    for (int i = 7; i >= 0; i--)
        x = x << 8 | p[i];
    return x;
}

/* After fillseq of num and deleterange of `ranges` runs of `size`: the
 * keys present by a scan and by gets are the same, and the absent ones are
 * exactly `ranges` runs of `size`, run j inside share j of [0, num). */
static void check_ranges(kv_db *db, uint64_t num, uint64_t ranges, uint64_t size)
{
    uint8_t *present = calloc(num, 1);
    ck_assert_ptr_nonnull(present);
    kv_iter *it;
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    uint64_t seen = 0;
    for (kv_iter_seek_first(it); kv_iter_valid(it); kv_iter_next(it)) {
        size_t kl;
        uint64_t i = index_of(kv_iter_key(it, &kl), kl);
        ck_assert_uint_lt(i, num);
        present[i] = 1;
        seen++;
    }
    ck_assert_int_eq(kv_iter_status(it), KV_OK);
    kv_iter_free(it);
    ck_assert_uint_eq(seen, num - ranges * size);
    char k[KEY_SIZE + 1];
    for (uint64_t i = 0; i < num; i++) {
        kvb_key(k, i);
        void *v;
        size_t vl;
        int rc = kv_get(db, k, KEY_SIZE, &v, &vl);
        ck_assert_msg(rc == (present[i] ? KV_OK : KV_NOTFOUND), "key %llu: get %d, scan %d",
                      (unsigned long long)i, rc, present[i]);
        if (rc == KV_OK)
            kv_free(v);
    }
    /* the runs of absent keys */
    uint64_t runs = 0;
    for (uint64_t i = 0; i < num;) {
        if (present[i]) {
            i++;
            continue;
        }
        uint64_t b = i;
        while (i < num && !present[i])
            i++;
        ck_assert_msg(i - b == size, "a run of %llu absent keys at %llu",
                      (unsigned long long)(i - b), (unsigned long long)b);
        ck_assert_msg(b >= runs * num / ranges && i <= (runs + 1) * num / ranges,
                      "run %llu [%llu, %llu) outside its share", (unsigned long long)runs,
                      (unsigned long long)b, (unsigned long long)i);
        runs++;
    }
    ck_assert_uint_eq(runs, ranges);
    free(present);
}

/* The values of all keys (8 bytes each) by a scan, and by gets of every
 * key of [0, num): the same sum. */
static uint64_t sum_values(kv_db *db, uint64_t num)
{
    kv_iter *it;
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    uint64_t sum = 0, keys = 0;
    for (kv_iter_seek_first(it); kv_iter_valid(it); kv_iter_next(it)) {
        size_t kl, vl;
        ck_assert_uint_lt(index_of(kv_iter_key(it, &kl), kl), num);
        const void *v = kv_iter_value(it, &vl);
        ck_assert_uint_eq(vl, 8);
        ck_assert_uint_gt(le64(v), 0);
        sum += le64(v);
        keys++;
    }
    ck_assert_int_eq(kv_iter_status(it), KV_OK);
    kv_iter_free(it);
    uint64_t by_get = 0, found = 0;
    char k[KEY_SIZE + 1];
    for (uint64_t i = 0; i < num; i++) {
        kvb_key(k, i);
        void *v;
        size_t vl;
        int rc = kv_get(db, k, KEY_SIZE, &v, &vl);
        ck_assert_msg(rc == KV_OK || rc == KV_NOTFOUND, "get %llu: %s", (unsigned long long)i,
                      kv_strerror(rc));
        if (rc != KV_OK)
            continue;
        ck_assert_uint_eq(vl, 8);
        by_get += le64(v);
        found++;
        kv_free(v);
    }
    ck_assert_uint_eq(found, keys);
    ck_assert_uint_eq(by_get, sum);
    return sum;
}

static kv_db *open_merge_db(const char *dir)
{
    kv_options o;
    kv_options_init(&o);
    o.merge_operator = kv_merge_uint64_add();
    return open_db(dir, &o);
}

/* ---- the tests ------------------------------------------------------------------------- */

#define NUM 3000
#define RANGES 7
#define RANGE_SIZE 13

/* The ranges in the memtable and the log (read back after a reopen), and
 * in tables (a small memtable, then compact). */
START_TEST(deleterange_leaves_the_runs)
{
    char dbdir[700], dbarg[720];
    test_path(dbdir, sizeof dbdir, "db");
    snprintf(dbarg, sizeof dbarg, "--db=%s", dbdir);
    static const char *const lists[] =
        {"--benchmarks=fillseq,deleterange,readrandom,readmissing",
         "--benchmarks=fillseq,deleterange,compact,readrandom,readmissing"};
    for (int t = 0; t < 2; t++) {
        const char *args[] = {dbarg,
                              "--num=3000",
                              "--deletes=7",
                              "--range_size=13",
                              "--histogram=1",
                              "--json",
                              t ? "--write_buffer_size=65536" : "--write_buffer_size=4194304",
                              lists[t],
                              NULL};
        struct output o;
        run_ok(&o, args);
        check_line(line_of(o.out, "deleterange", 0), RANGES);
        check_line(line_of(o.out, "readrandom", 0), NUM);
        check_line(line_of(o.out, "readmissing", 0), NUM);
        ck_assert_double_eq(field(line_of(o.out, "readmissing", 0), "found"), 0);
        /* random reads find about the share of keys left: 1 - 91/3000 */
        double found = field(line_of(o.out, "readrandom", 0), "found");
        ck_assert_msg(found < NUM && found > 0.9 * NUM, "readrandom found %g", found);
        ck_assert_ptr_nonnull(strstr(o.err, "deleterange  : "));
        ck_assert_ptr_nonnull(strstr(o.err, "p99.9 "));
        output_free(&o);
        kv_db *db = open_db(dbdir, NULL);
        check_ranges(db, NUM, RANGES, RANGE_SIZE);
        if (t == 1) { /* and after they are compacted away */
            ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 0), KV_OK);
            check_ranges(db, NUM, RANGES, RANGE_SIZE);
        }
        close_db(db);
    }
    /* ranges longer than their shares run on into the next ones, cut at
     * num: [0, 50), [33, 83), [66, 100) leave nothing */
    const char *args[] = {dbarg,         "--num=100",
                          "--deletes=3", "--range_size=50",
                          "--json",      "--benchmarks=fillseq,deleterange,readseq",
                          NULL};
    struct output o;
    run_ok(&o, args);
    ck_assert_double_eq(field(line_of(o.out, "readseq", 0), "ops"), 0);
    output_free(&o);
    kv_db *db = open_db(dbdir, NULL);
    kv_iter *it;
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    kv_iter_seek_first(it);
    ck_assert(!kv_iter_valid(it));
    ck_assert_int_eq(kv_iter_status(it), KV_OK);
    kv_iter_free(it);
    close_db(db);
}
END_TEST

/* N operands of 1: the values sum to N, with operands unmerged (after a
 * reopen: from the log), and after compaction merged them. */
START_TEST(mergerandom_sums_to_n)
{
    char dbdir[700], dbarg[720];
    test_path(dbdir, sizeof dbdir, "db");
    snprintf(dbarg, sizeof dbarg, "--db=%s", dbdir);
    static const char *const lists[] =
        {"--benchmarks=mergerandom,readrandom,readmissing",
         "--benchmarks=mergerandom,readrandom,waitforcompaction,compact,readrandom"};
    for (int t = 0; t < 2; t++) {
        const char *args[] = {dbarg,
                              "--num=3000",
                              "--histogram=1",
                              "--json",
                              t ? "--write_buffer_size=32768" : "--write_buffer_size=4194304",
                              lists[t],
                              NULL};
        struct output o;
        run_ok(&o, args);
        check_line(line_of(o.out, "mergerandom", 0), NUM);
        const char *r = line_of(o.out, "readrandom", 0);
        check_line(r, NUM);
        /* about 1 - 1/e of the keys got an operand */
        double found = field(r, "found");
        ck_assert_msg(found > 0.5 * NUM && found < 0.75 * NUM, "readrandom found %g", found);
        if (t == 1) /* the same keys before and after compaction merged them */
            ck_assert_double_eq(field(line_of(o.out, "readrandom", 1), "found"), found);
        else
            ck_assert_double_eq(field(line_of(o.out, "readmissing", 0), "found"), 0);
        output_free(&o);
        kv_db *db = open_merge_db(dbdir);
        ck_assert_uint_eq(sum_values(db, NUM), NUM);
        ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 0), KV_OK);
        ck_assert_uint_eq(sum_values(db, NUM), NUM);
        close_db(db);
    }
}
END_TEST

/* The peers: RocksDB runs both (its readseq counts the keys the ranges
 * left); LevelDB and LMDB say they cannot and run the rest. */
START_TEST(peers)
{
    static const char *const engines[] = {"--engine=rocksdb", "--engine=leveldb", "--engine=lmdb"};
    for (int e = 0; e < 3; e++) {
        const char *args[] = {engines[e],
                              "--num=3000",
                              "--deletes=7",
                              "--range_size=13",
                              "--histogram=1",
                              "--json",
                              "--benchmarks=fillseq,deleterange,readseq,readrandom,"
                              "mergerandom,readrandom,compact,readrandom",
                              NULL};
        struct output o;
        run(&o, args);
        if (o.status == 2 && strstr(o.err, "-DKV_BENCH_PEERS=ON")) { /* no peers built */
            ck_assert_int_ne(e, 2);
            output_free(&o);
            continue;
        }
        ck_assert_msg(o.status == 0, "%s: exit %d: %s", engines[e], o.status, o.err);
        if (e == 0) {
            check_line(line_of(o.out, "deleterange", 0), RANGES);
            check_line(line_of(o.out, "mergerandom", 0), NUM);
            ck_assert_double_eq(field(line_of(o.out, "readseq", 0), "ops"),
                                NUM - RANGES * RANGE_SIZE);
            double found = field(line_of(o.out, "readrandom", 1), "found");
            ck_assert_msg(found > 0.5 * NUM && found < 0.75 * NUM, "found %g", found);
            ck_assert_double_eq(field(line_of(o.out, "readrandom", 2), "found"), found);
        } else {
            const char *name = e == 1 ? "leveldb" : "lmdb";
            char want[80];
            snprintf(want, sizeof want, "deleterange  : not supported by %s", name);
            ck_assert_msg(strstr(o.err, want) != NULL, "%s", o.err);
            snprintf(want, sizeof want, "mergerandom  : not supported by %s", name);
            ck_assert_msg(strstr(o.err, want) != NULL, "%s", o.err);
            ck_assert_ptr_null(strstr(o.out, "\"benchmark\":\"deleterange\""));
            /* the list went on: all keys still there */
            ck_assert_double_eq(field(line_of(o.out, "readseq", 0), "ops"), NUM);
            ck_assert_double_eq(field(line_of(o.out, "readrandom", 2), "found"), NUM);
        }
        output_free(&o);
    }
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("kvbench_rdm");
    TCase *tc = test_tcase(s, "kvbench_rdm", 300, 1);
    tcase_add_test(tc, deleterange_leaves_the_runs);
    tcase_add_test(tc, mergerandom_sums_to_n);
    tcase_add_test(tc, peers);
    return s;
}
