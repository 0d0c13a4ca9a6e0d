/* check_compress.c - compressed tables: per-table zstd dictionaries (format
 * version 2) round trip across block sizes and value shapes; tables without
 * one stay version 1 and read as before; a damaged dictionary block is
 * KV_ECORRUPT, never a wrong value; the store compresses only the levels
 * its options say, and shows it. */
#define _XOPEN_SOURCE 700 /* POSIX 2008 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kv/kv.h>
#include <kv/sstable.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "fixture.h"

static char path[128];

/* The fixture's directory, and the files the tests name in it. */
static void setup_files(void)
{
    test_setup();
    test_path(path, sizeof path, "000001.sst");
}

/* ---- value shapes ---------------------------------------------------------- */

enum shape {
    SHAPE_RANDOM,   /* incompressible bytes: blocks stored raw */
    SHAPE_REPEATED, /* one byte over and over */
    SHAPE_EMPTY,    /* no value at all */
    SHAPE_HALF,     /* printable bytes then a copy of them, as kvbench's */
    SHAPES
};

static const char *shape_name[SHAPES] = {"random", "repeated", "empty", "half"};

static size_t shape_len(enum shape s, size_t i)
{
    return s == SHAPE_EMPTY ? 0 : 20 + i % 180;
}

static void shape_fill(enum shape s, size_t i, uint8_t *v, size_t len)
{
    uint64_t x = splitmix(i * 7919 + (uint64_t)s);
    for (size_t j = 0; j < len; j++) {
        switch (s) {
        case SHAPE_RANDOM:
            x = splitmix(x);
            v[j] = (uint8_t)x;
            break;
        case SHAPE_REPEATED:
            v[j] = (uint8_t)('a' + i % 3);
            break;
        case SHAPE_HALF:
            if (j < len / 2) {
                x = splitmix(x);
                v[j] = (uint8_t)(' ' + x % 95);
            } else
                v[j] = v[j - len / 2];
            break;
        default:
            break;
        }
    }
}

static void write_table(const char *p, enum shape s, size_t n, size_t block_size,
                        size_t dict_bytes)
{
    kv_sst_options o;
    kv_sst_options_init(&o);
    o.block_size = block_size;
    o.compression = KV_COMPRESSION_ZSTD;
    o.dict_bytes = dict_bytes;
    kv_sst_writer *w;
    ck_assert_int_eq(kv_sst_writer_new(p, &o, &w), KV_OK);
    uint8_t v[256];
    char k[32];
    for (size_t i = 0; i < n; i++) {
        key_of(k, sizeof k, "user", 12, i * 3);
        size_t len = shape_len(s, i);
        shape_fill(s, i, v, len);
        ck_assert_int_eq(kv_sst_writer_add(w, k, strlen(k), v, len), KV_OK);
    }
    ck_assert_int_eq(kv_sst_writer_finish(w, NULL), KV_OK);
}

/* Every key reads back its value by get and by a scan in order; a key
 * between two written keys is absent. */
