/* compact.c - leveled compaction: picking what to merge, and running it
 * (the tables themselves are written by builder.c).
 *
 * Level 0 holds flushed memtables, whose ranges overlap. Levels 1.. hold
 * disjoint ranges, each level ten times the size of the one above: the
 * sizes are worked out from the largest level (dynamic_level_bytes), or
 * fixed from level 1's `max_bytes_for_level_base` (kv_level_shape). Level 0
 * merges into the base level, the levels above it being empty. A
 * compaction merges some tables of level L with the tables of the level
 * below that overlap them, and writes tables of about `target_file_size`
 * bytes there:
 *
 * - L0 -> base when level 0 holds `l0_compaction_trigger` tables: all of
 *   them (they overlap each other) and the base-level tables under their
 *   range;
 * - Ln -> Ln+1 when level n is over its size: one table, taken round-robin
 *   through the key space, and the level-n+1 tables under it.
 *
 * The level with the highest ratio (tables / trigger, bytes / target) goes
 * first. The inputs are merged by the merging iterator (merge.h), which
 * also holds the rule of which versions are dropped (kv_dropper_add:
 * range tombstones, merge operands, the compaction filter and TTL too); a
 * large compaction is cut into parts at table boundaries of the output
 * level, one per background job free, each merged on a thread of its own
 * (struct part), unless its inputs hold range tombstones. Several
 * compactions run at once on the job threads (background.c), each having
 * claimed its inputs and output range (kv_compact_claim). The inputs' range tombstones are
 * unioned: all of them decide which entries go, and those some snapshot
 * or some lower level still needs go to the outputs, each fragment to the
 * output that holds the keys around it (part_ranges, part_cut). Each output
 * table gets a new filter sized for exactly its entries. The result is one
 * manifest transaction (inputs out, outputs in); input files are deleted
 * once no reader holds them (version.h). kv_compact_range, at the end,
 * compacts a key range on request. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


#include "db.h"
#include "merge.h"
#include "order.h"
#include "dbfiles.h"
#include "util/ikey.h"
#include "util/error.h"
#include "util/hash.h"

/* ---- one compaction ------------------------------------------------------------------------ */

struct compaction {
    int level;                /* inputs from level and level + 1 */
    int out_level;            /* level + 1, or level for a rewrite in place */
    /* The sorted run of out_level the output joins (version.h): one it
     * merges with, or KV_RUN_NEW, a run of its own, newer than every run
     * of out_level, whose id is its first table's number (set at commit). */
    uint64_t out_run;
    struct kv_version *v;     /* pinned while it runs */
    struct kv_table **in;     /* level's inputs, then level + 1's */
    size_t nin, nlevel;       /* all, and those of `level` */
    double bits;              /* the output's filter bits per key (kv_filter_bits) */
    /* The inputs' range tombstones (NULL: none): all of them, which decide
     * what the entries lose, and those the output keeps (compact_keep). */
    kv_rtset *rt_all, *rt_out;
    int flushes; /* runs on the flush thread: flushes a waiting memtable meanwhile */
    int claimed; /* by a job (kv_compact_claim): counted in compactions_running there */
    /* Lazy leveling, a new run of the level above the deepest: the deepest
     * level, whose guards (guard_passed) cut the outputs; 0: none. */
    int guard_level;
};

/* A compaction a background job claimed (kv_compact_claim): its inputs are
 * busy and its output range is in db->claims until kv_compact_run ends it. */
struct kv_compaction {
    struct compaction c;
};

#define KV_RUN_NEW UINT64_MAX

static void compaction_free(struct compaction *c)
{
    kv_rtset_unref(c->rt_all);
    kv_rtset_unref(c->rt_out);
    free(c->in);
    kv_version_unref(c->v);
    memset(c, 0, sizeof *c);
}

static int overlaps(const kv_comparator *cmp, const kv_table_meta *m, const uint8_t *lo,
                    size_t lolen, const uint8_t *hi, size_t hilen)
{
    return (!lo || kv_sst_cmp(cmp, m->largest, m->largest_len, lo, lolen) >= 0) &&
           (!hi || kv_sst_cmp(cmp, m->smallest, m->smallest_len, hi, hilen) <= 0);
}

/* Adds the tables of level `l` that overlap [lo, hi] (NULL: open) to c. */
static int add_overlapping(struct compaction *c, int l, const uint8_t *lo, size_t lolen,
                           const uint8_t *hi, size_t hilen)
{
    const struct kv_version *v = c->v;
    for (size_t i = v->start[l]; i < v->start[l + 1]; i++) {
        if (!overlaps(v->cmp, &v->tables[i]->meta, lo, lolen, hi, hilen))
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
        if (!*lo || kv_sst_cmp(c->v->cmp, m->smallest, m->smallest_len, (*lo)->smallest,
                               (*lo)->smallest_len) < 0)
            *lo = m;
        if (!*hi || kv_sst_cmp(c->v->cmp, m->largest, m->largest_len, (*hi)->largest,
                               (*hi)->largest_len) > 0)
            *hi = m;
    }
}

/* The deepest level of v holding a table; 0 when only level 0 does. */
static int deepest_level(const struct kv_version *v)
{
    for (int l = KV_LEVELS - 1; l > 0; l--)
        if (v->start[l + 1] > v->start[l])
            return l;
    return 0;
}

static int lazy(const kv_db *db)
{
    return db->o.compaction_style == KV_COMPACTION_LAZY_LEVELED;
}

/* Sets up c for level `level`: level's tables overlapping [lo, hi] (all of
 * them with NULLs, and all of them always for a level of several sorted
 * runs: a newer run's version could not move down past an older one's;
 * for levels >= 1 `one` picks a single table instead), then the
 * overlapping tables of the level it merges into: the next one, or for
 * level 0 the base level (kv_level_shape; the levels between are empty).
 * Under lazy leveling an output above the deepest level holding data is a
 * new sorted run there, merged with nothing (doc/database.md, "Compaction
 * styles"). 0 when there is nothing. */
static int setup(struct compaction *c, const kv_db *db, struct kv_version *v, int level,
                 const uint8_t *lo, size_t lolen, const uint8_t *hi, size_t hilen,
                 struct kv_table *one)
{
    memset(c, 0, sizeof *c);
    c->level = level;
    c->out_level = level + 1;
    c->flushes = 1;
    if (level == 0) {
        struct kv_shape shape;
        kv_level_shape(db, v, &shape);
        c->out_level = shape.base;
    }
    c->v = v;
    if (level > 0 && kv_version_level_runs(v, level) > 1) {
        one = NULL; /* every run, whole */
        lo = hi = NULL;
    }
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
    if (lazy(db) && c->out_level < deepest_level(v)) {
        c->out_run = KV_RUN_NEW;
        int deepest = deepest_level(v);
        if (c->out_level + 1 == deepest && kv_version_level_runs(v, deepest) == 1)
            c->guard_level = deepest;
        return rc;
    }
    /* Merged with the output level's tables in range, from every run it
     * holds: none of its tables left out holds a key of the output, so the
     * output may join any of its runs; the oldest keeps the deepest level
     * one run under lazy leveling, and is run 0 under leveled. */
    size_t r0 = v->level_run[c->out_level], r1 = v->level_run[c->out_level + 1];
    c->out_run = r1 > r0 ? kv_version_run_id(v, r1 - 1) : 0;
    /* With several runs there, a table taken from one may reach past the
     * range into a table of another that was not taken, which the output
     * would then overlap in the run it joins: widened until no table of
     * the level outside the range overlaps it. */
    while (rc == KV_OK && c->nin) {
        const kv_table_meta *a, *b;
        range_of(c, 0, c->nin, &a, &b);
        size_t before = c->nin;
        c->nin = c->nlevel;
        rc = add_overlapping(c, c->out_level, a->smallest, a->smallest_len, b->largest,
                             b->largest_len);
        if (c->nin == before || r1 - r0 < 2)
            break;
    }
    return rc;
}

void kv_level_shape(const kv_db *db, const struct kv_version *v, struct kv_shape *s)
{
    const int bottom = KV_LEVELS - 1;
    const double base_max = (double)db->o.max_bytes_for_level_base;
    s->target[0] = 0;
    for (int l = 0; l < KV_LEVELS; l++)
        s->bytes[l] = kv_version_level_bytes(v, l);
    if (!db->o.dynamic_level_bytes) {
        /* Fixed: level 1 holds base_max, each deeper level ten times more. */
        s->base = 1;
        double t = base_max;
        for (int l = 1; l < KV_LEVELS; l++, t *= 10)
            s->target[l] = t;
        return;
    }
    /* Dynamic: the sizes follow the largest level (the bottom one, once
     * the tree has grown), each level above it a tenth of the one below.
     * Level 0 merges into the base level: the one whose share so reckoned
     * is nearest base_max on a log scale, within (base_max / sqrt(10),
     * base_max * sqrt(10)], the levels above it staying empty. (RocksDB
     * takes the shallowest whose share is at most base_max, which can
     * leave a base level of a few percent of base_max above one barely
     * larger: a level that costs every missing Get a probe and every byte
     * a rewrite at a ratio of about 2, for nothing.) */
    const double hi = base_max * 3.1622776601683795, lo = hi / 10;
    int first = 0;
    double biggest = 0;
    for (int l = 1; l < KV_LEVELS; l++) {
        double b = (double)s->bytes[l];
        if (b > 0 && !first)
            first = l;
        if (b > biggest)
            biggest = b;
    }
    int base = first ? first : bottom;
    double size = biggest; /* what level `base` would hold under that rule */
    for (int l = bottom; l > base; l--)
        size /= 10;
    if (size <= lo) {
        /* More levels hold data than the size needs (a young tree, or
         * one written under fixed sizes): the shallowest of them stays
         * the base, which never moves down, and the ratios below it
         * stretch past ten. */
        size = lo;
    } else {
        while (base > 1 && size > hi) {
            base--;
            size /= 10;
        }
        if (size > hi)
            size = hi; /* level 1 would be larger still: the levels below take it */
    }
    s->base = base;
    for (int l = 1; l < base; l++)
        s->target[l] = base_max; /* empty */
    /* No level's target under base_max: a base level smaller than a
     * level-0 compaction's input would send every byte through one more
     * merge for nothing. */
    for (int l = base; l < KV_LEVELS; l++, size *= 10)
        s->target[l] = size > base_max ? size : base_max;
}

