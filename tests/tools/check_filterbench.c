/* check_filterbench.c - filterbench run as a program (FILTERBENCH_PATH): the
 * JSON fields other tools read, its checks of the filters it times, the
 * human table and its exit codes. Timings are only checked to be there and
 * positive: speed is measured by running filterbench, never by a test. */
#define _XOPEN_SOURCE 700 /* popen */

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "fixture.h"
#include "../tools/hashes.h"

#ifndef FILTERBENCH_PATH
#error "FILTERBENCH_PATH: the filterbench binary (set by tests/CMakeLists.txt)"
#endif

/* Runs filterbench with `args`; returns its stdout (caller frees) and sets
 * *status to its exit code (-1 when it did not exit normally). */
static char *run(const char *args, int *status)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "'%s' %s", FILTERBENCH_PATH, args);
    fflush(NULL);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t len;
    char *out = read_all(p, &len);
    ck_assert_ptr_nonnull(out);
    int st = pclose(p);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return out;
}

/* The number after "name": in one JSON line; NAN when absent. */
static double field(const char *line, const char *name)
{
    char key[64];
    snprintf(key, sizeof key, "\"%s\":", name);
    const char *at = strstr(line, key);
    if (!at)
        return NAN;
    char *end;
    double v = strtod(at + strlen(key), &end);
    return end == at + strlen(key) ? NAN : v;
}

/* The line of `out` that holds "layout":"<layout>", copied into buf. */
static int line_of(const char *out, const char *layout, char *buf, size_t cap)
{
    char key[64];
    snprintf(key, sizeof key, "\"layout\":\"%s\"", layout);
    const char *at = strstr(out, key);
    if (!at)
        return 0;
    const char *start = at;
    while (start > out && start[-1] != '\n')
        start--;
    const char *end = strchr(at, '\n');
    size_t n = end ? (size_t)(end - start) : strlen(start);
    ck_assert_uint_lt(n, cap);
    memcpy(buf, start, n);
    buf[n] = 0;
    return 1;
}

START_TEST(json_has_every_field_for_both_layouts)
{
    int status;
    char *out = run("--keys 30000 --absent 300000 --rounds 1 --threads 2 --json", &status);
    ck_assert_int_eq(status, 0);
    unsigned lines = 0;
    for (const char *p = out; (p = strchr(p, '\n')); p++)
        lines++;
    ck_assert_uint_eq(lines, 2); /* one object per layout */
    static const char *const layouts[] = {"blocked", "classic"};
    static const char *const times[] = {"add_ns", "query_present_ns", "query_absent_ns",
                                        "batch_query_ns", "add_ns_mt", "add_scaling",
                                        "add_ns_mt_interleaved", "add_scaling_interleaved"};
    char line[4096];
    for (unsigned l = 0; l < 2; l++) {
        ck_assert_msg(line_of(out, layouts[l], line, sizeof line), "no %s line in:\n%s",
                      layouts[l], out);
        ck_assert_msg(line[0] == '{' && line[strlen(line) - 1] == '}', "not one object: %s", line);
        ck_assert_msg(strstr(line, "\"ok\":true") != NULL, "filterbench found a fault: %s", line);
        ck_assert_double_eq(field(line, "keys"), 30000);
        ck_assert_double_eq(field(line, "bits_per_key"), 10);
        ck_assert_double_eq(field(line, "threads"), 2);
        double k = field(line, "k");
        ck_assert_msg(k >= 1 && k <= 30, "%s: k %g", layouts[l], k);
        /* 30000 keys at 10 bits each, rounded up to whole blocks or words */
        double bytes = field(line, "bytes");
        ck_assert_msg(bytes >= 37500 && bytes <= 37500 + 64, "%s: %g bytes", layouts[l], bytes);
        for (unsigned t = 0; t < sizeof times / sizeof times[0]; t++) {
            double v = field(line, times[t]);
            ck_assert_msg(v > 0 && isfinite(v), "%s: %s = %g", layouts[l], times[t], v);
        }
        /* 300,000 absent keys at an FPR near 1%: ~3000 false positives, so
         * the measured rate lies well within 20% of the expected one. */
        double fpr = field(line, "fpr"), want = field(line, "expected_fpr");
        ck_assert_msg(want > 0.005 && want < 0.015, "%s: expected_fpr %g", layouts[l], want);
        ck_assert_msg(fabs(fpr - want) <= 0.2 * want, "%s: fpr %g, expected %g", layouts[l], fpr,
                      want);
    }
    free(out);
}
END_TEST

