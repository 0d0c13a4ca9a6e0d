/* readonly.c - read-only handles (kv_options.read_only) and kv_catch_up.
 *
 * A read-only handle shares the directory with the database's one writer
 * (another process, or a kv_db of this one) and writes nothing into it: it
 * takes no LOCK, starts no background thread, flushes nothing, deletes
 * nothing and never begins an LMDB write transaction. What it reads:
 *
 *  - the manifest state in an LMDB read transaction that it keeps open (a
 *    pin, manifest.h) for as long as a version built from that state is
 *    referenced (kv_version.pin). LMDB's reader table, in the lock file
 *    every process shares, is how the writer learns which states readers
 *    still use: it defers unlinking each table, blob file and log a commit
 *    removed until no reader slot holds a state older than that commit
 *    (kv_manifest_unlink). So a read never finds a file gone, however the
 *    writer compacts, in this process or another;
 *  - the writer's live logs (numbered >= the state's log_number) replayed
 *    into its own memtable, up to the first record that is torn or damaged
 *    (the writer may be appending it right now: its complete records reach
 *    the file in order, so what is read is a prefix of what was written).
 *
 * kv_catch_up loads the newest state under a new pin and publishes a new
 * view. Tables and blob files it already has open are reused (numbers are
 * never reused: same number, same file). When the writer has not flushed
 * since (same log_number), the memtable is kept and only what the logs
 * gained since the last replay is read (kv_wal_replay_from), appended to
 * it the way the writer's commit leader appends: entries with sequences
 * above every live reader's, published by the release store of last_seq.
 * Else a fresh memtable takes the live logs from their start. Iterators
 * hold their view; snapshots hold theirs too (kv_snapshot.view), since the
 * writer's compactions never knew of a reader's sequences. Old pins go with
 * the last reference to their versions.
 *
 * Design and costs: doc/operations.md, "Read-only handles". */
#define _DEFAULT_SOURCE /* dirent */
#include "db.h"
#include "tablemem.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "dbfiles.h"
#include "order.h"
#include "util/error.h"

/* ---- the manifest's checks, without writing -------------------------------------- */

/* The comparator, merge operator and secret records against the options,
 * as kv_open checks them, but nothing is stored: a record the writer has
 * not written yet is taken as the writer would write it. */
static int check_records(kv_db *db, size_t ntables)
{
    const char *want = db->cmp ? db->cmp->name : KV_BYTEWISE_NAME;
    char have[KV_MANIFEST_NAME_MAX + 1];
    int rc = kv_manifest_get_comparator(db->man, have);
    if (rc == KV_NOTFOUND)
        snprintf(have, sizeof have, "%s", ntables ? KV_BYTEWISE_NAME : want);
    else if (rc != KV_OK)
        return rc;
    if (strcmp(have, want) != 0)
        return kv_error_set(KV_EINVAL,
                            "%s: the database orders keys by comparator \"%s\"; the options give "
                            "\"%s\"",
                            db->path, have, want);
    kv_manifest_features f;
    rc = kv_manifest_get_features(db->man, &f);
    if (rc != KV_OK && rc != KV_NOTFOUND)
        return rc;
    const kv_merge_operator *mo = db->o.merge_operator;
    const char *name = mo && mo->name && mo->name[0] ? mo->name : NULL;
    if (name && f.merge_name[0] && strcmp(f.merge_name, name) != 0)
        return kv_error_set(KV_EINVAL,
                            "%s: the database's merge operator is \"%s\"; the options give "
                            "\"%s\"",
                            db->path, f.merge_name, name);
    uint8_t secret[KV_MANIFEST_SECRET];
    int keyed = 0;
    if ((rc = kv_manifest_secret_get(db->man, secret, &keyed)) != KV_OK)
        return rc;
    if (keyed) {
        kv_sipkey_init(&db->sip, secret);
        db->secret_check = kv_bloom_secret_check(secret);
        db->have_secret = 1;
    }
    /* Keyed memtable filters need the secret, which only the writer makes. */
    db->keyed = db->o.filter_keyed_hash && keyed;
    memset(secret, 0, sizeof secret);
    return KV_OK;
}

