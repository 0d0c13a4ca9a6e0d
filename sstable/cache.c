/* cache.c - a sharded LRU of uncompressed blocks, keyed by (table, offset).
 *
 * Each of SHARDS shards has its own lock, hash table and LRU list, and an
 * equal part of the capacity. An entry holds one reference for the cache
 * while it is cached, and one per handle given out; eviction takes the
 * least recently used entries that no handle holds. */
#include "cache.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define SHARDS 16

struct kv_cache_entry {
    uint64_t id, offset;
    uint8_t *data;
    size_t size;
    unsigned refs;   /* guarded by the shard lock (private entries: owner only) */
    int cached;      /* in the shard's table and list */
    struct kv_cache_entry *hnext, *prev, *next;
};

struct shard {
    pthread_mutex_t lock;
    struct kv_cache_entry **table;
    size_t buckets, count;
    struct kv_cache_entry lru; /* list head: lru.next is the most recent */
    size_t charge, capacity;
};

struct kv_sst_cache {
    struct shard shards[SHARDS];
    size_t capacity;
    _Atomic uint64_t hits, misses, inserts, evictions;
};

static uint64_t mix(uint64_t id, uint64_t off)
{
    uint64_t x = id * 0x9E3779B97F4A7C15ull ^ off;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    return x ^ (x >> 29);
}

int kv_sst_cache_new(size_t capacity, kv_sst_cache **out)
{
    if (!out)
        return KV_EINVAL;
    kv_sst_cache *c = calloc(1, sizeof *c);
    if (!c)
        return KV_ENOMEM;
    c->capacity = capacity;
    for (int i = 0; i < SHARDS; i++) {
        struct shard *s = &c->shards[i];
        pthread_mutex_init(&s->lock, NULL);
        s->buckets = 64;
        s->table = calloc(s->buckets, sizeof *s->table);
        s->lru.next = s->lru.prev = &s->lru;
        s->capacity = capacity / SHARDS;
        if (!s->table) {
            for (int j = 0; j <= i; j++) {
                free(c->shards[j].table);
                pthread_mutex_destroy(&c->shards[j].lock);
            }
            free(c);
            return KV_ENOMEM;
        }
    }
    *out = c;
    return KV_OK;
}

static void entry_free(struct kv_cache_entry *e)
{
    free(e->data);
    free(e);
}

void kv_sst_cache_free(kv_sst_cache *c)
{
    if (!c)
        return;
    for (int i = 0; i < SHARDS; i++) {
        struct shard *s = &c->shards[i];
        for (struct kv_cache_entry *e = s->lru.next, *n; e != &s->lru; e = n) {
            n = e->next;
            entry_free(e); /* readers are closed: no handle is left */
        }
        free(s->table);
        pthread_mutex_destroy(&s->lock);
    }
    free(c);
}

void kv_sst_cache_stats_get(const kv_sst_cache *c, kv_sst_cache_stats *out)
{
    if (!c || !out)
        return;
    kv_sst_cache *m = (kv_sst_cache *)c;
    out->hits = atomic_load(&m->hits);
    out->misses = atomic_load(&m->misses);
    out->inserts = atomic_load(&m->inserts);
    out->evictions = atomic_load(&m->evictions);
    out->capacity = c->capacity;
    out->charge = 0;
    for (int i = 0; i < SHARDS; i++) {
        pthread_mutex_lock(&m->shards[i].lock);
        out->charge += m->shards[i].charge;
        pthread_mutex_unlock(&m->shards[i].lock);
    }
}

static struct shard *shard_of(kv_sst_cache *c, uint64_t h)
{
    return &c->shards[h % SHARDS];
}

static struct kv_cache_entry **slot(struct shard *s, uint64_t h, uint64_t id, uint64_t off)
{
    struct kv_cache_entry **p = &s->table[(h / SHARDS) & (s->buckets - 1)];
    while (*p && ((*p)->id != id || (*p)->offset != off))
        p = &(*p)->hnext;
    return p;
}

static void lru_unlink(struct kv_cache_entry *e)
{
    e->prev->next = e->next;
    e->next->prev = e->prev;
}

