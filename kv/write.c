/* write.c - the write path: kv_put, kv_delete and kv_write join one queue
 * whose leader commits their batches as one group (one log record, one
 * sync); the write controller that delays writes before the hard stops;
 * kv_flush.
 *
 * A writer joins the queue; the one at its head (the leader) makes room in
 * the memtable, merges the batches of the writers behind it into one log
 * record, appends it (and syncs once if any of them asked), applies it to
 * the memtable, publishes the new last sequence and wakes them
 * (doc/database.md, "Writes" and "Write flow control"). */
#define _DEFAULT_SOURCE /* clock_gettime, nanosleep */
#include "db.h"

#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "batch.h"
#include "dbfiles.h"
#include "order.h"
#include "util/error.h"

/* A commit group stops growing at this many bytes (when the leader's own
 * batch is small, at its size plus 128 KiB, so a small write is not held up
 * behind a large group). */
#define GROUP_MAX ((size_t)1 << 20)

uint64_t kv_db_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t now_micros(void)
{
    return kv_db_now_ns() / 1000u;
}

#define COUNT KV_COUNT

/* ---- the write controller -------------------------------------------------------- */

/* A write is held once the bytes let through are ahead of the rate by this
 * much, so every write of a paced stretch pays its own share: writes of
 * 4 KiB paced at the flush's rate (the device's) are about 8 us apart. */
#define CTL_QUANTUM_NS 2000u

/* Waits up to this long are spun, longer ones slept. A sleep on a VM
 * wakes 40 us or more late whatever it asks for, so paced writes that
 * slept in turns of 30 us had a p99.9 of about 130 us at 4 KiB, each wait
 * falling on a few writes in a hundred; spun, the same time is spread
 * over every write of the stretch, a few microseconds each. The spin
 * yields the processor at each turn: when the flush or a compaction
 * waits for one, it runs (doc/database.md, "Write flow control"). */
#define CTL_SPIN_NS 50000u

/* Waits `ns` nanoseconds as closely as the system allows: a short wait
 * spins on the clock, yielding the processor to any thread that waits
 * for it; a longer one sleeps, with the thread's timer slack (by which
 * Linux rounds its sleeps up, 50 us unless set) taken away for the sleep
 * and given back after (the thread is the caller's). */
static void ctl_wait(uint64_t ns)
{
    if (ns <= CTL_SPIN_NS) {
        uint64_t until = kv_db_now_ns() + ns;
        while (kv_db_now_ns() < until)
            sched_yield();
        return;
    }
    struct timespec d = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
#ifdef __linux__
    int slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    if (slack > 1)
        (void)prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0);
    nanosleep(&d, NULL);
    if (slack > 1)
        (void)prctl(PR_SET_TIMERSLACK, (unsigned long)slack, 0, 0, 0);
#else
    nanosleep(&d, NULL);
#endif
}

/* How full a memtable is, 1 being full: its bytes against
 * write_buffer_size, a value bound for a blob file counting 1/64 of its
 * bytes (about its reference), or all its bytes against KV_LARGE_BUFFERS
 * times write_buffer_size, whichever is fuller. Values that leave the
 * tables at the flush cost a compaction nothing, and a flush of a few
 * hundred of them would cost the syncs of a flush of tens of thousands:
 * at 16 KiB a 4 MiB memtable held 256 values, and the fill went at the
 * pace of its flushes' syncs (doc/database.md, "Blob files"). */
#define KV_LARGE_BUFFERS 16
static double mem_fill(const kv_db *db, const struct kv_memref *m)
{
    /* Range tombstones count with the entries: a memtable of range deletes
     * alone fills too. m->rt is read by the commit leader, its only writer,
     * or under mu. */
    size_t used = kv_mem_used(m->mem) + kv_rtset_bytes(m->rt);
    size_t large = m->large < used ? (size_t)m->large : used;
    double wbs = (double)db->o.write_buffer_size;
    double counted = (double)(used - large + large / 64) / wbs;
    double whole = (double)used / (KV_LARGE_BUFFERS * wbs);
    return counted > whole ? counted : whole;
}

