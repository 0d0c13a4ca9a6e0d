/* check_repair.c - kv_repair and kv_destroy (kv.h, doc/database.md
 * "Repair"):
 *
 *  - a MANIFEST deleted beside tables on several levels and writes only in
 *    the log, with overwrites and deletes across tables: kv_open refuses,
 *    kv_repair rebuilds it, and every acknowledged write reads back (the
 *    newest value of each key, deleted keys absent), by Get and by scan;
 *    a second repair of the sound database changes nothing;
 *  - a database that never compacted keeps its tables as they are;
 *  - tables built with different filter seeds are merged with new filters;
 *  - a table with flipped bytes and one cut short go to lost/ with the old
 *    MANIFEST; every key of the other tables survives; a damaged log goes
 *    to lost/ after its intact prefix is replayed; a MANIFEST of garbage
 *    goes to lost/ as it is;
 *  - blob files: values of 600..4000 bytes (and small ones in the tables)
 *    flushed, compacted and overwritten, the MANIFEST deleted: every key
 *    reads its newest value, the new manifest names the blob files with
 *    exactly the garbage its tables leave (each file's records less those
 *    a table refers to; each table's blob range from its references), and
 *    live blob bytes are the newest values'; a blob file with a flipped
 *    byte loses that record alone and one deleted is missed: the entries
 *    whose values they held are dropped (their keys read the next older
 *    version, or nothing), every other key survives; 40 values in one
 *    blob file, one record forged (a flipped byte, compression 1, a length
 *    of 2^32-1), or one table entry's reference made undecodable: 39 read
 *    back exactly, the forged one absent, nothing else lost;
 *  - a kill at every step of a repair (each file-layer call that changes
 *    the disk, and the manifest's commit), with and without blob files:
 *    the database is then either repaired, or refused and repaired by the
 *    next kv_repair, with every write there;
 *  - kv_destroy removes kv's files only, the directory when that empties
 *    it, refuses an open database; bad arguments everywhere. */
#define _XOPEN_SOURCE 700
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <kv/kv.h>
#include <kv/sstable.h> /* tables and blob files read as they are */

#include "../kv/manifest.h" /* kv_manifest_set_commit_hook: a kill at the commit */
#include "fixture.h"
#include "util/file.h"      /* kv_file_set_io: a kill at a file-layer call */

/* ---- fixture ---------------------------------------------------------------------- */

/* kv_repair_ex, and with KV_TEST_VERBOSE set, one line of what it
 * recovered, named by the test: the figures a reader of the run wants. */
static int repair_ex_shown(const char *test, const char *d, const kv_options *o,
                           kv_repair_report *rep)
{
    int rc = (kv_repair_ex)(d, o, rep);
    if (rc == KV_OK && rep && getenv("KV_TEST_VERBOSE"))
        printf("%.*s: %llu tables found, %llu to lost/, %llu kept, %llu merged, %llu written; "
               "%llu logs replayed (%llu to lost/), %llu records recovered; last seq %llu; "
               "%llu blob files found, %llu to lost/ damaged, %llu unused, %llu kept; "
               "%llu values lost\n",
               (int)(strlen(test) - (strstr(test, "_fn") ? 3 : 0)), test,
               (unsigned long long)rep->tables_found,
               (unsigned long long)rep->tables_lost, (unsigned long long)rep->tables_kept,
               (unsigned long long)rep->tables_merged, (unsigned long long)rep->tables_written,
               (unsigned long long)rep->logs_replayed, (unsigned long long)rep->logs_lost,
               (unsigned long long)rep->records_recovered, (unsigned long long)rep->last_seq,
               (unsigned long long)rep->blobs_found, (unsigned long long)rep->blobs_lost,
               (unsigned long long)rep->blobs_unused, (unsigned long long)rep->blobs_kept,
               (unsigned long long)rep->values_lost);
    if (rc == KV_OK && rep && rep->text && getenv("KV_TEST_VERBOSE") &&
        atoi(getenv("KV_TEST_VERBOSE")) > 1)
        fputs(rep->text, stdout);
    return rc;
}
#define kv_repair_ex(d, o, rep) repair_ex_shown(__func__, d, o, rep)

static char *join(const char *a, const char *b)
{
    static char buf[4][800];
    static int next;
    char *p = buf[next++ % 4];
    int n = snprintf(p, sizeof buf[0], "%s/%s", a, b);
    ck_assert(n > 0 && (size_t)n < sizeof buf[0]);
    return p;
}

static int present(const char *p)
{
    struct stat st;
    return lstat(p, &st) == 0;
}

/* Small tables and levels, so that a few thousand keys spread over levels. */
static void small_options(kv_options *o)
{
    kv_options_init(o);
    o->write_buffer_size = 64u << 10;
    o->target_file_size = 64u << 10;
    o->max_bytes_for_level_base = 128u << 10;
    o->block_size = 1024;
    o->l0_compaction_trigger = 4;
    o->compression = KV_COMPRESSION_NONE; /* sizes as written: levels fill predictably */
    o->idle_compaction_ms = 0; /* the fills leave tables in level 0: no idle merge of them */
    o->dynamic_level_bytes = 0; /* levels 1, 2, ... by fixed sizes: the fills' places */
}

/* ---- the model: what every key must read as ------------------------------------ */

#define NKEYS 3000

struct model {
    int live[NKEYS];
    char val[NKEYS][120];
};

static void put(kv_db *db, struct model *m, int i, int round)
{
    char k[16];
    key_of(k, sizeof k, "key", 5, i);
    int n = snprintf(m->val[i], sizeof m->val[i], "value-%d-of-%s-", round, k);
    memset(m->val[i] + n, 'a' + round % 26, 100 - (size_t)n);
    m->val[i][100] = '\0';
    ck_assert_int_eq(kv_put(db, k, strlen(k), m->val[i], 100), KV_OK);
    m->live[i] = 1;
}

static void del(kv_db *db, struct model *m, int i)
{
    char k[16];
    key_of(k, sizeof k, "key", 5, i);
    ck_assert_int_eq(kv_delete(db, k, strlen(k)), KV_OK);
    m->live[i] = 0;
}

/* Every key by Get, then the whole database by scan, against the model. */
static void check_model(kv_db *db, const struct model *m, int from, int to)
{
    size_t live = 0;
    for (int i = from; i < to; i++) {
        char k[16];
        key_of(k, sizeof k, "key", 5, i);
        void *v;
        size_t vlen;
        int rc = kv_get(db, k, strlen(k), &v, &vlen);
        if (m->live[i]) {
            ck_assert_msg(rc == KV_OK, "%s: %d, want its value", k, rc);
            ck_assert_uint_eq(vlen, 100);
            ck_assert_msg(memcmp(v, m->val[i], 100) == 0, "%s: an older value", k);
            kv_free(v);
            live++;
        } else {
            ck_assert_msg(rc == KV_NOTFOUND, "%s: %d, want KV_NOTFOUND (deleted)", k, rc);
        }
    }
    kv_iter *it;
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    size_t seen = 0;
    for (kv_iter_seek_first(it); kv_iter_valid(it); kv_iter_next(it)) {
        size_t klen, vlen;
        const char *k = kv_iter_key(it, &klen);
        const void *v = kv_iter_value(it, &vlen);
        ck_assert_uint_eq(klen, 8);
        int i = atoi(k + 3);
        ck_assert_msg(i >= from && i < to && m->live[i], "scan: %.*s should not be there",
                      (int)klen, k);
        ck_assert(vlen == 100 && memcmp(v, m->val[i], 100) == 0);
        seen++;
    }
    ck_assert_int_eq(kv_iter_status(it), KV_OK);
    kv_iter_free(it);
    ck_assert_uint_eq(seen, live);
}

/* Reopens d with level 1's target cut to one table, and waits until the
 * background compaction has moved level 1 down into level 2 (`settled`:
 * and has no work left). */
static kv_db *reopen_tight(const char *d, const kv_options *o, int settled)
{
    kv_options tight = *o;
    tight.max_bytes_for_level_base = tight.target_file_size;
    kv_db *db = open_db(d, &tight);
    for (int tries = 0;; tries++) {
        struct kv_stats st;
        ck_assert_int_eq(kv_stats(db, &st), KV_OK);
        if (st.level_bytes[1] <= tight.max_bytes_for_level_base && st.level_tables[2] > 0 &&
            (!settled || (!st.compaction_pending && !st.compaction_running)))
            return db;
        ck_assert_msg(tries < 3000, "level 1 never moved down");
        usleep(10000);
    }
}

/* Fills `d` with keys [0, n): every key, compacted into level 1; then
 * overwrites and deletes flushed into level 0; then, reopened with a level
 * 1 too large for its target, the background compaction moves level 1's
 * tables to level 2 under numbers above the level-0 table's, with older
 * sequences (so level 0's order by number would no longer be newest
 * first); then more overwrites and deletes left in the log only. Asserts
 * that the data does lie in all those places. */
static void fill_three_places(const char *d, const kv_options *o, struct model *m, int n)
{
    kv_options big = *o;
    big.max_bytes_for_level_base = 64u << 20;
    kv_db *db = open_db(d, &big);
    for (int i = 0; i < n; i++)
        put(db, m, i, 0);
    ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 0), KV_OK);
    for (int i = 0; i < n; i += 3)
        put(db, m, i, 1);
    for (int i = 0; i < n; i += 5)
        del(db, m, i);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    ck_assert_int_eq(kv_close(db), KV_OK);

    db = reopen_tight(d, o, 0);
    struct kv_stats st;
    for (int i = 1; i < n; i += 13)
        put(db, m, i, 2); /* some of them deleted before: written again */
    for (int i = 2; i < n; i += 17)
        del(db, m, i);
    ck_assert_int_eq(kv_stats(db, &st), KV_OK);
    ck_assert_msg(st.level_tables[0] > 0 && st.level_tables[2] > 0,
                  "want tables in levels 0 and 2");
    ck_assert_int_eq(kv_close(db), KV_OK);
    /* The last writes are in a log only. */
    DIR *dd = opendir(d);
    ck_assert_ptr_nonnull(dd);
    struct dirent *de;
    off_t log_bytes = 0;
    while ((de = readdir(dd)) != NULL)
        if (strstr(de->d_name, ".log")) {
            struct stat sb;
            ck_assert_int_eq(stat(join(d, de->d_name), &sb), 0);
            log_bytes += sb.st_size;
        }
    closedir(dd);
    ck_assert_msg(log_bytes > 0, "want writes in the log only");
}

