/* check_comparator.c - custom key orders (kv_options.comparator) through
 * every layer: a reverse-bytewise comparator (keys with 0x00 bytes, short
 * and long) and a numeric one (decimal numbers of different lengths,
 * compared by value), each against a model over random puts and deletes,
 * across flushes, compactions into several levels, kv_compact_range with
 * bounds, close and reopen; read back with kv_get, kv_multi_get and
 * iterators both ways, with seeks and bounds. Also: the comparator's name
 * in the manifest (a wrong one, a bytewise database under a comparator and
 * the other way round are KV_EINVAL naming both), a version-3 options
 * struct, bad comparators, prefix seeks, prefix_len and range_filter_bits
 * refused with a comparator, and one table written and read under a
 * comparator with the sstable API alone. */
#define _XOPEN_SOURCE 700
#include <check.h>
#include <dirent.h>
#include <ftw.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <kv/kv.h>
#include <kv/sstable.h>
#include <lmdb.h>

#include "../kv/manifest.h"
#include "fixture.h"

/* ---- the comparators ------------------------------------------------------------------ */

static int bytewise(const void *a, size_t alen, const void *b, size_t blen)
{
    size_t n = alen < blen ? alen : blen;
    int c = n ? memcmp(a, b, n) : 0;
    if (c)
        return c < 0 ? -1 : 1;
    return alen < blen ? -1 : alen > blen;
}

/* Bytewise order turned round. ctx counts the calls, to show it is used
 * (atomically: the store calls it from its background thread too). */
static int reverse_cmp(void *ctx, const void *a, size_t alen, const void *b, size_t blen)
{
    atomic_fetch_add_explicit((_Atomic unsigned long *)ctx, 1, memory_order_relaxed);
    return bytewise(b, blen, a, alen);
}

/* Decimal numbers without leading zeros, by value: a longer one is larger;
 * of equal length, bytewise. */
static int numeric_cmp(void *ctx, const void *a, size_t alen, const void *b, size_t blen)
{
    atomic_fetch_add_explicit((_Atomic unsigned long *)ctx, 1, memory_order_relaxed);
    if (alen != blen)
        return alen < blen ? -1 : 1;
    return bytewise(a, alen, b, blen);
}

static _Atomic unsigned long reverse_calls, numeric_calls;
static const kv_comparator reverse = {"test.reverse", reverse_cmp, &reverse_calls};
static const kv_comparator numeric = {"test.numeric", numeric_cmp, &numeric_calls};

/* ---- the model ---------------------------------------------------------------------- */

#define MAX_KEY 600

struct entry {
    uint8_t k[MAX_KEY];
    size_t klen;
    char v[128];
    size_t vlen;
    int live;
};

struct model {
    const kv_comparator *cmp;
    struct entry *e; /* every key ever written, in cmp's order */
    size_t n, cap;
};

static int mcmp(const struct model *m, const void *a, size_t alen, const void *b, size_t blen)
{
    return m->cmp->compare(m->cmp->ctx, a, alen, b, blen);
}

/* The first entry >= key (n: none). */
static size_t lower_bound(const struct model *m, const void *k, size_t klen)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (mcmp(m, m->e[mid].k, m->e[mid].klen, k, klen) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static struct entry *model_slot(struct model *m, const uint8_t *k, size_t klen)
{
    size_t i = lower_bound(m, k, klen);
    if (i < m->n && m->e[i].klen == klen && memcmp(m->e[i].k, k, klen) == 0)
        return &m->e[i];
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 256;
        m->e = realloc(m->e, m->cap * sizeof *m->e);
        ck_assert_ptr_nonnull(m->e);
    }
    memmove(&m->e[i + 1], &m->e[i], (m->n - i) * sizeof *m->e);
    m->n++;
    memset(&m->e[i], 0, sizeof m->e[i]);
    memcpy(m->e[i].k, k, klen);
    m->e[i].klen = klen;
    return &m->e[i];
}

/* Key number i of the run: numeric keys are the decimal numbers 0 ..
 * 999999 (1 to 6 digits); the reverse run's keys are random bytes with
 * many 0x00 bytes, 0 to 20 long, and one in 64 is 300 .. 599 bytes long. */
static size_t make_key(const kv_comparator *cmp, uint64_t i, uint8_t *k)
{
    uint64_t r = splitmix(i);
    if (cmp == &numeric) {
        /* mostly small numbers, so lengths vary: 1 .. 6 digits */
        uint64_t mod[] = {10, 100, 1000, 10000, 100000, 1000000};
        return (size_t)snprintf((char *)k, MAX_KEY, "%llu",
                                (unsigned long long)(r % mod[(r >> 40) % 6]));
    }
    size_t len = (r >> 60) == 0 && (r & 0xF0) == 0 ? 300 + (size_t)(r >> 20) % 300
                                                 : (size_t)(r % 21);
    for (size_t j = 0; j < len; j++) {
        uint64_t b = splitmix(r + j);
        k[j] = (b & 3) == 0 ? 0x00 : (b & 7) == 1 ? 0xFF : (uint8_t)(b >> 8) % 4;
    }
    return len;
}

