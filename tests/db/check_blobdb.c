/* check_blobdb.c - large values apart from their keys (doc/database.md,
 * "Blob files"), through kv.h: every read path returns them, garbage is
 * counted exactly and given back, snapshots and iterators keep what they
 * can see, damage is reported, and threads read while compactions move
 * values. */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <kv/kv.h>
#include <kv/sstable.h>

#include "fixture.h"

/* kv_destroy removes blob files too, and then the directory: the
 * fixture's teardown finds nothing left. */
static void teardown_destroy(void)
{
    ck_assert_int_eq(kv_destroy(test_dir), KV_OK);
    ck_assert_int_ne(access(test_dir, F_OK), 0);
    test_teardown();
}

/* Options for these tests: a small memtable, so that flushes and
 * compactions come soon, values of 512 bytes and up in blob files. */
static kv_options opts(size_t min_blob, double gc)
{
    kv_options o;
    kv_options_init(&o);
    o.write_buffer_size = 64 << 10;
    o.target_file_size = 64 << 10;
    o.max_bytes_for_level_base = 256 << 10;
    o.min_blob_size = min_blob;
    o.blob_gc_threshold = gc;
    o.compression = KV_COMPRESSION_NONE;
    return o;
}

/* The value of key i written in `round`, n bytes: its first bytes say who
 * wrote it, the rest follow from that (binary, with NUL bytes). */
static void value_of(uint8_t *v, size_t n, unsigned i, unsigned round)
{
    uint64_t x = splitmix(((uint64_t)i << 20) ^ round);
    for (size_t j = 0; j < n; j++) {
        if (j % 8 == 0)
            x = splitmix(x + j);
        v[j] = (uint8_t)(x >> (8 * (j % 8)));
    }
    if (n >= 8) {
        memcpy(v, &i, 4);
        memcpy(v + 4, &round, 4);
    }
}

/* 1 when v (n bytes) is exactly what value_of writes for key i in some
 * round; *round gets it. */
static int value_ok(const uint8_t *v, size_t n, unsigned i, unsigned *round)
{
    if (n < 8)
        return 1;
    unsigned wi, wr = 0;
    memcpy(&wi, v, 4);
    memcpy(&wr, v + 4, 4);
    if (wi != i)
        return 0;
    uint8_t *want = malloc(n);
    value_of(want, n, i, wr);
    int ok = memcmp(want, v, n) == 0;
    free(want);
    if (round)
        *round = wr;
    return ok;
}

/* Waits until the background thread has nothing left to do. */
static void settle(kv_db *db)
{
    for (int i = 0; i < 6000; i++) {
        kv_stats_t s;
        ck_assert_int_eq(kv_stats(db, &s), KV_OK);
        if (!s.compaction_pending && !s.compaction_running)
            return;
        struct timespec ms = {0, 10 * 1000 * 1000};
        nanosleep(&ms, NULL);
    }
    ck_abort_msg("compaction did not settle in 60 s");
}

static const size_t sizes[] = {0, 1, 100, 511, 512, 513, 4096, 65536, 1 << 20};
#define NSIZES (sizeof sizes / sizeof sizes[0])

static size_t size_of(unsigned i)
{
    return sizes[i % NSIZES];
}

