/* check_ingest.c - kv_table_writer and kv_ingest through kv.h, against a
 * model: the writer's contract (order, empty tables, abandon), tables that
 * go in as they are (a fresh database: the deepest level, moved or
 * copied), tables that overlap the database (rewritten newer than all of
 * it: memtable and tables), tombstones, range deletes and merges in them,
 * snapshots taken before, reopen and compaction after; and what must leave
 * the database unchanged: overlapping inputs, garbage files (random bytes,
 * truncated, a flipped byte) among good ones, another comparator. */
#define _XOPEN_SOURCE 700
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include <kv/kv.h>

#include "fixture.h"

#define NKEYS 3000

/* The model: value of key i (0: absent), as a number put into the value. */
static uint64_t model[NKEYS];

static size_t key(char *k, uint64_t i)
{
    return key_of(k, 16, "k", 8, i);
}

static size_t val(char *v, uint64_t x)
{
    return (size_t)snprintf(v, 64, "v%llu-%0*llu", (unsigned long long)x, (int)(x % 50),
                            (unsigned long long)0);
}

static int exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* Every key against the model, by kv_get and kv_multi_get. */
static void check_model(kv_db *db)
{
    char k[16], v[128];
    for (uint64_t i = 0; i < NKEYS; i++) {
        size_t kl = key(k, i);
        if (model[i])
            expect_value(db, k, kl, v, val(v, model[i]));
        else
            expect_absent(db, k, kl);
    }
    enum { B = 64 };
    char ks[B][16];
    const void *kp[B];
    size_t kls[B], vls[B];
    void *vs[B];
    int st[B];
    for (uint64_t i = 0; i < NKEYS; i += B) {
        size_t n = NKEYS - i < B ? NKEYS - i : B;
        for (size_t j = 0; j < n; j++) {
            kls[j] = key(ks[j], i + j);
            kp[j] = ks[j];
        }
        ck_assert_int_eq(kv_multi_get(db, NULL, n, kp, kls, vs, vls, st), KV_OK);
        for (size_t j = 0; j < n; j++) {
            ck_assert_int_eq(st[j], model[i + j] ? KV_OK : KV_NOTFOUND);
            if (model[i + j]) {
                size_t vl = val(v, model[i + j]);
                ck_assert_uint_eq(vls[j], vl);
                ck_assert(memcmp(vs[j], v, vl) == 0);
                kv_free(vs[j]);
            }
        }
    }
}

/* A table at test_dir/name of keys [from, to) step `step`, value tag x. */
static void write_table(const char *name, uint64_t from, uint64_t to, uint64_t step, uint64_t x,
                        int update)
{
    char p[512], k[16], v[128];
    test_path(p, sizeof p, name);
    kv_table_writer *w;
    ck_assert_int_eq(kv_table_writer_open(p, NULL, &w), KV_OK);
    for (uint64_t i = from; i < to; i += step) {
        ck_assert_int_eq(kv_table_writer_put(w, k, key(k, i), v, val(v, x + i)), KV_OK);
        if (update)
            model[i] = x + i;
    }
    ck_assert_int_eq(kv_table_writer_finish(w), KV_OK);
}

static int ingest(kv_db *db, const char *a, const char *b, const char *c, int move)
{
    char p[3][512];
    const char *ps[3];
    size_t n = 0;
    const char *names[3] = {a, b, c};
    for (int i = 0; i < 3; i++)
        if (names[i]) {
            test_path(p[n], sizeof p[n], names[i]);
            ps[n] = p[n];
            n++;
        }
    return kv_ingest(db, ps, n, move);
}

static kv_db *open_small(const char *name)
{
    kv_options o;
    kv_options_init(&o);
    o.write_buffer_size = 64 << 10;
    o.target_file_size = 64 << 10;
    o.idle_compaction_ms = 0;
    o.merge_operator = kv_merge_uint64_add();
    return open_db(name, &o);
}

