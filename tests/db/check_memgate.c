/* check_memgate.c - the memtable's occupancy gate (doc/database.md,
 * "Filters that gate scans"): once a flush has left a table with a range
 * filter, the next memtable buckets its keys by that filter's map, and a
 * range query whose buckets are all clear skips the memtable's skiplist.
 * Checked here through kv.h: never a false negative against a model (keys
 * inside and outside the map's key range and shared prefix, tombstones
 * hiding table keys), with a writer adding keys while readers iterate, and
 * that empty ranges do skip the memtable (kv_explain_seek's memtable
 * step). */
#define _XOPEN_SOURCE 700
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kv/kv.h>

#include "fixture.h"

static void options(kv_options *o)
{
    kv_options_init(o);
    o->l0_compaction_trigger = 30;
    o->l0_slowdown_trigger = 40;
    o->l0_stop_trigger = 50;
    o->idle_compaction_ms = 0;
    o->compression = KV_COMPRESSION_NONE;
    o->range_filter_bits = 16;
}

/* ---- a model of byte-string keys ------------------------------------------------------- */

#define KCAP 24

typedef struct {
    uint8_t b[KCAP];
    size_t len;
    int mem;  /* written to the memtable (the model's last word on it) */
    int live; /* not deleted */
} mkey;

static int kcmp(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
    size_t m = alen < blen ? alen : blen;
    int c = m ? memcmp(a, b, m) : 0;
    return c ? c : (alen > blen) - (alen < blen);
}

static int mkey_cmp(const void *x, const void *y)
{
    const mkey *a = x, *b = y;
    return kcmp(a->b, a->len, b->b, b->len);
}

#define MAXK 4000
static mkey model[MAXK];
static size_t nmodel;

/* Adds or updates key (k, len): in the memtable when mem, deleted when !live. */
static void model_set(const uint8_t *k, size_t len, int mem, int live)
{
    for (size_t i = 0; i < nmodel; i++)
        if (kcmp(model[i].b, model[i].len, k, len) == 0) {
            model[i].mem |= mem;
            model[i].live = live;
            return;
        }
    ck_assert_uint_lt(nmodel, MAXK);
    mkey *m = &model[nmodel++];
    memcpy(m->b, k, len);
    m->len = len;
    m->mem = mem;
    m->live = live;
}

/* The index of the first model key >= k (the model sorted). */
static size_t lower_bound(const uint8_t *k, size_t len)
{
    size_t a = 0, b = nmodel;
    while (a < b) {
        size_t m = (a + b) / 2;
        if (kcmp(model[m].b, model[m].len, k, len) < 0)
            a = m + 1;
        else
            b = m;
    }
    return a;
}

static size_t table_key(uint8_t *k, uint64_t n)
{
    return (size_t)snprintf((char *)k, KCAP, "k%08llu", (unsigned long long)n);
}

static uint64_t rnd(uint64_t *s)
{
    *s += 0x9e3779b97f4a7c15ull;
    return splitmix(*s);
}

/* Two tables of keys k<8 digits>, every 10th number then every 10th plus
 * 5: the memtable made at the second flush buckets by the first's map. */
static kv_db *two_flushes(void)
{
    kv_options o;
    options(&o);
    kv_db *db = open_db("db", &o);
    uint8_t k[KCAP];
    for (int t = 0; t < 2; t++) {
        for (uint64_t i = 0; i < 1000; i++) {
            size_t kl = table_key(k, i * 10 + (uint64_t)t * 5);
            put_kv(db, k, kl, k, kl);
            model_set(k, kl, 0, 1);
        }
        ck_assert_int_eq(kv_flush(db), KV_OK);
    }
    return db;
}

