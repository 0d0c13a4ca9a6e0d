/* sstbench - one SSTable measured on its own: size against raw data for
 * each compression, opens per second, and gets per second of present and
 * absent keys with the block cache on and off, with the preads each get
 * costs.
 *
 *   sstbench [--entries N] [--value_size V] [--bits_per_key B] [--dir D]
 *
 * Keys are 16-byte big-endian counters ("key" + 13 digits would sort the
 * same); values V bytes of half-compressible data. Absent keys sit between
 * present ones, so they fall inside the table's key range and reach the
 * filter. */
#define _POSIX_C_SOURCE 200809L
#include <kv/sstable.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Present key i is 2i, absent key i is 2i + 1: both 16 bytes big-endian. */
static void make_key(uint64_t v, uint8_t k[16])
{
    memset(k, 0, 8);
    for (int b = 0; b < 8; b++)
        k[8 + b] = (uint8_t)(v >> (56 - 8 * b));
}

static int build(const char *path, uint64_t n, size_t vsize, int compression, double bpk)
{
    kv_sst_options o;
    kv_sst_options_init(&o);
    o.compression = compression;
    o.bits_per_key = bpk;
    unlink(path);
    kv_sst_writer *w;
    int rc = kv_sst_writer_new(path, &o, &w);
    uint8_t key[16], *val = malloc(vsize ? vsize : 1);
    for (uint64_t i = 0; rc == KV_OK && i < n; i++) {
        uint64_t x = mix(i);
        for (size_t j = 0; j < vsize; j++)
            val[j] = j < vsize / 2 ? (uint8_t)(x >> (8 * (j % 8))) : 'v';
        make_key(2 * i, key);
        rc = kv_sst_writer_add(w, key, 16, val, vsize);
    }
    free(val);
    if (rc == KV_OK)
        return kv_sst_writer_finish(w, NULL);
    kv_sst_writer_abandon(w);
    return rc;
}

static void gets(const char *path, uint64_t n, size_t cache_bytes, int absent, uint64_t q)
{
    kv_sst_cache *c = NULL;
    kv_sst_reader *r;
    if (kv_sst_cache_new(cache_bytes, &c) != KV_OK ||
        kv_sst_reader_open(path, c, 1, &r) != KV_OK) {
        fprintf(stderr, "sstbench: open: %s\n", kv_sst_error_text());
        exit(1);
    }
    uint8_t key[16];
    uint64_t found = 0;
    double t0 = now_s();
    for (uint64_t i = 0; i < q; i++) {
        make_key(2 * (mix(i + (uint64_t)absent * 77) % n) + (uint64_t)absent, key);
        void *val;
        size_t vlen;
        if (kv_sst_get(r, key, 16, &val, &vlen) == KV_OK) {
            found++;
            kv_free(val);
        }
    }
    double dt = now_s() - t0;
    kv_sst_counters cnt;
    kv_sst_reader_counters(r, &cnt);
    printf("  %-7s keys, cache %-9s %10.0f gets/s  found %llu/%llu  preads/get %.4f  "
           "cache hits/get %.4f  filter negatives %llu\n",
           absent ? "absent" : "present", cache_bytes ? "on" : "off (0)", (double)q / dt,
           (unsigned long long)found, (unsigned long long)q,
           (double)cnt.data_block_reads / (double)q, (double)cnt.cache_hits / (double)q,
           (unsigned long long)cnt.filter_negatives);
    kv_sst_reader_close(r);
    kv_sst_cache_free(c);
}

int main(int argc, char **argv)
{
    uint64_t n = 1000000;
    size_t vsize = 100;
    double bpk = 10;
    const char *dir = "/tmp";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--entries"))
            n = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--value_size"))
            vsize = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--bits_per_key"))
            bpk = strtod(argv[i + 1], NULL);
        else if (!strcmp(argv[i], "--dir"))
            dir = argv[i + 1];
        else {
            fprintf(stderr, "usage: sstbench [--entries N] [--value_size V] [--bits_per_key B] [--dir D]\n");
            return 2;
        }
    }
    if (n == 0) {
        fprintf(stderr, "sstbench: --entries must be > 0\n");
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/sstbench-%ld.sst", dir, (long)getpid());
    printf("sstbench: %llu entries, 16-byte keys, %zu-byte values, %g bits/key\n",
           (unsigned long long)n, vsize, bpk);
    for (int comp = KV_COMPRESSION_NONE; comp <= KV_COMPRESSION_ZSTD; comp++) {
        double t0 = now_s();
        if (build(path, n, vsize, comp, bpk) != KV_OK) {
            fprintf(stderr, "sstbench: build failed: %s\n", kv_sst_error_text());
            return 1;
        }
        double dt = now_s() - t0;
        kv_sst_reader *r;
        if (kv_sst_reader_open(path, NULL, 1, &r) != KV_OK)
            return 1;
        kv_sst_properties p;
        kv_sst_reader_properties(r, &p);
        uint64_t raw = p.raw_key_bytes + p.raw_value_bytes;
        printf("\n%s: file %llu bytes for %llu raw bytes of keys and values (%.3f), "
               "filter k=%u expected FPR %.4f%%, built at %.0f adds/s\n",
               comp ? "zstd" : "none", (unsigned long long)p.file_size, (unsigned long long)raw,
               (double)p.file_size / (double)raw, p.filter_k, 100 * p.filter_expected_fpr,
               (double)n / dt);
        kv_sst_reader_close(r);
        int opens = 200;
        t0 = now_s();
        for (int i = 0; i < opens; i++) {
            if (kv_sst_reader_open(path, NULL, 1, &r) != KV_OK)
                return 1;
            kv_sst_reader_close(r);
        }
        printf("  opens: %.0f/s\n", opens / (now_s() - t0));
        uint64_t q = n < 1000000 ? n : 1000000;
        for (int absent = 0; absent <= 1; absent++) {
            gets(path, n, (size_t)64 << 20, absent, q);
            gets(path, n, 0, absent, q);
        }
    }
    unlink(path);
    return 0;
}
