/* check_lazy.c - lazy leveling (kv_options.compaction_style
 * KV_COMPACTION_LAZY_LEVELED): several sorted runs per upper level, read
 * by gets, multi-gets and iterators as a model says; switching a database
 * between the styles both ways; and the write amplification it saves. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fixture.h"

static uint64_t rnd(uint64_t *s)
{
    *s += 0x9E3779B97F4A7C15ull;
    return splitmix(*s);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Until no compaction is pending or running (at most 60 s). */
static void settle(kv_db *db, struct kv_stats *s)
{
    uint64_t start = now_ms();
    for (;;) {
        get_stats(db, s);
        if (!s->compaction_pending && !s->compaction_running)
            return;
        ck_assert_msg(now_ms() - start < 60000, "compactions still pending after 60 s");
        struct timespec ts = {0, 2000000L};
        nanosleep(&ts, NULL);
    }
}

/* The most runs a level below 0 holds. */
static uint64_t deeper_runs(const struct kv_stats *s)
{
    uint64_t most = 0;
    for (int l = 1; l < 7; l++)
        most = s->level_runs[l] > most ? s->level_runs[l] : most;
    return most;
}

/* ---- the model: ids 0 .. MODEL_KEYS-1, each absent (0) or at a version -------------- */

#define MODEL_KEYS 20000u

static size_t mkey(uint32_t id, char *k)
{
    return (size_t)sprintf(k, "k%06u", id);
}

/* 20..83 bytes: the id and the version, then filler. */
static size_t mval(uint32_t id, uint32_t ver, char *v)
{
    size_t n = (size_t)sprintf(v, "%u.%u.", id, ver);
    size_t len = 20 + (size_t)(splitmix(((uint64_t)id << 32) | ver) % 64);
    while (n < len) {
        v[n] = (char)('a' + (n * 7 + ver) % 26);
        n++;
    }
    return len;
}

static void lazy_options(kv_options *o, int style)
{
    kv_options_init(o);
    o->compaction_style = style;
    /* Small memtables, merged two at a time into runs of about 100 KiB at
     * a base level of 128 KiB (three runs, 384 KiB, before it merges)
     * above a last level of about 700 KB (uncompressed). */
    o->runs_per_level = 3;
    o->write_buffer_size = (size_t)64 << 10;
    o->l0_compaction_trigger = 2;
    o->target_file_size = (size_t)64 << 10;
    o->max_bytes_for_level_base = (size_t)128 << 10;
    o->compression = KV_COMPRESSION_NONE;
    o->block_cache_size = (size_t)8 << 20;
}

/* Random puts (55%), deletes (25%), range deletes of 1..40 ids (5%) and
 * batches of 2..8 puts (15%), to the store and the model. */
static void random_ops(kv_db *db, uint32_t *ver, uint32_t *next, uint64_t *rng, unsigned ops)
{
    char k[16], k2[16], v[96];
    kv_batch *b = NULL;
    ck_assert_int_eq(kv_batch_new(&b), KV_OK);
    for (unsigned i = 0; i < ops; i++) {
        uint64_t r = rnd(rng);
        uint32_t id = (uint32_t)((r >> 8) % MODEL_KEYS);
        unsigned kind = (unsigned)(r % 100);
        if (kind < 55) {
            uint32_t x = (*next)++;
            put_kv(db, k, mkey(id, k), v, mval(id, x, v));
            ver[id] = x;
        } else if (kind < 80) {
            ck_assert_int_eq(kv_delete(db, k, mkey(id, k)), KV_OK);
            ver[id] = 0;
        } else if (kind < 85) {
            uint32_t end = id + 1 + (uint32_t)((r >> 40) % 40);
            if (end > MODEL_KEYS)
                end = MODEL_KEYS;
            ck_assert_int_eq(kv_delete_range(db, k, mkey(id, k), k2, mkey(end, k2)), KV_OK);
            for (uint32_t j = id; j < end; j++)
                ver[j] = 0;
        } else {
            unsigned n = 2 + (unsigned)((r >> 40) % 7);
            uint32_t ids[8], vers[8];
            kv_batch_clear(b);
            for (unsigned j = 0; j < n; j++) {
                ids[j] = (uint32_t)(rnd(rng) % MODEL_KEYS);
                vers[j] = (*next)++;
                ck_assert_int_eq(kv_batch_put(b, k, mkey(ids[j], k), v, mval(ids[j], vers[j], v)),
                                 KV_OK);
            }
            ck_assert_int_eq(kv_write(db, b), KV_OK);
            for (unsigned j = 0; j < n; j++)
                ver[ids[j]] = vers[j];
        }
    }
    kv_batch_free(b);
}

