/* crash_states - the crash-state explorer (doc/reliability.md, "Crash
 * states explored"): ALICE's method (Pillai et al., OSDI'14) applied to kv.
 *
 *   crash_states [--ops N] [--seed X] [--points N] [--states N] [--dir D] [--keep] [--verbose]
 *                [--drop .log|.sst.tmp|.blob|dir] [--expect-violations]
 *   KV_CRASH_STATES_LONG=1: a long run (20,000 operations, every crash point, 8 states each)
 *
 * 1. Record. One thread runs a seeded workload on a fresh database: puts,
 *    puts synced through kv_write_opts, deletes, merges (kv_merge_uint64_add),
 *    range deletes, batches of all of these (some synced), flushes,
 *    compactions, closes and reopens, with a 64 KiB memtable so that
 *    flushes and compactions never stop, and one value in six over
 *    min_blob_size (blob files). Every file-system call of the file layer
 *    is recorded through its I/O table (util/file.h, kv_file_set_io) into a
 *    trace: creations, writes with their bytes, fsync, fdatasync, renames,
 *    unlinks, links, truncations and directory syncs; kv/'s own unlink(2)
 *    and link(2) calls are recorded too (the program is linked with
 *    -Wl,--wrap=unlink,--wrap=link). LMDB's writes do not go through the
 *    file layer: each committed write transaction of the MANIFEST is
 *    recorded as the whole file, copied just after mdb_txn_commit returned
 *    (-Wl,--wrap=mdb_txn_commit and friends; LMDB's write transactions are
 *    serialised, and the copy is taken before the next one may begin). The
 *    workload marks the trace before each call (BEGIN m) and after it
 *    returned KV_OK (ACK m, durable or not).
 *
 * 2. Construct. A crash point P is a prefix of the trace: every point just
 *    after a barrier (fsync, fdatasync, directory sync, manifest commit),
 *    and a few between. At P, the file system may keep (the model, also in
 *    doc/reliability.md):
 *    - a write (or truncation) of a file issued before a successful fsync
 *      or fdatasync of that file began and ended before P: kept;
 *    - a later write of the file: any prefix of the file's unsynced writes,
 *      the first one left out possibly torn at a 512-byte sector boundary,
 *      with optionally a 4 KiB-aligned range of the unsynced bytes read as
 *      zeros (pages written back out of order); never bytes nobody wrote;
 *    - a creation, rename, unlink or link in the directory issued before a
 *      directory sync of it began and ended before P: kept. Later ones:
 *      either a prefix of them in issue order (ext4's journal commits them
 *      in order), or any subset in which each name's operations are a
 *      prefix of that name's (weaker than ext4);
 *    - an fsync of a file does not make its directory entry durable;
 *    - the MANIFEST is the copy of its last commit before P (a commit is
 *      atomic and durable when mdb_txn_commit returns); before the first
 *      commit, what mdb_env_open wrote, unsynced.
 *    Each state is sampled by the seed: the least kept, everything kept,
 *    and random choices among the above.
 *
 * 3. Check. Each state is written into a fresh directory and opened with
 *    kv_open, which must succeed; an iterator walk must be sorted, agree
 *    with kv_get on every key, and hold exactly the model's state after
 *    some operation m with S <= m <= B, where S is the last operation
 *    acknowledged before P that was durable (a synced write, kv_flush,
 *    kv_compact_range: everything before it is on disk) and B the last one
 *    begun before P: every synced write, a prefix of the acknowledged
 *    writes with no hole, batches whole, nothing never written; then
 *    kv_close must succeed. A state that fails is a violation: printed,
 *    kept on disk with --keep, and the exit status is 1. */
#define _GNU_SOURCE
#include <kv/kv.h>

#include "util/file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- the trace ----------------------------------------------------------------------- */

enum opkind {
    OP_CREATE,  /* name: a new inode */
    OP_WRITE,   /* ino, off, len, data */
    OP_TRUNC,   /* ino, off: the new size */
    OP_SYNC,    /* ino, covers; flag 1: fdatasync */
    OP_RENAME,  /* name -> name2 */
    OP_UNLINK,  /* name */
    OP_LINK,    /* name -> name2 */
    OP_DIRSYNC, /* covers */
    OP_COMMIT,  /* ino, len, data: the MANIFEST after a commit */
    OP_BEGIN,   /* wop: the workload's operation m begins */
    OP_ACK      /* wop; flag 1: durable */
};

struct op {
    uint8_t kind, flag;
    int32_t ino;
    uint32_t wop;
    char *name, *name2;
    uint64_t off, len;
    uint8_t *data;
    size_t covers; /* OP_SYNC, OP_DIRSYNC: the ops before index covers are covered */
};

static pthread_mutex_t tmu = PTHREAD_MUTEX_INITIALIZER;
static struct op *ops;
static size_t nops, capops;
static _Atomic int recording;
static char dbdir[PATH_MAX];
static int32_t ninodes;
static uint64_t foreign_ops; /* calls on paths outside the database directory */
/* --drop: barriers left out of the trace, as if kv never made them (to see
 * that the check catches a missing sync): a name suffix (".log", ".sst.tmp",
 * ".blob"), "dir" (directory syncs) or NULL. */
static const char *drop;
static char **ino_name; /* the name each inode was created with */
static uint64_t dropped_syncs;

/* The names of the directory while recording: name -> inode. */
struct nsent {
    char *name;
    int32_t ino;
};
static struct nsent *rns;
static size_t nrns, caprns;

static void die(const char *what)
{
    fprintf(stderr, "crash_states: %s\n", what);
    exit(2);
}

/* out = a + "/" + b; a path that does not fit ends the run. */
static void join(char *out, size_t cap, const char *a, const char *b)
{
    int n = snprintf(out, cap, "%s/%s", a, b);
    if (n < 0 || (size_t)n >= cap)
        die("a path is too long");
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        die("out of memory");
    return p;
}

static char *xstrdup(const char *s)
{
    char *p = strdup(s);
    if (!p)
        die("out of memory");
    return p;
}

/* The name of path inside the database directory, or NULL. */
static const char *base(const char *path)
{
    size_t n = strlen(dbdir);
    if (!path || strncmp(path, dbdir, n) != 0 || path[n] != '/' || strchr(path + n + 1, '/'))
        return NULL;
    return path + n + 1;
}

static struct op *push(uint8_t kind) /* tmu held */
{
    if (nops == capops) {
        capops = capops ? capops * 2 : 4096;
        ops = realloc(ops, capops * sizeof *ops);
        if (!ops)
            die("out of memory");
    }
    struct op *o = &ops[nops++];
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->ino = -1;
    return o;
}

