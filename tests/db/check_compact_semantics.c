/* check_compact_semantics.c - what flushes and compactions do with range
 * deletes, merge operands, the compaction filter and TTL (issue 49), seen
 * through the public API: keys a range delete covers are dropped and stay
 * absent, and the range tombstones go once no snapshot and no lower level
 * needs them; a snapshot keeps reading what it saw; operands are merged
 * (full at the bottom or over a value, partial otherwise) to the values a
 * read computes; a filter's REMOVE never lets an older version back; an
 * expired entry is dropped and no older version reappears; the merge
 * operator's name is kept with the database. */
#define _XOPEN_SOURCE 700
#include <check.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <kv/kv.h>

#include "../kv/merge.h"
#include "fixture.h"

static char dbpath[600];

static void setup_files(void)
{
    test_setup();
    test_path(dbpath, sizeof dbpath, "db");
}

/* ---- a uint64 add operator, with a partial merge ---------------------------------------- */

static uint64_t get_le(const void *p)
{
    const uint8_t *b = p;
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | b[i];
    return v;
}

static void put_le(uint8_t *b, uint64_t v)
{
    for (int i = 0; i < 8; i++, v >>= 8)
        b[i] = (uint8_t)v;
}

static int add_full(void *state, const void *key, size_t klen, const void *existing,
                    size_t existing_len, const void *const *operands, const size_t *operand_lens,
                    size_t n, void **result, size_t *result_len)
{
    (void)state, (void)key, (void)klen;
    if (existing && existing_len != 8)
        return KV_ECORRUPT;
    uint64_t sum = existing ? get_le(existing) : 0;
    for (size_t i = 0; i < n; i++) {
        if (operand_lens[i] != 8)
            return KV_ECORRUPT;
        sum += get_le(operands[i]);
    }
    uint8_t *r = malloc(8);
    if (!r)
        return KV_ENOMEM;
    put_le(r, sum);
    *result = r;
    *result_len = 8;
    return 0;
}

static int add_partial(void *state, const void *key, size_t klen, const void *const *operands,
                       const size_t *operand_lens, size_t n, void **result, size_t *result_len)
{
    return add_full(state, key, klen, NULL, 0, operands, operand_lens, n, result, result_len);
}

static const kv_merge_operator add_op = {.name = "test.add",
                                         .full_merge = add_full,
                                         .partial_merge = add_partial};
static const kv_merge_operator other_op = {.name = "test.other", .full_merge = add_full};

static void merge_u64(kv_db *db, const char *k, uint64_t v)
{
    uint8_t b[8];
    put_le(b, v);
    int rc = kv_merge(db, k, strlen(k), b, 8);
    ck_assert_msg(rc == KV_OK, "kv_merge %s: %s", k, kv_strerror(rc));
}

static void put_u64(kv_db *db, const char *k, uint64_t v)
{
    uint8_t b[8];
    put_le(b, v);
    put_kv(db, k, strlen(k), b, 8);
}

static void expect_u64(kv_db *db, const kv_snapshot *snap, const char *k, uint64_t want)
{
    void *v = NULL;
    size_t vl = 0;
    int rc = kv_get_at(db, snap, k, strlen(k), &v, &vl);
    ck_assert_msg(rc == KV_OK, "%s: %s", k, kv_strerror(rc));
    ck_assert_msg(vl == 8 && get_le(v) == want, "%s: %zu bytes, %" PRIu64 ", want %" PRIu64, k, vl,
                  vl == 8 ? get_le(v) : 0, want);
    kv_free(v);
}

/* ---- helpers ------------------------------------------------------------------------- */

static kv_db *open_with(const kv_merge_operator *mo, const kv_compaction_filter *f, uint64_t ttl)
{
    kv_options o;
    kv_options_init(&o);
    o.create_if_missing = 1;
    o.merge_operator = mo;
    o.compaction_filter = f;
    o.ttl_seconds = ttl;
    o.write_buffer_size = 1 << 20;
    return open_db(dbpath, &o);
}

