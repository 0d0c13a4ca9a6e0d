/* check_corruption.c - damaged files in a closed database, and what the
 * store promises about them (kv.h, doc/database.md "Opening and recovery",
 * doc/wal_format.md "Replay", doc/reliability.md "The promises"). Bytes
 * are flipped in, or cut from, the write-ahead log, the tables and the
 * manifest, located through the documented formats, and the database is
 * reopened:
 *
 *  - the log's last record, flipped or torn: kv_open succeeds, every earlier
 *    record is there, the damaged one is not, and kv_stats reports exactly
 *    the bytes lost; a damaged middle record, byte by byte: replay stops
 *    there (an exact prefix, nothing after it served, now or after later
 *    opens), and a later log (written here by hand from doc/wal_format.md)
 *    is dropped with it;
 *  - a table's data block (payload, compression byte, checksum; found with
 *    kv_explain_get and the index block): exactly the gets whose walk reads
 *    that block fail with KV_ECORRUPT -- never an older version, never a
 *    wrong value -- every other get is exact, iterators stop with
 *    KV_ECORRUPT having served an exact prefix (or suffix), and a compaction
 *    over it fails and commits nothing;
 *  - the index, properties and filter blocks and the trailer (located from
 *    doc/sstable_format.md's trailer), a truncated, extended or missing
 *    table: kv_open fails with KV_ECORRUPT, kv_sst_error_text() names the
 *    file, and the failed open changed nothing;
 *  - the manifest: bytes of a table record (found by its distinctive
 *    smallest key) or of the state record give KV_ECORRUPT, and so does
 *    damage to LMDB's meta pages' magic and version; every bit of both
 *    meta pages in turn, and a MANIFEST cut short, each opened in a child
 *    process: no crash, and either a refusal or every pair served exactly
 *    (not a manifest rolled back or begun afresh, with the tables it no
 *    longer names deleted); a MANIFEST deleted or emptied, or missing its
 *    state record, next to live tables: refused, not taken for a new
 *    database; LMDB's lock file deleted: rebuilt, nothing lost;
 *  - blob files (tcase "blob"; doc/blob_format.md): a byte flipped in the
 *    header or the footer (each byte in turn), or the file cut short,
 *    grown, or deleted: kv_open fails with KV_ECORRUPT naming it; a byte
 *    flipped in one record (each byte of its head, key and checksum, and
 *    bytes of its value): the Gets of that record's key (kv_get,
 *    kv_get_into, kv_multi_get) fail with KV_ECORRUPT, every other key
 *    reads exactly, an iterator serves an exact prefix and stops at the
 *    key with KV_ECORRUPT in kv_iter_status, a scan of keys alone reads no
 *    value and passes it; a blob record of the manifest whose counts
 *    disagree with the file (records, record bytes, size): KV_ECORRUPT at
 *    open; with every damage undone, every pair reads again;
 *  - forged counts and sizes behind recomputed checksums (tcase "forged"):
 *    a table's index whose entries share prefixes, a zstd frame that claims
 *    256 MiB, a data block of 8,000 entries after one restart scanned
 *    backwards, a WAL record whose batch claims a sequence out of turn, and
 *    manifest records naming a level past the last, a last_seq past the
 *    sequence range or below a table's: each refused promptly with
 *    KV_ECORRUPT and a text naming the file and the fault, bounded memory,
 *    and nothing else lost (the long interval: scanned exactly, promptly). */
#define _XOPEN_SOURCE 700
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
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <kv/kv.h>
#include <kv/sstable.h>
#include <lmdb.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "fixture.h"
#include "util/coding.h" /* kv_get64, kv_put64: a MANIFEST meta page edited */

/* ---- fixture: one temporary directory per test ---------------------------------- */

/* Damages done by this test (bytes flipped, files cut or deleted), each
 * followed by the checks of its kind; printed for doc/reliability.md. */
static unsigned long damages;

static void teardown_count(void)
{
    printf("corruption/%s: %lu damages checked\n", tcase_name(), damages);
    fflush(stdout);
    damages = 0;
    test_teardown();
}

/* truncate(2), counted as a damage. */
static int cut(const char *p, off_t len)
{
    damages++;
    return truncate(p, len);
}

#define PATH_LEN 1200

static void pjoin(char *out, const char *a, const char *b)
{
    int n = snprintf(out, PATH_LEN, "%s/%s", a, b);
    ck_assert(n > 0 && n < PATH_LEN);
}

static void table_name(char *out, size_t n, uint64_t number)
{
    snprintf(out, n, "%06llu.sst", (unsigned long long)number);
}

static void table_file(char *out, const char *db, uint64_t number)
{
    char name[64];
    table_name(name, sizeof name, number);
    pjoin(out, db, name);
}

/* ---- file surgery ------------------------------------------------------------------- */

static off_t file_size(const char *p)
{
    struct stat st;
    ck_assert_msg(stat(p, &st) == 0, "stat %s: %s", p, strerror(errno));
    return st.st_size;
}

static int file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

static void read_at(const char *p, off_t off, void *buf, size_t n)
{
    int fd = open(p, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pread(fd, buf, n, off), (ssize_t)n);
    close(fd);
}

static void write_at(const char *p, off_t off, const void *buf, size_t n)
{
    int fd = open(p, O_WRONLY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pwrite(fd, buf, n, off), (ssize_t)n);
    close(fd);
}

static void flip(const char *p, off_t off, uint8_t mask)
{
    uint8_t c;
    read_at(p, off, &c, 1);
    c ^= mask;
    write_at(p, off, &c, 1);
    damages++;
}

/* Undoes a flip (not a damage). */
static void unflip(const char *p, off_t off, uint8_t mask)
{
    flip(p, off, mask);
    damages--;
}

static uint8_t *slurp(const char *p, size_t *n)
{
    *n = (size_t)file_size(p);
    uint8_t *b = malloc(*n ? *n : 1);
    ck_assert_ptr_nonnull(b);
    if (*n)
        read_at(p, 0, b, *n);
    return b;
}

static void spit(const char *p, const void *b, size_t n)
{
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, b, n), (ssize_t)n);
    close(fd);
}

/* A database directory holds only regular files. */
static void copy_dir(const char *src, const char *dst)
{
    remove_tree(dst);
    ck_assert_int_eq(mkdir(dst, 0755), 0);
    DIR *d = opendir(src);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char s[PATH_LEN], t[PATH_LEN];
        pjoin(s, src, e->d_name);
        pjoin(t, dst, e->d_name);
        size_t n;
        uint8_t *b = slurp(s, &n);
        spit(t, b, n);
        free(b);
    }
    closedir(d);
}

/* Numbers of the files <n>.<ext> in a directory, ascending; returns how many. */
static size_t numbered_files(const char *p, const char *ext, uint64_t *nums, size_t max)
{
    DIR *d = opendir(p);
    ck_assert_ptr_nonnull(d);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        unsigned long long v = strtoull(e->d_name, &end, 10);
        if (end == e->d_name || end[0] != '.' || strcmp(end + 1, ext) != 0)
            continue;
        ck_assert_uint_lt(n, max);
        nums[n++] = v;
    }
    closedir(d);
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && nums[j - 1] > nums[j]; j--) {
            uint64_t t = nums[j];
            nums[j] = nums[j - 1];
            nums[j - 1] = t;
        }
    return n;
}

/* ---- the store ------------------------------------------------------------------------ */

/* kv_open must fail with KV_ECORRUPT, leave *out NULL, and say which file
 * (when `name` is given) in kv_sst_error_text(). */
static void expect_open_corrupt(const char *p, const char *name, const char *what)
{
    kv_db *db = (kv_db *)test_dir;
    int rc = kv_open(p, NULL, &db);
    ck_assert_msg(rc == KV_ECORRUPT, "%s: kv_open gave %s, not KV_ECORRUPT", what,
                  kv_strerror(rc));
    ck_assert_ptr_null(db);
    if (name)
        ck_assert_msg(strstr(kv_sst_error_text(), name) != NULL,
                      "%s: the error text \"%s\" does not name %s", what, kv_sst_error_text(),
                      name);
}

static void fill_bytes(uint64_t seed, uint8_t *p, size_t n)
{
    uint64_t x = seed;
    for (size_t i = 0; i < n; i += 8) {
        x = splitmix(x);
        memcpy(p + i, &x, n - i < 8 ? n - i : 8);
    }
}

/* Bytewise key order, shorter first on a tie (kv.h). */
static int key_cmp(const void *a, size_t al, const void *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : (al > bl) - (al < bl);
}

/* =========================================================================================
 * The write-ahead log
 * ====================================================================================== */

#define WAL_BLOCK 32768
#define WAL_HEADER 9
#define W_RECORDS 100
#define W_BIG 70000 /* the last record: a FIRST, a MIDDLE and a LAST fragment */

static size_t w_key(int i, char *k)
{
    return (size_t)sprintf(k, "w%03d", i);
}

static size_t w_value(int i, uint8_t *v)
{
    size_t n = i == W_RECORDS - 1 ? W_BIG : 40 + (size_t)(i * 37) % 1400;
    fill_bytes(0xA11ull * (uint64_t)(i + 1), v, n);
    return n;
}

/* Where each record lies in the log: [start, end) as the file grew with
 * each put (one kv_put is one record). A record's first fragment begins
 * after the writer's zero padding, if the block had less than a header left. */
struct wal_geo {
    uint64_t number; /* the log's number */
    off_t start[W_RECORDS], end[W_RECORDS], size;
    uint64_t last_seq;
};

static off_t rec_first(const struct wal_geo *g, int i)
{
    off_t room = WAL_BLOCK - g->start[i] % WAL_BLOCK;
    return room < WAL_HEADER ? g->start[i] + room : g->start[i];
}

static void log_path(char *out, const char *db, uint64_t number)
{
    char name[64];
    snprintf(name, sizeof name, "%06llu.log", (unsigned long long)number);
    pjoin(out, db, name);
}

static void build_wal_db(const char *p, struct wal_geo *g)
{
    kv_db *db = open_db(p, NULL);
    uint64_t logs[8];
    ck_assert_uint_eq(numbered_files(p, "log", logs, 8), 1);
    g->number = logs[0];
    char log[PATH_LEN];
    log_path(log, p, g->number);
    ck_assert_int_eq(file_size(log), 0);
    uint8_t *v = malloc(W_BIG);
    ck_assert_ptr_nonnull(v);
    char k[16];
    off_t prev = 0;
    for (int i = 0; i < W_RECORDS; i++) {
        ck_assert_int_eq(kv_put(db, k, w_key(i, k), v, w_value(i, v)), KV_OK);
        g->start[i] = prev;
        g->end[i] = prev = file_size(log);
    }
    struct kv_stats s;
    get_stats(db, &s);
    g->last_seq = s.last_sequence;
    close_db(db);
    free(v);
    g->size = file_size(log);
    ck_assert_int_eq(g->size, g->end[W_RECORDS - 1]);
    /* The last record spans three blocks: its fragments are FIRST, MIDDLE, LAST. */
    ck_assert_int_eq(g->end[W_RECORDS - 1] / WAL_BLOCK - rec_first(g, W_RECORDS - 1) / WAL_BLOCK,
                     2);
    /* Some earlier record crosses a block boundary too. */
    int crossing = 0;
    for (int i = 0; i < W_RECORDS - 1; i++)
        crossing += rec_first(g, i) / WAL_BLOCK != (g->end[i] - 1) / WAL_BLOCK;
    ck_assert_int_gt(crossing, 0);
}

/* Extra records in a hand-written log (x000, x001, ...). */
static size_t x_key(int j, char *k)
{
    return (size_t)sprintf(k, "x%03d", j);
}

static size_t x_value(int j, uint8_t *v)
{
    size_t n = 30 + (size_t)(j * 13) % 60;
    fill_bytes(0xE1ull * (uint64_t)(j + 1), v, n);
    return n;
}

/* What a reopened database must hold: records w000 .. w(upto-1) of the log
 * and x000 .. x(xupto-1) of a second log, nothing else; with the recovery
 * figures given. */
struct wal_expect {
    int upto, xn, xupto;
    uint64_t recovered, dropped, damaged;
    int after; /* the pair "zafter" written after the recovery is there too */
};

static void check_wal_db(kv_db *db, const struct wal_expect *e, int recovery)
{
    if (recovery) {
        struct kv_stats s;
        get_stats(db, &s);
        ck_assert_msg(s.recovered_records == e->recovered, "recovered %llu records, want %llu",
                      (unsigned long long)s.recovered_records,
                      (unsigned long long)e->recovered);
        ck_assert_msg(s.recovery_dropped_bytes == e->dropped, "dropped %llu bytes, want %llu",
                      (unsigned long long)s.recovery_dropped_bytes,
                      (unsigned long long)e->dropped);
        ck_assert_uint_eq(s.recovery_tail_damaged, e->damaged);
        /* kv_recovery_report names the damaged log (and any log it left
         * unreplayed), and is empty after a clean replay. */
        char *text = NULL;
        ck_assert_int_eq(kv_recovery_report(db, &text), KV_OK);
        ck_assert_ptr_nonnull(text);
        if (e->damaged) {
            ck_assert_msg(strstr(text, ".log: KV_ECORRUPT at byte") != NULL,
                          "recovery report without the damaged log: \"%s\"", text);
            int skipped = e->xn > 0 && e->upto < W_RECORDS; /* damage in the first of two */
            ck_assert_msg(skipped == (strstr(text, "not replayed") != NULL),
                          "recovery report: \"%s\"", text);
        } else {
            ck_assert_msg(text[0] == '\0', "clean replay, yet the report says \"%s\"", text);
        }
        kv_free(text);
    }
    uint8_t *v = malloc(W_BIG);
    ck_assert_ptr_nonnull(v);
    char k[16];
    /* Point reads: the prefix exact, everything after it absent. */
    for (int i = 0; i < W_RECORDS; i++) {
        size_t kl = w_key(i, k), vl = w_value(i, v);
        void *got = NULL;
        size_t n = 0;
        int rc = kv_get(db, k, kl, &got, &n);
        if (i < e->upto) {
            ck_assert_msg(rc == KV_OK, "record %d, before the damage: %s", i, kv_strerror(rc));
            ck_assert_msg(n == vl && memcmp(got, v, vl) == 0, "record %d: wrong value", i);
            kv_free(got);
        } else
            ck_assert_msg(rc == KV_NOTFOUND, "record %d, at or after the damage: %s", i,
                          kv_strerror(rc));
    }
    for (int j = 0; j < e->xn; j++) {
        size_t kl = x_key(j, k), vl = x_value(j, v);
        void *got = NULL;
        size_t n = 0;
        int rc = kv_get(db, k, kl, &got, &n);
        if (j < e->xupto) {
            ck_assert_msg(rc == KV_OK, "second log, record %d: %s", j, kv_strerror(rc));
            ck_assert(n == vl && memcmp(got, v, vl) == 0);
            kv_free(got);
        } else
            ck_assert_msg(rc == KV_NOTFOUND, "second log, record %d: %s", j, kv_strerror(rc));
    }
    /* A scan: exactly those pairs, in order (x sorts after w). */
    kv_iter *it = NULL;
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    kv_iter_seek_first(it);
    for (int i = 0; i < e->upto + e->xupto; i++) {
        ck_assert_msg(kv_iter_valid(it), "scan ended at %d of %d", i, e->upto + e->xupto);
        int x = i >= e->upto;
        size_t kl = x ? x_key(i - e->upto, k) : w_key(i, k);
        size_t vl = x ? x_value(i - e->upto, v) : w_value(i, v);
        size_t gkl, gvl;
        const void *gk = kv_iter_key(it, &gkl), *gv = kv_iter_value(it, &gvl);
        ck_assert(gkl == kl && memcmp(gk, k, kl) == 0);
        ck_assert(gvl == vl && memcmp(gv, v, vl) == 0);
        kv_iter_next(it);
    }
    if (e->after) {
        size_t gkl;
        const void *gk = kv_iter_key(it, &gkl);
        ck_assert(gk && gkl == 6 && memcmp(gk, "zafter", 6) == 0);
        kv_iter_next(it);
    }
    ck_assert_msg(!kv_iter_valid(it), "the scan served a pair after the damage");
    ck_assert_int_eq(kv_iter_status(it), KV_OK);
    kv_iter_free(it);
    free(v);
}