/* Every read path gives key i's value of round `round`. */
static void check_key(kv_db *db, unsigned i, unsigned round)
{
    char k[32];
    size_t kl = key_of(k, sizeof k, "key", 8, i), n = size_of(i);
    uint8_t *want = malloc(n + 1);
    value_of(want, n, i, round);
    void *v;
    size_t vl;
    ck_assert_int_eq(kv_get(db, k, kl, &v, &vl), KV_OK);
    ck_assert_uint_eq(vl, n);
    ck_assert(n == 0 || memcmp(v, want, n) == 0);
    kv_free(v);
    /* Into the caller's buffer: exactly its size, then one byte short. */
    uint8_t *buf = malloc(n + 1);
    memset(buf, 0xEE, n + 1);
    ck_assert_int_eq(kv_get_into(db, NULL, k, kl, buf, n, &vl), KV_OK);
    ck_assert_uint_eq(vl, n);
    ck_assert(n == 0 || memcmp(buf, want, n) == 0);
    ck_assert_uint_eq(buf[n], 0xEE);
    if (n) {
        memset(buf, 0xEE, n + 1);
        ck_assert_int_eq(kv_get_into(db, NULL, k, kl, buf, n - 1, &vl), KV_ERANGE);
        ck_assert_uint_eq(vl, n);
        for (size_t j = 0; j <= n; j++) /* kv.h: a KV_ERANGE writes no byte */
            ck_assert_msg(buf[j] == 0xEE, "key %u (%zu bytes): byte %zu written", i, n, j);
        /* Shorter than a blob reference too (the table's entry cannot be
         * placed there either). */
        size_t small = n > 3 ? 3 : n - 1;
        ck_assert_int_eq(kv_get_into(db, NULL, k, kl, buf, small, &vl), KV_ERANGE);
        ck_assert_uint_eq(vl, n);
        for (size_t j = 0; j <= n; j++)
            ck_assert_msg(buf[j] == 0xEE, "key %u (cap %zu): byte %zu written", i, small, j);
        ck_assert_int_eq(kv_get_into(db, NULL, k, kl, NULL, 0, &vl), KV_ERANGE);
        ck_assert_uint_eq(vl, n);
    }
    free(buf);
    free(want);
}

START_TEST(values_round_trip)
{
    kv_options o = opts(512, 0.25);
    kv_db *db = open_db(test_dir, &o);
    const unsigned n = 90;
    char k[32];
    for (unsigned i = 0; i < n; i++) {
        size_t sz = size_of(i);
        uint8_t *v = malloc(sz + 1);
        value_of(v, sz, i, 1);
        ck_assert_int_eq(kv_put(db, k, key_of(k, sizeof k, "key", 8, i), v, sz), KV_OK);
        free(v);
    }
    ck_assert_int_eq(kv_flush(db), KV_OK);
    for (unsigned i = 0; i < n; i++)
        check_key(db, i, 1);
    kv_stats_t s;
    ck_assert_int_eq(kv_stats(db, &s), KV_OK);
    ck_assert_uint_gt(s.blob_files, 0);
    ck_assert_uint_gt(s.blob_reads, 0);
    ck_assert_uint_gt(s.blob_written_bytes, 0);
    ck_assert_uint_eq(s.blob_garbage_bytes, 0);

    /* kv_multi_get */
    const void *keys[NSIZES];
    size_t klens[NSIZES], vlens[NSIZES];
    void *vals[NSIZES];
    int st[NSIZES];
    char kb[NSIZES][32];
    for (unsigned i = 0; i < NSIZES; i++) {
        klens[i] = key_of(kb[i], sizeof kb[i], "key", 8, 9 + i);
        keys[i] = kb[i];
    }
    ck_assert_int_eq(kv_multi_get(db, NULL, NSIZES, keys, klens, vals, vlens, st), KV_OK);
    for (unsigned i = 0; i < NSIZES; i++) {
        ck_assert_int_eq(st[i], KV_OK);
        ck_assert_uint_eq(vlens[i], size_of(9 + i));
        ck_assert(value_ok(vals[i], vlens[i], 9 + i, NULL));
        kv_free(vals[i]);
    }

    /* Iterators, both ways: keys in order, every value whole. */
    kv_iter *it;
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    unsigned seen = 0;
    for (kv_iter_seek_first(it); kv_iter_valid(it); kv_iter_next(it), seen++) {
        size_t kl, vl;
        const char *ik = kv_iter_key(it, &kl);
        key_of(k, sizeof k, "key", 8, seen);
        ck_assert_uint_eq(kl, strlen(k));
        ck_assert(memcmp(ik, k, kl) == 0);
        const uint8_t *iv = kv_iter_value(it, &vl);
        ck_assert_ptr_nonnull(iv);
        ck_assert_uint_eq(vl, size_of(seen));
        ck_assert(value_ok(iv, vl, seen, NULL));
    }
    ck_assert_int_eq(kv_iter_status(it), KV_OK);
    ck_assert_uint_eq(seen, n);
    for (kv_iter_seek_last(it); kv_iter_valid(it); kv_iter_prev(it)) {
        size_t vl;
        const uint8_t *iv = kv_iter_value(it, &vl);
        ck_assert_uint_eq(vl, size_of(--seen));
        ck_assert(value_ok(iv, vl, seen, NULL));
    }
    ck_assert_int_eq(kv_iter_status(it), KV_OK);
    ck_assert_uint_eq(seen, 0);
    kv_iter_free(it);

    /* kv_explain_get shows the blob read: the record of a 4 KiB value. */
    kv_explain *x;
    size_t kl = key_of(k, sizeof k, "key", 8, 6);
    ck_assert_int_eq(kv_explain_get(db, k, kl, &x), KV_OK);
    ck_assert_int_eq(x->result, KV_OK);
    ck_assert_uint_eq(x->value_len, 4096);
    const kv_explain_step *last = &x->steps[x->nsteps - 1];
    ck_assert_int_eq(last->outcome, KV_EXPLAIN_FOUND);
    ck_assert_uint_ne(last->blob_number, 0);
    ck_assert_uint_eq(last->blob_bytes, kv_blob_record_size(kl, 4096));
    kv_free(x);
    /* ... and none for a small one. */
    kl = key_of(k, sizeof k, "key", 8, 2);
    ck_assert_int_eq(kv_explain_get(db, k, kl, &x), KV_OK);
    ck_assert_uint_eq(x->steps[x->nsteps - 1].blob_number, 0);
    kv_free(x);

    /* After reopening, and after a compaction moves the references. */
    ck_assert_int_eq(kv_close(db), KV_OK);
    db = open_db(test_dir, &o);
    for (unsigned i = 0; i < n; i++)
        check_key(db, i, 1);
    ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 0), KV_OK);
    settle(db);
    for (unsigned i = 0; i < n; i++)
        check_key(db, i, 1);
    ck_assert_int_eq(kv_close(db), KV_OK);
}
END_TEST

