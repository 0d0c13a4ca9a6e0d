/* check_filter_kinds.c - the counting, scalable and rotating Bloom filters
 * (<kv/counting_bloom.h>, <kv/scalable_bloom.h>, <kv/rotating_bloom.h>)
 * against theory and their contracts.
 *
 * FPR tests: each kind at 1% and 0.1% targets, with three key shapes, is
 * queried with enough absent keys for about 2500 expected false positives,
 * so that the +-10% band around the filter's own expected FPR is 5 standard
 * deviations wide (a pass is no luck, and a fault of a few percent shows);
 * the expected FPR itself must be at most the target. No-false-negative
 * tests: counting after removals of other keys, under saturation and
 * against a multiset model; scalable after 1000x growth; rotating within
 * the window. Codec tests: round trips, every damaged byte and every
 * truncation, and forged fields behind a recomputed checksum. The
 * "concurrency" tcase (threads adding, removing, rotating and querying at
 * once) runs under ThreadSanitizer in CI (ctest -L concurrency).
 *
 * Set KV_TEST_VERBOSE=1 to print the measured and expected FPRs. */
#define _POSIX_C_SOURCE 200809L /* pthreads, setrlimit under -std=c11 */

#include <kv/counting_bloom.h>
#include <kv/rotating_bloom.h>
#include <kv/scalable_bloom.h>
#include <kv/bloom.h>

#include <check.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "../filter/bloom_impl.h" /* kv_bloom_blocked_exact_fpr */
#include "../filter/filter_format.h"
#include "fixture.h"

static uint64_t mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static int verbose(void)
{
    const char *v = getenv("KV_TEST_VERBOSE");
    return v && *v && strcmp(v, "0") != 0;
}

/* ---- keys ------------------------------------------------------------------ */

/* Key shapes: short sequential integers (8 bytes, little-endian i), 16
 * random bytes, and 40..47-byte keys that share a 30-byte prefix. Key i of
 * the present set and key i of the absent set never coincide: absent
 * integers start at 2^40, absent random keys come from another stream, and
 * absent long keys carry another prefix letter. */
enum shape { SHAPE_INT, SHAPE_RANDOM16, SHAPE_PREFIXED, SHAPE_COUNT };
static const char *const shape_name[SHAPE_COUNT] = {"int64", "random16", "prefix30+decimal"};
#define KEY_MAX 64

static size_t make_key(enum shape shape, int absent, uint64_t i, uint8_t *k)
{
    switch (shape) {
    case SHAPE_INT: {
        uint64_t v = i + (absent ? (uint64_t)1 << 40 : 0);
        for (unsigned b = 0; b < 8; b++)
            k[b] = (uint8_t)(v >> (8 * b));
        return 8;
    }
    case SHAPE_RANDOM16: {
        uint64_t a = mix64(i * 2 + (absent ? 0xABCDEF0123ull : 0)), b = mix64(a ^ 0x5555);
        memcpy(k, &a, 8);
        memcpy(k + 8, &b, 8);
        return 16;
    }
    default:
        return (size_t)snprintf((char *)k, KEY_MAX, "tenant-0042/region-eu-west/%c/user-%llu",
                                absent ? 'a' : 'p', (unsigned long long)i);
    }
}

/* ---- the three kinds behind one interface, for the shared tests ------------ */

struct kind {
    const char *name;
    int (*add)(void *f, const void *k, size_t n);
    int (*may)(const void *f, const void *k, size_t n);
    double (*expected)(const void *f);
    uint64_t (*count)(const void *f);
    int (*encode)(const void *f, void **buf, size_t *len);
    int (*decode)(const void *buf, size_t len, void **out);
    void (*free)(void *f);
};

static int c_add(void *f, const void *k, size_t n) { return kv_counting_bloom_add(f, k, n); }
static int c_may(const void *f, const void *k, size_t n) { return kv_counting_bloom_may_contain(f, k, n); }
static double c_exp(const void *f) { return kv_counting_bloom_expected_fpr(f); }
static uint64_t c_count(const void *f) { return kv_counting_bloom_count(f); }
static int c_enc(const void *f, void **b, size_t *l) { return kv_counting_bloom_encode(f, b, l); }
static int c_dec(const void *b, size_t l, void **o)
{
    kv_counting_bloom *f;
    int rc = kv_counting_bloom_decode(b, l, &f);
    *o = f;
    return rc;
}
static void c_free(void *f) { kv_counting_bloom_free(f); }

static int s_add(void *f, const void *k, size_t n) { return kv_scalable_bloom_add(f, k, n); }
static int s_may(const void *f, const void *k, size_t n) { return kv_scalable_bloom_may_contain(f, k, n); }
static double s_exp(const void *f) { return kv_scalable_bloom_expected_fpr(f); }
static uint64_t s_count(const void *f) { return kv_scalable_bloom_count(f); }
static int s_enc(const void *f, void **b, size_t *l) { return kv_scalable_bloom_encode(f, b, l); }
static int s_dec(const void *b, size_t l, void **o)
{
    kv_scalable_bloom *f;
    int rc = kv_scalable_bloom_decode(b, l, &f);
    *o = f;
    return rc;
}
static void s_free(void *f) { kv_scalable_bloom_free(f); }

static int r_add(void *f, const void *k, size_t n) { return kv_rotating_bloom_add(f, k, n); }
static int r_may(const void *f, const void *k, size_t n) { return kv_rotating_bloom_may_contain(f, k, n); }
static double r_exp(const void *f) { return kv_rotating_bloom_expected_fpr(f); }
static uint64_t r_count(const void *f) { return kv_rotating_bloom_count(f); }
static int r_enc(const void *f, void **b, size_t *l) { return kv_rotating_bloom_encode(f, b, l); }
static int r_dec(const void *b, size_t l, void **o)
{
    kv_rotating_bloom *f;
    int rc = kv_rotating_bloom_decode(b, l, &f);
    *o = f;
    return rc;
}
static void r_free(void *f) { kv_rotating_bloom_free(f); }

enum { COUNTING, SCALABLE, ROTATING, KINDS };
static const struct kind kinds[KINDS] = {
    {"counting", c_add, c_may, c_exp, c_count, c_enc, c_dec, c_free},
    {"scalable", s_add, s_may, s_exp, s_count, s_enc, s_dec, s_free},
    {"rotating", r_add, r_may, r_exp, r_count, r_enc, r_dec, r_free},
};

/* A new filter of kind `kind` for about n keys at target p:
 * counting for n keys; scalable from n / 10 (it grows 10x, 4 stages:
 * stage 0 keeps enough blocks that one filter's FPR stays near the
 * expectation; scalable_grows_1000x_... covers growth);
 * rotating of 4 generations of n / 4 (the window holds n). */
static void *new_filter(int kind, uint64_t n, double p, uint64_t seed)
{
    void *f = NULL;
    int rc;
    if (kind == COUNTING) {
        kv_counting_bloom *c;
        rc = kv_counting_bloom_new(n, p, seed, &c);
        f = c;
    } else if (kind == SCALABLE) {
        kv_scalable_bloom *s;
        rc = kv_scalable_bloom_new(n / 10, p, seed, &s);
        f = s;
    } else {
        kv_rotating_bloom *r;
        rc = kv_rotating_bloom_new(n / 4, 4, p, seed, &r);
        f = r;
    }
    ck_assert_int_eq(rc, KV_OK);
    ck_assert_ptr_nonnull(f);
    return f;
}

/* Adds keys [from, to) of a shape; asserts every add is KV_OK. */
static void add_range(int kind, void *f, enum shape shape, uint64_t from, uint64_t to)
{
    uint8_t k[KEY_MAX];
    uint64_t bad = 0;
    for (uint64_t i = from; i < to; i++) {
        size_t n = make_key(shape, 0, i, k);
        bad += kinds[kind].add(f, k, n) != KV_OK;
    }
    ck_assert_uint_eq(bad, 0);
}

/* How many of present keys [from, to) the filter misses. */
static uint64_t misses(int kind, const void *f, enum shape shape, uint64_t from, uint64_t to)
{
    uint8_t k[KEY_MAX];
    uint64_t miss = 0;
    for (uint64_t i = from; i < to; i++) {
        size_t n = make_key(shape, 0, i, k);
        miss += !kinds[kind].may(f, k, n);
    }
    return miss;
}

