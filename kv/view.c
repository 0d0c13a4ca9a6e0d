/* view.c - lock-free read views: publication, reader slots, reclamation.
 *
 * A read needs the memtables, the version (the live tables) and a
 * sequence. Writers change the first three rarely (a memtable switch, a
 * flush, a compaction) and the sequence on every write. So:
 *
 *  - db->last_seq is an atomic. The commit leader stores it with release
 *    order once the group's entries (and their memtable-filter bits) are
 *    in; a reader loads it with acquire order. No lock, no shared write.
 *  - (mem, imm, version) live in an immutable struct kv_view. Whoever
 *    changes one of the three (under db->mu) builds a new view holding a
 *    reference to each, publishes it with a store to db->view, and puts
 *    the old one on db->retired.
 *  - A reader protects the view it reads with a reader slot, a hazard
 *    pointer in the manner of LMDB's reader table: each slot is one cache
 *    line in an array per database; a Get uses the slot its thread's
 *    counter stripe names (util/tally.h: each of the first 16 counting
 *    threads has its own), so in the common case a slot is written only by
 *    its own thread and no line is shared between readers.
 *
 * Reader, to enter (short holds: slots [0, KV_VIEW_SHORT); iterators use
 * the others):
 *   1. seq = load_acquire(db->last_seq)            (unless a snapshot's)
 *   2. p = load_acquire(db->view)
 *   3. CAS(slot->view, NULL -> p)                  (seq_cst; on failure the
 *                                                   slot is busy: next one)
 *   4. q = load_seq_cst(db->view); while q != p: store_seq_cst(slot->view,
 *      q), p = q, q = load_seq_cst(db->view)
 *   then read p's memtables and tables; to leave,
 *   5. store_release(slot->view, NULL).
 * Reclaimer (the background thread after a publication, and again every
 * millisecond while Gets hold a retired view; kv_compact_range's caller;
 * kv_iter_free; a reader without a slot), under db->mu:
 *   a. store_seq_cst(db->view, new); push the old view on db->retired
 *   b. for each retired view r: if r->holders == 0 and no slot's
 *      load_seq_cst(slot->view) == r, unlink r and free it (outside mu),
 *      which drops its references to memtables and the version.
 *
 * Invariant 1: a reader dereferences a view only after step 4 has seen
 * it published while the slot already held it.
 * Invariant 2: a retired view is freed only after a scan (b) that found
 * no slot holding it, and that scan follows the view's retirement (a).
 * Why a reader never touches a freed view: steps 3-4 and a-b are
 * sequentially consistent, so they fall in one total order. If the
 * reader's last load in step 4 saw r still published, that load precedes
 * the store in (a) that retired r, so the reader's slot store precedes (b)'s
 * scan, which therefore sees r in the slot (or, if the reader already left,
 * sees NULL through the release store of step 5, after which the reader
 * touches nothing: the release/acquire pair orders all its reads before
 * the free). If the load in step 4 saw a newer view, the reader moves on
 * to that one and never dereferences r. A freed memtable or table is only
 * ever reached through a view (or a reference counted elsewhere: the
 * flush thread's, an iterator without a slot), so the same holds for them:
 * a view holds a reference to each, a table's file is closed and, if a
 * compaction replaced it, unlinked only when its last reference goes
 * (version.c). An address reused by a new view does not matter: step 4
 * then validated the new view, which is the published one.
 *
 * Why the sequence is loaded first: a write's entries go to the memtable
 * of the view published before the write (make_room publishes, under mu,
 * before the leader appends), and the leader's release store of last_seq
 * follows them. A reader whose acquire load saw that sequence therefore
 * also sees that publication, and its later load of db->view returns that
 * view or a newer one: one whose memtables or tables hold every entry up
 * to the sequence (a flush publishes the table before it drops imm).
 *
 * Why the sequence is then raised to the view's seq_floor: a flush or
 * compaction drops an older version of a key when no snapshot can need
 * it, judging by last_seq when it starts (a horizon H). A reader that
 * loaded last_seq = S and was then preempted may take a view published
 * after such a job, whose tables keep only versions above S of some key:
 * reading at S it would find none of them and report the key missing
 * (a plain Get registers no snapshot, so the job could not know of S).
 * The view's seq_floor is last_seq at its publication, loaded with
 * acquire order after the job finished: at least every H behind its
 * tables, and every write numbered up to it is in the view (its entries
 * were inserted before the release store of last_seq that the publisher
 * acquired, and the reader acquires the view after the publisher's
 * store). So reading at max(S, seq_floor) sees every write up to S and
 * every version a job kept.
 *
 * Snapshots take a long slot's `snap` field the same way: CAS it from 0 to
 * PENDING (seq_cst), load last_seq (seq_cst), store seq + 1. A flush or
 * compaction computes its horizon by loading last_seq (seq_cst) and then
 * every slot (seq_cst), waiting out PENDING: if its scan missed a
 * snapshot's PENDING store, that store, and so the snapshot's load of
 * last_seq, come after the horizon's load, so the snapshot reads at or
 * above the horizon and nothing it needs is dropped.
 *
 * When every slot of its kind is busy (more than KV_VIEW_SHORT Gets at
 * once), a reader takes db->mu and counts itself in the view's holders;
 * correct, only slower. */