/* Random operations, 1,000 at a time, until some level below 0 holds
 * several runs (at most 400,000); the stats then in *s. */
static void write_until_runs(kv_db *db, uint32_t *ver, uint32_t *next, uint64_t *rng,
                             struct kv_stats *s)
{
    for (int i = 0; i < 400; i++) {
        random_ops(db, ver, next, rng, 1000);
        get_stats(db, s);
        if (deeper_runs(s) > 1)
            break;
    }
    ck_assert_uint_gt(deeper_runs(s), 1);
}

/* The iterator is at id (the model's), or past the end when id is
 * MODEL_KEYS. */
static void expect_at(kv_iter *it, const uint32_t *ver, uint32_t id, const char *what)
{
    if (id == MODEL_KEYS) {
        ck_assert_msg(!kv_iter_valid(it), "%s: a key past the last (%d)", what, kv_iter_status(it));
        return;
    }
    ck_assert_msg(kv_iter_valid(it), "%s: ended before id %u (%s)", what, id,
                  kv_strerror(kv_iter_status(it)));
    char k[16], v[96];
    size_t kl = mkey(id, k), vl = mval(id, ver[id], v), gkl, gvl;
    const void *gk = kv_iter_key(it, &gkl), *gv = kv_iter_value(it, &gvl);
    ck_assert_msg(gkl == kl && !memcmp(gk, k, kl), "%s: want id %u, got %.*s", what, id, (int)gkl,
                  (const char *)gk);
    ck_assert_msg(gvl == vl && !memcmp(gv, v, vl), "%s: id %u holds a wrong value", what, id);
}

/* The first live id >= id (MODEL_KEYS: none), and the last live id < id
 * (UINT32_MAX: none). */
static uint32_t next_live(const uint32_t *ver, uint32_t id)
{
    while (id < MODEL_KEYS && !ver[id])
        id++;
    return id;
}

static uint32_t prev_live(const uint32_t *ver, uint32_t id)
{
    while (id-- > 0)
        if (ver[id])
            return id;
    return UINT32_MAX;
}

/* Every get, multi-gets of 64 random ids, full scans both ways, and
 * bounded scans both ways from random bounds. */
