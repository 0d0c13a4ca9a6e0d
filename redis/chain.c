/* chain.c - the Redis module's filter chain (chain.h): growth, batched adds
 * and queries, the dump format and its loader. Formats: doc/redis.md. */
#define _DEFAULT_SOURCE /* sysconf(_SC_AVPHYS_PAGES) */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chain.h"
#include "util/coding.h"
#include "util/hash.h"

uint64_t bf_max_bytes = UINT64_MAX;
uint64_t bf_dump_work;
uint64_t bf_filter_bytes;
int (*bf_mem_room)(uint64_t bytes);

/* How far ahead of the item being added its successors' blocks are
 * prefetched: enough loads in flight to hide a cache miss, few enough
 * that their lines are still in the cache when their turn comes. */
#define ADD_PREFETCH 8

/* A kv_bloom encoding is a 48-byte header and checksum around the bit
 * array (doc/filter_format.md). */
#define BLOOM_ENC_OVERHEAD 48u

/* Header chunk: fixed part, each link, checksum (doc/redis.md). */
#define HDR_MAGIC "kvBF"
#define HDR_VERSION 1u
#define HDR_FIXED 44u
#define HDR_LINK 40u
#define HDR_CHECK 8u
#define HDR_FLAG_NONSCALING 1u
/* Data chunk: magic, offset, length, payload, checksum. */
#define CHUNK_MAGIC "kvBC"
#define CHUNK_FRAME 16u
#define CHUNK_CHECK 8u
/* The checksum that ends a kv_bloom encoding. */
#define CHUNK_CHECK_LINK 8u

struct bf_load {
    uint64_t check;  /* the header's checksum: seeds every chunk's */
    uint8_t *hdr;    /* the header chunk as received */
    size_t hdr_len;
    uint32_t nlinks; /* links the header announces */
    struct {
        uint64_t capacity, items, enc_len, check;
        double error;
    } want[BF_MAX_LINKS];
    uint64_t received; /* bytes of the data stream fed so far */
    uint8_t *buf;      /* the encoding of link c->nlinks, so far */
    size_t buf_len;
};

uint64_t bf_hash(const void *item, size_t len)
{
    return kv_hash_key(item, len, 0);
}

/* The hash link i is probed with: the item's hash for link 0, a remix of
 * it (the SplitMix64 finaliser of h + i times the golden ratio) for the
 * others, so a false positive in one link says nothing about the next. */
