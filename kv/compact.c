/* compact.c - writing tables (for flushes and compactions) and leveled
 * compaction.
 *
 * Level 0 holds flushed memtables, whose ranges overlap. Levels 1.. hold
 * disjoint ranges, each level `level_multiplier` (10) times the size of the
 * one above, level 1 holding `max_bytes_for_level_base`. A compaction
 * merges some tables of level L with the tables of level L+1 that overlap
 * them, and writes level L+1 tables of about `target_file_size` bytes:
 *
 * - L0 -> L1 when level 0 holds `l0_compaction_trigger` tables: all of them
 *   (they overlap each other) and the level-1 tables under their range;
 * - Ln -> Ln+1 when level n is over its size: one table, taken round-robin
 *   through the key space, and the level-n+1 tables under it.
 *
 * The level with the highest ratio (tables / trigger, bytes / target) goes
 * first. Each output table gets a new filter sized for exactly its entries.
 * The result is one manifest transaction (inputs out, outputs in); input
 * files are deleted once no reader holds them (version.h). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#include "util/keycmp.h"
#include "db.h"
#include "dbfiles.h"
#include "util/ikey.h"
#include "util/hash.h"

/* ---- building one table --------------------------------------------------------------- */

int kv_builder_start(kv_db *db, struct kv_builder *b, uint32_t level, const char *note)
{
    memset(b, 0, sizeof *b);
    b->db = db;
    pthread_mutex_lock(&db->mu);
    int rc = kv_db_new_file_number(db, &b->meta.number);
    pthread_mutex_unlock(&db->mu);
    if (rc != KV_OK)
        return rc;
    b->meta.level = level;
    b->meta.min_seq = UINT64_MAX;
    kv_sst_options so;
    kv_sst_options_init(&so);
    so.block_size = db->o.block_size;
    so.compression = db->o.compression;
    so.compression_level = db->o.compression_level;
    so.bits_per_key = db->o.bloom_bits_per_key;
    so.filter_layout = (kv_bloom_layout)db->o.filter_layout;
    so.seed = db->seed;
    so.note = note;
    char *path = kv_dbfile_path(db->path, b->meta.number, "sst");
    if (!path)
        return KV_ENOMEM;
    rc = kv_sst_writer_new(path, &so, &b->w);
    free(path);
    return rc;
}

int kv_builder_add(struct kv_builder *b, const uint8_t *ikey, size_t ilen, const uint8_t *ukey,
                   size_t uklen, uint64_t hash, uint64_t seq, const void *val, size_t vlen)
{
    int rc = kv_sst_writer_add_hashed(b->w, ikey, ilen, val, vlen, hash);
    if (rc != KV_OK)
        return rc;
    /* The range in user keys: the first key added, and the last. */
    if (b->meta.entries == 0) {
        b->meta.smallest = malloc(uklen + 1);
        if (!b->meta.smallest)
            return KV_ENOMEM;
        if (uklen)
            memcpy(b->meta.smallest, ukey, uklen);
        b->meta.smallest_len = uklen;
    }
    if (b->meta.entries == 0 || uklen != b->meta.largest_len ||
        (uklen && memcmp(ukey, b->meta.largest, uklen) != 0)) {
        if (uklen + 1 > b->largest_cap) {
            uint8_t *n = realloc(b->meta.largest, uklen + 1);
            if (!n)
                return KV_ENOMEM;
            b->meta.largest = n;
            b->largest_cap = uklen + 1;
        }
        if (uklen)
            memcpy(b->meta.largest, ukey, uklen);
        b->meta.largest_len = uklen;
    }
    if (seq < b->meta.min_seq)
        b->meta.min_seq = seq;
    if (seq > b->meta.max_seq)
        b->meta.max_seq = seq;
    b->meta.entries++;
    b->bytes += ilen + vlen;
    return KV_OK;
}

