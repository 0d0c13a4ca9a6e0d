/* file.c - file I/O on POSIX descriptors, every failing system call made
 * through the installed kv_file_io table (file.h, "the I/O seam"). Every
 * error a call returns has its text (kv_error_text): the file's path, what
 * was done, and the system's reason. */
#define _GNU_SOURCE /* sync_file_range */
#include "file.h"
#include "error.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/vfs.h> /* fstatfs: a file system that keeps its files in memory */
#endif

struct kv_file {
    char *path;            /* for error texts */
    int fd;
    uintptr_t tag;         /* what io->open stored for this descriptor */
    const kv_file_io *io;  /* the table it was opened with */
    uint64_t end;          /* append position */
    const uint8_t *map;    /* kv_file_map: the file's first map_len bytes, or NULL */
    uint64_t map_len;
    int direct;            /* opened with O_DIRECT: reads aligned (KV_FILE_DIRECT_ALIGN) */
};

static _Atomic int64_t open_now;

/* ---- the operating system's table ------------------------------------------ */

static int os_open(const char *path, int flags, mode_t mode, uintptr_t *tag)
{
    (void)tag;
    return open(path, flags, mode);
}

static ssize_t os_pread(int fd, uintptr_t tag, void *buf, size_t len, uint64_t off)
{
    (void)tag;
    uint8_t *p = buf;
    size_t got = 0;
    while (got < len) {
        ssize_t r = pread(fd, p + got, len - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break; /* the file ends here */
        got += (size_t)r;
    }
    return (ssize_t)got;
}

static ssize_t os_pwrite(int fd, uintptr_t tag, const void *buf, size_t len, uint64_t off)
{
    (void)tag;
    const uint8_t *p = buf;
    size_t done = 0;
    while (done < len) {
        ssize_t w = pwrite(fd, p + done, len - done, (off_t)(off + done));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = EIO; /* the device takes no more and says nothing */
            return -1;
        }
        done += (size_t)w;
    }
    return (ssize_t)done;
}

static int os_fsync(int fd, uintptr_t tag)
{
    (void)tag;
    return fsync(fd);
}

static int os_fdatasync(int fd, uintptr_t tag)
{
    (void)tag;
    return fdatasync(fd);
}

static int os_start_writeback(int fd, uintptr_t tag, uint64_t off, uint64_t len)
{
    (void)tag;
#if defined(__linux__) && defined(SYNC_FILE_RANGE_WRITE)
    if (sync_file_range(fd, (off_t)off, (off_t)len, SYNC_FILE_RANGE_WRITE) == 0)
        return 0;
    /* A file system without it (ENOSYS, EINVAL, ESPIPE) has nothing to
     * start; anything else is a failure the data met. */
    return errno == ENOSYS || errno == EINVAL || errno == ESPIPE || errno == EOPNOTSUPP ? 0 : -1;
#else
    (void)fd;
    (void)off;
    (void)len;
    return 0;
#endif
}

static int os_close(int fd, uintptr_t tag)
{
    (void)tag;
    return close(fd);
}

static int os_ftruncate(int fd, uintptr_t tag, uint64_t size)
{
    (void)tag;
    return ftruncate(fd, (off_t)size);
}

static int os_sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

const kv_file_io kv_file_io_os = {
    .open = os_open,
    .pread = os_pread,
    .pwrite = os_pwrite,
    .fsync = os_fsync,
    .fdatasync = os_fdatasync,
    .close = os_close,
    .rename = rename,
    .sync_dir = os_sync_dir,
    .view = NULL,
    .start_writeback = os_start_writeback,
    .unlink = unlink,
    .link = link,
    .ftruncate = os_ftruncate,
    .mkdir = mkdir,
};

/* The installed table: the layer's one global (file.h). */
static const kv_file_io *_Atomic cur_io = &kv_file_io_os;

