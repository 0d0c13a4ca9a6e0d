/* check_blob.c - blob files (sstable.h, "blob files"; doc/blob_format.md):
 * round trips of records of every size class, the byte layout against an
 * encoder written here from the document, references and their encoding,
 * reads that must refuse (another key, file, offset, a small buffer),
 * every single-byte flip and every truncation of a small file, forged
 * counts and records behind recomputed checksums, injected write and sync
 * faults, and readers on several threads at once. */
#define _XOPEN_SOURCE 700 /* POSIX 2008 */
#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <kv/sstable.h>

#include "util/coding.h"
#include "../sstable/internal.h" /* kv_blob_writer_size */
#include "testing.h" /* kv_testing: fault injection, I/O counters */

#include "fixture.h"

/* The layout's sizes, as doc/blob_format.md gives them (not taken from
 * the implementation's header, so that the two are checked against each
 * other). */
#define HEADER 32
#define FOOTER 32
#define OVERHEAD 17 /* record head (9) and checksum (8) */
#define MAX_KEY 65536

static char path[128];

/* The fixture's directory, and the files the tests name in it. */
static void setup_files(void)
{
    test_setup();
    test_path(path, sizeof path, "000007.blob");
}

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

/* Bytes made from a seed: binary, with a 0x00 every 7th byte and 0xFF
 * beside it, so keys and values carry NUL bytes and high bytes. */
static void fill(uint64_t seed, uint8_t *p, size_t len)
{
    uint64_t x = splitmix(seed);
    for (size_t i = 0; i < len; i++) {
        if (i % 8 == 0)
            x = splitmix(x + i);
        p[i] = i % 7 == 3 ? 0 : i % 7 == 4 ? 0xFF : (uint8_t)(x >> (8 * (i % 8)));
    }
}

/* ---- a set of records, made from seeds, and what the writer said of them ---- */

struct rec {
    size_t klen, vlen;
    uint64_t seed; /* key: fill(seed), value: fill(seed + 1) */
    kv_blob_ref ref;
};

struct set {
    struct rec *r;
    size_t n, cap;
    size_t max_k, max_v;
};

static void set_add(struct set *s, size_t klen, size_t vlen)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->r = realloc(s->r, s->cap * sizeof *s->r);
        ck_assert_ptr_nonnull(s->r);
    }
    s->r[s->n] = (struct rec){.klen = klen, .vlen = vlen, .seed = 1000 * (uint64_t)s->n + 17};
    s->n++;
    if (klen > s->max_k)
        s->max_k = klen;
    if (vlen > s->max_v)
        s->max_v = vlen;
}

/* Writes the set to p as blob file `number`; returns what finish said. */
static kv_blob_file_info write_set(const char *p, uint64_t number, struct set *s)
{
    kv_blob_writer *w;
    ck_assert_int_eq(kv_blob_writer_new(p, number, &w), KV_OK);
    ck_assert_uint_eq(kv_blob_writer_size(w), HEADER);
    uint8_t *k = malloc(s->max_k + 1), *v = malloc(s->max_v + 1);
    uint64_t bytes = 0;
    for (size_t i = 0; i < s->n; i++) {
        struct rec *r = &s->r[i];
        fill(r->seed, k, r->klen);
        fill(r->seed + 1, v, r->vlen);
        uint64_t before = kv_blob_writer_size(w);
        ck_assert_int_eq(kv_blob_writer_add(w, k, r->klen, v, r->vlen, &r->ref), KV_OK);
        ck_assert_uint_eq(r->ref.number, number);
        ck_assert_uint_eq(r->ref.offset, before);
        ck_assert_uint_eq(r->ref.size, r->vlen);
        ck_assert_uint_eq(kv_blob_writer_size(w), before + kv_blob_record_size(r->klen, r->vlen));
        bytes += OVERHEAD + r->klen + r->vlen;
    }
    free(k);
    free(v);
    kv_blob_file_info info;
    ck_assert_int_eq(kv_blob_writer_finish(w, &info), KV_OK);
    ck_assert_uint_eq(info.number, number);
    ck_assert_uint_eq(info.records, s->n);
    ck_assert_uint_eq(info.record_bytes, bytes);
    ck_assert_uint_eq(info.file_size, HEADER + bytes + FOOTER);
    struct stat st;
    ck_assert_int_eq(stat(p, &st), 0);
    ck_assert_uint_eq((uint64_t)st.st_size, info.file_size);
    return info;
}

/* Reads record i through kv_blob_read and checks its value. */
static int read_rec(kv_blob_reader *br, const struct rec *r, uint8_t *k, uint8_t *v, uint8_t *want)
{
    fill(r->seed, k, r->klen);
    uint64_t got = 0;
    int rc = kv_blob_read(br, &r->ref, k, r->klen, v, r->vlen, &got);
    if (rc == KV_OK) {
        ck_assert_uint_eq(got, kv_blob_record_size(r->klen, r->vlen));
        fill(r->seed + 1, want, r->vlen);
        ck_assert(r->vlen == 0 || memcmp(v, want, r->vlen) == 0);
    }
    return rc;
}

/* A scan's visitor: each record must be the next of the set, with its ref. */
struct walk {
    const struct set *s;
    size_t next;
    size_t stop_after; /* return 42 after this many (0: never) */
    uint8_t *k, *v;
};