void kv_builder_abandon(struct kv_builder *b)
{
    kv_sst_writer_abandon(b->w);
    free(b->meta.smallest);
    free(b->meta.largest);
    memset(b, 0, sizeof *b);
}

int kv_builder_finish(struct kv_builder *b, struct kv_table **out)
{
    *out = NULL;
    uint64_t size = 0;
    int rc = kv_sst_writer_finish(b->w, &size);
    b->w = NULL;
    if (rc != KV_OK) {
        kv_builder_abandon(b);
        return rc;
    }
    b->meta.file_size = size;
    kv_table_meta meta = b->meta;
    memset(&b->meta, 0, sizeof b->meta);
    rc = kv_db_table_open(b->db, &meta, out); /* takes the keys */
    if (rc != KV_OK) {
        char *p = kv_dbfile_path(b->db->path, meta.number, "sst");
        if (p)
            remove(p);
        free(p);
        return rc;
    }
    kv_sst_properties p;
    kv_sst_reader_properties((*out)->reader, &p);
    (*out)->meta.filter_layout = (uint32_t)p.filter_layout;
    (*out)->meta.filter_bits_per_key = p.filter_bits_per_key;
    (*out)->meta.filter_k = p.filter_k;
    (*out)->meta.filter_keys = p.filter_keys;
    return KV_OK;
}

/* ---- which versions a table keeps ----------------------------------------------------------- */

/* Entries arrive in internal-key order: by key, then newest first. An
 * entry is dropped when a newer entry of the same key is visible to every
 * snapshot (no reader can reach the older one), and a tombstone also when
 * every snapshot sees it and no older table below could hold the key
 * (`base`: nothing for it to hide). */
int kv_dropper_drop(struct kv_dropper *d, const uint8_t *id, size_t idlen, uint64_t seq, int kind,
                    int base)
{
    if (!d->have || idlen != d->len ||
        (idlen && memcmp(id, d->key, idlen) != 0)) {
        if (idlen > d->cap) {
            uint8_t *n = realloc(d->key, idlen);
            if (!n)
                return -1;
            d->key = n;
            d->cap = idlen;
        }
        if (idlen)
            memcpy(d->key, id, idlen);
        d->len = idlen;
        d->have = 1;
        d->newer_seq = UINT64_MAX; /* no newer entry of this key yet */
    }
    int drop = d->newer_seq <= d->horizon ||
               (kind == KV_KIND_TOMBSTONE && seq <= d->horizon && base);
    /* Kept, though with no snapshot it would go: a snapshot pins it. */
    d->pinned = !drop && (d->newer_seq != UINT64_MAX || (kind == KV_KIND_TOMBSTONE && base));
    d->newer_seq = seq;
    return drop;
}

void kv_dropper_free(struct kv_dropper *d)
{
    free(d->key);
    d->key = NULL;
}

/* ---- merging the inputs -------------------------------------------------------------------- */

/* One input run: a level-0 table alone, or the sorted, disjoint tables of
 * a deeper level one after another. */
struct run {
    struct kv_table **t;
    size_t n, i;
    kv_sst_iter *it;
};

static int run_open(struct run *r)
{
    while (r->i < r->n) {
        kv_sst_iter_free(r->it);
        r->it = NULL;
        int rc = kv_sst_iter_new(r->t[r->i]->reader, &r->it);
        if (rc != KV_OK)
            return rc;
        kv_sst_iter_seek_first(r->it);
        if (kv_sst_iter_valid(r->it))
            return KV_OK;
        if ((rc = kv_sst_iter_status(r->it)) != KV_OK)
            return rc;
        r->i++;
    }
    return KV_OK;
}

static int run_valid(const struct run *r)
{
    return r->it && r->i < r->n && kv_sst_iter_valid(r->it);
}