/* Live bytes of the blob files as the manifest counts them (records minus
 * garbage), from kv_inspect; also the files' total size and how many
 * are past `gc`. */
static uint64_t manifest_live(uint64_t *total, size_t *files, size_t *past, double gc)
{
    kv_dir_info *info;
    ck_assert_int_eq(kv_inspect(test_dir, &info), KV_OK);
    uint64_t live = 0;
    *total = 0;
    *files = info->nblobs;
    *past = 0;
    for (size_t i = 0; i < info->nblobs; i++) {
        const struct kv_dir_blob *b = &info->blobs[i];
        ck_assert(b->present);
        ck_assert_uint_eq(b->disk_size, b->file_size);
        ck_assert_uint_le(b->garbage_bytes, b->record_bytes);
        ck_assert_uint_lt(b->garbage_records, b->records); /* all garbage: gone */
        live += b->record_bytes - b->garbage_bytes;
        *total += b->file_size;
        *past += (double)b->garbage_bytes >= gc * (double)b->record_bytes;
    }
    kv_inspect_free(info);
    return live;
}

START_TEST(garbage_is_counted_and_given_back)
{
    kv_options o = opts(512, 0.25);
    kv_db *db = open_db(test_dir, &o);
    const unsigned n = 400;
    size_t vsize[400];
    char k[32];
    uint8_t v[3000];
    unsigned round[400] = {0};
    int present[400] = {0};
    for (unsigned r = 1; r <= 4; r++) {
        for (unsigned j = 0; j < n; j++) {
            unsigned i = (unsigned)(splitmix(r * 1000003u + j) % n);
            size_t kl = key_of(k, sizeof k, "key", 8, i);
            if (splitmix(j ^ (r << 16)) % 7 == 0) {
                ck_assert_int_eq(kv_delete(db, k, kl), KV_OK);
                present[i] = 0;
                continue;
            }
            size_t sz = 300 + (size_t)(splitmix(i + r) % 2500); /* some below 512 */
            value_of(v, sz, i, r);
            ck_assert_int_eq(kv_put(db, k, kl, v, sz), KV_OK);
            vsize[i] = sz;
            round[i] = r;
            present[i] = 1;
        }
    }
    ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 0), KV_OK);
    settle(db);
    /* Every key as last written. */
    uint64_t want_live = 0;
    for (unsigned i = 0; i < n; i++) {
        size_t kl = key_of(k, sizeof k, "key", 8, i);
        void *got;
        size_t gl;
        int rc = kv_get(db, k, kl, &got, &gl);
        if (!present[i]) {
            ck_assert_int_eq(rc, KV_NOTFOUND);
            continue;
        }
        ck_assert_int_eq(rc, KV_OK);
        unsigned wr;
        ck_assert_uint_eq(gl, vsize[i]);
        ck_assert(value_ok(got, gl, i, &wr));
        ck_assert_uint_eq(wr, round[i]);
        kv_free(got);
        if (vsize[i] >= 512)
            want_live += kv_blob_record_size(kl, vsize[i]);
    }
    kv_stats_t s;
    ck_assert_int_eq(kv_stats(db, &s), KV_OK);
    ck_assert_uint_gt(s.blob_relocated_bytes, 0); /* GC moved values */
    ck_assert_int_eq(kv_close(db), KV_OK);
    /* The manifest's count of live bytes is exactly what the keys hold,
     * and GC left no file past the threshold. */
    uint64_t total;
    size_t files, past;
    uint64_t live = manifest_live(&total, &files, &past, 0.25);
    ck_assert_uint_eq(live, want_live);
    ck_assert_uint_eq(past, 0);
    ck_assert_uint_le(total, want_live * 14 / 10 + 64 * files);
    /* The directory holds only the live files. */
    DIR *d = opendir(test_dir);
    struct dirent *de;
    size_t on_disk = 0;
    while ((de = readdir(d)) != NULL)
        on_disk += strstr(de->d_name, ".blob") != NULL;
    closedir(d);
    ck_assert_uint_eq(on_disk, files);
}
END_TEST