static int visit(void *ctx, const void *key, size_t klen, const void *val, size_t vlen,
                 const kv_blob_ref *ref)
{
    struct walk *w = ctx;
    ck_assert_uint_lt(w->next, w->s->n);
    const struct rec *r = &w->s->r[w->next++];
    ck_assert_uint_eq(klen, r->klen);
    ck_assert_uint_eq(vlen, r->vlen);
    ck_assert_uint_eq(ref->number, r->ref.number);
    ck_assert_uint_eq(ref->offset, r->ref.offset);
    ck_assert_uint_eq(ref->size, r->ref.size);
    fill(r->seed, w->k, klen);
    fill(r->seed + 1, w->v, vlen);
    ck_assert(klen == 0 || memcmp(key, w->k, klen) == 0);
    ck_assert(vlen == 0 || memcmp(val, w->v, vlen) == 0);
    return w->stop_after && w->next == w->stop_after ? 42 : 0;
}

/* ---- round trip ------------------------------------------------------------------ */

START_TEST(round_trip_of_every_size_class)
{
    static const size_t ks[] = {0, 1, 100, 4096};
    static const size_t vs[] = {0, 1, 100, 4096, (size_t)1 << 20};
    struct set s = {0};
    for (size_t i = 0; i < 4; i++)
        for (size_t j = 0; j < 5; j++)
            set_add(&s, ks[i], vs[j]);
    /* Many small records between the large ones, so that the scan's
     * windows end inside records; the longest key; a value larger than a
     * scan window, and one of 3 MiB. */
    for (size_t i = 0; i < 3000; i++) {
        uint64_t x = splitmix(i);
        set_add(&s, (size_t)(x % 41), (size_t)((x >> 20) % 3000));
        if (i == 1000)
            set_add(&s, MAX_KEY, 1);
        if (i == 2000)
            set_add(&s, 5, ((size_t)1 << 20) + 12345);
    }
    set_add(&s, 3, (size_t)3 << 20);
    set_add(&s, 0, 0);
    kv_blob_file_info wi = write_set(path, 7, &s);

    kv_blob_reader *br;
    ck_assert_int_eq(kv_blob_reader_open(path, 7, &br), KV_OK);
    kv_blob_file_info ri;
    kv_blob_reader_info(br, &ri);
    ck_assert_mem_eq(&ri, &wi, sizeof ri);
    uint8_t *k = malloc(s.max_k + 1), *v = malloc(s.max_v + 1), *want = malloc(s.max_v + 1);
    for (size_t i = 0; i < s.n; i++)
        ck_assert_int_eq(read_rec(br, &s.r[i], k, v, want), KV_OK);
    /* Into a buffer one byte too small: KV_ERANGE, and nothing read. */
    for (size_t i = 0; i < s.n; i++) {
        const struct rec *r = &s.r[i];
        if (r->vlen == 0 || r->vlen > 5000)
            continue;
        fill(r->seed, k, r->klen);
        memset(v, 0xA5, r->vlen);
        uint64_t got = 99;
        ck_assert_int_eq(kv_blob_read(br, &r->ref, k, r->klen, v, r->vlen - 1, &got), KV_ERANGE);
        ck_assert_uint_eq(got, 0);
        for (size_t j = 0; j < r->vlen; j++)
            ck_assert_uint_eq(v[j], 0xA5);
    }
    /* A larger buffer than needed is fine; bytes_read may be NULL. */
    const struct rec *r = &s.r[7];
    fill(r->seed, k, r->klen);
    ck_assert_int_eq(kv_blob_read(br, &r->ref, k, r->klen, v, s.max_v, NULL), KV_OK);

    struct walk w = {.s = &s, .k = k, .v = want};
    ck_assert_int_eq(kv_blob_scan(br, visit, &w), KV_OK);
    ck_assert_uint_eq(w.next, s.n);
    /* A nonzero return stops the walk and is returned. */
    w = (struct walk){.s = &s, .stop_after = 3, .k = k, .v = want};
    ck_assert_int_eq(kv_blob_scan(br, visit, &w), 42);
    ck_assert_uint_eq(w.next, 3);
    kv_blob_reader_close(br);
    free(k);
    free(v);
    free(want);
    free(s.r);
}
END_TEST

START_TEST(empty_file_opens_and_scans_to_nothing)
{
    struct set s = {0};
    kv_blob_file_info wi = write_set(path, 3, &s);
    ck_assert_uint_eq(wi.file_size, HEADER + FOOTER);
    kv_blob_reader *br;
    ck_assert_int_eq(kv_blob_reader_open(path, 3, &br), KV_OK);
    struct walk w = {.s = &s};
    ck_assert_int_eq(kv_blob_scan(br, visit, &w), KV_OK);
    ck_assert_uint_eq(w.next, 0);
    kv_blob_ref ref = {3, HEADER, 0};
    ck_assert_int_eq(kv_blob_read(br, &ref, "", 0, NULL, 0, NULL), KV_ECORRUPT);
    kv_blob_reader_close(br);
}
END_TEST

/* The file as doc/blob_format.md lays it out, built here byte by byte. */
static size_t doc_record(uint8_t *p, const void *key, uint32_t klen, const void *val, uint32_t vlen)
{
    kv_put32(p, klen);
    kv_put32(p + 4, vlen);
    p[8] = 0;
    memcpy(p + 9, key, klen);
    memcpy(p + 9 + klen, val, vlen);
    kv_put64(p + 9 + klen + vlen, XXH3_64bits(p, 9 + (size_t)klen + vlen));
    return OVERHEAD + (size_t)klen + vlen;
}