/* Opens the damaged copy and checks it; with `again`, also that the store
 * takes a write, and that the next open finds the same prefix plus that
 * write with a clean recovery (the damaged log is gone; nothing comes back). */
static void reopen_and_check(const char *p, const struct wal_expect *e, int again)
{
    kv_db *db = open_db(p, NULL);
    check_wal_db(db, e, 1);
    if (!again) {
        close_db(db);
        return;
    }
    ck_assert_int_eq(kv_put(db, "zafter", 6, "the damage", 10), KV_OK);
    close_db(db);
    db = open_db(p, NULL);
    struct wal_expect clean = *e;
    clean.recovered = 1; /* the one write above, from the new log */
    clean.dropped = 0;
    clean.damaged = 0;
    clean.after = 1;
    check_wal_db(db, &clean, 1);
    void *got = NULL;
    size_t n = 0;
    ck_assert_int_eq(kv_get(db, "zafter", 6, &got, &n), KV_OK);
    ck_assert(n == 10 && memcmp(got, "the damage", 10) == 0);
    kv_free(got);
    close_db(db);
}

/* The fragments of the last record (FIRST, MIDDLE, LAST): flips in the
 * headers and payloads of each. Every earlier record survives, the last one
 * is gone, and its bytes are the loss reported. */
START_TEST(wal_last_record_flipped)
{
    char pristine[PATH_LEN], work[PATH_LEN], log[PATH_LEN];
    pjoin(pristine, test_dir, "pristine");
    pjoin(work, test_dir, "work");
    struct wal_geo g;
    build_wal_db(pristine, &g);
    const int last = W_RECORDS - 1;
    off_t first = rec_first(&g, last);
    off_t middle = (first / WAL_BLOCK + 1) * WAL_BLOCK, lastfrag = middle + WAL_BLOCK;
    const off_t where[] = {
        first,                   /* FIRST: checksum */
        first + 6,               /* FIRST: type */
        first + 7,               /* FIRST: log tag */
        first + WAL_HEADER + 3,  /* FIRST: payload (the batch's sequence number) */
        middle - 1,              /* FIRST: last payload byte */
        middle + 4,              /* MIDDLE: length */
        middle + 5000,           /* MIDDLE: payload */
        lastfrag + 6,            /* LAST: type */
        g.size - 1,              /* LAST: final byte */
    };
    struct wal_expect e = {.upto = last, .recovered = (uint64_t)last,
                           .dropped = (uint64_t)(g.size - g.start[last]), .damaged = 1};
    for (size_t t = 0; t < sizeof where / sizeof where[0]; t++) {
        copy_dir(pristine, work);
        log_path(log, work, g.number);
        flip(log, where[t], (uint8_t)(1u << (t % 8)));
        reopen_and_check(work, &e, t == 0);
    }
}
END_TEST

/* The last record torn: cut inside its payload, inside a header, at a block
 * boundary between its fragments -- damage, the tail's bytes reported --
 * and exactly at its start, a clean end: 99 records, nothing dropped. */
START_TEST(wal_last_record_truncated)
{
    char pristine[PATH_LEN], work[PATH_LEN], log[PATH_LEN];
    pjoin(pristine, test_dir, "pristine");
    pjoin(work, test_dir, "work");
    struct wal_geo g;
    build_wal_db(pristine, &g);
    const int last = W_RECORDS - 1;
    off_t first = rec_first(&g, last);
    off_t middle = (first / WAL_BLOCK + 1) * WAL_BLOCK, lastfrag = middle + WAL_BLOCK;
    const off_t cuts[] = {g.size - 1, lastfrag + 4, lastfrag, middle + 100, middle,
                          first + WAL_HEADER + 1, g.start[last]};
    for (size_t t = 0; t < sizeof cuts / sizeof cuts[0]; t++) {
        copy_dir(pristine, work);
        log_path(log, work, g.number);
        ck_assert_int_eq(cut(log, cuts[t]), 0);
        uint64_t tail = (uint64_t)(cuts[t] - g.start[last]);
        struct wal_expect e = {.upto = last, .recovered = (uint64_t)last, .dropped = tail,
                               .damaged = tail > 0};
        reopen_and_check(work, &e, t == 0 || tail == 0);
    }
}
END_TEST

/* One middle record (50 of 100), damaged at each byte of its header and
 * batch header and at every 13th byte after: replay stops there. kv_open
 * succeeds (doc/wal_format.md: replay stops at the first damaged fragment;
 * kv.h: the loss is reported in kv_stats), records 0..49 are served, 50..99
 * never are -- not even the intact ones after the damage -- and the same
 * holds for the first record. */
START_TEST(wal_middle_record_stops_replay)
{
    char pristine[PATH_LEN], work[PATH_LEN], log[PATH_LEN];
    pjoin(pristine, test_dir, "pristine");
    pjoin(work, test_dir, "work");
    struct wal_geo g;
    build_wal_db(pristine, &g);
    const int mid = W_RECORDS / 2;
    ck_assert_int_eq(rec_first(&g, mid) / WAL_BLOCK, (g.end[mid] - 1) / WAL_BLOCK); /* one FULL */
    struct wal_expect e = {.upto = mid, .recovered = (uint64_t)mid,
                           .dropped = (uint64_t)(g.size - g.start[mid]), .damaged = 1};
    int trials = 0;
    const off_t first = rec_first(&g, mid);
    for (off_t off = first; off < g.end[mid]; off += (off - first < 32 ? 1 : 13)) {
        copy_dir(pristine, work);
        log_path(log, work, g.number);
        flip(log, off, (uint8_t)(1u << (off % 8)));
        reopen_and_check(work, &e, trials == 0);
        trials++;
    }
    ck_assert_int_gt(trials, 40);

    /* The first record: nothing at all is recovered, the whole log is lost. */
    copy_dir(pristine, work);
    log_path(log, work, g.number);
    flip(log, WAL_HEADER + 2, 0x04);
    struct wal_expect none = {.upto = 0, .recovered = 0, .dropped = (uint64_t)g.size,
                              .damaged = 1};
    reopen_and_check(work, &none, 1);
}
END_TEST

#define X_RECORDS 20

static size_t put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

/* Writes log `number` by hand from doc/wal_format.md (one FULL fragment per
 * record) holding records x000 .. x019, one put each, with sequences from
 * first_seq (batch encoding: kv/batch.h), but for record forged_j (-1:
 * none), whose batch claims sequence forged_seq. starts[j] is record j's
 * offset. */
static void craft_log_forged(const char *path, uint64_t number, uint64_t first_seq, off_t *starts,
                             int forged_j, uint64_t forged_seq)
{
    uint8_t *f = calloc(1, WAL_BLOCK);
    ck_assert_ptr_nonnull(f);
    size_t off = 0;
    for (int j = 0; j < X_RECORDS; j++) {
        uint8_t rec[256], v[128];
        char k[16];
        size_t kl = x_key(j, k), vl = x_value(j, v), n = 0;
        uint64_t seq = j == forged_j ? forged_seq : first_seq + (uint64_t)j;
        for (int b = 0; b < 8; b++)
            rec[n++] = (uint8_t)(seq >> (8 * b));
        rec[n++] = 1; /* count, u32le */
        rec[n++] = 0;
        rec[n++] = 0;
        rec[n++] = 0;
        rec[n++] = 1; /* a value */
        n += put_varint(rec + n, kl);
        memcpy(rec + n, k, kl);
        n += kl;
        n += put_varint(rec + n, vl);
        memcpy(rec + n, v, vl);
        n += vl;
        ck_assert_uint_le(off + WAL_HEADER + n, WAL_BLOCK); /* all in the first block */
        uint8_t *h = f + off;
        h[4] = (uint8_t)n;
        h[5] = (uint8_t)(n >> 8);
        h[6] = 1; /* FULL */
        h[7] = (uint8_t)number;
        h[8] = (uint8_t)(number >> 8);
        memcpy(h + WAL_HEADER, rec, n);
        uint32_t c = (uint32_t)XXH3_64bits(h + 4, WAL_HEADER - 4 + n);
        for (int b = 0; b < 4; b++)
            h[b] = (uint8_t)(c >> (8 * b));
        starts[j] = (off_t)off;
        off += WAL_HEADER + n;
    }
    starts[X_RECORDS] = (off_t)off;
    spit(path, f, off);
    free(f);
}

static void craft_log(const char *path, uint64_t number, uint64_t first_seq, off_t *starts)
{
    craft_log_forged(path, number, first_seq, starts, -1, 0);
}

/* doc/database.md: "Replay stops at the first damaged record; any later log
 * is dropped too, so what survives is a prefix of the writes with no
 * holes." A second live log, written by hand after the store's: intact, it
 * is replayed after the first; when the first is damaged, none of it is. */
START_TEST(wal_damage_drops_later_logs)
{
    char pristine[PATH_LEN], work[PATH_LEN], log[PATH_LEN], log2[PATH_LEN];
    pjoin(pristine, test_dir, "pristine");
    pjoin(work, test_dir, "work");
    struct wal_geo g;
    build_wal_db(pristine, &g);
    off_t xs[X_RECORDS + 1];
    log_path(log2, pristine, g.number + 1);
    craft_log(log2, g.number + 1, g.last_seq + 1, xs);
    const int mid = W_RECORDS / 2;

    /* Both intact: 120 records, in order. */
    copy_dir(pristine, work);
    struct wal_expect all = {.upto = W_RECORDS, .xn = X_RECORDS, .xupto = X_RECORDS,
                             .recovered = W_RECORDS + X_RECORDS};
    reopen_and_check(work, &all, 1);

    /* The first log damaged in the middle: the second is dropped whole. */
    copy_dir(pristine, work);
    log_path(log, work, g.number);
    flip(log, rec_first(&g, mid) + WAL_HEADER + 20, 0x20);
    struct wal_expect cut = {.upto = mid, .xn = X_RECORDS, .xupto = 0, .recovered = (uint64_t)mid,
                             .dropped = (uint64_t)(g.size - g.start[mid] + xs[X_RECORDS]),
                             .damaged = 1};
    reopen_and_check(work, &cut, 1);

    /* The second log damaged: the first whole, the second up to the damage. */
    copy_dir(pristine, work);
    log_path(log, work, g.number + 1);
    flip(log, xs[10] + 4, 0x01);
    struct wal_expect tail = {.upto = W_RECORDS, .xn = X_RECORDS, .xupto = 10,
                              .recovered = W_RECORDS + 10,
                              .dropped = (uint64_t)(xs[X_RECORDS] - xs[10]), .damaged = 1};
    reopen_and_check(work, &tail, 1);
}
END_TEST

/* =========================================================================================
 * Tables
 * ====================================================================================== */

#define T_OLD 3000   /* keys 0..2999: written, then compacted to level 1 */
#define T_ALL 3500   /* keys 3000..3499: the newest table */
#define T_ABSENT 500 /* "key%06d~": never written, inside the tables' ranges */
#define T_PROBES (T_ALL + T_ABSENT)

static size_t t_key(int j, char *k)
{
    if (j < T_ALL)
        return (size_t)sprintf(k, "key%06d", j);
    return (size_t)sprintf(k, "key%06d~", (j - T_ALL) * 7);
}

static size_t t_value(int i, int ver, uint8_t *v)
{
    uint64_t seed = splitmix(((uint64_t)i << 4) | (uint64_t)ver);
    size_t n = 24 + (size_t)(seed % 100);
    fill_bytes(seed, v, n);
    memcpy(v, &i, sizeof i);
    v[4] = (uint8_t)ver;
    return n;
}

/* The version of key j that the database holds: 0 for none. Phase 1 wrote
 * version 1 of keys 0..2999; phase 2 overwrote every third with version 2
 * and deleted every seventh of the rest; phase 3 wrote version 3 of keys
 * 3000..3499. */
static int t_version(int j)
{
    if (j >= T_ALL)
        return 0;
    if (j >= T_OLD)
        return 3;
    if (j % 3 == 0)
        return 2;
    return j % 7 == 0 ? 0 : 1;
}

/* One data block, from the index block (doc/sstable_format.md). */
struct blk {
    uint64_t off, size;   /* stored payload, without its 9-byte trailer */
    char last[32];        /* its last user key */
    size_t last_len;
};

#define MAX_BLOCKS 1024

/* A table's layout, from its trailer and index block. */
struct layout {
    uint64_t size, ioff, ilen, poff, plen, foff, flen;
    size_t nblocks;
    struct blk *blocks;
};

struct table {
    uint64_t number;
    unsigned level;
    char smallest[32], largest[32];
    size_t slen, llen;
    struct layout lay;
};

/* One step of a Get's walk through the tables, from kv_explain_get. */
#define MAX_STEPS 8
struct walk {
    int n;
    uint64_t number[MAX_STEPS], off[MAX_STEPS], bytes[MAX_STEPS];
    int outcome[MAX_STEPS];
};

/* The database of the table tests, built once per test. */
static struct tdb {
    char pristine[PATH_LEN], work[PATH_LEN];
    size_t ntables;
    struct table tables[32];
    struct walk walks[T_PROBES];
} T;

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int get_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 70 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80))
            return 1;
    }
    return 0;
}

/* Reads the trailer and walks the index block as doc/sstable_format.md
 * lays them out, checking that the documented invariants hold, and that the
 * reader agrees (kv_sst_reader_properties). */
