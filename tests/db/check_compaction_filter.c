/* check_compaction_filter.c - kv_options.compaction_filter through kv.h: a
 * filter that removes the keys under "rm/" and changes those under "ch/"
 * (appending '!', once) and keeps the rest. After kv_flush and
 * kv_compact_range the removed keys read absent everywhere (and an older
 * version of one, written before and overwritten, does not reappear), the
 * changed ones read changed, the kept ones as they were; while a snapshot
 * lives, a value written after it is not filtered (the snapshot can see an
 * older state of its key) and the snapshot keeps its view; kv_stats counts
 * the verdicts the filter gave. Also: the merge operator's name is kept
 * with the database, and reopening under another is KV_EINVAL; a
 * full_merge that fails fails the read and the compaction and loses
 * nothing. */
#define _XOPEN_SOURCE 700
#include <check.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kv/kv.h>

#include "fixture.h"

#define N 200 /* keys per prefix */

static atomic_ulong kept, removed, changed, bad_calls;

static kv_filter_decision prefix_filter(void *state, int level, const void *key, size_t klen,
                                        const void *value, size_t vlen, void **new_value,
                                        size_t *new_len)
{
    (void)state;
    if (level < 0 || level > 6 || (vlen && !value))
        atomic_fetch_add(&bad_calls, 1);
    if (klen >= 3 && memcmp(key, "rm/", 3) == 0) {
        atomic_fetch_add(&removed, 1);
        return KV_FILTER_REMOVE;
    }
    if (klen >= 3 && memcmp(key, "ch/", 3) == 0 &&
        (vlen == 0 || ((const char *)value)[vlen - 1] != '!')) {
        char *nv = malloc(vlen + 1);
        if (!nv) { /* keep it: the test then fails on the value */
            atomic_fetch_add(&kept, 1);
            return KV_FILTER_KEEP;
        }
        memcpy(nv, value, vlen);
        nv[vlen] = '!';
        *new_value = nv;
        *new_len = vlen + 1;
        atomic_fetch_add(&changed, 1);
        return KV_FILTER_CHANGE;
    }
    atomic_fetch_add(&kept, 1);
    return KV_FILTER_KEEP;
}

static const kv_compaction_filter filter = {"check.prefix_filter", NULL, prefix_filter};

static void key(char *k, size_t cap, const char *prefix, int i)
{
    snprintf(k, cap, "%s%04d", prefix, i);
}

static void must(int rc, const char *what)
{
    ck_assert_msg(rc == KV_OK, "%s: %s (%s)", what, kv_strerror(rc), kv_error_text());
}

static void options(kv_options *o, const kv_compaction_filter *f)
{
    kv_options_init(o);
    o->write_buffer_size = (size_t)64 << 10;
    o->target_file_size = (size_t)64 << 10;
    o->compaction_filter = f;
    o->idle_compaction_ms = 0;
}

/* Reads of key k at snap: absent (want NULL) or want, by kv_get_at and by
 * kv_multi_get. */
static void expect(kv_db *db, const kv_snapshot *snap, const char *k, const char *want,
                   const char *when)
{
    void *v = NULL;
    size_t vl = 0;
    int rc = kv_get_at(db, snap, k, strlen(k), &v, &vl);
    if (want)
        ck_assert_msg(rc == KV_OK && vl == strlen(want) && memcmp(v, want, vl) == 0,
                      "%s: %s: %s \"%.*s\", expected \"%s\"", when, k, kv_strerror(rc),
                      rc == KV_OK ? (int)vl : 0, rc == KV_OK ? (char *)v : "", want);
    else
        ck_assert_msg(rc == KV_NOTFOUND, "%s: %s: %s \"%.*s\", expected absent", when, k,
                      kv_strerror(rc), rc == KV_OK ? (int)vl : 0, rc == KV_OK ? (char *)v : "");
    kv_free(v);
    const void *keys[1] = {k};
    size_t kl[1] = {strlen(k)}, vls[1];
    void *vals[1];
    int st[1];
    must(kv_multi_get(db, snap, 1, keys, kl, vals, vls, st), "multi_get");
    ck_assert_msg(want ? st[0] == KV_OK && vls[0] == strlen(want) &&
                             memcmp(vals[0], want, vls[0]) == 0
                       : st[0] == KV_NOTFOUND,
                  "%s: multi_get %s: %s, expected %s", when, k, kv_strerror(st[0]),
                  want ? want : "absent");
    kv_free(vals[0]);
}