#define _POSIX_C_SOURCE 200809L
#include "view.h"

#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include "db.h"
#include "util/tally.h"

struct kv_view *kv_view_alloc(void)
{
    return calloc(1, sizeof(struct kv_view));
}

/* Drops a view's references and frees it. */
static void view_free(struct kv_view *v)
{
    kv_memref_unref(v->mem);
    kv_memref_unref(v->imm);
    kv_rtset_unref(v->mem_rt);
    kv_rtset_unref(v->imm_rt);
    kv_version_unref(v->v);
    free(v);
}

int kv_view_publish(kv_db *db, struct kv_view *fresh)
{
    if (!fresh && !(fresh = kv_view_alloc()))
        return KV_ENOMEM;
    fresh->mem = db->mem;
    fresh->imm = db->imm;
    fresh->v = db->current;
    fresh->seq_floor = atomic_load_explicit(&db->last_seq, memory_order_acquire);
    fresh->holders = 0;
    fresh->next = NULL;
    atomic_fetch_add_explicit(&fresh->mem->refs, 1, memory_order_relaxed);
    if (fresh->imm)
        atomic_fetch_add_explicit(&fresh->imm->refs, 1, memory_order_relaxed);
    fresh->mem_rt = db->mem->rt;
    fresh->imm_rt = fresh->imm ? fresh->imm->rt : NULL;
    kv_rtset_ref(fresh->mem_rt);
    kv_rtset_ref(fresh->imm_rt);
    kv_version_ref(fresh->v);
    struct kv_view *old = atomic_load_explicit(&db->view, memory_order_relaxed);
    atomic_store(&db->view, fresh); /* seq_cst: step (a) */
    if (old) {
        old->next = db->retired;
        db->retired = old;
    }
    return KV_OK;
}

/* Steps 3-4 on a slot: KV_OK with h set, or KV_EBUSY when the slot is
 * taken. */
static inline int slot_take(kv_db *db, struct kv_view_slot *s, struct kv_view_hold *h)
{
    struct kv_view *p = atomic_load_explicit(&db->view, memory_order_acquire);
    struct kv_view *expect = NULL;
    if (!atomic_compare_exchange_strong(&s->view, &expect, p))
        return KV_EBUSY;
    struct kv_view *q;
    while ((q = atomic_load(&db->view)) != p) {
        atomic_store(&s->view, q);
        p = q;
    }
    h->view = p;
    h->slot = s;
    return KV_OK;
}

/* No slot: a holder counted under the lock. */
static void enter_locked(kv_db *db, struct kv_view_hold *h)
{
    pthread_mutex_lock(&db->mu);
    h->view = atomic_load_explicit(&db->view, memory_order_relaxed);
    h->view->holders++;
    h->slot = NULL;
    pthread_mutex_unlock(&db->mu);
}

/* Steps 3-4 on a slot of the kind asked, or the lock when all are busy. */
static void hold_view(kv_db *db, int long_hold, struct kv_view_hold *h)
{
    if (!long_hold) {
        unsigned start = kv_tally_slot();
        for (unsigned i = 0; i < KV_VIEW_SHORT; i++)
            if (slot_take(db, &db->slots[(start + i) % KV_VIEW_SHORT], h) == KV_OK)
                return;
    } else {
        for (unsigned i = KV_VIEW_SHORT; i < KV_VIEW_SLOTS; i++) {
            struct kv_view_slot *s = &db->slots[i];
            int expect = 0;
            if (atomic_load_explicit(&s->owned, memory_order_relaxed) ||
                !atomic_compare_exchange_strong(&s->owned, &expect, 1))
                continue;
            if (slot_take(db, s, h) == KV_OK)
                return;
            atomic_store_explicit(&s->owned, 0, memory_order_release); /* cannot happen */
        }
    }
    enter_locked(db, h);
}

uint64_t kv_view_enter(kv_db *db, int long_hold, const kv_snapshot *snap,
                       struct kv_view_hold *h)
{
    if (snap && snap->view) { /* a read-only handle's: the view it was taken in */
        pthread_mutex_lock(&db->mu);
        h->view = snap->view;
        h->view->holders++;
        h->slot = NULL;
        pthread_mutex_unlock(&db->mu);
        return snap->seq;
    }
    if (snap) { /* registered: flushes and compactions keep what it needs */
        hold_view(db, long_hold, h);
        return snap->seq;
    }
    /* Step 1, the sequence, before the view; then its seq_floor (above). */
    uint64_t seq = atomic_load_explicit(&db->last_seq, memory_order_acquire);
    hold_view(db, long_hold, h);
    return seq < h->view->seq_floor ? h->view->seq_floor : seq;
}

