/* ingest.c - kv_ingest: finished tables (kv_table_writer's, or another
 * database's) added to the database, all or none (doc/operations.md,
 * "Bulk ingest").
 *
 * Each file is read whole first (every block's checksum, the key order
 * under the database's comparator, every entry's internal key), then linked
 * (or copied) into the directory under a new number, outside any lock.
 * Then, holding the write queue (no write commits meanwhile) with the
 * background thread paused (no other commit): when no file overlaps a
 * memtable or a live table, no snapshot is live and the files' sequences
 * are the writer's (at most the database's last sequence, or 1), the files
 * join the deepest level as they are; otherwise each is rewritten into a
 * table of its own, every entry at one new sequence (last + 1), after a
 * flush of the memtable, at the deepest level where nothing above overlaps
 * it. One manifest change adds them all; a failure before it leaves the
 * directory and the database as they were (what was linked in is removed,
 * and an orphan a crash leaves is removed at the next open). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "db.h"
#include "dbfiles.h"
#include "ingest.h"
#include "order.h"
#include "util/file.h"
#include "util/ikey.h"

/* The most threads that read the files of one kv_ingest. */
#define KV_INGEST_THREADS 8

/* One file given to kv_ingest. */
struct infile {
    const char *src;
    kv_table_meta meta; /* range (user keys, owned), sequences, entries, size */
    int special;        /* merges or range tombstones: the database says it uses them */
    uint64_t number;    /* its number in the database (0: not placed) */
    struct kv_table *t; /* the placed file, open */
    int kept;           /* t went in as it is */
    int rc;             /* scan_file's, and its error text (scans run on several threads) */
    char text[KV_DB_TEXT];
};

static int corrupt(const char *src, const char *what)
{
    return kv_error_set(KV_ECORRUPT, "%s: kv_ingest: not a valid table: %s", src, what);
}

/* Sets *dst (malloc'd, freed first) to key[0, klen). */
static int keep_key(uint8_t **dst, size_t *dlen, const uint8_t *key, size_t klen)
{
    uint8_t *n = realloc(*dst, klen + 1);
    if (!n)
        return KV_ENOMEM;
    if (klen)
        memcpy(n, key, klen);
    *dst = n;
    *dlen = klen;
    return KV_OK;
}

/* The comparator named in a kv_table_writer's note, against the database's. */
static int check_note(kv_db *db, const char *src, const char *note)
{
    size_t n = strlen(KV_INGEST_NOTE);
    const char *want = db->cmp ? db->cmp->name : KV_BYTEWISE_NAME;
    if (strncmp(note, KV_INGEST_NOTE, n) == 0 && strcmp(note + n, want) != 0)
        return kv_db_einval(db, "kv_ingest",
                            "%s: written under comparator \"%s\", the database "
                            "orders keys by \"%s\"",
                            src, note + n, want);
    return KV_OK;
}

/* An order under which every table opens (any two keys unequal in bytes
 * are "in order"): to read the note of a table the database's order
 * refused. */
static int any_order(void *ctx, const void *a, size_t alen, const void *b, size_t blen)
{
    (void)ctx;
    return alen == blen && memcmp(a, b, alen) == 0 ? 0 : -1;
}

/* The database's order refused f at open (rc, KV_ECORRUPT): KV_EINVAL when
 * the table names another comparator, else rc with its text. */
static int refused(kv_db *db, struct infile *f, int rc)
{
    char why[512];
    snprintf(why, sizeof why, "%s", kv_error_text());
    kv_comparator any = {.name = "kv.ingest-any", .compare = any_order};
    kv_sst_reader *r;
    if (kv_sst_reader_open_cmp(f->src, NULL, NULL, 0, 0, &any, &r) == KV_OK) {
        kv_sst_properties p;
        kv_sst_reader_properties(r, &p);
        int einval = check_note(db, f->src, p.note);
        kv_sst_reader_close(r);
        if (einval != KV_OK)
            return einval;
    }
    return kv_error_set(rc, "%s: kv_ingest: not a valid table: %s", f->src, why);
}

