/* db.c - a kv_db's life: kv_open and kv_close, snapshots, and the helpers
 * every part of the handle shares (error texts, memtable and version
 * references, file numbers, opening a table, the bare handle kv_repair
 * also builds on).
 *
 * The rest of a kv_db, by job: write.c (puts, batches, group commit, the
 * write controller, kv_flush), get.c (the filter-gated Get walk),
 * multiget.c (kv_multi_get), options.c (kv_options and their checks),
 * recover.c (what kv_open does before the first write), background.c (the
 * thread: flushes, compactions, idle work, manifest commits), dbfiles.c
 * (the directory's names and LOCK), db.h (the struct and who uses it). The
 * whole map: doc/architecture.md; the directory, writes and Gets:
 * doc/database.md; reads without a lock: doc/concurrency.md. */
#define _DEFAULT_SOURCE /* strdup */
#include "db.h"
#include "tablemem.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dbfiles.h"
#include "util/ikey.h"
#include "util/error.h"
#include "order.h"

/* ---- error texts (status.h: every error a call returns has its text) -------------- */

int kv_db_fail(const kv_db *db, const char *call, unsigned long long mark, int rc)
{
    if (rc == KV_OK || kv_error_since(mark))
        return rc;
    if (db)
        return kv_error_set(rc, "%s: %s: %s", db->path, call, kv_strerror(rc));
    return kv_error_set(rc, "%s: %s", call, kv_strerror(rc));
}

int kv_db_einval(const kv_db *db, const char *call, const char *fmt, ...)
{
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (db)
        return kv_error_set(KV_EINVAL, "%s: %s: %s", db->path, call, why);
    return kv_error_set(KV_EINVAL, "%s: %s", call, why);
}

void kv_db_keep_text(const kv_db *db, char dst[KV_DB_TEXT], const char *what,
                     unsigned long long mark, int rc)
{
    if (kv_error_since(mark))
        snprintf(dst, KV_DB_TEXT, "%s", kv_error_text());
    else
        snprintf(dst, KV_DB_TEXT, "%s: %s: %s", db->path, what, kv_strerror(rc));
}

void kv_db_stop(kv_db *db, int *slot, char text[KV_DB_TEXT], const char *what,
                unsigned long long mark, int rc)
{
    if (rc == KV_OK || *slot)
        return;
    if (!kv_db_stopped(db) && !db->resuming)
        KV_COUNT(db, background_errors, 1);
    *slot = rc;
    kv_db_keep_text(db, text, what, mark, rc);
    pthread_cond_signal(&db->work_cv);
}

/* ---- references ----------------------------------------------------------------- */

struct kv_version *kv_db_ref_version(kv_db *db)
{
    pthread_mutex_lock(&db->mu);
    struct kv_version *v = db->current;
    atomic_fetch_add(&v->refs, 1);
    pthread_mutex_unlock(&db->mu);
    return v;
}

/* The memtable filter's size, in one place. A memtable is flushed once its
 * entries take write_buffer_size bytes, and an entry rarely takes fewer than
 * 64 of them (its node: trailer, lengths, height and at least one next
 * pointer, 32 bytes; then key and value), so write_buffer_size / 64 keys is
 * about the most a memtable holds; 10 bits per key, as the tables' default,
 * gives it about 1% false positives there (80 KiB per 4 MiB). A memtable of
 * smaller entries overfills it: its false-positive rate rises, its answers
 * stay right. */
#define MEM_FILTER_ENTRY_BYTES 64
#define MEM_FILTER_BITS_PER_KEY 10.0

/* The occupancy gate's bits per memtable: about MEM_GATE_BITS_PER_KEY
 * times the keys the memtable filter is sized for (the most a memtable
 * usually holds), a power of two: 2^20 bits (128 KiB) for 4 MiB. With a
 * quarter of that many keys or fewer, under 2% of the bits are set, and a
 * short empty range, a bucket or two, finds them clear about as often. */
#define MEM_GATE_BITS_PER_KEY 16
#define MEM_GATE_MIN_BITS ((uint64_t)1 << 12)
#define MEM_GATE_MAX_BITS ((uint64_t)1 << 28)

/* Gives m's memtable an occupancy gate when range filters are on and a
 * flush left a table with one (db->mem_map, read under mu: every caller
 * holds it or is alone). Without memory for it, m goes without: a
 * memtable without a gate is always searched. */
