/* check_wal.c - the write-ahead log: round trips, and replay of truncated
 * or damaged logs, which must deliver an exact prefix of what was written. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../kv/wal.h"
#include "testing.h" /* kv_testing: fault injection, I/O counters */
#include "fixture.h"

static char path[128], copy[128];

/* The fixture's directory, and the files the tests name in it. */
static void setup_files(void)
{
    test_setup();
    test_path(path, sizeof path, "000001.log");
    test_path(copy, sizeof copy, "copy.log");
}

static uint64_t rng = 88172645463325252ull;

static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* The records written, to compare with what replay delivers. */
struct log {
    uint8_t **rec;
    size_t *len;
    size_t n;
};

static void write_log(struct log *lg, const size_t *sizes, size_t n)
{
    kv_wal *w;
    ck_assert_int_eq(kv_wal_create(path, 1, &w), KV_OK);
    lg->rec = calloc(n, sizeof *lg->rec);
    lg->len = calloc(n, sizeof *lg->len);
    lg->n = n;
    for (size_t i = 0; i < n; i++) {
        lg->len[i] = sizes[i];
        lg->rec[i] = malloc(sizes[i] ? sizes[i] : 1);
        for (size_t j = 0; j < sizes[i]; j++)
            lg->rec[i][j] = (uint8_t)rnd();
        ck_assert_int_eq(kv_wal_append(w, lg->rec[i], sizes[i]), KV_OK);
    }
    ck_assert_int_eq(kv_wal_sync(w), KV_OK);
    ck_assert_int_eq(kv_wal_close(w), KV_OK);
}

static void free_log(struct log *lg)
{
    for (size_t i = 0; i < lg->n; i++)
        free(lg->rec[i]);
    free(lg->rec);
    free(lg->len);
}

/* Replay checks each delivered record against the next one written. */
struct cursor {
    const struct log *lg;
    size_t next;
    int mismatch;
};

static int check_record(void *ctx, const void *rec, size_t len)
{
    struct cursor *c = ctx;
    if (c->next >= c->lg->n || c->lg->len[c->next] != len ||
        (len && memcmp(c->lg->rec[c->next], rec, len) != 0))
        c->mismatch = 1;
    c->next++;
    return 0;
}

static size_t replay_prefix(const char *file, uint64_t number, const struct log *lg,
                            kv_wal_report *rep)
{
    struct cursor c = {lg, 0, 0};
    ck_assert_int_eq(kv_wal_replay(file, number, check_record, &c, rep), KV_OK);
    ck_assert_msg(!c.mismatch, "replay delivered a record that was not written there");
    ck_assert_uint_eq(rep->records, c.next);
    return c.next;
}

START_TEST(round_trip)
{
    size_t sizes[600];
    static const size_t edge[] = {0, 1, 100, KV_WAL_BLOCK - KV_WAL_HEADER, KV_WAL_BLOCK,
                                  KV_WAL_BLOCK - 2 * KV_WAL_HEADER + 1, 100000, 1 << 20, 0, 7};
    size_t n = 0;
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++)
        sizes[n++] = edge[i];
    while (n < 600)
        sizes[n++] = rnd() % 3000;
    struct log lg;
    write_log(&lg, sizes, n);
    kv_wal_report rep;
    ck_assert_uint_eq(replay_prefix(path, 1, &lg, &rep), n);
    ck_assert_int_eq(rep.tail_damaged, 0);
    ck_assert_uint_eq(rep.bytes_dropped, 0);
    /* Another log's number: none of its fragments pass. */
    ck_assert_uint_eq(replay_prefix(path, 2, &lg, &rep), 0);
    ck_assert_int_eq(rep.tail_damaged, 1);
    free_log(&lg);
}
END_TEST

static uint8_t *read_file(const char *p, size_t *len)
{
    FILE *f = fopen(p, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*len ? *len : 1);
    ck_assert_uint_eq(fread(b, 1, *len, f), *len);
    fclose(f);
    return b;
}

static void write_file(const char *p, const uint8_t *b, size_t len)
{
    FILE *f = fopen(p, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(b, 1, len, f), len);
    fclose(f);
}

/* Cut the log anywhere: replay gives the records that ended before the cut,
 * exactly, and says the tail was damaged unless the cut fell on a record's
 * end. */
START_TEST(truncation_gives_a_prefix)
{
    size_t sizes[120];
    for (size_t i = 0; i < 120; i++)
        sizes[i] = i % 17 == 0 ? 40000 : rnd() % 1500;
    struct log lg;
    write_log(&lg, sizes, 120);
    size_t len;
    uint8_t *orig = read_file(path, &len);
    for (size_t cut = 0; cut <= len; cut += (cut % KV_WAL_BLOCK < 64 || cut + 64 > len) ? 1 : 397) {
        write_file(copy, orig, cut);
        kv_wal_report rep;
        size_t got = replay_prefix(copy, 1, &lg, &rep);
        ck_assert_uint_le(rep.bytes_read, cut);
        if (rep.tail_damaged)
            ck_assert_uint_eq(rep.bytes_dropped, cut - rep.bytes_read);
        /* Everything that ended before the cut is there. */
        write_file(copy, orig, rep.bytes_read);
        kv_wal_report again;
        ck_assert_uint_eq(replay_prefix(copy, 1, &lg, &again), got);
        ck_assert_int_eq(again.tail_damaged, 0);
    }
    kv_wal_report rep;
    write_file(copy, orig, len);
    ck_assert_uint_eq(replay_prefix(copy, 1, &lg, &rep), 120);
    free(orig);
    free_log(&lg);
}
END_TEST

