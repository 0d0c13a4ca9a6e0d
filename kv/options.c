/* options.c - kv_options: the defaults (kv_options_init), the checks a
 * database's options must pass, and an older caller's struct read into
 * the current one (kv_db_options, for kv_open and kv_repair). */
#define _DEFAULT_SOURCE /* sysconf's _SC_NPROCESSORS_ONLN */
#include "db.h"

#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "util/error.h"

#include <kv/range_filter.h>

/* max_background_jobs' default: the online CPUs, at most
 * KV_DEFAULT_BACKGROUND_JOBS_CAP (1 when unknown). */
static int kv_online_cpus_capped(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus < 1)
        return 1;
    return cpus < KV_DEFAULT_BACKGROUND_JOBS_CAP ? (int)cpus : KV_DEFAULT_BACKGROUND_JOBS_CAP;
}

void kv_options_init(kv_options *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->version = KV_OPTIONS_VERSION;
    o->create_if_missing = 1;
    o->error_if_exists = 0;
    o->sync = 0;
    o->write_buffer_size = (size_t)4 << 20;
    o->block_size = 2048;
    o->block_cache_size = (size_t)8 << 20;
    o->bloom_bits_per_key = 10;
    o->filter_layout = KV_BLOOM_BLOCKED;
    o->compression = KV_COMPRESSION_ZSTD;
    o->compression_level = -1;
    o->max_open_files = 1000;
    /* Chosen by measurement at 5M and 20M keys: doc/database.md, "Compaction". */
    o->l0_compaction_trigger = 8;
    o->l0_slowdown_trigger = 24;
    o->l0_stop_trigger = 40;
    o->target_file_size = (size_t)32 << 20;
    o->max_bytes_for_level_base = (size_t)32 << 20;
    o->memtable_filter = 1;
    o->filter_policy = KV_FILTER_UNIFORM;
    o->use_direct_reads = 0;
    o->comparator = NULL;
    o->filter_keyed_hash = 0;
    o->compression_dict_bytes = 0;
    o->compression_min_level = 2;
    o->compressed_block_size = 2048;
    o->delayed_write_rate = (size_t)16 << 20;
    o->background_nice = -1;
    o->min_blob_size = 512;
    o->blob_file_size = (size_t)256 << 20;
    o->blob_gc_threshold = 0.25;
    /* doc/database.md, "Idle compaction": why a second. */
    o->idle_compaction_ms = 1000;
    o->dynamic_level_bytes = 1;
    o->compaction_style = KV_COMPACTION_LEVELED;
    o->runs_per_level = 4;
    o->max_background_jobs = kv_online_cpus_capped();
    o->table_memory_budget = 0;
}

/* The scan filters' options (version 12): NULL when good. */
static const char *bad_scan_filters(const kv_options *o)
{
    if (o->prefix_len > 65536)
        return "prefix_len above 65536";
    if (o->prefix_len && o->bloom_bits_per_key == 0)
        return "prefix_len without filters (bloom_bits_per_key 0)";
    if (o->prefix_len && o->comparator)
        return "prefix_len with a comparator (the keys of a prefix need not be adjacent)";
    if (!(o->range_filter_bits == 0 || (o->range_filter_bits >= KV_RFILTER_MIN_BITS &&
                                        o->range_filter_bits <= KV_RFILTER_MAX_BITS)))
        return "range_filter_bits neither 0 nor 4 .. 64";
    if (o->range_filter_bits != 0 && o->comparator)
        return "range_filter_bits with a comparator (range filters follow bytewise order)";
    return NULL;
}

