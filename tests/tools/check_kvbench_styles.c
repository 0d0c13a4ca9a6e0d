/* check_kvbench_styles.c - issue 54's kvbench flags, run as a program
 * (KVBENCH_PATH) at 20000 keys: --compaction_style, --runs_per_level and
 * --max_background_jobs reach the header ("Compaction:") and the JSON for
 * kv, and RocksDB's mapping (level compaction, universal compaction, jobs
 * and subcompactions) when kvbench was built with -DKV_BENCH_PEERS=ON;
 * --memory_limit names its mechanism in the header ("Memory:") and the
 * JSON (memory_limit_mechanism): a cgroup where this machine lets kvbench
 * make one, else direct reads and a block cache of the limit -- either is
 * accepted, one must be named -- and the fallback exactly when
 * KVBENCH_NO_CGROUP is set; the child cgroup is gone after the run; every
 * read line carries device reads per get and how they were counted; fills
 * and waitforcompaction carry the level report; bad values exit 2. The
 * figures themselves are not checked: they are timings and a machine's
 * page cache. */
#define _XOPEN_SOURCE 700

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <kv/kv.h>

#include "fixture.h"

#ifndef KVBENCH_PATH
#error "KVBENCH_PATH: the kvbench binary (set by tests/CMakeLists.txt)"
#endif

#define NUM 20000

/* ---- running kvbench ------------------------------------------------------------------ */

struct output {
    int status;
    long pid;        /* the child's: its cgroup would be kvbench-<pid> */
    char *out, *err; /* stdout (JSON lines), stderr (text) */
};

static char *slurp(const char *p)
{
    FILE *f = fopen(p, "rb");
    ck_assert_msg(f != NULL, "%s: %s", p, strerror(errno));
    size_t cap = 4096, n = 0, got;
    char *buf = malloc(cap);
    ck_assert_ptr_nonnull(buf);
    while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (cap - n < 2) {
            buf = realloc(buf, cap *= 2);
            ck_assert_ptr_nonnull(buf);
        }
    }
    fclose(f);
    buf[n] = 0;
    return buf;
}

/* The database's name in test_dir: one per engine. */
static const char *db_name = "db";

/* Runs kvbench with args (NULL-terminated) on the database db_name. */
static void run(struct output *o, const char *const *args)
{
    char out[700], err[700], db[700], dbflag[720];
    test_path(out, sizeof out, "stdout");
    test_path(err, sizeof err, "stderr");
    test_path(db, sizeof db, db_name);
    snprintf(dbflag, sizeof dbflag, "--db=%s", db);
    const char *argv[40] = {KVBENCH_PATH, dbflag};
    int n = 2;
    for (; args[n - 2]; n++) {
        ck_assert_int_lt(n, 39);
        argv[n] = args[n - 2];
    }
    argv[n] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0)
            _exit(126);
        dup2(fo, 1);
        dup2(fe, 2);
        execv(KVBENCH_PATH, (char *const *)argv);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        ck_assert_int_eq(errno, EINTR);
    o->pid = (long)pid;
    o->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    o->out = slurp(out);
    o->err = slurp(err);
}

static void output_free(struct output *o)
{
    free(o->out);
    free(o->err);
}

/* The k-th JSON line (from 0) of benchmark `name` in out. */
static const char *line_of(const char *out, const char *name, int k)
{
    char want[80];
    snprintf(want, sizeof want, "{\"benchmark\":\"%s\",", name);
    for (const char *p = out; (p = strstr(p, want)) != NULL; p++)
        if ((p == out || p[-1] == '\n') && k-- == 0)
            return p;
    ck_abort_msg("no JSON line for %s (%d)", name, k);
    return NULL;
}

/* A number field of the JSON line at line; -1 when absent. */
static double field(const char *line, const char *name)
{
    char want[80];
    snprintf(want, sizeof want, "\"%s\":", name);
    const char *end = strchr(line, '\n'), *p = strstr(line, want);
    if (!p || (end && p > end))
        return -1;
    return strtod(p + strlen(want), NULL);
}

/* A string field of the JSON line at line into buf ("" when absent). */
static const char *sfield(const char *line, const char *name, char *buf, size_t n)
{
    char want[80];
    snprintf(want, sizeof want, "\"%s\":\"", name);
    const char *end = strchr(line, '\n'), *p = strstr(line, want);
    buf[0] = 0;
    if (!p || (end && p > end))
        return buf;
    p += strlen(want);
    size_t len = strcspn(p, "\"");
    snprintf(buf, n, "%.*s", (int)(len < n ? len : n - 1), p);
    return buf;
}

static void expect_text(const struct output *o, const char *want)
{
    ck_assert_msg(strstr(o->err, want) != NULL, "no \"%s\" in:\n%s", want, o->err);
}

/* No group kvbench-<pid> of the run is left in the process's cgroups
 * (v1's memory hierarchy or v2's): memlimit_leave removed it. */
