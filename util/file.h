/* file.h - the one door to the disk for tables and the WAL: open, pread,
 * a read-only map, append, fsync/fdatasync, close, rename, directory sync.
 *
 * Every system call that can fail on a real device goes through a table of
 * functions, kv_file_io (below): the library runs on the default table,
 * which calls the operating system; a test may install its own table to
 * count calls, fail them on purpose or record what a power cut would keep.
 * That table pointer is the layer's only global, beside the count of open
 * descriptors. The counting, fault injection and power-cut simulation
 * that the tests use live in tests/testing/ (the kv_testing library),
 * never in libkv.
 *
 * Part of util/, the bottom layer: used by sstable/ (tables) and kv/ (the
 * WAL); not installed, symbols hidden. */
#ifndef KV_FILE_H
#define KV_FILE_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <kv/status.h>

typedef struct kv_file kv_file;

/* Opens an existing regular file for reading, following a symbolic link.
 * Never blocks: the open is non-blocking (a FIFO would wait for a writer)
 * and the file is checked with fstat before use, then made blocking again.
 * KV_ECORRUPT when it is not a regular file (a FIFO, a device, a directory,
 * a socket), with error text naming it ("<path>: not a regular file (a
 * FIFO)"); KV_NOTFOUND, KV_EIO, KV_ENOMEM. */
int kv_file_open(const char *path, kv_file **out);

/* Reads of a file opened with kv_file_open_direct are made in units of
 * this many bytes: offset, length and buffer address all multiples of it.
 * O_DIRECT asks for the device's logical block size (512 bytes on most
 * disks, 4096 on some); 4096 suits both. */
#define KV_FILE_DIRECT_ALIGN 4096u

/* kv_file_open, for reads that bypass the page cache (O_DIRECT): every
 * read of the handle goes to the device. Reads of any offset and length
 * still work (kv_file_pread goes through an aligned buffer of its own;
 * kv_file_read_alloc reads the aligned range around the bytes). When the
 * file system refuses O_DIRECT (the open fails with EINVAL), or holds its
 * files in memory (tmpfs, ramfs: Linux 6.6 and later accept O_DIRECT on
 * tmpfs, but its reads still come from the page cache, where the file
 * lives), the file is opened as kv_file_open would, and *refused (may be
 * NULL) is set to 1; else to 0. Where the system has no O_DIRECT, every
 * open is refused. Errors as kv_file_open. */
int kv_file_open_direct(const char *path, int *refused, kv_file **out);

/* 1 when f's reads bypass the page cache (kv_file_open_direct, not
 * refused), else 0. Cannot fail (NULL: 0). */
int kv_file_direct(const kv_file *f);

/* Reads exactly len bytes at off into a new buffer, *out, freed with
 * free(). For a direct file (kv_file_direct) the aligned range that covers
 * the bytes is read into aligned memory, with one read, and the bytes are
 * moved to the buffer's start; *device_bytes (may be NULL) gets the length
 * of that read, the bytes asked of the device. For any other file it is
 * one pread into malloc'd memory, and *device_bytes gets 0 (the page cache
 * may serve it). Errors as kv_file_pread, and KV_ENOMEM. */
int kv_file_read_alloc(kv_file *f, uint64_t off, size_t len, uint8_t **out,
                       uint64_t *device_bytes);

/* Checks what `path` names without opening it (stat, or lstat when
 * `follow` is 0): KV_OK for a regular file, with its size in *size (size
 * may be NULL); KV_NOTFOUND when nothing has that name; KV_ECORRUPT, with
 * error text naming it, for anything else: a FIFO, device, directory or
 * socket, and with `follow` 0 a symbolic link (whatever it points to);
 * when stat fails otherwise, its errno as kv_errno_status maps it, with
 * text. For files opened by name by code outside this layer (LMDB) or
 * created in place (the LOCK), where a link would be followed out of the
 * directory. A check, not a guard: a file swapped in between the check and
 * the open is not caught (whoever may write the directory can replace any
 * file in it). */
int kv_file_check(const char *path, int follow, uint64_t *size);

/* KV_OK when descriptor `fd` is a regular file; else KV_ECORRUPT (or
 * KV_EIO when fstat fails), with error text naming `path` and what it is.
 * For descriptors opened outside this layer (the LOCK), with O_NONBLOCK. */
int kv_file_check_fd(int fd, const char *path);

/* Creates a new file for writing (it must not exist: KV_EINVAL). O_EXCL:
 * an existing name, a symbolic link included, is never followed or reused. */
int kv_file_create(const char *path, kv_file **out);

/* Reads exactly len bytes at off. KV_ECORRUPT when the
 * file ends first; KV_EIO. On a direct file (kv_file_open_direct) the read
 * goes through an aligned buffer of its own (KV_ENOMEM when there is no
 * memory for it); kv_file_read_alloc spares that copy. */
int kv_file_pread(kv_file *f, uint64_t off, void *buf, size_t len);