/* Checks one entry's kind and value; KV_OK, or the error with text. */
static int check_entry(kv_db *db, const char *src, int kind, size_t vlen)
{
    if (kind == KV_KIND_BLOB)
        return kv_db_einval(db, "kv_ingest", "%s: refers to blob files of another database", src);
    if (!kv_kind_stored(kind))
        return corrupt(src, "an entry of an unknown kind");
    if ((kind == KV_KIND_TVALUE || kind == KV_KIND_TMERGE) && vlen < KV_TTL_STAMP)
        return corrupt(src, "a timed entry without its stamp");
    if ((kind == KV_KIND_MERGE || kind == KV_KIND_TMERGE) && !db->o.merge_operator)
        return kv_db_einval(db, "kv_ingest",
                            "%s: holds merge operands and the database has no "
                            "merge operator",
                            src);
    return KV_OK;
}

/* The previous internal key of a walk, for the order check. */
struct last_key {
    uint8_t *p;
    size_t len, cap;
};

/* KV_OK when ikey follows last under the table order (and becomes last). */
static int follows(kv_db *db, struct infile *f, struct last_key *last, const uint8_t *ikey,
                   size_t ilen)
{
    if (last->len && kv_sst_cmp(db->tcmp, last->p, last->len, ikey, ilen) >= 0)
        return corrupt(f->src, "keys out of order");
    if (ilen > last->cap) {
        uint8_t *n = realloc(last->p, 2 * ilen);
        if (!n)
            return KV_ENOMEM;
        last->p = n;
        last->cap = 2 * ilen;
    }
    memcpy(last->p, ikey, ilen);
    last->len = ilen;
    return KV_OK;
}

/* The user key of internal key ikey into *dst (malloc'd), as keep_key. */
static int keep_user_key(struct infile *f, uint8_t **dst, size_t *dlen, const uint8_t *ikey,
                         size_t ilen)
{
    uint8_t *buf = malloc(ilen + 1);
    uint64_t seq;
    int kind, rc = KV_OK;
    size_t klen = 0;
    if (!buf)
        return KV_ENOMEM;
    if (!kv_ikey_decode(ikey, ilen, buf, ilen, &klen, &seq, &kind))
        rc = corrupt(f->src, "a key that is no internal key");
    free(*dst);
    *dst = buf;
    *dlen = rc == KV_OK ? klen : 0;
    return rc;
}

/* One entry's sequence and kind, checked. */
static int check_ikey(kv_db *db, struct infile *f, const uint8_t *ikey, size_t ilen, size_t vlen)
{
    uint64_t seq = 0;
    int kind = 0;
    size_t klen = 0;
    if (!kv_ikey_plain(ikey, ilen, &klen, &seq, &kind)) {
        uint8_t stack[256], *buf = ilen <= sizeof stack ? stack : malloc(ilen);
        int ok = buf && kv_ikey_decode(ikey, ilen, buf, ilen, &klen, &seq, &kind);
        if (buf != stack)
            free(buf);
        if (!ok)
            return buf ? corrupt(f->src, "a key that is no internal key") : KV_ENOMEM;
    }
    if (seq == 0 || seq > KV_MAX_SEQ)
        return corrupt(f->src, "an entry of sequence 0 or past 2^56 - 1");
    int rc = check_entry(db, f->src, kind, vlen);
    f->special |= kind == KV_KIND_MERGE || kind == KV_KIND_TMERGE;
    f->meta.min_seq = seq < f->meta.min_seq ? seq : f->meta.min_seq;
    f->meta.max_seq = seq > f->meta.max_seq ? seq : f->meta.max_seq;
    return rc;
}

/* Walks every entry of r (every data block read, its checksum checked):
 * the order of its internal keys, their kinds, sequences and range, and
 * the counts of the properties p. */
