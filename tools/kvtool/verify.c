/* verify.c - checking one table entry by entry (sst verify, db verify), and
 * db verify: the tables, the blob files and the references between them. */
#include "kvtool.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* One problem found by db verify: printed at once; counted. */
static size_t problems;

static void problem(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fflush(stdout);
    fprintf(stderr, "kvtool: %s: ", cmd_name);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    problems++;
}

/* ---- blob files of a database, as db verify checks them ---------------------------------- */

/* One live blob file. */
struct vblob {
    const struct kv_dir_blob *m; /* its manifest record (kv_inspect) */
    kv_blob_reader *r;           /* open and scanned clean, so references into it
                                  * are read; NULL: it has a problem of its own */
    uint64_t refs, ref_bytes;    /* table entries referring to it, and their
                                  * records' bytes (kv_blob_record_size) */
    size_t problems;             /* found in it or in references into it */
};

/* The blob files of the database db verify checks, and what the entries
 * of the table being checked refer to. */
struct blob_set {
    const char *dir;
    struct vblob *b; /* by number, as kv_inspect lists them */
    size_t n;
    uint8_t *buf; /* a value read back */
    size_t cap;
    uint64_t values;  /* values read back through their references */
    size_t table_bad; /* bad references of the table being checked */
};

/* dir/NNNNNN.blob (six digits at least, as the store names them). */
static void blob_path(char *buf, size_t n, const char *dir, uint64_t number)
{
    snprintf(buf, n, "%s/%06" PRIu64 ".blob", dir, number);
}

static struct vblob *blob_find(struct blob_set *bs, uint64_t number)
{
    size_t lo = 0, hi = bs->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (bs->b[mid].m->number < number)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < bs->n && bs->b[lo].m->number == number ? &bs->b[lo] : NULL;
}

/* A bad reference of the table being checked: the first few printed, the
 * rest counted (a table whose blob file is gone would otherwise print a
 * line per value). */
static void ref_problem(struct blob_set *bs, struct vblob *b, const char *fmt, ...)
{
    if (b)
        b->problems++;
    if (bs->table_bad++ >= REF_PROBLEMS_SHOWN)
        return;
    va_list ap;
    va_start(ap, fmt);
    fflush(stdout);
    fprintf(stderr, "kvtool: %s: ", cmd_name);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    problems++;
}

/* Entry e of table `path` (user key ukey) refers to ref: it must name a
 * live blob file and lie within its records; it is counted against that
 * file, and its value read back (kv_blob_read checks the record's
 * checksum, its key against ukey and its length) when the file passed its
 * own checks. */
static void blob_ref_check(struct blob_set *bs, const char *path, uint64_t e, const uint8_t *ukey,
                           size_t ulen, const kv_blob_ref *ref)
{
    struct vblob *b = blob_find(bs, ref->number);
    if (!b) {
        ref_problem(bs, NULL,
                    "%s: entry %" PRIu64 " refers to blob file %06" PRIu64
                    ".blob, which the manifest does not name",
                    path, e, ref->number);
        return;
    }
    uint64_t rec = kv_blob_record_size(ulen, ref->size);
    uint64_t end = b->m->file_size > BLOB_FOOTER ? b->m->file_size - BLOB_FOOTER : 0;
    if (ref->offset < BLOB_HEADER || ref->offset > end || rec > end - ref->offset) {
        ref_problem(bs, b,
                    "%s: entry %" PRIu64 " refers to a record of %" PRIu64 " bytes at "
                    "offset %" PRIu64 " of %06" PRIu64 ".blob, outside its records [%d, %" PRIu64
                    ")",
                    path, e, rec, ref->offset, ref->number, BLOB_HEADER, end);
        return;
    }
    b->refs++;
    b->ref_bytes += rec;
    if (!b->r)
        return;
    if (ref->size > bs->cap) {
        uint8_t *nb = realloc(bs->buf, (size_t)ref->size);
        if (!nb) {
            ref_problem(bs, b,
                        "%s: entry %" PRIu64 ": out of memory for its value of %" PRIu64 " bytes",
                        path, e, ref->size);
            return;
        }
        bs->buf = nb;
        bs->cap = (size_t)ref->size;
    }
    int rc = kv_blob_read(b->r, ref, ukey, ulen, bs->buf, bs->cap, NULL);
    if (rc != KV_OK) {
        char blob[4096], msg[600];
        blob_path(blob, sizeof blob, bs->dir, ref->number);
        table_error(msg, sizeof msg, blob, rc);
        ref_problem(bs, b, "%s: entry %" PRIu64 ": its value: %s", path, e, msg);
        return;
    }
    bs->values++;
}