static void check_model(kv_db *db, const uint32_t *ver, uint64_t seed)
{
    char k[16], v[96];
    for (uint32_t id = 0; id < MODEL_KEYS; id++) {
        void *got = NULL;
        size_t n = 0;
        int rc = kv_get(db, k, mkey(id, k), &got, &n);
        if (!ver[id]) {
            ck_assert_msg(rc == KV_NOTFOUND, "get %u: want absent, got %s", id, kv_strerror(rc));
            continue;
        }
        ck_assert_msg(rc == KV_OK, "get %u: %s", id, kv_strerror(rc));
        size_t vl = mval(id, ver[id], v);
        ck_assert_msg(n == vl && !memcmp(got, v, vl), "get %u: wrong value", id);
        kv_free(got);
    }
    uint64_t r = seed;
    static char keys[64][16];
    const void *kp[64];
    size_t kl[64], vls[64];
    void *vals[64];
    int st[64];
    uint32_t ids[64];
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < 64; i++) {
            ids[i] = (uint32_t)(rnd(&r) % MODEL_KEYS);
            kl[i] = mkey(ids[i], keys[i]);
            kp[i] = keys[i];
        }
        ck_assert_int_eq(kv_multi_get(db, NULL, 64, kp, kl, vals, vls, st), KV_OK);
        for (int i = 0; i < 64; i++) {
            if (!ver[ids[i]]) {
                ck_assert_msg(st[i] == KV_NOTFOUND, "multi-get %u: want absent", ids[i]);
                continue;
            }
            ck_assert_msg(st[i] == KV_OK, "multi-get %u: %s", ids[i], kv_strerror(st[i]));
            size_t vl = mval(ids[i], ver[ids[i]], v);
            ck_assert_msg(vls[i] == vl && !memcmp(vals[i], v, vl), "multi-get %u: wrong value",
                          ids[i]);
            kv_free(vals[i]);
        }
    }
    kv_iter *it;
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    kv_iter_seek_first(it);
    for (uint32_t id = next_live(ver, 0); id < MODEL_KEYS; id = next_live(ver, id + 1)) {
        expect_at(it, ver, id, "forward scan");
        kv_iter_next(it);
    }
    expect_at(it, ver, MODEL_KEYS, "forward scan");
    kv_iter_seek_last(it);
    for (uint32_t id = prev_live(ver, MODEL_KEYS); id != UINT32_MAX; id = prev_live(ver, id)) {
        expect_at(it, ver, id, "backward scan");
        kv_iter_prev(it);
    }
    ck_assert(!kv_iter_valid(it));
    for (int round = 0; round < 40; round++) {
        uint32_t lo = (uint32_t)(rnd(&r) % MODEL_KEYS);
        uint32_t hi = lo + (uint32_t)(rnd(&r) % 2000);
        hi = hi > MODEL_KEYS ? MODEL_KEYS : hi;
        char kl_[16], kh[16];
        ck_assert_int_eq(kv_iter_set_bounds(it, kl_, mkey(lo, kl_), kh, mkey(hi, kh)), KV_OK);
        kv_iter_seek_first(it);
        uint32_t id = next_live(ver, lo);
        for (; id < hi; id = next_live(ver, id + 1)) {
            expect_at(it, ver, id, "bounded forward");
            kv_iter_next(it);
        }
        expect_at(it, ver, MODEL_KEYS, "bounded forward");
        kv_iter_seek_last(it);
        for (id = prev_live(ver, hi); id != UINT32_MAX && id >= lo; id = prev_live(ver, id)) {
            expect_at(it, ver, id, "bounded backward");
            kv_iter_prev(it);
        }
        ck_assert(!kv_iter_valid(it));
    }
    kv_iter_free(it);
}

/* ---- the model under lazy leveling --------------------------------------------------- */

/* The model's run under options o (lazy leveling) from seed, in a
 * database of that name; the stats at the end (since the last reopen) in
 * *end. */
static void model_run(kv_options *o, uint64_t seed, const char *name, struct kv_stats *end)
{
    char p[600];
    test_path(p, sizeof p, name);
    kv_db *db = open_db(p, o);
    uint32_t *ver = calloc(MODEL_KEYS, sizeof *ver), next = 1;
    ck_assert_ptr_nonnull(ver);
    uint64_t rng = seed, most = 0;
    struct kv_stats s;
    for (int round = 0; round < 8; round++) {
        for (int step = 0; step < 15; step++) {
            random_ops(db, ver, &next, &rng, 1500);
            get_stats(db, &s);
            most = deeper_runs(&s) > most ? deeper_runs(&s) : most;
        }
        check_model(db, ver, (uint64_t)round);
        if (round % 4 == 3) {
            db = reopen_db(db, p, o);
            check_model(db, ver, 100 + (uint64_t)round);
        }
    }
    settle(db, &s);
    most = deeper_runs(&s) > most ? deeper_runs(&s) : most;
    fprintf(stderr, "lazy model: %llu compactions, most runs in a level %llu, write amp %.2f\n",
            (unsigned long long)s.compactions, (unsigned long long)most, s.write_amplification);
    ck_assert_uint_gt(most, 1); /* runs formed, or this tested only leveled */
    check_model(db, ver, 999);
    compact_all(db);
    get_stats(db, &s);
    ck_assert_uint_le(deeper_runs(&s), 1);
    check_model(db, ver, 1000);
    *end = s;
    close_db(db);
    free(ver);
}

START_TEST(model_with_runs)
{
    kv_options o;
    lazy_options(&o, KV_COMPACTION_LAZY_LEVELED);
    struct kv_stats s;
    model_run(&o, 54, "db", &s);
}
END_TEST

/* The same with most values in blob files of 64 KiB: blob GC rewrites
 * tables of the tiered levels in place, each staying in its own run (as
 * the oldest run, its versions would lose to older runs' ones). */
