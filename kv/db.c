/* db.c - the store's front: kv_open and kv_close, the write path with
 * group commit, the filter-gated Get (kv_get, kv_get_at, and the traced walk
 * kv_explain_get runs), snapshots and kv_compact_range.
 *
 * The rest of a kv_db: recover.c (what kv_open does before the first
 * write), flush.c (the background thread), dbfiles.c (the directory's names
 * and LOCK), db.h (the struct and who uses it).
 *
 * Writes: a writer joins a queue; the one at its head (the leader) makes
 * room in the memtable, merges the batches of the writers behind it into
 * one log record, appends it (and syncs once if any of them asked), applies
 * it to the memtable, publishes the new last sequence and wakes them.
 *
 * Reads: load last_seq, then hold the published view (the memtables and
 * the version) through a reader slot, all without the lock (view.c), and
 * search (DESIGN.md, "The read path"). */
#define _DEFAULT_SOURCE /* strdup, clock_gettime, nanosleep */
#include "db.h"

#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "batch.h"
#include "dbfiles.h"
#include "util/ikey.h"
#include "util/error.h"
#include "util/hash.h"
#include "order.h"

/* A commit group stops growing at this many bytes (when the leader's own
 * batch is small, at its size plus 128 KiB, so a small write is not held up
 * behind a large group). */
#define GROUP_MAX ((size_t)1 << 20)

/* ---- small helpers ---------------------------------------------------------------- */

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

/* Under mu: the error that stops writes (the log's, else the background
 * thread's), with its text set on this thread; KV_OK when there is none. */
static int sticky_error(const kv_db *db)
{
    if (db->write_error)
        return kv_error_set(db->write_error, "%s", db->write_text);
    if (db->bg_error)
        return kv_error_set(db->bg_error, "%s", db->bg_text);
    return KV_OK;
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
    atomic_init(&t->refs, 1);
    unsigned flags = db->o.use_direct_reads ? KV_SST_OPEN_DIRECT : 0;
    int rc = kv_sst_reader_open_cmp(path, db->cache, db->files, meta->number, flags, db->tcmp,
                                    &t->reader);
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
        } else if (props.filter_hash != KV_SST_FILTER_HASH_NONE) {
            t->filter_keyed = 0;
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
/* ---- writing ---------------------------------------------------------------------- */

/* KV_OK, or KV_EINVAL with the reason (db may be NULL). */
static int check_key(const kv_db *db, const char *call, const void *key, size_t klen)
{
    if (klen && !key)
        return kv_db_einval(db, call, "NULL key with length %zu", klen);
    if (klen > KV_MAX_KEY_SIZE)
        return kv_db_einval(db, call, "key of %zu bytes, over KV_MAX_KEY_SIZE (%zu)", klen,
                            KV_MAX_KEY_SIZE);
    return KV_OK;
}

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
    size_t used = kv_mem_used(m->mem);
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
        if ((rc = sticky_error(db)) != KV_OK)
            break;
        size_t l0 = db->current->start[1];
        int full = kv_mem_count(db->mem->mem) > 0 && (force || mem_fill(db, db->mem) >= 1);
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
    uint64_t puts, deletes, max_seq, user_bytes;
    uint64_t large;   /* bytes of values bound for blob files (min_blob_size) */
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
    if (kind == KV_KIND_VALUE)
        a->puts++;
    else
        a->deletes++;
    a->max_seq = seq;
    a->user_bytes += klen + vlen;
    if (kind == KV_KIND_VALUE && a->db->o.min_blob_size != KV_BLOB_NEVER &&
        vlen >= a->db->o.min_blob_size)
        a->large += vlen;
    uint64_t h = a->filtered ? kv_db_hash(a->db, key, klen) : 0;
    return kv_mem_add(a->mem, h, seq, kind, key, klen, val, vlen);
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

int kv_write_opts(kv_db *db, const kv_write_options *wo, const kv_batch *batch)
{
    if (!db || !batch)
        return kv_db_einval(db, "kv_write", "%s is NULL", db ? "batch" : "db");
    if (batch->count == 0)
        return KV_OK;
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
    int rc = make_room(db, 0);
    if (rc == KV_OK) {
        size_t len;
        uint32_t count;
        int sync;
        uint64_t seq = atomic_load_explicit(&db->last_seq, memory_order_relaxed) + 1;
        last = build_group(db, &w, seq, &len, &count, &sync, &rc);
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
        while (rc == KV_OK && sync && db->old_wal && (rc = sticky_error(db)) == KV_OK) {
            db->sync_waiters++;
            pthread_cond_signal(&db->work_cv);
            pthread_cond_wait(&db->done_cv, &db->mu);
            db->sync_waiters--;
        }
        if (rc == KV_OK)
            rc = sticky_error(db);
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
            struct apply_ctx a = {.db = db, .mem = mem->mem,
                                  .filtered = kv_mem_has_filter(mem->mem)};
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
                mem->large += a.large;
                /* Publishes the group to readers (view.c: they load it
                 * with acquire order, then the view). */
                atomic_store_explicit(&db->last_seq, seq + count - 1, memory_order_release);
                COUNT(db, puts, a.puts);
                COUNT(db, deletes, a.deletes);
                COUNT(db, user_bytes, a.user_bytes);
                COUNT(db, write_groups, 1);
                uint64_t writers = 1;
                for (struct kv_writer *x = &w; x != last; x = x->next)
                    writers++;
                COUNT(db, writes, writers);
            } else {
                db->write_error = rc;
                kv_db_keep_text(db, db->write_text, "write to the log", mark, rc);
            }
        }
    }
    rc = kv_db_fail(db, "kv_write", mark, rc);
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
    const char *call = kind == KV_KIND_VALUE ? "kv_put" : "kv_delete";
    if (!db)
        return kv_db_einval(db, call, "db is NULL");
    if (check_key(db, call, key, klen) != KV_OK)
        return KV_EINVAL;
    if (vlen && !val)
        return kv_db_einval(db, call, "NULL value with length %zu", vlen);
    if (vlen > KV_MAX_VALUE_SIZE)
        return kv_db_einval(db, call, "value of %zu bytes, over KV_MAX_VALUE_SIZE (%zu)", vlen,
                            KV_MAX_VALUE_SIZE);
    uint8_t small[256];
    size_t need = KV_BATCH_HEADER + KV_BATCH_ENTRY_MAX(klen, vlen);
    uint8_t *rep = need <= sizeof small ? small : malloc(need);
    if (!rep)
        return kv_error_set(KV_ENOMEM, "%s: %s: out of memory", db->path, call);
    kv_batch_put_header(rep, 1);
    size_t len = KV_BATCH_HEADER + kv_batch_put_entry(rep + KV_BATCH_HEADER, kind, key, klen,
                                                      val, vlen);
    struct kv_batch b = {.rep = rep, .len = len, .cap = need, .count = 1,
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
        return kv_db_einval(db, "kv_flush", "db is NULL");
    unsigned long long mark = kv_error_mark();
    struct kv_writer w;
    if (writer_init(&w, NULL, 0) != KV_OK)
        return kv_db_fail(db, "kv_flush", mark, KV_ENOMEM);
    pthread_mutex_lock(&db->mu);
    enqueue(db, &w);
    int rc = make_room(db, 1);
    /* Holding the head of the queue, so no write refills the memtable:
     * wait for the flush thread to finish what make_room handed it. */
    while (rc == KV_OK && db->imm && !db->bg_error)
        pthread_cond_wait(&db->done_cv, &db->mu);
    if (rc == KV_OK)
        rc = sticky_error(db);
    rc = kv_db_fail(db, "kv_flush", mark, rc);
    dequeue(db, &w, &w, rc);
    pthread_mutex_unlock(&db->mu);
    pthread_cond_destroy(&w.cv);
    return rc;
}