/* The level that most needs a compaction, or -1, leaving out the levels
 * whose bit is set in `skip` (those a background job could not claim
 * from). Under mu.
 *
 * Leveled: level 0 by its tables against l0_compaction_trigger, each level
 * from the base down by its bytes against its target; a level of several
 * sorted runs (written under lazy leveling) always needs one, which merges
 * them all down (in place for the last level).
 *
 * Lazy leveling: the same for level 0 and the deepest level holding data;
 * a level above that one (tiered) by its runs against runs_per_level (K)
 * and its bytes against K times its target: it merges once it holds K
 * runs or that many bytes. A tiered level takes a run at a time and
 * writes each byte once; the deepest level is rewritten by each merge from
 * the level above it, so the more that level gathers first, the fewer
 * times the deepest level's bytes are written (its write amplification
 * falls from about ten, the size ratio, towards 1 + 10 / K), while K
 * bounds the runs a read probes and the bytes held twice. */
static int pick_level(const kv_db *db, const struct kv_version *v, unsigned skip)
{
    double best = 1.0;
    int level = -1;
    double s0 = (double)(v->start[1] - v->start[0]) / (double)db->o.l0_compaction_trigger;
    if (!(skip & 1u) && s0 >= best) {
        best = s0;
        level = 0;
    }
    struct kv_shape shape;
    kv_level_shape(db, v, &shape);
    int last = deepest_level(v);
    const double k = (double)db->o.runs_per_level;
    for (int l = 1; l < KV_LEVELS; l++) {
        size_t runs = kv_version_level_runs(v, l);
        int sized = l < KV_LEVELS - 1 && l >= shape.base;
        double s = sized ? (double)shape.bytes[l] / shape.target[l] : 0;
        if (lazy(db) && l < last && runs) {
            /* Tiered: K runs score 1 and go (best starts at 1, and a
             * score must pass it: a hair above). */
            s = sized ? s / k : 0;
            double sr = (double)runs / k;
            if (sr >= 1 && sr * 1.0000001 > s)
                s = sr * 1.0000001;
        } else if (runs > 1 && s < 1.0000001) {
            s = 1.0000001; /* several runs where one belongs: merge them */
        }
        if (!(skip & (1u << l)) && s > best) {
            best = s;
            level = l;
        }
    }
    return level;
}

/* Under mu: may a background job take t as an input? Not while another
 * running compaction holds it (kv_table.busy). Every picker asks this of
 * the tables it would take. */
static int kv_table_free_for_job(const struct kv_table *t)
{
    return !t->busy;
}

/* ---- blob garbage collection ----------------------------------------------------------- */

/* Is some live blob file of v past blob_gc_threshold (and not yet all
 * garbage, which goes by itself) numbered within [lo, hi]? v->blobs is
 * sorted by number. */
static int gc_file_within(const kv_db *db, const struct kv_version *v, uint64_t lo, uint64_t hi)
{
    size_t a = 0, z = v->nblobs;
    while (a < z) { /* the first file numbered >= lo */
        size_t mid = a + (z - a) / 2;
        if (v->blobs[mid]->number < lo)
            a = mid + 1;
        else
            z = mid;
    }
    for (size_t i = a; i < v->nblobs && v->blobs[i]->number <= hi; i++) {
        const struct kv_blob *b = v->blobs[i];
        if (kv_blob_garbage_ratio(b) >= db->o.blob_gc_threshold &&
            atomic_load_explicit(&b->garbage_records, memory_order_relaxed) < b->records)
            return 1;
    }
    return 0;
}

/* The table blob GC rewrites next: one whose range of blob files holds a
 * file past the threshold and that was not found clean of such files since
 * the last one passed it (gc_gen). A table's range is all it records, so
 * a table may be rewritten that refers to none of them: it is then clean,
 * and not taken again until another file passes. Level-0 tables are not
 * rewritten in place (their order is their age): for one of them, *level
 * is 0 and the whole level goes down. NULL when there is nothing to do.
 * Under mu. */
static struct kv_table *gc_candidate(const kv_db *db, const struct kv_version *v, int *level)
{
    if (!v->nblobs)
        return NULL;
    for (size_t i = 0; i < v->n; i++) {
        struct kv_table *t = v->tables[i];
        if (!kv_table_free_for_job(t) || !t->meta.blob_lo ||
            atomic_load_explicit(&t->gc_clean_gen, memory_order_relaxed) == db->gc_gen)
            continue;
        if (gc_file_within(db, v, t->meta.blob_lo, t->meta.blob_hi)) {
            *level = (int)t->meta.level;
            return t;
        }
    }
    return NULL;
}

int kv_compaction_needed(const kv_db *db)
{
    int level;
    return pick_level(db, db->current, 0) >= 0 || gc_candidate(db, db->current, &level) != NULL;
}

/* One part of a compaction: the inputs' entries whose user keys lie in
 * (after, upto] (NULL: open), merged into output tables of their own. A
 * large compaction is cut into two parts at a user key, the second merged
 * on a thread of its own (subcompaction): the parts share no user key, so
 * neither needs the other's state, and the outputs of both, in key order,
 * make the level's new tables. */
struct part {
    kv_db *db;
    const struct compaction *c;
    uint64_t horizon;
    const kv_table_meta *after, *upto; /* bounds by a table's largest user key */
    int flushes; /* may flush a waiting memtable (part 0 on the flush thread) */
    struct kv_table **outs;
    size_t nouts;
    uint64_t out_bytes;
    struct kv_blob_out bo;      /* values it extracts or relocates, garbage it finds */
    int rc;
    char text[KV_DB_TEXT];      /* rc's text, from the thread that met it */
    _Atomic int done;
};

/* Keeps a finished output table in p. */
static int part_keep(struct part *p, struct kv_table *t)
{
    struct kv_table **n = realloc(p->outs, (p->nouts + 1) * sizeof *n);
    if (!n) {
        atomic_store(&t->obsolete, 1);
        kv_table_unref(t);
        return KV_ENOMEM;
    }
    p->outs = n;
    p->outs[p->nouts++] = t;
    p->out_bytes += t->meta.file_size;
    return KV_OK;
}

/* The blob reference the entry of source s holds; KV_ECORRUPT, naming the
 * table, when it does not decode. */
static int decode_ref(const struct kv_merge_source *s, const void *val, size_t vlen,
                      kv_blob_ref *ref)
{
    if (kv_blob_ref_decode(val, vlen, ref) != KV_OK)
        return kv_error_set(KV_ECORRUPT, "%s: a blob reference that does not decode",
                            s->t[s->i]->path);
    return KV_OK;
}

/* What a kept entry's value becomes in the output (blob.h): a blob
 * reference into a file past blob_gc_threshold is relocated, one into
 * any other file is copied as it is (*number: its file), and a value of
 * min_blob_size bytes or more still in a table is extracted to a blob
 * file. *nrlen is set (the reference in nref, *number its file) when the
 * entry must be written anew under kind KV_KIND_BLOB; else 0. */
static int blob_value(struct part *p, const struct kv_merge_source *m, const uint8_t *ukey,
                      size_t ulen, int *kind, const uint8_t **val, size_t *vlen, uint8_t *nref,
                      size_t *nrlen, uint64_t *number)
{
    kv_db *db = p->db;
    *nrlen = 0;
    *number = 0;
    if (*kind == KV_KIND_VALUE && db->o.min_blob_size != KV_BLOB_NEVER &&
        *vlen >= db->o.min_blob_size && ulen <= KV_BLOB_KEY_MAX)
        return kv_blob_out_put(&p->bo, ukey, ulen, *val, *vlen, nref, nrlen, number);
    if (*kind != KV_KIND_BLOB)
        return KV_OK;
    kv_blob_ref ref;
    int rc = decode_ref(m, *val, *vlen, &ref);
    if (rc != KV_OK)
        return rc;
    const struct kv_version *v = p->c->v;
    struct kv_blob *from = kv_blob_find(v->blobs, v->nblobs, ref.number);
    if (!from)
        return kv_error_set(KV_ECORRUPT, "%s: a reference to blob file %llu, which is not live",
                            m->t[m->i]->path, (unsigned long long)ref.number);
    if (kv_blob_garbage_ratio(from) >= db->o.blob_gc_threshold)
        return kv_blob_out_relocate(&p->bo, from, &ref, ukey, ulen, nref, nrlen, number);
    *number = ref.number;
    return KV_OK;
}

