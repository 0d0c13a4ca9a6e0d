/* check_checkpoint.c - kv_checkpoint (kv.h, doc/operations.md):
 *
 *  - under writers: three writer threads put, delete, merge, range-delete
 *    and write batches on keys of their own (values from 16 bytes to 4 KiB,
 *    the large ones in blob files), a maintenance thread flushes and
 *    compacts, and the main thread takes checkpoints. Each writer counts
 *    its operations as started before each call and acknowledged after it;
 *    a checkpoint must hold, for every writer, exactly the state after some
 *    prefix of its operations that includes all acknowledged before the
 *    call and none started after it. Afterwards the source reopens with
 *    exactly what was acknowledged (threads tcase, LABELS concurrency);
 *  - to another file system (tmpfs, /dev/shm): every file is a copy, and
 *    the checkpoint opens, reads, compacts and reopens;
 *  - a dir that exists, or whose parent does not: KV_EINVAL, nothing
 *    written, nothing counted;
 *  - on the same file system the tables and blob files are links, and the
 *    checkpoint outlives the source's kv_destroy;
 *  - the manifest's other records go along: a comparator and a merge
 *    operator name the checkpoint as they name the source;
 *  - a read-only handle's checkpoint holds exactly what that handle sees
 *    (its open, then its kv_catch_up), tables and replayed log alike,
 *    while the writer beside it writes and compacts on;
 *  - a checkpoint that fails (a write, read or sync of the file layer, or
 *    the manifest's commit, failed on purpose: kv_testing) returns the
 *    error with its text and leaves no directory; the source is untouched
 *    and the next checkpoint works. */
#define _XOPEN_SOURCE 700
#define _DEFAULT_SOURCE /* dirent */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <kv/kv.h>

#include "fixture.h"
#include "testing.h" /* kv_testing: fault injection */

#define WRITERS 3
#define KEYS 160   /* plain keys per writer: "w<t>/<4 digits>" */
#define MKEYS 16   /* merge counters per writer: "m<t>/<4 digits>" */
#define MAX_ENTS 5 /* per operation */
#define CHECKPOINTS 10
#define VAL_CAP 4096
#define MIN_BLOB 256

