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
 *   <n>.blob        blob files (blob.h); live when the manifest names them
 * Numbers are six or more decimal digits from one counter (next_file),
 * from 1 up to KV_DBFILE_MAX_NUMBER.
 *
 * Users: the files that name or list database files (db.c, write.c,
 * background.c, builder.c, compact.c, recover.c, repair.c: paths;
 * inspect.c: the listing; kv_destroy here).
 * Internal to kv: not installed. */
#ifndef KV_DBFILES_H
#define KV_DBFILES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "manifest.h"

/* Foreign numbers. kv gives numbers from 1 to KV_DBFILE_MAX_NUMBER, 2^63 - 1,
 * and none after it (kv_db_new_file_number: KV_ECORRUPT rather than wrap
 * onto live numbers). A name is not kv's when its number is above that, or
 * KV_DBFILE_MAX_AHEAD (2^32) or more above the manifest's next_file: no
 * database gives that many numbers between two manifest commits (each
 * flush and compaction commits the counter). kv_dbfile_classify calls such
 * a file KV_FILE_OTHER, number 0, so kv_open leaves it alone and does not
 * count it. Counted, a stray "18446744073709551614.sst.tmp" once pushed
 * next_file past 2^64: it wrapped onto the numbers of live tables, and
 * writes, flushes and kv_close failed (KV_EINVAL) from then on. */
#define KV_DBFILE_MAX_NUMBER (UINT64_MAX >> 1)
#define KV_DBFILE_MAX_AHEAD (UINT64_C(1) << 32)

/* "<dir>/<number>.<ext>" (number in six or more digits), malloc'd; NULL
 * when out of memory. */
char *kv_dbfile_path(const char *dir, uint64_t number, const char *ext);

/* "<dir>/<name>", malloc'd; NULL when out of memory. */
char *kv_dbfile_join(const char *dir, const char *name);

/* For a directory entry named "<digits><rest>", the digits as
 * kv_dbfile_path writes them (six at least, no other leading zero: a
 * "000000000500.log" would be replayed as "000500.log", which is not
 * there) and the number at most KV_DBFILE_MAX_NUMBER: sets *number and
 * returns <rest> (".sst", ".log", ".sst.tmp", ...); NULL for any other
 * name. Does not judge the number against a manifest (kv_dbfile_classify
 * does). */
const char *kv_dbfile_number(const char *name, uint64_t *number);

/* What an entry of the directory is (a KV_FILE_* of kv.h), judged against
 * the manifest's state, live tables and live blob files (st NULL: an empty manifest, so any
 * table is an orphan and any log live, and next_file is 1). *number gets
 * the <n> of a name that starts with digits, whatever its kind, else 0; a
 * foreign number (above) makes the name _OTHER with number 0. kv_open
 * keeps _TABLE and _BLOB, replays _LOG, deletes _ORPHAN, _BLOB_ORPHAN,
 * _TEMP and _OLD_LOG, and leaves the rest. */
int kv_dbfile_classify(const char *name, const kv_manifest_state *st,
                       const kv_table_meta *tables, size_t ntables,
                       const kv_manifest_blob *blobs, size_t nblobs, uint64_t *number);

/* Deletes the logs numbered below st->log_number (their writes are in
 * tables); st is the manifest's state just committed, in LMDB transaction
 * txn of man: each log goes through kv_manifest_unlink, so it stays while a
 * read-only handle may still replay it (man NULL: now). Best effort: a log
 * that stays is deleted by a later call or open. */
void kv_dbfile_remove_logs_below(const char *dir, const kv_manifest_state *st, kv_manifest *man,
                                 uint64_t txn);

/* Takes the database's lock: flock(LOCK_EX | LOCK_NB) on <dir>/LOCK,
 * created if missing; opened read-only where it cannot be opened for
 * writing (EACCES, EROFS), so that a read-only copy can still be locked and
 * read. KV_OK with *fd_out, which holds the lock until closed (or the
 * process dies); KV_EBUSY when another handle holds it, in this process or
 * another; KV_ECORRUPT, with text naming it, when LOCK is a symbolic link
 * (never followed: O_CREAT would create its target outside the directory)
 * or not a regular file (a FIFO is opened without blocking, then refused);
 * else the open's errno as kv_errno_status maps it (a LOCK that is missing
 * and cannot be made: the first open's EACCES or EROFS, KV_EPERM). Every
 * error sets its text, naming <dir>/LOCK. */
int kv_dbfile_lock(const char *dir, int *fd_out);

/* lstat's answer for p: 1 it exists (*st filled), 0 it does not, or a kv
 * error with its text. */
int kv_dbfile_exists(const char *p, struct stat *st);

/* Removes what a killed kv_repair left in <path>/repair.tmp/ (LMDB's two
 * files, if regular files) and the directory, when it is there. KV_OK, or
 * an error with its text (KV_ECORRUPT: it holds what kv did not put
 * there). kv_repair and kv_destroy call it. */
int kv_dbfile_clear_repair_dir(const char *path);

#endif /* KV_DBFILES_H */