static void delete_manifest(const char *d)
{
    ck_assert_int_eq(unlink(join(d, "MANIFEST")), 0);
    kv_db *db;
    ck_assert_int_eq(kv_open(d, NULL, &db), KV_ECORRUPT);
    ck_assert_ptr_null(db);
}

/* ---- rebuilding a lost manifest ---------------------------------------------------- */

/* A database filled in three places (fill_three_places) under
 * small_options (*o), its manifest then deleted; returns the model of
 * what every key must read as. */
static struct model *lost_manifest(kv_options *o)
{
    static struct model m;
    small_options(o);
    memset(&m, 0, sizeof m);
    fill_three_places(test_dir, o, &m, NKEYS);
    delete_manifest(test_dir);
    return &m;
}

START_TEST(repair_after_manifest_deleted)
{
    kv_options o;
    struct model *m = lost_manifest(&o);

    kv_repair_report rep;
    int rc = kv_repair_ex(test_dir, &o, &rep);
    ck_assert_msg(rc == KV_OK, "kv_repair: %d: %s", rc, kv_error_text());
    ck_assert_ptr_nonnull(rep.text);
    ck_assert_uint_gt(rep.tables_found, 1);
    ck_assert_uint_eq(rep.tables_lost, 0);
    ck_assert_uint_ge(rep.logs_replayed, 1);
    ck_assert_uint_gt(rep.records_recovered, 0);
    ck_assert_uint_eq(rep.logs_lost, 0);
    /* Compaction wrote old sequences under new numbers: merged. */
    ck_assert_int_eq(rep.rewritten, 1);
    ck_assert_uint_eq(rep.tables_merged, rep.tables_found);
    uint64_t last = rep.last_seq;
    kv_repair_free(&rep);
    ck_assert_ptr_null(rep.text);
    ck_assert(!present(join(test_dir, "repair.tmp")));

    kv_db *db = open_db(test_dir, &o);
    check_model(db, m, 0, NKEYS);
    /* Writes go on after the repaired sequence, and survive a reopen. */
    put(db, m, 7, 3);
    del(db, m, 8);
    ck_assert_int_eq(kv_close(db), KV_OK);
    db = open_db(test_dir, &o);
    check_model(db, m, 0, NKEYS);
    ck_assert_int_eq(kv_close(db), KV_OK);

    /* A sound database repaired again: the same data, the old manifest
     * kept in lost/. */
    ck_assert_int_eq(kv_repair_ex(test_dir, &o, &rep), KV_OK);
    ck_assert_uint_ge(rep.last_seq, last + 2);
    kv_repair_free(&rep);
    ck_assert(present(join(test_dir, "lost/MANIFEST")));
    db = open_db(test_dir, &o);
    check_model(db, m, 0, NKEYS);
    ck_assert_int_eq(kv_close(db), KV_OK);
}
END_TEST

/* Repair under dynamic level sizes (kv_options.dynamic_level_bytes, the
 * default) puts the tables it merges in the bottom level, where that shape
 * keeps most of the data, and nothing in the levels between: the base
 * level follows, and every key reads as before, also once the background
 * compaction has had its say and after a reopen. */
START_TEST(repair_under_dynamic_level_sizes)
{
    kv_options o;
    struct model *m = lost_manifest(&o);

    kv_options dyn = o;
    dyn.dynamic_level_bytes = 1;
    kv_repair_report rep;
    int rc = kv_repair_ex(test_dir, &dyn, &rep);
    ck_assert_msg(rc == KV_OK, "kv_repair: %d: %s", rc, kv_error_text());
    ck_assert_int_eq(rep.rewritten, 1);
    kv_repair_free(&rep);

    kv_db *db = open_db(test_dir, &dyn);
    struct kv_stats st;
    ck_assert_int_eq(kv_stats(db, &st), KV_OK);
    ck_assert_uint_gt(st.level_tables[6], 0);
    for (int l = 1; l < 6; l++)
        ck_assert_msg(st.level_tables[l] == 0, "level %d holds %llu tables", l,
                      (unsigned long long)st.level_tables[l]);
    check_model(db, m, 0, NKEYS);
    for (int tries = 0;; tries++) {
        ck_assert_int_eq(kv_stats(db, &st), KV_OK);
        if (!st.compaction_pending && !st.compaction_running)
            break;
        ck_assert_msg(tries < 3000, "compaction never settled");
        usleep(10000);
    }
    ck_assert_uint_ge(st.base_level, 1);
    for (uint64_t l = 1; l < st.base_level; l++)
        ck_assert_uint_eq(st.level_tables[l], 0);
    ck_assert_uint_gt(st.level_tables[6], 0);
    check_model(db, m, 0, NKEYS);
    ck_assert_int_eq(kv_close(db), KV_OK);
    db = open_db(test_dir, &dyn);
    check_model(db, m, 0, NKEYS);
    ck_assert_int_eq(kv_close(db), KV_OK);
}
END_TEST

/* A keyed database (kv_options.filter_keyed_hash) loses its secret with
 * its manifest, and no table holds it: repair rebuilds every filter with
 * the store's plain hash, so every key is still found, and the filters
 * still turn missing keys away. A keyed open afterwards makes a new secret
 * for the tables it writes. */
START_TEST(repair_of_a_keyed_database)
{
    kv_options o;
    small_options(&o);
    o.filter_keyed_hash = 1;
    static struct model m;
    memset(&m, 0, sizeof m);
    fill_three_places(test_dir, &o, &m, NKEYS);
    delete_manifest(test_dir);

    kv_repair_report rep;
    int rc = kv_repair_ex(test_dir, &o, &rep);
    ck_assert_msg(rc == KV_OK, "kv_repair: %d: %s", rc, kv_error_text());
    ck_assert_uint_eq(rep.tables_lost, 0);
    ck_assert_int_eq(rep.rewritten, 1); /* keyed filters cannot be kept */
    kv_repair_free(&rep);

    kv_db *db = open_db(test_dir, &o);
    check_model(db, &m, 0, NKEYS);
    struct kv_stats before, after;
    ck_assert_int_eq(kv_stats(db, &before), KV_OK);
    for (int i = 0; i < 2000; i++) {
        char k[32];
        snprintf(k, sizeof k, "key%05d~", i); /* within the tables' ranges */
        void *v;
        size_t n;
        ck_assert_int_eq(kv_get(db, k, strlen(k), &v, &n), KV_NOTFOUND);
    }
    ck_assert_int_eq(kv_stats(db, &after), KV_OK);
    ck_assert_msg(after.filter_negatives - before.filter_negatives > 1900,
                  "filters turned away %llu of 2000 missing keys",
                  (unsigned long long)(after.filter_negatives - before.filter_negatives));
    /* New writes under the new secret, across a reopen. */
    for (int i = 0; i < NKEYS; i += 7)
        put(db, &m, i, 4);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    ck_assert_int_eq(kv_close(db), KV_OK);
    db = open_db(test_dir, &o);
    check_model(db, &m, 0, NKEYS);
    ck_assert_int_eq(kv_close(db), KV_OK);
}
END_TEST

START_TEST(repair_keeps_level0_tables_as_they_are)
{
    /* Flushes only (no compaction): level 0 by number is newest first, so
     * the tables stay, unchanged, and the newest version still wins. */
    kv_options o;
    small_options(&o);
    o.l0_compaction_trigger = 20;
    o.l0_slowdown_trigger = 30;
    o.l0_stop_trigger = 40;
    static struct model m;
    memset(&m, 0, sizeof m);
    kv_db *db = open_db(test_dir, &o);
    for (int round = 0; round < 3; round++) {
        for (int i = round; i < 400; i += round + 1)
            put(db, &m, i, round);
        for (int i = 3 * round; i < 400; i += 7 + round)
            del(db, &m, i);
        ck_assert_int_eq(kv_flush(db), KV_OK);
    }
    struct kv_stats st;
    ck_assert_int_eq(kv_stats(db, &st), KV_OK);
    ck_assert_uint_eq(st.level_tables[0], st.tables);
    uint64_t tables = st.tables;
    ck_assert_uint_ge(tables, 3);
    ck_assert_int_eq(kv_close(db), KV_OK);
    delete_manifest(test_dir);

    kv_repair_report rep;
    ck_assert_int_eq(kv_repair_ex(test_dir, &o, &rep), KV_OK);
    ck_assert_int_eq(rep.rewritten, 0);
    ck_assert_uint_eq(rep.tables_kept, tables);
    ck_assert_uint_eq(rep.tables_found, tables);
    kv_repair_free(&rep);
    db = open_db(test_dir, &o);
    ck_assert_int_eq(kv_stats(db, &st), KV_OK);
    ck_assert_uint_ge(st.level_tables[0], tables); /* the log's table, if any, beside them */
    check_model(db, &m, 0, 400);
    ck_assert_int_eq(kv_close(db), KV_OK);
}
END_TEST

