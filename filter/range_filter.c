/* range_filter.c - the range filter of range_filter.h: an order-preserving
 * map of keys to 64-bit integers, a locality-preserving hash of those
 * (Grafite), and an Elias-Fano sequence of the hashes with a select index.
 * Encoding byte by byte: doc/filter_format.md, "Range filter encoding".
 *
 * The map. c is the length of the prefix every key shares (under bytewise
 * order, lcp(first key, last key)); byte positions c, c+1, ... are digits
 * of a mixed-radix number, position j's digit being (byte - min_j) in radix
 * max_j - min_j + 1 (a key shorter than the position reads 0 there). Zero
 * padding keeps the order: a key before another in bytewise order never has
 * a larger padded byte string. Positions are taken while the product of
 * the radices stays within 2^64 (RF_WINDOW at most, and at most one past
 * the longest key); what lies after them is dropped, so keys may share an
 * integer: z(k) is non-decreasing in key order, never decreasing.
 *
 * The dictionary (version 2). Keys whose leading varying bytes use the 64
 * bits by themselves (a random 8-byte id, then a counter) would all share
 * the id's integer. When the plain map stops before the keys' varying
 * bytes end, and the keys' first d bytes after the prefix take few distinct
 * values (E of them, sorted: the dictionary), a key maps to rank(its first
 * d bytes) * R + the mixed-radix number of the positions after them (R the
 * product of their radices, E * R <= 2^64): still monotone, and it keeps
 * more of the key. A bound's first d bytes found in the dictionary map as
 * the plain digits do, a carry out of the rest moving to the next rank
 * (rest 0), a borrow to the previous (rest at its greatest); not found,
 * a lower bound takes the next entry's rank with rest 0, an upper bound the
 * previous entry's with rest at its greatest.
 *
 * A query [lo, hi) maps to [zlo, zhi]: zlo is the integer of the smallest
 * representable byte string (the shared prefix, then each taken position
 * within [min_j, max_j]) at or above lo's first c + D bytes, zhi that of the
 * largest at or below hi's (below it, when hi lies whole within those bytes
 * and ends in a byte other than 0: then a key equal to hi there is >= hi).
 * A key in [lo, hi) lies in [zlo, zhi]: the mapping only widens ranges.
 *
 * The hash: h(z) = (q(z >> Lb) + (z mod L)) mod r, L = 2^Lb <= r, q(B) =
 * fastrange(XXH3-64 of B's 8 bytes (little-endian) seeded with the
 * filter's seed, r) (Grafite's (q(B) + z) mod r with the block's own
 * offset B L folded into q, which is uniform either way: no division). The
 * integers of one block keep their distances (mod r); a query's piece in a
 * block maps to one interval of [0, r), or two when it wraps. When every
 * integer is below the r the size allows (keys dense in their span, as a
 * table's keys of a sequential key space are), there is no hash: the
 * integers themselves are stored, r = the largest + 1, and a query of any
 * width is answered exactly for its integers (hash kind 0).
 *
 * Elias-Fano: n distinct sorted hashes in [0, r): the low l bits of each
 * packed, the high parts in unary (value i sets bit high_i + i of the upper
 * array, each of the H = ((r - 1) >> l) + 1 buckets ends with a 0), and the
 * position of every 64th zero (select0 samples). successor(x) is one sample,
 * a word or three of the upper array and a low part or two.
 *
 * Queries only read the caller's bytes and the decoded view: any number of
 * threads may query one filter at once. */
#include "range_filter.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bits.h"
#include "util/coding.h"
#include "util/error.h"
#include "util/hash.h"

/* A query's rare paths (one bound, bounds apart within the shared prefix,
 * a long bucket, the hashed form) kept out of its common one, so that the
 * code a short range runs stays a few cache lines: in a store the probe
 * runs between block reads whose code evicts it. */
#if defined(__GNUC__)
#define RF_COLD __attribute__((noinline, cold))
#define RF_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define RF_COLD
#define RF_UNLIKELY(x) (x)
#endif

/* Byte positions after the shared prefix that the builder keeps per key
 * and that the map may read as digits. */
#define RF_WINDOW 32
/* The encoding (doc/filter_format.md). */
#define RF_MAGIC "KVRF"
#define RF_VERSION 1
#define RF_VERSION_DICT 2 /* version 1 with a dictionary of leading digits */
#define RF_HASH_NONE 0    /* exact: the integers themselves */
#define RF_HASH_XXH3 1
#define RF_HEADER 40
#define RF_HEADER_DICT 56
#define RF_CHECKSUM 8
/* Every RF_SAMPLE-th zero of the upper array has its position stored. */
#define RF_SAMPLE 64
/* Largest r, and most values (the samples are 32-bit positions in an
 * upper array of n + H < 2^32 bits). */
#define RF_MAX_RANGE ((uint64_t)1 << 62)
#define RF_MAX_VALUES ((uint64_t)1 << 31)
/* A query spanning more blocks than this answers "maybe" without a probe. */
#define RF_MAX_BLOCKS 4

/* kv_get64 in one load where the host is little-endian (the compiler
 * does not always merge kv_get64's bytes). */
static inline uint64_t load64(const uint8_t *p)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
#else
    return kv_get64(p);
#endif
}

/* The position of the k-th (0-based) set bit of x, given upto, whose
 * byte i counts the bits of x's bytes 0..i; k < popcount64(x). The byte
 * holding the bit is the first whose count exceeds k, found without a
 * loop: byte i of (k + 0x80 per byte) - upto keeps its high bit exactly
 * when upto_i <= k (no borrow crosses bytes: upto_i <= 64), and those
 * bytes come first. */
static inline unsigned select_in(uint64_t x, uint64_t upto, unsigned k)
{
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    uint64_t below = (((k * ones) | highs) - upto) & highs;
    unsigned i = (unsigned)(((below >> 7) * ones) >> 56);
    k -= (unsigned)((upto << 8) >> (8 * i) & 0xff);
    unsigned byte = (unsigned)(x >> (8 * i)) & 0xff;
    for (; k; k--)
        byte &= byte - 1;
    return 8 * i + ctz64(byte);
}

/* The position of the k-th (0-based) set bit of x; k < popcount64(x). */
static inline unsigned select64(uint64_t x, unsigned k)
{
    return select_in(x, byte_counts(x) * 0x0101010101010101ull, k);
}

/* q(B): the hash's offset for block B, in [0, r). */
static inline uint64_t block_offset(uint64_t block, uint64_t seed, uint64_t r)
{
    uint8_t b[8];
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(b, &block, 8); /* kv_put64's bytes, in one store */
#else
    kv_put64(b, block);
#endif
    return kv_fastrange64(XXH3_64bits_withSeed(b, 8, seed), r);
}

/* Bytewise order, shorter first on a tie: <0, 0, >0. */
static int key_cmp(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
    size_t m = alen < blen ? alen : blen;
    int c = m ? memcmp(a, b, m) : 0;
    if (c)
        return c;
    return alen < blen ? -1 : alen > blen;
}

/* ---- the builder --------------------------------------------------------------------------- */

/* Keys [from, next segment's from) were added while the shared prefix was
 * c bytes long: their windows start at byte c. */
struct rf_segment {
    uint64_t from;
    size_t c;
};

struct kv_rfilter_builder {
    double bits_per_key;
    uint64_t seed;
    int failed; /* an add ran out of memory: finish refuses (the filter would miss a key) */
    uint8_t *first, *prev;
    size_t first_len, prev_len, prev_cap;
    size_t c;      /* lcp(first key, latest key): every key so far shares it */
    size_t maxlen; /* the longest key */
    /* Per position c + j (j < RF_WINDOW) the least and greatest byte of
     * every key so far (0 past a key's end). */
    uint8_t min[RF_WINDOW], max[RF_WINDOW];
    uint8_t *win; /* RF_WINDOW bytes per key from its segment's c, 0 past its end */
    uint64_t n, cap;
    struct rf_segment *seg;
    size_t nseg, segcap;
};