/* The memtable's step of an explained seek over [lo, hi): its filter. */
static int mem_step(kv_db *db, const uint8_t *lo, size_t lolen, const uint8_t *hi, size_t hilen,
                    int *found)
{
    kv_explain *x;
    ck_assert_int_eq(kv_explain_seek(db, lo, lolen, hi, hilen, &x), KV_OK);
    int filter = -1;
    for (size_t i = 0; i < x->nsteps; i++)
        if (x->steps[i].where == KV_EXPLAIN_MEMTABLE) {
            filter = x->steps[i].filter;
            *found = x->steps[i].outcome == KV_EXPLAIN_FOUND;
        }
    kv_free(x);
    ck_assert_int_ne(filter, -1);
    return filter;
}

START_TEST(empty_ranges_skip_the_memtable)
{
    nmodel = 0;
    kv_db *db = two_flushes();
    int found;
    /* Between two table keys, nothing in the memtable: skipped. */
    ck_assert_int_eq(mem_step(db, (const uint8_t *)"k00004441", 9, (const uint8_t *)"k00004449", 9,
                              &found),
                     KV_EXPLAIN_FILTER_NEGATIVE);
    put_str(db, "k00004443", "in the memtable");
    ck_assert_int_eq(mem_step(db, (const uint8_t *)"k00004441", 9, (const uint8_t *)"k00004449", 9,
                              &found),
                     KV_EXPLAIN_FILTER_MAYBE);
    ck_assert(found);
    /* Empty ranges elsewhere are still skipped: count them (kv_stats too:
     * an explained seek is a range query). */
    struct kv_stats s0, s1;
    get_stats(db, &s0);
    unsigned skipped = 0;
    for (uint64_t i = 0; i < 200; i++) {
        uint8_t lo[KCAP], hi[KCAP];
        size_t ll = table_key(lo, i * 47 + 1), hl = table_key(hi, i * 47 + 4);
        skipped += mem_step(db, lo, ll, hi, hl, &found) == KV_EXPLAIN_FILTER_NEGATIVE;
        ck_assert(!found);
    }
    ck_assert_uint_ge(skipped, 190); /* one key in 2^20 buckets: a clash is rare */
    get_stats(db, &s1);
    ck_assert_uint_eq(s1.memtable_range_skips - s0.memtable_range_skips, skipped);
    close_db(db);
}
END_TEST

/* A random bound: near a model key (it, a byte more, a prefix, a byte
 * changed) or random bytes. */
static size_t make_bound(uint64_t *s, uint8_t *b)
{
    const mkey *k = &model[rnd(s) % nmodel];
    size_t len = k->len;
    memcpy(b, k->b, len);
    switch (rnd(s) % 6) {
    case 0: break;
    case 1:
        if (len < KCAP)
            b[len++] = (uint8_t)(rnd(s) % 2 ? 0 : rnd(s));
        break;
    case 2: len = len ? rnd(s) % len : 0; break;
    case 3:
        if (len) {
            size_t j = rnd(s) % len;
            b[j] = (uint8_t)(b[j] + (rnd(s) % 2 ? 1 : -1));
        }
        break;
    case 4:
        len = rnd(s) % 12;
        for (size_t j = 0; j < len; j++)
            b[j] = (uint8_t)rnd(s);
        break;
    default:
        len = rnd(s) % 4;
        memset(b, rnd(s) % 2 ? 0xff : 0, len);
        break;
    }
    return len;
}

