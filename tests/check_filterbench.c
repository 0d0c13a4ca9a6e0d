/* check_filterbench.c - filterbench run as a program (FILTERBENCH_PATH): the
 * JSON fields other tools read, its checks of the filters it times, the
 * human table and its exit codes. Timings are only checked to be there and
 * positive: speed is measured by running filterbench, never by a test. */
#define _XOPEN_SOURCE 700 /* popen; testutil.h's nftw */

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "testutil.h"

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

int main(void)
{
    Suite *s = suite_create("filterbench");
    TCase *tc = tcase_create("runs");
    tcase_set_timeout(tc, 600); /* sanitizer builds run it ~10x slower */
    tcase_add_test(tc, json_has_every_field_for_both_layouts);
    tcase_add_test(tc, table_by_default);
    tcase_add_test(tc, kinds_json_names_every_kind_and_meets_the_target);
    tcase_add_test(tc, bad_arguments_exit_2);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
