/* check_manifest.c - the LMDB manifest: round trips across reopen, atomic
 * changes, map growth, and damaged or foreign files. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#include "../kv/manifest.h"
#include "fixture.h"

/* last_seq covers every table's max_seq below (doc/manifest.md). */
static const kv_manifest_state fresh = {1, 2, 1u << 20, 1, 0xABCDEF};

static kv_table_meta table(uint64_t number, uint32_t level, const char *lo, size_t lolen,
                           const char *hi, size_t hilen)
{
    kv_table_meta t = {0};
    t.number = number;
    t.level = level;
    t.file_size = number * 1000 + 7;
    t.smallest = (uint8_t *)lo;
    t.smallest_len = lolen;
    t.largest = (uint8_t *)hi;
    t.largest_len = hilen;
    t.min_seq = number * 10;
    t.max_seq = number * 10 + 9;
    t.entries = number * 3;
    t.filter_layout = (uint32_t)(number & 1);
    t.filter_bits_per_key = 9.75;
    t.filter_k = 6;
    t.filter_keys = number * 3;
    return t;
}

static void assert_same(const kv_table_meta *a, const kv_table_meta *b)
{
    ck_assert_uint_eq(a->number, b->number);
    ck_assert_uint_eq(a->level, b->level);
    ck_assert_uint_eq(a->file_size, b->file_size);
    ck_assert_uint_eq(a->min_seq, b->min_seq);
    ck_assert_uint_eq(a->max_seq, b->max_seq);
    ck_assert_uint_eq(a->entries, b->entries);
    ck_assert_uint_eq(a->filter_layout, b->filter_layout);
    ck_assert_uint_eq(a->filter_k, b->filter_k);
    ck_assert(a->filter_bits_per_key == b->filter_bits_per_key);
    ck_assert_uint_eq(a->filter_keys, b->filter_keys);
    ck_assert_uint_eq(a->flags, b->flags);
    ck_assert_uint_eq(a->blob_lo, b->blob_lo);
    ck_assert_uint_eq(a->blob_hi, b->blob_hi);
    ck_assert_uint_eq(a->run, b->run);
    ck_assert_uint_eq(a->smallest_len, b->smallest_len);
    ck_assert_uint_eq(a->largest_len, b->largest_len);
    ck_assert(!memcmp(a->smallest, b->smallest, a->smallest_len));
    ck_assert(!memcmp(a->largest, b->largest, a->largest_len));
}

static kv_manifest *open_or_fail(int create)
{
    kv_manifest *m;
    ck_assert_int_eq(kv_manifest_open(test_dir, create, &fresh, &m), KV_OK);
    return m;
}

START_TEST(round_trip_across_reopen)
{
    kv_manifest *m;
    ck_assert_int_eq(kv_manifest_open(test_dir, 0, NULL, &m), KV_NOTFOUND);
    m = open_or_fail(1);
    kv_manifest_state s;
    kv_table_meta *t;
    size_t n;
    ck_assert_int_eq(kv_manifest_load(m, &s, &t, &n), KV_OK);
    ck_assert_uint_eq(n, 0);
    ck_assert_uint_eq(s.seed, fresh.seed);
    ck_assert_uint_eq(s.next_file, fresh.next_file);

    kv_table_meta add[3] = {
        table(5, 0, "a\0b", 3, "zz", 2),
        table(7, 1, "", 0, "\xff\xff", 2),
        table(6, 2, "m", 1, "m", 1),
    };
    add[1].flags = KV_TABLE_SNAPSHOT_PINNED;
    kv_manifest_state s2 = {1, 9, 1234, 8, fresh.seed};
    ck_assert_int_eq(kv_manifest_apply(m, &s2, NULL, 0, add, 3), KV_OK);
    kv_manifest_close(m);

    m = open_or_fail(0);
    ck_assert_int_eq(kv_manifest_load(m, &s, &t, &n), KV_OK);
    ck_assert_uint_eq(n, 3);
    ck_assert_uint_eq(s.next_file, 9);
    ck_assert_uint_eq(s.last_seq, 1234);
    ck_assert_uint_eq(s.log_number, 8);
    assert_same(&t[0], &add[0]); /* ordered by number: 5, 6, 7 */
    assert_same(&t[1], &add[2]);
    assert_same(&t[2], &add[1]);
    kv_manifest_free_tables(t, n);

    /* One change: 5 and 6 out, 8 in. */
    uint64_t gone[2] = {5, 6};
    kv_table_meta in = table(8, 1, "b", 1, "c", 1);
    s2.next_file = 10;
    ck_assert_int_eq(kv_manifest_apply(m, &s2, gone, 2, &in, 1), KV_OK);
    ck_assert_int_eq(kv_manifest_load(m, &s, &t, &n), KV_OK);
    ck_assert_uint_eq(n, 2);
    ck_assert_uint_eq(t[0].number, 7);
    assert_same(&t[1], &in);
    ck_assert_uint_eq(s.next_file, 10);
    kv_manifest_free_tables(t, n);
    kv_manifest_close(m);
}
END_TEST

