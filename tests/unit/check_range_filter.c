/* check_range_filter.c - unit tests of the range filter (filter/range_filter.h).
 *
 * The model is the sorted key array: a range holds a key when the first key
 * at or above lo is below hi. The filter must answer 1 for every such range
 * (no false negatives); for the FPR tests, ranges the model says are empty
 * are counted against the expected rate the filter reports per query.
 * Keys come from splitmix64 streams, so every run tests the same keys.
 *
 * Set KV_TEST_VERBOSE=1 to print measured and expected FPRs. */
#define _POSIX_C_SOURCE 200809L

#include <kv/range_filter.h>

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "fixture.h"

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rng(uint64_t *s)
{
    *s += 0x9E3779B97F4A7C15ull;
    return mix64(*s);
}

static int verbose(void)
{
    const char *v = getenv("KV_TEST_VERBOSE");
    return v && *v && strcmp(v, "0") != 0;
}

/* ---- a key set and its model ------------------------------------------------------------ */

#define KMAX 96 /* longest key the generators make */

typedef struct {
    uint8_t b[KMAX + 8];
    size_t len;
} key;

static int kcmp(const key *a, const key *b)
{
    size_t m = a->len < b->len ? a->len : b->len;
    int c = m ? memcmp(a->b, b->b, m) : 0;
    return c ? c : (a->len > b->len) - (a->len < b->len);
}

static int kcmp_void(const void *a, const void *b)
{
    return kcmp(a, b);
}

/* Sorts and drops duplicates: the new count. */
static size_t sort_unique(key *k, size_t n)
{
    qsort(k, n, sizeof *k, kcmp_void);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (m == 0 || kcmp(&k[m - 1], &k[i]) != 0)
            k[m++] = k[i];
    return m;
}

/* Whether sorted keys k[0, n) hold one in [lo, hi) (NULL: open). */
static int model_holds(const key *k, size_t n, const key *lo, const key *hi)
{
    size_t a = 0, b = n;
    if (lo)
        while (a < b) {
            size_t m = (a + b) / 2;
            if (kcmp(&k[m], lo) < 0)
                a = m + 1;
            else
                b = m;
        }
    return a < n && (!hi || kcmp(&k[a], hi) < 0);
}

/* The filter of sorted, distinct keys. */
static kv_rfilter *build(const key *k, size_t n, double bits, uint64_t seed, uint8_t **enc,
                         size_t *len)
{
    kv_rfilter_builder *b;
    ck_assert_int_eq(kv_rfilter_builder_new(bits, seed, &b), KV_OK);
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(kv_rfilter_builder_add(b, k[i].b, k[i].len), KV_OK);
    ck_assert_uint_eq(kv_rfilter_builder_keys(b), n);
    ck_assert_int_eq(kv_rfilter_builder_finish(b, enc, len), KV_OK);
    kv_rfilter_builder_free(b);
    kv_rfilter *f;
    ck_assert_int_eq(kv_rfilter_decode(*enc, *len, &f), KV_OK);
    return f;
}

static int ask(const kv_rfilter *f, const key *lo, const key *hi, double *fpr)
{
    return kv_rfilter_may_hold(f, lo ? lo->b : NULL, lo ? lo->len : 0, hi ? hi->b : NULL,
                               hi ? hi->len : 0, fpr);
}

/* ---- the map, exhaustively on small alphabets ---------------------------------------------- */

/* Every string of length 0..3 over a 3-letter alphabet (40 of them), sorted. */
static size_t universe(const uint8_t alpha[3], key *u)
{
    size_t n = 0;
    for (size_t len = 0; len <= 3; len++) {
        size_t count = len == 0 ? 1 : len == 1 ? 3 : len == 2 ? 9 : 27;
        for (size_t x = 0; x < count; x++, n++) {
            u[n].len = len;
            for (size_t i = 0, y = x; i < len; i++, y /= 3)
                u[n].b[len - 1 - i] = alpha[y % 3];
        }
    }
    return sort_unique(u, n);
}

static const uint8_t alphabets[][3] = {{0, 1, 2}, {0, 0x7f, 0xff}, {'0', '1', '9'}, {1, 2, 0xff}};

/* For random subsets of the universe as key sets, every pair of universe
 * strings (and NULL) as bounds: never a false negative; with many bits and
 * keys inside the window, few false positives. */
START_TEST(map_exhaustive_small_alphabets)
{
    key u[40], keys[40];
    size_t nu = universe(alphabets[_i], u);
    uint64_t s = 1234 + (uint64_t)_i;
    unsigned long fn = 0, empty = 0, fp = 0, hashed = 0;
    for (int set = 0; set < 600; set++) {
        size_t n = 0, want = 1 + rng(&s) % (set % 3 == 0 ? 3 : set % 3 == 1 ? 8 : 30);
        for (size_t i = 0; i < nu && n < want; i++)
            if (rng(&s) % (nu / want + 1) == 0)
                keys[n++] = u[i];
        if (!n)
            keys[n++] = u[rng(&s) % nu];
        uint8_t *enc;
        size_t len;
        /* at 4 bits per key most filters hash their integers; at 64 most
         * store them as they are (the exact form) */
        kv_rfilter *f = build(keys, n, set % 2 ? 64 : 4, s, &enc, &len);
        hashed += kv_rfilter_expected_fpr(f, 1) > 0;
        for (size_t a = 0; a <= nu; a++)
            for (size_t b = 0; b <= nu; b++) {
                const key *lo = a < nu ? &u[a] : NULL, *hi = b < nu ? &u[b] : NULL;
                int want_hit = model_holds(keys, n, lo, hi), got = ask(f, lo, hi, NULL);
                fn += want_hit && !got;
                if (set % 2 && !want_hit && (!lo || !hi || kcmp(lo, hi) < 0)) {
                    empty++;
                    fp += got;
                }
            }
        kv_rfilter_free(f);
        kv_free(enc);
    }
    if (verbose())
        printf("alphabet %d: %lu empty ranges, %lu false positives, %lu of 600 hashed\n", _i, empty,
               fp, hashed);
    ck_assert_msg(fn == 0, "%lu false negatives", fn);
    ck_assert_msg(hashed > 30 && hashed < 570, "%lu of 600 filters hashed", hashed);
    /* At 64 bits per key the hash hardly collides; what remains is the
     * map's: strings it cannot tell apart (a key and the key with a 0
     * byte more, bounds between representable strings). */
    ck_assert_msg(fp < empty / 4, "%lu false positives of %lu empty ranges", fp, empty);
}
END_TEST