START_TEST(file_matches_the_documented_layout)
{
    kv_blob_writer *w;
    ck_assert_int_eq(kv_blob_writer_new(path, 0x0102030405060708ull, &w), KV_OK);
    kv_blob_ref r1, r2;
    ck_assert_int_eq(kv_blob_writer_add(w, "k", 1, "hello", 5, &r1), KV_OK);
    ck_assert_int_eq(kv_blob_writer_add(w, "a\0b", 3, "", 0, &r2), KV_OK);
    ck_assert_int_eq(kv_blob_writer_finish(w, NULL), KV_OK);

    uint8_t want[256];
    size_t n = 0;
    memcpy(want, "kvBlobHd", 8);
    kv_put32(want + 8, 1);
    kv_put32(want + 12, 0);
    kv_put64(want + 16, 0x0102030405060708ull);
    kv_put64(want + 24, XXH3_64bits(want, 24));
    n = HEADER;
    n += doc_record(want + n, "k", 1, "hello", 5);
    n += doc_record(want + n, "a\0b", 3, "", 0);
    uint8_t *f = want + n;
    memcpy(f, "kvBlobFt", 8);
    kv_put64(f + 8, 2);
    kv_put64(f + 16, n - HEADER);
    kv_put64(f + 24, XXH3_64bits(f, 24));
    n += FOOTER;

    size_t len;
    uint8_t *got = slurp(path, &len);
    ck_assert_uint_eq(len, n);
    ck_assert_mem_eq(got, want, n);
    ck_assert_uint_eq(r1.offset, HEADER);
    ck_assert_uint_eq(r2.offset, HEADER + OVERHEAD + 1 + 5);
    ck_assert_uint_eq(n, 64 + 23 + 20);
    free(got);

    /* The worked example of doc/blob_format.md, byte for byte. */
    static const uint8_t example[87] = {
        0x6b, 0x76, 0x42, 0x6c, 0x6f, 0x62, 0x48, 0x64, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xd7, 0x8a, 0x32, 0xb4, 0x6a, 0xa9,
        0x26, 0x92, 0x01, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00, 0x6b, 0x68, 0x65, 0x6c,
        0x6c, 0x6f, 0x41, 0xa0, 0x49, 0x09, 0xe0, 0x77, 0x26, 0xb4, 0x6b, 0x76, 0x42, 0x6c, 0x6f,
        0x62, 0x46, 0x74, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x17, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x95, 0xae, 0x32, 0x25, 0xb9, 0x97, 0x7b, 0xaf};
    unlink(path);
    ck_assert_int_eq(kv_blob_writer_new(path, 7, &w), KV_OK);
    ck_assert_int_eq(kv_blob_writer_add(w, "k", 1, "hello", 5, &r1), KV_OK);
    ck_assert_int_eq(kv_blob_writer_finish(w, NULL), KV_OK);
    got = slurp(path, &len);
    ck_assert_uint_eq(len, sizeof example);
    ck_assert_mem_eq(got, example, sizeof example);
    uint8_t enc[KV_BLOB_REF_MAX];
    ck_assert_uint_eq(kv_blob_ref_encode(&r1, enc), 3);
    ck_assert_mem_eq(enc, "\x07\x20\x05", 3);
    free(got);
}
END_TEST

START_TEST(record_size_formula)
{
    ck_assert_uint_eq(kv_blob_record_size(0, 0), 17);
    ck_assert_uint_eq(kv_blob_record_size(1, 5), 23);
    ck_assert_uint_eq(kv_blob_record_size(MAX_KEY, 0xFFFFFFFFull), 17 + 65536 + 0xFFFFFFFFull);
    ck_assert_uint_eq(kv_blob_record_size(0, UINT64_MAX), UINT64_MAX); /* saturates */
}
END_TEST

/* ---- references --------------------------------------------------------------------- */

START_TEST(refs_encode_and_decode)
{
    static const uint64_t vals[] = {0, 1, 127, 128, 300, 16383, 16384, (uint64_t)1 << 32,
                                    (uint64_t)1 << 63, UINT64_MAX};
    uint8_t buf[KV_BLOB_REF_MAX + 4];
    for (size_t a = 0; a < 10; a++)
        for (size_t b = 0; b < 10; b++)
            for (size_t c = 0; c < 6; c++) { /* sizes up to 2^32 - 1 decode */
                kv_blob_ref ref = {vals[a], vals[b], c == 5 ? 0xFFFFFFFFull : vals[c]}, back;
                size_t n = kv_blob_ref_encode(&ref, buf);
                ck_assert_uint_ge(n, 3);
                ck_assert_uint_le(n, KV_BLOB_REF_MAX);
                ck_assert_int_eq(kv_blob_ref_decode(buf, n, &back), KV_OK);
                ck_assert_mem_eq(&back, &ref, sizeof ref);
                /* Every prefix is truncated; a byte more is not one encoding. */
                for (size_t m = 0; m < n; m++)
                    ck_assert_int_eq(kv_blob_ref_decode(buf, m, &back), KV_ECORRUPT);
                buf[n] = 0;
                ck_assert_int_eq(kv_blob_ref_decode(buf, n + 1, &back), KV_ECORRUPT);
            }
    /* Known answers: three LEB128 varints. */
    kv_blob_ref ref = {7, 32, 300};
    ck_assert_uint_eq(kv_blob_ref_encode(&ref, buf), 4);
    ck_assert_mem_eq(buf, "\x07\x20\xAC\x02", 4);
    ref = (kv_blob_ref){UINT64_MAX, UINT64_MAX, 1};
    ck_assert_uint_eq(kv_blob_ref_encode(&ref, buf), 21);
    kv_blob_ref back;
    /* Overlong: a value in more bytes than it needs, or past 64 bits. */
    ck_assert_int_eq(kv_blob_ref_decode("\x87\x00\x20\x05", 4, &back), KV_ECORRUPT);
    ck_assert_int_eq(kv_blob_ref_decode("\x07\x20\x85\x80\x00", 5, &back), KV_ECORRUPT);
    ck_assert_int_eq(kv_blob_ref_decode("\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02\x01\x01", 12,
                                        &back), KV_ECORRUPT);
    ck_assert_int_eq(kv_blob_ref_decode("\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01\x01\x01",
                                        13, &back), KV_ECORRUPT);
    /* A value size no record can have. */
    ref = (kv_blob_ref){1, 32, (uint64_t)1 << 32};
    size_t n = kv_blob_ref_encode(&ref, buf);
    ck_assert_int_eq(kv_blob_ref_decode(buf, n, &back), KV_ECORRUPT);
    ck_assert_int_eq(kv_blob_ref_decode("", 0, &back), KV_ECORRUPT);
    ck_assert_int_eq(kv_blob_ref_decode(NULL, 3, &back), KV_EINVAL);
    ck_assert_int_eq(kv_blob_ref_decode(buf, n, NULL), KV_EINVAL);
    ck_assert_uint_eq(kv_blob_ref_encode(NULL, buf), 0);
}
END_TEST