static inline uint64_t link_hash(uint64_t h, uint32_t i)
{
    if (!i)
        return h;
    uint64_t x = h + (uint64_t)i * 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Link i's error rate: e for a non-scaling chain, e / 2^(i+1) otherwise
 * (halving is exact in binary floating point, so a loader recomputes the
 * same doubles). */
static double link_error(const bf_chain *c, uint32_t i)
{
    if (c->nonscaling)
        return c->error;
    return ldexp(c->error, -(int)(i + 1));
}

static uint64_t chain_bytes(const bf_chain *c)
{
    uint64_t b = 0;
    for (uint32_t i = 0; i < c->nlinks; i++)
        b += kv_bloom_bytes(c->links[i].f);
    return b;
}

/* Room for n links. */
static int reserve_links(bf_chain *c, uint32_t n)
{
    if (n <= c->cap_links)
        return KV_OK;
    uint32_t cap = c->cap_links ? c->cap_links * 2 : 1;
    while (cap < n)
        cap *= 2;
    bf_link *l = realloc(c->links, cap * sizeof(*l));
    if (!l)
        return KV_ENOMEM;
    c->links = l;
    c->cap_links = cap;
    return KV_OK;
}

/* The layout and bit-array bytes of a link for `capacity` items at
 * `error`: what add_link makes, found without allocating. The blocked
 * layout is used while it reaches `error` within kv_bloom_new's 1000 bits
 * per item (kv_bloom_fpr_at tells the density). Past that (with k <= 30
 * its floor is near 1e-20: a scaling chain gets there only by halving its
 * rate some 60 times, as one of expansion 1 does) the link is a classic
 * filter, which reaches rates down to about 1e-209 at the ideal density,
 * so a chain keeps growing as RedisBloom's does. KV_EINVAL: no filter
 * reaches it. */
static int link_size(uint64_t capacity, double error, kv_bloom_layout *layout, uint64_t *bytes)
{
    if (!capacity || !(error > 0 && error < 1))
        return KV_EINVAL;
    *layout = kv_bloom_fpr_at(KV_BLOOM_BLOCKED, 1000) > error ? KV_BLOOM_CLASSIC : KV_BLOOM_BLOCKED;
    uint64_t m;
    unsigned k;
    int rc = kv_bloom_size_fpr(*layout, capacity, error, &m, &k);
    if (rc == KV_EINVAL && *layout == KV_BLOOM_BLOCKED) {
        /* A rate so near 1 that the blocked layout's blocks saturate (it
         * would need over KV_BLOOM_BLOCKED_MAX_RATIO times the classic
         * bits): the classic layout's few bits reach it. */
        *layout = KV_BLOOM_CLASSIC;
        rc = kv_bloom_size_fpr(*layout, capacity, error, &m, &k);
    }
    if (rc != KV_OK)
        return rc;
    *bytes = *layout == KV_BLOOM_BLOCKED ? m / 8 : (m + 63) / 64 * 8;
    return KV_OK;
}

/* Adds link c->nlinks for `capacity` items at `error`. Its size is found
 * before anything is allocated, and must fit under the chain's limit, the
 * server's room (bf_mem_room: maxmemory) and, for a large link, in the
 * memory free now. */
static int add_link(bf_chain *c, uint64_t capacity, double error)
{
    if (c->nlinks >= BF_MAX_LINKS || !capacity || !(error > 0))
        return KV_EINVAL;
    int rc = reserve_links(c, c->nlinks + 1);
    if (rc != KV_OK)
        return rc;
    kv_bloom_layout layout;
    uint64_t bytes;
    if ((rc = link_size(capacity, error, &layout, &bytes)) != KV_OK)
        return rc;
    if (!(bytes < bf_max_bytes && chain_bytes(c) < bf_max_bytes - bytes))
        return KV_EINVAL;
    if (bf_mem_room && (rc = bf_mem_room(bytes)) != KV_OK)
        return rc;
    /* The bit array is zeroed when made, so all of it is touched at once:
     * a large one must fit in the memory free now, or the system would
     * kill the server to find it. */
    if (bytes > (uint64_t)64 << 20) {
        long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        if (pages > 0 && page > 0 && (double)bytes > (double)pages * (double)page)
            return KV_EINVAL;
    }
    kv_bloom *f;
    if ((rc = kv_bloom_new_fpr(layout, capacity, error, 0, &f)) != KV_OK)
        return rc;
    bf_filter_bytes += kv_bloom_bytes(f);
    c->links[c->nlinks++] = (bf_link){.f = f, .capacity = capacity, .items = 0, .error = error};
    return KV_OK;
}

int bf_chain_new(uint64_t capacity, double error, uint64_t expansion, bool nonscaling,
                 bf_chain **out)
{
    *out = NULL;
    if (!capacity || !(error > 0 && error < 1) || !expansion)
        return KV_EINVAL;
    bf_chain *c = calloc(1, sizeof(*c));
    if (!c)
        return KV_ENOMEM;
    c->capacity = capacity;
    c->error = error;
    c->expansion = expansion;
    c->nonscaling = nonscaling;
    int rc = add_link(c, capacity, link_error(c, 0));
    if (rc != KV_OK) {
        bf_chain_free(c);
        return rc;
    }
    *out = c;
    return KV_OK;
}

static void load_free(struct bf_load *l)
{
    if (!l)
        return;
    free(l->hdr);
    free(l->buf);
    free(l);
}

void bf_chain_free(bf_chain *c)
{
    if (!c)
        return;
    for (uint32_t i = 0; i < c->nlinks; i++) {
        bf_filter_bytes -= kv_bloom_bytes(c->links[i].f);
        kv_bloom_free(c->links[i].f);
    }
    free(c->links);
    load_free(c->load);
    free(c);
}

uint64_t bf_chain_capacity(const bf_chain *c)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < c->nlinks; i++)
        n += c->links[i].capacity;
    return n;
}

size_t bf_chain_mem(const bf_chain *c)
{
    size_t n = sizeof(*c) + c->cap_links * sizeof(bf_link) + (size_t)chain_bytes(c);
    if (c->load)
        n += sizeof(*c->load) + c->load->hdr_len + c->load->buf_len;
    return n;
}