static void read_layout(const char *path, struct layout *L)
{
    memset(L, 0, sizeof *L);
    L->size = (uint64_t)file_size(path);
    uint8_t t[72];
    read_at(path, (off_t)(L->size - 72), t, 72);
    ck_assert(memcmp(t, "kvSSTbl1", 8) == 0);
    uint32_t version = get_u32(t + 8); /* 2: a table with a zstd dictionary */
    ck_assert(version == 1 || version == 2);
    ck_assert_uint_eq(get_u64(t + 64), XXH3_64bits(t, 64));
    L->ioff = get_u64(t + 16);
    L->ilen = get_u64(t + 24);
    L->poff = get_u64(t + 32);
    L->plen = get_u64(t + 40);
    L->foff = get_u64(t + 48);
    L->flen = get_u64(t + 56);
    ck_assert_uint_eq(L->poff, L->ioff + L->ilen + 9);
    uint64_t dict = 0; /* version 2: properties version 4 give the dictionary's size,
                        * and it lies between the properties and the filter */
    if (version == 2) {
        uint8_t pv[4], d[8];
        read_at(path, (off_t)L->poff, pv, 4);
        read_at(path, (off_t)(L->poff + 104), d, 8);
        ck_assert_uint_eq(get_u32(pv), 4);
        dict = get_u64(d);
        ck_assert_uint_gt(dict, 0);
        ck_assert_uint_eq(L->foff, L->poff + L->plen + 9 + dict + 9);
    } else
        ck_assert_uint_eq(L->foff, L->poff + L->plen + 9);
    ck_assert_uint_gt(L->flen, 0); /* the store's tables carry a filter */
    ck_assert_uint_eq(L->foff + L->flen + 9, L->size - 72);

    /* The index: entries (varint shared, unshared, value length; key delta;
     * value = varint offset, varint size), then u32 restarts, u32 count. */
    uint8_t *ib = malloc(L->ilen + 9);
    ck_assert_ptr_nonnull(ib);
    read_at(path, (off_t)L->ioff, ib, L->ilen + 9);
    ck_assert_uint_eq(ib[L->ilen], 0); /* stored raw */
    ck_assert_uint_eq(get_u64(ib + L->ilen + 1), XXH3_64bits(ib, L->ilen + 1));
    uint32_t nrestarts = get_u32(ib + L->ilen - 4);
    const uint8_t *p = ib, *end = ib + L->ilen - 4 - 4 * (size_t)nrestarts;
    L->blocks = calloc(MAX_BLOCKS, sizeof *L->blocks);
    ck_assert_ptr_nonnull(L->blocks);
    uint8_t key[64];
    size_t klen = 0;
    uint64_t next = 0;
    while (p < end) {
        uint64_t shared, unshared, vlen, off, size;
        ck_assert(get_varint(&p, end, &shared) && get_varint(&p, end, &unshared) &&
                  get_varint(&p, end, &vlen));
        ck_assert(shared <= klen && shared + unshared <= sizeof key);
        ck_assert(unshared + vlen <= (uint64_t)(end - p));
        memcpy(key + shared, p, unshared);
        klen = shared + unshared;
        p += unshared;
        const uint8_t *vend = p + vlen;
        ck_assert(get_varint(&p, vend, &off) && get_varint(&p, vend, &size) && p == vend);
        ck_assert_uint_eq(off, next); /* contiguous from 0 */
        next = off + size + 9;
        /* Internal key: the user key (no NUL bytes in ours), 00 01, 8 bytes. */
        ck_assert(klen > 10 && key[klen - 10] == 0 && key[klen - 9] == 1);
        ck_assert_uint_lt(L->nblocks, MAX_BLOCKS);
        struct blk *b = &L->blocks[L->nblocks++];
        b->off = off;
        b->size = size;
        b->last_len = klen - 10;
        ck_assert_uint_lt(b->last_len, sizeof b->last);
        memcpy(b->last, key, b->last_len);
    }
    ck_assert_uint_eq(next, L->ioff); /* the last block ends where the index starts */
    free(ib);

    kv_sst_reader *r = NULL;
    ck_assert_int_eq(kv_sst_reader_open(path, NULL, 1, &r), KV_OK);
    kv_sst_properties pr;
    kv_sst_reader_properties(r, &pr);
    ck_assert_uint_eq(pr.data_blocks, L->nblocks);
    ck_assert_uint_eq(pr.file_size, L->size);
    ck_assert_uint_eq(pr.data_stored_bytes + 9 * pr.data_blocks, L->ioff);
    ck_assert_uint_eq(pr.dict_bytes, dict);
    ck_assert_uint_eq(pr.format_version, version);
    ck_assert(pr.filter_bits_per_key > 0);
    kv_sst_reader_close(r);
}

/* Builds T.pristine (compression as given): level 1 holds keys 0..2999
 * (version 1) in several tables; level 0 an older table (every third key
 * overwritten, every seventh of the rest deleted) and a newer one (keys
 * 3000..3499). Then records every table's layout and every probe's walk. */
static void build_table_db(int compression)
{
    pjoin(T.pristine, test_dir, "pristine");
    pjoin(T.work, test_dir, "work");
    kv_options o;
    kv_options_init(&o);
    o.idle_compaction_ms = 0; /* level 0 keeps the two tables described above */
    o.dynamic_level_bytes = 0; /* and level 1 the compacted keys */
    o.block_size = 1024;
    o.compression = compression;
    o.target_file_size = (size_t)64 << 10;
    kv_db *db = open_db(T.pristine, &o);
    char k[32];
    uint8_t v[128];
    for (int i = 0; i < T_OLD; i++)
        ck_assert_int_eq(kv_put(db, k, t_key(i, k), v, t_value(i, 1, v)), KV_OK);
    ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 0), KV_OK);
    for (int i = 0; i < T_OLD; i++) {
        if (i % 3 == 0)
            ck_assert_int_eq(kv_put(db, k, t_key(i, k), v, t_value(i, 2, v)), KV_OK);
        else if (i % 7 == 0)
            ck_assert_int_eq(kv_delete(db, k, t_key(i, k)), KV_OK);
    }
    ck_assert_int_eq(kv_flush(db), KV_OK);
    for (int i = T_OLD; i < T_ALL; i++)
        ck_assert_int_eq(kv_put(db, k, t_key(i, k), v, t_value(i, 3, v)), KV_OK);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    close_db(db);

    db = open_db(T.pristine, &o);
    struct kv_stats s;
    get_stats(db, &s);
    ck_assert_uint_eq(s.l0_tables, 2);
    ck_assert_uint_ge(s.level_tables[1], 3);
    kv_table_stats *ts = NULL;
    size_t n = 0;
    ck_assert_int_eq(kv_table_stats_get(db, &ts, &n), KV_OK);
    ck_assert_uint_le(n, 32);
    T.ntables = n;
    for (size_t i = 0; i < n; i++) {
        struct table *t = &T.tables[i];
        t->number = ts[i].number;
        t->level = ts[i].level;
        ck_assert(ts[i].smallest_len < sizeof t->smallest && ts[i].largest_len < sizeof t->largest);
        memcpy(t->smallest, ts[i].smallest, t->slen = ts[i].smallest_len);
        memcpy(t->largest, ts[i].largest, t->llen = ts[i].largest_len);
        char path[PATH_LEN];
        table_file(path, T.pristine, t->number);
        read_layout(path, &t->lay);
    }
    kv_free(ts);
    ck_assert_uint_eq(T.tables[0].level, 0); /* newest level-0 first */
    ck_assert_uint_eq(T.tables[1].level, 0);

    /* Every probe's walk; the database answers as the model says. */
    for (int j = 0; j < T_PROBES; j++) {
        size_t kl = t_key(j, k);
        kv_explain *x = NULL;
        ck_assert_int_eq(kv_explain_get(db, k, kl, &x), KV_OK);
        int ver = t_version(j);
        ck_assert_int_eq(x->result, ver ? KV_OK : KV_NOTFOUND);
        if (ver) {
            size_t vl = t_value(j, ver, v);
            ck_assert(x->value_len == vl && memcmp(x->value, v, vl) == 0);
        }
        struct walk *w = &T.walks[j];
        w->n = 0;
        for (size_t i = 0; i < x->nsteps; i++) {
            const kv_explain_step *st = &x->steps[i];
            if (st->where != KV_EXPLAIN_TABLE)
                continue;
            ck_assert_int_lt(w->n, MAX_STEPS);
            w->number[w->n] = st->number;
            w->off[w->n] = st->block_offset;
            w->bytes[w->n] = st->block_bytes;
            w->outcome[w->n] = st->outcome;
            w->n++;
        }
        kv_free(x);
    }
    close_db(db);
}

/* Opens the copy T.work: the defaults, with no idle compaction, which
 * would merge level 0 away from under the damage being tried. */
static kv_db *open_table_db(void)
{
    kv_options o;
    kv_options_init(&o);
    o.idle_compaction_ms = 0;
    return open_db(T.work, &o);
}

static void free_table_db(void)
{
    for (size_t i = 0; i < T.ntables; i++)
        free(T.tables[i].lay.blocks);
    memset(&T, 0, sizeof T);
}

static const struct table *table_by_number(uint64_t number)
{
    for (size_t i = 0; i < T.ntables; i++)
        if (T.tables[i].number == number)
            return &T.tables[i];
    ck_abort_msg("no table %llu", (unsigned long long)number);
    return NULL;
}

/* The damage being tried, for failure messages. */
static char trial[200];

/* Did probe j's walk read block `off` of table `number`? */
static int walk_reads(int j, uint64_t number, uint64_t off)
{
    const struct walk *w = &T.walks[j];
    for (int i = 0; i < w->n; i++)
        if (w->number[i] == number && w->bytes[i] > 0 && w->off[i] == off)
            return 1;
    return 0;
}

/* The data block that probe j's walk read in table `number`. */
static size_t block_of(int j, uint64_t number)
{
    const struct walk *w = &T.walks[j];
    const struct layout *L = &table_by_number(number)->lay;
    for (int i = 0; i < w->n; i++)
        if (w->number[i] == number && w->bytes[i] > 0)
            for (size_t b = 0; b < L->nblocks; b++)
                if (L->blocks[b].off == w->off[i]) {
                    ck_assert_uint_eq(w->bytes[i], L->blocks[b].size + 9);
                    return b;
                }
    ck_abort_msg("probe %d reads no block of table %llu", j, (unsigned long long)number);
    return 0;
}

/* Every get after damage to block `b` of table `number`: KV_ECORRUPT for
 * exactly the probes whose walk read that block, the exact answer for all
 * others. Returns how many failed. */
static int check_gets(kv_db *db, uint64_t number, size_t b)
{
    const struct table *t = table_by_number(number);
    uint64_t off = t->lay.blocks[b].off;
    char name[64], k[32];
    table_name(name, sizeof name, number);
    uint8_t v[128];
    int failed = 0, first_failed = -1;
    for (int j = 0; j < T_PROBES; j++) {
        size_t kl = t_key(j, k);
        void *got = NULL;
        size_t n = 0;
        int rc = kv_get(db, k, kl, &got, &n);
        if (walk_reads(j, number, off)) {
            ck_assert_msg(rc == KV_ECORRUPT, "%s: %.*s reads the damaged block of %s: %s", trial,
                          (int)kl, k, name, kv_strerror(rc));
            ck_assert_msg(strstr(kv_sst_error_text(), name) != NULL,
                          "error text \"%s\" does not name %s", kv_sst_error_text(), name);
            if (first_failed < 0)
                first_failed = j;
            failed++;
            continue;
        }
        int ver = t_version(j);
        if (!ver) {
            ck_assert_msg(rc == KV_NOTFOUND, "%s: %.*s: %s, not absent", trial, (int)kl, k,
                          kv_strerror(rc));
            continue;
        }
        ck_assert_msg(rc == KV_OK, "%s: %.*s, away from the damage: %s", trial, (int)kl, k,
                      kv_strerror(rc));
        size_t vl = t_value(j, ver, v);
        ck_assert_msg(n == vl && memcmp(got, v, vl) == 0, "%s: %.*s: wrong value", trial, (int)kl,
                      k);
        kv_free(got);
    }
    ck_assert_int_gt(failed, 0);

    /* kv_explain_get shows the same failure as a step. */
    kv_explain *x = NULL;
    size_t kl = t_key(first_failed, k);
    ck_assert_int_eq(kv_explain_get(db, k, kl, &x), KV_OK);
    ck_assert_int_eq(x->result, KV_ECORRUPT);
    ck_assert_ptr_null(x->value);
    ck_assert_uint_gt(x->nsteps, 0);
    const kv_explain_step *st = &x->steps[x->nsteps - 1];
    ck_assert_int_eq(st->outcome, KV_EXPLAIN_FAILED);
    ck_assert_uint_eq(st->number, number);
    kv_free(x);
    return failed;
}

/* Index in key order of the visible pairs; the model's list. */
static int visible[T_ALL];
static int nvisible;

static void list_visible(void)
{
    nvisible = 0;
    for (int j = 0; j < T_ALL; j++)
        if (t_version(j))
            visible[nvisible++] = j;
}

static int count_visible_le(const char *key, size_t kl)
{
    char k[32];
    int n = 0;
    for (int i = 0; i < nvisible; i++) {
        size_t l = t_key(visible[i], k);
        n += key_cmp(k, l, key, kl) <= 0;
    }
    return n;
}

/* A full scan forward and one backward over a damaged block b of table
 * `number`: each serves an exact run of the model's pairs from its end,
 * then stops, not valid, with KV_ECORRUPT. Forward, it stops before any key
 * past the previous block's last key (it must read block b to go on), and
 * serves at least every key up to the last key two blocks back; backward,
 * symmetrically. */
static void check_scans(kv_db *db, uint64_t number, size_t b)
{
    const struct table *t = table_by_number(number);
    const struct layout *L = &t->lay;
    char k[32];
    uint8_t v[128];
    for (int pass = 0; pass < 2; pass++) {
        int forward = pass == 0;
        kv_iter *it = NULL;
        ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
        if (forward)
            kv_iter_seek_first(it);
        else
            kv_iter_seek_last(it);
        int n = 0;
        for (; kv_iter_valid(it); n++) {
            ck_assert_int_lt(n, nvisible);
            int j = visible[forward ? n : nvisible - 1 - n];
            size_t kl = t_key(j, k), vl = t_value(j, t_version(j), v), gkl, gvl;
            const void *gk = kv_iter_key(it, &gkl), *gv = kv_iter_value(it, &gvl);
            ck_assert_msg(gkl == kl && memcmp(gk, k, kl) == 0, "%s: %s scan, pair %d: wrong key",
                          trial, forward ? "forward" : "backward", n);
            ck_assert_msg(gvl == vl && memcmp(gv, v, vl) == 0, "%s: %s scan, %.*s: wrong value",
                          trial, forward ? "forward" : "backward", (int)kl, k);
            if (forward) {
                /* Past the block before b (or the table's start) only by reading b. */
                if (b > 0)
                    ck_assert(key_cmp(gk, gkl, L->blocks[b - 1].last,
                                      L->blocks[b - 1].last_len) <= 0);
                else
                    ck_assert(key_cmp(gk, gkl, t->smallest, t->slen) < 0);
                kv_iter_next(it);
            } else {
                ck_assert(key_cmp(gk, gkl, L->blocks[b].last, L->blocks[b].last_len) > 0);
                kv_iter_prev(it);
            }
        }
        ck_assert_msg(kv_iter_status(it) == KV_ECORRUPT, "%s: %s scan ended with %s", trial,
                      forward ? "forward" : "backward", kv_strerror(kv_iter_status(it)));
        ck_assert_ptr_null(kv_iter_key(it, NULL));
        int must;
        if (forward)
            must = b >= 2 ? count_visible_le(L->blocks[b - 2].last, L->blocks[b - 2].last_len) : 0;
        else
            must = b + 1 < L->nblocks
                       ? nvisible - count_visible_le(L->blocks[b + 1].last,
                                                     L->blocks[b + 1].last_len)
                       : 0;
        ck_assert_msg(n >= must, "%s: %s scan stopped after %d pairs, before %d", trial,
                      forward ? "forward" : "backward", n, must);
        kv_iter_free(it);
    }
}

/* The targets: (table, block) pairs whose damage is tried. */
struct target {
    const char *what;
    uint64_t number;
    size_t block;
};

static size_t pick_targets(struct target *tg)
{
    size_t n = 0;
    const struct table *newest = &T.tables[0], *older = &T.tables[1];
    tg[n++] = (struct target){"older level-0 table, middle block", older->number,
                              block_of(1500, older->number)};
    tg[n++] = (struct target){"older level-0 table, first block", older->number, 0};
    tg[n++] = (struct target){"older level-0 table, last block", older->number,
                              older->lay.nblocks - 1};
    tg[n++] = (struct target){"newest level-0 table", newest->number,
                              block_of(3250, newest->number)};
    /* Key 1000 holds version 1: its get reaches level 1. */
    const struct walk *w = &T.walks[1000];
    uint64_t l1 = w->number[w->n - 1];
    ck_assert_uint_eq(table_by_number(l1)->level, 1);
    size_t b = block_of(1000, l1);
    ck_assert(b > 0 && b + 1 < table_by_number(l1)->lay.nblocks);
    tg[n++] = (struct target){"level-1 table, middle block", l1, b};
    return n;
}