static void opts_small(kv_options *o)
{
    kv_options_init(o);
    o->write_buffer_size = 64u << 10;
    o->target_file_size = 64u << 10;
    o->max_bytes_for_level_base = 256u << 10;
    o->l0_compaction_trigger = 2;
    o->min_blob_size = MIN_BLOB;
    o->blob_file_size = 64u << 10;
    o->blob_gc_threshold = 0.2;
    o->merge_operator = kv_merge_uint64_add();
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- the workload: a pure function of the writer and the op number ---------------------- */

enum { E_PUT, E_DEL, E_MERGE, E_RANGE };

struct ent {
    int kind;
    uint32_t idx, end; /* E_RANGE: [idx, end) */
    uint64_t d;        /* E_MERGE: the addend */
    size_t len;        /* E_PUT: the value's length */
};

struct op {
    int batch; /* 1: one kv_write of all entries */
    int n;
    struct ent e[MAX_ENTS];
};

static void gen_ent(uint64_t *r, struct ent *e, int in_batch)
{
    *r = splitmix(*r);
    unsigned k = (unsigned)(*r % 20);
    e->idx = (uint32_t)((*r >> 8) % KEYS);
    e->len = 16 + (size_t)((*r >> 24) % 80);
    if (k < 9) {
        e->kind = E_PUT;
    } else if (k < 12) {
        e->kind = E_DEL;
    } else if (k < 16) {
        e->kind = E_MERGE;
        e->idx = (uint32_t)((*r >> 8) % MKEYS);
        e->d = 1 + (*r >> 40) % 5;
    } else if (k < 18 || in_batch) {
        e->kind = E_PUT;
        e->len = 600 + (size_t)((*r >> 24) % (VAL_CAP - 600)); /* a blob file's */
    } else {
        e->kind = E_RANGE;
        e->end = e->idx + 1 + (uint32_t)((*r >> 40) % 12);
        if (e->end > KEYS)
            e->end = KEYS;
    }
}

static void gen_op(unsigned t, uint64_t n, struct op *op)
{
    uint64_t r = splitmix(0xC4EC9017ull ^ ((uint64_t)(t + 1) << 40) ^ n);
    op->batch = r % 10 == 0;
    op->n = op->batch ? 2 + (int)((r >> 8) % (MAX_ENTS - 1)) : 1;
    for (int i = 0; i < op->n; i++)
        gen_ent(&r, &op->e[i], 0);
}

static size_t wkey(unsigned t, uint32_t i, char *k)
{
    return (size_t)sprintf(k, "w%u/%04u", t, i);
}

static size_t mkey(unsigned t, uint32_t i, char *k)
{
    return (size_t)sprintf(k, "m%u/%04u", t, i);
}

/* Entry j of op n of writer t: its value, len bytes. */
static void value_make(unsigned t, uint64_t n, int j, size_t len, uint8_t *v)
{
    int h = snprintf((char *)v, len, "t%u n%llu j%d ", t, (unsigned long long)n, j);
    for (size_t i = (size_t)h < len ? (size_t)h : len; i < len; i++)
        v[i] = (uint8_t)('a' + (t * 7 + n + i) % 26);
}

static void le64(uint64_t x, uint8_t b[8])
{
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(x >> (8 * i));
}

static uint64_t get_le64(const uint8_t *b)
{
    uint64_t x = 0;
    for (int i = 7; i >= 0; i--)
        x = x << 8 | b[i];
    return x;
}

/* ---- one writer's keys: the model, or what a database holds ------------------------------ */

struct wstate {
    uint64_t vop[KEYS]; /* the put's op number + 1; 0: absent */
    int vent[KEYS];     /* its entry */
    size_t vlen[KEYS];
    uint64_t sum[MKEYS]; /* counters; present when mhave */
    int mhave[MKEYS];
};

static void state_apply(struct wstate *s, uint64_t n, const struct op *op)
{
    for (int j = 0; j < op->n; j++) {
        const struct ent *e = &op->e[j];
        switch (e->kind) {
        case E_PUT:
            s->vop[e->idx] = n + 1;
            s->vent[e->idx] = j;
            s->vlen[e->idx] = e->len;
            break;
        case E_DEL: s->vop[e->idx] = 0; break;
        case E_MERGE:
            s->sum[e->idx] = (s->mhave[e->idx] ? s->sum[e->idx] : 0) + e->d;
            s->mhave[e->idx] = 1;
            break;
        case E_RANGE:
            for (uint32_t i = e->idx; i < e->end; i++)
                s->vop[i] = 0;
            break;
        }
    }
}

/* Key i of the state (i < KEYS: plain; else counter i - KEYS) in a and b alike. */
static int key_eq(const struct wstate *a, const struct wstate *b, uint32_t i)
{
    if (i < KEYS)
        return a->vop[i] == b->vop[i] &&
               (!a->vop[i] || (a->vent[i] == b->vent[i] && a->vlen[i] == b->vlen[i]));
    i -= KEYS;
    return a->mhave[i] == b->mhave[i] && (!a->mhave[i] || a->sum[i] == b->sum[i]);
}

/* Reads every key of db into st[WRITERS] with one scan, checking each
 * value's bytes; fails on a key or value no writer could have written. */
static void read_states(kv_db *db, struct wstate *st)
{
    memset(st, 0, WRITERS * sizeof *st);
    kv_iter *it;
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    uint8_t *want = malloc(VAL_CAP);
    ck_assert_ptr_nonnull(want);
    for (kv_iter_seek_first(it); kv_iter_valid(it); kv_iter_next(it)) {
        size_t kl, vl;
        const char *k = kv_iter_key(it, &kl);
        const uint8_t *v = kv_iter_value(it, &vl);
        char kb[32];
        ck_assert_uint_lt(kl, sizeof kb);
        memcpy(kb, k, kl);
        kb[kl] = 0;
        unsigned t, i;
        char c;
        ck_assert_msg(sscanf(kb, "%c%u/%u", &c, &t, &i) == 3 && t < WRITERS, "stray key %s", kb);
        if (c == 'm') {
            ck_assert_uint_lt(i, MKEYS);
            ck_assert_uint_eq(vl, 8);
            st[t].sum[i] = get_le64(v);
            st[t].mhave[i] = 1;
            continue;
        }
        ck_assert_msg(c == 'w' && i < KEYS, "stray key %s", kb);
        unsigned long long n;
        int j;
        ck_assert_msg(sscanf((const char *)v, "t%*u n%llu j%d ", &n, &j) == 2,
                      "%s: a value no writer wrote", kb);
        value_make(t, n, j, vl, want);
        ck_assert_msg(memcmp(v, want, vl) == 0, "%s: value of op %llu damaged", kb, n);
        st[t].vop[i] = n + 1;
        st[t].vent[i] = j;
        st[t].vlen[i] = vl;
    }
    ck_assert_int_eq(kv_iter_status(it), KV_OK);
    kv_iter_free(it);
    free(want);
}

/* The op count c in [lo, hi] such that writer t's keys in `have` are the
 * state after its ops 0 .. c-1; -1 when there is none. */
static int64_t find_cut(unsigned t, const struct wstate *have, uint64_t lo, uint64_t hi)
{
    struct wstate *m = calloc(1, sizeof *m);
    ck_assert_ptr_nonnull(m);
    struct op op;
    for (uint64_t n = 0; n < lo; n++) {
        gen_op(t, n, &op);
        state_apply(m, n, &op);
    }
    int64_t miss = 0;
    for (uint32_t i = 0; i < KEYS + MKEYS; i++)
        miss += !key_eq(m, have, i);
    int64_t found = -1;
    for (uint64_t c = lo;; c++) {
        if (miss == 0) {
            found = (int64_t)c;
            break;
        }
        if (c == hi)
            break;
        gen_op(t, c, &op);
        uint32_t touched[MAX_ENTS * KEYS];
        size_t nt = 0;
        for (int j = 0; j < op.n; j++) {
            const struct ent *e = &op.e[j];
            uint32_t a = e->kind == E_MERGE ? KEYS + e->idx : e->idx;
            uint32_t b = e->kind == E_RANGE ? e->end : a + 1;
            for (uint32_t i = a; i < b; i++) {
                size_t x = 0;
                while (x < nt && touched[x] != i)
                    x++;
                if (x == nt)
                    touched[nt++] = i;
            }
        }
        for (size_t x = 0; x < nt; x++)
            miss -= !key_eq(m, have, touched[x]);
        state_apply(m, c, &op);
        for (size_t x = 0; x < nt; x++)
            miss += !key_eq(m, have, touched[x]);
    }
    free(m);
    return found;
}

/* ---- the threads ---------------------------------------------------------------------- */

static struct {
    kv_db *db;
    atomic_ullong started[WRITERS], acked[WRITERS];
    atomic_int stop, failed, maint_rounds;
    pthread_mutex_t why_lock;
    char why[600];
} sh;

static void th_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void th_fail(const char *fmt, ...)
{
    pthread_mutex_lock(&sh.why_lock);
    if (!atomic_load(&sh.failed)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(sh.why, sizeof sh.why, fmt, ap);
        va_end(ap);
        atomic_store(&sh.failed, 1);
    }
    pthread_mutex_unlock(&sh.why_lock);
}

static int op_run(kv_db *db, kv_batch *b, unsigned t, uint64_t n, const struct op *op, uint8_t *val)
{
    char k[32], k2[32];
    uint8_t d[8];
    if (op->batch)
        kv_batch_clear(b);
    for (int j = 0; j < op->n; j++) {
        const struct ent *e = &op->e[j];
        int rc = KV_OK;
        size_t kl;
        switch (e->kind) {
        case E_PUT:
            kl = wkey(t, e->idx, k);
            value_make(t, n, j, e->len, val);
            rc = op->batch ? kv_batch_put(b, k, kl, val, e->len) : kv_put(db, k, kl, val, e->len);
            break;
        case E_DEL:
            kl = wkey(t, e->idx, k);
            rc = op->batch ? kv_batch_delete(b, k, kl) : kv_delete(db, k, kl);
            break;
        case E_MERGE:
            kl = mkey(t, e->idx, k);
            le64(e->d, d);
            rc = op->batch ? kv_batch_merge(b, k, kl, d, 8) : kv_merge(db, k, kl, d, 8);
            break;
        case E_RANGE:
            kl = wkey(t, e->idx, k);
            size_t kl2 = wkey(t, e->end, k2);
            rc = op->batch ? kv_batch_delete_range(b, k, kl, k2, kl2)
                           : kv_delete_range(db, k, kl, k2, kl2);
            break;
        }
        if (rc != KV_OK)
            return rc;
    }
    return op->batch ? kv_write(db, b) : KV_OK;
}

static void *writer_main(void *arg)
{
    unsigned t = (unsigned)(uintptr_t)arg;
    kv_batch *b = NULL;
    uint8_t *val = malloc(VAL_CAP);
    if (kv_batch_new(&b) != KV_OK || !val) {
        th_fail("writer %u: out of memory", t);
        free(val);
        return NULL;
    }
    for (uint64_t n = 0; !atomic_load(&sh.stop) && !atomic_load(&sh.failed); n++) {
        struct op op;
        gen_op(t, n, &op);
        atomic_store(&sh.started[t], n + 1);
        int rc = op_run(sh.db, b, t, n, &op, val);
        if (rc != KV_OK) {
            th_fail("writer %u op %llu: %s (%s)", t, (unsigned long long)n, kv_strerror(rc),
                    kv_error_text());
            break;
        }
        atomic_store(&sh.acked[t], n + 1);
    }
    kv_batch_free(b);
    free(val);
    return NULL;
}

static void *maint_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&sh.stop) && !atomic_load(&sh.failed)) {
        int rc = atomic_load(&sh.maint_rounds) % 2 ? kv_flush(sh.db)
                                                   : kv_compact_range(sh.db, NULL, 0, NULL, 0);
        if (rc != KV_OK) {
            th_fail("maintenance: %s (%s)", kv_strerror(rc), kv_error_text());
            break;
        }
        atomic_fetch_add(&sh.maint_rounds, 1);
        sleep_ms(20);
    }
    return NULL;
}