static void flush(kv_db *db)
{
    int rc = kv_flush(db);
    ck_assert_msg(rc == KV_OK, "kv_flush: %s", kv_strerror(rc));
}

static void key(char *k, size_t cap, int i)
{
    key_of(k, cap, "k", 4, (uint64_t)i);
}

static void delete_range(kv_db *db, int from, int to)
{
    char b[16], e[16];
    key(b, sizeof b, from);
    key(e, sizeof e, to);
    int rc = kv_delete_range(db, b, strlen(b), e, strlen(e));
    ck_assert_msg(rc == KV_OK, "kv_delete_range: %s", kv_strerror(rc));
}

/* Keys [0, n): those in [lo, hi) absent, the others "v<i>", at snap. */
static void expect_keys(kv_db *db, const kv_snapshot *snap, int n, int lo, int hi)
{
    for (int i = 0; i < n; i++) {
        char k[16], v[16];
        key(k, sizeof k, i);
        snprintf(v, sizeof v, "v%d", i);
        void *got = NULL;
        size_t gl = 0;
        int rc = kv_get_at(db, snap, k, strlen(k), &got, &gl);
        if (i >= lo && i < hi) {
            ck_assert_msg(rc == KV_NOTFOUND, "%s: %s, want KV_NOTFOUND", k, kv_strerror(rc));
        } else {
            ck_assert_msg(rc == KV_OK, "%s: %s", k, kv_strerror(rc));
            ck_assert_msg(gl == strlen(v) && memcmp(got, v, gl) == 0, "%s: wrong value", k);
        }
        kv_free(got);
    }
}

static void put_keys(kv_db *db, int n)
{
    for (int i = 0; i < n; i++) {
        char k[16], v[16];
        key(k, sizeof k, i);
        snprintf(v, sizeof v, "v%d", i);
        put_str(db, k, v);
    }
}

/* ---- range deletes ----------------------------------------------------------------------- */

START_TEST(range_delete_dropped)
{
    kv_db *db = open_with(NULL, NULL, 0);
    put_keys(db, 200);
    flush(db);
    compact_all(db); /* the values at the bottom */
    delete_range(db, 50, 150);
    flush(db); /* a table of the range tombstone alone */
    expect_keys(db, NULL, 200, 50, 150);
    compact_all(db);
    struct kv_stats s;
    get_stats(db, &s);
    ck_assert_msg(s.range_deleted_dropped >= 100, "range_deleted_dropped %" PRIu64,
                  s.range_deleted_dropped);
    ck_assert_msg(s.range_tombstones_live == 0, "range_tombstones_live %" PRIu64,
                  s.range_tombstones_live);
    expect_keys(db, NULL, 200, 50, 150);
    db = reopen_db(db, dbpath, NULL);
    expect_keys(db, NULL, 200, 50, 150);
    close_db(db);
}
END_TEST

/* Puts and the range delete in one memtable: the flush drops what it
 * covers, and the tombstone still hides the older table's versions. */
START_TEST(range_delete_at_flush)
{
    kv_db *db = open_with(NULL, NULL, 0);
    put_keys(db, 100);
    flush(db);
    put_keys(db, 100); /* newer versions, same values */
    delete_range(db, 10, 60);
    flush(db);
    struct kv_stats s;
    get_stats(db, &s);
    ck_assert_msg(s.range_deleted_dropped >= 50, "range_deleted_dropped %" PRIu64,
                  s.range_deleted_dropped);
    expect_keys(db, NULL, 100, 10, 60);
    db = reopen_db(db, dbpath, NULL);
    expect_keys(db, NULL, 100, 10, 60);
    compact_all(db);
    expect_keys(db, NULL, 100, 10, 60);
    close_db(db);
}
END_TEST