START_TEST(blob_files_and_their_tables)
{
    kv_manifest *m = open_or_fail(1);
    kv_manifest_blob *b;
    size_t nb;
    ck_assert_int_eq(kv_manifest_load_blobs(m, &b, &nb), KV_OK); /* none yet */
    ck_assert_uint_eq(nb, 0);
    ck_assert_ptr_null(b);
    /* A table that refers to blob files 3..4 (a version-3 record), one
     * that refers to none (version 2), and the two files. */
    kv_table_meta add[2] = {table(5, 0, "a", 1, "k", 1), table(6, 1, "m", 1, "z", 1)};
    add[0].blob_lo = 3;
    add[0].blob_hi = 4;
    kv_manifest_blob put[2] = {{3, 1000, 10, 900, 0, 0}, {4, 2000, 20, 1900, 0, 0}};
    kv_manifest_state s2 = {1, 9, 100, 8, fresh.seed};
    ck_assert_int_eq(kv_manifest_apply_blobs(m, &s2, NULL, 0, add, 2, put, 2, NULL, 0), KV_OK);
    kv_manifest_close(m);
    m = open_or_fail(0);
    kv_manifest_state s;
    kv_table_meta *t;
    size_t n;
    ck_assert_int_eq(kv_manifest_load(m, &s, &t, &n), KV_OK);
    ck_assert_uint_eq(n, 2);
    assert_same(&t[0], &add[0]);
    assert_same(&t[1], &add[1]);
    kv_manifest_free_tables(t, n);
    ck_assert_int_eq(kv_manifest_load_blobs(m, &b, &nb), KV_OK);
    ck_assert_uint_eq(nb, 2);
    ck_assert(memcmp(&b[0], &put[0], sizeof *b) == 0 && memcmp(&b[1], &put[1], sizeof *b) == 0);
    free(b);
    /* New garbage counts for 4, 3 removed, in one change. */
    kv_manifest_blob upd = {4, 2000, 20, 1900, 5, 400};
    uint64_t gone = 3;
    ck_assert_int_eq(kv_manifest_apply_blobs(m, &s2, NULL, 0, NULL, 0, &upd, 1, &gone, 1), KV_OK);
    ck_assert_int_eq(kv_manifest_load_blobs(m, &b, &nb), KV_OK);
    ck_assert_uint_eq(nb, 1);
    ck_assert(memcmp(&b[0], &upd, sizeof *b) == 0);
    free(b);
    /* Removing a file that is not there, or more garbage than records,
     * changes nothing. */
    ck_assert_int_eq(kv_manifest_apply_blobs(m, &s2, NULL, 0, NULL, 0, NULL, 0, &gone, 1),
                     KV_EINVAL);
    kv_manifest_blob bad = {4, 2000, 20, 1900, 21, 400};
    ck_assert_int_eq(kv_manifest_apply_blobs(m, &s2, NULL, 0, NULL, 0, &bad, 1, NULL, 0),
                     KV_EINVAL);
    ck_assert_int_eq(kv_manifest_load_blobs(m, &b, &nb), KV_OK);
    ck_assert_uint_eq(nb, 1);
    ck_assert(memcmp(&b[0], &upd, sizeof *b) == 0);
    free(b);
    kv_manifest_close(m);
}
END_TEST