void kv_file_set_io(const kv_file_io *io)
{
    atomic_store_explicit(&cur_io, io ? io : &kv_file_io_os, memory_order_release);
}

static const kv_file_io *io_now(void)
{
    return atomic_load_explicit(&cur_io, memory_order_acquire);
}

int64_t kv_file_open_count(void)
{
    return atomic_load(&open_now);
}

/* What a file of type `mode` is, for messages: "a FIFO", "a directory", ... */
static const char *type_name(mode_t mode)
{
    return S_ISFIFO(mode)   ? "a FIFO"
           : S_ISDIR(mode)  ? "a directory"
           : S_ISCHR(mode)  ? "a character device"
           : S_ISBLK(mode)  ? "a block device"
           : S_ISSOCK(mode) ? "a socket"
                            : "of an unknown type";
}

/* KV_OK for a regular file, else KV_ECORRUPT saying what `path` is. */
static int regular(const char *path, mode_t mode)
{
    if (S_ISLNK(mode))
        return kv_error_set(KV_ECORRUPT, "%s: a symbolic link, which is not followed here: this "
                            "file must be a regular file in the database directory", path);
    if (!S_ISREG(mode))
        return kv_error_set(KV_ECORRUPT, "%s: not a regular file (%s)", path, type_name(mode));
    return KV_OK;
}

int kv_file_check_fd(int fd, const char *path)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return kv_error_errno(errno, "%s: fstat", path);
    return regular(path, st.st_mode);
}

int kv_file_check(const char *path, int follow, uint64_t *size)
{
    if (size)
        *size = 0;
    if (!path)
        return KV_EINVAL;
    struct stat st;
    if ((follow ? stat(path, &st) : lstat(path, &st)) != 0) {
        int e = errno;
        return e == ENOENT ? KV_NOTFOUND : kv_error_errno(e, "%s: stat", path);
    }
    int rc = regular(path, st.st_mode);
    if (rc == KV_OK && size)
        *size = (uint64_t)st.st_size;
    return rc;
}

/* Opens path with flags; with `direct`, asks for O_DIRECT first and, when
 * the file system refuses it (EINVAL), opens without it and sets *refused. */
static int open_fd(const char *path, int flags, int direct, int *refused, kv_file **out)
{
    if (!out)
        return KV_EINVAL;
    *out = NULL;
    if (!path)
        return KV_EINVAL;
    kv_file *f = calloc(1, sizeof *f); /* no mapping yet, tag 0 */
    if (!f || !(f->path = strdup(path))) {
        free(f);
        return kv_error_set(KV_ENOMEM, "%s: out of memory opening it", path);
    }
    f->io = io_now();
    f->fd = -1;
#ifdef O_DIRECT
    if (direct) {
        f->fd = f->io->open(path, flags | O_DIRECT | O_CLOEXEC, 0644, &f->tag);
        f->direct = f->fd >= 0;
        if (f->fd < 0 && errno != EINVAL) { /* EINVAL: O_DIRECT refused; else a real failure */
            int rc = kv_error_errno(errno, "%s: open", path);
            free(f->path);
            free(f);
            return rc;
        }
    }
#endif
    if (direct && !f->direct && refused)
        *refused = 1;
    if (f->fd < 0)
        f->fd = f->io->open(path, flags | O_CLOEXEC, 0644, &f->tag);
    if (f->fd < 0) {
        /* ELOOP on a read: a name that is a link looping is damage in the
         * directory, as a FIFO there is (kv_file_check_fd), not a device. */
        int rc = errno == ELOOP && !(flags & O_CREAT)
                     ? kv_error_set(KV_ECORRUPT, "%s: open: a symbolic link that loops", path)
                     : kv_error_errno(errno, "%s: %s", path, flags & O_CREAT ? "create" : "open");
        free(f->path);
        free(f);
        return rc;
    }
    f->end = 0;
    atomic_fetch_add(&open_now, 1);
    *out = f;
    return KV_OK;
}