START_TEST(table_by_default)
{
    int status;
    char *out = run("--keys 20000 --absent 100000 --rounds 1 --layout blocked", &status);
    ck_assert_int_eq(status, 0);
    ck_assert_msg(strstr(out, "add ns") && strstr(out, "fpr %"), "no table header:\n%s", out);
    ck_assert_msg(strstr(out, "\nblocked ") != NULL, "no blocked row:\n%s", out);
    ck_assert_msg(strstr(out, "\nclassic ") == NULL, "a classic row for --layout blocked:\n%s",
                  out);
    ck_assert_msg(strstr(out, "FAILED") == NULL, "filterbench found a fault:\n%s", out);
    free(out);
}
END_TEST

/* --kinds: one JSON object per kind, every timing there, and each filter's
 * measured FPR near its expectation and under the target. */
START_TEST(kinds_json_names_every_kind_and_meets_the_target)
{
    int status;
    char *out = run("--kinds --keys 20000 --absent 200000 --rounds 1 --fpr 0.02 --json", &status);
    ck_assert_int_eq(status, 0);
    static const char *const kinds[] = {"bloom", "counting", "scalable-1x", "scalable-100x",
                                        "rotating"};
    static const char *const times[] = {"add_ns", "query_present_ns", "query_absent_ns"};
    unsigned lines = 0;
    for (const char *p = out; (p = strchr(p, '\n')); p++)
        lines++;
    ck_assert_uint_eq(lines, 5);
    char line[4096];
    for (unsigned i = 0; i < 5; i++) {
        char key[64];
        snprintf(key, sizeof key, "{\"kind\":\"%s\",", kinds[i]);
        const char *at = strstr(out, key);
        ck_assert_msg(at != NULL, "no %s line in:\n%s", kinds[i], out);
        const char *end = strchr(at, '\n');
        ck_assert_ptr_nonnull(end);
        ck_assert_uint_lt((size_t)(end - at), sizeof line);
        memcpy(line, at, (size_t)(end - at));
        line[end - at] = 0;
        ck_assert_msg(strstr(line, "\"ok\":true") != NULL, "filterbench found a fault: %s", line);
        ck_assert_double_eq(field(line, "keys"), 20000);
        ck_assert_double_eq(field(line, "target_fpr"), 0.02);
        for (unsigned t = 0; t < sizeof times / sizeof times[0]; t++) {
            double v = field(line, times[t]);
            ck_assert_msg(v > 0 && isfinite(v), "%s: %s = %g", kinds[i], times[t], v);
        }
        double remove = field(line, "remove_ns");
        if (i == 1)
            ck_assert_msg(remove > 0 && isfinite(remove), "counting: remove_ns %g", remove);
        else
            ck_assert_msg(strstr(line, "\"remove_ns\":null") != NULL, "%s: %s", kinds[i], line);
        double bpk = field(line, "bits_per_key");
        ck_assert_msg(bpk > 5 && bpk < 100, "%s: %g bits per key", kinds[i], bpk);
        /* 200,000 absent keys: at least ~200 false positives expected
         * (scalable-1x: its one stage is sized at a tenth of the target),
         * so the measured rate lies within a third of the expected one. */
        double fpr = field(line, "fpr"), want = field(line, "expected_fpr");
        ck_assert_msg(want > 0 && want <= 0.02, "%s: expected_fpr %g", kinds[i], want);
        ck_assert_msg(fabs(fpr - want) <= want / 3, "%s: fpr %g, expected %g", kinds[i], fpr,
                      want);
    }
    free(out);

    out = run("--kinds --keys 20000 --absent 50000 --rounds 1", &status);
    ck_assert_int_eq(status, 0);
    ck_assert_msg(strstr(out, "remove") && strstr(out, "\ncounting ") &&
                      strstr(out, "\nscalable-100x ") && strstr(out, "\nrotating "),
                  "no kinds table:\n%s", out);
    ck_assert_msg(strstr(out, "FAILED") == NULL, "filterbench found a fault:\n%s", out);
    free(out);
}
END_TEST

