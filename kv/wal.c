/* wal.c - write-ahead log writer and replay. Layout: doc/wal_format.md. */
#define _POSIX_C_SOURCE 200809L
#include "wal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/coding.h"
#include "util/file.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

enum { FULL = 1, FIRST = 2, MIDDLE = 3, LAST = 4 };

struct kv_wal {
    kv_file *file;
    uint16_t tag;
    uint64_t offset; /* bytes written */
    int dead;        /* first error that killed the log, or 0 */
    uint8_t *buf;    /* framing buffer */
    size_t cap;
};

/* ---- framing --------------------------------------------------------------- */

/* The checksum covers the header after the checksum field, then the payload. */
static uint32_t frag_checksum(const uint8_t *hdr, const uint8_t *payload, size_t len)
{
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, hdr + 4, KV_WAL_HEADER - 4);
    if (len)
        XXH3_64bits_update(&st, payload, len);
    return (uint32_t)XXH3_64bits_digest(&st);
}

static void put_header(uint8_t *h, uint16_t len, uint8_t type, uint16_t tag,
                       const uint8_t *payload)
{
    kv_put16(h + 4, len);
    h[6] = type;
    kv_put16(h + 7, tag);
    uint32_t c = frag_checksum(h, payload, len);
    h[0] = (uint8_t)c;
    h[1] = (uint8_t)(c >> 8);
    h[2] = (uint8_t)(c >> 16);
    h[3] = (uint8_t)(c >> 24);
}

/* ---- writer ----------------------------------------------------------------- */

static int wal_create(const char *path, uint64_t number, int sync_dir, kv_wal **out)
{
    if (!out)
        return KV_EINVAL;
    *out = NULL;
    if (!path)
        return KV_EINVAL;
    kv_wal *w = calloc(1, sizeof *w);
    if (!w)
        return KV_ENOMEM;
    w->tag = (uint16_t)number;
    int rc = kv_file_create(path, &w->file);
    if (rc != KV_OK) {
        free(w);
        return rc;
    }
    rc = sync_dir ? kv_file_sync_dir_of(path) : KV_OK;
    if (rc != KV_OK) {
        kv_file_close(w->file);
        remove(path);
        free(w);
        return rc;
    }
    *out = w;
    return KV_OK;
}

int kv_wal_create(const char *path, uint64_t number, kv_wal **out)
{
    return wal_create(path, number, 1, out);
}

int kv_wal_create_unsynced(const char *path, uint64_t number, kv_wal **out)
{
    return wal_create(path, number, 0, out);
}

int kv_wal_append(kv_wal *w, const void *rec, size_t len)
{
    if (!w || (len && !rec) || len > KV_WAL_MAX_RECORD)
        return KV_EINVAL;
    if (w->dead)
        return w->dead;
    /* Worst case: a header per block touched plus padding of one header. */
    size_t need = len + (len / (KV_WAL_BLOCK - KV_WAL_HEADER) + 2) * KV_WAL_HEADER + KV_WAL_BLOCK;
    if (need > w->cap) {
        uint8_t *nb = realloc(w->buf, need);
        if (!nb)
            return KV_ENOMEM;
        w->buf = nb;
        w->cap = need;
    }
    const uint8_t *p = rec;
    uint8_t *out = w->buf;
    uint64_t off = w->offset;
    size_t left = len;
    int first = 1;
    do {
        size_t room = KV_WAL_BLOCK - off % KV_WAL_BLOCK;
        if (room < KV_WAL_HEADER) { /* too small for a header: zero padding */
            memset(out, 0, room);
            out += room;
            off += room;
            room = KV_WAL_BLOCK;
        }
        size_t n = room - KV_WAL_HEADER;
        if (n > left)
            n = left;
        if (n > UINT16_MAX)
            n = UINT16_MAX;
        int last = n == left;
        uint8_t type = first && last ? FULL : first ? FIRST : last ? LAST : MIDDLE;
        put_header(out, (uint16_t)n, type, w->tag, p);
        if (n)
            memcpy(out + KV_WAL_HEADER, p, n);
        out += KV_WAL_HEADER + n;
        off += KV_WAL_HEADER + n;
        p += n;
        left -= n;
        first = 0;
    } while (left);
    int rc = kv_file_append(w->file, w->buf, (size_t)(out - w->buf));
    if (rc != KV_OK) {
        w->dead = rc;
        return rc;
    }
    w->offset = off;
    return KV_OK;
}

int kv_wal_sync(kv_wal *w)
{
    if (!w)
        return KV_EINVAL;
    if (w->dead)
        return w->dead;
    int rc = kv_file_datasync(w->file);
    if (rc != KV_OK)
        w->dead = rc;
    return rc;
}

