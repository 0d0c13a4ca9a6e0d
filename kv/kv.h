/* kv.h - the kv store's public API.
 *
 * Keys and values are byte strings: any bytes, NUL included; a key may be
 * empty, a value may be empty. Keys compare bytewise (memcmp, then length).
 * Every function returns KV_OK or a negative KV_E... code (see status.h;
 * kv_strerror names each) unless its comment says why it cannot fail.
 *
 * This header grows with the store; today it holds the size limits and
 * write batches. */
#ifndef KV_KV_H
#define KV_KV_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest key and value, in bytes (inclusive). Larger ones get KV_EINVAL
 * and change nothing. */
#define KV_MAX_KEY_SIZE   ((size_t)64 * 1024)
#define KV_MAX_VALUE_SIZE ((size_t)16 * 1024 * 1024)
/* Largest encoded batch (keys, values and a few bytes per entry). */
#define KV_MAX_BATCH_SIZE ((size_t)1 << 30)

/* A write batch: puts and deletes applied all together or not at all, also
 * across a crash. Entries apply in the order they were added (a later put
 * of the same key wins). A batch is not thread-safe; it may be reused after
 * kv_batch_clear. */
typedef struct kv_batch kv_batch;

/* Creates an empty batch. KV_EINVAL (NULL out), KV_ENOMEM. */
KV_API int kv_batch_new(kv_batch **out);

/* Adds a put or a delete. KV_EINVAL: NULL batch, NULL bytes with a nonzero
 * length, a key or value over the limits, or the batch would exceed
 * KV_MAX_BATCH_SIZE; KV_ENOMEM. On error the batch is unchanged. */
KV_API int kv_batch_put(kv_batch *b, const void *key, size_t klen, const void *val, size_t vlen);
KV_API int kv_batch_delete(kv_batch *b, const void *key, size_t klen);

/* Removes every entry. Cannot fail; NULL is a no-op. */
KV_API void kv_batch_clear(kv_batch *b);

/* Entries in the batch. Cannot fail; NULL counts 0. */
KV_API uint32_t kv_batch_count(const kv_batch *b);

/* Frees the batch. NULL is a no-op. */
KV_API void kv_batch_free(kv_batch *b);

#ifdef __cplusplus
}
#endif

#endif /* KV_KV_H */