START_TEST(range_delete_snapshot)
{
    kv_db *db = open_with(NULL, NULL, 0);
    put_keys(db, 200);
    flush(db);
    kv_snapshot *snap;
    ck_assert_int_eq(kv_snapshot_new(db, &snap), KV_OK);
    delete_range(db, 20, 120);
    flush(db);
    compact_all(db);
    expect_keys(db, snap, 200, 0, 0); /* the snapshot still reads every key */
    expect_keys(db, NULL, 200, 20, 120);
    struct kv_stats s;
    get_stats(db, &s);
    ck_assert_msg(s.range_tombstones_live > 0, "the snapshot needs the tombstone");
    kv_snapshot_release(db, snap);
    compact_all(db);
    get_stats(db, &s);
    ck_assert_msg(s.range_deleted_dropped >= 100, "range_deleted_dropped %" PRIu64,
                  s.range_deleted_dropped);
    ck_assert_msg(s.range_tombstones_live == 0, "range_tombstones_live %" PRIu64,
                  s.range_tombstones_live);
    expect_keys(db, NULL, 200, 20, 120);
    /* Written again after the delete: back. */
    char k[16];
    key(k, sizeof k, 30);
    put_str(db, k, "v30");
    compact_all(db);
    expect_value(db, k, strlen(k), "v30", 3);
    expect_keys(db, NULL, 30, 20, 30);
    key(k, sizeof k, 31);
    expect_absent(db, k, strlen(k));
    close_db(db);
}
END_TEST

/* Ranges that overlap, written across flushes, some keys rewritten after
 * them, compacted in steps: against a model. */
START_TEST(range_delete_model)
{
    kv_db *db = open_with(NULL, NULL, 0);
    enum { N = 600 };
    int live[N] = {0}, gen[N] = {0};
    uint64_t x = 42;
    for (int round = 0; round < 12; round++) {
        for (int j = 0; j < 150; j++) {
            int i = (int)((x = splitmix(x)) % N);
            char k[16], v[24];
            key(k, sizeof k, i);
            snprintf(v, sizeof v, "g%d", ++gen[i]);
            put_str(db, k, v);
            live[i] = 1;
        }
        int a = (int)((x = splitmix(x)) % N), len = (int)((x = splitmix(x)) % 80);
        int b = a + len > N ? N : a + len;
        delete_range(db, a, b);
        for (int i = a; i < b; i++)
            live[i] = 0;
        flush(db);
        if (round % 4 == 3)
            compact_all(db);
    }
    compact_all(db);
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < N; i++) {
            char k[16], v[24];
            key(k, sizeof k, i);
            snprintf(v, sizeof v, "g%d", gen[i]);
            if (live[i])
                expect_value(db, k, strlen(k), v, strlen(v));
            else
                expect_absent(db, k, strlen(k));
        }
        db = reopen_db(db, dbpath, NULL);
    }
    struct kv_stats s;
    get_stats(db, &s);
    ck_assert_msg(s.range_tombstones_live == 0, "range_tombstones_live %" PRIu64,
                  s.range_tombstones_live);
    close_db(db);
}
END_TEST

/* kv_repair keeps range deletes: in tables' blocks, and in the log. */
START_TEST(range_delete_repair)
{
    for (int in_log = 0; in_log < 2; in_log++) {
        kv_db *db = open_with(NULL, NULL, 0);
        put_keys(db, 100);
        flush(db);
        compact_all(db);
        delete_range(db, 10, 50);
        if (!in_log)
            flush(db);
        close_db(db);
        int rc = kv_repair(dbpath, NULL);
        ck_assert_msg(rc == KV_OK, "kv_repair: %s", kv_strerror(rc));
        db = open_with(NULL, NULL, 0);
        expect_keys(db, NULL, 100, 10, 50);
        compact_all(db);
        expect_keys(db, NULL, 100, 10, 50);
        close_db(db);
        int e = kv_destroy(dbpath);
        ck_assert_msg(e == KV_OK, "kv_destroy: %s", kv_strerror(e));
    }
}
END_TEST

/* ---- merges ------------------------------------------------------------------------------- */