START_TEST(bad_changes_change_nothing)
{
    kv_manifest *m = open_or_fail(1);
    kv_table_meta one = table(3, 0, "a", 1, "b", 1);
    ck_assert_int_eq(kv_manifest_apply(m, &fresh, NULL, 0, &one, 1), KV_OK);

    kv_manifest_state s2 = fresh;
    s2.next_file = 99;
    uint64_t absent = 42;
    kv_table_meta two = table(4, 0, "c", 1, "d", 1);
    /* Removing an absent table: nothing happens, not even the add. */
    ck_assert_int_eq(kv_manifest_apply(m, &s2, &absent, 1, &two, 1), KV_EINVAL);
    /* Adding a table twice: nothing happens. */
    ck_assert_int_eq(kv_manifest_apply(m, &s2, NULL, 0, &one, 1), KV_EINVAL);
    kv_manifest_state s;
    kv_table_meta *t;
    size_t n;
    ck_assert_int_eq(kv_manifest_load(m, &s, &t, &n), KV_OK);
    ck_assert_uint_eq(n, 1);
    ck_assert_uint_eq(t[0].number, 3);
    ck_assert_uint_eq(s.next_file, fresh.next_file);
    kv_manifest_free_tables(t, n);

    ck_assert_int_eq(kv_manifest_apply(NULL, &s2, NULL, 0, NULL, 0), KV_EINVAL);
    ck_assert_int_eq(kv_manifest_apply(m, NULL, NULL, 0, NULL, 0), KV_EINVAL);
    ck_assert_int_eq(kv_manifest_apply(m, &s2, NULL, 1, NULL, 0), KV_EINVAL);
    ck_assert_int_eq(kv_manifest_load(NULL, &s, &t, &n), KV_EINVAL);
    ck_assert_int_eq(kv_manifest_open(NULL, 1, &fresh, &m), KV_EINVAL);
    kv_manifest_close(m);
    kv_manifest_close(NULL);
}
END_TEST

/* Enough large key ranges to outgrow the initial 16 MiB map. */
START_TEST(map_grows)
{
    kv_manifest *m = open_or_fail(1);
    size_t klen = 200000;
    char *lo = malloc(klen), *hi = malloc(klen);
    memset(lo, 'a', klen);
    memset(hi, 'z', klen);
    for (uint64_t i = 0; i < 60; i++) {
        kv_table_meta t = table(100 + i, 1, lo, klen, hi, klen);
        ck_assert_int_eq(kv_manifest_apply(m, &fresh, NULL, 0, &t, 1), KV_OK);
    }
    kv_manifest_close(m);
    m = open_or_fail(0);
    kv_manifest_state s;
    kv_table_meta *t;
    size_t n;
    ck_assert_int_eq(kv_manifest_load(m, &s, &t, &n), KV_OK);
    ck_assert_uint_eq(n, 60);
    ck_assert_uint_eq(t[59].largest_len, klen);
    ck_assert(!memcmp(t[59].largest, hi, klen));
    kv_manifest_free_tables(t, n);
    kv_manifest_close(m);
    free(lo);
    free(hi);
}
END_TEST

static char *manifest_path(void)
{
    static char p[128];
    snprintf(p, sizeof p, "%s/%s", test_dir, KV_MANIFEST_FILE);
    return p;
}

