/* fuzz_shared.c - libFuzzer target: the input is a shared filter file
 * (doc/filter_format.md, "Shared filter file"), opened by
 * kv_bloom_open_shared with expected_keys 0 ("whatever is there") twice:
 *
 * 1. as it is;
 * 2. "repaired", when that changes a byte: an input shorter than the
 *    header page is spread out first (its first 64 bytes as the fixed
 *    fields, zeros up to the page's end, the rest of it as the bit array),
 *    so that short inputs reach the checks of sizes and lengths; then the
 *    header checksum (bytes 56..63) is recomputed over bytes 0..55, so that
 *    the fuzzer gets past it to the fields behind it.
 *
 * When it opens: queried, added to (the file is the fuzzer's scratch copy),
 * described (kv_bloom_stats), encoded and decoded again, and opened a
 * second time, which must see the first handle's adds. Checked: no crash,
 * leak or sanitizer report; a failed open is KV_ECORRUPT with a text that
 * names the file and *out NULL; the encoding of an opened filter decodes. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, kill (fuzz_tmp.h) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <kv/bloom.h>

#include "../filter/filter_format.h"
#include "fuzz_tmp.h"
#include "util/coding.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void open_file(const uint8_t *data, size_t size)
{
    const char *dir = fz_mkdir();
    char path[512];
    snprintf(path, sizeof path, "%s/f.kvbs", dir);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    CHECK(size == 0 || fwrite(data, 1, size, f) == size);
    CHECK(fclose(f) == 0);
    kv_bloom *b = (kv_bloom *)1;
    int rc = kv_bloom_open_shared(path, KV_BLOOM_BLOCKED, 0, 0, 0, &b);
    if (rc != KV_OK) {
        CHECK(rc == KV_ECORRUPT);
        CHECK(b == NULL);
        CHECK(strstr(kv_error_text(), path) != NULL);
        fz_done();
        return;
    }
    uint8_t key[8];
    for (uint64_t i = 0; i < 32; i++) {
        memcpy(key, &i, sizeof key);
        (void)kv_bloom_may_contain(b, key, sizeof key);
        if (i % 2)
            kv_bloom_add(b, key, sizeof key);
        else
            (void)kv_bloom_add_check(b, key, sizeof key);
        CHECK(kv_bloom_may_contain(b, key, sizeof key) == 1);
    }
    kv_bloom_info info;
    kv_bloom_stats(b, &info);
    void *buf;
    size_t len;
    if (kv_bloom_encode(b, &buf, &len) == KV_OK) {
        kv_bloom *d;
        CHECK(kv_bloom_decode(buf, len, &d) == KV_OK);
        kv_bloom_free(d);
        kv_free(buf);
    }
    kv_bloom *again;
    CHECK(kv_bloom_open_shared(path, KV_BLOOM_BLOCKED, 0, 0, 0, &again) == KV_OK);
    for (uint64_t i = 0; i < 32; i++) {
        memcpy(key, &i, sizeof key);
        CHECK(kv_bloom_may_contain(again, key, sizeof key) == 1);
    }
    kv_bloom_free(again);
    kv_bloom_free(b);
    fz_done();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fz_base[0])
        fz_init("shared");
    if (size > (1u << 20))
        return 0; /* a file's worth of bit array is plenty */
    open_file(data, size);
    /* The repaired copy. */
    size_t n = size;
    uint8_t *fixed;
    if (size < KV_BLOOM_SHM_HEADER) {
        size_t fields = size < KV_BLOOM_SHM_FIELDS ? size : KV_BLOOM_SHM_FIELDS;
        n = KV_BLOOM_SHM_HEADER + (size - fields);
        fixed = calloc(n, 1);
        CHECK(fixed != NULL);
        memcpy(fixed, data, fields);
        memcpy(fixed + KV_BLOOM_SHM_HEADER, data + fields, size - fields);
    } else {
        fixed = malloc(n);
        CHECK(fixed != NULL);
        memcpy(fixed, data, n);
    }
    kv_put64(fixed + KV_BLOOM_SHM_OFF_CHECKSUM, XXH3_64bits(fixed, KV_BLOOM_SHM_OFF_CHECKSUM));
    if (n != size || memcmp(fixed, data, n) != 0)
        open_file(fixed, n);
    free(fixed);
    return 0;
}