static int scan_entries(kv_db *db, struct infile *f, kv_sst_reader *r, const kv_sst_properties *p)
{
    kv_sst_iter *it;
    int rc = kv_sst_iter_new(r, &it);
    if (rc != KV_OK)
        return rc;
    struct last_key last = {0};
    uint64_t kbytes = 0, vbytes = 0;
    for (kv_sst_iter_seek_first(it); rc == KV_OK && kv_sst_iter_valid(it); kv_sst_iter_next(it)) {
        size_t ilen, vlen;
        const uint8_t *ikey = kv_sst_iter_key(it, &ilen);
        kv_sst_iter_value(it, &vlen);
        kbytes += ilen;
        vbytes += vlen;
        if ((rc = follows(db, f, &last, ikey, ilen)) == KV_OK)
            rc = check_ikey(db, f, ikey, ilen, vlen);
        if (rc == KV_OK && !f->meta.entries)
            rc = keep_user_key(f, &f->meta.smallest, &f->meta.smallest_len, ikey, ilen);
        f->meta.entries++;
    }
    if (rc == KV_OK)
        rc = kv_sst_iter_status(it);
    if (rc == KV_ECORRUPT && !strstr(kv_error_text(), f->src)) {
        char why[256];
        snprintf(why, sizeof why, "%s", kv_error_text());
        rc = corrupt(f->src, why);
    }
    if (rc == KV_OK && (f->meta.entries != p->entries || kbytes != p->raw_key_bytes ||
                        vbytes != p->raw_value_bytes))
        rc = corrupt(f->src, "its data blocks disagree with its properties");
    if (rc == KV_OK && f->meta.entries)
        rc = keep_user_key(f, &f->meta.largest, &f->meta.largest_len, last.p, last.len);
    kv_sst_iter_free(it);
    free(last.p);
    return rc;
}

/* Widens f's range and sequences by its range tombstones. */
static int scan_ranges(kv_db *db, struct infile *f, kv_sst_reader *r)
{
    const uint8_t *p;
    size_t len;
    kv_sst_reader_range_tombstones(r, &p, &len);
    if (!len)
        return KV_OK;
    kv_rtset *rt = NULL;
    int rc = kv_rtset_decode(db->cmp, p, len, &rt);
    if (rc == KV_ECORRUPT)
        return corrupt(f->src, "its range tombstone block does not decode");
    size_t n = kv_rtset_count(rt);
    if (rc == KV_OK && n) {
        f->special = 1;
        kv_rt_fragment a, z;
        kv_rtset_fragment(rt, 0, &a);
        kv_rtset_fragment(rt, n - 1, &z);
        if (!f->meta.entries ||
            kv_sst_cmp(db->cmp, a.start, a.slen, f->meta.smallest, f->meta.smallest_len) < 0)
            rc = keep_key(&f->meta.smallest, &f->meta.smallest_len, a.start, a.slen);
        if (rc == KV_OK && (!f->meta.entries || kv_sst_cmp(db->cmp, z.end, z.elen, f->meta.largest,
                                                           f->meta.largest_len) > 0))
            rc = keep_key(&f->meta.largest, &f->meta.largest_len, z.end, z.elen);
        for (size_t i = 0; i < n; i++) {
            kv_rtset_fragment(rt, i, &a);
            for (size_t s = 0; s < a.nseq; s++) {
                f->meta.min_seq = a.seqs[s] < f->meta.min_seq ? a.seqs[s] : f->meta.min_seq;
                f->meta.max_seq = a.seqs[s] > f->meta.max_seq ? a.seqs[s] : f->meta.max_seq;
            }
        }
    }
    kv_rtset_unref(rt);
    return rc;
}

/* f is a table a kv_table_writer of this process finished, unchanged since
 * (ingest.h, kv_written_find): its entries are taken on the writer's word,
 * which checked each as it was added (order, kinds, sizes); every data
 * block's checksum is still checked (a change in place that kept the file's
 * times would not pass), and the properties must agree. */
static int take_written(kv_db *db, struct infile *f, kv_sst_reader *r, const kv_sst_properties *p,
                        struct kv_written *w)
{
    int rc = KV_OK;
    if (p->entries != w->entries)
        rc = corrupt(f->src, "its properties disagree with what its writer wrote");
    else if ((rc = kv_sst_verify_blocks(r)) == KV_ECORRUPT && !strstr(kv_error_text(), f->src))
        rc = corrupt(f->src, kv_error_text());
    else if (w->merges && !db->o.merge_operator)
        rc = check_entry(db, f->src, KV_KIND_MERGE, 0);
    if (rc == KV_OK && w->entries) {
        f->meta.entries = w->entries;
        f->meta.min_seq = f->meta.max_seq = KV_INGEST_SEQ;
        f->special |= w->merges;
        if (keep_key(&f->meta.smallest, &f->meta.smallest_len, w->smallest, w->smallest_len) !=
                KV_OK ||
            keep_key(&f->meta.largest, &f->meta.largest_len, w->largest, w->largest_len) != KV_OK)
            rc = KV_ENOMEM;
    }
    kv_written_free(w);
    return rc;
}

