/* check_badinput.c - bad input at every public entry point (kv.h, status.h,
 * sstable.h, bloom.h): NULL handles, NULL buffers with nonzero lengths, keys
 * of KV_MAX_KEY_SIZE + 1 bytes, values of KV_MAX_VALUE_SIZE + 1, a batch
 * past KV_MAX_BATCH_SIZE, each kv_options field out of its range and a
 * struct never initialised, NULL iterators, snapshots and out-pointers.
 * Each call must return what its comment promises (KV_EINVAL for a bad
 * argument; a no-op where the comment says so; "now" for a NULL snapshot;
 * *out NULL where promised), nothing may crash, and a database populated
 * before the bad calls must hold exactly the same pairs afterwards -- in
 * the open handle and after a reopen -- with no write, get or sequence
 * number counted for a rejected call. Use after close is not tested: a
 * freed handle cannot be told from a live one in C.
 *
 * Careless callers (TCase "careless"): kv_close while an iterator or a
 * snapshot lives is refused (KV_EBUSY) and leaves a working handle; every
 * error a call returns comes with a text on the caller's thread naming
 * this database's file and the reason, also an error met by the flush
 * thread, never an older call's text; kv_open on a LOCK that is a
 * directory or in a directory that may not be written names the file;
 * permission denied is KV_EPERM (as root, where permissions do not bite,
 * through an injected EACCES or EROFS).
 *
 * Files that are not what their names say (TCase "files"): a FIFO, device or
 * directory in place of a table, log, MANIFEST, MANIFEST-lock or LOCK is
 * refused at once (alarm() fails a test that hangs); a symbolic link as
 * the manifest's files or LOCK is refused and nothing is created where it
 * points; stray names with numbers kv does not give are left alone and
 * the store keeps working. */
#define _XOPEN_SOURCE 700
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <kv/bloom.h>
#include <kv/kv.h>
#include <kv/sstable.h>

#include "../sstable/internal.h" /* kv_sst_writer_add_hashed */
#include "testing.h" /* kv_testing: injected I/O faults */
#include "fixture.h"

/* ---- fixture: one temporary directory per test --------------------------------- */

/* A pointer that is not NULL and not a handle: out-parameters are preset to
 * it, so that a call promising "*out is NULL on error" is caught if it
 * leaves the old value. */
static char sentinel_byte;
#define SENTINEL ((void *)&sentinel_byte)

/* ---- a growing byte buffer -------------------------------------------------------- */

struct buf {
    uint8_t *p;
    size_t len, cap;
};

static void buf_add(struct buf *b, const void *p, size_t n)
{
    if (b->len + n > b->cap) {
        size_t nc = b->cap ? b->cap : 4096;
        while (nc < b->len + n)
            nc *= 2;
        b->p = realloc(b->p, nc);
        ck_assert_ptr_nonnull(b->p);
        b->cap = nc;
    }
    if (n)
        memcpy(b->p + b->len, p, n);
    b->len += n;
}

static void buf_add_u64(struct buf *b, uint64_t v)
{
    buf_add(b, &v, sizeof v);
}

/* ---- the database every test starts from ------------------------------------------ */

#define POP_KEYS 1500

static size_t pop_key(int i, char *k)
{
    return (size_t)sprintf(k, "pop%05d", i);
}

static size_t pop_value(int i, int ver, uint8_t *v)
{
    uint64_t x = splitmix(((uint64_t)i << 8) ^ (uint64_t)ver);
    size_t n = 8 + (size_t)(x % 120);
    for (size_t j = 0; j < n; j++) {
        x = splitmix(x);
        v[j] = (uint8_t)x;
    }
    return n;
}

/* Keys in two flushed tables and in the memtable, overwrites and deletes:
 * every place a read can be answered from. */
static kv_db *populate(const char *p)
{
    kv_db *db = open_db(p, NULL);
    char k[32];
    uint8_t v[256];
    for (int i = 0; i < POP_KEYS; i++)
        ck_assert_int_eq(kv_put(db, k, pop_key(i, k), v, pop_value(i, 1, v)), KV_OK);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    for (int i = 0; i < POP_KEYS; i += 3)
        ck_assert_int_eq(kv_put(db, k, pop_key(i, k), v, pop_value(i, 2, v)), KV_OK);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    for (int i = 1; i < POP_KEYS; i += 5)
        ck_assert_int_eq(kv_delete(db, k, pop_key(i, k)), KV_OK);
    for (int i = 2; i < POP_KEYS; i += 7)
        ck_assert_int_eq(kv_put(db, k, pop_key(i, k), v, pop_value(i, 3, v)), KV_OK);
    ck_assert_int_eq(kv_put(db, NULL, 0, "the empty key", 13), KV_OK);
    return db;
}

/* Every pair, in order, as one byte string (lengths included). */
static void scan_all(kv_db *db, struct buf *out, size_t at_least)
{
    memset(out, 0, sizeof *out);
    kv_iter *it = NULL;
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    size_t n = 0;
    for (kv_iter_seek_first(it); kv_iter_valid(it); kv_iter_next(it)) {
        size_t kl, vl;
        const void *k = kv_iter_key(it, &kl), *v = kv_iter_value(it, &vl);
        buf_add_u64(out, kl);
        buf_add(out, k, kl);
        buf_add_u64(out, vl);
        buf_add(out, v, vl);
        n++;
    }
    ck_assert_int_eq(kv_iter_status(it), KV_OK);
    kv_iter_free(it);
    ck_assert_uint_ge(n, at_least);
}

static void expect_same_scan(kv_db *db, const struct buf *before)
{
    struct buf now;
    scan_all(db, &now, 0);
    ck_assert_msg(now.len == before->len && memcmp(now.p, before->p, now.len) == 0,
                  "the database's contents changed (%zu bytes of scan, %zu before)", now.len,
                  before->len);
    free(now.p);
}

/* The counters a rejected call must not move. */
struct marks {
    uint64_t gets, puts, deletes, writes, last_sequence, wal_bytes, flushes, compactions, tables;
};

static void get_marks(kv_db *db, struct marks *m)
{
    struct kv_stats s;
    ck_assert_int_eq(kv_stats(db, &s), KV_OK);
    m->gets = s.gets;
    m->puts = s.puts;
    m->deletes = s.deletes;
    m->writes = s.writes;
    m->last_sequence = s.last_sequence;
    m->wal_bytes = s.wal_bytes;
    m->flushes = s.flushes;
    m->compactions = s.compactions;
    m->tables = s.tables;
}

static void expect_same_marks(kv_db *db, const struct marks *a)
{
    struct marks b;
    get_marks(db, &b);
    ck_assert_uint_eq(a->gets, b.gets);
    ck_assert_uint_eq(a->puts, b.puts);
    ck_assert_uint_eq(a->deletes, b.deletes);
    ck_assert_uint_eq(a->writes, b.writes);
    ck_assert_uint_eq(a->last_sequence, b.last_sequence);
    ck_assert_uint_eq(a->wal_bytes, b.wal_bytes);
    ck_assert_uint_eq(a->flushes, b.flushes);
    ck_assert_uint_eq(a->compactions, b.compactions);
    ck_assert_uint_eq(a->tables, b.tables);
}

/* After the bad calls: the same pairs and counters in the handle, a
 * working handle (a good write goes through and the close reports no
 * error), and the same pairs after a reopen. */
static void finish(kv_db *db, const char *p, const struct buf *before, const struct marks *m)
{
    expect_same_scan(db, before);
    expect_same_marks(db, m);
    ck_assert_int_eq(kv_put(db, "~after", 6, "good", 4), KV_OK);
    ck_assert_int_eq(kv_delete(db, "~after", 6), KV_OK);
    close_db(db);
    db = open_db(p, NULL);
    expect_same_scan(db, before);
    close_db(db);
}

/* "name size\n" for every entry of a directory, sorted: what a refused open
 * must leave exactly as it was. */
static char *dir_listing(const char *p)
{
    DIR *d = opendir(p);
    ck_assert_ptr_nonnull(d);
    char *names[256];
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        ck_assert_uint_lt(n, 256);
        char f[1200];
        snprintf(f, sizeof f, "%s/%s", p, e->d_name);
        struct stat st;
        ck_assert_int_eq(stat(f, &st), 0);
        char line[600];
        snprintf(line, sizeof line, "%s %lld\n", e->d_name, (long long)st.st_size);
        names[n] = strdup(line);
        ck_assert_ptr_nonnull(names[n]);
        n++;
    }
    closedir(d);
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            char *t = names[j];
            names[j] = names[j - 1];
            names[j - 1] = t;
        }
    struct buf b = {0};
    for (size_t i = 0; i < n; i++) {
        buf_add(&b, names[i], strlen(names[i]));
        free(names[i]);
    }
    buf_add(&b, "", 1);
    return (char *)b.p;
}

static int exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* ---- kv_open: arguments and options -------------------------------------------- */

/* One kv_options field set out of its range (kv.h gives the ranges of
 * write_buffer_size, block_size, bloom_bits_per_key, filter_layout,
 * compression and max_open_files; compression_level is a zstd level; the
 * level-0 triggers are counts in increasing order, and a compaction's file
 * and level sizes must be positive). create_if_missing, error_if_exists,
 * sync and block_cache_size have no invalid value; memtable_filter and
 * use_direct_reads are 0 or 1, filter_policy one of the KV_FILTER_ values. */
struct bad_option {
    const char *what;
    void (*set)(kv_options *o);
};

static void bo_version_zero(kv_options *o) { o->version = 0; }
static void bo_version_next(kv_options *o) { o->version = KV_OPTIONS_VERSION + 1; }
static void bo_wbs_zero(kv_options *o) { o->write_buffer_size = 0; }
static void bo_wbs_below(kv_options *o) { o->write_buffer_size = ((size_t)64 << 10) - 1; }
static void bo_block_below(kv_options *o) { o->block_size = 63; }
static void bo_block_zero(kv_options *o) { o->block_size = 0; }
static void bo_block_above(kv_options *o) { o->block_size = ((size_t)64 << 20) + 1; }
static void bo_bloom_negative(kv_options *o) { o->bloom_bits_per_key = -1; }
static void bo_bloom_tiny_negative(kv_options *o) { o->bloom_bits_per_key = -1e-9; }
static void bo_bloom_above(kv_options *o) { o->bloom_bits_per_key = 1000.5; }
static void bo_bloom_nan(kv_options *o) { o->bloom_bits_per_key = NAN; }
static void bo_bloom_inf(kv_options *o) { o->bloom_bits_per_key = INFINITY; }
static void bo_layout_2(kv_options *o) { o->filter_layout = 2; }
static void bo_layout_neg(kv_options *o) { o->filter_layout = -1; }
static void bo_compression_2(kv_options *o) { o->compression = 2; }
static void bo_compression_neg(kv_options *o) { o->compression = -1; }
static void bo_level_23(kv_options *o) { o->compression_level = 23; }
static void bo_level_min(kv_options *o) { o->compression_level = INT_MIN; }
static void bo_files_15(kv_options *o) { o->max_open_files = 15; }
static void bo_files_neg(kv_options *o) { o->max_open_files = -1; }
static void bo_l0c_zero(kv_options *o) { o->l0_compaction_trigger = 0; }
static void bo_l0c_neg(kv_options *o) { o->l0_compaction_trigger = -4; }
static void bo_l0s_below(kv_options *o) { o->l0_slowdown_trigger = o->l0_compaction_trigger - 1; }
static void bo_l0stop_below(kv_options *o) { o->l0_stop_trigger = o->l0_slowdown_trigger - 1; }
static void bo_target_zero(kv_options *o) { o->target_file_size = 0; }
static void bo_base_zero(kv_options *o) { o->max_bytes_for_level_base = 0; }
static void bo_memfilter_2(kv_options *o) { o->memtable_filter = 2; }
static void bo_memfilter_neg(kv_options *o) { o->memtable_filter = -1; }
static void bo_policy_2(kv_options *o) { o->filter_policy = 2; }
static void bo_policy_neg(kv_options *o) { o->filter_policy = -1; }
static void bo_direct_2(kv_options *o) { o->use_direct_reads = 2; }
static void bo_direct_neg(kv_options *o) { o->use_direct_reads = -1; }

