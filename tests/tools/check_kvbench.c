/* check_kvbench.c - kvbench run as a program (KVBENCH_PATH): every
 * benchmark's JSON line parses (a strict parser for flat objects) and
 * carries every field with sane values; readmissing finds nothing; without
 * filters it gets no filter negatives and reads more blocks; histograms are
 * ordered (p9999_us too); readwhilewriting counts reads beside its writer's
 * writes_per_sec; --threads runs every read benchmark, --use_existing_db too; the text result line has db_bench's form; bad flags exit 2 with
 * one line that names the flag, the value and what is wrong; a sweep writes a CSV and a well-formed SVG with one series per
 * layout; --scaling writes a row per run with its JSON lines' figures, a
 * well-formed SVG with a series per engine and a table of medians, and
 * --scaling_chart draws them again from a CSV; --stats_interval writes its time series
 * with each interval's latencies and write path; --timeline writes a CSV, a chart with
 * a line per engine and a table, and --timeline_chart draws them again; the default run and an
 * interrupted run remove their temporary directory; --db never loses a file
 * kvbench did not create (a foreign directory or a regular file is refused
 * with exit 2 and one line; a fresh run removes only its engine's files);
 * --engine=lmdb runs every read and scan benchmark, claims no filter figure
 * and resets an LMDB directory by removing data.mdb and lock.mdb alone;
 * every line has the storage figures (bytes_written, write_amp where keys
 * and values were written, db_bytes, blob_bytes), overwrite rewrites an
 * existing database, values of 64 KiB and 1 MiB round-trip, and
 * --min_blob_size parses (never too) and turns RocksDB's blob files on. */
#define _XOPEN_SOURCE 700
#include <check.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include <kv/kv.h>
#include <kv/sstable.h>

#include "fixture.h"

#ifndef KVBENCH_PATH
#error "KVBENCH_PATH: the kvbench binary (set by tests/CMakeLists.txt)"
#endif

/* ---- fixture: one temporary directory per test ------------------------------------ */

/* dir/name, in a static ring of buffers (so a test can hold several). */
static const char *path(const char *fmt, ...)
{
    static char ring[8][640];
    static int next;
    char name[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    char *p = ring[next++ % 8];
    int n = snprintf(p, sizeof ring[0], "%s/%s", test_dir, name);
    ck_assert(n > 0 && (size_t)n < sizeof ring[0]);
    return p;
}

static int dir_is_empty(const char *p)
{
    DIR *d = opendir(p);
    ck_assert_msg(d != NULL, "opendir %s: %s", p, strerror(errno));
    int empty = 1;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            empty = 0;
    closedir(d);
    return empty;
}

/* ---- running kvbench ------------------------------------------------------------------ */

struct output {
    int status; /* exit status, or 128 + signal */
    char *out, *err;
    size_t outlen, errlen;
};

struct child {
    pid_t pid;
    int fd[2]; /* its stdout and stderr */
};

/* Starts kvbench with args (NULL-terminated), TMPDIR set to tmpdir if not NULL. */
static void spawn(struct child *c, const char *tmpdir, const char *const *args)
{
    const char *argv[64] = {KVBENCH_PATH};
    int n = 1;
    for (; args[n - 1]; n++) {
        ck_assert_int_lt(n, 63);
        argv[n] = args[n - 1];
    }
    argv[n] = NULL;
    int po[2], pe[2];
    ck_assert_int_eq(pipe(po), 0);
    ck_assert_int_eq(pipe(pe), 0);
    fflush(NULL);
    c->pid = fork();
    ck_assert_int_ge(c->pid, 0);
    if (c->pid == 0) {
        dup2(po[1], 1);
        dup2(pe[1], 2);
        close(po[0]);
        close(po[1]);
        close(pe[0]);
        close(pe[1]);
        if (tmpdir)
            setenv("TMPDIR", tmpdir, 1);
        execv(KVBENCH_PATH, (char *const *)argv);
        _exit(127);
    }
    close(po[1]);
    close(pe[1]);
    c->fd[0] = po[0];
    c->fd[1] = pe[0];
}

static void append(char **buf, size_t *len, const char *p, size_t n)
{
    *buf = realloc(*buf, *len + n + 1);
    ck_assert_ptr_nonnull(*buf);
    memcpy(*buf + *len, p, n);
    *len += n;
    (*buf)[*len] = 0;
}

/* Reads both pipes to their end, then reaps the child. */
static void collect(struct child *c, struct output *o)
{
    memset(o, 0, sizeof *o);
    append(&o->out, &o->outlen, "", 0);
    append(&o->err, &o->errlen, "", 0);
    int open_fds = 2;
    struct pollfd pf[2] = {{c->fd[0], POLLIN, 0}, {c->fd[1], POLLIN, 0}};
    char buf[65536];
    while (open_fds) {
        int r = poll(pf, 2, -1);
        if (r < 0 && errno == EINTR)
            continue;
        ck_assert_int_gt(r, 0);
        for (int i = 0; i < 2; i++) {
            if (pf[i].fd < 0 || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t got = read(pf[i].fd, buf, sizeof buf);
            if (got > 0) {
                if (i == 0)
                    append(&o->out, &o->outlen, buf, (size_t)got);
                else
                    append(&o->err, &o->errlen, buf, (size_t)got);
            } else if (got == 0 || errno != EINTR) {
                close(pf[i].fd);
                pf[i].fd = -1;
                open_fds--;
            }
        }
    }
    int st;
    while (waitpid(c->pid, &st, 0) < 0)
        ck_assert_int_eq(errno, EINTR);
    o->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void run(struct output *o, const char *tmpdir, const char *const *args)
{
    struct child c;
    spawn(&c, tmpdir, args);
    collect(&c, o);
}

static void output_free(struct output *o)
{
    free(o->out);
    free(o->err);
}

/* Starts kvbench with args and TMPDIR=tmp, sends it `sig` 300 ms later, and
 * checks that it said so, exited 130 and left TMPDIR empty. */
static void interrupt_run(const char *tmp, const char *const *args, int sig)
{
    struct child c;
    spawn(&c, tmp, args);
    struct timespec ts = {0, 300 * 1000000L};
    nanosleep(&ts, NULL);
    ck_assert_int_eq(kill(c.pid, sig), 0);
    struct output o;
    collect(&c, &o);
    ck_assert_msg(o.status == 130, "interrupted run exited %d: %s", o.status, o.err);
    ck_assert_ptr_nonnull(strstr(o.err, "kvbench: interrupted"));
    ck_assert_msg(dir_is_empty(tmp), "the interrupted run left files in TMPDIR");
    output_free(&o);
}

/* A run that must succeed. */
static void run_ok(struct output *o, const char *const *args)
{
    run(o, NULL, args);
    ck_assert_msg(o->status == 0, "kvbench exited %d: %s", o->status, o->err);
}

/* ---- a strict JSON parser for flat objects ------------------------------------------ */

enum jtype { J_STR, J_NUM, J_BOOL };

struct jfield {
    char name[64];
    enum jtype type;
    double num;
    char str[128];
};

struct jobj {
    struct jfield f[128];
    int n;
};

static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    return p;
}

/* A JSON string at p (after its opening quote) into out; returns the char
 * after the closing quote, or NULL. */
static const char *json_string(const char *p, char *out, size_t cap)
{
    size_t n = 0;
    for (;;) {
        unsigned char ch = (unsigned char)*p++;
        if (ch == '"')
            break;
        if (ch < 0x20)
            return NULL; /* control characters (and the end) are not allowed */
        if (ch == '\\') {
            char e = *p++;
            switch (e) {
            case '"': case '\\': case '/': ch = (unsigned char)e; break;
            case 'b': ch = '\b'; break;
            case 'f': ch = '\f'; break;
            case 'n': ch = '\n'; break;
            case 'r': ch = '\r'; break;
            case 't': ch = '\t'; break;
            case 'u':
                for (int i = 0; i < 4; i++)
                    if (!strchr("0123456789abcdefABCDEF", p[i]) || !p[i])
                        return NULL;
                p += 4;
                ch = '?';
                break;
            default: return NULL;
            }
        }
        if (n + 1 >= cap)
            return NULL;
        out[n++] = (char)ch;
    }
    out[n] = 0;
    return p;
}

/* JSON's number grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static const char *json_number(const char *p, double *out)
{
    const char *s = p;
    if (*p == '-')
        p++;
    if (*p == '0')
        p++;
    else if (*p >= '1' && *p <= '9')
        while (*p >= '0' && *p <= '9')
            p++;
    else
        return NULL;
    if (*p == '.') {
        p++;
        if (!(*p >= '0' && *p <= '9'))
            return NULL;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (!(*p >= '0' && *p <= '9'))
            return NULL;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    char tmp[64];
    if ((size_t)(p - s) >= sizeof tmp)
        return NULL;
    memcpy(tmp, s, (size_t)(p - s));
    tmp[p - s] = 0;
    *out = strtod(tmp, NULL);
    return p;
}

/* Parses one line holding exactly one flat object; 0 or -1. */
static int json_parse(const char *line, struct jobj *o)
{
    o->n = 0;
    const char *p = skip_ws(line);
    if (*p++ != '{')
        return -1;
    p = skip_ws(p);
    if (*p == '}')
        return *skip_ws(p + 1) ? -1 : 0;
    for (;;) {
        if (o->n == 128 || *p++ != '"')
            return -1;
        struct jfield *f = &o->f[o->n];
        if (!(p = json_string(p, f->name, sizeof f->name)))
            return -1;
        for (int i = 0; i < o->n; i++)
            if (!strcmp(o->f[i].name, f->name))
                return -1; /* duplicate name */
        p = skip_ws(p);
        if (*p++ != ':')
            return -1;
        p = skip_ws(p);
        if (*p == '"') {
            f->type = J_STR;
            p = json_string(p + 1, f->str, sizeof f->str);
        } else if (!strncmp(p, "true", 4) || !strncmp(p, "false", 5)) {
            f->type = J_BOOL;
            f->num = *p == 't';
            p += *p == 't' ? 4 : 5;
        } else {
            f->type = J_NUM;
            p = json_number(p, &f->num);
        }
        if (!p)
            return -1;
        o->n++;
        p = skip_ws(p);
        if (*p == ',') {
            p = skip_ws(p + 1);
            continue;
        }
        if (*p++ != '}')
            return -1;
        return *skip_ws(p) ? -1 : 0;
    }
}

static const struct jfield *jfind(const struct jobj *o, const char *name)
{
    for (int i = 0; i < o->n; i++)
        if (!strcmp(o->f[i].name, name))
            return &o->f[i];
    return NULL;
}

static double jnum(const struct jobj *o, const char *name)
{
    const struct jfield *f = jfind(o, name);
    ck_assert_msg(f != NULL, "JSON field %s missing", name);
    ck_assert_msg(f->type == J_NUM, "JSON field %s is not a number", name);
    return f->num;
}

static const char *jstr(const struct jobj *o, const char *name)
{
    const struct jfield *f = jfind(o, name);
    ck_assert_msg(f != NULL, "JSON field %s missing", name);
    ck_assert_msg(f->type == J_STR, "JSON field %s is not a string", name);
    return f->str;
}

/* Every line of out as an object; returns how many (at most max). */
static int json_lines(const char *out, struct jobj *objs, int max)
{
    int n = 0;
    const char *p = out;
    while (*p) {
        const char *nl = strchr(p, '\n');
        ck_assert_msg(nl != NULL, "JSON output does not end with a newline");
        size_t len = (size_t)(nl - p);
        char *line = malloc(len + 1);
        ck_assert_ptr_nonnull(line);
        memcpy(line, p, len);
        line[len] = 0;
        ck_assert_int_lt(n, max);
        ck_assert_msg(json_parse(line, &objs[n]) == 0, "not a flat JSON object: %s", line);
        free(line);
        n++;
        p = nl + 1;
    }
    return n;
}

static void assert_near(double got, double want, double rel, const char *what)
{
    ck_assert_msg(fabs(got - want) <= rel * fabs(want) + 1e-9, "%s: %g, want %g", what, got,
                  want);
}

static void check_storage(const struct jobj *o);

/* The fields every benchmark line carries, and what holds for any run. */
static void check_common(const struct jobj *o, int histogram)
{
    static const char *const nums[] = {
        "ops", "seconds", "micros_per_op", "ops_per_sec", "found",
        "tables_probed_per_get", "filter_negatives_per_get", "false_positives_per_get",
        "data_block_reads_per_get", "bytes_read_per_get", "cache_hit_ratio", "measured_fpr",
        "expected_fpr"};
    const char *name = jstr(o, "benchmark");
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
        ck_assert_msg(jnum(o, nums[i]) >= 0, "%s: %s < 0", name, nums[i]);
    double ops = jnum(o, "ops"), sec = jnum(o, "seconds");
    ck_assert_msg(ops == floor(ops) && jnum(o, "found") <= ops, "%s: found > ops", name);
    if (ops > 0) {
        assert_near(jnum(o, "micros_per_op"), sec * 1e6 / ops, 1e-3, "micros_per_op");
        if (sec > 0)
            assert_near(jnum(o, "ops_per_sec"), ops / sec, 1e-3, "ops_per_sec");
    }
    ck_assert(jnum(o, "cache_hit_ratio") <= 1);
    ck_assert(jnum(o, "measured_fpr") <= 1);
    ck_assert(jnum(o, "expected_fpr") <= 1);
    /* a probe either is a filter negative, or a positive (true or false);
     * each figure is printed to 6 significant digits, so the sum may pass
     * the total by their rounding (12.3457 + 0.0123457 against 12.358) */
    ck_assert(jnum(o, "filter_negatives_per_get") + jnum(o, "false_positives_per_get") <=
              jnum(o, "tables_probed_per_get") * (1 + 2e-5) + 1e-9);
    static const char *const pct[] = {"p50_us", "p95_us", "p99_us", "p999_us", "p9999_us",
                                      "max_us"};
    for (size_t i = 0; i < 6; i++)
        ck_assert_msg((jfind(o, pct[i]) != NULL) == histogram, "%s: %s %s", name, pct[i],
                      histogram ? "missing" : "without --histogram");
    check_storage(o);
}

/* The storage figures, on every line of every engine; write_amp on those
 * of benchmarks that wrote keys and values (readwhilewriting: when its
 * writer wrote any). */
static void check_storage(const struct jobj *o)
{
    const char *name = jstr(o, "benchmark");
    static const char *const storage[] = {"bytes_written", "db_bytes", "blob_bytes",
                                          "blob_garbage_bytes"};
    for (size_t i = 0; i < 4; i++)
        ck_assert_msg(jnum(o, storage[i]) >= 0, "%s: %s < 0", name, storage[i]);
    ck_assert(jnum(o, "blob_garbage_bytes") <= jnum(o, "blob_bytes"));
    static const char *const writers[] = {"fillseq",  "fillrandom",   "fillsettled", "overwrite",
                                          "fillsync", "deleterandom", "fillbulk"};
    int writes = !strcmp(name, "readwhilewriting") && jnum(o, "writes") > 0;
    for (size_t i = 0; i < 7; i++)
        writes |= !strcmp(name, writers[i]);
    ck_assert_msg((jfind(o, "write_amp") != NULL) == writes, "%s: write_amp %s", name,
                  writes ? "missing" : "on a benchmark that wrote nothing");
    if (writes)
        ck_assert_msg(jnum(o, "bytes_written") > 0 ? jnum(o, "write_amp") > 0
                                                   : jnum(o, "write_amp") == 0,
                      "%s: write_amp %g of %g bytes written", name, jnum(o, "write_amp"),
                      jnum(o, "bytes_written"));
}

/* Whether the test directory's file system keeps its files in memory
 * (tmpfs, TMPFS_MAGIC): the kernel counts no write_bytes for them, and a
 * benchmark's bytes_written stays 0 there. */
static int dir_on_tmpfs(void)
{
    struct statfs st;
    return statfs(test_dir, &st) == 0 && st.f_type == 0x01021994;
}

/* The line of benchmark `name` (the k-th such, from 0). */
static const struct jobj *line_of(const struct jobj *objs, int n, const char *name, int k)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(jstr(&objs[i], "benchmark"), name) && k-- == 0)
            return &objs[i];
    ck_abort_msg("no JSON line for %s", name);
    return NULL;
}

/* ---- every benchmark --------------------------------------------------------------------- */

#define NUM "20000"
#define SMALL_MEMTABLE "--write_buffer_size=65536" /* many tables from few keys */

