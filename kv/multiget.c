/* multiget.c - kv_multi_get: n keys read at one snapshot, each answered as
 * kv_get would answer it alone, with the work shared between them.
 *
 * kv_get's walk (get.c) turned inside out. A Get asks the memtables, then
 * its candidate tables in order -- level 0 newest first, then at most one
 * table per deeper level -- until an entry (a value or a tombstone)
 * decides. Here every key asks the memtables; then the tables are taken
 * in that same order, each asked together about all the undecided keys
 * its range holds. For any one key the tables come in the order of its
 * own Get and the first entry found decides, so the answer is the same;
 * a table after the one that decided is never asked about it, so every
 * counter is the same too.
 *
 * What is shared: the view (references and sequence, one trip through the
 * lock); the keys are sorted once, so that the keys a level-0 table holds
 * are one run of them and a deeper level hands each table a run; a table
 * gets its run in one call (sstable/multi.c): its filter asked about all
 * of them in one batch with their lines prefetched, the index searched and
 * each data block read once for the keys that land in it. */
#include "db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/hash.h"
#include "util/ikey.h"
#include "order.h"

#define COUNT KV_COUNT

/* Keys whose state lives on the stack, and bytes of their internal keys
 * (room for 2n + 10 for a key of n bytes, its longest escaping): a batch
 * of 32 keys (RocksDB's MultiGet batch) of up to 59 bytes costs no malloc,
 * and about 13 KiB of stack. */
#define MG_STACK_KEYS 32
#define MG_STACK_IKEYS 4096

/* A batch sorted by insertion up to this many keys (a few hundred word
 * compares: for 32 keys, faster than a merge sort or a sorting network,
 * measured); beyond, qsort. */
#define MG_INSERTION_SORT 48

/* One valid key: the user key, its place in the caller's arrays, and its
 * table lookup. */
struct mg_key {
    kv_sst_seek_req q;      /* first member: a req the tables hand back is its key's */
    const uint8_t *key;
    size_t klen;
    size_t at;              /* index in keys[], vals[], statuses[] */
    int decided;
    /* Its filter hashes: q.filter_hash is the one the table being asked
     * takes (group_add), the database's own for the memtables. */
    struct kv_key_hashes kh;
    uint8_t trailer[KV_IKEY_TRAILER]; /* of the entry a table found */
};

/* A key in the sort order, with its sort word at hand: bytes [at, at + 8)
 * of the key, big-endian, where every key of the call shares its first
 * `at` bytes (so that words order keys, but for ties). */
struct mg_ord {
    uint64_t word;
    struct mg_key *k;
};

/* A table and the keys it is asked about: order[lo, lo + m), their reqs
 * at reqs[lo, lo + m) and, of those, the np its gate let through at
 * pass[lo, lo + np). */
struct mg_group {
    const struct kv_table *t;
    size_t lo, m, np;
};

/* The call's state. */
struct mg {
    kv_db *db;
    struct kv_read_view rv;
    int ranges; /* the view holds range tombstones: each key takes kv_get's walk */
    void **vals;
    size_t *vlens;
    int *statuses;
    struct mg_ord *order;           /* the undecided keys, sorted by key */
    size_t norder;
    kv_sst_seek_req **reqs, **pass; /* as order; see mg_group */
    struct mg_group *groups;        /* a level's tables and their keys */
    /* What n kv_get calls would add to kv_stats, added once at the end. */
    uint64_t mem_hits, probed, negatives, positives, false_pos;
    uint64_t reads, read_bytes, hits;
    uint64_t dev_reads, dev_bytes; /* of reads, those with O_DIRECT */
    /* The first error met, for kv_error_text: a text set since `mark`, the
     * call's start, is its (texts are set only by errors). */
    unsigned long long mark;
    size_t err_at; /* SIZE_MAX: none yet */
    int err;
    char text[KV_DB_TEXT];
};

/* Key `at` failed with rc; the first failure keeps its text (the one set
 * since the call began, else one made here) with the key's index. */
static void key_failed(struct mg *g, size_t at, int rc)
{
    g->statuses[at] = rc;
    if (g->err_at != SIZE_MAX)
        return;
    g->err_at = at;
    g->err = rc;
    if (kv_error_since(g->mark))
        snprintf(g->text, sizeof g->text, "%s (keys[%zu])", kv_error_text(), at);
    else
        snprintf(g->text, sizeof g->text, "%s: kv_multi_get: keys[%zu]: %s", g->db->path, at,
                 kv_strerror(rc));
}