static int blob_exists(uint64_t number)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%06llu.blob", test_dir, (unsigned long long)number);
    return access(p, F_OK) == 0;
}

START_TEST(snapshots_and_iterators_keep_their_values)
{
    kv_options o = opts(512, 0.25);
    kv_db *db = open_db(test_dir, &o);
    uint8_t v1[2000], v2[2000];
    value_of(v1, sizeof v1, 7, 1);
    value_of(v2, sizeof v2, 7, 2);
    ck_assert_int_eq(kv_put(db, "key7", 4, v1, sizeof v1), KV_OK);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    kv_explain *x;
    ck_assert_int_eq(kv_explain_get(db, "key7", 4, &x), KV_OK);
    uint64_t file1 = x->steps[x->nsteps - 1].blob_number;
    kv_free(x);
    ck_assert_uint_ne(file1, 0);

    kv_snapshot *snap;
    ck_assert_int_eq(kv_snapshot_new(db, &snap), KV_OK);
    kv_iter *it;
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    kv_iter_seek(it, "key7", 4);
    ck_assert(kv_iter_valid(it));

    ck_assert_int_eq(kv_put(db, "key7", 4, v2, sizeof v2), KV_OK);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 0), KV_OK);
    settle(db);

    void *got;
    size_t gl;
    ck_assert_int_eq(kv_get_at(db, snap, "key7", 4, &got, &gl), KV_OK);
    ck_assert(gl == sizeof v1 && memcmp(got, v1, gl) == 0);
    kv_free(got);
    ck_assert_int_eq(kv_get(db, "key7", 4, &got, &gl), KV_OK);
    ck_assert(gl == sizeof v2 && memcmp(got, v2, gl) == 0);
    kv_free(got);
    size_t vl;
    const void *iv = kv_iter_value(it, &vl);
    ck_assert(iv && vl == sizeof v1 && memcmp(iv, v1, vl) == 0);
    ck_assert(blob_exists(file1));

    /* An iterator at the snapshot, whose value is not read yet. Then the
     * snapshot goes: the next compaction drops the old version, the old
     * file is all garbage, and it goes once the iterators' views are gone;
     * until then the iterator still reads the value from it. */
    kv_iter *at_snap;
    ck_assert_int_eq(kv_iter_new(db, snap, &at_snap), KV_OK);
    kv_iter_seek(at_snap, "key7", 4);
    ck_assert(kv_iter_valid(at_snap));
    kv_snapshot_release(db, snap);
    ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 0), KV_OK);
    settle(db);
    iv = kv_iter_value(at_snap, &vl);
    ck_assert(iv && vl == sizeof v1 && memcmp(iv, v1, vl) == 0);
    ck_assert_int_eq(kv_iter_status(at_snap), KV_OK);
    kv_iter_free(at_snap);
    kv_iter_free(it);
    ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 0), KV_OK);
    settle(db);
    ck_assert_int_eq(kv_close(db), KV_OK);
    ck_assert(!blob_exists(file1));
    db = open_db(test_dir, &o);
    ck_assert_int_eq(kv_get(db, "key7", 4, &got, &gl), KV_OK);
    ck_assert(gl == sizeof v2 && memcmp(got, v2, gl) == 0);
    kv_free(got);
    ck_assert_int_eq(kv_close(db), KV_OK);
}
END_TEST

