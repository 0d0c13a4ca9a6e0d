/* cache.c - the block cache: uncompressed blocks keyed by (table, offset),
 * in a CLOCK cache whose hits take no lock. A table's paged index or
 * filter (table_memory_budget, paged.c) is cached the same way, under the
 * offset of its block, as an object that its own function frees
 * (kv_cache_insert_obj).
 *
 * Layout. The cache is SHARDS shards, each with an equal part of the
 * capacity, a lock, a clock hand and a fixed open-addressed table of slots
 * (double hashing: a key's probe sequence is home, home + step, ...). A
 * slot is 64 bytes, one cache line, so that two hot blocks never share a
 * line. Its atomic `word` holds:
 *
 *   bits  0..31  refs: handles held on the slot (plus a lookup's brief,
 *                speculative one: see below)
 *   bits 32..33  state: EMPTY, BUSY (being filled or emptied under the
 *                shard's lock), VISIBLE (holds a block lookups may take),
 *                PRIVATE (a handle outside every table)
 *   bit  34      clock: used since the clock hand last passed
 *
 * beside the key (id, offset: atomics, read by lookups before they hold
 * the slot), the block (data, size: read only while holding it) and
 * `displaced`, the number of cached entries whose probe sequence passed
 * this slot on their way to a later one. A lookup stops at the first slot
 * that neither holds its key nor was passed by anyone: its key, were it
 * cached, would have passed that slot.
 *
 * A hit (kv_cache_lookup) takes no lock and writes no line but the slot's:
 * it probes with plain loads, and on a slot whose key matches adds one to
 * the word (acquire); if the state it added to was VISIBLE and the key
 * still matches, the block is the caller's until kv_cache_release
 * subtracts the one again (release). Else it subtracts at once and goes
 * on. The clock bit is set only when it is clear, so a hot block's hits
 * do not write it again. Hits and misses are counted in per-thread
 * stripes (util/tally.h).
 *
 * Inserts and evictions take the shard's lock, and are the only writers of
 * a slot's key, block and `displaced`, and of any state change. Eviction
 * is CLOCK: the hand clears the clock bits it passes, and takes a VISIBLE
 * slot whose bit is clear and whose refs are 0 by one compare-and-swap
 * from exactly (VISIBLE, 0 refs, clock clear) to BUSY. That swap fails if
 * a lookup added to the word meanwhile, so a slot is never emptied while
 * a handle is held on it, and a block handed out stays valid until
 * released. Once BUSY, a lookup's add sees BUSY and is taken back: the
 * lock holder changes the state by compare-and-swap loops that keep the
 * refs bits, so such brief adds are never lost.
 *
 * Memory ordering. The inserter writes key and block, then makes the slot
 * VISIBLE with a release; a lookup's acquire add reads that (or a later
 * value of the word, in its release sequence), so it sees the block
 * written. Every holder's last read of the block comes before its release
 * subtract, which the evictor's acquire swap reads, so the block is freed
 * after the last read.
 *
 * Capacity. A shard's charge (bytes of its cached blocks) never passes
 * its share of the capacity, and its count never passes 3/4 of its slots.
 * An insert evicts until both fit; when it cannot (every block the hand
 * could take is held), the block is handed out privately, not cached, and
 * freed on release: the cache then holds no more than its capacity, and
 * the blocks outside it are exactly those in use. A table of N slots
 * costs 64N bytes, about 1/32 of the capacity for its N: one slot per
 * 2 KiB of capacity (at least 16 per shard). With blocks much smaller than
 * 2 KiB the count, not the bytes, bounds what a shard holds.
 *
 * A key inserted twice (two readers missed the same block at once) is
 * cached once: the second insert gets a handle on the first's block and
 * frees its own copy. */
#include "cache.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "util/tally.h"

#define SHARDS 16
#define SHARD_BITS 4
#define MIN_SLOTS 16                 /* per shard */
#define BYTES_PER_SLOT ((size_t)2048) /* capacity per slot of the table */