/* Copies the regular files of directory a into b (made). */
static void copy_dir(const char *a, const char *b)
{
    ck_assert(mkdir(b, 0755) == 0 || errno == EEXIST);
    DIR *d = opendir(a);
    ck_assert_ptr_nonnull(d);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        struct stat st;
        char from[800], to[800];
        snprintf(from, sizeof from, "%s/%s", a, de->d_name);
        snprintf(to, sizeof to, "%s/%s", b, de->d_name);
        if (lstat(from, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
        ck_assert(in && out);
        char buf[65536];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, in)) > 0)
            ck_assert_uint_eq(fwrite(buf, 1, n, out), n);
        fclose(in);
        ck_assert_int_eq(fclose(out), 0);
    }
    closedir(d);
}

START_TEST(repair_merges_tables_of_different_seeds)
{
    /* Two databases, two random filter seeds; B's tables moved into A. A
     * Get hashes once, with one seed, so B's filters would turn B's keys
     * away: repair must rebuild them. */
    kv_options o;
    small_options(&o);
    static struct model m;
    memset(&m, 0, sizeof m);
    char a[700], b[700];
    snprintf(a, sizeof a, "%s/a", test_dir);
    snprintf(b, sizeof b, "%s/b", test_dir);
    kv_db *db = open_db(a, &o);
    for (int i = 0; i < 500; i++)
        put(db, &m, i, 0);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    ck_assert_int_eq(kv_close(db), KV_OK);
    db = open_db(b, &o);
    for (int i = 500; i < 1000; i++)
        put(db, &m, i, 1);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    ck_assert_int_eq(kv_close(db), KV_OK);
    DIR *d = opendir(b);
    struct dirent *de;
    int moved = 0;
    while ((de = readdir(d)) != NULL)
        if (strstr(de->d_name, ".sst")) {
            char to[32];
            snprintf(to, sizeof to, "%06d.sst", 500000 + moved++);
            ck_assert_int_eq(rename(join(b, de->d_name), join(a, to)), 0);
        }
    closedir(d);
    ck_assert_int_gt(moved, 0);
    unlink(join(a, "MANIFEST"));

    kv_repair_report rep;
    ck_assert_int_eq(kv_repair_ex(a, &o, &rep), KV_OK);
    ck_assert_int_eq(rep.rewritten, 1);
    ck_assert_ptr_nonnull(strstr(rep.text, "different seeds"));
    ck_assert_uint_gt(rep.next_file, 500000);
    kv_repair_free(&rep);
    db = open_db(a, &o);
    check_model(db, &m, 0, 1000);
    ck_assert_int_eq(kv_close(db), KV_OK);
}
END_TEST


/* ---- blob values: a model of keys whose values lie in blob files ------------------- */

#define BKEYS 2000

struct bmodel {
    int live[BKEYS];
    unsigned round[BKEYS]; /* the write its value comes from */
};

static size_t bkey(int i, char *k)
{
    return (size_t)snprintf(k, 16, "blob%05d", i);
}

/* The size of key i's value written in `round`: 600..4000 bytes (a blob
 * file's, at the default min_blob_size of 512), or one in five 10..409
 * (kept in the tables). */
static size_t bsize(int i, unsigned round)
{
    uint64_t x = splitmix(((uint64_t)i << 20) ^ round);
    return x % 5 == 0 ? 10 + (size_t)(x >> 8) % 400 : 600 + (size_t)(x >> 8) % 3401;
}

/* Key i's value of `round`: its first 8 bytes say whose it is. */
static void bvalue(uint8_t *v, size_t n, int i, unsigned round)
{
    uint64_t x = splitmix(((uint64_t)i << 32) ^ round ^ 0x5bd1e995u);
    for (size_t j = 0; j < n; j++) {
        if (j % 8 == 0)
            x = splitmix(x);
        v[j] = (uint8_t)(x >> (8 * (j % 8)));
    }
    memcpy(v, &i, 4);
    memcpy(v + 4, &round, 4);
}

static void bput(kv_db *db, struct bmodel *m, int i, unsigned round)
{
    char k[16];
    uint8_t v[4096];
    size_t n = bsize(i, round);
    bvalue(v, n, i, round);
    ck_assert_int_eq(kv_put(db, k, bkey(i, k), v, n), KV_OK);
    m->live[i] = 1;
    m->round[i] = round;
}

static void bdel(kv_db *db, struct bmodel *m, int i)
{
    char k[16];
    ck_assert_int_eq(kv_delete(db, k, bkey(i, k)), KV_OK);
    m->live[i] = 0;
}

/* Every key of [0, n) by Get, then the database by scan, against m. */
static void check_bmodel(kv_db *db, const struct bmodel *m, int n)
{
    uint8_t want[4096];
    size_t live = 0;
    for (int i = 0; i < n; i++) {
        char k[16];
        size_t kl = bkey(i, k);
        void *v;
        size_t vlen;
        int rc = kv_get(db, k, kl, &v, &vlen);
        if (!m->live[i]) {
            ck_assert_msg(rc == KV_NOTFOUND, "%s: %d, want KV_NOTFOUND", k, rc);
            continue;
        }
        ck_assert_msg(rc == KV_OK, "%s: %d (%s), want its value", k, rc, kv_error_text());
        size_t wn = bsize(i, m->round[i]);
        bvalue(want, wn, i, m->round[i]);
        unsigned got_round = 0;
        if (vlen >= 8)
            memcpy(&got_round, (uint8_t *)v + 4, 4);
        ck_assert_msg(vlen == wn && memcmp(v, want, wn) == 0,
                      "%s: %zu bytes of round %u, want %zu of round %u", k, vlen, got_round, wn,
                      m->round[i]);
        kv_free(v);
        live++;
    }
    kv_iter *it;
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    size_t seen = 0;
    for (kv_iter_seek_first(it); kv_iter_valid(it); kv_iter_next(it)) {
        size_t klen, vlen;
        const char *k = kv_iter_key(it, &klen);
        ck_assert_uint_eq(klen, 9);
        int i = atoi(k + 4);
        ck_assert_msg(i >= 0 && i < n && m->live[i], "scan: %.*s should not be there",
                      (int)klen, k);
        const void *v = kv_iter_value(it, &vlen);
        size_t wn = bsize(i, m->round[i]);
        bvalue(want, wn, i, m->round[i]);
        ck_assert_msg(v && vlen == wn && memcmp(v, want, wn) == 0, "scan: %.*s: wrong value",
                      (int)klen, k);
        seen++;
    }
    ck_assert_int_eq(kv_iter_status(it), KV_OK);
    kv_iter_free(it);
    ck_assert_uint_eq(seen, live);
}

/* Bytes the blob records of the live keys' values take, but those of the
 * keys in_tables[] marks (NULL: none), whose values the tables hold. */
static uint64_t blob_live_bytes(const struct bmodel *m, int n, const int *in_tables)
{
    uint64_t sum = 0;
    for (int i = 0; i < n; i++) {
        size_t sz = bsize(i, m->round[i]);
        if (m->live[i] && sz >= 512 && !(in_tables && in_tables[i]))
            sum += kv_blob_record_size(9, sz);
    }
    return sum;
}

/* The number of <n>.blob files in d. */
static size_t count_blob_files(const char *d)
{
    DIR *dd = opendir(d);
    ck_assert_ptr_nonnull(dd);
    struct dirent *de;
    size_t n = 0;
    while ((de = readdir(dd)) != NULL) {
        const char *dot = strrchr(de->d_name, '.');
        n += dot && strcmp(dot, ".blob") == 0;
    }
    closedir(dd);
    return n;
}

/* The manifest of the closed database d against its tables and blob
 * files: every reference a live table holds names a blob file the
 * manifest names; each table's blob_lo/blob_hi are the least and greatest
 * file its references name (0/0 for none); each named file is in the
 * directory, some table refers to it, and its garbage is exactly its
 * records, and their bytes, that no reference names; no other blob file
 * is in d. Returns the live bytes (record bytes less garbage) of all. */