static int32_t rns_get(const char *name)
{
    for (size_t i = 0; i < nrns; i++)
        if (strcmp(rns[i].name, name) == 0)
            return rns[i].ino;
    return -1;
}

static void rns_del(const char *name)
{
    for (size_t i = 0; i < nrns; i++)
        if (strcmp(rns[i].name, name) == 0) {
            free(rns[i].name);
            rns[i] = rns[--nrns];
            return;
        }
}

static void rns_set(const char *name, int32_t ino)
{
    rns_del(name);
    if (nrns == caprns) {
        caprns = caprns ? caprns * 2 : 64;
        rns = realloc(rns, caprns * sizeof *rns);
        if (!rns)
            die("out of memory");
    }
    rns[nrns].name = xstrdup(name);
    rns[nrns++].ino = ino;
}

static int32_t new_inode(const char *name) /* tmu held */
{
    ino_name = realloc(ino_name, ((size_t)ninodes + 1) * sizeof *ino_name);
    if (!ino_name)
        die("out of memory");
    ino_name[ninodes] = xstrdup(name);
    return ninodes++;
}

/* Whether --drop leaves this sync of inode ino (-1: the directory) out. */
static int dropping(int32_t ino)
{
    if (!drop)
        return 0;
    if (ino < 0)
        return strcmp(drop, "dir") == 0;
    size_t n = strlen(ino_name[ino]), d = strlen(drop);
    return n >= d && strcmp(ino_name[ino] + n - d, drop) == 0;
}

static uint8_t *copy(const void *p, size_t n)
{
    uint8_t *c = xmalloc(n);
    memcpy(c, p, n);
    return c;
}

/* ---- the I/O table that records ------------------------------------------------------ */

int __real_unlink(const char *path);
int __real_link(const char *from, const char *to);

static int rec_open(const char *path, int flags, mode_t mode, uintptr_t *tag)
{
    pthread_mutex_lock(&tmu);
    int fd = kv_file_io_os.open(path, flags, mode, tag);
    const char *b = base(path);
    if (fd >= 0 && atomic_load(&recording)) {
        if (!b) {
            foreign_ops += (flags & O_CREAT) != 0;
        } else if (flags & O_CREAT) {
            int32_t ino = new_inode(b);
            rns_set(b, ino);
            struct op *o = push(OP_CREATE);
            o->ino = ino;
            o->name = xstrdup(b);
            *tag = (uintptr_t)ino + 1;
        } else {
            int32_t ino = rns_get(b);
            *tag = ino >= 0 ? (uintptr_t)ino + 1 : 0;
        }
    }
    pthread_mutex_unlock(&tmu);
    return fd;
}

static ssize_t rec_pwrite(int fd, uintptr_t tag, const void *buf, size_t len, uint64_t off)
{
    pthread_mutex_lock(&tmu); /* the write and its record, in one step */
    ssize_t r = kv_file_io_os.pwrite(fd, 0, buf, len, off);
    if (r > 0 && tag && atomic_load(&recording)) {
        struct op *o = push(OP_WRITE);
        o->ino = (int32_t)(tag - 1);
        o->off = off;
        o->len = (uint64_t)r;
        o->data = copy(buf, (size_t)r);
    }
    pthread_mutex_unlock(&tmu);
    return r;
}

static int rec_sync(int fd, uintptr_t tag, int data)
{
    pthread_mutex_lock(&tmu);
    size_t covers = nops; /* what was written before the sync began */
    pthread_mutex_unlock(&tmu);
    int r = data ? kv_file_io_os.fdatasync(fd, 0) : kv_file_io_os.fsync(fd, 0);
    if (r == 0 && tag && atomic_load(&recording)) {
        pthread_mutex_lock(&tmu);
        if (dropping((int32_t)(tag - 1))) {
            dropped_syncs++;
            pthread_mutex_unlock(&tmu);
            return r;
        }
        struct op *o = push(OP_SYNC);
        o->ino = (int32_t)(tag - 1);
        o->flag = (uint8_t)data;
        o->covers = covers;
        pthread_mutex_unlock(&tmu);
    }
    return r;
}

static int rec_fsync(int fd, uintptr_t tag)
{
    return rec_sync(fd, tag, 0);
}

static int rec_fdatasync(int fd, uintptr_t tag)
{
    return rec_sync(fd, tag, 1);
}

/* rename, link: name -> name2 (tmu held across the call and its record). */
static int rec_twonames(uint8_t kind, const char *from, const char *to)
{
    pthread_mutex_lock(&tmu);
    int r = kind == OP_RENAME ? kv_file_io_os.rename(from, to) : __real_link(from, to);
    const char *bf = base(from), *bt = base(to);
    if (r == 0 && atomic_load(&recording)) {
        int32_t ino = bf ? rns_get(bf) : -1;
        if (!bf || !bt || ino < 0) {
            foreign_ops++;
        } else {
            if (kind == OP_RENAME)
                rns_del(bf);
            rns_set(bt, ino);
            struct op *o = push(kind);
            o->ino = ino;
            o->name = xstrdup(bf);
            o->name2 = xstrdup(bt);
        }
    }
    pthread_mutex_unlock(&tmu);
    return r;
}

static int rec_rename(const char *from, const char *to)
{
    return rec_twonames(OP_RENAME, from, to);
}

static int rec_link(const char *from, const char *to)
{
    return rec_twonames(OP_LINK, from, to);
}

static int rec_unlink(const char *path)
{
    pthread_mutex_lock(&tmu);
    int r = __real_unlink(path);
    const char *b = base(path);
    if (r == 0 && atomic_load(&recording)) {
        if (!b || rns_get(b) < 0) {
            foreign_ops++;
        } else {
            rns_del(b);
            push(OP_UNLINK)->name = xstrdup(b);
        }
    }
    pthread_mutex_unlock(&tmu);
    return r;
}

static int rec_ftruncate(int fd, uintptr_t tag, uint64_t size)
{
    pthread_mutex_lock(&tmu);
    int r = kv_file_io_os.ftruncate(fd, 0, size);
    if (r == 0 && tag && atomic_load(&recording)) {
        struct op *o = push(OP_TRUNC);
        o->ino = (int32_t)(tag - 1);
        o->off = size;
    }
    pthread_mutex_unlock(&tmu);
    return r;
}

