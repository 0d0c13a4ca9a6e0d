/* check_memtable.c - the memtable against a reference model: order, snapshot
 * reads, tombstones, binary keys, its filter (never "absent" for a key it
 * holds, also overfilled), and readers running beside the writer. */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../kv/memtable.h"
#include <kv/range_filter.h>
#include "util/hash.h"
#include "fixture.h"

#define SEED 0x5EEDull

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* ---- reference model: every entry, sorted on demand --------------------- */

struct ref {
    uint8_t key[24];
    size_t klen;
    uint64_t seq;
    int kind;
    uint32_t val; /* the value is these 4 bytes, or empty for tombstones */
};

static int ref_cmp(const void *pa, const void *pb)
{
    const struct ref *a = pa, *b = pb;
    size_t n = a->klen < b->klen ? a->klen : b->klen;
    int c = memcmp(a->key, b->key, n);
    if (c)
        return c;
    if (a->klen != b->klen)
        return a->klen < b->klen ? -1 : 1;
    return a->seq > b->seq ? -1 : a->seq < b->seq;
}

/* Keys from a small alphabet including NUL, 0..6 bytes: many collide, so
 * keys get several versions, and prefixes of each other appear. */
static size_t random_key(uint8_t *key)
{
    size_t len = rnd() % 7;
    for (size_t i = 0; i < len; i++)
        key[i] = (uint8_t)"\0ab\xff"[rnd() % 4];
    return len;
}

/* The model run with each kind of memtable (the loop's _i): no filter; a
 * filter sized for the keys it gets; one sized for 16 keys, which the
 * model's thousands of distinct keys overfill. A filter must never say
 * "absent" for a key it holds. */
static const uint64_t model_filter_keys[] = {0, 20000, 16};

