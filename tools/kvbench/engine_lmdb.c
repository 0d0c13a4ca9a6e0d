/* engine_lmdb.c - LMDB behind kvbench's engine interface (kvbench.h), so
 * that `kvbench --engine=lmdb` runs the same workloads with the same keys
 * as kv: a copy-on-write B-tree in one memory-mapped file, with no filters,
 * the natural baseline for a study of filter-gated reads. LMDB is a
 * dependency of kv itself (it holds the manifest), so this engine is always
 * built.
 *
 * Choices, so that the comparison with kv's defaults is fair:
 * - Durability. kv's ordinary write is in the kernel's page cache when the
 *   call returns: it survives a crash of the process, not of the machine.
 *   MDB_NOSYNC gives LMDB the same promise (a commit is written to the file,
 *   not flushed); a write with sync (--sync, fillsync) is followed by
 *   mdb_env_sync(force), which flushes data and meta page like LMDB's
 *   default commit. MDB_WRITEMAP stays off (LMDB's default: pwrite at
 *   commit, the map read-only).
 * - MDB_NORDAHEAD: random gets on a database larger than memory should not
 *   read neighbouring pages they do not need (LMDB's advice for that case);
 *   at sizes that fit in memory it makes no difference.
 * - MDB_NOTLS: a read transaction is not tied to the thread that began it,
 *   so iterators and the per-thread read transactions below work from any
 *   of kvbench's worker threads.
 * - The map is 1 TiB of address space (sparse: the file grows only as pages
 *   are written), so no benchmark size runs into MDB_MAP_FULL.
 * - Writes: one write transaction per put, del or batch (a batch is all or
 *   nothing). LMDB has one writer at a time: with --threads the writers
 *   queue on its lock, which is the engine's nature, not kvbench's.
 * - Gets: one read transaction per thread, renewed per get
 *   (mdb_txn_renew, mdb_get, mdb_txn_reset): a snapshot per get, as kv's
 *   get sees, without the cost of mdb_txn_begin and a reader slot each time.
 *   Each thread's transaction is found through a thread-local pointer; when
 *   the thread ends it goes back to the handle's free list, and close
 *   aborts them all, so reader slots stay bounded by the threads running.
 * - Iterators: a cursor in a read transaction of its own.
 * - --bloom_bits, --filter_layout, --cache_size, --write_buffer_size,
 *   --block_size, --compression_type have no LMDB counterpart (no filter,
 *   the OS page cache is its cache, pages are the OS page size, no
 *   compression) and are ignored; zstd is refused.
 *
 * Counters: no per-get figures (have_filter_figures stays 0); mdb_env_stat
 * and mdb_env_info give the tree's depth, branch, leaf and overflow pages,
 * entries and the page size (have_lmdb).
 *
 * The directory: an LMDB database is recognised by LMDB's own files,
 * data.mdb and lock.mdb, and destroyed by removing exactly those two. */
#define _XOPEN_SOURCE 700
#include <lmdb.h>

#include <kv/kv.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"

#define LMDB_ERR (-200) /* the message is in last_error */
#define MAP_SIZE ((size_t)1 << 40)
#define MAX_READERS 1024 /* --threads up to 256, each with a get txn and an iterator */

static _Thread_local char last_error[512];

static int fail(int mdb_rc, const char *what)
{
    snprintf(last_error, sizeof last_error, "LMDB %s: %s", what, mdb_strerror(mdb_rc));
    return LMDB_ERR;
}

static int refuse(const char *msg)
{
    snprintf(last_error, sizeof last_error, "%s", msg);
    return LMDB_ERR;
}

static const char *lmdb_errstr(int rc)
{
    return rc == LMDB_ERR ? last_error : kv_strerror(rc);
}

/* ---- the handle and its per-thread read transactions ----------------------------------- */

struct lmdb;

/* A thread's read transaction for one handle. It lives in the thread's
 * thread-local slot; `db` is NULL once that handle is closed. */
struct reader {
    struct lmdb *db;
    MDB_txn *txn;          /* reset between gets */
    struct reader *next;   /* the handle's list of readers in use */
};

struct lmdb {
    MDB_env *env;
    MDB_dbi dbi;
    int sync;
    struct reader *readers; /* held by threads, under readers_lock */
    MDB_txn **spare;        /* reset transactions of threads that ended */
    size_t nspare, spare_cap;
};