/* kv_builder_add of an entry whose kind becomes KV_KIND_BLOB: its internal
 * key with the trailer rewritten. */
static int add_rekinded(struct kv_builder *b, const uint8_t *ikey, size_t ilen,
                        const uint8_t *ukey, size_t ulen, uint64_t hash, uint64_t seq,
                        const uint8_t *ref, size_t rlen)
{
    uint8_t stack[256];
    uint8_t *k = ilen <= sizeof stack ? stack : malloc(ilen);
    if (!k)
        return KV_ENOMEM;
    memcpy(k, ikey, ilen - KV_IKEY_TRAILER);
    kv_ikey_put_trailer(k + ilen - KV_IKEY_TRAILER, seq, KV_KIND_BLOB);
    int rc = kv_builder_add(b, k, ilen, ukey, ulen, hash, seq, ref, rlen);
    if (k != stack)
        free(k);
    return rc;
}

/* What a part's merge carries from one entry to the next. */
struct part_out {
    struct part *p;
    struct kv_dropper drop;          /* the shadowing rule's state (merge.h) */
    struct kv_builder b;             /* the output table being written, while building */
    int building;                    /* b holds an open table */
    uint64_t hash;                   /* of the current user key */
    const struct kv_merge_source *s; /* the entry kv_dropper_add was given */
    uint8_t *ikey;                   /* an entry made anew: its internal key */
    size_t icap;
    /* The range tombstone fragments (c->rt_out), handed to the output that
     * holds the keys around them: fi the next one, fend the end of the last
     * one in the table being written (frag: there is one). */
    size_t fi, nf;
    const uint8_t *fend;
    size_t fendlen;
    int frag;
    /* guard_passed's walk over the guard level: the index of its next
     * table plus one (0: not begun), and the bytes of those before it. */
    size_t gnext;
    uint64_t gbytes;
};

/* Guards: under lazy leveling, the runs written into the level above the
 * deepest are cut where a table of the deepest level ends, once per
 * GUARD_TABLES * target_file_size of the deepest level's bytes counted
 * from its first table. The cuts depend on the deepest level alone, which
 * changes only when the runs above merge into it (or the tree grows a
 * level), so the runs gathered in between share them: a slice
 * (claim_slice) takes each run's tables between two guards and the
 * deepest level's tables there, and nothing beyond, however many runs
 * there are. */
#define GUARD_TABLES 4

/* Moves o's walk over the guard level to `next` (the key about to be
 * written): 1 when it passed a guard, the end of a table of that level
 * where the bytes so far cross a multiple of the guard spacing. */
static int guard_passed(const struct part *p, struct part_out *o, const uint8_t *next, size_t nlen)
{
    const struct compaction *c = p->c;
    const struct kv_version *v = c->v;
    const uint64_t every = GUARD_TABLES * (uint64_t)p->db->o.target_file_size;
    const size_t end = v->start[c->guard_level + 1];
    int passed = 0;
    if (!o->gnext)
        o->gnext = v->start[c->guard_level] + 1;
    for (; o->gnext - 1 < end; o->gnext++) {
        const kv_table_meta *m = &v->tables[o->gnext - 1]->meta;
        if (kv_sst_cmp(p->db->cmp, m->largest, m->largest_len, next, nlen) >= 0)
            break;
        uint64_t before = o->gbytes / every;
        o->gbytes += m->file_size;
        passed |= o->gbytes / every != before;
    }
    return passed;
}

/* Ends the output table being written, between two user keys, when it has
 * reached target_file_size (so that the ranges of a level's tables never
 * share a key) or `next` is past a guard (guard_passed), or at the end
 * (`last`). A table that holds a range tombstone fragment ends only before
 * a key past the fragment's end: its range covers the fragment, and the
 * next table's must start after it. */
static int part_cut(struct part *p, struct part_out *o, int last, const uint8_t *next, size_t nlen)
{
    int guard = !last && p->c->guard_level && guard_passed(p, o, next, nlen);
    if (!o->building || (!last && !guard && o->b.bytes < p->db->o.target_file_size))
        return KV_OK;
    if (!last && o->frag && kv_sst_cmp(p->db->cmp, next, nlen, o->fend, o->fendlen) <= 0)
        return KV_OK;
    struct kv_table *t;
    o->building = 0;
    o->frag = 0;
    int rc = kv_builder_finish(&o->b, &t);
    return rc == KV_OK ? part_keep(p, t) : rc;
}

static int part_start(struct part *p, struct part_out *o)
{
    if (o->building)
        return KV_OK;
    int rc = kv_builder_start(p->db, &o->b, (uint32_t)p->c->out_level, p->c->bits,
                              "kv: compaction");
    o->building = rc == KV_OK;
    return rc;
}

/* Hands the output the fragments that start before `upto` (NULL: all that
 * are left). */
static int part_ranges(struct part *p, struct part_out *o, const uint8_t *upto, size_t uplen)
{
    const kv_rtset *rt = p->c->rt_out;
    for (; o->fi < o->nf; o->fi++) {
        kv_rt_fragment f;
        kv_rtset_fragment(rt, o->fi, &f);
        if (upto && kv_sst_cmp(p->db->cmp, f.start, f.slen, upto, uplen) >= 0)
            return KV_OK;
        int rc = part_start(p, o);
        if (rc == KV_OK)
            rc = kv_builder_add_range(&o->b, &f);
        if (rc != KV_OK)
            return rc;
        o->fend = f.end; /* fragments are sorted and disjoint: the last ends last */
        o->fendlen = f.elen;
        o->frag = 1;
        if (f.seqs[0] > p->horizon) /* with no snapshot, fewer would stay */
            o->b.meta.flags |= KV_TABLE_SNAPSHOT_PINNED;
    }
    return KV_OK;
}

/* Writes the kept entry of source s to the output, its value as
 * blob_value makes it. */
static int part_add(struct part *p, struct part_out *o, const struct kv_merge_source *s, int pinned)
{
    int rc, kind = s->kind;
    const uint8_t *val = s->val;
    size_t vlen = s->vlen;
    if ((rc = part_start(p, o)) != KV_OK)
        return rc;
    uint8_t nref[KV_BLOB_REF_MAX];
    size_t nrlen = 0;
    uint64_t number = 0;
    if ((rc = blob_value(p, s, s->key, s->klen, &kind, &val, &vlen, nref, &nrlen, &number)) !=
        KV_OK)
        return rc;
    if (nrlen) /* extracted or relocated: the new reference */
        rc = add_rekinded(&o->b, s->ikey, s->ilen, s->key, s->klen, o->hash, s->seq, nref, nrlen);
    else
        rc = kv_builder_add(&o->b, s->ikey, s->ilen, s->key, s->klen, o->hash, s->seq, val, vlen);
    if (rc != KV_OK)
        return rc;
    if (number)
        kv_builder_note_blob(&o->b, number);
    if (pinned)
        o->b.meta.flags |= KV_TABLE_SNAPSHOT_PINNED;
    return KV_OK;
}

/* Writes an entry the dropper made anew (a merged value or operand, a
 * filtered value, a tombstone for an expired or removed one) for the
 * dropper's current key; a large value goes to a blob file. */
static int part_add_new(struct part *p, struct part_out *o, const struct kv_dropper_out *e)
{
    const uint8_t *key = o->drop.key;
    size_t klen = o->drop.len;
    int rc = part_start(p, o);
    if (rc != KV_OK)
        return rc;
    size_t need = 2 * klen + 2 + KV_IKEY_TRAILER;
    if (need > o->icap) {
        uint8_t *n = realloc(o->ikey, need);
        if (!n)
            return KV_ENOMEM;
        o->ikey = n;
        o->icap = need;
    }
    size_t plen = kv_ikey_put_prefix(o->ikey, key, klen);
    kv_db *db = p->db;
    if (e->kind == KV_KIND_VALUE && db->o.min_blob_size != KV_BLOB_NEVER &&
        e->vlen >= db->o.min_blob_size && klen <= KV_BLOB_KEY_MAX) {
        uint8_t nref[KV_BLOB_REF_MAX];
        size_t nrlen = 0;
        uint64_t number = 0;
        if ((rc = kv_blob_out_put(&p->bo, key, klen, e->val, e->vlen, nref, &nrlen, &number)) !=
            KV_OK)
            return rc;
        kv_ikey_put_trailer(o->ikey + plen, e->seq, KV_KIND_BLOB);
        rc = kv_builder_add(&o->b, o->ikey, plen + KV_IKEY_TRAILER, key, klen, o->hash, e->seq,
                            nref, nrlen);
        if (rc == KV_OK)
            kv_builder_note_blob(&o->b, number);
    } else {
        kv_ikey_put_trailer(o->ikey + plen, e->seq, e->kind);
        rc = kv_builder_add(&o->b, o->ikey, plen + KV_IKEY_TRAILER, key, klen, o->hash, e->seq,
                            e->val, e->vlen);
    }
    if (rc == KV_OK && e->pinned)
        o->b.meta.flags |= KV_TABLE_SNAPSHOT_PINNED;
    return rc;
}

