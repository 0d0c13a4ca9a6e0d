/* batch.h - the encoding of a write batch, shared by kv_write and WAL replay.
 *
 * A batch is built in its WAL form from the start, so committing it costs no
 * re-encoding:
 *
 *   u64le first sequence | u32le count | count entries
 *   entry: u8 kind | varint key length | key | (values only) varint value
 *          length | value
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

#include <kv/status.h>

#define KV_BATCH_HEADER 12u

/* The representation behind the public kv_batch. */
struct kv_batch {
    uint8_t *rep; /* KV_BATCH_HEADER bytes, then the entries */
    size_t len, cap;
    uint32_t count;
    size_t user_bytes; /* keys and values, for write-amplification stats */
};

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
