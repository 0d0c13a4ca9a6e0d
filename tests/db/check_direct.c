/* check_direct.c - direct reads (KV_SST_OPEN_DIRECT, kv_options
 * use_direct_reads): a table read with O_DIRECT gives the bytes a table
 * read through the page cache gives, key by key and in iteration both
 * ways, for values of every size (several over 4 KiB, so blocks cross the
 * 4096-byte units) and blocks compressed or not, with and without a block
 * cache and with a pool that closes and reopens the files; its device
 * reads are counted, and a block the cache holds is not read again. A
 * store with use_direct_reads gives the same answers as one without, before
 * and after reopening, and counts device reads per get. Where the file
 * system refuses O_DIRECT (an open that fails with EINVAL, made here by
 * the I/O seam; or tmpfs, which has no device) the store works and says so.
 *
 * The tables that must be read with O_DIRECT are written under the
 * current directory (ctest runs this in the build tree), not TMPDIR,
 * which may be tmpfs. */
#define _GNU_SOURCE /* O_DIRECT */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>

#include <kv/kv.h>
#include <kv/sstable.h>

#include "fixture.h"
#include "util/file.h"
#include "../sstable/internal.h" /* kv_sst_reader_open_ex, kv_sst_reader_direct */

#define TMPFS_MAGIC_ 0x01021994ul /* <linux/magic.h> TMPFS_MAGIC */

/* ---- fixture: one temporary directory per test, on a disk ------------------------- */

/* The fixture's directory, which must not be on tmpfs (the root is made
 * in the working directory: test_suite). */
static void setup_disk(void)
{
    test_setup();
    struct statfs sf;
    ck_assert_int_eq(statfs(test_dir, &sf), 0);
    ck_assert_msg((unsigned long)sf.f_type != TMPFS_MAGIC_,
                  "%s is on tmpfs: run this test from a directory on a disk", test_dir);
}

static void path_in(char *p, size_t n, const char *base, const char *name)
{
    int len = snprintf(p, n, "%s/%s", base, name);
    ck_assert(len > 0 && (size_t)len < n);
}

/* ---- keys and values -------------------------------------------------------------- */

#define NKEYS 3000
#define VAL_MAX 20000

/* Value `id` at version `ver`: every 9th one 4 KiB to 20 KiB, others 0 to
 * 400 bytes; odd ids repeat a short pattern (zstd shrinks their blocks),
 * even ids are random bytes (stored raw). */
static size_t val_of(uint32_t id, uint32_t ver, uint8_t *v)
{
    uint64_t s = splitmix(((uint64_t)id << 8) ^ ver);
    size_t len = id % 9 == 0 ? 4096 + (size_t)(s % (VAL_MAX - 4096)) : (size_t)(s % 401);
    for (size_t i = 0; i < len; i++)
        v[i] = id % 2 ? (uint8_t)('a' + (i + id) % 7) : (uint8_t)(splitmix(s + i) >> 56);
    return len;
}

/* ---- tables ----------------------------------------------------------------------- */

static void write_table(const char *path, int compression, size_t block_size)
{
    kv_sst_options o;
    kv_sst_options_init(&o);
    o.compression = compression;
    o.block_size = block_size;
    kv_sst_writer *w;
    ck_assert_int_eq(kv_sst_writer_new(path, &o, &w), KV_OK);
    static uint8_t v[VAL_MAX];
    char k[32];
    for (uint32_t id = 0; id < NKEYS; id++) {
        size_t kl = key_of(k, sizeof k, "key-", 8, id), vl = val_of(id, 0, v);
        ck_assert_int_eq(kv_sst_writer_add(w, k, kl, v, vl), KV_OK);
    }
    ck_assert_int_eq(kv_sst_writer_finish(w, NULL), KV_OK);
}

/* Every key of r against the model, and a key that is absent. */
static void check_gets(kv_sst_reader *r)
{
    static uint8_t want[VAL_MAX];
    char k[32];
    for (uint32_t id = 0; id < NKEYS; id++) {
        size_t kl = key_of(k, sizeof k, "key-", 8, id), wl = val_of(id, 0, want);
        void *got;
        size_t gl;
        int rc = kv_sst_get(r, k, kl, &got, &gl);
        ck_assert_msg(rc == KV_OK, "get %s: %s: %s", k, kv_strerror(rc), kv_sst_error_text());
        ck_assert_uint_eq(gl, wl);
        ck_assert_msg(memcmp(got, want, wl) == 0, "get %s: other bytes", k);
        kv_free(got);
    }
    void *got;
    size_t gl;
    ck_assert_int_eq(kv_sst_get(r, "key-x", 5, &got, &gl), KV_NOTFOUND);
}