/* The dropper's output (kv_dropper_add, kv_dropper_end). */
static int part_emit(void *ctx, const struct kv_dropper_out *e)
{
    struct part_out *o = ctx;
    struct part *p = o->p;
    if (e->keep)
        return e->same ? part_add(p, o, o->s, e->pinned) : part_add_new(p, o, e);
    if (e->kind != KV_KIND_BLOB)
        return KV_OK;
    /* A dropped reference: its record is garbage from this commit on. */
    kv_blob_ref ref;
    int rc = decode_ref(o->s, e->val, e->vlen, &ref);
    if (rc != KV_OK)
        return rc;
    return kv_blob_out_garbage(&p->bo, ref.number, kv_blob_record_size(o->drop.len, ref.size));
}

/* The dropper's question: could a table below the output hold key? */
static int part_below(void *ctx, const uint8_t *key, size_t klen)
{
    const struct part_out *o = ctx;
    const struct compaction *c = o->p->c;
    return kv_version_key_older(c->v, c->out_level, c->out_run, key, klen);
}

/* The dropper's blob reads (merges over a blob value, the compaction filter). */
static int part_blob(void *ctx, const uint8_t *key, size_t klen, const uint8_t *ref, size_t rlen,
                     void **val, size_t *vlen)
{
    const struct part_out *o = ctx;
    const struct kv_version *v = o->p->c->v;
    return kv_blob_get(o->p->db, v->blobs, v->nblobs, ref, rlen, key, klen, val, vlen, NULL, NULL);
}

/* One entry of the merge, in internal-key order: kept in the output,
 * dropped or made anew, as the shadowing rule says (kv_dropper_add). */
static int part_entry(struct part *p, struct part_out *o, const struct kv_merge_source *s)
{
    const uint8_t *ukey = s->key;
    size_t ulen = s->klen;
    int rc;
    if (!o->drop.have || ulen != o->drop.len || (ulen && memcmp(ukey, o->drop.key, ulen) != 0)) {
        /* The key before is settled (its operands) into the table that
         * holds it; then the fragments before this key; then the cut. */
        if ((rc = kv_dropper_end(&o->drop)) != KV_OK)
            return rc;
        if (o->nf && (rc = part_ranges(p, o, ukey, ulen)) != KV_OK)
            return rc;
        o->hash = kv_db_hash(p->db, ukey, ulen);
        if ((rc = part_cut(p, o, 0, ukey, ulen)) != KV_OK)
            return rc;
    }
    o->s = s;
    return kv_dropper_add(&o->drop, ukey, ulen, s->seq, s->kind, s->val, s->vlen);
}

/* The length of the merge source that starts at c->in[i]: a level-0
 * table alone; the tables of one sorted run of a deeper level, in key order
 * and disjoint, together (add_overlapping takes them in search order). */
static size_t source_len(const struct compaction *c, size_t i)
{
    const kv_table_meta *m = &c->in[i]->meta;
    size_t j = i + 1;
    while (m->level && j < c->nin && c->in[j]->meta.level == m->level &&
           c->in[j]->meta.run == m->run)
        j++;
    return j - i;
}

/* How many merge sources c's inputs make (source_len). */
static size_t sources(const struct compaction *c)
{
    size_t n = 0;
    for (size_t i = 0; i < c->nin; i += source_len(c, i))
        n++;
    return n;
}

/* The merge over c's inputs, positioned at the part's first entry: each
 * level-0 input a source of its own, each sorted run of a deeper level one
 * (source_len). */
static int part_open(const struct part *p, struct kv_merge *mg)
{
    const struct compaction *c = p->c;
    int rc = kv_merge_init(mg, p->db->cmp, p->db->tcmp, sources(c) + 1);
    if (rc != KV_OK)
        return rc;
    for (size_t i = 0, n; i < c->nin; i += n) {
        n = source_len(c, i);
        kv_merge_add_tables(mg, &c->in[i], n);
    }
    if (!p->after)
        return kv_merge_first(mg);
    return kv_merge_seek_past(mg, p->after->largest, p->after->largest_len);
}

/* Merges part p of c (see struct part); its outputs stay in p. */
static int merge_part(struct part *p)
{
    kv_db *db = p->db;
    struct kv_merge mg;
    struct part_out o = {.p = p,
                         .drop = {.horizon = p->horizon,
                                  .db = db,
                                  .rt = p->c->rt_all,
                                  .level = p->c->out_level,
                                  .now = (uint64_t)time(NULL),
                                  .emit = part_emit,
                                  .below = part_below,
                                  .blob = part_blob},
                         .nf = kv_rtset_count(p->c->rt_out)};
    o.drop.ctx = &o;
    struct kv_merge_source *s;
    uint64_t steps = 0;
    int rc = part_open(p, &mg);
    while (rc == KV_OK && (s = kv_merge_top(&mg)) != NULL) {
        if (p->upto &&
            kv_sst_cmp(db->cmp, s->key, s->klen, p->upto->largest, p->upto->largest_len) > 0)
            break; /* the next part's */
        if ((++steps & 1023) == 0) {
            if (atomic_load(&db->stopping)) {
                rc = KV_EBUSY; /* closing: abandon, nothing committed */
                break;
            }
            if (p->flushes && (rc = kv_db_flush_pending(db)) != KV_OK)
                break;
        }
        if ((rc = part_entry(p, &o, s)) == KV_OK)
            rc = kv_merge_step(&mg);
    }
    if (rc == KV_OK) /* the last key's operands, then the fragments after it */
        rc = kv_dropper_end(&o.drop);
    if (rc == KV_OK && o.nf)
        rc = part_ranges(p, &o, NULL, 0);
    kv_merge_free(&mg);
    kv_dropper_free(&o.drop);
    free(o.ikey);
    if (rc == KV_OK)
        rc = part_cut(p, &o, 1, NULL, 0);
    if (o.building)
        kv_builder_abandon(&o.b);
    if (rc == KV_OK) /* synced before the commit names them */
        rc = kv_blob_out_finish(&p->bo);
    return rc;
}

/* The body of a part's own thread. */
static void *part_thread(void *arg)
{
    struct part *p = arg;
    unsigned long long mark = kv_error_mark();
    p->rc = merge_part(p);
    if (p->rc != KV_OK)
        kv_db_keep_text(p->db, p->text, "compaction", mark, p->rc);
    atomic_store(&p->done, 1);
    return NULL;
}

/* split_points for a compaction whose outputs are cut at guards: at most
 * k parts, cut at guards (guard_passed) inside the inputs' range, spread
 * evenly, so that a part boundary cuts no run between two guards. */
static size_t guard_points(const kv_db *db, const struct compaction *c, size_t k,
                           const kv_table_meta **cuts)
{
    const struct kv_version *v = c->v;
    const uint64_t every = GUARD_TABLES * (uint64_t)db->o.target_file_size;
    const kv_table_meta *lo, *hi;
    range_of(c, 0, c->nin, &lo, &hi);
    size_t first = v->start[c->guard_level], end = v->start[c->guard_level + 1], len = 0;
    const kv_table_meta **g = malloc((end - first + 1) * sizeof *g);
    if (!g)
        return 1; /* one part: nothing lost but the parallelism */
    uint64_t bytes = 0;
    for (size_t i = first; i < end; i++) {
        const kv_table_meta *m = &v->tables[i]->meta;
        uint64_t before = bytes / every;
        bytes += m->file_size;
        if (bytes / every != before &&
            kv_sst_cmp(db->cmp, m->largest, m->largest_len, lo->smallest, lo->smallest_len) >= 0 &&
            kv_sst_cmp(db->cmp, m->largest, m->largest_len, hi->largest, hi->largest_len) < 0)
            g[len++] = m;
    }
    if (len + 1 < k)
        k = len + 1;
    size_t n = 0;
    for (size_t j = 1; j < k; j++) /* len * j / k: distinct and below len as k <= len + 1 */
        cuts[n++] = g[len * j / k];
    free(g);
    return n + 1;
}

/* The longest merge source (source_len) of deeper-level tables among
 * c->in[from, to): its first index in *at and its length in *len (0:
 * none). */
static void longest_run(const struct compaction *c, size_t from, size_t to, size_t *at, size_t *len)
{
    *len = 0;
    for (size_t i = from, n; i < to; i += n) {
        n = source_len(c, i);
        if (i + n > to)
            n = to - i;
        if (c->in[i]->meta.level && n > *len) {
            *at = i;
            *len = n;
        }
    }
}

/* Where to cut c into at most `want` parts (cuts[0, k - 1), ascending; k
 * returned): at the largest keys of output-level inputs spread evenly
 * through them (or, with fewer than two of those, of a level-n input run
 * of several), so that each part holds about as many. Fewer parts when c
 * is small (each part should take at least two output tables' worth, so
 * that a thread pays), when the parts together would keep more than half
 * of the budget of open table files open, or when there are too few
 * tables to cut at; 1 (no cut) at worst. */
static size_t split_points(const kv_db *db, const struct compaction *c, uint64_t in_bytes,
                           size_t want, const kv_table_meta **cuts)
{
    size_t k = want;
    uint64_t by_size = in_bytes / (2 * (uint64_t)db->o.target_file_size);
    if (by_size < k)
        k = (size_t)by_size;
    /* Each part keeps a file of each input run open (a level-0 table, or
     * the current table of a deeper level, of each run). */
    size_t runs = sources(c);
    size_t by_files = (size_t)db->o.max_open_files / (2 * runs);
    if (by_files < k)
        k = by_files;
    if (c->guard_level)
        return guard_points(db, c, k, cuts);
    /* The cuts come from one sorted run, so that they ascend: the
     * longest of the output level's, else of the input level's (a level of
     * several runs gives several; their tables in search order, one run
     * after another, would not). */
    size_t len = 0, at = 0;
    longest_run(c, c->nlevel, c->nin, &at, &len);
    if (len < 2 && c->level > 0)
        longest_run(c, 0, c->nlevel, &at, &len);
    struct kv_table *const *seq = c->in + at;
    if (len < k)
        k = len;
    if (k < 2)
        return 1;
    /* (len - 1) * j / k for j = 1 .. k - 1: distinct as k <= len, and all
     * before the last table, so that every part has one. */
    size_t n = 0;
    for (size_t j = 1; j < k; j++) {
        size_t i = (len - 1) * j / k;
        if (!n || cuts[n - 1] != &seq[i]->meta)
            cuts[n++] = &seq[i]->meta;
    }
    return n + 1;
}

