/* counters.h - the store's figures in one table: what kv_stats copies,
 * what kv_metrics_text prints (stats.c), and the per-thread event counters
 * behind them (struct kv_counters, db.h). A new figure is one row here
 * (and its field in kv.h's struct kv_stats or kv_table_stats).
 *
 * KV_METRICS lists kv_metrics_text's families in their order (the text is
 * parsed by tools and tests: keep the order, names and help texts). A row:
 *   TALLY(field, tally, name, type, div, help)  kv_stats' `field` is the sum
 *       of event counter `tally` (bumped with KV_COUNT);
 *   STAT(field, name, type, div, help)  kv_stats sets `field` from the
 *       handle (the version, the write controller, the file pool ...);
 *   TALLY_LEVELS / STAT_LEVELS(field, [tally,] first, name, type, help):
 *       the same for an array of one figure per level, from level `first`,
 *       printed as one series per level.
 * name, type and help are the Prometheus family's; div 0 prints the figure
 * as an integer, else as a real, divided by div (1e6: microseconds as
 * seconds).
 *
 * Internal to kv: not installed. */
#ifndef KV_COUNTERS_H
#define KV_COUNTERS_H

/* One row a figure, aligned by hand, to the next "clang-format on": */
/* clang-format off */
#define KV_METRICS(TALLY, STAT, TALLY_LEVELS, STAT_LEVELS)                                      \
    TALLY(gets, gets, "kv_gets_total", "counter", 0, "Gets.")                                   \
    TALLY(puts, puts, "kv_puts_total", "counter", 0, "Puts (a batch counts each put).")         \
    TALLY(deletes, deletes, "kv_deletes_total", "counter", 0,                                   \
          "Deletes (a batch counts each delete).")                                              \
    TALLY(writes, writes, "kv_writes_total", "counter", 0, "Write calls that committed.")       \
    TALLY(memtable_hits, memtable_hits, "kv_memtable_hits_total", "counter", 0,                 \
          "Gets answered by a memtable.")                                                       \
    TALLY(memtable_filter_negatives, memtable_filter_negatives,                                 \
          "kv_memtable_filter_negatives_total", "counter", 0,                                   \
          "Memtables whose filter answered absent to a get (no skiplist search).")              \
    TALLY(tables_probed, tables_probed, "kv_tables_probed_total", "counter", 0,                 \
          "Tables whose key range held a looked-up key.")                                       \
    TALLY(filter_negatives, filter_negatives, "kv_filter_negatives_total", "counter", 0,        \
          "Probes a filter answered absent (no I/O).")                                          \
    TALLY(filter_positives, filter_positives, "kv_filter_positives_total", "counter", 0,        \
          "Probes a filter answered maybe.")                                                    \
    TALLY(filter_false_positives, false_positives, "kv_filter_false_positives_total",           \
          "counter", 0, "Filter maybes whose table lacked the key.")                            \
    TALLY(data_block_reads, block_reads, "kv_data_block_reads_total", "counter", 0,             \
          "Data blocks read from disk by gets.")                                                \
    TALLY(data_block_read_bytes, block_read_bytes, "kv_data_block_read_bytes_total",            \
          "counter", 0, "Bytes of those reads.")                                                \
    TALLY(device_reads, device_reads, "kv_device_reads_total", "counter", 0,                    \
          "Of those, reads that went to the device (use_direct_reads: O_DIRECT).")              \
    TALLY(device_read_bytes, device_read_bytes, "kv_device_read_bytes_total", "counter", 0,     \
          "Bytes those device reads asked for (aligned to 4096 bytes).")                        \
    STAT(direct_reads, "kv_direct_reads", "gauge", 1,                                           \
         "1 when table data reads bypass the page cache (O_DIRECT), else 0.")                   \
    STAT(direct_reads_refused, "kv_direct_reads_refused_total", "counter", 0,                   \
         "Tables opened through the page cache because the file system refused O_DIRECT.")      \
    TALLY(block_cache_hits, cache_hits, "kv_block_cache_hits_total", "counter", 0,              \
          "Data blocks gets found in the block cache.")                                         \
    TALLY(block_cache_misses, cache_misses, "kv_block_cache_misses_total", "counter", 0,        \
          "Data blocks gets did not find in the cache.")                                        \
    TALLY(flushes, flushes, "kv_flushes_total", "counter", 0, "Memtables flushed to tables.")   \
    TALLY(flush_bytes, flush_bytes, "kv_flush_written_bytes_total", "counter", 0,               \
          "Bytes of tables written by flushes.")                                                \
    TALLY(wal_bytes, wal_bytes, "kv_wal_written_bytes_total", "counter", 0,                     \
          "Bytes appended to the write-ahead log.")                                             \
    TALLY(wal_syncs, wal_syncs, "kv_wal_syncs_total", "counter", 0,                             \
          "fdatasync calls on the write-ahead log.")                                            \
    TALLY(write_groups, write_groups, "kv_write_groups_total", "counter", 0,                    \
          "Log appends (group commits).")                                                       \
    TALLY(stalls, stalls, "kv_stalls_total", "counter", 0, "Writes that waited for a flush.")   \
    TALLY(stall_micros, stall_micros, "kv_stall_seconds_total", "counter", 1e6,                 \
          "Time writes waited for a flush.")                                                    \
    TALLY(slowdowns, slowdowns, "kv_slowdowns_total", "counter", 0,                             \
          "Writes the write controller delayed.")                                               \
    TALLY(slowdown_micros, slowdown_micros, "kv_slowdown_seconds_total", "counter", 1e6,        \
          "Time writes were delayed by the write controller.")                                  \
    STAT(write_delay_max_micros, "kv_write_delay_max_seconds", "gauge", 1e6,                    \
         "Longest single delay the write controller asked for.")                                \
    STAT(delayed_write_rate, "kv_delayed_write_rate_bytes", "gauge", 1,                         \
         "Bytes per second the write controller lets through (0: not delaying).")               \
    STAT(pending_compaction_bytes, "kv_pending_compaction_bytes", "gauge", 1,                   \
         "Estimated bytes compaction must rewrite to bring every level within its target.")     \
    STAT(base_level, "kv_base_level", "gauge", 1,                                               \
         "The level level 0 merges into (dynamic_level_bytes: the shallowest the size calls "   \
         "for).")                                                                               \
    TALLY(compactions, compactions, "kv_compactions_total", "counter", 0, "Compactions.")       \
    TALLY(idle_compactions, idle_compactions, "kv_idle_compactions_total", "counter", 0,        \
          "Of those, level 0 merged down after idle_compaction_ms without a write.")            \
    STAT(compaction_pending, "kv_compaction_pending", "gauge", 1,                               \
         "1 while a flush or compaction waits for the background thread, or level 0 "          \
         "waits for an idle compaction.")                                                       \
    STAT(compaction_running, "kv_compaction_running", "gauge", 1,                               \
         "1 while the background thread flushes or compacts.")                                  \
    TALLY(compaction_read_bytes, compaction_read_bytes, "kv_compaction_read_bytes_total",       \
          "counter", 0, "Bytes of tables compactions read.")                                    \
    TALLY(compaction_written_bytes, compaction_written_bytes,                                   \
          "kv_compaction_written_bytes_total", "counter", 0,                                    \
          "Bytes of tables compactions wrote.")                                                 \
    TALLY(user_bytes, user_bytes, "kv_user_written_bytes_total", "counter", 0,                  \
          "Bytes of keys and values written by callers.")                                       \
    STAT(write_amplification, "kv_write_amplification_ratio", "gauge", 1,                       \
         "(log + flush + compaction + blob bytes written) / user bytes written.")               \
    STAT(blob_files, "kv_blob_files", "gauge", 1, "Live blob files.")                           \
    STAT(blob_bytes, "kv_blob_size_bytes", "gauge", 1, "Bytes of live blob files.")             \
    STAT(blob_garbage_bytes, "kv_blob_garbage_bytes", "gauge", 1,                               \
         "Bytes of blob records no table refers to any more.")                                  \
    TALLY(blob_reads, blob_reads, "kv_blob_reads_total", "counter", 0,                          \
          "Values read from blob files.")                                                       \
    TALLY(blob_read_bytes, blob_read_bytes, "kv_blob_read_bytes_total", "counter", 0,           \
          "Bytes of those reads.")                                                              \
    TALLY(blob_written_bytes, blob_written_bytes, "kv_blob_written_bytes_total", "counter", 0,  \
          "Bytes written to blob files by flushes and compactions.")                            \
    TALLY(blob_relocated_bytes, blob_relocated_bytes, "kv_blob_relocated_bytes_total",          \
          "counter", 0,                                                                         \
          "Of those, values compactions moved out of files past the GC threshold.")             \
    STAT_LEVELS(level_tables, 0, "kv_level_tables", "gauge", "Tables per level.")               \
    STAT_LEVELS(level_bytes, 0, "kv_level_size_bytes", "gauge",                                 \
                "Bytes of table files per level.")                                              \
    STAT_LEVELS(level_target_bytes, 1, "kv_level_target_bytes", "gauge",                       \
                "Bytes a level may hold before it is compacted.")                               \
    TALLY_LEVELS(level_written_bytes, level_written, 0, "kv_level_written_bytes_total",         \
                 "counter",                                                                     \
                 "Table bytes written into each level (level 0 by flushes, the others by "      \
                 "compactions).")                                                               \
    STAT(recovered_records, "kv_recovered_records_total", "counter", 0,                         \
         "Log records replayed at open.")                                                       \
    STAT(recovery_dropped_bytes, "kv_recovery_dropped_bytes_total", "counter", 0,               \
         "Log bytes lost to a damaged tail at open.")                                           \
    STAT(last_sequence, "kv_last_sequence", "gauge", 1, "Sequence number of the newest write.") \
    STAT(memtable_bytes, "kv_memtable_bytes", "gauge", 1, "Memory of the memtables.")           \
    STAT(tables, "kv_tables", "gauge", 1, "Live tables.")                                       \
    STAT(table_bytes, "kv_table_size_bytes_sum", "gauge", 1,                                    \
         "Bytes of the live tables' files.")                                                    \
    STAT(filter_bytes, "kv_filter_size_bytes", "gauge", 1,                                      \
         "Memory of the live tables' filters.")                                                 \
    STAT(index_bytes, "kv_index_size_bytes", "gauge", 1,                                        \
         "Memory of the live tables' decoded indexes.")                                         \
    STAT(filter_keys, "kv_filter_keys", "gauge", 1, "Keys in the live tables' filters.")        \
    STAT(table_files_open, "kv_table_files_open", "gauge", 1,                                   \
         "Table files open now (descriptor and mapping; max_open_files budgets them).")         \
    STAT(table_file_reopens, "kv_table_file_reopens_total", "counter", 0,                       \
         "Table files opened again after being closed for room.")                               \
    STAT(table_file_evictions, "kv_table_file_evictions_total", "counter", 0,                   \
         "Table files closed to make room for another.")                                        \
    TALLY(range_deletes, range_deletes, "kv_range_deletes_total", "counter", 0,                 \
          "Range deletes written (a batch counts each).")                                       \
    TALLY(merges, merges, "kv_merges_total", "counter", 0,                                      \
          "Merge operands written (a batch counts each).")                                      \
    STAT(range_tombstones_live, "kv_range_tombstones", "gauge", 1,                              \
         "Range tombstone fragments in the memtables and live tables.")                         \
    STAT(range_tombstone_bytes, "kv_range_tombstone_bytes", "gauge", 1,                         \
         "Memory of those fragments.")                                                          \
    TALLY(merge_operands_read, merge_read, "kv_merge_operands_read_total", "counter", 0,        \
          "Merge operands reads passed to the merge operator.")                                 \
    TALLY(merge_operands_compacted, merge_compacted, "kv_merge_operands_compacted_total",       \
          "counter", 0, "Merge operands flushes and compactions merged.")                       \
    TALLY(expired_reads, expired_read, "kv_expired_reads_total", "counter", 0,                  \
          "Entries reads passed over as expired (ttl_seconds).")                                \
    TALLY(expired_dropped, expired_dropped, "kv_expired_dropped_total", "counter", 0,           \
          "Expired entries flushes and compactions dropped.")                                   \
    TALLY(range_deleted_dropped, rdel_dropped, "kv_range_deleted_dropped_total", "counter", 0,  \
          "Entries flushes and compactions dropped under a range tombstone.")                   \
    TALLY(filter_kept, filter_kept, "kv_compaction_filter_kept_total", "counter", 0,            \
          "Compaction filter verdicts: keep.")                                                  \
    TALLY(filter_removed, filter_removed, "kv_compaction_filter_removed_total", "counter", 0,   \
          "Compaction filter verdicts: remove.")                                                \
    TALLY(filter_changed, filter_changed, "kv_compaction_filter_changed_total", "counter", 0,   \
          "Compaction filter verdicts: change.")                                                \
    TALLY(checkpoints, checkpoints, "kv_checkpoints_total", "counter", 0,                       \
          "Checkpoints taken (kv_checkpoint).")                                                 \
    TALLY(ingested_tables, ingested_tables, "kv_ingested_tables_total", "counter", 0,           \
          "Tables added by kv_ingest.")                                                         \
    TALLY(ingested_bytes, ingested_bytes, "kv_ingested_bytes_total", "counter", 0,              \
          "Bytes of the tables kv_ingest added.")                                               \
    TALLY(catch_ups, catch_ups, "kv_catch_ups_total", "counter", 0,                             \
          "kv_catch_up calls that succeeded.")                                                  \
    STAT(background_error, "kv_background_error", "gauge", 1,                                   \
         "The error that stops writes (a negative KV_E code), 0 when none.")                    \
    TALLY(background_errors, background_errors, "kv_background_errors_total", "counter", 0,     \
          "Times the handle stopped on an error (a failed log, flush or compaction).")          \
    TALLY(resumes, resumes, "kv_resumes_total", "counter", 0,                                   \
          "Times it went on after a full disk (retried by itself, or kv_resume).")              \
    TALLY(range_queries, range_queries, "kv_range_queries_total", "counter", 0,                 \
          "Iterator positionings with both bounds or a filter prefix (range queries).")         \
    TALLY(range_tables_checked, range_checked, "kv_range_tables_checked_total", "counter", 0,   \
          "Tables whose key range met a range query (each asked its scan filters).")            \
    TALLY(prefix_filter_skips, prefix_skips, "kv_prefix_filter_skips_total", "counter", 0,      \
          "Tables a range query skipped: the prefix filter said the prefix is absent.")         \
    TALLY(prefix_filter_false_positives, prefix_fp, "kv_prefix_filter_false_positives_total",   \
          "counter", 0, "Prefix filter maybes whose table held no key in the bounds.")          \
    TALLY(range_filter_skips, range_skips, "kv_range_filter_skips_total", "counter", 0,         \
          "Tables a range query skipped: the range filter said the bounds hold none.")          \
    TALLY(range_filter_false_positives, range_fp, "kv_range_filter_false_positives_total",      \
          "counter", 0, "Range filter maybes whose table held no key in the bounds.")           \
    TALLY(range_tables_read, range_read, "kv_range_tables_read_total", "counter", 0,            \
          "Tables whose index or data block a range query touched.")                            \
    STAT(range_filter_bytes, "kv_range_filter_size_bytes", "gauge", 1,                          \
         "Memory of the live tables' range filters.")                                            \
    TALLY(memtable_range_skips, mem_range_skips, "kv_memtable_range_skips_total", "counter", 0, \
          "Memtables a range query did not search: their occupancy gate said none in range.")