/* Reads f whole: every block and entry (KV_ECORRUPT naming it), its
 * comparator, kinds, range and sequences; or, for a table this process's
 * kv_table_writer finished and nothing changed since, its index, properties
 * and filter (kv_sst_reader_open checks theirs) and the writer's record. */
static int scan_file(kv_db *db, struct infile *f)
{
    kv_sst_reader *r;
    f->meta.min_seq = UINT64_MAX;
    struct stat st;
    struct kv_written w;
    int written = stat(f->src, &st) == 0 && kv_written_find(&st, &w);
    int rc = kv_sst_reader_open_cmp(f->src, NULL, NULL, 0, 0, db->tcmp, &r);
    if (rc != KV_OK && written)
        kv_written_free(&w);
    if (rc == KV_NOTFOUND)
        return kv_db_einval(db, "kv_ingest", "%s: no such file", f->src);
    if (rc == KV_ECORRUPT)
        return refused(db, f, rc);
    if (rc != KV_OK)
        return rc;
    kv_sst_properties p;
    kv_sst_reader_properties(r, &p);
    f->meta.file_size = p.file_size;
    if ((rc = check_note(db, f->src, p.note)) == KV_OK) {
        if (written && !strncmp(p.note, KV_INGEST_NOTE, strlen(KV_INGEST_NOTE))) {
            rc = take_written(db, f, r, &p, &w); /* frees w */
            written = 0;
        } else {
            rc = scan_entries(db, f, r, &p);
        }
    }
    if (written)
        kv_written_free(&w);
    if (rc == KV_OK)
        rc = scan_ranges(db, f, r);
    if (rc == KV_OK && !f->meta.entries && f->meta.max_seq == 0)
        rc = corrupt(f->src, "no entry");
    kv_sst_reader_close(r);
    return rc;
}

/* Copies src to dst (which must not exist), synced. */
static int copy_file(const char *src, const char *dst)
{
    kv_file *in;
    uint64_t size = 0;
    int rc = kv_file_open(src, &in);
    if (rc != KV_OK)
        return rc;
    if ((rc = kv_file_size(in, &size)) == KV_OK)
        rc = kv_file_copy(in, size, dst);
    kv_file_close(in);
    return rc;
}

/* fsync of a file linked in: a table its writer never synced (another
 * program's) must be durable before the manifest names it. */
static int sync_linked(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return kv_error_errno(errno, "%s: kv_ingest: open", path);
    int rc = fsync(fd) == 0 ? KV_OK : kv_error_errno(errno, "%s: kv_ingest: fsync", path);
    close(fd);
    return rc;
}

/* Puts f into the directory under a new number and opens it: move, a link
 * (a copy across file systems); else a copy, so that a later change to the
 * caller's file can never reach the database's. */
static int place_file(kv_db *db, struct infile *f, int move)
{
    pthread_mutex_lock(&db->mu);
    int rc = kv_db_new_file_number(db, &f->number);
    pthread_mutex_unlock(&db->mu);
    if (rc != KV_OK)
        return rc;
    char *dst = kv_dbfile_path(db->path, f->number, "sst");
    if (!dst)
        return KV_ENOMEM;
    if (!move)
        rc = copy_file(f->src, dst);
    else if (link(f->src, dst) != 0)
        rc = kv_file_link_refused(errno)
                 ? copy_file(f->src, dst)
                 : kv_error_errno(errno, "%s: kv_ingest: link to %s", f->src, dst);
    else if ((rc = sync_linked(dst)) != KV_OK)
        unlink(dst);
    if (rc != KV_OK) {
        f->number = 0;
        free(dst);
        return rc;
    }
    kv_table_meta m = f->meta;
    m.number = f->number;
    m.smallest = m.largest = NULL;
    if (keep_key(&m.smallest, &m.smallest_len, f->meta.smallest, f->meta.smallest_len) != KV_OK ||
        keep_key(&m.largest, &m.largest_len, f->meta.largest, f->meta.largest_len) != KV_OK) {
        free(m.smallest);
        unlink(dst);
        free(dst);
        return KV_ENOMEM;
    }
    rc = kv_db_table_open(db, &m, &f->t); /* takes m's keys */
    if (rc == KV_OK) {
        kv_sst_properties p;
        kv_sst_reader_properties(f->t->reader, &p);
        f->t->meta.filter_layout = (uint32_t)p.filter_layout;
        f->t->meta.filter_bits_per_key = p.filter_bits_per_key;
        f->t->meta.filter_k = p.filter_k;
        f->t->meta.filter_keys = p.filter_keys;
    } else {
        unlink(dst);
    }
    free(dst);
    return rc;
}

