/* difftest.c - one seeded random operation sequence, run against a store,
 * every answer written as a line of a transcript on stdout.
 *
 * Built three times from this one source (tests/diff/CMakeLists.txt):
 *   difftest_leveldb  LevelDB's C API, against Debian's real libleveldb;
 *   difftest_kv       LevelDB's C API, against kv's drop-in (libkv_leveldb);
 *   difftest_kvapi    kv.h itself (DIFF_KV_API), under one of several option
 *                     sets (--config N), with range deletes and merges too.
 * diffdrive runs two of them with the same seed and compares the
 * transcripts line by line: the first two must agree answer for answer (a
 * second opinion from outside), and difftest_kvapi must give the same
 * transcript under every option set (a metamorphic test: options change
 * how data is stored, never what is read).
 *
 * Operation i is drawn from its own generator, seeded by (seed, i) alone:
 * it never depends on what earlier operations did, so any subset of the
 * sequence can be replayed (--only FILE), which is how diffdrive shrinks a
 * divergence. State the operations share (snapshots, long-lived iterators)
 * lives in a few numbered slots; an operation on an empty slot writes that
 * it found the slot empty, the same in every build.
 *
 * Usage: difftest [--seed N] [--ops N] [--reverse] [--only FILE] [--print]
 *                 [--verbose] [--config N] [--configs] [--dir DIR]
 *                 [--raw-repair] [--inject]
 *   --only FILE   run only the operations whose numbers FILE lists (one a
 *                 line); the others are skipped (their numbers still count)
 *   --print       write each operation's description instead of running it
 *   --verbose     full scans write every pair, not only a count and a hash
 *   --config N    (difftest_kvapi) the option set; --configs prints how many
 *   --dir DIR     where the scratch database goes (default $TMPDIR or /tmp)
 *   --raw-repair  repair right after a close, no compaction after it
 *                 (LevelDB's stale reads after RepairDB then show:
 *                 doc/reliability.md)
 *   --inject      plant a bug: deletes of the key "abc" are dropped (the
 *                 driver's own test, diff_selftest)
 * Exit: 0 when the run ended (whatever the answers); 2 for bad usage; 3
 * when the store failed to open or close; 77 when a --config cannot run
 * here (the reason on stderr). */
#define _XOPEN_SOURCE 700 /* mkdtemp, nftw */
#include <ftw.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef DIFF_KV_API
#include <kv/kv.h>
#else
#include <leveldb/c.h>
#endif

/* ---- the generator -------------------------------------------------------------- */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* A number in [0, n). */
static uint32_t below(uint64_t *s, uint32_t n)
{
    return (uint32_t)(splitmix(s) % n);
}

#define KEY_MAX 1700 /* bytes a key buffer holds */

static uint64_t seed = 1;
static int reverse_order;
static int verbose;
/* --inject: this run drops every kv_delete / leveldb_delete of the key
 * "abc" (not those in batches, which the batch's digest would show at
 * once), a planted bug that diff_selftest expects diffdrive to find and
 * shrink. */
static int inject;
/* --raw-repair: no open and close before a repair, no compaction after it
 * (shows LevelDB's stale reads after RepairDB; see OP_REOPEN). */
static int raw_repair;
static uint32_t key_space; /* keys are key_of(0 .. key_space - 1) */

/* Prefixes the keys share: the empty one, nested ones, and 0x00 / 0xff
 * bytes at the front. */
static const char *const prefixes[] = {"",     "a",    "ab",       "abc", "b",
                                       "\x01", "\xff", "\xff\xff", "k/",  "k/a/"};
#define NPREFIX (sizeof prefixes / sizeof prefixes[0])

/* Key number id: 0 is the empty key; the others a prefix, then (mostly) a
 * decimal number, sometimes a 0x00 or 0xff byte; one in 17 has a run of
 * 100 to 1,600 'L's before its number (long keys, sharing long prefixes).
 * Returns its length (at most KEY_MAX - 8). */
static size_t key_of(uint32_t id, char *buf)
{
    if (id == 0)
        return 0;
    const char *p = prefixes[id % NPREFIX];
    size_t n = strlen(p);
    memcpy(buf, p, n);
    uint32_t rest = id / NPREFIX;
    if (rest == 0)
        return n; /* the prefix alone */
    if (rest % 7 == 0)
        buf[n++] = '\0';
    if (rest % 17 == 0) {
        size_t run = 100 * (1 + rest % 16);
        memset(buf + n, 'L', run);
        n += run;
    }
    n += (size_t)sprintf(buf + n, "%" PRIu32, rest);
    if (rest % 5 == 0)
        buf[n++] = (char)0xff;
    if (rest % 13 == 0)
        buf[n++] = '\0';
    return n;
}

/* A key to seek to or to bound a range with: a stored key, one a byte
 * longer or shorter, or up to 3 random bytes. */
static size_t probe_key(uint64_t *s, char *buf)
{
    size_t n = key_of(below(s, key_space), buf);
    switch (below(s, 6)) {
    case 0: buf[n++] = (char)below(s, 256); break;
    case 1:
        if (n)
            n--;
        break;
    case 2:
        n = below(s, 4);
        for (size_t i = 0; i < n; i++)
            buf[i] = (char)(below(s, 3) == 0 ? 0xff : below(s, 256));
        break;
    default: break;
    }
    return n;
}

/* The store's key order, for the two ends of a range. */
static int order(const char *a, size_t alen, const char *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    if (c == 0)
        c = alen < blen ? -1 : alen > blen ? 1 : 0;
    return reverse_order ? -c : c;
}

#define LARGE_VALUE ((size_t)1 << 20)
static char *value_buf; /* LARGE_VALUE + 4096 bytes */