static const struct bad_option bad_options[] = {
    {"version 0", bo_version_zero},
    {"version KV_OPTIONS_VERSION + 1", bo_version_next},
    {"write_buffer_size 0", bo_wbs_zero},
    {"write_buffer_size 64 KiB - 1", bo_wbs_below},
    {"block_size 63", bo_block_below},
    {"block_size 0", bo_block_zero},
    {"block_size 64 MiB + 1", bo_block_above},
    {"bloom_bits_per_key -1", bo_bloom_negative},
    {"bloom_bits_per_key -1e-9", bo_bloom_tiny_negative},
    {"bloom_bits_per_key 1000.5", bo_bloom_above},
    {"bloom_bits_per_key NaN", bo_bloom_nan},
    {"bloom_bits_per_key inf", bo_bloom_inf},
    {"filter_layout 2", bo_layout_2},
    {"filter_layout -1", bo_layout_neg},
    {"compression 2", bo_compression_2},
    {"compression -1", bo_compression_neg},
    {"compression_level 23 (zstd)", bo_level_23},
    {"compression_level INT_MIN (zstd)", bo_level_min},
    {"max_open_files 15", bo_files_15},
    {"max_open_files -1", bo_files_neg},
    {"l0_compaction_trigger 0", bo_l0c_zero},
    {"l0_compaction_trigger -4", bo_l0c_neg},
    {"l0_slowdown_trigger below l0_compaction_trigger", bo_l0s_below},
    {"l0_stop_trigger below l0_slowdown_trigger", bo_l0stop_below},
    {"target_file_size 0", bo_target_zero},
    {"max_bytes_for_level_base 0", bo_base_zero},
    {"memtable_filter 2", bo_memfilter_2},
    {"memtable_filter -1", bo_memfilter_neg},
    {"filter_policy 2", bo_policy_2},
    {"filter_policy -1", bo_policy_neg},
    {"use_direct_reads 2", bo_direct_2},
    {"use_direct_reads -1", bo_direct_neg},
};

/* kv_open must refuse with KV_EINVAL, leave *out NULL, touch nothing in the
 * directory and leave it unlocked. */
static void expect_open_einval(const char *p, const kv_options *o, const char *what)
{
    int named = p && *p;
    char *before = named && exists(p) ? dir_listing(p) : NULL;
    kv_db *db = SENTINEL;
    int rc = kv_open(p, o, &db);
    ck_assert_msg(rc == KV_EINVAL, "kv_open with %s: %s, not KV_EINVAL", what, kv_strerror(rc));
    ck_assert_msg(db == NULL, "kv_open with %s left *out set", what);
    if (before) {
        char *after = dir_listing(p);
        ck_assert_msg(strcmp(before, after) == 0, "kv_open with %s changed the directory:\n%s\n%s",
                      what, before, after);
        free(after);
    } else if (named)
        ck_assert_msg(!exists(p), "kv_open with %s created %s", what, p);
    free(before);
}

START_TEST(open_rejects_bad_arguments)
{
    char p[600], file[600];
    test_path(p, sizeof p, "db");
    test_path(file, sizeof file, "a-file");
    kv_db *db = populate(p);
    struct buf before;
    close_db(db);
    db = open_db(p, NULL);
    scan_all(db, &before, POP_KEYS / 2);
    close_db(db);

    /* Missing arguments. */
    expect_open_einval(NULL, NULL, "a NULL path");
    expect_open_einval("", NULL, "an empty path");
    ck_assert_int_eq(kv_open(p, NULL, NULL), KV_EINVAL);
    ck_assert_int_eq(kv_open(NULL, NULL, NULL), KV_EINVAL);
    /* A path that is a file, not a directory: refused, and the file is left. */
    FILE *f = fopen(file, "w");
    ck_assert_ptr_nonnull(f);
    fputs("not a database", f);
    fclose(f);
    db = SENTINEL;
    ck_assert_int_ne(kv_open(file, NULL, &db), KV_OK);
    ck_assert_ptr_null(db);
    struct stat st;
    ck_assert_int_eq(stat(file, &st), 0);
    ck_assert(S_ISREG(st.st_mode) && st.st_size == 14);

    /* error_if_exists on an existing database: KV_EINVAL (kv.h). */
    kv_options o;
    kv_options_init(&o);
    o.error_if_exists = 1;
    expect_open_einval(p, &o, "error_if_exists on an existing database");

    /* The database opens with defaults after all that, unchanged. */
    db = open_db(p, NULL);
    struct marks m;
    get_marks(db, &m);
    finish(db, p, &before, &m);
    free(before.p);
}
END_TEST

START_TEST(open_rejects_each_bad_option)
{
    char p[600], missing[600];
    test_path(p, sizeof p, "db");
    test_path(missing, sizeof missing, "missing");
    kv_db *db = populate(p);
    close_db(db);
    db = open_db(p, NULL);
    struct buf before;
    scan_all(db, &before, POP_KEYS / 2);
    close_db(db);

    kv_options o;
    /* Never initialised: all zeros, and all 0xA5 (stack garbage). */
    memset(&o, 0, sizeof o);
    expect_open_einval(p, &o, "a zeroed kv_options");
    expect_open_einval(missing, &o, "a zeroed kv_options");
    memset(&o, 0xA5, sizeof o);
    expect_open_einval(p, &o, "a kv_options full of 0xA5");

    size_t n = sizeof bad_options / sizeof bad_options[0];
    for (size_t i = 0; i < n; i++) {
        kv_options_init(&o);
        bad_options[i].set(&o);
        expect_open_einval(p, &o, bad_options[i].what);
        /* Checked before anything touches the disk: no directory made. */
        expect_open_einval(missing, &o, bad_options[i].what);
    }

    /* The documented bounds themselves are accepted (inclusive ranges). */
    static const struct {
        const char *what;
        size_t wbs, block;
        double bloom;
        int files;
    } edges[] = {
        {"write_buffer_size 64 KiB, block_size 64", (size_t)64 << 10, 64, 10, 1000},
        {"block_size 64 MiB, bloom 0", (size_t)4 << 20, (size_t)64 << 20, 0, 1000},
        {"bloom 1000, max_open_files 16", (size_t)4 << 20, 4096, 1000, 16},
    };
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        kv_options_init(&o);
        o.write_buffer_size = edges[i].wbs;
        o.block_size = edges[i].block;
        o.bloom_bits_per_key = edges[i].bloom;
        o.max_open_files = edges[i].files;
        db = NULL;
        int rc = kv_open(p, &o, &db);
        ck_assert_msg(rc == KV_OK, "kv_open with %s: %s", edges[i].what, kv_strerror(rc));
        expect_same_scan(db, &before);
        close_db(db);
    }

    db = open_db(p, NULL);
    struct marks m;
    get_marks(db, &m);
    finish(db, p, &before, &m);
    free(before.p);
}
END_TEST

/* kv.h: max_open_files is "a budget of open table files ..., not a limit
 * on tables": 17 tables open, read and scan with a budget of 16. */
START_TEST(open_takes_more_tables_than_max_open_files)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_options o;
    kv_options_init(&o);
    o.l0_compaction_trigger = o.l0_slowdown_trigger = o.l0_stop_trigger = 100;
    o.idle_compaction_ms = 0; /* an idle merge would compact the 17 tables (and read them all) */
    kv_db *db = open_db(p, &o);
    char k[32];
    uint8_t v[256];
    for (int t = 0; t < 17; t++) { /* 17 level-0 tables, nothing compacted */
        for (int i = t; i < 200; i += 17)
            ck_assert_int_eq(kv_put(db, k, pop_key(i, k), v, pop_value(i, t, v)), KV_OK);
        ck_assert_int_eq(kv_flush(db), KV_OK);
    }
    struct kv_stats s;
    ck_assert_int_eq(kv_stats(db, &s), KV_OK);
    ck_assert_uint_eq(s.tables, 17);
    struct buf before;
    scan_all(db, &before, 200);
    close_db(db);

    o.max_open_files = 16;
    db = open_db(p, &o);
    ck_assert_int_eq(kv_stats(db, &s), KV_OK);
    ck_assert_uint_eq(s.tables, 17);
    ck_assert_uint_le(s.table_files_open, 16);
    ck_assert_uint_ge(s.table_file_evictions, 1);
    for (int i = 0; i < 200; i++) { /* every table is read, the one closed at open too */
        void *val;
        size_t vl;
        ck_assert_int_eq(kv_get(db, k, pop_key(i, k), &val, &vl), KV_OK);
        ck_assert_uint_eq(vl, pop_value(i, i % 17, v));
        ck_assert_mem_eq(val, v, vl);
        kv_free(val);
    }
    ck_assert_int_eq(kv_stats(db, &s), KV_OK);
    ck_assert_uint_le(s.table_files_open, 16);
    ck_assert_uint_ge(s.table_file_reopens, 1);
    /* The scan reads the 17 level-0 tables at once: one over the budget,
     * while it runs (kv.h). */
    expect_same_scan(db, &before);
    close_db(db);
    free(before.p);
}
END_TEST

/* ---- writes ------------------------------------------------------------------------- */

START_TEST(writes_reject_bad_arguments)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_db *db = populate(p);
    struct buf before;
    scan_all(db, &before, POP_KEYS / 2);
    struct marks m;
    get_marks(db, &m);

    uint8_t *bigk = calloc(1, KV_MAX_KEY_SIZE + 1), *bigv = calloc(1, KV_MAX_VALUE_SIZE + 1);
    ck_assert_ptr_nonnull(bigk);
    ck_assert_ptr_nonnull(bigv);
    /* The too-long key starts with an existing key: a truncation would hit it. */
    memcpy(bigk, "pop00003", 8);

    ck_assert_int_eq(kv_put(NULL, "k", 1, "v", 1), KV_EINVAL);
    ck_assert_int_eq(kv_put(NULL, NULL, 0, NULL, 0), KV_EINVAL);
    ck_assert_int_eq(kv_delete(NULL, "k", 1), KV_EINVAL);
    ck_assert_int_eq(kv_delete(NULL, NULL, 0), KV_EINVAL);
    /* NULL bytes with a nonzero length. */
    ck_assert_int_eq(kv_put(db, NULL, 1, "v", 1), KV_EINVAL);
    ck_assert_int_eq(kv_put(db, NULL, 8, NULL, 0), KV_EINVAL);
    ck_assert_int_eq(kv_put(db, "pop00003", 8, NULL, 1), KV_EINVAL);
    ck_assert_int_eq(kv_put(db, "pop00003", 8, NULL, SIZE_MAX), KV_EINVAL);
    ck_assert_int_eq(kv_delete(db, NULL, 1), KV_EINVAL);
    ck_assert_int_eq(kv_delete(db, NULL, SIZE_MAX), KV_EINVAL);
    /* Sizes one past the limits, and absurd ones. */
    ck_assert_int_eq(kv_put(db, bigk, KV_MAX_KEY_SIZE + 1, "v", 1), KV_EINVAL);
    ck_assert_int_eq(kv_put(db, bigk, SIZE_MAX, "v", 1), KV_EINVAL);
    ck_assert_int_eq(kv_put(db, "pop00003", 8, bigv, KV_MAX_VALUE_SIZE + 1), KV_EINVAL);
    ck_assert_int_eq(kv_put(db, "pop00003", 8, bigv, SIZE_MAX), KV_EINVAL);
    ck_assert_int_eq(kv_put(db, bigk, KV_MAX_KEY_SIZE + 1, bigv, KV_MAX_VALUE_SIZE + 1),
                     KV_EINVAL);
    ck_assert_int_eq(kv_delete(db, bigk, KV_MAX_KEY_SIZE + 1), KV_EINVAL);
    ck_assert_int_eq(kv_delete(db, bigk, SIZE_MAX), KV_EINVAL);

    /* Nothing reached the log or the memtable, no sequence was used. */
    free(bigk);
    free(bigv);
    finish(db, p, &before, &m);
    free(before.p);
}
END_TEST

/* ---- batches -------------------------------------------------------------------------- */