/* The fraction of `queries` absent keys the filter answers "maybe" for. */
static double measured_fpr(int kind, const void *f, enum shape shape, uint64_t queries)
{
    uint8_t k[KEY_MAX];
    uint64_t hits = 0;
    for (uint64_t i = 0; i < queries; i++) {
        size_t n = make_key(shape, 1, i, k);
        hits += (uint64_t)kinds[kind].may(f, k, n);
    }
    return (double)hits / (double)queries;
}

/* Absent queries for ~2500 expected false positives (at least 200,000). */
static uint64_t queries_for(double expected)
{
    double q = 2500.0 / expected;
    if (!(q >= 200000))
        q = 200000;
    if (q > 6e6)
        q = 6e6;
    return (uint64_t)q;
}

/* Checks a measured FPR against the filter's expectation and the target. */
static void check_fpr(const char *what, double got, double want, double target, uint64_t queries)
{
    if (verbose())
        fprintf(stderr, "%-40s target=%-6g expected=%.6f measured=%.6f ratio=%.4f queries=%llu\n",
                what, target, want, got, got / want, (unsigned long long)queries);
    ck_assert_msg(want <= target, "%s: expected FPR %.6g above the target %g", what, want, target);
    ck_assert_msg(fabs(got - want) <= 0.10 * want,
                  "%s: measured FPR %.6f over %llu absent keys, expected %.6f (+-10%%)", what, got,
                  (unsigned long long)queries, want);
}

/* ---- FPR of each kind against theory and target ----------------------------- */

#define FPR_KEYS 200000u

/* _i: kind (3) x target (2) x shape (3). */
START_TEST(fpr_matches_theory_and_meets_target)
{
    int kind = _i % KINDS;
    double target = (_i / KINDS) % 2 ? 0.001 : 0.01;
    enum shape shape = (enum shape)(_i / (2 * KINDS));
    void *f = new_filter(kind, FPR_KEYS, target, 0xF00D + (uint64_t)_i);
    add_range(kind, f, shape, 0, FPR_KEYS);
    ck_assert_uint_eq(kinds[kind].count(f), FPR_KEYS);
    ck_assert_uint_eq(misses(kind, f, shape, 0, FPR_KEYS), 0);
    double want = kinds[kind].expected(f);
    uint64_t q = queries_for(want);
    double got = measured_fpr(kind, f, shape, q);
    char what[96];
    snprintf(what, sizeof what, "%s %s", kinds[kind].name, shape_name[shape]);
    check_fpr(what, got, want, target, q);
    kinds[kind].free(f);
}
END_TEST

/* ---- counting ---------------------------------------------------------------- */

START_TEST(counting_removing_b_keeps_all_of_a)
{
    const uint64_t n = 100000;
    kv_counting_bloom *f;
    ck_assert_int_eq(kv_counting_bloom_new(2 * n, 0.01, 7, &f), KV_OK);
    add_range(COUNTING, f, SHAPE_RANDOM16, 0, 2 * n); /* A = [0, n), B = [n, 2n) */
    uint8_t k[KEY_MAX];
    uint64_t bad = 0;
    for (uint64_t i = n; i < 2 * n; i++) {
        size_t len = make_key(SHAPE_RANDOM16, 0, i, k);
        bad += kv_counting_bloom_remove(f, k, len) != KV_OK;
    }
    ck_assert_uint_eq(bad, 0);
    ck_assert_uint_eq(kv_counting_bloom_count(f), n);
    ck_assert_uint_eq(misses(COUNTING, f, SHAPE_RANDOM16, 0, n), 0);
    /* With B gone the filter is as good as one that only ever held A. */
    double want = kv_counting_bloom_expected_fpr(f);
    uint64_t q = queries_for(want);
    check_fpr("counting after removing half", measured_fpr(COUNTING, f, SHAPE_RANDOM16, q), want,
              0.01, q);
    /* B's keys are now mostly gone: at most a few percent still answer. */
    ck_assert_uint_gt(misses(COUNTING, f, SHAPE_RANDOM16, n, 2 * n), n * 95 / 100);
    kv_counting_bloom_free(f);
}
END_TEST

START_TEST(counting_remove_of_absent_key_is_notfound_and_changes_nothing)
{
    kv_counting_bloom *f;
    ck_assert_int_eq(kv_counting_bloom_new(10000, 0.01, 3, &f), KV_OK);
    add_range(COUNTING, f, SHAPE_INT, 0, 10000);
    void *before, *after;
    size_t blen, alen;
    ck_assert_int_eq(kv_counting_bloom_encode(f, &before, &blen), KV_OK);
    uint8_t k[KEY_MAX];
    unsigned tried = 0;
    for (uint64_t i = 0; tried < 1000; i++) {
        size_t len = make_key(SHAPE_INT, 1, i, k);
        if (kv_counting_bloom_may_contain(f, k, len))
            continue; /* a false positive: it could be in the filter */
        ck_assert_int_eq(kv_counting_bloom_remove(f, k, len), KV_NOTFOUND);
        tried++;
    }
    ck_assert_int_eq(kv_counting_bloom_encode(f, &after, &alen), KV_OK);
    ck_assert_uint_eq(alen, blen);
    ck_assert_msg(memcmp(before, after, blen) == 0, "a refused remove changed the filter");
    ck_assert_uint_eq(kv_counting_bloom_count(f), 10000);
    kv_free(before);
    kv_free(after);
    kv_counting_bloom_free(f);
}
END_TEST

START_TEST(counting_saturated_counters_never_give_false_negatives)
{
    kv_counting_bloom *f;
    ck_assert_int_eq(kv_counting_bloom_new(1000, 0.01, 11, &f), KV_OK);
    /* One key 20 times: its counters stop at 15, and 20 removes leave it
     * found (a saturated counter is never decremented). */
    for (int i = 0; i < 20; i++)
        ck_assert_int_eq(kv_counting_bloom_add(f, "hot", 3), KV_OK);
    for (int i = 0; i < 20; i++)
        ck_assert_int_eq(kv_counting_bloom_remove(f, "hot", 3), KV_OK);
    ck_assert_int_eq(kv_counting_bloom_may_contain(f, "hot", 3), 1);
    kv_counting_bloom_free(f);

    /* A filter of one block (128 counters) holding 400 keys: most counters
     * saturate. Removing half the keys must leave every other one found. */
    ck_assert_int_eq(kv_counting_bloom_new(1, 0.5, 12, &f), KV_OK);
    ck_assert_uint_eq(kv_counting_bloom_bytes(f), 64);
    add_range(COUNTING, f, SHAPE_INT, 0, 400);
    uint8_t k[KEY_MAX];
    for (uint64_t i = 0; i < 400; i += 2) {
        size_t len = make_key(SHAPE_INT, 0, i, k);
        ck_assert_int_eq(kv_counting_bloom_remove(f, k, len), KV_OK);
    }
    for (uint64_t i = 1; i < 400; i += 2) {
        size_t len = make_key(SHAPE_INT, 0, i, k);
        ck_assert_int_eq(kv_counting_bloom_may_contain(f, k, len), 1);
    }
    kv_counting_bloom_free(f);
}
END_TEST

/* Random adds and removes on a small filter (heavy sharing, some
 * saturation) against a multiset: every key the model holds is found,
 * every remove of a held key succeeds, and the count is the model's. */
