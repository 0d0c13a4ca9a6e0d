/* manifest.h - the database's durable catalogue, kept in LMDB.
 *
 * It records which table files are live (with their level, key range,
 * sequence range, entry count and filter parameters) and the database's
 * counters (next file number, last sequence, live WAL, hash seed, format
 * version). Every change of the table set is one call of kv_manifest_apply,
 * which is one LMDB write transaction: after a crash the manifest holds
 * either all of a change or none of it. LMDB runs with its durable defaults
 * (no MDB_NOSYNC, no MDB_WRITEMAP) and, because LMDB does not checksum its
 * pages, every value carries its own XXH3 checksum. Layout: doc/manifest.md.
 *
 * Internal to kv: not installed, symbols hidden. Write calls are
 * serialised by the caller (the store's flush thread) and by the shared
 * environment's lock; reads and pins may come from any thread. */
#ifndef KV_MANIFEST_H
#define KV_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include <kv/status.h>

/* The manifest's file inside the database directory (LMDB adds "-lock"). */
#define KV_MANIFEST_FILE "MANIFEST"

/* Largest key a table range may carry (the store's key limit). */
#define KV_MANIFEST_MAX_KEY (1u << 20)

/* Levels of the tree: a table record names a level below this. */
#define KV_MANIFEST_LEVELS 7

typedef struct kv_manifest kv_manifest;

/* The database's counters. */
typedef struct {
    uint32_t format_version; /* of the database as a whole */
    uint64_t next_file;      /* next number for a table or WAL file */
    uint64_t last_seq;       /* highest sequence number made durable in a table */
    uint64_t log_number;     /* WALs numbered >= this are live */
    uint64_t seed;           /* per-database hash seed of every filter */
} kv_manifest_state;

/* One live table. Keys are owned by whoever filled the struct; those from
 * kv_manifest_load are freed with kv_manifest_free_tables. */
typedef struct {
    uint64_t number;        /* the file is <number>.sst */
    uint32_t level;
    uint64_t file_size;
    uint8_t *smallest, *largest; /* user keys */
    size_t smallest_len, largest_len;
    uint64_t min_seq, max_seq;
    uint64_t entries;
    uint32_t filter_layout;   /* kv_bloom_layout */
    double filter_bits_per_key;
    uint32_t filter_k;
    uint64_t filter_keys;     /* keys hashed into the filter */
    uint32_t flags;           /* KV_TABLE_... below */
    /* The lowest and highest numbers of the blob files its entries refer
     * to (doc/database.md, "Blob files"); both 0 when it refers to none. */
    uint64_t blob_lo, blob_hi;
    /* The sorted run of its level (>= 1) that it belongs to: tables of a
     * level with the same run hold disjoint key ranges; a larger run is
     * newer (doc/database.md, "Compaction styles"). 0 under leveled
     * compaction, and always in level 0. */
    uint64_t run;
} kv_table_meta;

/* One live blob file (<number>.blob): what it holds and how much of that
 * no table refers to any more. */
typedef struct {
    uint64_t number;
    uint64_t file_size;
    uint64_t records, record_bytes;          /* all of its records */
    uint64_t garbage_records, garbage_bytes; /* of those, the dead ones */
} kv_manifest_blob;

/* kv_table_meta.flags: the table keeps entries (older versions, tombstones)
 * only because a snapshot could still read them when it was written; a
 * compaction of it alone may shrink it once those snapshots are gone. */
#define KV_TABLE_SNAPSHOT_PINNED 1u
#define KV_TABLE_KNOWN_FLAGS KV_TABLE_SNAPSHOT_PINNED

/* Checks the manifest's two files in `dir` before anything opens them:
 * MANIFEST-lock must be absent or a regular file, and so must MANIFEST. A
 * symbolic link is refused, whatever it points to: LMDB opens both by
 * name with O_CREAT, so it would follow a link out of the directory and
 * create or write the file it names. A FIFO, device or directory is
 * refused too (LMDB would block on it or fail without a word). KV_OK with
 * MANIFEST's size in *size (size may be NULL); KV_NOTFOUND: no MANIFEST;
 * KV_ECORRUPT with error text naming the file and what it is; KV_EINVAL
 * (a path too long), or a failed stat's errno as kv_errno_status maps it,
 * with text. kv_manifest_open makes this check itself. */
int kv_manifest_check(const char *dir, uint64_t *size);

/* Opens (creating when `create` is set and it does not exist) the manifest
 * in directory `dir`. A new manifest holds `fresh` as its state and no
 * tables. KV_NOTFOUND: absent and not created. KV_EIO, KV_ENOMEM,
 * KV_ECORRUPT (a foreign or damaged file; a link, FIFO, device or
 * directory in its place: kv_manifest_check). */