void bf_chain_exists(const bf_chain *c, const uint64_t *h, size_t n, uint8_t *out)
{
    if (c->nlinks == 1) {
        kv_bloom_may_contain_batch(c->links[0].f, h, n, out);
        return;
    }
    uint64_t lh[BF_BATCH];
    uint8_t r[BF_BATCH];
    memset(out, 0, n);
    /* Newest link first: it is the largest and holds most items. */
    for (uint32_t i = c->nlinks; i-- > 0;) {
        for (size_t j = 0; j < n; j++)
            lh[j] = link_hash(h[j], i);
        kv_bloom_may_contain_batch(c->links[i].f, lh, n, r);
        for (size_t j = 0; j < n; j++)
            out[j] |= r[j];
    }
}

/* Whether a link older than the newest may hold the item. */
static int in_older_links(const bf_chain *c, uint64_t h)
{
    for (uint32_t i = c->nlinks - 1; i-- > 0;)
        if (kv_bloom_may_contain_hash(c->links[i].f, link_hash(h, i)))
            return 1;
    return 0;
}

int bf_chain_add(bf_chain *c, const uint64_t *h, size_t n, uint8_t *out, size_t *done)
{
    /* Every add, even of an item already there, changes the newest link's
     * encoding (its key count): its kept checksum goes, and a dump begun
     * before this call can no longer be continued. A link made below
     * starts without one. */
    c->gen++;
    c->links[c->nlinks - 1].check_ok = false;
    for (size_t j = 0; j < n && j < ADD_PREFETCH; j++)
        for (uint32_t i = 0; i < c->nlinks; i++)
            kv_bloom_prefetch_hash(c->links[i].f, link_hash(h[j], i));
    for (size_t j = 0; j < n; j++) {
        if (j + ADD_PREFETCH < n)
            for (uint32_t i = 0; i < c->nlinks; i++)
                kv_bloom_prefetch_hash(c->links[i].f, link_hash(h[j + ADD_PREFETCH], i));
        if (c->nlinks > 1 && in_older_links(c, h[j])) {
            out[j] = 0;
            continue;
        }
        uint32_t last = c->nlinks - 1;
        bf_link *cur = &c->links[last];
        uint64_t lh = link_hash(h[j], last);
        if (cur->items >= cur->capacity) {
            /* Full: a present item still answers 0; a new one needs a
             * new link, which a non-scaling chain does not get. */
            if (kv_bloom_may_contain_hash(cur->f, lh)) {
                out[j] = 0;
                continue;
            }
            if (c->nonscaling) {
                *done = j;
                return BF_FULL;
            }
            uint64_t cap = cur->capacity * c->expansion;
            if (cap / c->expansion != cur->capacity) {
                *done = j;
                return KV_EINVAL;
            }
            int rc = add_link(c, cap, cur->error / 2);
            if (rc != KV_OK) {
                *done = j;
                return rc;
            }
            last++;
            cur = &c->links[last];
            lh = link_hash(h[j], last);
        }
        if (kv_bloom_add_check_hash(cur->f, lh)) {
            out[j] = 0;
        } else {
            out[j] = 1;
            cur->items++;
            c->items++;
        }
    }
    *done = n;
    return KV_OK;
}

int bf_chain_copy(const bf_chain *c, bf_chain **out)
{
    *out = NULL;
    bf_chain *d = calloc(1, sizeof(*d));
    if (!d)
        return KV_ENOMEM;
    *d = *c;
    d->load = NULL;
    d->nlinks = 0;
    d->cap_links = 0;
    d->links = NULL;
    int rc = reserve_links(d, c->nlinks ? c->nlinks : 1);
    for (uint32_t i = 0; i < c->nlinks && rc == KV_OK; i++) {
        void *buf;
        size_t len;
        if ((rc = kv_bloom_encode(c->links[i].f, &buf, &len)) != KV_OK)
            break;
        kv_bloom *f;
        rc = kv_bloom_decode(buf, len, &f);
        free(buf);
        if (rc == KV_OK) {
            d->links[i] = c->links[i];
            d->links[i].f = f;
            d->nlinks++;
            bf_filter_bytes += kv_bloom_bytes(f);
        }
    }
    if (rc == KV_OK && c->load) {
        /* A chain being loaded: copy what it has received. */
        struct bf_load *l = malloc(sizeof(*l));
        if (!l) {
            rc = KV_ENOMEM;
        } else {
            *l = *c->load;
            l->hdr = malloc(l->hdr_len);
            l->buf = l->buf_len ? malloc(l->buf_len) : NULL;
            d->load = l;
            if (!l->hdr || (l->buf_len && !l->buf)) {
                rc = KV_ENOMEM;
            } else {
                memcpy(l->hdr, c->load->hdr, l->hdr_len);
                if (l->buf_len)
                    memcpy(l->buf, c->load->buf, l->buf_len);
            }
        }
    }
    if (rc != KV_OK) {
        bf_chain_free(d);
        return KV_ENOMEM;
    }
    *out = d;
    return KV_OK;
}