int kv_rfilter_builder_new(double bits_per_key, uint64_t seed, kv_rfilter_builder **out)
{
    if (!out)
        return kv_error_set(KV_EINVAL, "kv_rfilter_builder_new: out is NULL");
    *out = NULL;
    if (!(bits_per_key >= KV_RFILTER_MIN_BITS && bits_per_key <= KV_RFILTER_MAX_BITS))
        return kv_error_set(KV_EINVAL, "kv_rfilter_builder_new: bits_per_key %g is outside %g..%g",
                            bits_per_key, KV_RFILTER_MIN_BITS, KV_RFILTER_MAX_BITS);
    kv_rfilter_builder *b = calloc(1, sizeof *b);
    if (!b)
        return kv_error_set(KV_ENOMEM, "kv_rfilter_builder_new: out of memory");
    b->bits_per_key = bits_per_key;
    b->seed = seed;
    *out = b;
    return KV_OK;
}

/* Room for one more key's window, a key of klen bytes in prev and one
 * more segment; KV_ENOMEM leaves the builder as it was. */
static int reserve(kv_rfilter_builder *b, size_t klen)
{
    if (b->n == b->cap) {
        uint64_t cap = b->cap ? b->cap * 2 : 256;
        if (cap > SIZE_MAX / RF_WINDOW)
            return KV_ENOMEM;
        uint8_t *w = realloc(b->win, (size_t)cap * RF_WINDOW);
        if (!w)
            return KV_ENOMEM;
        b->win = w;
        b->cap = cap;
    }
    if (klen > b->prev_cap) {
        size_t cap = klen > 2 * b->prev_cap ? klen : 2 * b->prev_cap;
        uint8_t *p = realloc(b->prev, cap);
        if (!p)
            return KV_ENOMEM;
        b->prev = p;
        b->prev_cap = cap;
    }
    if (b->nseg == b->segcap) {
        size_t cap = b->segcap ? b->segcap * 2 : 8;
        struct rf_segment *s = realloc(b->seg, cap * sizeof *s);
        if (!s)
            return KV_ENOMEM;
        b->seg = s;
        b->segcap = cap;
    }
    return KV_OK;
}

/* The shared prefix shrinks from b->c to c: the window's positions move
 * right by d; the new ones in front lie in the old prefix, where every key
 * so far has the first key's bytes. */
static void rebase(kv_rfilter_builder *b, size_t c)
{
    size_t d = b->c - c;
    for (size_t j = RF_WINDOW; j-- > 0;) {
        if (j >= d) {
            b->min[j] = b->min[j - d];
            b->max[j] = b->max[j - d];
        } else {
            b->min[j] = b->max[j] = b->first[c + j];
        }
    }
    b->seg[b->nseg++] = (struct rf_segment){b->n, c};
    b->c = c;
}

static int add_first(kv_rfilter_builder *b, const uint8_t *k, size_t klen)
{
    b->first = malloc(klen ? klen : 1);
    if (!b->first)
        return KV_ENOMEM;
    if (klen)
        memcpy(b->first, k, klen);
    b->first_len = klen;
    /* One key: it shares all of itself; its window is all padding. */
    b->c = klen;
    memset(b->min, 0, sizeof b->min);
    memset(b->max, 0, sizeof b->max);
    b->seg[b->nseg++] = (struct rf_segment){0, klen};
    return KV_OK;
}

int kv_rfilter_builder_add(kv_rfilter_builder *b, const void *key, size_t klen)
{
    if (!b)
        return kv_error_set(KV_EINVAL, "kv_rfilter_builder_add: builder is NULL");
    if (!key && klen)
        return kv_error_set(KV_EINVAL, "kv_rfilter_builder_add: key is NULL");
    if (b->failed)
        return kv_error_set(KV_ENOMEM, "kv_rfilter_builder_add: an earlier add ran out of memory");
    const uint8_t *k = key;
    if (klen > KV_RFILTER_MAX_KEY)
        klen = KV_RFILTER_MAX_KEY;
    if (b->n) {
        int cmp = key_cmp(k, klen, b->prev, b->prev_len);
        if (cmp == 0)
            return KV_OK;
        if (cmp < 0)
            return kv_error_set(KV_EINVAL,
                                "kv_rfilter_builder_add: key %llu is below the one "
                                "before it",
                                (unsigned long long)b->n);
    }
    if (reserve(b, klen) != KV_OK || (!b->n && add_first(b, k, klen) != KV_OK)) {
        b->failed = 1;
        return kv_error_set(KV_ENOMEM, "kv_rfilter_builder_add: out of memory at key %llu",
                            (unsigned long long)b->n);
    }
    /* Keys come sorted, so lcp(first, key) never grows: only a key that
     * leaves the current prefix shrinks it. */
    size_t c = b->c;
    if (klen < c || (c && memcmp(k, b->first, c) != 0)) {
        size_t m = klen < c ? klen : c, i = 0;
        while (i < m && k[i] == b->first[i])
            i++;
        rebase(b, i);
        c = i;
    }
    /* On locals, which nothing else may alias: the loop is vectorised. */
    uint8_t w[RF_WINDOW], mn[RF_WINDOW], mx[RF_WINDOW];
    size_t have = klen - c < RF_WINDOW ? klen - c : RF_WINDOW;
    memcpy(w, k + c, have);
    memset(w + have, 0, RF_WINDOW - have);
    memcpy(mn, b->min, RF_WINDOW);
    memcpy(mx, b->max, RF_WINDOW);
    for (size_t j = 0; j < RF_WINDOW; j++) {
        mn[j] = w[j] < mn[j] ? w[j] : mn[j];
        mx[j] = w[j] > mx[j] ? w[j] : mx[j];
    }
    memcpy(b->min, mn, RF_WINDOW);
    memcpy(b->max, mx, RF_WINDOW);
    memcpy(b->win + b->n * RF_WINDOW, w, RF_WINDOW);
    if (klen)
        memcpy(b->prev, k, klen);
    b->prev_len = klen;
    if (klen > b->maxlen)
        b->maxlen = klen;
    b->n++;
    return KV_OK;
}

uint64_t kv_rfilter_builder_keys(const kv_rfilter_builder *b)
{
    return b ? b->n : 0;
}

void kv_rfilter_builder_free(kv_rfilter_builder *b)
{
    if (!b)
        return;
    free(b->first);
    free(b->prev);
    free(b->win);
    free(b->seg);
    free(b);
}

/* ---- finishing: parameters, integers, hashes, the sequence ---------------------------------- */

/* What finish decides and the decoder reads back. */
struct rf_params {
    size_t c;
    unsigned hash, digits, low_bits, block_bits;
    unsigned dict_d;   /* 0 (version 1), or the dictionary's entries' length d */
    uint64_t dict_n;   /* E, its entries (version 2) */
    uint64_t map_keys; /* distinct keys added (version 2; 0 when not recorded) */
    uint64_t top;      /* the largest integer: product of the radices - 1 */
    uint8_t min[RF_WINDOW], radix[RF_WINDOW]; /* radix 1..256 */
    uint64_t n, r, buckets, upper_bits, samples;
};

/* Sizes that follow from n, r and l. */
static void derive_sizes(struct rf_params *p)
{
    p->buckets = p->n ? ((p->r - 1) >> p->low_bits) + 1 : 0;
    p->upper_bits = p->n + p->buckets;
    p->samples = (p->buckets + RF_SAMPLE - 1) / RF_SAMPLE;
}

/* The byte positions the map may read after the shared prefix: up to one
 * past the longest key (every key has a 0 there: a bound with more there
 * lies above them), but never past KV_RFILTER_MAX_KEY (a key the builder
 * cut there may have any byte after). */
static size_t map_avail(const kv_rfilter_builder *b)
{
    size_t avail = b->maxlen - b->c + (b->maxlen < KV_RFILTER_MAX_KEY);
    return avail < RF_WINDOW ? avail : RF_WINDOW;
}

/* The positions taken: from c on while the radices' product fits 2^64,
 * within map_avail. */
