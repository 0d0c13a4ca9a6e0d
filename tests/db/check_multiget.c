/* check_multiget.c - kv_multi_get against kv_get key by key and against a
 * model of what was written: present, deleted, never written, repeated
 * and empty keys, found in the memtable, in level 0 (newest first) and in
 * deeper levels, at the latest state and at a snapshot; its counters
 * against those of the same gets one by one; invalid keys and arguments;
 * batches too large for the stack; and, under threads, one view per call
 * while writers, flushes and compactions run. */
#define _XOPEN_SOURCE 700
#include <check.h>
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kv/kv.h>

#include "fixture.h"

/* ---- fixture ------------------------------------------------------------------------ */

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Returns once the background thread has nothing to do. */
static void wait_idle(kv_db *db)
{
    for (;;) {
        struct kv_stats s;
        ck_assert_int_eq(kv_stats(db, &s), KV_OK);
        if (!s.compaction_pending && !s.compaction_running)
            return;
        sleep_ms(2);
    }
}

/* ck_assert_msg for loops over thousands of keys: Check marks every
 * passing ck_assert (a write to its pipe); this costs nothing until it fails. */
#define EXPECT(cond, ...)                                                                      \
    do {                                                                                       \
        if (!(cond))                                                                           \
            ck_abort_msg(__VA_ARGS__);                                                         \
    } while (0)

/* ---- keys, values and the model ------------------------------------------------------- */

/* Key i: "k" and i as 4 big-endian bytes (zero bytes in most keys: the
 * escaping of internal keys is exercised); even i are written, odd i
 * never are (absent, yet inside the tables' ranges). Key MODEL_EMPTY is
 * the empty key. */
#define NKEYS 24000
#define MODEL_EMPTY NKEYS

static size_t model_key(uint32_t i, uint8_t k[8])
{
    if (i == MODEL_EMPTY)
        return 0;
    k[0] = 'k';
    k[1] = (uint8_t)(i >> 24);
    k[2] = (uint8_t)(i >> 16);
    k[3] = (uint8_t)(i >> 8);
    k[4] = (uint8_t)i;
    return 5;
}

/* The value written to key i in round r: 100 bytes that say both. */
static size_t value_of(uint32_t i, unsigned r, uint8_t v[100])
{
    int n = snprintf((char *)v, 100, "key %u round %u:", i, r);
    for (int j = n; j < 100; j++)
        v[j] = (uint8_t)('a' + (i * 7 + r * 13 + (unsigned)j) % 26);
    return 100;
}

/* What each key holds: the round of its newest value, or 0 (never
 * written or deleted). */
struct model {
    unsigned round[NKEYS + 1];
};

static void put(kv_db *db, struct model *m, uint32_t i, unsigned r)
{
    uint8_t k[8], v[100];
    size_t kl = model_key(i, k), vl = value_of(i, r, v);
    int rc = kv_put(db, k, kl, v, vl);
    EXPECT(rc == KV_OK, "put %u: %s", i, kv_error_text());
    m->round[i] = r;
}

static void del(kv_db *db, struct model *m, uint32_t i)
{
    uint8_t k[8];
    int rc = kv_delete(db, k, model_key(i, k));
    EXPECT(rc == KV_OK, "delete %u: %s", i, kv_error_text());
    m->round[i] = 0;
}

/* ---- the comparison ------------------------------------------------------------------- */


struct batch {
    size_t n;
    uint32_t *ids;    /* model keys (for keys[] that are model keys) */
    uint8_t (*kbuf)[8];
    const void **keys;
    size_t *klens;
    void **vals;
    size_t *vlens;
    int *st;
};

static void batch_init(struct batch *b, size_t n)
{
    b->n = n;
    ck_assert_ptr_nonnull(b->ids = calloc(n, sizeof *b->ids));
    ck_assert_ptr_nonnull(b->kbuf = calloc(n, sizeof *b->kbuf));
    ck_assert_ptr_nonnull(b->keys = calloc(n, sizeof *b->keys));
    ck_assert_ptr_nonnull(b->klens = calloc(n, sizeof *b->klens));
    ck_assert_ptr_nonnull(b->vals = calloc(n, sizeof *b->vals));
    ck_assert_ptr_nonnull(b->vlens = calloc(n, sizeof *b->vlens));
    ck_assert_ptr_nonnull(b->st = calloc(n, sizeof *b->st));
}

