/* flags.c - kvbench's command line flags: one table (flags[]) gives each
 * flag its name, the type of its value, the field of struct options it
 * sets, its range or its words, what it wants (for error messages) and its
 * --help text; set_flag parses a flag by that table and usage() prints
 * --help from it. parse_args (main.c) then checks the flags against each
 * other. */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* The parsers return NULL when the value is good, else what is wrong with
 * it (the caller adds what it wants). */

static const char *parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    if (!*s)
        return "empty";
    char *end;
    errno = 0;
    double d = strtod(s, &end); /* 1e6 as well as 1000000 */
    if (end == s || *end || isnan(d))
        return "not a number";
    if (d != floor(d))
        return "not an integer";
    if (errno == ERANGE || !(d >= (double)lo && d <= (double)hi))
        return "out of range";
    *out = (uint64_t)d;
    return NULL;
}

static const char *parse_size(const char *s, uint64_t lo, uint64_t hi, size_t *out)
{
    uint64_t u;
    const char *why = parse_u64(s, lo, hi, &u);
    if (!why)
        *out = (size_t)u;
    return why;
}

static const char *parse_double(const char *s, double lo, double hi, double *out)
{
    if (!*s)
        return "empty";
    char *end;
    errno = 0;
    double d = strtod(s, &end);
    if (end == s || *end || isnan(d))
        return "not a number";
    if (errno == ERANGE || !(d >= lo && d <= hi))
        return "out of range";
    *out = d;
    return NULL;
}

