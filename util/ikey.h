/* ikey.h - internal keys: how the store orders (user key, sequence) pairs
 * in its tables with plain bytewise comparison.
 *
 * A table compares keys bytewise, but the store needs "user key ascending,
 * then newest first". Appending a trailer to the raw user key would break
 * that ("a" + trailer could sort after "a\0"), so the user key is escaped
 * first, in an order-preserving way, and then closed:
 *
 *   every 0x00 byte of the user key  ->  0x00 0xFF
 *   every other byte                 ->  itself
 *   end of the user key              ->  0x00 0x01
 *   then 8 bytes, big-endian:            ~(sequence << 8 | kind)
 *
 * The terminator 0x00 0x01 sorts below any continuation (0x00 0xFF or a byte
 * >= 0x01), so a shorter key that is a prefix of a longer one sorts first,
 * and bytewise order of escaped keys is the order of user keys. The
 * inverted trailer puts higher sequence numbers first. The escaped key and
 * terminator form the "prefix" every version of a user key shares.
 *
 * A user key of n bytes with z zero bytes takes n + z + 2 + 8 bytes.
 * Byte layout also in doc/sstable_format.md ("Tables written by the store").
 *
 * Part of util/, the bottom layer: the store (kv/) writes and reads these
 * keys, and sstable/store_key.c decodes them for programs that read a
 * store's tables without the store. Not installed. */
#ifndef KV_UTIL_IKEY_H
#define KV_UTIL_IKEY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "coding.h"

#define KV_IKEY_TRAILER 8u

/* Bytes of the escaped key plus terminator (the prefix). */
static inline size_t kv_ikey_prefix_len(const uint8_t *key, size_t klen)
{
    size_t n = klen + 2;
    for (size_t i = 0; i < klen; i++)
        n += key[i] == 0;
    return n;
}

/* Writes the prefix of `key` to out (kv_ikey_prefix_len bytes); returns
 * the bytes written. */
static inline size_t kv_ikey_put_prefix(uint8_t *out, const uint8_t *key, size_t klen)
{
    uint8_t *p = out;
    const uint8_t *z;
    while (klen && (z = memchr(key, 0, klen)) != NULL) {
        size_t run = (size_t)(z - key);
        memcpy(p, key, run);
        p += run;
        *p++ = 0x00;
        *p++ = 0xFF;
        key += run + 1;
        klen -= run + 1;
    }
    if (klen)
        memcpy(p, key, klen);
    p += klen;
    *p++ = 0x00;
    *p++ = 0x01;
    return (size_t)(p - out);
}

static inline void kv_ikey_put_trailer(uint8_t *out, uint64_t seq, int kind)
{
    uint64_t t = ~(seq << 8 | (uint64_t)(kind & 0xFF));
    for (int i = 7; i >= 0; i--, t >>= 8)
        out[i] = (uint8_t)t;
}

/* Reads a trailer; 0 when it is not KV_IKEY_TRAILER bytes long. */
static inline int kv_ikey_get_trailer(const uint8_t *t, size_t len, uint64_t *seq, int *kind)
{
    if (len != KV_IKEY_TRAILER)
        return 0;
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | t[i];
    v = ~v;
    *seq = v >> 8;
    *kind = (int)(v & 0xFF);
    return 1;
}

/* An internal key whose user key has no 0x00 byte holds it unescaped, as
 * its first bytes: then *klen gets its length and the trailer is read, and
 * the caller may use ikey itself as the user key, with no copy (returns
 * 1). Returns 0 for any other key (kv_ikey_decode then copies it out, or
 * finds it invalid). One memchr instead of a loop over the bytes. */
static inline int kv_ikey_plain(const uint8_t *ikey, size_t ilen, size_t *klen, uint64_t *seq,
                                int *kind)
{
    if (ilen < 2 + KV_IKEY_TRAILER)
        return 0;
    size_t end = ilen - KV_IKEY_TRAILER;
    const uint8_t *z = (const uint8_t *)memchr(ikey, 0, end);
    if (!z || (size_t)(z - ikey) + 2 != end || z[1] != 0x01)
        return 0;
    *klen = (size_t)(z - ikey);
    return kv_ikey_get_trailer(ikey + end, KV_IKEY_TRAILER, seq, kind);
}

/* Decodes an internal key: the user key into out (its first `cap` bytes;
 * cap >= ilen always holds all of it), its whole length into *klen, and the
 * trailer. Returns 0 when the bytes are not a valid internal key. */
static inline int kv_ikey_decode(const uint8_t *ikey, size_t ilen, uint8_t *out, size_t cap,
                                 size_t *klen, uint64_t *seq, int *kind)
{
    if (ilen < 2 + KV_IKEY_TRAILER)
        return 0;
    size_t n = 0, end = ilen - KV_IKEY_TRAILER;
    for (size_t i = 0; i < end; i++) {
        uint8_t b = ikey[i];
        if (b == 0x00) {
            if (i + 1 >= end)
                return 0;
            if (ikey[i + 1] == 0x01 && i + 2 == end) {
                *klen = n;
                return kv_ikey_get_trailer(ikey + end, KV_IKEY_TRAILER, seq, kind);
            }
            if (ikey[i + 1] != 0xFF)
                return 0;
            i++; /* 0x00 0xFF: one 0x00 of the user key */
        }
        if (n < cap)
            out[n] = b;
        n++;
    }
    return 0; /* no terminator */
}

#endif /* KV_UTIL_IKEY_H */