/* A value's length: mostly small, some up to 5,000 bytes (past kv's blob
 * threshold of 512), one put in 20,000 about 1 MiB. */
static size_t value_len(uint64_t *s)
{
    uint32_t r = below(s, 20000);
    if (r == 0)
        return LARGE_VALUE + below(s, 4096);
    if (r < 12000)
        return below(s, 33);
    if (r < 18000)
        return 33 + below(s, 600);
    return below(s, 5001);
}

/* Fills value_buf[0, len) from the value's own seed. */
static const char *value_of(uint64_t vseed, size_t len)
{
    uint64_t s = vseed;
    for (size_t i = 0; i < len; i += 8) {
        uint64_t w = splitmix(&s);
        memcpy(value_buf + i, &w, 8); /* the buffer has room past len */
    }
    return value_buf;
}

/* FNV-1a, 64 bits: the transcript names values by length and hash. */
static uint64_t fnv(const void *p, size_t n, uint64_t h)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3u;
    return h;
}
#define FNV_START 0xcbf29ce484222325u

/* ---- the transcript ------------------------------------------------------------------ */

static uint64_t cur_op;

/* Writes a key, printable bytes as they are, others as \xNN. */
static void put_key(const char *k, size_t n)
{
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)k[i];
        size_t run = 0;
        while (c == 'L' && i + run < n && k[i + run] == 'L')
            run++;
        if (run > 8) { /* a long key's run, written as {L*count} */
            printf("{L*%zu}", run);
            i += run - 1;
            continue;
        }
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
            putchar(c);
        else
            printf("\\x%02x", c);
    }
    putchar('"');
}

static void put_value(const char *v, size_t n)
{
    printf("%zu:%016" PRIx64, n, fnv(v, n, FNV_START));
}

/* ---- the stores ------------------------------------------------------------------------ */

#define SLOTS 4
static void *snaps[SLOTS];
static void *iters[SLOTS];
static char dbdir[512];

#ifdef DIFF_KV_API

static kv_db *db;
static kv_options opts;
static kv_batch *batch;

static int rev_compare(void *ctx, const void *a, size_t alen, const void *b, size_t blen)
{
    (void)ctx;
    int c = memcmp(a, b, alen < blen ? alen : blen);
    if (c == 0)
        c = alen < blen ? -1 : alen > blen ? 1 : 0;
    return -c;
}
static const kv_comparator reverse_cmp = {"difftest.reverse", rev_compare, NULL};

/* The merge operator: the existing value and the operands concatenated,
 * then only the last 100 bytes kept. Defined for every input (it never
 * fails a read or a compaction), and applying it in steps gives what one
 * application gives, so however compactions group the operands the answer
 * is the same. */
static int tail_merge(void *state, const void *key, size_t klen, const void *existing,
                      size_t existing_len, const void *const *operands, const size_t *operand_lens,
                      size_t n, void **result, size_t *result_len)
{
    (void)state;
    (void)key;
    (void)klen;
    size_t total = existing_len;
    for (size_t i = 0; i < n; i++)
        total += operand_lens[i];
    char *all = malloc(total + 1);
    if (!all)
        return 1;
    size_t at = 0;
    if (existing_len)
        memcpy(all, existing, existing_len);
    at = existing_len;
    for (size_t i = 0; i < n; i++) {
        if (operand_lens[i])
            memcpy(all + at, operands[i], operand_lens[i]);
        at += operand_lens[i];
    }
    if (total > 100) {
        memmove(all, all + total - 100, 100);
        total = 100;
    }
    *result = all;
    *result_len = total;
    return 0;
}
static const kv_merge_operator merge_op = {"difftest.tail100", NULL, tail_merge, NULL};

/* The option sets of the metamorphic test: each changes how data is
 * stored, never what a read returns. Config 0 is the base every other is
 * compared with. */
static const char *const config_names[] = {
    "base: 64 KiB write buffer and tables, 1 MiB cache",
    "block_size 64 (raw and compressed)",
    "block_size 64 KiB",
    "no filters (bloom_bits_per_key 0)",
    "classic filter layout, 3 bits per key",
    "Monkey filter policy",
    "filter_keyed_hash (SipHash)",
    "no compression",
    "zstd level 3 on every level, 16 KiB dictionaries",
    "every value in blob files (min_blob_size 0)",
    "no blob files (min_blob_size KV_BLOB_NEVER)",
    "blobs from 100 bytes, 64 KiB blob files, gc at 0.1",
    "1 MiB write buffer",
    "static level sizes (dynamic_level_bytes 0)",
    "direct reads (use_direct_reads 1)",
    "no memtable filter",
    "l0_compaction_trigger 1, no block cache",
};
#define NCONFIGS (int)(sizeof config_names / sizeof config_names[0])
static int config;

static void set_options(void)
{
    kv_options_init(&opts);
    opts.write_buffer_size = 64 << 10;
    opts.target_file_size = 64 << 10;
    opts.max_bytes_for_level_base = 256 << 10;
    opts.block_cache_size = 1 << 20;
    opts.merge_operator = &merge_op;
    opts.idle_compaction_ms = 0;
    if (reverse_order)
        opts.comparator = &reverse_cmp;
    switch (config) {
    case 1:
        opts.block_size = 64;
        opts.compressed_block_size = 64;
        break;
    case 2:
        opts.block_size = 64 << 10;
        opts.compressed_block_size = 64 << 10;
        break;
    case 3: opts.bloom_bits_per_key = 0; break;
    case 4:
        opts.filter_layout = KV_BLOOM_CLASSIC;
        opts.bloom_bits_per_key = 3;
        break;
    case 5: opts.filter_policy = KV_FILTER_MONKEY; break;
    case 6: opts.filter_keyed_hash = 1; break;
    case 7: opts.compression = KV_COMPRESSION_NONE; break;
    case 8:
        opts.compression_min_level = 0;
        opts.compression_level = 3;
        opts.compression_dict_bytes = 16 << 10;
        break;
    case 9: opts.min_blob_size = 0; break;
    case 10: opts.min_blob_size = KV_BLOB_NEVER; break;
    case 11:
        opts.min_blob_size = 100;
        opts.blob_file_size = 64 << 10;
        opts.blob_gc_threshold = 0.1;
        break;
    case 12: opts.write_buffer_size = 1 << 20; break;
    case 13:
        opts.dynamic_level_bytes = 0;
        opts.max_bytes_for_level_base = 128 << 10;
        break;
    case 14: opts.use_direct_reads = 1; break;
    case 15: opts.memtable_filter = 0; break;
    case 16:
        opts.l0_compaction_trigger = 1;
        opts.block_cache_size = 0;
        break;
    default: break;
    }
}

