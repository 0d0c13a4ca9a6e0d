/* iter.c - kv_iter: ordered reads over the memtables and every level, as
 * of a snapshot.
 *
 * An iterator pins what it reads (the memtables and the version of tables
 * when it was made), so flushes and compactions under it change nothing it
 * sees. Its sources ("children") are the memtable, the immutable memtable,
 * each level-0 table, and each deeper level as one run of disjoint tables.
 * Each child yields entries in internal order: user key ascending, then
 * newest first.
 *
 * Forward: among the children, the smallest entry is the newest version of
 * the smallest key; versions newer than the snapshot are passed over, the
 * newest visible one decides (a tombstone hides the key), older ones are
 * skipped. Backward: every child seeks the last entry before the current
 * key, the largest of those names the previous key, and a forward seek to
 * (that key, snapshot) decides it as above; deleted keys repeat the step.
 * So after every move the children stand where a forward seek to the
 * current key would put them, and next and prev mix freely. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/keycmp.h"
#include "db.h"
#include "util/error.h"
#include "util/ikey.h"

enum child_kind { MEM, TABLES };

struct child {
    enum child_kind kind;
    kv_mem_iter mi;              /* MEM */
    struct kv_table **t;         /* TABLES: sorted, disjoint (one for level 0) */
    size_t n, i;
    kv_sst_iter *si;
    /* the current entry */
    int valid;
    const uint8_t *key;          /* user key */
    size_t klen;
    uint64_t seq;
    int kind_of;                 /* KV_KIND_* */
    const uint8_t *val;
    size_t vlen;
    uint8_t *buf;                /* decoded user key of a table entry */
    size_t cap;
};

struct kv_iter {
    kv_db *db;
    uint64_t snap;
    struct kv_memref *mem, *imm;
    struct kv_version *v;
    struct child *c;
    size_t nc;
    int valid, status;
    char *text;         /* status's text (status.h), kept for kv_iter_status; may be NULL */
    unsigned long long mark; /* kv_error_mark when the current call began */
    uint8_t *key, *val; /* the current pair, copied */
    size_t klen, vlen, kcap, vcap;
    uint8_t *scratch;   /* encoded internal keys for table seeks */
    size_t scap;
};

/* ---- children ------------------------------------------------------------------------ */

static int grow(uint8_t **p, size_t *cap, size_t need)
{
    if (need <= *cap)
        return KV_OK;
    size_t nc = *cap ? *cap : 64;
    while (nc < need)
        nc *= 2;
    uint8_t *n = realloc(*p, nc);
    if (!n)
        return KV_ENOMEM;
    *p = n;
    *cap = nc;
    return KV_OK;
}

/* Reads the child's entry after a move; KV_OK or an error. */
static int load(struct child *c)
{
    c->valid = 0;
    if (c->kind == MEM) {
        if (!kv_mem_iter_valid(&c->mi))
            return KV_OK;
        kv_mem_entry e;
        kv_mem_iter_entry(&c->mi, &e);
        c->key = e.key;
        c->klen = e.klen;
        c->seq = e.seq;
        c->kind_of = e.kind;
        c->val = e.val;
        c->vlen = e.vlen;
        c->valid = 1;
        return KV_OK;
    }
    if (!c->si || !kv_sst_iter_valid(c->si))
        return c->si ? kv_sst_iter_status(c->si) : KV_OK;
    size_t ilen;
    const uint8_t *ik = kv_sst_iter_key(c->si, &ilen);
    if (grow(&c->buf, &c->cap, ilen) != KV_OK)
        return KV_ENOMEM;
    if (!kv_ikey_decode(ik, ilen, c->buf, ilen, &c->klen, &c->seq, &c->kind_of) ||
        (c->kind_of != KV_KIND_VALUE && c->kind_of != KV_KIND_TOMBSTONE))
        return KV_ECORRUPT;
    c->key = c->buf;
    c->val = kv_sst_iter_value(c->si, &c->vlen);
    c->valid = 1;
    return KV_OK;
}

