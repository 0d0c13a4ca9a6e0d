/* check_compact.c - compaction, iterators and snapshots, through kv.h:
 * a million random operations checked against an in-memory model (gets,
 * scans, seeks forward and backward, across reopen), snapshots that outlive
 * 200,000 writes and many compactions, the shape of the levels after a full
 * compaction, the space that overwrites and deletes give back, SIGKILL in
 * the middle of compactions, readers, writers and an iterator running
 * while compactions do, more than 2,000 tables under a budget of 64 open
 * files, level 0 merged down once writes stop (idle_compaction_ms), and
 * one directory sync per compaction however many tables it writes. */
#define _XOPEN_SOURCE 700
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <kv/kv.h>

#include "fixture.h"
#include "testing.h" /* kv_testing: I/O counters, manifest commits */

/* ---- helpers -------------------------------------------------------------------- */

static uint64_t rnd(uint64_t *state)
{
    *state = splitmix(*state);
    return *state;
}

static void fill_bytes(uint64_t seed, uint8_t *p, size_t n)
{
    uint64_t x = seed;
    for (size_t i = 0; i < n; i += 8) {
        x = splitmix(x);
        memcpy(p + i, &x, n - i < 8 ? n - i : 8);
    }
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Bytewise order, shorter first on a tie: the store's key order. */
static int key_cmp(const void *a, size_t al, const void *b, size_t bl)
{
    size_t n = al < bl ? al : bl;
    int c = n ? memcmp(a, b, n) : 0;
    if (c)
        return c;
    return al < bl ? -1 : al > bl;
}

/* Bytes the directory's files take on disk (allocated blocks). */
static uint64_t dir_bytes(const char *p)
{
    DIR *d = opendir(p);
    ck_assert_ptr_nonnull(d);
    uint64_t total = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char f[1200];
        snprintf(f, sizeof f, "%s/%s", p, e->d_name);
        struct stat st;
        if (stat(f, &st) == 0 && S_ISREG(st.st_mode))
            total += (uint64_t)st.st_blocks * 512;
    }
    closedir(d);
    return total;
}

/* ---- the model: a key space of ids, each absent or holding one version ------------ */

/* The key of id: id 0 is the empty key; the others are the decimal digits
 * of (id - 1) / 4 followed by one of "", "\0", "\xff", "\0\xff". So keys are
 * prefixes of one another ("12" < "12\0" < "12\0\xff" < "120" < "12\xff"),
 * hold zero bytes, and differ in length. */
static size_t model_key(uint32_t id, uint8_t *k)
{
    if (id == 0)
        return 0;
    static const char *const tails[4] = {"", "\0", "\xff", "\0\xff"};
    static const size_t tail_len[4] = {0, 1, 1, 2};
    uint32_t q = (id - 1) / 4, t = (id - 1) % 4;
    size_t n = (size_t)sprintf((char *)k, "%u", q);
    memcpy(k + n, tails[t], tail_len[t]);
    return n + tail_len[t];
}

/* The value version `ver` of id holds: 0..47 bytes, empty now and then,
 * with the id and version inside when there is room. */
static size_t model_value(uint32_t id, uint32_t ver, uint8_t *v)
{
    uint64_t h = splitmix(((uint64_t)id << 32) | ver);
    size_t len = (size_t)(h % 48);
    fill_bytes(h, v, len);
    if (len >= 8) {
        memcpy(v, &id, 4);
        memcpy(v + 4, &ver, 4);
    }
    return len;
}

typedef struct {
    uint32_t n;      /* ids 0 .. n-1 */
    uint32_t *ver;   /* 0: absent, else the version it holds */
    uint32_t *order; /* ids in key order */
    uint8_t (*keys)[16];
    uint8_t *klen;
} model;

static model *sort_model;

static int order_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return key_cmp(sort_model->keys[x], sort_model->klen[x], sort_model->keys[y],
                   sort_model->klen[y]);
}

static void model_init(model *m, uint32_t n)
{
    m->n = n;
    m->ver = calloc(n, sizeof *m->ver);
    m->order = malloc(n * sizeof *m->order);
    m->keys = malloc(n * sizeof *m->keys);
    m->klen = malloc(n);
    ck_assert(m->ver && m->order && m->keys && m->klen);
    for (uint32_t id = 0; id < n; id++) {
        m->klen[id] = (uint8_t)model_key(id, m->keys[id]);
        m->order[id] = id;
    }
    sort_model = m;
    qsort(m->order, n, sizeof *m->order, order_cmp);
    for (uint32_t i = 1; i < n; i++) /* distinct keys */
        ck_assert_int_lt(order_cmp(&m->order[i - 1], &m->order[i]), 0);
}

static void model_free(model *m)
{
    free(m->ver);
    free(m->order);
    free(m->keys);
    free(m->klen);
}

/* The live ids in key order. */
static uint32_t *model_live(const model *m, const uint32_t *ver, uint32_t *count)
{
    uint32_t *live = malloc((m->n + 1) * sizeof *live), c = 0;
    ck_assert_ptr_nonnull(live);
    for (uint32_t i = 0; i < m->n; i++)
        if (ver[m->order[i]])
            live[c++] = m->order[i];
    *count = c;
    return live;
}

