/* faults.c - the kv_testing library's I/O table (util/file.h, "the I/O
 * seam"): every call of the file layer counted per (file kind, op), armed
 * faults fired, created files reported to the power-loss record
 * (powercut.c). The real work is the operating system's table's.
 *
 * A descriptor's tag (file.h) carries what this table learnt at its open:
 * bits 0-3 its kind, the bits above its power-loss entry + 1 (0: not
 * tracked). */
#define _POSIX_C_SOURCE 200809L
#include "testing.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

/* Calls per (file kind, op); [KV_FILE_KIND_ANY] counts every call. */
static _Atomic uint64_t op_calls[KV_FILE_KINDS][KV_FILE_OPS];
static _Atomic uint64_t read_bytes, write_bytes, opens, closes;

/* Armed faults: fault_at[kind][op] is the call number (in that kind's
 * count) that fails with fault_kind[kind][op]. */
static _Atomic uint64_t fault_at[KV_FILE_KINDS][KV_FILE_OPS];
static _Atomic int fault_kind[KV_FILE_KINDS][KV_FILE_OPS];
/* A full disk (kv_file_fault_persist): every call of (kind, op) fails with
 * this fault until it is set back to KV_FAULT_NONE. */
static _Atomic int persist_kind[KV_FILE_KINDS][KV_FILE_OPS];

void kv_file_fault_persist(kv_file_kind kind, kv_file_op op, kv_file_fault fault)
{
    kvt_install_io();
    if ((unsigned)op >= KV_FILE_OPS || (unsigned)kind >= KV_FILE_KINDS)
        return;
    atomic_store(&persist_kind[kind][op], fault);
}

void kv_file_inject_kind(kv_file_kind kind, kv_file_op op, uint64_t nth, kv_file_fault fault)
{
    kvt_install_io();
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
    int persist = atomic_load(&persist_kind[kind][op]);
    if (persist == KV_FAULT_NONE)
        persist = atomic_load(&persist_kind[KV_FILE_KIND_ANY][op]);
    if (persist != KV_FAULT_NONE)
        return (kv_file_fault)persist;
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
    if (ends_with(path, ".blob"))
        return KV_FILE_KIND_BLOB;
    return KV_FILE_KIND_OTHER;
}

/* The tag's halves (see the top). A descriptor opened before this table was
 * installed has tag 0: kind "other", not tracked. */
static kv_file_kind tag_kind(uintptr_t tag)
{
    kv_file_kind k = (kv_file_kind)(tag & 15);
    return k == KV_FILE_KIND_ANY || k >= KV_FILE_KINDS ? KV_FILE_KIND_OTHER : k;
}

static int tag_entry(uintptr_t tag)
{
    return (int)(tag >> 4) - 1;
}

/* Fails the call with the errno an injected fault stands for. */
static int fail(int e)
{
    errno = e;
    return -1;
}

/* The errno of a fault that fails a call outright (SHORT: EIO). */
static int fault_errno(kv_file_fault fault)
{
    switch (fault) {
    case KV_FAULT_ENOSPC: return ENOSPC;
    case KV_FAULT_EACCES: return EACCES;
    case KV_FAULT_EROFS: return EROFS;
    default: return EIO;
    }
}

/* ---- the table -------------------------------------------------------------- */

static int t_open(const char *path, int flags, mode_t mode, uintptr_t *tag)
{
    kv_file_fault fault = count_call(kind_of(path), KV_FILE_OPEN);
    if (fault != KV_FAULT_NONE)
        return fail(fault_errno(fault));
    int fd = kv_file_io_os.open(path, flags, mode, tag);
    if (fd < 0)
        return fd;
    atomic_fetch_add(&opens, 1);
    int entry = flags & O_CREAT ? kvt_track_create(path) : -1;
    *tag = (uintptr_t)(entry + 1) << 4 | (uintptr_t)kind_of(path);
    return fd;
}

static ssize_t t_pread(int fd, uintptr_t tag, void *buf, size_t len, uint64_t off)
{
    kv_file_fault fault = count_call(tag_kind(tag), KV_FILE_READ);
    if (fault == KV_FAULT_EACCES || fault == KV_FAULT_EROFS)
        return fail(fault_errno(fault));
    if (fault == KV_FAULT_EIO || fault == KV_FAULT_ENOSPC)
        return fail(EIO);
    ssize_t got = kv_file_io_os.pread(fd, tag, buf, fault == KV_FAULT_SHORT ? len / 2 : len, off);
    if (got > 0)
        atomic_fetch_add(&read_bytes, (uint64_t)got);
    return got;
}