START_TEST(matches_model)
{
    enum { N = 20000 };
    struct ref *refs = malloc(N * sizeof *refs);
    kv_mem *m;
    uint64_t filter_keys = model_filter_keys[_i];
    ck_assert_int_eq(kv_mem_new(filter_keys, 10, &m), KV_OK);
    ck_assert_int_eq(kv_mem_has_filter(m), filter_keys > 0);
    for (uint64_t i = 0; i < N; i++) {
        struct ref *r = &refs[i];
        r->klen = random_key(r->key);
        r->seq = i + 1;
        r->kind = rnd() % 5 ? KV_KIND_VALUE : KV_KIND_TOMBSTONE;
        r->val = (uint32_t)rnd();
        ck_assert_int_eq(kv_mem_add(m, kv_hash_key(r->key, r->klen, SEED), r->seq, r->kind,
                                    r->key, r->klen, &r->val, r->kind == KV_KIND_VALUE ? 4 : 0),
                         KV_OK);
    }
    ck_assert_uint_eq(kv_mem_count(m), N);
    for (uint64_t i = 0; i < N; i++)
        ck_assert(kv_mem_may_contain(m, kv_hash_key(refs[i].key, refs[i].klen, SEED)));

    /* Reads at random snapshots agree with a scan of the model; the filter
     * rules out only keys that have no entry at all. Keys of 7 to 9 bytes
     * were never added. */
    uint64_t absent = 0, negatives = 0;
    for (int t = 0; t < 5000; t++) {
        uint8_t key[24];
        size_t klen = random_key(key);
        if (t % 2) {
            klen = 7 + (size_t)(rnd() % 3);
            for (size_t b = 0; b < klen; b++)
                key[b] = (uint8_t)rnd();
        }
        uint64_t snap = rnd() % (N + 2);
        const struct ref *want = NULL;
        int held = 0;
        for (uint64_t i = 0; i < N; i++) {
            if (refs[i].klen != klen || memcmp(refs[i].key, key, klen))
                continue;
            held = 1;
            if (refs[i].seq <= snap && (!want || refs[i].seq > want->seq))
                want = &refs[i];
        }
        int maybe = kv_mem_may_contain(m, kv_hash_key(key, klen, SEED));
        ck_assert(maybe || !held);
        absent += !held;
        negatives += !maybe;
        kv_mem_entry e;
        int rc = kv_mem_get(m, key, klen, snap, &e);
        if (!want) {
            ck_assert_int_eq(rc, KV_NOTFOUND);
            continue;
        }
        ck_assert_int_eq(rc, KV_OK);
        ck_assert_uint_eq(e.seq, want->seq);
        ck_assert_int_eq(e.kind, want->kind);
        ck_assert_uint_eq(e.klen, klen);
        ck_assert(klen == 0 || !memcmp(e.key, key, klen));
        if (want->kind == KV_KIND_VALUE) {
            ck_assert_uint_eq(e.vlen, 4);
            ck_assert(!memcmp(e.val, &want->val, 4));
        } else {
            ck_assert_uint_eq(e.vlen, 0);
        }
    }

    /* Iteration yields the model's order exactly. */
    qsort(refs, N, sizeof *refs, ref_cmp);
    kv_mem_iter it;
    kv_mem_iter_init(&it, m);
    size_t i = 0;
    for (kv_mem_iter_first(&it); kv_mem_iter_valid(&it); kv_mem_iter_next(&it), i++) {
        kv_mem_entry e;
        kv_mem_iter_entry(&it, &e);
        ck_assert_uint_lt(i, N);
        ck_assert_uint_eq(e.seq, refs[i].seq);
        ck_assert_uint_eq(e.klen, refs[i].klen);
    }
    ck_assert_uint_eq(i, N);

    /* Seek lands on the first entry >= (key, seq). */
    for (int t = 0; t < 2000; t++) {
        struct ref probe;
        probe.klen = random_key(probe.key);
        probe.seq = rnd() % (N + 2);
        size_t lo = 0, hi = N;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (ref_cmp(&refs[mid], &probe) < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        kv_mem_iter_seek(&it, probe.key, probe.klen, probe.seq);
        if (lo == N) {
            ck_assert(!kv_mem_iter_valid(&it));
        } else {
            kv_mem_entry e;
            ck_assert(kv_mem_iter_valid(&it));
            kv_mem_iter_entry(&it, &e);
            ck_assert_uint_eq(e.seq, refs[lo].seq);
        }
    }
    /* The filter answers: a sized one rules out most absent keys, an
     * overfilled one few or none; without one, "maybe" always. */
    fprintf(stderr, "memtable model, filter for %llu keys: %llu of %llu absent keys ruled "
            "out\n", (unsigned long long)filter_keys, (unsigned long long)negatives,
            (unsigned long long)absent);
    if (filter_keys == 0)
        ck_assert_uint_eq(negatives, 0);
    if (filter_keys == N)
        ck_assert_uint_gt(negatives, absent * 9 / 10);
    kv_mem_free(m);
    free(refs);
}
END_TEST

START_TEST(large_and_empty_entries)
{
    kv_mem *m;
    ck_assert_int_eq(kv_mem_new(0, 0, &m), KV_OK);
    size_t big = 1u << 20;
    uint8_t *v = malloc(big), *k = malloc(65536);
    for (size_t i = 0; i < big; i++)
        v[i] = (uint8_t)(i * 7);
    memset(k, 0, 65536);
    ck_assert_int_eq(kv_mem_add(m, 0, 1, KV_KIND_VALUE, "", 0, "", 0), KV_OK);
    ck_assert_int_eq(kv_mem_add(m, 0, 2, KV_KIND_VALUE, k, 65536, v, big), KV_OK);
    ck_assert_int_eq(kv_mem_add(m, 0, 3, KV_KIND_VALUE, "x", 1, v, 10), KV_OK);
    kv_mem_entry e;
    ck_assert_int_eq(kv_mem_get(m, "", 0, KV_MAX_SEQ, &e), KV_OK);
    ck_assert_uint_eq(e.vlen, 0);
    ck_assert_int_eq(kv_mem_get(m, k, 65536, KV_MAX_SEQ, &e), KV_OK);
    ck_assert_uint_eq(e.vlen, big);
    ck_assert(!memcmp(e.val, v, big));
    ck_assert_int_eq(kv_mem_get(m, k, 65535, KV_MAX_SEQ, &e), KV_NOTFOUND);
    ck_assert_uint_ge(kv_mem_bytes(m), big + 65536);
    /* A duplicate (key, seq) and bad arguments change nothing. */
    ck_assert_int_eq(kv_mem_add(m, 0, 3, KV_KIND_VALUE, "x", 1, "y", 1), KV_EINVAL);
    ck_assert_int_eq(kv_mem_add(m, 0, KV_MAX_SEQ + 1, KV_KIND_VALUE, "z", 1, "", 0), KV_EINVAL);
    ck_assert_int_eq(kv_mem_add(m, 0, 9, 7, "z", 1, "", 0), KV_EINVAL);
    ck_assert_int_eq(kv_mem_add(m, 0, 9, KV_KIND_VALUE, NULL, 3, "", 0), KV_EINVAL);
    ck_assert_int_eq(kv_mem_add(NULL, 0, 9, KV_KIND_VALUE, "z", 1, "", 0), KV_EINVAL);
    ck_assert_uint_eq(kv_mem_count(m), 3);
    ck_assert_int_eq(kv_mem_get(m, "x", 1, KV_MAX_SEQ, &e), KV_OK);
    ck_assert_uint_eq(e.vlen, 10);
    ck_assert_int_eq(kv_mem_get(m, "x", 1, 2, &e), KV_NOTFOUND); /* not yet at seq 2 */
    ck_assert_int_eq(kv_mem_new(0, 0, NULL), KV_EINVAL);
    kv_mem_free(NULL);
    /* Without a filter (or a memtable) every key may be there. */
    ck_assert_int_eq(kv_mem_has_filter(m), 0);
    ck_assert_int_eq(kv_mem_may_contain(m, 42), 1);
    ck_assert_int_eq(kv_mem_has_filter(NULL), 0);
    ck_assert_int_eq(kv_mem_may_contain(NULL, 42), 1);
    /* A filter kv_bloom_new refuses is the memtable's KV_EINVAL. */
    kv_mem *bad = (kv_mem *)m;
    ck_assert_int_eq(kv_mem_new(100, 0, &bad), KV_EINVAL);
    ck_assert_ptr_null(bad);
    kv_mem_free(m);
    free(v);
    free(k);
}
END_TEST

/* The empty key and a 64 KiB one go through the filter like any other; a
 * failed add leaves the skiplist as it was, whatever it left in the filter;
 * the filter's bits count in kv_mem_bytes. */
START_TEST(filter_keeps_empty_and_large_keys)
{
    kv_mem *plain, *m;
    ck_assert_int_eq(kv_mem_new(0, 0, &plain), KV_OK);
    ck_assert_int_eq(kv_mem_new(65536, 10, &m), KV_OK);
    ck_assert_int_eq(kv_mem_has_filter(m), 1);
    /* 65,536 keys at 10 bits: 80 KiB of bits beside the same header. */
    ck_assert_uint_eq(kv_mem_bytes(m) - kv_mem_bytes(plain), 80u << 10);
    uint8_t *k = malloc(65536);
    memset(k, 0xAB, 65536);
    uint64_t h_empty = kv_hash_key("", 0, SEED), h_big = kv_hash_key(k, 65536, SEED);
    ck_assert_int_eq(kv_mem_add(m, h_empty, 1, KV_KIND_VALUE, "", 0, "e", 1), KV_OK);
    ck_assert_int_eq(kv_mem_add(m, h_big, 2, KV_KIND_TOMBSTONE, k, 65536, NULL, 0), KV_OK);
    ck_assert(kv_mem_may_contain(m, h_empty));
    ck_assert(kv_mem_may_contain(m, h_big));
    /* One key per 64 KiB-filter: nearly every other hash is ruled out. */
    int negatives = 0;
    for (uint64_t i = 0; i < 1000; i++)
        negatives += !kv_mem_may_contain(m, kv_hash_key(&i, sizeof i, SEED));
    ck_assert_int_gt(negatives, 990);
    kv_mem_entry e;
    ck_assert_int_eq(kv_mem_get(m, "", 0, KV_MAX_SEQ, &e), KV_OK);
    ck_assert_int_eq(kv_mem_get(m, k, 65536, KV_MAX_SEQ, &e), KV_OK);
    ck_assert_int_eq(e.kind, KV_KIND_TOMBSTONE);
    ck_assert_int_eq(kv_mem_add(m, h_empty, 1, KV_KIND_VALUE, "", 0, "x", 1), KV_EINVAL);
    ck_assert_uint_eq(kv_mem_count(m), 2);
    free(k);
    kv_mem_free(m);
    kv_mem_free(plain);
}
END_TEST

/* ---- one writer, readers beside it ----------------------------------------- */

enum { SHARED_N = 100000 };

/* The j-th key the writer inserts: a scrambled order (7919 is prime and
 * does not divide SHARED_N), so nodes are linked all over the list. */
static uint64_t nth_key(uint64_t j)
{
    return j * 7919 % SHARED_N;
}

struct shared {
    kv_mem *m;
    _Atomic uint64_t published;
    _Atomic int done;
    _Atomic int failures;
    _Atomic uint64_t caught; /* reads that found the key being added */
};

static void *reader(void *arg)
{
    struct shared *s = arg; /* keys nth_key(0 .. published-1) are in */
    uint64_t x = 12345;
    while (!atomic_load(&s->done)) {
        uint64_t n = atomic_load(&s->published);
        if (n == 0)
            continue;
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t i = nth_key((x >> 11) % n);
        uint8_t key[8];
        kv_mem_entry e;
        key_of_be(key, i);
        if (kv_mem_get(s->m, key, 8, KV_MAX_SEQ, &e) != KV_OK || e.vlen != 8 ||
            memcmp(e.val, key, 8) != 0 || !kv_mem_may_contain(s->m, kv_hash_key(key, 8, SEED)))
            atomic_fetch_add(&s->failures, 1);
        /* The key being added now: once a reader can find it, its filter
         * bits are set (kv_mem_add sets them before it links the node). */
        if (n < SHARED_N) {
            uint8_t next[8];
            key_of_be(next, nth_key(n));
            if (kv_mem_get(s->m, next, 8, KV_MAX_SEQ, &e) == KV_OK) {
                atomic_fetch_add(&s->caught, 1);
                if (!kv_mem_may_contain(s->m, kv_hash_key(next, 8, SEED)))
                    atomic_fetch_add(&s->failures, 1);
            }
        }
        /* A scan sees keys in strictly increasing order. */
        kv_mem_iter it;
        kv_mem_iter_init(&it, s->m);
        kv_mem_iter_seek(&it, key, 8, KV_MAX_SEQ);
        uint8_t last[8];
        memcpy(last, key, 8);
        for (int step = 0; step < 16 && kv_mem_iter_valid(&it); step++, kv_mem_iter_next(&it)) {
            kv_mem_iter_entry(&it, &e);
            if (step > 0 && memcmp(e.key, last, 8) <= 0)
                atomic_fetch_add(&s->failures, 1);
            memcpy(last, e.key, 8);
        }
    }
    return NULL;
}

START_TEST(readers_beside_writer)
{
    enum { N = SHARED_N, READERS = 3 };
    struct shared s = {0};
    ck_assert_int_eq(kv_mem_new(N, 10, &s.m), KV_OK);
    pthread_t t[READERS];
    for (int i = 0; i < READERS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, reader, &s), 0);
    for (uint64_t j = 0; j < N; j++) {
        uint64_t i = nth_key(j);
        uint8_t key[8];
        key_of_be(key, i);
        ck_assert_int_eq(kv_mem_add(s.m, kv_hash_key(key, 8, SEED), j + 1, KV_KIND_VALUE, key,
                                    8, key, 8),
                         KV_OK);
        atomic_store(&s.published, j + 1);
    }
    atomic_store(&s.done, 1);
    for (int i = 0; i < READERS; i++)
        pthread_join(t[i], NULL);
    ck_assert_msg(atomic_load(&s.failures) == 0, "%d reads went wrong",
                  atomic_load(&s.failures));
    fprintf(stderr, "memtable readers: %llu reads found the key being added\n",
            (unsigned long long)atomic_load(&s.caught));
    kv_mem_free(s.m);
}
END_TEST