/* The index in live[] of the first key >= (k, kl); count when none. */
static uint32_t lower_bound(const model *m, const uint32_t *live, uint32_t count,
                            const uint8_t *k, size_t kl)
{
    uint32_t lo = 0, hi = count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (key_cmp(m->keys[live[mid]], m->klen[live[mid]], k, kl) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The iterator sits on live[i] with its right value. */
static void expect_at(const model *m, const uint32_t *ver, kv_iter *it, const uint32_t *live,
                      uint32_t i, const char *what)
{
    ck_assert_msg(kv_iter_valid(it), "%s: iterator ended before key id %u (status %s)", what,
                  live[i], kv_strerror(kv_iter_status(it)));
    uint32_t id = live[i];
    size_t kl, vl;
    const void *k = kv_iter_key(it, &kl), *v = kv_iter_value(it, &vl);
    uint8_t want[64];
    size_t wl = model_value(id, ver[id], want);
    ck_assert_msg(key_cmp(k, kl, m->keys[id], m->klen[id]) == 0,
                  "%s: iterator at a %zu-byte key, model at id %u", what, kl, id);
    ck_assert_msg(vl == wl && (wl == 0 || memcmp(v, want, wl) == 0),
                  "%s: id %u has a wrong value (%zu bytes, want %zu)", what, id, vl, wl);
}

static void expect_end(kv_iter *it, const char *what)
{
    ck_assert_msg(!kv_iter_valid(it), "%s: iterator goes on past the model's end", what);
    ck_assert_int_eq(kv_iter_status(it), KV_OK);
}

/* From live[i] (valid range [from, to) of live[]), `steps` moves, each
 * next or prev at random in runs of random length, as the model says:
 * stepping off either end leaves the iterator not valid, and the walk
 * ends there. */
static void random_walk(const model *m, const uint32_t *ver, kv_iter *it, const uint32_t *live,
                        uint32_t from, uint32_t to, uint32_t i, int steps, uint64_t *r,
                        const char *what)
{
    int fwd = 1;
    for (int s = 0; s < steps; s++) {
        if (rnd(r) % 3 == 0)
            fwd = !fwd; /* runs, so both single steps and long ones turn */
        if (fwd) {
            kv_iter_next(it);
            if (i + 1 >= to) {
                expect_end(it, what);
                return;
            }
            i++;
        } else {
            kv_iter_prev(it);
            if (i <= from) {
                expect_end(it, what);
                return;
            }
            i--;
        }
        expect_at(m, ver, it, live, i, what);
    }
}

/* Bounds [lo, hi) around a random stretch of the key space (either side
 * now and then unbounded): a scan each way, and a walk from a seek inside,
 * all inside the bounds; then the bounds are cleared. */
static void check_bounds(const model *m, const uint32_t *ver, kv_iter *it, const uint32_t *live,
                         uint32_t count, uint64_t *r)
{
    uint8_t lo[24], hi[24];
    uint32_t a = (uint32_t)(rnd(r) % m->n), b = (uint32_t)(rnd(r) % m->n);
    size_t ll = m->klen[a], hl = m->klen[b];
    memcpy(lo, m->keys[a], ll);
    memcpy(hi, m->keys[b], hl);
    if (key_cmp(lo, ll, hi, hl) > 0) {
        ck_assert_int_eq(kv_iter_set_bounds(it, lo, ll, hi, hl), KV_EINVAL);
        uint8_t t[24];
        size_t tl = ll;
        memcpy(t, lo, ll);
        memcpy(lo, hi, hl);
        ll = hl;
        memcpy(hi, t, tl);
        hl = tl;
    }
    uint32_t from = lower_bound(m, live, count, lo, ll);
    /* Short ranges mostly, so that scans stay cheap: hi is then the key
     * some live keys above lo. */
    if (from + 300 < count && rnd(r) % 4) {
        uint32_t to = from + (uint32_t)(rnd(r) % 300);
        hl = m->klen[live[to]];
        memcpy(hi, m->keys[live[to]], hl);
    }
    int no_lo = rnd(r) % 8 == 0, no_hi = !no_lo && rnd(r) % 8 == 0;
    if (no_lo)
        from = 0;
    uint32_t to = no_hi ? count : lower_bound(m, live, count, hi, hl);
    if (no_hi && to - from > 2000)
        return; /* too long a scan for every seek */
    ck_assert_int_eq(kv_iter_set_bounds(it, no_lo ? NULL : lo, ll, no_hi ? NULL : hi, hl), KV_OK);
    ck_assert_msg(!kv_iter_valid(it), "set_bounds leaves the iterator unpositioned");

    kv_iter_seek_first(it);
    for (uint32_t i = from; i < to; i++, kv_iter_next(it))
        expect_at(m, ver, it, live, i, "bounded forward scan");
    expect_end(it, "bounded forward scan");
    kv_iter_seek_last(it);
    for (uint32_t i = to; i-- > from; kv_iter_prev(it))
        expect_at(m, ver, it, live, i, "bounded backward scan");
    expect_end(it, "bounded backward scan");
    if (to > from) {
        uint32_t at = from + (uint32_t)(rnd(r) % (to - from));
        kv_iter_seek(it, m->keys[live[at]], m->klen[live[at]]);
        expect_at(m, ver, it, live, at, "bounded seek");
        random_walk(m, ver, it, live, from, to, at, 200, r, "bounded walk");
        /* A seek below the lower bound starts at it. */
        kv_iter_seek(it, "", 0);
        expect_at(m, ver, it, live, from, "seek below the lower bound");
    }
    ck_assert_int_eq(kv_iter_set_bounds(it, NULL, 0, NULL, 0), KV_OK);
}

/* Every get, a full scan forward (and backward when `backward`), and
 * `seeks` random seeks each walking 100 steps forward, then 10 back, then a
 * fresh seek walking 100 steps backward: all as the model says, as of
 * `snap` (NULL: now) or through the iterator `given` when not NULL. */
static void check_model(kv_db *db, const kv_snapshot *snap, kv_iter *given, const model *m,
                        const uint32_t *ver, int backward, int seeks, uint64_t seed)
{
    uint8_t want[64];
    if (!given) {
        for (uint32_t id = 0; id < m->n; id++) {
            void *got = NULL;
            size_t n = 0;
            int rc = kv_get_at(db, snap, m->keys[id], m->klen[id], &got, &n);
            if (!ver[id]) {
                ck_assert_msg(rc == KV_NOTFOUND, "id %u: deleted or never written, got %s", id,
                              kv_strerror(rc));
                continue;
            }
            ck_assert_msg(rc == KV_OK, "id %u (version %u): %s", id, ver[id], kv_strerror(rc));
            size_t wl = model_value(id, ver[id], want);
            ck_assert_msg(n == wl && (wl == 0 || memcmp(got, want, wl) == 0),
                          "id %u: wrong value (%zu bytes, want %zu of version %u)", id, n, wl,
                          ver[id]);
            kv_free(got);
        }
    }

    uint32_t count;
    uint32_t *live = model_live(m, ver, &count);
    kv_iter *it = given;
    if (!it)
        ck_assert_int_eq(kv_iter_new(db, snap, &it), KV_OK);

    kv_iter_seek_first(it);
    for (uint32_t i = 0; i < count; i++, kv_iter_next(it))
        expect_at(m, ver, it, live, i, "forward scan");
    expect_end(it, "forward scan");
    if (backward) {
        kv_iter_seek_last(it);
        for (uint32_t i = count; i-- > 0; kv_iter_prev(it))
            expect_at(m, ver, it, live, i, "backward scan");
        expect_end(it, "backward scan");
    }

    uint64_t r = seed;
    for (int s = 0; s < seeks; s++) {
        /* A key of the space (there or not), or one just past it. */
        uint8_t k[24];
        uint32_t id = (uint32_t)(rnd(&r) % m->n);
        size_t kl = m->klen[id];
        memcpy(k, m->keys[id], kl);
        if (rnd(&r) % 4 == 0)
            k[kl++] = (uint8_t)rnd(&r);
        uint32_t at = lower_bound(m, live, count, k, kl);

        kv_iter_seek(it, k, kl);
        uint32_t i = at;
        for (int step = 0; step < 100 && i < count; step++, i++) {
            expect_at(m, ver, it, live, i, "seek, next");
            if (step < 99 && i + 1 < count)
                kv_iter_next(it);
        }
        if (i == count) {
            if (at < count) /* we stopped on the last key */
                kv_iter_next(it);
            expect_end(it, "seek, next");
            continue;
        }
        /* Turn around for a few steps: i - 1 is where the iterator is. */
        i--;
        for (int step = 0; step < 10 && i > 0; step++) {
            kv_iter_prev(it);
            i--;
            expect_at(m, ver, it, live, i, "seek, next, then prev");
        }

        /* Next and prev in random alternation from the seek. */
        kv_iter_seek(it, k, kl);
        if (at < count) {
            expect_at(m, ver, it, live, at, "seek, random walk");
            random_walk(m, ver, it, live, 0, count, at, 40, &r, "seek, random walk");
        }
        if (s % 50 == 0)
            check_bounds(m, ver, it, live, count, &r);

        kv_iter_seek(it, k, kl);
        if (at == count) {
            expect_end(it, "seek past the end");
            kv_iter_seek_last(it);
        }
        i = at == count ? count - 1 : at;
        if (count == 0) {
            expect_end(it, "empty");
            continue;
        }
        expect_at(m, ver, it, live, i, "seek, prev");
        for (int step = 0; step < 100; step++) {
            kv_iter_prev(it);
            if (i == 0) {
                expect_end(it, "seek, prev past the first key");
                break;
            }
            i--;
            expect_at(m, ver, it, live, i, "seek, prev");
        }
    }
    if (!given)
        kv_iter_free(it);
    free(live);
}

/* ---- random operations -------------------------------------------------------------- */

/* Applies `ops` random operations (60% puts, 25% deletes, 15% batches of
 * 2..16 of either) to the store and the model; returns operations done
 * (batch entries count one each). Versions come from *next_ver. */
static uint64_t random_ops(kv_db *db, model *m, uint64_t ops, uint64_t *rng, uint32_t *next_ver)
{
    uint8_t v[64];
    kv_batch *b = NULL;
    ck_assert_int_eq(kv_batch_new(&b), KV_OK);
    uint64_t done = 0;
    while (done < ops) {
        uint64_t r = rnd(rng);
        unsigned kind = (unsigned)(r % 100);
        uint32_t id = (uint32_t)((r >> 8) % m->n);
        if (kind < 60) {
            uint32_t ver = (*next_ver)++;
            int rc = kv_put(db, m->keys[id], m->klen[id], v, model_value(id, ver, v));
            ck_assert_msg(rc == KV_OK, "put: %s", kv_strerror(rc));
            m->ver[id] = ver;
            done++;
        } else if (kind < 85) {
            int rc = kv_delete(db, m->keys[id], m->klen[id]);
            ck_assert_msg(rc == KV_OK, "delete: %s", kv_strerror(rc));
            m->ver[id] = 0;
            done++;
        } else {
            unsigned n = 2 + (unsigned)((r >> 40) % 15);
            uint32_t ids[16], vers[16];
            kv_batch_clear(b);
            for (unsigned j = 0; j < n; j++) {
                uint64_t x = rnd(rng);
                ids[j] = (uint32_t)(x % m->n);
                if ((x >> 40) % 10 < 7) {
                    vers[j] = (*next_ver)++;
                    ck_assert_int_eq(kv_batch_put(b, m->keys[ids[j]], m->klen[ids[j]], v,
                                                  model_value(ids[j], vers[j], v)),
                                     KV_OK);
                } else {
                    vers[j] = 0;
                    ck_assert_int_eq(kv_batch_delete(b, m->keys[ids[j]], m->klen[ids[j]]),
                                     KV_OK);
                }
            }
            int rc = kv_write(db, b);
            ck_assert_msg(rc == KV_OK, "write: %s", kv_strerror(rc));
            for (unsigned j = 0; j < n; j++) /* in order: a later entry wins */
                m->ver[ids[j]] = vers[j];
            done += n;
        }
    }
    kv_batch_free(b);
    return done;
}

/* Small memtables and tables, so that a few megabytes make many levels. */
static void small_options(kv_options *o)
{
    kv_options_init(o);
    o->write_buffer_size = (size_t)128 << 10;
    o->target_file_size = (size_t)64 << 10;
    o->max_bytes_for_level_base = (size_t)256 << 10;
    o->block_cache_size = (size_t)32 << 20; /* the data fits: checks run from memory */
}

/* ---- model check: 1,000,000 operations over 200,000 keys ------------------------------ */

#define MODEL_KEYS 200000u
#define MODEL_OPS 1000000u /* KV_MODEL_OPS in the environment overrides (sanitizer builds) */
#define MODEL_CHECK_EVERY 50000u

static void idle_wait(kv_db *db, struct kv_stats *s);

START_TEST(model_million_ops)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_options o;
    small_options(&o);
    kv_db *db = open_db(p, &o);
    model m;
    model_init(&m, MODEL_KEYS);

    uint64_t rng = 0xC0FFEE, done = 0;
    uint32_t next_ver = 1;
    int reopened = 0;
    uint64_t write_ms = 0, check_ms = 0;
    const char *env = getenv("KV_MODEL_OPS");
    const uint64_t ops = env && strtoull(env, NULL, 10) >= MODEL_CHECK_EVERY
                             ? strtoull(env, NULL, 10) : MODEL_OPS;
    while (done < ops) {
        uint64_t t0 = now_ms();
        done += random_ops(db, &m, MODEL_CHECK_EVERY - done % MODEL_CHECK_EVERY, &rng,
                           &next_ver);
        uint64_t t1 = now_ms();
        check_model(db, NULL, NULL, &m, m.ver, 0, 1000, done);
        write_ms += t1 - t0;
        check_ms += now_ms() - t1;
        if (!reopened && done >= ops / 2) {
            /* Half way: close with a full memtable; the log brings it back. */
            close_db(db);
            db = open_db(p, &o);
            check_model(db, NULL, NULL, &m, m.ver, 1, 1000, done + 1);
            reopened = 1;
        }
    }
    /* The counts are this handle's (since the reopen), and how many
     * compactions the writes outran depends on the machine: wait for the
     * background to settle, then ask only that compactions ran, down to
     * the levels below the base. */
    struct kv_stats s;
    idle_wait(db, &s);
    fprintf(stderr, "model: %llu ms writing, %llu ms checking\n", (unsigned long long)write_ms,
            (unsigned long long)check_ms);
    fprintf(stderr, "model: %llu ops, %llu flushes, %llu compactions, %llu tables (",
            (unsigned long long)done, (unsigned long long)s.flushes,
            (unsigned long long)s.compactions, (unsigned long long)s.tables);
    unsigned deeper = 0; /* levels below 0 that hold tables */
    for (int l = 0; l < 7; l++) {
        fprintf(stderr, "%sL%d %llu", l ? " " : "", l, (unsigned long long)s.level_tables[l]);
        deeper += l > 0 && s.level_tables[l] > 0;
    }
    fprintf(stderr, "), base L%llu, write amplification %.2f\n",
            (unsigned long long)s.base_level, s.write_amplification);
    ck_assert_uint_gt(s.flushes, 50);
    ck_assert_uint_gt(s.compactions, 5);
    ck_assert_uint_gt(s.compaction_written_bytes, 0);
    ck_assert_uint_ge(deeper, 2); /* compactions below the base level ran too */
    ck_assert(s.write_amplification > 1.0);
    close_db(db);

    db = open_db(p, &o);
    check_model(db, NULL, NULL, &m, m.ver, 1, 1000, 7);
    /* Down to the bottom: tombstones go, the answers stay. */
    compact_all(db);
    get_stats(db, &s);
    ck_assert_uint_eq(s.l0_tables, 0);
    check_model(db, NULL, NULL, &m, m.ver, 1, 1000, 8);
    close_db(db);
    model_free(&m);
}
END_TEST

/* ---- snapshots through 200,000 operations ----------------------------------------------- */

START_TEST(snapshots_outlive_compactions)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_options o;
    small_options(&o);
    kv_db *db = open_db(p, &o);
    model m;
    model_init(&m, 50000);
    uint64_t rng = 0x5AA5;
    uint32_t next_ver = 1;
    random_ops(db, &m, 100000, &rng, &next_ver);

    /* A snapshot, and an iterator made at "now" at the same moment. */
    uint32_t *then = malloc(m.n * sizeof *then);
    ck_assert_ptr_nonnull(then);
    memcpy(then, m.ver, m.n * sizeof *then);
    kv_snapshot *snap = NULL;
    kv_iter *pinned = NULL;
    ck_assert_int_eq(kv_snapshot_new(db, &snap), KV_OK);
    ck_assert_int_eq(kv_iter_new(db, NULL, &pinned), KV_OK);
    struct kv_stats before, after;
    get_stats(db, &before);

    for (int round = 0; round < 4; round++) {
        random_ops(db, &m, 50000, &rng, &next_ver);
        compact_all(db);
    }
    get_stats(db, &after);
    ck_assert_uint_ge(after.compactions, before.compactions + 4);

    check_model(db, snap, NULL, &m, then, 1, 500, 1);   /* kv_get_at, an iterator at snap */
    check_model(db, NULL, pinned, &m, then, 1, 500, 2); /* the iterator made then */
    check_model(db, NULL, NULL, &m, m.ver, 0, 200, 3);  /* and now */
    kv_iter_free(pinned);
    kv_snapshot_release(db, snap);

    /* Released: compaction may drop what it kept; "now" is unchanged. */
    compact_all(db);
    check_model(db, NULL, NULL, &m, m.ver, 1, 200, 4);

    /* Two snapshots at once, the older one taken before a delete-everything. */
    kv_snapshot *s1 = NULL, *s2 = NULL;
    memcpy(then, m.ver, m.n * sizeof *then);
    ck_assert_int_eq(kv_snapshot_new(db, &s1), KV_OK);
    for (uint32_t id = 0; id < m.n; id++) {
        ck_assert_int_eq(kv_delete(db, m.keys[id], m.klen[id]), KV_OK);
        m.ver[id] = 0;
    }
    ck_assert_int_eq(kv_snapshot_new(db, &s2), KV_OK);
    compact_all(db);
    check_model(db, s1, NULL, &m, then, 1, 200, 5);
    check_model(db, s2, NULL, &m, m.ver, 1, 20, 6);
    kv_snapshot_release(db, s1);
    kv_snapshot_release(db, s2);
    compact_all(db);
    get_stats(db, &after);
    ck_assert_uint_eq(after.tables, 0); /* all deleted, nothing to keep */
    free(then);
    model_free(&m);
    close_db(db);
}
END_TEST

/* ---- shape after a full compaction ------------------------------------------------------- */

#define SHAPE_KEYS 1000000u

static void shape_key(uint32_t i, uint8_t k[16])
{
    uint64_t a = splitmix(0x5A4E0000ull + i), b = splitmix(a);
    memcpy(k, &a, 8);
    memcpy(k + 8, &b, 8);
}

START_TEST(shape_after_full_compaction)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_options o;
    kv_options_init(&o);
    o.compression = KV_COMPRESSION_NONE;
    o.target_file_size = (size_t)8 << 20; /* more than ten tables of these keys */
    kv_db *db = open_db(p, &o);
    uint8_t k[17], v[100];
    for (uint32_t i = 0; i < SHAPE_KEYS; i++) {
        shape_key(i, k);
        fill_bytes(i, v, sizeof v);
        int rc = kv_put(db, k, 16, v, sizeof v);
        ck_assert_msg(rc == KV_OK, "put %u: %s", i, kv_strerror(rc));
    }
    compact_all(db);

    struct kv_stats s;
    get_stats(db, &s);
    ck_assert_uint_eq(s.l0_tables, 0);
    kv_table_stats *t = NULL;
    size_t n = 0;
    ck_assert_int_eq(kv_table_stats_get(db, &t, &n), KV_OK);
    ck_assert_uint_eq(n, s.tables);
    ck_assert_uint_gt(n, 10);
    uint64_t entries = 0, filter_bytes = 0;
    unsigned nonempty = 0, last_level = 0;
    for (size_t i = 0; i < n; i++) {
        ck_assert_uint_ge(t[i].level, 1);
        ck_assert_uint_le(t[i].level, 6);
        ck_assert_msg(t[i].filter_keys == t[i].entries,
                      "table %llu: filter holds %llu keys, the table %llu entries",
                      (unsigned long long)t[i].number, (unsigned long long)t[i].filter_keys,
                      (unsigned long long)t[i].entries);
        ck_assert_int_le(key_cmp(t[i].smallest, t[i].smallest_len, t[i].largest,
                                 t[i].largest_len),
                         0);
        if (i == 0 || t[i].level != t[i - 1].level) {
            ck_assert(i == 0 || t[i].level > t[i - 1].level); /* listed level by level */
            nonempty++;
        } else {
            /* Same level: sorted and disjoint. */
            ck_assert_msg(key_cmp(t[i - 1].largest, t[i - 1].largest_len, t[i].smallest,
                                  t[i].smallest_len) < 0,
                          "level %u: tables %llu and %llu overlap", t[i].level,
                          (unsigned long long)t[i - 1].number, (unsigned long long)t[i].number);
        }
        ck_assert_uint_eq(s.level_tables[t[i].level] > 0, 1);
        entries += t[i].entries;
        filter_bytes += t[i].filter_bytes;
        last_level = t[i].level;
    }
    ck_assert_uint_eq(entries, SHAPE_KEYS); /* one version each, no tombstones */
    ck_assert_uint_eq(s.filter_keys, SHAPE_KEYS);
    ck_assert_uint_eq(s.filter_bytes, filter_bytes);
    fprintf(stderr, "shape: %zu tables in %u level(s), deepest L%u, %.2f filter bytes/key, "
            "write amplification %.2f\n", n, nonempty, last_level,
            (double)filter_bytes / SHAPE_KEYS, s.write_amplification);
    kv_free(t);

    /* Present keys are found; absent ones (17 bytes: no 16-byte key is one)
     * probe at most one table per non-empty level, each get on its own. */
    for (uint32_t i = 0; i < SHAPE_KEYS; i += 97) {
        shape_key(i, k);
        fill_bytes(i, v, sizeof v);
        void *got = NULL;
        size_t vl = 0;
        ck_assert_int_eq(kv_get(db, k, 16, &got, &vl), KV_OK);
        ck_assert(vl == sizeof v && memcmp(got, v, vl) == 0);
        kv_free(got);
    }
    struct kv_stats a, b;
    uint64_t probes = 0;
    for (uint32_t i = 0; i < 5000; i++) {
        fill_bytes(0xAB5E47ull + i, k, 17);
        get_stats(db, &a);
        void *got = NULL;
        size_t vl = 0;
        ck_assert_int_eq(kv_get(db, k, 17, &got, &vl), KV_NOTFOUND);
        get_stats(db, &b);
        uint64_t probed = b.tables_probed - a.tables_probed;
        ck_assert_msg(probed <= nonempty, "absent get %u probed %llu tables in %u levels", i,
                      (unsigned long long)probed, nonempty);
        probes += probed;
    }
    fprintf(stderr, "shape: %.3f tables probed per absent get\n", probes / 5000.0);
    close_db(db);
}
END_TEST