/* ---- key sets of every kind, random ranges --------------------------------------------------- */

enum {
    K_BINARY8,
    K_VARLEN,
    K_DECIMAL16,
    K_LONGPREFIX,
    K_FF,
    K_TAILS,
    K_SMALL,
    K_CLUSTERS,
    K_ID8,   /* 8-byte random ids, then 8-byte counters: the map's dictionary */
    K_ID4,   /* 4-byte ids, then timestamps spread over 2^40: the dictionary too */
    K_IDVAR, /* ids of 1 to 12 bytes, then counters: keys of many lengths */
    K_KINDS
};

#define ID_KEYS 100            /* keys per id */
#define ID_T0 1700000000000ull /* the first counter value */

static void put_be(uint8_t *p, uint64_t v, unsigned bytes)
{
    for (unsigned j = 0; j < bytes; j++)
        p[j] = (uint8_t)(v >> (8 * (bytes - 1 - j)));
}

static void make_key(int kind, uint64_t *s, uint64_t i, key *k)
{
    uint64_t x = rng(s);
    switch (kind) {
    case K_BINARY8:
        k->len = 8;
        for (int j = 0; j < 8; j++)
            k->b[j] = (uint8_t)(x >> (56 - 8 * j));
        break;
    case K_VARLEN: /* 0..60 bytes, some past the window, few distinct bytes */
        k->len = rng(s) % 61;
        for (size_t j = 0; j < k->len; j++)
            k->b[j] = (uint8_t)(rng(s) % 4 == 0 ? rng(s) : j % 2 ? 0 : 0xff);
        break;
    case K_DECIMAL16: /* kvbench: the 16 decimal digits of 2 i, keys every 64 i */
        k->len = 16;
        snprintf((char *)k->b, sizeof k->b, "%016llu", (unsigned long long)(2 * 64 * i));
        break;
    case K_LONGPREFIX: /* 40 shared bytes, then 0..50 random ones */
        memset(k->b, 'p', 40);
        k->len = 40 + rng(s) % 51;
        for (size_t j = 40; j < k->len; j++)
            k->b[j] = (uint8_t)rng(s);
        break;
    case K_FF: /* runs of 0xff, 0x00 and one other byte */
        k->len = rng(s) % 12;
        for (size_t j = 0; j < k->len; j++)
            k->b[j] = (uint8_t)(x >> j & 1 ? 0xff : rng(s) % 3 == 0 ? 0 : 0xfe);
        break;
    case K_TAILS: /* a first byte of 3, then keys that differ only past the
                   * window: they share integers */
        k->b[0] = (uint8_t)(rng(s) % 3);
        memset(k->b + 1, 0x41, 47);
        k->len = 48 + rng(s) % 16;
        for (size_t j = 44; j < k->len; j++)
            k->b[j] = (uint8_t)rng(s);
        break;
    case K_CLUSTERS: { /* 8-byte runs of consecutive integers far apart: hashed,
                        * each run crowds a bucket or two (the probe's search) */
        static const uint64_t base[4] = {0x1000, 0x4000000000000000ull, 0x8123456789abcdefull,
                                         0xfffffffffffff000ull};
        uint64_t v = base[i / 750 % 4] + i % 750 * (1 + i / 1500 % 2);
        k->len = 8;
        for (int j = 0; j < 8; j++)
            k->b[j] = (uint8_t)(v >> (56 - 8 * j));
        break;
    }
    case K_ID8: /* counters 64 apart, a few skipped */
        k->len = 16;
        put_be(k->b, mix64(0x1d8 + i / ID_KEYS), 8);
        put_be(k->b + 8, ID_T0 + i % ID_KEYS * 64 + x % 4, 8);
        break;
    case K_ID4:
        k->len = 12;
        put_be(k->b, mix64(0x1d4 + i / ID_KEYS) >> 32, 4);
        put_be(k->b + 4, ID_T0 + (x >> 24), 8);
        break;
    case K_IDVAR: {
        uint64_t id = mix64(0x1d0 + i / ID_KEYS);
        unsigned il = 1 + (unsigned)(id % 12);
        for (unsigned j = 0; j < il; j++)
            k->b[j] = (uint8_t)(id >> (8 * (j % 8)) ^ j);
        k->len = il + 8;
        put_be(k->b + il, ID_T0 + i % ID_KEYS * 64 + x % 4, 8);
        break;
    }
    default: /* K_SMALL: short keys of a few letters */
        k->len = rng(s) % 5;
        for (size_t j = 0; j < k->len; j++)
            k->b[j] = (uint8_t)("a\0z\xff"[rng(s) % 4]);
        break;
    }
}

/* A bound near key k: the key, just below or above it, a prefix of it, or
 * random bytes. */