/* A prefix scan must show exactly the keys want(i) != NULL, in order, with
 * those values, then "ch/snap" = "after!" when the prefix is "ch/". */
static void expect_scan(kv_db *db, const kv_snapshot *snap, const char *prefix,
                        const char *(*want)(int i), const char *when)
{
    kv_iter *it = NULL;
    must(kv_iter_new(db, snap, &it), "iter");
    must(kv_iter_seek_prefix(it, prefix, strlen(prefix)), "seek_prefix");
    for (int i = 0; i < N; i++) {
        const char *w = want(i);
        if (!w)
            continue;
        char k[32];
        key(k, sizeof k, prefix, i);
        ck_assert_msg(kv_iter_valid(it), "%s: scan of %s ended before %s (%s)", when, prefix, k,
                      kv_strerror(kv_iter_status(it)));
        size_t kl, vl;
        const char *ik = kv_iter_key(it, &kl), *iv = kv_iter_value(it, &vl);
        ck_assert_msg(kl == strlen(k) && memcmp(ik, k, kl) == 0 && vl == strlen(w) &&
                          memcmp(iv, w, vl) == 0,
                      "%s: scan at %.*s = \"%.*s\", expected %s = \"%s\"", when, (int)kl, ik,
                      (int)vl, iv, k, w);
        kv_iter_next(it);
    }
    if (strcmp(prefix, "ch/") == 0) {
        size_t kl, vl;
        ck_assert_msg(kv_iter_valid(it), "%s: scan of ch/ ended before ch/snap", when);
        const char *ik = kv_iter_key(it, &kl), *iv = kv_iter_value(it, &vl);
        ck_assert_msg(kl == 7 && memcmp(ik, "ch/snap", 7) == 0 && vl == 6 &&
                          memcmp(iv, "after!", 6) == 0,
                      "%s: scan at %.*s = \"%.*s\", expected ch/snap = \"after!\"", when, (int)kl,
                      ik, (int)vl, iv);
        kv_iter_next(it);
    }
    size_t kl = 0;
    const char *ik = kv_iter_key(it, &kl);
    ck_assert_msg(!kv_iter_valid(it), "%s: scan of %s shows %.*s past the last key", when, prefix,
                  (int)kl, ik ? ik : "");
    ck_assert_int_eq(kv_iter_status(it), KV_OK);
    kv_iter_free(it);
}

static const char *none(int i)
{
    (void)i;
    return NULL;
}
static const char *old_value(int i)
{
    (void)i;
    return "old";
}
static const char *ch_after(int i)
{
    return i < N / 2 ? "new!" : "old!";
}