/* Files in dir whose names end in ext; *links gets how many of them have
 * another link (the source's). */
static int count_files(const char *dir, const char *ext, int *links)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    *links = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name), el = strlen(ext);
        if (e->d_name[0] == '.' || l <= el || strcmp(e->d_name + l - el, ext) != 0)
            continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        ck_assert_int_eq(stat(p, &st), 0);
        n++;
        *links += st.st_nlink > 1;
    }
    closedir(d);
    return n;
}

START_TEST(checkpoint_under_writers)
{
    kv_options o;
    opts_small(&o);
    memset(&sh, 0, sizeof sh);
    pthread_mutex_init(&sh.why_lock, NULL);
    sh.db = open_db("src", &o);
    pthread_t w[WRITERS], m;
    for (unsigned t = 0; t < WRITERS; t++)
        ck_assert_int_eq(pthread_create(&w[t], NULL, writer_main, (void *)(uintptr_t)t), 0);
    ck_assert_int_eq(pthread_create(&m, NULL, maint_main, NULL), 0);
    uint64_t lo[CHECKPOINTS][WRITERS], hi[CHECKPOINTS][WRITERS];
    char dirs[CHECKPOINTS][4096];
    for (int c = 0; c < CHECKPOINTS && !atomic_load(&sh.failed); c++) {
        sleep_ms(80);
        char name[16];
        snprintf(name, sizeof name, "cp%d", c);
        test_path(dirs[c], sizeof dirs[c], name);
        for (unsigned t = 0; t < WRITERS; t++)
            lo[c][t] = atomic_load(&sh.acked[t]);
        int rc = kv_checkpoint(sh.db, dirs[c]);
        for (unsigned t = 0; t < WRITERS; t++)
            hi[c][t] = atomic_load(&sh.started[t]);
        ck_assert_msg(rc == KV_OK, "checkpoint %d: %s (%s)", c, kv_strerror(rc), kv_error_text());
    }
    atomic_store(&sh.stop, 1);
    for (unsigned t = 0; t < WRITERS; t++)
        pthread_join(w[t], NULL);
    pthread_join(m, NULL);
    ck_assert_msg(!atomic_load(&sh.failed), "%s", sh.why);
    struct kv_stats s;
    get_stats(sh.db, &s);
    ck_assert_uint_eq(s.checkpoints, CHECKPOINTS);
    uint64_t final[WRITERS];
    for (unsigned t = 0; t < WRITERS; t++)
        final[t] = atomic_load(&sh.acked[t]);
    close_db(sh.db);

    struct wstate *have = malloc(WRITERS * sizeof *have);
    ck_assert_ptr_nonnull(have);
    int blobs = 0;
    for (int c = 0; c < CHECKPOINTS; c++) {
        int links;
        blobs += count_files(dirs[c], ".blob", &links);
        kv_db *db = open_db(dirs[c], &o);
        read_states(db, have);
        for (unsigned t = 0; t < WRITERS; t++) {
            int64_t cut = find_cut(t, &have[t], lo[c][t], hi[c][t]);
            ck_assert_msg(cut >= 0,
                          "checkpoint %d, writer %u: no cut between op %llu (acknowledged "
                          "before) and %llu (started after)",
                          c, t, (unsigned long long)lo[c][t], (unsigned long long)hi[c][t]);
        }
        close_db(db);
    }
    ck_assert_msg(blobs > 0, "no checkpoint held a blob file");
    if (getenv("CHECK_CHECKPOINT_VERBOSE"))
        printf("checkpoint_under_writers: ops %llu %llu %llu, maintenance rounds %d, blob "
               "files %d\n",
               (unsigned long long) final[0], (unsigned long long) final[1],
               (unsigned long long) final[2], atomic_load(&sh.maint_rounds), blobs);
    /* The source: everything acknowledged, nothing else. */
    kv_db *db = open_db("src", &o);
    read_states(db, have);
    for (unsigned t = 0; t < WRITERS; t++)
        ck_assert_int_eq(find_cut(t, &have[t], final[t], final[t]), (int64_t) final[t]);
    close_db(db);
    free(have);
    pthread_mutex_destroy(&sh.why_lock);
}
END_TEST

