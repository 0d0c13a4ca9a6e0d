/* gen_seeds.c - writes the seed corpora of fuzz_wal, fuzz_manifest,
 * fuzz_api and fuzz_shared into <out>/wal, <out>/manifest, <out>/api,
 * <out>/shared, fuzz_table's table with a zstd dictionary into
 * <out>/table/dict.sst and its tables with range tombstones (format
 * version 3) into <out>/table/range_tombstones*.sst, its tables with
 * scan filters (format version 4) into <out>/table/scan_filters*.sst,
 * fuzz_filter's seeds
 * of the counting, scalable and
 * rotating filters into <out>/filter, and fuzz_blob's blob files into
 * <out>/blob, fuzz_ingest's tables into <out>/ingest, and fuzz_range_filter's
 * range filters and keys into <out>/range_filter (which must exist):
 *     build-fuzz/fuzz/gen_seeds fuzz/corpus
 * rewrites fuzz/corpus/{wal,manifest,api,shared,blob,range_filter}/, table/dict.sst,
 * table/range_tombstones*.sst, table/scan_filters*.sst and the kinds' (and a
 * keyed filter's) seeds in fuzz/corpus/filter/ byte for byte, but for the
 * stripes that hold a shared file's key counts (picked by pid). Logs are written
 * by the store's own writer (kv_wal_append) where they can be; each seed
 * says in a comment below what it exercises. See README.md. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <kv/bloom.h>
#include <kv/counting_bloom.h>
#include <kv/kv.h>
#include <kv/range_filter.h>
#include <kv/rotating_bloom.h>
#include <kv/scalable_bloom.h>
#include <kv/sstable.h>

#include "../kv/batch.h"
#include "../kv/wal.h"
#include "../sstable/internal.h" /* range tombstones: kv_rtset_*, the writer's block */

static const char *out;

struct buf {
    uint8_t b[200000];
    size_t n;
};

static void put1(struct buf *b, unsigned v) { b->b[b->n++] = (uint8_t)v; }
static void putn(struct buf *b, const void *p, size_t n) { memcpy(b->b + b->n, p, n); b->n += n; }
static void put_le(struct buf *b, uint64_t v, int w) { for (int i = 0; i < w; i++) put1(b, (unsigned)(v >> (8 * i)) & 0xff); }

static void save(const char *sub, const char *name, const void *p, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s/%s", out, sub, name);
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    static uint8_t data[200000];
    if (!f) {
        perror(path);
        exit(1);
    }
    *n = fread(data, 1, sizeof data, f);
    fclose(f);
    return data;
}

/* ---- WAL ---- */

static kv_batch *batch(uint64_t seq)
{
    kv_batch *b;
    kv_batch_new(&b);
    kv_batch_set_seq(b->rep, seq);
    return b;
}

static void log_write(const char *name, uint64_t number, kv_batch **recs, const size_t *raw_lens, size_t n, size_t cut)
{
    char path[512];
    snprintf(path, sizeof path, "%s/wal/gen_seeds.tmp", out);
    unlink(path);
    kv_wal *w;
    if (kv_wal_create(path, number, &w) != KV_OK)
        exit(1);
    for (size_t i = 0; i < n; i++) {
        if (recs[i]) {
            kv_wal_append(w, recs[i]->rep, recs[i]->len);
        } else {
            uint8_t junk[64];
            for (size_t j = 0; j < raw_lens[i]; j++)
                junk[j] = (uint8_t)(j * 37 + 11);
            kv_wal_append(w, junk, raw_lens[i]);
        }
    }
    kv_wal_close(w);
    size_t len;
    uint8_t *d = slurp(path, &len);
    if (cut && cut < len)
        len = cut;
    save("wal", name, d, len);
    unlink(path);
}

static void frag(struct buf *b, int type, const uint8_t *p, size_t n, uint16_t tag)
{
    uint8_t h[9 + 200];
    h[4] = (uint8_t)n;
    h[5] = (uint8_t)(n >> 8);
    h[6] = (uint8_t)type;
    h[7] = (uint8_t)tag;
    h[8] = (uint8_t)(tag >> 8);
    memcpy(h + 9, p, n);
    uint32_t c = (uint32_t)XXH3_64bits(h + 4, 5 + n);
    for (int i = 0; i < 4; i++)
        h[i] = (uint8_t)(c >> (8 * i));
    putn(b, h, 9 + n);
}

/* Every log's records number their entries from 1 on, one after another,
 * as the store writes them: recovery stops at a record that breaks this
 * (recover.c, bad_sequence), so a seed that skipped would test only that. */
