/* check_bloom.c - unit tests of the Bloom filter module (filter/bloom.h).
 *
 * Keys are generated on the fly from deterministic PRNG streams (splitmix64),
 * so every run tests exactly the same keys and no large key arrays are kept.
 * Hot loops count failures with plain `if`s and assert once at the end: each
 * ck_assert records a mark point, far too slow for millions of checks.
 *
 * Set KV_TEST_VERBOSE=1 to print the measured and expected FPRs. */
#define _POSIX_C_SOURCE 200809L /* sched_yield, pthreads under -std=c11 */

#include <kv/bloom.h>

#include <check.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

/* Byte offsets of the encoding (doc/filter_format.md), to forge encodings
 * whose fields disagree with each other. */
#include "../filter/filter_format.h"
#include "../filter/bloom_avx512.h"
#include "../filter/bloom_block.h"
#include "fixture.h"

#define MILLION 1000000u

/* ---- deterministic keys ---------------------------------------------------- */

#define GOLDEN 0x9E3779B97F4A7C15ull

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* splitmix64 */
static uint64_t rng_next(uint64_t *state)
{
    *state += GOLDEN;
    return mix64(*state);
}

/* Element i of stream `stream`, random access. */
static uint64_t stream_at(uint64_t stream, uint64_t i)
{
    return mix64(mix64(stream) + (i + 1) * GOLDEN);
}

static int verbose(void)
{
    const char *v = getenv("KV_TEST_VERBOSE");
    return v && *v && strcmp(v, "0") != 0;
}

static void put_u64le(uint8_t *p, uint64_t v)
{
    for (unsigned i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_u64le(const uint8_t *p)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

#define BIN_KEY_MAX 48

/* Binary key i of a stream: 0..47 bytes, about a third of them NUL (some
 * keys are all NUL); key 0 of every stream is the empty key. Keys differ by
 * content and by length only, never by a terminator. */
static size_t bin_key(uint64_t stream, uint64_t i, uint8_t buf[BIN_KEY_MAX])
{
    if (i == 0)
        return 0;
    uint64_t r = stream_at(stream, i);
    size_t len = 1 + (size_t)(r % (BIN_KEY_MAX - 1));
    uint64_t nulmask = r >> 8;
    uint64_t state = r;
    for (size_t j = 0; j < len; j += 8) {
        uint64_t w = rng_next(&state);
        for (size_t b = 0; b < 8 && j + b < len; b++)
            buf[j + b] = (uint8_t)(w >> (8 * b));
    }
    /* force NUL bytes: byte j is zeroed when two bits of nulmask say so */
    for (size_t j = 0; j < len; j++)
        if (((nulmask >> ((2 * j) % 56)) & 3) == 0 || (r & 0xF000) == 0)
            buf[j] = 0;
    return len;
}

/* The key shapes of the FPR measurements. Added keys are index 0..n-1 of
 * the "present" variant; absent keys are index 0.. of the "absent" variant,
 * which never produces a present key. */
enum shape { SHAPE_RANDOM16, SHAPE_DECIMAL, SHAPE_UUID, SHAPE_PREFIX_BE32, SHAPE_COUNT };

static const char *const shape_name[SHAPE_COUNT] = {
    "random-binary-16", "decimal-user:%012", "uuid-v4", "prefix24+be32",
};

#define SHAPE_KEY_MAX 40

struct keygen {
    enum shape shape;
    int absent;
    uint64_t i;     /* next index */
    uint64_t state; /* PRNG state of the random shapes */
};

static void keygen_init(struct keygen *g, enum shape shape, int absent)
{
    g->shape = shape;
    g->absent = absent;
    g->i = 0;
    /* two unrelated PRNG streams for present and absent random keys */
    g->state = absent ? 0xA5A5F00DCAFEBABEull : 0x0123456789ABCDEFull;
}

static void fmt_decimal12(char *p, uint64_t v)
{
    for (int d = 11; d >= 0; d--) {
        p[d] = (char)('0' + v % 10);
        v /= 10;
    }
}

static size_t keygen_next(struct keygen *g, uint8_t buf[SHAPE_KEY_MAX])
{
    static const char hex[] = "0123456789abcdef";
    uint64_t i = g->i++;
    switch (g->shape) {
    case SHAPE_RANDOM16:
        put_u64le(buf, rng_next(&g->state));
        put_u64le(buf + 8, rng_next(&g->state));
        return 16;
    case SHAPE_DECIMAL:
        /* present: user:000000000001 .. user:000001000000;
         * absent: from user:001000000001 on */
        memcpy(buf, "user:", 5);
        fmt_decimal12((char *)buf + 5, g->absent ? 1000000001ull + i : 1 + i);
        return 17;
    case SHAPE_UUID: {
        uint8_t r[16];
        put_u64le(r, rng_next(&g->state));
        put_u64le(r + 8, rng_next(&g->state));
        r[6] = (uint8_t)((r[6] & 0x0F) | 0x40); /* version 4 */
        r[8] = (uint8_t)((r[8] & 0x3F) | 0x80); /* variant 10 */
        char *p = (char *)buf;
        for (unsigned b = 0; b < 16; b++) {
            if (b == 4 || b == 6 || b == 8 || b == 10)
                *p++ = '-';
            *p++ = hex[r[b] >> 4];
            *p++ = hex[r[b] & 15];
        }
        return 36;
    }
    case SHAPE_PREFIX_BE32: {
        /* 24 identical bytes, then a big-endian counter: neighbouring keys
         * differ in their last byte only. Absent: from 0x40000000 on. */
        uint32_t c = (uint32_t)(g->absent ? 0x40000000u + i : i);
        memcpy(buf, "kv/table/000042/segment/", 24);
        buf[24] = (uint8_t)(c >> 24);
        buf[25] = (uint8_t)(c >> 16);
        buf[26] = (uint8_t)(c >> 8);
        buf[27] = (uint8_t)c;
        return 28;
    }
    case SHAPE_COUNT:
        break;
    }
    abort();
}

static const char *layout_name(kv_bloom_layout l)
{
    return l == KV_BLOOM_BLOCKED ? "blocked" : "classic";
}

static kv_bloom *new_or_fail(kv_bloom_layout layout, uint64_t n, double bpk, uint64_t seed)
{
    kv_bloom *f = NULL;
    int rc = kv_bloom_new(layout, n, bpk, seed, &f);
    ck_assert_msg(rc == KV_OK, "kv_bloom_new(%s, %llu, %g) = %d (%s)", layout_name(layout),
                  (unsigned long long)n, bpk, rc, kv_strerror(rc));
    ck_assert_ptr_nonnull(f);
    return f;
}

static kv_bloom_info stats_of(const kv_bloom *f)
{
    kv_bloom_info info;
    memset(&info, 0, sizeof info);
    kv_bloom_stats(f, &info);
    return info;
}

static double rel_diff(double got, double want)
{
    if (got == want)
        return 0;
    return fabs(got - want) / fabs(want);
}

/* ---- no false negatives ---------------------------------------------------- */

static const double nofn_bpk[] = {1, 4, 10, 20};
static const uint64_t nofn_n[] = {0, 1, 7, 1000, MILLION};
#define NOFN_CONFIGS (int)(sizeof nofn_bpk / sizeof nofn_bpk[0] * sizeof nofn_n / sizeof nofn_n[0])

#define CHUNK 1024

/* Adds keys 0..adds-1 of a binary-key stream (alternating kv_bloom_add and
 * kv_bloom_add_hash), then checks that every one answers "maybe" through
 * kv_bloom_may_contain, kv_bloom_may_contain_hash and the batch query. */
static void check_no_false_negatives(kv_bloom_layout layout, uint64_t n, double bpk, uint64_t adds)
{
    const uint64_t stream = 0xB10011 + n * 31 + (uint64_t)bpk * 7 + (uint64_t)layout;
    kv_bloom *f = new_or_fail(layout, n, bpk, stream ^ 0x5EED);
    uint8_t key[BIN_KEY_MAX];
    uint64_t hashes[CHUNK];
    uint8_t out[CHUNK];

    for (uint64_t i = 0; i < adds; i++) {
        size_t len = bin_key(stream, i, key);
        /* the empty key is added with a NULL pointer, queried with a non-NULL one */
        const void *p = len ? key : NULL;
        if (i & 1)
            kv_bloom_add_hash(f, kv_bloom_hash(f, p, len));
        else
            kv_bloom_add(f, p, len);
    }
    kv_bloom_info info = stats_of(f);
    ck_assert_msg(info.keys_added == adds, "%s n=%llu bpk=%g: keys_added %llu, want %llu",
                  layout_name(layout), (unsigned long long)n, bpk,
                  (unsigned long long)info.keys_added, (unsigned long long)adds);

    uint64_t miss_key = 0, miss_hash = 0, miss_batch = 0, first = UINT64_MAX;
    for (uint64_t base = 0; base < adds; base += CHUNK) {
        size_t cnt = adds - base < CHUNK ? (size_t)(adds - base) : CHUNK;
        for (size_t j = 0; j < cnt; j++) {
            size_t len = bin_key(stream, base + j, key);
            uint64_t h = kv_bloom_hash(f, key, len);
            hashes[j] = h;
            if (kv_bloom_may_contain(f, key, len) != 1) {
                miss_key++;
                if (first == UINT64_MAX)
                    first = base + j;
            }
            if (kv_bloom_may_contain_hash(f, h) != 1) {
                miss_hash++;
                if (first == UINT64_MAX)
                    first = base + j;
            }
        }
        memset(out, 0xEE, sizeof out);
        kv_bloom_may_contain_batch(f, hashes, cnt, out);
        for (size_t j = 0; j < cnt; j++)
            if (out[j] != 1) {
                miss_batch++;
                if (first == UINT64_MAX)
                    first = base + j;
            }
    }
    ck_assert_msg(miss_key == 0 && miss_hash == 0 && miss_batch == 0,
                  "%s n=%llu bpk=%g adds=%llu: false negatives: %llu by key, %llu by hash, "
                  "%llu by batch (first at key %llu)",
                  layout_name(layout), (unsigned long long)n, bpk, (unsigned long long)adds,
                  (unsigned long long)miss_key, (unsigned long long)miss_hash,
                  (unsigned long long)miss_batch, (unsigned long long)first);

    if (adds == 0) {
        /* nothing set: an empty filter rejects every key */
        ck_assert_uint_eq(info.bits_set, 0);
        uint64_t hits = 0;
        for (uint64_t i = 0; i < 1000; i++) {
            size_t len = bin_key(stream + 1, i, key);
            hits += (uint64_t)kv_bloom_may_contain(f, key, len);
        }
        ck_assert_msg(hits == 0, "empty %s filter answered maybe %llu times", layout_name(layout),
                      (unsigned long long)hits);
    }
    kv_bloom_free(f);
}

START_TEST(no_false_negatives_blocked)
{
    size_t nn = sizeof nofn_n / sizeof nofn_n[0];
    double bpk = nofn_bpk[(size_t)_i / nn];
    uint64_t n = nofn_n[(size_t)_i % nn];
    check_no_false_negatives(KV_BLOOM_BLOCKED, n, bpk, n);
}
END_TEST

START_TEST(no_false_negatives_classic)
{
    size_t nn = sizeof nofn_n / sizeof nofn_n[0];
    double bpk = nofn_bpk[(size_t)_i / nn];
    uint64_t n = nofn_n[(size_t)_i % nn];
    check_no_false_negatives(KV_BLOOM_CLASSIC, n, bpk, n);
}
END_TEST

/* A filter holding far more keys than it was sized for is nearly all ones,
 * yet still never answers "absent" for an added key. */
START_TEST(no_false_negatives_when_overfilled)
{
    kv_bloom_layout layout = (kv_bloom_layout)_i;
    check_no_false_negatives(layout, 7, 4, 100000);
    check_no_false_negatives(layout, 1000, 1, 200000);
}
END_TEST

START_TEST(no_false_negatives_empty_key)
{
    static const char nonnull[] = "not empty";
    for (int l = 0; l < 2; l++) {
        kv_bloom_layout layout = (kv_bloom_layout)l;
        /* added with NULL, queried with NULL and with a non-NULL pointer */
        kv_bloom *f = new_or_fail(layout, 1000, 10, 99);
        kv_bloom_add(f, NULL, 0);
        ck_assert_int_eq(kv_bloom_may_contain(f, NULL, 0), 1);
        ck_assert_int_eq(kv_bloom_may_contain(f, nonnull, 0), 1);
        ck_assert_int_eq(kv_bloom_may_contain_hash(f, kv_bloom_hash(f, NULL, 0)), 1);
        ck_assert_int_eq(kv_bloom_may_contain_hash(f, kv_bloom_hash(f, nonnull, 0)), 1);
        ck_assert_uint_eq(stats_of(f).keys_added, 1);
        kv_bloom_free(f);

        /* added with a non-NULL pointer, queried with NULL */
        f = new_or_fail(layout, 1000, 10, 99);
        kv_bloom_add(f, nonnull, 0);
        ck_assert_int_eq(kv_bloom_may_contain(f, NULL, 0), 1);
        ck_assert_int_eq(kv_bloom_may_contain(f, nonnull + 3, 0), 1);
        uint64_t h = kv_bloom_hash(f, NULL, 0);
        uint8_t out = 0;
        kv_bloom_may_contain_batch(f, &h, 1, &out);
        ck_assert_int_eq(out, 1);
        kv_bloom_free(f);
    }
}
END_TEST

START_TEST(no_false_negatives_keys_with_nul_bytes)
{
    static const uint8_t zeros[64];
    static const char *const fixed[] = {"\0", "\0\0", "a\0b", "a\0c", "\0a", "a\0", "\0\0\0x"};
    static const size_t fixed_len[] = {1, 2, 3, 3, 2, 2, 4};
    for (int l = 0; l < 2; l++) {
        kv_bloom_layout layout = (kv_bloom_layout)l;
        kv_bloom *f = new_or_fail(layout, 100, 10, 7);
        for (size_t len = 1; len <= sizeof zeros; len++)
            kv_bloom_add(f, zeros, len);
        for (size_t j = 0; j < sizeof fixed / sizeof fixed[0]; j++)
            kv_bloom_add(f, fixed[j], fixed_len[j]);
        for (size_t len = 1; len <= sizeof zeros; len++) {
            ck_assert_msg(kv_bloom_may_contain(f, zeros, len) == 1, "%s: %zu NUL bytes missed",
                          layout_name(layout), len);
            ck_assert_int_eq(kv_bloom_may_contain_hash(f, kv_bloom_hash(f, zeros, len)), 1);
        }
        for (size_t j = 0; j < sizeof fixed / sizeof fixed[0]; j++) {
            ck_assert_msg(kv_bloom_may_contain(f, fixed[j], fixed_len[j]) == 1,
                          "%s: fixed key %zu missed", layout_name(layout), j);
            ck_assert_int_eq(kv_bloom_may_contain_hash(f, kv_bloom_hash(f, fixed[j], fixed_len[j])), 1);
        }
        ck_assert_uint_eq(stats_of(f).keys_added, sizeof zeros + sizeof fixed / sizeof fixed[0]);
        kv_bloom_free(f);
    }
}
END_TEST

/* Batch answers equal single answers for present and absent hashes, for
 * sizes around the prefetch distance, and nothing past out[n-1] is written. */
START_TEST(batch_agrees_with_single_queries)
{
    static const size_t sizes[] = {0, 1, 2, 3, 7, 8, 15, 16, 17, 31, 32, 33, 1000, 100000};
    kv_bloom_layout layout = (kv_bloom_layout)_i;
    /* 4 bits/key: plenty of false positives, so "agree" is not all ones */
    kv_bloom *f = new_or_fail(layout, 20000, 4, 1234);
    uint64_t rs = 77;
    for (uint64_t i = 0; i < 20000; i++) {
        uint64_t k = rng_next(&rs);
        kv_bloom_add(f, &k, sizeof k);
    }
    size_t maxn = 100000;
    uint64_t *h = malloc(maxn * sizeof *h);
    uint8_t *out = malloc(maxn + 1);
    ck_assert_ptr_nonnull(h);
    ck_assert_ptr_nonnull(out);
    uint64_t qs = 77, as = 9999;
    for (size_t i = 0; i < maxn; i++) {
        uint64_t k = (i % 3 == 0) ? rng_next(&qs) : rng_next(&as); /* present / absent */
        h[i] = kv_bloom_hash(f, &k, sizeof k);
    }
    size_t ones = 0, zeros_ = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        memset(out, 0xEE, maxn + 1);
        kv_bloom_may_contain_batch(f, h, n, out);
        size_t bad = 0, first = SIZE_MAX;
        for (size_t i = 0; i < n; i++) {
            int single = kv_bloom_may_contain_hash(f, h[i]);
            if (out[i] != (uint8_t)single) {
                bad++;
                if (first == SIZE_MAX)
                    first = i;
            }
            if (single)
                ones++;
            else
                zeros_++;
        }
        ck_assert_msg(bad == 0, "%s batch of %zu: %zu answers differ (first %zu)",
                      layout_name(layout), n, bad, first);
        ck_assert_msg(out[n] == 0xEE, "%s batch of %zu wrote past its end", layout_name(layout), n);
    }
    /* the comparison saw both answers */
    ck_assert_uint_gt(ones, 0);
    ck_assert_uint_gt(zeros_, 0);
    free(h);
    free(out);
    kv_bloom_free(f);
}
END_TEST

/* ---- measured false-positive rate ------------------------------------------ */

static const double fpr_bpk[] = {6, 10, 16};
#define FPR_BPK_COUNT (int)(sizeof fpr_bpk / sizeof fpr_bpk[0])
#define FPR_CONFIGS (2 * FPR_BPK_COUNT * SHAPE_COUNT)

/* Builds a filter of n keys of `shape`, queries `queries` absent keys and
 * returns the fraction answered "maybe". *info_out: stats after the adds. */
static double measure_fpr(kv_bloom_layout layout, double bpk, enum shape shape, uint64_t n,
                          uint64_t min_queries, kv_bloom_info *info_out, uint64_t *queries_out)
{
    kv_bloom *f = new_or_fail(layout, n, bpk, 0xF00D + (uint64_t)shape);
    struct keygen g;
    uint8_t key[SHAPE_KEY_MAX];
    keygen_init(&g, shape, 0);
    for (uint64_t i = 0; i < n; i++) {
        size_t len = keygen_next(&g, key);
        kv_bloom_add(f, key, len);
    }
    kv_bloom_info info = stats_of(f);
    ck_assert_uint_eq(info.keys_added, n);

    /* Enough queries for >= 2500 expected false positives: the +-10% band
     * is then 5 standard deviations wide, so a pass is no luck. */
    double expect = kv_bloom_expected_fpr(layout, info.bits, n, info.k);
    uint64_t queries = min_queries;
    if (expect > 0 && 2500.0 / expect > (double)queries)
        queries = (uint64_t)ceil(2500.0 / expect);
    if (queries > 8 * (uint64_t)MILLION)
        queries = 8 * (uint64_t)MILLION;

    uint64_t hits = 0;
    keygen_init(&g, shape, 1);
    for (uint64_t i = 0; i < queries; i++) {
        size_t len = keygen_next(&g, key);
        hits += (uint64_t)kv_bloom_may_contain(f, key, len);
    }
    kv_bloom_free(f);
    *info_out = info;
    *queries_out = queries;
    return (double)hits / (double)queries;
}

START_TEST(measured_fpr_within_10pct_of_expected)
{
    kv_bloom_layout layout = (kv_bloom_layout)(_i % 2);
    double bpk = fpr_bpk[(_i / 2) % FPR_BPK_COUNT];
    enum shape shape = (enum shape)(_i / (2 * FPR_BPK_COUNT));
    kv_bloom_info info;
    uint64_t queries;
    double got = measure_fpr(layout, bpk, shape, MILLION, MILLION, &info, &queries);
    double want = kv_bloom_expected_fpr(layout, info.bits, MILLION, info.k);
    if (verbose())
        fprintf(stderr, "fpr %-7s bpk=%-2g k=%-2u %-18s queries=%-7llu measured=%.6f "
                        "expected=%.6f ratio=%.4f\n",
                layout_name(layout), bpk, info.k, shape_name[shape], (unsigned long long)queries,
                got, want, got / want);
    ck_assert_msg(want > 0 && fabs(got - want) <= 0.10 * want,
                  "%s bpk=%g (bits=%llu k=%u) %s: measured FPR %.6f over %llu absent keys, "
                  "expected %.6f (+-10%%)",
                  layout_name(layout), bpk, (unsigned long long)info.bits, info.k,
                  shape_name[shape], got, (unsigned long long)queries, want);
}
END_TEST

START_TEST(fpr_at_10_bits_per_key_classic_is_at_most_0_90pct)
{
    kv_bloom_info info;
    uint64_t queries;
    double got = measure_fpr(KV_BLOOM_CLASSIC, 10, SHAPE_RANDOM16, MILLION, 2 * MILLION, &info,
                             &queries);
    if (verbose())
        fprintf(stderr, "floor classic 10 bpk: measured %.6f\n", got);
    ck_assert_msg(got <= 0.0090, "classic 10 bits/key: measured FPR %.5f%% > 0.90%%", 100 * got);
}
END_TEST

START_TEST(fpr_at_10_bits_per_key_blocked_is_at_most_1_05pct)
{
    kv_bloom_info info;
    uint64_t queries;
    double got = measure_fpr(KV_BLOOM_BLOCKED, 10, SHAPE_RANDOM16, MILLION, 2 * MILLION, &info,
                             &queries);
    if (verbose())
        fprintf(stderr, "floor blocked 10 bpk: measured %.6f\n", got);
    ck_assert_msg(got <= 0.0105, "blocked 10 bits/key: measured FPR %.5f%% > 1.05%%", 100 * got);
}
END_TEST

/* ---- stats ----------------------------------------------------------------- */

START_TEST(stats_count_every_add_exactly)
{
    kv_bloom_layout layout = (kv_bloom_layout)_i;
    kv_bloom *f = new_or_fail(layout, 1000, 10, 5);
    kv_bloom_info info = stats_of(f);
    ck_assert_uint_eq(info.keys_added, 0);
    ck_assert_uint_eq(info.bits_set, 0);
    ck_assert(info.fill == 0.0);
    ck_assert(info.expected_fpr == 0.0);
    /* duplicates count: keys_added counts adds, not distinct keys */
    for (int i = 0; i < 5; i++)
        kv_bloom_add(f, "same", 4);
    info = stats_of(f);
    ck_assert_uint_eq(info.keys_added, 5);
    ck_assert_uint_ge(info.bits_set, 1);
    ck_assert_uint_le(info.bits_set, info.k);
    for (uint64_t i = 0; i < 12345; i++) {
        uint64_t h = stream_at(11, i);
        if (i % 2)
            kv_bloom_add_hash(f, h);
        else
            kv_bloom_add(f, &h, sizeof h);
    }
    ck_assert_uint_eq(stats_of(f).keys_added, 5 + 12345);
    kv_bloom_free(f);
}
END_TEST

START_TEST(stats_are_self_consistent)
{
    kv_bloom_layout layout = (kv_bloom_layout)_i;
    kv_bloom *f = new_or_fail(layout, 50000, 10, 6);
    uint64_t prev_set = 0;
    for (uint64_t i = 0; i < 100000; i++) {
        uint64_t k = stream_at(12, i);
        kv_bloom_add(f, &k, sizeof k);
        if (i % 9999 != 0 && i != 99999)
            continue;
        kv_bloom_info info = stats_of(f);
        ck_assert_int_eq(info.layout, layout);
        ck_assert_uint_eq(info.keys_added, i + 1);
        ck_assert_uint_ge(info.bits_set, prev_set); /* bits are only ever set */
        ck_assert_uint_le(info.bits_set, info.bits);
        ck_assert_uint_le(info.bits_set, (uint64_t)info.k * info.keys_added);
        ck_assert_uint_ge(info.bits_set, 1);
        ck_assert_double_eq_tol(info.fill, (double)info.bits_set / (double)info.bits, 1e-15);
        ck_assert_msg((uint64_t)info.bytes * 8 >= info.bits, "bytes %zu < bits/8 (bits %llu)",
                      info.bytes, (unsigned long long)info.bits);
        double want = kv_bloom_expected_fpr(layout, info.bits, info.keys_added, info.k);
        ck_assert_msg(rel_diff(info.expected_fpr, want) <= 1e-12,
                      "expected_fpr %.17g != kv_bloom_expected_fpr %.17g", info.expected_fpr, want);
        double est = -((double)info.bits / info.k) * log1p(-info.fill);
        ck_assert_msg(rel_diff(info.estimated_keys, est) <= 1e-9,
                      "estimated_keys %.6f, Swamidass-Baldi gives %.6f", info.estimated_keys, est);
        prev_set = info.bits_set;
    }
    kv_bloom_free(f);
}
END_TEST

START_TEST(stats_estimated_keys_within_3pct_at_10_bits_per_key)
{
    static const uint64_t ns[] = {100000, MILLION};
    kv_bloom_layout layout = (kv_bloom_layout)_i;
    for (size_t t = 0; t < 2; t++) {
        uint64_t n = ns[t];
        kv_bloom *f = new_or_fail(layout, n, 10, 8 + t);
        for (uint64_t i = 0; i < n; i++) {
            uint64_t k = stream_at(13 + t, i);
            kv_bloom_add(f, &k, sizeof k);
        }
        kv_bloom_info info = stats_of(f);
        if (verbose())
            fprintf(stderr, "estimated_keys %s n=%llu: %.1f\n", layout_name(layout),
                    (unsigned long long)n, info.estimated_keys);
        ck_assert_msg(fabs(info.estimated_keys - (double)n) <= 0.03 * (double)n,
                      "%s n=%llu: estimated_keys %.1f", layout_name(layout),
                      (unsigned long long)n, info.estimated_keys);
        kv_bloom_free(f);
    }
}
END_TEST

START_TEST(stats_bits_set_is_popcount_of_encoded_bit_array)
{
    kv_bloom_layout layout = (kv_bloom_layout)_i;
    kv_bloom *f = new_or_fail(layout, 3000, 8, 21);
    for (uint64_t i = 0; i < 3000; i++) {
        uint64_t k = stream_at(14, i);
        kv_bloom_add(f, &k, sizeof k);
    }
    void *buf = NULL;
    size_t len = 0;
    ck_assert_int_eq(kv_bloom_encode(f, &buf, &len), KV_OK);
    ck_assert_uint_ge(len, KV_BLOOM_FMT_HEADER + KV_BLOOM_FMT_CHECKSUM);
    const uint8_t *p = buf;
    uint64_t pop = 0;
    for (size_t i = KV_BLOOM_FMT_HEADER; i < len - KV_BLOOM_FMT_CHECKSUM; i++)
        for (unsigned b = 0; b < 8; b++)
            pop += (p[i] >> b) & 1u;
    kv_bloom_info info = stats_of(f);
    ck_assert_uint_eq(info.bits_set, pop);
    ck_assert_uint_eq(len - KV_BLOOM_FMT_HEADER - KV_BLOOM_FMT_CHECKSUM, info.bytes);
    kv_free(buf);
    kv_bloom_free(f);
}
END_TEST

START_TEST(stats_null_arguments_write_nothing)
{
    kv_bloom_info info;
    memset(&info, 0xA5, sizeof info);
    kv_bloom_info copy = info;
    kv_bloom_stats(NULL, &info);
    ck_assert(memcmp(&info, &copy, sizeof info) == 0);
    kv_bloom *f = new_or_fail(KV_BLOOM_BLOCKED, 10, 10, 1);
    kv_bloom_stats(f, NULL); /* must not crash */
    kv_bloom_add(f, "x", 1);
    ck_assert_uint_eq(stats_of(f).keys_added, 1);
    kv_bloom_free(f);
}
END_TEST

/* ---- codec ----------------------------------------------------------------- */

static kv_bloom *filled_filter(kv_bloom_layout layout, uint64_t n, double bpk, uint64_t seed)
{
    kv_bloom *f = new_or_fail(layout, n, bpk, seed);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t k = stream_at(seed, i);
        kv_bloom_add(f, &k, sizeof k);
    }
    return f;
}

