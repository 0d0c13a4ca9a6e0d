/* leveldb_c.c - LevelDB 1.23's C API (<leveldb/c.h>) on kv's public API.
 *
 * Each LevelDB object is a small struct around the kv object it stands for
 * (a kv_db, kv_iter, kv_snapshot, kv_batch) or around the settings it
 * carries (options, comparator, filter policy, cache). leveldb_open turns
 * the options into a kv_options; everything else is one kv call and the
 * translation of its result: a kv error becomes a malloc'd message in
 * *errptr, prefixed the way LevelDB prefixes its statuses. Where kv does
 * something other than LevelDB, c.h says so beside the function.
 *
 * This file sees kv only through <kv/kv.h>: it is a user of the library,
 * like any program. */
#define _POSIX_C_SOURCE 200809L /* geteuid, mkdir */
#include <leveldb/c.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <kv/kv.h>

/* ---- the objects ------------------------------------------------------------- */

struct leveldb_t {
    kv_db *db;
    const leveldb_comparator_t *cmp; /* the options' (it outlives the handle), or NULL */
};

struct leveldb_comparator_t {
    kv_comparator kc; /* what kv_options.comparator points at; kc.ctx is this struct */
    void *state;
    void (*destructor)(void *);
    int (*compare)(void *, const char *, size_t, const char *, size_t);
    char *name;       /* name(state), copied when the comparator is made */
};

/* bits_per_key < 0: a custom policy, whose callbacks kv never calls. */
struct leveldb_filterpolicy_t {
    void *state;
    void (*destructor)(void *);
    double bits_per_key;
};

struct leveldb_cache_t {
    size_t capacity;
};

/* C wants a member; an env stands for the system and holds nothing. */
struct leveldb_env_t {
    int unused;
};

struct leveldb_options_t {
    kv_options o; /* every setting that maps onto kv, already in kv's terms */
    leveldb_comparator_t *cmp;
    leveldb_filterpolicy_t *policy;
    leveldb_cache_t *cache;
};

struct leveldb_readoptions_t {
    const leveldb_snapshot_t *snapshot;
};

struct leveldb_writeoptions_t {
    kv_write_options wo;
};

struct leveldb_snapshot_t {
    kv_snapshot *snap;
};

/* it is NULL when kv_iter_new failed: then rc and err say why, and the
 * iterator is never valid. */
struct leveldb_iterator_t {
    kv_iter *it;
    int rc;
    char *err;
};

/* rc/err: the first put or delete that could not be added (sticky until
 * leveldb_writebatch_clear); leveldb_write reports it. */
struct leveldb_writebatch_t {
    kv_batch *b;
    int rc;
    char *err;
};

/* ---- errors -------------------------------------------------------------------- */

/* LevelDB's status prefix for a kv code. */
static const char *prefix(int rc)
{
    switch (rc) {
    case KV_EINVAL:
        return "Invalid argument: ";
    case KV_ECORRUPT:
        return "Corruption: ";
    case KV_NOTFOUND:
        return "NotFound: ";
    default: /* KV_EIO, KV_ENOSPC, KV_EPERM, KV_EBUSY, KV_ENOMEM */
        return "IO error: ";
    }
}

