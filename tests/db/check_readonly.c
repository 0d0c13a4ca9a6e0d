/* check_readonly.c - read-only handles (kv_options.read_only) and
 * kv_catch_up (doc/operations.md, "Read-only handles"): writes through one
 * are KV_EINVAL, and kv_catch_up on a writer; a reader beside a writer of
 * the same process sees the database as of its open (the writer's log
 * included), keeps reading it while the writer compacts every file away,
 * and moves on at kv_catch_up, its iterators and snapshots keeping their
 * view; the files the writer let go are deleted once no reader needs them;
 * a reader in other processes while a writer process puts, flushes and
 * compacts reads everything the writer acknowledged before each catch-up,
 * never loses a key it saw, and never fails on a vanished file; a database
 * copied into a read-only directory opens and reads; and a read-only open
 * writes nothing into the directory (but LMDB's reader table in
 * MANIFEST-lock). */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#define _XOPEN_SOURCE 700
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <kv/kv.h>

#include "../kv/manifest.h"
#include "fixture.h"

static char dbpath[600];

static void setup_files(void)
{
    test_setup();
    test_path(dbpath, sizeof dbpath, "db");
}

/* Small memtables and tables: a short run flushes and compacts. */
static void small_options(kv_options *o)
{
    kv_options_init(o);
    o->background_nice = 0;
    o->write_buffer_size = 64 << 10;
    o->target_file_size = 64 << 10;
    o->max_bytes_for_level_base = 256 << 10;
    o->l0_compaction_trigger = 2;
}

static kv_db *open_writer(void)
{
    kv_options o;
    small_options(&o);
    return open_db(dbpath, &o);
}

static int try_reader(const char *path, kv_db **db)
{
    kv_options o;
    kv_options_init(&o);
    o.read_only = 1;
    o.max_open_files = 64;
    return kv_open(path, &o, db);
}

static kv_db *open_reader(const char *path)
{
    kv_db *db = NULL;
    int rc = try_reader(path, &db);
    ck_assert_msg(rc == KV_OK, "read-only kv_open %s: %s (%s)", path, kv_strerror(rc),
                  kv_error_text());
    return db;
}

static size_t key(char *k, uint64_t i)
{
    return key_of(k, 32, "k", 8, i);
}

/* Value of key i in round r: long enough that a few hundred keys fill a
 * memtable. */
static size_t value(char *v, uint64_t i, uint64_t r)
{
    int n = snprintf(v, 200, "r%llu-v%llu-", (unsigned long long)r, (unsigned long long)i);
    memset(v + n, 'a' + (int)(i % 26), 100);
    return (size_t)n + 100;
}

static void put_round(kv_db *db, uint64_t from, uint64_t to, uint64_t r)
{
    char k[32], v[200];
    for (uint64_t i = from; i < to; i++) {
        size_t kl = key(k, i), vl = value(v, i, r);
        put_kv(db, k, kl, v, vl);
    }
}

/* 0 when key i reads as round r's value, else the kv_get result (1: another value). */
static int read_round(kv_db *db, const kv_snapshot *snap, uint64_t i, uint64_t r)
{
    char k[32], v[200];
    size_t kl = key(k, i), vl = value(v, i, r);
    void *got = NULL;
    size_t gl = 0;
    int rc = snap ? kv_get_at(db, snap, k, kl, &got, &gl) : kv_get(db, k, kl, &got, &gl);
    if (rc != KV_OK)
        return rc;
    rc = gl == vl && memcmp(got, v, vl) == 0 ? 0 : 1;
    kv_free(got);
    return rc;
}

static void expect_round(kv_db *db, const kv_snapshot *snap, uint64_t from, uint64_t to, uint64_t r)
{
    for (uint64_t i = from; i < to; i++) {
        int rc = read_round(db, snap, i, r);
        ck_assert_msg(rc == 0, "key %llu: round %llu expected, got %d (%s)", (unsigned long long)i,
                      (unsigned long long)r, rc, rc < 0 ? kv_error_text() : "another value");
    }
}