static void batch_set(struct batch *b, size_t j, uint32_t id)
{
    b->ids[j] = id;
    b->klens[j] = model_key(id, b->kbuf[j]);
    b->keys[j] = b->kbuf[j];
}

static void batch_free_values(struct batch *b)
{
    for (size_t j = 0; j < b->n; j++) {
        kv_free(b->vals[j]);
        b->vals[j] = NULL;
    }
}

static void batch_free(struct batch *b)
{
    batch_free_values(b);
    free(b->ids);
    free(b->kbuf);
    free(b->keys);
    free(b->klens);
    free(b->vals);
    free(b->vlens);
    free(b->st);
}

/* The counters a Get moves. */
struct gets_seen {
    uint64_t gets, memtable_hits, probed, negatives, positives, false_pos, blocks_sought;
};

static void gets_seen(kv_db *db, struct gets_seen *g)
{
    struct kv_stats s;
    ck_assert_int_eq(kv_stats(db, &s), KV_OK);
    *g = (struct gets_seen){s.gets, s.memtable_hits, s.tables_probed, s.filter_negatives,
                            s.filter_positives, s.filter_false_positives,
                            s.data_block_reads + s.block_cache_hits};
}

static void gets_delta(struct gets_seen *d, const struct gets_seen *a, const struct gets_seen *b)
{
    *d = (struct gets_seen){b->gets - a->gets, b->memtable_hits - a->memtable_hits,
                            b->probed - a->probed, b->negatives - a->negatives,
                            b->positives - a->positives, b->false_pos - a->false_pos,
                            b->blocks_sought - a->blocks_sought};
}

/* kv_multi_get of the batch at snap, each key's answer compared with
 * kv_get_at's and, with a model (the state at snap), with what was
 * written; then the counters the call moved with those of the gets one by
 * one. Returns how many keys were found. */
static size_t check_batch(kv_db *db, const kv_snapshot *snap, struct batch *b,
                          const struct model *m, int counters)
{
    struct gets_seen a, mid, z, dm, dg;
    gets_seen(db, &a);
    int rc = kv_multi_get(db, snap, b->n, b->keys, b->klens, b->vals, b->vlens, b->st);
    ck_assert_msg(rc == KV_OK, "kv_multi_get: %s", kv_error_text());
    gets_seen(db, &mid);
    size_t found = 0;
    for (size_t j = 0; j < b->n; j++) {
        void *v = NULL;
        size_t vl = 0;
        int grc = kv_get_at(db, snap, b->keys[j], b->klens[j], &v, &vl);
        EXPECT(b->st[j] == grc, "key %zu (id %u): kv_multi_get %s, kv_get %s", j, b->ids[j],
               kv_strerror(b->st[j]), kv_strerror(grc));
        if (grc == KV_OK) {
            found++;
            EXPECT(b->vals[j] && b->vlens[j] == vl && memcmp(b->vals[j], v, vl) == 0,
                   "key %zu (id %u): values differ", j, b->ids[j]);
        } else
            EXPECT(!b->vals[j] && b->vlens[j] == 0, "key %zu: a value without KV_OK", j);
        kv_free(v);
        if (!m)
            continue;
        unsigned r = m->round[b->ids[j]];
        EXPECT((grc == KV_OK) == (r != 0), "key id %u: %s, the model says round %u", b->ids[j],
               kv_strerror(grc), r);
        uint8_t want[100];
        size_t wl = r ? value_of(b->ids[j], r, want) : 0;
        EXPECT(!r || (b->vlens[j] == wl && memcmp(b->vals[j], want, wl) == 0),
               "key id %u: not the value of round %u: \"%.20s\"", b->ids[j], r,
               (const char *)b->vals[j]);
    }
    /* a repeated key has a buffer of its own */
    for (size_t j = 0; j < b->n && j < 128; j++)
        for (size_t i = 0; i < j; i++)
            EXPECT(!b->vals[j] || b->vals[i] != b->vals[j], "keys %zu and %zu share a value",
                   i, j);
    gets_seen(db, &z);
    gets_delta(&dm, &a, &mid);
    gets_delta(&dg, &mid, &z);
    ck_assert_uint_eq(dm.gets, b->n);
    if (counters) {
        ck_assert_uint_eq(dm.gets, dg.gets);
        ck_assert_uint_eq(dm.memtable_hits, dg.memtable_hits);
        ck_assert_uint_eq(dm.probed, dg.probed);
        ck_assert_uint_eq(dm.negatives, dg.negatives);
        ck_assert_uint_eq(dm.positives, dg.positives);
        ck_assert_uint_eq(dm.false_pos, dg.false_pos);
        ck_assert_uint_eq(dm.blocks_sought, dg.blocks_sought);
    }
    batch_free_values(b);
    return found;
}

