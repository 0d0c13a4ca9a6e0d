/* fuzz_range_filter.c - libFuzzer target: the range filter
 * (filter/range_filter.h; encoding in doc/filter_format.md, "Range filter
 * encoding"). Every input is used three ways:
 *
 * 1. as an encoding, as it is: kv_rfilter_decode, then, when it decodes,
 *    info, expected FPRs and queries whose bounds are slices of the input
 *    (NULL, empty, equal and reversed bounds among them);
 * 2. the same, "repaired" when that changes a byte: the last 8 bytes
 *    replaced by the XXH3-64 of the bytes before them (the encoding's
 *    checksum), so that forged counts, sizes and Elias-Fano arrays reach the
 *    decoder's checks and, past them, the queries;
 * 3. as keys: byte 0 picks bits per key (4 + byte % 61), then each key is a
 *    length byte (% 48) and that many bytes; the keys, sorted and without
 *    duplicates (at most 4096), are built into a filter, which must decode;
 *    every key's point range [k, k "\0"), and ranges from a key to the next
 *    ones, between keys and open at either end (checked against the sorted
 *    keys) must answer 1.
 *
 * Checked: no crash, leak or sanitizer report (a decoded filter's queries
 * never read past the buffer, whatever its bytes); a failed decode is
 * KV_ECORRUPT (KV_ENOMEM allowed) with *out NULL; an expected FPR is within
 * [0, 1]; no false negative (abort). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <kv/range_filter.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_fpr(double e)
{
    if (!(e >= 0 && e <= 1))
        abort();
}

/* Queries on f with bounds cut from data. */
static void query(const kv_rfilter *f, const uint8_t *data, size_t size)
{
    kv_rfilter_info info;
    kv_rfilter_info_get(f, &info);
    if (info.bytes != size)
        abort();
    static const double widths[] = {0, 1, 2, 16, 255, 4096, 1e6, 1e19};
    for (size_t i = 0; i < sizeof widths / sizeof *widths; i++)
        check_fpr(kv_rfilter_expected_fpr(f, widths[i]));
    double e;
    check_fpr((kv_rfilter_may_hold(f, NULL, 0, NULL, 0, &e), e));
    uint64_t s = XXH3_64bits(data, size);
    for (int q = 0; q < 64 && size; q++) {
        s = XXH3_64bits_withSeed(&q, sizeof q, s);
        size_t a = s % size, alen = (s >> 16) % 40, b = (s >> 24) % size, blen = (s >> 32) % 40;
        alen = alen < size - a ? alen : size - a;
        blen = blen < size - b ? blen : size - b;
        const uint8_t *lo = (s >> 40) % 8 ? data + a : NULL, *hi = (s >> 43) % 8 ? data + b : NULL;
        int r = kv_rfilter_may_hold(f, lo, alen, hi, blen, &e);
        if (r != 0 && r != 1)
            abort();
        check_fpr(e);
    }
}

static void decode(const uint8_t *data, size_t size)
{
    kv_rfilter *f = (kv_rfilter *)1;
    int rc = kv_rfilter_decode(data, size, &f);
    if (rc != KV_OK) {
        if ((rc != KV_ECORRUPT && rc != KV_ENOMEM) || f != NULL)
            abort();
        return;
    }
    query(f, data, size);
    kv_rfilter_free(f);
}

/* ---- keys: built, then never a false negative ---------------------------------------------- */

struct key {
    const uint8_t *p;
    size_t len;
};

static int kcmp(const struct key *a, const struct key *b)
{
    size_t m = a->len < b->len ? a->len : b->len;
    int c = m ? memcmp(a->p, b->p, m) : 0;
    return c ? c : (a->len > b->len) - (a->len < b->len);
}

static int kcmp_void(const void *a, const void *b)
{
    return kcmp(a, b);
}

static int holds(const kv_rfilter *f, const uint8_t *lo, size_t lolen, const uint8_t *hi,
                 size_t hilen)
{
    double e;
    int r = kv_rfilter_may_hold(f, lo, lolen, hi, hilen, &e);
    check_fpr(e);
    return r;
}

/* Ranges that hold key i: each must be answered 1. */
static void check_key(const kv_rfilter *f, const struct key *k, size_t n, size_t i)
{
    uint8_t buf[64];
    memcpy(buf, k[i].p, k[i].len);
    buf[k[i].len] = 0; /* k "\0": the next string after k */
    if (!holds(f, k[i].p, k[i].len, buf, k[i].len + 1) || !holds(f, k[i].p, k[i].len, NULL, 0) ||
        !holds(f, NULL, 0, buf, k[i].len + 1))
        abort();
    if (i + 1 < n && !holds(f, k[i].p, k[i].len, k[i + 1].p, k[i + 1].len))
        abort();
    if (i + 2 < n && !holds(f, k[i].p, k[i].len, k[i + 2].p, k[i + 2].len))
        abort();
    /* From a prefix of k (a bound below it) to k with a byte more. */
    buf[k[i].len] = 0x80;
    if (!holds(f, k[i].p, k[i].len / 2, buf, k[i].len + 1))
        abort();
    /* From between the previous key and k to past k. */
    if (i > 0) {
        memcpy(buf, k[i - 1].p, k[i - 1].len);
        buf[k[i - 1].len] = 0;
        if (kcmp(&(struct key){buf, k[i - 1].len + 1}, &k[i]) <= 0 &&
            !holds(f, buf, k[i - 1].len + 1, NULL, 0))
            abort();
    }
}

static void build(const uint8_t *data, size_t size)
{
    if (size < 2)
        return;
    static struct key k[4096];
    size_t n = 0;
    double bits = 4 + data[0] % 61;
    for (size_t at = 1; at < size && n < 4096;) {
        size_t len = data[at++] % 48;
        len = len < size - at ? len : size - at;
        k[n++] = (struct key){data + at, len};
        at += len;
    }
    qsort(k, n, sizeof *k, kcmp_void);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (m == 0 || kcmp(&k[m - 1], &k[i]) != 0)
            k[m++] = k[i];
    kv_rfilter_builder *b;
    if (kv_rfilter_builder_new(bits, XXH3_64bits(data, size), &b) != KV_OK)
        return;
    for (size_t i = 0; i < m; i++)
        if (kv_rfilter_builder_add(b, k[i].p, k[i].len) != KV_OK)
            abort(); /* (no allocation fails here) */
    uint8_t *enc;
    size_t len;
    if (kv_rfilter_builder_finish(b, &enc, &len) != KV_OK)
        abort();
    kv_rfilter_builder_free(b);
    kv_rfilter *f;
    if (kv_rfilter_decode(enc, len, &f) != KV_OK)
        abort();
    for (size_t i = 0; i < m; i++)
        check_key(f, k, m, i);
    kv_rfilter_free(f);
    kv_free(enc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    decode(data, size);
    if (size >= 8) {
        uint8_t *copy = malloc(size);
        if (!copy)
            return 0;
        memcpy(copy, data, size);
        uint64_t sum = XXH3_64bits(copy, size - 8);
        for (int i = 0; i < 8; i++)
            copy[size - 8 + i] = (uint8_t)(sum >> (8 * i));
        if (memcmp(copy, data, size) != 0)
            decode(copy, size);
        free(copy);
    }
    build(data, size);
    return 0;
}