/* A new message from malloc: "<prefix><text>"; NULL when out of memory. */
static char *message(int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    const char *pre = prefix(rc);
    size_t plen = strlen(pre);
    char *m = n < 0 ? NULL : malloc(plen + (size_t)n + 1);
    if (!m)
        return NULL;
    memcpy(m, pre, plen);
    va_start(ap, fmt);
    vsnprintf(m + plen, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return m;
}

/* Replaces *errptr with m, freeing what it held (LevelDB's rule: the old
 * message goes, the new one stays for the caller to free). */
static void set_error(char **errptr, char *m)
{
    if (!errptr) {
        free(m);
        return;
    }
    free(*errptr);
    *errptr = m;
}

/* The error of the kv call that just failed on this thread, with kv's
 * text. */
static void kv_failed(char **errptr, int rc)
{
    set_error(errptr, message(rc, "%s", kv_error_text()));
}

/* kv_failed, for a call that may have written a table with the caller's
 * comparator (a write, whose flush may have failed, or an open, whose log
 * replay may): when kv says the keys were out of order, the comparator is
 * named, with what to do (its writes stay in the log). */
static void cmp_failed(char **errptr, int rc, const leveldb_comparator_t *cmp)
{
    const char *t = kv_error_text();
    if (!cmp || rc != KV_EINVAL || !strstr(t, "does not order keys consistently")) {
        kv_failed(errptr, rc);
        return;
    }
    set_error(errptr, message(rc,
                              "%s; the comparator is \"%s\" (leveldb_comparator_create): "
                              "no table can be written in an order it contradicts, so the "
                              "writes stay in the log, none lost; open the database with a "
                              "comparator that orders keys consistently",
                              t, cmp->name));
}

/* A NULL handle LevelDB would have crashed on. */
static void null_arg(char **errptr, const char *call, const char *what)
{
    set_error(errptr, message(KV_EINVAL, "%s: %s is NULL", call, what));
}

/* A copy of a buffer kv allocated, from malloc, freeing kv's: what the
 * caller gets must be free()able (LevelDB's callers, c_test among them,
 * call free on it), and kv promises only kv_free. NULL when out of memory
 * (kv's buffer is freed either way). extra: bytes to add and zero (1 for
 * text). */
static char *take(void *kvbuf, size_t len, size_t extra)
{
    char *p = malloc(len + extra > 0 ? len + extra : 1);
    if (p) {
        if (len)
            memcpy(p, kvbuf, len);
        memset(p + len, 0, extra);
    }
    kv_free(kvbuf);
    return p;
}

/* ---- options ----------------------------------------------------------------------- */

leveldb_options_t *leveldb_options_create(void)
{
    leveldb_options_t *o = calloc(1, sizeof *o);
    if (!o)
        return NULL;
    kv_options_init(&o->o);
    o->o.create_if_missing = 0; /* LevelDB's default; kv's is 1 */
    o->o.sync = 0;              /* per write, from leveldb_writeoptions_t */
    return o;
}

void leveldb_options_destroy(leveldb_options_t *o)
{
    free(o);
}

void leveldb_options_set_comparator(leveldb_options_t *o, leveldb_comparator_t *c)
{
    if (o)
        o->cmp = c;
}

void leveldb_options_set_filter_policy(leveldb_options_t *o, leveldb_filterpolicy_t *p)
{
    if (o)
        o->policy = p;
}

void leveldb_options_set_create_if_missing(leveldb_options_t *o, uint8_t v)
{
    if (o)
        o->o.create_if_missing = v != 0;
}

void leveldb_options_set_error_if_exists(leveldb_options_t *o, uint8_t v)
{
    if (o)
        o->o.error_if_exists = v != 0;
}

void leveldb_options_set_paranoid_checks(leveldb_options_t *o, uint8_t v)
{
    (void)o; /* kv checks always: c.h */
    (void)v;
}

void leveldb_options_set_env(leveldb_options_t *o, leveldb_env_t *env)
{
    (void)o;
    (void)env;
}

void leveldb_options_set_info_log(leveldb_options_t *o, leveldb_logger_t *log)
{
    (void)o;
    (void)log;
}

/* v clamped to [lo, hi]. */
static size_t clamp(size_t v, size_t lo, size_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

void leveldb_options_set_write_buffer_size(leveldb_options_t *o, size_t n)
{
    if (o)
        o->o.write_buffer_size = clamp(n, (size_t)64 << 10, (size_t)1 << 32);
}

void leveldb_options_set_max_open_files(leveldb_options_t *o, int n)
{
    if (o)
        o->o.max_open_files = n < 16 ? 16 : n;
}

void leveldb_options_set_cache(leveldb_options_t *o, leveldb_cache_t *c)
{
    if (o)
        o->cache = c;
}

void leveldb_options_set_block_size(leveldb_options_t *o, size_t n)
{
    if (o)
        o->o.block_size = clamp(n, 64, (size_t)64 << 20);
}

void leveldb_options_set_block_restart_interval(leveldb_options_t *o, int n)
{
    (void)o; /* kv's tables restart every 8 keys: c.h */
    (void)n;
}

void leveldb_options_set_max_file_size(leveldb_options_t *o, size_t n)
{
    if (!o)
        return;
    o->o.target_file_size = n < ((size_t)64 << 10) ? (size_t)64 << 10 : n;
    /* kv wants level 1 to hold at least one such table. */
    if (o->o.max_bytes_for_level_base < o->o.target_file_size)
        o->o.max_bytes_for_level_base = o->o.target_file_size;
}

void leveldb_options_set_compression(leveldb_options_t *o, int c)
{
    if (o)
        o->o.compression = c == leveldb_no_compression ? KV_COMPRESSION_NONE : KV_COMPRESSION_ZSTD;
}

/* The kv_options for leveldb_open and leveldb_repair_db: the settings kept
 * in kv's terms, plus those read from the objects the options name. */
static kv_options kv_opts(const leveldb_options_t *lo)
{
    kv_options o;
    if (lo)
        o = lo->o;
    else { /* leveldb_options_create's defaults */
        kv_options_init(&o);
        o.create_if_missing = 0;
    }
    o.sync = 0;
    if (lo && lo->cmp)
        o.comparator = &lo->cmp->kc;
    if (lo && lo->cache)
        o.block_cache_size = lo->cache->capacity;
    if (lo && lo->policy && lo->policy->bits_per_key >= 0)
        o.bloom_bits_per_key = lo->policy->bits_per_key;
    return o;
}

/* ---- the database ---------------------------------------------------------------- */

leveldb_t *leveldb_open(const leveldb_options_t *options, const char *name, char **errptr)
{
    if (!name) {
        null_arg(errptr, "leveldb_open", "name");
        return NULL;
    }
    leveldb_t *h = malloc(sizeof *h);
    if (!h) {
        set_error(errptr, message(KV_ENOMEM, "%s: leveldb_open: out of memory", name));
        return NULL;
    }
    kv_options o = kv_opts(options);
    int rc = kv_open(name, &o, &h->db);
    h->cmp = options ? options->cmp : NULL;
    if (rc == KV_OK)
        return h;
    free(h);
    /* No database and none to be made: LevelDB calls it an invalid
     * argument, in these words; kv's text follows in parentheses. */
    if (rc == KV_NOTFOUND && !o.create_if_missing)
        set_error(errptr, message(KV_EINVAL, "%s: does not exist (create_if_missing is false) (%s)",
                                  name, kv_error_text()));
    else
        cmp_failed(errptr, rc, options ? options->cmp : NULL);
    return NULL;
}

void leveldb_close(leveldb_t *db)
{
    if (!db)
        return;
    /* KV_EBUSY (a live iterator or snapshot) leaves the kv_db open: freeing
     * it under them is not possible, and c.h says the handle is then lost.
     * Any other result has freed it. */
    if (kv_close(db->db) != KV_EBUSY)
        free(db);
}

/* A put or delete with its own sync setting: kv_put and kv_delete use the
 * database's (off), so a synced one goes as a batch of one. */
static int write_one(kv_db *db, const char *key, size_t klen, const char *val, size_t vlen,
                     int del)
{
    kv_batch *b;
    int rc = kv_batch_new(&b);
    if (rc != KV_OK)
        return rc;
    rc = del ? kv_batch_delete(b, key, klen) : kv_batch_put(b, key, klen, val, vlen);
    if (rc == KV_OK) {
        kv_write_options wo = {.sync = 1};
        rc = kv_write_opts(db, &wo, b);
    }
    kv_batch_free(b);
    return rc;
}

void leveldb_put(leveldb_t *db, const leveldb_writeoptions_t *options, const char *key,
                 size_t keylen, const char *val, size_t vallen, char **errptr)
{
    if (!db) {
        null_arg(errptr, "leveldb_put", "db");
        return;
    }
    int rc = options && options->wo.sync ? write_one(db->db, key, keylen, val, vallen, 0)
                                         : kv_put(db->db, key, keylen, val, vallen);
    if (rc != KV_OK)
        cmp_failed(errptr, rc, db->cmp);
}

void leveldb_delete(leveldb_t *db, const leveldb_writeoptions_t *options, const char *key,
                    size_t keylen, char **errptr)
{
    if (!db) {
        null_arg(errptr, "leveldb_delete", "db");
        return;
    }
    int rc = options && options->wo.sync ? write_one(db->db, key, keylen, NULL, 0, 1)
                                         : kv_delete(db->db, key, keylen);
    if (rc != KV_OK)
        cmp_failed(errptr, rc, db->cmp);
}

void leveldb_write(leveldb_t *db, const leveldb_writeoptions_t *options,
                   leveldb_writebatch_t *batch, char **errptr)
{
    if (!db || !batch) {
        null_arg(errptr, "leveldb_write", db ? "batch" : "db");
        return;
    }
    if (batch->rc != KV_OK) {
        set_error(errptr, message(batch->rc, "leveldb_write: the batch lost an entry, so "
                                             "nothing was written: %s",
                                  batch->err ? batch->err : "out of memory"));
        return;
    }
    kv_write_options wo = {.sync = options ? options->wo.sync : 0};
    int rc = kv_write_opts(db->db, &wo, batch->b);
    if (rc != KV_OK)
        cmp_failed(errptr, rc, db->cmp);
}

char *leveldb_get(leveldb_t *db, const leveldb_readoptions_t *options, const char *key,
                  size_t keylen, size_t *vallen, char **errptr)
{
    if (vallen)
        *vallen = 0;
    if (!db || !vallen) {
        null_arg(errptr, "leveldb_get", db ? "vallen" : "db");
        return NULL;
    }
    const kv_snapshot *snap =
        options && options->snapshot ? options->snapshot->snap : NULL;
    void *v;
    size_t n;
    int rc = kv_get_at(db->db, snap, key, keylen, &v, &n);
    if (rc == KV_NOTFOUND)
        return NULL; /* an answer, not an error */
    if (rc != KV_OK) {
        kv_failed(errptr, rc);
        return NULL;
    }
    char *out = take(v, n, 0);
    if (!out) {
        set_error(errptr, message(KV_ENOMEM, "leveldb_get: out of memory for a value of %zu "
                                             "bytes", n));
        return NULL;
    }
    *vallen = n;
    return out;
}

/* ---- snapshots ------------------------------------------------------------------- */

const leveldb_snapshot_t *leveldb_create_snapshot(leveldb_t *db)
{
    if (!db)
        return NULL;
    leveldb_snapshot_t *s = malloc(sizeof *s);
    if (!s)
        return NULL;
    if (kv_snapshot_new(db->db, &s->snap) != KV_OK) {
        free(s);
        return NULL;
    }
    return s;
}

void leveldb_release_snapshot(leveldb_t *db, const leveldb_snapshot_t *snapshot)
{
    if (!db || !snapshot)
        return;
    kv_snapshot_release(db->db, snapshot->snap);
    free((leveldb_snapshot_t *)snapshot); /* made by leveldb_create_snapshot */
}

/* ---- properties, sizes, compaction -------------------------------------------------- */

char *leveldb_property_value(leveldb_t *db, const char *propname)
{
    if (!db || !propname)
        return NULL;
    /* "leveldb.<x>" asks kv for "kv.<x>"; a "kv." name goes as it is. */
    static const char ours[] = "leveldb.";
    char name[128];
    if (!strncmp(propname, ours, sizeof ours - 1)) {
        int n = snprintf(name, sizeof name, "kv.%s", propname + sizeof ours - 1);
        if (n < 0 || (size_t)n >= sizeof name)
            return NULL; /* longer than any name kv has */
        propname = name;
    } else if (strncmp(propname, "kv.", 3) != 0)
        return NULL;
    char *value;
    if (kv_property(db->db, propname, &value) != KV_OK)
        return NULL; /* unknown (KV_NOTFOUND), or out of memory */
    return take(value, strlen(value), 1);
}

void leveldb_approximate_sizes(leveldb_t *db, int num_ranges, const char *const *range_start_key,
                               const size_t *range_start_key_len,
                               const char *const *range_limit_key,
                               const size_t *range_limit_key_len, uint64_t *sizes)
{
    if (!db || num_ranges <= 0 || !sizes)
        return;
    size_t n = (size_t)num_ranges;
    memset(sizes, 0, n * sizeof *sizes);
    if (!range_start_key || !range_start_key_len || !range_limit_key || !range_limit_key_len)
        return;
    /* kv takes arrays of const void *: the keys' pointers are copied into
     * them rather than the char * arrays read as something they are not.
     * A few ranges fit on the stack. */
    const void *stack[2 * 8];
    const void **keys = n <= 8 ? stack : malloc(2 * n * sizeof *keys);
    if (!keys)
        return; /* out of memory: the sizes stay 0 (c.h) */
    for (size_t i = 0; i < n; i++) {
        keys[i] = range_start_key[i];
        keys[n + i] = range_limit_key[i];
    }
    if (kv_approximate_sizes(db->db, n, keys, range_start_key_len, keys + n,
                             range_limit_key_len, sizes) != KV_OK)
        memset(sizes, 0, n * sizeof *sizes);
    if (keys != stack)
        free(keys);
}

void leveldb_compact_range(leveldb_t *db, const char *start_key, size_t start_key_len,
                           const char *limit_key, size_t limit_key_len)
{
    if (!db)
        return;
    /* A NULL key is an open end whatever its length, as in LevelDB. */
    (void)kv_compact_range(db->db, start_key, start_key ? start_key_len : 0, limit_key,
                           limit_key ? limit_key_len : 0);
}

/* ---- whole databases ---------------------------------------------------------------- */

void leveldb_destroy_db(const leveldb_options_t *options, const char *name, char **errptr)
{
    (void)options;
    if (!name) {
        null_arg(errptr, "leveldb_destroy_db", "name");
        return;
    }
    int rc = kv_destroy(name);
    if (rc != KV_OK && rc != KV_NOTFOUND) /* nothing there: done, as in LevelDB */
        kv_failed(errptr, rc);
}

void leveldb_repair_db(const leveldb_options_t *options, const char *name, char **errptr)
{
    if (!name) {
        null_arg(errptr, "leveldb_repair_db", "name");
        return;
    }
    kv_options o = kv_opts(options);
    int rc = kv_repair(name, &o);
    if (rc != KV_OK)
        kv_failed(errptr, rc);
}

/* ---- iterators ------------------------------------------------------------------------ */

leveldb_iterator_t *leveldb_create_iterator(leveldb_t *db, const leveldb_readoptions_t *options)
{
    if (!db)
        return NULL;
    leveldb_iterator_t *i = calloc(1, sizeof *i);
    if (!i)
        return NULL;
    const kv_snapshot *snap =
        options && options->snapshot ? options->snapshot->snap : NULL;
    i->rc = kv_iter_new(db->db, snap, &i->it);
    if (i->rc != KV_OK)
        i->err = message(i->rc, "%s", kv_error_text()); /* for leveldb_iter_get_error */
    return i;
}

void leveldb_iter_destroy(leveldb_iterator_t *i)
{
    if (!i)
        return;
    kv_iter_free(i->it);
    free(i->err);
    free(i);
}

/* kv's iterator calls take NULL as "not valid": an iterator whose
 * kv_iter_new failed needs no test of its own below. */
uint8_t leveldb_iter_valid(const leveldb_iterator_t *i)
{
    return i && kv_iter_valid(i->it);
}

void leveldb_iter_seek_to_first(leveldb_iterator_t *i)
{
    if (i)
        kv_iter_seek_first(i->it);
}

void leveldb_iter_seek_to_last(leveldb_iterator_t *i)
{
    if (i)
        kv_iter_seek_last(i->it);
}

void leveldb_iter_seek(leveldb_iterator_t *i, const char *k, size_t klen)
{
    if (i)
        kv_iter_seek(i->it, k, klen);
}

void leveldb_iter_next(leveldb_iterator_t *i)
{
    if (i)
        kv_iter_next(i->it);
}

void leveldb_iter_prev(leveldb_iterator_t *i)
{
    if (i)
        kv_iter_prev(i->it);
}

const char *leveldb_iter_key(const leveldb_iterator_t *i, size_t *klen)
{
    size_t n = 0;
    const char *k = i ? kv_iter_key(i->it, &n) : NULL;
    if (klen)
        *klen = n;
    return k;
}

const char *leveldb_iter_value(const leveldb_iterator_t *i, size_t *vlen)
{
    size_t n = 0;
    const char *v = i ? kv_iter_value(i->it, &n) : NULL;
    if (vlen)
        *vlen = n;
    return v;
}

void leveldb_iter_get_error(const leveldb_iterator_t *i, char **errptr)
{
    if (!i) {
        null_arg(errptr, "leveldb_iter_get_error", "the iterator");
        return;
    }
    if (!i->it) { /* kv_iter_new failed */
        set_error(errptr, i->err ? strdup(i->err) : message(i->rc, "out of memory"));
        return;
    }
    int rc = kv_iter_status(i->it); /* sets the error's text again */
    if (rc != KV_OK)
        kv_failed(errptr, rc);
}

/* ---- write batches ---------------------------------------------------------------- */

leveldb_writebatch_t *leveldb_writebatch_create(void)
{
    leveldb_writebatch_t *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    if (kv_batch_new(&w->b) != KV_OK) {
        free(w);
        return NULL;
    }
    return w;
}

void leveldb_writebatch_destroy(leveldb_writebatch_t *w)
{
    if (!w)
        return;
    kv_batch_free(w->b);
    free(w->err);
    free(w);
}

void leveldb_writebatch_clear(leveldb_writebatch_t *w)
{
    if (!w)
        return;
    kv_batch_clear(w->b);
    w->rc = KV_OK;
    free(w->err);
    w->err = NULL;
}

/* Remembers the first entry the batch could not take (rc from kv). */
static void batch_failed(leveldb_writebatch_t *w, int rc)
{
    if (w->rc != KV_OK)
        return;
    w->rc = rc;
    w->err = strdup(kv_error_text()); /* NULL: leveldb_write says "out of memory" */
}

void leveldb_writebatch_put(leveldb_writebatch_t *w, const char *key, size_t klen,
                            const char *val, size_t vlen)
{
    int rc;
    if (w && (rc = kv_batch_put(w->b, key, klen, val, vlen)) != KV_OK)
        batch_failed(w, rc);
}

void leveldb_writebatch_delete(leveldb_writebatch_t *w, const char *key, size_t klen)
{
    int rc;
    if (w && (rc = kv_batch_delete(w->b, key, klen)) != KV_OK)
        batch_failed(w, rc);
}

/* leveldb_writebatch_iterate: the caller's callbacks, called from kv's. */
struct iterate_ctx {
    void *state;
    void (*put)(void *, const char *, size_t, const char *, size_t);
    void (*deleted)(void *, const char *, size_t);
};

static int iterate_put(void *ctx, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct iterate_ctx *c = ctx;
    c->put(c->state, key, klen, val, vlen);
    return 0;
}

static int iterate_del(void *ctx, const void *key, size_t klen)
{
    struct iterate_ctx *c = ctx;
    c->deleted(c->state, key, klen);
    return 0;
}

void leveldb_writebatch_iterate(const leveldb_writebatch_t *w, void *state,
                                void (*put)(void *, const char *k, size_t klen, const char *v,
                                            size_t vlen),
                                void (*deleted)(void *, const char *k, size_t klen))
{
    if (!w || !put || !deleted)
        return;
    struct iterate_ctx c = {state, put, deleted};
    (void)kv_batch_foreach(w->b, &c, iterate_put, iterate_del); /* the callbacks return 0 */
}

/* leveldb_writebatch_append: each of source's entries added to the
 * destination, which remembers the first it could not take. */
static int append_put(void *ctx, const void *key, size_t klen, const void *val, size_t vlen)
{
    leveldb_writebatch_put(ctx, key, klen, val, vlen);
    return 0;
}

static int append_del(void *ctx, const void *key, size_t klen)
{
    leveldb_writebatch_delete(ctx, key, klen);
    return 0;
}

void leveldb_writebatch_append(leveldb_writebatch_t *destination,
                               const leveldb_writebatch_t *source)
{
    if (!destination || !source || destination == source)
        return;
    (void)kv_batch_foreach(source->b, destination, append_put, append_del);
    /* An entry source itself lost is lost to the destination too. */
    if (source->rc != KV_OK && destination->rc == KV_OK) {
        destination->rc = source->rc;
        destination->err = source->err ? strdup(source->err) : NULL;
    }
}

/* ---- comparators -------------------------------------------------------------------- */

/* kv's compare, passed on to the caller's with its state. */
static int compare_tramp(void *ctx, const void *a, size_t alen, const void *b, size_t blen)
{
    leveldb_comparator_t *c = ctx;
    return c->compare(c->state, a, alen, b, blen);
}

leveldb_comparator_t *leveldb_comparator_create(
    void *state, void (*destructor)(void *),
    int (*compare)(void *, const char *a, size_t alen, const char *b, size_t blen),
    const char *(*name)(void *))
{
    if (!compare || !name)
        return NULL;
    const char *nm = name(state);
    leveldb_comparator_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    /* A NULL name is kept as NULL: kv_open refuses it with its reason. */
    if (nm && !(c->name = strdup(nm))) {
        free(c);
        return NULL;
    }
    c->state = state;
    c->destructor = destructor;
    c->compare = compare;
    c->kc.name = c->name;
    c->kc.compare = compare_tramp;
    c->kc.ctx = c;
    return c;
}

void leveldb_comparator_destroy(leveldb_comparator_t *c)
{
    if (!c)
        return;
    if (c->destructor)
        c->destructor(c->state);
    free(c->name);
    free(c);
}

/* ---- filter policies ---------------------------------------------------------------- */

leveldb_filterpolicy_t *leveldb_filterpolicy_create(
    void *state, void (*destructor)(void *),
    char *(*create_filter)(void *, const char *const *key_array, const size_t *key_length_array,
                           int num_keys, size_t *filter_length),
    uint8_t (*key_may_match)(void *, const char *key, size_t length, const char *filter,
                             size_t filter_length),
    const char *(*name)(void *))
{
    (void)create_filter; /* never called: kv's own filter gates reads (c.h) */
    (void)key_may_match;
    (void)name;
    leveldb_filterpolicy_t *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->state = state;
    p->destructor = destructor;
    p->bits_per_key = -1; /* custom: kv's default bits apply */
    return p;
}

void leveldb_filterpolicy_destroy(leveldb_filterpolicy_t *p)
{
    if (!p)
        return;
    if (p->destructor)
        p->destructor(p->state);
    free(p);
}

leveldb_filterpolicy_t *leveldb_filterpolicy_create_bloom(int bits_per_key)
{
    leveldb_filterpolicy_t *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->bits_per_key = bits_per_key < 0 ? 0 : bits_per_key > 1000 ? 1000 : bits_per_key;
    return p;
}

/* ---- read and write options ------------------------------------------------------------ */

leveldb_readoptions_t *leveldb_readoptions_create(void)
{
    return calloc(1, sizeof(leveldb_readoptions_t));
}

void leveldb_readoptions_destroy(leveldb_readoptions_t *r)
{
    free(r);
}

void leveldb_readoptions_set_verify_checksums(leveldb_readoptions_t *r, uint8_t v)
{
    (void)r; /* kv verifies always (c.h) */
    (void)v;
}

void leveldb_readoptions_set_fill_cache(leveldb_readoptions_t *r, uint8_t v)
{
    (void)r; /* kv's reads always fill the block cache (c.h) */
    (void)v;
}

void leveldb_readoptions_set_snapshot(leveldb_readoptions_t *r, const leveldb_snapshot_t *s)
{
    if (r)
        r->snapshot = s;
}

leveldb_writeoptions_t *leveldb_writeoptions_create(void)
{
    return calloc(1, sizeof(leveldb_writeoptions_t));
}

void leveldb_writeoptions_destroy(leveldb_writeoptions_t *w)
{
    free(w);
}

void leveldb_writeoptions_set_sync(leveldb_writeoptions_t *w, uint8_t v)
{
    if (w)
        w->wo.sync = v != 0;
}

/* ---- caches and the environment ------------------------------------------------------ */

leveldb_cache_t *leveldb_cache_create_lru(size_t capacity)
{
    leveldb_cache_t *c = malloc(sizeof *c);
    if (c)
        c->capacity = capacity;
    return c;
}

void leveldb_cache_destroy(leveldb_cache_t *cache)
{
    free(cache);
}

leveldb_env_t *leveldb_create_default_env(void)
{
    return calloc(1, sizeof(leveldb_env_t));
}

void leveldb_env_destroy(leveldb_env_t *env)
{
    free(env);
}

char *leveldb_env_get_test_directory(leveldb_env_t *env)
{
    (void)env;
    const char *t = getenv("TEST_TMPDIR");
    char buf[64];
    if (!t || !*t) {
        snprintf(buf, sizeof buf, "/tmp/leveldbtest-%ld", (long)geteuid());
        t = buf;
    }
    /* Made if missing, as LevelDB does. A failure is not reported here
     * (there is no errptr): the first open of a database in it names the
     * directory and the reason. */
    (void)mkdir(t, 0755);
    return strdup(t);
}

/* ---- the rest ------------------------------------------------------------------------- */

void leveldb_free(void *ptr)
{
    free(ptr);
}

int leveldb_major_version(void)
{
    return 1;
}

int leveldb_minor_version(void)
{
    return 23;
}