static void be_open(void)
{
    int rc = kv_open(dbdir, &opts, &db);
    if (rc != KV_OK) {
        fprintf(stderr, "difftest: kv_open %s: %s\n", dbdir, kv_error_text());
        exit(3);
    }
}

static void be_close(void)
{
    if (kv_close(db) != KV_OK) {
        fprintf(stderr, "difftest: kv_close: %s\n", kv_error_text());
        exit(3);
    }
    db = NULL;
}

/* Each returns 0, or -1 (the error's text on stderr: texts differ between
 * stores, the transcript says only "error"). */
static int failed(int rc)
{
    if (rc == KV_OK)
        return 0;
    fprintf(stderr, "difftest: op %" PRIu64 ": %s\n", cur_op, kv_error_text());
    return -1;
}

static int be_put(const char *k, size_t kl, const char *v, size_t vl, int sync)
{
    if (!sync)
        return failed(kv_put(db, k, kl, v, vl));
    kv_batch_clear(batch);
    int rc = kv_batch_put(batch, k, kl, v, vl);
    kv_write_options wo = {.sync = 1};
    return failed(rc == KV_OK ? kv_write_opts(db, &wo, batch) : rc);
}

static int be_del(const char *k, size_t kl)
{
    return failed(kv_delete(db, k, kl));
}

static void be_batch_begin(void)
{
    kv_batch_clear(batch);
}

/* kv's batch has no append: the second part goes into the same batch. */
static void be_batch_second(void)
{
}

/* Puts and deletes are hashed in the order the batch gives them back. */
static int digest_put(void *ctx, const void *k, size_t kl, const void *v, size_t vl)
{
    uint64_t *h = ctx;
    *h = fnv(v, vl, fnv(k, kl, fnv("p", 1, *h)));
    return 0;
}

static int digest_del(void *ctx, const void *k, size_t kl)
{
    uint64_t *h = ctx;
    *h = fnv(k, kl, fnv("d", 1, *h));
    return 0;
}

static uint64_t be_batch_digest(int appended)
{
    (void)appended;
    uint64_t h = FNV_START;
    (void)kv_batch_foreach(batch, &h, digest_put, digest_del);
    return fnv(&(uint32_t){kv_batch_count(batch)}, 4, h);
}

static void be_batch_put(const char *k, size_t kl, const char *v, size_t vl)
{
    (void)failed(kv_batch_put(batch, k, kl, v, vl));
}

static void be_batch_del(const char *k, size_t kl)
{
    (void)failed(kv_batch_delete(batch, k, kl));
}

static int be_batch_write(int sync)
{
    kv_write_options wo = {.sync = sync};
    return failed(kv_write_opts(db, &wo, batch));
}

/* 1 found (*v from kv, freed by be_free), 0 absent, -1 an error. */
static int be_get(void *snap, const char *k, size_t kl, char **v, size_t *vl)
{
    void *p;
    int rc = kv_get_at(db, snap, k, kl, &p, vl);
    if (rc == KV_NOTFOUND)
        return 0;
    if (failed(rc))
        return -1;
    *v = p;
    return 1;
}

static void be_free(char *v)
{
    kv_free(v);
}

static void *be_snap_new(void)
{
    kv_snapshot *s = NULL;
    (void)failed(kv_snapshot_new(db, &s));
    return s;
}

static void be_snap_release(void *s)
{
    kv_snapshot_release(db, s);
}

static void *be_iter_new(void *snap)
{
    kv_iter *it = NULL;
    (void)failed(kv_iter_new(db, snap, &it));
    return it;
}

static void be_iter_free(void *it)
{
    kv_iter_free(it);
}

static void be_seek_first(void *it)
{
    kv_iter_seek_first(it);
}

static void be_seek_last(void *it)
{
    kv_iter_seek_last(it);
}

static void be_seek(void *it, const char *k, size_t kl)
{
    kv_iter_seek(it, k, kl);
}

static void be_next(void *it)
{
    kv_iter_next(it);
}

static void be_prev(void *it)
{
    kv_iter_prev(it);
}

static int be_valid(void *it)
{
    return kv_iter_valid(it);
}

static const char *be_key(void *it, size_t *n)
{
    return kv_iter_key(it, n);
}

static const char *be_value(void *it, size_t *n)
{
    return kv_iter_value(it, n);
}

static int be_iter_error(void *it)
{
    return failed(kv_iter_status(it));
}

static void be_compact(const char *a, size_t al, const char *b, size_t bl)
{
    (void)failed(kv_compact_range(db, a, al, b, bl));
}

static int be_repair(void)
{
    return failed(kv_repair(dbdir, &opts));
}

static int be_destroy(void)
{
    return failed(kv_destroy(dbdir));
}

/* Only kv's API has these two. */
static int be_delete_range(const char *a, size_t al, const char *b, size_t bl)
{
    return failed(kv_delete_range(db, a, al, b, bl));
}

