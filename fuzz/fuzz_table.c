/* fuzz_table.c - libFuzzer target: the input is a table file. Open it, get a
 * few keys, iterate, verify. Any crash or sanitizer report is a bug: a
 * damaged table must only ever give KV_ECORRUPT (or right answers). */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <kv/sstable.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[64];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0]) {
        snprintf(path, sizeof path, "/tmp/kv-fuzz-table-%ld.sst", (long)getpid());
    }
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    kv_sst_cache *cache = NULL;
    kv_sst_cache_new(1 << 16, &cache);
    kv_sst_reader *r;
    if (kv_sst_reader_open(path, cache, 1, &r) == KV_OK) {
        static const char *keys[] = {"", "a", "key00001", "key00050", "zzzz", "\xff"};
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
            void *val;
            size_t vlen;
            if (kv_sst_get(r, keys[i], strlen(keys[i]), &val, &vlen) == KV_OK)
                kv_free(val);
        }
        kv_sst_iter *it;
        if (kv_sst_iter_new(r, &it) == KV_OK) {
            size_t n = 0;
            for (kv_sst_iter_seek_first(it); kv_sst_iter_valid(it) && n < 100000; kv_sst_iter_next(it))
                n++;
            kv_sst_iter_seek(it, "key0002", 7);
            kv_sst_iter_free(it);
        }
        kv_sst_verify(r);
        kv_sst_reader_close(r);
    }
    kv_sst_cache_free(cache);
    unlink(path);
    return 0;
}
