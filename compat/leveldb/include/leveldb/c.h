/* leveldb/c.h - LevelDB 1.23's C API, served by kv (libkv_leveldb).
 *
 * A program written against LevelDB's C header builds against this one
 * unchanged and links with `pkg-config --libs kv-leveldb` (CMake: kv::leveldb)
 * instead of -lleveldb. Every name, type and signature below is LevelDB
 * 1.23's; what runs underneath is kv's public API (<kv/kv.h>). The comments
 * are kv's: where kv does something other than LevelDB, the comment beside
 * the function says so (look for "kv:"), and doc/leveldb.md lists all of
 * it in one place.
 *
 * The conventions, the same as LevelDB's:
 *   - Every object is an opaque pointer made by a *_create (or open)
 *     function and given back to the matching *_destroy (or close).
 *   - Keys and values are (pointer, length) pairs: any bytes, NUL included.
 *   - A function that can fail takes `char **errptr` last. On entry
 *     *errptr is NULL or a message an earlier call stored there. On success
 *     it is left alone; on failure the old message is freed and *errptr
 *     gets a new one from malloc, which the caller frees with leveldb_free
 *     (or free). Messages start as LevelDB's do: "Invalid argument: ",
 *     "Corruption: ", "NotFound: " or "IO error: ", then kv's own text,
 *     which names the file or directory and the reason.
 *   - Booleans are uint8_t: 0 is false, anything else true.
 *   - LevelDB requires every pointer argument to be non-NULL. kv does not
 *     crash on a NULL handle: a call that reports errors reports one
 *     ("Invalid argument: ..."), one that cannot does nothing (or returns
 *     NULL / 0), and NULL read or write options mean the defaults.
 *   - A create function returns NULL when memory runs out (LevelDB would
 *     throw).
 *
 * kv's limits that LevelDB lacks: a key holds at most 512 KiB and a value
 * at most 16 MiB (KV_MAX_KEY_SIZE, KV_MAX_VALUE_SIZE); a longer one is an
 * "Invalid argument" error and changes nothing. */
#ifndef KV_LEVELDB_C_H
#define KV_LEVELDB_C_H

