/* compat_example.c - a program written against LevelDB's C API the way its
 * users write one, built against kv's <leveldb/c.h> and libkv_leveldb: a
 * range scan both ways, a write batch (read back, appended), a snapshot,
 * closing and reopening, every option, a key order of its own, values up
 * to the 16 MiB limit (binary, in blob files past 512 bytes), and the
 * errors LevelDB's callers look for. It includes nothing of kv, so it also
 * builds against an installed tree: `cc compat_example.c $(pkg-config
 * --cflags --libs kv-leveldb)` (tests/compat/leveldb_install.sh does that).
 *
 * Usage: compat_example [PHASE]: errors, batch, range, snapshot, reopen,
 * options, comparator, large, badorder (a comparator that contradicts
 * itself); none: all of them. Prints "compat_example: PASS"
 * and exits 0, or names the failed check and exits 1. */
#define _XOPEN_SOURCE 700 /* mkdtemp, setenv, nftw */
#include <leveldb/c.h>

#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *phase = "";
static char root[] = "/tmp/kv_compat_example.XXXXXX";

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "compat_example: %s: %s:%d: %s\n", phase, __FILE__,      \
                    __LINE__, #cond);                                                \
            exit(1);                                                                 \
        }                                                                            \
    } while (0)

#define CHECK_OK(err)                                                                \
    do {                                                                             \
        if (err) {                                                                   \
            fprintf(stderr, "compat_example: %s: %s:%d: %s\n", phase, __FILE__,      \
                    __LINE__, err);                                                  \
            exit(1);                                                                 \
        }                                                                            \
    } while (0)

/* The path of database `name` under the scratch directory. */
static char *db_path(const char *name)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", root, name);
    return path;
}

static leveldb_t *open_db(const char *name, int create, leveldb_comparator_t *cmp)
{
    leveldb_options_t *o = leveldb_options_create();
    leveldb_options_set_create_if_missing(o, (uint8_t)create);
    leveldb_options_set_write_buffer_size(o, 64 << 10); /* small: tables appear soon */
    leveldb_options_set_comparator(o, cmp);
    char *err = NULL;
    leveldb_t *db = leveldb_open(o, db_path(name), &err);
    CHECK_OK(err);
    CHECK(db != NULL);
    leveldb_options_destroy(o);
    return db;
}

/* 1 when key holds exactly `want` (NULL: absent). */
static int has(leveldb_t *db, const leveldb_readoptions_t *ro, const char *key, const char *want)
{
    char *err = NULL;
    size_t len = 99;
    char *v = leveldb_get(db, ro, key, strlen(key), &len, &err);
    CHECK_OK(err);
    int same = want ? v && len == strlen(want) && !memcmp(v, want, len) : !v && len == 0;
    leveldb_free(v);
    return same;
}

static void put(leveldb_t *db, const char *key, const char *val)
{
    char *err = NULL;
    leveldb_writeoptions_t *wo = leveldb_writeoptions_create();
    leveldb_put(db, wo, key, strlen(key), val, strlen(val), &err);
    CHECK_OK(err);
    leveldb_writeoptions_destroy(wo);
}

static void destroy(const char *name)
{
    char *err = NULL;
    leveldb_options_t *o = leveldb_options_create();
    leveldb_destroy_db(o, db_path(name), &err);
    CHECK_OK(err);
    leveldb_options_destroy(o);
    struct stat st;
    CHECK(stat(db_path(name), &st) != 0); /* the directory went too */
}

/* ---- errors --------------------------------------------------------------------- */