static void lru_push_front(struct shard *s, struct kv_cache_entry *e)
{
    e->next = s->lru.next;
    e->prev = &s->lru;
    s->lru.next->prev = e;
    s->lru.next = e;
}

/* Drops a reference; frees the entry when none is left. Lock held. */
static void unref(struct kv_cache_entry *e)
{
    if (--e->refs == 0)
        entry_free(e);
}

/* Removes a cached entry from table and list, dropping the cache's ref. */
static void uncache(kv_sst_cache *c, struct shard *s, struct kv_cache_entry *e)
{
    uint64_t h = mix(e->id, e->offset);
    struct kv_cache_entry **p = slot(s, h, e->id, e->offset);
    *p = e->hnext;
    lru_unlink(e);
    e->cached = 0;
    s->count--;
    s->charge -= e->size;
    atomic_fetch_add(&c->evictions, 1);
    unref(e);
}

kv_cache_handle *kv_cache_lookup(kv_sst_cache *c, uint64_t id, uint64_t offset)
{
    if (!c)
        return NULL;
    uint64_t h = mix(id, offset);
    struct shard *s = shard_of(c, h);
    pthread_mutex_lock(&s->lock);
    struct kv_cache_entry *e = *slot(s, h, id, offset);
    if (e) {
        e->refs++;
        lru_unlink(e);
        lru_push_front(s, e);
    }
    pthread_mutex_unlock(&s->lock);
    atomic_fetch_add(e ? &c->hits : &c->misses, 1);
    return e;
}

static void grow_table(struct shard *s)
{
    size_t nb = s->buckets * 2;
    struct kv_cache_entry **t = calloc(nb, sizeof *t);
    if (!t)
        return; /* longer chains, still correct */
    for (size_t i = 0; i < s->buckets; i++)
        for (struct kv_cache_entry *e = s->table[i], *n; e; e = n) {
            n = e->hnext;
            struct kv_cache_entry **p = &t[(mix(e->id, e->offset) / SHARDS) & (nb - 1)];
            e->hnext = *p;
            *p = e;
        }
    free(s->table);
    s->table = t;
    s->buckets = nb;
}

kv_cache_handle *kv_cache_insert(kv_sst_cache *c, uint64_t id, uint64_t offset, uint8_t *data,
                                 size_t size)
{
    struct kv_cache_entry *e = calloc(1, sizeof *e);
    if (!e) {
        free(data);
        return NULL;
    }
    e->id = id;
    e->offset = offset;
    e->data = data;
    e->size = size;
    e->refs = 1; /* the caller's */
    if (!c || size > c->shards[0].capacity)
        return e; /* private: does not fit */
    uint64_t h = mix(id, offset);
    struct shard *s = shard_of(c, h);
    pthread_mutex_lock(&s->lock);
    struct kv_cache_entry **p = slot(s, h, id, offset);
    if (*p) /* another reader inserted it meanwhile: replace it */
        uncache(c, s, *p);
    /* Make room: least recently used entries no handle holds. */
    for (struct kv_cache_entry *v = s->lru.prev; s->charge + size > s->capacity && v != &s->lru;) {
        struct kv_cache_entry *prev = v->prev;
        if (v->refs == 1)
            uncache(c, s, v);
        v = prev;
    }
    p = slot(s, h, id, offset);
    e->hnext = *p;
    *p = e;
    e->cached = 1;
    e->refs++; /* the cache's */
    lru_push_front(s, e);
    s->count++;
    s->charge += size;
    if (s->count > s->buckets)
        grow_table(s);
    pthread_mutex_unlock(&s->lock);
    atomic_fetch_add(&c->inserts, 1);
    return e;
}

const uint8_t *kv_cache_data(const kv_cache_handle *h, size_t *size)
{
    *size = h->size;
    return h->data;
}

void kv_cache_release(kv_sst_cache *c, kv_cache_handle *h)
{
    if (!h)
        return;
    if (!c) { /* a private handle from a reader without a cache */
        unref(h);
        return;
    }
    /* Reference counts of entries, cached or not, change under their
     * shard's lock (an evicted entry may still have handles). */
    struct shard *s = shard_of(c, mix(h->id, h->offset));
    pthread_mutex_lock(&s->lock);
    unref(h);
    pthread_mutex_unlock(&s->lock);
}