static void wal_seeds(void)
{
    kv_batch *r[4];
    size_t raw[4] = {0};
    r[0] = batch(1);
    kv_batch_put(r[0], "a", 1, "1", 1);
    kv_batch_put(r[0], "b", 1, "22", 2);
    kv_batch_delete(r[0], "c", 1);
    r[1] = batch(4);
    kv_batch_delete(r[1], "a", 1);
    r[2] = batch(5);
    kv_batch_put(r[2], "", 0, "", 0);
    log_write("batches.log", 7, r, raw, 3, 0);
    log_write("torn.log", 7, r, raw, 3, 60);
    log_write("other_tag.log", 8, r, raw, 1, 0);

    /* Sequences that skip ahead after the first record: replay stops
     * there, as at damage (the one seed that breaks the numbering). */
    kv_batch *gap[2] = {r[0], batch(10)};
    kv_batch_delete(gap[1], "a", 1);
    log_write("seq_gap.log", 7, gap, raw, 2, 0);
    kv_batch_free(gap[1]);

    kv_batch *one = batch(1);
    kv_batch_delete(one, "a", 1);
    kv_batch *nb[3] = {NULL, NULL, one};
    size_t nraw[3] = {0, 20, 0};
    log_write("not_batch.log", 7, nb, nraw, 3, 0);

    /* A batch cut into FIRST, MIDDLE, LAST in block 0, then a FULL one. */
    struct buf *b = calloc(1, sizeof *b);
    kv_batch *x = batch(1);
    kv_batch_put(x, "key", 3, "value", 5);
    kv_batch_put(x, "key2", 4, "value2", 6);
    kv_batch *x2 = batch(3);
    kv_batch_delete(x2, "a", 1);
    size_t third = x->len / 3;
    frag(b, 2, x->rep, third, 7);
    frag(b, 3, x->rep + third, third, 7);
    frag(b, 4, x->rep + 2 * third, x->len - 2 * third, 7);
    frag(b, 1, x2->rep, x2->len, 7);
    save("wal", "fragmented.log", b->b, b->n);

    /* A record spanning blocks 0 and 1, then a small one. */
    static uint8_t big[33000];
    memset(big, 'v', sizeof big);
    kv_batch *s[2] = {batch(1), batch(2)};
    kv_batch_put(s[0], "big", 3, big, 33000);
    kv_batch_put(s[1], "", 0, "", 0);
    log_write("span.log", 7, s, raw, 2, 0);

    /* A record leaving 4 bytes of padding at the end of block 0. */
    kv_batch *p[2] = {batch(1), batch(2)};
    kv_batch_put(p[1], "a", 1, "1", 1);
    kv_batch_put(p[1], "b", 1, "22", 2);
    kv_batch_delete(p[1], "c", 1);
    size_t want = KV_WAL_BLOCK - 4 - KV_WAL_HEADER; /* record bytes */
    /* header 12 + kind 1 + varint klen 1 + key 1 + varint vlen 3 + value */
    kv_batch_put(p[0], "p", 1, big, want - 12 - 1 - 1 - 1 - 3);
    if (p[0]->len != want)
        exit(2);
    log_write("padding.log", 7, p, raw, 2, 0);

    /* Issue 49's kinds: merge operands and range deletes (overlapping, and
     * an empty one that recovery ignores), written by
     * kv_batch_merge and kv_batch_delete_range; timed values and operands
     * (ttl_seconds), which only the commit writes, encoded here as it does
     * (kv_batch_stamp); and a put and a merge under a range delete of the
     * same record. */
    kv_batch *k[3] = {batch(1), batch(7), NULL};
    kv_batch_put(k[0], "a", 1, "1", 1);
    kv_batch_merge(k[0], "a", 1, "+", 1);
    kv_batch_delete_range(k[0], "b", 1, "d", 1);
    kv_batch_delete_range(k[0], "c", 1, "f", 1);
    kv_batch_delete_range(k[0], "e", 1, "e", 1);
    kv_batch_merge(k[0], "m", 1, "op", 2);
    kv_batch_put(k[1], "c", 1, "3", 1);
    kv_batch_merge(k[1], "c", 1, "x", 1);
    kv_batch_delete_range(k[1], "", 0, "c\xff", 2);
    {
        kv_batch *t = batch(10), *plain = batch(0);
        kv_batch_put(plain, "t", 1, "timed", 5);
        kv_batch_merge(plain, "t", 1, "op", 2);
        kv_batch_merge(plain, "u", 1, "", 0);
        uint32_t n = kv_batch_count(plain);
        size_t body = plain->len - KV_BATCH_HEADER;
        uint8_t *rep = malloc(KV_BATCH_HEADER + body + n * KV_BATCH_STAMP_GROWTH);
        if (!rep)
            exit(1);
        memcpy(rep, t->rep, KV_BATCH_HEADER);
        rep[8] = (uint8_t)n; /* the count, n < 256 */
        size_t len = KV_BATCH_HEADER + kv_batch_stamp(rep + KV_BATCH_HEADER,
                                                      plain->rep + KV_BATCH_HEADER, body, n,
                                                      1700000000u);
        free(t->rep);
        t->rep = rep;
        t->len = t->cap = len;
        t->count = n;
        k[2] = t;
        kv_batch_free(plain);
    }
    log_write("kinds.log", 7, k, raw, 3, 0);
    /* The same, torn inside the timed record. */
    log_write("kinds_torn.log", 7, k, raw, 3, 120);
    kv_batch_free(k[0]);
    kv_batch_free(k[1]);
    kv_batch_free(k[2]);
    kv_batch_free(r[0]);
    kv_batch_free(r[1]);
    kv_batch_free(r[2]);
    kv_batch_free(one);
    kv_batch_free(x);
    kv_batch_free(x2);
    kv_batch_free(s[0]);
    kv_batch_free(s[1]);
    kv_batch_free(p[0]);
    kv_batch_free(p[1]);
    free(b);
}

/* ---- manifest ---- */

