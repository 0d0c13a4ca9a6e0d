/* memtable.c - skiplist on an arena; one writer, lock-free readers.
 *
 * A node is allocated once, in the arena, with its entry right behind its
 * tower of next pointers:
 *
 *   struct node | next[height] | key bytes | value bytes
 *
 * The writer fills a node completely, then links it bottom level first with
 * release stores; readers follow next pointers with acquire loads, so a
 * reader that reaches a node sees all of it. Nodes are never unlinked or
 * freed before the whole memtable is. */
#include "memtable.h"

#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <kv/bloom.h>
#include <kv/range_filter.h>

#include "order.h"
#include "util/hash.h"

#define MAX_HEIGHT 12
#define ARENA_BLOCK (64u * 1024u)

struct node {
    uint64_t trailer; /* seq << 8 | kind */
    uint32_t klen, vlen;
    unsigned height;
    _Atomic(struct node *) next[]; /* height of them; then key, value */
};

struct arena_block {
    struct arena_block *prev;
    alignas(max_align_t) unsigned char data[];
};

struct kv_mem {
    struct arena_block *blocks;
    unsigned char *cur, *end; /* free room in the newest small block */
    _Atomic size_t bytes; /* memory held: arena blocks and the header */
    _Atomic size_t used;  /* bytes of nodes allocated (what the entries take) */
    _Atomic uint64_t count;
    _Atomic unsigned height; /* of the tallest node */
    uint64_t rng;
    struct node *head;
    kv_bloom *filter; /* NULL: none; set before the memtable is shared, then const */
    const kv_comparator *cmp; /* user key order (order.h); NULL: bytewise. Set before
                               * the memtable is shared, then const */
    /* The occupancy gate (kv_mem_set_range_map; NULL map: none): bit
     * bucket(key) of occ set for each key added, bucket(key) =
     * kv_fastrange64(map_lower(key), occ_mul), or map_lower(key) itself when
     * occ_mul is 0 (a map of fewer integers than bits). Set before the
     * memtable is shared, then const; occ's words written by the writer. */
    const kv_rfilter *map;
    _Atomic uint64_t *occ;
    uint64_t occ_mul;
};

/* ---- arena ------------------------------------------------------------------ */

static struct arena_block *arena_new_block(kv_mem *m, size_t size)
{
    struct arena_block *b = malloc(sizeof *b + size);
    if (!b)
        return NULL;
    b->prev = m->blocks;
    m->blocks = b;
    atomic_fetch_add_explicit(&m->bytes, sizeof *b + size, memory_order_relaxed);
    return b;
}

/* `size` bytes aligned for a node; NULL when out of memory. Large requests
 * get a block of their own so the current block's room is not wasted. */
static void *arena_alloc(kv_mem *m, size_t size)
{
    const size_t align = alignof(struct node);
    size = (size + align - 1) & ~(align - 1);
    atomic_fetch_add_explicit(&m->used, size, memory_order_relaxed);
    if (size > ARENA_BLOCK / 4) {
        struct arena_block *b = arena_new_block(m, size);
        return b ? b->data : NULL; /* cur/end stay in the small block */
    }
    if ((size_t)(m->end - m->cur) < size) {
        struct arena_block *b = arena_new_block(m, ARENA_BLOCK);
        if (!b)
            return NULL;
        m->cur = b->data;
        m->end = b->data + ARENA_BLOCK;
    }
    void *p = m->cur;
    m->cur += size;
    return p;
}

/* ---- nodes ------------------------------------------------------------------ */

static inline const uint8_t *node_key(const struct node *n)
{
    return (const uint8_t *)&n->next[n->height];
}

static inline const uint8_t *node_val(const struct node *n)
{
    return node_key(n) + n->klen;
}

static inline struct node *next_of(const struct node *n, unsigned level)
{
    return atomic_load_explicit(&((struct node *)n)->next[level], memory_order_acquire);
}

/* Orders (key, trailer) pairs: bytewise by key, then newest (largest
 * trailer) first. */
static int compare(const uint8_t *a, size_t alen, uint64_t atr, const uint8_t *b, size_t blen,
                   uint64_t btr)
{
    size_t n = alen < blen ? alen : blen;
    int c = kv_bytes_cmp(a, b, n);
    if (c)
        return c;
    if (alen != blen)
        return alen < blen ? -1 : 1;
    return atr > btr ? -1 : atr < btr ? 1 : 0;
}

static inline int node_cmp(const struct node *n, const uint8_t *key, size_t klen, uint64_t tr)
{
    return compare(node_key(n), n->klen, n->trailer, key, klen, tr);
}

