/* explain.c - looking inside a database, for tools (kvtool):
 *
 *   kv_explain_get  one Get, step by step: the same walk as kv_get_at in
 *                   db.c (same hash, same memtables, same tables in the
 *                   same order, same filter and block lookups, same
 *                   counters), with each step recorded;
 *   kv_inspect      a closed database's manifest and directory, read under
 *                   its LOCK without recovery, so nothing is deleted.
 *
 * Both hand back one block: the header struct, then its arrays, then the
 * bytes the arrays point to (keys, names, the value). */
#define _DEFAULT_SOURCE /* flock, dirent */
#include "db.h"
#include "util/error.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>


#include "util/keycmp.h"
#include "ikey.h"
#include "util/hash.h"

/* As in db.c: the counters kv_get moves, moved the same way. */
#define COUNT KV_COUNT

/* ---- kv_explain_get ------------------------------------------------------------------ */

/* A step while the walk runs: where its value (if any) lives until the
 * result block is built. */
struct pending {
    kv_explain_step s;
    const kv_table_meta *meta; /* table steps: its key range, copied at the end */
};

/* The memtable m's answer for the key, as mem_lookup in db.c decides it. */
static int explain_mem(const struct kv_memref *m, int where, const void *key, size_t klen,
                       uint64_t snap, struct pending *p, const void **val, size_t *vlen)
{
    memset(p, 0, sizeof *p);
    p->s.where = where;
    kv_mem_entry e;
    if (kv_mem_get(m->mem, key, klen, snap, &e) != KV_OK)
        return 0; /* absent: the Get goes on */
    p->s.seq = e.seq;
    if (e.kind == KV_KIND_VALUE) {
        p->s.outcome = KV_EXPLAIN_FOUND;
        *val = e.val;
        *vlen = e.vlen;
    } else
        p->s.outcome = KV_EXPLAIN_DELETED;
    return 1;
}

/* One table probed as kv_get_at probes it (the counters included). Returns
 * 1 when the step decides the Get, with *rc its result; 0 to go on. */
static int explain_table(kv_db *db, struct kv_table *t, unsigned level, const uint8_t *ikey,
                         size_t plen, uint64_t h, struct pending *p, void **val, size_t *vlen,
                         int *rc)
{
    memset(p, 0, sizeof *p);
    p->s.where = KV_EXPLAIN_TABLE;
    p->s.level = level;
    p->s.number = t->meta.number;
    p->meta = &t->meta;

    COUNT(db, tables_probed, 1);
    kv_sst_probe pr;
    uint8_t trailer[KV_IKEY_TRAILER];
    size_t tlen = 0;
    *rc = kv_sst_seek_prefixed(t->reader, ikey, plen + KV_IKEY_TRAILER, plen, h, &pr, val, vlen,
                               trailer, sizeof trailer, &tlen);
    if (pr.filter_negative)
        COUNT(db, filter_negatives, 1);
    else if (pr.filter_checked)
        COUNT(db, filter_positives, 1);
    if (pr.false_positive)
        COUNT(db, false_positives, 1);
    if (pr.block_read) {
        COUNT(db, block_reads, 1);
        COUNT(db, block_read_bytes, pr.bytes_read);
        if (db->cache)
            COUNT(db, cache_misses, 1);
    }
    if (pr.cache_hit)
        COUNT(db, cache_hits, 1);

    p->s.filter = pr.filter_negative  ? KV_EXPLAIN_FILTER_NEGATIVE
                  : pr.filter_checked ? KV_EXPLAIN_FILTER_MAYBE
                                      : KV_EXPLAIN_FILTER_NOT_ASKED;
    p->s.block = pr.cache_hit ? KV_EXPLAIN_BLOCK_CACHE
                 : pr.block_read ? KV_EXPLAIN_BLOCK_FILE
                                 : KV_EXPLAIN_BLOCK_NONE;
    if (p->s.block != KV_EXPLAIN_BLOCK_NONE) {
        p->s.block_offset = pr.block_offset;
        p->s.block_bytes = pr.block_bytes;
    }
    p->s.false_positive = pr.false_positive;

    if (*rc == KV_NOTFOUND)
        return 0;
    if (*rc != KV_OK) {
        p->s.outcome = KV_EXPLAIN_FAILED;
        return 1;
    }
    uint64_t seq;
    int kind;
    if (!kv_ikey_get_trailer(trailer, tlen, &seq, &kind) ||
        (kind != KV_KIND_VALUE && kind != KV_KIND_TOMBSTONE)) {
        p->s.outcome = KV_EXPLAIN_FAILED;
        *rc = KV_ECORRUPT;
    } else {
        p->s.seq = seq;
        p->s.outcome = kind == KV_KIND_VALUE ? KV_EXPLAIN_FOUND : KV_EXPLAIN_DELETED;
        if (kind == KV_KIND_TOMBSTONE)
            *rc = KV_NOTFOUND;
    }
    if (*rc != KV_OK) {
        kv_free(*val);
        *val = NULL;
        *vlen = 0;
    }
    return 1;
}