static void errors(void)
{
    phase = "errors";
    leveldb_options_t *o = leveldb_options_create();
    char *err = NULL;
    /* No database and create_if_missing off (LevelDB's default). */
    CHECK(leveldb_open(o, db_path("e"), &err) == NULL);
    CHECK(err != NULL);
    CHECK(!strncmp(err, "Invalid argument: ", 18));
    CHECK(strstr(err, db_path("e")) && strstr(err, "does not exist"));
    /* A second failure replaces the message (the first is freed: the
     * sanitizers would see a leak otherwise). */
    CHECK(leveldb_open(o, db_path("e"), &err) == NULL);
    CHECK(err != NULL);
    leveldb_free(err);
    err = NULL;

    leveldb_t *db = open_db("e", 1, NULL);
    /* Absent key: NULL, length 0, no error. */
    CHECK(has(db, NULL, "nothing", NULL));
    /* Open twice: the lock refuses. */
    leveldb_options_set_create_if_missing(o, 1);
    CHECK(leveldb_open(o, db_path("e"), &err) == NULL);
    CHECK(err && !strncmp(err, "IO error: ", 10));
    leveldb_free(err);
    err = NULL;
    /* An empty value is a value; an empty key is a key. */
    put(db, "", "");
    CHECK(has(db, NULL, "", ""));
    leveldb_close(db);
    /* error_if_exists on a database that exists. */
    leveldb_options_set_error_if_exists(o, 1);
    CHECK(leveldb_open(o, db_path("e"), &err) == NULL);
    CHECK(err && !strncmp(err, "Invalid argument: ", 18));
    leveldb_free(err);
    err = NULL;
    leveldb_options_destroy(o);
    destroy("e");
}

/* ---- write batches ------------------------------------------------------------------ */

struct seen {
    char log[256];
};

static void seen_put(void *state, const char *k, size_t klen, const char *v, size_t vlen)
{
    struct seen *s = state;
    size_t at = strlen(s->log);
    snprintf(s->log + at, sizeof s->log - at, "put %.*s=%.*s;", (int)klen, k, (int)vlen, v);
}

static void seen_del(void *state, const char *k, size_t klen)
{
    struct seen *s = state;
    size_t at = strlen(s->log);
    snprintf(s->log + at, sizeof s->log - at, "del %.*s;", (int)klen, k);
}

static void batch(void)
{
    phase = "batch";
    leveldb_t *db = open_db("b", 1, NULL);
    put(db, "old", "1");
    leveldb_writebatch_t *wb = leveldb_writebatch_create();
    leveldb_writebatch_put(wb, "a", 1, "1", 1);
    leveldb_writebatch_put(wb, "b", 1, "2", 1);
    leveldb_writebatch_delete(wb, "old", 3);
    leveldb_writebatch_t *more = leveldb_writebatch_create();
    leveldb_writebatch_put(more, "a", 1, "3", 1); /* later: wins over a=1 */
    leveldb_writebatch_append(wb, more);
    leveldb_writebatch_destroy(more);

    struct seen s = {""};
    leveldb_writebatch_iterate(wb, &s, seen_put, seen_del);
    CHECK(!strcmp(s.log, "put a=1;put b=2;del old;put a=3;"));

    char *err = NULL;
    leveldb_writeoptions_t *wo = leveldb_writeoptions_create();
    leveldb_writeoptions_set_sync(wo, 1);
    leveldb_write(db, wo, wb, &err);
    CHECK_OK(err);
    CHECK(has(db, NULL, "a", "3") && has(db, NULL, "b", "2") && has(db, NULL, "old", NULL));

    /* A batch that could not take an entry (a key over kv's 512 KiB) writes
     * nothing, and says why; clear forgets it. */
    leveldb_writebatch_clear(wb);
    leveldb_writebatch_put(wb, "c", 1, "4", 1);
    size_t big = (512 << 10) + 1;
    char *huge = calloc(1, big);
    CHECK(huge != NULL);
    leveldb_writebatch_put(wb, huge, big, "x", 1);
    leveldb_write(db, wo, wb, &err);
    CHECK(err && !strncmp(err, "Invalid argument: ", 18));
    leveldb_free(err);
    err = NULL;
    CHECK(has(db, NULL, "c", NULL));
    leveldb_writebatch_clear(wb);
    leveldb_writebatch_put(wb, "c", 1, "4", 1);
    leveldb_write(db, wo, wb, &err);
    CHECK_OK(err);
    CHECK(has(db, NULL, "c", "4"));
    /* The same key straight through leveldb_put: refused too. */
    leveldb_put(db, wo, huge, big, "x", 1, &err);
    CHECK(err != NULL);
    leveldb_free(err);
    err = NULL;
    free(huge);

    leveldb_writeoptions_destroy(wo);
    leveldb_writebatch_destroy(wb);
    leveldb_close(db);
    destroy("b");
}

/* ---- a range, both ways -------------------------------------------------------------- */

