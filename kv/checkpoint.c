/* checkpoint.c - kv_checkpoint: a new directory that opens as the database
 * held exactly what it held at one point of the call, made while writers
 * and readers go on.
 *
 * Two steps. The capture (capture, one function per kind of handle) takes
 * the cut with no commit leader running (the write queue's hold,
 * kv_db_writes_hold): the manifest state, a reference to the current
 * version (which keeps every table and blob file it names on disk: a file
 * is unlinked only with its last reference), the blob files' records as of
 * that version, and the live logs, each opened there with its length then.
 * Tables plus those log prefixes hold every write acknowledged before the
 * hold and none queued behind it. The hold lasts a few opens and copies of
 * small structs, never I/O of the data.
 *
 * Then, with no lock held: the tables and blob files are hard-linked into
 * dir (copied where dir is on another file system, or the file system
 * refuses links), each log's prefix is copied (from the descriptor opened
 * at the cut, so a log the writer deleted meanwhile still copies), a fresh
 * manifest names them (state, tables, blob records, and the comparator,
 * filter secret and features records where the source has them), and
 * everything copied, the directory and its parent are synced. On any
 * error dir is removed with all it holds. Operators' view: doc/operations.md. */
#define _DEFAULT_SOURCE /* dirent, strdup */
#include "db.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blob.h"
#include "dbfiles.h"
#include "util/error.h"
#include "util/file.h"

/* A live log at the cut: opened there, copied up to len. */
struct cut_log {
    uint64_t number, len;
    kv_file *f;
};

/* Live logs at the cut, at most: a writer has two (the immutable memtable's
 * and the current one); a read-only handle replays what a crashed writer
 * left (a third when recovery was cut short). */
#define CUT_LOGS 8

/* What the checkpoint holds, taken at the cut. */
struct cut {
    kv_manifest_state state; /* next_file past every number in use */
    struct kv_version *v;    /* one reference: its files stay on disk */
    kv_manifest_blob *blobs; /* v's blob files' records at the cut */
    size_t nblobs;
    struct cut_log logs[CUT_LOGS];
    size_t nlogs;
    struct kv_ro_cut ro; /* a read-only handle's (have_ro): holds its manifest pin */
    int have_ro;
};

static void cut_free(struct cut *c)
{
    for (size_t i = 0; i < c->nlogs; i++)
        kv_file_close(c->logs[i].f);
    free(c->blobs);
    kv_version_unref(c->v);
    if (c->have_ro)
        kv_db_ro_cut_free(&c->ro);
    memset(c, 0, sizeof *c);
}

/* Opens live log `number` at the cut into c->logs (its length as it
 * stands). KV_NOTFOUND (no text kept) when it is gone. */
static int cut_open_log(kv_db *db, struct cut *c, uint64_t number)
{
    char *p = kv_dbfile_path(db->path, number, "log");
    if (!p)
        return KV_ENOMEM;
    struct cut_log *l = &c->logs[c->nlogs];
    int rc = kv_file_open(p, &l->f);
    free(p);
    if (rc == KV_OK && (rc = kv_file_size(l->f, &l->len)) != KV_OK) {
        kv_file_close(l->f);
        l->f = NULL;
    }
    if (rc == KV_OK) {
        l->number = number;
        c->nlogs++;
    }
    return rc;
}

/* The cut of a writer's handle, under the hold. The live logs are those
 * numbered from state.log_number to wal_number: the immutable memtable's
 * (when it has one and its flush has not committed) and the current one.
 * A flush deletes its log after its manifest commit and before it installs
 * the version that holds its table (background.c, commit_blobs): a log
 * found gone here is that window, and the capture waits for the install
 * (done_cv; the flush needs nothing the hold keeps) and starts again. A
 * writer without a batch at the head of the queue is such a hold: the group
 * commit never takes one into a group, so the leader before it has
 * finished, and every writer behind it waits (kv_flush holds it the same
 * way). */