/* Could a table of a run of v's level `level` older than `run` (a smaller
 * id), or of a deeper level, hold a key of [start, end)? */
static int range_below(const struct kv_version *v, int level, uint64_t run, const uint8_t *start,
                       size_t slen, const uint8_t *end, size_t elen)
{
    for (size_t r = v->level_run[level]; r < v->nruns; r++) {
        if (r < v->level_run[level + 1] && kv_version_run_id(v, r) >= run)
            continue;
        /* A run's tables are sorted and disjoint: the first whose largest
         * is at or after start is the only candidate. */
        size_t a = v->run_start[r], z = v->run_start[r + 1];
        a += kv_tables_at_or_after(v->tables + a, z - a, start, slen, v->cmp);
        if (a < v->run_start[r + 1]) {
            const kv_table_meta *m = &v->tables[a]->meta;
            if (kv_sst_cmp(v->cmp, m->smallest, m->smallest_len, end, elen) < 0)
                return 1;
        }
    }
    return 0;
}

struct keep_ctx {
    const struct compaction *c;
    uint64_t horizon;
};

/* kv_rtset_union's keep for a compaction's output (kv_dropper_keep_seqs):
 * the newest sequence at or below the horizon goes too when no table below
 * the output overlaps the fragment. */
static size_t compact_keep(void *ctx, const uint8_t *start, size_t slen, const uint8_t *end,
                           size_t elen, uint64_t *seqs, size_t nseq)
{
    const struct keep_ctx *k = ctx;
    int base = !range_below(k->c->v, k->c->out_level, k->c->out_run, start, slen, end, elen);
    return kv_dropper_keep_seqs(k->horizon, base, seqs, nseq);
}

/* The inputs' range tombstones: c->rt_all and c->rt_out (both NULL when
 * no input has any). */
static int compaction_ranges(kv_db *db, struct compaction *c, uint64_t horizon)
{
    size_t n = 0;
    for (size_t k = 0; k < c->nin; k++)
        n += c->in[k]->rt != NULL;
    if (!n)
        return KV_OK;
    const kv_rtset **sets = malloc(n * sizeof *sets);
    if (!sets)
        return KV_ENOMEM;
    n = 0;
    for (size_t k = 0; k < c->nin; k++)
        if (c->in[k]->rt)
            sets[n++] = c->in[k]->rt;
    int rc = kv_rtset_union(db->cmp, sets, n, NULL, 0, NULL, NULL, &c->rt_all);
    free(sets);
    struct keep_ctx k = {c, horizon};
    if (rc == KV_OK && c->rt_all)
        rc = kv_rtset_union(db->cmp, (const kv_rtset *const *)&c->rt_all, 1, NULL, 0, compact_keep,
                            &k, &c->rt_out);
    return rc;
}

/* Under mu: one more compaction runs (kv_stats). */
static void running_add(kv_db *db)
{
    db->compactions_running++;
    if (db->compactions_running > db->compactions_parallel_max)
        db->compactions_parallel_max = db->compactions_running;
}

/* Under mu: how many parts c may run in: one per background job free
 * now (this thread's the first), counted in threads_busy until the end of
 * run_compaction; max_background_jobs 1 keeps the two of before. */
static size_t parts_begin(kv_db *db, const struct compaction *c)
{
    int jobs = db->o.max_background_jobs;
    db->threads_busy++;
    if (!c->claimed)
        running_add(db);
    int free_jobs = jobs - db->threads_busy;
    return jobs == 1 ? 2 : 1 + (size_t)(free_jobs > 0 ? free_jobs : 0);
}

/* Starts parts[1, n) on threads of their own; returns how many of them
 * run (a thread that cannot start leaves the parts after it to the one
 * before: its `upto` is moved on). */
static size_t parts_start(struct part *parts, size_t n, pthread_t *th)
{
    size_t started = 1;
    for (size_t j = 1; j < n; j++) {
        if (pthread_create(&th[j], NULL, part_thread, &parts[j]) != 0) {
            parts[j - 1].upto = NULL; /* no thread: the part before does the rest */
            break;
        }
        started++;
    }
    return started;
}

/* Waits for parts[1, n): the flush thread keeps flushing meanwhile. The
 * first error (rc's, else a part's) is returned. */
static int parts_wait(kv_db *db, struct part *parts, size_t n, pthread_t *th, int rc)
{
    for (size_t j = 1; j < n; j++) {
        while (parts[0].flushes && !atomic_load(&parts[j].done)) {
            if (rc == KV_OK)
                rc = kv_db_flush_pending(db);
            struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
        }
        pthread_join(th[j], NULL);
        if (rc == KV_OK && parts[j].rc != KV_OK)
            rc = kv_error_set(parts[j].rc, "%s", parts[j].text);
    }
    return rc;
}

/* The last check before a commit: outputs joining run `run` of their
 * level overlap no table of that run that they do not replace (setup
 * takes every such table; one left would hold older versions of keys the
 * output holds, in the same run). KV_ECORRUPT with text when one does:
 * nothing is committed and the inputs stay as they are. */
static int run_still_disjoint(kv_db *db, const struct compaction *c, uint64_t run,
                              struct kv_table *const *outs, size_t nouts)
{
    if (!c->out_level || !nouts)
        return KV_OK;
    const kv_table_meta *lo = &outs[0]->meta, *hi = &outs[nouts - 1]->meta;
    struct kv_version *v = kv_db_ref_version(db);
    int rc = KV_OK;
    for (size_t i = v->start[c->out_level]; rc == KV_OK && i < v->start[c->out_level + 1]; i++) {
        const kv_table_meta *m = &v->tables[i]->meta;
        if (m->run != run ||
            !overlaps(v->cmp, m, lo->smallest, lo->smallest_len, hi->largest, hi->largest_len))
            continue;
        int input = 0;
        for (size_t k = 0; k < c->nin && !input; k++)
            input = c->in[k]->meta.number == m->number;
        if (!input)
            rc = kv_error_set(KV_ECORRUPT,
                              "%s: a compaction from level %d would leave table %llu of level "
                              "%d, run %llu, overlapping its output in that run: not committed",
                              db->path, c->level, (unsigned long long)m->number, c->out_level,
                              (unsigned long long)run);
    }
    kv_version_unref(v);
    return rc;
}

/* The parts' outputs, in key order, committed with c's inputs removed. */
static int commit_parts(kv_db *db, const struct compaction *c, struct part *parts, size_t n)
{
    size_t nouts = 0;
    for (size_t j = 0; j < n; j++)
        nouts += parts[j].nouts;
    struct kv_table **outs = malloc((nouts ? nouts : 1) * sizeof *outs);
    uint64_t *gone = malloc((c->nin ? c->nin : 1) * sizeof *gone);
    struct kv_blob_out **bos = malloc(n * sizeof *bos);
    int rc = KV_ENOMEM;
    if (outs && gone && bos) {
        nouts = 0;
        for (size_t j = 0; j < n; j++) {
            if (parts[j].nouts) /* memcpy wants pointers even for 0 bytes */
                memcpy(outs + nouts, parts[j].outs, parts[j].nouts * sizeof *outs);
            nouts += parts[j].nouts;
            bos[j] = &parts[j].bo;
        }
        for (size_t k = 0; k < c->nin; k++)
            gone[k] = c->in[k]->meta.number;
        /* The run the outputs join; a new one takes its first table's
         * number, larger than every run id of the level (numbers only
         * grow), so it sorts as the newest. */
        uint64_t run = c->out_run;
        for (size_t k = 0; c->out_run == KV_RUN_NEW && k < nouts; k++)
            if (outs[k]->meta.number < run)
                run = outs[k]->meta.number;
        for (size_t k = 0; c->out_level > 0 && k < nouts; k++)
            outs[k]->meta.run = run;
        rc = run_still_disjoint(db, c, run, outs, nouts);
        if (rc == KV_OK)
            rc = kv_db_commit_blobs(db, NULL, gone, c->nin, outs, nouts, bos, n);
    }
    free(bos);
    free(gone);
    free(outs);
    return rc;
}

/* Merges c's inputs into new tables of level c->out_level and commits: in
 * as many parts as split_points gives for the jobs free (parts_begin),
 * part 0 on this thread, each other on a thread of its own. */
