/* fuzz_api.c - libFuzzer target: the input is a program of store
 * operations, run against a database and against a model of it.
 *
 * Each input opens a new database in a temporary directory (memtable and
 * output tables of 64 KiB, so that flushes and compactions happen; filter,
 * compression, block size, block cache, sync and the level-0 trigger come
 * from the first byte), then runs up to MAX_OPS operations read from the
 * rest: put, delete, batch, get, get_at a snapshot, multi_get of up to 48
 * keys with repeats (now or at a snapshot), snapshot taken or released,
 * iterators (seek_first, seek_last, seek, next, prev) made now or at a
 * snapshot, short-lived or kept open across later writes, flush,
 * compact_range, close and reopen, a full scan both ways. Keys come from a
 * small alphabet (empty, NUL bytes, prefixes of each other, 0xff, up to
 * 1000 bytes), so that they collide; values are bytes of the input or,
 * for large ones, bytes generated from a seed in it (at most WRITE_BUDGET
 * bytes of them per input).
 *
 * The model is a sorted map of our own: the alphabet sorted bytewise, one
 * value (or none) per key; snapshots and iterators keep a copy of it.
 * Every get, get_at, multi_get key and iterator position is compared
 * with it (valid or not, key, value), every call must return KV_OK
 * (KV_NOTFOUND where the model has no value), kv_iter_status stays KV_OK
 * and reopening loses nothing. A mismatch traps (__builtin_trap); so does
 * any crash, leak or sanitizer report.
 *
 * Each input gets a new directory (fuzz_tmp.h), removed at its end. A new
 * database takes its filter seed from getrandom; here that call gives a
 * fixed seed, so that a run depends on its input alone (but for the timing
 * of the store's background thread). Seeds: corpus/api, written by
 * gen_seeds.c (see README.md). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <kv/kv.h>

#include "fuzz_tmp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define OK(call) CHECK((call) == KV_OK)

#define MAX_OPS 200
#define MAX_MOVES 32              /* iterator moves per operation */
#define WRITE_BUDGET (2u << 20)   /* bytes of large values per input */
#define NSNAP 4                   /* snapshot slots */

/* ---- the key alphabet --------------------------------------------------------------- */

struct key {
    uint8_t *bytes;
    size_t len;
    int writable; /* 0: only ever looked up or sought */
};

#define MAX_KEYS 40
static struct key keys[MAX_KEYS];
static size_t nkeys;
static size_t writable[MAX_KEYS]; /* indexes of the writable keys */
static size_t nwritable;

static int key_cmp(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    return c ? c : (alen > blen) - (alen < blen);
}

static void add_key(const void *bytes, size_t len, int w)
{
    CHECK(nkeys < MAX_KEYS);
    struct key *k = &keys[nkeys++];
    k->bytes = malloc(len + 1);
    CHECK(k->bytes != NULL);
    memcpy(k->bytes, bytes, len);
    k->len = len;
    k->writable = w;
}

static void add_run(int c, size_t n, const char *tail, int w)
{
    uint8_t buf[1100];
    size_t t = strlen(tail);
    CHECK(n + t <= sizeof buf);
    memset(buf, c, n);
    memcpy(buf + n, tail, t);
    add_key(buf, n + t, w);
}

static int cmp_keys(const void *a, const void *b)
{
    const struct key *x = a, *y = b;
    return key_cmp(x->bytes, x->len, y->bytes, y->len);
}