/* ---- checks of a database against the model ----------------------------------------------- */

static void check_gets(kv_db *db, const struct model *m)
{
    for (size_t i = 0; i < m->n; i++) {
        const struct entry *e = &m->e[i];
        void *v = NULL;
        size_t vlen = 0;
        int rc = kv_get(db, e->k, e->klen, &v, &vlen);
        if (e->live) {
            ck_assert_msg(rc == KV_OK, "get of model key %zu: %d %s", i, rc, kv_error_text());
            ck_assert_uint_eq(vlen, e->vlen);
            ck_assert_mem_eq(v, e->v, vlen);
        } else {
            ck_assert_msg(rc == KV_NOTFOUND, "deleted key %zu: %d", i, rc);
        }
        kv_free(v);
    }
}

static void check_multi_get(kv_db *db, const struct model *m, uint64_t seed)
{
    enum { N = 40 };
    const void *keys[N];
    size_t klens[N], vlens[N];
    void *vals[N];
    int statuses[N];
    uint8_t absent[N][8];
    const struct entry *want[N];
    for (size_t j = 0; j < N; j++) {
        uint64_t r = splitmix(seed + j);
        if (m->n && r % 5) {
            want[j] = &m->e[r % m->n];
            keys[j] = want[j]->k;
            klens[j] = want[j]->klen;
        } else { /* a key never written: 7 digits, or 8 bytes of 0x09 */
            want[j] = NULL;
            memcpy(absent[j], m->cmp == &numeric ? "12345678" : "\t\t\t\t\t\t\t\t", 8);
            absent[j][0] = (uint8_t)(m->cmp == &numeric ? '1' + j % 9 : 9);
            keys[j] = absent[j];
            klens[j] = m->cmp == &numeric ? 7 : 8;
        }
    }
    ck_assert_int_eq(kv_multi_get(db, NULL, N, keys, klens, vals, vlens, statuses), KV_OK);
    for (size_t j = 0; j < N; j++) {
        if (want[j] && want[j]->live) {
            ck_assert_msg(statuses[j] == KV_OK, "multi-get key %zu: %d", j, statuses[j]);
            ck_assert_uint_eq(vlens[j], want[j]->vlen);
            ck_assert_mem_eq(vals[j], want[j]->v, vlens[j]);
            kv_free(vals[j]);
        } else {
            ck_assert_msg(statuses[j] == KV_NOTFOUND, "multi-get key %zu: %d", j, statuses[j]);
        }
    }
}

/* The live entries of m in [lo, hi) (NULL bound: open), forward and
 * backward, against an iterator with those bounds. */
static void check_scan(kv_db *db, const struct model *m, const struct entry *lo,
                       const struct entry *hi)
{
    kv_iter *it;
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    if (lo || hi)
        ck_assert_int_eq(kv_iter_set_bounds(it, lo ? lo->k : NULL, lo ? lo->klen : 0,
                                            hi ? hi->k : NULL, hi ? hi->klen : 0),
                         KV_OK);
    size_t first = lo ? lower_bound(m, lo->k, lo->klen) : 0;
    size_t end = hi ? lower_bound(m, hi->k, hi->klen) : m->n;
    size_t i = first, seen = 0;
    for (kv_iter_seek_first(it); kv_iter_valid(it); kv_iter_next(it), i++) {
        while (i < end && !m->e[i].live)
            i++;
        ck_assert_msg(i < end, "iterator past the model's last key");
        size_t klen, vlen;
        const void *k = kv_iter_key(it, &klen), *v = kv_iter_value(it, &vlen);
        ck_assert_uint_eq(klen, m->e[i].klen);
        ck_assert_mem_eq(k, m->e[i].k, klen);
        ck_assert_uint_eq(vlen, m->e[i].vlen);
        ck_assert_mem_eq(v, m->e[i].v, vlen);
        seen++;
    }
    ck_assert_int_eq(kv_iter_status(it), KV_OK);
    while (i < end && !m->e[i].live)
        i++;
    ck_assert_uint_eq(i, end);
    /* backward */
    size_t back = 0;
    i = end;
    for (kv_iter_seek_last(it); kv_iter_valid(it); kv_iter_prev(it)) {
        do {
            ck_assert_msg(i > first, "iterator before the model's first key");
            i--;
        } while (!m->e[i].live);
        size_t klen;
        const void *k = kv_iter_key(it, &klen);
        ck_assert_uint_eq(klen, m->e[i].klen);
        ck_assert_mem_eq(k, m->e[i].k, klen);
        back++;
    }
    ck_assert_int_eq(kv_iter_status(it), KV_OK);
    ck_assert_uint_eq(back, seen);
    kv_iter_free(it);
}

