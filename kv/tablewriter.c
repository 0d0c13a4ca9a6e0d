/* tablewriter.c - kv_table_writer: a table written outside any database,
 * in the format a database's own tables have (doc/sstable_format.md,
 * "Tables written by the store"), for kv_ingest (ingest.c).
 *
 * Every entry carries sequence 1, its range tombstones too: a table's
 * tombstones hide only entries older than their sequence, so they never hide
 * the table's own point entries, only what the database held before the
 * ingest. The filter holds XXH3 hashes of the user keys under a seed of the
 * writer's own (kept in the table's properties, filter_seed); a database
 * that ingests the table asks it with that seed's hash (kv_table.filter_keyed
 * KV_TABLE_FILTER_OWN_SEED). The properties' note names the writer and its
 * comparator, which kv_ingest compares with the database's. Values are
 * always inline: a table here never refers to a blob file. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "ingest.h"
#include "order.h"
#include "util/ikey.h"

struct kv_table_writer {
    kv_sst_writer *w;
    char *path;
    const kv_comparator *cmp; /* user key order; NULL: bytewise */
    kv_comparator icmp;       /* the table order under cmp */
    uint64_t seed;            /* the filter's */
    uint8_t *last;            /* the last point key added (user key) */
    size_t last_len, last_cap;
    int have_last;
    uint8_t *ikey; /* the internal key being added */
    size_t ikey_cap;
    kv_rt *rts; /* range deletions: keys are copies */
    size_t nrt, rtcap;
    uint64_t entries;
    uint8_t *first; /* the first point key added (user key) */
    size_t first_len;
    int merges; /* a merge operand was added */
    int failed; /* an add failed for a reason other than the caller's arguments */
};

int kv_table_writer_open(const char *path, const kv_options *opts, kv_table_writer **w)
{
    if (!w)
        return kv_error_set(KV_EINVAL, "kv_table_writer_open: w is NULL");
    *w = NULL;
    kv_options o;
    int rc = kv_db_options(path, "kv_table_writer_open", opts, &o);
    if (rc != KV_OK)
        return rc;
    kv_table_writer *tw = calloc(1, sizeof *tw);
    if (!tw || !(tw->path = strdup(path))) {
        free(tw);
        return kv_error_set(KV_ENOMEM, "%s: kv_table_writer_open: out of memory", path);
    }
    if (o.comparator && strcmp(o.comparator->name, KV_BYTEWISE_NAME) != 0) {
        tw->cmp = o.comparator;
        kv_ikey_comparator_init(&tw->icmp, tw->cmp);
    }
    tw->seed = kv_db_random_seed();
    char note[KV_INGEST_NOTE_MAX];
    snprintf(note, sizeof note, "%s%s", KV_INGEST_NOTE, tw->cmp ? tw->cmp->name : KV_BYTEWISE_NAME);
    kv_sst_options so;
    kv_sst_options_init(&so);
    /* As a database's deepest level is written (builder.c). */
    so.block_size = o.compression != KV_COMPRESSION_NONE && o.compressed_block_size
                        ? o.compressed_block_size
                        : o.block_size;
    so.compression = o.compression;
    so.compression_level = o.compression_level;
    so.dict_bytes = o.compression_dict_bytes;
    so.bits_per_key = o.bloom_bits_per_key;
    so.filter_layout = (kv_bloom_layout)o.filter_layout;
    so.seed = tw->seed;
    so.note = note;
    so.comparator = tw->cmp ? &tw->icmp : NULL;
    if ((rc = kv_sst_writer_new(path, &so, &tw->w)) != KV_OK) {
        free(tw->path);
        free(tw);
        return rc;
    }
    *w = tw;
    return KV_OK;
}

/* The checks every add makes: the writer, the key, its order. */
static int check_add(kv_table_writer *w, const char *call, const void *key, size_t klen)
{
    if (!w)
        return kv_error_set(KV_EINVAL, "%s: w is NULL", call);
    if (w->failed)
        return kv_error_set(KV_EINVAL, "%s: %s: an earlier add failed", w->path, call);
    if ((klen && !key) || klen == 0 || klen > KV_MAX_KEY_SIZE)
        return kv_error_set(KV_EINVAL, "%s: %s: key of %zu bytes%s (1 .. KV_MAX_KEY_SIZE)", w->path,
                            call, klen, klen && !key ? " at NULL" : "");
    if (w->have_last && kv_sst_cmp(w->cmp, key, klen, w->last, w->last_len) <= 0)
        return kv_error_set(KV_EINVAL, "%s: %s: key not after the previous key", w->path, call);
    return KV_OK;
}