/* 1 when [lo, hi] (user keys) meets the memtable m or its range tombstones. */
static int mem_overlaps(const kv_db *db, const struct kv_memref *m, const kv_table_meta *r)
{
    if (!m)
        return 0;
    kv_mem_iter it;
    kv_mem_iter_init(&it, m->mem);
    kv_mem_iter_seek(&it, r->smallest, r->smallest_len, KV_MAX_SEQ);
    if (kv_mem_iter_valid(&it)) {
        kv_mem_entry e;
        kv_mem_iter_entry(&it, &e);
        if (kv_sst_cmp(db->cmp, e.key, e.klen, r->largest, r->largest_len) <= 0)
            return 1;
    }
    size_t i = kv_rtset_seek(m->rt, r->smallest, r->smallest_len);
    if (i < kv_rtset_count(m->rt)) {
        kv_rt_fragment fr;
        kv_rtset_fragment(m->rt, i, &fr);
        if (kv_sst_cmp(db->cmp, fr.start, fr.slen, r->largest, r->largest_len) <= 0)
            return 1;
    }
    return 0;
}

static int ranges_meet(const kv_db *db, const kv_table_meta *a, const kv_table_meta *b)
{
    return kv_sst_cmp(db->cmp, a->smallest, a->smallest_len, b->largest, b->largest_len) <= 0 &&
           kv_sst_cmp(db->cmp, b->smallest, b->smallest_len, a->largest, a->largest_len) <= 0;
}

/* The shallowest level of v with a table that r meets; KV_LEVELS: none. */
static int first_overlap(const kv_db *db, const struct kv_version *v, const kv_table_meta *r)
{
    for (size_t i = 0; i < v->n; i++)
        if (ranges_meet(db, &v->tables[i]->meta, r))
            return (int)v->tables[i]->meta.level;
    return KV_LEVELS;
}

/* The plan, decided holding writes with the background thread paused. */
struct plan {
    int fast;          /* the files go in as they are */
    int flush;         /* the memtable must be flushed first */
    uint64_t last_seq; /* the database's after the ingest */
};

/* Under mu, holding writes. */
static void decide(kv_db *db, struct infile *f, size_t n, struct plan *p)
{
    size_t iters = 0, snaps = 0;
    kv_view_count(db, &iters, &snaps);
    uint64_t last = atomic_load(&db->last_seq);
    int mem_used = db->imm || kv_mem_count(db->mem->mem) > 0 || db->mem->rt;
    p->fast = !snaps && db->snapshots.next == &db->snapshots;
    p->flush = 0;
    uint64_t top = 0; /* the files' highest sequence */
    for (size_t i = 0; i < n; i++) {
        const kv_table_meta *m = &f[i].t->meta;
        if (mem_overlaps(db, db->mem, m) || mem_overlaps(db, db->imm, m))
            p->flush = 1;
        if (first_overlap(db, db->current, m) < KV_LEVELS)
            p->fast = 0;
        top = m->max_seq > top ? m->max_seq : top;
    }
    /* The writer's sequence is taken as it is even where no write came yet
     * (last 0); a foreign one above the last is rewritten. */
    if (top > last && top > KV_INGEST_SEQ)
        p->fast = 0;
    /* The manifest's last sequence must reach every table's, and says which
     * log entries are in tables already (recovery skips those): it can move
     * to the files' only with no memtable holding any, so a memtable is
     * flushed first then; and always before a rewrite at last + 1. */
    p->flush = p->flush || (mem_used && (!p->fast || top > db->state.last_seq));
    p->last_seq = p->fast ? (top > last ? top : last) : last + 1;
}

