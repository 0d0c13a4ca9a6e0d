/* fixture.h - what every Check program shares (tests/fixture.c, the
 * kv_fixture library): a temporary directory per test, opening and closing
 * a store with given options, put and get helpers that fail with the key
 * and the error, the keys the tests name, and the program's main().
 *
 * A program defines its tests and test_suite(), not main(): the fixture's
 * main() builds the suite, makes the program's root directory (under
 * $TMPDIR, /tmp by default, or where test_set_base() says), runs the
 * suite with Check's usual SRunner (CK_FORK, CK_RUN_CASE, CK_VERBOSITY and
 * the rest act as always), removes the root and exits non-zero when a test
 * failed. A tcase that needs files gets test_setup/test_teardown as its
 * checked fixture (test_tcase does it): each test then has its own fresh
 * directory, test_dir, inside the root, removed after it. A failed
 * assertion ends a test before its teardown; the root's removal at the end
 * takes what such a test left.
 *
 * Nothing here needs a feature-test macro of the includer. */
#ifndef KV_TEST_FIXTURE_H
#define KV_TEST_FIXTURE_H

#include <check.h>
#include <stdint.h>
#include <stdio.h>

#include <kv/kv.h>

/* Check's ck_assert_msg (and every ck_assert_* built on it) calls
 * _mark_point on success, which writes the file and line to Check's
 * message file: one write(2) per passing assertion. A model check makes
 * millions of them, and the writes were most of its time (check_compact's
 * model: 80 of 84 s). This version reports a failure exactly as Check's
 * does and does nothing on success; what is lost is the "last passed
 * assertion" Check names when a test dies of a signal (the sanitizers
 * print the stack then, and mark_point() still marks a spot by hand). */
#undef ck_assert_msg
#define ck_assert_msg(expr, ...)                                                                   \
    ((expr)                                                                                        \
         ? (void)0                                                                                 \
         : _ck_assert_failed(__FILE__, __LINE__, "Assertion '" #expr "' failed", ##__VA_ARGS__))

struct stat;
struct FTW;

/* ---- the program's part and the common main ------------------------------------------ */

/* Defined by each program: its suite (one or more tcases). Called once, by
 * main(), before the run; it may call test_set_base and test_at_end. */
Suite *test_suite(void);

/* The folder the program's root directory is made in, instead of $TMPDIR
 * (a disk, not tmpfs, for direct I/O; tmpfs for the fault runs). A
 * relative path is taken from the working directory. */
void test_set_base(const char *base);

/* fn runs in main() after the whole run, before the root is removed (a
 * summary table, a timing line). */
void test_at_end(void (*fn)(void));

/* ---- a directory per test --------------------------------------------------------------- */

/* The running test's own directory (absolute), made by test_setup. */
extern char test_dir[];
/* The program's root directory (absolute): every test_dir lies in it. */
extern char test_root[];

/* A checked fixture: test_setup makes a fresh test_dir, test_teardown
 * removes it with everything in it (and fails the test if it cannot). */
void test_setup(void);
void test_teardown(void);

/* A tcase named name, with the given timeout (seconds, scaled by
 * CK_TIMEOUT_MULTIPLIER as Check does), added to s; with_dir gives its
 * tests the fixture's directory. */
TCase *test_tcase(Suite *s, const char *name, double timeout, int with_dir);

/* p = test_dir/name; the test fails if it does not fit n bytes. */
void test_path(char *p, size_t n, const char *name);

/* ---- the store ---------------------------------------------------------------------------- */

/* kv_open that must succeed: path is a path, or a name without '/' taken
 * inside test_dir; o may be NULL (the defaults). Fails the test with the
 * path, the error and kv_error_text() otherwise. */
kv_db *open_db(const char *path, const kv_options *o);

/* kv_close that must succeed. */
void close_db(kv_db *db);

/* close_db(db), then open_db(path, o): what a test does to see what
 * survives a clean close. */
kv_db *reopen_db(kv_db *db, const char *path, const kv_options *o);

/* kv_put that must succeed; the failure names the key. */
void put_kv(kv_db *db, const void *k, size_t kl, const void *v, size_t vl);

/* put_kv of two C strings (without their NULs). */
void put_str(kv_db *db, const char *k, const char *v);

/* kv_get that must find exactly (v, vl). */
void expect_value(kv_db *db, const void *k, size_t kl, const void *v, size_t vl);

/* kv_get that must answer KV_NOTFOUND. */
void expect_absent(kv_db *db, const void *k, size_t kl);

/* kv_stats that must succeed, into a zeroed *s. */
void get_stats(kv_db *db, struct kv_stats *s);

/* kv_compact_range over every key, which must succeed. */
void compact_all(kv_db *db);

/* ---- keys ---------------------------------------------------------------------------- */

/* Key i as text: prefix, then i in decimal zero-padded to width digits
 * (key_of(k, sizeof k, "key", 8, 7) is "key00000007"), so that text keys
 * sort as their numbers do. Returns its length; the test fails if the key
 * and its NUL do not fit cap. */
size_t key_of(char *k, size_t cap, const char *prefix, int width, uint64_t i);

/* Key i as 8 bytes big-endian: binary keys that sort as their numbers do. */
void key_of_be(uint8_t k[8], uint64_t i);

/* Key i of stream s as 16 well-mixed binary bytes: in no order, and the
 * streams, for all the tests need, disjoint. */
void key_of_mixed(uint8_t k[16], uint64_t s, uint64_t i);

/* Key x as 16 hexadecimal digits of splitmix(x) and a NUL: text keys in no
 * order. Returns 16. */
size_t key_of_hex(char k[17], uint64_t x);

/* ---- small things ------------------------------------------------------------------------ */

/* SplitMix64's output function: a well-mixed 64-bit value from any seed, for
 * reproducible keys and values. */
static inline uint64_t splitmix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* An nftw callback that removes each entry: with FTW_DEPTH | FTW_PHYS it
 * removes a whole directory tree (the caller includes <ftw.h>). */
int remove_one(const char *p, const struct stat *sb, int flag, struct FTW *f);

/* Removes the tree at p when there is one; the test fails if that fails. */
void remove_tree(const char *p);

/* Reads f to its end into a NUL-terminated buffer the caller frees, its
 * length (without the NUL) in *len; NULL when out of memory. */
char *read_all(FILE *f, size_t *len);

#endif /* KV_TEST_FIXTURE_H */
