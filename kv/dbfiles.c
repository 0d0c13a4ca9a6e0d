/* dbfiles.c - the names in a database directory, the LOCK, the one
 * classification of directory entries that kv_open and kv_inspect share,
 * and kv_destroy, which removes them. The list of names: dbfiles.h. */
#define _DEFAULT_SOURCE /* flock, dirent */
#include "dbfiles.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <kv/kv.h> /* KV_FILE_* */
#include "db.h"    /* kv_db_einval */
#include "util/error.h"
#include "util/file.h"

char *kv_dbfile_path(const char *dir, uint64_t number, const char *ext)
{
    size_t n = strlen(dir) + strlen(ext) + 24; /* '/', 20 digits, '.', NUL */
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%06llu.%s", dir, (unsigned long long)number, ext);
    return p;
}

char *kv_dbfile_join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

const char *kv_dbfile_number(const char *name, uint64_t *number)
{
    if (name[0] < '0' || name[0] > '9')
        return NULL;
    char *end;
    errno = 0;
    unsigned long long n = strtoull(name, &end, 10);
    size_t digits = (size_t)(end - name);
    if (errno || n > KV_DBFILE_MAX_NUMBER || digits < 6 || (digits > 6 && name[0] == '0'))
        return NULL; /* not a number kv gives, or not written as kv_dbfile_path writes it */
    *number = n;
    return end;
}

int kv_dbfile_classify(const char *name, const kv_manifest_state *st,
                       const kv_table_meta *tables, size_t ntables,
                       const kv_manifest_blob *blobs, size_t nblobs, uint64_t *number)
{
    *number = 0;
    if (strcmp(name, KV_MANIFEST_FILE) == 0 || strcmp(name, KV_MANIFEST_FILE "-lock") == 0)
        return KV_FILE_MANIFEST;
    if (strcmp(name, "LOCK") == 0)
        return KV_FILE_LOCK;
    uint64_t n, next = st ? st->next_file : 1;
    uint64_t foreign = next > UINT64_MAX - KV_DBFILE_MAX_AHEAD ? UINT64_MAX
                                                                : next + KV_DBFILE_MAX_AHEAD;
    const char *end = kv_dbfile_number(name, &n);
    if (!end || n >= foreign)
        return KV_FILE_OTHER; /* not a number kv gives, or not this database's (dbfiles.h) */
    *number = n;
    if (strcmp(end, ".sst") == 0) {
        for (size_t i = 0; i < ntables; i++)
            if (tables[i].number == n)
                return KV_FILE_TABLE;
        return KV_FILE_ORPHAN;
    }
    if (strcmp(end, ".sst.tmp") == 0)
        return KV_FILE_TEMP;
    if (strcmp(end, ".blob") == 0) {
        for (size_t i = 0; i < nblobs; i++)
            if (blobs[i].number == n)
                return KV_FILE_BLOB;
        return KV_FILE_BLOB_ORPHAN;
    }
    if (strcmp(end, ".log") == 0)
        return n >= (st ? st->log_number : 0) ? KV_FILE_LOG : KV_FILE_OLD_LOG;
    return KV_FILE_OTHER;
}

void kv_dbfile_remove_logs_below(const char *dir, const kv_manifest_state *st, kv_manifest *man,
                                 uint64_t txn)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        uint64_t n;
        if (kv_dbfile_classify(de->d_name, st, NULL, 0, NULL, 0, &n) != KV_FILE_OLD_LOG)
            continue;
        char *p = kv_dbfile_join(dir, de->d_name);
        if (p && man)
            kv_manifest_unlink(man, p, txn);
        else if (p)
            unlink(p);
        free(p);
    }
    closedir(d);
}

int kv_dbfile_lock(const char *dir, int *fd_out)
{
    *fd_out = -1;
    char *p = kv_dbfile_join(dir, "LOCK");
    if (!p)
        return kv_error_set(KV_ENOMEM, "%s/LOCK: out of memory", dir);
    /* O_NOFOLLOW: a link would make O_CREAT create its target, anywhere.
     * O_NONBLOCK: a FIFO opened read-only would wait for a writer. */
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    int e = errno;
    if (fd < 0 && (e == EACCES || e == EROFS)) {
        /* flock needs no write access */
        fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0 && errno != ENOENT)
            e = errno; /* else: the LOCK is not there and cannot be made (e) */
    }
    int rc = KV_OK;
    if (fd < 0 && e == ELOOP) { /* a link: kv_file_check says so */
        rc = kv_file_check(p, 0, NULL);
        if (rc == KV_OK || rc == KV_NOTFOUND)
            rc = kv_error_set(KV_EIO, "%s: open: a symbolic link a moment ago, and not now", p);
    } else if (fd >= 0 && (rc = kv_file_check_fd(fd, p)) != KV_OK)
        close(fd); /* a FIFO, a device, ... */
    else if (fd < 0)
        rc = kv_error_errno(e, "%s: open", p);
    else if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        e = errno;
        close(fd);
        rc = e == EWOULDBLOCK ? kv_error_set(KV_EBUSY, "%s: locked: the database is open, in "
                                             "this process or another", p)
                              : kv_error_errno(e, "%s: flock", p);
    } else
        *fd_out = fd;
    free(p);
    return rc;
}

/* lstat's answer: 1 exists (*st filled), 0 absent, or a kv error with text. */
int kv_dbfile_exists(const char *p, struct stat *st)
{
    if (lstat(p, st) == 0)
        return 1;
    if (errno == ENOENT)
        return 0;
    return kv_error_errno(errno, "%s: stat", p);
}

/* Removes what a killed run left in <path>/repair.tmp/ (LMDB's two files,
 * if regular files) and the directory, when it is there. */