static void expect_no_cgroup(long pid)
{
    char name[64], line[1024];
    snprintf(name, sizeof name, "kvbench-%ld", pid);
    static const char *const mounts[] = {"/sys/fs/cgroup/memory", "/sys/fs/cgroup",
                                         "/sys/fs/cgroup/unified"};
    FILE *f = fopen("/proc/self/cgroup", "r");
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        const char *grp = strrchr(line, ':');
        for (size_t m = 0; grp && m < 3; m++) {
            char dir[1600];
            snprintf(dir, sizeof dir, "%s%s/%s", mounts[m], grp + 1, name);
            ck_assert_msg(access(dir, F_OK) != 0, "%s left behind", dir);
            snprintf(dir, sizeof dir, "%s/%s", mounts[m], name);
            ck_assert_msg(access(dir, F_OK) != 0, "%s left behind", dir);
        }
    }
    if (f)
        fclose(f);
}

/* The read lines' device figures and the mechanism, on every read line. */
static void check_reads(const struct output *o, const char *mech_want)
{
    static const char *const reads[] = {"readrandom", "readmissing"};
    char how[200], mech[40];
    for (int i = 0; i < 2; i++) {
        const char *l = line_of(o->out, reads[i], 0);
        ck_assert_double_eq(field(l, "found"), i == 0 ? NUM : 0);
        ck_assert_double_ge(field(l, "device_reads_per_get_measured"), 0);
        ck_assert_msg(sfield(l, "device_reads_counted_by", how, sizeof how)[0], "%s", l);
        ck_assert_double_eq(field(l, "memory_limit"), 64 << 20);
        sfield(l, "memory_limit_mechanism", mech, sizeof mech);
        if (mech_want)
            ck_assert_str_eq(mech, mech_want);
        else
            ck_assert_msg(!strcmp(mech, "cgroup_v1") || !strcmp(mech, "cgroup_v2") ||
                              !strcmp(mech, "direct_reads"),
                          "mechanism %s", mech);
    }
    expect_text(o, "    device   : ");
    expect_text(o, " device reads per get (");
}

/* ---- kv ------------------------------------------------------------------------------------ */

#define READS "--benchmarks=fillrandom,waitforcompaction,readrandom,readmissing"

/* Lazy leveling with K and jobs, under whatever limit the machine allows. */
START_TEST(kv_lazy_leveled_under_a_limit)
{
    const char *args[] = {"--num=20000",
                          READS,
                          "--compaction_style=lazy_leveled",
                          "--runs_per_level=3",
                          "--max_background_jobs=2",
                          "--memory_limit=64M",
                          "--write_buffer_size=262144",
                          "--json",
                          NULL};
    struct output o;
    run(&o, args);
    ck_assert_msg(o.status == 0, "exit %d: %s", o.status, o.err);
    expect_text(&o,
                "Compaction:  lazy leveled, 2 background jobs; 3 runs per level above the last");
    expect_text(&o, "Memory:      64.0 MB");
    ck_assert_msg(strstr(o.err, "cgroup v1, memory.limit_in_bytes of") ||
                      strstr(o.err, "cgroup v2, memory.max of") ||
                      strstr(o.err, "no writable cgroup, so direct reads (O_DIRECT)"),
                  "no mechanism named:\n%s", o.err);
    check_reads(&o, NULL);
    char buf[64];
    const char *fill = line_of(o.out, "fillrandom", 0);
    ck_assert_str_eq(sfield(fill, "compaction_style", buf, sizeof buf), "lazy_leveled");
    ck_assert_double_eq(field(fill, "runs_per_level"), 3);
    ck_assert_double_eq(field(fill, "max_background_jobs"), 2);
    /* the level report: after the fill and after waitforcompaction */
    for (int k = 0; k < 2; k++) {
        const char *l = line_of(o.out, k ? "waitforcompaction" : "fillrandom", 0);
        double runs = 0, amp = 0;
        char name[32];
        for (int lv = 0; lv < 7; lv++) {
            snprintf(name, sizeof name, "level%d_runs", lv);
            ck_assert_double_ge(field(l, name), 0);
            runs += field(l, name);
            snprintf(name, sizeof name, "level%d_write_amp", lv);
            amp += field(l, name);
        }
        ck_assert_msg(runs >= 1 && amp > 0.5, "runs %g, write amp %g: %s", runs, amp, l);
    }
    expect_text(&o, "    levels   : L0 ");
    expect_text(&o, "(kv_stats.level_runs, level_bytes, level_write_amp");
    expect_no_cgroup(o.pid);
    output_free(&o);
}
END_TEST

