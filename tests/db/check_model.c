/* check_model.c - range deletes, merges, snapshots and every way of reading,
 * through kv.h only, checked against an in-memory model after a random
 * sequence of operations: puts, deletes, range deletes (overlapping one
 * another and many keys; begin == end; end before begin, refused and
 * changing nothing), merges under an append operator (existing "," operands,
 * so a misordered, lost or repeated operand shows), batches of all of them,
 * flushes, whole and partial compactions, close and reopen, snapshots taken
 * and released. The reads compared with the model at that moment (or at the
 * snapshot): kv_get, kv_get_into (exact, larger and too small a buffer),
 * kv_get_at, kv_multi_get, kv_explain_get, iterators forward and backward
 * with bounds, seeks and direction changes, and prefix seeks.
 *
 * Each run is a pure function of its seed; a failure names the seed, the
 * operation's index and the last operations done. Short mode (ctest): a few
 * seeds of a few thousand operations each. KV_TEST_LONG=1 (CI's
 * AddressSanitizer run): more seeds, ten times the operations.
 * KV_MODEL_SEED=<n> runs that seed alone and KV_MODEL_STEPS=<n> sets the
 * operations per seed, to replay a failure. */
#define _XOPEN_SOURCE 700
#include <check.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kv/kv.h>

#include "fixture.h"

/* ---- the key space ------------------------------------------------------------------- */

/* 161 keys: id 0 is the empty key; id i > 0 is the decimal digits of
 * (i - 1) / 4 followed by one of "", "\0", "\xff", "\0\xff". Keys are then
 * prefixes of one another, hold zero and 0xff bytes and differ in length,
 * and a random range covers a few or most of them. */
#define NKEYS 161u
#define KEY_CAP 16

static uint8_t key_bytes[NKEYS][KEY_CAP];
static size_t key_len[NKEYS];

static void keys_init(void)
{
    static const char *const tails[4] = {"", "\0", "\xff", "\0\xff"};
    static const size_t tail_len[4] = {0, 1, 1, 2};
    key_len[0] = 0;
    for (uint32_t id = 1; id < NKEYS; id++) {
        uint32_t q = (id - 1) / 4, t = (id - 1) % 4;
        int n = snprintf((char *)key_bytes[id], KEY_CAP, "%u", q);
        memcpy(key_bytes[id] + n, tails[t], tail_len[t]);
        key_len[id] = (size_t)n + tail_len[t];
    }
}

static int bytewise(const void *a, size_t al, const void *b, size_t bl)
{
    size_t n = al < bl ? al : bl;
    int c = n ? memcmp(a, b, n) : 0;
    if (c)
        return c;
    return al < bl ? -1 : al > bl;
}

/* The custom order of the second variant: bytewise reversed. */
static int reverse_compare(void *ctx, const void *a, size_t al, const void *b, size_t bl)
{
    (void)ctx;
    return -bytewise(a, al, b, bl);
}

static const kv_comparator reverse_cmp = {"check_model.reverse", reverse_compare, NULL};

/* ---- the append merge operator --------------------------------------------------------
 * full_merge: existing "," op1 "," op2 ... (no existing: op1 "," op2 ...);
 * partial_merge: op1 "," op2 ..., declining when the operands exceed 300
 * bytes so both paths run. The callbacks run on any thread: what they find
 * wrong goes to op_anomaly, which the test checks. */

static atomic_uint op_anomaly;
static atomic_ulong op_full_calls, op_partial_calls;

static int append_full(void *state, const void *key, size_t klen, const void *existing,
                       size_t existing_len, const void *const *ops, const size_t *lens, size_t n,
                       void **result, size_t *result_len)
{
    (void)state, (void)key, (void)klen;
    if (n == 0 || (existing == NULL && existing_len != 0))
        atomic_fetch_add(&op_anomaly, 1);
    atomic_fetch_add(&op_full_calls, 1);
    size_t total = existing ? existing_len + 1 : 0;
    for (size_t i = 0; i < n; i++)
        total += lens[i] + 1;
    char *r = malloc(total + 1);
    if (!r)
        return -1;
    size_t p = 0;
    if (existing) {
        if (existing_len)
            memcpy(r, existing, existing_len);
        p = existing_len;
    }
    for (size_t i = 0; i < n; i++) {
        if (existing || i > 0)
            r[p++] = ',';
        if (lens[i])
            memcpy(r + p, ops[i], lens[i]);
        p += lens[i];
    }
    *result = r;
    *result_len = p;
    return 0;
}

static int append_partial(void *state, const void *key, size_t klen, const void *const *ops,
                          const size_t *lens, size_t n, void **result, size_t *result_len)
{
    (void)state, (void)key, (void)klen;
    if (n < 2)
        atomic_fetch_add(&op_anomaly, 1);
    atomic_fetch_add(&op_partial_calls, 1);
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += lens[i] + 1;
    if (total > 300)
        return 1; /* declined: the operands stay as they are */
    char *r = malloc(total + 1);
    if (!r)
        return -1;
    size_t p = 0;
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            r[p++] = ',';
        if (lens[i])
            memcpy(r + p, ops[i], lens[i]);
        p += lens[i];
    }
    *result = r;
    *result_len = p;
    return 0;
}

static const kv_merge_operator append_op = {"check_model.append", NULL, append_full,
                                            append_partial};

/* ---- the model ---------------------------------------------------------------------- */

typedef struct {
    int present;
    size_t len;
    char *v; /* malloc'd, len bytes (NULL when len 0) */
} slot;

#define MAX_SNAPS 3
#define RING 24

typedef struct {
    kv_snapshot *snap;
    slot *copy; /* the model when it was taken */
    uint64_t taken_at;
} msnap;