START_TEST(writer_contract)
{
    char p[512];
    test_path(p, sizeof p, "w.sst");
    kv_table_writer *w;
    ck_assert_int_eq(kv_table_writer_open(p, NULL, &w), KV_OK);
    ck_assert_int_eq(kv_table_writer_put(w, "b", 1, "1", 1), KV_OK);
    ck_assert_int_eq(kv_table_writer_put(w, "b", 1, "2", 1), KV_EINVAL);
    ck_assert_int_eq(kv_table_writer_put(w, "a", 1, "2", 1), KV_EINVAL);
    ck_assert_int_eq(kv_table_writer_delete(w, "a", 1), KV_EINVAL);
    ck_assert_int_eq(kv_table_writer_put(w, "", 0, "2", 1), KV_EINVAL);
    ck_assert_int_eq(kv_table_writer_delete_range(w, "x", 1, "c", 1), KV_EINVAL);
    ck_assert_int_eq(kv_table_writer_put(w, "c", 1, "3", 1), KV_OK); /* still good */
    kv_table_writer_abandon(w);
    ck_assert(!exists(p));
    /* No entry: KV_EINVAL, no file. */
    ck_assert_int_eq(kv_table_writer_open(p, NULL, &w), KV_OK);
    ck_assert_int_eq(kv_table_writer_finish(w), KV_EINVAL);
    ck_assert(!exists(p));
    /* A large value is stored inline. */
    ck_assert_int_eq(kv_table_writer_open(p, NULL, &w), KV_OK);
    size_t big = (size_t)1 << 20;
    char *bv = malloc(big);
    memset(bv, 'x', big);
    ck_assert_int_eq(kv_table_writer_put(w, "a", 1, bv, big), KV_OK);
    ck_assert_int_eq(kv_table_writer_finish(w), KV_OK);
    ck_assert(exists(p));
    ck_assert_int_eq(kv_table_writer_open(p, NULL, &w), KV_EINVAL); /* exists */
    kv_options o;
    kv_options_init(&o);
    o.min_blob_size = 1024;
    kv_db *db = open_db("db", &o);
    const char *ps[1] = {p};
    ck_assert_int_eq(kv_ingest(db, ps, 1, 1), KV_OK);
    ck_assert(!exists(p));
    expect_value(db, "a", 1, bv, big);
    free(bv);
    ck_assert_int_eq(kv_ingest(NULL, ps, 1, 1), KV_EINVAL);
    ck_assert_int_eq(kv_ingest(db, NULL, 1, 1), KV_EINVAL);
    ck_assert_int_eq(kv_ingest(db, ps, 0, 1), KV_EINVAL);
    ck_assert_int_eq(kv_ingest(db, ps, 1, 1), KV_EINVAL); /* gone: moved */
    close_db(db);
}
END_TEST

/* A fresh database: three disjoint tables go to the deepest level as
 * they are; moved ones leave their paths, copied ones stay. */
START_TEST(fresh_database_takes_tables_as_they_are)
{
    memset(model, 0, sizeof model);
    kv_db *db = open_small("db");
    write_table("a.sst", 0, 1000, 1, 1, 1);
    write_table("b.sst", 1000, 2000, 2, 1, 1);
    write_table("c.sst", 2000, 3000, 3, 1, 1);
    ck_assert_int_eq(ingest(db, "b.sst", "a.sst", NULL, 1), KV_OK);
    ck_assert_int_eq(ingest(db, "c.sst", NULL, NULL, 0), KV_OK);
    char p[512];
    test_path(p, sizeof p, "a.sst");
    ck_assert(!exists(p));
    test_path(p, sizeof p, "c.sst");
    ck_assert(exists(p));
    struct kv_stats s;
    get_stats(db, &s);
    ck_assert_uint_eq(s.ingested_tables, 3);
    ck_assert_uint_gt(s.ingested_bytes, 0);
    ck_assert_uint_eq(s.level_tables[6], 3);
    ck_assert_uint_eq(s.compactions, 0);
    ck_assert_uint_eq(s.flushes, 0);
    check_model(db);
    /* Later puts beat ingested values. */
    char k[16], v[128];
    for (uint64_t i = 0; i < NKEYS; i += 7) {
        model[i] = 5000 + i;
        put_kv(db, k, key(k, i), v, val(v, model[i]));
    }
    check_model(db);
    db = reopen_db(db, "db", NULL);
    check_model(db);
    compact_all(db);
    check_model(db);
    close_db(db);
}
END_TEST