static int run_next(struct run *r)
{
    kv_sst_iter_next(r->it);
    if (kv_sst_iter_valid(r->it))
        return KV_OK;
    int rc = kv_sst_iter_status(r->it);
    if (rc != KV_OK)
        return rc;
    r->i++;
    return run_open(r);
}

/* ---- one compaction ------------------------------------------------------------------------ */

struct compaction {
    int level;                /* inputs from level and level + 1 */
    int out_level;            /* level + 1, or level for a rewrite in place */
    struct kv_version *v;     /* pinned while it runs */
    struct kv_table **in;     /* level's inputs, then level + 1's */
    size_t nin, nlevel;       /* all, and those of `level` */
};

static void compaction_free(struct compaction *c)
{
    free(c->in);
    kv_version_unref(c->v);
    memset(c, 0, sizeof *c);
}

static int overlaps(const kv_table_meta *m, const uint8_t *lo, size_t lolen, const uint8_t *hi,
                    size_t hilen)
{
    return (!lo || kv_key_cmp(m->largest, m->largest_len, lo, lolen) >= 0) &&
           (!hi || kv_key_cmp(m->smallest, m->smallest_len, hi, hilen) <= 0);
}

/* Adds the tables of level `l` that overlap [lo, hi] (NULL: open) to c. */
static int add_overlapping(struct compaction *c, int l, const uint8_t *lo, size_t lolen,
                           const uint8_t *hi, size_t hilen)
{
    const struct kv_version *v = c->v;
    for (size_t i = v->start[l]; i < v->start[l + 1]; i++) {
        if (!overlaps(&v->tables[i]->meta, lo, lolen, hi, hilen))
            continue;
        struct kv_table **n = realloc(c->in, (c->nin + 1) * sizeof *n);
        if (!n)
            return KV_ENOMEM;
        c->in = n;
        c->in[c->nin++] = v->tables[i];
    }
    return KV_OK;
}

/* The union range of c->in[from, to). */
static void range_of(const struct compaction *c, size_t from, size_t to, const kv_table_meta **lo,
                     const kv_table_meta **hi)
{
    *lo = *hi = NULL;
    for (size_t i = from; i < to; i++) {
        const kv_table_meta *m = &c->in[i]->meta;
        if (!*lo || kv_key_cmp(m->smallest, m->smallest_len, (*lo)->smallest,
                               (*lo)->smallest_len) < 0)
            *lo = m;
        if (!*hi || kv_key_cmp(m->largest, m->largest_len, (*hi)->largest,
                               (*hi)->largest_len) > 0)
            *hi = m;
    }
}

/* Sets up c for level `level`: level's tables overlapping [lo, hi] (all of
 * them with NULLs; for levels >= 1 `one` picks a single table instead),
 * then the overlapping tables of the next level. 0 when there is nothing. */
static int setup(struct compaction *c, struct kv_version *v, int level, const uint8_t *lo,
                 size_t lolen, const uint8_t *hi, size_t hilen, struct kv_table *one)
{
    memset(c, 0, sizeof *c);
    c->level = level;
    c->out_level = level + 1;
    c->v = v;
    int rc = KV_OK;
    if (one) {
        c->in = malloc(sizeof *c->in);
        if (!c->in)
            rc = KV_ENOMEM;
        else
            c->in[c->nin++] = one;
    } else {
        rc = add_overlapping(c, level, lo, lolen, hi, hilen);
        /* Level-0 tables overlap one another: a table left behind that
         * overlaps one taken could hold an older version of a key the
         * taken one moves down, and level 0 is searched first, so the old
         * version would win. Widen the range to the union of what is taken
         * until no level-0 table outside it overlaps it. */
        while (rc == KV_OK && level == 0 && c->nin) {
            const kv_table_meta *a, *b;
            range_of(c, 0, c->nin, &a, &b);
            size_t before = c->nin;
            c->nin = 0;
            rc = add_overlapping(c, 0, a->smallest, a->smallest_len, b->largest, b->largest_len);
            if (c->nin == before)
                break;
        }
    }
    c->nlevel = c->nin;
    if (rc == KV_OK && c->nin) {
        const kv_table_meta *a, *b;
        range_of(c, 0, c->nin, &a, &b);
        rc = add_overlapping(c, level + 1, a->smallest, a->smallest_len, b->largest,
                             b->largest_len);
    }
    return rc;
}