/* ---- dump ------------------------------------------------------------------ */

static uint64_t enc_len(const bf_link *l)
{
    return BLOOM_ENC_OVERHEAD + kv_bloom_bytes(l->f);
}

/* Link i's encoding checksum, hashed unless kept. */
static uint64_t link_check(bf_chain *c, uint32_t i)
{
    bf_link *l = &c->links[i];
    if (!l->check_ok) {
        kv_bloom_encode_check(l->f, &l->check);
        l->check_ok = true;
        bf_dump_work += enc_len(l);
    }
    return l->check;
}

int bf_dump_header(bf_chain *c, uint8_t **buf, size_t *len)
{
    if (c->load) {
        /* The header it is being loaded from, unchanged. */
        uint8_t *p = malloc(c->load->hdr_len);
        if (!p)
            return KV_ENOMEM;
        memcpy(p, c->load->hdr, c->load->hdr_len);
        *buf = p;
        *len = c->load->hdr_len;
        return KV_OK;
    }
    size_t n = HDR_FIXED + (size_t)c->nlinks * HDR_LINK + HDR_CHECK;
    uint8_t *p = malloc(n);
    if (!p)
        return KV_ENOMEM;
    memcpy(p, HDR_MAGIC, 4);
    p[4] = HDR_VERSION;
    p[5] = c->nonscaling ? HDR_FLAG_NONSCALING : 0;
    kv_put16(p + 6, 0);
    kv_put64(p + 8, c->expansion);
    kv_put64(p + 16, kv_f64_bits(c->error));
    kv_put64(p + 24, c->capacity);
    kv_put64(p + 32, c->items);
    kv_put32(p + 40, c->nlinks);
    /* Each link's encoding checksum, so the header (and through its own
     * checksum every chunk) names the exact bits: a chunk of another
     * filter of the same shape is told apart. */
    uint8_t *q = p + HDR_FIXED;
    for (uint32_t i = 0; i < c->nlinks; i++, q += HDR_LINK) {
        kv_put64(q, c->links[i].capacity);
        kv_put64(q + 8, c->links[i].items);
        kv_put64(q + 16, kv_f64_bits(c->links[i].error));
        kv_put64(q + 24, enc_len(&c->links[i]));
        kv_put64(q + 32, link_check(c, i));
    }
    kv_put64(q, XXH3_64bits(p, (size_t)(q - p)));
    c->dump_seed = kv_get64(q);
    c->dump_gen = c->gen;
    c->dump_ok = true;
    *buf = p;
    *len = n;
    return KV_OK;
}

static uint64_t header_check(const uint8_t *hdr, size_t len)
{
    return kv_get64(hdr + len - HDR_CHECK);
}

uint64_t bf_dump_data_len(const bf_chain *c)
{
    if (c->load)
        return c->load->received;
    uint64_t n = 0;
    for (uint32_t i = 0; i < c->nlinks; i++)
        n += enc_len(&c->links[i]);
    return n;
}

/* The checksum seed of the chain's chunks: its header's checksum, made
 * afresh when the chain changed since the last header. */
static int chunk_seed(bf_chain *c, uint64_t *seed)
{
    if (c->load) {
        *seed = c->load->check;
        return KV_OK;
    }
    if (!c->dump_ok || c->dump_gen != c->gen) {
        uint8_t *hdr;
        size_t hdr_len;
        int rc = bf_dump_header(c, &hdr, &hdr_len);
        if (rc != KV_OK)
            return rc;
        free(hdr);
    }
    *seed = c->dump_seed;
    return KV_OK;
}

/* A data chunk of `plen` payload bytes at `offset`, its payload left for
 * the caller to fill: the frame and the checksum come from seal(). */