/* ---- refused reads ---------------------------------------------------------------------- */

/* A small file of five records; *s gets them. */
static void small_file(const char *p, struct set *s)
{
    memset(s, 0, sizeof *s);
    set_add(s, 3, 10);
    set_add(s, 0, 5);
    set_add(s, 8, 0);
    set_add(s, 3, 10); /* the same lengths as the first: only the key and checksum differ */
    set_add(s, 20, 33);
    write_set(p, 7, s);
}

static void expect_corrupt(int rc)
{
    ck_assert_int_eq(rc, KV_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(kv_sst_error_text(), test_dir)); /* the file's path */
    ck_assert_ptr_nonnull(strstr(kv_sst_error_text(), "offset"));
}

START_TEST(reads_refuse_wrong_key_file_offset_and_size)
{
    struct set s;
    small_file(path, &s);
    kv_blob_reader *br;
    ck_assert_int_eq(kv_blob_reader_open(path, 7, &br), KV_OK);
    kv_blob_file_info info;
    kv_blob_reader_info(br, &info);
    uint8_t k[64], v[64];
    const struct rec *r = &s.r[0];
    fill(r->seed, k, r->klen);
    ck_assert_int_eq(kv_blob_read(br, &r->ref, k, r->klen, v, sizeof v, NULL), KV_OK);
    /* Another key: one byte off, or one byte longer or shorter. */
    k[2] ^= 1;
    expect_corrupt(kv_blob_read(br, &r->ref, k, r->klen, v, sizeof v, NULL));
    k[2] ^= 1;
    expect_corrupt(kv_blob_read(br, &r->ref, k, r->klen + 1, v, sizeof v, NULL));
    expect_corrupt(kv_blob_read(br, &r->ref, k, r->klen - 1, v, sizeof v, NULL));
    /* The key of record 0 at record 3 (same lengths, another key). */
    kv_blob_ref ref = s.r[3].ref;
    expect_corrupt(kv_blob_read(br, &ref, k, r->klen, v, sizeof v, NULL));
    /* Another file's number. */
    ref = r->ref;
    ref.number = 8;
    expect_corrupt(kv_blob_read(br, &ref, k, r->klen, v, sizeof v, NULL));
    /* Another size. */
    ref = r->ref;
    ref.size = 9;
    expect_corrupt(kv_blob_read(br, &ref, k, r->klen, v, sizeof v, NULL));
    /* Wrong offsets: inside the record, inside the header, at and past the
     * footer, a record that would pass the footer, and near 2^64. */
    static const int64_t delta[] = {1, -1, 5};
    for (size_t i = 0; i < 3; i++) {
        ref = r->ref;
        ref.offset = (uint64_t)((int64_t)ref.offset + delta[i]);
        expect_corrupt(kv_blob_read(br, &ref, k, r->klen, v, sizeof v, NULL));
    }
    uint64_t data_end = info.file_size - FOOTER;
    const uint64_t offs[] = {0, HEADER - 1, data_end, data_end - 1,
                             data_end - kv_blob_record_size(r->klen, r->vlen) + 1,
                             info.file_size, info.file_size + 100, UINT64_MAX - 3, UINT64_MAX};
    for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++) {
        ref = r->ref;
        ref.offset = offs[i];
        expect_corrupt(kv_blob_read(br, &ref, k, r->klen, v, sizeof v, NULL));
    }
    /* A buffer too small is KV_ERANGE before anything else is looked at. */
    ref = r->ref;
    ref.offset = UINT64_MAX;
    ck_assert_int_eq(kv_blob_read(br, &ref, k, r->klen, v, r->vlen - 1, NULL), KV_ERANGE);
    ref.size = UINT64_MAX;
    ck_assert_int_eq(kv_blob_read(br, &ref, k, r->klen, v, sizeof v, NULL), KV_ERANGE);
    /* Bad arguments. */
    ck_assert_int_eq(kv_blob_read(NULL, &r->ref, k, r->klen, v, sizeof v, NULL), KV_EINVAL);
    ck_assert_int_eq(kv_blob_read(br, NULL, k, r->klen, v, sizeof v, NULL), KV_EINVAL);
    ck_assert_int_eq(kv_blob_read(br, &r->ref, NULL, r->klen, v, sizeof v, NULL), KV_EINVAL);
    ck_assert_int_eq(kv_blob_read(br, &r->ref, k, r->klen, NULL, sizeof v, NULL), KV_EINVAL);
    ck_assert_int_eq(kv_blob_read(br, &r->ref, k, MAX_KEY + 1, v, sizeof v, NULL), KV_EINVAL);
    ck_assert_int_eq(kv_blob_scan(br, NULL, NULL), KV_EINVAL);
    ck_assert_int_eq(kv_blob_scan(NULL, visit, NULL), KV_EINVAL);
    /* Everything still reads. */
    uint8_t want[64];
    for (size_t i = 0; i < s.n; i++)
        ck_assert_int_eq(read_rec(br, &s.r[i], k, v, want), KV_OK);
    kv_blob_reader_close(br);
    kv_blob_reader_close(NULL);
    kv_blob_reader_info(NULL, &info);
    ck_assert_uint_eq(info.records, 0);
    free(s.r);
}
END_TEST