/* A flag given alone (val NULL) is 1. */
static const char *parse_bool(const char *s, int *out)
{
    if (!s || !strcmp(s, "1") || !strcmp(s, "true"))
        *out = 1;
    else if (!strcmp(s, "0") || !strcmp(s, "false"))
        *out = 0;
    else
        return "not a boolean";
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static const char *parse_sweep(const char *s, struct options *o)
{
    if (!s) {
        o->nsweep = 0;
        for (int b = 0; b <= 20; b += 2)
            o->sweep[o->nsweep++] = b;
        return NULL;
    }
    o->sweep_range = 0;
    if (!strcmp(s, "range_filter_bits")) { /* 0 and 4, 6, ..., 24 */
        o->sweep_range = 1;
        o->nsweep = 0;
        o->sweep[o->nsweep++] = 0;
        for (int b = 4; b <= 24; b += 2)
            o->sweep[o->nsweep++] = b;
        return NULL;
    }
    if (!strncmp(s, "range_filter_bits=", 18)) {
        o->sweep_range = 1;
        s += 18;
    } else if (strncmp(s, "bloom_bits=", 11) != 0)
        return "does not start with bloom_bits= or range_filter_bits=";
    else
        s += 11;
    o->nsweep = 0;
    while (*s) {
        char *end;
        double d = strtod(s, &end);
        if (end == s || (*end && *end != ',') || isnan(d))
            return "a setting is not a number";
        if (!(d >= 0 && d <= (o->sweep_range ? 64 : 1000)) || (o->sweep_range && d > 0 && d < 4))
            return "a setting is out of range";
        if (o->nsweep == MAX_SWEEP)
            return "too many settings";
        o->sweep[o->nsweep++] = d;
        s = *end ? end + 1 : end;
    }
    if (!o->nsweep)
        return "no settings";
    qsort(o->sweep, o->nsweep, sizeof o->sweep[0], cmp_double);
    unsigned m = 1;
    for (unsigned i = 1; i < o->nsweep; i++)
        if (o->sweep[i] != o->sweep[m - 1])
            o->sweep[m++] = o->sweep[i];
    o->nsweep = m;
    return NULL;
}

/* One database size of --scaling: an integer, or a number with a suffix
 * K, M or G (10^3, 10^6, 10^9): 50000, 50K, 2.5M, 1e6. */
static const char *parse_count(const char *s, size_t len, uint64_t *out)
{
    char buf[64];
    if (!len)
        return "an empty size";
    if (len >= sizeof buf)
        return "a size is not a number";
    memcpy(buf, s, len);
    buf[len] = 0;
    double mult = 1;
    char last = buf[len - 1];
    if (strchr("kKmMgG", last)) {
        mult = last == 'k' || last == 'K' ? 1e3 : last == 'm' || last == 'M' ? 1e6 : 1e9;
        buf[--len] = 0;
    }
    char *end;
    double d = strtod(buf, &end);
    if (!len || end != buf + len || isnan(d))
        return "a size is not a number";
    d *= mult;
    if (d != floor(d))
        return "a size is not a whole number of keys";
    if (!(d >= 1 && d <= 1e12))
        return "a size is out of range";
    *out = (uint64_t)d;
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static const char *parse_scaling(const char *s, struct options *o)
{
    o->nscaling = 0;
    for (const char *p = s;; p++) {
        size_t len = strcspn(p, ",");
        if (o->nscaling == MAX_SCALING)
            return "too many sizes";
        const char *why = parse_count(p, len, &o->scaling[o->nscaling++]);
        if (why)
            return why;
        p += len;
        if (!*p)
            break;
    }
    qsort(o->scaling, o->nscaling, sizeof o->scaling[0], cmp_u64);
    unsigned m = 1;
    for (unsigned i = 1; i < o->nscaling; i++)
        if (o->scaling[i] != o->scaling[m - 1])
            o->scaling[m++] = o->scaling[i];
    o->nscaling = m;
    return NULL;
}

const char *const engine_names[MAX_ENGINES] = {"kv", "leveldb", "rocksdb", "lmdb"};

static const char *parse_engines(const char *s, struct options *o)
{
    o->nengines = 0;
    for (const char *p = s;; p++) {
        size_t len = strcspn(p, ",");
        const char *name = NULL;
        for (unsigned i = 0; i < MAX_ENGINES; i++)
            if (strlen(engine_names[i]) == len && !strncmp(p, engine_names[i], len))
                name = engine_names[i];
        if (!name)
            return len ? "unknown engine" : "an empty name";
        for (unsigned i = 0; i < o->nengines; i++)
            if (o->engines[i] == name)
                return "an engine named twice";
        o->engines[o->nengines++] = name;
        p += len;
        if (!*p)
            break;
    }
    return NULL;
}

static int check_benchmarks(const char *list)
{
    int any = 0;
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        if (len && !find_bench(p, len)) {
            fprintf(stderr, "kvbench: unknown benchmark \"%.*s\" (kvbench --help lists them)\n",
                    (int)len, p);
            return -1;
        }
        any |= len > 0;
        p += len + (p[len] == ',');
    }
    if (!any)
        fprintf(stderr, "kvbench: --benchmarks is empty\n");
    return any ? 0 : -1;
}

/* ---- the table ------------------------------------------------------------------------- */

/* What a flag's value is, and how it is parsed into its field. */
enum flag_type {
    F_BOOL,   /* int: 0, 1, true, false; the flag alone is 1 (parse_bool) */
    F_U64,    /* uint64_t: an integer in [lo, hi] (parse_u64: 1e6 as well as 1000000) */
    F_SIZE,   /* size_t: the same (parse_size) */
    F_INT,    /* int: the same */
    F_UINT,   /* unsigned: the same */
    F_SIGNED, /* int in [lo, hi], lo < 0: '-' then an integer up to -lo, or one up to hi */
    F_DOUBLE, /* double: a number in [lo, hi] (parse_double) */
    F_PATH,   /* const char *: the value itself, not empty */
    F_WORD,   /* int: the value of one of words; else `unknown` */
    F_NAME,   /* const char *: the value itself, which must be one of words; else `unknown` */
    F_CUSTOM, /* parse() sets what it sets */
};

/* A value taken by name; for F_U64, F_SIZE and F_INT, before any number. */
struct word {
    const char *word;
    long long value; /* stored as the field's type: -1 in a size_t is SIZE_MAX */
};

struct flag {
    const char *name; /* --name */
    enum flag_type type;
    size_t off;               /* offsetof(struct options, the field it sets) */
    double lo, hi;            /* the range of a number */
    const struct word *words; /* NULL-terminated */
    const char *unknown;      /* F_WORD, F_NAME: why a value that is none of words is bad */
    int bare;                 /* F_CUSTOM: may be given without a value (val NULL) */
    /* F_CUSTOM: parses val (NULL when bare) into o; NULL, or what is wrong
     * (SAID: a message is printed already). */
    const char *(*parse)(const char *val, struct options *o);
    /* After a good value: NULL, or why the value is still refused. */
    const char *(*check)(const struct options *o);
    const char *want; /* what the flag takes, for error messages */
    const char *syn;  /* --help: the flag as it is written */
    const char *help; /* --help: what it does; lines after the first are indented */
};

#define OFF(field) offsetof(struct options, field)
#define BOOL_WANT "0, 1, true or false; alone: 1"

/* A custom parser's "the message is printed already". */
static const char SAID[] = "";

static const char *parse_benchmarks(const char *val, struct options *o)
{
    if (check_benchmarks(val))
        return SAID; /* it said which */
    o->benchmarks = val;
    return NULL;
}

static const char *check_compressed_block_size(const struct options *o)
{
    return o->compressed_block_size && o->compressed_block_size < 64 ? "below 64" : NULL;
}

static const char *check_blob_gc_threshold(const struct options *o)
{
    return o->blob_gc_threshold == 0 ? "not above 0" : NULL;
}

static const char *check_range_filter_bits(const struct options *o)
{
    return o->range_filter_bits > 0 && o->range_filter_bits < 4 ? "between 0 and 4" : NULL;
}

static const struct word reads_words[] = {{"-1", 0}, {NULL, 0}};
static const struct word nice_words[] = {{"-1", -1}, {NULL, 0}};
/* KV_BLOB_NEVER is (size_t)-1. */
static const struct word never_words[] = {{"never", -1}, {"-1", -1}, {NULL, 0}};
static const struct word layout_words[] = {{"blocked", KV_BLOOM_BLOCKED},
                                           {"classic", KV_BLOOM_CLASSIC},
                                           {NULL, 0}};
static const struct word policy_words[] = {{"uniform", KV_FILTER_UNIFORM},
                                           {"monkey", KV_FILTER_MONKEY},
                                           {NULL, 0}};
static const struct word compression_words[] = {{"none", KV_COMPRESSION_NONE},
                                                {"zstd", KV_COMPRESSION_ZSTD},
                                                {"snappy", KVB_COMPRESSION_SNAPPY},
                                                {NULL, 0}};
static const struct word style_words[] = {{"leveled", KV_COMPACTION_LEVELED},
                                          {"lazy_leveled", KV_COMPACTION_LAZY_LEVELED},
                                          {NULL, 0}};

/* --memory_limit: bytes as the other size flags take them (1e9 as well as
 * 1000000000), or with a suffix K, M, G or T, powers of 1024 (512M, 1G,
 * 1.5G), since memory is counted in those; 0: no limit. */
static const char *parse_memory_limit(const char *val, struct options *o)
{
    char buf[64];
    size_t len = strlen(val);
    if (!len || len >= sizeof buf)
        return len ? "not a size" : "empty";
    memcpy(buf, val, len + 1);
    double mult = 1;
    const char *suffix = strchr("kKmMgGtT", buf[len - 1]);
    if (suffix && buf[len - 1]) {
        int step = (int)(suffix - "kKmMgGtT") / 2 + 1;
        mult = ldexp(1, 10 * step);
        buf[--len] = 0;
    }
    char *end;
    errno = 0;
    double d = strtod(buf, &end);
    if (!len || end != buf + len || isnan(d))
        return "not a size";
    d = floor(d * mult);
    if (errno == ERANGE || !(d == 0 || (d >= 0x1p20 && d <= 0x1p50)))
        return "out of range";
    o->memory_limit = (uint64_t)d;
    return NULL;
}

static const struct word engine_words[] = {{"kv", 0},
                                           {"lmdb", 0},
                                           {"leveldb", 0},
                                           {"rocksdb", 0},
                                           {NULL, 0}};

/* Every flag, in the order --help lists them. */
static const struct flag flags[] = {
    {.name = "benchmarks",
     .type = F_CUSTOM,
     .parse = parse_benchmarks,
     .want = "a comma list of the benchmarks kvbench --help lists",
     .syn = "--benchmarks=LIST",
     .help = "comma list (default " DEFAULT_BENCHMARKS "):"},
    {.name = "num",
     .type = F_U64,
     .off = OFF(num),
     .lo = 1,
     .hi = 1e15,
     .want = "an integer from 1 to 1e15",
     .syn = "--num=N",
     .help = "keys in the database (1000000)"},
    {.name = "reads",
     .type = F_U64,
     .off = OFF(reads),
     .lo = 1,
     .hi = 1e15,
     .words = reads_words,
     .want = "an integer from 1 to 1e15, or -1 for num",
     .syn = "--reads=N",
     .help = "ops of each read benchmark (default: num); a multiread\n"
             "benchmark's ops are keys"},
    {.name = "batch_size",
     .type = F_SIZE,
     .off = OFF(batch_size),
     .lo = 1,
     .hi = 65536,
     .want = "an integer from 1 to 65536",
     .syn = "--batch_size=N",
     .help = "keys per multi-get of multireadrandom and multireadmissing\n"
             "(32); kv, RocksDB: one multi-get call (kv_multi_get,\n"
             "rocksdb_batched_multi_get_cf); LevelDB, LMDB have none:\n"
             "a get per key. Latency per key: batch time / batch size"},
    {.name = "range_size",
     .type = F_U64,
     .off = OFF(range_size),
     .lo = 1,
     .hi = 1e15,
     .want = "an integer from 1 to 1e15",
     .syn = "--range_size=N",
     .help = "keys of the key space per range of deleterange (100)"},
    {.name = "deletes",
     .type = F_U64,
     .off = OFF(deletes),
     .lo = 1,
     .hi = 1e9,
     .words = reads_words,
     .want = "an integer from 1 to 1e9, or -1 for the default",
     .syn = "--deletes=N",
     .help = "ranges deleterange deletes, one range delete each (default:\n"
             "num / (5 * range_size), at least 1: a fifth of the keys)"},
    {.name = "range_width",
     .type = F_U64,
     .off = OFF(range_width),
     .lo = 1,
     .hi = 1e12,
     .want = "an integer from 1 to 1e12",
     .syn = "--range_width=N",
     .help = "key indexes per range of seekempty and seekshort (16):\n"
             "seekshort's ranges hold 1..N keys"},
    {.name = "key_stride",
     .type = F_U64,
     .off = OFF(key_stride),
     .lo = 1,
     .hi = 1e12,
     .want = "an integer from 1 to 1e12",
     .syn = "--key_stride=S",
     .help = "the fills write key indexes i*S for i in [0, num) (1:\n"
             "every index); the S-1 indexes between two keys are\n"
             "empty: seekempty needs S >= range_width + 2"},
    {.name = "prefix_len",
     .type = F_SIZE,
     .off = OFF(prefix_len),
     .lo = 0,
     .hi = MAX_KEY_SIZE,
     .want = "an integer from 0 to 1024",
     .syn = "--prefix_len=N",
     .help = "kv: kv_options.prefix_len (needs --bloom_bits > 0);\n"
             "RocksDB: a fixed-length prefix extractor of N bytes,\n"
             "seeks within one prefix use its prefix Bloom filter\n"
             "(0: off)"},
    {.name = "range_filter_bits",
     .type = F_DOUBLE,
     .off = OFF(range_filter_bits),
     .lo = 0,
     .hi = 64,
     .check = check_range_filter_bits,
     .want = "0, or a number from 4 to 64",
     .syn = "--range_filter_bits=B",
     .help = "kv: kv_options.range_filter_bits, range filter bits per\n"
             "key of each new table (0: off)"},
    {.name = "key_size",
     .type = F_SIZE,
     .off = OFF(key_size),
     .lo = 1,
     .hi = MAX_KEY_SIZE,
     .want = "an integer from 1 to 1024",
     .syn = "--key_size=N",
     .help = "bytes per key, decimal digits (16)"},
    {.name = "value_size",
     .type = F_SIZE,
     .off = OFF(value_size),
     .lo = 0,
     .hi = KV_MAX_VALUE_SIZE,
     .want = "an integer from 0 to 16777216",
     .syn = "--value_size=N",
     .help = "bytes per value (100), up to 16777216"},
    {.name = "checkpoint_at",
     .type = F_DOUBLE,
     .off = OFF(checkpoint_at),
     .lo = 0.001,
     .hi = 0.999,
     .want = "a fraction from 0.001 to 0.999",
     .syn = "--checkpoint_at=F",
     .help = "kv: once a fraction F of the first worker benchmark's ops is\n"
             "done, a side thread takes one checkpoint (kv_checkpoint) into\n"
             "--checkpoint_dir while the ops go on; prints its milliseconds,\n"
             "files linked, bytes copied, and the p99.9 of the ops that ran\n"
             "during it against the whole benchmark's. A full database under\n"
             "a writer: fill first, then --use_existing_db --benchmarks=overwrite"},
    {.name = "checkpoint_dir",
     .type = F_PATH,
     .off = OFF(checkpoint_dir),
     .want = "a directory that does not exist (its parent must)",
     .syn = "--checkpoint_dir=D",
     .help = "where --checkpoint_at's checkpoint goes (kept after the run)"},
    {.name = "bloom_bits",
     .type = F_DOUBLE,
     .off = OFF(bloom_bits),
     .lo = 0,
     .hi = 1000,
     .want = "a number from 0 to 1000",
     .syn = "--bloom_bits=B",
     .help = "filter bits per key; 0 disables filters (10)"},
    {.name = "filter_layout",
     .type = F_WORD,
     .off = OFF(filter_layout),
     .words = layout_words,
     .unknown = "unknown layout",
     .want = "blocked or classic",
     .syn = "--filter_layout=L",
     .help = "blocked | classic (blocked)"},
    {.name = "filter_policy",
     .type = F_WORD,
     .off = OFF(filter_policy),
     .words = policy_words,
     .unknown = "unknown policy",
     .want = "uniform or monkey",
     .syn = "--filter_policy=P",
     .help = "kv: uniform | monkey (uniform): every table --bloom_bits,\n"
             "or each level the bits that minimise false positives\n"
             "per missing get at the same memory (Monkey)"},
    {.name = "cache_size",
     .type = F_SIZE,
     .off = OFF(cache_size),
     .lo = 0,
     .hi = 0x1p46,
     .want = "a size in bytes, up to 2^46",
     .syn = "--cache_size=BYTES",
     .help = "block cache; 0 disables it (8388608)"},
    {.name = "write_buffer_size",
     .type = F_SIZE,
     .off = OFF(write_buffer_size),
     .lo = 65536,
     .hi = 0x1p40,
     .want = "a size in bytes from 65536 to 2^40",
     .syn = "--write_buffer_size=BYTES",
     .help = "memtable size (4194304)"},
    {.name = "memtable_filter",
     .type = F_BOOL,
     .off = OFF(memtable_filter),
     .want = BOOL_WANT,
     .syn = "--memtable_filter[=0|1]",
     .help = "kv: a filter beside each memtable (1)"},
    {.name = "filter_keyed_hash",
     .type = F_BOOL,
     .off = OFF(filter_keyed_hash),
     .want = BOOL_WANT,
     .syn = "--filter_keyed_hash[=0|1]",
     .help = "kv: filters hash keys with SipHash-2-4 under the\n"
             "database's secret instead of seeded XXH3 (0)"},
    {.name = "use_direct_reads",
     .type = F_BOOL,
     .off = OFF(use_direct_reads),
     .want = BOOL_WANT,
     .syn = "--use_direct_reads[=0|1]",
     .help = "kv, RocksDB: read table data blocks with O_DIRECT, past\n"
             "the page cache (0): a block the block cache misses is a device\n"
             "read (device_reads_per_get); with --cache_size=0 every\n"
             "one. Filters and indexes stay in memory. Where the file\n"
             "system refuses O_DIRECT (tmpfs), a warning, and reads go\n"
             "through the page cache"},
    {.name = "table_memory_budget",
     .type = F_SIZE,
     .off = OFF(table_memory_budget),
     .lo = 0,
     .hi = 0x1p46,
     .want = "a size in bytes, up to 2^46",
     .syn = "--table_memory_budget=BYTES",
     .help = "kv: bytes of table indexes and filters kept in memory;\n"
             "past it the least used tables' indexes, then the deepest\n"
             "level's filters, are read through the block cache (0: all\n"
             "kept). Paged reads count in device_reads_per_get with\n"
             "--use_direct_reads"},
    {.name = "block_size",
     .type = F_SIZE,
     .off = OFF(block_size),
     .lo = 64,
     .hi = 64 << 20,
     .want = "a size in bytes from 64 to 67108864",
     .syn = "--block_size=BYTES",
     .help = "data block size, every engine (kv's default, 2048)"},
    {.name = "compression_type",
     .type = F_WORD,
     .off = OFF(compression),
     .words = compression_words,
     .unknown = "unknown compression",
     .want = "none or zstd",
     .syn = "--compression_type=T",
     .help = "none | zstd | snappy (none; zstd is kv's own default;\n"
             "snappy: LevelDB only, its own default)"},
    {.name = "compression_dict_bytes",
     .type = F_SIZE,
     .off = OFF(compression_dict_bytes),
     .lo = 0,
     .hi = 1 << 20,
     .want = "a size in bytes up to 1048576",
     .syn = "--compression_dict_bytes=N",
     .help = "kv: zstd dictionary per table, 0: none (kv's default)"},
    {.name = "compression_min_level",
     .type = F_INT,
     .off = OFF(compression_min_level),
     .lo = 0,
     .hi = 7,
     .want = "a level from 0 to 7",
     .syn = "--compression_min_level=N",
     .help = "kv: levels below N stored uncompressed (kv's default)"},
    {.name = "compression_level",
     .type = F_SIGNED,
     .off = OFF(compression_level),
     .lo = -7,
     .hi = 22,
     .want = "an integer from -7 to 22",
     .syn = "--compression_level=N",
     .help = "kv: zstd level, -7 .. 22 (kv's default)"},
    {.name = "compressed_block_size",
     .type = F_SIZE,
     .off = OFF(compressed_block_size),
     .lo = 0,
     .hi = 64 << 20,
     .check = check_compressed_block_size,
     .want = "0, or a size in bytes from 64 to 67108864",
     .syn = "--compressed_block_size=BYTES",
     .help = "kv: block size of compressed tables, 0: --block_size\n"
             "(kv's default)"},
    {.name = "delayed_write_rate",
     .type = F_SIZE,
     .off = OFF(delayed_write_rate),
     .lo = 1024,
     .hi = 0x1p40,
     .want = "a rate in bytes per second from 1024 to 2^40",
     .syn = "--delayed_write_rate=BYTES",
     .help = "kv: bytes/s the write controller starts delaying at\n"
             "(kv's default)"},
    {.name = "background_nice",
     .type = F_INT,
     .off = OFF(background_nice),
     .lo = 0,
     .hi = 19,
     .words = nice_words,
     .want = "-1, or a nice increment from 0 to 19",
     .syn = "--background_nice=N",
     .help = "kv: nice increment of the background threads, 0 .. 19, or -1:\n"
             "19 on a machine of at most 4 CPUs, else 0 (kv's default)"},
    {.name = "idle_compaction_ms",
     .type = F_INT,
     .off = OFF(idle_compaction_ms),
     .lo = 0,
     .hi = 86400000,
     .want = "milliseconds from 0 to 86400000 (0: never)",
     .syn = "--idle_compaction_ms=N",
     .help = "kv: milliseconds without a write after which level 0 is\n"
             "merged down (under lazy_leveled, then each level's runs into one),\n"
             "0 .. 86400000, 0: never (kv's default;\n"
             "0 with fillsettled and --sweep, unless given)"},
    {.name = "level_compaction_dynamic_level_bytes",
     .type = F_INT,
     .off = OFF(dynamic_level_bytes),
     .lo = 0,
     .hi = 1,
     .want = "0 or 1",
     .syn = "--level_compaction_dynamic_level_bytes=0|1",
     .help = "kv: level sizes follow the database's\n"
             "size, level 0 merging into the base level (1, kv's default),\n"
             "or level 1 holds 32 MiB and each level below ten times more\n"
             "(0). RocksDB: sets its option of that name; without the\n"
             "flag, RocksDB's default"},
    {.name = "min_blob_size",
     .type = F_SIZE,
     .off = OFF(min_blob_size),
     .lo = 0,
     .hi = 0x1p40,
     .words = never_words,
     .want = "a size in bytes up to 2^40, or never (or -1): every value in the tables",
     .syn = "--min_blob_size=N",
     .help = "kv: values of N bytes or more go to blob files, apart from\n"
             "the keys (kv's default); never (or -1): every value stays\n"
             "in the tables. RocksDB: turns its blob files on\n"
             "(enable_blob_files, min_blob_size N, enable_blob_gc);\n"
             "without the flag, or with never, RocksDB's default: none.\n"
             "LevelDB and LMDB have none: ignored"},
    {.name = "blob_file_size",
     .type = F_SIZE,
     .off = OFF(blob_file_size),
     .lo = 65536,
     .hi = 0x1p40,
     .want = "a size in bytes from 65536 to 2^40",
     .syn = "--blob_file_size=BYTES",
     .help = "kv: bytes a compaction writes to one blob file (kv's\n"
             "default)"},
    {.name = "blob_gc_threshold",
     .type = F_DOUBLE,
     .off = OFF(blob_gc_threshold),
     .lo = 0,
     .hi = 1,
     .check = check_blob_gc_threshold,
     .want = "a share of a file's bytes, above 0 and at most 1",
     .syn = "--blob_gc_threshold=F",
     .help = "kv: a blob file's share of garbage, above 0 and at most 1,\n"
             "from which compactions move its live values out (kv's\n"
             "default)"},
    {.name = "compaction_style",
     .type = F_WORD,
     .off = OFF(compaction_style),
     .words = style_words,
     .unknown = "unknown compaction style",
     .want = "leveled or lazy_leveled",
     .syn = "--compaction_style=S",
     .help = "leveled | lazy_leveled. kv: kv_options.compaction_style\n"
             "(kv's default, leveled); lazy_leveled keeps up to\n"
             "--runs_per_level sorted runs in each level above the last.\n"
             "RocksDB: leveled is its level compaction, lazy_leveled its\n"
             "universal compaction (its nearest, the blunt version).\n"
             "LevelDB, LMDB: does not apply"},
    {.name = "runs_per_level",
     .type = F_INT,
     .off = OFF(runs_per_level),
     .lo = 2,
     .hi = 32,
     .want = "a count of runs from 2 to 32",
     .syn = "--runs_per_level=K",
     .help = "kv, lazy leveling: sorted runs a level above the last holds\n"
             "before they merge down, 2 .. 32 (kv's default). Other\n"
             "engines: does not apply"},
    {.name = "max_background_jobs",
     .type = F_INT,
     .off = OFF(max_background_jobs),
     .lo = 1,
     .hi = KV_MAX_BACKGROUND_JOBS,
     .want = "a count of jobs from 1 to 64",
     .syn = "--max_background_jobs=N",
     .help = "kv: flushes and compactions at once, 1 .. 64 (kv's default:\n"
             "the online CPUs, at most 16). RocksDB: its\n"
             "max_background_jobs and max_subcompactions, both N (without\n"
             "the flag, its defaults). LevelDB, LMDB: does not apply"},
    {.name = "memory_limit",
     .type = F_CUSTOM,
     .parse = parse_memory_limit,
     .want = "0 or bytes from 1M to 2^50, with a suffix K, M, G or T (powers of 1024) or none",
     .syn = "--memory_limit=BYTES",
     .help = "the engine's memory, page cache included (0: no limit):\n"
             "the process runs in a memory cgroup of that size (v2\n"
             "memory.max, else v1 memory.limit_in_bytes); where none is\n"
             "writable, kv and RocksDB read with O_DIRECT and a block\n"
             "cache of that size (unless --use_direct_reads or\n"
             "--cache_size is given), and LevelDB and LMDB are not\n"
             "limited. The header and the JSON say which"},
    {.name = "sync",
     .type = F_BOOL,
     .off = OFF(sync),
     .want = BOOL_WANT,
     .syn = "--sync[=0|1]",
     .help = "sync every write"},
    {.name = "threads",
     .type = F_UINT,
     .off = OFF(threads),
     .lo = 1,
     .hi = MAX_THREADS,
     .want = "an integer from 1 to 256",
     .syn = "--threads=N",
     .help = "threads sharing each benchmark's ops (1); readwhilewriting:\n"
             "the readers, and one writer besides"},
    {.name = "read_only",
     .type = F_BOOL,
     .off = OFF(read_only),
     .want = BOOL_WANT,
     .syn = "--read_only[=0|1]",
     .help = "kv: open --db as a read-only handle beside its writer (another\n"
             "process); with --use_existing_db"},
    {.name = "use_existing_db",
     .type = F_BOOL,
     .off = OFF(use_existing_db),
     .want = BOOL_WANT,
     .syn = "--use_existing_db[=0|1]",
     .help = "keep the database at --db; skip the fill benchmarks"},
    {.name = "db",
     .type = F_PATH,
     .off = OFF(db),
     .want = "a directory",
     .syn = "--db=DIR",
     .help = "database directory (default: a temporary one, removed);\n"
             "new, empty, or a database of --engine, whose files alone\n"
             "a fresh run deletes"},
    {.name = "seed",
     .type = F_U64,
     .off = OFF(seed),
     .lo = 0,
     .hi = 1e15,
     .want = "an integer from 0 to 1e15",
     .syn = "--seed=N",
     .help = "keys and their order follow from it (42)"},
    {.name = "histogram",
     .type = F_BOOL,
     .off = OFF(histogram),
     .want = BOOL_WANT,
     .syn = "--histogram[=0|1]",
     .help = "latency percentiles p50 p95 p99 p99.9 p99.99 max"},
    {.name = "json",
     .type = F_BOOL,
     .off = OFF(json),
     .want = BOOL_WANT,
     .syn = "--json[=0|1]",
     .help = "one JSON object per benchmark on stdout; text to stderr\n"
             "Every object has bytes_written (bytes the process wrote to\n"
             "storage while the benchmark ran: /proc/self/io write_bytes;\n"
             "nothing on tmpfs), write_amp (bytes_written over the key and\n"
             "value bytes the benchmark wrote; only where it wrote some),\n"
             "db_bytes (the database's files at its end), blob_bytes and\n"
             "blob_garbage_bytes (kv, RocksDB); kv's reads add\n"
             "blob_reads_per_get"},
    {.name = "drop_cache",
     .type = F_BOOL,
     .off = OFF(drop_cache),
     .want = BOOL_WANT,
     .syn = "--drop_cache[=0|1]",
     .help = "evict the database's files from the page cache before\n"
             "each read benchmark (posix_fadvise DONTNEED)"},
    {.name = "stats_interval",
     .type = F_DOUBLE,
     .off = OFF(stats_interval),
     .lo = 0.001,
     .hi = 86400,
     .want = "seconds, from 0.001 to 86400",
     .syn = "--stats_interval=S",
     .help = "every S seconds, a row of REPORT_DIR/stats.csv: ops/s,\n"
             "p99_us and p999_us of the ops completed in the interval\n"
             "(every op is timed), write_delays, write_delay_us,\n"
             "write_stops, write_stop_us, l0_files,\n"
             "pending_compaction_bytes, compaction_bytes, compacting\n"
             "(empty where the engine does not say)"},
    {.name = "report_dir",
     .type = F_PATH,
     .off = OFF(report_dir),
     .want = "a directory",
     .syn = "--report_dir=DIR",
     .help = "where stats.csv, sweep.csv and .svg, range_sweep.csv and\n"
             ".svg, scaling.csv and .svg, timeline.csv and .svg go\n"
             "(kvbench-report)"},
    {.name = "sweep",
     .type = F_CUSTOM,
     .parse = parse_sweep,
     .bare = 1,
     .want = "bloom_bits=B,B,...: at most 64 numbers from 0 to 1000, or "
             "range_filter_bits[=B,B,...]: 0 or 4 to 64",
     .syn = "--sweep[=bloom_bits=B,B,...|=range_filter_bits[=B,...]]",
     .help = "for each bits/key (default 0,2,...,20) and each of\n"
             "blocked-uniform, classic-uniform, blocked-monkey:\n"
             "fillsettled, readmissing, readrandom, then readmissing\n"
             "with O_DIRECT and no block cache (at most 10000 gets);\n"
             "write REPORT_DIR/sweep.csv and the chart REPORT_DIR/sweep.svg.\n"
             "range_filter_bits (default 0,4,6,...,24): for each, fillsettled,\n"
             "seekempty, seekshort, then seekempty with O_DIRECT and no\n"
             "block cache (at most 5000 seeks); REPORT_DIR/range_sweep.csv\n"
             "and range_sweep.svg\n"
             "(needs --key_stride >= range_width + 2)"},
    {.name = "scaling",
     .type = F_CUSTOM,
     .parse = parse_scaling,
     .want = "database sizes N,N,...: at most 32, each from 1 to 1e12, with K, M or G "
             "for 10^3, 10^6, 10^9",
     .syn = "--scaling=N,N,...",
     .help = "database sizes (K, M, G: 10^3, 10^6, 10^9; 1M,5M,20M):\n"
             "for each size, round and engine in turn, on a fresh\n"
             "database: fillrandom, stats, readrandom, readmissing,\n"
             "waitforcompaction, reopen, with --histogram; each run a\n"
             "row of REPORT_DIR/scaling.csv; medians over rounds in\n"
             "the chart REPORT_DIR/scaling.svg and a table. --reads\n"
             "defaults to 1000000, or N when smaller"},
    {.name = "engines",
     .type = F_CUSTOM,
     .parse = parse_engines,
     .want = "a comma list of kv, leveldb, rocksdb and lmdb",
     .syn = "--engines=E,E,...",
     .help = "--scaling's engines, interleaved in each round (default\n"
             "kv,leveldb,rocksdb,lmdb), or --timeline's, in turn\n"
             "(default kv,rocksdb); those not built are skipped"},
    {.name = "rounds",
     .type = F_UINT,
     .off = OFF(rounds),
     .lo = 1,
     .hi = 1000,
     .want = "an integer from 1 to 1000",
     .syn = "--rounds=N",
     .help = "--scaling's rounds of each size and engine (1)"},
    {.name = "scaling_chart",
     .type = F_PATH,
     .off = OFF(scaling_chart),
     .want = "a CSV that kvbench --scaling wrote",
     .syn = "--scaling_chart=CSV",
     .help = "run nothing: the chart and table again from a CSV that\n"
             "--scaling wrote (several may be concatenated); the chart\n"
             "goes beside the CSV, or to --report_dir"},
    {.name = "timeline",
     .type = F_BOOL,
     .off = OFF(timeline),
     .want = BOOL_WANT,
     .syn = "--timeline[=0|1]",
     .help = "for each of --engines in turn, in a process of its own:\n"
             "fillrandom of --num keys on a fresh database, with\n"
             "--histogram and a row every --stats_interval seconds\n"
             "(default 1) into REPORT_DIR/timeline.csv (stats.csv's\n"
             "columns after an engine column); the chart\n"
             "REPORT_DIR/timeline.svg (ops/s and p99.9 per interval,\n"
             "flushes and compactions as bands) and a table: fill\n"
             "ops/s, p99.9, p99.99, max, intervals with p99.9 > 1 ms"},
    {.name = "timeline_chart",
     .type = F_PATH,
     .off = OFF(timeline_chart),
     .want = "a CSV that kvbench --timeline wrote",
     .syn = "--timeline_chart=CSV",
     .help = "run nothing: the timeline chart and table again from a\n"
             "CSV that --timeline wrote; beside it, or to --report_dir"},
    {.name = "engine",
     .type = F_NAME,
     .off = OFF(engine),
     .words = engine_words,
     .unknown = "unknown engine",
     .want = "kv, lmdb, leveldb or rocksdb",
     .syn = "--engine=E",
     .help = "kv | lmdb | leveldb | rocksdb (LMDB: a B-tree without\n"
             "filters, always built; LevelDB and RocksDB need a build\n"
             "with -DKV_BENCH_PEERS=ON)"},
};
#define NFLAGS (sizeof flags / sizeof flags[0])

/* ---- --help ---------------------------------------------------------------------------- */

/* One flag's lines: the synopsis in a column of 22 (or followed by two
 * spaces when longer), its help beside it, continued at column 24. */
static void put_help(FILE *f, const char *syn, const char *help)
{
    int width = (int)strlen(syn) + 2 > 22 ? (int)strlen(syn) + 2 : 22;
    fprintf(f, "  %-*s", width, syn);
    for (const char *p = help; *p; p++) {
        fputc(*p, f);
        if (*p == '\n')
            fprintf(f, "%24s", "");
    }
    fputc('\n', f);
}

void usage(FILE *f)
{
    fputs("usage: kvbench [--name=value ...]   (db_bench's flags; no flags: the default run)\n", f);
    for (size_t i = 0; i < NFLAGS; i++) {
        put_help(f, flags[i].syn, flags[i].help);
        if (flags[i].parse == parse_benchmarks)
            for (size_t b = 0; b < nbenches; b++)
                fprintf(f, "      %-13s %s\n", benches[b].name, benches[b].help);
    }
    put_help(f, "--help", "this text");
}

/* ---- parsing a flag -------------------------------------------------------------------- */

/* The word val names in words, or NULL. */
static const struct word *find_word(const struct word *words, const char *val)
{
    for (const struct word *w = words; w && w->word; w++)
        if (!strcmp(val, w->word))
            return w;
    return NULL;
}

/* A number flag's value into its field (p): NULL, or what is wrong. */
static const char *set_number(const struct flag *fl, const char *val, void *p)
{
    const struct word *w = find_word(fl->words, val);
    uint64_t u = 0;
    const char *why = NULL;
    switch (fl->type) {
    case F_U64:
        if (w)
            *(uint64_t *)p = (uint64_t)w->value;
        else
            why = parse_u64(val, (uint64_t)fl->lo, (uint64_t)fl->hi, p);
        break;
    case F_SIZE:
        if (w)
            *(size_t *)p = (size_t)w->value;
        else
            why = parse_size(val, (uint64_t)fl->lo, (uint64_t)fl->hi, p);
        break;
    case F_INT:
        if (w)
            *(int *)p = (int)w->value;
        else if (!(why = parse_u64(val, (uint64_t)fl->lo, (uint64_t)fl->hi, &u)))
            *(int *)p = (int)u;
        break;
    case F_UINT:
        if (!(why = parse_u64(val, (uint64_t)fl->lo, (uint64_t)fl->hi, &u)))
            *(unsigned *)p = (unsigned)u;
        break;
    case F_SIGNED:
        if (val[0] == '-' && !(why = parse_u64(val + 1, 0, (uint64_t)-fl->lo, &u)))
            *(int *)p = -(int)u;
        else if (val[0] != '-' && !(why = parse_u64(val, 0, (uint64_t)fl->hi, &u)))
            *(int *)p = (int)u;
        break;
    default: /* F_DOUBLE */ why = parse_double(val, fl->lo, fl->hi, p); break;
    }
    return why;
}

/* The flag's value (val, NULL when given alone) into o: NULL, or what is
 * wrong with it (SAID when that is printed already). */
static const char *set_value(const struct flag *fl, const char *val, struct options *o)
{
    void *p = (char *)o + fl->off;
    const struct word *w;
    if (fl->type == F_BOOL)
        return parse_bool(val, p);
    if (fl->type == F_CUSTOM)
        return fl->parse(val, o);
    switch (fl->type) {
    case F_PATH:
        if (!*val)
            return "empty";
        *(const char **)p = val;
        return NULL;
    case F_WORD:
    case F_NAME:
        if (!(w = find_word(fl->words, val)))
            return fl->unknown;
        if (fl->type == F_WORD)
            *(int *)p = (int)w->value;
        else
            *(const char **)p = val;
        return NULL;
    default: return set_number(fl, val, p);
    }
}

/* One --name=value (val NULL: --name alone); returns 0, or -1 after a
 * one-line message that names the flag, the value, what is wrong with it
 * and what the flag wants:
 *   kvbench: --reads=abc: not a number (want an integer from 1 to 1e15, or -1 for num) */
int set_flag(struct options *o, const char *name, const char *val)
{
    const struct flag *fl = NULL;
    for (size_t i = 0; i < NFLAGS && !fl; i++)
        if (!strcmp(name, flags[i].name))
            fl = &flags[i];
    if (!fl) {
        fprintf(stderr, "kvbench: unknown flag --%s (kvbench --help lists them)\n", name);
        return -1;
    }
    /* Flags that take a value: none given is an error of its own. */
    const char *why = "no value";
    if (val || fl->type == F_BOOL || fl->bare)
        why = set_value(fl, val, o);
    if (!why && fl->check)
        why = fl->check(o);
    if (!why)
        return 0;
    if (why == SAID)
        return -1;
    if (val)
        fprintf(stderr, "kvbench: --%s=%s: %s (want %s)\n", name, val, why, fl->want);
    else
        fprintf(stderr, "kvbench: --%s needs a value: --%s=VALUE (want %s)\n", name, name,
                fl->want);
    return -1;
}