static void make_bound(const key *k, uint64_t *s, key *out)
{
    *out = *k;
    switch (rng(s) % 8) {
    case 0:
    case 1: break;
    case 2: /* the key with a byte more (0 or random): just above it */
        out->b[out->len++] = (uint8_t)(rng(s) % 2 ? 0 : rng(s));
        break;
    case 3: /* a prefix */ out->len = out->len ? rng(s) % out->len : 0; break;
    case 4: /* a byte changed by +-1 */
        if (out->len) {
            size_t j = rng(s) % out->len;
            out->b[j] = (uint8_t)(out->b[j] + (rng(s) % 2 ? 1 : -1));
        }
        break;
    case 5: /* the last byte up, shorter key */
        if (out->len) {
            out->len = 1 + rng(s) % out->len;
            out->b[out->len - 1] = (uint8_t)(out->b[out->len - 1] + 1);
        }
        break;
    case 6: /* random bytes */
        out->len = rng(s) % 20;
        for (size_t j = 0; j < out->len; j++)
            out->b[j] = (uint8_t)rng(s);
        break;
    default: /* empty or all 0xff */
        out->len = rng(s) % 3 ? 0 : 1 + rng(s) % 8;
        memset(out->b, 0xff, out->len);
        break;
    }
}

#define RANDOM_KEYS 3000

START_TEST(no_false_negatives_random_ranges)
{
    int kind = _i % K_KINDS;
    double bits = _i / K_KINDS ? 16 : 6;
    uint64_t s = 99 + (uint64_t)_i;
    key *k = malloc(RANDOM_KEYS * sizeof *k);
    size_t n = 0;
    for (uint64_t i = 0; i < RANDOM_KEYS; i++)
        make_key(kind, &s, i, &k[n++]);
    if (kind == K_VARLEN)
        k[0].len = 0; /* the empty key */
    n = sort_unique(k, n);
    uint8_t *enc;
    size_t len;
    kv_rfilter *f = build(k, n, bits, s, &enc, &len);
    unsigned long fn = 0, asked = 0;
    for (int q = 0; q < 60000; q++) {
        key lo, hi;
        size_t i = rng(&s) % n;
        /* widths from 0 to the whole set, most of them short */
        size_t w = rng(&s) % 4 ? rng(&s) % 4 : rng(&s) % 2 ? rng(&s) % 64 : rng(&s) % n;
        size_t j = i + w < n ? i + w : n - 1;
        make_bound(&k[i], &s, &lo);
        make_bound(&k[j], &s, &hi);
        int open = (int)(rng(&s) % 16);
        const key *plo = open == 0 ? NULL : &lo, *phi = open == 1 ? NULL : &hi;
        if (open == 2)
            plo = phi = NULL;
        if (model_holds(k, n, plo, phi)) {
            asked++;
            fn += !ask(f, plo, phi, NULL);
        }
        /* the point range [key, key "\0") */
        key pt = k[i];
        pt.b[pt.len++] = 0;
        fn += !ask(f, &k[i], &pt, NULL);
    }
    kv_rfilter_info info;
    kv_rfilter_info_get(f, &info);
    if (verbose())
        printf("kind %d bits %g: %zu keys, %llu values, prefix %zu, %u digits, %zu bytes, "
               "%lu non-empty ranges\n",
               kind, bits, n, (unsigned long long)info.keys, info.shared_prefix, info.digits,
               info.bytes, asked);
    ck_assert_msg(fn == 0, "kind %d: %lu false negatives", kind, fn);
    ck_assert_uint_le(info.keys, n);
    ck_assert_uint_le(info.digits, 32);
    kv_rfilter_free(f);
    kv_free(enc);
    free(k);
}
END_TEST

/* Bounds that share most of their bytes (a short range: the query maps
 * their shared bytes once, then each tail): hi made from lo by a byte more,
 * its last byte up, a cut and a byte up, 0xff or 0x00 bytes after a cut;
 * also the extremes (the empty key, all 0xff, the first and last keys).
 * Never a false negative. */
/* kv_rfilter_map_lower is monotone over every byte string, not only the
 * ones the map was fitted to: strings of every kind (below, inside and
 * above the filter's keys, outside its shared prefix, past its window),
 * sorted, map to non-decreasing integers no larger than the top. */
START_TEST(map_lower_is_monotone)
{
    int kind = _i % K_KINDS;
    uint64_t s = 4242 + (uint64_t)_i;
    enum { NK = 2000, NQ = 6000 };
    key *k = malloc(NK * sizeof *k), *q = malloc(NQ * sizeof *q);
    ck_assert_ptr_nonnull(k);
    ck_assert_ptr_nonnull(q);
    size_t n = 0;
    for (uint64_t i = 0; i < NK; i++)
        make_key(kind, &s, i, &k[n++]);
    n = sort_unique(k, n);
    uint8_t *enc;
    size_t len;
    kv_rfilter *f = build(k, n, _i / K_KINDS ? 16 : 6, s, &enc, &len);
    size_t nq = 0;
    for (; nq < NQ / 3; nq++) /* near the keys */
        make_bound(&k[rng(&s) % n], &s, &q[nq]);
    for (; nq < 2 * NQ / 3; nq++) /* keys of other kinds: outside the prefix */
        make_key((int)(rng(&s) % K_KINDS), &s, rng(&s) % 100000, &q[nq]);
    for (; nq < NQ; nq++) { /* random bytes, some long */
        q[nq].len = rng(&s) % (rng(&s) % 4 ? 20 : KMAX);
        for (size_t j = 0; j < q[nq].len; j++)
            q[nq].b[j] = (uint8_t)(rng(&s) % 3 ? rng(&s) : rng(&s) % 2 ? 0 : 0xff);
    }
    nq = sort_unique(q, nq);
    uint64_t top = kv_rfilter_map_top(f), prev = 0;
    for (size_t i = 0; i < nq; i++) {
        uint64_t z = kv_rfilter_map_lower(f, q[i].b, q[i].len);
        ck_assert_msg(z >= prev && z <= top,
                      "kind %d: string %zu maps to %llu after %llu (top %llu)", kind, i,
                      (unsigned long long)z, (unsigned long long)prev, (unsigned long long)top);
        prev = z;
    }
    /* The extremes: the empty string maps to 0 when no key is below it,
     * and a string above every key to the top. */
    ck_assert_uint_eq(kv_rfilter_map_lower(f, "", 0), 0);
    uint8_t ff[KMAX];
    memset(ff, 0xff, sizeof ff);
    ck_assert_uint_eq(kv_rfilter_map_lower(f, ff, sizeof ff), top);
    ck_assert_uint_eq(kv_rfilter_map_lower(NULL, ff, 1), 0);
    ck_assert_uint_eq(kv_rfilter_map_top(NULL), 0);
    kv_rfilter_free(f);
    kv_free(enc);
    free(k);
    free(q);
}
END_TEST