static size_t count_ext(const char *dir, const char *ext)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    size_t n = 0, el = strlen(ext);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t l = strlen(de->d_name);
        n += l > el && strcmp(de->d_name + l - el, ext) == 0;
    }
    closedir(d);
    return n;
}

/* ---- writes refused ------------------------------------------------------------------ */

START_TEST(writes_through_a_reader_are_einval)
{
    kv_db *w = open_writer();
    put_round(w, 0, 10, 0);
    kv_db *r = open_reader(dbpath);
    ck_assert_int_eq(kv_put(r, "a", 1, "b", 1), KV_EINVAL);
    ck_assert_ptr_nonnull(strstr(kv_error_text(), "read-only"));
    ck_assert_int_eq(kv_delete(r, "a", 1), KV_EINVAL);
    ck_assert_int_eq(kv_merge(r, "a", 1, "b", 1), KV_EINVAL);
    ck_assert_int_eq(kv_delete_range(r, "a", 1, "b", 1), KV_EINVAL);
    ck_assert_int_eq(kv_flush(r), KV_EINVAL);
    ck_assert_int_eq(kv_compact_range(r, NULL, 0, NULL, 0), KV_EINVAL);
    kv_batch *b;
    ck_assert_int_eq(kv_batch_new(&b), KV_OK);
    ck_assert_int_eq(kv_batch_put(b, "a", 1, "b", 1), KV_OK);
    ck_assert_int_eq(kv_write(r, b), KV_EINVAL);
    kv_batch_free(b);
    /* kv_catch_up: only on a read-only handle. */
    ck_assert_int_eq(kv_catch_up(w), KV_EINVAL);
    ck_assert_int_eq(kv_catch_up(NULL), KV_EINVAL);
    ck_assert_int_eq(kv_catch_up(r), KV_OK);
    struct kv_stats st;
    get_stats(r, &st);
    ck_assert_uint_eq(st.catch_ups, 1);
    expect_round(r, NULL, 0, 10, 0);
    close_db(r);
    close_db(w);
    /* No database: KV_NOTFOUND, and nothing made. */
    char none[700];
    test_path(none, sizeof none, "none");
    kv_db *x = NULL;
    ck_assert_int_eq(try_reader(none, &x), KV_NOTFOUND);
    ck_assert_ptr_null(x);
    ck_assert_int_ne(access(none, F_OK), 0);
}
END_TEST

/* ---- same process --------------------------------------------------------------------- */

START_TEST(reader_beside_writer_in_one_process)
{
    kv_db *w = open_writer();
    put_round(w, 0, 2000, 1); /* several flushes: tables and a live log */
    kv_db *r = open_reader(dbpath);
    expect_round(r, NULL, 0, 2000, 1);
    /* The writer rewrites everything and compacts it all away. */
    put_round(w, 0, 2000, 2);
    put_round(w, 2000, 2500, 2);
    compact_all(w);
    /* The reader still reads its view, from files the writer let go. */
    expect_round(r, NULL, 0, 2000, 1);
    char k[32];
    size_t kl = key(k, 2100);
    expect_absent(r, k, kl);
    kv_snapshot *snap;
    ck_assert_int_eq(kv_snapshot_new(r, &snap), KV_OK);
    kv_iter *it;
    ck_assert_int_eq(kv_iter_new(r, NULL, &it), KV_OK);
    /* Catch up: the new state, while the snapshot and iterator keep the old. */
    ck_assert_int_eq(kv_catch_up(r), KV_OK);
    expect_round(r, NULL, 0, 2500, 2);
    put_round(w, 0, 3, 3); /* in the writer's log only */
    compact_all(w);
    put_round(w, 3, 6, 3);
    ck_assert_int_eq(kv_catch_up(r), KV_OK);
    expect_round(r, NULL, 0, 6, 3);
    expect_round(r, NULL, 6, 2500, 2);
    expect_round(r, snap, 0, 2000, 1);
    void *gv;
    size_t gl;
    ck_assert_int_eq(kv_get_at(r, snap, k, kl, &gv, &gl), KV_NOTFOUND);
    uint64_t n = 0;
    for (kv_iter_seek_first(it); kv_iter_valid(it); kv_iter_next(it)) {
        size_t vl;
        const char *v = kv_iter_value(it, &vl);
        ck_assert_msg(vl > 3 && memcmp(v, "r1-", 3) == 0, "iterator left its view");
        n++;
    }
    ck_assert_int_eq(kv_iter_status(it), KV_OK);
    ck_assert_uint_eq(n, 2000);
    kv_iter_free(it);
    kv_snapshot_release(r, snap);
    /* The files the reader kept are still there while it lives; once it is
     * gone, they go at the writer's next commit. */
    struct kv_stats st;
    get_stats(w, &st);
    uint64_t live = 0;
    for (int l = 0; l < 7; l++)
        live += st.level_tables[l];
    ck_assert_uint_gt(count_ext(dbpath, ".sst"), live);
    close_db(r);
    put_round(w, 0, 10, 4);
    ck_assert_int_eq(kv_flush(w), KV_OK);
    get_stats(w, &st);
    live = 0;
    for (int l = 0; l < 7; l++)
        live += st.level_tables[l];
    ck_assert_uint_eq(count_ext(dbpath, ".sst"), live);
    close_db(w);
}
END_TEST

