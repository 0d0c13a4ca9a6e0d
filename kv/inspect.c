/* inspect.c - kv_inspect: a database's manifest and directory, read
 * without recovery, so nothing is replayed, written or deleted; each file is
 * classified as kv_open would treat it (dbfiles.c). A closed database is
 * read under its LOCK; one a writer holds open, under a pin of the manifest
 * state read (manifest.h: the writer then keeps every file that state
 * names, as for a read-only handle), so that kvtool's db info and db
 * verify work on a live database.
 * The answer is one block: the header struct, then its arrays, then the
 * bytes the arrays point to (keys, names). */
#define _DEFAULT_SOURCE /* dirent */
#include <kv/bloom.h>   /* kv_bloom_secret_check */
#include <kv/kv.h>

#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dbfiles.h"
#include "manifest.h"
#include "util/error.h"
#include "util/keycmp.h"

/* The block kv_inspect hands out: the public part first, so that
 * kv_inspect_free finds the lock from the pointer it is given. */
struct inspection {
    kv_dir_info info;
    int lock_fd;          /* the LOCK, or -1 */
    kv_manifest *man;     /* a live database's: the manifest, opened read-only, */
    kv_manifest_pin *pin; /* ... and the state read, pinned (else NULL) */
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
 * first; deeper levels by sorted run, newest (largest id) first, then by
 * smallest key. */
static int meta_cmp(const void *pa, const void *pb)
{
    const kv_table_meta *a = pa, *b = pb;
    if (a->level != b->level)
        return a->level < b->level ? -1 : 1;
    if (a->level == 0)
        return a->number > b->number ? -1 : a->number < b->number;
    if (a->run != b->run)
        return a->run > b->run ? -1 : 1;
    return kv_key_cmp(a->smallest, a->smallest_len, b->smallest, b->smallest_len);
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
        return kv_error_errno(errno, "%s: opendir", path);
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
        char *full = kv_dbfile_join(path, de->d_name);
        if (!full || !(d[n].name = strdup(de->d_name))) {
            free(full);
            rc = KV_ENOMEM;
            break;
        }
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

/* Builds the block from the manifest's state and tables and the listing. */
static struct inspection *inspect_block(const kv_manifest_state *st, kv_table_meta *tables,
                                        size_t nt, const kv_manifest_blob *blobs, size_t nb,
                                        const struct dent *files, size_t nf)
{
    size_t bytes = sizeof(struct inspection) + nt * sizeof(kv_dir_table) +
                   nb * sizeof(struct kv_dir_blob) + nf * sizeof(kv_dir_file);
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
    info->blobs = (struct kv_dir_blob *)(info->tables + nt);
    info->nblobs = nb;
    info->files = (kv_dir_file *)(info->blobs + nb);
    info->nfiles = nf;
    uint8_t *q = (uint8_t *)(info->files + nf);
    for (size_t i = 0; i < nb; i++) {
        struct kv_dir_blob *b = &info->blobs[i];
        b->number = blobs[i].number;
        b->file_size = blobs[i].file_size;
        b->records = blobs[i].records;
        b->record_bytes = blobs[i].record_bytes;
        b->garbage_records = blobs[i].garbage_records;
        b->garbage_bytes = blobs[i].garbage_bytes;
        for (size_t j = 0; j < nf; j++)
            if (files[j].kind == KV_FILE_BLOB && files[j].number == blobs[i].number) {
                b->present = 1;
                b->disk_size = files[j].size;
            }
    }

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
        t->run = m->run;
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
        return kv_error_set(KV_EINVAL, "kv_inspect: %s", !out ? "out is NULL"
                                                         : path ? "empty path" : "NULL path");
    unsigned long long mark = kv_error_mark();
    /* No manifest, no database: say so before LOCK could be created. A
     * link or a FIFO in its place: refused, with its name in the text. */
    int rc = kv_manifest_check(path, NULL);
    if (rc == KV_NOTFOUND)
        rc = kv_error_set(KV_NOTFOUND, "%s: no database there (no %s)", path, KV_MANIFEST_FILE);
    if (rc != KV_OK)
        return rc;

    /* A look creates nothing that stays: a LOCK made here goes again when
     * the manifest does not open (a directory that is no database). */
    char *lock_path = kv_dbfile_join(path, "LOCK");
    struct stat lst;
    int made_lock = lock_path && lstat(lock_path, &lst) != 0 && errno == ENOENT;
    int fd;
    rc = kv_dbfile_lock(path, &fd);
    int live = rc == KV_EBUSY; /* a writer has it open: read under a pin */
    if (rc != KV_OK && !live) {
        free(lock_path);
        return rc;
    }
    kv_manifest *man = NULL;
    kv_manifest_pin *pin = NULL;
    kv_manifest_state state;
    kv_table_meta *tables = NULL;
    kv_manifest_blob *blobs = NULL;
    size_t nt = 0, nf = 0, nb = 0;
    struct dent *files = NULL;
    if ((rc = live ? kv_manifest_open_ro(path, &man) : kv_manifest_open(path, 0, NULL, &man)) !=
        KV_OK) {
        if (made_lock && fd >= 0)
            unlink(lock_path); /* under the flock still: no one else took it */
        goto out_unlock;
    }
    if (live) {
        rc = kv_manifest_pin_load(man, &pin, &state, &tables, &nt, &blobs, &nb);
    } else {
        rc = kv_manifest_load(man, &state, &tables, &nt);
        if (rc == KV_OK)
            rc = kv_manifest_load_blobs(man, &blobs, &nb);
    }
    /* The filter secret's check value, never the secret: what keyed
     * tables record, for kvtool db verify to compare. */
    uint8_t secret[KV_MANIFEST_SECRET];
    int have_secret = 0;
    if (rc == KV_OK)
        rc = kv_manifest_secret_get(man, secret, &have_secret);
    uint64_t secret_check = have_secret ? kv_bloom_secret_check(secret) : 0;
    memset(secret, 0, sizeof secret);
    if (!live || rc != KV_OK) {
        kv_manifest_pin_unref(pin);
        pin = NULL;
        kv_manifest_close(man);
        man = NULL;
    }
    if (rc == KV_ECORRUPT)
        kv_error_set(rc, "%s/%s: a record failed its checks (doc/manifest.md)", path,
                     KV_MANIFEST_FILE);
    if (rc != KV_OK)
        goto out_unlock;
    if ((rc = list_dir(path, &files, &nf)) != KV_OK)
        goto out_free_tables;
    for (size_t i = 0; i < nf; i++)
        files[i].kind = kv_dbfile_classify(files[i].name, &state, tables, nt, blobs, nb,
                                           &files[i].number);
    struct inspection *in = inspect_block(&state, tables, nt, blobs, nb, files, nf);
    if (!in) {
        rc = KV_ENOMEM;
        goto out_free_files;
    }
    in->lock_fd = fd;
    in->man = man;
    in->pin = pin;
    man = NULL;
    pin = NULL;
    in->info.has_filter_secret = have_secret;
    in->info.filter_secret_check = secret_check;
    *out = &in->info;
    fd = -1; /* the block holds the lock now */

out_free_files:
    free_dents(files, nf);
out_free_tables:
    kv_manifest_free_tables(tables, nt);
    free(blobs);
out_unlock:
    kv_manifest_pin_unref(pin);
    kv_manifest_close(man);
    if (fd >= 0)
        close(fd); /* releases the flock */
    free(lock_path);
    if (rc != KV_OK && !kv_error_since(mark)) /* the rule of status.h */
        kv_error_set(rc, "%s: kv_inspect: %s", path, kv_strerror(rc));
    return rc;
}

void kv_inspect_free(kv_dir_info *info)
{
    if (!info)
        return;
    struct inspection *in = (struct inspection *)((char *)info - offsetof(struct inspection, info));
    if (in->lock_fd >= 0)
        close(in->lock_fd);
    kv_manifest_pin_unref(in->pin); /* before its environment closes */
    kv_manifest_close(in->man);
    free(in);
}