static ssize_t t_view(int fd, uintptr_t tag, uint64_t off, size_t want, size_t have)
{
    (void)fd;
    (void)off;
    kv_file_fault fault = count_call(tag_kind(tag), KV_FILE_READ);
    if (fault == KV_FAULT_EIO || fault == KV_FAULT_ENOSPC)
        return fail(EIO);
    if (fault == KV_FAULT_SHORT)
        return (ssize_t)(have / 2); /* the file seems to end early */
    if (have == want)
        atomic_fetch_add_explicit(&read_bytes, want, memory_order_relaxed);
    return (ssize_t)have;
}

/* Writes piece by piece so that the power-loss record learns of each. */
static ssize_t t_pwrite(int fd, uintptr_t tag, const void *buf, size_t len, uint64_t off)
{
    kv_file_fault fault = count_call(tag_kind(tag), KV_FILE_WRITE);
    if (fault != KV_FAULT_NONE && fault != KV_FAULT_SHORT)
        return fail(fault_errno(fault));
    int entry = tag_entry(tag);
    const uint8_t *p = buf;
    size_t want = fault == KV_FAULT_SHORT ? len / 2 : len;
    size_t done = 0;
    kvt_track_issue(entry, off + want);
    while (done < want) {
        ssize_t w = pwrite(fd, p + done, want - done, (off_t)(off + done));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return fail(w < 0 ? errno : EIO);
        done += (size_t)w;
        kvt_track_done(entry, off + done);
    }
    atomic_fetch_add(&write_bytes, done);
    return (ssize_t)done; /* fewer than len after a SHORT fault */
}

/* fsync or fdatasync: counted, faulted, and what it covered recorded. */
static int sync_call(int fd, uintptr_t tag, int (*os_sync)(int, uintptr_t))
{
    kv_file_fault fault = count_call(tag_kind(tag), KV_FILE_SYNC);
    if (fault != KV_FAULT_NONE)
        return fail(fault_errno(fault));
    int entry = tag_entry(tag);
    uint64_t upto = kvt_track_sync_begin(entry);
    if (os_sync(fd, tag) != 0)
        return -1;
    kvt_track_sync_done(entry, upto);
    return 0;
}

static int t_fsync(int fd, uintptr_t tag)
{
    return sync_call(fd, tag, kv_file_io_os.fsync);
}

static int t_fdatasync(int fd, uintptr_t tag)
{
    return sync_call(fd, tag, kv_file_io_os.fdatasync);
}

/* sync_file_range: counted and faulted as a sync of the file's kind (a
 * fault fails it with EIO whatever its kind); it makes nothing durable. */
static int t_start_writeback(int fd, uintptr_t tag, uint64_t off, uint64_t len)
{
    if (count_call(tag_kind(tag), KV_FILE_SYNC) != KV_FAULT_NONE)
        return fail(EIO);
    return kv_file_io_os.start_writeback(fd, tag, off, len);
}

static int t_close(int fd, uintptr_t tag)
{
    atomic_fetch_add(&closes, 1);
    return kv_file_io_os.close(fd, tag);
}

static int t_rename(const char *from, const char *to)
{
    int locked = kvt_track_lock();
    int rc = kv_file_io_os.rename(from, to);
    int e = errno;
    if (rc == 0 && locked)
        kvt_track_renamed(from, to);
    kvt_track_unlock(locked);
    errno = e;
    return rc;
}

/* Opens the directory itself (a failure to open it is not a sync, and is
 * not counted), then syncs it with the record locked throughout. Any fault
 * reads as EIO. */
static int t_sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    kv_file_fault fault = count_call(KV_FILE_KIND_DIR, KV_FILE_SYNC);
    int locked = kvt_track_lock();
    int rc = fault != KV_FAULT_NONE ? fail(EIO) : fsync(fd);
    int e = errno;
    if (rc == 0 && locked)
        kvt_track_dir_synced(dir);
    kvt_track_unlock(locked);
    close(fd);
    errno = e;
    return rc;
}

static const kv_file_io testing_io = {
    .open = t_open,
    .pread = t_pread,
    .pwrite = t_pwrite,
    .fsync = t_fsync,
    .fdatasync = t_fdatasync,
    .close = t_close,
    .rename = t_rename,
    .sync_dir = t_sync_dir,
    .view = t_view,
    .start_writeback = t_start_writeback,
};

void kvt_install_io(void)
{
    kv_file_set_io(&testing_io);
}

/* Before main: counts are "since start", and every file the program opens
 * is seen. GCC and clang both run constructors of linked objects. */
__attribute__((constructor)) static void install_at_start(void)
{
    kvt_install_io();
}
