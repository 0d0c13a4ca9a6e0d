/* check_fsync.c - the two error states of the durability contract
 * (doc/reliability.md, "fsync errors" and "Full disks"; kv.h), file kind by
 * file kind, with the kv_testing library's faults (tests/testing/testing.h).
 *
 * tcase "fsync" (ctest fsync): a sync fails once with EIO (the log's
 * fdatasync, a table's fsync from a flush and from a compaction, a blob
 * file's fdatasync, sync_file_range on a table and on a blob file, a
 * directory's fsync, the manifest's commit). The call that needed it, or
 * the next write or kv_flush, returns KV_EIO with a text naming the file
 * and the call; kv_stats shows it; every later write, kv_flush,
 * kv_compact_range and kv_resume returns KV_EIO and applies nothing; no
 * sync of that kind is made again; reads answer from what was acknowledged;
 * nothing is retried in the background (the error is still there 300 ms
 * later); kv_close returns it. Reopened without the fault, the database
 * holds every acknowledged write; the write that failed may be there (it
 * reached the log before its sync failed, as after a crash), no refused one.
 *
 * tcase "enospc" (ctest enospc): a full disk, as a lasting ENOSPC on every
 * write of one kind (the log, tables, blob files, the manifest's commits,
 * every file at once, and a compaction's output tables). The call that met
 * it returns KV_ENOSPC; failed writes are never applied; while the disk is
 * full, the handle retries with backoff, not in a loop (few files opened in
 * a second); reads work; then the fault is lifted, and the same handle goes
 * on by itself within 10 s (kv_stats: background_error 0, resumes counted),
 * kv_resume returns KV_OK, writes, kv_flush and kv_compact_range succeed,
 * no temporary or unnamed file is left, and the reopened database holds
 * exactly the acknowledged writes. Also kv_resume's arguments.
 *
 * tcase "threads" (ctest enospc_threads, in the ThreadSanitizer pass): four
 * writers while every file's writes fail three times for 250 ms.
 *
 * tcase "tmpfs" (ctest enospc_tmpfs): a real full disk, a 4 MiB tmpfs
 * mounted for the test (as root); skipped (exit 77) where it cannot be
 * mounted. Filled to KV_ENOSPC beside a 1 MiB file, which is then deleted:
 * the handle goes on by itself, and nothing acknowledged is lost. */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <kv/kv.h>

#include "testing.h"

#include "fixture.h"

/* ---- the model ----------------------------------------------------------------------- */

#define NKEYS 300

static int32_t acked[NKEYS];     /* last acknowledged value id, -1: absent */
static int32_t maybe[NKEYS];     /* a failed write that may have applied, -2: none */
static _Atomic int32_t next_vid; /* writers on several threads take ids */
static size_t big_value;         /* bytes of every 4th value (0: 3000, a blob value) */
static int32_t big_until;        /* ... of those before this value id */

static void model_reset(void)
{
    for (int k = 0; k < NKEYS; k++) {
        acked[k] = -1;
        maybe[k] = -2;
    }
    next_vid = 0;
    big_value = 0;
    big_until = INT32_MAX;
}

/* Value vid: "v<8 digits>|" then bytes drawn from vid; every 4th one large
 * enough for a blob file (min_blob_size 1024). */
static size_t value_of(int32_t vid, uint8_t *buf)
{
    size_t big = big_value && vid < big_until ? big_value : 3000;
    size_t len = vid % 4 == 0 ? big : 40 + (size_t)(vid % 7) * 30;
    int n = snprintf((char *)buf, 16, "v%08d|", (int)vid);
    for (size_t i = (size_t)n; i < len; i++)
        buf[i] = (uint8_t)(splitmix((uint64_t)vid * 1000003u + i) >> 56);
    return len;
}

static _Thread_local uint8_t valbuf[64 << 10];

/* The value id a get read (-1: absent), after checking every byte; -3: not
 * a value of this test. */
static int32_t decode(const void *v, size_t n)
{
    const char *p = v;
    if (n < 10 || p[0] != 'v' || p[9] != '|')
        return -3;
    int32_t vid = (int32_t)strtol(p + 1, NULL, 10);
    if (vid < 0 || vid >= next_vid)
        return -3;
    size_t len = value_of(vid, valbuf);
    return len == n && memcmp(valbuf, v, n) == 0 ? vid : -3;
}

static void options(kv_options *o)
{
    kv_options_init(o);
    o->write_buffer_size = 64 << 10;
    o->min_blob_size = 1024;
    o->block_cache_size = 0;
    o->idle_compaction_ms = 0;
}