/* Bytewise key order: the words first (the keys share what comes before
 * them), the whole keys on a tie. */
static inline int ord_cmp(const struct mg_ord *a, const struct mg_ord *b)
{
    if (a->word != b->word)
        return a->word < b->word ? -1 : 1;
    return kv_key_cmp(a->k->key, a->k->klen, b->k->key, b->k->klen);
}

static int ord_order(const void *a, const void *b)
{
    return ord_cmp(a, b);
}

/* The order under a comparator (ctx), which has no words. */
static int ord_order_cmp(const void *pa, const void *pb, void *ctx)
{
    const struct mg_ord *a = pa, *b = pb;
    return kv_sst_cmp(ctx, a->k->key, a->k->klen, b->k->key, b->k->klen);
}

static void sort_keys(const kv_comparator *cmp, struct mg_ord *a, size_t n)
{
    if (cmp) {
        kv_order_sort(a, n, sizeof *a, ord_order_cmp, (void *)cmp);
        return;
    }
    if (n > MG_INSERTION_SORT) {
        qsort(a, n, sizeof *a, ord_order);
        return;
    }
    for (size_t i = 1; i < n; i++) {
        struct mg_ord x = a[i];
        size_t j = i;
        for (; j > 0 && ord_cmp(&x, &a[j - 1]) < 0; j--)
            a[j] = a[j - 1];
        a[j] = x;
    }
}

/* The first of the sorted keys o[0, n) that is >= key (above: > key). */
static size_t keys_bound(const kv_comparator *cmp, const struct mg_ord *o, size_t n,
                         const uint8_t *key, size_t klen, int above)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = kv_sst_cmp(cmp, o[mid].k->key, o[mid].k->klen, key, klen);
        if (c < 0 || (above && c == 0))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Drops the decided keys from the order (it stays sorted). */
static void keep_undecided(struct mg *g)
{
    size_t m = 0;
    for (size_t k = 0; k < g->norder; k++)
        if (!g->order[k].k->decided)
            g->order[m++] = g->order[k];
    g->norder = m;
}

/* What table t's entry decides for key k (its search returned q->rc): a
 * value, a tombstone, or an error. */
static void decide(struct mg *g, const struct kv_table *t, struct mg_key *k)
{
    kv_sst_seek_req *q = &k->q;
    int rc = q->rc;
    k->decided = 1;
    if (rc == KV_OK) {
        uint64_t seq;
        int kind;
        if (!kv_ikey_get_trailer(k->trailer, q->suffix_len, &seq, &kind) || !kv_kind_stored(kind))
            rc = kv_error_set(KV_ECORRUPT, "%s: an entry has a bad sequence trailer", t->path);
        else if (kind == KV_KIND_MERGE || kind == KV_KIND_TMERGE || kind == KV_KIND_TVALUE) {
            /* Operands to merge, or a value that may have expired: kv_get's
             * own walk answers, at the same view. */
            kv_free(q->val);
            q->val = NULL;
            void *val = NULL;
            size_t vlen = 0;
            rc = kv_db_view_get(g->db, &g->rv, k->key, k->klen, &val, &vlen);
            if (rc == KV_OK) {
                g->vals[k->at] = val;
                g->vlens[k->at] = vlen;
                g->statuses[k->at] = KV_OK;
                return;
            }
        } else if (kind == KV_KIND_BLOB) {
            /* A reference: the value is read from its blob file. */
            const struct kv_version *v = g->rv.v;
            void *val = NULL;
            size_t vlen = 0;
            rc = kv_blob_get(g->db, v->blobs, v->nblobs, q->val, q->vlen, k->key, k->klen, &val,
                             &vlen, NULL, NULL);
            kv_free(q->val);
            q->val = NULL;
            if (rc == KV_OK) {
                g->vals[k->at] = val;
                g->vlens[k->at] = vlen;
                g->statuses[k->at] = KV_OK;
                return;
            }
        } else if (kind == KV_KIND_VALUE) {
            g->vals[k->at] = q->val;
            g->vlens[k->at] = q->vlen;
            g->statuses[k->at] = KV_OK;
            return;
        } else
            rc = KV_NOTFOUND;
        kv_free(q->val);
        q->val = NULL;
    }
    if (rc == KV_NOTFOUND)
        g->statuses[k->at] = KV_NOTFOUND;
    else
        key_failed(g, k->at, rc);
}