/* ---- table search on key words that tie ------------------------------------------------
 * A get finds a deeper level's table by comparing 8-byte words taken past
 * the common prefix of the level's smallest and largest keys, and whole
 * keys when words tie. Keys "0" and "b" around 20,000 keys that share 21
 * bytes make every table's word tie: the whole-key path decides each get. */

static size_t tie_key(uint32_t i, char *k)
{
    return (size_t)sprintf(k, "a%s%06u", "xxxxxxxxxxxxxxxxxxxx", i);
}

START_TEST(table_search_on_tied_words)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_options o;
    small_options(&o);
    kv_db *db = open_db(p, &o);
    char k[64];
    uint8_t v[100];
    ck_assert_int_eq(kv_put(db, "0", 1, "first", 5), KV_OK);
    ck_assert_int_eq(kv_put(db, "b", 1, "last", 4), KV_OK);
    for (uint32_t i = 0; i < 40000; i += 2) {
        fill_bytes(i, v, sizeof v);
        ck_assert_int_eq(kv_put(db, k, tie_key(i, k), v, sizeof v), KV_OK);
    }
    compact_all(db);
    struct kv_stats a, b;
    get_stats(db, &a);
    ck_assert_uint_eq(a.l0_tables, 0);
    ck_assert_uint_gt(a.tables, 10);
    for (uint32_t i = 0; i < 40000; i++) {
        void *got = NULL;
        size_t vl = 0, kl = tie_key(i, k);
        int rc = kv_get(db, k, kl, &got, &vl);
        if (i % 2) {
            ck_assert_msg(rc == KV_NOTFOUND, "absent key %u: %s", i, kv_strerror(rc));
        } else {
            ck_assert_msg(rc == KV_OK, "key %u: %s", i, kv_strerror(rc));
            fill_bytes(i, v, sizeof v);
            ck_assert(vl == sizeof v && memcmp(got, v, vl) == 0);
        }
        kv_free(got);
        k[kl] = '\0'; /* the key's successor: absent */
        ck_assert_int_eq(kv_get(db, k, kl + 1, &got, &vl), KV_NOTFOUND);
    }
    get_stats(db, &b);
    /* Every get probed the one table whose range holds it, or none. */
    ck_assert_uint_le(b.tables_probed - a.tables_probed, 80000);
    void *got = NULL;
    size_t vl = 0;
    ck_assert_int_eq(kv_get(db, "0", 1, &got, &vl), KV_OK);
    ck_assert(vl == 5 && memcmp(got, "first", 5) == 0);
    kv_free(got);
    ck_assert_int_eq(kv_get(db, "b", 1, &got, &vl), KV_OK);
    ck_assert(vl == 4 && memcmp(got, "last", 4) == 0);
    kv_free(got);
    ck_assert_int_eq(kv_get(db, "a", 1, &got, &vl), KV_NOTFOUND);
    ck_assert_int_eq(kv_get(db, "c", 1, &got, &vl), KV_NOTFOUND);
    close_db(db);
}
END_TEST

/* ---- space: overwrites and deletes give their bytes back --------------------------------- */

#define SPACE_KEYS 100000u

static void space_load(kv_db *db, uint32_t round)
{
    uint8_t k[16], v[100];
    for (uint32_t i = 0; i < SPACE_KEYS; i++) {
        shape_key(i, k);
        fill_bytes(((uint64_t)round << 32) | i, v, sizeof v);
        int rc = kv_put(db, k, 16, v, sizeof v);
        ck_assert_msg(rc == KV_OK, "put: %s", kv_strerror(rc));
    }
}

START_TEST(space_reclaimed)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_options o;
    kv_options_init(&o);
    o.write_buffer_size = (size_t)1 << 20;
    o.target_file_size = (size_t)256 << 10;
    o.max_bytes_for_level_base = (size_t)1 << 20;
    kv_db *db = open_db(p, &o);
    space_load(db, 0);
    compact_all(db);
    uint64_t first = dir_bytes(p);
    struct kv_stats s;
    get_stats(db, &s);
    uint64_t first_tables = s.table_bytes;

    for (uint32_t round = 1; round <= 5; round++)
        space_load(db, round);
    compact_all(db);
    uint64_t after_overwrites = dir_bytes(p);
    get_stats(db, &s);
    fprintf(stderr, "space: %llu bytes after one load (tables %llu), %llu after 5 overwrites "
            "(tables %llu)\n", (unsigned long long)first, (unsigned long long)first_tables,
            (unsigned long long)after_overwrites, (unsigned long long)s.table_bytes);
    ck_assert_uint_le(after_overwrites, first + first / 2);
    ck_assert_uint_le(s.table_bytes, first_tables + first_tables / 10);
    /* The newest values are the ones kept. */
    uint8_t k[16], v[100];
    for (uint32_t i = 0; i < SPACE_KEYS; i += 101) {
        shape_key(i, k);
        fill_bytes(((uint64_t)5 << 32) | i, v, sizeof v);
        void *got = NULL;
        size_t vl = 0;
        ck_assert_int_eq(kv_get(db, k, 16, &got, &vl), KV_OK);
        ck_assert(vl == sizeof v && memcmp(got, v, vl) == 0);
        kv_free(got);
    }

    for (uint32_t i = 0; i < SPACE_KEYS; i++) {
        shape_key(i, k);
        ck_assert_int_eq(kv_delete(db, k, 16), KV_OK);
    }
    compact_all(db);
    uint64_t after_deletes = dir_bytes(p);
    get_stats(db, &s);
    fprintf(stderr, "space: %llu bytes after deleting every key (tables %llu in %llu files)\n",
            (unsigned long long)after_deletes, (unsigned long long)s.table_bytes,
            (unsigned long long)s.tables);
    ck_assert_uint_le(s.table_bytes, 3 * o.target_file_size);
    ck_assert_uint_lt(after_deletes, first / 4);
    kv_iter *it = NULL;
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    kv_iter_seek_first(it);
    ck_assert(!kv_iter_valid(it));
    ck_assert_int_eq(kv_iter_status(it), KV_OK);
    kv_iter_free(it);
    close_db(db);
}
END_TEST

/* ---- SIGKILL while compactions run ---------------------------------------------------------- */

#define CRASH_BASE 20000u
#define CRASH_CYCLES 20

static size_t base_key(uint32_t id, char *k)
{
    return (size_t)sprintf(k, "base%06u", id);
}

static size_t new_key(int cycle, uint64_t i, char *k)
{
    return (size_t)sprintf(k, "new%02d-%07llu", cycle, (unsigned long long)i);
}

/* Version 0 is the value loaded before the first cycle; version
 * (cycle << 32 | i + 1) the one written by operation i of that cycle. */
static size_t crash_value(uint32_t id, uint64_t ver, uint8_t *v)
{
    uint64_t h = splitmix(ver * 1000003u + id);
    size_t len = 24 + (size_t)(h % 200);
    fill_bytes(h, v, len);
    memcpy(v, &id, 4);
    memcpy(v + 4, &ver, 8);
    return len;
}

static uint32_t crash_target(int cycle, uint64_t i)
{
    return (uint32_t)(splitmix(((uint64_t)cycle << 32) | i) % CRASH_BASE);
}

static void crash_options(kv_options *o)
{
    kv_options_init(o);
    o->write_buffer_size = (size_t)64 << 10;
    o->target_file_size = (size_t)64 << 10;
    o->max_bytes_for_level_base = (size_t)256 << 10;
    o->l0_compaction_trigger = 2;
}

static atomic_int child_failed;

/* In the child: compacts everything, again and again, until killed. */
static void *compactor(void *arg)
{
    kv_db *db = arg;
    for (;;)
        if (kv_compact_range(db, NULL, 0, NULL, 0) != KV_OK)
            atomic_store(&child_failed, 1);
    return NULL;
}

static int write_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The child: batches (one base key overwritten, one new key) acknowledged
 * on fd as 8-byte indexes, while another thread compacts. Exit codes only. */
static void crash_child(const char *p, int cycle, int fd)
{
    kv_options o;
    crash_options(&o);
    kv_db *db = NULL;
    if (kv_open(p, &o, &db) != KV_OK)
        _exit(2);
    pthread_t t;
    if (pthread_create(&t, NULL, compactor, db) != 0)
        _exit(3);
    kv_batch *b = NULL;
    if (kv_batch_new(&b) != KV_OK)
        _exit(4);
    char k[32];
    uint8_t v[256];
    for (uint64_t i = 0;; i++) {
        uint32_t id = crash_target(cycle, i);
        uint64_t ver = ((uint64_t)cycle << 32) | (i + 1);
        kv_batch_clear(b);
        if (kv_batch_put(b, k, base_key(id, k), v, crash_value(id, ver, v)) != KV_OK ||
            kv_batch_put(b, k, new_key(cycle, i, k), v, crash_value(0, ver, v)) != KV_OK)
            _exit(5);
        if (kv_write(db, b) != KV_OK || atomic_load(&child_failed))
            _exit(6);
        if (write_all(fd, &i, 8) != 0)
            _exit(7);
    }
}


/* Acknowledgements from the child: 8-byte indexes 0, 1, 2, ... in order. */
struct acks {
    int fd, eof;
    uint8_t part[8];
    size_t have;
    uint64_t count;
};

/* Reads acknowledgements until `until` (now_ms), or to the end of the pipe
 * when until is 0; fails on one out of order. */
static void read_acks(struct acks *a, uint64_t until)
{
    struct pollfd pf = {.fd = a->fd, .events = POLLIN};
    while (!a->eof) {
        if (until) {
            uint64_t t = now_ms();
            if (t >= until || poll(&pf, 1, (int)(until - t)) <= 0)
                break;
        }
        uint8_t buf[4096];
        ssize_t n = read(a->fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            a->eof = 1;
            break;
        }
        for (ssize_t j = 0; j < n; j++) {
            a->part[a->have++] = buf[j];
            if (a->have == 8) {
                uint64_t x;
                memcpy(&x, a->part, 8);
                ck_assert_uint_eq(x, a->count);
                a->count++;
                a->have = 0;
            }
        }
    }
}

static int str_ends(const char *s, const char *end)
{
    size_t a = strlen(s), b = strlen(end);
    return a >= b && strcmp(s + a - b, end) == 0;
}

/* After open: every table file is a live table, no temporary is left, and
 * at most the live log and one more remain. */
static void expect_no_orphans(kv_db *db, const char *p)
{
    kv_table_stats *t = NULL;
    size_t n = 0;
    ck_assert_int_eq(kv_table_stats_get(db, &t, &n), KV_OK);
    DIR *d = opendir(p);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    size_t ssts = 0, logs = 0;
    while ((e = readdir(d)) != NULL) {
        ck_assert_msg(!strstr(e->d_name, ".tmp"), "temporary file %s left after open",
                      e->d_name);
        if (str_ends(e->d_name, ".log"))
            logs++;
        if (!str_ends(e->d_name, ".sst"))
            continue;
        unsigned long long num = strtoull(e->d_name, NULL, 10);
        int live = 0;
        for (size_t i = 0; i < n; i++)
            live |= t[i].number == num;
        ck_assert_msg(live, "%s is on disk but not in the manifest", e->d_name);
        ssts++;
    }
    closedir(d);
    ck_assert_uint_eq(ssts, n); /* and every live table is on disk */
    ck_assert_uint_le(logs, 2);
    kv_free(t);
}