static void mem_gate(const kv_db *db, struct kv_memref *m)
{
    struct kv_table *t = db->mem_map;
    const struct kv_rfilter *f = t ? kv_sst_reader_range_filter(t->reader) : NULL;
    if (!(db->o.range_filter_bits > 0) || !f)
        return;
    uint64_t want = (uint64_t)db->o.write_buffer_size / MEM_FILTER_ENTRY_BYTES *
                    MEM_GATE_BITS_PER_KEY,
             bits = MEM_GATE_MIN_BITS;
    while (bits < want && bits < MEM_GATE_MAX_BITS)
        bits *= 2;
    if (kv_mem_set_range_map(m->mem, f, bits) == KV_OK) {
        kv_table_ref(t);
        m->map_table = t;
    }
}

struct kv_memref *kv_memref_new(const kv_db *db)
{
    struct kv_memref *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    uint64_t keys = db->o.memtable_filter ? db->o.write_buffer_size / MEM_FILTER_ENTRY_BYTES : 0;
    if (kv_mem_new(keys, MEM_FILTER_BITS_PER_KEY, &m->mem) != KV_OK) {
        free(m);
        return NULL;
    }
    kv_mem_set_comparator(m->mem, db->cmp);
    atomic_init(&m->refs, 1);
    mem_gate(db, m);
    return m;
}

void kv_memref_unref(struct kv_memref *m)
{
    if (m && atomic_fetch_sub(&m->refs, 1) == 1) {
        kv_mem_free(m->mem);
        kv_table_unref(m->map_table); /* after the memtable that reads its map */
        kv_rtset_unref(m->rt);
        free(m);
    }
}

/* ---- tables ------------------------------------------------------------------------ */

int kv_db_new_file_number(kv_db *db, uint64_t *out)
{
    if (db->next_file > KV_DBFILE_MAX_NUMBER)
        return kv_error_set(KV_ECORRUPT, "%s: no file number left: the next would be %llu, above "
                            "%llu", db->path, (unsigned long long)db->next_file,
                            (unsigned long long)KV_DBFILE_MAX_NUMBER);
    *out = db->next_file++;
    return KV_OK;
}

int kv_db_table_open(kv_db *db, kv_table_meta *meta, struct kv_table **out)
{
    *out = NULL;
    struct kv_table *t = calloc(1, sizeof *t);
    char *path = kv_dbfile_path(db->path, meta->number, "sst");
    if (!t || !path) {
        free(t);
        free(path);
        free(meta->smallest);
        free(meta->largest);
        return KV_ENOMEM;
    }
    t->meta = *meta;
    t->path = path;
    t->man = db->o.read_only ? NULL : db->man;
    atomic_init(&t->refs, 1);
    unsigned flags = db->o.use_direct_reads ? KV_SST_OPEN_DIRECT : 0;
    int rc = kv_sst_reader_open_cmp(path, db->cache, db->files, meta->number, flags, db->tcmp,
                                    &t->reader);
    if (rc == KV_OK)
        kv_tablemem_table_opened(db->tm, t);
    if (rc == KV_OK && kv_sst_reader_direct(t->reader) == KV_SST_DIRECT_REFUSED)
        atomic_fetch_add_explicit(&db->direct_refused, 1, memory_order_relaxed);
    if (rc == KV_OK) {
        kv_sst_properties props;
        kv_sst_reader_properties(t->reader, &props);
        /* A keyed filter takes the keyed hash when the database holds its
         * secret; without it (a manifest rebuilt without its secret
         * record, another secret) no hash this database can compute is the
         * one its filter holds, so the table is read without its filter:
         * slower, but never a false negative. */
        t->filter_keyed = db->keyed;
        if (props.filter_hash == KV_SST_FILTER_HASH_KEYED) {
            if (db->have_secret && props.filter_seed == db->secret_check)
                t->filter_keyed = 1;
            else
                kv_sst_reader_drop_filter(t->reader);
        } else if (props.filter_hash == KV_SST_FILTER_HASH_CALLER) {
            /* Hashed under another seed (an ingested table): asked with
             * that seed's hash. */
            t->filter_keyed = props.filter_seed == db->seed ? 0 : KV_TABLE_FILTER_OWN_SEED;
            t->filter_seed = props.filter_seed;
        } else if (props.filter_hash != KV_SST_FILTER_HASH_NONE) {
            /* Whole stored keys hashed (a table written with
             * kv_sst_writer_add): no user key's hash is among them. */
            kv_sst_reader_drop_filter(t->reader);
        }
        /* Its range tombstones, in memory for as long as it is open: a Get
         * checks them without touching the file. */
        const uint8_t *rtb;
        size_t rtlen;
        kv_sst_reader_range_tombstones(t->reader, &rtb, &rtlen);
        if (rtlen && (rc = kv_rtset_decode(db->cmp, rtb, rtlen, &t->rt)) == KV_ECORRUPT) {
            char why[256];
            snprintf(why, sizeof why, "%s", kv_error_text());
            rc = kv_error_set(KV_ECORRUPT, "%s: its range tombstone block: %s", path, why);
        }
    }
    if (rc != KV_OK) {
        /* A table the manifest names must exist: a missing one is damage. */
        if (rc == KV_NOTFOUND)
            rc = kv_error_set(KV_ECORRUPT, "%s: named by the manifest but missing", path);
        kv_table_unref(t); /* frees path */
        return rc;
    }
    *out = t;
    return KV_OK;
}
/* ---- snapshots -------------------------------------------------------------------- */

