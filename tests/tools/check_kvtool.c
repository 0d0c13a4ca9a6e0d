/* check_kvtool.c - kvtool run as a program against databases built through
 * kv.h (several tables on several levels, binary keys, deletes): db verify
 * passes and names a table with a flipped byte, sst dump prints every
 * entry escaped, db get takes escaped binary keys, db explain shows filter
 * negatives gating reads and, for a range (--from/--to), the prefix and
 * range filters gating a seek, every subcommand has --help; and the two APIs
 * added for it, kv_explain_get (agrees with kv_get; an absent key meets
 * only filter negatives and false positives) and kv_inspect (reads without
 * recovery, under the database's lock). Every failure message names the
 * path, kv's code and kv's text; bad usage names the argument at fault.
 * Blob files (values of 512 bytes or more kept apart from the tables): db
 * verify reads every value back and checks each file's garbage against the
 * references, naming a damaged, missing or unnamed .blob file and a forged
 * garbage count; db info lists them with their garbage; db explain shows
 * the blob read; sst dump the references; blob dump and verify one file. */
#define _XOPEN_SOURCE 700
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <dirent.h>
#include <kv/kv.h>
#include <kv/sstable.h>
#include <lmdb.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "fixture.h"

#ifndef KVTOOL_PATH
#error "KVTOOL_PATH (the kvtool binary) must be defined by the build"
#endif

/* ---- fixture: one temporary directory per test ---------------------------------- */

/* The blob tests' values (build_blob_db), freed after each test. */
#define NBLOB 240u /* "blob%04u"; values of 600 .. 3000 bytes, every 6th 100 .. 400 */
static uint8_t *bval[NBLOB];
static size_t bvlen[NBLOB];

static void teardown_values(void)
{
    for (size_t i = 0; i < NBLOB; i++) {
        free(bval[i]);
        bval[i] = NULL;
    }
    test_teardown();
}

/* ---- running kvtool ------------------------------------------------------------- */

struct run {
    int status;      /* exit code; 128 + signal when killed */
    char *out, *err; /* NUL-terminated */
    size_t out_len, err_len;
};

static char *slurp(const char *p, size_t *len)
{
    FILE *f = fopen(p, "rb");
    ck_assert_ptr_nonnull(f);
    char *b = read_all(f, len);
    ck_assert_ptr_nonnull(b);
    fclose(f);
    return b;
}

/* Runs kvtool with the arguments (NULL-terminated), stdout and stderr
 * captured in files of the test directory. */
static void run_argv(struct run *r, char *const *args)
{
    char out[600], err[600];
    test_path(out, sizeof out, "tool.out");
    test_path(err, sizeof err, "tool.err");
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
            _exit(126);
        alarm(60); /* kept across exec: a kvtool that hangs dies of SIGALRM */
        execv(KVTOOL_PATH, args);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        ck_assert_int_eq(errno, EINTR);
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    r->out = slurp(out, &r->out_len);
    r->err = slurp(err, &r->err_len);
}

static void run(struct run *r, ...)
{
    char *args[16];
    int n = 0;
    args[n++] = (char *)KVTOOL_PATH;
    va_list ap;
    va_start(ap, r);
    char *a;
    while ((a = va_arg(ap, char *)) != NULL) {
        ck_assert_int_lt(n, 15);
        args[n++] = a;
    }
    va_end(ap);
    args[n] = NULL;
    run_argv(r, args);
}

static void run_free(struct run *r)
{
    free(r->out);
    free(r->err);
}

/* Output a terminal can take: printable ASCII and newlines only. */
static void assert_printable(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(s[i] == '\n' || (s[i] >= 0x20 && s[i] < 0x7F),
                      "raw byte 0x%02x at %zu of the output", (unsigned char)s[i], i);
}

static size_t count_lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* kvtool's escaping, written again: "..." with printable ASCII but \ and "
 * as is, every other byte as \xNN. */
static void escape(char *out, size_t cap, const uint8_t *p, size_t n)
{
    size_t o = 0;
    out[o++] = '"';
    for (size_t i = 0; i < n; i++) {
        ck_assert_uint_lt(o + 5, cap);
        if (p[i] >= 0x20 && p[i] < 0x7F && p[i] != '\\' && p[i] != '"')
            out[o++] = (char)p[i];
        else
            o += (size_t)sprintf(out + o, "\\x%02x", p[i]);
    }
    out[o++] = '"';
    out[o] = '\0';
}

/* ---- the database under test ------------------------------------------------------ */

#define NKEYS 3000u /* "key%06u" of even numbers; odd numbers are absent */
#define NBIN 60u    /* binary keys: 0x00, 0xFF, newline, backslash, quote */
#define BASE ((size_t)128 << 10)

struct entry {
    uint8_t k[16], v[128];
    size_t klen, vlen;
    int live;
};

static struct entry model[NKEYS + NBIN];
#define NMODEL (NKEYS + NBIN)

static uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static void fill(uint64_t seed, uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)mix(seed * 1000003u + i);
}

static size_t absent_key(uint32_t i, uint8_t k[16])
{
    return (size_t)sprintf((char *)k, "key%06u", 2 * (i % NKEYS) + 1);
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Builds dir/db: the keys compacted (small tables and level targets, so
 * that level 1 spills into level 2), then deletes and overwrites flushed
 * as two level-0 tables. The shape is left where no compaction is due, so
 * that every later open (kvtool's too) sees the same tables. */
static void build_db(char *p, size_t n)
{
    test_path(p, n, "db");
    kv_options o;
    kv_options_init(&o);
    o.target_file_size = (size_t)64 << 10;
    o.max_bytes_for_level_base = BASE;
    o.idle_compaction_ms = 0; /* the two level-0 tables stay while it builds */
    kv_db *db = open_db(p, &o);
    for (uint32_t i = 0; i < NMODEL; i++) {
        struct entry *e = &model[i];
        if (i < NKEYS)
            e->klen = (size_t)sprintf((char *)e->k, "key%06u", 2 * i);
        else {
            uint32_t b = i - NKEYS;
            uint8_t k[] = {'b', 0x00, (uint8_t)b, 0xFF, '\n', '\\', '"', 0x7F, (uint8_t)(b * 7)};
            e->klen = 4 + b % 6;
            memcpy(e->k, k, e->klen);
        }
        e->vlen = 60 + i % 60;
        fill(i, e->v, e->vlen);
        e->live = 1;
        ck_assert_int_eq(kv_put(db, e->k, e->klen, e->v, e->vlen), KV_OK);
    }
    ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 0), KV_OK);
    /* Level 1 is over its target: wait until compaction brings it down. */
    struct kv_stats s;
    for (int tries = 0;; tries++) {
        ck_assert_int_eq(kv_stats(db, &s), KV_OK);
        if (s.level_bytes[1] <= BASE)
            break;
        ck_assert_int_lt(tries, 3000);
        sleep_ms(10);
    }
    for (uint32_t i = 0; i < NMODEL; i += 7) {
        ck_assert_int_eq(kv_delete(db, model[i].k, model[i].klen), KV_OK);
        model[i].live = 0;
    }
    ck_assert_int_eq(kv_flush(db), KV_OK);
    for (uint32_t i = 0; i < NMODEL; i += 5) {
        struct entry *e = &model[i];
        e->vlen = (size_t)sprintf((char *)e->v, "new\n%u\\", i);
        e->live = 1;
        ck_assert_int_eq(kv_put(db, e->k, e->klen, e->v, e->vlen), KV_OK);
    }
    ck_assert_int_eq(kv_flush(db), KV_OK);
    ck_assert_int_eq(kv_stats(db, &s), KV_OK);
    ck_assert_uint_eq(s.l0_tables, 2);
    close_db(db);
}

/* The tables (kv_table_stats_get of a fresh open), at least two levels. */
static kv_table_stats *tables_of(const char *p, size_t *n)
{
    kv_db *db = open_db(p, NULL);
    kv_table_stats *ts;
    ck_assert_int_eq(kv_table_stats_get(db, &ts, n), KV_OK);
    close_db(db);
    int levels = 0;
    unsigned seen = 0;
    for (size_t i = 0; i < *n; i++)
        if (!(seen & 1u << ts[i].level)) {
            seen |= 1u << ts[i].level;
            levels++;
        }
    ck_assert_int_ge(levels, 2);
    ck_assert_uint_ge(*n, 4);
    return ts;
}

static int key_cmp(const void *a, size_t alen, const void *b, size_t blen)
{
    size_t n = alen < blen ? alen : blen;
    int c = n ? memcmp(a, b, n) : 0;
    return c ? c : (alen > blen) - (alen < blen);
}

/* Tables a Get of key probes: level-0 tables whose range holds it, and at
 * most one per deeper level. */
static size_t candidates(const kv_table_stats *ts, size_t n, const void *k, size_t klen)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += key_cmp(k, klen, ts[i].smallest, ts[i].smallest_len) >= 0 &&
             key_cmp(k, klen, ts[i].largest, ts[i].largest_len) <= 0;
    return c;
}

static void table_file(char *p, size_t n, const char *db, uint64_t number)
{
    snprintf(p, n, "%s/%06llu.sst", db, (unsigned long long)number);
}

/* ---- kvtool ----------------------------------------------------------------------- */

START_TEST(verify_passes_then_names_a_damaged_table)
{
    char db[600];
    build_db(db, sizeof db);
    size_t nt;
    kv_table_stats *ts = tables_of(db, &nt);

    struct run r;
    run(&r, "db", "verify", db, NULL);
    ck_assert_msg(r.status == 0, "db verify: %d: %s", r.status, r.err);
    ck_assert_uint_eq(count_lines(r.out), nt + 1); /* one per table, one summary */
    run_free(&r);

    /* One byte flipped inside the first data block of a deeper table. */
    const kv_table_stats *victim = &ts[nt - 1];
    ck_assert_uint_gt(victim->level, 0);
    char file[700], name[32];
    table_file(file, sizeof file, db, victim->number);
    snprintf(name, sizeof name, "%06llu.sst", (unsigned long long)victim->number);
    int fd = open(file, O_RDWR);
    ck_assert_int_ge(fd, 0);
    uint8_t b;
    ck_assert_int_eq(pread(fd, &b, 1, 40), 1);
    b ^= 0x5A;
    ck_assert_int_eq(pwrite(fd, &b, 1, 40), 1);
    close(fd);

    run(&r, "db", "verify", db, NULL);
    ck_assert_int_eq(r.status, 1);
    ck_assert_msg(strstr(r.err, name) != NULL, "db verify does not name %s: %s", name, r.err);
    ck_assert_ptr_nonnull(strstr(r.err, "checksum"));
    /* The other tables still pass. */
    ck_assert_uint_eq(count_lines(r.out), nt - 1);
    ck_assert_ptr_null(strstr(r.out, name));
    run_free(&r);

    run(&r, "sst", "verify", file, NULL);
    ck_assert_int_eq(r.status, 1);
    ck_assert_uint_eq(count_lines(r.err), 1);
    ck_assert_ptr_nonnull(strstr(r.err, name));
    run_free(&r);
    kv_free(ts);
}
END_TEST