typedef struct {
    const kv_comparator *cmp; /* NULL: bytewise */
    int bytewise_db;
    uint64_t seed, rng, op;
    char path[600];
    kv_options o;
    kv_db *db;
    slot cur[NKEYS];
    uint32_t order[NKEYS]; /* ids in the database's key order */
    msnap snaps[MAX_SNAPS];
    size_t nsnaps;
    char ring[RING][200]; /* the last operations, for the failure message */
    uint64_t ring_n;
    uint64_t n_rdel, n_merge, n_flush, n_compact, n_reopen, n_checks;
    uint64_t st_flushes, st_compactions, st_range_deletes, st_merges, st_operands_read,
        st_operands_compacted, st_rdel_dropped; /* kv_stats, summed over the opens */
} model;

static model M;

static int mcmp(const void *a, size_t al, const void *b, size_t bl)
{
    return M.cmp ? M.cmp->compare(M.cmp->ctx, a, al, b, bl) : bytewise(a, al, b, bl);
}

static uint64_t rnd(void)
{
    M.rng = splitmix(M.rng);
    return M.rng;
}

static uint32_t below(uint32_t n)
{
    return (uint32_t)(rnd() % n);
}

static const char *esc(const void *p, size_t n, char *out, size_t cap)
{
    const uint8_t *s = p;
    size_t o = 0;
    for (size_t i = 0; i < n && o + 5 < cap; i++) {
        if (s[i] >= 0x20 && s[i] < 0x7f && s[i] != '\\' && s[i] != '"')
            out[o++] = (char)s[i];
        else
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", s[i]);
    }
    if (o + 5 >= cap && n) {
        memcpy(out + (o > cap - 5 ? cap - 5 : o), "...", 4);
        return out;
    }
    out[o] = 0;
    return out;
}

static void note(const char *fmt, ...)
{
    char *r = M.ring[M.ring_n++ % RING];
    int n = snprintf(r, 200, "op %llu: ", (unsigned long long)M.op);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r + n, 200 - (size_t)n, fmt, ap);
    va_end(ap);
}

static void model_fail(int line, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void model_fail(int line, const char *fmt, ...)
{
    char msg[1500];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "model%s: seed %llu, op %llu: the last operations:\n",
            M.cmp ? " (reverse order)" : "", (unsigned long long)M.seed, (unsigned long long)M.op);
    uint64_t from = M.ring_n > RING ? M.ring_n - RING : 0;
    for (uint64_t i = from; i < M.ring_n; i++)
        fprintf(stderr, "  %s\n", M.ring[i % RING]);
    ck_abort_msg("model%s: seed %llu, op %llu (line %d): %s", M.cmp ? " (reverse order)" : "",
                 (unsigned long long)M.seed, (unsigned long long)M.op, line, msg);
}

#define MCHECK(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond))                                                                               \
            model_fail(__LINE__, __VA_ARGS__);                                                     \
    } while (0)

#define MOK(call)                                                                                  \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        MCHECK(rc_ == KV_OK, "%s: %s (%s)", #call, kv_strerror(rc_), kv_error_text());             \
    } while (0)

static void slot_set(slot *s, const void *v, size_t n)
{
    char *c = NULL;
    if (n) {
        c = malloc(n);
        ck_assert_ptr_nonnull(c);
        memcpy(c, v, n);
    }
    free(s->v);
    s->v = c;
    s->len = n;
    s->present = 1;
}

static void slot_clear(slot *s)
{
    free(s->v);
    s->v = NULL;
    s->len = 0;
    s->present = 0;
}

/* What the append operator makes of s and one more operand. */
static void slot_merge(slot *s, const void *op, size_t n)
{
    size_t total = (s->present ? s->len + 1 : 0) + n;
    char *c = malloc(total + 1);
    ck_assert_ptr_nonnull(c);
    size_t p = 0;
    if (s->present) {
        if (s->len)
            memcpy(c, s->v, s->len);
        p = s->len;
        c[p++] = ',';
    }
    if (n)
        memcpy(c + p, op, n);
    free(s->v);
    s->v = c;
    s->len = total;
    s->present = 1;
}

static slot *slots_copy(const slot *from)
{
    slot *c = calloc(NKEYS, sizeof *c);
    ck_assert_ptr_nonnull(c);
    for (uint32_t i = 0; i < NKEYS; i++)
        if (from[i].present)
            slot_set(&c[i], from[i].v, from[i].len);
    return c;
}

static void slots_free(slot *s, int whole)
{
    for (uint32_t i = 0; i < NKEYS; i++)
        slot_clear(&s[i]);
    if (whole)
        free(s);
}

/* Range delete [b, e) in the model (the caller has checked b <= e). */
static void model_range_delete(slot *s, const void *b, size_t bl, const void *e, size_t el)
{
    for (uint32_t id = 0; id < NKEYS; id++)
        if (mcmp(key_bytes[id], key_len[id], b, bl) >= 0 &&
            mcmp(key_bytes[id], key_len[id], e, el) < 0)
            slot_clear(&s[id]);
}

static int order_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return mcmp(key_bytes[x], key_len[x], key_bytes[y], key_len[y]);
}

/* ---- values, operands and range ends -------------------------------------------------- */

/* A put's value: "p<op>." and 0..60 bytes (one in eight: 200..700, some into
 * blob files), empty one time in twenty. */
static size_t make_value(uint8_t *v)
{
    uint32_t r = below(20);
    if (r == 0)
        return 0;
    size_t n = (size_t)snprintf((char *)v, 32, "p%llu.", (unsigned long long)M.op);
    size_t pad = r < 3 ? 200 + below(500) : below(61);
    uint64_t x = rnd();
    for (size_t i = 0; i < pad; i++) {
        x = splitmix(x);
        v[n + i] = (uint8_t)(x >> 56); /* any byte, ',' and NUL included */
    }
    return n + pad;
}