/* 1 when the file system holding fd keeps its files in memory (tmpfs,
 * ramfs): O_DIRECT reaches no device there. */
static int in_memory_fs(int fd)
{
#ifdef __linux__
    struct statfs sf;
    /* TMPFS_MAGIC and RAMFS_MAGIC of <linux/magic.h>, which not every libc
     * ships. */
    return fstatfs(fd, &sf) == 0 &&
           ((unsigned long)sf.f_type == 0x01021994ul || (unsigned long)sf.f_type == 0x858458f6ul);
#else
    (void)fd;
    return 0;
#endif
}

static int open_read(const char *path, int direct, int *refused, kv_file **out)
{
    if (refused)
        *refused = 0;
    /* O_NONBLOCK: opening a FIFO for reading would wait for a writer. */
    int rc = open_fd(path, O_RDONLY | O_NONBLOCK, direct, refused, out);
    if (rc != KV_OK)
        return rc;
    kv_file *f = *out;
    int clear = O_NONBLOCK;
    rc = kv_file_check_fd(f->fd, path);
#ifdef O_DIRECT
    if (rc == KV_OK && f->direct && in_memory_fs(f->fd)) {
        clear |= O_DIRECT; /* no device to reach: read as any other file */
        f->direct = 0;
        if (refused)
            *refused = 1;
    }
#endif
    int fl;
    if (rc == KV_OK &&
        ((fl = fcntl(f->fd, F_GETFL)) < 0 || fcntl(f->fd, F_SETFL, fl & ~clear) != 0))
        rc = kv_error_errno(errno, "%s: fcntl (clearing O_NONBLOCK)", path);
    if (rc != KV_OK) {
        kv_file_close(f);
        *out = NULL;
    }
    return rc;
}

int kv_file_open(const char *path, kv_file **out)
{
    return open_read(path, 0, NULL, out);
}

int kv_file_open_direct(const char *path, int *refused, kv_file **out)
{
    return open_read(path, 1, refused, out);
}

int kv_file_direct(const kv_file *f)
{
    return f ? f->direct : 0;
}

int kv_file_create(const char *path, kv_file **out)
{
    return open_fd(path, O_WRONLY | O_CREAT | O_EXCL, 0, NULL, out);
}

/* The checks and error texts of a read of len bytes at off that got `got`
 * of them (-1: failed, errno set): KV_OK when got >= len. */
static int read_result(kv_file *f, uint64_t off, size_t len, ssize_t got)
{
    if (got < 0) {
        kv_error_errno(errno, "%s: read of %zu bytes at offset %llu", f->path, len,
                       (unsigned long long)off);
        return KV_EIO; /* whatever errno said: the read failed */
    }
    if ((size_t)got < len) /* the file ends before len bytes */
        return kv_error_set(KV_ECORRUPT, "%s: ends before offset %llu (read %zd of %zu bytes at %llu)",
                            f->path, (unsigned long long)(off + len), got, len,
                            (unsigned long long)off);
    return KV_OK;
}