/* Forwards and backwards over r: every key in order, every value. */
static void check_iter(kv_sst_reader *r)
{
    static uint8_t want[VAL_MAX];
    char k[32];
    kv_sst_iter *it;
    ck_assert_int_eq(kv_sst_iter_new(r, &it), KV_OK);
    uint32_t id = 0;
    for (kv_sst_iter_seek_first(it); kv_sst_iter_valid(it); kv_sst_iter_next(it), id++) {
        size_t kl, vl, klw = key_of(k, sizeof k, "key-", 8, id), wl = val_of(id, 0, want);
        const void *key = kv_sst_iter_key(it, &kl), *val = kv_sst_iter_value(it, &vl);
        ck_assert(kl == klw && memcmp(key, k, kl) == 0);
        ck_assert(vl == wl && memcmp(val, want, wl) == 0);
    }
    ck_assert_int_eq(kv_sst_iter_status(it), KV_OK);
    ck_assert_uint_eq(id, NKEYS);
    for (kv_sst_iter_seek_last(it); kv_sst_iter_valid(it); kv_sst_iter_prev(it)) {
        id--;
        size_t kl, vl, klw = key_of(k, sizeof k, "key-", 8, id), wl = val_of(id, 0, want);
        const void *key = kv_sst_iter_key(it, &kl), *val = kv_sst_iter_value(it, &vl);
        ck_assert(kl == klw && memcmp(key, k, kl) == 0);
        ck_assert(vl == wl && memcmp(val, want, wl) == 0);
    }
    ck_assert_int_eq(kv_sst_iter_status(it), KV_OK);
    ck_assert_uint_eq(id, 0);
    kv_sst_iter_free(it);
}

/* Opens `path` with flags (and the cache and pool given), checks every key
 * and both iterations; returns its counters, and in *gets (may be NULL)
 * those of the gets alone, and in *iters those of the two iterations. */
static kv_sst_counters read_all_of(const char *path, unsigned flags, kv_sst_cache *c,
                                   kv_sst_files *f, int want_direct, kv_sst_counters *gets,
                                   kv_sst_counters *iters)
{
    kv_sst_reader *r;
    int rc = kv_sst_reader_open_ex(path, c, f, 7, flags, &r);
    ck_assert_msg(rc == KV_OK, "open %s: %s: %s", path, kv_strerror(rc), kv_sst_error_text());
    ck_assert_int_eq(kv_sst_reader_direct(r), want_direct);
    kv_sst_counters g, i, n;
    check_gets(r);
    kv_sst_reader_counters(r, &g);
    check_iter(r);
    kv_sst_reader_counters(r, &i);
    ck_assert_int_eq(kv_sst_verify(r), KV_OK);
    kv_sst_reader_counters(r, &n);
    kv_sst_reader_close(r);
    if (gets)
        *gets = g;
    if (iters) {
        iters->data_block_reads = i.data_block_reads - g.data_block_reads;
        iters->device_reads = i.device_reads - g.device_reads;
        iters->device_read_bytes = i.device_read_bytes - g.device_read_bytes;
    }
    return n;
}