START_TEST(bounds_sharing_long_prefixes)
{
    int kind = _i % K_KINDS;
    uint64_t s = 4242 + (uint64_t)_i;
    key *k = malloc(RANDOM_KEYS * sizeof *k);
    for (uint64_t i = 0; i < RANDOM_KEYS; i++)
        make_key(kind, &s, i, &k[i]);
    size_t n = sort_unique(k, RANDOM_KEYS);
    uint8_t *enc;
    size_t len;
    kv_rfilter *f = build(k, n, _i / K_KINDS ? 64 : 8, s, &enc, &len);
    unsigned long fn = 0, fp = 0;
    for (int q = 0; q < 40000; q++) {
        key lo, hi;
        make_bound(&k[rng(&s) % n], &s, &lo);
        hi = lo;
        size_t cut = hi.len ? rng(&s) % (hi.len + 1) : 0;
        switch (rng(&s) % 6) {
        case 0: hi.b[hi.len++] = (uint8_t)(rng(&s) % 2 ? 0 : rng(&s)); break;
        case 1:
            if (hi.len)
                hi.b[hi.len - 1] = (uint8_t)(hi.b[hi.len - 1] + 1 + rng(&s) % 3);
            break;
        case 2:
            if (cut) {
                hi.len = cut;
                hi.b[cut - 1] = (uint8_t)(hi.b[cut - 1] + 1);
            }
            break;
        case 3: /* the largest strings after a cut */
            hi.len = cut + 1 + rng(&s) % 8;
            memset(hi.b + cut, 0xff, hi.len - cut);
            break;
        case 4: /* lo moved down to 0x00 bytes after a cut, hi as it was */
            lo.len = cut + rng(&s) % 4;
            memset(lo.b + cut, 0, lo.len - cut);
            break;
        default: /* the extremes */
            if (rng(&s) % 2) {
                lo = k[0];
                hi = k[n - 1];
                hi.b[hi.len++] = 0;
            } else {
                lo.len = 0;
                hi.len = 1 + rng(&s) % 40;
                memset(hi.b, 0xff, hi.len);
            }
            break;
        }
        int want = model_holds(k, n, &lo, &hi), got = ask(f, &lo, &hi, NULL);
        fn += want && !got;
        fp += !want && got && kcmp(&lo, &hi) < 0;
    }
    if (verbose())
        printf("kind %d: %lu false positives of 40000\n", kind, fp);
    /* Decimal keys stored exactly (at 64 bits per key): [key i + 2, key
     * i+1), the indexes between, holds nothing and is answered 0. */
    if (kind == K_DECIMAL16 && kv_rfilter_expected_fpr(f, 1) == 0) {
        fp = 0;
        for (size_t i = 0; i + 1 < n; i++) {
            char lo[17], hi[17];
            snprintf(lo, sizeof lo, "%016llu", (unsigned long long)(2 * 64 * i + 2));
            snprintf(hi, sizeof hi, "%016llu", (unsigned long long)(2 * 64 * (i + 1)));
            fp += kv_rfilter_may_hold(f, lo, 16, hi, 16, NULL) != 0;
            fn += kv_rfilter_may_hold(f, lo, 16, (char *)k[i + 1].b, 17, NULL) != 1;
        }
        ck_assert_msg(fp == 0, "%lu false positives", fp);
    }
    ck_assert_msg(fn == 0, "kind %d: %lu false negatives", kind, fn);
    kv_rfilter_free(f);
    kv_free(enc);
    free(k);
}
END_TEST

/* Decimal keys: the map reads the digits after the shared zeros, one
 * radix-10 (or less) digit a position, and takes them all. */