static int rec_sync_dir(const char *dir)
{
    pthread_mutex_lock(&tmu);
    size_t covers = nops;
    pthread_mutex_unlock(&tmu);
    int r = kv_file_io_os.sync_dir(dir);
    if (r == 0 && atomic_load(&recording)) {
        pthread_mutex_lock(&tmu);
        if (strcmp(dir, dbdir) == 0 && dropping(-1))
            dropped_syncs++;
        else if (strcmp(dir, dbdir) == 0)
            push(OP_DIRSYNC)->covers = covers;
        else
            foreign_ops++;
        pthread_mutex_unlock(&tmu);
    }
    return r;
}

static const kv_file_io rec_io = {
    .open = rec_open,
    .pread = NULL, /* set in main: kv_file_io_os.pread */
    .pwrite = rec_pwrite,
    .fsync = rec_fsync,
    .fdatasync = rec_fdatasync,
    .close = NULL, /* set in main */
    .rename = rec_rename,
    .sync_dir = rec_sync_dir,
    .view = NULL,
    .unlink = rec_unlink,
    .link = rec_link,
    .ftruncate = rec_ftruncate,
    .mkdir = NULL,
};

/* kv/'s own unlink(2) and link(2) calls (-Wl,--wrap=unlink,--wrap=link). */
int __wrap_unlink(const char *path);
int __wrap_link(const char *from, const char *to);

int __wrap_unlink(const char *path)
{
    return rec_unlink(path);
}

int __wrap_link(const char *from, const char *to)
{
    return rec_link(from, to);
}

/* ---- the MANIFEST: LMDB's own writes ------------------------------------------------- */

int __real_mdb_env_open(MDB_env *env, const char *path, unsigned int flags, mdb_mode_t mode);
int __real_mdb_txn_begin(MDB_env *env, MDB_txn *parent, unsigned int flags, MDB_txn **txn);
int __real_mdb_txn_commit(MDB_txn *txn);
void __real_mdb_txn_abort(MDB_txn *txn);
int __wrap_mdb_env_open(MDB_env *env, const char *path, unsigned int flags, mdb_mode_t mode);
int __wrap_mdb_txn_begin(MDB_env *env, MDB_txn *parent, unsigned int flags, MDB_txn **txn);
int __wrap_mdb_txn_commit(MDB_txn *txn);
void __wrap_mdb_txn_abort(MDB_txn *txn);

/* Held from the start of a write transaction to the copy of its commit. */
static pthread_mutex_t mdb_mu = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local MDB_txn *write_txn;

static uint8_t *read_whole(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0)
        die("cannot read the MANIFEST");
    uint8_t *buf = xmalloc((size_t)st.st_size);
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t r = pread(fd, buf + got, (size_t)st.st_size - got, (off_t)got);
        if (r <= 0)
            die("cannot read the MANIFEST");
        got += (size_t)r;
    }
    close(fd);
    *len = got;
    return buf;
}

/* Records the MANIFEST's bytes: a commit, or (commit 0) what mdb_env_open
 * wrote into a new file. */
static void manifest_copy(const char *path, int commit)
{
    const char *b = base(path);
    if (!b || !atomic_load(&recording))
        return;
    pthread_mutex_lock(&tmu);
    int32_t ino = rns_get(b);
    if (!commit && ino < 0) {
        ino = new_inode(b);
        rns_set(b, ino);
        struct op *o = push(OP_CREATE);
        o->ino = ino;
        o->name = xstrdup(b);
    } else if (!commit) {
        pthread_mutex_unlock(&tmu);
        return; /* an existing MANIFEST opened again */
    }
    struct op *o = push(commit ? OP_COMMIT : OP_WRITE);
    o->ino = ino;
    o->data = read_whole(path, &o->len);
    pthread_mutex_unlock(&tmu);
}

int __wrap_mdb_env_open(MDB_env *env, const char *path, unsigned int flags, mdb_mode_t mode)
{
    int rc = __real_mdb_env_open(env, path, flags, mode);
    if (rc == MDB_SUCCESS && !(flags & MDB_RDONLY))
        manifest_copy(path, 0);
    return rc;
}

int __wrap_mdb_txn_begin(MDB_env *env, MDB_txn *parent, unsigned int flags, MDB_txn **txn)
{
    int w = !parent && !(flags & MDB_RDONLY);
    if (w)
        pthread_mutex_lock(&mdb_mu);
    int rc = __real_mdb_txn_begin(env, parent, flags, txn);
    if (w && rc == MDB_SUCCESS)
        write_txn = *txn;
    else if (w)
        pthread_mutex_unlock(&mdb_mu);
    return rc;
}

int __wrap_mdb_txn_commit(MDB_txn *txn)
{
    if (!txn || txn != write_txn)
        return __real_mdb_txn_commit(txn);
    const char *path = NULL;
    char p[PATH_MAX] = "";
    if (mdb_env_get_path(mdb_txn_env(txn), &path) == MDB_SUCCESS && path)
        snprintf(p, sizeof p, "%s", path);
    int rc = __real_mdb_txn_commit(txn);
    write_txn = NULL;
    if (rc == MDB_SUCCESS)
        manifest_copy(p, 1);
    pthread_mutex_unlock(&mdb_mu);
    return rc;
}

void __wrap_mdb_txn_abort(MDB_txn *txn)
{
    int w = txn && txn == write_txn;
    __real_mdb_txn_abort(txn);
    if (w) {
        write_txn = NULL;
        pthread_mutex_unlock(&mdb_mu);
    }
}

/* ---- random numbers ------------------------------------------------------------------ */