/* ---- a database with every kind of answer in every place -------------------------------- */

/* Round 1: every even key, then the background thread spreads them over
 * levels 1.. (a 64 KiB memtable, table and level-1 target). Round 2:
 * every 3rd even key again, every 10th deleted, flushed and compacted on
 * into level 1 and below, newer than round 1 (which stays deeper). Then,
 * reopened with compaction of level 0 put off, rounds 3 and 4 flushed into
 * two level-0 tables, the newer over the older (values, tombstones over
 * values, values over tombstones), and round 5 left in the memtable. The
 * empty key is written in round 1 and overwritten in round 4. *snap is
 * taken after round 3, and *at_snap the model then. */
static kv_db *build(struct model *m, struct model *at_snap, kv_snapshot **snap,
                    int compression)
{
    memset(m, 0, sizeof *m);
    kv_options o;
    kv_options_init(&o);
    o.compression = compression;
    o.write_buffer_size = (size_t)64 << 10;
    o.target_file_size = (size_t)64 << 10;
    /* Two tables' worth: a level-1 compaction moves one table, so level 1
     * never empties (with one table's worth, a lone table just over it
     * went down whole and left one deeper level). */
    o.max_bytes_for_level_base = (size_t)128 << 10;
    o.l0_compaction_trigger = 2;
    o.l0_slowdown_trigger = 40;
    o.l0_stop_trigger = 60;
    o.idle_compaction_ms = 0; /* the shape below needs level 0's tables to stay */
    o.dynamic_level_bytes = 0; /* and level 1's, under the fixed target above */
    kv_db *db = open_db("db", &o);
    for (uint32_t i = 0; i < NKEYS; i += 2)
        put(db, m, i, 1);
    put(db, m, MODEL_EMPTY, 1);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    wait_idle(db);
    for (uint32_t i = 0; i < NKEYS; i += 6)
        put(db, m, i, 2);
    for (uint32_t i = 0; i < NKEYS; i += 20)
        del(db, m, i);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    wait_idle(db);
    close_db(db);

    o.l0_compaction_trigger = 30; /* level 0 keeps what rounds 3 and 4 flush */
    db = open_db("db", &o);
    for (uint32_t i = 0; i < NKEYS; i += 4) /* values over values and tombstones */
        put(db, m, i, 3);
    for (uint32_t i = 2; i < NKEYS; i += 14)
        del(db, m, i);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    ck_assert_int_eq(kv_snapshot_new(db, snap), KV_OK);
    *at_snap = *m;
    for (uint32_t i = 0; i < NKEYS; i += 8)
        put(db, m, i, 4);
    for (uint32_t i = 2; i < NKEYS; i += 22) /* tombstones over level 0's values */
        del(db, m, i);
    put(db, m, MODEL_EMPTY, 4);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    for (uint32_t i = 0; i < NKEYS; i += 16)
        put(db, m, i, 5);
    for (uint32_t i = 6; i < NKEYS; i += 26)
        del(db, m, i);
    wait_idle(db);

    /* The shape the test relies on: two or more level-0 tables, two or more
     * deeper levels, and a memtable. */
    struct kv_stats s;
    ck_assert_int_eq(kv_stats(db, &s), KV_OK);
    unsigned deeper = 0;
    for (int l = 1; l < 7; l++)
        deeper += s.level_tables[l] > 0;
    ck_assert_msg(s.l0_tables >= 2 && deeper >= 2,
                  "shape: %llu level-0 tables, %u deeper levels", (unsigned long long)s.l0_tables,
                  deeper);
    ck_assert_uint_gt(s.memtable_bytes, 0);
    return db;
}

