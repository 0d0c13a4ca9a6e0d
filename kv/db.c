/* db.c - the store: open and recovery, the write path with group commit,
 * the filter-gated read path, and the background flush.
 *
 * Files in the database directory:
 *   LOCK            flock()ed while a handle is open (a second open: KV_EBUSY)
 *   MANIFEST        LMDB: the live tables and the counters (manifest.h)
 *   <n>.log         write-ahead logs; those numbered >= state.log_number are live
 *   <n>.sst         tables; live when the manifest names them
 * Numbers are six or more decimal digits from one counter (next_file).
 *
 * Writes: a writer joins a queue; the one at its head (the leader) makes
 * room in the memtable, merges the batches of the writers behind it into
 * one log record, appends it (and syncs once if any of them asked), applies
 * it to the memtable, publishes the new last sequence and wakes them.
 *
 * Reads: under the lock, take references to the memtables and the current
 * version and read last_seq; then search without the lock (DESIGN.md, "The
 * read path").
 *
 * Flush: when the memtable is full the leader makes it immutable, starts a
 * new log and wakes the flush thread, which writes the memtable as a level-0
 * table, commits it to the manifest together with the new live-log number,
 * installs a new version and deletes the old log. */
#define _DEFAULT_SOURCE /* flock, dirent d_type */
#include "db.h"
#include "util/error.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>


#include "batch.h"
#include "util/keycmp.h"
#include "ikey.h"
#include "util/hash.h"

#define KV_FORMAT_VERSION 1u
/* A commit group stops growing at this many bytes (when the leader's own
 * batch is small, at its size plus 128 KiB, so a small write is not held up
 * behind a large group). */
#define GROUP_MAX ((size_t)1 << 20)

/* ---- small helpers ---------------------------------------------------------------- */

