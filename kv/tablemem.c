/* tablemem.c - the table memory budget: which live tables keep their
 * decoded index and filter in memory, and which page them through the
 * block cache (sstable/paged.c), so that what is kept stays within
 * kv_options.table_memory_budget.
 *
 * The order (doc/database.md, "Table memory budget"): while the kept
 * indexes and filters of every live table exceed the budget, first the
 * least used tables' indexes are paged, then, once every index is, the
 * filters of the deepest level's tables (least used first), then the
 * next level up's, and so on. A paged index costs a found get one cache
 * lookup more (a device read when the cache lacks it); a paged filter
 * costs every get that reaches the table one, found or missing, and the
 * deepest level's filters cost the most memory for the fewest false
 * positives saved (Monkey: its bits per key are the fewest), so they go
 * last and deepest first.
 *
 * "Used": the lookups that reached the table since the last choice (its
 * reader's gets counter, kv_table_stats' probes), halved at each choice
 * so that old use fades; a table new since the last choice counts as the
 * mean, and a kept one's use counts a quarter more, so that two tables
 * of about the same use do not trade places (and reread) at every choice.
 *
 * An index or filter larger than a quarter of a block cache shard's share
 * (a sixteenth of block_cache_size; sstable/cache.c) is never paged: a
 * larger one would crowd out its shard's data blocks, or a second such
 * one hashed to the same shard, and every use that misses reads and
 * decodes all of it from the file (measured: two paged 670 KB indexes in
 * a 1 MB shard read one or the other on 40% of found gets). With no
 * block cache nothing is paged.
 *
 * The bound: right after a choice, the kept bytes of the version it chose
 * over are at most the budget (everything paged is 0), but for what it
 * may not page (above) or could not (out of memory), and what it paged
 * that a reader still used (freed by a later choice, counted in
 * table_memory_bytes until then). Between choices, tables opened since (a flush's or compaction's
 * output, kept at open until the choice that follows its install) add
 * theirs. */
#define _POSIX_C_SOURCE 200809L
#include "tablemem.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "db.h"
#include "util/error.h"
#include "version.h"

struct used {
    uint64_t number, gets;
    double score;
};

struct kv_tablemem {
    pthread_mutex_t mu;
    size_t budget;
    size_t most; /* the largest index or filter paged: a quarter of a cache shard's share */
    kv_sst_page_sink sink;
    struct used *prev; /* [mu] the last choice's tables, by number */
    size_t nprev;
    /* The thread that chooses again every KV_TABLEMEM_PERIOD_S seconds,
     * for a database whose tables do not change (reads only) while their
     * use does: kv_tablemem_start, kv_tablemem_stop. */
    pthread_t thread;
    int running, stop;   /* [mu] */
    pthread_cond_t wake; /* [mu] signalled by kv_tablemem_stop */
};

#define KV_TABLEMEM_PERIOD_S 10

int kv_tablemem_new(size_t budget, size_t cache_shard, struct kv_tablemem **out)
{
    *out = NULL;
    if (budget == 0)
        return KV_OK;
    struct kv_tablemem *tm = calloc(1, sizeof *tm);
    if (!tm)
        return KV_ENOMEM;
    if (pthread_mutex_init(&tm->mu, NULL) != 0) {
        free(tm);
        return KV_ENOMEM;
    }
    if (pthread_cond_init(&tm->wake, NULL) != 0) {
        pthread_mutex_destroy(&tm->mu);
        free(tm);
        return KV_ENOMEM;
    }
    tm->budget = budget;
    tm->most = cache_shard / 4;
    *out = tm;
    return KV_OK;
}

void kv_tablemem_free(struct kv_tablemem *tm)
{
    if (!tm)
        return;
    kv_tablemem_stop(tm);
    pthread_cond_destroy(&tm->wake);
    pthread_mutex_destroy(&tm->mu);
    free(tm->prev);
    free(tm);
}

void kv_tablemem_table_opened(struct kv_tablemem *tm, struct kv_table *t)
{
    if (tm)
        kv_sst_reader_pageable(t->reader, &tm->sink);
}

void kv_tablemem_reads(const struct kv_tablemem *tm, uint64_t *index_reads, uint64_t *filter_reads)
{
    *index_reads = tm ? atomic_load_explicit(&tm->sink.index_reads, memory_order_relaxed) : 0;
    *filter_reads = tm ? atomic_load_explicit(&tm->sink.filter_reads, memory_order_relaxed) : 0;
}

/* One live table as a choice sees it. */
struct cand {
    struct kv_table *t;
    double score;
    uint64_t ix, f; /* bytes of its index and filter, kept or not */
    int keep_ix, keep_f;
};

static int by_number(const void *a, const void *b)
{
    uint64_t x = ((const struct used *)a)->number, y = ((const struct used *)b)->number;
    return x < y ? -1 : x > y;
}

/* Least used first; on a tie, the deeper level's, then the older. */
static int by_use(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;
    if (x->score != y->score)
        return x->score < y->score ? -1 : 1;
    if (x->t->meta.level != y->t->meta.level)
        return x->t->meta.level > y->t->meta.level ? -1 : 1;
    return x->t->meta.number < y->t->meta.number ? -1 : x->t->meta.number > y->t->meta.number;
}