static uint64_t check_blob_accounting(const char *d)
{
    kv_manifest *man;
    ck_assert_int_eq(kv_manifest_open(d, 0, NULL, &man), KV_OK);
    kv_manifest_state st;
    kv_table_meta *t;
    size_t nt;
    ck_assert_int_eq(kv_manifest_load(man, &st, &t, &nt), KV_OK);
    kv_manifest_blob *b;
    size_t nb;
    ck_assert_int_eq(kv_manifest_load_blobs(man, &b, &nb), KV_OK);
    kv_manifest_close(man);
    uint64_t *refs = calloc(nb + 1, sizeof *refs), *bytes = calloc(nb + 1, sizeof *bytes);
    ck_assert(refs && bytes);
    for (size_t i = 0; i < nt; i++) {
        char name[32];
        snprintf(name, sizeof name, "%06llu.sst", (unsigned long long)t[i].number);
        kv_sst_reader *rd;
        ck_assert_int_eq(kv_sst_reader_open(join(d, name), NULL, t[i].number, &rd), KV_OK);
        kv_sst_iter *it;
        ck_assert_int_eq(kv_sst_iter_new(rd, &it), KV_OK);
        uint64_t lo = 0, hi = 0;
        uint8_t user[64];
        for (kv_sst_iter_seek_first(it); kv_sst_iter_valid(it); kv_sst_iter_next(it)) {
            size_t klen, vlen;
            const void *k = kv_sst_iter_key(it, &klen);
            const void *v = kv_sst_iter_value(it, &vlen);
            kv_sst_store_key sk;
            ck_assert_int_eq(kv_sst_store_key_decode(k, klen, user, sizeof user, &sk), KV_OK);
            if (sk.kind != KV_SST_KIND_BLOB)
                continue;
            kv_blob_ref ref;
            ck_assert_int_eq(kv_blob_ref_decode(v, vlen, &ref), KV_OK);
            size_t j = 0;
            while (j < nb && b[j].number != ref.number)
                j++;
            ck_assert_msg(j < nb, "%s refers to blob file %llu, which the manifest does not name",
                          name, (unsigned long long)ref.number);
            refs[j]++;
            bytes[j] += kv_blob_record_size(sk.user_len, ref.size);
            if (!lo || ref.number < lo)
                lo = ref.number;
            if (ref.number > hi)
                hi = ref.number;
        }
        ck_assert_int_eq(kv_sst_iter_status(it), KV_OK);
        kv_sst_iter_free(it);
        kv_sst_reader_close(rd);
        ck_assert_msg(t[i].blob_lo == lo && t[i].blob_hi == hi,
                      "%s: blob range %llu..%llu in the manifest, %llu..%llu in the table", name,
                      (unsigned long long)t[i].blob_lo, (unsigned long long)t[i].blob_hi,
                      (unsigned long long)lo, (unsigned long long)hi);
    }
    uint64_t live = 0;
    for (size_t j = 0; j < nb; j++) {
        char name[32];
        snprintf(name, sizeof name, "%06llu.blob", (unsigned long long)b[j].number);
        struct stat sb;
        ck_assert_msg(stat(join(d, name), &sb) == 0 && (uint64_t)sb.st_size == b[j].file_size,
                      "%s: missing, or not of its recorded size", name);
        ck_assert_msg(refs[j] > 0, "%s: named, but no table refers to it", name);
        ck_assert_msg(b[j].records - b[j].garbage_records == refs[j],
                      "%s: %llu records, %llu garbage, but %llu referred to", name,
                      (unsigned long long)b[j].records, (unsigned long long)b[j].garbage_records,
                      (unsigned long long)refs[j]);
        ck_assert_msg(b[j].record_bytes - b[j].garbage_bytes == bytes[j],
                      "%s: %llu record bytes, %llu garbage, but %llu referred to", name,
                      (unsigned long long)b[j].record_bytes, (unsigned long long)b[j].garbage_bytes,
                      (unsigned long long)bytes[j]);
        live += bytes[j];
    }
    ck_assert_uint_eq(count_blob_files(d), nb);
    kv_manifest_free_tables(t, nt);
    free(b);
    free(refs);
    free(bytes);
    return live;
}

/* Live blob bytes as kv_inspect gives them: record bytes less garbage;
 * *files: how many files, *garbage: their garbage bytes. */
static uint64_t inspect_live(const char *d, size_t *files, uint64_t *garbage)
{
    kv_dir_info *info;
    ck_assert_int_eq(kv_inspect(d, &info), KV_OK);
    uint64_t live = 0;
    *garbage = 0;
    for (size_t i = 0; i < info->nblobs; i++) {
        ck_assert(info->blobs[i].present);
        live += info->blobs[i].record_bytes - info->blobs[i].garbage_bytes;
        *garbage += info->blobs[i].garbage_bytes;
    }
    *files = info->nblobs;
    kv_inspect_free(info);
    return live;
}

/* fill_three_places with blob values: every key (round 0) compacted into
 * level 1; a third overwritten and a fifth deleted (round 1), flushed to
 * level 0; reopened tight, level 1 moves to level 2 under higher numbers
 * with older sequences (so repair must merge); then a few overwrites
 * (round 2) and deletes in the log only, whose keys in_log[] marks. Then
 * values are in many blob files, with garbage from the compactions. */
static void bfill(const char *d, const kv_options *o, struct bmodel *m, int *in_log)
{
    kv_options big = *o;
    big.max_bytes_for_level_base = 64u << 20;
    kv_db *db = open_db(d, &big);
    for (int i = 0; i < BKEYS; i++)
        bput(db, m, i, 0);
    ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 0), KV_OK);
    for (int i = 0; i < BKEYS; i += 3)
        bput(db, m, i, 1);
    for (int i = 0; i < BKEYS; i += 5)
        bdel(db, m, i);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    ck_assert_int_eq(kv_close(db), KV_OK);

    db = reopen_tight(d, o, 1);
    struct kv_stats st;
    ck_assert_int_eq(kv_stats(db, &st), KV_OK);
    ck_assert_uint_gt(st.blob_files, 2);
    /* Under one memtable's worth: these stay in the log. */
    for (int i = 1; i < BKEYS; i += 151) {
        bput(db, m, i, 2);
        in_log[i] = 1;
    }
    for (int i = 2; i < BKEYS; i += 97) {
        bdel(db, m, i);
        in_log[i] = 1;
    }
    ck_assert_int_eq(kv_stats(db, &st), KV_OK);
    ck_assert_msg(st.level_tables[0] + st.level_tables[1] > 0 && st.level_tables[2] > 0,
                  "want tables in levels 0 or 1, and 2: %llu %llu %llu %llu",
                  (unsigned long long)st.level_tables[0], (unsigned long long)st.level_tables[1],
                  (unsigned long long)st.level_tables[2], (unsigned long long)st.level_tables[3]);
    ck_assert_int_eq(kv_close(db), KV_OK);
}

START_TEST(repair_of_blob_values)
{
    kv_options o;
    small_options(&o);
    ck_assert_uint_eq(o.min_blob_size, 512); /* the default */
    static struct bmodel m;
    static int in_log[BKEYS];
    memset(&m, 0, sizeof m);
    memset(in_log, 0, sizeof in_log);
    bfill(test_dir, &o, &m, in_log);
    size_t before = count_blob_files(test_dir);
    delete_manifest(test_dir);

    kv_repair_report rep;
    int rc = kv_repair_ex(test_dir, &o, &rep);
    ck_assert_msg(rc == KV_OK, "kv_repair: %d: %s", rc, kv_error_text());
    ck_assert_uint_eq(rep.tables_lost, 0);
    ck_assert_uint_eq(rep.logs_lost, 0);
    ck_assert_uint_ge(rep.logs_replayed, 1);
    ck_assert_int_eq(rep.rewritten, 1);
    ck_assert_uint_eq(rep.blobs_found, before);
    ck_assert_uint_eq(rep.blobs_lost, 0);
    ck_assert_uint_eq(rep.values_lost, 0);
    ck_assert_uint_gt(rep.blobs_kept, 0);
    ck_assert_uint_eq(rep.blobs_kept + rep.blobs_unused, rep.blobs_found);
    ck_assert_ptr_nonnull(strstr(rep.text, ".blob: readable"));
    uint64_t unused = rep.blobs_unused;
    kv_repair_free(&rep);
    /* Those no kept entry refers to are in lost/, not deleted. */
    DIR *dd = opendir(join(test_dir, "lost"));
    size_t in_lost = 0;
    if (dd) {
        struct dirent *de;
        while ((de = readdir(dd)) != NULL)
            in_lost += strstr(de->d_name, ".blob") != NULL;
        closedir(dd);
    }
    ck_assert_uint_eq(in_lost, unused);

    /* The manifest's garbage is what the tables leave, and the live bytes
     * are the newest values' (those only in the log are in the tables:
     * repair writes the log's values as they were written). */
    uint64_t live = check_blob_accounting(test_dir), garbage;
    size_t files;
    ck_assert_uint_eq(inspect_live(test_dir, &files, &garbage), live);
    ck_assert_uint_eq(live, blob_live_bytes(&m, BKEYS, in_log));
    ck_assert_uint_eq(files, count_blob_files(test_dir));
    ck_assert_uint_gt(garbage, 0); /* overwritten and deleted values, still in their files */

    kv_db *db = open_db(test_dir, &o);
    check_bmodel(db, &m, BKEYS);
    /* Writes go on, compactions count garbage from the repaired counts. */
    for (int i = 0; i < BKEYS; i += 11)
        bput(db, &m, i, 3);
    ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 0), KV_OK);
    check_bmodel(db, &m, BKEYS);
    ck_assert_int_eq(kv_close(db), KV_OK);
    live = check_blob_accounting(test_dir);
    ck_assert_uint_eq(live, blob_live_bytes(&m, BKEYS, NULL));

    /* A sound database repaired again: the same values, the same counts. */
    ck_assert_int_eq(kv_repair_ex(test_dir, &o, &rep), KV_OK);
    ck_assert_uint_eq(rep.blobs_lost + rep.blobs_unused + rep.values_lost, 0);
    ck_assert_uint_eq(rep.blobs_kept, rep.blobs_found);
    kv_repair_free(&rep);
    ck_assert_uint_eq(check_blob_accounting(test_dir), live);
    db = open_db(test_dir, &o);
    check_bmodel(db, &m, BKEYS);
    ck_assert_int_eq(kv_close(db), KV_OK);
}
END_TEST

/* ---- damage ------------------------------------------------------------------------ */

static int cmp_name(const void *a, const void *b)
{
    return strcmp(a, b);
}

/* The table files of d, by number (at most n). */
static int list_tables(const char *d, char names[][32], int n)
{
    DIR *dd = opendir(d);
    ck_assert_ptr_nonnull(dd);
    struct dirent *de;
    int k = 0;
    while ((de = readdir(dd)) != NULL) {
        size_t len = strlen(de->d_name);
        if (len < 32 && strstr(de->d_name, ".sst") && !strstr(de->d_name, ".tmp") && k < n)
            memcpy(names[k++], de->d_name, len + 1);
    }
    closedir(dd);
    qsort(names, (size_t)k, 32, cmp_name);
    return k;
}