/* The path of the first live blob file, from kv_inspect. */
static void first_blob(char *p, size_t cap, uint64_t *size)
{
    kv_dir_info *info;
    ck_assert_int_eq(kv_inspect(test_dir, &info), KV_OK);
    ck_assert_uint_gt(info->nblobs, 0);
    snprintf(p, cap, "%s/%06llu.blob", test_dir, (unsigned long long)info->blobs[0].number);
    *size = info->blobs[0].file_size;
    kv_inspect_free(info);
}

static void fill_and_close(unsigned n)
{
    kv_options o = opts(512, 0.25);
    kv_db *db = open_db(test_dir, &o);
    char k[32];
    uint8_t v[1500];
    for (unsigned i = 0; i < n; i++) {
        value_of(v, sizeof v, i, 1);
        ck_assert_int_eq(kv_put(db, k, key_of(k, sizeof k, "key", 8, i), v, sizeof v), KV_OK);
    }
    ck_assert_int_eq(kv_flush(db), KV_OK);
    ck_assert_int_eq(kv_close(db), KV_OK);
}

START_TEST(damage_is_reported)
{
    fill_and_close(30);
    char p[512];
    uint64_t size;
    first_blob(p, sizeof p, &size);
    /* A flipped byte inside a value: that Get fails, the others answer
     * with their own values, never a wrong one. */
    int fd = open(p, O_RDWR);
    ck_assert_int_ge(fd, 0);
    uint8_t b;
    off_t at = (off_t)(size / 2);
    ck_assert_int_eq(pread(fd, &b, 1, at), 1);
    b ^= 0x10;
    ck_assert_int_eq(pwrite(fd, &b, 1, at), 1);
    kv_options o = opts(512, 0.25);
    kv_db *db = open_db(test_dir, &o);
    unsigned bad = 0;
    char k[32];
    for (unsigned i = 0; i < 30; i++) {
        void *got;
        size_t gl;
        int rc = kv_get(db, k, key_of(k, sizeof k, "key", 8, i), &got, &gl);
        if (rc == KV_ECORRUPT) {
            bad++;
            ck_assert_ptr_nonnull(strstr(kv_error_text(), ".blob"));
            continue;
        }
        ck_assert_int_eq(rc, KV_OK);
        ck_assert(value_ok(got, gl, i, NULL));
        kv_free(got);
    }
    ck_assert_uint_eq(bad, 1);
    ck_assert_int_eq(kv_close(db), KV_OK);
    b ^= 0x10;
    ck_assert_int_eq(pwrite(fd, &b, 1, at), 1);
    /* A truncated file is refused at open. */
    ck_assert_int_eq(ftruncate(fd, (off_t)size - 1), 0);
    close(fd);
    ck_assert_int_eq(kv_open(test_dir, &o, &db), KV_ECORRUPT);
    /* So is a missing one. */
    ck_assert_int_eq(unlink(p), 0);
    ck_assert_int_eq(kv_open(test_dir, &o, &db), KV_ECORRUPT);
    /* And a name that is a symbolic link to itself (ELOOP): damage in the
     * directory, not a failing device (kv.h), said with the file's name. */
    ck_assert_int_eq(symlink(p, p), 0);
    ck_assert_int_eq(kv_open(test_dir, &o, &db), KV_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(kv_error_text(), ".blob"));
    ck_assert_ptr_nonnull(strstr(kv_error_text(), "symbolic link"));
    ck_assert_int_eq(unlink(p), 0);
}
END_TEST