static void check_table(const char *p, enum shape s, size_t n, kv_sst_cache *cache)
{
    /* Blocks in a shared cache are known by (table id, offset): an id per
     * table read. */
    static uint64_t next_id = 1;
    kv_sst_reader *r;
    ck_assert_msg(kv_sst_reader_open(p, cache, next_id++, &r) == KV_OK, "%s",
                  kv_sst_error_text());
    ck_assert_msg(kv_sst_verify(r) == KV_OK, "%s", kv_sst_error_text());
    uint8_t want[256];
    char k[32];
    for (size_t i = 0; i < n; i++) {
        key_of(k, sizeof k, "user", 12, i * 3);
        void *val;
        size_t vlen;
        ck_assert_msg(kv_sst_get(r, k, strlen(k), &val, &vlen) == KV_OK, "%s: %s", k,
                      kv_sst_error_text());
        size_t len = shape_len(s, i);
        shape_fill(s, i, want, len);
        ck_assert_uint_eq(vlen, len);
        ck_assert(len == 0 || memcmp(val, want, len) == 0);
        kv_free(val);
        if (i % 97 == 0) { /* between keys 3i and 3i + 3 */
            char miss[32];
            snprintf(miss, sizeof miss, "user%012zu", i * 3 + 1);
            ck_assert_int_eq(kv_sst_get(r, miss, strlen(miss), &val, &vlen), KV_NOTFOUND);
        }
    }
    kv_sst_iter *it;
    ck_assert_int_eq(kv_sst_iter_new(r, &it), KV_OK);
    size_t i = 0;
    for (kv_sst_iter_seek_first(it); kv_sst_iter_valid(it); kv_sst_iter_next(it), i++) {
        size_t klen, vlen;
        const void *key = kv_sst_iter_key(it, &klen);
        const void *val = kv_sst_iter_value(it, &vlen);
        key_of(k, sizeof k, "user", 12, i * 3);
        ck_assert_uint_eq(klen, strlen(k));
        ck_assert(memcmp(key, k, klen) == 0);
        size_t len = shape_len(s, i);
        shape_fill(s, i, want, len);
        ck_assert_uint_eq(vlen, len);
        ck_assert(len == 0 || memcmp(val, want, len) == 0);
    }
    ck_assert_int_eq(kv_sst_iter_status(it), KV_OK);
    ck_assert_uint_eq(i, n);
    kv_sst_iter_free(it);
    kv_sst_reader_close(r);
}

static void props_of(const char *p, kv_sst_properties *out, size_t *dict)
{
    kv_sst_reader *r;
    ck_assert_int_eq(kv_sst_reader_open(p, NULL, 1, &r), KV_OK);
    kv_sst_reader_properties(r, out);
    *dict = out->dict_bytes;
    kv_sst_reader_close(r);
}

/* ---- round trips --------------------------------------------------------------- */

START_TEST(dictionary_round_trips_across_block_sizes_and_shapes)
{
    static const size_t sizes[] = {256, 1024, 2048, 4096, 16384};
    kv_sst_cache *cache;
    ck_assert_int_eq(kv_sst_cache_new((size_t)1 << 20, &cache), KV_OK);
    for (size_t b = 0; b < sizeof sizes / sizeof *sizes; b++) {
        for (int s = 0; s < SHAPES; s++) {
            char p[160];
            snprintf(p, sizeof p, "%s/t-%zu-%s.sst", test_dir, sizes[b], shape_name[s]);
            size_t n = 6000;
            write_table(p, (enum shape)s, n, sizes[b], 4096);
            kv_sst_properties pr;
            size_t dict;
            props_of(p, &pr, &dict);
            /* Compressible blocks get a dictionary (trained on >= 128 KiB of
             * them); it makes the table format version 2. */
            if (s == SHAPE_HALF || s == SHAPE_REPEATED)
                ck_assert_msg(dict > 0, "%s: no dictionary", p);
            ck_assert_uint_eq(pr.format_version, dict ? 2 : 1);
            ck_assert(dict <= 4096);
            if (s == SHAPE_HALF || s == SHAPE_REPEATED)
                ck_assert_uint_lt(pr.data_stored_bytes, pr.data_raw_bytes);
            check_table(p, (enum shape)s, n, cache); /* through the cache */
            check_table(p, (enum shape)s, n, NULL);  /* and without */
        }
    }
    kv_sst_cache_free(cache);
}
END_TEST

/* A dictionary shrinks a table of small blocks: the same pairs take fewer
 * bytes with one than without. */
START_TEST(dictionary_shrinks_small_blocks)
{
    char a[160], b[160];
    snprintf(a, sizeof a, "%s/plain.sst", test_dir);
    snprintf(b, sizeof b, "%s/dict.sst", test_dir);
    write_table(a, SHAPE_HALF, 20000, 1024, 0);
    write_table(b, SHAPE_HALF, 20000, 1024, 16384);
    kv_sst_properties pa, pb;
    size_t da, db;
    props_of(a, &pa, &da);
    props_of(b, &pb, &db);
    ck_assert_uint_eq(da, 0);
    ck_assert_uint_gt(db, 0);
    ck_assert_uint_eq(pa.data_raw_bytes, pb.data_raw_bytes);
    ck_assert_msg(pb.data_stored_bytes + db < pa.data_stored_bytes,
                  "with dictionary %llu + %zu, without %llu",
                  (unsigned long long)pb.data_stored_bytes, db,
                  (unsigned long long)pa.data_stored_bytes);
}
END_TEST