int kv_snapshot_new(kv_db *db, kv_snapshot **out)
{
    if (!db || !out)
        return kv_db_einval(db, "kv_snapshot_new", "%s is NULL", db ? "out" : "db");
    kv_snapshot *s = malloc(sizeof *s);
    if (!(*out = s))
        return kv_error_set(KV_ENOMEM, "%s: kv_snapshot_new: out of memory", db->path);
    /* A reader slot registers it without the lock (view.c); when every
     * slot is taken, the list under mu does. A read-only handle's is in
     * the list, holding its view (kv_snapshot.view). */
    s->view = NULL;
    if (!db->ro && kv_view_snap_claim(db, &s->slot, &s->seq) == KV_OK) {
        s->prev = s->next = NULL;
        return KV_OK;
    }
    s->slot = NULL;
    pthread_mutex_lock(&db->mu);
    s->seq = atomic_load(&db->last_seq);
    if (db->ro) {
        s->view = atomic_load_explicit(&db->view, memory_order_relaxed);
        s->view->holders++;
        /* The view holds everything up to its seq_floor (readonly.c
         * publishes last_seq first): read no higher than the view has. */
        if (s->seq < s->view->seq_floor)
            s->seq = s->view->seq_floor;
    }
    /* Newest at the tail: the list stays ordered by sequence. */
    s->next = &db->snapshots;
    s->prev = db->snapshots.prev;
    s->prev->next = s;
    db->snapshots.prev = s;
    pthread_mutex_unlock(&db->mu);
    return KV_OK;
}

void kv_snapshot_release(kv_db *db, kv_snapshot *s)
{
    if (!db || !s)
        return;
    if (s->slot) {
        kv_view_snap_release(s->slot);
        free(s);
        return;
    }
    pthread_mutex_lock(&db->mu);
    s->prev->next = s->next;
    s->next->prev = s->prev;
    int last = s->view && --s->view->holders == 0;
    pthread_mutex_unlock(&db->mu);
    free(s);
    if (last)
        kv_view_reclaim(db, 0); /* a view a catch-up replaced goes with its last holder */
}

uint64_t kv_db_oldest_snapshot(kv_db *db)
{
    /* last_seq before the slots (view.c: a snapshot the scan misses reads
     * at or above it). */
    uint64_t upto = atomic_load(&db->last_seq);
    if (db->snapshots.next != &db->snapshots && db->snapshots.next->seq < upto)
        upto = db->snapshots.next->seq;
    return kv_view_snap_oldest(db, upto);
}

/* ---- opening and closing -------------------------------------------------------------- */

void kv_db_free(kv_db *db)
{
    if (!db)
        return;
    kv_tablemem_stop(db->tm); /* its thread reads db->current */
    kv_wal_close(db->wal);
    kv_wal_close(db->old_wal);
    kv_view_free_all(db);
    free(db->slots);
    kv_memref_unref(db->mem);
    kv_memref_unref(db->imm);
    kv_table_unref(db->mem_map);
    kv_version_unref(db->current); /* closes the tables' readers */
    kv_sst_cache_free(db->cache);
    kv_tablemem_free(db->tm);
    kv_sst_files_free(db->files);
    kv_blob_files_free(db->blob_files); /* after the version: its readers are closed */
    kv_manifest_close(db->man);         /* after the versions: their pins end first */
    kv_db_ro_free(db);
    if (db->lock_fd >= 0)
        close(db->lock_fd); /* releases the flock */
    pthread_mutex_destroy(&db->mu);
    pthread_cond_destroy(&db->work_cv);
    pthread_cond_destroy(&db->done_cv);
    pthread_cond_destroy(&db->job_cv);
    pthread_mutex_destroy(&db->commit_mu);
    free(db->jobs);
    for (int l = 0; l < KV_LEVELS; l++)
        free(db->compact_pointer[l].key);
    free(db->group);
    free(db->path);
    free(db->c);
    free(db);
}

