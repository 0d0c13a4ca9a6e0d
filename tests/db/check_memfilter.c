/* check_memfilter.c - the memtable filter (kv_options.memtable_filter),
 * through kv.h: random puts, overwrites and deletes checked key by key
 * against a model with the filter on and off, at snapshots, across memtable
 * switches and flushes, and with memtables holding more keys than their
 * filter was sized for; its counter, metric and explain steps; the other
 * counters unchanged by it; and writers and readers on many threads, where
 * a Get at a snapshot must agree with an iterator (which never asks the
 * filter) at the same snapshot. */
#define _XOPEN_SOURCE 700
#include <check.h>
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

/* ---- keys and values -------------------------------------------------------------- */

#define KEY_MAX 48

/* Key `id` of a model of `keys` keys: ids 0..keys-1 are written, and
 * keys..2*keys-1 never are (each must read as absent). Of the written ones,
 * id 0 is the empty key and ids 1..3 are 1 to 3 bytes of 0xFF; of the
 * others, ids keys+1..keys+3 are 1 to 3 bytes of 0xFE. Every other key is
 * the id's 4 bytes, big-endian (so its first byte is 0: ids stay below
 * 2^24), then 0 to 43 bytes of any value, NUL included; with `tiny`, none. */
static size_t model_key(uint32_t id, uint32_t keys, int tiny, uint8_t k[KEY_MAX])
{
    uint32_t r = id % keys;
    if (r == 0 && id < keys)
        return 0;
    if (r >= 1 && r <= 3) {
        memset(k, id < keys ? 0xFF : 0xFE, r);
        return r;
    }
    k[0] = (uint8_t)(id >> 24);
    k[1] = (uint8_t)(id >> 16);
    k[2] = (uint8_t)(id >> 8);
    k[3] = (uint8_t)id;
    uint64_t x = splitmix(id * 0x9E37ull);
    size_t len = tiny ? 4 : 4 + (size_t)(x % (KEY_MAX - 4));
    for (size_t i = 4; i < len; i++) {
        x = splitmix(x);
        k[i] = (uint8_t)x;
    }
    return len;
}

/* The value of version `ver` of key `id`: its length from `size`, its bytes
 * from (id, ver). */
static void value_of(uint32_t id, uint32_t ver, size_t len, uint8_t *v)
{
    uint64_t x = splitmix(((uint64_t)id << 32) ^ ver ^ 0x7A7Aull);
    for (size_t i = 0; i < len; i += 8) {
        x = splitmix(x);
        memcpy(v + i, &x, len - i < 8 ? len - i : 8);
    }
}

#define BIG_VALUE ((size_t)16 << 10)

/* One key of the model: its newest version, or none. */
struct mkey {
    uint32_t ver;    /* 0: never written */
    uint32_t vlen;
    int live;        /* 1: a value; 0: never written or deleted */
};

/* A model test's setting (the loop index picks one). */
struct setting {
    const char *name;
    int filter;
    size_t write_buffer;
    uint32_t keys;        /* ids 0..keys-1 are written; keys..2*keys-1 never */
    uint32_t ops;
    int tiny;             /* 4-byte keys, values of 0 or 1 byte: entries of about 40
                           * bytes, so about 1.5 times the keys a memtable's filter
                           * was sized for (write_buffer_size / 64) */
};

static const struct setting settings[] = {
    {"filter on, one memtable", 1, (size_t)64 << 20, 3000, 12000, 0},
    {"filter off, one memtable", 0, (size_t)64 << 20, 3000, 12000, 0},
    {"filter on, 64 KiB memtables", 1, (size_t)64 << 10, 3000, 12000, 0},
    {"filter off, 64 KiB memtables", 0, (size_t)64 << 10, 3000, 12000, 0},
    {"filter on, overfilled 64 KiB memtables", 1, (size_t)64 << 10, 20000, 40000, 1},
};

/* Every key, written or not, read back with kv_get_at(snap) against the
 * model `m`: written keys 0..keys-1, never-written keys keys..2*keys-1. */