START_TEST(decimal_keys_map_to_their_digits)
{
    key k[1000];
    uint64_t s = 5;
    for (uint64_t i = 0; i < 1000; i++)
        make_key(K_DECIMAL16, &s, i, &k[i]);
    uint8_t *enc;
    size_t len;
    kv_rfilter *f = build(k, 1000, 16, 7, &enc, &len);
    kv_rfilter_info info;
    kv_rfilter_info_get(f, &info);
    /* 2 * 64 * 999 = 127872: 6 digits after 10 shared zeros, and the
     * position after the keys (radix 1) */
    ck_assert_uint_eq(info.shared_prefix, 10);
    ck_assert_uint_eq(info.digits, 7);
    ck_assert_uint_eq(info.keys, 1000);
    ck_assert_uint_eq(info.bytes, len);
    /* Dense in their span: stored as they are (r = the span), and every
     * empty range between them is answered 0, whatever its width. */
    ck_assert(kv_rfilter_expected_fpr(f, 16) == 0);
    ck_assert_uint_le(len * 8, 16 * 1000);
    unsigned long fp = 0;
    for (uint64_t i = 0; i < 1000 * 64; i++) {
        if (i % 64 == 0)
            continue;
        uint64_t w = 1 + i % 63, j = i + w < (i / 64 + 1) * 64 ? i + w : (i / 64 + 1) * 64;
        char lo[17], hi[17];
        snprintf(lo, sizeof lo, "%016llu", (unsigned long long)(2 * i));
        snprintf(hi, sizeof hi, "%016llu", (unsigned long long)(2 * j));
        double e = 1;
        fp += kv_rfilter_may_hold(f, lo, 16, hi, 16, &e);
        ck_assert(e == 0);
    }
    ck_assert_msg(fp == 0, "%lu false positives", fp);
    kv_rfilter_free(f);
    kv_free(enc);
}
END_TEST

START_TEST(empty_filter_answers_no)
{
    kv_rfilter_builder *b;
    uint8_t *enc;
    size_t len;
    ck_assert_int_eq(kv_rfilter_builder_new(16, 1, &b), KV_OK);
    ck_assert_int_eq(kv_rfilter_builder_finish(b, &enc, &len), KV_OK);
    kv_rfilter_builder_free(b);
    kv_rfilter *f;
    ck_assert_int_eq(kv_rfilter_decode(enc, len, &f), KV_OK);
    double fpr = -1;
    ck_assert_int_eq(kv_rfilter_may_hold(f, NULL, 0, NULL, 0, &fpr), 0);
    ck_assert(fpr == 0);
    ck_assert_int_eq(kv_rfilter_may_hold(f, "a", 1, "b", 1, NULL), 0);
    kv_rfilter_info info;
    kv_rfilter_info_get(f, &info);
    ck_assert_uint_eq(info.keys, 0);
    ck_assert(info.bits_per_key == 0);
    ck_assert(kv_rfilter_expected_fpr(f, 10) == 0);
    kv_rfilter_free(f);
    kv_free(enc);
}
END_TEST

START_TEST(empty_ranges_answer_no)
{
    key k[3] = {{"b", 1}, {"c", 1}, {"d", 1}};
    uint8_t *enc;
    size_t len;
    kv_rfilter *f = build(k, 3, 16, 1, &enc, &len);
    double fpr = -1;
    ck_assert_int_eq(kv_rfilter_may_hold(f, "c", 1, "c", 1, &fpr), 0); /* lo == hi */
    ck_assert(fpr == 0);
    ck_assert_int_eq(kv_rfilter_may_hold(f, "d", 1, "b", 1, NULL), 0); /* lo > hi */
    ck_assert_int_eq(kv_rfilter_may_hold(f, "c\0", 2, "c", 1, NULL), 0);
    ck_assert_int_eq(kv_rfilter_may_hold(f, "", 0, "", 0, NULL), 0);
    /* Below and above every key: the map alone says no. */
    ck_assert_int_eq(kv_rfilter_may_hold(f, NULL, 0, "b", 1, NULL), 0);
    ck_assert_int_eq(kv_rfilter_may_hold(f, "d\1", 2, NULL, 0, NULL), 0);
    ck_assert_int_eq(kv_rfilter_may_hold(f, "e", 1, "z", 1, NULL), 0);
    ck_assert_int_eq(kv_rfilter_may_hold(f, "d", 1, NULL, 0, NULL), 1);
    ck_assert_int_eq(kv_rfilter_may_hold(f, NULL, 0, NULL, 0, NULL), 1);
    ck_assert_int_eq(kv_rfilter_may_hold(NULL, "a", 1, "b", 1, &fpr), 1);
    ck_assert(fpr == 1);
    kv_rfilter_free(f);
    kv_free(enc);
}
END_TEST

START_TEST(builder_refuses_bad_arguments)
{
    kv_rfilter_builder *b = (void *)1;
    ck_assert_int_eq(kv_rfilter_builder_new(3.9, 1, &b), KV_EINVAL);
    ck_assert_ptr_null(b);
    ck_assert_int_eq(kv_rfilter_builder_new(64.5, 1, &b), KV_EINVAL);
    ck_assert_int_eq(kv_rfilter_builder_new(NAN, 1, &b), KV_EINVAL);
    ck_assert_int_eq(kv_rfilter_builder_new(16, 1, NULL), KV_EINVAL);
    ck_assert_int_eq(kv_rfilter_builder_new(4, 1, &b), KV_OK);
    ck_assert_int_eq(kv_rfilter_builder_add(b, NULL, 1), KV_EINVAL);
    ck_assert_int_eq(kv_rfilter_builder_add(b, "b", 1), KV_OK);
    ck_assert_int_eq(kv_rfilter_builder_add(b, "b", 1), KV_OK); /* again: no-op */
    ck_assert_int_eq(kv_rfilter_builder_add(b, "a", 1), KV_EINVAL);
    ck_assert_int_eq(kv_rfilter_builder_add(b, "", 0), KV_EINVAL);
    ck_assert_int_eq(kv_rfilter_builder_add(b, "b\0", 2), KV_OK);
    ck_assert_uint_eq(kv_rfilter_builder_keys(b), 2);
    ck_assert_uint_eq(kv_rfilter_builder_keys(NULL), 0);
    ck_assert_int_eq(kv_rfilter_builder_add(NULL, "c", 1), KV_EINVAL);
    ck_assert_int_eq(kv_rfilter_builder_finish(b, NULL, NULL), KV_EINVAL);
    kv_rfilter_builder_free(b);
    kv_rfilter_builder_free(NULL);
    kv_rfilter *f = (void *)1;
    ck_assert_int_eq(kv_rfilter_decode(NULL, 0, &f), KV_EINVAL);
    ck_assert_ptr_null(f);
    ck_assert_int_eq(kv_rfilter_decode("x", 1, NULL), KV_EINVAL);
    kv_rfilter_free(NULL);
    ck_assert(kv_rfilter_expected_fpr(NULL, 1) == 1);
}
END_TEST