START_TEST(random_ranges_match_the_model)
{
    nmodel = 0;
    kv_db *db = two_flushes();
    uint64_t s = 77;
    /* Memtable keys: among the table's, beside them, outside its key range
     * and its shared prefix ("k"), empty, 0xff, binary. */
    static const char *const odd[] = {"",          "a", "j9", "k",    "k0000444",     "k000044430",
                                      "k99999999", "l", "zz", "\xff", "\xff\xff\xff", "k\x00\x01",
                                      "\x00"};
    for (size_t i = 0; i < sizeof odd / sizeof *odd; i++) {
        size_t kl = i == 11 ? 3 : i == 12 ? 1 : strlen(odd[i]);
        put_kv(db, odd[i], kl, "v", 1);
        model_set((const uint8_t *)odd[i], kl, 1, 1);
    }
    uint8_t k[KCAP];
    for (int i = 0; i < 300; i++) {
        size_t kl;
        if (i % 3 == 0) { /* random bytes */
            kl = rnd(&s) % 10;
            for (size_t j = 0; j < kl; j++)
                k[j] = (uint8_t)rnd(&s);
        } else {
            kl = table_key(k, rnd(&s) % 12000);
        }
        put_kv(db, k, kl, "v", 1);
        model_set(k, kl, 1, 1);
    }
    /* Tombstones in the memtable hiding table keys. */
    for (int i = 0; i < 200; i++) {
        size_t kl = table_key(k, rnd(&s) % 1000 * 10);
        ck_assert_int_eq(kv_delete(db, k, kl), KV_OK);
        model_set(k, kl, 1, 0);
    }
    qsort(model, nmodel, sizeof *model, mkey_cmp);
    unsigned held = 0, skipped = 0;
    kv_iter *it;
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    for (int q = 0; q < 3000; q++) {
        uint8_t lo[KCAP], hi[KCAP];
        size_t ll = make_bound(&s, lo), hl;
        if (q % 2) { /* a narrow range: lo's last byte up a little, or a byte more */
            memcpy(hi, lo, ll);
            hl = ll;
            if (hl && hi[hl - 1] < 0xfc && rnd(&s) % 2)
                hi[hl - 1] = (uint8_t)(hi[hl - 1] + 1 + rnd(&s) % 3);
            else if (hl < KCAP)
                hi[hl++] = (uint8_t)rnd(&s);
        } else {
            hl = make_bound(&s, hi);
        }
        if (kcmp(lo, ll, hi, hl) >= 0)
            continue;
        size_t a = lower_bound(lo, ll), b = lower_bound(hi, hl);
        int mem_holds = 0;
        size_t first = SIZE_MAX, last = SIZE_MAX;
        for (size_t i = a; i < b; i++) {
            mem_holds |= model[i].mem; /* a tombstone is an entry too */
            if (model[i].live) {
                if (first == SIZE_MAX)
                    first = i;
                last = i;
            }
        }
        int found, f = mem_step(db, lo, ll, hi, hl, &found);
        ck_assert_msg(!mem_holds || f != KV_EXPLAIN_FILTER_NEGATIVE, "query %d: a false negative",
                      q);
        held += mem_holds;
        skipped += f == KV_EXPLAIN_FILTER_NEGATIVE;
        /* Forward and backward, the first and last live keys. */
        ck_assert_int_eq(kv_iter_set_bounds(it, lo, ll, hi, hl), KV_OK);
        for (int back = 0; back < 2; back++) {
            if (back)
                kv_iter_seek_last(it);
            else
                kv_iter_seek(it, lo, ll);
            size_t want = back ? last : first;
            ck_assert_int_eq(kv_iter_status(it), KV_OK);
            ck_assert_int_eq(kv_iter_valid(it), want != SIZE_MAX);
            if (want != SIZE_MAX) {
                size_t gl;
                const void *g = kv_iter_key(it, &gl);
                ck_assert_msg(kcmp(g, gl, model[want].b, model[want].len) == 0,
                              "query %d (%s): another key", q, back ? "back" : "forward");
            }
        }
    }
    kv_iter_free(it);
    ck_assert_uint_gt(held, 100);
    ck_assert_uint_gt(skipped, 100); /* of about 1000 empty of memtable keys: 350 */
    close_db(db);
}
END_TEST

/* ---- a writer beside readers ----------------------------------------------------------- */

#define WKEYS 20000u

struct shared {
    kv_db *db;
    uint64_t order[WKEYS];  /* the numbers written, in the writer's order */
    _Atomic uint64_t done;  /* keys written and returned from kv_put */
    _Atomic unsigned reads; /* lookups the readers made */
};