int kv_dbfile_clear_repair_dir(const char *path)
{
    char *dir = kv_dbfile_join(path, KV_REPAIR_DIR);
    char *m = dir ? kv_dbfile_join(dir, KV_MANIFEST_FILE) : NULL;
    char *l = dir ? kv_dbfile_join(dir, KV_MANIFEST_FILE "-lock") : NULL;
    int rc = KV_OK;
    struct stat st;
    if (!dir || !m || !l) {
        rc = kv_error_set(KV_ENOMEM, "%s: out of memory", path);
    } else if ((rc = kv_dbfile_exists(dir, &st)) == 1) {
        rc = KV_OK;
        if (!S_ISDIR(st.st_mode))
            rc = kv_error_set(KV_ECORRUPT,
                              "%s: not a directory (kv_repair builds its manifest "
                              "there)",
                              dir);
        for (int i = 0; rc == KV_OK && i < 2; i++) {
            const char *f = i ? l : m;
            int e = kv_dbfile_exists(f, &st);
            if (e == 1 && !S_ISREG(st.st_mode))
                rc = kv_error_set(KV_ECORRUPT, "%s: not a regular file", f);
            else if (e == 1 && unlink(f) != 0)
                rc = kv_error_errno(errno, "%s: unlink", f);
            else if (e < 0)
                rc = e;
        }
        if (rc == KV_OK && rmdir(dir) != 0)
            rc = kv_error_errno(errno, "%s: rmdir (it holds files kv did not put there)", dir);
    }
    free(dir);
    free(m);
    free(l);
    return rc;
}

/* ---- kv_destroy --------------------------------------------------------------------- */

/* Is `name` one kv makes in a database directory (dbfiles.h)? LOCK is
 * left out: it goes last. */
static int kv_made(const char *name)
{
    if (strcmp(name, KV_MANIFEST_FILE) == 0 || strcmp(name, KV_MANIFEST_FILE "-lock") == 0)
        return 1;
    uint64_t n;
    const char *end = kv_dbfile_number(name, &n);
    return end && (strcmp(end, ".sst") == 0 || strcmp(end, ".log") == 0 ||
                   strcmp(end, ".sst.tmp") == 0 || strcmp(end, ".blob") == 0);
}

/* Unlinks <dir>/<name> when it is a regular file; the first error is kept
 * in *first (its text set then). */
static void remove_file(const char *dir, const char *name, int *first)
{
    char *p = kv_dbfile_join(dir, name);
    struct stat st;
    int rc = KV_OK;
    if (!p)
        rc = kv_error_set(KV_ENOMEM, "%s: kv_destroy: out of memory", dir);
    else if (lstat(p, &st) != 0) {
        if (errno != ENOENT)
            rc = kv_error_errno(errno, "%s: stat", p);
    } else if (S_ISREG(st.st_mode) && unlink(p) != 0 && errno != ENOENT)
        rc = kv_error_errno(errno, "%s: unlink", p);
    if (rc != KV_OK && *first == KV_OK)
        *first = rc;
    free(p);
}

int kv_destroy(const char *path)
{
    if (!path || !*path)
        return kv_db_einval(NULL, "kv_destroy", "%s path", path ? "empty" : "NULL");
    unsigned long long mark = kv_error_mark();
    struct stat st;
    if (stat(path, &st) != 0) {
        if (errno == ENOENT)
            return KV_OK; /* nothing there: nothing to remove */
        return kv_error_errno(errno, "%s: stat", path);
    }
    if (!S_ISDIR(st.st_mode))
        return kv_error_set(KV_EINVAL, "%s: kv_destroy: not a directory", path);
    int fd, rc = kv_dbfile_lock(path, &fd);
    if (rc != KV_OK)
        return rc;
    DIR *d = opendir(path);
    if (!d) {
        rc = kv_error_errno(errno, "%s: opendir", path);
    } else {
        /* Names first, then the removals: unlinking while readdir walks
         * the directory could make it skip an entry. */
        char **names = NULL;
        size_t n = 0, cap = 0;
        struct dirent *de;
        while (rc == KV_OK && (de = readdir(d)) != NULL) {
            if (!kv_made(de->d_name))
                continue;
            if (n == cap) {
                size_t nc = cap ? 2 * cap : 32;
                char **b = realloc(names, nc * sizeof *b);
                if (!b) {
                    rc = kv_error_set(KV_ENOMEM, "%s: kv_destroy: out of memory", path);
                    break;
                }
                names = b;
                cap = nc;
            }
            if (!(names[n] = strdup(de->d_name)))
                rc = kv_error_set(KV_ENOMEM, "%s: kv_destroy: out of memory", path);
            else
                n++;
        }
        closedir(d);
        int first = rc;
        for (size_t i = 0; i < n; i++) {
            remove_file(path, names[i], &first);
            free(names[i]);
        }
        free(names);
        rc = first;
        /* A repair's leftover; one that holds anything else is not kv's
         * alone, and stays as it is (then so does the directory). */
        if (rc == KV_OK && kv_dbfile_clear_repair_dir(path) == KV_ENOMEM)
            rc = KV_ENOMEM;
    }
    if (rc == KV_OK) {
        /* The LOCK last, while it is held; then the directory, when that
         * left it empty (anything else in it is not ours). */
        remove_file(path, "LOCK", &rc);
        close(fd);
        if (rc == KV_OK && rmdir(path) != 0 && errno != ENOTEMPTY && errno != EEXIST)
            rc = kv_error_errno(errno, "%s: rmdir", path);
    } else {
        close(fd);
    }
    if (rc != KV_OK && !kv_error_since(mark))
        kv_error_set(rc, "%s: kv_destroy: %s", path, kv_strerror(rc));
    return rc;
}