START_TEST(direct_table_reads_equal_buffered)
{
    static const struct {
        int compression;
        size_t block_size;
    } kinds[] = {{KV_COMPRESSION_NONE, 4096},
                 {KV_COMPRESSION_ZSTD, 4096},
                 {KV_COMPRESSION_NONE, 1000}, /* blocks that start mid-unit, and end in the next */
                 {KV_COMPRESSION_ZSTD, 65536}};
    for (size_t t = 0; t < sizeof kinds / sizeof kinds[0]; t++) {
        char path[600], name[32];
        snprintf(name, sizeof name, "t%zu.sst", t);
        test_path(path, sizeof path, name);
        write_table(path, kinds[t].compression, kinds[t].block_size);

        kv_sst_counters b = read_all_of(path, 0, NULL, NULL, KV_SST_DIRECT_OFF, NULL, NULL);
        ck_assert_uint_eq(b.device_reads, 0);
        ck_assert_uint_eq(b.device_read_bytes, 0);

        /* No cache: every block a get reads goes to the device, whole
         * units; an iterator reads 256 KiB at a time (KV_SST_READAHEAD; each
         * way, so about twice the table's data over that, and one more
         * read per turn), and gets its blocks from them. */
        kv_sst_counters g, it;
        kv_sst_counters d =
            read_all_of(path, KV_SST_OPEN_DIRECT, NULL, NULL, KV_SST_DIRECT_ON, &g, &it);
        ck_assert_uint_gt(g.data_block_reads, 0);
        ck_assert_uint_eq(g.device_reads, g.data_block_reads);
        ck_assert_uint_eq(d.device_read_bytes % KV_SST_DIRECT_ALIGN, 0);
        ck_assert_uint_ge(d.device_read_bytes, d.bytes_read);
        kv_sst_properties tp;
        {
            kv_sst_reader *r;
            ck_assert_int_eq(kv_sst_reader_open(path, NULL, 1, &r), KV_OK);
            kv_sst_reader_properties(r, &tp);
            kv_sst_reader_close(r);
        }
        ck_assert_uint_eq(it.data_block_reads, 2 * tp.data_blocks);
        ck_assert_uint_le(it.device_reads, 2 * (tp.data_stored_bytes / (256u << 10) + 2));
        ck_assert_uint_lt(it.device_reads, it.data_block_reads / 4);

        /* A cache: the gets fill it, so the iterations and verify find
         * every block there (it holds the whole table). */
        kv_sst_cache *c;
        ck_assert_int_eq(kv_sst_cache_new(64u << 20, &c), KV_OK);
        kv_sst_counters dc =
            read_all_of(path, KV_SST_OPEN_DIRECT, c, NULL, KV_SST_DIRECT_ON, NULL, NULL);
        kv_sst_properties p;
        {
            kv_sst_reader *r;
            ck_assert_int_eq(kv_sst_reader_open(path, NULL, 1, &r), KV_OK);
            kv_sst_reader_properties(r, &p);
            kv_sst_reader_close(r);
        }
        ck_assert_uint_eq(dc.device_reads, p.data_blocks);
        ck_assert_uint_eq(dc.device_reads, dc.data_block_reads);
        kv_sst_cache_free(c);

        /* A pool of one file, shared with a second table: each reader's
         * file is closed and opened again (with O_DIRECT) between reads. */
        kv_sst_files *f;
        ck_assert_int_eq(kv_sst_files_new(1, &f), KV_OK);
        kv_sst_reader *other;
        ck_assert_int_eq(kv_sst_reader_open_ex(path, NULL, f, 8, KV_SST_OPEN_DIRECT, &other),
                         KV_OK);
        kv_sst_reader *r;
        ck_assert_int_eq(kv_sst_reader_open_ex(path, NULL, f, 9, KV_SST_OPEN_DIRECT, &r), KV_OK);
        char k[32];
        static uint8_t want[VAL_MAX];
        for (uint32_t id = 0; id < NKEYS; id += 97) {
            kv_sst_reader *which = id % 2 ? r : other;
            size_t kl = key_of(k, sizeof k, "key-", 8, id), wl = val_of(id, 0, want);
            void *got;
            size_t gl;
            ck_assert_int_eq(kv_sst_get(which, k, kl, &got, &gl), KV_OK);
            ck_assert(gl == wl && memcmp(got, want, wl) == 0);
            kv_free(got);
        }
        kv_sst_files_stats fs;
        kv_sst_files_stats_get(f, &fs);
        ck_assert_uint_gt(fs.reopens, 0);
        kv_sst_counters n;
        kv_sst_reader_counters(r, &n);
        ck_assert_uint_eq(n.device_reads, n.data_block_reads);
        ck_assert_uint_gt(n.device_reads, 0);
        kv_sst_reader_close(r);
        kv_sst_reader_close(other);
        kv_sst_files_free(f);
    }
    ck_assert_int_eq(kv_sst_reader_open_ex("x", NULL, NULL, 1, 2, &(kv_sst_reader *){NULL}),
                     KV_EINVAL);
}
END_TEST