START_TEST(model_with_runs_and_blobs)
{
    kv_options o;
    lazy_options(&o, KV_COMPACTION_LAZY_LEVELED);
    o.min_blob_size = 40;
    o.blob_file_size = (size_t)64 << 10;
    o.max_bytes_for_level_base = (size_t)64 << 10; /* tables of references are small */
    struct kv_stats s;
    for (uint64_t seed = 1; seed <= 2; seed++) {
        model_run(&o, seed, seed == 1 ? "db1" : "db2", &s);
        fprintf(stderr, "lazy model with blobs: %llu bytes relocated by blob GC\n",
                (unsigned long long)s.blob_relocated_bytes);
    }
}
END_TEST

/* ---- lazy to leveled and back ------------------------------------------------------------- */

START_TEST(switch_styles)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_options lz, lv;
    lazy_options(&lz, KV_COMPACTION_LAZY_LEVELED);
    lazy_options(&lv, KV_COMPACTION_LEVELED);
    kv_db *db = open_db(p, &lz);
    uint32_t *ver = calloc(MODEL_KEYS, sizeof *ver), next = 1;
    ck_assert_ptr_nonnull(ver);
    uint64_t rng = 7;
    struct kv_stats s;
    /* Write until some level holds several runs, and stop there. */
    write_until_runs(db, ver, &next, &rng, &s);
    check_model(db, ver, 1);
    /* Leveled: the runs merge, one per level once compaction settles. */
    db = reopen_db(db, p, &lv);
    check_model(db, ver, 2);
    settle(db, &s);
    ck_assert_msg(deeper_runs(&s) <= 1, "%llu runs in a level under leveled",
                  (unsigned long long)deeper_runs(&s));
    check_model(db, ver, 3);
    random_ops(db, ver, &next, &rng, 20000);
    settle(db, &s);
    ck_assert_uint_le(deeper_runs(&s), 1);
    /* And lazy again: runs form anew, the data stays. */
    db = reopen_db(db, p, &lz);
    check_model(db, ver, 4);
    write_until_runs(db, ver, &next, &rng, &s);
    db = reopen_db(db, p, &lz);
    check_model(db, ver, 5);
    close_db(db);
    free(ver);
}
END_TEST

/* ---- idle merges ------------------------------------------------------------------------ */

/* Writes stop while levels hold several runs (K = 4 here): after
 * idle_compaction_ms without a write, the idle compaction merges level 0
 * down, then each level's runs in place, a key range at a time, so a get
 * probes one run a level, as under leveled; compaction_pending stays 1
 * until it is done. Nothing changes in the data. */
START_TEST(idle_merges_runs)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_options off, on;
    lazy_options(&off, KV_COMPACTION_LAZY_LEVELED);
    lazy_options(&on, KV_COMPACTION_LAZY_LEVELED);
    off.idle_compaction_ms = 0;
    on.idle_compaction_ms = 50;
    off.runs_per_level = on.runs_per_level = 4;
    uint32_t *ver = calloc(MODEL_KEYS, sizeof *ver), next = 1;
    ck_assert_ptr_nonnull(ver);
    uint64_t rng = 17;
    struct kv_stats s;
    /* Without idle merges: runs that stay once compaction settles (and
     * level 0's table, which the idle spell merges down first, does not
     * make them K). */
    kv_db *db = open_db(p, &off);
    for (int i = 0; i < 400; i++) {
        random_ops(db, ver, &next, &rng, 1000);
        settle(db, &s);
        if (deeper_runs(&s) > 1 && deeper_runs(&s) + s.level_tables[0] < 4)
            break;
    }
    ck_assert_uint_gt(deeper_runs(&s), 1);
    ck_assert_uint_lt(deeper_runs(&s) + s.level_tables[0], 4);
    /* With them: merged once no write came for 50 ms. */
    db = reopen_db(db, p, &on);
    settle(db, &s);
    ck_assert_msg(deeper_runs(&s) == 1, "%llu runs in a level after an idle spell",
                  (unsigned long long)deeper_runs(&s));
    ck_assert_uint_eq(s.level_tables[0], 0);
    ck_assert_uint_gt(s.idle_compactions, 0);
    check_model(db, ver, 1);
    /* Writes again: runs form anew, and go at the next pause. */
    write_until_runs(db, ver, &next, &rng, &s);
    settle(db, &s);
    ck_assert_uint_eq(deeper_runs(&s), 1);
    db = reopen_db(db, p, &on);
    check_model(db, ver, 2);
    close_db(db);
    free(ver);
}
END_TEST