START_TEST(open_refuses_what_is_not_this_blob_file)
{
    struct set s;
    small_file(path, &s);
    kv_blob_reader *br = (kv_blob_reader *)1;
    /* Another number than the header's. */
    expect_corrupt(kv_blob_reader_open(path, 8, &br));
    ck_assert_ptr_null(br);
    /* No file; a directory; a FIFO (refused without blocking). */
    char p2[160];
    snprintf(p2, sizeof p2, "%s/none.blob", test_dir);
    ck_assert_int_eq(kv_blob_reader_open(p2, 7, &br), KV_NOTFOUND);
    ck_assert_ptr_nonnull(strstr(kv_sst_error_text(), p2));
    ck_assert_int_eq(kv_blob_reader_open(test_dir, 7, &br), KV_ECORRUPT);
    snprintf(p2, sizeof p2, "%s/fifo.blob", test_dir);
    ck_assert_int_eq(mkfifo(p2, 0600), 0);
    ck_assert_int_eq(kv_blob_reader_open(p2, 7, &br), KV_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(kv_sst_error_text(), "FIFO"));
    /* A symbolic link is followed. */
    snprintf(p2, sizeof p2, "%s/link.blob", test_dir);
    ck_assert_int_eq(symlink(path, p2), 0);
    ck_assert_int_eq(kv_blob_reader_open(p2, 7, &br), KV_OK);
    kv_blob_reader_close(br);
    /* A table is no blob file; nor is noise. */
    size_t len;
    uint8_t *orig = slurp(path, &len);
    for (size_t i = 0; i < len; i++)
        orig[i] = (uint8_t)splitmix(i);
    snprintf(p2, sizeof p2, "%s/noise.blob", test_dir);
    spit(p2, orig, len);
    ck_assert_int_eq(kv_blob_reader_open(p2, 7, &br), KV_ECORRUPT);
    ck_assert_int_eq(kv_blob_reader_open(NULL, 7, &br), KV_EINVAL);
    ck_assert_int_eq(kv_blob_reader_open(path, 7, NULL), KV_EINVAL);
    free(orig);
    free(s.r);
}
END_TEST

/* ---- damage ---------------------------------------------------------------------- */

START_TEST(every_byte_flip_is_caught)
{
    struct set s;
    small_file(path, &s);
    size_t len;
    uint8_t *orig = slurp(path, &len), *work = malloc(len);
    char p2[160];
    snprintf(p2, sizeof p2, "%s/flipped.blob", test_dir);
    uint8_t k[64], v[64], want[64];
    static const uint8_t masks[] = {0x01, 0x80, 0xFF, 0x5A};
    for (size_t off = 0; off < len; off++)
        for (size_t m = 0; m < sizeof masks; m++) {
            memcpy(work, orig, len);
            work[off] ^= masks[m];
            spit(p2, work, len);
            kv_blob_reader *br;
            int rc = kv_blob_reader_open(p2, 7, &br);
            if (off < HEADER || off >= len - FOOTER) {
                ck_assert_msg(rc == KV_ECORRUPT, "flip at %zu (header/footer) opened: %d", off, rc);
                ck_assert_ptr_nonnull(strstr(kv_sst_error_text(), p2));
                continue;
            }
            ck_assert_int_eq(rc, KV_OK); /* a record's byte: open reads none */
            /* The scan stops at the damaged record; a read of it fails; a
             * read of any other record succeeds. */
            struct walk w = {.s = &s, .k = k, .v = want};
            ck_assert_msg(kv_blob_scan(br, visit, &w) == KV_ECORRUPT, "flip at %zu scanned", off);
            ck_assert_ptr_nonnull(strstr(kv_sst_error_text(), p2));
            for (size_t i = 0; i < s.n; i++) {
                const struct rec *r = &s.r[i];
                int hit = off >= r->ref.offset &&
                          off < r->ref.offset + kv_blob_record_size(r->klen, r->vlen);
                rc = read_rec(br, r, k, v, want);
                ck_assert_msg(rc == (hit ? KV_ECORRUPT : KV_OK), "flip at %zu, record %zu: %d",
                              off, i, rc);
                if (hit)
                    ck_assert_uint_eq(w.next, i); /* the scan stopped there */
            }
            kv_blob_reader_close(br);
        }
    free(orig);
    free(work);
    free(s.r);
}
END_TEST