static int capture_writer(kv_db *db, struct cut *c)
{
    struct kv_writer w;
    pthread_mutex_lock(&db->mu);
    if (kv_db_writes_hold(db, &w) != KV_OK) {
        pthread_mutex_unlock(&db->mu);
        return KV_ENOMEM;
    }
    int rc;
    for (;;) {
        memset(c, 0, sizeof *c);
        c->state = db->state;
        c->state.next_file = db->next_file; /* past the logs made since the commit */
        c->v = db->current;
        kv_version_ref(c->v);
        rc = KV_OK;
        if (c->v->nblobs && !(c->blobs = malloc(c->v->nblobs * sizeof *c->blobs)))
            rc = KV_ENOMEM;
        for (size_t i = 0; rc == KV_OK && i < c->v->nblobs; i++)
            kv_blob_record(c->v->blobs[i], &c->blobs[c->nblobs++]);
        uint64_t first = c->state.log_number, last = db->wal_number;
        if (rc == KV_OK && first < last) {
            rc = cut_open_log(db, c, first);
            if (rc == KV_NOTFOUND && db->imm) {
                cut_free(c);
                pthread_cond_wait(&db->done_cv, &db->mu);
                continue;
            }
        }
        if (rc == KV_OK)
            rc = cut_open_log(db, c, last);
        if (rc == KV_NOTFOUND)
            rc = kv_error_set(KV_ECORRUPT, "%s: kv_checkpoint: live log %06llu is missing",
                              db->path, (unsigned long long)(c->nlogs ? last : first));
        break;
    }
    kv_db_writes_release(db, &w, KV_OK);
    pthread_mutex_unlock(&db->mu);
    if (rc != KV_OK)
        cut_free(c);
    return rc;
}

/* The cut of a read-only handle (kv_options.read_only): the state it sees
 * (as of its open or last kv_catch_up), which no write through it can
 * change: its pinned manifest state and version (kv_db_ro_cut, whose pin
 * keeps the writer from deleting the tables, blob files and logs of that
 * state: readonly.c) and, of each log it replayed, the bytes it took. The
 * logs are opened here by name (the pin keeps them) and copied up to those
 * bytes, whatever the writer has appended since. */
static int capture_read_only(kv_db *db, struct cut *c)
{
    memset(c, 0, sizeof *c);
    int rc = kv_db_ro_cut(db, &c->ro);
    if (rc != KV_OK)
        return rc;
    c->have_ro = 1;
    c->state = c->ro.state;
    c->v = c->ro.v;
    kv_version_ref(c->v);
    if (c->v->nblobs && !(c->blobs = malloc(c->v->nblobs * sizeof *c->blobs)))
        rc = KV_ENOMEM;
    for (size_t i = 0; rc == KV_OK && i < c->v->nblobs; i++)
        kv_blob_record(c->v->blobs[i], &c->blobs[c->nblobs++]);
    if (c->ro.nlogs > CUT_LOGS)
        rc = kv_error_set(KV_EIO, "%s: kv_checkpoint: %zu live logs, more than %d", db->path,
                          c->ro.nlogs, CUT_LOGS);
    for (size_t i = 0; rc == KV_OK && i < c->ro.nlogs; i++) {
        rc = cut_open_log(db, c, c->ro.logs[i].number);
        if (rc == KV_OK && c->logs[i].len < c->ro.logs[i].bytes)
            rc = kv_error_set(KV_ECORRUPT,
                              "%s: kv_checkpoint: log %06llu is shorter than the "
                              "%llu bytes replayed",
                              db->path, (unsigned long long)c->ro.logs[i].number,
                              (unsigned long long)c->ro.logs[i].bytes);
        else if (rc == KV_OK)
            c->logs[i].len = c->ro.logs[i].bytes;
    }
    if (rc != KV_OK)
        cut_free(c);
    return rc;
}

/* The cut, and next_file past every number it names (a read-only
 * handle's pinned state may trail the logs it replayed). */
