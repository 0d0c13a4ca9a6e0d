/* bloom_shared.c - what lets many threads add to one filter at once: the
 * lone-writer protocol (region ownership and its hand-over by membarrier),
 * the regions and lock table of a filter, and kv_bloom_partition. The
 * per-key halves (the owner's add, the block locks) are static inline in
 * bloom_impl.h. */
#if defined(__linux__) && !defined(_DEFAULT_SOURCE)
#define _DEFAULT_SOURCE /* syscall */
#endif
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#if defined(__linux__)
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "bloom_impl.h"

/* ---- lone writers ----------------------------------------------------------- */

/* Most filters are filled by one thread, yet kv_bloom_add must stay safe
 * while several add at once, and what makes it safe (the block's lock, or
 * an atomic OR per word) is a locked instruction per add, many times the
 * cost of a plain store and a full barrier, so the next add's cache miss
 * cannot overlap this one's. Hence a filter is cut into regions (a classic
 * filter is one; a blocked one up to MAX_REGIONS runs of whole blocks),
 * and the first thread to add to a region becomes its owner and adds there
 * with plain loads and stores while no other thread has added there. The first add of another thread
 * to the region revokes the ownership for good; from then on every add to
 * the region, the owner's too, takes the shared path. Threads that each add
 * the keys of their own part of the filter (kv_bloom_partition) thus all
 * add with plain stores, and touch no line another one writes.
 *
 * The hand-over is Dekker's: the owner announces an add (busy = 1), then
 * checks that it still owns the region; the revoker marks the region
 * REVOKING, then waits until no add is announced. Each side's load must see
 * the other's store, which takes a full barrier on both sides. On the
 * owner's side it would cost as much as the lock, so the revoker pays for
 * both: membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) returns only after
 * every running thread of the process has executed a full barrier (a thread
 * not running passes one when it is switched in). After that, either the
 * owner's announcement is visible, and the revoker waits for busy = 0, which
 * the owner stores after its plain stores (release); or the owner's check
 * comes after the barrier and sees REVOKING. That barrier costs a few
 * microseconds, paid at most once per region. A process that cannot use
 * membarrier (not Linux, an old kernel, a sandbox that forbids it) gives no
 * region an owner. */

KV_TALLY_TLS char kv_bloom_self_token;

_Atomic uint64_t kv_bloom_no_locks;

/* Whether this process may use MEMBARRIER_CMD_PRIVATE_EXPEDITED; the first
 * call registers for it. */
static bool membarrier_ready(void)
{
#if defined(__linux__) && defined(SYS_membarrier)
    static _Atomic int state; /* 0: not asked yet, 1: ready, -1: unavailable */
    int st = atomic_load_explicit(&state, memory_order_acquire);
    if (st == 0) {
        long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
        bool ok = cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
                  syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
        st = ok ? 1 : -1;
        atomic_store_explicit(&state, st, memory_order_release);
    }
    return st > 0;
#else
    return false;
#endif
}

/* A full barrier on every thread of the process (membarrier_ready() was
 * 1). Should the registered command fail (EPERM: a process that was never
 * registered, such as a child of fork() on a kernel that does not carry the
 * registration over), it registers again; else the global command (every
 * thread of every process, slower) serves. */
static void barrier_all_threads(void)
{
#if defined(__linux__) && defined(SYS_membarrier)
    for (;;) {
        if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
            return;
        if (errno == EPERM &&
            syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0)
            continue;
        if (syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) == 0)
            return;
        sched_yield();
    }
#endif
}

/* Settles who may add to a region, for a thread that found it not its own
 * (its owner word was o): claims a region nobody has added to, revokes
 * another thread's ownership or waits for a revocation under way. Returns
 * this thread's token when it now owns the region, else OWNER_SHARED. */
KV_COLD uintptr_t kv_bloom_settle_owner(struct region *r, uintptr_t o)
{
    uintptr_t me = (uintptr_t)&kv_bloom_self_token;
    for (unsigned spins = 0;; spins++) {
        if (o == OWNER_SHARED || o == me)
            return o;
        if (o == OWNER_NONE) {
            uintptr_t want = membarrier_ready() ? me : OWNER_SHARED;
            if (atomic_compare_exchange_strong_explicit(&r->owner, &o, want, memory_order_acq_rel,
                                                        memory_order_acquire))
                return want;
        } else if (o == OWNER_REVOKING) {
            backoff(spins);
            o = atomic_load_explicit(&r->owner, memory_order_acquire);
        } else if (atomic_compare_exchange_strong_explicit(&r->owner, &o, OWNER_REVOKING,
                                                           memory_order_acq_rel,
                                                           memory_order_acquire)) {
            barrier_all_threads();
            for (unsigned w = 0; atomic_load_explicit(&r->busy, memory_order_acquire); w++)
                backoff(w);
            atomic_store_explicit(&r->owner, OWNER_SHARED, memory_order_release);
            return OWNER_SHARED;
        }
    }
}

unsigned kv_bloom_partition(const kv_bloom *f, uint64_t h, unsigned parts)
{
    if (!f || parts <= 1)
        return 0;
    if (f->nregions == 1) /* nothing to split: parts only share the keys out */
        return (unsigned)kv_fastrange64(h, parts);
    /* A region goes to the part its middle block would, so each boundary
     * between parts lies within half a region of where an even split puts
     * it, and a part within a region (1/33 of the filter at most) of its
     * share. nblocks <= 2^31, so the product fits. */
    uint64_t first = (uint64_t)(region_of(f, h) - f->regions) << f->region_shift;
    uint64_t part = (first + ((uint64_t)1 << f->region_shift >> 1)) * parts / f->nblocks;
    return part < parts ? (unsigned)part : parts - 1; /* the last region may be short */
}


int kv_bloom_shared_init(kv_bloom *f)
{
    uint64_t nlocks = 1;
    while (nlocks < f->nblocks && nlocks < MAX_LOCKS)
        nlocks *= 2;
    f->lock_mask = nlocks - 1;
    atomic_init(&f->locks, NULL);
    /* Regions of 2^region_shift whole blocks, as few as that makes at most
     * MAX_REGIONS of them: from 33 to 64 once there are 33 blocks. */
    while (f->nblocks && ((f->nblocks - 1) >> f->region_shift) + 1 > MAX_REGIONS)
        f->region_shift++;
    f->nregions = f->nblocks ? (unsigned)(((f->nblocks - 1) >> f->region_shift) + 1) : 1;
    f->regions = aligned_alloc(CACHE_LINE, f->nregions * sizeof *f->regions);
    if (!f->regions)
        return KV_ENOMEM;
    for (unsigned i = 0; i < f->nregions; i++) {
        atomic_init(&f->regions[i].owner, OWNER_NONE);
        atomic_init(&f->regions[i].busy, 0);
        atomic_init(&f->regions[i].adds, 0);
    }
    return KV_OK;
}

void kv_bloom_shared_free(kv_bloom *f)
{
    _Atomic uint64_t *locks = atomic_load_explicit(&f->locks, memory_order_relaxed);
    if (locks != &kv_bloom_no_locks)
        free((void *)locks);
    free(f->regions);
}