/* Opens table i of a TABLES child (no positioning). */
static int open_table(struct child *c, size_t i)
{
    kv_sst_iter_free(c->si);
    c->si = NULL;
    c->i = i;
    if (i >= c->n)
        return KV_OK;
    return kv_sst_iter_new(c->t[i]->reader, &c->si);
}

/* For TABLES: past a table's end, the next table's first entry. */
static int settle_forward(struct child *c)
{
    for (;;) {
        if (c->si && kv_sst_iter_valid(c->si))
            return load(c);
        int rc = c->si ? kv_sst_iter_status(c->si) : KV_OK;
        if (rc != KV_OK || c->i + 1 >= c->n) {
            c->valid = 0;
            return rc;
        }
        if ((rc = open_table(c, c->i + 1)) != KV_OK)
            return rc;
        kv_sst_iter_seek_first(c->si);
    }
}

/* For TABLES: before a table's start, the previous table's last entry. */
static int settle_backward(struct child *c)
{
    for (;;) {
        if (c->si && kv_sst_iter_valid(c->si))
            return load(c);
        int rc = c->si ? kv_sst_iter_status(c->si) : KV_OK;
        if (rc != KV_OK || c->i == 0) {
            c->valid = 0;
            return rc;
        }
        if ((rc = open_table(c, c->i - 1)) != KV_OK)
            return rc;
        kv_sst_iter_seek_last(c->si);
    }
}

static int child_first(struct child *c)
{
    if (c->kind == MEM) {
        kv_mem_iter_first(&c->mi);
        return load(c);
    }
    int rc = open_table(c, 0);
    if (rc == KV_OK && c->si)
        kv_sst_iter_seek_first(c->si);
    return rc == KV_OK ? settle_forward(c) : rc;
}

static int child_last(struct child *c)
{
    if (c->kind == MEM) {
        kv_mem_iter_last(&c->mi);
        return load(c);
    }
    int rc = open_table(c, c->n ? c->n - 1 : 0);
    if (rc == KV_OK && c->si)
        kv_sst_iter_seek_last(c->si);
    return rc == KV_OK ? settle_backward(c) : rc;
}

static int child_next(struct child *c)
{
    if (c->kind == MEM) {
        kv_mem_iter_next(&c->mi);
        return load(c);
    }
    kv_sst_iter_next(c->si);
    return settle_forward(c);
}

/* First entry >= (key, seq): `ik` is the internal key of that. */
static int child_seek(struct child *c, const uint8_t *key, size_t klen, uint64_t seq,
                      const uint8_t *ik, size_t iklen)
{
    if (c->kind == MEM) {
        kv_mem_iter_seek(&c->mi, key, klen, seq);
        return load(c);
    }
    size_t i = kv_tables_at_or_after(c->t, c->n, key, klen);
    if (i >= c->n) {
        c->valid = 0;
        return KV_OK;
    }
    int rc = open_table(c, i);
    if (rc != KV_OK)
        return rc;
    kv_sst_iter_seek(c->si, ik, iklen);
    return settle_forward(c);
}

/* Last entry of a user key < key: `prefix` is key's escaped form, which
 * sorts after every internal key of a smaller user key and before every
 * one of key itself. */
static int child_seek_before(struct child *c, const uint8_t *key, size_t klen,
                             const uint8_t *prefix, size_t plen)
{
    if (c->kind == MEM) {
        kv_mem_iter_seek_before(&c->mi, key, klen);
        return load(c);
    }
    /* The last table whose smallest key is < key. */
    size_t lo = 0, hi = c->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const kv_table_meta *m = &c->t[mid]->meta;
        if (kv_key_cmp(m->smallest, m->smallest_len, key, klen) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0) {
        c->valid = 0;
        return KV_OK;
    }
    int rc = open_table(c, lo - 1);
    if (rc != KV_OK)
        return rc;
    kv_sst_iter_seek_before(c->si, prefix, plen);
    return settle_backward(c);
}

