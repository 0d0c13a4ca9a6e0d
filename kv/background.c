/* background.c - the background threads: flushes (immutable memtables
 * written as level-0 tables), compactions (run by compact.c), idle work
 * (level 0 merged down after a quiet spell, views reclaimed), and the
 * commits of the table set to the manifest (kv_db_commit), one at a time
 * under commit_mu.
 *
 * When the memtable is full, the write path's leader (write.c) makes it
 * immutable, starts a new log and wakes the flush thread, which writes the
 * memtable as a level-0 table, commits it to the manifest together with the
 * new live-log number, installs a new version and deletes the old log.
 * With max_background_jobs 1 that thread also compacts, flushes first;
 * above 1, job threads run compactions, each claiming its inputs
 * (kv_compact_claim), so that several run at once (doc/database.md,
 * "Background jobs"). With neither to do, and no write for
 * idle_compaction_ms, the flush thread merges level 0 down (idle_watch,
 * below). A flush or compaction error stops background work and writes
 * (bg_error), as a log error does (write_error); reads go on. A full disk
 * is retried with backoff (resume, below); every other error stays until
 * kv_close (doc/reliability.md, "fsync errors" and "Full disks"). */
#define _DEFAULT_SOURCE /* clock_gettime, syscall, getpriority */
#include "db.h"
#include "tablemem.h"

#include <errno.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dbfiles.h"
#include "util/error.h"
#include "util/file.h"
#include "util/ikey.h"
#include "util/hash.h"

#define COUNT KV_COUNT

/* What a flush carries from one entry to the next. */
struct flush {
    kv_db *db;
    const kv_mem *mem;
    struct kv_blob_out *bo;
    size_t min_blob;
    struct kv_builder b;
    int building;
    const uint8_t *key; /* the current entry's user key, and its hash */
    size_t klen;
    uint64_t hash;
    uint8_t *ikey;
    size_t icap;
};

static int flush_start(struct flush *f)
{
    if (f->building)
        return KV_OK;
    kv_db *db = f->db;
    atomic_store_explicit(&db->l0_run_keys, kv_mem_count(f->mem), memory_order_relaxed);
    struct kv_version *v = kv_db_ref_version(db);
    double bits = kv_filter_bits(db, v, 0, kv_mem_count(f->mem), NULL, 0);
    kv_version_unref(v);
    int rc = kv_builder_start(db, &f->b, 0, bits, "kv: memtable flush");
    f->building = rc == KV_OK;
    return rc;
}

/* The dropper's output (kv_dropper_add): one entry into the table. */
static int flush_emit(void *ctx, const struct kv_dropper_out *o)
{
    struct flush *f = ctx;
    if (!o->keep)
        return KV_OK; /* memtables hold no blob references */
    int rc = flush_start(f);
    if (rc != KV_OK)
        return rc;
    size_t need = 2 * f->klen + 2 + KV_IKEY_TRAILER;
    if (need > f->icap) {
        uint8_t *n = realloc(f->ikey, need);
        if (!n)
            return KV_ENOMEM;
        f->ikey = n;
        f->icap = need;
    }
    size_t plen = kv_ikey_put_prefix(f->ikey, f->key, f->klen);
    if (o->kind == KV_KIND_VALUE && f->min_blob != KV_BLOB_NEVER && o->vlen >= f->min_blob &&
        f->klen <= KV_BLOB_KEY_MAX) {
        /* Apart from its key: the table keeps where it lies. */
        uint8_t ref[KV_BLOB_REF_MAX];
        size_t rlen;
        uint64_t number;
        rc = kv_blob_out_put(f->bo, f->key, f->klen, o->val, o->vlen, ref, &rlen, &number);
        if (rc != KV_OK)
            return rc;
        kv_ikey_put_trailer(f->ikey + plen, o->seq, KV_KIND_BLOB);
        rc = kv_builder_add(&f->b, f->ikey, plen + KV_IKEY_TRAILER, f->key, f->klen, f->hash,
                            o->seq, ref, rlen);
        kv_builder_note_blob(&f->b, number);
    } else {
        kv_ikey_put_trailer(f->ikey + plen, o->seq, o->kind);
        rc = kv_builder_add(&f->b, f->ikey, plen + KV_IKEY_TRAILER, f->key, f->klen, f->hash,
                            o->seq, o->val, o->kind == KV_KIND_TOMBSTONE ? 0 : o->vlen);
    }
    if (rc == KV_OK && o->pinned)
        f->b.meta.flags |= KV_TABLE_SNAPSHOT_PINNED;
    return rc;
}

/* The range tombstone sequences a flush keeps: nothing is known of the
 * tables below, so no fragment goes, only sequences no snapshot needs. */
static size_t flush_keep(void *ctx, const uint8_t *start, size_t slen, const uint8_t *end,
                         size_t elen, uint64_t *seqs, size_t nseq)
{
    (void)start, (void)slen, (void)end, (void)elen;
    return kv_dropper_keep_seqs(*(const uint64_t *)ctx, 0, seqs, nseq);
}