static int be_merge(const char *k, size_t kl, const char *v, size_t vl)
{
    return failed(kv_merge(db, k, kl, v, vl));
}

static void be_batch_delete_range(const char *a, size_t al, const char *b, size_t bl)
{
    (void)failed(kv_batch_delete_range(batch, a, al, b, bl));
}

static void be_batch_merge(const char *k, size_t kl, const char *v, size_t vl)
{
    (void)failed(kv_batch_merge(batch, k, kl, v, vl));
}

#else /* LevelDB's C API */

static leveldb_t *db;
static leveldb_options_t *lopts;
static leveldb_comparator_t *lcmp;
static leveldb_filterpolicy_t *lpolicy;
static leveldb_cache_t *lcache;
static leveldb_readoptions_t *ropts;
static leveldb_writeoptions_t *wopts, *wsync;
static leveldb_writebatch_t *batch;

static int rev_compare(void *state, const char *a, size_t alen, const char *b, size_t blen)
{
    (void)state;
    int c = memcmp(a, b, alen < blen ? alen : blen);
    if (c == 0)
        c = alen < blen ? -1 : alen > blen ? 1 : 0;
    return -c;
}

static const char *rev_name(void *state)
{
    (void)state;
    return "difftest.reverse";
}

/* LevelDB calls a comparator's destructor unconditionally. */
static void no_destructor(void *state)
{
    (void)state;
}

/* The options, drawn from the seed: small write buffers and tables (so that
 * flushes and compactions are many), block size, filter and compression
 * varied. Through kv's drop-in values of 512 bytes and more go to blob
 * files (kv's default min_blob_size; the drop-in leaves it). */
static void set_options(void)
{
    uint64_t s = seed ^ 0x6f7074696f6e73u;
    lopts = leveldb_options_create();
    leveldb_options_set_create_if_missing(lopts, 1);
    leveldb_options_set_write_buffer_size(lopts, (size_t)(64 + 64 * below(&s, 3)) << 10);
    leveldb_options_set_max_file_size(lopts, (size_t)(64 + 64 * below(&s, 4)) << 10);
    static const size_t blocks[] = {64, 256, 4096, 16384};
    leveldb_options_set_block_size(lopts, blocks[below(&s, 4)]);
    leveldb_options_set_compression(lopts, below(&s, 2) ? leveldb_snappy_compression
                                                        : leveldb_no_compression);
    if (below(&s, 3)) {
        lpolicy = leveldb_filterpolicy_create_bloom(10);
        leveldb_options_set_filter_policy(lopts, lpolicy);
    }
    lcache = leveldb_cache_create_lru(1 << 20);
    leveldb_options_set_cache(lopts, lcache);
    if (reverse_order) {
        lcmp = leveldb_comparator_create(NULL, no_destructor, rev_compare, rev_name);
        leveldb_options_set_comparator(lopts, lcmp);
    }
    ropts = leveldb_readoptions_create();
    wopts = leveldb_writeoptions_create();
    wsync = leveldb_writeoptions_create();
    leveldb_writeoptions_set_sync(wsync, 1);
}

static void be_open(void)
{
    char *err = NULL;
    db = leveldb_open(lopts, dbdir, &err);
    if (err) {
        fprintf(stderr, "difftest: leveldb_open %s: %s\n", dbdir, err);
        exit(3);
    }
}

static void be_close(void)
{
    leveldb_close(db);
    db = NULL;
}

static int failed(char *err)
{
    if (!err)
        return 0;
    fprintf(stderr, "difftest: op %" PRIu64 ": %s\n", cur_op, err);
    leveldb_free(err);
    return -1;
}

static int be_put(const char *k, size_t kl, const char *v, size_t vl, int sync)
{
    char *err = NULL;
    leveldb_put(db, sync ? wsync : wopts, k, kl, v, vl, &err);
    return failed(err);
}

static int be_del(const char *k, size_t kl)
{
    char *err = NULL;
    leveldb_delete(db, wopts, k, kl, &err);
    return failed(err);
}

static leveldb_writebatch_t *batch2, *cur_batch; /* cur_batch: where entries go */

static void be_batch_begin(void)
{
    leveldb_writebatch_clear(batch);
    leveldb_writebatch_clear(batch2);
    cur_batch = batch;
}

/* The entries from here on go to a second batch, appended by the digest. */
static void be_batch_second(void)
{
    cur_batch = batch2;
}

static void digest_put(void *ctx, const char *k, size_t kl, const char *v, size_t vl)
{
    uint64_t *h = ctx;
    *h = fnv(v, vl, fnv(k, kl, fnv("p", 1, *h)));
}

static void digest_del(void *ctx, const char *k, size_t kl)
{
    uint64_t *h = ctx;
    *h = fnv(k, kl, fnv("d", 1, *h));
}

static void count_put(void *ctx, const char *k, size_t kl, const char *v, size_t vl)
{
    (void)k, (void)kl, (void)v, (void)vl;
    ++*(uint64_t *)ctx;
}

static void count_del(void *ctx, const char *k, size_t kl)
{
    (void)k, (void)kl;
    ++*(uint64_t *)ctx;
}

/* Appends the second batch (when there is one), then hashes the entries as
 * leveldb_writebatch_iterate gives them back. */
static uint64_t be_batch_digest(int appended)
{
    if (appended)
        leveldb_writebatch_append(batch, batch2);
    uint64_t h = FNV_START, count = 0;
    leveldb_writebatch_iterate(batch, &h, digest_put, digest_del);
    leveldb_writebatch_iterate(batch, &count, count_put, count_del);
    return fnv(&(uint32_t){(uint32_t)count}, 4, h);
}

static void be_batch_put(const char *k, size_t kl, const char *v, size_t vl)
{
    leveldb_writebatch_put(cur_batch, k, kl, v, vl);
}

