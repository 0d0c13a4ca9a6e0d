/* range_filter.c - PLACEHOLDER (session 2026-12-07): always "maybe".
 * Replaced by the real filter (range_filter.h) before this lands. */
#include "range_filter.h"

#include <stdlib.h>

#include "util/error.h"

struct kv_rfilter_builder {
    uint64_t keys;
};
struct kv_rfilter {
    size_t len;
};

int kv_rfilter_builder_new(double bits_per_key, uint64_t seed, kv_rfilter_builder **out)
{
    (void)seed;
    if (!out || !(bits_per_key >= KV_RFILTER_MIN_BITS && bits_per_key <= KV_RFILTER_MAX_BITS))
        return KV_EINVAL;
    *out = calloc(1, sizeof **out);
    return *out ? KV_OK : KV_ENOMEM;
}

int kv_rfilter_builder_add(kv_rfilter_builder *b, const void *key, size_t klen)
{
    (void)key;
    (void)klen;
    if (!b)
        return KV_EINVAL;
    b->keys++;
    return KV_OK;
}

uint64_t kv_rfilter_builder_keys(const kv_rfilter_builder *b)
{
    return b ? b->keys : 0;
}

int kv_rfilter_builder_finish(kv_rfilter_builder *b, uint8_t **out, size_t *len)
{
    if (!b || !out || !len)
        return KV_EINVAL;
    *out = calloc(1, 8);
    *len = 8;
    return *out ? KV_OK : KV_ENOMEM;
}

void kv_rfilter_builder_free(kv_rfilter_builder *b)
{
    free(b);
}

int kv_rfilter_decode(const void *buf, size_t len, kv_rfilter **out)
{
    if (!buf || !out)
        return KV_EINVAL;
    *out = calloc(1, sizeof **out);
    if (!*out)
        return KV_ENOMEM;
    (*out)->len = len;
    return KV_OK;
}

void kv_rfilter_free(kv_rfilter *f)
{
    free(f);
}

int kv_rfilter_may_hold(const kv_rfilter *f, const void *lo, size_t lolen, const void *hi,
                        size_t hilen, double *expected_fpr)
{
    (void)f, (void)lo, (void)lolen, (void)hi, (void)hilen;
    if (expected_fpr)
        *expected_fpr = 1;
    return 1;
}

void kv_rfilter_info_get(const kv_rfilter *f, kv_rfilter_info *out)
{
    if (f && out) {
        *out = (kv_rfilter_info){0};
        out->bytes = f->len;
    }
}

double kv_rfilter_expected_fpr(const kv_rfilter *f, double width)
{
    (void)f, (void)width;
    return 1;
}
