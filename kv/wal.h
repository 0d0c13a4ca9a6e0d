/* wal.h - the write-ahead log: records in fixed-size blocks, each fragment
 * checksummed, replayed after a crash up to the first damaged record.
 *
 * A record is an opaque byte string (the store writes one encoded write
 * batch per record). The writer appends records; kv_wal_sync makes every
 * appended record durable (fdatasync). After a sync fails, the log refuses
 * every further append and sync with the same error: data the kernel failed
 * to write may be lost from its cache, so retrying as if nothing happened
 * would acknowledge writes that are not on disk.
 *
 * Replay returns the records in order and stops at the first fragment that
 * is torn, fails its checksum, or does not fit the sequence: what survives is
 * a prefix of the log with no holes. Byte layout: doc/wal_format.md.
 *
 * Internal to kv: not installed, symbols hidden. A kv_wal is used by one
 * thread at a time (the store's group-commit leader). */
#ifndef KV_WAL_H
#define KV_WAL_H

#include <stddef.h>
#include <stdint.h>

#include <kv/status.h>

#define KV_WAL_BLOCK 32768u /* bytes per block */
#define KV_WAL_HEADER 9u    /* checksum u32, length u16, type u8, log tag u16 */
#define KV_WAL_MAX_RECORD ((size_t)1 << 30)

typedef struct kv_wal kv_wal;

/* Creates a new, empty log file at `path` (it must not exist) and syncs its
 * directory entry. `number` is the log's number; each fragment carries its
 * low 16 bits, so stale bytes from another log cannot pass as this one's.
 * KV_EINVAL, KV_EIO, KV_ENOSPC, KV_ENOMEM. */
int kv_wal_create(const char *path, uint64_t number, kv_wal **out);
/* kv_wal_create without the directory sync: the caller syncs the directory
 * (kv_file_sync_dir_of) before a crash could need the file (write.c creates
 * it; the background thread, background.c, syncs the directory right after
 * it syncs the log before this one). */
int kv_wal_create_unsynced(const char *path, uint64_t number, kv_wal **out);

/* Appends one record of `len` bytes (len <= KV_WAL_MAX_RECORD). The bytes
 * are handed to the operating system before it returns (a process crash
 * cannot lose them); kv_wal_sync makes them survive a machine crash.
 * KV_EIO / KV_ENOSPC: nothing after the previous append is guaranteed, and
 * the log is dead (every later call fails with the same error). */
int kv_wal_append(kv_wal *w, const void *rec, size_t len);

/* fdatasync: every record appended so far survives a machine crash. */
int kv_wal_sync(kv_wal *w);

/* Bytes written so far (including headers and block padding). */
uint64_t kv_wal_size(const kv_wal *w);

/* Closes the file (without syncing). NULL is a no-op. Returns the first
 * error the log hit, or the close's own. */
int kv_wal_close(kv_wal *w);

/* What a replay found. */
typedef struct {
    uint64_t records;       /* records delivered and taken (fn returned 0) */
    uint64_t bytes_read;    /* bytes of the file consumed up to the last one taken */
    uint64_t bytes_dropped; /* file bytes after that: a torn or damaged tail, or
                             * the record fn refused and all after it */
    int tail_damaged;       /* 1 when replay stopped at damage, not at a clean end
                             * or a record fn refused */
} kv_wal_report;

/* Calls fn(ctx, record, len) for each intact record of the log at `path`,
 * in order, stopping at the first damaged one. A nonzero return from fn
 * refuses the record: the replay stops and returns it, and that record and
 * the rest of the file count as dropped. The record pointer is valid only
 * during the call. KV_NOTFOUND: no such file; KV_EIO, KV_ENOMEM. Damage is
 * not an error: it is reported in *report. */
int kv_wal_replay(const char *path, uint64_t number,
                  int (*fn)(void *ctx, const void *rec, size_t len), void *ctx,
                  kv_wal_report *report);

/* kv_wal_replay from byte `from` of the file on, which must be where an
 * earlier replay of the same log ended (its report's bytes_read): a
 * read-only handle (readonly.c) takes only what the writer appended since.
 * bytes_read counts from the file's start. */
int kv_wal_replay_from(const char *path, uint64_t number, uint64_t from,
                       int (*fn)(void *ctx, const void *rec, size_t len), void *ctx,
                       kv_wal_report *report);

#endif /* KV_WAL_H */