static void encode_or_fail(const kv_bloom *f, uint8_t **buf, size_t *len)
{
    void *b = NULL;
    *len = 0;
    int rc = kv_bloom_encode(f, &b, len);
    ck_assert_msg(rc == KV_OK, "kv_bloom_encode = %d (%s)", rc, kv_strerror(rc));
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_gt(*len, 0);
    *buf = b;
}

/* Decodes and expects KV_ECORRUPT with *out NULL. Returns 1 when so. */
static int decode_is_corrupt(const void *buf, size_t len)
{
    kv_bloom *g = (kv_bloom *)&g; /* non-NULL sentinel */
    int rc = kv_bloom_decode(buf, len, &g);
    if (rc == KV_ECORRUPT && g == NULL)
        return 1;
    if (rc == KV_OK)
        kv_bloom_free(g);
    return 0;
}

/* Recomputes the trailing checksum (XXH3-64, seed 0, of every byte before
 * it), so that a forged field is caught by field checks, not the checksum. */
static void refresh_checksum(uint8_t *buf, size_t len)
{
    put_u64le(buf + len - KV_BLOOM_FMT_CHECKSUM, XXH3_64bits(buf, len - KV_BLOOM_FMT_CHECKSUM));
}

START_TEST(decode_round_trip_keeps_every_answer)
{
    static const uint64_t ns[] = {0, 1, 1000, 200000};
    kv_bloom_layout layout = (kv_bloom_layout)_i;
    for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
        uint64_t n = ns[t];
        uint64_t seed = 0xC0DEC + t;
        kv_bloom *f = filled_filter(layout, n, 7.5, seed);
        uint8_t *buf;
        size_t len;
        encode_or_fail(f, &buf, &len);
        kv_bloom *g = NULL;
        int rc = kv_bloom_decode(buf, len, &g);
        ck_assert_msg(rc == KV_OK, "%s n=%llu: decode = %d (%s)", layout_name(layout),
                      (unsigned long long)n, rc, kv_strerror(rc));
        ck_assert_ptr_nonnull(g);

        kv_bloom_info a = stats_of(f), b = stats_of(g);
        ck_assert_int_eq(b.layout, a.layout);
        ck_assert_uint_eq(b.bits, a.bits);
        ck_assert_uint_eq(b.k, a.k);
        ck_assert_uint_eq(b.keys_added, a.keys_added);
        ck_assert_uint_eq(b.keys_added, n);
        ck_assert_uint_eq(b.bits_set, a.bits_set);
        ck_assert_uint_eq(b.bytes, a.bytes);
        ck_assert(b.expected_fpr == a.expected_fpr);

        /* the seed survives: same hashes; and every answer is the same */
        uint64_t present_miss = 0, differ = 0, hash_differ = 0, positives = 0;
        for (uint64_t i = 0; i < n; i++) {
            uint64_t k = stream_at(seed, i);
            if (kv_bloom_may_contain(g, &k, sizeof k) != 1)
                present_miss++;
        }
        for (uint64_t i = 0; i < 100000; i++) {
            uint64_t k = stream_at(seed + 1000, i);
            int x = kv_bloom_may_contain(f, &k, sizeof k);
            int y = kv_bloom_may_contain(g, &k, sizeof k);
            positives += (uint64_t)x;
            if (x != y)
                differ++;
            if (kv_bloom_hash(f, &k, sizeof k) != kv_bloom_hash(g, &k, sizeof k))
                hash_differ++;
        }
        ck_assert_msg(present_miss == 0, "%s n=%llu: decoded filter lost %llu added keys",
                      layout_name(layout), (unsigned long long)n,
                      (unsigned long long)present_miss);
        ck_assert_msg(differ == 0 && hash_differ == 0,
                      "%s n=%llu: %llu absent-key answers and %llu hashes differ after decode",
                      layout_name(layout), (unsigned long long)n, (unsigned long long)differ,
                      (unsigned long long)hash_differ);
        if (n >= 1000)
            ck_assert_uint_gt(positives, 0); /* some false positives were compared too */

        /* the decoded filter keeps working: more adds, counted on top */
        for (uint64_t i = 0; i < 100; i++) {
            uint64_t k = stream_at(seed + 2000, i);
            kv_bloom_add(g, &k, sizeof k);
        }
        ck_assert_uint_eq(stats_of(g).keys_added, n + 100);
        for (uint64_t i = 0; i < 100; i++) {
            uint64_t k = stream_at(seed + 2000, i);
            ck_assert_int_eq(kv_bloom_may_contain(g, &k, sizeof k), 1);
        }
        kv_bloom_free(g);
        kv_free(buf);
        kv_bloom_free(f);
    }
}
END_TEST

START_TEST(reencode_of_decoded_is_byte_identical)
{
    kv_bloom_layout layout = (kv_bloom_layout)_i;
    kv_bloom *f = filled_filter(layout, 5000, 10, 31);
    uint8_t *a, *b;
    size_t alen, blen;
    encode_or_fail(f, &a, &alen);
    kv_bloom *g = NULL;
    ck_assert_int_eq(kv_bloom_decode(a, alen, &g), KV_OK);
    encode_or_fail(g, &b, &blen);
    ck_assert_uint_eq(alen, blen);
    ck_assert(memcmp(a, b, alen) == 0);
    kv_free(a);
    kv_free(b);
    kv_bloom_free(g);
    kv_bloom_free(f);
}
END_TEST

/* A table writer builds its filter with kv_bloom_add_hashes_owned (no
 * atomic ORs): the result must be the very filter kv_bloom_add_hash builds,
 * bit for bit and key count alike. */
/* kv_bloom_partition: keys of different parts of a blocked filter never
 * set bits in the same block (the parts are runs of whole regions), and the
 * parts are about equal once the filter has a few dozen blocks; a filter
 * that cannot be split (classic, or one block) still shares the keys out
 * evenly. Each part's keys go into a filter of its own, and the encodings
 * show which blocks each part wrote. */