#define REFS_MASK ((uint64_t)0xFFFFFFFFu)
#define STATE_SHIFT 32
#define STATE_MASK ((uint64_t)3 << STATE_SHIFT)
#define CLOCK_BIT ((uint64_t)1 << 34)
enum { S_EMPTY = 0, S_BUSY = 1, S_VISIBLE = 2, S_PRIVATE = 3 };
#define STATE(w) ((unsigned)(((w)&STATE_MASK) >> STATE_SHIFT))
#define STATE_BITS(s) ((uint64_t)(s) << STATE_SHIFT)

struct kv_cache_entry {
    _Alignas(64) _Atomic uint64_t word; /* refs, state, clock (above) */
    _Atomic uint64_t id, offset;        /* the key; written only under the shard's lock */
    uint8_t *data;                      /* the block: read only by holders */
    size_t size;
    void (*free_fn)(void *);    /* frees data: NULL, free (kv_cache_insert_obj) */
    _Atomic uint32_t displaced; /* [lock] written; read by lookups */
};

struct shard {
    _Alignas(64) pthread_mutex_t lock;
    struct kv_cache_entry *slots; /* mask + 1 of them, fixed */
    size_t mask;
    size_t limit;       /* most entries: 3/4 of the slots */
    size_t capacity;    /* bytes */
    size_t count;       /* [lock] cached entries */
    size_t hand;        /* [lock] the clock's next slot */
    /* Written under the lock; read without it by kv_sst_cache_stats_get. */
    _Atomic uint64_t charge, inserts, evictions;
};

/* Hits and misses, one stripe per thread (tally.h). */
struct cache_tally {
    _Alignas(64) _Atomic uint64_t hits;
    _Atomic uint64_t misses;
};

struct kv_sst_cache {
    size_t capacity;
    struct cache_tally *tally; /* KV_TALLY_STRIPES + 1 stripes */
    struct shard shards[SHARDS];
};

static uint64_t mix(uint64_t id, uint64_t off)
{
    uint64_t x = id * 0x9E3779B97F4A7C15ull ^ off;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    return x ^ (x >> 29);
}

/* A key's shard, home slot and probe step (odd, so that the sequence
 * visits every slot of a power-of-two table). */
/* Frees a slot's block, or object (kv_cache_insert_obj). */
static void drop_data(void (*free_fn)(void *), void *data)
{
    if (free_fn)
        free_fn(data);
    else
        free(data);
}

static struct shard *shard_of(kv_sst_cache *c, uint64_t h)
{
    return &c->shards[h & (SHARDS - 1)];
}

static size_t home_of(const struct shard *s, uint64_t h)
{
    return (size_t)(h >> SHARD_BITS) & s->mask;
}

static size_t step_of(const struct shard *s, uint64_t h)
{
    return ((size_t)(h >> 40) | 1) & s->mask;
}

static void free_shards(kv_sst_cache *c, int n)
{
    for (int i = 0; i < n; i++) {
        free(c->shards[i].slots);
        pthread_mutex_destroy(&c->shards[i].lock);
    }
    free(c->tally);
    free(c);
}

int kv_sst_cache_new(size_t capacity, kv_sst_cache **out)
{
    if (!out)
        return KV_EINVAL;
    *out = NULL;
    kv_sst_cache *c = calloc(1, sizeof *c);
    if (!c)
        return KV_ENOMEM;
    c->capacity = capacity;
    c->tally = kv_tally_new(sizeof *c->tally);
    if (!c->tally) {
        free(c);
        return KV_ENOMEM;
    }
    size_t per = capacity / SHARDS, want = per / BYTES_PER_SLOT, n = MIN_SLOTS;
    while (n < want && n < ((size_t)1 << 30))
        n <<= 1;
    for (int i = 0; i < SHARDS; i++) {
        struct shard *s = &c->shards[i];
        if (pthread_mutex_init(&s->lock, NULL) != 0) {
            free_shards(c, i);
            return KV_ENOMEM;
        }
        s->capacity = per;
        if (per == 0)
            continue; /* caches nothing: no table */
        s->slots = aligned_alloc(64, n * sizeof *s->slots);
        if (!s->slots) {
            free_shards(c, i + 1);
            return KV_ENOMEM;
        }
        memset(s->slots, 0, n * sizeof *s->slots);
        s->mask = n - 1;
        s->limit = n / 4 * 3;
    }
    *out = c;
    return KV_OK;
}