/* ---- reading ---------------------------------------------------------------------- */

/* The Get path, written once. kv_get_at walks with tr NULL, kv_explain_get
 * (through kv_db_get_traced) with a trace to fill. The walk is inlined into
 * both: in kv_get_at every `if (tr)` is on a constant NULL and compiles to
 * nothing, so the plain Get pays nothing for the trace. */
#define GET_INLINE static inline __attribute__((always_inline))

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

/* Where kv_get_into wants a found value: the caller's buffer of cap
 * bytes. The other Gets pass none (NULL) and get a new buffer. */
struct get_dest {
    void *buf;
    size_t cap;
};

/* A found value of n bytes at src, to *val (dest NULL: a new buffer) or to
 * dest's buffer when it fits (else KV_ERANGE, nothing written); *vlen = n
 * either way. */
GET_INLINE int put_value(const void *src, size_t n, void **val, size_t *vlen,
                               const struct get_dest *dest)
{
    if (!dest)
        return copy_value(src, n, val, vlen);
    *vlen = n;
    if (n > dest->cap)
        return KV_ERANGE;
    if (n)
        memcpy(dest->buf, src, n);
    return KV_OK;
}

/* A new step in the trace, zeroed, or NULL without a trace. */
GET_INLINE struct kv_get_step *trace_step(struct kv_get_trace *tr, int where)
{
    if (!tr)
        return NULL;
    struct kv_get_step *st = &tr->steps[tr->nsteps++];
    memset(st, 0, sizeof *st);
    st->s.where = where;
    return st;
}

/* The memtable m's answer: KV_OK (a value, copied), KV_NOTFOUND with
 * *decided set (a tombstone), or KV_NOTFOUND (ask the next one). Its
 * filter, asked with the Get's hash h, may spare the skiplist walk: a "no"
 * is sure for every entry at or below snap (apply_entry says why). */