/* Writes a new value to key k (sync or not): KV_OK acknowledges it; a
 * failure that `may_apply` may have left it in the log. */
static int put_one(kv_db *db, int k, int sync, int may_apply)
{
    char key[16];
    key_of(key, sizeof key, "key", 5, (uint64_t)k);
    int32_t vid = atomic_fetch_add(&next_vid, 1);
    size_t len = value_of(vid, valbuf);
    kv_write_options wo = {.sync = sync};
    kv_batch *b = NULL;
    ck_assert_int_eq(kv_batch_new(&b), KV_OK);
    ck_assert_int_eq(kv_batch_put(b, key, strlen(key), valbuf, len), KV_OK);
    int rc = kv_write_opts(db, &wo, b);
    kv_batch_free(b);
    if (rc == KV_OK) {
        acked[k] = vid;
        maybe[k] = -2;
    } else if (may_apply) {
        maybe[k] = vid;
    }
    return rc;
}

/* Every key against the model; with `settle` (after a reopen) a failed
 * write found applied becomes the acknowledged value, and the rest are
 * forgotten. Returns the keys present. */
static int check_all(kv_db *db, int settle)
{
    int present = 0;
    for (int k = 0; k < NKEYS; k++) {
        char key[16];
        key_of(key, sizeof key, "key", 5, (uint64_t)k);
        void *v = NULL;
        size_t n = 0;
        int rc = kv_get(db, key, strlen(key), &v, &n);
        ck_assert_msg(rc == KV_OK || rc == KV_NOTFOUND, "%s: get: %s (%s)", key, kv_strerror(rc),
                      kv_error_text());
        int32_t got = rc == KV_NOTFOUND ? -1 : decode(v, n);
        kv_free(v);
        ck_assert_msg(got == acked[k] || (maybe[k] != -2 && got == maybe[k]),
                      "%s: read value %d, acknowledged %d (a failed write: %d)", key, (int)got,
                      (int)acked[k], (int)maybe[k]);
        if (settle) {
            acked[k] = got;
            maybe[k] = -2;
        }
        present += got >= 0;
    }
    return present;
}

/* An iterator walks exactly the keys present. */
static void check_walk(kv_db *db, int present)
{
    kv_iter *it = NULL;
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    int n = 0;
    for (kv_iter_seek_first(it); kv_iter_valid(it); kv_iter_next(it))
        n++;
    ck_assert_int_eq(kv_iter_status(it), KV_OK);
    kv_iter_free(it);
    ck_assert_int_eq(n, present);
}

/* No temporary file, no table or blob file the manifest does not name. */
static void check_no_leftovers(const char *path)
{
    kv_dir_info *info = NULL;
    ck_assert_int_eq(kv_inspect(path, &info), KV_OK);
    for (size_t i = 0; i < info->nfiles; i++) {
        int kind = info->files[i].kind;
        ck_assert_msg(kind != KV_FILE_TEMP && kind != KV_FILE_ORPHAN && kind != KV_FILE_BLOB_ORPHAN,
                      "%s: left behind (kind %d)", info->files[i].name, kind);
    }
    kv_inspect_free(info);
}

static void sleep_ms(long ms)
{
    struct timespec d = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&d, NULL);
}

/* kv_metrics_text holds `line` (a whole line). */
static void expect_metric(kv_db *db, const char *line)
{
    char *text = NULL, want[128];
    ck_assert_int_eq(kv_metrics_text(db, &text), KV_OK);
    snprintf(want, sizeof want, "\n%s\n", line);
    ck_assert_msg(strstr(text, want), "metrics: no line \"%s\"", line);
    kv_free(text);
}

static struct kv_stats stats_of(kv_db *db)
{
    struct kv_stats s;
    get_stats(db, &s);
    return s;
}

/* ---- fsync errors ------------------------------------------------------------------------ */

struct sync_case {
    const char *name;
    kv_file_kind kind;       /* KV_FILE_KIND_ANY: the manifest's commit */
    int compaction;          /* the fault hits a compaction's output */
    size_t big;              /* large values of this size (files past the writeback step) */
    size_t buffer;           /* write_buffer_size (0: 64 KiB; else no kv_flush: full memtables) */
    size_t min_blob;         /* min_blob_size (0: 1024) */
    const char *file, *call; /* what the error's text must name */
};