/* How far behind the background work is, under mu: 0 when no delay is
 * due, else 1 with *debt (level-0 tables from l0_slowdown_trigger on, 16
 * each) and *near (how close the nearer hard stop is: 0 at the start of
 * the delays, toward 1 at it; for the memtable, from three quarters
 * full); *mem_only is 1 when the only debt is the flush still running
 * under a memtable being written. */
static int write_pressure(const kv_db *db, uint64_t *debt, double *near, int *mem_only)
{
    size_t l0 = db->current->start[1];
    size_t slow = (size_t)db->o.l0_slowdown_trigger, stop = (size_t)db->o.l0_stop_trigger;
    int due = 0;
    *debt = 0;
    *near = 0;
    *mem_only = 1;
    if (l0 >= slow) {
        *mem_only = 0;
        due = 1;
        *debt = 16 * (l0 - slow + 1);
        *near = (double)(l0 - slow) / (double)(stop - slow + 1);
    }
    if (db->imm) {
        double f = mem_fill(db, db->mem);
        due = 1;
        if (f >= 0.75) {
            double m = f >= 1 ? 0.95 : (f - 0.75) * 4;
            if (m > *near)
                *near = m;
        }
    }
    return due;
}

/* The write controller (kv.h, delayed_write_rate): how long the leader of
 * a group of `bytes` must wait before writing it, in nanoseconds (0: not
 * at all; at most KV_WRITE_DELAY_MAX_MICROS). A virtual clock, paid_ns,
 * moves on by bytes / rate for each group; a group waits only while it
 * runs more than CTL_QUANTUM_NS ahead of the real clock, and a wait cut
 * short at the maximum leaves the rest to the groups after it. Under
 * level-0 debt the rate falls by a fifth whenever the debt has grown
 * since the last group and rises by a quarter whenever it has shrunk;
 * under a running flush alone it is the flush's pace. It is scaled by
 * (1 - near)^2 as a hard stop nears. Under mu, on the leader's thread. */
static uint64_t write_ctl_delay(kv_db *db, size_t bytes)
{
    struct kv_write_ctl *c = &db->ctl;
    uint64_t debt;
    double near;
    int mem_only;
    if (!write_pressure(db, &debt, &near, &mem_only)) {
        c->rate = 0;
        return 0;
    }
    uint64_t now = kv_db_now_ns();
    if (c->rate == 0) { /* a delay begins */
        c->adapt = 1;
        c->paid_ns = now;
    } else if (mem_only) {
        /* The flush's pace, below: nothing to adapt. */
    } else if (debt > c->debt) {
        c->adapt *= 0.8;
        if (c->adapt < 1.0 / 4096)
            c->adapt = 1.0 / 4096;
    } else if (debt < c->debt) {
        c->adapt *= 1.25;
        if (c->adapt > 1)
            c->adapt = 1;
    }
    c->debt = debt;
    /* Writes that outpace the flush alone are let through at the rate
     * flushes achieve (when that is higher): large values fill memtables
     * at hundreds of MB/s, and the flush keeps up at about that rate; the
     * fixed rate would hold each 16 KiB write for a millisecond. */
    double base = (double)db->o.delayed_write_rate * c->adapt;
    if (mem_only) {
        /* Before any flush has been timed, the running one's bytes over
         * its time so far: what it would achieve if it ended now, so a
         * bound that falls the longer it runs. */
        double flush_rate = c->flush_rate;
        if (flush_rate <= 0 && now > c->imm_since_ns)
            flush_rate = (double)kv_mem_used(db->imm->mem) * 1e9 / (double)(now - c->imm_since_ns);
        if (flush_rate > base)
            base = flush_rate;
    }
    c->rate = base * (1 - near) * (1 - near);
    if (c->rate < 1024)
        c->rate = 1024;
    if (c->paid_ns < now) /* a writer slower than the rate banks no credit */
        c->paid_ns = now;
    c->paid_ns += (uint64_t)((double)bytes * 1e9 / c->rate);
    if (c->paid_ns < now + CTL_QUANTUM_NS)
        return 0;
    uint64_t ns = c->paid_ns - now;
    if (ns > KV_WRITE_DELAY_MAX_MICROS * 1000u)
        ns = KV_WRITE_DELAY_MAX_MICROS * 1000u;
    if (ns / 1000 > c->max_delay)
        c->max_delay = ns / 1000;
    return ns;
}