static uint64_t rnd(uint64_t *s)
{
    uint64_t x = (*s += 0x9E3779B97F4A7C15ull);
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static uint32_t below(uint64_t *s, uint32_t n)
{
    return n ? (uint32_t)(rnd(s) % n) : 0;
}

/* ---- the model ----------------------------------------------------------------------- */

#define NKEYS 96 /* "key000".."key095" */
#define NCTR 8   /* "ctr0".."ctr7": merge counters */
#define NALL (NKEYS + NCTR)

struct ver {
    uint32_t m;  /* the key holds this value from operation m on */
    int32_t len; /* -1: absent */
    uint8_t *val;
};

struct hist {
    struct ver *v;
    size_t n, cap;
};

static struct hist model[NALL];

static void key_name(int i, char *k, size_t *klen)
{
    *klen = i < NKEYS ? (size_t)sprintf(k, "key%03d", i) : (size_t)sprintf(k, "ctr%d", i - NKEYS);
}

static int key_index(const void *k, size_t n)
{
    char b[16];
    if (n >= sizeof b)
        return -1;
    memcpy(b, k, n);
    b[n] = '\0';
    int i;
    char extra;
    if (n == 6 && sscanf(b, "key%3d%c", &i, &extra) == 1 && i >= 0 && i < NKEYS)
        return i;
    if (n == 4 && sscanf(b, "ctr%1d%c", &i, &extra) == 1 && i >= 0 && i < NCTR)
        return NKEYS + i;
    return -1;
}

static const struct ver *model_now(int i)
{
    static const struct ver none = {0, -1, NULL};
    return model[i].n ? &model[i].v[model[i].n - 1] : &none;
}

static void model_set(int i, uint32_t m, const void *val, int32_t len)
{
    struct hist *h = &model[i];
    if (h->n && h->v[h->n - 1].m == m) { /* a batch: the later entry wins */
        free(h->v[h->n - 1].val);
        h->n--;
    }
    if (h->n == h->cap) {
        h->cap = h->cap ? h->cap * 2 : 16;
        h->v = realloc(h->v, h->cap * sizeof *h->v);
        if (!h->v)
            die("out of memory");
    }
    h->v[h->n].m = m;
    h->v[h->n].len = len;
    h->v[h->n].val = len >= 0 ? copy(val, (size_t)len) : NULL;
    h->n++;
}

static void model_add(int i, uint32_t m, uint64_t add)
{
    const struct ver *c = model_now(i);
    uint64_t x = 0;
    if (c->len == 8)
        for (int b = 7; b >= 0; b--)
            x = x << 8 | c->val[b];
    x += add;
    uint8_t v[8];
    for (int b = 0; b < 8; b++)
        v[b] = (uint8_t)(x >> (8 * b));
    model_set(i, m, v, 8);
}

/* ---- the workload -------------------------------------------------------------------- */

static void mark(uint8_t kind, uint32_t m, int durable)
{
    pthread_mutex_lock(&tmu);
    struct op *o = push(kind);
    o->wop = m;
    o->flag = (uint8_t)durable;
    pthread_mutex_unlock(&tmu);
}

static void options(kv_options *o)
{
    kv_options_init(o);
    o->write_buffer_size = (size_t)64 << 10;
    o->target_file_size = (size_t)64 << 10;
    o->max_bytes_for_level_base = (size_t)256 << 10;
    o->l0_compaction_trigger = 2;
    o->block_size = 1024;
    o->blob_file_size = (size_t)64 << 10;
    o->blob_gc_threshold = 0.2;
    o->min_blob_size = 512;
    o->merge_operator = kv_merge_uint64_add();
}

static size_t value_make(uint64_t *r, uint32_t m, int key, uint8_t *v)
{
    size_t len = below(r, 6) == 0 ? 600 + below(r, 2400) : 10 + below(r, 190);
    int h = snprintf((char *)v, 32, "m%u/k%d/", m, key);
    for (size_t j = (size_t)h; j < len; j++)
        v[j] = (uint8_t)('a' + (m * 7 + j * 13 + (size_t)key) % 26);
    return len < (size_t)h ? (size_t)h : len;
}

struct wl {
    kv_db *db;
    uint64_t r;
    uint32_t ops, syncs, batches, merges, ranges, flushes, compactions, reopens, blobs;
};

static void check_rc(int rc, const char *what, uint32_t m)
{
    if (rc != KV_OK) {
        fprintf(stderr, "crash_states: workload op %u (%s): %s: %s\n", m, what, kv_strerror(rc),
                kv_error_text());
        exit(2);
    }
}

/* One entry of a batch (or a call of its own when b is NULL); the model follows. */
static void entry(struct wl *w, kv_batch *b, uint32_t m, uint8_t *v)
{
    char k[16], k2[16];
    size_t kl, kl2;
    uint32_t c = below(&w->r, 100);
    int rc = KV_OK;
    if (c < 60) {
        int i = (int)below(&w->r, NKEYS);
        key_name(i, k, &kl);
        size_t vl = value_make(&w->r, m, i, v);
        w->blobs += vl >= 512;
        rc = b ? kv_batch_put(b, k, kl, v, vl) : kv_put(w->db, k, kl, v, vl);
        model_set(i, m, v, (int32_t)vl);
    } else if (c < 75) {
        int i = (int)below(&w->r, NKEYS);
        key_name(i, k, &kl);
        rc = b ? kv_batch_delete(b, k, kl) : kv_delete(w->db, k, kl);
        if (model_now(i)->len >= 0)
            model_set(i, m, NULL, -1);
    } else if (c < 93) {
        int i = NKEYS + (int)below(&w->r, NCTR);
        key_name(i, k, &kl);
        uint64_t add = 1 + below(&w->r, 1000);
        uint8_t a[8];
        for (int j = 0; j < 8; j++)
            a[j] = (uint8_t)(add >> (8 * j));
        rc = b ? kv_batch_merge(b, k, kl, a, 8) : kv_merge(w->db, k, kl, a, 8);
        model_add(i, m, add);
        w->merges++;
    } else {
        int lo = (int)below(&w->r, NKEYS), hi = lo + 1 + (int)below(&w->r, 8);
        if (hi > NKEYS)
            hi = NKEYS;
        key_name(lo, k, &kl);
        if (hi < NKEYS) {
            key_name(hi, k2, &kl2);
        } else {
            strcpy(k2, "key~");
            kl2 = 4;
        }
        rc = b ? kv_batch_delete_range(b, k, kl, k2, kl2) : kv_delete_range(w->db, k, kl, k2, kl2);
        for (int i = lo; i < hi; i++)
            if (model_now(i)->len >= 0)
                model_set(i, m, NULL, -1);
        w->ranges++;
    }
    check_rc(rc, "write", m);
}

static void workload(struct wl *w, const char *dir, uint32_t n)
{
    kv_options o;
    options(&o);
    uint8_t *v = xmalloc(4096);
    check_rc(kv_open(dir, &o, &w->db), "kv_open", 0);
    kv_batch *b;
    check_rc(kv_batch_new(&b), "kv_batch_new", 0);
    for (uint32_t m = 1; m <= n; m++) {
        uint32_t c = below(&w->r, 1000);
        int durable = 0, rc = KV_OK;
        mark(OP_BEGIN, m, 0);
        if (c < 640) {
            entry(w, NULL, m, v);
        } else if (c < 940) {
            kv_batch_clear(b);
            int one = c < 800; /* a synced write of one entry: a "sync put" */
            uint32_t k = one ? 1 : 2 + below(&w->r, 7);
            for (uint32_t j = 0; j < k; j++)
                entry(w, b, m, v);
            kv_write_options wo = {.sync = one || below(&w->r, 4) == 0};
            durable = wo.sync;
            w->syncs += (uint32_t)wo.sync;
            w->batches += !one;
            rc = kv_write_opts(w->db, &wo, b);
        } else if (c < 975) {
            rc = kv_flush(w->db);
            durable = 1;
            w->flushes++;
        } else if (c < 990) {
            rc = kv_compact_range(w->db, NULL, 0, NULL, 0);
            durable = 1;
            w->compactions++;
        } else {
            rc = kv_close(w->db);
            w->db = NULL;
            check_rc(rc, "kv_close", m);
            rc = kv_open(dir, &o, &w->db);
            w->reopens++;
        }
        check_rc(rc, "call", m);
        mark(OP_ACK, m, durable);
        w->ops = m;
    }
    kv_batch_free(b);
    check_rc(kv_close(w->db), "kv_close", n);
    w->db = NULL;
    free(v);
}

/* ---- building a crash state ---------------------------------------------------------- */

struct file {
    uint8_t *data;
    uint64_t len, cap;
};

static void file_write(struct file *f, uint64_t off, const uint8_t *p, uint64_t n)
{
    if (off + n > f->cap) {
        f->cap = (off + n) * 2;
        f->data = realloc(f->data, f->cap);
        if (!f->data)
            die("out of memory");
    }
    if (off > f->len)
        memset(f->data + f->len, 0, off - f->len);
    memcpy(f->data + off, p, n);
    if (off + n > f->len)
        f->len = off + n;
}

static void file_trunc(struct file *f, uint64_t size)
{
    if (size > f->len) {
        uint8_t z = 0;
        for (uint64_t o = f->len; o < size; o++)
            file_write(f, o, &z, 1);
    }
    f->len = size;
}

enum { V_LEAST = 0, V_MOST = 1 }; /* other variants: random */

struct state {
    size_t point; /* ops [0, point) happened */
    unsigned variant;
    uint32_t lo, hi; /* S and B of the check */
    char desc[256];
};

/* A name of the crash state: which inode it holds. */
struct sname {
    const char *name;
    int32_t ino;
};

static size_t sn_find(struct sname *ns, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(ns[i].name, name) == 0)
            return i;
    return n;
}

