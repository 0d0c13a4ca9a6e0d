/* fuzz_wal.c - libFuzzer target: the input is a write-ahead log file.
 *
 * It is written to <dir>/000007.log and replayed with kv_wal_replay, the
 * call kv_open makes at recovery, twice: once as it is, once "repaired"
 * (every fragment header the reader's framing reaches gets its right
 * checksum, so that the fuzzer also gets past the checksum to the length,
 * type, tag and sequence rules). Each record delivered is handled the way
 * recovery handles it: decoded as a write batch (kv_batch_iterate) whose
 * entries go into a memtable (kv_mem_add).
 *
 * Checked against a reading of the log done here from doc/wal_format.md
 * alone: replay delivers exactly the whole records that pass their checks
 * (same number, same bytes, same order; nothing after the first damage, so
 * every record delivered passed its checksum), and its report (records,
 * bytes_read, bytes_dropped, tail_damaged) agrees. Each record is also
 * decoded here as a batch (kv/batch.h): kv_batch_iterate must accept it
 * exactly when that decoding does, pass the same entries, and pass none at
 * all when it rejects it. The kinds are issue 49's too: merge operands,
 * range deletes and the timed values and operands of ttl_seconds; a
 * record's range deletes are built into a range tombstone set as recovery
 * builds the memtable's (kv_rtset_union), which must cover each one's
 * start at its sequence or newer, not cover its end by it, and survive its
 * table encoding. A mismatch traps; so does any crash, leak or
 * sanitizer report. The as-is pass stops at the first record that is not a
 * batch, like recovery (the record refused and the rest of the file count
 * as dropped); the repaired pass reads to the end.
 *
 * Then, when the repaired log holds a whole record, recovery itself: the
 * repaired log becomes the live log of a database whose manifest names no
 * table and whose last_seq is just below the first record's sequence, and
 * kv_open opens it. It must succeed (a log's damage never fails the open),
 * having replayed the records up to the first that is not a batch or whose
 * sequences do not follow (doc/database.md, "Opening and recovery"): the
 * number replayed, the damage flag and the last sequence in kv_stats are
 * checked against that reading, and a write is then taken and read back.
 *
 * Each input gets a scratch directory (fuzz_tmp.h), removed at its end.
 * Seeds: corpus/wal, written by gen_seeds.c (see README.md). */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <kv/kv.h>

#include "../kv/batch.h"
#include "../kv/manifest.h"
#include "../kv/memtable.h"
#include "../kv/wal.h"
#include "fuzz_tmp.h"
#include "sstable/internal.h" /* kv_rtset: the range deletes of a record */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define LOG_NUMBER 7u

enum { T_FULL = 1, T_FIRST = 2, T_MIDDLE = 3, T_LAST = 4 };

/* ---- the log as doc/wal_format.md describes it ------------------------------- */

static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Low 32 bits of XXH3-64 over header bytes 4..8, then the payload. */
static uint32_t fragment_sum(const uint8_t *hdr, size_t n)
{
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, hdr + 4, KV_WAL_HEADER - 4);
    XXH3_64bits_update(&st, hdr + KV_WAL_HEADER, n);
    return (uint32_t)XXH3_64bits_digest(&st);
}

/* What a correct replay of the file delivers. */
struct expect {
    uint8_t *bytes;     /* the records' payloads, back to back */
    size_t *start, *len;
    uint64_t *end;      /* file offset just after each record */
    size_t n;
    uint64_t good_end;  /* after the last whole record */
    int damaged;
};

/* One pass over the file by offset: a fragment needs its 9-byte header and
 * payload inside one block and inside the file, a type 1..4 that follows
 * the one before, this log's tag and its checksum. Fewer than 9 bytes left
 * in a whole block are padding; in the file's last, partial block, a torn
 * header. The first fragment that fails ends the log, damaged. */