static void *writer(void *arg)
{
    struct shared *sh = arg;
    uint8_t k[KCAP];
    for (uint64_t i = 0; i < WKEYS; i++) {
        size_t kl = table_key(k, sh->order[i]);
        ck_assert_int_eq(kv_put(sh->db, k, kl, k, kl), KV_OK);
        atomic_store_explicit(&sh->done, i + 1, memory_order_release);
    }
    return NULL;
}

/* Each key the writer has returned from is found by an iterator made
 * after, with bounds around it alone or a few numbers wide; an iterator
 * made earlier (its snapshot older) still finds the keys written before. */
static void *reader(void *arg)
{
    struct shared *sh = arg;
    uint64_t s = (uint64_t)(uintptr_t)arg;
    kv_iter *old = NULL;
    uint64_t old_done = 0;
    for (;;) {
        uint64_t done = atomic_load_explicit(&sh->done, memory_order_acquire);
        if (done == 0)
            continue;
        kv_iter *it;
        ck_assert_int_eq(kv_iter_new(sh->db, NULL, &it), KV_OK);
        if (!old) {
            old = it;
            old_done = done;
            continue;
        }
        for (int r = 0; r < 2; r++) {
            kv_iter *use = r ? old : it;
            uint64_t n = sh->order[rnd(&s) % (r ? old_done : done)];
            uint8_t lo[KCAP], hi[KCAP];
            size_t ll = table_key(lo, n - n % 10 + 1), hl = table_key(hi, n + 1 + rnd(&s) % 3);
            ck_assert_int_eq(kv_iter_set_bounds(use, lo, ll, hi, hl), KV_OK);
            if (r)
                kv_iter_seek_last(use);
            else
                kv_iter_seek(use, lo, ll);
            ck_assert(kv_iter_valid(use));
            size_t gl;
            const void *g = kv_iter_key(use, &gl);
            uint8_t want[KCAP];
            size_t wl = table_key(want, n);
            /* Forward: the first key >= lo, n or a smaller one written
             * too; backward: n or a larger one below hi. */
            int c = kcmp(g, gl, want, wl);
            ck_assert(r ? c >= 0 : c <= 0);
        }
        kv_iter_free(it);
        atomic_fetch_add(&sh->reads, 1);
        if (done == WKEYS)
            break;
    }
    kv_iter_free(old);
    return NULL;
}

START_TEST(readers_beside_a_writer)
{
    nmodel = 0;
    struct shared *sh = calloc(1, sizeof *sh);
    ck_assert_ptr_nonnull(sh);
    sh->db = two_flushes();
    /* Numbers ending in 1..9 but 5 (the tables hold 0 and 5), shuffled,
     * also far past the tables' keys. */
    uint64_t s = 5;
    for (uint64_t i = 0; i < WKEYS; i++) {
        uint64_t n = i / 8 * 10 + 1 + i % 8;
        sh->order[i] = n % 10 >= 5 ? n + 1 : n;
    }
    for (uint64_t i = WKEYS - 1; i > 0; i--) {
        uint64_t j = rnd(&s) % (i + 1), t = sh->order[i];
        sh->order[i] = sh->order[j];
        sh->order[j] = t;
    }
    pthread_t w, r[2];
    ck_assert_int_eq(pthread_create(&w, NULL, writer, sh), 0);
    for (int j = 0; j < 2; j++)
        ck_assert_int_eq(pthread_create(&r[j], NULL, reader, sh), 0);
    pthread_join(w, NULL);
    for (int j = 0; j < 2; j++)
        pthread_join(r[j], NULL);
    ck_assert_uint_gt(atomic_load(&sh->reads), 0);
    close_db(sh->db);
    free(sh);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("memgate");
    TCase *tc = test_tcase(s, "memgate", 120, 1);
    tcase_add_test(tc, empty_ranges_skip_the_memtable);
    tcase_add_test(tc, random_ranges_match_the_model);
    tcase_add_test(tc, readers_beside_a_writer);
    return s;
}