static int run_compaction(kv_db *db, struct compaction *c)
{
    pthread_mutex_lock(&db->mu);
    uint64_t horizon = kv_db_oldest_snapshot(db);
    uint64_t gc_gen = db->gc_gen; /* what the outputs are clean of (gc_candidate) */
    size_t want = parts_begin(db, c);
    pthread_mutex_unlock(&db->mu);
    size_t n = 1, ninit = 0;
    struct part *parts = NULL;
    pthread_t *th = NULL;
    const kv_table_meta **cuts = NULL;
    uint64_t in_bytes = 0, out_keys = 0, out_bytes = 0;
    for (size_t k = 0; k < c->nin; k++) {
        in_bytes += c->in[k]->meta.file_size;
        out_keys += c->in[k]->meta.entries; /* the output replaces every input: at most these */
    }
    int rc = compaction_ranges(db, c, horizon);
    if (rc == KV_OK && (!(parts = calloc(want, sizeof *parts)) ||
                        !(th = calloc(want, sizeof *th)) || !(cuts = calloc(want, sizeof *cuts))))
        rc = KV_ENOMEM;
    if (rc == KV_OK) {
        /* Into the run it joins (a slice joins the deepest level's run, the rest
         * of which stays), or one of its own (KV_RUN_NEW, no run's id). */
        c->bits = kv_filter_bits_run(db, c->v, c->out_level, c->out_run, out_keys, c->in, c->nin);
        /* Not cut when there are range tombstones: a fragment may span a
         * cut, and the outputs' order around it would need both parts. */
        if (!c->rt_all)
            n = split_points(db, c, in_bytes, want, cuts);
        for (size_t j = 0; j < n; j++) {
            parts[j] = (struct part){.db = db, .c = c, .horizon = horizon};
            parts[j].after = j ? cuts[j - 1] : NULL;
            parts[j].upto = j + 1 < n ? cuts[j] : NULL;
            kv_blob_out_init(&parts[j].bo, db, db->o.blob_file_size);
        }
        ninit = n;
        parts[0].flushes = c->flushes;
        pthread_mutex_lock(&db->mu);
        db->threads_busy += (int)(n - 1);
        pthread_mutex_unlock(&db->mu);
        size_t started = parts_start(parts, n, th);
        if (started > 1)
            atomic_fetch_add(&db->subcompactions, started - 1);
        pthread_mutex_lock(&db->mu);
        db->threads_busy -= (int)(n - started);
        pthread_mutex_unlock(&db->mu);
        rc = merge_part(&parts[0]);
        rc = parts_wait(db, parts, started, th, rc);
        n = started;
        if (rc == KV_OK)
            rc = commit_parts(db, c, parts, n);
    }
    for (size_t j = 0; j < ninit; j++) { /* those not started have no outputs */
        kv_blob_out_free(&parts[j].bo, rc == KV_OK);
        out_bytes += parts[j].out_bytes;
        for (size_t k = 0; k < parts[j].nouts; k++) {
            if (rc != KV_OK) /* never named by the manifest: delete */
                atomic_store(&parts[j].outs[k]->obsolete, 1);
            /* Every reference into a file past the threshold at the start
             * was relocated: nothing for blob GC here until more pass it. */
            atomic_store_explicit(&parts[j].outs[k]->gc_clean_gen, gc_gen, memory_order_relaxed);
            kv_table_unref(parts[j].outs[k]);
        }
        free(parts[j].outs);
    }
    free(parts);
    free(th);
    free(cuts);
    pthread_mutex_lock(&db->mu);
    db->threads_busy -= (int)n;
    if (!c->claimed)
        db->compactions_running--;
    if (rc == KV_OK && in_bytes > db->compaction_max_read)
        db->compaction_max_read = in_bytes;
    pthread_mutex_unlock(&db->mu);
    if (rc == KV_OK) {
        KV_COUNT(db, compactions, 1);
        KV_COUNT(db, compaction_read_bytes, in_bytes);
        KV_COUNT(db, compaction_written_bytes, out_bytes);
        KV_COUNT(db, level_written[c->out_level], out_bytes);
    }
    return rc;
}

/* Rewrites table t of level `level` (>= 1) in place: blob GC. */
static int rewrite_one(kv_db *db, struct kv_version *v, int level, struct kv_table *t)
{
    struct compaction c;
    memset(&c, 0, sizeof c);
    c.level = c.out_level = level;
    c.out_run = t->meta.run;
    c.v = v;
    c.flushes = 1; /* the flush thread's (blob GC of kv_compact_range) */
    int rc = KV_ENOMEM;
    if ((c.in = malloc(sizeof *c.in))) {
        c.in[c.nin++] = t;
        c.nlevel = 1;
        rc = run_compaction(db, &c);
    }
    compaction_free(&c);
    return rc;
}

/* Merges all of v's level 0 down into the base level, dropping the reference to
 * v the caller took: blob GC of a level-0 table (their order is their age,
 * so none is rewritten alone) and the idle compaction. *ran: whether there
 * was anything to merge (NULL: not asked). */
static int compact_level0(kv_db *db, struct kv_version *v, int *ran)
{
    struct compaction c;
    int rc = setup(&c, db, v, 0, NULL, 0, NULL, 0, NULL);
    if (ran)
        *ran = rc == KV_OK && c.nin;
    if (rc == KV_OK && c.nin)
        rc = run_compaction(db, &c);
    compaction_free(&c); /* drops v */
    return rc;
}

/* Sets c up to merge every sorted run of level `level` (>= 1) of v: down
 * (setup), or in place (always for the last level) into one run there.
 * c->v is v, not referenced here. */
static int setup_whole(struct compaction *c, kv_db *db, struct kv_version *v, int level,
                       int in_place)
{
    if (!in_place && level < KV_LEVELS - 1)
        return setup(c, db, v, level, NULL, 0, NULL, 0, NULL);
    memset(c, 0, sizeof *c);
    c->level = c->out_level = level;
    c->v = v;
    c->out_run = kv_version_run_id(v, v->level_run[level + 1] - 1); /* the oldest */
    int rc = add_overlapping(c, level, NULL, 0, NULL, 0);
    c->nlevel = c->nin;
    return rc;
}

/* setup_whole's compaction, run here. Drops the reference to v the
 * caller took. */
static int compact_whole(kv_db *db, struct kv_version *v, int level, int in_place)
{
    struct compaction c;
    int rc = setup_whole(&c, db, v, level, in_place);
    if (rc == KV_OK && c.nin)
        rc = run_compaction(db, &c);
    compaction_free(&c); /* drops v */
    return rc;
}

/* Under lazy leveling, the shallowest level above the deepest that holds
 * several runs; 0: none. */
static int idle_tiered_level(const kv_db *db, const struct kv_version *v)
{
    if (!lazy(db))
        return 0;
    int deepest = deepest_level(v);
    for (int l = 1; l < deepest; l++)
        if (kv_version_level_runs(v, l) > 1)
            return l;
    return 0;
}

int kv_idle_compaction_armed(const kv_db *db)
{
    const struct kv_version *v = db->current;
    return db->o.idle_compaction_ms > 0 && (v->start[1] > v->start[0] || idle_tiered_level(db, v));
}

/* A slice's inputs from level `level` of c->v: `seed`, a table of the
 * level's newest run, then from each older run, newest first, every table
 * that overlaps the range taken so far, which grows by them (claim_slice
 * says why the range grows only that way). The range in *lo, *hi. */
static int take_slice(struct compaction *c, int level, struct kv_table *seed,
                      const kv_table_meta **lo, const kv_table_meta **hi)
{
    const struct kv_version *v = c->v;
    if (!(c->in = malloc(sizeof *c->in)))
        return KV_ENOMEM;
    c->in[c->nin++] = seed;
    *lo = *hi = &seed->meta;
    for (size_t r = v->level_run[level] + 1; r < v->level_run[level + 1]; r++) {
        size_t before = c->nin;
        for (size_t i = v->run_start[r]; i < v->run_start[r + 1]; i++) {
            if (!overlaps(v->cmp, &v->tables[i]->meta, (*lo)->smallest, (*lo)->smallest_len,
                          (*hi)->largest, (*hi)->largest_len))
                continue;
            struct kv_table **g = realloc(c->in, (c->nin + 1) * sizeof *g);
            if (!g)
                return KV_ENOMEM;
            (c->in = g)[c->nin++] = v->tables[i];
        }
        if (c->nin > before)
            range_of(c, 0, c->nin, lo, hi);
    }
    c->nlevel = c->nin;
    return KV_OK;
}

/* An idle merge of level `level`'s runs, in place, a key range at a
 * time, as a slice (claim_slice) takes them: the newest run's first
 * table, then from each older run, newest first, every table that
 * overlaps the range taken so far, which grows by them; merged into the
 * oldest run, all of whose tables in the range are taken. A newer run's
 * table left behind in the range holds only versions newer than the
 * output's (had an older version of one of its keys been taken, so would
 * it), and its run is searched first. The newer runs lose a table each
 * time: the level ends as one run. Outputs into the level above the
 * deepest are cut at the guards, as every run written there is. c->v is
 * v, not referenced here. */
static int setup_idle_slice(struct compaction *c, struct kv_version *v, int level)
{
    memset(c, 0, sizeof *c);
    c->level = c->out_level = level;
    c->v = v;
    c->flushes = 1;
    const size_t r0 = v->level_run[level], r1 = v->level_run[level + 1];
    c->out_run = kv_version_run_id(v, r1 - 1);
    int deepest = deepest_level(v);
    if (level + 1 == deepest && kv_version_level_runs(v, deepest) == 1)
        c->guard_level = deepest;
    const kv_table_meta *lo, *hi;
    return take_slice(c, level, v->tables[v->run_start[r0]], &lo, &hi);
}