int kv_db_flush_memtable(kv_db *db, const kv_mem *mem, const kv_rtset *rt, uint64_t horizon,
                         struct kv_blob_out *bo, struct kv_table **out)
{
    *out = NULL;
    struct flush f = {.db = db,
                      .mem = mem,
                      .bo = bo,
                      .min_blob = bo ? db->o.min_blob_size : KV_BLOB_NEVER};
    struct kv_dropper drop = {.horizon = horizon,
                              .db = db,
                              .rt = rt,
                              .level = 0,
                              .lenient = 1,
                              .now = (uint64_t)time(NULL),
                              .ctx = &f,
                              .emit = flush_emit};
    kv_rtset *keep = NULL;
    int rc = KV_OK;
    if (rt)
        rc = kv_rtset_union(db->cmp, &rt, 1, NULL, 0, flush_keep, &horizon, &keep);
    kv_mem_iter it;
    kv_mem_iter_init(&it, mem);
    for (kv_mem_iter_first(&it); rc == KV_OK && kv_mem_iter_valid(&it); kv_mem_iter_next(&it)) {
        kv_mem_entry e;
        kv_mem_iter_entry(&it, &e);
        if (!f.key || e.klen != f.klen || (e.klen && memcmp(e.key, f.key, e.klen) != 0)) {
            /* The key before is settled first (its operands), with its hash. */
            if ((rc = kv_dropper_end(&drop)) != KV_OK)
                break;
            f.hash = kv_db_hash(db, e.key, e.klen);
            f.key = e.key;
            f.klen = e.klen;
        }
        rc = kv_dropper_add(&drop, e.key, e.klen, e.seq, e.kind, e.val, e.vlen);
    }
    if (rc == KV_OK)
        rc = kv_dropper_end(&drop);
    /* The range tombstones, all of them: a level-0 table may overlap
     * anything. A memtable of range tombstones alone makes a table too. */
    for (size_t i = 0, n = kv_rtset_count(keep); rc == KV_OK && i < n; i++) {
        kv_rt_fragment fr;
        kv_rtset_fragment(keep, i, &fr);
        if ((rc = flush_start(&f)) == KV_OK)
            rc = kv_builder_add_range(&f.b, &fr);
        for (size_t j = 0; j < fr.nseq; j++)
            if (fr.seqs[j] > horizon)
                f.b.meta.flags |= KV_TABLE_SNAPSHOT_PINNED;
    }
    free(f.ikey);
    kv_dropper_free(&drop);
    if (!f.building) {
        kv_rtset_unref(keep);
        return rc;
    }
    if (rc != KV_OK) {
        kv_builder_abandon(&f.b);
        kv_rtset_unref(keep);
        return rc;
    }
    /* The blob files first: synced before the table that refers to them
     * is opened, and both before the commit that names them. */
    if (bo && (rc = kv_blob_out_finish(bo)) != KV_OK) {
        kv_builder_abandon(&f.b);
        kv_rtset_unref(keep);
        return rc;
    }
    rc = kv_builder_finish(&f.b, out);
    kv_rtset_unref(keep); /* the builder borrowed its keys until now */
    if (rc == KV_OK) {
        COUNT(db, flush_bytes, (*out)->meta.file_size);
        COUNT(db, level_written[0], (*out)->meta.file_size);
    }
    return rc;
}

int kv_db_commit(kv_db *db, const kv_manifest_state *state, const uint64_t *remove, size_t nremove,
                 struct kv_table *const *add, size_t nadd)
{
    return kv_db_commit_blobs(db, state, remove, nremove, add, nadd, NULL, 0);
}

/* The blob side of a commit: the jobs' new files, their garbage added to
 * the live files' counts (new records for the manifest), and the files
 * whose every record is now garbage (removed). Under mu; the counts are
 * applied to the files only once the commit is durable (apply_garbage). */
struct blob_plan {
    struct kv_blob **add;
    size_t nadd;
    kv_manifest_blob *put;
    size_t nput;
    uint64_t *remove;
    size_t nremove;
};

static void blob_plan_free(struct blob_plan *p)
{
    free(p->add);
    free(p->put);
    free(p->remove);
    memset(p, 0, sizeof *p);
}