/* ---- single-threaded cases --------------------------------------------------------------- */

/* n keys "k<6 digits>", one in eight with a blob-sized value; the first
 * `flushed` of them flushed to tables, the rest in the memtable and log. */
static void fill(kv_db *db, int n, int flushed)
{
    uint8_t v[2048];
    for (int i = 0; i < n; i++) {
        char k[16];
        size_t kl = key_of(k, sizeof k, "k", 6, (uint64_t)i);
        size_t vl = i % 8 == 0 ? 1000 + (size_t)i % 1000 : 20 + (size_t)i % 50;
        value_make(0, (uint64_t)i, 0, vl, v);
        put_kv(db, k, kl, v, vl);
        if (i + 1 == flushed)
            ck_assert_int_eq(kv_flush(db), KV_OK);
    }
}

static void expect_fill(kv_db *db, int n)
{
    uint8_t v[2048];
    for (int i = 0; i < n; i++) {
        char k[16];
        size_t kl = key_of(k, sizeof k, "k", 6, (uint64_t)i);
        size_t vl = i % 8 == 0 ? 1000 + (size_t)i % 1000 : 20 + (size_t)i % 50;
        value_make(0, (uint64_t)i, 0, vl, v);
        expect_value(db, k, kl, v, vl);
    }
    char k[16];
    size_t kl = key_of(k, sizeof k, "k", 6, (uint64_t)n);
    expect_absent(db, k, kl);
    kv_iter *it;
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    int count = 0;
    for (kv_iter_seek_first(it); kv_iter_valid(it); kv_iter_next(it))
        count++;
    ck_assert_int_eq(kv_iter_status(it), KV_OK);
    kv_iter_free(it);
    ck_assert_int_eq(count, n);
}