/* The result block: header, steps, key ranges, value. */
static kv_explain *explain_block(const struct pending *steps, size_t n, const void *val,
                                 size_t vlen)
{
    size_t bytes = sizeof(kv_explain) + n * sizeof(kv_explain_step) + vlen + 1;
    for (size_t i = 0; i < n; i++)
        if (steps[i].meta)
            bytes += steps[i].meta->smallest_len + steps[i].meta->largest_len;
    kv_explain *x = calloc(1, bytes);
    if (!x)
        return NULL;
    x->steps = (kv_explain_step *)(x + 1);
    x->nsteps = n;
    uint8_t *q = (uint8_t *)(x->steps + n);
    for (size_t i = 0; i < n; i++) {
        kv_explain_step *s = &x->steps[i];
        *s = steps[i].s;
        const kv_table_meta *m = steps[i].meta;
        if (!m)
            continue;
        if (m->smallest_len)
            memcpy(q, m->smallest, m->smallest_len);
        s->smallest = q;
        s->smallest_len = m->smallest_len;
        q += m->smallest_len;
        if (m->largest_len)
            memcpy(q, m->largest, m->largest_len);
        s->largest = q;
        s->largest_len = m->largest_len;
        q += m->largest_len;
    }
    if (vlen)
        memcpy(q, val, vlen);
    x->value = q;
    x->value_len = vlen;
    return x;
}

