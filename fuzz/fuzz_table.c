/* fuzz_table.c - libFuzzer target: the input is a table file
 * (doc/sstable_format.md), read twice:
 *
 * 1. as it is;
 * 2. "repaired", when that changes a byte: every checksum the reader will
 *    check is recomputed over the bytes it covers, so that the fuzzer gets
 *    past the checksums to the counts, sizes and offsets behind them (a
 *    crafted file can carry any of those: XXH3 is no secret). In order:
 *    the checksum of every data block an index entry names (the index
 *    block is walked as doc/sstable_format.md describes it, as far as it
 *    decodes), the filter encoding's own checksum (doc/filter_format.md,
 *    over all but its last 8 bytes), the block checksums of the index,
 *    properties and filter blocks, of the dictionary block of a version-2
 *    table (between the properties and the filter), of the dictionary
 *    (if any) and range tombstone blocks of a version-3 table (there too,
 *    their sizes in the properties), of the dictionary, range tombstone
 *    and range filter blocks (each if any) of a version-4 table, and the
 *    trailer's. The range filter encoding's own checksum is not
 *    recomputed (fuzz_filter's range filter inputs reach behind it). A handle that
 *    points outside the file is left alone.
 *
 * Each reading opens the table, gets a few keys (whole-key, hashed and
 * prefixed lookups), scans it forwards and backwards, seeks, lists its
 * range tombstones, and verifies it. Checked: every call returns in
 * bounded time (libFuzzer's -timeout), without a crash, leak or sanitizer
 * report, and every failure is KV_ECORRUPT (KV_NOTFOUND for a get) whose
 * error text names the file; every range tombstone fragment the reader
 * hands out is sound (start before end, in order, sequences in 1 ..
 * 2^56 - 1 and decreasing), as it checked the block at open.
 *
 * The file lives in a scratch directory (fuzz_tmp.h), made once per process
 * and removed at exit. Seeds: corpus/table. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <kv/sstable.h>

#include "../sstable/internal.h" /* the scan filters' reader side */
#include "fuzz_tmp.h"
#include "util/coding.h"
#include "util/error.h"
#include "util/keycmp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define TRAILER 72      /* doc/sstable_format.md, "Trailer" */
#define BLOCK_TRAILER 9 /* compression byte, XXH3-64 */

/* ---- repair ------------------------------------------------------------------------ */

/* Recomputes the block checksum after the payload at (off, len), when the
 * payload and its trailer lie in f[0, limit). */
static void fix_block(uint8_t *f, size_t limit, uint64_t off, uint64_t len)
{
    if (off > limit || len > limit - off || limit - off - len < BLOCK_TRAILER)
        return;
    kv_put64(f + off + len + 1, XXH3_64bits(f + off, (size_t)len + 1));
}

/* Every data block an index entry names: the index block's entries, from
 * the first on, for as long as they decode. */
static void fix_data_blocks(uint8_t *f, uint64_t ioff, const uint8_t *ix, size_t ilen)
{
    if (ilen < 8)
        return;
    uint64_t nrestarts = kv_get32(ix + ilen - 4);
    if (nrestarts * 4 + 4 > ilen)
        return;
    const uint8_t *p = ix, *end = ix + ilen - 4 - nrestarts * 4;
    while (p < end) {
        uint64_t shared, unshared, vlen, off, len;
        if (!kv_get_varint(&p, end, &shared) || !kv_get_varint(&p, end, &unshared) ||
            !kv_get_varint(&p, end, &vlen) || unshared > (uint64_t)(end - p) ||
            vlen > (uint64_t)(end - p) - unshared)
            return;
        const uint8_t *v = p + unshared, *vend = v + vlen;
        p = vend;
        if (kv_get_varint(&v, vend, &off) && kv_get_varint(&v, vend, &len))
            fix_block(f, (size_t)ioff, off, len);
    }
}

/* Recomputes every checksum of the table in f (see the top); returns
 * whether any byte changed. */