START_TEST(batches_reject_bad_arguments)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_db *db = populate(p);
    struct buf before;
    scan_all(db, &before, POP_KEYS / 2);
    struct marks m;
    get_marks(db, &m);

    ck_assert_int_eq(kv_batch_new(NULL), KV_EINVAL);
    ck_assert_int_eq(kv_batch_put(NULL, "k", 1, "v", 1), KV_EINVAL);
    ck_assert_int_eq(kv_batch_delete(NULL, "k", 1), KV_EINVAL);
    kv_batch_clear(NULL);
    ck_assert_uint_eq(kv_batch_count(NULL), 0);
    kv_batch_free(NULL);

    kv_batch *b = NULL;
    ck_assert_int_eq(kv_batch_new(&b), KV_OK);
    ck_assert_ptr_nonnull(b);
    /* An empty batch: KV_OK, and nothing written. */
    ck_assert_int_eq(kv_write(db, b), KV_OK);
    kv_write_options wo = {.sync = 0};
    ck_assert_int_eq(kv_write_opts(db, &wo, b), KV_OK);

    /* A batch with two good entries, then bad adds: each KV_EINVAL, the
     * batch unchanged. */
    ck_assert_int_eq(kv_batch_put(b, "~b1", 3, "one", 3), KV_OK);
    ck_assert_int_eq(kv_batch_delete(b, "~b2", 3), KV_OK);
    uint8_t *bigk = calloc(1, KV_MAX_KEY_SIZE + 1), *bigv = calloc(1, KV_MAX_VALUE_SIZE + 1);
    ck_assert_ptr_nonnull(bigk);
    ck_assert_ptr_nonnull(bigv);
    ck_assert_int_eq(kv_batch_put(b, NULL, 1, "v", 1), KV_EINVAL);
    ck_assert_int_eq(kv_batch_put(b, "k", 1, NULL, 1), KV_EINVAL);
    ck_assert_int_eq(kv_batch_delete(b, NULL, 1), KV_EINVAL);
    ck_assert_int_eq(kv_batch_put(b, bigk, KV_MAX_KEY_SIZE + 1, "v", 1), KV_EINVAL);
    ck_assert_int_eq(kv_batch_put(b, "k", 1, bigv, KV_MAX_VALUE_SIZE + 1), KV_EINVAL);
    ck_assert_int_eq(kv_batch_put(b, "k", 1, bigv, SIZE_MAX), KV_EINVAL);
    ck_assert_int_eq(kv_batch_delete(b, bigk, KV_MAX_KEY_SIZE + 1), KV_EINVAL);
    ck_assert_int_eq(kv_batch_delete(b, bigk, SIZE_MAX), KV_EINVAL);
    ck_assert_uint_eq(kv_batch_count(b), 2);

    /* kv_write and kv_write_opts with NULL handles. */
    ck_assert_int_eq(kv_write(NULL, b), KV_EINVAL);
    ck_assert_int_eq(kv_write(db, NULL), KV_EINVAL);
    ck_assert_int_eq(kv_write(NULL, NULL), KV_EINVAL);
    ck_assert_int_eq(kv_write_opts(NULL, &wo, b), KV_EINVAL);
    ck_assert_int_eq(kv_write_opts(db, &wo, NULL), KV_EINVAL);
    ck_assert_int_eq(kv_write_opts(NULL, NULL, NULL), KV_EINVAL);
    ck_assert_uint_eq(kv_batch_count(b), 2);
    expect_same_scan(db, &before);
    expect_same_marks(db, &m);

    /* The batch, written with NULL options (the database's), holds exactly
     * its two good entries. */
    ck_assert_int_eq(kv_write_opts(db, NULL, b), KV_OK);
    void *val = NULL;
    size_t vl = 0;
    ck_assert_int_eq(kv_get(db, "~b1", 3, &val, &vl), KV_OK);
    ck_assert(vl == 3 && memcmp(val, "one", 3) == 0);
    kv_free(val);
    ck_assert_int_eq(kv_get(db, "~b2", 3, &val, &vl), KV_NOTFOUND);
    struct kv_stats s;
    ck_assert_int_eq(kv_stats(db, &s), KV_OK);
    ck_assert_uint_eq(s.last_sequence, m.last_sequence + 2);
    /* Undo it, so the database holds what it did. */
    kv_batch_clear(b);
    ck_assert_uint_eq(kv_batch_count(b), 0);
    ck_assert_int_eq(kv_batch_delete(b, "~b1", 3), KV_OK);
    ck_assert_int_eq(kv_write(db, b), KV_OK);
    expect_same_scan(db, &before);

    kv_batch_free(b);
    free(bigk);
    free(bigv);
    close_db(db);
    db = open_db(p, NULL);
    expect_same_scan(db, &before);
    close_db(db);
    free(before.p);
}
END_TEST

/* KV_MAX_BATCH_SIZE: a put that would take the encoded batch past 1 GiB is
 * refused and leaves the batch as it was; smaller puts still fit. */
START_TEST(batch_over_the_size_limit)
{
    uint8_t *v = malloc(KV_MAX_VALUE_SIZE);
    ck_assert_ptr_nonnull(v);
    memset(v, 0x5A, KV_MAX_VALUE_SIZE);
    kv_batch *b = NULL;
    ck_assert_int_eq(kv_batch_new(&b), KV_OK);
    uint32_t n = 0;
    int rc;
    char k[32];
    while ((rc = kv_batch_put(b, k, (size_t)sprintf(k, "big%02u", n), v, KV_MAX_VALUE_SIZE)) ==
           KV_OK) {
        n++;
        ck_assert_uint_lt(n, 70); /* 1 GiB / 16 MiB = 64: the limit must come first */
    }
    ck_assert_int_eq(rc, KV_EINVAL);
    /* 63 maximal values fit (each entry takes a few bytes more than 16 MiB). */
    ck_assert_uint_eq(n, (uint32_t)(KV_MAX_BATCH_SIZE / KV_MAX_VALUE_SIZE) - 1);
    ck_assert_uint_eq(kv_batch_count(b), n);
    ck_assert_int_eq(kv_batch_delete(b, "small", 5), KV_OK);
    ck_assert_uint_eq(kv_batch_count(b), n + 1);
    kv_batch_clear(b);
    ck_assert_uint_eq(kv_batch_count(b), 0);
    /* Cleared, it is a working batch again. */
    char p[600];
    test_path(p, sizeof p, "db");
    kv_db *db = open_db(p, NULL);
    ck_assert_int_eq(kv_batch_put(b, "after", 5, "clear", 5), KV_OK);
    ck_assert_int_eq(kv_write(db, b), KV_OK);
    void *val = NULL;
    size_t vl = 0;
    ck_assert_int_eq(kv_get(db, "after", 5, &val, &vl), KV_OK);
    ck_assert(vl == 5 && memcmp(val, "clear", 5) == 0);
    kv_free(val);
    kv_iter *it = NULL;
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    kv_iter_seek_first(it);
    ck_assert(kv_iter_valid(it));
    kv_iter_next(it);
    ck_assert(!kv_iter_valid(it)); /* only that one pair */
    ck_assert_int_eq(kv_iter_status(it), KV_OK);
    kv_iter_free(it);
    close_db(db);
    kv_batch_free(b);
    free(v);
}
END_TEST

/* ---- reads and snapshots ------------------------------------------------------------ */

START_TEST(reads_reject_bad_arguments)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_db *db = populate(p);
    struct buf before;
    scan_all(db, &before, POP_KEYS / 2);
    struct marks m;
    get_marks(db, &m);

    uint8_t *bigk = calloc(1, KV_MAX_KEY_SIZE + 1);
    ck_assert_ptr_nonnull(bigk);
    memcpy(bigk, "pop00003", 8);
    void *val = NULL;
    size_t vl = 0;
    ck_assert_int_eq(kv_get(NULL, "pop00003", 8, &val, &vl), KV_EINVAL);
    ck_assert_int_eq(kv_get(db, NULL, 8, &val, &vl), KV_EINVAL);
    ck_assert_int_eq(kv_get(db, NULL, SIZE_MAX, &val, &vl), KV_EINVAL);
    ck_assert_int_eq(kv_get(db, "pop00003", 8, NULL, &vl), KV_EINVAL);
    ck_assert_int_eq(kv_get(db, "pop00003", 8, &val, NULL), KV_EINVAL);
    ck_assert_int_eq(kv_get(db, bigk, KV_MAX_KEY_SIZE + 1, &val, &vl), KV_EINVAL);
    ck_assert_int_eq(kv_get(db, bigk, SIZE_MAX, &val, &vl), KV_EINVAL);

    /* Snapshots: NULL arguments; releasing NULL is a no-op. */
    kv_snapshot *snap = NULL;
    ck_assert_int_eq(kv_snapshot_new(NULL, &snap), KV_EINVAL);
    ck_assert_int_eq(kv_snapshot_new(db, NULL), KV_EINVAL);
    ck_assert_int_eq(kv_snapshot_new(NULL, NULL), KV_EINVAL);
    kv_snapshot_release(db, NULL);
    kv_snapshot_release(NULL, NULL);
    ck_assert_int_eq(kv_snapshot_new(db, &snap), KV_OK);
    ck_assert_ptr_nonnull(snap);
    ck_assert_int_eq(kv_get_at(NULL, snap, "pop00003", 8, &val, &vl), KV_EINVAL);
    ck_assert_int_eq(kv_get_at(db, snap, NULL, 8, &val, &vl), KV_EINVAL);
    ck_assert_int_eq(kv_get_at(db, snap, "pop00003", 8, NULL, &vl), KV_EINVAL);
    ck_assert_int_eq(kv_get_at(db, snap, "pop00003", 8, &val, NULL), KV_EINVAL);
    ck_assert_int_eq(kv_get_at(db, snap, bigk, KV_MAX_KEY_SIZE + 1, &val, &vl), KV_EINVAL);
    ck_assert_int_eq(kv_get_at(db, NULL, bigk, KV_MAX_KEY_SIZE + 1, &val, &vl), KV_EINVAL);

    /* kv_multi_get: a NULL handle or array refuses the call; bad keys fail
     * alone (the call runs), and none is counted as a get. */
    const void *mk[] = {NULL, bigk, NULL, bigk};
    size_t ml[] = {8, KV_MAX_KEY_SIZE + 1, SIZE_MAX, SIZE_MAX};
    void *mv[4];
    size_t mvl[4];
    int mst[4];
    ck_assert_int_eq(kv_multi_get(NULL, snap, 4, mk, ml, mv, mvl, mst), KV_EINVAL);
    ck_assert_int_eq(kv_multi_get(db, snap, 4, NULL, ml, mv, mvl, mst), KV_EINVAL);
    ck_assert_int_eq(kv_multi_get(db, snap, 4, mk, NULL, mv, mvl, mst), KV_EINVAL);
    ck_assert_int_eq(kv_multi_get(db, snap, 4, mk, ml, NULL, mvl, mst), KV_EINVAL);
    ck_assert_int_eq(kv_multi_get(db, snap, 4, mk, ml, mv, NULL, mst), KV_EINVAL);
    ck_assert_int_eq(kv_multi_get(db, snap, 4, mk, ml, mv, mvl, NULL), KV_EINVAL);
    ck_assert_int_eq(kv_multi_get(db, NULL, 4, mk, ml, mv, mvl, mst), KV_OK);
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(mst[i], KV_EINVAL);
        ck_assert_ptr_null(mv[i]);
        ck_assert_uint_eq(mvl[i], 0);
    }
    ck_assert_int_eq(kv_multi_get(NULL, NULL, 0, NULL, NULL, NULL, NULL, NULL), KV_EINVAL);
    ck_assert_int_eq(kv_multi_get(db, snap, 0, NULL, NULL, NULL, NULL, NULL), KV_OK);
    expect_same_marks(db, &m); /* no rejected call counted as a get */

    /* kv_get_at with a NULL snapshot reads now: a later write shows, while
     * the snapshot keeps the old value. */
    char k[32];
    uint8_t v[256];
    size_t kl = pop_key(3, k), want = pop_value(3, 2, v); /* 3 % 3 == 0: version 2 */
    ck_assert_int_eq(kv_get_at(db, NULL, k, kl, &val, &vl), KV_OK);
    ck_assert(vl == want && memcmp(val, v, want) == 0);
    kv_free(val);
    ck_assert_int_eq(kv_put(db, k, kl, "now", 3), KV_OK);
    ck_assert_int_eq(kv_get_at(db, NULL, k, kl, &val, &vl), KV_OK);
    ck_assert(vl == 3 && memcmp(val, "now", 3) == 0);
    kv_free(val);
    ck_assert_int_eq(kv_get_at(db, snap, k, kl, &val, &vl), KV_OK);
    ck_assert(vl == want && memcmp(val, v, want) == 0);
    kv_free(val);
    ck_assert_int_eq(kv_put(db, k, kl, v, want), KV_OK); /* back as it was */
    kv_snapshot_release(db, snap);

    free(bigk);
    get_marks(db, &m);
    finish(db, p, &before, &m);
    free(before.p);
}
END_TEST