static int capture(kv_db *db, struct cut *c)
{
    int rc = db->o.read_only ? capture_read_only(db, c) : capture_writer(db, c);
    if (rc != KV_OK)
        return rc;
    uint64_t *next = &c->state.next_file;
    for (size_t i = 0; i < c->nlogs; i++)
        if (c->logs[i].number >= *next)
            *next = c->logs[i].number + 1;
    for (size_t i = 0; i < c->v->n; i++)
        if (c->v->tables[i]->meta.number >= *next)
            *next = c->v->tables[i]->meta.number + 1;
    for (size_t i = 0; i < c->v->nblobs; i++)
        if (c->v->blobs[i]->number >= *next)
            *next = c->v->blobs[i]->number + 1;
    return KV_OK;
}

/* ---- the files ------------------------------------------------------------------------ */

/* What one checkpoint writes. */
struct cp {
    kv_db *db;
    const char *dir;
    int no_links; /* a link failed as "another file system": copy the rest */
    uint64_t linked, copied, copied_bytes;
};

/* Copies len bytes of src (from its start) to a new file `to`, synced. */
static int copy_prefix(struct cp *cp, kv_file *src, uint64_t len, const char *to)
{
    int rc = kv_file_copy(src, len, to);
    if (rc == KV_OK) {
        cp->copied++;
        cp->copied_bytes += len;
    }
    return rc;
}

/* Links (or, across file systems, copies) the immutable file `from` to
 * dir/<number>.<ext>. A table or blob file is synced before any manifest
 * names it, so a link needs no sync of its own. */
static int place(struct cp *cp, const char *from, uint64_t number, const char *ext)
{
    char *to = kv_dbfile_path(cp->dir, number, ext);
    if (!to)
        return KV_ENOMEM;
    int rc = KV_OK;
    if (!cp->no_links && link(from, to) == 0) {
        cp->linked++;
        free(to);
        return KV_OK;
    }
    if (!cp->no_links) {
        int e = errno;
        if (kv_file_link_refused(e))
            cp->no_links = e == EXDEV;
        else
            rc = kv_error_errno(e, "%s: kv_checkpoint: link to %s", from, to);
    }
    kv_file *src = NULL;
    uint64_t size = 0;
    if (rc == KV_OK && (rc = kv_file_open(from, &src)) == KV_OK &&
        (rc = kv_file_size(src, &size)) == KV_OK)
        rc = copy_prefix(cp, src, size, to);
    kv_file_close(src);
    free(to);
    return rc;
}

/* Removes dir and everything in it (all of it made by this checkpoint). */
static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            char *p = kv_dbfile_join(dir, e->d_name);
            if (p)
                unlink(p);
            free(p);
        }
        closedir(d);
    }
    rmdir(dir);
}

/* The records besides state, tables and blob files that the source's
 * manifest holds: the key order's name, the filter secret, the features
 * record. Each is fixed once written (the features record only appears,
 * with the format version it raises), so they are read after the cut. */
struct extras {
    char comparator[KV_MANIFEST_NAME_MAX + 1];
    int have_comparator, have_secret, have_features;
    uint8_t secret[KV_MANIFEST_SECRET];
    kv_manifest_features features;
};

static int extras_read(kv_db *db, struct extras *x)
{
    memset(x, 0, sizeof *x);
    int rc = kv_manifest_get_comparator(db->man, x->comparator);
    x->have_comparator = rc == KV_OK;
    if (rc == KV_OK || rc == KV_NOTFOUND)
        rc = kv_manifest_secret_get(db->man, x->secret, &x->have_secret);
    if (rc == KV_OK) {
        rc = kv_manifest_get_features(db->man, &x->features);
        x->have_features = rc == KV_OK;
        if (rc == KV_NOTFOUND)
            rc = KV_OK;
    }
    return rc;
}

/* The fresh manifest in dir: the cut's state, tables and blob records,
 * and the extras. Each step is a synced LMDB transaction. */