/* A byte flipped inside a stored value is caught by the value's checksum. */
START_TEST(flipped_value_is_corrupt)
{
    static const char marker[] = "MARKER-KEY-0123456789";
    kv_manifest *m = open_or_fail(1);
    kv_table_meta t1 = table(11, 0, marker, sizeof marker - 1, "zzz", 3);
    ck_assert_int_eq(kv_manifest_apply(m, &fresh, NULL, 0, &t1, 1), KV_OK);
    kv_manifest_close(m);

    FILE *f = fopen(manifest_path(), "r+b");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    char *buf = malloc((size_t)size);
    fseek(f, 0, SEEK_SET);
    ck_assert_uint_eq(fread(buf, 1, (size_t)size, f), (size_t)size);
    long at = -1;
    for (long i = 0; i + (long)sizeof marker - 1 <= size; i++)
        if (!memcmp(buf + i, marker, sizeof marker - 1))
            at = i;
    ck_assert_int_ge(at, 0);
    fseek(f, at + 5, SEEK_SET);
    fputc(buf[at + 5] ^ 0x01, f);
    fclose(f);
    free(buf);

    m = open_or_fail(0);
    kv_manifest_state s;
    kv_table_meta *t;
    size_t n;
    ck_assert_int_eq(kv_manifest_load(m, &s, &t, &n), KV_ECORRUPT);
    ck_assert_ptr_null(t);
    kv_manifest_close(m);
}
END_TEST

/* Rewrites the fixed part of the one table record whose smallest key is
 * `marker` (its 80 bytes precede the key): version byte, flags byte, and
 * the checksum after the keys, so that the record is otherwise valid. */
static void patch_record(const char *marker, size_t mlen, size_t largest_len, uint8_t version,
                         uint8_t flags)
{
    FILE *f = fopen(manifest_path(), "r+b");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    uint8_t *buf = malloc((size_t)size);
    ck_assert_ptr_nonnull(buf);
    fseek(f, 0, SEEK_SET);
    ck_assert_uint_eq(fread(buf, 1, (size_t)size, f), (size_t)size);
    long at = -1;
    for (long i = 80; i + (long)mlen <= size; i++)
        if (!memcmp(buf + i, marker, mlen))
            at = i;
    ck_assert_int_ge(at, 80);
    uint8_t *rec = buf + at - 80;
    rec[0] = version;
    rec[2] = flags;
    size_t body = 80 + mlen + largest_len;
    uint64_t sum = XXH3_64bits(rec, body);
    for (int b = 0; b < 8; b++) /* little-endian, as doc/manifest.md says */
        rec[body + (size_t)b] = (uint8_t)(sum >> (8 * b));
    fseek(f, at - 80, SEEK_SET);
    ck_assert_uint_eq(fwrite(rec, 1, body + 8, f), body + 8);
    fclose(f);
    free(buf);
}

START_TEST(version_1_records_are_read)
{
    static const char marker[] = "OLD-RECORD-MARKER-42";
    kv_manifest *m = open_or_fail(1);
    kv_table_meta t1 = table(12, 3, marker, sizeof marker - 1, "zzz", 3);
    ck_assert_int_eq(kv_manifest_apply(m, &fresh, NULL, 0, &t1, 1), KV_OK);
    kv_manifest_close(m);

    /* Version 1 (no flags): read, flags zero. */
    patch_record(marker, sizeof marker - 1, 3, 1, 0);
    m = open_or_fail(0);
    kv_manifest_state s;
    kv_table_meta *t;
    size_t n;
    ck_assert_int_eq(kv_manifest_load(m, &s, &t, &n), KV_OK);
    ck_assert_uint_eq(n, 1);
    assert_same(&t[0], &t1);
    kv_manifest_free_tables(t, n);
    kv_manifest_close(m);

    /* Version 1 with its reserved byte set, and version 2 with an unknown
     * flag: both rejected, though their checksums match. */
    patch_record(marker, sizeof marker - 1, 3, 1, KV_TABLE_SNAPSHOT_PINNED);
    m = open_or_fail(0);
    ck_assert_int_eq(kv_manifest_load(m, &s, &t, &n), KV_ECORRUPT);
    kv_manifest_close(m);
    patch_record(marker, sizeof marker - 1, 3, 2, 0x80);
    m = open_or_fail(0);
    ck_assert_int_eq(kv_manifest_load(m, &s, &t, &n), KV_ECORRUPT);
    kv_manifest_close(m);

    /* And version 2 with the flag: read with it. */
    patch_record(marker, sizeof marker - 1, 3, 2, KV_TABLE_SNAPSHOT_PINNED);
    m = open_or_fail(0);
    ck_assert_int_eq(kv_manifest_load(m, &s, &t, &n), KV_OK);
    ck_assert_uint_eq(t[0].flags, KV_TABLE_SNAPSHOT_PINNED);
    kv_manifest_free_tables(t, n);
    kv_manifest_close(m);
}
END_TEST