/* Rewrites f's table into a new table t of `level`, every entry at seq:
 * of each user key its newest entry, unless the table's own range
 * tombstones cover it. A merge operand over older entries of its key in
 * the same table has no one sequence to go at: KV_EINVAL. */
static int rewrite(kv_db *db, struct infile *f, int level, uint64_t seq, struct kv_table **out)
{
    struct kv_table *src = f->t;
    double bits = kv_filter_bits(db, db->current, level, src->meta.entries, NULL, 0);
    struct kv_builder b;
    int rc = kv_builder_start(db, &b, (uint32_t)level, bits, "kv_ingest");
    if (rc != KV_OK)
        return rc;
    kv_sst_iter *it = NULL;
    uint8_t *buf = NULL, *ikey = NULL, *prev = NULL;
    size_t cap = 0, plen = 0;
    int have = 0, prev_merge = 0;
    if ((rc = kv_sst_iter_new(src->reader, &it)) != KV_OK)
        goto out;
    for (kv_sst_iter_seek_first(it); kv_sst_iter_valid(it); kv_sst_iter_next(it)) {
        size_t ilen, vlen, klen = 0;
        const uint8_t *k = kv_sst_iter_key(it, &ilen);
        const void *val = kv_sst_iter_value(it, &vlen);
        uint64_t s = 0;
        int kind = 0;
        if (ilen + KV_IKEY_TRAILER > cap) {
            cap = 2 * (ilen + KV_IKEY_TRAILER);
            uint8_t *a = realloc(buf, cap), *z = a ? realloc(ikey, 2 * cap) : NULL;
            buf = a ? a : buf;
            ikey = z ? z : ikey;
            if (!a || !z) {
                rc = KV_ENOMEM;
                goto out;
            }
        }
        if (!kv_ikey_decode(k, ilen, buf, cap, &klen, &s, &kind)) {
            rc = corrupt(f->src, "a key that is no internal key"); /* scan_file saw it valid */
            goto out;
        }
        if (have && klen == plen && memcmp(buf, prev, klen) == 0) {
            if (prev_merge) {
                rc = kv_db_einval(db, "kv_ingest",
                                  "%s: merge operands over older entries of "
                                  "one key: ingest it into a database without them",
                                  f->src);
                goto out;
            }
            continue; /* an older version */
        }
        if ((rc = keep_key(&prev, &plen, buf, klen)) != KV_OK)
            goto out;
        have = 1;
        prev_merge = 0;
        if (src->rt && kv_rtset_cover(src->rt, buf, klen, KV_MAX_SEQ) > s)
            continue; /* its own table deleted it */
        prev_merge = kind == KV_KIND_MERGE || kind == KV_KIND_TMERGE;
        size_t n = kv_ikey_put_prefix(ikey, buf, klen);
        kv_ikey_put_trailer(ikey + n, seq, kind);
        if ((rc = kv_builder_add(&b, ikey, n + KV_IKEY_TRAILER, buf, klen,
                                 kv_db_hash(db, buf, klen), seq, val, vlen)) != KV_OK)
            goto out;
    }
    if ((rc = kv_sst_iter_status(it)) != KV_OK)
        goto out;
    for (size_t i = 0; i < kv_rtset_count(src->rt); i++) {
        kv_rt_fragment fr;
        kv_rtset_fragment(src->rt, i, &fr);
        fr.seqs = &seq;
        fr.nseq = 1;
        if ((rc = kv_builder_add_range(&b, &fr)) != KV_OK)
            goto out;
    }
    kv_sst_iter_free(it);
    it = NULL;
    rc = kv_builder_finish(&b, out); /* frees b, also on error */
    b.w = NULL;
out:
    kv_sst_iter_free(it);
    if (b.w)
        kv_builder_abandon(&b);
    free(buf);
    free(ikey);
    free(prev);
    return rc;
}

/* Holding writes, under mu: every write acknowledged before the ingest is
 * made durable before it (the log, and the one before it whose flush may
 * still be running), so that a machine crash that keeps the ingest keeps
 * them too: no hole in what survives. */