/* Deepest level first, least used first within it. */
static int by_depth(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;
    if (x->t->meta.level != y->t->meta.level)
        return x->t->meta.level > y->t->meta.level ? -1 : 1;
    return by_use(a, b);
}

/* Each table's use since the last choice, scored (the file's comment). */
static void score(struct kv_tablemem *tm, struct cand *c, size_t n, struct used *now)
{
    double sum = 0;
    size_t known = 0;
    for (size_t i = 0; i < n; i++) {
        kv_sst_counters k;
        kv_sst_reader_counters(c[i].t->reader, &k);
        struct used key = {.number = c[i].t->meta.number};
        const struct used *p = tm->prev
                                   ? bsearch(&key, tm->prev, tm->nprev, sizeof *tm->prev, by_number)
                                   : NULL;
        now[i] = (struct used){key.number, k.gets, -1};
        if (p) {
            now[i].score = p->score / 2 + (double)(k.gets - p->gets);
            sum += now[i].score;
            known++;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (now[i].score < 0)
            now[i].score = known ? sum / (double)known : 0;
        kv_sst_table_memory m;
        kv_sst_reader_memory(c[i].t->reader, &m);
        c[i].ix = m.index;
        c[i].f = m.filter;
        c[i].score = now[i].score * (m.index_paged ? 1.0 : 1.25);
    }
}

/* Pages indexes, then filters, in the order the file's comment gives,
 * while the kept bytes pass the budget. */
static void choose(struct kv_tablemem *tm, struct cand *c, size_t n)
{
    uint64_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        c[i].keep_ix = c[i].keep_f = 1;
        kept += c[i].ix + c[i].f;
    }
    if (kept <= tm->budget)
        return;
    qsort(c, n, sizeof *c, by_use);
    for (size_t i = 0; i < n && kept > tm->budget; i++)
        if (c[i].ix <= tm->most) {
            c[i].keep_ix = 0;
            kept -= c[i].ix;
        }
    if (kept <= tm->budget)
        return;
    qsort(c, n, sizeof *c, by_depth);
    for (size_t i = 0; i < n && kept > tm->budget; i++)
        if (c[i].f && c[i].f <= tm->most) {
            c[i].keep_f = 0;
            kept -= c[i].f;
        }
}

void kv_tablemem_update(kv_db *db)
{
    struct kv_tablemem *tm = db->tm;
    if (!tm)
        return;
    pthread_mutex_lock(&db->mu);
    struct kv_version *v = db->current;
    if (v)
        kv_version_ref(v);
    pthread_mutex_unlock(&db->mu);
    if (!v)
        return;
    size_t n = v->n;
    struct cand *c = calloc(n ? n : 1, sizeof *c);
    struct used *now = calloc(n ? n : 1, sizeof *now);
    if (!c || !now) { /* out of memory: the last choice stands */
        free(c);
        free(now);
        kv_version_unref(v);
        return;
    }
    for (size_t i = 0; i < n; i++)
        c[i].t = v->tables[i];
    pthread_mutex_lock(&tm->mu);
    score(tm, c, n, now);
    choose(tm, c, n);
    /* Applied one table at a time: lookups go on meanwhile, and each sees
     * the table's index and filter either kept or paged (paged.c). */
    for (size_t i = 0; i < n; i++)
        kv_sst_reader_keep(c[i].t->reader, c[i].keep_ix, c[i].keep_f);
    qsort(now, n, sizeof *now, by_number);
    free(tm->prev);
    tm->prev = now;
    tm->nprev = n;
    pthread_mutex_unlock(&tm->mu);
    free(c);
    kv_version_unref(v);
}

static void *periodic(void *arg)
{
    kv_db *db = arg;
    struct kv_tablemem *tm = db->tm;
    pthread_mutex_lock(&tm->mu);
    while (!tm->stop) {
        struct timespec at;
        clock_gettime(CLOCK_REALTIME, &at);
        at.tv_sec += KV_TABLEMEM_PERIOD_S;
        if (pthread_cond_timedwait(&tm->wake, &tm->mu, &at) != ETIMEDOUT || tm->stop)
            continue;
        pthread_mutex_unlock(&tm->mu); /* kv_tablemem_update takes db->mu, then tm->mu */
        kv_tablemem_update(db);
        pthread_mutex_lock(&tm->mu);
    }
    pthread_mutex_unlock(&tm->mu);
    return NULL;
}

int kv_tablemem_start(kv_db *db)
{
    struct kv_tablemem *tm = db->tm;
    if (!tm || tm->running)
        return KV_OK;
    int e = pthread_create(&tm->thread, NULL, periodic, db);
    if (e != 0)
        return kv_error_errno(e, "%s: cannot start the table memory thread", db->path);
    tm->running = 1;
    return KV_OK;
}

void kv_tablemem_stop(struct kv_tablemem *tm)
{
    if (!tm || !tm->running)
        return;
    pthread_mutex_lock(&tm->mu);
    tm->stop = 1;
    pthread_cond_broadcast(&tm->wake);
    pthread_mutex_unlock(&tm->mu);
    pthread_join(tm->thread, NULL);
    tm->running = 0;
}
