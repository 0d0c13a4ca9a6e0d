/* view.h - what a read sees (the memtables and the version), published
 * without a lock, and the reader slots that say which views are in use.
 *
 * The protocol, its invariants and its memory-ordering argument are in
 * view.c's header comment and in doc/concurrency.md.
 *
 * Internal to kv: not installed. */
#ifndef KV_VIEW_H
#define KV_VIEW_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct kv_memref;
struct kv_version;
typedef struct kv_rtset kv_rtset;
typedef struct kv_db kv_db;
typedef struct kv_snapshot kv_snapshot;

/* An immutable triple (mem, imm, version), one reference to each. Built
 * under db->mu whenever one of the three changes, then published in
 * db->view; the view it replaces is retired and freed (dropping its
 * references) once no reader holds it. */
struct kv_view {
    struct kv_memref *mem, *imm; /* imm: NULL when there is none */
    struct kv_version *v;
    /* mem->rt and imm->rt as the view was published, one reference each
     * (NULL: none): the range tombstones a reader of this view honours. */
    kv_rtset *mem_rt, *imm_rt;
    /* last_seq when the view was published. Every write numbered up to it
     * is in the view, and every sequence a flush or compaction that made
     * the view's tables dropped older versions below is at most it; a
     * read without a snapshot reads at no lower sequence (view.c). */
    uint64_t seq_floor;
    /* Readers that hold it without a slot (every slot of their kind was
     * busy): changed under db->mu only. */
    int holders;
    struct kv_view *next; /* [mu] in db->retired */
};

/* Reader slots per database. Slots [0, KV_VIEW_SHORT) are for holds that
 * last one call (a Get, a kv_multi_get); slots [KV_VIEW_SHORT,
 * KV_VIEW_SLOTS) for iterators (their whole life) and snapshots. */
#define KV_VIEW_SLOTS 64
#define KV_VIEW_SHORT 32

/* A snapshot slot's value while its owner reads the last sequence. */
#define KV_VIEW_SNAP_PENDING UINT64_MAX

/* One cache line: its reader is, nearly always, the only thread that
 * writes it, so taking and leaving it moves no line between cores. */
struct kv_view_slot {
    _Alignas(64) _Atomic(struct kv_view *) view; /* the view held, or NULL */
    _Atomic int owned;     /* long slots: an iterator owns it (0: free) */
    _Atomic uint64_t snap; /* 0 free; KV_VIEW_SNAP_PENDING; else a snapshot's seq + 1 */
};

/* A reader's hold on a view: through a slot, or (slot NULL) one of its
 * `holders`. */
struct kv_view_hold {
    struct kv_view *view;
    struct kv_view_slot *slot;
};

/* A new, empty view (for kv_view_publish), or NULL when out of memory. */
struct kv_view *kv_view_alloc(void);

/* Under db->mu: fills `fresh` (NULL: allocates one) with references to
 * db->mem, db->imm and db->current, publishes it and retires the view it
 * replaces. KV_ENOMEM when it cannot allocate: the old view stays
 * published (still right unless db->mem changed, which is why make_room
 * allocates first). */
int kv_view_publish(kv_db *db, struct kv_view *fresh);

/* Takes a hold on the published view: a short one (one call) or a long
 * one (an iterator). Takes no lock unless every slot of its kind is busy.
 * Returns the sequence to read at: snap's, or without one last_seq
 * (loaded before the view) raised to the view's seq_floor (view.c says
 * why both). Cannot fail. */
uint64_t kv_view_enter(kv_db *db, int long_hold, const kv_snapshot *snap,
                       struct kv_view_hold *h);
/* Gives the hold back. A long hold also frees the retired views nobody
 * holds any more (so a table an iterator kept goes with it). Cannot fail. */
void kv_view_leave(kv_db *db, struct kv_view_hold *h);

/* Frees the retired views no reader holds (takes db->mu; frees outside
 * it). wait: waits (up to a second) for short holds on retired views to
 * end (they last one call), so that kv_compact_range's caller sees the
 * tables it replaced gone; never for long holds. The background thread
 * does not wait (a reader preempted inside a Get would stall compaction):
 * it calls again a millisecond later while the result is 1, which says
 * that some retired view is still held by Gets alone. */
int kv_view_reclaim(kv_db *db, int wait);

/* Snapshot registration without the lock: a slot holding the snapshot's
 * sequence (*out), or KV_EBUSY when every slot is taken (the caller then
 * registers it under db->mu). */
int kv_view_snap_claim(kv_db *db, struct kv_view_slot **slot, uint64_t *out);
void kv_view_snap_release(struct kv_view_slot *slot);

/* Under db->mu: the smallest sequence a slot's snapshot reads at, or
 * `upto` when none is lower. `upto` must have been read from db->last_seq
 * before the call (view.c says why). */
uint64_t kv_view_snap_oldest(kv_db *db, uint64_t upto);

/* The iterators and snapshots that hold slots (kv_close counts them). */
void kv_view_count(kv_db *db, size_t *iters, size_t *snaps);

/* kv_db_free: frees the published view and every retired one. */
void kv_view_free_all(kv_db *db);

#endif /* KV_VIEW_H */