/* Seeks to model keys (present or deleted) and to keys never written, then
 * a step each way. */
static void check_seeks(kv_db *db, const struct model *m, uint64_t seed)
{
    kv_iter *it;
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    for (int j = 0; j < 60; j++) {
        uint64_t r = splitmix(seed * 131 + (uint64_t)j);
        uint8_t buf[MAX_KEY];
        size_t klen;
        if (m->n && (r & 1)) {
            const struct entry *e = &m->e[(r >> 1) % m->n];
            klen = e->klen;
            memcpy(buf, e->k, klen);
        } else {
            klen = make_key(m->cmp, r ^ 0x5A5A5A5Aull, buf);
        }
        size_t i = lower_bound(m, buf, klen);
        while (i < m->n && !m->e[i].live)
            i++;
        kv_iter_seek(it, buf, klen);
        if (i == m->n) {
            ck_assert_msg(!kv_iter_valid(it), "seek past the last key found one");
            continue;
        }
        ck_assert_msg(kv_iter_valid(it), "seek found nothing: %d", kv_iter_status(it));
        size_t got;
        const void *k = kv_iter_key(it, &got);
        ck_assert_uint_eq(got, m->e[i].klen);
        ck_assert_mem_eq(k, m->e[i].k, got);
        if (r & 2) { /* one step back: the live key before */
            size_t p = i;
            do
                p = p ? p - 1 : SIZE_MAX;
            while (p != SIZE_MAX && !m->e[p].live);
            kv_iter_prev(it);
            if (p == SIZE_MAX) {
                ck_assert(!kv_iter_valid(it));
            } else {
                ck_assert(kv_iter_valid(it));
                k = kv_iter_key(it, &got);
                ck_assert_uint_eq(got, m->e[p].klen);
                ck_assert_mem_eq(k, m->e[p].k, got);
            }
        } else { /* one step on */
            size_t nx = i + 1;
            while (nx < m->n && !m->e[nx].live)
                nx++;
            kv_iter_next(it);
            if (nx == m->n) {
                ck_assert(!kv_iter_valid(it));
            } else {
                ck_assert(kv_iter_valid(it));
                k = kv_iter_key(it, &got);
                ck_assert_uint_eq(got, m->e[nx].klen);
                ck_assert_mem_eq(k, m->e[nx].k, got);
            }
        }
    }
    ck_assert_int_eq(kv_iter_status(it), KV_OK);
    kv_iter_free(it);
}

static void check_all(kv_db *db, const struct model *m, uint64_t seed)
{
    check_gets(db, m);
    check_multi_get(db, m, seed);
    check_scan(db, m, NULL, NULL);
    for (int j = 0; j < 4 && m->n; j++) {
        uint64_t r = splitmix(seed + 1000 + (uint64_t)j);
        size_t a = r % m->n, b = (r >> 32) % m->n;
        if (a > b) {
            size_t t = a;
            a = b;
            b = t;
        }
        check_scan(db, m, &m->e[a], &m->e[b]);
        check_scan(db, m, j & 1 ? &m->e[a] : NULL, j & 1 ? NULL : &m->e[b]);
    }
    check_seeks(db, m, seed);
}

/* How many levels hold tables now (kv_table_stats_get). */
static int levels_used(kv_db *db)
{
    kv_table_stats *ts;
    size_t n;
    ck_assert_int_eq(kv_table_stats_get(db, &ts, &n), KV_OK);
    unsigned mask = 0;
    for (size_t i = 0; i < n; i++)
        mask |= 1u << ts[i].level;
    kv_free(ts);
    return __builtin_popcount(mask);
}

/* The run: random puts and deletes under cmp, checked at every stage. */
static void assert_refused(const char *p, const kv_comparator *cmp, const char *a, const char *b);

/* Writes, flushes, compacts and reopens a database under cmp against the
 * model, checking every stage; with `repair`, then rebuilds its manifest
 * with kv_repair and checks it all again. */