static int add(kv_table_writer *w, const char *call, int kind, const void *key, size_t klen,
               const void *val, size_t vlen)
{
    int rc = check_add(w, call, key, klen);
    if (rc != KV_OK)
        return rc;
    if (vlen && !val)
        return kv_error_set(KV_EINVAL, "%s: %s: NULL value with length %zu", w->path, call, vlen);
    if (vlen > KV_MAX_VALUE_SIZE)
        return kv_error_set(KV_EINVAL, "%s: %s: value of %zu bytes, over KV_MAX_VALUE_SIZE",
                            w->path, call, vlen);
    size_t plen = kv_ikey_prefix_len(key, klen), ilen = plen + KV_IKEY_TRAILER;
    if (ilen > w->ikey_cap || klen > w->last_cap) {
        size_t cap = ilen > klen ? ilen : klen;
        uint8_t *a = realloc(w->ikey, cap), *b = a ? realloc(w->last, cap) : NULL;
        if (a)
            w->ikey = a;
        if (!a || !b)
            return kv_error_set(KV_ENOMEM, "%s: %s: out of memory", w->path, call);
        w->last = b;
        w->ikey_cap = w->last_cap = cap;
    }
    kv_ikey_put_prefix(w->ikey, key, klen);
    kv_ikey_put_trailer(w->ikey + plen, KV_INGEST_SEQ, kind);
    rc = kv_sst_writer_add_hashed(w->w, w->ikey, ilen, val, vlen, kv_hash_key(key, klen, w->seed));
    if (rc != KV_OK) {
        w->failed = 1;
        return rc;
    }
    memcpy(w->last, key, klen);
    w->last_len = klen;
    w->have_last = 1;
    if (!w->entries++ && (w->first = malloc(klen)) != NULL) {
        memcpy(w->first, key, klen);
        w->first_len = klen;
    }
    w->merges |= kind == KV_KIND_MERGE;
    return KV_OK;
}

int kv_table_writer_put(kv_table_writer *w, const void *key, size_t klen, const void *val,
                        size_t vlen)
{
    return add(w, "kv_table_writer_put", KV_KIND_VALUE, key, klen, val, vlen);
}

int kv_table_writer_delete(kv_table_writer *w, const void *key, size_t klen)
{
    return add(w, "kv_table_writer_delete", KV_KIND_TOMBSTONE, key, klen, NULL, 0);
}

int kv_table_writer_merge(kv_table_writer *w, const void *key, size_t klen, const void *operand,
                          size_t olen)
{
    return add(w, "kv_table_writer_merge", KV_KIND_MERGE, key, klen, operand, olen);
}

int kv_table_writer_delete_range(kv_table_writer *w, const void *begin, size_t blen,
                                 const void *end, size_t elen)
{
    const char *call = "kv_table_writer_delete_range";
    if (!w)
        return kv_error_set(KV_EINVAL, "%s: w is NULL", call);
    if ((blen && !begin) || (elen && !end) || blen > KV_MAX_KEY_SIZE || elen > KV_MAX_KEY_SIZE)
        return kv_error_set(KV_EINVAL, "%s: %s: a bound NULL or over KV_MAX_KEY_SIZE", w->path,
                            call);
    if (kv_sst_cmp(w->cmp, begin, blen, end, elen) >= 0)
        return kv_error_set(KV_EINVAL, "%s: %s: begin is not before end", w->path, call);
    if (w->nrt == w->rtcap) {
        size_t nc = w->rtcap ? 2 * w->rtcap : 8;
        kv_rt *n = realloc(w->rts, nc * sizeof *n);
        if (!n)
            return kv_error_set(KV_ENOMEM, "%s: %s: out of memory", w->path, call);
        w->rts = n;
        w->rtcap = nc;
    }
    uint8_t *b = malloc(blen + 1), *e = malloc(elen + 1);
    if (!b || !e) {
        free(b);
        free(e);
        return kv_error_set(KV_ENOMEM, "%s: %s: out of memory", w->path, call);
    }
    if (blen)
        memcpy(b, begin, blen);
    if (elen)
        memcpy(e, end, elen);
    w->rts[w->nrt++] =
        (kv_rt){.start = b, .slen = blen, .end = e, .elen = elen, .seq = KV_INGEST_SEQ};
    return KV_OK;
}

static void writer_free(kv_table_writer *w)
{
    for (size_t i = 0; i < w->nrt; i++) {
        free((void *)w->rts[i].start);
        free((void *)w->rts[i].end);
    }
    free(w->rts);
    free(w->ikey);
    free(w->last);
    free(w->first);
    free(w->path);
    free(w);
}