static void be_batch_del(const char *k, size_t kl)
{
    leveldb_writebatch_delete(cur_batch, k, kl);
}

static int be_batch_write(int sync)
{
    char *err = NULL;
    leveldb_write(db, sync ? wsync : wopts, batch, &err);
    return failed(err);
}

static int be_get(void *snap, const char *k, size_t kl, char **v, size_t *vl)
{
    char *err = NULL;
    leveldb_readoptions_set_snapshot(ropts, snap);
    *v = leveldb_get(db, ropts, k, kl, vl, &err);
    leveldb_readoptions_set_snapshot(ropts, NULL);
    if (failed(err))
        return -1;
    return *v != NULL;
}

static void be_free(char *v)
{
    leveldb_free(v);
}

static void *be_snap_new(void)
{
    return (void *)leveldb_create_snapshot(db);
}

static void be_snap_release(void *s)
{
    leveldb_release_snapshot(db, s);
}

static void *be_iter_new(void *snap)
{
    leveldb_readoptions_set_snapshot(ropts, snap);
    leveldb_iterator_t *it = leveldb_create_iterator(db, ropts);
    leveldb_readoptions_set_snapshot(ropts, NULL);
    return it;
}

static void be_iter_free(void *it)
{
    leveldb_iter_destroy(it);
}

static void be_seek_first(void *it)
{
    leveldb_iter_seek_to_first(it);
}

static void be_seek_last(void *it)
{
    leveldb_iter_seek_to_last(it);
}

static void be_seek(void *it, const char *k, size_t kl)
{
    leveldb_iter_seek(it, k, kl);
}

static void be_next(void *it)
{
    leveldb_iter_next(it);
}

static void be_prev(void *it)
{
    leveldb_iter_prev(it);
}

static int be_valid(void *it)
{
    return leveldb_iter_valid(it);
}

static const char *be_key(void *it, size_t *n)
{
    return leveldb_iter_key(it, n);
}

static const char *be_value(void *it, size_t *n)
{
    return leveldb_iter_value(it, n);
}

static int be_iter_error(void *it)
{
    char *err = NULL;
    leveldb_iter_get_error(it, &err);
    return failed(err);
}

static void be_compact(const char *a, size_t al, const char *b, size_t bl)
{
    leveldb_compact_range(db, a, al, b, bl);
}

static int be_repair(void)
{
    char *err = NULL;
    leveldb_repair_db(lopts, dbdir, &err);
    return failed(err);
}

static int be_destroy(void)
{
    char *err = NULL;
    leveldb_destroy_db(lopts, dbdir, &err);
    return failed(err);
}

#endif

/* ---- the operations --------------------------------------------------------------------- */

enum {
    OP_PUT,
    OP_DEL,
    OP_BATCH,
    OP_GET,
    OP_SNAP_NEW,
    OP_SNAP_RELEASE,
    OP_ITER_NEW,
    OP_ITER_FREE,
    OP_SEEK,
    OP_SEEK_FIRST,
    OP_SEEK_LAST,
    OP_NEXT,
    OP_PREV,
    OP_SCAN,
    OP_COMPACT,
    OP_REOPEN,
    OP_DESTROY,
    OP_DELRANGE, /* kv's API only */
    OP_MERGE,    /* kv's API only */
    NOPS
};

/* Weights out of 10,000 (the kv-only kinds 0 in LevelDB's builds). */
static const struct {
    const char *name;
    unsigned weight;
} kinds[NOPS] = {
    [OP_PUT] = {"put", 3000},
    [OP_DEL] = {"del", 900},
    [OP_BATCH] = {"batch", 600},
    [OP_GET] = {"get", 2400},
    [OP_SNAP_NEW] = {"snap", 60},
    [OP_SNAP_RELEASE] = {"release", 50},
    [OP_ITER_NEW] = {"iter", 150},
    [OP_ITER_FREE] = {"iter_free", 60},
    [OP_SEEK] = {"seek", 900},
    [OP_SEEK_FIRST] = {"seek_first", 150},
    [OP_SEEK_LAST] = {"seek_last", 150},
    [OP_NEXT] = {"next", 700},
    [OP_PREV] = {"prev", 500},
    [OP_SCAN] = {"scan", 15},
    [OP_COMPACT] = {"compact", 4},
    [OP_REOPEN] = {"reopen", 3},
    [OP_DESTROY] = {"destroy", 1},
#ifdef DIFF_KV_API
    [OP_DELRANGE] = {"delete_range", 120},
    [OP_MERGE] = {"merge", 400},
#else
    [OP_DELRANGE] = {"delete_range", 0},
    [OP_MERGE] = {"merge", 0},
#endif
};

static unsigned total_weight;

static int pick_kind(uint64_t *s)
{
    uint32_t r = below(s, total_weight);
    for (int k = 0; k < NOPS; k++) {
        if (r < kinds[k].weight)
            return k;
        r -= kinds[k].weight;
    }
    return OP_GET;
}

/* Writes "#op " and the operation's kind. */
static void head(int kind)
{
    printf("#%" PRIu64 " %s", cur_op, kinds[kind].name);
}

/* The iterator's position, after a move. */
static void put_position(void *it)
{
    if (!be_valid(it)) {
        printf(be_iter_error(it) ? " error" : " end");
        return;
    }
    size_t kl, vl;
    const char *k = be_key(it, &kl);
    putchar(' ');
    put_key(k, kl);
    const char *v = be_value(it, &vl);
    if (!v && be_iter_error(it)) {
        printf("=error");
        return;
    }
    putchar('=');
    put_value(v, vl);
}

/* A walk of the whole store, forward or backward, with a fresh iterator
 * (at a snapshot slot's view, when that slot is live). */