START_TEST(merges_compacted)
{
    kv_db *db = open_with(&add_op, NULL, 0);
    enum { N = 50 };
    uint64_t want[N] = {0};
    for (int i = 0; i < N; i += 2) { /* every other key has a value below its operands */
        char k[16];
        key(k, sizeof k, i);
        put_u64(db, k, 1000);
        want[i] = 1000;
    }
    flush(db);
    kv_snapshot *snap = NULL;
    uint64_t at_snap[N];
    for (int r = 0; r < 6; r++) {
        for (int i = 0; i < N; i++) {
            char k[16];
            key(k, sizeof k, i);
            merge_u64(db, k, (uint64_t)(i + r));
            want[i] += (uint64_t)(i + r);
        }
        if (r == 2) {
            ck_assert_int_eq(kv_snapshot_new(db, &snap), KV_OK);
            memcpy(at_snap, want, sizeof want);
        }
        flush(db);
    }
    compact_all(db);
    struct kv_stats s;
    get_stats(db, &s);
    ck_assert_msg(s.merge_operands_compacted > 0, "merge_operands_compacted 0");
    for (int i = 0; i < N; i++) {
        char k[16];
        key(k, sizeof k, i);
        expect_u64(db, NULL, k, want[i]);
        expect_u64(db, snap, k, at_snap[i]);
    }
    kv_snapshot_release(db, snap);
    compact_all(db);
    db = reopen_db(db, dbpath, NULL);
    for (int i = 0; i < N; i++) {
        char k[16];
        key(k, sizeof k, i);
        expect_u64(db, NULL, k, want[i]);
    }
    close_db(db);
}
END_TEST

/* Operands over a deleted and a range-deleted key start from nothing. */
START_TEST(merges_over_deletes)
{
    kv_db *db = open_with(&add_op, NULL, 0);
    put_u64(db, "k0001", 500);
    put_u64(db, "k0002", 500);
    put_u64(db, "k0003", 500);
    flush(db);
    compact_all(db);
    int rc = kv_delete(db, "k0001", 5);
    ck_assert_int_eq(rc, KV_OK);
    delete_range(db, 2, 3);
    flush(db);
    merge_u64(db, "k0001", 7);
    merge_u64(db, "k0002", 8);
    merge_u64(db, "k0003", 9);
    flush(db);
    merge_u64(db, "k0002", 1);
    expect_u64(db, NULL, "k0001", 7);
    expect_u64(db, NULL, "k0002", 9);
    expect_u64(db, NULL, "k0003", 509);
    compact_all(db);
    expect_u64(db, NULL, "k0001", 7);
    expect_u64(db, NULL, "k0002", 9);
    expect_u64(db, NULL, "k0003", 509);
    close_db(db);
}
END_TEST

START_TEST(merge_operator_name_kept)
{
    kv_db *db = open_with(&add_op, NULL, 0);
    merge_u64(db, "a", 1);
    close_db(db);
    kv_options o;
    kv_options_init(&o);
    o.merge_operator = &other_op;
    kv_db *bad = NULL;
    int rc = kv_open(dbpath, &o, &bad);
    ck_assert_msg(rc == KV_EINVAL, "another operator's name: %s", kv_strerror(rc));
    ck_assert_ptr_null(bad);
    /* No operator: opens; the operands are not read. */
    o.merge_operator = NULL;
    db = open_db(dbpath, &o);
    close_db(db);
    db = open_with(&add_op, NULL, 0);
    expect_u64(db, NULL, "a", 1);
    close_db(db);
}
END_TEST

/* ---- the compaction filter --------------------------------------------------------------- */

static kv_filter_decision filter_fn(void *state, int level, const void *key, size_t klen,
                                    const void *value, size_t vlen, void **new_value,
                                    size_t *new_len)
{
    (void)state, (void)level, (void)key, (void)klen;
    if (vlen >= 2 && memcmp(value, "rm", 2) == 0)
        return KV_FILTER_REMOVE;
    if (vlen >= 3 && memcmp(value, "chg", 3) == 0) {
        char *n = malloc(7);
        if (!n)
            return KV_FILTER_KEEP;
        memcpy(n, "changed", 7);
        *new_value = n;
        *new_len = 7;
        return KV_FILTER_CHANGE;
    }
    return KV_FILTER_KEEP;
}