START_TEST(checkpoint_to_tmpfs_is_a_copy)
{
    struct stat shm, here;
    if (stat("/dev/shm", &shm) != 0 || !S_ISDIR(shm.st_mode) || stat(test_dir, &here) != 0 ||
        shm.st_dev == here.st_dev) {
        printf("checkpoint_to_tmpfs_is_a_copy: skipped (no /dev/shm on another file system)\n");
        return;
    }
    kv_options o;
    opts_small(&o);
    kv_db *db = open_db("src", &o);
    fill(db, 3000, 2400);
    char dir[256];
    snprintf(dir, sizeof dir, "/dev/shm/check_checkpoint.%ld", (long)getpid());
    remove_tree(dir);
    int rc = kv_checkpoint(db, dir);
    ck_assert_msg(rc == KV_OK, "%s", kv_error_text());
    int links, n = count_files(dir, ".sst", &links);
    ck_assert_int_gt(n, 0);
    ck_assert_int_eq(links, 0);
    ck_assert_int_gt(count_files(dir, ".blob", &links), 0);
    ck_assert_int_eq(links, 0);
    ck_assert_int_gt(count_files(dir, ".log", &links), 0);
    put_str(db, "after", "the checkpoint"); /* not in it */
    close_db(db);
    kv_db *cp = open_db(dir, &o);
    expect_fill(cp, 3000);
    compact_all(cp); /* every table and blob file read and rewritten */
    cp = reopen_db(cp, dir, &o);
    expect_fill(cp, 3000);
    close_db(cp);
    remove_tree(dir);
}
END_TEST