int kv_explain_get(kv_db *db, const void *key, size_t klen, kv_explain **out)
{
    if (out)
        *out = NULL;
    if (!db || !out || (klen && !key) || klen > KV_MAX_KEY_SIZE)
        return KV_EINVAL;
    COUNT(db, gets, 1);
    /* The filters' hash, as db.c's hash_key computes it. */
    uint64_t h = kv_hash_key(key, klen, db->seed);

    pthread_mutex_lock(&db->mu);
    struct kv_memref *mem = db->mem, *imm = db->imm;
    struct kv_version *v = db->current;
    atomic_fetch_add(&mem->refs, 1);
    if (imm)
        atomic_fetch_add(&imm->refs, 1);
    atomic_fetch_add(&v->refs, 1);
    uint64_t snap = db->last_seq;
    pthread_mutex_unlock(&db->mu);

    /* At most: two memtables and one step per live table. */
    struct pending *steps = malloc((2 + v->n) * sizeof *steps);
    uint8_t stack[512];
    uint8_t *ikey = NULL;
    size_t plen = 0, n = 0;
    void *tval = NULL;         /* a value found in a table (kv_free) */
    const void *mval = NULL;   /* ... or in a memtable (borrowed) */
    size_t vlen = 0;
    int rc = KV_NOTFOUND, decided = 0, err = KV_OK;
    if (!steps) {
        err = KV_ENOMEM;
        goto out_unref;
    }

    decided = explain_mem(mem, KV_EXPLAIN_MEMTABLE, key, klen, snap, &steps[n++], &mval, &vlen);
    if (!decided && imm)
        decided = explain_mem(imm, KV_EXPLAIN_IMMUTABLE, key, klen, snap, &steps[n++], &mval,
                              &vlen);
    if (decided) {
        COUNT(db, memtable_hits, 1);
        rc = steps[n - 1].s.outcome == KV_EXPLAIN_FOUND ? KV_OK : KV_NOTFOUND;
    }

    /* Level 0 newest first, every table whose range holds the key; then at
     * most one table per deeper level (their ranges are disjoint). */
    for (int level = 0; !decided && level < KV_LEVELS; level++) {
        size_t lo = v->start[level], hi = v->start[level + 1];
        if (level > 0) {
            size_t j = kv_version_find(v, level, key, klen);
            if (j == SIZE_MAX)
                continue;
            lo = j;
            hi = j + 1;
        }
        for (size_t i = lo; !decided && i < hi; i++) {
            struct kv_table *t = v->tables[i];
            if (level == 0 &&
                (kv_key_cmp(key, klen, t->meta.smallest, t->meta.smallest_len) < 0 ||
                 kv_key_cmp(key, klen, t->meta.largest, t->meta.largest_len) > 0))
                continue; /* outside its key range: not probed */
            if (!ikey) {
                size_t need = 2 * klen + 2 + KV_IKEY_TRAILER;
                ikey = need <= sizeof stack ? stack : malloc(need);
                if (!ikey) {
                    err = KV_ENOMEM;
                    goto out_free;
                }
                plen = kv_ikey_put_prefix(ikey, key, klen);
                /* The smallest trailer of sequence `snap`: the lookup lands
                 * on the newest entry with a sequence <= snap. */
                kv_ikey_put_trailer(ikey + plen, snap, 0xFF);
            }
            decided = explain_table(db, t, (unsigned)level, ikey, plen, h, &steps[n++], &tval,
                                    &vlen, &rc);
        }
    }
    if (!decided)
        rc = KV_NOTFOUND;

    kv_explain *x = explain_block(steps, n, rc == KV_OK ? (tval ? tval : mval) : NULL,
                                  rc == KV_OK ? vlen : 0);
    if (!x) {
        err = KV_ENOMEM;
        goto out_free;
    }
    x->result = rc;
    x->hash = h;
    x->snapshot = snap;
    x->live_tables = v->n;
    if (rc != KV_OK)
        x->value = NULL;
    *out = x;

out_free:
    kv_free(tval);
    if (ikey != stack)
        free(ikey);
    free(steps);
out_unref:
    kv_memref_unref(mem);
    kv_memref_unref(imm);
    kv_version_unref(v);
    return err;
}

/* ---- kv_inspect ----------------------------------------------------------------------- */

/* The block kv_inspect hands out: the public part first, so that
 * kv_inspect_free finds the lock from the pointer it is given. */
struct inspection {
    kv_dir_info info;
    int lock_fd;
};

/* A directory entry before it goes into the block. */
struct dent {
    char *name;
    int kind;
    uint64_t number, size;
};

static int dent_cmp(const void *a, const void *b)
{
    return strcmp(((const struct dent *)a)->name, ((const struct dent *)b)->name);
}

/* The search order of version.c: by level; level 0 newest (highest number)
 * first; deeper levels by smallest key. */
static int meta_cmp(const void *pa, const void *pb)
{
    const kv_table_meta *a = pa, *b = pb;
    if (a->level != b->level)
        return a->level < b->level ? -1 : 1;
    if (a->level == 0)
        return a->number > b->number ? -1 : a->number < b->number;
    return kv_key_cmp(a->smallest, a->smallest_len, b->smallest, b->smallest_len);
}

