/* fuzz_blob.c - libFuzzer target: the input is a blob file
 * (doc/blob_format.md), read twice:
 *
 * 1. as it is;
 * 2. "repaired", when that changes a byte: the header's checksum, every
 *    record's checksum (the records walked from offset 32 for as long as
 *    their lengths fit before the last 32 bytes), the footer's record
 *    bytes (set to the file's size less 64), its record count (set to the
 *    records walked, when the walk ended exactly at the footer) and its
 *    checksum, so that the fuzzer gets past the checksums to the lengths,
 *    offsets and counts behind them (a crafted file can carry any of
 *    those: XXH3 is no secret).
 *
 * Each reading opens the file under the number its header names, scans
 * it, reads back (kv_blob_read) up to 64 of the records the scan visited,
 * then reads a few references decoded from the input's last bytes (three
 * varints each, as kv_blob_ref_encode writes them), under keys the scan
 * saw. Checked: every call returns in bounded time, without a crash, leak
 * or sanitizer report; every failure of open, scan or read is KV_ECORRUPT
 * whose error text names the file (KV_ERANGE for a read into a buffer too
 * small); the scan's references lie within the records, in order, and
 * name the file; a record the scan visited reads back with kv_blob_read,
 * byte for byte, and one byte of buffer less is KV_ERANGE; a ref that
 * kv_blob_ref_decode takes encodes back to the same bytes.
 *
 * The file lives in a scratch directory (fuzz_tmp.h), made once per process
 * and removed at exit. Seeds: corpus/blob (gen_seeds.c). */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <kv/sstable.h>

#include "fuzz_tmp.h"
#include "util/coding.h"
#include "util/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HEADER 32   /* doc/blob_format.md */
#define FOOTER 32
#define HEAD 9      /* a record's klen, vlen and compression byte */
#define OVERHEAD 17 /* ... and its checksum */
#define MAX_REFS 64
#define READ_CAP ((size_t)1 << 20) /* the tail's refs read into at most this */

/* ---- repair ------------------------------------------------------------------------ */

/* Recomputes every checksum of the blob file in f (see the top); returns
 * whether any byte changed. */