static void state_rec(struct buf *b, int sel, uint32_t fmt, int good_sum, int version)
{
    uint8_t v[48] = {0};
    v[0] = (uint8_t)version;
    v[1] = 1;
    v[4] = (uint8_t)fmt;
    v[8] = 12;  /* next_file */
    v[16] = 40; /* last_seq */
    v[24] = 11; /* log_number */
    v[32] = 0x5e;
    uint64_t c = good_sum ? XXH3_64bits(v, 40) : 0;
    for (int i = 0; i < 8; i++)
        v[40 + i] = (uint8_t)(c >> (8 * i));
    put1(b, (unsigned)sel);
    put1(b, 5);
    put_le(b, 48, 2);
    putn(b, "state", 5);
    putn(b, v, 48);
}

static void table_rec(struct buf *b, int sel, int version, int flags, uint32_t level, uint64_t number,
                      const char *lo, const char *hi, int good_sum)
{
    size_t s = strlen(lo), l = strlen(hi), n = 88 + s + l;
    uint8_t v[300] = {0};
    v[0] = (uint8_t)version;
    v[1] = 2;
    v[2] = (uint8_t)flags;
    v[4] = (uint8_t)level;
    for (int i = 0; i < 8; i++)
        v[8 + i] = (uint8_t)(number >> (8 * i));
    v[16] = 0x10; v[17] = 0x27;  /* file_size 10000 */
    v[24] = 1;                   /* min_seq */
    v[32] = 40;                  /* max_seq */
    v[40] = 100;                 /* entries */
    v[48] = 0;                   /* blocked */
    v[52] = 7;                   /* k */
    double bpk = 10.0;
    memcpy(v + 56, &bpk, 8);
    v[64] = 100;                 /* filter keys */
    v[72] = (uint8_t)s;
    v[76] = (uint8_t)l;
    memcpy(v + 80, lo, s);
    memcpy(v + 80 + s, hi, l);
    uint64_t c = good_sum ? XXH3_64bits(v, 80 + s + l) : 0;
    for (int i = 0; i < 8; i++)
        v[80 + s + l + i] = (uint8_t)(c >> (8 * i));
    put1(b, (unsigned)sel);
    put1(b, 8);
    put_le(b, n, 2);
    for (int i = 7; i >= 0; i--)
        put1(b, (unsigned)(number >> (8 * i)) & 0xff);
    putn(b, v, n);
}

static void manifest_seeds(void)
{
    struct buf *b = calloc(1, sizeof *b);
    b->n = 0; put1(b, 0); state_rec(b, 0, 1, 1, 1);
    save("manifest", "state_only", b->b, b->n);

    b->n = 0; put1(b, 0); state_rec(b, 0, 1, 1, 1);
    table_rec(b, 1, 2, 0, 0, 5, "a", "m", 1);
    table_rec(b, 1, 2, 1, 1, 9, "", "\xff\xff", 1);
    table_rec(b, 1, 2, 0, 1, 3, "b", "c", 1);
    save("manifest", "tables", b->b, b->n);

    b->n = 0; put1(b, 0); state_rec(b, 0, 1, 1, 1);
    table_rec(b, 1, 1, 0, 2, 7, "key1", "key9", 1);
    save("manifest", "version1_table", b->b, b->n);

    b->n = 0; put1(b, 1); state_rec(b, 2, 1, 0, 1);
    table_rec(b, 3, 2, 1, 0, 4, "x", "y", 0);
    save("manifest", "fix_checksums", b->b, b->n);

    b->n = 0; put1(b, 2); state_rec(b, 0, 1, 1, 1);
    save("manifest", "open_empty", b->b, b->n);

    b->n = 0; put1(b, 3); state_rec(b, 2, 1, 0, 1);
    table_rec(b, 3, 2, 0, 0, 6, "a", "z", 0);
    save("manifest", "open_missing_table", b->b, b->n);

    b->n = 0; put1(b, 0); state_rec(b, 0, 1, 1, 2);
    save("manifest", "bad_state_version", b->b, b->n);

    /* Format version 2 (a database that used range deletes, merges or a
     * TTL), opened with no features record. */
    b->n = 0;
    put1(b, 2);
    state_rec(b, 0, 2, 1, 1);
    save("manifest", "open_format_v2", b->b, b->n);

    b->n = 0; put1(b, 0);
    table_rec(b, 1, 2, 0, 0, 5, "a", "m", 1);
    save("manifest", "no_state", b->b, b->n);
    free(b);
}

/* ---- API programs ---- */

enum { PUT = 0, DEL = 2, GET = 3, BATCH = 5, ITER = 6, KEEP = 7, KMOVE = 8, SNAP = 9, REL = 10,
       GETAT = 11, FLUSH = 12, COMPACT = 13, REOPEN = 14, SCAN = 15 };
enum { M_FIRST = 0, M_LAST = 1, M_SEEK = 2, M_NEXT = 3, M_PREV = 6 };

static void small(struct buf *b, const char *s) { put1(b, (unsigned)strlen(s)); putn(b, s, strlen(s)); }
static void large(struct buf *b, unsigned kib64, unsigned seed) { put1(b, 0x80 | (kib64 - 1)); put1(b, seed); }