static const struct sync_case sync_cases[] = {
    {"log fdatasync", KV_FILE_KIND_WAL, 0, 0, 0, 0, ".log", "fdatasync"},
    {"table fsync (flush)", KV_FILE_KIND_TABLE, 0, 0, 0, 0, ".sst", "fsync"},
    {"table fsync (compaction)", KV_FILE_KIND_TABLE, 1, 0, 0, 0, ".sst", "fsync"},
    /* A table past its writeback step (8 MiB): values kept in the table. */
    {"table sync_file_range", KV_FILE_KIND_TABLE, 0, 16 << 10, 12 << 20, KV_BLOB_NEVER, ".sst",
     "sync_file_range"},
    {"blob fdatasync", KV_FILE_KIND_BLOB, 0, 0, 0, 0, ".blob", "fdatasync"},
    /* A blob file past its writeback step (1 MiB). */
    {"blob sync_file_range", KV_FILE_KIND_BLOB, 0, 48 << 10, 256 << 10, 0, ".blob",
     "sync_file_range"},
    {"directory fsync", KV_FILE_KIND_DIR, 0, 0, 0, 0, "fsync of the directory", "fsync"},
    {"manifest commit", KV_FILE_KIND_ANY, 0, 0, 0, 0, "MANIFEST", "commit"},
};
#define NSYNC ((int)(sizeof sync_cases / sizeof sync_cases[0]))

/* Writes (every 8th synced, a kv_flush every `every`; 0: none) until a
 * call fails, or `steps` pass: the failed call's rc, with the text left on
 * this thread. */
static int drive(kv_db *db, int steps, int every, int may_apply, int *step_out)
{
    for (int i = 0; i < steps; i++) {
        *step_out = i;
        int rc = put_one(db, (int)(splitmix((uint64_t)next_vid) % NKEYS), i % 8 == 7, may_apply);
        if (rc == KV_OK && every && i % every == every - 1)
            rc = kv_flush(db);
        if (rc != KV_OK)
            return rc;
    }
    return KV_OK;
}

/* A few flushed tables, so that a compaction has work. */
static void fill_tables(kv_db *db, int tables)
{
    for (int t = 0; t < tables; t++) {
        for (int i = 0; i < 60; i++)
            ck_assert_int_eq(put_one(db, (i * 5 + t) % NKEYS, 0, 0), KV_OK); /* overlapping */
        ck_assert_int_eq(kv_flush(db), KV_OK);
    }
}

START_TEST(test_fsync_error)
{
    const struct sync_case *c = &sync_cases[_i];
    model_reset();
    big_value = c->big;
    char path[512];
    test_path(path, sizeof path, "db");
    kv_options o;
    options(&o);
    if (c->buffer)
        o.write_buffer_size = c->buffer;
    if (c->min_blob)
        o.min_blob_size = c->min_blob;
    o.create_if_missing = 1;
    kv_db *db = open_db(path, &o);
    fill_tables(db, 2);
    /* Arm the fault: the next sync of the kind (or the next commit). */
    if (c->kind == KV_FILE_KIND_ANY)
        kv_manifest_inject(1, EIO);
    else
        kv_file_inject_kind(c->kind, KV_FILE_SYNC, 1, KV_FAULT_EIO);
    int step = 0, rc;
    /* Big files: a snapshot keeps every version, so that the flush
     * writes them all. */
    kv_snapshot *snap = NULL;
    if (c->buffer)
        ck_assert_int_eq(kv_snapshot_new(db, &snap), KV_OK);
    if (c->compaction)
        rc = kv_compact_range(db, NULL, 0, NULL, 0);
    else
        rc = drive(db, 20000, c->buffer ? 0 : 40, 1, &step);
    ck_assert_msg(rc == KV_EIO, "%s: the first error is %s (%s), after %d writes", c->name,
                  kv_strerror(rc), kv_error_text(), step);
    const char *text = kv_error_text();
    ck_assert_msg(strstr(text, c->file) && strstr(text, c->call),
                  "%s: the error's text names no %s and %s: %s", c->name, c->file, c->call, text);
    uint64_t syncs = kv_file_calls(c->kind, KV_FILE_SYNC);
    struct kv_stats s = stats_of(db);
    ck_assert_int_eq(s.background_error, KV_EIO);
    ck_assert_uint_eq(s.background_errors, 1);
    ck_assert_uint_eq(s.resumes, 0);
    expect_metric(db, "kv_background_error -5");
    expect_metric(db, "kv_background_errors_total 1");
    /* Read-only now: every write, flush, compaction and resume refused. */
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(put_one(db, i, i & 1, 0), KV_EIO);
    ck_assert_int_eq(kv_flush(db), KV_EIO);
    ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 0), KV_EIO);
    ck_assert_int_eq(kv_resume(db), KV_EIO);
    ck_assert_ptr_nonnull(strstr(kv_error_text(), c->call));
    check_all(db, 0);
    sleep_ms(300); /* nothing retries it */
    ck_assert_int_eq(put_one(db, 7, 0, 0), KV_EIO);
    s = stats_of(db);
    ck_assert_int_eq(s.background_error, KV_EIO);
    ck_assert_uint_eq(s.resumes, 0);
    if (c->kind != KV_FILE_KIND_ANY)
        ck_assert_msg(kv_file_calls(c->kind, KV_FILE_SYNC) == syncs,
                      "%s: synced again after the failed sync", c->name);
    if (snap)
        kv_snapshot_release(db, snap);
    ck_assert_int_eq(kv_close(db), KV_EIO);
    /* Reopened without the fault: every acknowledged write. */
    kv_file_inject_kind(c->kind, KV_FILE_SYNC, 0, KV_FAULT_NONE);
    kv_manifest_inject(0, 0);
    db = open_db(path, &o);
    int present = check_all(db, 1);
    check_walk(db, present);
    ck_assert_int_eq(put_one(db, 1, 1, 0), KV_OK);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    db = reopen_db(db, path, &o);
    check_walk(db, check_all(db, 0));
    close_db(db);
}
END_TEST