static void check_all(kv_db *db, const kv_snapshot *snap, const struct mkey *m, uint32_t keys,
                      int tiny, const char *when)
{
    uint8_t k[KEY_MAX];
    uint8_t *want = malloc(BIG_VALUE);
    ck_assert_ptr_nonnull(want);
    for (uint32_t id = 0; id < 2 * keys; id++) {
        size_t klen = model_key(id, keys, tiny, k);
        const struct mkey *e = id < keys ? &m[id] : NULL;
        void *v = NULL;
        size_t vlen = 0;
        int rc = kv_get_at(db, snap, k, klen, &v, &vlen);
        if (!e || !e->live) {
            ck_assert_msg(rc == KV_NOTFOUND, "%s: key %u (%zu bytes, %s) reads %s", when, id,
                          klen, !e || !e->ver ? "never written" : "deleted", kv_strerror(rc));
            continue;
        }
        ck_assert_msg(rc == KV_OK, "%s: key %u (%zu bytes, version %u) reads %s", when, id,
                      klen, e->ver, kv_strerror(rc));
        ck_assert_uint_eq(vlen, e->vlen);
        value_of(id, e->ver, vlen, want);
        ck_assert_msg(vlen == 0 || memcmp(v, want, vlen) == 0, "%s: key %u: wrong value", when,
                      id);
        kv_free(v);
    }
    free(want);
}

/* Random puts, overwrites and deletes, every key checked after each tenth
 * of the run, at the latest sequence and at a snapshot taken halfway,
 * again after kv_flush (the same keys from tables), and after reopening. */
START_TEST(model_gets_match)
{
    const struct setting *st = &settings[_i];
    char p[600];
    test_path(p, sizeof p, "db");
    kv_options o;
    kv_options_init(&o);
    ck_assert_int_eq(o.memtable_filter, 1);
    o.memtable_filter = st->filter;
    o.write_buffer_size = st->write_buffer;
    kv_db *db = open_db(p, &o);

    struct mkey *m = calloc(st->keys, sizeof *m), *at_snap = NULL;
    uint8_t *val = malloc(BIG_VALUE);
    ck_assert(m && val);
    kv_snapshot *snap = NULL;
    uint64_t r = 0x3E3F + _i;
    for (uint32_t op = 0; op < st->ops; op++) {
        r = splitmix(r);
        uint32_t id = (uint32_t)(r % st->keys);
        uint8_t k[KEY_MAX];
        size_t klen = model_key(id, st->keys, st->tiny, k);
        struct mkey *e = &m[id];
        if ((r >> 32) % 5 == 0) { /* a delete, of a live key or not */
            ck_assert_int_eq(kv_delete(db, k, klen), KV_OK);
            e->live = 0;
        } else { /* a put: a new key or an overwrite */
            unsigned roll = (unsigned)((r >> 40) % 64);
            size_t vlen = st->tiny ? roll % 2 : roll == 0 ? BIG_VALUE : roll % 17;
            e->ver++;
            e->vlen = (uint32_t)vlen;
            e->live = 1;
            value_of(id, e->ver, vlen, val);
            ck_assert_int_eq(kv_put(db, k, klen, val, vlen), KV_OK);
        }
        if ((op + 1) % (st->ops / 10) == 0)
            check_all(db, NULL, m, st->keys, st->tiny, st->name);
        if (op + 1 == st->ops / 2) {
            ck_assert_int_eq(kv_snapshot_new(db, &snap), KV_OK);
            at_snap = malloc(st->keys * sizeof *m);
            ck_assert_ptr_nonnull(at_snap);
            memcpy(at_snap, m, st->keys * sizeof *m);
        }
        if (snap && (op + 1) % (st->ops / 5) == 0)
            check_all(db, snap, at_snap, st->keys, st->tiny, "at the snapshot");
    }

    struct kv_stats s;
    get_stats(db, &s);
    fprintf(stderr, "memfilter model, %s: %llu gets, %llu memtable filter negatives, "
            "%llu flushes, %llu memtable hits\n", st->name, (unsigned long long)s.gets,
            (unsigned long long)s.memtable_filter_negatives, (unsigned long long)s.flushes,
            (unsigned long long)s.memtable_hits);
    if (!st->filter)
        ck_assert_uint_eq(s.memtable_filter_negatives, 0);
    else /* half the gets are of never-written keys */
        ck_assert_uint_gt(s.memtable_filter_negatives, s.gets / 4);
    if (st->write_buffer < ((size_t)1 << 20))
        ck_assert_uint_gt(s.flushes, 5);
    else
        ck_assert_uint_eq(s.flushes, 0);

    /* The same answers once every key is in a table. */
    ck_assert_int_eq(kv_flush(db), KV_OK);
    check_all(db, NULL, m, st->keys, st->tiny, "after kv_flush");
    check_all(db, snap, at_snap, st->keys, st->tiny, "at the snapshot after kv_flush");
    kv_snapshot_release(db, snap);
    close_db(db);
    db = open_db(p, &o);
    check_all(db, NULL, m, st->keys, st->tiny, "after reopening");
    close_db(db);
    free(at_snap);
    free(m);
    free(val);
}
END_TEST