START_TEST(repair_moves_damaged_tables_to_lost)
{
    /* Four tables of disjoint key ranges (400 keys each). One gets bytes
     * flipped in its first data block, one is cut to half; the MANIFEST
     * stays (repair replaces a sound one too, keeping it in lost/). */
    kv_options o;
    small_options(&o);
    o.l0_compaction_trigger = 20;
    o.l0_slowdown_trigger = 30;
    o.l0_stop_trigger = 40;
    static struct model m;
    memset(&m, 0, sizeof m);
    kv_db *db = open_db(test_dir, &o);
    for (int t = 0; t < 4; t++) {
        for (int i = t * 400; i < t * 400 + 400; i++)
            put(db, &m, i, t);
        ck_assert_int_eq(kv_flush(db), KV_OK);
    }
    ck_assert_int_eq(kv_close(db), KV_OK);
    char names[8][32];
    ck_assert_int_eq(list_tables(test_dir, names, 8), 4);

    /* Table 1: bytes flipped at offset 100 (its first data block). */
    int fd = open(join(test_dir, names[1]), O_RDWR);
    ck_assert_int_ge(fd, 0);
    uint8_t x[4];
    ck_assert_int_eq(pread(fd, x, 4, 100), 4);
    for (int i = 0; i < 4; i++)
        x[i] ^= 0x5A;
    ck_assert_int_eq(pwrite(fd, x, 4, 100), 4);
    close(fd);
    /* Table 2: cut to half its length. */
    struct stat st;
    ck_assert_int_eq(stat(join(test_dir, names[2]), &st), 0);
    ck_assert_int_eq(truncate(join(test_dir, names[2]), st.st_size / 2), 0);

    kv_repair_report rep;
    int rc = kv_repair_ex(test_dir, &o, &rep);
    ck_assert_msg(rc == KV_OK, "kv_repair: %d: %s", rc, kv_error_text());
    ck_assert_uint_eq(rep.tables_found, 4);
    ck_assert_uint_eq(rep.tables_lost, 2);
    ck_assert_ptr_nonnull(strstr(rep.text, names[1]));
    ck_assert_ptr_nonnull(strstr(rep.text, names[2]));
    kv_repair_free(&rep);
    /* Moved, not deleted, and the old manifest with them. */
    char lost[800];
    snprintf(lost, sizeof lost, "%s/lost", test_dir);
    ck_assert(present(join(lost, names[1])));
    ck_assert(present(join(lost, names[2])));
    ck_assert(present(join(lost, "MANIFEST")));
    ck_assert(!present(join(test_dir, names[1])) && !present(join(test_dir, names[2])));
    ck_assert_int_eq(stat(join(lost, names[2]), &st), 0);

    /* Tables 0 and 3: every key; 1 and 2: gone (nothing else held them). */
    for (int i = 400; i < 1200; i++)
        m.live[i] = 0;
    db = open_db(test_dir, &o);
    check_model(db, &m, 0, 1600);
    ck_assert_int_eq(kv_close(db), KV_OK);
}
END_TEST

START_TEST(repair_replays_a_damaged_log_up_to_the_damage)
{
    /* One log of single-key records, with a byte flipped near its end:
     * the records before the damage come back, the file goes to lost/. */
    kv_options o;
    small_options(&o);
    static struct model m;
    memset(&m, 0, sizeof m);
    kv_db *db = open_db(test_dir, &o);
    for (int i = 0; i < 200; i++)
        put(db, &m, i, 0);
    ck_assert_int_eq(kv_close(db), KV_OK);
    DIR *dd = opendir(test_dir);
    struct dirent *de;
    char logname[300] = "";
    off_t size = 0;
    while ((de = readdir(dd)) != NULL) {
        struct stat st;
        if (strstr(de->d_name, ".log") && stat(join(test_dir, de->d_name), &st) == 0 &&
            st.st_size > size) {
            size = st.st_size;
            int n = snprintf(logname, sizeof logname, "%s", de->d_name);
            ck_assert(n > 0 && (size_t)n < sizeof logname);
        }
    }
    closedir(dd);
    ck_assert_int_gt(size, 1000);
    int fd = open(join(test_dir, logname), O_RDWR);
    uint8_t b;
    ck_assert_int_eq(pread(fd, &b, 1, size - 300), 1);
    b ^= 0xFF;
    ck_assert_int_eq(pwrite(fd, &b, 1, size - 300), 1);
    close(fd);
    delete_manifest(test_dir);

    kv_repair_report rep;
    ck_assert_int_eq(kv_repair_ex(test_dir, &o, &rep), KV_OK);
    ck_assert_uint_eq(rep.logs_lost, 1);
    ck_assert_uint_gt(rep.records_recovered, 150);
    ck_assert_uint_lt(rep.records_recovered, 200);
    uint64_t got = rep.records_recovered;
    kv_repair_free(&rep);
    char lost[800];
    snprintf(lost, sizeof lost, "%s/lost", test_dir);
    ck_assert(present(join(lost, logname)));
    /* Exactly the first `got` writes: one key each, in order. */
    for (uint64_t i = got; i < 200; i++)
        m.live[i] = 0;
    db = open_db(test_dir, &o);
    check_model(db, &m, 0, 200);
    ck_assert_int_eq(kv_close(db), KV_OK);
}
END_TEST

START_TEST(repair_replaces_a_damaged_manifest)
{
    /* A MANIFEST of garbage: kv_open refuses it; repair keeps it in lost/
     * (byte for byte) and builds a new one from the files. */
    kv_options o;
    small_options(&o);
    static struct model m;
    memset(&m, 0, sizeof m);
    kv_db *db = open_db(test_dir, &o);
    for (int i = 0; i < 500; i++)
        put(db, &m, i, 0);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    for (int i = 0; i < 500; i += 2)
        del(db, &m, i);
    ck_assert_int_eq(kv_close(db), KV_OK);
    FILE *f = fopen(join(test_dir, "MANIFEST"), "wb");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 5000; i++)
        fputc((int)(splitmix((uint64_t)i) & 0xFF), f);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_eq(kv_open(test_dir, &o, &db), KV_ECORRUPT);

    ck_assert_int_eq(kv_repair(test_dir, &o), KV_OK);
    struct stat st;
    ck_assert_int_eq(stat(join(test_dir, "lost/MANIFEST"), &st), 0);
    ck_assert_int_eq(st.st_size, 5000);
    db = open_db(test_dir, &o);
    check_model(db, &m, 0, 500);
    ck_assert_int_eq(kv_close(db), KV_OK);
}
END_TEST


/* What one blob file holds: its records' keys and rounds. */
struct bfile {
    uint64_t number;
    uint64_t offs[256];
    int keys[256];
    unsigned rounds[256];
    size_t n;
};

static int note_key(void *ctx, const void *key, size_t klen, const void *val, size_t vlen,
                    const kv_blob_ref *ref)
{
    struct bfile *f = ctx;
    ck_assert(klen == 9 && vlen >= 8 && f->n < 256);
    f->offs[f->n] = ref->offset;
    char k[10]; /* the key is not NUL-terminated: the value follows it */
    memcpy(k, key, 9);
    k[9] = 0;
    f->keys[f->n] = atoi(k + 4);
    memcpy(&f->rounds[f->n], (const uint8_t *)val + 4, 4);
    f->n++;
    return 0;
}

/* The blob files of d, by number, with what each holds (at most max). */
static size_t list_blob_files(const char *d, struct bfile *f, size_t max)
{
    DIR *dd = opendir(d);
    ck_assert_ptr_nonnull(dd);
    struct dirent *de;
    size_t n = 0;
    while ((de = readdir(dd)) != NULL) {
        const char *dot = strrchr(de->d_name, '.');
        if (!dot || strcmp(dot, ".blob") != 0)
            continue;
        ck_assert_uint_lt(n, max);
        memset(&f[n], 0, sizeof f[n]);
        f[n].number = strtoull(de->d_name, NULL, 10);
        kv_blob_reader *r;
        ck_assert_int_eq(kv_blob_reader_open(join(d, de->d_name), f[n].number, &r), KV_OK);
        ck_assert_int_eq(kv_blob_scan(r, note_key, &f[n]), KV_OK);
        kv_blob_reader_close(r);
        n++;
    }
    closedir(dd);
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && f[j - 1].number > f[j].number; j--) {
            struct bfile t = f[j];
            f[j] = f[j - 1];
            f[j - 1] = t;
        }
    return n;
}

/* Keys [0, 300) written (round 1), then [0, 100) again (round 2), each
 * round flushed to level-0 tables, nothing compacted, so the older values
 * of [0, 100) are still in their tables and blob files. */
static void bfill_twice(const char *d, kv_options *o, struct bmodel *m)
{
    small_options(o);
    o->l0_compaction_trigger = 20;
    o->l0_slowdown_trigger = 30;
    o->l0_stop_trigger = 40;
    kv_db *db = open_db(d, o);
    /* A flush every 50 keys: values bound for blob files fill a memtable
     * slowly (doc/database.md, "Blob files"), and the tests want several
     * blob files per round. */
    for (int i = 0; i < 300; i++) {
        bput(db, m, i, 1);
        if (i % 50 == 49)
            ck_assert_int_eq(kv_flush(db), KV_OK);
    }
    ck_assert_int_eq(kv_flush(db), KV_OK);
    for (int i = 0; i < 100; i++) {
        bput(db, m, i, 2);
        if (i % 50 == 49)
            ck_assert_int_eq(kv_flush(db), KV_OK);
    }
    ck_assert_int_eq(kv_flush(db), KV_OK);
    struct kv_stats st;
    ck_assert_int_eq(kv_stats(db, &st), KV_OK);
    ck_assert_uint_eq(st.level_tables[0], st.tables);
    ck_assert_int_eq(kv_close(db), KV_OK);
}