START_TEST(counting_random_operations_match_a_multiset)
{
    enum { KEYS = 3000, OPS = 200000 };
    static unsigned model[KEYS];
    memset(model, 0, sizeof model);
    kv_counting_bloom *f;
    ck_assert_int_eq(kv_counting_bloom_new(300, 0.05, 99, &f), KV_OK);
    uint64_t state = 1, held = 0, bad = 0;
    uint8_t k[KEY_MAX];
    for (unsigned op = 0; op < OPS; op++) {
        state = mix64(state);
        uint64_t i = (state >> 8) % KEYS;
        size_t len = make_key(SHAPE_PREFIXED, 0, i, k);
        if ((state & 3) != 0 || model[i] == 0) { /* add, or a remove of a held key */
            if (model[i] == 0 || (state & 1)) {
                bad += kv_counting_bloom_add(f, k, len) != KV_OK;
                model[i]++;
                held++;
                continue;
            }
        }
        bad += kv_counting_bloom_remove(f, k, len) != KV_OK;
        model[i]--;
        held--;
        if (held > 600) /* keep the filter from filling up: drain some keys */
            for (uint64_t j = 0; j < KEYS && held > 300; j++)
                while (model[j] && held > 300) {
                    size_t l2 = make_key(SHAPE_PREFIXED, 0, j, k);
                    bad += kv_counting_bloom_remove(f, k, l2) != KV_OK;
                    model[j]--;
                    held--;
                }
        if (op % 1000 == 0)
            for (uint64_t j = 0; j < KEYS; j++)
                if (model[j]) {
                    size_t l2 = make_key(SHAPE_PREFIXED, 0, j, k);
                    bad += !kv_counting_bloom_may_contain(f, k, l2);
                }
    }
    ck_assert_uint_eq(bad, 0);
    ck_assert_uint_eq(kv_counting_bloom_count(f), held);
    kv_counting_bloom_free(f);
}
END_TEST

START_TEST(counting_expected_fpr_follows_the_count)
{
    kv_counting_bloom *f;
    ck_assert_int_eq(kv_counting_bloom_new(50000, 0.01, 5, &f), KV_OK);
    ck_assert(kv_counting_bloom_expected_fpr(f) == 0.0);
    double prev = 0;
    for (uint64_t step = 1; step <= 5; step++) {
        add_range(COUNTING, f, SHAPE_INT, (step - 1) * 10000, step * 10000);
        double e = kv_counting_bloom_expected_fpr(f);
        ck_assert_msg(e > prev && e < 1, "expected FPR %g after %llu keys", e,
                      (unsigned long long)step * 10000);
        prev = e;
    }
    ck_assert_msg(prev <= 0.01 && prev > 0.005, "at its expected keys: %g", prev);
    kv_counting_bloom_free(f);
}
END_TEST

START_TEST(counting_rejects_invalid_arguments)
{
    kv_counting_bloom *f = (kv_counting_bloom *)&f;
    ck_assert_int_eq(kv_counting_bloom_new(10, 0.01, 0, NULL), KV_EINVAL);
    static const double bad_fpr[] = {0, 1, -0.5, 2, NAN, 1e-300};
    for (unsigned i = 0; i < sizeof bad_fpr / sizeof bad_fpr[0]; i++) {
        ck_assert_int_eq(kv_counting_bloom_new(10, bad_fpr[i], 0, &f), KV_EINVAL);
        ck_assert_ptr_null(f);
        ck_assert_msg(strstr(kv_error_text(), "kv_counting_bloom_new") != NULL, "text: %s",
                      kv_error_text());
    }
    ck_assert_int_eq(kv_counting_bloom_new(UINT64_MAX, 0.01, 0, &f), KV_EINVAL);
    ck_assert_int_eq(kv_counting_bloom_add(NULL, "a", 1), KV_EINVAL);
    ck_assert_int_eq(kv_counting_bloom_remove(NULL, "a", 1), KV_EINVAL);
    ck_assert_int_eq(kv_counting_bloom_may_contain(NULL, "a", 1), 0);
    ck_assert_int_eq(kv_counting_bloom_new(10, 0.01, 0, &f), KV_OK);
    ck_assert_int_eq(kv_counting_bloom_add(f, NULL, 1), KV_EINVAL);
    ck_assert_int_eq(kv_counting_bloom_remove(f, NULL, 1), KV_EINVAL);
    ck_assert_int_eq(kv_counting_bloom_may_contain(f, NULL, 1), 0);
    ck_assert_uint_eq(kv_counting_bloom_count(f), 0);
    /* The empty key, as NULL with length 0, is a key like any other. */
    ck_assert_int_eq(kv_counting_bloom_add(f, NULL, 0), KV_OK);
    ck_assert_int_eq(kv_counting_bloom_may_contain(f, "", 0), 1);
    ck_assert_int_eq(kv_counting_bloom_remove(f, "", 0), KV_OK);
    ck_assert_uint_eq(kv_counting_bloom_count(NULL), 0);
    ck_assert_uint_eq(kv_counting_bloom_bytes(NULL), 0);
    ck_assert(kv_counting_bloom_expected_fpr(NULL) == 1.0);
    kv_counting_bloom_free(f);
    kv_counting_bloom_free(NULL);
}
END_TEST

/* ---- scalable ---------------------------------------------------------------- */

/* From 1000 keys to 1,000,000: every key found at every size, and the
 * measured FPR below the target at 10x, 100x and 1000x. */
START_TEST(scalable_grows_1000x_without_false_negatives_within_fpr)
{
    double target = _i ? 0.001 : 0.01;
    kv_scalable_bloom *f;
    ck_assert_int_eq(kv_scalable_bloom_new(1000, target, 21, &f), KV_OK);
    ck_assert_uint_eq(kv_scalable_bloom_stages(f), 1);
    uint64_t done = 0;
    for (uint64_t upto = 10000; upto <= 1000000; upto *= 10) {
        add_range(SCALABLE, f, SHAPE_RANDOM16, done, upto);
        done = upto;
        ck_assert_uint_eq(kv_scalable_bloom_count(f), done);
        ck_assert_uint_eq(misses(SCALABLE, f, SHAPE_RANDOM16, 0, done), 0);
        double want = kv_scalable_bloom_expected_fpr(f);
        uint64_t q = queries_for(want);
        double got = measured_fpr(SCALABLE, f, SHAPE_RANDOM16, q);
        if (verbose())
            fprintf(stderr, "scalable at %llux, %u stages, target %g: expected %.6f measured "
                            "%.6f over %llu queries\n", (unsigned long long)(done / 1000),
                    kv_scalable_bloom_stages(f), target, want, got, (unsigned long long)q);
        /* The first stages are small (stage 0: 1000 keys in a few dozen
         * blocks), so this one filter's FPR may stray from the expectation
         * over all filters by more than query noise; the contract is the
         * target, which the expectation keeps well below. */
        ck_assert_msg(want <= 0.7 * target, "expected FPR %g, target %g", want, target);
        ck_assert_msg(got <= target, "at %llux: measured FPR %g above the target %g",
                      (unsigned long long)(done / 1000), got, target);
    }
    /* 1000 + 2000 + ... + 512,000 = 1,023,000 >= 1,000,000: ten stages. */
    ck_assert_uint_eq(kv_scalable_bloom_stages(f), 10);
    if (verbose())
        fprintf(stderr, "scalable 1000x at %g: %.2f bits per key\n", target,
                8.0 * (double)kv_scalable_bloom_bytes(f) / 1e6);
    kv_scalable_bloom_free(f);
}
END_TEST

START_TEST(scalable_stages_fill_in_order)
{
    kv_scalable_bloom *f;
    ck_assert_int_eq(kv_scalable_bloom_new(100, 0.01, 1, &f), KV_OK);
    add_range(SCALABLE, f, SHAPE_INT, 0, 100);
    ck_assert_uint_eq(kv_scalable_bloom_stages(f), 1); /* full, but no need to grow yet */
    add_range(SCALABLE, f, SHAPE_INT, 100, 101);
    ck_assert_uint_eq(kv_scalable_bloom_stages(f), 2);
    add_range(SCALABLE, f, SHAPE_INT, 101, 300);
    ck_assert_uint_eq(kv_scalable_bloom_stages(f), 2);
    add_range(SCALABLE, f, SHAPE_INT, 300, 301);
    ck_assert_uint_eq(kv_scalable_bloom_stages(f), 3);
    ck_assert_uint_eq(misses(SCALABLE, f, SHAPE_INT, 0, 301), 0);
    kv_scalable_bloom_free(f);
}
END_TEST