void check_free(struct table_check *c)
{
    free(c->first);
    free(c->last);
    memset(c, 0, sizeof *c);
}

static int keep(uint8_t **dst, size_t *dlen, const uint8_t *src, size_t n)
{
    uint8_t *p = realloc(*dst, n ? n : 1);
    if (!p)
        return -1;
    if (n)
        memcpy(p, src, n);
    *dst = p;
    *dlen = n;
    return 0;
}

/* check_table's walk over the entries of one table. */
struct walk {
    struct table *t;
    struct table_check *c;
    struct blob_set *bs;
    int has_filter;       /* the table has a filter */
    uint8_t *prev, *ubuf; /* the key before; room for a user key */
    size_t prev_len, ucap;
    uint64_t prev_hash;    /* the filter hash of the entry before */
    uint64_t raw_k, raw_v; /* key and value bytes seen */
    char *err;
    size_t n;
};

/* Entry e of a store table: its key well formed and of a known kind, a
 * blob entry's value a reference that decodes (and checked against the
 * blob files with bs), a tombstone without a value. Sets the user key and
 * its filter prefix length. 0, or -1 with the problem in w->err. */
static int check_store_entry(struct walk *w, uint64_t e, const uint8_t *k, size_t klen,
                             const uint8_t *v, size_t vlen, const uint8_t **ukey, size_t *ulen,
                             size_t *plen)
{
    struct table_check *c = w->c;
    const char *path = w->t->path;
    struct ikey ik = {.user = w->ubuf};
    if (!ikey_decode(k, klen, &ik)) {
        snprintf(w->err, w->n,
                 "%s: entry %" PRIu64 ": not a store key (user key, 0x00 0x01, "
                 "8-byte trailer)",
                 path, e);
        return -1;
    }
    int kind = ik.k.kind;
    if (kind != KV_SST_KIND_DELETE && kind != KV_SST_KIND_PUT && kind != KV_SST_KIND_BLOB &&
        kind != KV_SST_KIND_MERGE && kind != KV_SST_KIND_TPUT && kind != KV_SST_KIND_TMERGE) {
        snprintf(w->err, w->n, "%s: entry %" PRIu64 ": unknown kind %d", path, e, kind);
        return -1;
    }
    if ((kind == KV_SST_KIND_TPUT || kind == KV_SST_KIND_TMERGE) && vlen < KV_SST_TTL_STAMP) {
        snprintf(w->err, w->n,
                 "%s: entry %" PRIu64 ": a timed entry of %zu bytes, without its %u-byte write "
                 "time",
                 path, e, vlen, KV_SST_TTL_STAMP);
        return -1;
    }
    if (ik.k.kind == KV_SST_KIND_BLOB) {
        kv_blob_ref ref;
        if (kv_blob_ref_decode(v, vlen, &ref) != KV_OK) {
            snprintf(w->err, w->n,
                     "%s: entry %" PRIu64 ": a blob entry whose value is not a "
                     "blob reference (%zu bytes)",
                     path, e, vlen);
            return -1;
        }
        c->blob_refs++;
        if (w->bs)
            blob_ref_check(w->bs, path, e, ik.user, ik.k.user_len, &ref);
    }
    if (ik.k.kind == KV_SST_KIND_DELETE && vlen) {
        snprintf(w->err, w->n, "%s: entry %" PRIu64 ": a tombstone with a value", path, e);
        return -1;
    }
    *ukey = ik.user;
    *ulen = ik.k.user_len;
    *plen = ik.k.prefix_len;
    if (ik.k.sequence < c->min_seq)
        c->min_seq = ik.k.sequence;
    if (ik.k.sequence > c->max_seq)
        c->max_seq = ik.k.sequence;
    return 0;
}

/* A point lookup of entry e (key k, value v; user key ukey with filter
 * prefix plen, filter hash h): the filter must say "maybe", and the entry
 * must come back. 0, or -1 with the problem in w->err. */