static int write_manifest(struct cp *cp, const struct cut *c, const struct extras *x)
{
    const struct kv_version *v = c->v;
    kv_table_meta *metas = v->n ? malloc(v->n * sizeof *metas) : NULL;
    if (v->n && !metas)
        return KV_ENOMEM;
    for (size_t i = 0; i < v->n; i++)
        metas[i] = v->tables[i]->meta; /* keys borrowed: the version holds them */
    kv_manifest *m = NULL;
    int rc = kv_manifest_open(cp->dir, 1, &c->state, &m);
    if (rc == KV_OK)
        rc = kv_manifest_apply_blobs(m, &c->state, NULL, 0, metas, v->n, c->blobs, c->nblobs, NULL,
                                     0);
    if (rc == KV_OK && x->have_comparator)
        rc = kv_manifest_set_comparator(m, x->comparator);
    if (rc == KV_OK && x->have_secret)
        rc = kv_manifest_secret_put(m, x->secret);
    if (rc == KV_OK && x->have_features)
        rc = kv_manifest_put_features(m, &x->features, KV_FORMAT_VERSION_FEATURES);
    kv_manifest_close(m);
    free(metas);
    return rc;
}

/* Everything of the cut into cp->dir (made already), synced. */
static int fill(struct cp *cp, const struct cut *c, const struct extras *x)
{
    const struct kv_version *v = c->v;
    int rc = KV_OK;
    for (size_t i = 0; rc == KV_OK && i < v->n; i++)
        rc = place(cp, v->tables[i]->path, v->tables[i]->meta.number, "sst");
    for (size_t i = 0; rc == KV_OK && i < v->nblobs; i++)
        rc = place(cp, v->blobs[i]->path, v->blobs[i]->number, "blob");
    for (size_t i = 0; rc == KV_OK && i < c->nlogs; i++) {
        char *to = kv_dbfile_path(cp->dir, c->logs[i].number, "log");
        rc = to ? copy_prefix(cp, c->logs[i].f, c->logs[i].len, to) : KV_ENOMEM;
        free(to);
    }
    if (rc == KV_OK)
        rc = write_manifest(cp, c, x);
    if (rc == KV_OK)
        rc = kv_file_sync_dir(cp->dir);
    if (rc == KV_OK) { /* dir's own name, in its parent ("a/b/" names b too) */
        char *name = strdup(cp->dir);
        size_t n = name ? strlen(name) : 0;
        while (n > 1 && name[n - 1] == '/')
            name[--n] = '\0';
        rc = name ? kv_file_sync_dir_of(name) : KV_ENOMEM;
        free(name);
    }
    return rc;
}

/* Makes dir: KV_EINVAL (with the reason) when it exists (whatever it is: a
 * link is not followed) or its parent does not; nothing is written then. */
static int make_dir(kv_db *db, const char *dir)
{
    if (mkdir(dir, 0755) == 0)
        return KV_OK;
    int e = errno;
    if (e == EEXIST)
        return kv_db_einval(db, "kv_checkpoint", "%s exists", dir);
    if (e == ENOENT || e == ENOTDIR)
        return kv_db_einval(db, "kv_checkpoint", "the parent of %s is not a directory", dir);
    return kv_error_errno(e, "%s: kv_checkpoint: mkdir %s", db->path, dir);
}

int kv_checkpoint(kv_db *db, const char *dir)
{
    if (!db || !dir || !dir[0])
        return kv_db_einval(db, "kv_checkpoint", "%s is NULL or empty", db ? "dir" : "db");
    unsigned long long mark = kv_error_mark();
    int rc = make_dir(db, dir);
    if (rc != KV_OK)
        return rc;
    struct cut c;
    struct extras x;
    struct cp cp = {.db = db, .dir = dir};
    if ((rc = capture(db, &c)) == KV_OK) {
        if ((rc = extras_read(db, &x)) == KV_OK)
            rc = fill(&cp, &c, &x);
        memset(&x, 0, sizeof x); /* the secret */
        cut_free(&c);
    }
    if (rc != KV_OK) {
        remove_dir(dir);
        return kv_db_fail(db, "kv_checkpoint", mark, rc);
    }
    KV_COUNT(db, checkpoints, 1);
    return KV_OK;
}