int kv_file_read_alloc(kv_file *f, uint64_t off, size_t len, uint8_t **out,
                       uint64_t *device_bytes)
{
    if (device_bytes)
        *device_bytes = 0;
    if (!f || !out || off > (uint64_t)INT64_MAX - len)
        return KV_EINVAL;
    *out = NULL;
    if (!f->direct) {
        uint8_t *buf = malloc(len ? len : 1);
        if (!buf)
            return kv_error_set(KV_ENOMEM, "%s: out of memory reading %zu bytes", f->path, len);
        int rc = read_result(f, off, len, f->io->pread(f->fd, f->tag, buf, len, off));
        if (rc != KV_OK) {
            free(buf);
            return rc;
        }
        *out = buf;
        return KV_OK;
    }
    /* O_DIRECT: the aligned range [a0, a1) around [off, off + len), read
     * into aligned memory. Where a1 passes the file's end the read returns
     * the bytes up to it (a read at the end returns 0, aligned or not). */
    const uint64_t A = KV_FILE_DIRECT_ALIGN;
    uint64_t a0 = off / A * A, a1 = (off + len + A - 1) / A * A;
    if (a1 - a0 > (uint64_t)SSIZE_MAX)
        return KV_EINVAL;
    size_t n = (size_t)(a1 - a0), skip = (size_t)(off - a0);
    void *p = NULL;
    if (posix_memalign(&p, A, n ? n : A) != 0)
        return kv_error_set(KV_ENOMEM, "%s: out of memory reading %zu bytes", f->path, n);
    ssize_t got = f->io->pread(f->fd, f->tag, p, n, a0);
    /* What of [off, off + len) the read brought. */
    ssize_t have = got < 0 ? got : (size_t)got <= skip ? 0 : (ssize_t)((size_t)got - skip);
    int rc = read_result(f, off, len, have);
    if (rc != KV_OK) {
        free(p);
        return rc;
    }
    /* The caller keeps the bytes at the buffer's start, and may free() it:
     * posix_memalign memory is freed like any other. */
    memmove(p, (uint8_t *)p + skip, len);
    /* A block cache charges a block its length: give back the units past
     * it (glibc splits the chunk in place; an allocator that copies costs
     * a copy of the block, nothing beside the read). */
    if (n - len >= 1024) {
        void *q = realloc(p, len ? len : 1);
        if (q)
            p = q;
    }
    *out = p;
    if (device_bytes)
        *device_bytes = n;
    return KV_OK;
}

int kv_file_pread(kv_file *f, uint64_t off, void *buf, size_t len)
{
    if (!f || (len && !buf) || off > (uint64_t)INT64_MAX - len)
        return KV_EINVAL;
    if (f->direct) { /* through an aligned buffer: buf, off and len may be anything */
        uint8_t *tmp;
        int rc = kv_file_read_alloc(f, off, len, &tmp, NULL);
        if (rc == KV_OK) {
            memcpy(buf, tmp, len);
            free(tmp);
        }
        return rc;
    }
    return read_result(f, off, len, f->io->pread(f->fd, f->tag, buf, len, off));
}

int kv_file_map(kv_file *f, uint64_t len, const uint8_t **out)
{
    if (!f || !out || f->map || len == 0 || len > (uint64_t)SIZE_MAX / 2)
        return KV_EINVAL;
    *out = NULL;
    if (sizeof(void *) < 8)
        return KV_EINVAL; /* 32-bit address space: keep to pread */
    void *p = mmap(NULL, (size_t)len, PROT_READ, MAP_SHARED, f->fd, 0);
    if (p == MAP_FAILED)
        return errno == ENOMEM ? KV_ENOMEM : KV_EIO;
    /* A fault in a mapping reads ahead by the device's read-ahead (8 MiB on
     * a virtio disk seen here) unless told the access is random: a Get on
     * a table the page cache lacks then read 4.5 MB for one 4 KiB block.
     * Scans ask for their read-ahead themselves (kv_file_willneed). */
    (void)madvise(p, (size_t)len, MADV_RANDOM);
    f->map = p;
    f->map_len = len;
    *out = p;
    return KV_OK;
}

void kv_file_willneed(kv_file *f, uint64_t off, uint64_t len)
{
    if (!f || !f->map || off >= f->map_len)
        return;
    if (len > f->map_len - off)
        len = f->map_len - off;
    uint64_t page = 4096, a = off / page * page; /* madvise wants a page-aligned start */
    (void)madvise((void *)(f->map + a), (size_t)(off + len - a), MADV_WILLNEED);
}

void kv_file_prefault(kv_file *f)
{
#ifdef MADV_POPULATE_READ
    if (f && f->map)
        (void)madvise((void *)f->map, (size_t)f->map_len, MADV_POPULATE_READ);
#else
    (void)f;
#endif
}