/* An add that needs a stage the process cannot allocate gets KV_ENOMEM and
 * changes nothing; the filter keeps answering. The address space is
 * limited to make the allocation fail, which the sanitizers' allocators
 * answer with an abort, not NULL: plain builds only. */
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define TEST_ENOMEM 1
START_TEST(scalable_add_that_cannot_grow_is_enomem)
{
    kv_scalable_bloom *f;
    /* fpr 1e-12: ~60 bits per key, so that 16 MiB fill after ~2M keys. */
    ck_assert_int_eq(kv_scalable_bloom_new((uint64_t)1 << 14, 1e-12, 1, &f), KV_OK);
    /* The address space this process has now, plus 16 MiB. */
    long pages = 0;
    FILE *statm = fopen("/proc/self/statm", "r");
    ck_assert_ptr_nonnull(statm);
    ck_assert_int_eq(fscanf(statm, "%ld", &pages), 1);
    fclose(statm);
    struct rlimit old;
    ck_assert_int_eq(getrlimit(RLIMIT_AS, &old), 0);
    struct rlimit lim = {.rlim_cur = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + (16u << 20),
                         .rlim_max = old.rlim_max};
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &lim), 0);
    uint8_t k[KEY_MAX];
    uint64_t i = 0;
    int rc = KV_OK;
    for (; rc == KV_OK && i < ((uint64_t)1 << 34); i++) {
        size_t len = make_key(SHAPE_INT, 0, i, k);
        rc = kv_scalable_bloom_add(f, k, len);
    }
    ck_assert_int_eq(rc, KV_ENOMEM);
    ck_assert_msg(strstr(kv_error_text(), "kv_scalable_bloom") != NULL, "text: %s",
                  kv_error_text());
    uint64_t added = i - 1;
    ck_assert_uint_eq(kv_scalable_bloom_count(f), added);
    unsigned stages = kv_scalable_bloom_stages(f);
    size_t len = make_key(SHAPE_INT, 0, i - 1, k);
    ck_assert_int_eq(kv_scalable_bloom_add(f, k, len), KV_ENOMEM); /* and again */
    ck_assert_uint_eq(kv_scalable_bloom_stages(f), stages);
    ck_assert_uint_eq(kv_scalable_bloom_count(f), added);
    for (uint64_t j = 0; j < added; j += 9973) {
        len = make_key(SHAPE_INT, 0, j, k);
        ck_assert_int_eq(kv_scalable_bloom_may_contain(f, k, len), 1);
    }
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &old), 0);
    kv_scalable_bloom_free(f);
}
END_TEST
#endif

START_TEST(scalable_rejects_invalid_arguments)
{
    kv_scalable_bloom *f = (kv_scalable_bloom *)&f;
    ck_assert_int_eq(kv_scalable_bloom_new(10, 0.01, 0, NULL), KV_EINVAL);
    ck_assert_int_eq(kv_scalable_bloom_new(0, 0.01, 0, &f), KV_EINVAL);
    ck_assert_ptr_null(f);
    ck_assert_int_eq(kv_scalable_bloom_new(10, 0, 0, &f), KV_EINVAL);
    ck_assert_int_eq(kv_scalable_bloom_new(10, 1, 0, &f), KV_EINVAL);
    ck_assert_int_eq(kv_scalable_bloom_new(10, NAN, 0, &f), KV_EINVAL);
    ck_assert_int_eq(kv_scalable_bloom_new((uint64_t)1 << 50, 0.01, 0, &f), KV_EINVAL);
    ck_assert_msg(strstr(kv_error_text(), "MAX_BITS") != NULL, "text: %s", kv_error_text());
    ck_assert_int_eq(kv_scalable_bloom_add(NULL, "a", 1), KV_EINVAL);
    ck_assert_int_eq(kv_scalable_bloom_may_contain(NULL, "a", 1), 0);
    ck_assert_int_eq(kv_scalable_bloom_new(10, 0.01, 0, &f), KV_OK);
    ck_assert_int_eq(kv_scalable_bloom_add(f, NULL, 2), KV_EINVAL);
    ck_assert_int_eq(kv_scalable_bloom_may_contain(f, NULL, 2), 0);
    ck_assert_int_eq(kv_scalable_bloom_add(f, NULL, 0), KV_OK);
    ck_assert_int_eq(kv_scalable_bloom_may_contain(f, "", 0), 1);
    ck_assert_uint_eq(kv_scalable_bloom_count(NULL), 0);
    ck_assert_uint_eq(kv_scalable_bloom_stages(NULL), 0);
    ck_assert_uint_eq(kv_scalable_bloom_bytes(NULL), 0);
    ck_assert(kv_scalable_bloom_expected_fpr(NULL) == 1.0);
    kv_scalable_bloom_free(f);
    kv_scalable_bloom_free(NULL);
}
END_TEST

/* ---- rotating ---------------------------------------------------------------- */

/* Keys stream through a window of G generations of P keys, rotated by
 * add: after each generation, every key of the last G generations is
 * found; the keys older than the window answer at the FPR (they fade). */
START_TEST(rotating_window_keeps_recent_keys_and_drops_old_ones)
{
    const uint64_t P = 20000;
    const unsigned G = 4;
    double target = _i ? 0.001 : 0.01;
    kv_rotating_bloom *f;
    ck_assert_int_eq(kv_rotating_bloom_new(P, G, target, 31, &f), KV_OK);
    for (uint64_t gen = 0; gen < 3 * G; gen++) {
        add_range(ROTATING, f, SHAPE_INT, gen * P, (gen + 1) * P);
        ck_assert_uint_eq(kv_rotating_bloom_rotations(f), gen);
        uint64_t from = gen + 1 >= G ? (gen + 1 - G) * P : 0;
        ck_assert_uint_eq(misses(ROTATING, f, SHAPE_INT, from, (gen + 1) * P), 0);
        ck_assert_uint_eq(kv_rotating_bloom_count(f), (gen + 1) * P - from);
    }
    /* The window holds [8P, 12P). Keys [0, 8P) are older: as absent keys. */
    double want = kv_rotating_bloom_expected_fpr(f);
    uint64_t old = 8 * P, hits = old - misses(ROTATING, f, SHAPE_INT, 0, old);
    double got = (double)hits / (double)old;
    if (verbose())
        fprintf(stderr, "rotating old keys at %g: measured %.6f expected %.6f (%llu keys)\n",
                target, got, want, (unsigned long long)old);
    ck_assert_msg(want <= target, "expected %g above target %g", want, target);
    /* 160,000 old keys: ~1600 (1%) or ~160 (0.1%) expected answers; 5
     * standard deviations around it. */
    double sd = sqrt(want * (double)old);
    ck_assert_msg(fabs((double)hits - want * (double)old) <= 5 * sd + 1,
                  "old keys: %llu answer, expected %.1f", (unsigned long long)hits,
                  want * (double)old);
    kv_rotating_bloom_free(f);
}
END_TEST

/* rotate by hand: a key stays for G - 1 rotations and is gone after G. */
START_TEST(rotating_by_hand_keeps_a_key_for_its_window)
{
    const unsigned G = 3;
    kv_rotating_bloom *f;
    ck_assert_int_eq(kv_rotating_bloom_new(1000, G, 0.01, 8, &f), KV_OK);
    add_range(ROTATING, f, SHAPE_PREFIXED, 0, 1000);
    for (unsigned r = 1; r < G; r++) {
        ck_assert_int_eq(kv_rotating_bloom_rotate(f), KV_OK);
        ck_assert_uint_eq(misses(ROTATING, f, SHAPE_PREFIXED, 0, 1000), 0);
        ck_assert_uint_eq(kv_rotating_bloom_count(f), 1000);
    }
    ck_assert_int_eq(kv_rotating_bloom_rotate(f), KV_OK);
    ck_assert_uint_eq(kv_rotating_bloom_count(f), 0);
    /* An empty filter: nothing is found. */
    ck_assert_uint_eq(misses(ROTATING, f, SHAPE_PREFIXED, 0, 1000), 1000);
    ck_assert_uint_eq(kv_rotating_bloom_rotations(f), G);
    kv_rotating_bloom_free(f);
}
END_TEST