/* KVBENCH_NO_CGROUP: the fallback, direct reads and a block cache of the limit. */
START_TEST(kv_fallback_when_no_cgroup)
{
    ck_assert_int_eq(setenv("KVBENCH_NO_CGROUP", "1", 1), 0);
    const char *args[] = {"--num=20000", READS, "--memory_limit=64M", "--json", NULL};
    struct output o;
    run(&o, args);
    ck_assert_msg(o.status == 0, "exit %d: %s", o.status, o.err);
    expect_text(&o, "Memory:      64.0 MB: no writable cgroup, so direct reads (O_DIRECT) and a "
                    "64.0 MB block cache");
    expect_text(&o, "Compaction:  leveled (kv's default), ");
    check_reads(&o, "direct_reads");
    const char *l = line_of(o.out, "readrandom", 0);
    ck_assert_double_eq(field(l, "cache_size"), 64 << 20);
    ck_assert_double_eq(field(l, "use_direct_reads"), 1);
    output_free(&o);
    /* given flags stay as given */
    const char *args2[] = {"--num=2000",           READS,    "--memory_limit=1G",
                           "--cache_size=1000000", "--json", NULL};
    run(&o, args2);
    ck_assert_msg(o.status == 0, "exit %d: %s", o.status, o.err);
    ck_assert_double_eq(field(line_of(o.out, "readrandom", 0), "cache_size"), 1000000);
    ck_assert_double_eq(field(line_of(o.out, "readrandom", 0), "memory_limit"), 1 << 30);
    output_free(&o);
}
END_TEST

START_TEST(bad_values_exit_2)
{
    static const char *const bad[] = {"--compaction_style=tiered", "--runs_per_level=1",
                                      "--runs_per_level=33",       "--max_background_jobs=0",
                                      "--max_background_jobs=65",  "--memory_limit=12",
                                      "--memory_limit=1X",         "--memory_limit=M"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *args[] = {"--num=10", bad[i], NULL};
        struct output o;
        run(&o, args);
        ck_assert_msg(o.status == 2, "%s: exit %d", bad[i], o.status);
        ck_assert_msg(strstr(o.err, bad[i]) != NULL, "%s: %s", bad[i], o.err);
        output_free(&o);
    }
}
END_TEST

/* ---- the peers ------------------------------------------------------------------------------- */

/* RocksDB leveled and universal with jobs; LevelDB says the flags do not
 * apply and that it is not limited in the fallback. */
START_TEST(peers)
{
    ck_assert_int_eq(setenv("KVBENCH_NO_CGROUP", "1", 1), 0);
    for (int e = 0; e < 3; e++) {
        const char *style = e == 1 ? "--compaction_style=lazy_leveled"
                                   : "--compaction_style=leveled";
        const char *args[] = {e == 2 ? "--engine=leveldb" : "--engine=rocksdb",
                              "--num=20000",
                              READS,
                              style,
                              "--max_background_jobs=2",
                              "--memory_limit=64M",
                              "--write_buffer_size=262144",
                              "--json",
                              NULL};
        struct output o;
        db_name = e == 2 ? "leveldb" : e ? "universal" : "leveled";
        run(&o, args);
        if (o.status == 2 && strstr(o.err, "-DKV_BENCH_PEERS=ON")) { /* no peers built */
            output_free(&o);
            return;
        }
        ck_assert_msg(o.status == 0, "exit %d: %s", o.status, o.err);
        char buf[64];
        if (e == 2) {
            expect_text(&o, "Compaction:  --compaction_style, --runs_per_level and "
                            "--max_background_jobs do not apply to leveldb");
            expect_text(&o, "so not limited: leveldb has no direct reads");
            check_reads(&o, "not_limited");
            expect_text(&o, "    levels   : (the leveldb engine reports no levels)");
            output_free(&o);
            continue;
        }
        expect_text(&o, e ? "Compaction:  RocksDB universal compaction (kCompactionStyleUniversal: "
                            "RocksDB's nearest to lazy leveling, the blunt version)"
                          : "Compaction:  RocksDB level compaction (kCompactionStyleLevel)");
        expect_text(&o, "max_background_jobs 2, max_subcompactions 2");
        check_reads(&o, "direct_reads");
        const char *l = line_of(o.out, "readrandom", 0);
        ck_assert_str_eq(sfield(l, "compaction_style", buf, sizeof buf),
                         e ? "universal" : "leveled");
        ck_assert_double_eq(field(l, "use_direct_reads"), -1); /* kv's field only */
        const char *w = line_of(o.out, "waitforcompaction", 0);
        ck_assert_double_ge(field(w, "level0_runs"), 0);
        double amp = 0;
        for (int lv = 0; lv < 7; lv++) {
            char name[32];
            snprintf(name, sizeof name, "level%d_write_amp", lv);
            amp += field(w, name);
        }
        ck_assert_msg(amp > 0.5, "write amp %g: %s", amp, w);
        expect_text(&o, "(RocksDB: runs = L0 files + 1 per non-empty deeper level");
        output_free(&o);
    }
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("kvbench_styles");
    TCase *tc = test_tcase(s, "kvbench_styles", 300, 1);
    tcase_add_test(tc, kv_lazy_leveled_under_a_limit);
    tcase_add_test(tc, kv_fallback_when_no_cgroup);
    tcase_add_test(tc, bad_values_exit_2);
    tcase_add_test(tc, peers);
    return s;
}
