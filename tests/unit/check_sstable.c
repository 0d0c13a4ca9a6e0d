/* check_sstable.c - tables end to end: round trips over compressions and
 * block sizes, filter-gated gets (no I/O on a filter "no"), iterators,
 * damaged files, injected I/O faults, the block cache, and a pool of open
 * files smaller than the tables it serves. */
#define _XOPEN_SOURCE 700 /* POSIX 2008 */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <kv/range_filter.h>
#include <kv/sstable.h>

#include "util/coding.h"
#include "util/hash.h" /* kv_hash_key: the hashes a store's filter holds */
#include "util/tally.h" /* KV_TALLY_STRIPES: how many threads to start */
#include "../sstable/cache.h" /* the block cache's own interface */
#include "../sstable/format.h"   /* offsets, to forge properties */
#include "../sstable/internal.h" /* what the store alone calls */
#include "testing.h" /* kv_testing: fault injection, I/O counters */

#include "fixture.h"

static char path[128];

/* The fixture's directory, and the files the tests name in it. */
static void setup_files(void)
{
    test_setup();
    test_path(path, sizeof path, "000001.sst");
}

/* ---- a data set: sorted unique random binary keys, values made from the
 * key's index so they need not be stored ---------------------------------- */

struct key {
    uint8_t b[64];
    uint8_t len;
};

static int key_cmp(const void *pa, const void *pb)
{
    const struct key *a = pa, *b = pb;
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->b, b->b, n);
    return c ? c : (a->len > b->len) - (a->len < b->len);
}

static void random_key(uint64_t seed, struct key *k)
{
    uint64_t x = splitmix(seed);
    k->len = (uint8_t)(1 + x % 64);
    for (size_t i = 0; i < k->len; i += 8) {
        uint64_t w = splitmix(x + i);
        memcpy(k->b + i, &w, k->len - i < 8 ? k->len - i : 8);
    }
}

static struct key *make_keys(uint64_t seed, size_t want, size_t *n)
{
    struct key *k = malloc(want * sizeof *k);
    for (size_t i = 0; i < want; i++)
        random_key(seed * 1000003 + i, &k[i]);
    qsort(k, want, sizeof *k, key_cmp);
    size_t m = 0;
    for (size_t i = 0; i < want; i++)
        if (m == 0 || key_cmp(&k[m - 1], &k[i]) != 0)
            k[m++] = k[i];
    *n = m;
    return k;
}

/* Value i: mostly short, 1% up to 64 KiB, and `big` of them 4 MiB. */
static size_t value_len(size_t i, size_t n, int big)
{
    if (big && i % (n / 3 + 1) == n / 7)
        return (size_t)4 << 20;
    uint64_t x = splitmix(i ^ 0xABCDEF);
    return x % 100 == 0 ? (size_t)(x >> 32) % 65537 : (size_t)(x >> 40) % 120;
}

static void fill_value(size_t i, uint8_t *v, size_t len)
{
    uint64_t x = splitmix(i);
    for (size_t j = 0; j < len; j++) {
        if (j % 8 == 0)
            x = splitmix(x);
        v[j] = (uint8_t)(j % 3 ? 'a' + (x >> (j % 8)) % 4 : x >> 8); /* compressible-ish */
    }
}

static void write_table(const char *p, const struct key *k, size_t n, int big,
                        const kv_sst_options *o)
{
    kv_sst_writer *w;
    ck_assert_int_eq(kv_sst_writer_new(p, o, &w), KV_OK);
    uint8_t *v = malloc((size_t)4 << 20);
    for (size_t i = 0; i < n; i++) {
        size_t vl = value_len(i, n, big);
        fill_value(i, v, vl);
        ck_assert_int_eq(kv_sst_writer_add(w, k[i].b, k[i].len, v, vl), KV_OK);
    }
    free(v);
    uint64_t size;
    ck_assert_int_eq(kv_sst_writer_finish(w, &size), KV_OK);
    ck_assert_uint_gt(size, 0);
}

static int value_matches(size_t i, size_t n, int big, const void *val, size_t vlen, uint8_t *tmp)
{
    size_t want = value_len(i, n, big);
    if (vlen != want)
        return 0;
    fill_value(i, tmp, want);
    return want == 0 || memcmp(tmp, val, want) == 0;
}

/* ---- round trip -------------------------------------------------------------------- */