int kv_manifest_open(const char *dir, int create, const kv_manifest_state *fresh,
                     kv_manifest **out);

/* Opens the existing manifest in `dir` for a read-only handle (kv.h,
 * read_only): nothing is ever written into the MANIFEST file through it,
 * and every write call on it is KV_EINVAL. One LMDB environment per
 * MANIFEST file per process is shared by every kv_manifest of it, the
 * writer's included (manifest.c, the registry: LMDB's locks are per
 * process). Where the lock file cannot be opened for writing (a read-only
 * directory or file system) the environment runs without LMDB's locks: no
 * writer can exist there. KV_NOTFOUND: no manifest. Errors as
 * kv_manifest_open's. */
int kv_manifest_open_ro(const char *dir, kv_manifest **out);

/* 1 when m's environment runs without LMDB's lock file (see above). */
int kv_manifest_read_only_fs(const kv_manifest *m);

/* Closes it (a writer's: retries its deferred unlinks once; what is still
 * held stays on disk). NULL is a no-op. */
void kv_manifest_close(kv_manifest *m);

/* LMDB reader slots (mdb_env_set_maxreaders): pins of every process. */
#define KV_MANIFEST_READERS 510

/* ---- pins and deferred unlinking (doc/manifest.md, "Readers") ---------------------- */

/* A pin is an LMDB read transaction kept open after the state it read:
 * LMDB's reader table (the lock file, shared by every process) then shows
 * which manifest state, by transaction id, some reader still uses. A
 * read-only handle keeps the pin of the state its version was built from
 * for as long as that version is referenced (version.h, kv_version.pin). */
typedef struct kv_manifest_pin kv_manifest_pin;

/* Begins a pin and reads, in its one transaction, the state, every table
 * and every blob record (as kv_manifest_load and kv_manifest_load_blobs),
 * *pin holding one reference. KV_EBUSY with text when every reader slot is
 * taken; the load's errors. */
int kv_manifest_pin_load(kv_manifest *m, kv_manifest_pin **pin, kv_manifest_state *state,
                         kv_table_meta **tables, size_t *ntables, kv_manifest_blob **blobs,
                         size_t *nblobs);
void kv_manifest_pin_ref(kv_manifest_pin *p);
/* The last reference ends the transaction, giving its slot back. NULL is a
 * no-op. Any thread. */
void kv_manifest_pin_unref(kv_manifest_pin *p);
/* The LMDB transaction id of the state it holds (0 for NULL). */
uint64_t kv_manifest_pin_txn(const kv_manifest_pin *p);

/* The LMDB transaction id of the last kv_manifest_apply through m (the
 * change that removed the files the caller is about to let go); before the
 * first, the manifest's last at open. */
uint64_t kv_manifest_last_txn(kv_manifest *m);
/* Deletes the file at path, which a change committed in LMDB transaction
 * `txn` removed from the database (0: a file no manifest state ever named),
 * now when no reader slot of any process holds a state older than txn
 * (slots of dead processes are cleared first, mdb_reader_check), else
 * later: it waits on m's deferred list, retried after each commit through
 * m and at kv_manifest_close. Cannot fail (out of memory, the file stays,
 * an orphan the next writer's open removes the same way). */
void kv_manifest_unlink(kv_manifest *m, const char *path, uint64_t txn);
void kv_manifest_retry_unlinks(kv_manifest *m);
/* Files waiting on m's deferred list. */
size_t kv_manifest_deferred(kv_manifest *m);

/* Reads the state and every live table (ordered by number). *tables is
 * NULL when there are none. KV_ECORRUPT when any value fails its checks
 * (doc/manifest.md), with an error text (kv_error_text) that names the
 * MANIFEST, the record and what is wrong. */
int kv_manifest_load(kv_manifest *m, kv_manifest_state *state, kv_table_meta **tables,
                     size_t *ntables);

void kv_manifest_free_tables(kv_table_meta *tables, size_t n);

/* A test's seam: called by kv_manifest_apply once its transaction holds
 * the whole change, just before mdb_txn_commit. 0 lets the commit go on;
 * anything else aborts the transaction, and the attempt fails as though
 * mdb_txn_commit had returned that value (an errno such as EIO or ENOSPC,
 * or MDB_MAP_FULL, after which the map grows and the change is tried
 * again). Called with no lock held beyond the caller's; it must be
 * thread-safe when several databases are open. */
typedef int kv_manifest_commit_hook(void);