static size_t make_operand(uint8_t *v)
{
    return (size_t)snprintf((char *)v, 32, "m%llu", (unsigned long long)M.op);
}

/* A range end: a key of the space, a key and one more byte, the empty key,
 * or "\xff\xff\xff" (past every key bytewise). */
static size_t make_end(uint8_t *k)
{
    uint32_t r = below(100);
    if (r < 60) {
        uint32_t id = below(NKEYS);
        memcpy(k, key_bytes[id], key_len[id]);
        return key_len[id];
    }
    if (r < 88) {
        static const uint8_t extra[4] = {0x00, 0x01, 0x30, 0xff};
        uint32_t id = below(NKEYS);
        memcpy(k, key_bytes[id], key_len[id]);
        k[key_len[id]] = extra[below(4)];
        return key_len[id] + 1;
    }
    if (r < 94)
        return 0;
    memset(k, 0xff, 3);
    return 3;
}

/* A range: mostly short (ends a few keys apart in the order), sometimes
 * anything. Returns how b and e compare (the caller decides what to do with
 * an inverted one). */
static int make_range(uint8_t *b, size_t *bl, uint8_t *e, size_t *el)
{
    if (below(3) == 0) {
        *bl = make_end(b);
        *el = make_end(e);
    } else {
        uint32_t r = below(NKEYS), s = r + 1 + below(12);
        uint32_t x = M.order[r], y = M.order[s < NKEYS ? s : NKEYS - 1];
        memcpy(b, key_bytes[x], key_len[x]);
        *bl = key_len[x];
        memcpy(e, key_bytes[y], key_len[y]);
        *el = key_len[y];
        if (s >= NKEYS) { /* past the last key */
            if (M.cmp) {
                *el = 0; /* the empty key is the last in reverse order */
            } else {
                memset(e, 0xff, 3);
                *el = 3;
            }
        }
    }
    return mcmp(b, *bl, e, *el);
}

/* ---- reads checked against the model --------------------------------------------------- */

static const char *snap_name(const msnap *s, char *buf, size_t n)
{
    if (!s)
        return "now";
    snprintf(buf, n, "the snapshot of op %llu", (unsigned long long)s->taken_at);
    return buf;
}

static void check_get(const msnap *sn, uint32_t id)
{
    const slot *m = sn ? &sn->copy[id] : &M.cur[id];
    char kb[80], vb[200], wb[200], sb[64];
    void *v = NULL;
    size_t vl = 0;
    int rc = sn ? kv_get_at(M.db, sn->snap, key_bytes[id], key_len[id], &v, &vl)
                : kv_get(M.db, key_bytes[id], key_len[id], &v, &vl);
    if (m->present) {
        MCHECK(rc == KV_OK, "get \"%s\" at %s: %s (%s), expected \"%s\"",
               esc(key_bytes[id], key_len[id], kb, sizeof kb), snap_name(sn, sb, sizeof sb),
               kv_strerror(rc), rc == KV_NOTFOUND ? "" : kv_error_text(),
               esc(m->v, m->len, wb, sizeof wb));
        MCHECK(vl == m->len && (vl == 0 || memcmp(v, m->v, vl) == 0),
               "get \"%s\" at %s: \"%s\" (%zu bytes), expected \"%s\" (%zu bytes)",
               esc(key_bytes[id], key_len[id], kb, sizeof kb), snap_name(sn, sb, sizeof sb),
               esc(v, vl, vb, sizeof vb), vl, esc(m->v, m->len, wb, sizeof wb), m->len);
        MCHECK(v != NULL, "get: NULL value on KV_OK");
        kv_free(v);
    } else {
        MCHECK(rc == KV_NOTFOUND, "get \"%s\" at %s: %s \"%s\", expected KV_NOTFOUND",
               esc(key_bytes[id], key_len[id], kb, sizeof kb), snap_name(sn, sb, sizeof sb),
               kv_strerror(rc), rc == KV_OK ? esc(v, vl, vb, sizeof vb) : kv_error_text());
    }
    if (sn || below(8) != 0)
        return;
    /* kv_explain_get answers as kv_get, and names the step that decided. */
    kv_explain *x = NULL;
    MOK(kv_explain_get(M.db, key_bytes[id], key_len[id], &x));
    int want = m->present ? KV_OK : KV_NOTFOUND;
    MCHECK(x->result == want &&
               (!m->present ||
                (x->value_len == m->len && (m->len == 0 || memcmp(x->value, m->v, m->len) == 0))),
           "explain \"%s\": %s \"%s\", expected %s \"%s\"",
           esc(key_bytes[id], key_len[id], kb, sizeof kb), kv_strerror(x->result),
           x->result == KV_OK ? esc(x->value, x->value_len, vb, sizeof vb) : "", kv_strerror(want),
           m->present ? esc(m->v, m->len, wb, sizeof wb) : "");
    MCHECK(x->nsteps > 0 || !m->present, "explain \"%s\": found with no step",
           esc(key_bytes[id], key_len[id], kb, sizeof kb));
    kv_free(x);
}

/* kv_get_into with a buffer of the exact size, one byte short (KV_ERANGE,
 * the needed size, no byte written), a larger one, or none. */