/* Random batches of model keys (present, deleted, never written, the
 * empty key) with repeats, at the latest state and at the snapshot. */
static void random_batches(kv_db *db, const struct model *m, const kv_snapshot *snap,
                           const struct model *at_snap, int counters)
{
    static const size_t sizes[] = {1, 2, 7, 32, 33, 100};
    uint64_t rng = 0x5EED;
    size_t found = 0, differs = 0, total = 0;
    for (int round = 0; round < 60; round++) {
        struct batch b;
        batch_init(&b, sizes[round % 6]);
        for (size_t j = 0; j < b.n; j++) {
            rng = splitmix(rng);
            uint32_t id = (uint32_t)(rng % (NKEYS + 1)); /* NKEYS: the empty key */
            if (j > 0 && rng % 5 == 0) /* a key asked for before in the batch */
                id = b.ids[(rng >> 8) % j];
            batch_set(&b, j, id);
        }
        for (size_t j = 0; j < b.n; j++)
            differs += m->round[b.ids[j]] != at_snap->round[b.ids[j]];
        found += check_batch(db, NULL, &b, m, counters);
        found += check_batch(db, snap, &b, at_snap, counters);
        total += 2 * b.n;
        batch_free(&b);
    }
    /* Both states were asked about keys they answer differently. */
    ck_assert_uint_gt(differs, 20);
    ck_assert_uint_gt(found, total / 4);
    ck_assert_uint_lt(found, total - total / 4);
}

/* Keys whose every version the test knows, in every place; kv_multi_get
 * answers each as kv_get does and as the model says, at the latest state
 * and at the snapshot, and moves the counters as the gets one by one do
 * (uncompressed tables: blocks are read in place, no cache decides). */
START_TEST(matches_get_in_every_place)
{
    static struct model m, at_snap;
    kv_snapshot *snap;
    kv_db *db = build(&m, &at_snap, &snap, KV_COMPRESSION_NONE);
    random_batches(db, &m, snap, &at_snap, 1);

    /* Every key at once, in reverse order, twice over (repeats far apart). */
    struct batch b;
    batch_init(&b, 2 * (NKEYS + 1));
    for (size_t j = 0; j < b.n; j++)
        batch_set(&b, j, (uint32_t)(NKEYS - j % (NKEYS + 1)));
    check_batch(db, NULL, &b, &m, 1);
    check_batch(db, snap, &b, &at_snap, 1);
    batch_free(&b);

    kv_snapshot_release(db, snap);
    close_db(db);
}
END_TEST

/* The same with zstd tables through the block cache: keys of one block
 * share its read. The cache holds every block, and the gets one by one
 * run first, so that both runs find every block cached. */
START_TEST(matches_get_through_the_block_cache)
{
    static struct model m, at_snap;
    kv_snapshot *snap;
    kv_db *db = build(&m, &at_snap, &snap, KV_COMPRESSION_ZSTD);
    struct batch b;
    batch_init(&b, NKEYS + 1);
    for (size_t j = 0; j < b.n; j++)
        batch_set(&b, j, (uint32_t)j); /* in key order: neighbours share blocks */
    for (int pass = 0; pass < 2; pass++) {
        check_batch(db, NULL, &b, &m, pass); /* the first pass fills the cache */
        check_batch(db, snap, &b, &at_snap, pass);
    }
    struct kv_stats s;
    ck_assert_int_eq(kv_stats(db, &s), KV_OK);
    ck_assert_uint_gt(s.block_cache_hits, 0);
    batch_free(&b);
    kv_snapshot_release(db, snap);
    close_db(db);
}
END_TEST