static void read_log(const uint8_t *f, size_t size, struct expect *e)
{
    size_t off = 0, used = 0, first = 0;
    int open = 0;
    memset(e, 0, sizeof *e);
    e->bytes = malloc(size + 1);
    e->start = malloc((size / KV_WAL_HEADER + 1) * sizeof *e->start);
    e->len = malloc((size / KV_WAL_HEADER + 1) * sizeof *e->len);
    e->end = malloc((size / KV_WAL_HEADER + 1) * sizeof *e->end);
    CHECK(e->bytes && e->start && e->len && e->end);
    while (off < size) {
        size_t block_end = (off / KV_WAL_BLOCK + 1) * KV_WAL_BLOCK;
        size_t limit = block_end < size ? block_end : size;
        if (limit - off < KV_WAL_HEADER) {
            if (limit == block_end) {
                off = block_end; /* padding */
                continue;
            }
            e->damaged = 1; /* torn header */
            break;
        }
        const uint8_t *h = f + off;
        size_t n = le16(h + 4);
        int type = h[6];
        if (n > limit - off - KV_WAL_HEADER || type < T_FULL || type > T_LAST ||
            le16(h + 7) != (uint16_t)LOG_NUMBER || le32(h) != fragment_sum(h, n) ||
            (open && (type == T_FULL || type == T_FIRST)) ||
            (!open && (type == T_MIDDLE || type == T_LAST))) {
            e->damaged = 1;
            break;
        }
        if (type == T_FULL || type == T_FIRST)
            first = used;
        memcpy(e->bytes + used, h + KV_WAL_HEADER, n);
        used += n;
        off += KV_WAL_HEADER + n;
        open = type == T_FIRST || type == T_MIDDLE;
        if (!open) {
            e->start[e->n] = first;
            e->len[e->n] = used - first;
            e->end[e->n] = off;
            e->n++;
            e->good_end = off;
        }
    }
    if (open)
        e->damaged = 1; /* the file ends inside a record */
}

static void expect_free(struct expect *e)
{
    free(e->bytes);
    free(e->start);
    free(e->len);
    free(e->end);
}

/* Rewrites the checksum of every fragment header the framing reaches. */
static void repair(uint8_t *f, size_t size)
{
    for (size_t base = 0; base < size; base += KV_WAL_BLOCK) {
        size_t blen = size - base < KV_WAL_BLOCK ? size - base : KV_WAL_BLOCK;
        size_t pos = 0;
        while (blen - pos >= KV_WAL_HEADER) {
            uint8_t *h = f + base + pos;
            size_t n = le16(h + 4);
            if (n > blen - pos - KV_WAL_HEADER)
                break;
            uint32_t s = fragment_sum(h, n);
            for (int i = 0; i < 4; i++)
                h[i] = (uint8_t)(s >> (8 * i));
            pos += KV_WAL_HEADER + n;
        }
    }
}

/* ---- a batch as kv/batch.h describes it ----------------------------------------- */

struct entry {
    uint64_t seq;
    int kind;
    const uint8_t *key, *val;
    size_t klen, vlen;
};

/* LEB128, at most 10 bytes, value below 2^64. */
static int varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t r = 0;
    for (int i = 0; i < 10; i++) {
        if (*p == end)
            return 0;
        uint8_t b = *(*p)++;
        if (i == 9 && b > 1)
            return 0; /* more than 64 bits, or an eleventh byte */
        r |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *v = r;
            return 1;
        }
    }
    return 0;
}

/* Decodes rec into ents[] (room for len / 2 + 1); -1 when it is not a batch. */
static long decode_batch(const uint8_t *rec, size_t len, struct entry *ents)
{
    if (len < KV_BATCH_HEADER)
        return -1;
    uint64_t seq = 0;
    for (int i = 7; i >= 0; i--)
        seq = seq << 8 | rec[i];
    uint32_t count = le32(rec + 8);
    const uint8_t *p = rec + KV_BATCH_HEADER, *end = rec + len;
    for (uint32_t i = 0; i < count; i++) {
        struct entry *x = &ents[i];
        uint64_t klen, vlen = 0;
        if (p == end)
            return -1;
        x->kind = *p++;
        /* Tombstone 0, value 1, merge operand 3, range delete 4, timed value
         * 5 and timed operand 6; 2 (a blob reference) is for tables only. */
        if (x->kind > KV_KIND_TMERGE || x->kind == KV_KIND_BLOB)
            return -1;
        if (!varint(&p, end, &klen) || klen > KV_MAX_KEY_SIZE || klen > (uint64_t)(end - p))
            return -1;
        x->key = p;
        p += klen;
        /* Every kind but a tombstone has a second string: the value, the
         * operand, the range's end (a key), or the timed bytes and their
         * 8-byte write time. */
        int timed = x->kind == KV_KIND_TVALUE || x->kind == KV_KIND_TMERGE;
        uint64_t most = x->kind == KV_KIND_RANGE_DEL ? KV_MAX_KEY_SIZE
                        : timed                      ? KV_MAX_VALUE_SIZE + KV_TTL_STAMP
                                                     : KV_MAX_VALUE_SIZE;
        if (x->kind != KV_KIND_TOMBSTONE &&
            (!varint(&p, end, &vlen) || vlen > most || vlen > (uint64_t)(end - p) ||
             (timed && vlen < KV_TTL_STAMP)))
            return -1;
        x->val = p;
        p += vlen;
        x->seq = seq + i;
        x->klen = (size_t)klen;
        x->vlen = (size_t)vlen;
    }
    return p == end ? (long)count : -1;
}