START_TEST(every_benchmark_json)
{
    static const char *const names[] = {
        "fillseq", "fillsync", "fillrandom", "overwrite", "readrandom", "readmissing",
        "readhot", "readseq", "readreverse", "seekrandom", "compact", "readrandom",
        "readmissing", "stats", "deleterandom", "readrandom", "waitforcompaction", "reopen", "readrandom"};
    const int nn = (int)(sizeof names / sizeof names[0]);
    char list[512] = "--benchmarks=";
    for (int i = 0; i < nn; i++) {
        strcat(list, names[i]);
        strcat(list, i + 1 < nn ? "," : "");
    }
    char db[700];
    snprintf(db, sizeof db, "--db=%s", path("db"));
    const char *args[] = {db, "--num=" NUM, "--json", SMALL_MEMTABLE, list, NULL};
    struct output o;
    run_ok(&o, args);
    struct jobj objs[32];
    int n = json_lines(o.out, objs, 32);
    ck_assert_int_eq(n, nn);
    for (int i = 0; i < n; i++) {
        ck_assert_str_eq(jstr(&objs[i], "benchmark"), names[i]);
        ck_assert_str_eq(jstr(&objs[i], "engine"), "kv");
        check_common(&objs[i], 0);
    }
    /* writes: num ops (fillsync num/1000), no gets */
    static const char *const writes[] = {"fillseq", "fillrandom", "overwrite", "deleterandom"};
    for (int i = 0; i < 4; i++) {
        const struct jobj *w = line_of(objs, n, writes[i], 0);
        ck_assert_double_eq(jnum(w, "ops"), 20000);
        ck_assert_double_eq(jnum(w, "found"), 0);
        ck_assert_double_eq(jnum(w, "tables_probed_per_get"), 0);
    }
    ck_assert_double_eq(jnum(line_of(objs, n, "fillsync", 0), "ops"), 20);
    /* reads of present keys find all of them, before and after compaction */
    static const char *const full[] = {"readrandom", "readhot", "readseq", "readreverse",
                                       "seekrandom"};
    for (int i = 0; i < 5; i++) {
        const struct jobj *r = line_of(objs, n, full[i], 0);
        ck_assert_double_eq(jnum(r, "ops"), 20000);
        ck_assert_msg(jnum(r, "found") == 20000, "%s found %g", full[i], jnum(r, "found"));
    }
    /* scans report the bytes of the pairs they returned per second:
     * 20000 pairs of 16 + 100 bytes in `seconds`; other reads do not */
    static const char *const scans[] = {"readseq", "readreverse"};
    for (int i = 0; i < 2; i++) {
        const struct jobj *r = line_of(objs, n, scans[i], 0);
        assert_near(jnum(r, "mb_per_sec"), 20000.0 * 116 / 1e6 / jnum(r, "seconds"),
                    1e-3, "mb_per_sec");
    }
    ck_assert_ptr_null(jfind(line_of(objs, n, "seekrandom", 0), "mb_per_sec"));
    ck_assert_ptr_null(jfind(line_of(objs, n, "readrandom", 0), "mb_per_sec"));
    /* before compaction gets probe several level-0 tables */
    const struct jobj *rr = line_of(objs, n, "readrandom", 0);
    ck_assert_double_gt(jnum(rr, "tables_probed_per_get"), 1);
    ck_assert_double_gt(jnum(rr, "filter_negatives_per_get"), 0.5);
    /* readmissing finds nothing, its filters say no, FPR near 10 bits' 1% */
    for (int k = 0; k < 2; k++) {
        const struct jobj *m = line_of(objs, n, "readmissing", k);
        ck_assert_double_eq(jnum(m, "found"), 0);
        ck_assert_double_eq(jnum(m, "ops"), 20000);
        assert_near(jnum(m, "filter_negatives_per_get") + jnum(m, "false_positives_per_get"),
                    jnum(m, "tables_probed_per_get"), 2e-5, "negatives + false positives");
        ck_assert_double_le(jnum(m, "measured_fpr"), 0.03);
        ck_assert_double_gt(jnum(m, "expected_fpr"), 0.002);
        ck_assert_double_lt(jnum(m, "expected_fpr"), 0.03);
        ck_assert_double_le(jnum(m, "data_block_reads_per_get"),
                            jnum(m, "false_positives_per_get") * (1 + 2e-5) + 1e-9);
        ck_assert_double_eq(jnum(m, "bloom_bits"), 10);
    }
    /* after compaction: one table per get, at most (a key between two
     * tables' ranges probes none) */
    const struct jobj *m2 = line_of(objs, n, "readmissing", 1);
    ck_assert_double_le(jnum(m2, "tables_probed_per_get"), 1);
    ck_assert_double_ge(jnum(m2, "tables_probed_per_get"), 0.9);
    const struct jobj *r2 = line_of(objs, n, "readrandom", 1);
    assert_near(jnum(r2, "tables_probed_per_get"), 1, 1e-9, "probes per get after compact");
    ck_assert_double_eq(jnum(r2, "false_positives_per_get"), 0);
    ck_assert_double_eq(jnum(line_of(objs, n, "compact", 0), "ops"), 1);
    const struct jobj *wc = line_of(objs, n, "waitforcompaction", 0);
    ck_assert_double_eq(jnum(wc, "ops"), 1);
    ck_assert_double_ge(jnum(wc, "seconds"), 0);
    const struct jobj *ro = line_of(objs, n, "reopen", 0);
    ck_assert_double_eq(jnum(ro, "ops"), 1);
    ck_assert_double_gt(jnum(ro, "seconds"), 0);
    /* after the reopen every key that was there is there */
    ck_assert_double_eq(jnum(line_of(objs, n, "readrandom", 3), "found"),
                        jnum(line_of(objs, n, "readrandom", 2), "found"));
    /* stats: the database's shape */
    const struct jobj *st = line_of(objs, n, "stats", 0);
    ck_assert_double_ge(jnum(st, "tables"), 1);
    ck_assert_double_ge(jnum(st, "compactions"), 1);
    ck_assert_double_gt(jnum(st, "filter_bits_per_key"), 9);
    /* memory and descriptors: the process holds some, the indexes take some */
    ck_assert_double_gt(jnum(st, "open_files"), 3);
    ck_assert_double_gt(jnum(st, "rss_bytes"), 1e6);
    ck_assert_double_gt(jnum(st, "index_bytes"), 0);
    ck_assert_double_gt(jnum(st, "filter_bytes"), 0);
    ck_assert_double_ge(jnum(st, "write_slowdowns"), 0);
    ck_assert_double_ge(jnum(st, "write_slowdown_seconds"), 0);
    ck_assert_double_ge(jnum(st, "write_stall_seconds"), 0);
    ck_assert_double_lt(jnum(st, "filter_bits_per_key"), 11);
    /* num random deletes (with repeats) leave about 1/e of the keys */
    const struct jobj *r3 = line_of(objs, n, "readrandom", 2);
    double left = jnum(r3, "found") / jnum(r3, "ops");
    ck_assert_msg(left > 0.30 && left < 0.44, "after deleterandom %.3f of keys found", left);
    /* human text went to stderr: the result lines are there */
    ck_assert_ptr_nonnull(strstr(o.err, "readmissing  : "));
    output_free(&o);
}
END_TEST

/* ---- storage: bytes written, write amplification, the database's size ---------------- */

/* A fill's line says what the process wrote (/proc/self/io) and its ratio
 * to the keys and values written; a read that follows wrote none of them
 * (no write_amp); db_bytes holds at least the values; kv reports blob
 * reads per get. */
START_TEST(fill_reports_bytes_written_and_write_amp)
{
    char db[700];
    snprintf(db, sizeof db, "--db=%s", path("db"));
    const char *args[] = {db, "--num=2000", "--json", "--benchmarks=fillrandom,readrandom,stats",
                          NULL};
    struct output o;
    run_ok(&o, args);
    struct jobj objs[4];
    ck_assert_int_eq(json_lines(o.out, objs, 4), 3);
    for (int i = 0; i < 3; i++)
        check_common(&objs[i], 0);
    const struct jobj *f = &objs[0], *r = &objs[1], *st = &objs[2];
    double user = 2000.0 * (16 + 100);
    if (!dir_on_tmpfs()) {
        ck_assert_double_gt(jnum(f, "bytes_written"), 0);
        ck_assert_double_gt(jnum(f, "write_amp"), 0);
    }
    assert_near(jnum(f, "write_amp"), jnum(f, "bytes_written") / user, 1e-5, "write_amp");
    ck_assert_double_ge(jnum(f, "db_bytes"), 2000.0 * 100);
    ck_assert_double_ge(jnum(r, "blob_reads_per_get"), 0);
    ck_assert_double_eq(jnum(st, "bytes_written"), 0); /* stats runs nothing */
    ck_assert_double_ge(jnum(st, "db_bytes"), 2000.0 * 100);
    ck_assert_double_ge(jnum(st, "blob_files"), 0);
    ck_assert_ptr_nonnull(strstr(o.err, "    storage  : "));
    ck_assert_ptr_nonnull(strstr(o.err, " blob reads\n"));
    output_free(&o);
}
END_TEST

/* overwrite runs on a database a fill left (--use_existing_db), writes
 * --num keys of fillrandom's key space and reports as fillrandom does;
 * every key is still there after it. */
START_TEST(overwrite_on_an_existing_db)
{
    char db[700];
    snprintf(db, sizeof db, "--db=%s", path("db"));
    const char *fill[] = {db, "--num=2000", "--json", "--benchmarks=fillrandom", NULL};
    struct output o;
    run_ok(&o, fill);
    output_free(&o);
    const char *over[] = {db, "--num=2000", "--json", "--use_existing_db",
                          "--benchmarks=overwrite,readrandom", NULL};
    run_ok(&o, over);
    struct jobj objs[4];
    ck_assert_int_eq(json_lines(o.out, objs, 4), 2);
    const struct jobj *w = &objs[0], *r = &objs[1];
    check_common(w, 0);
    check_common(r, 0);
    ck_assert_str_eq(jstr(w, "benchmark"), "overwrite");
    ck_assert_double_eq(jnum(w, "ops"), 2000);
    ck_assert_double_eq(jnum(w, "found"), 0);
    if (!dir_on_tmpfs())
        ck_assert_double_gt(jnum(w, "bytes_written"), 0);
    assert_near(jnum(w, "write_amp"), jnum(w, "bytes_written") / (2000.0 * 116), 1e-5,
                "overwrite write_amp");
    ck_assert_double_eq(jnum(r, "found"), 2000);
    /* db_bench's result line, then what it wrote */
    const char *l = strstr(o.err, "\noverwrite    : ");
    ck_assert_ptr_nonnull(l);
    const char *eol = strchr(l + 1, '\n');
    ck_assert(eol && !strncmp(eol - 11, "operations;", 11));
    ck_assert(!strncmp(eol + 1, "    storage  : ", 15));
    ck_assert_ptr_null(strstr(o.err, "skipped"));
    output_free(&o);
}
END_TEST

/* Values of 64 KiB and of 1 MiB go in and come out whole: every key is
 * found, by gets, a multi-get and a scan, before and after a compaction,
 * on kv and on LMDB; the database holds at least the values. */
START_TEST(large_values_round_trip)
{
    static const struct {
        const char *engine, *value_size, *num;
        double n, size;
    } runs[] = {
        {"--engine=kv", "--value_size=65536", "--num=64", 64, 65536},
        {"--engine=kv", "--value_size=1048576", "--num=4", 4, 1048576},
        {"--engine=lmdb", "--value_size=1048576", "--num=4", 4, 1048576},
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        char db[700];
        snprintf(db, sizeof db, "--db=%s", path("db%zu", i));
        const char *args[] = {db, runs[i].engine, runs[i].value_size, runs[i].num, "--json",
                              "--benchmarks=fillrandom,readrandom,multireadrandom,readseq,"
                              "compact,readrandom",
                              NULL};
        struct output o;
        run_ok(&o, args);
        struct jobj objs[8];
        ck_assert_int_eq(json_lines(o.out, objs, 8), 6);
        for (int k = 0; k < 6; k++) {
            if (i < 2)
                check_common(&objs[k], 0);
            else /* LMDB: no filter figures */
                check_storage(&objs[k]);
            ck_assert_double_eq(jnum(&objs[k], "value_size"), runs[i].size);
        }
        for (int k = 1; k < 6; k++)
            if (k != 4) /* compact */
                ck_assert_msg(jnum(&objs[k], "found") == runs[i].n, "%s %s: %s found %g",
                              runs[i].engine, runs[i].value_size, jstr(&objs[k], "benchmark"),
                              jnum(&objs[k], "found"));
        const struct jobj *f = &objs[0];
        ck_assert_double_ge(jnum(f, "db_bytes"), runs[i].n * runs[i].size);
        if (!dir_on_tmpfs())
            ck_assert_double_gt(jnum(f, "write_amp"), 0);
        /* readseq returned every pair whole */
        assert_near(jnum(&objs[3], "mb_per_sec"),
                    runs[i].n * (16 + runs[i].size) / 1e6 / jnum(&objs[3], "seconds"), 1e-3,
                    "readseq mb_per_sec");
        output_free(&o);
    }
}
END_TEST

/* --min_blob_size takes a size, never or -1 (KV_BLOB_NEVER, -1 in the
 * JSON); without it kv runs with its own default. --blob_file_size and
 * --blob_gc_threshold pass through. */
START_TEST(min_blob_size_flag)
{
    kv_options d;
    kv_options_init(&d);
    static const struct {
        const char *arg;
        double want; /* the JSON's min_blob_size; NAN: kv's default */
        const char *header;
    } cases[] = {
        {NULL, NAN, "Blob files:  values of "},
        {"--min_blob_size=never", -1, "Blob files:  off (--min_blob_size=never)\n"},
        {"--min_blob_size=-1", -1, "Blob files:  off (--min_blob_size=never)\n"},
        {"--min_blob_size=0", 0, "Blob files:  values of 0 bytes or more, "},
        {"--min_blob_size=4096", 4096, "Blob files:  values of 4096 bytes or more, "},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char db[700];
        snprintf(db, sizeof db, "--db=%s", path("db%zu", i));
        const char *args[] = {db, "--num=200", "--value_size=1000", "--json",
                              "--blob_file_size=1048576", "--blob_gc_threshold=0.5",
                              "--benchmarks=fillrandom,readrandom", cases[i].arg, NULL};
        struct output o;
        run_ok(&o, args);
        struct jobj objs[4];
        ck_assert_int_eq(json_lines(o.out, objs, 4), 2);
        double want = isnan(cases[i].want) ? (double)d.min_blob_size : cases[i].want;
        ck_assert_double_eq(jnum(&objs[0], "min_blob_size"), want);
        ck_assert_double_eq(jnum(&objs[1], "found"), 200);
        ck_assert_msg(strstr(o.err, cases[i].header) != NULL, "%s: no \"%s\" in %s",
                      cases[i].arg ? cases[i].arg : "(default)", cases[i].header, o.err);
        output_free(&o);
    }
}
END_TEST

/* ---- multi-gets ------------------------------------------------------------------------- */

/* multireadrandom and multireadmissing count keys: every key is found or
 * none is, the per-get figures are per key (gets = ops) and match the
 * single-key runs on the same database, and the latencies are per key. A
 * batch of 7 leaves a last, short batch (20000 = 7 * 2857 + 1). */
START_TEST(multiread_benchmarks)
{
    char db[700];
    snprintf(db, sizeof db, "--db=%s", path("db"));
    const char *args[] = {db, "--num=" NUM, "--json", "--histogram", "--batch_size=7",
                          /* 53 memtables: eight at a time go down to level 1, five
                           * stay in level 0 */
                          "--write_buffer_size=70000",
                          /* level 0 stays (no idle merge): a missing key probes several
                           * tables */
                          "--idle_compaction_ms=0",
                          /* a tree that depends on the keys alone (each memtable
                           * flushed and its compactions waited for), so that both kinds
                           * of read see one shape of tree, whatever the timing */
                          "--benchmarks=fillsettled,waitforcompaction,readrandom,"
                          "multireadrandom,readmissing,multireadmissing",
                          NULL};
    struct output o;
    run_ok(&o, args);
    struct jobj objs[8];
    ck_assert_int_eq(json_lines(o.out, objs, 8), 6);
    for (int i = 0; i < 6; i++)
        check_common(&objs[i], i != 1); /* waitforcompaction has no latencies */
    const struct jobj *rr = line_of(objs, 6, "readrandom", 0);
    const struct jobj *mr = line_of(objs, 6, "multireadrandom", 0);
    const struct jobj *rm = line_of(objs, 6, "readmissing", 0);
    const struct jobj *mm = line_of(objs, 6, "multireadmissing", 0);
    for (int k = 0; k < 2; k++) {
        const struct jobj *m = k ? mm : mr;
        ck_assert_double_eq(jnum(m, "ops"), 20000);
        ck_assert_double_eq(jnum(m, "gets"), 20000);
        ck_assert_double_eq(jnum(m, "batch_size"), 7);
        ck_assert_str_eq(jstr(m, "multi_get"), "kv_multi_get");
        ck_assert_str_eq(jstr(m, "latency_per_key"), "batch time / batch size");
        ck_assert_double_gt(jnum(m, "p50_us"), 0);
        ck_assert_double_le(jnum(m, "p50_us"), jnum(m, "p999_us"));
    }
    ck_assert_double_eq(jnum(mr, "found"), 20000);
    ck_assert_double_eq(jnum(mm, "found"), 0);
    /* the same database, other random keys: the same tables per key */
    assert_near(jnum(mr, "tables_probed_per_get"), jnum(rr, "tables_probed_per_get"), 0.1,
                "tables probed per key, multireadrandom");
    assert_near(jnum(mm, "tables_probed_per_get"), jnum(rm, "tables_probed_per_get"), 0.1,
                "tables probed per key, multireadmissing");
    ck_assert_double_gt(jnum(mm, "tables_probed_per_get"), 1);
    assert_near(jnum(mm, "filter_negatives_per_get") + jnum(mm, "false_positives_per_get"),
                jnum(mm, "tables_probed_per_get"), 1e-6, "negatives + false positives");
    ck_assert_double_le(jnum(mm, "measured_fpr"), 0.03);
    ck_assert(!jfind(rr, "batch_size")); /* single-key runs say nothing of batches */
    ck_assert_ptr_nonnull(strstr(o.err, "batches  : 7 keys each, kv_multi_get;"));
    ck_assert_ptr_nonnull(strstr(o.err, "micros per key (batch time / batch size)"));
    output_free(&o);

    /* an engine without a multi-get gets the keys one by one, and says so */
    char ldb[700];
    snprintf(ldb, sizeof ldb, "--db=%s", path("lmdb"));
    const char *lmdb[] = {ldb, "--engine=lmdb", "--num=2000", "--json",
                          "--benchmarks=fillrandom,multireadrandom,multireadmissing", NULL};
    run_ok(&o, lmdb);
    ck_assert_int_eq(json_lines(o.out, objs, 8), 3);
    ck_assert_double_eq(jnum(&objs[1], "found"), 2000);
    ck_assert_double_eq(jnum(&objs[2], "found"), 0);
    ck_assert_str_eq(jstr(&objs[1], "multi_get"), "get per key");
    ck_assert_double_eq(jnum(&objs[1], "batch_size"), 32);
    ck_assert_ptr_nonnull(strstr(o.err, "get per key (the engine has no multi-get)"));
    output_free(&o);
}
END_TEST