START_TEST(bad_arguments_exit_2)
{
    static const char *const bad[] = {
        "--keys abc", "--keys 0", "--layout round", "--threads 0", "--threads 65",
        "--bits_per_key 0", "--bits_per_key nan", "--rounds 0", "--key_size 0",
        "--keys", "--frobnicate 1", "--kinds --fpr 0", "--kinds --fpr 1", "--kinds --fpr x"};
    for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char args[128];
        snprintf(args, sizeof args, "%s 2>/dev/null", bad[i]);
        int status;
        char *out = run(args, &status);
        ck_assert_msg(status == 2, "filterbench %s: exit %d, want 2", bad[i], status);
        free(out);
    }
}
END_TEST

/* --mixed: one JSON object per layout and thread count (1, 2, 3 for
 * --threads 3), each with the three contenders' positive ops/s and no
 * fault found. */
START_TEST(mixed_json_has_three_variants_per_thread_count)
{
    int status;
    char *out = run("--mixed --ops 20000 --keys 10000 --rounds 1 --threads 3 --layout both --json",
                    &status);
    ck_assert_int_eq(status, 0);
    static const char *const layouts[] = {"blocked", "classic"};
    static const char *const rates[] = {"ours_ops_s", "mutex_ops_s", "rwlock_ops_s", "vs_mutex",
                                        "vs_rwlock"};
    unsigned lines = 0;
    for (const char *p = out; *p;) {
        const char *nl = strchr(p, '\n');
        ck_assert_msg(nl != NULL, "unterminated line: %s", p);
        char line[1024];
        size_t n = (size_t)(nl - p);
        ck_assert_uint_lt(n, sizeof line);
        memcpy(line, p, n);
        line[n] = 0;
        ck_assert_msg(line[0] == '{' && line[n - 1] == '}', "not one object: %s", line);
        ck_assert_msg(strstr(line, "\"mode\":\"mixed\"") && strstr(line, "\"ok\":true"),
                      "bad line: %s", line);
        unsigned l = lines / 3, t = lines % 3 + 1;
        ck_assert_uint_lt(l, 2);
        char want[64];
        snprintf(want, sizeof want, "\"layout\":\"%s\"", layouts[l]);
        ck_assert_msg(strstr(line, want) != NULL, "line %u: %s", lines, line);
        ck_assert_double_eq(field(line, "threads"), t);
        ck_assert_double_eq(field(line, "ops"), 20000);
        ck_assert_msg(field(line, "cpus") >= 1, "cpus: %s", line);
        for (unsigned r = 0; r < sizeof rates / sizeof rates[0]; r++) {
            double v = field(line, rates[r]);
            ck_assert_msg(v > 0 && isfinite(v), "%s = %g in %s", rates[r], v, line);
        }
        lines++;
        p = nl + 1;
    }
    ck_assert_uint_eq(lines, 6);
    free(out);
}
END_TEST

START_TEST(mixed_table_names_the_cpu_and_the_variants)
{
    int status;
    char *out = run("--mixed --ops 20000 --keys 10000 --rounds 1 --threads 2", &status);
    ck_assert_int_eq(status, 0);
    ck_assert_msg(strstr(out, "ours ops/s") && strstr(out, "mutex ops/s") &&
                      strstr(out, "rwlock ops/s"),
                  "no header:\n%s", out);
    ck_assert_msg(strstr(out, "CPU") != NULL, "no CPU named:\n%s", out);
    unsigned rows = 0;
    for (const char *p = out; (p = strstr(p, "\nblocked ")); p++) {
        unsigned threads;
        double ours, mutex, rwlock;
        ck_assert_int_eq(sscanf(p + 1, "blocked %u %lf %lf %lf", &threads, &ours, &mutex, &rwlock),
                         4);
        ck_assert_uint_eq(threads, rows + 1);
        ck_assert_msg(ours > 0 && mutex > 0 && rwlock > 0, "row: %.60s", p + 1);
        rows++;
    }
    ck_assert_uint_eq(rows, 2);
    ck_assert_msg(strstr(out, "FAILED") == NULL, "filterbench found a fault:\n%s", out);
    free(out);
}
END_TEST


/* ---- --hashes: the hash shoot-out ------------------------------------------------ */