/* ---- the counter, the metric, explain -------------------------------------------- */

/* A key of the counters tests: "c-<i>". */
static size_t ckey(uint32_t i, char k[32])
{
    return (size_t)snprintf(k, 32, "c-%06u", i);
}

/* The metric's line "name value" in kv_metrics_text. */
static uint64_t metric_of(kv_db *db, const char *name)
{
    char *text = NULL;
    ck_assert_int_eq(kv_metrics_text(db, &text), KV_OK);
    char want[128];
    snprintf(want, sizeof want, "\n%s ", name);
    const char *at = strstr(text, want);
    ck_assert_msg(at != NULL, "no %s in kv_metrics_text", name);
    uint64_t v = strtoull(at + strlen(want), NULL, 10);
    kv_free(text);
    return v;
}

/* memtable_filter_negatives moves for keys the memtable lacks, only with
 * the filter on; present keys never move it (a "no" for them would be a
 * wrong answer). */
START_TEST(negatives_counted_only_when_on)
{
    for (int on = 0; on <= 1; on++) {
        char p[600];
        test_path(p, sizeof p, on ? "on" : "off");
        kv_options o;
        kv_options_init(&o);
        o.memtable_filter = on;
        kv_db *db = open_db(p, &o);
        char k[32];
        for (uint32_t i = 0; i < 2000; i += 2)
            ck_assert_int_eq(kv_put(db, k, ckey(i, k), "v", 1), KV_OK);
        struct kv_stats s0, s1, s2;
        get_stats(db, &s0);
        ck_assert_uint_eq(s0.memtable_filter_negatives, 0);
        for (uint32_t i = 0; i < 2000; i += 2) { /* present */
            void *v;
            size_t vl;
            ck_assert_int_eq(kv_get(db, k, ckey(i, k), &v, &vl), KV_OK);
            kv_free(v);
        }
        get_stats(db, &s1);
        ck_assert_uint_eq(s1.memtable_filter_negatives, 0);
        ck_assert_uint_eq(s1.memtable_hits - s0.memtable_hits, 1000);
        for (uint32_t i = 1; i < 2000; i += 2) { /* absent */
            void *v;
            size_t vl;
            ck_assert_int_eq(kv_get(db, k, ckey(i, k), &v, &vl), KV_NOTFOUND);
        }
        get_stats(db, &s2);
        ck_assert_uint_eq(s2.gets - s1.gets, 1000);
        if (on) /* about 1% false positives at 10 bits per key, the filter barely filled */
            ck_assert_uint_ge(s2.memtable_filter_negatives, 980);
        else
            ck_assert_uint_eq(s2.memtable_filter_negatives, 0);
        ck_assert_uint_le(s2.memtable_filter_negatives, 1000);
        ck_assert_uint_eq(metric_of(db, "kv_memtable_filter_negatives_total"),
                          s2.memtable_filter_negatives);
        /* memtable_bytes counts the filter's bits (4 MiB write buffer:
         * 65,536 keys at 10 bits, 80 KiB) beside the arena's blocks. */
        if (on)
            ck_assert_uint_ge(s2.memtable_bytes, 80u << 10);
        close_db(db);
    }
}
END_TEST