/* One lock for every handle's reader lists: taken only when a thread first
 * gets from a handle, when a thread ends, and at close. */
static pthread_mutex_t readers_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t reader_key;
static pthread_once_t reader_once = PTHREAD_ONCE_INIT;
static _Thread_local struct reader *my_reader;

static void unlink_reader(struct lmdb *d, struct reader *r)
{
    for (struct reader **p = &d->readers; *p; p = &(*p)->next)
        if (*p == r) {
            *p = r->next;
            return;
        }
}

/* At a thread's end: its transaction goes back to its handle, if open. */
static void reader_exit(void *p)
{
    struct reader *r = p;
    pthread_mutex_lock(&readers_lock);
    struct lmdb *d = r->db;
    if (d) {
        unlink_reader(d, r);
        if (d->nspare == d->spare_cap) {
            size_t cap = d->spare_cap ? 2 * d->spare_cap : 8;
            MDB_txn **s = realloc(d->spare, cap * sizeof *s);
            if (s) {
                d->spare = s;
                d->spare_cap = cap;
            }
        }
        if (d->nspare < d->spare_cap)
            d->spare[d->nspare++] = r->txn;
        else
            mdb_txn_abort(r->txn);
    }
    pthread_mutex_unlock(&readers_lock);
    free(r);
}

static void make_key(void)
{
    if (pthread_key_create(&reader_key, reader_exit) != 0)
        abort();
}

/* This thread's reset read transaction for d, or NULL with rc set. */
static MDB_txn *thread_txn(struct lmdb *d, int *rc)
{
    struct reader *r = my_reader;
    if (r && r->db == d)
        return r->txn;
    pthread_once(&reader_once, make_key);
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r) {
            *rc = KV_ENOMEM;
            return NULL;
        }
        my_reader = r;
        pthread_setspecific(reader_key, r);
    }
    /* r->db is NULL here (its handle was closed) or another open handle:
     * this thread moves to d, leaving its transaction to the other one */
    pthread_mutex_lock(&readers_lock);
    if (r->db) {
        unlink_reader(r->db, r);
        mdb_txn_abort(r->txn);
        r->db = NULL;
    }
    MDB_txn *txn = d->nspare ? d->spare[--d->nspare] : NULL;
    pthread_mutex_unlock(&readers_lock);
    if (!txn) {
        int m = mdb_txn_begin(d->env, NULL, MDB_RDONLY, &txn);
        if (m != 0) {
            *rc = fail(m, "read transaction");
            return NULL;
        }
        mdb_txn_reset(txn);
    }
    pthread_mutex_lock(&readers_lock);
    r->db = d;
    r->txn = txn;
    r->next = d->readers;
    d->readers = r;
    pthread_mutex_unlock(&readers_lock);
    return txn;
}

/* ---- open, close ----------------------------------------------------------------------- */

static int has_file(const char *dir, const char *name)
{
    char p[4096];
    struct stat st;
    return snprintf(p, sizeof p, "%s/%s", dir, name) < (int)sizeof p && lstat(p, &st) == 0;
}

static void lmdb_close(void *h)
{
    struct lmdb *d = h;
    if (!d)
        return;
    pthread_mutex_lock(&readers_lock);
    for (struct reader *r = d->readers; r; r = r->next) {
        mdb_txn_abort(r->txn);
        r->txn = NULL;
        r->db = NULL; /* its thread sees the handle is gone */
    }
    d->readers = NULL;
    for (size_t i = 0; i < d->nspare; i++)
        mdb_txn_abort(d->spare[i]);
    pthread_mutex_unlock(&readers_lock);
    free(d->spare);
    if (d->env)
        mdb_env_close(d->env);
    free(d);
}

static int lmdb_open(const struct bench_config *c, const char *dir, void **out)
{
    *out = NULL;
    if (c->compression == KV_COMPRESSION_ZSTD)
        return refuse("LMDB does not compress: use --compression_type=none");
    if (c->create) {
        if (mkdir(dir, 0777) != 0 && errno != EEXIST)
            return fail(errno, "mkdir");
    } else if (!has_file(dir, "data.mdb")) {
        return refuse("no LMDB database there (no data.mdb)");
    }
    struct lmdb *d = calloc(1, sizeof *d);
    if (!d)
        return KV_ENOMEM;
    d->sync = c->sync;
    int m = mdb_env_create(&d->env);
    if (m == 0)
        m = mdb_env_set_mapsize(d->env, MAP_SIZE);
    if (m == 0)
        m = mdb_env_set_maxreaders(d->env, MAX_READERS);
    if (m == 0)
        m = mdb_env_open(d->env, dir, MDB_NOSYNC | MDB_NORDAHEAD | MDB_NOTLS, 0666);
    MDB_txn *txn = NULL;
    if (m == 0)
        m = mdb_txn_begin(d->env, NULL, 0, &txn);
    if (m == 0) {
        m = mdb_dbi_open(txn, NULL, 0, &d->dbi);
        if (m == 0)
            m = mdb_txn_commit(txn);
        else
            mdb_txn_abort(txn);
    }
    if (m != 0) {
        int rc = fail(m, "open");
        lmdb_close(d);
        return rc;
    }
    *out = d;
    return 0;
}