static const kv_compaction_filter test_filter = {.name = "test.filter", .filter = filter_fn};

START_TEST(filter_remove_no_resurrection)
{
    kv_db *db = open_with(NULL, &test_filter, 0);
    put_str(db, "a", "old-a");
    put_str(db, "b", "old-b");
    put_str(db, "c", "keep");
    flush(db);
    compact_all(db); /* the old versions at the bottom */
    put_str(db, "a", "rm-a");
    put_str(db, "b", "chg-b");
    flush(db);
    expect_absent(db, "a", 1);
    expect_value(db, "b", 1, "changed", 7);
    expect_value(db, "c", 1, "keep", 4);
    compact_all(db);
    expect_absent(db, "a", 1);
    expect_value(db, "b", 1, "changed", 7);
    struct kv_stats s;
    get_stats(db, &s);
    ck_assert_msg(s.filter_removed >= 1 && s.filter_changed >= 1 && s.filter_kept >= 1,
                  "filter verdicts %" PRIu64 " %" PRIu64 " %" PRIu64, s.filter_kept,
                  s.filter_removed, s.filter_changed);
    close_db(db);
    db = open_with(NULL, NULL, 0);
    expect_absent(db, "a", 1);
    expect_value(db, "b", 1, "changed", 7);
    close_db(db);
}
END_TEST

/* ---- TTL ----------------------------------------------------------------------------------- */

START_TEST(ttl_expired_dropped)
{
    kv_db *db = open_with(NULL, NULL, 0);
    put_str(db, "old", "untimed"); /* written with ttl 0: never expires */
    put_str(db, "shadow", "v0");
    flush(db);
    compact_all(db);
    close_db(db);
    db = open_with(NULL, NULL, 1);
    put_str(db, "shadow", "v1"); /* timed, over an untimed older version */
    for (int i = 0; i < 20; i++) {
        char k[16];
        key(k, sizeof k, i);
        put_str(db, k, "timed");
    }
    flush(db);
    sleep(3); /* now - stamp > 1 */
    expect_absent(db, "shadow", 6);
    compact_all(db);
    struct kv_stats s;
    get_stats(db, &s);
    ck_assert_msg(s.expired_dropped >= 20, "expired_dropped %" PRIu64, s.expired_dropped);
    expect_absent(db, "shadow", 6);
    expect_value(db, "old", 3, "untimed", 7);
    for (int i = 0; i < 20; i++) {
        char k[16];
        key(k, sizeof k, i);
        expect_absent(db, k, strlen(k));
    }
    close_db(db);
    /* Gone from the files, not only from reads under ttl 1. */
    db = open_with(NULL, NULL, 0);
    expect_absent(db, "shadow", 6);
    expect_absent(db, "k0003", 5);
    expect_value(db, "old", 3, "untimed", 7);
    close_db(db);
}
END_TEST

/* ---- the dropper's rule, entry by entry (merge.c, kv_dropper_add) -------------------------- */

/* What the dropper handed on, as text: "K<seq>:<kind>=<value>" for kept
 * entries ("=#n" for an 8-byte number), "D<seq>" for dropped ones. */
struct seen {
    char text[1024];
    int below; /* what the below callback answers */
};

static int seen_emit(void *ctx, const struct kv_dropper_out *o)
{
    struct seen *w = ctx;
    size_t n = strlen(w->text);
    if (!o->keep)
        snprintf(w->text + n, sizeof w->text - n, "D%" PRIu64 " ", o->seq);
    else if (o->vlen == 8 || o->vlen == 16)
        snprintf(w->text + n, sizeof w->text - n, "K%" PRIu64 ":%d=#%" PRIu64 " ", o->seq, o->kind,
                 get_le(o->val));
    else
        snprintf(w->text + n, sizeof w->text - n, "K%" PRIu64 ":%d=%.*s ", o->seq, o->kind,
                 (int)o->vlen, (const char *)o->val);
    return KV_OK;
}