/* A table with too few blocks to train on is written without a dictionary,
 * as version 1; so is any table with dict_bytes 0 (the old writer's
 * output, byte for byte: version 1 in the trailer, properties version 2). */
START_TEST(tables_without_dictionary_stay_version_1)
{
    char small[160];
    snprintf(small, sizeof small, "%s/small.sst", test_dir);
    write_table(small, SHAPE_HALF, 20, 4096, 16384);
    write_table(path, SHAPE_HALF, 6000, 1024, 0);
    const char *ps[] = {small, path};
    for (int i = 0; i < 2; i++) {
        kv_sst_properties pr;
        size_t dict;
        props_of(ps[i], &pr, &dict);
        ck_assert_uint_eq(dict, 0);
        ck_assert_uint_eq(pr.format_version, 1);
        FILE *f = fopen(ps[i], "rb");
        ck_assert_ptr_nonnull(f);
        uint8_t t[72];
        ck_assert_int_eq(fseek(f, -72, SEEK_END), 0);
        ck_assert_uint_eq(fread(t, 1, sizeof t, f), sizeof t);
        fclose(f);
        ck_assert(memcmp(t, "kvSSTbl1", 8) == 0);
        ck_assert_uint_eq(t[8] | t[9] << 8 | t[10] << 16 | (uint32_t)t[11] << 24, 1);
        check_table(ps[i], SHAPE_HALF, i ? 6000 : 20, NULL);
    }
}
END_TEST

/* ---- damage -------------------------------------------------------------------- */

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint8_t *slurp(const char *p, size_t *len)
{
    FILE *f = fopen(p, "rb");
    ck_assert_ptr_nonnull(f);
    uint8_t *b = (uint8_t *)read_all(f, len);
    fclose(f);
    ck_assert_ptr_nonnull(b);
    return b;
}

