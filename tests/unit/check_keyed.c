/* check_keyed.c - keyed hashing: SipHash-2-4 against the paper's vectors,
 * keyed filters (kv_bloom_new_keyed: answers, FPR, encoding without the
 * secret, keys crafted against a known XXH3 seed), keyed tables
 * (kv_sst_writer_set_keyed) and keyed stores (kv_options.filter_keyed_hash:
 * the secret in the manifest, tables of both kinds, a lost or damaged
 * secret). */
#define _XOPEN_SOURCE 700
#include <check.h>
#include <dirent.h>
#include <ftw.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kv/bloom.h>
#include <kv/kv.h>
#include <kv/sstable.h>

#include <xxhash.h>

#include "fixture.h"
#include "util/siphash.h"
#include "../filter/filter_format.h"
#include "../sstable/internal.h" /* hashed and keyed writers, kv_sst_reader_drop_filter */

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* 1 when needle[0, n) occurs in hay[0, len). */
static int contains(const void *hay, size_t len, const void *needle, size_t n)
{
    for (size_t i = 0; i + n <= len; i++)
        if (memcmp((const uint8_t *)hay + i, needle, n) == 0)
            return 1;
    return 0;
}

/* ---- SipHash-2-4 ------------------------------------------------------------------ */

/* SipHash-2-4 with key 00 01 .. 0f of the messages of 0 .. 63 bytes
 * 00 01 02 .. : the vectors of the paper's reference implementation
 * (Aumasson and Bernstein 2012, appendix A gives the first; the
 * reference code the 64). */
static const uint64_t sip_vectors[64] = {
    0x726fdb47dd0e0e31ull, 0x74f839c593dc67fdull, 0x0d6c8009d9a94f5aull, 0x85676696d7fb7e2dull,
    0xcf2794e0277187b7ull, 0x18765564cd99a68dull, 0xcbc9466e58fee3ceull, 0xab0200f58b01d137ull,
    0x93f5f5799a932462ull, 0x9e0082df0ba9e4b0ull, 0x7a5dbbc594ddb9f3ull, 0xf4b32f46226bada7ull,
    0x751e8fbc860ee5fbull, 0x14ea5627c0843d90ull, 0xf723ca908e7af2eeull, 0xa129ca6149be45e5ull,
    0x3f2acc7f57c29bdbull, 0x699ae9f52cbe4794ull, 0x4bc1b3f0968dd39cull, 0xbb6dc91da77961bdull,
    0xbed65cf21aa2ee98ull, 0xd0f2cbb02e3b67c7ull, 0x93536795e3a33e88ull, 0xa80c038ccd5ccec8ull,
    0xb8ad50c6f649af94ull, 0xbce192de8a85b8eaull, 0x17d835b85bbb15f3ull, 0x2f2e6163076bcfadull,
    0xde4daaaca71dc9a5ull, 0xa6a2506687956571ull, 0xad87a3535c49ef28ull, 0x32d892fad841c342ull,
    0x7127512f72f27cceull, 0xa7f32346f95978e3ull, 0x12e0b01abb051238ull, 0x15e034d40fa197aeull,
    0x314dffbe0815a3b4ull, 0x027990f029623981ull, 0xcadcd4e59ef40c4dull, 0x9abfd8766a33735cull,
    0x0e3ea96b5304a7d0ull, 0xad0c42d6fc585992ull, 0x187306c89bc215a9ull, 0xd4a60abcf3792b95ull,
    0xf935451de4f21df2ull, 0xa9538f0419755787ull, 0xdb9acddff56ca510ull, 0xd06c98cd5c0975ebull,
    0xe612a3cb9ecba951ull, 0xc766e62cfcadaf96ull, 0xee64435a9752fe72ull, 0xa192d576b245165aull,
    0x0a8787bf8ecb74b2ull, 0x81b3e73d20b49b6full, 0x7fa8220ba3b2eceaull, 0x245731c13ca42499ull,
    0xb78dbfaf3a8d83bdull, 0xea1ad565322a1a0bull, 0x60e61c23a3795013ull, 0x6606d7e446282b93ull,
    0x6ca4ecb15c5f91e1ull, 0x9f626da15c9625f3ull, 0xe51b38608ef25f57ull, 0x958a324ceb064572ull,
};

START_TEST(siphash_matches_the_papers_vectors)
{
    uint8_t secret[16], msg[64];
    for (int i = 0; i < 16; i++)
        secret[i] = (uint8_t)i;
    for (int i = 0; i < 64; i++)
        msg[i] = (uint8_t)i;
    kv_sipkey k;
    kv_sipkey_init(&k, secret);
    for (size_t len = 0; len < 64; len++)
        ck_assert_msg(kv_siphash24(&k, msg, len) == sip_vectors[len],
                      "%zu bytes: %016llx, want %016llx", len,
                      (unsigned long long)kv_siphash24(&k, msg, len),
                      (unsigned long long)sip_vectors[len]);
    /* The empty message may come as NULL. */
    ck_assert(kv_siphash24(&k, NULL, 0) == sip_vectors[0]);
}
END_TEST

START_TEST(siphash_depends_on_every_secret_byte)
{
    uint8_t secret[16] = {0}, msg[24] = "a key of twenty-four b.";
    kv_sipkey k;
    kv_sipkey_init(&k, secret);
    uint64_t base = kv_siphash24(&k, msg, sizeof msg);
    for (int i = 0; i < 16; i++) {
        secret[i] ^= 1;
        kv_sipkey_init(&k, secret);
        ck_assert_msg(kv_siphash24(&k, msg, sizeof msg) != base, "secret byte %d ignored", i);
        secret[i] ^= 1;
    }
}
END_TEST

/* ---- keyed filters ---------------------------------------------------------------- */

static const uint8_t secret_a[16] = {0x5e, 0xc4, 0x37, 0x01, 0x9a, 0x22, 0xd8, 0x6b,
                                     0x40, 0xf3, 0x11, 0x7c, 0xe5, 0x88, 0x2d, 0xb9};