static int repair(uint8_t *f, size_t size)
{
    if (size < TRAILER)
        return 0;
    uint8_t *before = malloc(size);
    CHECK(before != NULL);
    memcpy(before, f, size);
    size_t toff = size - TRAILER;
    uint8_t *t = f + toff;
    uint64_t ioff = kv_get64(t + 16), ilen = kv_get64(t + 24), poff = kv_get64(t + 32),
             plen = kv_get64(t + 40), foff = kv_get64(t + 48), flen = kv_get64(t + 56);
    if (ioff <= toff && ilen <= toff - ioff)
        fix_data_blocks(f, ioff, f + ioff, (size_t)ilen);
    if (flen >= 8 && foff <= toff && flen <= toff - foff)
        kv_put64(f + foff + flen - 8, XXH3_64bits(f + foff, (size_t)flen - 8));
    fix_block(f, toff, ioff, ilen);
    fix_block(f, toff, poff, plen);
    /* version 2: the dictionary fills the gap from the properties to the filter */
    if (kv_get32(t + 8) == 2 && poff <= toff && plen <= toff - poff &&
        toff - poff - plen >= 2 * BLOCK_TRAILER && foff <= toff &&
        foff >= poff + plen + 2 * BLOCK_TRAILER)
        fix_block(f, toff, poff + plen + BLOCK_TRAILER, foff - poff - plen - 2 * BLOCK_TRAILER);
    /* versions 3 and 4: the dictionary (dict_size at 104 of the
     * properties; 0: none), then the range tombstones (rt_size at 112; in
     * version 4, 0: none), then in version 4 the range filter (rf_size at
     * 120; 0: none) fill that gap */
    uint32_t version = kv_get32(t + 8);
    if ((version == 3 || version == 4) && poff <= toff && plen <= toff - poff &&
        plen >= (version == 3 ? 120u : 144u)) {
        uint64_t dsize = kv_get64(f + poff + 104), rsize = kv_get64(f + poff + 112);
        uint64_t fsize = version == 4 ? kv_get64(f + poff + 120) : 0;
        uint64_t doff = poff + plen + BLOCK_TRAILER;
        if (dsize && dsize < toff) {
            fix_block(f, toff, doff, dsize);
            doff += dsize + BLOCK_TRAILER;
        }
        if (version == 3 || (rsize && rsize < toff)) {
            fix_block(f, toff, doff, rsize);
            doff += rsize + BLOCK_TRAILER;
        }
        if (fsize && fsize < toff)
            fix_block(f, toff, doff, fsize);
    }
    fix_block(f, toff, foff, flen);
    kv_put64(t + 64, XXH3_64bits(t, 64));
    int changed = memcmp(before, f, size) != 0;
    free(before);
    return changed;
}

/* ---- reading ------------------------------------------------------------------------- */

static char path[500];

/* A failure must be KV_ECORRUPT with an error text that names the file
 * (or `also`). The text is emptied after each check, so a stale one from
 * an earlier call cannot pass for the next call's. */
static void check_rc(int rc, int also)
{
    if (rc != KV_OK && rc != also) {
        CHECK(rc == KV_ECORRUPT);
        CHECK(strstr(kv_sst_error_text(), path) != NULL);
    }
    kv_error_set(KV_OK, "%s", "");
}

static void check_get(int rc, void *val)
{
    check_rc(rc, KV_NOTFOUND);
    if (rc == KV_OK)
        kv_free(val);
}

/* The table's range tombstone fragments, as the reader hands them out:
 * sound, since it checked their block at open (bytewise order here). */
static void check_range_tombstones(kv_sst_reader *r)
{
    size_t n = kv_sst_range_tombstone_count(r);
    kv_sst_range_tombstone prev = {0}, f;
    for (size_t i = 0; i < n && i < 100000; i++) {
        int rc = kv_sst_range_tombstone_get(r, i, &f);
        CHECK(rc == KV_OK || rc == KV_ENOMEM);
        if (rc != KV_OK)
            return;
        CHECK(kv_key_cmp(f.start, f.start_len, f.end, f.end_len) < 0);
        CHECK(i == 0 || kv_key_cmp(prev.end, prev.end_len, f.start, f.start_len) <= 0);
        CHECK(f.nseq >= 1);
        for (size_t j = 0; j < f.nseq; j++)
            CHECK(f.seqs[j] > 0 && f.seqs[j] < ((uint64_t)1 << 56) &&
                  (j == 0 || f.seqs[j] < f.seqs[j - 1]));
        prev = f;
    }
    CHECK(kv_sst_range_tombstone_get(r, n, &f) == KV_EINVAL);
}