static void round_trip(int compression, size_t block_size, size_t want, int big)
{
    size_t n;
    struct key *k = make_keys(block_size + (size_t)compression, want, &n);
    kv_sst_options o;
    kv_sst_options_init(&o);
    o.compression = compression;
    o.block_size = block_size;
    o.note = "round trip";
    write_table(path, k, n, big, &o);

    /* Opening reads the trailer, index, properties and filter: 4 reads,
     * whatever the table's size. */
    kv_file_stats f0, f1;
    kv_file_counters(&f0);
    kv_sst_reader *r;
    ck_assert_int_eq(kv_sst_reader_open(path, NULL, 1, &r), KV_OK);
    kv_file_counters(&f1);
    ck_assert_uint_eq(f1.calls[KV_FILE_READ] - f0.calls[KV_FILE_READ], 4);
    kv_sst_properties p;
    kv_sst_reader_properties(r, &p);
    ck_assert_uint_eq(p.entries, n);
    ck_assert_uint_eq(p.filter_keys, n);
    ck_assert_str_eq(p.note, "round trip");
    ck_assert_uint_eq(p.smallest_len, k[0].len);
    ck_assert(!memcmp(p.smallest, k[0].b, k[0].len));
    ck_assert(!memcmp(p.largest, k[n - 1].b, k[n - 1].len));
    if (compression == KV_COMPRESSION_ZSTD)
        ck_assert_uint_lt(p.data_stored_bytes, p.data_raw_bytes);
    else
        ck_assert_uint_eq(p.data_stored_bytes, p.data_raw_bytes);

    uint8_t *tmp = malloc((size_t)4 << 20);
    for (size_t i = 0; i < n; i++) {
        void *val;
        size_t vlen;
        ck_assert_int_eq(kv_sst_get(r, k[i].b, k[i].len, &val, &vlen), KV_OK);
        ck_assert_msg(value_matches(i, n, big, val, vlen, tmp), "value of key %zu", i);
        kv_free(val);
    }

    /* Absent keys: filter negatives cost no read; every read is a false
     * positive; the false-positive rate is near the expected one. */
    kv_sst_counters before, after;
    kv_sst_reader_counters(r, &before);
    size_t absent = 0;
    for (size_t i = 0; absent < want; i++) {
        struct key q;
        random_key(0x5151515151ull + i, &q);
        if (bsearch(&q, k, n, sizeof *k, key_cmp))
            continue;
        absent++;
        void *val;
        size_t vlen;
        ck_assert_int_eq(kv_sst_get(r, q.b, q.len, &val, &vlen), KV_NOTFOUND);
    }
    kv_sst_reader_counters(r, &after);
    uint64_t checks = after.filter_checks - before.filter_checks;
    uint64_t fps = after.filter_false_positives - before.filter_false_positives;
    uint64_t reads = after.data_block_reads - before.data_block_reads;
    ck_assert_uint_eq(reads, fps);
    ck_assert_uint_eq(after.filter_negatives - before.filter_negatives + fps, checks);
    ck_assert_uint_gt(checks, absent * 9 / 10);
    double fpr = (double)fps / (double)checks;
    ck_assert_msg(fpr > p.filter_expected_fpr * 0.75 && fpr < p.filter_expected_fpr * 1.25,
                  "measured FPR %g, expected %g", fpr, p.filter_expected_fpr);

    /* Full scan equals the input; seeks land on the first key >= probe. */
    kv_sst_iter *it;
    ck_assert_int_eq(kv_sst_iter_new(r, &it), KV_OK);
    size_t i = 0;
    for (kv_sst_iter_seek_first(it); kv_sst_iter_valid(it); kv_sst_iter_next(it), i++) {
        size_t kl, vl;
        const void *kk = kv_sst_iter_key(it, &kl);
        const void *vv = kv_sst_iter_value(it, &vl);
        ck_assert_uint_lt(i, n);
        ck_assert_uint_eq(kl, k[i].len);
        ck_assert(!memcmp(kk, k[i].b, kl));
        ck_assert(value_matches(i, n, big, vv, vl, tmp));
    }
    ck_assert_int_eq(kv_sst_iter_status(it), KV_OK);
    ck_assert_uint_eq(i, n);
    /* Backward: every key, last to first. */
    i = n;
    for (kv_sst_iter_seek_last(it); kv_sst_iter_valid(it); kv_sst_iter_prev(it)) {
        size_t kl;
        const void *kk = kv_sst_iter_key(it, &kl);
        ck_assert_uint_gt(i, 0);
        i--;
        ck_assert_uint_eq(kl, k[i].len);
        ck_assert(!memcmp(kk, k[i].b, kl));
    }
    ck_assert_int_eq(kv_sst_iter_status(it), KV_OK);
    ck_assert_uint_eq(i, 0);
    for (int t = 0; t < 10000; t++) {
        struct key q;
        random_key(0x77777ull + (uint64_t)t, &q);
        q.len = (uint8_t)(q.len % 8 + 1); /* short probes fall between keys */
        size_t lo = 0, hi = n;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (key_cmp(&k[mid], &q) < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        /* The last key < probe is k[lo - 1]. */
        kv_sst_iter_seek_before(it, q.b, q.len);
        if (lo == 0)
            ck_assert(!kv_sst_iter_valid(it));
        else {
            size_t bl;
            const void *bk = kv_sst_iter_key(it, &bl);
            ck_assert(kv_sst_iter_valid(it));
            ck_assert_uint_eq(bl, k[lo - 1].len);
            ck_assert(!memcmp(bk, k[lo - 1].b, bl));
        }
        kv_sst_iter_seek(it, q.b, q.len);
        if (lo == n) {
            ck_assert(!kv_sst_iter_valid(it));
            continue;
        }
        size_t kl;
        const void *kk = kv_sst_iter_key(it, &kl);
        ck_assert(kv_sst_iter_valid(it));
        ck_assert_uint_eq(kl, k[lo].len);
        ck_assert(!memcmp(kk, k[lo].b, kl));
    }
    /* next and prev in random alternation, runs of either up to 40 steps
     * (a step back within a restart interval is served from what the
     * cursor kept of it; a step forward in between must not spoil it),
     * off both ends and back: every entry where the model says. */
    uint64_t st = 0xBAC4 + block_size;
    for (int walk = 0; walk < 10; walk++) {
        size_t at = (size_t)(splitmix(st++) % n);
        kv_sst_iter_seek(it, k[at].b, k[at].len);
        int valid = 1;
        for (int step = 0; step < 500; step++) {
            int fwd = (splitmix(st++) & 3) == 0; /* runs: mostly back */
            unsigned run = 1 + (unsigned)(splitmix(st++) % 40);
            for (unsigned j = 0; j < run && valid; j++) {
                if (fwd) {
                    kv_sst_iter_next(it);
                    valid = ++at < n;
                } else {
                    kv_sst_iter_prev(it);
                    valid = at-- > 0;
                }
                ck_assert_int_eq(kv_sst_iter_valid(it), valid);
                if (!valid)
                    break;
                size_t kl, vl;
                const void *kk = kv_sst_iter_key(it, &kl);
                const void *vv = kv_sst_iter_value(it, &vl);
                ck_assert_uint_eq(kl, k[at].len);
                ck_assert(!memcmp(kk, k[at].b, kl));
                ck_assert(value_matches(at, n, big, vv, vl, tmp));
            }
            if (!valid) { /* off an end: come back in */
                at = fwd ? n - 1 : 0;
                if (fwd)
                    kv_sst_iter_seek_last(it);
                else
                    kv_sst_iter_seek_first(it);
                valid = 1;
            }
        }
    }
    ck_assert_int_eq(kv_sst_iter_status(it), KV_OK);
    kv_sst_iter_free(it);
    ck_assert_int_eq(kv_sst_verify(r), KV_OK);
    kv_sst_reader_close(r);
    free(tmp);
    free(k);
}

START_TEST(round_trip_zstd_4k) { round_trip(KV_COMPRESSION_ZSTD, 4096, 200000, 1); }
END_TEST
START_TEST(round_trip_none_4k) { round_trip(KV_COMPRESSION_NONE, 4096, 200000, 1); }
END_TEST
START_TEST(round_trip_zstd_1k) { round_trip(KV_COMPRESSION_ZSTD, 1024, 200000, 0); }
END_TEST
START_TEST(round_trip_none_64k) { round_trip(KV_COMPRESSION_NONE, 65536, 200000, 0); }
END_TEST
START_TEST(round_trip_zstd_64k) { round_trip(KV_COMPRESSION_ZSTD, 65536, 200000, 0); }
END_TEST
START_TEST(round_trip_none_1k) { round_trip(KV_COMPRESSION_NONE, 1024, 200000, 0); }
END_TEST

START_TEST(edge_cases)
{
    kv_sst_writer *w;
    ck_assert_int_eq(kv_sst_writer_new(path, NULL, &w), KV_OK);
    ck_assert_int_eq(kv_sst_writer_add(w, "", 0, "empty key", 9), KV_OK);
    ck_assert_int_eq(kv_sst_writer_add(w, "\0", 1, "", 0), KV_OK);
    ck_assert_int_eq(kv_sst_writer_add(w, "\0", 1, "x", 1), KV_EINVAL); /* not increasing */
    ck_assert_int_eq(kv_sst_writer_add(w, "", 0, "x", 1), KV_EINVAL);
    size_t big = (size_t)16 << 20;
    uint8_t *v = malloc(big);
    memset(v, 7, big);
    ck_assert_int_eq(kv_sst_writer_add(w, "\0\0big", 5, v, big), KV_OK);
    ck_assert_int_eq(kv_sst_writer_finish(w, NULL), KV_OK);
    ck_assert_int_eq(kv_sst_writer_new(path, NULL, &w), KV_EINVAL); /* never overwrite */

    kv_sst_reader *r;
    ck_assert_int_eq(kv_sst_reader_open(path, NULL, 1, &r), KV_OK);
    void *val;
    size_t vlen;
    ck_assert_int_eq(kv_sst_get(r, "", 0, &val, &vlen), KV_OK);
    ck_assert_uint_eq(vlen, 9);
    kv_free(val);
    ck_assert_int_eq(kv_sst_get(r, "\0", 1, &val, &vlen), KV_OK);
    ck_assert_uint_eq(vlen, 0);
    kv_free(val);
    ck_assert_int_eq(kv_sst_get(r, "\0\0big", 5, &val, &vlen), KV_OK);
    ck_assert_uint_eq(vlen, big);
    ck_assert(!memcmp(val, v, big));
    kv_free(val);
    ck_assert_int_eq(kv_sst_get(r, "\0\0bif", 5, &val, &vlen), KV_NOTFOUND);
    ck_assert_int_eq(kv_sst_get(NULL, "", 0, &val, &vlen), KV_EINVAL);
    kv_sst_reader_close(r);
    free(v);

    /* An empty table, and one without a filter. */
    char p2[160];
    snprintf(p2, sizeof p2, "%s/empty.sst", test_dir);
    kv_sst_options o;
    kv_sst_options_init(&o);
    o.bits_per_key = 0;
    ck_assert_int_eq(kv_sst_writer_new(p2, &o, &w), KV_OK);
    ck_assert_int_eq(kv_sst_writer_finish(w, NULL), KV_OK);
    ck_assert_int_eq(kv_sst_reader_open(p2, NULL, 2, &r), KV_OK);
    ck_assert_int_eq(kv_sst_get(r, "a", 1, &val, &vlen), KV_NOTFOUND);
    ck_assert_int_eq(kv_sst_verify(r), KV_OK);
    kv_sst_reader_close(r);
    o.block_size = 1;
    ck_assert_int_eq(kv_sst_writer_new(p2, &o, &w), KV_EINVAL);
    ck_assert_int_eq(kv_sst_reader_open("/nonexistent/x.sst", NULL, 3, &r), KV_NOTFOUND);
}
END_TEST


/* ---- index search by key shape ------------------------------------------------------
 * The reader binary-searches its index on 8-byte words taken past the index
 * keys' common prefix, and falls back to whole keys on ties and for keys
 * outside that prefix. Each shape below drives one of those paths; the
 * filter is off, so every absent probe is decided by the index and block. */

/* Key i of a shape (len <= 64). */
static void shape_key(int shape, size_t i, size_t n, struct key *k)
{
    char buf[80];
    int len;
    switch (shape) {
    case 0: /* long shared prefix: the words start after "user:0000..." */
        len = snprintf(buf, sizeof buf, "user:%016zu", i);
        break;
    case 1: /* words that tie: 20 shared bytes after the first, then "b" */
        len = i + 1 == n ? snprintf(buf, sizeof buf, "b")
                         : snprintf(buf, sizeof buf, "a%s%06zu", "xxxxxxxxxxxxxxxxxxxx", i);
        break;
    case 2: /* keys shorter than 8 bytes past the prefix, with NUL bytes */
        buf[0] = 'k';
        buf[1] = (char)(i >> 8);
        buf[2] = (char)i;
        len = (int)(1 + i % 3);
        break;
    default: /* random binary of every length, as round_trip's */
        random_key(0x5ba9e + i, k);
        return;
    }
    memcpy(k->b, buf, (size_t)len);
    k->len = (uint8_t)len;
}

static int in_set(const struct key *k, size_t n, const uint8_t *b, size_t len)
{
    struct key probe = {.len = (uint8_t)len};
    memcpy(probe.b, b, len);
    return bsearch(&probe, k, n, sizeof *k, key_cmp) != NULL;
}

START_TEST(index_search_key_shapes)
{
    for (int shape = 0; shape < 4; shape++) {
        size_t want = 3000, n = 0;
        struct key *k = malloc(want * sizeof *k);
        for (size_t i = 0; i < want; i++)
            shape_key(shape, i, want, &k[i]);
        qsort(k, want, sizeof *k, key_cmp);
        for (size_t i = 0; i < want; i++)
            if (n == 0 || key_cmp(&k[n - 1], &k[i]) != 0)
                k[n++] = k[i];
        char p[160];
        snprintf(p, sizeof p, "%s/shape%d.sst", test_dir, shape);
        kv_sst_options o;
        kv_sst_options_init(&o);
        o.block_size = 256; /* an index of hundreds of entries */
        o.bits_per_key = 0;
        write_table(p, k, n, 0, &o);
        kv_sst_reader *r;
        ck_assert_int_eq(kv_sst_reader_open(p, NULL, 1, &r), KV_OK);
        kv_sst_iter *it;
        ck_assert_int_eq(kv_sst_iter_new(r, &it), KV_OK);
        uint8_t tmp[70000];
        for (size_t i = 0; i < n; i++) {
            void *val;
            size_t vlen;
            ck_assert_int_eq(kv_sst_get(r, k[i].b, k[i].len, &val, &vlen), KV_OK);
            ck_assert_msg(value_matches(i, n, 0, val, vlen, tmp), "shape %d key %zu", shape, i);
            kv_free(val);
            /* The key's immediate successor (key + NUL) and its prefix one
             * byte shorter: absent unless they are keys themselves. */
            uint8_t probe[65];
            memcpy(probe, k[i].b, k[i].len);
            probe[k[i].len] = 0;
            int rc = kv_sst_get(r, probe, k[i].len + 1u, &val, &vlen);
            ck_assert_int_eq(rc, in_set(k, n, probe, k[i].len + 1u) ? KV_OK : KV_NOTFOUND);
            if (rc == KV_OK)
                kv_free(val);
            kv_sst_iter_seek(it, probe, k[i].len + 1u); /* lands on key i + 1 */
            if (i + 1 < n) {
                size_t got;
                ck_assert(kv_sst_iter_valid(it));
                const void *at = kv_sst_iter_key(it, &got);
                ck_assert_uint_eq(got, k[i + 1].len);
                ck_assert(memcmp(at, k[i + 1].b, got) == 0);
            } else
                ck_assert(!kv_sst_iter_valid(it));
            if (k[i].len > 0) {
                rc = kv_sst_get(r, k[i].b, k[i].len - 1u, &val, &vlen);
                ck_assert_int_eq(rc, in_set(k, n, k[i].b, k[i].len - 1u) ? KV_OK : KV_NOTFOUND);
                if (rc == KV_OK)
                    kv_free(val);
            }
        }
        ck_assert_int_eq(kv_sst_iter_status(it), KV_OK);
        kv_sst_iter_free(it);
        kv_sst_reader_close(r);
        free(k);
    }
}
END_TEST

/* ---- approximate offsets ----------------------------------------------------------
 * kv_sst_approximate_offset answers from the in-memory index: the offset
 * of the block that holds the first key >= the probe. */

static void approximate_offsets(int compression)
{
    const size_t n = 5000, vlen = 100;
    kv_sst_options o;
    kv_sst_options_init(&o);
    o.compression = compression;
    o.block_size = 1024;
    kv_sst_writer *w;
    ck_assert_int_eq(kv_sst_writer_new(path, &o, &w), KV_OK);
    uint8_t v[100];
    char key[32];
    for (size_t i = 0; i < n; i++) {
        int len = snprintf(key, sizeof key, "key%08zu", i);
        fill_value(i, v, vlen);
        ck_assert_int_eq(kv_sst_writer_add(w, key, (size_t)len, v, vlen), KV_OK);
    }
    ck_assert_int_eq(kv_sst_writer_finish(w, NULL), KV_OK);
    kv_sst_reader *r;
    ck_assert_int_eq(kv_sst_reader_open(path, NULL, 1, &r), KV_OK);
    kv_sst_properties p;
    kv_sst_reader_properties(r, &p);
    ck_assert_uint_gt(p.data_blocks, 20);

    kv_file_stats f0, f1;
    kv_sst_counters c0, c1;
    kv_file_counters(&f0);
    kv_sst_reader_counters(r, &c0);

    /* Before the first key: 0; past the last: the end of the data, which
     * holds every stored data byte and lies before the end of the file. */
    uint64_t off = 99, end;
    ck_assert_int_eq(kv_sst_approximate_offset(r, NULL, 0, &off), KV_OK);
    ck_assert_uint_eq(off, 0);
    ck_assert_int_eq(kv_sst_approximate_offset(r, "a", 1, &off), KV_OK);
    ck_assert_uint_eq(off, 0);
    ck_assert_int_eq(kv_sst_approximate_offset(r, "key00000000", 11, &off), KV_OK);
    ck_assert_uint_eq(off, 0);
    ck_assert_int_eq(kv_sst_approximate_offset(r, "kez", 3, &end), KV_OK);
    ck_assert_uint_ge(end, p.data_stored_bytes);
    ck_assert_uint_lt(end, p.file_size);
    ck_assert_int_eq(kv_sst_approximate_offset(r, "\xff\xff", 2, &off), KV_OK);
    ck_assert_uint_eq(off, end);
    ck_assert_uint_eq(kv_sst_reader_data_end(r), end);
    ck_assert_uint_eq(kv_sst_reader_data_end(NULL), 0);

    /* Every key: offsets never fall, take one value per data block, and
     * a key between two keys (the successor of the first: key + NUL) gets
     * the second's offset. Uncompressed equal entries spread evenly, so
     * key i's offset is i/n of the data, to within a block or two. */
    uint64_t prev = 0, distinct = 0;
    for (size_t i = 0; i < n; i++) {
        int len = snprintf(key, sizeof key, "key%08zu", i);
        ck_assert_int_eq(kv_sst_approximate_offset(r, key, (size_t)len, &off), KV_OK);
        ck_assert_uint_ge(off, prev);
        ck_assert_uint_lt(off, end);
        distinct += i == 0 || off != prev;
        if (i > 0) {
            char between[32];
            int blen = snprintf(between, sizeof between, "key%08zu", i - 1);
            between[blen] = '\0';
            uint64_t boff;
            ck_assert_int_eq(kv_sst_approximate_offset(r, between, (size_t)blen + 1, &boff),
                             KV_OK);
            ck_assert_uint_eq(boff, off);
        }
        if (compression == KV_COMPRESSION_NONE) {
            double want = (double)i * (double)end / (double)n;
            ck_assert_msg((double)off > want - 2.0 * 1100 && (double)off < want + 2.0 * 1100,
                          "key %zu at %llu, expected near %.0f", i, (unsigned long long)off, want);
        }
        prev = off;
    }
    ck_assert_uint_eq(distinct, p.data_blocks);

    /* None of it read the file or a block. */
    kv_file_counters(&f1);
    kv_sst_reader_counters(r, &c1);
    ck_assert_uint_eq(f1.calls[KV_FILE_READ], f0.calls[KV_FILE_READ]);
    ck_assert_uint_eq(c1.data_block_reads, c0.data_block_reads);
    ck_assert_uint_eq(c1.cache_hits, c0.cache_hits);

    ck_assert_int_eq(kv_sst_approximate_offset(NULL, "a", 1, &off), KV_EINVAL);
    ck_assert_int_eq(kv_sst_approximate_offset(r, "a", 1, NULL), KV_EINVAL);
    ck_assert_int_eq(kv_sst_approximate_offset(r, NULL, 1, &off), KV_EINVAL);
    ck_assert_ptr_nonnull(strstr(kv_sst_error_text(), "kv_sst_approximate_offset"));
    kv_sst_reader_close(r);

    /* An empty table has no data: every key is at 0. */
    char p2[160];
    snprintf(p2, sizeof p2, "%s/empty.sst", test_dir);
    ck_assert_int_eq(kv_sst_writer_new(p2, &o, &w), KV_OK);
    ck_assert_int_eq(kv_sst_writer_finish(w, NULL), KV_OK);
    ck_assert_int_eq(kv_sst_reader_open(p2, NULL, 2, &r), KV_OK);
    off = 99;
    ck_assert_int_eq(kv_sst_approximate_offset(r, "m", 1, &off), KV_OK);
    ck_assert_uint_eq(off, 0);
    ck_assert_uint_eq(kv_sst_reader_data_end(r), 0);
    kv_sst_reader_close(r);
}

START_TEST(approximate_offsets_uncompressed) { approximate_offsets(KV_COMPRESSION_NONE); }
END_TEST
START_TEST(approximate_offsets_zstd) { approximate_offsets(KV_COMPRESSION_ZSTD); }
END_TEST

/* The store's lookup: keys "<user key>|" + a one-byte version, newest
 * (highest byte) first, filter entries given by the caller per user key. */
static uint64_t user_hash(unsigned u)
{
    return splitmix(0x5eed0000u + u);
}

START_TEST(prefixed_lookup_with_caller_hashes)
{
    enum { USERS = 2000, VERSIONS = 3 };
    kv_sst_options o;
    kv_sst_options_init(&o);
    o.block_size = 512;
    kv_sst_writer *w;
    ck_assert_int_eq(kv_sst_writer_new(path, &o, &w), KV_OK);
    for (unsigned u = 0; u < USERS; u++)
        for (int v = VERSIONS - 1; v >= 0; v--) {
            char k[16], val[16];
            snprintf(k, sizeof k, "u%05u|", 2 * u); /* even user keys only */
            k[7] = (char)(0xF0 - v);                /* newer versions sort first */
            int vl = snprintf(val, sizeof val, "%u/%d", 2 * u, v);
            ck_assert_int_eq(kv_sst_writer_add_hashed(w, k, 8, val, (size_t)vl, user_hash(2 * u)),
                             KV_OK);
        }
    /* One table, one kind of filter entry. */
    ck_assert_int_eq(kv_sst_writer_add(w, "v", 1, "x", 1), KV_EINVAL);
    ck_assert_int_eq(kv_sst_writer_finish(w, NULL), KV_OK);

    kv_sst_reader *r;
    ck_assert_int_eq(kv_sst_reader_open(path, NULL, 1, &r), KV_OK);
    kv_sst_properties p;
    kv_sst_reader_properties(r, &p);
    ck_assert_int_eq(p.filter_hash, KV_SST_FILTER_HASH_CALLER);
    ck_assert_uint_eq(p.entries, USERS * VERSIONS);
    ck_assert_uint_eq(p.filter_keys, USERS); /* equal consecutive hashes count once */
    ck_assert(p.filter_bytes > 0 && p.filter_bits >= 8 * USERS);

    uint64_t fp = 0, reads = 0, negatives = 0;
    for (unsigned u = 0; u < 2 * USERS; u++) {
        char k[16];
        snprintf(k, sizeof k, "u%05u|", u);
        k[7] = 0x00; /* below every version: the newest one is found */
        void *val;
        size_t vlen, slen = 99;
        uint8_t suffix[4];
        kv_sst_probe pr;
        int rc = kv_sst_seek_prefixed(r, k, 8, 7, user_hash(u), &pr, &val, &vlen, suffix,
                                      sizeof suffix, &slen);
        if (u % 2 == 0) {
            ck_assert_int_eq(rc, KV_OK); /* never a false negative */
            char want[16];
            int wl = snprintf(want, sizeof want, "%u/%d", u, VERSIONS - 1);
            ck_assert_uint_eq(vlen, (size_t)wl);
            ck_assert(!memcmp(val, want, vlen));
            ck_assert_uint_eq(slen, 1);
            ck_assert_uint_eq(suffix[0], 0xF0 - (VERSIONS - 1));
            kv_free(val);
            /* Past the newest version: the next one. */
            k[7] = (char)(0xF0 - (VERSIONS - 1) + 1);
            ck_assert_int_eq(kv_sst_seek_prefixed(r, k, 8, 7, user_hash(u), NULL, &val, &vlen,
                                                  suffix, sizeof suffix, &slen), KV_OK);
            ck_assert_uint_eq(suffix[0], 0xF0 - (VERSIONS - 2));
            kv_free(val);
            /* Past every version: nothing with this prefix. */
            k[7] = (char)0xF1;
            ck_assert_int_eq(kv_sst_seek_prefixed(r, k, 8, 7, user_hash(u), NULL, &val, &vlen,
                                                  NULL, 0, NULL), KV_NOTFOUND);
            /* kv_sst_get cannot use caller hashes: it reads, and finds. */
            k[7] = (char)0xF0;
            ck_assert_int_eq(kv_sst_get(r, k, 8, &val, &vlen), KV_OK);
            kv_free(val);
        } else {
            ck_assert_int_eq(rc, KV_NOTFOUND);
            if (u == 2 * USERS - 1) { /* past the largest key: no filter check, no I/O */
                ck_assert(!pr.filter_checked && !pr.block_read);
                continue;
            }
            ck_assert(pr.filter_checked);
            ck_assert(pr.filter_negative || pr.false_positive);
            ck_assert_int_eq(pr.block_read, pr.false_positive);
            fp += (uint64_t)pr.false_positive;
            reads += (uint64_t)pr.block_read;
            negatives += (uint64_t)pr.filter_negative;
        }
    }
    ck_assert_uint_eq(fp, reads);
    ck_assert_uint_eq(fp + negatives, USERS - 1);
    ck_assert(fp < USERS / 20); /* ~0.8% expected at 10 bits/key */
    ck_assert_int_eq(kv_sst_verify(r), KV_OK);
    kv_sst_reader_close(r);
}
END_TEST

/* kv_sst_seek_gate_many, _prefetch_many and _gated_many on sorted keys
 * with repeats (present, absent, past the largest key, between versions)
 * give each key what kv_sst_seek_gate and kv_sst_seek_gated give it, one
 * after the other on a twin reader of the same file: rc, value, suffix,
 * probe, and the readers' counters -- with zstd blocks through a block
 * cache (a shared block counts a hit) and uncompressed blocks read in
 * place (it counts a read), and with in_range set for the keys inside the
 * range, which must change nothing. */
static void batched_lookups(int compression, int in_range)
{
    enum { USERS = 2000, VERSIONS = 3, N = 700 };
    kv_sst_options o;
    kv_sst_options_init(&o);
    o.block_size = 512;
    o.compression = compression;
    kv_sst_writer *w;
    ck_assert_int_eq(kv_sst_writer_new(path, &o, &w), KV_OK);
    for (unsigned u = 0; u < USERS; u++)
        for (int v = VERSIONS - 1; v >= 0; v--) {
            char k[16], val[16];
            snprintf(k, sizeof k, "u%05u|", 2 * u + 2); /* even users from 2 */
            k[7] = (char)(0xF0 - v);
            int vl = snprintf(val, sizeof val, "%u/%d", 2 * u + 2, v);
            ck_assert_int_eq(kv_sst_writer_add_hashed(w, k, 8, val, (size_t)vl,
                                                      user_hash(2 * u + 2)),
                             KV_OK);
        }
    ck_assert_int_eq(kv_sst_writer_finish(w, NULL), KV_OK);
    kv_sst_cache *c1 = NULL, *c2 = NULL;
    ck_assert_int_eq(kv_sst_cache_new(1 << 20, &c1), KV_OK);
    ck_assert_int_eq(kv_sst_cache_new(1 << 20, &c2), KV_OK);
    kv_sst_reader *rm, *r1;
    ck_assert_int_eq(kv_sst_reader_open(path, c1, 1, &rm), KV_OK);
    ck_assert_int_eq(kv_sst_reader_open(path, c2, 1, &r1), KV_OK);

    /* Sorted keys: users 0 .. 2 * USERS + 3 (0, the odd ones and those
     * past 2 * USERS are absent, the last few past the table), each below
     * its newest version, past it, or past every version; some twice. */
    static uint8_t keys[N][8];
    static kv_sst_seek_req reqs[N];
    static kv_sst_seek_req *rp[N];
    uint8_t suffix[N][2];
    uint64_t rng = 0xBA7C4;
    unsigned u = 0;
    for (size_t j = 0; j < N; j++) {
        rng = splitmix(rng);
        if (j > 0 && rng % 4) /* else a repeat of the key before */
            u += (unsigned)(rng >> 8) % 20;
        if (u > 2 * USERS + 3)
            u = 2 * USERS + 3;
        snprintf((char *)keys[j], 8, "u%05u", u);
        keys[j][6] = '|';
        keys[j][7] = rng % 3 == 0 ? 0x00 : rng % 3 == 1 ? 0xF1 - VERSIONS + 1 : 0xF1;
        if (j > 0 && !(rng % 4))
            memcpy(keys[j], keys[j - 1], 8);
        reqs[j] = (kv_sst_seek_req){.key = keys[j], .klen = 8, .prefix_len = 7,
                                    .filter_hash = user_hash((unsigned)atoi((char *)keys[j] + 1)),
                                    .suffix = suffix[j], .suffix_cap = sizeof suffix[j]};
        unsigned ku = (unsigned)atoi((char *)keys[j] + 1);
        reqs[j].in_range = in_range && ku >= 2 && ku < 2 * USERS;
        rp[j] = &reqs[j];
    }
    ck_assert_int_eq(kv_sst_seek_gate_many(rm, rp, N), KV_OK);
    size_t np = 0;
    static kv_sst_seek_req *pass[N];
    for (size_t j = 0; j < N; j++)
        if (reqs[j].rc == KV_OK)
            pass[np++] = &reqs[j];
    kv_sst_seek_prefetch_many(rm, pass, np, 0);
    kv_sst_seek_prefetch_many(rm, pass, np, 1);
    ck_assert_int_eq(kv_sst_seek_gated_many(rm, pass, np), KV_OK);

    size_t found = 0, shared = 0;
    for (size_t j = 0; j < N; j++) {
        kv_sst_probe pr;
        void *val = NULL;
        size_t vlen = 0, slen = 0;
        uint8_t suf[2];
        int rc = kv_sst_seek_gate(r1, keys[j], 8, 7, reqs[j].filter_hash, &pr);
        if (rc == KV_OK)
            rc = kv_sst_seek_gated(r1, keys[j], 8, 7, &pr, &val, &vlen, suf, sizeof suf, &slen);
        const kv_sst_seek_req *q = &reqs[j];
        ck_assert_msg(q->rc == rc, "key %zu (%.6s %02x): %s, alone %s", j, (char *)keys[j],
                      keys[j][7], kv_strerror(q->rc), kv_strerror(rc));
        const kv_sst_probe *qp = &q->probe;
        ck_assert_msg(qp->filter_checked == pr.filter_checked &&
                          qp->filter_negative == pr.filter_negative &&
                          qp->false_positive == pr.false_positive &&
                          qp->block_read == pr.block_read && qp->cache_hit == pr.cache_hit &&
                          qp->bytes_read == pr.bytes_read &&
                          qp->block_offset == pr.block_offset &&
                          qp->block_bytes == pr.block_bytes,
                      "key %zu: probes differ", j);
        ck_assert_uint_eq(q->vlen, vlen);
        ck_assert_uint_eq(q->suffix_len, slen);
        if (rc == KV_OK) {
            found++;
            ck_assert(!memcmp(q->val, val, vlen) && !memcmp(q->suffix, suf, 1));
        } else
            ck_assert_ptr_null(q->val);
        shared += j > 0 && rc == KV_OK && q->probe.block_offset == reqs[j - 1].probe.block_offset;
        kv_free(val);
        kv_free(q->val);
    }
    ck_assert_uint_gt(found, N / 5);
    ck_assert_uint_gt(shared, N / 10);
    kv_sst_counters a, b;
    kv_sst_reader_counters(rm, &a);
    kv_sst_reader_counters(r1, &b);
    ck_assert_uint_eq(a.gets, b.gets);
    ck_assert_uint_eq(a.filter_checks, b.filter_checks);
    ck_assert_uint_eq(a.filter_negatives, b.filter_negatives);
    ck_assert_uint_eq(a.filter_false_positives, b.filter_false_positives);
    ck_assert_uint_eq(a.data_block_reads, b.data_block_reads);
    ck_assert_uint_eq(a.bytes_read, b.bytes_read);
    ck_assert_uint_eq(a.cache_hits, b.cache_hits);
    ck_assert_uint_gt(compression == KV_COMPRESSION_ZSTD ? a.cache_hits : a.data_block_reads,
                      N / 10);

    /* Bad arguments: the call, or the one req. */
    ck_assert_int_eq(kv_sst_seek_gate_many(NULL, rp, 1), KV_EINVAL);
    ck_assert_int_eq(kv_sst_seek_gated_many(rm, NULL, 1), KV_EINVAL);
    ck_assert_int_eq(kv_sst_seek_gate_many(rm, NULL, 0), KV_OK);
    reqs[0].key = NULL;
    ck_assert_int_eq(kv_sst_seek_gate_many(rm, rp, 2), KV_OK);
    ck_assert_int_eq(reqs[0].rc, KV_EINVAL);
    ck_assert_int_ne(reqs[1].rc, KV_EINVAL);
    kv_sst_reader_close(rm);
    kv_sst_reader_close(r1);
    kv_sst_cache_free(c1);
    kv_sst_cache_free(c2);
}

START_TEST(batched_lookups_zstd_cached) { batched_lookups(KV_COMPRESSION_ZSTD, 0); }
END_TEST
START_TEST(batched_lookups_in_place) { batched_lookups(KV_COMPRESSION_NONE, 0); }
END_TEST
START_TEST(batched_lookups_in_range) { batched_lookups(KV_COMPRESSION_NONE, 1); }
END_TEST

/* Tables written before the properties block had its filter_hash field
 * (properties version 1): the seed corpus of the table fuzzer. */
START_TEST(reads_properties_version_1)
{
    static const char *const names[] = {"zstd_blocked.sst", "none_classic.sst", "no_filter.sst"};
    for (size_t i = 0; i < 3; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s/fuzz/corpus/table/%s", KV_SOURCE_DIR, names[i]);
        kv_sst_reader *r;
        ck_assert_int_eq(kv_sst_reader_open(p, NULL, i + 1, &r), KV_OK);
        kv_sst_properties pr;
        kv_sst_reader_properties(r, &pr);
        ck_assert_int_eq(pr.filter_hash, i < 2 ? KV_SST_FILTER_HASH_KEY : KV_SST_FILTER_HASH_NONE);
        ck_assert_int_eq(kv_sst_verify(r), KV_OK);
        kv_sst_iter *it;
        ck_assert_int_eq(kv_sst_iter_new(r, &it), KV_OK);
        size_t n = 0;
        for (kv_sst_iter_seek_first(it); kv_sst_iter_valid(it); kv_sst_iter_next(it)) {
            size_t kl;
            const void *k = kv_sst_iter_key(it, &kl);
            void *val;
            size_t vl;
            ck_assert_int_eq(kv_sst_get(r, k, kl, &val, &vl), KV_OK); /* filter says maybe */
            kv_free(val);
            n++;
        }
        ck_assert_int_eq(kv_sst_iter_status(it), KV_OK);
        ck_assert_uint_eq(n, pr.entries);
        kv_sst_iter_free(it);
        kv_sst_reader_close(r);
    }
}
END_TEST

/* ---- damaged files ------------------------------------------------------------------- */

static uint8_t *slurp(const char *p, size_t *len)
{
    FILE *f = fopen(p, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*len + 1);
    ck_assert_uint_eq(fread(b, 1, *len, f), *len);
    fclose(f);
    return b;
}

static void spit(const char *p, const uint8_t *b, size_t len)
{
    unlink(p);
    FILE *f = fopen(p, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(b, 1, len, f), len);
    fclose(f);
}

/* Every operation on a damaged copy gives the right answer or KV_ECORRUPT. */
static void check_damaged(const char *p, const struct key *k, size_t n, uint8_t *tmp)
{
    kv_sst_reader *r;
    int rc = kv_sst_reader_open(p, NULL, 9, &r);
    if (rc != KV_OK) {
        ck_assert_int_eq(rc, KV_ECORRUPT);
        ck_assert(strstr(kv_sst_error_text(), "offset") != NULL);
        return;
    }
    for (size_t i = 0; i < n; i += n / 50 + 1) {
        void *val;
        size_t vlen;
        rc = kv_sst_get(r, k[i].b, k[i].len, &val, &vlen);
        ck_assert_msg(rc == KV_OK || rc == KV_ECORRUPT, "get: %d", rc);
        if (rc == KV_OK) {
            ck_assert_msg(value_matches(i, n, 0, val, vlen, tmp), "wrong value served");
            kv_free(val);
        }
    }
    kv_sst_iter *it;
    ck_assert_int_eq(kv_sst_iter_new(r, &it), KV_OK);
    size_t i = 0;
    for (kv_sst_iter_seek_first(it); kv_sst_iter_valid(it); kv_sst_iter_next(it), i++) {
        size_t kl, vl;
        const void *kk = kv_sst_iter_key(it, &kl);
        const void *vv = kv_sst_iter_value(it, &vl);
        ck_assert_msg(i < n && kl == k[i].len && !memcmp(kk, k[i].b, kl) &&
                          value_matches(i, n, 0, vv, vl, tmp),
                      "iterator served a wrong entry at %zu", i);
    }
    rc = kv_sst_iter_status(it);
    ck_assert(rc == KV_OK || rc == KV_ECORRUPT);
    if (rc == KV_OK)
        ck_assert_uint_eq(i, n);
    kv_sst_iter_free(it);
    rc = kv_sst_verify(r);
    ck_assert(rc == KV_OK || rc == KV_ECORRUPT);
    kv_sst_reader_close(r);
}

START_TEST(truncated_and_flipped_files)
{
    size_t n;
    struct key *k = make_keys(99, 3000, &n);
    kv_sst_options o;
    kv_sst_options_init(&o);
    o.block_size = 1024;
    write_table(path, k, n, 0, &o);
    size_t len;
    uint8_t *orig = slurp(path, &len);
    uint8_t *work = malloc(len);
    uint8_t *tmp = malloc(1 << 17);
    char p2[160];
    snprintf(p2, sizeof p2, "%s/damaged.sst", test_dir);
    for (int t = 0; t < 64; t++) {
        size_t cut = len * (size_t)t / 64;
        spit(p2, orig, cut);
        kv_sst_reader *r;
        int rc = kv_sst_reader_open(p2, NULL, 9, &r);
        ck_assert_int_eq(rc, KV_ECORRUPT); /* a cut always loses the trailer */
    }
    spit(p2, (const uint8_t *)"", 0);
    kv_sst_reader *r;
    ck_assert_int_eq(kv_sst_reader_open(p2, NULL, 9, &r), KV_ECORRUPT);
    uint64_t x = 12345;
    for (int t = 0; t < 2000; t++) {
        x = splitmix(x);
        memcpy(work, orig, len);
        work[x % len] ^= (uint8_t)(1 + (x >> 40) % 255);
        spit(p2, work, len);
        check_damaged(p2, k, n, tmp);
    }
    /* A foreign file. */
    for (size_t i = 0; i < len; i++)
        work[i] = (uint8_t)splitmix(i);
    spit(p2, work, len);
    ck_assert_int_eq(kv_sst_reader_open(p2, NULL, 9, &r), KV_ECORRUPT);
    free(orig);
    free(work);
    free(tmp);
    free(k);
}
END_TEST

/* ---- injected faults ------------------------------------------------------------------ */

START_TEST(read_faults)
{
    size_t n;
    struct key *k = make_keys(7, 2000, &n);
    kv_sst_options o;
    kv_sst_options_init(&o);
    o.block_size = 1024;
    write_table(path, k, n, 0, &o);
    uint8_t *tmp = malloc(1 << 17);
    int64_t fds = kv_file_open_count();
    /* How many reads a clean open and its gets make: each one is faulted. */
    kv_file_stats s0, s1;
    kv_file_counters(&s0);
    kv_sst_reader *r0;
    ck_assert_int_eq(kv_sst_reader_open(path, NULL, 5, &r0), KV_OK);
    for (size_t i = 0; i < n; i += 97) {
        void *val;
        size_t vlen;
        ck_assert_int_eq(kv_sst_get(r0, k[i].b, k[i].len, &val, &vlen), KV_OK);
        kv_free(val);
    }
    kv_sst_reader_close(r0);
    kv_file_counters(&s1);
    uint64_t reads = s1.calls[KV_FILE_READ] - s0.calls[KV_FILE_READ];
    ck_assert_uint_gt(reads, 4);
    for (kv_file_fault f = KV_FAULT_EIO; f <= KV_FAULT_SHORT; f++) {
        if (f == KV_FAULT_ENOSPC)
            continue;
        for (uint64_t nth = 1; nth <= reads; nth++) {
            kv_file_inject(KV_FILE_READ, nth, f);
            kv_sst_reader *r;
            int rc = kv_sst_reader_open(path, NULL, 5, &r);
            int failed = rc != KV_OK;
            if (rc == KV_OK) {
                for (size_t i = 0; i < n; i += 97) {
                    void *val;
                    size_t vlen;
                    rc = kv_sst_get(r, k[i].b, k[i].len, &val, &vlen);
                    ck_assert(rc == KV_OK || rc == KV_EIO || rc == KV_ECORRUPT);
                    failed |= rc != KV_OK;
                    if (rc == KV_OK) {
                        ck_assert(value_matches(i, n, 0, val, vlen, tmp));
                        kv_free(val);
                    }
                }
                kv_sst_reader_close(r);
            } else {
                ck_assert(rc == KV_EIO || rc == KV_ECORRUPT);
            }
            /* The same reads as the clean run: the faulted one surfaced. */
            ck_assert_msg(failed, "fault %d on read %llu went unnoticed", (int)f,
                          (unsigned long long)nth);
            kv_file_inject(KV_FILE_READ, 0, KV_FAULT_NONE);
        }
    }
    ck_assert_int_eq(kv_file_open_count(), fds); /* no descriptor leaked */
    free(tmp);
    free(k);
}
END_TEST

START_TEST(write_faults_leave_no_table)
{
    size_t n;
    struct key *k = make_keys(8, 3000, &n);
    kv_sst_options o;
    kv_sst_options_init(&o);
    o.block_size = 1024;
    kv_file_stats s0, s1;
    kv_file_counters(&s0);
    write_table(path, k, n, 0, &o);
    kv_file_counters(&s1);
    uint64_t writes = s1.calls[KV_FILE_WRITE] - s0.calls[KV_FILE_WRITE];
    uint64_t syncs = s1.calls[KV_FILE_SYNC] - s0.calls[KV_FILE_SYNC];
    unlink(path);
    char tmp_path[160];
    snprintf(tmp_path, sizeof tmp_path, "%s.tmp", path);
    int64_t fds = kv_file_open_count();
    uint8_t *v = malloc(1 << 17);
    for (int op = KV_FILE_WRITE; op <= KV_FILE_SYNC; op++)
        for (uint64_t nth = 1; nth <= (op == KV_FILE_WRITE ? writes : syncs); nth++) {
            kv_file_inject((kv_file_op)op, nth, op == KV_FILE_WRITE ? KV_FAULT_ENOSPC : KV_FAULT_EIO);
            kv_sst_writer *w;
            ck_assert_int_eq(kv_sst_writer_new(path, &o, &w), KV_OK);
            int rc = KV_OK;
            for (size_t i = 0; i < n && rc == KV_OK; i++) {
                size_t vl = value_len(i, n, 0);
                fill_value(i, v, vl);
                rc = kv_sst_writer_add(w, k[i].b, k[i].len, v, vl);
            }
            if (rc == KV_OK)
                rc = kv_sst_writer_finish(w, NULL);
            else
                kv_sst_writer_abandon(w);
            ck_assert_msg(rc == KV_ENOSPC || rc == KV_EIO, "op %d call %llu: %d", op,
                          (unsigned long long)nth, rc);
            /* Never a table under its final name unless it is whole. */
            ck_assert_int_ne(access(tmp_path, F_OK), 0);
            if (access(path, F_OK) == 0) {
                ck_assert_int_eq(op, KV_FILE_SYNC); /* only the directory sync after rename */
                kv_sst_reader *r;
                ck_assert_int_eq(kv_sst_reader_open(path, NULL, 1, &r), KV_OK);
                ck_assert_int_eq(kv_sst_verify(r), KV_OK);
                kv_sst_reader_close(r);
                unlink(path);
            }
            kv_file_inject((kv_file_op)op, 0, KV_FAULT_NONE);
        }
    ck_assert_int_eq(kv_file_open_count(), fds);
    free(v);
    free(k);
}
END_TEST

/* ---- block cache ---------------------------------------------------------------------- */

/* A table of the keys with 100-byte values that compress well, so that
 * every data block is stored compressed. */
static void write_compressed_table(const char *p, const struct key *k, size_t n,
                                   const kv_sst_options *o)
{
    kv_sst_writer *w;
    ck_assert_int_eq(kv_sst_writer_new(p, o, &w), KV_OK);
    uint8_t v[100];
    memset(v, 'x', sizeof v);
    for (size_t i = 0; i < n; i++) {
        memcpy(v, &i, sizeof i);
        ck_assert_int_eq(kv_sst_writer_add(w, k[i].b, k[i].len, v, sizeof v), KV_OK);
    }
    ck_assert_int_eq(kv_sst_writer_finish(w, NULL), KV_OK);
}

START_TEST(cache_script_and_capacity)
{
    size_t n;
    struct key *k = make_keys(11, 5000, &n);
    kv_sst_options o;
    kv_sst_options_init(&o);
    o.block_size = 1024;
    o.bits_per_key = 0; /* every get reads its block */
    o.compression = KV_COMPRESSION_ZSTD;
    write_compressed_table(path, k, n, &o);
    kv_sst_cache *c;
    ck_assert_int_eq(kv_sst_cache_new((size_t)64 << 20, &c), KV_OK);
    kv_sst_reader *r;
    ck_assert_int_eq(kv_sst_reader_open(path, c, 1, &r), KV_OK);
    void *val;
    size_t vlen;
    kv_sst_cache_stats s;
    /* Scripted: first key (miss), again (hit), last key (miss), first (hit). */
    size_t script[4] = {0, 0, n - 1, 0};
    uint64_t want_hits[4] = {0, 1, 1, 2}, want_misses[4] = {1, 1, 2, 2};
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(kv_sst_get(r, k[script[i]].b, k[script[i]].len, &val, &vlen), KV_OK);
        kv_free(val);
        kv_sst_cache_stats_get(c, &s);
        ck_assert_uint_eq(s.hits, want_hits[i]);
        ck_assert_uint_eq(s.misses, want_misses[i]);
    }
    kv_sst_counters cnt;
    kv_sst_reader_counters(r, &cnt);
    ck_assert_uint_eq(cnt.data_block_reads, 2);
    ck_assert_uint_eq(cnt.cache_hits, 2);
    kv_sst_reader_close(r);
    kv_sst_cache_free(c);

    /* A small cache never holds much more than its capacity. */
    size_t cap = 64 * 1024;
    ck_assert_int_eq(kv_sst_cache_new(cap, &c), KV_OK);
    ck_assert_int_eq(kv_sst_reader_open(path, c, 1, &r), KV_OK);
    kv_sst_properties p;
    kv_sst_reader_properties(r, &p);
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(kv_sst_get(r, k[i].b, k[i].len, &val, &vlen), KV_OK);
        kv_free(val);
        kv_sst_cache_stats_get(c, &s);
        ck_assert_uint_le(s.charge, cap);
    }
    ck_assert_uint_gt(s.evictions, 0);
    kv_sst_reader_close(r);
    kv_sst_cache_free(c);

    /* Capacity 0: every access is a read. */
    ck_assert_int_eq(kv_sst_cache_new(0, &c), KV_OK);
    ck_assert_int_eq(kv_sst_reader_open(path, c, 1, &r), KV_OK);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(kv_sst_get(r, k[0].b, k[0].len, &val, &vlen), KV_OK);
        kv_free(val);
    }
    kv_sst_reader_counters(r, &cnt);
    ck_assert_uint_eq(cnt.data_block_reads, 3);
    ck_assert_uint_eq(cnt.cache_hits, 0);
    kv_sst_reader_close(r);
    kv_sst_cache_free(c);

    /* Uncompressed blocks of a mapped table (64-bit systems) are read in
     * place, and the block cache never sees them: every get is a data-block
     * read, and still returns the right value. */
    if (sizeof(void *) == 8) {
        o.compression = KV_COMPRESSION_NONE;
        unlink(path);
        write_table(path, k, n, 0, &o);
        ck_assert_int_eq(kv_sst_cache_new((size_t)64 << 20, &c), KV_OK);
        ck_assert_int_eq(kv_sst_reader_open(path, c, 1, &r), KV_OK);
        uint8_t *want = malloc((size_t)1 << 17);
        for (int i = 0; i < 4; i++) {
            size_t j = script[i], wl = value_len(j, n, 0);
            fill_value(j, want, wl);
            ck_assert_int_eq(kv_sst_get(r, k[j].b, k[j].len, &val, &vlen), KV_OK);
            ck_assert_uint_eq(vlen, wl);
            ck_assert(memcmp(val, want, wl) == 0);
            kv_free(val);
        }
        free(want);
        kv_sst_reader_counters(r, &cnt);
        ck_assert_uint_eq(cnt.data_block_reads, 4);
        ck_assert_uint_eq(cnt.cache_hits, 0);
        kv_sst_cache_stats_get(c, &s);
        ck_assert_uint_eq(s.hits + s.misses, 0);
        kv_sst_reader_close(r);
        kv_sst_cache_free(c);
    }
    free(k);
}
END_TEST