static void model_run(const kv_comparator *cmp, uint64_t seed, int repair)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_options o;
    kv_options_init(&o);
    o.comparator = cmp;
    o.write_buffer_size = 64 << 10;
    o.target_file_size = 64 << 10;
    o.max_bytes_for_level_base = 64 << 10;
    o.l0_compaction_trigger = 2;
    o.block_size = 256; /* many blocks and index entries per table */
    /* Uncompressed, so that kv_compact_range's inputs pass four output
     * tables' worth and it runs in two parts, each bounded by a key. */
    o.compression = KV_COMPRESSION_NONE;
    /* The run asserts several levels at once: no idle merge of level 0
     * while a slow check (sanitizers, a busy machine) pauses the writes. */
    o.idle_compaction_ms = 0;
    kv_db *db;
    ck_assert_msg(kv_open(p, &o, &db) == KV_OK, "%s", kv_error_text());
    struct model m = {.cmp = cmp};
    _Atomic unsigned long *calls = cmp->ctx;
    unsigned long calls0 = atomic_load(calls);
    uint64_t op = 0;
    int levels = 0; /* the most levels seen holding tables at once */
    for (int round = 0; round < 6; round++) {
        for (int j = 0; j < 6000; j++, op++) {
            uint64_t r = splitmix(seed ^ (op * 0x9E37));
            uint8_t k[MAX_KEY];
            size_t klen = make_key(cmp, r % 8000, k);
            struct entry *e = model_slot(&m, k, klen);
            if (r % 10 < 3) {
                ck_assert_int_eq(kv_delete(db, k, klen), KV_OK);
                e->live = 0;
            } else {
                e->vlen = (size_t)snprintf(e->v, sizeof e->v, "v%llu-%0*d",
                                           (unsigned long long)op, 40 + (int)(r >> 58), 7);
                ck_assert_msg(kv_put(db, k, klen, e->v, e->vlen) == KV_OK, "%s",
                              kv_error_text());
                e->live = 1;
            }
        }
        switch (round) {
        case 0: /* the memtable and the first level-0 tables */
            break;
        case 1:
            ck_assert_int_eq(kv_flush(db), KV_OK);
            break;
        case 2: { /* a bounded range, then everything */
            size_t a = m.n / 4, b = m.n / 2;
            ck_assert_int_eq(kv_compact_range(db, m.e[a].k, m.e[a].klen, m.e[b].k, m.e[b].klen),
                             KV_OK);
            check_all(db, &m, seed + (uint64_t)round);
            ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 0), KV_OK);
            break;
        }
        case 3: /* close and reopen */
        case 5:
            ck_assert_int_eq(kv_close(db), KV_OK);
            ck_assert_msg(kv_open(p, &o, &db) == KV_OK, "%s", kv_error_text());
            break;
        default:
            break;
        }
        check_all(db, &m, seed + (uint64_t)round);
        int l = levels_used(db);
        levels = l > levels ? l : levels;
    }
    ck_assert_int_eq(kv_flush(db), KV_OK);
    check_all(db, &m, seed + 99);
    ck_assert_msg(levels >= 2, "the run made %d level at most, not several", levels);
    ck_assert_msg(atomic_load(calls) > calls0, "the comparator was never called");
    ck_assert_int_eq(kv_close(db), KV_OK);
    if (repair) {
        /* Options of another order are refused while the manifest names
         * the database's; nothing moves. */
        kv_options wrong = o;
        wrong.comparator = cmp == &numeric ? NULL : &numeric;
        ck_assert_int_eq(kv_repair(p, &wrong), KV_EINVAL);
        ck_assert_msg(strstr(kv_error_text(), cmp->name), "%s", kv_error_text());
        /* The manifest lost: rebuilt from the tables (read, checked and
         * merged in the comparator's order) and the log. */
        char man[700];
        snprintf(man, sizeof man, "%s/MANIFEST", p);
        ck_assert_int_eq(unlink(man), 0);
        ck_assert_msg(kv_repair(p, &o) == KV_OK, "%s", kv_error_text());
        char lost[700];
        snprintf(lost, sizeof lost, "%s/lost", p);
        DIR *d = opendir(lost);
        if (d) { /* nothing but an old manifest may be there: no table was refused */
            struct dirent *de;
            while ((de = readdir(d)) != NULL)
                ck_assert_msg(!strstr(de->d_name, ".sst") && !strstr(de->d_name, ".log"),
                              "repair moved %s aside", de->d_name);
            closedir(d);
        }
        ck_assert_msg(kv_open(p, &o, &db) == KV_OK, "%s", kv_error_text());
        check_all(db, &m, seed + 100);
        ck_assert_int_eq(kv_close(db), KV_OK);
        assert_refused(p, cmp == &numeric ? NULL : &numeric, cmp->name,
                       cmp == &numeric ? "kv.bytewise" : "test.numeric");
    }
    free(m.e);
}

START_TEST(reverse_order_matches_model)
{
    model_run(&reverse, 11, 0);
}
END_TEST

START_TEST(repair_under_a_comparator)
{
    model_run(&reverse, 23, 1);
}
END_TEST