static const uint8_t secret_b[16] = {0x5e, 0xc4, 0x37, 0x01, 0x9a, 0x22, 0xd8, 0x6b,
                                     0x40, 0xf3, 0x11, 0x7c, 0xe5, 0x88, 0x2d, 0xba};

static void key16(uint64_t i, uint64_t salt, char k[17])
{
    snprintf(k, 17, "%016llx", (unsigned long long)splitmix(i * 2 + salt));
}

static const char *layout_name(kv_bloom_layout l)
{
    return l == KV_BLOOM_BLOCKED ? "blocked" : "classic";
}

START_TEST(keyed_filter_hash_is_siphash_of_the_key)
{
    kv_bloom *f;
    ck_assert_int_eq(kv_bloom_new_keyed(KV_BLOOM_BLOCKED, 1000, 10, secret_a, &f), KV_OK);
    ck_assert_int_eq(kv_bloom_is_keyed(f), 1);
    kv_sipkey k;
    kv_sipkey_init(&k, secret_a);
    for (uint64_t i = 0; i < 100; i++) {
        char key[101];
        memset(key, 'x', sizeof key);
        snprintf(key, sizeof key, "key-%llu", (unsigned long long)i);
        size_t len = (size_t)(i % 2 ? 100 : 16);
        ck_assert(kv_bloom_hash(f, key, len) == kv_siphash24(&k, key, len));
    }
    ck_assert(kv_bloom_hash(f, NULL, 0) == kv_siphash24(&k, "", 0));
    kv_bloom_free(f);

    /* An unkeyed filter is not keyed; bad arguments. */
    ck_assert_int_eq(kv_bloom_new(KV_BLOOM_BLOCKED, 1000, 10, 7, &f), KV_OK);
    ck_assert_int_eq(kv_bloom_is_keyed(f), 0);
    kv_bloom_free(f);
    ck_assert_int_eq(kv_bloom_is_keyed(NULL), 0);
    f = (kv_bloom *)1;
    ck_assert_int_eq(kv_bloom_new_keyed(KV_BLOOM_BLOCKED, 1000, 10, NULL, &f), KV_EINVAL);
    ck_assert_ptr_null(f);
    ck_assert_int_eq(kv_bloom_new_keyed(KV_BLOOM_BLOCKED, 1000, -1, secret_a, &f), KV_EINVAL);
    ck_assert_ptr_null(f);
    ck_assert(kv_bloom_secret_check(NULL) == 0);
    ck_assert(kv_bloom_secret_check(secret_a) != kv_bloom_secret_check(secret_b));
}
END_TEST

/* No false negative, and the measured FPR near the layout's expected one,
 * for keys of 16 and 100 bytes added by key and by hash. */
START_TEST(keyed_filter_fpr_near_theory)
{
    kv_bloom_layout layout = _i ? KV_BLOOM_CLASSIC : KV_BLOOM_BLOCKED;
    const uint64_t n = 100000, probes = 400000;
    kv_bloom *f;
    ck_assert_int_eq(kv_bloom_new_keyed(layout, n, 10, secret_a, &f), KV_OK);
    char key[17];
    for (uint64_t i = 0; i < n; i++) {
        key16(i, 0, key);
        if (i % 2)
            kv_bloom_add(f, key, 16);
        else
            kv_bloom_add_hash(f, kv_bloom_hash(f, key, 16));
    }
    uint64_t missed = 0, fp = 0;
    for (uint64_t i = 0; i < n; i++) {
        key16(i, 0, key);
        missed += !kv_bloom_may_contain(f, key, 16);
        missed += !kv_bloom_may_contain_hash(f, kv_bloom_hash(f, key, 16));
    }
    for (uint64_t i = 0; i < probes; i++) {
        key16(i, 1, key);
        fp += (uint64_t)kv_bloom_may_contain(f, key, 16);
    }
    kv_bloom_info info;
    kv_bloom_stats(f, &info);
    double fpr = (double)fp / (double)probes;
    ck_assert_msg(missed == 0, "%s: %llu false negatives", layout_name(layout),
                  (unsigned long long)missed);
    ck_assert_uint_eq(info.keys_added, n);
    ck_assert_msg(fpr < info.expected_fpr * 1.25 && fpr > info.expected_fpr * 0.75,
                  "%s: measured FPR %.5f, expected %.5f", layout_name(layout), fpr,
                  info.expected_fpr);
    kv_bloom_free(f);
}
END_TEST

/* The payload (bit array) of an encoding. */
static const uint8_t *payload_of(const void *enc, size_t *len)
{
    *len = (size_t)le64((const uint8_t *)enc + KV_BLOOM_FMT_OFF_PAYLOAD_LEN);
    return (const uint8_t *)enc + KV_BLOOM_FMT_HEADER;
}

START_TEST(different_secrets_set_different_bits)
{
    kv_bloom *fa, *fa2, *fb;
    ck_assert_int_eq(kv_bloom_new_keyed(KV_BLOOM_BLOCKED, 5000, 10, secret_a, &fa), KV_OK);
    ck_assert_int_eq(kv_bloom_new_keyed(KV_BLOOM_BLOCKED, 5000, 10, secret_a, &fa2), KV_OK);
    ck_assert_int_eq(kv_bloom_new_keyed(KV_BLOOM_BLOCKED, 5000, 10, secret_b, &fb), KV_OK);
    char key[17];
    for (uint64_t i = 0; i < 5000; i++) {
        key16(i, 0, key);
        kv_bloom_add(fa, key, 16);
        kv_bloom_add(fa2, key, 16);
        kv_bloom_add(fb, key, 16);
    }
    void *ea, *ea2, *eb;
    size_t la, la2, lb, pa, pa2, pb;
    ck_assert_int_eq(kv_bloom_encode(fa, &ea, &la), KV_OK);
    ck_assert_int_eq(kv_bloom_encode(fa2, &ea2, &la2), KV_OK);
    ck_assert_int_eq(kv_bloom_encode(fb, &eb, &lb), KV_OK);
    const uint8_t *ba = payload_of(ea, &pa), *ba2 = payload_of(ea2, &pa2), *bb = payload_of(eb, &pb);
    ck_assert_uint_eq(pa, pb);
    /* One secret, one bit pattern; a secret one bit apart, another. */
    ck_assert(pa == pa2 && memcmp(ba, ba2, pa) == 0);
    size_t differ = 0;
    for (size_t i = 0; i < pa; i++)
        differ += ba[i] != bb[i];
    ck_assert_msg(differ > pa / 2, "only %zu of %zu bytes differ", differ, pa);
    kv_free(ea);
    kv_free(ea2);
    kv_free(eb);
    kv_bloom_free(fa);
    kv_bloom_free(fa2);
    kv_bloom_free(fb);
}
END_TEST