static uint8_t *frame_alloc(uint64_t offset, size_t plen)
{
    uint8_t *p = malloc(CHUNK_FRAME + plen + CHUNK_CHECK);
    if (!p)
        return NULL;
    memcpy(p, CHUNK_MAGIC, 4);
    kv_put64(p + 4, offset);
    kv_put32(p + 12, (uint32_t)plen);
    return p;
}

static void frame_seal(uint8_t *p, uint64_t offset, size_t plen, uint64_t seed, uint8_t **buf,
                       size_t *len, long long *next)
{
    kv_put64(p + CHUNK_FRAME + plen, XXH3_64bits_withSeed(p, CHUNK_FRAME + plen, seed));
    *buf = p;
    *len = CHUNK_FRAME + plen + CHUNK_CHECK;
    *next = (long long)(1 + offset + plen);
}

int bf_dump_frame(bf_chain *c, uint64_t offset, const uint8_t *payload, size_t plen, uint8_t **buf,
                  size_t *len, long long *next)
{
    uint64_t seed;
    int rc = chunk_seed(c, &seed);
    if (rc != KV_OK)
        return rc;
    uint8_t *p = frame_alloc(offset, plen);
    if (!p)
        return KV_ENOMEM;
    memcpy(p + CHUNK_FRAME, payload, plen);
    frame_seal(p, offset, plen, seed, buf, len, next);
    return KV_OK;
}

int bf_dump_chunk(bf_chain *c, uint64_t offset, size_t max, uint8_t **buf, size_t *len,
                  long long *next)
{
    if (c->load)
        return KV_EINVAL;
    /* A dump whose header came before a change cannot go on: its chunks
     * would mix two states (the loader would refuse them at the end). */
    if (c->dump_ok && c->dump_gen != c->gen)
        return KV_EBUSY;
    uint64_t start = 0;
    uint32_t i = 0;
    while (i < c->nlinks && offset >= start + enc_len(&c->links[i]))
        start += enc_len(&c->links[i++]);
    if (i == c->nlinks)
        return KV_NOTFOUND;
    uint64_t seed;
    int rc = chunk_seed(c, &seed);
    if (rc != KV_OK)
        return rc;
    bf_link *l = &c->links[i];
    uint64_t in = offset - start, elen = enc_len(l), body = elen - CHUNK_CHECK_LINK;
    size_t plen = elen - in < max ? (size_t)(elen - in) : max;
    uint8_t *p = frame_alloc(offset, plen);
    if (!p)
        return KV_ENOMEM;
    /* The link's header and bits straight from its memory, then as much
     * of its kept checksum as the chunk reaches. */
    size_t from_body = in < body ? (size_t)(body - in < plen ? body - in : plen) : 0;
    if (from_body)
        kv_bloom_encode_range(l->f, in, p + CHUNK_FRAME, from_body);
    if (from_body < plen) {
        uint8_t tail[CHUNK_CHECK_LINK];
        kv_put64(tail, link_check(c, i));
        memcpy(p + CHUNK_FRAME + from_body, tail + (in + from_body - body), plen - from_body);
    }
    bf_dump_work += plen;
    frame_seal(p, offset, plen, seed, buf, len, next);
    return KV_OK;
}

uint32_t bf_dump_npieces(const bf_chain *c)
{
    return c->nlinks + (c->load && c->load->buf_len ? 1 : 0);
}

int bf_dump_piece(const bf_chain *c, uint32_t i, uint8_t **buf, size_t *len)
{
    if (i < c->nlinks) {
        void *enc;
        int rc = kv_bloom_encode(c->links[i].f, &enc, len);
        *buf = enc;
        return rc;
    }
    size_t n = c->load ? c->load->buf_len : 0;
    uint8_t *p = malloc(n ? n : 1);
    if (!p)
        return KV_ENOMEM;
    if (n)
        memcpy(p, c->load->buf, n);
    *buf = p;
    *len = n;
    return KV_OK;
}

/* ---- load ------------------------------------------------------------------ */