static int check_lookup(struct walk *w, uint64_t e, const uint8_t *k, size_t klen, size_t plen,
                        uint64_t h, const uint8_t *v, size_t vlen)
{
    struct table_check *c = w->c;
    const char *path = w->t->path;
    kv_sst_probe pr;
    void *got = NULL;
    size_t glen = 0;
    int bad = 0;
    int rc = kv_sst_seek_prefixed(w->t->r, k, klen, plen, c->filter_checked ? h : 0, &pr, &got,
                                  &glen, NULL, 0, NULL);
    if (c->filter_checked)
        c->lookups++;
    if (c->filter_checked && pr.filter_negative) {
        snprintf(w->err, w->n,
                 "%s: entry %" PRIu64 ": the filter says absent for a key the table "
                 "holds (false negative)",
                 path, e);
        bad = 1;
    } else if (rc == KV_OK && (glen != vlen || (vlen && memcmp(got, v, vlen) != 0))) {
        snprintf(w->err, w->n, "%s: entry %" PRIu64 ": a point lookup returns another value", path,
                 e);
        bad = 1;
    } else if (rc != KV_OK && (!w->has_filter || c->filter_checked)) {
        /* (With a filter of unknown hashes the lookup's filter answer
         * means nothing: only the walk counts.) */
        if (rc == KV_NOTFOUND)
            snprintf(w->err, w->n, "%s: entry %" PRIu64 ": a point lookup does not find it", path,
                     e);
        else
            table_error(w->err, w->n, path, rc);
        bad = 1;
    }
    kv_free(got);
    return bad ? -1 : 0;
}

/* One entry of the walk: in order, well formed, found again by a lookup.
 * 0, or -1 with the problem in w->err. */
static int check_entry(struct walk *w, const uint8_t *k, size_t klen, const uint8_t *v, size_t vlen)
{
    struct table_check *c = w->c;
    const char *path = w->t->path;
    uint64_t e = c->entries++;
    w->raw_k += klen;
    w->raw_v += vlen;
    if (e > 0 && key_cmp(w->prev, w->prev_len, k, klen) >= 0) {
        snprintf(w->err, w->n, "%s: entry %" PRIu64 ": key not above the one before", path, e);
        return -1;
    }
    uint8_t *bigger = klen > w->ucap || !w->ubuf ? realloc(w->ubuf, klen ? klen : 1) : w->ubuf;
    if (keep(&w->prev, &w->prev_len, k, klen) != 0 || !bigger) {
        snprintf(w->err, w->n, "%s: out of memory", path);
        return -1;
    }
    w->ubuf = bigger;
    if (klen > w->ucap)
        w->ucap = klen;
    const uint8_t *ukey = k;
    size_t ulen = klen, plen = klen;
    if (w->t->store && check_store_entry(w, e, k, klen, v, vlen, &ukey, &ulen, &plen) != 0)
        return -1;
    if ((e == 0 && keep(&c->first, &c->first_len, ukey, ulen) != 0) ||
        keep(&c->last, &c->last_len, ukey, ulen) != 0) {
        snprintf(w->err, w->n, "%s: out of memory", path);
        return -1;
    }
    /* The filter hash of this entry, counted once per run of equal
     * hashes as the writer adds them. */
    uint64_t h = kv_sst_filter_hash(w->t->r, ukey, ulen);
    if (e == 0 || h != w->prev_hash)
        c->filter_keys++;
    w->prev_hash = h;
    return check_lookup(w, e, k, klen, plen, h, v, vlen);
}

/* The properties of a walked table against what the walk saw. 0, or -1
 * with the problem in w->err. */