struct reader_job {
    kv_sst_reader *r;
    const struct key *k;
    size_t n;
    int bad;
};

static void *reader_thread(void *arg)
{
    struct reader_job *j = arg;
    uint8_t *tmp = malloc(1 << 17);
    uint64_t x = (uint64_t)(uintptr_t)arg;
    for (int t = 0; t < 4000; t++) {
        x = splitmix(x);
        size_t i = x % j->n;
        void *val;
        size_t vlen;
        if (kv_sst_get(j->r, j->k[i].b, j->k[i].len, &val, &vlen) != KV_OK ||
            !value_matches(i, j->n, 0, val, vlen, tmp))
            j->bad++;
        else
            kv_free(val);
    }
    free(tmp);
    return NULL;
}

START_TEST(concurrent_readers_share_a_cache)
{
    size_t n;
    struct key *k = make_keys(12, 5000, &n);
    kv_sst_options o;
    kv_sst_options_init(&o);
    o.block_size = 1024;
    write_table(path, k, n, 0, &o);
    kv_sst_cache *c;
    ck_assert_int_eq(kv_sst_cache_new(32 * 1024, &c), KV_OK); /* small: evictions race */
    kv_sst_reader *r;
    ck_assert_int_eq(kv_sst_reader_open(path, c, 1, &r), KV_OK);
    /* Two waves of threads: more at once than the counters have per-thread
     * stripes, and a second wave that takes over the stripes the first gave
     * back. No count may be lost either way. */
    enum { WAVE = KV_TALLY_STRIPES + 4 };
    for (int wave = 0; wave < 2; wave++) {
        pthread_t t[WAVE];
        struct reader_job jobs[WAVE];
        for (int i = 0; i < WAVE; i++) {
            jobs[i] = (struct reader_job){r, k, n, 0};
            ck_assert_int_eq(pthread_create(&t[i], NULL, reader_thread, &jobs[i]), 0);
        }
        for (int i = 0; i < WAVE; i++) {
            pthread_join(t[i], NULL);
            ck_assert_int_eq(jobs[i].bad, 0);
        }
    }
    kv_sst_counters cnt;
    kv_sst_reader_counters(r, &cnt);
    ck_assert_uint_eq(cnt.gets, 2 * WAVE * 4000);
    ck_assert_uint_eq(cnt.filter_checks, 2 * WAVE * 4000);
    ck_assert_uint_eq(cnt.filter_negatives, 0);
    ck_assert_uint_eq(cnt.data_block_reads + cnt.cache_hits, 2 * WAVE * 4000);
    kv_sst_reader_close(r);
    kv_sst_cache_free(c);
    free(k);
}
END_TEST