int kv_compact_idle(kv_db *db)
{
    pthread_mutex_lock(&db->mu);
    struct kv_version *v = db->current;
    int level = v->start[1] > v->start[0] ? 0 : idle_tiered_level(db, v);
    if (v->start[1] == v->start[0] && !level) {
        pthread_mutex_unlock(&db->mu);
        return KV_NOTFOUND;
    }
    kv_version_ref(v);
    pthread_mutex_unlock(&db->mu);
    int ran = 0, rc;
    if (!level) {
        rc = compact_level0(db, v, &ran);
    } else {
        struct compaction c;
        rc = setup_idle_slice(&c, v, level);
        ran = rc == KV_OK && c.nin;
        if (ran)
            rc = run_compaction(db, &c);
        compaction_free(&c); /* drops v */
    }
    if (rc == KV_OK && ran)
        KV_COUNT(db, idle_compactions, 1);
    return rc;
}

/* ---- claiming: compactions that run at once -------------------------------------------- */

/* Under mu: can c run beside the compactions running now? Every input is
 * free (kv_table_free_for_job), and its output range at c->out_level
 * overlaps no running compaction's there (for leveled compaction the
 * first implies the second, as a compaction takes every output-level
 * table under its range; the check keeps that true for any picker). */
static int claimable(const kv_db *db, const struct compaction *c)
{
    if (!c->nin || db->nclaims >= KV_MAX_BACKGROUND_JOBS)
        return 0;
    for (size_t k = 0; k < c->nin; k++)
        if (!kv_table_free_for_job(c->in[k]))
            return 0;
    const kv_table_meta *lo, *hi;
    range_of(c, 0, c->nin, &lo, &hi);
    for (int i = 0; i < db->nclaims; i++) {
        const struct kv_claim *o = &db->claims[i];
        if (o->out_level == c->out_level &&
            kv_sst_cmp(db->cmp, hi->largest, hi->largest_len, o->lo->smallest,
                       o->lo->smallest_len) >= 0 &&
            kv_sst_cmp(db->cmp, lo->smallest, lo->smallest_len, o->hi->largest,
                       o->hi->largest_len) <= 0)
            return 0;
    }
    return 1;
}

/* c without its version reference (setup's c->v is borrowed here). */
static void compaction_drop(struct compaction *c)
{
    free(c->in);
    memset(c, 0, sizeof *c);
}

/* Round robin through a sorted run, tables[first, end) of v: the first
 * table that ends past the level's compaction pointer, or the run's first
 * once past the end. */
static size_t pointer_from(const kv_db *db, const struct kv_compact_pointer *cp,
                           const struct kv_version *v, size_t first, size_t end)
{
    size_t from = first;
    for (size_t i = first; i < end && cp->have; i++, from = i) {
        const kv_table_meta *m = &v->tables[i]->meta;
        if (kv_sst_cmp(db->cmp, m->largest, m->largest_len, cp->key, cp->len) > 0)
            break;
    }
    return from == end ? first : from; /* wrapped */
}

/* Moves the compaction pointer to `m`'s largest key (left as it was when
 * out of memory: the round robin only repeats a table). */
static void pointer_set(struct kv_compact_pointer *cp, const kv_table_meta *m)
{
    uint8_t *k = malloc(m->largest_len + 1);
    if (!k)
        return;
    memcpy(k, m->largest, m->largest_len);
    free(cp->key);
    cp->key = k;
    cp->len = m->largest_len;
    cp->have = 1;
}

/* Under mu: the first table of level (>= 1) from where its last
 * compaction ended, round-robin, whose compaction is claimable: set up in
 * c, and the level's pointer moved past it. 1 found, 0 none, or KV_ENOMEM.
 * A level whose tables are mostly busy is tried at a few candidates only. */
static int claim_in_level(kv_db *db, struct kv_version *v, int level, struct compaction *c)
{
    struct kv_compact_pointer *cp = &db->compact_pointer[level];
    size_t first = v->start[level], end = v->start[level + 1], n = end - first;
    size_t from = pointer_from(db, cp, v, first, end);
    int tries = 0;
    for (size_t j = 0; j < n && tries < 16; j++) {
        struct kv_table *one = v->tables[first + (from - first + j) % n];
        if (!kv_table_free_for_job(one))
            continue;
        tries++;
        int rc = setup(c, db, v, level, NULL, 0, NULL, 0, one);
        if (rc != KV_OK) {
            compaction_drop(c);
            return rc;
        }
        if (!claimable(db, c)) {
            compaction_drop(c);
            continue;
        }
        pointer_set(cp, &one->meta);
        return 1;
    }
    return 0;
}

/* Under mu: a slice of level `level`'s sorted runs, lazy leveling's level
 * above the deepest, merged into the deepest level: the newest run's next
 * table round-robin, then from each older run, newest first, every table
 * that overlaps the range taken so far (which grows by them), then the
 * deepest level's tables under that range. A newer run's table may stay
 * behind where an older one's moves down (its versions are the newer
 * ones, and stay above), never the other way round. With the runs cut at
 * the same guards (guard_passed), the range is one guard interval: about
 * GUARD_TABLES tables of the deepest level and the runs' keys there, where
 * a merge of the whole level would hold a job (and the writers, behind
 * level 0) for as long as the deepest level takes to rewrite. One sweep
 * through the key space merges every run into the deepest level once, as
 * the whole merge would. 1 found (set up in c), 0 none claimable, or
 * KV_ENOMEM. */
static int claim_slice(kv_db *db, struct kv_version *v, int level, struct compaction *c)
{
    struct kv_compact_pointer *cp = &db->compact_pointer[level];
    const size_t r0 = v->level_run[level];
    const size_t first = v->run_start[r0], end = v->run_start[r0 + 1], n = end - first;
    const size_t from = pointer_from(db, cp, v, first, end);
    int tries = 0;
    for (size_t j = 0; j < n && tries < 16; j++) {
        struct kv_table *one = v->tables[first + (from - first + j) % n];
        if (!kv_table_free_for_job(one))
            continue;
        tries++;
        memset(c, 0, sizeof *c);
        c->level = level;
        c->out_level = level + 1;
        c->flushes = 1;
        c->v = v;
        const kv_table_meta *lo, *hi;
        int rc = take_slice(c, level, one, &lo, &hi);
        const size_t o0 = v->level_run[level + 1], o1 = v->level_run[level + 2];
        c->out_run = o1 > o0 ? kv_version_run_id(v, o1 - 1) : 0; /* the oldest, as setup */
        if (rc == KV_OK)
            rc = add_overlapping(c, level + 1, lo->smallest, lo->smallest_len, hi->largest,
                                 hi->largest_len);
        if (rc != KV_OK) {
            compaction_drop(c);
            return rc;
        }
        if (!claimable(db, c)) {
            compaction_drop(c);
            continue;
        }
        pointer_set(cp, hi);
        return 1;
    }
    return 0;
}

/* Whether level's compaction is a slice (claim_slice): lazy leveling's
 * level above the deepest, into a deepest level of one run. */
static int sliced(const kv_db *db, const struct kv_version *v, int level)
{
    int deepest = deepest_level(v);
    return lazy(db) && level > 0 && level + 1 == deepest && kv_version_level_runs(v, deepest) == 1;
}

/* Under mu: blob GC's compaction, when one is due and claimable: the
 * table rewritten in place, or for a level-0 one all of level 0 down. */
static int claim_gc(kv_db *db, struct kv_version *v, struct compaction *c)
{
    int level;
    struct kv_table *t = gc_candidate(db, v, &level);
    if (!t)
        return 0;
    int rc;
    if (level == 0) {
        rc = setup(c, db, v, 0, NULL, 0, NULL, 0, NULL);
    } else {
        memset(c, 0, sizeof *c);
        c->level = c->out_level = level;
        c->out_run = t->meta.run; /* its own run: as run 0, the oldest, a newer run's
                                   * versions would lose to older runs' */
        c->v = v;
        c->flushes = 1;
        rc = (c->in = malloc(sizeof *c->in)) ? KV_OK : KV_ENOMEM;
        if (rc == KV_OK)
            c->in[c->nin++] = t;
        c->nlevel = c->nin;
    }
    if (rc != KV_OK || !claimable(db, c)) {
        compaction_drop(c);
        return rc != KV_OK ? rc : 0;
    }
    return 1;
}

/* Whether level's compaction takes the whole level (every run): the last
 * level (several runs merged in place), a tiered level under lazy
 * leveling (all its runs down), and a level of several runs under
 * leveled (a database that was lazy). Else one table at a time. */
static int whole_level(const kv_db *db, const struct kv_version *v, int level)
{
    return level == KV_LEVELS - 1 || (lazy(db) && level < deepest_level(v)) ||
           kv_version_level_runs(v, level) > 1;
}