/* Long keys: their internal keys do not fit in the call's stack buffer. */
START_TEST(long_keys)
{
    kv_options o;
    kv_options_init(&o);
    o.write_buffer_size = (size_t)1 << 20; /* no flush but the one below */
    kv_db *db = open_db("db", &o);
    enum { N = 300, LEN = 700 };
    static uint8_t keys[N][LEN];
    struct batch b;
    batch_init(&b, N);
    for (size_t j = 0; j < N; j++) {
        memset(keys[j], j % 3 ? 'x' : 0, LEN); /* zero bytes: escaped, twice as long */
        keys[j][LEN - 2] = (uint8_t)(j >> 8);
        keys[j][LEN - 1] = (uint8_t)j;
        b.keys[j] = keys[j];
        b.klens[j] = LEN - (j % 5 == 0); /* some one byte short: never written */
        if (j % 5 && j % 4)
            ck_assert_int_eq(kv_put(db, keys[j], LEN, &j, sizeof j), KV_OK);
        if (j == N / 2)
            ck_assert_int_eq(kv_flush(db), KV_OK);
    }
    wait_idle(db);
    size_t found = check_batch(db, NULL, &b, NULL, 1);
    ck_assert_uint_gt(found, N / 3);
    ck_assert_uint_lt(found, N);
    batch_free(&b);
    close_db(db);
}
END_TEST

/* An empty database, and one whose every key is in the memtable. */
START_TEST(empty_and_memtable_only)
{
    kv_db *db = open_db("db", NULL);
    static struct model m;
    memset(&m, 0, sizeof m);
    struct batch b;
    batch_init(&b, 40);
    for (size_t j = 0; j < b.n; j++)
        batch_set(&b, j, j == 3 ? MODEL_EMPTY : (uint32_t)(j % 20)); /* repeats */
    ck_assert_uint_eq(check_batch(db, NULL, &b, &m, 1), 0);
    for (uint32_t i = 0; i < 20; i += 2)
        put(db, &m, i, 1);
    put(db, &m, MODEL_EMPTY, 1);
    del(db, &m, 4);
    ck_assert_uint_eq(check_batch(db, NULL, &b, &m, 1), 19);
    batch_free(&b);
    close_db(db);
}
END_TEST

/* ---- arguments ------------------------------------------------------------------------ */

/* A NULL key with a length and a key over KV_MAX_KEY_SIZE fail alone; the
 * call runs, and its error text names the first of them. */
START_TEST(invalid_keys_fail_alone)
{
    kv_db *db = open_db("db", NULL);
    ck_assert_int_eq(kv_put(db, "a", 1, "1", 1), KV_OK);
    ck_assert_int_eq(kv_put(db, "b", 1, "2", 1), KV_OK);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    static uint8_t big[KV_MAX_KEY_SIZE + 1];
    const void *keys[] = {"a", NULL, "b", big, "c", "a"};
    size_t klens[] = {1, 3, 1, sizeof big, 1, 1};
    void *vals[6];
    size_t vlens[6];
    int st[6];
    struct kv_stats s0, s1;
    ck_assert_int_eq(kv_stats(db, &s0), KV_OK);
    ck_assert_int_eq(kv_multi_get(db, NULL, 6, keys, klens, vals, vlens, st), KV_OK);
    ck_assert_int_eq(kv_stats(db, &s1), KV_OK);
    ck_assert_uint_eq(s1.gets - s0.gets, 4); /* the valid keys, as kv_get counts */
    ck_assert_ptr_nonnull(strstr(kv_error_text(), "NULL key with length 3 (keys[1])"));
    int want[] = {KV_OK, KV_EINVAL, KV_OK, KV_EINVAL, KV_NOTFOUND, KV_OK};
    const char *wantv[] = {"1", NULL, "2", NULL, NULL, "1"};
    for (int j = 0; j < 6; j++) {
        ck_assert_msg(st[j] == want[j], "key %d: %s", j, kv_strerror(st[j]));
        if (wantv[j]) {
            ck_assert_uint_eq(vlens[j], 1);
            ck_assert_int_eq(*(char *)vals[j], wantv[j][0]);
            kv_free(vals[j]);
        } else {
            ck_assert_ptr_null(vals[j]);
            ck_assert_uint_eq(vlens[j], 0);
        }
    }
    /* the oversized key alone: its own text */
    ck_assert_int_eq(kv_multi_get(db, NULL, 1, keys + 3, klens + 3, vals, vlens, st), KV_OK);
    ck_assert_int_eq(st[0], KV_EINVAL);
    ck_assert_ptr_nonnull(strstr(kv_error_text(), "over KV_MAX_KEY_SIZE"));
    close_db(db);
}
END_TEST