/* ---- the block cache through its own interface ------------------------------------ */

/* A block's bytes follow from its key, so that whoever holds it can tell
 * that they are still its own: not freed, not another block's. */
static size_t cblock_size(uint64_t id, uint64_t off)
{
    return 256 + (size_t)(splitmix(id * 1000 + off) % 1800);
}

static uint8_t cblock_byte(uint64_t id, uint64_t off, size_t j)
{
    return (uint8_t)(splitmix(id * 1000 + off) >> 8) + (uint8_t)(j * 7);
}

static uint8_t *cblock_make(uint64_t id, uint64_t off, size_t *size)
{
    *size = cblock_size(id, off);
    uint8_t *b = malloc(*size);
    ck_assert_ptr_nonnull(b);
    for (size_t j = 0; j < *size; j++)
        b[j] = cblock_byte(id, off, j);
    return b;
}

static int cblock_ok(const kv_cache_handle *h, uint64_t id, uint64_t off)
{
    size_t size;
    const uint8_t *b = kv_cache_data(h, &size);
    if (size != cblock_size(id, off))
        return 0;
    for (size_t j = 0; j < size; j++)
        if (b[j] != cblock_byte(id, off, j))
            return 0;
    return 1;
}

/* Sums the charge of the blocks a quiet cache holds, by looking each key
 * up; returns how many it holds. */
static size_t cblock_census(kv_sst_cache *c, uint64_t ids, uint64_t offs, uint64_t *charge)
{
    size_t n = 0;
    *charge = 0;
    for (uint64_t id = 1; id <= ids; id++)
        for (uint64_t off = 0; off < offs; off++) {
            kv_cache_handle *h = kv_cache_lookup(c, id, off);
            if (!h)
                continue;
            ck_assert(cblock_ok(h, id, off));
            *charge += cblock_size(id, off);
            n++;
            kv_cache_release(c, h);
        }
    return n;
}

/* Held blocks are never evicted: with every cached block held, an insert
 * that finds no room is handed out alone, and the charge never passes the
 * capacity. A key inserted twice is cached once. */
START_TEST(cache_keeps_held_blocks_and_its_capacity)
{
    enum { IDS = 2, OFFS = 200 };
    size_t cap = 16 * 4096;
    kv_sst_cache *c;
    ck_assert_int_eq(kv_sst_cache_new(cap, &c), KV_OK);
    kv_cache_handle *held[IDS * OFFS];
    kv_sst_cache_stats s;
    size_t n = 0;
    for (uint64_t id = 1; id <= IDS; id++)
        for (uint64_t off = 0; off < OFFS; off++) {
            size_t size;
            uint8_t *b = cblock_make(id, off, &size);
            held[n] = kv_cache_insert(c, id, off, b, size);
            ck_assert_ptr_nonnull(held[n]);
            n++;
            kv_sst_cache_stats_get(c, &s);
            ck_assert_uint_le(s.charge, cap);
        }
    ck_assert_uint_eq(s.evictions, 0); /* all held: nothing could go */
    ck_assert_uint_gt(s.inserts, 0);
    ck_assert_uint_lt(s.inserts, n);   /* some did not fit */
    for (size_t i = 0; i < n; i++)
        ck_assert(cblock_ok(held[i], 1 + i / OFFS, i % OFFS));
    uint64_t charge;
    ck_assert_uint_eq(cblock_census(c, IDS, OFFS, &charge), s.inserts);
    ck_assert_uint_eq(charge, s.charge);
    for (size_t i = 0; i < n; i++)
        kv_cache_release(c, held[i]);
    /* Released, the blocks can go: new keys evict old ones. */
    for (uint64_t off = 0; off < OFFS; off++) {
        size_t size;
        uint8_t *b = cblock_make(3, off, &size);
        kv_cache_handle *h = kv_cache_insert(c, 3, off, b, size);
        ck_assert(cblock_ok(h, 3, off));
        kv_cache_release(c, h);
    }
    kv_sst_cache_stats_get(c, &s);
    ck_assert_uint_gt(s.evictions, 0);
    ck_assert_uint_le(s.charge, cap);
    /* Twice the same key: one copy, the first. */
    size_t size;
    uint8_t *b = cblock_make(9, 1, &size);
    kv_cache_handle *h1 = kv_cache_insert(c, 9, 1, b, size);
    ck_assert(cblock_ok(h1, 9, 1));
    kv_sst_cache_stats_get(c, &s);
    b = cblock_make(9, 1, &size);
    memset(b, 0, size); /* a copy that would fail the check */
    kv_cache_handle *h2 = kv_cache_insert(c, 9, 1, b, size);
    ck_assert_ptr_eq(h1, h2);
    ck_assert(cblock_ok(h2, 9, 1));
    kv_sst_cache_stats after;
    kv_sst_cache_stats_get(c, &after);
    ck_assert_uint_eq(after.inserts, s.inserts);
    ck_assert_uint_eq(after.charge, s.charge);
    kv_cache_release(c, h1);
    kv_cache_release(c, h2);
    kv_sst_cache_free(c);
}
END_TEST

enum { CT_IDS = 4, CT_OFFS = 150, CT_HOLD = 3, CT_OPS = 20000 };

struct cache_job {
    kv_sst_cache *c;
    uint64_t seed;
    uint64_t hits, misses, bad;
};

/* Looks up random blocks, inserting each one missed, and holds up to
 * CT_HOLD at a time, checking each block's bytes when it is had and again
 * when it is released: a block freed or reused under a holder fails the
 * check (or trips AddressSanitizer). */
static void *cache_worker(void *arg)
{
    struct cache_job *j = arg;
    kv_cache_handle *held[CT_HOLD] = {0};
    uint64_t hid[CT_HOLD], hoff[CT_HOLD];
    uint64_t x = j->seed;
    for (int op = 0; op < CT_OPS; op++) {
        x = splitmix(x);
        uint64_t id = 1 + x % CT_IDS, off = (x >> 8) % CT_OFFS;
        /* Skewed: half the ops go to an eighth of the blocks. */
        if ((x >> 40) & 1)
            off %= CT_OFFS / 8;
        int k = (int)((x >> 32) % CT_HOLD);
        if (held[k]) {
            j->bad += !cblock_ok(held[k], hid[k], hoff[k]);
            kv_cache_release(j->c, held[k]);
            held[k] = NULL;
        }
        kv_cache_handle *h = kv_cache_lookup(j->c, id, off);
        if (h) {
            j->hits++;
        } else {
            j->misses++;
            size_t size;
            uint8_t *b = cblock_make(id, off, &size);
            h = kv_cache_insert(j->c, id, off, b, size);
            if (!h) {
                j->bad++;
                continue;
            }
        }
        j->bad += !cblock_ok(h, id, off);
        if ((x >> 48) & 1) { /* keep it a while */
            held[k] = h;
            hid[k] = id;
            hoff[k] = off;
        } else {
            kv_cache_release(j->c, h);
        }
    }
    for (int k = 0; k < CT_HOLD; k++)
        if (held[k]) {
            j->bad += !cblock_ok(held[k], hid[k], hoff[k]);
            kv_cache_release(j->c, held[k]);
        }
    return NULL;
}