START_TEST(keyed_encoding_holds_no_secret_and_needs_it_back)
{
    kv_bloom *f, *g;
    ck_assert_int_eq(kv_bloom_new_keyed(KV_BLOOM_CLASSIC, 2000, 12, secret_a, &f), KV_OK);
    char key[17];
    for (uint64_t i = 0; i < 2000; i++) {
        key16(i, 0, key);
        kv_bloom_add(f, key, 16);
    }
    void *enc;
    size_t len;
    ck_assert_int_eq(kv_bloom_encode(f, &enc, &len), KV_OK);
    const uint8_t *p = enc;
    ck_assert_uint_eq(p[KV_BLOOM_FMT_OFF_HASH], KV_BLOOM_FMT_HASH_SIPHASH24);
    ck_assert(le64(p + KV_BLOOM_FMT_OFF_SEED) == kv_bloom_secret_check(secret_a));
    /* Neither the secret nor either half of it is anywhere in the bytes. */
    ck_assert(!contains(enc, len, secret_a, 8));
    ck_assert(!contains(enc, len, secret_a + 8, 8));

    /* kv_bloom_decode refuses it, and says why. */
    g = (kv_bloom *)1;
    ck_assert_int_eq(kv_bloom_decode(enc, len, &g), KV_EINVAL);
    ck_assert_ptr_null(g);
    ck_assert_ptr_nonnull(strstr(kv_error_text(), "kv_bloom_decode_keyed"));
    /* The wrong secret, a NULL one. */
    ck_assert_int_eq(kv_bloom_decode_keyed(enc, len, secret_b, &g), KV_EINVAL);
    ck_assert_ptr_null(g);
    ck_assert_ptr_nonnull(strstr(kv_error_text(), "secret"));
    ck_assert_int_eq(kv_bloom_decode_keyed(enc, len, NULL, &g), KV_EINVAL);
    /* A keyed encoding is version 2: marked version 1, which knows only
     * XXH3, it is damage (its checksum made right again). */
    ck_assert_uint_eq(p[KV_BLOOM_FMT_OFF_VERSION], 2);
    uint8_t *bad = malloc(len);
    memcpy(bad, enc, len);
    bad[KV_BLOOM_FMT_OFF_VERSION] = 1;
    {
        uint64_t c = XXH3_64bits(bad, len - 8);
        for (int i = 0; i < 8; i++)
            bad[len - 8 + i] = (uint8_t)(c >> (8 * i));
    }
    ck_assert_int_eq(kv_bloom_decode_keyed(bad, len, secret_a, &g), KV_ECORRUPT);
    ck_assert_int_eq(kv_bloom_decode(bad, len, &g), KV_ECORRUPT);
    /* Damage is still damage, whatever the secret. */
    memcpy(bad, enc, len);
    bad[KV_BLOOM_FMT_HEADER + 3] ^= 0x10;
    ck_assert_int_eq(kv_bloom_decode_keyed(bad, len, secret_a, &g), KV_ECORRUPT);
    ck_assert_int_eq(kv_bloom_decode(bad, len, &g), KV_ECORRUPT);
    ck_assert_int_eq(kv_bloom_decode_keyed(enc, len - 1, secret_a, &g), KV_ECORRUPT);
    free(bad);

    /* With its secret: keyed again, the same answers. */
    ck_assert_int_eq(kv_bloom_decode_keyed(enc, len, secret_a, &g), KV_OK);
    ck_assert_int_eq(kv_bloom_is_keyed(g), 1);
    uint64_t missed = 0, differ = 0;
    for (uint64_t i = 0; i < 2000; i++) {
        key16(i, 0, key);
        missed += !kv_bloom_may_contain(g, key, 16);
        key16(i, 1, key);
        differ += kv_bloom_may_contain(g, key, 16) != kv_bloom_may_contain(f, key, 16);
        ck_assert(kv_bloom_hash(g, key, 16) == kv_bloom_hash(f, key, 16));
    }
    ck_assert_uint_eq(missed, 0);
    ck_assert_uint_eq(differ, 0);
    kv_bloom_free(g);
    kv_free(enc);

    /* An unkeyed encoding is not decoded as keyed. */
    kv_bloom *u;
    ck_assert_int_eq(kv_bloom_new(KV_BLOOM_BLOCKED, 100, 10, 3, &u), KV_OK);
    ck_assert_int_eq(kv_bloom_encode(u, &enc, &len), KV_OK);
    ck_assert_uint_eq(((const uint8_t *)enc)[KV_BLOOM_FMT_OFF_VERSION], 1); /* as before */
    ck_assert_int_eq(kv_bloom_decode_keyed(enc, len, secret_a, &g), KV_EINVAL);
    ck_assert_ptr_null(g);
    ck_assert_int_eq(kv_bloom_decode(enc, len, &g), KV_OK);
    ck_assert_int_eq(kv_bloom_is_keyed(g), 0);
    kv_bloom_free(g);
    kv_free(enc);
    kv_bloom_free(u);
    kv_bloom_free(f);
}
END_TEST

/* Which of nblocks blocks a hash picks (multiply-shift, as the blocked
 * layout does: doc/filter_format.md). */
static uint64_t block_of_hash(uint64_t h, uint64_t nblocks)
{
    return (uint64_t)(((unsigned __int128)h * nblocks) >> 64);
}