/* Overlap with the database: the ingested values beat those of the
 * memtable and the tables; a snapshot before does not see them. */
START_TEST(overlap_is_newer_than_everything)
{
    memset(model, 0, sizeof model);
    kv_db *db = open_small("db");
    char k[16], v[128];
    for (uint64_t i = 0; i < NKEYS; i++) {
        model[i] = 1 + i;
        put_kv(db, k, key(k, i), v, val(v, model[i]));
        if (i == NKEYS / 2)
            ck_assert_int_eq(kv_flush(db), KV_OK);
    }
    kv_snapshot *snap;
    ck_assert_int_eq(kv_snapshot_new(db, &snap), KV_OK);
    uint64_t before[NKEYS];
    memcpy(before, model, sizeof model);
    write_table("a.sst", 10, 2990, 3, 100000, 1);
    ck_assert_int_eq(ingest(db, "a.sst", NULL, NULL, 1), KV_OK);
    check_model(db);
    for (uint64_t i = 0; i < NKEYS; i += 11) {
        void *got;
        size_t gl;
        size_t kl = key(k, i);
        ck_assert_int_eq(kv_get_at(db, snap, k, kl, &got, &gl), KV_OK);
        size_t vl = val(v, before[i]);
        ck_assert(gl == vl && memcmp(got, v, vl) == 0);
        kv_free(got);
    }
    kv_snapshot_release(db, snap);
    for (uint64_t i = 0; i < NKEYS; i += 5) {
        model[i] = 200000 + i;
        put_kv(db, k, key(k, i), v, val(v, model[i]));
    }
    check_model(db);
    /* A second ingest with no snapshot, still overlapping. */
    write_table("b.sst", 0, NKEYS, 13, 300000, 1);
    ck_assert_int_eq(ingest(db, "b.sst", NULL, NULL, 0), KV_OK);
    check_model(db);
    db = reopen_db(db, "db", NULL);
    check_model(db);
    compact_all(db);
    check_model(db);
    close_db(db);
}
END_TEST

/* Deletes, range deletes and merges in ingested tables. */
START_TEST(tombstones_ranges_and_merges)
{
    kv_options o;
    kv_options_init(&o);
    o.merge_operator = kv_merge_uint64_add();
    o.idle_compaction_ms = 0;
    kv_db *db = open_db("db", &o);
    uint64_t one = 1, five = 5;
    char k[16];
    for (uint64_t i = 0; i < 100; i++)
        put_kv(db, k, key(k, i), &one, 8);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    char p[512], b[16], e[16];
    test_path(p, sizeof p, "t.sst");
    kv_table_writer *w;
    ck_assert_int_eq(kv_table_writer_open(p, &o, &w), KV_OK);
    /* Deletes [20, 40) of the database's keys, but not its own key 30. */
    ck_assert_int_eq(kv_table_writer_delete_range(w, b, key(b, 20), e, key(e, 40)), KV_OK);
    ck_assert_int_eq(kv_table_writer_delete(w, k, key(k, 10)), KV_OK);
    ck_assert_int_eq(kv_table_writer_merge(w, k, key(k, 11), &five, 8), KV_OK);
    ck_assert_int_eq(kv_table_writer_put(w, k, key(k, 30), &five, 8), KV_OK);
    ck_assert_int_eq(kv_table_writer_merge(w, k, key(k, 200), &five, 8), KV_OK);
    ck_assert_int_eq(kv_table_writer_finish(w), KV_OK);
    const char *ps[1] = {p};
    for (int round = 0; round < 3; round++) {
        if (round == 0)
            ck_assert_int_eq(kv_ingest(db, ps, 1, 0), KV_OK);
        if (round == 1)
            db = reopen_db(db, "db", &o);
        if (round == 2)
            compact_all(db);
        uint64_t six = 6;
        for (uint64_t i = 0; i < 100; i++) {
            size_t kl = key(k, i);
            if (i == 10 || (i >= 20 && i < 40 && i != 30))
                expect_absent(db, k, kl);
            else if (i == 11)
                expect_value(db, k, kl, &six, 8);
            else if (i == 30)
                expect_value(db, k, kl, &five, 8);
            else
                expect_value(db, k, kl, &one, 8);
        }
        expect_value(db, k, key(k, 200), &five, 8);
    }
    close_db(db);
    /* Merges need a merge operator. */
    kv_db *plain = open_db("plain", NULL);
    ck_assert_int_eq(kv_ingest(plain, ps, 1, 0), KV_EINVAL);
    close_db(plain);
}
END_TEST