/* Data blocks (loop: uncompressed, zstd), each damaged in its payload, in
 * its compression byte and in its checksum: kv_open succeeds (data blocks
 * are read on demand); gets, explain and scans as above; the handle still
 * takes writes. */
START_TEST(table_data_block)
{
    build_table_db(_i ? KV_COMPRESSION_ZSTD : KV_COMPRESSION_NONE);
    list_visible();
    struct target tg[8];
    size_t nt = pick_targets(tg);
    for (size_t t = 0; t < nt; t++) {
        const struct blk *bk = &table_by_number(tg[t].number)->lay.blocks[tg[t].block];
        const off_t where[3] = {
            (off_t)(bk->off + bk->size / 2),  /* payload */
            (off_t)(bk->off + bk->size),      /* compression byte */
            (off_t)(bk->off + bk->size + 8),  /* last checksum byte */
        };
        for (int f = 0; f < 3; f++) {
            copy_dir(T.pristine, T.work);
            char path[PATH_LEN];
            table_file(path, T.work, tg[t].number);
            flip(path, where[f], f == 1 ? 0x01 : 0x10);
            static const char *part[3] = {"payload", "compression byte", "checksum"};
            snprintf(trial, sizeof trial, "%s (%s), %s flipped", tg[t].what,
                     _i ? "zstd" : "uncompressed", part[f]);
            kv_db *db = open_table_db();
            check_gets(db, tg[t].number, tg[t].block);
            check_scans(db, tg[t].number, tg[t].block);
            /* Writes go on, and a newer version hides the damage for its key. */
            char k[32];
            int j = 0;
            while (j < T_PROBES && !walk_reads(j, tg[t].number, bk->off))
                j++;
            ck_assert_int_lt(j, T_PROBES);
            size_t kl = t_key(j, k);
            ck_assert_int_eq(kv_put(db, k, kl, "fresh", 5), KV_OK);
            void *got = NULL;
            size_t n = 0;
            ck_assert_int_eq(kv_get(db, k, kl, &got, &n), KV_OK);
            ck_assert(n == 5 && memcmp(got, "fresh", 5) == 0);
            kv_free(got);
            close_db(db);
        }
    }
    free_table_db();
}
END_TEST

/* A compaction whose input holds a damaged block fails with KV_ECORRUPT
 * and commits nothing: the same tables stay live, and after a reopen the
 * reads fail and succeed exactly as before (no key silently lost). */
START_TEST(table_compaction_over_damage)
{
    build_table_db(KV_COMPRESSION_ZSTD);
    list_visible();
    struct target tg[8];
    size_t nt = pick_targets(tg);
    for (size_t t = 0; t < nt; t += 2) { /* a middle, a last, and a level-1 block */
        copy_dir(T.pristine, T.work);
        char path[PATH_LEN];
        table_file(path, T.work, tg[t].number);
        const struct blk *bk = &table_by_number(tg[t].number)->lay.blocks[tg[t].block];
        flip(path, (off_t)(bk->off + bk->size / 3), 0x08);
        snprintf(trial, sizeof trial, "%s, compacted", tg[t].what);
        kv_db *db = open_table_db();
        int rc = kv_compact_range(db, NULL, 0, NULL, 0);
        ck_assert_msg(rc == KV_ECORRUPT, "%s: compaction over the damage gave %s", tg[t].what,
                      kv_strerror(rc));
        /* Reads go on, exactly as before. */
        check_gets(db, tg[t].number, tg[t].block);
        rc = kv_close(db);
        ck_assert_msg(rc == KV_ECORRUPT, "kv_close after the failed compaction: %s",
                      kv_strerror(rc));
        db = open_table_db();
        kv_table_stats *ts = NULL;
        size_t n = 0;
        ck_assert_int_eq(kv_table_stats_get(db, &ts, &n), KV_OK);
        ck_assert_uint_eq(n, T.ntables);
        for (size_t i = 0; i < n; i++)
            ck_assert_uint_eq(ts[i].number, T.tables[i].number);
        kv_free(ts);
        check_gets(db, tg[t].number, tg[t].block);
        close_db(db);
    }
    free_table_db();
}
END_TEST

/* Flips every byte of `len` at `start` when it is short, else `samples`
 * spread over it plus both ends; each must make kv_open fail with
 * KV_ECORRUPT naming the table, and the reader refuse the file; each flip
 * is undone. Returns the flips tried. */
static int flip_region(const char *p, const char *path, const char *name, uint64_t start,
                       uint64_t len, int samples, const char *what)
{
    uint64_t n = len <= (uint64_t)samples ? len : (uint64_t)samples + 1;
    int tried = 0;
    for (uint64_t s = 0; s < n; s++) {
        /* Evenly spread, the last sample on the region's last byte. */
        uint64_t i = n == len ? s : s == n - 1 ? len - 1 : s * len / (uint64_t)samples;
        off_t off = (off_t)(start + i);
        uint8_t mask = (uint8_t)(1u << (i % 8));
        flip(path, off, mask);
        char msg[160];
        snprintf(msg, sizeof msg, "%s, byte %llu", what, (unsigned long long)i);
        expect_open_corrupt(p, name, msg);
        kv_sst_reader *r = (kv_sst_reader *)test_dir;
        ck_assert_msg(kv_sst_reader_open(path, NULL, 1, &r) == KV_ECORRUPT, "%s: reader", msg);
        ck_assert_ptr_null(r);
        flip(path, off, mask);
        tried++;
    }
    return tried;
}

/* The blocks read at open -- index, properties, filter -- and the trailer:
 * any byte flipped, kv_open fails with KV_ECORRUPT naming the file (the
 * whole database refuses to open: every table is opened at kv_open). A
 * failed open changes nothing: undone, the database opens and reads back
 * exactly. */
START_TEST(table_blocks_read_at_open)
{
    build_table_db(KV_COMPRESSION_ZSTD);
    copy_dir(T.pristine, T.work);
    int tried = 0;
    for (int which = 0; which < 2; which++) {
        /* The older level-0 table in full, and a level-1 table sampled. */
        const struct table *t = which == 0 ? &T.tables[1] : &T.tables[2];
        int dense = which == 0;
        const struct layout *L = &t->lay;
        char path[PATH_LEN], name[64];
        table_file(path, T.work, t->number);
        table_name(name, sizeof name, t->number);
        tried += flip_region(T.work, path, name, L->ioff, L->ilen, dense ? 60 : 4, "index block");
        tried += flip_region(T.work, path, name, L->ioff + L->ilen, 9, dense ? 9 : 2,
                             "index block trailer");
        tried += flip_region(T.work, path, name, L->poff, L->plen, dense ? 400 : 4,
                             "properties block");
        tried += flip_region(T.work, path, name, L->poff + L->plen, 9, dense ? 9 : 2,
                             "properties block trailer");
        tried += flip_region(T.work, path, name, L->foff, L->flen, dense ? 60 : 4, "filter block");
        tried += flip_region(T.work, path, name, L->foff + L->flen, 9, dense ? 9 : 2,
                             "filter block trailer");
        tried += flip_region(T.work, path, name, L->size - 72, 72, dense ? 72 : 8,
                             "table trailer");
    }
    ck_assert_int_gt(tried, 300);
    kv_db *db = open_table_db();
    char k[32];
    uint8_t v[128];
    for (int j = 0; j < T_PROBES; j++) {
        size_t kl = t_key(j, k);
        void *got = NULL;
        size_t n = 0;
        int ver = t_version(j), rc = kv_get(db, k, kl, &got, &n);
        ck_assert_int_eq(rc, ver ? KV_OK : KV_NOTFOUND);
        if (ver) {
            size_t vl = t_value(j, ver, v);
            ck_assert(n == vl && memcmp(got, v, vl) == 0);
            kv_free(got);
        }
    }
    close_db(db);
    free_table_db();
}
END_TEST

/* A table cut short, grown, emptied or deleted: KV_ECORRUPT at kv_open
 * naming it (kv.h: "a live table is damaged or missing"); kv_inspect shows
 * a deleted one as not present; put back, everything reads again. */
START_TEST(table_truncated_or_missing)
{
    build_table_db(KV_COMPRESSION_NONE);
    copy_dir(T.pristine, T.work);
    const struct table *t = &T.tables[1];
    char path[PATH_LEN], name[64];
    table_file(path, T.work, t->number);
    table_name(name, sizeof name, t->number);
    size_t n;
    uint8_t *orig = slurp(path, &n);
    const size_t cuts[] = {n - 1, n - 9, n - 72, n - 73, (size_t)t->lay.ioff, n / 2, 72, 71, 1, 0};
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        ck_assert_int_eq(cut(path, (off_t)cuts[c]), 0);
        char msg[64];
        snprintf(msg, sizeof msg, "cut to %zu bytes", cuts[c]);
        expect_open_corrupt(T.work, name, msg);
        spit(path, orig, n);
    }
    /* Bytes appended: the trailer is no longer where the file ends. */
    uint8_t *longer = calloc(1, n + 4096);
    ck_assert_ptr_nonnull(longer);
    memcpy(longer, orig, n);
    spit(path, longer, n + 1);
    expect_open_corrupt(T.work, name, "one byte appended");
    memcpy(longer + n, orig + n - 72, 72); /* even a copy of the trailer after it */
    spit(path, longer, n + 4096);
    expect_open_corrupt(T.work, name, "4 KiB appended");
    free(longer);
    /* Deleted. */
    ck_assert_int_eq(unlink(path), 0);
    damages++;
    expect_open_corrupt(T.work, name, "the table deleted");
    kv_dir_info *info = NULL;
    ck_assert_int_eq(kv_inspect(T.work, &info), KV_OK);
    int seen = 0;
    for (size_t i = 0; i < info->ntables; i++)
        if (info->tables[i].number == t->number) {
            seen = 1;
            ck_assert_int_eq(info->tables[i].present, 0);
        } else
            ck_assert_int_eq(info->tables[i].present, 1);
    ck_assert(seen);
    kv_inspect_free(info);
    ck_assert(!file_exists(path)); /* the failed opens did not make it up */
    spit(path, orig, n);
    free(orig);

    kv_db *db = open_table_db();
    char k[32];
    uint8_t v[128];
    for (int j = 0; j < T_PROBES; j++) {
        size_t kl = t_key(j, k);
        void *got = NULL;
        size_t gl = 0;
        int ver = t_version(j), rc = kv_get(db, k, kl, &got, &gl);
        ck_assert_int_eq(rc, ver ? KV_OK : KV_NOTFOUND);
        if (ver) {
            size_t vl = t_value(j, ver, v);
            ck_assert(gl == vl && memcmp(got, v, vl) == 0);
            kv_free(got);
        }
    }
    close_db(db);
    free_table_db();
}
END_TEST

/* =========================================================================================
 * The manifest
 * ====================================================================================== */

#define M_KEYS 1000
#define M_MARKS 20
#define M_LOGGED 200
#define M_MARKER "zz-marker-a" /* the smallest key of one table: found in its record */

static size_t m_key(int j, char *k)
{
    if (j < M_KEYS)
        return (size_t)sprintf(k, "key%06d", j);
    if (j < M_KEYS + M_MARKS)
        return (size_t)sprintf(k, "zz-marker-%c", 'a' + (j - M_KEYS));
    return (size_t)sprintf(k, "log%06d", j);
}

static size_t m_value(int j, uint8_t *v)
{
    size_t n = 16 + (size_t)(j % 50);
    fill_bytes(0x3A41ull + (uint64_t)j, v, n);
    return n;
}

#define M_ALL (M_KEYS + M_MARKS + M_LOGGED)

/* Keys 0..999 in one table, the markers in a second one (committed last),
 * 200 more only in the log. */
static void build_manifest_db(const char *p)
{
    kv_db *db = open_db(p, NULL);
    char k[32];
    uint8_t v[80];
    for (int j = 0; j < M_ALL; j++) {
        ck_assert_int_eq(kv_put(db, k, m_key(j, k), v, m_value(j, v)), KV_OK);
        if (j == M_KEYS - 1 || j == M_KEYS + M_MARKS - 1)
            ck_assert_int_eq(kv_flush(db), KV_OK);
    }
    struct kv_stats s;
    get_stats(db, &s);
    ck_assert_uint_eq(s.tables, 2);
    close_db(db);
}

/* Counts the pairs not served exactly (no ck_assert: used in children). */
static int m_mismatches(kv_db *db)
{
    char k[32];
    uint8_t v[80];
    int bad = 0;
    for (int j = 0; j < M_ALL; j++) {
        size_t kl = m_key(j, k), vl = m_value(j, v);
        void *got = NULL;
        size_t n = 0;
        if (kv_get(db, k, kl, &got, &n) != KV_OK || n != vl || memcmp(got, v, vl) != 0)
            bad++;
        kv_free(got);
    }
    return bad;
}

static void expect_all_pairs(const char *p)
{
    kv_db *db = open_db(p, NULL);
    ck_assert_int_eq(m_mismatches(db), 0);
    close_db(db);
}

static void manifest_path(char *out, const char *db)
{
    pjoin(out, db, "MANIFEST");
}

/* Offsets in MANIFEST of every copy of a byte string (LMDB copies pages on
 * write, so older copies of a record may linger in free pages). */
static size_t find_all(const char *path, const void *needle, size_t nlen, size_t *at, size_t max)
{
    size_t n, found = 0;
    uint8_t *b = slurp(path, &n);
    for (size_t i = 0; i + nlen <= n; i++)
        if (memcmp(b + i, needle, nlen) == 0 && found < max)
            at[found++] = i;
    free(b);
    return found;
}

/* Flips byte `rel` of a record value at each of its copies in turn, in a
 * fresh copy of the database: the live copy must make kv_open (and
 * kv_inspect) fail with KV_ECORRUPT; a stale one changes nothing. */
static void flip_record_copies(const char *pristine, const char *work, const size_t *vals,
                               size_t nvals, size_t rel, const char *what)
{
    int corrupt = 0;
    for (size_t c = 0; c < nvals; c++) {
        copy_dir(pristine, work);
        char man[PATH_LEN];
        manifest_path(man, work);
        flip(man, (off_t)(vals[c] + rel), (uint8_t)(1u << (rel % 8)));
        kv_db *db = (kv_db *)test_dir;
        int rc = kv_open(work, NULL, &db);
        if (rc == KV_ECORRUPT) {
            ck_assert_msg(strstr(kv_error_text(), "/MANIFEST: ") != NULL,
                          "%s: the error text \"%s\" does not name the MANIFEST", what,
                          kv_error_text());
            ck_assert_ptr_null(db);
            corrupt++;
            kv_dir_info *info = (kv_dir_info *)test_dir;
            ck_assert_int_eq(kv_inspect(work, &info), KV_ECORRUPT);
            ck_assert_ptr_null(info);
            flip(man, (off_t)(vals[c] + rel), (uint8_t)(1u << (rel % 8)));
            expect_all_pairs(work); /* the failed open changed nothing */
            continue;
        }
        ck_assert_msg(rc == KV_OK, "%s byte %zu, copy %zu: kv_open gave %s", what, rel, c,
                      kv_strerror(rc));
        ck_assert_int_eq(m_mismatches(db), 0);
        close_db(db);
    }
    ck_assert_msg(corrupt == 1, "%s byte %zu: %d of %zu copies made kv_open fail, not 1", what,
                  rel, corrupt, nvals);
}

/* A table record (doc/manifest.md, "tables"): each field's bytes, the keys
 * and the checksum. */