/* Blocks of an encoded blocked filter that have any bit set. */
static uint64_t blocks_used(const kv_bloom *f)
{
    void *enc;
    size_t len, plen;
    ck_assert_int_eq(kv_bloom_encode(f, &enc, &len), KV_OK);
    const uint8_t *b = payload_of(enc, &plen);
    uint64_t used = 0;
    for (size_t blk = 0; blk < plen / 64; blk++) {
        int any = 0;
        for (size_t j = 0; j < 64; j++)
            any |= b[blk * 64 + j];
        used += any != 0;
    }
    kv_free(enc);
    return used;
}

/* Keys crafted against a known seed: whoever knows an unkeyed filter's
 * seed can search for keys whose XXH3 all pick the same block (here 1 in
 * 63 keys does, so 2,000 of them take some 128,000 hashes). In the seeded
 * filter they fill that one block and leave the rest empty, so every
 * query that lands there is a "maybe"; under the keyed hash the same keys
 * spread over every block, as random keys do. */
START_TEST(keys_crafted_against_a_seed_spread_under_the_keyed_hash)
{
    const uint64_t seed = 42, want = 2000;
    kv_bloom *seeded, *keyed;
    ck_assert_int_eq(kv_bloom_new(KV_BLOOM_BLOCKED, 3200, 10, seed, &seeded), KV_OK);
    ck_assert_int_eq(kv_bloom_new_keyed(KV_BLOOM_BLOCKED, 3200, 10, secret_a, &keyed), KV_OK);
    kv_bloom_info info;
    kv_bloom_stats(seeded, &info);
    uint64_t nblocks = info.bits / 512;
    ck_assert_uint_eq(nblocks, 63); /* 32,000 bits, rounded up to whole blocks */

    char (*keys)[24] = malloc(want * sizeof *keys);
    uint64_t found = 0, tried = 0;
    for (uint64_t i = 0; found < want && i < 10000000; i++, tried++) {
        char k[24];
        int len = snprintf(k, sizeof k, "user:%llu", (unsigned long long)i);
        if (block_of_hash(XXH3_64bits_withSeed(k, (size_t)len, seed), nblocks) == 0)
            memcpy(keys[found++], k, sizeof k);
    }
    ck_assert_uint_eq(found, want);
    for (uint64_t i = 0; i < want; i++) {
        kv_bloom_add(seeded, keys[i], strlen(keys[i]));
        kv_bloom_add(keyed, keys[i], strlen(keys[i]));
        /* The hash the seeded filter uses is the one the attacker computed. */
        ck_assert(block_of_hash(kv_bloom_hash(seeded, keys[i], strlen(keys[i])), nblocks) == 0);
    }
    /* Seeded: one block holds every key (and is saturated). */
    ck_assert_uint_eq(blocks_used(seeded), 1);
    /* Keyed: 2,000 keys over 63 blocks leave none empty (the chance that a
     * random placement does is 63 (62/63)^2000, about 1e-12). */
    ck_assert_uint_eq(blocks_used(keyed), nblocks);
    /* Queries the attacker aims at the crafted block all pass the seeded
     * filter; the keyed one rejects most of them. */
    uint64_t seeded_fp = 0, keyed_fp = 0, aimed = 0;
    for (uint64_t i = 10000000; aimed < 2000; i++) {
        char k[24];
        int len = snprintf(k, sizeof k, "probe:%llu", (unsigned long long)i);
        if (block_of_hash(XXH3_64bits_withSeed(k, (size_t)len, seed), nblocks) != 0)
            continue;
        aimed++;
        seeded_fp += (uint64_t)kv_bloom_may_contain(seeded, k, (size_t)len);
        keyed_fp += (uint64_t)kv_bloom_may_contain(keyed, k, (size_t)len);
    }
    ck_assert_msg(seeded_fp > aimed * 99 / 100, "seeded: %llu of %llu aimed queries pass",
                  (unsigned long long)seeded_fp, (unsigned long long)aimed);
    ck_assert_msg(keyed_fp < aimed / 5, "keyed: %llu of %llu aimed queries pass",
                  (unsigned long long)keyed_fp, (unsigned long long)aimed);
    free(keys);
    kv_bloom_free(seeded);
    kv_bloom_free(keyed);
}
END_TEST

/* ---- keyed tables ------------------------------------------------------------------ */