int kv_compact_claim(kv_db *db, int flushes, struct kv_compaction **out)
{
    *out = NULL;
    struct kv_version *v = db->current;
    struct compaction c;
    unsigned skip = 0;
    int rc = 0, level;
    while (rc == 0 && (level = pick_level(db, v, skip)) >= 0) {
        if (sliced(db, v, level)) {
            rc = claim_slice(db, v, level, &c);
        } else if (level == 0 || whole_level(db, v, level)) {
            rc = level ? setup_whole(&c, db, v, level, 0)
                       : setup(&c, db, v, 0, NULL, 0, NULL, 0, NULL);
            if (rc != KV_OK)
                compaction_drop(&c);
            else if ((rc = claimable(db, &c)) == 0)
                compaction_drop(&c);
        } else {
            rc = claim_in_level(db, v, level, &c);
        }
        skip |= 1u << level;
    }
    if (rc == 0) /* no level's compaction can start: blob GC, when due */
        rc = claim_gc(db, v, &c);
    if (rc <= 0)
        return rc; /* KV_OK: nothing, or KV_ENOMEM */
    struct kv_compaction *kc = malloc(sizeof *kc);
    if (!kc) {
        compaction_drop(&c);
        return KV_ENOMEM;
    }
    kv_version_ref(v);
    c.flushes = flushes;
    c.claimed = 1;
    kc->c = c;
    running_add(db); /* from here: a drain waits for it (background.c) */
    for (size_t k = 0; k < c.nin; k++)
        c.in[k]->busy = 1;
    struct kv_claim *cl = &db->claims[db->nclaims++];
    cl->out_level = c.out_level;
    range_of(&c, 0, c.nin, &cl->lo, &cl->hi);
    *out = kc;
    return KV_OK;
}

int kv_compact_run(kv_db *db, struct kv_compaction *kc)
{
    struct compaction *c = &kc->c;
    int rc = run_compaction(db, c);
    pthread_mutex_lock(&db->mu);
    for (size_t k = 0; k < c->nin; k++)
        c->in[k]->busy = 0;
    const kv_table_meta *lo, *hi;
    range_of(c, 0, c->nin, &lo, &hi);
    for (int i = 0; i < db->nclaims; i++)
        if (db->claims[i].lo == lo && db->claims[i].hi == hi &&
            db->claims[i].out_level == c->out_level) {
            db->claims[i] = db->claims[--db->nclaims];
            break;
        }
    pthread_mutex_unlock(&db->mu);
    /* Its version goes before it stops counting as running: a drain
     * (kv_compact_range) that waits for it then finds the tables it
     * replaced held by readers alone, and gone once they let go. */
    compaction_free(c);
    free(kc);
    pthread_mutex_lock(&db->mu);
    db->compactions_running--;
    /* Its inputs and range are free again: the jobs look once more, and
     * the flush thread (an idle compaction waits for none to run). */
    pthread_cond_broadcast(&db->job_cv);
    pthread_cond_signal(&db->work_cv);
    pthread_mutex_unlock(&db->mu);
    return rc;
}

int kv_compact_step(kv_db *db)
{
    pthread_mutex_lock(&db->mu);
    struct kv_compaction *kc;
    int rc = kv_compact_claim(db, 1, &kc);
    pthread_mutex_unlock(&db->mu);
    if (rc != KV_OK)
        return rc;
    return kc ? kv_compact_run(db, kc) : KV_NOTFOUND;
}

/* ---- compaction on request ----------------------------------------------------------- */

/* kv_compact_range hands its range to the flush thread, which runs
 * kv_compact_manual (below) with the job threads drained (background.c),
 * and waits for it. */
int kv_compact_range(kv_db *db, const void *start, size_t slen, const void *end, size_t elen)
{
    if (!db)
        return kv_db_einval(db, "kv_compact_range", "db is NULL");
    if (kv_db_check_key(db, "kv_compact_range (start)", start, slen) != KV_OK ||
        kv_db_check_key(db, "kv_compact_range (end)", end, elen) != KV_OK)
        return KV_EINVAL;
    int rc = kv_flush(db);
    if (rc != KV_OK)
        return rc;
    pthread_mutex_lock(&db->mu);
    while (db->manual_pending && !kv_db_stopped(db))
        pthread_cond_wait(&db->done_cv, &db->mu);
    if (kv_db_stopped(db)) {
        rc = kv_db_sticky_error(db);
        pthread_mutex_unlock(&db->mu);
        return rc;
    }
    /* The flush thread runs it, alone (background.c, drain_jobs); the
     * range stays valid because this call waits. */
    db->manual_lo = start;
    db->manual_lolen = slen;
    db->manual_hi = end;
    db->manual_hilen = elen;
    db->manual_pending = 1;
    uint64_t ticket = db->manual_done + 1;
    pthread_cond_signal(&db->work_cv);
    while (db->manual_done < ticket && !kv_db_stopped(db))
        pthread_cond_wait(&db->done_cv, &db->mu);
    if (db->manual_done < ticket)
        rc = kv_db_sticky_error(db);
    else if ((rc = db->manual_rc) != KV_OK)
        kv_error_set(rc, "%s", db->manual_text);
    pthread_mutex_unlock(&db->mu);
    /* The tables it replaced go before it returns, once the Gets still
     * reading them end (the background thread does not wait for them). */
    if (rc == KV_OK)
        kv_view_reclaim(db, 1);
    return rc;
}

/* Rewrites each table of level `level` overlapping [lo, hi] as it stands
 * now, in place, one at a time (rewrite_one). */
static int rewrite_deepest(kv_db *db, int level, const uint8_t *lo, size_t lolen, const uint8_t *hi,
                           size_t hilen)
{
    struct kv_version *v = kv_db_ref_version(db);
    size_t n = v->start[level + 1] - v->start[level], k = 0;
    uint64_t *todo = malloc((n ? n : 1) * sizeof *todo);
    if (!todo) {
        kv_version_unref(v);
        return KV_ENOMEM;
    }
    for (size_t i = v->start[level]; i < v->start[level + 1]; i++)
        if (overlaps(v->cmp, &v->tables[i]->meta, lo, lolen, hi, hilen))
            todo[k++] = v->tables[i]->meta.number;
    kv_version_unref(v);
    int rc = KV_OK;
    for (size_t j = 0; rc == KV_OK && j < k; j++) {
        if (atomic_load(&db->stopping)) {
            rc = KV_EBUSY;
            break;
        }
        v = kv_db_ref_version(db);
        struct kv_table *t = NULL;
        for (size_t i = v->start[level]; i < v->start[level + 1] && !t; i++)
            if (v->tables[i]->meta.number == todo[j])
                t = v->tables[i];
        if (t)
            rc = rewrite_one(db, v, level, t); /* drops v */
        else
            kv_version_unref(v);
    }
    free(todo);
    return rc;
}

int kv_compact_manual(kv_db *db, const uint8_t *lo, size_t lolen, const uint8_t *hi,
                      size_t hilen)
{
    /* Level 0 into the base level, then down to the deepest level that
     * holds anything, one level at a time (the levels above the base are
     * empty, so nothing is taken from them). */
    int rc = KV_OK, deepest = 1;
    for (int l = 0; rc == KV_OK && l < KV_LEVELS - 1; l++) {
        struct compaction c;
        struct kv_version *v = kv_db_ref_version(db);
        if (l == 1) { /* where level 0 went */
            for (int d = 1; d < KV_LEVELS; d++)
                if (v->start[d + 1] > v->start[d])
                    deepest = d;
        }
        if (l > 0 && l >= deepest) {
            kv_version_unref(v);
            break;
        }
        rc = setup(&c, db, v, l, lo, lolen, hi, hilen, NULL);
        if (rc == KV_OK && c.nlevel)
            rc = run_compaction(db, &c);
        compaction_free(&c);
    }
    /* The deepest level as one run (it holds several after a change of
     * the deepest level under lazy leveling): merged in place. */
    if (rc == KV_OK) {
        struct kv_version *v = kv_db_ref_version(db);
        if (kv_version_level_runs(v, deepest) > 1)
            rc = compact_whole(db, v, deepest, 1);
        else
            kv_version_unref(v);
    }
    /* The deepest level's tables in range that kept versions or tombstones
     * for snapshots: each rewritten on its own, in place (a level's tables
     * are disjoint, so one table's output cannot overlap its neighbours),
     * dropping what no snapshot needs any more. */
    while (rc == KV_OK) {
        struct compaction c;
        struct kv_version *v = kv_db_ref_version(db);
        pthread_mutex_lock(&db->mu);
        uint64_t horizon = kv_db_oldest_snapshot(db);
        pthread_mutex_unlock(&db->mu);
        struct kv_table *one = NULL;
        for (size_t i = v->start[deepest]; i < v->start[deepest + 1] && !one; i++) {
            const kv_table_meta *m = &v->tables[i]->meta;
            if ((m->flags & KV_TABLE_SNAPSHOT_PINNED) && m->max_seq <= horizon &&
                overlaps(v->cmp, m, lo, lolen, hi, hilen))
                one = v->tables[i];
        }
        if (!one) {
            kv_version_unref(v);
            break;
        }
        memset(&c, 0, sizeof c);
        c.level = c.out_level = deepest;
        c.out_run = one->meta.run;
        c.v = v;
        c.flushes = 1;
        if (!(c.in = malloc(sizeof *c.in)))
            rc = KV_ENOMEM;
        else {
            c.in[c.nin++] = one;
            c.nlevel = 1;
            rc = run_compaction(db, &c);
        }
        compaction_free(&c);
    }
    /* With a compaction filter or a ttl, the deepest level's tables in
     * range are rewritten once each (in place, as above): the filter is
     * asked about their values, and what expired goes, as a request to
     * compact a range means (RocksDB rewrites its bottommost level
     * likewise when a compaction filter is set). */
    if (rc == KV_OK && (db->o.compaction_filter || db->o.ttl_seconds))
        rc = rewrite_deepest(db, deepest, lo, lolen, hi, hilen);
    return rc;
}