/* The directory of the state: which creations, renames, unlinks and links
 * survive. Returns the names in ns (cap entries at most). */
static size_t build_names(const struct state *s, uint64_t *r, struct sname *ns, size_t cap,
                          unsigned *dropped)
{
    size_t forced = 0; /* directory operations before it are durable */
    for (size_t i = 0; i < s->point; i++)
        if (ops[i].kind == OP_DIRSYNC && ops[i].covers > forced)
            forced = ops[i].covers;
    /* Later ones: V_LEAST none, V_MOST all; else, one state in two, a
     * prefix (ext4's journal order) or a subset closed under each name's
     * order. */
    int prefix = below(r, 2) == 0;
    uint32_t keep_pct = below(r, 101);
    int stopped = 0;
    /* names whose next operation may no longer survive (any-subset mode) */
    const char *blocked[256];
    size_t nblocked = 0;
    size_t n = 0;
    *dropped = 0;
    for (size_t i = 0; i < s->point; i++) {
        const struct op *o = &ops[i];
        if (o->kind != OP_CREATE && o->kind != OP_RENAME && o->kind != OP_UNLINK &&
            o->kind != OP_LINK)
            continue;
        int keep = 1;
        if (i >= forced) {
            if (s->variant == V_LEAST)
                keep = 0;
            else if (s->variant == V_MOST)
                keep = 1;
            else if (prefix)
                keep = !stopped && (stopped = below(r, 100) >= keep_pct) == 0;
            else {
                int blk = 0;
                for (size_t j = 0; j < nblocked; j++)
                    blk |= strcmp(blocked[j], o->name) == 0 ||
                           (o->name2 && strcmp(blocked[j], o->name2) == 0);
                keep = !blk && below(r, 100) < keep_pct;
                if (!keep && nblocked + 2 <= sizeof blocked / sizeof *blocked) {
                    blocked[nblocked++] = o->name;
                    if (o->name2)
                        blocked[nblocked++] = o->name2;
                }
            }
        }
        if (!keep) {
            (*dropped)++;
            continue;
        }
        size_t at = sn_find(ns, n, o->name);
        switch (o->kind) {
        case OP_CREATE:
            if (at == n && n < cap)
                n++;
            ns[at].name = o->name;
            ns[at].ino = o->ino;
            break;
        case OP_UNLINK:
            if (at < n)
                ns[at] = ns[--n];
            break;
        case OP_RENAME:
        case OP_LINK: {
            if (at == n)
                break; /* its source did not survive (cannot happen: names keep their order) */
            int32_t ino = ns[at].ino;
            if (o->kind == OP_RENAME)
                ns[at] = ns[--n];
            size_t to = sn_find(ns, n, o->name2);
            if (to == n && n < cap)
                n++;
            ns[to].name = o->name2;
            ns[to].ino = ino;
            break;
        }
        }
    }
    return n;
}

/* The bytes inode `ino` holds in the state. */
static void build_file(const struct state *s, uint64_t *r, int32_t ino, struct file *f,
                       unsigned *torn)
{
    f->len = 0;
    size_t start = 0, covered = 0;
    for (size_t i = 0; i < s->point; i++) {
        const struct op *o = &ops[i];
        if (o->ino != ino)
            continue;
        if (o->kind == OP_COMMIT)
            start = i; /* replaces the whole file, durably */
        if (o->kind == OP_SYNC && o->covers > covered)
            covered = o->covers;
    }
    /* Unsynced writes: V_LEAST none, V_MOST all; else keep 0..all of them
     * in order, the first one left out torn at a sector, maybe a page of
     * the unsynced bytes read as zeros. */
    uint32_t mode = s->variant <= V_MOST ? 0 : below(r, 4);
    size_t nun = 0;
    for (size_t i = start; i < s->point; i++)
        nun += i >= covered && ops[i].ino == ino &&
               (ops[i].kind == OP_WRITE || ops[i].kind == OP_TRUNC);
    size_t keep = s->variant == V_LEAST               ? 0
                  : s->variant == V_MOST || mode == 1 ? nun
                  : mode == 0                         ? 0
                                                      : below(r, (uint32_t)nun + 1);
    uint64_t synced_len = 0;
    size_t seen = 0;
    for (size_t i = start; i < s->point; i++) {
        const struct op *o = &ops[i];
        if (o->ino != ino)
            continue;
        if (o->kind == OP_COMMIT) {
            f->len = 0;
            file_write(f, 0, o->data, o->len);
            synced_len = f->len;
            continue;
        }
        if (o->kind != OP_WRITE && o->kind != OP_TRUNC)
            continue;
        if (i >= covered) {
            if (seen++ >= keep) {
                if (seen == keep + 1 && mode >= 2 && o->kind == OP_WRITE) {
                    /* torn: the sectors before a 512-byte boundary inside it */
                    uint64_t end = (o->off + o->len) / 512 * 512;
                    if (end > o->off) {
                        uint64_t cut = o->off / 512 * 512 + 512;
                        cut += (uint64_t)below(r, (uint32_t)((end - cut) / 512 + 1)) * 512;
                        if (cut > o->off && cut < o->off + o->len) {
                            file_write(f, o->off, o->data, cut - o->off);
                            (*torn)++;
                        }
                    }
                }
                break;
            }
        }
        if (o->kind == OP_WRITE)
            file_write(f, o->off, o->data, o->len);
        else
            file_trunc(f, o->off);
        if (i < covered)
            synced_len = f->len;
    }
    if (mode == 3 && f->len > synced_len) { /* a page of the unsynced bytes never written */
        uint64_t p0 = (synced_len + 4095) / 4096 * 4096;
        if (p0 + 4096 <= f->len) {
            uint64_t pages = (f->len - p0) / 4096;
            uint64_t p = p0 + (uint64_t)below(r, (uint32_t)pages) * 4096;
            memset(f->data + p, 0, 4096);
            (*torn)++;
        }
    }
}