/* ---- writes ---------------------------------------------------------------------------- */

static int commit(struct lmdb *d, MDB_txn *txn, int sync)
{
    int m = mdb_txn_commit(txn);
    if (m != 0)
        return fail(m, "commit");
    if ((sync || d->sync) && (m = mdb_env_sync(d->env, 1)) != 0)
        return fail(m, "sync");
    return 0;
}

static int lmdb_write(void *h, const struct bench_kv *kvs, size_t n, int sync)
{
    struct lmdb *d = h;
    MDB_txn *txn;
    int m = mdb_txn_begin(d->env, NULL, 0, &txn);
    if (m != 0)
        return fail(m, "write transaction");
    for (size_t i = 0; i < n && m == 0; i++) {
        MDB_val k = {kvs[i].klen, (void *)kvs[i].key}, v = {kvs[i].vlen, (void *)kvs[i].val};
        m = mdb_put(txn, d->dbi, &k, &v, 0);
    }
    if (m != 0) {
        mdb_txn_abort(txn);
        return fail(m, "put");
    }
    return commit(d, txn, sync);
}

static int lmdb_put(void *h, const void *k, size_t kl, const void *v, size_t vl, int sync)
{
    struct bench_kv one = {k, v, kl, vl};
    return lmdb_write(h, &one, 1, sync);
}

static int lmdb_del(void *h, const void *key, size_t kl, int sync)
{
    struct lmdb *d = h;
    MDB_txn *txn;
    int m = mdb_txn_begin(d->env, NULL, 0, &txn);
    if (m != 0)
        return fail(m, "write transaction");
    MDB_val k = {kl, (void *)key};
    m = mdb_del(txn, d->dbi, &k, NULL);
    if (m != 0 && m != MDB_NOTFOUND) { /* deleting an absent key is fine, as in kv */
        mdb_txn_abort(txn);
        return fail(m, "del");
    }
    return commit(d, txn, sync);
}

/* ---- reads ----------------------------------------------------------------------------- */

static int lmdb_get(void *h, const void *key, size_t kl, size_t *vlen)
{
    struct lmdb *d = h;
    int rc = 0;
    MDB_txn *txn = thread_txn(d, &rc);
    if (!txn)
        return rc;
    int m = mdb_txn_renew(txn);
    if (m != 0)
        return fail(m, "renew");
    MDB_val k = {kl, (void *)key}, v;
    m = mdb_get(txn, d->dbi, &k, &v);
    mdb_txn_reset(txn);
    if (m == MDB_NOTFOUND)
        return 0;
    if (m != 0)
        return fail(m, "get");
    *vlen = v.mv_size;
    return 1;
}

static int lmdb_compact(void *h)
{
    (void)h; /* a B-tree has nothing to compact */
    return 0;
}

static int lmdb_counters(void *h, struct bench_counters *out)
{
    struct lmdb *d = h;
    memset(out, 0, sizeof *out);
    MDB_stat st;
    MDB_envinfo info;
    int m = mdb_env_stat(d->env, &st);
    if (m == 0)
        m = mdb_env_info(d->env, &info);
    if (m != 0)
        return fail(m, "stat");
    out->lmdb_depth = st.ms_depth;
    out->lmdb_branch_pages = st.ms_branch_pages;
    out->lmdb_leaf_pages = st.ms_leaf_pages;
    out->lmdb_overflow_pages = st.ms_overflow_pages;
    out->lmdb_entries = st.ms_entries;
    out->lmdb_page_size = st.ms_psize;
    out->lmdb_file_bytes = (uint64_t)(info.me_last_pgno + 1) * st.ms_psize;
    out->have_lmdb = 1;
    return 0;
}