/* Table t's group: the keys order[lo, lo + m), every one within its
 * range of user keys. Their reqs are marked in range but for those equal
 * to the table's largest key (the last ones), whose sequence decides
 * (sstable.h, in_range). */
static void group_add(struct mg *g, struct mg_group *gr, const struct kv_table *t, size_t lo,
                      size_t m)
{
    *gr = (struct mg_group){.t = t, .lo = lo, .m = m};
    int below = 0; /* the keys from here down are below the largest key */
    for (size_t k = lo + m; k-- > lo;) {
        struct mg_key *key = g->order[k].k;
        below = below || kv_sst_cmp(g->db->cmp, key->key, key->klen, t->meta.largest,
                                    t->meta.largest_len) < 0;
        g->reqs[k] = &key->q;
        g->reqs[k]->in_range = below;
        g->reqs[k]->filter_hash = kv_table_key_hash(g->db, &key->kh, t);
    }
}

/* Asks each table of groups[0, n) about its keys, in passes over them
 * all, so that the tables' memory latencies overlap: the gates (range and
 * filter), two rounds of prefetching for the keys they let through (index
 * entries and block ends, then restart keys), and the searches. Counts
 * each key's probe as kv_get's table_lookup does, and decides the keys an
 * entry was found for.
 * The groups' keys are distinct, so no table is asked about a key another
 * one of them decides. */
static void probe_groups(struct mg *g, struct mg_group *groups, size_t n)
{
    /* A gate prefetches the filter lines of its own keys as it goes; with
     * several groups (a deeper level: few keys each), those of all of
     * them are asked for first. */
    for (struct mg_group *gr = groups; n > 1 && gr < groups + n; gr++)
        for (size_t k = gr->lo; k < gr->lo + gr->m; k++)
            kv_sst_filter_prefetch(gr->t->reader, g->reqs[k]->filter_hash);
    for (struct mg_group *gr = groups; gr < groups + n; gr++) {
        kv_sst_seek_req **reqs = g->reqs + gr->lo, **pass = g->pass + gr->lo;
        /* Valid reqs of a live reader: neither call below can refuse them. */
        kv_sst_seek_gate_many(gr->t->reader, reqs, gr->m);
        gr->np = 0;
        for (size_t k = 0; k < gr->m; k++)
            if (reqs[k]->rc == KV_OK)
                pass[gr->np++] = reqs[k];
    }
    for (int depth = 0; depth < 2; depth++)
        for (struct mg_group *gr = groups; gr < groups + n; gr++)
            kv_sst_seek_prefetch_many(gr->t->reader, g->pass + gr->lo, gr->np, depth);
    for (struct mg_group *gr = groups; gr < groups + n; gr++) {
        kv_sst_seek_gated_many(gr->t->reader, g->pass + gr->lo, gr->np);
        g->probed += gr->m;
        for (size_t k = gr->lo; k < gr->lo + gr->m; k++) {
            const kv_sst_probe *pr = &g->reqs[k]->probe;
            g->negatives += (uint64_t)pr->filter_negative;
            g->positives += (uint64_t)(pr->filter_checked & !pr->filter_negative);
        }
        /* Only the keys the gate let through went further. */
        for (size_t k = gr->lo; k < gr->lo + gr->np; k++) {
            kv_sst_seek_req *q = g->pass[k];
            const kv_sst_probe *pr = &q->probe;
            g->false_pos += (uint64_t)pr->false_positive;
            g->reads += (uint64_t)pr->block_read;
            g->read_bytes += pr->block_read ? pr->bytes_read : 0;
            g->dev_reads += (uint64_t)pr->device_read;
            g->dev_bytes += pr->device_bytes; /* 0 without a device read */
            g->hits += (uint64_t)pr->cache_hit;
            if (q->rc != KV_NOTFOUND)
                decide(g, gr->t, (struct mg_key *)q); /* q is its key's first member */
        }
    }
}

/* The tables, in kv_get's order, each asked about the undecided keys it
 * may hold: level 0 one table after the other, each about the run of
 * keys within its range; then each sorted run of a deeper level as a
 * whole, newest first, every table about the run of keys
 * kv_version_find_run sends it. */