/* ---- full disks ------------------------------------------------------------------------- */

struct space_case {
    const char *name;
    kv_file_kind kind; /* the writes that fail (KV_FILE_KIND_ANY: every file) */
    int manifest;      /* the manifest's commits fail too (or alone: kind KV_FILE_KINDS) */
    int compaction;    /* the disk fills under a kv_compact_range */
};

static const struct space_case space_cases[] = {
    {"log append", KV_FILE_KIND_WAL, 0, 0},  {"table write", KV_FILE_KIND_TABLE, 0, 0},
    {"blob write", KV_FILE_KIND_BLOB, 0, 0}, {"manifest commit", KV_FILE_KINDS, 1, 0},
    {"every file", KV_FILE_KIND_ANY, 1, 0},  {"compaction output", KV_FILE_KIND_TABLE, 0, 1},
};
#define NSPACE ((int)(sizeof space_cases / sizeof space_cases[0]))

static void disk_full(const struct space_case *c, int full)
{
    if (c->kind != KV_FILE_KINDS)
        kv_file_fault_persist(c->kind, KV_FILE_WRITE, full ? KV_FAULT_ENOSPC : KV_FAULT_NONE);
    if (c->manifest)
        kv_manifest_fault_persist(full ? ENOSPC : 0);
}

/* Polls kv_stats until no error is in force: 1, or 0 after 10 s. */
static int wait_resumed(kv_db *db)
{
    for (int i = 0; i < 1000; i++) {
        if (stats_of(db).background_error == 0)
            return 1;
        sleep_ms(10);
    }
    return 0;
}

