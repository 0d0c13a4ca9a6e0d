/* ingest.h - what kv_table_writer (tablewriter.c) and kv_ingest (ingest.c)
 * agree on: the sequence of a written table's entries and the note that
 * names its writer and comparator (doc/operations.md, "Bulk ingest").
 *
 * Internal to kv: not installed. */
#ifndef KV_INGEST_H
#define KV_INGEST_H

/* The sequence of every entry and range tombstone of a kv_table_writer's
 * table: the lowest there is, so that a database whose last sequence is at
 * least this can take the table as it is. */
#define KV_INGEST_SEQ 1u

/* The table's note (its properties): this, then the comparator's name. */
#define KV_INGEST_NOTE "kv_table_writer comparator="
#define KV_INGEST_NOTE_MAX 320

/* ---- the tables this process's writers finished ------------------------------------
 *
 * kv_table_writer_finish records what it wrote: the file's identity (device,
 * inode, size, modification and change times) and what kv_ingest would
 * otherwise learn by reading every entry (their count, the first and last
 * user keys, whether any is a merge operand). The writer checked each entry
 * as it was added (order, key and value sizes, kinds), so kv_ingest takes a
 * file whose identity still matches on the writer's word instead of reading
 * it whole; any change to the file since (a write, a truncation, another file
 * renamed over it) changes its size, times or inode, and the file is read
 * whole as any other. A process-wide list of the last KV_WRITTEN_MAX
 * tables; thread-safe. */

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#define KV_WRITTEN_MAX 1024

struct kv_written {
    uint64_t entries;            /* point entries */
    uint8_t *smallest, *largest; /* their first and last user keys (NULL: none) */
    size_t smallest_len, largest_len;
    int merges; /* some entry is a merge operand */
};

/* Records the finished table at `path` (stat'ed here): the keys are copied.
 * A failure (memory, stat) records nothing: the file is then read whole. */
void kv_written_note(const char *path, const struct kv_written *w);

/* 1 with *out filled (keys malloc'd: kv_written_free) when `st` is a table a
 * writer of this process finished and that is unchanged since; else 0. */
int kv_written_find(const struct stat *st, struct kv_written *out);

void kv_written_free(struct kv_written *w);

#endif /* KV_INGEST_H */