static int check_props(const struct walk *w)
{
    const struct table *t = w->t;
    const struct table_check *c = w->c;
    const kv_sst_properties *p = &t->p;
    char *err = w->err;
    size_t n = w->n;
    int rc;
    if (c->entries != p->entries || w->raw_k != p->raw_key_bytes ||
        w->raw_v != p->raw_value_bytes) {
        snprintf(err, n,
                 "%s: properties say %" PRIu64 " entries of %" PRIu64 "+%" PRIu64
                 " bytes, the blocks hold %" PRIu64 " of %" PRIu64 "+%" PRIu64,
                 t->path, p->entries, p->raw_key_bytes, p->raw_value_bytes, c->entries, w->raw_k,
                 w->raw_v);
        return -1;
    }
    if (c->entries) {
        /* smallest and largest are whole stored keys. */
        kv_sst_iter *e2;
        if ((rc = kv_sst_iter_new(t->r, &e2)) != KV_OK) {
            table_error(err, n, t->path, rc);
            return -1;
        }
        size_t l0, l1;
        kv_sst_iter_seek_first(e2);
        const void *k0 = kv_sst_iter_valid(e2) ? kv_sst_iter_key(e2, &l0) : NULL;
        int first_ok = k0 && key_eq(k0, l0, p->smallest, p->smallest_len);
        kv_sst_iter_seek_last(e2);
        const void *k1 = kv_sst_iter_valid(e2) ? kv_sst_iter_key(e2, &l1) : NULL;
        int last_ok = k1 && key_eq(k1, l1, p->largest, p->largest_len);
        kv_sst_iter_free(e2);
        if (!first_ok || !last_ok) {
            snprintf(err, n, "%s: the properties' %s key is not the table's", t->path,
                     first_ok ? "largest" : "smallest");
            return -1;
        }
    }
    if (w->has_filter && c->filter_checked && c->filter_keys != p->filter_keys) {
        snprintf(err, n,
                 "%s: the filter holds %" PRIu64 " keys, the table %" PRIu64 " distinct ones",
                 t->path, p->filter_keys, c->filter_keys);
        return -1;
    }
    if (!w->has_filter && (p->filter_keys || p->filter_k)) {
        snprintf(err, n, "%s: properties give filter parameters but there is no filter", t->path);
        return -1;
    }
    return 0;
}

#define MAX_SEQUENCE (((uint64_t)1 << 56) - 1)

/* The table's range tombstones (format version 3), as the reader hands
 * them out (it checked their block when it opened the table): each
 * fragment's start before its end, the fragments in order and apart, each
 * with sequences in 1 .. 2^56 - 1, newest first. 0, or -1 with the problem
 * in err. */
static int check_range_tombstones(const struct table *t, char *err, size_t n)
{
    size_t count = kv_sst_range_tombstone_count(t->r);
    kv_sst_range_tombstone prev = {0};
    for (size_t i = 0; i < count; i++) {
        kv_sst_range_tombstone f;
        int rc = kv_sst_range_tombstone_get(t->r, i, &f);
        if (rc != KV_OK) {
            table_error(err, n, t->path, rc);
            return -1;
        }
        const char *why = NULL;
        if (key_cmp(f.start, f.start_len, f.end, f.end_len) >= 0)
            why = "its start is not before its end";
        else if (i && key_cmp(prev.end, prev.end_len, f.start, f.start_len) > 0)
            why = "it overlaps the one before, or comes before it";
        else if (f.nseq == 0)
            why = "no sequence";
        for (size_t j = 0; !why && j < f.nseq; j++)
            if (f.seqs[j] == 0 || f.seqs[j] > MAX_SEQUENCE || (j && f.seqs[j] >= f.seqs[j - 1]))
                why = "its sequences are not in 1 .. 2^56 - 1, newest first";
        if (why) {
            snprintf(err, n, "%s: range tombstone %zu: %s", t->path, i, why);
            return -1;
        }
        prev = f;
    }
    return 0;
}

/* What a table's range tombstones span: the first fragment's start, the
 * last one's end (exclusive), their lowest and highest sequences. 0 when it
 * has none (or they cannot be read: check_table said so). */
static size_t tombstone_span(const struct table *t, kv_sst_range_tombstone *first,
                             kv_sst_range_tombstone *last, uint64_t *min_seq, uint64_t *max_seq)
{
    size_t count = kv_sst_range_tombstone_count(t->r);
    *min_seq = UINT64_MAX;
    *max_seq = 0;
    for (size_t i = 0; i < count; i++) {
        kv_sst_range_tombstone f;
        if (kv_sst_range_tombstone_get(t->r, i, &f) != KV_OK)
            return 0;
        if (i == 0)
            *first = f;
        *last = f;
        if (f.seqs[f.nseq - 1] < *min_seq)
            *min_seq = f.seqs[f.nseq - 1];
        if (f.seqs[0] > *max_seq)
            *max_seq = f.seqs[0];
    }
    return count;
}

/* Checks one open table: every block (checksum, decoding, order) through
 * kv_sst_verify and a walk; every key strictly above the one before; for a
 * store table every key well formed, of a known kind, and every blob
 * entry's value a reference that decodes; every key found again by a point
 * lookup, and the filter answering "maybe" for it (no false negative);
 * the properties against what the walk saw. 0, or -1 with the problem in
 * err (one line, naming the file). With bs (db verify), every reference
 * is also checked against the database's blob files (blob_ref_check),
 * whose problems are reported apart and do not stop the walk. */