START_TEST(every_truncation_is_caught_at_open)
{
    struct set s;
    small_file(path, &s);
    size_t len;
    uint8_t *orig = slurp(path, &len);
    char p2[160];
    snprintf(p2, sizeof p2, "%s/cut.blob", test_dir);
    for (size_t cut = 0; cut < len; cut++) {
        spit(p2, orig, cut);
        kv_blob_reader *br;
        ck_assert_msg(kv_blob_reader_open(p2, 7, &br) == KV_ECORRUPT, "cut at %zu opened", cut);
        ck_assert_ptr_nonnull(strstr(kv_sst_error_text(), p2));
    }
    /* And a byte more at the end (or in the middle: the footer no longer
     * sums the bytes before it). */
    uint8_t *more = malloc(len + 1);
    memcpy(more, orig, len);
    more[len] = 0;
    spit(p2, more, len + 1);
    kv_blob_reader *br;
    ck_assert_int_eq(kv_blob_reader_open(p2, 7, &br), KV_ECORRUPT);
    free(more);
    free(orig);
    free(s.r);
}
END_TEST

static void fix_footer(uint8_t *f)
{
    kv_put64(f + 24, XXH3_64bits(f, 24));
}

static void fix_record(uint8_t *rec)
{
    size_t body = 9 + (size_t)kv_get32(rec) + kv_get32(rec + 4);
    kv_put64(rec + body, XXH3_64bits(rec, body));
}

START_TEST(forgeries_behind_good_checksums_are_caught)
{
    struct set s;
    small_file(path, &s);
    size_t len;
    uint8_t *orig = slurp(path, &len), *work = malloc(len);
    char p2[160];
    snprintf(p2, sizeof p2, "%s/forged.blob", test_dir);
    uint8_t k[64], v[64], want[64];
    kv_blob_reader *br;
    struct walk w = {.s = &s, .k = k, .v = want};

    /* The footer counts one record fewer: open passes, the scan does not. */
    memcpy(work, orig, len);
    kv_put64(work + len - FOOTER + 8, s.n - 1);
    fix_footer(work + len - FOOTER);
    spit(p2, work, len);
    ck_assert_int_eq(kv_blob_reader_open(p2, 7, &br), KV_OK);
    ck_assert_int_eq(kv_blob_scan(br, visit, &w), KV_ECORRUPT);
    ck_assert_uint_eq(w.next, s.n);
    kv_blob_reader_close(br);
    /* More records than the bytes can hold, or other byte counts: open. */
    const uint64_t bad[][2] = {{(len - 64) / 17 + 1, len - 64}, {s.n, len - 63},
                               {s.n, len - 65}, {0, len - 64}, {1, 0}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memcpy(work, orig, len);
        kv_put64(work + len - FOOTER + 8, bad[i][0]);
        kv_put64(work + len - FOOTER + 16, bad[i][1]);
        fix_footer(work + len - FOOTER);
        spit(p2, work, len);
        ck_assert_int_eq(kv_blob_reader_open(p2, 7, &br), KV_ECORRUPT);
    }
    /* Header: version 2, a flag. */
    for (int i = 0; i < 2; i++) {
        memcpy(work, orig, len);
        kv_put32(work + (i ? 12 : 8), 2);
        kv_put64(work + 24, XXH3_64bits(work, 24));
        spit(p2, work, len);
        ck_assert_int_eq(kv_blob_reader_open(p2, 7, &br), KV_ECORRUPT);
    }
    /* Record 1 compressed (kind 1, which version 1 never writes): read and
     * scan refuse it. */
    const struct rec *r = &s.r[1];
    memcpy(work, orig, len);
    work[r->ref.offset + 8] = 1;
    fix_record(work + r->ref.offset);
    spit(p2, work, len);
    ck_assert_int_eq(kv_blob_reader_open(p2, 7, &br), KV_OK);
    expect_corrupt(read_rec(br, r, k, v, want));
    w = (struct walk){.s = &s, .k = k, .v = want};
    ck_assert_int_eq(kv_blob_scan(br, visit, &w), KV_ECORRUPT);
    ck_assert_uint_eq(w.next, 1);
    kv_blob_reader_close(br);
    /* Record 0's key length over 64 KiB, or its value length past the
     * footer: the scan stops there without reading past the records. */
    for (int i = 0; i < 2; i++) {
        memcpy(work, orig, len);
        kv_put32(work + HEADER + (i ? 4 : 0), i ? 0xFFFFFFF0u : (uint32_t)MAX_KEY + 1);
        spit(p2, work, len);
        ck_assert_int_eq(kv_blob_reader_open(p2, 7, &br), KV_OK);
        w = (struct walk){.s = &s, .k = k, .v = want};
        expect_corrupt(kv_blob_scan(br, visit, &w));
        ck_assert_uint_eq(w.next, 0);
        kv_blob_reader_close(br);
    }
    free(orig);
    free(work);
    free(s.r);
}
END_TEST

/* ---- the writer ------------------------------------------------------------------ */