/* The record whose smallest key is `marker` (its `fixed` bytes precede the
 * key): *at its offset in the file; the file's bytes returned (freed by
 * the caller), *size their count. */
static uint8_t *find_record(const char *marker, size_t mlen, size_t fixed, long *at, long *size)
{
    FILE *f = fopen(manifest_path(), "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    *size = ftell(f);
    uint8_t *buf = malloc((size_t)*size);
    ck_assert_ptr_nonnull(buf);
    fseek(f, 0, SEEK_SET);
    ck_assert_uint_eq(fread(buf, 1, (size_t)*size, f), (size_t)*size);
    fclose(f);
    *at = -1;
    for (long i = (long)fixed; i + (long)mlen <= *size; i++)
        if (!memcmp(buf + i, marker, mlen))
            *at = i - (long)fixed;
    ck_assert_int_ge(*at, 0);
    return buf;
}

/* Writes the 8 bytes of x (little-endian) at `off` into the version-4
 * record of `marker` and makes its checksum match again. */
static void patch_v4(const char *marker, size_t mlen, size_t largest_len, size_t off, uint64_t x)
{
    long at, size;
    uint8_t *buf = find_record(marker, mlen, 104, &at, &size);
    uint8_t *rec = buf + at;
    for (int b = 0; b < 8; b++)
        rec[off + (size_t)b] = (uint8_t)(x >> (8 * b));
    size_t body = 104 + mlen + largest_len;
    uint64_t sum = XXH3_64bits(rec, body);
    for (int b = 0; b < 8; b++)
        rec[body + (size_t)b] = (uint8_t)(sum >> (8 * b));
    FILE *f = fopen(manifest_path(), "r+b");
    ck_assert_ptr_nonnull(f);
    fseek(f, at, SEEK_SET);
    ck_assert_uint_eq(fwrite(rec, 1, body + 8, f), body + 8);
    fclose(f);
    free(buf);
}

/* Sorted runs (lazy leveling): a table of run 0 keeps its version-2 or -3
 * record, one of another run takes version 4 (with or without a blob
 * range); all read back the same; a version-4 record that names run 0, a
 * run in level 0 or a reversed blob range is refused though its checksum
 * matches, and so is one with a flipped byte. */
START_TEST(run_records_round_trip)
{
    static const char m0[] = "RUN-ZERO-MARKER", m1[] = "RUN-ONE-MARKER", m2[] = "RUN-BLOB-MARKER";
    kv_manifest *m = open_or_fail(1);
    kv_table_meta add[3] = {table(5, 2, m0, sizeof m0 - 1, "zz", 2),
                            table(6, 2, m1, sizeof m1 - 1, "zz", 2),
                            table(7, 5, m2, sizeof m2 - 1, "zz", 2)};
    add[1].run = 6;
    add[2].run = 0x0102030405060708ull;
    add[2].blob_lo = 3;
    add[2].blob_hi = 4;
    add[2].flags = KV_TABLE_SNAPSHOT_PINNED;
    ck_assert_int_eq(kv_manifest_apply(m, &fresh, NULL, 0, add, 3), KV_OK);
    kv_manifest_close(m);

    long at, size;
    uint8_t *buf = find_record(m0, sizeof m0 - 1, 80, &at, &size);
    ck_assert_uint_eq(buf[at], 2); /* run 0: the bytes of before */
    free(buf);
    buf = find_record(m1, sizeof m1 - 1, 104, &at, &size);
    ck_assert_uint_eq(buf[at], 4);
    ck_assert_uint_eq(buf[at + 96], 6);
    free(buf);

    m = open_or_fail(0);
    kv_manifest_state s;
    kv_table_meta *t;
    size_t n;
    ck_assert_int_eq(kv_manifest_load(m, &s, &t, &n), KV_OK);
    ck_assert_uint_eq(n, 3);
    for (size_t i = 0; i < 3; i++)
        assert_same(&t[i], &add[i]);
    kv_manifest_free_tables(t, n);
    kv_manifest_close(m);

    /* Damaged, each with a matching checksum: refused, then put back. */
    static const struct {
        size_t off;
        uint64_t bad, good;
    } cases[] = {
        {96, 0, 6}, /* run 0 is never written as version 4 */
        {4, 0, 2},  /* a run in level 0 (the level's 4 bytes, and the number's low 4) */
        {80, 9, 0}, /* blob range 9..0: reversed */
        {88, 2, 0}, /* blob range 0..2: empty start */
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        uint64_t bad = cases[c].bad, good = cases[c].good;
        if (cases[c].off == 4) { /* level (4 bytes) then number's first 4: keep the number */
            bad = 0 | ((uint64_t)6 << 32);
            good = 2 | ((uint64_t)6 << 32);
        }
        patch_v4(m1, sizeof m1 - 1, 2, cases[c].off, bad);
        m = open_or_fail(0);
        ck_assert_msg(kv_manifest_load(m, &s, &t, &n) == KV_ECORRUPT, "case %zu read", c);
        kv_manifest_close(m);
        patch_v4(m1, sizeof m1 - 1, 2, cases[c].off, good);
        m = open_or_fail(0);
        ck_assert_int_eq(kv_manifest_load(m, &s, &t, &n), KV_OK);
        kv_manifest_free_tables(t, n);
        kv_manifest_close(m);
    }
    /* A flipped byte of the run: the checksum catches it. */
    buf = find_record(m1, sizeof m1 - 1, 104, &at, &size);
    FILE *f = fopen(manifest_path(), "r+b");
    ck_assert_ptr_nonnull(f);
    fseek(f, at + 97, SEEK_SET);
    fputc(buf[at + 97] ^ 0x10, f);
    fclose(f);
    free(buf);
    m = open_or_fail(0);
    ck_assert_int_eq(kv_manifest_load(m, &s, &t, &n), KV_ECORRUPT);
    kv_manifest_close(m);
}
END_TEST

START_TEST(foreign_file_is_rejected)
{
    FILE *f = fopen(manifest_path(), "wb");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 20000; i++)
        fputc((i * 131) & 0xff, f);
    fclose(f);
    kv_manifest *m;
    int rc = kv_manifest_open(test_dir, 0, NULL, &m);
    ck_assert_msg(rc == KV_ECORRUPT || rc == KV_EIO, "open of a foreign file: %d", rc);
    ck_assert_ptr_null(m);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("manifest");
    TCase *tc = tcase_create("manifest");
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, round_trip_across_reopen);
    tcase_add_test(tc, bad_changes_change_nothing);
    tcase_add_test(tc, blob_files_and_their_tables);
    tcase_add_test(tc, map_grows);
    tcase_add_test(tc, flipped_value_is_corrupt);
    tcase_add_test(tc, foreign_file_is_rejected);
    tcase_add_test(tc, version_1_records_are_read);
    tcase_add_test(tc, run_records_round_trip);
    suite_add_tcase(s, tc);
    return s;
}