/* ---- the store -------------------------------------------------------------------- */

/* The store at p: direct reads or not, the given cache, small tables. */
static kv_db *open_direct(const char *p, int direct, size_t cache)
{
    kv_options o;
    kv_options_init(&o);
    o.use_direct_reads = direct;
    o.block_cache_size = cache;
    o.write_buffer_size = 256u << 10; /* several tables, compacted */
    o.target_file_size = 256u << 10;
    o.max_bytes_for_level_base = 1u << 20;
    o.compression = KV_COMPRESSION_ZSTD;
    return open_db(p, &o);
}

/* Writes every key at version 0, then rewrites every third at version 1
 * and deletes every fifth (a key both rewritten and deleted is deleted). */
static void fill(kv_db *db)
{
    static uint8_t v[VAL_MAX];
    char k[32];
    for (uint32_t id = 0; id < NKEYS; id++) {
        size_t kl = key_of(k, sizeof k, "key-", 8, id), vl = val_of(id, 0, v);
        ck_assert_int_eq(kv_put(db, k, kl, v, vl), KV_OK);
    }
    ck_assert_int_eq(kv_flush(db), KV_OK);
    for (uint32_t id = 0; id < NKEYS; id += 3) {
        size_t kl = key_of(k, sizeof k, "key-", 8, id), vl = val_of(id, 1, v);
        ck_assert_int_eq(kv_put(db, k, kl, v, vl), KV_OK);
    }
    for (uint32_t id = 0; id < NKEYS; id += 5) {
        size_t kl = key_of(k, sizeof k, "key-", 8, id);
        ck_assert_int_eq(kv_delete(db, k, kl), KV_OK);
    }
    ck_assert_int_eq(kv_flush(db), KV_OK);
}

/* What fill left for key id: its value in v (and its length), or -1. */
static long model(uint32_t id, uint8_t *v)
{
    if (id % 5 == 0)
        return -1;
    return (long)val_of(id, id % 3 == 0 ? 1 : 0, v);
}

/* Every key by kv_get and by an iterator, against the model. */
static void check_db(kv_db *db)
{
    static uint8_t want[VAL_MAX];
    char k[32];
    for (uint32_t id = 0; id < NKEYS; id++) {
        size_t kl = key_of(k, sizeof k, "key-", 8, id);
        long wl = model(id, want);
        void *got = NULL;
        size_t gl = 0;
        int rc = kv_get(db, k, kl, &got, &gl);
        if (wl < 0) {
            ck_assert_msg(rc == KV_NOTFOUND, "get %s: %s", k, kv_strerror(rc));
            continue;
        }
        ck_assert_msg(rc == KV_OK, "get %s: %s: %s", k, kv_strerror(rc), kv_error_text());
        ck_assert_uint_eq(gl, (size_t)wl);
        ck_assert_msg(memcmp(got, want, gl) == 0, "get %s: other bytes", k);
        kv_free(got);
    }
    kv_iter *it;
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    uint32_t id = 0;
    for (kv_iter_seek_first(it); kv_iter_valid(it); kv_iter_next(it), id++) {
        while (model(id, want) < 0)
            id++;
        size_t kl, vl, klw = key_of(k, sizeof k, "key-", 8, id);
        long wl = model(id, want);
        const void *key = kv_iter_key(it, &kl), *val = kv_iter_value(it, &vl);
        ck_assert_msg(kl == klw && memcmp(key, k, kl) == 0, "iterator: not %s", k);
        ck_assert(vl == (size_t)wl && memcmp(val, want, vl) == 0);
    }
    ck_assert_int_eq(kv_iter_status(it), KV_OK);
    while (id < NKEYS && model(id, want) < 0)
        id++;
    ck_assert_uint_eq(id, NKEYS);
    kv_iter_free(it);
}