/* The exact expected FPR of the blocked layout, which sizes the scalable
 * and rotating filters, against values computed independently (Python,
 * double precision: the occupancy laws by direct recurrence and the
 * all-bits-set chance by inclusion-exclusion), and never below the closed
 * form, which treats a query's probes as independent. */
START_TEST(exact_blocked_fpr_matches_an_independent_computation)
{
    static const struct {
        uint64_t m, n;
        unsigned k;
        double want;
    } cases[] = {
        {10000 * 512, 512000, 7, 0.009686048583528483},       /* 10 bits per key */
        {10000 * 512, 262564, 12, 0.0002413509134068741},      /* 19.5 bits per key */
    };
    for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double got = kv_bloom_blocked_exact_fpr(cases[i].m, cases[i].n, cases[i].k);
        ck_assert_msg(fabs(got - cases[i].want) <= 2e-4 * cases[i].want,
                      "m=%llu n=%llu k=%u: %.10g, want %.10g", (unsigned long long)cases[i].m,
                      (unsigned long long)cases[i].n, cases[i].k, got, cases[i].want);
    }
    for (unsigned k = 2; k <= KV_BLOOM_MAX_K; k++)
        for (uint64_t n = 1000; n <= 1000000; n *= 10) {
            double e = kv_bloom_blocked_exact_fpr(10000 * 512, n, k);
            double c = kv_bloom_expected_fpr(KV_BLOOM_BLOCKED, 10000 * 512, n, k);
            ck_assert_msg(e >= c * (1 - 1e-9) && e <= 1, "k=%u n=%llu: exact %g, closed form %g",
                          k, (unsigned long long)n, e, c);
        }
    ck_assert(kv_bloom_blocked_exact_fpr(512, 0, 7) == 0.0);
    ck_assert(kv_bloom_blocked_exact_fpr(0, 10, 7) == 1.0);
}
END_TEST

START_TEST(rotating_rejects_invalid_arguments)
{
    kv_rotating_bloom *f = (kv_rotating_bloom *)&f;
    ck_assert_int_eq(kv_rotating_bloom_new(10, 2, 0.01, 0, NULL), KV_EINVAL);
    ck_assert_int_eq(kv_rotating_bloom_new(0, 2, 0.01, 0, &f), KV_EINVAL);
    ck_assert_ptr_null(f);
    ck_assert_int_eq(kv_rotating_bloom_new(10, 0, 0.01, 0, &f), KV_EINVAL);
    ck_assert_int_eq(kv_rotating_bloom_new(10, 65, 0.01, 0, &f), KV_EINVAL);
    ck_assert_int_eq(kv_rotating_bloom_new(10, 2, 0, 0, &f), KV_EINVAL);
    ck_assert_int_eq(kv_rotating_bloom_new(10, 2, 1, 0, &f), KV_EINVAL);
    ck_assert_int_eq(kv_rotating_bloom_new((uint64_t)1 << 40, 64, 0.01, 0, &f), KV_EINVAL);
    ck_assert_msg(strstr(kv_error_text(), "kv_rotating_bloom_new") != NULL, "text: %s",
                  kv_error_text());
    ck_assert_int_eq(kv_rotating_bloom_add(NULL, "a", 1), KV_EINVAL);
    ck_assert_int_eq(kv_rotating_bloom_rotate(NULL), KV_EINVAL);
    ck_assert_int_eq(kv_rotating_bloom_may_contain(NULL, "a", 1), 0);
    ck_assert_int_eq(kv_rotating_bloom_new(10, 1, 0.01, 0, &f), KV_OK);
    ck_assert_int_eq(kv_rotating_bloom_add(f, NULL, 3), KV_EINVAL);
    ck_assert_int_eq(kv_rotating_bloom_may_contain(f, NULL, 3), 0);
    ck_assert_int_eq(kv_rotating_bloom_add(f, NULL, 0), KV_OK);
    ck_assert_int_eq(kv_rotating_bloom_may_contain(f, "", 0), 1);
    ck_assert_uint_eq(kv_rotating_bloom_count(NULL), 0);
    ck_assert_uint_eq(kv_rotating_bloom_rotations(NULL), 0);
    ck_assert_uint_eq(kv_rotating_bloom_bytes(NULL), 0);
    ck_assert(kv_rotating_bloom_expected_fpr(NULL) == 1.0);
    kv_rotating_bloom_free(f);
    kv_rotating_bloom_free(NULL);
}
END_TEST

/* ---- codecs ------------------------------------------------------------------ */

/* A small filter of each kind with some keys, some removed or rotated. */
static void *small_filter(int kind)
{
    void *f;
    if (kind == COUNTING) {
        kv_counting_bloom *c;
        ck_assert_int_eq(kv_counting_bloom_new(60, 0.01, 0x1234, &c), KV_OK);
        f = c;
        add_range(kind, f, SHAPE_INT, 0, 50);
        uint8_t k[KEY_MAX];
        size_t len = make_key(SHAPE_INT, 0, 3, k);
        ck_assert_int_eq(kv_counting_bloom_remove(c, k, len), KV_OK);
        ck_assert_int_eq(kv_counting_bloom_add(c, k, len), KV_OK);
    } else if (kind == SCALABLE) {
        kv_scalable_bloom *s;
        ck_assert_int_eq(kv_scalable_bloom_new(10, 0.01, 0x1234, &s), KV_OK);
        f = s;
        add_range(kind, f, SHAPE_INT, 0, 50); /* 10 + 20 + 40: three stages */
        ck_assert_uint_eq(kv_scalable_bloom_stages(s), 3);
    } else {
        kv_rotating_bloom *r;
        ck_assert_int_eq(kv_rotating_bloom_new(20, 3, 0.01, 0x1234, &r), KV_OK);
        f = r;
        add_range(kind, f, SHAPE_INT, 0, 50); /* two rotations by add */
        ck_assert_int_eq(kv_rotating_bloom_rotate(r), KV_OK);
        add_range(kind, f, SHAPE_INT, 50, 55);
    }
    return f;
}

START_TEST(codec_round_trip_keeps_every_answer)
{
    int kind = _i;
    const struct kind *K = &kinds[kind];
    void *f = new_filter(kind, 20000, 0.01, 77);
    add_range(kind, f, SHAPE_PREFIXED, 0, 20000);
    void *buf, *buf2;
    size_t len, len2;
    ck_assert_int_eq(K->encode(f, &buf, &len), KV_OK);
    void *g;
    ck_assert_int_eq(K->decode(buf, len, &g), KV_OK);
    ck_assert_uint_eq(K->count(g), K->count(f));
    ck_assert(K->expected(g) == K->expected(f));
    uint8_t k[KEY_MAX];
    uint64_t differ = 0;
    for (uint64_t i = 0; i < 40000; i++) {
        size_t n = make_key(SHAPE_PREFIXED, (int)(i & 1), i / 2, k);
        differ += K->may(f, k, n) != K->may(g, k, n);
    }
    ck_assert_uint_eq(differ, 0);
    ck_assert_int_eq(K->encode(g, &buf2, &len2), KV_OK);
    ck_assert_uint_eq(len2, len);
    ck_assert_msg(memcmp(buf, buf2, len) == 0, "%s: decode then encode changed bytes", K->name);
    /* The decoded filter goes on working: adds, and for the kinds that
     * have them, removes and rotations. */
    if (kind == ROTATING)
        ck_assert_uint_eq(kv_rotating_bloom_rotations(g), kv_rotating_bloom_rotations(f));
    add_range(kind, g, SHAPE_INT, 0, 1000);
    ck_assert_uint_eq(misses(kind, g, SHAPE_INT, 0, 1000), 0);
    if (kind == COUNTING) {
        size_t n = make_key(SHAPE_INT, 0, 5, k);
        ck_assert_int_eq(kv_counting_bloom_remove(g, k, n), KV_OK);
    }
    kv_free(buf);
    kv_free(buf2);
    K->free(g);
    K->free(f);
}
END_TEST

/* Every single-byte change (three different values at each offset) and
 * every truncation of a small filter's encoding is KV_ECORRUPT. */