GET_INLINE int mem_lookup(kv_db *db, const struct kv_memref *m, int where, const void *key,
                          size_t klen, uint64_t h, uint64_t snap, void **val, size_t *vlen,
                          const struct get_dest *dest, int *decided, struct kv_get_trace *tr)
{
    if (!m)
        return KV_NOTFOUND;
    struct kv_get_step *st = trace_step(tr, where);
    if (kv_mem_has_filter(m->mem)) {
        if (!kv_mem_may_contain(m->mem, h)) {
            COUNT(db, memtable_filter_negatives, 1);
            if (st)
                st->s.filter = KV_EXPLAIN_FILTER_NEGATIVE;
            return KV_NOTFOUND;
        }
        if (st)
            st->s.filter = KV_EXPLAIN_FILTER_MAYBE;
    }
    kv_mem_entry e;
    if (kv_mem_get(m->mem, key, klen, snap, &e) != KV_OK)
        return KV_NOTFOUND;
    *decided = 1;
    if (st) {
        st->s.seq = e.seq;
        st->s.outcome = e.kind == KV_KIND_VALUE ? KV_EXPLAIN_FOUND : KV_EXPLAIN_DELETED;
    }
    return e.kind == KV_KIND_VALUE ? put_value(e.val, e.vlen, val, vlen, dest) : KV_NOTFOUND;
}

/* The memtables' answer at rv->seq: the active one, then the immutable
 * one, as mem_lookup gives it (*decided set when one of them decided). */
GET_INLINE int memtables_lookup(kv_db *db, const struct kv_read_view *rv, const void *key,
                                size_t klen, uint64_t h, void **val, size_t *vlen,
                                const struct get_dest *dest, int *decided,
                                struct kv_get_trace *tr)
{
    int rc = mem_lookup(db, rv->mem, KV_EXPLAIN_MEMTABLE, key, klen, h, rv->seq, val, vlen,
                        dest, decided, tr);
    if (!*decided)
        rc = mem_lookup(db, rv->imm, KV_EXPLAIN_IMMUTABLE, key, klen, h, rv->seq, val, vlen,
                        dest, decided, tr);
    return rc;
}

/* Probes one table, counting what the probe did: its key range and
 * filter first (the gate), then, when they let the key through, its index
 * and one data block. Returns KV_NOTFOUND (the Get goes on), or with
 * *decided set: KV_OK (*val), KV_NOTFOUND (a tombstone) or an error. */
/* A table's entry of kind KV_KIND_BLOB was found: its value, a blob
 * reference, is in *val (dest NULL) or dest's buffer (rc KV_OK), or did
 * not fit there (rc KV_ERANGE); reads the value it names into the same
 * place (blob.h, kv_blob_get). */
static int blob_lookup(kv_db *db, const struct kv_version *v, struct kv_table *t,
                       const uint8_t *ikey, size_t ilen, size_t plen, const kv_sst_probe *pr,
                       int rc, const void *key, size_t klen, void **val, size_t *vlen,
                       const struct get_dest *dest, struct kv_get_step *st)
{
    uint8_t ref[KV_BLOB_REF_MAX];
    size_t rlen = *vlen;
    if (rc == KV_ERANGE) { /* the reference did not fit the caller's buffer: read it again */
        kv_sst_probe again = *pr;
        uint8_t trailer[KV_IKEY_TRAILER];
        size_t tlen;
        rc = kv_sst_seek_gated_into(t->reader, ikey, ilen, plen, &again, ref, sizeof ref, &rlen,
                                    trailer, sizeof trailer, &tlen);
    } else { /* in the caller's buffer, or in a new one that goes now */
        const void *src = dest ? dest->buf : *val;
        if (rlen <= sizeof ref)
            memcpy(ref, src, rlen);
        else
            rc = KV_ERANGE;
        if (!dest) {
            kv_free(*val);
            *val = NULL;
        }
    }
    if (rc == KV_ERANGE) /* longer than any reference */
        return kv_error_set(KV_ECORRUPT, "%s: a blob reference of %zu bytes", t->path, rlen);
    if (rc != KV_OK)
        return rc;
    kv_blob_ref where = {0}; /* kv_blob_get sets it only once the reference decodes */
    struct kv_blob_dest bd = {dest ? dest->buf : NULL, dest ? dest->cap : 0};
    rc = kv_blob_get(db, v->blobs, v->nblobs, ref, rlen, key, klen, val, vlen,
                     dest ? &bd : NULL, &where);
    if (st && where.number) {
        st->s.blob_number = where.number;
        st->s.blob_offset = where.offset;
        st->s.blob_bytes = kv_blob_record_size(klen, where.size);
    }
    return rc;
}