/* ---- the occupancy gate --------------------------------------------------- */

/* Byte-string order of (a, alen) and (b, blen). */
static int bytes_cmp(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
    size_t n = alen < blen ? alen : blen;
    int c = n ? memcmp(a, b, n) : 0;
    return c ? c : (alen > blen) - (alen < blen);
}

/* A key of 4 decimal digits or of random bytes (the loop's alphabet). */
static size_t gate_key(uint8_t *k)
{
    if (rnd() % 2) {
        snprintf((char *)k, 8, "%04u", (unsigned)(rnd() % 10000));
        return 4;
    }
    return random_key(k);
}

/* kv_mem_range_may_hold never says 0 for a range that holds a key added,
 * whatever the bitmap's size (64 bits: many keys per bucket; 2^16: more
 * buckets than the map's integers, each its own) and whatever the keys
 * (inside the map's digits or not); an empty range between clear buckets
 * is 0; without a map, or past 64 words, always 1. */
START_TEST(range_gate_has_no_false_negative)
{
    static const uint64_t bits[] = {64, 1u << 12, 1u << 16};
    kv_rfilter_builder *b;
    ck_assert_int_eq(kv_rfilter_builder_new(16, 7, &b), KV_OK);
    char k[8];
    for (unsigned i = 0; i < 10000; i++) { /* "0000" .. "9999": 4 digits of radix 10 */
        snprintf(k, sizeof k, "%04u", i);
        ck_assert_int_eq(kv_rfilter_builder_add(b, k, 4), KV_OK);
    }
    uint8_t *enc;
    size_t len;
    ck_assert_int_eq(kv_rfilter_builder_finish(b, &enc, &len), KV_OK);
    kv_rfilter_builder_free(b);
    kv_rfilter *f;
    ck_assert_int_eq(kv_rfilter_decode(enc, len, &f), KV_OK);
    kv_mem *m;
    ck_assert_int_eq(kv_mem_new(0, 0, &m), KV_OK);
    ck_assert_int_eq(kv_mem_range_may_hold(m, "a", 1, "b", 1), 1); /* no map: maybe */
    ck_assert_int_eq(kv_mem_set_range_map(m, f, 100), KV_EINVAL);  /* not a power of two */
    kv_mem_free(m);
    size_t before;
    ck_assert_int_eq(kv_mem_new(0, 0, &m), KV_OK);
    before = kv_mem_bytes(m);
    ck_assert_int_eq(kv_mem_set_range_map(m, f, bits[_i]), KV_OK);
    ck_assert_uint_eq(kv_mem_bytes(m), before + bits[_i] / 8);
    ck_assert(kv_mem_has_range_map(m));
    ck_assert_int_eq(kv_mem_set_range_map(m, f, bits[_i]), KV_EINVAL); /* set already */
    /* Nothing added: clear, unless the buckets span over 64 words (the
     * map has 10^4 integers: 2^16 bits give each its own bucket). */
    ck_assert_int_eq(kv_mem_range_may_hold(m, "0100", 4, "0200", 4), 0);
    ck_assert_int_eq(kv_mem_range_may_hold(m, "0", 1, "9", 1), bits[_i] == 1u << 16);
    enum { N = 60 };
    uint8_t keys[N][8];
    size_t lens[N];
    for (int i = 0; i < N; i++) {
        lens[i] = gate_key(keys[i]);
        ck_assert_int_eq(kv_mem_add(m, 0, (uint64_t)i + 1, KV_KIND_VALUE, keys[i], lens[i], "", 0),
                         KV_OK);
    }
    unsigned empty = 0, no = 0;
    for (int q = 0; q < 20000; q++) {
        uint8_t lo[8], hi[8];
        size_t ll = gate_key(lo), hl = gate_key(hi);
        if (q % 2 && ll == 4 && hl == 4) /* a narrow decimal range */
            snprintf((char *)hi, 8, "%04u", (unsigned)(atoi((char *)lo) + 1 + rnd() % 5) % 10000);
        if (bytes_cmp(lo, ll, hi, hl) >= 0)
            continue;
        int holds = 0;
        for (int i = 0; i < N && !holds; i++)
            holds = bytes_cmp(lo, ll, keys[i], lens[i]) <= 0 &&
                    bytes_cmp(keys[i], lens[i], hi, hl) < 0;
        int got = kv_mem_range_may_hold(m, lo, ll, hi, hl);
        ck_assert_msg(!holds || got, "query %d: a false negative", q);
        empty += !holds;
        no += !got;
    }
    if (bits[_i] >= 4096)
        ck_assert_uint_gt(no, empty / 4);
    kv_mem_free(m);
    kv_rfilter_free(f);
    kv_free(enc);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("memtable");
    TCase *tc = tcase_create("model");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, matches_model, 0, 3);
    tcase_add_test(tc, filter_keeps_empty_and_large_keys);
    tcase_add_test(tc, large_and_empty_entries);
    tcase_add_loop_test(tc, range_gate_has_no_false_negative, 0, 3);
    suite_add_tcase(s, tc);
    tc = tcase_create("concurrency");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, readers_beside_writer);
    suite_add_tcase(s, tc);
    return s;
}