static void api_seeds(void)
{
    struct buf *b = calloc(1, sizeof *b);
    /* Small writes, reads, deletes, a scan. */
    b->n = 0; put1(b, 0x00);
    for (unsigned k = 0; k < 19; k++) { put1(b, PUT); put1(b, k); small(b, "v"); }
    put1(b, PUT); put1(b, 3); small(b, "");
    put1(b, DEL); put1(b, 5);
    for (unsigned k = 0; k < 29; k += 2) { put1(b, GET); put1(b, k); }
    put1(b, SCAN);
    save("api", "basic", b->b, b->n);

    /* Large values: flushes, a compaction, reads from tables. */
    b->n = 0; put1(b, 0x24 | 0x80);
    for (unsigned i = 0; i < 40; i++) { put1(b, PUT); put1(b, i * 7); large(b, 128, i); }
    put1(b, FLUSH);
    for (unsigned i = 0; i < 10; i++) { put1(b, DEL); put1(b, i * 3); }
    put1(b, COMPACT); put1(b, 3); put1(b, 0); put1(b, 0);
    for (unsigned k = 0; k < 29; k++) { put1(b, GET); put1(b, k); }
    put1(b, ITER); put1(b, 0); put1(b, 20); put1(b, M_FIRST);
    for (int i = 0; i < 10; i++) put1(b, M_NEXT);
    put1(b, M_LAST); for (int i = 0; i < 8; i++) put1(b, M_PREV);
    save("api", "flush_compact", b->b, b->n);

    /* Snapshots: writes after them, get_at, an iterator at one. */
    b->n = 0; put1(b, 0x09);
    for (unsigned k = 0; k < 8; k++) { put1(b, PUT); put1(b, k); small(b, "old"); }
    put1(b, SNAP); put1(b, 1);
    for (unsigned k = 0; k < 8; k += 2) { put1(b, PUT); put1(b, k); small(b, "new"); }
    put1(b, DEL); put1(b, 1);
    put1(b, FLUSH);
    for (unsigned k = 0; k < 8; k++) { put1(b, GETAT); put1(b, 1); put1(b, k); }
    put1(b, ITER); put1(b, 2); put1(b, 6); put1(b, M_SEEK); put1(b, 4);
    put1(b, M_NEXT); put1(b, M_NEXT); put1(b, M_PREV); put1(b, M_LAST); put1(b, M_PREV);
    put1(b, COMPACT); put1(b, 3); put1(b, 0); put1(b, 0);
    for (unsigned k = 0; k < 8; k++) { put1(b, GETAT); put1(b, 1); put1(b, k); }
    put1(b, REL); put1(b, 1);
    put1(b, SCAN);
    save("api", "snapshots", b->b, b->n);

    /* A kept iterator across writes, a flush and a compaction. */
    b->n = 0; put1(b, 0x12);
    for (unsigned k = 0; k < 10; k++) { put1(b, PUT); put1(b, k); small(b, "x"); }
    put1(b, KEEP);
    put1(b, KMOVE); put1(b, 2); put1(b, M_FIRST); put1(b, M_NEXT); put1(b, M_NEXT);
    for (unsigned k = 0; k < 10; k++) { put1(b, DEL); put1(b, k); }
    put1(b, FLUSH);
    put1(b, COMPACT); put1(b, 3); put1(b, 0); put1(b, 0);
    put1(b, KMOVE); put1(b, 7); for (int i = 0; i < 4; i++) put1(b, M_NEXT);
    put1(b, M_PREV); put1(b, M_SEEK); put1(b, 12); put1(b, M_LAST);
    save("api", "kept_iterator", b->b, b->n);

    /* Batches, then close and reopen (the log replayed). */
    b->n = 0; put1(b, 0x44);
    put1(b, BATCH); put1(b, 5);
    for (unsigned i = 0; i < 6; i++) { put1(b, i * 2); put1(b, 0); small(b, "batched"); }
    put1(b, BATCH); put1(b, 0xc3);
    put1(b, 2); put1(b, 1); put1(b, 4); put1(b, 0); large(b, 16, 9); put1(b, 2); put1(b, 0); small(b, "again"); put1(b, 6); put1(b, 1);
    put1(b, REOPEN);
    for (unsigned k = 0; k < 29; k++) { put1(b, GET); put1(b, k); }
    put1(b, PUT); put1(b, 17); large(b, 64, 3);
    put1(b, FLUSH);
    put1(b, REOPEN);
    put1(b, GET); put1(b, 17);
    save("api", "batch_reopen", b->b, b->n);
    free(b);
}

/* ---- shared filter files ---- */

/* A shared filter file made by kv_bloom_open_shared with `keys` keys added,
 * saved whole as <name>, and (compact) as its 64 bytes of fixed fields
 * followed by its bit array, the short form fuzz_shared spreads out. */
static void shared_seed(const char *name, kv_bloom_layout layout, uint64_t n, uint64_t keys,
                        int compact)
{
    char dir[] = "/tmp/kv-gen-seeds-XXXXXX", path[512];
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(1);
    }
    snprintf(path, sizeof path, "%s/f.kvbs", dir);
    kv_bloom *f;
    if (kv_bloom_open_shared(path, layout, n, 10, 0x5eed, &f) != KV_OK) {
        fprintf(stderr, "gen_seeds: %s\n", kv_error_text());
        exit(1);
    }
    for (uint64_t i = 0; i < keys; i++)
        kv_bloom_add(f, &i, sizeof i);
    kv_bloom_free(f);
    size_t len;
    uint8_t *data = slurp(path, &len);
    unlink(path);
    rmdir(dir);
    if (!compact) {
        save("shared", name, data, len);
        return;
    }
    static uint8_t small_form[200000];
    memcpy(small_form, data, 64);
    memcpy(small_form + 64, data + 4096, len - 4096);
    save("shared", name, small_form, 64 + len - 4096);
}