/* Catch-ups with no flush between them take only what the log gained
 * (readonly.c keeps the memtable): puts, deletes and range deletes in
 * small steps, each checked against a model. */
START_TEST(catch_up_takes_what_the_log_gained)
{
    kv_db *w = open_db(dbpath, NULL); /* a 4 MiB memtable: no flush here */
    put_round(w, 0, 100, 1);
    kv_db *r = open_reader(dbpath);
    static int model[600]; /* 0 absent, else the round */
    for (int i = 0; i < 100; i++)
        model[i] = 1;
    char k[32], k2[32];
    for (int step = 2; step < 40; step++) {
        int from = (step * 37) % 500, to = from + 1 + step % 60;
        put_round(w, (uint64_t)from, (uint64_t)to, (uint64_t)step);
        for (int i = from; i < to; i++)
            model[i] = step;
        if (step % 5 == 0) {
            size_t kl = key(k, (uint64_t)from + 2), k2l = key(k2, (uint64_t)from + 7);
            ck_assert_int_eq(kv_delete_range(w, k, kl, k2, k2l), KV_OK);
            for (int i = from + 2; i < from + 7; i++)
                model[i] = 0;
        }
        if (step % 7 == 0) {
            size_t kl = key(k, (uint64_t)to - 1);
            ck_assert_int_eq(kv_delete(w, k, kl), KV_OK);
            model[to - 1] = 0;
        }
        ck_assert_int_eq(kv_catch_up(r), KV_OK);
        for (int i = 0; i < 600; i++) {
            if (model[i]) {
                ck_assert_msg(read_round(r, NULL, (uint64_t)i, (uint64_t)model[i]) == 0,
                              "step %d: key %d not at round %d", step, i, model[i]);
            } else {
                size_t kl = key(k, (uint64_t)i);
                expect_absent(r, k, kl);
            }
        }
    }
    struct kv_stats st;
    get_stats(w, &st);
    ck_assert_uint_eq(st.flushes, 0); /* every catch-up above kept the memtable */
    close_db(r);
    close_db(w);
}
END_TEST

/* A reader first, then the writer opens in the same process (it shares
 * the reader's LMDB environment), then a second reader. */