static void expect_crash_value(kv_db *db, const char *k, size_t kl, uint32_t id, uint64_t ver,
                               const char *what)
{
    uint8_t want[256];
    size_t wl = crash_value(id, ver, want);
    void *got = NULL;
    size_t n = 0;
    int rc = kv_get(db, k, kl, &got, &n);
    ck_assert_msg(rc == KV_OK, "%s %.*s: %s", what, (int)kl, k, kv_strerror(rc));
    ck_assert_msg(n == wl && memcmp(got, want, wl) == 0,
                  "%s %.*s: not the value of version %llx", what, (int)kl, k,
                  (unsigned long long)ver);
    kv_free(got);
}

START_TEST(crash_during_compaction)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_options o;
    crash_options(&o);
    kv_db *db = open_db(p, &o);
    char k[32];
    uint8_t v[256];
    for (uint32_t id = 0; id < CRASH_BASE; id++)
        ck_assert_int_eq(kv_put(db, k, base_key(id, k), v, crash_value(id, 0, v)), KV_OK);
    close_db(db);

    uint64_t *ver = calloc(CRASH_BASE, sizeof *ver);
    uint64_t acked_at[CRASH_CYCLES];
    ck_assert_ptr_nonnull(ver);
    uint64_t rng = 0xC7A5;
    uint64_t leveled = 0;
    for (int cycle = 0; cycle < CRASH_CYCLES; cycle++) {
        int fds[2];
        ck_assert_int_eq(pipe(fds), 0);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            close(fds[0]);
            crash_child(p, cycle, fds[1]);
            _exit(1);
        }
        close(fds[1]);
        /* Let it write until 500 batches are in (at most 5 s from its
         * first), then kill it a random 0..300 ms later: the compactor
         * never rests, so the kill lands in a compaction more often than
         * not. The first batch may wait long: a kill can leave level 0 at
         * l0_stop_trigger (flushes go on while kv_compact_range holds the
         * jobs back), and the child's first write then stalls until a job
         * brings it down, which took 4.8 s beside two busy tests. */
        struct acks a = {.fd = fds[0]};
        uint64_t give_up = now_ms() + 60000;
        while (a.count == 0 && !a.eof && now_ms() < give_up)
            read_acks(&a, now_ms() + 50);
        give_up = now_ms() + 5000;
        while (a.count < 500 && !a.eof && now_ms() < give_up)
            read_acks(&a, now_ms() + 50);
        read_acks(&a, now_ms() + rnd(&rng) % 300);
        kill(pid, SIGKILL);
        int st;
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_msg(WIFSIGNALED(st), "child exited by itself (code %d)",
                      WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        read_acks(&a, 0);
        close(fds[0]);
        uint64_t acked = a.count;
        ck_assert_uint_gt(acked, 0);

        /* Open with compaction out of reach, so that no background work
         * adds files while the directory is listed. */
        kv_options quiet = o;
        quiet.l0_compaction_trigger = quiet.l0_slowdown_trigger = quiet.l0_stop_trigger = 1 << 20;
        quiet.max_bytes_for_level_base = (size_t)1 << 40;
        db = open_db(p, &quiet);
        expect_no_orphans(db, p);
        /* Every acknowledged batch is there; the one in flight wholly or
         * not at all; none after it. */
        for (uint64_t i = 0; i < acked; i++) {
            uint64_t vv = ((uint64_t)cycle << 32) | (i + 1);
            ver[crash_target(cycle, i)] = vv;
            if (i % 7 == 0 || i + 100 > acked)
                expect_crash_value(db, k, new_key(cycle, i, k), 0, vv, "acknowledged");
        }
        void *got = NULL;
        size_t n = 0;
        int rc = kv_get(db, k, new_key(cycle, acked, k), &got, &n);
        if (rc == KV_OK) {
            kv_free(got);
            ver[crash_target(cycle, acked)] = ((uint64_t)cycle << 32) | (acked + 1);
            acked++;
        } else
            ck_assert_int_eq(rc, KV_NOTFOUND);
        ck_assert_int_eq(kv_get(db, k, new_key(cycle, acked + 1, k), &got, &n), KV_NOTFOUND);
        acked_at[cycle] = acked;
        for (uint32_t id = 0; id < CRASH_BASE; id++)
            expect_crash_value(db, k, base_key(id, k), id, ver[id], "base key");
        for (int c = 0; c < cycle; c++) /* earlier cycles' first and last */
            expect_crash_value(db, k, new_key(c, acked_at[c] - 1, k), 0,
                               ((uint64_t)c << 32) | acked_at[c], "earlier cycle");
        struct kv_stats s;
        get_stats(db, &s);
        leveled += s.tables - s.l0_tables;
        close_db(db);
    }
    ck_assert_uint_gt(leveled, 0); /* compactions moved data below level 0 */
    free(ver);
}
END_TEST

/* ---- writers, readers and an iterator while compactions run ------------------------------ */

#define TH_KEYS 4000u
#define TH_WRITES 20000u

/* Write s of a key (s = 1, 2, ...) is a delete when s % 5 == 0, else a put
 * of th_value(id, s). started[id] is set before a write, acked[id] after
 * it returns: a reader that saw acked = lo before its read and started = hi
 * after it may see any write in [lo, hi], and nothing else. */
struct th_shared {
    kv_db *db;
    _Atomic uint32_t started[TH_KEYS], acked[TH_KEYS];
    atomic_int writers_left;
    atomic_int failed;
    atomic_int walks; /* th_walker's iterators, done */
    char why[256];
    pthread_mutex_t why_lock;
};

static void th_fail(struct th_shared *sh, const char *what, uint32_t id, uint64_t a, uint64_t b)
{
    pthread_mutex_lock(&sh->why_lock);
    if (!atomic_load(&sh->failed))
        snprintf(sh->why, sizeof sh->why, "%s (key %u: %llu, %llu)", what, id,
                 (unsigned long long)a, (unsigned long long)b);
    atomic_store(&sh->failed, 1);
    pthread_mutex_unlock(&sh->why_lock);
}

static size_t th_key(uint32_t id, char *k)
{
    return (size_t)sprintf(k, "t%05u", id);
}

static size_t th_value(uint32_t id, uint32_t s, uint8_t *v)
{
    uint64_t h = splitmix(((uint64_t)id << 32) | s);
    size_t len = 8 + (size_t)(h % 40);
    memcpy(v, &id, 4);
    memcpy(v + 4, &s, 4);
    fill_bytes(h, v + 8, len - 8);
    return len;
}

/* The write a value is, or 0 when it is no value of `id` at all. */
static uint32_t th_parse(uint32_t id, const void *v, size_t vl)
{
    uint8_t want[64];
    uint32_t got_id, s;
    if (vl < 8)
        return 0;
    memcpy(&got_id, v, 4);
    memcpy(&s, (const uint8_t *)v + 4, 4);
    if (got_id != id || s == 0 || s % 5 == 0)
        return 0;
    size_t wl = th_value(id, s, want);
    return wl == vl && memcmp(v, want, vl) == 0 ? s : 0;
}

/* Absent is allowed when the key had no write by lo, or a delete in [lo, hi]. */
static int th_absent_ok(uint32_t lo, uint32_t hi)
{
    return lo == 0 || lo % 5 == 0 || hi / 5 * 5 >= lo;
}

struct th_arg {
    struct th_shared *sh;
    int n;
};

static void *th_writer(void *p)
{
    struct th_arg *a = p;
    struct th_shared *sh = a->sh;
    uint64_t r = 0x3A17u + (uint64_t)a->n;
    char k[16];
    uint8_t v[64];
    for (uint32_t i = 0; i < TH_WRITES && !atomic_load(&sh->failed); i++) {
        uint32_t id = (uint32_t)(rnd(&r) % (TH_KEYS / 2)) * 2 + (uint32_t)a->n;
        uint32_t s = atomic_load(&sh->started[id]) + 1;
        atomic_store(&sh->started[id], s);
        int rc = s % 5 == 0 ? kv_delete(sh->db, k, th_key(id, k))
                            : kv_put(sh->db, k, th_key(id, k), v, th_value(id, s, v));
        if (rc != KV_OK)
            th_fail(sh, "write failed", id, s, (uint64_t)-rc);
        atomic_store(&sh->acked[id], s);
    }
    atomic_fetch_sub(&sh->writers_left, 1);
    return NULL;
}

static void *th_reader(void *p)
{
    struct th_arg *a = p;
    struct th_shared *sh = a->sh;
    uint64_t r = 0x4EADu + (uint64_t)a->n;
    char k[16];
    while (atomic_load(&sh->writers_left) > 0 && !atomic_load(&sh->failed)) {
        uint32_t id = (uint32_t)(rnd(&r) % TH_KEYS);
        uint32_t lo = atomic_load(&sh->acked[id]);
        void *got = NULL;
        size_t n = 0;
        int rc = kv_get(sh->db, k, th_key(id, k), &got, &n);
        uint32_t hi = atomic_load(&sh->started[id]);
        if (rc == KV_OK) {
            uint32_t s = th_parse(id, got, n);
            if (s == 0 || s < lo || s > hi)
                th_fail(sh, "get saw a value out of its window", id, s, lo);
            kv_free(got);
        } else if (rc != KV_NOTFOUND)
            th_fail(sh, "get failed", id, (uint64_t)-rc, 0);
        else if (!th_absent_ok(lo, hi))
            th_fail(sh, "get lost an acknowledged write", id, lo, hi);
    }
    return NULL;
}

/* Whole scans, forward and backward by turns, each checked against what
 * was acknowledged before the iterator was made and begun after the scan. */
static void *th_scanner(void *p)
{
    struct th_arg *a = p;
    struct th_shared *sh = a->sh;
    uint32_t *lo = malloc(TH_KEYS * sizeof *lo);
    uint8_t *seen = malloc(TH_KEYS);
    if (!lo || !seen) {
        th_fail(sh, "out of memory", 0, 0, 0);
        return NULL;
    }
    for (int scan = 0; atomic_load(&sh->writers_left) > 0 && !atomic_load(&sh->failed);
         scan++) {
        for (uint32_t id = 0; id < TH_KEYS; id++)
            lo[id] = atomic_load(&sh->acked[id]);
        memset(seen, 0, TH_KEYS);
        kv_iter *it = NULL;
        if (kv_iter_new(sh->db, NULL, &it) != KV_OK) {
            th_fail(sh, "kv_iter_new failed", 0, 0, 0);
            break;
        }
        int back = scan % 2;
        long prev = back ? (long)TH_KEYS : -1;
        for (back ? kv_iter_seek_last(it) : kv_iter_seek_first(it); kv_iter_valid(it);
             back ? kv_iter_prev(it) : kv_iter_next(it)) {
            size_t kl, vl;
            const char *k = kv_iter_key(it, &kl);
            const void *v = kv_iter_value(it, &vl);
            unsigned long id = TH_KEYS; /* "t%05u": anything else is out of order */
            if (kl == 6 && k[0] == 't') {
                char digits[6];
                memcpy(digits, k + 1, 5);
                digits[5] = 0;
                id = strtoul(digits, NULL, 10);
            }
            if (id >= TH_KEYS || (back ? (long)id >= prev : (long)id <= prev)) {
                th_fail(sh, "scan out of order", (uint32_t)id, (uint64_t)prev, 0);
                break;
            }
            prev = (long)id;
            seen[id] = 1;
            uint32_t s = th_parse((uint32_t)id, v, vl);
            if (s == 0 || s < lo[id] || s > atomic_load(&sh->started[id]))
                th_fail(sh, "scan saw a value out of its window", (uint32_t)id, s, lo[id]);
        }
        if (kv_iter_status(it) != KV_OK)
            th_fail(sh, "scan stopped on an error", 0, (uint64_t)-kv_iter_status(it), 0);
        kv_iter_free(it);
        for (uint32_t id = 0; id < TH_KEYS; id++)
            if (!seen[id] && !th_absent_ok(lo[id], atomic_load(&sh->started[id])))
                th_fail(sh, "scan missed an acknowledged key", id, lo[id], 0);
    }
    free(lo);
    free(seen);
    return NULL;
}