/* ---- iterators ------------------------------------------------------------------------ */

START_TEST(iterators_reject_bad_arguments)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_db *db = populate(p);
    struct buf before;
    scan_all(db, &before, POP_KEYS / 2);
    struct marks m;
    get_marks(db, &m);

    kv_iter *it = NULL;
    ck_assert_int_eq(kv_iter_new(NULL, NULL, &it), KV_EINVAL);
    ck_assert_int_eq(kv_iter_new(db, NULL, NULL), KV_EINVAL);
    ck_assert_int_eq(kv_iter_new(NULL, NULL, NULL), KV_EINVAL);

    /* Every iterator call on NULL: no-ops, "not valid", KV_EINVAL status. */
    kv_iter_seek_first(NULL);
    kv_iter_seek_last(NULL);
    kv_iter_seek(NULL, "pop", 3);
    kv_iter_seek(NULL, NULL, 3);
    kv_iter_next(NULL);
    kv_iter_prev(NULL);
    ck_assert_int_eq(kv_iter_valid(NULL), 0);
    size_t len = 99;
    ck_assert_ptr_null(kv_iter_key(NULL, &len));
    ck_assert_uint_eq(len, 0);
    len = 99;
    ck_assert_ptr_null(kv_iter_value(NULL, &len));
    ck_assert_uint_eq(len, 0);
    ck_assert_int_eq(kv_iter_status(NULL), KV_EINVAL);
    kv_iter_free(NULL);

    /* A new iterator is not valid until a seek; next and prev do nothing. */
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    ck_assert_int_eq(kv_iter_valid(it), 0);
    kv_iter_next(it);
    kv_iter_prev(it);
    ck_assert_int_eq(kv_iter_valid(it), 0);
    len = 99;
    ck_assert_ptr_null(kv_iter_key(it, &len));
    ck_assert_uint_eq(len, 0);
    ck_assert_int_eq(kv_iter_status(it), KV_OK);
    /* NULL with length 0 is the empty key: the first key >= "" is the
     * empty key itself (populate stored it). */
    kv_iter_seek(it, NULL, 0);
    ck_assert(kv_iter_valid(it));
    ck_assert_ptr_nonnull(kv_iter_key(it, &len));
    ck_assert_uint_eq(len, 0);
    /* NULL with a nonzero length: the iterator stops, with KV_EINVAL. */
    kv_iter_seek(it, NULL, 5);
    ck_assert_int_eq(kv_iter_valid(it), 0);
    ck_assert_int_eq(kv_iter_status(it), KV_EINVAL);
    kv_iter_seek_first(it); /* stopped for good */
    ck_assert_int_eq(kv_iter_valid(it), 0);
    ck_assert_int_eq(kv_iter_status(it), KV_EINVAL);
    kv_iter_free(it);

    finish(db, p, &before, &m);
    free(before.p);
}
END_TEST

/* ---- maintenance, statistics, explain, inspect --------------------------------------- */

START_TEST(maintenance_and_stats_reject_bad_arguments)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_db *db = populate(p);
    struct buf before;
    scan_all(db, &before, POP_KEYS / 2);
    struct marks m;
    get_marks(db, &m);

    uint8_t *bigk = calloc(1, KV_MAX_KEY_SIZE + 1);
    ck_assert_ptr_nonnull(bigk);
    ck_assert_int_eq(kv_flush(NULL), KV_EINVAL);
    ck_assert_int_eq(kv_compact_range(NULL, NULL, 0, NULL, 0), KV_EINVAL);
    ck_assert_int_eq(kv_compact_range(db, NULL, 3, NULL, 0), KV_EINVAL);
    ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 3), KV_EINVAL);
    ck_assert_int_eq(kv_compact_range(db, "a", 1, NULL, SIZE_MAX), KV_EINVAL);
    ck_assert_int_eq(kv_compact_range(db, bigk, KV_MAX_KEY_SIZE + 1, NULL, 0), KV_EINVAL);
    ck_assert_int_eq(kv_compact_range(db, NULL, 0, bigk, KV_MAX_KEY_SIZE + 1), KV_EINVAL);

    struct kv_stats s;
    char *text = SENTINEL;
    kv_table_stats *ts = NULL;
    size_t nt = 0;
    ck_assert_int_eq(kv_stats(NULL, &s), KV_EINVAL);
    ck_assert_int_eq(kv_stats(db, NULL), KV_EINVAL);
    ck_assert_int_eq(kv_table_stats_get(NULL, &ts, &nt), KV_EINVAL);
    ck_assert_int_eq(kv_table_stats_get(db, NULL, &nt), KV_EINVAL);
    ck_assert_int_eq(kv_table_stats_get(db, &ts, NULL), KV_EINVAL);
    ck_assert_int_eq(kv_metrics_text(NULL, &text), KV_EINVAL);
    ck_assert_int_eq(kv_metrics_text(db, NULL), KV_EINVAL);
    ck_assert_int_eq(kv_recovery_report(NULL, &text), KV_EINVAL);
    ck_assert_int_eq(kv_recovery_report(db, NULL), KV_EINVAL);

    /* kv_explain_get: KV_EINVAL with *out NULL (kv.h), and no get counted. */
    kv_explain *x = SENTINEL;
    ck_assert_int_eq(kv_explain_get(NULL, "pop00003", 8, &x), KV_EINVAL);
    ck_assert_ptr_null(x);
    x = SENTINEL;
    ck_assert_int_eq(kv_explain_get(db, NULL, 8, &x), KV_EINVAL);
    ck_assert_ptr_null(x);
    x = SENTINEL;
    ck_assert_int_eq(kv_explain_get(db, bigk, KV_MAX_KEY_SIZE + 1, &x), KV_EINVAL);
    ck_assert_ptr_null(x);
    x = SENTINEL;
    ck_assert_int_eq(kv_explain_get(db, bigk, SIZE_MAX, &x), KV_EINVAL);
    ck_assert_ptr_null(x);
    ck_assert_int_eq(kv_explain_get(db, "pop00003", 8, NULL), KV_EINVAL);
    expect_same_marks(db, &m);
    expect_same_scan(db, &before);

    /* The good forms of the same calls work: the empty key through NULL,
     * and a compaction of everything (which must change no pair). */
    ck_assert_int_eq(kv_explain_get(db, NULL, 0, &x), KV_OK);
    ck_assert_ptr_nonnull(x);
    ck_assert_int_eq(x->result, KV_OK);
    ck_assert(x->value_len == 13 && memcmp(x->value, "the empty key", 13) == 0);
    kv_free(x);
    ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 0), KV_OK);
    expect_same_scan(db, &before);

    /* kv_inspect: NULL arguments, an open database, no database. */
    kv_dir_info *info = SENTINEL;
    ck_assert_int_eq(kv_inspect(NULL, &info), KV_EINVAL);
    ck_assert_ptr_null(info);
    info = SENTINEL;
    ck_assert_int_eq(kv_inspect("", &info), KV_EINVAL);
    ck_assert_ptr_null(info);
    ck_assert_int_eq(kv_inspect(p, NULL), KV_EINVAL);
    info = SENTINEL; /* open: read under a pin of the manifest, beside the writer */
    ck_assert_int_eq(kv_inspect(p, &info), KV_OK);
    kv_inspect_free(info);
    char nodb[600], missing[600];
    test_path(nodb, sizeof nodb, "empty-dir");
    test_path(missing, sizeof missing, "missing");
    ck_assert_int_eq(mkdir(nodb, 0755), 0);
    info = SENTINEL;
    ck_assert_int_eq(kv_inspect(nodb, &info), KV_NOTFOUND);
    ck_assert_ptr_null(info);
    char *listing = dir_listing(nodb);
    ck_assert_str_eq(listing, ""); /* nothing made there, not even LOCK */
    free(listing);
    info = SENTINEL;
    ck_assert_int_eq(kv_inspect(missing, &info), KV_NOTFOUND);
    ck_assert_ptr_null(info);
    ck_assert(!exists(missing));
    kv_inspect_free(NULL);

    /* The no-ops. */
    ck_assert_int_eq(kv_close(NULL), KV_OK);
    kv_free(NULL);
    kv_options_init(NULL);

    free(bigk);
    get_marks(db, &m);
    finish(db, p, &before, &m);
    free(before.p);
}
END_TEST


/* ---- careless callers ----------------------------------------------------------------- */

/* Makes kv_error_text some other database's: a text a careless reader
 * could take for the next call's. */
static void stale_text(void)
{
    char other[600];
    test_path(other, sizeof other, "some-other-db");
    kv_options o;
    kv_options_init(&o);
    o.create_if_missing = 0;
    kv_db *db = NULL;
    ck_assert_int_eq(kv_open(other, &o, &db), KV_NOTFOUND);
    ck_assert_msg(strstr(kv_error_text(), "some-other-db") != NULL, "text \"%s\"",
                  kv_error_text());
}

/* The text this thread holds names `want` (and, when given, `also`). */
static void expect_text(const char *what, const char *want, const char *also)
{
    const char *t = kv_error_text();
    ck_assert_msg(strstr(t, want) != NULL, "%s: text \"%s\" does not name %s", what, t, want);
    ck_assert_msg(!also || strstr(t, also) != NULL, "%s: text \"%s\" lacks \"%s\"", what, t,
                  also);
    ck_assert_msg(strstr(t, "some-other-db") == NULL, "%s: stale text \"%s\"", what, t);
}

/* kv.h: "KV_EBUSY while an iterator or a snapshot of the database is still
 * live ... nothing is closed or stopped and the handle stays fully usable". */
START_TEST(close_refuses_while_an_iterator_lives)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_db *db = populate(p);
    ck_assert_int_eq(kv_flush(db), KV_OK); /* the iterator reads tables (and the block cache) */
    struct buf before;
    scan_all(db, &before, POP_KEYS / 2);
    kv_iter *it = NULL, *it2 = NULL;
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    ck_assert_int_eq(kv_iter_new(db, NULL, &it2), KV_OK);
    stale_text();
    ck_assert_int_eq(kv_close(db), KV_EBUSY);
    expect_text("kv_close with two iterators", p, "2 iterators");

    /* Nothing was closed: the iterator walks everything (tables through the
     * block cache), and the handle writes, flushes, compacts and reads. */
    kv_iter_free(it2);
    struct buf now = {0};
    size_t n = 0;
    for (kv_iter_seek_first(it); kv_iter_valid(it); kv_iter_next(it), n++) {
        size_t kl, vl;
        const void *k = kv_iter_key(it, &kl), *v = kv_iter_value(it, &vl);
        buf_add_u64(&now, kl);
        buf_add(&now, k, kl);
        buf_add_u64(&now, vl);
        buf_add(&now, v, vl);
    }
    ck_assert_int_eq(kv_iter_status(it), KV_OK);
    ck_assert(now.len == before.len && memcmp(now.p, before.p, now.len) == 0);
    free(now.p);
    ck_assert_int_eq(kv_put(db, "~after", 6, "busy", 4), KV_OK);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 0), KV_OK);
    void *v;
    size_t vlen;
    ck_assert_int_eq(kv_get(db, "~after", 6, &v, &vlen), KV_OK);
    ck_assert(vlen == 4 && memcmp(v, "busy", 4) == 0);
    kv_free(v);
    ck_assert_int_eq(kv_close(db), KV_EBUSY); /* still one */
    expect_text("kv_close with one iterator", p, "1 iterator ");

    /* Freed, the close goes through, and the write is there after a reopen. */
    kv_iter_free(it);
    close_db(db);
    db = open_db(p, NULL);
    ck_assert_int_eq(kv_get(db, "~after", 6, &v, &vlen), KV_OK);
    kv_free(v);
    close_db(db);
    free(before.p);
}
END_TEST