/* Installs `hook` for every manifest of the process (and children forked
 * later); NULL, the default, removes it. For tests only (the kv_testing
 * library's kv_manifest_inject). Thread-safe. Cannot fail. */
void kv_manifest_set_commit_hook(kv_manifest_commit_hook *hook);

/* In one write transaction: stores `state`, removes the tables numbered in
 * remove[], adds add[]. Removing a table that is not there, or adding one
 * that is, is KV_EINVAL and changes nothing. KV_EIO, KV_ENOSPC. */
int kv_manifest_apply(kv_manifest *m, const kv_manifest_state *state, const uint64_t *remove,
                      size_t nremove, const kv_table_meta *add, size_t nadd);

/* kv_manifest_apply, and in the same transaction: stores the blob records
 * put[] (a new file, or new garbage counts of a live one) and removes
 * those numbered in bremove[]. Removing one that is not there is
 * KV_EINVAL and changes nothing. */
int kv_manifest_apply_blobs(kv_manifest *m, const kv_manifest_state *state,
                            const uint64_t *remove, size_t nremove, const kv_table_meta *add,
                            size_t nadd, const kv_manifest_blob *put, size_t nput,
                            const uint64_t *bremove, size_t nbremove);

/* Reads every live blob file's record (ordered by number); *blobs is NULL
 * when there are none (also for a manifest made before blob files).
 * KV_ECORRUPT with text when a record fails its checks; KV_ENOMEM,
 * KV_EIO. The caller frees *blobs. */
int kv_manifest_load_blobs(kv_manifest *m, kv_manifest_blob **blobs, size_t *nblobs);

/* ---- the filter secret (kv_options.filter_keyed_hash) ---------------------------- */

/* Bytes of the secret of keyed filters. */
#define KV_MANIFEST_SECRET 16

/* Reads the `filter_secret` record: KV_OK with *have 1 and the secret in
 * secret[], or *have 0 when the database has none (it was never opened
 * keyed, or its manifest was rebuilt); KV_ECORRUPT (with text, which never
 * holds the secret) when the record fails its checks; KV_EIO etc. from
 * LMDB. */
int kv_manifest_secret_get(kv_manifest *m, uint8_t secret[KV_MANIFEST_SECRET], int *have);

/* Stores the secret in its own write transaction. A secret is made once:
 * KV_EINVAL when the record exists already. KV_EIO, KV_ENOSPC. */
int kv_manifest_secret_put(kv_manifest *m, const uint8_t secret[KV_MANIFEST_SECRET]);

/* The name of the database's key order (kv_options.comparator), kept under
 * the key "comparator" of the meta database (doc/manifest.md).
 * kv_manifest_get_comparator: KV_OK with the NUL-terminated name in
 * name[]; KV_NOTFOUND when the manifest has no such record (a database
 * made before comparators, or one whose creation stopped before it was
 * written: bytewise, unless it names no table yet); KV_ECORRUPT (a record
 * that fails its checks), KV_EIO, with text. kv_manifest_set_comparator:
 * stores `name` (1 .. KV_MANIFEST_NAME_MAX bytes, else KV_EINVAL) in one
 * write transaction, replacing any; KV_EIO, KV_ENOSPC, with text. Used by
 * kv_open, and by kv_repair when it makes a manifest anew. */
#define KV_MANIFEST_NAME_MAX 255
int kv_manifest_get_comparator(kv_manifest *m, char name[KV_MANIFEST_NAME_MAX + 1]);
int kv_manifest_set_comparator(kv_manifest *m, const char *name);

/* ---- what the database uses beyond puts and deletes (issue 49) ------------------- */

/* The `features` record of the meta database (doc/manifest.md): the merge
 * operator's name ("" when none was named) and the ttl_seconds the
 * database was last opened with (0: none). */
typedef struct {
    char merge_name[KV_MANIFEST_NAME_MAX + 1];
    uint64_t ttl_seconds;
} kv_manifest_features;

/* KV_OK with *f; KV_NOTFOUND (f zeroed) when there is no record;
 * KV_ECORRUPT with text for a record that fails its checks; KV_EIO. */
int kv_manifest_get_features(kv_manifest *m, kv_manifest_features *f);

/* Stores *f and raises the state record's format version to at least
 * `version`, in one write transaction; every later commit writes at least
 * that version. Safe beside the flush thread's kv_manifest_apply (one
 * transaction at a time). KV_EINVAL (a name over KV_MANIFEST_NAME_MAX),
 * KV_EIO, KV_ENOSPC, with text. */
int kv_manifest_put_features(kv_manifest *m, const kv_manifest_features *f, uint32_t version);

#endif /* KV_MANIFEST_H */