START_TEST(keyed_table_records_its_kind_and_check)
{
    char path[600];
    snprintf(path, sizeof path, "%s/t.sst", test_dir);
    kv_sipkey sk;
    kv_sipkey_init(&sk, secret_a);
    uint64_t check = kv_bloom_secret_check(secret_a);
    kv_sst_writer *w;
    ck_assert_int_eq(kv_sst_writer_new(path, NULL, &w), KV_OK);
    ck_assert_int_eq(kv_sst_writer_set_keyed(w, check), KV_OK);
    ck_assert_int_eq(kv_sst_writer_add(w, "a", 1, "v", 1), KV_EINVAL); /* whole-key: not keyed */
    char key[17];
    for (uint64_t i = 0; i < 3000; i++) {
        snprintf(key, sizeof key, "%016llu", (unsigned long long)i);
        ck_assert_int_eq(kv_sst_writer_add_hashed(w, key, 16, "v", 1,
                                                  kv_siphash24(&sk, key, 16)), KV_OK);
    }
    ck_assert_int_eq(kv_sst_writer_set_keyed(w, check), KV_EINVAL); /* after adds */
    ck_assert_int_eq(kv_sst_writer_finish(w, NULL), KV_OK);
    ck_assert_int_eq(kv_sst_writer_set_keyed(NULL, check), KV_EINVAL);

    kv_sst_reader *r;
    ck_assert_int_eq(kv_sst_reader_open(path, NULL, 1, &r), KV_OK);
    kv_sst_properties p;
    kv_sst_reader_properties(r, &p);
    ck_assert_int_eq(p.filter_hash, KV_SST_FILTER_HASH_KEYED);
    ck_assert(p.filter_seed == check);
    void *v;
    size_t vlen;
    uint64_t missed = 0, negatives = 0;
    for (uint64_t i = 0; i < 3000; i++) {
        snprintf(key, sizeof key, "%016llu", (unsigned long long)i);
        int rc = kv_sst_get_hashed(r, key, 16, kv_siphash24(&sk, key, 16), &v, &vlen);
        missed += rc != KV_OK;
        if (rc == KV_OK)
            kv_free(v);
        snprintf(key, sizeof key, "%015llux", (unsigned long long)i);
        negatives += kv_sst_get_hashed(r, key, 16, kv_siphash24(&sk, key, 16), &v, &vlen) ==
                     KV_NOTFOUND;
    }
    ck_assert_uint_eq(missed, 0);
    ck_assert_uint_eq(negatives, 3000);
    kv_sst_counters c;
    kv_sst_reader_counters(r, &c);
    ck_assert_uint_lt(c.filter_false_positives, 3000 / 20);

    /* Without its filter the table answers every key from its blocks, with
     * any hash. */
    kv_bloom_info bi;
    ck_assert_int_eq(kv_sst_reader_filter_info(r, &bi), KV_OK);
    kv_sst_reader_drop_filter(r);
    kv_sst_reader_drop_filter(NULL);
    ck_assert_int_eq(kv_sst_reader_filter_info(r, &bi), KV_NOTFOUND);
    for (uint64_t i = 0; i < 3000; i += 7) {
        snprintf(key, sizeof key, "%016llu", (unsigned long long)i);
        ck_assert_int_eq(kv_sst_get_hashed(r, key, 16, 12345, &v, &vlen), KV_OK);
        kv_free(v);
    }
    kv_sst_reader_close(r);
}
END_TEST

/* ---- keyed stores ------------------------------------------------------------------ */

#define NKEYS 20000u

/* The store test_dir/name, with keyed filter hashes or not. */
static kv_db *open_keyed(const char *name, int keyed)
{
    kv_options o;
    kv_options_init(&o);
    o.write_buffer_size = (size_t)256 << 10;
    o.target_file_size = (size_t)256 << 10;
    o.max_bytes_for_level_base = (size_t)1 << 20;
    o.compression = KV_COMPRESSION_NONE;
    o.filter_keyed_hash = keyed;
    return open_db(name, &o);
}

static void put_range(kv_db *db, uint64_t from, uint64_t to)
{
    char key[17];
    for (uint64_t i = from; i < to; i++) {
        key16(i, 0, key);
        ck_assert_int_eq(kv_put(db, key, 16, key, 16), KV_OK);
    }
}

/* Every key of [from, to) is found with its value. */
static void expect_found(kv_db *db, uint64_t from, uint64_t to)
{
    char key[17];
    uint64_t bad = 0;
    for (uint64_t i = from; i < to; i++) {
        key16(i, 0, key);
        void *v;
        size_t vlen;
        int rc = kv_get(db, key, 16, &v, &vlen);
        bad += rc != KV_OK || vlen != 16 || memcmp(v, key, 16) != 0;
        if (rc == KV_OK)
            kv_free(v);
    }
    ck_assert_msg(bad == 0, "%llu of %llu keys not found", (unsigned long long)bad,
                  (unsigned long long)(to - from));
}

/* Gets of `n` keys never written; returns the false positives per table
 * a filter was asked about (kv_stats). */
static double missing_fpr(kv_db *db, uint64_t n)
{
    struct kv_stats before, after;
    ck_assert_int_eq(kv_stats(db, &before), KV_OK);
    char key[17];
    for (uint64_t i = 0; i < n; i++) {
        key16(i, 1, key);
        void *v;
        size_t vlen;
        ck_assert_int_eq(kv_get(db, key, 16, &v, &vlen), KV_NOTFOUND);
    }
    ck_assert_int_eq(kv_stats(db, &after), KV_OK);
    uint64_t asked = (after.filter_negatives - before.filter_negatives) +
                     (after.filter_positives - before.filter_positives);
    uint64_t fp = after.filter_false_positives - before.filter_false_positives;
    ck_assert_uint_gt(asked, n / 2);
    return (double)fp / (double)asked;
}

/* The database's secret, read from its manifest's `filter_secret` record
 * with LMDB (doc/manifest.md); 0 when it has none. */