static void probe_tables(struct mg *g)
{
    const struct kv_version *v = g->rv.v;
    for (size_t i = v->start[0]; i < v->start[1] && g->norder; i++) {
        const kv_table_meta *m = &v->tables[i]->meta;
        size_t lo = keys_bound(v->cmp, g->order, g->norder, m->smallest, m->smallest_len, 0);
        size_t hi = keys_bound(v->cmp, g->order, g->norder, m->largest, m->largest_len, 1);
        if (lo < hi) {
            group_add(g, &g->groups[0], v->tables[i], lo, hi - lo);
            probe_groups(g, g->groups, 1);
            keep_undecided(g);
        }
    }
    for (size_t r = v->level_run[1]; r < v->nruns && g->norder; r++) {
        size_t ngroups = 0, run = 0, table = SIZE_MAX; /* order[run, k) go to `table` */
        for (size_t k = 0; k <= g->norder; k++) {
            size_t j = SIZE_MAX;
            const struct mg_key *key = k < g->norder ? g->order[k].k : NULL;
            /* The keys ascend, and the one before is in `table`'s range:
             * up to that table's largest key, this one is too. */
            if (key && table != SIZE_MAX &&
                kv_sst_cmp(v->cmp, key->key, key->klen, v->tables[table]->meta.largest,
                           v->tables[table]->meta.largest_len) <= 0)
                continue;
            if (key)
                j = kv_version_find_run(v, r, key->key, key->klen);
            if (key && j == table)
                continue;
            if (table != SIZE_MAX)
                group_add(g, &g->groups[ngroups++], v->tables[table], run, k - run);
            run = k;
            table = j;
        }
        probe_groups(g, g->groups, ngroups);
        keep_undecided(g);
    }
}

/* The memtables, key by key; the keys they leave undecided go to the
 * order, with their internal keys built in ikeys. */
static void probe_memtables(struct mg *g, struct mg_key *keys, size_t nkeys, uint8_t *ikeys)
{
    for (size_t k = 0; k < nkeys; k++) {
        struct mg_key *key = &keys[k];
        int decided = 1, rc;
        if (g->ranges) /* range tombstones in the view: kv_get's walk honours them */
            rc = kv_db_view_get(g->db, &g->rv, key->key, key->klen, &g->vals[key->at],
                                &g->vlens[key->at]);
        else
            rc = kv_db_view_mem_get(g->db, &g->rv, key->key, key->klen, key->q.filter_hash,
                                    &g->vals[key->at], &g->vlens[key->at], &decided);
        if (decided) {
            g->mem_hits++;
            if (rc == KV_OK || rc == KV_NOTFOUND)
                g->statuses[key->at] = rc;
            else
                key_failed(g, key->at, rc);
            continue;
        }
        /* The smallest trailer of sequence seq: a table's lookup lands on
         * the newest entry at or below the view's sequence. */
        kv_sst_seek_req *q = &key->q;
        size_t plen = kv_ikey_put_prefix(ikeys, key->key, key->klen);
        kv_ikey_put_trailer(ikeys + plen, g->rv.seq, 0xFF);
        q->key = ikeys;
        q->klen = plen + KV_IKEY_TRAILER;
        q->prefix_len = plen;
        q->suffix = key->trailer;
        q->suffix_cap = sizeof key->trailer;
        ikeys += q->klen;
        g->order[g->norder++].k = key;
    }
}