START_TEST(bad_arguments)
{
    kv_db *db = open_db("db", NULL);
    const void *keys[] = {"a"};
    size_t klens[] = {1};
    void *vals[1];
    size_t vlens[1];
    int st[1];
    ck_assert_int_eq(kv_multi_get(NULL, NULL, 1, keys, klens, vals, vlens, st), KV_EINVAL);
    ck_assert_int_eq(kv_multi_get(db, NULL, 1, NULL, klens, vals, vlens, st), KV_EINVAL);
    ck_assert_ptr_nonnull(strstr(kv_error_text(), "keys is NULL"));
    ck_assert_int_eq(kv_multi_get(db, NULL, 1, keys, NULL, vals, vlens, st), KV_EINVAL);
    ck_assert_int_eq(kv_multi_get(db, NULL, 1, keys, klens, NULL, vlens, st), KV_EINVAL);
    ck_assert_int_eq(kv_multi_get(db, NULL, 1, keys, klens, vals, NULL, st), KV_EINVAL);
    ck_assert_int_eq(kv_multi_get(db, NULL, 1, keys, klens, vals, vlens, NULL), KV_EINVAL);
    /* nothing to do: KV_OK, whatever the arrays */
    ck_assert_int_eq(kv_multi_get(db, NULL, 0, NULL, NULL, NULL, NULL, NULL), KV_OK);
    struct kv_stats s;
    ck_assert_int_eq(kv_stats(db, &s), KV_OK);
    ck_assert_uint_eq(s.gets, 0);
    close_db(db);
}
END_TEST

/* ---- threads --------------------------------------------------------------------------
 * Writers rewrite groups of keys, each group in one batch with one
 * generation, while flushes and compactions run; readers ask for whole
 * groups (with repeats) in one kv_multi_get: every key of a group must
 * come back with one generation (one view per call), never older than a
 * generation the reader saw before, and kv_get_at at a snapshot must
 * agree with kv_multi_get at it. */

#define TH_GROUPS 16
#define TH_GROUP_KEYS 24
#define TH_WRITERS 2
#define TH_READERS 3

struct th_shared {
    kv_db *db;
    atomic_int stop;
    atomic_int errors;
    atomic_ullong calls, writes;
    pthread_mutex_t mu;
    char first_error[256];
};

struct th_arg {
    struct th_shared *sh;
    int id;
};

__attribute__((format(printf, 2, 3))) static void th_error(struct th_shared *sh,
                                                           const char *fmt, ...)
{
    pthread_mutex_lock(&sh->mu);
    if (atomic_load(&sh->errors) == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(sh->first_error, sizeof sh->first_error, fmt, ap);
        va_end(ap);
    }
    atomic_fetch_add(&sh->errors, 1);
    pthread_mutex_unlock(&sh->mu);
}

static size_t th_key(int g, int k, char *buf)
{
    return (size_t)sprintf(buf, "g%02d-key%03d", g, k);
}

/* Group g's value for key k at generation gen; gen 0 parses back as 0. */
static size_t th_value(int g, int k, unsigned gen, char *v)
{
    int n = sprintf(v, "g%d k%d gen %u|", g, k, gen);
    size_t len = 30 + (size_t)((gen * 11u + (unsigned)k) % 50);
    for (size_t i = (size_t)n; i < len; i++)
        v[i] = (char)('a' + (g + k + (int)i) % 26);
    return len;
}

static unsigned th_gen(int g, int k, const void *val, size_t n)
{
    char buf[128];
    if (n >= sizeof buf)
        return UINT32_MAX;
    memcpy(buf, val, n);
    buf[n] = 0;
    int pg, pk;
    unsigned gen;
    if (sscanf(buf, "g%d k%d gen %u|", &pg, &pk, &gen) != 3 || pg != g || pk != k)
        return UINT32_MAX;
    char want[128];
    return th_value(g, k, gen, want) == n && memcmp(want, buf, n) == 0 ? gen : UINT32_MAX;
}