static void shared_seeds(void)
{
    shared_seed("blocked_1000", KV_BLOOM_BLOCKED, 1000, 700, 0);   /* a blocked filter in use */
    shared_seed("classic_500", KV_BLOOM_CLASSIC, 500, 500, 0);     /* a full classic one */
    shared_seed("blocked_empty", KV_BLOOM_BLOCKED, 100, 0, 0);     /* just made */
    shared_seed("compact_blocked", KV_BLOOM_BLOCKED, 10, 10, 1);   /* one block, short form */
    shared_seed("compact_classic", KV_BLOOM_CLASSIC, 10, 10, 1);   /* 128 bits, short form */
}

/* ---- the other kinds of filter (fuzz_filter) ---- */

/* Saves an encoding made by one of the kinds' *_encode functions. */
static void save_encoding(const char *name, int rc, void *enc, size_t len)
{
    if (rc != KV_OK) {
        fprintf(stderr, "gen_seeds: %s: %s\n", name, kv_strerror(rc));
        exit(1);
    }
    save("filter", name, enc, len);
    kv_free(enc);
}

/* Small filters of each kind with keys in them: a counting filter with a
 * key removed (and one added twice), a scalable filter of three stages,
 * and a rotating filter of three generations that has rotated by add and
 * by hand. */
static void filter_kind_seeds(void)
{
    char key[32];
    void *enc;
    size_t len;
    kv_counting_bloom *c;
    if (kv_counting_bloom_new(40, 0.01, 7, &c) != KV_OK)
        exit(1);
    for (int i = 0; i < 40; i++)
        kv_counting_bloom_add(c, key, (size_t)snprintf(key, sizeof key, "key-%d", i));
    kv_counting_bloom_add(c, "key-0", 5);
    kv_counting_bloom_remove(c, "key-1", 5);
    save_encoding("counting_40.kvcb", kv_counting_bloom_encode(c, &enc, &len), enc, len);
    kv_counting_bloom_free(c);

    kv_scalable_bloom *s;
    if (kv_scalable_bloom_new(10, 0.01, 7, &s) != KV_OK)
        exit(1);
    for (int i = 0; i < 50; i++)
        kv_scalable_bloom_add(s, key, (size_t)snprintf(key, sizeof key, "key-%d", i));
    save_encoding("scalable_3stages.kvsb", kv_scalable_bloom_encode(s, &enc, &len), enc, len);
    kv_scalable_bloom_free(s);

    kv_rotating_bloom *r;
    if (kv_rotating_bloom_new(20, 3, 0.01, 7, &r) != KV_OK)
        exit(1);
    for (int i = 0; i < 50; i++)
        kv_rotating_bloom_add(r, key, (size_t)snprintf(key, sizeof key, "key-%d", i));
    kv_rotating_bloom_rotate(r);
    kv_rotating_bloom_add(r, "late", 4);
    save_encoding("rotating_3gens.kvrb", kv_rotating_bloom_encode(r, &enc, &len), enc, len);
    kv_rotating_bloom_free(r);

    /* A keyed Bloom filter (version 2) under fuzz_filter's secret, 00 .. 0f. */
    static const uint8_t secret[KV_BLOOM_SECRET_BYTES] = {0, 1, 2,  3,  4,  5,  6,  7,
                                                          8, 9, 10, 11, 12, 13, 14, 15};
    kv_bloom *b;
    if (kv_bloom_new_keyed(KV_BLOOM_BLOCKED, 40, 10, secret, &b) != KV_OK)
        exit(1);
    for (int i = 0; i < 40; i++)
        kv_bloom_add(b, key, (size_t)snprintf(key, sizeof key, "key-%d", i));
    save_encoding("keyed_40.kvbf", kv_bloom_encode(b, &enc, &len), enc, len);
    kv_bloom_free(b);
}

/* A small table with a dictionary (format version 2, doc/sstable_format.md):
 * 64-byte blocks of keys "key00000".. with half-repeating values, so that
 * its 8 KiB of samples train a 256-byte dictionary, and its data blocks are
 * compressed with it (kind 2). The keys are fuzz_table's lookups. */