/* ---- replay ---------------------------------------------------------------------- */

#define RT_MAX 256 /* range deletes of a record checked (the rest are passed over) */

struct replay {
    const struct expect *e;
    size_t next;           /* records delivered so far */
    int stop_at_bad;       /* return 1 at a record that is not a batch, as recovery does */
    size_t stopped_at;     /* that record's index + 1, or 0 */
    struct entry *want;    /* the record's entries as decoded here */
    long nwant;
    long seen;             /* entries kv_batch_iterate passed so far */
    kv_mem *mem;
    kv_rt rts[RT_MAX]; /* the record's range deletes (into the record) */
    size_t nrt;
};

static int on_entry(void *ctx, uint64_t seq, int kind, const uint8_t *key, size_t klen,
                    const uint8_t *val, size_t vlen)
{
    struct replay *r = ctx;
    CHECK(r->seen < r->nwant);
    const struct entry *w = &r->want[r->seen++];
    CHECK(seq == w->seq && kind == w->kind && klen == w->klen && vlen == w->vlen);
    CHECK(klen == 0 || memcmp(key, w->key, klen) == 0);
    CHECK(vlen == 0 || memcmp(val, w->val, vlen) == 0);
    if (kind == KV_KIND_RANGE_DEL) {
        /* The store's replay_entry keeps range deletes apart from the
         * memtable, for its range tombstone set: collected here likewise. */
        /* Sequences outside 1 .. KV_MAX_SEQ never reach the set: recovery
         * refuses such a record first (as kv_mem_add refuses the entry). */
        if (r->nrt < RT_MAX && seq >= 1 && seq <= KV_MAX_SEQ)
            r->rts[r->nrt++] = (kv_rt){key, klen, val, vlen, seq};
        return 0;
    }
    /* The store's replay_entry: kv_mem_add refuses a sequence over
     * KV_MAX_SEQ or a (key, sequence) pair it holds already. */
    int rc = kv_mem_add(r->mem, 0, seq, kind, key, klen, val, vlen);
    CHECK(rc == KV_OK || rc == KV_EINVAL);
    return 0;
}

static int bytewise(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
    size_t n = al < bl ? al : bl;
    int c = n ? memcmp(a, b, n) : 0;
    return c ? c : al < bl ? -1 : al > bl;
}

/* A record's range deletes as the memtable's range tombstone set gets
 * them (kv_rtset_union: untrusted ends, inverted or empty ones ignored):
 * a tombstone's start must be covered at a sequence at least its own, its
 * end not by it; the set survives its table encoding unchanged. */
static void check_ranges(struct replay *r)
{
    if (r->nrt == 0)
        return;
    kv_rtset *set = NULL;
    CHECK(kv_rtset_union(NULL, NULL, 0, r->rts, r->nrt, NULL, NULL, &set) == KV_OK);
    int live = 0;
    for (size_t i = 0; i < r->nrt; i++) {
        const kv_rt *t = &r->rts[i];
        if (bytewise(t->start, t->slen, t->end, t->elen) >= 0)
            continue;
        live = 1;
        CHECK(kv_rtset_cover(set, t->start, t->slen, KV_MAX_SEQ) >= t->seq);
        /* The end is not covered by it (sequences in a record differ). */
        CHECK(kv_rtset_cover(set, t->end, t->elen, t->seq) != t->seq);
    }
    CHECK(live == (set != NULL));
    if (set) {
        uint8_t *enc = NULL;
        size_t elen = 0;
        CHECK(kv_rtset_encode(set, &enc, &elen) == KV_OK);
        kv_rtset *back = NULL;
        CHECK(kv_rtset_decode(NULL, enc, elen, &back) == KV_OK && back != NULL);
        CHECK(kv_rtset_count(back) == kv_rtset_count(set));
        for (size_t i = 0; i < r->nrt; i++)
            CHECK(kv_rtset_cover(back, r->rts[i].start, r->rts[i].slen, KV_MAX_SEQ) ==
                  kv_rtset_cover(set, r->rts[i].start, r->rts[i].slen, KV_MAX_SEQ));
        free(enc);
        kv_rtset_unref(back);
    }
    kv_rtset_unref(set);
}