static void check_partition(kv_bloom_layout layout, uint64_t blocks, unsigned parts)
{
    enum { MAX_PARTS = 7 };
    uint64_t n = blocks < 100 ? 5000 : blocks * 50; /* enough keys to weigh the parts */
    double bpk = 512.0 * (double)blocks / (double)n;
    kv_bloom *f = new_or_fail(layout, n, bpk, 0x9A);
    kv_bloom *pf[MAX_PARTS];
    uint64_t count[MAX_PARTS] = {0}, bad = 0;
    for (unsigned p = 0; p < parts; p++)
        pf[p] = new_or_fail(layout, n, bpk, 0x9A);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t key = stream_at(0x9A + blocks, i);
        unsigned p = kv_bloom_partition(f, kv_bloom_hash(f, &key, sizeof key), parts);
        if (p >= parts) {
            bad++;
            continue;
        }
        count[p]++;
        kv_bloom_add(pf[p], &key, sizeof key);
    }
    ck_assert_msg(bad == 0, "%s, %llu blocks: %llu parts out of [0, %u)", layout_name(layout),
                  (unsigned long long)blocks, (unsigned long long)bad, parts);
    uint8_t *enc[MAX_PARTS];
    size_t len[MAX_PARTS];
    for (unsigned p = 0; p < parts; p++)
        encode_or_fail(pf[p], &enc[p], &len[p]);
    if (layout == KV_BLOOM_BLOCKED && blocks > 1) {
        uint64_t shared = 0;
        for (uint64_t b = 0; b < blocks; b++) {
            unsigned writers = 0;
            for (unsigned p = 0; p < parts; p++) {
                const uint8_t *blk = enc[p] + KV_BLOOM_FMT_HEADER + b * 64;
                for (unsigned j = 0; j < 64; j++)
                    if (blk[j]) {
                        writers++;
                        break;
                    }
            }
            shared += writers > 1;
        }
        ck_assert_msg(shared == 0, "blocked, %llu blocks, %u parts: %llu blocks written by two",
                      (unsigned long long)blocks, parts, (unsigned long long)shared);
    }
    /* Balance: a blocked filter of 33 regions or more puts at most a region
     * (1/33 of the blocks) more or less in a part than its share;
     * a filter that cannot be split shares the keys out evenly. On top of
     * that, the keys' own spread: 4 standard deviations. */
    int split = layout == KV_BLOOM_BLOCKED && blocks > 1;
    if (!split || blocks >= 64) /* else too few regions to weigh */
        for (unsigned p = 0; p < parts; p++) {
            double share = (double)n / parts;
            double slack = (split ? (double)n / 33 : 0) + 4 * sqrt(share) + 1;
            ck_assert_msg(fabs((double)count[p] - share) <= slack,
                          "%s, %llu blocks: part %u of %u holds %llu of %llu keys",
                          layout_name(layout), (unsigned long long)blocks, p, parts,
                          (unsigned long long)count[p], (unsigned long long)n);
        }
    for (unsigned p = 0; p < parts; p++) {
        kv_free(enc[p]);
        kv_bloom_free(pf[p]);
    }
    kv_bloom_free(f);
}

START_TEST(partition_parts_never_share_a_block)
{
    static const uint64_t blocks[] = {1, 2, 7, 33, 64, 65, 100, 1000, 19532};
    static const unsigned parts[] = {1, 2, 3, 4, 7};
    for (unsigned b = 0; b < sizeof blocks / sizeof blocks[0]; b++)
        for (unsigned p = 0; p < sizeof parts / sizeof parts[0]; p++)
            check_partition((kv_bloom_layout)_i, blocks[b], parts[p]);
    kv_bloom *f = new_or_fail((kv_bloom_layout)_i, 1000, 10, 1);
    ck_assert_uint_eq(kv_bloom_partition(NULL, 12345, 4), 0);
    ck_assert_uint_eq(kv_bloom_partition(f, UINT64_MAX, 0), 0);
    ck_assert_uint_eq(kv_bloom_partition(f, UINT64_MAX, 1), 0);
    ck_assert_uint_eq(kv_bloom_partition(f, UINT64_MAX, 4), 3);
    ck_assert_uint_eq(kv_bloom_partition(f, 0, 4), 0);
    kv_bloom_free(f);
}
END_TEST

START_TEST(owned_adds_build_the_same_filter)
{
    kv_bloom_layout layout = (kv_bloom_layout)_i;
    static const uint64_t ns[] = {0, 1, 7, 1000, 100000};
    for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
        uint64_t n = ns[t];
        uint64_t *h = malloc((n ? n : 1) * sizeof *h);
        for (uint64_t i = 0; i < n; i++)
            h[i] = stream_at(0x0B0E + t, i);
        kv_bloom *a = NULL, *b = NULL;
        ck_assert_int_eq(kv_bloom_new(layout, n, 10, 77, &a), KV_OK);
        ck_assert_int_eq(kv_bloom_new(layout, n, 10, 77, &b), KV_OK);
        for (uint64_t i = 0; i < n; i++)
            kv_bloom_add_hash(a, h[i]);
        kv_bloom_add_hashes_owned(b, h, (size_t)n);
        kv_bloom_add_hashes_owned(NULL, h, (size_t)n); /* no-ops */
        kv_bloom_add_hashes_owned(b, NULL, 5);
        uint8_t *ea, *eb;
        size_t la, lb;
        encode_or_fail(a, &ea, &la);
        encode_or_fail(b, &eb, &lb);
        ck_assert_uint_eq(stats_of(b).keys_added, n);
        ck_assert_uint_eq(la, lb);
        ck_assert_msg(memcmp(ea, eb, la) == 0, "%s n=%llu: encodings differ",
                      layout_name(layout), (unsigned long long)n);
        for (uint64_t i = 0; i < n; i++)
            ck_assert_int_eq(kv_bloom_may_contain_hash(b, h[i]), 1);
        kv_free(ea);
        kv_free(eb);
        kv_bloom_free(a);
        kv_bloom_free(b);
        free(h);
    }
}
END_TEST

/* ---- the AVX-512 code against the portable code ------------------------------ */

/* Whether this build and CPU should run blocked probes as AVX-512 code,
 * asked of the CPU here rather than of the library under test. */
static int cpu_has_avx512(void)
{
#if KV_BLOOM_AVX512
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("avx512f");
#else
    return 0;
#endif
}

/* An empty blocked filter of `blocks` blocks with exactly k probes (the
 * sizing functions choose k themselves, so it is decoded from a forged
 * encoding); simd 0 asks for the portable code (KV_BLOOM_SIMD=0), 1 for
 * the AVX-512 code where the CPU has it, whatever the environment said. */
static kv_bloom *blocked_with_k(uint64_t blocks, unsigned k, int simd)
{
    kv_bloom *f = new_or_fail(KV_BLOOM_BLOCKED, blocks * 50, 512.0 / 50, 0x51D);
    uint8_t *enc;
    size_t len;
    encode_or_fail(f, &enc, &len);
    kv_bloom_free(f);
    ck_assert_uint_eq(get_u64le(enc + KV_BLOOM_FMT_OFF_BITS), blocks * 512);
    enc[KV_BLOOM_FMT_OFF_K] = (uint8_t)k;
    refresh_checksum(enc, len);
    const char *was = getenv("KV_BLOOM_SIMD");
    char saved[16] = "";
    if (was)
        snprintf(saved, sizeof saved, "%s", was);
    ck_assert_int_eq(setenv("KV_BLOOM_SIMD", simd ? "1" : "0", 1), 0);
    ck_assert_int_eq(kv_bloom_decode(enc, len, &f), KV_OK);
    if (was)
        setenv("KV_BLOOM_SIMD", saved, 1);
    else
        unsetenv("KV_BLOOM_SIMD");
    kv_free(enc);
    ck_assert_int_eq(kv_bloom_uses_avx512(f), simd && cpu_has_avx512());
    return f;
}

struct one_add {
    kv_bloom *f;
    uint64_t key;
};

static void *one_add_main(void *arg)
{
    struct one_add *a = arg;
    kv_bloom_add(a->f, &a->key, sizeof a->key);
    return NULL;
}

/* Adds `key` to f from a thread of its own, so that the next add of this
 * thread finds f owned by another and makes its adds shared ones. */
static void add_from_another_thread(kv_bloom *f, uint64_t key)
{
    struct one_add a = {f, key};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, one_add_main, &a), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
}

/* For every k: the AVX-512 code and the portable code set the very same
 * bits (byte-identical encodings) through each way of adding, the lone
 * writer's plain adds and the shared ones alike, and give the same answer
 * to every query, single or batched. Where the CPU lacks AVX-512 both
 * filters run the portable code and the test says so. */
#define SIMD_KEYS 3000u
#define SIMD_ABSENT 30000u

START_TEST(avx512_and_portable_code_agree_bit_for_bit)
{
    if (!cpu_has_avx512())
        fprintf(stderr, "check_bloom: no AVX-512 here: both sides run the portable code\n");
    for (unsigned run = 0; run < 2 * (KV_BLOOM_MAX_K - KV_BLOOM_MIN_K + 1); run++) {
        unsigned k = KV_BLOOM_MIN_K + run / 2, shared = run % 2;
        kv_bloom *v = blocked_with_k(128, k, 1), *p = blocked_with_k(128, k, 0);
        if (shared) { /* key 0 again below: its bits twice, its count once more */
            add_from_another_thread(v, stream_at(0x5D + k, 0));
            add_from_another_thread(p, stream_at(0x5D + k, 0));
        }
        uint64_t owned[SIMD_KEYS];
        size_t nowned = 0;
        for (uint64_t i = 0; i < SIMD_KEYS; i++) {
            uint64_t key = stream_at(0x5D + k, i);
            switch (i % 3) {
            case 0:
                kv_bloom_add(v, &key, sizeof key);
                kv_bloom_add(p, &key, sizeof key);
                break;
            case 1:
                kv_bloom_add_hash(v, kv_bloom_hash(v, &key, sizeof key));
                kv_bloom_add_hash(p, kv_bloom_hash(p, &key, sizeof key));
                break;
            default:
                owned[nowned++] = kv_bloom_hash(v, &key, sizeof key);
            }
        }
        kv_bloom_add_hashes_owned(v, owned, nowned);
        kv_bloom_add_hashes_owned(p, owned, nowned);
        ck_assert_uint_eq(stats_of(v).keys_added, SIMD_KEYS + shared);
        ck_assert_uint_eq(stats_of(p).keys_added, SIMD_KEYS + shared);
        uint8_t *ev, *ep;
        size_t lv, lp;
        encode_or_fail(v, &ev, &lv);
        encode_or_fail(p, &ep, &lp);
        ck_assert_uint_eq(lv, lp);
        ck_assert_msg(memcmp(ev, ep, lv) == 0, "k=%u%s: AVX-512 and portable adds set different bits",
                      k, shared ? " (shared adds)" : "");
        kv_free(ev);
        kv_free(ep);

        uint64_t differ = 0, present_missed = 0, hashes[256];
        uint8_t bv[256], bp[256];
        for (uint64_t i = 0; i < SIMD_KEYS; i++) {
            uint64_t key = stream_at(0x5D + k, i);
            present_missed += (uint64_t)(kv_bloom_may_contain(v, &key, sizeof key) != 1);
        }
        for (uint64_t i = 0; i < SIMD_ABSENT; i += 256) {
            for (unsigned j = 0; j < 256; j++) {
                /* 0 to 24 bytes: keys of at most 16 are hashed inline */
                uint64_t key[3] = {stream_at(0xAB5E + k, i + j), stream_at(0xAB5F + k, i + j),
                                   stream_at(0xAB60 + k, i + j)};
                size_t len = (i + j) % 25;
                hashes[j] = kv_bloom_hash(v, key, len);
                int a = kv_bloom_may_contain(v, key, len);
                differ += (uint64_t)(a != kv_bloom_may_contain(p, key, len));
                differ += (uint64_t)(a != kv_bloom_may_contain_hash(v, hashes[j]));
                differ += (uint64_t)(a != kv_bloom_may_contain_hash(p, hashes[j]));
            }
            kv_bloom_may_contain_batch(v, hashes, 256, bv);
            kv_bloom_may_contain_batch(p, hashes, 256, bp);
            differ += (uint64_t)(memcmp(bv, bp, 256) != 0);
            for (unsigned j = 0; j < 256; j++)
                differ += (uint64_t)(bv[j] != kv_bloom_may_contain_hash(p, hashes[j]));
        }
        ck_assert_msg(present_missed == 0, "k=%u: %llu false negatives", k,
                      (unsigned long long)present_missed);
        ck_assert_msg(differ == 0, "k=%u: AVX-512 and portable queries disagree %llu times", k,
                      (unsigned long long)differ);
        kv_bloom_free(v);
        kv_bloom_free(p);
    }
}
END_TEST

START_TEST(decode_rejects_every_truncation)
{
    kv_bloom_layout layout = (kv_bloom_layout)_i;
    kv_bloom *f = filled_filter(layout, 1000, 10, 41);
    uint8_t *buf;
    size_t len;
    encode_or_fail(f, &buf, &len);
    size_t accepted = 0, first = SIZE_MAX;
    for (size_t cut = 0; cut < len; cut++) {
        /* a fresh allocation of exactly `cut` bytes, so ASan sees overreads */
        uint8_t *t = malloc(cut ? cut : 1);
        ck_assert_ptr_nonnull(t);
        memcpy(t, buf, cut);
        if (!decode_is_corrupt(t, cut)) {
            accepted++;
            if (first == SIZE_MAX)
                first = cut;
        }
        free(t);
    }
    ck_assert_msg(accepted == 0, "%s: %zu of %zu truncations not KV_ECORRUPT (first: %zu bytes)",
                  layout_name(layout), accepted, len, first);
    /* and one byte too many */
    uint8_t *longer = malloc(len + 1);
    ck_assert_ptr_nonnull(longer);
    memcpy(longer, buf, len);
    longer[len] = 0;
    ck_assert_msg(decode_is_corrupt(longer, len + 1), "%s: trailing byte accepted",
                  layout_name(layout));
    free(longer);
    kv_free(buf);
    kv_bloom_free(f);
}
END_TEST

START_TEST(decode_rejects_every_single_byte_flip)
{
    kv_bloom_layout layout = (kv_bloom_layout)_i;
    kv_bloom *f = filled_filter(layout, 1000, 10, 51);
    uint8_t *buf;
    size_t len;
    encode_or_fail(f, &buf, &len);
    uint8_t *copy = malloc(len);
    ck_assert_ptr_nonnull(copy);
    uint64_t rs = 0xF11F + (uint64_t)layout;
    size_t flips = 0, accepted = 0, first_pos = SIZE_MAX;
    unsigned first_xor = 0;
    /* every position once, then 3000 random positions */
    for (size_t trial = 0; trial < len + 3000; trial++) {
        uint64_t r = rng_next(&rs);
        size_t pos = trial < len ? trial : (size_t)(r % len);
        uint8_t x = (uint8_t)(1 + (r >> 32) % 255); /* nonzero */
        memcpy(copy, buf, len);
        copy[pos] ^= x;
        flips++;
        if (!decode_is_corrupt(copy, len)) {
            accepted++;
            if (first_pos == SIZE_MAX) {
                first_pos = pos;
                first_xor = x;
            }
        }
    }
    ck_assert_msg(accepted == 0, "%s: %zu of %zu single-byte flips decoded without KV_ECORRUPT "
                  "(first: byte %zu ^ 0x%02x of %zu)",
                  layout_name(layout), accepted, flips, first_pos, first_xor, len);
    /* the original still decodes */
    kv_bloom *g = NULL;
    ck_assert_int_eq(kv_bloom_decode(buf, len, &g), KV_OK);
    kv_bloom_free(g);
    free(copy);
    kv_free(buf);
    kv_bloom_free(f);
}
END_TEST

START_TEST(decode_rejects_foreign_buffers)
{
    static const size_t zero_lens[] = {0, 1, 8, 39, 40, 47, 48, 49, 64, 1000, 1328, 4096};
    for (size_t t = 0; t < sizeof zero_lens / sizeof zero_lens[0]; t++) {
        uint8_t *z = calloc(1, zero_lens[t] ? zero_lens[t] : 1);
        ck_assert_ptr_nonnull(z);
        ck_assert_msg(decode_is_corrupt(z, zero_lens[t]), "%zu zero bytes accepted", zero_lens[t]);
        free(z);
    }
    /* random bytes, and random bytes behind a valid magic + version */
    kv_bloom *f = filled_filter(KV_BLOOM_BLOCKED, 1000, 10, 61);
    uint8_t *enc;
    size_t enc_len;
    encode_or_fail(f, &enc, &enc_len);
    uint64_t rs = 0xF0E1;
    for (int t = 0; t < 600; t++) {
        size_t len = t % 3 == 0 ? enc_len : (size_t)(rng_next(&rs) % 4096);
        uint8_t *r = malloc(len ? len : 1);
        ck_assert_ptr_nonnull(r);
        for (size_t j = 0; j < len; j++)
            r[j] = (uint8_t)rng_next(&rs);
        if (t % 2 && len >= 8)
            memcpy(r, enc, 8); /* magic, version, layout, hash kind, k */
        ck_assert_msg(decode_is_corrupt(r, len), "random buffer %d (%zu bytes) accepted", t, len);
        free(r);
    }
    /* two encodings back to back */
    uint8_t *two = malloc(2 * enc_len);
    ck_assert_ptr_nonnull(two);
    memcpy(two, enc, enc_len);
    memcpy(two + enc_len, enc, enc_len);
    ck_assert(decode_is_corrupt(two, 2 * enc_len));
    free(two);
    kv_free(enc);
    kv_bloom_free(f);
}
END_TEST

/* Encodings whose checksum is right but whose fields disagree with each
 * other or with the buffer: the field checks alone must reject them. */