uint64_t kv_wal_size(const kv_wal *w)
{
    return w ? w->offset : 0;
}

int kv_wal_close(kv_wal *w)
{
    if (!w)
        return KV_OK;
    int rc = w->dead;
    int crc = kv_file_close(w->file);
    if (rc == KV_OK)
        rc = crc;
    free(w->buf);
    free(w);
    return rc;
}

/* ---- replay ------------------------------------------------------------------ */

int kv_wal_replay(const char *path, uint64_t number,
                  int (*fn)(void *ctx, const void *rec, size_t len), void *ctx,
                  kv_wal_report *report)
{
    return kv_wal_replay_from(path, number, 0, fn, ctx, report);
}

int kv_wal_replay_from(const char *path, uint64_t number, uint64_t from,
                       int (*fn)(void *ctx, const void *rec, size_t len), void *ctx,
                       kv_wal_report *report)
{
    if (!path || !fn || !report)
        return KV_EINVAL;
    memset(report, 0, sizeof *report);
    kv_file *file;
    uint64_t size;
    int rc = kv_file_open(path, &file);
    if (rc != KV_OK)
        return rc;
    if ((rc = kv_file_size(file, &size)) != KV_OK) {
        kv_file_close(file);
        return rc;
    }
    uint8_t *block = malloc(KV_WAL_BLOCK);
    uint8_t *rec = NULL;
    size_t rlen = 0, rcap = 0;
    rc = block ? KV_OK : KV_ENOMEM;
    int in_record = 0, damaged = 0, refused = 0;
    uint64_t good_end = from; /* file offset after the last complete record */
    uint16_t tag = (uint16_t)number;
    uint64_t first = from - from % KV_WAL_BLOCK;
    if (from > size) /* shorter than what an earlier replay took: damage */
        damaged = 1;

    for (uint64_t base = first; rc == KV_OK && !damaged && base < size; base += KV_WAL_BLOCK) {
        size_t blen = size - base < KV_WAL_BLOCK ? (size_t)(size - base) : KV_WAL_BLOCK;
        rc = kv_file_pread(file, base, block, blen);
        if (rc == KV_ECORRUPT)
            rc = KV_EIO; /* the file shrank under us, or a short read */
        size_t pos = base == first ? (size_t)(from - first) : 0;
        while (rc == KV_OK && !damaged && blen - pos >= KV_WAL_HEADER) {
            const uint8_t *h = block + pos;
            uint16_t n = kv_get16(h + 4);
            uint8_t type = h[6];
            if (pos + KV_WAL_HEADER + n > blen || type < FULL || type > LAST ||
                kv_get16(h + 7) != tag || kv_get32(h) != frag_checksum(h, h + KV_WAL_HEADER, n) ||
                ((type == FULL || type == FIRST) && in_record) ||
                ((type == MIDDLE || type == LAST) && !in_record)) {
                damaged = 1;
                break;
            }
            if (rlen + n > KV_WAL_MAX_RECORD) {
                damaged = 1;
                break;
            }
            if (rlen + n > rcap) {
                size_t ncap = rcap ? rcap : 4096;
                while (ncap < rlen + n)
                    ncap *= 2;
                uint8_t *nr = realloc(rec, ncap);
                if (!nr) {
                    rc = KV_ENOMEM;
                    break;
                }
                rec = nr;
                rcap = ncap;
            }
            if (n)
                memcpy(rec + rlen, h + KV_WAL_HEADER, n);
            rlen += n;
            pos += KV_WAL_HEADER + n;
            in_record = type == FIRST || type == MIDDLE;
            if (type == FULL || type == LAST) {
                static const uint8_t empty[1];
                int user = fn(ctx, rlen ? rec : empty, rlen);
                rlen = 0;
                if (user != 0) { /* refused: it and all after it are dropped */
                    rc = user;
                    refused = 1;
                    break;
                }
                report->records++;
                good_end = base + pos;
            }
        }
        /* Fewer than a header's bytes at the end of a whole block are the
         * writer's padding; at the end of a partial last block, a torn
         * header. */
        if (!damaged && rc == KV_OK && blen < KV_WAL_BLOCK && pos < blen)
            damaged = 1;
    }
    if (rc == KV_OK && in_record)
        damaged = 1; /* the file ends inside a record */
    report->bytes_read = good_end;
    report->bytes_dropped = (damaged || refused) && size > good_end ? size - good_end : 0;
    report->tail_damaged = damaged;
    free(block);
    free(rec);
    kv_file_close(file);
    return rc;
}