/* Maps the file's first len bytes read-only (for tables, which never
 * change once written) and returns their address; kv_file_close unmaps.
 * The mapping is advised random access (no read-ahead on a fault):
 * sequential readers ask for theirs with kv_file_willneed.
 * Not meant for a direct file, whose reads would then come from the page
 * cache after all.
 * KV_EINVAL: mapped already, len 0, or a 32-bit process; KV_ENOMEM, KV_EIO
 * (the caller may go on with kv_file_pread). Bytes past the file's end
 * must never be touched: a mapping cannot report a short file except by
 * SIGBUS, so the length must be the file's size, and nobody may truncate
 * the file while it is mapped. */
int kv_file_map(kv_file *f, uint64_t len, const uint8_t **out);
/* Maps every page of the file's mapping into the process now
 * (MADV_POPULATE_READ, Linux 5.14 and later; elsewhere, or when the kernel
 * refuses, nothing: the pages are mapped on first touch, as before), so
 * that the reads that come later do not each stop for a page fault. Pages
 * the page cache lacks are read from the file. For a table just written,
 * whose pages the page cache still holds, this is cheap: ~0.5 ms for 8 MiB.
 * Not mapped: nothing. Cannot fail (it changes no byte). */
void kv_file_prefault(kv_file *f);
/* Tells the system that [off, off + len) of f's mapping will be read soon
 * (MADV_WILLNEED): pages the page cache lacks are read ahead of the faults
 * that would ask for them one at a time. For long scans of a mapped table.
 * Not mapped, or a range past the mapping: nothing (or what lies in it).
 * Cannot fail (advice only). */
void kv_file_willneed(kv_file *f, uint64_t off, uint64_t len);
/* A read from the mapping without a copy: *out = the mapped bytes
 * [off, off + len). Seen by the I/O table as a read (its `view`), like
 * kv_file_pread: KV_ECORRUPT when the range passes the mapped end (or the
 * table makes it end early), KV_EIO (the table failed it), KV_EINVAL when
 * not mapped. */
int kv_file_view(kv_file *f, uint64_t off, size_t len, const uint8_t **out);
/* Appends len bytes at the end of what this handle wrote. KV_EIO, KV_ENOSPC. */
int kv_file_append(kv_file *f, const void *buf, size_t len);

/* fsync (data and size). Any failure is KV_EIO (ENOSPC too: the kernel
 * reports a writeback that failed, whose pages it may have dropped; never
 * retry it and trust the answer), with text naming the file and the call.
 * The same for kv_file_datasync and the directory syncs below. */
int kv_file_sync(kv_file *f);
/* Asks the system to start writing [off, off + len) of f to the disk now,
 * without waiting (Linux: sync_file_range; elsewhere nothing). A hint, so
 * that a later kv_file_sync of a large file finds most of it written: it
 * promises nothing. But when it reports a failure (EIO: a writeback failed)
 * the kernel may have dropped those pages, and a later fsync could succeed
 * without them, so it is a failed sync: KV_EIO, with text naming the file
 * and sync_file_range. */
int kv_file_start_writeback(kv_file *f, uint64_t off, uint64_t len);

/* fdatasync: the data written, and the size if it changed (the WAL's sync). */
int kv_file_datasync(kv_file *f);

/* The file's size in bytes. */
int kv_file_size(kv_file *f, uint64_t *size);

/* Closes the handle; NULL is a no-op. KV_EIO. */
int kv_file_close(kv_file *f);

/* Whether link(2) failed with `err` because this file system (or this
 * file) takes no more links, not because anything is wrong: another file
 * system (EXDEV), one without hard links or with protected links (EPERM,
 * EOPNOTSUPP), a link count that is full (EMLINK). Such a file is copied
 * instead (kv_file_copy). */
static inline int kv_file_link_refused(int err)
{
    return err == EXDEV || err == EPERM || err == EMLINK || err == EOPNOTSUPP;
}

/* Copies the first len bytes of src into a new file `to` (which must not
 * exist: KV_EINVAL) and syncs it; the copy's directory entry is the
 * caller's to sync. On any error `to` is removed. KV_ECORRUPT (src ends
 * before len), KV_EIO, KV_ENOSPC, KV_ENOMEM, with text naming the file. */
int kv_file_copy(kv_file *src, uint64_t len, const char *to);

/* Renames `from` to `to` and syncs the directory of `to`. */
int kv_file_rename(const char *from, const char *to);

/* Renames `from` to `to` without syncing the directory: the new name may
 * not survive a crash until a later kv_file_sync_dir(_of), which the caller
 * owes before anything durable names the file (one sync can cover many
 * renames in one directory). */
int kv_file_rename_unsynced(const char *from, const char *to);

/* unlink(2), link(2) (no directory sync: the caller's), ftruncate(2) of a
 * file opened for writing, mkdir(2), made through the I/O table: KV_OK,
 * KV_NOTFOUND (unlink of a missing name), else the errno as
 * kv_errno_status maps it, with text naming the file. */
