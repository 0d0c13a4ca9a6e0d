/* check_rangedel.c - range tombstone sets (sstable/rangedel.c) against a
 * brute-force model: random tombstones over short keys of a small alphabet
 * (so that they overlap a lot), every key up to 4 bytes asked at random
 * snapshots; unions of sets against the union of their tombstones; the
 * keep callback; the block encoding, its every truncation and byte flip; a
 * reverse comparator; and tables with a range tombstone block. */
#define _XOPEN_SOURCE 700 /* POSIX 2008 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <kv/sstable.h>

#include "../sstable/internal.h"

#include "fixture.h"

/* ck_assert for the hot loops: Check records every passing assertion's
 * place (a write to its channel), which would take most of the time. */
#define EXPECT(c)                                                                                  \
    do {                                                                                           \
        if (!(c))                                                                                  \
            ck_abort_msg("%s:%d: %s", __FILE__, __LINE__, #c);                                     \
    } while (0)

/* ---- the model ------------------------------------------------------------------ */

#define ALPHA 3 /* keys over "abc" */
#define MAXK 4  /* ... of 0 to 4 bytes: every key asked */

struct mrt {
    uint8_t s[MAXK], e[MAXK];
    size_t slen, elen;
    uint64_t seq;
};

static int rev_compare(void *ctx, const void *a, size_t alen, const void *b, size_t blen)
{
    (void)ctx;
    size_t n = alen < blen ? alen : blen;
    int c = n ? memcmp(a, b, n) : 0;
    if (!c)
        c = (alen > blen) - (alen < blen);
    return -c;
}
static const kv_comparator reverse = {"test.reverse", rev_compare, NULL};

static int mcmp(const kv_comparator *cmp, const uint8_t *a, size_t alen, const uint8_t *b,
                size_t blen)
{
    if (cmp)
        return cmp->compare(cmp->ctx, a, alen, b, blen);
    size_t n = alen < blen ? alen : blen;
    int c = n ? memcmp(a, b, n) : 0;
    return c ? c : (alen > blen) - (alen < blen);
}

static uint64_t rng;
static uint64_t rnd(void)
{
    rng += 0x9E3779B97F4A7C15ull;
    return splitmix(rng);
}

static void rand_key(uint8_t *k, size_t *len)
{
    *len = (size_t)(rnd() % (MAXK + 1));
    for (size_t i = 0; i < *len; i++)
        k[i] = (uint8_t)('a' + rnd() % ALPHA);
}

/* n random tombstones (some empty or reversed), sequences 1 .. maxseq
 * (repeats allowed). */
static void rand_rts(struct mrt *m, size_t n, uint64_t maxseq)
{
    for (size_t i = 0; i < n; i++) {
        rand_key(m[i].s, &m[i].slen);
        rand_key(m[i].e, &m[i].elen);
        m[i].seq = 1 + rnd() % maxseq;
    }
}

static void to_rts(const struct mrt *m, size_t n, kv_rt *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = (kv_rt){m[i].s, m[i].slen, m[i].e, m[i].elen, m[i].seq};
}

/* The distinct sequences of the tombstones covering key (and passing
 * filt, when given), newest first, into q; returns how many. */
static size_t model_seqs(const kv_comparator *cmp, const struct mrt *m, size_t n, const uint8_t *k,
                         size_t klen, int (*filt)(uint64_t), uint64_t *q)
{
    size_t nq = 0;
    for (size_t i = 0; i < n; i++) {
        if (mcmp(cmp, m[i].s, m[i].slen, k, klen) > 0 || mcmp(cmp, k, klen, m[i].e, m[i].elen) >= 0)
            continue;
        if (filt && !filt(m[i].seq))
            continue;
        size_t j = 0;
        while (j < nq && q[j] > m[i].seq)
            j++;
        if (j < nq && q[j] == m[i].seq)
            continue;
        memmove(q + j + 1, q + j, (nq - j) * sizeof *q);
        q[j] = m[i].seq;
        nq++;
    }
    return nq;
}

/* Every key of up to MAXK bytes over the alphabet, in turn. */
static int next_key(uint8_t *k, size_t *len)
{
    /* counts in base ALPHA within the length, then grows the length */
    for (size_t i = *len; i-- > 0;) {
        if (k[i] < 'a' + ALPHA - 1) {
            k[i]++;
            return 1;
        }
        k[i] = 'a';
    }
    if (*len == MAXK)
        return 0;
    k[(*len)++] = 'a';
    return 1;
}

/* The set's structure: fragments non-empty, sorted, not overlapping,
 * sequences > 0 and strictly decreasing; max_seq right. */
static void check_shape(const kv_comparator *cmp, const kv_rtset *s)
{
    uint64_t max = 0;
    kv_rt_fragment prev = {0};
    for (size_t i = 0; i < kv_rtset_count(s); i++) {
        kv_rt_fragment f;
        kv_rtset_fragment(s, i, &f);
        EXPECT((long long)(mcmp(cmp, f.start, f.slen, f.end, f.elen)) < (long long)(0));
        if (i)
            EXPECT((long long)(mcmp(cmp, prev.end, prev.elen, f.start, f.slen)) <= (long long)(0));
        EXPECT((uint64_t)(f.nseq) >= (uint64_t)(1));
        for (size_t j = 0; j < f.nseq; j++) {
            EXPECT((uint64_t)(f.seqs[j]) > (uint64_t)(0));
            if (j)
                EXPECT((uint64_t)(f.seqs[j]) < (uint64_t)(f.seqs[j - 1]));
        }
        if (f.seqs[0] > max)
            max = f.seqs[0];
        prev = f;
    }
    EXPECT((uint64_t)(kv_rtset_max_seq(s)) == (uint64_t)(max));
    if (!s)
        EXPECT((uint64_t)(kv_rtset_bytes(s)) == (uint64_t)(0));
}

/* Every key, at the snapshots that matter (each sequence, one below, and
 * the newest): cover and the covering fragment's list agree with the model. */
static void check_against_model(const kv_comparator *cmp, const kv_rtset *s, const struct mrt *m,
                                size_t n, int (*filt)(uint64_t), uint64_t maxseq)
{
    check_shape(cmp, s);
    uint8_t k[MAXK];
    size_t klen = 0;
    uint64_t q[256];
    do {
        size_t nq = model_seqs(cmp, m, n, k, klen, filt, q);
        size_t i = kv_rtset_seek(s, k, klen);
        EXPECT((uint64_t)(i) <= (uint64_t)(kv_rtset_count(s)));
        kv_rt_fragment f = {0};
        if (i < kv_rtset_count(s)) {
            kv_rtset_fragment(s, i, &f);
            EXPECT((long long)(mcmp(cmp, f.end, f.elen, k, klen)) > (long long)(0));
            if (mcmp(cmp, f.start, f.slen, k, klen) > 0)
                f.nseq = 0; /* between fragments */
        }
        if (i > 0) { /* seek gives the first fragment ending after key */
            kv_rt_fragment g;
            kv_rtset_fragment(s, i - 1, &g);
            EXPECT((long long)(mcmp(cmp, g.end, g.elen, k, klen)) <= (long long)(0));
        }
        EXPECT((uint64_t)(f.nseq) == (uint64_t)(nq));
        for (size_t j = 0; j < nq; j++)
            EXPECT((uint64_t)(f.seqs[j]) == (uint64_t)(q[j]));
        for (uint64_t snap = 0; snap <= maxseq + 1; snap++) {
            uint64_t want = 0;
            for (size_t j = 0; j < nq && !want; j++)
                if (q[j] <= snap)
                    want = q[j];
            EXPECT((uint64_t)(kv_rtset_cover(s, k, klen, snap)) == (uint64_t)(want));
        }
        EXPECT((uint64_t)(kv_rtset_cover(s, k, klen, UINT64_MAX)) == (uint64_t)(nq ? q[0] : 0));
    } while (next_key(k, &klen));
}

static kv_rtset *build(const kv_comparator *cmp, const struct mrt *m, size_t n)
{
    kv_rt *rts = malloc((n ? n : 1) * sizeof *rts);
    to_rts(m, n, rts);
    kv_rtset *s = (kv_rtset *)1;
    EXPECT((long long)(kv_rtset_union(cmp, NULL, 0, rts, n, NULL, NULL, &s)) == (long long)(KV_OK));
    free(rts);
    return s;
}

static void check_encoding_equal(const kv_rtset *a, const kv_rtset *b)
{
    uint8_t *pa, *pb;
    size_t la, lb;
    EXPECT((long long)(kv_rtset_encode(a, &pa, &la)) == (long long)(KV_OK));
    EXPECT((long long)(kv_rtset_encode(b, &pb, &lb)) == (long long)(KV_OK));
    EXPECT((uint64_t)(la) == (uint64_t)(lb));
    if (la)
        EXPECT((long long)(memcmp(pa, pb, la)) == (long long)(0));
    free(pa);
    free(pb);
}

/* Encodes s, decodes it back: the same set. */
static void check_round_trip(const kv_comparator *cmp, const kv_rtset *s)
{
    uint8_t *p;
    size_t len;
    EXPECT((long long)(kv_rtset_encode(s, &p, &len)) == (long long)(KV_OK));
    kv_rtset *d = (kv_rtset *)1;
    EXPECT((long long)(kv_rtset_decode(cmp, p, len, &d)) == (long long)(KV_OK));
    EXPECT((uint64_t)(kv_rtset_count(d)) == (uint64_t)(kv_rtset_count(s)));
    EXPECT((uint64_t)(kv_rtset_max_seq(d)) == (uint64_t)(kv_rtset_max_seq(s)));
    check_encoding_equal(s, d);
    kv_rtset_unref(d);
    free(p);
}

/* ---- sets ------------------------------------------------------------------------ */

static void random_sets(const kv_comparator *cmp)
{
    for (int round = 0; round < 300; round++) {
        size_t n = (size_t)(rnd() % 24);
        uint64_t maxseq = 1 + rnd() % 40;
        struct mrt m[24];
        rand_rts(m, n, maxseq);
        kv_rtset *s = build(cmp, m, n);
        check_against_model(cmp, s, m, n, NULL, maxseq);
        check_round_trip(cmp, s);
        kv_rtset_unref(s);
    }
}

START_TEST(union_of_tombstones_matches_the_model)
{
    rng = 1;
    random_sets(NULL);
}
END_TEST

START_TEST(union_under_a_reverse_comparator)
{
    rng = 2;
    random_sets(&reverse);
}
END_TEST

/* Splits random tombstones among several sets and loose ones: the union
 * of all is the set of all the tombstones, fragment for fragment. */
static void union_of_sets(const kv_comparator *cmp)
{
    for (int round = 0; round < 200; round++) {
        size_t n = (size_t)(rnd() % 40);
        uint64_t maxseq = 1 + rnd() % 60;
        struct mrt m[40];
        rand_rts(m, n, maxseq);
        size_t nset = 1 + (size_t)(rnd() % 4), cut[6] = {0};
        for (size_t i = 1; i <= nset; i++)
            cut[i] = cut[i - 1] + (size_t)(rnd() % (n - cut[i - 1] + 1));
        kv_rtset *sets[5] = {0};
        for (size_t i = 0; i < nset; i++)
            sets[i] = build(cmp, m + cut[i], cut[i + 1] - cut[i]);
        sets[nset] = NULL; /* skipped */
        kv_rt rts[40];
        to_rts(m + cut[nset], n - cut[nset], rts);
        kv_rtset *u, *all = build(cmp, m, n);
        EXPECT((long long)(kv_rtset_union(cmp, (const kv_rtset *const *)sets, nset + 1, rts,
                                          n - cut[nset], NULL, NULL, &u)) == (long long)(KV_OK));
        check_against_model(cmp, u, m, n, NULL, maxseq);
        check_encoding_equal(u, all);
        /* and again, the union with the union: nothing changes */
        kv_rtset *v;
        const kv_rtset *two[2] = {u, all};
        EXPECT((long long)(kv_rtset_union(cmp, two, 2, NULL, 0, NULL, NULL, &v)) ==
               (long long)(KV_OK));
        check_encoding_equal(v, all);
        kv_rtset_unref(v);
        kv_rtset_unref(u);
        kv_rtset_unref(all);
        for (size_t i = 0; i < nset; i++)
            kv_rtset_unref(sets[i]);
    }
}

START_TEST(union_of_sets_equals_union_of_their_tombstones)
{
    rng = 3;
    union_of_sets(NULL);
    union_of_sets(&reverse);
}
END_TEST

/* A store's memtable: one tombstone at a time, each commit a union of the
 * last set and the new one. */
START_TEST(one_at_a_time_like_a_memtable)
{
    rng = 4;
    for (int round = 0; round < 20; round++) {
        struct mrt m[60];
        size_t n = 60;
        rand_rts(m, n, 1000);
        kv_rtset *s = NULL;
        for (size_t i = 0; i < n; i++) {
            m[i].seq = i + 1; /* commits in order */
            kv_rt rt;
            to_rts(m + i, 1, &rt);
            kv_rtset *t;
            const kv_rtset *old = s;
            EXPECT((long long)(kv_rtset_union(NULL, &old, 1, &rt, 1, NULL, NULL, &t)) ==
                   (long long)(KV_OK));
            kv_rtset_unref(s);
            s = t;
        }
        check_against_model(NULL, s, m, n, NULL, n);
        kv_rtset_unref(s);
    }
}
END_TEST

static int odd(uint64_t seq)
{
    return seq % 3 != 0;
}

static size_t keep_calls;
static size_t keep_odd(void *ctx, const uint8_t *start, size_t slen, const uint8_t *end,
                       size_t elen, uint64_t *seqs, size_t nseq)
{
    EXPECT((const void *)(ctx) == (const void *)(&keep_calls));
    EXPECT((long long)(mcmp(NULL, start, slen, end, elen)) < (long long)(0));
    keep_calls++;
    size_t k = 0;
    for (size_t i = 0; i < nseq; i++)
        if (odd(seqs[i]))
            seqs[k++] = seqs[i];
    return k;
}

START_TEST(keep_drops_sequences)
{
    rng = 5;
    for (int round = 0; round < 200; round++) {
        size_t n = (size_t)(rnd() % 24);
        uint64_t maxseq = 1 + rnd() % 30;
        struct mrt m[24];
        rand_rts(m, n, maxseq);
        kv_rtset *all = build(NULL, m, n), *s;
        keep_calls = 0;
        EXPECT((long long)(kv_rtset_union(NULL, (const kv_rtset *const *)&all, 1, NULL, 0, keep_odd,
                                          &keep_calls, &s)) == (long long)(KV_OK));
        EXPECT((uint64_t)(keep_calls) == (uint64_t)(kv_rtset_count(all)));
        check_against_model(NULL, s, m, n, odd, maxseq);
        /* the same through the tombstones */
        kv_rt rts[24];
        to_rts(m, n, rts);
        kv_rtset *t;
        EXPECT((long long)(kv_rtset_union(NULL, NULL, 0, rts, n, keep_odd, &keep_calls, &t)) ==
               (long long)(KV_OK));
        check_encoding_equal(s, t);
        kv_rtset_unref(t);
        kv_rtset_unref(s);
        kv_rtset_unref(all);
    }
}
END_TEST

START_TEST(edges_and_bad_arguments)
{
    kv_rtset *s = (kv_rtset *)1;
    EXPECT((long long)(kv_rtset_union(NULL, NULL, 0, NULL, 0, NULL, NULL, &s)) ==
           (long long)(KV_OK));
    EXPECT(NULL == s);
    /* empty and reversed tombstones only: no set */
    kv_rt rts[3] = {{(const uint8_t *)"b", 1, (const uint8_t *)"b", 1, 5},
                    {(const uint8_t *)"c", 1, (const uint8_t *)"a", 1, 6},
                    {NULL, 0, NULL, 0, 7}};
    s = (kv_rtset *)1;
    EXPECT((long long)(kv_rtset_union(NULL, NULL, 0, rts, 3, NULL, NULL, &s)) ==
           (long long)(KV_OK));
    EXPECT(NULL == s);
    /* the empty key starts the bytewise order */
    rts[0] = (kv_rt){NULL, 0, (const uint8_t *)"b", 1, 9};
    EXPECT((long long)(kv_rtset_union(NULL, NULL, 0, rts, 1, NULL, NULL, &s)) ==
           (long long)(KV_OK));
    EXPECT((uint64_t)(kv_rtset_count(s)) == (uint64_t)(1));
    EXPECT((uint64_t)(kv_rtset_cover(s, "", 0, 9)) == (uint64_t)(9));
    EXPECT((uint64_t)(kv_rtset_cover(s, "", 0, 8)) == (uint64_t)(0));
    EXPECT((uint64_t)(kv_rtset_cover(s, "a\xff\xff", 3, 100)) == (uint64_t)(9));
    EXPECT((uint64_t)(kv_rtset_cover(s, "b", 1, 100)) == (uint64_t)(0));
    EXPECT((uint64_t)(kv_rtset_bytes(s)) > (uint64_t)(0));
    /* one set alone: shared, not copied */
    kv_rtset *t;
    const kv_rtset *one = s;
    EXPECT((long long)(kv_rtset_union(NULL, &one, 1, NULL, 0, NULL, NULL, &t)) ==
           (long long)(KV_OK));
    EXPECT((const void *)(t) == (const void *)(s));
    kv_rtset_unref(t);
    kv_rtset_ref(s);
    kv_rtset_unref(s);
    /* sequences 0 and past 2^56 - 1 are refused */
    rts[0].seq = 0;
    EXPECT((long long)(kv_rtset_union(NULL, NULL, 0, rts, 1, NULL, NULL, &t)) ==
           (long long)(KV_EINVAL));
    rts[0].seq = (uint64_t)1 << 56;
    EXPECT((long long)(kv_rtset_union(NULL, NULL, 0, rts, 1, NULL, NULL, &t)) ==
           (long long)(KV_EINVAL));
    rts[0].seq = ((uint64_t)1 << 56) - 1;
    EXPECT((long long)(kv_rtset_union(NULL, &one, 1, rts, 1, NULL, NULL, &t)) ==
           (long long)(KV_OK));
    EXPECT((uint64_t)(kv_rtset_max_seq(t)) == (uint64_t)(((uint64_t)1 << 56) - 1));
    check_round_trip(NULL, t);
    kv_rtset_unref(t);
    EXPECT((long long)(kv_rtset_union(NULL, NULL, 0, NULL, 0, NULL, NULL, NULL)) ==
           (long long)(KV_EINVAL));
    /* NULL sets */
    EXPECT((uint64_t)(kv_rtset_count(NULL)) == (uint64_t)(0));
    EXPECT((uint64_t)(kv_rtset_seek(NULL, "a", 1)) == (uint64_t)(0));
    EXPECT((uint64_t)(kv_rtset_cover(NULL, "a", 1, 100)) == (uint64_t)(0));
    EXPECT((uint64_t)(kv_rtset_bytes(NULL)) == (uint64_t)(0));
    EXPECT((uint64_t)(kv_rtset_max_seq(NULL)) == (uint64_t)(0));
    kv_rtset_ref(NULL);
    kv_rtset_unref(NULL);
    uint8_t *p = (uint8_t *)1;
    size_t len = 1;
    EXPECT((long long)(kv_rtset_encode(NULL, &p, &len)) == (long long)(KV_OK));
    EXPECT((uint64_t)(len) == (uint64_t)(0));
    free(p);
    s = (kv_rtset *)1;
    EXPECT((long long)(kv_rtset_decode(NULL, NULL, 0, &s)) == (long long)(KV_OK));
    EXPECT(NULL == s);
    EXPECT((long long)(kv_rtset_decode(NULL, (const uint8_t *)"\0\0\0\0", 4, &s)) ==
           (long long)(KV_OK));
    EXPECT(NULL == s);
    kv_rtset_unref((kv_rtset *)one);
}
END_TEST

/* A known encoding, byte for byte (doc/sstable_format.md's example):
 * [a, c) at 7 and 3 (two tombstones), [c, d) at 7. */
START_TEST(encoding_known_answer)
{
    kv_rt rts[2] = {{(const uint8_t *)"a", 1, (const uint8_t *)"d", 1, 7},
                    {(const uint8_t *)"a", 1, (const uint8_t *)"c", 1, 3}};
    kv_rtset *s;
    EXPECT((long long)(kv_rtset_union(NULL, NULL, 0, rts, 2, NULL, NULL, &s)) ==
           (long long)(KV_OK));
    uint8_t *p;
    size_t len;
    EXPECT((long long)(kv_rtset_encode(s, &p, &len)) == (long long)(KV_OK));
    static const uint8_t want[] = {2, 0, 0, 0, 1, 'a', 1, 'c', 2, 7, 3, 1, 'c', 1, 'd', 1, 7};
    EXPECT((uint64_t)(len) == (uint64_t)(sizeof want));
    EXPECT((long long)(memcmp(p, want, len)) == (long long)(0));
    free(p);
    /* a byte more: refused */
    uint8_t more[sizeof want + 1];
    memcpy(more, want, sizeof want);
    more[sizeof want] = 0;
    kv_rtset *d = (kv_rtset *)1;
    EXPECT(kv_rtset_decode(NULL, more, sizeof more, &d) == KV_ECORRUPT);
    EXPECT(d == NULL);
    EXPECT(strstr(kv_error_text(), "after the last fragment") != NULL);
    EXPECT(kv_rtset_decode(NULL, want, sizeof want, &d) == KV_OK);
    EXPECT(kv_rtset_cover(d, "b", 1, 5) == 3);
    EXPECT(kv_rtset_cover(d, "c", 1, 5) == 0);
    EXPECT(kv_rtset_cover(d, "c", 1, 7) == 7);
    kv_rtset_unref(d);
    kv_rtset_unref(s);
}
END_TEST

/* Every truncation and every byte flip (each bit, and a few whole-byte
 * values) of encoded random sets: KV_ECORRUPT with a text, or a set of
 * the right shape. */
static void damage(const kv_comparator *cmp)
{
    size_t corrupt = 0, valid = 0;
    for (int round = 0; round < 200; round++) {
        size_t n = 1 + (size_t)(rnd() % 12);
        struct mrt m[12];
        rand_rts(m, n, 1 + rnd() % 300);
        kv_rtset *s = build(cmp, m, n);
        uint8_t *p;
        size_t len;
        EXPECT((long long)(kv_rtset_encode(s, &p, &len)) == (long long)(KV_OK));
        uint8_t *b = malloc(len ? len : 1);
        /* v -1: a truncation to cut bytes; v >= 0: the whole block, byte at changed */
        for (int v = -1; v < 12; v++) {
            for (size_t at = 0; at <= len; at++) {
                size_t cut = v < 0 ? at : len;
                if (v >= 0 && at == len)
                    break;
                memcpy(b, p, len);
                if (v >= 8)
                    b[at] = (uint8_t)(v == 8 ? 0 : v == 9 ? 0xFF : v == 10 ? 0x80 : 0x7F);
                else if (v >= 0)
                    b[at] ^= (uint8_t)(1u << v);
                kv_rtset *d = (kv_rtset *)1;
                int rc = kv_rtset_decode(cmp, b, cut, &d);
                if (rc == KV_OK) {
                    check_shape(cmp, d);
                    kv_rtset_unref(d);
                    valid++;
                } else {
                    EXPECT((long long)(rc) == (long long)(KV_ECORRUPT));
                    EXPECT(NULL == d);
                    EXPECT(NULL != strstr(kv_error_text(), "range tombstone block"));
                    corrupt++;
                }
            }
        }
        free(b);
        free(p);
        kv_rtset_unref(s);
    }
    EXPECT((uint64_t)(corrupt) > (uint64_t)(0));
    EXPECT((uint64_t)(valid) > (uint64_t)(0));
}

START_TEST(damaged_blocks_are_refused_or_sound)
{
    rng = 6;
    damage(NULL);
    damage(&reverse);
}
END_TEST

/* ---- suite ------------------------------------------------------------------------ */

Suite *test_suite(void)
{
    Suite *s = suite_create("rangedel");
    TCase *tc = test_tcase(s, "set", 300, 0);
    tcase_add_test(tc, union_of_tombstones_matches_the_model);
    tcase_add_test(tc, union_under_a_reverse_comparator);
    tcase_add_test(tc, union_of_sets_equals_union_of_their_tombstones);
    tcase_add_test(tc, one_at_a_time_like_a_memtable);
    tcase_add_test(tc, keep_drops_sequences);
    tcase_add_test(tc, edges_and_bad_arguments);
    tcase_add_test(tc, encoding_known_answer);
    tcase_add_test(tc, damaged_blocks_are_refused_or_sound);
    return s;
}
