/* files.c - a pool of open table files: at most max_open of its readers'
 * files (a descriptor and a mapping each) are open at once; the others are
 * closed and opened again when read, the least recently used closed first
 * (a CLOCK: an approximation of LRU that costs a reader no lock).
 *
 * A pooled reader keeps in memory what kv_sst_reader_open reads (trailer,
 * index, properties, filter, and what it learnt of each block), so a get
 * that its filter rules out, and any question about the table, needs no
 * file. Only a read of a data block needs one, and it holds a pin on the
 * file while it does (kv_sst_pin, reader.h), and for as long as the block's
 * bytes point into the mapping (the table iterator: its current block).
 *
 * The protocol, for one reader r:
 *
 *   reader (any thread, no lock)         evictor (under mu)
 *   pins[my stripe] += 1   (seq_cst)     fstate = CLOSING         (seq_cst)
 *   fstate == OPEN ?       (seq_cst)     sum of pins[] == 0 ?     (seq_cst)
 *     yes: read the file, then             yes: close the file; fstate = CLOSED
 *          pins[my stripe] -= 1 (release)  no:  fstate = OPEN (it is in use)
 *     no:  pins -= 1; slow path: take mu, reopen if CLOSED, pin under mu
 *
 * Both sides store, then load what the other stores, all sequentially
 * consistent: they cannot both miss the other, so a file is never closed
 * under a pin. The pin count is striped like the counters (tally.h), in the
 * counters' own cache line: a get adds to a line only its thread writes,
 * and the file's state is read-mostly. The `referenced` bit is set by a
 * reader only when it is clear: the clock hand clears it as it passes, and
 * a file whose bit is clear when the hand comes round again is closed.
 *
 * The count of open files is exact: every close happens under mu, and so
 * does every reopen; a first open (kv_sst_reader_open_pooled, which reads
 * the index and filter too) takes its room under mu first and opens the
 * file outside the lock. Before a file is opened, unpinned files are
 * closed until the count is below max_open; when every open file is
 * pinned, the new one is opened anyway (counted in over_budget), as
 * LevelDB's table cache keeps entries in use: a get pins one file at a
 * time, an iterator or a compaction one per table it reads at once.
 *
 * Lock order: a pool's mu is taken with no other lock of this module held,
 * and no other lock is taken under it. */
#define _POSIX_C_SOURCE 200809L
#include <kv/sstable.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reader.h"
#include "util/error.h"
#include "util/file.h"
#include "util/tally.h"

struct kv_sst_files {
    pthread_mutex_t mu;
    size_t max_open;
    /* The readers whose files are open, in a ring; the hand is the next
     * one the evictor looks at, and a file opened joins just behind it. */
    kv_sst_reader *hand;         /* [mu] NULL: the ring is empty */
    size_t nring;                /* [mu] */
    _Atomic uint64_t open_now;   /* files open, or room reserved for one; written under mu */
    _Atomic uint64_t peak_open, opens, reopens, evictions, over_budget; /* written under mu */
};

int kv_sst_files_new(size_t max_open, kv_sst_files **out)
{
    if (!out)
        return KV_EINVAL;
    *out = NULL;
    if (max_open < 1)
        return KV_EINVAL;
    kv_sst_files *f = calloc(1, sizeof *f);
    if (!f)
        return KV_ENOMEM;
    if (pthread_mutex_init(&f->mu, NULL) != 0) {
        free(f);
        return KV_ENOMEM;
    }
    f->max_open = max_open;
    *out = f;
    return KV_OK;
}

void kv_sst_files_free(kv_sst_files *f)
{
    if (!f)
        return;
    pthread_mutex_destroy(&f->mu);
    free(f);
}

void kv_sst_files_stats_get(const kv_sst_files *f, kv_sst_files_stats *out)
{
    if (!f || !out)
        return;
    out->max_open = f->max_open;
    out->open_now = atomic_load_explicit(&f->open_now, memory_order_relaxed);
    out->peak_open = atomic_load_explicit(&f->peak_open, memory_order_relaxed);
    out->opens = atomic_load_explicit(&f->opens, memory_order_relaxed);
    out->reopens = atomic_load_explicit(&f->reopens, memory_order_relaxed);
    out->evictions = atomic_load_explicit(&f->evictions, memory_order_relaxed);
    out->over_budget = atomic_load_explicit(&f->over_budget, memory_order_relaxed);
}