START_TEST(fnv1a_and_murmur3_match_known_vectors)
{
    /* FNV-1a 64 of "", "a" and "foobar" (the FNV authors' test suite). */
    ck_assert(fnv1a64("", 0) == 0xcbf29ce484222325ull);
    ck_assert(fnv1a64("a", 1) == 0xaf63dc4c8601ec8cull);
    ck_assert(fnv1a64("foobar", 6) == 0x85944171f73967e8ull);
    /* MurmurHash3 x64_128: SMHasher's verification value -- the hashes of
     * the keys {}, {0}, {0, 1}, .. {0 .. 254} under seeds 256, 255, .. 2,
     * laid end to end, hashed with seed 0: the first 4 bytes, 0x6384BA69. */
    static uint8_t key[256], all[256 * 16];
    for (int i = 0; i < 256; i++) {
        key[i] = (uint8_t)i;
        uint64_t o[2];
        murmur3_x64_128(key, (size_t)i, (uint32_t)(256 - i), o);
        for (int b = 0; b < 8; b++) {
            all[16 * i + b] = (uint8_t)(o[0] >> (8 * b));
            all[16 * i + 8 + b] = (uint8_t)(o[1] >> (8 * b));
        }
    }
    uint64_t v[2];
    murmur3_x64_128(all, sizeof all, 0, v);
    ck_assert_uint_eq((uint32_t)v[0], 0x6384BA69u);
    /* The empty key with seed 0 hashes to zero; a sentence of 43 bytes
     * (two 16-byte blocks and a tail of 11) to its published digest
     * 6c1b07bc7bbc4be3 47939ac4a93c437a (bytes in order). */
    murmur3_x64_128("", 0, 0, v);
    ck_assert(v[0] == 0 && v[1] == 0);
    murmur3_x64_128("The quick brown fox jumps over the lazy dog", 43, 0, v);
    ck_assert(v[0] == 0xe34bbc7bbc071b6cull && v[1] == 0x7a433ca9c49a9347ull);
}
END_TEST

/* A minimal JSON check for filterbench's lines: one flat object of
 * "name": value pairs, values strings, numbers, true or false. */
static const char *skip_string(const char *p)
{
    if (*p++ != '"')
        return NULL;
    for (; *p && *p != '"'; p++)
        if (*p == '\\' && !*++p)
            return NULL;
    return *p == '"' ? p + 1 : NULL;
}

static int json_object_ok(const char *p)
{
    if (*p++ != '{')
        return 0;
    for (;;) {
        if (!(p = skip_string(p)) || *p++ != ':')
            return 0;
        if (*p == '"') {
            p = skip_string(p);
        } else if (!strncmp(p, "true", 4) || !strncmp(p, "false", 5)) {
            p += *p == 't' ? 4 : 5;
        } else {
            char *end;
            double d = strtod(p, &end);
            if (end == p || !isfinite(d))
                return 0;
            p = end;
        }
        if (!p)
            return 0;
        if (*p == '}')
            return p[1] == 0;
        if (*p++ != ',')
            return 0;
    }
}

/* The string after "name": in one JSON line, copied into buf ("" when absent). */
static void sfield(const char *line, const char *name, char *buf, size_t cap)
{
    char key[64];
    snprintf(key, sizeof key, "\"%s\":\"", name);
    const char *at = strstr(line, key);
    buf[0] = 0;
    if (!at)
        return;
    at += strlen(key);
    size_t n = strcspn(at, "\"");
    if (n >= cap)
        n = cap - 1;
    memcpy(buf, at, n);
    buf[n] = 0;
}

