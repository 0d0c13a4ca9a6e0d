/* check_scanfilter.c - filters that gate scans (kv_options.prefix_len,
 * kv_options.range_filter_bits; doc/database.md, "Filters that gate
 * scans") against an in-memory model.
 *
 * The model runs ("decimal", "binary", "mixed"): random puts, deletes and
 * range deletes under a 64 KiB memtable and 64 KiB tables, so that many
 * tables lie over several levels; flushes, compactions of random ranges and
 * reopens at random, each reopen with another prefix_len (0, 4, 8) and
 * range_filter_bits (0, 8, 16), so that tables written under different
 * settings (and none) live side by side. Keys: 16 decimal digits of 2i (as
 * kvbench writes them, so a range between two keys is empty; every other
 * seed spreads them over all 16 digits, so that prefixes differ), binary keys
 * 0 to 40 bytes long full of 0x00 and 0xff bytes with shared prefixes, the
 * empty key and keys of 0xff bytes only, keys of 48 to 88 bytes sharing
 * their first 48 (past what a range filter keeps of a key), or both kinds
 * at once. Every so often a batch of queries, now or at a snapshot taken a
 * while before (tables written since hide what it reads): bounds on keys
 * and between them, one side or both or neither, widths from none (lower
 * == upper) to the whole key space, and prefix seeks of 0 to 10 bytes;
 * each walked forward from seek_first
 * and backward from seek_last, then a kv_iter_seek inside and a few steps
 * either way, every key and value compared with the model. A filter that
 * skips a table holding a key in range (a false negative) shows as a missing
 * key; a skipped range tombstone as a deleted key come back. Any difference
 * fails with the seed, the step and the query.
 *
 * "skips": the filters must also skip. Empty ranges over decimal keys under
 * range_filter_bits 16 skip most tables (kv_stats' range_filter_skips, few
 * range_tables_read); absent prefixes under prefix_len 8 skip by the prefix
 * filter, and tables written under another prefix_len are never asked;
 * kv_explain_seek agrees with the model and shows skipped tables untouched.
 * Each first checks that its piece is there (the range filter says "no" to
 * some empty range, the tables carry range filters or prefixes, the store
 * counts range queries), so that a failure names what is missing.
 *
 * "options": the option values refused (range_filter_bits out of 4 .. 64,
 * prefix_len without filters or over 65536); the comparator refusals are
 * in check_comparator.c.
 *
 * KV_SCANFILTER_SEED=<n> runs the model runs with that seed alone, to replay
 * a failure; KV_SCANFILTER_STEPS=<n> sets their operations. */
#define _XOPEN_SOURCE 700
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kv/kv.h>
#include <kv/range_filter.h>

#include "fixture.h"

/* ---- where a failure happened ---------------------------------------------------------- */

/* The run's seed and step, and the query under check: every failure of the
 * model runs names them. */
static char where[1024];

#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            char why_[512];                                                                        \
            snprintf(why_, sizeof why_, __VA_ARGS__);                                              \
            ck_abort_msg("%s: %s", where, why_);                                                   \
        }                                                                                          \
    } while (0)

/* Bytes as hex ("0x00ff..."; "empty" for none) into out (cap bytes). */
static const char *hex(char *out, size_t cap, const uint8_t *k, size_t n)
{
    if (n == 0) {
        snprintf(out, cap, "empty");
        return out;
    }
    size_t p = (size_t)snprintf(out, cap, "0x");
    for (size_t i = 0; i < n && p + 3 < cap; i++)
        p += (size_t)snprintf(out + p, cap - p, "%02x", k[i]);
    return out;
}

/* ---- keys --------------------------------------------------------------------------- */

#define KMAX 96 /* 88-byte keys, a byte appended for "just after", 0xff runs of 41 */
#define VMAX 112

enum { DECIMAL, BINARY, MIXED };

static uint64_t rng;

static uint64_t rnd(void)
{
    return splitmix(rng++);
}

/* 16 decimal digits of v, as kvbench writes key v. */
static size_t decimal_key(uint64_t v, uint8_t *k)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%016llu", (unsigned long long)v);
    memcpy(k, buf, 16);
    return 16;
}

/* Binary key number i: the empty key, runs of 0xff (1 .. 40 bytes) and of
 * 0x00, 48 bytes 'L' and up to 40 more, and mostly one of six shared
 * prefixes followed by up to 40 bytes in all; a quarter of the bytes after
 * a prefix are 0x00 and a quarter 0xff. */
static size_t binary_key(uint64_t i, uint8_t *k)
{
    static const char *const prefix[6] = {"", "\0", "\xff\xff", "user:", "\0\xff\0\1", "abcdefgh"};
    static const size_t plen[6] = {0, 1, 2, 5, 4, 8};
    uint64_t r = splitmix(i ^ 0xB1A5ull);
    size_t n;
    switch (r % 16) {
    case 0: return 0;
    case 1:
        n = 1 + (size_t)(r >> 8) % 40;
        memset(k, 0xff, n);
        return n;
    case 2:
        n = 1 + (size_t)(r >> 8) % 8;
        memset(k, 0, n);
        return n;
    case 3:
        memset(k, 'L', 48);
        n = 48 + (size_t)(r >> 8) % 41;
        for (size_t j = 48; j < n; j++) {
            uint64_t b = splitmix(r + j);
            k[j] = (b & 3) == 0 ? 0x00 : (b & 3) == 1 ? 0xff : (uint8_t)(b >> 8);
        }
        return n;
    default: break;
    }
    size_t p = (size_t)(r >> 8) % 6;
    memcpy(k, prefix[p], plen[p]);
    n = plen[p] + (size_t)(r >> 16) % (41 - plen[p]);
    for (size_t j = plen[p]; j < n; j++) {
        uint64_t b = splitmix(r + j);
        k[j] = (b & 3) == 0 ? 0x00 : (b & 3) == 1 ? 0xff : (uint8_t)(b >> 8);
    }
    return n;
}

/* The run's key shape and the size of its key space (make_key's i). */
static int run_shape;
static uint64_t run_keys;

/* The run's decimal keys are the numbers 2 * i * run_spread: 1 (kvbench's
 * keys, whose first 11 digits are all 0, so that prefixes of 4 or 8 bytes
 * are one) or a large number (keys spread over all 16 digits, so that
 * those prefixes differ). A number between two of them is absent. */
static uint64_t run_spread;

/* Key number i (< run_keys) of a run's key space. */
static size_t make_key(int shape, uint64_t i, uint8_t *k)
{
    if (shape == DECIMAL)
        return decimal_key(2 * i * run_spread, k);
    if (shape == BINARY)
        return binary_key(i, k);
    return i & 1 ? binary_key(i / 2, k) : decimal_key(i * run_spread, k);
}

/* A decimal number between two of the run's decimal keys (r: random). */
static size_t between_key(uint64_t r, uint8_t *k)
{
    return decimal_key(2 * (r % run_keys) * run_spread + 1 + (r >> 32) % (2 * run_spread - 1), k);
}

static int kcmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
    size_t n = al < bl ? al : bl;
    int c = n ? memcmp(a, b, n) : 0;
    if (c)
        return c;
    return al < bl ? -1 : al > bl;
}

/* ---- the model: the live pairs, sorted -------------------------------------------------- */