struct cache_watch {
    kv_sst_cache *c;
    atomic_int stop;
    uint64_t over; /* samples whose charge passed the capacity */
    uint64_t samples;
};

static void *cache_watcher(void *arg)
{
    struct cache_watch *w = arg;
    while (!atomic_load(&w->stop)) {
        kv_sst_cache_stats s;
        kv_sst_cache_stats_get(w->c, &s);
        w->over += s.charge > s.capacity;
        w->samples++;
    }
    return NULL;
}

/* Many threads look up, insert, hold and release blocks of one small
 * cache at once (evictions race with hits): every block read is its own,
 * the charge stays within the capacity throughout, and the counters add
 * up to what the threads did. More threads than counter stripes, so that
 * some share the last one. */
START_TEST(cache_threads_hit_insert_evict_release)
{
    size_t cap = 16 * 8192; /* about a third of the blocks' bytes */
    kv_sst_cache *c;
    ck_assert_int_eq(kv_sst_cache_new(cap, &c), KV_OK);
    enum { T = KV_TALLY_STRIPES + 2 };
    pthread_t t[T], wt;
    struct cache_job jobs[T];
    struct cache_watch watch = {.c = c};
    ck_assert_int_eq(pthread_create(&wt, NULL, cache_watcher, &watch), 0);
    for (int i = 0; i < T; i++) {
        jobs[i] = (struct cache_job){.c = c, .seed = 1000 + (uint64_t)i};
        ck_assert_int_eq(pthread_create(&t[i], NULL, cache_worker, &jobs[i]), 0);
    }
    uint64_t hits = 0, misses = 0;
    for (int i = 0; i < T; i++) {
        pthread_join(t[i], NULL);
        ck_assert_uint_eq(jobs[i].bad, 0);
        hits += jobs[i].hits;
        misses += jobs[i].misses;
    }
    atomic_store(&watch.stop, 1);
    pthread_join(wt, NULL);
    ck_assert_uint_gt(watch.samples, 0);
    ck_assert_uint_eq(watch.over, 0);
    kv_sst_cache_stats s;
    kv_sst_cache_stats_get(c, &s);
    ck_assert_uint_eq(s.hits, hits);
    ck_assert_uint_eq(s.misses, misses);
    ck_assert_uint_eq(hits + misses, (uint64_t)T * CT_OPS);
    ck_assert_uint_gt(hits, 0);
    ck_assert_uint_gt(s.evictions, 0);
    ck_assert_uint_le(s.charge, cap);
    /* Quiet now: the blocks it holds are inserts less evictions, and their
     * sizes add up to the charge. */
    uint64_t charge;
    ck_assert_uint_eq(cblock_census(c, CT_IDS, CT_OFFS, &charge), s.inserts - s.evictions);
    ck_assert_uint_eq(charge, s.charge);
    kv_sst_cache_free(c);
}
END_TEST

/* ---- a pool of open files ------------------------------------------------------------- */

#define POOL_TABLES 8

/* Table t of the pool tests: its own keys (seed 100 + t), 1 KiB blocks,
 * uncompressed (read in place, in the mapping) when t is even, zstd (read
 * through the cache) when odd. */
static struct key *pool_table(size_t t, char *p, size_t cap, size_t *n)
{
    snprintf(p, cap, "%s/%06zu.sst", test_dir, 10 + t);
    struct key *k = make_keys(100 + t, 600, n);
    kv_sst_options o;
    kv_sst_options_init(&o);
    o.block_size = 1024;
    o.compression = t % 2 ? KV_COMPRESSION_ZSTD : KV_COMPRESSION_NONE;
    write_table(p, k, *n, 0, &o);
    return k;
}

static void pool_get(kv_sst_reader *r, const struct key *k, size_t n, size_t i, uint8_t *tmp)
{
    void *val;
    size_t vlen;
    int rc = kv_sst_get(r, k[i].b, k[i].len, &val, &vlen);
    ck_assert_msg(rc == KV_OK, "get: %s (%s)", kv_strerror(rc), kv_sst_error_text());
    ck_assert(value_matches(i, n, 0, val, vlen, tmp));
    kv_free(val);
}

/* sstable.h: at most max_open files are open while some are not in use;
 * the others are closed, least recently used first, and opened again. */
START_TEST(pool_keeps_to_its_budget)
{
    ck_assert_int_eq(kv_sst_files_new(1, NULL), KV_EINVAL);
    kv_sst_files *f = (kv_sst_files *)&f;
    ck_assert_int_eq(kv_sst_files_new(0, &f), KV_EINVAL);
    ck_assert_ptr_null(f);
    kv_sst_files_free(NULL);
    kv_sst_files_stats st;
    kv_sst_files_stats_get(NULL, &st);
    char p[POOL_TABLES][160];
    struct key *k[POOL_TABLES];
    size_t n[POOL_TABLES];
    for (size_t t = 0; t < POOL_TABLES; t++)
        k[t] = pool_table(t, p[t], sizeof p[t], &n[t]);
    kv_sst_cache *c = NULL; /* every zstd block is read from its file */
    ck_assert_int_eq(kv_sst_files_new(3, &f), KV_OK);
    kv_sst_reader *r[POOL_TABLES];
    ck_assert_int_eq(kv_sst_reader_open_pooled(p[0], c, NULL, 1, &r[0]), KV_EINVAL);
    int64_t fds = kv_file_open_count();
    uint8_t *tmp = malloc(1 << 17);
    for (size_t t = 0; t < POOL_TABLES; t++) {
        ck_assert_int_eq(kv_sst_reader_open_pooled(p[t], c, f, t + 1, &r[t]), KV_OK);
        ck_assert_int_le(kv_file_open_count() - fds, 3);
    }
    kv_sst_files_stats_get(f, &st);
    ck_assert_uint_eq(st.max_open, 3);
    ck_assert_uint_eq(st.open_now, 3);
    ck_assert_uint_eq(st.opens, POOL_TABLES);
    ck_assert_uint_eq(st.evictions, POOL_TABLES - 3);
    ck_assert_uint_eq(st.reopens, 0);
    /* Round-robin gets over every table: files close and open again, never
     * more than three at once. Properties and filters need no file. */
    for (size_t i = 0; i < 600; i += 7)
        for (size_t t = 0; t < POOL_TABLES; t++) {
            pool_get(r[t], k[t], n[t], i % n[t], tmp);
            ck_assert_int_le(kv_file_open_count() - fds, 3);
        }
    kv_sst_files_stats_get(f, &st);
    ck_assert_uint_gt(st.reopens, 0);
    ck_assert_uint_eq(st.opens, POOL_TABLES + st.reopens);
    ck_assert_uint_le(st.open_now, 3);
    ck_assert_uint_eq(st.peak_open, 3);
    ck_assert_uint_eq(st.over_budget, 0);
    /* Iterators keep their current block's file open: four at once are one
     * over the budget while they last... */
    kv_sst_iter *it[4];
    for (size_t t = 0; t < 4; t++) {
        ck_assert_int_eq(kv_sst_iter_new(r[2 * t], &it[t]), KV_OK); /* in the mapping */
        kv_sst_iter_seek_first(it[t]);
        ck_assert(kv_sst_iter_valid(it[t]));
    }
    kv_sst_files_stats_get(f, &st);
    ck_assert_uint_eq(st.open_now, 4);
    ck_assert_uint_eq(st.over_budget, 1);
    for (size_t t = 0; t < 4; t++) { /* ... and walk their tables across it */
        size_t seen = 0;
        for (; kv_sst_iter_valid(it[t]); kv_sst_iter_next(it[t]))
            seen++;
        ck_assert_int_eq(kv_sst_iter_status(it[t]), KV_OK);
        ck_assert_uint_eq(seen, n[2 * t]);
        kv_sst_iter_free(it[t]);
    }
    /* ... and the next open closes the excess (tables 1 and 3 are closed:
     * the four in use took the room). */
    pool_get(r[1], k[1], n[1], 5, tmp);
    kv_sst_files_stats_get(f, &st);
    ck_assert_uint_eq(st.open_now, 3);
    pool_get(r[3], k[3], n[3], 5, tmp);
    kv_sst_files_stats_get(f, &st);
    ck_assert_uint_le(st.open_now, 3);
    ck_assert_int_le(kv_file_open_count() - fds, 3);
    for (size_t t = 0; t < POOL_TABLES; t++)
        ck_assert_int_eq(kv_sst_verify(r[t]), KV_OK);
    for (size_t t = 0; t < POOL_TABLES; t++) {
        kv_sst_reader_close(r[t]);
        free(k[t]);
    }
    kv_sst_files_stats_get(f, &st);
    ck_assert_uint_eq(st.open_now, 0);
    ck_assert_int_eq(kv_file_open_count(), fds);
    kv_sst_files_free(f);
    free(tmp);
}
END_TEST

/* sstable.h: a file that cannot be opened again is an error of the read
 * that needs it, with its text, never a crash; the next read tries again. */
START_TEST(pool_reopen_failures_are_errors)
{
    char p[2][160], aside[200];
    struct key *k[2];
    size_t n[2];
    for (size_t t = 0; t < 2; t++)
        k[t] = pool_table(2 * t, p[t], sizeof p[t], &n[t]); /* both read in place */
    kv_sst_files *f;
    ck_assert_int_eq(kv_sst_files_new(1, &f), KV_OK);
    kv_sst_reader *r[2];
    for (size_t t = 0; t < 2; t++)
        ck_assert_int_eq(kv_sst_reader_open_pooled(p[t], NULL, f, t + 1, &r[t]), KV_OK);
    uint8_t *tmp = malloc(1 << 17);
    void *val;
    size_t vlen;
    /* Table 0's file was closed to open table 1's: take it away. */
    snprintf(aside, sizeof aside, "%s.aside", p[0]);
    ck_assert_int_eq(rename(p[0], aside), 0);
    ck_assert_int_eq(kv_sst_get(r[0], k[0][3].b, k[0][3].len, &val, &vlen), KV_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(kv_sst_error_text(), p[0]));
    ck_assert_ptr_nonnull(strstr(kv_sst_error_text(), "again"));
    kv_sst_iter *it;
    ck_assert_int_eq(kv_sst_iter_new(r[0], &it), KV_OK);
    kv_sst_iter_seek_first(it);
    ck_assert(!kv_sst_iter_valid(it));
    ck_assert_int_eq(kv_sst_iter_status(it), KV_ECORRUPT);
    kv_sst_iter_free(it);
    ck_assert_int_eq(kv_sst_verify(r[0]), KV_ECORRUPT);
    /* Of another size: not the table that was opened. */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "head -c 1000 '%s' > '%s'", aside, p[0]);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(kv_sst_get(r[0], k[0][3].b, k[0][3].len, &val, &vlen), KV_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(kv_sst_error_text(), "opened again"));
    /* An open that fails (as when the process is out of descriptors). */
    ck_assert_int_eq(rename(aside, p[0]), 0);
    kv_file_inject(KV_FILE_OPEN, 1, KV_FAULT_EIO);
    ck_assert_int_eq(kv_sst_get(r[0], k[0][3].b, k[0][3].len, &val, &vlen), KV_EIO);
    ck_assert_ptr_nonnull(strstr(kv_sst_error_text(), p[0]));
    kv_file_inject(KV_FILE_OPEN, 0, KV_FAULT_NONE);
    /* The file is back: reads work again, and the other table still does. */
    for (size_t i = 0; i < n[0]; i += 50) {
        pool_get(r[0], k[0], n[0], i, tmp);
        pool_get(r[1], k[1], n[1], i % n[1], tmp);
    }
    kv_sst_files_stats st;
    kv_sst_files_stats_get(f, &st);
    ck_assert_uint_eq(st.open_now, 1);
    for (size_t t = 0; t < 2; t++) {
        kv_sst_reader_close(r[t]);
        free(k[t]);
    }
    kv_sst_files_free(f);
    free(tmp);
}
END_TEST

struct pool_job {
    kv_sst_reader **r;
    struct key **k;
    size_t *n;
    uint64_t seed;
    int bad;
};

/* Gets over every table, and now and then a short walk with an iterator. */
static void *pool_thread(void *arg)
{
    struct pool_job *j = arg;
    uint8_t *tmp = malloc(1 << 17);
    uint64_t x = j->seed;
    for (int op = 0; op < 3000; op++) {
        x = splitmix(x);
        size_t t = x % POOL_TABLES, i = (x >> 16) % j->n[t];
        if (op % 100 == 0) {
            kv_sst_iter *it;
            if (kv_sst_iter_new(j->r[t], &it) != KV_OK) {
                j->bad++;
                continue;
            }
            kv_sst_iter_seek(it, j->k[t][i].b, j->k[t][i].len);
            for (int s = 0; s < 40 && kv_sst_iter_valid(it); s++, i++) {
                size_t vl;
                const void *v = kv_sst_iter_value(it, &vl);
                if (!value_matches(i, j->n[t], 0, v, vl, tmp))
                    j->bad++;
                kv_sst_iter_next(it);
            }
            if (kv_sst_iter_status(it) != KV_OK)
                j->bad++;
            kv_sst_iter_free(it);
            continue;
        }
        void *val;
        size_t vlen;
        if (kv_sst_get(j->r[t], j->k[t][i].b, j->k[t][i].len, &val, &vlen) != KV_OK ||
            !value_matches(i, j->n[t], 0, val, vlen, tmp))
            j->bad++;
        else
            kv_free(val);
    }
    free(tmp);
    return NULL;
}

/* Many threads read eight tables through a pool of two files: files are
 * closed and opened again all the time under readers (run under TSan). */