START_TEST(hashes_json_names_every_row)
{
    int status;
    char *out = run("--hashes --keys 20000 --absent 200000 --rounds 1 --json", &status);
    ck_assert_int_eq(status, 0);
    static const char *const hashes[] = {"fnv1a", "murmur3", "xxh64", "xxh3", "siphash"};
    static const char *const shapes[] = {"random", "sequential"};
    unsigned seen[2][2][5] = {{{0}}}; /* shape, naive, hash */
    unsigned lines = 0, xxh3_rows = 0;
    char *save = NULL;
    for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        lines++;
        ck_assert_msg(json_object_ok(line), "not a flat JSON object: %s", line);
        ck_assert_msg(strstr(line, "\"ok\":true") != NULL, "a contender missed keys: %s", line);
        char name[32], base[32], scheme[32], shape[32];
        sfield(line, "name", name, sizeof name);
        sfield(line, "base", base, sizeof base);
        sfield(line, "scheme", scheme, sizeof scheme);
        sfield(line, "key_shape", shape, sizeof shape);
        int naive = strcmp(name, "naive") == 0;
        ck_assert_str_eq(scheme, naive ? "naive" : "kirsch-mitzenmacher");
        if (!naive)
            ck_assert_str_eq(name, base);
        int h = -1, sh = strcmp(shape, "sequential") == 0;
        for (int i = 0; i < 5; i++)
            if (!strcmp(base, hashes[i]))
                h = i;
        ck_assert_msg(h >= 0 && (sh || !strcmp(shape, "random")), "unknown row: %s", line);
        seen[sh][naive][h]++;
        ck_assert_double_eq(field(line, "keys"), 20000);
        ck_assert_double_eq(field(line, "absent"), 200000);
        ck_assert_double_eq(field(line, "k"), 7);
        ck_assert_double_eq(field(line, "m"), 200000);
        static const char *const times[] = {"hash_ns", "add_ns", "query_ns"};
        for (unsigned t = 0; t < 3; t++) {
            double v = field(line, times[t]);
            ck_assert_msg(v > 0 && isfinite(v), "%s: %s = %g", line, times[t], v);
        }
        double fpr = field(line, "fpr"), want = field(line, "expected_fpr");
        ck_assert_msg(fabs(want - 0.00819) < 0.0001, "expected_fpr %g", want);
        /* XXH3 with double hashing: ~1,640 false positives expected, so the
         * measured rate is well within a factor 1.5 either way. */
        if (!naive && h == 3) {
            xxh3_rows++;
            ck_assert_msg(fpr > want / 1.5 && fpr < want * 1.5, "%s", line);
        }
    }
    ck_assert_uint_eq(lines, 20);
    ck_assert_uint_eq(xxh3_rows, 2);
    for (int sh = 0; sh < 2; sh++)
        for (int n = 0; n < 2; n++)
            for (int h = 0; h < 5; h++)
                ck_assert_msg(seen[sh][n][h] == 1, "%s %s %s: %u rows", shapes[sh],
                              n ? "naive" : "km", hashes[h], seen[sh][n][h]);
    free(out);
}
END_TEST

START_TEST(mixed_bad_arguments_exit_2)
{
    static const char *const bad[] = {"--threads 0", "--threads 65", "--ops x", "--ops 1",
                                      "--layout round", "--bits_per_key 0", "--rounds 0",
                                      "--keys", "--frobnicate 1"};
    for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char args[128];
        snprintf(args, sizeof args, "--mixed %s 2>/dev/null", bad[i]);
        int status;
        char *out = run(args, &status);
        ck_assert_msg(status == 2, "filterbench --mixed %s: exit %d, want 2", bad[i], status);
        free(out);
    }
}
END_TEST

START_TEST(hashes_table_names_rows)
{
    int status;
    char *out = run("--hashes --keys 10000 --absent 50000 --rounds 1 --key_shape random "
                    "--key_size 100", &status);
    ck_assert_int_eq(status, 0);
    ck_assert_msg(strstr(out, "hash shoot-out: classic Bloom filter") != NULL, "%s", out);
    ck_assert_msg(strstr(out, "hash ns") && strstr(out, "fpr %"), "no header:\n%s", out);
    static const char *const rows[] = {"\nrandom      fnv1a ", "\nrandom      murmur3 ",
                                       "\nrandom      xxh64 ", "\nrandom      xxh3 ",
                                       "\nrandom      siphash ", "\nrandom      naive    fnv1a "};
    for (unsigned i = 0; i < sizeof rows / sizeof rows[0]; i++)
        ck_assert_msg(strstr(out, rows[i]) != NULL, "no row '%s' in:\n%s", rows[i] + 1, out);
    ck_assert_msg(strstr(out, "\nsequential") == NULL, "a sequential row for random keys:\n%s",
                  out);
    ck_assert_msg(strstr(out, "FAILED") == NULL, "%s", out);
    free(out);

    static const char *const bad[] = {"--hashes --keys 0", "--hashes --key_shape zigzag",
                                      "--hashes --bits_per_key 0.5", "--hashes --rounds 0",
                                      "--hashes --threads 2", "--hashes --key_size"};
    for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char args[128];
        snprintf(args, sizeof args, "%s 2>/dev/null", bad[i]);
        out = run(args, &status);
        ck_assert_msg(status == 2, "filterbench %s: exit %d, want 2", bad[i], status);
        free(out);
    }
}
END_TEST

/* filterbench --range: one CSV row per shape, width and setting, with
 * rates in [0, 1], the worst table at or above the mean, the measured rate
 * near the expected one where the events are many, the summary lines, and
 * exit 2 on bad arguments. */