START_TEST(close_refuses_while_a_snapshot_lives)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_db *db = open_db(p, NULL);
    ck_assert_int_eq(kv_put(db, "k", 1, "old", 3), KV_OK);
    kv_snapshot *snap = NULL;
    ck_assert_int_eq(kv_snapshot_new(db, &snap), KV_OK);
    ck_assert_int_eq(kv_put(db, "k", 1, "new", 3), KV_OK);
    stale_text();
    ck_assert_int_eq(kv_close(db), KV_EBUSY);
    expect_text("kv_close with a snapshot", p, "1 snapshot");

    /* The snapshot still reads what it saw, through flushes and compactions. */
    ck_assert_int_eq(kv_flush(db), KV_OK);
    ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 0), KV_OK);
    void *v;
    size_t vlen;
    ck_assert_int_eq(kv_get_at(db, snap, "k", 1, &v, &vlen), KV_OK);
    ck_assert(vlen == 3 && memcmp(v, "old", 3) == 0);
    kv_free(v);
    ck_assert_int_eq(kv_get(db, "k", 1, &v, &vlen), KV_OK);
    ck_assert(vlen == 3 && memcmp(v, "new", 3) == 0);
    kv_free(v);
    /* An iterator on the snapshot, then both counted. */
    kv_iter *it = NULL;
    ck_assert_int_eq(kv_iter_new(db, snap, &it), KV_OK);
    ck_assert_int_eq(kv_close(db), KV_EBUSY);
    expect_text("kv_close with an iterator and a snapshot", "1 iterator and 1 snapshot", NULL);
    kv_iter_free(it);
    ck_assert_int_eq(kv_close(db), KV_EBUSY);
    kv_snapshot_release(db, snap);
    close_db(db);
}
END_TEST

/* Threads making and freeing iterators and snapshots at once: the
 * handle's count stays right (ThreadSanitizer runs this tcase). */
#define CHURN_THREADS 4
#define CHURN_ROUNDS 200

static void *churn(void *arg)
{
    kv_db *db = arg;
    kv_iter *keep = NULL;
    for (int i = 0; i < CHURN_ROUNDS; i++) {
        kv_iter *it = NULL;
        kv_snapshot *snap = NULL;
        if (kv_snapshot_new(db, &snap) != KV_OK || kv_iter_new(db, snap, &it) != KV_OK)
            return (void *)1;
        kv_iter_seek_first(it);
        if (!kv_iter_valid(it))
            return (void *)1;
        kv_iter_free(it);
        kv_snapshot_release(db, snap);
        if (i % 50 == 0 && kv_put(db, "churn", 5, "v", 1) != KV_OK)
            return (void *)1;
    }
    /* One left alive each. */
    if (kv_iter_new(db, NULL, &keep) != KV_OK)
        return (void *)1;
    return keep;
}

START_TEST(close_counts_iterators_of_every_thread)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_db *db = open_db(p, NULL);
    ck_assert_int_eq(kv_put(db, "k", 1, "v", 1), KV_OK);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    pthread_t t[CHURN_THREADS];
    for (int i = 0; i < CHURN_THREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, churn, db), 0);
    kv_iter *left[CHURN_THREADS];
    for (int i = 0; i < CHURN_THREADS; i++) {
        void *r;
        ck_assert_int_eq(pthread_join(t[i], &r), 0);
        ck_assert_msg(r != NULL && r != (void *)1, "thread %d failed", i);
        left[i] = r;
    }
    ck_assert_int_eq(kv_close(db), KV_EBUSY);
    expect_text("kv_close after the threads", p, "4 iterators and 0 snapshots");
    for (int i = 0; i < CHURN_THREADS; i++)
        kv_iter_free(left[i]);
    close_db(db);
}
END_TEST

/* A kv_put on another thread: its code and its text there. */
struct other_put {
    kv_db *db;
    int rc;
    char text[512];
};

static void *put_on_another_thread(void *arg)
{
    struct other_put *o = arg;
    o->rc = kv_put(o->db, "other", 5, "thread", 6);
    snprintf(o->text, sizeof o->text, "%s", kv_error_text());
    return NULL;
}

static void put_elsewhere(kv_db *db, int want, const char *name, const char *also)
{
    struct other_put o = {.db = db};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, put_on_another_thread, &o), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(o.rc, want);
    ck_assert_msg(strstr(o.text, name) && strstr(o.text, also),
                  "kv_put on another thread: text \"%s\" lacks %s or %s", o.text, name, also);
}

/* status.h: the text of an error met on the flush thread reaches every
 * call that returns it, on any thread; so does a log write's. */
START_TEST(background_error_text_reaches_the_caller)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_db *db = open_db(p, NULL);
    ck_assert_int_eq(kv_put(db, "k", 1, "v", 1), KV_OK);
    /* The flush thread's first write to the new table fails. */
    kv_file_inject_kind(KV_FILE_KIND_TABLE, KV_FILE_WRITE, 1, KV_FAULT_EIO);
    stale_text();
    ck_assert_int_eq(kv_flush(db), KV_EIO);
    expect_text("kv_flush after the flush thread's write failed", p, ".sst");
    expect_text("kv_flush after the flush thread's write failed", "Input/output error", NULL);
    char first[512];
    snprintf(first, sizeof first, "%s", kv_error_text());
    /* Sticky: every later write returns it, with the same text, here and on
     * another thread. */
    stale_text();
    ck_assert_int_eq(kv_put(db, "k2", 2, "v", 1), KV_EIO);
    ck_assert_str_eq(kv_error_text(), first);
    put_elsewhere(db, KV_EIO, p, ".sst");
    stale_text();
    ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 0), KV_EIO);
    ck_assert_str_eq(kv_error_text(), first);
    stale_text();
    ck_assert_int_eq(kv_close(db), KV_EIO);
    ck_assert_str_eq(kv_error_text(), first);

    /* A write to the log fails on the writer's thread: the same for it. */
    db = open_db(p, NULL);
    kv_file_inject_kind(KV_FILE_KIND_WAL, KV_FILE_WRITE, 1, KV_FAULT_ENOSPC);
    stale_text();
    ck_assert_int_eq(kv_put(db, "k3", 2, "v", 1), KV_ENOSPC);
    expect_text("kv_put after the log's write failed", p, ".log");
    put_elsewhere(db, KV_ENOSPC, p, ".log");
    stale_text();
    ck_assert_int_eq(kv_flush(db), KV_ENOSPC);
    expect_text("kv_flush after the log's write failed", p, "No space left");
    ck_assert_int_eq(kv_close(db), KV_ENOSPC);
    expect_text("kv_close after the log's write failed", p, ".log");
}
END_TEST

/* Every error return sets the text (status.h): bad arguments name the
 * argument, and nothing returns an error under an older call's text. */
START_TEST(every_error_sets_its_text)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_db *db = open_db(p, NULL);
    uint8_t *big = calloc(1, KV_MAX_KEY_SIZE + 1);
    ck_assert_ptr_nonnull(big);
    void *v;
    size_t vlen;
    stale_text();
    ck_assert_int_eq(kv_put(db, big, KV_MAX_KEY_SIZE + 1, "v", 1), KV_EINVAL);
    expect_text("kv_put with a long key", p, "KV_MAX_KEY_SIZE");
    stale_text();
    ck_assert_int_eq(kv_get(db, NULL, 3, &v, &vlen), KV_EINVAL);
    expect_text("kv_get with a NULL key", p, "NULL key");
    stale_text();
    ck_assert_int_eq(kv_put(NULL, "k", 1, "v", 1), KV_EINVAL);
    expect_text("kv_put on a NULL db", "kv_put", "NULL");
    stale_text();
    ck_assert_int_eq(kv_stats(db, NULL), KV_EINVAL);
    expect_text("kv_stats with NULL out", p, "out");
    kv_options o;
    kv_options_init(&o);
    o.block_size = 1;
    stale_text();
    kv_db *db2 = SENTINEL;
    ck_assert_int_eq(kv_open(p, &o, &db2), KV_EINVAL);
    expect_text("kv_open with block_size 1", p, "block_size");
    /* The database is open: the second open names its LOCK. */
    stale_text();
    ck_assert_int_eq(kv_open(p, NULL, &db2), KV_EBUSY);
    expect_text("a second kv_open", p, "/LOCK");
    /* A path that is a file. */
    char file[600];
    test_path(file, sizeof file, "a-file");
    FILE *f = fopen(file, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    stale_text();
    ck_assert_int_eq(kv_open(file, NULL, &db2), KV_EINVAL);
    expect_text("kv_open of a file", file, "not a directory");
    /* KV_NOTFOUND from a lookup is an answer: it leaves the text alone. */
    ck_assert_int_eq(kv_get(db, "absent", 6, &v, &vlen), KV_NOTFOUND);
    free(big);
    close_db(db);
}
END_TEST

/* kv_open: a LOCK that is a directory, a directory that may not be
 * written: the code, and a text naming this database's path. */
START_TEST(open_errors_name_this_database)
{
    char p[600], lock[700];
    test_path(p, sizeof p, "db");
    ck_assert_int_eq(mkdir(p, 0755), 0);
    snprintf(lock, sizeof lock, "%s/LOCK", p);
    ck_assert_int_eq(mkdir(lock, 0755), 0);
    stale_text();
    kv_db *db = SENTINEL;
    ck_assert_int_eq(kv_open(p, NULL, &db), KV_EIO);
    ck_assert_ptr_null(db);
    expect_text("kv_open with LOCK a directory", lock, "Is a directory");
    ck_assert_int_eq(rmdir(lock), 0);

    /* A database whose directory may not be written: the next log cannot
     * be created. As root (permissions do not bite) the create fails with
     * an injected EACCES, then EROFS, instead. */
    close_db(open_db(p, NULL));
    int as_root = geteuid() == 0;
    for (int round = 0; round < (as_root ? 2 : 1); round++) {
        int rc;
        char text[512];
        if (!as_root) {
            ck_assert_int_eq(chmod(p, 0555), 0);
            rc = kv_open(p, NULL, &db);
            snprintf(text, sizeof text, "%s", kv_error_text());
            ck_assert_int_eq(chmod(p, 0755), 0);
        } else {
            /* An empty database: kv_open replays its one log (an open) and
             * then creates the next (the second open of a log). */
            kv_file_inject_kind(KV_FILE_KIND_WAL, KV_FILE_OPEN, 2,
                                round ? KV_FAULT_EROFS : KV_FAULT_EACCES);
            stale_text();
            rc = kv_open(p, NULL, &db);
            snprintf(text, sizeof text, "%s", kv_error_text());
            kv_file_inject_kind(KV_FILE_KIND_WAL, KV_FILE_OPEN, 0, KV_FAULT_NONE);
        }
        ck_assert_msg(rc == KV_EPERM, "kv_open of a read-only database: %d (%s), text \"%s\"",
                      rc, kv_strerror(rc), text);
        ck_assert_ptr_null(db);
        if (!as_root) /* refused at the directory's mode, before any file */
            ck_assert_msg(strstr(text, p) && strstr(text, "mode (0555)"), "text \"%s\"", text);
        else
            ck_assert_msg(strstr(text, p) && strstr(text, ".log: create: ") &&
                              strstr(text, round ? "Read-only file system" : "Permission denied"),
                          "text \"%s\"", text);
    }
    /* Mode 0555, root or not: a writer is refused (root could write, but
     * the mode says the directory is not to be written); a read-only
     * handle opens it. */
    ck_assert_int_eq(chmod(p, 0555), 0);
    {
        int rc = kv_open(p, NULL, &db);
        char text[512];
        snprintf(text, sizeof text, "%s", kv_error_text());
        kv_options ro;
        kv_options_init(&ro);
        ro.read_only = 1;
        kv_db *rdb = NULL;
        int rorc = kv_open(p, &ro, &rdb);
        if (rdb)
            kv_close(rdb);
        ck_assert_int_eq(chmod(p, 0755), 0);
        ck_assert_int_eq(rc, KV_EPERM);
        ck_assert_ptr_null(db);
        ck_assert_msg(strstr(text, p) && strstr(text, "mode (0555)"), "text \"%s\"", text);
        ck_assert_int_eq(rorc, KV_OK);
    }
    /* Nothing was left locked or changed: it opens. */
    close_db(open_db(p, NULL));

    if (!as_root) {
        /* Without a LOCK in a directory the owner may not write (0755
         * less u+w): KV_EPERM naming LOCK (it was KV_NOTFOUND, from the
         * read-only retry). */
        ck_assert_int_eq(unlink(lock), 0);
        ck_assert_int_eq(chmod(p, 0555 | 0020), 0);
        int rc = kv_open(p, NULL, &db);
        char text[512];
        snprintf(text, sizeof text, "%s", kv_error_text());
        ck_assert_int_eq(chmod(p, 0755), 0);
        ck_assert_int_eq(rc, KV_EPERM);
        ck_assert_msg(strstr(text, lock) && strstr(text, "Permission denied"), "text \"%s\"",
                      text);
    }
}
END_TEST