START_TEST(orphans_go_and_old_values_move_out)
{
    /* Values written with blob files off stay in the tables... */
    kv_options o = opts(KV_BLOB_NEVER, 0.25);
    o.idle_compaction_ms = 0; /* the table stays in level 0, for kv_compact_range below */
    kv_db *db = open_db(test_dir, &o);
    char k[32];
    uint8_t v[2000];
    for (unsigned i = 0; i < 100; i++) {
        value_of(v, sizeof v, i, 1);
        ck_assert_int_eq(kv_put(db, k, key_of(k, sizeof k, "key", 8, i), v, sizeof v), KV_OK);
    }
    ck_assert_int_eq(kv_flush(db), KV_OK);
    kv_stats_t s;
    ck_assert_int_eq(kv_stats(db, &s), KV_OK);
    ck_assert_uint_eq(s.blob_files, 0);
    ck_assert_int_eq(kv_close(db), KV_OK);
    /* ... a blob file the manifest does not name goes at open ... */
    char p[512];
    snprintf(p, sizeof p, "%s/000003.blob", test_dir);
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs("left by a crash", f);
    fclose(f);
    o = opts(512, 0.25);
    db = open_db(test_dir, &o);
    ck_assert(access(p, F_OK) != 0);
    /* ... and a compaction moves the large values out once they are on. */
    ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 0), KV_OK);
    settle(db);
    ck_assert_int_eq(kv_stats(db, &s), KV_OK);
    ck_assert_uint_gt(s.blob_files, 0);
    for (unsigned i = 0; i < 100; i++) {
        void *got;
        size_t gl;
        ck_assert_int_eq(kv_get(db, k, key_of(k, sizeof k, "key", 8, i), &got, &gl), KV_OK);
        ck_assert(gl == sizeof v && value_ok(got, gl, i, NULL));
        kv_free(got);
    }
    ck_assert_int_eq(kv_close(db), KV_OK);
}
END_TEST

START_TEST(options_version_7)
{
    kv_options o;
    kv_options_init(&o);
    ck_assert_uint_ge(o.version, 7);
    ck_assert_uint_eq(o.min_blob_size, 512);
    ck_assert_uint_eq(o.blob_file_size, 256u << 20);
    ck_assert(o.blob_gc_threshold == 0.25);
    kv_db *db;
    o.blob_gc_threshold = 0;
    ck_assert_int_eq(kv_open(test_dir, &o, &db), KV_EINVAL);
    o.blob_gc_threshold = 1.5;
    ck_assert_int_eq(kv_open(test_dir, &o, &db), KV_EINVAL);
    o.blob_gc_threshold = 1;
    o.blob_file_size = 1000;
    ck_assert_int_eq(kv_open(test_dir, &o, &db), KV_EINVAL);
    /* A version-6 caller's struct ends before min_blob_size: defaults. */
    kv_options_init(&o);
    o.version = 6;
    o.min_blob_size = 7; /* past the v6 struct: not read */
    ck_assert_int_eq(kv_open(test_dir, &o, &db), KV_OK);
    uint8_t v[600];
    value_of(v, sizeof v, 1, 1);
    ck_assert_int_eq(kv_put(db, "k", 1, v, sizeof v), KV_OK);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    kv_stats_t s;
    ck_assert_int_eq(kv_stats(db, &s), KV_OK);
    ck_assert_uint_eq(s.blob_files, 1); /* 600 >= the default 512 */
    ck_assert_int_eq(kv_close(db), KV_OK);
}
END_TEST