int kv_file_view(kv_file *f, uint64_t off, size_t len, const uint8_t **out)
{
    if (!f || !out || !f->map)
        return KV_EINVAL;
    *out = NULL;
    size_t have = off > f->map_len ? 0 : len > f->map_len - off ? (size_t)(f->map_len - off) : len;
    if (f->io->view) {
        ssize_t r = f->io->view(f->fd, f->tag, off, len, have);
        if (r < 0) {
            kv_error_errno(errno, "%s: read of %zu bytes at offset %llu", f->path, len,
                           (unsigned long long)off);
            return KV_EIO;
        }
        if ((size_t)r < have)
            have = (size_t)r;
    }
    if (have < len) /* the file ends before len bytes */
        return kv_error_set(KV_ECORRUPT, "%s: ends before offset %llu (%zu of %zu bytes at %llu)",
                            f->path, (unsigned long long)off + len, have, len,
                            (unsigned long long)off);
    *out = f->map + off;
    return KV_OK;
}

int kv_file_append(kv_file *f, const void *buf, size_t len)
{
    if (!f || (len && !buf))
        return KV_EINVAL;
    ssize_t done = f->io->pwrite(f->fd, f->tag, buf, len, f->end);
    if (done < 0)
        return kv_error_errno(errno, "%s: write of %zu bytes at offset %llu", f->path, len,
                              (unsigned long long)f->end);
    f->end += (uint64_t)done;
    if ((size_t)done < len)
        return kv_error_set(KV_EIO, "%s: write of %zu bytes at offset %llu stored only %zd",
                            f->path, len, (unsigned long long)(f->end - (uint64_t)done), done);
    return KV_OK;
}

/* A failed sync, whatever its errno (EIO, ENOSPC, EDQUOT ...): KV_EIO.
 * The kernel may have dropped the pages it failed to write, so the data is
 * lost and the file cannot be trusted; a full disk met here is no full
 * disk that room would cure (file.h). */
static int sync_failed(int e, const char *path, const char *call)
{
    return kv_error_set(KV_EIO, "%s: %s: %s", path, call, strerror(e));
}

int kv_file_start_writeback(kv_file *f, uint64_t off, uint64_t len)
{
    if (!f || f->fd < 0 || !len || !f->io->start_writeback)
        return KV_OK;
    if (f->io->start_writeback(f->fd, f->tag, off, len) != 0)
        return sync_failed(errno, f->path, "sync_file_range");
    return KV_OK;
}

int kv_file_sync(kv_file *f)
{
    if (!f)
        return KV_EINVAL;
    if (f->io->fsync(f->fd, f->tag) != 0)
        return sync_failed(errno, f->path, "fsync");
    return KV_OK;
}

int kv_file_datasync(kv_file *f)
{
    if (!f)
        return KV_EINVAL;
    if (f->io->fdatasync(f->fd, f->tag) != 0)
        return sync_failed(errno, f->path, "fdatasync");
    return KV_OK;
}

int kv_file_size(kv_file *f, uint64_t *size)
{
    struct stat st;
    if (!f || !size)
        return KV_EINVAL;
    if (fstat(f->fd, &st) != 0) {
        kv_error_errno(errno, "%s: fstat", f->path);
        return KV_EIO;
    }
    *size = (uint64_t)st.st_size;
    return KV_OK;
}

int kv_file_copy(kv_file *src, uint64_t len, const char *to)
{
    enum { CHUNK = 1 << 20 };
    uint8_t *buf = malloc(CHUNK);
    if (!buf)
        return kv_error_set(KV_ENOMEM, "%s: copy: out of memory", to);
    kv_file *dst;
    int rc = kv_file_create(to, &dst);
    if (rc != KV_OK) {
        free(buf);
        return rc;
    }
    for (uint64_t off = 0; rc == KV_OK && off < len;) {
        size_t n = len - off < CHUNK ? (size_t)(len - off) : CHUNK;
        if ((rc = kv_file_pread(src, off, buf, n)) == KV_OK)
            rc = kv_file_append(dst, buf, n);
        off += n;
    }
    if (rc == KV_OK)
        rc = kv_file_sync(dst);
    int crc = kv_file_close(dst);
    rc = rc == KV_OK ? crc : rc;
    free(buf);
    if (rc != KV_OK)
        kv_file_unlink(to);
    return rc;
}