START_TEST(verify_reports_orphans_without_deleting_them)
{
    char db[600];
    build_db(db, sizeof db);
    size_t nt;
    kv_table_stats *ts = tables_of(db, &nt);
    /* A copy of a live table under a number the manifest does not name,
     * as a crash between a table's rename and its manifest commit leaves. */
    char from[700], orphan[700], tmp[700];
    table_file(from, sizeof from, db, ts[0].number);
    table_file(orphan, sizeof orphan, db, 999999);
    snprintf(tmp, sizeof tmp, "%s/1000000.sst.tmp", db);
    size_t len;
    char *bytes = slurp(from, &len);
    FILE *f = fopen(orphan, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(bytes, 1, len, f), len);
    fclose(f);
    free(bytes);
    f = fopen(tmp, "wb");
    ck_assert_ptr_nonnull(f);
    fclose(f);

    struct run r;
    run(&r, "db", "verify", db, NULL);
    ck_assert_int_eq(r.status, 1);
    ck_assert_ptr_nonnull(strstr(r.err, "999999.sst: a table the manifest does not name"));
    ck_assert_ptr_nonnull(strstr(r.err, "1000000.sst.tmp"));
    ck_assert_uint_eq(count_lines(r.out), nt); /* every live table is fine */
    run_free(&r);
    run(&r, "db", "info", db, NULL);
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "999999.sst"));
    /* each live table's line names its compression (so each level's) */
    size_t named = 0;
    for (const char *p = r.out; (p = strstr(p, "]  ")) != NULL; p++)
        named += strncmp(p + 3, "raw  ", 5) == 0 || strncmp(p + 3, "zstd", 4) == 0;
    ck_assert_uint_eq(named, nt);
    run_free(&r);
    struct stat st;
    ck_assert_int_eq(stat(orphan, &st), 0); /* still there: nothing was recovered */
    ck_assert_int_eq(stat(tmp, &st), 0);

    /* A live table missing, and one of the wrong size. */
    char live[700];
    table_file(live, sizeof live, db, ts[1].number);
    ck_assert_int_eq(unlink(live), 0);
    table_file(live, sizeof live, db, ts[2].number);
    ck_assert_int_eq(truncate(live, 100), 0);
    run(&r, "db", "verify", db, NULL);
    ck_assert_int_eq(r.status, 1);
    char want[64];
    snprintf(want, sizeof want, "%06llu.sst: missing", (unsigned long long)ts[1].number);
    ck_assert_msg(strstr(r.err, want) != NULL, "%s", r.err);
    snprintf(want, sizeof want, "%06llu.sst: 100 bytes on disk", (unsigned long long)ts[2].number);
    ck_assert_msg(strstr(r.err, want) != NULL, "%s", r.err);
    run_free(&r);
    kv_free(ts);
}
END_TEST

START_TEST(sst_dump_prints_every_entry_escaped)
{
    char db[600];
    build_db(db, sizeof db);
    size_t nt;
    kv_table_stats *ts = tables_of(db, &nt);
    size_t cap = 1, all_len = 0;
    char *all = calloc(1, cap);
    uint64_t deletes = 0;
    for (size_t i = 0; i < nt; i++) {
        char file[700];
        table_file(file, sizeof file, db, ts[i].number);
        struct run r;
        run(&r, "sst", "props", file, NULL);
        ck_assert_int_eq(r.status, 0);
        const char *e = strstr(r.out, "\nentries:");
        ck_assert_ptr_nonnull(e);
        unsigned long long entries = strtoull(e + 9, NULL, 10);
        ck_assert_uint_eq(entries, ts[i].entries);
        ck_assert_ptr_nonnull(strstr(r.out, "m (bits):"));
        ck_assert_ptr_nonnull(strstr(r.out, "expected FPR:"));
        ck_assert_ptr_nonnull(strstr(r.out, "fill:"));
        /* with its format version, the table's dictionary, or none */
        ck_assert_ptr_nonnull(strstr(r.out, "\ndictionary:        "));
        ck_assert(strstr(r.out, "\nformat version:    2\n") ? !strstr(r.out, "dictionary:        none")
                                                             : strstr(r.out, "dictionary:        none") != NULL);
        assert_printable(r.out, r.out_len);
        run_free(&r);

        run(&r, "sst", "dump", file, NULL);
        ck_assert_int_eq(r.status, 0);
        ck_assert_uint_eq(count_lines(r.out), entries);
        assert_printable(r.out, r.out_len);
        for (const char *q = r.out; (q = strstr(q, " delete\n")) != NULL; q++)
            deletes++;
        all = realloc(all, cap += r.out_len);
        ck_assert_ptr_nonnull(all);
        memcpy(all + all_len, r.out, r.out_len + 1);
        all_len += r.out_len;
        run_free(&r);

        run(&r, "sst", "verify", file, NULL);
        ck_assert_msg(r.status == 0, "sst verify %s: %s", file, r.err);
        run_free(&r);
    }
    ck_assert_uint_gt(deletes, 0);
    /* Every live key, with its newest value, is in some table. */
    for (uint32_t i = 0; i < NMODEL; i++) {
        if (!model[i].live)
            continue;
        char k[80], v[600], line[700];
        escape(k, sizeof k, model[i].k, model[i].klen);
        escape(v, sizeof v, model[i].v, model[i].vlen);
        ck_assert_msg(strstr(all, k) != NULL, "key %u not dumped as %s", i, k);
        snprintf(line, sizeof line, " put => %s\n", v);
        ck_assert_msg(strstr(all, line) != NULL, "value of key %u not dumped", i);
    }
    free(all);

    /* --from/--to (user keys) and --hex on one table. */
    char file[700];
    table_file(file, sizeof file, db, ts[nt - 1].number);
    struct run r;
    run(&r, "sst", "dump", file, "--hex", NULL);
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "0x6b6579")); /* "key" */
    ck_assert_ptr_null(strstr(r.out, "\"key"));
    run_free(&r);
    char lo[80], hi[80];
    snprintf(lo, sizeof lo, "%.*s", (int)ts[nt - 1].smallest_len, ts[nt - 1].smallest);
    memcpy(hi, lo, sizeof lo);
    hi[strlen(hi) - 1]++; /* just above the smallest key */
    run(&r, "sst", "dump", file, "--from", lo, "--to", hi, NULL);
    ck_assert_int_eq(r.status, 0);
    ck_assert_uint_ge(count_lines(r.out), 1);
    ck_assert_uint_le(count_lines(r.out), 2); /* a put, maybe an older version */
    run_free(&r);
    kv_free(ts);
}
END_TEST

START_TEST(db_get_and_scan_take_binary_keys)
{
    char db[600];
    build_db(db, sizeof db);
    /* A live binary key with 0x00, 0xFF and a newline, given escaped. */
    uint32_t i = NKEYS + 1;
    ck_assert(model[i].live && memchr(model[i].k, 0, model[i].klen) &&
              memchr(model[i].k, '\n', model[i].klen));
    char k[80], v[600];
    escape(k, sizeof k, model[i].k, model[i].klen);
    escape(v, sizeof v, model[i].v, model[i].vlen);
    k[strlen(k) - 1] = '\0'; /* the key without its quotes, as typed */
    v[strlen(v) - 1] = '\0';
    struct run r;
    run(&r, "db", "get", db, k + 1, NULL);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_str_eq(r.out, strcat(v + 1, "\n"));
    run_free(&r);

    /* The same key in hex. */
    char hex[80] = "0x";
    for (size_t j = 0; j < model[i].klen; j++)
        sprintf(hex + 2 + 2 * j, "%02x", model[i].k[j]);
    run(&r, "db", "get", "--hex", db, hex, NULL);
    ck_assert_int_eq(r.status, 0);
    ck_assert_int_eq(strncmp(r.out, "0x", 2), 0);
    run_free(&r);

    /* A deleted key and an absent one: exit 1, one line. */
    run(&r, "db", "get", db, (char *)model[7].k, NULL);
    ck_assert_int_eq(r.status, 1);
    ck_assert_ptr_nonnull(strstr(r.err, "not found"));
    ck_assert_uint_eq(count_lines(r.err), 1);
    run_free(&r);
    run(&r, "db", "get", db, "bad\\q", NULL);
    ck_assert_int_eq(r.status, 1);
    ck_assert_ptr_nonnull(strstr(r.err, "bad escape"));
    run_free(&r);

    /* put, get, delete through the tool; scan sees the binary keys escaped. */
    run(&r, "db", "put", db, "t\\x00ool", "v\\x0a1", NULL);
    ck_assert_int_eq(r.status, 0);
    run_free(&r);
    run(&r, "db", "get", db, "t\\x00ool", NULL);
    ck_assert_str_eq(r.out, "v\\x0a1\n");
    run_free(&r);
    run(&r, "db", "scan", db, "--from", "b", "--to", "c", NULL);
    ck_assert_int_eq(r.status, 0);
    assert_printable(r.out, r.out_len);
    size_t bin_live = 0;
    for (uint32_t j = NKEYS; j < NMODEL; j++)
        bin_live += (size_t)model[j].live;
    ck_assert_uint_eq(count_lines(r.out), bin_live);
    run_free(&r);
    run(&r, "db", "scan", db, "--limit", "5", NULL);
    ck_assert_uint_eq(count_lines(r.out), 5);
    run_free(&r);
    run(&r, "db", "delete", db, "t\\x00ool", NULL);
    ck_assert_int_eq(r.status, 0);
    run_free(&r);
    run(&r, "db", "get", db, "t\\x00ool", NULL);
    ck_assert_int_eq(r.status, 1);
    run_free(&r);
    run(&r, "db", "stats", db, NULL);
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "kv_gets_total"));
    run_free(&r);
    run(&r, "db", "compact", db, NULL);
    ck_assert_int_eq(r.status, 0);
    run_free(&r);
    run(&r, "db", "verify", db, NULL);
    ck_assert_msg(r.status == 0, "%s", r.err);
    run_free(&r);
}
END_TEST

/* kv_approximate_sizes of one range of the database in p (limit NULL: no
 * bound), opened through the API. */
static uint64_t api_size(const char *p, const void *from, size_t flen, const void *to, size_t tlen)
{
    kv_db *db = open_db(p, NULL);
    const void *s[1] = {from}, *l[1] = {to};
    size_t sl[1] = {flen}, ll[1] = {tlen};
    uint64_t out[1];
    ck_assert_int_eq(kv_approximate_sizes(db, 1, s, sl, l, ll, out), KV_OK);
    close_db(db);
    return out[0];
}

START_TEST(db_property_and_size_agree_with_the_api)
{
    char db[600];
    build_db(db, sizeof db);
    size_t n;
    kv_table_stats *ts = tables_of(db, &n);
    uint64_t per_level[7] = {0}, bytes = 0;
    for (size_t i = 0; i < n; i++) {
        per_level[ts[i].level]++;
        bytes += ts[i].file_size;
    }
    struct run r;
    for (int l = 0; l < 7; l++) {
        char name[48], want[32];
        snprintf(name, sizeof name, "kv.num-files-at-level%d", l);
        snprintf(want, sizeof want, "%llu\n", (unsigned long long)per_level[l]);
        run(&r, "db", "property", db, name, NULL);
        ck_assert_msg(r.status == 0, "%s", r.err);
        ck_assert_str_eq(r.out, want);
        run_free(&r);
    }
    /* Every table under its number, the binary keys escaped. */
    run(&r, "db", "property", db, "kv.sstables", NULL);
    ck_assert_msg(r.status == 0, "%s", r.err);
    assert_printable(r.out, r.out_len);
    ck_assert_uint_eq(count_lines(r.out), 7 + n);
    for (size_t i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "%06llu.sst %llu bytes", (unsigned long long)ts[i].number,
                 (unsigned long long)ts[i].file_size);
        ck_assert_msg(strstr(r.out, name) != NULL, "%s not in\n%s", name, r.out);
    }
    run_free(&r);
    run(&r, "db", "property", db, "kv.stats", NULL);
    ck_assert_msg(r.status == 0, "%s", r.err);
    char total[32];
    snprintf(total, sizeof total, "\ntotal %6zu ", n);
    ck_assert_msg(strstr(r.out, total) != NULL, "%s", r.out);
    run_free(&r);
    run(&r, "db", "property", db, "kv.approximate-memory-usage", NULL);
    ck_assert_int_eq(r.status, 0);
    ck_assert(r.out[0] >= '1' && r.out[0] <= '9');
    run_free(&r);
    /* Not a property: exit 1, one line naming it. */
    run(&r, "db", "property", db, "kv.no-such", NULL);
    ck_assert_int_eq(r.status, 1);
    ck_assert_uint_eq(count_lines(r.err), 1);
    ck_assert_ptr_nonnull(strstr(r.err, "KV_NOTFOUND"));
    ck_assert_ptr_nonnull(strstr(r.err, "kv.no-such"));
    ck_assert_uint_eq(r.out_len, 0);
    run_free(&r);

    /* db size: every table's bytes for the whole range; none for an empty
     * one; the API's figure for a range in the middle and for one of the
     * binary keys, given escaped. */
    char want[32];
    snprintf(want, sizeof want, "%llu\n", (unsigned long long)bytes);
    run(&r, "db", "size", db, NULL);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_str_eq(r.out, want);
    run_free(&r);
    run(&r, "db", "size", db, "--from", "key", "--to", "", NULL);
    ck_assert_str_eq(r.out, "0\n");
    run_free(&r);
    snprintf(want, sizeof want, "%llu\n",
             (unsigned long long)api_size(db, "key001000", 9, "key004000", 9));
    ck_assert_str_ne(want, "0\n");
    run(&r, "db", "size", db, "--from", "key001000", "--to", "key004000", NULL);
    ck_assert_str_eq(r.out, want);
    run_free(&r);
    snprintf(want, sizeof want, "%llu\n", (unsigned long long)api_size(db, "b\0", 2, NULL, 0));
    run(&r, "db", "size", db, "--from", "b\\x00", NULL);
    ck_assert_str_eq(r.out, want);
    run_free(&r);
    kv_free(ts);
}
END_TEST

