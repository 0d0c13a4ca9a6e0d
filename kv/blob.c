/* blob.c - live blob files and the blob output of flushes and compactions
 * (see blob.h). */
#define _POSIX_C_SOURCE 200809L
#include "blob.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db.h"
#include "dbfiles.h"
#include "util/error.h"
#include "util/file.h"

/* ---- live files ------------------------------------------------------------------------ */

int kv_blob_open(kv_db *db, const kv_manifest_blob *rec, struct kv_blob **out)
{
    *out = NULL;
    struct kv_blob *b = calloc(1, sizeof *b);
    char *path = kv_dbfile_path(db->path, rec->number, "blob");
    if (!b || !path) {
        free(b);
        free(path);
        return kv_error_set(KV_ENOMEM, "%s: blob file %llu: out of memory", db->path,
                            (unsigned long long)rec->number);
    }
    int rc = kv_blob_reader_open_pooled(path, rec->number, db->blob_files, &b->reader);
    if (rc == KV_NOTFOUND) /* named by the manifest, so its loss is damage */
        rc = kv_error_set(KV_ECORRUPT, "%s: missing, though the manifest names it", path);
    if (rc == KV_OK) {
        kv_blob_file_info info;
        kv_blob_reader_info(b->reader, &info);
        if (info.records != rec->records || info.record_bytes != rec->record_bytes ||
            info.file_size != rec->file_size)
            rc = kv_error_set(KV_ECORRUPT,
                              "%s: holds %llu records, %llu bytes in a file of %llu; the "
                              "manifest says %llu, %llu and %llu",
                              path, (unsigned long long)info.records,
                              (unsigned long long)info.record_bytes,
                              (unsigned long long)info.file_size,
                              (unsigned long long)rec->records,
                              (unsigned long long)rec->record_bytes,
                              (unsigned long long)rec->file_size);
    }
    if (rc != KV_OK) {
        kv_blob_reader_close(b->reader);
        free(path);
        free(b);
        return rc;
    }
    atomic_init(&b->refs, 1);
    b->number = rec->number;
    b->file_size = rec->file_size;
    b->records = rec->records;
    b->record_bytes = rec->record_bytes;
    atomic_init(&b->garbage_records, rec->garbage_records);
    atomic_init(&b->garbage_bytes, rec->garbage_bytes);
    b->path = path;
    b->man = db->o.read_only ? NULL : db->man;
    *out = b;
    return KV_OK;
}

void kv_blob_file_ref(struct kv_blob *b)
{
    atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
}

void kv_blob_file_unref(struct kv_blob *b)
{
    if (b && atomic_fetch_sub(&b->refs, 1) == 1) {
        kv_blob_reader_close(b->reader);
        /* Every record garbage, and no version holds it. A crash before
         * this leaves a file the manifest does not name: the next open
         * deletes it. */
        if (atomic_load(&b->obsolete) && b->path) {
            if (b->man) /* once no reader of an older manifest state needs it */
                kv_manifest_unlink(b->man, b->path, atomic_load(&b->dead_txn));
            else
                unlink(b->path);
        }
        free(b->path);
        free(b);
    }
}

void kv_blob_record(const struct kv_blob *b, kv_manifest_blob *out)
{
    out->number = b->number;
    out->file_size = b->file_size;
    out->records = b->records;
    out->record_bytes = b->record_bytes;
    out->garbage_records = atomic_load_explicit(&b->garbage_records, memory_order_relaxed);
    out->garbage_bytes = atomic_load_explicit(&b->garbage_bytes, memory_order_relaxed);
}

double kv_blob_garbage_ratio(const struct kv_blob *b)
{
    if (!b->record_bytes)
        return 1;
    return (double)atomic_load_explicit(&b->garbage_bytes, memory_order_relaxed) /
           (double)b->record_bytes;
}

struct kv_blob *kv_blob_find(struct kv_blob *const *blobs, size_t n, uint64_t number)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (blobs[mid]->number < number)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && blobs[lo]->number == number ? blobs[lo] : NULL;
}