static void table_seeds(void)
{
    char path[512], tmp[64];
    strcpy(tmp, "/tmp/kv-gen-seeds-XXXXXX");
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        exit(1);
    }
    snprintf(path, sizeof path, "%s/dict.sst", tmp);
    kv_sst_options o;
    kv_sst_options_init(&o);
    o.block_size = 64;
    o.dict_bytes = 256;
    o.bits_per_key = 4;
    kv_sst_writer *w;
    int rc = kv_sst_writer_new(path, &o, &w);
    for (unsigned i = 0; rc == KV_OK && i < 400; i++) {
        char k[16], v[24];
        snprintf(k, sizeof k, "key%05u", i);
        snprintf(v, sizeof v, "v%03u-abcv%03u-abc", i % 7, i % 7);
        rc = kv_sst_writer_add(w, k, strlen(k), v, strlen(v));
    }
    if (rc == KV_OK)
        rc = kv_sst_writer_finish(w, NULL);
    else
        kv_sst_writer_abandon(w);
    size_t n = 0;
    const uint8_t *data = rc == KV_OK ? slurp(path, &n) : NULL;
    if (!data || n < 72 || data[n - 72 + 8] != 2) {
        fprintf(stderr, "gen_seeds: dict.sst: %s\n",
                rc != KV_OK ? kv_strerror(rc) : "not a table with a dictionary");
        exit(1);
    }
    save("table", "dict.sst", data, n);
    unlink(path);
    /* Format version 3: overlapping range tombstones over fuzz_table's
     * keys, with pairs (and a dictionary) and without any pair. */
    static const char *const rt[][2] = {{"key00010", "key00050"},
                                        {"key00030", "key00090"},
                                        {"a", "b"},
                                        {"key00200", "zzzz"},
                                        {"key00040", "key00041"}};
    kv_rt rts[5];
    for (unsigned i = 0; i < 5; i++)
        rts[i] = (kv_rt){(const uint8_t *)rt[i][0], strlen(rt[i][0]), (const uint8_t *)rt[i][1],
                         strlen(rt[i][1]), 100 + 7 * (uint64_t)i};
    kv_rtset *set = NULL;
    uint8_t *block = NULL;
    size_t blen = 0;
    if (kv_rtset_union(NULL, NULL, 0, rts, 5, NULL, NULL, &set) != KV_OK ||
        kv_rtset_encode(set, &block, &blen) != KV_OK) {
        fprintf(stderr, "gen_seeds: range tombstones: out of memory\n");
        exit(1);
    }
    kv_rtset_unref(set);
    static const struct {
        const char *name;
        unsigned pairs;
        size_t dict;
    } v3[] = {{"range_tombstones.sst", 100, 0},
              {"range_tombstones_dict.sst", 400, 256},
              {"range_tombstones_alone.sst", 0, 0}};
    for (unsigned t = 0; t < 3; t++) {
        snprintf(path, sizeof path, "%s/%s", tmp, v3[t].name);
        o.dict_bytes = v3[t].dict;
        rc = kv_sst_writer_new(path, &o, &w);
        if (rc == KV_OK)
            rc = kv_sst_writer_set_range_tombstones(w, block, blen);
        for (unsigned i = 0; rc == KV_OK && i < v3[t].pairs; i++) {
            char k[16], v[24];
            snprintf(k, sizeof k, "key%05u", i);
            snprintf(v, sizeof v, "v%03u-abcv%03u-abc", i % 7, i % 7);
            rc = kv_sst_writer_add(w, k, strlen(k), v, strlen(v));
        }
        if (rc == KV_OK)
            rc = kv_sst_writer_finish(w, NULL);
        else
            kv_sst_writer_abandon(w);
        n = 0;
        data = rc == KV_OK ? slurp(path, &n) : NULL;
        if (!data || n < 72 || data[n - 72 + 8] != 3) {
            fprintf(stderr, "gen_seeds: %s: %s\n", v3[t].name,
                    rc != KV_OK ? kv_strerror(rc) : "not a version-3 table");
            exit(1);
        }
        save("table", v3[t].name, data, n);
        unlink(path);
    }
    free(block);
    rmdir(tmp);
}

/* Format version 4 (scan filters): scan_filters.sst, a plain table of
 * fuzz_table's keys with a range filter of its own keys, and
 * scan_filters_store.sst, a table shaped like a store's (the caller's
 * filter hashes, a prefix hash per 10 keys, the range filter given the
 * keys, range tombstones and a dictionary). Their range filter blocks are
 * the filter's encoding as this build makes it. */
static void scan_filter_seeds(void)
{
    char path[512], tmp[64];
    strcpy(tmp, "/tmp/kv-gen-seeds-XXXXXX");
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        exit(1);
    }
    kv_rt rt = {(const uint8_t *)"key00010", 8, (const uint8_t *)"key00050", 8, 100};
    kv_rtset *set = NULL;
    uint8_t *block = NULL;
    size_t blen = 0;
    if (kv_rtset_union(NULL, NULL, 0, &rt, 1, NULL, NULL, &set) != KV_OK ||
        kv_rtset_encode(set, &block, &blen) != KV_OK) {
        fprintf(stderr, "gen_seeds: range tombstones: out of memory\n");
        exit(1);
    }
    kv_rtset_unref(set);
    static const char *const names[] = {"scan_filters.sst", "scan_filters_store.sst"};
    for (unsigned t = 0; t < 2; t++) {
        snprintf(path, sizeof path, "%s/%s", tmp, names[t]);
        kv_sst_options o;
        kv_sst_options_init(&o);
        o.block_size = 64;
        o.bits_per_key = 4;
        o.dict_bytes = t ? 256 : 0;
        kv_sst_writer *w;
        int rc = kv_sst_writer_new(path, &o, &w);
        if (rc == KV_OK)
            rc = kv_sst_writer_set_range_filter(w, 16, 0);
        if (rc == KV_OK && t)
            rc = kv_sst_writer_set_prefix(w, 7);
        if (rc == KV_OK && t)
            rc = kv_sst_writer_set_range_tombstones(w, block, blen);
        for (unsigned i = 0; rc == KV_OK && i < (t ? 400u : 100u); i++) {
            char k[16], v[24];
            snprintf(k, sizeof k, "key%05u", i);
            snprintf(v, sizeof v, "v%03u-abcv%03u-abc", i % 7, i % 7);
            if (!t) {
                rc = kv_sst_writer_add(w, k, 8, v, strlen(v));
                continue;
            }
            if (i % 10 == 0)
                rc = kv_sst_writer_add_prefix_hash(w, kv_sst_filter_hash(NULL, k, 7));
            if (rc == KV_OK)
                rc = kv_sst_writer_add_range_key(w, k, 8);
            if (rc == KV_OK)
                rc = kv_sst_writer_add_hashed(w, k, 8, v, strlen(v),
                                              kv_sst_filter_hash(NULL, k, 8));
        }
        if (rc == KV_OK)
            rc = kv_sst_writer_finish(w, NULL);
        else
            kv_sst_writer_abandon(w);
        size_t n = 0;
        const uint8_t *data = rc == KV_OK ? slurp(path, &n) : NULL;
        if (!data || n < 72 || data[n - 72 + 8] != 4) {
            fprintf(stderr, "gen_seeds: %s: %s\n", names[t],
                    rc != KV_OK ? kv_strerror(rc) : "not a version-4 table");
            exit(1);
        }
        save("table", names[t], data, n);
        unlink(path);
    }
    free(block);
    rmdir(tmp);
}

