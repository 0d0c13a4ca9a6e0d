/* check_merge_ops.c - the merge operators kv ships (kv/merge_ops.c), their
 * callbacks called directly: kv_merge_uint64_add's full and partial merges
 * against sums worked out here, wrap-around, a missing value, and the
 * lengths it refuses. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <kv/kv.h>
#include "fixture.h"

static void le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t rd64(const void *q)
{
    const uint8_t *p = q;
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* n operands with the given values, each 8 bytes in buf. */
struct ops {
    uint8_t buf[16][8];
    const void *ptr[16];
    size_t len[16];
};

static void make_ops(struct ops *o, const uint64_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        le64(o->buf[i], v[i]);
        o->ptr[i] = o->buf[i];
        o->len[i] = 8;
    }
}

static uint64_t full(const void *existing, size_t elen, const struct ops *o, size_t n, int *rc)
{
    const kv_merge_operator *m = kv_merge_uint64_add();
    void *res = (void *)&res; /* must be replaced on success, untouched on failure */
    size_t rlen = 99;
    *rc = m->full_merge(m->state, "k", 1, existing, elen, o->ptr, o->len, n, &res, &rlen);
    if (*rc != 0) {
        ck_assert_ptr_eq(res, (void *)&res);
        return 0;
    }
    ck_assert_uint_eq(rlen, 8);
    uint64_t v = rd64(res);
    free(res);
    return v;
}

static uint64_t partial(const struct ops *o, size_t n, int *rc)
{
    const kv_merge_operator *m = kv_merge_uint64_add();
    void *res = (void *)&res;
    size_t rlen = 99;
    *rc = m->partial_merge(m->state, "k", 1, o->ptr, o->len, n, &res, &rlen);
    if (*rc != 0) {
        ck_assert_ptr_eq(res, (void *)&res);
        return 0;
    }
    ck_assert_uint_eq(rlen, 8);
    uint64_t v = rd64(res);
    free(res);
    return v;
}

START_TEST(the_operator)
{
    const kv_merge_operator *m = kv_merge_uint64_add();
    ck_assert_ptr_nonnull(m);
    ck_assert_ptr_eq(m, kv_merge_uint64_add()); /* one static instance */
    ck_assert_str_eq(m->name, "kv.uint64add");
    ck_assert_ptr_nonnull(m->full_merge);
    ck_assert_ptr_nonnull(m->partial_merge);
}
END_TEST

START_TEST(full_merge_sums)
{
    struct ops o;
    int rc;
    uint64_t v[] = {1, 2, 3, 1000000007};
    make_ops(&o, v, 4);
    /* No value: the operands alone. */
    ck_assert_uint_eq(full(NULL, 0, &o, 4, &rc), 1000000013u);
    ck_assert_int_eq(rc, 0);
    ck_assert_uint_eq(full(NULL, 0, &o, 1, &rc), 1);
    ck_assert_int_eq(rc, 0);
    /* No operands, no value: 0. */
    ck_assert_uint_eq(full(NULL, 0, &o, 0, &rc), 0);
    ck_assert_int_eq(rc, 0);
    /* Over a value; byte order is little-endian. */
    uint8_t e[8] = {0x01, 0x02, 0, 0, 0, 0, 0, 0}; /* 0x0201 */
    ck_assert_uint_eq(full(e, 8, &o, 2, &rc), 0x0201u + 3);
    ck_assert_int_eq(rc, 0);
    ck_assert_uint_eq(full(e, 8, &o, 0, &rc), 0x0201u);
    ck_assert_int_eq(rc, 0);
    /* Modulo 2^64. */
    uint64_t w[] = {UINT64_MAX, 2, UINT64_MAX};
    make_ops(&o, w, 3);
    ck_assert_uint_eq(full(NULL, 0, &o, 3, &rc), (uint64_t)UINT64_MAX + 2 + UINT64_MAX);
    ck_assert_int_eq(rc, 0);
    le64(e, UINT64_MAX);
    ck_assert_uint_eq(full(e, 8, &o, 2, &rc), 0);
    ck_assert_int_eq(rc, 0);
}
END_TEST

START_TEST(partial_then_full_is_one_full)
{
    /* Random operands: a partial merge of any run of them, then a full merge
     * over the rest, gives the same sum as one full merge. */
    uint64_t x = 12345, v[16];
    for (int round = 0; round < 200; round++) {
        size_t n = 1 + (size_t)(round % 16);
        for (size_t i = 0; i < n; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            v[i] = x;
        }
        struct ops o, p;
        make_ops(&o, v, n);
        int rc;
        uint64_t want = 0;
        for (size_t i = 0; i < n; i++)
            want += v[i];
        ck_assert_uint_eq(full(NULL, 0, &o, n, &rc), want);
        ck_assert_int_eq(rc, 0);
        size_t a = (size_t)round % n, b = a + (n - a) / 2 + 1; /* [a, b) partial */
        if (b > n)
            b = n;
        struct ops run;
        make_ops(&run, v + a, b - a);
        uint64_t part = partial(&run, b - a, &rc);
        ck_assert_int_eq(rc, 0);
        uint64_t rest[16];
        size_t k = 0;
        for (size_t i = 0; i < a; i++)
            rest[k++] = v[i];
        rest[k++] = part;
        for (size_t i = b; i < n; i++)
            rest[k++] = v[i];
        make_ops(&p, rest, k);
        uint8_t e[8];
        le64(e, 7);
        ck_assert_uint_eq(full(e, 8, &p, k, &rc), want + 7);
        ck_assert_int_eq(rc, 0);
    }
}
END_TEST

START_TEST(wrong_lengths_fail)
{
    struct ops o;
    int rc;
    uint64_t v[] = {1, 2, 3};
    make_ops(&o, v, 3);
    uint8_t e[9] = {0};
    /* A value of another length: the merge fails (the store reports KV_ECORRUPT). */
    full(e, 7, &o, 3, &rc);
    ck_assert_int_ne(rc, 0);
    full(e, 9, &o, 3, &rc);
    ck_assert_int_ne(rc, 0);
    full(e, 0, &o, 3, &rc); /* an empty value is a value, not a missing one */
    ck_assert_int_ne(rc, 0);
    /* An operand of another length, first, middle or last. */
    for (size_t bad = 0; bad < 3; bad++) {
        for (size_t len = 0; len < 12; len += 3) { /* 0, 3, 6, 9 */
            make_ops(&o, v, 3);
            o.len[bad] = len;
            full(NULL, 0, &o, 3, &rc);
            ck_assert_int_ne(rc, 0);
            partial(&o, 3, &rc);
            ck_assert_int_ne(rc, 0);
        }
    }
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("merge_ops");
    TCase *tc = tcase_create("uint64_add");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, the_operator);
    tcase_add_test(tc, full_merge_sums);
    tcase_add_test(tc, partial_then_full_is_one_full);
    tcase_add_test(tc, wrong_lengths_fail);
    suite_add_tcase(s, tc);
    return s;
}