/* The alphabet, sorted as the store orders keys (memcmp, then length). */
static void make_alphabet(void)
{
    static const struct { const char *s; size_t len; int w; } fixed[] = {
        {"", 0, 1},      {"\0", 1, 1},     {"\0\0", 2, 1},  {"\0\x01", 2, 0},
        {"0", 1, 0},     {"a", 1, 1},      {"a\0", 2, 1},   {"a\x01", 2, 0},
        {"aa", 2, 1},    {"ab", 2, 1},     {"abc", 3, 1},   {"abd", 3, 0},
        {"b", 1, 1},     {"ba", 2, 1},     {"c", 1, 0},     {"k", 1, 0},
        {"k1", 2, 1},    {"k10", 3, 1},    {"k2", 2, 1},    {"z", 1, 1},
        {"\xfe", 1, 0},  {"\xff", 1, 1},   {"\xff\xff", 2, 1}, {"\xff\xff\xff", 3, 0},
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        add_key(fixed[i].s, fixed[i].len, fixed[i].w);
    add_run('m', 199, "", 0);
    add_run('m', 200, "", 1);
    add_run('m', 200, "n", 1);
    add_run('q', 1000, "", 1);
    add_run('q', 1000, "\x01", 0);
    qsort(keys, nkeys, sizeof keys[0], cmp_keys);
    for (size_t i = 0; i < nkeys; i++) {
        CHECK(i == 0 || cmp_keys(&keys[i - 1], &keys[i]) < 0);
        if (keys[i].writable)
            writable[nwritable++] = i;
    }
}

/* ---- the model: one value (or none) per key of the alphabet ----------------------------- */

struct val {
    size_t refs, len;
    uint8_t bytes[];
};

struct view {
    struct val *v[MAX_KEYS]; /* NULL: absent */
};

/* A value of len bytes, copied from p (NULL: left for the caller to fill). */
static struct val *val_new(const uint8_t *p, size_t len)
{
    struct val *v = malloc(sizeof *v + len + 1);
    CHECK(v != NULL);
    v->refs = 1;
    v->len = len;
    if (p && len)
        memcpy(v->bytes, p, len);
    return v;
}

static void val_unref(struct val *v)
{
    if (v && --v->refs == 0)
        free(v);
}

static void view_set(struct view *m, size_t k, struct val *v)
{
    if (v)
        v->refs++;
    val_unref(m->v[k]);
    m->v[k] = v;
}

static void view_copy(struct view *dst, const struct view *src)
{
    for (size_t i = 0; i < nkeys; i++) {
        dst->v[i] = src->v[i];
        if (dst->v[i])
            dst->v[i]->refs++;
    }
}

static void view_clear(struct view *m)
{
    for (size_t i = 0; i < nkeys; i++) {
        val_unref(m->v[i]);
        m->v[i] = NULL;
    }
}

/* ---- the program ---------------------------------------------------------------------- */

struct prog {
    const uint8_t *p;
    size_t n, pos;
};

static int more(const struct prog *g) { return g->pos < g->n; }

static uint8_t byte(struct prog *g) { return g->pos < g->n ? g->p[g->pos++] : 0; }

static size_t wkey(struct prog *g) { return writable[byte(g) % nwritable]; }

static size_t anykey(struct prog *g) { return byte(g) % nkeys; }

struct iter {
    kv_iter *it;
    struct view view; /* what it must see */
    long pos;         /* key index, or -1: not valid */
};

struct run {
    const char *dir;
    kv_options opts;
    kv_db *db;
    struct view model;
    kv_snapshot *snap[NSNAP];
    struct view snapview[NSNAP];
    struct iter kept;     /* the iterator kept open across operations */
    int have_kept;
    size_t budget;        /* bytes of large values left */
    uint64_t counter;
};

/* A value, from byte b: b < 0x80: b % 64 bytes of the input; else
 * ((b & 0x7f) + 1) * 64 bytes (up to 8 KiB) generated from the next byte,
 * or none (empty) once the budget is spent. */
static struct val *value(struct run *r, struct prog *g)
{
    uint8_t b = byte(g);
    if (b < 0x80) {
        size_t len = b % 64;
        uint8_t buf[64];
        for (size_t i = 0; i < len; i++)
            buf[i] = byte(g);
        return val_new(buf, len);
    }
    size_t len = ((size_t)(b & 0x7f) + 1) * 64;
    uint64_t s = (uint64_t)byte(g) << 32 ^ ++r->counter ^ 0x9E3779B97F4A7C15ull;
    if (len > r->budget)
        len = 0; /* the budget is spent: an empty value */
    r->budget -= len;
    struct val *v = val_new(NULL, len);
    for (size_t i = 0; i < len; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        v->bytes[i] = (uint8_t)(s >> 24);
    }
    return v;
}

static void check_get(struct run *r, const kv_snapshot *snap, const struct view *m, size_t k)
{
    void *v = (void *)1;
    size_t vlen = 12345;
    int rc = snap ? kv_get_at(r->db, snap, keys[k].bytes, keys[k].len, &v, &vlen)
                  : kv_get(r->db, keys[k].bytes, keys[k].len, &v, &vlen);
    if (!m->v[k]) {
        CHECK(rc == KV_NOTFOUND);
        return;
    }
    CHECK(rc == KV_OK && v != NULL);
    CHECK(vlen == m->v[k]->len && (vlen == 0 || memcmp(v, m->v[k]->bytes, vlen) == 0));
    kv_free(v);
}

/* kv_multi_get of up to 48 keys of the alphabet (repeats, any order), at
 * a snapshot or now: each key as the model says, each value its own. */
static void check_multi_get(struct run *r, struct prog *g)
{
    enum { MAX = 48 };
    int s = byte(g) % (NSNAP + 1) - 1;
    const kv_snapshot *snap = s >= 0 ? r->snap[s] : NULL;
    const struct view *m = snap ? &r->snapview[s] : &r->model;
    size_t n = byte(g) % MAX + 1, k[MAX];
    const void *kp[MAX];
    size_t kl[MAX], vlens[MAX];
    void *vals[MAX];
    int st[MAX];
    for (size_t i = 0; i < n; i++) {
        k[i] = anykey(g);
        kp[i] = keys[k[i]].bytes;
        kl[i] = keys[k[i]].len;
    }
    OK(kv_multi_get(r->db, snap, n, kp, kl, vals, vlens, st));
    for (size_t i = 0; i < n; i++) {
        const struct val *v = m->v[k[i]];
        if (!v) {
            CHECK(st[i] == KV_NOTFOUND && vals[i] == NULL && vlens[i] == 0);
            continue;
        }
        CHECK(st[i] == KV_OK && vals[i] != NULL && (i == 0 || vals[i] != vals[i - 1]));
        CHECK(vlens[i] == v->len && (v->len == 0 || memcmp(vals[i], v->bytes, v->len) == 0));
    }
    for (size_t i = 0; i < n; i++)
        kv_free(vals[i]);
}

/* ---- iterators against the model ---------------------------------------------------- */

static long first_from(const struct view *m, long i)
{
    for (; i < (long)nkeys; i++)
        if (m->v[i])
            return i;
    return -1;
}

static long last_before(const struct view *m, long i)
{
    for (i--; i >= 0; i--)
        if (m->v[i])
            return i;
    return -1;
}

static void iter_check(const struct iter *x)
{
    CHECK(kv_iter_status(x->it) == KV_OK);
    size_t klen = 99, vlen = 99;
    const void *key = kv_iter_key(x->it, &klen), *val = kv_iter_value(x->it, &vlen);
    if (x->pos < 0) {
        CHECK(!kv_iter_valid(x->it) && key == NULL && val == NULL && klen == 0 && vlen == 0);
        return;
    }
    const struct key *k = &keys[x->pos];
    const struct val *v = x->view.v[x->pos];
    CHECK(kv_iter_valid(x->it) && key != NULL && val != NULL);
    CHECK(klen == k->len && (klen == 0 || memcmp(key, k->bytes, klen) == 0));
    CHECK(vlen == v->len && (vlen == 0 || memcmp(val, v->bytes, vlen) == 0));
}

/* One move, chosen by the next byte: seek_first, seek_last, seek, and next
 * and prev (more often). A new iterator is not valid until a seek. */
static void iter_move(struct iter *x, struct prog *g)
{
    switch (byte(g) % 8) {
    case 0:
        kv_iter_seek_first(x->it);
        x->pos = first_from(&x->view, 0);
        break;
    case 1:
        kv_iter_seek_last(x->it);
        x->pos = last_before(&x->view, (long)nkeys);
        break;
    case 2: {
        size_t k = anykey(g);
        kv_iter_seek(x->it, keys[k].bytes, keys[k].len);
        x->pos = first_from(&x->view, (long)k);
        break;
    }
    case 3: case 4: case 5:
        kv_iter_next(x->it);
        if (x->pos >= 0)
            x->pos = first_from(&x->view, x->pos + 1);
        break;
    default:
        kv_iter_prev(x->it);
        if (x->pos >= 0)
            x->pos = last_before(&x->view, x->pos);
        break;
    }
    iter_check(x);
}

static void iter_open(struct run *r, struct iter *x, int slot)
{
    const kv_snapshot *snap = slot >= 0 ? r->snap[slot] : NULL;
    OK(kv_iter_new(r->db, snap, &x->it));
    memset(&x->view, 0, sizeof x->view);
    view_copy(&x->view, snap ? &r->snapview[slot] : &r->model);
    x->pos = -1;
    iter_check(x);
}

static void iter_close(struct iter *x)
{
    kv_iter_free(x->it);
    x->it = NULL;
    view_clear(&x->view);
}

/* Walks the whole database forward, then backward. */
static void full_scan(struct run *r)
{
    struct iter x;
    iter_open(r, &x, -1);
    kv_iter_seek_first(x.it);
    for (x.pos = first_from(&x.view, 0);; x.pos = first_from(&x.view, x.pos + 1)) {
        iter_check(&x);
        if (x.pos < 0)
            break;
        kv_iter_next(x.it);
    }
    kv_iter_seek_last(x.it);
    for (x.pos = last_before(&x.view, (long)nkeys);; x.pos = last_before(&x.view, x.pos)) {
        iter_check(&x);
        if (x.pos < 0)
            break;
        kv_iter_prev(x.it);
    }
    iter_close(&x);

    struct kv_stats st;
    OK(kv_stats(r->db, &st));
    uint64_t tables = 0;
    for (int l = 0; l < 7; l++)
        tables += st.level_tables[l];
    CHECK(tables == st.tables && st.level_tables[0] == st.l0_tables);
}

/* ---- operations -------------------------------------------------------------------- */

static void release_all(struct run *r)
{
    if (r->have_kept) {
        iter_close(&r->kept);
        r->have_kept = 0;
    }
    for (int s = 0; s < NSNAP; s++) {
        kv_snapshot_release(r->db, r->snap[s]);
        r->snap[s] = NULL;
        view_clear(&r->snapview[s]);
    }
}

static void op_batch(struct run *r, struct prog *g)
{
    uint8_t b = byte(g);
    size_t n = 1 + b % 8;
    kv_batch *batch;
    OK(kv_batch_new(&batch));
    size_t ks[8];
    struct val *vs[8];
    for (size_t i = 0; i < n; i++) {
        ks[i] = wkey(g);
        vs[i] = byte(g) & 1 ? NULL : value(r, g);
        if (vs[i])
            OK(kv_batch_put(batch, keys[ks[i]].bytes, keys[ks[i]].len, vs[i]->bytes, vs[i]->len));
        else
            OK(kv_batch_delete(batch, keys[ks[i]].bytes, keys[ks[i]].len));
    }
    CHECK(kv_batch_count(batch) == n);
    if (b & 0x80) {
        kv_write_options wo = {.sync = (b & 0x40) != 0};
        OK(kv_write_opts(r->db, &wo, batch));
    } else {
        OK(kv_write(r->db, batch));
    }
    kv_batch_free(batch);
    for (size_t i = 0; i < n; i++) { /* in order: a later entry wins */
        view_set(&r->model, ks[i], vs[i]);
        val_unref(vs[i]);
    }
}

static void op_compact(struct run *r, struct prog *g)
{
    uint8_t b = byte(g);
    size_t s = anykey(g), e = anykey(g);
    const struct key *ks = &keys[s], *ke = &keys[e];
    OK(kv_compact_range(r->db, b & 1 ? NULL : ks->bytes, b & 1 ? 0 : ks->len,
                        b & 2 ? NULL : ke->bytes, b & 2 ? 0 : ke->len));
}

static void db_open(struct run *r)
{
    r->db = NULL;
    OK(kv_open(r->dir, &r->opts, &r->db));
}

static void step(struct run *r, struct prog *g)
{
    uint8_t op = byte(g);
    switch (op % 16) {
    case 0: case 1: { /* put */
        size_t k = wkey(g);
        struct val *v = value(r, g);
        OK(kv_put(r->db, keys[k].bytes, keys[k].len, v->bytes, v->len));
        view_set(&r->model, k, v);
        val_unref(v);
        break;
    }
    case 2: { /* delete */
        size_t k = wkey(g);
        OK(kv_delete(r->db, keys[k].bytes, keys[k].len));
        view_set(&r->model, k, NULL);
        break;
    }
    case 3: /* get */
        check_get(r, NULL, &r->model, anykey(g));
        break;
    case 4:
        check_multi_get(r, g);
        break;
    case 5:
        op_batch(r, g);
        break;
    case 6: { /* a short-lived iterator, now or at a snapshot */
        int s = byte(g) % (NSNAP + 1) - 1;
        struct iter x;
        iter_open(r, &x, s >= 0 && r->snap[s] ? s : -1);
        for (size_t m = byte(g) % MAX_MOVES + 1; m > 0; m--)
            iter_move(&x, g);
        iter_close(&x);
        break;
    }
    case 7: /* (re)open the kept iterator */
        if (r->have_kept)
            iter_close(&r->kept);
        iter_open(r, &r->kept, -1);
        r->have_kept = 1;
        break;
    case 8: /* move the kept iterator, after whatever was written since */
        if (r->have_kept)
            for (size_t m = byte(g) % 8 + 1; m > 0; m--)
                iter_move(&r->kept, g);
        break;
    case 9: { /* take a snapshot */
        int s = byte(g) % NSNAP;
        kv_snapshot_release(r->db, r->snap[s]);
        view_clear(&r->snapview[s]);
        OK(kv_snapshot_new(r->db, &r->snap[s]));
        view_copy(&r->snapview[s], &r->model);
        break;
    }
    case 10: { /* release one */
        int s = byte(g) % NSNAP;
        kv_snapshot_release(r->db, r->snap[s]);
        r->snap[s] = NULL;
        view_clear(&r->snapview[s]);
        break;
    }
    case 11: { /* get_at a snapshot (or now) */
        int s = byte(g) % NSNAP;
        size_t k = anykey(g);
        check_get(r, r->snap[s], r->snap[s] ? &r->snapview[s] : &r->model, k);
        break;
    }
    case 12:
        OK(kv_flush(r->db));
        break;
    case 13:
        op_compact(r, g);
        break;
    case 14: /* close and reopen: snapshots and iterators go first */
        release_all(r);
        OK(kv_close(r->db));
        db_open(r);
        full_scan(r);
        break;
    default:
        full_scan(r);
        break;
    }
}

/* ---- the target --------------------------------------------------------------------- */

/* kv_open draws a new database's filter seed with getrandom (kv/recover.c,
 * kv_db_random_seed). While fixed_seed is set (around kv_open in a run), this
 * definition, which takes the place of the C library's, gives a fixed one;
 * any other caller gets real random bytes. */
static int fixed_seed;

ssize_t getrandom(void *buf, size_t len, unsigned int flags)
{
    if (!fixed_seed)
        return syscall(SYS_getrandom, buf, len, flags);
    for (size_t i = 0; i < len; i++)
        ((uint8_t *)buf)[i] = (uint8_t)(0x5d + 0x2b * i);
    return (ssize_t)len;
}

/* Options from the first byte: bits 0-1 filter (blocked, classic, none,
 * blocked at 1 bit per key), bit 2 compression, bits 3-4 block size (64
 * bytes .. 4 KiB), bit 5 a 64 KiB block cache (else none), bit 6 sync,
 * bit 7 level-0 compaction at 2 tables (else 4). */
static void options(kv_options *o, uint8_t b)
{
    kv_options_init(o);
    o->write_buffer_size = 64u << 10;
    o->target_file_size = 64u << 10;
    o->max_bytes_for_level_base = 128u << 10;
    static const double bits[] = {10, 10, 0, 1};
    o->bloom_bits_per_key = bits[b & 3];
    o->filter_layout = (b & 3) == 1 ? KV_BLOOM_CLASSIC : KV_BLOOM_BLOCKED;
    o->compression = b & 4 ? KV_COMPRESSION_ZSTD : KV_COMPRESSION_NONE;
    static const size_t blocks[] = {64, 256, 1024, 4096};
    o->block_size = blocks[(b >> 3) & 3];
    o->block_cache_size = b & 32 ? 64u << 10 : 0;
    o->sync = (b & 64) != 0;
    o->l0_compaction_trigger = b & 128 ? 2 : 4;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fz_base[0]) {
        fz_init("api");
        make_alphabet();
    }
    if (size == 0)
        return 0;
    static struct run r;
    memset(&r, 0, sizeof r);
    struct prog g = {data, size, 0};
    options(&r.opts, byte(&g));
    r.budget = WRITE_BUDGET;
    r.dir = fz_mkdir();
    fixed_seed = 1;
    db_open(&r);
    fixed_seed = 0;
    for (int n = 0; n < MAX_OPS && more(&g); n++)
        step(&r, &g);
    release_all(&r);
    full_scan(&r);
    OK(kv_close(r.db));
    view_clear(&r.model);
    fz_done();
    return 0;
}