/* ---- the merge --------------------------------------------------------------------- */

/* Internal order of two child entries. */
static int entry_cmp(const struct child *a, const struct child *b)
{
    int d = kv_key_cmp(a->key, a->klen, b->key, b->klen);
    if (d)
        return d;
    return a->seq > b->seq ? -1 : a->seq < b->seq;
}

static struct child *smallest(kv_iter *it)
{
    struct child *m = NULL;
    for (size_t i = 0; i < it->nc; i++)
        if (it->c[i].valid && (!m || entry_cmp(&it->c[i], m) < 0))
            m = &it->c[i];
    return m;
}

static void stop(kv_iter *it, int rc)
{
    it->valid = 0;
    if (rc != KV_OK && it->status == KV_OK) {
        it->status = rc;
        char t[KV_DB_TEXT];
        kv_db_keep_text(it->db, t, "iterator", it->mark, rc);
        it->text = strdup(t); /* NULL: kv_iter_status says less */
    }
}

/* From the children's positions, the next key visible at the snapshot and
 * not deleted. `skip`: a key already passed (its remaining versions are
 * older). */
static void find_forward(kv_iter *it, const uint8_t *skip, size_t skiplen, int have_skip)
{
    uint8_t *skipbuf = NULL;
    size_t skipcap = 0;
    if (have_skip) { /* skip may point into it->key, which changes below */
        if (grow(&skipbuf, &skipcap, skiplen + 1) != KV_OK) {
            stop(it, KV_ENOMEM);
            return;
        }
        memcpy(skipbuf, skip, skiplen);
    }
    for (;;) {
        struct child *m = smallest(it);
        if (!m) {
            it->valid = 0;
            break;
        }
        int pass = m->seq > it->snap ||
                   (have_skip && kv_key_cmp(m->key, m->klen, skipbuf, skiplen) == 0);
        if (!pass && m->kind_of == KV_KIND_TOMBSTONE) {
            if (grow(&skipbuf, &skipcap, m->klen + 1) != KV_OK) {
                stop(it, KV_ENOMEM);
                break;
            }
            memcpy(skipbuf, m->key, m->klen);
            skiplen = m->klen;
            have_skip = 1;
            pass = 1;
        }
        if (!pass) {
            if (grow(&it->key, &it->kcap, m->klen + 1) != KV_OK ||
                grow(&it->val, &it->vcap, m->vlen + 1) != KV_OK) {
                stop(it, KV_ENOMEM);
                break;
            }
            memcpy(it->key, m->key, m->klen);
            it->klen = m->klen;
            memcpy(it->val, m->val, m->vlen);
            it->vlen = m->vlen;
            it->valid = 1;
            break;
        }
        int rc = child_next(m);
        if (rc != KV_OK) {
            stop(it, rc);
            break;
        }
    }
    free(skipbuf);
}

/* Positions every child at (key, snapshot) and finds forward from there. */
static void seek_all(kv_iter *it, const uint8_t *key, size_t klen)
{
    if (grow(&it->scratch, &it->scap, 2 * klen + 2 + KV_IKEY_TRAILER) != KV_OK) {
        stop(it, KV_ENOMEM);
        return;
    }
    size_t plen = kv_ikey_put_prefix(it->scratch, key, klen);
    kv_ikey_put_trailer(it->scratch + plen, it->snap, 0xFF);
    for (size_t i = 0; i < it->nc; i++) {
        int rc = child_seek(&it->c[i], key, klen, it->snap, it->scratch, plen + KV_IKEY_TRAILER);
        if (rc != KV_OK) {
            stop(it, rc);
            return;
        }
    }
}