/* kv_metrics_text's per-table families, one series per live table, after
 * KV_METRICS: ROW(field of kv_table_stats, name, type, help), printed as
 * a real. */
#define KV_TABLE_METRICS(ROW)                                                                   \
    ROW(entries, "kv_table_entries", "gauge", "Entries in the table.")                          \
    ROW(file_size, "kv_table_file_size_bytes", "gauge", "Size of the table's file.")            \
    ROW(bits_per_key, "kv_table_filter_bits_per_key", "gauge", "Filter bits per filter key.")   \
    ROW(k, "kv_table_filter_k", "gauge", "Probes per filter key.")                              \
    ROW(filter_bytes, "kv_table_filter_size_bytes", "gauge", "Memory of the table's filter.")   \
    ROW(probes, "kv_table_probes_total", "counter", "Gets that probed the table.")              \
    ROW(filter_negatives, "kv_table_filter_negatives_total", "counter",                         \
        "Probes its filter answered absent.")                                                   \
    ROW(filter_false_positives, "kv_table_filter_false_positives_total", "counter",             \
        "Its filter's false positives.")                                                        \
    ROW(measured_fpr, "kv_table_filter_measured_fpr_ratio", "gauge",                            \
        "False positives / (negatives + false positives).")                                     \
    ROW(expected_fpr, "kv_table_filter_expected_fpr_ratio", "gauge",                            \
        "FPR the filter's m, k and n predict.")                                                 \
    ROW(range_filter_bytes, "kv_table_range_filter_size_bytes", "gauge",                        \
        "Memory of the table's range filter.")                                                  \
    ROW(range_checks, "kv_table_range_checks_total", "counter",                                 \
        "Range queries that asked its range filter.")                                           \
    ROW(range_negatives, "kv_table_range_negatives_total", "counter",                           \
        "Range queries its range filter answered none (table skipped).")                        \
    ROW(range_false_positives, "kv_table_range_false_positives_total", "counter",               \
        "Range filter maybes the table held no key for.")                                       \
    ROW(range_measured_fpr, "kv_table_range_measured_fpr_ratio", "gauge",                       \
        "Range false positives / (negatives + false positives).")                               \
    ROW(range_expected_fpr, "kv_table_range_expected_fpr_ratio", "gauge",                       \
        "Mean FPR the range filter predicts for the widths of those queries.")
/* clang-format on */

/* The event counters, for struct kv_counters (db.h): one _Atomic uint64_t
 * per TALLY row, an array of KV_LEVELS per TALLY_LEVELS row. */
#define KV_COUNTER_FIELD(field, tally, name, type, div, help) _Atomic uint64_t tally;
#define KV_COUNTER_LEVELS(field, tally, first, name, type, help) _Atomic uint64_t tally[KV_LEVELS];
#define KV_COUNTER_NONE(...)

#endif /* KV_COUNTERS_H */