START_TEST(manifest_table_record)
{
    char pristine[PATH_LEN], work[PATH_LEN], man[PATH_LEN];
    pjoin(pristine, test_dir, "pristine");
    pjoin(work, test_dir, "work");
    build_manifest_db(pristine);
    manifest_path(man, pristine);
    /* The marker table's record: version 2, kind 2, S = L = 11 at 72 and
     * 76, the smallest key at 80. */
    size_t at[16], vals[16], nvals = 0;
    size_t n = find_all(man, M_MARKER, strlen(M_MARKER), at, 16);
    uint8_t *b = NULL;
    size_t blen;
    b = slurp(man, &blen);
    for (size_t i = 0; i < n; i++) {
        if (at[i] < 80)
            continue;
        const uint8_t *r = b + at[i] - 80;
        if (r[0] == 2 && r[1] == 2 && get_u32(r + 72) == 11 && get_u32(r + 76) == 11 &&
            at[i] + 11 + 11 + 8 <= blen &&
            get_u64(r + 80 + 22) == XXH3_64bits(r, 80 + 22))
            vals[nvals++] = at[i] - 80;
    }
    free(b);
    ck_assert_uint_ge(nvals, 1);
    static const size_t rel[] = {0, 1, 2, 3, 4, 8, 16, 24, 32, 40, 48, 52, 56, 64, 72, 76,
                                 80, 90, 91, 101, 102, 109};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++)
        flip_record_copies(pristine, work, vals, nvals, rel[i], "table record");
}
END_TEST

/* The state record (doc/manifest.md, "meta"): 48 bytes after the key
 * "state" in its LMDB leaf node. */
START_TEST(manifest_state_record)
{
    char pristine[PATH_LEN], work[PATH_LEN], man[PATH_LEN];
    pjoin(pristine, test_dir, "pristine");
    pjoin(work, test_dir, "work");
    build_manifest_db(pristine);
    manifest_path(man, pristine);
    size_t at[16], vals[16], nvals = 0;
    size_t n = find_all(man, "state", 5, at, 16);
    size_t blen;
    uint8_t *b = slurp(man, &blen);
    for (size_t i = 0; i < n; i++) {
        const uint8_t *r = b + at[i] + 5;
        if (at[i] + 5 + 48 <= blen && r[0] == 1 && r[1] == 1 &&
            get_u64(r + 40) == XXH3_64bits(r, 40))
            vals[nvals++] = at[i] + 5;
    }
    free(b);
    ck_assert_uint_ge(nvals, 1);
    static const size_t rel[] = {0, 1, 2, 3, 4, 8, 12, 16, 24, 32, 39, 40, 47};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++)
        flip_record_copies(pristine, work, vals, nvals, rel[i], "state record");
}
END_TEST

/* Trials that may crash run in child processes: each opens a damaged copy
 * and checks every pair there, and says what it found in its exit status,
 * away from the statuses a sanitizer's report exits with (1 and a few). */
enum { M_FINE, M_REFUSED, M_WRONG, M_OTHER, M_CRASH, M_KINDS };
#define M_EXIT 64      /* exit status M_EXIT + kind */
#define M_EXIT_CODE 80 /* kv_open's other errors: M_EXIT_CODE - code */

static pid_t start_child(const char *work)
{
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        kv_db *db = NULL;
        int rc = kv_open(work, NULL, &db);
        if (rc != KV_OK)
            _exit(rc == KV_ECORRUPT || rc == KV_EIO ? M_EXIT + M_REFUSED : M_EXIT_CODE - rc);
        int bad = m_mismatches(db);
        kv_close(db);
        _exit(M_EXIT + (bad ? M_WRONG : M_FINE));
    }
    return pid;
}

/* M_* from a child's wait status; *code: kv_open's code (M_OTHER), the
 * signal (M_CRASH, positive) or the exit status of a sanitizer's report
 * (M_CRASH, negative). */
static int classify(int st, int *code)
{
    *code = 0;
    if (WIFSIGNALED(st)) {
        *code = WTERMSIG(st);
        return M_CRASH;
    }
    int e = WEXITSTATUS(st);
    if (e >= M_EXIT && e < M_EXIT + M_OTHER)
        return e - M_EXIT;
    if (e > M_EXIT_CODE && e <= M_EXIT_CODE + 16) {
        *code = M_EXIT_CODE - e;
        return M_OTHER;
    }
    *code = -e;
    return M_CRASH;
}

static void describe(char *out, size_t n, int kind, int code)
{
    if (kind == M_CRASH && code > 0)
        snprintf(out, n, "crash (%s)", strsignal(code));
    else if (kind == M_CRASH)
        snprintf(out, n, "crash (exit status %d: a sanitizer's report?)", -code);
    else if (kind == M_OTHER)
        snprintf(out, n, "kv_open gave %s", kv_strerror(code));
    else if (kind == M_WRONG)
        snprintf(out, n, "opened, and pairs lost or wrong");
    else
        snprintf(out, n, "%s", kind == M_FINE ? "opened, every pair exact" : "refused");
}

/* LMDB's meta pages (pages 0 and 1 of MANIFEST: a 16-byte page header, then
 * the 136-byte MDB_meta of LMDB 0.9: magic, version, address, map size, the
 * free and main databases' records, last page, transaction id). Every byte
 * of both, one bit flipped in a fresh copy opened in a child process (four
 * at a time): no crash, and either a refusal (KV_ECORRUPT, KV_EIO) or every
 * pair served exactly -- not a manifest rolled back, or started afresh,
 * with the tables it no longer names deleted. */
#define M_SLOTS 4

START_TEST(manifest_lmdb_meta_pages)
{
    char pristine[PATH_LEN], man[PATH_LEN];
    pjoin(pristine, test_dir, "pristine");
    build_manifest_db(pristine);
    manifest_path(man, pristine);
    uint8_t m0[64];
    read_at(man, 0, m0, sizeof m0);
    ck_assert_uint_eq(get_u32(m0 + 16), 0xBEEFC0DEu); /* MDB_MAGIC */
    uint32_t psize = get_u32(m0 + 40);                /* mm_dbs[FREE].md_pad: page size */
    ck_assert(psize >= 512 && psize <= 65536);
    uint8_t m1[64];
    read_at(man, (off_t)psize, m1, sizeof m1);
    ck_assert_uint_eq(get_u32(m1 + 16), 0xBEEFC0DEu);

    struct {
        pid_t pid;
        int trial;
    } slot[M_SLOTS] = {{0, 0}};
    const int trials = 2 * (16 + 136);
    int counts[M_KINDS] = {0}, shown = 0, next = 0, running = 0;
    char report[2048] = "";
    size_t rlen = 0;
    while (next < trials || running > 0) {
        if (next < trials && running < M_SLOTS) {
            int s = 0;
            while (slot[s].pid)
                s++;
            char work[PATH_LEN], wman[PATH_LEN], name[32];
            snprintf(name, sizeof name, "work%d", s);
            pjoin(work, test_dir, name);
            copy_dir(pristine, work);
            manifest_path(wman, work);
            int page = next / (16 + 136), byte = next % (16 + 136);
            flip(wman, (off_t)page * psize + byte, (uint8_t)(1u << ((byte * 3) % 8)));
            slot[s].pid = start_child(work);
            slot[s].trial = next++;
            running++;
            continue;
        }
        int st;
        pid_t pid = wait(&st);
        if (pid < 0) {
            ck_assert_int_eq(errno, EINTR);
            continue;
        }
        int s = 0;
        while (s < M_SLOTS && slot[s].pid != pid)
            s++;
        ck_assert_int_lt(s, M_SLOTS);
        slot[s].pid = 0;
        running--;
        int code, kind = classify(st, &code);
        counts[kind]++;
        if (kind >= M_WRONG && shown < 12 && rlen < sizeof report - 120) {
            int page = slot[s].trial / (16 + 136), byte = slot[s].trial % (16 + 136);
            char what[80];
            describe(what, sizeof what, kind, code);
            rlen += (size_t)snprintf(report + rlen, sizeof report - rlen,
                                     "\n  meta page %d, byte %d, bit %d: %s", page, byte,
                                     (byte * 3) % 8, what);
            shown++;
        }
    }
    ck_assert_msg(counts[M_WRONG] + counts[M_OTHER] + counts[M_CRASH] == 0,
                  "LMDB meta pages, %d one-bit flips: %d opened exact, %d refused, %d opened "
                  "with pairs lost or wrong, %d other errors, %d crashes:%s",
                  trials, counts[M_FINE], counts[M_REFUSED], counts[M_WRONG], counts[M_OTHER],
                  counts[M_CRASH], report);
    ck_assert_int_gt(counts[M_REFUSED], 0); /* the magic and version at least */
    printf("corruption/manifest_lmdb_meta_pages: %d one-bit flips: %d opened exact, %d refused\n",
           trials, counts[M_FINE], counts[M_REFUSED]);
}
END_TEST

/* The manifest gone next to live tables and a log. kv.h: "KV_ECORRUPT:
 * the manifest or a live table is damaged or missing". It must not be taken
 * for a new database, whose open deletes every table the new, empty
 * manifest does not name; after the refused open both tables are still
 * there, and put back, the manifest serves every pair. */
static void expect_manifest_refused(const char *pristine, const char *work, const char *what)
{
    uint64_t before[8], after[8];
    size_t nb = numbered_files(pristine, "sst", before, 8);
    ck_assert_uint_eq(nb, 2);
    kv_db *db = (kv_db *)test_dir;
    int rc = kv_open(work, NULL, &db);
    size_t na = numbered_files(work, "sst", after, 8);
    int lost = 0;
    for (size_t i = 0; i < nb; i++) {
        int kept = 0;
        for (size_t j = 0; j < na; j++)
            kept |= after[j] == before[i];
        lost += !kept;
    }
    if (rc == KV_OK) {
        int bad = m_mismatches(db);
        kv_close(db);
        ck_abort_msg("%s: kv_open succeeded, serving %d of %d pairs; %d of %zu tables deleted",
                     what, M_ALL - bad, M_ALL, lost, nb);
    }
    ck_assert_msg(rc == KV_ECORRUPT, "%s: kv_open gave %s, not KV_ECORRUPT", what,
                  kv_strerror(rc));
    ck_assert_ptr_null(db);
    ck_assert_msg(strstr(kv_error_text(), "/MANIFEST: ") != NULL,
                  "%s: the error text \"%s\" does not name the MANIFEST", what, kv_error_text());
    ck_assert_msg(lost == 0, "%s: the refused open deleted %d tables", what, lost);
}

START_TEST(manifest_deleted)
{
    char pristine[PATH_LEN], work[PATH_LEN], man[PATH_LEN];
    pjoin(pristine, test_dir, "pristine");
    pjoin(work, test_dir, "work");
    build_manifest_db(pristine);
    copy_dir(pristine, work);
    manifest_path(man, work);
    ck_assert_int_eq(unlink(man), 0);
    damages++;
    expect_manifest_refused(pristine, work, "MANIFEST deleted");
}
END_TEST

/* A MANIFEST cut to 0 bytes: LMDB takes an empty file for a new
 * environment, so the store must tell it from a new database itself. */
START_TEST(manifest_emptied)
{
    char pristine[PATH_LEN], work[PATH_LEN], man[PATH_LEN];
    pjoin(pristine, test_dir, "pristine");
    pjoin(work, test_dir, "work");
    build_manifest_db(pristine);
    copy_dir(pristine, work);
    manifest_path(man, work);
    ck_assert_int_eq(cut(man, 0), 0);
    expect_manifest_refused(pristine, work, "MANIFEST emptied");
}
END_TEST

/* Cut inside its two meta pages: LMDB cannot read them, KV_ECORRUPT; put
 * back, every pair. */
START_TEST(manifest_cut_within_meta_pages)
{
    char pristine[PATH_LEN], work[PATH_LEN], man[PATH_LEN];
    pjoin(pristine, test_dir, "pristine");
    pjoin(work, test_dir, "work");
    build_manifest_db(pristine);
    copy_dir(pristine, work);
    manifest_path(man, work);
    size_t n;
    uint8_t *orig = slurp(man, &n);
    const size_t cuts[] = {4096, 4095, 100};
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        ck_assert_int_eq(cut(man, (off_t)cuts[c]), 0);
        char what[64];
        snprintf(what, sizeof what, "MANIFEST cut to %zu bytes", cuts[c]);
        expect_manifest_refused(pristine, work, what);
        spit(man, orig, n);
    }
    free(orig);
    expect_all_pairs(work);
}
END_TEST

/* Cut after its meta pages, so that pages the meta pages name lie past
 * the end of the file: KV_ECORRUPT, not a crash (LMDB reads its pages
 * through a memory map; touching one past the end of the file is SIGBUS).
 * Each cut is opened in a child process. */
START_TEST(manifest_cut_after_meta_pages)
{
    char pristine[PATH_LEN], work[PATH_LEN], man[PATH_LEN];
    pjoin(pristine, test_dir, "pristine");
    pjoin(work, test_dir, "work");
    build_manifest_db(pristine);
    manifest_path(man, pristine);
    size_t n = (size_t)file_size(man);
    ck_assert_uint_gt(n, 3 * 4096);
    const size_t cuts[] = {8192, n / 2, n - 4096};
    char report[1024] = "";
    size_t rlen = 0;
    int bad = 0;
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        copy_dir(pristine, work);
        manifest_path(man, work);
        ck_assert_int_eq(cut(man, (off_t)cuts[c]), 0);
        pid_t pid = start_child(work);
        int st;
        while (waitpid(pid, &st, 0) < 0)
            ck_assert_int_eq(errno, EINTR);
        int code, kind = classify(st, &code);
        char what[80];
        describe(what, sizeof what, kind, code);
        rlen += (size_t)snprintf(report + rlen, sizeof report - rlen, "\n  cut to %zu of %zu "
                                 "bytes: %s", cuts[c], n, what);
        bad += kind != M_REFUSED;
    }
    ck_assert_msg(bad == 0, "a MANIFEST cut short, %d of 3 not refused:%s", bad, report);
}
END_TEST

/* Not damage: a commit whose highest page was allocated and freed again
 * in the same transaction (a "loose" page) leaves the file one page short
 * of the last page number its meta page records, for LMDB does not write
 * a free page. Made here by raising that number by one in the newer meta
 * page (LMDB 0.9: mm_last_pg at byte 136, mm_txnid at 144 of a meta
 * page). The store opens, every pair reads, and writes go on across a
 * reopen. (Before, kv_open refused such a manifest as "shorter than its
 * pages say": a crash test met one after a compaction's commit.) */
START_TEST(manifest_with_a_free_last_page)
{
    char work[PATH_LEN], man[PATH_LEN];
    pjoin(work, test_dir, "work");
    build_manifest_db(work);
    manifest_path(man, work);
    size_t n;
    uint8_t *b = slurp(man, &n);
    ck_assert_uint_gt(n, 3 * 4096);
    size_t meta = kv_get64(b + 4096 + 144) > kv_get64(b + 144) ? 4096 : 0;
    uint64_t last = kv_get64(b + meta + 136);
    ck_assert_uint_eq((last + 1) * 4096, n); /* as written: the file ends at its last page */
    kv_put64(b + meta + 136, last + 1);
    spit(man, b, n);
    free(b);
    expect_all_pairs(work);
    kv_db *db = open_db(work, NULL);
    char k[32];
    ck_assert_int_eq(kv_put(db, k, m_key(0, k), "after", 5), KV_OK);
    ck_assert_int_eq(kv_flush(db), KV_OK); /* a commit: LMDB writes past the old end */
    close_db(db);
    db = open_db(work, NULL);
    void *v = NULL;
    size_t vl = 0;
    ck_assert_int_eq(kv_get(db, k, m_key(0, k), &v, &vl), KV_OK);
    ck_assert(vl == 5 && memcmp(v, "after", 5) == 0);
    kv_free(v);
    close_db(db);
}
END_TEST

