/* common.h - the few names that several of kv's public headers share: the
 * key order (kv_comparator), the filter layouts and the compression kinds.
 * kv.h, bloom.h and sstable.h include it, so a program that includes any
 * of them has these too; it declares no function.
 *
 * Part of util/, the bottom layer, like status.h, so that every module's
 * public header may include it. */
#ifndef KV_COMMON_H
#define KV_COMMON_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A key order other than the bytewise one. compare returns <0, 0 or >0 as
 * key a sorts before, equal to or after key b; it must be a total order
 * that never changes for a database (its name is stored with the data, and
 * kv_open refuses a database made under another name), must not fail, and
 * is called from any thread at once. ctx is passed back untouched. A NULL
 * comparator (everywhere one is taken) means bytewise: memcmp, then the
 * shorter key first, with no indirect call. Filters hash whole keys, so
 * keys equal under compare but different in bytes are different keys to
 * them: a comparator must call two keys equal only when their bytes are. */
typedef struct kv_comparator {
    const char *name; /* 1 .. 255 bytes; "kv.bytewise" names the default */
    int (*compare)(void *ctx, const void *a, size_t alen, const void *b, size_t blen);
    void *ctx;
} kv_comparator;

/* How a Bloom filter lays out its bits (bloom.h gives the two layouts). */
typedef enum { KV_BLOOM_BLOCKED = 0, KV_BLOOM_CLASSIC = 1 } kv_bloom_layout;

/* How a table's data blocks are stored (kv_sst_options.compression,
 * kv_options.compression). */
enum { KV_COMPRESSION_NONE = 0, KV_COMPRESSION_ZSTD = 1 };

#ifdef __cplusplus
}
#endif

#endif /* KV_COMMON_H */