/* ---- write amplification ------------------------------------------------------------------ */

/* 100,000 random keys of 100-byte values into a fresh database of the
 * style, settled: its write amplification. */
static double fill_write_amp(const char *name, int style)
{
    char p[600];
    test_path(p, sizeof p, name);
    kv_options o;
    kv_options_init(&o);
    o.compaction_style = style;
    o.runs_per_level = 8; /* lazy 5.4, leveled 7.5 here (AMD EPYC, 2 vCPUs; at 200,000 keys
                           * 5.8 and 9.0, and at K = 4 lazy from 7 to 11 with how far level 0
                           * runs ahead: doc/database.md) */
    o.write_buffer_size = (size_t)64 << 10;
    o.target_file_size = (size_t)64 << 10;
    o.max_bytes_for_level_base = (size_t)256 << 10;
    o.compression = KV_COMPRESSION_NONE;
    kv_db *db = open_db(p, &o);
    char v[100];
    uint8_t k[16];
    for (uint64_t i = 0; i < 100000; i++) {
        key_of_mixed(k, 1, i);
        for (int j = 0; j < 100; j++)
            v[j] = (char)('a' + (i + (uint64_t)j) % 26);
        put_kv(db, k, sizeof k, v, sizeof v);
    }
    ck_assert_int_eq(kv_flush(db), KV_OK);
    struct kv_stats s;
    settle(db, &s);
    fprintf(stderr, "%s: write amplification %.2f, runs", name, s.write_amplification);
    for (int l = 0; l < 7; l++)
        fprintf(stderr, " %llu", (unsigned long long)s.level_runs[l]);
    fprintf(stderr, "\n");
    /* Every key is there. */
    for (uint64_t i = 0; i < 100000; i += 997) {
        key_of_mixed(k, 1, i);
        void *got;
        size_t n;
        ck_assert_int_eq(kv_get(db, k, sizeof k, &got, &n), KV_OK);
        ck_assert_uint_eq(n, 100);
        kv_free(got);
    }
    close_db(db);
    return s.write_amplification;
}

START_TEST(writes_fewer_bytes)
{
    double leveled = fill_write_amp("leveled", KV_COMPACTION_LEVELED);
    double lz = fill_write_amp("lazy", KV_COMPACTION_LAZY_LEVELED);
    ck_assert_msg(lz < leveled, "lazy %.2f, leveled %.2f", lz, leveled);
}
END_TEST

/* ---- kv_inspect: a level's runs --------------------------------------------------------- */

static int bytes_cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : (al > bl) - (al < bl);
}

/* A lazy database holding several runs in a level: kv_inspect lists each
 * level's runs newest (largest id) first, each run's tables disjoint and
 * by smallest key, and some tables of one level overlap across runs (what
 * a tool checking "a level holds disjoint ranges" must allow). */
START_TEST(inspect_lists_runs)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_options o;
    lazy_options(&o, KV_COMPACTION_LAZY_LEVELED);
    kv_db *db = open_db(p, &o);
    uint32_t *ver = calloc(MODEL_KEYS, sizeof *ver), next = 1;
    ck_assert_ptr_nonnull(ver);
    uint64_t rng = 11;
    struct kv_stats s;
    write_until_runs(db, ver, &next, &rng, &s);
    close_db(db);
    kv_dir_info *info;
    ck_assert_int_eq(kv_inspect(p, &info), KV_OK);
    int across = 0;
    for (size_t i = 1; i < info->ntables; i++) {
        const kv_dir_table *a = &info->tables[i - 1], *b = &info->tables[i];
        if (a->level != b->level || !a->level)
            continue;
        if (a->run == b->run) /* within a run: disjoint, in key order */
            ck_assert_int_lt(bytes_cmp(a->largest, a->largest_len, b->smallest, b->smallest_len),
                             0);
        else
            ck_assert_uint_gt(a->run, b->run); /* newest run first */
    }
    for (size_t i = 0; i < info->ntables; i++)
        for (size_t j = i + 1; j < info->ntables; j++) {
            const kv_dir_table *a = &info->tables[i], *b = &info->tables[j];
            if (a->level && a->level == b->level && a->run != b->run &&
                bytes_cmp(a->smallest, a->smallest_len, b->largest, b->largest_len) <= 0 &&
                bytes_cmp(b->smallest, b->smallest_len, a->largest, a->largest_len) <= 0)
                across = 1;
        }
    ck_assert_msg(across, "no two runs of a level overlap: the test shows nothing");
    kv_inspect_free(info);
    free(ver);
}
END_TEST