struct ent {
    uint8_t k[KMAX];
    uint8_t v[VMAX];
    size_t klen, vlen;
};

struct model {
    struct ent *e;
    size_t n, cap;
};

/* The first entry >= k (n: none). */
static size_t m_lower(const struct model *m, const uint8_t *k, size_t kl)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (kcmp(m->e[mid].k, m->e[mid].klen, k, kl) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void m_put(struct model *m, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl)
{
    size_t i = m_lower(m, k, kl);
    if (i == m->n || kcmp(m->e[i].k, m->e[i].klen, k, kl) != 0) {
        if (m->n == m->cap) {
            m->cap = m->cap ? 2 * m->cap : 1024;
            m->e = realloc(m->e, m->cap * sizeof *m->e);
            ck_assert_ptr_nonnull(m->e);
        }
        memmove(&m->e[i + 1], &m->e[i], (m->n - i) * sizeof *m->e);
        m->n++;
        memcpy(m->e[i].k, k, kl);
        m->e[i].klen = kl;
    }
    memcpy(m->e[i].v, v, vl);
    m->e[i].vlen = vl;
}

/* Removes [b, e) (e NULL: to the end). */
static void m_del_range(struct model *m, const uint8_t *b, size_t bl, const uint8_t *e, size_t el)
{
    size_t i = m_lower(m, b, bl), j = e ? m_lower(m, e, el) : m->n;
    if (j <= i)
        return;
    memmove(&m->e[i], &m->e[j], (m->n - j) * sizeof *m->e);
    m->n -= j - i;
}

static void m_del(struct model *m, const uint8_t *k, size_t kl)
{
    size_t i = m_lower(m, k, kl);
    if (i == m->n || kcmp(m->e[i].k, m->e[i].klen, k, kl) != 0)
        return;
    memmove(&m->e[i], &m->e[i + 1], (m->n - i - 1) * sizeof *m->e);
    m->n--;
}

/* ---- queries ------------------------------------------------------------------------ */

/* The run's seed and step: the first part of `where`. */
static char where_run[256];

struct query {
    int prefix; /* a kv_iter_seek_prefix of p[0, plen); else bounds */
    int has_lo, has_hi;
    uint8_t lo[KMAX], hi[KMAX], p[KMAX];
    size_t lolen, hilen, plen;
};

/* A bound: on a live key, just after one, just before one, a key of the
 * key space (live, deleted or never written), a few random bytes, the empty
 * key, a run of 0xff (above every key, or equal to one), an odd decimal
 * number (between two decimal keys). At most 90 bytes. */
static size_t gen_bound(const struct model *m, uint8_t *k)
{
    uint64_t r = rnd();
    unsigned c = (unsigned)(r % 100);
    r >>= 8;
    const struct ent *e = m->n ? &m->e[r % m->n] : NULL;
    size_t n;
    if (e && c < 30) {
        memcpy(k, e->k, e->klen);
        return e->klen;
    }
    if (e && c < 50) { /* the first key after it */
        memcpy(k, e->k, e->klen);
        k[e->klen] = 0;
        return e->klen + 1;
    }
    if (e && c < 60) { /* below it, above most keys below it */
        memcpy(k, e->k, e->klen);
        n = e->klen;
        if (n && k[n - 1]) {
            k[n - 1]--;
            memset(k + n, 0xff, (size_t)(r >> 32) % 3);
            return n + (size_t)(r >> 32) % 3;
        }
        return n ? n - 1 : 0;
    }
    if (c < 75)
        return make_key(run_shape, (r >> 8) % run_keys, k);
    if (c < 85) {
        n = (size_t)(r % 11);
        for (size_t j = 0; j < n; j++) {
            uint64_t b = splitmix(r + j);
            k[j] = (b & 3) == 0 ? 0x00 : (b & 3) == 1 ? 0xff : (uint8_t)(b >> 8);
        }
        return n;
    }
    if (c < 90)
        return 0;
    if (c < 95) {
        n = 1 + (size_t)(r % 41);
        memset(k, 0xff, n);
        return n;
    }
    return between_key(r >> 8, k);
}

/* A width in keys: 0, 1, 2, 4 .. the whole key space, most of them small. */
static size_t gen_width(uint64_t r)
{
    unsigned b = (unsigned)(r % 14);
    return b == 0 ? 0 : ((size_t)1 << (b - 1)) + (size_t)(r >> 8) % ((size_t)1 << (b - 1));
}

static void gen_prefix(const struct model *m, struct query *q)
{
    uint64_t r = rnd();
    unsigned c = (unsigned)(r % 10);
    r >>= 8;
    size_t n = (size_t)(r % 11);
    q->prefix = 1;
    if (m->n && c < 6) { /* a live key's first bytes */
        const struct ent *e = &m->e[(r >> 8) % m->n];
        q->plen = n < e->klen ? n : e->klen;
        memcpy(q->p, e->k, q->plen);
    } else if (c < 8) { /* random bytes */
        for (size_t j = 0; j < n; j++) {
            uint64_t b = splitmix(r + j);
            q->p[j] = (b & 3) == 0 ? 0x00 : (b & 3) == 1 ? 0xff : (uint8_t)(b >> 8);
        }
        q->plen = n;
    } else if (c < 9) { /* an odd decimal number's first digits */
        between_key(r >> 8, q->p);
        q->plen = n;
    } else { /* 0xff bytes: no upper bound */
        memset(q->p, 0xff, n);
        q->plen = n;
    }
}

/* A random query: a quarter prefix seeks; else both bounds (most), one or
 * none, the upper one independent of the lower, a width of keys after it,
 * equal to it, or just after it. */
static void gen_query(const struct model *m, struct query *q)
{
    memset(q, 0, sizeof *q);
    uint64_t r = rnd();
    if (r % 4 == 0) {
        gen_prefix(m, q);
        return;
    }
    unsigned kind = (unsigned)(r >> 8) % 20;
    q->has_lo = kind < 15;
    q->has_hi = kind < 12 || (kind >= 15 && kind < 18);
    q->lolen = gen_bound(m, q->lo);
    unsigned how = (unsigned)(r >> 16) % 10;
    if (how < 4 || !q->has_lo) {
        q->hilen = gen_bound(m, q->hi);
    } else if (how < 8) { /* a width of keys, on a key or just after one */
        size_t i = m_lower(m, q->lo, q->lolen) + gen_width(r >> 24);
        if (i >= m->n) {
            q->hilen = 41;
            memset(q->hi, 0xff, q->hilen);
        } else {
            memcpy(q->hi, m->e[i].k, m->e[i].klen);
            q->hilen = m->e[i].klen;
            if (how == 7)
                q->hi[q->hilen++] = 0;
        }
    } else { /* lower == upper, or only the lower bound itself */
        memcpy(q->hi, q->lo, q->lolen);
        q->hilen = q->lolen;
        if (how == 9)
            q->hi[q->hilen++] = 0;
    }
    if (q->has_lo && q->has_hi && kcmp(q->lo, q->lolen, q->hi, q->hilen) > 0) {
        uint8_t t[KMAX];
        size_t tl = q->lolen;
        memcpy(t, q->lo, tl);
        memcpy(q->lo, q->hi, q->hilen);
        q->lolen = q->hilen;
        memcpy(q->hi, t, tl);
        q->hilen = tl;
    }
}

/* The bounds a prefix stands for: [p, the first key after every key that
 * starts with p), no upper bound when p is empty or only 0xff bytes. */
static void prefix_bounds(struct query *q)
{
    q->has_lo = 1;
    memcpy(q->lo, q->p, q->plen);
    q->lolen = q->plen;
    size_t n = q->plen;
    while (n && q->p[n - 1] == 0xff)
        n--;
    q->has_hi = n > 0;
    if (n) {
        memcpy(q->hi, q->p, n);
        q->hi[n - 1]++;
        q->hilen = n;
    }
}

static void describe(const struct query *q, int j)
{
    char a[100], b[100];
    if (q->prefix)
        snprintf(where, sizeof where, "%s, query %d: seek_prefix %s", where_run, j,
                 hex(a, sizeof a, q->p, q->plen));
    else
        snprintf(where, sizeof where, "%s, query %d: bounds [%s, %s)", where_run, j,
                 q->has_lo ? hex(a, sizeof a, q->lo, q->lolen) : "none",
                 q->has_hi ? hex(b, sizeof b, q->hi, q->hilen) : "none");
}

/* The iterator is at model entry i, or (i == SIZE_MAX) not valid with
 * status KV_OK. */
static void expect_at(kv_iter *it, const struct model *m, size_t i, const char *what)
{
    char a[100], b[100];
    size_t kl = 0, vl = 0;
    const uint8_t *k = kv_iter_valid(it) ? kv_iter_key(it, &kl) : NULL;
    EXPECT(kv_iter_status(it) == KV_OK, "%s: status %d: %s", what, kv_iter_status(it),
           kv_error_text());
    if (i == SIZE_MAX) {
        EXPECT(!k, "%s: the iterator holds %s, the model nothing", what, hex(a, sizeof a, k, kl));
        return;
    }
    const struct ent *e = &m->e[i];
    EXPECT(k, "%s: the iterator holds nothing, the model %s (entry %zu of %zu)", what,
           hex(a, sizeof a, e->k, e->klen), i, m->n);
    EXPECT(kcmp(k, kl, e->k, e->klen) == 0, "%s: the iterator holds %s, the model %s", what,
           hex(a, sizeof a, k, kl), hex(b, sizeof b, e->k, e->klen));
    const uint8_t *v = kv_iter_value(it, &vl);
    EXPECT(vl == e->vlen && memcmp(v, e->v, vl) == 0, "%s: key %s: value of %zu bytes, not %zu",
           what, hex(a, sizeof a, k, kl), vl, e->vlen);
}

/* Positions `it` for q, walks its range forward from there and backward
 * from seek_last, then seeks inside and steps a little either way; every
 * position against the model. */
static void check_query(kv_iter *it, const struct model *m, struct query *q)
{
    if (q->prefix) {
        EXPECT(kv_iter_seek_prefix(it, q->p, q->plen) == KV_OK, "seek_prefix: %s", kv_error_text());
        prefix_bounds(q);
    } else {
        EXPECT(kv_iter_set_bounds(it, q->has_lo ? q->lo : NULL, q->lolen, q->has_hi ? q->hi : NULL,
                                  q->hilen) == KV_OK,
               "set_bounds: %s", kv_error_text());
        kv_iter_seek_first(it);
    }
    size_t first = q->has_lo ? m_lower(m, q->lo, q->lolen) : 0;
    size_t end = q->has_hi ? m_lower(m, q->hi, q->hilen) : m->n;
    if (end < first)
        end = first;
    for (size_t i = first; i < end; i++) {
        expect_at(it, m, i, "forward");
        kv_iter_next(it);
    }
    expect_at(it, m, SIZE_MAX, "forward, past the last");
    kv_iter_seek_last(it);
    for (size_t i = end; i > first; i--) {
        expect_at(it, m, i - 1, "backward");
        kv_iter_prev(it);
    }
    expect_at(it, m, SIZE_MAX, "backward, before the first");
    uint8_t t[KMAX];
    size_t tl;
    uint64_t r = rnd();
    if (end > first && r % 2) {
        const struct ent *e = &m->e[first + (r >> 8) % (end - first)];
        memcpy(t, e->k, e->klen);
        tl = e->klen;
    } else {
        tl = gen_bound(m, t);
    }
    size_t i = m_lower(m, t, tl);
    i = i < first ? first : i;
    i = i < end ? i : SIZE_MAX;
    kv_iter_seek(it, t, tl);
    expect_at(it, m, i, "seek");
    /* a few steps one way, then the other (a change of direction
     * repositions every source: the range asked changes side) */
    int forward = (r >> 40) & 1;
    for (int turn = 0; turn < 2 && i != SIZE_MAX; turn++, forward = !forward) {
        for (unsigned s = 1 + (unsigned)(r >> (41 + 3 * turn)) % 4; s > 0 && i != SIZE_MAX; s--) {
            if (forward) {
                kv_iter_next(it);
                i = i + 1 < end ? i + 1 : SIZE_MAX;
            } else {
                kv_iter_prev(it);
                i = i > first ? i - 1 : SIZE_MAX;
            }
            expect_at(it, m, i, forward ? "seek, then next" : "seek, then prev");
        }
    }
}

/* count random queries through one iterator (reading at snap, or now),
 * against m. */
static void check_queries(kv_db *db, const kv_snapshot *snap, const struct model *m, int count)
{
    kv_iter *it;
    snprintf(where, sizeof where, "%s", where_run);
    EXPECT(kv_iter_new(db, snap, &it) == KV_OK, "kv_iter_new: %s", kv_error_text());
    for (int j = 0; j < count; j++) {
        struct query q;
        gen_query(m, &q);
        describe(&q, j);
        check_query(it, m, &q);
    }
    kv_iter_free(it);
}

/* ---- the model runs ------------------------------------------------------------------- */

static const size_t prefix_lens[3] = {0, 4, 8};
static const double range_bits[3] = {0, 8, 16};

/* Small memtables and tables, several levels, no compression (more
 * blocks), no idle merges; the two filter settings as given. */
static void scan_options(kv_options *o, size_t prefix_len, double bits)
{
    kv_options_init(o);
    o->write_buffer_size = 64 << 10;
    o->target_file_size = 64 << 10;
    o->max_bytes_for_level_base = 128 << 10;
    o->l0_compaction_trigger = 2;
    o->block_size = 256;
    o->compression = KV_COMPRESSION_NONE;
    o->idle_compaction_ms = 0;
    o->prefix_len = prefix_len;
    o->range_filter_bits = bits;
}

/* One operation of a run: a put (most), a delete, a range delete. */
static void write_op(kv_db *db, struct model *m, uint64_t step)
{
    uint64_t r = rnd();
    unsigned c = (unsigned)(r % 100);
    r >>= 8;
    uint8_t k[KMAX], e[KMAX], v[VMAX];
    size_t kl, el;
    if (c < 78) {
        kl = make_key(run_shape, r % run_keys, k);
        size_t vl = (size_t)snprintf((char *)v, sizeof v, "%llu:", (unsigned long long)step);
        size_t want = 8 + (size_t)(r >> 32) % 100;
        for (; vl < want; vl++)
            v[vl] = (uint8_t)('a' + (step + vl) % 26);
        EXPECT(kv_put(db, k, kl, v, vl) == KV_OK, "put: %s", kv_error_text());
        m_put(m, k, kl, v, vl);
    } else if (c < 99) {
        if (m->n && c < 93) {
            const struct ent *x = &m->e[r % m->n];
            kl = x->klen;
            memcpy(k, x->k, kl);
        } else {
            kl = make_key(run_shape, r % run_keys, k);
        }
        EXPECT(kv_delete(db, k, kl) == KV_OK, "delete: %s", kv_error_text());
        m_del(m, k, kl);
    } else { /* [a bound, a few keys on), sometimes [a bound, another) */
        kl = gen_bound(m, k);
        if (r % 64) {
            size_t i = m_lower(m, k, kl) + (size_t)(r >> 8) % 20;
            el = i < m->n ? m->e[i].klen : 0;
            memcpy(e, i < m->n ? m->e[i].k : k, i < m->n ? el : 0);
            if (i >= m->n) {
                el = 41;
                memset(e, 0xff, el);
            }
        } else {
            el = gen_bound(m, e);
        }
        if (kcmp(k, kl, e, el) > 0) {
            EXPECT(kv_delete_range(db, k, kl, e, el) == KV_EINVAL, "range delete end < begin");
            return;
        }
        EXPECT(kv_delete_range(db, k, kl, e, el) == KV_OK, "range delete: %s", kv_error_text());
        m_del_range(m, k, kl, e, el);
    }
}

/* Flushes, compactions (a random range, or everything) and reopens with
 * new filter settings, at random. Returns the handle (a new one after a
 * reopen). */
static kv_db *maintain(kv_db *db, const char *path, kv_options *o, const struct model *m,
                       unsigned c)
{
    if (c == 0) {
        EXPECT(kv_flush(db) == KV_OK, "flush: %s", kv_error_text());
    } else if (c == 1) {
        uint8_t a[KMAX], b[KMAX];
        size_t al = gen_bound(m, a), bl = gen_bound(m, b);
        int all = rnd() % 3 == 0;
        if (kcmp(a, al, b, bl) > 0)
            EXPECT(kv_compact_range(db, b, bl, a, al) == KV_OK, "compact: %s", kv_error_text());
        else if (all)
            EXPECT(kv_compact_range(db, NULL, 0, NULL, 0) == KV_OK, "compact: %s", kv_error_text());
        else
            EXPECT(kv_compact_range(db, a, al, b, bl) == KV_OK, "compact: %s", kv_error_text());
    } else {
        EXPECT(kv_close(db) == KV_OK, "close: %s", kv_error_text());
        uint64_t r = rnd();
        scan_options(o, prefix_lens[r % 3], range_bits[(r >> 8) % 3]);
        EXPECT(kv_open(path, o, &db) == KV_OK, "reopen (prefix_len %zu, range_filter_bits %g): %s",
               o->prefix_len, o->range_filter_bits, kv_error_text());
    }
    return db;
}

/* Counters that hold whatever the filters are: a table skipped was
 * checked first, and a false positive is a table checked. */
static void check_counters(kv_db *db)
{
    struct kv_stats s;
    get_stats(db, &s);
    EXPECT(s.prefix_filter_skips + s.range_filter_skips <= s.range_tables_checked,
           "skips %llu + %llu > tables checked %llu", (unsigned long long)s.prefix_filter_skips,
           (unsigned long long)s.range_filter_skips, (unsigned long long)s.range_tables_checked);
    EXPECT(s.prefix_filter_false_positives <= s.range_tables_checked &&
               s.range_filter_false_positives <= s.range_tables_checked,
           "false positives above the tables checked");
}

/* The most tables seen at once in the run. */
static size_t most_tables;

/* How many levels hold tables now. */
static int levels_used(kv_db *db)
{
    kv_table_stats *ts;
    size_t n;
    ck_assert_int_eq(kv_table_stats_get(db, &ts, &n), KV_OK);
    unsigned mask = 0;
    for (size_t i = 0; i < n; i++)
        mask |= 1u << ts[i].level;
    kv_free(ts);
    most_tables = n > most_tables ? n : most_tables;
    return __builtin_popcount(mask);
}

/* A snapshot and the model as it was then. */
struct snap {
    kv_snapshot *s;
    struct model m;
};

/* Queries at the snapshot held (older versions, and keys deleted since,
 * that tables written later hide), then releases it; with `take`, takes
 * a new one. */
static void snap_check(kv_db *db, struct snap *sn, const struct model *m, int take)
{
    if (sn->s) {
        check_queries(db, sn->s, &sn->m, 8);
        kv_snapshot_release(db, sn->s);
        sn->s = NULL;
    }
    if (!take)
        return;
    EXPECT(kv_snapshot_new(db, &sn->s) == KV_OK, "snapshot: %s", kv_error_text());
    if (sn->m.cap < m->n) {
        free(sn->m.e);
        sn->m.cap = m->n;
        sn->m.e = malloc(m->n * sizeof *m->e);
        ck_assert_ptr_nonnull(sn->m.e);
    }
    if (m->n)
        memcpy(sn->m.e, m->e, m->n * sizeof *m->e);
    sn->m.n = m->n;
}

/* One run: `steps` operations of the shape's keys from seed, queries
 * every so often and at the end (after a flush, a full compaction and a
 * reopen). */
static void model_run(int shape, uint64_t seed, int steps)
{
    char path[600], name[32];
    snprintf(name, sizeof name, "db%llu", (unsigned long long)seed);
    test_path(path, sizeof path, name);
    rng = seed * 0x9E3779B97F4A7C15ull;
    run_shape = shape;
    run_keys = shape == DECIMAL ? 8000 : 12000;
    run_spread = seed & 1 ? 61728394506ull : 1; /* 2 * 8000 * it: 16 digits */
    kv_options o;
    uint64_t r = rnd();
    scan_options(&o, prefix_lens[r % 3], range_bits[(r >> 8) % 3]);
    kv_db *db = open_db(path, &o);
    struct model m = {0};
    struct snap sn = {0};
    int levels = 0;
    most_tables = 0;
    for (int step = 0; step < steps; step++) {
        snprintf(where_run, sizeof where_run,
                 "seed %llu step %d (prefix_len %zu, range_filter_bits %g, %zu live keys)",
                 (unsigned long long)seed, step, o.prefix_len, o.range_filter_bits, m.n);
        snprintf(where, sizeof where, "%s", where_run);
        unsigned c = (unsigned)(rnd() % 4000);
        if (c < 3) {
            if (c == 2)
                snap_check(db, &sn, &m, 0);
            db = maintain(db, path, &o, &m, c);
        } else if (c < 5) {
            snap_check(db, &sn, &m, 1);
        } else if (c < 12) {
            check_queries(db, NULL, &m, 8);
            int l = levels_used(db);
            levels = l > levels ? l : levels;
        } else {
            write_op(db, &m, (uint64_t)step);
        }
    }
    snprintf(where_run, sizeof where_run, "seed %llu at the end", (unsigned long long)seed);
    snprintf(where, sizeof where, "%s", where_run);
    for (unsigned c = 0; c < 3; c++) {
        if (c == 2)
            snap_check(db, &sn, &m, 0);
        db = maintain(db, path, &o, &m, c);
        check_queries(db, NULL, &m, 12);
    }
    ck_assert_msg(levels >= 2 && most_tables >= 8,
                  "seed %llu: %zu tables in %d levels at most, not many in several",
                  (unsigned long long)seed, most_tables, levels);
    check_counters(db);
    close_db(db);
    free(m.e);
    free(sn.m.e);
}

/* KV_SCANFILTER_SEED / KV_SCANFILTER_STEPS, or the defaults. */
static void model_runs(int shape, uint64_t seed0, int seeds, int steps)
{
    const char *e = getenv("KV_SCANFILTER_STEPS");
    if (e && *e)
        steps = atoi(e);
    e = getenv("KV_SCANFILTER_SEED");
    if (e && *e) {
        model_run(shape, strtoull(e, NULL, 10), steps);
        return;
    }
    for (int i = 0; i < seeds; i++)
        model_run(shape, seed0 + (uint64_t)i, steps);
}

START_TEST(decimal_keys)
{
    model_runs(DECIMAL, 100, 2, 60000);
}
END_TEST

START_TEST(binary_keys)
{
    model_runs(BINARY, 200, 2, 60000);
}
END_TEST

START_TEST(mixed_keys)
{
    model_runs(MIXED, 300, 2, 60000);
}
END_TEST

/* ---- the filters skip -------------------------------------------------------------------- */

/* A piece the skipping needs is there, or the test fails naming it. */
static void require(int there, const char *what)
{
    ck_assert_msg(there, "%s: %s", tcase_name(), what);
}

/* The range filter alone says "no" to some empty ranges (the skeleton's
 * placeholder said "maybe" to all). */
static int range_filter_is_real(void)
{
    kv_rfilter_builder *b;
    ck_assert_int_eq(kv_rfilter_builder_new(16, 7, &b), KV_OK);
    uint8_t k[16], h[16];
    for (uint64_t i = 0; i < 200; i++) {
        decimal_key(64 * i, k);
        ck_assert_int_eq(kv_rfilter_builder_add(b, k, 16), KV_OK);
    }
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(kv_rfilter_builder_finish(b, &buf, &len), KV_OK);
    kv_rfilter_builder_free(b);
    kv_rfilter *f;
    ck_assert_int_eq(kv_rfilter_decode(buf, len, &f), KV_OK);
    int no = 0;
    for (uint64_t i = 0; i < 200; i++) {
        decimal_key(64 * i + 1, k);
        decimal_key(64 * i + 17, h);
        no += !kv_rfilter_may_hold(f, k, 16, h, 16, NULL);
        decimal_key(64 * i, k); /* holds key 64i: never "no" */
        ck_assert(kv_rfilter_may_hold(f, k, 16, h, 16, NULL));
    }
    kv_rfilter_free(f);
    kv_free(buf);
    return no > 0;
}

/* Returns once the background thread has nothing to do. */
static void wait_idle(kv_db *db)
{
    for (;;) {
        struct kv_stats s;
        get_stats(db, &s);
        if (!s.compaction_pending && !s.compaction_running)
            return;
        nanosleep(&(struct timespec){0, 2000000}, NULL);
    }
}

/* Tables of db with a range filter (range_bits_per_key > 0), with a
 * prefix_len of plen, and in all; their levels in *levels. */
static void count_tables(kv_db *db, size_t plen, size_t *ranged, size_t *prefixed, size_t *all,
                         int *levels)
{
    kv_table_stats *ts;
    size_t n;
    ck_assert_int_eq(kv_table_stats_get(db, &ts, &n), KV_OK);
    unsigned mask = 0;
    *ranged = *prefixed = 0;
    for (size_t i = 0; i < n; i++) {
        *ranged += ts[i].range_bits_per_key > 0;
        *prefixed += plen && ts[i].prefix_len == plen;
        mask |= 1u << ts[i].level;
    }
    *all = n;
    *levels = __builtin_popcount(mask);
    kv_free(ts);
}

/* The store counts range queries (the skeleton's counted none): one
 * bounded seek_first. */
static int store_counts(kv_db *db)
{
    struct kv_stats s0, s1;
    get_stats(db, &s0);
    kv_iter *it;
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    ck_assert_int_eq(kv_iter_set_bounds(it, "0", 1, "1", 1), KV_OK);
    kv_iter_seek_first(it);
    ck_assert_int_eq(kv_iter_status(it), KV_OK);
    kv_iter_free(it);
    get_stats(db, &s1);
    return s1.range_queries > s0.range_queries;
}

static void shuffle(uint64_t *a, size_t n)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(rnd() % i);
        uint64_t t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

/* n decimal keys 64 * i in random order, 100-byte values, then a flush:
 * tables over several levels whose ranges overlap (level 0's span most of
 * the key space). The model gets them too when m is not NULL. */
static void fill_decimal(kv_db *db, struct model *m, size_t n)
{
    uint64_t *ids = malloc(n * sizeof *ids);
    ck_assert_ptr_nonnull(ids);
    for (size_t i = 0; i < n; i++)
        ids[i] = i;
    shuffle(ids, n);
    uint8_t k[16], v[100];
    for (size_t i = 0; i < n; i++) {
        decimal_key(64 * ids[i], k);
        for (size_t j = 0; j < sizeof v; j++)
            v[j] = (uint8_t)('a' + (ids[i] + j) % 26);
        put_kv(db, k, 16, v, sizeof v);
        if (m)
            m_put(m, k, 16, v, sizeof v);
    }
    free(ids);
    ck_assert_int_eq(kv_flush(db), KV_OK);
}

#define DELTA(a, b, f) ((unsigned long long)((b).f - (a).f))

/* Empty ranges of 1 to 48 numbers between decimal keys 64 apart, under
 * range_filter_bits 16: seek_first and seek_last find nothing, and most
 * tables are skipped without a block read; ranges holding one key find it. */
START_TEST(empty_ranges_skip_tables)
{
    rng = 53;
    kv_options o;
    scan_options(&o, 0, 16);
    o.l0_compaction_trigger = 4;
    o.max_bytes_for_level_base = 256 << 10;
    kv_db *db = open_db("db", &o);
    enum { N = 6000, Q = 1500, Q2 = 300 };
    fill_decimal(db, NULL, N);
    /* A settled tree: which levels hold the tables right after the fill
     * depends on how far the background jobs got, and every empty seek
     * is asked of each table its range meets wherever they are. */
    wait_idle(db);
    size_t ranged, prefixed, all;
    int levels;
    count_tables(db, 0, &ranged, &prefixed, &all, &levels);
    ck_assert_msg(all >= 8, "%zu tables in %d levels", all, levels);
    require(range_filter_is_real(), "the range filter never says no");
    require(ranged == all, "tables without range filters");
    require(store_counts(db), "the store counts no range query");
    struct kv_stats s0, s1, s2;
    get_stats(db, &s0);
    kv_iter *it;
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    uint8_t lo[16], hi[16];
    size_t kl;
    for (int q = 0; q < Q; q++) {
        uint64_t r = rnd(), i = r % N, w = 1 + (r >> 32) % 48;
        decimal_key(64 * i + 1, lo);
        decimal_key(64 * i + 1 + w, hi);
        ck_assert_int_eq(kv_iter_set_bounds(it, lo, 16, hi, 16), KV_OK);
        kv_iter_seek_first(it);
        ck_assert_msg(!kv_iter_valid(it), "empty range %llu + %llu: found a key",
                      (unsigned long long)(64 * i + 1), (unsigned long long)w);
        kv_iter_seek_last(it);
        ck_assert(!kv_iter_valid(it));
        ck_assert_int_eq(kv_iter_status(it), KV_OK);
    }
    get_stats(db, &s1);
    for (int q = 0; q < Q2; q++) { /* [64i, 64i + w): key 64i alone */
        uint64_t r = rnd(), i = r % N, w = 1 + (r >> 32) % 63;
        decimal_key(64 * i, lo);
        decimal_key(64 * i + w, hi);
        ck_assert_int_eq(kv_iter_set_bounds(it, lo, 16, hi, 16), KV_OK);
        kv_iter_seek_first(it);
        ck_assert_msg(kv_iter_valid(it), "range %llu + %llu: key %llu not found",
                      (unsigned long long)(64 * i), (unsigned long long)w,
                      (unsigned long long)(64 * i));
        ck_assert_mem_eq(kv_iter_key(it, &kl), lo, 16);
        kv_iter_next(it);
        ck_assert(!kv_iter_valid(it));
    }
    ck_assert_int_eq(kv_iter_status(it), KV_OK);
    kv_iter_free(it);
    get_stats(db, &s2);
    unsigned long long checked = DELTA(s0, s1, range_tables_checked),
                       skips = DELTA(s0, s1, range_filter_skips),
                       read = DELTA(s0, s1, range_tables_read);
    ck_assert_uint_eq(DELTA(s0, s1, range_queries), 2 * Q);
    /* Each empty seek is asked of every table its range meets: at least
     * one, but for a range in the gap between two tables of one level
     * (a settled tree may have a single level: about 1 range in 600). */
    ck_assert_msg(checked * 100 >= 2 * Q * 95, "%llu tables checked in %d empty seeks", checked,
                  2 * Q);
    ck_assert_msg(skips * 10 >= checked * 9, "%llu of %llu tables skipped", skips, checked);
    ck_assert_msg(read * 10 <= checked, "%llu of %llu tables read", read, checked);
    ck_assert_msg(read <= (unsigned long long)(2 * Q) / 10, "%llu tables read in %d seeks", read,
                  2 * Q);
    ck_assert_uint_le(DELTA(s0, s1, range_filter_false_positives), read);
    ck_assert_uint_eq(DELTA(s0, s1, prefix_filter_skips), 0);
    /* ranges with a key: counted, and the table holding it read */
    ck_assert_uint_eq(DELTA(s1, s2, range_queries), Q2);
    ck_assert_uint_ge(DELTA(s1, s2, range_tables_read), Q2);
    ck_assert_uint_gt(s2.range_filter_bytes, 0);
    close_db(db);
}
END_TEST

/* Key (device d, minute t): 8 digits each, so that prefix_len 8 is the
 * device. */
static void dev_key(uint64_t d, uint64_t t, uint8_t *k)
{
    char b[40];
    snprintf(b, sizeof b, "%08llu%08llu", (unsigned long long)d, (unsigned long long)t);
    memcpy(k, b, 16);
}

/* The keys of device d: the prefix scan finds minutes 0 .. T-1 in order. */
static void expect_device(kv_iter *it, uint64_t d, uint64_t from, uint64_t to)
{
    uint8_t k[16];
    size_t kl;
    for (uint64_t t = from; t < to; t++, kv_iter_next(it)) {
        dev_key(d, t, k);
        ck_assert_msg(kv_iter_valid(it), "device %llu minute %llu not found", (unsigned long long)d,
                      (unsigned long long)t);
        kl = 0;
        const void *got = kv_iter_key(it, &kl);
        ck_assert_uint_eq(kl, 16);
        ck_assert_mem_eq(got, k, 16);
    }
    ck_assert_msg(!kv_iter_valid(it), "device %llu: a key past minute %llu", (unsigned long long)d,
                  (unsigned long long)to);
    ck_assert_int_eq(kv_iter_status(it), KV_OK);
}

/* The database of absent_prefixes_skip_tables reopened under prefix_len 4:
 * the tables written under 8 are never asked; new tables under 4 are.
 * Closes db. */
static void other_prefix_len(kv_db *db)
{
    enum { D = 200, T = 30, Q2 = 100 };
    uint8_t k[16], v[100];
    memset(v, 'v', sizeof v);
    struct kv_stats s0, s1, s2;
    size_t ranged, prefixed, all;
    int levels;
    kv_iter *it;
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    get_stats(db, &s0);
    for (int q = 0; q < Q2; q++) {
        uint64_t d = 2 * (rnd() % D) + 1;
        dev_key(d, 0, k);
        ck_assert_int_eq(kv_iter_seek_prefix(it, k, 8), KV_OK);
        ck_assert(!kv_iter_valid(it));
        dev_key(d - 1, 0, k);
        ck_assert_int_eq(kv_iter_seek_prefix(it, k, 8), KV_OK);
        expect_device(it, d - 1, 0, T);
    }
    get_stats(db, &s1);
    ck_assert_uint_eq(DELTA(s0, s1, prefix_filter_skips), 0);
    /* new tables under 4: devices 1000xxxx and 3000xxxx, none in 2000xxxx (the old
     * tables, 0000xxxx, lie below the query) */
    for (uint64_t t = 0; t < 600; t++) {
        dev_key(10000000 + t, t, k);
        put_kv(db, k, 16, v, sizeof v);
        dev_key(30000000 + t, t, k);
        put_kv(db, k, 16, v, sizeof v);
    }
    ck_assert_int_eq(kv_flush(db), KV_OK);
    count_tables(db, 4, &ranged, &prefixed, &all, &levels);
    require(prefixed > 0, "tables without prefixes (prefix_len 4)");
    kv_iter_free(it); /* an iterator reads what was there when it was made */
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    get_stats(db, &s1);
    for (int q = 0; q < 50; q++) {
        ck_assert_int_eq(kv_iter_seek_prefix(it, "2000", 4), KV_OK);
        ck_assert(!kv_iter_valid(it));
    }
    get_stats(db, &s2);
    ck_assert_uint_ge(DELTA(s1, s2, prefix_filter_skips), 45);
    ck_assert_int_eq(kv_iter_seek_prefix(it, "1000", 4), KV_OK);
    for (uint64_t t = 0; t < 600; t++, kv_iter_next(it)) {
        dev_key(10000000 + t, t, k);
        ck_assert(kv_iter_valid(it));
        ck_assert_mem_eq(kv_iter_key(it, &(size_t){0}), k, 16);
    }
    ck_assert(!kv_iter_valid(it));
    ck_assert_int_eq(kv_iter_status(it), KV_OK);
    kv_iter_free(it);
    close_db(db);
}

/* Seeks of absent prefixes (a device not written) under prefix_len 8, by
 * kv_iter_seek_prefix and by bounds sharing the prefix, find nothing and
 * skip most tables by the prefix filter; present ones find their keys;
 * shorter prefixes ask no prefix filter; after a reopen with prefix_len 4
 * the tables written under 8 are never asked, and new ones under 4 are. */
START_TEST(absent_prefixes_skip_tables)
{
    rng = 54;
    kv_options o;
    scan_options(&o, 8, 0);
    o.l0_compaction_trigger = 4;
    o.max_bytes_for_level_base = 256 << 10;
    kv_db *db = open_db("db", &o);
    enum { D = 200, T = 30, Q = 400, Q2 = 100 };
    uint64_t *ids = malloc(D * T * sizeof *ids);
    ck_assert_ptr_nonnull(ids);
    for (size_t i = 0; i < D * T; i++)
        ids[i] = i;
    shuffle(ids, D * T);
    uint8_t k[16], h[16], v[100];
    memset(v, 'v', sizeof v);
    for (size_t i = 0; i < D * T; i++) {
        dev_key(2 * (ids[i] / T), ids[i] % T, k);
        put_kv(db, k, 16, v, sizeof v);
    }
    free(ids);
    ck_assert_int_eq(kv_flush(db), KV_OK);
    size_t ranged, prefixed, all;
    int levels;
    count_tables(db, 8, &ranged, &prefixed, &all, &levels);
    ck_assert_msg(all >= 8, "%zu tables", all);
    require(prefixed == all, "tables without prefixes");
    require(store_counts(db), "the store counts no range query");
    struct kv_stats s0, s1, s2, s3;
    get_stats(db, &s0);
    kv_iter *it;
    ck_assert_int_eq(kv_iter_new(db, NULL, &it), KV_OK);
    for (int q = 0; q < Q; q++) { /* an odd device: absent */
        uint64_t d = 2 * (rnd() % D) + 1;
        dev_key(d, 3, k);
        dev_key(d, 9, h);
        ck_assert_int_eq(kv_iter_seek_prefix(it, k, 8), KV_OK);
        ck_assert_msg(!kv_iter_valid(it), "absent device %llu found", (unsigned long long)d);
        ck_assert_int_eq(kv_iter_set_bounds(it, k, 16, h, 16), KV_OK);
        kv_iter_seek_first(it);
        ck_assert(!kv_iter_valid(it));
        ck_assert_int_eq(kv_iter_status(it), KV_OK);
    }
    get_stats(db, &s1);
    for (int q = 0; q < Q2; q++) { /* an even device: its 30 minutes */
        uint64_t d = 2 * (rnd() % D);
        dev_key(d, 0, k);
        ck_assert_int_eq(kv_iter_seek_prefix(it, k, 8), KV_OK);
        expect_device(it, d, 0, T);
        dev_key(d, 3, k);
        dev_key(d, 9, h);
        ck_assert_int_eq(kv_iter_set_bounds(it, k, 16, h, 16), KV_OK);
        kv_iter_seek_first(it);
        expect_device(it, d, 3, 9);
    }
    get_stats(db, &s2);
    for (size_t plen = 0; plen < 8; plen++) { /* shorter than prefix_len: no prefix filter */
        dev_key(0, 0, k);
        ck_assert_int_eq(kv_iter_seek_prefix(it, k, plen), KV_OK);
        ck_assert(kv_iter_valid(it));
        ck_assert_mem_eq(kv_iter_key(it, &(size_t){0}), k, 16);
    }
    get_stats(db, &s3);
    unsigned long long checked = DELTA(s0, s1, range_tables_checked),
                       skips = DELTA(s0, s1, prefix_filter_skips);
    ck_assert_uint_eq(DELTA(s0, s1, range_queries), 2 * Q);
    ck_assert_msg(checked >= 2 * Q, "%llu tables checked in %d seeks", checked, 2 * Q);
    ck_assert_msg(skips * 10 >= checked * 8, "%llu of %llu tables skipped", skips, checked);
    ck_assert_uint_le(DELTA(s0, s1, range_tables_read) * 5, checked);
    ck_assert_uint_eq(DELTA(s0, s1, range_filter_skips), 0);
    ck_assert_uint_eq(DELTA(s1, s2, range_queries), 2 * Q2);
    ck_assert_uint_eq(DELTA(s2, s3, prefix_filter_skips), 0);
    kv_iter_free(it);

    o.prefix_len = 4;
    other_prefix_len(reopen_db(db, "db", &o));
}
END_TEST

/* ---- kv_explain_seek ------------------------------------------------------------------- */

/* Table t's key range meets [lo, hi) (NULL: open). */
static int meets(const kv_table_stats *t, const uint8_t *lo, const uint8_t *hi)
{
    if (hi && kcmp(t->smallest, t->smallest_len, hi, 16) >= 0)
        return 0;
    return !lo || kcmp(t->largest, t->largest_len, lo, 16) >= 0;
}

/* Checks one explained seek of [lo, hi) against the model and the tables
 * ts[0, nt): the first key; each table step's table live and meeting the
 * bounds, a skip touching nothing, a false positive a "maybe" that found
 * nothing; a step for each level-0 table meeting the bounds and for each
 * deeper level holding one. Adds the empty query's table steps and its
 * range filter negatives to *steps and *negatives. */
static void check_explained(const kv_explain *x, const struct model *m, const kv_table_stats *ts,
                            size_t nt, const uint8_t *lo, const uint8_t *hi, size_t *steps,
                            size_t *negatives)
{
    size_t first = lo ? m_lower(m, lo, 16) : 0, end = hi ? m_lower(m, hi, 16) : m->n;
    char a[100], b[100];
    if (first < end) {
        EXPECT(x->result == KV_OK, "result %d, the model has %s", x->result,
               hex(a, sizeof a, m->e[first].k, m->e[first].klen));
        EXPECT(x->value_len == m->e[first].klen &&
                   memcmp(x->value, m->e[first].k, x->value_len) == 0,
               "first key %s, the model's %s", hex(a, sizeof a, x->value, x->value_len),
               hex(b, sizeof b, m->e[first].k, m->e[first].klen));
    } else {
        EXPECT(x->result == KV_NOTFOUND, "result %d in an empty range", x->result);
    }
    EXPECT(x->live_tables == nt, "%zu live tables, not %zu", x->live_tables, nt);
    unsigned char seen[4096] = {0};
    unsigned seen_levels = 0;
    ck_assert_uint_le(nt, sizeof seen);
    for (size_t i = 0; i < x->nsteps; i++) {
        const kv_explain_step *s = &x->steps[i];
        if (s->where != KV_EXPLAIN_TABLE)
            continue;
        size_t j = 0;
        while (j < nt && ts[j].number != s->number)
            j++;
        EXPECT(j < nt && ts[j].level == s->level, "step %zu: table %llu not live at level %u", i,
               (unsigned long long)s->number, s->level);
        EXPECT(meets(&ts[j], lo, hi), "step %zu: table %llu outside the bounds", i,
               (unsigned long long)s->number);
        seen[j] = 1;
        seen_levels |= 1u << s->level;
        int negative = s->filter == KV_EXPLAIN_FILTER_NEGATIVE ||
                       s->range_filter == KV_EXPLAIN_FILTER_NEGATIVE;
        EXPECT(!negative || (s->block == KV_EXPLAIN_BLOCK_NONE && s->outcome == KV_EXPLAIN_ABSENT &&
                             !s->false_positive),
               "step %zu: table %llu skipped, yet block %d outcome %d", i,
               (unsigned long long)s->number, s->block, s->outcome);
        EXPECT(!s->false_positive || (s->outcome == KV_EXPLAIN_ABSENT &&
                                      (s->filter == KV_EXPLAIN_FILTER_MAYBE ||
                                       s->range_filter == KV_EXPLAIN_FILTER_MAYBE)),
               "step %zu: a false positive of no filter's maybe", i);
        if (!lo || !hi)
            EXPECT(s->range_filter == KV_EXPLAIN_FILTER_NOT_ASKED,
                   "step %zu: the range filter asked with an open bound", i);
        else if (ts[j].range_bits_per_key > 0)
            EXPECT(s->range_filter != KV_EXPLAIN_FILTER_NOT_ASKED && s->range_expected_fpr >= 0 &&
                       s->range_expected_fpr <= 1,
                   "step %zu: table %llu's range filter: %d, expected FPR %g", i,
                   (unsigned long long)s->number, s->range_filter, s->range_expected_fpr);
        if (first == end && lo && hi) {
            ++*steps;
            *negatives += s->range_filter == KV_EXPLAIN_FILTER_NEGATIVE;
        }
    }
    for (size_t j = 0; j < nt; j++)
        if (meets(&ts[j], lo, hi))
            EXPECT(ts[j].level ? (seen_levels >> ts[j].level) & 1 : seen[j],
                   "table %llu at level %u meets the bounds, and no step shows %s",
                   (unsigned long long)ts[j].number, ts[j].level, ts[j].level ? "its level" : "it");
}

/* kv_explain_seek over random bounds (empty ranges between keys, ranges
 * with keys, one bound, none) against the model and the live tables;
 * under range_filter_bits 16 the empty ranges' tables are mostly skipped. */
START_TEST(explain_seek_agrees)
{
    rng = 55;
    kv_options o;
    scan_options(&o, 0, 16);
    o.l0_compaction_trigger = 4;
    o.max_bytes_for_level_base = 256 << 10;
    kv_db *db = open_db("db", &o);
    struct model m = {0};
    enum { N = 4000, Q = 300 };
    fill_decimal(db, &m, N);
    uint8_t k[16], h[16];
    for (int i = 0; i < 200; i++) { /* tombstones, and keys 64i + 32, in the memtable */
        decimal_key(64 * (rnd() % N), k);
        ck_assert_int_eq(kv_delete(db, k, 16), KV_OK);
        m_del(&m, k, 16);
        decimal_key(64 * (rnd() % N) + 32, k);
        put_kv(db, k, 16, "new", 3);
        m_put(&m, k, 16, (const uint8_t *)"new", 3);
    }
    wait_idle(db);
    kv_explain *x;
    int rc = kv_explain_seek(db, "0", 1, "1", 1, &x);
    ck_assert_msg(rc == KV_OK, "%s", kv_error_text());
    kv_free(x);
    ck_assert_int_eq(kv_explain_seek(db, "1", 1, "0", 1, &x), KV_EINVAL);
    ck_assert_ptr_null(x);
    require(range_filter_is_real(), "the range filter never says no");
    require(store_counts(db), "the store counts no range query");
    kv_table_stats *ts;
    size_t nt, ranged = 0, steps = 0, negatives = 0, both = 0;
    ck_assert_int_eq(kv_table_stats_get(db, &ts, &nt), KV_OK);
    for (size_t j = 0; j < nt; j++)
        ranged += ts[j].range_bits_per_key > 0;
    require(ranged == nt, "tables without range filters");
    struct kv_stats s0, s1;
    get_stats(db, &s0);
    for (int q = 0; q < Q; q++) {
        uint64_t r = rnd(), i = (r >> 8) % N, kind = r % 10, w = 1 + (r >> 32) % 30;
        decimal_key(kind < 5 ? 64 * i + 33 : 64 * i, k);
        decimal_key(kind < 5 ? 64 * i + 33 + w : 64 * i + w * 43, h);
        const uint8_t *lo = kind == 9 && (r >> 40) & 1 ? NULL : k, *hi = kind == 8 ? NULL : h;
        hi = kind == 9 && (r >> 41) & 1 ? NULL : hi;
        snprintf(where, sizeof where, "explained seek %d: [%s, %s)", q,
                 lo ? hex((char[40]){0}, 40, lo, 16) : "none",
                 hi ? hex((char[40]){0}, 40, hi, 16) : "none");
        rc = kv_explain_seek(db, lo, lo ? 16 : 0, hi, hi ? 16 : 0, &x);
        EXPECT(rc == KV_OK, "rc %d: %s", rc, kv_error_text());
        check_explained(x, &m, ts, nt, lo, hi, &steps, &negatives);
        both += lo && hi;
        kv_free(x);
    }
    get_stats(db, &s1);
    kv_free(ts);
    ck_assert_uint_eq(DELTA(s0, s1, range_queries), both);
    ck_assert_msg(steps > 0 && negatives * 10 >= steps * 9,
                  "%zu of %zu tables of empty ranges skipped", negatives, steps);
    close_db(db);
    free(m.e);
}
END_TEST

/* ---- option values ----------------------------------------------------------------------- */

START_TEST(option_values)
{
    char p[600];
    test_path(p, sizeof p, "db");
    kv_options o;
    kv_db *db;
    const double bad[] = {-1, 1, 3.99, 64.5, 1000, 0.0 / 0.0};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kv_options_init(&o);
        o.range_filter_bits = bad[i];
        ck_assert_int_eq(kv_open(p, &o, &db), KV_EINVAL);
        ck_assert_msg(strstr(kv_error_text(), "range_filter_bits"), "%s", kv_error_text());
    }
    kv_options_init(&o);
    o.prefix_len = 4;
    o.bloom_bits_per_key = 0;
    ck_assert_int_eq(kv_open(p, &o, &db), KV_EINVAL);
    ck_assert_msg(strstr(kv_error_text(), "prefix_len"), "%s", kv_error_text());
    kv_options_init(&o);
    o.prefix_len = 65537;
    ck_assert_int_eq(kv_open(p, &o, &db), KV_EINVAL);
    ck_assert_msg(strstr(kv_error_text(), "prefix_len"), "%s", kv_error_text());
    /* the edges open, and a database takes any of them at each open */
    const double good[] = {0, 4, 16, 64};
    const size_t plens[] = {65536, 1, 0, 16};
    for (size_t i = 0; i < 4; i++) {
        kv_options_init(&o);
        o.range_filter_bits = good[i];
        o.prefix_len = plens[i];
        db = open_db(p, &o);
        put_kv(db, &(uint8_t){(uint8_t)i}, 1, "v", 1);
        ck_assert_int_eq(kv_flush(db), KV_OK);
        for (size_t j = 0; j <= i; j++)
            expect_value(db, &(uint8_t){(uint8_t)j}, 1, "v", 1);
        close_db(db);
    }
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("scanfilter");
    TCase *t = test_tcase(s, "decimal", 600, 1);
    tcase_add_test(t, decimal_keys);
    t = test_tcase(s, "binary", 600, 1);
    tcase_add_test(t, binary_keys);
    t = test_tcase(s, "mixed", 600, 1);
    tcase_add_test(t, mixed_keys);
    t = test_tcase(s, "skips", 600, 1);
    tcase_add_test(t, empty_ranges_skip_tables);
    tcase_add_test(t, absent_prefixes_skip_tables);
    tcase_add_test(t, explain_seek_agrees);
    t = test_tcase(s, "options", 600, 1);
    tcase_add_test(t, option_values);
    return s;
}