START_TEST(codec_rejects_every_damaged_byte_and_truncation)
{
    int kind = _i;
    const struct kind *K = &kinds[kind];
    void *f = small_filter(kind);
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(K->encode(f, (void **)&buf, &len), KV_OK);
    uint8_t *copy = malloc(len);
    ck_assert_ptr_nonnull(copy);
    uint64_t accepted = 0;
    for (size_t at = 0; at < len; at++)
        for (unsigned v = 0; v < 3; v++) {
            memcpy(copy, buf, len);
            copy[at] ^= (uint8_t)(v == 0 ? 0x01 : v == 1 ? 0x80 : 0xFF);
            void *g = (void *)&g;
            int rc = K->decode(copy, len, &g);
            if (rc != KV_ECORRUPT || g != NULL) {
                accepted++;
                if (rc == KV_OK)
                    K->free(g);
            }
        }
    ck_assert_msg(accepted == 0, "%s: %llu damaged encodings not rejected", K->name,
                  (unsigned long long)accepted);
    for (size_t cut = 0; cut < len; cut++) {
        void *g = (void *)&g;
        ck_assert_int_eq(K->decode(buf, cut, &g), KV_ECORRUPT);
        ck_assert_ptr_null(g);
    }
    /* One byte too many. */
    uint8_t *longer = malloc(len + 1);
    memcpy(longer, buf, len);
    longer[len] = 0;
    void *g;
    ck_assert_int_eq(K->decode(longer, len + 1, &g), KV_ECORRUPT);
    ck_assert_msg(strstr(kv_error_text(), "decode") != NULL, "text: %s", kv_error_text());
    /* Each kind's decoder refuses the other kinds' encodings and a plain
     * Bloom filter's. */
    for (int other = 0; other < KINDS; other++) {
        if (other == kind)
            continue;
        void *o = small_filter(other);
        void *ob;
        size_t ol;
        ck_assert_int_eq(kinds[other].encode(o, &ob, &ol), KV_OK);
        ck_assert_int_eq(K->decode(ob, ol, &g), KV_ECORRUPT);
        kv_free(ob);
        kinds[other].free(o);
    }
    kv_bloom *b;
    ck_assert_int_eq(kv_bloom_new(KV_BLOOM_BLOCKED, 100, 10, 1, &b), KV_OK);
    void *bb;
    size_t bl;
    ck_assert_int_eq(kv_bloom_encode(b, &bb, &bl), KV_OK);
    ck_assert_int_eq(K->decode(bb, bl, &g), KV_ECORRUPT);
    kv_free(bb);
    kv_bloom_free(b);
    /* NULL arguments. */
    ck_assert_int_eq(K->decode(NULL, len, &g), KV_EINVAL);
    ck_assert_int_eq(K->encode(f, NULL, &len), KV_EINVAL);
    ck_assert_int_eq(K->encode(NULL, (void **)&bb, &len), KV_EINVAL);
    free(longer);
    free(copy);
    kv_free(buf);
    K->free(f);
}
END_TEST