START_TEST(filter_verdicts)
{
    char p[600], k[32];
    test_path(p, sizeof p, "db");
    kv_options o;

    /* 1. Without a filter: "old" under every key, compacted to the bottom. */
    options(&o, NULL);
    kv_db *db = open_db(p, &o);
    for (int i = 0; i < N; i++) {
        key(k, sizeof k, "ch/", i);
        put_str(db, k, "old");
        key(k, sizeof k, "keep/", i);
        put_str(db, k, "old");
        key(k, sizeof k, "rm/", i);
        put_str(db, k, "old");
    }
    compact_all(db);

    /* 2. With the filter: the first half of "rm/" and "ch/" overwritten
     * ("new"; the older "old" lies below, at the bottom), and "snap/"
     * keys: one before a snapshot, overwritten after it. */
    options(&o, &filter);
    db = reopen_db(db, p, &o);
    for (int i = 0; i < N / 2; i++) {
        key(k, sizeof k, "rm/", i);
        put_str(db, k, "new");
        key(k, sizeof k, "ch/", i);
        put_str(db, k, "new");
    }
    put_str(db, "rm/snap", "before");
    put_str(db, "ch/snap", "before");
    kv_snapshot *snap = NULL;
    must(kv_snapshot_new(db, &snap), "snapshot");
    put_str(db, "rm/snap", "after");
    put_str(db, "ch/snap", "after");
    put_str(db, "rm/new", "after"); /* absent at the snapshot */

    /* 3. Flush and compact with the snapshot live. */
    must(kv_flush(db), "flush");
    compact_all(db);
    /* Written after the snapshot: not asked about, so as written. */
    expect(db, NULL, "rm/snap", "after", "snapshot live");
    expect(db, NULL, "ch/snap", "after", "snapshot live");
    expect(db, NULL, "rm/new", "after", "snapshot live");
    /* The snapshot's own view of those keys is what it was. */
    expect(db, snap, "rm/snap", "before", "at the snapshot");
    expect(db, snap, "ch/snap", "before", "at the snapshot");
    expect(db, snap, "rm/new", NULL, "at the snapshot");
    /* The rest (below the snapshot, no older state seen by it): filtered. */
    for (int i = 0; i < N; i++) {
        key(k, sizeof k, "rm/", i);
        expect(db, NULL, k, NULL, "filtered, snapshot live");
        key(k, sizeof k, "ch/", i);
        expect(db, NULL, k, ch_after(i), "filtered, snapshot live");
        key(k, sizeof k, "keep/", i);
        expect(db, NULL, k, "old", "filtered, snapshot live");
    }
    kv_snapshot_release(db, snap);

    /* 4. Released: the next compaction asks about the rest. */
    compact_all(db);
    expect(db, NULL, "rm/snap", NULL, "snapshot released");
    expect(db, NULL, "rm/new", NULL, "snapshot released");
    expect(db, NULL, "ch/snap", "after!", "snapshot released");
    expect_scan(db, NULL, "rm/", none, "snapshot released");
    expect_scan(db, NULL, "ch/", ch_after, "snapshot released");
    expect_scan(db, NULL, "keep/", old_value, "snapshot released");

    struct kv_stats s;
    get_stats(db, &s);
    fprintf(stderr,
            "filter: kv_stats kept %llu removed %llu changed %llu; the filter said "
            "keep %lu remove %lu change %lu\n",
            (unsigned long long)s.filter_kept, (unsigned long long)s.filter_removed,
            (unsigned long long)s.filter_changed, atomic_load(&kept), atomic_load(&removed),
            atomic_load(&changed));
    ck_assert_uint_eq(atomic_load(&bad_calls), 0);
    /* Counted since this open, as the filter gave them (it had no other
     * open to run in). */
    ck_assert_uint_eq(s.filter_kept, atomic_load(&kept));
    ck_assert_uint_eq(s.filter_removed, atomic_load(&removed));
    ck_assert_uint_eq(s.filter_changed, atomic_load(&changed));
    ck_assert_uint_ge(s.filter_removed, N + 2);
    ck_assert_uint_ge(s.filter_changed, N + 1);
    ck_assert_uint_ge(s.filter_kept, N);

    /* 5. Reopened without a filter: nothing removed comes back. */
    options(&o, NULL);
    db = reopen_db(db, p, &o);
    expect_scan(db, NULL, "rm/", none, "reopened");
    expect_scan(db, NULL, "ch/", ch_after, "reopened");
    compact_all(db);
    expect_scan(db, NULL, "rm/", none, "reopened and compacted");
    close_db(db);
}
END_TEST

/* A filter that removes values written in the memtable: the flush alone
 * applies it, and a removed key whose older version lies in a table below
 * stays removed after the flush, before any compaction. */
