/* version.c - versions: immutable, reference-counted lists of live tables
 * (see version.h). */
#define _POSIX_C_SOURCE 200809L
#include "version.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "order.h"

void kv_table_ref(struct kv_table *t)
{
    atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
}

void kv_table_unref(struct kv_table *t)
{
    if (t && atomic_fetch_sub(&t->refs, 1) == 1) {
        kv_sst_reader_close(t->reader);
        kv_rtset_unref(t->rt);
        /* Replaced by a compaction and no longer read by anyone. A crash
         * before this leaves a file the manifest does not name, which the
         * next open deletes. */
        if (atomic_load(&t->obsolete) && t->path) {
            if (t->man) /* once no reader of an older manifest state needs it */
                kv_manifest_unlink(t->man, t->path, atomic_load(&t->dead_txn));
            else
                unlink(t->path);
        }
        free(t->path);
        free(t->meta.smallest);
        free(t->meta.largest);
        free(t);
    }
}

int kv_version_rt(struct kv_version *v, const kv_rtset **out)
{
    *out = NULL;
    if (!v->rt_tables)
        return KV_OK;
    kv_rtset *u = atomic_load_explicit(&v->rt_union, memory_order_acquire);
    if (!u) {
        const kv_rtset **sets = malloc(v->rt_tables * sizeof *sets);
        if (!sets)
            return KV_ENOMEM;
        size_t n = 0;
        for (size_t i = 0; i < v->n; i++)
            if (v->tables[i]->rt)
                sets[n++] = v->tables[i]->rt;
        int rc = kv_rtset_union(v->cmp, sets, n, NULL, 0, NULL, NULL, &u);
        free(sets);
        if (rc != KV_OK)
            return rc;
        kv_rtset *expect = NULL;
        if (!atomic_compare_exchange_strong(&v->rt_union, &expect, u)) {
            kv_rtset_unref(u); /* another reader built it first */
            u = expect;
        }
    }
    *out = u;
    return KV_OK;
}

void kv_version_ref(struct kv_version *v)
{
    atomic_fetch_add(&v->refs, 1);
}

void kv_version_unref(struct kv_version *v)
{
    if (v && atomic_fetch_sub(&v->refs, 1) == 1) {
        for (size_t i = 0; i < v->n; i++)
            kv_table_unref(v->tables[i]);
        for (size_t i = 0; i < v->nblobs; i++)
            kv_blob_file_unref(v->blobs[i]);
        kv_rtset_unref(atomic_load(&v->rt_union));
        kv_manifest_pin_unref(v->pin); /* after the tables: their files are let go */
        free(v->blobs);
        free(v->tables);
        free(v->lword);
        free(v->run_start);
        free(v);
    }
}

/* Search order: by level; level 0 newest (highest number) first; deeper
 * levels by run, newest (largest id) first, then by smallest key, under
 * cmp (NULL: bytewise). */
static int search_order(const void *pa, const void *pb, void *cmp)
{
    const struct kv_table *a = *(struct kv_table *const *)pa, *b = *(struct kv_table *const *)pb;
    if (a->meta.level != b->meta.level)
        return a->meta.level < b->meta.level ? -1 : 1;
    if (a->meta.level == 0)
        return a->meta.number > b->meta.number ? -1 : a->meta.number < b->meta.number;
    if (a->meta.run != b->meta.run)
        return a->meta.run > b->meta.run ? -1 : 1;
    return kv_sst_cmp(cmp, a->meta.smallest, a->meta.smallest_len, b->meta.smallest,
                      b->meta.smallest_len);
}

static int blob_order(const void *pa, const void *pb)
{
    const struct kv_blob *a = *(struct kv_blob *const *)pa, *b = *(struct kv_blob *const *)pb;
    return a->number < b->number ? -1 : a->number > b->number;
}

