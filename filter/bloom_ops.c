/* bloom_ops.c - operations on whole filters: union, intersection, clear.
 *
 * Two filters of the same layout, m, k and seed (and, for keyed filters,
 * the same secret, whose check value is then the seed) put a key on the same bits,
 * so the OR of their bit arrays is exactly the filter of both key sets and
 * the AND keeps every key both hold. Each call is one pass over the words.
 * dst is written with plain loads and stores when it lives in private
 * memory (its caller keeps other adders away, bloom.h), and with atomic
 * ORs and ANDs when it lives in a shared file, where other processes add
 * at the same time and a plain store could wipe their bits. */
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "bloom_impl.h"

static bool same_shape(const kv_bloom *a, const kv_bloom *b)
{
    return a->layout == b->layout && a->bits == b->bits && a->k == b->k && a->seed == b->seed &&
           a->keyed == b->keyed && (!a->keyed || memcmp(&a->sip, &b->sip, sizeof a->sip) == 0);
}

int kv_bloom_union(kv_bloom *dst, const kv_bloom *src)
{
    if (!dst || !src || !same_shape(dst, src))
        return KV_EINVAL;
    if (dst == src)
        return KV_OK;
    uint64_t keys = kv_bloom_keys_added(src), before = kv_bloom_keys_added(dst);
    for (uint64_t i = 0; i < dst->nwords; i++) {
        uint64_t s = atomic_load_explicit(&src->words[i], memory_order_relaxed);
        if (!s)
            continue;
        if (dst->map)
            atomic_fetch_or_explicit(&dst->words[i], s, memory_order_relaxed);
        else
            atomic_store_explicit(&dst->words[i],
                                  atomic_load_explicit(&dst->words[i], memory_order_relaxed) | s,
                                  memory_order_relaxed);
    }
    /* The count saturates at 2^64 - 1 instead of wrapping to a small
     * number (a count of 2^64 - 1 plus 1 would read as 0 keys). */
    if (keys > UINT64_MAX - before)
        kv_bloom_reset_keys(dst, UINT64_MAX);
    else
        kv_bloom_count_keys(dst, keys);
    return KV_OK;
}

/* Swamidass-Baldi: the keys a filter of m bits and k probes holds when
 * `set` of its bits are set; +inf when every bit is. */
static double keys_from_bits(const kv_bloom *f, uint64_t set)
{
    double m = (double)f->bits;
    return -(m / f->k) * log1p(-(double)set / m);
}

int kv_bloom_intersect(kv_bloom *dst, const kv_bloom *src)
{
    if (!dst || !src || !same_shape(dst, src))
        return KV_EINVAL;
    if (dst == src)
        return KV_OK;
    uint64_t keys_a = kv_bloom_keys_added(dst), keys_b = kv_bloom_keys_added(src);
    /* The bits set in dst, in src and in either, counted in the pass that
     * ANDs, for the estimate of the common keys. */
    uint64_t set_a = 0, set_b = 0, set_u = 0;
    for (uint64_t i = 0; i < dst->nwords; i++) {
        uint64_t s = atomic_load_explicit(&src->words[i], memory_order_relaxed);
        uint64_t d = atomic_load_explicit(&dst->words[i], memory_order_relaxed);
        set_a += popcount64(d);
        set_b += popcount64(s);
        set_u += popcount64(d | s);
        if ((d & s) == d)
            continue;
        if (dst->map)
            atomic_fetch_and_explicit(&dst->words[i], s, memory_order_relaxed);
        else
            atomic_store_explicit(&dst->words[i], d & s, memory_order_relaxed);
    }
    /* |A & B| = |A| + |B| - |A | B|, each from its bits. A filter with
     * every bit set tells nothing: then the smaller count stands. */
    double cap = (double)(keys_a < keys_b ? keys_a : keys_b);
    double est = keys_from_bits(dst, set_a) + keys_from_bits(dst, set_b) -
                 keys_from_bits(dst, set_u);
    if (!isfinite(est) || est > cap)
        est = cap;
    if (est < 0)
        est = 0;
    kv_bloom_reset_keys(dst, (uint64_t)llround(est));
    return KV_OK;
}

void kv_bloom_clear(kv_bloom *f)
{
    if (!f)
        return;
    for (uint64_t i = 0; i < f->nwords; i++)
        atomic_store_explicit(&f->words[i], 0, memory_order_relaxed);
    kv_bloom_reset_keys(f, 0);
}