START_TEST(writer_never_reuses_a_name_and_abandon_removes)
{
    struct set s;
    small_file(path, &s);
    size_t len;
    uint8_t *orig = slurp(path, &len);
    kv_blob_writer *w = (kv_blob_writer *)1;
    ck_assert_int_eq(kv_blob_writer_new(path, 7, &w), KV_EINVAL);
    ck_assert_ptr_null(w);
    ck_assert_ptr_nonnull(strstr(kv_sst_error_text(), path));
    size_t len2;
    uint8_t *now = slurp(path, &len2); /* untouched */
    ck_assert_uint_eq(len2, len);
    ck_assert_mem_eq(now, orig, len);
    free(now);
    /* Nor a symbolic link's target. */
    char p2[160], p3[160];
    snprintf(p2, sizeof p2, "%s/link.blob", test_dir);
    snprintf(p3, sizeof p3, "%s/target.blob", test_dir);
    ck_assert_int_eq(symlink(p3, p2), 0);
    ck_assert_int_eq(kv_blob_writer_new(p2, 1, &w), KV_EINVAL);
    ck_assert_int_ne(access(p3, F_OK), 0);

    int64_t fds = kv_file_open_count();
    snprintf(p2, sizeof p2, "%s/000009.blob", test_dir);
    ck_assert_int_eq(kv_blob_writer_new(p2, 9, &w), KV_OK);
    kv_blob_ref ref;
    ck_assert_int_eq(kv_blob_writer_add(w, "k", 1, "v", 1, &ref), KV_OK);
    /* Bad arguments are refused, and the writer goes on. */
    ck_assert_int_eq(kv_blob_writer_add(w, NULL, 1, "v", 1, &ref), KV_EINVAL);
    ck_assert_int_eq(kv_blob_writer_add(w, "k", 1, NULL, 1, &ref), KV_EINVAL);
    ck_assert_int_eq(kv_blob_writer_add(w, "k", 1, "v", 1, NULL), KV_EINVAL);
    ck_assert_int_eq(kv_blob_writer_add(NULL, "k", 1, "v", 1, &ref), KV_EINVAL);
    uint8_t *big = calloc(1, MAX_KEY + 1);
    ck_assert_int_eq(kv_blob_writer_add(w, big, MAX_KEY + 1, "v", 1, &ref), KV_EINVAL);
    ck_assert_int_eq(kv_blob_writer_add(w, big, MAX_KEY, "v", 1, &ref), KV_OK);
#if SIZE_MAX > 0xFFFFFFFFu
    /* Over 4 GiB - 1: refused before a byte of it is read. */
    ck_assert_int_eq(kv_blob_writer_add(w, "k", 1, big, (size_t)1 << 32, &ref), KV_EINVAL);
#endif
    free(big);
    ck_assert_uint_eq(kv_blob_writer_size(w), HEADER + 19 + OVERHEAD + MAX_KEY + 1);
    ck_assert_int_eq(access(p2, F_OK), 0);
    kv_blob_writer_abandon(w);
    ck_assert_int_ne(access(p2, F_OK), 0);
    kv_blob_writer_abandon(NULL);
    ck_assert_int_eq(kv_blob_writer_finish(NULL, NULL), KV_EINVAL);
    ck_assert_int_eq(kv_blob_writer_new(NULL, 1, &w), KV_EINVAL);
    ck_assert_int_eq(kv_blob_writer_new(p2, 1, NULL), KV_EINVAL);
    ck_assert_uint_eq(kv_blob_writer_size(NULL), 0);
    ck_assert_int_eq(kv_file_open_count(), fds);
    free(orig);
    free(s.r);
}
END_TEST

/* Writes the set through a writer on p; the first error, after which the
 * writer is abandoned (or finish's error). */
static int try_write(const char *p, struct set *s, uint8_t *k, uint8_t *v)
{
    kv_blob_writer *w;
    int rc = kv_blob_writer_new(p, 5, &w);
    ck_assert_int_eq(rc, KV_OK);
    for (size_t i = 0; i < s->n && rc == KV_OK; i++) {
        struct rec *r = &s->r[i];
        fill(r->seed, k, r->klen);
        fill(r->seed + 1, v, r->vlen);
        rc = kv_blob_writer_add(w, k, r->klen, v, r->vlen, &r->ref);
    }
    if (rc == KV_OK)
        return kv_blob_writer_finish(w, NULL);
    /* A failed add: later ones fail the same way, and so does finish,
     * which removes the file. */
    kv_blob_ref ref;
    ck_assert_int_eq(kv_blob_writer_add(w, "k", 1, "v", 1, &ref), rc);
    ck_assert_int_eq(kv_blob_writer_finish(w, NULL), rc);
    return rc;
}

