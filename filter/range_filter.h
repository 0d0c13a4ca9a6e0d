/* range_filter.h - a range filter: "might any key of this set lie in
 * [lo, hi)?" for byte-string keys in bytewise order (shorter first on a
 * tie), with no false negatives.
 *
 * Each SSTable of a store opened with kv_options.range_filter_bits carries
 * one, built from the table's user keys, so that a bounded iterator skips a
 * table whose range filter says the bounds hold none of its keys, the way
 * a Get skips a table on a point-filter miss. It is usable alone.
 *
 * The design (doc/filter_science.md, "Range filters", says why):
 *  - keys map to 64-bit integers by an order-preserving map fitted to the
 *    set at build time: the bytes all keys share in front are dropped, and
 *    the next bytes are read as digits of a mixed-radix number, each
 *    position's radix the span of byte values seen there (a position no
 *    key varies in takes no room; ten ASCII digits take radix 10). Where
 *    those digits would fill the 64 bits before the keys' varying bytes end
 *    (a random 8-byte id, then a counter), and the keys' first few bytes
 *    take few distinct values, those values are stored sorted (a
 *    dictionary) and a key maps to its first bytes' rank there, then the
 *    digits after. Keys too long for 64 bits keep their leading digits:
 *    distinct keys may share an integer, which costs false positives,
 *    never a false negative;
 *  - the integers go through a locality-preserving hash (Grafite, Costa et
 *    al., SIGMOD 2024): x -> (q(x / L) + x mod L) mod r, q a seeded hash
 *    onto [0, r), so a query interval of width w <= L lands on at most two
 *    intervals of the hash range whose widths add to w, while keys outside
 *    the query's two blocks land anywhere; keys next to the query in its
 *    own blocks never collide with it. When the integers' whole span fits
 *    the r the size allows (keys dense in their span), they are stored as
 *    they are instead: exact, no false positive beyond the map's own;
 *  - the hashed values are stored sorted in an Elias-Fano sequence with a
 *    select index; a query asks it for the successor of each hashed
 *    interval's start.
 *  An empty query of mapped width w is a false positive with probability
 *  1 - (1 - n / r)^w for n stored values (n / r: the occupied share of the
 *  hash range): about w / 2^(bits_per_key - 3) for small w (0 for an exact
 *  filter). Queries of a hashed filter wider than 4 blocks answer "maybe"
 *  without a probe. That expectation does not count the map's own
 *  collisions (keys sharing an integer, a range between two of them):
 *  kv_rfilter_info's keys against map_keys shows how many there are.
 *
 * A built filter is an immutable byte string (the encoding is documented
 * byte by byte in doc/filter_format.md, "Range filter encoding", with its
 * own version and checksum); kv_rfilter_decode checks it all and answers
 * queries from it without copying it. Queries on a decoded filter may run
 * from any number of threads at once. */
#ifndef KV_RANGE_FILTER_H
#define KV_RANGE_FILTER_H

#include <stddef.h>
#include <stdint.h>

#include <kv/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bits per key accepted by the builder: below the minimum a filter would
 * answer "maybe" to nearly everything. */
#define KV_RFILTER_MIN_BITS 4.0
#define KV_RFILTER_MAX_BITS 64.0

typedef struct kv_rfilter_builder kv_rfilter_builder;

/* A builder for a filter of about bits_per_key bits per distinct key
 * (KV_RFILTER_MIN_BITS .. KV_RFILTER_MAX_BITS), hashing with `seed`.
 * KV_EINVAL (NULL out, bits out of range), KV_ENOMEM. */
KV_API int kv_rfilter_builder_new(double bits_per_key, uint64_t seed, kv_rfilter_builder **out);

/* Adds a key (0 .. KV_RFILTER_MAX_KEY bytes; longer keys are taken by
 * their first KV_RFILTER_MAX_KEY bytes, which is safe: the filter only
 * ever answers "maybe" more). Keys come in bytewise non-decreasing order;
 * an equal key again is a no-op. KV_EINVAL (NULL b, NULL key with klen >
 * 0, a key below the previous one: the key is refused, the builder stays
 * as it was), KV_ENOMEM (the builder is then failed: every later add and
 * finish answer KV_ENOMEM, since a filter missing a key could say "no"
 * wrongly). The builder keeps 32 bytes of each key until finish. */