static void range(void)
{
    phase = "range";
    leveldb_t *db = open_db("r", 1, NULL);
    char key[32], val[64];
    /* Three kinds of keys, interleaved in write order; enough data for
     * several tables (64 KiB write buffer). */
    for (int i = 0; i < 3000; i++) {
        static const char *kinds[] = {"item:", "user:", "zone:"};
        snprintf(key, sizeof key, "%s%05d", kinds[i % 3], i / 3);
        snprintf(val, sizeof val, "value-%05d-%040d", i / 3, 0);
        put(db, key, val);
    }
    leveldb_readoptions_t *ro = leveldb_readoptions_create();
    leveldb_readoptions_set_fill_cache(ro, 0);
    leveldb_readoptions_set_verify_checksums(ro, 1);
    leveldb_iterator_t *it = leveldb_create_iterator(db, ro);
    CHECK(!leveldb_iter_valid(it)); /* not valid before a seek */

    /* Forward over [user:00100, user:00200): seek to the start, stop at the
     * limit, as a range scan does. */
    const char *start = "user:00100", *limit = "user:00200";
    int n = 0;
    for (leveldb_iter_seek(it, start, strlen(start)); leveldb_iter_valid(it);
         leveldb_iter_next(it)) {
        size_t klen, vlen;
        const char *k = leveldb_iter_key(it, &klen);
        if (klen >= strlen(limit) && memcmp(k, limit, strlen(limit)) >= 0)
            break;
        snprintf(key, sizeof key, "user:%05d", 100 + n);
        CHECK(klen == strlen(key) && !memcmp(k, key, klen));
        const char *v = leveldb_iter_value(it, &vlen);
        CHECK(vlen == 52 && !memcmp(v + 6, key + 5, 5));
        n++;
    }
    CHECK(n == 100);

    /* Backward over the same range: from the last key below the limit. */
    leveldb_iter_seek(it, limit, strlen(limit));
    CHECK(leveldb_iter_valid(it));
    leveldb_iter_prev(it);
    n = 0;
    for (; leveldb_iter_valid(it); leveldb_iter_prev(it)) {
        size_t klen;
        const char *k = leveldb_iter_key(it, &klen);
        if (klen < strlen(start) || memcmp(k, start, strlen(start)) < 0)
            break;
        snprintf(key, sizeof key, "user:%05d", 199 - n);
        CHECK(klen == strlen(key) && !memcmp(k, key, klen));
        n++;
    }
    CHECK(n == 100);

    /* The ends; off the end is not valid, and not an error. */
    leveldb_iter_seek_to_first(it);
    size_t klen;
    CHECK(leveldb_iter_valid(it) && !memcmp(leveldb_iter_key(it, &klen), "item:00000", 10));
    leveldb_iter_prev(it);
    CHECK(!leveldb_iter_valid(it));
    CHECK(leveldb_iter_key(it, &klen) == NULL && klen == 0);
    leveldb_iter_seek_to_last(it);
    CHECK(leveldb_iter_valid(it) && !memcmp(leveldb_iter_key(it, &klen), "zone:00999", 10));
    leveldb_iter_next(it);
    CHECK(!leveldb_iter_valid(it));
    char *err = NULL;
    leveldb_iter_get_error(it, &err);
    CHECK_OK(err);
    leveldb_iter_destroy(it);

    /* The tables hold the data: some bytes in each kind's range. */
    leveldb_compact_range(db, NULL, 0, NULL, 0);
    const char *starts[3] = {"item:", "user:", "zone:"};
    const char *limits[3] = {"item;", "user;", "zone;"};
    size_t lens[3] = {5, 5, 5};
    uint64_t sizes[3] = {0, 0, 0};
    leveldb_approximate_sizes(db, 3, starts, lens, limits, lens, sizes);
    CHECK(sizes[0] > 0 && sizes[1] > 0 && sizes[2] > 0);
    char *prop = leveldb_property_value(db, "leveldb.stats");
    CHECK(prop != NULL);
    leveldb_free(prop);
    CHECK(leveldb_property_value(db, "leveldb.no-such-property") == NULL);
    leveldb_readoptions_destroy(ro);
    leveldb_close(db);
    destroy("r");
}

/* ---- a snapshot ------------------------------------------------------------------------ */

