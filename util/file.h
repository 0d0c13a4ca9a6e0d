/* file.h - the one door to the disk for tables and the WAL: pread, append,
 * fsync, close, rename, each counted, and each able to fail on purpose.
 *
 * Tests arm a fault ("the 3rd read from now returns EIO") with
 * kv_file_inject; the counters (kv_file_counters) let benchmarks and tests
 * see exactly how many reads a workload made. Both are process-wide and
 * thread-safe.
 *
 * Internal to kv: not installed, symbols hidden. */
#ifndef KV_FILE_H
#define KV_FILE_H

#include <stddef.h>
#include <stdint.h>

#include <kv/status.h>

typedef struct kv_file kv_file;

/* Operations that can be counted and faulted. */
typedef enum { KV_FILE_READ = 0, KV_FILE_WRITE = 1, KV_FILE_SYNC = 2, KV_FILE_OPS = 3 } kv_file_op;

/* Faults: EIO and ENOSPC fail the call with that error; SHORT makes a read
 * return fewer bytes than asked (which the caller sees as a file that ends
 * early), or a write store only part of its bytes and then fail with EIO. */
typedef enum { KV_FAULT_NONE = 0, KV_FAULT_EIO, KV_FAULT_ENOSPC, KV_FAULT_SHORT } kv_file_fault;

/* What a file is, from its name: a write-ahead log ("*.log"), a table
 * ("*.sst", "*.sst.tmp"), anything else; and directory syncs. A fault can be
 * aimed at one kind (kv_file_inject_kind), e.g. "the 2nd sync of a log". */
typedef enum {
    KV_FILE_KIND_ANY = 0,
    KV_FILE_KIND_WAL = 1,
    KV_FILE_KIND_TABLE = 2,
    KV_FILE_KIND_DIR = 3,
    KV_FILE_KIND_OTHER = 4,
    KV_FILE_KINDS = 5
} kv_file_kind;

typedef struct {
    uint64_t calls[KV_FILE_OPS];
    uint64_t read_bytes, write_bytes;
    uint64_t opens, closes;
} kv_file_stats;

/* Opens an existing file for reading. KV_NOTFOUND, KV_EIO, KV_ENOMEM. */
int kv_file_open(const char *path, kv_file **out);

/* Creates a new file for writing (it must not exist: KV_EINVAL). */
int kv_file_create(const char *path, kv_file **out);

/* Reads exactly len bytes at off. KV_ECORRUPT when the
 * file ends first; KV_EIO. */
int kv_file_pread(kv_file *f, uint64_t off, void *buf, size_t len);

/* Maps the file's first len bytes read-only (for tables, which never
 * change once written) and returns their address; kv_file_close unmaps.
 * KV_EINVAL: mapped already, len 0, or a 32-bit process; KV_ENOMEM, KV_EIO
 * (the caller may go on with kv_file_pread). Bytes past the file's end
 * must never be touched: a mapping cannot report a short file except by
 * SIGBUS, so the length must be the file's size, and nobody may truncate
 * the file while it is mapped. */
int kv_file_map(kv_file *f, uint64_t len, const uint8_t **out);
/* A read from the mapping without a copy: *out = the mapped bytes
 * [off, off + len). Counted and faulted as a KV_FILE_READ, like
 * kv_file_pread: KV_ECORRUPT when the range passes the mapped end (or a
 * SHORT fault), KV_EIO (an injected fault), KV_EINVAL when not mapped. */
int kv_file_view(kv_file *f, uint64_t off, size_t len, const uint8_t **out);
/* Appends len bytes at the end of what this handle wrote. KV_EIO, KV_ENOSPC. */
int kv_file_append(kv_file *f, const void *buf, size_t len);

/* fsync (data and size). */
int kv_file_sync(kv_file *f);

/* fdatasync: the data written, and the size if it changed (the WAL's sync).
 * Counted and faulted as KV_FILE_SYNC. */
int kv_file_datasync(kv_file *f);

/* The file's size in bytes. */
int kv_file_size(kv_file *f, uint64_t *size);

/* Closes the handle; NULL is a no-op. KV_EIO. */
int kv_file_close(kv_file *f);

/* Renames `from` to `to` and syncs the directory of `to`. */
int kv_file_rename(const char *from, const char *to);

/* Syncs the directory that holds `path`. */
int kv_file_sync_dir_of(const char *path);

/* Arms a fault: the nth call (1 = the next one) of `op` from now fails with
 * `fault`. One fault per op; KV_FAULT_NONE disarms. Cannot fail. */
void kv_file_inject(kv_file_op op, uint64_t nth, kv_file_fault fault);