START_TEST(db_explain_shows_filters_gating_reads)
{
    char db[600];
    build_db(db, sizeof db);
    size_t nt;
    kv_table_stats *ts = tables_of(db, &nt);
    struct run r;

    /* A present key in a deeper table: found, with its value. */
    uint32_t i = 3;
    ck_assert(model[i].live);
    run(&r, "db", "explain", db, (char *)model[i].k, NULL);
    ck_assert_msg(r.status == 0, "%s", r.err);
    char v[600], want[700];
    escape(v, sizeof v, model[i].v, model[i].vlen);
    snprintf(want, sizeof want, "result: found %s\n", v);
    ck_assert_msg(strstr(r.out, want) != NULL, "%s", r.out);
    /* The memtable is empty: its filter rules every key out. */
    ck_assert_ptr_nonnull(strstr(r.out, "1. memtable: filter negative: absent"));
    ck_assert_ptr_nonnull(strstr(r.out, ": found, seq "));
    run_free(&r);

    /* Absent keys: one step per candidate table, a "no" costs no read. */
    size_t negatives = 0;
    for (uint32_t a = 0; a < 20; a++) {
        uint8_t k[16];
        size_t klen = absent_key(a * 149, k);
        run(&r, "db", "explain", db, (char *)k, NULL);
        ck_assert_int_eq(r.status, 0);
        ck_assert_ptr_nonnull(strstr(r.out, "result: not found\n"));
        size_t steps = 0;
        for (char *line = strtok(r.out, "\n"); line; line = strtok(NULL, "\n")) {
            if (!strstr(line, ". table "))
                continue;
            steps++;
            if (strstr(line, "filter negative")) {
                negatives++;
                ck_assert_msg(strstr(line, ": no block read: absent") != NULL, "%s", line);
            } else {
                ck_assert_msg(strstr(line, "filter maybe: data block at offset ") != NULL &&
                                  strstr(line, "absent (a false positive)") != NULL,
                              "%s", line);
            }
        }
        ck_assert_uint_eq(steps, candidates(ts, nt, k, klen));
        run_free(&r);
    }
    ck_assert_uint_gt(negatives, 20);

    /* A deleted key: the tombstone decides. */
    run(&r, "db", "explain", db, (char *)model[14].k, NULL);
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "deleted (tombstone)"));
    ck_assert_ptr_nonnull(strstr(r.out, "result: not found (deleted)"));
    run_free(&r);
    kv_free(ts);
}
END_TEST

/* db explain DIR --from K --to K: one range query (kv_explain_seek) over a
 * database whose tables carry range filters: per table both filters'
 * answers, a skipped table reads nothing, the first key in range; an open
 * bound asks no range filter; a KEY with --from, or neither, is bad usage. */
START_TEST(db_explain_range_shows_filters_gating_seeks)
{
    char db[600];
    test_path(db, sizeof db, "db");
    kv_options o;
    kv_options_init(&o);
    o.write_buffer_size = 64 << 10;
    o.target_file_size = 64 << 10;
    o.range_filter_bits = 16;
    o.compression = KV_COMPRESSION_NONE;
    kv_db *h = open_db(db, &o);
    char k[32], lo[32], hi[32];
    for (uint32_t i = 0; i < 3000; i++) { /* keys 64 apart, in a shuffled order */
        uint32_t j = (i * 1237u) % 3000u;
        snprintf(k, sizeof k, "%016u", 64 * j);
        put_kv(h, k, 16, "value-of-some-length-to-fill-tables", 35);
    }
    close_db(h);
    struct run r;
    snprintf(lo, sizeof lo, "%016u", 64 * 1000 + 1);
    snprintf(hi, sizeof hi, "%016u", 64 * 1000 + 17);
    run(&r, "db", "explain", db, "--from", lo, "--to", hi, NULL);
    ck_assert_msg(r.status == 0, "%s", r.err);
    char want[200];
    snprintf(want, sizeof want, "seek [\"%s\", \"%s\"): reading at sequence ", lo, hi);
    ck_assert_msg(strncmp(r.out, want, strlen(want)) == 0, "%s", r.out);
    ck_assert_msg(strstr(r.out, "result: no key in the range\n"), "%s", r.out);
    ck_assert_msg(strstr(r.out, "summary: "), "%s", r.out);
    size_t tables = 0, skipped = 0;
    for (char *line = strtok(r.out, "\n"); line; line = strtok(NULL, "\n")) {
        if (!strstr(line, ". table "))
            continue;
        tables++;
        ck_assert_msg(strstr(line, ": prefix filter not asked, range filter "), "%s", line);
        ck_assert_msg(strstr(line, "(expected FPR "), "%s", line);
        if (strstr(line, "range filter negative")) {
            skipped++;
            ck_assert_msg(strstr(line, ": skipped, nothing read: absent"), "%s", line);
        } else {
            ck_assert_msg(strstr(line, "range filter maybe") && strstr(line, ": absent"), "%s",
                          line);
        }
    }
    ck_assert_uint_gt(tables, 0);
    ck_assert_uint_gt(skipped, 0); /* a range filter of 16 bits per key, a width of 16 */
    ck_assert_uint_le(skipped, tables);
    run_free(&r);

    /* --prefix_len 8: the bounds share 8 bytes, but these tables were written
     * without prefixes: no prefix filter is asked */
    run(&r, "db", "explain", db, "--from", lo, "--to", hi, "--prefix_len", "8", NULL);
    ck_assert_msg(r.status == 0 && strstr(r.out, ", prefix_len 8\n") &&
                      strstr(r.out, ": prefix filter not asked, range filter ") &&
                      !strstr(r.out, ": prefix filter maybe") &&
                      !strstr(r.out, ": prefix filter negative"),
                  "%s%s", r.out, r.err);
    run_free(&r);

    /* a range holding key 64000 and more */
    snprintf(lo, sizeof lo, "%016u", 64 * 1000);
    snprintf(want, sizeof want, "result: first key \"%s\"\n", lo);
    run(&r, "db", "explain", db, "--from", lo, "--to", hi, NULL);
    ck_assert_msg(r.status == 0 && strstr(r.out, want), "%s%s", r.out, r.err);
    run_free(&r);
    /* one bound: no range filter asked; as hex */
    run(&r, "db", "explain", db, "--hex", "--from", "0x30303030303030303030303036343030", NULL);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strstr(r.out, "seek [0x30303030303030303030303036343030, past the last key)"),
                  "%s", r.out);
    ck_assert_msg(strstr(r.out, "result: first key 0x30303030303030303030303036343030\n"), "%s",
                  r.out);
    ck_assert_msg(!strstr(r.out, "range filter negative") && !strstr(r.out, "range filter maybe"),
                  "%s", r.out);
    run_free(&r);
    run(&r, "db", "explain", db, "--to", "0", NULL);
    ck_assert_msg(r.status == 0 && strstr(r.out, "seek [the first key, \"0\")") &&
                      strstr(r.out, "result: no key in the range"),
                  "%s%s", r.out, r.err);
    run_free(&r);
    /* lower above upper: kv's EINVAL */
    run(&r, "db", "explain", db, "--from", "b", "--to", "a", NULL);
    ck_assert_int_eq(r.status, 1);
    ck_assert_uint_eq(count_lines(r.err), 1);
    run_free(&r);

    /* bad usage: a KEY and bounds, neither, --prefix_len with a KEY, a bad count */
    char *const bad[][6] = {
        {"db", "explain", db, "k", "--from", "a"},
        {"db", "explain", db, NULL},
        {"db", "explain", db, "k", "--prefix_len", "4"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *args[8] = {(char *)KVTOOL_PATH};
        for (int j = 0; j < 6 && bad[i][j]; j++)
            args[j + 1] = bad[i][j];
        run_argv(&r, args);
        ck_assert_msg(r.status == 2, "case %zu: exit %d: %s", i, r.status, r.err);
        ck_assert_uint_eq(count_lines(r.err), 1);
        ck_assert_uint_eq(r.out_len, 0);
        run_free(&r);
    }
    run(&r, "db", "explain", db, "--from", "a", "--prefix_len", "x", NULL);
    ck_assert_int_eq(r.status, 1);
    ck_assert_ptr_nonnull(strstr(r.err, "--prefix_len"));
    run_free(&r);
}
END_TEST

START_TEST(help_on_every_command_and_bad_usage)
{
    static const char *const cmds[][2] = {
        {"sst", "dump"}, {"sst", "props"}, {"sst", "verify"}, {"db", "explain"},
        {"db", "info"},  {"db", "verify"}, {"db", "get"},     {"db", "put"},
        {"db", "delete"}, {"db", "scan"},  {"db", "stats"},   {"db", "compact"},
        {"db", "property"}, {"db", "size"},
        {"db", "repair"}, {"db", "destroy"}, {"blob", "dump"}, {"blob", "verify"},
    };
    struct run r;
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        run(&r, cmds[i][0], cmds[i][1], "--help", NULL);
        ck_assert_int_eq(r.status, 0);
        char want[64];
        snprintf(want, sizeof want, "usage: kvtool %s %s", cmds[i][0], cmds[i][1]);
        ck_assert_msg(strstr(r.out, want) != NULL, "%s --help: %s", cmds[i][1], r.out);
        ck_assert_uint_eq(r.err_len, 0);
        run_free(&r);
    }
    run(&r, "--help", NULL);
    ck_assert_int_eq(r.status, 0);
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char want[64];
        snprintf(want, sizeof want, "kvtool %s %s ", cmds[i][0], cmds[i][1]);
        ck_assert_ptr_nonnull(strstr(r.out, want));
    }
    run_free(&r);

    /* Bad usage: exit 2, one line on stderr. */
    char *const bad[][5] = {
        {"db", "frobnicate", NULL},
        {"table", "dump", "x", NULL},
        {"db", "get", test_dir, NULL},
        {"db", "scan", test_dir, "--bogus", NULL},
        {"sst", "props", "f", "--limit", NULL},
        {"db", "get", test_dir, "k", "extra"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *args[8] = {(char *)KVTOOL_PATH};
        for (int j = 0; j < 5 && bad[i][j]; j++)
            args[j + 1] = bad[i][j];
        run_argv(&r, args);
        ck_assert_msg(r.status == 2, "case %zu: exit %d", i, r.status);
        ck_assert_uint_eq(count_lines(r.err), 1);
        ck_assert_uint_eq(r.out_len, 0);
        run_free(&r);
    }
    run(&r, NULL);
    ck_assert_int_eq(r.status, 2);
    run_free(&r);

    /* Failures: exit 1, one line naming the file or directory. */
    char missing[600];
    test_path(missing, sizeof missing, "nothing");
    run(&r, "db", "info", missing, NULL);
    ck_assert_int_eq(r.status, 1);
    ck_assert_uint_eq(count_lines(r.err), 1);
    ck_assert_ptr_nonnull(strstr(r.err, "no database"));
    run_free(&r);
    run(&r, "sst", "dump", missing, NULL);
    ck_assert_int_eq(r.status, 1);
    ck_assert_ptr_nonnull(strstr(r.err, missing));
    run_free(&r);
    /* A directory that is not a database is left untouched. */
    run(&r, "db", "get", test_dir, "k", NULL);
    ck_assert_int_eq(r.status, 1);
    run_free(&r);
    char lock[600];
    test_path(lock, sizeof lock, "LOCK");
    struct stat st;
    ck_assert_int_ne(stat(lock, &st), 0);
}
END_TEST