static uint64_t now_micros(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

#define COUNT KV_COUNT

char *kv_db_file_path(const kv_db *db, uint64_t number, const char *ext)
{
    size_t n = strlen(db->path) + 32;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%06llu.%s", db->path, (unsigned long long)number, ext);
    return p;
}

const char *kv_db_file_number(const char *name, uint64_t *number)
{
    if (name[0] < '0' || name[0] > '9')
        return NULL;
    char *end;
    errno = 0;
    unsigned long long n = strtoull(name, &end, 10);
    if (errno)
        return NULL;
    *number = n;
    return end;
}

static uint64_t hash_key(const kv_db *db, const void *key, size_t klen)
{
    return kv_hash_key(key, klen, db->seed);
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

static struct kv_memref *memref_new(void)
{
    struct kv_memref *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    if (kv_mem_new(&m->mem) != KV_OK) {
        free(m);
        return NULL;
    }
    atomic_init(&m->refs, 1);
    return m;
}

void kv_memref_unref(struct kv_memref *m)
{
    if (m && atomic_fetch_sub(&m->refs, 1) == 1) {
        kv_mem_free(m->mem);
        free(m);
    }
}

/* ---- tables ------------------------------------------------------------------------ */

int kv_db_table_open(kv_db *db, kv_table_meta *meta, struct kv_table **out)
{
    *out = NULL;
    struct kv_table *t = calloc(1, sizeof *t);
    char *path = kv_db_file_path(db, meta->number, "sst");
    if (!t || !path) {
        free(t);
        free(path);
        free(meta->smallest);
        free(meta->largest);
        return KV_ENOMEM;
    }
    t->meta = *meta;
    t->path = path;
    atomic_init(&t->refs, 1);
    int rc = kv_sst_reader_open(path, db->cache, meta->number, &t->reader);
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

/* Writes a memtable as a level-0 table (*out NULL when nothing is left to
 * write). Versions no snapshot can see are dropped; tombstones are kept,
 * since older tables may hold their keys. */
static int flush_memtable(kv_db *db, const kv_mem *mem, uint64_t horizon, struct kv_table **out)
{
    *out = NULL;
    kv_mem_iter it;
    kv_mem_iter_init(&it, mem);
    struct kv_dropper drop = {.horizon = horizon};
    struct kv_builder b;
    int building = 0, rc = KV_OK;
    uint8_t *ikey = NULL;
    size_t icap = 0;
    uint64_t hash = 0;
    for (kv_mem_iter_first(&it); rc == KV_OK && kv_mem_iter_valid(&it); kv_mem_iter_next(&it)) {
        kv_mem_entry e;
        kv_mem_iter_entry(&it, &e);
        int new_key = !drop.have || e.klen != drop.len ||
                      (e.klen && memcmp(e.key, drop.key, e.klen) != 0);
        int d = kv_dropper_drop(&drop, e.key, e.klen, e.seq, e.kind, 0);
        if (d < 0)
            rc = KV_ENOMEM;
        if (d != 0)
            continue;
        if (new_key)
            hash = hash_key(db, e.key, e.klen);
        size_t need = 2 * e.klen + 2 + KV_IKEY_TRAILER;
        if (need > icap) {
            uint8_t *n = realloc(ikey, need);
            if (!n) {
                rc = KV_ENOMEM;
                break;
            }
            ikey = n;
            icap = need;
        }
        size_t plen = kv_ikey_put_prefix(ikey, e.key, e.klen);
        kv_ikey_put_trailer(ikey + plen, e.seq, e.kind);
        if (!building) {
            if ((rc = kv_builder_start(db, &b, 0, "kv: memtable flush")) != KV_OK)
                break;
            building = 1;
        }
        rc = kv_builder_add(&b, ikey, plen + KV_IKEY_TRAILER, e.key, e.klen, hash, e.seq, e.val,
                            e.kind == KV_KIND_VALUE ? e.vlen : 0);
        if (drop.pinned)
            b.meta.flags |= KV_TABLE_SNAPSHOT_PINNED;
    }
    free(ikey);
    kv_dropper_free(&drop);
    if (!building)
        return rc;
    if (rc != KV_OK) {
        kv_builder_abandon(&b);
        return rc;
    }
    rc = kv_builder_finish(&b, out);
    if (rc == KV_OK)
        COUNT(db, flush_bytes, (*out)->meta.file_size);
    return rc;
}

/* Deletes logs numbered below `live` (their writes are in tables). */
static void remove_dead_logs(kv_db *db, uint64_t live)
{
    DIR *d = opendir(db->path);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        unsigned long long n;
        char ext[8];
        if (sscanf(de->d_name, "%llu.%7s", &n, ext) == 2 && strcmp(ext, "log") == 0 && n < live) {
            char *p = kv_db_file_path(db, n, "log");
            if (p)
                unlink(p);
            free(p);
        }
    }
    closedir(d);
}

/* ---- the background thread --------------------------------------------------------- */

int kv_db_commit(kv_db *db, const kv_manifest_state *state, const uint64_t *remove,
                 size_t nremove, struct kv_table *const *add, size_t nadd)
{
    kv_table_meta *metas = nadd ? malloc(nadd * sizeof *metas) : NULL;
    if (nadd && !metas)
        return KV_ENOMEM;
    for (size_t i = 0; i < nadd; i++)
        metas[i] = add[i]->meta;
    /* Only this thread changes the version and the manifest, so the new
     * version can be built first and the commit run without the lock. */
    pthread_mutex_lock(&db->mu);
    kv_manifest_state st = state ? *state : db->state;
    st.next_file = db->next_file;
    struct kv_version *nv = kv_version_edit(db->current, remove, nremove, add, nadd);
    pthread_mutex_unlock(&db->mu);
    int rc = nv ? kv_manifest_apply(db->man, &st, remove, nremove, metas, nadd) : KV_ENOMEM;
    free(metas);
    if (rc != KV_OK) {
        kv_version_unref(nv);
        return rc;
    }
    pthread_mutex_lock(&db->mu);
    struct kv_version *old = db->current;
    for (size_t i = 0; i < old->n; i++)
        for (size_t j = 0; j < nremove; j++)
            if (old->tables[i]->meta.number == remove[j])
                atomic_store(&old->tables[i]->obsolete, 1);
    db->current = nv;
    db->state = st;
    pthread_cond_broadcast(&db->done_cv); /* level 0 may have shrunk */
    pthread_mutex_unlock(&db->mu);
    kv_version_unref(old);
    return KV_OK;
}

/* Flushes db->imm: writes its table, commits it with the log that follows
 * it as the first live one, and deletes the logs before. Called with mu
 * held and returns with it held. */
static int flush_imm(kv_db *db)
{
    struct kv_memref *imm = db->imm;
    uint64_t horizon = kv_db_oldest_snapshot(db);
    pthread_mutex_unlock(&db->mu);
    struct kv_table *t = NULL;
    int rc = flush_memtable(db, imm->mem, horizon, &t);
    pthread_mutex_lock(&db->mu);
    kv_manifest_state st = db->state;
    pthread_mutex_unlock(&db->mu);
    st.log_number = imm->next_log;
    if (imm->max_seq > st.last_seq)
        st.last_seq = imm->max_seq;
    if (rc == KV_OK)
        rc = kv_db_commit(db, &st, NULL, 0, t ? &t : NULL, t ? 1 : 0);
    if (t) {
        if (rc != KV_OK)
            atomic_store(&t->obsolete, 1); /* never named: delete */
        kv_table_unref(t);
    }
    if (rc == KV_OK) {
        COUNT(db, flushes, 1);
        remove_dead_logs(db, st.log_number);
    }
    pthread_mutex_lock(&db->mu);
    if (rc == KV_OK) {
        db->imm = NULL;
        atomic_store(&db->imm_pending, 0);
        kv_memref_unref(imm);
    } else if (!db->bg_error)
        db->bg_error = rc;
    pthread_cond_broadcast(&db->done_cv);
    return rc;
}

int kv_db_flush_pending(kv_db *db)
{
    if (!atomic_load(&db->imm_pending))
        return KV_OK;
    pthread_mutex_lock(&db->mu);
    int rc = db->imm && !db->bg_error ? flush_imm(db) : db->bg_error;
    pthread_mutex_unlock(&db->mu);
    return rc;
}

/* Flushes and compacts, flushes first, until kv_close. A flush or
 * compaction error stops background work and writes (bg_error); reads go
 * on. */
static void *background_thread(void *arg)
{
    kv_db *db = arg;
    pthread_mutex_lock(&db->mu);
    for (;;) {
        while (!db->closing &&
               (db->bg_error || (!db->imm && !db->manual_pending && !kv_compaction_needed(db))))
            pthread_cond_wait(&db->work_cv, &db->mu);
        if (db->closing)
            break;
        if (db->imm) {
            flush_imm(db);
            continue;
        }
        int rc;
        if (db->manual_pending) {
            const uint8_t *lo = db->manual_lo, *hi = db->manual_hi;
            size_t lolen = db->manual_lolen, hilen = db->manual_hilen;
            db->manual_running = 1;
            pthread_mutex_unlock(&db->mu);
            rc = kv_compact_manual(db, lo, lolen, hi, hilen);
            pthread_mutex_lock(&db->mu);
            db->manual_running = 0;
            db->manual_pending = 0;
            db->manual_rc = rc;
            db->manual_done++;
        } else {
            pthread_mutex_unlock(&db->mu);
            rc = kv_compact_step(db);
            pthread_mutex_lock(&db->mu);
            if (rc == KV_NOTFOUND)
                rc = KV_OK;
        }
        if (rc != KV_OK && rc != KV_EBUSY && !db->bg_error)
            db->bg_error = rc;
        pthread_cond_broadcast(&db->done_cv);
    }
    pthread_mutex_unlock(&db->mu);
    return NULL;
}

/* ---- writing ---------------------------------------------------------------------- */

static int check_key(const void *key, size_t klen)
{
    return (klen && !key) || klen > KV_MAX_KEY_SIZE ? KV_EINVAL : KV_OK;
}

/* Makes room for a write (called by the queue's leader, under mu). From
 * l0_slowdown_trigger level-0 tables on, the write first sleeps 1 ms (once),
 * giving compaction the time; at l0_stop_trigger it waits until compaction
 * brings level 0 down. When the memtable is full (or `force` and it holds
 * anything), it waits for the flush of the previous one if that is still
 * running, then makes it immutable, starts a new log and wakes the
 * background thread. Waits are stalls, counted with their time; none can
 * deadlock: the background thread needs no lock a waiting writer holds, and
 * a background error ends every wait. */
static int make_room(kv_db *db, int force)
{
    int delayed = force, stalled = 0;
    uint64_t t0 = 0;
    int rc = KV_OK;
    for (;;) {
        if (db->write_error || db->bg_error) {
            rc = db->write_error ? db->write_error : db->bg_error;
            break;
        }
        size_t l0 = db->current->start[1];
        if (!delayed && l0 >= (size_t)db->o.l0_slowdown_trigger) {
            delayed = 1;
            COUNT(db, slowdowns, 1);
            pthread_cond_signal(&db->work_cv);
            pthread_mutex_unlock(&db->mu);
            uint64_t s0 = now_micros();
            struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
            COUNT(db, stall_micros, now_micros() - s0);
            pthread_mutex_lock(&db->mu);
            continue;
        }
        size_t used = kv_mem_used(db->mem->mem);
        int full = kv_mem_count(db->mem->mem) > 0 && (force || used >= db->o.write_buffer_size);
        if (!full && l0 < (size_t)db->o.l0_stop_trigger)
            break;
        if (db->imm || l0 >= (size_t)db->o.l0_stop_trigger) {
            if (!stalled) {
                stalled = 1;
                t0 = now_micros();
                COUNT(db, stalls, 1);
            }
            pthread_cond_signal(&db->work_cv);
            pthread_cond_wait(&db->done_cv, &db->mu);
            continue;
        }
        /* A machine crash must not keep the new log's writes and lose the
         * old one's unsynced tail (a hole): the old log is synced first. */
        if ((rc = kv_wal_sync(db->wal)) != KV_OK) {
            db->write_error = rc; /* a failed fsync is never retried */
            break;
        }
        uint64_t number = db->next_file++;
        char *path = kv_db_file_path(db, number, "log");
        struct kv_memref *fresh = memref_new();
        kv_wal *wal = NULL;
        rc = path && fresh ? kv_wal_create(path, number, &wal) : KV_ENOMEM;
        free(path);
        if (rc != KV_OK) {
            kv_memref_unref(fresh);
            break;
        }
        /* The old log's records are all synced; closing it loses nothing.
         * Its error, if any, was returned to the writer that met it. */
        kv_wal_close(db->wal);
        db->wal = wal;
        db->wal_number = number;
        db->mem->next_log = number;
        db->imm = db->mem;
        db->mem = fresh;
        atomic_store(&db->imm_pending, 1);
        pthread_cond_signal(&db->work_cv);
        force = 0;
    }
    if (stalled)
        COUNT(db, stall_micros, now_micros() - t0);
    return rc;
}

struct apply_ctx {
    kv_db *db;
    kv_mem *mem;
    uint64_t puts, deletes, max_seq, user_bytes;
};

static int apply_entry(void *ctx, uint64_t seq, int kind, const uint8_t *key, size_t klen,
                       const uint8_t *val, size_t vlen)
{
    struct apply_ctx *a = ctx;
    if (kind == KV_KIND_VALUE)
        a->puts++;
    else
        a->deletes++;
    a->max_seq = seq;
    a->user_bytes += klen + vlen;
    return kv_mem_add(a->mem, seq, kind, key, klen, val, vlen);
}

/* Merges the batches of the writers from `first` into db->group; returns
 * the last writer taken. Under mu. */
static struct kv_writer *build_group(kv_db *db, struct kv_writer *first, uint64_t seq,
                                     size_t *len, uint32_t *count, int *sync, int *rc)
{
    const struct kv_batch *b = first->batch;
    size_t limit = b->len <= (128u << 10) ? b->len + (128u << 10) : GROUP_MAX;
    if (limit < b->len)
        limit = b->len;
    size_t total = b->len;
    struct kv_writer *last = first;
    for (struct kv_writer *w = first->next; w && w->batch; w = w->next) {
        if (w->sync && !first->sync)
            break; /* a sync write does not ride in a group that will not sync */
        if (total + w->batch->len - KV_BATCH_HEADER > limit)
            break;
        total += w->batch->len - KV_BATCH_HEADER;
        last = w;
    }
    if (total > db->group_cap) {
        uint8_t *g = realloc(db->group, total);
        if (!g) {
            *rc = KV_ENOMEM;
            return first;
        }
        db->group = g;
        db->group_cap = total;
    }
    size_t off = KV_BATCH_HEADER;
    uint32_t n = 0;
    for (struct kv_writer *w = first;; w = w->next) {
        memcpy(db->group + off, w->batch->rep + KV_BATCH_HEADER, w->batch->len - KV_BATCH_HEADER);
        off += w->batch->len - KV_BATCH_HEADER;
        n += w->batch->count;
        if (w == last)
            break;
    }
    kv_batch_set_seq(db->group, seq);
    kv_put32(db->group + 8, n);
    *len = off;
    *count = n;
    *sync = first->sync;
    *rc = KV_OK;
    return last;
}

/* Joins the queue and waits until this writer leads or is done. Under mu. */
static void enqueue(kv_db *db, struct kv_writer *w)
{
    w->next = NULL;
    if (db->queue_tail)
        db->queue_tail->next = w;
    else
        db->queue = w;
    db->queue_tail = w;
    while (!w->done && db->queue != w)
        pthread_cond_wait(&w->cv, &db->mu);
}

/* Hands the queue on: writers first..last are done with rc. Under mu. */
static void dequeue(kv_db *db, struct kv_writer *first, struct kv_writer *last, int rc)
{
    for (struct kv_writer *w = first;;) {
        struct kv_writer *next = w->next;
        w->rc = rc;
        w->done = 1;
        if (w != first)
            pthread_cond_signal(&w->cv);
        if (w == last) {
            db->queue = next;
            if (!next)
                db->queue_tail = NULL;
            break;
        }
        w = next;
    }
    if (db->queue)
        pthread_cond_signal(&db->queue->cv);
}

int kv_write_opts(kv_db *db, const kv_write_options *wo, const kv_batch *batch)
{
    if (!db || !batch)
        return KV_EINVAL;
    if (batch->count == 0)
        return KV_OK;
    struct kv_writer w = {.batch = batch, .sync = wo ? wo->sync != 0 : db->o.sync != 0};
    if (pthread_cond_init(&w.cv, NULL) != 0)
        return KV_ENOMEM;
    pthread_mutex_lock(&db->mu);
    enqueue(db, &w);
    if (w.done) {
        pthread_mutex_unlock(&db->mu);
        pthread_cond_destroy(&w.cv);
        return w.rc;
    }
    /* The leader. */
    struct kv_writer *last = &w;
    int rc = make_room(db, 0);
    if (rc == KV_OK) {
        size_t len;
        uint32_t count;
        int sync;
        uint64_t seq = db->last_seq + 1;
        last = build_group(db, &w, seq, &len, &count, &sync, &rc);
        if (rc == KV_OK && seq + count - 1 > KV_MAX_SEQ)
            rc = KV_EINVAL;
        if (rc == KV_OK) {
            kv_wal *wal = db->wal;
            struct kv_memref *mem = db->mem;
            pthread_mutex_unlock(&db->mu);
            /* Only the leader touches the log and adds to the memtable;
             * new writers queue up behind it meanwhile. */
            rc = kv_wal_append(wal, db->group, len);
            if (rc == KV_OK && sync) {
                rc = kv_wal_sync(wal);
                COUNT(db, wal_syncs, 1);
            }
            struct apply_ctx a = {.db = db, .mem = mem->mem};
            if (rc == KV_OK) {
                COUNT(db, wal_bytes, len);
                /* The memtable takes a copy of every entry; on KV_ENOMEM it
                 * holds part of the group while the log holds all of it, so
                 * the database stops taking writes (as for a log error). */
                rc = kv_batch_iterate(db->group, len, apply_entry, &a);
            }
            pthread_mutex_lock(&db->mu);
            if (rc == KV_OK) {
                mem->max_seq = a.max_seq;
                db->last_seq = seq + count - 1;
                COUNT(db, puts, a.puts);
                COUNT(db, deletes, a.deletes);
                COUNT(db, user_bytes, a.user_bytes);
                COUNT(db, write_groups, 1);
                uint64_t writers = 1;
                for (struct kv_writer *x = &w; x != last; x = x->next)
                    writers++;
                COUNT(db, writes, writers);
            } else
                db->write_error = rc;
        }
    }
    dequeue(db, &w, last, rc);
    pthread_mutex_unlock(&db->mu);
    pthread_cond_destroy(&w.cv);
    return rc;
}

int kv_write(kv_db *db, const kv_batch *batch)
{
    return kv_write_opts(db, NULL, batch);
}

/* A one-entry batch on the stack (values are copied once, into the log
 * record, by the commit). */
static int write_one(kv_db *db, int kind, const void *key, size_t klen, const void *val,
                     size_t vlen)
{
    if (!db || check_key(key, klen) != KV_OK || (vlen && !val) || vlen > KV_MAX_VALUE_SIZE)
        return KV_EINVAL;
    uint8_t small[256];
    size_t need = KV_BATCH_HEADER + 1 + 10 + klen + 10 + vlen;
    uint8_t *rep = need <= sizeof small ? small : malloc(need);
    if (!rep)
        return KV_ENOMEM;
    uint8_t *p = rep + KV_BATCH_HEADER;
    *p++ = (uint8_t)kind;
    p += kv_put_varint(p, klen);
    if (klen)
        memcpy(p, key, klen);
    p += klen;
    if (kind == KV_KIND_VALUE) {
        p += kv_put_varint(p, vlen);
        if (vlen)
            memcpy(p, val, vlen);
        p += vlen;
    }
    memset(rep, 0, KV_BATCH_HEADER);
    kv_put32(rep + 8, 1);
    struct kv_batch b = {.rep = rep, .len = (size_t)(p - rep), .cap = need, .count = 1,
                         .user_bytes = klen + vlen};
    int rc = kv_write_opts(db, NULL, &b);
    if (rep != small)
        free(rep);
    return rc;
}

int kv_put(kv_db *db, const void *key, size_t klen, const void *val, size_t vlen)
{
    return write_one(db, KV_KIND_VALUE, key, klen, val, vlen);
}

int kv_delete(kv_db *db, const void *key, size_t klen)
{
    return write_one(db, KV_KIND_TOMBSTONE, key, klen, NULL, 0);
}

int kv_flush(kv_db *db)
{
    if (!db)
        return KV_EINVAL;
    struct kv_writer w = {.batch = NULL};
    if (pthread_cond_init(&w.cv, NULL) != 0)
        return KV_ENOMEM;
    pthread_mutex_lock(&db->mu);
    enqueue(db, &w);
    int rc = make_room(db, 1);
    /* Holding the head of the queue, so no write refills the memtable:
     * wait for the flush thread to finish what make_room handed it. */
    while (rc == KV_OK && db->imm && !db->bg_error)
        pthread_cond_wait(&db->done_cv, &db->mu);
    if (rc == KV_OK)
        rc = db->bg_error;
    dequeue(db, &w, &w, rc);
    pthread_mutex_unlock(&db->mu);
    pthread_cond_destroy(&w.cv);
    return rc;
}

/* ---- reading ---------------------------------------------------------------------- */

static int copy_value(const void *src, size_t n, void **val, size_t *vlen)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        return KV_ENOMEM;
    if (n)
        memcpy(p, src, n);
    *val = p;
    *vlen = n;
    return KV_OK;
}

/* The memtables' answer: KV_OK (a value, copied), KV_NOTFOUND with *decided
 * set (a tombstone), or KV_NOTFOUND (ask the tables). */
static int mem_lookup(const struct kv_memref *m, const void *key, size_t klen, uint64_t snap,
                      void **val, size_t *vlen, int *decided)
{
    kv_mem_entry e;
    if (!m || kv_mem_get(m->mem, key, klen, snap, &e) != KV_OK)
        return KV_NOTFOUND;
    *decided = 1;
    return e.kind == KV_KIND_VALUE ? copy_value(e.val, e.vlen, val, vlen) : KV_NOTFOUND;
}

/* The Get path. kv_explain_get (explain.c) walks the same way, step by step:
 * a change here is a change there. */
int kv_get_at(kv_db *db, const kv_snapshot *snapshot, const void *key, size_t klen, void **val,
              size_t *vlen)
{
    if (!db || check_key(key, klen) != KV_OK || !val || !vlen)
        return KV_EINVAL;
    *val = NULL;
    *vlen = 0;
    COUNT(db, gets, 1);
    uint64_t h = hash_key(db, key, klen);

    pthread_mutex_lock(&db->mu);
    struct kv_memref *mem = db->mem, *imm = db->imm;
    struct kv_version *v = db->current;
    atomic_fetch_add(&mem->refs, 1);
    if (imm)
        atomic_fetch_add(&imm->refs, 1);
    atomic_fetch_add(&v->refs, 1);
    uint64_t snap = snapshot ? snapshot->seq : db->last_seq;
    pthread_mutex_unlock(&db->mu);

    int decided = 0;
    int rc = mem_lookup(mem, key, klen, snap, val, vlen, &decided);
    if (!decided)
        rc = mem_lookup(imm, key, klen, snap, val, vlen, &decided);
    if (decided)
        COUNT(db, memtable_hits, 1);

    uint8_t stack[512];
    uint8_t *ikey = NULL;
    size_t plen = 0;
    /* Level 0 newest first, every table whose range holds the key; then
     * at most one table per deeper level (their ranges are disjoint). */
    int level = 0;
    for (size_t i = 0; !decided && i < v->n; i++) {
        while (level < KV_LEVELS && i >= v->start[level + 1])
            level++;
        if (level > 0) {
            size_t j = kv_version_find(v, level, key, klen);
            i = v->start[level + 1] - 1; /* the loop moves on to the next level */
            if (j == SIZE_MAX)
                continue;
            i = j;
        }
        struct kv_table *t = v->tables[i];
        if (level > 0)
            i = v->start[level + 1] - 1;
        else if (kv_key_cmp(key, klen, t->meta.smallest, t->meta.smallest_len) < 0 ||
                 kv_key_cmp(key, klen, t->meta.largest, t->meta.largest_len) > 0)
            continue; /* outside its key range: not probed */
        if (!ikey) {
            size_t need = 2 * klen + 2 + KV_IKEY_TRAILER;
            ikey = need <= sizeof stack ? stack : malloc(need);
            if (!ikey) {
                rc = KV_ENOMEM;
                break;
            }
            plen = kv_ikey_put_prefix(ikey, key, klen);
            /* The smallest trailer of sequence `snap`: the lookup lands on
             * the newest entry with a sequence <= snap. */
            kv_ikey_put_trailer(ikey + plen, snap, 0xFF);
        }
        COUNT(db, tables_probed, 1);
        kv_sst_probe pr;
        uint8_t trailer[KV_IKEY_TRAILER];
        size_t tlen = 0;
        rc = kv_sst_seek_prefixed(t->reader, ikey, plen + KV_IKEY_TRAILER, plen, h, &pr, val,
                                  vlen, trailer, sizeof trailer, &tlen);
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
        if (rc == KV_NOTFOUND)
            continue;
        decided = 1;
        if (rc != KV_OK)
            break;
        uint64_t seq;
        int kind;
        if (!kv_ikey_get_trailer(trailer, tlen, &seq, &kind) ||
            (kind != KV_KIND_VALUE && kind != KV_KIND_TOMBSTONE)) {
            rc = KV_ECORRUPT;
        } else if (kind == KV_KIND_TOMBSTONE)
            rc = KV_NOTFOUND;
        if (rc != KV_OK) {
            kv_free(*val);
            *val = NULL;
            *vlen = 0;
        }
    }
    if (ikey != stack)
        free(ikey);
    if (!decided)
        rc = KV_NOTFOUND;
    kv_memref_unref(mem);
    kv_memref_unref(imm);
    kv_version_unref(v);
    return rc;
}

int kv_get(kv_db *db, const void *key, size_t klen, void **val, size_t *vlen)
{
    return kv_get_at(db, NULL, key, klen, val, vlen);
}

/* ---- snapshots -------------------------------------------------------------------- */

int kv_snapshot_new(kv_db *db, kv_snapshot **out)
{
    if (!db || !out)
        return KV_EINVAL;
    kv_snapshot *s = malloc(sizeof *s);
    if (!(*out = s))
        return KV_ENOMEM;
    pthread_mutex_lock(&db->mu);
    s->seq = db->last_seq;
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
    pthread_mutex_lock(&db->mu);
    s->prev->next = s->next;
    s->next->prev = s->prev;
    pthread_mutex_unlock(&db->mu);
    free(s);
}

uint64_t kv_db_oldest_snapshot(const kv_db *db)
{
    return db->snapshots.next != &db->snapshots ? db->snapshots.next->seq : db->last_seq;
}

/* ---- compaction on request ----------------------------------------------------------- */

int kv_compact_range(kv_db *db, const void *start, size_t slen, const void *end, size_t elen)
{
    if (!db || (slen && !start) || (elen && !end) || slen > KV_MAX_KEY_SIZE ||
        elen > KV_MAX_KEY_SIZE)
        return KV_EINVAL;
    int rc = kv_flush(db);
    if (rc != KV_OK)
        return rc;
    pthread_mutex_lock(&db->mu);
    while (db->manual_pending && !db->bg_error)
        pthread_cond_wait(&db->done_cv, &db->mu);
    if (db->bg_error) {
        rc = db->bg_error;
        pthread_mutex_unlock(&db->mu);
        return rc;
    }
    /* The background thread runs it (it alone writes the manifest); the
     * range stays valid because this call waits. */
    db->manual_lo = start;
    db->manual_lolen = slen;
    db->manual_hi = end;
    db->manual_hilen = elen;
    db->manual_pending = 1;
    uint64_t ticket = db->manual_done + 1;
    pthread_cond_signal(&db->work_cv);
    while (db->manual_done < ticket && !db->bg_error)
        pthread_cond_wait(&db->done_cv, &db->mu);
    rc = db->manual_done >= ticket ? db->manual_rc : db->bg_error;
    pthread_mutex_unlock(&db->mu);
    return rc;
}

/* ---- opening and closing -------------------------------------------------------------- */

void kv_options_init(kv_options *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->version = KV_OPTIONS_VERSION;
    o->create_if_missing = 1;
    o->error_if_exists = 0;
    o->sync = 0;
    o->write_buffer_size = (size_t)4 << 20;
    o->block_size = 4096;
    o->block_cache_size = (size_t)8 << 20;
    o->bloom_bits_per_key = 10;
    o->filter_layout = KV_BLOOM_BLOCKED;
    o->compression = KV_COMPRESSION_ZSTD;
    o->compression_level = 1;
    o->max_open_files = 1000;
    o->l0_compaction_trigger = 4;
    o->l0_slowdown_trigger = 8;
    o->l0_stop_trigger = 12;
    o->target_file_size = (size_t)2 << 20;
    o->max_bytes_for_level_base = (size_t)10 << 20;
}

static int check_options(const kv_options *o)
{
    if (o->version != KV_OPTIONS_VERSION || o->write_buffer_size < ((size_t)64 << 10) ||
        o->write_buffer_size > ((size_t)1 << 32) || o->block_size < 64 ||
        o->block_size > ((size_t)64 << 20) || !(o->bloom_bits_per_key >= 0) ||
        o->bloom_bits_per_key > 1000 ||
        (o->filter_layout != KV_BLOOM_BLOCKED && o->filter_layout != KV_BLOOM_CLASSIC) ||
        (o->compression != KV_COMPRESSION_NONE && o->compression != KV_COMPRESSION_ZSTD) ||
        o->max_open_files < 16 || o->l0_compaction_trigger < 1 ||
        o->l0_slowdown_trigger < o->l0_compaction_trigger ||
        o->l0_stop_trigger < o->l0_slowdown_trigger || o->target_file_size < ((size_t)64 << 10) ||
        o->max_bytes_for_level_base < o->target_file_size)
        return KV_EINVAL;
    if (o->compression == KV_COMPRESSION_ZSTD && (o->compression_level < -131072 ||
                                                  o->compression_level > 22))
        return KV_EINVAL;
    return KV_OK;
}

static uint64_t random_seed(void)
{
    uint64_t s = 0;
    if (getrandom(&s, sizeof s, 0) != (ssize_t)sizeof s)
        s = now_micros() ^ ((uint64_t)getpid() << 32);
    return s;
}

struct replay_ctx {
    kv_db *db;
    kv_mem *mem;
    uint64_t floor;   /* entries at or below this sequence are in tables */
    uint64_t max_seq;
    int bad;          /* a record that passed its checksum but is not a batch */
};

static int replay_entry(void *ctx, uint64_t seq, int kind, const uint8_t *key, size_t klen,
                        const uint8_t *val, size_t vlen)
{
    struct replay_ctx *r = ctx;
    if (seq > r->max_seq)
        r->max_seq = seq;
    if (seq <= r->floor)
        return KV_OK;
    return kv_mem_add(r->mem, seq, kind, key, klen, val, vlen);
}

static int replay_record(void *ctx, const void *rec, size_t len)
{
    struct replay_ctx *r = ctx;
    int rc = kv_batch_iterate(rec, len, replay_entry, r);
    if (rc == KV_ECORRUPT) {
        r->bad = 1;
        return 1; /* stop: treat like a damaged tail */
    }
    return rc;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Lists the directory: removes tables the manifest does not name and
 * leftover temporary files, collects live logs (sorted), and raises
 * next_file above every number in use. */
static int scan_dir(kv_db *db, const kv_table_meta *tables, size_t ntables, uint64_t **logs,
                    size_t *nlogs)
{
    *logs = NULL;
    *nlogs = 0;
    size_t cap = 0;
    DIR *d = opendir(db->path);
    if (!d)
        return kv_errno_status(errno);
    struct dirent *de;
    int rc = KV_OK;
    while (rc == KV_OK && (de = readdir(d)) != NULL) {
        const char *name = de->d_name;
        uint64_t n;
        const char *end = kv_db_file_number(name, &n);
        if (!end)
            continue;
        if (n + 1 > db->next_file)
            db->next_file = n + 1;
        int is_sst = strcmp(end, ".sst") == 0, is_log = strcmp(end, ".log") == 0;
        int is_tmp = strcmp(end, ".sst.tmp") == 0;
        if (is_log && n >= db->state.log_number) {
            if (*nlogs == cap) {
                size_t nc = cap ? 2 * cap : 8;
                uint64_t *l = realloc(*logs, nc * sizeof *l);
                if (!l) {
                    rc = KV_ENOMEM;
                    break;
                }
                *logs = l;
                cap = nc;
            }
            (*logs)[(*nlogs)++] = n;
            continue;
        }
        int live = 0;
        for (size_t i = 0; is_sst && i < ntables; i++)
            live |= tables[i].number == n;
        if ((is_sst && !live) || is_tmp || is_log) {
            size_t plen = strlen(db->path) + strlen(name) + 2;
            char *p = malloc(plen);
            if (!p) {
                rc = KV_ENOMEM;
                break;
            }
            snprintf(p, plen, "%s/%s", db->path, name);
            unlink(p);
            free(p);
        }
    }
    closedir(d);
    if (*nlogs > 1)
        qsort(*logs, *nlogs, sizeof **logs, cmp_u64);
    return rc;
}

static void db_free(kv_db *db)
{
    if (!db)
        return;
    kv_wal_close(db->wal);
    kv_memref_unref(db->mem);
    kv_memref_unref(db->imm);
    kv_version_unref(db->current);
    kv_sst_cache_free(db->cache);
    kv_manifest_close(db->man);
    if (db->lock_fd >= 0)
        close(db->lock_fd); /* releases the flock */
    pthread_mutex_destroy(&db->mu);
    pthread_cond_destroy(&db->work_cv);
    pthread_cond_destroy(&db->done_cv);
    for (int l = 0; l < KV_LEVELS; l++)
        free(db->compact_pointer[l].key);
    free(db->group);
    free(db->path);
    free(db->c);
    free(db);
}

/* Appends a line to db->recovery_text (cut short when it is full). */
static void recovery_note(kv_db *db, const char *fmt, ...)
{
    size_t used = strlen(db->recovery_text);
    if (used + 1 >= sizeof db->recovery_text)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(db->recovery_text + used, sizeof db->recovery_text - used, fmt, ap);
    va_end(ap);
}

int kv_recovery_report(kv_db *db, char **text)
{
    if (!db || !text)
        return KV_EINVAL;
    *text = strdup(db->recovery_text);
    return *text ? KV_OK : KV_ENOMEM;
}

/* Does the directory hold a table or a log (names "<digits>.sst" or
 * "<digits>.log")? */
static int dir_holds_data(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return 0;
    int found = 0;
    struct dirent *de;
    while (!found && (de = readdir(d)) != NULL) {
        uint64_t n;
        const char *end = kv_db_file_number(de->d_name, &n);
        found = end && (strcmp(end, ".sst") == 0 || strcmp(end, ".log") == 0);
    }
    closedir(d);
    return found;
}

/* Opens the manifest and the live tables, replays the live logs into a
 * memtable, writes that as a table, starts a new log and commits the
 * result in one manifest transaction; the old logs are then deleted. */
static int open_locked(kv_db *db)
{
    /* The manifest: a new database gets a random filter seed. */
    char *mpath = malloc(strlen(db->path) + sizeof "/" KV_MANIFEST_FILE);
    if (!mpath)
        return KV_ENOMEM;
    sprintf(mpath, "%s/%s", db->path, KV_MANIFEST_FILE);
    struct stat st;
    int exists = stat(mpath, &st) == 0 && st.st_size > 0;
    free(mpath);
    if (exists && db->o.error_if_exists)
        return KV_EINVAL;
    /* No manifest (or an empty one) beside tables or logs: the manifest was
     * lost. Starting afresh would delete every table as unnamed. */
    if (!exists && dir_holds_data(db->path))
        return kv_error_set(KV_ECORRUPT, "%s/%s: missing or empty beside table or log files",
                            db->path, KV_MANIFEST_FILE);
    if (!exists && !db->o.create_if_missing)
        return KV_NOTFOUND;
    kv_manifest_state fresh = {.format_version = KV_FORMAT_VERSION, .next_file = 1,
                               .last_seq = 0, .log_number = 0, .seed = random_seed()};
    int rc = kv_manifest_open(db->path, db->o.create_if_missing, &fresh, &db->man);
    if (rc == KV_ECORRUPT || rc == KV_EIO)
        return kv_error_set(rc, "%s/%s: %s", db->path, KV_MANIFEST_FILE,
                            rc == KV_EIO ? "I/O error opening it"
                                         : "damaged: LMDB refused it, or its meta pages, named "
                                           "databases or state record are missing or bad");
    if (rc != KV_OK)
        return rc;
    kv_table_meta *metas = NULL;
    size_t nmetas = 0;
    if ((rc = kv_manifest_load(db->man, &db->state, &metas, &nmetas)) != KV_OK) {
        if (rc == KV_ECORRUPT || rc == KV_EIO)
            kv_error_set(rc, "%s/%s: %s", db->path, KV_MANIFEST_FILE,
                         rc == KV_EIO ? "I/O error reading it"
                                      : "a record failed its checks (doc/manifest.md)");
        return rc;
    }
    if (db->state.format_version != KV_FORMAT_VERSION) {
        kv_manifest_free_tables(metas, nmetas);
        return kv_error_set(KV_ECORRUPT, "%s/%s: format version %u, this library reads %u",
                            db->path, KV_MANIFEST_FILE, (unsigned)db->state.format_version,
                            (unsigned)KV_FORMAT_VERSION);
    }
    if (nmetas > (size_t)db->o.max_open_files) {
        kv_manifest_free_tables(metas, nmetas);
        return KV_EINVAL;
    }
    db->seed = db->state.seed;
    db->next_file = db->state.next_file;
    db->last_seq = db->state.last_seq;

    /* Files on disk against the manifest. */
    uint64_t *logs = NULL;
    size_t nlogs = 0;
    rc = scan_dir(db, metas, nmetas, &logs, &nlogs);

    /* The live tables. */
    struct kv_table **open = rc == KV_OK && nmetas ? calloc(nmetas, sizeof *open) : NULL;
    size_t nopen = 0;
    if (rc == KV_OK && nmetas && !open)
        rc = KV_ENOMEM;
    for (size_t i = 0; i < nmetas; i++) {
        if (rc == KV_OK) {
            rc = kv_db_table_open(db, &metas[i], &open[nopen]);
            if (rc == KV_OK)
                nopen++;
        } else {
            free(metas[i].smallest);
            free(metas[i].largest);
        }
        metas[i].smallest = metas[i].largest = NULL;
    }
    free(metas);
    if (rc == KV_OK && !(db->current = kv_version_edit(NULL, NULL, 0, open, nopen)))
        rc = KV_ENOMEM;
    for (size_t i = 0; i < nopen; i++)
        kv_table_unref(open[i]); /* the version holds them now */
    free(open);
    if (rc != KV_OK) {
        free(logs);
        return rc;
    }

    /* Replay the live logs, oldest first, up to the first damage: after it,
     * later logs would leave a hole, so they are dropped too. */
    kv_mem *mem;
    if ((rc = kv_mem_new(&mem)) != KV_OK) {
        free(logs);
        return rc;
    }
    struct replay_ctx rx = {.db = db, .mem = mem, .floor = db->state.last_seq,
                            .max_seq = db->state.last_seq};
    int stopped = 0;
    for (size_t i = 0; rc == KV_OK && i < nlogs; i++) {
        char *p = kv_db_file_path(db, logs[i], "log");
        if (!p) {
            rc = KV_ENOMEM;
            break;
        }
        if (stopped) {
            struct stat lst;
            uint64_t size = stat(p, &lst) == 0 ? (uint64_t)lst.st_size : 0;
            db->recovery_dropped += size;
            recovery_note(db, "%06llu.log: not replayed (it follows damage in an earlier "
                          "log): %llu bytes dropped\n", (unsigned long long)logs[i],
                          (unsigned long long)size);
            free(p);
            continue;
        }
        kv_wal_report rep;
        rc = kv_wal_replay(p, logs[i], replay_record, &rx, &rep);
        free(p);
        if (rc == 1)
            rc = KV_OK; /* replay_record stopped at a bad batch */
        db->recovered_records += rep.records;
        db->recovery_dropped += rep.bytes_dropped;
        if (rep.tail_damaged || rx.bad) {
            db->recovery_damaged++;
            stopped = 1;
            recovery_note(db, "%06llu.log: KV_ECORRUPT at byte %llu (%s): replay stopped after "
                          "%llu records, %llu bytes dropped\n", (unsigned long long)logs[i],
                          (unsigned long long)rep.bytes_read,
                          rx.bad ? "a record whose batch does not decode"
                                 : "a torn or damaged record",
                          (unsigned long long)rep.records, (unsigned long long)rep.bytes_dropped);
        }
    }
    free(logs);
    if (rx.max_seq > db->last_seq)
        db->last_seq = rx.max_seq;

    /* What the logs held becomes a table, under one manifest commit with a
     * fresh log, so the old logs can go. */
    struct kv_table *t = NULL;
    if (rc == KV_OK)
        rc = flush_memtable(db, mem, db->last_seq, &t);
    kv_mem_free(mem);
    uint64_t wal_number = db->next_file++;
    if (rc == KV_OK) {
        char *p = kv_db_file_path(db, wal_number, "log");
        rc = p ? kv_wal_create(p, wal_number, &db->wal) : KV_ENOMEM;
        free(p);
    }
    kv_manifest_state ns = db->state;
    ns.last_seq = db->last_seq;
    ns.log_number = wal_number;
    if (rc == KV_OK)
        rc = kv_db_commit(db, &ns, NULL, 0, t ? &t : NULL, t ? 1 : 0);
    if (t) {
        if (rc != KV_OK)
            atomic_store(&t->obsolete, 1);
        kv_table_unref(t);
    }
    if (rc != KV_OK)
        return rc;
    db->wal_number = wal_number;
    remove_dead_logs(db, wal_number);
    if (!(db->mem = memref_new()))
        return KV_ENOMEM;
    return KV_OK;
}

int kv_open(const char *path, const kv_options *opts, kv_db **out)
{
    if (!out)
        return KV_EINVAL;
    *out = NULL;
    kv_options o;
    if (opts)
        o = *opts;
    else
        kv_options_init(&o);
    if (!path || !*path || check_options(&o) != KV_OK)
        return KV_EINVAL;

    if (mkdir(path, 0755) != 0) {
        if (errno != EEXIST)
            return errno == ENOENT && !o.create_if_missing ? KV_NOTFOUND : kv_errno_status(errno);
    } else if (!o.create_if_missing) {
        rmdir(path); /* not ours to create */
        return KV_NOTFOUND;
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return KV_EINVAL;

    kv_db *db = calloc(1, sizeof *db);
    if (!db)
        return KV_ENOMEM;
    db->lock_fd = -1;
    db->o = o;
    db->snapshots.next = db->snapshots.prev = &db->snapshots;
    if (pthread_mutex_init(&db->mu, NULL) != 0) {
        free(db);
        return KV_ENOMEM;
    }
    pthread_cond_init(&db->work_cv, NULL);
    pthread_cond_init(&db->done_cv, NULL);
    if (!(db->path = strdup(path)) || !(db->c = kv_tally_new(sizeof *db->c))) {
        db_free(db);
        return KV_ENOMEM;
    }

    /* One handle at a time, in any process: flock on LOCK, held by the
     * descriptor until kv_close (or the process's death). */
    char *lpath = malloc(strlen(path) + sizeof "/LOCK");
    if (!lpath) {
        db_free(db);
        return KV_ENOMEM;
    }
    sprintf(lpath, "%s/LOCK", path);
    db->lock_fd = open(lpath, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    free(lpath);
    if (db->lock_fd < 0) {
        int rc = kv_errno_status(errno);
        db_free(db);
        return rc;
    }
    if (flock(db->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        int rc = errno == EWOULDBLOCK ? KV_EBUSY : kv_errno_status(errno);
        db_free(db);
        return rc;
    }

    int rc = KV_OK;
    if (o.block_cache_size > 0)
        rc = kv_sst_cache_new(o.block_cache_size, &db->cache);
    if (rc == KV_OK)
        rc = open_locked(db);
    if (rc == KV_OK && pthread_create(&db->bg, NULL, background_thread, db) != 0)
        rc = KV_ENOMEM;
    if (rc != KV_OK) {
        db_free(db);
        return rc;
    }
    db->bg_running = 1;
    *out = db;
    return KV_OK;
}

int kv_close(kv_db *db)
{
    if (!db)
        return KV_OK;
    pthread_mutex_lock(&db->mu);
    db->closing = 1;
    atomic_store(&db->stopping, 1);
    pthread_cond_broadcast(&db->work_cv);
    pthread_mutex_unlock(&db->mu);
    if (db->bg_running)
        pthread_join(db->bg, NULL);
    int rc = db->bg_error ? db->bg_error : db->write_error;
    int crc = kv_wal_close(db->wal);
    db->wal = NULL;
    if (rc == KV_OK && crc != KV_OK)
        rc = crc;
    db_free(db);
    return rc;
}
