/* blob.h - the store's blob files: the live ones, shared by versions the
 * way tables are, and what one flush or compaction writes to new ones.
 *
 * A value of at least min_blob_size bytes (kv.h) is written by the flush
 * that takes it out of the memtable to a blob file (sstable.h, "blob
 * files"); the table keeps a reference under kind KV_KIND_BLOB. A
 * compaction copies references as they are, except those into a file whose
 * garbage passed blob_gc_threshold: it copies the value to a blob file of
 * its own (a relocation) and refers to that. Garbage is counted exactly:
 * each record is referred to by one table entry, so when a compaction drops
 * an entry (shadowed or deleted) or relocates its value, the record's bytes
 * become garbage of its file, committed with the compaction's tables. A
 * file whose every record is garbage leaves the version, and its file is
 * deleted when the last version holding it goes (as a table's). Layout of
 * the manifest records: doc/manifest.md; the scheme: doc/database.md, "Blob
 * files".
 *
 * Internal to kv: not installed. */
#ifndef KV_BLOB_H
#define KV_BLOB_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "sstable/internal.h"

#include "manifest.h"

typedef struct kv_db kv_db;

/* A live blob file. Its record's totals never change; its garbage counts
 * grow at commits (flush thread only) and are read by kv_stats. */
struct kv_blob {
    _Atomic int refs;
    uint64_t number;
    uint64_t file_size, records, record_bytes;
    _Atomic uint64_t garbage_records, garbage_bytes;
    kv_blob_reader *reader;
    char *path;
    _Atomic int obsolete; /* delete the file with the last reference */
    /* The writer's manifest (NULL: a read-only handle's, or a file no
     * manifest named), and the LMDB transaction of the commit that removed
     * the file (0: none): its deletion waits for every reader slot holding
     * an older state (kv_manifest_unlink). */
    kv_manifest *man;
    _Atomic uint64_t dead_txn;
};

/* Opens blob file rec->number of db with one reference; its garbage is
 * rec's. KV_ECORRUPT when the file does not hold what rec says (its
 * record count and bytes) or fails kv_blob_reader_open's checks;
 * also when it is missing (the manifest names it); KV_ENOMEM, KV_EIO. */
int kv_blob_open(kv_db *db, const kv_manifest_blob *rec, struct kv_blob **out);
void kv_blob_file_ref(struct kv_blob *b);
/* Drops a reference; the last one closes the file, and deletes it when
 * obsolete. NULL is a no-op. */
void kv_blob_file_unref(struct kv_blob *b);
/* Its manifest record as it stands. */
void kv_blob_record(const struct kv_blob *b, kv_manifest_blob *out);
/* Share of its record bytes that are garbage, 0 .. 1. */
double kv_blob_garbage_ratio(const struct kv_blob *b);

/* Of blobs[0, n), sorted by number, the one numbered `number`, or NULL. */
struct kv_blob *kv_blob_find(struct kv_blob *const *blobs, size_t n, uint64_t number);

/* Garbage a job found in one file. */
struct kv_blob_garbage {
    uint64_t number, records, bytes;
};

/* What one flush, or one part of a compaction, writes to blob files and
 * finds dead in them. Used by one thread. */
struct kv_blob_out {
    kv_db *db;
    uint64_t file_limit;        /* start a new file past this many bytes */
    kv_blob_writer *w;          /* the file being written, or NULL */
    uint64_t wnum;
    struct kv_blob **done;      /* finished, synced and opened: one reference each */
    size_t ndone, dcap;
    uint64_t *writing;          /* numbers of every file it created, for abandon */
    size_t nwriting, wcap;
    struct kv_blob_garbage *garbage;
    size_t ngarbage, gcap;
    uint64_t written;           /* bytes written to its files */
    uint64_t relocated;         /* of them, values moved out of old files */
    uint8_t *buf;               /* a relocation's value */
    size_t bufcap;
};

/* Starts an empty job output; nothing is created until the first put. */
void kv_blob_out_init(struct kv_blob_out *o, kv_db *db, uint64_t file_limit);
/* Writes a value (key: the user key) to the job's current file (a new one
 * when there is none, or it passed file_limit) and encodes its reference
 * into ref[KV_BLOB_REF_MAX] (*rlen bytes); *number: its file. */
int kv_blob_out_put(struct kv_blob_out *o, const uint8_t *key, size_t klen, const void *val,
                    size_t vlen, uint8_t *ref, size_t *rlen, uint64_t *number);
/* Counts a record of file `number` (of bytes kv_blob_record_size) as
 * garbage. KV_ENOMEM. */
int kv_blob_out_garbage(struct kv_blob_out *o, uint64_t number, uint64_t bytes);
/* Moves the value `ref` (whose key is `key`) out of `from` into the job's
 * file: reads it, writes it, counts the old record as garbage and the
 * bytes as relocated; the new reference as kv_blob_out_put. */
int kv_blob_out_relocate(struct kv_blob_out *o, struct kv_blob *from, const kv_blob_ref *ref,
                         const uint8_t *key, size_t klen, uint8_t *nref, size_t *rlen,
                         uint64_t *number);
/* Finishes the current file (footer, fdatasync), syncs the directory
 * when any file was written, and opens what was written. */
int kv_blob_out_finish(struct kv_blob_out *o);
/* Frees the job's state. committed 0 (the job failed, or its commit did):
 * every file it created is deleted (the manifest never named them);
 * committed 1: the version holds the files now, the job's references go. */
void kv_blob_out_free(struct kv_blob_out *o, int committed);

/* The blob changes of one commit: new files, and garbage found. */
struct kv_blob_commit {
    struct kv_blob_out *const *outs;
    size_t nouts;
};

/* ---- reads ------------------------------------------------------------------------------ */

/* Where a Get or iterator put the value a blob reference names. */
struct kv_blob_dest {
    void *buf;     /* the caller's buffer (kv_get_into), or NULL: a new one */
    size_t cap;
};

/* Reads the value that the reference `ref` (rlen bytes, as a table holds
 * it) names, for user key `key`, among the version's blob files:
 * into dest's buffer (KV_ERANGE when it does not fit: *vlen says how much
 * it takes) or a new one in *val (kv_free). Counts blob_reads. KV_ECORRUPT
 * with text for a reference that does not decode or names no live file,
 * or a record that fails its checks; KV_ENOMEM, KV_EIO. *bytes gets the
 * bytes read from the file (may be NULL). */
int kv_blob_get(kv_db *db, struct kv_blob *const *blobs, size_t nblobs, const void *ref,
                size_t rlen, const void *key, size_t klen, void **val, size_t *vlen,
                const struct kv_blob_dest *dest, kv_blob_ref *where);

#endif /* KV_BLOB_H */