static int sync_logs(kv_db *db)
{
    int rc;
    while ((rc = kv_db_sticky_error(db)) == KV_OK && db->old_wal) {
        db->sync_waiters++;
        pthread_cond_signal(&db->work_cv);
        pthread_cond_wait(&db->done_cv, &db->mu);
        db->sync_waiters--;
    }
    if (rc != KV_OK || (!kv_mem_count(db->mem->mem) && !db->mem->rt))
        return rc;
    kv_wal *wal = db->wal;
    pthread_mutex_unlock(&db->mu);
    unsigned long long mark = kv_error_mark();
    rc = kv_wal_sync(wal);
    pthread_mutex_lock(&db->mu);
    if (rc != KV_OK) /* a failed fsync is never retried */
        kv_db_stop(db, &db->write_error, db->write_text, "sync of the log", mark, rc);
    return rc;
}

/* Pauses the background threads (under mu): no job starts, the running ones end. */
static void pause_bg(kv_db *db, int on)
{
    db->bg_paused = on;
    if (!on) {
        pthread_cond_signal(&db->work_cv);
        pthread_cond_broadcast(&db->job_cv); /* the job threads too (background.c) */
    }
    while (on && db->bg_busy)
        pthread_cond_wait(&db->done_cv, &db->mu);
}

/* Holding writes, with the background thread paused: places the files (as
 * they are, or rewritten) and commits them. out[i] gets the table that
 * went in for f[i]. Under mu; returns with it held. */
static int commit_files(kv_db *db, struct infile *f, size_t n, struct kv_table **out)
{
    struct plan p;
    int rc = KV_OK;
    for (;;) {
        decide(db, f, n, &p);
        if (!p.flush)
            break;
        pause_bg(db, 0);
        rc = kv_db_writes_flush(db);
        pause_bg(db, 1);
        if (rc != KV_OK)
            return rc;
    }
    int special = 0;
    for (size_t i = 0; i < n; i++)
        special |= f[i].special;
    if (special && (rc = kv_db_note_features(db)) != KV_OK)
        return rc;
    /* decide flushed every memtable unless the files' sequences are at or
     * below the manifest's already. */
    kv_manifest_state st = db->state;
    if (!db->imm && !kv_mem_count(db->mem->mem) && !db->mem->rt && p.last_seq > st.last_seq)
        st.last_seq = p.last_seq;
    pthread_mutex_unlock(&db->mu);
    for (size_t i = 0; rc == KV_OK && i < n; i++) {
        int level = first_overlap(db, db->current, &f[i].t->meta);
        level = level == KV_LEVELS ? KV_LEVELS - 1 : level > 0 ? level - 1 : 0;
        if (p.fast) {
            f[i].t->meta.level = (uint32_t)level;
            f[i].kept = 1;
            kv_table_ref(out[i] = f[i].t);
        } else {
            rc = rewrite(db, &f[i], level, p.last_seq, &out[i]);
        }
    }
    if (rc == KV_OK)
        rc = kv_db_commit(db, &st, NULL, 0, out, n);
    pthread_mutex_lock(&db->mu);
    if (rc == KV_OK && p.last_seq > atomic_load(&db->last_seq))
        atomic_store_explicit(&db->last_seq, p.last_seq, memory_order_release);
    return rc;
}

/* Sorts f by smallest key; KV_EINVAL when two of them overlap. */
static int check_disjoint(kv_db *db, struct infile *f, size_t n)
{
    for (size_t i = 1; i < n; i++) /* insertion sort: a call gives few files */
        for (size_t j = i;
             j > 0 && kv_sst_cmp(db->cmp, f[j].meta.smallest, f[j].meta.smallest_len,
                                 f[j - 1].meta.smallest, f[j - 1].meta.smallest_len) < 0;
             j--) {
            struct infile t = f[j];
            f[j] = f[j - 1];
            f[j - 1] = t;
        }
    for (size_t i = 1; i < n; i++)
        if (ranges_meet(db, &f[i - 1].meta, &f[i].meta))
            return kv_db_einval(db, "kv_ingest", "%s and %s overlap", f[i - 1].src, f[i].src);
    return KV_OK;
}

/* The files' scans, shared by the threads that run them. */
struct scans {
    kv_db *db;
    struct infile *f;
    size_t n;
    _Atomic size_t next;
};