static void *th_writer(void *p)
{
    struct th_arg *a = p;
    struct th_shared *sh = a->sh;
    kv_batch *b;
    if (kv_batch_new(&b) != KV_OK) {
        th_error(sh, "kv_batch_new failed");
        return NULL;
    }
    char k[32], v[128];
    /* Writer w owns the groups g with g % TH_WRITERS == w. */
    for (unsigned gen = 1; !atomic_load(&sh->stop); gen++)
        for (int g = a->id; g < TH_GROUPS; g += TH_WRITERS) {
            kv_batch_clear(b);
            for (int i = 0; i < TH_GROUP_KEYS; i++) {
                size_t kl = th_key(g, i, k);
                /* every 7th generation deletes the group's odd keys */
                int rc = gen % 7 == 0 && i % 2 ? kv_batch_delete(b, k, kl)
                                               : kv_batch_put(b, k, kl, v,
                                                              th_value(g, i, gen, v));
                if (rc != KV_OK)
                    th_error(sh, "batch: %s", kv_strerror(rc));
            }
            int rc = kv_write(sh->db, b);
            if (rc != KV_OK) {
                th_error(sh, "kv_write: %s", kv_error_text());
                kv_batch_free(b);
                return NULL;
            }
            atomic_fetch_add(&sh->writes, 1);
        }
    kv_batch_free(b);
    return NULL;
}

/* Flushes and compactions of part of the range, again and again. */
static void *th_compactor(void *p)
{
    struct th_shared *sh = p;
    char lo[32], hi[32];
    for (int i = 0; !atomic_load(&sh->stop); i++) {
        int g = i % (TH_GROUPS - 5);
        int rc = i % 3 ? kv_flush(sh->db)
                       : kv_compact_range(sh->db, lo, th_key(g, 0, lo), hi,
                                          th_key(g + 5, 10, hi));
        if (rc != KV_OK)
            th_error(sh, "flush/compact: %s", kv_error_text());
        sleep_ms(5);
    }
    return NULL;
}

static void *th_reader(void *p)
{
    struct th_arg *a = p;
    struct th_shared *sh = a->sh;
    enum { N = TH_GROUP_KEYS + 8 };
    char kbuf[N][32];
    const void *keys[N];
    size_t klens[N];
    int kid[N];
    void *vals[N];
    size_t vlens[N];
    int st[N];
    unsigned seen[TH_GROUPS] = {0};
    uint64_t rng = 0xC0FFEE + (uint64_t)a->id;
    while (!atomic_load(&sh->stop) && atomic_load(&sh->errors) == 0) {
        rng = splitmix(rng);
        int g = (int)(rng % TH_GROUPS);
        for (int j = 0; j < N; j++) { /* the group's keys, then 8 of them again */
            kid[j] = j < TH_GROUP_KEYS ? j : (int)(splitmix(rng + (uint64_t)j) % TH_GROUP_KEYS);
            klens[j] = th_key(g, kid[j], kbuf[j]);
            keys[j] = kbuf[j];
        }
        kv_snapshot *snap = NULL;
        int at_snap = rng % 4 == 0;
        if (at_snap && kv_snapshot_new(sh->db, &snap) != KV_OK) {
            th_error(sh, "kv_snapshot_new failed");
            break;
        }
        int rc = kv_multi_get(sh->db, snap, N, keys, klens, vals, vlens, st);
        if (rc != KV_OK)
            th_error(sh, "kv_multi_get: %s", kv_error_text());
        /* One generation for the whole group: the even keys are always
         * there once written, the odd ones absent exactly in the
         * generations that deleted them. */
        unsigned gen = 0;
        for (int j = 0; rc == KV_OK && j < N; j++) {
            if (st[j] == KV_OK) {
                unsigned got = th_gen(g, kid[j], vals[j], vlens[j]);
                if (got == UINT32_MAX)
                    th_error(sh, "group %d key %d: malformed value", g, kid[j]);
                else if (kid[j] % 2 == 0 && gen == 0)
                    gen = got;
                else if (kid[j] % 2 == 0 && got != gen)
                    th_error(sh, "group %d: generations %u and %u in one call", g, gen, got);
            } else if (st[j] != KV_NOTFOUND)
                th_error(sh, "group %d key %d: %s", g, kid[j], kv_strerror(st[j]));
            else if (kid[j] % 2 == 0 && seen[g])
                th_error(sh, "group %d key %d vanished", g, kid[j]);
        }
        for (int j = 0; rc == KV_OK && gen && j < N; j++) {
            int deleted = gen % 7 == 0 && kid[j] % 2;
            if ((st[j] == KV_OK) == deleted ||
                (st[j] == KV_OK && th_gen(g, kid[j], vals[j], vlens[j]) != gen))
                th_error(sh, "group %d key %d: not generation %u", g, kid[j], gen);
        }
        if (gen && gen < seen[g] && !at_snap)
            th_error(sh, "group %d went back from generation %u to %u", g, seen[g], gen);
        if (!at_snap && gen > seen[g])
            seen[g] = gen;
        /* at a snapshot, kv_get_at agrees key by key */
        for (int j = 0; rc == KV_OK && snap && j < N; j++) {
            void *v = NULL;
            size_t vl = 0;
            int grc = kv_get_at(sh->db, snap, keys[j], klens[j], &v, &vl);
            if (grc != st[j] || (grc == KV_OK && (vl != vlens[j] || memcmp(v, vals[j], vl))))
                th_error(sh, "group %d key %d: kv_get_at and kv_multi_get differ", g, kid[j]);
            kv_free(v);
        }
        for (int j = 0; rc == KV_OK && j < N; j++)
            kv_free(vals[j]);
        kv_snapshot_release(sh->db, snap);
        atomic_fetch_add(&sh->calls, 1);
    }
    return NULL;
}