/* LMDB's lock file holds no data: deleted, it is rebuilt. */
START_TEST(manifest_lock_file_deleted)
{
    char pristine[PATH_LEN], work[PATH_LEN], lock[PATH_LEN];
    pjoin(pristine, test_dir, "pristine");
    pjoin(work, test_dir, "work");
    build_manifest_db(pristine);
    copy_dir(pristine, work);
    pjoin(lock, work, "MANIFEST-lock");
    ck_assert_int_eq(unlink(lock), 0);
    damages++;
    expect_all_pairs(work);
}
END_TEST

/* A well-formed LMDB file whose named database "meta" (the state record)
 * is gone -- what a damaged page of LMDB's main tree looks like from
 * above. The state record is missing: KV_ECORRUPT (kv_inspect says so
 * already); it must not be written afresh, which would start a new
 * database and delete the tables. */
START_TEST(manifest_state_database_missing)
{
    char pristine[PATH_LEN], work[PATH_LEN], man[PATH_LEN];
    pjoin(pristine, test_dir, "pristine");
    pjoin(work, test_dir, "work");
    build_manifest_db(pristine);
    copy_dir(pristine, work);
    manifest_path(man, work);
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    ck_assert_int_eq(mdb_env_create(&env), 0);
    ck_assert_int_eq(mdb_env_set_maxdbs(env, 2), 0);
    ck_assert_int_eq(mdb_env_open(env, man, MDB_NOSUBDIR, 0644), 0);
    ck_assert_int_eq(mdb_txn_begin(env, NULL, 0, &txn), 0);
    ck_assert_int_eq(mdb_dbi_open(txn, "meta", 0, &dbi), 0);
    ck_assert_int_eq(mdb_drop(txn, dbi, 1), 0);
    ck_assert_int_eq(mdb_txn_commit(txn), 0);
    mdb_env_close(env);

    kv_dir_info *info = (kv_dir_info *)test_dir;
    ck_assert_int_eq(kv_inspect(work, &info), KV_ECORRUPT);
    ck_assert_ptr_null(info);
    expect_manifest_refused(pristine, work, "the state database dropped");
}
END_TEST

/* The meta pages' magic and version, in either page: LMDB refuses the
 * file, and kv_open says KV_ECORRUPT; put back, every pair. */
START_TEST(manifest_lmdb_meta_magic_and_version)
{
    char pristine[PATH_LEN], work[PATH_LEN], man[PATH_LEN];
    pjoin(pristine, test_dir, "pristine");
    pjoin(work, test_dir, "work");
    build_manifest_db(pristine);
    copy_dir(pristine, work);
    manifest_path(man, work);
    uint8_t m0[64];
    read_at(man, 0, m0, sizeof m0);
    uint32_t psize = get_u32(m0 + 40);
    for (int page = 0; page < 2; page++)
        for (int byte = 16; byte < 24; byte++) { /* mm_magic, mm_version */
            off_t off = (off_t)page * psize + byte;
            flip(man, off, 0x01);
            char what[64];
            snprintf(what, sizeof what, "meta page %d byte %d", page, byte);
            expect_open_corrupt(work, "/MANIFEST: ", what);
            flip(man, off, 0x01);
        }
    expect_all_pairs(work);
}
END_TEST

/* =========================================================================================
 * Forged counts and sizes behind valid checksums
 *
 * Every checksum of every format is XXH3, which anyone can recompute, so a
 * crafted file can carry any count or size with checksums that pass. Each
 * test below forges one such field, recomputes every checksum over it, and
 * checks that the decoder bounds its work and memory by the bytes it was
 * given: a prompt KV_ECORRUPT whose error text names the file and the
 * fault, and nothing else lost.
 * ====================================================================================== */

#define F_PROMPT 5.0 /* seconds: "promptly", with room for a loaded machine */

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The process's peak resident set so far, in KiB. */
static long peak_rss_kib(void)
{
    struct rusage ru;
    ck_assert_int_eq(getrusage(RUSAGE_SELF, &ru), 0);
    return ru.ru_maxrss;
}

/* A file being built byte by byte. */
struct fbuf {
    uint8_t *b;
    size_t len, cap;
};

static void fb_put(struct fbuf *f, const void *p, size_t n)
{
    if (f->len + n > f->cap) {
        f->cap = (f->len + n) * 2 + 64;
        f->b = realloc(f->b, f->cap);
        ck_assert_ptr_nonnull(f->b);
    }
    if (n)
        memcpy(f->b + f->len, p, n);
    f->len += n;
}

static void fb_u32(struct fbuf *f, uint32_t v)
{
    uint8_t b[4];
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    fb_put(f, b, 4);
}

static void fb_u64(struct fbuf *f, uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    fb_put(f, b, 8);
}

static void fb_varint(struct fbuf *f, uint64_t v)
{
    uint8_t b[10];
    fb_put(f, b, put_varint(b, v));
}

/* Appends a block (doc/sstable_format.md, "Block trailer"): the payload,
 * its compression byte, and the XXH3-64 of both. Returns its offset. */
static uint64_t fb_block(struct fbuf *f, const struct fbuf *payload, uint8_t compression)
{
    uint64_t off = f->len;
    fb_put(f, payload->b, payload->len);
    fb_put(f, &compression, 1);
    fb_u64(f, XXH3_64bits(f->b + off, payload->len + 1));
    return off;
}

/* Ends a block's entries with one restart at 0 (all a forged block needs). */
static void fb_one_restart(struct fbuf *f)
{
    fb_u32(f, 0);
    fb_u32(f, 1);
}

/* Appends a properties block (version 2, doc/sstable_format.md) for a table
 * of `blocks` data blocks and `entries` pairs without a filter, and the
 * trailer after it. `index` is the index block's handle. */
static void fb_finish_table(struct fbuf *f, uint64_t ioff, uint64_t ilen, uint64_t blocks,
                            uint64_t entries, const void *smallest, size_t slen,
                            const void *largest, size_t llen)
{
    struct fbuf p = {0};
    fb_u32(&p, 2);       /* version */
    fb_u32(&p, 0);       /* compression */
    fb_u64(&p, entries); /* entries */
    fb_u64(&p, 0);       /* raw_key_bytes */
    fb_u64(&p, 0);       /* raw_value_bytes */
    fb_u64(&p, blocks);  /* data_blocks */
    fb_u64(&p, 0);       /* data_raw_bytes */
    fb_u64(&p, 0);       /* data_stored_bytes */
    fb_u32(&p, 0);       /* filter_layout */
    fb_u32(&p, 0);       /* filter_k */
    fb_u64(&p, 0);       /* bits_per_key: no filter */
    fb_u64(&p, 0);       /* filter_keys */
    fb_u64(&p, 0);       /* filter_seed */
    fb_u32(&p, (uint32_t)slen);
    fb_u32(&p, (uint32_t)llen);
    fb_u32(&p, 0);       /* note */
    fb_u32(&p, 0);       /* filter_hash: none */
    fb_put(&p, smallest, slen);
    fb_put(&p, largest, llen);
    uint64_t poff = fb_block(f, &p, 0);
    free(p.b);
    size_t t = f->len;
    fb_put(f, "kvSSTbl1", 8);
    fb_u32(f, 1); /* format version */
    fb_u32(f, 1); /* checksum kind: XXH3-64 */
    fb_u64(f, ioff);
    fb_u64(f, ilen);
    fb_u64(f, poff);
    fb_u64(f, p.len);
    fb_u64(f, t);           /* filter offset: where the trailer starts */
    fb_u64(f, 0);           /* filter size */
    fb_u64(f, XXH3_64bits(f->b + t, 64));
}

/* The table of a store holding keys a000..a099 (one table), for the
 * store-level checks: returns its number. */
static uint64_t small_db(const char *p)
{
    kv_db *db = open_db(p, NULL);
    for (int i = 0; i < 100; i++) {
        char k[16];
        int n = sprintf(k, "a%03d", i);
        ck_assert_int_eq(kv_put(db, k, (size_t)n, k, (size_t)n), KV_OK);
    }
    ck_assert_int_eq(kv_flush(db), KV_OK);
    close_db(db);
    uint64_t nums[4];
    ck_assert_uint_eq(numbered_files(p, "sst", nums, 4), 1);
    return nums[0];
}

static void expect_small_db(const char *p)
{
    kv_db *db = open_db(p, NULL);
    for (int i = 0; i < 100; i++) {
        char k[16];
        int n = sprintf(k, "a%03d", i);
        void *v = NULL;
        size_t vl = 0;
        ck_assert_int_eq(kv_get(db, k, (size_t)n, &v, &vl), KV_OK);
        ck_assert(vl == (size_t)n && memcmp(v, k, vl) == 0);
        kv_free(v);
    }
    close_db(db);
}

/* The index block's sizes: its entries may share a prefix with the entry
 * before, so n entries of a few bytes each can spell out keys 1, 2, ..., n
 * bytes long, n^2/2 bytes in all, which the reader keeps. A table of 20,000
 * index entries (a 360 KB file) made the reader allocate 200 MB of keys and
 * open it; a sound index has a restart at every entry, so its keys add up
 * to less than its size, and the reader now refuses more. At the store:
 * kv_open refuses the table, and put back, every pair is there. */
#define F_INDEX_ENTRIES 20000

START_TEST(forged_table_index_keys)
{
    struct fbuf f = {0}, ix = {0}, empty = {0};
    for (uint64_t i = 0; i < F_INDEX_ENTRIES; i++) {
        fb_block(&f, &empty, 0); /* an empty data block: open never reads it */
        uint8_t val[20];
        size_t vlen = put_varint(val, i * 9);
        vlen += put_varint(val + vlen, 0);
        fb_varint(&ix, i); /* shared: the whole key before */
        fb_varint(&ix, 1); /* unshared */
        fb_varint(&ix, vlen);
        fb_put(&ix, "a", 1);
        fb_put(&ix, val, vlen);
    }
    fb_one_restart(&ix);
    uint64_t ioff = fb_block(&f, &ix, 0);
    uint8_t *largest = malloc(F_INDEX_ENTRIES);
    ck_assert_ptr_nonnull(largest);
    memset(largest, 'a', F_INDEX_ENTRIES);
    fb_finish_table(&f, ioff, ix.len, F_INDEX_ENTRIES, F_INDEX_ENTRIES, "a", 1, largest,
                    F_INDEX_ENTRIES);
    free(largest);
    ck_assert_uint_lt(f.len, 400000);

    char pristine[PATH_LEN], work[PATH_LEN], sst[PATH_LEN], name[64];
    pjoin(pristine, test_dir, "pristine");
    pjoin(work, test_dir, "work");
    uint64_t number = small_db(pristine);
    copy_dir(pristine, work);
    table_file(sst, work, number);
    table_name(name, sizeof name, number);
    size_t glen;
    uint8_t *good = slurp(sst, &glen);
    spit(sst, f.b, f.len);
    damages++;

    long rss0 = peak_rss_kib();
    double t0 = now_seconds();
    kv_sst_reader *r = NULL;
    int rc = kv_sst_reader_open(sst, NULL, 1, &r);
    double secs = now_seconds() - t0;
    long grew = peak_rss_kib() - rss0;
    if (rc == KV_OK)
        kv_sst_reader_close(r);
    ck_assert_msg(rc == KV_ECORRUPT, "forged index: kv_sst_reader_open gave %s (%.2f s, %ld MiB)",
                  kv_strerror(rc), secs, grew / 1024);
    ck_assert_ptr_null(r);
    ck_assert_msg(strstr(kv_sst_error_text(), sst) && strstr(kv_sst_error_text(), "keys add up"),
                  "error text \"%s\"", kv_sst_error_text());
    ck_assert_msg(secs < F_PROMPT && grew < 64 * 1024, "took %.2f s and %ld MiB", secs,
                  grew / 1024);
    printf("forged/index: %zu-byte table, %d entries: %s in %.3f s, peak RSS +%ld KiB\n", f.len,
           F_INDEX_ENTRIES, kv_strerror(rc), secs, grew);

    expect_open_corrupt(work, name, "a table with a forged index");
    spit(sst, good, glen); /* put back: the refused open lost nothing */
    expect_small_db(work);
    free(good);
    free(f.b);
    free(ix.b);
}
END_TEST

/* A data block's size: a zstd frame records its decompressed size, which
 * the reader allocated before decompressing (up to 256 MiB, for every read
 * of the block). A 17-byte frame that claims 256 MiB (one 16-byte RLE
 * block behind it) is now refused before any allocation, since no frame
 * of 17 bytes holds more than 17 * 32768; the table's other block, and a
 * sound table beside it, read as before. */
START_TEST(forged_table_zstd_size)
{
    static const uint8_t frame[] = {
        0x28, 0xB5, 0x2F, 0xFD,                         /* magic */
        0xE0,                                           /* 8-byte size, single segment */
        0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, /* 256 MiB */
        0x83, 0x00, 0x00,                               /* last block, RLE, 16 bytes */
        'x'};
    struct fbuf f = {0}, ix = {0}, blk = {0}, z = {0};
    /* Block 0: "k1" -> "v1", stored raw. */
    fb_varint(&blk, 0);
    fb_varint(&blk, 2);
    fb_varint(&blk, 2);
    fb_put(&blk, "k1v1", 4);
    fb_one_restart(&blk);
    uint64_t b0 = fb_block(&f, &blk, 0);
    /* Block 1: the forged frame, for key "k2". */
    fb_put(&z, frame, sizeof frame);
    uint64_t b1 = fb_block(&f, &z, 1);
    const uint64_t handles[2][2] = {{b0, blk.len}, {b1, z.len}};
    uint32_t restarts[2];
    for (int i = 0; i < 2; i++) {
        uint8_t val[20];
        size_t vlen = put_varint(val, handles[i][0]);
        vlen += put_varint(val + vlen, handles[i][1]);
        restarts[i] = (uint32_t)ix.len; /* the index has a restart at every entry */
        fb_varint(&ix, 0);
        fb_varint(&ix, 2);
        fb_varint(&ix, vlen);
        fb_put(&ix, i ? "k2" : "k1", 2);
        fb_put(&ix, val, vlen);
    }
    fb_u32(&ix, restarts[0]);
    fb_u32(&ix, restarts[1]);
    fb_u32(&ix, 2);
    uint64_t ioff = fb_block(&f, &ix, 0);
    fb_finish_table(&f, ioff, ix.len, 2, 2, "k1", 2, "k2", 2);

    char bad[PATH_LEN], sound[PATH_LEN];
    pjoin(bad, test_dir, "000001.sst");
    pjoin(sound, test_dir, "000002.sst");
    spit(bad, f.b, f.len);
    damages++;
    kv_sst_writer *w;
    ck_assert_int_eq(kv_sst_writer_new(sound, NULL, &w), KV_OK);
    ck_assert_int_eq(kv_sst_writer_add(w, "k1", 2, "s1", 2), KV_OK);
    ck_assert_int_eq(kv_sst_writer_add(w, "k2", 2, "s2", 2), KV_OK);
    ck_assert_int_eq(kv_sst_writer_finish(w, NULL), KV_OK);

    kv_sst_cache *cache;
    ck_assert_int_eq(kv_sst_cache_new(1 << 20, &cache), KV_OK);
    kv_sst_reader *r, *s;
    ck_assert_int_eq(kv_sst_reader_open(bad, cache, 1, &r), KV_OK); /* data blocks come later */
    ck_assert_int_eq(kv_sst_reader_open(sound, cache, 2, &s), KV_OK);
    void *v = NULL;
    size_t vl = 0;
    ck_assert_int_eq(kv_sst_get(r, "k1", 2, &v, &vl), KV_OK);
    ck_assert(vl == 2 && memcmp(v, "v1", 2) == 0);
    kv_free(v);
    double t0 = now_seconds();
    int rc = kv_sst_get(r, "k2", 2, &v, &vl);
    double secs = now_seconds() - t0;
    ck_assert_msg(rc == KV_ECORRUPT, "forged frame: kv_sst_get gave %s", kv_strerror(rc));
    ck_assert_msg(strstr(kv_sst_error_text(), bad) && strstr(kv_sst_error_text(), "claims"),
                  "error text \"%s\"", kv_sst_error_text());
    ck_assert_msg(secs < F_PROMPT, "took %.2f s", secs);
    printf("forged/zstd: 17-byte frame claiming 268435456 bytes: %s in %.6f s (\"%s\")\n",
           kv_strerror(rc), secs, kv_sst_error_text());
    ck_assert_int_eq(kv_sst_verify(r), KV_ECORRUPT);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(kv_sst_get(s, i ? "k2" : "k1", 2, &v, &vl), KV_OK);
        ck_assert(vl == 2 && memcmp(v, i ? "s2" : "s1", 2) == 0);
        kv_free(v);
    }
    ck_assert_int_eq(kv_sst_verify(s), KV_OK);
    kv_sst_reader_close(r);
    kv_sst_reader_close(s);
    kv_sst_cache_free(cache);
    free(f.b);
    free(ix.b);
    free(blk.b);
    free(z.b);
}
END_TEST