/* Files that must leave the database as it was, originals in place. */
START_TEST(bad_inputs_change_nothing)
{
    memset(model, 0, sizeof model);
    kv_db *db = open_small("db");
    write_table("a.sst", 0, 1000, 1, 1, 1);
    write_table("b.sst", 500, 1500, 1, 1, 0); /* overlaps a */
    write_table("c.sst", 2000, 2100, 1, 1, 0);
    ck_assert_int_eq(ingest(db, "a.sst", NULL, NULL, 1), KV_OK);
    write_table("a.sst", 1600, 1700, 1, 7, 0);
    write_table("x.sst", 1400, 1450, 1, 7, 0); /* overlaps b */
    ck_assert_int_eq(ingest(db, "b.sst", "c.sst", "x.sst", 1), KV_EINVAL);
    ck_assert_int_eq(ingest(db, "a.sst", "x.sst", "b.sst", 0), KV_EINVAL);
    char p[512], q[512];
    test_path(p, sizeof p, "c.sst");
    size_t len;
    FILE *fp = fopen(p, "rb");
    char *good = read_all(fp, &len);
    fclose(fp);
    const char *kinds[] = {"random", "truncated", "flipped", "empty"};
    for (int t = 0; t < 4; t++) {
        test_path(q, sizeof q, "bad.sst");
        fp = fopen(q, "wb");
        if (t == 0) {
            for (size_t i = 0; i < len; i++)
                fputc((int)(splitmix(i) & 0xFF), fp);
        } else if (t == 1) {
            fwrite(good, 1, len - 100, fp);
        } else if (t == 2) {
            good[len / 3] ^= 0x10;
            fwrite(good, 1, len, fp);
            good[len / 3] ^= 0x10;
        }
        fclose(fp);
        ck_assert_int_eq(ingest(db, "c.sst", "bad.sst", "a.sst", 1), KV_ECORRUPT);
        ck_assert_msg(strstr(kv_error_text(), "bad.sst") != NULL, "%s: %s", kinds[t],
                      kv_error_text());
        ck_assert(exists(p));
        unlink(q);
    }
    free(good);
    struct kv_stats s;
    get_stats(db, &s);
    ck_assert_uint_eq(s.ingested_tables, 1);
    check_model(db);
    db = reopen_db(db, "db", NULL);
    check_model(db);
    /* The good ones still go in afterwards. */
    ck_assert_int_eq(ingest(db, "c.sst", "a.sst", NULL, 1), KV_OK);
    for (uint64_t i = 2000; i < 2100; i++)
        model[i] = 1 + i;
    for (uint64_t i = 1600; i < 1700; i++)
        model[i] = 7 + i;
    check_model(db);
    close_db(db);
}
END_TEST

/* A table this process's writer finished is taken on the writer's word
 * (ingest.h), but not after a byte changed in place right after finish
 * (same inode and size): its change time sends it to the full read, and
 * where the clock's grain hid that, the blocks' checksums still catch it.
 * The same table unchanged then goes in and reads back whole. */
START_TEST(writer_table_changed_in_place_is_refused)
{
    memset(model, 0, sizeof model);
    kv_db *db = open_small("db");
    char p[512];
    test_path(p, sizeof p, "w.sst");
    for (int round = 0; round < 2; round++) {
        write_table("w.sst", 100, 900, 1, 3, round == 1);
        if (round == 0) {
            int fd = open(p, O_RDWR);
            ck_assert_int_ge(fd, 0);
            uint8_t b;
            ck_assert_int_eq(pread(fd, &b, 1, 100), 1);
            b ^= 0x04;
            ck_assert_int_eq(pwrite(fd, &b, 1, 100), 1);
            close(fd);
            ck_assert_int_eq(ingest(db, "w.sst", NULL, NULL, 1), KV_ECORRUPT);
            ck_assert_msg(strstr(kv_error_text(), "w.sst") != NULL, "%s", kv_error_text());
            ck_assert(exists(p));
            unlink(p);
        } else {
            ck_assert_int_eq(ingest(db, "w.sst", NULL, NULL, 1), KV_OK);
        }
        check_model(db);
    }
    db = reopen_db(db, "db", NULL);
    check_model(db);
    close_db(db);
}
END_TEST