/* Classifies a name the way scan_dir in db.c treats it at open. */
static void classify(struct dent *d, const kv_manifest_state *st, const kv_table_meta *tables,
                     size_t ntables)
{
    const char *name = d->name;
    d->kind = KV_FILE_OTHER;
    if (strcmp(name, KV_MANIFEST_FILE) == 0 || strcmp(name, KV_MANIFEST_FILE "-lock") == 0) {
        d->kind = KV_FILE_MANIFEST;
        return;
    }
    if (strcmp(name, "LOCK") == 0) {
        d->kind = KV_FILE_LOCK;
        return;
    }
    uint64_t n;
    const char *end = kv_db_file_number(name, &n);
    if (!end)
        return;
    d->number = n;
    if (strcmp(end, ".sst") == 0) {
        d->kind = KV_FILE_ORPHAN;
        for (size_t i = 0; i < ntables; i++)
            if (tables[i].number == n)
                d->kind = KV_FILE_TABLE;
    } else if (strcmp(end, ".sst.tmp") == 0)
        d->kind = KV_FILE_TEMP;
    else if (strcmp(end, ".log") == 0)
        d->kind = n >= st->log_number ? KV_FILE_LOG : KV_FILE_OLD_LOG;
}

static void free_dents(struct dent *d, size_t n)
{
    for (size_t i = 0; d && i < n; i++)
        free(d[i].name);
    free(d);
}

/* Every name in the directory but "." and "..", with its size. */
static int list_dir(const char *path, struct dent **out, size_t *nout)
{
    *out = NULL;
    *nout = 0;
    DIR *dir = opendir(path);
    if (!dir)
        return kv_errno_status(errno);
    struct dent *d = NULL;
    size_t n = 0, cap = 0;
    int rc = KV_OK;
    struct dirent *de;
    while ((de = readdir(dir)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (n == cap) {
            size_t nc = cap ? 2 * cap : 32;
            struct dent *bigger = realloc(d, nc * sizeof *d);
            if (!bigger) {
                rc = KV_ENOMEM;
                break;
            }
            d = bigger;
            cap = nc;
        }
        memset(&d[n], 0, sizeof d[n]);
        size_t plen = strlen(path) + strlen(de->d_name) + 2;
        char *full = malloc(plen);
        if (!full || !(d[n].name = strdup(de->d_name))) {
            free(full);
            rc = KV_ENOMEM;
            break;
        }
        snprintf(full, plen, "%s/%s", path, de->d_name);
        struct stat st;
        if (stat(full, &st) == 0)
            d[n].size = (uint64_t)st.st_size;
        free(full);
        n++;
    }
    closedir(dir);
    if (rc != KV_OK) {
        free_dents(d, n);
        return rc;
    }
    if (n > 1)
        qsort(d, n, sizeof *d, dent_cmp);
    *out = d;
    *nout = n;
    return KV_OK;
}

/* Takes the database's lock as kv_open does (flock on LOCK, non-blocking). */
static int take_lock(const char *path, int *fd_out)
{
    *fd_out = -1;
    size_t n = strlen(path) + sizeof "/LOCK";
    char *p = malloc(n);
    if (!p)
        return KV_ENOMEM;
    snprintf(p, n, "%s/LOCK", path);
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 && (errno == EACCES || errno == EROFS))
        fd = open(p, O_RDONLY | O_CLOEXEC); /* a read-only copy can still be read */
    int e = errno;
    free(p);
    if (fd < 0)
        return kv_errno_status(e);
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        e = errno;
        close(fd);
        return e == EWOULDBLOCK ? KV_EBUSY : kv_errno_status(e);
    }
    *fd_out = fd;
    return KV_OK;
}

