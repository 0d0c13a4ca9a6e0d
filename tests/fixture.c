/* fixture.c - the Check programs' shared fixture and main() (fixture.h). */
#define _XOPEN_SOURCE 700 /* nftw, mkdtemp, realpath */
#include "fixture.h"

#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

char test_dir[1024];
char test_root[900];

static const char *base_dir; /* test_set_base's, or NULL: $TMPDIR */
static void (*at_end)(void);

void test_set_base(const char *base)
{
    base_dir = base;
}

void test_at_end(void (*fn)(void))
{
    at_end = fn;
}

/* ---- directories ---------------------------------------------------------------------- */

int remove_one(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb;
    (void)flag;
    (void)f;
    return remove(p);
}

void remove_tree(const char *p)
{
    struct stat st;
    if (lstat(p, &st) == 0)
        ck_assert_msg(nftw(p, remove_one, 16, FTW_DEPTH | FTW_PHYS) == 0, "removing %s: %s", p,
                      strerror(errno));
}

void test_setup(void)
{
    int n = snprintf(test_dir, sizeof test_dir, "%s/test-XXXXXX", test_root);
    ck_assert(n > 0 && (size_t)n < sizeof test_dir);
    ck_assert_msg(mkdtemp(test_dir) != NULL, "mkdtemp(%s): %s", test_dir, strerror(errno));
}

void test_teardown(void)
{
    remove_tree(test_dir);
}

TCase *test_tcase(Suite *s, const char *name, double timeout, int with_dir)
{
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, timeout);
    if (with_dir)
        tcase_add_checked_fixture(tc, test_setup, test_teardown);
    suite_add_tcase(s, tc);
    return tc;
}

void test_path(char *p, size_t n, const char *name)
{
    int len = snprintf(p, n, "%s/%s", test_dir, name);
    ck_assert_msg(len > 0 && (size_t)len < n, "%s/%s does not fit %zu bytes", test_dir, name, n);
}

/* ---- the store ---------------------------------------------------------------------------- */

kv_db *open_db(const char *path, const kv_options *o)
{
    char in[1200];
    if (!strchr(path, '/')) {
        test_path(in, sizeof in, path);
        path = in;
    }
    kv_db *db = NULL;
    int rc = kv_open(path, o, &db);
    ck_assert_msg(rc == KV_OK, "kv_open(%s): %s: %s", path, kv_strerror(rc), kv_error_text());
    ck_assert_ptr_nonnull(db);
    return db;
}

void close_db(kv_db *db)
{
    int rc = kv_close(db);
    ck_assert_msg(rc == KV_OK, "kv_close: %s: %s", kv_strerror(rc), kv_error_text());
}

kv_db *reopen_db(kv_db *db, const char *path, const kv_options *o)
{
    close_db(db);
    return open_db(path, o);
}