START_TEST(decode_rejects_inconsistent_fields_with_valid_checksum)
{
    kv_bloom_layout layout = (kv_bloom_layout)_i;
    kv_bloom *f = filled_filter(layout, 1000, 10, 71);
    uint8_t *enc;
    size_t len;
    encode_or_fail(f, &enc, &len);
    uint8_t *c = malloc(len + 64);
    ck_assert_ptr_nonnull(c);

    /* our checksum model matches the encoder's, or the rest is meaningless */
    memcpy(c, enc, len);
    refresh_checksum(c, len);
    ck_assert_msg(memcmp(c, enc, len) == 0,
                  "checksum is not XXH3-64 (seed 0) of the bytes before it: update this test");
    uint64_t bits = get_u64le(enc + KV_BLOOM_FMT_OFF_BITS);
    uint64_t payload = get_u64le(enc + KV_BLOOM_FMT_OFF_PAYLOAD_LEN);
    ck_assert_uint_eq(payload, len - KV_BLOOM_FMT_HEADER - KV_BLOOM_FMT_CHECKSUM);

    struct { size_t off; unsigned width; uint64_t value; const char *what; } forged[] = {
        {KV_BLOOM_FMT_OFF_PAYLOAD_LEN, 8, payload + 8, "payload length +8"},
        {KV_BLOOM_FMT_OFF_PAYLOAD_LEN, 8, payload - 8, "payload length -8"},
        {KV_BLOOM_FMT_OFF_PAYLOAD_LEN, 8, 0, "payload length 0"},
        {KV_BLOOM_FMT_OFF_PAYLOAD_LEN, 8, UINT64_MAX, "payload length 2^64-1"},
        {KV_BLOOM_FMT_OFF_PAYLOAD_LEN, 8, payload + ((uint64_t)1 << 63), "payload length +2^63"},
        {KV_BLOOM_FMT_OFF_BITS, 8, 0, "bits 0"},
        {KV_BLOOM_FMT_OFF_BITS, 8, bits * 2, "bits doubled"},
        {KV_BLOOM_FMT_OFF_BITS, 8, bits / 2, "bits halved"},
        {KV_BLOOM_FMT_OFF_BITS, 8, UINT64_MAX, "bits 2^64-1"},
        {KV_BLOOM_FMT_OFF_BITS, 8, KV_BLOOM_MAX_BITS + 512, "bits above KV_BLOOM_MAX_BITS"},
        {KV_BLOOM_FMT_OFF_K, 1, 0, "k 0"},
        {KV_BLOOM_FMT_OFF_K, 1, KV_BLOOM_MAX_K + 1, "k 31"},
        {KV_BLOOM_FMT_OFF_K, 1, 255, "k 255"},
        {KV_BLOOM_FMT_OFF_LAYOUT, 1, 2, "layout 2"},
        {KV_BLOOM_FMT_OFF_LAYOUT, 1, 255, "layout 255"},
        {KV_BLOOM_FMT_OFF_VERSION, 1, 0, "version 0"},
        {KV_BLOOM_FMT_OFF_VERSION, 1, KV_BLOOM_FMT_VERSION + 1, "version + 1"},
        {KV_BLOOM_FMT_OFF_HASH, 1, 0, "hash kind 0"},
        {KV_BLOOM_FMT_OFF_HASH, 1, KV_BLOOM_FMT_HASH_SIPHASH24 + 1, "unknown hash kind"},
        {KV_BLOOM_FMT_OFF_HASH, 1, 255, "hash kind 255"},
        {KV_BLOOM_FMT_OFF_MAGIC, 1, 'k', "magic"},
    };
    for (size_t t = 0; t < sizeof forged / sizeof forged[0]; t++) {
        memcpy(c, enc, len);
        if (forged[t].width == 8)
            put_u64le(c + forged[t].off, forged[t].value);
        else
            c[forged[t].off] = (uint8_t)forged[t].value;
        refresh_checksum(c, len);
        ck_assert_msg(decode_is_corrupt(c, len), "%s: forged %s (checksum valid) accepted",
                      layout_name(layout), forged[t].what);
    }

    /* a length field that agrees with the buffer but not with bits:
     * 8 more payload bytes, or 8 fewer */
    memcpy(c, enc, len - KV_BLOOM_FMT_CHECKSUM);
    memset(c + len - KV_BLOOM_FMT_CHECKSUM, 0, 8);
    put_u64le(c + KV_BLOOM_FMT_OFF_PAYLOAD_LEN, payload + 8);
    refresh_checksum(c, len + 8);
    ck_assert_msg(decode_is_corrupt(c, len + 8), "%s: payload +8 with matching length accepted",
                  layout_name(layout));
    memcpy(c, enc, len - KV_BLOOM_FMT_CHECKSUM - 8);
    put_u64le(c + KV_BLOOM_FMT_OFF_PAYLOAD_LEN, payload - 8);
    refresh_checksum(c, len - 8);
    ck_assert_msg(decode_is_corrupt(c, len - 8), "%s: payload -8 with matching length accepted",
                  layout_name(layout));

    /* blocked filters are whole 512-bit blocks */
    if (layout == KV_BLOOM_BLOCKED) {
        memcpy(c, enc, len);
        put_u64le(c + KV_BLOOM_FMT_OFF_BITS, bits - 1);
        refresh_checksum(c, len);
        ck_assert_msg(decode_is_corrupt(c, len), "blocked with bits %% 512 != 0 accepted");
    }
    free(c);
    kv_free(enc);
    kv_bloom_free(f);
}
END_TEST

START_TEST(decode_and_encode_reject_null_arguments)
{
    kv_bloom *g = (kv_bloom *)&g;
    ck_assert_int_eq(kv_bloom_decode(NULL, 100, &g), KV_EINVAL);
    ck_assert_ptr_null(g);
    g = (kv_bloom *)&g;
    ck_assert_int_eq(kv_bloom_decode(NULL, 0, &g), KV_EINVAL);
    ck_assert_ptr_null(g);

    kv_bloom *f = filled_filter(KV_BLOOM_CLASSIC, 100, 10, 81);
    uint8_t *enc;
    size_t len;
    encode_or_fail(f, &enc, &len);
    ck_assert_int_eq(kv_bloom_decode(enc, len, NULL), KV_EINVAL);

    void *buf = NULL;
    size_t blen = 0;
    ck_assert_int_eq(kv_bloom_encode(NULL, &buf, &blen), KV_EINVAL);
    ck_assert_int_eq(kv_bloom_encode(f, NULL, &blen), KV_EINVAL);
    ck_assert_int_eq(kv_bloom_encode(f, &buf, NULL), KV_EINVAL);
    kv_free(enc);
    kv_bloom_free(f);
}
END_TEST

/* ---- concurrency ----------------------------------------------------------- */

#define CONC_WRITERS 4
#define CONC_READERS 2
#define CONC_PER_WRITER 150000u
#define CONC_PRELOAD 10000u
#define CONC_PRELOAD_STREAM 0xAAAA

struct conc {
    kv_bloom *f;
    _Atomic uint64_t progress[CONC_WRITERS]; /* keys 0..progress-1 were added */
    atomic_int readers_ready;
    atomic_int writers_done;
    /* Serialises the readers' kv_bloom_stats calls, so that this test is
     * about adds and queries; stats_and_expected_fpr_are_thread_safe covers
     * concurrent stats. */
    pthread_mutex_t stats_lock;
};

struct conc_writer {
    struct conc *c;
    unsigned id;
};

struct conc_reader {
    struct conc *c;
    unsigned id;
    uint64_t checks, misses, first_miss_writer, first_miss_index;
    uint64_t stats_checks, stats_bad, codec_checks, codec_bad;
};

static uint64_t conc_key(unsigned writer, uint64_t i)
{
    return stream_at(0xC0C0 + writer, i);
}

static void *conc_writer_main(void *arg)
{
    struct conc_writer *w = arg;
    struct conc *c = w->c;
    while (atomic_load(&c->readers_ready) < CONC_READERS)
        sched_yield();
    for (uint64_t i = 0; i < CONC_PER_WRITER; i++) {
        uint64_t k = conc_key(w->id, i);
        if (i & 1)
            kv_bloom_add_hash(c->f, kv_bloom_hash(c->f, &k, sizeof k));
        else
            kv_bloom_add(c->f, &k, sizeof k);
        /* publish: the add returned before this release store */
        atomic_store_explicit(&c->progress[w->id], i + 1, memory_order_release);
    }
    atomic_fetch_add(&c->writers_done, 1);
    return NULL;
}

static void conc_note_miss(struct conc_reader *r, unsigned writer, uint64_t i)
{
    if (r->misses++ == 0) {
        r->first_miss_writer = writer;
        r->first_miss_index = i;
    }
}

/* Queries keys whose adds other threads have published: each must answer
 * "maybe" the moment its publication is seen. Reader 0 also watches
 * keys_added, reader 1 encodes and decodes the live filter. */
static void *conc_reader_main(void *arg)
{
    struct conc_reader *r = arg;
    struct conc *c = r->c;
    uint64_t rs = 0x5EAD + r->id;
    uint64_t last_keys = 0;
    unsigned codec_rounds = 0;
    atomic_fetch_add(&c->readers_ready, 1);
    for (uint64_t iter = 0;; iter++) {
        int done = atomic_load(&c->writers_done) == CONC_WRITERS;
        uint64_t rnd = rng_next(&rs);
        unsigned w = (unsigned)(rnd % CONC_WRITERS);
        uint64_t p = atomic_load_explicit(&c->progress[w], memory_order_acquire);
        if (p) {
            uint64_t i = (rnd >> 8) % p;
            uint64_t k = conc_key(w, i);
            r->checks++;
            if (kv_bloom_may_contain(c->f, &k, sizeof k) != 1)
                conc_note_miss(r, w, i);
            /* the newest published key, too */
            k = conc_key(w, p - 1);
            if (kv_bloom_may_contain_hash(c->f, kv_bloom_hash(c->f, &k, sizeof k)) != 1)
                conc_note_miss(r, w, p - 1);
        }
        /* keys added before the threads started */
        uint64_t j = (rnd >> 40) % CONC_PRELOAD;
        uint64_t pk = stream_at(CONC_PRELOAD_STREAM, j);
        r->checks++;
        if (kv_bloom_may_contain(c->f, &pk, sizeof pk) != 1)
            conc_note_miss(r, CONC_WRITERS, j);
        /* some absent keys through the batch path: answers must be 0/1 */
        if (iter % 64 == 0) {
            uint64_t h[32];
            uint8_t out[32];
            for (unsigned q = 0; q < 32; q++)
                h[q] = rng_next(&rs);
            kv_bloom_may_contain_batch(c->f, h, 32, out);
            for (unsigned q = 0; q < 32; q++)
                if (out[q] > 1)
                    conc_note_miss(r, CONC_WRITERS + 1, q);
        }
        if (r->id == 0 && iter % 4096 == 0) {
            uint64_t published = CONC_PRELOAD;
            for (unsigned t = 0; t < CONC_WRITERS; t++)
                published += atomic_load_explicit(&c->progress[t], memory_order_acquire);
            kv_bloom_info info;
            pthread_mutex_lock(&c->stats_lock);
            kv_bloom_stats(c->f, &info);
            pthread_mutex_unlock(&c->stats_lock);
            r->stats_checks++;
            if (info.keys_added < published || info.keys_added < last_keys ||
                info.keys_added > CONC_PRELOAD + (uint64_t)CONC_WRITERS * CONC_PER_WRITER)
                r->stats_bad++;
            last_keys = info.keys_added;
        }
        if (r->id == 1 && iter % 8192 == 0 && codec_rounds < 8) {
            codec_rounds++;
            uint64_t snap[CONC_WRITERS];
            for (unsigned t = 0; t < CONC_WRITERS; t++)
                snap[t] = atomic_load_explicit(&c->progress[t], memory_order_acquire);
            void *buf = NULL;
            size_t len = 0;
            kv_bloom *g = NULL;
            r->codec_checks++;
            if (kv_bloom_encode(c->f, &buf, &len) != KV_OK || kv_bloom_decode(buf, len, &g) != KV_OK) {
                r->codec_bad++;
            } else {
                /* every add published before the encode is in it */
                for (unsigned t = 0; t < CONC_WRITERS; t++)
                    for (uint64_t i = 0; i < snap[t]; i += 97) {
                        uint64_t k = conc_key(t, i);
                        if (kv_bloom_may_contain(g, &k, sizeof k) != 1)
                            r->codec_bad++;
                    }
                kv_bloom_info gi;
                pthread_mutex_lock(&c->stats_lock);
                kv_bloom_stats(g, &gi);
                pthread_mutex_unlock(&c->stats_lock);
                uint64_t published = CONC_PRELOAD;
                for (unsigned t = 0; t < CONC_WRITERS; t++)
                    published += snap[t];
                if (gi.keys_added < published)
                    r->codec_bad++;
            }
            kv_bloom_free(g);
            kv_free(buf);
        }
        if (done)
            break; /* one full pass after the last add */
    }
    return NULL;
}

START_TEST(concurrent_adds_and_queries_lose_nothing)
{
    kv_bloom_layout layout = (kv_bloom_layout)_i;
    struct conc c;
    memset(&c, 0, sizeof c);
    uint64_t total = CONC_PRELOAD + (uint64_t)CONC_WRITERS * CONC_PER_WRITER;
    c.f = new_or_fail(layout, total, 10, 0xC0);
    for (unsigned t = 0; t < CONC_WRITERS; t++)
        atomic_init(&c.progress[t], 0);
    atomic_init(&c.readers_ready, 0);
    atomic_init(&c.writers_done, 0);
    ck_assert_int_eq(pthread_mutex_init(&c.stats_lock, NULL), 0);
    for (uint64_t j = 0; j < CONC_PRELOAD; j++) {
        uint64_t pk = stream_at(CONC_PRELOAD_STREAM, j);
        kv_bloom_add(c.f, &pk, sizeof pk);
    }

    pthread_t wt[CONC_WRITERS], rt[CONC_READERS];
    struct conc_writer w[CONC_WRITERS];
    struct conc_reader r[CONC_READERS];
    memset(r, 0, sizeof r);
    for (unsigned t = 0; t < CONC_READERS; t++) {
        r[t].c = &c;
        r[t].id = t;
        ck_assert_int_eq(pthread_create(&rt[t], NULL, conc_reader_main, &r[t]), 0);
    }
    for (unsigned t = 0; t < CONC_WRITERS; t++) {
        w[t].c = &c;
        w[t].id = t;
        ck_assert_int_eq(pthread_create(&wt[t], NULL, conc_writer_main, &w[t]), 0);
    }
    for (unsigned t = 0; t < CONC_WRITERS; t++)
        ck_assert_int_eq(pthread_join(wt[t], NULL), 0);
    for (unsigned t = 0; t < CONC_READERS; t++)
        ck_assert_int_eq(pthread_join(rt[t], NULL), 0);

    for (unsigned t = 0; t < CONC_READERS; t++) {
        ck_assert_msg(r[t].misses == 0,
                      "%s reader %u: %llu of %llu published keys answered absent "
                      "(first: writer %llu key %llu)",
                      layout_name(layout), t, (unsigned long long)r[t].misses,
                      (unsigned long long)r[t].checks, (unsigned long long)r[t].first_miss_writer,
                      (unsigned long long)r[t].first_miss_index);
        ck_assert_uint_gt(r[t].checks, 0);
    }
    ck_assert_uint_gt(r[0].stats_checks, 0);
    ck_assert_msg(r[0].stats_bad == 0, "%s: keys_added during adds was below the published adds "
                  "or went down (%llu of %llu)", layout_name(layout),
                  (unsigned long long)r[0].stats_bad, (unsigned long long)r[0].stats_checks);
    if (verbose())
        fprintf(stderr, "concurrency %s: reader checks %llu / %llu, stats checks %llu, "
                        "codec checks %llu\n", layout_name(layout),
                (unsigned long long)r[0].checks, (unsigned long long)r[1].checks,
                (unsigned long long)r[0].stats_checks, (unsigned long long)r[1].codec_checks);
    ck_assert_uint_gt(r[1].codec_checks, 0);
    ck_assert_msg(r[1].codec_bad == 0, "%s: encoding during adds lost published adds (%llu)",
                  layout_name(layout), (unsigned long long)r[1].codec_bad);

    /* after the join: every key is there, and every add was counted */
    kv_bloom_info info = stats_of(c.f);
    ck_assert_uint_eq(info.keys_added, total);
    uint64_t miss = 0;
    uint64_t hashes[CHUNK];
    uint8_t out[CHUNK];
    for (unsigned t = 0; t < CONC_WRITERS; t++)
        for (uint64_t base = 0; base < CONC_PER_WRITER; base += CHUNK) {
            size_t cnt = CONC_PER_WRITER - base < CHUNK ? (size_t)(CONC_PER_WRITER - base) : CHUNK;
            for (size_t j = 0; j < cnt; j++) {
                uint64_t k = conc_key(t, base + j);
                hashes[j] = kv_bloom_hash(c.f, &k, sizeof k);
                if (kv_bloom_may_contain(c.f, &k, sizeof k) != 1)
                    miss++;
            }
            kv_bloom_may_contain_batch(c.f, hashes, cnt, out);
            for (size_t j = 0; j < cnt; j++)
                if (out[j] != 1)
                    miss++;
        }
    for (uint64_t j = 0; j < CONC_PRELOAD; j++) {
        uint64_t pk = stream_at(CONC_PRELOAD_STREAM, j);
        if (kv_bloom_may_contain(c.f, &pk, sizeof pk) != 1)
            miss++;
    }
    ck_assert_msg(miss == 0, "%s: %llu false negatives after concurrent adds", layout_name(layout),
                  (unsigned long long)miss);
    pthread_mutex_destroy(&c.stats_lock);
    kv_bloom_free(c.f);
}
END_TEST