/* The same Gets with the filter on and off give the same answers and the
 * same counters, the filter's own aside: it only spares skiplist walks.
 * Both databases are copies of one (so their tables and their filters'
 * seed are the same), take the same writes into their memtables (flushed
 * only by kv_flush) and then the same Gets. */
START_TEST(same_counters_either_way)
{
    char base[600], k[32];
    test_path(base, sizeof base, "base");
    kv_db *db = open_db(base, NULL);
    for (uint32_t i = 0; i < 4000; i += 2)
        ck_assert_int_eq(kv_put(db, k, ckey(i, k), k, 8), KV_OK);
    for (uint32_t i = 0; i < 4000; i += 10)
        ck_assert_int_eq(kv_delete(db, k, ckey(i, k)), KV_OK);
    close_db(db);

    struct kv_stats s[2];
    uint64_t found[2] = {0, 0};
    for (int on = 0; on <= 1; on++) {
        char p[600], cmd[1400];
        test_path(p, sizeof p, on ? "on" : "off");
        snprintf(cmd, sizeof cmd, "cp -R '%s' '%s'", base, p);
        ck_assert_int_eq(system(cmd), 0);
        kv_options o;
        kv_options_init(&o);
        o.memtable_filter = on;
        o.idle_compaction_ms = 0; /* same tables in both: none merged away while one runs */
        db = open_db(p, &o);
        struct kv_stats s0;
        get_stats(db, &s0);
        for (int round = 0; round < 3; round++) {
            for (uint32_t i = (uint32_t)round; i < 6000; i += 5)
                ck_assert_int_eq(kv_put(db, k, ckey(i, k), k, 8), KV_OK);
            for (uint32_t i = (uint32_t)round; i < 6000; i += 15)
                ck_assert_int_eq(kv_delete(db, k, ckey(i, k)), KV_OK);
            if (round == 1)
                ck_assert_int_eq(kv_flush(db), KV_OK);
            for (uint32_t i = 0; i < 8000; i += 3) {
                void *v;
                size_t vl;
                int rc = kv_get(db, k, ckey(i, k), &v, &vl);
                ck_assert(rc == KV_OK || rc == KV_NOTFOUND);
                if (rc == KV_OK) {
                    ck_assert(vl == 8 && memcmp(v, k, 8) == 0);
                    found[on]++;
                    kv_free(v);
                }
            }
        }
        get_stats(db, &s[on]);
        fprintf(stderr, "memfilter %s: %llu found of %llu gets, %llu memtable filter "
                "negatives\n", on ? "on" : "off", (unsigned long long)found[on],
                (unsigned long long)(s[on].gets - s0.gets),
                (unsigned long long)s[on].memtable_filter_negatives);
        close_db(db);
    }
    ck_assert_uint_eq(found[0], found[1]);
    ck_assert_uint_eq(s[0].memtable_filter_negatives, 0);
    ck_assert_uint_gt(s[1].memtable_filter_negatives, 0);
#define SAME(f) ck_assert_msg(s[0].f == s[1].f, #f ": %llu off, %llu on", \
                              (unsigned long long)s[0].f, (unsigned long long)s[1].f)
    SAME(gets);
    SAME(puts);
    SAME(deletes);
    SAME(memtable_hits);
    SAME(tables_probed);
    SAME(filter_negatives);
    SAME(filter_positives);
    SAME(filter_false_positives);
    SAME(data_block_reads);
    SAME(block_cache_hits);
    SAME(flushes);
    SAME(last_sequence);