/* ---- blob files ---- */

/* Blob file `number` holding n records, keys and values from `pick`,
 * written by the library's writer and saved as corpus/blob/<name>. */
static void blob_seed(const char *name, uint64_t number, size_t n,
                      void (*pick)(size_t i, uint8_t *k, size_t *klen, uint8_t *v, size_t *vlen))
{
    char path[512], tmp[64];
    strcpy(tmp, "/tmp/kv-gen-seeds-XXXXXX");
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        exit(1);
    }
    snprintf(path, sizeof path, "%s/%s", tmp, name);
    static uint8_t k[512], v[4096];
    kv_blob_writer *w;
    int rc = kv_blob_writer_new(path, number, &w);
    for (size_t i = 0; rc == KV_OK && i < n; i++) {
        size_t klen, vlen;
        kv_blob_ref ref;
        pick(i, k, &klen, v, &vlen);
        rc = kv_blob_writer_add(w, k, klen, v, vlen, &ref);
    }
    if (rc == KV_OK)
        rc = kv_blob_writer_finish(w, NULL);
    else
        kv_blob_writer_abandon(w);
    if (rc != KV_OK) {
        fprintf(stderr, "gen_seeds: blob/%s: %s\n", name, kv_strerror(rc));
        exit(1);
    }
    size_t len;
    const uint8_t *data = slurp(path, &len);
    save("blob", name, data, len);
    unlink(path);
    rmdir(tmp);
}

/* Eight records: an empty key, an empty value, keys with NUL bytes, values
 * of 0 to 200 bytes. */
static void pick_records(size_t i, uint8_t *k, size_t *klen, uint8_t *v, size_t *vlen)
{
    *klen = i == 0 ? 0 : 3 + i;
    for (size_t j = 0; j < *klen; j++)
        k[j] = j % 3 == 1 ? 0 : (uint8_t)('a' + i + j);
    *vlen = i == 1 ? 0 : 25 * i;
    for (size_t j = 0; j < *vlen; j++)
        v[j] = (uint8_t)(i * 31 + j);
}

/* One record whose key is longer than kv_blob_read's buffer on the stack
 * (300 bytes), and whose value takes 2000. */
static void pick_long(size_t i, uint8_t *k, size_t *klen, uint8_t *v, size_t *vlen)
{
    (void)i;
    *klen = 300;
    memset(k, 'K', *klen);
    *vlen = 2000;
    for (size_t j = 0; j < *vlen; j++)
        v[j] = (uint8_t)(j * 7);
}

/* corpus/blob: fuzz_blob's seeds (doc/blob_format.md): records.blob
 * (file 3, eight records), long_key.blob (file 9, one record of a 300-byte
 * key), empty.blob (file 1, no record: header and footer). */
static void blob_seeds(void)
{
    blob_seed("records.blob", 3, 8, pick_records);
    blob_seed("long_key.blob", 9, 1, pick_long);
    blob_seed("empty.blob", 1, 0, pick_records);
}

/* fuzz_ingest's seeds, written by kv_table_writer into <out>/ingest: a
 * table of puts over the keys of its database (rewritten there), one of a
 * delete, a merge, a put and a range delete, and one beside its keys
 * (taken as it is). The writer's filter seed is random: these differ
 * from run to run in their filters' bits alone. */
static void ingest_seed(const char *name, int kind)
{
    char path[512], k[8];
    snprintf(path, sizeof path, "%s/ingest/%s", out, name);
    unlink(path);
    kv_table_writer *w;
    uint64_t one = 1;
    int rc = kv_table_writer_open(path, NULL, &w);
    if (rc == KV_OK && kind == 0)
        for (int i = 5; rc == KV_OK && i < 35; i++) {
            snprintf(k, sizeof k, "k%02d", i);
            rc = kv_table_writer_put(w, k, 3, &one, sizeof one);
        }
    if (rc == KV_OK && kind == 1) {
        rc = kv_table_writer_delete_range(w, "k10", 3, "k20", 3);
        if (rc == KV_OK)
            rc = kv_table_writer_delete(w, "k01", 3);
        if (rc == KV_OK)
            rc = kv_table_writer_merge(w, "k02", 3, &one, sizeof one);
        if (rc == KV_OK)
            rc = kv_table_writer_put(w, "k50", 3, &one, sizeof one);
    }
    if (rc == KV_OK && kind == 2)
        for (int i = 0; rc == KV_OK && i < 20; i++) {
            snprintf(k, sizeof k, "z%02d", i);
            rc = kv_table_writer_put(w, k, 3, &one, sizeof one);
        }
    if (rc == KV_OK)
        rc = kv_table_writer_finish(w);
    if (rc != KV_OK) {
        fprintf(stderr, "gen_seeds: %s: %s\n", path, kv_error_text());
        exit(1);
    }
}