/* Threads that add to the same few blocks at once lose no bit: the filter
 * they build together is, bit for bit and count alike, the one a single
 * thread builds from the same keys. 64 blocks filled to about half, so a
 * lost bit is rarely set again by another key; many short rounds, each
 * started by a barrier, so that the threads' adds overlap. Both layouts,
 * and the blocked one with both its codes (AVX-512 where the CPU has it). */
#define CLASH_THREADS 4
#define CLASH_PER_THREAD 800u
#define CLASH_ROUNDS 150

struct clash {
    kv_bloom *f;
    pthread_barrier_t *go;
    uint64_t stream;
};

static void *clash_main(void *arg)
{
    struct clash *c = arg;
    pthread_barrier_wait(c->go);
    for (uint64_t i = 0; i < CLASH_PER_THREAD; i++) {
        uint64_t key = stream_at(c->stream, i);
        if (i & 1)
            kv_bloom_add(c->f, &key, sizeof key);
        else
            kv_bloom_add_hash(c->f, kv_bloom_hash(c->f, &key, sizeof key));
    }
    return NULL;
}

START_TEST(threads_adding_to_the_same_blocks_lose_no_bit)
{
    static const struct { kv_bloom_layout layout; int simd; } kinds[] = {
        {KV_BLOOM_BLOCKED, 1}, {KV_BLOOM_BLOCKED, 0}, {KV_BLOOM_CLASSIC, 0}};
    kv_bloom_layout layout = kinds[_i].layout;
    uint64_t total = (uint64_t)CLASH_THREADS * CLASH_PER_THREAD;
    unsigned bad_rounds = 0;
    for (unsigned round = 0; round < CLASH_ROUNDS; round++) {
        if (!kinds[_i].simd)
            ck_assert_int_eq(setenv("KV_BLOOM_SIMD", "0", 1), 0);
        kv_bloom *f = new_or_fail(layout, total, 10.24, round); /* 64 blocks */
        kv_bloom *ref = new_or_fail(layout, total, 10.24, round);
        unsetenv("KV_BLOOM_SIMD");
        pthread_barrier_t go;
        ck_assert_int_eq(pthread_barrier_init(&go, NULL, CLASH_THREADS), 0);
        pthread_t tid[CLASH_THREADS];
        struct clash c[CLASH_THREADS];
        for (unsigned t = 0; t < CLASH_THREADS; t++) {
            c[t] = (struct clash){f, &go, 0xC1A5 + round * CLASH_THREADS + t};
            ck_assert_int_eq(pthread_create(&tid[t], NULL, clash_main, &c[t]), 0);
        }
        for (unsigned t = 0; t < CLASH_THREADS; t++) {
            ck_assert_int_eq(pthread_join(tid[t], NULL), 0);
            for (uint64_t i = 0; i < CLASH_PER_THREAD; i++) {
                uint64_t key = stream_at(c[t].stream, i);
                kv_bloom_add(ref, &key, sizeof key);
            }
        }
        pthread_barrier_destroy(&go);
        uint8_t *ef, *er;
        size_t lf, lr;
        encode_or_fail(f, &ef, &lf);
        encode_or_fail(ref, &er, &lr);
        if (lf != lr || memcmp(ef, er, lf) != 0)
            bad_rounds++;
        kv_free(ef);
        kv_free(er);
        kv_bloom_free(f);
        kv_bloom_free(ref);
    }
    ck_assert_msg(bad_rounds == 0, "%s%s: %u of %d rounds lost bits or counts", layout_name(layout),
                  kinds[_i].simd ? "" : " (portable code)", bad_rounds, CLASH_ROUNDS);
}
END_TEST

/* The first thread to add to a region of a filter owns it and adds there
 * with plain stores until another thread adds there (bloom.c, "lone
 * writers"); the hand-over loses no bit. The filter is one block (512 bits,
 * one region), so every add of either thread rewrites the same cache line,
 * or eight blocks (eight regions of the blocked layout, each handed over
 * on its own): the owner re-adds its keys in a loop, the second thread adds
 * its own once each, starting a little later in each round. Together they
 * must set exactly the bits one thread sets from the same keys, and count
 * every add. Without the revoker's barrier and wait, the owner's in-flight
 * plain store overwrites the second thread's first bits in some rounds. */
#define HANDOVER_ROUNDS 1500
#define HANDOVER_KEYS 12u /* per block and thread */

struct handover {
    kv_bloom *f;
    uint64_t stream, keys;
    _Atomic int started, stop;
    uint64_t adds;
};

static void *handover_owner(void *arg)
{
    struct handover *h = arg;
    do {
        for (uint64_t i = 0; i < h->keys; i++) {
            uint64_t key = stream_at(h->stream, i);
            kv_bloom_add(h->f, &key, sizeof key);
            h->adds++;
        }
        atomic_store(&h->started, 1);
    } while (!atomic_load_explicit(&h->stop, memory_order_relaxed));
    return NULL;
}

/* Whether two filters' encodings hold the same bit array. */
static int same_payload(const kv_bloom *a, const kv_bloom *b)
{
    uint8_t *ea, *eb;
    size_t la, lb;
    encode_or_fail(a, &ea, &la);
    encode_or_fail(b, &eb, &lb);
    int same = la == lb && memcmp(ea + KV_BLOOM_FMT_HEADER, eb + KV_BLOOM_FMT_HEADER,
                                  la - KV_BLOOM_FMT_HEADER - KV_BLOOM_FMT_CHECKSUM) == 0;
    kv_free(ea);
    kv_free(eb);
    return same;
}

START_TEST(a_second_writer_takes_over_without_losing_a_bit)
{
    static const struct { kv_bloom_layout layout; int simd; } kinds[] = {
        {KV_BLOOM_BLOCKED, 1}, {KV_BLOOM_BLOCKED, 0}, {KV_BLOOM_CLASSIC, 0}};
    kv_bloom_layout layout = kinds[_i % 3].layout;
    int simd = kinds[_i % 3].simd;
    uint64_t blocks = _i < 3 ? 1 : 8, keys = HANDOVER_KEYS * blocks;
    unsigned rounds = _i < 3 ? HANDOVER_ROUNDS : HANDOVER_ROUNDS / 3;
    unsigned bad_bits = 0, bad_counts = 0;
    for (unsigned round = 0; round < rounds; round++) {
        if (!simd)
            ck_assert_int_eq(setenv("KV_BLOOM_SIMD", "0", 1), 0);
        double bpk = 512.0 * (double)blocks / (double)(2 * keys);
        kv_bloom *f = new_or_fail(layout, 2 * keys, bpk, round);
        kv_bloom *ref = new_or_fail(layout, 2 * keys, bpk, round);
        unsetenv("KV_BLOOM_SIMD");
        kv_bloom_info info;
        kv_bloom_stats(f, &info);
        ck_assert_uint_eq(info.bits, 512 * blocks);
        struct handover h = {.f = f, .stream = 0x4A4D + 2 * (uint64_t)round, .keys = keys};
        atomic_init(&h.started, 0);
        atomic_init(&h.stop, 0);
        pthread_t owner;
        ck_assert_int_eq(pthread_create(&owner, NULL, handover_owner, &h), 0);
        while (!atomic_load(&h.started))
            ;
        for (volatile unsigned spin = 0; spin < (round % 50) * 20; spin++)
            ;
        uint64_t second = h.stream + 1;
        for (uint64_t i = 0; i < keys; i++) {
            uint64_t key = stream_at(second, i);
            if (i & 1)
                kv_bloom_add(f, &key, sizeof key);
            else
                kv_bloom_add_hash(f, kv_bloom_hash(f, &key, sizeof key));
        }
        atomic_store(&h.stop, 1);
        ck_assert_int_eq(pthread_join(owner, NULL), 0);
        for (uint64_t i = 0; i < keys; i++) {
            uint64_t a = stream_at(h.stream, i), b = stream_at(second, i);
            kv_bloom_add(ref, &a, sizeof a);
            kv_bloom_add(ref, &b, sizeof b);
        }
        if (!same_payload(f, ref))
            bad_bits++;
        kv_bloom_stats(f, &info);
        if (info.keys_added != h.adds + keys)
            bad_counts++;
        kv_bloom_free(f);
        kv_bloom_free(ref);
    }
    ck_assert_msg(bad_bits == 0 && bad_counts == 0,
                  "%s%s, %llu block(s): of %u rounds, %u lost bits and %u miscounted",
                  layout_name(layout), simd ? "" : " (portable code)",
                  (unsigned long long)blocks, rounds, bad_bits, bad_counts);
}
END_TEST

/* Threads that each add the keys of their own part of the filter
 * (kv_bloom_partition) while another thread queries: together they build,
 * bit for bit and count alike, the filter one thread builds, and every key
 * answers "maybe" to the querying thread once its adder has published it.
 * Blocked parts write disjoint blocks, so each thread owns its regions and
 * adds with plain stores; classic parts share the bit array and its
 * adds are shared ones. */
#define PART_THREADS 4
#define PART_KEYS 60000u

struct part_job {
    kv_bloom *f;
    const uint64_t *keys; /* n keys of this part */
    uint64_t n;
    _Atomic uint64_t published;
};

static void *part_adder(void *arg)
{
    struct part_job *j = arg;
    for (uint64_t i = 0; i < j->n; i++) {
        kv_bloom_add(j->f, &j->keys[i], sizeof j->keys[i]);
        atomic_store_explicit(&j->published, i + 1, memory_order_release);
    }
    return NULL;
}

struct part_reader {
    struct part_job *jobs;
    _Atomic int stop;
    uint64_t checks, misses;
};

static void *part_reader_main(void *arg)
{
    struct part_reader *r = arg;
    for (uint64_t step = 0;; step++) {
        int last = atomic_load_explicit(&r->stop, memory_order_acquire);
        for (unsigned t = 0; t < PART_THREADS; t++) {
            struct part_job *j = &r->jobs[t];
            uint64_t upto = atomic_load_explicit(&j->published, memory_order_acquire);
            if (upto == 0)
                continue;
            uint64_t i = (step * 7919 + t) % upto;
            r->checks++;
            if (kv_bloom_may_contain(j->f, &j->keys[i], sizeof j->keys[i]) != 1)
                r->misses++;
        }
        if (last)
            return NULL;
    }
}

START_TEST(threads_adding_their_own_parts_build_the_same_filter)
{
    static const struct { kv_bloom_layout layout; int simd; } kinds[] = {
        {KV_BLOOM_BLOCKED, 1}, {KV_BLOOM_BLOCKED, 0}, {KV_BLOOM_CLASSIC, 0}};
    kv_bloom_layout layout = kinds[_i].layout;
    if (!kinds[_i].simd)
        ck_assert_int_eq(setenv("KV_BLOOM_SIMD", "0", 1), 0);
    kv_bloom *f = new_or_fail(layout, PART_KEYS, 10, 0x9A27);
    kv_bloom *ref = new_or_fail(layout, PART_KEYS, 10, 0x9A27);
    unsetenv("KV_BLOOM_SIMD");
    uint64_t *keys = malloc(PART_KEYS * sizeof *keys);
    uint64_t *sorted = malloc(PART_KEYS * sizeof *sorted);
    ck_assert_ptr_nonnull(keys);
    ck_assert_ptr_nonnull(sorted);
    struct part_job jobs[PART_THREADS];
    uint64_t fill = 0;
    for (unsigned t = 0; t < PART_THREADS; t++) {
        jobs[t] = (struct part_job){.f = f, .keys = sorted + fill};
        atomic_init(&jobs[t].published, 0);
        for (uint64_t i = 0; i < PART_KEYS; i++) {
            keys[i] = stream_at(0x9A27, i);
            if (kv_bloom_partition(f, kv_bloom_hash(f, &keys[i], sizeof keys[i]),
                                   PART_THREADS) == t)
                sorted[fill + jobs[t].n++] = keys[i];
        }
        fill += jobs[t].n;
        /* each part holds about a quarter of the keys */
        ck_assert_uint_gt(jobs[t].n, PART_KEYS / PART_THREADS * 8 / 10);
    }
    ck_assert_uint_eq(fill, PART_KEYS);
    struct part_reader r = {.jobs = jobs};
    atomic_init(&r.stop, 0);
    pthread_t tid[PART_THREADS], rt;
    ck_assert_int_eq(pthread_create(&rt, NULL, part_reader_main, &r), 0);
    for (unsigned t = 0; t < PART_THREADS; t++)
        ck_assert_int_eq(pthread_create(&tid[t], NULL, part_adder, &jobs[t]), 0);
    for (unsigned t = 0; t < PART_THREADS; t++)
        ck_assert_int_eq(pthread_join(tid[t], NULL), 0);
    atomic_store_explicit(&r.stop, 1, memory_order_release);
    ck_assert_int_eq(pthread_join(rt, NULL), 0);
    ck_assert_uint_gt(r.checks, 0);
    ck_assert_msg(r.misses == 0, "%s: %llu of %llu published keys answered absent",
                  layout_name(layout), (unsigned long long)r.misses,
                  (unsigned long long)r.checks);
    for (uint64_t i = 0; i < PART_KEYS; i++)
        kv_bloom_add(ref, &keys[i], sizeof keys[i]);
    ck_assert_msg(same_payload(f, ref), "%s%s: parts built another bit array", layout_name(layout),
                  kinds[_i].simd ? "" : " (portable code)");
    ck_assert_uint_eq(stats_of(f).keys_added, PART_KEYS);
    free(keys);
    free(sorted);
    kv_bloom_free(f);
    kv_bloom_free(ref);
}
END_TEST

/* kv_bloom_stats and kv_bloom_expected_fpr from several threads at once
 * (different filters, and one shared filter) give the single-threaded
 * answers, with no data race (TSan checks the latter in CI). */
#define TS_THREADS 4
#define TS_ROUNDS 200

struct ts_arg {
    const kv_bloom *shared;
    const kv_bloom_info *shared_want;
    const double *want; /* expected_fpr grid, both layouts */
    uint64_t bad;
};

static void ts_grid(unsigned idx, kv_bloom_layout *layout, uint64_t *m, uint64_t *n, unsigned *k)
{
    *layout = (kv_bloom_layout)(idx & 1);
    *m = (uint64_t)512 << ((idx >> 1) % 8);
    *n = 1 + (uint64_t)(idx * 37) % 500;
    *k = 1 + idx % 12;
}

#define TS_GRID 64

static void *ts_main(void *arg)
{
    struct ts_arg *a = arg;
    for (int round = 0; round < TS_ROUNDS; round++) {
        for (unsigned idx = 0; idx < TS_GRID; idx++) {
            kv_bloom_layout layout;
            uint64_t m, n;
            unsigned k;
            ts_grid(idx, &layout, &m, &n, &k);
            if (kv_bloom_expected_fpr(layout, m, n, k) != a->want[idx])
                a->bad++;
        }
        kv_bloom_info info;
        kv_bloom_stats(a->shared, &info);
        if (info.expected_fpr != a->shared_want->expected_fpr ||
            info.bits_set != a->shared_want->bits_set ||
            info.keys_added != a->shared_want->keys_added)
            a->bad++;
    }
    return NULL;
}

START_TEST(stats_and_expected_fpr_are_thread_safe)
{
    double want[TS_GRID];
    for (unsigned idx = 0; idx < TS_GRID; idx++) {
        kv_bloom_layout layout;
        uint64_t m, n;
        unsigned k;
        ts_grid(idx, &layout, &m, &n, &k);
        want[idx] = kv_bloom_expected_fpr(layout, m, n, k);
    }
    kv_bloom *f = filled_filter(KV_BLOOM_BLOCKED, 5000, 10, 123);
    kv_bloom_info fw = stats_of(f);
    pthread_t t[TS_THREADS];
    struct ts_arg a[TS_THREADS];
    for (unsigned i = 0; i < TS_THREADS; i++) {
        a[i].shared = f;
        a[i].shared_want = &fw;
        a[i].want = want;
        a[i].bad = 0;
        ck_assert_int_eq(pthread_create(&t[i], NULL, ts_main, &a[i]), 0);
    }
    uint64_t bad = 0;
    for (unsigned i = 0; i < TS_THREADS; i++) {
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
        bad += a[i].bad;
    }
    ck_assert_msg(bad == 0, "%llu concurrent stats/expected_fpr answers differ from serial ones",
                  (unsigned long long)bad);
    kv_bloom_free(f);
}
END_TEST

/* ---- sizing ---------------------------------------------------------------- */

static uint64_t round_up(uint64_t x, uint64_t to)
{
    return (x + to - 1) / to * to;
}

static int classic_k_for(double bpk)
{
    double k = round(bpk * log(2.0));
    if (k < KV_BLOOM_MIN_K)
        k = KV_BLOOM_MIN_K;
    if (k > KV_BLOOM_MAX_K)
        k = KV_BLOOM_MAX_K;
    return (int)k;
}

