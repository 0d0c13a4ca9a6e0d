/* testing.h - the kv_testing library: fault injection and power-cut
 * simulation for kv's tests, the crash test and the fuzzers, built on the
 * two seams the shipped library offers (util/file.h, kv_file_set_io;
 * kv/manifest.h, kv_manifest_set_commit_hook). None of this is in libkv.
 *
 * Linking any of the functions below into a program installs, before main,
 * this library's I/O table (every call of the file layer is counted per
 * file kind and can be failed on purpose; files created while a
 * kv_file_track record is active are tracked) and, for kv_manifest_inject
 * and kv_manifest_commits, the manifest's commit hook. A program that
 * calls none of them runs on the operating system's table, untouched. The
 * installed table is inherited by children forked later.
 *
 * A fault is aimed at a kind of file, told from its name: a write-ahead log
 * ("*.log"), a table ("*.sst", "*.sst.tmp"), a blob file ("*.blob"),
 * anything else; and directory syncs. Counters and faults are process-wide
 * and thread-safe. */
#ifndef KV_TESTING_H
#define KV_TESTING_H

#include <stddef.h>
#include <stdint.h>

#include "util/file.h"

/* Operations that can be counted and faulted: reads (kv_file_pread,
 * kv_file_view), writes (kv_file_append), syncs (kv_file_sync,
 * kv_file_datasync, sync_file_range through kv_file_start_writeback, and
 * directory syncs), opens (kv_file_open and kv_file_create). */
typedef enum {
    KV_FILE_READ = 0,
    KV_FILE_WRITE = 1,
    KV_FILE_SYNC = 2,
    KV_FILE_OPEN = 3,
    KV_FILE_OPS = 4
} kv_file_op;

/* Faults: EIO, ENOSPC, EACCES and EROFS fail the call with that error
 * (a read from a table's mapping, and a directory sync, with EIO whatever
 * the fault; an open with EIO for SHORT); SHORT makes a read return fewer
 * bytes than asked (which the caller sees as a file that ends early), or a
 * write store only part of its bytes and then fail with EIO. EACCES and
 * EROFS stand in for a permission the tests cannot take away when they run
 * as root. */
typedef enum {
    KV_FAULT_NONE = 0,
    KV_FAULT_EIO,
    KV_FAULT_ENOSPC,
    KV_FAULT_SHORT,
    KV_FAULT_EACCES,
    KV_FAULT_EROFS
} kv_file_fault;

/* What a file is, from its name: a write-ahead log ("*.log"), a table
 * ("*.sst", "*.sst.tmp"), a blob file ("*.blob": values kept apart from the
 * tables), anything else; and directory syncs. A fault can be aimed at one
 * kind (kv_file_inject_kind), e.g. "the 2nd sync of a log". */
typedef enum {
    KV_FILE_KIND_ANY = 0,
    KV_FILE_KIND_WAL = 1,
    KV_FILE_KIND_TABLE = 2,
    KV_FILE_KIND_DIR = 3,
    KV_FILE_KIND_OTHER = 4,
    KV_FILE_KIND_BLOB = 5,
    KV_FILE_KINDS = 6
} kv_file_kind;

/* kv_file_counters: calls per op on every kind, bytes read and written,
 * files opened (successfully) and closed. */
typedef struct {
    uint64_t calls[KV_FILE_OPS];
    uint64_t read_bytes, write_bytes;
    uint64_t opens, closes;
} kv_file_stats;

/* Arms a fault: the nth call (1 = the next one) of `op` from now fails with
 * `fault`. One fault per op; KV_FAULT_NONE disarms. Cannot fail. */
void kv_file_inject(kv_file_op op, uint64_t nth, kv_file_fault fault);

/* Like kv_file_inject, but counts only the calls of `op` on files of
 * `kind` (KV_FILE_KIND_ANY: every file, which is kv_file_inject). One fault
 * per (kind, op). Directory syncs are KV_FILE_SYNC on KV_FILE_KIND_DIR.
 * Cannot fail (an out-of-range kind or op is ignored). */
void kv_file_inject_kind(kv_file_kind kind, kv_file_op op, uint64_t nth, kv_file_fault fault);

/* A lasting fault, as a full disk is: from now on every call of `op` on
 * files of `kind` (KV_FILE_KIND_ANY: every file) fails with `fault` until
 * it is called again with KV_FAULT_NONE (room again). Counted as usual;
 * it comes before the faults armed above. Cannot fail. */
void kv_file_fault_persist(kv_file_kind kind, kv_file_op op, kv_file_fault fault);

/* Calls of `op` on files of `kind` since start. Cannot fail. */
uint64_t kv_file_calls(kv_file_kind kind, kv_file_op op);

/* Process-wide counters since start. Cannot fail. */
void kv_file_counters(kv_file_stats *out);

/* ---- power-loss simulation ---------------------------------------------------
 *
 * A mode that remembers, for every file created through the file layer,
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
 * durable. Deletions (unlink outside the file layer) count as durable at once.
 * Fork only while no other thread is inside the file layer, and call
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

/* ---- the manifest ------------------------------------------------------------ */

/* The nth commit from now of kv_manifest_apply (1 = the next) is aborted
 * and fails as LMDB would have with `mdb_err` (an errno such as EIO or
 * ENOSPC, or MDB_MAP_FULL, after which the map grows and the change is
 * tried again). 0 or nth 0 disarms. Process-wide. Cannot fail. */
void kv_manifest_inject(uint64_t nth, int mdb_err);

/* Every commit of kv_manifest_apply from now on fails with `mdb_err` (a
 * full disk: ENOSPC) until called again with 0. Cannot fail. */
void kv_manifest_fault_persist(int mdb_err);

/* Commits kv_manifest_apply has attempted since start. Cannot fail. */
uint64_t kv_manifest_commits(void);

#endif /* KV_TESTING_H */