/* ---- kv_strerror ---------------------------------------------------------------------- */

START_TEST(strerror_names_every_code)
{
    static const int codes[] = {KV_OK,       KV_NOTFOUND, KV_EINVAL, KV_ENOMEM, KV_ECORRUPT,
                                KV_EIO,      KV_EBUSY,    KV_ENOSPC, KV_EPERM,  KV_ERANGE};
    const size_t n = sizeof codes / sizeof codes[0];
    for (size_t i = 0; i < n; i++) {
        const char *s = kv_strerror(codes[i]);
        ck_assert_ptr_nonnull(s);
        ck_assert_uint_gt(strlen(s), 0);
        ck_assert_str_ne(s, "unknown error");
        for (size_t j = 0; j < i; j++)
            ck_assert_msg(strcmp(s, kv_strerror(codes[j])) != 0, "codes %d and %d share \"%s\"",
                          codes[i], codes[j], s);
    }
    ck_assert_int_eq(KV_EPERM, -8); /* codes are appended, never renumbered */
    ck_assert_int_eq(KV_ERANGE, -9);
    ck_assert_str_eq(kv_strerror(KV_EPERM), "permission denied");
    /* Codes are consecutive from 0 down to KV_ERANGE: every other one is
     * unknown, and status.h names its text. */
    static const int unknown[] = {1, 2, 100, KV_ERANGE - 1, KV_ERANGE - 2, -100, INT_MIN, INT_MAX};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        const char *s = kv_strerror(unknown[i]);
        ck_assert_ptr_nonnull(s);
        ck_assert_str_eq(s, "unknown error");
    }
}
END_TEST

/* ---- sstable.h ----------------------------------------------------------------------- */

START_TEST(sstable_calls_reject_bad_arguments)
{
    char path[600], tmp[700];
    test_path(path, sizeof path, "000001.sst");
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    kv_sst_options_init(NULL); /* a no-op */

    /* Writer: NULL arguments and bad options, each refused before any file
     * is made. */
    kv_sst_writer *w = SENTINEL;
    ck_assert_int_eq(kv_sst_writer_new(NULL, NULL, &w), KV_EINVAL);
    ck_assert_ptr_null(w);
    ck_assert_int_eq(kv_sst_writer_new(path, NULL, NULL), KV_EINVAL);
    kv_sst_options o;
    for (int bad = 0; bad < 8; bad++) {
        kv_sst_options_init(&o);
        switch (bad) {
        case 0: o.block_size = 0; break;
        case 1: o.restart_interval = 0; break;
        case 2: o.compression = 7; break;
        case 3: o.bits_per_key = -1; break;
        case 4: o.bits_per_key = NAN; break;
        case 5: o.bits_per_key = 1001; break;
        case 6: o.filter_layout = (kv_bloom_layout)7; break;
        case 7: o.compression_level = 1000; break;
        }
        w = SENTINEL;
        ck_assert_msg(kv_sst_writer_new(path, &o, &w) == KV_EINVAL, "bad sst option %d", bad);
        ck_assert_ptr_null(w);
        ck_assert(!exists(path) && !exists(tmp));
    }

    /* A table of three good pairs, with bad adds in between. */
    ck_assert_int_eq(kv_sst_writer_new(path, NULL, &w), KV_OK);
    uint8_t *big = calloc(1, KV_SST_MAX_VALUE + 1);
    ck_assert_ptr_nonnull(big);
    ck_assert_int_eq(kv_sst_writer_add(NULL, "a", 1, "1", 1), KV_EINVAL);
    ck_assert_int_eq(kv_sst_writer_add_hashed(NULL, "a", 1, "1", 1, 7), KV_EINVAL);
    ck_assert_int_eq(kv_sst_writer_add(w, "b", 1, "2", 1), KV_OK);
    ck_assert_int_eq(kv_sst_writer_add(w, "c", 1, NULL, 1), KV_EINVAL);
    ck_assert_int_eq(kv_sst_writer_add(w, big, KV_SST_MAX_KEY + 1, "x", 1), KV_EINVAL);
    ck_assert_int_eq(kv_sst_writer_add(w, "c", 1, big, KV_SST_MAX_VALUE + 1), KV_EINVAL);
    ck_assert_int_eq(kv_sst_writer_add(w, "b", 1, "dup", 3), KV_EINVAL);     /* not increasing */
    ck_assert_int_eq(kv_sst_writer_add(w, "a", 1, "back", 4), KV_EINVAL);    /* decreasing */
    ck_assert_int_eq(kv_sst_writer_add_hashed(w, "c", 1, "x", 1, 7), KV_EINVAL); /* mixed */
    ck_assert_int_eq(kv_sst_writer_add(w, "c", 1, "3", 1), KV_OK);
    ck_assert_int_eq(kv_sst_writer_add(w, "d", 1, "", 0), KV_OK);
    ck_assert_int_eq(kv_sst_writer_finish(NULL, NULL), KV_EINVAL);
    kv_sst_writer_abandon(NULL);
    uint64_t fsize = 0;
    ck_assert_int_eq(kv_sst_writer_finish(w, &fsize), KV_OK);
    ck_assert_uint_gt(fsize, 72);
    free(big);

    /* Cache and reader. */
    ck_assert_int_eq(kv_sst_cache_new(1 << 20, NULL), KV_EINVAL);
    kv_sst_reader *r = SENTINEL;
    ck_assert_int_eq(kv_sst_reader_open(NULL, NULL, 1, &r), KV_EINVAL);
    ck_assert_ptr_null(r);
    ck_assert_int_eq(kv_sst_reader_open(path, NULL, 1, NULL), KV_EINVAL);
    char missing[700];
    snprintf(missing, sizeof missing, "%s/000002.sst", test_dir);
    r = SENTINEL;
    ck_assert_int_eq(kv_sst_reader_open(missing, NULL, 1, &r), KV_NOTFOUND);
    ck_assert_ptr_null(r);
    kv_sst_reader_close(NULL);
    ck_assert_ptr_nonnull(kv_sst_error_text());

    ck_assert_int_eq(kv_sst_reader_open(path, NULL, 1, &r), KV_OK);
    void *val = NULL;
    size_t vl = 0, sl = 0;
    uint8_t suffix[8];
    ck_assert_int_eq(kv_sst_get(NULL, "b", 1, &val, &vl), KV_EINVAL);
    ck_assert_int_eq(kv_sst_get(r, "b", 1, NULL, &vl), KV_EINVAL);
    ck_assert_int_eq(kv_sst_get(r, "b", 1, &val, NULL), KV_EINVAL);
    ck_assert_int_eq(kv_sst_get_hashed(NULL, "b", 1, 7, &val, &vl), KV_EINVAL);
    ck_assert_int_eq(kv_sst_get_hashed(r, NULL, 1, 7, &val, &vl), KV_EINVAL);
    ck_assert_int_eq(kv_sst_seek_prefixed(NULL, "b", 1, 1, 7, NULL, &val, &vl, suffix,
                                          sizeof suffix, &sl),
                     KV_EINVAL);
    ck_assert_int_eq(kv_sst_seek_prefixed(r, "b", 1, 2, 7, NULL, &val, &vl, suffix,
                                          sizeof suffix, &sl),
                     KV_EINVAL); /* prefix longer than the key */
    ck_assert_int_eq(kv_sst_seek_prefixed(r, NULL, 1, 0, 7, NULL, &val, &vl, suffix,
                                          sizeof suffix, &sl),
                     KV_EINVAL);
    ck_assert_int_eq(kv_sst_verify(NULL), KV_EINVAL);

    /* kv_sst_reader_properties: "NULL arguments leave nothing written". */
    kv_sst_properties props;
    memset(&props, 0xA5, sizeof props);
    kv_sst_properties untouched;
    memcpy(&untouched, &props, sizeof props);
    kv_sst_reader_properties(NULL, &props);
    ck_assert(memcmp(&props, &untouched, sizeof props) == 0);
    kv_sst_reader_properties(r, NULL);

    /* Iterators. */
    kv_sst_iter *it = SENTINEL;
    ck_assert_int_eq(kv_sst_iter_new(NULL, &it), KV_EINVAL);
    ck_assert_ptr_null(it);
    ck_assert_int_eq(kv_sst_iter_new(r, NULL), KV_EINVAL);
    kv_sst_iter_seek_first(NULL);
    kv_sst_iter_seek_last(NULL);
    kv_sst_iter_seek(NULL, "b", 1);
    kv_sst_iter_seek_before(NULL, "b", 1);
    kv_sst_iter_next(NULL);
    kv_sst_iter_prev(NULL);
    ck_assert_int_eq(kv_sst_iter_valid(NULL), 0);
    size_t len = 99;
    ck_assert_ptr_null(kv_sst_iter_key(NULL, &len));
    ck_assert_uint_eq(len, 0);
    len = 99;
    ck_assert_ptr_null(kv_sst_iter_value(NULL, &len));
    ck_assert_uint_eq(len, 0);
    ck_assert_int_eq(kv_sst_iter_status(NULL), KV_EINVAL);
    kv_sst_iter_free(NULL);
    /* A NULL key with a length does not move a positioned iterator. */
    ck_assert_int_eq(kv_sst_iter_new(r, &it), KV_OK);
    kv_sst_iter_seek(it, "c", 1);
    ck_assert(kv_sst_iter_valid(it));
    kv_sst_iter_seek(it, NULL, 1);
    kv_sst_iter_seek_before(it, NULL, 1);
    ck_assert(kv_sst_iter_valid(it));
    const void *k = kv_sst_iter_key(it, &len);
    ck_assert(len == 1 && memcmp(k, "c", 1) == 0);
    ck_assert_int_eq(kv_sst_iter_status(it), KV_OK);
    kv_sst_iter_free(it);

    /* After all that, the table holds exactly its three pairs. */
    ck_assert_int_eq(kv_sst_verify(r), KV_OK);
    kv_sst_reader_properties(r, &props);
    ck_assert_uint_eq(props.entries, 3);
    static const char *keys[] = {"b", "c", "d"}, *vals[] = {"2", "3", ""};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(kv_sst_get(r, keys[i], 1, &val, &vl), KV_OK);
        ck_assert(vl == strlen(vals[i]) && memcmp(val, vals[i], vl) == 0);
        kv_free(val);
    }
    ck_assert_int_eq(kv_sst_get(r, "a", 1, &val, &vl), KV_NOTFOUND);
    kv_sst_reader_close(r);
}
END_TEST

/* A NULL key with a nonzero length is a bad argument (status.h: KV_EINVAL),
 * for kv_sst_writer_add as for kv_sst_writer_add_hashed, and the writer
 * goes on working. */
START_TEST(sst_writer_add_null_key_with_length)
{
    char path[600];
    test_path(path, sizeof path, "000001.sst");
    kv_sst_writer *w = NULL;
    ck_assert_int_eq(kv_sst_writer_new(path, NULL, &w), KV_OK);
    ck_assert_int_eq(kv_sst_writer_add_hashed(w, NULL, 1, "x", 1, 7), KV_EINVAL);
    ck_assert_int_eq(kv_sst_writer_add(w, NULL, 1, "x", 1), KV_EINVAL);
    ck_assert_int_eq(kv_sst_writer_add(w, NULL, 3, NULL, 0), KV_EINVAL);
    ck_assert_int_eq(kv_sst_writer_add(w, "a", 1, "1", 1), KV_OK);
    ck_assert_int_eq(kv_sst_writer_finish(w, NULL), KV_OK);
    kv_sst_reader *r = NULL;
    ck_assert_int_eq(kv_sst_reader_open(path, NULL, 1, &r), KV_OK);
    kv_sst_properties props;
    kv_sst_reader_properties(r, &props);
    ck_assert_uint_eq(props.entries, 1);
    kv_sst_reader_close(r);
}
END_TEST