START_TEST(checkpoint_dir_must_not_exist)
{
    kv_options o;
    opts_small(&o);
    kv_db *db = open_db("src", &o);
    fill(db, 200, 100);
    char dir[2048], file[4096], deep[4096];
    test_path(dir, sizeof dir, "there");
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    snprintf(file, sizeof file, "%s/keep", dir);
    FILE *f = fopen(file, "w");
    ck_assert_ptr_nonnull(f);
    fputs("mine", f);
    fclose(f);
    ck_assert_int_eq(kv_checkpoint(db, dir), KV_EINVAL);
    ck_assert_ptr_nonnull(strstr(kv_error_text(), "exists"));
    int links;
    ck_assert_int_eq(count_files(dir, "", &links), 1);    /* "keep" alone */
    ck_assert_int_eq(kv_checkpoint(db, file), KV_EINVAL); /* a file is there */
    snprintf(deep, sizeof deep, "%s/no/such", test_dir);
    ck_assert_int_eq(kv_checkpoint(db, deep), KV_EINVAL);
    snprintf(deep, sizeof deep, "%s/no", test_dir);
    struct stat st;
    ck_assert_int_ne(stat(deep, &st), 0);
    ck_assert_int_eq(kv_checkpoint(NULL, dir), KV_EINVAL);
    ck_assert_int_eq(kv_checkpoint(db, NULL), KV_EINVAL);
    ck_assert_int_eq(kv_checkpoint(db, ""), KV_EINVAL);
    struct kv_stats s;
    get_stats(db, &s);
    ck_assert_uint_eq(s.checkpoints, 0);
    expect_fill(db, 200);
    close_db(db);
}
END_TEST

START_TEST(checkpoint_outlives_source)
{
    kv_options o;
    opts_small(&o);
    /* One table, which no compaction replaces before the links are counted. */
    o.write_buffer_size = 4u << 20;
    o.idle_compaction_ms = 0;
    kv_db *db = open_db("src", &o);
    fill(db, 2000, 1500);
    char dir[4096], src[4096];
    test_path(dir, sizeof dir, "cp");
    test_path(src, sizeof src, "src");
    ck_assert_int_eq(kv_checkpoint(db, dir), KV_OK);
    int links;
    ck_assert_int_gt(count_files(dir, ".sst", &links), 0);
    ck_assert_int_gt(links, 0);     /* same file system: linked */
    for (int i = 0; i < 500; i++) { /* the source goes on, and compacts */
        char k[16];
        size_t kl = key_of(k, sizeof k, "k", 6, (uint64_t)i);
        ck_assert_int_eq(kv_delete(db, k, kl), KV_OK);
    }
    compact_all(db);
    struct kv_stats s;
    get_stats(db, &s);
    ck_assert_uint_eq(s.checkpoints, 1);
    close_db(db);
    ck_assert_int_eq(kv_destroy(src), KV_OK);
    kv_db *cp = open_db(dir, &o);
    expect_fill(cp, 2000);
    close_db(cp);
}
END_TEST

static int reverse_cmp(void *ctx, const void *a, size_t alen, const void *b, size_t blen)
{
    (void)ctx;
    size_t n = alen < blen ? alen : blen;
    int c = memcmp(a, b, n);
    if (c == 0)
        c = alen < blen ? -1 : alen > blen;
    return -c;
}

static const kv_comparator reverse = {"check_checkpoint.reverse", reverse_cmp, NULL};

