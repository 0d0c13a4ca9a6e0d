/* fuzz_filter.c - libFuzzer target: the input is a filter encoding
 * (doc/filter_format.md): a Bloom filter's, or a counting, scalable or
 * rotating filter's. Every input goes to all four decoders (each rejects
 * the others' magic), twice:
 *
 * 1. as it is;
 * 2. "repaired", when that changes a byte: the last 8 bytes are replaced by
 *    the XXH3-64 of all the bytes before them, the checksum every one of
 *    these encodings ends with, so that the fuzzer gets past it to the
 *    header's counts and sizes (a crafted filter can carry any of those
 *    behind a valid checksum). A scalable filter's stages are Bloom filter
 *    encodings with checksums of their own, which the repair leaves as
 *    they are.
 *
 * When it decodes: queried, described (stats, count, expected FPR, whose
 * cost depends on the header's sizes and counts), re-encoded, which must
 * give the same bytes, and then used: keys added (and for a counting
 * filter removed; a rotating filter rotated), after which every added key
 * must still be found. Checked: every call returns in bounded time
 * (libFuzzer's -timeout) without a crash, leak or sanitizer report; a
 * failed decode is KV_ECORRUPT (KV_ENOMEM is allowed for what a buffer
 * can legally claim) with *out NULL; decode then encode is the identity. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <kv/bloom.h>
#include <kv/counting_bloom.h>
#include <kv/rotating_bloom.h>
#include <kv/scalable_bloom.h>

#include "util/coding.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A failed decode must be KV_ECORRUPT (or KV_ENOMEM) and leave *out NULL. */
static void check_failure(int rc, const void *out)
{
    if ((rc != KV_ECORRUPT && rc != KV_ENOMEM) || out != NULL)
        abort();
}

/* The encoding (from *_encode, rc) must equal the input. */
static void check_same(int rc, void *buf, size_t len, const uint8_t *data, size_t size)
{
    if (rc != KV_OK)
        return; /* out of memory */
    if (len != size || memcmp(buf, data, size) != 0)
        abort(); /* decode then encode must be the identity */
    kv_free(buf);
}

/* The secret fuzz_filter decodes keyed encodings with: 00 01 .. 0f, the
 * secret of doc/filter_format.md's worked example. */
static const uint8_t fuzz_secret[KV_BLOOM_SECRET_BYTES] = {0, 1, 2,  3,  4,  5,  6,  7,
                                                           8, 9, 10, 11, 12, 13, 14, 15};

static void decode_bloom(const uint8_t *data, size_t size)
{
    kv_bloom *f;
    int rc = kv_bloom_decode(data, size, &f);
    if (rc == KV_EINVAL) {
        /* Only a sound encoding of a keyed filter (version 2, hash kind 2)
         * is refused so: it needs its secret. With ours it decodes when
         * its check value is ours, and is refused with KV_EINVAL when not;
         * any damage stays KV_ECORRUPT. */
        if (f != NULL || size < 8 || data[4] < 2 || data[6] != 2)
            abort();
        rc = kv_bloom_decode_keyed(data, size, fuzz_secret, &f);
        if (rc == KV_EINVAL && f == NULL)
            return;
    }
    if (rc != KV_OK) {
        check_failure(rc, f);
        return;
    }
    for (uint64_t h = 0; h < 64; h++)
        (void)kv_bloom_may_contain_hash(f, h * 0x9E3779B97F4A7C15ull);
    kv_bloom_info info;
    kv_bloom_stats(f, &info);
    void *buf;
    size_t len;
    rc = kv_bloom_encode(f, &buf, &len);
    check_same(rc, buf, len, data, size);
    kv_bloom_free(f);
}

static void decode_counting(const uint8_t *data, size_t size)
{
    kv_counting_bloom *f;
    int rc = kv_counting_bloom_decode(data, size, &f);
    if (rc != KV_OK) {
        check_failure(rc, f);
        return;
    }
    (void)kv_counting_bloom_count(f);
    (void)kv_counting_bloom_expected_fpr(f);
    void *buf;
    size_t len;
    rc = kv_counting_bloom_encode(f, &buf, &len);
    check_same(rc, buf, len, data, size);
    for (uint64_t i = 0; i < 16; i++) {
        (void)kv_counting_bloom_may_contain(f, &i, sizeof i);
        (void)kv_counting_bloom_remove(f, &i, sizeof i); /* whatever the counters hold */
    }
    for (uint64_t i = 100; i < 116; i++)
        if (kv_counting_bloom_add(f, &i, sizeof i) != KV_OK)
            abort();
    for (uint64_t i = 100; i < 116; i++)
        if (!kv_counting_bloom_may_contain(f, &i, sizeof i))
            abort();
    kv_counting_bloom_free(f);
}

static void decode_scalable(const uint8_t *data, size_t size)
{
    kv_scalable_bloom *f;
    int rc = kv_scalable_bloom_decode(data, size, &f);
    if (rc != KV_OK) {
        check_failure(rc, f);
        return;
    }
    (void)kv_scalable_bloom_count(f);
    (void)kv_scalable_bloom_expected_fpr(f);
    void *buf;
    size_t len;
    rc = kv_scalable_bloom_encode(f, &buf, &len);
    check_same(rc, buf, len, data, size);
    /* Adds may start stages: keep them few, so that a decoded filter of
     * large stages does not allocate a larger one for every input. */
    for (uint64_t i = 0; i < 16; i++) {
        rc = kv_scalable_bloom_add(f, &i, sizeof i);
        if (rc == KV_ENOMEM)
            break;
        if (rc != KV_OK || !kv_scalable_bloom_may_contain(f, &i, sizeof i))
            abort();
    }
    kv_scalable_bloom_free(f);
}

static void decode_rotating(const uint8_t *data, size_t size)
{
    kv_rotating_bloom *f;
    int rc = kv_rotating_bloom_decode(data, size, &f);
    if (rc != KV_OK) {
        check_failure(rc, f);
        return;
    }
    (void)kv_rotating_bloom_count(f);
    (void)kv_rotating_bloom_expected_fpr(f);
    void *buf;
    size_t len;
    rc = kv_rotating_bloom_encode(f, &buf, &len);
    check_same(rc, buf, len, data, size);
    if (kv_rotating_bloom_rotate(f) != KV_OK)
        abort();
    /* Each key is found right after its add, whatever rotations it caused. */
    for (uint64_t i = 0; i < 16; i++) {
        if (kv_rotating_bloom_add(f, &i, sizeof i) != KV_OK)
            abort();
        if (!kv_rotating_bloom_may_contain(f, &i, sizeof i))
            abort();
    }
    kv_rotating_bloom_free(f);
}

static void decode(const uint8_t *data, size_t size)
{
    decode_bloom(data, size);
    decode_counting(data, size);
    decode_scalable(data, size);
    decode_rotating(data, size);
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