START_TEST(range_csv_rows_and_rates)
{
    char csv[4096], args[4400];
    test_path(csv, sizeof csv, "range.csv");
    snprintf(args, sizeof args,
             "--range --shape all --keys 4000 --queries 40000 --tables 2 --bits 8,12 "
             "--widths 1,16,64 --csv '%s'",
             csv);
    int status;
    char *out = run(args, &status);
    ck_assert_int_eq(status, 0);
    ck_assert_msg(strstr(out, "real bits per key at which") && strstr(out, "default rule:"), "%s",
                  out);
    free(out);
    FILE *f = fopen(csv, "r");
    ck_assert_ptr_nonnull(f);
    size_t len;
    char *text = read_all(f, &len), *save = NULL;
    fclose(f);
    unsigned rows = 0, checked = 0;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (rows++ == 0) {
            ck_assert_msg(!strncmp(line, "shape,stride,keys,tables,bits,", 30), "%s", line);
            continue;
        }
        char shape[16];
        unsigned long long stride, keys, width, queries, nq;
        unsigned tables;
        double bits, bpk, build, fpr, want, worst, nfpr, nwant, qns;
        int n = sscanf(line,
                       "%15[^,],%llu,%llu,%u,%lf,%lf,%lf,%llu,%llu,%lf,%lf,%lf,%llu,%lf,%lf,%lf",
                       shape, &stride, &keys, &tables, &bits, &bpk, &build, &width, &queries, &fpr,
                       &want, &worst, &nq, &nfpr, &nwant, &qns);
        ck_assert_msg(n == 16, "%s", line);
        ck_assert_msg(keys == 4000 && tables == 2 && queries == 40000 && nq == 40000, "%s", line);
        ck_assert_msg(bpk > 0 && build > 0 && qns > 0, "%s", line);
        ck_assert_msg(fpr >= 0 && fpr <= 1 && want >= 0 && want <= 1 && nfpr >= 0 && nfpr <= 1,
                      "%s", line);
        ck_assert_msg(worst >= fpr - 1e-12, "%s", line);
        if (!strcmp(shape, "kvbench") || !strcmp(shape, "prefixed"))
            ck_assert_msg(stride == (width < 64 ? 64u : 128u), "%s", line);
        else
            ck_assert_msg(!strcmp(shape, "uniform") && stride == 0, "%s", line);
        /* random keys at 8 bits per key, width 1: ~2.3%, some 900 events */
        if (!strcmp(shape, "uniform") && bits == 8 && width == 1) {
            checked++;
            ck_assert_msg(fpr > want / 1.3 && fpr < want * 1.3, "%s", line);
        }
    }
    ck_assert_uint_eq(rows, 1 + 3 * 3 * 2);
    ck_assert_uint_eq(checked, 1);
    free(text);

    static const char *const bad[] = {"--keys 0",       "--bits 2",     "--bits 8:4:1",
                                      "--widths 0",     "--tables 0",   "--stride 1",
                                      "--shape zigzag", "--id_bytes 9", "--csv"};
    for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(args, sizeof args, "--range %s 2>/dev/null", bad[i]);
        out = run(args, &status);
        ck_assert_msg(status == 2, "filterbench --range %s: exit %d, want 2", bad[i], status);
        free(out);
    }
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("filterbench");
    TCase *tc = tcase_create("runs");
    tcase_set_timeout(tc, 600); /* sanitizer builds run it ~10x slower */
    tcase_add_test(tc, json_has_every_field_for_both_layouts);
    tcase_add_test(tc, table_by_default);
    tcase_add_test(tc, kinds_json_names_every_kind_and_meets_the_target);
    tcase_add_test(tc, bad_arguments_exit_2);
    tcase_add_test(tc, mixed_json_has_three_variants_per_thread_count);
    tcase_add_test(tc, mixed_table_names_the_cpu_and_the_variants);
    tcase_add_test(tc, mixed_bad_arguments_exit_2);
    tcase_add_test(tc, fnv1a_and_murmur3_match_known_vectors);
    tcase_add_test(tc, hashes_json_names_every_row);
    tcase_add_test(tc, hashes_table_names_rows);
    suite_add_tcase(s, tc);
    tcase_add_test(test_tcase(s, "range", 600, 1), range_csv_rows_and_rates);
    return s;
}