static void snapshot(void)
{
    phase = "snapshot";
    leveldb_t *db = open_db("s", 1, NULL);
    put(db, "k1", "before");
    put(db, "k2", "before");
    const leveldb_snapshot_t *snap = leveldb_create_snapshot(db);
    CHECK(snap != NULL);
    put(db, "k1", "after");
    char *err = NULL;
    leveldb_delete(db, NULL, "k2", 2, &err);
    CHECK_OK(err);
    put(db, "k3", "after");

    leveldb_readoptions_t *ro = leveldb_readoptions_create();
    leveldb_readoptions_set_snapshot(ro, snap);
    CHECK(has(db, ro, "k1", "before") && has(db, ro, "k2", "before") && has(db, ro, "k3", NULL));
    /* An iterator at the snapshot sees the same two keys. */
    leveldb_iterator_t *it = leveldb_create_iterator(db, ro);
    int n = 0;
    for (leveldb_iter_seek_to_first(it); leveldb_iter_valid(it); leveldb_iter_next(it)) {
        size_t vlen;
        const char *v = leveldb_iter_value(it, &vlen);
        CHECK(vlen == 6 && !memcmp(v, "before", 6));
        n++;
    }
    CHECK(n == 2);
    leveldb_iter_destroy(it);
    /* Without it: now. */
    leveldb_readoptions_set_snapshot(ro, NULL);
    CHECK(has(db, ro, "k1", "after") && has(db, ro, "k2", NULL) && has(db, ro, "k3", "after"));
    leveldb_release_snapshot(db, snap);
    leveldb_readoptions_destroy(ro);
    leveldb_close(db);
    destroy("s");
}

/* ---- large values ------------------------------------------------------------------- */

/* Value `i` of n bytes: binary, NUL bytes included, different per i. */
static char *big_value(size_t n, unsigned i)
{
    char *v = malloc(n ? n : 1);
    CHECK(v != NULL);
    uint32_t x = 2463534242u ^ i;
    for (size_t j = 0; j < n; j++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        v[j] = (char)(j % 97 == 0 ? 0 : x);
    }
    return v;
}

/* Values of up to the limit (16 MiB), through put, a batch, a snapshot, an
 * iterator, a compaction and a reopen: every byte back. */
static void large(void)
{
    phase = "large";
    static const size_t sizes[] = {0, 511, 512, 4096, 65536, 1 << 20, 16 << 20};
    enum { N = sizeof sizes / sizeof sizes[0] };
    leveldb_t *db = open_db("l", 1, NULL);
    leveldb_writeoptions_t *wo = leveldb_writeoptions_create();
    leveldb_readoptions_t *ro = leveldb_readoptions_create();
    char *err = NULL, key[16];
    leveldb_writebatch_t *b = leveldb_writebatch_create();
    for (unsigned i = 0; i < N; i++) {
        char *v = big_value(sizes[i], i);
        snprintf(key, sizeof key, "big%u", i);
        if (i % 2) /* half through a batch */
            leveldb_writebatch_put(b, key, strlen(key), v, sizes[i]);
        else {
            leveldb_put(db, wo, key, strlen(key), v, sizes[i], &err);
            CHECK_OK(err);
        }
        free(v);
    }
    leveldb_write(db, wo, b, &err);
    CHECK_OK(err);
    leveldb_writebatch_destroy(b);
    const leveldb_snapshot_t *snap = leveldb_create_snapshot(db);
    for (unsigned i = 0; i < N; i++) { /* overwritten after the snapshot */
        char *v = big_value(sizes[i] / 2, i + 100);
        snprintf(key, sizeof key, "big%u", i);
        leveldb_put(db, wo, key, strlen(key), v, sizes[i] / 2, &err);
        CHECK_OK(err);
        free(v);
    }
    leveldb_compact_range(db, NULL, 0, NULL, 0);
    for (int round = 0; round < 2; round++) {
        leveldb_readoptions_set_snapshot(ro, round == 0 ? snap : NULL);
        for (unsigned i = 0; i < N; i++) {
            size_t n = round == 0 ? sizes[i] : sizes[i] / 2, vlen;
            char *want = big_value(n, round == 0 ? i : i + 100);
            snprintf(key, sizeof key, "big%u", i);
            char *got = leveldb_get(db, ro, key, strlen(key), &vlen, &err);
            CHECK_OK(err);
            CHECK(vlen == n && (n == 0 || (got && !memcmp(got, want, n))));
            leveldb_free(got);
            free(want);
        }
        leveldb_iterator_t *it = leveldb_create_iterator(db, ro);
        unsigned seen = 0;
        for (leveldb_iter_seek_to_first(it); leveldb_iter_valid(it); leveldb_iter_next(it)) {
            size_t klen, vlen;
            const char *k = leveldb_iter_key(it, &klen);
            unsigned i = (unsigned)atoi(k + 3);
            CHECK(klen >= 4 && i < N);
            size_t n = round == 0 ? sizes[i] : sizes[i] / 2;
            char *want = big_value(n, round == 0 ? i : i + 100);
            const char *v = leveldb_iter_value(it, &vlen);
            CHECK(vlen == n && (n == 0 || !memcmp(v, want, n)));
            free(want);
            seen++;
        }
        leveldb_iter_get_error(it, &err);
        CHECK_OK(err);
        CHECK(seen == N);
        leveldb_iter_destroy(it);
    }
    leveldb_release_snapshot(db, snap);
    leveldb_close(db);
    db = open_db("l", 0, NULL);
    leveldb_readoptions_set_snapshot(ro, NULL);
    for (unsigned i = 0; i < N; i++) {
        size_t vlen;
        char *want = big_value(sizes[i] / 2, i + 100);
        snprintf(key, sizeof key, "big%u", i);
        char *got = leveldb_get(db, ro, key, strlen(key), &vlen, &err);
        CHECK_OK(err);
        CHECK(vlen == sizes[i] / 2 && (vlen == 0 || (got && !memcmp(got, want, vlen))));
        leveldb_free(got);
        free(want);
    }
    leveldb_readoptions_destroy(ro);
    leveldb_writeoptions_destroy(wo);
    leveldb_close(db);
    destroy("l");
}