int kv_file_unlink(const char *path);
int kv_file_link(const char *from, const char *to);
int kv_file_truncate(kv_file *f, uint64_t size);
int kv_file_mkdir(const char *path, mode_t mode);

/* Syncs the directory that holds `path`. */
int kv_file_sync_dir_of(const char *path);

/* Syncs directory `dir` itself: one sync for every name created or
 * renamed in it so far (kv_file_rename_unsynced). */
int kv_file_sync_dir(const char *dir);

/* Open file descriptors of this module right now (for leak tests). */
int64_t kv_file_open_count(void);

/* ---- the I/O seam (tests only) ---------------------------------------------
 *
 * The system calls of this layer, as a table of functions. `fd` is the
 * descriptor the table's open returned; `tag` is what that open stored in
 * *tag (0 unless it stored something), handed back on every later call for
 * the same descriptor, so that a table can tell its files apart (by kind,
 * by a slot of its own) without a lookup. Errors are reported as the OS
 * reports them: -1 with errno set; the layer turns errno into a kv_status
 * (util/error.h) exactly as for a real failure.
 *
 * What a replacement may do: fail any call (-1 and an errno: EIO, ENOSPC,
 * ...), read or write fewer bytes than asked (a read that ends early reads
 * as a file that ends there, KV_ECORRUPT; a write that stores fewer bytes
 * fails the append with KV_EIO after the handle moved past what was
 * stored), and do anything else on the side (count, record), as long as it
 * calls through to the default table, or to the OS, for the real work.
 * It must be safe to call from any number of threads at once, and must
 * stay valid while any file opened through it is open: a handle keeps the
 * table it was opened with until it is closed. Calls not tied to a handle
 * (open, rename, sync_dir, unlink, link, mkdir) use the table installed at the
 * time.
 *
 * Not on the table: fstat and fcntl (kv_file_open's checks, kv_file_size),
 * stat (kv_file_check) and mmap/munmap (kv_file_map, kv_file_close), which
 * the layer makes itself; a replacement's open must return a real
 * descriptor (kv_file_open adds O_NONBLOCK to its flags). */
typedef struct kv_file_io {
    /* open(2) of `path` with `flags` (O_CLOEXEC included) and `mode`: the
     * new descriptor, or -1. O_CREAT in flags: kv_file_create. */
    int (*open)(const char *path, int flags, mode_t mode, uintptr_t *tag);
    /* Reads len bytes at off, all of them unless the file ends first
     * (retrying short reads and EINTR): the bytes read, or -1. */
    ssize_t (*pread)(int fd, uintptr_t tag, void *buf, size_t len, uint64_t off);
    /* Writes len bytes at off (retrying short writes and EINTR): len, fewer
     * to report a write that stored only part of them, or -1. */
    ssize_t (*pwrite)(int fd, uintptr_t tag, const void *buf, size_t len, uint64_t off);
    int (*fsync)(int fd, uintptr_t tag);
    int (*fdatasync)(int fd, uintptr_t tag);
    /* close(2); the descriptor is gone whatever it returns. */
    int (*close)(int fd, uintptr_t tag);
    /* rename(2). kv_file_rename then syncs the directory through sync_dir. */
    int (*rename)(const char *from, const char *to);
    /* Makes the names in directory `dir` durable (open it, fsync, close). */
    int (*sync_dir)(const char *dir);
    /* A read served from the mapping (kv_file_view) of `want` bytes at off,
     * of which the mapping holds `have` (fewer when the range passes its
     * end): the bytes the reader may use (have; fewer make the file end
     * early), or -1. NULL (the default): views are not seen. */
    ssize_t (*view)(int fd, uintptr_t tag, uint64_t off, size_t want, size_t have);
    /* Starts the writeback of [off, off + len) (Linux: sync_file_range with
     * SYNC_FILE_RANGE_WRITE): 0, or -1 with errno. NULL: nothing to do. */
    int (*start_writeback)(int fd, uintptr_t tag, uint64_t off, uint64_t len);
    /* unlink(2), link(2), ftruncate(2) of a descriptor this table opened,
     * mkdir(2): kv_file_unlink, kv_file_link, kv_file_truncate and
     * kv_file_mkdir. NULL: the layer calls the OS itself (tables written
     * before these entries existed). */
    int (*unlink)(const char *path);
    int (*link)(const char *from, const char *to);
    int (*ftruncate)(int fd, uintptr_t tag, uint64_t size);
    int (*mkdir)(const char *path, mode_t mode);
} kv_file_io;

/* The table that calls the operating system; replacements call through it. */
extern const kv_file_io kv_file_io_os;

/* Installs `io` for every file opened (and every rename and directory sync
 * made) from now on, in this process and in children forked later; NULL
 * restores kv_file_io_os. `io` must outlive every file opened through it
 * (a static table). For tests: install it before the files it should see
 * are opened. Thread-safe. Cannot fail. */
void kv_file_set_io(const kv_file_io *io);

#endif /* KV_FILE_H */