static void scan(void *snap, int backward)
{
    void *it = be_iter_new(snap);
    if (!it) {
        printf(" error\n");
        return;
    }
    uint64_t h = FNV_START, n = 0;
    for (backward ? be_seek_last(it) : be_seek_first(it); be_valid(it);
         backward ? be_prev(it) : be_next(it)) {
        size_t kl, vl;
        const char *k = be_key(it, &kl);
        const char *v = be_value(it, &vl);
        if (!v && be_iter_error(it))
            break;
        h = fnv(k, kl, fnv(&kl, sizeof kl, h));
        h = fnv(v, vl, fnv(&vl, sizeof vl, h));
        n++;
        if (verbose) {
            printf("\n   ");
            put_key(k, kl);
            putchar('=');
            put_value(v, vl);
        }
    }
    printf(" n=%" PRIu64 " h=%016" PRIx64 "%s\n", n, h, be_iter_error(it) ? " error" : "");
    be_iter_free(it);
}

static void free_slots(void)
{
    for (int i = 0; i < SLOTS; i++) {
        if (iters[i])
            be_iter_free(iters[i]);
        iters[i] = NULL;
    }
    for (int i = 0; i < SLOTS; i++) {
        if (snaps[i])
            be_snap_release(snaps[i]);
        snaps[i] = NULL;
    }
}

/* The two ends of a range, in the store's order (a <= b). */
static void range_of(uint64_t *s, char *a, size_t *al, char *b, size_t *bl)
{
    *al = probe_key(s, a);
    *bl = probe_key(s, b);
    if (order(a, *al, b, *bl) > 0) {
        char t[KEY_MAX];
        size_t tl = *al;
        memcpy(t, a, tl);
        memcpy(a, b, *bl);
        *al = *bl;
        memcpy(b, t, tl);
        *bl = tl;
    }
}