static int on_record(void *ctx, const void *rec, size_t len)
{
    struct replay *r = ctx;
    const struct expect *e = r->e;
    CHECK(rec != NULL && r->next < e->n);
    CHECK(len == e->len[r->next]);
    CHECK(len == 0 || memcmp(rec, e->bytes + e->start[r->next], len) == 0);
    r->next++;

    r->want = malloc((len / 2 + 1) * sizeof *r->want);
    CHECK(r->want != NULL);
    r->nwant = decode_batch(rec, len, r->want);
    r->seen = 0;
    r->nrt = 0;
    int rc = kv_batch_iterate(rec, len, on_entry, r);
    if (rc == KV_OK)
        check_ranges(r);
    free(r->want);
    r->want = NULL;
    if (r->nwant < 0) {
        CHECK(rc == KV_ECORRUPT && r->seen == 0);
        if (r->stop_at_bad) {
            r->stopped_at = r->next;
            return 1;
        }
        return 0;
    }
    CHECK(rc == KV_OK && r->seen == r->nwant);
    return 0;
}

static void replay(const char *path, const uint8_t *f, size_t size, int stop_at_bad)
{
    FILE *fp = fopen(path, "wb");
    CHECK(fp != NULL);
    CHECK(size == 0 || fwrite(f, 1, size, fp) == size);
    CHECK(fclose(fp) == 0);

    struct expect e;
    read_log(f, size, &e);
    struct replay r = {.e = &e, .stop_at_bad = stop_at_bad};
    CHECK(kv_mem_new(0, 0, &r.mem) == KV_OK);
    kv_wal_report rep;
    int rc = kv_wal_replay(path, LOG_NUMBER, on_record, &r, &rep);
    kv_mem_free(r.mem);
    if (r.stopped_at) {
        /* Refused by the callback: no damage is reported, but that record
         * and all after it are dropped. */
        CHECK(rc == 1 && rep.records == r.stopped_at - 1 && r.next == r.stopped_at);
        CHECK(rep.bytes_read == (r.stopped_at > 1 ? e.end[r.stopped_at - 2] : 0));
        CHECK(rep.bytes_dropped == size - rep.bytes_read && rep.tail_damaged == 0);
    } else {
        CHECK(rc == KV_OK && rep.records == e.n && r.next == e.n);
        CHECK(rep.bytes_read == e.good_end);
        CHECK(rep.tail_damaged == e.damaged);
        CHECK(rep.bytes_dropped == (e.damaged ? size - e.good_end : 0));
    }
    expect_free(&e);
    CHECK(unlink(path) == 0);
}

/* ---- recovery: the log as kv_open finds it ---------------------------------------- */

/* A merge operator that takes any operands (recovery's flush merges them):
 * the value, then the operands, back to back. */
static int concat(const void *existing, size_t elen, const void *const *ops, const size_t *lens,
                  size_t n, void **result, size_t *rlen)
{
    size_t total = existing ? elen : 0;
    for (size_t i = 0; i < n; i++)
        total += lens[i];
    uint8_t *r = malloc(total + 1);
    if (!r)
        return -1;
    size_t p = 0;
    if (existing && elen) {
        memcpy(r, existing, elen);
        p = elen;
    }
    for (size_t i = 0; i < n; i++) {
        if (lens[i])
            memcpy(r + p, ops[i], lens[i]);
        p += lens[i];
    }
    *result = r;
    *rlen = p;
    return 0;
}

static int concat_full(void *state, const void *key, size_t klen, const void *existing, size_t elen,
                       const void *const *ops, const size_t *lens, size_t n, void **result,
                       size_t *rlen)
{
    (void)state, (void)key, (void)klen;
    return concat(existing, elen, ops, lens, n, result, rlen);
}

static int concat_partial(void *state, const void *key, size_t klen, const void *const *ops,
                          const size_t *lens, size_t n, void **result, size_t *rlen)
{
    (void)state, (void)key, (void)klen;
    return concat(NULL, 0, ops, lens, n, result, rlen);
}

static const kv_merge_operator concat_op = {"fuzz_wal.concat", NULL, concat_full, concat_partial};

/* The log, repaired, as the live log of a database whose manifest names no
 * table and whose last_seq is just below the first record's sequence (so
 * that the first record is in turn). kv_open must succeed whatever the
 * log holds, replay the records up to the first one that is not a batch or
 * whose sequences do not follow (doc/database.md, "Opening and
 * recovery"), and report exactly that in kv_stats. */