/* The level that most needs a compaction, or -1. Under mu. */
static int pick_level(const kv_db *db, const struct kv_version *v)
{
    double best = 1.0;
    int level = -1;
    double s0 = (double)(v->start[1] - v->start[0]) / (double)db->o.l0_compaction_trigger;
    if (s0 >= best) {
        best = s0;
        level = 0;
    }
    double target = (double)db->o.max_bytes_for_level_base;
    for (int l = 1; l < KV_LEVELS - 1; l++, target *= 10) {
        double s = (double)kv_version_level_bytes(v, l) / target;
        if (s > best) {
            best = s;
            level = l;
        }
    }
    return level;
}

int kv_compaction_needed(const kv_db *db)
{
    return pick_level(db, db->current) >= 0;
}

/* Merges c's inputs into new tables of level c->out_level and commits. */
static int run_compaction(kv_db *db, struct compaction *c)
{
    int out_level = c->out_level;
    struct run *runs = calloc(c->nin, sizeof *runs);
    size_t nruns = 0;
    if (!runs)
        return KV_ENOMEM;
    /* Level-0 inputs each make a run; the next level's tables, in key
     * order and disjoint, make one run together. */
    size_t i = 0;
    if (c->level == 0)
        for (; i < c->nlevel; i++)
            runs[nruns++] = (struct run){.t = &c->in[i], .n = 1};
    else if (c->nlevel) {
        runs[nruns++] = (struct run){.t = c->in, .n = c->nlevel};
        i = c->nlevel;
    }
    if (i < c->nin)
        runs[nruns++] = (struct run){.t = &c->in[i], .n = c->nin - i};

    pthread_mutex_lock(&db->mu);
    uint64_t horizon = kv_db_oldest_snapshot(db);
    pthread_mutex_unlock(&db->mu);

    struct kv_dropper drop = {.horizon = horizon};
    struct kv_builder b = {0};
    int building = 0;
    struct kv_table **outs = NULL;
    size_t nouts = 0;
    uint8_t *ukey = NULL;
    size_t ucap = 0, ulen = 0;
    uint64_t hash = 0, in_bytes = 0, out_bytes = 0, steps = 0;
    int rc = KV_OK;
    for (size_t r = 0; rc == KV_OK && r < nruns; r++)
        rc = run_open(&runs[r]);
    for (size_t k = 0; k < c->nin; k++)
        in_bytes += c->in[k]->meta.file_size;

    while (rc == KV_OK) {
        /* The smallest key among the runs (internal keys are unique). */
        struct run *m = NULL;
        const uint8_t *mk = NULL;
        size_t mlen = 0;
        for (size_t r = 0; r < nruns; r++) {
            if (!run_valid(&runs[r]))
                continue;
            size_t kl;
            const uint8_t *k = kv_sst_iter_key(runs[r].it, &kl);
            if (!m || kv_key_cmp(k, kl, mk, mlen) < 0) {
                m = &runs[r];
                mk = k;
                mlen = kl;
            }
        }
        if (!m)
            break;
        if ((++steps & 1023) == 0) {
            if (atomic_load(&db->stopping)) {
                rc = KV_EBUSY; /* closing: abandon, nothing committed */
                break;
            }
            if ((rc = kv_db_flush_pending(db)) != KV_OK)
                break;
        }
        uint64_t seq;
        int kind;
        size_t vlen;
        const uint8_t *val = kv_sst_iter_value(m->it, &vlen);
        if (mlen < 2 + KV_IKEY_TRAILER ||
            !kv_ikey_get_trailer(mk + mlen - KV_IKEY_TRAILER, KV_IKEY_TRAILER, &seq, &kind)) {
            rc = KV_ECORRUPT;
            break;
        }
        size_t plen = mlen - KV_IKEY_TRAILER;
        int new_key = !drop.have || plen != drop.len ||
                      (plen && memcmp(mk, drop.key, plen) != 0);
        if (new_key) {
            if (mlen > ucap) {
                uint8_t *n = realloc(ukey, mlen);
                if (!n) {
                    rc = KV_ENOMEM;
                    break;
                }
                ukey = n;
                ucap = mlen;
            }
            uint64_t s2;
            int k2;
            if (!kv_ikey_decode(mk, mlen, ukey, mlen, &ulen, &s2, &k2)) {
                rc = KV_ECORRUPT;
                break;
            }
            hash = kv_hash_key(ukey, ulen, db->seed);
            /* A table ends only between user keys, so that the ranges of
             * a level's tables never share a key. */
            if (building && b.bytes >= db->o.target_file_size) {
                struct kv_table *t;
                building = 0;
                if ((rc = kv_builder_finish(&b, &t)) != KV_OK)
                    break;
                struct kv_table **n = realloc(outs, (nouts + 1) * sizeof *n);
                if (!n) {
                    atomic_store(&t->obsolete, 1);
                    kv_table_unref(t);
                    rc = KV_ENOMEM;
                    break;
                }
                outs = n;
                outs[nouts++] = t;
                out_bytes += t->meta.file_size;
            }
        }
        int base = kind == KV_KIND_TOMBSTONE && !kv_version_key_below(c->v, out_level + 1, ukey, ulen);
        int d = kv_dropper_drop(&drop, mk, plen, seq, kind, base);
        if (d < 0) {
            rc = KV_ENOMEM;
            break;
        }
        if (!d) {
            if (!building) {
                if ((rc = kv_builder_start(db, &b, (uint32_t)out_level, "kv: compaction")) != KV_OK)
                    break;
                building = 1;
            }
            rc = kv_builder_add(&b, mk, mlen, ukey, ulen, hash, seq, val, vlen);
            if (rc != KV_OK)
                break;
            if (drop.pinned)
                b.meta.flags |= KV_TABLE_SNAPSHOT_PINNED;
        }
        rc = run_next(m);
    }
    for (size_t r = 0; r < nruns; r++)
        kv_sst_iter_free(runs[r].it);
    free(runs);
    free(ukey);
    kv_dropper_free(&drop);
    if (rc == KV_OK && building) {
        struct kv_table *t;
        building = 0;
        rc = kv_builder_finish(&b, &t);
        if (rc == KV_OK) {
            struct kv_table **n = realloc(outs, (nouts + 1) * sizeof *n);
            if (!n) {
                atomic_store(&t->obsolete, 1);
                kv_table_unref(t);
                rc = KV_ENOMEM;
            } else {
                outs = n;
                outs[nouts++] = t;
                out_bytes += t->meta.file_size;
            }
        }
    }
    if (building)
        kv_builder_abandon(&b);
    uint64_t *gone = NULL;
    if (rc == KV_OK && !(gone = malloc((c->nin ? c->nin : 1) * sizeof *gone)))
        rc = KV_ENOMEM;
    if (rc == KV_OK) {
        for (size_t k = 0; k < c->nin; k++)
            gone[k] = c->in[k]->meta.number;
        rc = kv_db_commit(db, NULL, gone, c->nin, outs, nouts);
    }
    free(gone);
    for (size_t k = 0; k < nouts; k++) {
        if (rc != KV_OK) /* never named by the manifest: delete */
            atomic_store(&outs[k]->obsolete, 1);
        kv_table_unref(outs[k]);
    }
    free(outs);
    if (rc == KV_OK) {
        KV_COUNT(db, compactions, 1);
        KV_COUNT(db, compaction_read_bytes, in_bytes);
        KV_COUNT(db, compaction_written_bytes, out_bytes);
    }
    return rc;
}