/* kv_sst_get with a NULL key and a nonzero length: a bad argument
 * (KV_EINVAL, as kv_sst_get_hashed and kv_sst_seek_prefixed give), not a
 * read through NULL; the reader goes on working. */
START_TEST(sst_get_null_key_with_length)
{
    char path[600];
    test_path(path, sizeof path, "000001.sst");
    kv_sst_writer *w = NULL;
    ck_assert_int_eq(kv_sst_writer_new(path, NULL, &w), KV_OK);
    ck_assert_int_eq(kv_sst_writer_add(w, "a", 1, "1", 1), KV_OK);
    ck_assert_int_eq(kv_sst_writer_finish(w, NULL), KV_OK);
    kv_sst_reader *r = NULL;
    ck_assert_int_eq(kv_sst_reader_open(path, NULL, 1, &r), KV_OK);
    void *val = NULL;
    size_t vl = 0;
    ck_assert_int_eq(kv_sst_get_hashed(r, NULL, 1, 7, &val, &vl), KV_EINVAL);
    ck_assert_int_eq(kv_sst_get(r, NULL, 1, &val, &vl), KV_EINVAL);
    ck_assert_int_eq(kv_sst_get(r, NULL, 4096, &val, &vl), KV_EINVAL);
    ck_assert_int_eq(kv_sst_get(r, "a", 1, &val, &vl), KV_OK);
    ck_assert(vl == 1 && memcmp(val, "1", 1) == 0);
    kv_free(val);
    kv_sst_reader_close(r);
}
END_TEST

/* ---- bloom.h ---------------------------------------------------------------------------- */

START_TEST(bloom_calls_reject_bad_arguments)
{
    kv_bloom *f = SENTINEL;
    /* kv_bloom_new: NULL out, bad layout, bits per key out of (0, 1000],
     * a filter over KV_BLOOM_MAX_BITS; *out NULL on each error. */
    ck_assert_int_eq(kv_bloom_new(KV_BLOOM_BLOCKED, 100, 10, 0, NULL), KV_EINVAL);
    static const double bad_bpk[] = {0, -1, -1e-300, 1000.001, 1e9};
    for (size_t i = 0; i < sizeof bad_bpk / sizeof bad_bpk[0]; i++)
        for (int layout = 0; layout < 2; layout++) {
            f = SENTINEL;
            ck_assert_int_eq(kv_bloom_new((kv_bloom_layout)layout, 100, bad_bpk[i], 0, &f),
                             KV_EINVAL);
            ck_assert_ptr_null(f);
        }
    f = SENTINEL;
    ck_assert_int_eq(kv_bloom_new(KV_BLOOM_BLOCKED, 100, NAN, 0, &f), KV_EINVAL);
    ck_assert_ptr_null(f);
    f = SENTINEL;
    ck_assert_int_eq(kv_bloom_new(KV_BLOOM_CLASSIC, 100, INFINITY, 0, &f), KV_EINVAL);
    ck_assert_ptr_null(f);
    f = SENTINEL;
    ck_assert_int_eq(kv_bloom_new((kv_bloom_layout)2, 100, 10, 0, &f), KV_EINVAL);
    ck_assert_ptr_null(f);
    f = SENTINEL;
    ck_assert_int_eq(kv_bloom_new((kv_bloom_layout)-1, 100, 10, 0, &f), KV_EINVAL);
    ck_assert_ptr_null(f);
    f = SENTINEL;
    ck_assert_int_eq(kv_bloom_new(KV_BLOOM_CLASSIC, KV_BLOOM_MAX_BITS, 2, 0, &f), KV_EINVAL);
    ck_assert_ptr_null(f);
    /* kv_bloom_new_fpr: the rate must lie in (0, 1). */
    static const double bad_fpr[] = {0, 1, -0.5, 1.5};
    for (size_t i = 0; i < sizeof bad_fpr / sizeof bad_fpr[0]; i++) {
        f = SENTINEL;
        ck_assert_int_eq(kv_bloom_new_fpr(KV_BLOOM_BLOCKED, 100, bad_fpr[i], 0, &f), KV_EINVAL);
        ck_assert_ptr_null(f);
    }
    f = SENTINEL;
    ck_assert_int_eq(kv_bloom_new_fpr(KV_BLOOM_CLASSIC, 100, NAN, 0, &f), KV_EINVAL);
    ck_assert_ptr_null(f);
    ck_assert_int_eq(kv_bloom_new_fpr(KV_BLOOM_CLASSIC, 100, 0.01, 0, NULL), KV_EINVAL);
    f = SENTINEL;
    ck_assert_int_eq(kv_bloom_new_fpr((kv_bloom_layout)5, 100, 0.01, 0, &f), KV_EINVAL);
    ck_assert_ptr_null(f);
    kv_bloom_free(NULL);

    /* A real filter, encoded; the bad calls below must leave it as it was. */
    ck_assert_int_eq(kv_bloom_new(KV_BLOOM_BLOCKED, 1000, 10, 42, &f), KV_OK);
    char k[32];
    for (int i = 0; i < 1000; i++)
        kv_bloom_add(f, k, (size_t)sprintf(k, "bloom%d", i));
    void *enc = NULL;
    size_t elen = 0;
    ck_assert_int_eq(kv_bloom_encode(f, &enc, &elen), KV_OK);

    void *buf = SENTINEL;
    size_t blen = 0;
    ck_assert_int_eq(kv_bloom_encode(NULL, &buf, &blen), KV_EINVAL);
    ck_assert_int_eq(kv_bloom_encode(f, NULL, &blen), KV_EINVAL);
    ck_assert_int_eq(kv_bloom_encode(f, &buf, NULL), KV_EINVAL);
    kv_bloom *g = SENTINEL;
    ck_assert_int_eq(kv_bloom_decode(NULL, elen, &g), KV_EINVAL);
    ck_assert_ptr_null(g);
    ck_assert_int_eq(kv_bloom_decode(enc, elen, NULL), KV_EINVAL);
    g = SENTINEL;
    ck_assert_int_eq(kv_bloom_decode(enc, 0, &g), KV_ECORRUPT);
    ck_assert_ptr_null(g);
    g = SENTINEL;
    ck_assert_int_eq(kv_bloom_decode(enc, elen - 1, &g), KV_ECORRUPT);
    ck_assert_ptr_null(g);
    /* kv_bloom_stats: "a NULL argument leaves nothing written". */
    kv_bloom_info info;
    memset(&info, 0xA5, sizeof info);
    kv_bloom_info untouched;
    memcpy(&untouched, &info, sizeof info);
    kv_bloom_stats(NULL, &info);
    ck_assert(memcmp(&info, &untouched, sizeof info) == 0);
    kv_bloom_stats(f, NULL);
    /* The key may be NULL when its length is 0. */
    ck_assert_uint_eq(kv_bloom_hash(f, NULL, 0), kv_bloom_hash(f, "", 0));
    /* kv_bloom_expected_fpr's documented edges. */
    ck_assert(kv_bloom_expected_fpr(KV_BLOOM_CLASSIC, 0, 100, 7) == 1.0);
    ck_assert(kv_bloom_expected_fpr(KV_BLOOM_BLOCKED, 0, 100, 7) == 1.0);
    ck_assert(kv_bloom_expected_fpr(KV_BLOOM_CLASSIC, 1024, 100, 0) == 1.0);
    ck_assert(kv_bloom_expected_fpr(KV_BLOOM_BLOCKED, 1024, 100, 0) == 1.0);
    ck_assert(kv_bloom_expected_fpr(KV_BLOOM_CLASSIC, 1024, 0, 7) == 0.0);
    ck_assert(kv_bloom_expected_fpr(KV_BLOOM_BLOCKED, 1024, 0, 7) == 0.0);

    /* Unchanged: the same encoding, and every key still "maybe". */
    void *enc2 = NULL;
    size_t elen2 = 0;
    ck_assert_int_eq(kv_bloom_encode(f, &enc2, &elen2), KV_OK);
    ck_assert(elen2 == elen && memcmp(enc, enc2, elen) == 0);
    for (int i = 0; i < 1000; i++)
        ck_assert_int_eq(kv_bloom_may_contain(f, k, (size_t)sprintf(k, "bloom%d", i)), 1);
    kv_free(enc);
    kv_free(enc2);
    kv_bloom_free(f);
}
END_TEST

/* ---- files that are not what their names say ------------------------------------- */

/* A FIFO, device or directory where a table, log or manifest should be
 * once made kv_open block forever (a FIFO opened for reading waits for a
 * writer) or fail with no word on what was wrong. Each such open must now
 * fail at once with KV_ECORRUPT and a text naming the file and what it is.
 * alarm() guards every open: if a hang comes back, SIGALRM ends the test
 * (Check reports it failed) instead of stalling ctest. */

#define OPEN_ALARM 10  /* seconds before a hung open kills its test */
#define OPEN_PROMPT 2.0 /* seconds a refused open may take */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A small database at p: one table, and writes that only its live log
 * holds (kv_close does not flush them). */
static void small_db(const char *p)
{
    kv_db *db = open_db(p, NULL);
    char k[32];
    uint8_t v[256];
    for (int i = 0; i < 200; i++)
        ck_assert_int_eq(kv_put(db, k, pop_key(i, k), v, pop_value(i, 1, v)), KV_OK);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    for (int i = 0; i < 20; i++)
        ck_assert_int_eq(kv_put(db, k, pop_key(i, k), v, pop_value(i, 2, v)), KV_OK);
    close_db(db);
}

/* The name of the database's first file of `kind` (KV_FILE_*). */
static void file_of_kind(const char *p, int kind, char *name, size_t n)
{
    kv_dir_info *info = NULL;
    ck_assert_int_eq(kv_inspect(p, &info), KV_OK);
    size_t i = 0;
    while (i < info->nfiles && info->files[i].kind != kind)
        i++;
    ck_assert_msg(i < info->nfiles, "%s: no file of kind %d", p, kind);
    ck_assert_uint_lt(strlen(info->files[i].name), n);
    strcpy(name, info->files[i].name);
    kv_inspect_free(info);
}

enum { AS_FIFO, AS_DIR, AS_DEVICE, AS_KINDS };
static const char *const as_text[] = {"not a regular file (a FIFO)",
                                      "not a regular file (a directory)",
                                      "not a regular file (a character device)"};

/* Puts a FIFO, an empty directory or a character device where file f is.
 * The device is a node like /dev/null where mknod is allowed, else a
 * symbolic link to /dev/null: returns 1 in that case. */
static int replace_with(const char *f, int as)
{
    ck_assert_msg(unlink(f) == 0 || errno == ENOENT, "unlink %s: %s", f, strerror(errno));
    switch (as) {
    case AS_FIFO:
        ck_assert_int_eq(mkfifo(f, 0600), 0);
        return 0;
    case AS_DIR:
        ck_assert_int_eq(mkdir(f, 0700), 0);
        return 0;
    default:
        if (mknod(f, S_IFCHR | 0600, makedev(1, 3)) == 0)
            return 0;
        ck_assert_int_eq(symlink("/dev/null", f), 0);
        return 1;
    }
}

/* Arms the alarm that ends a hung test: SIGALRM's default action, which
 * Check reports as "Received signal 14", whatever handler this process
 * inherited. */
static void arm_alarm(unsigned seconds)
{
    signal(SIGALRM, SIG_DFL);
    alarm(seconds);
}

/* kv_open of p fails at once with KV_ECORRUPT, *out NULL, and a text that
 * names `name` and says `what`. */
static void expect_open_refused(const char *p, const char *name, const char *what)
{
    kv_db *db = SENTINEL;
    arm_alarm(OPEN_ALARM);
    double t0 = now_s();
    int rc = kv_open(p, NULL, &db);
    double dt = now_s() - t0;
    alarm(0);
    const char *text = kv_error_text();
    ck_assert_msg(rc == KV_ECORRUPT, "%s: kv_open gave %s (%s)", name, kv_strerror(rc), text);
    ck_assert_ptr_null(db);
    ck_assert_msg(strstr(text, name) && strstr(text, what), "%s: text \"%s\" lacks \"%s\"", name,
                  text, what);
    ck_assert_msg(dt < OPEN_PROMPT, "%s: the refusal took %.2f s", name, dt);
}