START_TEST(test_full_disk)
{
    const struct space_case *c = &space_cases[_i];
    model_reset();
    char path[512];
    test_path(path, sizeof path, "db");
    kv_options o;
    options(&o);
    o.create_if_missing = 1;
    kv_db *db = open_db(path, &o);
    fill_tables(db, 3);
    disk_full(c, 1);
    int step = 0, rc;
    if (c->compaction)
        rc = kv_compact_range(db, NULL, 0, NULL, 0);
    else
        rc = drive(db, 3000, 40, 0, &step); /* a failed write never applies */
    ck_assert_msg(rc == KV_ENOSPC, "%s: the first error is %s (%s)", c->name, kv_strerror(rc),
                  kv_error_text());
    ck_assert_ptr_nonnull(strcasestr(kv_error_text(), kv_strerror(KV_ENOSPC)));
    ck_assert_uint_ge(stats_of(db).background_errors, 1);
    /* While the disk is full: writes refused (or taken in between two
     * retries, when a retry found what it needed), reads answered, and the
     * retries spaced out: a second holds a handful. */
    uint64_t opens = kv_file_calls(KV_FILE_KIND_ANY, KV_FILE_OPEN);
    uint64_t commits = kv_manifest_commits();
    for (int i = 0; i < 20; i++) {
        rc = put_one(db, i, 0, 0);
        ck_assert_msg(rc == KV_OK || rc == KV_ENOSPC, "%s: a write while full: %s", c->name,
                      kv_strerror(rc));
        sleep_ms(50);
    }
    ck_assert_uint_le(kv_file_calls(KV_FILE_KIND_ANY, KV_FILE_OPEN) - opens, 40);
    ck_assert_uint_le(kv_manifest_commits() - commits, 20);
    /* Still full: the retry fails, but for the log's (a new log and a
     * flush need no log write) and a kv_compact_range's (no compaction is
     * needed: the retry has nothing to redo), which may succeed. */
    rc = kv_resume(db);
    if (c->kind != KV_FILE_KIND_WAL && !c->compaction)
        ck_assert_int_eq(rc, KV_ENOSPC);
    else
        ck_assert(rc == KV_OK || rc == KV_ENOSPC);
    check_all(db, 0);
    /* Room again: the handle goes on by itself. */
    disk_full(c, 0);
    ck_assert_msg(wait_resumed(db), "%s: still stopped 10 s after the disk had room", c->name);
    struct kv_stats s = stats_of(db);
    ck_assert_uint_ge(s.resumes, 1);
    expect_metric(db, "kv_background_error 0");
    ck_assert_int_eq(kv_resume(db), KV_OK);
    for (int i = 0; i < 200; i++)
        ck_assert_int_eq(put_one(db, i % NKEYS, i % 16 == 0, 0), KV_OK);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 0), KV_OK);
    check_all(db, 0);
    close_db(db);
    check_no_leftovers(path);
    db = open_db(path, &o);
    check_walk(db, check_all(db, 0));
    close_db(db);
}
END_TEST

/* Four writers, each on its own keys, while the disk fills (log, tables
 * and blob files) and empties under them: each write KV_OK or KV_ENOSPC,
 * the handle goes on, and what was acknowledged is what is read, before and
 * after a reopen. Joins the retry (which lets writers in while it flushes)
 * with writers in the ThreadSanitizer's sight when run under it. */
struct writer_arg {
    kv_db *db;
    int first;
    _Atomic int *stop;
    int acked, refused, other;
};

static void *writer(void *p)
{
    struct writer_arg *w = p;
    for (int i = 0; !atomic_load(w->stop); i++) {
        int rc = put_one(w->db, w->first + i % (NKEYS / 4), i % 16 == 0, 0);
        if (rc == KV_OK)
            w->acked++;
        else if (rc == KV_ENOSPC)
            w->refused++;
        else
            w->other++;
        if (rc != KV_OK)
            sleep_ms(1);
    }
    return NULL;
}

START_TEST(test_full_disk_threads)
{
    model_reset();
    kv_options o;
    options(&o);
    o.create_if_missing = 1;
    kv_db *db = open_db("db", &o);
    _Atomic int stop = 0;
    struct writer_arg w[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (struct writer_arg){.db = db, .first = i * (NKEYS / 4), .stop = &stop};
        ck_assert_int_eq(pthread_create(&t[i], NULL, writer, &w[i]), 0);
    }
    for (int round = 0; round < 3; round++) {
        sleep_ms(150);
        kv_file_fault_persist(KV_FILE_KIND_ANY, KV_FILE_WRITE, KV_FAULT_ENOSPC);
        sleep_ms(250);
        kv_file_fault_persist(KV_FILE_KIND_ANY, KV_FILE_WRITE, KV_FAULT_NONE);
    }
    ck_assert_msg(wait_resumed(db), "still stopped 10 s after the disk had room");
    sleep_ms(100);
    atomic_store(&stop, 1);
    int took = 0, refused = 0;
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
        ck_assert_msg(w[i].other == 0, "writer %d: %d errors other than KV_ENOSPC", i, w[i].other);
        took += w[i].acked;
        refused += w[i].refused;
    }
    ck_assert_int_gt(took, 0);
    ck_assert_int_gt(refused, 0);
    ck_assert_uint_ge(stats_of(db).resumes, 1);
    check_all(db, 0);
    db = reopen_db(db, "db", &o);
    check_walk(db, check_all(db, 0));
    close_db(db);
    char path[512];
    test_path(path, sizeof path, "db");
    check_no_leftovers(path);
}
END_TEST