int kv_compact_step(kv_db *db)
{
    pthread_mutex_lock(&db->mu);
    struct kv_version *v = db->current;
    int level = pick_level(db, v);
    if (level < 0) {
        pthread_mutex_unlock(&db->mu);
        return KV_NOTFOUND;
    }
    kv_version_ref(v);
    struct kv_table *one = NULL;
    if (level > 0) {
        /* Round-robin: the first table past where this level's last
         * compaction ended, wrapping to the start. */
        struct kv_compact_pointer *cp = &db->compact_pointer[level];
        for (size_t i = v->start[level]; i < v->start[level + 1] && !one; i++) {
            const kv_table_meta *m = &v->tables[i]->meta;
            if (!cp->have || kv_key_cmp(m->largest, m->largest_len, cp->key, cp->len) > 0)
                one = v->tables[i];
        }
        if (!one)
            one = v->tables[v->start[level]];
        uint8_t *k = malloc(one->meta.largest_len + 1);
        if (k) {
            memcpy(k, one->meta.largest, one->meta.largest_len);
            free(cp->key);
            cp->key = k;
            cp->len = one->meta.largest_len;
            cp->have = 1;
        }
    }
    pthread_mutex_unlock(&db->mu);
    struct compaction c;
    int rc = setup(&c, v, level, NULL, 0, NULL, 0, one);
    if (rc == KV_OK && c.nin)
        rc = run_compaction(db, &c);
    compaction_free(&c);
    return rc;
}

