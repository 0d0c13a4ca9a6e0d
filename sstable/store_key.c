/* store_key.c - the keys of tables written by the store, for programs that
 * read a store's tables without the store: the public face of util/ikey.h
 * (user key escaped, terminator, inverted big-endian sequence trailer),
 * with its arguments checked. Layout: doc/sstable_format.md, "Tables
 * written by the store". Decoding returns whatever kind byte the trailer
 * holds (the store writes KV_SST_KIND_* 0 to 3, 5 and 6): the caller judges
 * it, as kvtool verify does. */
#include <kv/sstable.h>

#include <string.h>

#include "util/ikey.h"

#define MAX_SEQUENCE (((uint64_t)1 << 56) - 1)

int kv_sst_store_key_decode(const void *key, size_t klen, uint8_t *user, size_t user_cap,
                            kv_sst_store_key *out)
{
    if (!out || (klen && !key) || (user_cap && !user))
        return KV_EINVAL;
    memset(out, 0, sizeof *out);
    size_t ulen;
    uint64_t seq;
    int kind;
    if (!kv_ikey_decode(key, klen, user, user_cap, &ulen, &seq, &kind))
        return KV_ECORRUPT;
    out->user_len = ulen;
    out->prefix_len = klen - KV_IKEY_TRAILER;
    out->sequence = seq;
    out->kind = kind;
    return KV_OK;
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
    size_t need = kv_ikey_prefix_len(user, ulen) + (with_trailer ? KV_IKEY_TRAILER : 0);
    if (cap < need) {
        *out_len = need;
        return KV_EINVAL;
    }
    size_t n = kv_ikey_put_prefix(out, user, ulen);
    if (with_trailer) {
        kv_ikey_put_trailer(out + n, sequence, kind);
        n += KV_IKEY_TRAILER;
    }
    *out_len = n;
    return KV_OK;
}