/* ---- under mu --------------------------------------------------------------------- */

/* Adds n (1 or -1) to a counter only mu's holder writes. */
static void bump(_Atomic uint64_t *c, uint64_t n)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

static void count_open(kv_sst_files *f)
{
    bump(&f->open_now, 1);
    uint64_t now = atomic_load_explicit(&f->open_now, memory_order_relaxed);
    if (now > atomic_load_explicit(&f->peak_open, memory_order_relaxed))
        atomic_store_explicit(&f->peak_open, now, memory_order_relaxed);
}

static void ring_insert(kv_sst_files *f, kv_sst_reader *r)
{
    if (!f->hand) {
        r->ring_prev = r->ring_next = r;
        f->hand = r;
    } else { /* just behind the hand: the last the hand reaches */
        r->ring_next = f->hand;
        r->ring_prev = f->hand->ring_prev;
        r->ring_prev->ring_next = r;
        f->hand->ring_prev = r;
    }
    f->nring++;
}

static void ring_remove(kv_sst_files *f, kv_sst_reader *r)
{
    if (f->hand == r)
        f->hand = r->ring_next == r ? NULL : r->ring_next;
    r->ring_prev->ring_next = r->ring_next;
    r->ring_next->ring_prev = r->ring_prev;
    r->ring_prev = r->ring_next = NULL;
    f->nring--;
}

/* 1 when some thread holds a pin on r's file. */
static int pinned(kv_sst_reader *r)
{
    uint64_t sum = 0;
    for (size_t i = 0; i <= KV_TALLY_STRIPES; i++)
        sum += atomic_load_explicit(&r->tally[i].pins, memory_order_seq_cst);
    return sum != 0;
}

/* Closes r's file unless it is pinned; 1 when it did. */
static int try_close(kv_sst_files *f, kv_sst_reader *r)
{
    atomic_store_explicit(&r->fstate, KV_SST_FILE_CLOSING, memory_order_seq_cst);
    if (pinned(r)) {
        atomic_store_explicit(&r->fstate, KV_SST_FILE_OPEN, memory_order_seq_cst);
        return 0;
    }
    ring_remove(f, r);
    kv_file_close(r->file); /* a read-only descriptor: nothing is lost if close fails */
    r->file = NULL;
    r->map = NULL;
    atomic_store_explicit(&r->fstate, KV_SST_FILE_CLOSED, memory_order_release);
    bump(&f->open_now, (uint64_t)-1);
    bump(&f->evictions, 1);
    return 1;
}

/* Closes one unpinned file: the first the hand reaches whose referenced
 * bit is clear (the hand clears the bits it passes), else, on the second
 * round, the first unpinned one. 0 when every open file is pinned. */
static int evict_one(kv_sst_files *f)
{
    size_t n = f->nring;
    for (size_t step = 0; step < 2 * n && f->hand; step++) {
        kv_sst_reader *r = f->hand;
        f->hand = r->ring_next;
        if (step < n && atomic_load_explicit(&r->referenced, memory_order_relaxed)) {
            atomic_store_explicit(&r->referenced, 0, memory_order_relaxed);
            continue;
        }
        if (try_close(f, r))
            return 1;
    }
    return 0;
}

/* Closes files until one more fits in the budget, or none can close. */
static void make_room(kv_sst_files *f)
{
    while (atomic_load_explicit(&f->open_now, memory_order_relaxed) >= f->max_open &&
           evict_one(f))
        ;
    if (atomic_load_explicit(&f->open_now, memory_order_relaxed) >= f->max_open)
        bump(&f->over_budget, 1);
}