int kv_compact_manual(kv_db *db, const uint8_t *lo, size_t lolen, const uint8_t *hi,
                      size_t hilen)
{
    /* Down to the deepest level that holds anything (at least level 1),
     * one level at a time. */
    struct kv_version *v = kv_db_ref_version(db);
    int deepest = 1;
    for (int l = 1; l < KV_LEVELS; l++)
        if (v->start[l + 1] > v->start[l])
            deepest = l;
    kv_version_unref(v);
    int rc = KV_OK;
    for (int l = 0; rc == KV_OK && l < deepest && l < KV_LEVELS - 1; l++) {
        struct compaction c;
        v = kv_db_ref_version(db);
        rc = setup(&c, v, l, lo, lolen, hi, hilen, NULL);
        if (rc == KV_OK && c.nlevel)
            rc = run_compaction(db, &c);
        compaction_free(&c);
    }
    /* The deepest level's tables in range that kept versions or tombstones
     * for snapshots: each rewritten on its own, in place (a level's tables
     * are disjoint, so one table's output cannot overlap its neighbours),
     * dropping what no snapshot needs any more. */
    while (rc == KV_OK) {
        struct compaction c;
        v = kv_db_ref_version(db);
        pthread_mutex_lock(&db->mu);
        uint64_t horizon = kv_db_oldest_snapshot(db);
        pthread_mutex_unlock(&db->mu);
        struct kv_table *one = NULL;
        for (size_t i = v->start[deepest]; i < v->start[deepest + 1] && !one; i++) {
            const kv_table_meta *m = &v->tables[i]->meta;
            if ((m->flags & KV_TABLE_SNAPSHOT_PINNED) && m->max_seq <= horizon &&
                overlaps(m, lo, lolen, hi, hilen))
                one = v->tables[i];
        }
        if (!one) {
            kv_version_unref(v);
            break;
        }
        memset(&c, 0, sizeof c);
        c.level = c.out_level = deepest;
        c.v = v;
        if (!(c.in = malloc(sizeof *c.in)))
            rc = KV_ENOMEM;
        else {
            c.in[c.nin++] = one;
            c.nlevel = 1;
            rc = run_compaction(db, &c);
        }
        compaction_free(&c);
    }
    return rc;
}