int check_table(struct table *t, struct table_check *c, struct blob_set *bs, char *err, size_t n)
{
    memset(c, 0, sizeof *c);
    c->min_seq = UINT64_MAX;
    int rc = kv_sst_verify(t->r);
    if (rc != KV_OK) {
        table_error(err, n, t->path, rc);
        return -1;
    }
    kv_sst_iter *it;
    if ((rc = kv_sst_iter_new(t->r, &it)) != KV_OK) {
        table_error(err, n, t->path, rc);
        return -1;
    }
    struct walk w = {.t = t, .c = c, .bs = bs, .err = err, .n = n};
    /* The filter's hashes can be recomputed for whole-key filters, and for
     * the store's (the hash of the user key with the seed in filter_seed);
     * not for keyed filters, whose secret no table holds. */
    w.has_filter = t->p.filter_bits > 0;
    c->filter_checked = w.has_filter &&
                        (t->p.filter_hash == KV_SST_FILTER_HASH_KEY ||
                         (t->p.filter_hash == KV_SST_FILTER_HASH_CALLER && t->store));
    int bad = 0;
    for (kv_sst_iter_seek_first(it); kv_sst_iter_valid(it); kv_sst_iter_next(it)) {
        size_t klen, vlen;
        const uint8_t *k = kv_sst_iter_key(it, &klen);
        const uint8_t *v = kv_sst_iter_value(it, &vlen);
        if (check_entry(&w, k, klen, v, vlen) != 0) {
            bad = 1;
            break;
        }
    }
    if (!bad && (rc = kv_sst_iter_status(it)) != KV_OK) {
        table_error(err, n, t->path, rc);
        bad = 1;
    }
    kv_sst_iter_free(it);
    free(w.prev);
    free(w.ubuf);
    if (bad)
        return -1;
    /* The properties against the content, then the range tombstones. */
    return check_props(&w) != 0 ? -1 : check_range_tombstones(t, err, n);
}

/* ---- db verify ----------------------------------------------------------------------------- */