void kv_sst_cache_free(kv_sst_cache *c)
{
    if (!c)
        return;
    for (int i = 0; i < SHARDS; i++) {
        struct shard *s = &c->shards[i];
        for (size_t j = 0; s->slots && j <= s->mask; j++)
            if (STATE(atomic_load_explicit(&s->slots[j].word, memory_order_acquire)) ==
                S_VISIBLE)
                drop_data(s->slots[j].free_fn, s->slots[j].data); /* no handle is left */
    }
    free_shards(c, SHARDS);
}

void kv_sst_cache_stats_get(const kv_sst_cache *c, kv_sst_cache_stats *out)
{
    if (!c || !out)
        return;
    memset(out, 0, sizeof *out);
    out->hits = kv_tally_sum(&c->tally[0].hits, sizeof *c->tally);
    out->misses = kv_tally_sum(&c->tally[0].misses, sizeof *c->tally);
    out->capacity = c->capacity;
    for (int i = 0; i < SHARDS; i++) {
        const struct shard *s = &c->shards[i];
        out->inserts += atomic_load_explicit(&s->inserts, memory_order_relaxed);
        out->evictions += atomic_load_explicit(&s->evictions, memory_order_relaxed);
        out->charge += atomic_load_explicit(&s->charge, memory_order_relaxed);
    }
}

size_t kv_sst_cache_shard_bytes(const kv_sst_cache *c)
{
    return c && c->capacity >= SHARDS ? c->capacity / SHARDS : 0;
}

static void count(struct kv_sst_cache *c, int hit)
{
    unsigned t = kv_tally_slot();
    kv_tally_add(hit ? &c->tally[t].hits : &c->tally[t].misses, t, 1);
}

static int key_is(struct kv_cache_entry *e, uint64_t id, uint64_t off)
{
    return atomic_load_explicit(&e->id, memory_order_relaxed) == id &&
           atomic_load_explicit(&e->offset, memory_order_relaxed) == off;
}

/* Takes a handle on e if it is VISIBLE and holds (id, off): 1 when it did. */
static int try_hold(struct kv_cache_entry *e, uint64_t id, uint64_t off)
{
    uint64_t old = atomic_fetch_add_explicit(&e->word, 1, memory_order_acquire);
    if (STATE(old) == S_VISIBLE && key_is(e, id, off)) {
        if (!(old & CLOCK_BIT))
            atomic_fetch_or_explicit(&e->word, CLOCK_BIT, memory_order_relaxed);
        return 1;
    }
    atomic_fetch_sub_explicit(&e->word, 1, memory_order_release);
    return 0;
}

/* The slot holding (id, off) in s, held, or NULL. Without the lock a slot
 * may change under the probe: then this may miss a block that is cached
 * (harmless: the caller reads it and inserts it, and the insert finds it),
 * but never returns another key's block. */
static struct kv_cache_entry *find(struct shard *s, uint64_t h, uint64_t id, uint64_t off)
{
    size_t i = home_of(s, h), step = step_of(s, h);
    for (size_t n = 0; n <= s->mask; n++, i = (i + step) & s->mask) {
        struct kv_cache_entry *e = &s->slots[i];
        uint64_t w = atomic_load_explicit(&e->word, memory_order_relaxed);
        if (STATE(w) == S_VISIBLE && key_is(e, id, off) && try_hold(e, id, off))
            return e;
        if (atomic_load_explicit(&e->displaced, memory_order_relaxed) == 0)
            break; /* no cached key passed here: (id, off) is not further on */
    }
    return NULL;
}