START_TEST(write_and_sync_faults_leave_no_file)
{
    /* 300 KiB in records of 0..20 KiB, and one of 400 KiB that goes past
     * the buffer: several buffered writes, one direct. */
    struct set s = {0};
    for (size_t i = 0; i < 40; i++) {
        set_add(&s, 10, (size_t)(splitmix(i) % 20000));
        if (i == 20)
            set_add(&s, 10, 400000);
    }
    uint8_t *k = malloc(s.max_k + 1), *v = malloc(s.max_v + 1);
    uint64_t w0 = kv_file_calls(KV_FILE_KIND_BLOB, KV_FILE_WRITE);
    uint64_t s0 = kv_file_calls(KV_FILE_KIND_BLOB, KV_FILE_SYNC);
    ck_assert_int_eq(try_write(path, &s, k, v), KV_OK);
    uint64_t writes = kv_file_calls(KV_FILE_KIND_BLOB, KV_FILE_WRITE) - w0;
    uint64_t syncs = kv_file_calls(KV_FILE_KIND_BLOB, KV_FILE_SYNC) - s0;
    ck_assert_uint_ge(writes, 3);
    ck_assert_uint_eq(syncs, 1);
    unlink(path);
    int64_t fds = kv_file_open_count();
    static const struct {
        kv_file_op op;
        kv_file_fault fault;
        int expect;
    } faults[] = {{KV_FILE_WRITE, KV_FAULT_ENOSPC, KV_ENOSPC}, {KV_FILE_WRITE, KV_FAULT_EIO, KV_EIO},
                  {KV_FILE_WRITE, KV_FAULT_SHORT, KV_EIO}, {KV_FILE_SYNC, KV_FAULT_EIO, KV_EIO}};
    for (size_t f = 0; f < sizeof faults / sizeof faults[0]; f++)
        for (uint64_t nth = 1; nth <= (faults[f].op == KV_FILE_WRITE ? writes : syncs); nth++) {
            kv_file_inject_kind(KV_FILE_KIND_BLOB, faults[f].op, nth, faults[f].fault);
            int rc = try_write(path, &s, k, v);
            ck_assert_msg(rc == faults[f].expect, "fault %zu on call %llu: %d", f,
                          (unsigned long long)nth, rc);
            ck_assert_ptr_nonnull(strstr(kv_sst_error_text(), path));
            ck_assert_int_ne(access(path, F_OK), 0); /* no file left */
            kv_file_inject_kind(KV_FILE_KIND_BLOB, faults[f].op, 0, KV_FAULT_NONE);
        }
    ck_assert_int_eq(kv_file_open_count(), fds);
    /* And with no fault the file is whole again. */
    ck_assert_int_eq(try_write(path, &s, k, v), KV_OK);
    kv_blob_reader *br;
    ck_assert_int_eq(kv_blob_reader_open(path, 5, &br), KV_OK);
    struct walk w = {.s = &s, .k = k, .v = v};
    ck_assert_int_eq(kv_blob_scan(br, visit, &w), KV_OK);
    kv_blob_reader_close(br);
    free(k);
    free(v);
    free(s.r);
}
END_TEST

/* ---- threads ------------------------------------------------------------------- */

struct reader_arg {
    kv_blob_reader *br;
    const struct set *s;
    unsigned seed;
    int failures;
};

static void *reader_thread(void *p)
{
    struct reader_arg *a = p;
    const struct set *s = a->s;
    uint8_t *k = malloc(s->max_k + 1), *v = malloc(s->max_v + 1), *want = malloc(s->max_v + 1);
    for (unsigned i = 0; i < 4000; i++) {
        const struct rec *r = &s->r[splitmix(a->seed * 100003u + i) % s->n];
        fill(r->seed, k, r->klen);
        if (kv_blob_read(a->br, &r->ref, k, r->klen, v, r->vlen, NULL) != KV_OK) {
            a->failures++;
            continue;
        }
        fill(r->seed + 1, want, r->vlen);
        if (r->vlen && memcmp(v, want, r->vlen) != 0)
            a->failures++;
    }
    free(k);
    free(v);
    free(want);
    return NULL;
}

START_TEST(readers_on_many_threads_share_one_descriptor)
{
    struct set s = {0};
    for (size_t i = 0; i < 500; i++)
        set_add(&s, 1 + i % 300, (size_t)(splitmix(i) % 9000));
    write_set(path, 7, &s);
    kv_blob_reader *br;
    ck_assert_int_eq(kv_blob_reader_open(path, 7, &br), KV_OK);
    enum { T = 4 };
    pthread_t t[T];
    struct reader_arg a[T];
    for (unsigned i = 0; i < T; i++) {
        a[i] = (struct reader_arg){.br = br, .s = &s, .seed = i + 1};
        ck_assert_int_eq(pthread_create(&t[i], NULL, reader_thread, &a[i]), 0);
    }
    for (unsigned i = 0; i < T; i++) {
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
        ck_assert_int_eq(a[i].failures, 0);
    }
    kv_blob_reader_close(br);
    free(s.r);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("blob");
    TCase *tc = tcase_create("round_trip");
    tcase_add_checked_fixture(tc, setup_files, test_teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, round_trip_of_every_size_class);
    tcase_add_test(tc, empty_file_opens_and_scans_to_nothing);
    tcase_add_test(tc, file_matches_the_documented_layout);
    tcase_add_test(tc, record_size_formula);
    tcase_add_test(tc, refs_encode_and_decode);
    tcase_add_test(tc, reads_refuse_wrong_key_file_offset_and_size);
    tcase_add_test(tc, open_refuses_what_is_not_this_blob_file);
    tcase_add_test(tc, writer_never_reuses_a_name_and_abandon_removes);
    suite_add_tcase(s, tc);

    tc = tcase_create("damage");
    tcase_add_checked_fixture(tc, setup_files, test_teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, every_byte_flip_is_caught);
    tcase_add_test(tc, every_truncation_is_caught_at_open);
    tcase_add_test(tc, forgeries_behind_good_checksums_are_caught);
    tcase_add_test(tc, write_and_sync_faults_leave_no_file);
    suite_add_tcase(s, tc);

    tc = tcase_create("threads");
    tcase_add_checked_fixture(tc, setup_files, test_teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, readers_on_many_threads_share_one_descriptor);
    suite_add_tcase(s, tc);
    return s;
}