static void *th_compactor(void *p)
{
    struct th_arg *a = p;
    struct th_shared *sh = a->sh;
    while (atomic_load(&sh->writers_left) > 0 && !atomic_load(&sh->failed)) {
        int rc = kv_compact_range(sh->db, NULL, 0, NULL, 0);
        if (rc != KV_OK)
            th_fail(sh, "kv_compact_range failed", 0, (uint64_t)-rc, 0);
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* Opens a database at p under o into sh, runs the six threads fn (the
 * first two are the writers: each gets its half, i % 2) until they end, and
 * asserts none found a fault. */
static void th_run(struct th_shared *sh, const char *p, const kv_options *o,
                   void *(*const fn[6])(void *))
{
    memset(sh, 0, sizeof *sh);
    pthread_mutex_init(&sh->why_lock, NULL);
    sh->db = open_db(p, o);
    atomic_store(&sh->writers_left, 2);
    struct th_arg args[6];
    pthread_t t[6];
    for (int i = 0; i < 6; i++) {
        args[i] = (struct th_arg){sh, i % 2};
        ck_assert_int_eq(pthread_create(&t[i], NULL, fn[i], &args[i]), 0);
    }
    for (int i = 0; i < 6; i++)
        pthread_join(t[i], NULL);
    ck_assert_msg(!atomic_load(&sh->failed), "%s", sh->why);
}

START_TEST(threads_while_compacting)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_options o;
    crash_options(&o);
    static struct th_shared sh;
    static void *(*const fn[6])(void *) = {th_writer, th_writer,  th_reader,
                                           th_reader, th_scanner, th_compactor};
    th_run(&sh, p, &o, fn);

    struct kv_stats s;
    get_stats(sh.db, &s);
    fprintf(stderr, "threads: %llu gets, %llu compactions, %llu flushes\n",
            (unsigned long long)s.gets, (unsigned long long)s.compactions,
            (unsigned long long)s.flushes);
    ck_assert_uint_gt(s.compactions, 0);
    /* At rest, the store is exactly the acknowledged writes. */
    for (int round = 0; round < 2; round++) {
        for (uint32_t id = 0; id < TH_KEYS; id++) {
            char k[16];
            uint32_t last = atomic_load(&sh.acked[id]);
            void *got = NULL;
            size_t n = 0;
            int rc = kv_get(sh.db, k, th_key(id, k), &got, &n);
            if (last == 0 || last % 5 == 0) {
                ck_assert_int_eq(rc, KV_NOTFOUND);
            } else {
                ck_assert_int_eq(rc, KV_OK);
                ck_assert_uint_eq(th_parse(id, got, n), last);
                kv_free(got);
            }
        }
        close_db(sh.db);
        sh.db = open_db(p, &o);
    }
    close_db(sh.db);
    pthread_mutex_destroy(&sh.why_lock);
}
END_TEST

/* ---- walks and bounded scans while writes, flushes and compactions run ------------------- */

/* The id of a "t%05u" key, TH_KEYS for anything else. */
static uint32_t th_id(const char *k, size_t kl)
{
    if (kl != 6 || k[0] != 't')
        return TH_KEYS;
    char digits[6];
    memcpy(digits, k + 1, 5);
    digits[5] = 0;
    unsigned long id = strtoul(digits, NULL, 10);
    return id < TH_KEYS ? (uint32_t)id : TH_KEYS;
}

/* Walks an iterator next and prev in random alternation, inside random
 * bounds every other time, while the others write, flush and compact. The
 * iterator's view is fixed when it is made, so: keys strictly increase
 * going forward and decrease going back, stay inside the bounds, each
 * value lies in its key's window as of the iterator's making, and a key
 * seen again has the same value as before. */
static void *th_walker(void *p)
{
    struct th_arg *a = p;
    struct th_shared *sh = a->sh;
    uint32_t *lo = malloc(TH_KEYS * sizeof *lo), *got = malloc(TH_KEYS * sizeof *got);
    if (!lo || !got) {
        th_fail(sh, "out of memory", 0, 0, 0);
        free(lo);
        free(got);
        return NULL;
    }
    uint64_t r = 0x5CA7u + (uint64_t)a->n;
    for (int walk = 0; atomic_load(&sh->writers_left) > 0 && !atomic_load(&sh->failed);
         walk++) {
        for (uint32_t id = 0; id < TH_KEYS; id++)
            lo[id] = atomic_load(&sh->acked[id]);
        memset(got, 0, TH_KEYS * sizeof *got);
        kv_iter *it = NULL;
        if (kv_iter_new(sh->db, NULL, &it) != KV_OK) {
            th_fail(sh, "kv_iter_new failed", 0, 0, 0);
            break;
        }
        uint32_t from = 0, to = TH_KEYS;
        char k[16], k2[16];
        if (walk % 2) {
            from = (uint32_t)(rnd(&r) % TH_KEYS);
            to = from + 1 + (uint32_t)(rnd(&r) % 400);
            if (to > TH_KEYS)
                to = TH_KEYS;
            size_t kl = th_key(from, k), k2l = th_key(to, k2);
            if (kv_iter_set_bounds(it, k, kl, k2, k2l) != KV_OK)
                th_fail(sh, "kv_iter_set_bounds failed", from, to, 0);
        }
        uint32_t start = from + (uint32_t)(rnd(&r) % (to - from));
        kv_iter_seek(it, k, th_key(start, k));
        long prev = -1;
        int fwd = 1;
        for (int step = 0; step < 3000 && !atomic_load(&sh->failed); step++) {
            if (!kv_iter_valid(it)) {
                if (kv_iter_status(it) != KV_OK) {
                    th_fail(sh, "walk stopped on an error", 0,
                            (uint64_t)-kv_iter_status(it), 0);
                    break;
                }
                fwd ? kv_iter_seek_last(it) : kv_iter_seek_first(it); /* from the other end */
                prev = -1;
                continue;
            }
            size_t kl, vl;
            const char *key = kv_iter_key(it, &kl);
            const void *v = kv_iter_value(it, &vl);
            uint32_t id = th_id(key, kl);
            if (id < from || id >= to) {
                th_fail(sh, "walk left its bounds", id, from, to);
                break;
            }
            if (prev >= 0 && (fwd ? (long)id <= prev : (long)id >= prev)) {
                th_fail(sh, "walk out of order", id, (uint64_t)prev, (uint64_t)fwd);
                break;
            }
            prev = (long)id;
            uint32_t s = th_parse(id, v, vl);
            if (s == 0 || s < lo[id] || s > atomic_load(&sh->started[id]))
                th_fail(sh, "walk saw a value out of its window", id, s, lo[id]);
            if (got[id] && got[id] != s)
                th_fail(sh, "walk saw a key change under its iterator", id, got[id], s);
            got[id] = s;
            if (rnd(&r) % 3 == 0)
                fwd = !fwd;
            fwd ? kv_iter_next(it) : kv_iter_prev(it);
        }
        kv_iter_free(it);
        atomic_fetch_add(&sh->walks, 1);
    }
    free(lo);
    free(got);
    return NULL;
}

static void *th_flusher(void *p)
{
    struct th_arg *a = p;
    struct th_shared *sh = a->sh;
    while (atomic_load(&sh->writers_left) > 0 && !atomic_load(&sh->failed)) {
        int rc = kv_flush(sh->db);
        if (rc != KV_OK)
            th_fail(sh, "kv_flush failed", 0, (uint64_t)-rc, 0);
        struct timespec ts = {0, 5 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

START_TEST(scans_while_writing)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_options o;
    crash_options(&o);
    static struct th_shared sh;
    static void *(*const fn[6])(void *) = {th_writer, th_writer,  th_walker,
                                           th_walker, th_flusher, th_compactor};
    th_run(&sh, p, &o, fn);
    struct kv_stats s;
    get_stats(sh.db, &s);
    ck_assert_uint_gt(s.compactions, 0);
    ck_assert_uint_gt(s.flushes, 0);
    fprintf(stderr, "scans: %d walks, %llu flushes, %llu compactions\n", atomic_load(&sh.walks),
            (unsigned long long)s.flushes, (unsigned long long)s.compactions);
    ck_assert_int_gt(atomic_load(&sh.walks), 2);
    close_db(sh.db);
    pthread_mutex_destroy(&sh.why_lock);
}
END_TEST

/* ---- the table-file budget: many more tables than open files --------------------------- */

/* Entries of /proc/self/fd: the process's open descriptors, less the one
 * this count opens to read them. */
static long fd_count(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    long n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        n += de->d_name[0] != '.';
    closedir(d);
    return n - 1;
}

/* Counts the descriptors every millisecond while a test runs: the most seen. */
struct fd_sampler {
    pthread_t t;
    atomic_int stop;
    atomic_long most;
    atomic_long samples;
};

static void *fd_sample(void *p)
{
    struct fd_sampler *fs = p;
    while (!atomic_load(&fs->stop)) {
        long n = fd_count();
        if (n > atomic_load(&fs->most))
            atomic_store(&fs->most, n);
        atomic_fetch_add(&fs->samples, 1);
        struct timespec ts = {0, 1000000L};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

#define FB_VALUE 1000
#define FB_KEYS 140000u /* about 65 entries per 64 KiB table: over 2,100 tables */

static size_t fb_key(uint32_t id, char *k)
{
    return (size_t)sprintf(k, "b%08u", id);
}

/* Version `ver` of key id's value: FB_VALUE bytes that start with both. */
static void fb_value(uint32_t id, uint32_t ver, uint8_t *v)
{
    memcpy(v, &id, 4);
    memcpy(v + 4, &ver, 4);
    fill_bytes(splitmix(((uint64_t)id << 32) | ver), v + 8, FB_VALUE - 8);
}

static void fb_options(kv_options *o, int max_open_files)
{
    kv_options_init(o);
    o->max_open_files = max_open_files;
    o->write_buffer_size = (size_t)64 << 10;
    o->target_file_size = (size_t)64 << 10;
    /* Level 1 holds them all: the keys, written in order, are rewritten
     * once, from level 0 to level 1 (no level-1 table overlaps them). */
    o->max_bytes_for_level_base = (size_t)256 << 20;
    o->compression = KV_COMPRESSION_NONE; /* random values would not shrink */
    o->min_blob_size = KV_BLOB_NEVER;     /* the values make the tables many */
}

/* kv.h, max_open_files: "a database of any size opens and runs with the
 * options that wrote it", and holds at most max_open_files table files and
 * KV_EXTRA_FILES other descriptors. More than 2,000 tables of 64 KiB under
 * a budget of 64, the descriptors counted every millisecond throughout:
 * while they are written, flushed and compacted, reopened, every key read
 * back (in an order that jumps from table to table) and scanned. */
START_TEST(many_tables_few_files)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_options o;
    fb_options(&o, 64);
    long base = fd_count();
    ck_assert_int_ge(base, 0);
    static struct fd_sampler fs;
    memset(&fs, 0, sizeof fs);
    atomic_store(&fs.most, base);
    ck_assert_int_eq(pthread_create(&fs.t, NULL, fd_sample, &fs), 0);
    uint64_t t0 = now_ms();
    kv_db *db = open_db(p, &o);
    char k[16];
    uint8_t *v = malloc(FB_VALUE);
    for (uint32_t id = 0; id < FB_KEYS; id++) {
        fb_value(id, 1, v);
        ck_assert_int_eq(kv_put(db, k, fb_key(id, k), v, FB_VALUE), KV_OK);
    }
    ck_assert_int_eq(kv_flush(db), KV_OK);
    struct kv_stats s;
    get_stats(db, &s);
    uint64_t t1 = now_ms();
    fprintf(stderr, "many_tables: %llu tables (%llu in level 0), %llu compactions, %llu ms to "
            "write; %llu table files open, %llu evictions\n", (unsigned long long)s.tables,
            (unsigned long long)s.l0_tables, (unsigned long long)s.compactions,
            (unsigned long long)(t1 - t0), (unsigned long long)s.table_files_open,
            (unsigned long long)s.table_file_evictions);
    ck_assert_uint_gt(s.tables, 2000);
    ck_assert_uint_le(s.table_files_open, 64);
    ck_assert_uint_gt(s.table_file_evictions, 0);
    close_db(db);

    db = open_db(p, &o); /* the same options */
    uint8_t *got_want = malloc(FB_VALUE);
    /* Every key once, 7919 apart (prime to the count): each read in another
     * table than the last. */
    for (uint32_t i = 0, id = 0; i < FB_KEYS; i++, id = (id + 7919) % FB_KEYS) {
        void *got = NULL;
        size_t n = 0;
        int rc = kv_get(db, k, fb_key(id, k), &got, &n);
        ck_assert_msg(rc == KV_OK, "get %u: %s (%s)", id, kv_strerror(rc), kv_error_text());
        fb_value(id, 1, got_want);
        ck_assert_uint_eq(n, FB_VALUE);
        ck_assert_mem_eq(got, got_want, FB_VALUE);
        kv_free(got);
    }
    kv_iter *it = NULL;
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    uint32_t id = 0;
    for (kv_iter_seek_first(it); kv_iter_valid(it); kv_iter_next(it), id++) {
        size_t kl, vl;
        const void *key = kv_iter_key(it, &kl), *val = kv_iter_value(it, &vl);
        ck_assert_uint_lt(id, FB_KEYS);
        ck_assert_uint_eq(kl, fb_key(id, k));
        ck_assert_mem_eq(key, k, kl);
        fb_value(id, 1, got_want);
        ck_assert_uint_eq(vl, FB_VALUE);
        ck_assert_mem_eq(val, got_want, FB_VALUE);
    }
    ck_assert_int_eq(kv_iter_status(it), KV_OK);
    ck_assert_uint_eq(id, FB_KEYS);
    kv_iter_free(it);
    get_stats(db, &s);
    ck_assert_uint_gt(s.tables, 2000);
    ck_assert_uint_gt(s.table_file_reopens, FB_KEYS / 2);
    ck_assert_uint_le(s.table_files_open, 64);
    close_db(db);
    atomic_store(&fs.stop, 1);
    pthread_join(fs.t, NULL);
    long most = atomic_load(&fs.most);
    fprintf(stderr, "many_tables: %llu ms to reopen and read back; %ld descriptors at most, "
            "%ld before kv_open, %ld samples; %llu reopens\n",
            (unsigned long long)(now_ms() - t1), most, base, atomic_load(&fs.samples),
            (unsigned long long)s.table_file_reopens);
    ck_assert_int_gt(atomic_load(&fs.samples), 100);
    /* Past 2 background jobs, each writes a table and a blob file more
     * (doc/database.md, "Open table files"). */
    int jobs = o.max_background_jobs;
    ck_assert_int_le(most - base, 64 + KV_EXTRA_FILES + 2 * (jobs > 2 ? jobs - 2 : 0));
    free(v);
    free(got_want);
}
END_TEST

/* Versions of FB_KEYS_T keys, written by one thread while four read them,
 * one scans and compactions run, under a budget of 16 files for about 60
 * tables: files close and open again under the readers all the time. The
 * windows of th_shared: a read sees a version in [acked before, started
 * after]. */
#define FB_KEYS_T 3000u
#define FB_WRITES 6000u

static uint32_t fb_parse(uint32_t id, const void *v, size_t vl)
{
    uint8_t want[FB_VALUE];
    uint32_t got_id, ver;
    if (vl != FB_VALUE)
        return 0;
    memcpy(&got_id, v, 4);
    memcpy(&ver, (const uint8_t *)v + 4, 4);
    if (got_id != id || ver == 0)
        return 0;
    fb_value(id, ver, want);
    return memcmp(v, want, FB_VALUE) == 0 ? ver : 0;
}

static void *fb_writer(void *p)
{
    struct th_arg *a = p;
    struct th_shared *sh = a->sh;
    uint64_t r = 0xF11E5u;
    char k[16];
    uint8_t v[FB_VALUE];
    for (uint32_t i = 0; i < FB_WRITES && !atomic_load(&sh->failed); i++) {
        uint32_t id = (uint32_t)(rnd(&r) % FB_KEYS_T);
        uint32_t ver = atomic_load(&sh->started[id]) + 1;
        atomic_store(&sh->started[id], ver);
        fb_value(id, ver, v);
        int rc = kv_put(sh->db, k, fb_key(id, k), v, FB_VALUE);
        if (rc != KV_OK)
            th_fail(sh, "put failed", id, ver, (uint64_t)-rc);
        atomic_store(&sh->acked[id], ver);
    }
    atomic_fetch_sub(&sh->writers_left, 1);
    return NULL;
}

static void *fb_reader(void *p)
{
    struct th_arg *a = p;
    struct th_shared *sh = a->sh;
    uint64_t r = 0xBEAD0u + (uint64_t)a->n;
    char k[16];
    while (atomic_load(&sh->writers_left) > 0 && !atomic_load(&sh->failed)) {
        uint32_t id = (uint32_t)(rnd(&r) % FB_KEYS_T);
        uint32_t lo = atomic_load(&sh->acked[id]);
        void *got = NULL;
        size_t n = 0;
        int rc = kv_get(sh->db, k, fb_key(id, k), &got, &n);
        uint32_t hi = atomic_load(&sh->started[id]);
        if (rc != KV_OK) {
            th_fail(sh, "get failed", id, (uint64_t)-rc, 0);
            break;
        }
        uint32_t ver = fb_parse(id, got, n);
        if (ver == 0 || ver < lo || ver > hi)
            th_fail(sh, "get saw a value out of its window", id, ver, lo);
        kv_free(got);
    }
    return NULL;
}

/* Scans of 100 keys from a random one: in order, each in its window (the
 * iterator reads as of its making: acked is read before). */
static void *fb_scanner(void *p)
{
    struct th_arg *a = p;
    struct th_shared *sh = a->sh;
    uint64_t r = 0x5CA7u;
    char k[16];
    uint32_t lo[100];
    while (atomic_load(&sh->writers_left) > 0 && !atomic_load(&sh->failed)) {
        uint32_t first = (uint32_t)(rnd(&r) % FB_KEYS_T);
        for (uint32_t i = 0; i < 100 && first + i < FB_KEYS_T; i++)
            lo[i] = atomic_load(&sh->acked[first + i]);
        kv_iter *it = NULL;
        if (kv_iter_new(sh->db, NULL, &it) != KV_OK) {
            th_fail(sh, "kv_iter_new failed", 0, 0, 0);
            break;
        }
        uint32_t id = first;
        kv_iter_seek(it, k, fb_key(id, k));
        for (; id < first + 100 && id < FB_KEYS_T && kv_iter_valid(it); id++, kv_iter_next(it)) {
            size_t kl, vl;
            const void *key = kv_iter_key(it, &kl), *val = kv_iter_value(it, &vl);
            if (kl != fb_key(id, k) || memcmp(key, k, kl) != 0) {
                th_fail(sh, "scan out of order", id, 0, 0);
                break;
            }
            uint32_t ver = fb_parse(id, val, vl);
            if (ver == 0 || ver < lo[id - first] || ver > atomic_load(&sh->started[id]))
                th_fail(sh, "scan saw a value out of its window", id, ver, lo[id - first]);
        }
        if (kv_iter_status(it) != KV_OK)
            th_fail(sh, "scan stopped on an error", 0, (uint64_t)-kv_iter_status(it), 0);
        kv_iter_free(it);
    }
    return NULL;
}

START_TEST(threads_under_a_small_file_budget)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_options o;
    fb_options(&o, 16);
    o.max_bytes_for_level_base = (size_t)256 << 10; /* three levels, more compactions */
    static struct th_shared sh;
    memset(&sh, 0, sizeof sh);
    pthread_mutex_init(&sh.why_lock, NULL);
    sh.db = open_db(p, &o);
    char k[16];
    uint8_t v[FB_VALUE];
    for (uint32_t id = 0; id < FB_KEYS_T; id++) {
        fb_value(id, 1, v);
        ck_assert_int_eq(kv_put(sh.db, k, fb_key(id, k), v, FB_VALUE), KV_OK);
        atomic_store(&sh.started[id], 1);
        atomic_store(&sh.acked[id], 1);
    }
    ck_assert_int_eq(kv_flush(sh.db), KV_OK);
    struct kv_stats s0, s;
    get_stats(sh.db, &s0);
    ck_assert_uint_gt(s0.tables, 40);
    atomic_store(&sh.writers_left, 1);
    struct th_arg args[6];
    pthread_t t[6];
    void *(*fn[6])(void *) = {fb_writer, fb_reader, fb_reader, fb_reader, fb_reader,
                              fb_scanner};
    for (int i = 0; i < 6; i++) {
        args[i] = (struct th_arg){&sh, i};
        ck_assert_int_eq(pthread_create(&t[i], NULL, fn[i], &args[i]), 0);
    }
    for (int i = 0; i < 6; i++)
        pthread_join(t[i], NULL);
    ck_assert_msg(!atomic_load(&sh.failed), "%s", sh.why);
    get_stats(sh.db, &s);
    fprintf(stderr, "small budget: %llu tables, %llu gets, %llu compactions, %llu reopens, "
            "%llu evictions\n", (unsigned long long)s.tables, (unsigned long long)s.gets,
            (unsigned long long)s.compactions, (unsigned long long)s.table_file_reopens,
            (unsigned long long)s.table_file_evictions);
    ck_assert_uint_gt(s.compactions, s0.compactions);
    ck_assert_uint_gt(s.table_file_reopens, s0.table_file_reopens);
    /* At rest, and after a reopen: the last version of every key. */
    for (int round = 0; round < 2; round++) {
        for (uint32_t id = 0; id < FB_KEYS_T; id++) {
            void *got = NULL;
            size_t n = 0;
            ck_assert_int_eq(kv_get(sh.db, k, fb_key(id, k), &got, &n), KV_OK);
            ck_assert_uint_eq(fb_parse(id, got, n), atomic_load(&sh.acked[id]));
            kv_free(got);
        }
        close_db(sh.db);
        sh.db = round ? NULL : open_db(p, &o);
    }
    pthread_mutex_destroy(&sh.why_lock);
}
END_TEST

/* ---- idle compaction (kv_options.idle_compaction_ms) ------------------------------------ */

/* Keys 0 .. IDLE_KEYS - 1; round r of idle_round writes keys [400 r,
 * 400 r + 1000) and flushes them to one level-0 table, so that the tables
 * overlap; round 2 deletes every seventh key of its range instead. */
#define IDLE_KEYS 1800
#define IDLE_ROUNDS 3

static kv_options idle_options(int ms)
{
    kv_options o;
    kv_options_init(&o);
    o.idle_compaction_ms = ms;
    /* No level-0 compaction by table count: only an idle one. */
    o.l0_compaction_trigger = o.l0_slowdown_trigger = o.l0_stop_trigger = 100;
    return o;
}

static size_t idle_key(int i, char *k)
{
    return (size_t)snprintf(k, 16, "idle%05d", i);
}

static size_t idle_value(int i, int round, char *v)
{
    return (size_t)snprintf(v, 32, "value-%d-of-round-%d", i, round);
}

static void idle_round(kv_db *db, int round)
{
    for (int i = 400 * round; i < 400 * round + 1000; i++) {
        char k[16], v[32];
        size_t kl = idle_key(i, k);
        if (round == 2 && i % 7 == 0)
            ck_assert_int_eq(kv_delete(db, k, kl), KV_OK);
        else
            ck_assert_int_eq(kv_put(db, k, kl, v, idle_value(i, round, v)), KV_OK);
    }
    ck_assert_int_eq(kv_flush(db), KV_OK);
}

/* Every key as the rounds left it. */
static void idle_check(kv_db *db, int rounds)
{
    for (int i = 0; i < IDLE_KEYS; i++) {
        int last = -1;
        for (int r = 0; r < rounds; r++)
            if (i >= 400 * r && i < 400 * r + 1000)
                last = r;
        char k[16], want[32];
        size_t kl = idle_key(i, k);
        void *v = NULL;
        size_t vl = 0;
        int rc = kv_get(db, k, kl, &v, &vl);
        if (last < 0 || (last == 2 && i % 7 == 0)) {
            ck_assert_msg(rc == KV_NOTFOUND, "%s: %s, want KV_NOTFOUND", k, kv_strerror(rc));
        } else {
            size_t wl = idle_value(i, last, want);
            ck_assert_msg(rc == KV_OK && vl == wl && memcmp(v, want, wl) == 0,
                          "%s: %s %.*s, want %s", k, kv_strerror(rc),
                          rc == KV_OK ? (int)vl : 0, rc == KV_OK ? (char *)v : "", want);
        }
        kv_free(v);
    }
}

/* Polls kv_stats until compaction_pending and compaction_running are both
 * 0 (kvbench's waitforcompaction), for at most a minute. */
static void idle_wait(kv_db *db, struct kv_stats *s)
{
    uint64_t start = now_ms();
    for (;;) {
        get_stats(db, s);
        if (!s->compaction_pending && !s->compaction_running)
            return;
        ck_assert_msg(now_ms() - start < 60000,
                      "still pending %llu, running %llu, %llu level-0 tables after 60 s",
                      (unsigned long long)s->compaction_pending,
                      (unsigned long long)s->compaction_running,
                      (unsigned long long)s->level_tables[0]);
        struct timespec ts = {0, 2000000L};
        nanosleep(&ts, NULL);
    }
}

/* A burst of writes, then none: level 0 goes down into level 1 without
 * reaching its trigger, compaction_pending says so until it has, and every
 * key reads the same before and after a reopen. */
START_TEST(idle_merges_level0_down)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_options o = idle_options(50);
    kv_db *db = open_db(p, &o);
    for (int r = 0; r < IDLE_ROUNDS; r++)
        idle_round(db, r);
    struct kv_stats s;
    idle_wait(db, &s);
    ck_assert_uint_eq(s.level_tables[0], 0);
    ck_assert_uint_gt(s.level_tables[s.base_level], 0);
    ck_assert_uint_ge(s.idle_compactions, 1);
    ck_assert_uint_ge(s.compactions, s.idle_compactions);
    idle_check(db, IDLE_ROUNDS);
    char *text = NULL;
    ck_assert_int_eq(kv_metrics_text(db, &text), KV_OK);
    char line[64];
    snprintf(line, sizeof line, "\nkv_idle_compactions_total %llu\n",
             (unsigned long long)s.idle_compactions);
    ck_assert_msg(strstr(text, line) != NULL, "no \"%s\" in the metrics", line + 1);
    kv_free(text);
    close_db(db);

    db = open_db(p, &o);
    get_stats(db, &s);
    ck_assert_uint_eq(s.level_tables[0], 0);
    ck_assert_uint_gt(s.level_tables[s.base_level], 0);
    idle_check(db, IDLE_ROUNDS);
    close_db(db);
}
END_TEST

/* idle_compaction_ms 0: level 0 stays as the flushes left it, and nothing
 * is pending. Holds however slow the machine: nothing would merge it. */
START_TEST(idle_zero_never_merges)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_options o = idle_options(0);
    kv_db *db = open_db(p, &o);
    for (int r = 0; r < IDLE_ROUNDS; r++)
        idle_round(db, r);
    struct timespec ts = {0, 300000000L};
    nanosleep(&ts, NULL);
    struct kv_stats s;
    get_stats(db, &s);
    ck_assert_uint_eq(s.level_tables[0], IDLE_ROUNDS);
    ck_assert_uint_eq(s.compaction_pending, 0);
    ck_assert_uint_eq(s.idle_compactions, 0);
    idle_check(db, IDLE_ROUNDS);
    close_db(db);
}
END_TEST

/* A version-7 caller's struct ends before idle_compaction_ms: kv_open
 * reads no further, and the field takes its default, 1000 ms (not the 0
 * written past the struct, which would never merge). */
START_TEST(idle_options_version_7)
{
    kv_options o;
    kv_options_init(&o);
    ck_assert_uint_ge(o.version, 8);
    ck_assert_int_eq(o.idle_compaction_ms, 1000);
    char p[600];
    test_path(p, sizeof p, "db");
    o = idle_options(0); /* past the version-7 struct: not read */
    o.version = 7;
    kv_db *db = open_db(p, &o);
    idle_round(db, 0);
    idle_round(db, 1);
    struct kv_stats s;
    idle_wait(db, &s);
    ck_assert_uint_eq(s.level_tables[0], 0);
    ck_assert_uint_ge(s.idle_compactions, 1);
    idle_check(db, 2);
    close_db(db);
}
END_TEST

/* 0 .. 86400000: outside, KV_EINVAL naming the option. */
START_TEST(idle_options_range)
{
    char p[600];
    test_path(p, sizeof p, "db");
    static const int bad[] = {-1, 86400001, -86400000};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kv_options o = idle_options(bad[i]);
        kv_db *db = (kv_db *)&o;
        ck_assert_int_eq(kv_open(p, &o, &db), KV_EINVAL);
        ck_assert_ptr_null(db);
        ck_assert_ptr_nonnull(strstr(kv_error_text(), "idle_compaction_ms"));
    }
    static const int good[] = {0, 1, 86400000};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        kv_options o = idle_options(good[i]);
        close_db(open_db(p, &o));
    }
}
END_TEST