GET_INLINE int table_lookup(kv_db *db, const struct kv_version *v, struct kv_table *t,
                            unsigned level, const void *key, size_t klen, const uint8_t *ikey,
                            size_t plen, uint64_t h, void **val, size_t *vlen,
                            const struct get_dest *dest, int *decided, struct kv_get_trace *tr)
{
    struct kv_get_step *st = trace_step(tr, KV_EXPLAIN_TABLE);
    COUNT(db, tables_probed, 1);
    kv_sst_probe pr;
    uint8_t trailer[KV_IKEY_TRAILER];
    size_t tlen = 0;
    size_t ilen = plen + KV_IKEY_TRAILER;
    int rc = kv_sst_seek_gate(t->reader, ikey, ilen, plen, h, &pr);
    if (rc == KV_OK && dest)
        rc = kv_sst_seek_gated_into(t->reader, ikey, ilen, plen, &pr, dest->buf, dest->cap, vlen,
                                    trailer, sizeof trailer, &tlen);
    else if (rc == KV_OK)
        rc = kv_sst_seek_gated(t->reader, ikey, ilen, plen, &pr, val, vlen, trailer,
                               sizeof trailer, &tlen);
    if (pr.filter_negative)
        COUNT(db, filter_negatives, 1);
    else if (pr.filter_checked)
        COUNT(db, filter_positives, 1);
    if (pr.false_positive)
        COUNT(db, false_positives, 1);
    if (pr.block_read) {
        COUNT(db, block_reads, 1);
        COUNT(db, block_read_bytes, pr.bytes_read);
        if (pr.device_read) {
            COUNT(db, device_reads, 1);
            COUNT(db, device_read_bytes, pr.device_bytes);
        }
        if (db->cache)
            COUNT(db, cache_misses, 1);
    }
    if (pr.cache_hit)
        COUNT(db, cache_hits, 1);
    if (st) {
        st->meta = &t->meta;
        st->s.level = level;
        st->s.number = t->meta.number;
        st->s.filter = pr.filter_negative  ? KV_EXPLAIN_FILTER_NEGATIVE
                       : pr.filter_checked ? KV_EXPLAIN_FILTER_MAYBE
                                           : KV_EXPLAIN_FILTER_NOT_ASKED;
        st->s.block = pr.cache_hit    ? KV_EXPLAIN_BLOCK_CACHE
                      : pr.block_read ? KV_EXPLAIN_BLOCK_FILE
                                      : KV_EXPLAIN_BLOCK_NONE;
        if (st->s.block != KV_EXPLAIN_BLOCK_NONE) {
            st->s.block_offset = pr.block_offset;
            st->s.block_bytes = pr.block_bytes;
        }
        st->s.false_positive = pr.false_positive;
    }
    if (rc == KV_NOTFOUND)
        return rc;
    *decided = 1;
    if (rc != KV_OK && rc != KV_ERANGE) { /* KV_ERANGE: a value too big for dest */
        if (st)
            st->s.outcome = KV_EXPLAIN_FAILED;
        return rc;
    }
    uint64_t seq;
    int kind;
    if (!kv_ikey_get_trailer(trailer, tlen, &seq, &kind) ||
        (kind != KV_KIND_VALUE && kind != KV_KIND_TOMBSTONE && kind != KV_KIND_BLOB)) {
        rc = KV_ECORRUPT;
        if (st)
            st->s.outcome = KV_EXPLAIN_FAILED;
    } else {
        if (kind == KV_KIND_TOMBSTONE)
            rc = KV_NOTFOUND;
        else if (kind == KV_KIND_BLOB)
            rc = blob_lookup(db, v, t, ikey, plen + KV_IKEY_TRAILER, plen, &pr, rc, key, klen,
                             val, vlen, dest, st);
        if (st) {
            st->s.seq = seq;
            st->s.outcome = rc == KV_OK || rc == KV_ERANGE ? KV_EXPLAIN_FOUND
                            : rc == KV_NOTFOUND            ? KV_EXPLAIN_DELETED
                                                           : KV_EXPLAIN_FAILED;
        }
    }
    if (rc != KV_OK && rc != KV_ERANGE) {
        if (!dest)
            kv_free(*val);
        *val = NULL;
        *vlen = 0;
    }
    return rc;
}

/* kv_db_view_take, inlined into the Get. */
GET_INLINE void view_take(kv_db *db, const kv_snapshot *snap, struct kv_read_view *out)
{
    out->seq = kv_view_enter(db, 0, snap, &out->hold);
    out->mem = out->hold.view->mem;
    out->imm = out->hold.view->imm;
    out->v = out->hold.view->v;
}

/* Candidates a Get keeps on its stack: level-0 tables beyond this many
 * (more than l0_stop_trigger allows in any sane setting) take a malloc. */
#define GET_STACK_CANDIDATES 64