static void put64(uint8_t *p, uint64_t v)
{
    for (unsigned i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Decodes buf after setting `width` bytes at `at` to v and recomputing the
 * final checksum, as a forger would. */
static int forged(const uint8_t *buf, size_t len, int kind, size_t at, unsigned width, uint64_t v)
{
    uint8_t *c = malloc(len);
    memcpy(c, buf, len);
    if (width == 1)
        c[at] = (uint8_t)v;
    else
        put64(c + at, v);
    put64(c + len - 8, XXH3_64bits(c, len - 8));
    void *g;
    int rc = kinds[kind].decode(c, len, &g);
    if (rc == KV_OK)
        kinds[kind].free(g);
    free(c);
    return rc;
}

static uint64_t fbits(double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}

/* A decoded rotation count near 2^64 (the format allows any): rotations
 * must keep moving to the next generation, never back onto the current
 * one, so a key added just before a rotation is found for G - 1 more
 * rotations and gone after G. Before the fix, 2^64 - 1 wrapped to 0, which
 * for G = 3 names the current generation: one rotation cleared a key just
 * added (a false negative from a crafted file). */
START_TEST(rotating_count_near_2_64_keeps_the_current_generation)
{
    static const unsigned gens[] = {1, 2, 3, 5, 7, 64};
    static const uint64_t counts[] = {UINT64_MAX, UINT64_MAX - 1, UINT64_MAX - 5};
    for (size_t a = 0; a < sizeof gens / sizeof gens[0]; a++)
        for (size_t b = 0; b < sizeof counts / sizeof counts[0]; b++) {
            unsigned G = gens[a];
            kv_rotating_bloom *f;
            ck_assert_int_eq(kv_rotating_bloom_new(100, G, 0.01, 5, &f), KV_OK);
            uint8_t *buf;
            size_t len;
            ck_assert_int_eq(kv_rotating_bloom_encode(f, (void **)&buf, &len), KV_OK);
            kv_rotating_bloom_free(f);
            put64(buf + KV_RBF_FMT_OFF_ROTATIONS, counts[b]);
            put64(buf + len - 8, XXH3_64bits(buf, len - 8));
            ck_assert_int_eq(kv_rotating_bloom_decode(buf, len, &f), KV_OK);
            kv_free(buf);
            /* Rotate past the wrap one step at a time, adding a key before
             * each rotation; every key of the last G generations stays. */
            for (unsigned r = 0; r < 8; r++) {
                char key[16];
                snprintf(key, sizeof key, "key-%u", r);
                kv_rotating_bloom_add(f, key, strlen(key));
                uint64_t before = kv_rotating_bloom_rotations(f);
                ck_assert_int_eq(kv_rotating_bloom_rotate(f), KV_OK);
                uint64_t after = kv_rotating_bloom_rotations(f);
                ck_assert_uint_eq(after % G, (before % G + 1) % G);
                for (unsigned q = 0; q <= r; q++) {
                    snprintf(key, sizeof key, "key-%u", q);
                    /* key q went into the generation current before
                     * rotation q; it has seen r - q + 1 rotations since. */
                    if (r - q + 1 < G)
                        ck_assert_msg(kv_rotating_bloom_may_contain(f, key, strlen(key)),
                                      "G %u count %llu: key %u lost after %u rotations", G,
                                      (unsigned long long)counts[b], q, r - q + 1);
                }
            }
            ck_assert_uint_eq(kv_rotating_bloom_count(f), G - 1 < 8 ? G - 1 : 8);
            kv_rotating_bloom_free(f);
        }
}
END_TEST

/* Fields that pass the checksum but not the format: each is KV_ECORRUPT. */
START_TEST(codec_rejects_forged_fields_behind_a_valid_checksum)
{
    uint8_t *b;
    size_t n;
    /* counting */
    void *f = small_filter(COUNTING);
    ck_assert_int_eq(kinds[COUNTING].encode(f, (void **)&b, &n), KV_OK);
    ck_assert_int_eq(forged(b, n, COUNTING, 0, 1, b[0]), KV_OK); /* the repair itself is fine */
    ck_assert_int_eq(forged(b, n, COUNTING, KV_CBF_FMT_OFF_VERSION, 1, 2), KV_ECORRUPT);
    ck_assert_int_eq(forged(b, n, COUNTING, KV_CBF_FMT_OFF_HASH, 1, 2), KV_ECORRUPT);
    ck_assert_int_eq(forged(b, n, COUNTING, KV_CBF_FMT_OFF_K, 1, 0), KV_ECORRUPT);
    ck_assert_int_eq(forged(b, n, COUNTING, KV_CBF_FMT_OFF_K, 1, 17), KV_ECORRUPT);
    ck_assert_int_eq(forged(b, n, COUNTING, KV_CBF_FMT_OFF_RESERVED, 1, 1), KV_ECORRUPT);
    ck_assert_int_eq(forged(b, n, COUNTING, KV_CBF_FMT_OFF_FPR, 8, fbits(0)), KV_ECORRUPT);
    ck_assert_int_eq(forged(b, n, COUNTING, KV_CBF_FMT_OFF_FPR, 8, fbits(NAN)), KV_ECORRUPT);
    ck_assert_int_eq(forged(b, n, COUNTING, KV_CBF_FMT_OFF_BLOCKS, 8, 0), KV_ECORRUPT);
    ck_assert_int_eq(forged(b, n, COUNTING, KV_CBF_FMT_OFF_BLOCKS, 8,
                            get64(b + KV_CBF_FMT_OFF_BLOCKS) + 1), KV_ECORRUPT);
    ck_assert_int_eq(forged(b, n, COUNTING, KV_CBF_FMT_OFF_BLOCKS, 8, (uint64_t)1 << 58),
                     KV_ECORRUPT);
    ck_assert_int_eq(forged(b, n, COUNTING, KV_CBF_FMT_OFF_KEYS, 8, UINT64_MAX), KV_ECORRUPT);
    kv_free(b);
    kinds[COUNTING].free(f);

    /* scalable: the stages must form the series */
    f = small_filter(SCALABLE);
    ck_assert_int_eq(kinds[SCALABLE].encode(f, (void **)&b, &n), KV_OK);
    ck_assert_int_eq(forged(b, n, SCALABLE, 0, 1, b[0]), KV_OK);
    size_t st0 = KV_SBF_FMT_HEADER;
    ck_assert_int_eq(forged(b, n, SCALABLE, KV_SBF_FMT_OFF_GROWTH, 1, 3), KV_ECORRUPT);
    ck_assert_int_eq(forged(b, n, SCALABLE, KV_SBF_FMT_OFF_STAGES, 1, 0), KV_ECORRUPT);
    ck_assert_int_eq(forged(b, n, SCALABLE, KV_SBF_FMT_OFF_STAGES, 1, 2), KV_ECORRUPT);
    ck_assert_int_eq(forged(b, n, SCALABLE, KV_SBF_FMT_OFF_STAGES, 1, 4), KV_ECORRUPT);
    ck_assert_int_eq(forged(b, n, SCALABLE, KV_SBF_FMT_OFF_STAGES, 1, 255), KV_ECORRUPT);
    ck_assert_int_eq(forged(b, n, SCALABLE, KV_SBF_FMT_OFF_INITIAL, 8, 0), KV_ECORRUPT);
    ck_assert_int_eq(forged(b, n, SCALABLE, KV_SBF_FMT_OFF_INITIAL, 8, 11), KV_ECORRUPT);
    /* A looser fpr is fine by the stages (they are tighter than it asks)... */
    ck_assert_int_eq(forged(b, n, SCALABLE, KV_SBF_FMT_OFF_FPR, 8, fbits(0.02)), KV_OK);
    /* ... a much tighter one is not: the stages would not meet it. */
    ck_assert_int_eq(forged(b, n, SCALABLE, KV_SBF_FMT_OFF_FPR, 8, fbits(1e-12)), KV_ECORRUPT);
    ck_assert_int_eq(forged(b, n, SCALABLE, KV_SBF_FMT_OFF_RATIO, 8, fbits(0.8)), KV_ECORRUPT);
    ck_assert_int_eq(forged(b, n, SCALABLE, st0, 8, 20), KV_ECORRUPT);      /* capacity */
    ck_assert_int_eq(forged(b, n, SCALABLE, st0 + 8, 8, 9), KV_ECORRUPT);   /* not full */
    ck_assert_int_eq(forged(b, n, SCALABLE, st0 + 8, 8, 11), KV_ECORRUPT);  /* overfull */
    ck_assert_int_eq(forged(b, n, SCALABLE, st0 + 16, 8, UINT64_MAX), KV_ECORRUPT);
    ck_assert_int_eq(forged(b, n, SCALABLE, st0 + 16, 8, get64(b + st0 + 16) - 1), KV_ECORRUPT);
    ck_assert_int_eq(forged(b, n, SCALABLE, st0 + 24 + KV_BLOOM_FMT_OFF_SEED, 8, 1), KV_ECORRUPT);
    kv_free(b);
    kinds[SCALABLE].free(f);

    /* rotating */
    f = small_filter(ROTATING);
    ck_assert_int_eq(kinds[ROTATING].encode(f, (void **)&b, &n), KV_OK);
    ck_assert_int_eq(forged(b, n, ROTATING, 0, 1, b[0]), KV_OK);
    ck_assert_int_eq(forged(b, n, ROTATING, KV_RBF_FMT_OFF_K, 1, 0), KV_ECORRUPT);
    ck_assert_int_eq(forged(b, n, ROTATING, KV_RBF_FMT_OFF_K, 1, 31), KV_ECORRUPT);
    ck_assert_int_eq(forged(b, n, ROTATING, KV_RBF_FMT_OFF_GENS, 1, 0), KV_ECORRUPT);
    ck_assert_int_eq(forged(b, n, ROTATING, KV_RBF_FMT_OFF_GENS, 1, 2), KV_ECORRUPT);
    ck_assert_int_eq(forged(b, n, ROTATING, KV_RBF_FMT_OFF_GENS, 1, 65), KV_ECORRUPT);
    ck_assert_int_eq(forged(b, n, ROTATING, KV_RBF_FMT_OFF_PER_GEN, 8, 0), KV_ECORRUPT);
    ck_assert_int_eq(forged(b, n, ROTATING, KV_RBF_FMT_OFF_PER_GEN, 8, 4), KV_ECORRUPT);
    ck_assert_int_eq(forged(b, n, ROTATING, KV_RBF_FMT_OFF_FPR, 8, fbits(1.0)), KV_ECORRUPT);
    ck_assert_int_eq(forged(b, n, ROTATING, KV_RBF_FMT_OFF_BITS, 8, 0), KV_ECORRUPT);
    ck_assert_int_eq(forged(b, n, ROTATING, KV_RBF_FMT_OFF_BITS, 8, 1000), KV_ECORRUPT);
    ck_assert_int_eq(forged(b, n, ROTATING, KV_RBF_FMT_OFF_BITS, 8,
                            get64(b + KV_RBF_FMT_OFF_BITS) + 512), KV_ECORRUPT);
    ck_assert_int_eq(forged(b, n, ROTATING, KV_RBF_FMT_OFF_BITS, 8, (uint64_t)1 << 60),
                     KV_ECORRUPT);
    ck_assert_int_eq(forged(b, n, ROTATING, KV_RBF_FMT_HEADER, 8, 21), KV_ECORRUPT);
    kv_free(b);
    kinds[ROTATING].free(f);
}
END_TEST

/* ---- concurrency (ThreadSanitizer: ctest -L concurrency) --------------------- */

#define THREADS 4
#define PER_THREAD 20000u

struct worker {
    void *f;
    int kind;
    unsigned id;
    _Atomic uint64_t done; /* keys [0, done) of this thread are added */
    _Atomic uint64_t *rot_before; /* rotating: rotations read before each add */
    struct worker *all;
    _Atomic int *stop;
    _Atomic int *go; /* writers start once every thread is running */
    uint64_t bad, checks;
};

static size_t worker_key(unsigned id, uint64_t i, uint8_t *k)
{
    return make_key(SHAPE_RANDOM16, 0, (uint64_t)id * 10000000 + i, k);
}

/* Adds its keys one by one, publishing its progress (release). Counting
 * writers also remove every key of theirs that is not a multiple of 3,
 * right after adding the next one; only multiples of 3 must stay found. */
static void *writer(void *arg)
{
    struct worker *w = arg;
    uint8_t k[KEY_MAX];
    while (!atomic_load_explicit(w->go, memory_order_acquire))
        sched_yield();
    for (uint64_t i = 0; i < PER_THREAD; i++) {
        size_t n = worker_key(w->id, i, k);
        if (w->kind == ROTATING)
            atomic_store_explicit(&w->rot_before[i],
                                  kv_rotating_bloom_rotations(w->f), memory_order_relaxed);
        w->bad += kinds[w->kind].add(w->f, k, n) != KV_OK;
        if (w->kind == COUNTING && i > 0 && (i - 1) % 3 != 0) {
            n = worker_key(w->id, i - 1, k);
            w->bad += kv_counting_bloom_remove(w->f, k, n) != KV_OK;
        }
        atomic_store_explicit(&w->done, i + 1, memory_order_release);
    }
    return NULL;
}

/* Checks keys that writers have published: each must be found (counting:
 * multiples of 3 only, and only once the next key's turn has passed;
 * rotating: only while fewer than G - 1 rotations have happened since the
 * writer read the count before adding it). */
static void *reader(void *arg)
{
    struct worker *r = arg;
    uint8_t k[KEY_MAX];
    uint64_t state = r->id;
    while (!atomic_load_explicit(r->stop, memory_order_acquire)) {
        state = mix64(state);
        struct worker *w = &r->all[state % THREADS];
        uint64_t done = atomic_load_explicit(&w->done, memory_order_acquire);
        if (done < 2)
            continue;
        uint64_t i = (state >> 16) % (done - 1);
        if (r->kind == COUNTING)
            i -= i % 3;
        size_t n = worker_key(w->id, i, k);
        int found = kinds[r->kind].may(r->f, k, n);
        if (r->kind == ROTATING) {
            uint64_t before = atomic_load_explicit(&w->rot_before[i], memory_order_relaxed);
            uint64_t now = kv_rotating_bloom_rotations(r->f);
            if (now + 1 >= before + 4) /* G = 4: it may have left the window */
                continue;
        }
        r->checks++;
        r->bad += !found;
    }
    return NULL;
}

/* Rotates every 2 ms while the writers run. */
static void *rotator(void *arg)
{
    struct worker *r = arg;
    while (!atomic_load_explicit(r->stop, memory_order_acquire)) {
        kv_rotating_bloom_rotate(r->f);
        nanosleep(&(struct timespec){.tv_nsec = 2000000}, NULL);
    }
    return NULL;
}

/* _i: kind. THREADS writers and two readers at once (and for rotating a
 * thread that rotates by hand besides add's own rotations). */
START_TEST(concurrent_writers_and_readers_lose_no_key)
{
    int kind = _i;
    void *f;
    if (kind == COUNTING) {
        kv_counting_bloom *c;
        ck_assert_int_eq(kv_counting_bloom_new(THREADS * PER_THREAD / 2, 0.01, 4, &c), KV_OK);
        f = c;
    } else if (kind == SCALABLE) {
        kv_scalable_bloom *s;
        ck_assert_int_eq(kv_scalable_bloom_new(500, 0.01, 4, &s), KV_OK); /* grows 160x */
        f = s;
    } else {
        kv_rotating_bloom *r;
        ck_assert_int_eq(kv_rotating_bloom_new(15000, 4, 0.01, 4, &r), KV_OK);
        f = r;
    }
    static struct worker ws[THREADS], rs[3];
    _Atomic uint64_t *rot = calloc(THREADS * (size_t)PER_THREAD, sizeof *rot);
    ck_assert_ptr_nonnull(rot);
    _Atomic int stop, go;
    atomic_init(&stop, 0);
    atomic_init(&go, 0);
    pthread_t wt[THREADS], rt[3];
    for (unsigned t = 0; t < THREADS; t++) {
        ws[t] = (struct worker){.f = f, .kind = kind, .id = t, .rot_before = rot + t * PER_THREAD,
                                .all = ws, .stop = &stop, .go = &go};
        atomic_init(&ws[t].done, 0);
    }
    unsigned nreaders = kind == ROTATING ? 3 : 2;
    for (unsigned t = 0; t < nreaders; t++) {
        rs[t] = (struct worker){.f = f, .kind = kind, .id = 100 + t, .all = ws, .stop = &stop};
        atomic_init(&rs[t].done, 0);
    }
    for (unsigned t = 0; t < nreaders; t++)
        ck_assert_int_eq(pthread_create(&rt[t], NULL, t == 2 ? rotator : reader, &rs[t]), 0);
    for (unsigned t = 0; t < THREADS; t++)
        ck_assert_int_eq(pthread_create(&wt[t], NULL, writer, &ws[t]), 0);
    atomic_store_explicit(&go, 1, memory_order_release);
    for (unsigned t = 0; t < THREADS; t++)
        pthread_join(wt[t], NULL);
    atomic_store_explicit(&stop, 1, memory_order_release);
    for (unsigned t = 0; t < nreaders; t++)
        pthread_join(rt[t], NULL);
    uint64_t bad = 0, checks = 0;
    for (unsigned t = 0; t < THREADS; t++)
        bad += ws[t].bad;
    for (unsigned t = 0; t < 2; t++) {
        bad += rs[t].bad;
        checks += rs[t].checks;
    }
    if (verbose())
        fprintf(stderr, "concurrency %s: %llu reader checks\n", kinds[kind].name,
                (unsigned long long)checks);
    ck_assert_msg(bad == 0, "%s: %llu failed operations or lost keys", kinds[kind].name,
                  (unsigned long long)bad);
    /* Afterwards, alone: every key that must be there is. */
    uint8_t k[KEY_MAX];
    uint64_t lost = 0;
    for (unsigned t = 0; t < THREADS; t++)
        for (uint64_t i = 0; i < PER_THREAD; i++) {
            if (kind == COUNTING && i % 3 != 0 && i + 1 < PER_THREAD)
                continue;
            if (kind == ROTATING && kv_rotating_bloom_rotations(f) + 1 >= rot[t * PER_THREAD + i] + 4)
                continue;
            size_t n = worker_key(t, i, k);
            lost += !kinds[kind].may(f, k, n);
        }
    ck_assert_uint_eq(lost, 0);
    if (kind == COUNTING) /* a third of the keys, and each thread's last one */
        ck_assert_uint_eq(kv_counting_bloom_count(f),
                          THREADS * ((PER_THREAD + 2) / 3 + ((PER_THREAD - 1) % 3 != 0)));
    if (kind == SCALABLE)
        ck_assert_uint_eq(kv_scalable_bloom_count(f), THREADS * PER_THREAD);
    free(rot);
    kinds[kind].free(f);
}
END_TEST

/* ---- suite ------------------------------------------------------------------- */

Suite *test_suite(void)
{
    Suite *s = suite_create("filter_kinds");
    TCase *tc = test_tcase(s, "fpr", 600, 0);
    tcase_add_loop_test(tc, fpr_matches_theory_and_meets_target, 0, KINDS * 2 * SHAPE_COUNT);

    tc = test_tcase(s, "counting", 300, 0);
    tcase_add_test(tc, counting_removing_b_keeps_all_of_a);
    tcase_add_test(tc, counting_remove_of_absent_key_is_notfound_and_changes_nothing);
    tcase_add_test(tc, counting_saturated_counters_never_give_false_negatives);
    tcase_add_test(tc, counting_random_operations_match_a_multiset);
    tcase_add_test(tc, counting_expected_fpr_follows_the_count);
    tcase_add_test(tc, counting_rejects_invalid_arguments);

    tc = test_tcase(s, "scalable", 600, 0);
    tcase_add_loop_test(tc, scalable_grows_1000x_without_false_negatives_within_fpr, 0, 2);
    tcase_add_test(tc, scalable_stages_fill_in_order);
#ifdef TEST_ENOMEM
    tcase_add_test(tc, scalable_add_that_cannot_grow_is_enomem);
#endif
    tcase_add_test(tc, scalable_rejects_invalid_arguments);

    tc = test_tcase(s, "rotating", 300, 0);
    tcase_add_loop_test(tc, rotating_window_keeps_recent_keys_and_drops_old_ones, 0, 2);
    tcase_add_test(tc, rotating_by_hand_keeps_a_key_for_its_window);
    tcase_add_test(tc, rotating_count_near_2_64_keeps_the_current_generation);
    tcase_add_test(tc, rotating_rejects_invalid_arguments);
    tcase_add_test(tc, exact_blocked_fpr_matches_an_independent_computation);

    tc = test_tcase(s, "codec", 300, 0);
    tcase_add_loop_test(tc, codec_round_trip_keeps_every_answer, 0, KINDS);
    tcase_add_loop_test(tc, codec_rejects_every_damaged_byte_and_truncation, 0, KINDS);
    tcase_add_test(tc, codec_rejects_forged_fields_behind_a_valid_checksum);

    tc = test_tcase(s, "concurrency", 900, 0);
    tcase_add_loop_test(tc, concurrent_writers_and_readers_lose_no_key, 0, KINDS);

    return s;
}