static void rm_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char p[PATH_MAX];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            join(p, sizeof p, dir, e->d_name);
            struct stat st;
            if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
                rm_tree(p);
            else
                unlink(p);
        }
    closedir(d);
    rmdir(dir);
}

static void write_file(const char *path, const struct file *f)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        die("cannot write a crash state's file");
    for (uint64_t o = 0; o < f->len;) {
        ssize_t w = pwrite(fd, f->data + o, f->len - o, (off_t)o);
        if (w <= 0)
            die("cannot write a crash state's file");
        o += (uint64_t)w;
    }
    close(fd);
}

/* Writes the state into dir; a line saying what it kept into s->desc. */
static void materialize(struct state *s, uint64_t seed, const char *dir)
{
    uint64_t r = seed;
    struct sname ns[512];
    unsigned dropped = 0, torn = 0;
    size_t n = build_names(s, &r, ns, 512, &dropped);
    if (mkdir(dir, 0755) != 0)
        die("cannot make a crash state's directory");
    struct file f = {0};
    char p[PATH_MAX];
    for (size_t i = 0; i < n; i++) {
        build_file(s, &r, ns[i].ino, &f, &torn);
        join(p, sizeof p, dir, ns[i].name);
        write_file(p, &f);
    }
    free(f.data);
    snprintf(s->desc, sizeof s->desc,
             "point %zu of %zu, variant %u: %zu files, %u directory ops lost, %u torn", s->point,
             nops, s->variant, n, dropped, torn);
}

/* ---- checking a state ---------------------------------------------------------------- */

struct obs {
    int32_t len; /* -1 absent */
    uint8_t *val;
};

static int ver_eq(const struct ver *v, const struct obs *o)
{
    return v->len == o->len && (v->len <= 0 || memcmp(v->val, o->val, (size_t)v->len) == 0);
}

static unsigned verbose;

/* 0 when the state is what the contract allows, else 1 (printed). */
static int check_state(const struct state *s, const char *dir)
{
    kv_options o;
    options(&o);
    kv_db *db;
    int rc = kv_open(dir, &o, &db);
    if (rc != KV_OK) {
        printf("VIOLATION (%s): kv_open: %s: %s\n", s->desc, kv_strerror(rc), kv_error_text());
        return 1;
    }
    struct obs obs[NALL];
    for (int i = 0; i < NALL; i++)
        obs[i] = (struct obs){-1, NULL};
    int bad = 0;
    kv_iter *it;
    if ((rc = kv_iter_new(db, NULL, &it)) != KV_OK) {
        printf("VIOLATION (%s): kv_iter_new: %s\n", s->desc, kv_strerror(rc));
        kv_close(db);
        return 1;
    }
    int prev = -1;
    for (kv_iter_seek_first(it); kv_iter_valid(it) && !bad; kv_iter_next(it)) {
        size_t kl, vl;
        const void *k = kv_iter_key(it, &kl), *v = kv_iter_value(it, &vl);
        int i = key_index(k, kl);
        if (i < 0) {
            printf("VIOLATION (%s): the iterator returned a key never written (%zu bytes)\n",
                   s->desc, kl);
            bad = 1;
            break;
        }
        /* ctr* sorts before key*: order by name, i.e. counters first */
        int ord = i >= NKEYS ? i - NKEYS : NCTR + i;
        if (ord <= prev) {
            printf("VIOLATION (%s): the iterator is out of order or repeats a key\n", s->desc);
            bad = 1;
        }
        prev = ord;
        obs[i].len = (int32_t)vl;
        obs[i].val = copy(v, vl);
    }
    if (!bad && (rc = kv_iter_status(it)) != KV_OK) {
        printf("VIOLATION (%s): the iterator failed: %s: %s\n", s->desc, kv_strerror(rc),
               kv_error_text());
        bad = 1;
    }
    /* Backwards: the same keys and values in reverse. */
    int back = NALL;
    for (kv_iter_seek_last(it); kv_iter_valid(it) && !bad; kv_iter_prev(it)) {
        size_t kl, vl;
        const void *k = kv_iter_key(it, &kl), *v = kv_iter_value(it, &vl);
        int i = key_index(k, kl);
        int want = back - 1; /* the next present key below `back`, in key order */
        while (want >= 0 && obs[want < NCTR ? NKEYS + want : want - NCTR].len < 0)
            want--;
        int wi = want < 0 ? -1 : want < NCTR ? NKEYS + want : want - NCTR;
        if (i < 0 || i != wi || obs[i].len != (int32_t)vl || memcmp(obs[i].val, v, vl) != 0) {
            printf("VIOLATION (%s): the backward walk disagrees with the forward walk\n", s->desc);
            bad = 1;
        }
        back = want;
    }
    if (!bad && ((rc = kv_iter_status(it)) != KV_OK || back > 0)) {
        int want = back - 1;
        while (want >= 0 && obs[want < NCTR ? NKEYS + want : want - NCTR].len < 0)
            want--;
        if (rc != KV_OK || want >= 0) {
            printf("VIOLATION (%s): the backward walk ended early (%s)\n", s->desc,
                   kv_strerror(rc));
            bad = 1;
        }
    }
    kv_iter_free(it);
    for (int i = 0; i < NALL && !bad; i++) {
        char k[16];
        size_t kl, vl;
        void *v;
        key_name(i, k, &kl);
        rc = kv_get(db, k, kl, &v, &vl);
        struct obs g = {rc == KV_OK ? (int32_t)vl : -1, rc == KV_OK ? v : NULL};
        if ((rc != KV_OK && rc != KV_NOTFOUND) || g.len != obs[i].len ||
            (g.len > 0 && memcmp(g.val, obs[i].val, vl) != 0)) {
            printf("VIOLATION (%s): kv_get(%s) (%s) disagrees with the iterator\n", s->desc, k,
                   kv_strerror(rc));
            bad = 1;
        }
        if (rc == KV_OK)
            kv_free(v);
    }
    /* Which m in [lo, hi] every key agrees with: a difference array. */
    uint32_t lo = s->lo, hi = s->hi, w = hi - lo + 1;
    int32_t *cnt = calloc((size_t)w + 1, sizeof *cnt);
    if (!cnt)
        die("out of memory");
    for (int i = 0; i < NALL && !bad; i++) {
        const struct hist *h = &model[i];
        struct ver none = {0, -1, NULL};
        for (size_t j = 0; j <= h->n; j++) {
            const struct ver *v = j == 0 ? &none : &h->v[j - 1];
            uint32_t from = v->m, to = j < h->n ? h->v[j].m - 1 : UINT32_MAX;
            if (j < h->n && h->v[j].m == 0)
                continue;
            if (!ver_eq(v, &obs[i]))
                continue;
            uint32_t a = from > lo ? from : lo, b = to < hi ? to : hi;
            if (a <= b) {
                cnt[a - lo]++;
                cnt[b - lo + 1]--;
            }
        }
    }
    uint32_t found = UINT32_MAX;
    int32_t run = 0, best = -1;
    uint32_t best_m = lo;
    for (uint32_t j = 0; j < w && !bad; j++) {
        run += cnt[j];
        if (run > best) {
            best = run;
            best_m = lo + j;
        }
        if (run == NALL) {
            found = lo + j;
            break;
        }
    }
    if (!bad && found == UINT32_MAX) {
        printf("VIOLATION (%s): no operation m in [%u, %u] explains the database (best: m = %u, "
               "%d of %d keys agree); keys that differ:",
               s->desc, lo, hi, best_m, best, NALL);
        int shown = 0;
        for (int i = 0; i < NALL && shown < 6; i++) {
            const struct hist *h = &model[i];
            const struct ver *v = NULL;
            for (size_t j = 0; j < h->n && h->v[j].m <= best_m; j++)
                v = &h->v[j];
            struct ver none = {0, -1, NULL};
            if (!ver_eq(v ? v : &none, &obs[i])) {
                char k[16];
                size_t kl;
                key_name(i, k, &kl);
                printf(" %s (has %d bytes, model %d)", k, obs[i].len, v ? v->len : -1);
                shown++;
            }
        }
        printf("\n");
        bad = 1;
    } else if (verbose > 1 && !bad) {
        printf("ok (%s): m = %u in [%u, %u]\n", s->desc, found, lo, hi);
    }
    free(cnt);
    for (int i = 0; i < NALL; i++)
        free(obs[i].val);
    rc = kv_close(db);
    if (!bad && rc != KV_OK) {
        printf("VIOLATION (%s): kv_close: %s: %s\n", s->desc, kv_strerror(rc), kv_error_text());
        bad = 1;
    }
    return bad;
}

