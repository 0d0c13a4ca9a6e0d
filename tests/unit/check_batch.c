/* check_batch.c - write batches: limits, encoding round trip, reading one back
 * (kv_batch_foreach), and decoding of damaged encodings (all or nothing). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "../kv/batch.h"
#include <kv/kv.h>
#include "../kv/memtable.h"
#include "fixture.h"

struct seen {
    int calls;
    uint64_t first_seq;
    int kinds[16];
    size_t klen[16], vlen[16];
    uint8_t key0[4];
};

static int record(void *ctx, uint64_t seq, int kind, const uint8_t *key, size_t klen,
                  const uint8_t *val, size_t vlen)
{
    struct seen *s = ctx;
    (void)val;
    if (s->calls == 0) {
        s->first_seq = seq;
        memcpy(s->key0, key, klen < 4 ? klen : 4);
    }
    ck_assert_uint_eq(seq, s->first_seq + (uint64_t)s->calls);
    if (s->calls < 16) {
        s->kinds[s->calls] = kind;
        s->klen[s->calls] = klen;
        s->vlen[s->calls] = vlen;
    }
    s->calls++;
    return 0;
}

START_TEST(round_trip_and_limits)
{
    kv_batch *b;
    ck_assert_int_eq(kv_batch_new(&b), KV_OK);
    ck_assert_int_eq(kv_batch_put(b, "a\0b", 3, "v\0", 2), KV_OK);
    ck_assert_int_eq(kv_batch_put(b, "", 0, "", 0), KV_OK);
    ck_assert_int_eq(kv_batch_delete(b, "a\0b", 3), KV_OK);
    uint8_t *big = calloc(1, KV_MAX_VALUE_SIZE + 1);
    ck_assert_int_eq(kv_batch_put(b, big, KV_MAX_KEY_SIZE, big, KV_MAX_VALUE_SIZE), KV_OK);
    /* Over the limits: refused, nothing added. */
    ck_assert_int_eq(kv_batch_put(b, big, KV_MAX_KEY_SIZE + 1, "", 0), KV_EINVAL);
    ck_assert_int_eq(kv_batch_put(b, "k", 1, big, KV_MAX_VALUE_SIZE + 1), KV_EINVAL);
    ck_assert_int_eq(kv_batch_delete(b, NULL, 1), KV_EINVAL);
    ck_assert_int_eq(kv_batch_put(NULL, "k", 1, "v", 1), KV_EINVAL);
    ck_assert_uint_eq(kv_batch_count(b), 4);

    kv_batch_set_seq(b->rep, 1000);
    struct seen s = {0};
    ck_assert_int_eq(kv_batch_iterate(b->rep, b->len, record, &s), KV_OK);
    ck_assert_int_eq(s.calls, 4);
    ck_assert_uint_eq(s.first_seq, 1000);
    ck_assert(!memcmp(s.key0, "a\0b", 3));
    ck_assert_int_eq(s.kinds[0], KV_KIND_VALUE);
    ck_assert_uint_eq(s.vlen[0], 2);
    ck_assert_uint_eq(s.klen[1], 0);
    ck_assert_int_eq(s.kinds[2], KV_KIND_TOMBSTONE);
    ck_assert_uint_eq(s.klen[3], KV_MAX_KEY_SIZE);
    ck_assert_uint_eq(s.vlen[3], KV_MAX_VALUE_SIZE);

    kv_batch_clear(b);
    ck_assert_uint_eq(kv_batch_count(b), 0);
    memset(&s, 0, sizeof s);
    ck_assert_int_eq(kv_batch_iterate(b->rep, b->len, record, &s), KV_OK);
    ck_assert_int_eq(s.calls, 0);
    ck_assert_int_eq(kv_batch_new(NULL), KV_EINVAL);
    kv_batch_free(b);
    kv_batch_free(NULL);
    free(big);
}
END_TEST

/* Every truncation and many byte flips: KV_ECORRUPT with no entry delivered,
 * or KV_OK with every entry (a flip inside a key or value still parses). */