/* ---- FPR: measured against expected -------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void be64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (56 - 8 * i));
}

#define FPR_KEYS 100000
static const double fpr_bits[] = {8, 12, 16};
static const uint64_t fpr_widths[] = {1, 16, 256};

/* Uniform random 64-bit keys (8 bytes, big-endian), uniform random empty
 * ranges [x, x + w): the share answered 1 within 10% of the mean expected
 * FPR the filter reports. Trials: enough for 2000 expected positives (the
 * 10% is then 4.5 standard deviations), at least 100k. */
START_TEST(measured_fpr_within_10pct_of_expected)
{
    double bits = fpr_bits[_i / 3];
    uint64_t w = fpr_widths[_i % 3], s = 777 + (uint64_t)_i;
    uint64_t *v = malloc(FPR_KEYS * sizeof *v);
    for (size_t i = 0; i < FPR_KEYS; i++)
        v[i] = rng(&s);
    qsort(v, FPR_KEYS, sizeof *v, cmp_u64);
    kv_rfilter_builder *b;
    ck_assert_int_eq(kv_rfilter_builder_new(bits, s, &b), KV_OK);
    for (size_t i = 0; i < FPR_KEYS; i++) {
        uint8_t kb[8];
        be64(kb, v[i]);
        ck_assert_int_eq(kv_rfilter_builder_add(b, kb, 8), KV_OK);
    }
    uint8_t *enc;
    size_t len;
    ck_assert_int_eq(kv_rfilter_builder_finish(b, &enc, &len), KV_OK);
    kv_rfilter_builder_free(b);
    kv_rfilter *f;
    ck_assert_int_eq(kv_rfilter_decode(enc, len, &f), KV_OK);
    double first = kv_rfilter_expected_fpr(f, (double)w);
    uint64_t trials = (uint64_t)(2000 / first);
    trials = trials < 100000 ? 100000 : trials > 4000000 ? 4000000 : trials;
    double sum = 0;
    uint64_t empty = 0, pos = 0;
    while (empty < trials) {
        uint64_t x = rng(&s);
        if (x > UINT64_MAX - w)
            continue;
        uint64_t *at = v, *end = v + FPR_KEYS; /* first key >= x */
        while (at < end) {
            uint64_t *m = at + (end - at) / 2;
            if (*m < x)
                at = m + 1;
            else
                end = m;
        }
        if (at < v + FPR_KEYS && *at < x + w)
            continue; /* not empty */
        uint8_t lo[8], hi[8];
        be64(lo, x);
        be64(hi, x + w);
        double e;
        pos += kv_rfilter_may_hold(f, lo, 8, hi, 8, &e);
        sum += e;
        empty++;
    }
    double measured = (double)pos / (double)empty, expected = sum / (double)empty;
    if (verbose())
        printf("bits %g width %llu: measured %.6f expected %.6f (formula %.6f) over %llu\n", bits,
               (unsigned long long)w, measured, expected, first, (unsigned long long)empty);
    ck_assert_msg(fabs(measured - expected) <= 0.1 * expected,
                  "bits %g width %llu: measured %.6f expected %.6f", bits, (unsigned long long)w,
                  measured, expected);
    kv_rfilter_free(f);
    kv_free(enc);
    free(v);
}
END_TEST

/* Keys of a random 8-byte id, then an 8-byte counter (a device and its
 * timestamps; 256 keys an id, 64 apart), and empty ranges of counters
 * inside an id the table holds. The plain map would give all of an id's
 * keys one integer (every such range "maybe"); with the dictionary the
 * filter holds every key and width 16 meets about what it expects. Ranges
 * from each key to the key with a 0 byte more, and across ids, must all
 * be "maybe". */