static int read_secret(const char *name, uint8_t secret[16], uint8_t raw[64], size_t *rawlen)
{
    char p[600];
    snprintf(p, sizeof p, "%s/%s/MANIFEST", test_dir, name);
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    ck_assert_int_eq(mdb_env_create(&env), 0);
    ck_assert_int_eq(mdb_env_set_maxdbs(env, 4), 0);
    ck_assert_int_eq(mdb_env_open(env, p, MDB_NOSUBDIR | MDB_RDONLY, 0644), 0);
    ck_assert_int_eq(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
    ck_assert_int_eq(mdb_dbi_open(txn, "meta", 0, &dbi), 0);
    MDB_val k = {13, "filter_secret"}, v;
    int rc = mdb_get(txn, dbi, &k, &v);
    int have = rc == 0;
    if (have) {
        ck_assert_uint_eq(v.mv_size, 26);
        const uint8_t *b = v.mv_data;
        ck_assert_uint_eq(b[0], 1); /* version */
        ck_assert_uint_eq(b[1], 1); /* SipHash-2-4 */
        ck_assert(le64(b + 18) == XXH3_64bits(b, 18));
        memcpy(secret, b + 2, 16);
        if (raw) {
            memcpy(raw, b, v.mv_size);
            *rawlen = v.mv_size;
        }
    } else {
        ck_assert_int_eq(rc, MDB_NOTFOUND);
    }
    mdb_txn_abort(txn);
    mdb_env_close(env);
    return have;
}

/* Replaces (val non-NULL) or deletes the record, as damage or a rebuilt
 * manifest would leave it. */
static void write_secret_record(const char *name, const void *val, size_t len)
{
    char p[600];
    snprintf(p, sizeof p, "%s/%s/MANIFEST", test_dir, name);
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    ck_assert_int_eq(mdb_env_create(&env), 0);
    ck_assert_int_eq(mdb_env_set_maxdbs(env, 4), 0);
    ck_assert_int_eq(mdb_env_open(env, p, MDB_NOSUBDIR, 0644), 0);
    ck_assert_int_eq(mdb_txn_begin(env, NULL, 0, &txn), 0);
    ck_assert_int_eq(mdb_dbi_open(txn, "meta", 0, &dbi), 0);
    MDB_val k = {13, "filter_secret"}, v = {len, (void *)val};
    ck_assert_int_eq(val ? mdb_put(txn, dbi, &k, &v, 0) : mdb_del(txn, dbi, &k, NULL), 0);
    ck_assert_int_eq(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
}

/* Counts the database's tables by filter kind: [0] XXH3 (KEY/CALLER),
 * [1] keyed; each keyed one must record `check`. */
static void count_tables(const char *name, uint64_t check, unsigned counts[2])
{
    char p[600];
    snprintf(p, sizeof p, "%s/%s", test_dir, name);
    counts[0] = counts[1] = 0;
    DIR *d = opendir(p);
    ck_assert_ptr_nonnull(d);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t n = strlen(de->d_name);
        if (n < 4 || strcmp(de->d_name + n - 4, ".sst") != 0)
            continue;
        char tp[900];
        snprintf(tp, sizeof tp, "%s/%s", p, de->d_name);
        kv_sst_reader *r;
        ck_assert_int_eq(kv_sst_reader_open(tp, NULL, 1, &r), KV_OK);
        kv_sst_properties props;
        kv_sst_reader_properties(r, &props);
        if (props.filter_hash == KV_SST_FILTER_HASH_KEYED) {
            ck_assert(props.filter_seed == check);
            counts[1]++;
        } else {
            ck_assert_int_eq(props.filter_hash, KV_SST_FILTER_HASH_CALLER);
            counts[0]++;
        }
        kv_sst_reader_close(r);
    }
    closedir(d);
}

START_TEST(keyed_db_finds_every_key_through_flush_compaction_reopen)
{
    kv_db *db = open_keyed("k", 1);
    put_range(db, 0, NKEYS);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    expect_found(db, 0, NKEYS);
    ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 0), KV_OK);
    expect_found(db, 0, NKEYS);
    double fpr = missing_fpr(db, 20000);
    /* Blocked filters at 10 bits per key: 0.0091 expected. */
    ck_assert_msg(fpr > 0.002 && fpr < 0.02, "keyed: measured FPR %.4f", fpr);
    ck_assert_int_eq(kv_close(db), KV_OK);

    uint8_t s1[16], s2[16];
    ck_assert_int_eq(read_secret("k", s1, NULL, NULL), 1);
    unsigned counts[2];
    count_tables("k", kv_bloom_secret_check(s1), counts);
    ck_assert_uint_eq(counts[0], 0);
    ck_assert_uint_gt(counts[1], 0);

    /* Reopened: the same secret, so the filters still answer for every
     * key (a new secret would make them say "absent" for most). */
    db = open_keyed("k", 1);
    expect_found(db, 0, NKEYS);
    fpr = missing_fpr(db, 20000);
    ck_assert_msg(fpr > 0.002 && fpr < 0.02, "keyed, reopened: measured FPR %.4f", fpr);
    /* More writes, from the memtable (keyed too) and after a flush. */
    put_range(db, NKEYS, NKEYS + 2000);
    expect_found(db, NKEYS, NKEYS + 2000);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    expect_found(db, 0, NKEYS + 2000);
    ck_assert_int_eq(kv_close(db), KV_OK);
    ck_assert_int_eq(read_secret("k", s2, NULL, NULL), 1);
    ck_assert(memcmp(s1, s2, 16) == 0);

    /* Opened unkeyed, the database still reads its keyed tables with their
     * filters (the secret is in the manifest). */
    db = open_keyed("k", 0);
    expect_found(db, 0, NKEYS + 2000);
    fpr = missing_fpr(db, 10000);
    ck_assert_msg(fpr < 0.02, "opened unkeyed: measured FPR %.4f", fpr);
    ck_assert_int_eq(kv_close(db), KV_OK);
}
END_TEST

START_TEST(unkeyed_db_switched_to_keyed_finds_old_and_new_keys)
{
    kv_db *db = open_keyed("s", 0);
    put_range(db, 0, NKEYS / 2);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    ck_assert_int_eq(kv_close(db), KV_OK);
    uint8_t secret[16];
    ck_assert_int_eq(read_secret("s", secret, NULL, NULL), 0); /* never keyed: no secret */

    db = open_keyed("s", 1);
    expect_found(db, 0, NKEYS / 2);
    put_range(db, NKEYS / 2, NKEYS);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    expect_found(db, 0, NKEYS);
    /* Both kinds of table are asked, each with its own hash. */
    ck_assert_int_eq(read_secret("s", secret, NULL, NULL), 1);
    unsigned counts[2];
    count_tables("s", kv_bloom_secret_check(secret), counts);
    ck_assert_uint_gt(counts[0], 0);
    ck_assert_uint_gt(counts[1], 0);
    double fpr = missing_fpr(db, 10000);
    ck_assert_msg(fpr > 0.002 && fpr < 0.02, "mixed tables: measured FPR %.4f", fpr);

    /* kv_multi_get agrees with kv_get over both kinds. */
    enum { N = 64 };
    char keys[N][17];
    const void *kp[N];
    size_t kl[N];
    void *vals[N];
    size_t vlens[N];
    int st[N];
    for (unsigned i = 0; i < N; i++) {
        key16((uint64_t)i * (NKEYS / N), i % 4 == 3, keys[i]);
        kp[i] = keys[i];
        kl[i] = 16;
    }
    ck_assert_int_eq(kv_multi_get(db, NULL, N, kp, kl, vals, vlens, st), KV_OK);
    for (unsigned i = 0; i < N; i++) {
        ck_assert_int_eq(st[i], i % 4 == 3 ? KV_NOTFOUND : KV_OK);
        if (st[i] == KV_OK) {
            ck_assert(vlens[i] == 16 && memcmp(vals[i], keys[i], 16) == 0);
            kv_free(vals[i]);
        }
    }
    /* Compaction rewrites the old tables keyed. */
    ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 0), KV_OK);
    expect_found(db, 0, NKEYS);
    ck_assert_int_eq(kv_close(db), KV_OK);
    count_tables("s", kv_bloom_secret_check(secret), counts);
    ck_assert_uint_eq(counts[0], 0);
}
END_TEST