static int seen_below(void *ctx, const uint8_t *key, size_t klen)
{
    (void)key, (void)klen;
    return ((struct seen *)ctx)->below;
}

/* The cases below list entries with their trailing fields left out. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

struct ent {
    uint64_t seq;
    int kind;
    uint64_t num;     /* an 8-byte operand or value */
    const char *text; /* or text (VALUE), when set */
    uint64_t stamp;   /* TVALUE, TMERGE: the write time */
};

/* Feeds key "kb" with entries e[] through a dropper of db at horizon, with
 * range tombstones rt, and checks what came out against want. */
static void drop_case(kv_db *db, uint64_t horizon, const kv_rtset *rt, int below,
                      const struct ent *e, size_t n, const char *want)
{
    struct seen w = {.below = below};
    struct kv_dropper d = {.horizon = horizon,
                           .db = db,
                           .rt = rt,
                           .level = 1,
                           .now = (uint64_t)time(NULL),
                           .ctx = &w,
                           .emit = seen_emit,
                           .below = seen_below};
    for (size_t i = 0; i < n; i++) {
        uint8_t v[16];
        size_t vl = 8;
        const uint8_t *vp = v;
        if (e[i].text) {
            vp = (const uint8_t *)e[i].text;
            vl = strlen(e[i].text);
        } else
            put_le(v, e[i].num);
        if (e[i].kind == KV_KIND_TVALUE || e[i].kind == KV_KIND_TMERGE) {
            put_le(v, e[i].num);
            put_le(v + 8, e[i].stamp);
            vp = v;
            vl = 16;
        }
        if (e[i].kind == KV_KIND_TOMBSTONE)
            vl = 0;
        int rc = kv_dropper_add(&d, (const uint8_t *)"kb", 2, e[i].seq, e[i].kind, vp, vl);
        ck_assert_msg(rc == KV_OK, "kv_dropper_add: %s", kv_strerror(rc));
    }
    ck_assert_int_eq(kv_dropper_end(&d), KV_OK);
    kv_dropper_free(&d);
    ck_assert_msg(strcmp(w.text, want) == 0, "got \"%s\", want \"%s\"", w.text, want);
}