KV_API int kv_rfilter_builder_add(kv_rfilter_builder *b, const void *key, size_t klen);
#define KV_RFILTER_MAX_KEY ((size_t)512 * 1024)

/* Distinct keys added so far. NULL: 0. Cannot fail. */
KV_API uint64_t kv_rfilter_builder_keys(const kv_rfilter_builder *b);

/* The encoded filter of the keys added (a filter of no key is valid and
 * answers "no" to everything): *out (freed with kv_free) and *len.
 * KV_EINVAL (NULL arguments, 2^31 keys or more), KV_ENOMEM. The builder
 * may then only be freed. */
KV_API int kv_rfilter_builder_finish(kv_rfilter_builder *b, uint8_t **out, size_t *len);

/* NULL is a no-op. */
KV_API void kv_rfilter_builder_free(kv_rfilter_builder *b);

/* A decoded filter: a view of the caller's bytes, which must outlive it. */
typedef struct kv_rfilter kv_rfilter;

/* Checks the encoding (version, checksum, every length and count against
 * len, the Elias-Fano sequence's shape) and makes a view of it.
 * KV_ECORRUPT (with the reason in the error text) for any damage,
 * KV_EINVAL (NULL arguments), KV_ENOMEM. */
KV_API int kv_rfilter_decode(const void *buf, size_t len, kv_rfilter **out);

/* NULL is a no-op. */
KV_API void kv_rfilter_free(kv_rfilter *f);

/* 0 when no key of the filter lies in [lo, hi) (lo inclusive, hi
 * exclusive; lo NULL: from the first key; hi NULL: to the end), else 1
 * ("maybe"). Never 0 for a range that holds a key. An empty range (lo >=
 * hi) is 0. *expected_fpr, when not NULL, gets the probability that this
 * query, were the range empty, would be answered 1: what the filter's
 * parameters predict for the query's width (1 for an answer given without
 * a probe). NULL f: 1. Cannot fail. */
KV_API int kv_rfilter_may_hold(const kv_rfilter *f, const void *lo, size_t lolen, const void *hi,
                               size_t hilen, double *expected_fpr);

typedef struct {
    uint64_t keys;        /* distinct values stored (keys mapping to one integer count once) */
    uint64_t range;       /* r: the hash range */
    unsigned low_bits;    /* Elias-Fano low bits per value */
    unsigned block_bits;  /* log2 L: the hash's block of integers */
    size_t shared_prefix; /* bytes every key shares in front, dropped by the map */
    unsigned digits;      /* byte positions the map reads after them (a dictionary's among them) */
    size_t bytes;         /* the encoding's size */
    double bits_per_key;  /* bytes * 8 / keys (0 with no key) */
    /* Distinct keys added, as the encoding records them (those with a
     * dictionary do; 0: not recorded). map_keys / keys well above 1 means
     * keys share integers (or, hashed, values): ranges between them are
     * false positives that the expected FPR does not count. */
    uint64_t map_keys;
} kv_rfilter_info;

/* Fills *out. NULL arguments leave nothing written. Cannot fail. */
KV_API void kv_rfilter_info_get(const kv_rfilter *f, kv_rfilter_info *out);

/* The probability that an empty query whose bounds map to `width`
 * consecutive integers is a false positive: 1 - (1 - keys / r)^width, 1
 * past 4 blocks (the map's own collisions not counted). For charts of expected against measured FPR. NULL f: 1.
 * Cannot fail. */
KV_API double kv_rfilter_expected_fpr(const kv_rfilter *f, double width);

/* The filter's order-preserving map on its own, for a caller that buckets
 * keys by it (a memtable's occupancy gate, kv/memtable.c). map_lower: the
 * integer of the smallest representable string >= key (the one the filter
 * gives a query's lower bound), defined for every byte string: one below
 * every key the map was fitted to is 0, one above them all is map_top. It
 * is monotone over all byte strings: a <= b (bytewise, shorter first on a
 * tie) gives map_lower(a) <= map_lower(b), so every key k in [lo, hi) has
 * map_lower(lo) <= map_lower(k) <= map_lower(hi). Distinct keys may share
 * an integer. map_top: the largest integer. NULL f: 0. Cannot fail. */
KV_API uint64_t kv_rfilter_map_lower(const kv_rfilter *f, const void *key, size_t klen);
KV_API uint64_t kv_rfilter_map_top(const kv_rfilter *f);

#ifdef __cplusplus
}
#endif

#endif /* KV_RANGE_FILTER_H */
