/* fuzz_filter.c - libFuzzer target: the input is a filter encoding. Decode
 * it; if it decodes, query and re-encode it, which must give the same bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <kv/bloom.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kv_bloom *f;
    if (kv_bloom_decode(data, size, &f) != KV_OK)
        return 0;
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
    return 0;
}