START_TEST(dropper_rule)
{
    kv_options o;
    kv_options_init(&o);
    o.merge_operator = &add_op;
    o.compaction_filter = &test_filter;
    o.ttl_seconds = 100;
    kv_db *db = open_db(dbpath, &o);
    enum {
        V = KV_KIND_VALUE,
        M = KV_KIND_MERGE,
        T = KV_KIND_TOMBSTONE,
        TV = KV_KIND_TVALUE,
        TM = KV_KIND_TMERGE
    };
    uint64_t now = (uint64_t)time(NULL);
    /* Operands over a value: one value at the newest operand's sequence. */
    drop_case(db, 100, NULL, 1, (struct ent[]){{50, M, 1}, {40, M, 2}, {30, V, 10}}, 3,
              "K50:1=#13 D30 ");
    /* Above the horizon: as they are. */
    drop_case(db, 100, NULL, 1, (struct ent[]){{150, M, 5}, {50, M, 1}, {30, V, 10}}, 3,
              "K150:3=#5 K50:1=#11 D30 ");
    /* Nothing below: a full merge from nothing; something below: partial. */
    drop_case(db, 100, NULL, 0, (struct ent[]){{50, M, 1}, {40, M, 2}}, 2, "K50:1=#3 ");
    drop_case(db, 100, NULL, 1, (struct ent[]){{50, M, 1}, {40, M, 2}}, 2, "K50:3=#3 ");
    /* A tombstone below the operands: from nothing; the tombstone goes. */
    drop_case(db, 100, NULL, 1, (struct ent[]){{50, M, 1}, {40, T, 0}, {30, V, 7}}, 3,
              "K50:1=#1 D40 D30 ");
    /* A newer version every snapshot sees hides the older; a snapshot
     * between them keeps both. */
    drop_case(db, 100, NULL, 1, (struct ent[]){{50, V, 1}, {40, V, 2}}, 2, "K50:1=#1 D40 ");
    drop_case(db, 45, NULL, 1, (struct ent[]){{50, V, 1}, {40, V, 2}}, 2, "K50:1=#1 K40:1=#2 ");
    /* A range tombstone at 45 over [ka, kc): what it covers goes, and
     * operands above it merge from nothing. */
    kv_rt r = {(const uint8_t *)"ka", 2, (const uint8_t *)"kc", 2, 45};
    kv_rtset *rt = NULL;
    ck_assert_int_eq(kv_rtset_union(NULL, NULL, 0, &r, 1, NULL, NULL, &rt), KV_OK);
    drop_case(db, 100, rt, 1, (struct ent[]){{50, M, 1}, {40, V, 7}, {30, V, 8}}, 3,
              "K50:1=#1 D40 D30 ");
    /* ... unless a snapshot between them (horizon 42) still reads it. */
    drop_case(db, 42, rt, 1, (struct ent[]){{50, M, 1}, {40, V, 7}}, 2, "K50:3=#1 K40:1=#7 ");
    kv_rtset_unref(rt);
    /* The filter: REMOVE leaves a tombstone over what lies below (or
     * nothing, at the bottom); CHANGE replaces the value. */
    drop_case(db, 100, NULL, 1, (struct ent[]){{50, V, 0, "rm-x"}, {40, V, 0, "old"}}, 2,
              "K50:0= D40 ");
    drop_case(db, 100, NULL, 0, (struct ent[]){{50, V, 0, "rm-x"}, {40, V, 0, "old"}}, 2,
              "D50 D40 ");
    drop_case(db, 100, NULL, 1, (struct ent[]){{50, V, 0, "chg"}}, 1, "K50:1=changed ");
    /* TTL: an expired value reads as a tombstone; a live timed one stays. */
    drop_case(db, 100, NULL, 1, (struct ent[]){{50, TV, 1, NULL, now - 1000}, {40, V, 0, "old"}}, 2,
              "K50:0= D40 ");
    drop_case(db, 100, NULL, 1, (struct ent[]){{50, TV, 1, NULL, now}}, 1, "K50:5=#1 ");
    /* Timed operands merge into a timed value stamped with the newest's
     * time (the 16 bytes: the sum, then the stamp). */
    drop_case(db, 100, NULL, 1,
              (struct ent[]){{50, TM, 1, NULL, now}, {40, TM, 2, NULL, now - 5}, {30, V, 4}}, 3,
              "K50:5=#7 D30 ");
    close_db(db);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("compact_semantics");
    TCase *tc = test_tcase(s, "range", 60, 0);
    tcase_add_checked_fixture(tc, setup_files, test_teardown);
    tcase_add_test(tc, range_delete_dropped);
    tcase_add_test(tc, range_delete_at_flush);
    tcase_add_test(tc, range_delete_snapshot);
    tcase_add_test(tc, range_delete_model);
    tcase_add_test(tc, range_delete_repair);
    tc = test_tcase(s, "merge", 60, 0);
    tcase_add_checked_fixture(tc, setup_files, test_teardown);
    tcase_add_test(tc, merges_compacted);
    tcase_add_test(tc, merges_over_deletes);
    tcase_add_test(tc, merge_operator_name_kept);
    tc = test_tcase(s, "filter", 60, 0);
    tcase_add_checked_fixture(tc, setup_files, test_teardown);
    tcase_add_test(tc, filter_remove_no_resurrection);
    tcase_add_test(tc, ttl_expired_dropped);
    tc = test_tcase(s, "dropper", 60, 0);
    tcase_add_checked_fixture(tc, setup_files, test_teardown);
    tcase_add_test(tc, dropper_rule);
    return s;
}