static void recover(const char *dir, const uint8_t *f, size_t size, const struct expect *e)
{
    /* What doc/database.md says recovery does with these records. */
    uint64_t floor = 0, next = 0;
    if (e->n > 0 && e->len[0] >= KV_BATCH_HEADER) {
        uint64_t seq = le32(e->bytes + e->start[0]) |
                       (uint64_t)le32(e->bytes + e->start[0] + 4) << 32;
        if (seq >= 1 && seq - 1 <= KV_MAX_SEQ)
            floor = seq - 1;
    }
    uint64_t last = floor;
    size_t taken = 0;
    int refused = 0;
    for (size_t i = 0; i < e->n && !refused; i++) {
        const uint8_t *rec = e->bytes + e->start[i];
        size_t len = e->len[i];
        struct entry *ents = malloc((len / 2 + 1) * sizeof *ents);
        CHECK(ents != NULL);
        refused = decode_batch(rec, len, ents) < 0;
        free(ents);
        if (refused)
            break;
        uint64_t seq = le32(rec) | (uint64_t)le32(rec + 4) << 32;
        uint32_t count = le32(rec + 8);
        if (count) {
            refused = seq == 0 || seq > KV_MAX_SEQ || count - 1 > KV_MAX_SEQ - seq ||
                      (next ? seq != next : seq > floor + 1);
            if (refused)
                break;
            next = seq + count;
            last = seq + count - 1 > last ? seq + count - 1 : last;
        }
        taken++;
    }

    kv_manifest_state st = {.format_version = 1, .next_file = LOG_NUMBER + 1, .last_seq = floor,
                            .log_number = LOG_NUMBER, .seed = 0};
    kv_manifest *m;
    CHECK(kv_manifest_open(dir, 1, &st, &m) == KV_OK);
    kv_manifest_close(m);
    char log[600];
    snprintf(log, sizeof log, "%s/%06u.log", dir, LOG_NUMBER);
    FILE *fp = fopen(log, "wb");
    CHECK(fp != NULL);
    CHECK(size == 0 || fwrite(f, 1, size, fp) == size);
    CHECK(fclose(fp) == 0);
    kv_options o;
    kv_options_init(&o);
    o.create_if_missing = 0;
    o.merge_operator = &concat_op; /* merge operands read back (below) */
    kv_db *db;
    CHECK(kv_open(dir, &o, &db) == KV_OK); /* a log's damage never fails the open */
    struct kv_stats s;
    CHECK(kv_stats(db, &s) == KV_OK);
    CHECK(s.recovered_records == taken);
    CHECK(s.recovery_tail_damaged == (uint64_t)(refused || e->damaged));
    CHECK(s.last_sequence == last);
    if (last < KV_MAX_SEQ) { /* a write is taken and read back */
        void *v;
        size_t vlen;
        CHECK(kv_put(db, "after", 5, "replay", 6) == KV_OK);
        CHECK(kv_get(db, "after", 5, &v, &vlen) == KV_OK);
        CHECK(vlen == 6 && memcmp(v, "replay", 6) == 0);
        kv_free(v);
    }
    /* Every key replayed, read both ways through the range deletes, merge
     * operands and timed values it holds. */
    for (int back = 0; back < 2; back++) {
        kv_iter *it;
        CHECK(kv_iter_new(db, NULL, &it) == KV_OK);
        size_t n = 0;
        if (back)
            kv_iter_seek_last(it);
        else
            kv_iter_seek_first(it);
        for (; kv_iter_valid(it) && n < 100000; n++) {
            size_t kl, vl;
            CHECK(kv_iter_key(it, &kl) != NULL || kl == 0);
            (void)kv_iter_value(it, &vl);
            if (back)
                kv_iter_prev(it);
            else
                kv_iter_next(it);
        }
        CHECK(kv_iter_status(it) == KV_OK);
        kv_iter_free(it);
    }
    CHECK(kv_close(db) == KV_OK);
}

/* ---- the target ------------------------------------------------------------------- */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fz_base[0])
        fz_init("wal");
    const char *dir = fz_mkdir();
    char path[600];
    snprintf(path, sizeof path, "%s/%06u.log", dir, LOG_NUMBER);
    replay(path, data, size, 1);
    uint8_t *fixed = malloc(size + 1);
    CHECK(fixed != NULL);
    if (size)
        memcpy(fixed, data, size);
    repair(fixed, size);
    replay(path, fixed, size, 0);
    struct expect e;
    read_log(fixed, size, &e);
    if (e.n > 0) /* with no whole record, replay above said all there is */
        recover(dir, fixed, size, &e);
    expect_free(&e);
    free(fixed);
    fz_done();
    return 0;
}