/* A data block's restart interval: nothing in a block bounds how many
 * entries follow a restart point (the writer allows 65,536), and a step
 * back searched by key, comparing the key with every entry from the
 * restart on. With keys that share long prefixes (here key i is i + 1
 * bytes of 'a', 8,000 of them after one restart, a 74 KB table) a
 * backward scan took time cubic in the entries (tens of seconds). A step
 * back now decodes forward from the restart without comparing keys: the
 * scan is exact, in order, and prompt. */
#define F_INTERVAL_ENTRIES 8000

START_TEST(forged_table_restart_interval)
{
    char path[PATH_LEN];
    pjoin(path, test_dir, "000001.sst");
    kv_sst_options o;
    kv_sst_options_init(&o);
    o.restart_interval = 65536;
    o.block_size = (size_t)64 << 20;
    o.compression = KV_COMPRESSION_NONE;
    kv_sst_writer *w;
    ck_assert_int_eq(kv_sst_writer_new(path, &o, &w), KV_OK);
    char *key = malloc(F_INTERVAL_ENTRIES);
    ck_assert_ptr_nonnull(key);
    memset(key, 'a', F_INTERVAL_ENTRIES);
    for (size_t i = 0; i < F_INTERVAL_ENTRIES; i++)
        ck_assert_int_eq(kv_sst_writer_add(w, key, i + 1, "v", 1), KV_OK);
    uint64_t size;
    ck_assert_int_eq(kv_sst_writer_finish(w, &size), KV_OK);
    damages++;
    kv_sst_reader *r;
    ck_assert_int_eq(kv_sst_reader_open(path, NULL, 1, &r), KV_OK);
    kv_sst_iter *it;
    ck_assert_int_eq(kv_sst_iter_new(r, &it), KV_OK);
    double t0 = now_seconds();
    size_t n = 0;
    for (kv_sst_iter_seek_last(it); kv_sst_iter_valid(it); kv_sst_iter_prev(it)) {
        size_t klen;
        const void *k = kv_sst_iter_key(it, &klen);
        ck_assert_uint_eq(klen, F_INTERVAL_ENTRIES - n);
        ck_assert(memcmp(k, key, klen) == 0);
        n++;
        ck_assert_msg(now_seconds() - t0 < F_PROMPT, "backward scan: %zu of %d entries in %.1f s",
                      n, F_INTERVAL_ENTRIES, now_seconds() - t0);
    }
    double secs = now_seconds() - t0;
    ck_assert_int_eq(kv_sst_iter_status(it), KV_OK);
    ck_assert_uint_eq(n, F_INTERVAL_ENTRIES);
    printf("forged/interval: %llu-byte table, %d entries after one restart: backward scan in "
           "%.3f s\n", (unsigned long long)size, F_INTERVAL_ENTRIES, secs);
    kv_sst_iter_free(it);
    kv_sst_reader_close(r);
    free(key);
}
END_TEST

/* A WAL record's sequence numbers (the batch header behind the fragment
 * checksum): the store numbers its writes one after another, but a forged
 * record can claim any sequence. Record 10 of a second log claims 2^56
 * (past the last sequence number), 2^64 - 1, 2^56 - 1 (the last one), or
 * the sequence of the record before it. Before, the first two made kv_open
 * fail with KV_EINVAL and no text, and the third opened a store whose every
 * write then failed with KV_EINVAL (no sequence number left). Now replay
 * stops there as at any damaged record: records before it are served, it
 * and the rest are dropped and reported, and the store takes writes. */
START_TEST(forged_wal_sequence)
{
    char pristine[PATH_LEN], work[PATH_LEN], look[PATH_LEN], log2[PATH_LEN];
    pjoin(pristine, test_dir, "pristine");
    pjoin(work, test_dir, "work");
    pjoin(look, test_dir, "look");
    struct wal_geo g;
    build_wal_db(pristine, &g);
    const uint64_t forged[] = {(uint64_t)1 << 56, UINT64_MAX, ((uint64_t)1 << 56) - 1,
                               g.last_seq + 10};
    for (size_t t = 0; t < sizeof forged / sizeof forged[0]; t++) {
        copy_dir(pristine, work);
        off_t xs[X_RECORDS + 1];
        log_path(log2, work, g.number + 1);
        craft_log_forged(log2, g.number + 1, g.last_seq + 1, xs, 10, forged[t]);
        damages++;
        copy_dir(work, look); /* for a first look; work is for reopen_and_check */
        double t0 = now_seconds();
        kv_db *db = NULL;
        int rc = kv_open(look, NULL, &db);
        double secs = now_seconds() - t0;
        ck_assert_msg(rc == KV_OK, "record 10 claiming sequence %llu: kv_open gave %s (\"%s\")",
                      (unsigned long long)forged[t], kv_strerror(rc), kv_error_text());
        ck_assert_msg(secs < F_PROMPT, "took %.2f s", secs);
        char *text = NULL;
        ck_assert_int_eq(kv_recovery_report(db, &text), KV_OK);
        ck_assert_msg(strstr(text, ".log: KV_ECORRUPT at byte") && strstr(text, "sequence numbers"),
                      "recovery report \"%s\"", text);
        printf("forged/wal: sequence %llu: kv_open %s in %.3f s; %s", (unsigned long long)forged[t],
               kv_strerror(rc), secs, text);
        kv_free(text);
        close_db(db);
        struct wal_expect e = {.upto = W_RECORDS, .xn = X_RECORDS, .xupto = 10,
                               .recovered = W_RECORDS + 10,
                               .dropped = (uint64_t)(xs[X_RECORDS] - xs[10]), .damaged = 1};
        reopen_and_check(work, &e, 1); /* again: exact, and a write is taken and kept */
    }
}
END_TEST

/* ---- manifest records, rewritten through LMDB with their checksums ---- */