START_TEST(reader_first_then_writer)
{
    kv_db *w = open_writer();
    put_round(w, 0, 300, 1);
    close_db(w);
    kv_db *r = open_reader(dbpath);
    w = open_writer();
    put_round(w, 0, 300, 2);
    compact_all(w);
    kv_db *r2 = open_reader(dbpath);
    expect_round(r, NULL, 0, 300, 1);
    expect_round(r2, NULL, 0, 300, 2);
    ck_assert_int_eq(kv_catch_up(r), KV_OK);
    expect_round(r, NULL, 0, 300, 2);
    close_db(w);
    close_db(r2);
    expect_round(r, NULL, 0, 300, 2);
    close_db(r);
    /* With no writer at all, the last state opens and reads. */
    r = open_reader(dbpath);
    expect_round(r, NULL, 0, 300, 2);
    close_db(r);
}
END_TEST

/* ---- nothing written ------------------------------------------------------------------ */

struct entry {
    char name[256];
    long long size, mtime_ns;
    unsigned mode;
};

static size_t list_dir(const char *dir, struct entry *e, size_t cap)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, "MANIFEST-lock") == 0)
            continue; /* LMDB's reader table: the one file a reader writes */
        ck_assert_uint_lt(n, cap);
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        struct stat st;
        ck_assert_int_eq(lstat(p, &st), 0);
        snprintf(e[n].name, sizeof e[n].name, "%s", de->d_name);
        e[n].size = (long long)st.st_size;
        e[n].mtime_ns = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
        e[n].mode = st.st_mode;
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            e[n].mtime_ns = 0; /* the lock file's creation may touch the directory */
        n++;
    }
    closedir(d);
    return n;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const struct entry *)a)->name, ((const struct entry *)b)->name);
}

static void same_listing(struct entry *a, size_t na, struct entry *b, size_t nb)
{
    qsort(a, na, sizeof *a, by_name);
    qsort(b, nb, sizeof *b, by_name);
    for (size_t i = 0; na != nb && i < (na > nb ? na : nb); i++)
        fprintf(stderr, "%-20s %-20s\n", i < na ? a[i].name : "", i < nb ? b[i].name : "");
    ck_assert_uint_eq(na, nb);
    for (size_t i = 0; i < na; i++) {
        ck_assert_str_eq(a[i].name, b[i].name);
        ck_assert_msg(a[i].size == b[i].size && a[i].mtime_ns == b[i].mtime_ns &&
                          a[i].mode == b[i].mode,
                      "%s changed under a read-only handle", a[i].name);
    }
}

START_TEST(a_read_only_open_writes_nothing)
{
    kv_db *w = open_writer();
    put_round(w, 0, 1500, 1);
    /* A crash's leftovers, which a writer's open would clean up: an orphan
     * table, a temporary file. A reader leaves them. */
    close_db(w);
    char p[800];
    snprintf(p, sizeof p, "%s/999999.sst", dbpath);
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs("orphan", f);
    fclose(f);
    w = open_writer(); /* removes it (no reader holds an older state) */
    ck_assert_int_ne(access(p, F_OK), 0);
    compact_all(w);              /* then the writer has nothing left to do */
    put_round(w, 1500, 1600, 1); /* in the live log, under a memtable's worth */
    f = fopen(p, "w");
    fputs("orphan", f);
    fclose(f);
    static struct entry a[512], b[512];
    size_t na = list_dir(dbpath, a, 512);
    kv_db *r = open_reader(dbpath);
    expect_round(r, NULL, 0, 1600, 1);
    ck_assert_int_eq(kv_catch_up(r), KV_OK);
    expect_round(r, NULL, 0, 1600, 1);
    kv_iter *it;
    ck_assert_int_eq(kv_iter_new(r, NULL, &it), KV_OK);
    for (kv_iter_seek_first(it); kv_iter_valid(it); kv_iter_next(it))
        ;
    kv_iter_free(it);
    close_db(r);
    size_t nb = list_dir(dbpath, b, 512);
    same_listing(a, na, b, nb);
    close_db(w);
    /* And with no writer: the same. */
    na = list_dir(dbpath, a, 512);
    r = open_reader(dbpath);
    expect_round(r, NULL, 0, 1600, 1);
    close_db(r);
    nb = list_dir(dbpath, b, 512);
    same_listing(a, na, b, nb);
}
END_TEST

