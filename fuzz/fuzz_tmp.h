/* fuzz_tmp.h - scratch directories of fuzz_wal, fuzz_manifest and fuzz_api,
 * and their CHECK.
 *
 * A target works in kv-fuzz-<target>-<pid>-XXXXXX under $TMPDIR, else
 * /dev/shm, else /tmp, and leaves nothing behind:
 * - it removes the directory when done with it (fz_done), and at exit;
 * - a failed CHECK, or an AddressSanitizer report, removes it before the
 *   process dies (the reproducer is the input libFuzzer saves, not the
 *   directory);
 * - what a process that died otherwise left (a timeout, out-of-memory, a
 *   UBSan report, a kill) is removed by the next start of the same target,
 *   once no process of that pid is alive (fz_init).
 * A store's directory holds only files, so removing one level is enough.
 *
 * Included by one source file per target: the definitions are static. */
#ifndef KV_FUZZ_TMP_H
#define KV_FUZZ_TMP_H

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

static char fz_base[256];   /* where the directories go */
static char fz_prefix[64];  /* "kv-fuzz-<target>-" */
static char fz_dir[400];    /* the current directory, "" when none */

static void fz_fail(void) __attribute__((noreturn));

/* A property that must hold; when it does not, it is named on stderr, the
 * scratch directory goes and the process traps (libFuzzer saves the input
 * as a crash). */
#define CHECK(c)                                                                          \
    ((c) ? (void)0                                                                        \
         : (fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #c), fz_fail()))

static void fz_rmdir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        char p[700];
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
            unlink(p);
        }
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

/* Removes the current directory, if any. */
static void fz_done(void)
{
    if (fz_dir[0])
        fz_rmdir(fz_dir);
    fz_dir[0] = '\0';
}

static void fz_fail(void)
{
    fz_done();
    __builtin_trap();
}

/* AddressSanitizer calls this (a weak hook) when it is about to report. */
void __asan_on_error(void);
void __asan_on_error(void) { fz_done(); }

/* Picks the base directory and removes what dead runs of this target left. */
static void fz_init(const char *target)
{
    const char *b = getenv("TMPDIR");
    struct stat st;
    if (!b || !*b)
        b = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0
                ? "/dev/shm" : "/tmp";
    snprintf(fz_base, sizeof fz_base, "%s", b);
    snprintf(fz_prefix, sizeof fz_prefix, "kv-fuzz-%s-", target);
    atexit(fz_done);
    DIR *d = opendir(fz_base);
    struct dirent *de;
    size_t plen = strlen(fz_prefix);
    while (d && (de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, fz_prefix, plen) != 0)
            continue;
        char *end;
        long pid = strtol(de->d_name + plen, &end, 10);
        if (end == de->d_name + plen || *end != '-' || pid <= 0 || pid == (long)getpid())
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue; /* alive, or not ours to judge */
        char p[700];
        snprintf(p, sizeof p, "%s/%s", fz_base, de->d_name);
        fz_rmdir(p);
    }
    if (d)
        closedir(d);
}

/* Makes a new current directory (the previous one must be done). */
static const char *fz_mkdir(void)
{
    CHECK(!fz_dir[0]);
    snprintf(fz_dir, sizeof fz_dir, "%s/%s%ld-XXXXXX", fz_base, fz_prefix, (long)getpid());
    CHECK(mkdtemp(fz_dir) != NULL);
    return fz_dir;
}

#endif /* KV_FUZZ_TMP_H */