/* kv_resume's own cases: NULL, and a handle with nothing in force. */
START_TEST(test_resume_args)
{
    ck_assert_int_eq(kv_resume(NULL), KV_EINVAL);
    ck_assert_str_eq(kv_strerror(KV_ENOSPC), "no space left on device");
    model_reset();
    kv_options o;
    options(&o);
    o.create_if_missing = 1;
    kv_db *db = open_db("db", &o);
    ck_assert_int_eq(kv_resume(db), KV_OK);
    ck_assert_int_eq(stats_of(db).background_error, 0);
    expect_metric(db, "kv_background_error 0");
    expect_metric(db, "kv_resumes_total 0");
    close_db(db);
}
END_TEST

/* ---- a real full disk ------------------------------------------------------------------ */

/* The mount point, in the program's root: the parent unmounts it at the
 * end (test_at_end) even when a failed check ended the test's child before
 * it could. */
static void mount_point(char *p, size_t n)
{
    snprintf(p, n, "%s/tmpfs", test_root);
}

static void unmount(void)
{
    char mnt[600];
    mount_point(mnt, sizeof mnt);
    umount2(mnt, MNT_DETACH); /* not mounted: nothing */
}

START_TEST(test_tmpfs)
{
    char mnt[600];
    mount_point(mnt, sizeof mnt);
    ck_assert_int_eq(mkdir(mnt, 0700), 0);
    ck_assert_msg(mount("tmpfs", mnt, "tmpfs", 0, "size=4m") == 0, "mount: %s", strerror(errno));
    model_reset();
    char path[700], filler[700];
    snprintf(path, sizeof path, "%s/db", mnt);
    snprintf(filler, sizeof filler, "%s/filler", mnt);
    FILE *f = fopen(filler, "w");
    ck_assert_ptr_nonnull(f);
    static uint8_t zeros[1 << 20];
    ck_assert_uint_eq(fwrite(zeros, 1, sizeof zeros, f), sizeof zeros);
    ck_assert_int_eq(fclose(f), 0);
    kv_options o;
    options(&o);
    o.create_if_missing = 1;
    kv_db *db = open_db(path, &o);
    /* Fill it: a quarter of the values of 48 KiB, more live bytes than
     * the disk holds, until it is full. */
    big_value = 48 << 10;
    int rc = KV_OK, i;
    for (i = 0; i < 200000 && rc == KV_OK; i++) {
        rc = put_one(db, i % NKEYS, 0, 0);
        if (rc == KV_OK && i % 50 == 49)
            rc = kv_flush(db);
    }
    ck_assert_msg(rc == KV_ENOSPC, "after %d writes: %s (%s)", i, kv_strerror(rc), kv_error_text());
    check_all(db, 0);
    big_until = next_vid;                /* small values from here on */
    ck_assert_int_eq(unlink(filler), 0); /* room again */
    ck_assert_msg(wait_resumed(db), "still stopped 10 s after the disk had room");
    for (int j = 0; j < 100; j++)
        ck_assert_int_eq(put_one(db, j, j == 99, 0), KV_OK);
    check_all(db, 0);
    close_db(db);
    db = open_db(path, &o);
    check_walk(db, check_all(db, 0));
    close_db(db);
    unmount();
}
END_TEST

/* 1 when this process may mount a tmpfs (root, or the capability). */
static int can_mount(void)
{
    char dir[] = "/tmp/kv_fsync_mntXXXXXX";
    if (!mkdtemp(dir))
        return 0;
    int ok = mount("tmpfs", dir, "tmpfs", 0, "size=64k") == 0;
    if (ok)
        umount2(dir, MNT_DETACH);
    rmdir(dir);
    return ok;
}

Suite *test_suite(void)
{
    const char *only = getenv("CK_RUN_CASE");
    if (only && strcmp(only, "tmpfs") == 0 && !can_mount()) {
        fprintf(stderr, "tmpfs: cannot mount a tmpfs here (%s): skipped\n", strerror(errno));
        exit(77); /* ctest: SKIP_RETURN_CODE */
    }
    Suite *s = suite_create("fsync");
    test_set_base("/dev/shm"); /* tmpfs: fsync costs nothing, the faults are under test */
    TCase *tc = test_tcase(s, "fsync", 60, 1);
    tcase_add_loop_test(tc, test_fsync_error, 0, NSYNC);
    tc = test_tcase(s, "enospc", 120, 1);
    tcase_add_loop_test(tc, test_full_disk, 0, NSPACE);
    tcase_add_test(tc, test_resume_args);
    tc = test_tcase(s, "threads", 60, 1);
    tcase_add_test(tc, test_full_disk_threads);
    tc = test_tcase(s, "tmpfs", 60, 1);
    tcase_add_test(tc, test_tmpfs);
    test_at_end(unmount);
    return s;
}
