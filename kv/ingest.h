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

#endif /* KV_INGEST_H */