/* ---- a read-only directory -------------------------------------------------------------- */

static void copy_file(const char *from, const char *to)
{
    int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_EXCL, 0644);
    ck_assert(in >= 0 && out >= 0);
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
        ck_assert_int_eq(write(out, buf, (size_t)n), n);
    close(in);
    close(out);
}

static void chmod_tree(const char *dir, mode_t fmode, mode_t dmode)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        ck_assert_int_eq(chmod(p, fmode), 0);
    }
    closedir(d);
    ck_assert_int_eq(chmod(dir, dmode), 0);
}

static void copy_db(const char *from, const char *to, int with_lock)
{
    ck_assert_int_eq(mkdir(to, 0755), 0);
    DIR *d = opendir(from);
    ck_assert_ptr_nonnull(d);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.' || strcmp(de->d_name, "LOCK") == 0 ||
            (!with_lock && strcmp(de->d_name, "MANIFEST-lock") == 0))
            continue;
        char a[1024], b[1024];
        snprintf(a, sizeof a, "%s/%s", from, de->d_name);
        snprintf(b, sizeof b, "%s/%s", to, de->d_name);
        copy_file(a, b);
    }
    closedir(d);
}

/* The reads on a copy made read-only (its files 0444, itself 0555): a
 * read-only handle opens it, reads everything, catches up, and leaves it as
 * it was. */
static void read_the_copy(const char *copy)
{
    ck_assert_msg(access(copy, W_OK) != 0, "%s: writable, the check would prove nothing", copy);
    static struct entry a[512], b[512];
    size_t na = list_dir(copy, a, 512);
    kv_db *r = open_reader(copy);
    expect_round(r, NULL, 0, 1200, 1);
    ck_assert_int_eq(kv_catch_up(r), KV_OK);
    expect_round(r, NULL, 0, 1200, 1);
    close_db(r);
    size_t nb = list_dir(copy, b, 512);
    same_listing(a, na, b, nb);
}

/* Root may write whatever the modes say: as root, the reads run in a child
 * that is `nobody` (uid and gid 65534), for whom the modes hold; the
 * directories above the copy are opened for it to pass through (0711).
 * Exit 3: it could not become nobody or reach the copy (said, and the
 * test fails only where it could and did not pass). */
static void read_the_copy_as(const char *copy)
{
    if (geteuid() != 0) {
        read_the_copy(copy);
        return;
    }
    ck_assert_int_eq(chmod(test_root, 0711), 0);
    ck_assert_int_eq(chmod(test_dir, 0711), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0 || access(copy, R_OK | X_OK) != 0)
            _exit(3);
        read_the_copy(copy);
        _exit(0);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_int_eq(chmod(test_dir, 0700), 0);
    ck_assert_int_eq(chmod(test_root, 0700), 0);
    ck_assert_msg(WIFEXITED(status), "the reader as nobody died: status %d", status);
    if (WEXITSTATUS(status) == 3)
        printf("check_readonly: a_database_in_a_read_only_directory: cannot run as nobody "
               "here (setuid, or %s out of its reach): not checked\n",
               copy);
    else
        ck_assert_msg(WEXITSTATUS(status) == 0, "the reader as nobody failed: exit %d",
                      WEXITSTATUS(status));
}

START_TEST(a_database_in_a_read_only_directory)
{
    kv_db *w = open_writer();
    put_round(w, 0, 1200, 1);
    close_db(w);
    for (int with_lock = 0; with_lock < 2; with_lock++) {
        char copy[700];
        test_path(copy, sizeof copy, with_lock ? "copy_lock" : "copy");
        copy_db(dbpath, copy, with_lock);
        chmod_tree(copy, 0444, 0555);
        read_the_copy_as(copy);
        chmod_tree(copy, 0644, 0755); /* for the teardown */
    }
}
END_TEST

/* ---- processes ---------------------------------------------------------------------------- */

static uint64_t live_tables(kv_db *w)
{
    struct kv_stats st;
    get_stats(w, &st);
    uint64_t live = 0;
    for (int l = 0; l < 7; l++)
        live += st.level_tables[l];
    return live;
}