/* Opens r's file again (it was closed by the evictor). */
static int reopen(kv_sst_files *f, kv_sst_reader *r)
{
    make_room(f);
    kv_file *file;
    /* As it was first opened: with O_DIRECT when that was granted. Were it
     * refused now, the file would be read through the page cache, and its
     * reads not counted as device reads (kv_file_read_alloc says). */
    int refused = 0;
    int rc = r->direct == KV_SST_DIRECT_ON ? kv_file_open_direct(r->path, &refused, &file)
                                           : kv_file_open(r->path, &file);
    if (rc != KV_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s", kv_error_text());
        /* The file was there when the table was opened: gone now is damage. */
        if (rc == KV_NOTFOUND)
            rc = KV_ECORRUPT;
        return kv_sst_fail(rc, r->path, 0, "cannot open the table's file again: %s", why);
    }
    uint64_t size = 0;
    if ((rc = kv_file_size(file, &size)) != KV_OK || size != r->size) {
        kv_file_close(file);
        if (rc != KV_OK)
            return kv_sst_fail(rc, r->path, 0, "cannot stat it, opened again");
        return kv_sst_fail(KV_ECORRUPT, r->path, 0,
                           "%llu bytes when opened again, %llu when first opened",
                           (unsigned long long)size, (unsigned long long)r->size);
    }
    const uint8_t *map = NULL;
    if (!r->seen || r->direct == KV_SST_DIRECT_ON || kv_file_map(file, r->size, &map) != KV_OK)
        map = NULL; /* read with pread, as when a first open cannot map (or O_DIRECT) */
    r->file = file;
    r->map = map;
    atomic_store_explicit(&r->referenced, 1, memory_order_relaxed);
    ring_insert(f, r);
    count_open(f);
    bump(&f->opens, 1);
    bump(&f->reopens, 1);
    /* Publishes file and map to the readers that see OPEN. */
    atomic_store_explicit(&r->fstate, KV_SST_FILE_OPEN, memory_order_seq_cst);
    return KV_OK;
}

/* ---- reader.h -------------------------------------------------------------------- */

int kv_sst_pin_slow(kv_sst_reader *r)
{
    kv_sst_files *f = r->files;
    pthread_mutex_lock(&f->mu);
    /* No evictor runs while mu is held: the state is OPEN or CLOSED. */
    if (atomic_load_explicit(&r->fstate, memory_order_relaxed) == KV_SST_FILE_CLOSED) {
        int rc = reopen(f, r);
        if (rc != KV_OK) {
            pthread_mutex_unlock(&f->mu);
            return rc;
        }
    }
    atomic_fetch_add_explicit(&r->tally[kv_tally_slot()].pins, 1, memory_order_seq_cst);
    atomic_store_explicit(&r->referenced, 1, memory_order_relaxed);
    pthread_mutex_unlock(&f->mu);
    return 1;
}

void kv_sst_files_reserve(kv_sst_files *f)
{
    pthread_mutex_lock(&f->mu);
    make_room(f);
    count_open(f);
    pthread_mutex_unlock(&f->mu);
}

void kv_sst_files_unreserve(kv_sst_files *f)
{
    pthread_mutex_lock(&f->mu);
    bump(&f->open_now, (uint64_t)-1);
    pthread_mutex_unlock(&f->mu);
}

void kv_sst_files_add(kv_sst_files *f, kv_sst_reader *r)
{
    pthread_mutex_lock(&f->mu);
    r->files = f;
    atomic_store_explicit(&r->referenced, 1, memory_order_relaxed);
    atomic_store_explicit(&r->fstate, KV_SST_FILE_OPEN, memory_order_relaxed);
    ring_insert(f, r); /* the room reserved for it is its place in open_now */
    bump(&f->opens, 1);
    pthread_mutex_unlock(&f->mu);
}

void kv_sst_files_remove(kv_sst_reader *r)
{
    kv_sst_files *f = r->files;
    pthread_mutex_lock(&f->mu);
    if (atomic_load_explicit(&r->fstate, memory_order_relaxed) == KV_SST_FILE_OPEN) {
        ring_remove(f, r);
        kv_file_close(r->file);
        bump(&f->open_now, (uint64_t)-1);
    }
    r->file = NULL;
    r->map = NULL;
    atomic_store_explicit(&r->fstate, KV_SST_FILE_CLOSED, memory_order_relaxed);
    pthread_mutex_unlock(&f->mu);
}