int bf_load_begin(const uint8_t *hdr, size_t len, bf_chain **out, const char **why)
{
    *out = NULL;
    *why = "ERR received bad data";
    if (len < HDR_FIXED + HDR_LINK + HDR_CHECK || memcmp(hdr, HDR_MAGIC, 4) != 0)
        return KV_ECORRUPT;
    if (hdr[4] != HDR_VERSION) {
        *why = "ERR received bad data: unknown dump version";
        return KV_ECORRUPT;
    }
    uint32_t nlinks = kv_get32(hdr + 40);
    if (nlinks < 1 || nlinks > BF_MAX_LINKS ||
        len != HDR_FIXED + (size_t)nlinks * HDR_LINK + HDR_CHECK) {
        return KV_ECORRUPT;
    }
    if (XXH3_64bits(hdr, len - HDR_CHECK) != header_check(hdr, len)) {
        *why = "ERR received bad data: header checksum mismatch";
        return KV_ECORRUPT;
    }
    bf_chain *c = calloc(1, sizeof(*c));
    struct bf_load *l = calloc(1, sizeof(*l));
    uint8_t *copy = malloc(len);
    if (!c || !l || !copy) {
        free(c);
        free(l);
        free(copy);
        return KV_ENOMEM;
    }
    memcpy(copy, hdr, len);
    l->hdr = copy;
    l->hdr_len = len;
    l->check = header_check(hdr, len);
    l->nlinks = nlinks;
    c->load = l;
    c->nonscaling = hdr[5] & HDR_FLAG_NONSCALING;
    c->expansion = kv_get64(hdr + 8);
    c->error = kv_bits_f64(kv_get64(hdr + 16));
    c->capacity = kv_get64(hdr + 24);
    c->items = kv_get64(hdr + 32);
    /* Every field must be one this module could have written: the
     * parameters in range and the links exactly as the growth rule makes
     * them, their items summing to the chain's. */
    int ok = (hdr[5] & ~HDR_FLAG_NONSCALING) == 0 && kv_get16(hdr + 6) == 0 &&
             c->expansion >= 1 && c->error > 0 && c->error < 1 && c->capacity >= 1 &&
             !(c->nonscaling && nlinks != 1);
    uint64_t items = 0, cap = c->capacity, total = 0;
    const uint8_t *q = hdr + HDR_FIXED;
    for (uint32_t i = 0; ok && i < nlinks; i++, q += HDR_LINK) {
        l->want[i].capacity = kv_get64(q);
        l->want[i].items = kv_get64(q + 8);
        l->want[i].error = kv_bits_f64(kv_get64(q + 16));
        l->want[i].enc_len = kv_get64(q + 24);
        l->want[i].check = kv_get64(q + 32);
        if (i > 0) {
            ok = cap <= UINT64_MAX / c->expansion;
            cap *= c->expansion;
        }
        ok = ok && l->want[i].capacity == cap && l->want[i].items <= cap &&
             l->want[i].error == link_error(c, i) && l->want[i].enc_len > BLOOM_ENC_OVERHEAD &&
             l->want[i].enc_len - BLOOM_ENC_OVERHEAD <= bf_max_bytes - total &&
             items + l->want[i].items >= items;
        /* A link measures exactly what add_link makes for its capacity and
         * rate: a header claiming capacity 10^12 for 64 bytes would report
         * that capacity and answer 1 for items never added. */
        kv_bloom_layout layout;
        uint64_t bytes;
        if (ok && (link_size(cap, l->want[i].error, &layout, &bytes) != KV_OK ||
                   l->want[i].enc_len != BLOOM_ENC_OVERHEAD + bytes)) {
            bf_chain_free(c);
            *why = "ERR received bad data: a filter's size is not the one its capacity and "
                   "error rate give";
            return KV_ECORRUPT;
        }
        /* Every link but the newest is full: that is when a chain grows. */
        ok = ok && (i + 1 == nlinks || l->want[i].items == cap);
        items += l->want[i].items;
        total += l->want[i].enc_len - BLOOM_ENC_OVERHEAD;
    }
    if (!ok || items != c->items) {
        bf_chain_free(c);
        return KV_ECORRUPT;
    }
    /* The whole filter must fit under the server's limit before its first
     * link is allocated. */
    int rc = bf_mem_room ? bf_mem_room(total) : KV_OK;
    if (rc != KV_OK) {
        bf_chain_free(c);
        return rc;
    }
    *out = c;
    return KV_OK;
}

/* The encoding of link c->nlinks is whole in l->buf: decode it and check
 * it is the filter the header announced. */