START_TEST(numeric_order_matches_model)
{
    model_run(&numeric, 23, 0);
}
END_TEST

/* The numeric order seen directly: keys come out by value, not bytewise. */
START_TEST(iterator_follows_comparator)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_options o;
    kv_options_init(&o);
    o.comparator = &numeric;
    kv_db *db;
    ck_assert_int_eq(kv_open(p, &o, &db), KV_OK);
    const char *keys[] = {"100", "9", "20", "3", "1000", "0"};
    for (size_t i = 0; i < 6; i++)
        ck_assert_int_eq(kv_put(db, keys[i], strlen(keys[i]), "x", 1), KV_OK);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    ck_assert_int_eq(kv_put(db, "50", 2, "y", 1), KV_OK);
    const char *want[] = {"0", "3", "9", "20", "50", "100", "1000"};
    kv_iter *it;
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    size_t i = 0;
    for (kv_iter_seek_first(it); kv_iter_valid(it); kv_iter_next(it), i++) {
        size_t klen;
        const char *k = kv_iter_key(it, &klen);
        ck_assert_uint_lt(i, 7);
        ck_assert_uint_eq(klen, strlen(want[i]));
        ck_assert_mem_eq(k, want[i], klen);
    }
    ck_assert_uint_eq(i, 7);
    kv_iter_seek(it, "21", 2); /* between 20 and 50 */
    ck_assert(kv_iter_valid(it));
    size_t klen;
    ck_assert_mem_eq(kv_iter_key(it, &klen), "50", 2);
    /* A prefix is no range under a comparator. */
    ck_assert_int_eq(kv_iter_seek_prefix(it, "1", 1), KV_EINVAL);
    ck_assert_ptr_nonnull(strstr(kv_error_text(), "test.numeric"));
    kv_iter_free(it);
    ck_assert_int_eq(kv_close(db), KV_OK);
}
END_TEST

/* ---- names in the manifest ----------------------------------------------------------------- */

static int open_with(const char *p, const kv_comparator *cmp, kv_db **db)
{
    kv_options o;
    kv_options_init(&o);
    o.comparator = cmp;
    *db = NULL;
    return kv_open(p, &o, db);
}

static void assert_refused(const char *p, const kv_comparator *cmp, const char *a, const char *b)
{
    kv_db *db;
    ck_assert_int_eq(open_with(p, cmp, &db), KV_EINVAL);
    ck_assert_ptr_null(db);
    const char *t = kv_error_text();
    ck_assert_msg(strstr(t, a) && strstr(t, b), "error text \"%s\" lacks %s or %s", t, a, b);
}

START_TEST(wrong_comparator_name_is_refused)
{
    char p[600];
    test_path(p, sizeof p, "rev");
    kv_db *db;
    ck_assert_int_eq(open_with(p, &reverse, &db), KV_OK);
    ck_assert_int_eq(kv_put(db, "b", 1, "1", 1), KV_OK);
    ck_assert_int_eq(kv_put(db, "a", 1, "2", 1), KV_OK);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    ck_assert_int_eq(kv_close(db), KV_OK);
    assert_refused(p, &numeric, "test.reverse", "test.numeric");
    assert_refused(p, NULL, "test.reverse", "kv.bytewise");
    /* The same name opens it, and its data is there. */
    ck_assert_int_eq(open_with(p, &reverse, &db), KV_OK);
    void *v;
    size_t vlen;
    ck_assert_int_eq(kv_get(db, "a", 1, &v, &vlen), KV_OK);
    ck_assert_mem_eq(v, "2", 1);
    kv_free(v);
    ck_assert_int_eq(kv_close(db), KV_OK);
}
END_TEST

START_TEST(bytewise_database_refuses_comparator)
{
    char p[600];
    test_path(p, sizeof p, "plain");
    kv_db *db;
    ck_assert_int_eq(open_with(p, NULL, &db), KV_OK);
    ck_assert_int_eq(kv_put(db, "k", 1, "v", 1), KV_OK);
    ck_assert_int_eq(kv_close(db), KV_OK); /* nothing flushed: the name alone decides */
    assert_refused(p, &reverse, "kv.bytewise", "test.reverse");
    /* A comparator named as the default is the default. */
    static _Atomic unsigned long calls;
    static const kv_comparator named_default = {"kv.bytewise", reverse_cmp, &calls};
    ck_assert_int_eq(open_with(p, &named_default, &db), KV_OK);
    ck_assert_int_eq(kv_close(db), KV_OK);
    ck_assert_uint_eq(atomic_load(&calls), 0);
    ck_assert_int_eq(open_with(p, NULL, &db), KV_OK);
    ck_assert_int_eq(kv_close(db), KV_OK);
}
END_TEST