static int reverse_cmp(void *ctx, const void *a, size_t al, const void *b, size_t bl)
{
    (void)ctx;
    size_t n = al < bl ? al : bl;
    int c = memcmp(a, b, n);
    return c ? -c : al < bl ? 1 : al > bl ? -1 : 0;
}

START_TEST(comparator_mismatch_is_refused)
{
    kv_comparator rev = {.name = "test.reverse", .compare = reverse_cmp};
    kv_options o;
    kv_options_init(&o);
    o.comparator = &rev;
    char p[512];
    test_path(p, sizeof p, "r.sst");
    kv_table_writer *w;
    ck_assert_int_eq(kv_table_writer_open(p, &o, &w), KV_OK);
    ck_assert_int_eq(kv_table_writer_put(w, "b", 1, "1", 1), KV_OK);
    ck_assert_int_eq(kv_table_writer_put(w, "a", 1, "2", 1), KV_OK);
    ck_assert_int_eq(kv_table_writer_put(w, "b", 1, "2", 1), KV_EINVAL);
    ck_assert_int_eq(kv_table_writer_finish(w), KV_OK);
    kv_db *db = open_db("db", NULL);
    const char *ps[1] = {p};
    ck_assert_int_eq(kv_ingest(db, ps, 1, 1), KV_EINVAL);
    ck_assert(exists(p));
    close_db(db);
    db = open_db("rdb", &o);
    ck_assert_int_eq(kv_ingest(db, ps, 1, 1), KV_OK);
    expect_value(db, "a", 1, "2", 1);
    expect_value(db, "b", 1, "1", 1);
    close_db(db);
}
END_TEST

/* A table another database's compaction wrote goes in and reads right. */
START_TEST(another_databases_table)
{
    memset(model, 0, sizeof model);
    kv_db *src = open_small("src");
    char k[16], v[128];
    for (uint64_t i = 0; i < NKEYS; i += 2) {
        model[i] = 9 + i;
        put_kv(src, k, key(k, i), v, val(v, model[i]));
    }
    compact_all(src);
    close_db(src);
    char dir[512];
    test_path(dir, sizeof dir, "src");
    DIR *d = opendir(dir);
    const char *paths[64];
    char names[64][1024];
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL && n < 64;) {
        size_t l = strlen(e->d_name);
        if (l > 4 && strcmp(e->d_name + l - 4, ".sst") == 0) {
            snprintf(names[n], sizeof names[n], "%s/%s", dir, e->d_name);
            paths[n] = names[n];
            n++;
        }
    }
    closedir(d);
    ck_assert_uint_gt(n, 0);
    kv_db *db = open_small("db");
    put_kv(db, "zz", 2, "1", 1); /* the sequences are foreign: rewritten */
    ck_assert_int_eq(kv_ingest(db, paths, n, 0), KV_OK);
    check_model(db);
    db = reopen_db(db, "db", NULL);
    check_model(db);
    compact_all(db);
    check_model(db);
    close_db(db);
    /* Into a fresh one. */
    db = open_small("db2");
    ck_assert_int_eq(kv_ingest(db, paths, n, 0), KV_OK);
    check_model(db);
    close_db(db);
}
END_TEST

/* Writes still in the memtable (and the log) when a table goes in as it
 * is survive a reopen, which replays the log. */