static void *scan_thread(void *arg)
{
    struct scans *s = arg;
    for (size_t i; (i = atomic_fetch_add(&s->next, 1)) < s->n;) {
        unsigned long long mark = kv_error_mark();
        s->f[i].rc = scan_file(s->db, &s->f[i]);
        if (s->f[i].rc != KV_OK)
            kv_db_keep_text(s->db, s->f[i].text, "kv_ingest", mark, s->f[i].rc);
    }
    return NULL;
}

/* Scans every file, on up to KV_INGEST_THREADS threads (this one among
 * them) when there are several: reading each whole is most of an ingest's
 * work. The first file (in the caller's order) that failed gives the
 * result and its text. */
static int scan_all(kv_db *db, struct infile *f, size_t n)
{
    struct scans s = {db, f, n, 0};
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    size_t nt = cpus > 1 ? (size_t)cpus : 1;
    nt = nt < n ? nt : n;
    nt = nt < KV_INGEST_THREADS ? nt : KV_INGEST_THREADS;
    pthread_t th[KV_INGEST_THREADS];
    size_t started = 0;
    while (started + 1 < nt && pthread_create(&th[started], NULL, scan_thread, &s) == 0)
        started++;
    scan_thread(&s);
    for (size_t i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    for (size_t i = 0; i < n; i++)
        if (f[i].rc != KV_OK)
            return kv_error_set(f[i].rc, "%s", f[i].text);
    return KV_OK;
}

static int ingest(kv_db *db, struct infile *f, size_t n, int move)
{
    int rc = scan_all(db, f, n);
    if (rc == KV_OK)
        rc = check_disjoint(db, f, n);
    for (size_t i = 0; rc == KV_OK && i < n; i++)
        rc = place_file(db, &f[i], move);
    struct kv_table **out = rc == KV_OK ? calloc(n, sizeof *out) : NULL;
    if (rc == KV_OK && !out)
        rc = KV_ENOMEM;
    if (rc != KV_OK)
        return rc;
    struct kv_writer w;
    pthread_mutex_lock(&db->mu);
    if ((rc = kv_db_writes_hold(db, &w)) == KV_OK) {
        rc = sync_logs(db);
        pause_bg(db, 1);
        if (rc == KV_OK)
            rc = commit_files(db, f, n, out);
        pause_bg(db, 0);
        kv_db_writes_release(db, &w, rc);
    }
    pthread_mutex_unlock(&db->mu);
    uint64_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        if (out[i]) {
            bytes += out[i]->meta.file_size;
            if (rc != KV_OK)
                atomic_store(&out[i]->obsolete, 1); /* never named: deleted */
            kv_table_unref(out[i]);
        }
        if (rc == KV_OK && move)
            unlink(f[i].src); /* in the database already: a failure leaves it behind */
    }
    free(out);
    if (rc == KV_OK) {
        KV_COUNT(db, ingested_tables, n);
        KV_COUNT(db, ingested_bytes, bytes);
    }
    return rc;
}

int kv_ingest(kv_db *db, const char *const *paths, size_t n, int move)
{
    if (!db || !paths || !n)
        return kv_db_einval(db, "kv_ingest", "%s",
                            !db      ? "db is NULL"
                            : !paths ? "paths is NULL"
                                     : "no file");
    if (db->o.read_only)
        return kv_db_einval(db, "kv_ingest", "a read-only handle");
    for (size_t i = 0; i < n; i++)
        if (!paths[i])
            return kv_db_einval(db, "kv_ingest", "paths[%zu] is NULL", i);
    unsigned long long mark = kv_error_mark();
    struct infile *f = calloc(n, sizeof *f);
    if (!f)
        return kv_db_fail(db, "kv_ingest", mark, KV_ENOMEM);
    for (size_t i = 0; i < n; i++)
        f[i].src = paths[i];
    int rc = ingest(db, f, n, move);
    for (size_t i = 0; i < n; i++) {
        if (f[i].t) {
            /* A table rewritten, or not committed: its placed file goes. */
            if (rc != KV_OK || !f[i].kept)
                atomic_store(&f[i].t->obsolete, 1);
            kv_table_unref(f[i].t);
        }
        free(f[i].meta.smallest);
        free(f[i].meta.largest);
    }
    free(f);
    return kv_db_fail(db, "kv_ingest", mark, rc);
}