static void ingest_seeds(void)
{
    ingest_seed("overlapping.sst", 0);
    ingest_seed("kinds.sst", 1);
    ingest_seed("beside.sst", 2);
}

/* ---- range filters (fuzz_range_filter) ---- */

/* A range filter of keys key(i) for i < n, built at `bits` bits per key,
 * saved as <out>/range_filter/<name>. */
static void range_filter_seed(const char *name, double bits, uint64_t n,
                              size_t (*key)(uint64_t i, uint8_t *buf))
{
    kv_rfilter_builder *b;
    uint8_t k[64], *enc;
    size_t len;
    int rc = kv_rfilter_builder_new(bits, 42, &b);
    for (uint64_t i = 0; rc == KV_OK && i < n; i++) {
        size_t klen = key(i, k);
        rc = kv_rfilter_builder_add(b, k, klen);
    }
    if (rc != KV_OK || (rc = kv_rfilter_builder_finish(b, &enc, &len)) != KV_OK) {
        fprintf(stderr, "gen_seeds: %s: %s\n", name, kv_error_text());
        exit(1);
    }
    kv_rfilter_builder_free(b);
    save("range_filter", name, enc, len);
    kv_free(enc);
}

static size_t rf_decimal(uint64_t i, uint8_t *buf) /* kvbench's: 16 digits of 2 i, every 8th */
{
    char s[17];
    snprintf(s, sizeof s, "%016llu", (unsigned long long)(16 * i));
    memcpy(buf, s, 16);
    return 16;
}

static size_t rf_binary(uint64_t i, uint8_t *buf) /* 8 bytes big-endian, spread out */
{
    uint64_t v = i << 58 | (i * 0x9E3779B97F4A7C15ull) >> 6; /* sorted for i < 64 */
    for (int j = 0; j < 8; j++)
        buf[j] = (uint8_t)(v >> (56 - 8 * j));
    return 8;
}

static size_t rf_clusters(uint64_t i, uint8_t *buf) /* 2 runs of 40 consecutive integers */
{
    uint64_t v = (i < 40 ? 0x0102030405060700ull : 0xf0e0d0c0b0a09000ull) + i % 40;
    for (int j = 0; j < 8; j++)
        buf[j] = (uint8_t)(v >> (56 - 8 * j));
    return 8;
}

static size_t rf_prefixed(uint64_t i, uint8_t *buf) /* a shared prefix, then lengths 1..4 */
{
    memcpy(buf, "user:", 5);
    size_t len = 6 + i % 4;
    for (size_t j = 5; j < len; j++)
        buf[j] = (uint8_t)('a' + i / 4);
    return len;
}

static size_t rf_ids(uint64_t i, uint8_t *buf) /* 8 random 8-byte ids, 16 counters each */
{
    static const uint64_t id[8] = {0x0b1e7c9a55d3f201ull, 0x2f4d6a8c0e1b3d5full,
                                   0x5a0c9e7f13b26d48ull, 0x6e3b1d9f02c4a857ull,
                                   0x8c2f5e1a7b3d9064ull, 0xa1d3c5e7f9b2d406ull,
                                   0xc7e9a1b3d5f70829ull, 0xf0e1d2c3b4a59687ull};
    uint64_t v = id[i / 16], c = 1700000000000ull + 64 * (i % 16);
    for (int j = 0; j < 8; j++) {
        buf[j] = (uint8_t)(v >> (56 - 8 * j));
        buf[8 + j] = (uint8_t)(c >> (56 - 8 * j));
    }
    return 16;
}

/* Filters of the key kinds the store sees (ids then counters: the map's
 * dictionary, encoding version 2), one of no key; and a list of
 * keys for the target's third use (a bits byte, then length-prefixed
 * keys, 0xff bytes and the empty key among them). */
static void range_filter_seeds(void)
{
    range_filter_seed("empty.kvrf", 16, 0, rf_decimal);
    range_filter_seed("decimal_200.kvrf", 16, 200, rf_decimal);
    range_filter_seed("binary_64.kvrf", 8, 64, rf_binary);
    range_filter_seed("prefixed_40.kvrf", 12, 40, rf_prefixed);
    range_filter_seed("one_key.kvrf", 10, 1, rf_binary);
    range_filter_seed("clusters_80.kvrf", 16, 80, rf_clusters); /* hashed, crowded buckets */
    range_filter_seed("ids_128.kvrf", 12, 128, rf_ids);         /* a dictionary */
    static const uint8_t keys[] = {12,   0, 3,   'a',  'b',  'c',  2,    0xff, 0xff, 1,
                                   0xff, 3, 'a', 'b',  0,    4,    'a',  'b',  'c',  'd',
                                   1,    0, 5,   0xff, 0xff, 0xff, 0xff, 0xff};
    save("range_filter", "keys", keys, sizeof keys);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_seeds <corpus dir>\n");
        return 2;
    }
    out = argv[1];
    wal_seeds();
    manifest_seeds();
    api_seeds();
    shared_seeds();
    filter_kind_seeds();
    table_seeds();
    scan_filter_seeds();
    blob_seeds();
    ingest_seeds();
    range_filter_seeds();
    return 0;
}