/* A live table against its manifest record and the database's counters. */
static void verify_record(const char *path, const kv_dir_info *info, const kv_dir_table *m,
                          const struct table *t, const struct table_check *c)
{
    const kv_sst_properties *p = &t->p;
    if (!t->store) {
        problem("%s: not a store table (its keys are not the store's internal keys)", path);
        return;
    }
    if (p->file_size != m->file_size)
        problem("%s: the table says it has %" PRIu64 " bytes, the manifest %" PRIu64, path,
                p->file_size, m->file_size);
    if (c->entries != m->entries)
        problem("%s: %" PRIu64 " entries, the manifest records %" PRIu64, path, c->entries,
                m->entries);
    kv_sst_range_tombstone rt0 = {0}, rt1 = {0};
    uint64_t rt_min, rt_max;
    if (tombstone_span(t, &rt0, &rt1, &rt_min, &rt_max) == 0) {
        if (c->entries && (!key_eq(c->first, c->first_len, m->smallest, m->smallest_len) ||
                           !key_eq(c->last, c->last_len, m->largest, m->largest_len)))
            problem("%s: its key range is not the one the manifest records", path);
        if (c->entries && (c->min_seq != m->min_seq || c->max_seq != m->max_seq))
            problem("%s: sequences %" PRIu64 "..%" PRIu64 ", the manifest records %" PRIu64
                    "..%" PRIu64,
                    path, c->min_seq, c->max_seq, m->min_seq, m->max_seq);
    } else {
        /* The manifest's range covers the point keys and the tombstones,
         * whose last end (exclusive) it may name as its largest key; its
         * sequences cover theirs. */
        const uint8_t *lo = rt0.start, *hi = rt1.end;
        size_t lo_len = rt0.start_len, hi_len = rt1.end_len;
        if (c->entries && key_cmp(c->first, c->first_len, lo, lo_len) < 0) {
            lo = c->first;
            lo_len = c->first_len;
        }
        if (c->entries && key_cmp(c->last, c->last_len, hi, hi_len) > 0) {
            hi = c->last;
            hi_len = c->last_len;
        }
        if (key_cmp(m->smallest, m->smallest_len, lo, lo_len) > 0 ||
            key_cmp(m->largest, m->largest_len, hi, hi_len) < 0)
            problem("%s: the key range the manifest records does not cover its keys and range "
                    "tombstones",
                    path);
        uint64_t lo_seq = c->entries && c->min_seq < rt_min ? c->min_seq : rt_min;
        uint64_t hi_seq = c->entries && c->max_seq > rt_max ? c->max_seq : rt_max;
        if (lo_seq < m->min_seq || hi_seq > m->max_seq)
            problem("%s: sequences %" PRIu64 "..%" PRIu64 " (range tombstones included), the "
                    "manifest records %" PRIu64 "..%" PRIu64,
                    path, lo_seq, hi_seq, m->min_seq, m->max_seq);
        if (rt_max > info->last_seq)
            problem("%s: a range tombstone at sequence %" PRIu64 ", above the manifest's last "
                    "sequence %" PRIu64,
                    path, rt_max, info->last_seq);
    }
    if (c->entries && c->max_seq > info->last_seq)
        problem("%s: holds sequence %" PRIu64 ", above the manifest's last sequence %" PRIu64, path,
                c->max_seq, info->last_seq);
    if (m->number >= info->next_file)
        problem("%s: numbered at or above the manifest's next file %" PRIu64, path,
                info->next_file);
    if (m->level >= LEVELS)
        problem("%s: level %u, the store has levels 0 to %d", path, m->level, LEVELS - 1);
    if (p->filter_bits) {
        if (p->filter_hash == KV_SST_FILTER_HASH_KEYED) {
            /* A keyed filter records the check of the secret it needs.
             * Without that secret the store reads the table without its
             * filter (never a wrong answer): said, not counted as damage. */
            if (!info->has_filter_secret)
                printf("%s: keyed filter, but the database holds no filter secret: read "
                       "without its filter until rewritten\n",
                       path);
            else if (p->filter_seed != info->filter_secret_check)
                printf("%s: keyed filter of another secret (check 0x%016" PRIx64 ", the "
                       "database's 0x%016" PRIx64 "): read without its filter until "
                       "rewritten\n",
                       path, p->filter_seed, info->filter_secret_check);
        } else if (p->filter_seed != info->seed) {
            /* A table hashed under another seed (one kv_ingest took in as
             * it was) is asked with its own seed's hashes: said, not
             * counted as damage. */
            printf("%s: filter seed 0x%016" PRIx64 ", not the database's 0x%016" PRIx64
                   ": asked with its own seed until a compaction rewrites it\n",
                   path, p->filter_seed, info->seed);
        }
        if ((int)p->filter_layout != m->filter_layout || p->filter_k != m->k ||
            p->filter_keys != m->filter_keys || p->filter_bits_per_key != m->bits_per_key)
            problem("%s: filter parameters differ from the manifest's record", path);
    } else if (m->bits_per_key > 0)
        problem("%s: no filter, but the manifest records one", path);
}

/* A live blob file on its own: present at its recorded size, numbered below
 * next_file, some of its records live (the commit that makes the last one
 * garbage removes its record), its header and footer sound and saying what
 * the manifest says (records, record bytes, size), every record's checksum
 * good (kv_blob_scan). When all holds, b->r is left open for the references. */
static void verify_blob(const char *dir, const kv_dir_info *info, struct vblob *b)
{
    const struct kv_dir_blob *m = b->m;
    char path[4096], err[600];
    blob_path(path, sizeof path, dir, m->number);
    size_t before = problems;
    if (!m->present) {
        problem("%s: missing: the manifest names it but it is not in the directory", path);
        goto out;
    }
    if (m->disk_size != m->file_size) {
        problem("%s: %" PRIu64 " bytes on disk, %" PRIu64 " in the manifest", path, m->disk_size,
                m->file_size);
        goto out;
    }
    if (m->number >= info->next_file)
        problem("%s: numbered at or above the manifest's next file %" PRIu64, path,
                info->next_file);
    if (m->garbage_records >= m->records)
        problem("%s: the manifest counts all %" PRIu64 " of its records as garbage, yet still "
                "names it",
                path, m->records);
    kv_blob_reader *r;
    int rc = kv_blob_reader_open(path, m->number, &r);
    if (rc != KV_OK) {
        table_error(err, sizeof err, path, rc);
        problem("%s", err);
        goto out;
    }
    kv_blob_file_info fi;
    kv_blob_reader_info(r, &fi);
    if (fi.file_size != m->file_size || fi.records != m->records ||
        fi.record_bytes != m->record_bytes)
        problem("%s: holds %" PRIu64 " records of %" PRIu64 " bytes in %" PRIu64 " bytes, the "
                "manifest records %" PRIu64 " of %" PRIu64 " in %" PRIu64,
                path, fi.records, fi.record_bytes, fi.file_size, m->records, m->record_bytes,
                m->file_size);
    uint64_t walked = 0;
    if ((rc = kv_blob_scan(r, count_record, &walked)) != KV_OK) {
        table_error(err, sizeof err, path, rc);
        problem("%s", err);
    }
    if (problems == before)
        b->r = r;
    else
        kv_blob_reader_close(r);
out:
    b->problems += problems - before;
}