/* ---- the suite: one tcase per ctest test (CK_RUN_CASE) ------------------------------------ */

/* kv_compact_range over part of the key space, many times, on level-0
 * tables that overlap one another, checked against a model after each.
 * A bounded range used to move a newer level-0 table down while an older
 * one with the same key (but outside the range) stayed in level 0, which
 * is searched first, so kv_get answered with the older value. */
START_TEST(partial_ranges_keep_newest)
{
    enum { KEYS = 24, TRIALS = 60 };
    uint64_t rng = 0xC0FFEE;
    for (int trial = 0; trial < TRIALS; trial++) {
        char p[600], name[32];
        snprintf(name, sizeof name, "db%d", trial);
        test_path(p, sizeof p, name);
        kv_options o;
        kv_options_init(&o);
        o.l0_compaction_trigger = 64; /* only the calls below compact */
        o.l0_slowdown_trigger = o.l0_stop_trigger = 64;
        o.compression = KV_COMPRESSION_NONE;
        kv_db *db = open_db(p, &o);
        int want_ver[KEYS]; /* version of each key, -1: absent */
        for (int i = 0; i < KEYS; i++)
            want_ver[i] = -1;
        int ver = 0;
        for (int round = 0; round < 6; round++) {
            int tables = 1 + (int)(rnd(&rng) % 4);
            for (int t = 0; t < tables; t++) {
                /* A table over a random run of keys, some deleted. */
                int from = (int)(rnd(&rng) % KEYS), to = from + (int)(rnd(&rng) % (KEYS - from));
                for (int i = from; i <= to; i++) {
                    if (rnd(&rng) % 3 == 0)
                        continue;
                    char k[8], v[16];
                    snprintf(k, sizeof k, "k%02d", i);
                    ver++;
                    if (rnd(&rng) % 5 == 0) {
                        ck_assert_int_eq(kv_delete(db, k, strlen(k)), KV_OK);
                        want_ver[i] = -1;
                    } else {
                        snprintf(v, sizeof v, "v%d", ver);
                        ck_assert_int_eq(kv_put(db, k, strlen(k), v, strlen(v)), KV_OK);
                        want_ver[i] = ver;
                    }
                }
                ck_assert_int_eq(kv_flush(db), KV_OK);
            }
            int lo = (int)(rnd(&rng) % (KEYS + 1)) - 1, hi = (int)(rnd(&rng) % (KEYS + 1)) - 1;
            char lk[8], hk[8];
            snprintf(lk, sizeof lk, "k%02d", lo);
            snprintf(hk, sizeof hk, "k%02d", hi);
            int rc = kv_compact_range(db, lo < 0 ? NULL : lk, lo < 0 ? 0 : strlen(lk),
                                      hi < 0 ? NULL : hk, hi < 0 ? 0 : strlen(hk));
            ck_assert_msg(rc == KV_OK, "kv_compact_range: %s", kv_strerror(rc));
            for (int i = 0; i < KEYS; i++) {
                char k[8], want[16];
                snprintf(k, sizeof k, "k%02d", i);
                void *v = NULL;
                size_t vl = 0;
                rc = kv_get(db, k, strlen(k), &v, &vl);
                if (want_ver[i] < 0) {
                    ck_assert_msg(rc == KV_NOTFOUND, "trial %d round %d: %s deleted but %s",
                                  trial, round, k, kv_strerror(rc));
                } else {
                    snprintf(want, sizeof want, "v%d", want_ver[i]);
                    ck_assert_msg(rc == KV_OK && vl == strlen(want) && memcmp(v, want, vl) == 0,
                                  "trial %d round %d (range %d..%d): %s is %.*s, want %s", trial,
                                  round, lo, hi, k, rc == KV_OK ? (int)vl : 0,
                                  rc == KV_OK ? (char *)v : "", want);
                }
                kv_free(v);
            }
        }
        close_db(db);
    }
}
END_TEST