int kv_db_bare(const char *path, const kv_options *o, kv_db **out)
{
    *out = NULL;
    kv_db *db = calloc(1, sizeof *db);
    if (!db)
        return kv_error_set(KV_ENOMEM, "%s: out of memory", path);
    db->lock_fd = -1;
    db->o = *o;
    /* The order (order.h): a comparator named as the default is the
     * default, and takes its fast paths. */
    if (o->comparator && strcmp(o->comparator->name, KV_BYTEWISE_NAME) != 0) {
        db->cmp = o->comparator;
        kv_ikey_comparator_init(&db->icmp, db->cmp);
        db->tcmp = &db->icmp;
    }
    db->snapshots.next = db->snapshots.prev = &db->snapshots;
    db->gc_gen = 1;
    if (pthread_mutex_init(&db->mu, NULL) != 0) {
        free(db);
        return kv_error_set(KV_ENOMEM, "%s: out of memory", path);
    }
    pthread_cond_init(&db->work_cv, NULL);
    pthread_cond_init(&db->done_cv, NULL);
    pthread_cond_init(&db->job_cv, NULL);
    pthread_mutex_init(&db->commit_mu, NULL);
    /* The reader slots: zeroed (all free), one cache line each. */
    if ((db->slots = aligned_alloc(64, KV_VIEW_SLOTS * sizeof *db->slots)))
        memset(db->slots, 0, KV_VIEW_SLOTS * sizeof *db->slots);
    if (!db->slots || !(db->path = strdup(path)) || !(db->c = kv_tally_new(sizeof *db->c))) {
        kv_db_free(db);
        return kv_error_set(KV_ENOMEM, "%s: out of memory", path);
    }
    /* One writer at a time, in any process (dbfiles.h); a read-only handle
     * takes no lock (readonly.c). */
    int rc = o->read_only ? KV_OK : kv_dbfile_lock(path, &db->lock_fd);
    if (rc == KV_OK && o->block_cache_size > 0)
        rc = kv_sst_cache_new(o->block_cache_size, &db->cache);
    if (rc == KV_OK)
        rc = kv_tablemem_new(o->table_memory_budget, kv_sst_cache_shard_bytes(db->cache), &db->tm);
    /* The budget of open files: an eighth to blob files, the rest to
     * tables (kv.h, max_open_files). */
    size_t blobs = (size_t)o->max_open_files / 8;
    if (rc == KV_OK)
        rc = kv_sst_files_new((size_t)o->max_open_files - blobs, &db->files);
    if (rc == KV_OK)
        rc = kv_blob_files_new(blobs, &db->blob_files);
    if (rc != KV_OK) {
        kv_db_free(db);
        return rc;
    }
    *out = db;
    return KV_OK;
}

/* kv_open of a read-only handle (readonly.c): no directory made, no
 * LOCK, no background thread. */
static int open_read_only(const char *path, const kv_options *o, kv_db **out)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return errno == ENOENT ? kv_error_set(KV_NOTFOUND, "%s: no such directory", path)
                               : kv_error_errno(errno, "%s: stat", path);
    if (!S_ISDIR(st.st_mode))
        return kv_error_set(KV_EINVAL, "%s: not a directory", path);
    kv_db *db;
    int rc = kv_db_bare(path, o, &db);
    if (rc == KV_OK && (rc = kv_db_ro_open(db)) != KV_OK)
        kv_db_free(db);
    if (rc == KV_OK)
        *out = db;
    return rc;
}

