/* file.c - counted, fault-injectable file I/O on POSIX descriptors. */
#define _POSIX_C_SOURCE 200809L
#include "file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct kv_file {
    int fd;
    kv_file_kind kind;
    uint64_t end; /* append position */
};

/* Calls per (file kind, op); [KV_FILE_KIND_ANY] counts every call. */
static _Atomic uint64_t op_calls[KV_FILE_KINDS][KV_FILE_OPS];
static _Atomic uint64_t read_bytes, write_bytes, opens, closes;
static _Atomic int64_t open_now;

/* Armed faults: fault_at[kind][op] is the call number (in that kind's
 * count) that fails with fault_kind[kind][op]. */
static _Atomic uint64_t fault_at[KV_FILE_KINDS][KV_FILE_OPS];
static _Atomic int fault_kind[KV_FILE_KINDS][KV_FILE_OPS];

void kv_file_inject_kind(kv_file_kind kind, kv_file_op op, uint64_t nth, kv_file_fault fault)
{
    if ((unsigned)op >= KV_FILE_OPS || (unsigned)kind >= KV_FILE_KINDS)
        return;
    atomic_store(&fault_kind[kind][op], KV_FAULT_NONE);
    if (fault == KV_FAULT_NONE || nth == 0)
        return;
    atomic_store(&fault_at[kind][op], atomic_load(&op_calls[kind][op]) + nth);
    atomic_store(&fault_kind[kind][op], fault);
}

void kv_file_inject(kv_file_op op, uint64_t nth, kv_file_fault fault)
{
    kv_file_inject_kind(KV_FILE_KIND_ANY, op, nth, fault);
}

uint64_t kv_file_calls(kv_file_kind kind, kv_file_op op)
{
    if ((unsigned)op >= KV_FILE_OPS || (unsigned)kind >= KV_FILE_KINDS)
        return 0;
    return atomic_load(&op_calls[kind][op]);
}

/* Counts call number n of (kind, op); the armed fault if this is its call. */
static kv_file_fault take_fault(kv_file_kind kind, kv_file_op op, uint64_t n)
{
    int fault = atomic_load(&fault_kind[kind][op]);
    if (fault != KV_FAULT_NONE && n == atomic_load(&fault_at[kind][op])) {
        int expected = fault;
        if (atomic_compare_exchange_strong(&fault_kind[kind][op], &expected, KV_FAULT_NONE))
            return (kv_file_fault)fault;
    }
    return KV_FAULT_NONE;
}

/* Counts a call of op on a file of `kind`; returns the fault to apply to
 * it, if any (one aimed at its kind first, then one aimed at any file). */
static kv_file_fault count_call(kv_file_kind kind, kv_file_op op)
{
    uint64_t any = atomic_fetch_add(&op_calls[KV_FILE_KIND_ANY][op], 1) + 1;
    uint64_t own = atomic_fetch_add(&op_calls[kind][op], 1) + 1;
    kv_file_fault f = take_fault(kind, op, own);
    return f != KV_FAULT_NONE ? f : take_fault(KV_FILE_KIND_ANY, op, any);
}

static int ends_with(const char *s, const char *end)
{
    size_t n = strlen(s), m = strlen(end);
    return n >= m && memcmp(s + n - m, end, m) == 0;
}

static kv_file_kind kind_of(const char *path)
{
    if (ends_with(path, ".log"))
        return KV_FILE_KIND_WAL;
    if (ends_with(path, ".sst") || ends_with(path, ".sst.tmp"))
        return KV_FILE_KIND_TABLE;
    return KV_FILE_KIND_OTHER;
}

void kv_file_counters(kv_file_stats *out)
{
    if (!out)
        return;
    for (int i = 0; i < KV_FILE_OPS; i++)
        out->calls[i] = atomic_load(&op_calls[KV_FILE_KIND_ANY][i]);
    out->read_bytes = atomic_load(&read_bytes);
    out->write_bytes = atomic_load(&write_bytes);
    out->opens = atomic_load(&opens);
    out->closes = atomic_load(&closes);
}

int64_t kv_file_open_count(void)
{
    return atomic_load(&open_now);
}

static int errno_status(int e)
{
    switch (e) {
    case ENOENT:
        return KV_NOTFOUND;
    case ENOSPC:
    case EDQUOT:
        return KV_ENOSPC;
    case ENOMEM:
        return KV_ENOMEM;
    case EEXIST:
    case ENAMETOOLONG:
        return KV_EINVAL;
    default:
        return KV_EIO;
    }
}