static void choose_digits(const kv_rfilter_builder *b, struct rf_params *p)
{
    size_t avail = map_avail(b);
    uint64_t top = 0; /* the largest integer: product - 1 */
    p->digits = 0;
    for (size_t j = 0; j < avail; j++) {
        uint64_t radix = (uint64_t)b->max[j] - b->min[j] + 1;
        if (top > (UINT64_MAX - (radix - 1)) / radix)
            break;
        top = top * radix + (radix - 1);
        p->min[j] = b->min[j];
        p->radix[j] = (uint8_t)(radix - 1);
        p->digits++;
    }
    p->top = top;
}

/* The exact form, when the integers' span [0, top] fits the r chosen: r =
 * top + 1, no hash, and the l of the smallest encoding, which is at most
 * the hashed form's (at its l, no more buckets: r is no larger). */
static void choose_exact(struct rf_params *p)
{
    uint64_t best = UINT64_MAX;
    unsigned best_l = 0;
    p->hash = RF_HASH_NONE;
    p->r = p->top + 1;
    p->block_bits = 0;
    for (unsigned l = 0; l <= 61; l++) {
        uint64_t h = ((p->r - 1) >> l) + 1;
        uint64_t bits = p->n * l + p->n + h + 32 * ((h + RF_SAMPLE - 1) / RF_SAMPLE);
        if (p->n + h < ((uint64_t)1 << 32) - 1 && bits < best) {
            best = bits;
            best_l = l;
        }
    }
    p->low_bits = best_l;
    derive_sizes(p);
}


/* r and l for n values in about bits_per_key * n bits (and one sample)
 * less extra_bits (a dictionary's): n l low bits, n + H upper bits, 32
 * bits per RF_SAMPLE buckets; the l that gives the largest r, r = H 2^l. Then Lb = l + 1 (l when r < 2^(l+1),
 * so that a block never exceeds r). */
static void choose_range(double bits_per_key, double extra_bits, struct rf_params *p)
{
    uint64_t n = p->n;
    double budget = floor(bits_per_key * (double)n) + 32 - extra_bits;
    uint64_t best_r = 0;
    unsigned best_l = 0;
    for (unsigned l = 0; l <= 61; l++) {
        double room = budget - (double)n * (l + 1);
        if (room < 1)
            break;
        double hmax = floor(room * RF_SAMPLE / (RF_SAMPLE + 32));
        uint64_t cap = (RF_MAX_RANGE >> l) < ((uint64_t)1 << 32) - 2 - n
                           ? RF_MAX_RANGE >> l
                           : ((uint64_t)1 << 32) - 2 - n;
        uint64_t h = hmax > (double)cap ? cap : (uint64_t)hmax;
        while (h && (double)h + 32.0 * (double)((h + RF_SAMPLE - 1) / RF_SAMPLE) > room)
            h--;
        if (h && h << l > best_r) {
            best_r = h << l;
            best_l = l;
        }
    }
    if (best_r < n)
        best_r = n; /* (not reached for n >= 1 with bits_per_key >= 4) */
    p->r = best_r;
    p->low_bits = best_l;
    p->block_bits = best_r >> best_l >= 2 ? best_l + 1 : best_l;
    derive_sizes(p);
}

/* Every key's window from the final shared prefix's end: a key added
 * while the prefix was longer has the first key's bytes in front of what
 * its window holds. In place, once, at finish. */
static void rebase_windows(kv_rfilter_builder *b)
{
    for (size_t s = 0; s < b->nseg; s++) {
        uint64_t to = s + 1 < b->nseg ? b->seg[s + 1].from : b->n;
        size_t d = b->seg[s].c - b->c;
        if (d > RF_WINDOW)
            d = RF_WINDOW;
        for (uint64_t i = b->seg[s].from; d && i < to; i++) {
            uint8_t *w = b->win + i * RF_WINDOW;
            memmove(w + d, w, RF_WINDOW - d);
            memcpy(w, b->first + b->c, d);
        }
    }
    b->seg[0] = (struct rf_segment){0, b->c}; /* (done: a second call moves nothing) */
    b->nseg = 1;
}

/* The first position where windows a and b differ, RF_WINDOW if none. */
static unsigned window_diff(const uint8_t *a, const uint8_t *b)
{
    for (unsigned i = 0; i < RF_WINDOW; i += 8) {
        uint64_t x = load64(a + i) ^ load64(b + i);
        if (x) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            return i + ctz64(x) / 8;
#else
            unsigned j = i;
            while (a[j] == b[j])
                j++;
            return j;
#endif
        }
    }
    return RF_WINDOW;
}

/* A dictionary for keys the plain map (p, from choose_digits) cuts before
 * their varying bytes end: the depth d whose first d bytes (windows
 * rebased) take few distinct values E (E <= n / 8, E d bytes within an
 * eighth of the bit budget) and with which rank * R + the positions after
 * reach furthest into the varying bytes, the least such d; none (p as it
 * was) unless it reaches further than the plain map. Sorted windows: E at
 * depth d is 1 + the neighbours whose first difference lies before d. */
static void choose_dict(const kv_rfilter_builder *b, struct rf_params *p)
{
    size_t avail = map_avail(b);
    unsigned last = 0; /* 1 + the last position some key varies in */
    for (size_t j = 0; j < avail; j++)
        if (b->max[j] != b->min[j])
            last = (unsigned)j + 1;
    if (p->digits >= last || b->n < 16)
        return;
    uint64_t cnt[RF_WINDOW + 1] = {0};
    for (uint64_t i = 1; i < b->n; i++)
        cnt[window_diff(b->win + (i - 1) * RF_WINDOW, b->win + i * RF_WINDOW)]++;
    double share = b->bits_per_key * (double)b->n / 64; /* bytes */
    unsigned best_cover = p->digits, best_d = 0, best_k = 0;
    uint64_t distinct = 1, best_e = 0, best_top = 0;
    for (unsigned d = 1; d <= avail; d++) {
        distinct += cnt[d - 1];
        if (distinct > b->n / 8 || (double)distinct * d > share)
            break; /* (both only grow with d) */
        if (distinct < 2)
            continue;
        uint64_t top = distinct - 1;
        unsigned k = d;
        for (; k < avail; k++) {
            uint64_t radix = (uint64_t)b->max[k] - b->min[k] + 1;
            if (top > (UINT64_MAX - (radix - 1)) / radix)
                break;
            top = top * radix + (radix - 1);
        }
        unsigned cover = k < last ? k : last;
        if (cover > best_cover) {
            best_cover = cover;
            best_d = d;
            best_k = k;
            best_e = distinct;
            best_top = top;
        }
    }
    if (!best_d)
        return;
    p->dict_d = best_d;
    p->dict_n = best_e;
    p->digits = best_k - best_d;
    for (unsigned j = 0; j < p->digits; j++) {
        p->min[j] = b->min[best_d + j];
        p->radix[j] = (uint8_t)(b->max[best_d + j] - b->min[best_d + j]);
    }
    p->top = best_top;
}

/* Each key's integer (non-decreasing), equal neighbours merged: *count of
 * them in z. With a dictionary, its entries into dict (E d bytes). */
static void key_integers(const kv_rfilter_builder *b, const struct rf_params *p, uint64_t *z,
                         uint64_t *count, uint8_t *dict)
{
    unsigned var[RF_WINDOW], nvar = 0, d = p->dict_d;
    for (unsigned j = 0; j < p->digits; j++)
        if (p->radix[j])
            var[nvar++] = j;
    uint64_t m = 0, rank = 0;
    for (uint64_t i = 0; i < b->n; i++) {
        const uint8_t *w = b->win + i * RF_WINDOW;
        if (d) {
            if (i && memcmp(w, w - RF_WINDOW, d) != 0)
                rank++;
            memcpy(dict + rank * d, w, d);
            w += d;
        }
        /* rank * R + the digits: rank is the most significant digit */
        uint64_t v = rank;
        for (unsigned t = 0; t < nvar; t++) {
            unsigned j = var[t];
            v = v * ((uint64_t)p->radix[j] + 1) + (uint64_t)(w[j] - p->min[j]);
        }
        if (m == 0 || z[m - 1] != v)
            z[m++] = v;
    }
    *count = m;
}