/* kv_stats' compaction_pending and compaction_running: after heavy writes
 * with small tables and levels they fall to 0 (what kvbench's
 * waitforcompaction waits for), and then the tree is in the shape the
 * background thread keeps: level 0 under its trigger, each level within its
 * target; idle, they stay 0. */
/* Puts n 100-byte values under keys "key%08d" scattered over a million
 * (some repeat: later puts overwrite). */
static void put_scattered(kv_db *db, int n)
{
    uint8_t v[100];
    char k[32];
    for (int i = 0; i < n; i++) {
        fill_bytes((uint64_t)i, v, sizeof v);
        size_t kl = (size_t)snprintf(k, sizeof k, "key%08d", (int)(splitmix((uint64_t)i) % 1000000));
        ck_assert_int_eq(kv_put(db, k, kl, v, sizeof v), KV_OK);
    }
}

START_TEST(stats_say_when_compaction_is_done)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_options o;
    kv_options_init(&o);
    o.write_buffer_size = (size_t)64 << 10;
    o.target_file_size = (size_t)64 << 10;
    o.max_bytes_for_level_base = (uint64_t)256 << 10;
    kv_db *db = open_db(p, &o);
    put_scattered(db, 30000);
    struct kv_stats s;
    uint64_t start = now_ms(), busy_seen = 0;
    for (;;) {
        get_stats(db, &s);
        if (!s.compaction_pending && !s.compaction_running)
            break;
        busy_seen++;
        ck_assert_msg(now_ms() - start < 100000, "still pending %llu, running %llu after 100 s",
                      (unsigned long long)s.compaction_pending,
                      (unsigned long long)s.compaction_running);
        struct timespec ts = {0, 1000000L};
        nanosleep(&ts, NULL);
    }
    ck_assert_uint_lt(s.l0_tables, (uint64_t)o.l0_compaction_trigger);
    double target = (double)o.max_bytes_for_level_base;
    for (int l = 1; l < 6; l++, target *= 10)
        ck_assert_msg((double)s.level_bytes[l] <= target, "level %d: %llu bytes over %.0f", l,
                      (unsigned long long)s.level_bytes[l], target);
    ck_assert_uint_gt(s.compactions, 0);
    for (int i = 0; i < 20; i++) {
        get_stats(db, &s);
        ck_assert(!s.compaction_pending && !s.compaction_running);
    }
    fprintf(stderr, "compaction done %llu ms after the last put (%llu polls busy), %llu "
            "compactions\n", (unsigned long long)(now_ms() - start),
            (unsigned long long)busy_seen, (unsigned long long)s.compactions);
    close_db(db);
}
END_TEST


/* ---- bounds at block, table and level edges ------------------------------------------ */

#define EDGE_KEYS 30000u

static size_t edge_key(uint32_t id, char *k)
{
    return (size_t)snprintf(k, 16, "key%08u", id);
}

static uint32_t edge_id(const void *k, size_t len)
{
    char b[16];
    ck_assert_uint_lt(len, sizeof b);
    memcpy(b, k, len);
    b[len] = 0;
    return (uint32_t)strtoul(b + 3, NULL, 10);
}