/* A table that may hold the key, its level, and the hash its filter takes. */
struct get_candidate {
    struct kv_table *t;
    unsigned level;
    uint64_t h;
};

/* The tables that could hold the key, in the order a Get must ask them:
 * every level-0 table whose range holds it, newest first, then at most one
 * table per deeper level (their ranges are disjoint). Each one's filter
 * lines are asked for as it is found, so the filters are fetched from
 * memory together, and the probes that follow wait for about one memory
 * latency instead of one per table. Returns how many (at most
 * level-0 tables + KV_LEVELS - 1, the room `out` has). */
GET_INLINE size_t find_candidates(const kv_db *db, const struct kv_version *v, const void *key,
                                  size_t klen, struct kv_key_hashes *kh,
                                  struct get_candidate *out)
{
    size_t n = 0;
    for (size_t i = v->start[0]; i < v->start[1]; i++) {
        struct kv_table *t = v->tables[i];
        if (kv_ucmp(v->cmp, key, klen, t->meta.smallest, t->meta.smallest_len) < 0 ||
            kv_ucmp(v->cmp, key, klen, t->meta.largest, t->meta.largest_len) > 0)
            continue; /* outside its key range: not probed */
        uint64_t h = kv_key_hash(db, kh, t->filter_keyed);
        kv_sst_filter_prefetch(t->reader, h);
        out[n++] = (struct get_candidate){t, 0, h};
    }
    for (int level = 1; level < KV_LEVELS; level++) {
        if (v->start[level] == v->start[level + 1])
            continue;
        size_t j = kv_version_find(v, level, key, klen);
        if (j == SIZE_MAX)
            continue;
        uint64_t h = kv_key_hash(db, kh, v->tables[j]->filter_keyed);
        kv_sst_filter_prefetch(v->tables[j]->reader, h);
        out[n++] = (struct get_candidate){v->tables[j], (unsigned)level, h};
    }
    return n;
}

/* The walk: the memtables, then the candidate tables (find_candidates) in
 * order. The first entry found decides; tables after it are not asked,
 * so the counters say what a walk table by table would have done. With a
 * trace, its steps are allocated here (once the version, and so the most
 * steps it can take, is known) and the trace keeps the version's
 * reference. */
GET_INLINE int get_walk(kv_db *db, const kv_snapshot *snapshot, const void *key, size_t klen,
                        void **val, size_t *vlen, const struct get_dest *dest,
                        struct kv_get_trace *tr)
{
    *val = NULL;
    *vlen = 0;
    COUNT(db, gets, 1);
    /* The key's hash for the memtables' filters and the tables of this
     * database's own kind; a table of the other kind (the database
     * switched between keyed and unkeyed) gets its hash computed then. */
    struct kv_key_hashes kh = {.key = key, .klen = klen};
    uint64_t h = kv_key_hash(db, &kh, db->keyed);

    struct kv_read_view rv;
    view_take(db, snapshot, &rv);
    struct kv_version *v = rv.v;
    uint64_t snap = rv.seq;

    int decided = 0, rc = KV_NOTFOUND;
    struct get_candidate stack_cands[GET_STACK_CANDIDATES + KV_LEVELS], *cands = stack_cands;
    uint8_t stack[512];
    uint8_t *ikey = stack;
    if (tr) {
        tr->hash = h;
        tr->snapshot = snap;
        tr->live_tables = v->n;
        kv_version_ref(v);
        tr->version = v; /* the caller drops it */
        tr->nsteps = 0;
        if (!(tr->steps = malloc((2 + v->n) * sizeof *tr->steps))) {
            rc = KV_ENOMEM;
            goto out_unref;
        }
    }

    rc = memtables_lookup(db, &rv, key, klen, h, val, vlen, dest, &decided, tr);
    if (decided) {
        COUNT(db, memtable_hits, 1);
        goto out_unref;
    }

    size_t l0 = v->start[1] - v->start[0];
    if (l0 > GET_STACK_CANDIDATES &&
        !(cands = malloc((l0 + KV_LEVELS) * sizeof *cands))) {
        cands = stack_cands;
        rc = KV_ENOMEM;
        goto out_unref;
    }
    size_t ncands = find_candidates(db, v, key, klen, &kh, cands);
    if (ncands) {
        size_t need = 2 * klen + 2 + KV_IKEY_TRAILER;
        if (need > sizeof stack && !(ikey = malloc(need))) {
            ikey = stack;
            rc = KV_ENOMEM;
            goto out_unref;
        }
        size_t plen = kv_ikey_put_prefix(ikey, key, klen);
        /* The smallest trailer of sequence `snap`: the lookup lands on the
         * newest entry with a sequence <= snap. */
        kv_ikey_put_trailer(ikey + plen, snap, 0xFF);
        for (size_t i = 0; !decided && i < ncands; i++)
            rc = table_lookup(db, v, cands[i].t, cands[i].level, key, klen, ikey, plen,
                              cands[i].h, val, vlen, dest, &decided, tr);
    }
    if (!decided)
        rc = KV_NOTFOUND;
out_unref:
    if (ikey != stack)
        free(ikey);
    if (cands != stack_cands)
        free(cands);
    kv_view_leave(db, &rv.hold);
    return rc;
}