/* ---- closing and reopening ------------------------------------------------------------- */

static void reopen(void)
{
    phase = "reopen";
    leveldb_t *db = open_db("o", 1, NULL);
    char key[32], val[64];
    leveldb_writeoptions_t *wo = leveldb_writeoptions_create();
    leveldb_writeoptions_set_sync(wo, 1);
    char *err = NULL;
    for (int i = 0; i < 2000; i++) {
        snprintf(key, sizeof key, "key%06d", i);
        snprintf(val, sizeof val, "val%06d", i);
        leveldb_writeoptions_set_sync(wo, i % 500 == 0); /* a few synced */
        leveldb_put(db, wo, key, strlen(key), val, strlen(val), &err);
        CHECK_OK(err);
    }
    leveldb_delete(db, wo, "key000007", 9, &err);
    CHECK_OK(err);
    leveldb_close(db);
    /* Reopened (create_if_missing off): every write is there, from the
     * tables and the log. */
    db = open_db("o", 0, NULL);
    CHECK(has(db, NULL, "key000000", "val000000") && has(db, NULL, "key001999", "val001999"));
    CHECK(has(db, NULL, "key000007", NULL));
    leveldb_iterator_t *it = leveldb_create_iterator(db, NULL);
    int n = 0;
    for (leveldb_iter_seek_to_first(it); leveldb_iter_valid(it); leveldb_iter_next(it))
        n++;
    CHECK(n == 1999);
    leveldb_iter_destroy(it);
    leveldb_close(db);
    /* Repaired, then opened again: the same data. */
    leveldb_options_t *o = leveldb_options_create();
    leveldb_repair_db(o, db_path("o"), &err);
    CHECK_OK(err);
    leveldb_options_destroy(o);
    db = open_db("o", 0, NULL);
    CHECK(has(db, NULL, "key001000", "val001000") && has(db, NULL, "key000007", NULL));
    leveldb_close(db);
    leveldb_writeoptions_destroy(wo);
    /* Repair keeps the manifest it replaced in lost/, and destroying the
     * database leaves lost/ (and so the directory) alone, as LevelDB's
     * DestroyDB does: the user's to look at and remove. */
    char *err2 = NULL;
    o = leveldb_options_create();
    leveldb_destroy_db(o, db_path("o"), &err2);
    CHECK_OK(err2);
    leveldb_options_destroy(o);
    char lost[4096];
    snprintf(lost, sizeof lost, "%s/lost/MANIFEST", db_path("o"));
    struct stat st;
    CHECK(stat(lost, &st) == 0);
    snprintf(lost, sizeof lost, "%s/MANIFEST", db_path("o"));
    CHECK(stat(lost, &st) != 0);
    snprintf(lost, sizeof lost, "%s/lost/MANIFEST", db_path("o"));
    CHECK(unlink(lost) == 0);
    snprintf(lost, sizeof lost, "%s/lost", db_path("o"));
    CHECK(rmdir(lost) == 0 && rmdir(db_path("o")) == 0);
}