/* ---- slices: the level above the deepest merges into it a key range at a time ---------- */

/* 60,000 unique keys of 100 bytes (about 7 MB) under lazy leveling with
 * 64 KiB tables: the deepest level grows to about a hundred tables, and
 * the level above it merges into it again and again. No compaction may read
 * a third of the deepest level: each takes a slice (a guard interval of
 * the runs and the deepest level's tables there), where a merge of the
 * whole level would read all of the deepest level at once. Every key
 * stays, before and after a reopen. */
START_TEST(merges_into_the_last_level_in_slices)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_options o;
    lazy_options(&o, KV_COMPACTION_LAZY_LEVELED);
    o.max_bytes_for_level_base = (size_t)256 << 10;
    kv_db *db = open_db(p, &o);
    char v[100];
    uint8_t k[16];
    const uint64_t n = 60000;
    for (uint64_t i = 0; i < n; i++) {
        key_of_mixed(k, 1, i);
        for (int j = 0; j < 100; j++)
            v[j] = (char)('a' + (i + (uint64_t)j) % 26);
        put_kv(db, k, sizeof k, v, sizeof v);
    }
    ck_assert_int_eq(kv_flush(db), KV_OK);
    struct kv_stats s;
    settle(db, &s);
    int deepest = 0;
    for (int l = 1; l < 7; l++)
        if (s.level_tables[l])
            deepest = l;
    fprintf(stderr,
            "slices: deepest level %d holds %llu bytes in %llu tables; the largest compaction "
            "read %llu bytes; write amplification %.2f\n",
            deepest, (unsigned long long)s.level_bytes[deepest],
            (unsigned long long)s.level_tables[deepest],
            (unsigned long long)s.compaction_max_read_bytes, s.write_amplification);
    ck_assert_uint_ge(s.level_tables[deepest], 60);
    ck_assert_uint_gt(s.level_written_bytes[deepest], s.level_bytes[deepest]); /* merged into */
    ck_assert_uint_gt(s.compaction_max_read_bytes, 0);
    ck_assert_uint_lt(s.compaction_max_read_bytes, s.level_bytes[deepest] / 3);
    for (int round = 0; round < 2; round++) {
        for (uint64_t i = 0; i < n; i += 7) {
            key_of_mixed(k, 1, i);
            void *got;
            size_t len;
            ck_assert_int_eq(kv_get(db, k, sizeof k, &got, &len), KV_OK);
            ck_assert_uint_eq(len, 100);
            ck_assert_int_eq(((char *)got)[0], (char)('a' + i % 26));
            kv_free(got);
        }
        if (!round)
            db = reopen_db(db, p, &o);
    }
    close_db(db);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("lazy");
    TCase *tc = test_tcase(s, "model", 120, 1);
    tcase_add_test(tc, model_with_runs);
    tc = test_tcase(s, "switch", 120, 1);
    tcase_add_test(tc, switch_styles);
    tc = test_tcase(s, "idle", 120, 1);
    tcase_add_test(tc, idle_merges_runs);
    tc = test_tcase(s, "write_amp", 120, 1);
    tcase_add_test(tc, writes_fewer_bytes);
    tc = test_tcase(s, "inspect", 120, 1);
    tcase_add_test(tc, inspect_lists_runs);
    tc = test_tcase(s, "blobs", 120, 1);
    tcase_add_test(tc, model_with_runs_and_blobs);
    tc = test_tcase(s, "slices", 120, 1);
    tcase_add_test(tc, merges_into_the_last_level_in_slices);
    return s;
}