static int finish_link(bf_chain *c, const uint8_t *enc, size_t len, const char **why)
{
    struct bf_load *l = c->load;
    uint32_t i = c->nlinks;
    kv_bloom *f;
    int rc = reserve_links(c, i + 1);
    if (rc != KV_OK)
        return rc;
    if (kv_get64(enc + len - 8) != l->want[i].check) {
        *why = "ERR received bad data: a filter's bits are not the ones the header names";
        return KV_ECORRUPT;
    }
    rc = kv_bloom_decode(enc, len, &f);
    if (rc == KV_ENOMEM)
        return rc;
    if (rc != KV_OK) {
        *why = "ERR received bad data: a filter's encoding does not decode";
        return KV_ECORRUPT;
    }
    if (kv_bloom_is_keyed(f) || kv_bloom_bytes(f) + BLOOM_ENC_OVERHEAD != l->want[i].enc_len) {
        kv_bloom_free(f);
        *why = "ERR received bad data: a filter is not the one the header describes";
        return KV_ECORRUPT;
    }
    bf_filter_bytes += kv_bloom_bytes(f);
    c->links[i] = (bf_link){.f = f,
                            .capacity = l->want[i].capacity,
                            .items = l->want[i].items,
                            .error = l->want[i].error,
                            .check = l->want[i].check,
                            .check_ok = true};
    c->nlinks++;
    free(l->buf);
    l->buf = NULL;
    l->buf_len = 0;
    if (c->nlinks == l->nlinks) {
        load_free(l);
        c->load = NULL;
    }
    return KV_OK;
}

int bf_load_feed(bf_chain *c, uint64_t offset, const uint8_t *data, size_t len, const char **why)
{
    struct bf_load *l = c->load;
    *why = "ERR received bad data";
    if (!l) {
        *why = "ERR received bad data: the filter is complete";
        return KV_ECORRUPT;
    }
    if (offset != l->received) {
        *why = "ERR received bad data: chunk out of order";
        return KV_ECORRUPT;
    }
    while (len && c->load) {
        uint64_t want = l->want[c->nlinks].enc_len;
        if (!l->buf && len >= want) {
            /* A whole encoding (an RDB piece): decoded where it lies. */
            int rc = finish_link(c, data, (size_t)want, why);
            if (rc != KV_OK)
                return rc;
            l = c->load;
            data += want;
            len -= (size_t)want;
            if (l)
                l->received += want;
            continue;
        }
        if (!l->buf) {
            /* The whole encoding is allocated at once: the header's
             * sizes were checked against the memory limit. */
            if (!(l->buf = malloc((size_t)want)))
                return KV_ENOMEM;
            l->buf_len = 0;
        }
        size_t take = (size_t)(want - l->buf_len) < len ? (size_t)(want - l->buf_len) : len;
        memcpy(l->buf + l->buf_len, data, take);
        l->buf_len += take;
        l->received += take;
        data += take;
        len -= take;
        if (l->buf_len == want) {
            int rc = finish_link(c, l->buf, l->buf_len, why);
            if (rc != KV_OK)
                return rc;
            l = c->load;
        }
    }
    if (len) {
        *why = "ERR received bad data: more data than the filter holds";
        return KV_ECORRUPT;
    }
    return KV_OK;
}

int bf_load_chunk(bf_chain *c, long long iter, const uint8_t *chunk, size_t len,
                  const char **why)
{
    *why = "ERR received bad data";
    if (!c->load) {
        *why = "ERR received bad data: the filter is complete";
        return KV_ECORRUPT;
    }
    if (len < CHUNK_FRAME + CHUNK_CHECK || memcmp(chunk, CHUNK_MAGIC, 4) != 0)
        return KV_ECORRUPT;
    uint64_t offset = kv_get64(chunk + 4);
    uint32_t plen = kv_get32(chunk + 12);
    if (len != CHUNK_FRAME + (size_t)plen + CHUNK_CHECK || plen == 0)
        return KV_ECORRUPT;
    if (XXH3_64bits_withSeed(chunk, CHUNK_FRAME + plen, c->load->check) !=
        kv_get64(chunk + CHUNK_FRAME + plen)) {
        *why = "ERR received bad data: chunk checksum mismatch (damaged, or of another dump)";
        return KV_ECORRUPT;
    }
    if (iter < 2 || (uint64_t)iter != 1 + offset + plen) {
        *why = "ERR received bad data: iterator does not match the chunk";
        return KV_ECORRUPT;
    }
    return bf_load_feed(c, offset, chunk + CHUNK_FRAME, plen, why);
}

int bf_load_done(const bf_chain *c)
{
    return c->load == NULL;
}