#undef SAME
}
END_TEST

/* A caller built against the headers of options version 1 passes a struct
 * that ends before memtable_filter: kv_open reads no further (the bytes
 * after it are not the caller's) and the filter is on, its default; and
 * one of version 2 ends before filter_policy. */
START_TEST(options_version_1_gets_the_default)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_options o;
    kv_options_init(&o);
    ck_assert_uint_eq(o.version, KV_OPTIONS_VERSION);
    o.version = 1;
    o.memtable_filter = 77; /* past a version-1 struct: must not be read */
    kv_db *db = open_db(p, &o);
    void *v;
    size_t vl;
    ck_assert_int_eq(kv_get(db, "k", 1, &v, &vl), KV_NOTFOUND);
    struct kv_stats s;
    get_stats(db, &s);
    ck_assert_uint_eq(s.memtable_filter_negatives, 1); /* an empty memtable: always "no" */
    close_db(db);
    /* Version 2's struct ends before filter_policy: the bytes after it
     * are not read either. */
    o.version = 2;
    o.memtable_filter = 1;
    o.filter_policy = 77;
    o.use_direct_reads = 77;
    db = open_db(p, &o);
    close_db(db);
    o.filter_policy = KV_FILTER_UNIFORM;
    o.use_direct_reads = 0;
    o.memtable_filter = 77;
    /* The current version reads it, and refuses a value but 0 and 1. */
    o.version = KV_OPTIONS_VERSION;
    db = (kv_db *)&o;
    ck_assert_int_eq(kv_open(p, &o, &db), KV_EINVAL);
    ck_assert_ptr_null(db);
    ck_assert_ptr_nonnull(strstr(kv_error_text(), "memtable_filter"));
}
END_TEST

/* kv_explain_get shows the memtable filter's answer as the memtable step's
 * filter: "no" for most absent keys, "maybe" for the keys it holds (which
 * the step then finds), not asked with the filter off. */
START_TEST(explain_shows_memtable_filter)
{
    for (int on = 0; on <= 1; on++) {
        char p[600];
        test_path(p, sizeof p, on ? "on" : "off");
        kv_options o;
        kv_options_init(&o);
        o.memtable_filter = on;
        kv_db *db = open_db(p, &o);
        char k[32];
        for (uint32_t i = 0; i < 200; i += 2)
            ck_assert_int_eq(kv_put(db, k, ckey(i, k), "v", 1), KV_OK);
        ck_assert_int_eq(kv_delete(db, k, ckey(100, k)), KV_OK);
        struct kv_stats s0, s1;
        get_stats(db, &s0);
        unsigned negatives = 0, maybes = 0;
        for (uint32_t i = 0; i < 200; i++) {
            kv_explain *x;
            ck_assert_int_eq(kv_explain_get(db, k, ckey(i, k), &x), KV_OK);
            ck_assert_uint_ge(x->nsteps, 1);
            const kv_explain_step *st = &x->steps[0];
            ck_assert_int_eq(st->where, KV_EXPLAIN_MEMTABLE);
            if (!on) {
                ck_assert_int_eq(st->filter, KV_EXPLAIN_FILTER_NOT_ASKED);
            } else if (i % 2 == 0) { /* held: always "maybe", then found or deleted */
                ck_assert_int_eq(st->filter, KV_EXPLAIN_FILTER_MAYBE);
                ck_assert_int_eq(st->outcome, i == 100 ? KV_EXPLAIN_DELETED : KV_EXPLAIN_FOUND);
                ck_assert_uint_gt(st->seq, 0);
            } else {
                ck_assert(st->filter == KV_EXPLAIN_FILTER_NEGATIVE ||
                          st->filter == KV_EXPLAIN_FILTER_MAYBE);
                ck_assert_int_eq(st->outcome, KV_EXPLAIN_ABSENT);
                negatives += st->filter == KV_EXPLAIN_FILTER_NEGATIVE;
            }
            maybes += st->filter == KV_EXPLAIN_FILTER_MAYBE;
            ck_assert_int_eq(x->result, i % 2 || i == 100 ? KV_NOTFOUND : KV_OK);
            kv_free(x);
        }
        get_stats(db, &s1);
        /* Explains are Gets: their filter negatives are counted too. */
        ck_assert_uint_eq(s1.memtable_filter_negatives - s0.memtable_filter_negatives, negatives);
        if (on) {
            ck_assert_uint_ge(negatives, 95); /* of 100 absent keys */
            ck_assert_uint_ge(maybes, 100);
        } else
            ck_assert_uint_eq(negatives + maybes, 0);
        close_db(db);
    }
}
END_TEST