/* Runs operation number cur_op (or, print_only, describes it). */
static void run_op(int print_only)
{
    uint64_t s = seed * 0x2545f4914f6cdd1du ^ (cur_op + 1) * 0x9e3779b97f4a7c15u;
    splitmix(&s);
    int kind = pick_kind(&s);
    char k[KEY_MAX], k2[KEY_MAX];
    size_t kl = key_of(below(&s, key_space), k), k2l;
    int slot = (int)below(&s, SLOTS);
    int sync = below(&s, 2000) == 0; /* fdatasync is slow on disk */
    /* A read at a snapshot slot's view in one read of three. */
    int snap_slot = below(&s, 3) == 0 ? (int)below(&s, SLOTS) : -1;
    head(kind);
    switch (kind) {
    case OP_PUT:
    case OP_MERGE: {
        size_t vl = kind == OP_MERGE ? below(&s, 20) : value_len(&s);
        uint64_t vs = splitmix(&s);
        putchar(' ');
        put_key(k, kl);
        printf(" %zu%s", vl, sync ? " sync" : "");
        if (print_only)
            break;
        const char *v = value_of(vs, vl);
#ifdef DIFF_KV_API
        if (kind == OP_MERGE) {
            printf(be_merge(k, kl, v, vl) ? " error" : " ok");
            break;
        }
#endif
        printf(be_put(k, kl, v, vl, sync) ? " error" : " ok");
        break;
    }
    case OP_DEL:
        putchar(' ');
        put_key(k, kl);
        if (!print_only)
            printf(inject && kl == 3 && !memcmp(k, "abc", 3) ? " ok"
                   : be_del(k, kl)                           ? " error"
                                                             : " ok");
        break;
    case OP_DELRANGE:
        range_of(&s, k, &kl, k2, &k2l);
        putchar(' ');
        put_key(k, kl);
        putchar(' ');
        put_key(k2, k2l);
#ifdef DIFF_KV_API
        if (!print_only)
            printf(be_delete_range(k, kl, k2, k2l) ? " error" : " ok");
#endif
        break;
    case OP_BATCH: {
        uint32_t n = 1 + below(&s, 8);
        /* One batch in four is written as two, the second appended to
         * the first from entry `split` on. */
        uint32_t split = below(&s, 4) == 0 ? below(&s, n) : n;
        printf(" %" PRIu32 "%s", n, sync ? " sync" : "");
        if (split < n)
            printf(" split %" PRIu32, split);
        if (!print_only)
            be_batch_begin();
        for (uint32_t i = 0; i < n; i++) {
            if (i == split && !print_only)
                be_batch_second();
            kl = key_of(below(&s, key_space), k);
            uint32_t what = below(&s, 10);
            size_t vl = value_len(&s);
            if (vl >= LARGE_VALUE)
                vl = 100; /* no 1 MiB values in batches: puts carry enough */
            uint64_t vs = splitmix(&s);
#ifdef DIFF_KV_API
            /* A range delete; not under the reverse order, where
             * kv_batch_delete_range refuses every range whose ends are not
             * in bytewise order too (kv.h: a batch knows no comparator). */
            if (what == 8 && !reverse_order) {
                range_of(&s, k, &kl, k2, &k2l);
                printf(" [");
                put_key(k, kl);
                put_key(k2, k2l);
                putchar(')');
                if (!print_only)
                    be_batch_delete_range(k, kl, k2, k2l);
                continue;
            }
            if (what == 9) {
                printf(" +");
                put_key(k, kl);
                if (!print_only)
                    be_batch_merge(k, kl, value_of(vs, vl % 20), vl % 20);
                continue;
            }
#endif
            if (what < 3) {
                printf(" -");
                put_key(k, kl);
                if (!print_only)
                    be_batch_del(k, kl);
            } else {
                putchar(' ');
                put_key(k, kl);
                printf("=%zu", vl);
                if (!print_only)
                    be_batch_put(k, kl, value_of(vs, vl), vl);
            }
        }
        if (print_only)
            break;
        /* The batch as the store reads it back (appended, iterated), then
         * written. */
        printf(" %016" PRIx64, be_batch_digest(split < n));
        printf(be_batch_write(sync) ? " error" : " ok");
        break;
    }
    case OP_GET: {
        putchar(' ');
        put_key(k, kl);
        if (snap_slot >= 0)
            printf(" @%d", snap_slot);
        if (print_only)
            break;
        if (snap_slot >= 0 && !snaps[snap_slot]) {
            printf(" no-snapshot");
            break;
        }
        char *v = NULL;
        size_t vl = 0;
        int r = be_get(snap_slot >= 0 ? snaps[snap_slot] : NULL, k, kl, &v, &vl);
        if (r < 0)
            printf(" error");
        else if (r == 0)
            printf(" absent");
        else {
            putchar(' ');
            put_value(v, vl);
            be_free(v);
        }
        break;
    }
    case OP_SNAP_NEW:
        printf(" %d", slot);
        if (print_only)
            break;
        if (snaps[slot])
            be_snap_release(snaps[slot]);
        snaps[slot] = be_snap_new();
        printf(snaps[slot] ? " ok" : " error");
        break;
    case OP_SNAP_RELEASE:
        printf(" %d", slot);
        if (print_only)
            break;
        /* An iterator made at the snapshot keeps its view (it holds what it
         * reads): releasing the snapshot under it is allowed. */
        if (snaps[slot])
            be_snap_release(snaps[slot]);
        printf(snaps[slot] ? " ok" : " empty");
        snaps[slot] = NULL;
        break;
    case OP_ITER_NEW:
        printf(" %d", slot);
        if (snap_slot >= 0)
            printf(" @%d", snap_slot);
        if (print_only)
            break;
        if (iters[slot])
            be_iter_free(iters[slot]);
        iters[slot] = be_iter_new(snap_slot >= 0 ? snaps[snap_slot] : NULL);
        printf(iters[slot] ? " ok" : " error");
        break;
    case OP_ITER_FREE:
        printf(" %d", slot);
        if (print_only)
            break;
        if (iters[slot])
            be_iter_free(iters[slot]);
        printf(iters[slot] ? " ok" : " empty");
        iters[slot] = NULL;
        break;
    case OP_SEEK:
    case OP_SEEK_FIRST:
    case OP_SEEK_LAST:
    case OP_NEXT:
    case OP_PREV: {
        uint32_t steps = 1 + (below(&s, 4) == 0 ? below(&s, 40) : below(&s, 3));
        printf(" %d", slot);
        if (kind == OP_SEEK) {
            kl = probe_key(&s, k);
            putchar(' ');
            put_key(k, kl);
        } else if (kind == OP_NEXT || kind == OP_PREV)
            printf(" x%" PRIu32, steps);
        if (print_only)
            break;
        void *it = iters[slot];
        if (!it) {
            printf(" empty");
            break;
        }
        if (kind == OP_SEEK)
            be_seek(it, k, kl);
        else if (kind == OP_SEEK_FIRST)
            be_seek_first(it);
        else if (kind == OP_SEEK_LAST)
            be_seek_last(it);
        else {
            /* Steps only from a valid position (LevelDB requires it). */
            for (uint32_t i = 0; i < steps && be_valid(it); i++) {
                kind == OP_NEXT ? be_next(it) : be_prev(it);
                put_position(it);
            }
            if (!be_valid(it))
                printf(" |");
            break;
        }
        put_position(it);
        break;
    }
    case OP_SCAN: {
        int backward = below(&s, 2);
        printf("%s", backward ? " backward" : " forward");
        if (snap_slot >= 0)
            printf(" @%d", snap_slot);
        if (print_only)
            break;
        if (snap_slot >= 0 && !snaps[snap_slot]) {
            printf(" no-snapshot");
            break;
        }
        scan(snap_slot >= 0 ? snaps[snap_slot] : NULL, backward);
        return;
    }
    case OP_COMPACT: {
        uint32_t shape = below(&s, 4);
        range_of(&s, k, &kl, k2, &k2l);
        /* shape: 0 the whole store, 1 open start, 2 open end, 3 both keys. */
        const char *a = shape == 0 || shape == 1 ? NULL : k;
        const char *b = shape == 0 || shape == 2 ? NULL : k2;
        putchar(' ');
        a ? put_key(k, kl) : (void)printf("-");
        putchar(' ');
        b ? put_key(k2, k2l) : (void)printf("-");
        if (!print_only)
            be_compact(a, a ? kl : 0, b, b ? k2l : 0);
        break;
    }
    case OP_REOPEN: {
        /* One reopen in four repairs the closed store first: a repair of
         * a cleanly closed store must keep every answer. */
        int repair = below(&s, 4) == 0;
        if (repair)
            printf(" repair");
        if (print_only)
            break;
        /* Iterators and snapshots go first: neither store allows them
         * past a close. */
        free_slots();
        be_close();
        if (repair && !raw_repair) {
            /* An open and a close first. LevelDB deletes the tables a
             * compaction replaced after later compactions or at its next
             * open, so some may still be in the directory at a close; its
             * repair takes every table it finds, and one left behind brings
             * back older values and keys whose deletes a compaction has
             * since dropped (found by this test; kv's repair answered
             * right). The open lets LevelDB remove them first
             * (doc/reliability.md). */
            be_open();
            be_close();
        }
        if (repair && be_repair())
            printf(" error");
        be_open();
        /* And one compaction of everything after. LevelDB's repair puts
         * every table in level 0, where its point reads trust file numbers
         * for age; a compaction's output can be numbered after a flush of
         * newer data made while it ran, and a get then returns the older
         * value (now and then: timing decides the numbers; kv answered
         * right). A compaction merges by sequence number and puts that
         * right; kv gets the same call. */
        if (repair && !raw_repair)
            be_compact(NULL, 0, NULL, 0);
        break;
    }
    case OP_DESTROY:
        if (print_only)
            break;
        free_slots();
        be_close();
        printf(be_destroy() ? " error" : " ok");
        be_open();
        break;
    }
    putchar('\n');
}

