/* fuzz_filter.c - libFuzzer target: the input is a filter encoding
 * (doc/filter_format.md), decoded twice:
 *
 * 1. as it is;
 * 2. "repaired", when that changes a byte: the last 8 bytes are replaced by
 *    the XXH3-64 of all the bytes before them, the checksum the encoding
 *    ends with, so that the fuzzer gets past it to the header's counts and
 *    sizes (a crafted filter can carry any of those behind a valid
 *    checksum).
 *
 * When it decodes: queried, described (kv_bloom_stats, whose expected FPR
 * is computed from the header's m, k and key count) and re-encoded, which
 * must give the same bytes. Checked: every call returns in bounded time
 * (libFuzzer's -timeout) without a crash, leak or sanitizer report; a
 * failed decode is KV_ECORRUPT; decode then encode is the identity. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <kv/bloom.h>

#include "util/coding.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void decode(const uint8_t *data, size_t size)
{
    kv_bloom *f;
    int rc = kv_bloom_decode(data, size, &f);
    if (rc != KV_OK) {
        if (rc != KV_ECORRUPT || f != NULL)
            abort();
        return;
    }
    for (uint64_t h = 0; h < 64; h++)
        (void)kv_bloom_may_contain_hash(f, h * 0x9E3779B97F4A7C15ull);
    kv_bloom_info info;
    kv_bloom_stats(f, &info);
    void *buf;
    size_t len;
    if (kv_bloom_encode(f, &buf, &len) == KV_OK) {
        if (len != size || memcmp(buf, data, size) != 0)
            abort(); /* decode then encode must be the identity */
        kv_free(buf);
    }
    kv_bloom_free(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    decode(data, size);
    if (size < 8)
        return 0;
    uint8_t *fixed = malloc(size);
    if (!fixed)
        abort();
    memcpy(fixed, data, size);
    kv_put64(fixed + size - 8, XXH3_64bits(fixed, size - 8));
    if (memcmp(fixed, data, size) != 0)
        decode(fixed, size);
    free(fixed);
    return 0;
}