kv_cache_handle *kv_cache_lookup(kv_sst_cache *c, uint64_t id, uint64_t offset)
{
    if (!c)
        return NULL;
    struct kv_cache_entry *e = NULL;
    if (c->capacity >= SHARDS) {
        uint64_t h = mix(id, offset);
        struct shard *s = shard_of(c, h);
        if (s->slots)
            e = find(s, h, id, offset);
    }
    count(c, e != NULL);
    return e;
}

/* ---- under a shard's lock ------------------------------------------------------------ */

/* Sets the state bits of a slot this thread owns (BUSY, or just made so),
 * keeping the refs of lookups that added to it meanwhile; adds `add` refs
 * and the clock bit `clock`. `order` orders this thread's writes to the
 * slot before the change. */
static void set_state(struct kv_cache_entry *e, unsigned state, uint64_t add, uint64_t clock,
                      memory_order order)
{
    uint64_t w = atomic_load_explicit(&e->word, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&e->word, &w,
                                                  ((w & REFS_MASK) + add) | STATE_BITS(state) |
                                                      clock,
                                                  order, memory_order_relaxed))
        ;
}

static void bump(_Atomic uint64_t *v, int64_t n)
{
    atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + (uint64_t)n,
                          memory_order_relaxed);
}

/* Empties slot `pos` (BUSY, owned by this thread): the displaced counts of
 * the slots its probe passed go down, its block is freed. */
static void remove_slot(struct shard *s, size_t pos)
{
    struct kv_cache_entry *e = &s->slots[pos];
    uint64_t h = mix(atomic_load_explicit(&e->id, memory_order_relaxed),
                     atomic_load_explicit(&e->offset, memory_order_relaxed));
    size_t step = step_of(s, h);
    for (size_t i = home_of(s, h); i != pos; i = (i + step) & s->mask) {
        _Atomic uint32_t *d = &s->slots[i].displaced;
        atomic_store_explicit(d, atomic_load_explicit(d, memory_order_relaxed) - 1,
                              memory_order_relaxed);
    }
    drop_data(e->free_fn, e->data);
    bump(&s->charge, -(int64_t)e->size);
    e->data = NULL;
    e->free_fn = NULL;
    e->size = 0;
    s->count--;
    bump(&s->evictions, 1);
    set_state(e, S_EMPTY, 0, 0, memory_order_release);
}

/* Evicts one block: the first VISIBLE slot the hand reaches whose clock
 * bit is clear and that no handle holds (the hand clears the bits it
 * passes). Two turns of the table at most; 0 when every block is held. */
static int evict_one(struct shard *s)
{
    for (size_t n = 0; n < 2 * (s->mask + 1); n++) {
        size_t pos = s->hand;
        struct kv_cache_entry *e = &s->slots[pos];
        s->hand = (pos + 1) & s->mask;
        uint64_t w = atomic_load_explicit(&e->word, memory_order_relaxed);
        if (STATE(w) != S_VISIBLE)
            continue;
        if (w & CLOCK_BIT) {
            atomic_fetch_and_explicit(&e->word, ~CLOCK_BIT, memory_order_relaxed);
            continue;
        }
        if ((w & REFS_MASK) != 0)
            continue;
        /* Only from (VISIBLE, no refs, clock clear): a lookup's add in between
         * makes the swap fail, and the block stays. */
        if (!atomic_compare_exchange_strong_explicit(&e->word, &w, STATE_BITS(S_BUSY),
                                                     memory_order_acquire, memory_order_relaxed))
            continue;
        remove_slot(s, pos);
        return 1;
    }
    return 0;
}