/* ---- iterators ------------------------------------------------------------------------- */

struct lmdb_iter {
    MDB_txn *txn;
    MDB_cursor *cur;
    MDB_val k, v;
    int valid, err; /* err: an LMDB code other than MDB_NOTFOUND */
};

static int lmdb_iter_new(void *h, void **out)
{
    struct lmdb *d = h;
    *out = NULL;
    struct lmdb_iter *it = calloc(1, sizeof *it);
    if (!it)
        return KV_ENOMEM;
    int m = mdb_txn_begin(d->env, NULL, MDB_RDONLY, &it->txn);
    if (m == 0 && (m = mdb_cursor_open(it->txn, d->dbi, &it->cur)) != 0)
        mdb_txn_abort(it->txn);
    if (m != 0) {
        free(it);
        return fail(m, "iterator");
    }
    *out = it;
    return 0;
}

static void step(struct lmdb_iter *it, MDB_cursor_op op)
{
    int m = mdb_cursor_get(it->cur, &it->k, &it->v, op);
    it->valid = m == 0;
    if (m != 0 && m != MDB_NOTFOUND)
        it->err = m;
}

static void lmdb_seek(void *p, const void *key, size_t kl)
{
    struct lmdb_iter *it = p;
    it->k = (MDB_val){kl, (void *)key};
    step(it, MDB_SET_RANGE);
}

static void lmdb_seek_first(void *it) { step(it, MDB_FIRST); }
static void lmdb_seek_last(void *it) { step(it, MDB_LAST); }
static void lmdb_next(void *it) { step(it, MDB_NEXT); }
static void lmdb_prev(void *it) { step(it, MDB_PREV); }
static int lmdb_valid(void *it) { return ((struct lmdb_iter *)it)->valid; }

static const void *lmdb_key(void *p, size_t *n)
{
    struct lmdb_iter *it = p;
    *n = it->k.mv_size;
    return it->k.mv_data;
}

static const void *lmdb_value(void *p, size_t *n)
{
    struct lmdb_iter *it = p;
    *n = it->v.mv_size;
    return it->v.mv_data;
}

static int lmdb_iter_status(void *p)
{
    struct lmdb_iter *it = p;
    return it->err ? fail(it->err, "cursor") : 0;
}

static void lmdb_iter_free(void *p)
{
    struct lmdb_iter *it = p;
    mdb_cursor_close(it->cur);
    mdb_txn_abort(it->txn);
    free(it);
}

/* ---- the directory --------------------------------------------------------------------- */

static int lmdb_is_db(const char *dir, char *why, size_t n)
{
    if (has_file(dir, "data.mdb") && has_file(dir, "lock.mdb"))
        return 1;
    snprintf(why, n, "no LMDB data.mdb and lock.mdb");
    return 0;
}

/* LMDB's files in a directory: data.mdb and lock.mdb, and nothing else. */
static int lmdb_destroy(const char *dir)
{
    static const char *const files[] = {"data.mdb", "lock.mdb"};
    for (size_t i = 0; i < 2; i++) {
        char p[4096];
        if (snprintf(p, sizeof p, "%s/%s", dir, files[i]) >= (int)sizeof p)
            return refuse("path too long");
        if (unlink(p) != 0 && errno != ENOENT)
            return fail(errno, i ? "remove lock.mdb" : "remove data.mdb");
    }
    return 0;
}

const struct bench_engine bench_lmdb_engine = {
    .name = "lmdb",
    .no_filters = 1,
    .open = lmdb_open,
    .close = lmdb_close,
    .put = lmdb_put,
    .del = lmdb_del,
    .write = lmdb_write,
    .get = lmdb_get,
    .compact = lmdb_compact,
    .counters = lmdb_counters,
    .tables = NULL,
    .expected_fpr = NULL,
    .iter_new = lmdb_iter_new,
    .iter_seek = lmdb_seek,
    .iter_seek_first = lmdb_seek_first,
    .iter_seek_last = lmdb_seek_last,
    .iter_next = lmdb_next,
    .iter_prev = lmdb_prev,
    .iter_valid = lmdb_valid,
    .iter_key = lmdb_key,
    .iter_value = lmdb_value,
    .iter_status = lmdb_iter_status,
    .iter_free = lmdb_iter_free,
    .is_db = lmdb_is_db,
    .destroy = lmdb_destroy,
    .errstr = lmdb_errstr,
};