START_TEST(new_fpr_classic_matches_known_size)
{
    kv_bloom *f = NULL;
    ck_assert_int_eq(kv_bloom_new_fpr(KV_BLOOM_CLASSIC, MILLION, 0.01, 1, &f), KV_OK);
    kv_bloom_info info = stats_of(f);
    ck_assert_uint_eq(info.bits, 9585059);
    ck_assert_uint_eq(info.k, 7);
    ck_assert_int_eq(info.layout, KV_BLOOM_CLASSIC);
    ck_assert_uint_ge((uint64_t)info.bytes * 8, info.bits);
    kv_bloom_free(f);

    /* the same formula for other n and p */
    static const struct { uint64_t n; double p; } cases[] = {
        {1000, 0.01}, {100000, 0.001}, {12345, 0.05}, {MILLION, 0.0001}, {5000000, 0.02},
    };
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        double ln2 = log(2.0);
        uint64_t m = (uint64_t)ceil(-(double)cases[t].n * log(cases[t].p) / (ln2 * ln2));
        f = NULL;
        ck_assert_int_eq(kv_bloom_new_fpr(KV_BLOOM_CLASSIC, cases[t].n, cases[t].p, 1, &f), KV_OK);
        info = stats_of(f);
        ck_assert_msg(info.bits == m, "new_fpr(classic, %llu, %g): bits %llu, want %llu",
                      (unsigned long long)cases[t].n, cases[t].p, (unsigned long long)info.bits,
                      (unsigned long long)m);
        ck_assert_int_eq((int)info.k, classic_k_for((double)m / (double)cases[t].n));
        kv_bloom_free(f);
    }
}
END_TEST

START_TEST(new_classic_bits_and_k_follow_bits_per_key)
{
    static const double bpks[] = {1, 4, 6, 7.5, 10, 16, 20, 0.5, 0.01, 100, 1000};
    static const uint64_t ns[] = {1000, MILLION};
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
        for (size_t b = 0; b < sizeof bpks / sizeof bpks[0]; b++) {
            uint64_t n = ns[a];
            double bpk = bpks[b];
            kv_bloom *f = new_or_fail(KV_BLOOM_CLASSIC, n, bpk, 1);
            kv_bloom_info info = stats_of(f);
            uint64_t want = (uint64_t)ceil((double)n * bpk);
            ck_assert_msg(info.bits >= want && info.bits <= round_up(want < 64 ? 64 : want, 64),
                          "classic n=%llu bpk=%g: bits %llu, want ceil(n*bpk) = %llu "
                          "(up to a whole word)",
                          (unsigned long long)n, bpk, (unsigned long long)info.bits,
                          (unsigned long long)want);
            ck_assert_msg((int)info.k == classic_k_for(bpk), "classic n=%llu bpk=%g: k %u, want %d",
                          (unsigned long long)n, bpk, info.k, classic_k_for(bpk));
            ck_assert_uint_ge((uint64_t)info.bytes * 8, info.bits);
            kv_bloom_free(f);
        }
    /* the named examples */
    kv_bloom *f = new_or_fail(KV_BLOOM_CLASSIC, 1000, 10, 1);
    ck_assert_uint_eq(stats_of(f).k, 7);
    kv_bloom_free(f);
    f = new_or_fail(KV_BLOOM_CLASSIC, 1000, 1, 1);
    ck_assert_uint_eq(stats_of(f).k, 1);
    kv_bloom_free(f);
    f = new_or_fail(KV_BLOOM_CLASSIC, 1000, 20, 1);
    ck_assert_uint_eq(stats_of(f).k, 14);
    kv_bloom_free(f);
}
END_TEST

/* k = round(bits_per_key ln 2) also when n is so small that m is rounded up
 * to a whole word (the header's rule names bits_per_key, not m/n). */
START_TEST(new_classic_k_follows_bits_per_key_for_tiny_n)
{
    static const double bpks[] = {1, 4, 7.5, 10, 20};
    static const uint64_t ns[] = {0, 1, 3, 7};
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
        for (size_t b = 0; b < sizeof bpks / sizeof bpks[0]; b++) {
            kv_bloom *f = new_or_fail(KV_BLOOM_CLASSIC, ns[a], bpks[b], 1);
            kv_bloom_info info = stats_of(f);
            ck_assert_msg((int)info.k == classic_k_for(bpks[b]),
                          "classic n=%llu bpk=%g (bits %llu): k %u, want round(bpk ln2) = %d",
                          (unsigned long long)ns[a], bpks[b], (unsigned long long)info.bits,
                          info.k, classic_k_for(bpks[b]));
            ck_assert_uint_ge(info.bits, (uint64_t)ceil((double)ns[a] * bpks[b]));
            ck_assert_uint_ge(info.bits, 1);
            kv_bloom_free(f);
        }
}
END_TEST

/* k minimises kv_bloom_expected_fpr(BLOCKED, bits, n, k) over [1, 30]. */
static void check_blocked_k_optimal(const kv_bloom_info *info, uint64_t n, const char *what)
{
    double best = kv_bloom_expected_fpr(KV_BLOOM_BLOCKED, info->bits, n, info->k);
    ck_assert_msg(info->k >= KV_BLOOM_MIN_K && info->k <= KV_BLOOM_MAX_K, "%s: k %u", what, info->k);
    for (unsigned k = KV_BLOOM_MIN_K; k <= KV_BLOOM_MAX_K; k++) {
        double e = kv_bloom_expected_fpr(KV_BLOOM_BLOCKED, info->bits, n, k);
        ck_assert_msg(best <= e * (1 + 1e-12),
                      "%s: bits %llu n %llu: k=%u gives %.9g but k=%u gives %.9g", what,
                      (unsigned long long)info->bits, (unsigned long long)n, info->k, best, k, e);
    }
}

START_TEST(new_blocked_bits_whole_blocks_and_k_optimal)
{
    static const double bpks[] = {1, 4, 6, 7.5, 10, 16, 20, 30};
    static const uint64_t ns[] = {1, 7, 1000, 12345, MILLION};
    char what[96];
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
        for (size_t b = 0; b < sizeof bpks / sizeof bpks[0]; b++) {
            uint64_t n = ns[a];
            double bpk = bpks[b];
            kv_bloom *f = new_or_fail(KV_BLOOM_BLOCKED, n, bpk, 1);
            kv_bloom_info info = stats_of(f);
            uint64_t want = (uint64_t)ceil((double)n * bpk);
            want = round_up(want < 512 ? 512 : want, 512);
            snprintf(what, sizeof what, "blocked n=%llu bpk=%g", (unsigned long long)n, bpk);
            ck_assert_msg(info.bits % 512 == 0, "%s: bits %llu not whole blocks", what,
                          (unsigned long long)info.bits);
            ck_assert_msg(info.bits == want, "%s: bits %llu, want %llu", what,
                          (unsigned long long)info.bits, (unsigned long long)want);
            ck_assert_uint_ge((uint64_t)info.bytes * 8, info.bits);
            check_blocked_k_optimal(&info, n, what);
            kv_bloom_free(f);
        }
    /* with no keys, still one block and a valid k */
    kv_bloom *f = new_or_fail(KV_BLOOM_BLOCKED, 0, 10, 1);
    kv_bloom_info info = stats_of(f);
    ck_assert_uint_ge(info.bits, 512);
    ck_assert_uint_eq(info.bits % 512, 0);
    ck_assert(info.k >= KV_BLOOM_MIN_K && info.k <= KV_BLOOM_MAX_K);
    kv_bloom_free(f);
}
END_TEST

START_TEST(new_fpr_blocked_reaches_target)
{
    static const double targets[] = {0.3, 0.1, 0.05, 0.01, 0.001, 1e-4, 1e-6};
    static const uint64_t ns[] = {1, 1000, 77777, MILLION};
    char what[96];
    double ln2 = log(2.0);
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
        for (size_t b = 0; b < sizeof targets / sizeof targets[0]; b++) {
            uint64_t n = ns[a];
            double p = targets[b];
            kv_bloom *f = NULL;
            ck_assert_int_eq(kv_bloom_new_fpr(KV_BLOOM_BLOCKED, n, p, 1, &f), KV_OK);
            kv_bloom_info info = stats_of(f);
            snprintf(what, sizeof what, "blocked new_fpr n=%llu p=%g", (unsigned long long)n, p);
            double e = kv_bloom_expected_fpr(KV_BLOOM_BLOCKED, info.bits, n, info.k);
            if (verbose())
                fprintf(stderr, "%s: bits %llu (%.3f/key, classic %.3f) k %u fpr %.4g\n", what,
                        (unsigned long long)info.bits, (double)info.bits / (double)n,
                        -log(p) / (ln2 * ln2), info.k, e);
            ck_assert_msg(e <= p, "%s: bits %llu k %u: expected FPR %.6g above target", what,
                          (unsigned long long)info.bits, info.k, e);
            ck_assert_uint_eq(info.bits % 512, 0);
            /* starts from the classic m, and does not overshoot absurdly */
            double classic_m = ceil(-(double)n * log(p) / (ln2 * ln2));
            ck_assert_msg((double)info.bits >= classic_m && (double)info.bits <= 2 * classic_m + 512,
                          "%s: bits %llu vs classic %.0f", what, (unsigned long long)info.bits,
                          classic_m);
            check_blocked_k_optimal(&info, n, what);
            kv_bloom_free(f);
        }
}
END_TEST

START_TEST(new_accepts_fractional_bits_per_key)
{
    for (int l = 0; l < 2; l++) {
        kv_bloom_layout layout = (kv_bloom_layout)l;
        kv_bloom *f7 = new_or_fail(layout, MILLION, 7, 1);
        kv_bloom *f75 = new_or_fail(layout, MILLION, 7.5, 1);
        kv_bloom *f8 = new_or_fail(layout, MILLION, 8, 1);
        uint64_t b7 = stats_of(f7).bits, b75 = stats_of(f75).bits, b8 = stats_of(f8).bits;
        ck_assert_msg(b7 < b75 && b75 < b8, "%s: bits at 7 / 7.5 / 8 bits/key: %llu %llu %llu",
                      layout_name(layout), (unsigned long long)b7, (unsigned long long)b75,
                      (unsigned long long)b8);
        ck_assert_uint_ge(b75, 7500000);
        kv_bloom_free(f7);
        kv_bloom_free(f75);
        kv_bloom_free(f8);
        check_no_false_negatives(layout, 1000, 7.5, 1000);
    }
    kv_bloom *f = new_or_fail(KV_BLOOM_CLASSIC, 1000, 7.5, 1);
    ck_assert_uint_eq(stats_of(f).k, 5); /* round(7.5 ln 2) = round(5.2) */
    ck_assert_uint_ge(stats_of(f).bits, 7500);
    kv_bloom_free(f);
    f = new_or_fail(KV_BLOOM_BLOCKED, 1000, 7.5, 1);
    ck_assert_uint_eq(stats_of(f).bits, 7680);
    kv_bloom_free(f);
}
END_TEST

/* ---- expected FPR ---------------------------------------------------------- */

START_TEST(expected_fpr_classic_matches_formula)
{
    static const struct { uint64_t m, n; unsigned k; } cases[] = {
        {10000000, MILLION, 7}, {9585059, MILLION, 7}, {64, 7, 3}, {(uint64_t)1 << 30, 100000000, 11},
        {1000, 1000, 1}, {16000000, MILLION, 11}, {6000000, MILLION, 4}, {512, 1, 30},
        {KV_BLOOM_MAX_BITS, 50000000000ull, 15},
    };
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        double m = (double)cases[t].m, n = (double)cases[t].n, k = cases[t].k;
        double want = pow(1.0 - exp(-k * n / m), k);
        double got = kv_bloom_expected_fpr(KV_BLOOM_CLASSIC, cases[t].m, cases[t].n, cases[t].k);
        ck_assert_msg(rel_diff(got, want) <= 1e-12, "classic m=%llu n=%llu k=%u: %.17g, want %.17g",
                      (unsigned long long)cases[t].m, (unsigned long long)cases[t].n, cases[t].k,
                      got, want);
    }
}
END_TEST

/* The Putze-Sanders-Singler sum, computed independently. */
static double blocked_reference(uint64_t m, uint64_t n, unsigned k)
{
    double lambda = 512.0 * (double)n / (double)m;
    double one = log(1.0 - 1.0 / 512.0);
    double sum = 0;
    uint64_t jmax = (uint64_t)(lambda + 40.0 * sqrt(lambda) + 100.0);
    for (uint64_t j = 0; j <= jmax; j++) {
        double lp = -lambda + (double)j * log(lambda) - lgamma((double)j + 1.0);
        double bit = 1.0 - exp((double)k * (double)j * one);
        sum += exp(lp) * pow(bit, (double)k);
    }
    return sum;
}

START_TEST(expected_fpr_blocked_matches_poisson_sum)
{
    static const struct { uint64_t m, n; unsigned k; } cases[] = {
        {10000384, MILLION, 7}, {16000256, MILLION, 11}, {6000128, MILLION, 4}, {512, 1, 30},
        {512, 100, 1}, {5120, 1000, 6}, {1 << 20, 200000, 2},
    };
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        double want = blocked_reference(cases[t].m, cases[t].n, cases[t].k);
        double got = kv_bloom_expected_fpr(KV_BLOOM_BLOCKED, cases[t].m, cases[t].n, cases[t].k);
        ck_assert_msg(rel_diff(got, want) <= 1e-9, "blocked m=%llu n=%llu k=%u: %.17g, want %.17g",
                      (unsigned long long)cases[t].m, (unsigned long long)cases[t].n, cases[t].k,
                      got, want);
    }
}
END_TEST

START_TEST(expected_fpr_blocked_slightly_above_classic)
{
    for (unsigned k = 5; k <= 9; k++) {
        double c = kv_bloom_expected_fpr(KV_BLOOM_CLASSIC, 10240000, 1024000, k);
        double b = kv_bloom_expected_fpr(KV_BLOOM_BLOCKED, 10240000, 1024000, k);
        ck_assert_msg(b > c && b < 1.5 * c, "10 bits/key k=%u: blocked %.6g, classic %.6g", k, b, c);
    }
}
END_TEST

START_TEST(expected_fpr_edge_cases)
{
    for (int l = 0; l < 2; l++) {
        kv_bloom_layout layout = (kv_bloom_layout)l;
        ck_assert(kv_bloom_expected_fpr(layout, 10240, 0, 7) == 0.0);
        ck_assert(kv_bloom_expected_fpr(layout, KV_BLOOM_MAX_BITS, 0, 1) == 0.0);
        ck_assert(kv_bloom_expected_fpr(layout, 0, 1000, 7) == 1.0);
        ck_assert(kv_bloom_expected_fpr(layout, 10240, 1000, 0) == 1.0);
        /* grows with n (to about 1), shrinks with m */
        double prev = 0;
        for (uint64_t n = 1; n <= 10000000; n *= 10) {
            double e = kv_bloom_expected_fpr(layout, 1024000, n, 7);
            ck_assert_msg(e > 0 && e >= prev, "%s n=%llu: %.9g after %.9g", layout_name(layout),
                          (unsigned long long)n, e, prev);
            prev = e;
        }
        ck_assert(prev > 0.99);
        prev = 2;
        for (uint64_t m = 512 * 16; m <= 512 * 16 * 1024; m *= 2) {
            double e = kv_bloom_expected_fpr(layout, m, 10000, 7);
            ck_assert_msg(e > 0 && e <= prev, "%s m=%llu: %.9g after %.9g", layout_name(layout),
                          (unsigned long long)m, e, prev);
            prev = e;
        }
    }
}
END_TEST

/* ---- bounded time for any argument (issue 20) ------------------------------
 * Each of these hung before the blocked series was bounded (a double counter
 * stepped by 1 above 2^53, or ~37 sqrt(lambda) terms below it); their tcase
 * has a short timeout, so a hang fails the test instead of stalling ctest. */

START_TEST(expected_fpr_returns_for_any_arguments)
{
    static const uint64_t ms[] = {1, 64, 512, 1 << 20, KV_BLOOM_MAX_BITS, UINT64_MAX};
    static const uint64_t ns[] = {1, (uint64_t)1 << 32, ((uint64_t)1 << 53) + 1, (uint64_t)1 << 62,
                                  UINT64_MAX};
    static const unsigned ks[] = {1, 7, 30, 31, 1000, UINT_MAX};
    for (int l = 0; l < 2; l++)
        for (size_t a = 0; a < sizeof ms / sizeof ms[0]; a++)
            for (size_t b = 0; b < sizeof ns / sizeof ns[0]; b++)
                for (size_t c = 0; c < sizeof ks / sizeof ks[0]; c++) {
                    double e = kv_bloom_expected_fpr((kv_bloom_layout)l, ms[a], ns[b], ks[c]);
                    ck_assert_msg(e >= 0 && e <= 1, "%s m=%llu n=%llu k=%u: %.17g",
                                  layout_name((kv_bloom_layout)l), (unsigned long long)ms[a],
                                  (unsigned long long)ns[b], ks[c], e);
                }
    /* the issue's example: one block claiming 2^62 keys rejects nothing */
    ck_assert(kv_bloom_expected_fpr(KV_BLOOM_BLOCKED, 512, (uint64_t)1 << 62, 7) == 1.0);
    ck_assert(kv_bloom_expected_fpr(KV_BLOOM_BLOCKED, KV_BLOOM_MAX_BITS, UINT64_MAX, 30) == 1.0);
}
END_TEST

/* Where the series is cut short or skipped (tens of thousands of keys per
 * block and more), it still agrees with the plain sum. */