static int blob_plan_make(kv_db *db, struct kv_blob_out *const *outs, size_t nouts,
                          struct blob_plan *p)
{
    memset(p, 0, sizeof *p);
    size_t nadd = 0, ngarbage = 0;
    for (size_t i = 0; i < nouts; i++) {
        nadd += outs[i]->ndone;
        ngarbage += outs[i]->ngarbage;
    }
    if (!nadd && !ngarbage)
        return KV_OK;
    p->add = malloc((nadd ? nadd : 1) * sizeof *p->add);
    p->put = malloc((nadd + ngarbage ? nadd + ngarbage : 1) * sizeof *p->put);
    p->remove = malloc((ngarbage ? ngarbage : 1) * sizeof *p->remove);
    if (!p->add || !p->put || !p->remove) {
        blob_plan_free(p);
        return KV_ENOMEM;
    }
    for (size_t i = 0; i < nouts; i++)
        for (size_t j = 0; j < outs[i]->ndone; j++) {
            p->add[p->nadd++] = outs[i]->done[j];
            kv_blob_record(outs[i]->done[j], &p->put[p->nput++]);
        }
    const struct kv_version *v = db->current;
    for (size_t i = 0; i < nouts; i++)
        for (size_t j = 0; j < outs[i]->ngarbage; j++) {
            const struct kv_blob_garbage *g = &outs[i]->garbage[j];
            struct kv_blob *b = kv_blob_find(v->blobs, v->nblobs, g->number);
            if (!b) {
                blob_plan_free(p);
                return kv_error_set(KV_ECORRUPT,
                                    "%s: a compaction found garbage in blob file %llu, which "
                                    "is not live",
                                    db->path, (unsigned long long)g->number);
            }
            /* Two jobs (the parts of one compaction) may name one file. */
            kv_manifest_blob *r = NULL;
            for (size_t k = 0; k < p->nput && !r; k++)
                if (p->put[k].number == g->number)
                    r = &p->put[k];
            if (!r) {
                r = &p->put[p->nput++];
                kv_blob_record(b, r);
            }
            r->garbage_records += g->records;
            r->garbage_bytes += g->bytes;
            if (r->garbage_records > r->records || r->garbage_bytes > r->record_bytes) {
                blob_plan_free(p);
                return kv_error_set(KV_ECORRUPT,
                                    "%s: blob file %llu: more garbage (%llu records, %llu "
                                    "bytes) than it holds (%llu, %llu)",
                                    db->path, (unsigned long long)g->number,
                                    (unsigned long long)r->garbage_records,
                                    (unsigned long long)r->garbage_bytes,
                                    (unsigned long long)r->records,
                                    (unsigned long long)r->record_bytes);
            }
        }
    /* A file whose every record is garbage goes: its record is removed,
     * not put. */
    size_t keep = 0;
    for (size_t k = 0; k < p->nput; k++) {
        if (p->put[k].garbage_records == p->put[k].records &&
            kv_blob_find(v->blobs, v->nblobs, p->put[k].number))
            p->remove[p->nremove++] = p->put[k].number;
        else
            p->put[keep++] = p->put[k];
    }
    p->nput = keep;
    return KV_OK;
}

/* After the commit: the live files take their new garbage counts. One
 * that passes blob_gc_threshold moves gc_gen on (db.h). Under mu. */
static void apply_garbage(kv_db *db, const struct kv_version *v, const struct blob_plan *p)
{
    for (size_t k = 0; k < p->nput; k++) {
        struct kv_blob *b = kv_blob_find(v->blobs, v->nblobs, p->put[k].number);
        if (b) {
            double before = kv_blob_garbage_ratio(b);
            double after = b->record_bytes
                               ? (double)p->put[k].garbage_bytes / (double)b->record_bytes
                               : 1;
            if (before < db->o.blob_gc_threshold && after >= db->o.blob_gc_threshold)
                db->gc_gen++;
            atomic_store_explicit(&b->garbage_records, p->put[k].garbage_records,
                                  memory_order_relaxed);
            atomic_store_explicit(&b->garbage_bytes, p->put[k].garbage_bytes, memory_order_relaxed);
        }
    }
}

static void sync_old_log(kv_db *db, int data);

/* kv_db_commit_blobs; with `flushed` (a flush's commit: the immutable
 * memtable whose table add[] holds), the memtable leaves the view in the
 * same publish that brings the table in, and its log is closed first
 * (sync_old_log, before imm is cleared, so that no memtable switch comes
 * meanwhile). A reader never sees both: a merge operand read twice, once
 * in each, would be merged twice. */