static long fd_count(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    long n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n - 3; /* ".", ".." and the DIR's own */
}

/* kv.h, max_open_files: blob files share the budget of open files (an
 * eighth of it), opened again when read. Forty blob files, read in an
 * order that jumps between them, under a budget of 16. */
START_TEST(descriptors_stay_within_budget)
{
    long base = fd_count();
    if (base < 0)
        return; /* no /proc: nothing to count */
    kv_options o = opts(512, 0.25);
    o.max_open_files = 16;
    kv_db *db = open_db(test_dir, &o);
    char k[32];
    uint8_t v[1000];
    const unsigned per = 5, files = 40;
    long most = 0;
    for (unsigned f = 0; f < files; f++) {
        for (unsigned j = 0; j < per; j++) {
            unsigned i = f * per + j;
            value_of(v, sizeof v, i, 1);
            ck_assert_int_eq(kv_put(db, k, key_of(k, sizeof k, "key", 8, i), v, sizeof v), KV_OK);
        }
        ck_assert_int_eq(kv_flush(db), KV_OK);
    }
    settle(db);
    kv_stats_t s;
    ck_assert_int_eq(kv_stats(db, &s), KV_OK);
    ck_assert_uint_ge(s.blob_files, files);
    for (unsigned round = 0; round < 3; round++)
        for (unsigned j = 0; j < files * per; j++) {
            unsigned i = (unsigned)((j * 2654435761u + round) % (files * per));
            void *got;
            size_t gl;
            ck_assert_int_eq(kv_get(db, k, key_of(k, sizeof k, "key", 8, i), &got, &gl), KV_OK);
            ck_assert(gl == sizeof v && value_ok(got, gl, i, NULL));
            kv_free(got);
            long n = fd_count() - base;
            if (n > most)
                most = n;
        }
    int jobs = o.max_background_jobs; /* 2 descriptors a job past 2 (database.md) */
    ck_assert_int_le(most, 16 + KV_EXTRA_FILES + 2 * (jobs > 2 ? jobs - 2 : 0));
    ck_assert_int_eq(kv_close(db), KV_OK);
    ck_assert_int_eq(fd_count(), base);
}
END_TEST

/* ---- threads -------------------------------------------------------------------------- */

#define T_KEYS 200
#define T_ROUNDS 12

struct shared {
    kv_db *db;
    _Atomic unsigned written[T_KEYS]; /* the round last acknowledged per key */
    _Atomic int stop;
    _Atomic unsigned long reads;
};

static size_t t_size(unsigned i, unsigned round)
{
    return 400 + (size_t)(splitmix(i * 31u + round) % 3000);
}

static void *writer(void *arg)
{
    struct shared *sh = arg;
    char k[32];
    uint8_t v[3400];
    for (unsigned r = 1; r <= T_ROUNDS; r++)
        for (unsigned j = 0; j < T_KEYS; j++) {
            unsigned i = (unsigned)(splitmix(r * 7919u + j) % T_KEYS);
            size_t sz = t_size(i, r);
            value_of(v, sz, i, r);
            ck_assert_int_eq(kv_put(sh->db, k, key_of(k, sizeof k, "key", 8, i), v, sz), KV_OK);
            atomic_store(&sh->written[i], r);
            if (j % 100 == 99) /* large values fill a memtable slowly (mem_fill) */
                ck_assert_int_eq(kv_flush(sh->db), KV_OK);
        }
    atomic_store(&sh->stop, 1);
    return NULL;
}

