/* internal.h - what the parts of the kv_testing library share: the I/O
 * table (faults.c) calls the power-loss record (powercut.c) at each create,
 * write, sync, rename and directory sync. Not for the tests. */
#ifndef KV_TESTING_INTERNAL_H
#define KV_TESTING_INTERNAL_H

#include <stdint.h>

/* Installs the library's I/O table (idempotent). */
void kvt_install_io(void);

/* A file named `path` was just created: its entry in the record, or -1
 * when it is not tracked (no record, record full, name too long). */
int kvt_track_create(const char *path);

/* Before a write of entry `e` that will end at `end`. */
void kvt_track_issue(int e, uint64_t end);

/* After a write: the file now holds `end` bytes of its handle. */
void kvt_track_done(int e, uint64_t end);

/* What a sync of entry `e` starting now covers (UINT64_MAX: not tracked). */
uint64_t kvt_track_sync_begin(int e);

/* A sync of entry `e` that covered `upto` returned OK. */
void kvt_track_sync_done(int e, uint64_t upto);

/* Around a rename or a directory sync: kvt_track_lock returns whether a
 * record is active, and if so holds its lock until kvt_track_unlock(1), so
 * that nothing slips in between the system call and its marking. */
int kvt_track_lock(void);
void kvt_track_unlock(int locked);

/* With the lock held (kvt_track_lock returned 1): `from` was just renamed
 * to `to`; the directory `dir` was just synced. */
void kvt_track_renamed(const char *from, const char *to);
void kvt_track_dir_synced(const char *dir);

#endif /* KV_TESTING_INTERNAL_H */