/* The read commands work on a database a writer holds open (a read-only
 * handle, or kv_inspect under a pin of the manifest); those that write are
 * refused. */
START_TEST(open_database_is_busy)
{
    char db[600];
    test_path(db, sizeof db, "db");
    kv_db *h = open_db(db, NULL);
    ck_assert_int_eq(kv_put(h, "k", 1, "v", 1), KV_OK);
    /* Commands that read without opening, and commands that open read-only. */
    static const char *const cmds[][2] = {
        {"info", NULL}, {"verify", NULL}, {"scan", NULL}, {"get", "k"}, {"explain", "k"},
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        struct run r;
        run(&r, "db", cmds[i][0], db, cmds[i][1], NULL);
        ck_assert_msg(r.status == 0, "db %s: %s", cmds[i][0], r.err);
        run_free(&r);
    }
    struct run r;
    run(&r, "db", "put", db, "k", "w", NULL);
    ck_assert_int_eq(r.status, 1);
    ck_assert_msg(strstr(r.err, "open elsewhere") != NULL, "db put: %s", r.err);
    ck_assert_uint_eq(count_lines(r.err), 1);
    run_free(&r);
    kv_dir_info *info = (kv_dir_info *)test_dir;
    ck_assert_int_eq(kv_inspect(db, &info), KV_OK);
    kv_inspect_free(info);
    close_db(h);
}
END_TEST

/* db checkpoint on a live database (the writer keeps its handle) makes an
 * openable copy holding what was written; db verify passes on a database
 * that holds an ingested table (its filter under the writer's own seed). */
START_TEST(checkpoint_and_verify_with_ingest)
{
    char db[600], ck[700], sst[700];
    test_path(db, sizeof db, "db");
    snprintf(ck, sizeof ck, "%s.ck", db);
    snprintf(sst, sizeof sst, "%s.in.sst", db);
    kv_db *h = open_db(db, NULL);
    char k[16], v[16];
    for (int i = 0; i < 500; i++) {
        snprintf(k, sizeof k, "a%05d", i);
        snprintf(v, sizeof v, "v%d", i);
        ck_assert_int_eq(kv_put(h, k, strlen(k), v, strlen(v)), KV_OK);
    }
    ck_assert_int_eq(kv_flush(h), KV_OK);
    ck_assert_int_eq(kv_put(h, "a00007", 6, "new", 3), KV_OK); /* in the log only */
    kv_table_writer *w;
    ck_assert_int_eq(kv_table_writer_open(sst, NULL, &w), KV_OK);
    for (int i = 0; i < 300; i++) {
        snprintf(k, sizeof k, "b%05d", i);
        ck_assert_int_eq(kv_table_writer_put(w, k, strlen(k), "ingested", 8), KV_OK);
    }
    ck_assert_int_eq(kv_table_writer_finish(w), KV_OK);
    const char *paths[] = {sst};
    ck_assert_int_eq(kv_ingest(h, paths, 1, 1), KV_OK);

    struct run r;
    run(&r, "db", "checkpoint", db, ck, NULL);
    ck_assert_msg(r.status == 0, "db checkpoint: %d: %s", r.status, r.err);
    run_free(&r);
    run(&r, "db", "checkpoint", db, ck, NULL); /* it exists now */
    ck_assert_int_ne(r.status, 0);
    ck_assert_uint_eq(count_lines(r.err), 1);
    run_free(&r);
    run(&r, "db", "verify", db, NULL);
    ck_assert_msg(r.status == 0, "db verify (live, ingested table): %d: %s", r.status, r.err);
    run_free(&r);
    close_db(h);
    run(&r, "db", "verify", ck, NULL);
    ck_assert_msg(r.status == 0, "db verify (checkpoint): %d: %s", r.status, r.err);
    run_free(&r);

    kv_db *c = open_db(ck, NULL);
    char got[32];
    size_t n;
    ck_assert_int_eq(kv_get_into(c, NULL, "a00007", 6, got, sizeof got, &n), KV_OK);
    ck_assert_int_eq((int)n, 3);
    ck_assert_int_eq(memcmp(got, "new", 3), 0);
    ck_assert_int_eq(kv_get_into(c, NULL, "a00499", 6, got, sizeof got, &n), KV_OK);
    ck_assert_int_eq(kv_get_into(c, NULL, "b00123", 6, got, sizeof got, &n), KV_OK);
    ck_assert_int_eq((int)n, 8);
    close_db(c);
}
END_TEST

/* One line on stderr holding every string given (NULL-terminated). */
static void expect_err(const struct run *r, int status, ...)
{
    ck_assert_msg(r->status == status, "exit %d, not %d: %s", r->status, status, r->err);
    ck_assert_msg(count_lines(r->err) == 1, "not one line: %s", r->err);
    va_list ap;
    va_start(ap, status);
    const char *want;
    while ((want = va_arg(ap, const char *)) != NULL)
        ck_assert_msg(strstr(r->err, want) != NULL, "\"%s\" lacks \"%s\"", r->err, want);
    va_end(ap);
}

/* "invalid argument" alone tells nothing: a failure names the path, kv's
 * code and kv's text (the file at fault and why); bad usage names the
 * argument. */
START_TEST(messages_name_what_is_wrong)
{
    char db[600], lock[700], file[600];
    test_path(db, sizeof db, "db");
    kv_db *h = open_db(db, NULL);
    ck_assert_int_eq(kv_put(h, "k", 1, "v", 1), KV_OK);
    close_db(h);
    /* The database cannot be opened: its LOCK is a directory. */
    snprintf(lock, sizeof lock, "%s/LOCK", db);
    ck_assert_int_eq(unlink(lock), 0);
    ck_assert_int_eq(mkdir(lock, 0755), 0);
    /* (The read commands but info take no lock: a read-only handle.) */
    static const char *const cmds[][3] = {{"put", "k", "v"},
                                          {"delete", "k", NULL},
                                          {"compact", NULL, NULL},
                                          {"info", NULL, NULL}};
    struct run r;
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        run(&r, "db", cmds[i][0], db, cmds[i][1], cmds[i][2], NULL);
        expect_err(&r, 1, db, "KV_EIO", "/LOCK: open: Is a directory", NULL);
        run_free(&r);
    }
    ck_assert_int_eq(rmdir(lock), 0);

    /* kv's KV_EINVAL says which argument and why. */
    test_path(file, sizeof file, "a-file");
    FILE *f = fopen(file, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    run(&r, "db", "put", file, "k", "v", "--create", NULL);
    expect_err(&r, 1, file, "KV_EINVAL", "not a directory", NULL);
    run_free(&r);
    /* (A key over KV_MAX_KEY_SIZE, 512 KiB, cannot reach kvtool: Linux
     * passes no argument longer than 128 KiB.) */

    /* Bad usage: which argument is missing or too many. */
    run(&r, "db", "get", db, NULL);
    expect_err(&r, 2, "missing KEY", NULL);
    run_free(&r);
    run(&r, "db", "put", db, "k", NULL);
    expect_err(&r, 2, "missing VALUE", NULL);
    run_free(&r);
    run(&r, "sst", "dump", NULL);
    expect_err(&r, 2, "missing FILE", NULL);
    run_free(&r);
    run(&r, "db", "get", db, "k", "extra", NULL);
    expect_err(&r, 2, "'extra'", NULL);
    run_free(&r);
}
END_TEST

/* The names in directory d, sorted and joined by spaces, into out. */
static void names_in(const char *d, char *out, size_t cap)
{
    struct dirent **list;
    int n = scandir(d, &list, NULL, alphasort);
    ck_assert_int_ge(n, 0);
    size_t used = 0;
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        if (list[i]->d_name[0] != '.')
            used += (size_t)snprintf(out + used, cap > used ? cap - used : 0, "%s%s",
                                     used ? " " : "", list[i]->d_name);
        free(list[i]);
    }
    free(list);
    ck_assert_uint_lt(used, cap);
}

START_TEST(a_look_at_a_directory_that_is_no_database_creates_nothing)
{
    /* A directory with a file named MANIFEST that is not a manifest (text,
     * or LMDB's size of garbage): every read command refuses it, naming
     * the file, and leaves the directory as it was (no LOCK, no
     * MANIFEST-lock, which the open of the manifest made before). */
    static const char *const contents[] = {"hello\n", NULL};
    char d[600], m[700], before[200], after[200];
    test_path(d, sizeof d, "notadb");
    ck_assert_int_eq(mkdir(d, 0755), 0);
    snprintf(m, sizeof m, "%s/MANIFEST", d);
    static const char *const cmds[][2] = {{"info", NULL},
                                          {"verify", NULL},
                                          {"get", "k"},
                                          {"scan", NULL},
                                          {"stats", NULL}};
    for (int c = 0; c < 2; c++) {
        FILE *f = fopen(m, "w");
        ck_assert_ptr_nonnull(f);
        if (contents[c]) {
            fputs(contents[c], f);
        } else {
            for (int i = 0; i < 8192; i++)
                fputc((i * 7919) & 0xFF, f);
        }
        fclose(f);
        names_in(d, before, sizeof before);
        ck_assert_str_eq(before, "MANIFEST");
        for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
            struct run r;
            run(&r, "db", cmds[i][0], d, cmds[i][1], NULL);
            expect_err(&r, 1, "MANIFEST", NULL);
            run_free(&r);
            names_in(d, after, sizeof after);
            ck_assert_msg(strcmp(after, before) == 0, "db %s left: %s", cmds[i][0], after);
        }
    }
}
END_TEST

/* ---- the APIs ------------------------------------------------------------------------ */

