/* store_key.c - the keys of tables written by the store: encoding and
 * decoding (user key escaped, terminator, inverted big-endian sequence
 * trailer), for programs that read a store's tables without the store.
 * Layout: doc/sstable_format.md, "Tables written by the store". */
#include <kv/sstable.h>

#include <string.h>

#define TRAILER 8u        /* bytes of the sequence trailer */
#define MAX_SEQUENCE (((uint64_t)1 << 56) - 1)

int kv_sst_store_key_decode(const void *key, size_t klen, uint8_t *user, size_t user_cap,
                            kv_sst_store_key *out)
{
    if (!out || (klen && !key) || (user_cap && !user))
        return KV_EINVAL;
    memset(out, 0, sizeof *out);
    const uint8_t *k = key;
    if (klen < 2 + TRAILER)
        return KV_ECORRUPT;
    size_t end = klen - TRAILER, u = 0;
    for (size_t i = 0; i < end; i++) {
        uint8_t b = k[i];
        if (b == 0x00) {
            if (i + 1 >= end)
                return KV_ECORRUPT;
            if (k[i + 1] == 0x01) { /* the terminator: must end the prefix */
                if (i + 2 != end)
                    return KV_ECORRUPT;
                uint64_t t = 0;
                for (size_t j = 0; j < TRAILER; j++)
                    t = t << 8 | k[end + j];
                t = ~t;
                out->user_len = u;
                out->prefix_len = end;
                out->sequence = t >> 8;
                out->kind = (int)(t & 0xFF);
                return KV_OK;
            }
            if (k[i + 1] != 0xFF)
                return KV_ECORRUPT;
            i++; /* 0x00 0xFF: one 0x00 of the user key */
        }
        if (u < user_cap)
            user[u] = b;
        u++;
    }
    return KV_ECORRUPT; /* no terminator */
}

int kv_sst_store_key_encode(const void *user, size_t ulen, uint64_t sequence, int kind,
                            int with_trailer, uint8_t *out, size_t cap, size_t *out_len)
{
    if (!out_len)
        return KV_EINVAL;
    *out_len = 0;
    if ((ulen && !user) || !out ||
        (with_trailer && (sequence > MAX_SEQUENCE || kind < 0 || kind > 0xFF)))
        return KV_EINVAL;
    const uint8_t *u = user;
    size_t need = ulen + 2 + (with_trailer ? TRAILER : 0);
    for (size_t i = 0; i < ulen; i++)
        need += u[i] == 0x00;
    if (cap < need) {
        *out_len = need;
        return KV_EINVAL;
    }
    size_t n = 0;
    for (size_t i = 0; i < ulen; i++) {
        out[n++] = u[i];
        if (u[i] == 0x00)
            out[n++] = 0xFF;
    }
    out[n++] = 0x00;
    out[n++] = 0x01;
    if (with_trailer) {
        uint64_t t = ~(sequence << 8 | (uint64_t)kind);
        for (int j = (int)TRAILER - 1; j >= 0; j--, t >>= 8)
            out[n + (size_t)j] = (uint8_t)t;
        n += TRAILER;
    }
    *out_len = n;
    return KV_OK;
}