static int open_fd(const char *path, int flags, kv_file **out)
{
    if (!out)
        return KV_EINVAL;
    *out = NULL;
    if (!path)
        return KV_EINVAL;
    kv_file *f = malloc(sizeof *f);
    if (!f)
        return KV_ENOMEM;
    f->fd = open(path, flags | O_CLOEXEC, 0644);
    if (f->fd < 0) {
        int rc = errno_status(errno);
        free(f);
        return rc;
    }
    f->end = 0;
    f->kind = kind_of(path);
    atomic_fetch_add(&opens, 1);
    atomic_fetch_add(&open_now, 1);
    *out = f;
    return KV_OK;
}

int kv_file_open(const char *path, kv_file **out)
{
    return open_fd(path, O_RDONLY, out);
}

int kv_file_create(const char *path, kv_file **out)
{
    return open_fd(path, O_WRONLY | O_CREAT | O_EXCL, out);
}

int kv_file_pread(kv_file *f, uint64_t off, void *buf, size_t len)
{
    if (!f || (len && !buf) || off > (uint64_t)INT64_MAX - len)
        return KV_EINVAL;
    kv_file_fault fault = count_call(f->kind, KV_FILE_READ);
    if (fault == KV_FAULT_EIO || fault == KV_FAULT_ENOSPC)
        return KV_EIO;
    uint8_t *p = buf;
    size_t want = fault == KV_FAULT_SHORT ? len / 2 : len;
    size_t got = 0;
    while (got < want) {
        ssize_t r = pread(f->fd, p + got, want - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return KV_EIO;
        if (r == 0)
            break;
        got += (size_t)r;
    }
    atomic_fetch_add(&read_bytes, got);
    return got == len ? KV_OK : KV_ECORRUPT; /* the file ends before len bytes */
}

int kv_file_append(kv_file *f, const void *buf, size_t len)
{
    if (!f || (len && !buf))
        return KV_EINVAL;
    kv_file_fault fault = count_call(f->kind, KV_FILE_WRITE);
    if (fault == KV_FAULT_EIO)
        return KV_EIO;
    if (fault == KV_FAULT_ENOSPC)
        return KV_ENOSPC;
    const uint8_t *p = buf;
    size_t want = fault == KV_FAULT_SHORT ? len / 2 : len;
    size_t done = 0;
    while (done < want) {
        ssize_t w = pwrite(f->fd, p + done, want - done, (off_t)(f->end + done));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return errno_status(w < 0 ? errno : EIO);
        done += (size_t)w;
    }
    atomic_fetch_add(&write_bytes, done);
    f->end += done;
    return done == len ? KV_OK : KV_EIO;
}

int kv_file_sync(kv_file *f)
{
    if (!f)
        return KV_EINVAL;
    kv_file_fault fault = count_call(f->kind, KV_FILE_SYNC);
    if (fault != KV_FAULT_NONE)
        return fault == KV_FAULT_ENOSPC ? KV_ENOSPC : KV_EIO;
    return fsync(f->fd) == 0 ? KV_OK : errno_status(errno);
}

int kv_file_datasync(kv_file *f)
{
    if (!f)
        return KV_EINVAL;
    kv_file_fault fault = count_call(f->kind, KV_FILE_SYNC);
    if (fault != KV_FAULT_NONE)
        return fault == KV_FAULT_ENOSPC ? KV_ENOSPC : KV_EIO;
    return fdatasync(f->fd) == 0 ? KV_OK : errno_status(errno);
}

int kv_file_size(kv_file *f, uint64_t *size)
{
    struct stat st;
    if (!f || !size)
        return KV_EINVAL;
    if (fstat(f->fd, &st) != 0)
        return KV_EIO;
    *size = (uint64_t)st.st_size;
    return KV_OK;
}

int kv_file_close(kv_file *f)
{
    if (!f)
        return KV_OK;
    int rc = close(f->fd) == 0 ? KV_OK : KV_EIO;
    atomic_fetch_add(&closes, 1);
    atomic_fetch_sub(&open_now, 1);
    free(f);
    return rc;
}

int kv_file_sync_dir_of(const char *path)
{
    if (!path)
        return KV_EINVAL;
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!slash) {
        strcpy(dir, ".");
    } else {
        size_t n = (size_t)(slash - path);
        if (n >= sizeof dir)
            return KV_EINVAL;
        memcpy(dir, path, n);
        dir[n ? n : 1] = '\0';
        if (!n)
            dir[0] = '/';
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return errno_status(errno);
    kv_file_fault fault = count_call(KV_FILE_KIND_DIR, KV_FILE_SYNC);
    int rc = fault != KV_FAULT_NONE ? KV_EIO : fsync(fd) == 0 ? KV_OK : errno_status(errno);
    close(fd);
    return rc;
}

int kv_file_rename(const char *from, const char *to)
{
    if (!from || !to)
        return KV_EINVAL;
    if (rename(from, to) != 0)
        return errno_status(errno);
    return kv_file_sync_dir_of(to);
}