static void spit(const char *p, const uint8_t *b, size_t len)
{
    FILE *f = fopen(p, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(b, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

/* Opening the damaged copy fails with KV_ECORRUPT, or, where the damage is
 * beyond what open reads, every get gives the right value or
 * KV_ECORRUPT: never a wrong value. */
static void expect_corrupt_or_right(const char *p, size_t n)
{
    kv_sst_reader *r;
    int rc = kv_sst_reader_open(p, NULL, 1, &r);
    if (rc != KV_OK) {
        ck_assert_int_eq(rc, KV_ECORRUPT);
        return;
    }
    uint8_t want[256];
    char k[32];
    for (size_t i = 0; i < n; i++) {
        key_of(k, sizeof k, "user", 12, i * 3);
        void *val;
        size_t vlen;
        rc = kv_sst_get(r, k, strlen(k), &val, &vlen);
        if (rc == KV_ECORRUPT)
            continue;
        ck_assert_int_eq(rc, KV_OK);
        size_t len = shape_len(SHAPE_HALF, i);
        shape_fill(SHAPE_HALF, i, want, len);
        ck_assert_uint_eq(vlen, len);
        ck_assert(memcmp(val, want, len) == 0);
        kv_free(val);
    }
    kv_sst_reader_close(r);
}

START_TEST(damaged_dictionary_block_is_corrupt)
{
    size_t n = 6000;
    write_table(path, SHAPE_HALF, n, 1024, 8192);
    kv_sst_properties pr;
    size_t dict;
    props_of(path, &pr, &dict);
    ck_assert_uint_gt(dict, 0);
    size_t len;
    uint8_t *orig = slurp(path, &len);
    const uint8_t *t = orig + len - 72;
    uint64_t poff = get64(t + 32), plen = get64(t + 40);
    size_t doff = (size_t)(poff + plen + 9); /* the dictionary follows the properties */
    ck_assert_uint_eq(get64(orig + poff + 104), dict);
    ck_assert_uint_eq(get64(t + 48), doff + dict + 9); /* then the filter */
    char bad[160];
    snprintf(bad, sizeof bad, "%s/bad.sst", test_dir);
    uint8_t *b = malloc(len);

    /* A flipped bit anywhere in the dictionary or its trailer: the block's
     * checksum refuses it at open. */
    for (size_t at = doff; at < doff + dict + 9; at += 1 + (at - doff) / 4) {
        memcpy(b, orig, len);
        b[at] ^= 0x10;
        spit(bad, b, len);
        kv_sst_reader *r;
        ck_assert_int_eq(kv_sst_reader_open(bad, NULL, 1, &r), KV_ECORRUPT);
        ck_assert_ptr_null(r);
        ck_assert_msg(strstr(kv_sst_error_text(), "checksum") != NULL, "%s",
                      kv_sst_error_text());
    }

    /* Damage behind a recomputed checksum: what is not a zstd dictionary
     * (its magic) is refused; what zstd takes is read, and no get answers
     * a wrong value unnoticed... */
    for (size_t at = doff; at < doff + dict; at += 1 + (at - doff) / 2) {
        memcpy(b, orig, len);
        b[at] ^= 0x5A;
        uint8_t kind = b[doff + dict];
        XXH3_state_t st;
        XXH3_64bits_reset(&st);
        XXH3_64bits_update(&st, b + doff, dict);
        XXH3_64bits_update(&st, &kind, 1);
        put64(b + doff + dict + 1, XXH3_64bits_digest(&st));
        spit(bad, b, len);
        if (at < doff + 4) {
            kv_sst_reader *r;
            ck_assert_int_eq(kv_sst_reader_open(bad, NULL, 1, &r), KV_ECORRUPT);
            ck_assert_msg(strstr(kv_sst_error_text(), "dictionary") != NULL, "%s",
                          kv_sst_error_text());
        }
    }

    /* ...and the properties' size of it must match its place exactly (a
     * size changed behind recomputed checksums of the properties). */
    static const int64_t deltas[] = {-1, 1, 9, (int64_t)1 << 40};
    for (size_t d = 0; d < sizeof deltas / sizeof *deltas; d++) {
        memcpy(b, orig, len);
        put64(b + poff + 104, dict + (uint64_t)deltas[d]);
        uint8_t kind = b[poff + plen];
        XXH3_state_t st;
        XXH3_64bits_reset(&st);
        XXH3_64bits_update(&st, b + poff, plen);
        XXH3_64bits_update(&st, &kind, 1);
        put64(b + poff + plen + 1, XXH3_64bits_digest(&st));
        spit(bad, b, len);
        kv_sst_reader *r;
        ck_assert_int_eq(kv_sst_reader_open(bad, NULL, 1, &r), KV_ECORRUPT);
    }

    /* A version-1 trailer over a table with a dictionary (its trailer
     * checksum recomputed): the properties' version 4 belongs to version 2. */
    memcpy(b, orig, len);
    b[len - 72 + 8] = 1;
    put64(b + len - 72 + 64, XXH3_64bits(b + len - 72, 64));
    spit(bad, b, len);
    expect_corrupt_or_right(bad, n);
    kv_sst_reader *r;
    ck_assert_int_eq(kv_sst_reader_open(bad, NULL, 1, &r), KV_ECORRUPT);

    /* Data blocks compressed with the dictionary, in a table whose
     * dictionary went missing, cannot be read as plain zstd. */
    free(b);
    free(orig);
}
END_TEST

/* Every truncation of a table with a dictionary is refused at open. */
START_TEST(truncated_dictionary_table_is_corrupt)
{
    write_table(path, SHAPE_HALF, 3000, 1024, 4096);
    size_t len;
    uint8_t *orig = slurp(path, &len);
    char bad[160];
    snprintf(bad, sizeof bad, "%s/cut.sst", test_dir);
    for (size_t cut = 1; cut < len; cut += 1 + cut / 3) {
        spit(bad, orig, len - cut);
        kv_sst_reader *r;
        ck_assert_int_eq(kv_sst_reader_open(bad, NULL, 1, &r), KV_ECORRUPT);
    }
    free(orig);
}
END_TEST

/* ---- the store ----------------------------------------------------------------- */

static void fill_db(kv_db *db, size_t n)
{
    uint8_t v[128];
    char k[32];
    for (size_t i = 0; i < n; i++) {
        key_of(k, sizeof k, "user", 12, i * 3);
        shape_fill(SHAPE_HALF, i, v, 100);
        ck_assert_int_eq(kv_put(db, k, strlen(k), v, 100), KV_OK);
    }
}

static void check_db(kv_db *db, size_t n)
{
    uint8_t want[128];
    char k[32];
    for (size_t i = 0; i < n; i++) {
        key_of(k, sizeof k, "user", 12, i * 3);
        void *val;
        size_t vlen;
        ck_assert_int_eq(kv_get(db, k, strlen(k), &val, &vlen), KV_OK);
        shape_fill(SHAPE_HALF, i, want, 100);
        ck_assert_uint_eq(vlen, 100);
        ck_assert(memcmp(val, want, 100) == 0);
        kv_free(val);
    }
}

static size_t count(const char *text, const char *what)
{
    size_t c = 0;
    for (const char *p = text; (p = strstr(p, what)) != NULL; p++)
        c++;
    return c;
}

/* Defaults: the bottom level (here level 1, after a full compaction) is
 * zstd with a dictionary; a level-0 table above it is raw; kv.sstables
 * shows each; everything reads back, before and after a reopen. */
START_TEST(store_compresses_only_the_levels_asked)
{
    kv_options o;
    kv_options_init(&o);
    ck_assert_int_eq(o.compression, KV_COMPRESSION_ZSTD);
    ck_assert_int_eq(o.compression_min_level, 2);
    ck_assert_uint_eq(o.compression_dict_bytes, 0); /* a dictionary is asked for */
    o.write_buffer_size = (size_t)256 << 10;
    o.compression_dict_bytes = 4096;
    o.idle_compaction_ms = 0; /* the flushed table stays in level 0 for the count below */
    o.dynamic_level_bytes = 0; /* the compaction below leaves level 1 the bottom */
    kv_db *db;
    ck_assert_int_eq(kv_open(test_dir, &o, &db), KV_OK);
    size_t n = 20000;
    fill_db(db, n);
    ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 0), KV_OK);
    check_db(db, n);
    uint8_t v[100] = {0};
    ck_assert_int_eq(kv_put(db, "zz", 2, v, sizeof v), KV_OK);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    char *text;
    ck_assert_int_eq(kv_property(db, "kv.sstables", &text), KV_OK);
    const char *l1 = strstr(text, "--- level 1 ---"), *l2 = strstr(text, "--- level 2 ---");
    ck_assert_ptr_nonnull(l1);
    ck_assert_ptr_nonnull(l2);
    size_t l0_tables = 0, l0_raw = 0, l1_tables = 0, l1_dict = 0;
    for (const char *p = strstr(text, ".sst "); p; p = strstr(p + 1, ".sst ")) {
        const char *eol = strchr(p, '\n');
        const char *z = strstr(p, "\"] zstd, dictionary ");
        int dict = z && z < eol;
        int raw = eol - p > 7 && strncmp(eol - 7, "\"] none", 7) == 0;
        if (p < l1) {
            l0_tables++;
            l0_raw += raw;
        } else if (p < l2) {
            l1_tables++;
            l1_dict += dict;
        }
    }
    ck_assert_msg(l0_tables == 1 && l0_raw == 1, "level 0 not raw:\n%s", text);
    ck_assert_msg(l1_tables > 0 && l1_dict == l1_tables, "level 1 (the bottom) not zstd:\n%s",
                  text);
    kv_free(text);
    ck_assert_int_eq(kv_close(db), KV_OK);
    ck_assert_int_eq(kv_open(test_dir, &o, &db), KV_OK);
    check_db(db, n);
    ck_assert_int_eq(kv_close(db), KV_OK);
}
END_TEST

/* compression_min_level 0 compresses level 0 too; dictionary 0 writes
 * version-1 tables; both kinds of table are read by either setting. */
START_TEST(store_reads_tables_of_every_setting)
{
    kv_options o;
    kv_options_init(&o);
    o.write_buffer_size = (size_t)256 << 10;
    o.compression_min_level = 0;
    o.compression_dict_bytes = 0;
    o.compression_level = 1;
    kv_db *db;
    ck_assert_int_eq(kv_open(test_dir, &o, &db), KV_OK);
    fill_db(db, 10000);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    char *text;
    ck_assert_int_eq(kv_property(db, "kv.sstables", &text), KV_OK);
    ck_assert_msg(count(text, "\"] zstd\n") > 0, "level 0 not compressed:\n%s", text);
    kv_free(text);
    ck_assert_int_eq(kv_close(db), KV_OK);
    kv_options_init(&o); /* reopened with the defaults: dictionaries from now on */
    o.write_buffer_size = (size_t)256 << 10;
    o.compression_min_level = 0;
    o.compression_dict_bytes = 2048;
    ck_assert_int_eq(kv_open(test_dir, &o, &db), KV_OK);
    check_db(db, 10000);
    ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 0), KV_OK);
    check_db(db, 10000);
    ck_assert_int_eq(kv_close(db), KV_OK);
}
END_TEST