START_TEST(explain_agrees_with_get)
{
    char db[600];
    build_db(db, sizeof db);
    size_t nt;
    kv_table_stats *ts = tables_of(db, &nt);
    kv_options o;
    kv_options_init(&o);
    o.idle_compaction_ms = 0; /* the nt tables stay: no idle merge of level 0 */
    kv_db *h = open_db(db, &o);
    /* A few writes left in the memtable. */
    for (uint32_t i = 1; i < NMODEL; i += 97) {
        struct entry *e = &model[i];
        e->vlen = (size_t)sprintf((char *)e->v, "mem %u", i);
        e->live = 1;
        ck_assert_int_eq(kv_put(h, e->k, e->klen, e->v, e->vlen), KV_OK);
    }
    ck_assert_int_eq(kv_delete(h, model[2].k, model[2].klen), KV_OK);
    model[2].live = 0;

    struct kv_stats s0, s1;
    ck_assert_int_eq(kv_stats(h, &s0), KV_OK);
    uint64_t probed = 0, explains = 0;
    for (uint32_t i = 0; i < NMODEL; i++) {
        struct entry *e = &model[i];
        kv_explain *x;
        ck_assert_int_eq(kv_explain_get(h, e->k, e->klen, &x), KV_OK);
        explains++;
        void *v = NULL;
        size_t vlen = 0;
        int rc = kv_get(h, e->k, e->klen, &v, &vlen);
        ck_assert_int_eq(x->result, rc);
        ck_assert_int_eq(rc, e->live ? KV_OK : KV_NOTFOUND);
        if (rc == KV_OK) {
            ck_assert_uint_eq(x->value_len, vlen);
            ck_assert_ptr_nonnull(x->value);
            ck_assert(vlen == 0 || memcmp(x->value, v, vlen) == 0);
            ck_assert_int_eq(x->steps[x->nsteps - 1].outcome, KV_EXPLAIN_FOUND);
        } else {
            ck_assert_ptr_null(x->value);
            ck_assert_int_eq(x->steps[x->nsteps - 1].outcome, KV_EXPLAIN_DELETED);
        }
        kv_free(v);
        ck_assert_int_eq(x->steps[0].where, KV_EXPLAIN_MEMTABLE);
        ck_assert_uint_eq(x->live_tables, nt);
        /* Every step before the last found nothing; table steps carry
         * their table's range, which holds the key. */
        for (size_t j = 0; j < x->nsteps; j++) {
            const kv_explain_step *st = &x->steps[j];
            if (j + 1 < x->nsteps)
                ck_assert_int_eq(st->outcome, KV_EXPLAIN_ABSENT);
            if (st->where != KV_EXPLAIN_TABLE)
                continue;
            probed++;
            ck_assert(key_cmp(e->k, e->klen, st->smallest, st->smallest_len) >= 0 &&
                      key_cmp(e->k, e->klen, st->largest, st->largest_len) <= 0);
            if (st->outcome == KV_EXPLAIN_FOUND || st->outcome == KV_EXPLAIN_DELETED) {
                ck_assert_int_eq(st->filter, KV_EXPLAIN_FILTER_MAYBE);
                ck_assert_int_ne(st->block, KV_EXPLAIN_BLOCK_NONE);
                ck_assert_uint_gt(st->block_bytes, 0);
                ck_assert_int_eq(st->false_positive, 0);
            }
        }
        kv_free(x);
    }
    ck_assert_int_eq(kv_stats(h, &s1), KV_OK);
    /* Explains count as gets (and every kv_get beside them too). */
    ck_assert_uint_eq(s1.gets - s0.gets, 2 * explains);

    /* Absent keys: one step per candidate table, each a filter negative
     * (no block) or a false positive (one block looked at). */
    uint64_t negatives = 0, fps = 0;
    for (uint32_t a = 0; a < 2000; a++) {
        uint8_t k[16];
        size_t klen = absent_key(a * 7919u, k);
        kv_explain *x;
        ck_assert_int_eq(kv_explain_get(h, k, klen, &x), KV_OK);
        ck_assert_int_eq(x->result, KV_NOTFOUND);
        ck_assert_ptr_null(x->value);
        size_t tables = 0;
        for (size_t j = 0; j < x->nsteps; j++) {
            const kv_explain_step *st = &x->steps[j];
            ck_assert_int_eq(st->outcome, KV_EXPLAIN_ABSENT);
            if (st->where != KV_EXPLAIN_TABLE)
                continue;
            tables++;
            if (st->filter == KV_EXPLAIN_FILTER_NEGATIVE) {
                negatives++;
                ck_assert_int_eq(st->block, KV_EXPLAIN_BLOCK_NONE);
                ck_assert_uint_eq(st->block_bytes, 0);
                ck_assert_int_eq(st->false_positive, 0);
            } else {
                fps++;
                ck_assert_int_eq(st->filter, KV_EXPLAIN_FILTER_MAYBE);
                ck_assert_int_eq(st->false_positive, 1);
                ck_assert_int_ne(st->block, KV_EXPLAIN_BLOCK_NONE);
                ck_assert_uint_gt(st->block_bytes, 0);
            }
        }
        ck_assert_uint_eq(tables, candidates(ts, nt, k, klen));
        kv_free(x);
    }
    /* About 1% false positives at 10 bits per key. */
    ck_assert_uint_gt(negatives, 1000);
    ck_assert_uint_lt(fps * 20, negatives);
    ck_assert_uint_gt(probed, 0);

    /* Bad arguments. */
    kv_explain *x = (kv_explain *)test_dir;
    ck_assert_int_eq(kv_explain_get(NULL, "k", 1, &x), KV_EINVAL);
    ck_assert_ptr_null(x);
    ck_assert_int_eq(kv_explain_get(h, "k", 1, NULL), KV_EINVAL);
    ck_assert_int_eq(kv_explain_get(h, NULL, 1, &x), KV_EINVAL);
    ck_assert_int_eq(kv_explain_get(h, "k", KV_MAX_KEY_SIZE + 1, &x), KV_EINVAL);
    /* The empty key, given as NULL. */
    ck_assert_int_eq(kv_explain_get(h, NULL, 0, &x), KV_OK);
    ck_assert_int_eq(x->result, KV_NOTFOUND);
    kv_free(x);
    close_db(h);
    kv_free(ts);
}
END_TEST

START_TEST(inspect_reads_without_recovery)
{
    char db[600];
    build_db(db, sizeof db);
    size_t nt;
    kv_table_stats *ts = tables_of(db, &nt);
    /* Unflushed writes (in the log) and an orphan table. */
    kv_db *h = open_db(db, NULL);
    ck_assert_int_eq(kv_put(h, "in the log", 10, "v", 1), KV_OK);
    struct kv_stats s;
    ck_assert_int_eq(kv_stats(h, &s), KV_OK);
    close_db(h);
    char orphan[700];
    table_file(orphan, sizeof orphan, db, 888888);
    FILE *f = fopen(orphan, "wb");
    ck_assert_ptr_nonnull(f);
    fclose(f);

    kv_dir_info *info;
    ck_assert_int_eq(kv_inspect(db, &info), KV_OK);
    ck_assert_uint_eq(info->format_version, 1);
    ck_assert_uint_eq(info->ntables, nt);
    ck_assert_uint_lt(info->last_seq, s.last_sequence); /* the put is only in the log */
    for (size_t i = 0; i < nt; i++) {
        const kv_dir_table *t = &info->tables[i];
        ck_assert_uint_eq(t->number, ts[i].number); /* the same search order */
        ck_assert_uint_eq(t->level, ts[i].level);
        ck_assert_uint_eq(t->entries, ts[i].entries);
        ck_assert_uint_eq(t->file_size, ts[i].file_size);
        ck_assert_int_eq(t->present, 1);
        ck_assert_uint_eq(t->disk_size, t->file_size);
        ck_assert_uint_eq(t->filter_keys, ts[i].filter_keys);
        ck_assert_int_eq(key_cmp(t->smallest, t->smallest_len, ts[i].smallest,
                                 ts[i].smallest_len), 0);
        ck_assert_int_eq(key_cmp(t->largest, t->largest_len, ts[i].largest, ts[i].largest_len),
                         0);
        ck_assert_uint_lt(t->number, info->next_file);
    }
    size_t kinds[8] = {0};
    int orphan_seen = 0;
    for (size_t i = 0; i < info->nfiles; i++) {
        const kv_dir_file *df = &info->files[i];
        ck_assert_int_ge(df->kind, 0);
        ck_assert_int_lt(df->kind, 8);
        kinds[df->kind]++;
        if (i > 0)
            ck_assert_int_lt(strcmp(info->files[i - 1].name, df->name), 0);
        if (df->kind == KV_FILE_ORPHAN) {
            ck_assert_str_eq(df->name, "888888.sst");
            ck_assert_uint_eq(df->number, 888888);
            orphan_seen = 1;
        }
        if (df->kind == KV_FILE_LOG)
            ck_assert_uint_ge(df->number, info->log_number);
    }
    ck_assert(orphan_seen);
    ck_assert_uint_eq(kinds[KV_FILE_TABLE], nt);
    ck_assert_uint_ge(kinds[KV_FILE_LOG], 1);
    ck_assert_uint_eq(kinds[KV_FILE_MANIFEST], 2);
    ck_assert_uint_eq(kinds[KV_FILE_LOCK], 1);
    /* The lock is held until kv_inspect_free. */
    kv_db *busy = (kv_db *)test_dir;
    ck_assert_int_eq(kv_open(db, NULL, &busy), KV_EBUSY);
    ck_assert_ptr_null(busy);
    kv_dir_info *again = (kv_dir_info *)test_dir;
    ck_assert_int_eq(kv_inspect(db, &again), KV_OK); /* under a pin, beside the lock */
    kv_inspect_free(again);
    kv_inspect_free(info);
    kv_inspect_free(NULL);
    struct stat st;
    ck_assert_int_eq(stat(orphan, &st), 0); /* nothing was deleted */

    /* Then an open recovers: the orphan goes, the logged write is there. */
    h = open_db(db, NULL);
    void *v;
    size_t vlen;
    ck_assert_int_eq(kv_get(h, "in the log", 10, &v, &vlen), KV_OK);
    kv_free(v);
    close_db(h);
    ck_assert_int_ne(stat(orphan, &st), 0);

    /* Not a database: KV_NOTFOUND, and no LOCK is left behind. */
    info = (kv_dir_info *)test_dir;
    ck_assert_int_eq(kv_inspect(test_dir, &info), KV_NOTFOUND);
    ck_assert_ptr_null(info);
    char lock[600], none[600];
    test_path(lock, sizeof lock, "LOCK");
    ck_assert_int_ne(stat(lock, &st), 0);
    test_path(none, sizeof none, "none");
    ck_assert_int_eq(kv_inspect(none, &info), KV_NOTFOUND);
    ck_assert_int_eq(kv_inspect(NULL, &info), KV_EINVAL);
    ck_assert_int_eq(kv_inspect(db, NULL), KV_EINVAL);
    kv_free(ts);
}
END_TEST

/* ---- forged counts behind valid checksums (issue 20) ------------------------------- */