/* ---- every option, and careless calls ------------------------------------------------- */

/* A custom filter policy's callbacks: kv never calls them (c.h). */
static int policy_destroyed;

static char *never_create(void *state, const char *const *keys, const size_t *lens, int n,
                          size_t *flen)
{
    (void)state, (void)keys, (void)lens, (void)n, (void)flen;
    fprintf(stderr, "compat_example: options: a filter policy callback was called\n");
    exit(1);
}

static uint8_t never_match(void *state, const char *key, size_t len, const char *f, size_t flen)
{
    (void)state, (void)key, (void)len, (void)f, (void)flen;
    fprintf(stderr, "compat_example: options: a filter policy callback was called\n");
    exit(1);
}

static const char *never_name(void *state)
{
    (void)state;
    fprintf(stderr, "compat_example: options: a filter policy callback was called\n");
    exit(1);
}

static void policy_destroy(void *state)
{
    (void)state;
    policy_destroyed++;
}

static void options(void)
{
    phase = "options";
    leveldb_env_t *env = leveldb_create_default_env();
    leveldb_cache_t *cache = leveldb_cache_create_lru(1 << 20);
    leveldb_filterpolicy_t *policies[3] = {
        leveldb_filterpolicy_create(NULL, policy_destroy, never_create, never_match,
                                    never_name),
        leveldb_filterpolicy_create_bloom(0), /* no filters */
        leveldb_filterpolicy_create_bloom(20)};
    for (int p = 0; p < 3; p++) {
        CHECK(policies[p] != NULL);
        leveldb_options_t *o = leveldb_options_create();
        leveldb_options_set_create_if_missing(o, 1);
        /* Values outside kv's ranges are brought into them, as LevelDB
         * clamps its own. */
        leveldb_options_set_write_buffer_size(o, 1);
        leveldb_options_set_max_open_files(o, 1);
        leveldb_options_set_block_size(o, 1);
        leveldb_options_set_max_file_size(o, 1);
        leveldb_options_set_block_restart_interval(o, 1);
        leveldb_options_set_compression(o, p == 0 ? leveldb_no_compression
                                                  : p == 1 ? leveldb_snappy_compression : 7);
        leveldb_options_set_paranoid_checks(o, 1);
        leveldb_options_set_env(o, env);
        leveldb_options_set_info_log(o, NULL);
        leveldb_options_set_cache(o, p == 1 ? NULL : cache);
        leveldb_options_set_filter_policy(o, policies[p]);
        char *err = NULL;
        leveldb_t *db = leveldb_open(o, db_path("p"), &err);
        CHECK_OK(err);
        char key[16], val[128];
        memset(val, 'v', sizeof val);
        for (int i = 0; i < 2000; i++) {
            snprintf(key, sizeof key, "k%05d", i);
            leveldb_put(db, NULL, key, strlen(key), val, sizeof val, &err);
            CHECK_OK(err);
        }
        leveldb_compact_range(db, NULL, 0, NULL, 0);
        for (int i = 0; i < 2000; i += 7) {
            snprintf(key, sizeof key, "k%05d", i);
            size_t len;
            char *v = leveldb_get(db, NULL, key, strlen(key), &len, &err);
            CHECK_OK(err);
            CHECK(v && len == sizeof val && !memcmp(v, val, len));
            leveldb_free(v);
        }
        CHECK(has(db, NULL, "k99999", NULL) && has(db, NULL, "j", NULL));
        leveldb_close(db);
        leveldb_options_destroy(o);
        destroy("p");
    }
    CHECK(policy_destroyed == 0);
    for (int p = 0; p < 3; p++)
        leveldb_filterpolicy_destroy(policies[p]);
    CHECK(policy_destroyed == 1);
    leveldb_cache_destroy(cache);

    /* The test directory: $TEST_TMPDIR, made if missing. */
    CHECK(setenv("TEST_TMPDIR", db_path("t"), 1) == 0);
    char *dir = leveldb_env_get_test_directory(env);
    CHECK(dir != NULL && !strcmp(dir, db_path("t")));
    struct stat st;
    CHECK(stat(dir, &st) == 0 && S_ISDIR(st.st_mode));
    CHECK(rmdir(dir) == 0);
    leveldb_free(dir);
    leveldb_env_destroy(env);

    /* NULL handles: an error where there is an errptr, else nothing; an
     * errptr that holds a message gets the new one (the old one freed). */
    char *err = strdup("an older message");
    size_t len = 5;
    leveldb_put(NULL, NULL, "k", 1, "v", 1, &err);
    CHECK(err && !strncmp(err, "Invalid argument: ", 18));
    CHECK(leveldb_get(NULL, NULL, "k", 1, &len, &err) == NULL && len == 0);
    leveldb_write(NULL, NULL, NULL, &err);
    leveldb_iter_get_error(NULL, &err);
    CHECK(err && strstr(err, "NULL"));
    leveldb_free(err);
    CHECK(leveldb_open(NULL, "/nonexistent-dir/db", NULL) == NULL); /* no errptr: fine */
    CHECK(leveldb_create_iterator(NULL, NULL) == NULL);
    CHECK(leveldb_create_snapshot(NULL) == NULL);
    CHECK(!leveldb_iter_valid(NULL));
    CHECK(leveldb_property_value(NULL, "leveldb.stats") == NULL);
    leveldb_close(NULL);
    leveldb_iter_destroy(NULL);
    leveldb_writebatch_destroy(NULL);
    leveldb_options_destroy(NULL);
    leveldb_comparator_destroy(NULL);
    leveldb_filterpolicy_destroy(NULL);
}