/* Builds the block from the manifest's state and tables and the listing. */
static struct inspection *inspect_block(const kv_manifest_state *st, kv_table_meta *tables,
                                        size_t nt, const struct dent *files, size_t nf)
{
    size_t bytes = sizeof(struct inspection) + nt * sizeof(kv_dir_table) +
                   nf * sizeof(kv_dir_file);
    for (size_t i = 0; i < nt; i++)
        bytes += tables[i].smallest_len + tables[i].largest_len;
    for (size_t i = 0; i < nf; i++)
        bytes += strlen(files[i].name) + 1;
    struct inspection *in = calloc(1, bytes);
    if (!in)
        return NULL;
    kv_dir_info *info = &in->info;
    info->format_version = st->format_version;
    info->next_file = st->next_file;
    info->last_seq = st->last_seq;
    info->log_number = st->log_number;
    info->seed = st->seed;
    info->tables = (kv_dir_table *)(in + 1);
    info->ntables = nt;
    info->files = (kv_dir_file *)(info->tables + nt);
    info->nfiles = nf;
    uint8_t *q = (uint8_t *)(info->files + nf);

    if (nt > 1)
        qsort(tables, nt, sizeof *tables, meta_cmp);
    for (size_t i = 0; i < nt; i++) {
        const kv_table_meta *m = &tables[i];
        kv_dir_table *t = &info->tables[i];
        t->number = m->number;
        t->level = m->level;
        t->file_size = m->file_size;
        t->entries = m->entries;
        t->min_seq = m->min_seq;
        t->max_seq = m->max_seq;
        t->filter_layout = (int)m->filter_layout;
        t->bits_per_key = m->filter_bits_per_key;
        t->k = m->filter_k;
        t->filter_keys = m->filter_keys;
        for (size_t j = 0; j < nf; j++)
            if (files[j].kind == KV_FILE_TABLE && files[j].number == m->number) {
                t->present = 1;
                t->disk_size = files[j].size;
            }
        if (m->smallest_len)
            memcpy(q, m->smallest, m->smallest_len);
        t->smallest = q;
        t->smallest_len = m->smallest_len;
        q += m->smallest_len;
        if (m->largest_len)
            memcpy(q, m->largest, m->largest_len);
        t->largest = q;
        t->largest_len = m->largest_len;
        q += m->largest_len;
    }
    for (size_t i = 0; i < nf; i++) {
        kv_dir_file *f = &info->files[i];
        size_t len = strlen(files[i].name) + 1;
        memcpy(q, files[i].name, len);
        f->name = (const char *)q;
        q += len;
        f->kind = files[i].kind;
        f->number = files[i].number;
        f->size = files[i].size;
    }
    return in;
}

int kv_inspect(const char *path, kv_dir_info **out)
{
    if (out)
        *out = NULL;
    if (!path || !*path || !out)
        return KV_EINVAL;
    /* No manifest, no database: say so before LOCK could be created. */
    size_t n = strlen(path) + sizeof "/" KV_MANIFEST_FILE;
    char *mpath = malloc(n);
    if (!mpath)
        return KV_ENOMEM;
    snprintf(mpath, n, "%s/%s", path, KV_MANIFEST_FILE);
    struct stat st;
    int have = stat(mpath, &st) == 0;
    int e = errno;
    free(mpath);
    if (!have)
        return kv_errno_status(e);

    int fd, rc = take_lock(path, &fd);
    if (rc != KV_OK)
        return rc;
    kv_manifest *man = NULL;
    kv_manifest_state state;
    kv_table_meta *tables = NULL;
    size_t nt = 0, nf = 0;
    struct dent *files = NULL;
    if ((rc = kv_manifest_open(path, 0, NULL, &man)) != KV_OK)
        goto out_unlock;
    rc = kv_manifest_load(man, &state, &tables, &nt);
    kv_manifest_close(man);
    if (rc != KV_OK)
        goto out_unlock;
    if ((rc = list_dir(path, &files, &nf)) != KV_OK)
        goto out_free_tables;
    for (size_t i = 0; i < nf; i++)
        classify(&files[i], &state, tables, nt);
    struct inspection *in = inspect_block(&state, tables, nt, files, nf);
    if (!in) {
        rc = KV_ENOMEM;
        goto out_free_files;
    }
    in->lock_fd = fd;
    *out = &in->info;
    fd = -1; /* the block holds the lock now */

out_free_files:
    free_dents(files, nf);
out_free_tables:
    kv_manifest_free_tables(tables, nt);
out_unlock:
    if (fd >= 0)
        close(fd); /* releases the flock */
    return rc;
}

void kv_inspect_free(kv_dir_info *info)
{
    if (!info)
        return;
    struct inspection *in = (struct inspection *)((char *)info - offsetof(struct inspection, info));
    if (in->lock_fd >= 0)
        close(in->lock_fd);
    free(in);
}