START_TEST(repair_loses_only_a_damaged_blob_record)
{
    /* One blob file of the second round gets a byte flipped inside (a
     * record fails its checksum), one of the first round whose keys were
     * not written again is deleted. The entries that refer to the damaged
     * record and the deleted file go, so that record's key reads its first
     * value and the deleted file's keys read as absent; every other key is
     * as written, the damaged file's other records too. */
    kv_options o;
    static struct bmodel m;
    memset(&m, 0, sizeof m);
    bfill_twice(test_dir, &o, &m);
    static struct bfile f[64];
    size_t nf = list_blob_files(test_dir, f, 64);
    ck_assert_uint_ge(nf, 4);
    struct bfile *damaged = NULL, *gone = NULL;
    for (size_t i = 0; i < nf; i++) {
        int all2 = 1, all_above = 1;
        for (size_t j = 0; j < f[i].n; j++) {
            all2 &= f[i].rounds[j] == 2;
            all_above &= f[i].keys[j] >= 100;
        }
        if (all2 && !damaged)
            damaged = &f[i];
        if (all_above && f[i].rounds[0] == 1)
            gone = &f[i]; /* the last such */
    }
    ck_assert(damaged && gone && damaged->n > 0 && gone->n > 0);

    char dname[32], gname[32];
    snprintf(dname, sizeof dname, "%06llu.blob", (unsigned long long)damaged->number);
    snprintf(gname, sizeof gname, "%06llu.blob", (unsigned long long)gone->number);
    struct stat st;
    ck_assert_int_eq(stat(join(test_dir, dname), &st), 0);
    int fd = open(join(test_dir, dname), O_RDWR);
    ck_assert_int_ge(fd, 0);
    uint8_t x;
    ck_assert_int_eq(pread(fd, &x, 1, st.st_size / 2), 1);
    x ^= 0x20;
    ck_assert_int_eq(pwrite(fd, &x, 1, st.st_size / 2), 1);
    close(fd);
    ck_assert_int_eq(unlink(join(test_dir, gname)), 0);
    size_t hit = 0; /* the record holding the flipped byte */
    while (hit + 1 < damaged->n && damaged->offs[hit + 1] <= (uint64_t)st.st_size / 2)
        hit++;
    m.round[damaged->keys[hit]] = 1; /* the older value shows */
    for (size_t j = 0; j < gone->n; j++)
        m.live[gone->keys[j]] = 0;

    kv_repair_report rep;
    int rc = kv_repair_ex(test_dir, &o, &rep);
    ck_assert_msg(rc == KV_OK, "kv_repair: %d: %s", rc, kv_error_text());
    ck_assert_uint_eq(rep.tables_lost, 0);
    ck_assert_uint_eq(rep.blobs_found, nf - 1);
    ck_assert_uint_eq(rep.blobs_lost, 0);
    ck_assert_uint_eq(rep.values_lost, 1 + gone->n);
    ck_assert_int_eq(rep.rewritten, 1);
    ck_assert_uint_eq(rep.blobs_lost + rep.blobs_kept + rep.blobs_unused, rep.blobs_found);
    ck_assert_ptr_nonnull(strstr(rep.text, dname));
    ck_assert_ptr_nonnull(strstr(rep.text, "damaged"));
    kv_repair_free(&rep);
    ck_assert(present(join(test_dir, dname)));
    check_blob_accounting(test_dir);

    kv_db *db = open_db(test_dir, &o);
    check_bmodel(db, &m, 300);
    /* A key the damage did not touch, by itself. */
    int k = 299;
    while (k >= 0 && (!m.live[k] || m.round[k] != 1))
        k--;
    ck_assert_int_ge(k, 0);
    char key[16];
    void *v;
    size_t vlen;
    ck_assert_int_eq(kv_get(db, key, bkey(k, key), &v, &vlen), KV_OK);
    ck_assert_uint_eq(vlen, bsize(k, 1));
    kv_free(v);
    ck_assert_int_eq(kv_close(db), KV_OK);
    db = open_db(test_dir, &o);
    check_bmodel(db, &m, 300);
    ck_assert_int_eq(kv_close(db), KV_OK);
}
END_TEST

START_TEST(repair_moves_a_looping_link_to_lost)
{
    /* A table's name made a symbolic link to itself (ELOOP): kv_open says
     * KV_ECORRUPT naming it (as for a FIFO there), not KV_EIO; kv_repair
     * moves the link to lost/ and keeps the other table's keys. */
    kv_options o;
    small_options(&o);
    o.l0_compaction_trigger = 20;
    static struct model m;
    memset(&m, 0, sizeof m);
    kv_db *db = open_db(test_dir, &o);
    for (int t = 0; t < 2; t++) {
        for (int i = t * 100; i < t * 100 + 100; i++)
            put(db, &m, i, t);
        ck_assert_int_eq(kv_flush(db), KV_OK);
    }
    ck_assert_int_eq(kv_close(db), KV_OK);
    char names[4][32];
    ck_assert_int_eq(list_tables(test_dir, names, 4), 2);
    char *p = join(test_dir, names[1]);
    ck_assert_int_eq(unlink(p), 0);
    ck_assert_int_eq(symlink(p, p), 0);
    ck_assert_int_eq(kv_open(test_dir, &o, &db), KV_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(kv_error_text(), names[1]));
    ck_assert_ptr_nonnull(strstr(kv_error_text(), "symbolic link that loops"));
    kv_repair_report rep;
    ck_assert_int_eq(kv_repair_ex(test_dir, &o, &rep), KV_OK);
    ck_assert_uint_eq(rep.tables_lost, 1);
    kv_repair_free(&rep);
    char lost[800];
    snprintf(lost, sizeof lost, "%s/lost", test_dir);
    ck_assert(present(join(lost, names[1])));
    for (int i = 100; i < 200; i++)
        m.live[i] = 0;
    db = open_db(test_dir, &o);
    check_model(db, &m, 0, 200);
    ck_assert_int_eq(kv_close(db), KV_OK);
    ck_assert_int_eq(unlink(join(lost, names[1])), 0);
}
END_TEST

/* ---- one damaged value among 40 ------------------------------------------------------ */

#define N40 40
#define V40 1000 /* bytes: above the default min_blob_size, so in the blob file */

static void value40(uint8_t *v, int i)
{
    for (size_t j = 0; j < V40; j++)
        v[j] = (uint8_t)(i * 31 + j * 7 + (j >> 8));
}

/* 40 keys h00..h39 with 1000-byte values, flushed once: one table, one
 * blob file (returned in *f, its records in key order). */
static void fill40(kv_options *o, struct bfile *f)
{
    small_options(o);
    kv_db *db = open_db(test_dir, o);
    uint8_t v[V40];
    for (int i = 0; i < N40; i++) {
        char k[16];
        value40(v, i);
        ck_assert_int_eq(kv_put(db, k, (size_t)snprintf(k, sizeof k, "h%02d", i), v, V40), KV_OK);
    }
    ck_assert_int_eq(kv_flush(db), KV_OK);
    ck_assert_int_eq(kv_close(db), KV_OK);
    DIR *dd = opendir(test_dir);
    ck_assert_ptr_nonnull(dd);
    struct dirent *de;
    int nb = 0;
    while ((de = readdir(dd)) != NULL) {
        const char *dot = strrchr(de->d_name, '.');
        if (!dot || strcmp(dot, ".blob") != 0)
            continue;
        memset(f, 0, sizeof *f);
        f->number = strtoull(de->d_name, NULL, 10);
        nb++;
    }
    closedir(dd);
    ck_assert_int_eq(nb, 1);
}

/* Offsets of the 40 records of blob file f (kv_blob_scan, file order). */
static int note40(void *ctx, const void *key, size_t klen, const void *val, size_t vlen,
                  const kv_blob_ref *ref)
{
    (void)val;
    struct bfile *f = ctx;
    ck_assert(klen == 3 && vlen == V40 && f->n < N40);
    f->keys[f->n] = atoi((const char *)key + 1);
    f->offs[f->n++] = ref->offset;
    return 0;
}

/* After a repair that lost key `gone`'s value alone: every other key reads
 * exactly as written, `gone` is absent; writes and a full compaction go
 * on; the blob file's live bytes are the 39 records'. */
static void check40(const kv_options *o, int gone)
{
    size_t files;
    uint64_t garbage;
    ck_assert_uint_eq(inspect_live(test_dir, &files, &garbage),
                      (N40 - 1) * kv_blob_record_size(3, V40));
    ck_assert_uint_eq(files, 1);
    check_blob_accounting(test_dir);
    kv_db *db = open_db(test_dir, o);
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < N40; i++) {
            char k[16];
            uint8_t want[V40];
            void *v;
            size_t vlen;
            int rc = kv_get(db, k, (size_t)snprintf(k, sizeof k, "h%02d", i), &v, &vlen);
            if (i == gone) {
                ck_assert_msg(rc == KV_NOTFOUND, "h%02d: %s, expected KV_NOTFOUND", i,
                              kv_strerror(rc));
                continue;
            }
            ck_assert_msg(rc == KV_OK, "h%02d: %s", i, kv_strerror(rc));
            value40(want, i);
            ck_assert(vlen == V40 && memcmp(v, want, V40) == 0);
            kv_free(v);
        }
        ck_assert_int_eq(kv_put(db, "i", 1, "x", 1), KV_OK);
        ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 0), KV_OK);
    }
    ck_assert_int_eq(kv_close(db), KV_OK);
}