START_TEST(id_counter_keys_use_a_dictionary)
{
    enum { IDS = 400, PER = 256, W = 16 };
    static const unsigned id_bytes[] = {8, 4};
    unsigned ib = id_bytes[_i];
    uint64_t s = 1717 + (uint64_t)_i, *ids = malloc(IDS * sizeof *ids);
    for (size_t i = 0; i < IDS; i++)
        ids[i] = ib == 8 ? rng(&s) : rng(&s) >> 32;
    qsort(ids, IDS, sizeof *ids, cmp_u64);
    kv_rfilter_builder *b;
    ck_assert_int_eq(kv_rfilter_builder_new(16, s, &b), KV_OK);
    for (size_t i = 0; i < IDS; i++)
        for (uint64_t j = 0; j < PER; j++) {
            uint8_t kb[16];
            put_be(kb, ids[i], ib);
            put_be(kb + ib, ID_T0 + 64 * j, 8);
            ck_assert_int_eq(kv_rfilter_builder_add(b, kb, ib + 8), KV_OK);
        }
    uint8_t *enc;
    size_t len;
    ck_assert_int_eq(kv_rfilter_builder_finish(b, &enc, &len), KV_OK);
    kv_rfilter_builder_free(b);
    kv_rfilter *f;
    ck_assert_int_eq(kv_rfilter_decode(enc, len, &f), KV_OK);
    kv_rfilter_info info;
    kv_rfilter_info_get(f, &info);
    if (ib == 8) { /* the plain map would hold IDS integers */
        ck_assert_int_eq(enc[4], 2);
        ck_assert_uint_eq(info.map_keys, IDS * PER);
        ck_assert_uint_ge(info.keys, IDS * PER * 99 / 100);
    }
    unsigned long fn = 0, fp = 0, trials = 200000;
    double esum = 0;
    for (unsigned long q = 0; q < trials; q++) {
        uint64_t id = ids[rng(&s) % IDS], j = rng(&s) % PER, x = ID_T0 + 64 * j;
        uint8_t lo[17], hi[17];
        put_be(lo, id, ib);
        put_be(hi, id, ib);
        uint64_t start = x + 1 + rng(&s) % (64 - W - 1);
        put_be(lo + ib, start, 8);
        put_be(hi + ib, start + W, 8);
        double e;
        fp += kv_rfilter_may_hold(f, lo, ib + 8, hi, ib + 8, &e);
        esum += e;
        /* the key itself, as a point range, and from it to the next id */
        put_be(lo + ib, x, 8);
        memcpy(hi, lo, ib + 8);
        hi[ib + 8] = 0;
        fn += !kv_rfilter_may_hold(f, lo, ib + 8, hi, ib + 9, NULL);
        put_be(hi, id + 1, ib);
        fn += !kv_rfilter_may_hold(f, lo, ib + 8, hi, ib, NULL);
        fn += !kv_rfilter_may_hold(f, NULL, 0, hi, ib, NULL);
        fn += !kv_rfilter_may_hold(f, lo, ib, NULL, 0, NULL);
    }
    double measured = (double)fp / (double)trials;
    if (verbose())
        printf("%u-byte ids: %llu values of %llu keys, %u digits, %.2f bits per key: width %d "
               "measured %.5f expected %.5f\n",
               ib, (unsigned long long)info.keys, (unsigned long long)info.map_keys, info.digits,
               (double)len * 8 / (IDS * PER), W, measured, esum / (double)trials);
    ck_assert_msg(fn == 0, "%lu false negatives", fn);
    ck_assert_msg(measured < 0.05, "width %d: measured FPR %.4f", W, measured);
    ck_assert_uint_le(len * 8, 17 * IDS * PER);
    kv_rfilter_free(f);
    kv_free(enc);
    free(ids);
}
END_TEST

/* ---- the codec ----------------------------------------------------------------------------- */

/* A filter of 200 keys: a version-1 one, or one with a dictionary (K_ID8:
 * 8 ids of 25 keys; version 2). */
static void small_filter(int dict, uint8_t **enc, size_t *len)
{
    key k[200];
    uint64_t s = 31;
    for (size_t i = 0; i < 200; i++)
        make_key(dict ? K_ID8 : K_VARLEN, &s, dict ? 4 * i : i, &k[i]);
    size_t n = sort_unique(k, 200);
    kv_rfilter *f = build(k, n, 10, 3, enc, len);
    ck_assert_int_eq((*enc)[4], dict ? 2 : 1);
    kv_rfilter_free(f);
}

START_TEST(decode_refuses_truncation)
{
    uint8_t *enc;
    size_t len;
    small_filter(_i, &enc, &len);
    for (size_t l = 0; l < len; l++) {
        kv_rfilter *f = (void *)1;
        ck_assert_int_eq(kv_rfilter_decode(enc, l, &f), KV_ECORRUPT);
        ck_assert_ptr_null(f);
        ck_assert_ptr_nonnull(strstr(kv_error_text(), "range filter"));
    }
    kv_free(enc);
}
END_TEST

START_TEST(decode_refuses_every_flipped_byte)
{
    uint8_t *enc;
    size_t len;
    small_filter(_i, &enc, &len);
    for (size_t i = 0; i < len; i++)
        for (unsigned bit = 0; bit < 8; bit += 7) {
            enc[i] ^= (uint8_t)(1u << bit);
            kv_rfilter *f = (void *)1;
            ck_assert_int_eq(kv_rfilter_decode(enc, len, &f), KV_ECORRUPT);
            ck_assert_ptr_null(f);
            enc[i] ^= (uint8_t)(1u << bit);
        }
    kv_rfilter *f;
    ck_assert_int_eq(kv_rfilter_decode(enc, len, &f), KV_OK);
    kv_rfilter_free(f);
    kv_free(enc);
}
END_TEST

/* Damage behind a recomputed checksum: the fields are checked against each
 * other and the Elias-Fano sequence's shape against its counts. */
START_TEST(decode_refuses_forged_fields)
{
    uint8_t *enc;
    size_t len;
    small_filter(_i, &enc, &len);
    /* offsets of doc/filter_format.md: 6 digits, 7 low bits, 8 block bits,
     * 24 n, 32 r; the last 8 bytes the checksum */
    struct forge_at {
        size_t off;
        uint8_t x;
    } forge[] = {{0, 1},
                 {4, 3},
                 {5, 2},
                 {6, 0xe0},
                 {7, 0x40},
                 {8, 0x10},
                 {10, 1},
                 {24, 1},
                 {24, 0x80},
                 {32, 0x80},
                 {39, 0x80},
                 {len - 9, 1},
                 {len - 9, 0x80},
                 /* version 2: depth, entries, reserved, keys */
                 {9, 0xff},
                 {9, 0x40},
                 {40, 0xff},
                 {43, 1},
                 {44, 1},
                 {48, 0xff},
                 {55, 1}};
    size_t nforge = sizeof forge / sizeof *forge - (_i ? 0 : 7);
    /* (r's low byte: the dictionary's filter hashes with l >= 8, where r
     * off by 128 keeps H and so every check; it only changes answers) */
    if (_i)
        forge[9].off = 36;
    if (!_i)
        forge[nforge++] = (struct forge_at){9, 1}; /* version 1: reserved */
    for (size_t t = 0; t < nforge; t++) {
        enc[forge[t].off] ^= forge[t].x;
        uint64_t sum = XXH3_64bits(enc, len - 8);
        uint8_t old[8];
        memcpy(old, enc + len - 8, 8);
        for (int i = 0; i < 8; i++)
            enc[len - 8 + i] = (uint8_t)(sum >> (8 * i));
        kv_rfilter *f = (void *)1;
        ck_assert_msg(kv_rfilter_decode(enc, len, &f) == KV_ECORRUPT, "forge %zu decoded", t);
        ck_assert_ptr_null(f);
        memcpy(enc + len - 8, old, 8);
        enc[forge[t].off] ^= forge[t].x;
    }
    kv_free(enc);
}
END_TEST