START_TEST(direct_store_answers_equal_buffered)
{
    char p[600];
    test_path(p, sizeof p, "db");
    /* Written and compacted with direct reads on, read both ways, and
     * again after each reopen. */
    kv_db *db = open_direct(p, 1, 0);
    fill(db);
    ck_assert_int_eq(kv_compact_range(db, NULL, 0, NULL, 0), KV_OK);
    struct kv_stats s0, s1;
    get_stats(db, &s0);
    ck_assert_uint_eq(s0.direct_reads, 1);
    ck_assert_uint_eq(s0.direct_reads_refused, 0);
    ck_assert_uint_gt(s0.tables, 0);
    check_db(db);
    get_stats(db, &s1);
    /* No block cache: every data block a get read went to the device. */
    ck_assert_uint_gt(s1.device_reads, s0.device_reads);
    ck_assert_uint_eq(s1.device_reads - s0.device_reads,
                      s1.data_block_reads - s0.data_block_reads);
    ck_assert_uint_ge(s1.device_read_bytes - s0.device_read_bytes,
                      s1.data_block_read_bytes - s0.data_block_read_bytes);
    ck_assert_int_eq(kv_close(db), KV_OK);

    for (int round = 0; round < 2; round++) {
        int direct = round == 0 ? 0 : 1;
        db = open_direct(p, direct, 0);
        check_db(db);
        get_stats(db, &s1);
        ck_assert_uint_eq(s1.direct_reads, (uint64_t)direct);
        if (direct)
            ck_assert_uint_eq(s1.device_reads, s1.data_block_reads);
        else
            ck_assert_uint_eq(s1.device_reads, 0);
        ck_assert_int_eq(kv_close(db), KV_OK);
    }

    /* With a block cache, a key read again comes from the cache: no
     * device read. */
    db = open_direct(p, 1, 8u << 20);
    char k[32];
    size_t kl = key_of(k, sizeof k, "key-", 8, 1);
    void *got;
    size_t gl;
    ck_assert_int_eq(kv_get(db, k, kl, &got, &gl), KV_OK);
    kv_free(got);
    get_stats(db, &s0);
    ck_assert_uint_eq(s0.device_reads, 1);
    for (int i = 0; i < 10; i++) {
        ck_assert_int_eq(kv_get(db, k, kl, &got, &gl), KV_OK);
        kv_free(got);
    }
    get_stats(db, &s1);
    ck_assert_uint_eq(s1.device_reads, s0.device_reads);
    ck_assert_uint_eq(s1.block_cache_hits, s0.block_cache_hits + 10);
    /* The metrics carry the counters. */
    char *text;
    ck_assert_int_eq(kv_metrics_text(db, &text), KV_OK);
    ck_assert_ptr_nonnull(strstr(text, "\nkv_device_reads_total 1\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nkv_direct_reads 1\n"));
    kv_free(text);
    ck_assert_int_eq(kv_close(db), KV_OK);
}
END_TEST

/* ---- refusals ----------------------------------------------------------------------- */

/* An I/O table whose open refuses O_DIRECT as a file system without it
 * does (EINVAL). */
static kv_file_io refusing;

static int refuse_direct(const char *path, int flags, mode_t mode, uintptr_t *tag)
{
    if (flags & O_DIRECT) {
        errno = EINVAL;
        return -1;
    }
    return kv_file_io_os.open(path, flags, mode, tag);
}

static void check_refused_store(const char *p)
{
    kv_db *db = open_direct(p, 1, 0);
    fill(db);
    check_db(db);
    struct kv_stats s;
    get_stats(db, &s);
    ck_assert_uint_gt(s.tables, 0);
    ck_assert_uint_eq(s.direct_reads, 0);
    ck_assert_uint_ge(s.direct_reads_refused, s.tables);
    ck_assert_uint_eq(s.device_reads, 0);
    ck_assert_uint_eq(s.device_read_bytes, 0);
    ck_assert_int_eq(kv_close(db), KV_OK);
    db = open_direct(p, 1, 0); /* reopened: the tables are refused again */
    check_db(db);
    get_stats(db, &s);
    ck_assert_uint_eq(s.direct_reads, 0);
    ck_assert_uint_ge(s.direct_reads_refused, s.tables); /* and the tables compactions wrote */
    ck_assert_int_eq(kv_close(db), KV_OK);
}