static void check_get_into(const msnap *sn, uint32_t id)
{
    const slot *m = sn ? &sn->copy[id] : &M.cur[id];
    char kb[80], vb[200], wb[200], sb[64];
    uint8_t buf[4096];
    size_t cap, want = m->present ? m->len : 0;
    uint32_t how = below(4);
    cap = how == 0 ? want : how == 1 ? (want ? want - 1 : 0) : how == 2 ? want + 1 + below(64) : 0;
    memset(buf, 0xA5, sizeof buf);
    size_t vl = 12345;
    int rc = kv_get_into(M.db, sn ? sn->snap : NULL, key_bytes[id], key_len[id], cap ? buf : NULL,
                         cap, &vl);
    esc(key_bytes[id], key_len[id], kb, sizeof kb);
    if (!m->present) {
        MCHECK(rc == KV_NOTFOUND && vl == 0,
               "get_into \"%s\" at %s (cap %zu): %s, vlen %zu, expected KV_NOTFOUND", kb,
               snap_name(sn, sb, sizeof sb), cap, kv_strerror(rc), vl);
        return;
    }
    if (cap >= want) {
        MCHECK(rc == KV_OK, "get_into \"%s\" at %s (cap %zu): %s, expected \"%s\"", kb,
               snap_name(sn, sb, sizeof sb), cap, kv_strerror(rc),
               esc(m->v, m->len, wb, sizeof wb));
        MCHECK(vl == want && (vl == 0 || memcmp(buf, m->v, vl) == 0),
               "get_into \"%s\" at %s: \"%s\" (%zu bytes), expected \"%s\" (%zu bytes)", kb,
               snap_name(sn, sb, sizeof sb), esc(buf, vl < 4096 ? vl : 0, vb, sizeof vb), vl,
               esc(m->v, m->len, wb, sizeof wb), want);
    } else {
        MCHECK(rc == KV_ERANGE && vl == want,
               "get_into \"%s\" at %s (cap %zu): %s, vlen %zu, expected KV_ERANGE, %zu", kb,
               snap_name(sn, sb, sizeof sb), cap, kv_strerror(rc), vl, want);
        for (size_t i = 0; i < sizeof buf; i++)
            MCHECK(buf[i] == 0xA5, "get_into \"%s\" (cap %zu < %zu) wrote byte %zu", kb, cap, want,
                   i);
    }
}

static void check_multi_get(const msnap *sn)
{
    enum { MAXN = 48 };
    const void *keys[MAXN];
    size_t klens[MAXN], vlens[MAXN];
    void *vals[MAXN];
    int st[MAXN];
    uint32_t ids[MAXN];
    size_t n = 1 + below(MAXN);
    for (size_t i = 0; i < n; i++) {
        ids[i] = i && below(5) == 0 ? ids[below((uint32_t)i)] : below(NKEYS); /* repeats */
        keys[i] = key_bytes[ids[i]];
        klens[i] = key_len[ids[i]];
    }
    MOK(kv_multi_get(M.db, sn ? sn->snap : NULL, n, keys, klens, vals, vlens, st));
    char kb[80], vb[200], wb[200], sb[64];
    for (size_t i = 0; i < n; i++) {
        const slot *m = sn ? &sn->copy[ids[i]] : &M.cur[ids[i]];
        esc(keys[i], klens[i], kb, sizeof kb);
        if (m->present) {
            MCHECK(st[i] == KV_OK && vlens[i] == m->len &&
                       (m->len == 0 || memcmp(vals[i], m->v, m->len) == 0),
                   "multi_get [%zu/%zu] \"%s\" at %s: %s \"%s\", expected \"%s\"", i, n, kb,
                   snap_name(sn, sb, sizeof sb), kv_strerror(st[i]),
                   st[i] == KV_OK ? esc(vals[i], vlens[i], vb, sizeof vb) : "",
                   esc(m->v, m->len, wb, sizeof wb));
        } else {
            MCHECK(st[i] == KV_NOTFOUND && vals[i] == NULL,
                   "multi_get [%zu/%zu] \"%s\" at %s: %s \"%s\", expected KV_NOTFOUND", i, n, kb,
                   snap_name(sn, sb, sizeof sb), kv_strerror(st[i]),
                   st[i] == KV_OK ? esc(vals[i], vlens[i], vb, sizeof vb) : "");
        }
        kv_free(vals[i]);
    }
}

/* The model's keys within [lower, upper) (NULL: open), present in s, in
 * the database's order: the ids, their count. */
static size_t model_range(const slot *s, const uint8_t *lo, size_t ll, const uint8_t *up, size_t ul,
                          uint32_t *out)
{
    size_t n = 0;
    for (uint32_t r = 0; r < NKEYS; r++) {
        uint32_t id = M.order[r];
        if (!s[id].present)
            continue;
        if (lo && mcmp(key_bytes[id], key_len[id], lo, ll) < 0)
            continue;
        if (up && mcmp(key_bytes[id], key_len[id], up, ul) >= 0)
            continue;
        out[n++] = id;
    }
    return n;
}

/* The iterator must stand on model pair ids[i] (or be invalid when i is out
 * of [0, n)). */
static void iter_at(kv_iter *it, const slot *s, const uint32_t *ids, long i, size_t n,
                    const char *what)
{
    char kb[80], vb[200], wb[200];
    int rc = kv_iter_status(it);
    MCHECK(rc == KV_OK, "%s: iterator status %s (%s)", what, kv_strerror(rc), kv_error_text());
    if (i < 0 || (size_t)i >= n) {
        size_t kl = 0;
        const void *k = kv_iter_key(it, &kl);
        MCHECK(!kv_iter_valid(it), "%s: iterator at \"%s\", expected the end (%ld of %zu)", what,
               esc(k, kl, kb, sizeof kb), i, n);
        return;
    }
    uint32_t id = ids[i];
    MCHECK(kv_iter_valid(it), "%s: iterator not valid, expected \"%s\" (%ld of %zu)", what,
           esc(key_bytes[id], key_len[id], kb, sizeof kb), i, n);
    size_t kl = 0, vl = 0;
    const void *k = kv_iter_key(it, &kl);
    MCHECK(kl == key_len[id] && (kl == 0 || memcmp(k, key_bytes[id], kl) == 0),
           "%s: iterator at \"%s\", expected \"%s\" (%ld of %zu)", what, esc(k, kl, vb, sizeof vb),
           esc(key_bytes[id], key_len[id], kb, sizeof kb), i, n);
    const void *v = kv_iter_value(it, &vl);
    MCHECK(v != NULL || vl == 0, "%s: NULL value", what);
    MCHECK(vl == s[id].len && (vl == 0 || memcmp(v, s[id].v, vl) == 0),
           "%s: at \"%s\" value \"%s\" (%zu bytes), expected \"%s\" (%zu bytes)", what,
           esc(key_bytes[id], key_len[id], kb, sizeof kb), esc(v, vl, vb, sizeof vb), vl,
           esc(s[id].v, s[id].len, wb, sizeof wb), s[id].len);
}