/* z[0, m) -> their hashes, in place. */
static void hash_integers(const struct rf_params *p, uint64_t seed, uint64_t *z, uint64_t m)
{
    uint64_t r = p->r, mask = ((uint64_t)1 << p->block_bits) - 1, block = 0, base = 0;
    for (uint64_t i = 0; i < m; i++) {
        uint64_t blk = z[i] >> p->block_bits;
        if (i == 0 || blk != block) {
            block = blk;
            base = block_offset(blk, seed, r);
        }
        uint64_t h = base + (z[i] & mask); /* < 2 r: L <= r */
        z[i] = h >= r ? h - r : h;
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* h[0, m) sorted into out by a counting sort on the high parts (each
 * bucket then sorted: a handful of values, mostly in order already),
 * duplicates dropped: *n of them. */
static int sort_hashes(const struct rf_params *p, const uint64_t *h, uint64_t m, uint64_t *out,
                       uint64_t *n)
{
    uint64_t nb = p->buckets;
    uint32_t *start = calloc(nb + 1, sizeof *start);
    if (!start)
        return KV_ENOMEM;
    for (uint64_t i = 0; i < m; i++)
        start[(h[i] >> p->low_bits) + 1]++;
    for (uint64_t k = 0; k < nb; k++)
        start[k + 1] += start[k];
    for (uint64_t i = 0; i < m; i++)
        out[start[h[i] >> p->low_bits]++] = h[i];
    /* start[k] is now bucket k's end. */
    uint64_t from = 0;
    for (uint64_t k = 0; k < nb; from = start[k++]) {
        uint64_t to = start[k];
        if (to - from > 64) {
            uint64_t i = from + 1;
            while (i < to && out[i - 1] <= out[i])
                i++;
            if (i < to)
                qsort(out + from, (size_t)(to - from), sizeof *out, cmp_u64);
            continue;
        }
        for (uint64_t i = from + 1; i < to; i++) {
            uint64_t v = out[i], j = i;
            for (; j > from && out[j - 1] > v; j--)
                out[j] = out[j - 1];
            out[j] = v;
        }
    }
    free(start);
    uint64_t k = 0;
    for (uint64_t i = 0; i < m; i++)
        if (k == 0 || out[k - 1] != out[i])
            out[k++] = out[i];
    *n = k;
    return KV_OK;
}

static size_t encoded_size(const struct rf_params *p)
{
    size_t head = p->dict_d ? RF_HEADER_DICT + (size_t)p->dict_n * p->dict_d : RF_HEADER;
    return head + p->c + 2 * (size_t)p->digits + (size_t)((p->n * p->low_bits + 63) / 64) * 8 +
           (size_t)((p->upper_bits + 63) / 64) * 8 + (size_t)p->samples * 4 + RF_CHECKSUM;
}

/* The whole encoding of values v[0, n) (sorted, distinct) into out; dict:
 * the dictionary's entries, with one. */
static void encode(const kv_rfilter_builder *b, const struct rf_params *p, const uint8_t *dict,
                   const uint64_t *v, uint8_t *out, size_t len)
{
    memset(out, 0, len);
    memcpy(out, RF_MAGIC, 4);
    out[4] = p->dict_d ? RF_VERSION_DICT : RF_VERSION;
    out[5] = (uint8_t)p->hash;
    out[6] = (uint8_t)p->digits;
    out[7] = (uint8_t)p->low_bits;
    out[8] = (uint8_t)p->block_bits;
    kv_put32(out + 12, (uint32_t)p->c);
    kv_put64(out + 16, b->seed);
    kv_put64(out + 24, p->n);
    kv_put64(out + 32, p->r);
    uint8_t *q = out + RF_HEADER;
    if (p->dict_d) {
        out[9] = (uint8_t)p->dict_d;
        kv_put32(out + 40, (uint32_t)p->dict_n);
        kv_put64(out + 48, p->map_keys);
        q = out + RF_HEADER_DICT;
    }
    if (p->c)
        memcpy(q, b->first, p->c);
    q += p->c;
    if (p->dict_d) {
        memcpy(q, dict, (size_t)p->dict_n * p->dict_d);
        q += (size_t)p->dict_n * p->dict_d;
    }
    for (unsigned j = 0; j < p->digits; j++) {
        *q++ = p->min[j];
        *q++ = p->radix[j];
    }
    /* Bits are set in place: bit i of a region is bit i % 8 of its byte
     * i / 8, the same as bit i % 64 of little-endian word i / 64. */
    uint8_t *low = q, *up = low + (p->n * p->low_bits + 63) / 64 * 8;
    uint8_t *smp = up + (p->upper_bits + 63) / 64 * 8;
    unsigned l = p->low_bits, fill = 0; /* bits in acc, < 64 */
    uint64_t lmask = l ? UINT64_MAX >> (64 - l) : 0, acc = 0;
    for (uint64_t i = 0; i < p->n; i++) {
        uint64_t lv = v[i] & lmask;
        acc |= lv << fill;
        if (fill + l >= 64) {
            kv_put64(low, acc);
            low += 8;
            acc = fill ? lv >> (64 - fill) : 0;
            fill = fill + l - 64;
        } else {
            fill += l;
        }
        uint64_t u = (v[i] >> p->low_bits) + i;
        up[u >> 3] |= (uint8_t)(1u << (u & 7));
    }
    if (fill)
        kv_put64(low, acc);
    /* Zero t ends bucket t: it lies after every value of a bucket <= t. */
    uint64_t i = 0;
    for (uint64_t s = 0; s < p->samples; s++) {
        uint64_t t = s * RF_SAMPLE;
        while (i < p->n && v[i] >> p->low_bits <= t)
            i++;
        kv_put32(smp + 4 * s, (uint32_t)(i + t));
    }
    kv_put64(out + len - RF_CHECKSUM, XXH3_64bits(out, len - RF_CHECKSUM));
}

int kv_rfilter_builder_finish(kv_rfilter_builder *b, uint8_t **out, size_t *len)
{
    if (!b || !out || !len)
        return kv_error_set(KV_EINVAL, "kv_rfilter_builder_finish: NULL argument");
    *out = NULL;
    *len = 0;
    if (b->failed)
        return kv_error_set(KV_ENOMEM, "kv_rfilter_builder_finish: an add ran out of memory");
    struct rf_params p = {0};
    uint64_t *z = NULL, *v = NULL;
    uint8_t *dict = NULL;
    if (b->n) {
        if (b->n >= RF_MAX_VALUES)
            return kv_error_set(KV_EINVAL, "kv_rfilter_builder_finish: %llu keys (at most 2^31)",
                                (unsigned long long)b->n);
        p.c = b->c;
        rebase_windows(b);
        choose_digits(b, &p);
        choose_dict(b, &p);
        z = malloc((size_t)b->n * sizeof *z);
        v = malloc((size_t)b->n * sizeof *v);
        dict = p.dict_d ? malloc((size_t)p.dict_n * p.dict_d) : NULL;
        if (!z || !v || (p.dict_d && !dict))
            goto out_nomem;
        uint64_t m;
        key_integers(b, &p, z, &m, dict);
        /* A dictionary costs E d + 16 bytes of the budget; where the keys
         * still share integers so much that it would take over a quarter
         * of it, the plain map. */
        double extra = p.dict_d ? 8.0 * ((double)p.dict_n * p.dict_d + 16) : 0;
        if (p.dict_d && extra > b->bits_per_key * (double)m / 4) {
            p = (struct rf_params){.c = b->c};
            choose_digits(b, &p);
            key_integers(b, &p, z, &m, NULL);
            extra = 0;
        }
        p.n = m;
        p.map_keys = b->n;
        p.hash = RF_HASH_XXH3;
        choose_range(b->bits_per_key, extra, &p);
        if (p.top < p.r) {
            choose_exact(&p); /* z is sorted and distinct already */
            uint64_t *t = v;
            v = z;
            z = t;
        } else {
            hash_integers(&p, b->seed, z, m);
            if (sort_hashes(&p, z, m, v, &p.n) != KV_OK)
                goto out_nomem;
            derive_sizes(&p);
        }
    }
    size_t size = encoded_size(&p);
    uint8_t *buf = malloc(size);
    if (!buf)
        goto out_nomem;
    encode(b, &p, dict, v, buf, size);
    free(z);
    free(v);
    free(dict);
    *out = buf;
    *len = size;
    return KV_OK;
out_nomem:
    free(z);
    free(v);
    free(dict);
    return kv_error_set(KV_ENOMEM, "kv_rfilter_builder_finish: out of memory (%llu keys)",
                        (unsigned long long)b->n);
}

/* ---- the decoded filter ------------------------------------------------------------------ */

struct kv_rfilter {
    struct rf_params p;
    uint64_t seed;
    uint64_t top;                   /* the largest integer: product of radices - 1 */
    uint64_t weight[RF_WINDOW + 1]; /* weight[j]: product of radices j.. (mod 2^64) */
    unsigned min_end;               /* 1 + the last digit whose least byte is not 0; or 0 */
    uint64_t low_mask;              /* the low bits of a value: 2^l - 1 */
    double per_bucket;              /* values per bucket from it to the last value's */
    double log_miss;                /* log(1 - n / r): a width-1 query's log chance of a miss */
    /* Bounds that share fewer bytes in front than this map each on their
     * own (map_lower, map_upper): c, or SIZE_MAX with a dictionary (they
     * do then, whatever they share). */
    size_t split;
    const uint8_t *prefix, *dict, *low, *upper, *sample;
    size_t len;
};

static int corrupt(const char *why)
{
    return kv_error_set(KV_ECORRUPT, "range filter: %s", why);
}

/* The header's fields into p, checked against each other and len. */
static int decode_header(const uint8_t *b, size_t len, struct rf_params *p, uint64_t *seed)
{
    if (len < RF_HEADER + RF_CHECKSUM)
        return corrupt("shorter than its header");
    if (memcmp(b, RF_MAGIC, 4) != 0)
        return corrupt("bad magic");
    if (b[4] != RF_VERSION && b[4] != RF_VERSION_DICT)
        return corrupt("unknown version");
    if (b[4] == RF_VERSION_DICT && len < RF_HEADER_DICT + RF_CHECKSUM)
        return corrupt("shorter than its header");
    if (b[5] != RF_HASH_XXH3 && b[5] != RF_HASH_NONE)
        return corrupt("unknown hash kind");
    if ((b[4] == RF_VERSION && b[9]) || b[10] || b[11] ||
        (b[4] == RF_VERSION_DICT && kv_get32(b + 44)))
        return corrupt("reserved bytes are not zero");
    p->hash = b[5];
    p->digits = b[6];
    p->low_bits = b[7];
    p->block_bits = b[8];
    p->c = kv_get32(b + 12);
    *seed = kv_get64(b + 16);
    p->n = kv_get64(b + 24);
    p->r = kv_get64(b + 32);
    if (b[4] == RF_VERSION_DICT) {
        p->dict_d = b[9];
        p->dict_n = kv_get32(b + 40);
        p->map_keys = kv_get64(b + 48);
        /* (the builder writes version 2 only for a dictionary of 2 or more
         * entries, of keys it holds) */
        if (p->dict_d < 1 || p->dict_d + p->digits > RF_WINDOW || p->dict_n < 2 || p->n < 1 ||
            p->map_keys >= RF_MAX_VALUES || p->dict_n > p->map_keys || p->n > p->map_keys ||
            p->dict_n * p->dict_d > len)
            return corrupt("dictionary's depth, entries or key count out of range");
    }
    if (p->digits > RF_WINDOW || p->low_bits > 61 || p->block_bits > p->low_bits + 1)
        return corrupt("digits, low bits or block bits out of range");
    if (p->c > KV_RFILTER_MAX_KEY || p->c > len)
        return corrupt("shared prefix too long");
    if (p->n == 0) {
        if (p->r || p->digits || p->c || p->low_bits || p->block_bits)
            return corrupt("a filter of no key with parameters");
    } else if (p->r == 0 || p->n > p->r || p->n >= RF_MAX_VALUES ||
               (p->hash == RF_HASH_XXH3 &&
                (p->r > RF_MAX_RANGE || (uint64_t)1 << p->block_bits > p->r)) ||
               (p->hash == RF_HASH_NONE && p->block_bits)) {
        return corrupt("value count or range out of bounds");
    }
    /* (H first: n + H must not wrap) */
    if (p->n && (p->r - 1) >> p->low_bits >= ((uint64_t)1 << 32) - 1 - p->n)
        return corrupt("upper array too long");
    derive_sizes(p);
    if ((uint64_t)len != encoded_size(p))
        return corrupt("length does not match its parameters");
    return KV_OK;
}

/* The upper array has n ones and H zeros in its first n + H bits, ends on
 * a zero, has nothing after; each sample is its zero's position. Then no
 * query's scan leaves the arrays, whatever the values are. */
static int check_sequence(const kv_rfilter *f)
{
    const struct rf_params *p = &f->p;
    uint64_t words = (p->upper_bits + 63) / 64, zeros = 0, ones = 0;
    for (uint64_t w = 0; w < words; w++) {
        uint64_t x = kv_get64(f->upper + 8 * w);
        unsigned valid = w + 1 < words || p->upper_bits % 64 == 0 ? 64 : p->upper_bits % 64;
        if (valid < 64 && x >> valid)
            return corrupt("bits set past the upper array");
        unsigned o = popcount64(x), zc = valid - o;
        /* The samples whose zero lies in this word. */
        for (uint64_t t = (zeros + RF_SAMPLE - 1) / RF_SAMPLE * RF_SAMPLE; t < zeros + zc;
             t += RF_SAMPLE) {
            if (t / RF_SAMPLE >= p->samples)
                return corrupt("upper array has more zeros than buckets");
            uint64_t mask = valid < 64 ? ~x & ((UINT64_MAX >> (64 - valid))) : ~x;
            uint64_t pos = 64 * w + select64(mask, (unsigned)(t - zeros));
            if (kv_get32(f->sample + 4 * (t / RF_SAMPLE)) != pos)
                return corrupt("select sample does not match the upper array");
        }
        zeros += zc;
        ones += o;
    }
    if (ones != p->n || zeros != p->buckets)
        return corrupt("upper array does not hold n values in H buckets");
    if (p->upper_bits &&
        (kv_get64(f->upper + 8 * ((p->upper_bits - 1) / 64)) >> ((p->upper_bits - 1) % 64) & 1))
        return corrupt("upper array does not end on a bucket's end");
    return KV_OK;
}

/* The values per bucket between the first and last values' buckets (bit
 * positions of the upper array's first and last ones, less their
 * indexes), for prefetch_bucket's guess; and fpr_of_width's log(1 - n / r). */
static void spread(kv_rfilter *f)
{
    uint64_t words = (f->p.upper_bits + 63) / 64, w = 0, first = 0, last = 0;
    if (!f->p.n)
        return;
    while (!kv_get64(f->upper + 8 * w)) /* check_sequence counted n ones */
        w++;
    first = 64 * w + ctz64(kv_get64(f->upper + 8 * w));
    for (w = words; !kv_get64(f->upper + 8 * (w - 1));)
        w--;
    uint64_t x = kv_get64(f->upper + 8 * (w - 1));
    unsigned top = 63;
    while (!(x >> top & 1))
        top--;
    last = 64 * (w - 1) + top - (f->p.n - 1);
    f->per_bucket = last > first ? (double)(f->p.n - 1) / (double)(last - first) : 0;
    /* log(1 - n / r), by a short series where it is exact to double
     * precision's last bits (the next term: x^4 / 4 against x). */
    double o = f->p.r ? (double)f->p.n / (double)f->p.r : 1; /* the occupied share */
    f->log_miss = o < 1e-4 ? -(o + o * o * (0.5 + o / 3)) : o < 1 ? log1p(-o) : -INFINITY;
}

int kv_rfilter_decode(const void *buf, size_t len, kv_rfilter **out)
{
    if (!out)
        return kv_error_set(KV_EINVAL, "kv_rfilter_decode: out is NULL");
    *out = NULL;
    if (!buf)
        return kv_error_set(KV_EINVAL, "kv_rfilter_decode: buf is NULL");
    const uint8_t *b = buf;
    struct rf_params p = {0};
    uint64_t seed = 0;
    int rc = decode_header(b, len, &p, &seed);
    if (rc != KV_OK)
        return rc;
    if (XXH3_64bits(b, len - RF_CHECKSUM) != kv_get64(b + len - RF_CHECKSUM))
        return corrupt("checksum mismatch");
    kv_rfilter *f = calloc(1, sizeof *f);
    if (!f)
        return kv_error_set(KV_ENOMEM, "kv_rfilter_decode: out of memory");
    f->p = p;
    f->seed = seed;
    f->len = len;
    f->prefix = b + (p.dict_d ? RF_HEADER_DICT : RF_HEADER);
    f->split = p.c;
    const uint8_t *d = f->prefix + p.c;
    uint64_t top = 0;
    if (p.dict_d) {
        /* Strictly increasing entries: ranks follow the keys' order. */
        for (uint64_t i = 1; i < p.dict_n; i++)
            if (memcmp(d + (i - 1) * p.dict_d, d + i * p.dict_d, p.dict_d) >= 0) {
                free(f);
                return corrupt("dictionary entries not strictly increasing");
            }
        f->dict = d;
        f->split = SIZE_MAX;
        d += p.dict_n * p.dict_d;
        top = p.dict_n - 1; /* the rank: the most significant digit, radix E */
    }
    for (unsigned j = 0; j < p.digits; j++) {
        unsigned mn = d[2 * j], rm1 = d[2 * j + 1];
        uint64_t radix = (uint64_t)rm1 + 1;
        if (mn + rm1 > 255 || top > (UINT64_MAX - rm1) / radix) {
            free(f);
            return corrupt("digit out of range or radices (and entries) past 2^64");
        }
        top = top * radix + rm1;
        f->p.min[j] = (uint8_t)mn;
        f->p.radix[j] = (uint8_t)rm1;
    }
    f->top = top;
    /* Exact: the range is the integers' span (an integer past it could
     * not be probed). */
    if (p.n && p.hash == RF_HASH_NONE && top != p.r - 1) {
        free(f);
        return corrupt("exact range is not the integers' span");
    }
    f->low_mask = p.low_bits ? UINT64_MAX >> (64 - p.low_bits) : 0;
    f->weight[p.digits] = 1;
    for (unsigned j = 0; j < p.digits; j++)
        if (f->p.min[j])
            f->min_end = j + 1;
    for (unsigned j = p.digits; j-- > 0;)
        f->weight[j] = f->weight[j + 1] * ((uint64_t)f->p.radix[j] + 1);
    f->low = d + 2 * p.digits;
    f->upper = f->low + (p.n * p.low_bits + 63) / 64 * 8;
    f->sample = f->upper + (p.upper_bits + 63) / 64 * 8;
    if ((rc = check_sequence(f)) != KV_OK) {
        free(f);
        return rc;
    }
    spread(f);
    *out = f;
    return KV_OK;
}

void kv_rfilter_free(kv_rfilter *f)
{
    free(f);
}

/* ---- queries ------------------------------------------------------------------------------- */

/* The length of the common prefix of a and b's first m bytes: 8 bytes at
 * a time (the first differing byte of a little-endian word is its lowest
 * set byte of the xor). */
static inline size_t common_prefix(const uint8_t *a, const uint8_t *b, size_t m)
{
    size_t i = 0;
    for (; i + 8 <= m; i += 8) {
        uint64_t x = load64(a + i) ^ load64(b + i);
        if (x)
            return i + ctz64(x) / 8;
    }
    while (i < m && a[i] == b[i])
        i++;
    return i;
}

/* The padded key (0 past its end) against the shared prefix: <0, 0, >0. */
static int cmp_prefix(const kv_rfilter *f, const uint8_t *k, size_t klen)
{
    size_t c = f->p.c, m = klen < c ? klen : c, i = common_prefix(k, f->prefix, m);
    if (i < m)
        return k[i] < f->prefix[i] ? -1 : 1;
    for (; i < c; i++)
        if (f->prefix[i])
            return -1;
    return 0;
}

/* The map of a lower bound k whose first c bytes (0 past its end) are the
 * shared prefix (and the dictionary entry: c is then past it), from digit
 * j on, the digits before j (within their ranges) adding up to z: the
 * integer of the smallest representable string >= k's first c + D bytes, 0 and *out, or 1 when there is none (no key
 * is >= k). Digit j's place value is weight[j + 1], the product of the
 * radices after it, so a string's integer is the sum of its digits times
 * their place values (a multiply-add per digit, no division); the digits
 * before j then make z = acc * weight[j] (acc: their value in their own
 * radices). weight[j] wraps to 0 (2^64) only when the digits before j all
 * have radix 1 (then z is 0). */
static inline int lower_digits(const kv_rfilter *f, const uint8_t *k, size_t klen, size_t c,
                               unsigned j, uint64_t z, uint64_t *out)
{
    unsigned dn = f->p.digits, m = klen > c ? (klen - c < dn ? (unsigned)(klen - c) : dn) : 0;
    for (; j < m; j++) {
        unsigned byte = k[c + j], v = byte - f->p.min[j]; /* wraps below the least */
        if (RF_UNLIKELY(v > f->p.radix[j])) {
            if (byte < f->p.min[j]) { /* this digit and the rest at their least */
                *out = z;
                return 0;
            }
            /* Carry into the digits before; the rest at their least. The
             * digits before at their greatest: no string is larger. */
            if (z + (f->weight[j] - 1) == f->top)
                return 1;
            *out = z + f->weight[j];
            return 0;
        }
        z += v * f->weight[j + 1];
    }
    /* Past k's end its bytes are 0: below a digit's least, the rest take
     * theirs; else each digit is 0. */
    *out = z;
    return 0;
}

/* The map of an upper bound k whose first c bytes (0 past its end) are the
 * shared prefix (and the entry: as lower_digits'), from digit j on (z as
 * lower_digits'): the integer of the largest representable string <= k's
 * first c + D bytes (< them when strict), 0 and *out, or 1 when there is
 * none. */
static inline int upper_digits(const kv_rfilter *f, const uint8_t *k, size_t klen, size_t c,
                               unsigned j, uint64_t z, uint64_t *out)
{
    unsigned dn = f->p.digits, m = klen > c ? (klen - c < dn ? (unsigned)(klen - c) : dn) : 0;
    for (; j < m; j++) {
        unsigned byte = k[c + j], v = byte - f->p.min[j];
        if (RF_UNLIKELY(v > f->p.radix[j])) {
            if (byte > f->p.min[j]) { /* this digit and the rest at their greatest */
                *out = z + (f->weight[j] - 1);
                return 0;
            }
            goto borrow; /* from the digits before; the rest at their greatest */
        }
        z += v * f->weight[j + 1];
    }
    if (j < f->min_end) /* past k's end its bytes are 0: below a digit's least? */
        goto borrow;
    /* k equals a representable string. A key with those first c + D bytes
     * is >= k when k lies whole within them and its last byte is not 0 (the
     * key then has k as a prefix: the bytes where k is not 0 are the key's
     * own, not padding): exclude the integer then. */
    if (klen <= c + dn && klen && k[klen - 1])
        goto borrow;
    *out = z;
    return 0;
borrow:
    if (z == 0)
        return 1;
    *out = z - 1;
    return 0;
}

/* The index of the first dictionary entry >= k's d bytes after the
 * shared prefix (0 past its end), and whether it is equal. */
static uint64_t dict_find(const kv_rfilter *f, const uint8_t *k, size_t klen, int *equal)
{
    size_t c = f->p.c, d = f->p.dict_d;
    uint8_t t[RF_WINDOW] = {0};
    if (klen > c)
        memcpy(t, k + c, klen - c < d ? klen - c : d);
    uint64_t a = 0, b = f->p.dict_n;
    while (a < b) {
        uint64_t mid = a + (b - a) / 2;
        if (memcmp(f->dict + mid * d, t, d) < 0)
            a = mid + 1;
        else
            b = mid;
    }
    *equal = a < f->p.dict_n && memcmp(f->dict + a * d, t, d) == 0;
    return a;
}

/* The integer of the smallest representable string >= lo's first c + D
 * bytes (c + d + D with a dictionary): 0 and *z, or 1 when there is none
 * (no key is >= lo). A bound whose entry is absent: the next entry's rank,
 * the rest at their least. */
RF_COLD static int map_lower(const kv_rfilter *f, const uint8_t *k, size_t klen, uint64_t *z)
{
    int cmp = cmp_prefix(f, k, klen), equal;
    *z = 0;
    if (cmp)
        return cmp > 0;
    if (!f->dict)
        return lower_digits(f, k, klen, f->p.c, 0, 0, z);
    uint64_t rank = dict_find(f, k, klen, &equal), rest = f->weight[0];
    if (equal)
        return lower_digits(f, k, klen, f->p.c + f->p.dict_d, 0, rank * rest, z);
    *z = rank * rest;
    return rank == f->p.dict_n;
}

/* The integer of the largest representable string <= hi's first c + D
 * bytes (c + d + D; < them when strict): 0 and *z, or 1 when there is
 * none. A bound whose entry is absent: the entry before's rank, the rest
 * at their greatest. */
RF_COLD static int map_upper(const kv_rfilter *f, const uint8_t *k, size_t klen, uint64_t *z)
{
    int cmp = cmp_prefix(f, k, klen), equal;
    *z = f->top;
    if (cmp)
        return cmp < 0;
    if (!f->dict)
        return upper_digits(f, k, klen, f->p.c, 0, 0, z);
    uint64_t rank = dict_find(f, k, klen, &equal), rest = f->weight[0];
    if (equal)
        return upper_digits(f, k, klen, f->p.c + f->p.dict_d, 0, rank * rest, z);
    *z = rank * rest - 1;
    return rank == 0;
}

/* Both bounds mapped, bounds that share fewer than c bytes in front (d)
 * or a filter with a dictionary: each bound on its own, but for bounds
 * that share a whole entry (c + d bytes, both at least that long), one
 * search of the dictionary: every key in [lo, hi) has that entry, so an
 * entry no key has makes the answer "none". */
RF_COLD static int map_apart(const kv_rfilter *f, const uint8_t *lo, size_t lolen,
                             const uint8_t *hi, size_t hilen, size_t shared, uint64_t *zlo,
                             uint64_t *zhi)
{
    size_t c = f->p.c, e = c + f->p.dict_d;
    if (!f->dict || shared < e)
        return map_lower(f, lo, lolen, zlo) || map_upper(f, hi, hilen, zhi);
    int equal;
    if (cmp_prefix(f, lo, lolen) != 0)
        return 1;
    uint64_t rank = dict_find(f, lo, lolen, &equal), z = rank * f->weight[0];
    if (!equal)
        return 1;
    return lower_digits(f, lo, lolen, e, 0, z, zlo) || upper_digits(f, hi, hilen, e, 0, z, zhi);
}

/* Both bounds mapped, [lo, hi) to [*zlo, *zhi]: 0, or 1 when the range is
 * empty or holds no representable string. The bytes lo and hi share in
 * front are read once: every key in [lo, hi) has them too (a key that
 * differed there would lie below lo or above hi), so a shared byte that no
 * key has at its position, in the prefix or out of its digit's range,
 * makes the answer "none". */
static inline int map_bounds(const kv_rfilter *f, const uint8_t *lo, size_t lolen,
                             const uint8_t *hi, size_t hilen, uint64_t *zlo, uint64_t *zhi)
{
    size_t m = lolen < hilen ? lolen : hilen, d = common_prefix(lo, hi, m), c = f->p.c;
    if (d == m ? lolen >= hilen : lo[d] > hi[d])
        return 1; /* lo >= hi */
    if (RF_UNLIKELY(d < f->split))
        return map_apart(f, lo, lolen, hi, hilen, d, zlo, zhi);
    /* Both hold c bytes, the same ones. */
    if (common_prefix(lo, f->prefix, c) < c)
        return 1;
    unsigned s = d - c < f->p.digits ? (unsigned)(d - c) : f->p.digits, j = 0;
    uint64_t z = 0;
    for (; j < s; j++) {
        unsigned v = lo[c + j] - f->p.min[j];
        if (RF_UNLIKELY(v > f->p.radix[j]))
            return 1;
        z += v * f->weight[j + 1];
    }
    return lower_digits(f, lo, lolen, c, j, z, zlo) || upper_digits(f, hi, hilen, c, j, z, zhi);
}

static inline uint64_t get_bits(const uint8_t *a, uint64_t pos, unsigned width)
{
    if (!width)
        return 0; /* (an array of no bits has no word to read) */
    uint64_t w = pos >> 6;
    unsigned sh = (unsigned)(pos & 63);
    uint64_t x = load64(a + 8 * w) >> sh;
    if (sh + width > 64)
        x |= load64(a + 8 * (w + 1)) << (64 - sh);
    return width < 64 ? x & ((UINT64_MAX >> 1) >> (63 - width)) : x;
}

/* Low part i. Where l <= 56 one load from its first byte holds it whole;
 * the 8 bytes lie in the encoding: the upper array (a word at least)
 * follows the low array. */
static inline uint64_t low_part(const kv_rfilter *f, uint64_t i)
{
    unsigned l = f->p.low_bits;
    uint64_t pos = i * l;
    if (l <= 56)
        return load64(f->low + (pos >> 3)) >> (pos & 7) & f->low_mask;
    return get_bits(f->low, pos, l);
}

/* The position of zero t (t < H) of the upper array: from the sample
 * before it, word by word; a word's byte counts give both its count of
 * zeros and, in the word that holds zero t, the byte it lies in. */
static uint64_t select0(const kv_rfilter *f, uint64_t t)
{
    const uint64_t ones = 0x0101010101010101ull;
    uint64_t s = kv_get32(f->sample + 4 * (t / RF_SAMPLE)), w = s >> 6;
    unsigned k = (unsigned)(t % RF_SAMPLE);
    uint64_t x = ~load64(f->upper + 8 * w) & (UINT64_MAX << (s & 63));
    for (;;) {
        uint64_t upto = byte_counts(x) * ones;
        unsigned c = (unsigned)(upto >> 56);
        if (k < c)
            return 64 * w + select_in(x, upto, k);
        k -= c;
        x = ~load64(f->upper + 8 * ++w);
    }
}

static inline int upper_bit(const kv_rfilter *f, uint64_t pos)
{
    return (int)(load64(f->upper + 8 * (pos >> 6)) >> (pos & 63) & 1);
}

/* The probe of bucket ha reads a select sample, then the upper array's
 * word it points to, then a low part that word gives the index of: three
 * loads far apart, each waiting for the one before, and in a store whose
 * blocks pass through the caches between two probes of a table, three
 * misses in a row. So the sample is read here (the samples are the
 * smallest part, the likeliest cached), and the lines of the other two
 * are asked for at once, where the bucket lies if the values are spread
 * evenly over the 64 buckets after the sample's: the upper word, and the
 * low parts from 8 values before to 8 after (a guess from the first and
 * last values alone was a line off twice as often): the probe then waits
 * for about one miss. */
static inline void prefetch_bucket(const kv_rfilter *f, uint64_t ha)
{
#if defined(__GNUC__)
    if (!ha)
        return;
    uint64_t t = (ha - 1) / RF_SAMPLE, s = kv_get32(f->sample + 4 * t),
             past = ha - 1 - t * RF_SAMPLE;
    uint64_t i = s - t * RF_SAMPLE + (uint64_t)((double)past * f->per_bucket);
    i = i < f->p.n ? i : f->p.n - 1;
    __builtin_prefetch(f->upper + 8 * ((ha + i) >> 6));
    __builtin_prefetch(f->low + (((i > 8 ? i - 8 : 0) * f->p.low_bits) >> 3));
    __builtin_prefetch(f->low + (((i + 8 < f->p.n ? i + 8 : i) * f->p.low_bits) >> 3));
#else
    (void)f;
    (void)ha;
#endif
}

/* The index of the first of bucket h's values i .. end - 1 (end: the
 * bucket's end) whose low part is >= want, or end: a binary search, the
 * low parts being sorted within a bucket. */
RF_COLD static uint64_t bucket_search(const kv_rfilter *f, uint64_t i, uint64_t end, uint64_t want)
{
    while (i < end) {
        uint64_t mid = i + (end - i) / 2;
        if (low_part(f, mid) < want)
            i = mid + 1;
        else
            end = mid;
    }
    return i;
}

/* Whether some stored value lies in [a, b] (a <= b < r). Bucket a >> l is
 * walked a few values, then (a long bucket: values crowded in one stretch
 * of the range) searched; past it, the buckets up to b's are counted with
 * one more select, not walked, so any width costs O(1) selects. */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline int
probe_inline(const kv_rfilter *f, uint64_t a, uint64_t b)
{
    unsigned l = f->p.low_bits;
    uint64_t ha = a >> l, hb = b >> l;
    prefetch_bucket(f, ha);
    uint64_t pos = ha ? select0(f, ha - 1) + 1 : 0, i = pos - ha;
    /* Bucket ha's values lie in [a, b] when their low parts lie in [la, lb]. */
    uint64_t mask = f->low_mask, la = a & mask, lb = hb == ha ? b & mask : mask;
    for (unsigned step = 0; upper_bit(f, pos); pos++, i++, step++) {
        if (RF_UNLIKELY(step == 8)) {
            uint64_t end_pos = select0(f, ha), end = end_pos - ha;
            uint64_t at = bucket_search(f, i, end, la);
            if (at < end)
                return low_part(f, at) <= lb;
            i = end;
            pos = end_pos;
            break;
        }
        uint64_t v = low_part(f, i);
        if (v >= la)
            return v <= lb;
    }
    /* pos: bucket ha's closing zero; i: the values of buckets <= ha. */
    if (i >= f->p.n || hb == ha)
        return 0;
    uint64_t zpos = hb - 1 == ha ? pos : select0(f, hb - 1);
    if (zpos - (hb - 1) > i)
        return 1; /* a value in a bucket strictly between a's and b's */
    /* Else value i is bucket hb's first, if that bucket has one. */
    return upper_bit(f, zpos + 1) && low_part(f, i) <= (b & mask);
}

/* probe_inline out of line, for the hashed form's pieces. */
static int probe(const kv_rfilter *f, uint64_t a, uint64_t b)
{
    return probe_inline(f, a, b);
}

/* 1 - (1 - n / r)^w for w integers: the chance that one of w hashed
 * integers lands on one of the n values stored (the occupied share of the
 * range, n / r, is exactly a width-1 query's rate: keys that hashed to one
 * value count once, which 1 - (1 - w / r)^n would count n times). */
static double fpr_of_width(const kv_rfilter *f, double w)
{
    if (f->p.n == 0 || w <= 0)
        return 0;
    if (w >= (double)f->p.r)
        return 1;
    /* A short series where it is exact to double precision's last bits
     * (the next term: y^6 / 720 against y): expm1 costs as much as the
     * rest of a query. */
    double y = w * f->log_miss;
    if (y > -0.05)
        return -(y + y * y * (0.5 + y * (1.0 / 6 + y * (1.0 / 24 + y / 120))));
    return -expm1(y);
}

/* The hashed form's answer for [zlo, zhi] (zlo <= zhi): each block's piece
 * of it probed where the hash puts it (two intervals when it wraps).
 * Apart from the exact form's path, which then keeps few registers. */
RF_COLD static int probe_hashed(const kv_rfilter *f, uint64_t zlo, uint64_t zhi,
                                double *expected_fpr)
{
    unsigned lb = f->p.block_bits;
    uint64_t b0 = zlo >> lb, b1 = zhi >> lb, r = f->p.r;
    if (b1 - b0 >= RF_MAX_BLOCKS) {
        if (expected_fpr)
            *expected_fpr = 1;
        return 1;
    }
    if (expected_fpr)
        *expected_fpr = fpr_of_width(f, (double)(zhi - zlo) + 1);
    for (uint64_t blk = b0;; blk++) {
        uint64_t start = blk << lb, end = start + (((uint64_t)1 << lb) - 1);
        uint64_t from = zlo > start ? zlo : start, to = zhi < end ? zhi : end;
        uint64_t width = to - from; /* less one: a block is at most r wide */
        uint64_t a = block_offset(blk, f->seed, r) + (from - start); /* < 2 r: L <= r */
        a = a >= r ? a - r : a;
        if (a + width < r ? probe(f, a, a + width)
                          : probe(f, a, r - 1) || probe(f, 0, a + width - r))
            return 1;
        if (blk == b1)
            break;
    }
    return 0;
}

int kv_rfilter_may_hold(const kv_rfilter *f, const void *lo, size_t lolen, const void *hi,
                        size_t hilen, double *expected_fpr)
{
    if (expected_fpr)
        *expected_fpr = f ? 0 : 1;
    if (!f)
        return 1;
    if (f->p.n == 0)
        return 0;
    uint64_t zlo = 0, zhi = f->top;
    if (lo && hi) {
        if (map_bounds(f, lo, lolen, hi, hilen, &zlo, &zhi))
            return 0;
    } else if ((lo && map_lower(f, lo, lolen, &zlo)) || (hi && map_upper(f, hi, hilen, &zhi))) {
        return 0;
    }
    if (zlo > zhi)
        return 0;
    if (f->p.hash == RF_HASH_NONE)
        return probe_inline(f, zlo, zhi); /* zhi <= top < r; expected 0: exact */
    return probe_hashed(f, zlo, zhi, expected_fpr);
}

void kv_rfilter_info_get(const kv_rfilter *f, kv_rfilter_info *out)
{
    if (!f || !out)
        return;
    *out = (kv_rfilter_info){0};
    out->keys = f->p.n;
    out->range = f->p.r;
    out->low_bits = f->p.low_bits;
    out->block_bits = f->p.block_bits;
    out->shared_prefix = f->p.c;
    out->digits = f->p.dict_d + f->p.digits;
    out->bytes = f->len;
    out->bits_per_key = f->p.n ? (double)f->len * 8 / (double)f->p.n : 0;
    out->map_keys = f->p.map_keys;
}

double kv_rfilter_expected_fpr(const kv_rfilter *f, double width)
{
    if (!f)
        return 1;
    if (f->p.n == 0 || !(width > 0) || f->p.hash == RF_HASH_NONE)
        return 0;
    /* A query of w integers, placed at random, spans floor((w - 1) / L) + 1
     * blocks, or one more with probability ((w - 1) mod L) / L. */
    double L = ldexp(1, (int)f->p.block_bits), w1 = width - 1;
    double spans = floor(w1 / L) + 1, extra = (w1 - (spans - 1) * L) / L;
    double past = spans > RF_MAX_BLOCKS ? 1 : spans == RF_MAX_BLOCKS ? extra : 0;
    return past + (1 - past) * fpr_of_width(f, width);
}

/* ---- the map alone (a memtable's occupancy gate, kv/memtable.c) ---------------------------- */

uint64_t kv_rfilter_map_lower(const kv_rfilter *f, const void *key, size_t klen)
{
    if (!f || (klen && !key))
        return 0;
    uint64_t z;
    /* 1: no representable string is >= key, so key lies above every one:
     * top keeps the map non-decreasing. */
    if (map_lower(f, key, klen, &z))
        return f->top;
    return z < f->top ? z : f->top;
}

uint64_t kv_rfilter_map_top(const kv_rfilter *f)
{
    return f ? f->top : 0;
}