START_TEST(special_file_as_table_or_log_is_refused_at_once)
{
    static const int kinds[] = {KV_FILE_TABLE, KV_FILE_LOG};
    for (int k = 0; k < 2; k++)
        for (int as = 0; as < AS_KINDS; as++) {
            char p[600], name[256], f[900];
            snprintf(name, sizeof name, "db%d%d", k, as);
            test_path(p, sizeof p, name);
            small_db(p);
            file_of_kind(p, kinds[k], name, sizeof name);
            snprintf(f, sizeof f, "%s/%s", p, name);
            replace_with(f, as);
            expect_open_refused(p, f, as_text[as]);
            /* what kvtool sst does: open the file as a table */
            kv_sst_reader *r = SENTINEL;
            arm_alarm(OPEN_ALARM);
            int rc = kv_sst_reader_open(f, NULL, 1, &r);
            alarm(0);
            ck_assert_int_eq(rc, KV_ECORRUPT);
            ck_assert_ptr_null(r);
            ck_assert_ptr_nonnull(strstr(kv_sst_error_text(), as_text[as]));
        }
}
END_TEST

/* The manifest's files and the LOCK. A directory as LOCK is not here: its
 * open fails (EISDIR) before any check, as it always did. */
START_TEST(special_file_as_manifest_or_lock_is_refused_at_once)
{
    static const char *const names[] = {"MANIFEST", "MANIFEST-lock", "LOCK"};
    for (int k = 0; k < 3; k++)
        for (int as = 0; as < AS_KINDS; as++) {
            if (k == 2 && as == AS_DIR)
                continue;
            char p[600], sub[32], f[900];
            snprintf(sub, sizeof sub, "db%d%d", k, as);
            test_path(p, sizeof p, sub);
            small_db(p);
            snprintf(f, sizeof f, "%s/%s", p, names[k]);
            int linked = replace_with(f, as);
            expect_open_refused(p, f, linked ? "a symbolic link" : as_text[as]);
            /* kv_inspect (kvtool db info, db verify) refuses it too */
            kv_dir_info *info = SENTINEL;
            arm_alarm(OPEN_ALARM);
            int rc = kv_inspect(p, &info);
            alarm(0);
            ck_assert_msg(rc == KV_ECORRUPT, "%s: kv_inspect gave %s", f, kv_strerror(rc));
            ck_assert_ptr_null(info);
            ck_assert_ptr_nonnull(strstr(kv_error_text(), f));
        }
}
END_TEST

/* A symbolic link as MANIFEST, MANIFEST-lock or LOCK is refused whatever
 * it points to, and nothing is created or changed where it points: LMDB
 * opens the manifest's files with O_CREAT and once created the link's
 * target outside the directory. Tables and logs may be links (they are
 * only read; kv creates files with O_EXCL, which never follows one). */
START_TEST(symlinked_manifest_is_refused_and_nothing_is_created)
{
    char out[600], p[600], f[900], target[900];
    test_path(out, sizeof out, "outside");
    ck_assert_int_eq(mkdir(out, 0700), 0);
    static const char *const names[] = {"MANIFEST", "MANIFEST-lock", "LOCK"};
    for (int k = 0; k < 3; k++) {
        /* a new database: the link's target does not exist */
        char sub[32];
        snprintf(sub, sizeof sub, "new%d", k);
        test_path(p, sizeof p, sub);
        ck_assert_int_eq(mkdir(p, 0700), 0);
        snprintf(f, sizeof f, "%s/%s", p, names[k]);
        snprintf(target, sizeof target, "%s/%s-target", out, names[k]);
        ck_assert_int_eq(symlink(target, f), 0);
        expect_open_refused(p, f, "a symbolic link");
        ck_assert_msg(!exists(target), "%s was created through the link", target);
    }
    char *empty = dir_listing(out);
    ck_assert_str_eq(empty, "");
    free(empty);

    /* a database whose MANIFEST was moved out and linked back */
    test_path(p, sizeof p, "db");
    small_db(p);
    snprintf(f, sizeof f, "%s/MANIFEST", p);
    snprintf(target, sizeof target, "%s/MANIFEST", out);
    ck_assert_int_eq(rename(f, target), 0);
    ck_assert_int_eq(symlink(target, f), 0);
    char *before = dir_listing(out), *before_db = dir_listing(p);
    struct stat st0, st1;
    ck_assert_int_eq(stat(target, &st0), 0);
    expect_open_refused(p, f, "a symbolic link");
    kv_dir_info *info = SENTINEL;
    ck_assert_int_eq(kv_inspect(p, &info), KV_ECORRUPT);
    ck_assert_ptr_null(info);
    ck_assert_int_eq(stat(target, &st1), 0);
    ck_assert(st1.st_mtim.tv_sec == st0.st_mtim.tv_sec &&
              st1.st_mtim.tv_nsec == st0.st_mtim.tv_nsec && st1.st_size == st0.st_size);
    char *after = dir_listing(out), *after_db = dir_listing(p);
    ck_assert_str_eq(after, before);
    ck_assert_str_eq(after_db, before_db);
    free(before);
    free(after);
    free(before_db);
    free(after_db);
    /* moved back, the database opens with everything in it */
    ck_assert_int_eq(unlink(f), 0);
    ck_assert_int_eq(rename(target, f), 0);
    kv_db *db = open_db(p, NULL);
    char k[32];
    uint8_t want[256];
    for (int i = 0; i < 200; i++) {
        void *got;
        size_t n;
        ck_assert_int_eq(kv_get(db, k, pop_key(i, k), &got, &n), KV_OK);
        size_t wn = pop_value(i, i < 20 ? 2 : 1, want);
        ck_assert(n == wn && memcmp(got, want, n) == 0);
        kv_free(got);
    }
    close_db(db);
}
END_TEST

/* Stray names that look numbered. A "18446744073709551614.sst.tmp" once
 * raised the file counter to 2^64 - 1, which then wrapped: new tables took
 * the numbers of live ones, and after ~1600 puts every write, flush and
 * close failed with KV_EINVAL. A "000000000500.log" made kv_open fail with
 * KV_NOTFOUND (it replayed "000500.log"). Names above 2^63 - 1, 2^32 or
 * more above the manifest's counter, or not written as kv writes numbers
 * are not kv's: left alone, never counted, and the store keeps working. */
START_TEST(stray_numbered_names_do_not_wrap_the_counter)
{
    static const char *const strays[] = {
        "18446744073709551614.sst.tmp", /* 2^64 - 2 */
        "18446744073709551615.log",     /* 2^64 - 1 */
        "99999999999999999999.sst",     /* past 2^64 */
        "9223372036854775808.sst",      /* 2^63 */
        "9223372036854775806.log",      /* below 2^63, far above the counter */
        "1000000000000.sst.tmp",        /* 10^12, far above the counter */
        "000000000500.log",             /* leading zeros kv never writes */
        "500.log",                      /* fewer than six digits */
    };
    const size_t nstrays = sizeof strays / sizeof strays[0];
    char p[600], f[900];
    test_path(p, sizeof p, "db");
    small_db(p);
    for (size_t i = 0; i < nstrays; i++) {
        snprintf(f, sizeof f, "%s/%s", p, strays[i]);
        FILE *fp = fopen(f, "w");
        ck_assert_ptr_nonnull(fp);
        fputs("not kv's", fp);
        ck_assert_int_eq(fclose(fp), 0);
    }
    kv_options o;
    kv_options_init(&o);
    o.write_buffer_size = 64u << 10; /* a flush every ~300 puts below */
    arm_alarm(60);
    kv_db *db = NULL;
    int rc = kv_open(p, &o, &db);
    ck_assert_msg(rc == KV_OK, "kv_open: %s (%s)", kv_strerror(rc), kv_error_text());
    char k[32];
    uint8_t v[256];
    memset(v, 'v', sizeof v);
    for (int i = 0; i < 20000; i++) {
        int n = snprintf(k, sizeof k, "stray%06d", i);
        rc = kv_put(db, k, (size_t)n, v, 200);
        ck_assert_msg(rc == KV_OK, "put %d: %s (%s)", i, kv_strerror(rc), kv_error_text());
    }
    ck_assert_int_eq(kv_flush(db), KV_OK);
    struct kv_stats st;
    ck_assert_int_eq(kv_stats(db, &st), KV_OK);
    ck_assert_uint_gt(st.flushes, 20);
    close_db(db);
    db = open_db(p, &o);
    for (int i = 0; i < 20000; i += 97) {
        int n = snprintf(k, sizeof k, "stray%06d", i);
        void *got;
        size_t len;
        ck_assert_int_eq(kv_get(db, k, (size_t)n, &got, &len), KV_OK);
        ck_assert(len == 200 && memcmp(got, v, 200) == 0);
        kv_free(got);
    }
    for (int i = 0; i < 200; i++) { /* small_db's pairs */
        void *got;
        size_t len;
        uint8_t want[256];
        ck_assert_int_eq(kv_get(db, k, pop_key(i, k), &got, &len), KV_OK);
        size_t wn = pop_value(i, i < 20 ? 2 : 1, want);
        ck_assert(len == wn && memcmp(got, want, len) == 0);
        kv_free(got);
    }
    close_db(db);
    alarm(0);
    /* every stray is still there, untouched, and listed as not kv's */
    kv_dir_info *info = NULL;
    ck_assert_int_eq(kv_inspect(p, &info), KV_OK);
    ck_assert_uint_lt(info->next_file, 100000);
    size_t seen = 0;
    for (size_t i = 0; i < info->nfiles; i++)
        for (size_t j = 0; j < nstrays; j++)
            if (strcmp(info->files[i].name, strays[j]) == 0) {
                ck_assert_msg(info->files[i].kind == KV_FILE_OTHER, "%s: kind %d", strays[j],
                              info->files[i].kind);
                ck_assert_uint_eq(info->files[i].size, 8);
                seen++;
            }
    ck_assert_uint_eq(seen, nstrays);
    kv_inspect_free(info);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("badinput");
    TCase *tc = tcase_create("open");
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, open_rejects_bad_arguments);
    tcase_add_test(tc, open_rejects_each_bad_option);
    tcase_add_test(tc, open_takes_more_tables_than_max_open_files);
    suite_add_tcase(s, tc);
    tc = tcase_create("write");
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, writes_reject_bad_arguments);
    tcase_add_test(tc, batches_reject_bad_arguments);
    tcase_add_test(tc, batch_over_the_size_limit);
    suite_add_tcase(s, tc);
    tc = tcase_create("read");
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, reads_reject_bad_arguments);
    tcase_add_test(tc, iterators_reject_bad_arguments);
    tcase_add_test(tc, maintenance_and_stats_reject_bad_arguments);
    suite_add_tcase(s, tc);
    tc = tcase_create("modules");
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, strerror_names_every_code);
    tcase_add_test(tc, sstable_calls_reject_bad_arguments);
    tcase_add_test(tc, sst_writer_add_null_key_with_length);
    tcase_add_test(tc, sst_get_null_key_with_length);
    tcase_add_test(tc, bloom_calls_reject_bad_arguments);
    suite_add_tcase(s, tc);
    tc = tcase_create("careless");
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, close_refuses_while_an_iterator_lives);
    tcase_add_test(tc, close_refuses_while_a_snapshot_lives);
    tcase_add_test(tc, close_counts_iterators_of_every_thread);
    tcase_add_test(tc, background_error_text_reaches_the_caller);
    tcase_add_test(tc, every_error_sets_its_text);
    tcase_add_test(tc, open_errors_name_this_database);
    suite_add_tcase(s, tc);
    tc = tcase_create("files");
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, special_file_as_table_or_log_is_refused_at_once);
    tcase_add_test(tc, special_file_as_manifest_or_lock_is_refused_at_once);
    tcase_add_test(tc, symlinked_manifest_is_refused_and_nothing_is_created);
    tcase_add_test(tc, stray_numbered_names_do_not_wrap_the_counter);
    suite_add_tcase(s, tc);
    return s;
}