START_TEST(filter_in_flush)
{
    char p[600], k[32];
    test_path(p, sizeof p, "db");
    kv_options o;
    options(&o, NULL);
    kv_db *db = open_db(p, &o);
    for (int i = 0; i < N; i++) {
        key(k, sizeof k, "rm/", i);
        put_str(db, k, "old");
    }
    must(kv_flush(db), "flush");
    options(&o, &filter);
    db = reopen_db(db, p, &o);
    for (int i = 0; i < N; i += 2) {
        key(k, sizeof k, "rm/", i);
        put_str(db, k, "new");
    }
    must(kv_flush(db), "flush");
    for (int i = 0; i < N; i += 2) {
        key(k, sizeof k, "rm/", i);
        expect(db, NULL, k, NULL, "after the flush");
    }
    compact_all(db);
    expect_scan(db, NULL, "rm/", none, "compacted");
    close_db(db);
}
END_TEST

/* ---- the merge operator's name is the database's ------------------------------------ */

static int add_full(void *state, const void *key, size_t klen, const void *existing,
                    size_t existing_len, const void *const *ops, const size_t *lens, size_t n,
                    void **result, size_t *result_len)
{
    /* Delegates to kv's uint64 add under another name. */
    const kv_merge_operator *u = kv_merge_uint64_add();
    (void)state;
    return u->full_merge(u->state, key, klen, existing, existing_len, ops, lens, n, result,
                         result_len);
}

static const kv_merge_operator other_op = {"check.other", NULL, add_full, NULL};

START_TEST(merge_operator_name)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_options o;
    options(&o, NULL);
    o.merge_operator = kv_merge_uint64_add();
    ck_assert_str_eq(kv_merge_uint64_add()->name, "kv.uint64add");
    kv_db *db = open_db(p, &o);
    uint64_t one = 1, got = 0;
    uint8_t le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (uint8_t)(one >> (8 * i));
    for (int i = 0; i < 5; i++)
        must(kv_merge(db, "n", 1, le, 8), "merge");
    must(kv_flush(db), "flush");
    close_db(db);

    /* Another name: refused, and the database stays as it was. */
    o.merge_operator = &other_op;
    kv_db *bad = NULL;
    int rc = kv_open(p, &o, &bad);
    ck_assert_msg(rc == KV_EINVAL, "open under another merge operator's name: %s", kv_strerror(rc));
    ck_assert_ptr_null(bad);

    /* The same name again: opens, the operands merged as before. */
    o.merge_operator = kv_merge_uint64_add();
    db = open_db(p, &o);
    void *v = NULL;
    size_t vl = 0;
    must(kv_get(db, "n", 1, &v, &vl), "get");
    ck_assert_uint_eq(vl, 8);
    for (int i = 7; i >= 0; i--)
        got = got << 8 | ((uint8_t *)v)[i];
    kv_free(v);
    ck_assert_uint_eq(got, 5);
    /* A value of another length fails the merge with KV_ECORRUPT, and the
     * other keys stay readable. */
    must(kv_merge(db, "bad", 3, "xyz", 3), "merge of a short operand");
    rc = kv_get(db, "bad", 3, &v, &vl);
    ck_assert_msg(rc == KV_ECORRUPT, "get of a key whose operand is 3 bytes: %s", kv_strerror(rc));
    must(kv_get(db, "n", 1, &v, &vl), "get");
    kv_free(v);
    close_db(db);

    /* Without any merge operator: kv_merge and a batch holding a merge are
     * KV_EINVAL. */
    o.merge_operator = NULL;
    kv_db *none_db = NULL;
    char p2[600];
    test_path(p2, sizeof p2, "db2");
    none_db = open_db(p2, &o);
    ck_assert_int_eq(kv_merge(none_db, "n", 1, le, 8), KV_EINVAL);
    kv_batch *b = NULL;
    must(kv_batch_new(&b), "batch");
    must(kv_batch_put(b, "x", 1, "1", 1), "batch put");
    must(kv_batch_merge(b, "n", 1, le, 8), "batch merge");
    ck_assert_int_eq(kv_write(none_db, b), KV_EINVAL);
    expect_absent(none_db, "x", 1); /* nothing of the refused batch */
    kv_batch_free(b);
    close_db(none_db);
}
END_TEST