int kv_get_at(kv_db *db, const kv_snapshot *snapshot, const void *key, size_t klen, void **val,
              size_t *vlen)
{
    if (!db || !val || !vlen)
        return kv_db_einval(db, "kv_get", "%s is NULL", !db ? "db" : !val ? "val" : "vlen");
    if (check_key(db, "kv_get", key, klen) != KV_OK)
        return KV_EINVAL;
    unsigned long long mark = kv_error_mark();
    int rc = get_walk(db, snapshot, key, klen, val, vlen, NULL, NULL);
    return rc == KV_NOTFOUND ? rc : kv_db_fail(db, "kv_get", mark, rc);
}

int kv_get_into(kv_db *db, const kv_snapshot *snap, const void *key, size_t klen, void *buf,
                size_t cap, size_t *vlen)
{
    if (!db || !vlen || (cap && !buf))
        return kv_db_einval(db, "kv_get_into", "%s", !db     ? "db is NULL"
                                                     : !vlen ? "vlen is NULL"
                                                             : "NULL buf with a nonzero cap");
    if (check_key(db, "kv_get_into", key, klen) != KV_OK)
        return KV_EINVAL;
    unsigned long long mark = kv_error_mark();
    struct get_dest dest = {buf, cap};
    void *unused = NULL;
    size_t n = 0;
    int rc = get_walk(db, snap, key, klen, &unused, &n, &dest, NULL);
    *vlen = rc == KV_OK || rc == KV_ERANGE ? n : 0;
    if (rc == KV_ERANGE)
        return kv_error_set(rc, "%s: kv_get_into: value of %zu bytes, buffer of %zu", db->path,
                            n, cap);
    return rc == KV_NOTFOUND ? rc : kv_db_fail(db, "kv_get_into", mark, rc);
}

int kv_db_get_traced(kv_db *db, const void *key, size_t klen, void **val, size_t *vlen,
                     struct kv_get_trace *tr)
{
    return get_walk(db, NULL, key, klen, val, vlen, NULL, tr);
}

int kv_get(kv_db *db, const void *key, size_t klen, void **val, size_t *vlen)
{
    return kv_get_at(db, NULL, key, klen, val, vlen);
}

/* ---- reads from other files (multiget.c) ------------------------------------------ */

void kv_db_view_take(kv_db *db, const kv_snapshot *snap, struct kv_read_view *out)
{
    view_take(db, snap, out);
}

void kv_db_view_drop(kv_db *db, struct kv_read_view *rv)
{
    kv_view_leave(db, &rv->hold);
}

int kv_db_view_mem_get(kv_db *db, const struct kv_read_view *rv, const void *key, size_t klen,
                       uint64_t h, void **val, size_t *vlen, int *decided)
{
    *decided = 0;
    return memtables_lookup(db, rv, key, klen, h, val, vlen, NULL, decided, NULL);
}