/* The first node >= (key, tr) in bytewise order; fills prev[] with each
 * level's last node before it when prev is not NULL. Kept apart from the
 * search under a comparator (find_ge_cmp), so that the bytewise one is
 * compiled as it always was. */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static struct node *find_ge_bytewise(const kv_mem *m, const uint8_t *key, size_t klen,
                                     uint64_t tr, struct node **prev)
{
    struct node *x = m->head;
    unsigned level = atomic_load_explicit(&m->height, memory_order_relaxed) - 1;
    for (;;) {
        struct node *next = next_of(x, level);
        if (next && node_cmp(next, key, klen, tr) < 0) {
            x = next;
            continue;
        }
        if (prev)
            prev[level] = x;
        if (level == 0)
            return next;
        level--;
    }
}

/* find_ge_bytewise with the keys under m->cmp. */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static struct node *find_ge_cmp(const kv_mem *m, const uint8_t *key, size_t klen, uint64_t tr,
                                struct node **prev)
{
    const kv_comparator *cmp = m->cmp;
    struct node *x = m->head;
    unsigned level = atomic_load_explicit(&m->height, memory_order_relaxed) - 1;
    for (;;) {
        struct node *next = next_of(x, level);
        int c = next ? cmp->compare(cmp->ctx, node_key(next), next->klen, key, klen) : 0;
        if (next && (c < 0 || (c == 0 && next->trailer > tr))) {
            x = next;
            continue;
        }
        if (prev)
            prev[level] = x;
        if (level == 0)
            return next;
        level--;
    }
}

/* The first node >= (key, tr), in m's order. */
static inline struct node *find_ge(const kv_mem *m, const uint8_t *key, size_t klen, uint64_t tr,
                                   struct node **prev)
{
    return m->cmp ? find_ge_cmp(m, key, klen, tr, prev) : find_ge_bytewise(m, key, klen, tr, prev);
}

static unsigned random_height(kv_mem *m)
{
    unsigned h = 1;
    while (h < MAX_HEIGHT) {
        m->rng ^= m->rng << 13; /* xorshift64 */
        m->rng ^= m->rng >> 7;
        m->rng ^= m->rng << 17;
        if (m->rng & 3) /* each level holds 1/4 of the one below */
            break;
        h++;
    }
    return h;
}

/* ---- the occupancy gate ------------------------------------------------------------------ */

/* The key's bucket: non-decreasing in the key (map_lower is, and so is a
 * multiply by a constant taking the high word), below the bitmap's size. */
static inline uint64_t occ_bucket(const kv_mem *m, const void *key, size_t klen)
{
    uint64_t z = kv_rfilter_map_lower(m->map, key, klen);
    return m->occ_mul ? kv_fastrange64(z, m->occ_mul) : z;
}

int kv_mem_set_range_map(kv_mem *m, const kv_rfilter *map, uint64_t bits)
{
    if (!m || !map || bits < 64 || (bits & (bits - 1)) || bits > ((uint64_t)1 << 32) || m->map ||
        atomic_load_explicit(&m->count, memory_order_relaxed))
        return KV_EINVAL;
    uint64_t top = kv_rfilter_map_top(map), mul = 0;
    if (top >= bits) {
        /* mul = floor(bits 2^64 / (top + 1)), below 2^64 as top + 1 > bits:
         * the largest integer, top, lands in bucket < bits. */
#ifdef __SIZEOF_INT128__
        __extension__ typedef unsigned __int128 u128;
        mul = (uint64_t)(((u128)bits << 64) / ((u128)top + 1));
#else
        unsigned len = 64; /* top + 1 <= 2^len: bits 2^(64 - len), a coarser scale */
        while (len > 1 && !(top >> (len - 1)))
            len--;
        mul = len == 64 ? bits : bits << (64 - len);
#endif
    }
    m->occ = calloc(bits / 64, sizeof *m->occ);
    if (!m->occ)
        return KV_ENOMEM;
    m->map = map;
    m->occ_mul = mul;
    atomic_fetch_add_explicit(&m->bytes, bits / 8, memory_order_relaxed);
    return KV_OK;
}

int kv_mem_has_range_map(const kv_mem *m)
{
    return m && m->map;
}

/* Words of the bitmap a query may read before it answers "maybe". */
#define OCC_MAX_WORDS 64