static uint64_t get64le(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void put64le(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Rewrites a block's checksum (doc/sstable_format.md "Block trailer": XXH3
 * of the payload and the compression byte) after its payload changed. */
static void reseal_block(uint8_t *f, uint64_t off, uint64_t size)
{
    put64le(f + off + size + 1, XXH3_64bits(f + off, size + 1));
}

/* One table whose filter claims `keys` keys (the filter encoding's count,
 * doc/filter_format.md offset 24, and the properties' filter_keys, offset
 * 72), and with `entries` != 0 the properties' entry count too, every
 * checksum recomputed and the file's size unchanged: the example,
 * which made kv_open and kvtool hang in the expected-FPR series. Now the
 * reader sees that the counts cannot be (the writer records the filter's own
 * count, and never hashes more keys than the table holds) and refuses the
 * table, at once, naming it; where they are consistent (entries forged
 * too), the open finishes at once. kvtool's db info, verify, get, stats and
 * sst props say what is wrong or answer, each within the child's alarm. */
static void forge_filter_count(const char *file, uint64_t keys, uint64_t entries)
{
    size_t n;
    uint8_t *f = (uint8_t *)slurp(file, &n);
    ck_assert_uint_gt(n, 72);
    uint8_t *t = f + n - 72;
    ck_assert(memcmp(t, "kvSSTbl1", 8) == 0);
    uint64_t poff = get64le(t + 32), plen = get64le(t + 40);
    uint64_t foff = get64le(t + 48), flen = get64le(t + 56);
    ck_assert_uint_gt(flen, 48);
    put64le(f + poff + 72, keys);
    if (entries)
        put64le(f + poff + 8, entries);
    reseal_block(f, poff, plen);
    put64le(f + foff + 24, keys);
    put64le(f + foff + flen - 8, XXH3_64bits(f + foff, flen - 8));
    reseal_block(f, foff, flen);
    FILE *o = fopen(file, "wb");
    ck_assert_ptr_nonnull(o);
    ck_assert_uint_eq(fwrite(f, 1, n, o), n);
    ck_assert_int_eq(fclose(o), 0);
    free(f);
}

START_TEST(forged_filter_count_is_refused_at_once)
{
    static const struct { uint64_t keys, entries; int refused; } cases[] = {
        {(uint64_t)1 << 62, 0, 1},                 /* both counts, as in the issue */
        {((uint64_t)1 << 53) + 1, 0, 1},
        {(uint64_t)1 << 62, (uint64_t)1 << 62, 0}, /* consistent with a forged entry count */
    };
    char db[600], pristine[600], file[700], name[32];
    test_path(pristine, sizeof pristine, "pristine");
    kv_db *h = open_db(pristine, NULL);
    for (int i = 0; i < 500; i++) {
        char k[16];
        int kl = snprintf(k, sizeof k, "key%05d", i);
        ck_assert_int_eq(kv_put(h, k, (size_t)kl, "value", 5), KV_OK);
    }
    ck_assert_int_eq(kv_flush(h), KV_OK);
    kv_table_stats *ts;
    size_t nt;
    ck_assert_int_eq(kv_table_stats_get(h, &ts, &nt), KV_OK);
    ck_assert_uint_eq(nt, 1);
    uint64_t number = ts[0].number;
    kv_free(ts);
    close_db(h);
    snprintf(name, sizeof name, "%06llu.sst", (unsigned long long)number);

    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        test_path(db, sizeof db, "db");
        char cmd[2000];
        snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", db, pristine, db);
        ck_assert_int_eq(system(cmd), 0);
        table_file(file, sizeof file, db, number);
        forge_filter_count(file, cases[c].keys, cases[c].entries);

        kv_db *d = NULL;
        int rc = kv_open(db, NULL, &d);
        if (cases[c].refused) {
            ck_assert_msg(rc == KV_ECORRUPT, "case %zu: kv_open = %s", c, kv_strerror(rc));
            ck_assert_msg(strstr(kv_error_text(), name) && strstr(kv_error_text(), "filter"),
                          "case %zu: error text '%s'", c, kv_error_text());
        } else {
            ck_assert_msg(rc == KV_OK, "case %zu: kv_open = %s: %s", c, kv_strerror(rc),
                          kv_error_text());
            void *v;
            size_t vl;
            ck_assert_int_eq(kv_get(d, "key00042", 8, &v, &vl), KV_OK);
            ck_assert(vl == 5 && memcmp(v, "value", 5) == 0);
            kv_free(v);
            ck_assert_int_eq(kv_get(d, "absent", 6, &v, &vl), KV_NOTFOUND);
            struct kv_stats st;
            ck_assert_int_eq(kv_stats(d, &st), KV_OK);
            close_db(d);
        }

        static const char *const cmds[][3] = {
            {"db", "info", NULL}, {"db", "verify", NULL}, {"db", "get", "key00042"},
            {"db", "stats", NULL}, {"sst", "props", NULL},
        };
        for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
            struct run r;
            int sst = strcmp(cmds[i][0], "sst") == 0;
            char *args[6] = {(char *)KVTOOL_PATH, (char *)cmds[i][0], (char *)cmds[i][1],
                             sst ? file : db, (char *)cmds[i][2], NULL};
            run_argv(&r, args);
            ck_assert_msg(r.status == 0 || r.status == 1, "case %zu: kvtool %s %s: status %d%s",
                          c, cmds[i][0], cmds[i][1], r.status,
                          r.status == 128 + SIGALRM ? " (hung: killed after 60 s)" : "");
            if (r.status != 0)
                ck_assert_msg(strstr(r.err, name) != NULL, "case %zu: kvtool %s %s: '%s'", c,
                              cmds[i][0], cmds[i][1], r.err);
            /* a refused table makes every command fail; sst props prints
             * the counts it read only when the reader took the table */
            ck_assert_int_eq(r.status != 0, cases[c].refused || strcmp(cmds[i][1], "verify") == 0);
            run_free(&r);
        }
    }
}
END_TEST

START_TEST(db_repair_and_destroy)
{
    char db[600], manifest[600], lost[600];
    test_path(db, sizeof db, "db");
    test_path(manifest, sizeof manifest, "db/MANIFEST");
    test_path(lost, sizeof lost, "db/lost");
    kv_db *h = open_db(db, NULL);
    ck_assert_int_eq(kv_put(h, "a", 1, "1", 1), KV_OK);
    ck_assert_int_eq(kv_put(h, "b", 1, "2", 1), KV_OK);
    ck_assert_int_eq(kv_flush(h), KV_OK);
    ck_assert_int_eq(kv_put(h, "a", 1, "3", 1), KV_OK); /* in the log only */
    ck_assert_int_eq(kv_delete(h, "b", 1), KV_OK);
    struct run r;
    /* Open: both refuse, and say why. */
    run(&r, "db", "repair", db, NULL);
    expect_err(&r, 1, db, "open elsewhere", NULL);
    run_free(&r);
    run(&r, "db", "destroy", db, NULL);
    expect_err(&r, 1, db, "open elsewhere", NULL);
    run_free(&r);
    close_db(h);

    ck_assert_int_eq(unlink(manifest), 0);
    /* Lost: the other commands say so, and what rebuilds it. */
    run(&r, "db", "get", db, "a", NULL);
    expect_err(&r, 1, db, "no MANIFEST beside table or log files", "kvtool db repair", NULL);
    run_free(&r);
    run(&r, "db", "repair", db, NULL);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_uint_eq(r.err_len, 0);
    ck_assert_ptr_nonnull(strstr(r.out, ".sst: readable (2 entries"));
    ck_assert_ptr_nonnull(strstr(r.out, ".log: replayed, 2 records"));
    ck_assert_ptr_nonnull(strstr(r.out, "2 records recovered; last sequence 4"));
    run_free(&r);
    run(&r, "db", "get", db, "a", NULL);
    ck_assert_int_eq(r.status, 0);
    ck_assert_str_eq(r.out, "3\n");
    run_free(&r);
    run(&r, "db", "get", db, "b", NULL);
    ck_assert_int_eq(r.status, 1);
    run_free(&r);

    /* A damaged table is moved aside, and the line says so. */
    char name[64] = "", rel[80], sst[600];
    DIR *d = opendir(db);
    ck_assert_ptr_nonnull(d);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        if (!name[0] && strstr(de->d_name, ".sst") && len < sizeof name)
            memcpy(name, de->d_name, len + 1);
    }
    closedir(d);
    ck_assert(name[0]);
    snprintf(rel, sizeof rel, "db/%s", name);
    test_path(sst, sizeof sst, rel);
    ck_assert_int_eq(truncate(sst, 10), 0);
    run(&r, "db", "repair", db, NULL);
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "moved to lost/"));
    run_free(&r);

    /* Destroy: kv's files go; lost/ stays, and with it the directory. */
    run(&r, "db", "destroy", db, NULL);
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "stays"));
    run_free(&r);
    struct stat st;
    ck_assert_int_eq(stat(lost, &st), 0);
    ck_assert_int_ne(stat(manifest, &st), 0);
}
END_TEST


/* ---- keyed databases: the secret never leaves the manifest ---------------------- */

/* The database's filter secret, read from its manifest (doc/manifest.md,
 * `filter_secret`: version, kind, 16 secret bytes, checksum). */
static void manifest_secret(const char *db, uint8_t secret[16])
{
    char p[700];
    snprintf(p, sizeof p, "%s/MANIFEST", db);
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    ck_assert_int_eq(mdb_env_create(&env), 0);
    ck_assert_int_eq(mdb_env_set_maxdbs(env, 4), 0);
    ck_assert_int_eq(mdb_env_open(env, p, MDB_NOSUBDIR | MDB_RDONLY, 0644), 0);
    ck_assert_int_eq(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
    ck_assert_int_eq(mdb_dbi_open(txn, "meta", 0, &dbi), 0);
    MDB_val k = {13, "filter_secret"}, v;
    ck_assert_int_eq(mdb_get(txn, dbi, &k, &v), 0);
    ck_assert_uint_eq(v.mv_size, 26);
    memcpy(secret, (const uint8_t *)v.mv_data + 2, 16);
    mdb_txn_abort(txn);
    mdb_env_close(env);
}

/* 1 when needle[0, n) occurs in hay[0, len). */
static int holds(const char *hay, size_t len, const void *needle, size_t n)
{
    for (size_t i = 0; i + n <= len; i++)
        if (memcmp(hay + i, needle, n) == 0)
            return 1;
    return 0;
}

/* The forms the secret could take in text: its bytes, its hex (either
 * case), each 8-byte half as a little-endian word in hex (SipHash's k0, k1)
 * and in decimal. */
static size_t secret_forms(const uint8_t s[16], char forms[][48])
{
    size_t n = 0;
    memcpy(forms[n], s, 16);
    forms[n++][16] = 0;
    for (int upper = 0; upper < 2; upper++) {
        for (int i = 0; i < 16; i++)
            snprintf(forms[n] + 2 * i, 3, upper ? "%02X" : "%02x", s[i]);
        n++;
        for (int half = 0; half < 2; half++) {
            uint64_t w = 0;
            for (int i = 7; i >= 0; i--)
                w = w << 8 | s[8 * half + i];
            snprintf(forms[n++], 48, upper ? "%016llX" : "%016llx", (unsigned long long)w);
            if (!upper)
                snprintf(forms[n++], 48, "%llu", (unsigned long long)w);
        }
    }
    return n;
}

START_TEST(keyed_database_secret_never_printed)
{
    char db[600], table[1000];
    test_path(db, sizeof db, "keyed");
    kv_options o;
    kv_options_init(&o);
    o.write_buffer_size = (size_t)64 << 10;
    o.filter_keyed_hash = 1;
    kv_db *d = open_db(db, &o);
    char k[32], v[32];
    for (int i = 0; i < 3000; i++) {
        snprintf(k, sizeof k, "key%05d", i);
        snprintf(v, sizeof v, "value%d", i);
        ck_assert_int_eq(kv_put(d, k, strlen(k), v, strlen(v)), KV_OK);
    }
    ck_assert_int_eq(kv_flush(d), KV_OK);
    close_db(d);
    uint8_t secret[16];
    manifest_secret(db, secret);
    char forms[16][48];
    size_t nforms = secret_forms(secret, forms);
    /* A table of it, for the sst commands. */
    table[0] = 0;
    DIR *dd = opendir(db);
    ck_assert_ptr_nonnull(dd);
    struct dirent *de;
    while ((de = readdir(dd)) != NULL)
        if (strstr(de->d_name, ".sst") && !table[0])
            snprintf(table, sizeof table, "%s/%s", db, de->d_name);
    closedir(dd);
    ck_assert_msg(table[0], "no table in %s", db);

    /* The table commands first: compaction removes the table. */
    char *cmds[][8] = {
        {"sst", "props", table, NULL},
        {"sst", "dump", table, NULL},
        {"sst", "dump", table, "--hex", NULL},
        {"sst", "verify", table, NULL},
        {"db", "info", db, NULL},
        {"db", "verify", db, NULL},
        {"db", "explain", db, "key00042", NULL},
        {"db", "explain", db, "absent", NULL},
        {"db", "get", db, "key00042", NULL},
        {"db", "get", db, "6b65793030303432", "--hex", NULL},
        {"db", "scan", db, "--limit", "50", NULL},
        {"db", "stats", db, NULL},
        {"db", "put", db, "another", "value", NULL},
        {"db", "delete", db, "key00007", NULL},
        {"db", "compact", db, NULL},
        {"db", "info", db, "--hex", NULL},
        {"db", "verify", db, NULL},
        {"db", "info", "--help", NULL},
    };
    for (size_t c = 0; c < sizeof cmds / sizeof cmds[0]; c++) {
        char *args[10] = {(char *)KVTOOL_PATH};
        size_t n = 1;
        for (; cmds[c][n - 1]; n++)
            args[n] = cmds[c][n - 1];
        args[n] = NULL;
        struct run r;
        run_argv(&r, args);
        ck_assert_msg(r.status == 0, "kvtool %s %s: status %d: %s", cmds[c][0], cmds[c][1],
                      r.status, r.err);
        for (size_t f = 0; f < nforms; f++) {
            size_t flen = f == 0 ? 16 : strlen(forms[f]);
            ck_assert_msg(!holds(r.out, r.out_len, forms[f], flen) &&
                              !holds(r.err, r.err_len, forms[f], flen),
                          "kvtool %s %s prints the secret (form %zu)", cmds[c][0], cmds[c][1], f);
        }
        if (strcmp(cmds[c][1], "info") == 0 && cmds[c][2] == db)
            ck_assert_msg(strstr(r.out, "filter secret:   set (check 0x") != NULL, "%s", r.out);
        if (strcmp(cmds[c][1], "props") == 0)
            ck_assert_msg(strstr(r.out, "SipHash-2-4") != NULL, "%s", r.out);
        run_free(&r);
    }
}
END_TEST

/* A keyed database whose manifest lost its secret (as a rebuilt one has):
 * db verify passes (the store reads those tables without their filters,
 * never wrongly) and says so for each table; db info says there is none. */
START_TEST(verify_names_keyed_tables_without_their_secret)
{
    char db[600];
    test_path(db, sizeof db, "lost");
    kv_options o;
    kv_options_init(&o);
    o.filter_keyed_hash = 1;
    kv_db *d = open_db(db, &o);
    for (int i = 0; i < 500; i++) {
        char k[16];
        snprintf(k, sizeof k, "key%05d", i);
        ck_assert_int_eq(kv_put(d, k, strlen(k), "v", 1), KV_OK);
    }
    ck_assert_int_eq(kv_flush(d), KV_OK);
    close_db(d);

    struct run r;
    run(&r, "db", "verify", db, NULL);
    ck_assert_msg(r.status == 0, "%s%s", r.out, r.err);
    ck_assert_msg(strstr(r.out, "keyed filter") == NULL, "%s", r.out); /* the secret is there */
    run_free(&r);

    char p[700];
    snprintf(p, sizeof p, "%s/MANIFEST", db);
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    ck_assert_int_eq(mdb_env_create(&env), 0);
    ck_assert_int_eq(mdb_env_set_maxdbs(env, 4), 0);
    ck_assert_int_eq(mdb_env_open(env, p, MDB_NOSUBDIR, 0644), 0);
    ck_assert_int_eq(mdb_txn_begin(env, NULL, 0, &txn), 0);
    ck_assert_int_eq(mdb_dbi_open(txn, "meta", 0, &dbi), 0);
    MDB_val k = {13, "filter_secret"};
    ck_assert_int_eq(mdb_del(txn, dbi, &k, NULL), 0);
    ck_assert_int_eq(mdb_txn_commit(txn), 0);
    mdb_env_close(env);

    run(&r, "db", "verify", db, NULL);
    ck_assert_msg(r.status == 0, "%s%s", r.out, r.err);
    ck_assert_msg(strstr(r.out, "keyed filter, but the database holds no filter secret"), "%s",
                  r.out);
    run_free(&r);
    run(&r, "db", "info", db, NULL);
    ck_assert_int_eq(r.status, 0);
    ck_assert_msg(strstr(r.out, "filter secret:   none"), "%s", r.out);
    run_free(&r);
    run(&r, "db", "get", db, "key00042", NULL);
    ck_assert_msg(r.status == 0 && strstr(r.out, "v"), "%s%s", r.out, r.err);
    run_free(&r);
}
END_TEST

/* ---- blob files ------------------------------------------------------------------ */

static size_t blob_key(uint32_t i, char k[16])
{
    return (size_t)sprintf(k, "blob%04u", i);
}

static void blob_value(uint32_t i, uint64_t seed)
{
    size_t n = i % 6 == 5 ? 100 + (size_t)(splitmix(seed + i) % 301)
                          : 600 + (size_t)(splitmix(seed + i) % 2401);
    free(bval[i]);
    bval[i] = malloc(n);
    ck_assert_ptr_nonnull(bval[i]);
    fill(seed * 7919u + i, bval[i], n);
    bvlen[i] = n;
}

/* Builds dir/blobdb: NBLOB keys flushed (values of 512 bytes or more go to
 * a blob file) and compacted, then every 8th key overwritten with another
 * large value, flushed and compacted again, so that the first blob file
 * holds garbage, under a fifth of its bytes: below the default
 * blob_gc_threshold (0.25), so that no later open (kvtool's included)
 * relocates values and deletes the file, and the files stay as built. */
static void build_blob_db(char *p, size_t n)
{
    test_path(p, n, "blobdb");
    kv_options o;
    kv_options_init(&o);
    kv_db *db = open_db(p, &o);
    char k[16];
    for (uint32_t i = 0; i < NBLOB; i++) {
        blob_value(i, 1);
        ck_assert_int_eq(kv_put(db, k, blob_key(i, k), bval[i], bvlen[i]), KV_OK);
    }
    ck_assert_int_eq(kv_flush(db), KV_OK);
    ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 0), KV_OK);
    for (uint32_t i = 0; i < NBLOB; i += 8) {
        blob_value(i, 2);
        ck_assert_int_eq(kv_put(db, k, blob_key(i, k), bval[i], bvlen[i]), KV_OK);
    }
    ck_assert_int_eq(kv_flush(db), KV_OK);
    ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 0), KV_OK);
    struct kv_stats s;
    ck_assert_int_eq(kv_stats(db, &s), KV_OK);
    ck_assert_uint_ge(s.blob_files, 2);
    ck_assert_uint_gt(s.blob_garbage_bytes, 0);
    close_db(db);
    kv_dir_info *info;
    ck_assert_int_eq(kv_inspect(p, &info), KV_OK);
    for (size_t i = 0; i < info->nblobs; i++)
        ck_assert_msg(info->blobs[i].garbage_bytes * 5 < info->blobs[i].record_bytes,
                      "blob file %llu: %llu of %llu bytes garbage",
                      (unsigned long long)info->blobs[i].number,
                      (unsigned long long)info->blobs[i].garbage_bytes,
                      (unsigned long long)info->blobs[i].record_bytes);
    kv_inspect_free(info);
}

