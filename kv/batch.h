/* batch.h - the encoding of a write batch, shared by kv_batch_*, kv_put
 * (write.c), the commit group and WAL replay: written here only.
 *
 * A batch is built in its WAL form from the start, so committing it costs no
 * re-encoding:
 *
 *   u64le first sequence | u32le count | count entries
 *   entry: u8 kind | varint key length | key | (all kinds but a tombstone)
 *          varint value length | value
 *
 * kind is a KV_KIND_* of memtable.h: a value, a tombstone, a merge operand,
 * a range delete (key: its begin, value: its end), and the timed value and
 * operand of ttl_seconds (value: the bytes, then the u64le write time).
 *
 * Varints are LEB128 (7 bits a byte, low first, at most 10 bytes). The
 * sequence is filled in when the batch is committed; entry i gets sequence
 * first + i. Byte layout also in doc/wal_format.md.
 *
 * Internal to kv: not installed, symbols hidden. */
#ifndef KV_BATCH_H
#define KV_BATCH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <kv/status.h>
#include "memtable.h" /* KV_KIND_* */
#include "util/coding.h"

#define KV_BATCH_HEADER 12u

/* The representation behind the public kv_batch. */
struct kv_batch {
    uint8_t *rep; /* KV_BATCH_HEADER bytes, then the entries */
    size_t len, cap;
    uint32_t count;
    size_t user_bytes; /* keys and values, for write-amplification stats */
    unsigned kinds;    /* bit 1 << kind for every kind it holds */
};

/* A batch's kinds that need more than a plain commit: a range delete (the
 * memtable's tombstone set is rebuilt and republished) or a merge operand
 * (the database needs a merge operator). */
#define KV_BATCH_SPECIAL (1u << KV_KIND_RANGE_DEL | 1u << KV_KIND_MERGE)

/* Not a kind: the batch holds a key (or a range delete's end) longer than
 * KV_OLD_MAX_KEY_SIZE, the limit before issue 51, which a kv from before
 * then takes for damage in a log. */
#define KV_BATCH_LONG_KEY (1u << 31)
#define KV_OLD_MAX_KEY_SIZE ((size_t)64 * 1024)

/* What a batch holds that raises the database's format version
 * (kv_db_note_features) before the log holds it. */
#define KV_BATCH_FEATURES (KV_BATCH_SPECIAL | KV_BATCH_LONG_KEY)

/* The kinds bits of one entry. */
static inline unsigned kv_batch_entry_kinds(int kind, size_t klen, size_t vlen)
{
    unsigned k = 1u << kind;
    if (klen > KV_OLD_MAX_KEY_SIZE || (kind == KV_KIND_RANGE_DEL && vlen > KV_OLD_MAX_KEY_SIZE))
        k |= KV_BATCH_LONG_KEY;
    return k;
}

/* The most bytes one entry takes encoded. */
#define KV_BATCH_ENTRY_MAX(klen, vlen) ((klen) + (vlen) + 21u) /* kind, two varints */

/* 1 when entries of this kind carry a value (or a range delete's end). */
static inline int kv_batch_kind_has_value(int kind)
{
    return kind != KV_KIND_TOMBSTONE;
}

/* Writes the header of a batch of `count` entries (sequence 0, set at the
 * commit) at rep. */
static inline void kv_batch_put_header(uint8_t *rep, uint32_t count)
{
    kv_put64(rep, 0);
    kv_put32(rep + 8, count);
}

/* Encodes one entry at p (room: KV_BATCH_ENTRY_MAX); returns its length.
 * vlen and val are ignored for a tombstone. Inline: kv_put encodes its one
 * entry with it on the stack, at no more cost than by hand. */
static inline size_t kv_batch_put_entry(uint8_t *p, int kind, const void *key, size_t klen,
                                        const void *val, size_t vlen)
{
    uint8_t *q = p;
    *q++ = (uint8_t)kind;
    q += kv_put_varint(q, klen);
    if (klen)
        memcpy(q, key, klen);
    q += klen;
    if (kv_batch_kind_has_value(kind)) {
        q += kv_put_varint(q, vlen);
        if (vlen)
            memcpy(q, val, vlen);
        q += vlen;
    }
    return (size_t)(q - p);
}

/* Re-encodes the n-entry batch body src[0, len) (entries only, trusted:
 * built by kv_batch_*) into dst with every value and merge operand timed:
 * VALUE becomes TVALUE and MERGE TMERGE, each with `now` (u64le seconds)
 * after its bytes. dst needs len + n * KV_BATCH_STAMP_GROWTH bytes.
 * Returns the bytes written. */
#define KV_BATCH_STAMP_GROWTH 9u /* 8 bytes of time, a varint one byte longer */
size_t kv_batch_stamp(uint8_t *dst, const uint8_t *src, size_t len, uint32_t n, uint64_t now);

/* Sets the first sequence number in an encoded batch. */
void kv_batch_set_seq(uint8_t *rep, uint64_t seq);

/* Walks an encoded batch (from a WAL record, untrusted): calls fn for each
 * entry with its sequence number. KV_ECORRUPT when the encoding is bad
 * (then no entry at all has been passed to fn: it is checked first), or
 * fn's nonzero return. */
int kv_batch_iterate(const uint8_t *rep, size_t len,
                     int (*fn)(void *ctx, uint64_t seq, int kind, const uint8_t *key,
                               size_t klen, const uint8_t *val, size_t vlen),
                     void *ctx);

#endif /* KV_BATCH_H */