/* Flip one byte: the records before the damaged one come back exactly and
 * nothing after a damaged fragment is delivered. */
START_TEST(flipped_byte_stops_replay)
{
    size_t sizes[200];
    for (size_t i = 0; i < 200; i++)
        sizes[i] = rnd() % 2000;
    struct log lg;
    write_log(&lg, sizes, 200);
    size_t len;
    uint8_t *orig = read_file(path, &len);
    kv_wal_report full;
    ck_assert_uint_eq(replay_prefix(path, 1, &lg, &full), 200);
    uint8_t *work = malloc(len);
    for (int t = 0; t < 2000; t++) {
        size_t at = rnd() % len;
        memcpy(work, orig, len);
        work[at] ^= (uint8_t)(1u << (rnd() % 8));
        write_file(copy, work, len);
        kv_wal_report rep;
        size_t got = replay_prefix(copy, 1, &lg, &rep);
        /* Flips in block padding are harmless; any other stops replay at or
         * before the record holding the byte. */
        if (got < 200) {
            ck_assert_int_eq(rep.tail_damaged, 1);
            ck_assert_uint_le(rep.bytes_read, at);
        }
    }
    free(work);
    free(orig);
    free_log(&lg);
}
END_TEST

static int stop_at_three(void *ctx, const void *rec, size_t len)
{
    (void)rec;
    (void)len;
    return ++*(int *)ctx == 3 ? 77 : 0;
}

START_TEST(arguments_and_callback_stop)
{
    size_t sizes[5] = {1, 2, 3, 4, 5};
    struct log lg;
    write_log(&lg, sizes, 5);
    int count = 0;
    kv_wal_report rep;
    ck_assert_int_eq(kv_wal_replay(path, 1, stop_at_three, &count, &rep), 77);
    ck_assert_int_eq(count, 3);
    kv_wal *w;
    ck_assert_int_eq(kv_wal_create(path, 1, &w), KV_EINVAL); /* exists */
    ck_assert_ptr_null(w);
    ck_assert_int_eq(kv_wal_replay(copy, 1, stop_at_three, &count, &rep), KV_NOTFOUND);
    ck_assert_int_eq(kv_wal_replay(NULL, 1, stop_at_three, &count, &rep), KV_EINVAL);
    ck_assert_int_eq(kv_wal_append(NULL, "x", 1), KV_EINVAL);
    ck_assert_int_eq(kv_wal_sync(NULL), KV_EINVAL);
    ck_assert_int_eq(kv_wal_close(NULL), KV_OK);
    free_log(&lg);
}
END_TEST

/* A failed write or sync kills the log: the same error ever after, and
 * replay still gives exactly the records acknowledged before it. */
START_TEST(failure_kills_the_log)
{
    for (int op = KV_FILE_WRITE; op <= KV_FILE_SYNC; op++) {
        unlink(path);
        kv_wal *w;
        ck_assert_int_eq(kv_wal_create(path, 1, &w), KV_OK);
        ck_assert_int_eq(kv_wal_append(w, "first", 5), KV_OK);
        ck_assert_int_eq(kv_wal_sync(w), KV_OK);
        kv_file_inject((kv_file_op)op, 1, op == KV_FILE_WRITE ? KV_FAULT_ENOSPC : KV_FAULT_EIO);
        int rc = kv_wal_append(w, "second", 6);
        if (op == KV_FILE_SYNC) {
            ck_assert_int_eq(rc, KV_OK);
            rc = kv_wal_sync(w);
        }
        int want = op == KV_FILE_WRITE ? KV_ENOSPC : KV_EIO;
        ck_assert_int_eq(rc, want);
        /* The fault is spent, but the log stays dead. */
        ck_assert_int_eq(kv_wal_append(w, "third", 5), want);
        ck_assert_int_eq(kv_wal_sync(w), want);
        ck_assert_int_eq(kv_wal_close(w), want);
        /* "second" reached the kernel when only the sync failed. */
        size_t sizes[2] = {5, 6};
        uint8_t *recs[2] = {(uint8_t *)"first", (uint8_t *)"second"};
        struct log lg = {recs, sizes, op == KV_FILE_SYNC ? 2 : 1};
        kv_wal_report rep;
        size_t got = replay_prefix(path, 1, &lg, &rep);
        ck_assert_uint_ge(got, 1);
        ck_assert_uint_le(got, lg.n);
    }
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("wal");
    TCase *tc = tcase_create("wal");
    tcase_add_checked_fixture(tc, setup_files, test_teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, round_trip);
    tcase_add_test(tc, truncation_gives_a_prefix);
    tcase_add_test(tc, flipped_byte_stops_replay);
    tcase_add_test(tc, arguments_and_callback_stop);
    tcase_add_test(tc, failure_kills_the_log);
    suite_add_tcase(s, tc);
    return s;
}