/* A reader process killed while it pins a state: its slot is cleared at
 * the writer's next look (mdb_reader_check), and the files it kept go. */
START_TEST(a_killed_reader_releases_its_files)
{
    kv_db *w = open_writer();
    put_round(w, 0, 1500, 1);
    compact_all(w);
    int ready[2];
    ck_assert_int_eq(pipe(ready), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        kv_db *r = NULL;
        char c = try_reader(dbpath, &r) == KV_OK ? 'y' : 'n';
        if (write(ready[1], &c, 1) != 1)
            _exit(1);
        pause(); /* killed here, pin and all */
        _exit(0);
    }
    char c = 0;
    ck_assert_int_eq(read(ready[0], &c, 1), 1);
    ck_assert_int_eq(c, 'y');
    put_round(w, 0, 1500, 2);
    compact_all(w);
    ck_assert_uint_gt(count_ext(dbpath, ".sst"), live_tables(w)); /* kept for the reader */
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    put_round(w, 0, 10, 3);
    ck_assert_int_eq(kv_flush(w), KV_OK); /* a commit: the deferred files are looked at */
    ck_assert_uint_eq(count_ext(dbpath, ".sst"), live_tables(w));
    close(ready[0]);
    close(ready[1]);
    close_db(w);
}
END_TEST

/* What the writer process tells the readers, in shared memory. */
struct shared {
    _Atomic uint64_t acked; /* keys [0, acked) written, and keys [0, acked - LAG) rewritten */
    _Atomic int done;
};

#define LAG 300
#define WRITER_KEYS 6000

/* Key i is written in round 1 when i is acknowledged, and rewritten in
 * round 2 once i + LAG is: every kv_put was acknowledged before acked
 * moved past it. */
static int writer_process(struct shared *sh)
{
    kv_options o;
    small_options(&o);
    kv_db *w = NULL;
    if (kv_open(dbpath, &o, &w) != KV_OK)
        return 10;
    char k[32], v[200];
    for (uint64_t i = 0; i < WRITER_KEYS; i++) {
        size_t kl = key(k, i), vl = value(v, i, 1);
        if (kv_put(w, k, kl, v, vl) != KV_OK)
            return 11;
        if (i >= LAG) {
            kl = key(k, i - LAG);
            vl = value(v, i - LAG, 2);
            if (kv_put(w, k, kl, v, vl) != KV_OK)
                return 12;
        }
        atomic_store(&sh->acked, i + 1);
        if (i % 1500 == 1499 && kv_compact_range(w, NULL, 0, NULL, 0) != KV_OK)
            return 13;
    }
    atomic_store(&sh->done, 1);
    return kv_close(w) == KV_OK ? 0 : 14;
}

/* Reads keys [0, acked) where acked was loaded before the catch-up (all of
 * them must be there, with the newest value acknowledged or a newer one);
 * every few rounds reopens. Nonzero: what went wrong, printed. */