START_TEST(log_entries_survive_a_fast_ingest)
{
    memset(model, 0, sizeof model);
    kv_db *db = open_small("db");
    char k[16], v[128];
    for (uint64_t i = 0; i < 100; i++) {
        model[i] = 40 + i;
        put_kv(db, k, key(k, i), v, val(v, model[i]));
        if (i == 10) /* the manifest's last sequence passes the writer's 1 */
            ck_assert_int_eq(kv_flush(db), KV_OK);
    }
    write_table("a.sst", 500, 900, 1, 3, 1); /* beside the memtable's keys */
    ck_assert_int_eq(ingest(db, "a.sst", NULL, NULL, 1), KV_OK);
    struct kv_stats s;
    get_stats(db, &s);
    ck_assert_uint_eq(s.level_tables[6], 1); /* as it is */
    ck_assert_uint_eq(s.flushes, 1);         /* the memtable was left alone */
    for (uint64_t i = 100; i < 200; i++) {
        model[i] = 50 + i;
        put_kv(db, k, key(k, i), v, val(v, model[i]));
    }
    check_model(db);
    db = reopen_db(db, "db", NULL);
    check_model(db);
    close_db(db);
}
END_TEST

/* Writers, flushes and compactions while tables are ingested: every
 * ingest is whole, no write is lost, and each key ends as the last of its
 * writes and ingests. */
struct bg {
    kv_db *db;
    _Atomic int stop;
    uint64_t puts;
};

static void *put_loop(void *arg)
{
    struct bg *b = arg;
    char k[16], v[128];
    for (uint64_t n = 0; !atomic_load(&b->stop); n++) {
        uint64_t i = 2000 + n % 1000; /* keys 2000 .. 2999: no ingest has them */
        ck_assert_int_eq(kv_put(b->db, k, key(k, i), v, val(v, 700000 + n)), KV_OK);
        if (n % 500 == 499)
            ck_assert_int_eq(kv_flush(b->db), KV_OK);
        b->puts = n + 1;
    }
    return NULL;
}

START_TEST(ingest_beside_writers)
{
    memset(model, 0, sizeof model);
    kv_db *db = open_small("db");
    struct bg b = {.db = db};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, put_loop, &b), 0);
    for (uint64_t round = 0; round < 12; round++) {
        char name[32];
        snprintf(name, sizeof name, "r%llu.sst", (unsigned long long)round);
        uint64_t from = (round * 137) % 1800;
        write_table(name, from, from + 200, 1 + round % 3, 10000 * (round + 1), 1);
        ck_assert_int_eq(ingest(db, name, NULL, NULL, round % 2), KV_OK);
        if (round % 4 == 3)
            compact_all(db);
    }
    atomic_store(&b.stop, 1);
    pthread_join(th, NULL);
    for (uint64_t n = b.puts > 1000 ? b.puts - 1000 : 0; n < b.puts; n++)
        model[2000 + n % 1000] = 700000 + n;
    check_model(db);
    db = reopen_db(db, "db", NULL);
    check_model(db);
    close_db(db);
}
END_TEST

/* A read-only handle takes no ingest (where this build opens one). */
START_TEST(read_only_handle_is_refused)
{
    kv_db *db = open_db("db", NULL);
    put_str(db, "a", "1");
    close_db(db);
    write_table("t.sst", 0, 10, 1, 1, 0);
    kv_options o;
    kv_options_init(&o);
    o.read_only = 1;
    char p[512];
    test_path(p, sizeof p, "db");
    if (kv_open(p, &o, &db) != KV_OK)
        return; /* read-only handles are not in this build */
    ck_assert_int_eq(ingest(db, "t.sst", NULL, NULL, 1), KV_EINVAL);
    test_path(p, sizeof p, "t.sst");
    ck_assert(exists(p));
    close_db(db);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("ingest");
    TCase *tc = test_tcase(s, "ingest", 120, 1);
    tcase_add_test(tc, writer_contract);
    tcase_add_test(tc, fresh_database_takes_tables_as_they_are);
    tcase_add_test(tc, overlap_is_newer_than_everything);
    tcase_add_test(tc, tombstones_ranges_and_merges);
    tcase_add_test(tc, bad_inputs_change_nothing);
    tcase_add_test(tc, writer_table_changed_in_place_is_refused);
    tcase_add_test(tc, comparator_mismatch_is_refused);
    tcase_add_test(tc, another_databases_table);
    tcase_add_test(tc, log_entries_survive_a_fast_ingest);
    tcase_add_test(tc, ingest_beside_writers);
    tcase_add_test(tc, read_only_handle_is_refused);
    return s;
}