/* ---- the version of a pinned state ---------------------------------------------- */

/* The version of metas and brecs (taking both; freed whatever happens),
 * with `pin`'s reference: tables and blob files of db->current (NULL: none)
 * with the same numbers are shared, the rest opened. */
static int build_version(kv_db *db, kv_manifest_pin *pin, kv_table_meta *metas, size_t nmetas,
                         kv_manifest_blob *brecs, size_t nbrecs, struct kv_version **out)
{
    *out = NULL;
    const struct kv_version *cur = db->current;
    struct kv_blob **blobs = nbrecs ? calloc(nbrecs, sizeof *blobs) : NULL;
    struct kv_table **tabs = nmetas ? calloc(nmetas, sizeof *tabs) : NULL;
    size_t nb = 0, nt = 0;
    int rc = (nbrecs && !blobs) || (nmetas && !tabs) ? KV_ENOMEM : KV_OK;
    for (size_t i = 0; rc == KV_OK && i < nbrecs; i++) {
        struct kv_blob *b = cur ? kv_blob_find(cur->blobs, cur->nblobs, brecs[i].number) : NULL;
        if (b) {
            kv_blob_file_ref(b);
            blobs[nb++] = b;
        } else if ((rc = kv_blob_open(db, &brecs[i], &blobs[nb])) == KV_OK) {
            nb++;
        }
    }
    for (size_t i = 0; i < nmetas; i++) {
        struct kv_table *t = NULL;
        for (size_t j = 0; rc == KV_OK && cur && j < cur->n && !t; j++)
            if (cur->tables[j]->meta.number == metas[i].number &&
                cur->tables[j]->meta.level == metas[i].level)
                t = cur->tables[j];
        if (rc != KV_OK || t) {
            free(metas[i].smallest);
            free(metas[i].largest);
            if (t) {
                kv_table_ref(t);
                tabs[nt++] = t;
            }
        } else if ((rc = kv_db_table_open(db, &metas[i], &tabs[nt])) == KV_OK) {
            nt++; /* it took the keys */
        }
        metas[i].smallest = metas[i].largest = NULL;
    }
    free(metas);
    free(brecs);
    struct kv_blob_edit be = {blobs, nb, NULL, 0};
    struct kv_version *v = NULL;
    if (rc == KV_OK && !(v = kv_version_edit_blobs(NULL, NULL, 0, tabs, nt, db->cmp, &be)))
        rc = KV_ENOMEM;
    for (size_t i = 0; i < nt; i++)
        kv_table_unref(tabs[i]); /* the version holds them now */
    for (size_t i = 0; i < nb; i++)
        kv_blob_file_unref(blobs[i]);
    free(tabs);
    free(blobs);
    if (rc != KV_OK)
        return rc;
    kv_manifest_pin_ref(pin);
    v->pin = pin;
    *out = v;
    return KV_OK;
}

/* ---- the writer's logs ------------------------------------------------------------- */

struct ro_replay {
    kv_db *db;
    kv_mem *mem;
    int filtered;
    uint64_t floor;    /* entries at or below it are in the tables */
    uint64_t max_seq;  /* newest sequence taken */
    uint64_t next_seq; /* the sequence the next record must start at; 0 before the first */
    int stop;          /* a record out of sequence or not decoding: the rest is not read */
    struct kv_rt_list rts;
};

static int ro_entry(void *ctx, uint64_t seq, int kind, const uint8_t *key, size_t klen,
                    const uint8_t *val, size_t vlen)
{
    struct ro_replay *r = ctx;
    if (seq > r->max_seq)
        r->max_seq = seq;
    if (seq <= r->floor)
        return KV_OK;
    if (kind == KV_KIND_RANGE_DEL)
        return kv_rt_list_add(&r->rts, seq, key, klen, val, vlen);
    /* The hash a Get computes, set before the entry is linked (write.c,
     * apply_entry: the same argument makes the filter safe here). */
    uint64_t h = r->filtered ? kv_db_hash(r->db, key, klen) : 0;
    return kv_mem_add(r->mem, h, seq, kind, key, klen, val, vlen);
}