/* ---- a merge operator that fails ------------------------------------------------------ */

/* Appends (existing "," operands), but fails while `failing` is set and an
 * operand is "FAIL". */
static atomic_int failing;

static int picky_full(void *state, const void *key, size_t klen, const void *existing,
                      size_t existing_len, const void *const *ops, const size_t *lens, size_t n,
                      void **result, size_t *result_len)
{
    (void)state, (void)key, (void)klen;
    size_t total = existing ? existing_len + 1 : 0;
    for (size_t i = 0; i < n; i++) {
        if (atomic_load(&failing) && lens[i] == 4 && memcmp(ops[i], "FAIL", 4) == 0)
            return 1;
        total += lens[i] + 1;
    }
    char *r = malloc(total + 1);
    if (!r)
        return -1;
    size_t p = 0;
    if (existing) {
        memcpy(r, existing, existing_len);
        p = existing_len;
    }
    for (size_t i = 0; i < n; i++) {
        if (existing || i > 0)
            r[p++] = ',';
        memcpy(r + p, ops[i], lens[i]);
        p += lens[i];
    }
    *result = r;
    *result_len = p;
    return 0;
}

static const kv_merge_operator picky_op = {"check.picky", NULL, picky_full, NULL};

/* full_merge's failure fails the read (an error, not a value nor
 * KV_NOTFOUND) and the compaction, and the stored data stays as it was: with
 * the operator mended, the same database reads the merge whole. */
START_TEST(merge_failure_keeps_data)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_options o;
    options(&o, NULL);
    o.merge_operator = &picky_op;
    atomic_store(&failing, 1);
    kv_db *db = open_db(p, &o);
    put_str(db, "k", "v");
    put_str(db, "other", "x");
    must(kv_merge(db, "k", 1, "a", 1), "merge a");
    must(kv_merge(db, "k", 1, "FAIL", 4), "merge FAIL");
    must(kv_merge(db, "k", 1, "b", 1), "merge b");
    void *v = NULL;
    size_t vl = 0;
    int rc = kv_get(db, "k", 1, &v, &vl);
    ck_assert_msg(rc != KV_OK && rc != KV_NOTFOUND, "get of a key whose merge fails: %s",
                  kv_strerror(rc));
    ck_assert_ptr_null(v);
    expect_value(db, "other", 5, "x", 1);
    kv_iter *it = NULL;
    must(kv_iter_new(db, NULL, &it), "iter");
    kv_iter_seek_first(it);
    for (; kv_iter_valid(it); kv_iter_next(it)) /* the values asked for, as a reader does */
        (void)kv_iter_value(it, &vl);
    ck_assert_msg(kv_iter_status(it) != KV_OK, "an iterator over a key whose merge fails");
    kv_iter_free(it);
    /* A compaction to the bottom must merge, and fails; then the database
     * may refuse writes until reopened (a background error), and close says
     * so. */
    rc = kv_compact_range(db, NULL, 0, NULL, 0);
    ck_assert_msg(rc != KV_OK, "a compaction whose merge fails: KV_OK");
    (void)kv_close(db);

    atomic_store(&failing, 0);
    db = open_db(p, &o);
    expect_value(db, "k", 1, "v,a,FAIL,b", 10);
    expect_value(db, "other", 5, "x", 1);
    compact_all(db);
    expect_value(db, "k", 1, "v,a,FAIL,b", 10);
    close_db(db);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("compaction_filter");
    TCase *tc = test_tcase(s, "filter", 300, 1);
    tcase_add_test(tc, filter_verdicts);
    tcase_add_test(tc, filter_in_flush);
    tcase_add_test(tc, merge_operator_name);
    tcase_add_test(tc, merge_failure_keeps_data);
    return s;
}