/* v's blob files: base's but the removed, and the added, sorted. */
static int edit_blobs(struct kv_version *v, const struct kv_version *base,
                      const struct kv_blob_edit *be)
{
    size_t cap = (base ? base->nblobs : 0) + (be ? be->nadd : 0);
    if (!cap)
        return 0;
    if (!(v->blobs = malloc(cap * sizeof *v->blobs)))
        return -1;
    for (size_t i = 0; base && i < base->nblobs; i++) {
        int gone = 0;
        for (size_t j = 0; be && j < be->nremove && !gone; j++)
            gone = base->blobs[i]->number == be->remove[j];
        if (!gone)
            v->blobs[v->nblobs++] = base->blobs[i];
    }
    for (size_t i = 0; be && i < be->nadd; i++)
        v->blobs[v->nblobs++] = be->add[i];
    qsort(v->blobs, v->nblobs, sizeof *v->blobs, blob_order);
    for (size_t i = 0; i < v->nblobs; i++)
        kv_blob_file_ref(v->blobs[i]);
    return 0;
}

/* v's levels and runs (v->tables sorted in search order), and each deeper
 * run's search words. -1 when out of memory. */
static int find_runs(struct kv_version *v)
{
    size_t nruns = 0;
    for (size_t i = 0; i < v->n; i++)
        nruns += i == 0 || v->tables[i]->meta.level == 0 ||
                 v->tables[i]->meta.level != v->tables[i - 1]->meta.level ||
                 v->tables[i]->meta.run != v->tables[i - 1]->meta.run;
    /* run_start[nruns + 1], then skip[nruns] (at least one of each). */
    if (!(v->run_start = calloc(2 * nruns + 2, sizeof *v->run_start)))
        return -1;
    v->skip = v->run_start + nruns + 1;
    v->nruns = nruns;
    size_t r = 0;
    for (size_t i = 0; i < v->n; i++)
        if (i == 0 || v->tables[i]->meta.level == 0 ||
            v->tables[i]->meta.level != v->tables[i - 1]->meta.level ||
            v->tables[i]->meta.run != v->tables[i - 1]->meta.run)
            v->run_start[r++] = i;
    v->run_start[nruns] = v->n;
    size_t i = 0;
    r = 0;
    for (int l = 0; l < KV_LEVELS; l++) {
        v->start[l] = i;
        v->level_run[l] = r;
        while (i < v->n && v->tables[i]->meta.level == (uint32_t)l)
            i++;
        while (r < nruns && v->run_start[r] < i)
            r++;
    }
    v->start[KV_LEVELS] = v->n;
    v->level_run[KV_LEVELS] = nruns;
    for (r = v->level_run[1]; r < nruns && !v->cmp; r++) { /* words: bytewise order only */
        size_t a0 = v->run_start[r], z0 = v->run_start[r + 1];
        const kv_table_meta *a = &v->tables[a0]->meta;
        const kv_table_meta *z = &v->tables[z0 - 1]->meta;
        size_t skip = kv_key_common_prefix(a->smallest, a->smallest_len, z->largest,
                                           z->largest_len);
        v->skip[r] = skip;
        for (size_t k = a0; k < z0; k++) {
            const kv_table_meta *m = &v->tables[k]->meta;
            v->lword[k] = kv_key_word(m->largest, m->largest_len, skip);
            v->sword[k] = kv_key_word(m->smallest, m->smallest_len, skip);
        }
    }
    return 0;
}

struct kv_version *kv_version_edit(const struct kv_version *base, const uint64_t *remove,
                                   size_t nremove, struct kv_table *const *add, size_t nadd,
                                   const kv_comparator *cmp)
{
    return kv_version_edit_blobs(base, remove, nremove, add, nadd, cmp, NULL);
}

struct kv_version *kv_version_edit_blobs(const struct kv_version *base, const uint64_t *remove,
                                         size_t nremove, struct kv_table *const *add,
                                         size_t nadd, const kv_comparator *cmp,
                                         const struct kv_blob_edit *be)
{
    struct kv_version *v = calloc(1, sizeof *v);
    size_t cap = (base ? base->n : 0) + nadd;
    if (!v || (cap && (!(v->tables = malloc(cap * sizeof *v->tables)) ||
                       !(v->lword = malloc(2 * cap * sizeof *v->lword))))) {
        if (v)
            free(v->tables);
        free(v);
        return NULL;
    }
    v->sword = cap ? v->lword + cap : NULL; /* no arithmetic on NULL */
    v->cmp = cmp;
    atomic_init(&v->refs, 1);
    for (size_t i = 0; base && i < base->n; i++) {
        int gone = 0;
        for (size_t j = 0; j < nremove && !gone; j++)
            gone = base->tables[i]->meta.number == remove[j];
        if (!gone)
            v->tables[v->n++] = base->tables[i];
    }
    for (size_t i = 0; i < nadd; i++)
        v->tables[v->n++] = add[i];
    kv_order_sort(v->tables, v->n, sizeof *v->tables, search_order, (void *)cmp);
    if (find_runs(v) != 0) {
        free(v->tables);
        free(v->lword);
        free(v);
        return NULL;
    }
    if (edit_blobs(v, base, be) != 0) {
        free(v->tables);
        free(v->lword);
        free(v->run_start);
        free(v);
        return NULL;
    }
    for (size_t k = 0; k < v->n; k++) {
        kv_table_ref(v->tables[k]);
        v->rt_tables += v->tables[k]->rt != NULL;
    }
    return v;
}

