/* order.h - the one key comparison of kv: bytewise (kv_key_cmp,
 * util/keycmp.h) or a caller's kv_comparator. A NULL comparator is
 * bytewise, tested with one branch the CPU predicts, so a bytewise order
 * pays no indirect call; the fast paths that only hold for bytewise order
 * (8-byte key words, common prefixes) are taken only when it is NULL.
 * sstable/ orders a table's keys with it, kv/ its user keys (kv/order.h);
 * it is static inline, so neither pays a call.
 *
 * Exported by sstable/ to kv/ (as "sstable/order.h"); not installed. */
#ifndef KV_SST_ORDER_H
#define KV_SST_ORDER_H

#include <stddef.h>

#include <kv/common.h> /* kv_comparator */

#include "util/keycmp.h"

/* <0, 0 or >0 as key a sorts before, with or after key b under cmp. */
static inline int kv_sst_cmp(const kv_comparator *cmp, const void *a, size_t alen, const void *b,
                             size_t blen)
{
#if defined(__GNUC__)
    if (__builtin_expect(cmp == NULL, 1))
#else
    if (cmp == NULL)
#endif
        return kv_key_cmp(a, alen, b, blen);
    return cmp->compare(cmp->ctx, a, alen, b, blen);
}

#endif /* KV_SST_ORDER_H */