START_TEST(damaged_encodings_are_all_or_nothing)
{
    kv_batch *b;
    ck_assert_int_eq(kv_batch_new(&b), KV_OK);
    for (int i = 0; i < 8; i++) {
        char k[8] = {'k', (char)('0' + i)};
        ck_assert_int_eq(i % 3 ? kv_batch_put(b, k, 2, "value", 5) : kv_batch_delete(b, k, 2),
                         KV_OK);
    }
    for (size_t cut = 0; cut < b->len; cut++) {
        struct seen s = {0};
        ck_assert_int_eq(kv_batch_iterate(b->rep, cut, record, &s), KV_ECORRUPT);
        ck_assert_int_eq(s.calls, 0);
    }
    uint8_t *copy = malloc(b->len);
    uint64_t x = 1;
    for (int t = 0; t < 5000; t++) {
        memcpy(copy, b->rep, b->len);
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        size_t at = KV_BATCH_HEADER - 4 + (size_t)(x >> 33) % (b->len - KV_BATCH_HEADER + 4);
        copy[at] ^= (uint8_t)(1 + (x >> 20) % 255);
        struct seen s = {0};
        int rc = kv_batch_iterate(copy, b->len, record, &s);
        if (rc == KV_OK)
            ck_assert_int_eq(s.calls, (int)kv_batch_count(b));
        else
            ck_assert_int_eq(s.calls, 0);
    }
    free(copy);
    kv_batch_free(b);
}
END_TEST

/* What kv_batch_foreach hands back: each entry as text "P key=val" or
 * "D key", in order; a call stops the walk with its return when asked. */
struct listing {
    char text[256];
    int calls, stop_at;
};

static void list_add(struct listing *l, const char *tag, const void *k, size_t klen,
                     const void *v, size_t vlen)
{
    size_t at = strlen(l->text);
    ck_assert_uint_lt(at + klen + vlen + 4, sizeof l->text);
    memcpy(l->text + at, tag, 2);
    memcpy(l->text + at + 2, k, klen);
    at += 2 + klen;
    if (v) {
        l->text[at++] = '=';
        memcpy(l->text + at, v, vlen);
        at += vlen;
    }
    l->text[at++] = ';';
    l->text[at] = 0;
}

static int list_put(void *ctx, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct listing *l = ctx;
    list_add(l, "P ", key, klen, val, vlen);
    return ++l->calls == l->stop_at ? 42 : 0;
}

static int list_del(void *ctx, const void *key, size_t klen)
{
    struct listing *l = ctx;
    list_add(l, "D ", key, klen, NULL, 0);
    return ++l->calls == l->stop_at ? 43 : 0;
}

START_TEST(foreach_gives_entries_in_order)
{
    kv_batch *b;
    ck_assert_int_eq(kv_batch_new(&b), KV_OK);
    struct listing l = {.stop_at = -1};
    ck_assert_int_eq(kv_batch_foreach(b, &l, list_put, list_del), KV_OK);
    ck_assert_int_eq(l.calls, 0); /* empty: nothing called */

    ck_assert_int_eq(kv_batch_put(b, "bar", 3, "b", 1), KV_OK);
    ck_assert_int_eq(kv_batch_delete(b, "bar", 3), KV_OK);
    ck_assert_int_eq(kv_batch_put(b, "box", 3, "", 0), KV_OK); /* an empty value */
    ck_assert_int_eq(kv_batch_put(b, "bar", 3, "z", 1), KV_OK);
    ck_assert_int_eq(kv_batch_foreach(b, &l, list_put, list_del), KV_OK);
    ck_assert_str_eq(l.text, "P bar=b;D bar;P box=;P bar=z;");
    ck_assert_int_eq(l.calls, 4);

    /* A nonzero return stops the walk and comes back. */
    memset(&l, 0, sizeof l);
    l.stop_at = 2;
    ck_assert_int_eq(kv_batch_foreach(b, &l, list_put, list_del), 43);
    ck_assert_str_eq(l.text, "P bar=b;D bar;");

    /* Cleared: nothing. NULL arguments: KV_EINVAL, nothing called. */
    kv_batch_clear(b);
    memset(&l, 0, sizeof l);
    ck_assert_int_eq(kv_batch_foreach(b, &l, list_put, list_del), KV_OK);
    ck_assert_int_eq(kv_batch_foreach(NULL, &l, list_put, list_del), KV_EINVAL);
    ck_assert_int_eq(kv_batch_put(b, "k", 1, "v", 1), KV_OK);
    ck_assert_int_eq(kv_batch_foreach(b, &l, NULL, list_del), KV_EINVAL);
    ck_assert_ptr_nonnull(strstr(kv_error_text(), "put is NULL"));
    ck_assert_int_eq(kv_batch_foreach(b, &l, list_put, NULL), KV_EINVAL);
    ck_assert_int_eq(l.calls, 0);
    kv_batch_free(b);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("batch");
    TCase *tc = tcase_create("batch");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, round_trip_and_limits);
    tcase_add_test(tc, damaged_encodings_are_all_or_nothing);
    tcase_add_test(tc, foreach_gives_entries_in_order);
    suite_add_tcase(s, tc);
    return s;
}