/* The previous visible key before `key` (have_key 0: before the end). */
static void find_backward(kv_iter *it, const uint8_t *key, size_t klen, int have_key)
{
    uint8_t *cur = NULL;
    size_t cap = 0, clen = klen;
    if (have_key) {
        if (grow(&cur, &cap, klen + 1) != KV_OK) {
            stop(it, KV_ENOMEM);
            return;
        }
        memcpy(cur, key, klen);
    }
    for (;;) {
        /* Every child's last entry before cur (or its last entry). */
        int rc = KV_OK;
        if (have_key) {
            if (grow(&it->scratch, &it->scap, 2 * clen + 2) != KV_OK) {
                stop(it, KV_ENOMEM);
                break;
            }
            size_t plen = kv_ikey_put_prefix(it->scratch, cur, clen);
            for (size_t i = 0; rc == KV_OK && i < it->nc; i++)
                rc = child_seek_before(&it->c[i], cur, clen, it->scratch, plen);
        } else
            for (size_t i = 0; rc == KV_OK && i < it->nc; i++)
                rc = child_last(&it->c[i]);
        if (rc != KV_OK) {
            stop(it, rc);
            break;
        }
        /* The largest user key among them is the candidate. */
        struct child *m = NULL;
        for (size_t i = 0; i < it->nc; i++)
            if (it->c[i].valid && (!m || kv_key_cmp(it->c[i].key, it->c[i].klen, m->key,
                                                    m->klen) > 0))
                m = &it->c[i];
        if (!m) {
            it->valid = 0;
            break;
        }
        if (grow(&cur, &cap, m->klen + 1) != KV_OK) {
            stop(it, KV_ENOMEM);
            break;
        }
        memcpy(cur, m->key, m->klen);
        clen = m->klen;
        have_key = 1;
        /* Decide it by a forward seek: visible and a value, or go on. */
        seek_all(it, cur, clen);
        if (it->status != KV_OK)
            break;
        struct child *s = smallest(it);
        while (s && s->seq > it->snap && kv_key_cmp(s->key, s->klen, cur, clen) == 0) {
            if ((rc = child_next(s)) != KV_OK)
                break;
            s = smallest(it);
        }
        if (rc != KV_OK) {
            stop(it, rc);
            break;
        }
        if (s && kv_key_cmp(s->key, s->klen, cur, clen) == 0 && s->kind_of == KV_KIND_VALUE) {
            find_forward(it, NULL, 0, 0); /* lands on s */
            break;
        }
    }
    free(cur);
}

/* ---- public ------------------------------------------------------------------------ */

int kv_iter_new(kv_db *db, const kv_snapshot *snap, kv_iter **out)
{
    if (!db || !out)
        return kv_db_einval(db, "kv_iter_new", "%s is NULL", db ? "out" : "db");
    *out = NULL;
    kv_iter *it = calloc(1, sizeof *it);
    if (!it)
        return kv_error_set(KV_ENOMEM, "%s: kv_iter_new: out of memory", db->path);
    it->db = db;
    pthread_mutex_lock(&db->mu);
    db->iters++; /* kv_iter_free takes it back, last */
    it->mem = db->mem;
    it->imm = db->imm;
    it->v = db->current;
    atomic_fetch_add(&it->mem->refs, 1);
    if (it->imm)
        atomic_fetch_add(&it->imm->refs, 1);
    kv_version_ref(it->v);
    it->snap = snap ? snap->seq : db->last_seq;
    pthread_mutex_unlock(&db->mu);

    const struct kv_version *v = it->v;
    size_t n = 2 + (v->start[1] - v->start[0]) + (KV_LEVELS - 1);
    it->c = calloc(n, sizeof *it->c);
    if (!it->c) {
        kv_iter_free(it);
        return kv_error_set(KV_ENOMEM, "%s: kv_iter_new: out of memory", db->path);
    }
    it->c[it->nc].kind = MEM;
    kv_mem_iter_init(&it->c[it->nc++].mi, it->mem->mem);
    if (it->imm) {
        it->c[it->nc].kind = MEM;
        kv_mem_iter_init(&it->c[it->nc++].mi, it->imm->mem);
    }
    for (size_t i = v->start[0]; i < v->start[1]; i++)
        it->c[it->nc++] = (struct child){.kind = TABLES, .t = &v->tables[i], .n = 1};
    for (int l = 1; l < KV_LEVELS; l++)
        if (v->start[l + 1] > v->start[l])
            it->c[it->nc++] = (struct child){.kind = TABLES, .t = &v->tables[v->start[l]],
                                             .n = v->start[l + 1] - v->start[l]};
    *out = it;
    return KV_OK;
}