int kv_file_close(kv_file *f)
{
    if (!f)
        return KV_OK;
    if (f->map)
        (void)munmap((void *)(uintptr_t)f->map, (size_t)f->map_len); /* cannot fail here */
    int rc = KV_OK;
    if (f->io->close(f->fd, f->tag) != 0) {
        kv_error_errno(errno, "%s: close", f->path);
        rc = KV_EIO;
    }
    atomic_fetch_sub(&open_now, 1);
    free(f->path);
    free(f);
    return rc;
}

/* Syncs directory dir; `after`, when not NULL, is the file whose creation
 * or rename the sync makes durable (for the error's text). */
static int sync_dir(const char *dir, const char *after)
{
    if (io_now()->sync_dir(dir) == 0)
        return KV_OK;
    if (after)
        return kv_error_set(KV_EIO,
                            "%s: fsync of the directory (after creating or renaming %s): %s", dir,
                            after, strerror(errno));
    return sync_failed(errno, dir, "fsync of the directory");
}

int kv_file_sync_dir(const char *dir)
{
    return dir ? sync_dir(dir, NULL) : KV_EINVAL;
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
            return kv_error_set(KV_EINVAL, "%s: the directory's name is too long", path);
        memcpy(dir, path, n);
        dir[n ? n : 1] = '\0';
        if (!n)
            dir[0] = '/';
    }
    return sync_dir(dir, path);
}

int kv_file_rename_unsynced(const char *from, const char *to)
{
    if (!from || !to)
        return KV_EINVAL;
    if (io_now()->rename(from, to) != 0)
        return kv_error_errno(errno, "%s: rename to %s", from, to);
    return KV_OK;
}

int kv_file_rename(const char *from, const char *to)
{
    int rc = kv_file_rename_unsynced(from, to);
    return rc == KV_OK ? kv_file_sync_dir_of(to) : rc;
}

int kv_file_unlink(const char *path)
{
    if (!path)
        return KV_EINVAL;
    const kv_file_io *io = io_now();
    if ((io->unlink ? io->unlink(path) : unlink(path)) == 0)
        return KV_OK;
    return errno == ENOENT ? KV_NOTFOUND : kv_error_errno(errno, "%s: unlink", path);
}

int kv_file_link(const char *from, const char *to)
{
    if (!from || !to)
        return KV_EINVAL;
    const kv_file_io *io = io_now();
    if ((io->link ? io->link(from, to) : link(from, to)) == 0)
        return KV_OK;
    return kv_error_errno(errno, "%s: link to %s", from, to);
}

int kv_file_truncate(kv_file *f, uint64_t size)
{
    if (!f || size > (uint64_t)INT64_MAX)
        return KV_EINVAL;
    if ((f->io->ftruncate ? f->io->ftruncate(f->fd, f->tag, size)
                          : ftruncate(f->fd, (off_t)size)) != 0)
        return kv_error_errno(errno, "%s: ftruncate to %llu bytes", f->path,
                              (unsigned long long)size);
    if (f->end > size)
        f->end = size;
    return KV_OK;
}

int kv_file_mkdir(const char *path, mode_t mode)
{
    if (!path)
        return KV_EINVAL;
    const kv_file_io *io = io_now();
    if ((io->mkdir ? io->mkdir(path, mode) : mkdir(path, mode)) == 0)
        return KV_OK;
    return kv_error_errno(errno, "%s: mkdir", path);
}