/* ---- a key order of its own ----------------------------------------------------------- */

static int destroyed;

static void cmp_destroy(void *state)
{
    (void)state;
    destroyed++;
}

/* Newest first: keys compare bytewise, reversed. */
static int cmp_reverse(void *state, const char *a, size_t alen, const char *b, size_t blen)
{
    (void)state;
    size_t n = alen < blen ? alen : blen;
    int r = memcmp(a, b, n);
    if (r == 0)
        r = alen < blen ? -1 : alen > blen;
    return -r;
}

static const char *cmp_name(void *state)
{
    (void)state;
    return "example.reverse";
}

static void comparator(void)
{
    phase = "comparator";
    leveldb_comparator_t *cmp = leveldb_comparator_create(NULL, cmp_destroy, cmp_reverse,
                                                          cmp_name);
    CHECK(cmp != NULL);
    leveldb_t *db = open_db("c", 1, cmp);
    static const char *keys[] = {"b", "d", "a", "c", "aa"};
    for (int i = 0; i < 5; i++)
        put(db, keys[i], keys[i]);
    /* In the tables too, not only the memtable. */
    leveldb_compact_range(db, NULL, 0, NULL, 0);
    put(db, "bb", "bb");
    static const char *order[] = {"d", "c", "bb", "b", "aa", "a"};
    leveldb_iterator_t *it = leveldb_create_iterator(db, NULL);
    int n = 0;
    for (leveldb_iter_seek_to_first(it); leveldb_iter_valid(it); leveldb_iter_next(it), n++) {
        size_t klen;
        const char *k = leveldb_iter_key(it, &klen);
        CHECK(n < 6 && klen == strlen(order[n]) && !memcmp(k, order[n], klen));
    }
    CHECK(n == 6);
    /* A seek finds the first key at or after the target in this order. */
    leveldb_iter_seek(it, "bz", 2);
    size_t klen;
    CHECK(leveldb_iter_valid(it) && !memcmp(leveldb_iter_key(it, &klen), "bb", 2) && klen == 2);
    leveldb_iter_destroy(it);
    CHECK(has(db, NULL, "aa", "aa"));
    leveldb_close(db);

    /* Opened in another order (bytewise): refused, naming the two. */
    leveldb_options_t *o = leveldb_options_create();
    char *err = NULL;
    CHECK(leveldb_open(o, db_path("c"), &err) == NULL);
    CHECK(err && !strncmp(err, "Invalid argument: ", 18) && strstr(err, "example.reverse"));
    leveldb_free(err);
    leveldb_options_destroy(o);
    /* In its own: fine. */
    db = open_db("c", 0, cmp);
    CHECK(has(db, NULL, "bb", "bb"));
    leveldb_close(db);
    CHECK(destroyed == 0);
    leveldb_comparator_destroy(cmp);
    CHECK(destroyed == 1);
    destroy("c");
}