/* NULL when the options are good, else which one is bad and why. */
static const char *bad_option(const kv_options *o)
{
    if (o->version != KV_OPTIONS_VERSION)
        return "opts->version is not KV_OPTIONS_VERSION (call kv_options_init first)";
    if (o->write_buffer_size < ((size_t)64 << 10) || o->write_buffer_size > ((size_t)1 << 32))
        return "write_buffer_size outside 64 KiB .. 4 GiB";
    if (o->block_size < 64 || o->block_size > ((size_t)64 << 20))
        return "block_size outside 64 .. 64 MiB";
    if (!(o->bloom_bits_per_key >= 0) || o->bloom_bits_per_key > 1000)
        return "bloom_bits_per_key outside 0 .. 1000";
    if (o->filter_layout != KV_BLOOM_BLOCKED && o->filter_layout != KV_BLOOM_CLASSIC)
        return "filter_layout is neither KV_BLOOM_BLOCKED nor KV_BLOOM_CLASSIC";
    if (o->compression != KV_COMPRESSION_NONE && o->compression != KV_COMPRESSION_ZSTD)
        return "compression is neither KV_COMPRESSION_NONE nor KV_COMPRESSION_ZSTD";
    if (o->compression == KV_COMPRESSION_ZSTD &&
        (o->compression_level < -131072 || o->compression_level > 22))
        return "compression_level outside zstd's -131072 .. 22";
    if (o->compression_dict_bytes > ((size_t)1 << 20))
        return "compression_dict_bytes above 1 MiB";
    if (o->compression_min_level < 0 || o->compression_min_level > 7)
        return "compression_min_level outside 0 .. 7";
    if (o->compressed_block_size &&
        (o->compressed_block_size < 64 || o->compressed_block_size > ((size_t)64 << 20)))
        return "compressed_block_size neither 0 nor 64 .. 64 MiB";
    if (o->delayed_write_rate < 1024 || (uint64_t)o->delayed_write_rate > ((uint64_t)1 << 40))
        return "delayed_write_rate outside 1 KiB .. 1 TiB per second";
    if (o->background_nice < -1 || o->background_nice > 19)
        return "background_nice outside -1 .. 19";
    if (o->blob_file_size < ((size_t)64 << 10))
        return "blob_file_size below 64 KiB";
    if (!(o->blob_gc_threshold > 0) || o->blob_gc_threshold > 1)
        return "blob_gc_threshold outside (0, 1]";
    if (o->idle_compaction_ms < 0 || o->idle_compaction_ms > 86400000)
        return "idle_compaction_ms outside 0 .. 86400000";
    if (o->dynamic_level_bytes != 0 && o->dynamic_level_bytes != 1)
        return "dynamic_level_bytes is neither 0 nor 1";
    if (o->max_open_files < 16)
        return "max_open_files below 16";
    if (o->l0_compaction_trigger < 1)
        return "l0_compaction_trigger below 1";
    if (o->l0_slowdown_trigger < o->l0_compaction_trigger)
        return "l0_slowdown_trigger below l0_compaction_trigger";
    if (o->l0_stop_trigger < o->l0_slowdown_trigger)
        return "l0_stop_trigger below l0_slowdown_trigger";
    if (o->target_file_size < ((size_t)64 << 10))
        return "target_file_size below 64 KiB";
    if (o->max_bytes_for_level_base < o->target_file_size)
        return "max_bytes_for_level_base below target_file_size";
    if (o->memtable_filter != 0 && o->memtable_filter != 1)
        return "memtable_filter is neither 0 nor 1";
    if (o->filter_policy != KV_FILTER_UNIFORM && o->filter_policy != KV_FILTER_MONKEY)
        return "filter_policy is neither KV_FILTER_UNIFORM nor KV_FILTER_MONKEY";
    if (o->use_direct_reads != 0 && o->use_direct_reads != 1)
        return "use_direct_reads is neither 0 nor 1";
    if (o->filter_keyed_hash != 0 && o->filter_keyed_hash != 1)
        return "filter_keyed_hash is neither 0 nor 1";
    if (o->comparator && (!o->comparator->name || !o->comparator->compare))
        return "comparator without a name or a compare function";
    if (o->comparator && (!o->comparator->name[0] || strlen(o->comparator->name) > 255))
        return "comparator name not 1 .. 255 bytes long";
    if (o->merge_operator && (!o->merge_operator->name || !o->merge_operator->full_merge))
        return "merge_operator without a name or a full_merge function";
    if (o->merge_operator && (!o->merge_operator->name[0] || strlen(o->merge_operator->name) > 255))
        return "merge_operator name not 1 .. 255 bytes long";
    if (o->compaction_filter && !o->compaction_filter->filter)
        return "compaction_filter without a filter function";
    if (o->ttl_seconds > (uint64_t)1 << 40)
        return "ttl_seconds above 2^40";
    if (o->read_only != 0 && o->read_only != 1)
        return "read_only not 0 or 1";
    if (o->compaction_style != KV_COMPACTION_LEVELED &&
        o->compaction_style != KV_COMPACTION_LAZY_LEVELED)
        return "compaction_style neither KV_COMPACTION_LEVELED nor KV_COMPACTION_LAZY_LEVELED";
    if (o->runs_per_level < 2 || o->runs_per_level > 32)
        return "runs_per_level outside 2 .. 32";
    if (o->max_background_jobs < 1 || o->max_background_jobs > KV_MAX_BACKGROUND_JOBS)
        return "max_background_jobs outside 1 .. 64";
    return bad_scan_filters(o);
}

int kv_db_options(const char *path, const char *call, const kv_options *opts, kv_options *o)
{
    kv_options_init(o);
    if (opts && opts->version >= 1 && opts->version < KV_OPTIONS_VERSION) {
        /* A caller built before memtable_filter, filter_policy, comparator,
         * compression_dict_bytes, delayed_write_rate, min_blob_size,
         * idle_compaction_ms, dynamic_level_bytes, merge_operator, read_only,
         * prefix_len or compaction_style (kv.h,
         * KV_OPTIONS_VERSION): its struct ends
         * there; the fields after it keep their defaults. */
        static const size_t end[] = {0,
                                     offsetof(kv_options, memtable_filter),
                                     offsetof(kv_options, filter_policy),
                                     offsetof(kv_options, comparator),
                                     offsetof(kv_options, compression_dict_bytes),
                                     offsetof(kv_options, delayed_write_rate),
                                     offsetof(kv_options, min_blob_size),
                                     offsetof(kv_options, idle_compaction_ms),
                                     offsetof(kv_options, dynamic_level_bytes),
                                     offsetof(kv_options, merge_operator),
                                     offsetof(kv_options, read_only),
                                     offsetof(kv_options, prefix_len),
                                     offsetof(kv_options, compaction_style)};
        memcpy(o, opts, end[opts->version]);
        o->version = KV_OPTIONS_VERSION;
    } else if (opts)
        *o = *opts;
    if (!path || !*path)
        return kv_db_einval(NULL, call, "%s path", path ? "empty" : "NULL");
    const char *bad = bad_option(o);
    if (bad)
        return kv_error_set(KV_EINVAL, "%s: %s: bad option: %s", path, call, bad);
    return KV_OK;
}