static int reader_process(struct shared *sh, unsigned seed)
{
    kv_db *r = NULL;
    if (try_reader(dbpath, &r) != KV_OK) {
        fprintf(stderr, "reader: open: %s\n", kv_error_text());
        return 20;
    }
    uint64_t seen = 0; /* keys [0, seen) were read before */
    for (int round = 0;; round++) {
        int last = atomic_load(&sh->done);
        uint64_t acked = atomic_load(&sh->acked);
        int rc = round % 7 == 6 ? (kv_close(r), r = NULL, try_reader(dbpath, &r)) : kv_catch_up(r);
        if (rc != KV_OK) {
            fprintf(stderr, "reader: catch-up/open: %s\n", kv_error_text());
            return 21;
        }
        /* Every key acknowledged, read at a few places and the newest end. */
        for (int n = 0; n < 300; n++) {
            uint64_t i = n < 100 ? acked - 1 - (uint64_t)n % (acked ? acked : 1)
                                 : (uint64_t)rand_r(&seed) % (acked ? acked : 1);
            if (!acked)
                break;
            int a = read_round(r, NULL, i, 1), b = read_round(r, NULL, i, 2);
            int must2 = i + LAG < acked;
            if (b == 0 || (a == 0 && !must2))
                continue;
            fprintf(stderr, "reader: key %llu of %llu acknowledged: round1 %d round2 %d (%s)\n",
                    (unsigned long long)i, (unsigned long long)acked, a, b, kv_error_text());
            return 22;
        }
        /* A key once seen never disappears. */
        for (uint64_t i = 0; i < seen; i += 97) {
            int a = read_round(r, NULL, i, 1), b = read_round(r, NULL, i, 2);
            if (a != 0 && b != 0) {
                fprintf(stderr, "reader: key %llu seen before is gone\n", (unsigned long long)i);
                return 23;
            }
        }
        if (acked > seen)
            seen = acked;
        if (last) {
            printf("reader %u: %d catch-ups and reopens\n", seed, round + 1);
            fflush(stdout);
            break;
        }
    }
    kv_close(r);
    return 0;
}

START_TEST(readers_in_other_processes_follow_a_writer)
{
    /* The database exists before the readers start. */
    kv_db *w = open_writer();
    put_round(w, 0, 1, 1);
    close_db(w);
    struct shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                             -1, 0);
    ck_assert_ptr_ne(sh, MAP_FAILED);
    atomic_store(&sh->acked, 0);
    atomic_store(&sh->done, 0);
    pid_t pids[3];
    for (int p = 0; p < 3; p++) {
        pids[p] = fork();
        ck_assert_int_ge(pids[p], 0);
        if (pids[p] == 0)
            _exit(p == 0 ? writer_process(sh) : reader_process(sh, (unsigned)p * 7919));
    }
    for (int p = 0; p < 3; p++) {
        int status;
        ck_assert_int_eq(waitpid(pids[p], &status, 0), pids[p]);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s process: status %d",
                      p ? "reader" : "writer", status);
    }
    ck_assert_uint_eq(atomic_load(&sh->acked), WRITER_KEYS);
    munmap(sh, sizeof *sh);
    /* Everything there at the end, for a fresh reader. */
    kv_db *r = open_reader(dbpath);
    expect_round(r, NULL, 0, WRITER_KEYS - LAG, 2);
    expect_round(r, NULL, WRITER_KEYS - LAG, WRITER_KEYS, 1);
    close_db(r);
}
END_TEST

/* The manifest's map grows (the writer's commits while a pin keeps LMDB
 * from reusing pages) past what a reader process mapped at its open: its
 * next pin adopts the new size (MDB_MAP_RESIZED), its old pin still ends
 * cleanly. */