static int commit_locked(kv_db *db, const kv_manifest_state *state, const uint64_t *remove,
                         size_t nremove, struct kv_table *const *add, size_t nadd,
                         struct kv_blob_out *const *outs, size_t nouts, struct kv_memref *flushed)
{
    kv_table_meta *metas = nadd ? malloc(nadd * sizeof *metas) : NULL;
    if (nadd && !metas)
        return KV_ENOMEM;
    for (size_t i = 0; i < nadd; i++)
        metas[i] = add[i]->meta;
    /* Only the holder of commit_mu (commit_blobs) changes the version and
     * the manifest, so the new version can be built first and the commit
     * run without mu. */
    pthread_mutex_lock(&db->mu);
    kv_manifest_state st = state ? *state : db->state;
    st.next_file = db->next_file;
    struct blob_plan plan;
    int rc = blob_plan_make(db, outs, nouts, &plan);
    struct kv_blob_edit be = {plan.add, plan.nadd, plan.remove, plan.nremove};
    struct kv_version *nv = rc == KV_OK ? kv_version_edit_blobs(db->current, remove, nremove, add,
                                                                nadd, db->cmp, &be)
                                        : NULL;
    pthread_mutex_unlock(&db->mu);
    /* The new tables' names (renamed in without a directory sync,
     * kv_builder_start) are made durable before the manifest names them:
     * one sync for the whole job. */
    if (rc == KV_OK && nadd)
        rc = kv_file_sync_dir(db->path);
    if (rc == KV_OK)
        rc = nv ? kv_manifest_apply_blobs(db->man, &st, remove, nremove, metas, nadd, plan.put,
                                          plan.nput, plan.remove, plan.nremove)
                : KV_ENOMEM;
    free(metas);
    if (rc != KV_OK) {
        kv_version_unref(nv);
        blob_plan_free(&plan);
        return rc;
    }
    if (flushed) {
        /* Counted, and the logs it replaced gone, before the memtable leaves
         * (below): kv_flush returns once it has, and finds both done. */
        COUNT(db, flushes, 1);
        kv_dbfile_remove_logs_below(db->path, &st, db->man, kv_manifest_last_txn(db->man));
    }
    pthread_mutex_lock(&db->mu);
    if (flushed)
        sync_old_log(db, 0); /* the table holds the log's entries, durably */
    struct kv_version *old = db->current;
    /* The files this commit removed go with their last reference here, and
     * once no read-only handle (any process) pins an older manifest state. */
    uint64_t txn = kv_manifest_last_txn(db->man);
    for (size_t i = 0; i < old->n; i++)
        for (size_t j = 0; j < nremove; j++)
            if (old->tables[i]->meta.number == remove[j]) {
                atomic_store(&old->tables[i]->dead_txn, txn);
                atomic_store(&old->tables[i]->obsolete, 1);
            }
    for (size_t i = 0; i < old->nblobs; i++)
        for (size_t j = 0; j < plan.nremove; j++)
            if (old->blobs[i]->number == plan.remove[j]) {
                atomic_store(&old->blobs[i]->dead_txn, txn);
                atomic_store(&old->blobs[i]->obsolete, 1);
            }
    apply_garbage(db, nv, &plan);
    blob_plan_free(&plan);
    db->current = nv;
    /* kv_db_note_features may have raised the format version since st
     * was taken (the manifest keeps the higher one: kv_manifest_apply). */
    if (db->state.format_version > st.format_version)
        st.format_version = db->state.format_version;
    db->state = st;
    if (flushed && db->imm == flushed) {
        db->imm = NULL; /* the caller drops its reference */
        atomic_store(&db->imm_pending, 0);
        /* The flush's table maps recent keys: the next memtable made
         * buckets its occupancy gate by its range filter (db.c, mem_gate).
         * Set here, with imm cleared, so that a switch that follows (a
         * kv_flush waits for this) finds it. */
        if (nadd == 1 && kv_sst_reader_range_filter_keys(add[0]->reader) > 0) {
            kv_table_ref(add[0]);
            kv_table_unref(db->mem_map); /* a reader's reference keeps it open */
            db->mem_map = add[0];
        }
    }
    /* Readers see the new tables from here (view.h). Once open (a
     * memtable exists); out of memory, the old view stays: its tables
     * hold the same entries, and they stay open until a later one. */
    int open = db->mem != NULL;
    if (open)
        kv_view_publish(db, NULL);
    pthread_cond_broadcast(&db->done_cv); /* level 0 may have shrunk */
    pthread_cond_broadcast(&db->job_cv);  /* ... or grown: a compaction may be due */
    pthread_mutex_unlock(&db->mu);
    kv_version_unref(old);
    if (open) /* the replaced tables go now, or once the Gets reading them end */
        kv_view_reclaim(db, 0);
    kv_tablemem_update(db); /* the tables changed: what stays in memory */
    for (size_t i = 0; i < nouts; i++) {
        KV_COUNT(db, blob_written_bytes, outs[i]->written);
        KV_COUNT(db, blob_relocated_bytes, outs[i]->relocated);
    }
    return KV_OK;
}

/* commit_locked under commit_mu: the flush thread, the job threads and
 * kv_ingest commit one at a time, each building its version from the one
 * the commit before installed. */
static int commit_blobs(kv_db *db, const kv_manifest_state *state, const uint64_t *remove,
                        size_t nremove, struct kv_table *const *add, size_t nadd,
                        struct kv_blob_out *const *outs, size_t nouts, struct kv_memref *flushed)
{
    pthread_mutex_lock(&db->commit_mu);
    int rc = commit_locked(db, state, remove, nremove, add, nadd, outs, nouts, flushed);
    pthread_mutex_unlock(&db->commit_mu);
    return rc;
}

int kv_db_commit_blobs(kv_db *db, const kv_manifest_state *state, const uint64_t *remove,
                       size_t nremove, struct kv_table *const *add, size_t nadd,
                       struct kv_blob_out *const *outs, size_t nouts)
{
    return commit_blobs(db, state, remove, nremove, add, nadd, outs, nouts, NULL);
}

/* Syncs db->wal's directory entry and, with `data`, the log before it,
 * then closes that log (db.h, old_wal): what a memtable switch left undone
 * so that the writer need not wait for two fsyncs. The log's data needs
 * no sync once the flush of its memtable has committed (its table and
 * blob file hold the same entries, synced, and the log is deleted): the
 * flush syncs it first only for a sync write that waits for it (or
 * kv_options.sync), and after a failed flush. Left unsynced, a log of
 * large values never reaches the disk at all, which halves what a fill
 * of them writes there. A failure stops writes, as a failed sync of the
 * log always does; the flush goes on (its table holds the same entries).
 * Once writes have stopped for a log error, no log is synced again in
 * this session (a failed fsync is never retried, and no write is
 * acknowledged any more): the old log is only closed. Called with mu held
 * and returns with it held. */