START_TEST(repair_keeps_the_sound_records_of_a_damaged_blob_file)
{
    /* 40 values in one blob file; record 17 damaged, one way per run: a
     * flipped byte in its value, a compression kind of 1, a value length
     * of 2^32-1 (the record's bounds, and the next record's start, are
     * lost with it). Before, the open database reads 39 and reports the
     * damage for the 40th; after repair (MANIFEST kept), the same 39 and
     * the 40th absent: nothing else is lost, nothing read wrong. */
    for (int how = 0; how < 3; how++) {
        kv_options o;
        static struct bfile f;
        fill40(&o, &f);
        char name[32];
        snprintf(name, sizeof name, "%06llu.blob", (unsigned long long)f.number);
        kv_blob_reader *rd;
        ck_assert_int_eq(kv_blob_reader_open(join(test_dir, name), f.number, &rd), KV_OK);
        ck_assert_int_eq(kv_blob_scan(rd, note40, &f), KV_OK);
        kv_blob_reader_close(rd);
        ck_assert_uint_eq(f.n, N40);
        int victim = f.keys[17];
        int fd = open(join(test_dir, name), O_RDWR);
        ck_assert_int_ge(fd, 0);
        uint64_t at = f.offs[17];
        uint8_t b4[4];
        if (how == 0) { /* the value's 500th byte */
            at += 9 + 3 + 500;
            ck_assert_int_eq(pread(fd, b4, 1, (off_t)at), 1);
            b4[0] ^= 0x01;
            ck_assert_int_eq(pwrite(fd, b4, 1, (off_t)at), 1);
        } else if (how == 1) { /* compression kind */
            b4[0] = 1;
            ck_assert_int_eq(pwrite(fd, b4, 1, (off_t)(at + 8)), 1);
        } else { /* value length */
            memset(b4, 0xFF, 4);
            ck_assert_int_eq(pwrite(fd, b4, 4, (off_t)(at + 4)), 4);
        }
        close(fd);

        kv_db *db = open_db(test_dir, &o);
        char k[16];
        void *v;
        size_t vlen;
        ck_assert_int_eq(kv_get(db, k, (size_t)snprintf(k, sizeof k, "h%02d", victim), &v, &vlen),
                         KV_ECORRUPT);
        ck_assert_int_eq(kv_close(db), KV_OK);

        kv_repair_report rep;
        int rc = kv_repair_ex(test_dir, &o, &rep);
        ck_assert_msg(rc == KV_OK, "kv_repair: %d: %s", rc, kv_error_text());
        ck_assert_uint_eq(rep.tables_lost, 0);
        ck_assert_uint_eq(rep.blobs_lost, 0);
        ck_assert_uint_eq(rep.blobs_unused, 0);
        ck_assert_uint_eq(rep.blobs_kept, 1);
        ck_assert_uint_eq(rep.values_lost, 1);
        ck_assert_ptr_nonnull(strstr(rep.text, "damaged"));
        kv_repair_free(&rep);
        ck_assert(present(join(test_dir, name)));
        check40(&o, victim);
        /* A second repair finds the same. */
        ck_assert_int_eq(kv_repair_ex(test_dir, &o, &rep), KV_OK);
        ck_assert_uint_eq(rep.blobs_lost + rep.tables_lost + rep.values_lost, 0);
        kv_repair_free(&rep);
        check40(&o, victim);
        test_teardown();
        test_setup();
    }
}
END_TEST

START_TEST(repair_loses_only_an_undecodable_blob_reference)
{
    /* The one table of fill40 rewritten (its checksums sound) with h17's
     * blob reference replaced by bytes that do not decode: that entry is
     * lost, and nothing else (the table and the blob file stay in use). */
    kv_options o;
    static struct bfile f;
    fill40(&o, &f);
    char names[4][32];
    ck_assert_int_eq(list_tables(test_dir, names, 4), 1);
    kv_sst_reader *rd;
    ck_assert_int_eq(kv_sst_reader_open(join(test_dir, names[0]), NULL, 1, &rd), KV_OK);
    kv_sst_iter *it;
    ck_assert_int_eq(kv_sst_iter_new(rd, &it), KV_OK);
    kv_sst_options so;
    kv_sst_options_init(&so);
    kv_sst_writer *w;
    ck_assert_int_eq(kv_sst_writer_new(join(test_dir, "000900.sst"), &so, &w), KV_OK);
    int n = 0;
    for (kv_sst_iter_seek_first(it); kv_sst_iter_valid(it); kv_sst_iter_next(it), n++) {
        size_t klen, vlen;
        const void *k = kv_sst_iter_key(it, &klen);
        const void *v = kv_sst_iter_value(it, &vlen);
        const uint8_t bad[4] = {0x80, 0x80, 0x80, 0x80}; /* an unfinished varint */
        if (n == 17)
            v = bad, vlen = sizeof bad;
        ck_assert_int_eq(kv_sst_writer_add(w, k, klen, v, vlen), KV_OK);
    }
    ck_assert_int_eq(kv_sst_iter_status(it), KV_OK);
    ck_assert_int_eq(n, N40);
    kv_sst_iter_free(it);
    kv_sst_reader_close(rd);
    ck_assert_int_eq(kv_sst_writer_finish(w, NULL), KV_OK);
    ck_assert_int_eq(unlink(join(test_dir, names[0])), 0);
    delete_manifest(test_dir);

    kv_repair_report rep;
    ck_assert_int_eq(kv_repair_ex(test_dir, &o, &rep), KV_OK);
    ck_assert_uint_eq(rep.tables_lost, 0);
    ck_assert_uint_eq(rep.blobs_lost + rep.blobs_unused, 0);
    ck_assert_uint_eq(rep.blobs_kept, 1);
    ck_assert_uint_eq(rep.values_lost, 1);
    ck_assert_ptr_nonnull(strstr(rep.text, "does not decode"));
    kv_repair_free(&rep);
    check40(&o, 17);
}
END_TEST

/* ---- a kill during repair ------------------------------------------------------------ */

/* Shared with the child: [0] the call to die at (0: none), [1] calls so far. */
static volatile uint64_t *kill_plan;

static void tick(void)
{
    uint64_t n = ++kill_plan[1];
    if (kill_plan[0] && n == kill_plan[0])
        raise(SIGKILL);
}

static int k_open(const char *path, int flags, mode_t mode, uintptr_t *tag)
{
    if (flags & O_CREAT)
        tick();
    return kv_file_io_os.open(path, flags, mode, tag);
}
static ssize_t k_pwrite(int fd, uintptr_t tag, const void *buf, size_t len, uint64_t off)
{
    tick();
    return kv_file_io_os.pwrite(fd, tag, buf, len, off);
}
static int k_fsync(int fd, uintptr_t tag)
{
    tick();
    return kv_file_io_os.fsync(fd, tag);
}
static int k_fdatasync(int fd, uintptr_t tag)
{
    tick();
    return kv_file_io_os.fdatasync(fd, tag);
}
static int k_rename(const char *from, const char *to)
{
    tick();
    return kv_file_io_os.rename(from, to);
}
static int k_sync_dir(const char *d)
{
    tick();
    return kv_file_io_os.sync_dir(d);
}
static int k_commit(void)
{
    tick();
    return 0;
}

static const kv_file_io killing_io = {
    .open = k_open, .pread = NULL, .pwrite = k_pwrite, .fsync = k_fsync,
    .fdatasync = k_fdatasync, .close = NULL, .rename = k_rename, .sync_dir = k_sync_dir,
    .view = NULL,
};

/* Runs kv_repair on d in a child that dies at call `at` (0: never);
 * returns 1 when it was killed, 0 when the repair finished (and
 * succeeded). */
static int repair_in_child(const char *d, const kv_options *o, uint64_t at)
{
    kill_plan[0] = at;
    kill_plan[1] = 0;
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        static kv_file_io io;
        io = killing_io;
        io.pread = kv_file_io_os.pread;
        io.close = kv_file_io_os.close;
        io.view = kv_file_io_os.view;
        kv_file_set_io(&io);
        kv_manifest_set_commit_hook(k_commit);
        _exit(kv_repair(d, o) == KV_OK ? 0 : 1);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status)) {
        ck_assert_int_eq(WTERMSIG(status), SIGKILL);
        return 1;
    }
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the repair failed");
    return 0;
}

/* Kills a repair of a copy of `pristine` at each of its steps (every one
 * up to 60, else 48 spread over the run and the last 12, where the
 * manifest is built and put in place); after each, the database is either
 * repaired or refused (no MANIFEST yet) and repaired by a rerun, and then
 * `check` must find every write in it. Returns the kill points. */