/* First index i with ids[i] >= t (n when none). */
static long model_seek(const uint32_t *ids, size_t n, const uint8_t *t, size_t tl)
{
    for (size_t i = 0; i < n; i++)
        if (mcmp(key_bytes[ids[i]], key_len[ids[i]], t, tl) >= 0)
            return (long)i;
    return (long)n;
}

/* One iterator at sn (NULL: now): random bounds (or none), full scans both
 * ways, seeks with steps both ways and direction changes, a prefix seek on
 * a bytewise database. */
static void check_iter(const msnap *sn, int full)
{
    const slot *s = sn ? sn->copy : M.cur;
    kv_iter *it = NULL;
    MOK(kv_iter_new(M.db, sn ? sn->snap : NULL, &it));
    uint8_t lo[KEY_CAP + 4], up[KEY_CAP + 4], t[KEY_CAP + 4];
    size_t ll = 0, ul = 0, tl;
    int has_lo = 0, has_up = 0;
    uint32_t ids[NKEYS];
    char what[160], b1[80], b2[80], sb[64];
    uint32_t how = below(4);
    if (how >= 1) { /* bounds */
        has_lo = below(3) != 0;
        has_up = below(3) != 0;
        if (has_lo)
            ll = make_end(lo);
        if (has_up)
            ul = make_end(up);
        if (has_lo && has_up && mcmp(lo, ll, up, ul) > 0) {
            /* lower > upper: refused, and the bounds stay as they were (none). */
            int rc = kv_iter_set_bounds(it, lo, ll, up, ul);
            MCHECK(rc == KV_EINVAL, "set_bounds(\"%s\", \"%s\"), lower > upper: %s",
                   esc(lo, ll, b1, sizeof b1), esc(up, ul, b2, sizeof b2), kv_strerror(rc));
            has_lo = has_up = 0;
        } else {
            MOK(kv_iter_set_bounds(it, has_lo ? lo : NULL, ll, has_up ? up : NULL, ul));
        }
    }
    size_t n = model_range(s, has_lo ? lo : NULL, ll, has_up ? up : NULL, ul, ids);
    snprintf(what, sizeof what, "iterator at %s, bounds [%s%s%s, %s%s%s)",
             snap_name(sn, sb, sizeof sb), has_lo ? "\"" : "",
             has_lo ? esc(lo, ll, b1, sizeof b1) : "-", has_lo ? "\"" : "", has_up ? "\"" : "",
             has_up ? esc(up, ul, b2, sizeof b2) : "-", has_up ? "\"" : "");

    if (full || below(2) == 0) { /* whole scans both ways */
        char w[200];
        snprintf(w, sizeof w, "%s, forward scan", what);
        kv_iter_seek_first(it);
        for (long i = 0;; i++) {
            iter_at(it, s, ids, i, n, w);
            if ((size_t)i >= n)
                break;
            kv_iter_next(it);
        }
        snprintf(w, sizeof w, "%s, backward scan", what);
        kv_iter_seek_last(it);
        for (long i = (long)n - 1;; i--) {
            iter_at(it, s, ids, i, n, w);
            if (i < 0)
                break;
            kv_iter_prev(it);
        }
    }
    for (int round = 0; round < 3; round++) { /* seeks, steps, direction changes */
        tl = make_end(t);
        long i = model_seek(ids, n, t, tl);
        char w[300];
        snprintf(w, sizeof w, "%s, seek \"%s\"", what, esc(t, tl, b1, sizeof b1));
        kv_iter_seek(it, t, tl);
        iter_at(it, s, ids, i, n, w);
        uint32_t steps = below(6);
        for (uint32_t j = 0; j < steps && i >= 0 && (size_t)i < n; j++) {
            int fwd = below(3) != 0;
            if (fwd) {
                kv_iter_next(it);
                i++;
            } else {
                kv_iter_prev(it);
                i--;
            }
            snprintf(w, sizeof w, "%s, seek \"%s\" then %u steps (the last %s)", what,
                     esc(t, tl, b1, sizeof b1), j + 1, fwd ? "next" : "prev");
            iter_at(it, s, ids, i, n, w);
        }
    }
    if (M.bytewise_db && below(2) == 0) {
        /* A prefix seek: the keys starting with a prefix of some key (or one
         * byte that starts none), forward from the first and backward from
         * the last. Bounds are replaced by the prefix's. */
        uint32_t id = below(NKEYS);
        size_t pl = key_len[id] ? 1 + below((uint32_t)key_len[id]) : 0;
        uint8_t pre[KEY_CAP];
        memcpy(pre, key_bytes[id], pl);
        if (below(8) == 0) {
            pre[0] = below(2) ? 0xff : 'a';
            pl = 1;
        }
        uint32_t pids[NKEYS];
        size_t pn = 0;
        for (uint32_t r = 0; r < NKEYS; r++) {
            uint32_t k = M.order[r];
            if (s[k].present && key_len[k] >= pl && memcmp(key_bytes[k], pre, pl) == 0)
                pids[pn++] = k;
        }
        char w[200];
        snprintf(w, sizeof w, "iterator at %s, prefix \"%s\"", snap_name(sn, sb, sizeof sb),
                 esc(pre, pl, b1, sizeof b1));
        MOK(kv_iter_seek_prefix(it, pre, pl));
        for (long i = 0;; i++) {
            iter_at(it, s, pids, i, pn, w);
            if ((size_t)i >= pn)
                break;
            kv_iter_next(it);
        }
        kv_iter_seek_last(it);
        for (long i = (long)pn - 1;; i--) {
            iter_at(it, s, pids, i, pn, w);
            if (i < 0)
                break;
            kv_iter_prev(it);
        }
    } else if (!M.bytewise_db && below(8) == 0) {
        int rc = kv_iter_seek_prefix(it, "1", 1);
        MCHECK(rc == KV_EINVAL, "prefix seek under a comparator: %s, expected KV_EINVAL",
               kv_strerror(rc));
    }
    kv_iter_free(it);
}