/* A manifest without its secret (as kv_repair rebuilds one from the
 * tables, or a secret record deleted by hand): keyed tables are read
 * without their filters, never with a false negative; a keyed open makes
 * a new secret, and the old tables stay filterless until rewritten. */
START_TEST(lost_secret_reads_keyed_tables_without_filters)
{
    kv_db *db = open_keyed("l", 1);
    put_range(db, 0, NKEYS / 2);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    ck_assert_int_eq(kv_close(db), KV_OK);
    uint8_t old[16], fresh[16];
    ck_assert_int_eq(read_secret("l", old, NULL, NULL), 1);
    write_secret_record("l", NULL, 0);

    db = open_keyed("l", 0);
    expect_found(db, 0, NKEYS / 2);
    struct kv_stats st;
    ck_assert_int_eq(kv_stats(db, &st), KV_OK);
    ck_assert_uint_eq(st.filter_negatives + st.filter_positives, 0); /* no filter was asked */
    ck_assert_int_eq(kv_close(db), KV_OK);
    ck_assert_int_eq(read_secret("l", fresh, NULL, NULL), 0); /* an unkeyed open makes none */

    db = open_keyed("l", 1);
    expect_found(db, 0, NKEYS / 2);
    put_range(db, NKEYS / 2, NKEYS);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    expect_found(db, 0, NKEYS);
    ck_assert_int_eq(kv_close(db), KV_OK);
    ck_assert_int_eq(read_secret("l", fresh, NULL, NULL), 1);
    ck_assert(memcmp(old, fresh, 16) != 0);
}
END_TEST

START_TEST(damaged_secret_record_fails_open)
{
    kv_db *db = open_keyed("d", 1);
    put_range(db, 0, 1000);
    ck_assert_int_eq(kv_close(db), KV_OK);
    uint8_t secret[16], raw[64];
    size_t rawlen;
    ck_assert_int_eq(read_secret("d", secret, raw, &rawlen), 1);
    char hex[33];
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", secret[i]);

    char p[600];
    snprintf(p, sizeof p, "%s/d", test_dir);
    kv_options o;
    kv_options_init(&o);
    struct {
        size_t at;
        uint8_t flip;
        size_t len;
    } damage[] = {{5, 0x01, 26}, {0, 0x02, 26}, {1, 0x04, 26}, {20, 0x80, 26}, {0, 0, 25}};
    for (size_t t = 0; t < sizeof damage / sizeof damage[0]; t++) {
        uint8_t bad[64];
        memcpy(bad, raw, rawlen);
        bad[damage[t].at] ^= damage[t].flip;
        write_secret_record("d", bad, damage[t].len);
        for (int keyed = 0; keyed <= 1; keyed++) {
            o.filter_keyed_hash = keyed;
            kv_db *bad_db = (kv_db *)1;
            int rc = kv_open(p, &o, &bad_db);
            ck_assert_msg(rc == KV_ECORRUPT, "damage %zu: kv_open gave %s", t, kv_strerror(rc));
            ck_assert_ptr_null(bad_db);
            ck_assert_ptr_nonnull(strstr(kv_error_text(), "filter_secret"));
            ck_assert_ptr_null(strstr(kv_error_text(), hex));
        }
    }
    /* Put back, the database opens and reads again. */
    write_secret_record("d", raw, rawlen);
    db = open_keyed("d", 1);
    expect_found(db, 0, 1000);
    ck_assert_int_eq(kv_close(db), KV_OK);
}
END_TEST

/* Readers of a keyed database while writers add keys and the background
 * thread flushes and compacts: every key written before the readers
 * started is found every time (the memtable filters and the new tables'
 * filters are all keyed with the one secret), for ThreadSanitizer. */
struct threads_ctx {
    kv_db *db;
    _Atomic int stop;
    _Atomic uint64_t missed, reads;
    unsigned id;
};

static void *keyed_reader(void *arg)
{
    struct threads_ctx *c = arg;
    char key[17];
    uint64_t i = 0;
    while (!atomic_load(&c->stop)) {
        key16((i * 7919) % 5000, 0, key);
        void *v;
        size_t vlen;
        int rc = kv_get(c->db, key, 16, &v, &vlen);
        if (rc == KV_OK)
            kv_free(v);
        else
            atomic_fetch_add(&c->missed, 1);
        atomic_fetch_add(&c->reads, 1);
        i++;
    }
    return NULL;
}

static void *keyed_writer(void *arg)
{
    struct threads_ctx *c = arg;
    char key[17];
    for (uint64_t i = 0; i < 15000; i++) {
        key16(5000 + c->id * 15000 + i, 0, key);
        if (kv_put(c->db, key, 16, key, 16) != KV_OK)
            atomic_fetch_add(&c->missed, 1);
    }
    return NULL;
}

START_TEST(keyed_db_concurrent_reads_and_writes)
{
    kv_db *db = open_keyed("t", 1);
    put_range(db, 0, 5000);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    struct threads_ctx rc = {.db = db}, wc[2] = {{.db = db, .id = 0}, {.db = db, .id = 1}};
    pthread_t r[2], w[2];
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(pthread_create(&r[i], NULL, keyed_reader, &rc), 0);
        ck_assert_int_eq(pthread_create(&w[i], NULL, keyed_writer, &wc[i]), 0);
    }
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_join(w[i], NULL), 0);
    atomic_store(&rc.stop, 1);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_join(r[i], NULL), 0);
    ck_assert_uint_eq(atomic_load(&wc[0].missed) + atomic_load(&wc[1].missed), 0);
    ck_assert_uint_eq(atomic_load(&rc.missed), 0);
    ck_assert_uint_gt(atomic_load(&rc.reads), 0);
    expect_found(db, 0, 35000);
    ck_assert_int_eq(kv_close(db), KV_OK);
}
END_TEST