START_TEST(checkpoint_keeps_the_manifest_records)
{
    kv_options o;
    opts_small(&o);
    o.comparator = &reverse;
    o.filter_keyed_hash = 1;
    kv_db *db = open_db("src", &o);
    uint8_t one[8];
    le64(1, one);
    for (int i = 0; i < 300; i++) {
        char k[16];
        size_t kl = key_of(k, sizeof k, "c", 4, (uint64_t)(i % 10));
        ck_assert_int_eq(kv_merge(db, k, kl, one, 8), KV_OK);
        if (i == 150)
            ck_assert_int_eq(kv_flush(db), KV_OK);
    }
    /* All in tables written under the source's secret: the checkpoint's
     * open writes none of its own. */
    ck_assert_int_eq(kv_flush(db), KV_OK);
    char dir[4096];
    test_path(dir, sizeof dir, "cp");
    ck_assert_int_eq(kv_checkpoint(db, dir), KV_OK);
    close_db(db);
    kv_options plain;
    opts_small(&plain);
    kv_db *bad = NULL;
    ck_assert_int_eq(kv_open(dir, &plain, &bad), KV_EINVAL); /* another key order */
    ck_assert_ptr_null(bad);
    kv_merge_operator other = *kv_merge_uint64_add(); /* another merge operator's name */
    other.name = "check_checkpoint.other";
    kv_options renamed = o;
    renamed.merge_operator = &other;
    ck_assert_int_eq(kv_open(dir, &renamed, &bad), KV_EINVAL);
    ck_assert_ptr_null(bad);
    kv_db *cp = open_db(dir, &o);
    kv_iter *it;
    ck_assert_int_eq(kv_iter_new(cp, NULL, &it), KV_OK);
    int n = 0;
    for (kv_iter_seek_first(it); kv_iter_valid(it); kv_iter_next(it), n++) {
        size_t kl, vl;
        const char *k = kv_iter_key(it, &kl);
        const uint8_t *v = kv_iter_value(it, &vl);
        char want[16];
        ck_assert_uint_eq(kl, key_of(want, sizeof want, "c", 4, (uint64_t)(9 - n)));
        ck_assert_int_eq(memcmp(k, want, kl), 0); /* reverse order */
        ck_assert_uint_eq(vl, 8);
        ck_assert_uint_eq(get_le64(v), 30);
    }
    ck_assert_int_eq(kv_iter_status(it), KV_OK);
    kv_iter_free(it);
    ck_assert_int_eq(n, 10);
    /* The filter secret came along: the tables' keyed filters answer (a
     * table whose secret the database lacks is read without its filter). */
    for (int i = 0; i < 200; i++) {
        char k[16]; /* inside the tables' range: "c0004" < k < "c0005" */
        size_t kl = key_of(k, sizeof k, "c0004x", 4, (uint64_t)i);
        expect_absent(cp, k, kl);
    }
    struct kv_stats s;
    get_stats(cp, &s);
    ck_assert_uint_gt(s.filter_negatives, 150);
    close_db(cp);
}
END_TEST

START_TEST(checkpoint_of_a_read_only_handle)
{
    kv_options o;
    opts_small(&o);
    kv_db *w = open_db("src", &o);
    fill(w, 1000, 600); /* tables, and 400 keys in the writer's log */
    kv_options ro = o;
    ro.read_only = 1;
    kv_db *r = open_db("src", &ro);
    for (int i = 1000; i < 1200; i++) { /* after the handle's open: not in its view */
        char k[16];
        size_t kl = key_of(k, sizeof k, "k", 6, (uint64_t)i);
        put_kv(w, k, kl, "late", 4);
    }
    compact_all(w); /* the tables the handle reads go from the writer's version */
    char dir[4096], dir2[4096];
    test_path(dir, sizeof dir, "cp_ro");
    test_path(dir2, sizeof dir2, "cp_ro2");
    int rc = kv_checkpoint(r, dir);
    ck_assert_msg(rc == KV_OK, "%s", kv_error_text());
    ck_assert_int_eq(kv_catch_up(r), KV_OK);
    ck_assert_int_eq(kv_checkpoint(r, dir2), KV_OK);
    put_str(w, "k001200", "after both");
    struct kv_stats s;
    get_stats(r, &s);
    ck_assert_uint_eq(s.checkpoints, 2);
    ck_assert_int_eq(kv_close(r), KV_OK);
    close_db(w);
    kv_db *cp = open_db(dir, &o);
    expect_fill(cp, 1000); /* exactly the first 1000 keys */
    close_db(cp);
    cp = open_db(dir2, &o);
    for (int i = 1000; i < 1200; i++) {
        char k[16];
        size_t kl = key_of(k, sizeof k, "k", 6, (uint64_t)i);
        expect_value(cp, k, kl, "late", 4);
    }
    expect_absent(cp, "k001200", 7);
    close_db(cp);
}
END_TEST