/* Every key with kv_get, and an iterator, now and at each snapshot. */
static void check_all(void)
{
    M.n_checks++;
    for (uint32_t id = 0; id < NKEYS; id++)
        check_get(NULL, id);
    check_iter(NULL, 1);
    check_multi_get(NULL);
    for (size_t i = 0; i < M.nsnaps; i++) {
        for (uint32_t j = 0; j < 16; j++)
            check_get(&M.snaps[i], below(NKEYS));
        check_iter(&M.snaps[i], 1);
        check_multi_get(&M.snaps[i]);
    }
    MCHECK(atomic_load(&op_anomaly) == 0, "the merge operator was called with bad arguments");
}

/* One random read. */
static void check_some(void)
{
    const msnap *sn = M.nsnaps && below(3) == 0 ? &M.snaps[below((uint32_t)M.nsnaps)] : NULL;
    switch (below(6)) {
    case 0:
    case 1: check_get(sn, below(NKEYS)); break;
    case 2:
    case 3: check_get_into(sn, below(NKEYS)); break;
    case 4: check_multi_get(sn); break;
    default: check_iter(sn, 0); break;
    }
}

/* ---- operations ---------------------------------------------------------------------- */

static void snaps_release_all(void)
{
    for (size_t i = 0; i < M.nsnaps; i++) {
        kv_snapshot_release(M.db, M.snaps[i].snap);
        slots_free(M.snaps[i].copy, 1);
    }
    M.nsnaps = 0;
}

static void do_range_delete(void)
{
    uint8_t b[KEY_CAP + 4], e[KEY_CAP + 4];
    size_t bl, el;
    char b1[80], b2[80];
    int c = make_range(b, &bl, e, &el);
    if (c > 0 && below(6) != 0) { /* mostly swap an inverted range */
        uint8_t t[KEY_CAP + 4];
        size_t tl = bl;
        memcpy(t, b, bl);
        memcpy(b, e, el);
        bl = el;
        memcpy(e, t, tl);
        el = tl;
        c = -c;
    }
    note("delete_range [\"%s\", \"%s\")%s", esc(b, bl, b1, sizeof b1), esc(e, el, b2, sizeof b2),
         c > 0    ? " (inverted)"
         : c == 0 ? " (empty)"
                  : "");
    int rc = kv_delete_range(M.db, b, bl, e, el);
    if (c > 0) {
        MCHECK(rc == KV_EINVAL, "delete_range [\"%s\", \"%s\") with end before begin: %s", b1, b2,
               kv_strerror(rc));
        return;
    }
    MCHECK(rc == KV_OK, "delete_range [\"%s\", \"%s\"): %s (%s)", b1, b2, kv_strerror(rc),
           kv_error_text());
    model_range_delete(M.cur, b, bl, e, el);
    M.n_rdel += c < 0;
}

static void do_merge(uint32_t id)
{
    uint8_t v[32];
    size_t n = make_operand(v);
    char kb[80];
    note("merge \"%s\" \"%.*s\"", esc(key_bytes[id], key_len[id], kb, sizeof kb), (int)n, v);
    MOK(kv_merge(M.db, key_bytes[id], key_len[id], v, n));
    slot_merge(&M.cur[id], v, n);
    M.n_merge++;
}

static void do_put(uint32_t id)
{
    uint8_t v[800];
    size_t n = make_value(v);
    char kb[80];
    note("put \"%s\" (%zu bytes)", esc(key_bytes[id], key_len[id], kb, sizeof kb), n);
    MOK(kv_put(M.db, key_bytes[id], key_len[id], v, n));
    slot_set(&M.cur[id], v, n);
}

/* A key to merge into: a put instead when its value has grown long. */
static void put_or_merge(uint32_t id)
{
    if (M.cur[id].present && M.cur[id].len > 1500)
        do_put(id);
    else
        do_merge(id);
}

static void desc_add(char *desc, size_t *dl, char c)
{
    if (*dl + 1 < 40)
        desc[(*dl)++] = c;
    desc[*dl] = 0;
}

/* A batch of 1..16 puts, deletes, merges and range deletes; applied to a
 * copy of the model in order, which replaces it once kv_write succeeded. A
 * batch range delete is added only when it is valid bytewise (the batch
 * knows no comparator): under the reverse order, only empty ones are. One
 * batch in ten under the reverse order ends with a range delete valid
 * bytewise but inverted in the database's order: kv_write refuses the
 * whole batch (KV_EINVAL) and nothing of it may show. */
