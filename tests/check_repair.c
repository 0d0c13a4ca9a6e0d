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
 *  - a kill at every step of a repair (each file-layer call that changes
 *    the disk, and the manifest's commit): the database is then either
 *    repaired, or refused and repaired by the next kv_repair, with every
 *    write there;
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

#include "../kv/manifest.h" /* kv_manifest_set_commit_hook: a kill at the commit */
#include "testutil.h"
#include "util/file.h"      /* kv_file_set_io: a kill at a file-layer call */

/* ---- fixture ---------------------------------------------------------------------- */

static char root[512], dir[600];

/* kv_repair_ex, and with KV_TEST_VERBOSE set, one line of what it
 * recovered, named by the test: the figures a reader of the run wants. */
static int repair_ex_shown(const char *test, const char *d, const kv_options *o,
                           kv_repair_report *rep)
{
    int rc = (kv_repair_ex)(d, o, rep);
    if (rc == KV_OK && rep && getenv("KV_TEST_VERBOSE"))
        printf("%.*s: %llu tables found, %llu to lost/, %llu kept, %llu merged, %llu written; "
               "%llu logs replayed (%llu to lost/), %llu records recovered; last seq %llu\n",
               (int)(strlen(test) - (strstr(test, "_fn") ? 3 : 0)), test,
               (unsigned long long)rep->tables_found,
               (unsigned long long)rep->tables_lost, (unsigned long long)rep->tables_kept,
               (unsigned long long)rep->tables_merged, (unsigned long long)rep->tables_written,
               (unsigned long long)rep->logs_replayed, (unsigned long long)rep->logs_lost,
               (unsigned long long)rep->records_recovered, (unsigned long long)rep->last_seq);
    return rc;
}
#define kv_repair_ex(d, o, rep) repair_ex_shown(__func__, d, o, rep)

static void setup(void)
{
    snprintf(dir, sizeof dir, "%s/test-XXXXXX", root);
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void remove_tree(const char *p)
{
    struct stat st;
    if (lstat(p, &st) == 0)
        ck_assert_int_eq(nftw(p, remove_one, 16, FTW_DEPTH | FTW_PHYS), 0);
}

static void teardown(void)
{
    remove_tree(dir);
}

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
}

/* ---- the model: what every key must read as ------------------------------------ */

#define NKEYS 3000

struct model {
    int live[NKEYS];
    char val[NKEYS][120];
};

static void key_of(int i, char *k)
{
    snprintf(k, 16, "key%05d", i);
}

static void put(kv_db *db, struct model *m, int i, int round)
{
    char k[16];
    key_of(i, k);
    int n = snprintf(m->val[i], sizeof m->val[i], "value-%d-of-%s-", round, k);
    memset(m->val[i] + n, 'a' + round % 26, 100 - (size_t)n);
    m->val[i][100] = '\0';
    ck_assert_int_eq(kv_put(db, k, strlen(k), m->val[i], 100), KV_OK);
    m->live[i] = 1;
}

static void del(kv_db *db, struct model *m, int i)
{
    char k[16];
    key_of(i, k);
    ck_assert_int_eq(kv_delete(db, k, strlen(k)), KV_OK);
    m->live[i] = 0;
}

/* Every key by Get, then the whole database by scan, against the model. */
static void check_model(kv_db *db, const struct model *m, int from, int to)
{
    size_t live = 0;
    for (int i = from; i < to; i++) {
        char k[16];
        key_of(i, k);
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

static kv_db *open_ok(const char *d, const kv_options *o)
{
    kv_db *db;
    int rc = kv_open(d, o, &db);
    ck_assert_msg(rc == KV_OK, "kv_open: %d: %s", rc, kv_error_text());
    return db;
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
    kv_db *db = open_ok(d, &big);
    for (int i = 0; i < n; i++)
        put(db, m, i, 0);
    ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 0), KV_OK);
    for (int i = 0; i < n; i += 3)
        put(db, m, i, 1);
    for (int i = 0; i < n; i += 5)
        del(db, m, i);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    ck_assert_int_eq(kv_close(db), KV_OK);

    kv_options tight = *o;
    tight.max_bytes_for_level_base = tight.target_file_size;
    db = open_ok(d, &tight);
    struct kv_stats st;
    for (int tries = 0;; tries++) {
        ck_assert_int_eq(kv_stats(db, &st), KV_OK);
        if (st.level_bytes[1] <= tight.max_bytes_for_level_base && st.level_tables[2] > 0)
            break;
        ck_assert_msg(tries < 3000, "level 1 never moved down");
        usleep(10000);
    }
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

START_TEST(repair_after_manifest_deleted)
{
    kv_options o;
    small_options(&o);
    static struct model m;
    memset(&m, 0, sizeof m);
    fill_three_places(dir, &o, &m, NKEYS);
    delete_manifest(dir);

    kv_repair_report rep;
    int rc = kv_repair_ex(dir, &o, &rep);
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
    ck_assert(!present(join(dir, "repair.tmp")));

    kv_db *db = open_ok(dir, &o);
    check_model(db, &m, 0, NKEYS);
    /* Writes go on after the repaired sequence, and survive a reopen. */
    put(db, &m, 7, 3);
    del(db, &m, 8);
    ck_assert_int_eq(kv_close(db), KV_OK);
    db = open_ok(dir, &o);
    check_model(db, &m, 0, NKEYS);
    ck_assert_int_eq(kv_close(db), KV_OK);

    /* A sound database repaired again: the same data, the old manifest
     * kept in lost/. */
    ck_assert_int_eq(kv_repair_ex(dir, &o, &rep), KV_OK);
    ck_assert_uint_ge(rep.last_seq, last + 2);
    kv_repair_free(&rep);
    ck_assert(present(join(dir, "lost/MANIFEST")));
    db = open_ok(dir, &o);
    check_model(db, &m, 0, NKEYS);
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
    fill_three_places(dir, &o, &m, NKEYS);
    delete_manifest(dir);

    kv_repair_report rep;
    int rc = kv_repair_ex(dir, &o, &rep);
    ck_assert_msg(rc == KV_OK, "kv_repair: %d: %s", rc, kv_error_text());
    ck_assert_uint_eq(rep.tables_lost, 0);
    ck_assert_int_eq(rep.rewritten, 1); /* keyed filters cannot be kept */
    kv_repair_free(&rep);

    kv_db *db = open_ok(dir, &o);
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
    db = open_ok(dir, &o);
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
    kv_db *db = open_ok(dir, &o);
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
    delete_manifest(dir);

    kv_repair_report rep;
    ck_assert_int_eq(kv_repair_ex(dir, &o, &rep), KV_OK);
    ck_assert_int_eq(rep.rewritten, 0);
    ck_assert_uint_eq(rep.tables_kept, tables);
    ck_assert_uint_eq(rep.tables_found, tables);
    kv_repair_free(&rep);
    db = open_ok(dir, &o);
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
    snprintf(a, sizeof a, "%s/a", dir);
    snprintf(b, sizeof b, "%s/b", dir);
    kv_db *db = open_ok(a, &o);
    for (int i = 0; i < 500; i++)
        put(db, &m, i, 0);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    ck_assert_int_eq(kv_close(db), KV_OK);
    db = open_ok(b, &o);
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
    db = open_ok(a, &o);
    check_model(db, &m, 0, 1000);
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
    kv_db *db = open_ok(dir, &o);
    for (int t = 0; t < 4; t++) {
        for (int i = t * 400; i < t * 400 + 400; i++)
            put(db, &m, i, t);
        ck_assert_int_eq(kv_flush(db), KV_OK);
    }
    ck_assert_int_eq(kv_close(db), KV_OK);
    char names[8][32];
    ck_assert_int_eq(list_tables(dir, names, 8), 4);

    /* Table 1: bytes flipped at offset 100 (its first data block). */
    int fd = open(join(dir, names[1]), O_RDWR);
    ck_assert_int_ge(fd, 0);
    uint8_t x[4];
    ck_assert_int_eq(pread(fd, x, 4, 100), 4);
    for (int i = 0; i < 4; i++)
        x[i] ^= 0x5A;
    ck_assert_int_eq(pwrite(fd, x, 4, 100), 4);
    close(fd);
    /* Table 2: cut to half its length. */
    struct stat st;
    ck_assert_int_eq(stat(join(dir, names[2]), &st), 0);
    ck_assert_int_eq(truncate(join(dir, names[2]), st.st_size / 2), 0);

    kv_repair_report rep;
    int rc = kv_repair_ex(dir, &o, &rep);
    ck_assert_msg(rc == KV_OK, "kv_repair: %d: %s", rc, kv_error_text());
    ck_assert_uint_eq(rep.tables_found, 4);
    ck_assert_uint_eq(rep.tables_lost, 2);
    ck_assert_ptr_nonnull(strstr(rep.text, names[1]));
    ck_assert_ptr_nonnull(strstr(rep.text, names[2]));
    kv_repair_free(&rep);
    /* Moved, not deleted, and the old manifest with them. */
    char lost[800];
    snprintf(lost, sizeof lost, "%s/lost", dir);
    ck_assert(present(join(lost, names[1])));
    ck_assert(present(join(lost, names[2])));
    ck_assert(present(join(lost, "MANIFEST")));
    ck_assert(!present(join(dir, names[1])) && !present(join(dir, names[2])));
    ck_assert_int_eq(stat(join(lost, names[2]), &st), 0);

    /* Tables 0 and 3: every key; 1 and 2: gone (nothing else held them). */
    for (int i = 400; i < 1200; i++)
        m.live[i] = 0;
    db = open_ok(dir, &o);
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
    kv_db *db = open_ok(dir, &o);
    for (int i = 0; i < 200; i++)
        put(db, &m, i, 0);
    ck_assert_int_eq(kv_close(db), KV_OK);
    DIR *dd = opendir(dir);
    struct dirent *de;
    char logname[300] = "";
    off_t size = 0;
    while ((de = readdir(dd)) != NULL) {
        struct stat st;
        if (strstr(de->d_name, ".log") && stat(join(dir, de->d_name), &st) == 0 &&
            st.st_size > size) {
            size = st.st_size;
            int n = snprintf(logname, sizeof logname, "%s", de->d_name);
            ck_assert(n > 0 && (size_t)n < sizeof logname);
        }
    }
    closedir(dd);
    ck_assert_int_gt(size, 1000);
    int fd = open(join(dir, logname), O_RDWR);
    uint8_t b;
    ck_assert_int_eq(pread(fd, &b, 1, size - 300), 1);
    b ^= 0xFF;
    ck_assert_int_eq(pwrite(fd, &b, 1, size - 300), 1);
    close(fd);
    delete_manifest(dir);

    kv_repair_report rep;
    ck_assert_int_eq(kv_repair_ex(dir, &o, &rep), KV_OK);
    ck_assert_uint_eq(rep.logs_lost, 1);
    ck_assert_uint_gt(rep.records_recovered, 150);
    ck_assert_uint_lt(rep.records_recovered, 200);
    uint64_t got = rep.records_recovered;
    kv_repair_free(&rep);
    char lost[800];
    snprintf(lost, sizeof lost, "%s/lost", dir);
    ck_assert(present(join(lost, logname)));
    /* Exactly the first `got` writes: one key each, in order. */
    for (uint64_t i = got; i < 200; i++)
        m.live[i] = 0;
    db = open_ok(dir, &o);
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
    kv_db *db = open_ok(dir, &o);
    for (int i = 0; i < 500; i++)
        put(db, &m, i, 0);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    for (int i = 0; i < 500; i += 2)
        del(db, &m, i);
    ck_assert_int_eq(kv_close(db), KV_OK);
    FILE *f = fopen(join(dir, "MANIFEST"), "wb");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 5000; i++)
        fputc((int)(splitmix((uint64_t)i) & 0xFF), f);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_eq(kv_open(dir, &o, &db), KV_ECORRUPT);

    ck_assert_int_eq(kv_repair(dir, &o), KV_OK);
    struct stat st;
    ck_assert_int_eq(stat(join(dir, "lost/MANIFEST"), &st), 0);
    ck_assert_int_eq(st.st_size, 5000);
    db = open_ok(dir, &o);
    check_model(db, &m, 0, 500);
    ck_assert_int_eq(kv_close(db), KV_OK);
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

START_TEST(repair_killed_at_every_step)
{
    kv_options o;
    small_options(&o);
    static struct model m;
    memset(&m, 0, sizeof m);
    char pristine[700], work[700];
    snprintf(pristine, sizeof pristine, "%s/pristine", dir);
    snprintf(work, sizeof work, "%s/work", dir);
    /* Fewer keys than the other tests: each kill point repeats the work. */
    kv_db *db;
    fill_three_places(pristine, &o, &m, 1200);
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

    kill_plan = mmap(NULL, 2 * sizeof *kill_plan, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne((void *)kill_plan, MAP_FAILED);
    /* How many calls a whole repair makes. */
    copy_dir(pristine, work);
    ck_assert_int_eq(repair_in_child(work, &o, 0), 0);
    uint64_t total = kill_plan[1];
    ck_assert_uint_gt(total, 5);
    remove_tree(work);

    /* Each kill point (every one up to 60, else 48 spread over the run and
     * the last 12, where the manifest is built and put in place). */
    int killed = 0, refused = 0;
    for (uint64_t k = 1; k <= total; k++) {
        if (total > 60 && k < total - 12 && (k * 48) / total == ((k - 1) * 48) / total)
            continue;
        copy_dir(pristine, work);
        if (!repair_in_child(work, &o, k))
            ck_abort_msg("call %llu of %llu: the repair did not get there",
                         (unsigned long long)k, (unsigned long long)total);
        killed++;
        /* Repaired, or refused (no MANIFEST yet) and repaired by a rerun. */
        int rc = kv_open(work, &o, &db);
        if (rc != KV_OK) {
            ck_assert_msg(rc == KV_ECORRUPT, "kill at %llu: kv_open %d: %s",
                          (unsigned long long)k, rc, kv_error_text());
            refused++;
            rc = kv_repair(work, &o);
            ck_assert_msg(rc == KV_OK, "kill at %llu: the rerun: %d: %s",
                          (unsigned long long)k, rc, kv_error_text());
            db = open_ok(work, &o);
        }
        check_model(db, &m, 0, 1200);
        ck_assert_int_eq(kv_close(db), KV_OK);
        remove_tree(work);
    }
    ck_assert_int_ge(killed, 5);
    ck_assert_int_gt(refused, 0);
    ck_assert_int_lt(refused, killed); /* the last kills come after the manifest is in */
    printf("repair: %d kill points of %llu calls; %d left no manifest\n", killed,
           (unsigned long long)total, refused);
    munmap((void *)kill_plan, 2 * sizeof *kill_plan);
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
    snprintf(d, sizeof d, "%s/db", dir);
    kv_options o;
    small_options(&o);
    static struct model m;
    kv_db *db = open_ok(d, &o);
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
    db = open_ok(d, &o);
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
    ck_assert_int_eq(kv_repair(join(dir, "missing"), NULL), KV_NOTFOUND);
    ck_assert_ptr_nonnull(strstr(kv_error_text(), "missing"));
    ck_assert(!present(join(dir, "missing")));
    touch(join(dir, "file"));
    ck_assert_int_eq(kv_repair(join(dir, "file"), NULL), KV_EINVAL);
    ck_assert_int_eq(kv_destroy(join(dir, "file")), KV_EINVAL);
    ck_assert(present(join(dir, "file")));
    kv_options o;
    kv_options_init(&o);
    o.block_size = 1;
    ck_assert_int_eq(kv_repair(dir, &o), KV_EINVAL);
    ck_assert_ptr_nonnull(strstr(kv_error_text(), "block_size"));
    ck_assert_int_eq(kv_destroy(NULL), KV_EINVAL);
    ck_assert_int_eq(kv_destroy(""), KV_EINVAL);
    kv_repair_free(NULL);
    /* An empty directory: an empty database. */
    char e[700];
    snprintf(e, sizeof e, "%s/empty", dir);
    ck_assert_int_eq(mkdir(e, 0755), 0);
    kv_repair_report rep;
    ck_assert_int_eq(kv_repair_ex(e, NULL, &rep), KV_OK);
    ck_assert_uint_eq(rep.tables_found + rep.logs_found, 0);
    kv_repair_free(&rep);
    kv_db *db = open_ok(e, NULL);
    ck_assert_int_eq(kv_put(db, "k", 1, "v", 1), KV_OK);
    ck_assert_int_eq(kv_close(db), KV_OK);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("repair");
    TCase *tc = tcase_create("rebuild");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, repair_after_manifest_deleted);
    tcase_add_test(tc, repair_of_a_keyed_database);
    tcase_add_test(tc, repair_keeps_level0_tables_as_they_are);
    tcase_add_test(tc, repair_merges_tables_of_different_seeds);
    suite_add_tcase(s, tc);
    tc = tcase_create("damage");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, repair_moves_damaged_tables_to_lost);
    tcase_add_test(tc, repair_replays_a_damaged_log_up_to_the_damage);
    tcase_add_test(tc, repair_replaces_a_damaged_manifest);
    suite_add_tcase(s, tc);
    tc = tcase_create("kill");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, repair_killed_at_every_step);
    suite_add_tcase(s, tc);
    tc = tcase_create("destroy");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, destroy_removes_only_kv_files);
    tcase_add_test(tc, bad_arguments);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(root, sizeof root, "%s/kv-repair-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(root)) {
        perror(root);
        return EXIT_FAILURE;
    }
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    nftw(root, remove_one, 16, FTW_DEPTH | FTW_PHYS);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