/* ---- filters off ------------------------------------------------------------------------ */

/* readmissing's line from a run of fillrandom,compact,readmissing. */
static void missing_run(const char *db, const char *bits, struct jobj *out)
{
    char d[700];
    snprintf(d, sizeof d, "--db=%s", db);
    const char *args[] = {d, "--num=" NUM, "--json", "--cache_size=0", SMALL_MEMTABLE, bits,
                          "--benchmarks=fillrandom,compact,readmissing", NULL};
    struct output o;
    run_ok(&o, args);
    struct jobj objs[4];
    ck_assert_int_eq(json_lines(o.out, objs, 4), 3);
    *out = objs[2];
    ck_assert_str_eq(jstr(out, "benchmark"), "readmissing");
    check_common(out, 0);
    output_free(&o);
}

START_TEST(no_filters_read_more_blocks)
{
    struct jobj with, without;
    missing_run(path("with"), "--bloom_bits=10", &with);
    missing_run(path("without"), "--bloom_bits=0", &without);
    ck_assert_double_eq(jnum(&with, "found"), 0);
    ck_assert_double_eq(jnum(&without, "found"), 0);
    ck_assert_double_gt(jnum(&with, "filter_negatives_per_get"), 0.9);
    ck_assert_double_eq(jnum(&without, "filter_negatives_per_get"), 0);
    ck_assert_double_eq(jnum(&without, "false_positives_per_get"), 0);
    /* no cache: every probe that passes reads a block */
    assert_near(jnum(&without, "data_block_reads_per_get"),
                jnum(&without, "tables_probed_per_get"), 1e-9, "reads without filters");
    ck_assert_double_gt(jnum(&without, "data_block_reads_per_get"), 0.9);
    ck_assert_double_lt(jnum(&with, "data_block_reads_per_get"), 0.05);
    ck_assert_double_gt(jnum(&without, "bytes_read_per_get"),
                        10 * jnum(&with, "bytes_read_per_get"));
    ck_assert_double_eq(jnum(&without, "measured_fpr"), 1);
    ck_assert_double_eq(jnum(&without, "expected_fpr"), 1);
    ck_assert_double_eq(jnum(&without, "cache_hit_ratio"), 0);
}
END_TEST

/* --memtable_filter: on by default, each get of a missing key is ruled out
 * by the memtable's filter (and by the immutable one's, when there is one:
 * up to 2 per get); off, none is, and the answers are the same. */
START_TEST(memtable_filter_per_get)
{
    struct jobj objs[2][4];
    for (int on = 0; on <= 1; on++) {
        char d[700];
        snprintf(d, sizeof d, "--db=%s", path(on ? "on" : "off"));
        const char *args[] = {d, "--num=" NUM, "--json", SMALL_MEMTABLE,
                              on ? "--memtable_filter" : "--memtable_filter=0",
                              "--benchmarks=fillrandom,readmissing,readrandom", NULL};
        struct output o;
        run_ok(&o, args);
        ck_assert_int_eq(json_lines(o.out, objs[on], 4), 3);
        for (int i = 0; i < 3; i++)
            ck_assert_double_eq(jnum(&objs[on][i], "memtable_filter"), on);
        ck_assert_msg((strstr(o.err, ", no memtable filter;") != NULL) == !on, "%s", o.err);
        output_free(&o);
    }
    const struct jobj *m0 = &objs[0][1], *m1 = &objs[1][1], *r0 = &objs[0][2], *r1 = &objs[1][2];
    ck_assert_str_eq(jstr(m1, "benchmark"), "readmissing");
    ck_assert_double_eq(jnum(m0, "memtable_filter_negatives_per_get"), 0);
    ck_assert_double_eq(jnum(r0, "memtable_filter_negatives_per_get"), 0);
    ck_assert_double_ge(jnum(m1, "memtable_filter_negatives_per_get"), 0.9);
    ck_assert_double_le(jnum(m1, "memtable_filter_negatives_per_get"), 2);
    ck_assert_double_le(jnum(r1, "memtable_filter_negatives_per_get"), 2);
    ck_assert_double_eq(jnum(m0, "found"), 0);
    ck_assert_double_eq(jnum(m1, "found"), 0);
    ck_assert_double_eq(jnum(r0, "found"), 20000);
    ck_assert_double_eq(jnum(r1, "found"), 20000);
}
END_TEST


/* --filter_keyed_hash: the database's filters hash with SipHash under its
 * secret; the answers and the filters' false-positive rate are those of
 * seeded XXH3, and every table it wrote says so. */
START_TEST(filter_keyed_hash_gives_the_same_answers)
{
    struct jobj objs[2][5];
    for (int on = 0; on <= 1; on++) {
        char d[700];
        const char *db = path(on ? "keyed" : "plain");
        snprintf(d, sizeof d, "--db=%s", db);
        const char *args[] = {d, "--num=" NUM, "--json", "--cache_size=0", SMALL_MEMTABLE,
                              on ? "--filter_keyed_hash" : "--filter_keyed_hash=0",
                              "--benchmarks=fillrandom,compact,readmissing,readrandom", NULL};
        struct output o;
        run_ok(&o, args);
        ck_assert_int_eq(json_lines(o.out, objs[on], 5), 4);
        for (int i = 0; i < 4; i++)
            ck_assert_double_eq(jnum(&objs[on][i], "filter_keyed_hash"), on);
        ck_assert_msg((strstr(o.err, "Filter hash: keyed: SipHash-2-4") != NULL) == on, "%s",
                      o.err);
        output_free(&o);
        /* The tables kvbench left: keyed ones exactly when asked. */
        DIR *dd = opendir(db);
        ck_assert_ptr_nonnull(dd);
        struct dirent *de;
        unsigned tables = 0;
        while ((de = readdir(dd)) != NULL) {
            size_t n = strlen(de->d_name);
            if (n < 4 || strcmp(de->d_name + n - 4, ".sst") != 0)
                continue;
            char tp[1200];
            snprintf(tp, sizeof tp, "%s/%s", db, de->d_name);
            kv_sst_reader *r;
            ck_assert_int_eq(kv_sst_reader_open(tp, NULL, 1, &r), KV_OK);
            kv_sst_properties p;
            kv_sst_reader_properties(r, &p);
            ck_assert_int_eq(p.filter_hash,
                             on ? KV_SST_FILTER_HASH_KEYED : KV_SST_FILTER_HASH_CALLER);
            kv_sst_reader_close(r);
            tables++;
        }
        closedir(dd);
        ck_assert_uint_gt(tables, 0);
    }
    for (int on = 0; on <= 1; on++) {
        const struct jobj *m = &objs[on][2], *r = &objs[on][3];
        ck_assert_str_eq(jstr(m, "benchmark"), "readmissing");
        ck_assert_str_eq(jstr(r, "benchmark"), "readrandom");
        ck_assert_double_eq(jnum(m, "found"), 0);
        ck_assert_double_eq(jnum(r, "found"), 20000);
        /* 20,000 missing gets at an expected 0.9%: ~180 false positives. */
        ck_assert_msg(jnum(m, "measured_fpr") > 0.002 && jnum(m, "measured_fpr") < 0.025,
                      "keyed %d: measured_fpr %g", on, jnum(m, "measured_fpr"));
    }
}
END_TEST

/* The default run's comparison: a second database without filters, same keys. */
START_TEST(nofilter_compares_and_cleans_up)
{
    char db[700];
    snprintf(db, sizeof db, "--db=%s", path("db"));
    const char *args[] = {db, "--num=" NUM, "--json", "--cache_size=0", SMALL_MEMTABLE,
                          "--benchmarks=fillrandom,compact,readmissing,nofilter", NULL};
    struct output o;
    run_ok(&o, args);
    struct jobj objs[8];
    ck_assert_int_eq(json_lines(o.out, objs, 8), 4);
    const struct jobj *with = line_of(objs, 4, "readmissing", 0);
    const struct jobj *without = line_of(objs, 4, "readmissing", 1);
    ck_assert_double_eq(jnum(with, "bloom_bits"), 10);
    ck_assert_double_eq(jnum(without, "bloom_bits"), 0);
    ck_assert_double_eq(jnum(without, "found"), 0);
    ck_assert_double_eq(jnum(without, "filter_negatives_per_get"), 0);
    ck_assert_double_gt(jnum(without, "data_block_reads_per_get"),
                        jnum(with, "data_block_reads_per_get") + 0.8);
    ck_assert_ptr_nonnull(strstr(o.err, "What the filters saved"));
    ck_assert_ptr_nonnull(strstr(o.err, "filters off"));
    struct stat st;
    ck_assert_int_ne(stat(path("db.nofilter"), &st), 0); /* the second database is gone */
    ck_assert_int_eq(stat(path("db"), &st), 0);          /* the first stays */
    output_free(&o);
}
END_TEST

/* --use_direct_reads: with no block cache, every data block a get reads is
 * a device read (O_DIRECT), and the nofilter summary says what the filters
 * spared the device; without the flag the figure is there and 0; on tmpfs
 * the run warns that O_DIRECT was refused and counts no device read. The
 * database lies under the current directory (ctest's build tree, on a
 * disk), not TMPDIR, which may be tmpfs. */
static void direct_run(const char *db, const char *direct, struct jobj *objs, struct output *o)
{
    char d[700];
    snprintf(d, sizeof d, "--db=%s", db);
    const char *args[] = {d, "--num=" NUM, "--json", "--cache_size=0", SMALL_MEMTABLE,
                          "--compression_type=none", direct,
                          "--benchmarks=fillrandom,compact,readrandom,readmissing,nofilter", NULL};
    run_ok(o, args);
    ck_assert_int_eq(json_lines(o->out, objs, 8), 5);
}