void kv_iter_free(kv_iter *it)
{
    if (!it)
        return;
    for (size_t i = 0; i < it->nc; i++) {
        kv_sst_iter_free(it->c[i].si);
        free(it->c[i].buf);
    }
    free(it->c);
    free(it->key);
    free(it->val);
    free(it->scratch);
    free(it->text);
    /* Memtables and tables are only referenced: dropping the references
     * needs no lock (the last one frees). */
    kv_memref_unref(it->mem);
    kv_memref_unref(it->imm);
    kv_version_unref(it->v);
    /* Last: once the count is down, kv_close may free the handle (tables
     * dropped above use its block cache). */
    kv_db *db = it->db;
    free(it);
    pthread_mutex_lock(&db->mu);
    db->iters--;
    pthread_mutex_unlock(&db->mu);
}

void kv_iter_seek_first(kv_iter *it)
{
    if (!it || it->status)
        return;
    it->mark = kv_error_mark();
    for (size_t i = 0; i < it->nc; i++) {
        int rc = child_first(&it->c[i]);
        if (rc != KV_OK) {
            stop(it, rc);
            return;
        }
    }
    find_forward(it, NULL, 0, 0);
}

void kv_iter_seek(kv_iter *it, const void *key, size_t klen)
{
    if (!it || it->status)
        return;
    it->mark = kv_error_mark();
    if (klen && !key) {
        kv_db_einval(it->db, "kv_iter_seek", "NULL key with length %zu", klen);
        stop(it, KV_EINVAL);
        return;
    }
    seek_all(it, key, klen);
    if (it->status == KV_OK)
        find_forward(it, NULL, 0, 0);
}

void kv_iter_seek_last(kv_iter *it)
{
    if (!it || it->status)
        return;
    it->mark = kv_error_mark();
    find_backward(it, NULL, 0, 0);
}

void kv_iter_next(kv_iter *it)
{
    if (!kv_iter_valid(it))
        return;
    /* The children stand at the current key's newest visible version. */
    it->mark = kv_error_mark();
    find_forward(it, it->key, it->klen, 1);
}

void kv_iter_prev(kv_iter *it)
{
    if (!kv_iter_valid(it))
        return;
    it->mark = kv_error_mark();
    find_backward(it, it->key, it->klen, 1);
}

int kv_iter_valid(const kv_iter *it)
{
    return it && !it->status && it->valid;
}

const void *kv_iter_key(const kv_iter *it, size_t *klen)
{
    int ok = kv_iter_valid(it);
    if (klen)
        *klen = ok ? it->klen : 0;
    return ok ? it->key : NULL;
}

const void *kv_iter_value(const kv_iter *it, size_t *vlen)
{
    int ok = kv_iter_valid(it);
    if (vlen)
        *vlen = ok ? it->vlen : 0;
    return ok ? it->val : NULL;
}

int kv_iter_status(const kv_iter *it)
{
    if (!it)
        return kv_db_einval(NULL, "kv_iter_status", "it is NULL");
    if (it->status != KV_OK && it->text)
        kv_error_set(it->status, "%s", it->text);
    else if (it->status != KV_OK)
        kv_error_set(it->status, "%s: iterator: %s", it->db->path, kv_strerror(it->status));
    return it->status;
}