/* Each record has exactly one reference (doc/database.md, "Blob files"),
 * so the live tables must refer to exactly the records the manifest does
 * not count as garbage: as many, and as many bytes. */
static void verify_blob_accounting(const char *dir, struct vblob *b)
{
    const struct kv_dir_blob *m = b->m;
    uint64_t live = m->records - m->garbage_records,
             live_bytes = m->record_bytes - m->garbage_bytes;
    if (b->refs == live && b->ref_bytes == live_bytes)
        return;
    char path[4096];
    blob_path(path, sizeof path, dir, m->number);
    problem("%s: the tables refer to %" PRIu64 " of its records (%" PRIu64 " bytes), the manifest "
            "counts %" PRIu64 " live (%" PRIu64 " bytes: %" PRIu64 " records of %" PRIu64
            " bytes less %" PRIu64 " of %" PRIu64 " garbage)",
            path, b->refs, b->ref_bytes, live, live_bytes, m->records, m->record_bytes,
            m->garbage_records, m->garbage_bytes);
    b->problems++;
}

/* One live table of db verify: present at its recorded size, passing
 * check_table (its blob references checked against bs) and agreeing with
 * its manifest record; "ok" and its figures when it has no problem, its
 * entries then added to *entries. 1 when its entries were not all walked
 * (the blob files' accounting then means nothing), else 0. */
static int verify_table(const char *dir, const kv_dir_info *info, const kv_dir_table *m,
                        kv_sst_cache *cache, struct blob_set *bs, uint64_t *entries)
{
    char path[4096], err[600];
    table_path(path, sizeof path, dir, m->number);
    if (!m->present) {
        problem("%s: missing: the manifest names it but it is not in the directory", path);
        return 1;
    }
    if (m->disk_size != m->file_size) {
        problem("%s: %" PRIu64 " bytes on disk, %" PRIu64 " in the manifest", path, m->disk_size,
                m->file_size);
        return 1;
    }
    struct table t;
    if (table_open(path, cache, m->number, &t, err, sizeof err) != KV_OK) {
        problem("%s", err);
        return 1;
    }
    struct table_check c;
    size_t before = problems;
    uint64_t values_before = bs->values;
    int unread = 0;
    bs->table_bad = 0;
    if (check_table(&t, &c, bs, err, sizeof err) != 0) {
        problem("%s", err);
        unread = 1;
    } else
        verify_record(path, info, m, &t, &c);
    if (bs->table_bad > REF_PROBLEMS_SHOWN)
        problem("%s: %zu more bad blob references", path, bs->table_bad - REF_PROBLEMS_SHOWN);
    if (problems == before) {
        printf("ok %06" PRIu64 ".sst level %u: %" PRIu64 " entries%s", m->number, m->level,
               c.entries, c.filter_checked ? ", filter says maybe for every key" : ", no filter");
        size_t nrt = kv_sst_range_tombstone_count(t.r);
        if (nrt)
            printf(", %zu range tombstone fragment%s", nrt, PLURAL(nrt));
        uint64_t read = bs->values - values_before;
        if (c.blob_refs == read && read)
            printf(", %" PRIu64 " value%s in blob files read back", read, PLURAL(read));
        else if (c.blob_refs) /* the rest are in files with problems of their own */
            printf(", %" PRIu64 " value%s in blob files, %" PRIu64 " read back", c.blob_refs,
                   PLURAL(c.blob_refs), read);
        fputc('\n', stdout);
        *entries += c.entries;
    }
    check_free(&c);
    table_close(&t);
    return unread;
}

/* Each sorted run of a level below 0 holds disjoint ranges (tables are in
 * search order: a level's runs one after the other); lazy leveling's runs
 * of one level overlap one another. */