/* ---- main ---------------------------------------------------------------------------------- */

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* --only FILE: a bitmap of the operations to run. */
static unsigned char *read_only_file(const char *path, uint64_t nops)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        perror(path);
        exit(2);
    }
    unsigned char *map = calloc(nops / 8 + 1, 1);
    if (!map)
        exit(2);
    uint64_t i;
    while (fscanf(f, "%" SCNu64, &i) == 1)
        if (i < nops)
            map[i / 8] |= (unsigned char)(1u << (i % 8));
    fclose(f);
    return map;
}

static void usage(void)
{
    fprintf(stderr, "usage: difftest [--seed N] [--ops N] [--reverse] [--only FILE] [--print] "
                    "[--verbose] [--config N] [--configs] [--dir DIR] [--inject] [--raw-repair]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    uint64_t nops = 10000;
    const char *only = NULL, *dir = NULL;
    int print_only = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--seed") && v)
            seed = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(a, "--ops") && v)
            nops = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(a, "--only") && v)
            only = argv[++i];
        else if (!strcmp(a, "--dir") && v)
            dir = argv[++i];
        else if (!strcmp(a, "--reverse"))
            reverse_order = 1;
        else if (!strcmp(a, "--print"))
            print_only = 1;
        else if (!strcmp(a, "--verbose"))
            verbose = 1;
        else if (!strcmp(a, "--inject"))
            inject = 1;
        else if (!strcmp(a, "--raw-repair"))
            raw_repair = 1;
#ifdef DIFF_KV_API
        else if (!strcmp(a, "--config") && v)
            config = atoi(argv[++i]);
        else if (!strcmp(a, "--configs")) {
            printf("%d\n", NCONFIGS);
            for (int c = 0; c < NCONFIGS; c++)
                fprintf(stderr, "config %d: %s\n", c, config_names[c]);
            return 0;
        }
#else
        else if (!strcmp(a, "--config") && v)
            i++; /* one store, one configuration: accepted and ignored */
#endif
        else
            usage();
    }
#ifdef DIFF_KV_API
    if (config < 0 || config >= NCONFIGS)
        usage();
#endif
    for (int k = 0; k < NOPS; k++)
        total_weight += kinds[k].weight;
    static const uint32_t spaces[] = {40, 400, 4000};
    key_space = spaces[seed % 3];
    unsigned char *map = only ? read_only_file(only, nops) : NULL;
    value_buf = malloc(LARGE_VALUE + 8192);
    if (!value_buf)
        return 3;
    /* The transcript is long: a big buffer, flushed at exit. */
    static char outbuf[1 << 16];
    setvbuf(stdout, outbuf, _IOFBF, sizeof outbuf);
    printf("# seed %" PRIu64 " ops %" PRIu64 " keys %" PRIu32 "%s\n", seed, nops, key_space,
           reverse_order ? " reverse" : "");
    if (print_only) {
        for (cur_op = 0; cur_op < nops; cur_op++)
            if (!map || map[cur_op / 8] & (1u << (cur_op % 8)))
                run_op(1);
        free(map);
        free(value_buf);
        return 0;
    }

    if (!dir)
        dir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char root[400];
    snprintf(root, sizeof root, "%s/difftest.XXXXXX", dir);
    if (!mkdtemp(root)) {
        perror(root);
        return 3;
    }
    snprintf(dbdir, sizeof dbdir, "%s/db", root);
    set_options();
#ifdef DIFF_KV_API
    if (kv_batch_new(&batch) != KV_OK)
        return 3;
#else
    batch = leveldb_writebatch_create();
    batch2 = leveldb_writebatch_create();
#endif
    be_open();
#ifdef DIFF_KV_API
    if (opts.use_direct_reads) {
        /* O_DIRECT refused (tmpfs): kv reads through the page cache then,
         * which this run would not tell from the base. Said, and skipped. */
        kv_put(db, "probe", 5, "x", 1);
        kv_flush(db);
        struct kv_stats st;
        if (kv_stats(db, &st) == KV_OK && st.direct_reads_refused) {
            fprintf(stderr,
                    "difftest: config %d: %s refuses O_DIRECT: skipped (use --dir "
                    "on a disk file system)\n",
                    config, dir);
            kv_close(db);
            kv_batch_free(batch);
            free(map);
            free(value_buf);
            nftw(root, remove_one, 16, FTW_DEPTH | FTW_PHYS);
            return 77;
        }
        kv_delete(db, "probe", 5);
    }
#endif
    for (cur_op = 0; cur_op < nops; cur_op++)
        if (!map || map[cur_op / 8] & (1u << (cur_op % 8)))
            run_op(0);
    free_slots();
    be_close();
    printf("# end\n");
#ifdef DIFF_KV_API
    kv_batch_free(batch);
#else
    leveldb_writebatch_destroy(batch);
    leveldb_writebatch_destroy(batch2);
    leveldb_options_destroy(lopts);
    leveldb_comparator_destroy(lcmp);
    leveldb_filterpolicy_destroy(lpolicy);
    leveldb_cache_destroy(lcache);
    leveldb_readoptions_destroy(ropts);
    leveldb_writeoptions_destroy(wopts);
    leveldb_writeoptions_destroy(wsync);
#endif
    free(map);
    free(value_buf);
    if (nftw(root, remove_one, 16, FTW_DEPTH | FTW_PHYS) != 0)
        perror(root);
    return 0;
}