static void do_batch(void)
{
    kv_batch *b = NULL;
    MOK(kv_batch_new(&b));
    char desc[40];
    size_t dl = 0;
    desc[0] = 0;
    slot *next = slots_copy(M.cur);
    uint32_t n = 1 + below(16);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t id = below(NKEYS), what = below(10);
        uint8_t v[800];
        size_t vl;
        if (what < 4) {
            vl = make_value(v);
            MOK(kv_batch_put(b, key_bytes[id], key_len[id], v, vl));
            slot_set(&next[id], v, vl);
            desc_add(desc, &dl, 'P');
        } else if (what < 6) {
            MOK(kv_batch_delete(b, key_bytes[id], key_len[id]));
            slot_clear(&next[id]);
            desc_add(desc, &dl, 'D');
        } else if (what < 9) {
            if (next[id].present && next[id].len > 1500) {
                vl = make_value(v);
                MOK(kv_batch_put(b, key_bytes[id], key_len[id], v, vl));
                slot_set(&next[id], v, vl);
            } else {
                vl = make_operand(v);
                v[vl++] = (uint8_t)('a' + i); /* distinct within the batch */
                MOK(kv_batch_merge(b, key_bytes[id], key_len[id], v, vl));
                slot_merge(&next[id], v, vl);
            }
            desc_add(desc, &dl, 'M');
        } else {
            uint8_t rb[KEY_CAP + 4], re[KEY_CAP + 4];
            size_t rbl, rel;
            int c = make_range(rb, &rbl, re, &rel);
            if (c > 0) {
                uint8_t t[KEY_CAP + 4];
                size_t tl = rbl;
                memcpy(t, rb, rbl);
                memcpy(rb, re, rel);
                rbl = rel;
                memcpy(re, t, tl);
                rel = tl;
            }
            int bw = bytewise(rb, rbl, re, rel);
            uint32_t before = kv_batch_count(b);
            int rc = kv_batch_delete_range(b, rb, rbl, re, rel);
            if (bw > 0) {
                /* Inverted bytewise: refused, the batch unchanged. */
                MCHECK(rc == KV_EINVAL, "batch_delete_range, end before begin bytewise: %s",
                       kv_strerror(rc));
                MCHECK(kv_batch_count(b) == before, "a refused batch_delete_range changed it");
                continue;
            }
            MCHECK(rc == KV_OK, "batch_delete_range: %s", kv_strerror(rc));
            model_range_delete(next, rb, rbl, re, rel);
            desc_add(desc, &dl, 'R');
        }
    }
    int poison = M.cmp && below(10) == 0;
    if (poison) { /* "1" < "2" bytewise, "2" < "1" in the database's order */
        MOK(kv_batch_put(b, "zz", 2, "x", 1));
        MOK(kv_batch_delete_range(b, "1", 1, "2", 1));
    }
    note("batch of %u: %s%s", kv_batch_count(b), desc, poison ? " + inverted range (refused)" : "");
    int rc = kv_write(M.db, b);
    if (poison) {
        MCHECK(rc == KV_EINVAL,
               "a batch with a range inverted in the database's order: %s, "
               "expected KV_EINVAL",
               kv_strerror(rc));
        slots_free(next, 1);
    } else {
        MCHECK(rc == KV_OK, "kv_write: %s (%s)", kv_strerror(rc), kv_error_text());
        slots_free(M.cur, 0);
        memcpy(M.cur, next, sizeof M.cur);
        free(next);
    }
    kv_batch_free(b);
}

/* kv_stats counts from kv_open: what the run did is added up before each
 * close. */
static void stats_add(void)
{
    struct kv_stats st;
    get_stats(M.db, &st);
    M.st_flushes += st.flushes;
    M.st_compactions += st.compactions;
    M.st_range_deletes += st.range_deletes;
    M.st_merges += st.merges;
    M.st_operands_read += st.merge_operands_read;
    M.st_operands_compacted += st.merge_operands_compacted;
    M.st_rdel_dropped += st.range_deleted_dropped;
}

static void do_reopen(void)
{
    note("close and reopen (%zu snapshots released)", M.nsnaps);
    snaps_release_all();
    stats_add();
    close_db(M.db);
    M.db = open_db(M.path, &M.o);
    M.n_reopen++;
}

static void do_compact(void)
{
    char b1[80], b2[80];
    if (below(3) == 0) {
        note("compact everything");
        MOK(kv_compact_range(M.db, NULL, 0, NULL, 0));
    } else {
        /* Part of the keys: [start, end] in the database's order. */
        uint8_t b[KEY_CAP + 4], e[KEY_CAP + 4];
        size_t bl, el;
        if (make_range(b, &bl, e, &el) > 0) {
            uint8_t t[KEY_CAP + 4];
            size_t tl = bl;
            memcpy(t, b, bl);
            memcpy(b, e, el);
            bl = el;
            memcpy(e, t, tl);
            el = tl;
        }
        note("compact [\"%s\", \"%s\"]", esc(b, bl, b1, sizeof b1), esc(e, el, b2, sizeof b2));
        MOK(kv_compact_range(M.db, b, bl, e, el));
    }
    M.n_compact++;
}

static void one_op(void)
{
    uint32_t r = below(1000);
    if (r < 260) {
        do_put(below(NKEYS));
    } else if (r < 330) {
        uint32_t id = below(NKEYS);
        char kb[80];
        note("delete \"%s\"", esc(key_bytes[id], key_len[id], kb, sizeof kb));
        MOK(kv_delete(M.db, key_bytes[id], key_len[id]));
        slot_clear(&M.cur[id]);
    } else if (r < 560) {
        put_or_merge(below(NKEYS));
    } else if (r < 630) {
        do_range_delete();
    } else if (r < 750) {
        do_batch();
    } else if (r < 765) {
        note("flush");
        MOK(kv_flush(M.db));
        M.n_flush++;
    } else if (r < 775) {
        do_compact();
    } else if (r < 778) {
        do_reopen();
    } else if (r < 795) {
        if (M.nsnaps < MAX_SNAPS) {
            msnap *s = &M.snaps[M.nsnaps];
            MOK(kv_snapshot_new(M.db, &s->snap));
            s->copy = slots_copy(M.cur);
            s->taken_at = M.op;
            M.nsnaps++;
            note("snapshot (%zu live)", M.nsnaps);
        }
    } else if (r < 805) {
        if (M.nsnaps) {
            size_t i = below((uint32_t)M.nsnaps);
            kv_snapshot_release(M.db, M.snaps[i].snap);
            slots_free(M.snaps[i].copy, 1);
            note("release the snapshot of op %llu", (unsigned long long)M.snaps[i].taken_at);
            M.snaps[i] = M.snaps[--M.nsnaps];
        }
    } else {
        check_some();
    }
}