void kv_view_leave(kv_db *db, struct kv_view_hold *h)
{
    struct kv_view_slot *s = h->slot;
    if (s) {
        atomic_store_explicit(&s->view, NULL, memory_order_release); /* step 5 */
        if (s < &db->slots[KV_VIEW_SHORT]) /* a Get: nothing more */
            return;
        kv_view_reclaim(db, 0);
        atomic_store_explicit(&s->owned, 0, memory_order_release);
        return;
    }
    pthread_mutex_lock(&db->mu);
    int last = --h->view->holders == 0;
    pthread_mutex_unlock(&db->mu);
    if (last)
        kv_view_reclaim(db, 0);
}

/* Which slots hold r: bit 0 some short slot, bit 1 some long one. */
static unsigned held_by(const kv_db *db, const struct kv_view *r)
{
    unsigned by = 0;
    for (unsigned i = 0; i < KV_VIEW_SLOTS; i++)
        if (atomic_load((_Atomic(struct kv_view *) *)&db->slots[i].view) == r)
            by |= i < KV_VIEW_SHORT ? 1u : 2u;
    return by;
}

int kv_view_reclaim(kv_db *db, int wait)
{
    /* A Get lasts microseconds (a block read from disk: a millisecond or
     * so), but its thread may be preempted inside it: the wait yields
     * first, then sleeps 100 us at a time, and after a second leaves the
     * view for a later pass. */
    int tries = wait ? 100 + 10000 : 1;
    for (;;) {
        struct kv_view *dead = NULL;
        int short_held = 0;
        pthread_mutex_lock(&db->mu);
        for (struct kv_view **pp = &db->retired; *pp;) {
            struct kv_view *r = *pp;
            unsigned by = r->holders ? 2u : held_by(db, r);
            if (!by) {
                *pp = r->next;
                r->next = dead;
                dead = r;
            } else {
                short_held |= by == 1u;
                pp = &r->next;
            }
        }
        db->reclaim_pending = short_held;
        pthread_mutex_unlock(&db->mu);
        while (dead) {
            struct kv_view *next = dead->next;
            view_free(dead);
            dead = next;
        }
        if (!short_held || --tries <= 0)
            return short_held;
        if (tries > 10000) {
            sched_yield();
        } else {
            struct timespec us100 = {0, 100000};
            nanosleep(&us100, NULL);
        }
    }
}

int kv_view_snap_claim(kv_db *db, struct kv_view_slot **slot, uint64_t *out)
{
    for (unsigned i = KV_VIEW_SHORT; i < KV_VIEW_SLOTS; i++) {
        struct kv_view_slot *s = &db->slots[i];
        uint64_t expect = 0;
        if (atomic_load_explicit(&s->snap, memory_order_relaxed) != 0 ||
            !atomic_compare_exchange_strong(&s->snap, &expect, KV_VIEW_SNAP_PENDING))
            continue;
        uint64_t seq = atomic_load(&db->last_seq); /* seq_cst: after the PENDING store */
        atomic_store_explicit(&s->snap, seq + 1, memory_order_release);
        *slot = s;
        *out = seq;
        return KV_OK;
    }
    return KV_EBUSY;
}

void kv_view_snap_release(struct kv_view_slot *slot)
{
    atomic_store_explicit(&slot->snap, 0, memory_order_release);
}

uint64_t kv_view_snap_oldest(kv_db *db, uint64_t upto)
{
    for (unsigned i = KV_VIEW_SHORT; i < KV_VIEW_SLOTS; i++) {
        uint64_t s;
        /* PENDING lasts two instructions of its owner (unless it is
         * preempted there): wait for its sequence. */
        while ((s = atomic_load(&db->slots[i].snap)) == KV_VIEW_SNAP_PENDING)
            sched_yield();
        if (s && s - 1 < upto)
            upto = s - 1;
    }
    return upto;
}

void kv_view_count(kv_db *db, size_t *iters, size_t *snaps)
{
    *iters = *snaps = 0;
    for (unsigned i = KV_VIEW_SHORT; i < KV_VIEW_SLOTS; i++) {
        *iters += atomic_load(&db->slots[i].owned) != 0;
        *snaps += atomic_load(&db->slots[i].snap) != 0;
    }
}

void kv_view_free_all(kv_db *db)
{
    struct kv_view *v = atomic_load_explicit(&db->view, memory_order_relaxed);
    if (v)
        view_free(v);
    atomic_store_explicit(&db->view, NULL, memory_order_relaxed);
    while ((v = db->retired)) {
        db->retired = v->next;
        view_free(v);
    }
}