/* One log record: taken when its sequences continue the log (recover.c,
 * bad_sequence, says why), else the replay stops there, as at a torn tail.
 * An entry of it is never taken twice: a record is taken whole or, on
 * error, the memtable is marked stale. */
static int ro_record(void *ctx, const void *rec, size_t len)
{
    struct ro_replay *r = ctx;
    if (len >= KV_BATCH_HEADER) {
        uint64_t seq = kv_get64(rec);
        uint32_t count = kv_get32((const uint8_t *)rec + 8);
        if (count) {
            if (seq == 0 || seq > KV_MAX_SEQ || count - 1 > KV_MAX_SEQ - seq ||
                (r->next_seq ? seq != r->next_seq : seq > r->floor + 1)) {
                r->stop = 1;
                return 1;
            }
        }
    }
    int rc = kv_batch_iterate(rec, len, ro_entry, r);
    if (rc == KV_ECORRUPT) {
        r->stop = 1;
        return 1;
    }
    if (rc == KV_OK && len >= KV_BATCH_HEADER && kv_get32((const uint8_t *)rec + 8))
        r->next_seq = kv_get64(rec) + kv_get32((const uint8_t *)rec + 8);
    return rc;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The live logs of state st in the directory, sorted: *out (malloc'd). */
static int list_logs(kv_db *db, const kv_manifest_state *st, uint64_t **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    size_t cap = 0;
    DIR *d = opendir(db->path);
    if (!d)
        return kv_error_errno(errno, "%s: opendir", db->path);
    struct dirent *de;
    int rc = KV_OK;
    while ((de = readdir(d)) != NULL) {
        uint64_t num;
        if (kv_dbfile_classify(de->d_name, st, NULL, 0, NULL, 0, &num) != KV_FILE_LOG)
            continue;
        if (*n == cap) {
            size_t nc = cap ? 2 * cap : 8;
            uint64_t *l = realloc(*out, nc * sizeof *l);
            if (!l) {
                rc = KV_ENOMEM;
                break;
            }
            *out = l;
            cap = nc;
        }
        (*out)[(*n)++] = num;
    }
    closedir(d);
    if (rc != KV_OK) {
        free(*out);
        *out = NULL;
        *n = 0;
        return kv_error_set(rc, "%s: out of memory listing the logs", db->path);
    }
    if (*n > 1)
        qsort(*out, *n, sizeof **out, cmp_u64);
    return KV_OK;
}

/* Replays the live logs into r->mem: each from where `had` (the logs an
 * earlier replay into the same memtable took, NULL: none) says it ended,
 * or from its start. The logs and bytes taken go to *taken (malloc'd,
 * *ntaken). A log that vanished (the writer flushed it and no pin of
 * ours kept it, which only a state newer than ours allows) ends the
 * replay; so does a torn tail, damage or a record out of sequence. */
static int replay(kv_db *db, const kv_manifest_state *st, struct ro_replay *r,
                  const struct kv_ro_log *had, size_t nhad, struct kv_ro_log **taken,
                  size_t *ntaken)
{
    *taken = NULL;
    *ntaken = 0;
    uint64_t *logs;
    size_t nlogs;
    int rc = list_logs(db, st, &logs, &nlogs);
    if (rc != KV_OK)
        return rc;
    struct kv_ro_log *t = nlogs ? calloc(nlogs, sizeof *t) : NULL;
    if (nlogs && !t) {
        free(logs);
        return kv_error_set(KV_ENOMEM, "%s: out of memory", db->path);
    }
    size_t n = 0;
    for (size_t i = 0; rc == KV_OK && i < nlogs && !r->stop; i++) {
        uint64_t from = 0;
        for (size_t j = 0; j < nhad; j++)
            if (had[j].number == logs[i])
                from = had[j].bytes;
        char *p = kv_dbfile_path(db->path, logs[i], "log");
        if (!p) {
            rc = kv_error_set(KV_ENOMEM, "%s: out of memory", db->path);
            break;
        }
        kv_wal_report rep;
        rc = kv_wal_replay_from(p, logs[i], from, ro_record, r, &rep);
        free(p);
        if (rc == 1)
            rc = KV_OK; /* stopped at a record out of sequence */
        if (rc == KV_NOTFOUND) {
            rc = KV_OK; /* gone since the listing: a newer state holds its writes */
            break;
        }
        if (rc != KV_OK)
            break;
        t[n].number = logs[i];
        t[n].bytes = rep.bytes_read;
        n++;
        /* A torn or damaged tail: the writer is appending it (or it is
         * damage the writer's next open reports). Nothing after it. */
        if (rep.tail_damaged)
            r->stop = 1;
    }
    free(logs);
    if (rc != KV_OK) {
        free(t);
        return rc;
    }
    *taken = t;
    *ntaken = n;
    return KV_OK;
}

/* ---- loading and publishing a state ------------------------------------------------ */

/* The newest manifest state, pinned, and its version (*v holds the pin).
 * first: kv_open's load, which also takes the seed and checks the
 * records against the options. */
static int load_state(kv_db *db, int first, kv_manifest_state *st, struct kv_version **v)
{
    kv_manifest_pin *pin;
    kv_table_meta *metas;
    kv_manifest_blob *brecs;
    size_t nmetas, nbrecs;
    int rc = kv_manifest_pin_load(db->man, &pin, st, &metas, &nmetas, &brecs, &nbrecs);
    if (rc != KV_OK)
        return rc;
    if (st->format_version < KV_FORMAT_VERSION || st->format_version > KV_FORMAT_VERSION_FEATURES)
        rc = kv_error_set(KV_ECORRUPT, "%s/%s: format version %u, this library reads %u to %u",
                          db->path, KV_MANIFEST_FILE, (unsigned)st->format_version,
                          (unsigned)KV_FORMAT_VERSION, (unsigned)KV_FORMAT_VERSION_FEATURES);
    if (rc == KV_OK && first) {
        db->seed = st->seed;
        rc = check_records(db, nmetas);
    }
    if (rc != KV_OK) {
        kv_manifest_free_tables(metas, nmetas);
        free(brecs);
    } else {
        rc = build_version(db, pin, metas, nmetas, brecs, nbrecs, v);
    }
    kv_manifest_pin_unref(pin); /* *v holds it */
    return rc;
}

/* Under mu: v and mem (with rt, when not NULL, as its tombstone set) become
 * the published view at last_seq. The sequence is stored first, so that the
 * view's seq_floor (view.c) holds it; a read that loads it with the old
 * view reads that view, whose entries are all at or below it. On KV_ENOMEM
 * the old view stays, and so does everything it refers to. *old_v, *old_mem
 * and *old_rt: what the caller drops (after mu). */
static int publish(kv_db *db, struct kv_version *v, struct kv_memref *mem, kv_rtset *rt,
                   uint64_t last_seq, struct kv_version **old_v, struct kv_memref **old_mem,
                   kv_rtset **old_rt)
{
    struct kv_memref *mem0 = db->mem;
    *old_v = db->current;
    *old_mem = mem0 != mem ? mem0 : NULL;
    *old_rt = rt ? mem->rt : NULL;
    uint64_t seq0 = atomic_load(&db->last_seq);
    db->current = v;
    db->mem = mem;
    if (rt)
        mem->rt = rt;
    if (last_seq > mem->max_seq)
        mem->max_seq = last_seq;
    atomic_store_explicit(&db->last_seq, last_seq, memory_order_release);
    if (kv_view_publish(db, NULL) == KV_OK)
        return KV_OK;
    db->current = *old_v;
    db->mem = mem0;
    if (rt)
        mem->rt = *old_rt;
    atomic_store_explicit(&db->last_seq, seq0, memory_order_release);
    *old_v = NULL;
    *old_mem = NULL;
    *old_rt = NULL;
    return kv_error_set(KV_ENOMEM, "%s: out of memory", db->path);
}

/* The logs now in the memtable: with keep, ro->logs updated by taken (the
 * logs read this time, and how far); else taken replaces them. Takes taken. */
static void note_logs(struct kv_ro *ro, int keep, struct kv_ro_log *taken, size_t ntaken)
{
    if (!keep) {
        free(ro->logs);
        ro->logs = taken;
        ro->nlogs = ro->logcap = ntaken;
        return;
    }
    for (size_t i = 0; i < ntaken; i++) {
        size_t j = 0;
        while (j < ro->nlogs && ro->logs[j].number != taken[i].number)
            j++;
        if (j < ro->nlogs) {
            ro->logs[j].bytes = taken[i].bytes;
            continue;
        }
        if (ro->nlogs == ro->logcap) {
            size_t nc = ro->logcap ? 2 * ro->logcap : 8;
            struct kv_ro_log *l = realloc(ro->logs, nc * sizeof *l);
            if (!l) {
                ro->stale = 1; /* it cannot say what it took: start afresh next time */
                continue;
            }
            ro->logs = l;
            ro->logcap = nc;
        }
        ro->logs[ro->nlogs++] = taken[i];
    }
    free(taken);
}

/* Loads the newest manifest state under a new pin and publishes the view
 * of it (kv_db_ro_open: first is 1, db->current NULL). Under ro->mu. On
 * error the handle keeps its view. */
static int load_and_publish(kv_db *db, int first)
{
    struct kv_ro *ro = db->ro;
    kv_manifest_state st;
    struct kv_version *v;
    int rc = load_state(db, first, &st, &v);
    if (rc != KV_OK)
        return rc;
    /* The memtable: kept, when the writer has not flushed since (its
     * entries are still exactly those past the tables), else a fresh one. */
    int keep = !first && !ro->stale && st.log_number == ro->state.log_number &&
               st.last_seq == ro->state.last_seq;
    struct kv_memref *mem = keep ? db->mem : kv_memref_new(db);
    if (!mem) {
        kv_version_unref(v);
        return kv_error_set(KV_ENOMEM, "%s: out of memory", db->path);
    }
    struct ro_replay r = {.db = db,
                          .mem = mem->mem,
                          .filtered = kv_mem_has_filter(mem->mem),
                          .floor = st.last_seq,
                          .max_seq = keep ? atomic_load(&db->last_seq) : st.last_seq,
                          .next_seq = keep ? ro->next_seq : 0,
                          .rts = {.copy = 1}};
    struct kv_ro_log *taken = NULL;
    size_t ntaken = 0;
    rc = replay(db, &st, &r, keep ? ro->logs : NULL, keep ? ro->nlogs : 0, &taken, &ntaken);
    kv_rtset *rt = NULL;
    if (rc == KV_OK && r.rts.n)
        rc = kv_rtset_union(db->cmp, mem->rt ? (const kv_rtset *const *)&mem->rt : NULL,
                            mem->rt ? 1 : 0, r.rts.v, r.rts.n, NULL, NULL, &rt);
    kv_rt_list_free(&r.rts);
    struct kv_version *old_v = NULL;
    struct kv_memref *old_mem = NULL;
    kv_rtset *old_rt = NULL;
    if (rc == KV_OK) {
        pthread_mutex_lock(&db->mu);
        rc = publish(db, v, mem, rt, r.max_seq, &old_v, &old_mem, &old_rt);
        if (rc == KV_OK)
            db->state = st;
        pthread_mutex_unlock(&db->mu);
    }
    if (rc != KV_OK) {
        if (keep)
            ro->stale = 1; /* part of a record may be in: the next one starts afresh */
        else
            kv_memref_unref(mem);
        kv_rtset_unref(rt);
        kv_version_unref(v);
        free(taken);
        return rc;
    }
    kv_rtset_unref(old_rt); /* views that hold it have their own references */
    kv_version_unref(old_v);
    kv_memref_unref(old_mem);
    kv_tablemem_update(db); /* the tables changed: what stays in memory */
    ro->pin = v->pin;
    ro->state = st;
    ro->next_seq = r.next_seq;
    ro->stale = 0;
    note_logs(ro, keep, taken, ntaken);
    kv_view_reclaim(db, 0);
    return KV_OK;
}

int kv_db_ro_open(kv_db *db)
{
    struct kv_ro *ro = calloc(1, sizeof *ro);
    if (!ro)
        return kv_error_set(KV_ENOMEM, "%s: out of memory", db->path);
    if (pthread_mutex_init(&ro->mu, NULL) != 0) {
        free(ro);
        return kv_error_set(KV_ENOMEM, "%s: out of memory", db->path);
    }
    db->ro = ro;
    int rc = kv_manifest_open_ro(db->path, &db->man);
    if (rc == KV_NOTFOUND)
        return kv_error_set(KV_NOTFOUND, "%s: no database there (no %s)", db->path,
                            KV_MANIFEST_FILE);
    if (rc != KV_OK)
        return rc;
    pthread_mutex_lock(&ro->mu);
    rc = load_and_publish(db, 1);
    pthread_mutex_unlock(&ro->mu);
    return rc;
}

void kv_db_ro_free(kv_db *db)
{
    struct kv_ro *ro = db->ro;
    if (!ro)
        return;
    free(ro->logs);
    pthread_mutex_destroy(&ro->mu);
    free(ro);
    db->ro = NULL;
}

int kv_catch_up(kv_db *db)
{
    if (!db)
        return kv_db_einval(db, "kv_catch_up", "db is NULL");
    if (!db->ro)
        return kv_db_einval(db, "kv_catch_up", "not a read-only handle (kv_options.read_only)");
    unsigned long long mark = kv_error_mark();
    pthread_mutex_lock(&db->ro->mu);
    int rc = load_and_publish(db, 0);
    pthread_mutex_unlock(&db->ro->mu);
    if (rc == KV_OK)
        KV_COUNT(db, catch_ups, 1);
    return kv_db_fail(db, "kv_catch_up", mark, rc);
}

/* ---- the cut a checkpoint copies (checkpoint.c) ------------------------------------- */

int kv_db_ro_cut(kv_db *db, struct kv_ro_cut *out)
{
    memset(out, 0, sizeof *out);
    if (!db->ro)
        return kv_db_einval(db, "kv_checkpoint", "not a read-only handle");
    struct kv_ro *ro = db->ro;
    pthread_mutex_lock(&ro->mu);
    int rc = KV_OK;
    if (ro->nlogs && !(out->logs = malloc(ro->nlogs * sizeof *out->logs)))
        rc = kv_error_set(KV_ENOMEM, "%s: out of memory", db->path);
    if (rc == KV_OK) {
        if (ro->nlogs)
            memcpy(out->logs, ro->logs, ro->nlogs * sizeof *out->logs);
        out->nlogs = ro->nlogs;
        out->state = ro->state;
        pthread_mutex_lock(&db->mu);
        out->v = db->current;
        kv_version_ref(out->v);
        out->last_seq = atomic_load(&db->last_seq);
        pthread_mutex_unlock(&db->mu);
        out->pin = out->v->pin;
        kv_manifest_pin_ref(out->pin);
    }
    pthread_mutex_unlock(&ro->mu);
    return rc;
}

void kv_db_ro_cut_free(struct kv_ro_cut *c)
{
    kv_version_unref(c->v);
    kv_manifest_pin_unref(c->pin);
    free(c->logs);
    memset(c, 0, sizeof *c);
}