int kv_mem_range_may_hold(const kv_mem *m, const void *lo, size_t lolen, const void *hi,
                          size_t hilen)
{
    if (!m || !m->map || !lo || !hi)
        return 1;
    uint64_t a = occ_bucket(m, lo, lolen), b = occ_bucket(m, hi, hilen);
    uint64_t wa = a / 64, wb = b / 64;
    if (a > b || wb - wa >= OCC_MAX_WORDS)
        return 1; /* (a > b only for lo > hi, an empty range: "maybe" is still right) */
    for (uint64_t w = wa; w <= wb; w++) {
        uint64_t word = atomic_load_explicit(&m->occ[w], memory_order_relaxed);
        if (w == wa)
            word &= ~(uint64_t)0 << (a % 64);
        if (w == wb)
            word &= ~(uint64_t)0 >> (63 - b % 64);
        if (word)
            return 1;
    }
    return 0;
}

/* ---- public ------------------------------------------------------------------ */

int kv_mem_new(uint64_t filter_keys, double bits_per_key, kv_mem **out)
{
    if (!out)
        return KV_EINVAL;
    *out = NULL;
    kv_mem *m = calloc(1, sizeof *m);
    if (!m)
        return KV_ENOMEM;
    atomic_init(&m->bytes, sizeof *m);
    if (filter_keys) {
        /* The filter is given hashes, never keys: its own seed is unused. */
        int rc = kv_bloom_new(KV_BLOOM_BLOCKED, filter_keys, bits_per_key, 0, &m->filter);
        if (rc != KV_OK) {
            free(m);
            return rc;
        }
        atomic_fetch_add_explicit(&m->bytes, kv_bloom_bytes(m->filter), memory_order_relaxed);
    }
    atomic_init(&m->used, 0);
    atomic_init(&m->count, 0);
    atomic_init(&m->height, 1);
    m->rng = 0x2545F4914F6CDD1Dull;
    m->head = arena_alloc(m, sizeof(struct node) + MAX_HEIGHT * sizeof(struct node *));
    if (!m->head) {
        kv_mem_free(m);
        return KV_ENOMEM;
    }
    memset(m->head, 0, sizeof *m->head);
    m->head->height = MAX_HEIGHT;
    for (unsigned i = 0; i < MAX_HEIGHT; i++)
        atomic_init(&m->head->next[i], NULL);
    *out = m;
    return KV_OK;
}

void kv_mem_set_comparator(kv_mem *m, const kv_comparator *cmp)
{
    if (m)
        m->cmp = cmp;
}

void kv_mem_free(kv_mem *m)
{
    if (!m)
        return;
    for (struct arena_block *b = m->blocks, *p; b; b = p) {
        p = b->prev;
        free(b);
    }
    kv_bloom_free(m->filter);
    free((void *)m->occ);
    free(m);
}

int kv_mem_add(kv_mem *m, uint64_t hash, uint64_t seq, int kind, const void *key, size_t klen,
               const void *val, size_t vlen)
{
    if (!m || seq > KV_MAX_SEQ || !kv_kind_stored(kind) || kind == KV_KIND_BLOB ||
        klen > UINT32_MAX || vlen > UINT32_MAX || (klen && !key) || (vlen && !val))
        return KV_EINVAL;
    uint64_t tr = seq << 8 | (uint64_t)kind;
    struct node *prev[MAX_HEIGHT];
    struct node *at = find_ge(m, key, klen, tr, prev);
    if (at && at->trailer >> 8 == seq && at->klen == klen &&
        (klen == 0 || memcmp(node_key(at), key, klen) == 0))
        return KV_EINVAL;

    unsigned h = random_height(m);
    size_t size = sizeof(struct node) + h * sizeof(struct node *) + klen + vlen;
    struct node *n = arena_alloc(m, size);
    if (!n)
        return KV_ENOMEM;
    n->trailer = tr;
    n->klen = (uint32_t)klen;
    n->vlen = (uint32_t)vlen;
    n->height = h;
    if (klen)
        memcpy((uint8_t *)node_key(n), key, klen);
    if (vlen)
        memcpy((uint8_t *)node_val(n), val, vlen);
    /* Before the node is linked: a reader that reaches it must find the
     * key's bits set (the invariant at the top of this file). */
    if (m->filter)
        kv_bloom_add_hash(m->filter, hash);
    /* Likewise the key's occupancy bit, and a reader whose snapshot covers
     * this entry finds it set without reaching the node: the writer stores
     * the bit, links the node, returns, and only then publishes the
     * entry's sequence with release order (write.c); a reader acquires
     * that sequence (its snapshot) before it asks kv_mem_range_may_hold,
     * so the bit's store happens before the reader's load of its word. A
     * reader whose snapshot is older may miss the bit: the entry is not
     * its to see. The writer is alone (its adds are serialised), so a
     * relaxed load and store set the bit: no read-modify-write. */
    if (m->map) {
        uint64_t b = occ_bucket(m, key, klen), bit = (uint64_t)1 << (b % 64);
        uint64_t w = atomic_load_explicit(&m->occ[b / 64], memory_order_relaxed);
        if (!(w & bit))
            atomic_store_explicit(&m->occ[b / 64], w | bit, memory_order_relaxed);
    }

    unsigned cur = atomic_load_explicit(&m->height, memory_order_relaxed);
    for (unsigned i = cur; i < h; i++)
        prev[i] = m->head;
    for (unsigned i = 0; i < h; i++) {
        atomic_init(&n->next[i], next_of(prev[i], i));
        atomic_store_explicit(&prev[i]->next[i], n, memory_order_release);
    }
    if (h > cur) /* readers seeing the old height just start lower */
        atomic_store_explicit(&m->height, h, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->count, 1, memory_order_relaxed);
    return KV_OK;
}