START_TEST(threads_writers_and_compactions)
{
    kv_options o;
    kv_options_init(&o);
    o.write_buffer_size = (size_t)64 << 10;
    o.target_file_size = (size_t)64 << 10;
    o.max_bytes_for_level_base = (size_t)128 << 10;
    static struct th_shared sh;
    memset(&sh, 0, sizeof sh);
    pthread_mutex_init(&sh.mu, NULL);
    sh.db = open_db("db", &o);
    pthread_t t[TH_WRITERS + TH_READERS + 1];
    struct th_arg args[TH_WRITERS + TH_READERS];
    int nt = 0;
    for (int i = 0; i < TH_WRITERS + TH_READERS; i++) {
        args[i].sh = &sh;
        args[i].id = i < TH_WRITERS ? i : i - TH_WRITERS;
        ck_assert_int_eq(pthread_create(&t[nt++], NULL, i < TH_WRITERS ? th_writer : th_reader,
                                        &args[i]),
                         0);
    }
    ck_assert_int_eq(pthread_create(&t[nt++], NULL, th_compactor, &sh), 0);
    sleep_ms(2500);
    atomic_store(&sh.stop, 1);
    for (int i = 0; i < nt; i++)
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
    ck_assert_msg(atomic_load(&sh.errors) == 0, "%d errors, the first: %s",
                  atomic_load(&sh.errors), sh.first_error);
    struct kv_stats s;
    ck_assert_int_eq(kv_stats(sh.db, &s), KV_OK);
    fprintf(stderr, "multiget threads: %llu calls, %llu group writes, %llu flushes, "
            "%llu compactions\n", (unsigned long long)atomic_load(&sh.calls),
            (unsigned long long)atomic_load(&sh.writes), (unsigned long long)s.flushes,
            (unsigned long long)s.compactions);
    ck_assert_uint_gt(atomic_load(&sh.calls), 10);
    ck_assert_uint_gt(atomic_load(&sh.writes), 10);
    ck_assert_uint_ge(s.flushes, 2);
    close_db(sh.db);
    pthread_mutex_destroy(&sh.mu);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("multiget");
    TCase *tc = tcase_create("answers");
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, matches_get_in_every_place);
    tcase_add_test(tc, matches_get_through_the_block_cache);
    tcase_add_test(tc, long_keys);
    tcase_add_test(tc, empty_and_memtable_only);
    suite_add_tcase(s, tc);
    tc = tcase_create("arguments");
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, invalid_keys_fail_alone);
    tcase_add_test(tc, bad_arguments);
    suite_add_tcase(s, tc);
    tc = tcase_create("threads");
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, threads_writers_and_compactions);
    suite_add_tcase(s, tc);
    return s;
}