static void sync_old_log(kv_db *db, int data)
{
    kv_wal *old = db->old_wal;
    if (!old)
        return;
    unsigned long long mark = kv_error_mark();
    int stopped = db->write_error != KV_OK && !kv_db_recoverable(db);
    char *path = stopped ? NULL : kv_dbfile_path(db->path, db->wal_number, "log");
    pthread_mutex_unlock(&db->mu);
    int rc = KV_OK;
    if (!stopped) {
        if (data) {
            rc = kv_wal_sync(old);
            COUNT(db, wal_syncs, 1);
        }
        if (rc == KV_OK)
            rc = path ? kv_file_sync_dir_of(path) : KV_ENOMEM;
    }
    free(path);
    kv_wal_close(old); /* synced, or its error kept below */
    pthread_mutex_lock(&db->mu);
    db->old_wal = NULL;
    if (rc != KV_OK) /* a failed fsync is never retried (util/file.c: KV_EIO) */
        kv_db_stop(db, &db->write_error, db->write_text, "sync of the log", mark, rc);
    pthread_cond_broadcast(&db->done_cv); /* sync writers wait for this */
}

/* Flushes db->imm: writes its table, commits it with the log that follows
 * it as the first live one, and deletes the logs before. Called with mu
 * held and returns with it held. */