int kv_db_check_key(const kv_db *db, const char *call, const void *key, size_t klen)
{
    return check_key(db, call, key, klen);
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
     * slot is taken, the list under mu does. */
    if (kv_view_snap_claim(db, &s->slot, &s->seq) == KV_OK) {
        s->prev = s->next = NULL;
        return KV_OK;
    }
    s->slot = NULL;
    pthread_mutex_lock(&db->mu);
    s->seq = atomic_load(&db->last_seq);
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
    pthread_mutex_unlock(&db->mu);
    free(s);
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

/* ---- compaction on request ----------------------------------------------------------- */

int kv_compact_range(kv_db *db, const void *start, size_t slen, const void *end, size_t elen)
{
    if (!db)
        return kv_db_einval(db, "kv_compact_range", "db is NULL");
    if (check_key(db, "kv_compact_range (start)", start, slen) != KV_OK ||
        check_key(db, "kv_compact_range (end)", end, elen) != KV_OK)
        return KV_EINVAL;
    int rc = kv_flush(db);
    if (rc != KV_OK)
        return rc;
    pthread_mutex_lock(&db->mu);
    while (db->manual_pending && !db->bg_error)
        pthread_cond_wait(&db->done_cv, &db->mu);
    if (db->bg_error) {
        rc = sticky_error(db);
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
    if (db->manual_done < ticket)
        rc = sticky_error(db);
    else if ((rc = db->manual_rc) != KV_OK)
        kv_error_set(rc, "%s", db->manual_text);
    pthread_mutex_unlock(&db->mu);
    /* The tables it replaced go before it returns, once the Gets still
     * reading them end (the background thread does not wait for them). */
    if (rc == KV_OK)
        kv_view_reclaim(db, 1);
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
    o->block_size = 2048;
    o->block_cache_size = (size_t)8 << 20;
    o->bloom_bits_per_key = 10;
    o->filter_layout = KV_BLOOM_BLOCKED;
    o->compression = KV_COMPRESSION_ZSTD;
    o->compression_level = -1;
    o->max_open_files = 1000;
    /* Chosen by measurement at 5M and 20M keys: doc/database.md, "Compaction". */
    o->l0_compaction_trigger = 8;
    o->l0_slowdown_trigger = 24;
    o->l0_stop_trigger = 40;
    o->target_file_size = (size_t)32 << 20;
    o->max_bytes_for_level_base = (size_t)32 << 20;
    o->memtable_filter = 1;
    o->filter_policy = KV_FILTER_UNIFORM;
    o->use_direct_reads = 0;
    o->comparator = NULL;
    o->filter_keyed_hash = 0;
    o->compression_dict_bytes = 0;
    o->compression_min_level = 2;
    o->compressed_block_size = 2048;
    o->delayed_write_rate = (size_t)16 << 20;
    o->background_nice = -1;
    o->min_blob_size = 512;
    o->blob_file_size = (size_t)256 << 20;
    o->blob_gc_threshold = 0.25;
    /* doc/database.md, "Idle compaction": why a second. */
    o->idle_compaction_ms = 1000;
    o->dynamic_level_bytes = 1;
}

/* NULL when the options are good, else which one is bad and why. */
static const char *bad_option(const kv_options *o)
{
    if (o->version != KV_OPTIONS_VERSION)
        return "opts->version is not KV_OPTIONS_VERSION (call kv_options_init first)";
    if (o->write_buffer_size < ((size_t)64 << 10) || o->write_buffer_size > ((size_t)1 << 32))
        return "write_buffer_size outside 64 KiB .. 4 GiB";
    if (o->block_size < 64 || o->block_size > ((size_t)64 << 20))
        return "block_size outside 64 .. 64 MiB";
    if (!(o->bloom_bits_per_key >= 0) || o->bloom_bits_per_key > 1000)
        return "bloom_bits_per_key outside 0 .. 1000";
    if (o->filter_layout != KV_BLOOM_BLOCKED && o->filter_layout != KV_BLOOM_CLASSIC)
        return "filter_layout is neither KV_BLOOM_BLOCKED nor KV_BLOOM_CLASSIC";
    if (o->compression != KV_COMPRESSION_NONE && o->compression != KV_COMPRESSION_ZSTD)
        return "compression is neither KV_COMPRESSION_NONE nor KV_COMPRESSION_ZSTD";
    if (o->compression == KV_COMPRESSION_ZSTD &&
        (o->compression_level < -131072 || o->compression_level > 22))
        return "compression_level outside zstd's -131072 .. 22";
    if (o->compression_dict_bytes > ((size_t)1 << 20))
        return "compression_dict_bytes above 1 MiB";
    if (o->compression_min_level < 0 || o->compression_min_level > 7)
        return "compression_min_level outside 0 .. 7";
    if (o->compressed_block_size &&
        (o->compressed_block_size < 64 || o->compressed_block_size > ((size_t)64 << 20)))
        return "compressed_block_size neither 0 nor 64 .. 64 MiB";
    if (o->delayed_write_rate < 1024 || (uint64_t)o->delayed_write_rate > ((uint64_t)1 << 40))
        return "delayed_write_rate outside 1 KiB .. 1 TiB per second";
    if (o->background_nice < -1 || o->background_nice > 19)
        return "background_nice outside -1 .. 19";
    if (o->blob_file_size < ((size_t)64 << 10))
        return "blob_file_size below 64 KiB";
    if (!(o->blob_gc_threshold > 0) || o->blob_gc_threshold > 1)
        return "blob_gc_threshold outside (0, 1]";
    if (o->idle_compaction_ms < 0 || o->idle_compaction_ms > 86400000)
        return "idle_compaction_ms outside 0 .. 86400000";
    if (o->dynamic_level_bytes != 0 && o->dynamic_level_bytes != 1)
        return "dynamic_level_bytes is neither 0 nor 1";
    if (o->max_open_files < 16)
        return "max_open_files below 16";
    if (o->l0_compaction_trigger < 1)
        return "l0_compaction_trigger below 1";
    if (o->l0_slowdown_trigger < o->l0_compaction_trigger)
        return "l0_slowdown_trigger below l0_compaction_trigger";
    if (o->l0_stop_trigger < o->l0_slowdown_trigger)
        return "l0_stop_trigger below l0_slowdown_trigger";
    if (o->target_file_size < ((size_t)64 << 10))
        return "target_file_size below 64 KiB";
    if (o->max_bytes_for_level_base < o->target_file_size)
        return "max_bytes_for_level_base below target_file_size";
    if (o->memtable_filter != 0 && o->memtable_filter != 1)
        return "memtable_filter is neither 0 nor 1";
    if (o->filter_policy != KV_FILTER_UNIFORM && o->filter_policy != KV_FILTER_MONKEY)
        return "filter_policy is neither KV_FILTER_UNIFORM nor KV_FILTER_MONKEY";
    if (o->use_direct_reads != 0 && o->use_direct_reads != 1)
        return "use_direct_reads is neither 0 nor 1";
    if (o->filter_keyed_hash != 0 && o->filter_keyed_hash != 1)
        return "filter_keyed_hash is neither 0 nor 1";
    if (o->comparator && (!o->comparator->name || !o->comparator->compare))
        return "comparator without a name or a compare function";
    if (o->comparator && (!o->comparator->name[0] || strlen(o->comparator->name) > 255))
        return "comparator name not 1 .. 255 bytes long";
    return NULL;
}

void kv_db_free(kv_db *db)
{
    if (!db)
        return;
    kv_wal_close(db->wal);
    kv_wal_close(db->old_wal);
    kv_view_free_all(db);
    free(db->slots);
    kv_memref_unref(db->mem);
    kv_memref_unref(db->imm);
    kv_version_unref(db->current); /* closes the tables' readers */
    kv_sst_cache_free(db->cache);
    kv_sst_files_free(db->files);
    kv_blob_files_free(db->blob_files); /* after the version: its readers are closed */
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

int kv_db_options(const char *path, const char *call, const kv_options *opts, kv_options *o)
{
    kv_options_init(o);
    if (opts && opts->version >= 1 && opts->version < KV_OPTIONS_VERSION) {
        /* A caller built before memtable_filter, filter_policy, comparator,
         * compression_dict_bytes, delayed_write_rate, min_blob_size,
         * idle_compaction_ms or dynamic_level_bytes (kv.h,
         * KV_OPTIONS_VERSION): its struct ends
         * there; the fields after it keep their defaults. */
        static const size_t end[] = {0, offsetof(kv_options, memtable_filter),
                                     offsetof(kv_options, filter_policy),
                                     offsetof(kv_options, comparator),
                                     offsetof(kv_options, compression_dict_bytes),
                                     offsetof(kv_options, delayed_write_rate),
                                     offsetof(kv_options, min_blob_size),
                                     offsetof(kv_options, idle_compaction_ms),
                                     offsetof(kv_options, dynamic_level_bytes)};
        memcpy(o, opts, end[opts->version]);
        o->version = KV_OPTIONS_VERSION;
    } else if (opts)
        *o = *opts;
    if (!path || !*path)
        return kv_db_einval(NULL, call, "%s path", path ? "empty" : "NULL");
    const char *bad = bad_option(o);
    if (bad)
        return kv_error_set(KV_EINVAL, "%s: %s: bad option: %s", path, call, bad);
    return KV_OK;
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
    /* The reader slots: zeroed (all free), one cache line each. */
    if ((db->slots = aligned_alloc(64, KV_VIEW_SLOTS * sizeof *db->slots)))
        memset(db->slots, 0, KV_VIEW_SLOTS * sizeof *db->slots);
    if (!db->slots || !(db->path = strdup(path)) || !(db->c = kv_tally_new(sizeof *db->c))) {
        kv_db_free(db);
        return kv_error_set(KV_ENOMEM, "%s: out of memory", path);
    }
    /* One handle at a time, in any process (dbfiles.h). */
    int rc = kv_dbfile_lock(path, &db->lock_fd);
    if (rc == KV_OK && o->block_cache_size > 0)
        rc = kv_sst_cache_new(o->block_cache_size, &db->cache);
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

    kv_db *db;
    if ((rc = kv_db_bare(path, &o, &db)) != KV_OK)
        return rc;
    rc = kv_db_recover(db);
    int e = rc == KV_OK ? pthread_create(&db->bg, NULL, kv_db_background, db) : 0;
    if (e != 0) { /* EAGAIN: out of threads or memory */
        kv_error_errno(e, "%s: cannot start the background thread", path);
        rc = KV_ENOMEM;
    }
    if (rc != KV_OK) {
        kv_db_free(db);
        return rc;
    }
    db->bg_running = 1;
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
    pthread_mutex_unlock(&db->mu);
    if (db->bg_running)
        pthread_join(db->bg, NULL);
    /* The background thread is gone; the lock keeps the analysis simple. */
    pthread_mutex_lock(&db->mu);
    int rc = db->bg_error ? kv_error_set(db->bg_error, "%s", db->bg_text) : sticky_error(db);
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