static void fill_entry(const struct node *n, kv_mem_entry *out)
{
    out->key = node_key(n);
    out->klen = n->klen;
    out->val = node_val(n);
    out->vlen = n->vlen;
    out->seq = n->trailer >> 8;
    out->kind = (int)(n->trailer & 0xff);
}

int kv_mem_get(const kv_mem *m, const void *key, size_t klen, uint64_t snapshot,
               kv_mem_entry *out)
{
    if (!m || !out || (klen && !key))
        return KV_EINVAL;
    if (snapshot > KV_MAX_SEQ)
        snapshot = KV_MAX_SEQ;
    /* (key, snapshot, highest kind) sorts before every entry of key with a
     * sequence <= snapshot and after every newer one. */
    struct node *n = find_ge(m, key, klen, snapshot << 8 | 0xff, NULL);
    if (!n || n->klen != klen || (klen && memcmp(node_key(n), key, klen) != 0))
        return KV_NOTFOUND;
    fill_entry(n, out);
    return KV_OK;
}

int kv_mem_has_filter(const kv_mem *m)
{
    return m && m->filter;
}

int kv_mem_may_contain(const kv_mem *m, uint64_t hash)
{
    return !m || !m->filter || kv_bloom_may_contain_hash(m->filter, hash);
}

size_t kv_mem_used(const kv_mem *m)
{
    return m ? atomic_load_explicit(&((kv_mem *)m)->used, memory_order_relaxed) : 0;
}

size_t kv_mem_bytes(const kv_mem *m)
{
    return m ? atomic_load_explicit(&((kv_mem *)m)->bytes, memory_order_relaxed) : 0;
}

uint64_t kv_mem_count(const kv_mem *m)
{
    return m ? atomic_load_explicit(&((kv_mem *)m)->count, memory_order_relaxed) : 0;
}

void kv_mem_iter_init(kv_mem_iter *it, const kv_mem *m)
{
    it->mem = m;
    it->node = NULL;
}

void kv_mem_iter_first(kv_mem_iter *it)
{
    it->node = next_of(it->mem->head, 0);
}

void kv_mem_iter_seek(kv_mem_iter *it, const void *key, size_t klen, uint64_t seq)
{
    if (seq > KV_MAX_SEQ)
        seq = KV_MAX_SEQ;
    it->node = find_ge(it->mem, key, klen, seq << 8 | 0xff, NULL);
}

void kv_mem_iter_seek_before(kv_mem_iter *it, const void *key, size_t klen)
{
    /* Every entry of `key` sorts after (key, largest trailer): the last
     * node before that is the last one of a smaller key. */
    struct node *prev[MAX_HEIGHT];
    find_ge(it->mem, key, klen, UINT64_MAX, prev);
    it->node = prev[0] == it->mem->head ? NULL : prev[0];
}

void kv_mem_iter_prev(kv_mem_iter *it)
{
    /* Nodes have no back links (a writer links forward only, and readers
     * may not see a half-linked node from behind): the node before is the
     * last one of a search from the head for this one, O(log n). */
    const struct node *n = it->node;
    struct node *prev[MAX_HEIGHT];
    find_ge(it->mem, node_key(n), n->klen, n->trailer, prev);
    it->node = prev[0] == it->mem->head ? NULL : prev[0];
}

void kv_mem_iter_last(kv_mem_iter *it)
{
    struct node *x = it->mem->head;
    for (unsigned level = atomic_load_explicit(&it->mem->height, memory_order_relaxed); level-- > 0;)
        for (struct node *n; (n = next_of(x, level)) != NULL;)
            x = n;
    it->node = x == it->mem->head ? NULL : x;
}

int kv_mem_iter_valid(const kv_mem_iter *it)
{
    return it->node != NULL;
}

void kv_mem_iter_next(kv_mem_iter *it)
{
    it->node = next_of(it->node, 0);
}

void kv_mem_iter_entry(const kv_mem_iter *it, kv_mem_entry *out)
{
    fill_entry(it->node, out);
}
