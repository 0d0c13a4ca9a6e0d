/* check_rangedel.c - range tombstone sets (sstable/rangedel.c) against a
 * brute-force model: random tombstones over short keys of a small alphabet
 * (so that they overlap a lot), every key up to 4 bytes asked at random
 * snapshots; unions of sets against the union of their tombstones; the
 * keep callback; the block encoding, its every truncation and byte flip; a
 * reverse comparator; and tables with a range tombstone block. */
#define _XOPEN_SOURCE 700 /* POSIX 2008 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <xxhash.h>

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
#define MAXP 24 /* after a prefix of up to this many bytes (kpre) */

/* A prefix of half the keys the model makes and asks, "" for none: with
 * one of 24 bytes, keys with it and keys without share no first byte, so
 * a bytewise set's end words (rangedel.c: bytes [0, 8) then) tie for all
 * the keys with it, and only the keys tell those apart. */
static const char *kpre = "";
static size_t kplen;

struct mrt {
    uint8_t s[MAXP + MAXK], e[MAXP + MAXK];
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

/* A random key: kpre (half the time, when there is one) and a short
 * random part. */
static void rand_key(uint8_t *k, size_t *len)
{
    size_t pl = kplen && rnd() % 2 ? kplen : 0;
    memcpy(k, kpre, pl);
    *len = pl + (size_t)(rnd() % (MAXK + 1));
    for (size_t i = pl; i < *len; i++)
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
    uint8_t suffix[MAXK], k[MAXP + MAXK];
    size_t slen = 0, klen;
    uint64_t q[256];
    /* each suffix after the prefix, and alone (outside the prefix: no cover) */
    for (int bare = 0;; bare = !bare) {
        if (bare && !kplen)
            continue;
        size_t pl = bare ? 0 : kplen;
        memcpy(k, kpre, pl);
        memcpy(k + pl, suffix, slen);
        klen = pl + slen;
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
        if ((bare || !kplen) && !next_key(suffix, &slen))
            break;
    }
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

/* A store's memtable: a few tombstones at a time, each commit a union of
 * the last set and the new ones (which sweeps only where they fall): the
 * same set, fragment for fragment, as one union of them all. */
static void memtable_commits(const kv_comparator *cmp)
{
    for (int round = 0; round < 40; round++) {
        struct mrt m[60];
        size_t n = 60;
        rand_rts(m, n, 1000);
        kv_rtset *s = NULL;
        for (size_t i = 0; i < n;) {
            size_t k = 1 + (size_t)(rnd() % 3);
            if (k > n - i)
                k = n - i;
            kv_rt rt[3];
            for (size_t j = 0; j < k; j++)
                m[i + j].seq = i + j + 1; /* commits in order */
            to_rts(m + i, k, rt);
            kv_rtset *t;
            const kv_rtset *old = s;
            EXPECT(kv_rtset_union(cmp, &old, 1, rt, k, NULL, NULL, &t) == KV_OK);
            kv_rtset_unref(s);
            s = t;
            i += k;
            if (rnd() % 8 == 0) {
                check_shape(cmp, s);
                kv_rtset *all = build(cmp, m, i);
                check_encoding_equal(s, all);
                kv_rtset_unref(all);
            }
        }
        check_against_model(cmp, s, m, n, NULL, n);
        kv_rtset *all = build(cmp, m, n);
        check_encoding_equal(s, all);
        kv_rtset_unref(all);
        kv_rtset_unref(s);
    }
}

START_TEST(one_at_a_time_like_a_memtable)
{
    rng = 4;
    memtable_commits(NULL);
    memtable_commits(&reverse);
}
END_TEST

/* Keys whose end words tie (see kpre): the searches go by the keys. */
static void long_keys(void (*run)(const kv_comparator *), const kv_comparator *cmp)
{
    kpre = "0123456789abcdefXXXXXXXX";
    kplen = strlen(kpre);
    run(cmp);
    kpre = "";
    kplen = 0;
}

START_TEST(long_keys_whose_words_tie)
{
    rng = 12;
    long_keys(random_sets, NULL);
    long_keys(random_sets, &reverse);
    long_keys(union_of_sets, NULL);
    long_keys(memtable_commits, NULL);
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
                if (len)
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


/* ---- tables ------------------------------------------------------------------------ */

static uint8_t *slurp(const char *p, size_t *len)
{
    FILE *f = fopen(p, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
    ck_assert_uint_eq(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

static void spit(const char *p, const uint8_t *b, size_t len)
{
    FILE *f = fopen(p, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(b, 1, len, f), len);
    fclose(f);
}

/* Writes `name` in test_dir: npairs pairs (keys "k%06zu", values of 40
 * bytes), and, when block is not NULL, the range tombstone block. */
static void write_table(const char *name, const kv_sst_options *o, size_t npairs,
                        const uint8_t *block, size_t blen, char *p, size_t plen)
{
    test_path(p, plen, name);
    kv_sst_writer *w;
    ck_assert_int_eq(kv_sst_writer_new(p, o, &w), KV_OK);
    if (block)
        ck_assert_int_eq(kv_sst_writer_set_range_tombstones(w, block, blen), KV_OK);
    for (size_t i = 0; i < npairs; i++) {
        char k[16], v[40];
        int kl = snprintf(k, sizeof k, "k%06zu", o && o->comparator ? npairs - 1 - i : i);
        memset(v, 'a' + (int)(i % 26), sizeof v);
        ck_assert_int_eq(kv_sst_writer_add(w, k, (size_t)kl, v, sizeof v), KV_OK);
    }
    ck_assert_int_eq(kv_sst_writer_finish(w, NULL), KV_OK);
}

/* A set over "k..." keys: n random tombstones. */
static kv_rtset *table_set(const kv_comparator *cmp, size_t n, uint8_t **block, size_t *blen)
{
    char keys[64][2][16];
    kv_rt rts[64];
    ck_assert_uint_le(n, 64);
    for (size_t i = 0; i < n; i++) {
        uint64_t a = rnd() % 3000, b = a + 1 + rnd() % 200;
        int al = snprintf(keys[i][0], 16, "k%06llu", (unsigned long long)a);
        int bl = snprintf(keys[i][1], 16, "k%06llu", (unsigned long long)b);
        rts[i] = cmp ? (kv_rt){(const uint8_t *)keys[i][1], (size_t)bl, (const uint8_t *)keys[i][0],
                               (size_t)al, 1 + rnd() % 1000}
                     : (kv_rt){(const uint8_t *)keys[i][0], (size_t)al, (const uint8_t *)keys[i][1],
                               (size_t)bl, 1 + rnd() % 1000};
    }
    kv_rtset *s;
    ck_assert_int_eq(kv_rtset_union(cmp, NULL, 0, rts, n, NULL, NULL, &s), KV_OK);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(kv_rtset_encode(s, block, blen), KV_OK);
    return s;
}

/* r's range tombstones are s's: the bytes, and fragment by fragment. */
static void check_table_tombstones(kv_sst_reader *r, const kv_rtset *s, const uint8_t *block,
                                   size_t blen)
{
    const uint8_t *p;
    size_t len;
    kv_sst_reader_range_tombstones(r, &p, &len);
    ck_assert_uint_eq(len, blen);
    ck_assert_int_eq(memcmp(p, block, len), 0);
    ck_assert_uint_eq(kv_sst_range_tombstone_count(r), kv_rtset_count(s));
    for (size_t i = 0; i < kv_rtset_count(s); i++) {
        kv_rt_fragment f;
        kv_sst_range_tombstone t;
        kv_rtset_fragment(s, i, &f);
        ck_assert_int_eq(kv_sst_range_tombstone_get(r, i, &t), KV_OK);
        ck_assert_uint_eq(t.start_len, f.slen);
        ck_assert_uint_eq(t.end_len, f.elen);
        ck_assert_uint_eq(t.nseq, f.nseq);
        ck_assert_int_eq(memcmp(t.start, f.start, f.slen), 0);
        ck_assert_int_eq(memcmp(t.end, f.end, f.elen), 0);
        ck_assert_int_eq(memcmp(t.seqs, f.seqs, f.nseq * sizeof *f.seqs), 0);
    }
    kv_sst_range_tombstone t;
    ck_assert_int_eq(kv_sst_range_tombstone_get(r, kv_rtset_count(s), &t), KV_EINVAL);
    ck_assert_ptr_null(t.start);
}

static void table_round_trip(const kv_comparator *cmp, size_t dict_bytes, uint32_t plain_version)
{
    kv_sst_options o;
    kv_sst_options_init(&o);
    o.comparator = cmp;
    o.dict_bytes = dict_bytes;
    o.block_size = 512;
    uint8_t *block;
    size_t blen;
    kv_rtset *s = table_set(cmp, 40, &block, &blen);
    char pa[256], pb[256], pc[256], pd[256];
    write_table("plain.sst", &o, 3000, NULL, 0, pa, sizeof pa);
    write_table("empty_block.sst", &o, 3000, (const uint8_t *)"", 0, pb, sizeof pb);
    write_table("zero_count.sst", &o, 3000, (const uint8_t *)"\0\0\0\0", 4, pc, sizeof pc);
    write_table("rt.sst", &o, 3000, block, blen, pd, sizeof pd);
    /* without tombstones: byte for byte the table written without the call */
    size_t la, lb, lc;
    uint8_t *a = slurp(pa, &la), *b = slurp(pb, &lb), *c = slurp(pc, &lc);
    ck_assert_uint_eq(la, lb);
    ck_assert_uint_eq(la, lc);
    ck_assert_int_eq(memcmp(a, b, la), 0);
    ck_assert_int_eq(memcmp(a, c, la), 0);
    ck_assert_uint_eq(a[la - 72 + 8], plain_version);
    free(a);
    free(b);
    free(c);
    kv_sst_reader *r;
    kv_sst_properties props;
    ck_assert_int_eq(kv_sst_reader_open_cmp(pa, NULL, NULL, 1, 0, cmp, &r), KV_OK);
    kv_sst_reader_properties(r, &props);
    ck_assert_uint_eq(props.format_version, plain_version);
    ck_assert_uint_eq(kv_sst_range_tombstone_count(r), 0);
    const uint8_t *p = (const uint8_t *)1;
    size_t len = 1;
    kv_sst_reader_range_tombstones(r, &p, &len);
    ck_assert_ptr_null(p);
    ck_assert_uint_eq(len, 0);
    kv_sst_reader_close(r);
    /* with: version 3, the same pairs, the tombstones back */
    ck_assert_int_eq(kv_sst_reader_open_cmp(pd, NULL, NULL, 2, 0, cmp, &r), KV_OK);
    kv_sst_reader_properties(r, &props);
    ck_assert_uint_eq(props.format_version, 3);
    ck_assert_uint_eq(props.entries, 3000);
    ck_assert_uint_eq(props.dict_bytes > 0, plain_version == 2);
    check_table_tombstones(r, s, block, blen);
    ck_assert_int_eq(kv_sst_verify(r), KV_OK);
    void *v;
    size_t vlen;
    ck_assert_int_eq(kv_sst_get(r, "k001234", 7, &v, &vlen), KV_OK);
    ck_assert_uint_eq(vlen, 40);
    kv_free(v);
    kv_sst_reader_close(r);
    kv_rtset_unref(s);
    free(block);
}

START_TEST(table_with_tombstones_is_version_3)
{
    rng = 7;
    table_round_trip(NULL, 0, 1);
}
END_TEST

START_TEST(table_with_tombstones_and_a_dictionary)
{
    rng = 8;
    table_round_trip(NULL, 4096, 2);
}
END_TEST

START_TEST(table_with_tombstones_under_a_comparator)
{
    rng = 9;
    table_round_trip(&reverse, 0, 1);
}
END_TEST

/* Tombstones and no pair: the table opens, iterates empty, verifies. */
START_TEST(table_of_tombstones_alone)
{
    rng = 10;
    uint8_t *block;
    size_t blen;
    kv_rtset *s = table_set(NULL, 5, &block, &blen);
    char p[256];
    write_table("alone.sst", NULL, 0, block, blen, p, sizeof p);
    kv_sst_reader *r;
    ck_assert_int_eq(kv_sst_reader_open(p, NULL, 1, &r), KV_OK);
    kv_sst_properties props;
    kv_sst_reader_properties(r, &props);
    ck_assert_uint_eq(props.format_version, 3);
    ck_assert_uint_eq(props.entries, 0);
    ck_assert_uint_eq(props.smallest_len + props.largest_len, 0);
    check_table_tombstones(r, s, block, blen);
    ck_assert_int_eq(kv_sst_verify(r), KV_OK);
    kv_sst_iter *it;
    ck_assert_int_eq(kv_sst_iter_new(r, &it), KV_OK);
    kv_sst_iter_seek_first(it);
    ck_assert(!kv_sst_iter_valid(it));
    kv_sst_iter_free(it);
    void *v;
    size_t vlen;
    ck_assert_int_eq(kv_sst_get(r, "k000001", 7, &v, &vlen), KV_NOTFOUND);
    kv_sst_reader_close(r);
    /* without a filter too */
    kv_sst_options o;
    kv_sst_options_init(&o);
    o.bits_per_key = 0;
    write_table("alone_nofilter.sst", &o, 0, block, blen, p, sizeof p);
    ck_assert_int_eq(kv_sst_reader_open(p, NULL, 1, &r), KV_OK);
    check_table_tombstones(r, s, block, blen);
    kv_sst_reader_close(r);
    kv_rtset_unref(s);
    free(block);
}
END_TEST

struct lister {
    kv_sst_reader *r;
    const kv_rtset *s;
    int bad;
};

static void *list_all(void *arg)
{
    struct lister *l = arg;
    for (size_t i = kv_rtset_count(l->s); i-- > 0;) {
        kv_sst_range_tombstone t;
        kv_rt_fragment f;
        kv_rtset_fragment(l->s, i, &f);
        if (kv_sst_range_tombstone_get(l->r, i, &t) != KV_OK || t.nseq != f.nseq ||
            t.seqs[0] != f.seqs[0] || t.start_len != f.slen ||
            memcmp(t.start, f.start, f.slen) != 0)
            l->bad = 1;
    }
    return NULL;
}

/* The first kv_sst_range_tombstone_get decodes the block: threads that
 * race to it all get the same fragments (and nothing leaks). */
START_TEST(range_tombstones_listed_by_threads_at_once)
{
    rng = 13;
    uint8_t *block;
    size_t blen;
    kv_rtset *s = table_set(NULL, 64, &block, &blen);
    char p[256];
    write_table("threads.sst", NULL, 10, block, blen, p, sizeof p);
    for (int round = 0; round < 20; round++) {
        kv_sst_reader *r;
        ck_assert_int_eq(kv_sst_reader_open(p, NULL, 1, &r), KV_OK);
        pthread_t th[4];
        struct lister l[4];
        for (int i = 0; i < 4; i++) {
            l[i] = (struct lister){r, s, 0};
            ck_assert_int_eq(pthread_create(&th[i], NULL, list_all, &l[i]), 0);
        }
        for (int i = 0; i < 4; i++) {
            pthread_join(th[i], NULL);
            ck_assert_int_eq(l[i].bad, 0);
        }
        kv_sst_reader_close(r);
    }
    kv_rtset_unref(s);
    free(block);
}
END_TEST

START_TEST(writer_refuses_a_bad_block)
{
    char p[256];
    test_path(p, sizeof p, "bad.sst");
    kv_sst_writer *w;
    ck_assert_int_eq(kv_sst_writer_new(p, NULL, &w), KV_OK);
    static const uint8_t reversed[] = {1, 0, 0, 0, 1, 'b', 1, 'a', 1, 5};
    ck_assert_int_eq(kv_sst_writer_set_range_tombstones(w, reversed, sizeof reversed), KV_EINVAL);
    ck_assert_int_eq(kv_sst_writer_set_range_tombstones(w, NULL, 3), KV_EINVAL);
    ck_assert_int_eq(kv_sst_writer_set_range_tombstones(NULL, NULL, 0), KV_EINVAL);
    /* the last good call counts; an empty one takes the block back */
    static const uint8_t good[] = {1, 0, 0, 0, 1, 'a', 1, 'b', 1, 5};
    ck_assert_int_eq(kv_sst_writer_set_range_tombstones(w, good, sizeof good), KV_OK);
    ck_assert_int_eq(kv_sst_writer_set_range_tombstones(w, NULL, 0), KV_OK);
    ck_assert_int_eq(kv_sst_writer_finish(w, NULL), KV_OK);
    kv_sst_reader *r;
    ck_assert_int_eq(kv_sst_reader_open(p, NULL, 1, &r), KV_OK);
    kv_sst_properties props;
    kv_sst_reader_properties(r, &props);
    ck_assert_uint_eq(props.format_version, 1);
    kv_sst_reader_close(r);
}
END_TEST

/* A version-3 table: every truncation is refused, every byte flip is
 * refused or reads back what was written (never a crash); a reader that
 * meets a version it does not know (here 4, standing for an older reader
 * meeting 3) refuses it by number. */
START_TEST(damaged_version_3_tables)
{
    rng = 11;
    uint8_t *block;
    size_t blen;
    kv_rtset *s = table_set(NULL, 6, &block, &blen);
    char p[256], d[256];
    write_table("good.sst", NULL, 20, block, blen, p, sizeof p);
    test_path(d, sizeof d, "damaged.sst");
    size_t len;
    uint8_t *orig = slurp(p, &len), *work = malloc(len);
    kv_sst_reader *r;
    for (size_t cut = 0; cut < len; cut += 7) {
        spit(d, orig, cut);
        ck_assert_int_eq(kv_sst_reader_open(d, NULL, 1, &r), KV_ECORRUPT);
    }
    size_t ok = 0;
    for (size_t at = 0; at < len; at++) {
        memcpy(work, orig, len);
        work[at] ^= (uint8_t)(1u << (at % 8));
        spit(d, work, len);
        int rc = kv_sst_reader_open(d, NULL, 1, &r);
        if (rc == KV_OK && (rc = kv_sst_verify(r)) != KV_OK)
            kv_sst_reader_close(r); /* a data block: seen when read */
        if (rc == KV_OK) {
            ok++;
            /* a flip no check sees must change nothing read */
            const uint8_t *q;
            size_t qlen;
            kv_sst_reader_range_tombstones(r, &q, &qlen);
            ck_assert_uint_eq(qlen, blen);
            ck_assert_int_eq(memcmp(q, block, blen), 0);
            kv_sst_reader_close(r);
        } else {
            ck_assert_int_eq(rc, KV_ECORRUPT);
        }
    }
    ck_assert_uint_eq(ok, 0);
    /* version 5 (past the newest, 4), checksum recomputed */
    memcpy(work, orig, len);
    uint8_t *t = work + len - 72;
    t[8] = 5;
    uint64_t sum = XXH3_64bits(t, 64);
    for (int i = 0; i < 8; i++)
        t[64 + i] = (uint8_t)(sum >> (8 * i));
    spit(d, work, len);
    ck_assert_int_eq(kv_sst_reader_open(d, NULL, 1, &r), KV_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(kv_sst_error_text(), "unknown format version 5"));
    free(orig);
    free(work);
    free(block);
    kv_rtset_unref(s);
}
END_TEST

#ifdef KVTOOL_PATH
/* Runs kvtool with args (one string, no quoting needed); its stdout and
 * stderr into out (NUL-terminated); returns its exit status. */
static int kvtool(const char *args, char *out, size_t cap)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", KVTOOL_PATH, args);
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = '\0';
    int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A store table (keys of the store's form, note "kv: ...") with entries
 * of every kind and range tombstones: kvtool dumps, shows and verifies
 * them. */
START_TEST(kvtool_shows_and_checks_range_tombstones)
{
    char p[256];
    test_path(p, sizeof p, "000009.sst");
    kv_sst_options o;
    kv_sst_options_init(&o);
    o.note = "kv: test";
    kv_sst_writer *w;
    ck_assert_int_eq(kv_sst_writer_new(p, &o, &w), KV_OK);
    kv_rt rts[2] = {{(const uint8_t *)"a", 1, (const uint8_t *)"d", 1, 7},
                    {(const uint8_t *)"a", 1, (const uint8_t *)"c", 1, 3}};
    kv_rtset *s;
    ck_assert_int_eq(kv_rtset_union(NULL, NULL, 0, rts, 2, NULL, NULL, &s), KV_OK);
    uint8_t *block;
    size_t blen;
    ck_assert_int_eq(kv_rtset_encode(s, &block, &blen), KV_OK);
    ck_assert_int_eq(kv_sst_writer_set_range_tombstones(w, block, blen), KV_OK);
    static const struct {
        const char *k;
        uint64_t seq;
        int kind;
        const char *v;
        size_t vlen;
    } e[] = {{"b", 9, KV_SST_KIND_MERGE, "op1", 3},
             {"b", 8, KV_SST_KIND_TMERGE, "op0\x10\x00\x00\x00\x00\x00\x00\x00", 11},
             {"b", 2, KV_SST_KIND_PUT, "old", 3},
             {"e", 5, KV_SST_KIND_TPUT, "val\x2a\x01\x00\x00\x00\x00\x00\x00", 11}};
    for (size_t i = 0; i < sizeof e / sizeof e[0]; i++) {
        uint8_t k[32];
        size_t kl;
        ck_assert_int_eq(kv_sst_store_key_encode(e[i].k, 1, e[i].seq, e[i].kind, 1, k, sizeof k,
                                                 &kl),
                         KV_OK);
        /* the store's filter: hashes of the user keys */
        ck_assert_int_eq(kv_sst_writer_add_hashed(w, k, kl, e[i].v, e[i].vlen,
                                                  XXH3_64bits_withSeed(e[i].k, 1, o.seed)),
                         KV_OK);
    }
    ck_assert_int_eq(kv_sst_writer_finish(w, NULL), KV_OK);
    char out[8192], args[600];
    snprintf(args, sizeof args, "sst dump %s", p);
    ck_assert_msg(kvtool(args, out, sizeof out) == 0, "kvtool %s: %s", args, out);
    ck_assert_str_eq(out, "\"b\" seq 9 merge => \"op1\"\n"
                          "\"b\" seq 8 tmerge => \"op0\" written 16\n"
                          "\"b\" seq 2 put => \"old\"\n"
                          "\"e\" seq 5 tput => \"val\" written 298\n"
                          "range tombstone [\"a\", \"c\") seqs 7 3\n"
                          "range tombstone [\"c\", \"d\") seqs 7\n");
    snprintf(args, sizeof args, "sst dump %s --from c --to e", p);
    ck_assert_msg(kvtool(args, out, sizeof out) == 0, "kvtool %s: %s", args, out);
    ck_assert_str_eq(out, "range tombstone [\"c\", \"d\") seqs 7\n");
    snprintf(args, sizeof args, "sst verify %s", p);
    ck_assert_msg(kvtool(args, out, sizeof out) == 0, "kvtool %s: %s", args, out);
    ck_assert_ptr_nonnull(strstr(out, "2 range tombstone fragments in order"));
    snprintf(args, sizeof args, "sst props %s", p);
    ck_assert_msg(kvtool(args, out, sizeof out) == 0, "kvtool %s: %s", args, out);
    ck_assert_ptr_nonnull(strstr(out, "format version:    3\n"));
    ck_assert_ptr_nonnull(strstr(out, "range tombstones:  2 fragments\n"));
    free(block);
    kv_rtset_unref(s);
}
END_TEST
#endif

/* ---- suite ------------------------------------------------------------------------ */

Suite *test_suite(void)
{
    Suite *s = suite_create("rangedel");
    TCase *tc = test_tcase(s, "set", 300, 0);
    tcase_add_test(tc, union_of_tombstones_matches_the_model);
    tcase_add_test(tc, union_under_a_reverse_comparator);
    tcase_add_test(tc, long_keys_whose_words_tie);
    tcase_add_test(tc, union_of_sets_equals_union_of_their_tombstones);
    tcase_add_test(tc, one_at_a_time_like_a_memtable);
    tcase_add_test(tc, keep_drops_sequences);
    tcase_add_test(tc, edges_and_bad_arguments);
    tcase_add_test(tc, encoding_known_answer);
    tcase_add_test(tc, damaged_blocks_are_refused_or_sound);
    tc = test_tcase(s, "table", 300, 1);
    tcase_add_test(tc, table_with_tombstones_is_version_3);
    tcase_add_test(tc, table_with_tombstones_and_a_dictionary);
    tcase_add_test(tc, table_with_tombstones_under_a_comparator);
    tcase_add_test(tc, table_of_tombstones_alone);
    tcase_add_test(tc, writer_refuses_a_bad_block);
    tcase_add_test(tc, range_tombstones_listed_by_threads_at_once);
    tcase_add_test(tc, damaged_version_3_tables);
#ifdef KVTOOL_PATH
    tcase_add_test(tc, kvtool_shows_and_checks_range_tombstones);
#endif
    return s;
}