uint64_t kv_version_level_bytes(const struct kv_version *v, int level)
{
    uint64_t sum = 0;
    for (size_t i = v->start[level]; i < v->start[level + 1]; i++)
        sum += v->tables[i]->meta.file_size;
    return sum;
}

size_t kv_tables_at_or_after(struct kv_table *const *t, size_t n, const void *key, size_t klen,
                             const kv_comparator *cmp)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const kv_table_meta *m = &t[mid]->meta;
        if (kv_sst_cmp(cmp, m->largest, m->largest_len, key, klen) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

size_t kv_version_find_run(const struct kv_version *v, size_t r, const void *key, size_t klen)
{
    /* The first table whose largest key is >= key. */
    size_t lo = v->run_start[r], hi = v->run_start[r + 1], end = hi;
    if (lo == end)
        return SIZE_MAX;
    size_t skip = v->skip[r];
    const kv_table_meta *first = &v->tables[lo]->meta;
    if (v->cmp || klen < skip || (skip && memcmp(key, first->smallest, skip) != 0)) {
        /* Under a comparator (no words), or outside the level's common
         * prefix, so outside its range: the search decides by whole keys. */
        lo += kv_tables_at_or_after(v->tables + lo, hi - lo, key, klen, v->cmp);
        if (lo == end)
            return SIZE_MAX;
        const kv_table_meta *m = &v->tables[lo]->meta;
        return kv_sst_cmp(v->cmp, key, klen, m->smallest, m->smallest_len) >= 0 ? lo : SIZE_MAX;
    }
    uint64_t w = kv_key_word(key, klen, skip);
    lo += kv_word_lower_bound(v->lword + lo, hi - lo, w);
    if (lo < hi && v->lword[lo] == w) { /* a tie: the keys decide among the tied */
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            const kv_table_meta *m = &v->tables[mid]->meta;
            if (v->lword[mid] == w && kv_key_cmp(m->largest, m->largest_len, key, klen) < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
    }
    if (lo == end)
        return SIZE_MAX;
    if (v->sword[lo] != w)
        return v->sword[lo] < w ? lo : SIZE_MAX;
    const kv_table_meta *m = &v->tables[lo]->meta;
    return kv_key_cmp(key, klen, m->smallest, m->smallest_len) >= 0 ? lo : SIZE_MAX;
}

int kv_version_key_below(const struct kv_version *v, int level, const void *key, size_t klen)
{
    for (size_t r = v->level_run[level < 1 ? 1 : level]; r < v->nruns; r++)
        if (kv_version_find_run(v, r, key, klen) != SIZE_MAX)
            return 1;
    if (level == 0)
        for (size_t i = v->start[0]; i < v->start[1]; i++) {
            const kv_table_meta *m = &v->tables[i]->meta;
            if (kv_sst_cmp(v->cmp, key, klen, m->smallest, m->smallest_len) >= 0 &&
                kv_sst_cmp(v->cmp, key, klen, m->largest, m->largest_len) <= 0)
                return 1;
        }
    return 0;
}

int kv_version_key_older(const struct kv_version *v, int level, uint64_t run, const void *key,
                         size_t klen)
{
    for (size_t r = v->level_run[level]; r < v->level_run[level + 1]; r++)
        if (kv_version_run_id(v, r) < run && kv_version_find_run(v, r, key, klen) != SIZE_MAX)
            return 1;
    return level + 1 < KV_LEVELS && kv_version_key_below(v, level + 1, key, klen);
}