/* A handle outside every table: the block is freed on release. NULL when
 * out of memory (data freed). */
static struct kv_cache_entry *private_handle(uint64_t id, uint64_t offset, uint8_t *data,
                                             size_t size, void (*free_fn)(void *))
{
    struct kv_cache_entry *e = aligned_alloc(64, sizeof *e);
    if (!e) {
        drop_data(free_fn, data);
        return NULL;
    }
    memset(e, 0, sizeof *e);
    atomic_init(&e->word, STATE_BITS(S_PRIVATE) | 1);
    atomic_init(&e->id, id);
    atomic_init(&e->offset, offset);
    e->data = data;
    e->size = size;
    e->free_fn = free_fn;
    return e;
}

kv_cache_handle *kv_cache_insert(kv_sst_cache *c, uint64_t id, uint64_t offset, uint8_t *data,
                                 size_t size)
{
    return kv_cache_insert_obj(c, id, offset, data, size, NULL);
}

kv_cache_handle *kv_cache_insert_obj(kv_sst_cache *c, uint64_t id, uint64_t offset, void *obj,
                                     size_t size, void (*free_fn)(void *))
{
    uint8_t *data = obj;
    if (!c || c->capacity < SHARDS || size > c->capacity / SHARDS)
        return private_handle(id, offset, data, size, free_fn); /* does not fit */
    uint64_t h = mix(id, offset);
    struct shard *s = shard_of(c, h);
    pthread_mutex_lock(&s->lock);
    /* Another reader inserted it meanwhile: share its block. Under the
     * lock no slot changes but by this thread, so find cannot miss it. */
    struct kv_cache_entry *e = find(s, h, id, offset);
    if (e) {
        pthread_mutex_unlock(&s->lock);
        drop_data(free_fn, data);
        return e;
    }
    while (atomic_load_explicit(&s->charge, memory_order_relaxed) + size > s->capacity ||
           s->count >= s->limit)
        if (!evict_one(s)) { /* every block is held: this one stays out */
            pthread_mutex_unlock(&s->lock);
            return private_handle(id, offset, data, size, free_fn);
        }
    /* The first empty slot of the key's probe sequence (count < limit <
     * slots: there is one); each slot passed counts it as displaced. */
    size_t i = home_of(s, h), step = step_of(s, h);
    while (STATE(atomic_load_explicit(&s->slots[i].word, memory_order_relaxed)) != S_EMPTY) {
        _Atomic uint32_t *d = &s->slots[i].displaced;
        atomic_store_explicit(d, atomic_load_explicit(d, memory_order_relaxed) + 1,
                              memory_order_relaxed);
        i = (i + step) & s->mask;
    }
    e = &s->slots[i];
    atomic_store_explicit(&e->id, id, memory_order_relaxed);
    atomic_store_explicit(&e->offset, offset, memory_order_relaxed);
    e->data = data;
    e->size = size;
    e->free_fn = free_fn;
    /* Published: the caller's handle, and recently used. */
    set_state(e, S_VISIBLE, 1, CLOCK_BIT, memory_order_release);
    s->count++;
    bump(&s->charge, (int64_t)size);
    bump(&s->inserts, 1);
    pthread_mutex_unlock(&s->lock);
    return e;
}

const uint8_t *kv_cache_data(const kv_cache_handle *h, size_t *size)
{
    *size = h->size;
    return h->data;
}

void kv_cache_release(kv_sst_cache *c, kv_cache_handle *h)
{
    (void)c;
    if (!h)
        return;
    /* A private handle has one holder, and its state never changes. */
    if (STATE(atomic_load_explicit(&h->word, memory_order_relaxed)) == S_PRIVATE) {
        drop_data(h->free_fn, h->data);
        free(h);
        return;
    }
    /* Orders this holder's reads of the block before an evictor's swap. */
    atomic_fetch_sub_explicit(&h->word, 1, memory_order_release);
}