/* The comparator record of the manifest in p, read with LMDB itself, into
 * out[0, *len) (cap bytes). */
static void raw_record(const char *p, uint8_t *out, size_t cap, size_t *len)
{
    char f[700];
    snprintf(f, sizeof f, "%s/MANIFEST", p);
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    ck_assert_int_eq(mdb_env_create(&env), 0);
    ck_assert_int_eq(mdb_env_set_maxdbs(env, 2), 0);
    ck_assert_int_eq(mdb_env_open(env, f, MDB_NOSUBDIR | MDB_NOTLS | MDB_RDONLY, 0644), 0);
    ck_assert_int_eq(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
    ck_assert_int_eq(mdb_dbi_open(txn, "meta", 0, &dbi), 0);
    MDB_val k = {10, "comparator"}, v;
    ck_assert_int_eq(mdb_get(txn, dbi, &k, &v), 0);
    ck_assert_uint_le(v.mv_size, cap);
    memcpy(out, v.mv_data, v.mv_size);
    *len = v.mv_size;
    mdb_txn_abort(txn);
    mdb_env_close(env);
}

/* Deletes the comparator record from the manifest in p, with LMDB itself:
 * what a database made before the record existed holds. */
static void drop_record(const char *p)
{
    char f[700];
    snprintf(f, sizeof f, "%s/MANIFEST", p);
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    ck_assert_int_eq(mdb_env_create(&env), 0);
    ck_assert_int_eq(mdb_env_set_maxdbs(env, 2), 0);
    ck_assert_int_eq(mdb_env_set_mapsize(env, 16u << 20), 0);
    ck_assert_int_eq(mdb_env_open(env, f, MDB_NOSUBDIR | MDB_NOTLS, 0644), 0);
    ck_assert_int_eq(mdb_txn_begin(env, NULL, 0, &txn), 0);
    ck_assert_int_eq(mdb_dbi_open(txn, "meta", 0, &dbi), 0);
    MDB_val k = {10, "comparator"};
    ck_assert_int_eq(mdb_del(txn, dbi, &k, NULL), 0);
    ck_assert_int_eq(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
}

/* The record: written at creation, read back; a manifest without it
 * (made before comparators) is bytewise when it names tables, and one
 * naming none takes the opener's comparator. */
START_TEST(manifest_record)
{
    char p[600];
    test_path(p, sizeof p, "old");
    kv_db *db;
    ck_assert_int_eq(open_with(p, NULL, &db), KV_OK);
    ck_assert_int_eq(kv_put(db, "k", 1, "v", 1), KV_OK);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    ck_assert_int_eq(kv_close(db), KV_OK);
    kv_manifest *man;
    char name[KV_MANIFEST_NAME_MAX + 1];
    ck_assert_int_eq(kv_manifest_open(p, 0, NULL, &man), KV_OK);
    ck_assert_int_eq(kv_manifest_get_comparator(man, name), KV_OK);
    ck_assert_str_eq(name, "kv.bytewise");
    ck_assert_int_eq(kv_manifest_set_comparator(man, ""), KV_EINVAL);
    kv_manifest_close(man);
    /* Byte for byte, as doc/manifest.md gives it. */
    static const uint8_t want[] = {0x01, 0x03, 0x0b, 0x00, 'k',  'v',  '.',  'b',
                                   'y',  't',  'e',  'w',  'i',  's',  'e',  0x6c,
                                   0x10, 0x29, 0x70, 0xea, 0x4b, 0x87, 0xc6};
    uint8_t raw[64];
    size_t rawlen;
    raw_record(p, raw, sizeof raw, &rawlen);
    ck_assert_uint_eq(rawlen, sizeof want);
    ck_assert_mem_eq(raw, want, sizeof want);

    drop_record(p);
    ck_assert_int_eq(kv_manifest_open(p, 0, NULL, &man), KV_OK);
    ck_assert_int_eq(kv_manifest_get_comparator(man, name), KV_NOTFOUND);
    kv_manifest_close(man);
    assert_refused(p, &reverse, "kv.bytewise", "test.reverse");
    ck_assert_int_eq(open_with(p, NULL, &db), KV_OK);
    void *v;
    size_t vlen;
    ck_assert_int_eq(kv_get(db, "k", 1, &v, &vlen), KV_OK);
    kv_free(v);
    ck_assert_int_eq(kv_close(db), KV_OK);

    /* Set by hand, the record is what kv_open checks. */
    ck_assert_int_eq(kv_manifest_open(p, 0, NULL, &man), KV_OK);
    ck_assert_int_eq(kv_manifest_set_comparator(man, "test.other"), KV_OK);
    ck_assert_int_eq(kv_manifest_get_comparator(man, name), KV_OK);
    ck_assert_str_eq(name, "test.other");
    kv_manifest_close(man);
    assert_refused(p, NULL, "test.other", "kv.bytewise");

    /* No record and no table: the opener's order is taken, and kept. */
    test_path(p, sizeof p, "empty");
    ck_assert_int_eq(open_with(p, NULL, &db), KV_OK);
    ck_assert_int_eq(kv_close(db), KV_OK);
    drop_record(p);
    ck_assert_int_eq(open_with(p, &numeric, &db), KV_OK);
    ck_assert_int_eq(kv_close(db), KV_OK);
    assert_refused(p, NULL, "test.numeric", "kv.bytewise");
}
END_TEST

/* Filters that gate scans follow bytewise order (doc/database.md, "Filters
 * that gate scans"): with a comparator, prefix_len and range_filter_bits
 * are refused at kv_open (KV_EINVAL, the option and the comparator named),
 * for a new database (nothing made) and an existing one (its data kept);
 * without them it opens as before. */
START_TEST(scan_filters_refused_with_comparator)
{
    char p[600];
    test_path(p, sizeof p, "rev");
    static const struct {
        size_t prefix_len;
        double range_filter_bits;
        const char *named;
    } cases[] = {{4, 0, "prefix_len"},
                 {1, 0, "prefix_len"},
                 {0, 16, "range_filter_bits"},
                 {0, 4, "range_filter_bits"},
                 {8, 8, NULL}};
    for (int existing = 0; existing < 2; existing++) {
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            for (int c = 0; c < 2; c++) {
                kv_options o;
                kv_options_init(&o);
                o.comparator = c ? &numeric : &reverse;
                o.prefix_len = cases[i].prefix_len;
                o.range_filter_bits = cases[i].range_filter_bits;
                kv_db *db = (kv_db *)p;
                ck_assert_int_eq(kv_open(p, &o, &db), KV_EINVAL);
                ck_assert_ptr_null(db);
                const char *t = kv_error_text();
                const char *named = cases[i].named; /* both: either may be named */
                if (!named)
                    named = strstr(t, "prefix_len") ? "prefix_len" : "range_filter_bits";
                ck_assert_msg(strstr(t, named) && strstr(t, "comparator"),
                              "error text \"%s\" lacks %s or the comparator", t, named);
                if (!existing)
                    ck_assert_msg(access(p, F_OK) != 0, "a refused open made %s", p);
            }
        }
        /* neither: opens, as before */
        kv_db *db;
        ck_assert_int_eq(open_with(p, &reverse, &db), KV_OK);
        if (!existing) {
            ck_assert_int_eq(kv_put(db, "a", 1, "1", 1), KV_OK);
            ck_assert_int_eq(kv_put(db, "b", 1, "2", 1), KV_OK);
            ck_assert_int_eq(kv_flush(db), KV_OK);
        }
        kv_iter *it;
        ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
        kv_iter_seek_first(it);
        size_t klen;
        ck_assert(kv_iter_valid(it));
        ck_assert_mem_eq(kv_iter_key(it, &klen), "b", 1); /* reverse order */
        kv_iter_free(it);
        ck_assert_int_eq(kv_close(db), KV_OK);
    }
}
END_TEST

START_TEST(version3_options_open)
{
    char p[600];
    test_path(p, sizeof p, "v3");
    kv_options o;
    kv_options_init(&o);
    o.version = 3;
    o.comparator = &reverse; /* beyond a version-3 struct: not read */
    kv_db *db;
    ck_assert_int_eq(kv_open(p, &o, &db), KV_OK);
    ck_assert_int_eq(kv_put(db, "a", 1, "1", 1), KV_OK);
    ck_assert_int_eq(kv_put(db, "b", 1, "2", 1), KV_OK);
    ck_assert_int_eq(kv_close(db), KV_OK);
    ck_assert_int_eq(open_with(p, NULL, &db), KV_OK); /* made bytewise */
    kv_iter *it;
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    kv_iter_seek_first(it);
    size_t klen;
    ck_assert(kv_iter_valid(it));
    ck_assert_mem_eq(kv_iter_key(it, &klen), "a", 1);
    kv_iter_free(it);
    ck_assert_int_eq(kv_close(db), KV_OK);
}
END_TEST

START_TEST(bad_comparators_are_refused)
{
    char p[600];
    test_path(p, sizeof p, "bad");
    kv_db *db;
    kv_comparator no_name = {NULL, reverse_cmp, &reverse_calls};
    kv_comparator empty = {"", reverse_cmp, &reverse_calls};
    kv_comparator no_fn = {"test.none", NULL, NULL};
    char longname[300];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    kv_comparator too_long = {longname, reverse_cmp, &reverse_calls};
    ck_assert_int_eq(open_with(p, &no_name, &db), KV_EINVAL);
    ck_assert_int_eq(open_with(p, &empty, &db), KV_EINVAL);
    ck_assert_int_eq(open_with(p, &no_fn, &db), KV_EINVAL);
    ck_assert_int_eq(open_with(p, &too_long, &db), KV_EINVAL);
    ck_assert_ptr_nonnull(strstr(kv_error_text(), "comparator"));
}
END_TEST

/* ---- one table under a comparator, without the store ------------------------------ */

START_TEST(sstable_under_comparator)
{
    char p[600];
    test_path(p, sizeof p, "t.sst");
    kv_sst_options so;
    kv_sst_options_init(&so);
    so.comparator = &reverse;
    so.block_size = 128;
    so.restart_interval = 4;
    kv_sst_writer *w;
    ck_assert_int_eq(kv_sst_writer_new(p, &so, &w), KV_OK);
    char k[16];
    for (int i = 999; i >= 0; i--) { /* "999" first: descending bytes */
        int n = snprintf(k, sizeof k, "%03d", i);
        ck_assert_int_eq(kv_sst_writer_add(w, k, (size_t)n, k, (size_t)n), KV_OK);
    }
    /* out of the comparator's order */
    ck_assert_int_eq(kv_sst_writer_add(w, "500", 3, "x", 1), KV_EINVAL);
    ck_assert_int_eq(kv_sst_writer_finish(w, NULL), KV_OK);

    kv_sst_reader *r;
    /* Read bytewise, its index is out of order. */
    ck_assert_int_eq(kv_sst_reader_open(p, NULL, 1, &r), KV_ECORRUPT);
    ck_assert_int_eq(kv_sst_reader_open_cmp(p, NULL, NULL, 1, 0, &reverse, &r), KV_OK);
    void *v;
    size_t vlen;
    for (int i = 0; i < 1000; i += 7) {
        int n = snprintf(k, sizeof k, "%03d", i);
        ck_assert_int_eq(kv_sst_get(r, k, (size_t)n, &v, &vlen), KV_OK);
        ck_assert_mem_eq(v, k, vlen);
        kv_free(v);
    }
    ck_assert_int_eq(kv_sst_get(r, "5000", 4, &v, &vlen), KV_NOTFOUND);
    kv_sst_iter *it;
    ck_assert_int_eq(kv_sst_iter_new(r, &it), KV_OK);
    int i = 999;
    for (kv_sst_iter_seek_first(it); kv_sst_iter_valid(it); kv_sst_iter_next(it), i--) {
        size_t klen;
        const void *key = kv_sst_iter_key(it, &klen);
        int n = snprintf(k, sizeof k, "%03d", i);
        ck_assert_uint_eq(klen, (size_t)n);
        ck_assert_mem_eq(key, k, klen);
    }
    ck_assert_int_eq(i, -1);
    kv_sst_iter_seek(it, "5", 1); /* reverse: the first key <= "5" bytewise is "499" */
    ck_assert(kv_sst_iter_valid(it));
    size_t klen;
    ck_assert_mem_eq(kv_sst_iter_key(it, &klen), "499", 3);
    kv_sst_iter_seek_before(it, "5", 1); /* the last key > "5" bytewise: "500" */
    ck_assert(kv_sst_iter_valid(it));
    ck_assert_mem_eq(kv_sst_iter_key(it, &klen), "500", 3);
    ck_assert_int_eq(kv_sst_verify(r), KV_OK);
    kv_sst_iter_free(it);
    kv_sst_reader_close(r);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("comparator");
    TCase *t = tcase_create("model");
    tcase_add_checked_fixture(t, test_setup, test_teardown);
    tcase_set_timeout(t, 600);
    tcase_add_test(t, reverse_order_matches_model);
    tcase_add_test(t, numeric_order_matches_model);
    tcase_add_test(t, repair_under_a_comparator);
    tcase_add_test(t, iterator_follows_comparator);
    suite_add_tcase(s, t);
    t = tcase_create("names");
    tcase_add_checked_fixture(t, test_setup, test_teardown);
    tcase_add_test(t, wrong_comparator_name_is_refused);
    tcase_add_test(t, bytewise_database_refuses_comparator);
    tcase_add_test(t, manifest_record);
    tcase_add_test(t, version3_options_open);
    tcase_add_test(t, bad_comparators_are_refused);
    tcase_add_test(t, scan_filters_refused_with_comparator);
    suite_add_tcase(s, t);
    t = tcase_create("sstable");
    tcase_add_checked_fixture(t, test_setup, test_teardown);
    tcase_add_test(t, sstable_under_comparator);
    suite_add_tcase(s, t);
    return s;
}