/* Makes room for a write (called by the queue's leader, under mu). When
 * the memtable is full (or `force` and it holds anything), it waits for the
 * flush of the previous one if that is still running, then makes it
 * immutable, starts a new log and wakes the background thread; at
 * l0_stop_trigger level-0 tables it waits until compaction brings level 0
 * down. These waits are the hard stops (stalls), counted with their time;
 * the write controller (write_ctl_delay) delays writes before them. None
 * can deadlock: the background thread needs no lock a waiting writer
 * holds, and a background error ends every wait. */
static int make_room(kv_db *db, int force)
{
    int stalled = 0;
    uint64_t t0 = 0;
    int rc = KV_OK;
    for (;;) {
        if ((rc = kv_db_sticky_error(db)) != KV_OK)
            break;
        size_t l0 = db->current->start[1];
        /* A memtable of range tombstones alone is flushed too (its table
         * holds them alone). */
        int full = (kv_mem_count(db->mem->mem) > 0 || db->mem->rt) &&
                   (force || mem_fill(db, db->mem) >= 1);
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
        /* The old log's tail and the new log's directory entry are synced
         * by the background thread (db.h, old_wal), not here: two fsyncs
         * on the writer's path were its longest waits. imm is NULL, so the
         * log before this one is already synced and closed. */
        uint64_t number = 0;
        if ((rc = kv_db_new_file_number(db, &number)) != KV_OK)
            break;
        char *path = kv_dbfile_path(db->path, number, "log");
        struct kv_memref *fresh = kv_memref_new(db);
        /* The view naming the new memtable is allocated first: once the
         * switch is made, readers must see it (view.h). */
        struct kv_view *view = kv_view_alloc();
        kv_wal *wal = NULL;
        rc = path && fresh && view ? kv_wal_create_unsynced(path, number, &wal) : KV_ENOMEM;
        free(path);
        if (rc != KV_OK) {
            kv_memref_unref(fresh);
            free(view);
            break;
        }
        db->old_wal = db->wal;
        db->wal = wal;
        db->wal_number = number;
        db->mem->next_log = number;
        db->imm = db->mem;
        db->ctl.imm_since_ns = kv_db_now_ns();
        db->mem = fresh;
        kv_view_publish(db, view); /* cannot fail: view is allocated */
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
    int filtered; /* mem has a filter: hash each key */
    uint64_t puts, deletes, merges, max_seq, user_bytes;
    uint64_t large; /* bytes of values bound for blob files (min_blob_size) */
    /* The group's range deletes, pointing into db->group: they go into
     * the memtable's tombstone set together, after the entries. */
    struct kv_rt_list rts;
};

/* Adds one entry of the group to the memtable. Its filter gets the hash a
 * Get computes for the key (kv_hash_key with the database's seed, once per
 * key), and gets it before the entry is linked (memtable.h). That is what
 * lets a Get trust the filter's "absent": a reader loads its snapshot, the
 * last sequence, with acquire order, and the leader stores the group's last
 * sequence with release order only after every entry of the group is in,
 * bits included; so every entry a reader may see has its bits set, and an entry
 * added while the reader asks has a sequence above its snapshot, invisible
 * to it whatever the filter says. */
static int apply_entry(void *ctx, uint64_t seq, int kind, const uint8_t *key, size_t klen,
                       const uint8_t *val, size_t vlen)
{
    struct apply_ctx *a = ctx;
    a->max_seq = seq;
    a->user_bytes += klen + vlen;
    if (kind == KV_KIND_RANGE_DEL)
        return kv_rt_list_add(&a->rts, seq, key, klen, val, vlen);
    if (kind == KV_KIND_VALUE || kind == KV_KIND_TVALUE)
        a->puts++;
    else if (kind == KV_KIND_MERGE || kind == KV_KIND_TMERGE)
        a->merges++;
    else
        a->deletes++;
    if (kind == KV_KIND_VALUE && a->db->o.min_blob_size != KV_BLOB_NEVER &&
        vlen >= a->db->o.min_blob_size)
        a->large += vlen;
    uint64_t h = a->filtered ? kv_db_hash(a->db, key, klen) : 0;
    return kv_mem_add(a->mem, h, seq, kind, key, klen, val, vlen);
}

/* Merges the batches of the writers from `first` into db->group; returns
 * the last writer taken. Under mu. */
static struct kv_writer *build_group(kv_db *db, struct kv_writer *first, uint64_t seq, size_t *len,
                                     uint32_t *count, unsigned *kinds, int *sync, int *rc)
{
    /* With ttl_seconds, every value and operand is stored timed: the
     * group grows by up to KV_BATCH_STAMP_GROWTH bytes an entry. */
    const int timed = db->o.ttl_seconds > 0;
    const struct kv_batch *b = first->batch;
    size_t limit = b->len <= (128u << 10) ? b->len + (128u << 10) : GROUP_MAX;
    if (limit < b->len)
        limit = b->len;
    size_t total = b->len + (timed ? (size_t)b->count * KV_BATCH_STAMP_GROWTH : 0);
    struct kv_writer *last = first;
    for (struct kv_writer *w = first->next; w && w->batch; w = w->next) {
        if (w->sync && !first->sync)
            break; /* a sync write does not ride in a group that will not sync */
        size_t add = w->batch->len - KV_BATCH_HEADER +
                     (timed ? (size_t)w->batch->count * KV_BATCH_STAMP_GROWTH : 0);
        if (total + add > limit)
            break;
        total += add;
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
    unsigned k = 0;
    uint64_t now = timed ? (uint64_t)time(NULL) : 0;
    for (struct kv_writer *w = first;; w = w->next) {
        size_t blen = w->batch->len - KV_BATCH_HEADER;
        if (timed) {
            off += kv_batch_stamp(db->group + off, w->batch->rep + KV_BATCH_HEADER, blen,
                                  w->batch->count, now);
        } else {
            memcpy(db->group + off, w->batch->rep + KV_BATCH_HEADER, blen);
            off += blen;
        }
        n += w->batch->count;
        k |= w->batch->kinds;
        if (w == last)
            break;
    }
    kv_batch_set_seq(db->group, seq);
    kv_put32(db->group + 8, n);
    *len = off;
    *count = n;
    *kinds = k;
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

/* Hands the queue on: writers first..last are done with rc (an error's
 * text, this thread's, goes with it). Under mu, on first's thread. */
static void dequeue(kv_db *db, struct kv_writer *first, struct kv_writer *last, int rc)
{
    for (struct kv_writer *w = first;;) {
        struct kv_writer *next = w->next;
        w->rc = rc;
        w->done = 1;
        if (w != first && rc != KV_OK)
            snprintf(w->text, sizeof w->text, "%s", kv_error_text());
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

/* A writer in line for kv_write or kv_flush; its text is written only
 * with an error. */
static int writer_init(struct kv_writer *w, const struct kv_batch *batch, int sync)
{
    w->batch = batch;
    w->sync = sync;
    w->done = 0;
    w->rc = KV_OK;
    w->next = NULL;
    w->text[0] = '\0';
    return pthread_cond_init(&w->cv, NULL) == 0 ? KV_OK : KV_ENOMEM;
}

/* Range deletes: the memtable's tombstone set with the group's (rt, built
 * by the leader, the set's only writer) replaces its old one and is
 * published in a view before the group's sequence is, under mu. On
 * KV_ENOMEM (no view) the old set stays and rt is freed. */
static int publish_ranges(kv_db *db, struct kv_memref *mem, kv_rtset *rt)
{
    kv_rtset *old = mem->rt;
    mem->rt = rt;
    int rc = kv_view_publish(db, NULL);
    if (rc == KV_OK) {
        kv_rtset_unref(old); /* views that hold it have their own references */
    } else {
        mem->rt = old;
        kv_rtset_unref(rt);
    }
    return rc;
}

/* A committed group's figures: its entries by kind (nrt range deletes),
 * its bytes, and its writers, first to last. */
static void count_group(kv_db *db, const struct apply_ctx *a, size_t nrt,
                        const struct kv_writer *first, const struct kv_writer *last)
{
    COUNT(db, puts, a->puts);
    COUNT(db, deletes, a->deletes);
    if (a->merges || nrt) {
        COUNT(db, merges, a->merges);
        COUNT(db, range_deletes, nrt);
    }
    COUNT(db, user_bytes, a->user_bytes);
    COUNT(db, write_groups, 1);
    uint64_t writers = 1;
    for (const struct kv_writer *x = first; x != last; x = x->next)
        writers++;
    COUNT(db, writes, writers);
}

/* kv_batch_iterate's callback for check_special: a range delete whose end
 * is before its begin under the database's order. */
static int range_backwards(void *ctx, uint64_t seq, int kind, const uint8_t *key, size_t klen,
                           const uint8_t *val, size_t vlen)
{
    (void)seq;
    const kv_db *db = ctx;
    return kind == KV_KIND_RANGE_DEL && kv_sst_cmp(db->cmp, key, klen, val, vlen) > 0;
}

/* A batch with merge operands or range deletes: KV_EINVAL (with the text
 * set) when the database has no merge operator for the one or a range
 * runs backwards under its comparator (a batch checks bytewise only). */
static int check_special(kv_db *db, const kv_batch *batch)
{
    if ((batch->kinds & 1u << KV_KIND_MERGE) && !db->o.merge_operator)
        return kv_db_einval(db, "kv_write",
                            "a merge operand, and no merge operator "
                            "(kv_options.merge_operator)");
    if ((batch->kinds & 1u << KV_KIND_RANGE_DEL) && db->cmp &&
        kv_batch_iterate(batch->rep, batch->len, range_backwards, db) != KV_OK)
        return kv_db_einval(db, "kv_write", "a range delete whose end is before its begin");
    return KV_OK;
}

int kv_write_opts(kv_db *db, const kv_write_options *wo, const kv_batch *batch)
{
    if (!db || !batch)
        return kv_db_einval(db, "kv_write", "%s is NULL", db ? "batch" : "db");
    if (kv_db_check_writable(db, "kv_write") != KV_OK)
        return KV_EINVAL;
    if (batch->count == 0)
        return KV_OK;
    if ((batch->kinds & KV_BATCH_SPECIAL) && check_special(db, batch) != KV_OK)
        return KV_EINVAL;
    unsigned long long mark = kv_error_mark();
    struct kv_writer w;
    if (writer_init(&w, batch, wo ? wo->sync != 0 : db->o.sync != 0) != KV_OK)
        return kv_db_fail(db, "kv_write", mark, KV_ENOMEM);
    pthread_mutex_lock(&db->mu);
    enqueue(db, &w);
    if (w.done) {
        /* A leader wrote this batch in its group. */
        pthread_mutex_unlock(&db->mu);
        pthread_cond_destroy(&w.cv);
        if (w.rc != KV_OK)
            kv_error_set(w.rc, "%s", w.text);
        return w.rc;
    }
    /* The leader. */
    struct kv_writer *last = &w;
    int republished = 0; /* a range delete's view: the one it replaced goes after */
    int rc = make_room(db, 0);
    if (rc == KV_OK) {
        size_t len;
        uint32_t count;
        unsigned kinds = 0;
        int sync;
        uint64_t seq = atomic_load_explicit(&db->last_seq, memory_order_relaxed) + 1;
        last = build_group(db, &w, seq, &len, &count, &kinds, &sync, &rc);
        if (rc == KV_OK && seq + count - 1 > KV_MAX_SEQ)
            rc = kv_db_einval(db, "kv_write", "sequence numbers exhausted (%llu writes)",
                              (unsigned long long)KV_MAX_SEQ);
        uint64_t delay = rc == KV_OK ? write_ctl_delay(db, len) : 0;
        if (delay) {
            /* Writers arriving meanwhile queue for the next group. */
            pthread_mutex_unlock(&db->mu);
            uint64_t s0 = now_micros();
            ctl_wait(delay);
            COUNT(db, slowdowns, 1);
            COUNT(db, slowdown_micros, now_micros() - s0);
            pthread_mutex_lock(&db->mu);
        }
        /* A sync write is durable only once the log before this one is
         * synced too, or its memtable flushed (db.h, old_wal): else a
         * crash could lose that log's tail and, with it, replay of this
         * one. That sync, like the background's flush, may have failed
         * while this leader waited or slept: it stops this write too. */
        while (rc == KV_OK && sync && db->old_wal && (rc = kv_db_sticky_error(db)) == KV_OK) {
            db->sync_waiters++;
            pthread_cond_signal(&db->work_cv);
            pthread_cond_wait(&db->done_cv, &db->mu);
            db->sync_waiters--;
        }
        if (rc == KV_OK)
            rc = kv_db_sticky_error(db);
        /* The first range delete, merge or key over 64 KiB: the manifest
         * says so before the log holds one, so an older kv refuses it. */
        if (rc == KV_OK && (kinds & KV_BATCH_FEATURES))
            rc = kv_db_note_features(db);
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
            struct apply_ctx a = {.db = db,
                                  .mem = mem->mem,
                                  .filtered = kv_mem_has_filter(mem->mem)};
            if (rc == KV_OK) {
                COUNT(db, wal_bytes, len);
                /* The memtable takes a copy of every entry; on KV_ENOMEM it
                 * holds part of the group while the log holds all of it, so
                 * the database stops taking writes (as for a log error). */
                rc = kv_batch_iterate(db->group, len, apply_entry, &a);
            }
            kv_rtset *rt = NULL;
            if (rc == KV_OK && a.rts.n)
                rc = kv_rtset_union(db->cmp, (const kv_rtset *const *)&mem->rt, 1, a.rts.v, a.rts.n,
                                    NULL, NULL, &rt);
            size_t nrt = a.rts.n;
            kv_rt_list_free(&a.rts);
            pthread_mutex_lock(&db->mu);
            if (rc == KV_OK && rt && (rc = publish_ranges(db, mem, rt)) == KV_OK)
                republished = 1;
            if (rc == KV_OK) {
                mem->max_seq = a.max_seq;
                mem->large += a.large;
                /* Publishes the group to readers (view.c: they load it
                 * with acquire order, then the view). */
                atomic_store_explicit(&db->last_seq, seq + count - 1, memory_order_release);
                count_group(db, &a, nrt, &w, last);
            } else {
                /* A failed append may leave part of a record: resume rolls over. */
                if (!db->write_error)
                    db->dead_log = db->wal_number;
                kv_db_stop(db, &db->write_error, db->write_text, "write to the log", mark, rc);
            }
        }
    }
    rc = kv_db_fail(db, "kv_write", mark, rc);
    dequeue(db, &w, last, rc);
    pthread_mutex_unlock(&db->mu);
    pthread_cond_destroy(&w.cv);
    /* Each retired view holds its memtable's old tombstone set: freed now,
     * not at the next flush, or range deletes in a row would keep a set of
     * every size up to the memtable's. */
    if (republished)
        kv_view_reclaim(db, 0);
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
    const char *call = kind == KV_KIND_VALUE       ? "kv_put"
                       : kind == KV_KIND_MERGE     ? "kv_merge"
                       : kind == KV_KIND_RANGE_DEL ? "kv_delete_range"
                                                   : "kv_delete";
    if (!db)
        return kv_db_einval(db, call, "db is NULL");
    if (kv_db_check_key(db, call, key, klen) != KV_OK)
        return KV_EINVAL;
    if (vlen && !val)
        return kv_db_einval(db, call, "NULL value with length %zu", vlen);
    if (vlen > KV_MAX_VALUE_SIZE)
        return kv_db_einval(db, call, "value of %zu bytes, over KV_MAX_VALUE_SIZE (%zu)", vlen,
                            KV_MAX_VALUE_SIZE);
    if (kind == KV_KIND_RANGE_DEL && kv_db_check_key(db, call, val, vlen) != KV_OK)
        return KV_EINVAL;
    uint8_t small[256];
    size_t need = KV_BATCH_HEADER + KV_BATCH_ENTRY_MAX(klen, vlen);
    uint8_t *rep = need <= sizeof small ? small : malloc(need);
    if (!rep)
        return kv_error_set(KV_ENOMEM, "%s: %s: out of memory", db->path, call);
    kv_batch_put_header(rep, 1);
    size_t len = KV_BATCH_HEADER +
                 kv_batch_put_entry(rep + KV_BATCH_HEADER, kind, key, klen, val, vlen);
    struct kv_batch b = {.rep = rep,
                         .len = len,
                         .cap = need,
                         .count = 1,
                         .user_bytes = klen + vlen,
                         .kinds = kv_batch_entry_kinds(kind, klen, vlen)};
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

int kv_merge(kv_db *db, const void *key, size_t klen, const void *operand, size_t olen)
{
    return write_one(db, KV_KIND_MERGE, key, klen, operand, olen);
}

int kv_delete_range(kv_db *db, const void *begin, size_t begin_len, const void *end, size_t end_len)
{
    if (!db)
        return kv_db_einval(db, "kv_delete_range", "db is NULL");
    if (kv_db_check_key(db, "kv_delete_range", begin, begin_len) != KV_OK ||
        kv_db_check_key(db, "kv_delete_range", end, end_len) != KV_OK)
        return KV_EINVAL;
    int d = kv_sst_cmp(db->cmp, begin, begin_len, end, end_len);
    if (d > 0)
        return kv_db_einval(db, "kv_delete_range", "end is before begin");
    if (d == 0)
        return KV_OK; /* an empty range: nothing to remove, nothing written */
    return write_one(db, KV_KIND_RANGE_DEL, begin, begin_len, end, end_len);
}

int kv_flush(kv_db *db)
{
    if (!db)
        return kv_db_einval(db, "kv_flush", "db is NULL");
    if (kv_db_check_writable(db, "kv_flush") != KV_OK)
        return KV_EINVAL; /* kv_compact_range too: it flushes first */
    unsigned long long mark = kv_error_mark();
    struct kv_writer w;
    if (writer_init(&w, NULL, 0) != KV_OK)
        return kv_db_fail(db, "kv_flush", mark, KV_ENOMEM);
    pthread_mutex_lock(&db->mu);
    enqueue(db, &w);
    int rc = make_room(db, 1);
    /* Holding the head of the queue, so no write refills the memtable:
     * wait for the flush thread to finish what make_room handed it. */
    while (rc == KV_OK && db->imm && !kv_db_stopped(db))
        pthread_cond_wait(&db->done_cv, &db->mu);
    if (rc == KV_OK)
        rc = kv_db_sticky_error(db);
    rc = kv_db_fail(db, "kv_flush", mark, rc);
    dequeue(db, &w, &w, rc);
    pthread_mutex_unlock(&db->mu);
    pthread_cond_destroy(&w.cv);
    return rc;
}

int kv_resume(kv_db *db)
{
    if (!db)
        return kv_db_einval(db, "kv_resume", "db is NULL");
    if (db->ro)
        return KV_OK; /* a read-only handle writes nothing: no error stops it */
    pthread_mutex_lock(&db->mu);
    /* The background thread runs the retry (it alone flushes and commits);
     * this waits for one that began after the call. */
    if (kv_db_recoverable(db) && db->bg_running) {
        uint64_t ticket = ++db->resume_asked;
        pthread_cond_signal(&db->work_cv);
        while (db->resume_done < ticket && kv_db_recoverable(db) && !db->closing)
            pthread_cond_wait(&db->done_cv, &db->mu);
    }
    int rc = kv_db_sticky_error(db);
    pthread_mutex_unlock(&db->mu);
    return rc;
}

int kv_db_writes_hold(kv_db *db, struct kv_writer *w)
{
    if (writer_init(w, NULL, 0) != KV_OK)
        return KV_ENOMEM;
    enqueue(db, w); /* a writer of no batch is never taken into a group */
    return KV_OK;
}

int kv_db_writes_flush(kv_db *db)
{
    int rc = make_room(db, 1);
    while (rc == KV_OK && db->imm && !kv_db_stopped(db))
        pthread_cond_wait(&db->done_cv, &db->mu);
    return rc == KV_OK ? kv_db_sticky_error(db) : rc;
}

void kv_db_writes_release(kv_db *db, struct kv_writer *w, int rc)
{
    dequeue(db, w, w, rc);
    pthread_cond_destroy(&w->cv);
}