static void verify_levels(const char *dir, const kv_dir_info *info)
{
    for (size_t i = 1; i < info->ntables; i++) {
        const kv_dir_table *a = &info->tables[i - 1], *b = &info->tables[i];
        if (a->level == b->level && a->level > 0 && a->run == b->run &&
            key_cmp(a->largest, a->largest_len, b->smallest, b->smallest_len) >= 0)
            problem("%s: level %u: tables %06" PRIu64 ".sst and %06" PRIu64 ".sst overlap", dir,
                    a->level, a->number, b->number);
    }
}

/* The blob files' garbage against the references found: only when every
 * table was walked whole (no table unread), else the counts mean nothing.
 * "ok" for each blob file without a problem; closes their readers.
 * Returns the live values the tables refer to. */
static uint64_t verify_blob_files(const char *dir, struct blob_set *bs, size_t unread)
{
    uint64_t values = 0;
    for (size_t i = 0; i < bs->n; i++) {
        struct vblob *b = &bs->b[i];
        if (!unread)
            verify_blob_accounting(dir, b);
        if (!b->problems) {
            const struct kv_dir_blob *m = b->m;
            printf("ok %06" PRIu64 ".blob: %" PRIu64 " record%s, %" PRIu64 " live (%.2f%% of "
                   "its bytes garbage), checksums good%s\n",
                   m->number, m->records, PLURAL(m->records), b->refs,
                   percent(m->garbage_bytes, m->record_bytes),
                   unread ? "; live records not counted (a table was not read whole)"
                          : ", every live one referred to once");
        }
        values += b->refs;
        kv_blob_reader_close(b->r);
    }
    return values;
}

int db_verify(struct opts *o)
{
    const char *dir = o->pos[0];
    kv_dir_info *info;
    if (inspect(dir, &info) != 0)
        return EXIT_FAIL;
    kv_sst_cache *cache = NULL;
    struct blob_set bs = {.dir = dir, .n = info->nblobs};
    int rc = kv_sst_cache_new(CACHE_BYTES, &cache);
    if (rc != KV_OK) {
        kv_inspect_free(info);
        return fail("a block cache of %zu bytes: %s (%s)", CACHE_BYTES, code_name(rc),
                    kv_strerror(rc));
    }
    if (bs.n && !(bs.b = calloc(bs.n, sizeof *bs.b))) {
        kv_sst_cache_free(cache);
        kv_inspect_free(info);
        return fail("out of memory");
    }
    problems = 0;
    /* 2: a database that used range deletes, merges or a ttl (doc/manifest.md). */
    if (info->format_version != 1 && info->format_version != 2)
        problem("%s: format version %u, this kvtool reads versions 1 and 2", dir,
                (unsigned)info->format_version);
    /* Files on disk against the manifest (kv_inspect classified them). */
    for (size_t i = 0; i < info->nfiles; i++) {
        const char *note = file_kind_note(info->files[i].kind);
        if (note)
            problem("%s/%s: %s", dir, info->files[i].name, note);
    }
    /* Every live blob file on its own, before the tables refer to them. */
    for (size_t i = 0; i < bs.n; i++) {
        bs.b[i].m = &info->blobs[i];
        if (i && info->blobs[i].number <= info->blobs[i - 1].number)
            problem("%s: kv_inspect lists blob files out of order (%06" PRIu64 " after %06" PRIu64
                    ")",
                    dir, info->blobs[i].number, info->blobs[i - 1].number);
        verify_blob(dir, info, &bs.b[i]);
    }
    /* Every live table, and the references its entries hold. */
    uint64_t entries = 0;
    size_t unread = 0; /* tables whose entries were not all walked */
    for (size_t i = 0; i < info->ntables; i++)
        unread += (size_t)verify_table(dir, info, &info->tables[i], cache, &bs, &entries);
    verify_levels(dir, info);
    uint64_t values = verify_blob_files(dir, &bs, unread);
    free(bs.b);
    free(bs.buf);
    kv_sst_cache_free(cache);
    size_t ntables = info->ntables, nblobs = info->nblobs;
    kv_inspect_free(info);
    if (problems)
        return fail("%s: %zu problem%s found", dir, problems, problems == 1 ? "" : "s");
    printf("%s: ok: %zu table%s, %" PRIu64 " entries, %zu blob file%s holding %" PRIu64
           " live value%s, manifest and directory agree\n",
           dir, ntables, PLURAL(ntables), entries, nblobs, PLURAL(nblobs), values, PLURAL(values));
    return 0;
}