START_TEST(pool_under_concurrent_readers)
{
    char p[POOL_TABLES][160];
    struct key *k[POOL_TABLES];
    size_t n[POOL_TABLES];
    for (size_t t = 0; t < POOL_TABLES; t++)
        k[t] = pool_table(t, p[t], sizeof p[t], &n[t]);
    kv_sst_cache *c;
    ck_assert_int_eq(kv_sst_cache_new(64 * 1024, &c), KV_OK); /* small: blocks come and go */
    kv_sst_files *f;
    ck_assert_int_eq(kv_sst_files_new(2, &f), KV_OK);
    kv_sst_reader *r[POOL_TABLES];
    for (size_t t = 0; t < POOL_TABLES; t++)
        ck_assert_int_eq(kv_sst_reader_open_pooled(p[t], c, f, t + 1, &r[t]), KV_OK);
    enum { THREADS = 8 };
    pthread_t th[THREADS];
    struct pool_job jobs[THREADS];
    for (int i = 0; i < THREADS; i++) {
        jobs[i] = (struct pool_job){r, k, n, 1000 + (uint64_t)i, 0};
        ck_assert_int_eq(pthread_create(&th[i], NULL, pool_thread, &jobs[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(jobs[i].bad, 0);
    }
    kv_sst_files_stats st;
    kv_sst_files_stats_get(f, &st);
    ck_assert_uint_gt(st.reopens, 0);
    ck_assert_uint_gt(st.evictions, 0);
    /* Each thread reads one file at a time: no more open than threads. */
    ck_assert_uint_le(st.peak_open, THREADS);
    ck_assert_uint_le(st.open_now, THREADS);
    for (size_t t = 0; t < POOL_TABLES; t++) {
        kv_sst_reader_close(r[t]);
        free(k[t]);
    }
    kv_sst_files_stats_get(f, &st);
    ck_assert_uint_eq(st.open_now, 0);
    kv_sst_files_free(f);
    kv_sst_cache_free(c);
}
END_TEST

/* ---- filter info and the store's keys ---------------------------------------------- */

/* A small table of n keys "k0000".."k<n-1>" at bits_per_key. */
static void write_small_table(const char *p, size_t n, double bits_per_key)
{
    kv_sst_options o;
    kv_sst_options_init(&o);
    o.bits_per_key = bits_per_key;
    o.seed = 77;
    kv_sst_writer *w;
    ck_assert_int_eq(kv_sst_writer_new(p, &o, &w), KV_OK);
    for (size_t i = 0; i < n; i++) {
        char k[16];
        int kl = snprintf(k, sizeof k, "k%04zu", i);
        ck_assert_int_eq(kv_sst_writer_add(w, k, (size_t)kl, "v", 1), KV_OK);
    }
    ck_assert_int_eq(kv_sst_writer_finish(w, NULL), KV_OK);
}

START_TEST(filter_info_matches_the_properties)
{
    write_small_table(path, 500, 10);
    kv_sst_reader *r;
    ck_assert_int_eq(kv_sst_reader_open(path, NULL, 1, &r), KV_OK);
    kv_sst_properties p;
    kv_sst_reader_properties(r, &p);
    kv_bloom_info fi;
    ck_assert_int_eq(kv_sst_reader_filter_info(r, &fi), KV_OK);
    ck_assert_uint_eq(fi.bits, p.filter_bits);
    ck_assert_uint_eq(fi.k, p.filter_k);
    ck_assert_uint_eq(fi.keys_added, p.filter_keys);
    ck_assert_uint_eq(fi.keys_added, 500);
    ck_assert_uint_eq(fi.bytes, p.filter_bytes);
    ck_assert_int_eq(fi.layout, p.filter_layout);
    ck_assert(fi.bits_set > 0 && fi.bits_set <= fi.bits);
    ck_assert_int_eq(kv_sst_reader_filter_info(NULL, &fi), KV_EINVAL);
    ck_assert_int_eq(kv_sst_reader_filter_info(r, NULL), KV_EINVAL);
    kv_sst_reader_close(r);

    /* No filter: KV_NOTFOUND, nothing left in *out. */
    char p2[160];
    snprintf(p2, sizeof p2, "%s/000002.sst", test_dir);
    write_small_table(p2, 20, 0);
    ck_assert_int_eq(kv_sst_reader_open(p2, NULL, 2, &r), KV_OK);
    memset(&fi, 0xAB, sizeof fi);
    ck_assert_int_eq(kv_sst_reader_filter_info(r, &fi), KV_NOTFOUND);
    ck_assert_uint_eq(fi.bits, 0);
    ck_assert_uint_eq(fi.k, 0);
    kv_sst_reader_close(r);
}
END_TEST

/* The filter info is only reached past the trailer's checksum and the
 * filter block's: any flipped byte there makes the open fail. */
START_TEST(filter_info_only_past_checked_trailer_and_filter)
{
    write_small_table(path, 500, 10);
    size_t len;
    uint8_t *b = slurp(path, &len);
    char p2[160];
    snprintf(p2, sizeof p2, "%s/damaged.sst", test_dir);
    /* Every byte of the trailer (72), and bytes of the filter block before it. */
    for (size_t back = 1; back <= 72 + 64; back++) {
        b[len - back] ^= 0x10;
        spit(p2, b, len);
        b[len - back] ^= 0x10;
        kv_sst_reader *r;
        ck_assert_msg(kv_sst_reader_open(p2, NULL, 3, &r) == KV_ECORRUPT,
                      "flipped byte %zu from the end was not noticed", back);
        ck_assert(strstr(kv_sst_error_text(), "offset") != NULL);
    }
    free(b);
}
END_TEST

START_TEST(store_keys_round_trip_and_sort)
{
    static const struct { const char *k; size_t n; } users[] = {
        {"", 0}, {"\0", 1}, {"\0\0", 2}, {"a", 1}, {"a\0", 2}, {"a\0b", 3}, {"a\x01", 2},
        {"ab", 2}, {"\xff\0\xff", 3},
    };
    const size_t nu = sizeof users / sizeof users[0];
    uint8_t prev[64], cur[64], user[16];
    size_t prev_len = 0;
    for (size_t i = 0; i < nu; i++) {
        /* Versions of one user key, newest first, as the store sorts them. */
        static const uint64_t seqs[] = {((uint64_t)1 << 56) - 1, 1000, 7, 0};
        for (size_t s = 0; s < 4; s++) {
            int kind = s % 2 ? KV_SST_KIND_DELETE : KV_SST_KIND_PUT;
            size_t n;
            ck_assert_int_eq(kv_sst_store_key_encode(users[i].k, users[i].n, seqs[s], kind, 1, cur,
                                                     sizeof cur, &n),
                             KV_OK);
            ck_assert_uint_le(n, KV_SST_STORE_KEY_MAX(users[i].n));
            kv_sst_store_key sk;
            ck_assert_int_eq(kv_sst_store_key_decode(cur, n, user, sizeof user, &sk), KV_OK);
            ck_assert_uint_eq(sk.user_len, users[i].n);
            ck_assert(memcmp(user, users[i].k, users[i].n) == 0);
            ck_assert_uint_eq(sk.sequence, seqs[s]);
            ck_assert_int_eq(sk.kind, kind);
            ck_assert_uint_eq(sk.prefix_len, n - 8);
            /* The prefix alone is the key's first prefix_len bytes. */
            uint8_t pre[64];
            size_t pn;
            ck_assert_int_eq(kv_sst_store_key_encode(users[i].k, users[i].n, 0, 0, 0, pre,
                                                     sizeof pre, &pn),
                             KV_OK);
            ck_assert_uint_eq(pn, sk.prefix_len);
            ck_assert(memcmp(pre, cur, pn) == 0);
            /* Bytewise order: user keys ascending, then newest first. */
            if (i || s) {
                size_t m = prev_len < n ? prev_len : n;
                int c = memcmp(prev, cur, m);
                ck_assert_msg(c < 0 || (c == 0 && prev_len < n), "user %zu seq %zu out of order",
                              i, s);
            }
            memcpy(prev, cur, n);
            prev_len = n;
        }
    }
    /* A short user buffer gets what fits; user_len is the whole length. */
    size_t n;
    ck_assert_int_eq(kv_sst_store_key_encode("abc\0d", 5, 9, 1, 1, cur, sizeof cur, &n), KV_OK);
    kv_sst_store_key sk;
    memset(user, 0, sizeof user);
    ck_assert_int_eq(kv_sst_store_key_decode(cur, n, user, 2, &sk), KV_OK);
    ck_assert_uint_eq(sk.user_len, 5);
    ck_assert(memcmp(user, "ab\0", 3) == 0);
    ck_assert_int_eq(kv_sst_store_key_decode(cur, n, NULL, 0, &sk), KV_OK);
    ck_assert_uint_eq(sk.sequence, 9);
}
END_TEST

START_TEST(store_keys_damage_and_bad_arguments)
{
    uint8_t k[32], user[32];
    size_t n;
    kv_sst_store_key sk;
    ck_assert_int_eq(kv_sst_store_key_encode("a\0b", 3, 5, KV_SST_KIND_PUT, 1, k, sizeof k, &n),
                     KV_OK);
    ck_assert_uint_eq(n, 3 + 1 + 2 + 8);
    /* Damage in the escaped key or the terminator is seen. The key is
     * 'a' 00 FF 'b' 00 01 + trailer. */
    static const struct { size_t at; uint8_t to; } damage[] = {
        {0, 0x00}, /* 00 00: neither an escaped 0x00 nor the terminator */
        {2, 0x02}, /* 00 02: likewise */
        {2, 0x01}, /* a terminator before the end of the prefix */
        {4, 0x05}, /* no terminator */
        {5, 0xFF}, /* no terminator */
        {5, 0x00}, /* 00 00 */
    };
    for (size_t i = 0; i < sizeof damage / sizeof damage[0]; i++) {
        uint8_t d[32];
        memcpy(d, k, n);
        d[damage[i].at] = damage[i].to;
        ck_assert_msg(kv_sst_store_key_decode(d, n, user, sizeof user, &sk) == KV_ECORRUPT,
                      "byte %zu = %02x decoded", damage[i].at, damage[i].to);
    }
    /* Too short, no terminator, terminator not 8 bytes before the end. */
    for (size_t len = 0; len < 10; len++)
        ck_assert_int_eq(kv_sst_store_key_decode(k, len, user, sizeof user, &sk), KV_ECORRUPT);
    ck_assert_int_eq(kv_sst_store_key_decode(k, n - 1, user, sizeof user, &sk), KV_ECORRUPT);
    ck_assert_int_eq(kv_sst_store_key_decode("0123456789ab", 12, user, sizeof user, &sk),
                     KV_ECORRUPT);
    /* A trailer bit flipped reads as another sequence or kind. */
    k[n - 1] ^= 0x01;
    ck_assert_int_eq(kv_sst_store_key_decode(k, n, user, sizeof user, &sk), KV_OK);
    ck_assert_int_eq(sk.kind, 0);
    ck_assert_uint_eq(sk.sequence, 5);
    /* NULL arguments and bad values. */
    ck_assert_int_eq(kv_sst_store_key_decode(k, n, user, sizeof user, NULL), KV_EINVAL);
    ck_assert_int_eq(kv_sst_store_key_decode(NULL, n, user, sizeof user, &sk), KV_EINVAL);
    ck_assert_int_eq(kv_sst_store_key_decode(k, n, NULL, 4, &sk), KV_EINVAL);
    ck_assert_int_eq(kv_sst_store_key_encode("a", 1, 1, 1, 1, k, sizeof k, NULL), KV_EINVAL);
    ck_assert_int_eq(kv_sst_store_key_encode(NULL, 1, 1, 1, 1, k, sizeof k, &n), KV_EINVAL);
    ck_assert_int_eq(kv_sst_store_key_encode("a", 1, 1, 1, 1, NULL, sizeof k, &n), KV_EINVAL);
    ck_assert_int_eq(kv_sst_store_key_encode("a", 1, (uint64_t)1 << 56, 1, 1, k, sizeof k, &n),
                     KV_EINVAL);
    ck_assert_int_eq(kv_sst_store_key_encode("a", 1, 1, 256, 1, k, sizeof k, &n), KV_EINVAL);
    ck_assert_int_eq(kv_sst_store_key_encode("a", 1, 1, -1, 1, k, sizeof k, &n), KV_EINVAL);
    ck_assert_int_eq(kv_sst_store_key_encode(NULL, 0, 1, 1, 1, k, sizeof k, &n), KV_OK);
    ck_assert_uint_eq(n, 10);
    /* Too small a buffer: KV_EINVAL, the size it takes, nothing written. */
    memset(k, 0x5A, sizeof k);
    ck_assert_int_eq(kv_sst_store_key_encode("\0\0", 2, 1, 1, 1, k, 13, &n), KV_EINVAL);
    ck_assert_uint_eq(n, 14);
    ck_assert_uint_eq(k[0], 0x5A);
    ck_assert_int_eq(kv_sst_store_key_encode("\0\0", 2, 1, 1, 0, k, 5, &n), KV_EINVAL);
    ck_assert_uint_eq(n, 6);
}
END_TEST

/* A table of store keys, written with caller hashes as the store does:
 * its raw entries read back with their sequence and kind, and the prefix
 * finds the newest version. */
START_TEST(store_key_table_entries_read_back)
{
    kv_sst_writer *w;
    ck_assert_int_eq(kv_sst_writer_new(path, NULL, &w), KV_OK);
    static const char *const users[] = {"apple", "apple\0", "pear"};
    for (size_t u = 0; u < 3; u++) {
        size_t ul = strlen(users[u]) + (u == 1);
        for (uint64_t s = 3; s >= 1; s--) { /* newest first */
            uint8_t k[32];
            size_t n;
            int kind = s == 2 ? KV_SST_KIND_DELETE : KV_SST_KIND_PUT;
            ck_assert_int_eq(kv_sst_store_key_encode(users[u], ul, u * 10 + s, kind, 1, k,
                                                     sizeof k, &n),
                             KV_OK);
            ck_assert_int_eq(kv_sst_writer_add_hashed(w, k, n, kind ? "v" : "", kind ? 1 : 0,
                                                      u + 1),
                             KV_OK);
        }
    }
    ck_assert_int_eq(kv_sst_writer_finish(w, NULL), KV_OK);
    kv_sst_reader *r;
    ck_assert_int_eq(kv_sst_reader_open(path, NULL, 1, &r), KV_OK);
    kv_sst_iter *it;
    ck_assert_int_eq(kv_sst_iter_new(r, &it), KV_OK);
    size_t i = 0;
    for (kv_sst_iter_seek_first(it); kv_sst_iter_valid(it); kv_sst_iter_next(it), i++) {
        size_t kl;
        const void *k = kv_sst_iter_key(it, &kl);
        uint8_t user[32];
        kv_sst_store_key sk;
        ck_assert_int_eq(kv_sst_store_key_decode(k, kl, user, sizeof user, &sk), KV_OK);
        size_t u = i / 3;
        uint64_t s = 3 - i % 3;
        ck_assert_uint_eq(sk.user_len, strlen(users[u]) + (u == 1));
        ck_assert(memcmp(user, users[u], sk.user_len) == 0);
        ck_assert_uint_eq(sk.sequence, u * 10 + s);
        ck_assert_int_eq(sk.kind, s == 2 ? KV_SST_KIND_DELETE : KV_SST_KIND_PUT);
    }
    ck_assert_int_eq(kv_sst_iter_status(it), KV_OK);
    ck_assert_uint_eq(i, 9);
    kv_sst_iter_free(it);
    /* The newest version of "apple\0" through its prefix. */
    uint8_t pre[32], suffix[8];
    size_t pn, vlen, sl;
    ck_assert_int_eq(kv_sst_store_key_encode("apple", 6, 0, 0, 0, pre, sizeof pre, &pn), KV_OK);
    void *val;
    ck_assert_int_eq(kv_sst_seek_prefixed(r, pre, pn, pn, 2, NULL, &val, &vlen, suffix,
                                          sizeof suffix, &sl),
                     KV_OK);
    kv_free(val);
    ck_assert_uint_eq(sl, 8);
    uint8_t whole[40];
    memcpy(whole, pre, pn);
    memcpy(whole + pn, suffix, 8);
    kv_sst_store_key sk;
    ck_assert_int_eq(kv_sst_store_key_decode(whole, pn + 8, NULL, 0, &sk), KV_OK);
    ck_assert_uint_eq(sk.sequence, 13);
    kv_sst_reader_close(r);
}
END_TEST

/* ---- scan filters (format version 4) ------------------------------------------------ */

/* Bytewise order, shorter first on a tie: the range filter's and the table's. */
static int bytes_cmp(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    return c ? c : (alen > blen) - (alen < blen);
}

/* The model: whether any of the sorted keys k[0, n) lies in [lo, hi)
 * (NULL lo or hi: open). */
static int model_holds(const struct key *k, size_t n, const uint8_t *lo, size_t lolen,
                       const uint8_t *hi, size_t hilen)
{
    size_t a = 0, b = n; /* the first key >= lo */
    while (lo && a < b) {
        size_t m = a + (b - a) / 2;
        if (bytes_cmp(k[m].b, k[m].len, lo, lolen) < 0)
            a = m + 1;
        else
            b = m;
    }
    return a < n && (!hi || bytes_cmp(k[a].b, k[a].len, hi, hilen) < 0);
}

/* A bound for a random range: a key of the table, one just past or before
 * it (a byte appended, the last byte changed), or random bytes; empty and
 * 0xff-filled ones now and then. */
static void random_bound(const struct key *k, size_t n, uint64_t x, struct key *out)
{
    const struct key *src = &k[(x >> 8) % n];
    switch (x % 7) {
    case 0:
    case 1: *out = *src; break;
    case 2:
        *out = *src;
        if (out->len < sizeof out->b)
            out->b[out->len++] = (uint8_t)(x >> 40);
        break;
    case 3:
        *out = *src;
        if (out->len)
            out->b[out->len - 1] += (uint8_t)(1 + (x >> 48) % 3);
        break;
    case 4: random_key(x >> 4, out); break;
    case 5: out->len = 0; break;
    default: out->len = (uint8_t)(1 + (x >> 32) % 4); memset(out->b, 0xff, out->len);
    }
}

/* Keys with the edges a range filter meets: the empty key, 0xff runs, and
 * random keys, sorted and unique. */
static struct key *edge_keys(uint64_t seed, size_t want, size_t *n)
{
    struct key *k = make_keys(seed, want, n);
    k = realloc(k, (*n + 4) * sizeof *k);
    memset(&k[*n], 0, 4 * sizeof *k);
    k[*n].len = 0;
    k[*n + 1].len = 1;
    k[*n + 1].b[0] = 0xff;
    k[*n + 2].len = 9;
    memset(k[*n + 2].b, 0xff, 9);
    k[*n + 3].len = 2;
    k[*n + 3].b[1] = 0;
    qsort(k, *n + 4, sizeof *k, key_cmp);
    size_t m = 0;
    for (size_t i = 0; i < *n + 4; i++)
        if (m == 0 || key_cmp(&k[m - 1], &k[i]) != 0)
            k[m++] = k[i];
    *n = m;
    return k;
}

/* Random ranges over r's keys k[0, n), each checked against the model:
 * a range that holds a key is never answered "no". Returns how many of
 * the empty ranges the filter answered "no". */
static size_t check_ranges(kv_sst_reader *r, const struct key *k, size_t n, size_t tries,
                           uint64_t seed, size_t *empty)
{
    size_t no = 0;
    *empty = 0;
    for (size_t t = 0; t < tries; t++) {
        struct key lo, hi;
        random_bound(k, n, splitmix(seed + 2 * t), &lo);
        random_bound(k, n, splitmix(seed + 2 * t + 1), &hi);
        if (bytes_cmp(lo.b, lo.len, hi.b, hi.len) > 0) {
            struct key x = lo;
            lo = hi;
            hi = x;
        }
        int open = (int)(t % 11); /* 0: lo open, 1: hi open */
        const uint8_t *l = open == 0 ? NULL : lo.b, *h = open == 1 ? NULL : hi.b;
        int holds = model_holds(k, n, l, lo.len, h, hi.len);
        double fpr = -1;
        int may = kv_sst_range_filter_may_hold(r, l, lo.len, h, hi.len, &fpr);
        ck_assert(fpr >= 0 && fpr <= 1);
        if (holds)
            ck_assert_msg(may == 1, "range %zu holds a key, and the filter said no", t);
        else {
            (*empty)++;
            no += may == 0;
        }
    }
    /* Every key, alone: [key, key + "\0"). */
    for (size_t i = 0; i < n; i++) {
        uint8_t b[65];
        memcpy(b, k[i].b, k[i].len);
        b[k[i].len] = 0;
        ck_assert(kv_sst_range_filter_may_hold(r, k[i].b, k[i].len, b, k[i].len + 1u, NULL));
    }
    return no;
}

START_TEST(range_filter_round_trip)
{
    size_t n;
    struct key *k = edge_keys(53, 20000, &n);
    ck_assert_uint_eq(k[0].len, 0); /* the empty key is the first */
    kv_sst_options o;
    kv_sst_options_init(&o);
    o.compression = KV_COMPRESSION_NONE;
    o.seed = 99;
    kv_sst_writer *w;
    ck_assert_int_eq(kv_sst_writer_new(path, &o, &w), KV_OK);
    ck_assert_int_eq(kv_sst_writer_set_range_filter(w, 16, 99), KV_OK);
    ck_assert_int_eq(kv_sst_writer_set_range_filter(w, 16, 99), KV_EINVAL); /* once */
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(kv_sst_writer_add(w, k[i].b, k[i].len, "v", 1), KV_OK);
        /* the table's own keys feed it: the caller may not add others */
        if (i == 0)
            ck_assert_int_eq(kv_sst_writer_add_range_key(w, "zz", 2), KV_EINVAL);
    }
    ck_assert_int_eq(kv_sst_writer_set_range_filter(w, 16, 99), KV_EINVAL); /* after adds */
    ck_assert_int_eq(kv_sst_writer_finish(w, NULL), KV_OK);

    kv_sst_reader *r;
    ck_assert_int_eq(kv_sst_reader_open(path, NULL, 1, &r), KV_OK);
    kv_sst_properties p;
    kv_sst_reader_properties(r, &p);
    ck_assert_uint_eq(p.format_version, 4);
    ck_assert_uint_eq(p.entries, n);
    ck_assert_uint_eq(p.filter_keys, n); /* no prefixes */
    ck_assert_uint_eq(p.prefix_len, 0);
    ck_assert_uint_eq(p.prefix_keys, 0);
    ck_assert(kv_sst_reader_has_range_filter(r));
    ck_assert_uint_gt(p.range_filter_bytes, 0);
    ck_assert_uint_eq(kv_sst_reader_range_filter_bytes(r), p.range_filter_bytes);
    ck_assert_uint_eq(kv_sst_reader_range_filter_keys(r), p.range_filter_keys);
    ck_assert_uint_le(p.range_filter_keys, n);
    if (p.range_filter_keys)
        ck_assert(fabs(p.range_bits_per_key -
                       (double)p.range_filter_bytes * 8 / (double)p.range_filter_keys) < 1e-9);
    ck_assert_uint_eq(kv_sst_reader_prefix_len(r), 0);
    ck_assert_int_eq(kv_sst_verify(r), KV_OK);
    /* Gets and scans are what they were. */
    for (size_t i = 0; i < n; i += 97) {
        void *val;
        size_t vlen;
        ck_assert_int_eq(kv_sst_get(r, k[i].b, k[i].len, &val, &vlen), KV_OK);
        ck_assert_uint_eq(vlen, 1);
        kv_free(val);
    }
    size_t empty;
    size_t no = check_ranges(r, k, n, 40000, 7, &empty);
    ck_assert_uint_gt(empty, 1000); /* the bounds make empty ranges too */
    /* The filter is the one the writer built from these keys, read back:
     * at 16 bits per key it skips most empty ranges (about 85% of these,
     * the rest too wide to ask); half is a loose floor. */
    ck_assert_uint_ge(2 * no, empty);
    kv_sst_reader_close(r);

    /* A table without a range filter answers "maybe", expected FPR 1. */
    char p2[160];
    snprintf(p2, sizeof p2, "%s/000002.sst", test_dir);
    write_table(p2, k, n, 0, &o);
    ck_assert_int_eq(kv_sst_reader_open(p2, NULL, 2, &r), KV_OK);
    kv_sst_reader_properties(r, &p);
    ck_assert_uint_eq(p.format_version, 1);
    ck_assert(!kv_sst_reader_has_range_filter(r));
    ck_assert_uint_eq(p.range_filter_bytes, 0);
    double fpr = 0;
    ck_assert_int_eq(kv_sst_range_filter_may_hold(r, "a", 1, "b", 1, &fpr), 1);
    ck_assert(fpr == 1);
    ck_assert_int_eq(kv_sst_range_filter_may_hold(NULL, "a", 1, "b", 1, NULL), 1);
    ck_assert_uint_eq(kv_sst_reader_range_filter_bytes(r), 0);
    ck_assert_uint_eq(kv_sst_reader_range_filter_keys(NULL), 0);
    ck_assert_int_eq(kv_sst_reader_has_range_filter(NULL), 0);
    kv_sst_reader_close(r);
    free(k);
}
END_TEST

/* The writer's refusals: each before anything is written. */
START_TEST(scan_filter_arguments)
{
    kv_sst_options o;
    kv_sst_options_init(&o);
    kv_sst_writer *w;
    ck_assert_int_eq(kv_sst_writer_set_range_filter(NULL, 16, 1), KV_EINVAL);
    ck_assert_int_eq(kv_sst_writer_add_range_key(NULL, "a", 1), KV_EINVAL);
    ck_assert_int_eq(kv_sst_writer_set_prefix(NULL, 4), KV_EINVAL);
    ck_assert_int_eq(kv_sst_writer_add_prefix_hash(NULL, 1), KV_EINVAL);
    ck_assert_int_eq(kv_sst_writer_new(path, &o, &w), KV_OK);
    ck_assert_int_eq(kv_sst_writer_set_range_filter(w, KV_RFILTER_MIN_BITS - 1, 1), KV_EINVAL);
    ck_assert_int_eq(kv_sst_writer_set_range_filter(w, KV_RFILTER_MAX_BITS + 1, 1), KV_EINVAL);
    ck_assert_int_eq(kv_sst_writer_add_range_key(w, "a", 1), KV_EINVAL); /* none set */
    ck_assert_int_eq(kv_sst_writer_add_prefix_hash(w, 1), KV_EINVAL);    /* none set */
    ck_assert_int_eq(kv_sst_writer_set_prefix(w, 0), KV_EINVAL);
    ck_assert_int_eq(kv_sst_writer_set_range_filter(w, 8, 1), KV_OK);
    ck_assert_int_eq(kv_sst_writer_add_range_key(w, "b", 1), KV_OK);
    ck_assert_int_eq(kv_sst_writer_add_range_key(w, "b", 1), KV_OK); /* again: a no-op */
    /* given range keys, the table takes none of its own: a plain add mixes */
    ck_assert_int_eq(kv_sst_writer_add(w, "b", 1, "v", 1), KV_EINVAL);
    kv_sst_writer_abandon(w);

    /* Prefixes need a filter, and the caller's hashes. */
    o.bits_per_key = 0;
    ck_assert_int_eq(kv_sst_writer_new(path, &o, &w), KV_OK);
    ck_assert_int_eq(kv_sst_writer_set_prefix(w, 2), KV_EINVAL);
    kv_sst_writer_abandon(w);
    o.bits_per_key = 10;
    ck_assert_int_eq(kv_sst_writer_new(path, &o, &w), KV_OK);
    ck_assert_int_eq(kv_sst_writer_set_prefix(w, 2), KV_OK);
    ck_assert_int_eq(kv_sst_writer_add(w, "ab", 2, "v", 1), KV_EINVAL);
    ck_assert_int_eq(kv_sst_writer_add_hashed(w, "ab", 2, "v", 1, 5), KV_OK);
    ck_assert_int_eq(kv_sst_writer_set_prefix(w, 2), KV_EINVAL); /* after an add */
    ck_assert_int_eq(kv_sst_writer_set_range_filter(w, 8, 1), KV_EINVAL);
    kv_sst_writer_abandon(w);

    /* A range filter given no key for a table of pairs would skip them. */
    ck_assert_int_eq(kv_sst_writer_new(path, &o, &w), KV_OK);
    ck_assert_int_eq(kv_sst_writer_set_range_filter(w, 8, 1), KV_OK);
    ck_assert_int_eq(kv_sst_writer_add_hashed(w, "ab", 2, "v", 1, 5), KV_OK);
    ck_assert_int_eq(kv_sst_writer_finish(w, NULL), KV_EINVAL);
    ck_assert_int_eq(access(path, F_OK), -1);
}
END_TEST

static int rev_cmp(void *ctx, const void *a, size_t alen, const void *b, size_t blen)
{
    (void)ctx;
    return -bytes_cmp(a, alen, b, blen);
}

START_TEST(range_filter_refused_with_a_comparator)
{
    kv_comparator rev = {0};
    rev.compare = rev_cmp;
    rev.name = "reverse";
    kv_sst_options o;
    kv_sst_options_init(&o);
    o.comparator = &rev;
    kv_sst_writer *w;
    ck_assert_int_eq(kv_sst_writer_new(path, &o, &w), KV_OK);
    ck_assert_int_eq(kv_sst_writer_set_range_filter(w, 16, 1), KV_EINVAL);
    kv_sst_writer_abandon(w);
}
END_TEST

/* The prefix hash of a store (kv/): a user-key hash, then mixed. */
static uint64_t prefix_mix(uint64_t h)
{
    h ^= 0x9e3779b97f4a7c15ull;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 31);
}

/* A store-shaped table: user keys "pNN|xxxxx" at two versions each, the
 * filter holding user-key hashes and the hashes of each distinct 3-byte
 * prefix, the range filter the user keys. */
static void write_prefixed(const char *p, int with_rf, int with_prefix, size_t *users,
                           size_t *prefixes)
{
    kv_sst_options o;
    kv_sst_options_init(&o);
    o.block_size = 512;
    o.seed = 5;
    kv_sst_writer *w;
    ck_assert_int_eq(kv_sst_writer_new(p, &o, &w), KV_OK);
    if (with_prefix)
        ck_assert_int_eq(kv_sst_writer_set_prefix(w, 3), KV_OK);
    if (with_rf)
        ck_assert_int_eq(kv_sst_writer_set_range_filter(w, 12, 5), KV_OK);
    *users = *prefixes = 0;
    for (unsigned pf = 10; pf < 90; pf += 2) { /* even prefixes only */
        for (unsigned u = 0; u < 1 + pf % 7; u++) {
            char k[16];
            snprintf(k, sizeof k, "p%02u|%05u", pf, u * 3);
            if (with_prefix)
                ck_assert_int_eq(kv_sst_writer_add_prefix_hash(w, prefix_mix(kv_hash_key(k, 3, 5))),
                                 KV_OK);
            if (with_rf)
                ck_assert_int_eq(kv_sst_writer_add_range_key(w, k, 9), KV_OK);
            for (int v = 1; v >= 0; v--) { /* a trailer: newer first */
                char sk[16];
                memcpy(sk, k, 9);
                sk[9] = (char)(0xF0 - v);
                ck_assert_int_eq(kv_sst_writer_add_hashed(w, sk, 10, "val", 3,
                                                          kv_hash_key(k, 9, 5)),
                                 KV_OK);
            }
            (*users)++;
        }
        (*prefixes)++;
    }
    ck_assert_int_eq(kv_sst_writer_finish(w, NULL), KV_OK);
}

START_TEST(prefix_hashes_in_the_point_filter)
{
    size_t users, prefixes;
    write_prefixed(path, 1, 1, &users, &prefixes);
    kv_sst_reader *r;
    ck_assert_int_eq(kv_sst_reader_open(path, NULL, 1, &r), KV_OK);
    kv_sst_properties p;
    kv_sst_reader_properties(r, &p);
    ck_assert_uint_eq(p.format_version, 4);
    ck_assert_uint_eq(p.prefix_len, 3);
    ck_assert_uint_eq(p.prefix_keys, prefixes);
    ck_assert_uint_eq(p.filter_keys, users + prefixes);
    ck_assert_uint_eq(p.entries, 2 * users);
    ck_assert_int_eq(p.filter_hash, KV_SST_FILTER_HASH_CALLER);
    /* sized for whole keys and prefixes at the writer's bits per key */
    ck_assert(fabs((double)p.filter_bits / (double)p.filter_keys - 10) < 1);
    ck_assert_uint_eq(kv_sst_reader_prefix_len(r), 3);
    ck_assert(kv_sst_reader_has_range_filter(r));
    ck_assert_int_eq(kv_sst_verify(r), KV_OK);
    /* Every prefix and every user key is found; prefixes not written are
     * mostly "no" (the filter's FPR, about 1%). */
    size_t absent_yes = 0;
    struct key uk[1024];
    size_t nu = 0;
    for (unsigned pf = 10; pf < 90; pf++) {
        char k[16];
        snprintf(k, sizeof k, "p%02u", pf);
        int may = kv_sst_filter_may_hold(r, prefix_mix(kv_hash_key(k, 3, 5)));
        if (pf % 2 == 0) {
            ck_assert_int_eq(may, 1);
            for (unsigned u = 0; u < 1 + pf % 7; u++) {
                snprintf(k, sizeof k, "p%02u|%05u", pf, u * 3);
                ck_assert_int_eq(kv_sst_filter_may_hold(r, kv_hash_key(k, 9, 5)), 1);
                memcpy(uk[nu].b, k, 9);
                uk[nu++].len = 9;
            }
        } else
            absent_yes += may;
    }
    ck_assert_uint_eq(nu, users);
    ck_assert_uint_le(absent_yes, 5);
    size_t missing_yes = 0;
    for (unsigned i = 0; i < 1000; i++)
        missing_yes += kv_sst_filter_may_hold(r, splitmix(i + 777));
    ck_assert_uint_le(missing_yes, 60);
    /* The range filter holds the user keys the writer was given. */
    size_t empty;
    size_t no = check_ranges(r, uk, nu, 20000, 11, &empty);
    ck_assert_uint_ge(2 * no, empty); /* (all of them, measured) */
    /* Dropped, the filter takes its prefixes with it. */
    kv_sst_reader_drop_filter(r);
    ck_assert_uint_eq(kv_sst_reader_prefix_len(r), 0);
    ck_assert_int_eq(kv_sst_filter_may_hold(r, splitmix(1)), 1);
    kv_sst_reader_close(r);
    ck_assert_uint_eq(kv_sst_reader_prefix_len(NULL), 0);
    ck_assert_int_eq(kv_sst_filter_may_hold(NULL, 1), 1);

    /* Prefixes alone (no range filter) make a version-4 table too; a
     * table with neither is what it was. */
    char p2[160];
    snprintf(p2, sizeof p2, "%s/000002.sst", test_dir);
    write_prefixed(p2, 0, 1, &users, &prefixes);
    ck_assert_int_eq(kv_sst_reader_open(p2, NULL, 2, &r), KV_OK);
    kv_sst_reader_properties(r, &p);
    ck_assert_uint_eq(p.format_version, 4);
    ck_assert(!kv_sst_reader_has_range_filter(r));
    ck_assert_uint_eq(p.prefix_keys, prefixes);
    kv_sst_reader_close(r);
    unlink(p2);
    write_prefixed(p2, 0, 0, &users, &prefixes);
    ck_assert_int_eq(kv_sst_reader_open(p2, NULL, 2, &r), KV_OK);
    kv_sst_reader_properties(r, &p);
    ck_assert_uint_eq(p.format_version, 1);
    ck_assert_uint_eq(p.filter_keys, users);
    ck_assert_uint_eq(kv_sst_reader_prefix_len(r), 0);
    ck_assert_int_eq(kv_sst_filter_may_hold(r, kv_hash_key("p10|00000", 9, 5)), 1);
    kv_sst_reader_close(r);
}
END_TEST

/* The table's properties block handle, from its trailer. */
static void props_handle(const uint8_t *b, size_t len, uint64_t *off, uint64_t *size)
{
    *off = kv_get64(b + len - KV_SST_TRAILER + KV_SST_TRAILER_OFF_PROPS_OFF);
    *size = kv_get64(b + len - KV_SST_TRAILER + KV_SST_TRAILER_OFF_PROPS_SIZE);
}

/* Recomputes the checksum of the block (off, size) in b, as a forger would. */
static void reseal_block(uint8_t *b, uint64_t off, uint64_t size)
{
    kv_put64(b + off + size + 1, XXH3_64bits(b + off, (size_t)size + 1));
}

static void reseal_trailer(uint8_t *b, size_t len)
{
    uint8_t *t = b + len - KV_SST_TRAILER;
    kv_put64(t + KV_SST_TRAILER_OFF_CHECKSUM, XXH3_64bits(t, KV_SST_TRAILER_OFF_CHECKSUM));
}

/* Writes b to p2 and expects its open to fail with KV_ECORRUPT and a text
 * holding `why`. */
static void expect_refused(const char *p2, const uint8_t *b, size_t len, const char *why)
{
    spit(p2, b, len);
    kv_sst_reader *r = NULL;
    ck_assert_int_eq(kv_sst_reader_open(p2, NULL, 9, &r), KV_ECORRUPT);
    ck_assert_ptr_null(r);
    ck_assert_msg(strstr(kv_sst_error_text(), why) != NULL, "wanted \"%s\" in \"%s\"", why,
                  kv_sst_error_text());
}

/* A version-4 table's scan filter fields, each forged behind a recomputed
 * checksum, and its range filter block damaged: all KV_ECORRUPT, with the
 * reason. */
START_TEST(version_4_damage_refused)
{
    size_t users, prefixes, len;
    write_prefixed(path, 1, 1, &users, &prefixes);
    uint8_t *orig = slurp(path, &len), *b = malloc(len);
    char p2[160];
    snprintf(p2, sizeof p2, "%s/forged.sst", test_dir);
    uint64_t poff, plen;
    props_handle(orig, len, &poff, &plen);
    ck_assert_uint_eq(kv_get32(orig + poff + KV_SST_PROPS_OFF_VERSION), 6);
    uint8_t *pr = b + poff;
    uint64_t fkeys = kv_get64(orig + poff + KV_SST_PROPS_OFF_FILTER_KEYS);
    uint64_t rf = kv_get64(orig + poff + KV_SST_PROPS_OFF_RF_SIZE);
    ck_assert_uint_gt(rf, 0);
    static const struct {
        unsigned field; /* 0 rf_keys, 1 prefix_len, 2 prefix_keys, 3 rf_size, 4 filter_hash,
                         * 5 entries, 6 neither filter, 7 version 5 */
        uint64_t value;
        const char *why;
    } forge[] = {
        {0, 7, "bad range filter key kind"},
        {1, 0, "prefix length and prefix count disagree"},
        {2, 0, "prefix length and prefix count disagree"},
        {2, ~0ull, "prefix count disagrees"},
        {3, 1, "do not fill their place"},
        {3, ~0ull >> 1, "range filter block larger than the file"},
        {4, KV_SST_FILTER_HASH_KEY, "prefixes in a filter"},
        {5, 3, "prefix count disagrees"},
        {6, 0, "neither a range filter nor prefixes"},
        {7, 5, "bad properties block"},
    };
    for (size_t i = 0; i < sizeof forge / sizeof forge[0]; i++) {
        memcpy(b, orig, len);
        uint64_t v = forge[i].value;
        switch (forge[i].field) {
        case 0: kv_put32(pr + KV_SST_PROPS_OFF_RF_KEYS, (uint32_t)v); break;
        case 1: kv_put32(pr + KV_SST_PROPS_OFF_PREFIX_LEN, (uint32_t)v); break;
        case 2: kv_put64(pr + KV_SST_PROPS_OFF_PREFIX_KEYS, v ? fkeys + 1 : 0); break;
        case 3: kv_put64(pr + KV_SST_PROPS_OFF_RF_SIZE, v == 1 ? rf + 1 : v); break;
        case 4: kv_put32(pr + KV_SST_PROPS_OFF_FILTER_HASH, (uint32_t)v); break;
        case 5: kv_put64(pr + KV_SST_PROPS_OFF_ENTRIES, v); break;
        case 6:
            kv_put64(pr + KV_SST_PROPS_OFF_RF_SIZE, 0);
            kv_put32(pr + KV_SST_PROPS_OFF_PREFIX_LEN, 0);
            kv_put64(pr + KV_SST_PROPS_OFF_PREFIX_KEYS, 0);
            break;
        default: kv_put32(pr + KV_SST_PROPS_OFF_VERSION, (uint32_t)v);
        }
        reseal_block(b, poff, plen);
        expect_refused(p2, b, len, forge[i].why);
    }
    /* A version-3 trailer over version-6 properties. */
    memcpy(b, orig, len);
    kv_put32(b + len - KV_SST_TRAILER + KV_SST_TRAILER_OFF_VERSION, 3);
    reseal_trailer(b, len);
    expect_refused(p2, b, len, "bad properties block");
    /* Version 5, the next one, is not known. */
    kv_put32(b + len - KV_SST_TRAILER + KV_SST_TRAILER_OFF_VERSION, 5);
    reseal_trailer(b, len);
    expect_refused(p2, b, len, "unknown format version 5");
    /* The range filter block: each byte of it and its trailer flipped is
     * a checksum mismatch; flipped behind a recomputed checksum, the
     * filter's own checks refuse it or it reads as a filter (no crash). */
    uint64_t foff = kv_get64(orig + len - KV_SST_TRAILER + KV_SST_TRAILER_OFF_FILTER_OFF);
    uint64_t rfoff = foff - KV_SST_BLOCK_TRAILER - rf;
    for (uint64_t at = rfoff; at < foff; at += 1 + (foff - rfoff) / 64) {
        memcpy(b, orig, len);
        b[at] ^= 0x21;
        expect_refused(p2, b, len, "block checksum mismatch");
        if (at >= rfoff + rf)
            continue;
        reseal_block(b, rfoff, rf);
        spit(p2, b, len);
        kv_sst_reader *r = NULL;
        int rc = kv_sst_reader_open(p2, NULL, 9, &r);
        ck_assert(rc == KV_OK || rc == KV_ECORRUPT);
        if (rc == KV_ECORRUPT)
            ck_assert_ptr_nonnull(strstr(kv_sst_error_text(), "bad range filter block"));
        kv_sst_reader_close(r);
    }
    /* A compressed range filter block is refused: it is stored raw. */
    memcpy(b, orig, len);
    b[rfoff + rf] = KV_COMPRESSION_ZSTD;
    reseal_block(b, rfoff, rf);
    expect_refused(p2, b, len, "unknown block compression");
    free(b);
    free(orig);
}
END_TEST

/* Tables without scan filters are written at versions 1 to 3 with the
 * layouts of before: properties versions 2 to 5 and their fixed parts. A
 * table of range tombstones alone, which needs no zstd, is the very bytes
 * that the writer of before version 4 wrote (gen_seeds made the seed). */
START_TEST(older_versions_written_as_before)
{
    static const struct {
        size_t dict;
        int rt, keyed;
        uint32_t version, props_version, fixed;
    } t[] = {
        {0, 0, 0, 1, 2, KV_SST_PROPS_FIXED},      {0, 0, 1, 1, 3, KV_SST_PROPS_FIXED},
        {256, 0, 0, 2, 4, KV_SST_PROPS_FIXED_V4}, {0, 1, 0, 3, 5, KV_SST_PROPS_FIXED_V5},
        {256, 1, 0, 3, 5, KV_SST_PROPS_FIXED_V5},
    };
    kv_rt rts[1] = {{(const uint8_t *)"key00010", 8, (const uint8_t *)"key00050", 8, 100}};
    kv_rtset *set = NULL;
    uint8_t *block = NULL;
    size_t blen = 0;
    ck_assert_int_eq(kv_rtset_union(NULL, NULL, 0, rts, 1, NULL, NULL, &set), KV_OK);
    ck_assert_int_eq(kv_rtset_encode(set, &block, &blen), KV_OK);
    kv_rtset_unref(set);
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        unlink(path);
        kv_sst_options o;
        kv_sst_options_init(&o);
        o.block_size = 64;
        o.dict_bytes = t[i].dict;
        kv_sst_writer *w;
        ck_assert_int_eq(kv_sst_writer_new(path, &o, &w), KV_OK);
        if (t[i].keyed)
            ck_assert_int_eq(kv_sst_writer_set_keyed(w, 1234), KV_OK);
        if (t[i].rt)
            ck_assert_int_eq(kv_sst_writer_set_range_tombstones(w, block, blen), KV_OK);
        for (unsigned j = 0; j < 400; j++) {
            char k[16], v[24];
            snprintf(k, sizeof k, "key%05u", j);
            snprintf(v, sizeof v, "v%03u-abcv%03u-abc", j % 7, j % 7);
            ck_assert_int_eq(t[i].keyed ? kv_sst_writer_add_hashed(w, k, 8, v, strlen(v), j)
                                        : kv_sst_writer_add(w, k, 8, v, strlen(v)),
                             KV_OK);
        }
        ck_assert_int_eq(kv_sst_writer_finish(w, NULL), KV_OK);
        size_t len;
        uint8_t *b = slurp(path, &len);
        uint64_t poff, plen;
        props_handle(b, len, &poff, &plen);
        ck_assert_uint_eq(kv_get32(b + len - KV_SST_TRAILER + KV_SST_TRAILER_OFF_VERSION),
                          t[i].version);
        ck_assert_uint_eq(kv_get32(b + poff + KV_SST_PROPS_OFF_VERSION), t[i].props_version);
        ck_assert_uint_eq(plen, t[i].fixed + 8 + 8); /* smallest, largest, no note */
        free(b);
    }
    free(block);

    /* gen_seeds' range_tombstones_alone.sst, written again. */
    static const char *const rt[][2] = {{"key00010", "key00050"},
                                        {"key00030", "key00090"},
                                        {"a", "b"},
                                        {"key00200", "zzzz"},
                                        {"key00040", "key00041"}};
    kv_rt r5[5];
    for (unsigned i = 0; i < 5; i++)
        r5[i] = (kv_rt){(const uint8_t *)rt[i][0], strlen(rt[i][0]), (const uint8_t *)rt[i][1],
                        strlen(rt[i][1]), 100 + 7 * (uint64_t)i};
    ck_assert_int_eq(kv_rtset_union(NULL, NULL, 0, r5, 5, NULL, NULL, &set), KV_OK);
    ck_assert_int_eq(kv_rtset_encode(set, &block, &blen), KV_OK);
    kv_rtset_unref(set);
    kv_sst_options o;
    kv_sst_options_init(&o);
    o.block_size = 64;
    o.bits_per_key = 4;
    unlink(path);
    kv_sst_writer *w;
    ck_assert_int_eq(kv_sst_writer_new(path, &o, &w), KV_OK);
    ck_assert_int_eq(kv_sst_writer_set_range_tombstones(w, block, blen), KV_OK);
    ck_assert_int_eq(kv_sst_writer_finish(w, NULL), KV_OK);
    free(block);
    char seed[512];
    snprintf(seed, sizeof seed, "%s/fuzz/corpus/table/range_tombstones_alone.sst", KV_SOURCE_DIR);
    size_t alen, slen;
    uint8_t *a = slurp(path, &alen), *sb = slurp(seed, &slen);
    ck_assert_uint_eq(alen, slen);
    ck_assert_int_eq(memcmp(a, sb, alen), 0);
    free(a);
    free(sb);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("sstable");
    TCase *tc = tcase_create("round_trip");
    tcase_add_checked_fixture(tc, setup_files, test_teardown);
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, round_trip_zstd_4k);
    tcase_add_test(tc, round_trip_none_4k);
    tcase_add_test(tc, round_trip_zstd_1k);
    tcase_add_test(tc, round_trip_none_1k);
    tcase_add_test(tc, round_trip_zstd_64k);
    tcase_add_test(tc, round_trip_none_64k);
    tcase_add_test(tc, edge_cases);
    tcase_add_test(tc, index_search_key_shapes);
    tcase_add_test(tc, approximate_offsets_uncompressed);
    tcase_add_test(tc, approximate_offsets_zstd);
    tcase_add_test(tc, prefixed_lookup_with_caller_hashes);
    tcase_add_test(tc, batched_lookups_zstd_cached);
    tcase_add_test(tc, batched_lookups_in_place);
    tcase_add_test(tc, batched_lookups_in_range);
    tcase_add_test(tc, reads_properties_version_1);
    tcase_add_test(tc, filter_info_matches_the_properties);
    tcase_add_test(tc, store_keys_round_trip_and_sort);
    tcase_add_test(tc, store_keys_damage_and_bad_arguments);
    tcase_add_test(tc, store_key_table_entries_read_back);
    tcase_add_test(tc, range_filter_round_trip);
    tcase_add_test(tc, scan_filter_arguments);
    tcase_add_test(tc, range_filter_refused_with_a_comparator);
    tcase_add_test(tc, prefix_hashes_in_the_point_filter);
    tcase_add_test(tc, older_versions_written_as_before);
    suite_add_tcase(s, tc);
    tc = tcase_create("damage");
    tcase_add_checked_fixture(tc, setup_files, test_teardown);
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, truncated_and_flipped_files);
    tcase_add_test(tc, read_faults);
    tcase_add_test(tc, write_faults_leave_no_table);
    tcase_add_test(tc, filter_info_only_past_checked_trailer_and_filter);
    tcase_add_test(tc, version_4_damage_refused);
    suite_add_tcase(s, tc);
    tc = tcase_create("cache");
    tcase_add_checked_fixture(tc, setup_files, test_teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, cache_script_and_capacity);
    tcase_add_test(tc, concurrent_readers_share_a_cache);
    tcase_add_test(tc, cache_keeps_held_blocks_and_its_capacity);
    tcase_add_test(tc, cache_threads_hit_insert_evict_release);
    suite_add_tcase(s, tc);
    tc = tcase_create("files");
    tcase_add_checked_fixture(tc, setup_files, test_teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, pool_keeps_to_its_budget);
    tcase_add_test(tc, pool_reopen_failures_are_errors);
    tcase_add_test(tc, pool_under_concurrent_readers);
    suite_add_tcase(s, tc);
    return s;
}