/* ---- the whole-trace check: the recorder saw every file ------------------------------ */

/* Materializes everything the trace wrote and compares it with the
 * workload's directory: a file the recorder missed shows here. */
static int check_recorder(const char *work, const char *dir)
{
    struct state s = {.point = nops, .variant = V_MOST};
    materialize(&s, 1, dir);
    int bad = 0;
    DIR *d = opendir(work);
    struct dirent *e;
    char a[PATH_MAX], b[PATH_MAX];
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.' || strcmp(e->d_name, "LOCK") == 0 ||
            strcmp(e->d_name, "MANIFEST-lock") == 0)
            continue;
        join(a, sizeof a, work, e->d_name);
        join(b, sizeof b, dir, e->d_name);
        size_t la, lb;
        struct stat st;
        if (stat(b, &st) != 0) {
            printf("recorder: %s is not in the trace\n", e->d_name);
            bad = 1;
            continue;
        }
        uint8_t *pa = read_whole(a, &la), *pb = read_whole(b, &lb);
        if (la != lb || memcmp(pa, pb, la) != 0) {
            printf("recorder: %s differs from the trace (%zu bytes, trace %zu)\n", e->d_name, la,
                   lb);
            bad = 1;
        }
        free(pa);
        free(pb);
    }
    if (d)
        closedir(d);
    rm_tree(dir);
    return bad;
}