/* ---- a job's output -------------------------------------------------------------------- */

void kv_blob_out_init(struct kv_blob_out *o, kv_db *db, uint64_t file_limit)
{
    memset(o, 0, sizeof *o);
    o->db = db;
    o->file_limit = file_limit;
}

/* Grows an array of `size`-byte elements to hold one more. */
static int grow(void **p, size_t n, size_t *cap, size_t size)
{
    if (n < *cap)
        return KV_OK;
    size_t nc = *cap ? 2 * *cap : 8;
    void *q = realloc(*p, nc * size);
    if (!q)
        return KV_ENOMEM;
    *p = q;
    *cap = nc;
    return KV_OK;
}

/* Finishes the current file and opens it into o->done. */
static int close_current(struct kv_blob_out *o)
{
    if (!o->w)
        return KV_OK;
    kv_blob_file_info info;
    int rc = kv_blob_writer_finish(o->w, &info);
    o->w = NULL;
    if (rc != KV_OK)
        return rc;
    if (grow((void **)&o->done, o->ndone, &o->dcap, sizeof *o->done) != KV_OK)
        return KV_ENOMEM;
    kv_manifest_blob rec = {.number = o->wnum,
                            .file_size = info.file_size,
                            .records = info.records,
                            .record_bytes = info.record_bytes};
    struct kv_blob *b;
    if ((rc = kv_blob_open(o->db, &rec, &b)) != KV_OK)
        return rc;
    o->done[o->ndone++] = b;
    return KV_OK;
}

int kv_blob_out_put(struct kv_blob_out *o, const uint8_t *key, size_t klen, const void *val,
                    size_t vlen, uint8_t *ref, size_t *rlen, uint64_t *number)
{
    int rc;
    if (o->w && kv_blob_writer_size(o->w) >= o->file_limit && (rc = close_current(o)) != KV_OK)
        return rc;
    if (!o->w) {
        uint64_t n;
        pthread_mutex_lock(&o->db->mu);
        rc = kv_db_new_file_number(o->db, &n);
        pthread_mutex_unlock(&o->db->mu);
        if (rc != KV_OK)
            return rc;
        if (grow((void **)&o->writing, o->nwriting, &o->wcap, sizeof *o->writing) != KV_OK)
            return KV_ENOMEM;
        char *path = kv_dbfile_path(o->db->path, n, "blob");
        if (!path)
            return KV_ENOMEM;
        rc = kv_blob_writer_new(path, n, &o->w);
        free(path);
        if (rc != KV_OK)
            return rc;
        o->writing[o->nwriting++] = n;
        o->wnum = n;
    }
    kv_blob_ref r;
    uint64_t before = kv_blob_writer_size(o->w);
    if ((rc = kv_blob_writer_add(o->w, key, klen, val, vlen, &r)) != KV_OK)
        return rc;
    o->written += kv_blob_writer_size(o->w) - before;
    *rlen = kv_blob_ref_encode(&r, ref);
    *number = r.number;
    return KV_OK;
}

int kv_blob_out_garbage(struct kv_blob_out *o, uint64_t number, uint64_t bytes)
{
    /* Few files per job, met in any order: the last one found is the
     * likeliest next. */
    for (size_t i = o->ngarbage; i-- > 0;)
        if (o->garbage[i].number == number) {
            o->garbage[i].records++;
            o->garbage[i].bytes += bytes;
            return KV_OK;
        }
    if (grow((void **)&o->garbage, o->ngarbage, &o->gcap, sizeof *o->garbage) != KV_OK)
        return KV_ENOMEM;
    o->garbage[o->ngarbage++] = (struct kv_blob_garbage){number, 1, bytes};
    return KV_OK;
}