static int flush_imm(kv_db *db)
{
    if (db->o.sync || db->sync_waiters)
        sync_old_log(db, 1);
    unsigned long long mark = kv_error_mark();
    struct kv_memref *imm = db->imm;
    uint64_t horizon = kv_db_oldest_snapshot(db);
    db->flushes_running++;
    pthread_mutex_unlock(&db->mu);
    struct kv_table *t = NULL;
    struct kv_blob_out bo;
    kv_blob_out_init(&bo, db, UINT64_MAX); /* one blob file per flush */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = kv_db_flush_memtable(db, imm->mem, imm->rt, horizon, &bo, &t);
    pthread_mutex_lock(&db->mu);
    kv_manifest_state st = db->state;
    pthread_mutex_unlock(&db->mu);
    st.log_number = imm->next_log;
    if (imm->max_seq > st.last_seq)
        st.last_seq = imm->max_seq;
    struct kv_blob_out *outs[1] = {&bo};
    if (rc == KV_OK)
        rc = commit_blobs(db, &st, NULL, 0, t ? &t : NULL, t ? 1 : 0, outs, 1, imm);
    kv_blob_out_free(&bo, rc == KV_OK);
    if (t) {
        if (rc != KV_OK)
            atomic_store(&t->obsolete, 1); /* never named: delete */
        kv_table_unref(t);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    pthread_mutex_lock(&db->mu);
    db->flushes_running--;
    /* Still open after a failure unless a sync write asked for it: synced
     * now, imm still set, so no switch comes meanwhile. (After a commit,
     * the commit closed it: a log switched to since is not this one.) */
    if (rc != KV_OK)
        sync_old_log(db, 1);
    if (rc == KV_OK) {
        /* What this flush achieved, for the write controller (write.c). */
        double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
        if (secs > 0) {
            double r = (double)kv_mem_used(imm->mem) / secs;
            db->ctl.flush_rate = db->ctl.flush_rate > 0 ? 0.7 * db->ctl.flush_rate + 0.3 * r : r;
        }
        /* The commit took imm out of the view with the table in (out of
         * memory, the old view keeps imm and the old tables: still right). */
        kv_memref_unref(imm);
    } else {
        kv_db_stop(db, &db->bg_error, db->bg_text, "flush", mark, rc);
    }
    pthread_cond_broadcast(&db->done_cv);
    return rc;
}

int kv_db_flush_pending(kv_db *db)
{
    if (!atomic_load(&db->imm_pending))
        return KV_OK;
    pthread_mutex_lock(&db->mu);
    int rc = db->imm && !kv_db_stopped(db) ? flush_imm(db) : db->bg_error;
    /* The flushed memtable goes at the compaction's commit, or when idle
     * (reclaiming here, inside a compaction, changed which compactions
     * run after a fill: measured, not understood). */
    db->reclaim_pending = 1;
    pthread_mutex_unlock(&db->mu);
    return rc;
}

/* Lowers the calling thread's CPU priority by background_nice (kv.h); the
 * threads it starts (a compaction's second part) inherit it. Linux gives
 * each thread its own nice value (setpriority on its thread id); elsewhere,
 * or when refused, the thread runs as it is. */
static void lower_priority(const kv_db *db)
{
#ifdef __linux__
    int nice = db->o.background_nice;
    if (nice < 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        nice = cpus > 0 && cpus <= 4 ? 19 : 0;
    }
    if (nice == 0)
        return;
    id_t tid = (id_t)syscall(SYS_gettid);
    errno = 0;
    int now = getpriority(PRIO_PROCESS, tid);
    if (now == -1 && errno)
        return;
    int to = now + nice > 19 ? 19 : now + nice;
    (void)setpriority(PRIO_PROCESS, tid, to);
#else
    (void)db;
#endif
}

/* ---- waiting for work, and idle compaction --------------------------------------------- */

/* Waits on work_cv for at most ns nanoseconds; 1 when the time ran out.
 * The condition variable waits by CLOCK_REALTIME (its default), so the
 * deadline is taken from that clock here, just before the wait; the spans
 * themselves are measured on CLOCK_MONOTONIC (idle_watch), which a change
 * of the date does not move. Under mu. */
static int wait_for(kv_db *db, uint64_t ns)
{
    struct timespec at;
    clock_gettime(CLOCK_REALTIME, &at);
    at.tv_sec += (time_t)(ns / 1000000000u);
    at.tv_nsec += (long)(ns % 1000000000u);
    if (at.tv_nsec >= 1000000000) {
        at.tv_sec++;
        at.tv_nsec -= 1000000000;
    }
    return pthread_cond_timedwait(&db->work_cv, &db->mu, &at) == ETIMEDOUT;
}

/* Idle compaction (kv.h, idle_compaction_ms), seen from the background
 * thread, which alone keeps this. The write path does nothing for it:
 * this thread reads last_seq whenever it is about to wait with level 0
 * non-empty, and notes each new value and when it first saw it. A value
 * that stood for idle_compaction_ms means no write came in that time (every
 * write moves last_seq; flushes and compactions do not), so the database
 * is idle. Writes that fill no memtable do not wake this thread, so the
 * time of a change is when this thread saw it, never before the write: an
 * idle compaction may come up to idle_compaction_ms late, never early. */
struct idle_watch {
    uint64_t seq;   /* last_seq as last seen */
    uint64_t since; /* kv_db_now_ns() when it was first seen at that value */
};

/* Under mu: 0 when no idle compaction is armed; else the nanoseconds left
 * until it is due (at least 1), or 0 with *due set when it is due now. */
static uint64_t idle_left(kv_db *db, struct idle_watch *w, int *due)
{
    *due = 0;
    /* Not while a compaction is due or runs (job threads): it is work of
     * a quiet spell, and runs alone (drain_jobs). */
    if (kv_db_stopped(db) || !kv_idle_compaction_armed(db) || db->compactions_running ||
        (db->o.max_background_jobs > 1 && kv_compaction_needed(db)))
        return 0;
    uint64_t seq = atomic_load_explicit(&db->last_seq, memory_order_relaxed);
    uint64_t now = kv_db_now_ns();
    if (seq != w->seq) {
        w->seq = seq;
        w->since = now;
    }
    uint64_t span = (uint64_t)db->o.idle_compaction_ms * 1000000u;
    if (now - w->since >= span) {
        *due = 1;
        return 0;
    }
    return w->since + span - now;
}

/* ---- a full disk: retried with backoff (doc/reliability.md, "Full disks") ---------- */

#define RESUME_FIRST_NS 100000000u /* the first retry 100 ms after the error, */
#define RESUME_MAX_NS 2000000000u  /* then twice as long each time, up to 2 s */

/* Replaces the log whose append met a full disk (db->wal, numbered
 * dead_log: that append may have left part of a record, and the log takes
 * no more) with a new one, and hands its memtable to a flush: once that
 * commits, the log is deleted, torn tail and all, before any write lands
 * in the new log (writes stay stopped until then, so that replay, which
 * stops at a torn record, never has a later log to skip). Under mu, imm
 * NULL (so old_wal is NULL too). */
static int roll_dead_log(kv_db *db)
{
    uint64_t number = 0;
    int rc = kv_db_new_file_number(db, &number);
    if (rc != KV_OK)
        return rc;
    char *path = kv_dbfile_path(db->path, number, "log");
    struct kv_memref *fresh = kv_memref_new(db);
    struct kv_view *view = kv_view_alloc();
    kv_wal *wal = NULL;
    /* Synced with its directory entry: the entries of the logs before it
     * are durable too. */
    rc = path && fresh && view ? kv_wal_create(path, number, &wal) : KV_ENOMEM;
    free(path);
    if (rc != KV_OK) {
        kv_memref_unref(fresh);
        free(view);
        return rc;
    }
    kv_wal *dead = db->wal;
    db->wal = wal;
    db->wal_number = number;
    db->mem->next_log = number;
    db->imm = db->mem;
    db->ctl.imm_since_ns = kv_db_now_ns();
    db->mem = fresh;
    kv_view_publish(db, view); /* cannot fail: view is allocated */
    atomic_store(&db->imm_pending, 1);
    kv_wal_close(dead); /* its error is the one in force */
    return KV_OK;
}

/* The retry of a full disk (kv_db_recoverable): the flush that failed, a
 * compaction that failed, and after a failed log append a new log with
 * its memtable flushed. The error is cleared once all of it succeeds;
 * else the retry's own error is in force (KV_EIO, say, from a sync: then
 * no more retries). Under mu (released during the work); background
 * thread. */
static int resume(kv_db *db)
{
    unsigned long long mark = kv_error_mark();
    int compaction = db->bg_error != 0 && !db->imm;
    db->bg_error = 0; /* the failed job runs again */
    int rc = KV_OK;
    if (db->imm) {
        rc = flush_imm(db); /* its failure stops the handle again */
        db->reclaim_pending = 1;
    }
    if (rc == KV_OK && compaction && kv_compaction_needed(db)) {
        pthread_mutex_unlock(&db->mu);
        rc = kv_compact_step(db);
        pthread_mutex_lock(&db->mu);
        if (rc == KV_NOTFOUND || rc == KV_EBUSY)
            rc = KV_OK;
        kv_db_stop(db, &db->bg_error, db->bg_text, "compaction", mark, rc);
    }
    if (rc == KV_OK && db->write_error && db->wal_number == db->dead_log) {
        if ((rc = roll_dead_log(db)) != KV_OK)
            kv_db_stop(db, &db->bg_error, db->bg_text, "a new log", mark, rc);
        else
            rc = flush_imm(db);
        db->reclaim_pending = 1;
    }
    if (rc == KV_OK && db->bg_error)
        rc = db->bg_error;
    if (rc == KV_OK)
        db->write_error = 0;
    return rc;
}

/* Under mu: 0 when no retry is armed (no error, or one that is not a full
 * disk); else the nanoseconds until the next one (at least 1), or 0 with
 * *due set when it is due now (its time came, or kv_resume asked). */
static uint64_t resume_left(kv_db *db, int *due)
{
    *due = 0;
    if (!kv_db_recoverable(db) || db->bg_paused) {
        db->resume_at = 0;
        return 0;
    }
    if (db->resume_asked != db->resume_done) {
        *due = 1;
        return 0;
    }
    uint64_t now = kv_db_now_ns();
    if (!db->resume_at) {
        if (!db->resume_backoff)
            db->resume_backoff = RESUME_FIRST_NS;
        db->resume_at = now + db->resume_backoff;
    }
    if (now >= db->resume_at) {
        *due = 1;
        return 0;
    }
    return db->resume_at - now;
}

/* Runs one retry and sets the next: at once after success, when the disk
 * fills again (100 ms), else twice as late as the last, up to 2 s. Under
 * mu; wakes kv_resume's callers and the writers. */
static void run_resume(kv_db *db)
{
    uint64_t ticket = db->resume_asked;
    db->resuming = 1;
    int rc = resume(db);
    db->resuming = 0;
    db->resume_done = ticket;
    if (rc == KV_OK) {
        db->resume_backoff = 0;
        db->resume_at = 0;
        COUNT(db, resumes, 1);
    } else {
        db->resume_backoff = db->resume_backoff ? 2 * db->resume_backoff : RESUME_FIRST_NS;
        if (db->resume_backoff > RESUME_MAX_NS)
            db->resume_backoff = RESUME_MAX_NS;
        db->resume_at = kv_db_now_ns() + db->resume_backoff;
    }
    pthread_cond_broadcast(&db->done_cv);
}

/* Under mu, on the flush thread: no job thread claims a compaction until
 * jobs_undrain, and the ones running end first (flushes go on meanwhile):
 * kv_compact_range and the idle compaction run alone, as they pick whole
 * levels without claiming. */
static void drain_jobs(kv_db *db)
{
    db->drain++;
    /* Not cut short by kv_close: the running ones abandon their work
     * (stopping) and end soon, and what runs next must not overlap them. */
    while (db->compactions_running) {
        if (db->imm && !kv_db_stopped(db)) {
            flush_imm(db);
            db->reclaim_pending = 1;
        } else {
            wait_for(db, 1000000); /* a job's end signals work_cv */
        }
    }
}

static void jobs_undrain(kv_db *db)
{
    db->drain--;
    pthread_cond_broadcast(&db->job_cv);
}

/* kv_compact_range's request, on the flush thread. Under mu. */
static int run_manual(kv_db *db)
{
    const uint8_t *lo = db->manual_lo, *hi = db->manual_hi;
    size_t lolen = db->manual_lolen, hilen = db->manual_hilen;
    unsigned long long mark = kv_error_mark();
    db->manual_running = 1;
    drain_jobs(db);
    pthread_mutex_unlock(&db->mu);
    int rc = kv_compact_manual(db, lo, lolen, hi, hilen);
    pthread_mutex_lock(&db->mu);
    jobs_undrain(db);
    db->manual_running = 0;
    db->manual_pending = 0;
    db->manual_rc = rc;
    if (rc != KV_OK)
        kv_db_keep_text(db, db->manual_text, "kv_compact_range", mark, rc);
    db->manual_done++;
    return rc;
}

/* The flush thread: flushes first, then (max_background_jobs 1: it is the
 * only thread) compactions; kv_compact_range, idle compactions and
 * full-disk retries in any case. */
static void *flush_thread(void *arg)
{
    kv_db *db = arg;
    lower_priority(db);
    const int alone = db->o.max_background_jobs == 1;
    int busy = 0;
    pthread_mutex_lock(&db->mu);
    struct idle_watch idle = {atomic_load_explicit(&db->last_seq, memory_order_relaxed),
                              kv_db_now_ns()};
    for (;;) {
        db->bg_busy -= busy;
        busy = 0;
        int idle_due = 0, resume_due = 0;
        while (!db->closing &&
               (kv_db_stopped(db) || db->bg_paused ||
                (!db->imm && !db->manual_pending && (!alone || !kv_compaction_needed(db))))) {
            /* Nothing to do now. Two things may come due without a
             * signal: views retired while Gets held them, looked at
             * again in 1 ms (view.h) until none is left that only Gets
             * hold; and an idle compaction. Wait until the earlier of
             * the two, or for a signal (work, or kv_close) when neither
             * is armed. */
            uint64_t retry = resume_left(db, &resume_due);
            if (resume_due)
                break;
            uint64_t left = idle_left(db, &idle, &idle_due);
            if (idle_due)
                break;
            int reclaim = db->reclaim_pending && (!left || left >= 1000000);
            if (reclaim)
                left = 1000000;
            if (retry && (!left || retry < left))
                left = retry; /* a full disk's next retry */
            if (!left) {
                pthread_cond_wait(&db->work_cv, &db->mu);
                continue;
            }
            if (wait_for(db, left) && reclaim) {
                pthread_mutex_unlock(&db->mu);
                kv_view_reclaim(db, 0); /* sets reclaim_pending again */
                pthread_mutex_lock(&db->mu);
            }
        }
        if (db->closing)
            break;
        db->bg_busy++;
        busy = 1;
        if (resume_due) {
            run_resume(db);
            continue;
        }
        if (idle_due) {
            /* Nothing else to do, and no write for idle_compaction_ms:
             * level 0 goes down into the base level. */
            unsigned long long mark = kv_error_mark();
            drain_jobs(db);
            pthread_mutex_unlock(&db->mu);
            int rc = kv_compact_idle(db);
            pthread_mutex_lock(&db->mu);
            jobs_undrain(db);
            if (rc != KV_OK && rc != KV_NOTFOUND && rc != KV_EBUSY)
                kv_db_stop(db, &db->bg_error, db->bg_text, "idle compaction", mark, rc);
            pthread_cond_broadcast(&db->done_cv);
            continue;
        }
        if (db->imm) {
            flush_imm(db);
            /* The flushed memtable goes with the view flush_imm retired:
             * at the next commit's reclaim, or when idle, 1 ms from now.
             * Not here: letting go of mu now would let a stalled writer
             * hand over its next memtable before a due compaction starts. */
            db->reclaim_pending = 1;
            continue;
        }
        int rc;
        unsigned long long mark = kv_error_mark();
        if (db->manual_pending) {
            rc = run_manual(db);
        } else {
            pthread_mutex_unlock(&db->mu);
            rc = kv_compact_step(db);
            pthread_mutex_lock(&db->mu);
            if (rc == KV_NOTFOUND)
                rc = KV_OK;
        }
        if (rc != KV_OK && rc != KV_EBUSY)
            kv_db_stop(db, &db->bg_error, db->bg_text, "compaction", mark, rc);
        pthread_cond_broadcast(&db->done_cv);
    }
    db->bg_busy -= busy;
    pthread_mutex_unlock(&db->mu);
    return NULL;
}

/* A job thread (max_background_jobs > 1): claims a compaction that can run
 * beside the others (kv_compact_claim) and runs it, or waits on job_cv
 * until a commit or a job's end may have made one claimable. */
static void *job_thread(void *arg)
{
    kv_db *db = arg;
    lower_priority(db);
    pthread_mutex_lock(&db->mu);
    while (!db->closing) {
        struct kv_compaction *kc = NULL;
        unsigned long long mark = kv_error_mark();
        int rc = KV_OK;
        if (!kv_db_stopped(db) && !db->bg_paused && !db->drain)
            rc = kv_compact_claim(db, 0, &kc);
        if (rc == KV_OK && !kc) {
            pthread_cond_wait(&db->job_cv, &db->mu);
            continue;
        }
        if (kc) {
            db->bg_busy++;
            pthread_mutex_unlock(&db->mu);
            rc = kv_compact_run(db, kc);
            pthread_mutex_lock(&db->mu);
            db->bg_busy--;
        }
        if (rc != KV_OK && rc != KV_EBUSY)
            kv_db_stop(db, &db->bg_error, db->bg_text, "compaction", mark, rc);
        pthread_cond_broadcast(&db->done_cv);
    }
    pthread_mutex_unlock(&db->mu);
    return NULL;
}

int kv_db_background_start(kv_db *db)
{
    int n = db->o.max_background_jobs - 1, e = 0;
    if (n > 0 && !(db->jobs = calloc((size_t)n, sizeof *db->jobs)))
        return kv_error_set(KV_ENOMEM, "%s: out of memory", db->path);
    if ((e = pthread_create(&db->bg, NULL, flush_thread, db)) == 0)
        db->bg_running = 1;
    for (int i = 0; e == 0 && i < n; i++)
        if ((e = pthread_create(&db->jobs[i], NULL, job_thread, db)) == 0)
            db->njobs++;
    if (e == 0)
        return KV_OK;
    /* EAGAIN: out of threads or memory. Those started stop again. */
    kv_error_errno(e, "%s: cannot start a background thread", db->path);
    pthread_mutex_lock(&db->mu);
    db->closing = 1;
    atomic_store(&db->stopping, 1);
    pthread_cond_broadcast(&db->work_cv);
    pthread_cond_broadcast(&db->job_cv);
    pthread_mutex_unlock(&db->mu);
    kv_db_background_join(db);
    return KV_ENOMEM;
}

void kv_db_background_join(kv_db *db)
{
    if (db->bg_running)
        pthread_join(db->bg, NULL);
    db->bg_running = 0;
    for (int i = 0; i < db->njobs; i++)
        pthread_join(db->jobs[i], NULL);
    db->njobs = 0;
}