/* ---- threads ---------------------------------------------------------------------------- */

enum { WRITERS = 3, READERS = 3, PER_WRITER = 6000 };

struct shared {
    kv_db *db;
    _Atomic uint32_t done[WRITERS]; /* puts of each writer that returned */
    _Atomic int stop;
    _Atomic uint64_t checked, agreed_in_flight;
    _Atomic int errors;
    char first_error[256];
    pthread_mutex_t mu;
};

static void note_error(struct shared *sh, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void note_error(struct shared *sh, const char *fmt, ...)
{
    pthread_mutex_lock(&sh->mu);
    if (atomic_fetch_add(&sh->errors, 1) == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(sh->first_error, sizeof sh->first_error, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&sh->mu);
}

static size_t tkey(int w, uint32_t n, char k[32])
{
    return (size_t)snprintf(k, 32, "t%d-%07u", w, n);
}

struct targ {
    struct shared *sh;
    int id;
};

static void *writer(void *p)
{
    struct targ *a = p;
    struct shared *sh = a->sh;
    char k[32];
    for (uint32_t n = 0; n < PER_WRITER && !atomic_load(&sh->stop); n++) {
        size_t kl = tkey(a->id, n, k);
        int rc = kv_put(sh->db, k, kl, k, kl);
        if (rc != KV_OK) {
            note_error(sh, "put %s: %s", k, kv_strerror(rc));
            break;
        }
        atomic_store(&sh->done[a->id], n + 1);
    }
    return NULL;
}

/* Readers: a key whose put returned must be found, with its value; a key
 * never written must not. And the key a writer is putting right now, read
 * at a snapshot, must agree with an iterator at that snapshot: iterators
 * never ask the filter, so a Get that missed a key the iterator sees would
 * be the filter hiding an entry the snapshot covers. */
static void *reader(void *p)
{
    struct targ *a = p;
    struct shared *sh = a->sh;
    uint64_t r = 0xABCD + (uint64_t)a->id;
    char k[32];
    while (!atomic_load(&sh->stop)) {
        r = splitmix(r);
        int w = (int)(r % WRITERS);
        uint32_t done = atomic_load(&sh->done[w]);
        if (done) {
            uint32_t n = (uint32_t)((r >> 16) % done);
            size_t kl = tkey(w, n, k);
            void *v = NULL;
            size_t vl = 0;
            int rc = kv_get(sh->db, k, kl, &v, &vl);
            if (rc != KV_OK || vl != kl || memcmp(v, k, kl) != 0)
                note_error(sh, "get %s after its put returned: %s", k, kv_strerror(rc));
            kv_free(v);
            kl = tkey(w, PER_WRITER + n, k); /* never written */
            if ((rc = kv_get(sh->db, k, kl, &v, &vl)) != KV_NOTFOUND)
                note_error(sh, "get %s, never written: %s", k, kv_strerror(rc));
        }
        if (r % 8 == 0 && done < PER_WRITER) { /* the key being put now */
            size_t kl = tkey(w, done, k);
            kv_snapshot *s;
            kv_iter *it;
            if (kv_snapshot_new(sh->db, &s) != KV_OK) {
                note_error(sh, "kv_snapshot_new");
                continue;
            }
            void *v = NULL;
            size_t vl = 0;
            int rc = kv_get_at(sh->db, s, k, kl, &v, &vl);
            kv_free(v);
            if (kv_iter_new(sh->db, s, &it) != KV_OK) {
                note_error(sh, "kv_iter_new");
                kv_snapshot_release(sh->db, s);
                continue;
            }
            kv_iter_seek(it, k, kl);
            size_t ikl = 0;
            const void *ik = kv_iter_valid(it) ? kv_iter_key(it, &ikl) : NULL;
            int seen = ik && ikl == kl && memcmp(ik, k, kl) == 0;
            if (seen != (rc == KV_OK))
                note_error(sh, "at one snapshot %s is %s by the iterator, %s by get", k,
                     seen ? "seen" : "not seen", kv_strerror(rc));
            atomic_fetch_add(&sh->agreed_in_flight, (uint64_t)seen);
            kv_iter_free(it);
            kv_snapshot_release(sh->db, s);
        }
        atomic_fetch_add(&sh->checked, 1);
    }
    return NULL;
}

START_TEST(readers_find_every_returned_put)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_options o;
    kv_options_init(&o);
    o.write_buffer_size = (size_t)64 << 10; /* memtables switch and flush throughout */
    static struct shared sh;
    memset(&sh, 0, sizeof sh);
    pthread_mutex_init(&sh.mu, NULL);
    sh.db = open_db(p, &o);
    pthread_t t[WRITERS + READERS];
    struct targ args[WRITERS + READERS];
    for (int i = 0; i < WRITERS + READERS; i++) {
        args[i] = (struct targ){.sh = &sh, .id = i < WRITERS ? i : i - WRITERS};
        ck_assert_int_eq(pthread_create(&t[i], NULL, i < WRITERS ? writer : reader, &args[i]),
                         0);
    }
    for (int i = 0; i < WRITERS; i++)
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
    atomic_store(&sh.stop, 1);
    for (int i = WRITERS; i < WRITERS + READERS; i++)
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
    ck_assert_msg(atomic_load(&sh.errors) == 0, "%d errors, the first: %s",
                  atomic_load(&sh.errors), sh.first_error);
    struct kv_stats s;
    get_stats(sh.db, &s);
    fprintf(stderr, "memfilter threads: %llu reader rounds, %llu keys in flight seen by both, "
            "%llu flushes, %llu memtable filter negatives\n",
            (unsigned long long)atomic_load(&sh.checked),
            (unsigned long long)atomic_load(&sh.agreed_in_flight),
            (unsigned long long)s.flushes, (unsigned long long)s.memtable_filter_negatives);
    ck_assert_uint_gt(atomic_load(&sh.checked), 100);
    ck_assert_uint_ge(s.flushes, 1);
    ck_assert_uint_gt(s.memtable_filter_negatives, 0);
    /* Every key, once the writers are done. */
    char k[32];
    for (int w = 0; w < WRITERS; w++)
        for (uint32_t n = 0; n < PER_WRITER; n++) {
            size_t kl = tkey(w, n, k);
            void *v = NULL;
            size_t vl = 0;
            ck_assert_int_eq(kv_get(sh.db, k, kl, &v, &vl), KV_OK);
            ck_assert(vl == kl && memcmp(v, k, kl) == 0);
            kv_free(v);
        }
    close_db(sh.db);
    pthread_mutex_destroy(&sh.mu);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("memfilter");
    TCase *tc = tcase_create("model");
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, model_gets_match, 0, (int)(sizeof settings / sizeof settings[0]));
    suite_add_tcase(s, tc);
    tc = tcase_create("counters");
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, negatives_counted_only_when_on);
    tcase_add_test(tc, same_counters_either_way);
    tcase_add_test(tc, explain_shows_memtable_filter);
    tcase_add_test(tc, options_version_1_gets_the_default);
    suite_add_tcase(s, tc);
    tc = tcase_create("threads");
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, readers_find_every_returned_put);
    suite_add_tcase(s, tc);
    return s;
}