/* ---- main ---------------------------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr, "usage: crash_states [--ops N] [--seed X] [--points N] [--states N] "
                    "[--dir D] [--keep] [--verbose] [--drop .log|.sst.tmp|.blob|dir] "
                    "[--expect-violations]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *env = getenv("KV_CRASH_STATES_LONG");
    int lng = env && *env && strcmp(env, "0") != 0;
    uint32_t nwops = lng ? 20000 : 1500;
    uint64_t seed = (uint64_t)time(NULL);
    size_t max_points = SIZE_MAX;
    unsigned per_point = lng ? 8 : 3;
    int keep = 0, seeded = 0, expect = 0;
    const char *top = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--keep") == 0) {
            keep = 1;
            continue;
        }
        if (strcmp(a, "--expect-violations") == 0) {
            expect = 1;
            continue;
        }
        if (strcmp(a, "--verbose") == 0 || strcmp(a, "-v") == 0) {
            verbose++;
            continue;
        }
        if (!v)
            usage();
        i++;
        if (strcmp(a, "--ops") == 0)
            nwops = (uint32_t)strtoul(v, NULL, 10);
        else if (strcmp(a, "--seed") == 0)
            seed = strtoull(v, NULL, 0), seeded = 1;
        else if (strcmp(a, "--points") == 0)
            max_points = (size_t)strtoull(v, NULL, 10);
        else if (strcmp(a, "--states") == 0)
            per_point = (unsigned)strtoul(v, NULL, 10);
        else if (strcmp(a, "--dir") == 0)
            top = v;
        else if (strcmp(a, "--drop") == 0)
            drop = v;
        else
            usage();
    }
    if (!seeded && !lng)
        seed = 52; /* ctest: the same states every run; --seed for others */
    if (nwops < 1 || per_point < 1)
        usage();
    /* tmpfs when there is one: the states' fsyncs cost nothing there */
    char root[PATH_MAX];
    struct stat st;
    if (!top)
        top = getenv("KV_CRASH_STATES_DIR");
    if (!top)
        top = stat("/dev/shm", &st) == 0 && access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(root, sizeof root, "%s/kv_crash_states.%d", top, (int)getpid());
    if (mkdir(root, 0755) != 0)
        die("cannot make the work directory");
    char work[PATH_MAX], sdir[PATH_MAX];
    join(work, sizeof work, root, "db");
    snprintf(dbdir, sizeof dbdir, "%s", work);
    if (mkdir(work, 0755) != 0)
        die("cannot make the database directory");

    static kv_file_io io;
    io = rec_io;
    io.pread = kv_file_io_os.pread;
    io.close = kv_file_io_os.close;
    kv_file_set_io(&io);
    atomic_store(&recording, 1);
    struct wl w = {.r = seed};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    workload(&w, work, nwops);
    atomic_store(&recording, 0);

    size_t counts[OP_ACK + 1] = {0};
    uint64_t bytes = 0, overwrites = 0;
    uint64_t *size = calloc((size_t)ninodes + 1, sizeof *size);
    if (!size)
        die("out of memory");
    for (size_t i = 0; i < nops; i++) {
        const struct op *o = &ops[i];
        counts[o->kind]++;
        if (o->kind == OP_WRITE) { /* the model tears appends; say whether kv does more */
            bytes += o->len;
            overwrites += o->off != size[o->ino];
            if (o->off + o->len > size[o->ino])
                size[o->ino] = o->off + o->len;
        }
    }
    free(size);
    printf("crash_states: seed %" PRIu64 ", %u operations (%u synced, %u batches, %u merges, %u "
           "range deletes, %u flushes, %u compactions, %u reopens, %u blob-sized values)\n",
           seed, w.ops, w.syncs, w.batches, w.merges, w.ranges, w.flushes, w.compactions, w.reopens,
           w.blobs);
    printf("trace: %zu file-system operations: %zu creates, %zu writes (%" PRIu64 " bytes), %zu "
           "truncates, %zu fsync/fdatasync, %zu renames, %zu unlinks, %zu links, %zu directory "
           "syncs, %zu manifest commits; %" PRIu64 " writes not at the file's end, %" PRIu64
           " calls outside the directory\n",
           nops - counts[OP_BEGIN] - counts[OP_ACK], counts[OP_CREATE], counts[OP_WRITE], bytes,
           counts[OP_TRUNC], counts[OP_SYNC], counts[OP_RENAME], counts[OP_UNLINK], counts[OP_LINK],
           counts[OP_DIRSYNC], counts[OP_COMMIT], overwrites, foreign_ops);
    if (drop)
        printf("--drop %s: %" PRIu64 " syncs left out of the trace\n", drop, dropped_syncs);
    fflush(stdout);

    join(sdir, sizeof sdir, root, "state");
    int failures = 0;
    if (check_recorder(work, sdir) != 0) {
        printf("crash_states: the trace does not account for the database's files\n");
        failures++;
    }

    /* Crash points: after every barrier, and between them after an ACK. */
    size_t *pts = xmalloc((nops + 1) * sizeof *pts), np = 0;
    for (size_t i = 0; i < nops; i++) {
        uint8_t k = ops[i].kind;
        int barrier = k == OP_SYNC || k == OP_DIRSYNC || k == OP_COMMIT;
        if (barrier || (k == OP_ACK && (lng || rnd(&w.r) % 8 == 0)))
            pts[np++] = i + 1;
    }
    pts[np++] = nops;
    /* Fewer than all: a seeded sample, in order. */
    if (np > max_points) {
        uint64_t r = seed ^ 0x5eed;
        for (size_t i = 0; i < max_points; i++) { /* partial Fisher-Yates */
            size_t j = i + (size_t)(rnd(&r) % (np - i));
            size_t t = pts[i];
            pts[i] = pts[j];
            pts[j] = t;
        }
        np = max_points;
        for (size_t i = 1; i < np; i++) /* insertion sort: np is small */
            for (size_t j = i; j > 0 && pts[j - 1] > pts[j]; j--) {
                size_t t = pts[j];
                pts[j] = pts[j - 1];
                pts[j - 1] = t;
            }
    }
    uint64_t states = 0, violations = 0;
    uint32_t lo = 0, hi = 0;
    size_t walked = 0;
    for (size_t pi = 0; pi < np; pi++) {
        struct state s = {.point = pts[pi]};
        for (; walked < s.point; walked++) { /* S and B at this point */
            const struct op *o = &ops[walked];
            if (o->kind == OP_BEGIN)
                hi = o->wop;
            if (o->kind == OP_ACK && o->flag)
                lo = o->wop;
        }
        s.lo = lo;
        s.hi = hi;
        for (unsigned v = 0; v < per_point; v++) {
            s.variant = v;
            materialize(&s, seed * 1000003 + s.point * 31 + v, sdir);
            int bad = check_state(&s, sdir);
            states++;
            violations += (uint64_t)bad;
            if ((lng || verbose) && states % 10000 == 0) {
                printf("... %" PRIu64 " states, point %zu of %zu, %" PRIu64 " violations\n", states,
                       pi + 1, np, violations);
                fflush(stdout);
            }
            if (bad && keep) {
                char kept[PATH_MAX], name[64];
                snprintf(name, sizeof name, "violation.%" PRIu64, violations);
                join(kept, sizeof kept, root, name);
                rename(sdir, kept);
                printf("  kept in %s\n", kept);
            } else {
                rm_tree(sdir);
            }
            if (violations >= 20) {
                printf("crash_states: stopping after 20 violations\n");
                pi = np;
                break;
            }
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("crash_states: %" PRIu64 " crash states checked at %zu crash points, %" PRIu64
           " violations (%.1f s)\n",
           states, np, violations, secs);
    if (!keep || (!violations && !failures))
        rm_tree(root);
    for (size_t i = 0; i < nops; i++) {
        free(ops[i].name);
        free(ops[i].name2);
        free(ops[i].data);
    }
    free(ops);
    free(pts);
    for (int i = 0; i < NALL; i++) {
        for (size_t j = 0; j < model[i].n; j++)
            free(model[i].v[j].val);
        free(model[i].v);
    }
    for (int32_t i = 0; i < ninodes; i++)
        free(ino_name[i]);
    free(ino_name);
    for (size_t i = 0; i < nrns; i++)
        free(rns[i].name);
    free(rns);
    if (expect) /* --drop's self-test: the check must see what is missing */
        return violations && !failures ? 0 : 1;
    return violations || failures ? 1 : 0;
}