/* The key, printable, for a failure message: text as it is, else hex. */
static const char *shown(const void *k, size_t kl, char *buf, size_t cap)
{
    const uint8_t *b = k;
    int text = kl < cap / 2;
    for (size_t i = 0; text && i < kl; i++)
        text = b[i] >= 0x20 && b[i] < 0x7F;
    if (text) {
        snprintf(buf, cap, "\"%.*s\"", (int)kl, (const char *)k);
        return buf;
    }
    size_t n = 0;
    buf[n++] = '0';
    buf[n++] = 'x';
    for (size_t i = 0; i < kl && n + 3 <= cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%02x", b[i]);
    buf[n] = 0;
    return buf;
}

void put_kv(kv_db *db, const void *k, size_t kl, const void *v, size_t vl)
{
    char b[80];
    int rc = kv_put(db, k, kl, v, vl);
    ck_assert_msg(rc == KV_OK, "kv_put(%s, klen %zu, vlen %zu): %s", shown(k, kl, b, sizeof b), kl,
                  vl, kv_strerror(rc));
}

void put_str(kv_db *db, const char *k, const char *v)
{
    put_kv(db, k, strlen(k), v, strlen(v));
}

void expect_value(kv_db *db, const void *k, size_t kl, const void *v, size_t vl)
{
    char b[80];
    void *got = NULL;
    size_t n = (size_t)-1;
    int rc = kv_get(db, k, kl, &got, &n);
    ck_assert_msg(rc == KV_OK, "kv_get(%s, klen %zu): %s", shown(k, kl, b, sizeof b), kl,
                  kv_strerror(rc));
    ck_assert_ptr_nonnull(got);
    ck_assert_msg(n == vl, "kv_get(%s): %zu bytes, want %zu", shown(k, kl, b, sizeof b), n, vl);
    ck_assert_msg(vl == 0 || memcmp(got, v, vl) == 0, "kv_get(%s): another value",
                  shown(k, kl, b, sizeof b));
    kv_free(got);
}

void expect_absent(kv_db *db, const void *k, size_t kl)
{
    char b[80];
    void *got = NULL;
    size_t n = 0;
    int rc = kv_get(db, k, kl, &got, &n);
    ck_assert_msg(rc == KV_NOTFOUND, "kv_get(%s, klen %zu) of an absent key: %s",
                  shown(k, kl, b, sizeof b), kl, kv_strerror(rc));
}

void get_stats(kv_db *db, struct kv_stats *s)
{
    memset(s, 0, sizeof *s);
    int rc = kv_stats(db, s);
    ck_assert_msg(rc == KV_OK, "kv_stats: %s", kv_strerror(rc));
}

void compact_all(kv_db *db)
{
    int rc = kv_compact_range(db, NULL, 0, NULL, 0);
    ck_assert_msg(rc == KV_OK, "kv_compact_range: %s", kv_strerror(rc));
}

/* ---- keys ------------------------------------------------------------------------------- */

size_t key_of(char *k, size_t cap, const char *prefix, int width, uint64_t i)
{
    int n = snprintf(k, cap, "%s%0*" PRIu64, prefix, width, i);
    ck_assert_msg(n > 0 && (size_t)n < cap, "key %s%" PRIu64 " does not fit %zu bytes", prefix, i,
                  cap);
    return (size_t)n;
}

void key_of_be(uint8_t k[8], uint64_t i)
{
    for (int b = 0; b < 8; b++)
        k[b] = (uint8_t)(i >> (56 - 8 * b));
}

void key_of_mixed(uint8_t k[16], uint64_t s, uint64_t i)
{
    uint64_t a = splitmix(s * 0x100000001B3ull + i), b = splitmix(a ^ s);
    memcpy(k, &a, 8);
    memcpy(k + 8, &b, 8);
}

size_t key_of_hex(char k[17], uint64_t x)
{
    snprintf(k, 17, "%016" PRIx64, splitmix(x));
    return 16;
}

/* ---- small things ---------------------------------------------------------------------- */

char *read_all(FILE *f, size_t *len)
{
    size_t cap = 4096, n = 0, got;
    char *b = malloc(cap);
    while (b && (got = fread(b + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (cap - n - 1 == 0) {
            char *bigger = realloc(b, cap * 2);
            if (!bigger)
                free(b);
            b = bigger;
            cap *= 2;
        }
    }
    if (b) {
        b[n] = 0;
        *len = n;
    }
    return b;
}

/* ---- main ----------------------------------------------------------------------------------- */

/* Makes test_root: <base>/kv-<program>-XXXXXX, absolute. */
static int make_root(const char *argv0)
{
    const char *base = base_dir;
    if (!base || !*base)
        base = getenv("TMPDIR");
    if (!base || !*base)
        base = "/tmp";
    char abs[PATH_MAX];
    if (!realpath(base, abs)) {
        perror(base);
        return -1;
    }
    const char *prog = strrchr(argv0, '/');
    prog = prog ? prog + 1 : argv0;
    int n = snprintf(test_root, sizeof test_root, "%s/kv-%s-XXXXXX", abs, prog);
    if (n <= 0 || (size_t)n >= sizeof test_root) {
        fprintf(stderr, "%s: the path of the test directory is too long\n", abs);
        return -1;
    }
    if (!mkdtemp(test_root)) {
        perror(test_root);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    (void)argc;
    Suite *s = test_suite();
    if (make_root(argv[0]) != 0)
        return EXIT_FAILURE;
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    if (at_end)
        at_end();
    nftw(test_root, remove_one, 16, FTW_DEPTH | FTW_PHYS);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