START_TEST(expected_fpr_blocked_exact_near_saturation)
{
    static const double lambdas[] = {1000, 5000, 20000, 29999.5, 30000, 30000.5, 45000};
    static const unsigned ks[] = {1, 2, 7, 30};
    double prev[4] = {0};
    for (size_t t = 0; t < sizeof lambdas / sizeof lambdas[0]; t++)
        for (size_t c = 0; c < sizeof ks / sizeof ks[0]; c++) {
            uint64_t m = 512 * 1000, n = (uint64_t)(lambdas[t] * 1000);
            double want = blocked_reference(m, n, ks[c]);
            double got = kv_bloom_expected_fpr(KV_BLOOM_BLOCKED, m, n, ks[c]);
            /* the reference sum carries ~1e-11 of rounding at these sizes */
            ck_assert_msg(rel_diff(got, want < 1 ? want : 1) <= 1e-9 && got >= prev[c] - 1e-12,
                          "lambda %g k=%u: %.17g, want %.17g (previous lambda %.17g)", lambdas[t],
                          ks[c], got, want, prev[c]);
            prev[c] = got;
        }
}
END_TEST

/* Extreme but accepted sizes give a filter (or KV_EINVAL when no filter of
 * at most KV_BLOOM_MAX_BITS can meet them), at once, and it works. */
START_TEST(new_returns_for_extreme_arguments)
{
    for (int l = 0; l < 2; l++) {
        kv_bloom_layout layout = (kv_bloom_layout)l;
        kv_bloom *f = new_or_fail(layout, (uint64_t)1 << 62, 1e-300, 1);
        kv_bloom_info info;
        kv_bloom_stats(f, &info);
        ck_assert_uint_eq(info.bits, layout == KV_BLOOM_BLOCKED ? 512 : 64);
        kv_bloom_add(f, "key", 3);
        ck_assert(kv_bloom_may_contain(f, "key", 3));
        kv_bloom_free(f);

        /* an FPR just below 1: a tiny filter for 1000 keys ... */
        ck_assert_int_eq(kv_bloom_new_fpr(layout, 1000, 1 - 1e-16, 1, &f), KV_OK);
        kv_bloom_stats(f, &info);
        ck_assert(kv_bloom_expected_fpr(layout, info.bits, 1000, info.k) <= 1 - 1e-16);
        kv_bloom_free(f);
        /* ... and for 2^62 keys one the blocked layout cannot make in 2^40 bits */
        int rc = kv_bloom_new_fpr(layout, (uint64_t)1 << 62, 1 - 1e-16, 1, &f);
        ck_assert_int_eq(rc, layout == KV_BLOOM_BLOCKED ? KV_EINVAL : KV_OK);
        if (rc == KV_OK) {
            kv_bloom_add(f, "key", 3);
            ck_assert(kv_bloom_may_contain(f, "key", 3));
            kv_bloom_free(f);
        }
        /* a rate that k <= 30 cannot reach for the blocked layout */
        rc = kv_bloom_new_fpr(layout, 1000, 1e-200, 1, &f);
        ck_assert_int_eq(rc, layout == KV_BLOOM_BLOCKED ? KV_EINVAL : KV_OK);
        if (rc == KV_OK)
            kv_bloom_free(f);
    }
}
END_TEST

/* A filter encoding whose key count is forged behind a valid checksum:
 * decoding and kv_bloom_stats return at once, and the filter still answers
 * for the keys it holds. */
START_TEST(decode_forged_key_count_returns_promptly)
{
    static const uint64_t forged[] = {((uint64_t)1 << 53) + 1, (uint64_t)1 << 62, UINT64_MAX};
    kv_bloom_layout layout = (kv_bloom_layout)_i;
    kv_bloom *f = filled_filter(layout, 1000, 10, 7);
    uint8_t *buf;
    size_t len;
    encode_or_fail(f, &buf, &len);
    kv_bloom_free(f);
    for (size_t t = 0; t < sizeof forged / sizeof forged[0]; t++) {
        put_u64le(buf + KV_BLOOM_FMT_OFF_KEYS, forged[t]);
        refresh_checksum(buf, len);
        kv_bloom *g = NULL;
        ck_assert_int_eq(kv_bloom_decode(buf, len, &g), KV_OK);
        kv_bloom_info info;
        kv_bloom_stats(g, &info);
        ck_assert_uint_eq(info.keys_added, forged[t]);
        ck_assert(info.expected_fpr == 1.0);
        for (uint64_t i = 0; i < 1000; i++) {
            uint64_t k = stream_at(7, i);
            ck_assert(kv_bloom_may_contain(g, &k, sizeof k));
        }
        kv_bloom_free(g);
    }
    kv_free(buf);
}
END_TEST

/* A rate: never below 0 nor above 1, also for overfull filters where the
 * blocked sum's Poisson weights must not add up to more than 1. */
START_TEST(expected_fpr_is_a_probability)
{
    static const unsigned ks[] = {1, 2, 7, 16, 30};
    kv_bloom_layout layout = (kv_bloom_layout)_i;
    uint64_t bad = 0;
    double worst = 0;
    uint64_t wm = 0, wn = 0;
    unsigned wk = 0;
    for (uint64_t m = 512; m <= ((uint64_t)512 << 20); m *= 8)
        for (uint64_t n = 1; n <= 100000000; n *= 10)
            for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
                double e = kv_bloom_expected_fpr(layout, m, n, ks[t]);
                if (!(e >= 0.0 && e <= 1.0)) {
                    if (bad++ == 0 || fabs(e - 0.5) > fabs(worst - 0.5)) {
                        worst = e;
                        wm = m;
                        wn = n;
                        wk = ks[t];
                    }
                }
            }
    ck_assert_msg(bad == 0, "%s: %llu (m, n, k) give an FPR outside [0, 1], e.g. "
                  "kv_bloom_expected_fpr(%s, %llu, %llu, %u) = %.17g",
                  layout_name(layout), (unsigned long long)bad, layout_name(layout),
                  (unsigned long long)wm, (unsigned long long)wn, wk, worst);
}
END_TEST

/* ---- invalid arguments ----------------------------------------------------- */

static void expect_new_einval(kv_bloom_layout layout, uint64_t n, double bpk, const char *what)
{
    kv_bloom *f = (kv_bloom *)&f;
    int rc = kv_bloom_new(layout, n, bpk, 1, &f);
    ck_assert_msg(rc == KV_EINVAL && f == NULL, "kv_bloom_new %s: rc %d, out %p", what, rc, (void *)f);
    if (rc == KV_OK)
        kv_bloom_free(f);
}

static void expect_new_fpr_einval(kv_bloom_layout layout, uint64_t n, double p, const char *what)
{
    kv_bloom *f = (kv_bloom *)&f;
    int rc = kv_bloom_new_fpr(layout, n, p, 1, &f);
    ck_assert_msg(rc == KV_EINVAL && f == NULL, "kv_bloom_new_fpr %s: rc %d, out %p", what, rc,
                  (void *)f);
    if (rc == KV_OK)
        kv_bloom_free(f);
}

START_TEST(new_rejects_invalid_arguments)
{
    ck_assert_int_eq(kv_bloom_new(KV_BLOOM_BLOCKED, 1000, 10, 1, NULL), KV_EINVAL);
    ck_assert_int_eq(kv_bloom_new(KV_BLOOM_CLASSIC, 1000, 10, 1, NULL), KV_EINVAL);
    for (int l = 0; l < 2; l++) {
        kv_bloom_layout layout = (kv_bloom_layout)l;
        expect_new_einval(layout, 1000, 0.0, "bpk 0");
        expect_new_einval(layout, 1000, -0.0, "bpk -0");
        expect_new_einval(layout, 1000, -1.0, "bpk -1");
        expect_new_einval(layout, 1000, -DBL_MIN, "bpk -DBL_MIN");
        expect_new_einval(layout, 1000, NAN, "bpk NaN");
        expect_new_einval(layout, 1000, INFINITY, "bpk +inf");
        expect_new_einval(layout, 1000, -INFINITY, "bpk -inf");
        expect_new_einval(layout, 1000, 1000.5, "bpk 1000.5");
        expect_new_einval(layout, 1, 1e9, "bpk 1e9");
        expect_new_einval(layout, UINT64_MAX, 1, "n 2^64-1");
        expect_new_einval(layout, UINT64_MAX, 10, "n 2^64-1 at 10 bpk");
        /* n * bpk just above KV_BLOOM_MAX_BITS = 2^40 */
        expect_new_einval(layout, KV_BLOOM_MAX_BITS / 10 + 1, 10, "n*bpk > 2^40");
        expect_new_einval(layout, KV_BLOOM_MAX_BITS + 1, 1, "n > 2^40 at 1 bpk");
        expect_new_einval(layout, (uint64_t)1 << 62, 1000, "n 2^62 at 1000 bpk");
    }
    expect_new_einval((kv_bloom_layout)7, 1000, 10, "layout 7");
    expect_new_einval((kv_bloom_layout)2, 1000, 10, "layout 2");
    expect_new_einval((kv_bloom_layout)-1, 1000, 10, "layout -1");
    /* the edges of the valid range are valid */
    kv_bloom *f = new_or_fail(KV_BLOOM_CLASSIC, 10, 1000, 1);
    kv_bloom_free(f);
    f = new_or_fail(KV_BLOOM_BLOCKED, 10, 1e-3, 1);
    kv_bloom_free(f);
}
END_TEST

/* Targets whose blocked filter the keys do not justify are refused before
 * anything is allocated: 2^40 keys at p = 0.999999 (the blocked layout's
 * blocks saturate; it would have allocated 9.98 GB over 34.8 s, where the
 * classic layout gives 2.3M bits, k = 1). kv_bloom_size_fpr says the same
 * without allocating, and gives exactly kv_bloom_new_fpr's m and k. */
START_TEST(new_fpr_refuses_targets_the_keys_do_not_justify)
{
    kv_bloom *f = (kv_bloom *)1;
    uint64_t m;
    unsigned k;
    ck_assert_int_eq(kv_bloom_new_fpr(KV_BLOOM_BLOCKED, (uint64_t)1 << 40, 0.999999, 1, &f),
                     KV_EINVAL);
    ck_assert_ptr_null(f);
    ck_assert_ptr_nonnull(strstr(kv_error_text(), "16 times"));
    ck_assert_int_eq(kv_bloom_size_fpr(KV_BLOOM_BLOCKED, (uint64_t)1 << 40, 0.999999, &m, &k),
                     KV_EINVAL);
    ck_assert_int_eq(kv_bloom_size_fpr(KV_BLOOM_CLASSIC, (uint64_t)1 << 40, 0.999999, &m, &k),
                     KV_OK);
    ck_assert_uint_eq(k, 1);
    ck_assert(m > 2000000 && m < 2500000);
    ck_assert_int_eq(kv_bloom_new_fpr(KV_BLOOM_BLOCKED, 1000000, 0.99, 1, &f), KV_OK);
    kv_bloom_free(f);
    ck_assert_int_eq(kv_bloom_new_fpr(KV_BLOOM_BLOCKED, 1000000, 0.999, 1, &f), KV_EINVAL);
    /* In the usual range the size matches the filter made. */
    static const double ps[] = {0.5, 0.01, 1e-6, 1e-12, 1e-18};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        for (int l = 0; l < 2; l++) {
            ck_assert_int_eq(kv_bloom_size_fpr((kv_bloom_layout)l, 5000, ps[i], &m, &k), KV_OK);
            ck_assert_int_eq(kv_bloom_new_fpr((kv_bloom_layout)l, 5000, ps[i], 1, &f), KV_OK);
            kv_bloom_info info;
            kv_bloom_stats(f, &info);
            ck_assert_uint_eq(info.bits, m);
            ck_assert_uint_eq(info.k, k);
            kv_bloom_free(f);
        }
    ck_assert_int_eq(kv_bloom_size_fpr(KV_BLOOM_BLOCKED, 10, 0.01, NULL, &k), KV_EINVAL);
    ck_assert_int_eq(kv_bloom_size_fpr(KV_BLOOM_BLOCKED, 10, 0.01, &m, NULL), KV_EINVAL);
    ck_assert_int_eq(kv_bloom_size_fpr(KV_BLOOM_BLOCKED, 10, 1.0, &m, &k), KV_EINVAL);
}
END_TEST

START_TEST(new_fpr_rejects_invalid_arguments)
{
    ck_assert_int_eq(kv_bloom_new_fpr(KV_BLOOM_BLOCKED, 1000, 0.01, 1, NULL), KV_EINVAL);
    ck_assert_int_eq(kv_bloom_new_fpr(KV_BLOOM_CLASSIC, 1000, 0.01, 1, NULL), KV_EINVAL);
    for (int l = 0; l < 2; l++) {
        kv_bloom_layout layout = (kv_bloom_layout)l;
        expect_new_fpr_einval(layout, 1000, 0.0, "p 0");
        expect_new_fpr_einval(layout, 1000, -0.0, "p -0");
        expect_new_fpr_einval(layout, 1000, -0.5, "p -0.5");
        expect_new_fpr_einval(layout, 1000, 1.0, "p 1");
        expect_new_fpr_einval(layout, 1000, 1.5, "p 1.5");
        expect_new_fpr_einval(layout, 1000, NAN, "p NaN");
        expect_new_fpr_einval(layout, 1000, INFINITY, "p +inf");
        expect_new_fpr_einval(layout, 1000, -INFINITY, "p -inf");
        expect_new_fpr_einval(layout, UINT64_MAX, 0.01, "n 2^64-1");
        expect_new_fpr_einval(layout, (uint64_t)1 << 37, 0.01, "m > 2^40");
        expect_new_fpr_einval(layout, 1000, 1e-300, "p 1e-300: over 1000 bits per key");
        expect_new_fpr_einval(layout, 1000, DBL_MIN, "p DBL_MIN");
    }
    expect_new_fpr_einval((kv_bloom_layout)7, 1000, 0.01, "layout 7");
    expect_new_fpr_einval((kv_bloom_layout)-1, 1000, 0.01, "layout -1");
}
END_TEST

START_TEST(free_null_is_a_noop)
{
    kv_bloom_free(NULL);
    kv_free(NULL);
    /* still alive, and the library still works */
    kv_bloom *f = new_or_fail(KV_BLOOM_BLOCKED, 10, 10, 1);
    kv_bloom_add(f, "k", 1);
    ck_assert_int_eq(kv_bloom_may_contain(f, "k", 1), 1);
    kv_bloom_free(f);
}
END_TEST

START_TEST(strerror_names_each_code_distinctly)
{
    static const int codes[] = {KV_OK, KV_NOTFOUND, KV_EINVAL, KV_ENOMEM, KV_ECORRUPT,
                                KV_EIO, KV_EBUSY, KV_ENOSPC, KV_EPERM, KV_ERANGE};
    size_t nc = sizeof codes / sizeof codes[0];
    for (size_t a = 0; a < nc; a++) {
        const char *s = kv_strerror(codes[a]);
        ck_assert_ptr_nonnull(s);
        ck_assert_uint_gt(strlen(s), 0);
        ck_assert_str_ne(s, "unknown error");
        for (size_t b = 0; b < a; b++)
            ck_assert_msg(strcmp(s, kv_strerror(codes[b])) != 0, "codes %d and %d both \"%s\"",
                          codes[a], codes[b], s);
    }
    static const int unknown[] = {1, 42, -10, -100, INT_MAX, INT_MIN};
    for (size_t a = 0; a < sizeof unknown / sizeof unknown[0]; a++) {
        const char *s = kv_strerror(unknown[a]);
        ck_assert_ptr_nonnull(s);
        ck_assert_str_eq(s, "unknown error");
    }
}
END_TEST

/* ---- hashing --------------------------------------------------------------- */

START_TEST(hash_same_seed_gives_same_hash)
{
    kv_bloom *a = new_or_fail(KV_BLOOM_BLOCKED, 1000, 10, 42);
    kv_bloom *b = new_or_fail(KV_BLOOM_CLASSIC, MILLION, 3, 42); /* other layout and size */
    uint8_t key[BIN_KEY_MAX];
    uint64_t differ = 0;
    for (uint64_t i = 0; i < 10000; i++) {
        size_t len = bin_key(91, i, key);
        uint64_t h = kv_bloom_hash(a, key, len);
        if (h != kv_bloom_hash(a, key, len) || h != kv_bloom_hash(b, key, len))
            differ++;
    }
    ck_assert_uint_eq(differ, 0);
    kv_bloom_free(a);
    kv_bloom_free(b);
}
END_TEST