/* The range deletions as the table's range tombstone block. */
static int put_ranges(kv_table_writer *w)
{
    kv_rtset *set = NULL;
    uint8_t *blk = NULL;
    size_t len = 0;
    int rc = kv_rtset_union(w->cmp, NULL, 0, w->rts, w->nrt, NULL, NULL, &set);
    if (rc == KV_OK && set && (rc = kv_rtset_encode(set, &blk, &len)) == KV_OK)
        rc = kv_sst_writer_set_range_tombstones(w->w, blk, len);
    free(blk);
    kv_rtset_unref(set);
    return rc;
}

int kv_table_writer_finish(kv_table_writer *w)
{
    if (!w)
        return kv_error_set(KV_EINVAL, "kv_table_writer_finish: w is NULL");
    int rc = KV_OK;
    if (w->failed)
        rc = kv_error_set(KV_EIO, "%s: kv_table_writer_finish: an earlier add failed", w->path);
    else if (!w->entries && !w->nrt)
        rc = kv_error_set(KV_EINVAL, "%s: kv_table_writer_finish: no entry", w->path);
    else if (w->nrt)
        rc = put_ranges(w);
    if (rc != KV_OK)
        kv_sst_writer_abandon(w->w);
    else
        rc = kv_sst_writer_finish(w->w, NULL); /* syncs the file and its directory */
    /* (A first key that could not be copied: not recorded, read whole.) */
    if (rc == KV_OK && (!w->entries || w->first)) {
        struct kv_written wr = {w->entries,
                                w->first,
                                w->entries ? w->last : NULL,
                                w->first_len,
                                w->entries ? w->last_len : 0,
                                w->merges};
        kv_written_note(w->path, &wr);
    }
    writer_free(w);
    return rc;
}

void kv_table_writer_abandon(kv_table_writer *w)
{
    if (!w)
        return;
    kv_sst_writer_abandon(w->w);
    writer_free(w);
}

/* ---- the tables this process's writers finished (ingest.h) ------------------------- */

struct written_rec {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime, ctime;
    struct kv_written w; /* owns its keys */
};

static pthread_mutex_t written_mu = PTHREAD_MUTEX_INITIALIZER;
static struct written_rec written[KV_WRITTEN_MAX]; /* a ring: the oldest is overwritten */
static size_t written_next;

static int same_time(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

/* *dst: a copy of src[0, len) (NULL when src is NULL). 0: out of memory. */
static int copy_key(uint8_t **dst, const uint8_t *src, size_t len)
{
    *dst = NULL;
    if (!src)
        return 1;
    if (!(*dst = malloc(len ? len : 1)))
        return 0;
    memcpy(*dst, src, len);
    return 1;
}

void kv_written_free(struct kv_written *w)
{
    free(w->smallest);
    free(w->largest);
    w->smallest = w->largest = NULL;
}

void kv_written_note(const char *path, const struct kv_written *w)
{
    struct stat st;
    struct written_rec r = {0};
    if (stat(path, &st) != 0 || !copy_key(&r.w.smallest, w->smallest, w->smallest_len) ||
        !copy_key(&r.w.largest, w->largest, w->largest_len)) {
        kv_written_free(&r.w);
        return;
    }
    r.dev = st.st_dev;
    r.ino = st.st_ino;
    r.size = st.st_size;
    r.mtime = st.st_mtim;
    r.ctime = st.st_ctim;
    r.w.entries = w->entries;
    r.w.smallest_len = w->smallest_len;
    r.w.largest_len = w->largest_len;
    r.w.merges = w->merges;
    pthread_mutex_lock(&written_mu);
    struct written_rec *slot = &written[written_next++ % KV_WRITTEN_MAX];
    kv_written_free(&slot->w);
    *slot = r;
    pthread_mutex_unlock(&written_mu);
}

int kv_written_find(const struct stat *st, struct kv_written *out)
{
    int found = 0;
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&written_mu);
    for (size_t i = 0; i < KV_WRITTEN_MAX && !found; i++) {
        const struct written_rec *r = &written[i];
        if (r->ino != st->st_ino || r->dev != st->st_dev || r->size != st->st_size ||
            !same_time(&r->mtime, &st->st_mtim) || !same_time(&r->ctime, &st->st_ctim))
            continue;
        found = copy_key(&out->smallest, r->w.smallest, r->w.smallest_len) &&
                copy_key(&out->largest, r->w.largest, r->w.largest_len);
        if (found) {
            out->entries = r->w.entries;
            out->smallest_len = r->w.smallest_len;
            out->largest_len = r->w.largest_len;
            out->merges = r->w.merges;
        } else {
            kv_written_free(out);
        }
    }
    pthread_mutex_unlock(&written_mu);
    return found;
}