/* ---- a comparator that contradicts itself ------------------------------------------- */

static unsigned flaky_calls;
static int flaky_mode; /* 1: every 7th answer reversed; 0: bytewise, consistent */

static int cmp_flaky(void *state, const char *a, size_t alen, const char *b, size_t blen)
{
    (void)state;
    size_t n = alen < blen ? alen : blen;
    int r = memcmp(a, b, n);
    if (r == 0)
        r = alen < blen ? -1 : alen > blen;
    return flaky_mode && ++flaky_calls % 7 == 0 ? -r : r;
}

static const char *flaky_name(void *state)
{
    (void)state;
    return "example.flaky";
}

static void badorder(void)
{
    /* Under a comparator that contradicts itself a flush cannot write its
     * table in order: the write that meets it fails, and so does an open
     * that replays the log, each saying what is wrong (the comparator,
     * by name) and where (the table being written); nothing acknowledged
     * is lost: the same name, ordering consistently, reads every write. */
    phase = "badorder";
    leveldb_comparator_t *cmp = leveldb_comparator_create(NULL, cmp_destroy, cmp_flaky, flaky_name);
    flaky_mode = 1;
    leveldb_t *db = open_db("f", 1, cmp);
    leveldb_writeoptions_t *wo = leveldb_writeoptions_create();
    char key[32], val[200], *err = NULL;
    memset(val, 'v', sizeof val);
    int acked = 0;
    for (; acked < 20000; acked++) {
        snprintf(key, sizeof key, "k%06d", (acked * 7919) % 20000);
        leveldb_put(db, wo, key, strlen(key), val, sizeof val, &err);
        if (err)
            break;
    }
    CHECK(err != NULL);
    CHECK(!strncmp(err, "Invalid argument: ", 18) && strstr(err, ".sst") &&
          strstr(err, "does not order keys consistently") && strstr(err, "example.flaky"));
    leveldb_free(err);
    err = NULL;
    leveldb_close(db);
    leveldb_options_t *o = leveldb_options_create();
    leveldb_options_set_comparator(o, cmp);
    leveldb_options_set_write_buffer_size(o, 64 << 10);
    CHECK(leveldb_open(o, db_path("f"), &err) == NULL);
    CHECK(err && strstr(err, ".sst") && strstr(err, "does not order keys consistently") &&
          strstr(err, "example.flaky"));
    leveldb_free(err);
    err = NULL;
    flaky_mode = 0;
    db = open_db("f", 0, cmp);
    leveldb_readoptions_t *ro = leveldb_readoptions_create();
    for (int i = 0; i < acked; i++) {
        size_t vlen;
        snprintf(key, sizeof key, "k%06d", (i * 7919) % 20000);
        char *v = leveldb_get(db, ro, key, strlen(key), &vlen, &err);
        CHECK_OK(err);
        CHECK(v && vlen == sizeof val && !memcmp(v, val, vlen));
        leveldb_free(v);
    }
    leveldb_readoptions_destroy(ro);
    leveldb_writeoptions_destroy(wo);
    leveldb_options_destroy(o);
    leveldb_close(db);
    leveldb_comparator_destroy(cmp);
    destroy("f");
}

/* Whatever a run leaves in the scratch directory goes when it exits, on
 * success or failure. */
static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path); /* what cannot be removed stays; the walk goes on */
    return 0;
}

static void remove_root(void)
{
    nftw(root, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*fn)(void);
    } phases[] = {{"errors", errors},         {"batch", batch},   {"range", range},
                  {"snapshot", snapshot},     {"reopen", reopen}, {"options", options},
                  {"comparator", comparator}, {"large", large},   {"badorder", badorder}};
    const char *only = argc > 1 ? argv[1] : NULL;
    if (!mkdtemp(root)) {
        perror("compat_example: mkdtemp");
        return 1;
    }
    atexit(remove_root);
    CHECK(leveldb_major_version() == 1 && leveldb_minor_version() == 23);
    int ran = 0;
    for (size_t i = 0; i < sizeof phases / sizeof phases[0]; i++)
        if (!only || !strcmp(only, phases[i].name)) {
            phases[i].fn();
            ran++;
        }
    if (!ran) {
        fprintf(stderr, "compat_example: no phase named %s\n", only);
        return 2;
    }
    printf("compat_example: PASS (%s)\n", only ? only : "all");
    return 0;
}