/* One fault per attempt: where it strikes, and what the call must return. */
struct cp_fault {
    const char *what;
    int tmpfs; /* aimed at a copy: the checkpoint goes to /dev/shm */
    int manifest;
    kv_file_kind kind;
    kv_file_op op;
    kv_file_fault fault;
    int rc;
};

START_TEST(checkpoint_fails_cleanly)
{
    static const struct cp_fault faults[] = {
        {"log copy write", 0, 0, KV_FILE_KIND_WAL, KV_FILE_WRITE, KV_FAULT_ENOSPC, KV_ENOSPC},
        {"log copy sync", 0, 0, KV_FILE_KIND_WAL, KV_FILE_SYNC, KV_FAULT_EIO, KV_EIO},
        {"log copy create", 0, 0, KV_FILE_KIND_WAL, KV_FILE_OPEN, KV_FAULT_EIO, KV_EIO},
        {"directory sync", 0, 0, KV_FILE_KIND_DIR, KV_FILE_SYNC, KV_FAULT_EIO, KV_EIO},
        {"manifest commit", 0, 1, 0, 0, 0, KV_EIO},
        {"table copy write", 1, 0, KV_FILE_KIND_TABLE, KV_FILE_WRITE, KV_FAULT_EIO, KV_EIO},
        {"table copy read", 1, 0, KV_FILE_KIND_TABLE, KV_FILE_READ, KV_FAULT_EIO, KV_EIO},
        {"blob copy write", 1, 0, KV_FILE_KIND_BLOB, KV_FILE_WRITE, KV_FAULT_ENOSPC, KV_ENOSPC},
    };
    kv_options o;
    opts_small(&o);
    o.write_buffer_size = 4u << 20; /* nothing flushes or compacts meanwhile */
    o.idle_compaction_ms = 0;
    kv_db *db = open_db("src", &o);
    fill(db, 1500, 1000);
    struct stat shm, here;
    int have_tmpfs = stat("/dev/shm", &shm) == 0 && S_ISDIR(shm.st_mode) &&
                     stat(test_dir, &here) == 0 && shm.st_dev != here.st_dev;
    char dir[4096];
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) {
        const struct cp_fault *f = &faults[i];
        if (f->tmpfs && !have_tmpfs)
            continue;
        if (f->tmpfs)
            snprintf(dir, sizeof dir, "/dev/shm/check_checkpoint.%ld.f%zu", (long)getpid(), i);
        else
            test_path(dir, sizeof dir, "cp");
        if (f->manifest)
            kv_manifest_inject(1, EIO);
        else
            kv_file_inject_kind(f->kind, f->op, 1, f->fault);
        int rc = kv_checkpoint(db, dir);
        if (f->manifest)
            kv_manifest_inject(0, 0);
        else
            kv_file_inject_kind(f->kind, f->op, 0, KV_FAULT_NONE);
        ck_assert_msg(rc == f->rc, "%s: %s, not %s (%s)", f->what, kv_strerror(rc),
                      kv_strerror(f->rc), kv_error_text());
        ck_assert_msg(kv_error_text()[0], "%s: no error text", f->what);
        struct stat st;
        ck_assert_msg(lstat(dir, &st) != 0 && errno == ENOENT, "%s: %s left behind", f->what, dir);
    }
    struct kv_stats s;
    get_stats(db, &s);
    ck_assert_uint_eq(s.checkpoints, 0);
    expect_fill(db, 1500);
    test_path(dir, sizeof dir, "cp");
    ck_assert_int_eq(kv_checkpoint(db, dir), KV_OK);
    close_db(db);
    kv_db *cp = open_db(dir, &o);
    expect_fill(cp, 1500);
    close_db(cp);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("checkpoint");
    TCase *tc = test_tcase(s, "checkpoint", 60, 1);
    tcase_add_test(tc, checkpoint_to_tmpfs_is_a_copy);
    tcase_add_test(tc, checkpoint_dir_must_not_exist);
    tcase_add_test(tc, checkpoint_outlives_source);
    tcase_add_test(tc, checkpoint_keeps_the_manifest_records);
    tcase_add_test(tc, checkpoint_fails_cleanly);
    tcase_add_test(tc, checkpoint_of_a_read_only_handle);
    tc = test_tcase(s, "threads", 120, 1);
    tcase_add_test(tc, checkpoint_under_writers);
    return s;
}