/* kv_open but for the text of an error no step explained (kv_open). */
static int open_db(const char *path, const kv_options *opts, kv_db **out)
{
    if (!out)
        return kv_db_einval(NULL, "kv_open", "out is NULL");
    *out = NULL;
    kv_options o;
    int rc = kv_db_options(path, "kv_open", opts, &o);
    if (rc != KV_OK)
        return rc;

    if (o.read_only) /* writes nothing, creates nothing */
        return open_read_only(path, &o, out);
    if (mkdir(path, 0755) != 0) {
        if (errno != EEXIST) /* ENOENT (a missing parent): KV_NOTFOUND */
            return kv_error_errno(errno, "%s: mkdir", path);
    } else if (!o.create_if_missing) {
        rmdir(path); /* not ours to create */
        return kv_error_set(KV_NOTFOUND, "%s: no such directory (create_if_missing is 0)", path);
    }
    struct stat st;
    if (stat(path, &st) != 0)
        return kv_error_errno(errno, "%s: stat", path);
    if (!S_ISDIR(st.st_mode))
        return kv_error_set(KV_EINVAL, "%s: not a directory", path);
    /* A directory whose mode lets no one write was made read-only on
     * purpose (a kept checkpoint, a copy for readers): a writer would
     * change it where root runs, as the mode bits do not stop root. */
    if ((st.st_mode & 0222) == 0)
        return kv_error_set(KV_EPERM,
                            "%s: the directory's mode (%04o) lets no one write to it: "
                            "open it with read_only = 1, or make it writable",
                            path, (unsigned)(st.st_mode & 07777));

    kv_db *db;
    if ((rc = kv_db_bare(path, &o, &db)) != KV_OK)
        return rc;
    rc = kv_db_recover(db);
    if (rc == KV_OK) {
        kv_tablemem_update(db);
        rc = kv_tablemem_start(db);
    }
    if (rc == KV_OK)
        rc = kv_db_background_start(db);
    if (rc != KV_OK) {
        kv_db_free(db);
        return rc;
    }
    *out = db;
    return KV_OK;
}

int kv_open(const char *path, const kv_options *opts, kv_db **out)
{
    unsigned long long mark = kv_error_mark();
    int rc = open_db(path, opts, out);
    if (rc != KV_OK && !kv_error_since(mark))
        kv_error_set(rc, "%s: kv_open: %s", path ? path : "(NULL)", kv_strerror(rc));
    return rc;
}

int kv_close(kv_db *db)
{
    if (!db)
        return KV_OK;
    pthread_mutex_lock(&db->mu);
    /* Iterators and snapshots point into the handle: it outlives them. */
    size_t iters, snaps;
    kv_view_count(db, &iters, &snaps); /* those in reader slots */
    iters += db->iters;
    for (const struct kv_snapshot *s = db->snapshots.next; s != &db->snapshots; s = s->next)
        snaps++;
    if (iters || snaps) {
        int rc = kv_error_set(KV_EBUSY, "%s: kv_close: %zu iterator%s and %zu snapshot%s still "
                              "live; free them first (nothing was closed)", db->path, iters,
                              iters == 1 ? "" : "s", snaps, snaps == 1 ? "" : "s");
        pthread_mutex_unlock(&db->mu);
        return rc;
    }
    db->closing = 1;
    atomic_store(&db->stopping, 1);
    pthread_cond_broadcast(&db->work_cv);
    pthread_cond_broadcast(&db->job_cv);
    pthread_mutex_unlock(&db->mu);
    kv_db_background_join(db);
    /* The background threads are gone; the lock keeps the analysis simple. */
    pthread_mutex_lock(&db->mu);
    int rc = db->bg_error ? kv_error_set(db->bg_error, "%s", db->bg_text) : kv_db_sticky_error(db);
    pthread_mutex_unlock(&db->mu);
    char text[KV_DB_TEXT];
    if (rc != KV_OK) /* kv_wal_close must not overwrite the first error's text */
        snprintf(text, sizeof text, "%s", kv_error_text());
    unsigned long long mark = kv_error_mark();
    int crc = kv_wal_close(db->wal);
    db->wal = NULL;
    if (rc == KV_OK && crc != KV_OK)
        rc = kv_db_fail(db, "kv_close: closing the log", mark, crc);
    else if (rc != KV_OK)
        kv_error_set(rc, "%s", text);
    kv_db_free(db);
    return rc;
}

/* ---- range deletes gathered ---------------------------------------------------------- */

int kv_rt_list_add(struct kv_rt_list *l, uint64_t seq, const uint8_t *b, size_t blen,
                   const uint8_t *e, size_t elen)
{
    if (l->n == l->cap) {
        size_t nc = l->cap ? 2 * l->cap : 16;
        kv_rt *v = realloc(l->v, nc * sizeof *v);
        if (!v)
            return KV_ENOMEM;
        l->v = v;
        l->cap = nc;
    }
    if (l->copy) {
        uint8_t *k = malloc(blen + elen + 1);
        if (!k)
            return KV_ENOMEM;
        if (blen)
            memcpy(k, b, blen);
        if (elen)
            memcpy(k + blen, e, elen);
        b = k;
        e = k + blen;
    }
    l->v[l->n++] = (kv_rt){b, blen, e, elen, seq};
    return KV_OK;
}

void kv_rt_list_free(struct kv_rt_list *l)
{
    if (l->copy)
        for (size_t i = 0; i < l->n; i++)
            free((void *)l->v[i].start);
    free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
}