static int kill_at_every_step(const char *pristine, const kv_options *o, void (*check)(kv_db *))
{
    char work[700];
    snprintf(work, sizeof work, "%s/work", test_dir);
    kv_db *db;
    kill_plan = mmap(NULL, 2 * sizeof *kill_plan, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne((void *)kill_plan, MAP_FAILED);
    /* How many calls a whole repair makes. */
    copy_dir(pristine, work);
    ck_assert_int_eq(repair_in_child(work, o, 0), 0);
    uint64_t total = kill_plan[1];
    ck_assert_uint_gt(total, 5);
    remove_tree(work);

    int killed = 0, refused = 0;
    for (uint64_t k = 1; k <= total; k++) {
        if (total > 60 && k < total - 12 && (k * 48) / total == ((k - 1) * 48) / total)
            continue;
        copy_dir(pristine, work);
        if (!repair_in_child(work, o, k))
            ck_abort_msg("call %llu of %llu: the repair did not get there",
                         (unsigned long long)k, (unsigned long long)total);
        killed++;
        /* Repaired, or refused (no MANIFEST yet) and repaired by a rerun. */
        int rc = kv_open(work, o, &db);
        if (rc != KV_OK) {
            ck_assert_msg(rc == KV_ECORRUPT, "kill at %llu: kv_open %d: %s",
                          (unsigned long long)k, rc, kv_error_text());
            refused++;
            rc = kv_repair(work, o);
            ck_assert_msg(rc == KV_OK, "kill at %llu: the rerun: %d: %s",
                          (unsigned long long)k, rc, kv_error_text());
            db = open_db(work, o);
        }
        check(db);
        ck_assert_int_eq(kv_close(db), KV_OK);
        remove_tree(work);
    }
    ck_assert_int_ge(killed, 5);
    ck_assert_int_gt(refused, 0);
    ck_assert_int_lt(refused, killed); /* the last kills come after the manifest is in */
    printf("repair: %d kill points of %llu calls; %d left no manifest\n", killed,
           (unsigned long long)total, refused);
    munmap((void *)kill_plan, 2 * sizeof *kill_plan);
    return killed;
}

/* What the killed repairs' databases must hold. */
static struct model kill_m;
static struct bmodel kill_bm;

static void check_kill_m(kv_db *db)
{
    check_model(db, &kill_m, 0, 1200);
}

static void check_kill_bm(kv_db *db)
{
    check_bmodel(db, &kill_bm, 300);
}

START_TEST(repair_killed_at_every_step)
{
    kv_options o;
    small_options(&o);
    memset(&kill_m, 0, sizeof kill_m);
    char pristine[700], work[700];
    snprintf(pristine, sizeof pristine, "%s/pristine", test_dir);
    snprintf(work, sizeof work, "%s/work", test_dir);
    /* Fewer keys than the other tests: each kill point repeats the work. */
    fill_three_places(pristine, &o, &kill_m, 1200);
    delete_manifest(pristine);

    /* The path a kill interrupts: a merge (compaction put old sequences
     * under new numbers), tables from the log, a new manifest. */
    copy_dir(pristine, work);
    kv_repair_report rep;
    ck_assert_int_eq(kv_repair_ex(work, &o, &rep), KV_OK);
    ck_assert_int_eq(rep.rewritten, 1);
    ck_assert_uint_ge(rep.logs_replayed, 1);
    kv_repair_free(&rep);
    remove_tree(work);

    kill_at_every_step(pristine, &o, check_kill_m);
}
END_TEST

START_TEST(repair_with_blob_files_killed_at_every_step)
{
    /* Blob files: one damaged (to lost/ before the new manifest exists),
     * the merge that drops the entries whose values it held, and files
     * all of whose records are then garbage (to lost/ too). */
    kv_options o;
    memset(&kill_bm, 0, sizeof kill_bm);
    char pristine[700], work[700];
    snprintf(pristine, sizeof pristine, "%s/pristine", test_dir);
    snprintf(work, sizeof work, "%s/work", test_dir);
    bfill_twice(pristine, &o, &kill_bm);
    static struct bfile f[64];
    size_t nf = list_blob_files(pristine, f, 64);
    struct bfile *damaged = NULL;
    for (size_t i = nf; i-- > 0 && !damaged;)
        if (f[i].n && f[i].rounds[0] == 2)
            damaged = &f[i];
    ck_assert_ptr_nonnull(damaged);
    for (size_t j = 0; j < damaged->n; j++)
        kill_bm.round[damaged->keys[j]] = 1;
    char dname[32];
    snprintf(dname, sizeof dname, "%06llu.blob", (unsigned long long)damaged->number);
    ck_assert_int_eq(truncate(join(pristine, dname), 100), 0);
    delete_manifest(pristine);

    copy_dir(pristine, work);
    kv_repair_report rep;
    ck_assert_int_eq(kv_repair_ex(work, &o, &rep), KV_OK);
    ck_assert_int_eq(rep.rewritten, 1);
    ck_assert_uint_eq(rep.blobs_lost, 1);
    ck_assert_uint_gt(rep.blobs_unused, 0);
    ck_assert_uint_eq(rep.values_lost, damaged->n);
    kv_repair_free(&rep);
    check_blob_accounting(work);
    remove_tree(work);

    kill_at_every_step(pristine, &o, check_kill_bm);
}
END_TEST

/* ---- kv_destroy ---------------------------------------------------------------------- */

static void touch(const char *p)
{
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs("not kv's\n", f);
    fclose(f);
}

START_TEST(destroy_removes_only_kv_files)
{
    char d[700];
    snprintf(d, sizeof d, "%s/db", test_dir);
    kv_options o;
    small_options(&o);
    static struct model m;
    kv_db *db = open_db(d, &o);
    for (int i = 0; i < 1000; i++)
        put(db, &m, i, 0);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    put(db, &m, 1, 1);
    /* Open: refused, nothing removed. */
    ck_assert_int_eq(kv_destroy(d), KV_EBUSY);
    ck_assert_int_eq(kv_repair(d, &o), KV_EBUSY);
    ck_assert(present(join(d, "MANIFEST")));
    ck_assert_int_eq(kv_close(db), KV_OK);

    touch(join(d, "notes.txt"));
    touch(join(d, "12.sst")); /* not a number kv writes (six digits at least) */
    ck_assert_int_eq(mkdir(join(d, "lost"), 0755), 0);
    touch(join(d, "lost/000003.sst"));
    ck_assert_int_eq(mkdir(join(d, "repair.tmp"), 0755), 0); /* a killed repair's */
    touch(join(d, "repair.tmp/MANIFEST"));
    touch(join(d, "000099.sst.tmp"));
    touch(join(d, "000098.blob"));
    ck_assert_int_eq(kv_destroy(d), KV_OK);
    DIR *dd = opendir(d);
    ck_assert_ptr_nonnull(dd);
    struct dirent *de;
    int left = 0;
    while ((de = readdir(dd)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        ck_assert_msg(strcmp(de->d_name, "notes.txt") == 0 || strcmp(de->d_name, "lost") == 0 ||
                      strcmp(de->d_name, "12.sst") == 0, "%s left", de->d_name);
        left++;
    }
    closedir(dd);
    ck_assert_int_eq(left, 3);
    ck_assert(present(join(d, "lost/000003.sst")));
    /* Nothing of kv's left: a second call is a no-op; then, emptied, the
     * directory goes too; then, missing, KV_OK. */
    ck_assert_int_eq(kv_destroy(d), KV_OK);
    ck_assert(present(join(d, "notes.txt")));
    unlink(join(d, "notes.txt"));
    unlink(join(d, "12.sst"));
    remove_tree(join(d, "lost"));
    ck_assert_int_eq(kv_destroy(d), KV_OK);
    ck_assert(!present(d));
    ck_assert_int_eq(kv_destroy(d), KV_OK);
    /* A database destroyed opens afresh, empty. */
    db = open_db(d, &o);
    void *v;
    size_t vlen;
    ck_assert_int_eq(kv_get(db, "key00001", 8, &v, &vlen), KV_NOTFOUND);
    ck_assert_int_eq(kv_close(db), KV_OK);
}
END_TEST

START_TEST(bad_arguments)
{
    ck_assert_int_eq(kv_repair(NULL, NULL), KV_EINVAL);
    ck_assert_int_eq(kv_repair("", NULL), KV_EINVAL);
    ck_assert_int_eq(kv_repair_ex(NULL, NULL, NULL), KV_EINVAL);
    ck_assert_int_eq(kv_repair(join(test_dir, "missing"), NULL), KV_NOTFOUND);
    ck_assert_ptr_nonnull(strstr(kv_error_text(), "missing"));
    ck_assert(!present(join(test_dir, "missing")));
    touch(join(test_dir, "file"));
    ck_assert_int_eq(kv_repair(join(test_dir, "file"), NULL), KV_EINVAL);
    ck_assert_int_eq(kv_destroy(join(test_dir, "file")), KV_EINVAL);
    ck_assert(present(join(test_dir, "file")));
    kv_options o;
    kv_options_init(&o);
    o.block_size = 1;
    ck_assert_int_eq(kv_repair(test_dir, &o), KV_EINVAL);
    ck_assert_ptr_nonnull(strstr(kv_error_text(), "block_size"));
    ck_assert_int_eq(kv_destroy(NULL), KV_EINVAL);
    ck_assert_int_eq(kv_destroy(""), KV_EINVAL);
    kv_repair_free(NULL);
    /* An empty directory: an empty database. */
    char e[700];
    snprintf(e, sizeof e, "%s/empty", test_dir);
    ck_assert_int_eq(mkdir(e, 0755), 0);
    kv_repair_report rep;
    ck_assert_int_eq(kv_repair_ex(e, NULL, &rep), KV_OK);
    ck_assert_uint_eq(rep.tables_found + rep.logs_found, 0);
    kv_repair_free(&rep);
    kv_db *db = open_db(e, NULL);
    ck_assert_int_eq(kv_put(db, "k", 1, "v", 1), KV_OK);
    ck_assert_int_eq(kv_close(db), KV_OK);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("repair");
    TCase *tc = tcase_create("rebuild");
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, repair_after_manifest_deleted);
    tcase_add_test(tc, repair_under_dynamic_level_sizes);
    tcase_add_test(tc, repair_of_a_keyed_database);
    tcase_add_test(tc, repair_keeps_level0_tables_as_they_are);
    tcase_add_test(tc, repair_merges_tables_of_different_seeds);
    tcase_add_test(tc, repair_of_blob_values);
    suite_add_tcase(s, tc);
    tc = tcase_create("damage");
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, repair_moves_damaged_tables_to_lost);
    tcase_add_test(tc, repair_replays_a_damaged_log_up_to_the_damage);
    tcase_add_test(tc, repair_replaces_a_damaged_manifest);
    tcase_add_test(tc, repair_loses_only_a_damaged_blob_record);
    tcase_add_test(tc, repair_keeps_the_sound_records_of_a_damaged_blob_file);
    tcase_add_test(tc, repair_loses_only_an_undecodable_blob_reference);
    tcase_add_test(tc, repair_moves_a_looping_link_to_lost);
    suite_add_tcase(s, tc);
    tc = tcase_create("kill");
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, repair_killed_at_every_step);
    tcase_add_test(tc, repair_with_blob_files_killed_at_every_step);
    suite_add_tcase(s, tc);
    tc = tcase_create("destroy");
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_add_test(tc, destroy_removes_only_kv_files);
    tcase_add_test(tc, bad_arguments);
    suite_add_tcase(s, tc);
    return s;
}