int kv_multi_get(kv_db *db, const kv_snapshot *snap, size_t n, const void *const *keys,
                 const size_t *klens, void **vals, size_t *vlens, int *statuses)
{
    static const char call[] = "kv_multi_get";
    if (!db)
        return kv_db_einval(db, call, "db is NULL");
    if (n == 0)
        return KV_OK;
    const char *null = !keys ? "keys" : !klens ? "klens" : !vals ? "vals" : !vlens ? "vlens"
                       : !statuses ? "statuses" : NULL;
    if (null)
        return kv_db_einval(db, call, "%s is NULL with n = %zu", null, n);

    struct mg g = {.db = db, .vals = vals, .vlens = vlens, .statuses = statuses,
                   .mark = kv_error_mark(), .err_at = SIZE_MAX};
    /* The valid keys, and the room their internal keys take. */
    size_t nvalid = 0, ibytes = 0;
    for (size_t i = 0; i < n; i++) {
        vals[i] = NULL;
        vlens[i] = 0;
        statuses[i] = KV_NOTFOUND;
        if (kv_db_check_key(db, call, keys[i], klens[i]) != KV_OK) {
            key_failed(&g, i, KV_EINVAL);
            continue;
        }
        nvalid++;
        size_t need = 2 * klens[i] + 2 + KV_IKEY_TRAILER;
        ibytes = ibytes > SIZE_MAX - need ? SIZE_MAX : ibytes + need; /* SIZE_MAX: no room */
    }

    /* Per key its state, its place in the order, its group and two req
     * pointers; then the internal keys: on the stack when they fit, else
     * in one block. */
    struct mg_key stack_keys[MG_STACK_KEYS];
    struct mg_ord stack_order[MG_STACK_KEYS];
    struct mg_group stack_groups[MG_STACK_KEYS];
    kv_sst_seek_req *stack_reqs[2 * MG_STACK_KEYS];
    uint8_t stack_ikeys[MG_STACK_IKEYS];
    struct mg_key *state = stack_keys;
    g.order = stack_order;
    g.groups = stack_groups;
    g.reqs = stack_reqs;
    uint8_t *ikeys = stack_ikeys, *block = NULL;
    if (nvalid > MG_STACK_KEYS || ibytes > MG_STACK_IKEYS) {
        /* Largest alignment first: every part stays aligned. */
        size_t per = sizeof *state + sizeof *g.order + sizeof *g.groups + 2 * sizeof *g.reqs;
        if (nvalid <= (SIZE_MAX - ibytes) / per)
            block = malloc(nvalid * per + ibytes);
        if (!block) {
            for (size_t i = 0; i < n; i++)
                if (statuses[i] != KV_EINVAL)
                    statuses[i] = KV_ENOMEM;
            return kv_error_set(KV_ENOMEM, "%s: %s: out of memory for %zu keys", db->path,
                                call, n);
        }
        state = (struct mg_key *)block;
        g.order = (struct mg_ord *)(state + nvalid);
        g.groups = (struct mg_group *)(g.order + nvalid);
        g.reqs = (kv_sst_seek_req **)(g.groups + nvalid);
        ikeys = (uint8_t *)(g.reqs + 2 * nvalid);
    }
    g.pass = g.reqs + nvalid;

    /* `at`: a multiple of 8, as many bytes as every key shares with the
     * first, but for 8 bytes of the shortest. */
    size_t k = 0, at = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        if (statuses[i] == KV_EINVAL)
            continue;
        struct mg_key *key = &state[k++];
        key->key = keys[i];
        key->klen = klens[i];
        key->at = i;
        key->decided = 0;
        key->kh = (struct kv_key_hashes){.key = keys[i], .klen = klens[i]};
        key->q.filter_hash = kv_key_hash(db, &key->kh, db->keyed);
        size_t len = klens[i] < state[0].klen ? klens[i] : state[0].klen, shared = 0;
        while (shared + 8 <= at && shared + 16 <= len &&
               memcmp(state[0].key + shared, key->key + shared, 8) == 0)
            shared += 8;
        at = shared;
    }
    COUNT(db, gets, nvalid);

    if (nvalid) { /* else every key failed its check: nothing to read */
        kv_db_view_take(db, snap, &g.rv);
        g.ranges = g.rv.hold.view->mem_rt || g.rv.hold.view->imm_rt || g.rv.v->rt_tables;
        probe_memtables(&g, state, nvalid, ikeys);
        for (k = 0; k < g.norder; k++) /* words stand for bytewise order only */
            g.order[k].word = db->cmp ? 0 : kv_key_word(g.order[k].k->key, g.order[k].k->klen, at);
        sort_keys(db->cmp, g.order, g.norder);
        probe_tables(&g);
        kv_db_view_drop(db, &g.rv);
    }

    COUNT(db, memtable_hits, g.mem_hits);
    COUNT(db, tables_probed, g.probed);
    COUNT(db, filter_negatives, g.negatives);
    COUNT(db, filter_positives, g.positives);
    COUNT(db, false_positives, g.false_pos);
    COUNT(db, block_reads, g.reads);
    COUNT(db, block_read_bytes, g.read_bytes);
    COUNT(db, device_reads, g.dev_reads);
    COUNT(db, device_read_bytes, g.dev_bytes);
    COUNT(db, cache_hits, g.hits);
    if (db->cache) /* each read a Get makes through a cache is a miss */
        COUNT(db, cache_misses, g.reads);
    free(block);
    if (g.err_at != SIZE_MAX)
        kv_error_set(g.err, "%s", g.text);
    return KV_OK;
}