static kv_dir_info *inspect_db(const char *p)
{
    kv_dir_info *info;
    ck_assert_int_eq(kv_inspect(p, &info), KV_OK);
    return info;
}

static void blob_file(char *p, size_t n, const char *db, uint64_t number)
{
    snprintf(p, n, "%s/%06llu.blob", db, (unsigned long long)number);
}

START_TEST(blob_db_verify_info_and_damage)
{
    char db[600];
    build_blob_db(db, sizeof db);
    kv_dir_info *info = inspect_db(db);
    size_t nt = info->ntables, nb = info->nblobs;
    ck_assert_uint_ge(nb, 2);
    const struct kv_dir_blob *g = NULL; /* a file with garbage */
    for (size_t i = 0; i < nb; i++)
        if (info->blobs[i].garbage_bytes && !g)
            g = &info->blobs[i];
    ck_assert_ptr_nonnull(g);
    ck_assert_uint_lt(g->garbage_records, g->records);
    struct kv_dir_blob garbage = *g, first = info->blobs[0];
    uint64_t records = 0, grecords = 0;
    for (size_t i = 0; i < nb; i++) {
        records += info->blobs[i].records;
        grecords += info->blobs[i].garbage_records;
    }
    kv_inspect_free(info);

    struct run r;
    run(&r, "db", "verify", db, NULL);
    ck_assert_msg(r.status == 0, "db verify: %d: %s%s", r.status, r.out, r.err);
    /* one line per table and per blob file, one summary */
    ck_assert_uint_eq(count_lines(r.out), nt + nb + 1);
    ck_assert_ptr_nonnull(strstr(r.out, "values in blob files read back"));
    char want[300];
    snprintf(want, sizeof want, "%zu blob files holding %llu live values", nb,
             (unsigned long long)(records - grecords));
    ck_assert_msg(strstr(r.out, want) != NULL, "%s", r.out);
    run_free(&r);

    /* db info: every blob file, its garbage, the total. */
    run(&r, "db", "info", db, NULL);
    ck_assert_msg(r.status == 0, "%s", r.err);
    snprintf(want, sizeof want, "blob files:      %zu (", nb);
    ck_assert_msg(strstr(r.out, want) != NULL, "%s", r.out);
    snprintf(want, sizeof want,
             "  %06llu.blob  %llu bytes  %llu records (%llu garbage)  %llu live bytes  %llu "
             "garbage bytes  %.2f%% garbage\n",
             (unsigned long long)garbage.number, (unsigned long long)garbage.file_size,
             (unsigned long long)garbage.records, (unsigned long long)garbage.garbage_records,
             (unsigned long long)(garbage.record_bytes - garbage.garbage_bytes),
             (unsigned long long)garbage.garbage_bytes,
             100.0 * (double)garbage.garbage_bytes / (double)garbage.record_bytes);
    ck_assert_msg(strstr(r.out, want) != NULL, "want %s in %s", want, r.out);
    snprintf(want, sizeof want, "blob total:      %llu records (%llu garbage)",
             (unsigned long long)records, (unsigned long long)grecords);
    ck_assert_msg(strstr(r.out, want) != NULL, "%s", r.out);
    size_t listed = 0;
    for (const char *q = r.out; (q = strstr(q, ".blob  ")) != NULL; q++)
        listed++;
    ck_assert_uint_eq(listed, nb);
    run_free(&r);

    /* One byte flipped inside the first record of the first blob file (its
     * header is 32 bytes; the record's head 9, the key 8, the value 600 or
     * more): verify names the file, and the table whose value it is. */
    char file[700], name[32];
    blob_file(file, sizeof file, db, first.number);
    snprintf(name, sizeof name, "%06llu.blob", (unsigned long long)first.number);
    int fd = open(file, O_RDWR);
    ck_assert_int_ge(fd, 0);
    uint8_t b;
    ck_assert_int_eq(pread(fd, &b, 1, 32 + 9 + 8 + 100), 1);
    b ^= 0x5A;
    ck_assert_int_eq(pwrite(fd, &b, 1, 32 + 9 + 8 + 100), 1);
    close(fd);
    run(&r, "db", "verify", db, NULL);
    ck_assert_int_eq(r.status, 1);
    ck_assert_msg(strstr(r.err, name) != NULL, "db verify does not name %s: %s", name, r.err);
    ck_assert_ptr_nonnull(strstr(r.err, "checksum"));
    snprintf(want, sizeof want, "ok %s", name);
    ck_assert_ptr_null(strstr(r.out, want));
    run_free(&r);
    run(&r, "blob", "verify", file, NULL);
    ck_assert_int_eq(r.status, 1);
    ck_assert_uint_eq(count_lines(r.err), 1);
    ck_assert_ptr_nonnull(strstr(r.err, name));
    ck_assert_ptr_nonnull(strstr(r.err, "offset 32"));
    run_free(&r);
    run(&r, "blob", "dump", file, NULL);
    ck_assert_int_eq(r.status, 1);
    ck_assert_ptr_nonnull(strstr(r.err, name));
    run_free(&r);
}
END_TEST

