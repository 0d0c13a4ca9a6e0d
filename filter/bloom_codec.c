/* bloom_codec.c - a filter to bytes and back: kv_bloom_encode and the
 * decoder that trusts nothing. Encoding byte by byte: doc/filter_format.md;
 * offsets: filter_format.h. */
#include <stdlib.h>
#include <string.h>

#include "bloom_impl.h"
#include "filter_format.h"
#include "util/coding.h"
#include "util/error.h"
#include "util/hash.h"

/* Payload bytes a well-formed filter of this layout and m must carry, or 0
 * when m itself is not well formed. */
static uint64_t payload_bytes(unsigned layout, uint64_t m)
{
    if (m == 0 || m > KV_BLOOM_MAX_BITS)
        return 0;
    if (layout == KV_BLOOM_BLOCKED)
        return m % BLOCK_BITS ? 0 : m / 8;
    return (m + 63) / 64 * 8;
}

static void encode_header(const kv_bloom *f, uint8_t *p);

int kv_bloom_encode(const kv_bloom *f, void **buf, size_t *len)
{
    if (!f || !buf || !len)
        return KV_EINVAL;
    *buf = NULL;
    *len = 0;
    size_t payload = (size_t)f->nwords * 8;
    size_t total = KV_BLOOM_FMT_HEADER + payload + KV_BLOOM_FMT_CHECKSUM;
    uint8_t *p = malloc(total);
    if (!p)
        return KV_ENOMEM;
    encode_header(f, p);
    uint8_t *q = p + KV_BLOOM_FMT_HEADER;
    for (uint64_t i = 0; i < f->nwords; i++, q += 8)
        kv_put64(q, atomic_load_explicit(&f->words[i], memory_order_relaxed));
    kv_put64(q, XXH3_64bits(p, KV_BLOOM_FMT_HEADER + payload));
    *buf = p;
    *len = total;
    return KV_OK;
}

/* On a little-endian machine the bit array's words lie in memory as the
 * encoding's payload bytes: a range or a checksum reads them in place.
 * (Plain reads of words other threads may be setting bits in: each word is
 * read whole on these machines, as the relaxed loads elsewhere read it.) */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define KV_WORDS_ARE_LE 1
#else
#define KV_WORDS_ARE_LE 0
#endif

/* The encoding's 40-byte header (doc/filter_format.md). */
static void encode_header(const kv_bloom *f, uint8_t *p)
{
    memcpy(p + KV_BLOOM_FMT_OFF_MAGIC, KV_BLOOM_FMT_MAGIC, 4);
    p[KV_BLOOM_FMT_OFF_VERSION] = f->keyed ? KV_BLOOM_FMT_VERSION : KV_BLOOM_FMT_VERSION_UNKEYED;
    p[KV_BLOOM_FMT_OFF_LAYOUT] = (uint8_t)f->layout;
    p[KV_BLOOM_FMT_OFF_HASH] = f->keyed ? KV_BLOOM_FMT_HASH_SIPHASH24 : KV_BLOOM_FMT_HASH_XXH3_64;
    p[KV_BLOOM_FMT_OFF_K] = (uint8_t)f->k;
    kv_put64(p + KV_BLOOM_FMT_OFF_SEED, f->seed);
    kv_put64(p + KV_BLOOM_FMT_OFF_BITS, f->bits);
    kv_put64(p + KV_BLOOM_FMT_OFF_KEYS, kv_bloom_keys_added(f));
    kv_put64(p + KV_BLOOM_FMT_OFF_PAYLOAD_LEN, (uint64_t)f->nwords * 8);
}

int kv_bloom_encode_range(const kv_bloom *f, uint64_t offset, void *dst, size_t len)
{
    if (!f || (!dst && len))
        return KV_EINVAL;
    uint64_t body = KV_BLOOM_FMT_HEADER + f->nwords * 8;
    if (offset > body || len > body - offset)
        return KV_EINVAL;
    uint8_t *out = dst;
    if (offset < KV_BLOOM_FMT_HEADER && len) {
        uint8_t hdr[KV_BLOOM_FMT_HEADER];
        encode_header(f, hdr);
        size_t n = KV_BLOOM_FMT_HEADER - (size_t)offset < len ? KV_BLOOM_FMT_HEADER - (size_t)offset
                                                              : len;
        memcpy(out, hdr + offset, n);
        out += n;
        offset += n;
        len -= n;
    }
    /* The payload: word w holds bytes 40 + 8w .. 40 + 8w + 7, little-endian;
     * a range may start and end inside a word (those two go through a
     * stack copy), and the whole words between are stored straight. Only
     * the words the range covers are read. */
    uint64_t w = (offset - KV_BLOOM_FMT_HEADER) / 8;
    size_t from = (size_t)((offset - KV_BLOOM_FMT_HEADER) % 8);
    uint8_t word[8];
    if (len && from) {
        kv_put64(word, atomic_load_explicit(&f->words[w++], memory_order_relaxed));
        size_t n = 8 - from < len ? 8 - from : len;
        memcpy(out, word + from, n);
        out += n;
        len -= n;
    }
#if KV_WORDS_ARE_LE
    /* The words in memory are already the encoding's bytes. */
    memcpy(out, (const void *)(f->words + w), len / 8 * 8);
    w += len / 8;
    out += len / 8 * 8;
    len %= 8;
#endif
    for (; len >= 8; w++, out += 8, len -= 8)
        kv_put64(out, atomic_load_explicit(&f->words[w], memory_order_relaxed));
    if (len) {
        kv_put64(word, atomic_load_explicit(&f->words[w], memory_order_relaxed));
        memcpy(out, word, len);
    }
    return KV_OK;
}