/* A caller built before version 5 passes the shorter struct: the new
 * fields keep their defaults; bad values of them are refused. */
START_TEST(options_version_5_fields)
{
    kv_options o;
    kv_options_init(&o);
    ck_assert_uint_ge(o.version, 5);
    kv_options old = o;
    old.version = 4;
    old.compression_dict_bytes = 12345678; /* past the version-4 struct: never read */
    old.compression_min_level = -3;
    kv_db *db;
    ck_assert_int_eq(kv_open(test_dir, &old, &db), KV_OK);
    ck_assert_int_eq(kv_close(db), KV_OK);
    o.compression_dict_bytes = ((size_t)1 << 20) + 1;
    ck_assert_int_eq(kv_open(test_dir, &o, &db), KV_EINVAL);
    ck_assert_ptr_null(db);
    kv_options_init(&o);
    o.compression_min_level = 8;
    ck_assert_int_eq(kv_open(test_dir, &o, &db), KV_EINVAL);
    kv_options_init(&o);
    o.compressed_block_size = 63;
    ck_assert_int_eq(kv_open(test_dir, &o, &db), KV_EINVAL);
    kv_sst_options so;
    kv_sst_options_init(&so);
    so.dict_bytes = ((size_t)1 << 20) + 1;
    kv_sst_writer *w;
    ck_assert_int_eq(kv_sst_writer_new(path, &so, &w), KV_EINVAL);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("compress");
    TCase *tc = tcase_create("dictionary");
    tcase_add_checked_fixture(tc, setup_files, test_teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, dictionary_round_trips_across_block_sizes_and_shapes);
    tcase_add_test(tc, dictionary_shrinks_small_blocks);
    tcase_add_test(tc, tables_without_dictionary_stay_version_1);
    tcase_add_test(tc, damaged_dictionary_block_is_corrupt);
    tcase_add_test(tc, truncated_dictionary_table_is_corrupt);
    suite_add_tcase(s, tc);
    tc = tcase_create("store");
    tcase_add_checked_fixture(tc, setup_files, test_teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, store_compresses_only_the_levels_asked);
    tcase_add_test(tc, store_reads_tables_of_every_setting);
    tcase_add_test(tc, options_version_5_fields);
    suite_add_tcase(s, tc);
    return s;
}