/* Like kv_file_inject, but counts only the calls of `op` on files of
 * `kind` (KV_FILE_KIND_ANY: every file, which is kv_file_inject). One fault
 * per (kind, op). Directory syncs are KV_FILE_SYNC on KV_FILE_KIND_DIR.
 * Cannot fail (an out-of-range kind or op is ignored). */
void kv_file_inject_kind(kv_file_kind kind, kv_file_op op, uint64_t nth, kv_file_fault fault);

/* Calls of `op` on files of `kind` since start. Cannot fail. */
uint64_t kv_file_calls(kv_file_kind kind, kv_file_op op);

/* Process-wide counters since start. Cannot fail. */
void kv_file_counters(kv_file_stats *out);

/* Open file descriptors of this module right now (for leak tests). */
int64_t kv_file_open_count(void);

/* ---- power-loss simulation (tests) ------------------------------------------
 *
 * A test mode that remembers, for every file created through this layer,
 * what a machine crash could keep of it: the bytes covered by its last
 * fsync/fdatasync that returned OK, and the name a directory sync made
 * durable (kv_file_sync_dir_of, or kv_file_rename's own sync). The record
 * lives in a kv_file_track the caller provides, normally shared memory
 * (mmap MAP_SHARED before fork), so that a parent can apply the power cut
 * to the files of a child it killed with SIGKILL:
 *
 *     kv_file_track *t = mmap(NULL, sizeof *t, ..., MAP_SHARED | MAP_ANONYMOUS, -1, 0);
 *     kv_file_track_begin(t);          inherited by every child forked later
 *     fork(); the child writes; SIGKILL; waitpid;
 *     kv_file_power_cut(t, seed, KV_CUT_KEEP_TAIL, &stats);
 *
 * Each value is recorded conservatively: a write before it is issued, a
 * sync after it returned OK (covering only what was written when it
 * began), a name as durable once a directory sync that began after the
 * create or rename returned OK. Files opened for reading, and files made
 * some other way (the manifest, LOCK), are not tracked: they count as
 * durable. Deletions (unlink outside this layer) count as durable at once.
 * Fork only while no other thread is inside this layer, and call
 * kv_file_power_cut once the writers are dead and no file created since
 * the last cut is open in the calling process. */

#define KV_FILE_TRACK_NAME 256   /* longest tracked path, NUL included */
#define KV_FILE_TRACK_FILES 4096 /* files tracked between two power cuts */

typedef struct kv_file_track_entry {
    uint64_t issued;  /* bytes handed to the kernel or about to be */
    uint64_t done;    /* bytes the kernel took */
    uint64_t synced;  /* bytes covered by a successful sync; UINT64_MAX: all */
    int cur;          /* name[cur]: the file's name now */
    int durable;      /* name[durable]: its name after a power cut; -1 none
                       * (the file goes), -2 entry dead (file deleted or replaced) */
    char name[3][KV_FILE_TRACK_NAME];
} kv_file_track_entry;

typedef struct kv_file_track {
    uint32_t count;    /* entries in use */
    uint32_t overflow; /* files that could not be tracked (table full, long name) */
    kv_file_track_entry files[KV_FILE_TRACK_FILES];
} kv_file_track;

/* kv_file_power_cut flags. */
enum {
    KV_CUT_KEEP_TAIL = 1, /* a file may keep a random part of what was written
                           * after its last sync, as a real disk may */
    KV_CUT_ZERO_TAIL = 2  /* ... and the end of that part may read as zeros
                           * (size on disk, data not) */
};

typedef struct kv_file_cut_stats {
    uint64_t files;      /* tracked files looked at */
    uint64_t removed;    /* files whose creation was not durable: deleted */
    uint64_t unrenamed;  /* renames not durable: undone */
    uint64_t truncated;  /* files cut back to (or towards) their synced length */
    uint64_t tails_kept; /* files that kept part of an unsynced tail */
    uint64_t zeroed;     /* ... whose kept part ends in zeros */
    uint64_t bytes_dropped;
    uint64_t gone;       /* tracked files already deleted */
} kv_file_cut_stats;

/* Starts recording into *t (zeroed here), or stops with NULL. Cannot fail. */
void kv_file_track_begin(kv_file_track *t);

/* The power cut: every tracked file loses what a machine crash could lose
 * (see above; `seed` drives the random choices), then the record restarts
 * empty (all that is left is durable). *st (may be NULL) adds the counts.
 * KV_EIO when a file could not be cut (the directory is then undefined);
 * KV_EINVAL when the record overflowed or t is NULL. */
int kv_file_power_cut(kv_file_track *t, uint64_t seed, int flags, kv_file_cut_stats *st);

#endif /* KV_FILE_H */