START_TEST(direct_reads_count_device_reads)
{
    char disk[64];
    snprintf(disk, sizeof disk, "kvbench-direct-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(disk));
    char db[128];
    snprintf(db, sizeof db, "%s/db", disk);
    struct jobj objs[8];
    struct output o;

    direct_run(db, "--use_direct_reads=1", objs, &o);
    const struct jobj *rr = line_of(objs, 5, "readrandom", 0);
    const struct jobj *with = line_of(objs, 5, "readmissing", 0);
    const struct jobj *without = line_of(objs, 5, "readmissing", 1);
    ck_assert_msg(strstr(o.err, "refused O_DIRECT") == NULL, "%s", o.err);
    ck_assert_double_eq(jnum(rr, "use_direct_reads"), 1);
    ck_assert_double_eq(jnum(rr, "direct_reads"), 1);
    ck_assert_double_eq(jnum(rr, "found"), 20000);
    ck_assert_double_gt(jnum(rr, "device_reads_per_get"), 0.9);
    ck_assert_double_eq(jnum(rr, "device_reads_per_get"), jnum(rr, "data_block_reads_per_get"));
    ck_assert_double_ge(jnum(rr, "device_read_bytes_per_get"), 4096 * 0.9);
    ck_assert_double_eq(jnum(without, "direct_reads"), 1); /* the second database too */
    ck_assert_double_gt(jnum(without, "device_reads_per_get"),
                        jnum(with, "device_reads_per_get") + 0.8);
    ck_assert_ptr_nonnull(strstr(o.err, "device reads"));
    ck_assert_ptr_nonnull(strstr(o.err, "on the device (O_DIRECT): "));
    ck_assert_ptr_nonnull(strstr(o.err, "Direct I/O:  table data blocks with O_DIRECT"));
    output_free(&o);

    direct_run(db, "--use_direct_reads=0", objs, &o);
    rr = line_of(objs, 5, "readrandom", 0);
    ck_assert_double_eq(jnum(rr, "use_direct_reads"), 0);
    ck_assert_double_eq(jnum(rr, "direct_reads"), 0);
    ck_assert_double_gt(jnum(rr, "data_block_reads_per_get"), 0.9);
    ck_assert_double_eq(jnum(rr, "device_reads_per_get"), 0);
    output_free(&o);
    ck_assert_int_eq(nftw(disk, remove_one, 16, FTW_DEPTH | FTW_PHYS), 0);

    /* tmpfs: this project's machines have /dev/shm on one (Linux 6.6 and
     * later open O_DIRECT there, but its files live in memory: refused). */
    char shm[64];
    snprintf(shm, sizeof shm, "/dev/shm/kvbench-direct-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(shm));
    snprintf(db, sizeof db, "%s/db", shm);
    direct_run(db, "--use_direct_reads", objs, &o);
    rr = line_of(objs, 5, "readrandom", 0);
    ck_assert_msg(strstr(o.err, "kvbench: warning: the file system of ") &&
                      strstr(o.err, "refused O_DIRECT"), "%s", o.err);
    ck_assert_double_eq(jnum(rr, "use_direct_reads"), 1);
    ck_assert_double_eq(jnum(rr, "direct_reads"), 0);
    ck_assert_double_eq(jnum(rr, "device_reads_per_get"), 0);
    ck_assert_ptr_nonnull(strstr(o.err, "O_DIRECT refused: through the page cache"));
    output_free(&o);
    ck_assert_int_eq(nftw(shm, remove_one, 16, FTW_DEPTH | FTW_PHYS), 0);
}
END_TEST

/* ---- histogram, threads, text, existing databases --------------------------------------- */

START_TEST(histogram_percentiles)
{
    char db[700];
    snprintf(db, sizeof db, "--db=%s", path("db"));
    const char *args[] = {db, "--num=" NUM, "--json", "--histogram", SMALL_MEMTABLE,
                          "--benchmarks=fillrandom,readrandom,readmissing", NULL};
    struct output o;
    run_ok(&o, args);
    struct jobj objs[4];
    ck_assert_int_eq(json_lines(o.out, objs, 4), 3);
    for (int i = 0; i < 3; i++) {
        check_common(&objs[i], 1);
        double p50 = jnum(&objs[i], "p50_us"), p95 = jnum(&objs[i], "p95_us"),
               p99 = jnum(&objs[i], "p99_us"), p999 = jnum(&objs[i], "p999_us"),
               p9999 = jnum(&objs[i], "p9999_us"), max = jnum(&objs[i], "max_us");
        ck_assert_double_gt(p50, 0);
        ck_assert_double_le(p50, p95);
        ck_assert_double_le(p95, p99);
        ck_assert_double_le(p99, p999);
        ck_assert_double_le(p999, p9999);
        ck_assert_double_le(p9999, max);
        /* the median op cannot be slower than the average of all of them by much */
        ck_assert_double_le(p50, 4 * jnum(&objs[i], "micros_per_op"));
    }
    ck_assert_ptr_nonnull(strstr(o.err, "latency  : p50 "));
    ck_assert_ptr_nonnull(strstr(o.err, ", p99.99 "));
    output_free(&o);
}
END_TEST

/* readwhilewriting: --threads readers share the reads while one more
 * thread writes random keys of the key space; ops and ops_per_sec count
 * the reads alone, writes_per_sec is the writes over the same seconds,
 * and only this benchmark's line has them. The writer rewrites keys that
 * are there, so every read finds its key, and so does a later readrandom. */
START_TEST(readwhilewriting_writes_beside_the_readers)
{
    char db[700];
    snprintf(db, sizeof db, "--db=%s", path("db"));
    const char *args[] = {db, "--num=" NUM, "--reads=200000", "--json", "--histogram",
                          "--threads=2", SMALL_MEMTABLE,
                          "--benchmarks=fillrandom,readwhilewriting,readrandom", NULL};
    struct output o;
    run_ok(&o, args);
    struct jobj objs[4];
    ck_assert_int_eq(json_lines(o.out, objs, 4), 3);
    for (int i = 0; i < 3; i++)
        check_common(&objs[i], 1);
    const struct jobj *rw = line_of(objs, 3, "readwhilewriting", 0);
    ck_assert_double_eq(jnum(rw, "ops"), 200000);
    ck_assert_double_eq(jnum(rw, "gets"), 200000);
    ck_assert_double_eq(jnum(rw, "found"), 200000);
    ck_assert_double_eq(jnum(rw, "threads"), 2);
    double writes = jnum(rw, "writes"), sec = jnum(rw, "seconds");
    ck_assert_double_gt(writes, 0);
    ck_assert_double_eq(writes, floor(writes));
    assert_near(jnum(rw, "writes_per_sec"), writes / sec, 1e-3, "writes_per_sec");
    assert_near(jnum(rw, "ops_per_sec"), 200000 / sec, 1e-3, "ops_per_sec counts reads");
    const struct jobj *rr = line_of(objs, 3, "readrandom", 0);
    ck_assert_ptr_null(jfind(rr, "writes_per_sec"));
    ck_assert_ptr_null(jfind(line_of(objs, 3, "fillrandom", 0), "writes_per_sec"));
    ck_assert_double_eq(jnum(rr, "found"), 200000);
    ck_assert_ptr_nonnull(strstr(o.err, "    writer   : "));
    ck_assert_ptr_nonnull(strstr(o.err, "\nreadwhilewriting : "));
    output_free(&o);
}
END_TEST

/* --threads works for every read benchmark on a database kept from an
 * earlier run (--use_existing_db): each line says the threads it ran
 * with, and the reads of present keys find all of them. */
START_TEST(threads_with_an_existing_db)
{
    char db[700];
    snprintf(db, sizeof db, "--db=%s", path("db"));
    const char *fill[] = {db, "--num=" NUM, "--json", SMALL_MEMTABLE,
                          "--benchmarks=fillrandom,waitforcompaction", NULL};
    struct output o;
    run_ok(&o, fill);
    output_free(&o);
    static const char *const names[] = {"readrandom", "readmissing", "readhot",
                                        "multireadrandom", "multireadmissing",
                                        "readwhilewriting", "seekrandom", "readseq",
                                        "readreverse"};
    const int nn = (int)(sizeof names / sizeof names[0]);
    char list[512] = "--benchmarks=";
    for (int i = 0; i < nn; i++) {
        strcat(list, names[i]);
        strcat(list, i + 1 < nn ? "," : "");
    }
    const char *reuse[] = {db, "--num=" NUM, "--json", "--use_existing_db", "--threads=3",
                           SMALL_MEMTABLE, list, NULL};
    run_ok(&o, reuse);
    struct jobj objs[16];
    ck_assert_int_eq(json_lines(o.out, objs, 16), nn);
    for (int i = 0; i < nn; i++) {
        const struct jobj *j = &objs[i];
        ck_assert_str_eq(jstr(j, "benchmark"), names[i]);
        check_common(j, 0);
        ck_assert_double_eq(jnum(j, "threads"), 3);
        ck_assert_double_eq(jnum(j, "ops"), 20000);
        int missing = strstr(names[i], "missing") != NULL;
        ck_assert_msg(jnum(j, "found") == (missing ? 0 : 20000), "%s found %g", names[i],
                      jnum(j, "found"));
    }
    output_free(&o);
}
END_TEST

START_TEST(threads_share_the_ops)
{
    char db[700];
    snprintf(db, sizeof db, "--db=%s", path("db"));
    const char *args[] = {db, "--num=" NUM, "--json", "--threads=4", SMALL_MEMTABLE,
                          "--benchmarks=fillrandom,readrandom,readmissing,readseq,readreverse",
                          NULL};
    struct output o;
    run_ok(&o, args);
    struct jobj objs[8];
    ck_assert_int_eq(json_lines(o.out, objs, 8), 5);
    ck_assert_double_eq(jnum(&objs[0], "ops"), 20000);
    for (int i = 0; i < 5; i++) {
        check_common(&objs[i], 0);
        ck_assert_double_eq(jnum(&objs[i], "threads"), 4);
    }
    ck_assert_double_eq(jnum(&objs[1], "found"), 20000);
    ck_assert_double_eq(jnum(&objs[2], "found"), 0);
    ck_assert_double_eq(jnum(&objs[3], "found"), 20000);
    ck_assert_double_eq(jnum(&objs[4], "found"), 20000);
    output_free(&o);
}
END_TEST

START_TEST(text_result_line)
{
    char db[700];
    snprintf(db, sizeof db, "--db=%s", path("db"));
    const char *args[] = {db, "--num=" NUM, SMALL_MEMTABLE,
                          "--benchmarks=fillseq,readrandom,readmissing,readseq", NULL};
    struct output o;
    run_ok(&o, args);
    ck_assert_ptr_nonnull(strstr(o.out, "Entries:     20000\n"));
    ck_assert_ptr_nonnull(strstr(o.out, "------------------------------------------------\n"));
    const char *l = strstr(o.out, "\nreadrandom   : ");
    ck_assert_ptr_nonnull(l);
    l++;
    char name[32];
    double micros, secs;
    long ops_s;
    unsigned long ops, found, of;
    ck_assert_int_eq(sscanf(l, "%31s : %lf micros/op %ld ops/sec %lf seconds %lu operations; "
                               "(%lu of %lu found)",
                            name, &micros, &ops_s, &secs, &ops, &found, &of), 7);
    ck_assert_str_eq(name, "readrandom");
    ck_assert_uint_eq(ops, 20000);
    ck_assert_uint_eq(found, 20000);
    ck_assert_uint_eq(of, 20000);
    ck_assert(l[26] == ' ' && !strncmp(l + 27, "micros/op", 9)); /* "%-12s : %11.3f" */
    ck_assert_ptr_nonnull(strstr(o.out, "(0 of 20000 found)"));
    /* a scan's line has db_bench's MB/s: 20000 pairs of 116 bytes */
    const char *q = strstr(o.out, "\nreadseq      : ");
    ck_assert_ptr_nonnull(q);
    double mbs;
    ck_assert_int_eq(sscanf(q + 1, "%31s : %lf micros/op %ld ops/sec %lf seconds %lu operations; "
                                   "%lf MB/s (%lu of %lu found)",
                            name, &micros, &ops_s, &secs, &ops, &mbs, &found, &of), 8);
    ck_assert_uint_eq(found, 20000);
    assert_near(mbs, (double)ops_s * 116 / 1e6, 0.01, "readseq MB/s"); /* seconds has 3 digits */

    ck_assert_ptr_nonnull(strstr(o.out, "    FPR      : measured "));
    /* a write's line ends at "operations;": no "found" */
    const char *w = strstr(o.out, "\nfillseq      : ");
    ck_assert_ptr_nonnull(w);
    const char *eol = strchr(w + 1, '\n');
    ck_assert(eol && !strncmp(eol - 11, "operations;", 11));
    output_free(&o);
}
END_TEST

START_TEST(use_existing_db)
{
    char db[700];
    snprintf(db, sizeof db, "--db=%s", path("db"));
    const char *fill[] = {db, "--num=" NUM, "--json", "--benchmarks=fillseq", NULL};
    struct output o;
    run_ok(&o, fill);
    output_free(&o);
    const char *reuse[] = {db, "--num=" NUM, "--json", "--use_existing_db",
                           "--benchmarks=fillrandom,readrandom", NULL};
    run_ok(&o, reuse);
    struct jobj objs[4];
    ck_assert_int_eq(json_lines(o.out, objs, 4), 1); /* fillrandom: skipped */
    ck_assert_str_eq(jstr(&objs[0], "benchmark"), "readrandom");
    ck_assert_double_eq(jnum(&objs[0], "found"), 20000);
    ck_assert_ptr_nonnull(strstr(o.err, "fillrandom   : skipped"));
    output_free(&o);
    /* without --use_existing_db the database starts empty */
    const char *fresh[] = {db, "--num=" NUM, "--json", "--benchmarks=readrandom", NULL};
    run_ok(&o, fresh);
    ck_assert_int_eq(json_lines(o.out, objs, 4), 1);
    ck_assert_double_eq(jnum(&objs[0], "found"), 0);
    output_free(&o);
    /* --use_existing_db of a missing database is an error */
    char missing[700];
    snprintf(missing, sizeof missing, "--db=%s", path("nothing"));
    const char *none[] = {missing, "--use_existing_db", "--benchmarks=readrandom", NULL};
    run(&o, NULL, none);
    ck_assert_int_eq(o.status, 1);
    ck_assert_ptr_nonnull(strstr(o.err, "kvbench: open "));
    output_free(&o);
}
END_TEST

START_TEST(drop_cache_runs)
{
    char db[700];
    snprintf(db, sizeof db, "--db=%s", path("db"));
    const char *args[] = {db, "--num=" NUM, "--json", "--drop_cache", "--cache_size=0",
                          SMALL_MEMTABLE, "--benchmarks=fillseq,compact,readrandom", NULL};
    struct output o;
    run_ok(&o, args);
    struct jobj objs[4];
    ck_assert_int_eq(json_lines(o.out, objs, 4), 3);
    const struct jobj *r = &objs[2];
    ck_assert_double_eq(jnum(r, "found"), 20000);
    /* no block cache: each get of a present key reads its block */
    assert_near(jnum(r, "data_block_reads_per_get"), 1, 1e-9, "reads per get");
    ck_assert_double_gt(jnum(r, "bytes_read_per_get"), 100);
    output_free(&o);
}
END_TEST

/* ---- --db: never a file kvbench did not create ------------------------------------------ */

/* kvbench --db=DIR once deleted every *.log, *.sst, *.ldb, LOG, CURRENT
 * and MANIFEST* it found there, the user's app.log and backup.sst too, and
 * --db=<a regular file> exited 1 without a word. */

static char *slurp(const char *p); /* a file's bytes, NUL-terminated (below) */

/* Writes `text` to file p. */
static void put_file(const char *p, const char *text)
{
    FILE *f = fopen(p, "w");
    ck_assert_msg(f != NULL, "%s: %s", p, strerror(errno));
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

/* The user's files, each holding its own name. The last is named as kv
 * names its logs: beside a kv database it is the database's. */
static const char *const user_files[] = {"app.log", "backup.sst", "notes.txt", "LOG",
                                         "CURRENT", "MANIFEST-000001", "000009.ldb",
                                         "000007.log"};
#define NUSER (sizeof user_files / sizeof user_files[0])

static void put_user_files(const char *d, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char p[900];
        snprintf(p, sizeof p, "%s/%s", d, user_files[i]);
        put_file(p, user_files[i]);
    }
}

static void expect_user_files(const char *d, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char p[900];
        snprintf(p, sizeof p, "%s/%s", d, user_files[i]);
        struct stat st;
        ck_assert_msg(stat(p, &st) == 0, "kvbench removed %s", p);
        char *text = slurp(p);
        ck_assert_msg(!strcmp(text, user_files[i]), "kvbench changed %s", p);
        free(text);
    }
}

/* One line on stderr that starts "kvbench: " and holds `want`; no stdout. */
static void expect_refusal(const struct output *o, int status, const char *want)
{
    ck_assert_msg(o->status == status, "exit %d, not %d: %s", o->status, status, o->err);
    ck_assert_msg(o->outlen == 0, "wrote to stdout: %s", o->out);
    ck_assert_msg(!strncmp(o->err, "kvbench: ", 9), "%s", o->err);
    ck_assert_msg(strstr(o->err, want) != NULL, "no \"%s\" in: %s", want, o->err);
    char *nl = strchr(o->err, '\n');
    ck_assert_msg(nl && nl[1] == 0, "not one line: %s", o->err);
}

START_TEST(foreign_directory_is_refused)
{
    const char *mine = path("mine");
    ck_assert_int_eq(mkdir(mine, 0700), 0);
    put_user_files(mine, NUSER);
    char db[700];
    snprintf(db, sizeof db, "--db=%s", mine);
    const char *args[] = {db, "--num=" NUM, "--json", "--benchmarks=fillseq,readrandom", NULL};
    struct output o;
    run(&o, NULL, args);
    expect_refusal(&o, 2, "but no kv database it may reset");
    ck_assert_ptr_nonnull(strstr(o.err, "--use_existing_db"));
    output_free(&o);
    expect_user_files(mine, NUSER);

    /* a kv database given to another engine is not that engine's */
    const char *kvdb = path("kvdb");
    char kd[700];
    snprintf(kd, sizeof kd, "--db=%s", kvdb);
    const char *fill[] = {kd, "--num=" NUM, "--json", "--benchmarks=fillseq", NULL};
    run_ok(&o, fill);
    output_free(&o);
    static const char *const peers[] = {"--engine=leveldb", "--engine=rocksdb"};
    for (int i = 0; i < 2; i++) {
        const char *other[] = {kd, peers[i], "--num=" NUM, "--benchmarks=fillseq", NULL};
        run(&o, NULL, other);
        if (!strstr(o.err, "-DKV_BENCH_PEERS=ON"))
            expect_refusal(&o, 2, i ? "but no rocksdb database it may reset"
                                      : "but no leveldb database it may reset");
        output_free(&o);
    }
    const char *reuse[] = {kd, "--num=" NUM, "--json", "--use_existing_db",
                           "--benchmarks=readrandom", NULL};
    run_ok(&o, reuse);
    struct jobj objs[4];
    ck_assert_int_eq(json_lines(o.out, objs, 4), 1);
    ck_assert_double_eq(jnum(&objs[0], "found"), 20000); /* the other engines left it whole */
    output_free(&o);
}
END_TEST

START_TEST(own_database_is_reset_and_nothing_else)
{
    /* a kv database with the user's files beside it: a fresh run removes
     * the database's files and only them */
    const char *dbdir = path("db");
    char db[700];
    snprintf(db, sizeof db, "--db=%s", dbdir);
    const char *fill[] = {db, "--num=" NUM, "--json", SMALL_MEMTABLE, "--benchmarks=fillseq",
                          NULL};
    struct output o;
    run_ok(&o, fill);
    output_free(&o);
    put_user_files(dbdir, NUSER - 1);
    const char *fresh[] = {db, "--num=" NUM, "--json", "--benchmarks=readrandom", NULL};
    run_ok(&o, fresh);
    struct jobj objs[4];
    ck_assert_int_eq(json_lines(o.out, objs, 4), 1);
    ck_assert_double_eq(jnum(&objs[0], "found"), 0); /* started afresh */
    output_free(&o);
    expect_user_files(dbdir, NUSER - 1);
    /* --use_existing_db deletes nothing, in a foreign directory too: the open
     * fails there, and says so */
    const char *mine = path("mine");
    ck_assert_int_eq(mkdir(mine, 0700), 0);
    put_user_files(mine, NUSER);
    char m[700];
    snprintf(m, sizeof m, "--db=%s", mine);
    const char *reuse[] = {m, "--use_existing_db", "--benchmarks=readrandom", NULL};
    run(&o, NULL, reuse);
    ck_assert_int_eq(o.status, 1);
    ck_assert_ptr_nonnull(strstr(o.err, "kvbench: open "));
    output_free(&o);
    expect_user_files(mine, NUSER);
    /* nofilter's second database, DIR.nofilter, is checked the same way */
    char nf[700];
    snprintf(nf, sizeof nf, "%s.nofilter", dbdir);
    ck_assert_int_eq(mkdir(nf, 0700), 0);
    put_user_files(nf, 2);
    const char *nofilter[] = {db, "--num=" NUM, "--json", "--benchmarks=fillseq,nofilter", NULL};
    run(&o, NULL, nofilter);
    ck_assert_msg(o.status == 1, "exit %d: %s", o.status, o.err);
    ck_assert_ptr_nonnull(strstr(o.err, "kvbench: nofilter: "));
    ck_assert_ptr_nonnull(strstr(o.err, "but no kv database it may reset"));
    output_free(&o);
    expect_user_files(nf, 2);
}
END_TEST

START_TEST(db_that_is_not_a_directory_is_refused)
{
    const char *file = path("file");
    put_file(file, "file");
    char db[700];
    snprintf(db, sizeof db, "--db=%s", file);
    for (int reuse = 0; reuse < 2; reuse++) {
        const char *args[] = {db, "--num=" NUM, "--benchmarks=fillseq",
                              reuse ? "--use_existing_db" : NULL, NULL};
        struct output o;
        run(&o, NULL, args);
        expect_refusal(&o, 2, "is not a directory (a regular file)");
        output_free(&o);
        char *text = slurp(file);
        ck_assert_str_eq(text, "file");
        free(text);
    }
}
END_TEST

START_TEST(chart_csv_that_is_not_a_regular_file_is_refused)
{
    /* --scaling_chart and --timeline_chart read a CSV: a FIFO blocked the
     * open for ever, /dev/zero grew a line to gigabytes. Each is refused at
     * once (the alarm fails a hang), exit 1, a line saying what it is, and
     * nothing drawn beside it. */
    const char *fifo = path("fifo");
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    const char *dir = path("dir");
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    static const struct {
        const char *path, *what;
    } cases[] = {{NULL, "a FIFO or pipe"},
                 {"/dev/zero", "a character device"},
                 {"/dev/null", "a character device"},
                 {NULL, "a directory"}};
    static const char *const flags[] = {"--scaling_chart=", "--timeline_chart="};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (size_t j = 0; j < 2; j++) {
            const char *p = cases[i].path ? cases[i].path : i == 0 ? fifo : dir;
            char arg[800];
            snprintf(arg, sizeof arg, "%s%s", flags[j], p);
            const char *args[] = {arg, NULL};
            struct output o;
            alarm(60);
            run(&o, NULL, args);
            alarm(0);
            ck_assert_msg(o.status == 1, "%s: exit %d: %s", arg, o.status, o.err);
            ck_assert_msg(strstr(o.err, cases[i].what) && strstr(o.err, "not a regular file") &&
                              strstr(o.err, p),
                          "%s: %s", arg, o.err);
            output_free(&o);
        }
    struct stat st;
    ck_assert_int_ne(stat(path("timeline.svg"), &st), 0);
    ck_assert_int_ne(stat(path("scaling.svg"), &st), 0);
}
END_TEST

/* ---- bad command lines ------------------------------------------------------------------- */

START_TEST(bad_flags_exit_2)
{
    static const char *const bad[][3] = {
        {"--bogus=1"},
        {"--num=abc"},
        {"--num=0"},
        {"--num"},
        {"--compression_type=lz4"},
        {"--filter_layout=round"},
        {"--benchmarks=fillseq,nope"},
        {"--threads=0"},
        {"--bloom_bits=-1"},
        {"--sync=maybe"},
        {"--memtable_filter=2"},
        {"--use_direct_reads=2"},
        {"--filter_keyed_hash=2"},
        {"fillseq"},
        {"--key_size=2", "--num=20000"},
        {"--engine=nosuch"},
        {"--engine=lmdb", "--sweep"},
        {"--sweep=bits=1,2"},
        {"--sweep", "--benchmarks=readrandom"},
        {"--scaling=1K,abc"},
        {"--scaling=1.5"},
        {"--scaling=0"},
        {"--scaling"},
        {"--scaling=1M", "--num=1000"},
        {"--scaling=1M", "--engine=kv"},
        {"--scaling=1M", "--sweep"},
        {"--scaling=1M", "--benchmarks=readrandom"},
        {"--scaling=1M", "--engines=kv,kv"},
        {"--scaling=1M", "--engines=kv,nosuch"},
        {"--scaling=1M", "--rounds=0"},
        {"--engines=kv"},
        {"--rounds=3"},
        {"--scaling=1M", "--scaling_chart=x.csv"},
        {"--scaling_chart="},
        {"--min_blob_size=abc"},
        {"--min_blob_size=-2"},
        {"--min_blob_size"},
        {"--blob_file_size=1000"},
        {"--blob_gc_threshold=0"},
        {"--blob_gc_threshold=1.5"},
        {"--idle_compaction_ms=-1"},
        {"--idle_compaction_ms=86400001"},
        {"--value_size=16777217"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct output o;
        run(&o, NULL, bad[i]);
        ck_assert_msg(o.status == 2, "%s: exit %d", bad[i][0], o.status);
        ck_assert_msg(o.outlen == 0, "%s: wrote to stdout", bad[i][0]);
        ck_assert_msg(!strncmp(o.err, "kvbench: ", 9), "%s: %s", bad[i][0], o.err);
        char *nl = strchr(o.err, '\n');
        ck_assert_msg(nl && nl[1] == 0, "%s: not one line: %s", bad[i][0], o.err);
        output_free(&o);
    }
    struct output o;
    const char *help[] = {"--help", NULL};
    run(&o, NULL, help);
    ck_assert_int_eq(o.status, 0);
    static const char *const names[] = {
        "fillseq", "fillrandom", "overwrite", "fillsync", "readrandom", "readmissing",
        "readhot", "readseq", "readreverse", "seekrandom", "deleterandom", "compact",
        "waitforcompaction", "reopen", "stats", "--bloom_bits", "--filter_layout",
        "--memtable_filter", "--use_direct_reads", "--filter_keyed_hash", "--drop_cache",
        "--stats_interval", "--sweep",
        "--scaling=", "--engines=", "--rounds=", "--scaling_chart=", "--min_blob_size=",
        "--blob_file_size=", "--blob_gc_threshold=", "--idle_compaction_ms=", "bytes_written",
        "write_amp", "db_bytes",
        "blob_bytes", "blob_garbage_bytes", "blob_reads_per_get"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        ck_assert_msg(strstr(o.out, names[i]) != NULL, "--help lacks %s", names[i]);
    output_free(&o);
}
END_TEST

/* Each message names the flag and its value, says what is wrong with it in
 * words (no constant of the source) and what the flag wants. */
START_TEST(bad_flag_messages_say_what_is_wrong)
{
    static const struct {
        const char *arg, *line;
    } cases[] = {
        {"--reads=abc", "kvbench: --reads=abc: not a number (want an integer from 1 to 1e15, "
                        "or -1 for num)\n"},
        {"--reads=2.5", "kvbench: --reads=2.5: not an integer (want an integer from 1 to 1e15, "
                        "or -1 for num)\n"},
        {"--num=0", "kvbench: --num=0: out of range (want an integer from 1 to 1e15)\n"},
        {"--reads", "kvbench: --reads needs a value: --reads=VALUE (want an integer from 1 to "
                    "1e15, or -1 for num)\n"},
        {"--benchmarks", "kvbench: --benchmarks needs a value: --benchmarks=VALUE (want a comma "
                         "list of the benchmarks kvbench --help lists)\n"},
        {"--bloom_bits=nan", "kvbench: --bloom_bits=nan: not a number (want a number from 0 to "
                             "1000)\n"},
        {"--threads=1e9", "kvbench: --threads=1e9: out of range (want an integer from 1 to 256)\n"},
        {"--filter_layout=round", "kvbench: --filter_layout=round: unknown layout (want blocked "
                                  "or classic)\n"},
        {"--db=", "kvbench: --db=: empty (want a directory)\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct output o;
        const char *args[] = {cases[i].arg, NULL};
        run(&o, NULL, args);
        ck_assert_msg(o.status == 2, "%s: exit %d", cases[i].arg, o.status);
        ck_assert_msg(strcmp(o.err, cases[i].line) == 0, "%s: \"%s\", not \"%s\"", cases[i].arg,
                      o.err, cases[i].line);
        output_free(&o);
    }
}
END_TEST

/* ---- LevelDB and RocksDB: the same workloads, or a clear error --------------------------- */

START_TEST(peer_engines)
{
    static const char *const engines[] = {"leveldb", "rocksdb"};
    for (int i = 0; i < 2; i++) {
        char db[700], eng[64];
        snprintf(db, sizeof db, "--db=%s", path("%s", engines[i]));
        snprintf(eng, sizeof eng, "--engine=%s", engines[i]);
        const char *args[] = {db, eng, "--num=" NUM, "--json", SMALL_MEMTABLE,
                              "--benchmarks=fillrandom,compact,readrandom,readmissing,readseq,"
                              "multireadrandom,multireadmissing",
                              NULL};
        struct output o;
        run(&o, NULL, args);
        if (o.status == 2) { /* built without -DKV_BENCH_PEERS=ON: says how */
            ck_assert_ptr_nonnull(strstr(o.err, "-DKV_BENCH_PEERS=ON"));
            ck_assert_ptr_nonnull(strstr(o.err, "libleveldb-dev librocksdb-dev"));
            ck_assert(strchr(o.err, '\n') == o.err + o.errlen - 1);
            ck_assert_uint_eq(o.outlen, 0);
            output_free(&o);
            continue;
        }
        ck_assert_msg(o.status == 0, "%s: exit %d: %s", engines[i], o.status, o.err);
        struct jobj objs[8];
        ck_assert_int_eq(json_lines(o.out, objs, 8), 7);
        for (int k = 0; k < 7; k++) {
            check_common(&objs[k], 0);
            ck_assert_str_eq(jstr(&objs[k], "engine"), engines[i]);
        }
        ck_assert_double_eq(jnum(&objs[2], "found"), 20000);
        ck_assert_double_eq(jnum(&objs[3], "found"), 0);
        ck_assert_double_eq(jnum(&objs[4], "found"), 20000);
        /* RocksDB's batched MultiGet; LevelDB has none: a get per key */
        ck_assert_double_eq(jnum(&objs[5], "found"), 20000);
        ck_assert_double_eq(jnum(&objs[6], "found"), 0);
        ck_assert_str_eq(jstr(&objs[5], "multi_get"),
                         i ? "rocksdb_batched_multi_get_cf" : "get per key");
        if (i == 1) { /* RocksDB's tickers, beside the figures made from them */
            const struct jobj *m = &objs[3];
            double useful = jnum(m, "rocksdb_bloom_filter_useful");
            double pos = jnum(m, "rocksdb_bloom_filter_full_positive");
            double tp = jnum(m, "rocksdb_bloom_filter_full_true_positive");
            ck_assert_double_eq(tp, 0); /* no key asked for is present */
            ck_assert_double_gt(useful, 0.9 * 20000);
            assert_near(jnum(m, "filter_negatives_per_get"), useful / 20000, 1e-9, "useful");
            assert_near(jnum(m, "false_positives_per_get"), pos / 20000, 1e-9, "positives");
            ck_assert_double_lt(jnum(m, "measured_fpr"), 0.03);
            ck_assert_double_gt(jnum(m, "expected_fpr"), 0.002);
            ck_assert_ptr_nonnull(strstr(o.err, "    rocksdb  : bloom.filter.useful "));
        }
        output_free(&o);
    }
}
END_TEST

/* --min_blob_size turns RocksDB's blob files on: a fill with every value
 * a blob (0) leaves blob files, and reads find every key; without it
 * RocksDB has none. LevelDB has none either way, and says so. */
START_TEST(peer_blob_files)
{
    char db[700];
    snprintf(db, sizeof db, "--db=%s", path("rocksdb"));
    const char *blobs[] = {db, "--engine=rocksdb", "--num=2000", "--value_size=1000", "--json",
                           "--min_blob_size=0", SMALL_MEMTABLE,
                           "--benchmarks=fillrandom,waitforcompaction,readrandom", NULL};
    struct output o;
    run(&o, NULL, blobs);
    if (o.status == 2) { /* built without -DKV_BENCH_PEERS=ON: peer_engines checks the message */
        ck_assert_ptr_nonnull(strstr(o.err, "-DKV_BENCH_PEERS=ON"));
        output_free(&o);
        return;
    }
    ck_assert_msg(o.status == 0, "rocksdb: exit %d: %s", o.status, o.err);
    struct jobj objs[4];
    ck_assert_int_eq(json_lines(o.out, objs, 4), 3);
    for (int k = 0; k < 3; k++) {
        check_common(&objs[k], 0);
        ck_assert_double_eq(jnum(&objs[k], "min_blob_size"), 0);
    }
    ck_assert_double_gt(jnum(&objs[1], "blob_bytes"), 0);
    ck_assert_double_ge(jnum(&objs[1], "db_bytes"), jnum(&objs[1], "blob_bytes"));
    ck_assert_double_eq(jnum(&objs[2], "found"), 2000);
    ck_assert_ptr_nonnull(strstr(o.err, "Blob files:  values of 0 bytes or more "
                                        "(enable_blob_files"));
    output_free(&o);

    const char *none[] = {db, "--engine=rocksdb", "--num=2000", "--value_size=1000", "--json",
                          SMALL_MEMTABLE, "--benchmarks=fillrandom,waitforcompaction", NULL};
    run_ok(&o, none);
    ck_assert_int_eq(json_lines(o.out, objs, 4), 2);
    ck_assert_double_eq(jnum(&objs[1], "blob_bytes"), 0);
    ck_assert(!jfind(&objs[1], "min_blob_size"));
    ck_assert_ptr_nonnull(strstr(o.err, "Blob files:  off (its default"));
    output_free(&o);

    char ldb[700];
    snprintf(ldb, sizeof ldb, "--db=%s", path("leveldb"));
    const char *leveldb[] = {ldb, "--engine=leveldb", "--num=2000", "--json", "--min_blob_size=0",
                             "--benchmarks=fillrandom,readrandom", NULL};
    run_ok(&o, leveldb);
    ck_assert_int_eq(json_lines(o.out, objs, 4), 2);
    check_common(&objs[0], 0);
    ck_assert_double_eq(jnum(&objs[0], "blob_bytes"), 0);
    ck_assert_double_eq(jnum(&objs[1], "found"), 2000);
    ck_assert_ptr_nonnull(strstr(o.err, "--min_blob_size does not apply (leveldb has none)"));
    output_free(&o);
}
END_TEST

/* ---- LMDB: always built, a B-tree without filters -------------------------------------- */

/* Every read and scan benchmark runs; reads find what they should; the JSON
 * claims no filter figure (no per-get probes, negatives, FPR; bloom_bits 0)
 * and its stats are LMDB's tree. */
START_TEST(lmdb_engine)
{
    char db[700];
    snprintf(db, sizeof db, "--db=%s", path("lmdb"));
    const char *args[] = {db, "--engine=lmdb", "--num=2000", "--json", "--histogram",
                          "--benchmarks=fillrandom,readrandom,readmissing,readseq,readreverse,"
                          "seekrandom,compact,stats,nofilter",
                          NULL};
    struct output o;
    run_ok(&o, args);
    static const char *const names[] = {"fillrandom", "readrandom", "readmissing", "readseq",
                                        "readreverse", "seekrandom", "compact", "stats"};
    struct jobj objs[12];
    ck_assert_int_eq(json_lines(o.out, objs, 12), 8);
    static const char *const filter_fields[] = {
        "tables_probed_per_get", "filter_negatives_per_get", "false_positives_per_get",
        "data_block_reads_per_get", "blocks_sought_per_get", "bytes_read_per_get",
        "cache_hit_ratio", "measured_fpr", "expected_fpr", "filter_layout", "filter_bytes",
        "filter_bits_per_key", "rocksdb_bloom_filter_useful", "gets"};
    for (int k = 0; k < 8; k++) {
        const struct jobj *j = &objs[k];
        ck_assert_str_eq(jstr(j, "benchmark"), names[k]);
        ck_assert_str_eq(jstr(j, "engine"), "lmdb");
        ck_assert_double_eq(jnum(j, "bloom_bits"), 0);
        check_storage(j);
        ck_assert_double_eq(jnum(j, "blob_bytes"), 0); /* LMDB has none */
        ck_assert(!jfind(j, "min_blob_size") && !jfind(j, "blob_reads_per_get"));
        for (size_t f = 0; f < sizeof filter_fields / sizeof filter_fields[0]; f++)
            ck_assert_msg(!jfind(j, filter_fields[f]), "%s: lmdb claims %s", names[k],
                          filter_fields[f]);
        if (k < 6) {
            ck_assert_double_eq(jnum(j, "ops"), 2000);
            ck_assert(jnum(j, "p999_us") >= jnum(j, "p50_us"));
        }
    }
    ck_assert_double_eq(jnum(&objs[1], "found"), 2000); /* readrandom */
    ck_assert_double_eq(jnum(&objs[2], "found"), 0);    /* readmissing */
    for (int k = 3; k < 6; k++)                          /* readseq, readreverse, seekrandom */
        ck_assert_double_eq(jnum(&objs[k], "found"), 2000);
    ck_assert_double_eq(jnum(&objs[7], "lmdb_entries"), 2000);
    ck_assert_double_ge(jnum(&objs[7], "lmdb_depth"), 2);
    ck_assert_double_gt(jnum(&objs[7], "lmdb_leaf_pages"), 0);
    ck_assert_ptr_nonnull(strstr(o.err, "Filters:     none (lmdb has no filters"));
    ck_assert_ptr_nonnull(strstr(o.err, "nofilter     : skipped: lmdb has no filters"));
    ck_assert_ptr_null(strstr(o.err, "FPR"));
    output_free(&o);

    /* several threads share the gets, each with its read transaction */
    const char *threads[] = {db, "--engine=lmdb", "--num=2000", "--json", "--threads=4",
                             "--use_existing_db", "--benchmarks=readrandom,seekrandom,readrandom",
                             NULL};
    run_ok(&o, threads);
    ck_assert_int_eq(json_lines(o.out, objs, 12), 3);
    for (int k = 0; k < 3; k++)
        ck_assert_double_eq(jnum(&objs[k], "found"), 2000);
    output_free(&o);

    /* zstd has no LMDB counterpart: refused, one line */
    const char *zstd[] = {db, "--engine=lmdb", "--compression_type=zstd", NULL};
    run(&o, NULL, zstd);
    expect_refusal(&o, 2, "LMDB does not compress");
    output_free(&o);
}
END_TEST

/* --db with --engine=lmdb: user files are refused and kept; an LMDB
 * directory is reset by removing data.mdb and lock.mdb, nothing else. */
START_TEST(lmdb_db_directory)
{
    const char *mine = path("mine");
    ck_assert_int_eq(mkdir(mine, 0700), 0);
    put_user_files(mine, NUSER);
    char m[700];
    snprintf(m, sizeof m, "--db=%s", mine);
    const char *refused[] = {m, "--engine=lmdb", "--num=2000", "--benchmarks=fillseq", NULL};
    struct output o;
    run(&o, NULL, refused);
    expect_refusal(&o, 2, "but no lmdb database it may reset (no LMDB data.mdb and lock.mdb)");
    output_free(&o);
    expect_user_files(mine, NUSER);
    /* --use_existing_db there opens nothing and creates nothing */
    const char *reuse[] = {m, "--engine=lmdb", "--use_existing_db", "--benchmarks=readrandom",
                           NULL};
    run(&o, NULL, reuse);
    ck_assert_int_eq(o.status, 1);
    ck_assert_ptr_nonnull(strstr(o.err, "no LMDB database there"));
    output_free(&o);
    expect_user_files(mine, NUSER);
    struct stat st;
    ck_assert_int_ne(stat(path("mine/data.mdb"), &st), 0);

    /* a kv database is not LMDB's, nor an LMDB one kv's */
    const char *kvdb = path("kvdb"), *ldb = path("ldb");
    char kd[700], ld[700];
    snprintf(kd, sizeof kd, "--db=%s", kvdb);
    snprintf(ld, sizeof ld, "--db=%s", ldb);
    const char *kvfill[] = {kd, "--num=2000", "--benchmarks=fillseq", NULL};
    run_ok(&o, kvfill);
    output_free(&o);
    const char *on_kv[] = {kd, "--engine=lmdb", "--num=2000", "--benchmarks=fillseq", NULL};
    run(&o, NULL, on_kv);
    expect_refusal(&o, 2, "but no lmdb database it may reset");
    output_free(&o);

    /* an LMDB database with the user's files beside it: a fresh run removes
     * data.mdb and lock.mdb only */
    const char *fill[] = {ld, "--engine=lmdb", "--num=2000", "--benchmarks=fillseq", NULL};
    run_ok(&o, fill);
    output_free(&o);
    ck_assert_int_eq(stat(path("ldb/data.mdb"), &st), 0);
    ck_assert_int_eq(stat(path("ldb/lock.mdb"), &st), 0);
    const char *on_lmdb[] = {ld, "--num=2000", "--benchmarks=fillseq", NULL};
    run(&o, NULL, on_lmdb);
    expect_refusal(&o, 2, "but no kv database it may reset");
    output_free(&o);
    put_user_files(ldb, NUSER);
    const char *fresh[] = {ld, "--engine=lmdb", "--num=2000", "--json",
                           "--benchmarks=readrandom", NULL};
    run_ok(&o, fresh);
    struct jobj objs[4];
    ck_assert_int_eq(json_lines(o.out, objs, 4), 1);
    ck_assert_double_eq(jnum(&objs[0], "found"), 0); /* started afresh */
    output_free(&o);
    expect_user_files(ldb, NUSER);
    /* the directory holds the user's files and LMDB's two, nothing else */
    DIR *d = opendir(ldb);
    ck_assert_ptr_nonnull(d);
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
    closedir(d);
    ck_assert_uint_eq(n, NUSER + 2);
}
END_TEST

/* ---- the default run and cleanup -------------------------------------------------------- */

START_TEST(default_run_removes_its_directory)
{
    const char *tmp = path("tmp");
    ck_assert_int_eq(mkdir(tmp, 0700), 0);
    /* no --benchmarks: the default run, smaller */
    const char *args[] = {"--num=" NUM, SMALL_MEMTABLE, NULL};
    struct output o;
    run(&o, tmp, args);
    ck_assert_msg(o.status == 0, "exit %d: %s", o.status, o.err);
    static const char *const want[] = {
        "Entries:     20000\n", "Filters:     10 bits/key, blocked layout\n",
        "(temporary, removed at exit)", "\nfillrandom   : ", "\ncompact      : ",
        "\nreadrandom   : ", "\nreadmissing  : ", "\nnofilter     : ",
        "What the filters saved", "saved by the filters"};
    const char *at = o.out;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const char *p = strstr(at, want[i]);
        ck_assert_msg(p != NULL, "default run lacks (in order) %s", want[i]);
        at = p;
    }
    ck_assert_msg(dir_is_empty(tmp), "the default run left files in TMPDIR");
    output_free(&o);
}
END_TEST

START_TEST(interrupt_and_errors_remove_the_directory)
{
    const char *tmp = path("tmp");
    ck_assert_int_eq(mkdir(tmp, 0700), 0);
    /* SIGINT in the middle of a long fill */
    const char *args[] = {"--num=50000000", "--benchmarks=fillrandom", NULL};
    interrupt_run(tmp, args, SIGINT);
    struct output o;
    /* a failure after the directory exists: an unwritable report directory */
    int fd = open(path("file"), O_CREAT | O_WRONLY, 0600);
    ck_assert_int_ge(fd, 0);
    close(fd);
    char rd[700];
    snprintf(rd, sizeof rd, "--report_dir=%s/sub", path("file"));
    const char *bad[] = {"--stats_interval=1", rd, "--benchmarks=fillseq", NULL};
    run(&o, tmp, bad);
    ck_assert_int_eq(o.status, 1);
    ck_assert_ptr_nonnull(strstr(o.err, "kvbench: cannot create "));
    ck_assert_msg(dir_is_empty(tmp), "the failed run left files in TMPDIR");
    output_free(&o);
}
END_TEST

/* ---- --stats_interval ------------------------------------------------------------------ */

/* Splits a CSV text into lines; returns the count. Lines are NUL-terminated
 * in place. */
static int csv_lines(char *text, char **lines, int max)
{
    int n = 0;
    for (char *p = text; *p;) {
        char *nl = strchr(p, '\n');
        ck_assert_msg(nl != NULL, "CSV does not end with a newline");
        *nl = 0;
        ck_assert_int_lt(n, max);
        lines[n++] = p;
        p = nl + 1;
    }
    return n;
}

static int csv_fields(char *line, char **f, int max)
{
    int n = 0;
    for (char *p = line;;) {
        ck_assert_int_lt(n, max);
        f[n++] = p;
        char *c = strchr(p, ',');
        if (!c)
            return n;
        *c = 0;
        p = c + 1;
    }
}

static char *slurp(const char *p)
{
    FILE *f = fopen(p, "rb");
    ck_assert_msg(f != NULL, "%s: %s", p, strerror(errno));
    char *buf = NULL;
    size_t len = 0;
    char chunk[8192];
    size_t got;
    append(&buf, &len, "", 0);
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0)
        append(&buf, &len, chunk, got);
    fclose(f);
    return buf;
}

static double num_field(const char *s)
{
    char *end;
    double d = strtod(s, &end);
    ck_assert_msg(end != s && *end == 0, "not a number: \"%s\"", s);
    return d;
}

/* The columns of stats.csv (tools/kvbench/bench.h, STATS_CSV_HEADER). */
enum { T_BENCH, T_TIME, T_INTERVAL, T_OPS, T_OPS_PER_SEC, T_GETS, T_PROBED, T_FP, T_READS,
       T_COMPACTIONS, T_STALLS, T_P99, T_P999, T_DELAYS, T_DELAY_US, T_STOPS, T_STOP_US, T_L0,
       T_PENDING, T_COMPACTION_BYTES, T_COMPACTING, T_NFIELDS };
static const char stats_header[] =
    "benchmark,time_s,interval_s,ops,ops_per_sec,gets,tables_probed_per_get,"
    "false_positives_per_get,data_block_reads_per_get,compactions,stalls,p99_us,p999_us,"
    "write_delays,write_delay_us,write_stops,write_stop_us,l0_files,pending_compaction_bytes,"
    "compaction_bytes,compacting";

/* Every interval of every benchmark is a row; the ops add up to each
 * benchmark's; kv fills every write-path column with a number: the
 * interval's latencies (p99 <= p99.9) wherever ops completed, its waits
 * (counts and microseconds), level 0 (tables there at some point), the
 * pending bytes, the bytes flushes and compactions wrote (some), and
 * compacting 0 or 1, 1 wherever bytes were written. */
START_TEST(stats_interval_csv)
{
    char db[700], rd[700];
    snprintf(db, sizeof db, "--db=%s", path("db"));
    snprintf(rd, sizeof rd, "--report_dir=%s", path("report"));
    const char *args[] = {db, rd, "--num=" NUM, "--stats_interval=0.05", SMALL_MEMTABLE,
                          "--benchmarks=fillrandom,readrandom,readmissing", NULL};
    struct output o;
    run_ok(&o, args);
    char *text = slurp(path("report/stats.csv"));
    char *lines[10000];
    int n = csv_lines(text, lines, 10000);
    ck_assert_int_ge(n, 4);
    ck_assert_str_eq(lines[0], stats_header);
    double ops[3] = {0}, gets[3] = {0}, last_t[3] = {0}, written = 0, compacting = 0, l0 = 0;
    int with_ops = 0;
    static const char *const names[] = {"fillrandom", "readrandom", "readmissing"};
    for (int i = 1; i < n; i++) {
        char *f[32];
        ck_assert_int_eq(csv_fields(lines[i], f, 32), T_NFIELDS);
        int b = -1;
        for (int k = 0; k < 3; k++)
            if (!strcmp(f[T_BENCH], names[k]))
                b = k;
        ck_assert_msg(b >= 0, "unknown benchmark %s", f[T_BENCH]);
        double t = num_field(f[T_TIME]);
        ck_assert_double_ge(t, last_t[b]); /* time runs forward within a benchmark */
        last_t[b] = t;
        double k_ops = num_field(f[T_OPS]);
        ops[b] += k_ops;
        gets[b] += num_field(f[T_GETS]);
        ck_assert_double_ge(num_field(f[T_OPS_PER_SEC]), 0);
        for (int k = T_GETS; k <= T_STALLS; k++)
            ck_assert_double_ge(num_field(f[k]), 0);
        if (k_ops > 0) { /* ops completed: their latencies */
            double p99 = num_field(f[T_P99]), p999 = num_field(f[T_P999]);
            ck_assert_msg(p99 > 0 && p99 <= p999 * 1.0001, "row %d: p99 %g, p99.9 %g", i, p99,
                          p999);
            with_ops++;
        }
        for (int k = T_DELAYS; k < T_NFIELDS; k++)
            ck_assert_double_ge(num_field(f[k]), 0); /* kv: every one a number */
        double c = num_field(f[T_COMPACTING]), w = num_field(f[T_COMPACTION_BYTES]);
        ck_assert_msg(c == 0 || c == 1, "compacting %g", c);
        ck_assert_msg(w == 0 || c == 1, "row %d: %g bytes written, compacting 0", i, w);
        if (num_field(f[T_L0]) > l0)
            l0 = num_field(f[T_L0]);
        written += w;
        compacting += c;
    }
    ck_assert_int_ge(with_ops, 3);
    /* the intervals add up to each benchmark's ops */
    for (int b = 0; b < 3; b++)
        ck_assert_msg(ops[b] == 20000, "%s: intervals hold %g ops", names[b], ops[b]);
    ck_assert_double_eq(gets[0], 0);
    ck_assert_double_eq(gets[1], 20000);
    ck_assert_double_eq(gets[2], 20000);
    /* a 64 KiB memtable: the fill flushed (and compacted) in some interval */
    ck_assert_double_ge(l0, 1);
    ck_assert_double_gt(written, 0);
    ck_assert_double_ge(compacting, 1);
    free(text);
    output_free(&o);
}
END_TEST

/* ---- the sweep: CSV and a well-formed SVG ------------------------------------------------ */

struct xml_info {
    int elements, series_blocked, series_classic, series_other;
    char root[32];
};

static int name_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
}

static int name_char(char c)
{
    return name_start(c) || (c >= '0' && c <= '9') || c == '-' || c == '.';
}

/* A name at p into out; returns the char after it, or NULL. */
static const char *xml_name(const char *p, char *out, size_t cap)
{
    size_t n = 0;
    if (!name_start(*p))
        return NULL;
    while (name_char(*p)) {
        if (n + 1 >= cap)
            return NULL;
        out[n++] = *p++;
    }
    out[n] = 0;
    return p;
}

/* An entity reference at p ('&'); returns the char after ';', or NULL. */
static const char *xml_entity(const char *p)
{
    static const char *const named[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
    for (int i = 0; i < 5; i++)
        if (!strncmp(p, named[i], strlen(named[i])))
            return p + strlen(named[i]);
    if (p[1] != '#')
        return NULL;
    p += 2;
    int hex = *p == 'x';
    p += hex;
    const char *digits = p;
    while (hex ? isxdigit((unsigned char)*p) : isdigit((unsigned char)*p))
        p++;
    return p > digits && *p == ';' ? p + 1 : NULL;
}

/* Character data up to the next '<' with valid entities; NULL on a bad one. */
static const char *xml_text(const char *p)
{
    while (*p && *p != '<') {
        if (*p == '&') {
            if (!(p = xml_entity(p)))
                return NULL;
        } else
            p++;
    }
    return p;
}

/* Checks that s is one well-formed element (after an optional XML
 * declaration and comments): tags balanced and closed in order, attributes
 * quoted and not repeated, entities valid. Returns NULL or what is wrong. */
static const char *xml_check(const char *s, struct xml_info *info)
{
    char stack[64][32];
    int depth = 0, closed_root = 0;
    memset(info, 0, sizeof *info);
    const char *p = s;
    if (!strncmp(p, "<?xml", 5)) {
        p = strstr(p, "?>");
        if (!p)
            return "unterminated XML declaration";
        p += 2;
    }
    for (;;) {
        const char *t = xml_text(p);
        if (!t)
            return "bad entity in text";
        if (depth == 0)
            for (; p < t; p++)
                if (!strchr(" \t\r\n", *p))
                    return "text outside the root element";
        p = t;
        if (!*p)
            break;
        if (!strncmp(p, "<!--", 4)) {
            p = strstr(p + 4, "-->");
            if (!p)
                return "unterminated comment";
            p += 3;
            continue;
        }
        if (p[1] == '/') {
            char name[32];
            if (!(p = xml_name(p + 2, name, sizeof name)))
                return "bad end tag";
            while (*p == ' ' || *p == '\n' || *p == '\t')
                p++;
            if (*p++ != '>')
                return "bad end tag";
            if (depth == 0 || strcmp(stack[depth - 1], name) != 0)
                return "end tag does not match the open element";
            if (--depth == 0)
                closed_root = 1;
            continue;
        }
        if (closed_root)
            return "a second root element";
        char name[32];
        if (!(p = xml_name(p + 1, name, sizeof name)))
            return "bad start tag";
        if (info->elements++ == 0)
            snprintf(info->root, sizeof info->root, "%s", name);
        char attrs[32][32], klass[64] = "", layout[64] = "";
        int na = 0;
        for (;;) {
            int ws = 0;
            while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
                p++, ws = 1;
            if (*p == '>' || !strncmp(p, "/>", 2))
                break;
            if (!ws || na == 32)
                return "attributes must be separated by space";
            if (!(p = xml_name(p, attrs[na], sizeof attrs[na])))
                return "bad attribute name";
            for (int i = 0; i < na; i++)
                if (!strcmp(attrs[i], attrs[na]))
                    return "repeated attribute";
            if (*p++ != '=')
                return "attribute without =\"value\"";
            char q = *p++;
            if (q != '"' && q != '\'')
                return "unquoted attribute value";
            const char *v = p;
            while (*p && *p != q) {
                if (*p == '<')
                    return "< in an attribute value";
                if (*p == '&') {
                    if (!(p = xml_entity(p)))
                        return "bad entity in an attribute value";
                } else
                    p++;
            }
            if (*p != q)
                return "unterminated attribute value";
            size_t vl = (size_t)(p - v);
            if (!strcmp(attrs[na], "class") && vl < sizeof klass)
                memcpy(klass, v, vl), klass[vl] = 0;
            if (!strcmp(attrs[na], "data-layout") && vl < sizeof layout)
                memcpy(layout, v, vl), layout[vl] = 0;
            p++;
            na++;
        }
        if (!strcmp(name, "g") && !strcmp(klass, "series")) {
            if (!strcmp(layout, "blocked"))
                info->series_blocked++;
            else if (!strcmp(layout, "classic"))
                info->series_classic++;
            else
                info->series_other++;
        }
        if (*p == '/') {
            p += 2;
            if (depth == 0)
                closed_root = 1;
            continue;
        }
        p++;
        if (depth == 64)
            return "too deep";
        snprintf(stack[depth++], sizeof stack[0], "%s", name);
    }
    if (depth)
        return "an element is not closed";
    if (!closed_root)
        return "no root element";
    return NULL;
}

START_TEST(xml_checker_catches_mistakes)
{
    struct xml_info x;
    ck_assert_ptr_null(
        xml_check("<?xml version=\"1.0\"?>\n<a b='1'><c/>&amp;&#38;&#x26;</a>\n", &x));
    ck_assert_int_eq(x.elements, 2);
    static const char *const bad[] = {
        "<a><b></a></b>", "<a>", "<a b=1></a>", "<a>&nope;</a>", "<a b=\"<\"></a>",
        "<a></a><b></b>", "<a b=\"1\" b=\"2\"></a>", "text<a></a>", "<a>& </a>",
        "<a b=\"1\"c=\"2\"></a>"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(xml_check(bad[i], &x) != NULL, "accepted: %s", bad[i]);
}
END_TEST

START_TEST(sweep_writes_csv_and_svg)
{
    char db[700], rd[700];
    snprintf(db, sizeof db, "--db=%s", path("db"));
    snprintf(rd, sizeof rd, "--report_dir=%s", path("report"));
    /* 38,800 keys in 64 KiB memtables (359 keys each): 109 flushes leave
     * 5 tables in level 0 beside level 1, six runs where Monkey has
     * something to share */
    /* --idle_compaction_ms=0: level 0 keeps those 5 tables (fillsettled
     * waits for compaction after each memtable, an idle one too) */
    const char *args[] = {db, rd, "--num=38800", "--json", "--write_buffer_size=65536",
                          "--idle_compaction_ms=0", "--sweep=bloom_bits=10,0,4", NULL};
    struct output o;
    run_ok(&o, args);
    /* per setting and series: fillsettled, readmissing, readrandom, and
     * readmissing with O_DIRECT */
    struct jobj objs[48];
    ck_assert_int_eq(json_lines(o.out, objs, 48), 3 * 3 * 4);
    for (int i = 0; i < 36; i += 4) {
        ck_assert_str_eq(jstr(&objs[i], "benchmark"), "fillsettled");
        ck_assert_str_eq(jstr(&objs[i + 3], "benchmark"), "readmissing");
        ck_assert_double_eq(jnum(&objs[i + 3], "use_direct_reads"), 1);
        ck_assert_double_eq(jnum(&objs[i + 1], "use_direct_reads"), 0);
        ck_assert_double_eq(jnum(&objs[i + 3], "cache_size"), 0);
        ck_assert_double_eq(jnum(&objs[i + 3], "ops"), 10000); /* at most 10,000 gets */
    }
    output_free(&o);

    char *text = slurp(path("report/sweep.csv"));
    char *lines[16];
    ck_assert_int_eq(csv_lines(text, lines, 16), 1 + 9);
    ck_assert_str_eq(lines[0],
                     "layout,policy,bloom_bits,filter_bytes,filter_bytes_per_key,measured_fpr,"
                     "expected_fpr,missing_tables_probed_per_get,missing_false_positives_per_get,"
                     "missing_expected_false_positives_per_get,missing_micros_per_get,"
                     "missing_p999_us,missing_data_block_reads_per_get,"
                     "direct_missing_micros_per_get,direct_missing_p999_us,"
                     "direct_missing_device_reads_per_get,direct_reads,random_micros_per_get,"
                     "random_p999_us,random_data_block_reads_per_get,random_found,reads,"
                     "build_seconds");
    static const double bits[] = {0, 4, 10};
    static const char *const layouts[] = {"blocked", "classic", "blocked"};
    static const char *const policies[] = {"uniform", "uniform", "monkey"};
    double last_fpr[3] = {2, 2, 2}, probed = -1, fp_at[3][3];
    for (int i = 1; i <= 9; i++) {
        char *f[32];
        ck_assert_int_eq(csv_fields(lines[i], f, 32), 23);
        int sr = (i - 1) % 3, b = (i - 1) / 3;
        ck_assert_str_eq(f[0], layouts[sr]);
        ck_assert_str_eq(f[1], policies[sr]);
        ck_assert_double_eq(num_field(f[2]), bits[b]);
        double fpr = num_field(f[5]), expected = num_field(f[6]);
        ck_assert_msg(fpr < last_fpr[sr], "FPR does not fall with more bits: %s", lines[i]);
        last_fpr[sr] = fpr;
        /* every series of a setting has the same tree: the same probes */
        if (sr == 0)
            probed = num_field(f[7]);
        ck_assert_double_eq(num_field(f[7]), probed);
        assert_near(probed, 6, 0.05, "tables probed per get"); /* the last level-0 table holds 28 keys */
        fp_at[b][sr] = num_field(f[8]);
        if (bits[b] == 0) {
            ck_assert_double_eq(num_field(f[3]), 0);
            ck_assert_double_eq(fpr, 1);
            ck_assert_double_eq(expected, 1);
            /* no filter: every probe reads a block, on the device */
            assert_near(num_field(f[15]), probed, 0.05, "device reads per get, no filter");
        } else {
            ck_assert_double_gt(num_field(f[3]), 0);
            /* equal memory: Monkey's within 5% of the layout's uniform */
            assert_near(num_field(f[4]), bits[b] / 8, 0.1, "filter bytes per key");
            ck_assert_double_lt(expected, 0.2);
            ck_assert_double_lt(num_field(f[15]), probed);
        }
        ck_assert_double_gt(num_field(f[13]), 0); /* O_DIRECT micros per get */
        ck_assert_double_le(num_field(f[13]), num_field(f[14]) * 10);
        ck_assert_double_eq(num_field(f[16]), 10000);
        ck_assert_double_eq(num_field(f[20]), 38800); /* readrandom found every key */
        ck_assert_double_eq(num_field(f[21]), 38800);
    }
    /* at 10 bits per key Monkey meets fewer false positives than uniform */
    ck_assert_double_lt(fp_at[2][2], fp_at[2][0]);
    free(text);

    char *svg = slurp(path("report/sweep.svg"));
    struct xml_info x;
    const char *why = xml_check(svg, &x);
    ck_assert_msg(why == NULL, "sweep.svg is not well-formed: %s", why);
    ck_assert_str_eq(x.root, "svg");
    ck_assert_int_eq(x.series_blocked, 2); /* uniform and Monkey */
    ck_assert_int_eq(x.series_classic, 1);
    ck_assert_int_eq(x.series_other, 0);
    static const char *const labels[] = {
        "kv filter sweep", "filter bits per key", "FPR (fraction, log scale)",
        "False positives per missing-key get", "microseconds per get", "O_DIRECT",
        "Device reads per missing-key get", "bytes per key", "blocked, uniform",
        "classic, uniform", "blocked, Monkey", "data-policy=\"monkey\"", "expected (theory)",
        "<polyline"};
    for (size_t i = 0; i < sizeof labels / sizeof labels[0]; i++)
        ck_assert_msg(strstr(svg, labels[i]) != NULL, "sweep.svg lacks %s", labels[i]);
    free(svg);
}
END_TEST

/* ---- --scaling: a CSV row per run, a chart and a table of medians ------------------------ */

static const char *const scaling_header =
    "engine,keys,round,fill_ops,fill_p999_us,slowed_seconds,fill_seconds,write_amplification,"
    "tables,db_bytes,reopen_seconds,rss_bytes,filter_bytes,index_bytes,memtable_bytes,"
    "rss_file_bytes,readrandom_ops,"
    "readrandom_p999_us,readrandom_probed,readmissing_ops,readmissing_p999_us,"
    "readmissing_probed,waitforcompaction_seconds,reads,readrandom_found,key_size,value_size,"
    "bloom_bits,cache_size,write_buffer_size,block_size,compression,threads";

/* The header kvbench writes now: issue 54's settings appended (the chart
 * finds columns by name, so a CSV of the older header still charts). */
#define SCALING_HEADER_54                                                                          \
    ",compaction_style,max_background_jobs,memory_limit,memory_limit_mechanism"

/* clang-format off */
enum { S_ENGINE, S_KEYS, S_ROUND, S_FILL_OPS, S_FILL_P999, S_SLOWED, S_FILL_SECONDS, S_WAMP,
       S_TABLES, S_DB_BYTES, S_REOPEN, S_RSS, S_FILTER, S_INDEX, S_MEMTABLE, S_RSS_FILE, S_RR_OPS,
       S_RR_P999, S_RR_PROBED, S_RM_OPS, S_RM_P999, S_RM_PROBED, S_WAIT, S_READS, S_RR_FOUND,
       S_NFIELDS = 37 };
/* clang-format on */

/* A well-formed SVG document: an XML declaration or <svg> first, </svg> last. */
static void check_svg(const char *svg, const char *name, struct xml_info *x)
{
    ck_assert_msg(!strncmp(svg, "<?xml", 5) || !strncmp(svg, "<svg", 4), "%s: starts %.20s",
                  name, svg);
    size_t len = strlen(svg);
    while (len && isspace((unsigned char)svg[len - 1]))
        len--;
    ck_assert_msg(len >= 6 && !strncmp(svg + len - 6, "</svg>", 6), "%s: does not end with "
                  "</svg>", name);
    const char *why = xml_check(svg, x);
    ck_assert_msg(why == NULL, "%s is not well-formed: %s", name, why);
    ck_assert_str_eq(x->root, "svg");
}

/* The JSON line of benchmark `name` of the run of `engine` at `num` keys. */
static const struct jobj *run_line(const struct jobj *objs, int n, const char *engine,
                                   double num, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(jstr(&objs[i], "engine"), engine) && jnum(&objs[i], "num") == num &&
            !strcmp(jstr(&objs[i], "benchmark"), name))
            return &objs[i];
    ck_abort_msg("no %s line for %s at %g keys", name, engine, num);
    return NULL;
}

/* ---- range queries: seekempty and seekshort ---------------------------------------------- */

/* The lines of seekempty and seekshort (after the fill) of a run with
 * these flags: seekempty finds nothing in its ranges (inside the gaps of
 * --key_stride), seekshort finds the 1..16 keys of each of its (kvbench
 * checks each count, and fails the run on a wrong one); their per-seek
 * figures are there and sane. */
static void range_run(const char *eng, const char *extra, const char *extra2)
{
    char db[700], e[64];
    snprintf(db, sizeof db, "--db=%s", path("range-%s", eng));
    snprintf(e, sizeof e, "--engine=%s", eng);
    const char *args[] = {db,
                          e,
                          "--num=" NUM,
                          "--json",
                          "--histogram=1",
                          SMALL_MEMTABLE,
                          "--key_stride=40",
                          "--reads=5000",
                          "--benchmarks=fillrandom,waitforcompaction,seekempty,seekshort,"
                          "readrandom,readmissing",
                          extra,
                          extra2,
                          NULL};
    struct output o;
    run(&o, NULL, args);
    if (o.status == 2 && strcmp(eng, "kv") != 0) { /* built without the peers */
        ck_assert_ptr_nonnull(strstr(o.err, "-DKV_BENCH_PEERS=ON"));
        output_free(&o);
        return;
    }
    ck_assert_msg(o.status == 0, "%s: exit %d: %s", eng, o.status, o.err);
    struct jobj objs[8];
    ck_assert_int_eq(json_lines(o.out, objs, 8), 6);
    const struct jobj *empty = &objs[2], *shrt = &objs[3];
    ck_assert_str_eq(jstr(empty, "benchmark"), "seekempty");
    ck_assert_str_eq(jstr(shrt, "benchmark"), "seekshort");
    for (int k = 2; k < 4; k++) {
        check_common(&objs[k], 1);
        ck_assert_double_eq(jnum(&objs[k], "ops"), 5000);
        ck_assert_double_eq(jnum(&objs[k], "seeks"), 5000);
        ck_assert_double_eq(jnum(&objs[k], "range_width"), 16);
        ck_assert_double_eq(jnum(&objs[k], "key_stride"), 40);
        ck_assert_ptr_null(jfind(&objs[k], "mb_per_sec"));
        ck_assert_double_ge(jnum(&objs[k], "read_calls_per_seek"), 0);
    }
    ck_assert_double_eq(jnum(empty, "found"), 0);
    ck_assert_double_eq(jnum(empty, "entries"), 0);
    /* every range holds keys: 1..16, 8.5 on average */
    ck_assert_double_eq(jnum(shrt, "found"), 5000);
    ck_assert_double_gt(jnum(shrt, "entries"), 5000 * 7.5);
    ck_assert_double_lt(jnum(shrt, "entries"), 5000 * 9.5);
    ck_assert_double_eq(jnum(&objs[4], "found"), 5000); /* the keys with a stride */
    ck_assert_double_eq(jnum(&objs[5], "found"), 0);
    if (!strcmp(eng, "kv")) {
        for (int k = 2; k < 4; k++) {
            const struct jobj *r = &objs[k];
            double checked = jnum(r, "tables_checked_per_seek");
            ck_assert_double_ge(checked, 0);
            ck_assert(jnum(r, "prefix_filter_skips_per_seek") +
                          jnum(r, "range_filter_skips_per_seek") <=
                      checked * (1 + 2e-5) + 1e-9);
            ck_assert(jnum(r, "tables_read_per_seek") <= checked * (1 + 2e-5) + 1e-9);
            ck_assert(jnum(r, "range_measured_fpr") <= 1);
            ck_assert(jnum(r, "range_expected_fpr") <= 1);
        }
        ck_assert_ptr_nonnull(strstr(o.err, "    per seek : "));
        ck_assert_ptr_nonnull(strstr(o.err, "    range FPR: "));
    } else {
        ck_assert_double_ge(jnum(empty, "rocksdb_prefix_checked_per_seek"),
                            jnum(empty, "rocksdb_prefix_useful_per_seek"));
        ck_assert_ptr_nonnull(strstr(o.err, "bloom.filter.prefix.checked"));
    }
    output_free(&o);
}

START_TEST(range_queries)
{
    range_run("kv", "--range_filter_bits=16", "--prefix_len=14");
    range_run("kv", "--range_filter_bits=0", "--prefix_len=0");
    range_run("rocksdb", "--prefix_len=14", "--bloom_bits=10");
    range_run("rocksdb", "--prefix_len=0", "--bloom_bits=10");
    /* seekempty's ranges must fit strictly inside a gap */
    const char *bad[] = {"--num=100", "--key_stride=17", "--benchmarks=fillrandom,seekempty", NULL};
    struct output o;
    run(&o, NULL, bad);
    ck_assert_int_eq(o.status, 2);
    ck_assert_ptr_nonnull(strstr(o.err, "--key_stride=17"));
    ck_assert(strchr(o.err, '\n') == o.err + o.errlen - 1);
    output_free(&o);
}
END_TEST

/* --sweep=range_filter_bits: a row per setting, and a well-formed chart. */
START_TEST(range_sweep_writes_csv_and_svg)
{
    char db[700], rd[700];
    snprintf(db, sizeof db, "--db=%s", path("db"));
    snprintf(rd, sizeof rd, "--report_dir=%s", path("report"));
    const char *args[] = {db,
                          rd,
                          "--num=10000",
                          "--json",
                          SMALL_MEMTABLE,
                          "--key_stride=40",
                          "--reads=300",
                          "--sweep=range_filter_bits=16,0",
                          NULL};
    struct output o;
    run_ok(&o, args);
    /* per setting: fillsettled, seekempty, seekshort, seekempty with O_DIRECT */
    struct jobj objs[12];
    ck_assert_int_eq(json_lines(o.out, objs, 12), 2 * 4);
    for (int i = 0; i < 8; i += 4) {
        ck_assert_str_eq(jstr(&objs[i], "benchmark"), "fillsettled");
        ck_assert_str_eq(jstr(&objs[i + 1], "benchmark"), "seekempty");
        ck_assert_str_eq(jstr(&objs[i + 2], "benchmark"), "seekshort");
        ck_assert_str_eq(jstr(&objs[i + 3], "benchmark"), "seekempty");
        ck_assert_double_eq(jnum(&objs[i + 3], "use_direct_reads"), 1);
        ck_assert_double_eq(jnum(&objs[i + 3], "cache_size"), 0);
        ck_assert_double_eq(jnum(&objs[i + 1], "found"), 0);
        ck_assert_double_eq(jnum(&objs[i + 3], "found"), 0);
        ck_assert_double_eq(jnum(&objs[i + 1], "range_filter_bits"), i ? 16 : 0);
    }
    output_free(&o);
    char *text = slurp(path("report/range_sweep.csv"));
    char *lines[8];
    ck_assert_int_eq(csv_lines(text, lines, 8), 1 + 2);
    ck_assert(!strncmp(lines[0], "range_filter_bits,", 18));
    ck_assert(!strncmp(lines[1], "0,", 2));
    ck_assert(!strncmp(lines[2], "16,", 3));
    free(text);
    char *svg = slurp(path("report/range_sweep.svg"));
    struct xml_info x;
    const char *why = xml_check(svg, &x);
    ck_assert_msg(why == NULL, "range_sweep.svg is not well-formed: %s", why);
    ck_assert_ptr_nonnull(strstr(svg, "kv range filter sweep"));
    ck_assert_ptr_nonnull(strstr(svg, "range filter bits per key"));
    free(svg);
}
END_TEST

/* Every run is a row whose figures are those of its JSON lines; what an
 * engine does not report (LMDB: tables, filters, per-get probes) is empty;
 * the chart is well-formed SVG with a series per engine; the table has a
 * line per engine and size; nothing is left in TMPDIR. */
START_TEST(scaling_writes_csv_and_svg)
{
    const char *tmp = path("tmp");
    ck_assert_int_eq(mkdir(tmp, 0700), 0);
    char rd[700];
    snprintf(rd, sizeof rd, "--report_dir=%s", path("report"));
    const char *args[] = {"--scaling=2000,4000", "--engines=kv,lmdb", "--rounds=1",
                          "--reads=1000", rd, "--json", NULL};
    struct output o;
    run(&o, tmp, args);
    ck_assert_msg(o.status == 0, "kvbench exited %d: %s", o.status, o.err);
    ck_assert_msg(dir_is_empty(tmp), "--scaling left files in TMPDIR");
    /* per run: fillrandom, stats, readrandom, readmissing, waitforcompaction, reopen */
    static struct jobj objs[32];
    ck_assert_int_eq(json_lines(o.out, objs, 32), 4 * 6);
    ck_assert_ptr_nonnull(strstr(o.err, "Scaling: medians of 1 round per engine and size"));
    for (int i = 0; i < 4; i++) {
        char line[64];
        snprintf(line, sizeof line, "\n%-8s %12d ", i < 2 ? "kv" : "lmdb", 2000 * (1 + i % 2));
        ck_assert_msg(strstr(o.err, line) != NULL, "the table lacks%s", line);
    }

    char *text = slurp(path("report/scaling.csv"));
    char *lines[16];
    ck_assert_int_eq(csv_lines(text, lines, 16), 1 + 4);
    ck_assert_int_eq(strncmp(lines[0], scaling_header, strlen(scaling_header)), 0);
    ck_assert_str_eq(lines[0] + strlen(scaling_header), SCALING_HEADER_54);
    static const char *const engines[] = {"kv", "lmdb", "kv", "lmdb"};
    static const double keys[] = {2000, 2000, 4000, 4000};
    for (int i = 1; i <= 4; i++) {
        char *f[40];
        ck_assert_int_eq(csv_fields(lines[i], f, 40), S_NFIELDS);
        const char *e = engines[i - 1];
        double n = keys[i - 1];
        ck_assert_str_eq(f[S_ENGINE], e);
        ck_assert_double_eq(num_field(f[S_KEYS]), n);
        ck_assert_double_eq(num_field(f[S_ROUND]), 1);
        ck_assert_double_gt(num_field(f[S_FILL_OPS]), 0);
        ck_assert_double_gt(num_field(f[S_RR_OPS]), 0);
        ck_assert_double_gt(num_field(f[S_RM_OPS]), 0);
        ck_assert_double_eq(num_field(f[S_READS]), 1000);
        ck_assert_double_eq(num_field(f[S_RR_FOUND]), 1000);
        /* the figures are the JSON's */
        const struct jobj *fill = run_line(objs, 24, e, n, "fillrandom");
        const struct jobj *st = run_line(objs, 24, e, n, "stats");
        const struct jobj *rr = run_line(objs, 24, e, n, "readrandom");
        const struct jobj *rm = run_line(objs, 24, e, n, "readmissing");
        assert_near(num_field(f[S_FILL_OPS]), jnum(fill, "ops_per_sec"), 1e-4, "fill_ops");
        assert_near(num_field(f[S_FILL_P999]), jnum(fill, "p999_us"), 1e-2, "fill_p999_us");
        assert_near(num_field(f[S_RR_OPS]), jnum(rr, "ops_per_sec"), 1e-4, "readrandom_ops");
        assert_near(num_field(f[S_RM_OPS]), jnum(rm, "ops_per_sec"), 1e-4, "readmissing_ops");
        ck_assert_double_eq(num_field(f[S_RSS]), jnum(st, "rss_bytes"));
        ck_assert_double_gt(num_field(f[S_RSS]), 0);
        ck_assert_double_eq(num_field(f[S_RSS_FILE]), jnum(st, "rss_file_bytes"));
        ck_assert_double_le(num_field(f[S_RSS_FILE]), num_field(f[S_RSS]));
        assert_near(num_field(f[S_REOPEN]), jnum(run_line(objs, 24, e, n, "reopen"), "seconds"),
                    1e-2, "reopen_seconds");
        if (!strcmp(e, "kv")) {
            ck_assert_double_eq(num_field(f[S_TABLES]), jnum(st, "tables"));
            ck_assert_double_eq(num_field(f[S_DB_BYTES]), jnum(st, "table_bytes"));
            ck_assert_double_eq(num_field(f[S_FILTER]), jnum(st, "filter_bytes"));
            ck_assert_double_eq(num_field(f[S_INDEX]), jnum(st, "index_bytes"));
            ck_assert_double_eq(num_field(f[S_MEMTABLE]), jnum(st, "memtable_bytes"));
            ck_assert_double_gt(num_field(f[S_MEMTABLE]), 0);
            assert_near(num_field(f[S_SLOWED]),
                        jnum(st, "write_slowdown_seconds") + jnum(st, "write_stall_seconds"),
                        1e-2, "slowed_seconds");
            assert_near(num_field(f[S_RM_PROBED]), jnum(rm, "tables_probed_per_get"), 1e-3,
                        "readmissing_probed");
            ck_assert_double_gt(num_field(f[S_WAMP]), 0);
        } else { /* LMDB: its file; no tables, filters, waits or probes */
            ck_assert_double_eq(num_field(f[S_DB_BYTES]), jnum(st, "lmdb_file_bytes"));
            static const int empty[] = {S_SLOWED, S_WAMP, S_TABLES, S_FILTER, S_INDEX, S_MEMTABLE,
                                        S_RR_PROBED, S_RM_PROBED};
            for (size_t k = 0; k < sizeof empty / sizeof empty[0]; k++)
                ck_assert_msg(*f[empty[k]] == 0, "lmdb: field %d is \"%s\"", empty[k],
                              f[empty[k]]);
        }
    }
    free(text);
    output_free(&o);

    char *svg = slurp(path("report/scaling.svg"));
    struct xml_info x;
    check_svg(svg, "scaling.svg", &x);
    ck_assert_int_eq(x.series_other, 2); /* one per engine */
    static const char *const labels[] = {
        "kvbench scaling", "keys in the database (log scale)", "ops/sec (log scale)",
        "p99.9 microseconds (log scale)", "data-engine=\"kv\"", "data-engine=\"lmdb\"",
        ">fillrandom<", ">readrandom<", ">readmissing<", ">2K<", ">4K<", "<polyline"};
    for (size_t i = 0; i < sizeof labels / sizeof labels[0]; i++)
        ck_assert_msg(strstr(svg, labels[i]) != NULL, "scaling.svg lacks %s", labels[i]);
    free(svg);

    /* a peer without -DKV_BENCH_PEERS=ON is skipped, and says so */
    const char *peer[] = {"--scaling=2000", "--engines=leveldb,kv", "--reads=100", rd, NULL};
    run(&o, tmp, peer);
    ck_assert_msg(o.status == 0, "kvbench exited %d: %s", o.status, o.err);
    text = slurp(path("report/scaling.csv"));
    int rows = csv_lines(text, lines, 16) - 1;
    if (strstr(o.out, "leveldb skipped: this kvbench was built without it"))
        ck_assert_int_eq(rows, 1);
    else
        ck_assert_int_eq(rows, 2);
    free(text);
    output_free(&o);
}
END_TEST

/* A CSV assembled from two sessions (the second header repeated) is
 * charted again: medians over all its rows, the chart beside the CSV or in
 * --report_dir; a CSV without the columns is refused in one line. */
START_TEST(scaling_chart_redraws_a_csv)
{
    char *rows = NULL;
    size_t len = 0;
    /* kv at 1000 keys: fill_ops 100, 300, 200 over three rounds (median 200) */
    static const char *const body[] = {
        "kv,1000,1,100,5,0,1,1,1,1,0,1,1,1,1,1,1000,2,1,3000,3,1,0,1000,1000,16,100,10,0,65536,"
        "4096,none,1\n",
        "kv,1000,2,300,7,0,1,1,1,1,0,1,1,1,1,1,1000,2,1,3000,3,1,0,1000,1000,16,100,10,0,65536,"
        "4096,none,1\n",
        "lmdb,1000,1,50,9,,1,,,1,0,1,,,,1,4000,1,,5000,1,,0,1000,1000,16,100,10,0,65536,4096,"
        "none,1\n",
        "kv,1000000,1,80,11,0,1,1,1,1,0,1,1,1,1,1,500,4,1,2500,3,1,0,1000,1000,16,100,10,0,65536,"
        "4096,none,1\n",
        "kv,1000,3,200,6,0,1,1,1,1,0,1,1,1,1,1,1000,2,1,3000,3,1,0,1000,1000,16,100,10,0,65536,"
        "4096,none,1\n",
    };
    for (int i = 0; i < 5; i++) {
        if (i == 0 || i == 3) {
            append(&rows, &len, scaling_header, strlen(scaling_header));
            append(&rows, &len, "\n", 1);
        }
        append(&rows, &len, body[i], strlen(body[i]));
    }
    put_file(path("all.csv"), rows);
    free(rows);
    char arg[700];
    snprintf(arg, sizeof arg, "--scaling_chart=%s", path("all.csv"));
    const char *args[] = {arg, NULL};
    struct output o;
    run_ok(&o, args);
    ck_assert_ptr_nonnull(strstr(o.out, "Scaling: medians of 1 to 3 rounds per engine and size"));
    /* engine, keys, then per benchmark the median ops/sec (p99.9 micros) */
    static const struct {
        const char *engine;
        int keys, ops;
        double p999;
    } want[] = {{"kv", 1000, 200, 6}, {"kv", 1000000, 80, 11}, {"lmdb", 1000, 50, 9}};
    for (int i = 0; i < 3; i++) {
        char line[96];
        snprintf(line, sizeof line, "\n%-8s %12d  %10d (%8.2f)", want[i].engine, want[i].keys,
                 want[i].ops, want[i].p999);
        ck_assert_msg(strstr(o.out, line) != NULL, "the table lacks%s:\n%s", line, o.out);
    }
    output_free(&o);
    char *svg = slurp(path("scaling.svg"));
    struct xml_info x;
    check_svg(svg, "scaling.svg", &x);
    ck_assert_int_eq(x.series_other, 2);
    ck_assert_ptr_nonnull(strstr(svg, "median of 1 to 3 rounds per point; 16-byte keys"));
    ck_assert_ptr_nonnull(strstr(svg, ">1M<"));
    free(svg);

    char rd[700];
    snprintf(rd, sizeof rd, "--report_dir=%s", path("out"));
    const char *elsewhere[] = {arg, rd, NULL};
    run_ok(&o, elsewhere);
    output_free(&o);
    svg = slurp(path("out/scaling.svg"));
    check_svg(svg, "out/scaling.svg", &x);
    free(svg);

    put_file(path("other.csv"), "layout,bloom_bits\nblocked,10\n");
    snprintf(arg, sizeof arg, "--scaling_chart=%s", path("other.csv"));
    const char *other[] = {arg, NULL};
    run(&o, NULL, other);
    ck_assert_int_eq(o.status, 1);
    ck_assert_ptr_nonnull(strstr(o.err, ": no column engine (want a CSV that kvbench --scaling "
                                        "wrote)\n"));
    ck_assert(strchr(o.err, '\n') == o.err + o.errlen - 1);
    output_free(&o);
}
END_TEST

/* --timeline: one fill per engine, each a process of its own; every
 * interval a row of timeline.csv (stats.csv's columns after the engine),
 * whose ops add up to the fill's; kv's rows have the interval's
 * latencies and its write path, LMDB's leave the write path empty; the
 * chart is well-formed SVG with a line per engine in each panel and a band
 * row per engine; the table has a line per engine with the JSON's figures;
 * --timeline_chart draws the same again from the CSV; nothing is left in
 * TMPDIR. */
START_TEST(timeline_writes_csv_and_svg)
{
    const char *tmp = path("tmp");
    ck_assert_int_eq(mkdir(tmp, 0700), 0);
    char rd[700];
    snprintf(rd, sizeof rd, "--report_dir=%s", path("report"));
    const char *args[] = {"--timeline", "--num=" NUM, "--engines=kv,lmdb",
                          "--stats_interval=0.005", SMALL_MEMTABLE, rd, "--json", NULL};
    struct output o;
    run(&o, tmp, args);
    ck_assert_msg(o.status == 0, "kvbench exited %d: %s", o.status, o.err);
    ck_assert_msg(dir_is_empty(tmp), "--timeline left files in TMPDIR");
    static struct jobj objs[4];
    ck_assert_int_eq(json_lines(o.out, objs, 4), 2);
    ck_assert_ptr_nonnull(strstr(o.err, "Timeline: fillrandom"));
    for (int e = 0; e < 2; e++) {
        const struct jobj *j = &objs[e];
        ck_assert_str_eq(jstr(j, "benchmark"), "fillrandom");
        ck_assert_str_eq(jstr(j, "engine"), e ? "lmdb" : "kv");
        /* engine, ops/s, p99.9, p99.99, max as the JSON has them (which
         * prints 6 significant digits: 13079.6 for the table's
         * 13079.62), then the count */
        char start[32];
        snprintf(start, sizeof start, "\n%-8s ", jstr(j, "engine"));
        const char *at = strstr(o.err, start);
        ck_assert_msg(at != NULL, "the table has no line for %s:\n%s", jstr(j, "engine"), o.err);
        double got[4];
        ck_assert_int_eq(sscanf(at + strlen(start), "%lf %lf %lf %lf", &got[0], &got[1], &got[2],
                                &got[3]), 4);
        const char *field[4] = {"ops_per_sec", "p999_us", "p9999_us", "max_us"};
        for (int f = 0; f < 4; f++) {
            double want = jnum(j, field[f]);
            ck_assert_msg(fabs(got[f] - want) <= 1e-5 * fabs(want) + 0.5 * (f == 0) + 0.005,
                          "%s: the table says %.2f, the JSON %g", field[f], got[f], want);
        }
    }

    char *text = slurp(path("report/timeline.csv"));
    char *lines[4000];
    int n = csv_lines(text, lines, 4000);
    char header[512];
    snprintf(header, sizeof header, "engine,%s", stats_header);
    ck_assert_str_eq(lines[0], header);
    double ops[2] = {0};
    int rows[2] = {0};
    for (int i = 1; i < n; i++) {
        char *f[32];
        ck_assert_int_eq(csv_fields(lines[i], f, 32), 1 + T_NFIELDS);
        int e = !strcmp(f[0], "kv") ? 0 : !strcmp(f[0], "lmdb") ? 1 : -1;
        ck_assert_msg(e >= 0, "engine %s", f[0]);
        ck_assert_msg(e == 1 || rows[1] == 0, "kv's rows come first");
        char **g = f + 1; /* stats.csv's columns */
        ck_assert_str_eq(g[T_BENCH], "fillrandom");
        ops[e] += num_field(g[T_OPS]);
        rows[e]++;
        if (num_field(g[T_OPS]) > 0)
            ck_assert_double_le(num_field(g[T_P99]), num_field(g[T_P999]) * 1.0001);
        for (int k = T_DELAYS; k < T_NFIELDS; k++)
            if (e == 0)
                ck_assert_double_ge(num_field(g[k]), 0);
            else if (k != T_L0)
                ck_assert_msg(*g[k] == 0, "lmdb: column %d is \"%s\"", k, g[k]);
    }
    ck_assert_int_ge(rows[0], 2);
    ck_assert_int_ge(rows[1], 1);
    ck_assert_double_eq(ops[0], 20000);
    ck_assert_double_eq(ops[1], 20000);
    free(text);
    output_free(&o);

    for (int redraw = 0; redraw < 2; redraw++) {
        char *svg = slurp(path(redraw ? "out/timeline.svg" : "report/timeline.svg"));
        struct xml_info x;
        check_svg(svg, "timeline.svg", &x);
        ck_assert_int_eq(x.series_other, 2); /* one per engine */
        static const char *const labels[] = {
            "kvbench timeline", "ops/sec per interval", "p99.9 microseconds (log scale)",
            "seconds since the fill began", "flush or compaction active",
            "<g class=\"series\" data-engine=\"kv\"", "<g class=\"series\" data-engine=\"lmdb\"",
            "<g class=\"band\" data-engine=\"kv\"", "<g class=\"band\" data-engine=\"lmdb\""};
        for (size_t i = 0; i < sizeof labels / sizeof labels[0]; i++)
            ck_assert_msg(strstr(svg, labels[i]) != NULL, "timeline.svg lacks %s", labels[i]);
        /* each engine: a line in each panel */
        for (const char *e = svg; (e = strstr(e, "<g class=\"series\"")) != NULL; e++) {
            const char *end = strstr(e, "</g>");
            int lines_in = 0;
            for (const char *q = e; (q = strstr(q, "<polyline")) != NULL && q < end; q++)
                lines_in++;
            ck_assert_int_ge(lines_in, 2);
        }
        free(svg);
        if (redraw)
            break;
        char arg[700], out[700];
        snprintf(arg, sizeof arg, "--timeline_chart=%s", path("report/timeline.csv"));
        snprintf(out, sizeof out, "--report_dir=%s", path("out"));
        const char *again[] = {arg, out, NULL};
        run_ok(&o, again);
        ck_assert_ptr_nonnull(strstr(o.out, "(from the CSV alone"));
        ck_assert_ptr_nonnull(strstr(o.out, "\nkv       "));
        ck_assert_ptr_nonnull(strstr(o.out, "\nlmdb     "));
        output_free(&o);
    }
}
END_TEST

/* SIGTERM to kvbench alone reaches the run's child: it stops, its
 * database goes, and so does the temporary directory. */
START_TEST(scaling_interrupted_cleans_up)
{
    const char *tmp = path("tmp");
    ck_assert_int_eq(mkdir(tmp, 0700), 0);
    char rd[700];
    snprintf(rd, sizeof rd, "--report_dir=%s", path("report"));
    const char *args[] = {"--scaling=50M", "--engines=kv", rd, NULL};
    interrupt_run(tmp, args, SIGTERM);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("kvbench");
    struct {
        const char *name;
        const TTest *test;
    } cases[] = {
        {"json", every_benchmark_json},
        {"json", multiread_benchmarks},
        {"storage", fill_reports_bytes_written_and_write_amp},
        {"storage", overwrite_on_an_existing_db},
        {"storage", large_values_round_trip},
        {"storage", min_blob_size_flag},
        {"filters", no_filters_read_more_blocks},
        {"filters", nofilter_compares_and_cleans_up},
        {"filters", memtable_filter_per_get},
        {"filters", filter_keyed_hash_gives_the_same_answers},
        {"filters", direct_reads_count_device_reads},
        {"output", histogram_percentiles},
        {"output", threads_share_the_ops},
        {"output", readwhilewriting_writes_beside_the_readers},
        {"output", threads_with_an_existing_db},
        {"output", text_result_line},
        {"output", use_existing_db},
        {"output", drop_cache_runs},
        {"flags", bad_flags_exit_2},
        {"flags", bad_flag_messages_say_what_is_wrong},
        {"dbdir", foreign_directory_is_refused},
        {"dbdir", own_database_is_reset_and_nothing_else},
        {"dbdir", db_that_is_not_a_directory_is_refused},
        {"dbdir", chart_csv_that_is_not_a_regular_file_is_refused},
        {"peers", peer_engines},
        {"peers", peer_blob_files},
        {"peers", lmdb_engine},
        {"peers", lmdb_db_directory},
        {"cleanup", default_run_removes_its_directory},
        {"cleanup", interrupt_and_errors_remove_the_directory},
        {"reports", stats_interval_csv},
        {"reports", xml_checker_catches_mistakes},
        {"reports", sweep_writes_csv_and_svg},
        {"ranges", range_queries},
        {"ranges", range_sweep_writes_csv_and_svg},
        {"reports", scaling_writes_csv_and_svg},
        {"reports", scaling_chart_redraws_a_csv},
        {"reports", timeline_writes_csv_and_svg},
        {"cleanup", scaling_interrupted_cleans_up},
    };
    TCase *tc = NULL;
    const char *cur = "";
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (strcmp(cur, cases[i].name) != 0) {
            cur = cases[i].name;
            tc = tcase_create(cur);
            tcase_add_checked_fixture(tc, test_setup, test_teardown);
            tcase_set_timeout(tc, 300);
            suite_add_tcase(s, tc);
        }
        tcase_add_test(tc, cases[i].test);
    }
    return s;
}
