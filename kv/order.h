/* order.h - the store's key order: bytewise by default, or the caller's
 * kv_comparator (kv_options.comparator; common.h gives its contract).
 *
 * A NULL comparator is bytewise. Every comparison of user keys goes
 * through sstable/order.h's kv_sst_cmp, the one key comparison: it tests for
 * NULL with one branch the CPU predicts and then runs the bytewise code,
 * so the default order pays no indirect call. The fast paths that hold
 * for bytewise order only -- the 8-byte big-endian key words of level and
 * multi-get searches, common prefixes -- are taken only when the
 * comparator is NULL.
 *
 * Tables hold internal keys (util/ikey.h): the escaped user key, its
 * terminator, then a sequence trailer. Their bytewise order is the
 * store's order only when user keys compare bytewise; under a comparator
 * the tables are written and read with the order kv_ikey_comparator_init
 * makes: internal keys by their user keys under the comparator, then by
 * trailer (newest first); a bare prefix (an escaped key and its terminator,
 * no trailer: a backward seek) before every version of its user key, and a
 * compaction's bound (the escaped key closed by 0x00 0x02) after them all,
 * as bytewise order puts them.
 *
 * Internal to kv: not installed. */
#ifndef KV_ORDER_H
#define KV_ORDER_H

#include <stddef.h>

#include <kv/common.h> /* kv_comparator */

#include "sstable/order.h"
#include "util/keycmp.h"

/* The name a NULL comparator stands for: bytewise, then by length. */
#define KV_BYTEWISE_NAME "kv.bytewise"

/* The order of internal keys under the user comparator `ctx` (a const
 * kv_comparator *, never NULL): the compare function of the comparator a
 * store gives its tables (kv_ikey_comparator_init). A key that is none of
 * the above (a damaged table) sorts bytewise against any other key, as does
 * a key over 256 bytes with a 0x00 byte when there is no memory to unescape
 * it in: no crash, and the table's own checks report what is out of order. */
int kv_ikey_compare(void *ctx, const void *a, size_t alen, const void *b, size_t blen);

/* Fills *out with the table order for user comparator cmp (not NULL). */
void kv_ikey_comparator_init(kv_comparator *out, const kv_comparator *cmp);

/* Sorts n elements of `size` bytes at base by less(a, b, ctx) < 0 first
 * (heapsort: no allocation, not stable), for the sorts that need the
 * comparator, which qsort cannot pass. Cannot fail. */
void kv_order_sort(void *base, size_t n, size_t size,
                   int (*compare)(const void *a, const void *b, void *ctx), void *ctx);

#endif /* KV_ORDER_H */