START_TEST(a_reader_follows_the_manifest_map_growing)
{
    const kv_manifest_state fresh = {1, 1000000, 10, 1, 42};
    kv_manifest *w;
    ck_assert_int_eq(kv_manifest_open(test_dir, 1, &fresh, &w), KV_OK);
    int up[2], down[2];
    ck_assert_int_eq(pipe(up), 0);
    ck_assert_int_eq(pipe(down), 0);
    enum { COMMITS = 60, PER = 100, KEY = 2000 };
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        kv_manifest *r;
        kv_manifest_pin *p1, *p2;
        kv_manifest_state st;
        kv_table_meta *t;
        kv_manifest_blob *b;
        size_t nt, nb;
        char c = 'y';
        if (kv_manifest_open_ro(test_dir, &r) != KV_OK ||
            kv_manifest_pin_load(r, &p1, &st, &t, &nt, &b, &nb) != KV_OK || nt != 0)
            c = 'n';
        if (write(up[1], &c, 1) != 1 || read(down[0], &c, 1) != 1 || c != 'y')
            _exit(1);
        int rc = kv_manifest_pin_load(r, &p2, &st, &t, &nt, &b, &nb);
        if (rc != KV_OK || nt != COMMITS * PER) {
            fprintf(stderr, "child: %d, %zu tables: %s\n", rc, nt, kv_error_text());
            _exit(2);
        }
        kv_manifest_free_tables(t, nt);
        free(b);
        kv_manifest_pin_unref(p1);
        kv_manifest_pin_unref(p2);
        kv_manifest_close(r);
        _exit(0);
    }
    char c = 0;
    ck_assert_int_eq(read(up[0], &c, 1), 1);
    ck_assert_int_eq(c, 'y');
    static uint8_t lo[KEY], hi[KEY];
    memset(lo, 'a', KEY);
    memset(hi, 'b', KEY);
    static kv_table_meta add[PER];
    for (int i = 0; i < COMMITS; i++) {
        for (int j = 0; j < PER; j++) {
            memset(&add[j], 0, sizeof add[j]);
            add[j].number = (uint64_t)(i * PER + j + 1);
            add[j].level = 6;
            add[j].smallest = lo;
            add[j].largest = hi;
            add[j].smallest_len = add[j].largest_len = KEY;
            add[j].min_seq = add[j].max_seq = 1;
        }
        ck_assert_int_eq(kv_manifest_apply(w, &fresh, NULL, 0, add, PER), KV_OK);
    }
    struct stat st;
    char mp[700];
    test_path(mp, sizeof mp, "MANIFEST");
    ck_assert_int_eq(stat(mp, &st), 0);
    ck_assert_int_gt(st.st_size, 16 << 20); /* past the first map */
    c = 'y';
    ck_assert_int_eq(write(down[1], &c, 1), 1);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "reader: status %d", status);
    /* And in this process, where the reader shares the writer's environment:
     * the map grows under its pin. */
    kv_manifest *r;
    kv_manifest_pin *p1, *p2;
    kv_manifest_state rs;
    kv_table_meta *t;
    kv_manifest_blob *b;
    size_t nt, nb;
    ck_assert_int_eq(kv_manifest_open_ro(test_dir, &r), KV_OK);
    ck_assert_int_eq(kv_manifest_pin_load(r, &p1, &rs, &t, &nt, &b, &nb), KV_OK);
    kv_manifest_free_tables(t, nt);
    free(b);
    for (int i = COMMITS; i < 2 * COMMITS; i++) {
        for (int j = 0; j < PER; j++)
            add[j].number = (uint64_t)(i * PER + j + 1);
        ck_assert_int_eq(kv_manifest_apply(w, &fresh, NULL, 0, add, PER), KV_OK);
    }
    ck_assert_int_eq(kv_manifest_pin_load(r, &p2, &rs, &t, &nt, &b, &nb), KV_OK);
    ck_assert_uint_eq(nt, 2 * COMMITS * PER);
    ck_assert_uint_lt(kv_manifest_pin_txn(p1), kv_manifest_pin_txn(p2));
    kv_manifest_free_tables(t, nt);
    free(b);
    kv_manifest_pin_unref(p1);
    kv_manifest_pin_unref(p2);
    kv_manifest_close(r);
    kv_manifest_close(w);
    close(up[0]);
    close(up[1]);
    close(down[0]);
    close(down[1]);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("readonly");
    TCase *tc = test_tcase(s, "readonly", 120, 0);
    tcase_add_checked_fixture(tc, setup_files, test_teardown);
    tcase_add_test(tc, writes_through_a_reader_are_einval);
    tcase_add_test(tc, reader_beside_writer_in_one_process);
    tcase_add_test(tc, catch_up_takes_what_the_log_gained);
    tcase_add_test(tc, reader_first_then_writer);
    tcase_add_test(tc, a_read_only_open_writes_nothing);
    tcase_add_test(tc, a_database_in_a_read_only_directory);
    tcase_add_test(tc, readers_in_other_processes_follow_a_writer);
    tcase_add_test(tc, a_killed_reader_releases_its_files);
    tcase_add_test(tc, a_reader_follows_the_manifest_map_growing);
    return s;
}
