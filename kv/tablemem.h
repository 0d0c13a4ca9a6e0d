/* tablemem.h - the table memory budget (kv_options.table_memory_budget):
 * which tables' indexes and filters stay in memory and which are paged
 * through the block cache (tablemem.c; the mechanism: sstable/paged.c). */
#ifndef KV_TABLEMEM_H
#define KV_TABLEMEM_H

#include <stddef.h>
#include <stdint.h>

struct kv_db;
struct kv_table;
struct kv_tablemem;

/* The chooser of a database with a budget (> 0): *out NULL with budget 0
 * (every table keeps its index and filter, as before). cache_shard: a
 * block cache shard's share (one paged index or filter takes at most a
 * quarter of it).
 * KV_ENOMEM. */
int kv_tablemem_new(size_t budget, size_t cache_shard, struct kv_tablemem **out);
void kv_tablemem_free(struct kv_tablemem *tm);

/* At kv_db_table_open, before the table is shared: makes its reader
 * pageable (kept until the next kv_tablemem_update). NULL tm: no-op. */
void kv_tablemem_table_opened(struct kv_tablemem *tm, struct kv_table *t);

/* Chooses anew over db's current tables, and frees what earlier choices
 * paged once no reader uses it. Called where the tables change (a flush
 * or compaction installed, the database opened, a read-only handle's
 * catch-up) and every 10 s (kv_tablemem_start), never on a get; takes
 * db->mu briefly, and does its reads of the file without it. Cannot fail:
 * a table whose index or filter cannot be read back stays paged (its
 * lookups meet the error), one that cannot be paged stays kept. */
void kv_tablemem_update(struct kv_db *db);

/* The thread that calls kv_tablemem_update every 10 s ("from time to
 * time": use changes without an install). Started once the database is
 * open (KV_ENOMEM, with the error text set: out of threads); stopped, and
 * joined, by kv_tablemem_stop, which must come before db's version goes
 * (kv_db_free); kv_tablemem_free stops it too. NULL tm: no-op. */
int kv_tablemem_start(struct kv_db *db);
void kv_tablemem_stop(struct kv_tablemem *tm);

/* kv_stats' fields: the paged reads so far. */
void kv_tablemem_reads(const struct kv_tablemem *tm, uint64_t *index_reads, uint64_t *filter_reads);

#endif /* KV_TABLEMEM_H */