START_TEST(blob_explain_dump_and_verify)
{
    char db[600];
    build_blob_db(db, sizeof db);
    struct run r;
    char k[16], want[400];

    /* A large value: the step that finds it shows the blob read, as
     * kv_explain_get reports it. */
    uint32_t big = 7, small = 11;
    ck_assert_uint_ge(bvlen[big], 512);
    ck_assert_uint_lt(bvlen[small], 512);
    size_t klen = blob_key(big, k);
    kv_db *d = open_db(db, NULL);
    kv_explain *x;
    ck_assert_int_eq(kv_explain_get(d, k, klen, &x), KV_OK);
    ck_assert_int_eq(x->result, KV_OK);
    const kv_explain_step *st = &x->steps[x->nsteps - 1];
    ck_assert_uint_ne(st->blob_number, 0);
    ck_assert_uint_eq(st->blob_bytes, 17 + klen + bvlen[big]);
    snprintf(want, sizeof want, ": found, seq %llu: blob file %06llu.blob: %llu bytes at offset %llu\n",
             (unsigned long long)st->seq, (unsigned long long)st->blob_number,
             (unsigned long long)st->blob_bytes, (unsigned long long)st->blob_offset);
    uint64_t bnum = st->blob_number;
    kv_free(x);
    close_db(d);
    run(&r, "db", "explain", db, k, NULL);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strstr(r.out, want) != NULL, "want %s in %s", want, r.out);
    size_t cap = 4 * bvlen[big] + 32;
    char *v = malloc(cap);
    escape(v, cap, bval[big], bvlen[big]);
    ck_assert_ptr_nonnull(strstr(r.out, v));
    free(v);
    snprintf(want, sizeof want, ", 1 blob file read (%llu bytes)\n",
             (unsigned long long)(17 + klen + bvlen[big]));
    ck_assert_msg(strstr(r.out, want) != NULL, "%s", r.out);
    run_free(&r);
    /* A small one stays in its table: no blob read. */
    blob_key(small, k);
    run(&r, "db", "explain", db, k, NULL);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "result: found "));
    ck_assert_ptr_null(strstr(r.out, "blob file"));
    run_free(&r);

    /* sst dump shows references, sst verify decodes them. */
    kv_dir_info *info = inspect_db(db);
    ck_assert_uint_ge(info->ntables, 1);
    char table[700];
    table_file(table, sizeof table, db, info->tables[info->ntables - 1].number);
    uint64_t entries = info->tables[info->ntables - 1].entries;
    kv_inspect_free(info);
    run(&r, "sst", "dump", table, NULL);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_uint_eq(count_lines(r.out), entries);
    size_t refs = 0, puts = 0;
    for (char *line = strtok(r.out, "\n"); line; line = strtok(NULL, "\n")) {
        char *at = strstr(line, " blob => ");
        if (!at) {
            puts += strstr(line, " put => ") != NULL;
            continue;
        }
        unsigned long long num, off, size;
        unsigned idx;
        ck_assert_msg(sscanf(line, "\"blob%u\" seq", &idx) == 1, "%s", line);
        ck_assert_msg(sscanf(at, " blob => %llu.blob offset %llu size %llu", &num, &off, &size) ==
                          3, "%s", line);
        ck_assert_uint_lt(idx, NBLOB);
        ck_assert_uint_eq(size, bvlen[idx]); /* each key's newest value (one version each) */
        ck_assert_uint_ge(off, 32);
        refs++;
    }
    ck_assert_uint_gt(refs, 0);
    ck_assert_uint_gt(puts, 0);
    run_free(&r);
    run(&r, "sst", "verify", table, NULL);
    ck_assert_msg(r.status == 0, "%s", r.err);
    snprintf(want, sizeof want, "%zu blob references that decode", refs);
    ck_assert_msg(strstr(r.out, want) != NULL, "%s", r.out);
    run_free(&r);

    /* blob dump: one line per record, offsets from 32 on, each record
     * right after the one before. */
    char file[700];
    blob_file(file, sizeof file, db, bnum);
    run(&r, "blob", "dump", file, NULL);
    ck_assert_msg(r.status == 0, "%s", r.err);
    kv_blob_reader *br;
    ck_assert_int_eq(kv_blob_reader_open(file, bnum, &br), KV_OK);
    kv_blob_file_info fi;
    kv_blob_reader_info(br, &fi);
    kv_blob_reader_close(br);
    ck_assert_uint_eq(count_lines(r.out), fi.records);
    unsigned long long next = 32;
    for (char *line = strtok(r.out, "\n"); line; line = strtok(NULL, "\n")) {
        unsigned long long off;
        unsigned idx;
        size_t vlen;
        ck_assert_msg(sscanf(line, "%llu: \"blob%u\" => %zu bytes", &off, &idx, &vlen) == 3, "%s",
                      line);
        ck_assert_uint_eq(off, next);
        ck_assert_uint_ge(vlen, 512);
        next = off + 17 + 8 + vlen;
    }
    ck_assert_uint_eq(next, fi.file_size - 32);
    run_free(&r);
    run(&r, "blob", "verify", file, NULL);
    ck_assert_msg(r.status == 0, "%s", r.err);
    snprintf(want, sizeof want, "blob file %llu, %llu records of %llu bytes in %llu bytes",
             (unsigned long long)bnum, (unsigned long long)fi.records,
             (unsigned long long)fi.record_bytes, (unsigned long long)fi.file_size);
    ck_assert_msg(strstr(r.out, want) != NULL, "%s", r.out);
    run_free(&r);

    /* A copy under another name: the number comes from --number. */
    char copy[600];
    test_path(copy, sizeof copy, "copy.bin");
    size_t len;
    char *bytes = slurp(file, &len);
    FILE *f = fopen(copy, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(bytes, 1, len, f), len);
    fclose(f);
    free(bytes);
    run(&r, "blob", "verify", copy, NULL);
    ck_assert_int_eq(r.status, 1);
    ck_assert_ptr_nonnull(strstr(r.err, "--number"));
    run_free(&r);
    char num[24];
    snprintf(num, sizeof num, "%llu", (unsigned long long)bnum);
    run(&r, "blob", "verify", copy, "--number", num, NULL);
    ck_assert_msg(r.status == 0, "%s", r.err);
    run_free(&r);
    snprintf(num, sizeof num, "%llu", (unsigned long long)bnum + 1);
    run(&r, "blob", "dump", copy, "--number", num, NULL);
    ck_assert_int_eq(r.status, 1);
    ck_assert_ptr_nonnull(strstr(r.err, "KV_ECORRUPT"));
    run_free(&r);
}
END_TEST

/* Puts blob file `number`'s manifest record back with its garbage counts
 * changed by (drecords, dbytes) and its checksum recomputed
 * (doc/manifest.md, named database `blobs`). */
static void forge_blob_garbage(const char *db, uint64_t number, uint64_t drecords, uint64_t dbytes)
{
    char p[700];
    snprintf(p, sizeof p, "%s/MANIFEST", db);
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    ck_assert_int_eq(mdb_env_create(&env), 0);
    ck_assert_int_eq(mdb_env_set_maxdbs(env, 8), 0);
    ck_assert_int_eq(mdb_env_open(env, p, MDB_NOSUBDIR, 0644), 0);
    ck_assert_int_eq(mdb_txn_begin(env, NULL, 0, &txn), 0);
    ck_assert_int_eq(mdb_dbi_open(txn, "blobs", 0, &dbi), 0);
    uint8_t key[8], rec[64];
    for (int i = 0; i < 8; i++)
        key[i] = (uint8_t)(number >> (56 - 8 * i));
    MDB_val k = {8, key}, v;
    ck_assert_int_eq(mdb_get(txn, dbi, &k, &v), 0);
    ck_assert_uint_eq(v.mv_size, 64);
    memcpy(rec, v.mv_data, 64);
    ck_assert_uint_eq(get64le(rec + 8), number);
    put64le(rec + 40, get64le(rec + 40) + drecords);
    put64le(rec + 48, get64le(rec + 48) + dbytes);
    put64le(rec + 56, XXH3_64bits(rec, 56));
    v = (MDB_val){64, rec};
    ck_assert_int_eq(mdb_put(txn, dbi, &k, &v, 0), 0);
    ck_assert_int_eq(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
}

START_TEST(blob_verify_checks_accounting_and_files)
{
    char db[600];
    build_blob_db(db, sizeof db);
    kv_dir_info *info = inspect_db(db);
    ck_assert_uint_ge(info->nblobs, 2);
    struct kv_dir_blob a = info->blobs[0], b = info->blobs[info->nblobs - 1];
    kv_inspect_free(info);
    ck_assert_uint_ge(a.records - a.garbage_records, 2);

    /* One more record counted as garbage than the tables let go of. */
    forge_blob_garbage(db, a.number, 1, 700);
    struct run r;
    run(&r, "db", "verify", db, NULL);
    ck_assert_int_eq(r.status, 1);
    char want[400];
    snprintf(want, sizeof want,
             "%06llu.blob: the tables refer to %llu of its records (%llu bytes), the manifest "
             "counts %llu live (%llu bytes",
             (unsigned long long)a.number, (unsigned long long)(a.records - a.garbage_records),
             (unsigned long long)(a.record_bytes - a.garbage_bytes),
             (unsigned long long)(a.records - a.garbage_records - 1),
             (unsigned long long)(a.record_bytes - a.garbage_bytes - 700));
    ck_assert_msg(strstr(r.err, want) != NULL, "want %s in %s", want, r.err);
    ck_assert_ptr_nonnull(strstr(r.err, "1 problem found"));
    run_free(&r);
    forge_blob_garbage(db, a.number, (uint64_t)-1, (uint64_t)-700);
    run(&r, "db", "verify", db, NULL);
    ck_assert_msg(r.status == 0, "%s", r.err);
    run_free(&r);

    /* A blob file the manifest does not name, as a crash between its
     * sync and the manifest commit leaves; and a live one missing. */
    char from[700], orphan[700];
    blob_file(from, sizeof from, db, b.number);
    blob_file(orphan, sizeof orphan, db, 999999);
    ck_assert_int_eq(link(from, orphan), 0);
    run(&r, "db", "verify", db, NULL);
    ck_assert_int_eq(r.status, 1);
    ck_assert_msg(strstr(r.err, "999999.blob: a blob file the manifest does not name") != NULL,
                  "%s", r.err);
    run_free(&r);
    run(&r, "db", "info", db, NULL);
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "note: 999999.blob: a blob file the manifest does not name"));
    run_free(&r);
    ck_assert_int_eq(unlink(from), 0);
    run(&r, "db", "verify", db, NULL);
    ck_assert_int_eq(r.status, 1);
    snprintf(want, sizeof want, "%06llu.blob: missing", (unsigned long long)b.number);
    ck_assert_msg(strstr(r.err, want) != NULL, "%s", r.err);
    run_free(&r);
    run(&r, "db", "info", db, NULL);
    ck_assert_int_eq(r.status, 1);
    ck_assert_ptr_nonnull(strstr(r.out, "MISSING"));
    snprintf(want, sizeof want, "blob file %06llu.blob is in the manifest but not on disk",
             (unsigned long long)b.number);
    ck_assert_msg(strstr(r.err, want) != NULL, "%s", r.err);
    run_free(&r);
    struct stat sb;
    ck_assert_int_eq(stat(orphan, &sb), 0); /* nothing was recovered */
}
END_TEST

START_TEST(blob_db_destroy_removes_blob_files)
{
    char db[600];
    build_blob_db(db, sizeof db);
    struct run r;
    run(&r, "db", "destroy", db, NULL);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strstr(r.out, "removed") != NULL && strstr(r.out, "stays") == NULL, "%s",
                  r.out);
    run_free(&r);
    struct stat st;
    ck_assert_int_ne(stat(db, &st), 0); /* no blob file kept the directory */
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("kvtool");
    TCase *tc = tcase_create("tool");
    tcase_add_checked_fixture(tc, test_setup, teardown_values);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, verify_passes_then_names_a_damaged_table);
    tcase_add_test(tc, verify_reports_orphans_without_deleting_them);
    tcase_add_test(tc, sst_dump_prints_every_entry_escaped);
    tcase_add_test(tc, db_get_and_scan_take_binary_keys);
    tcase_add_test(tc, db_explain_shows_filters_gating_reads);
    tcase_add_test(tc, db_explain_range_shows_filters_gating_seeks);
    tcase_add_test(tc, db_property_and_size_agree_with_the_api);
    tcase_add_test(tc, help_on_every_command_and_bad_usage);
    tcase_add_test(tc, open_database_is_busy);
    tcase_add_test(tc, checkpoint_and_verify_with_ingest);
    tcase_add_test(tc, messages_name_what_is_wrong);
    tcase_add_test(tc, db_repair_and_destroy);
    tcase_add_test(tc, keyed_database_secret_never_printed);
    tcase_add_test(tc, verify_names_keyed_tables_without_their_secret);
    tcase_add_test(tc, blob_db_verify_info_and_damage);
    tcase_add_test(tc, blob_explain_dump_and_verify);
    tcase_add_test(tc, blob_verify_checks_accounting_and_files);
    tcase_add_test(tc, blob_db_destroy_removes_blob_files);
    suite_add_tcase(s, tc);
    tc = tcase_create("api");
    tcase_add_checked_fixture(tc, test_setup, teardown_values);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, explain_agrees_with_get);
    tcase_add_test(tc, inspect_reads_without_recovery);
    suite_add_tcase(s, tc);
    /* hostile files: a hang comes back as this tcase's timeout */
    tc = tcase_create("hostile");
    tcase_add_checked_fixture(tc, test_setup, teardown_values);
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, forged_filter_count_is_refused_at_once);
    tcase_add_test(tc, a_look_at_a_directory_that_is_no_database_creates_nothing);
    suite_add_tcase(s, tc);
    return s;
}