START_TEST(direct_refused_by_open_falls_back)
{
    refusing = kv_file_io_os;
    refusing.open = refuse_direct;
    kv_file_set_io(&refusing);
    char p[600];
    int refused = 0;
    kv_file *f;
    test_path(p, sizeof p, "plain");
    FILE *w = fopen(p, "w");
    ck_assert_ptr_nonnull(w);
    fputs("0123456789", w);
    fclose(w);
    ck_assert_int_eq(kv_file_open_direct(p, &refused, &f), KV_OK);
    ck_assert_int_eq(refused, 1);
    ck_assert_int_eq(kv_file_direct(f), 0);
    char b[4];
    ck_assert_int_eq(kv_file_pread(f, 3, b, 4), KV_OK);
    ck_assert(memcmp(b, "3456", 4) == 0);
    kv_file_close(f);
    test_path(p, sizeof p, "db");
    check_refused_store(p);
    kv_file_set_io(NULL);
}
END_TEST

/* A store on tmpfs: Linux before 6.6 refuses O_DIRECT there, later ones
 * accept it but read from memory; either way it counts as refused. The
 * machines this project runs on have /dev/shm on tmpfs: asserted, so that
 * this check is never skipped silently. */
START_TEST(direct_on_tmpfs_falls_back)
{
    struct statfs sf;
    ck_assert_msg(statfs("/dev/shm", &sf) == 0 && (unsigned long)sf.f_type == TMPFS_MAGIC_,
                  "/dev/shm is not tmpfs here: this test needs a tmpfs");
    char shm[64];
    snprintf(shm, sizeof shm, "/dev/shm/kv-direct-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(shm));
    char p[600];
    path_in(p, sizeof p, shm, "db");
    check_refused_store(p);
    ck_assert_int_eq(nftw(shm, remove_one, 16, FTW_DEPTH | FTW_PHYS), 0);
}
END_TEST

/* A file read with O_DIRECT: any offset and length, through the aligned
 * path, gives the file's bytes; reads past the end say where it ends. */
START_TEST(direct_file_reads_any_range)
{
    char p[600];
    test_path(p, sizeof p, "bytes");
    enum { N = 3 * 4096 + 123 };
    static uint8_t data[N];
    for (size_t i = 0; i < N; i++)
        data[i] = (uint8_t)(splitmix(i) >> 56);
    FILE *w = fopen(p, "w");
    ck_assert_ptr_nonnull(w);
    ck_assert_uint_eq(fwrite(data, 1, N, w), N);
    fclose(w);
    int refused = -1;
    kv_file *f;
    ck_assert_int_eq(kv_file_open_direct(p, &refused, &f), KV_OK);
    ck_assert_int_eq(refused, 0);
    ck_assert_int_eq(kv_file_direct(f), 1);
    static const struct {
        uint64_t off;
        size_t len;
    } r[] = {{0, 1}, {0, 4096}, {1, 4096}, {4095, 2}, {4000, 5000}, {N - 1, 1}, {N - 200, 200},
             {100, N - 100}, {N, 0}};
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) {
        uint8_t *buf;
        uint64_t dev;
        ck_assert_int_eq(kv_file_read_alloc(f, r[i].off, r[i].len, &buf, &dev), KV_OK);
        ck_assert(memcmp(buf, data + r[i].off, r[i].len) == 0);
        ck_assert_uint_eq(dev % 4096, 0);
        ck_assert_uint_ge(dev, r[i].len);
        free(buf);
        uint8_t small[N];
        ck_assert_int_eq(kv_file_pread(f, r[i].off, small, r[i].len), KV_OK);
        ck_assert(memcmp(small, data + r[i].off, r[i].len) == 0);
    }
    uint8_t *buf;
    ck_assert_int_eq(kv_file_read_alloc(f, N - 10, 11, &buf, NULL), KV_ECORRUPT);
    ck_assert_int_eq(kv_file_read_alloc(f, N + 5000, 1, &buf, NULL), KV_ECORRUPT);
    kv_file_close(f);
}
END_TEST

Suite *test_suite(void)
{
    test_set_base("."); /* a disk, as a build directory is */
    Suite *s = suite_create("direct");
    TCase *tc = tcase_create("tables");
    tcase_add_checked_fixture(tc, setup_disk, test_teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, direct_file_reads_any_range);
    tcase_add_test(tc, direct_table_reads_equal_buffered);
    suite_add_tcase(s, tc);
    tc = tcase_create("store");
    tcase_add_checked_fixture(tc, setup_disk, test_teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, direct_store_answers_equal_buffered);
    tcase_add_test(tc, direct_refused_by_open_falls_back);
    tcase_add_test(tc, direct_on_tmpfs_falls_back);
    suite_add_tcase(s, tc);
    return s;
}