/* Live ids in order, and the first index whose id is >= id. */
static size_t edge_lower(const uint32_t *live, size_t n, uint32_t id)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (live[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Bounded scans both ways over [lo, hi) (ids; UINT32_MAX: unbounded)
 * against the live ids; also a seek below the lower bound, and the steps
 * off both ends. */
static void edge_scan(kv_iter *it, const uint32_t *live, size_t n, uint32_t lo, uint32_t hi)
{
    char lk[16], hk[16];
    size_t ll = lo == UINT32_MAX ? 0 : edge_key(lo, lk), hl = hi == UINT32_MAX ? 0 : edge_key(hi, hk);
    ck_assert_int_eq(kv_iter_set_bounds(it, lo == UINT32_MAX ? NULL : lk, ll,
                                        hi == UINT32_MAX ? NULL : hk, hl),
                     KV_OK);
    size_t a = lo == UINT32_MAX ? 0 : edge_lower(live, n, lo);
    size_t b = hi == UINT32_MAX ? n : edge_lower(live, n, hi);
    if (b < a)
        b = a;
    size_t i = a;
    for (kv_iter_seek_first(it); kv_iter_valid(it); kv_iter_next(it), i++) {
        size_t kl;
        const void *k = kv_iter_key(it, &kl);
        ck_assert_msg(i < b, "[%u, %u): key %u past the upper bound", lo, hi, edge_id(k, kl));
        ck_assert_uint_eq(edge_id(k, kl), live[i]);
    }
    ck_assert_int_eq(kv_iter_status(it), KV_OK);
    ck_assert_msg(i == b, "[%u, %u): forward scan ended at %zu of %zu..%zu", lo, hi, i, a, b);
    i = b;
    for (kv_iter_seek_last(it); kv_iter_valid(it); kv_iter_prev(it)) {
        size_t kl;
        const void *k = kv_iter_key(it, &kl);
        ck_assert_msg(i > a, "[%u, %u): key %u below the lower bound", lo, hi, edge_id(k, kl));
        ck_assert_uint_eq(edge_id(k, kl), live[--i]);
    }
    ck_assert_int_eq(kv_iter_status(it), KV_OK);
    ck_assert_uint_eq(i, a);
    if (a < b) {
        /* a seek below the range starts at its first key; prev from there
         * leaves it, and so does next from its last */
        char z[16];
        kv_iter_seek(it, "a", 1);
        ck_assert(kv_iter_valid(it));
        size_t kl;
        const void *k = kv_iter_key(it, &kl);
        ck_assert_uint_eq(edge_id(k, kl), live[a]);
        kv_iter_prev(it);
        ck_assert(!kv_iter_valid(it));
        kv_iter_seek(it, z, edge_key(live[b - 1], z));
        ck_assert(kv_iter_valid(it));
        kv_iter_next(it);
        ck_assert(!kv_iter_valid(it));
    }
}

/* A tree of several levels, a level 0 and a memtable (with tombstones in
 * it), and bounds placed on the first and last keys of every table (and
 * one key either side), on every 31st key of a stretch (a block holds
 * about 30 entries here), and open at either end: every bounded scan,
 * forward and backward, yields exactly the model's keys in range. */
START_TEST(bounds_at_edges)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_options o;
    small_options(&o);
    o.compression = KV_COMPRESSION_NONE;
    kv_db *db = open_db(p, &o);
    uint8_t *alive = calloc(2 * EDGE_KEYS + 2, 1);
    char k[16];
    uint8_t v[100];
    for (uint32_t i = 0; i < EDGE_KEYS; i++) {
        uint32_t id = 2 * (uint32_t)(splitmix(i) % EDGE_KEYS); /* random order, repeats */
        fill_bytes(id, v, sizeof v);
        ck_assert_int_eq(kv_put(db, k, edge_key(id, k), v, sizeof v), KV_OK);
        alive[id] = 1;
    }
    ck_assert_int_eq(kv_flush(db), KV_OK);
    struct kv_stats s;
    do {
        get_stats(db, &s);
    } while (s.compaction_pending || s.compaction_running);
    /* a level-0 table of odd ids between the deeper tables' keys */
    for (uint32_t i = 0; i < 300; i++) {
        uint32_t id = 2 * (uint32_t)(splitmix(i + 55) % EDGE_KEYS) + 1;
        ck_assert_int_eq(kv_put(db, k, edge_key(id, k), "z", 1), KV_OK);
        alive[id] = 1;
    }
    ck_assert_int_eq(kv_flush(db), KV_OK);
    /* the memtable: more odd ids, and tombstones */
    for (uint32_t i = 0; i < 400; i++) {
        uint32_t id = 2 * (uint32_t)(splitmix(i + 77) % EDGE_KEYS) + 1;
        ck_assert_int_eq(kv_put(db, k, edge_key(id, k), "m", 1), KV_OK);
        alive[id] = 1;
        uint32_t gone = 2 * (uint32_t)(splitmix(i + 99) % EDGE_KEYS);
        ck_assert_int_eq(kv_delete(db, k, edge_key(gone, k)), KV_OK);
        alive[gone] = 0;
    }
    uint32_t *live = malloc((2 * EDGE_KEYS + 2) * sizeof *live);
    size_t n = 0;
    for (uint32_t id = 0; id < 2 * EDGE_KEYS + 2; id++)
        if (alive[id])
            live[n++] = id;

    /* the edges: every table's first and last keys, one either side */
    kv_table_stats *t;
    size_t nt;
    ck_assert_int_eq(kv_table_stats_get(db, &t, &nt), KV_OK);
    int levels = 0;
    for (size_t i = 0; i < nt; i++)
        levels |= 1 << t[i].level;
    ck_assert_msg((levels & 1) && __builtin_popcount((unsigned)levels >> 1) >= 2,
                  "level 0 and two deeper levels should hold tables: %x", (unsigned)levels);
    size_t ne = 0, cap = 6 * nt + 200;
    uint32_t *edge = malloc(cap * sizeof *edge);
    for (size_t i = 0; i < nt; i++) {
        uint32_t a = edge_id(t[i].smallest, t[i].smallest_len);
        uint32_t b = edge_id(t[i].largest, t[i].largest_len);
        edge[ne++] = a;
        edge[ne++] = a + 1;
        edge[ne++] = a ? a - 1 : 0;
        edge[ne++] = b;
        edge[ne++] = b + 1;
        edge[ne++] = b ? b - 1 : 0;
    }
    kv_free(t);
    /* block edges: every 31st live key of a stretch */
    for (size_t i = n / 3; i < n && ne < cap; i += 31)
        edge[ne++] = live[i];

    if (getenv("KV_TEST_VERBOSE"))
        fprintf(stderr, "bounds: %zu live keys, %zu tables (levels %x), %zu edges\n", n, nt,
                (unsigned)levels, ne);
    kv_iter *it;
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    uint64_t st = 0xED6E;
    for (size_t e = 0; e < ne; e++) {
        uint32_t lo = edge[e];
        /* an upper bound at another edge close above, or just above */
        uint32_t hi = edge[(size_t)(splitmix(st++) % ne)];
        if (hi < lo || hi - lo > 600)
            hi = lo + (uint32_t)(splitmix(st++) % 200);
        edge_scan(it, live, n, lo, hi);
        edge_scan(it, live, n, lo, lo + 1);    /* one key at most */
        edge_scan(it, live, n, lo, lo);        /* empty */
    }
    edge_scan(it, live, n, UINT32_MAX, live[40]);        /* open below */
    edge_scan(it, live, n, live[n - 40], UINT32_MAX);    /* open above */
    edge_scan(it, live, n, UINT32_MAX, UINT32_MAX);      /* no bounds */
    /* lower > upper is refused */
    char a[16], b[16];
    ck_assert_int_eq(kv_iter_set_bounds(it, a, edge_key(10, a), b, edge_key(8, b)), KV_EINVAL);
    /* a prefix: every key of "key0001...." */
    ck_assert_int_eq(kv_iter_seek_prefix(it, "key0001", 7), KV_OK);
    size_t i = edge_lower(live, n, 10000);
    for (; kv_iter_valid(it); kv_iter_next(it), i++) {
        size_t kl;
        const void *kk = kv_iter_key(it, &kl);
        ck_assert_uint_eq(edge_id(kk, kl), live[i]);
    }
    ck_assert_uint_eq(i, edge_lower(live, n, 20000));
    kv_iter_free(it);
    free(edge);
    free(live);
    free(alive);
    close_db(db);
}
END_TEST

/* ---- level sizes: fixed, or following the data ------------------------------------------ */

#define LEVEL_KEYS 100000u

static size_t level_key(uint32_t i, uint8_t k[16])
{
    uint64_t a = splitmix(0x1E7E1ull + i), b = splitmix(a);
    memcpy(k, &a, 8);
    memcpy(k + 8, &b, 8);
    return 16;
}

static void level_fill(kv_db *db, uint32_t from, uint32_t to, uint32_t ver)
{
    uint8_t k[16], v[100];
    for (uint32_t i = from; i < to; i++) {
        fill_bytes((uint64_t)i * 31 + ver, v, sizeof v);
        ck_assert_int_eq(kv_put(db, k, level_key(i, k), v, sizeof v), KV_OK);
    }
}

static void level_check(kv_db *db, uint32_t n, uint32_t ver)
{
    uint8_t k[16], v[100];
    for (uint32_t i = 0; i < n; i += 7) {
        fill_bytes((uint64_t)i * 31 + ver, v, sizeof v);
        void *got = NULL;
        size_t vl = 0;
        ck_assert_int_eq(kv_get(db, k, level_key(i, k), &got, &vl), KV_OK);
        ck_assert(vl == sizeof v && memcmp(got, v, vl) == 0);
        kv_free(got);
    }
}

/* The share of the bytes below level 0 that lie in the deepest level that
 * holds any. */
static double bottom_share(const struct kv_stats *s, int *deepest)
{
    uint64_t all = 0;
    *deepest = 0;
    for (int l = 1; l < 7; l++) {
        all += s->level_bytes[l];
        if (s->level_bytes[l])
            *deepest = l;
    }
    return all ? (double)s->level_bytes[*deepest] / (double)all : 0;
}

/* 11 MB of keys over levels of 256 KiB upwards. With dynamic_level_bytes
 * (the default) the sizes follow the data: level 6 holds most of it, each
 * level from the base down may hold ten times the one above (none less
 * than max_bytes_for_level_base), and level 0 merges into the base level,
 * the levels above it empty; once compaction is done each level is within
 * its target. With fixed sizes, level 1 is the base and holds at most
 * 256 KiB, level 2 2.5 MiB, and the rest lies in level 3, less of the data
 * than the dynamic bottom holds. A database written under either opens
 * under the other, and every key reads the same throughout. */
START_TEST(level_sizes_follow_the_data)
{
    double share[2];
    for (int dyn = 1; dyn >= 0; dyn--) {
        char p[600];
        test_path(p, sizeof p, dyn ? "dynamic" : "fixed");
        kv_options o;
        small_options(&o);
        o.compression = KV_COMPRESSION_NONE;
        o.idle_compaction_ms = 0;
        o.dynamic_level_bytes = dyn;
        kv_db *db = open_db(p, &o);
        level_fill(db, 0, LEVEL_KEYS, 1);
        struct kv_stats s;
        idle_wait(db, &s);
        level_check(db, LEVEL_KEYS, 1);
        const double base_max = (double)o.max_bytes_for_level_base;
        int deepest;
        share[dyn] = bottom_share(&s, &deepest);
        fprintf(stderr, "levels (%s): base L%llu, bytes", dyn ? "dynamic" : "fixed",
                (unsigned long long)s.base_level);
        for (int l = 0; l < 7; l++)
            fprintf(stderr, " %llu/%llu", (unsigned long long)s.level_bytes[l],
                    (unsigned long long)s.level_target_bytes[l]);
        fprintf(stderr, ", bottom L%d holds %.2f, write amplification %.2f\n", deepest,
                share[dyn], s.write_amplification);
        ck_assert_uint_eq(s.level_target_bytes[0], 0);
        if (dyn) {
            /* 11 MB: level 5's tenth is past the base size (256 KiB),
             * level 4's hundredth is not */
            ck_assert_int_eq(deepest, 6);
            ck_assert_uint_eq(s.base_level, 4);
            ck_assert_double_ge((double)s.level_target_bytes[6], (double)s.level_bytes[6] * 0.99);
        } else {
            ck_assert_uint_eq(s.base_level, 1);
            ck_assert_int_eq(deepest, 3);
        }
        for (uint64_t l = 1; l < s.base_level; l++)
            ck_assert_uint_eq(s.level_tables[l], 0);
        for (uint64_t l = s.base_level; l < 6; l++) {
            ck_assert_double_ge((double)s.level_target_bytes[l], base_max);
            ck_assert_double_le((double)s.level_bytes[l], (double)s.level_target_bytes[l]);
            if (s.level_target_bytes[l] > base_max) /* past the floor: a tenth of the next */
                ck_assert_double_eq_tol((double)s.level_target_bytes[l + 1],
                                        10.0 * (double)s.level_target_bytes[l],
                                        0.01 * (double)s.level_target_bytes[l + 1]);
        }
        close_db(db);

        /* Opened under the other sizing: more writes, every key reads. */
        o.dynamic_level_bytes = !dyn;
        db = open_db(p, &o);
        level_check(db, LEVEL_KEYS, 1);
        level_fill(db, 0, LEVEL_KEYS / 4, 2);
        idle_wait(db, &s);
        for (uint64_t l = 1; l < s.base_level; l++)
            ck_assert_uint_eq(s.level_tables[l], 0);
        level_check(db, LEVEL_KEYS / 4, 2);
        close_db(db);
    }
    ck_assert_double_ge(share[1], 0.8);
    ck_assert_double_gt(share[1], share[0]);
}
END_TEST

/* The tables of a flush or compaction are renamed into place without a
 * directory sync each; one sync, before the manifest commit that names
 * them, makes all their names durable (kv_db_commit_blobs). So with no
 * writes going on (no log created), directory syncs never outnumber the
 * manifest commits, however many tables a compaction writes; a sync per
 * table gave about one per table. That the names are durable is the
 * power-loss crash test's to check (doc/reliability.md). */
START_TEST(one_directory_sync_per_job)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_options o;
    kv_options_init(&o);
    o.write_buffer_size = (size_t)256 << 10;
    o.target_file_size = (size_t)64 << 10;
    o.max_bytes_for_level_base = (size_t)256 << 10;
    o.idle_compaction_ms = 0;
    kv_db *db = open_db(p, &o);
    put_scattered(db, 40000);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    struct kv_stats s;
    get_stats(db, &s);
    uint64_t tables0 = s.tables, written0 = s.compaction_written_bytes;
    uint64_t dirs0 = kv_file_calls(KV_FILE_KIND_DIR, KV_FILE_SYNC);
    uint64_t commits0 = kv_manifest_commits();
    compact_all(db);
    get_stats(db, &s);
    uint64_t dirs = kv_file_calls(KV_FILE_KIND_DIR, KV_FILE_SYNC) - dirs0;
    uint64_t commits = kv_manifest_commits() - commits0;
    uint64_t written = s.compaction_written_bytes - written0;
    fprintf(stderr, "one sync per job: %llu tables before, %llu after, %llu bytes written, "
            "%llu manifest commits, %llu directory syncs\n", (unsigned long long)tables0,
            (unsigned long long)s.tables, (unsigned long long)written,
            (unsigned long long)commits, (unsigned long long)dirs);
    /* A job of many tables: the full compaction wrote 40 or more. */
    ck_assert_uint_ge(written, 40 * (uint64_t)o.target_file_size);
    ck_assert_uint_ge(s.tables, 40);
    ck_assert_uint_ge(commits, 1);
    ck_assert_uint_ge(dirs, 1);
    ck_assert_uint_le(dirs, commits);
    close_db(db);
}
END_TEST

static void add_case(Suite *s, const char *name, const TTest *test, double timeout)
{
    TCase *tc = tcase_create(name);
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_set_timeout(tc, timeout);
    tcase_add_test(tc, test);
    suite_add_tcase(s, tc);
}

Suite *test_suite(void)
{
    Suite *s = suite_create("compact");
    add_case(s, "model", model_million_ops, 1100);
    add_case(s, "snapshots", snapshots_outlive_compactions, 600);
    add_case(s, "shape", shape_after_full_compaction, 600);
    add_case(s, "tied_words", table_search_on_tied_words, 120);
    add_case(s, "space", space_reclaimed, 600);
    add_case(s, "ranges", partial_ranges_keep_newest, 600);
    add_case(s, "crash", crash_during_compaction, 600);
    add_case(s, "threads", threads_while_compacting, 600);
    add_case(s, "scans_threads", scans_while_writing, 600);
    add_case(s, "bounds", bounds_at_edges, 600);
    add_case(s, "levels", level_sizes_follow_the_data, 600);
    add_case(s, "idle", stats_say_when_compaction_is_done, 300);
    add_case(s, "dir_syncs", one_directory_sync_per_job, 300);
    add_case(s, "files", many_tables_few_files, 900);
    add_case(s, "files_threads", threads_under_a_small_file_budget, 600);
    TCase *tc = tcase_create("idle_l0");
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, idle_merges_level0_down);
    tcase_add_test(tc, idle_zero_never_merges);
    tcase_add_test(tc, idle_options_version_7);
    tcase_add_test(tc, idle_options_range);
    suite_add_tcase(s, tc);
    return s;
}