static void put_le(uint8_t *p, uint64_t v, int width)
{
    for (int i = 0; i < width; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Sets a field of the state record (table_number 0) or of a table record
 * (doc/manifest.md) to v, recomputes the record's checksum, and returns
 * the old value. */
static uint64_t forge_manifest(const char *db, uint64_t table_number, size_t off, int width,
                               uint64_t v)
{
    char man[PATH_LEN];
    manifest_path(man, db);
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    ck_assert_int_eq(mdb_env_create(&env), 0);
    ck_assert_int_eq(mdb_env_set_maxdbs(env, 2), 0);
    ck_assert_int_eq(mdb_env_set_mapsize(env, 16u << 20), 0);
    ck_assert_int_eq(mdb_env_open(env, man, MDB_NOSUBDIR, 0644), 0);
    ck_assert_int_eq(mdb_txn_begin(env, NULL, 0, &txn), 0);
    ck_assert_int_eq(mdb_dbi_open(txn, table_number ? "tables" : "meta", 0, &dbi), 0);
    uint8_t kb[8];
    for (int i = 0; i < 8; i++)
        kb[i] = (uint8_t)(table_number >> (56 - 8 * i));
    MDB_val k = table_number ? (MDB_val){8, kb} : (MDB_val){5, "state"}, val;
    ck_assert_int_eq(mdb_get(txn, dbi, &k, &val), 0);
    uint8_t *b = malloc(val.mv_size);
    ck_assert_ptr_nonnull(b);
    memcpy(b, val.mv_data, val.mv_size);
    uint64_t old = width == 4 ? get_u32(b + off) : get_u64(b + off);
    put_le(b + off, v, width);
    put_le(b + val.mv_size - 8, XXH3_64bits(b, val.mv_size - 8), 8);
    val.mv_data = b;
    ck_assert_int_eq(mdb_put(txn, dbi, &k, &val, 0), 0);
    ck_assert_int_eq(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
    free(b);
    damages++;
    return old;
}

/* The manifest's counts: a table record's level (7, past the last level,
 * and 2^32 - 1), the state's last_seq past 2^56 - 1, and last_seq below a
 * table's max_seq, the state's next_file past 2^63 (file numbers end at
 * 2^63 - 1; found by fuzz_manifest: the open then failed making its log).
 * Before, kv_open took each: a table of level 7 sorted
 * after every level, where kv_compact_range dropped it (half the pairs
 * lost); last_seq past the range hid every pair and refused every write;
 * last_seq below a table's sequences let older versions in that table
 * hide newer writes once compacted together. Now kv_open (and kv_inspect)
 * refuse each with KV_ECORRUPT naming the MANIFEST, the record and the
 * rule; the refused open deletes nothing, and with the field put back
 * every pair is served. */
START_TEST(forged_manifest_counts)
{
    char pristine[PATH_LEN], work[PATH_LEN];
    pjoin(pristine, test_dir, "pristine");
    pjoin(work, test_dir, "work");
    build_manifest_db(pristine);
    uint64_t tables[4];
    ck_assert_uint_eq(numbered_files(pristine, "sst", tables, 4), 2);
    const struct {
        uint64_t table; /* 0: the state record */
        size_t off;
        int width;
        uint64_t value;
        const char *why;
    } forge[] = {
        {tables[0], 4, 4, 7, "level beyond the last level"},
        {tables[1], 4, 4, UINT32_MAX, "level beyond the last level"},
        {0, 16, 8, (uint64_t)1 << 56, "last_seq beyond"},
        {0, 16, 8, 1, "beyond the state's last_seq"},
        {0, 8, 8, UINT64_MAX - 499, "next_file beyond"},
        {0, 8, 8, ((uint64_t)1 << 63) + 1, "next_file beyond"},
    };
    for (size_t t = 0; t < sizeof forge / sizeof forge[0]; t++) {
        copy_dir(pristine, work);
        uint64_t old = forge_manifest(work, forge[t].table, forge[t].off, forge[t].width,
                                      forge[t].value);
        double t0 = now_seconds();
        kv_db *db = NULL;
        int rc = kv_open(work, NULL, &db);
        double secs = now_seconds() - t0;
        if (rc == KV_OK) {
            int bad = m_mismatches(db);
            int crc = kv_compact_range(db, NULL, 0, NULL, 0);
            int lost = m_mismatches(db);
            kv_close(db);
            ck_abort_msg("forged field %zu: kv_open took it: %d pairs wrong, then %d after "
                         "kv_compact_range (%s)", t, bad, lost, kv_strerror(crc));
        }
        ck_assert_msg(rc == KV_ECORRUPT, "forged field %zu: kv_open gave %s", t, kv_strerror(rc));
        ck_assert_msg(strstr(kv_error_text(), "/MANIFEST: ") && strstr(kv_error_text(), forge[t].why),
                      "forged field %zu: error text \"%s\"", t, kv_error_text());
        ck_assert_msg(secs < F_PROMPT, "took %.2f s", secs);
        printf("forged/manifest: %s in %.3f s (\"%s\")\n", kv_strerror(rc), secs, kv_error_text());
        kv_dir_info *info = (kv_dir_info *)test_dir;
        ck_assert_int_eq(kv_inspect(work, &info), KV_ECORRUPT);
        ck_assert_ptr_null(info);
        uint64_t now[4];
        ck_assert_uint_eq(numbered_files(work, "sst", now, 4), 2); /* nothing deleted */
        forge_manifest(work, forge[t].table, forge[t].off, forge[t].width, old);
        expect_all_pairs(work);
    }
}
END_TEST


/* =========================================================================================
 * Blob files
 * ====================================================================================== */

#define B_KEYS 60

static size_t b_key(int j, char *k)
{
    return (size_t)sprintf(k, "bk%04d", j);
}

/* Key j's value: 600..2599 bytes (in a blob file), one in six 100 bytes
 * (in the table). */
static size_t b_value(int j, uint8_t *v)
{
    size_t n = j % 6 == 5 ? 100 : 600 + (size_t)(splitmix((uint64_t)j) % 2000);
    fill_bytes(0xB10Bull + (uint64_t)j, v, n);
    return n;
}

/* One table and one blob file: the keys written, then flushed. */
static void build_blob_db(const char *p)
{
    kv_db *db = open_db(p, NULL);
    char k[32];
    uint8_t v[2600];
    for (int j = 0; j < B_KEYS; j++)
        ck_assert_int_eq(kv_put(db, k, b_key(j, k), v, b_value(j, v)), KV_OK);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    struct kv_stats s;
    get_stats(db, &s);
    ck_assert_uint_eq(s.tables, 1);
    ck_assert_uint_eq(s.blob_files, 1);
    close_db(db);
}

/* A record of a blob file, as kv_blob_scan finds it. */
struct brec {
    uint64_t offset;
    size_t klen, vlen;
    int key; /* its j */
};

struct brecs {
    struct brec r[B_KEYS];
    size_t n;
};

static int b_note(void *ctx, const void *key, size_t klen, const void *val, size_t vlen,
                  const kv_blob_ref *ref)
{
    (void)val;
    struct brecs *b = ctx;
    ck_assert_uint_lt(b->n, B_KEYS);
    b->r[b->n++] = (struct brec){ref->offset, klen, vlen, atoi((const char *)key + 2)};
    return 0;
}

/* The blob file of the database in p: its path, number and records. */
static void blob_layout(const char *p, char *path, char *name, struct brecs *b)
{
    uint64_t nums[4];
    ck_assert_uint_eq(numbered_files(p, "blob", nums, 4), 1);
    snprintf(name, 64, "%06llu.blob", (unsigned long long)nums[0]);
    pjoin(path, p, name);
    kv_blob_reader *r;
    ck_assert_int_eq(kv_blob_reader_open(path, nums[0], &r), KV_OK);
    b->n = 0;
    ck_assert_int_eq(kv_blob_scan(r, b_note, b), KV_OK);
    kv_blob_reader_close(r);
    ck_assert_uint_gt(b->n, 10);
}

/* A blob database built in dir/pristine and copied to dir/work, which
 * the test then damages: work's path, and its blob file's path, name and
 * records. */
static void blob_work_db(char *work, char *path, char *name, struct brecs *b)
{
    char pristine[PATH_LEN];
    pjoin(pristine, test_dir, "pristine");
    pjoin(work, test_dir, "work");
    build_blob_db(pristine);
    copy_dir(pristine, work);
    blob_layout(work, path, name, b);
}

/* Every key of the database by kv_get, kv_get_into and kv_multi_get: key
 * `bad` (-1: none) must fail with KV_ECORRUPT, naming the blob file
 * `name`, every other key must read exactly. */
static void check_blob_gets(kv_db *db, int bad, const char *name, const char *what)
{
    char k[B_KEYS][32];
    const void *keys[B_KEYS];
    size_t klens[B_KEYS];
    uint8_t v[2600], buf[2600];
    for (int j = 0; j < B_KEYS; j++) {
        size_t kl = b_key(j, k[j]), vl = b_value(j, v);
        keys[j] = k[j];
        klens[j] = kl;
        void *got = NULL;
        size_t n = 0;
        int rc = kv_get(db, k[j], kl, &got, &n);
        if (j == bad) {
            ck_assert_msg(rc == KV_ECORRUPT, "%s: kv_get of the damaged record's key: %s", what,
                          kv_strerror(rc));
            ck_assert_msg(strstr(kv_error_text(), name), "%s: the text \"%s\" does not name %s",
                          what, kv_error_text(), name);
            ck_assert_int_eq(kv_get_into(db, NULL, k[j], kl, buf, sizeof buf, &n), KV_ECORRUPT);
            continue;
        }
        ck_assert_msg(rc == KV_OK, "%s: key %d: %s", what, j, kv_strerror(rc));
        ck_assert_msg(n == vl && memcmp(got, v, vl) == 0, "%s: key %d: wrong value", what, j);
        kv_free(got);
        ck_assert_int_eq(kv_get_into(db, NULL, k[j], kl, buf, sizeof buf, &n), KV_OK);
        ck_assert(n == vl && memcmp(buf, v, vl) == 0);
    }
    void *vals[B_KEYS];
    size_t vlens[B_KEYS];
    int rcs[B_KEYS];
    ck_assert_int_eq(kv_multi_get(db, NULL, B_KEYS, keys, klens, vals, vlens, rcs), KV_OK);
    for (int j = 0; j < B_KEYS; j++) {
        size_t vl = b_value(j, v);
        if (j == bad) {
            ck_assert_msg(rcs[j] == KV_ECORRUPT, "%s: kv_multi_get of the damaged key: %s", what,
                          kv_strerror(rcs[j]));
            continue;
        }
        ck_assert_msg(rcs[j] == KV_OK && vlens[j] == vl && memcmp(vals[j], v, vl) == 0,
                      "%s: kv_multi_get of key %d", what, j);
        kv_free(vals[j]);
    }
}

/* A scan with values: an exact prefix, then (when `bad` >= 0) a stop at
 * that key with KV_ECORRUPT; the same backwards (an exact suffix); a scan
 * of keys alone reads no value and sees every key. */
static void check_blob_scans(kv_db *db, int bad, const char *what)
{
    kv_iter *it;
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    int j = 0;
    uint8_t v[2600];
    for (kv_iter_seek_first(it); kv_iter_valid(it); kv_iter_next(it), j++) {
        char k[32];
        size_t kl = b_key(j, k), klen, vlen;
        const void *key = kv_iter_key(it, &klen);
        ck_assert_msg(klen == kl && memcmp(key, k, kl) == 0, "%s: scan: key %d out of place",
                      what, j);
        const void *val = kv_iter_value(it, &vlen);
        if (j == bad) {
            ck_assert_msg(!val && vlen == 0 && !kv_iter_valid(it),
                          "%s: scan: the damaged value was served", what);
            break;
        }
        size_t vl = b_value(j, v);
        ck_assert_msg(val && vlen == vl && memcmp(val, v, vl) == 0, "%s: scan: key %d's value",
                      what, j);
    }
    if (bad >= 0) {
        ck_assert_msg(j == bad, "%s: scan stopped at %d, not at the damaged key %d", what, j, bad);
        ck_assert_int_eq(kv_iter_status(it), KV_ECORRUPT);
        ck_assert_ptr_nonnull(strstr(kv_error_text(), ".blob"));
    } else {
        ck_assert_int_eq(j, B_KEYS);
        ck_assert_int_eq(kv_iter_status(it), KV_OK);
    }
    kv_iter_free(it);
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    j = B_KEYS - 1;
    for (kv_iter_seek_last(it); kv_iter_valid(it); kv_iter_prev(it), j--) {
        char k[32];
        size_t kl = b_key(j, k), klen, vlen;
        const void *key = kv_iter_key(it, &klen);
        ck_assert_msg(klen == kl && memcmp(key, k, kl) == 0, "%s: backward scan: key %d", what,
                      j);
        const void *val = kv_iter_value(it, &vlen);
        if (j == bad) {
            ck_assert_msg(!val && !kv_iter_valid(it), "%s: backward scan: the damaged value "
                          "was served", what);
            break;
        }
        size_t vl = b_value(j, v);
        ck_assert_msg(val && vlen == vl && memcmp(val, v, vl) == 0,
                      "%s: backward scan: key %d's value", what, j);
    }
    ck_assert_int_eq(j, bad >= 0 ? bad : -1);
    ck_assert_int_eq(kv_iter_status(it), bad >= 0 ? KV_ECORRUPT : KV_OK);
    kv_iter_free(it);
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    j = 0;
    for (kv_iter_seek_first(it); kv_iter_valid(it); kv_iter_next(it))
        j++;
    ck_assert_int_eq(j, B_KEYS);
    ck_assert_int_eq(kv_iter_status(it), KV_OK);
    kv_iter_free(it);
}

/* The header and the footer, each byte flipped in turn: kv_open refuses
 * the database with KV_ECORRUPT naming the file (the open reads and
 * checks both before it trusts either). */
START_TEST(blob_header_and_footer)
{
    char work[PATH_LEN], path[PATH_LEN], name[64];
    struct brecs b;
    blob_work_db(work, path, name, &b);
    off_t size = file_size(path);
    for (off_t off = 0; off < 64; off++) {
        off_t at = off < 32 ? off : size - 64 + off;
        uint8_t mask = (uint8_t)(1u << (off % 8));
        flip(path, at, mask);
        char what[64];
        snprintf(what, sizeof what, "%s byte %lld flipped", off < 32 ? "header" : "footer",
                 (long long)(off % 32));
        expect_open_corrupt(work, name, what);
        unflip(path, at, mask);
    }
    kv_db *db = open_db(work, NULL);
    check_blob_gets(db, -1, name, "restored");
    close_db(db);
}
END_TEST

/* One record of the blob file, byte by byte (its head: klen, vlen,
 * compression; its key; its checksum; and bytes of its value): the open
 * succeeds (it checks no record), the Gets of that record's key fail with
 * KV_ECORRUPT, every other pair reads exactly, and a scan stops there. */
START_TEST(blob_record_bytes)
{
    char work[PATH_LEN], path[PATH_LEN], name[64];
    struct brecs b;
    blob_work_db(work, path, name, &b);
    const struct brec *r = &b.r[b.n / 2];
    uint64_t head = 9, key = r->klen, val = r->vlen, sum = 8;
    uint64_t total = head + key + val + sum;
    ck_assert_uint_eq(kv_blob_record_size(r->klen, r->vlen), total);
    int flips = 0;
    for (uint64_t rel = 0; rel < total; rel++) {
        const char *region = rel < head ? "head" : rel < head + key ? "key"
                             : rel < head + key + val ? "value" : "checksum";
        /* Every byte but the value's: 16 of those, spread over it. */
        if (rel >= head + key && rel < head + key + val && (rel - head - key) % (val / 16) != 0 &&
            rel != head + key + val - 1)
            continue;
        uint8_t mask = (uint8_t)(1u << (rel % 8));
        flip(path, (off_t)(r->offset + rel), mask);
        char what[96];
        snprintf(what, sizeof what, "record at %llu, %s byte %llu flipped",
                 (unsigned long long)r->offset, region, (unsigned long long)rel);
        kv_db *db = open_db(work, NULL);
        check_blob_gets(db, r->key, name, what);
        check_blob_scans(db, r->key, what);
        close_db(db);
        unflip(path, (off_t)(r->offset + rel), mask);
        flips++;
    }
    ck_assert_int_ge(flips, 9 + 6 + 8 + 16);
    kv_db *db = open_db(work, NULL);
    check_blob_gets(db, -1, name, "restored");
    check_blob_scans(db, -1, "restored");
    close_db(db);
}
END_TEST

/* A blob file cut short (anywhere: its last 32 bytes are then no footer,
 * or one whose byte count disagrees with the file's size), grown, emptied
 * or deleted: kv_open fails with KV_ECORRUPT naming it, and neither makes
 * nor deletes a file; put back, every pair reads again. */
START_TEST(blob_truncated_or_missing)
{
    char work[PATH_LEN], path[PATH_LEN], name[64];
    struct brecs b;
    blob_work_db(work, path, name, &b);
    size_t n;
    uint8_t *orig = slurp(path, &n);
    const size_t cuts[] = {n - 1,  n - 8, n - 32, n - 33, (size_t)b.r[b.n / 2].offset,
                           n / 2, 64, 63, 32, 1, 0};
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        ck_assert_int_eq(cut(path, (off_t)cuts[c]), 0);
        char what[64];
        snprintf(what, sizeof what, "cut to %zu bytes", cuts[c]);
        expect_open_corrupt(work, name, what);
        spit(path, orig, n);
    }
    uint8_t *longer = calloc(1, n + 4096);
    ck_assert_ptr_nonnull(longer);
    memcpy(longer, orig, n);
    spit(path, longer, n + 1);
    damages++;
    expect_open_corrupt(work, name, "one byte appended");
    memcpy(longer + n, orig + n - 32, 32); /* a copy of the footer after it */
    spit(path, longer, n + 32);
    damages++;
    expect_open_corrupt(work, name, "the footer repeated");
    free(longer);
    ck_assert_int_eq(unlink(path), 0);
    damages++;
    expect_open_corrupt(work, name, "the blob file deleted");
    ck_assert(!file_exists(path)); /* the failed open did not make it up */
    uint64_t t[4];
    ck_assert_uint_eq(numbered_files(work, "sst", t, 4), 1); /* nor deleted the table */
    kv_dir_info *info = NULL;
    ck_assert_int_eq(kv_inspect(work, &info), KV_OK);
    ck_assert_uint_eq(info->nblobs, 1);
    ck_assert_int_eq(info->blobs[0].present, 0);
    kv_inspect_free(info);
    spit(path, orig, n);
    free(orig);
    kv_db *db = open_db(work, NULL);
    check_blob_gets(db, -1, name, "put back");
    close_db(db);
}
END_TEST

/* Adds delta to the u64 at `off` of blob file `number`'s manifest record
 * (doc/manifest.md, "Named database blobs"), recomputes its checksum, and
 * returns the old value; a damage when `counted`. */
static uint64_t forge_blob_record(const char *db, uint64_t number, size_t off, int64_t delta,
                                  int counted)
{
    char man[PATH_LEN];
    manifest_path(man, db);
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    ck_assert_int_eq(mdb_env_create(&env), 0);
    ck_assert_int_eq(mdb_env_set_maxdbs(env, 8), 0);
    ck_assert_int_eq(mdb_env_set_mapsize(env, 16u << 20), 0);
    ck_assert_int_eq(mdb_env_open(env, man, MDB_NOSUBDIR, 0644), 0);
    ck_assert_int_eq(mdb_txn_begin(env, NULL, 0, &txn), 0);
    ck_assert_int_eq(mdb_dbi_open(txn, "blobs", 0, &dbi), 0);
    uint8_t kb[8];
    for (int i = 0; i < 8; i++)
        kb[i] = (uint8_t)(number >> (56 - 8 * i));
    MDB_val k = {8, kb}, val;
    ck_assert_int_eq(mdb_get(txn, dbi, &k, &val), 0);
    ck_assert_uint_eq(val.mv_size, 64);
    uint8_t b[64];
    memcpy(b, val.mv_data, 64);
    uint64_t old = get_u64(b + off);
    put_le(b + off, old + (uint64_t)delta, 8);
    put_le(b + 56, XXH3_64bits(b, 56), 8);
    val.mv_data = b;
    ck_assert_int_eq(mdb_put(txn, dbi, &k, &val, 0), 0);
    ck_assert_int_eq(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
    damages += counted != 0;
    return old;
}

/* The manifest's record of the blob file says other counts than the file
 * holds (its checksum recomputed, so only the comparison with the file
 * can tell): kv_open fails with KV_ECORRUPT naming the file and deletes
 * nothing; put back, every pair reads. */
START_TEST(blob_manifest_counts)
{
    char work[PATH_LEN], path[PATH_LEN], name[64];
    struct brecs b;
    blob_work_db(work, path, name, &b);
    uint64_t number = strtoull(name, NULL, 10);
    const struct {
        size_t off;
        int64_t delta;
        const char *field;
    } forge[] = {
        {16, 1, "file_size"},    {16, -1, "file_size"},
        {24, 1, "records"},      {24, -1, "records"},
        {32, 1, "record_bytes"}, {32, -1, "record_bytes"},
    };
    for (size_t f = 0; f < sizeof forge / sizeof forge[0]; f++) {
        forge_blob_record(work, number, forge[f].off, forge[f].delta, 1);
        char what[64];
        snprintf(what, sizeof what, "the manifest's %s %+lld", forge[f].field,
                 (long long)forge[f].delta);
        expect_open_corrupt(work, name, what);
        ck_assert(file_exists(path));
        forge_blob_record(work, number, forge[f].off, -forge[f].delta, 0);
    }
    kv_db *db = open_db(work, NULL);
    check_blob_gets(db, -1, name, "put back");
    close_db(db);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("corruption");
    TCase *tc = tcase_create("wal");
    tcase_add_checked_fixture(tc, test_setup, teardown_count);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, wal_last_record_flipped);
    tcase_add_test(tc, wal_last_record_truncated);
    tcase_add_test(tc, wal_middle_record_stops_replay);
    tcase_add_test(tc, wal_damage_drops_later_logs);
    suite_add_tcase(s, tc);
    tc = tcase_create("table");
    tcase_add_checked_fixture(tc, test_setup, teardown_count);
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, table_data_block, 0, 2);
    tcase_add_test(tc, table_compaction_over_damage);
    tcase_add_test(tc, table_blocks_read_at_open);
    tcase_add_test(tc, table_truncated_or_missing);
    suite_add_tcase(s, tc);
    tc = tcase_create("manifest");
    tcase_add_checked_fixture(tc, test_setup, teardown_count);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, manifest_table_record);
    tcase_add_test(tc, manifest_state_record);
    tcase_add_test(tc, manifest_lmdb_meta_magic_and_version);
    tcase_add_test(tc, manifest_lmdb_meta_pages);
    tcase_add_test(tc, manifest_cut_within_meta_pages);
    tcase_add_test(tc, manifest_cut_after_meta_pages);
    tcase_add_test(tc, manifest_with_a_free_last_page);
    tcase_add_test(tc, manifest_lock_file_deleted);
    tcase_add_test(tc, manifest_deleted);
    tcase_add_test(tc, manifest_emptied);
    tcase_add_test(tc, manifest_state_database_missing);
    suite_add_tcase(s, tc);
    tc = tcase_create("blob");
    tcase_add_checked_fixture(tc, test_setup, teardown_count);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, blob_header_and_footer);
    tcase_add_test(tc, blob_record_bytes);
    tcase_add_test(tc, blob_truncated_or_missing);
    tcase_add_test(tc, blob_manifest_counts);
    suite_add_tcase(s, tc);
    tc = tcase_create("forged");
    tcase_add_checked_fixture(tc, test_setup, teardown_count);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, forged_table_index_keys);
    tcase_add_test(tc, forged_table_zstd_size);
    tcase_add_test(tc, forged_table_restart_interval);
    tcase_add_test(tc, forged_wal_sequence);
    tcase_add_test(tc, forged_manifest_counts);
    suite_add_tcase(s, tc);
    return s;
}