/* Reads keys at random through kv_get, kv_get_into and an iterator: each
 * value whole, and never older than the last write acknowledged before
 * the read began. */
static void *reader(void *arg)
{
    struct shared *sh = arg;
    char k[32];
    uint8_t *buf = malloc(4096);
    uint64_t x = (uint64_t)(uintptr_t)arg;
    while (!atomic_load(&sh->stop)) {
        x = splitmix(x);
        unsigned i = (unsigned)(x % T_KEYS);
        size_t kl = key_of(k, sizeof k, "key", 8, i);
        unsigned floor = atomic_load(&sh->written[i]), wr = 0;
        size_t vl;
        int rc = kv_get_into(sh->db, NULL, k, kl, buf, 4096, &vl);
        if (floor == 0 && rc == KV_NOTFOUND)
            continue;
        ck_assert_int_eq(rc, KV_OK);
        ck_assert(value_ok(buf, vl, i, &wr));
        ck_assert_uint_ge(wr, floor);
        ck_assert_uint_eq(vl, t_size(i, wr));
        if (x % 16 == 0) {
            kv_iter *it;
            ck_assert_int_eq(kv_iter_new(sh->db, NULL, &it), KV_OK);
            unsigned n = 0;
            for (kv_iter_seek(it, k, kl); kv_iter_valid(it) && n < 20; kv_iter_next(it), n++) {
                size_t ikl;
                const char *ik = kv_iter_key(it, &ikl);
                char kz[32];
                ck_assert_uint_lt(ikl, sizeof kz);
                memcpy(kz, ik, ikl);
                kz[ikl] = 0;
                unsigned ii = (unsigned)strtoul(kz + 3, NULL, 10);
                const uint8_t *iv = kv_iter_value(it, &vl);
                ck_assert_ptr_nonnull(iv);
                ck_assert(value_ok(iv, vl, ii, &wr));
            }
            ck_assert_int_eq(kv_iter_status(it), KV_OK);
            kv_iter_free(it);
        }
        atomic_fetch_add(&sh->reads, 1);
    }
    free(buf);
    return NULL;
}

START_TEST(threads_read_while_values_move)
{
    kv_options o = opts(512, 0.1);
    struct shared *sh = calloc(1, sizeof *sh);
    sh->db = open_db(test_dir, &o);
    pthread_t w, r[2];
    ck_assert_int_eq(pthread_create(&w, NULL, writer, sh), 0);
    for (int j = 0; j < 2; j++)
        ck_assert_int_eq(pthread_create(&r[j], NULL, reader, sh), 0);
    pthread_join(w, NULL);
    for (int j = 0; j < 2; j++)
        pthread_join(r[j], NULL);
    ck_assert_uint_gt(atomic_load(&sh->reads), 0);
    settle(sh->db);
    kv_stats_t s;
    ck_assert_int_eq(kv_stats(sh->db, &s), KV_OK);
    ck_assert_uint_gt(s.blob_relocated_bytes, 0);
    ck_assert_uint_gt(s.blob_garbage_bytes + s.blob_relocated_bytes, 0);
    ck_assert_int_eq(kv_close(sh->db), KV_OK);
    free(sh);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("blobdb");
    TCase *tc = tcase_create("paths");
    tcase_add_checked_fixture(tc, test_setup, teardown_destroy);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, values_round_trip);
    tcase_add_test(tc, garbage_is_counted_and_given_back);
    tcase_add_test(tc, snapshots_and_iterators_keep_their_values);
    tcase_add_test(tc, damage_is_reported);
    tcase_add_test(tc, orphans_go_and_old_values_move_out);
    tcase_add_test(tc, options_version_7);
    tcase_add_test(tc, descriptors_stay_within_budget);
    suite_add_tcase(s, tc);
    tc = tcase_create("threads");
    tcase_add_checked_fixture(tc, test_setup, teardown_destroy);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, threads_read_while_values_move);
    suite_add_tcase(s, tc);
    return s;
}
