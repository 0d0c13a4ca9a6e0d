/* dbfiles.h - the names in a database directory: numbered files, the LOCK,
 * and what kv_open does with each entry it finds (dbfiles.c).
 *
 *   LOCK            flock()ed while a handle (kv_open) or an inspection
 *                   (kv_inspect) holds the database
 *   MANIFEST        LMDB: the live tables and the counters (manifest.h),
 *                   with LMDB's MANIFEST-lock beside it
 *   <n>.log         write-ahead logs; those numbered >= log_number are live
 *   <n>.sst         tables; live when the manifest names them
 *   <n>.sst.tmp     a table being written; never live
 * Numbers are six or more decimal digits from one counter (next_file).
 *
 * Users: db.c, recover.c, compact.c (paths), inspect.c (the listing).
 * Internal to kv: not installed. */
#ifndef KV_DBFILES_H
#define KV_DBFILES_H

#include <stddef.h>
#include <stdint.h>

#include "manifest.h"

/* "<dir>/<number>.<ext>" (number in six or more digits), malloc'd; NULL
 * when out of memory. */
char *kv_dbfile_path(const char *dir, uint64_t number, const char *ext);

/* "<dir>/<name>", malloc'd; NULL when out of memory. */
char *kv_dbfile_join(const char *dir, const char *name);

/* For a directory entry named "<digits><rest>": sets *number and returns
 * <rest> (".sst", ".log", ".sst.tmp", ...); NULL for any other name. */
const char *kv_dbfile_number(const char *name, uint64_t *number);

/* What an entry of the directory is (a KV_FILE_* of kv.h), judged against
 * the manifest's state and live tables (st NULL: an empty manifest, so any
 * table is an orphan and any log live). *number gets the <n> of a name that
 * starts with digits, whatever its kind, else 0. kv_open keeps _TABLE,
 * replays _LOG, deletes _ORPHAN, _TEMP and _OLD_LOG, and leaves the rest. */
int kv_dbfile_classify(const char *name, const kv_manifest_state *st,
                       const kv_table_meta *tables, size_t ntables, uint64_t *number);

/* Deletes the logs numbered below `live` (their writes are in tables).
 * Best effort: a log that stays is deleted by a later call or open. */
void kv_dbfile_remove_logs_below(const char *dir, uint64_t live);

/* Takes the database's lock: flock(LOCK_EX | LOCK_NB) on <dir>/LOCK,
 * created if missing; opened read-only where it cannot be opened for
 * writing (EACCES, EROFS), so that a read-only copy can still be locked and
 * read. KV_OK with *fd_out, which holds the lock until closed (or the
 * process dies); KV_EBUSY when another handle holds it, in this process or
 * another; KV_ECORRUPT, with text naming it, when LOCK is a symbolic link
 * (never followed: O_CREAT would create its target outside the directory)
 * or not a regular file (a FIFO is opened without blocking, then refused);
 * else the open's errno as kv_errno_status maps it. */
int kv_dbfile_lock(const char *dir, int *fd_out);

#endif /* KV_DBFILES_H */