static void read_table(const uint8_t *f, size_t size)
{
    FILE *fp = fopen(path, "wb");
    CHECK(fp != NULL);
    CHECK(size == 0 || fwrite(f, 1, size, fp) == size);
    CHECK(fclose(fp) == 0);
    kv_sst_cache *cache = NULL;
    CHECK(kv_sst_cache_new(1 << 16, &cache) == KV_OK);
    kv_sst_reader *r;
    kv_error_set(KV_OK, "%s", "");
    int rc = kv_sst_reader_open(path, cache, 1, &r);
    check_rc(rc, KV_OK);
    if (rc == KV_OK) {
        static const char *keys[] = {"", "a", "key00001", "key00050", "zzzz", "\xff"};
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
            size_t klen = strlen(keys[i]);
            void *val;
            size_t vlen, slen;
            uint8_t suffix[16];
            check_get(kv_sst_get(r, keys[i], klen, &val, &vlen), val);
            check_get(kv_sst_get_hashed(r, keys[i], klen, kv_sst_filter_hash(r, keys[i], klen),
                                        &val, &vlen), val);
            size_t plen = klen / 2;
            check_get(kv_sst_seek_prefixed(r, keys[i], klen, plen,
                                           kv_sst_filter_hash(r, keys[i], plen), NULL, &val,
                                           &vlen, suffix, sizeof suffix, &slen), val);
        }
        kv_bloom_info info;
        kv_sst_reader_filter_info(r, &info);
        /* Scan filters (format version 4): answers, never a crash. */
        double fpr = -1;
        int may = kv_sst_range_filter_may_hold(r, "a", 1, "key00050", 8, &fpr);
        CHECK((may == 0 || may == 1) && fpr >= 0 && fpr <= 1);
        may = kv_sst_range_filter_may_hold(r, NULL, 0, "\xff", 1, NULL);
        CHECK(may == 0 || may == 1);
        CHECK(kv_sst_reader_has_range_filter(r) == (kv_sst_reader_range_filter_bytes(r) > 0));
        may = kv_sst_filter_may_hold(r, kv_sst_filter_hash(r, "key", 3));
        CHECK(may == 0 || may == 1);
        CHECK(kv_sst_reader_prefix_len(r) == 0 || info.keys_added > 0);
        kv_sst_iter *it;
        CHECK(kv_sst_iter_new(r, &it) == KV_OK);
        size_t n = 0;
        for (kv_sst_iter_seek_first(it); kv_sst_iter_valid(it) && n < 100000; kv_sst_iter_next(it))
            n++;
        check_rc(kv_sst_iter_status(it), KV_OK);
        kv_sst_iter_free(it);
        CHECK(kv_sst_iter_new(r, &it) == KV_OK);
        n = 0;
        for (kv_sst_iter_seek_last(it); kv_sst_iter_valid(it) && n < 1000; kv_sst_iter_prev(it))
            n++;
        kv_sst_iter_seek(it, "key0002", 7);
        kv_sst_iter_seek_before(it, "key0002", 7);
        check_rc(kv_sst_iter_status(it), KV_OK);
        kv_sst_iter_free(it);
        check_range_tombstones(r);
        check_rc(kv_sst_verify(r), KV_OK);
        kv_sst_reader_close(r);
    }
    kv_sst_cache_free(cache);
    CHECK(unlink(path) == 0);
}

/* ---- the target ------------------------------------------------------------------- */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0]) {
        fz_init("table");
        snprintf(path, sizeof path, "%s/000001.sst", fz_mkdir());
    }
    read_table(data, size);
    uint8_t *fixed = malloc(size + 1);
    CHECK(fixed != NULL);
    if (size)
        memcpy(fixed, data, size);
    if (repair(fixed, size))
        read_table(fixed, size);
    free(fixed);
    return 0;
}