int kv_blob_out_relocate(struct kv_blob_out *o, struct kv_blob *from, const kv_blob_ref *ref,
                         const uint8_t *key, size_t klen, uint8_t *nref, size_t *rlen,
                         uint64_t *number)
{
    if (ref->size > KV_MAX_VALUE_SIZE)
        return kv_error_set(KV_ECORRUPT, "%s: a reference to a value of %llu bytes", from->path,
                            (unsigned long long)ref->size);
    if (ref->size > o->bufcap) {
        size_t nc = ref->size > 4096 ? (size_t)ref->size : 4096;
        uint8_t *n = realloc(o->buf, nc);
        if (!n)
            return KV_ENOMEM;
        o->buf = n;
        o->bufcap = nc;
    }
    int rc = kv_blob_read(from->reader, ref, key, klen, o->buf, o->bufcap, NULL);
    if (rc == KV_OK)
        rc = kv_blob_out_put(o, key, klen, o->buf, (size_t)ref->size, nref, rlen, number);
    if (rc == KV_OK)
        rc = kv_blob_out_garbage(o, from->number, kv_blob_record_size(klen, ref->size));
    if (rc == KV_OK)
        o->relocated += kv_blob_record_size(klen, ref->size);
    return rc;
}

int kv_blob_out_finish(struct kv_blob_out *o)
{
    int rc = close_current(o);
    if (rc == KV_OK && o->nwriting) {
        char *p = kv_dbfile_path(o->db->path, o->writing[0], "blob");
        rc = p ? kv_file_sync_dir_of(p) : KV_ENOMEM;
        free(p);
    }
    return rc;
}

void kv_blob_out_free(struct kv_blob_out *o, int committed)
{
    kv_blob_writer_abandon(o->w); /* removes its file */
    o->w = NULL;
    for (size_t i = 0; i < o->ndone; i++) {
        if (!committed)
            atomic_store(&o->done[i]->obsolete, 1);
        kv_blob_file_unref(o->done[i]);
    }
    if (!committed) /* and those finished but never opened (done's are gone already) */
        for (size_t i = 0; i < o->nwriting; i++) {
            char *p = kv_dbfile_path(o->db->path, o->writing[i], "blob");
            if (p)
                unlink(p);
            free(p);
        }
    free(o->done);
    free(o->writing);
    free(o->garbage);
    free(o->buf);
    memset(o, 0, sizeof *o);
}

/* ---- reads ------------------------------------------------------------------------------ */

int kv_blob_get(kv_db *db, struct kv_blob *const *blobs, size_t nblobs, const void *ref,
                size_t rlen, const void *key, size_t klen, void **val, size_t *vlen,
                const struct kv_blob_dest *dest, kv_blob_ref *where)
{
    kv_blob_ref r;
    if (kv_blob_ref_decode(ref, rlen, &r) != KV_OK)
        return kv_error_set(KV_ECORRUPT, "%s: a blob reference that does not decode (%zu bytes)",
                            db->path, rlen);
    if (where)
        *where = r;
    struct kv_blob *b = kv_blob_find(blobs, nblobs, r.number);
    if (!b)
        return kv_error_set(KV_ECORRUPT, "%s: a reference to blob file %llu, which is not live",
                            db->path, (unsigned long long)r.number);
    if (r.size > KV_MAX_VALUE_SIZE)
        return kv_error_set(KV_ECORRUPT, "%s: a reference to a value of %llu bytes", b->path,
                            (unsigned long long)r.size);
    *vlen = (size_t)r.size;
    void *buf;
    size_t cap;
    if (dest) {
        if (r.size > dest->cap)
            return KV_ERANGE;
        buf = dest->buf;
        cap = dest->cap;
    } else {
        buf = malloc(r.size ? (size_t)r.size : 1);
        if (!buf)
            return kv_error_set(KV_ENOMEM, "%s: out of memory for a value of %llu bytes",
                                db->path, (unsigned long long)r.size);
        cap = (size_t)r.size;
    }
    uint64_t bytes = 0;
    int rc = kv_blob_read(b->reader, &r, key, klen, buf, cap, &bytes);
    KV_COUNT(db, blob_reads, 1);
    KV_COUNT(db, blob_read_bytes, bytes);
    if (rc != KV_OK) {
        if (!dest)
            free(buf);
        return rc;
    }
    if (!dest)
        *val = buf;
    return KV_OK;
}