static int long_mode(void)
{
    const char *e = getenv("KV_TEST_LONG");
    return e && *e && strcmp(e, "0") != 0;
}

static void run_seed(uint64_t seed, uint64_t steps, const kv_comparator *cmp)
{
    memset(&M, 0, sizeof M);
    M.cmp = cmp;
    M.bytewise_db = cmp == NULL;
    M.seed = seed;
    M.rng = seed * 0x9E3779B97F4A7C15ull + 1;
    for (uint32_t i = 0; i < NKEYS; i++)
        M.order[i] = i;
    qsort(M.order, NKEYS, sizeof M.order[0], order_cmp);
    char name[64];
    snprintf(name, sizeof name, "db-%s-%llu", cmp ? "rev" : "bw", (unsigned long long)seed);
    test_path(M.path, sizeof M.path, name);
    kv_options_init(&M.o);
    /* Small memtables, tables and blocks: flushes and compactions of every
     * level all through the run; long values into blob files. */
    M.o.write_buffer_size = (size_t)64 << 10;
    M.o.target_file_size = (size_t)64 << 10;
    M.o.max_bytes_for_level_base = (size_t)128 << 10;
    M.o.l0_compaction_trigger = 2;
    M.o.block_size = 256;
    M.o.compressed_block_size = 512;
    M.o.min_blob_size = 400;
    M.o.blob_file_size = (size_t)64 << 10;
    M.o.comparator = cmp;
    M.o.merge_operator = &append_op;
    M.o.compaction_filter = NULL;
    M.db = open_db(M.path, &M.o);
    atomic_store(&op_anomaly, 0);
    fprintf(stderr, "model%s: seed %llu, %llu operations\n", cmp ? " (reverse order)" : "",
            (unsigned long long)seed, (unsigned long long)steps);

    for (M.op = 1; M.op <= steps; M.op++) {
        one_op();
        if (M.op % 100 == 0)
            check_all();
    }
    M.op++;
    note("final: compact everything, check, reopen, check");
    check_all();
    MOK(kv_compact_range(M.db, NULL, 0, NULL, 0));
    check_all();
    do_reopen();
    check_all();

    snaps_release_all();
    stats_add();
    fprintf(stderr,
            "model%s: seed %llu: %llu range deletes, %llu merges, %llu flushes and %llu "
            "compactions asked, %llu reopens, %llu full checks; kv_stats: %llu flushes, %llu "
            "compactions, %llu range deletes, %llu merges, operands merged at reads %llu and "
            "in compactions %llu, entries dropped under range tombstones %llu; full_merge "
            "calls %lu, partial_merge %lu\n",
            cmp ? " (reverse order)" : "", (unsigned long long)seed, (unsigned long long)M.n_rdel,
            (unsigned long long)M.n_merge, (unsigned long long)M.n_flush,
            (unsigned long long)M.n_compact, (unsigned long long)M.n_reopen,
            (unsigned long long)M.n_checks, (unsigned long long)M.st_flushes,
            (unsigned long long)M.st_compactions, (unsigned long long)M.st_range_deletes,
            (unsigned long long)M.st_merges, (unsigned long long)M.st_operands_read,
            (unsigned long long)M.st_operands_compacted, (unsigned long long)M.st_rdel_dropped,
            atomic_load(&op_full_calls), atomic_load(&op_partial_calls));
    /* The run did what it is for: flushes and compactions happened, and
     * kv_stats counted the range deletes and merges written (each one
     * acknowledged: batches count each entry; refused ones are not written). */
    ck_assert_uint_gt(M.st_flushes, 10);
    ck_assert_uint_gt(M.st_compactions, 3);
    ck_assert_uint_ge(M.st_range_deletes, M.n_rdel);
    ck_assert_uint_ge(M.st_merges, M.n_merge);
    ck_assert_uint_gt(M.st_operands_compacted + M.st_operands_read, 0);
    close_db(M.db);
    M.db = NULL;
    slots_free(M.cur, 0);
}

static void run_seeds(const kv_comparator *cmp, uint64_t first_seed)
{
    keys_init();
    int lng = long_mode();
    uint64_t steps = lng ? 30000 : 3000; /* unsanitized: about 1 s a seed short, 4 s long */
    unsigned seeds = lng ? 8 : 3;
    const char *e = getenv("KV_MODEL_STEPS");
    if (e && strtoull(e, NULL, 10) > 0)
        steps = strtoull(e, NULL, 10);
    e = getenv("KV_MODEL_SEED");
    if (e && *e) {
        run_seed(strtoull(e, NULL, 0), steps, cmp);
        return;
    }
    for (unsigned i = 0; i < seeds; i++)
        run_seed(first_seed + i, steps, cmp);
}

START_TEST(model_bytewise)
{
    run_seeds(NULL, 1);
}
END_TEST

START_TEST(model_reverse)
{
    run_seeds(&reverse_cmp, 101);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("model");
    TCase *tc = test_tcase(s, "bytewise", 1800, 1);
    tcase_add_test(tc, model_bytewise);
    tc = test_tcase(s, "reverse", 1800, 1);
    tcase_add_test(tc, model_reverse);
    return s;
}