static void put_checksum(uint8_t *enc, size_t len)
{
    uint64_t sum = XXH3_64bits(enc, len - 8);
    for (int i = 0; i < 8; i++)
        enc[len - 8 + i] = (uint8_t)(sum >> (8 * i));
}

/* A dictionary whose entries are out of order or repeat, behind a
 * recomputed checksum: ranks would not follow the keys' order. */
START_TEST(decode_refuses_damaged_dictionaries)
{
    uint8_t *enc;
    size_t len;
    small_filter(1, &enc, &len);
    size_t c = enc[12] | (size_t)enc[13] << 8, d = enc[9], e = enc[40];
    ck_assert_uint_ge(e, 2);
    uint8_t *dict = enc + 56 + c, save[64];
    memcpy(save, dict, 2 * d);
    for (int t = 0; t < 3; t++) {
        if (t == 0) { /* the first two swapped */
            memcpy(dict, save + d, d);
            memcpy(dict + d, save, d);
        } else if (t == 1) { /* the first twice */
            memcpy(dict + d, save, d);
        } else { /* the first above the second */
            memset(dict, 0xff, d);
        }
        put_checksum(enc, len);
        kv_rfilter *f = (void *)1;
        ck_assert_int_eq(kv_rfilter_decode(enc, len, &f), KV_ECORRUPT);
        ck_assert_ptr_null(f);
        ck_assert_ptr_nonnull(strstr(kv_error_text(), "dictionary"));
        memcpy(dict, save, 2 * d);
    }
    put_checksum(enc, len);
    kv_rfilter *f;
    ck_assert_int_eq(kv_rfilter_decode(enc, len, &f), KV_OK);
    kv_rfilter_free(f);
    kv_free(enc);
}
END_TEST

/* doc/filter_format.md's worked example, byte for byte. */
START_TEST(encoding_matches_the_worked_example)
{
    static const uint8_t want[] = {0x4b, 0x56, 0x52, 0x46, 0x01, 0x00, 0x02, 0x01, 0x00, 0x00, 0x00,
                                   0x00, 0x01, 0x00, 0x00, 0x00, 0x2a, 0x00, 0x00, 0x00, 0x00, 0x00,
                                   0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x09,
                                   0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x61, 0x31, 0x08, 0x00,
                                   0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x49, 0x00,
                                   0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0xc2,
                                   0x67, 0x16, 0x97, 0x94, 0x4a, 0x5c, 0x0a};
    key k[3] = {{"a1", 2}, {"a5", 2}, {"a9", 2}};
    uint8_t *enc;
    size_t len;
    kv_rfilter *f = build(k, 3, 16, 0x2a, &enc, &len);
    ck_assert_uint_eq(len, sizeof want);
    ck_assert(memcmp(enc, want, len) == 0);
    ck_assert_int_eq(kv_rfilter_may_hold(f, "a2", 2, "a5", 2, NULL), 0);
    ck_assert_int_eq(kv_rfilter_may_hold(f, "a5", 2, "a6", 2, NULL), 1);
    kv_rfilter_free(f);
    kv_free(enc);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("range_filter");
    TCase *tc = test_tcase(s, "map", 300, 0);
    tcase_add_loop_test(tc, map_exhaustive_small_alphabets, 0,
                        (int)(sizeof alphabets / sizeof *alphabets));
    tcase_add_loop_test(tc, no_false_negatives_random_ranges, 0, 2 * K_KINDS);
    tcase_add_loop_test(tc, bounds_sharing_long_prefixes, 0, 2 * K_KINDS);
    tcase_add_loop_test(tc, map_lower_is_monotone, 0, 2 * K_KINDS);
    tcase_add_test(tc, decimal_keys_map_to_their_digits);
    tcase_add_test(tc, empty_filter_answers_no);
    tcase_add_test(tc, empty_ranges_answer_no);
    tcase_add_test(tc, builder_refuses_bad_arguments);
    tc = test_tcase(s, "fpr", 300, 0);
    tcase_add_loop_test(tc, measured_fpr_within_10pct_of_expected, 0, 9);
    tcase_add_loop_test(tc, id_counter_keys_use_a_dictionary, 0, 2);
    tc = test_tcase(s, "codec", 300, 0);
    tcase_add_test(tc, encoding_matches_the_worked_example);
    tcase_add_loop_test(tc, decode_refuses_truncation, 0, 2);
    tcase_add_loop_test(tc, decode_refuses_every_flipped_byte, 0, 2);
    tcase_add_loop_test(tc, decode_refuses_forged_fields, 0, 2);
    tcase_add_test(tc, decode_refuses_damaged_dictionaries);
    return s;
}