int kv_bloom_encode_check(const kv_bloom *f, uint64_t *out)
{
    if (!f || !out)
        return KV_EINVAL;
    XXH3_state_t st;
    uint8_t buf[4096];
    XXH3_64bits_reset(&st);
    encode_header(f, buf);
    XXH3_64bits_update(&st, buf, KV_BLOOM_FMT_HEADER);
#if KV_WORDS_ARE_LE
    XXH3_64bits_update(&st, (const void *)f->words, (size_t)f->nwords * 8);
    *out = XXH3_64bits_digest(&st);
    return KV_OK;
#endif
    /* The words in pieces through a stack buffer, in the encoding's byte
     * order: no allocation, whatever the filter's size. */
    for (uint64_t i = 0; i < f->nwords;) {
        size_t n = 0;
        for (; n < sizeof(buf) && i < f->nwords; n += 8, i++)
            kv_put64(buf + n, atomic_load_explicit(&f->words[i], memory_order_relaxed));
        XXH3_64bits_update(&st, buf, n);
    }
    *out = XXH3_64bits_digest(&st);
    return KV_OK;
}

/* The decoder of both kinds. secret NULL: kv_bloom_decode, which refuses
 * a keyed encoding; else kv_bloom_decode_keyed, which refuses any other. */
static int decode(const void *buf, size_t len, const uint8_t *secret, kv_bloom **out)
{
    if (!out)
        return KV_EINVAL;
    *out = NULL;
    if (!buf)
        return KV_EINVAL;
    const uint8_t *p = buf;
    /* Every header field is checked before the payload is touched. */
    if (len < KV_BLOOM_FMT_HEADER + KV_BLOOM_FMT_CHECKSUM)
        return KV_ECORRUPT;
    /* Each version has one hash kind: version 1 XXH3 (kind 1), version 2
     * the keyed SipHash (kind 2), so that an encoder writing the version of
     * its filter's hash gives back exactly the bytes it decoded. */
    unsigned hash = p[KV_BLOOM_FMT_OFF_HASH], version = p[KV_BLOOM_FMT_OFF_VERSION];
    if (memcmp(p + KV_BLOOM_FMT_OFF_MAGIC, KV_BLOOM_FMT_MAGIC, 4) != 0 || version < 1 ||
        version > KV_BLOOM_FMT_VERSION ||
        hash != (version == 1 ? KV_BLOOM_FMT_HASH_XXH3_64 : KV_BLOOM_FMT_HASH_SIPHASH24))
        return KV_ECORRUPT;
    unsigned layout = p[KV_BLOOM_FMT_OFF_LAYOUT];
    unsigned k = p[KV_BLOOM_FMT_OFF_K];
    uint64_t bits = kv_get64(p + KV_BLOOM_FMT_OFF_BITS);
    uint64_t payload = kv_get64(p + KV_BLOOM_FMT_OFF_PAYLOAD_LEN);
    if (!kv_bloom_layout_ok((kv_bloom_layout)layout) || k < KV_BLOOM_MIN_K || k > KV_BLOOM_MAX_K)
        return KV_ECORRUPT;
    uint64_t want = payload_bytes(layout, bits);
    if (want == 0 || payload != want ||
        (uint64_t)len - KV_BLOOM_FMT_HEADER - KV_BLOOM_FMT_CHECKSUM != payload)
        return KV_ECORRUPT;
    size_t covered = KV_BLOOM_FMT_HEADER + (size_t)payload;
    if (XXH3_64bits(p, covered) != kv_get64(p + covered))
        return KV_ECORRUPT;
    /* A sound encoding: now whether its hash is the one the caller can
     * compute. */
    uint64_t seed = kv_get64(p + KV_BLOOM_FMT_OFF_SEED);
    if (hash == KV_BLOOM_FMT_HASH_SIPHASH24 && !secret)
        return kv_error_set(KV_EINVAL, "kv_bloom_decode: the encoding is of a keyed filter "
                                       "(SipHash-2-4): decode it with kv_bloom_decode_keyed "
                                       "and its secret");
    if (hash != KV_BLOOM_FMT_HASH_SIPHASH24 && secret)
        return kv_error_set(KV_EINVAL, "kv_bloom_decode_keyed: the encoding is of a filter "
                                       "that is not keyed: decode it with kv_bloom_decode");
    if (secret && kv_bloom_secret_check(secret) != seed)
        return kv_error_set(KV_EINVAL, "kv_bloom_decode_keyed: the secret is not the one the "
                                       "filter was made with (its check value differs)");

    kv_bloom *f;
    int rc = kv_bloom_alloc((kv_bloom_layout)layout, bits, k, seed, &f);
    if (rc != KV_OK)
        return rc;
    if (secret)
        kv_bloom_make_keyed(f, secret);
    const uint8_t *q = p + KV_BLOOM_FMT_HEADER;
    for (uint64_t i = 0; i < f->nwords; i++, q += 8)
        atomic_init(&f->words[i], kv_get64(q));
    atomic_store_explicit(&f->base_keys, kv_get64(p + KV_BLOOM_FMT_OFF_KEYS), memory_order_relaxed);
    *out = f;
    return KV_OK;
}

int kv_bloom_decode(const void *buf, size_t len, kv_bloom **out)
{
    return decode(buf, len, NULL, out);
}

int kv_bloom_decode_keyed(const void *buf, size_t len, const uint8_t secret[KV_BLOOM_SECRET_BYTES],
                          kv_bloom **out)
{
    if (!secret) {
        if (out)
            *out = NULL;
        return KV_EINVAL;
    }
    return decode(buf, len, secret, out);
}