static int repair(uint8_t *f, size_t size)
{
    if (size < HEADER + FOOTER)
        return 0;
    uint8_t *before = malloc(size);
    CHECK(before != NULL);
    memcpy(before, f, size);
    kv_put64(f + 24, XXH3_64bits(f, 24));
    size_t off = HEADER, end = size - FOOTER;
    uint64_t count = 0;
    while (end - off >= OVERHEAD) {
        uint64_t body = HEAD + (uint64_t)kv_get32(f + off) + kv_get32(f + off + 4);
        if (body + 8 > end - off)
            break;
        kv_put64(f + off + body, XXH3_64bits(f + off, (size_t)body));
        off += (size_t)body + 8;
        count++;
    }
    uint8_t *t = f + end;
    if (off == end)
        kv_put64(t + 8, count);
    kv_put64(t + 16, end - HEADER);
    kv_put64(t + 24, XXH3_64bits(t, 24));
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

/* What the scan saw of a record: its ref, key, and value's hash. */
struct seen {
    kv_blob_ref ref;
    uint8_t *key;
    size_t klen;
    uint64_t vhash;
};

struct scan {
    kv_blob_file_info info;
    struct seen s[MAX_REFS];
    size_t n;
    uint64_t visits, next_off;
};

static int visit(void *ctx, const void *key, size_t klen, const void *val, size_t vlen,
                 const kv_blob_ref *ref)
{
    struct scan *sc = ctx;
    CHECK(ref->number == sc->info.number);
    CHECK(ref->offset == sc->next_off); /* in order, without gaps */
    CHECK(ref->size == vlen);
    uint64_t rec = kv_blob_record_size(klen, vlen);
    CHECK(rec == OVERHEAD + klen + vlen);
    CHECK(ref->offset + rec <= sc->info.file_size - FOOTER);
    sc->next_off += rec;
    sc->visits++;
    if (sc->n < MAX_REFS) {
        struct seen *s = &sc->s[sc->n++];
        s->ref = *ref;
        s->klen = klen;
        s->key = malloc(klen + 1);
        CHECK(s->key != NULL);
        if (klen)
            memcpy(s->key, key, klen);
        s->vhash = XXH3_64bits(val, vlen);
    }
    return 0;
}

/* Reads the references encoded in the input's last bytes. */
static void read_tail_refs(kv_blob_reader *r, const struct scan *sc, const uint8_t *f, size_t size)
{
    size_t t = size < 3 * KV_BLOB_REF_MAX ? size : 3 * KV_BLOB_REF_MAX;
    const uint8_t *p = f + size - t, *end = f + size;
    /* kv_blob_ref_decode on every suffix: what it takes encodes back. */
    for (const uint8_t *q = p; q <= end; q++) {
        kv_blob_ref ref;
        uint8_t enc[KV_BLOB_REF_MAX];
        if (kv_blob_ref_decode(q, (size_t)(end - q), &ref) == KV_OK) {
            CHECK(kv_blob_ref_encode(&ref, enc) == (size_t)(end - q));
            CHECK(memcmp(enc, q, (size_t)(end - q)) == 0);
        }
    }
    for (int i = 0; i < 4; i++) {
        kv_blob_ref ref;
        if (!kv_get_varint(&p, end, &ref.number) || !kv_get_varint(&p, end, &ref.offset) ||
            !kv_get_varint(&p, end, &ref.size))
            break;
        if (i % 2 == 0)
            ref.number = sc->info.number; /* so that it reaches the offset checks */
        const struct seen *s = sc->n ? &sc->s[(size_t)i % sc->n] : NULL;
        size_t cap = ref.size < READ_CAP ? (size_t)ref.size : READ_CAP;
        uint8_t *buf = malloc(cap + 1);
        CHECK(buf != NULL);
        uint64_t got;
        int rc = kv_blob_read(r, &ref, s ? s->key : NULL, s ? s->klen : 0, buf, cap, &got);
        check_rc(rc, KV_ERANGE);
        CHECK(got <= sc->info.file_size);
        free(buf);
    }
}

static void read_blob(const uint8_t *f, size_t size)
{
    FILE *fp = fopen(path, "wb");
    CHECK(fp != NULL);
    CHECK(size == 0 || fwrite(f, 1, size, fp) == size);
    CHECK(fclose(fp) == 0);
    uint64_t number = size >= 24 ? kv_get64(f + 16) : 1;
    kv_blob_reader *r;
    kv_error_set(KV_OK, "%s", "");
    int rc = kv_blob_reader_open(path, number, &r);
    check_rc(rc, KV_OK);
    if (rc == KV_OK) {
        struct scan *sc = calloc(1, sizeof *sc);
        CHECK(sc != NULL);
        kv_blob_reader_info(r, &sc->info);
        CHECK(sc->info.number == number && sc->info.file_size == size);
        CHECK(sc->info.record_bytes == size - HEADER - FOOTER);
        sc->next_off = HEADER;
        rc = kv_blob_scan(r, visit, sc);
        check_rc(rc, KV_OK);
        if (rc == KV_OK)
            CHECK(sc->visits == sc->info.records && sc->next_off == size - FOOTER);
        /* Every record the scan visited (it checked them) reads back. */
        for (size_t i = 0; i < sc->n; i++) {
            const struct seen *s = &sc->s[i];
            size_t vlen = (size_t)s->ref.size;
            uint8_t *buf = malloc(vlen + 1);
            CHECK(buf != NULL);
            uint64_t got;
            rc = kv_blob_read(r, &s->ref, s->key, s->klen, buf, vlen, &got);
            check_rc(rc, KV_OK);
            CHECK(rc == KV_OK && got == kv_blob_record_size(s->klen, vlen));
            CHECK(XXH3_64bits(buf, vlen) == s->vhash);
            if (vlen)
                CHECK(kv_blob_read(r, &s->ref, s->key, s->klen, buf, vlen - 1, NULL) == KV_ERANGE);
            free(buf);
        }
        /* The same records through references one step off: another
         * number, offset or size (a crafted file may hold a record there
         * too, so only the error's kind is checked). */
        for (size_t i = 0; i < sc->n && i < 8; i++) {
            const struct seen *s = &sc->s[i];
            uint8_t *buf = malloc((size_t)s->ref.size + 2);
            CHECK(buf != NULL);
            for (int k = 0; k < 5; k++) {
                kv_blob_ref ref = s->ref;
                if (k == 0)
                    ref.number++;
                else if (k == 1)
                    ref.offset++;
                else if (k == 2)
                    ref.offset--;
                else if (k == 3)
                    ref.size++;
                else
                    ref.offset += kv_blob_record_size(s->klen, s->ref.size);
                check_rc(kv_blob_read(r, &ref, s->key, s->klen, buf, (size_t)s->ref.size + 1, NULL),
                         KV_OK);
            }
            free(buf);
        }
        read_tail_refs(r, sc, f, size);
        for (size_t i = 0; i < sc->n; i++)
            free(sc->s[i].key);
        free(sc);
        kv_blob_reader_close(r);
    }
    CHECK(unlink(path) == 0);
}

/* ---- the target ------------------------------------------------------------------- */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0]) {
        fz_init("blob");
        snprintf(path, sizeof path, "%s/000001.blob", fz_mkdir());
    }
    read_blob(data, size);
    uint8_t *fixed = malloc(size + 1);
    CHECK(fixed != NULL);
    if (size)
        memcpy(fixed, data, size);
    if (repair(fixed, size))
        read_blob(fixed, size);
    free(fixed);
    return 0;
}