#ifdef __cplusplus
extern "C" {
#endif

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "leveldb/export.h"

/* ---- the opaque types ------------------------------------------------------ */

typedef struct leveldb_t leveldb_t;                           /* an open database */
typedef struct leveldb_cache_t leveldb_cache_t;               /* a block cache size */
typedef struct leveldb_comparator_t leveldb_comparator_t;     /* a key order */
typedef struct leveldb_env_t leveldb_env_t;                   /* the environment */
typedef struct leveldb_filelock_t leveldb_filelock_t;         /* declared, never made */
typedef struct leveldb_filterpolicy_t leveldb_filterpolicy_t; /* a filter setting */
typedef struct leveldb_iterator_t leveldb_iterator_t;
typedef struct leveldb_logger_t leveldb_logger_t;             /* declared, never made */
typedef struct leveldb_options_t leveldb_options_t;
typedef struct leveldb_randomfile_t leveldb_randomfile_t;     /* declared, never made */
typedef struct leveldb_readoptions_t leveldb_readoptions_t;
typedef struct leveldb_seqfile_t leveldb_seqfile_t;           /* declared, never made */
typedef struct leveldb_snapshot_t leveldb_snapshot_t;
typedef struct leveldb_writablefile_t leveldb_writablefile_t; /* declared, never made */
typedef struct leveldb_writebatch_t leveldb_writebatch_t;
typedef struct leveldb_writeoptions_t leveldb_writeoptions_t;

/* ---- the database ------------------------------------------------------------ */

/* Opens (kv_open) the database in directory `name` with `options` (NULL:
 * the defaults of leveldb_options_create). NULL and *errptr set on failure:
 * "Invalid argument: <name>: does not exist (create_if_missing is false)"
 * when there is no database and create_if_missing is off; "Invalid
 * argument: ..." when one exists and error_if_exists is on, or when the
 * comparator's name is not the one the database was made with; "IO error:
 * ... " when another handle (in this process or another) holds it.
 * kv: a database made by LevelDB cannot be opened (kv's files are its own);
 * move the data across with an iterator and a write batch. */
LEVELDB_EXPORT leveldb_t* leveldb_open(const leveldb_options_t* options,
                                       const char* name, char** errptr);

/* Closes the database (kv_close) and frees the handle. NULL: nothing.
 * kv: destroy every iterator and release every snapshot first. kv refuses
 * to close under a live one: then the database stays open (its lock held)
 * and the handle cannot be reached again; LevelDB leaves that case
 * undefined. An error the background thread hit is not reported (the
 * function returns nothing), as in LevelDB. */
LEVELDB_EXPORT void leveldb_close(leveldb_t* db);

/* Stores or replaces the value of a key. options NULL: not synced. */
LEVELDB_EXPORT void leveldb_put(leveldb_t* db,
                                const leveldb_writeoptions_t* options,
                                const char* key, size_t keylen, const char* val,
                                size_t vallen, char** errptr);

/* Removes a key; an absent key is no error. */
LEVELDB_EXPORT void leveldb_delete(leveldb_t* db,
                                   const leveldb_writeoptions_t* options,
                                   const char* key, size_t keylen,
                                   char** errptr);

/* Applies every put and delete of the batch at once, or none of them, also
 * across a crash. The batch is left as it was.
 * kv: if a put or delete could not be added to the batch (out of memory,
 * or a key or value over kv's limits), the batch remembers it and this
 * call fails with that error, writing nothing; leveldb_writebatch_clear
 * forgets it. */
LEVELDB_EXPORT void leveldb_write(leveldb_t* db,
                                  const leveldb_writeoptions_t* options,
                                  leveldb_writebatch_t* batch, char** errptr);

/* The value of a key, in a new buffer (from malloc: free it with
 * leveldb_free), and its length in *vallen. An absent or deleted key gives
 * NULL with *vallen 0 and no error; so does a failure, which also sets
 * *errptr. The buffer of an empty value is not NULL. options NULL: read the
 * newest data. */
LEVELDB_EXPORT char* leveldb_get(leveldb_t* db,
                                 const leveldb_readoptions_t* options,
                                 const char* key, size_t keylen, size_t* vallen,
                                 char** errptr);

/* A new iterator over the database as of options' snapshot (none: now); it
 * is not valid until one of the seeks. Destroy it before leveldb_close.
 * NULL only when memory runs out (or db is NULL); any other failure gives
 * an iterator that is never valid and reports the error through
 * leveldb_iter_get_error. */
LEVELDB_EXPORT leveldb_iterator_t* leveldb_create_iterator(
    leveldb_t* db, const leveldb_readoptions_t* options);

/* A snapshot of the database as it is now: reads through read options that
 * name it see exactly the writes done before it was taken. Release it
 * before leveldb_close.
 * kv: NULL when memory runs out (or db is NULL). */
LEVELDB_EXPORT const leveldb_snapshot_t* leveldb_create_snapshot(leveldb_t* db);

/* Releases a snapshot of this database and frees it. NULL: nothing. */
LEVELDB_EXPORT void leveldb_release_snapshot(
    leveldb_t* db, const leveldb_snapshot_t* snapshot);

/* A property of the database as text (a new NUL-terminated buffer from
 * malloc: free it with leveldb_free), or NULL for a name kv does not know.
 * The names, mapped onto kv_property's:
 *   "leveldb.stats"                    -> "kv.stats": tables and bytes per level
 *   "leveldb.sstables"                 -> "kv.sstables": every live table
 *   "leveldb.num-files-at-level<N>"    -> "kv.num-files-at-level<N>"
 *   "leveldb.approximate-memory-usage" -> "kv.approximate-memory-usage"
 * and the "kv." names themselves.
 * kv: the text of "leveldb.stats" and "leveldb.sstables" is kv's, not
 * LevelDB's layout; the numbers of the other two mean the same. A property
 * LevelDB has and kv lacks is NULL. */
LEVELDB_EXPORT char* leveldb_property_value(leveldb_t* db,
                                            const char* propname);

/* For each of the num_ranges ranges [start, limit) writes to sizes[i] about
 * how many bytes of table files hold keys in it (kv_approximate_sizes).
 * Data still in the memtable counts nothing, as in LevelDB.
 * kv: on an error (out of memory) every size is 0; LevelDB has no error
 * here. */
LEVELDB_EXPORT void leveldb_approximate_sizes(
    leveldb_t* db, int num_ranges, const char* const* range_start_key,
    const size_t* range_start_key_len, const char* const* range_limit_key,
    const size_t* range_limit_key_len, uint64_t* sizes);

/* Compacts the tables that hold keys in [start_key, limit_key] (a NULL key:
 * no bound on that side) down to the deepest level that holds data, and
 * waits for it; the memtable is flushed first (kv_compact_range). An error is not reported (the
 * function returns nothing), as in LevelDB. */
LEVELDB_EXPORT void leveldb_compact_range(leveldb_t* db, const char* start_key,
                                          size_t start_key_len,
                                          const char* limit_key,
                                          size_t limit_key_len);

/* ---- whole databases ------------------------------------------------------------ */

/* Deletes the database in directory `name`: every file kv made there, then
 * the directory when that leaves it empty (kv_destroy). No database there
 * is no error. The database must not be open.
 * kv: options are not used. */
LEVELDB_EXPORT void leveldb_destroy_db(const leveldb_options_t* options,
                                       const char* name, char** errptr);

/* Rebuilds the database's record of its tables from the table and log files
 * in `name` (kv_repair), after damage or loss. The database must not be
 * open; options must name the comparator it was made with. */
LEVELDB_EXPORT void leveldb_repair_db(const leveldb_options_t* options,
                                      const char* name, char** errptr);

/* ---- iterators ------------------------------------------------------------------------
 *
 * An iterator walks the keys in the comparator's order, both ways, hiding
 * deleted keys and older values. While it is not valid, key and value give
 * NULL (with length 0) and next and prev do nothing.
 * kv: LevelDB requires a valid iterator for key, value, next and prev; kv
 * checks, as said. An iterator may be used by one thread at a time. */

/* Frees the iterator. NULL: nothing. */
LEVELDB_EXPORT void leveldb_iter_destroy(leveldb_iterator_t*);
/* 1 while the iterator stands on a key, else 0. */
LEVELDB_EXPORT uint8_t leveldb_iter_valid(const leveldb_iterator_t*);
/* To the first key; to the last key. */
LEVELDB_EXPORT void leveldb_iter_seek_to_first(leveldb_iterator_t*);
LEVELDB_EXPORT void leveldb_iter_seek_to_last(leveldb_iterator_t*);
/* To the first key at or after k. */
LEVELDB_EXPORT void leveldb_iter_seek(leveldb_iterator_t*, const char* k,
                                      size_t klen);
/* One key on; one key back. */
LEVELDB_EXPORT void leveldb_iter_next(leveldb_iterator_t*);
LEVELDB_EXPORT void leveldb_iter_prev(leveldb_iterator_t*);
/* The current key and value, valid until the iterator moves or is
 * destroyed. */
LEVELDB_EXPORT const char* leveldb_iter_key(const leveldb_iterator_t*,
                                            size_t* klen);
LEVELDB_EXPORT const char* leveldb_iter_value(const leveldb_iterator_t*,
                                              size_t* vlen);
/* Sets *errptr if the iterator stopped on an error (a damaged table, an I/O
 * error); an iterator that ran off an end has none. */
LEVELDB_EXPORT void leveldb_iter_get_error(const leveldb_iterator_t*,
                                           char** errptr);

/* ---- write batches ------------------------------------------------------------------ */

/* An empty batch. A batch is used by one thread at a time. */
LEVELDB_EXPORT leveldb_writebatch_t* leveldb_writebatch_create(void);
/* Frees it. NULL: nothing. */
LEVELDB_EXPORT void leveldb_writebatch_destroy(leveldb_writebatch_t*);
/* Removes every entry (and a remembered error: see leveldb_write). */
LEVELDB_EXPORT void leveldb_writebatch_clear(leveldb_writebatch_t*);
/* Adds a put; adds a delete. Entries apply in the order they were added,
 * so a later one for the same key wins. An entry that cannot be added is
 * remembered as an error for leveldb_write (kv: see there). */
LEVELDB_EXPORT void leveldb_writebatch_put(leveldb_writebatch_t*,
                                           const char* key, size_t klen,
                                           const char* val, size_t vlen);
LEVELDB_EXPORT void leveldb_writebatch_delete(leveldb_writebatch_t*,
                                              const char* key, size_t klen);
/* Calls put(state, ...) for each put and deleted(state, ...) for each
 * delete, in the order they were added (kv_batch_foreach). The pointers
 * are valid during the call. */
LEVELDB_EXPORT void leveldb_writebatch_iterate(
    const leveldb_writebatch_t*, void* state,
    void (*put)(void*, const char* k, size_t klen, const char* v, size_t vlen),
    void (*deleted)(void*, const char* k, size_t klen));
/* Adds source's entries, in order, after destination's. source is left as
 * it was (it may not be destination). */
LEVELDB_EXPORT void leveldb_writebatch_append(
    leveldb_writebatch_t* destination, const leveldb_writebatch_t* source);

/* ---- options ---------------------------------------------------------------------------
 *
 * An options object is read when leveldb_open (or leveldb_repair_db) runs
 * and may be changed or destroyed after. What it starts with: LevelDB's
 * defaults where they say what a call does (create_if_missing and
 * error_if_exists off), kv's elsewhere (kv_options_init: a 4 MiB write
 * buffer, 4 KiB blocks, an 8 MiB block cache, 1000 open files, 8 MiB
 * tables, zstd, kv's Bloom filters at 10 bits per key). */

LEVELDB_EXPORT leveldb_options_t* leveldb_options_create(void);
/* Frees the options; not the comparator, filter policy, cache or env they
 * name. NULL: nothing. */
LEVELDB_EXPORT void leveldb_options_destroy(leveldb_options_t*);
/* The key order (NULL: bytewise). It must outlive every database opened
 * with it. kv: the comparator's name is stored when the database is made,
 * and opening it under another name fails ("Invalid argument"), as in
 * LevelDB; kv's own bytewise order is named "kv.bytewise", not
 * "leveldb.BytewiseComparator". */
LEVELDB_EXPORT void leveldb_options_set_comparator(leveldb_options_t*,
                                                   leveldb_comparator_t*);
/* kv: every table has kv's own Bloom filter, built and asked by kv. A
 * policy from leveldb_filterpolicy_create_bloom(b) sets its bits per key
 * to b (0: no filters); a custom policy is accepted but its callbacks are
 * never called (its filters are not built, and reads are not gated by
 * them): kv's filter, at 10 bits per key, gates reads instead. NULL (as by
 * default) also gives kv's filter at 10 bits per key, where LevelDB has no
 * filter at all. Answers are the same either way; only the disk reads a
 * missing key costs differ. */
LEVELDB_EXPORT void leveldb_options_set_filter_policy(leveldb_options_t*,
                                                      leveldb_filterpolicy_t*);
/* Make the database if there is none (default off). */
LEVELDB_EXPORT void leveldb_options_set_create_if_missing(leveldb_options_t*,
                                                          uint8_t);
/* Fail if there is one already (default off). */
LEVELDB_EXPORT void leveldb_options_set_error_if_exists(leveldb_options_t*,
                                                        uint8_t);
/* kv: accepted and ignored. kv always checks every block's checksum as it
 * reads it, and at open replays a damaged log up to its last sound record
 * and reports the loss in kv's counters, where LevelDB with paranoid
 * checks would refuse to open. */
LEVELDB_EXPORT void leveldb_options_set_paranoid_checks(leveldb_options_t*,
                                                        uint8_t);
/* kv: accepted and ignored (kv reads and writes files with the system's
 * calls directly). */
LEVELDB_EXPORT void leveldb_options_set_env(leveldb_options_t*, leveldb_env_t*);
/* kv: accepted and ignored; kv keeps no log file (its errors come back to
 * the caller, its counters through leveldb_property_value). */
LEVELDB_EXPORT void leveldb_options_set_info_log(leveldb_options_t*,
                                                 leveldb_logger_t*);
/* Bytes of writes held in memory before they are written out as a table.
 * kv: kept within kv's 64 KiB .. 4 GiB (LevelDB: 64 KiB .. 1 GiB). */
LEVELDB_EXPORT void leveldb_options_set_write_buffer_size(leveldb_options_t*,
                                                          size_t);
/* Table files kept open at once. kv: below 16 counts as 16, kv's least
 * (LevelDB raises anything below 74 to 74). A budget, not a limit on
 * tables: a file not open is opened when a read needs it. */
LEVELDB_EXPORT void leveldb_options_set_max_open_files(leveldb_options_t*, int);
/* The block cache (NULL: kv's own 8 MiB). kv: only the cache's capacity is
 * taken; each database gets a cache of its own of that many bytes, even
 * when several are opened with one leveldb_cache_t. */
LEVELDB_EXPORT void leveldb_options_set_cache(leveldb_options_t*,
                                              leveldb_cache_t*);
/* Bytes of keys and values per data block before compression. kv: kept
 * within kv's 64 bytes .. 64 MiB. */
LEVELDB_EXPORT void leveldb_options_set_block_size(leveldb_options_t*, size_t);
/* kv: accepted and ignored; kv's tables put a restart point every 8 keys. */
LEVELDB_EXPORT void leveldb_options_set_block_restart_interval(
    leveldb_options_t*, int);
/* The size at which a compaction starts its next output table. kv: at
 * least 64 KiB; kv's default is 8 MiB (LevelDB's 2 MiB). */
LEVELDB_EXPORT void leveldb_options_set_max_file_size(leveldb_options_t*,
                                                      size_t);

/* leveldb_options_set_compression's values. kv: leveldb_no_compression
 * stores blocks raw; leveldb_snappy_compression (the default), and any
 * other nonzero value, compresses them with kv's zstd defaults (level -1
 * in 2 KiB blocks, the bottom levels only; kv.h), which kv
 * uses in place of Snappy. */
enum { leveldb_no_compression = 0, leveldb_snappy_compression = 1 };
LEVELDB_EXPORT void leveldb_options_set_compression(leveldb_options_t*, int);

/* ---- comparators ------------------------------------------------------------------ */

/* A key order from callbacks: compare(state, a, alen, b, blen) returns
 * <0, 0 or >0 as a is before, equal to or after b; name(state) names the
 * order (1 to 255 bytes), and is asked once, here. destructor(state) runs
 * at leveldb_comparator_destroy. The order must never change for a
 * database that was made with the name. compare may be called from kv's
 * background thread and from any thread reading at once.
 * kv: as in LevelDB's C API, the order cannot shorten keys (that only
 * changes the size of the tables' indexes, not what is stored). NULL when
 * memory runs out or compare or name is NULL. */
LEVELDB_EXPORT leveldb_comparator_t* leveldb_comparator_create(
    void* state, void (*destructor)(void*),
    int (*compare)(void*, const char* a, size_t alen, const char* b,
                   size_t blen),
    const char* (*name)(void*));
/* Runs the destructor and frees the comparator, after every database that
 * uses it is closed. NULL: nothing. */
LEVELDB_EXPORT void leveldb_comparator_destroy(leveldb_comparator_t*);

/* ---- filter policies --------------------------------------------------------------- */

/* kv: a custom filter policy is accepted, but kv builds and asks its own
 * per-table Bloom filter (10 bits per key), and create_filter,
 * key_may_match and name are never called; destructor(state) runs at
 * leveldb_filterpolicy_destroy. Whatever key_may_match would answer, a
 * read finds every key that is there. NULL when memory runs out. */
LEVELDB_EXPORT leveldb_filterpolicy_t* leveldb_filterpolicy_create(
    void* state, void (*destructor)(void*),
    char* (*create_filter)(void*, const char* const* key_array,
                           const size_t* key_length_array, int num_keys,
                           size_t* filter_length),
    uint8_t (*key_may_match)(void*, const char* key, size_t length,
                             const char* filter, size_t filter_length),
    const char* (*name)(void*));
/* Runs a custom policy's destructor and frees the policy. NULL: nothing. */
LEVELDB_EXPORT void leveldb_filterpolicy_destroy(leveldb_filterpolicy_t*);

/* kv's Bloom filter at bits_per_key bits per key (kv_options
 * bloom_bits_per_key; kept within 0 .. 1000). kv: 0 means no filters;
 * kv's filter is its own (a blocked Bloom filter, one cache line per
 * query), so its false-positive rate at a given setting is near LevelDB's
 * but not the same. */
LEVELDB_EXPORT leveldb_filterpolicy_t* leveldb_filterpolicy_create_bloom(
    int bits_per_key);

/* ---- read options ------------------------------------------------------------------- */

/* Defaults: no snapshot (read the newest data), verify_checksums off,
 * fill_cache on. */
LEVELDB_EXPORT leveldb_readoptions_t* leveldb_readoptions_create(void);
LEVELDB_EXPORT void leveldb_readoptions_destroy(leveldb_readoptions_t*);
/* kv: accepted and ignored; kv checks every block's checksum always. */
LEVELDB_EXPORT void leveldb_readoptions_set_verify_checksums(
    leveldb_readoptions_t*, uint8_t);
/* kv: accepted and ignored; the blocks a read fetches always go into the
 * block cache. */
LEVELDB_EXPORT void leveldb_readoptions_set_fill_cache(leveldb_readoptions_t*,
                                                       uint8_t);
/* Reads see the database as of this snapshot (NULL: as it is now). */
LEVELDB_EXPORT void leveldb_readoptions_set_snapshot(leveldb_readoptions_t*,
                                                     const leveldb_snapshot_t*);

/* ---- write options ----------------------------------------------------------------- */

/* Default: sync off. */
LEVELDB_EXPORT leveldb_writeoptions_t* leveldb_writeoptions_create(void);
LEVELDB_EXPORT void leveldb_writeoptions_destroy(leveldb_writeoptions_t*);
/* On: the log is flushed to the device (fdatasync) before the write
 * returns, so it survives a machine crash. Off: it survives a crash of the
 * process. */
LEVELDB_EXPORT void leveldb_writeoptions_set_sync(leveldb_writeoptions_t*,
                                                  uint8_t);

/* ---- caches ---------------------------------------------------------------------------- */

/* A block cache of `capacity` bytes. kv: a size only (see
 * leveldb_options_set_cache); 0 turns the cache off. */
LEVELDB_EXPORT leveldb_cache_t* leveldb_cache_create_lru(size_t capacity);
LEVELDB_EXPORT void leveldb_cache_destroy(leveldb_cache_t* cache);

/* ---- the environment ----------------------------------------------------------------- */

/* kv: an env only stands for the system; databases ignore it. */
LEVELDB_EXPORT leveldb_env_t* leveldb_create_default_env(void);
LEVELDB_EXPORT void leveldb_env_destroy(leveldb_env_t*);

/* A directory for tests, made if missing: $TEST_TMPDIR when it is set and
 * not empty, else /tmp/leveldbtest-<effective user id>, as LevelDB names
 * it. A new buffer: free it with leveldb_free. NULL when memory runs out. */
LEVELDB_EXPORT char* leveldb_env_get_test_directory(leveldb_env_t*);

/* ---- the rest ------------------------------------------------------------------------- */

/* free(ptr): for the buffers this API returns (values, property values,
 * error messages, the test directory). */
LEVELDB_EXPORT void leveldb_free(void* ptr);

/* 1 and 23: the LevelDB release whose C API this is. */
LEVELDB_EXPORT int leveldb_major_version(void);
LEVELDB_EXPORT int leveldb_minor_version(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KV_LEVELDB_C_H */
