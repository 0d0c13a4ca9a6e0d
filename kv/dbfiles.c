/* dbfiles.c - the names in a database directory, the LOCK, and the one
 * classification of directory entries that kv_open and kv_inspect share.
 * The list of names: dbfiles.h. */
#define _DEFAULT_SOURCE /* flock, dirent */
#include "dbfiles.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include <kv/kv.h> /* KV_FILE_* */
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

void kv_dbfile_remove_logs_below(const char *dir, const kv_manifest_state *st)
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
        if (p)
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