/* kv_bloom_save of a keyed filter, then kv_bloom_load_keyed with its
 * secret: the same filter, keyed. kv_bloom_load of that file is KV_EINVAL
 * with a text naming kv_bloom_load_keyed (before: a bare KV_EINVAL, and no
 * keyed load existed); the wrong secret, a NULL one, or an unkeyed file
 * through the keyed load are KV_EINVAL, damage KV_ECORRUPT. */
START_TEST(keyed_filter_saves_and_loads_with_its_secret)
{
    char path[256], plain[256];
    snprintf(path, sizeof path, "%s/keyed.kvbf", test_dir);
    snprintf(plain, sizeof plain, "%s/plain.kvbf", test_dir);
    for (int l = 0; l < 2; l++) {
        kv_bloom *f, *g = NULL;
        ck_assert_int_eq(kv_bloom_new_keyed((kv_bloom_layout)l, 3000, 10, secret_a, &f), KV_OK);
        char key[17];
        for (uint64_t i = 0; i < 3000; i++) {
            key16(i, 0, key);
            kv_bloom_add(f, key, 16);
        }
        ck_assert_int_eq(kv_bloom_save(f, path), KV_OK);
        g = (kv_bloom *)1;
        ck_assert_int_eq(kv_bloom_load(path, &g), KV_EINVAL);
        ck_assert_ptr_null(g);
        ck_assert_msg(strstr(kv_error_text(), "kv_bloom_load_keyed") &&
                          strstr(kv_error_text(), path),
                      "text: %s", kv_error_text());
        ck_assert_int_eq(kv_bloom_load_keyed(path, secret_b, &g), KV_EINVAL);
        ck_assert_ptr_nonnull(strstr(kv_error_text(), "secret"));
        ck_assert_int_eq(kv_bloom_load_keyed(path, NULL, &g), KV_EINVAL);
        ck_assert_int_eq(kv_bloom_load_keyed(NULL, secret_a, &g), KV_EINVAL);
        ck_assert_int_eq(kv_bloom_load_keyed(path, secret_a, NULL), KV_EINVAL);
        if (l == 0)
            ck_assert_int_eq(kv_bloom_load_keyed(plain, secret_a, &g), KV_NOTFOUND);
        ck_assert_int_eq(kv_bloom_load_keyed(path, secret_a, &g), KV_OK);
        ck_assert_int_eq(kv_bloom_is_keyed(g), 1);
        void *ea, *eb;
        size_t la, lb;
        ck_assert_int_eq(kv_bloom_encode(f, &ea, &la), KV_OK);
        ck_assert_int_eq(kv_bloom_encode(g, &eb, &lb), KV_OK);
        ck_assert(la == lb && memcmp(ea, eb, la) == 0);
        kv_free(ea);
        kv_free(eb);
        for (uint64_t i = 0; i < 3000; i++) {
            key16(i, 0, key);
            ck_assert(kv_bloom_may_contain(g, key, 16));
        }
        kv_bloom_free(g);
        /* An unkeyed file through the keyed load. */
        kv_bloom *u;
        ck_assert_int_eq(kv_bloom_new((kv_bloom_layout)l, 100, 10, 1, &u), KV_OK);
        ck_assert_int_eq(kv_bloom_save(u, plain), KV_OK);
        ck_assert_int_eq(kv_bloom_load_keyed(plain, secret_a, &g), KV_EINVAL);
        ck_assert_ptr_nonnull(strstr(kv_error_text(), "kv_bloom_load"));
        kv_bloom_free(u);
        /* A flipped byte: damage. */
        FILE *fp = fopen(path, "r+b");
        ck_assert_ptr_nonnull(fp);
        fseek(fp, KV_BLOOM_FMT_HEADER + 5, SEEK_SET);
        int c = fgetc(fp);
        fseek(fp, KV_BLOOM_FMT_HEADER + 5, SEEK_SET);
        fputc(c ^ 0x20, fp);
        fclose(fp);
        ck_assert_int_eq(kv_bloom_load_keyed(path, secret_a, &g), KV_ECORRUPT);
        kv_bloom_free(f);
    }
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("keyed");
    TCase *tc = tcase_create("siphash");
    tcase_add_test(tc, siphash_matches_the_papers_vectors);
    tcase_add_test(tc, siphash_depends_on_every_secret_byte);
    suite_add_tcase(s, tc);

    tc = tcase_create("filter");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, keyed_filter_hash_is_siphash_of_the_key);
    tcase_add_loop_test(tc, keyed_filter_fpr_near_theory, 0, 2);
    tcase_add_test(tc, different_secrets_set_different_bits);
    tcase_add_test(tc, keyed_encoding_holds_no_secret_and_needs_it_back);
    tcase_add_test(tc, keys_crafted_against_a_seed_spread_under_the_keyed_hash);
    suite_add_tcase(s, tc);


    tc = tcase_create("store");
    tcase_set_timeout(tc, 300);
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_add_test(tc, keyed_table_records_its_kind_and_check);
    tcase_add_test(tc, keyed_filter_saves_and_loads_with_its_secret);
    tcase_add_test(tc, keyed_db_finds_every_key_through_flush_compaction_reopen);
    tcase_add_test(tc, unkeyed_db_switched_to_keyed_finds_old_and_new_keys);
    tcase_add_test(tc, lost_secret_reads_keyed_tables_without_filters);
    tcase_add_test(tc, damaged_secret_record_fails_open);
    suite_add_tcase(s, tc);

    tc = tcase_create("threads");
    tcase_set_timeout(tc, 600);
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_add_test(tc, keyed_db_concurrent_reads_and_writes);
    suite_add_tcase(s, tc);
    return s;
}