START_TEST(hash_different_seeds_give_different_hashes)
{
    static const uint64_t seeds[] = {0, 1, 2, 42, UINT64_MAX};
    size_t ns = sizeof seeds / sizeof seeds[0];
    kv_bloom *f[5];
    for (size_t s = 0; s < ns; s++)
        f[s] = new_or_fail(KV_BLOOM_BLOCKED, 1000, 10, seeds[s]);
    uint8_t key[BIN_KEY_MAX];
    uint64_t same = 0;
    for (uint64_t i = 0; i < 10000; i++) {
        size_t len = bin_key(92, i, key);
        for (size_t s = 0; s < ns; s++)
            for (size_t t = 0; t < s; t++)
                if (kv_bloom_hash(f[s], key, len) == kv_bloom_hash(f[t], key, len))
                    same++;
    }
    ck_assert_msg(same == 0, "%llu keys hash the same under two seeds", (unsigned long long)same);
    /* and keys added under one seed are mostly absent from a filter seeded
     * differently: the seed really steers the probes */
    kv_bloom *x = new_or_fail(KV_BLOOM_CLASSIC, 10000, 10, 1);
    kv_bloom *y = new_or_fail(KV_BLOOM_CLASSIC, 10000, 10, 2);
    for (uint64_t i = 0; i < 10000; i++) {
        uint64_t k = stream_at(93, i);
        kv_bloom_add(x, &k, sizeof k);
        kv_bloom_add_hash(y, kv_bloom_hash(x, &k, sizeof k)); /* x's hash into y */
    }
    uint64_t hits = 0;
    for (uint64_t i = 0; i < 10000; i++) {
        uint64_t k = stream_at(93, i);
        hits += (uint64_t)kv_bloom_may_contain(y, &k, sizeof k); /* y hashes with its seed */
    }
    ck_assert_msg(hits < 500, "%llu of 10000 keys found under the wrong seed",
                  (unsigned long long)hits);
    for (size_t s = 0; s < ns; s++)
        kv_bloom_free(f[s]);
    kv_bloom_free(x);
    kv_bloom_free(y);
}
END_TEST

START_TEST(hash_is_xxh3_64_with_the_seed)
{
    static const uint64_t seeds[] = {0, 7, 0xDEADBEEFCAFEF00Dull};
    uint8_t key[BIN_KEY_MAX];
    for (size_t s = 0; s < 3; s++) {
        kv_bloom *f = new_or_fail((kv_bloom_layout)(s % 2), 100, 10, seeds[s]);
        uint64_t bad = 0;
        for (uint64_t i = 0; i < 1000; i++) {
            size_t len = bin_key(94, i, key);
            if (kv_bloom_hash(f, key, len) != XXH3_64bits_withSeed(key, len, seeds[s]))
                bad++;
        }
        ck_assert_uint_eq(bad, 0);
        /* the empty key, NULL or not */
        ck_assert_uint_eq(kv_bloom_hash(f, NULL, 0), XXH3_64bits_withSeed("", 0, seeds[s]));
        ck_assert_uint_eq(kv_bloom_hash(f, "abc", 0), XXH3_64bits_withSeed("", 0, seeds[s]));
        kv_bloom_free(f);
    }
}
END_TEST

START_TEST(hash_covers_bytes_after_nul)
{
    static const uint8_t zeros[64];
    kv_bloom *f = new_or_fail(KV_BLOOM_BLOCKED, 100, 10, 3);
    ck_assert_uint_ne(kv_bloom_hash(f, "a\0b", 3), kv_bloom_hash(f, "a\0c", 3));
    ck_assert_uint_ne(kv_bloom_hash(f, "a\0b", 3), kv_bloom_hash(f, "a", 1));
    ck_assert_uint_ne(kv_bloom_hash(f, "a\0", 2), kv_bloom_hash(f, "a", 1));
    ck_assert_uint_ne(kv_bloom_hash(f, zeros, 1), kv_bloom_hash(f, NULL, 0));
    for (size_t a = 1; a <= sizeof zeros; a++)
        for (size_t b = 1; b < a; b++)
            ck_assert_msg(kv_bloom_hash(f, zeros, a) != kv_bloom_hash(f, zeros, b),
                          "%zu and %zu NUL bytes hash alike", a, b);
    kv_bloom_free(f);
}
END_TEST

/* ---- suite ----------------------------------------------------------------- */

/* ---- Monkey: sharing filter memory among runs (kv_bloom_allocate) ------------ */

/* The expected false positives of a missing key that probes every run. */
static double runs_fp(kv_bloom_layout layout, const uint64_t *keys, const double *bits, size_t n)
{
    double fp = 0;
    for (size_t i = 0; i < n; i++)
        if (keys[i])
            fp += kv_bloom_fpr_at(layout, bits[i]);
    return fp;
}

static double runs_memory(const uint64_t *keys, const double *bits, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m += (double)keys[i] * bits[i];
    return m;
}

/* kv_bloom_fpr_at is the FPR of the filter kv_bloom_new builds at that
 * density (for many keys), and 1 without bits. */
START_TEST(fpr_at_is_what_new_builds)
{
    for (int layout = 0; layout < 2; layout++)
        for (double b = 1; b <= 30; b += 1.5) {
            kv_bloom *f = NULL;
            ck_assert_int_eq(kv_bloom_new((kv_bloom_layout)layout, MILLION, b, 1, &f), KV_OK);
            kv_bloom_info info;
            kv_bloom_stats(f, &info);
            double want = kv_bloom_expected_fpr((kv_bloom_layout)layout, info.bits, MILLION,
                                                info.k);
            kv_bloom_free(f);
            double got = kv_bloom_fpr_at((kv_bloom_layout)layout, b);
            ck_assert_msg(fabs(got - want) <= 0.01 * want, "layout %d, %.1f bits: %g vs %g",
                          layout, b, got, want);
        }
    ck_assert_double_eq(kv_bloom_fpr_at(KV_BLOOM_BLOCKED, 0), 1.0);
    ck_assert_double_eq(kv_bloom_fpr_at(KV_BLOOM_CLASSIC, -3), 1.0);
    ck_assert_double_eq(kv_bloom_fpr_at((kv_bloom_layout)7, 10), 1.0);
    ck_assert_double_eq(kv_bloom_fpr_at(KV_BLOOM_BLOCKED, NAN), 1.0);
}
END_TEST

/* On any tree shape, at the same memory, Monkey's expected false
 * positives per missing get are at most the uniform allocation's; equal
 * on a tree of one run. Shapes: 1 to 20 runs of 1 to 10^9 keys (log-
 * uniform, some empty), 0.5 to 31 bits per key. */
START_TEST(allocation_never_worse_than_uniform)
{
    kv_bloom_layout layout = (kv_bloom_layout)_i;
    uint64_t st = 0xA110C + (uint64_t)_i;
    int better = 0;
    for (int shape = 0; shape < 2000; shape++) {
        uint64_t keys[20];
        double bits[20], uni[20];
        size_t n = 1 + rng_next(&st) % 20;
        for (size_t i = 0; i < n; i++) {
            keys[i] = rng_next(&st) % 10 == 0 ? 0
                                               : (uint64_t)pow(10, (double)(rng_next(&st) % 9000) / 1000);
            uni[i] = 0;
        }
        double b = 0.5 + (double)(rng_next(&st) % 3050) / 100;
        for (size_t i = 0; i < n; i++)
            uni[i] = b;
        ck_assert_int_eq(kv_bloom_allocate(layout, keys, n, b, bits), KV_OK);
        double keysum = runs_memory(keys, uni, n) / b;
        double mem = runs_memory(keys, bits, n), want = b * keysum;
        ck_assert_msg(fabs(mem - want) <= 1e-9 * want + 1e-9, "shape %d: memory %.17g, want %.17g",
                      shape, mem, want);
        double fp = runs_fp(layout, keys, bits, n), fp_uni = runs_fp(layout, keys, uni, n);
        ck_assert_msg(fp <= fp_uni, "shape %d (%zu runs, %.2f bits): monkey %.17g > uniform %.17g",
                      shape, n, b, fp, fp_uni);
        better += fp < 0.99 * fp_uni;
        for (size_t i = 0; i < n; i++) {
            ck_assert(bits[i] >= 0 && bits[i] <= 1000);
            if (!keys[i])
                ck_assert_double_eq(bits[i], b); /* costs nothing: the average */
        }
    }
    /* and it really moves bits: most random shapes gain more than 1% */
    ck_assert_int_gt(better, 1000);
    /* one run: the uniform allocation itself */
    for (double b = 0.25; b < 40; b += 0.37) {
        uint64_t one = 123456789;
        double bits;
        ck_assert_int_eq(kv_bloom_allocate(layout, &one, 1, b, &bits), KV_OK);
        ck_assert_double_eq_tol(bits, b, 1e-12 * b);
        ck_assert_double_eq_tol(kv_bloom_fpr_at(layout, bits), kv_bloom_fpr_at(layout, b), 1e-15);
    }
}
END_TEST

/* The model's numbers: on five levels growing 10x, the ideal filter's
 * optimum has each level's FPR proportional to its keys, and the sum of
 * FPRs about a third of the uniform one's at 10 bits per key. */
START_TEST(allocation_follows_the_model)
{
    uint64_t keys[5] = {5000, 50000, 500000, 5000000, 50000000};
    double bits[5];
    for (int layout = 0; layout < 2; layout++) {
        ck_assert_int_eq(kv_bloom_allocate((kv_bloom_layout)layout, keys, 5, 10, bits), KV_OK);
        double uni[5] = {10, 10, 10, 10, 10};
        double ratio = runs_fp((kv_bloom_layout)layout, keys, bits, 5) /
                       runs_fp((kv_bloom_layout)layout, keys, uni, 5);
        if (getenv("KV_TEST_VERBOSE"))
            fprintf(stderr, "layout %d: bits %.2f %.2f %.2f %.2f %.2f, monkey/uniform %.3f\n",
                    layout, bits[0], bits[1], bits[2], bits[3], bits[4], ratio);
        ck_assert_double_lt(ratio, 0.45);
        ck_assert_double_gt(ratio, 0.25);
        for (int i = 0; i + 1 < 5; i++) {
            ck_assert_double_gt(bits[i], bits[i + 1]); /* smaller runs, more bits */
            /* p ~ n: each level's FPR about 10x the one above's (the grid
             * of 1/16 bit and whole k make it rough) */
            double r = kv_bloom_fpr_at((kv_bloom_layout)layout, bits[i + 1]) /
                       kv_bloom_fpr_at((kv_bloom_layout)layout, bits[i]);
            ck_assert_msg(r > 6 && r < 16, "layout %d, level %d: FPR ratio %.2f", layout, i, r);
        }
        /* Too little memory for every level: the largest gets no filter. */
        ck_assert_int_eq(kv_bloom_allocate((kv_bloom_layout)layout, keys, 5, 1, bits), KV_OK);
        ck_assert_double_eq(bits[4], 0);
        ck_assert_double_gt(bits[0], 1);
    }
}
END_TEST

START_TEST(allocate_rejects_invalid_arguments)
{
    uint64_t keys[2] = {10, 20};
    double bits[2] = {-1, -1};
    ck_assert_int_eq(kv_bloom_allocate((kv_bloom_layout)2, keys, 2, 10, bits), KV_EINVAL);
    ck_assert_int_eq(kv_bloom_allocate(KV_BLOOM_BLOCKED, keys, 2, -1, bits), KV_EINVAL);
    ck_assert_int_eq(kv_bloom_allocate(KV_BLOOM_BLOCKED, keys, 2, 1000.5, bits), KV_EINVAL);
    ck_assert_int_eq(kv_bloom_allocate(KV_BLOOM_BLOCKED, keys, 2, NAN, bits), KV_EINVAL);
    ck_assert_int_eq(kv_bloom_allocate(KV_BLOOM_BLOCKED, NULL, 2, 10, bits), KV_EINVAL);
    ck_assert_int_eq(kv_bloom_allocate(KV_BLOOM_BLOCKED, keys, 2, 10, NULL), KV_EINVAL);
    ck_assert_double_eq(bits[0], -1); /* untouched */
    ck_assert_int_eq(kv_bloom_allocate(KV_BLOOM_BLOCKED, NULL, 0, 10, NULL), KV_OK);
    /* 0 bits: no filters anywhere; 32 and more: uniform */
    ck_assert_int_eq(kv_bloom_allocate(KV_BLOOM_BLOCKED, keys, 2, 0, bits), KV_OK);
    ck_assert_double_eq(bits[0] + bits[1], 0);
    ck_assert_int_eq(kv_bloom_allocate(KV_BLOOM_CLASSIC, keys, 2, 40, bits), KV_OK);
    ck_assert_double_eq(bits[0], 40);
    ck_assert_double_eq(bits[1], 40);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("bloom");
    TCase *tc;

    tc = test_tcase(s, "no_false_negatives", 600, 0);
    tcase_add_loop_test(tc, no_false_negatives_blocked, 0, NOFN_CONFIGS);
    tcase_add_loop_test(tc, no_false_negatives_classic, 0, NOFN_CONFIGS);
    tcase_add_loop_test(tc, no_false_negatives_when_overfilled, 0, 2);
    tcase_add_test(tc, no_false_negatives_empty_key);
    tcase_add_test(tc, no_false_negatives_keys_with_nul_bytes);
    tcase_add_loop_test(tc, batch_agrees_with_single_queries, 0, 2);

    tc = test_tcase(s, "false_positive_rate", 900, 0);
    tcase_add_loop_test(tc, measured_fpr_within_10pct_of_expected, 0, FPR_CONFIGS);
    tcase_add_test(tc, fpr_at_10_bits_per_key_classic_is_at_most_0_90pct);
    tcase_add_test(tc, fpr_at_10_bits_per_key_blocked_is_at_most_1_05pct);

    tc = test_tcase(s, "stats", 600, 0);
    tcase_add_loop_test(tc, stats_count_every_add_exactly, 0, 2);
    tcase_add_loop_test(tc, stats_are_self_consistent, 0, 2);
    tcase_add_loop_test(tc, stats_estimated_keys_within_3pct_at_10_bits_per_key, 0, 2);
    tcase_add_loop_test(tc, stats_bits_set_is_popcount_of_encoded_bit_array, 0, 2);
    tcase_add_test(tc, stats_null_arguments_write_nothing);

    tc = test_tcase(s, "codec", 600, 0);
    tcase_add_loop_test(tc, decode_round_trip_keeps_every_answer, 0, 2);
    tcase_add_loop_test(tc, reencode_of_decoded_is_byte_identical, 0, 2);
    tcase_add_loop_test(tc, owned_adds_build_the_same_filter, 0, 2);
    tcase_add_loop_test(tc, partition_parts_never_share_a_block, 0, 2);
    tcase_add_test(tc, avx512_and_portable_code_agree_bit_for_bit);
    tcase_add_loop_test(tc, decode_rejects_every_truncation, 0, 2);
    tcase_add_loop_test(tc, decode_rejects_every_single_byte_flip, 0, 2);
    tcase_add_test(tc, decode_rejects_foreign_buffers);
    tcase_add_loop_test(tc, decode_rejects_inconsistent_fields_with_valid_checksum, 0, 2);
    tcase_add_test(tc, decode_and_encode_reject_null_arguments);

    tc = test_tcase(s, "concurrency", 900, 0);
    tcase_add_loop_test(tc, concurrent_adds_and_queries_lose_nothing, 0, 2);
    tcase_add_loop_test(tc, threads_adding_to_the_same_blocks_lose_no_bit, 0, 3);
    tcase_add_loop_test(tc, a_second_writer_takes_over_without_losing_a_bit, 0, 6);
    tcase_add_loop_test(tc, threads_adding_their_own_parts_build_the_same_filter, 0, 3);
    tcase_add_test(tc, stats_and_expected_fpr_are_thread_safe);

    tc = test_tcase(s, "sizing", 300, 0);
    tcase_add_test(tc, new_fpr_classic_matches_known_size);
    tcase_add_test(tc, new_classic_bits_and_k_follow_bits_per_key);
    tcase_add_test(tc, new_classic_k_follows_bits_per_key_for_tiny_n);
    tcase_add_test(tc, new_blocked_bits_whole_blocks_and_k_optimal);
    tcase_add_test(tc, new_fpr_blocked_reaches_target);
    tcase_add_test(tc, new_accepts_fractional_bits_per_key);

    tc = test_tcase(s, "expected_fpr", 300, 0);
    tcase_add_test(tc, expected_fpr_classic_matches_formula);
    tcase_add_test(tc, expected_fpr_blocked_matches_poisson_sum);
    tcase_add_test(tc, expected_fpr_blocked_slightly_above_classic);
    tcase_add_test(tc, expected_fpr_edge_cases);
    tcase_add_loop_test(tc, expected_fpr_is_a_probability, 0, 2);

    /* a hang comes back as a timeout here (generous for the sanitizers) */
    tc = test_tcase(s, "bounded_time", 60, 0);
    tcase_add_test(tc, expected_fpr_returns_for_any_arguments);
    tcase_add_test(tc, expected_fpr_blocked_exact_near_saturation);
    tcase_add_test(tc, new_returns_for_extreme_arguments);
    tcase_add_loop_test(tc, decode_forged_key_count_returns_promptly, 0, 2);

    tc = test_tcase(s, "monkey", 300, 0);
    tcase_add_test(tc, fpr_at_is_what_new_builds);
    tcase_add_loop_test(tc, allocation_never_worse_than_uniform, 0, 2);
    tcase_add_test(tc, allocation_follows_the_model);
    tcase_add_test(tc, allocate_rejects_invalid_arguments);

    tc = test_tcase(s, "invalid_arguments", 300, 0);
    tcase_add_test(tc, new_rejects_invalid_arguments);
    tcase_add_test(tc, new_fpr_rejects_invalid_arguments);
    tcase_add_test(tc, new_fpr_refuses_targets_the_keys_do_not_justify);
    tcase_add_test(tc, free_null_is_a_noop);
    tcase_add_test(tc, strerror_names_each_code_distinctly);

    tc = test_tcase(s, "hash", 300, 0);
    tcase_add_test(tc, hash_same_seed_gives_same_hash);
    tcase_add_test(tc, hash_different_seeds_give_different_hashes);
    tcase_add_test(tc, hash_is_xxh3_64_with_the_seed);
    tcase_add_test(tc, hash_covers_bytes_after_nul);

    return s;
}
