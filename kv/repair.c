/* repair.c - kv_repair: a new manifest from the tables and logs in the
 * directory (kv_destroy, which removes a database's files: dbfiles.c).
 *
 * kv_repair runs under the database's LOCK, on a bare handle (db.h,
 * kv_db_bare) whose options, seed and file counter the table builder
 * (builder.c) uses, in these steps:
 *
 *  1. list the directory: tables, logs, blob files, and the highest
 *     number in use;
 *  2. read every blob file whole (kv_blob_scan: every record and its
 *     checksum), keeping where each record lies; one whose header or
 *     footer fails goes to lost/; one with a damaged record is kept as
 *     partial (struct blob): each record a table names is checked alone;
 *  3. read every table whole (kv_sst_verify, then every entry decoded, in
 *     order, with its sequence number; a blob reference is matched with
 *     the record it names); one that fails goes to lost/; an entry whose
 *     reference does not decode, or names no sound record, loses its
 *     value alone (the tables are then merged without it);
 *  4. choose the filter seed: the one the tables' filters share, else the
 *     newest table's (and the tables are then merged, below);
 *  5. replay the logs, oldest first, each into a level-0 table, up to the
 *     first damage; the damaged log and those after it go to lost/;
 *  6. decide the layout: the tables stay as they are, all in level 0, when
 *     a Get walking them newest-number first finds the newest version of
 *     every key (wherever two key ranges overlap, the higher number holds
 *     only newer sequences), every filter hashes the user key with the
 *     seed and every blob reference names a record of a readable blob
 *     file; else they are merged into new tables at the level their size
 *     fits, the newest version of each key kept whose value can be read
 *     and no tombstone;
 *  7. count each blob file's garbage (its records no kept entry refers
 *     to); one with no record referred to goes to lost/; write the
 *     manifest in repair.tmp/ (LMDB commits and syncs it), move an old
 *     MANIFEST to lost/, rename the new one into place, and only then
 *     delete the replayed logs and the merged tables.
 *
 * A kill before step 7's rename leaves every input file where it was (or
 * in lost/, where a rerun would put it too: a rerun finds the same entries
 * kept, so the same blob files unused) and only extra tables beside them,
 * whose entries repeat entries of the inputs: the next run merges them
 * away. A kill after it leaves a repaired database and files kv_open
 * deletes (old logs, tables the manifest does not name).
 *
 * Memory: besides the tables' records, 24 bytes per record of every
 * readable blob file (struct blob_rec), to match references with records
 * and count each file's garbage exactly. */
#define _DEFAULT_SOURCE /* dirent, strdup */
#include "db.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "batch.h"
#include "dbfiles.h"
#include "merge.h"
#include "order.h"
#include "util/error.h"
#include "util/file.h"
#include "util/hash.h"
#include "util/ikey.h"
#include "util/keycmp.h"

/* A readable table: its manifest record (level 0, keys owned) and what
 * its filter holds. */
struct found {
    kv_table_meta meta;
    int filter_hash;    /* KV_SST_FILTER_HASH_* */
    uint64_t seed;      /* its filter's seed */
    int written;        /* made by this run (from a log, or by the merge) */
    uint64_t lost_refs; /* blob references whose value cannot be read */
};

/* One record of a readable blob file: where it lies, and what a reference
 * to it must say (its key by a 32-bit hash: a reference the table's
 * checksums vouch for names a record of its own key or is damage, and
 * matching the key's length, the value's size and the offset as well
 * leaves only a forged table to pass a wrong key). 24 bytes a record. */
struct blob_rec {
    uint64_t offset;
    uint32_t vlen, klen;
    uint32_t key_hash;
    uint32_t refs;      /* kept entries that refer to it */
};

/* A readable blob file (<number>.blob), its records in file order; or,
 * when a record of it fails its checks (damaged: its boundaries after it
 * cannot be trusted), a partial one: its header and footer are sound, and
 * each record a table entry refers to is read and checked on its own
 * (kv_blob_read: checksum, key, sizes) when first named, then kept in rec
 * (appended, never moved: at most the footer's count, allocated at once)
 * and found through idx (rec's indices by offset). A damaged record is
 * then lost alone, with the entry that refers to it. */
struct blob {
    uint64_t number;
    kv_blob_file_info info;
    struct blob_rec *rec;
    size_t nrec, cap;
    kv_blob_reader *rd; /* partial: its reader, open for the tables' step */
    size_t *idx;        /* partial: rec's indices, by offset */
};

struct repair {
    kv_db *db;               /* the bare handle: LOCK, options, seed, next_file */
    const char *path;
    kv_repair_report *rep;
    size_t text_len, text_cap;
    struct found *t;         /* the readable tables, by number once listed */
    size_t nt, cap;
    uint64_t *logs;          /* log numbers, ascending */
    size_t nlogs;
    struct blob *b;          /* the readable blob files, by number */
    size_t nb;
    uint64_t lost_refs;      /* of the readable tables: references to values not found */
    uint64_t dup_refs;       /* records two entries of the tables refer to */
    uint64_t last_seq;
    int lost_made;           /* lost/ exists */
    int features;            /* a range tombstone, operand or timed entry was read */
    uint8_t *scratch;        /* a partial blob file's value, read to be checked */
    size_t scratch_cap;      /* ... its bytes */
};

/* ---- small helpers ------------------------------------------------------------ */

/* Appends a line to the report's text (dropped when out of memory: the
 * counts still tell). */
static void note(struct repair *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct repair *r, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    size_t len = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
    if (r->text_len + len + 2 > r->text_cap) {
        size_t cap = r->text_cap ? 2 * r->text_cap : 1024;
        while (cap < r->text_len + len + 2)
            cap *= 2;
        char *t = realloc(r->rep->text, cap);
        if (!t)
            return;
        r->rep->text = t;
        r->text_cap = cap;
    }
    memcpy(r->rep->text + r->text_len, line, len);
    r->text_len += len;
    r->rep->text[r->text_len++] = '\n';
    r->rep->text[r->text_len] = '\0';
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int cmp_found(const void *a, const void *b)
{
    return cmp_u64(&((const struct found *)a)->meta.number,
                   &((const struct found *)b)->meta.number);
}

static void found_free(struct found *f)
{
    free(f->meta.smallest);
    free(f->meta.largest);
    f->meta.smallest = f->meta.largest = NULL;
}

/* Room for one more readable table; NULL when out of memory. */
static struct found *found_add(struct repair *r)
{
    if (r->nt == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 16;
        struct found *t = realloc(r->t, cap * sizeof *t);
        if (!t)
            return NULL;
        r->t = t;
        r->cap = cap;
    }
    struct found *f = &r->t[r->nt];
    memset(f, 0, sizeof *f);
    return f;
}

/* Moves <path>/<name> into <path>/lost/ (made when missing) under the same
 * name, or with ".1", ".2", ... added when lost/ already holds one, and
 * syncs lost/. Never deletes anything. */
static int move_to_lost(struct repair *r, const char *name)
{
    char *lost = kv_dbfile_join(r->path, KV_LOST_DIR);
    char *from = kv_dbfile_join(r->path, name);
    size_t cap = strlen(r->path) + strlen(name) + 48;
    char *to = malloc(cap);
    int rc = KV_OK;
    if (!lost || !from || !to) {
        rc = kv_error_set(KV_ENOMEM, "%s: kv_repair: out of memory", r->path);
        goto out;
    }
    if (!r->lost_made) {
        if (mkdir(lost, 0755) != 0 && errno != EEXIST) {
            rc = kv_error_errno(errno, "%s: mkdir", lost);
            goto out;
        }
        struct stat st;
        if (lstat(lost, &st) != 0 || !S_ISDIR(st.st_mode)) {
            rc = kv_error_set(KV_ECORRUPT, "%s: not a directory: kv_repair keeps what it cannot "
                              "use there", lost);
            goto out;
        }
        if ((rc = kv_file_sync_dir_of(lost)) != KV_OK)
            goto out;
        r->lost_made = 1;
    }
    struct stat st;
    int e = 0;
    for (unsigned i = 0;; i++) {
        if (i == 0)
            snprintf(to, cap, "%s/%s", lost, name);
        else
            snprintf(to, cap, "%s/%s.%u", lost, name, i);
        if ((e = kv_dbfile_exists(to, &st)) != 1)
            break;
    }
    if (e < 0) {
        rc = e;
        goto out;
    }
    rc = kv_file_rename(from, to);
out:
    free(lost);
    free(from);
    free(to);
    return rc;
}

/* ---- 1. the directory ------------------------------------------------------------- */

/* Collects the table numbers (*tables, ascending), the blob file numbers
 * (*blobs, ascending) and the logs (r->logs), and raises the file counter
 * above every number in the directory. */
static int list_dir(struct repair *r, uint64_t **tables, size_t *ntables, uint64_t **blobs,
                    size_t *nblobs)
{
    *tables = *blobs = NULL;
    *ntables = *nblobs = 0;
    size_t tcap = 0, lcap = 0, bcap = 0;
    DIR *d = opendir(r->path);
    if (!d)
        return kv_error_errno(errno, "%s: opendir", r->path);
    struct dirent *de;
    int rc = KV_OK;
    while (rc == KV_OK && (de = readdir(d)) != NULL) {
        uint64_t n;
        const char *end = kv_dbfile_number(de->d_name, &n);
        if (!end)
            continue;
        if (n + 1 > r->db->next_file)
            r->db->next_file = n + 1;
        uint64_t **list = NULL;
        size_t *len = NULL, *cap = NULL;
        if (strcmp(end, ".sst") == 0) {
            list = tables;
            len = ntables;
            cap = &tcap;
        } else if (strcmp(end, ".log") == 0) {
            list = &r->logs;
            len = &r->nlogs;
            cap = &lcap;
        } else if (strcmp(end, ".blob") == 0) {
            list = blobs;
            len = nblobs;
            cap = &bcap;
        } else {
            continue;
        }
        if (*len == *cap) {
            size_t nc = *cap ? 2 * *cap : 16;
            uint64_t *l = realloc(*list, nc * sizeof *l);
            if (!l) {
                rc = kv_error_set(KV_ENOMEM, "%s: kv_repair: out of memory", r->path);
                break;
            }
            *list = l;
            *cap = nc;
        }
        (*list)[(*len)++] = n;
    }
    closedir(d);
    if (*ntables > 1)
        qsort(*tables, *ntables, sizeof **tables, cmp_u64);
    if (*nblobs > 1)
        qsort(*blobs, *nblobs, sizeof **blobs, cmp_u64);
    if (r->nlogs > 1)
        qsort(r->logs, r->nlogs, sizeof *r->logs, cmp_u64);
    return rc;
}

/* ---- 2. the blob files ------------------------------------------------------------ */

static uint32_t key_hash32(const void *key, size_t klen)
{
    return (uint32_t)kv_hash_key(key, klen, 0);
}

/* kv_blob_scan's visitor: notes where a record lies. */
static int note_record(void *ctx, const void *key, size_t klen, const void *val, size_t vlen,
                       const kv_blob_ref *ref)
{
    (void)val;
    struct blob *b = ctx;
    if (b->nrec == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 64;
        struct blob_rec *n = realloc(b->rec, cap * sizeof *n);
        if (!n)
            return KV_ENOMEM;
        b->rec = n;
        b->cap = cap;
    }
    /* The scan checked klen <= 64 KiB and vlen, a u32 of the record. */
    b->rec[b->nrec++] = (struct blob_rec){.offset = ref->offset, .vlen = (uint32_t)vlen,
                                          .klen = (uint32_t)klen,
                                          .key_hash = key_hash32(key, klen)};
    return KV_OK;
}

/* Reads blob file `number` whole into *b. KV_OK: sound. KV_ECORRUPT, with
 * why: unusable (it cannot be opened or read, its header or footer fails
 * its checks, a record its checksum, the records disagree with the
 * footer). KV_ENOMEM stops the repair. */
static int read_blob(struct repair *r, uint64_t number, struct blob *b, char *why, size_t whylen)
{
    char *p = kv_dbfile_path(r->path, number, "blob");
    if (!p)
        return kv_error_set(KV_ENOMEM, "%s: kv_repair: out of memory", r->path);
    memset(b, 0, sizeof *b);
    b->number = number;
    kv_blob_reader *rd = NULL;
    int rc = kv_blob_reader_open(p, number, &rd);
    if (rc == KV_OK) {
        kv_blob_reader_info(rd, &b->info);
        rc = kv_blob_scan(rd, note_record, b);
    }
    if (rc == KV_ECORRUPT && rd) { /* a damaged record: partial (struct blob) */
        snprintf(why, whylen, "%s", kv_error_text());
        free(b->rec);
        b->nrec = 0;
        b->cap = (size_t)b->info.records; /* check_ends: at most bytes / 17 */
        b->rec = malloc((b->cap ? b->cap : 1) * sizeof *b->rec);
        b->idx = malloc((b->cap ? b->cap : 1) * sizeof *b->idx);
        if (b->rec && b->idx) {
            b->rd = rd;
            free(p);
            return KV_OK;
        }
        rc = KV_ENOMEM;
    }
    kv_blob_reader_close(rd);
    if (rc != KV_OK) {
        free(b->rec);
        free(b->idx);
        b->rec = NULL;
        b->idx = NULL;
        b->nrec = b->cap = 0;
        if (rc == KV_ENOMEM) {
            rc = kv_error_set(KV_ENOMEM, "%s: kv_repair: out of memory", r->path);
        } else {
            snprintf(why, whylen, "%s", kv_error_text());
            if (!why[0])
                snprintf(why, whylen, "%s: %s", p, kv_strerror(rc));
            rc = KV_ECORRUPT;
        }
    }
    free(p);
    return rc;
}

/* Reads every blob file; the sound ones go to r->b (by number), the others
 * to lost/. */
static int read_blobs(struct repair *r, const uint64_t *numbers, size_t n)
{
    if (n && !(r->b = calloc(n, sizeof *r->b)))
        return kv_error_set(KV_ENOMEM, "%s: kv_repair: out of memory", r->path);
    for (size_t i = 0; i < n; i++) {
        char why[600] = "";
        struct blob *b = &r->b[r->nb];
        int rc = read_blob(r, numbers[i], b, why, sizeof why);
        if (rc == KV_OK) {
            r->nb++;
            note(r, "%06llu.blob: readable (%llu records, %llu bytes)",
                 (unsigned long long)numbers[i], (unsigned long long)b->info.records,
                 (unsigned long long)b->info.record_bytes);
            if (b->rd)
                note(r,
                     "%06llu.blob: damaged: %s; each record an entry refers to is checked "
                     "on its own, the damaged ones lost",
                     (unsigned long long)numbers[i], why);
            continue;
        }
        if (rc != KV_ECORRUPT)
            return rc;
        char name[32];
        snprintf(name, sizeof name, "%06llu.blob", (unsigned long long)numbers[i]);
        if ((rc = move_to_lost(r, name)) != KV_OK)
            return rc;
        r->rep->blobs_lost++;
        note(r, "%s: moved to %s/: %s", name, KV_LOST_DIR, why);
    }
    return KV_OK;
}

/* In partial file b: the record at ref's offset, found among those
 * checked, else read and checked now (kept when sound). *out NULL: none
 * sound there, or none of that key and size. KV_EIO, KV_ENOMEM stop the
 * repair (a rerun finds the same). */
static int partial_target(struct repair *r, struct blob *b, const kv_blob_ref *ref,
                          const uint8_t *key, size_t klen, struct blob_rec **out)
{
    *out = NULL;
    size_t l = 0, h = b->nrec;
    while (l < h) {
        size_t mid = l + (h - l) / 2;
        if (b->rec[b->idx[mid]].offset < ref->offset)
            l = mid + 1;
        else
            h = mid;
    }
    if (l < b->nrec && b->rec[b->idx[l]].offset == ref->offset) {
        struct blob_rec *x = &b->rec[b->idx[l]];
        if (x->vlen == ref->size && x->klen == klen && x->key_hash == key_hash32(key, klen))
            *out = x;
        return KV_OK;
    }
    /* Only a record the file can hold is read: no allocation of a size
     * that a forged reference names. Beyond the footer's count of sound
     * records (records inside a value may be forged), none is kept. */
    if (b->nrec == b->cap || klen > KV_MAX_KEY_SIZE || ref->size > KV_MAX_VALUE_SIZE ||
        kv_blob_record_size(klen, ref->size) > b->info.record_bytes)
        return KV_OK;
    size_t need = ref->size ? (size_t)ref->size : 1;
    if (need > r->scratch_cap) {
        uint8_t *n = realloc(r->scratch, need);
        if (!n)
            return kv_error_set(KV_ENOMEM, "%s: kv_repair: out of memory", r->path);
        r->scratch = n;
        r->scratch_cap = need;
    }
    int rc = kv_blob_read(b->rd, ref, key, klen, r->scratch, r->scratch_cap, NULL);
    if (rc == KV_ENOMEM || rc == KV_EIO)
        return rc;
    if (rc != KV_OK) /* KV_ECORRUPT: damaged, or no record of this key and size */
        return KV_OK;
    memmove(b->idx + l + 1, b->idx + l, (b->nrec - l) * sizeof *b->idx);
    b->idx[l] = b->nrec;
    *out = &b->rec[b->nrec++];
    **out = (struct blob_rec){.offset = ref->offset,
                              .vlen = (uint32_t)ref->size,
                              .klen = (uint32_t)klen,
                              .key_hash = key_hash32(key, klen)};
    return KV_OK;
}

/* The record that reference `ref`, held by an entry of user key `key`,
 * names in *out: one of a readable blob file, at ref's offset, of key's
 * length and hash and ref's value size. NULL when there is none (the file
 * is missing or lost, or holds no such sound record): the value cannot be
 * read. KV_EIO, KV_ENOMEM (a partial file's read) stop the repair. */
static int ref_target(struct repair *r, const kv_blob_ref *ref, const uint8_t *key, size_t klen,
                      struct blob_rec **out)
{
    *out = NULL;
    size_t lo = 0, hi = r->nb;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->b[mid].number < ref->number)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == r->nb || r->b[lo].number != ref->number)
        return KV_OK;
    struct blob *b = &r->b[lo];
    if (b->rd)
        return partial_target(r, b, ref, key, klen, out);
    size_t l = 0, h = b->nrec;
    while (l < h) {
        size_t mid = l + (h - l) / 2;
        if (b->rec[mid].offset < ref->offset)
            l = mid + 1;
        else
            h = mid;
    }
    struct blob_rec *x = l < b->nrec ? &b->rec[l] : NULL;
    if (!x || x->offset != ref->offset || x->vlen != ref->size || x->klen != klen ||
        x->key_hash != key_hash32(key, klen))
        return KV_OK;
    *out = x;
    return KV_OK;
}

/* ---- 3. the tables ------------------------------------------------------------------ */

/* Keeps a copy of n bytes in *dst (at least one byte, so never NULL). */
static int keep_key(uint8_t **dst, size_t *dlen, const uint8_t *src, size_t n)
{
    uint8_t *p = realloc(*dst, n ? n : 1);
    if (!p)
        return KV_ENOMEM;
    if (n)
        memcpy(p, src, n);
    *dst = p;
    *dlen = n;
    return KV_OK;
}

/* The blob reference of entry f->meta.entries of table p (user key
 * user[0, ulen)): one that names a record is marked in *marks (room for
 * *mcap, *nmarks used) and widens the table's blob range; one that names
 * none, or does not decode (the table's checksums passed: written so, or
 * forged), is counted in f->lost_refs: that entry alone is lost, not the
 * table. KV_ENOMEM, KV_EIO stop the repair. */
static int read_ref(struct repair *r, const char *p, struct found *f, const uint8_t *v, size_t vlen,
                    const uint8_t *user, size_t ulen, char *why, size_t whylen,
                    struct blob_rec ***marks, size_t *mcap, size_t *nmarks)
{
    kv_blob_ref ref;
    if (kv_blob_ref_decode(v, vlen, &ref) != KV_OK) {
        note(r,
             "%s: entry %llu holds a blob reference that does not decode (%zu bytes): its "
             "value is lost",
             p, (unsigned long long)f->meta.entries, vlen);
        f->lost_refs++;
        return KV_OK;
    }
    (void)why, (void)whylen;
    struct blob_rec *x;
    int rc = ref_target(r, &ref, user, ulen, &x);
    if (rc != KV_OK)
        return rc;
    if (!x) {
        f->lost_refs++;
    } else {
        if (*nmarks == *mcap) {
            size_t nc = *mcap ? 2 * *mcap : 256;
            struct blob_rec **m = realloc(*marks, nc * sizeof *m);
            if (!m)
                return KV_ENOMEM;
            *marks = m;
            *mcap = nc;
        }
        (*marks)[(*nmarks)++] = x;
    }
    /* The range of every reference (a table with lost ones is merged, and
     * its range is then the merge's). */
    if (!f->meta.blob_lo || ref.number < f->meta.blob_lo)
        f->meta.blob_lo = ref.number;
    if (ref.number > f->meta.blob_hi)
        f->meta.blob_hi = ref.number;
    return KV_OK;
}

/* After the last entry of table p (prev[0, plen): its internal key): the
 * count must agree with its properties (else KV_ECORRUPT, with why); takes
 * the largest user key and what the filter holds into f. */
static int read_end(const kv_sst_reader *rd, const char *p, struct found *f, const uint8_t *prev,
                    size_t plen, uint8_t *user, size_t ucap, char *why, size_t whylen,
                    const kv_comparator *r_cmp)
{
    kv_sst_properties pr;
    kv_sst_reader_properties(rd, &pr);
    const uint8_t *rb;
    size_t rblen;
    kv_sst_reader_range_tombstones(rd, &rb, &rblen);
    if ((f->meta.entries == 0 && !rblen) || pr.entries != f->meta.entries) {
        snprintf(why, whylen, "%s: %llu entries read, its properties say %llu%s", p,
                 (unsigned long long)f->meta.entries, (unsigned long long)pr.entries,
                 f->meta.entries ? "" : " (the store writes no empty table)");
        return KV_ECORRUPT;
    }
    /* The largest user key: the last entry's (read_ranges widened the
     * range to the range tombstones' before; the larger one stays). */
    kv_sst_store_key sk;
    if (f->meta.entries) {
        if (kv_sst_store_key_decode(prev, plen, user, ucap, &sk) != KV_OK)
            return KV_ENOMEM;
        if (!f->meta.largest ||
            kv_sst_cmp(r_cmp, user, sk.user_len, f->meta.largest, f->meta.largest_len) > 0) {
            if (keep_key(&f->meta.largest, &f->meta.largest_len, user, sk.user_len) != KV_OK)
                return KV_ENOMEM;
        }
    }
    f->meta.file_size = pr.file_size;
    f->meta.filter_layout = (uint32_t)pr.filter_layout;
    f->meta.filter_bits_per_key = pr.filter_bits_per_key;
    f->meta.filter_k = pr.filter_k;
    f->meta.filter_keys = pr.filter_keys;
    f->filter_hash = pr.filter_hash;
    f->seed = pr.filter_seed;
    return KV_OK;
}

/* The table's range tombstones, if it has any: their block must decode
 * (else KV_ECORRUPT, with why), and they widen its range (the smallest key
 * then, and the largest for read_end) and its sequences. */
static int read_ranges(struct repair *r, const kv_sst_reader *rd, const char *p, struct found *f,
                       char *why, size_t whylen)
{
    const uint8_t *b;
    size_t len;
    kv_sst_reader_range_tombstones(rd, &b, &len);
    if (!len)
        return KV_OK;
    r->features = 1;
    kv_rtset *set = NULL;
    int rc = kv_rtset_decode(r->db->cmp, b, len, &set);
    if (rc == KV_ECORRUPT)
        snprintf(why, whylen, "%s: its range tombstone block does not decode", p);
    if (rc != KV_OK || !set)
        return rc;
    size_t n = kv_rtset_count(set);
    kv_rt_fragment first, last;
    kv_rtset_fragment(set, 0, &first);
    kv_rtset_fragment(set, n - 1, &last);
    if (!f->meta.entries ||
        kv_sst_cmp(r->db->cmp, first.start, first.slen, f->meta.smallest, f->meta.smallest_len) < 0)
        rc = keep_key(&f->meta.smallest, &f->meta.smallest_len, first.start, first.slen);
    if (rc == KV_OK)
        rc = keep_key(&f->meta.largest, &f->meta.largest_len, last.end, last.elen);
    for (size_t i = 0; i < n; i++) {
        kv_rt_fragment fr;
        kv_rtset_fragment(set, i, &fr);
        for (size_t j = 0; j < fr.nseq; j++) {
            if (fr.seqs[j] < f->meta.min_seq)
                f->meta.min_seq = fr.seqs[j];
            if (fr.seqs[j] > f->meta.max_seq)
                f->meta.max_seq = fr.seqs[j];
        }
    }
    kv_rtset_unref(set);
    return rc;
}

/* Reads table `number` whole into *f. KV_OK: sound. KV_ECORRUPT, with why:
 * unusable (it cannot be opened or read, a block fails its checksum, a key
 * does not decode or is out of order, a sequence number is out of range,
 * a blob reference does not decode, the count disagrees with its
 * properties). Its blob references that name a record are counted on
 * those records once it is found sound (*marks holds them meanwhile: room
 * for *mcap); those that name none, in f->lost_refs. KV_ENOMEM stops the
 * repair. */
static int read_table(struct repair *r, uint64_t number, struct found *f, char *why,
                      size_t whylen, struct blob_rec ***marks, size_t *mcap)
{
    char *p = kv_dbfile_path(r->path, number, "sst");
    if (!p)
        return KV_ENOMEM;
    kv_sst_reader *rd = NULL;
    kv_sst_iter *it = NULL;
    uint8_t *user = NULL, *prev = NULL;
    size_t ucap = 0, pcap = 0, plen = 0, nmarks = 0;
    int ref_eio = 0;
    int rc = kv_sst_reader_open_cmp(p, NULL, r->db->files, number, 0, r->db->tcmp, &rd);
    if (rc == KV_OK)
        rc = kv_sst_verify(rd);
    if (rc == KV_OK)
        rc = kv_sst_iter_new(rd, &it);
    if (rc != KV_OK) {
        if (rc != KV_ENOMEM)
            snprintf(why, whylen, "%s", kv_error_text());
        goto out;
    }
    f->meta.number = number;
    f->meta.min_seq = UINT64_MAX;
    for (kv_sst_iter_seek_first(it); kv_sst_iter_valid(it); kv_sst_iter_next(it)) {
        size_t klen, vlen;
        const uint8_t *k = kv_sst_iter_key(it, &klen);
        const uint8_t *v = kv_sst_iter_value(it, &vlen);
        if (klen > ucap) {
            uint8_t *u = realloc(user, klen);
            if (!u) {
                rc = KV_ENOMEM;
                goto out;
            }
            user = u;
            ucap = klen;
        }
        kv_sst_store_key sk;
        if (kv_sst_store_key_decode(k, klen, user, ucap, &sk) != KV_OK ||
            !kv_kind_stored(sk.kind) || sk.sequence == 0 || sk.user_len > KV_MAX_KEY_SIZE ||
            (sk.kind == KV_SST_KIND_DELETE && vlen)) {
            snprintf(why, whylen, "%s: entry %llu is not a store entry (its key does not decode, "
                     "or its kind, sequence or length is out of range)", p,
                     (unsigned long long)f->meta.entries);
            rc = KV_ECORRUPT;
            goto out;
        }
        if (sk.kind > KV_KIND_BLOB)
            r->features = 1;
        if (sk.kind == KV_SST_KIND_BLOB && (rc = read_ref(r, p, f, v, vlen, user, sk.user_len, why,
                                                          whylen, marks, mcap, &nmarks)) != KV_OK) {
            ref_eio = 1;
            goto out;
        }
        if (f->meta.entries && kv_sst_cmp(r->db->tcmp, prev, plen, k, klen) >= 0) {
            snprintf(why, whylen, "%s: entry %llu is not above the one before it", p,
                     (unsigned long long)f->meta.entries);
            rc = KV_ECORRUPT;
            goto out;
        }
        if (klen > pcap) {
            uint8_t *q = realloc(prev, klen);
            if (!q) {
                rc = KV_ENOMEM;
                goto out;
            }
            prev = q;
            pcap = klen;
        }
        memcpy(prev, k, klen);
        plen = klen;
        if (f->meta.entries == 0 &&
            keep_key(&f->meta.smallest, &f->meta.smallest_len, user, sk.user_len) != KV_OK) {
            rc = KV_ENOMEM;
            goto out;
        }
        if (sk.sequence < f->meta.min_seq)
            f->meta.min_seq = sk.sequence;
        if (sk.sequence > f->meta.max_seq)
            f->meta.max_seq = sk.sequence;
        f->meta.entries++;
    }
    if ((rc = kv_sst_iter_status(it)) != KV_OK) {
        if (rc != KV_ENOMEM)
            snprintf(why, whylen, "%s", kv_error_text());
        goto out;
    }
    if ((rc = read_ranges(r, rd, p, f, why, whylen)) != KV_OK)
        goto out;
    if ((rc = read_end(rd, p, f, prev, plen, user, ucap, why, whylen, r->db->cmp)) != KV_OK)
        goto out;
    /* Sound: its references count. A record referred to twice is
     * counted twice (the merge then keeps one of them). */
    for (size_t i = 0; i < nmarks; i++)
        if ((*marks)[i]->refs++ == 1)
            r->dup_refs++;
out:
    if (rc != KV_OK)
        found_free(f);
    if (rc == KV_EIO && ref_eio) { /* a blob file's read: not the table's fault */
        kv_sst_iter_free(it);
        kv_sst_reader_close(rd);
        free(user);
        free(prev);
        free(p);
        return rc;
    }
    if (rc != KV_OK && rc != KV_ENOMEM) {
        if (!why[0])
            snprintf(why, whylen, "%s: %s", p, kv_strerror(rc));
        rc = KV_ECORRUPT;
    }
    kv_sst_iter_free(it);
    kv_sst_reader_close(rd);
    free(user);
    free(prev);
    free(p);
    return rc == KV_ENOMEM ? kv_error_set(rc, "%s: kv_repair: out of memory", r->path) : rc;
}

static int read_tables(struct repair *r, const uint64_t *numbers, size_t n)
{
    struct blob_rec **marks = NULL;
    size_t mcap = 0;
    int rc = KV_OK;
    for (size_t i = 0; i < n; i++) {
        struct found *f = found_add(r);
        if (!f) {
            rc = kv_error_set(KV_ENOMEM, "%s: kv_repair: out of memory", r->path);
            break;
        }
        char why[600] = "";
        rc = read_table(r, numbers[i], f, why, sizeof why, &marks, &mcap);
        if (rc == KV_OK) {
            r->nt++;
            if (f->meta.max_seq > r->last_seq)
                r->last_seq = f->meta.max_seq;
            r->lost_refs += f->lost_refs;
            note(r, "%06llu.sst: readable (%llu entries, sequences %llu..%llu)",
                 (unsigned long long)numbers[i], (unsigned long long)f->meta.entries,
                 (unsigned long long)f->meta.min_seq, (unsigned long long)f->meta.max_seq);
            if (f->lost_refs)
                note(r, "%06llu.sst: %llu entries refer to values in blob files that are missing "
                     "or damaged, or to no record of theirs: those values are lost",
                     (unsigned long long)numbers[i], (unsigned long long)f->lost_refs);
            continue;
        }
        if (rc != KV_ECORRUPT)
            break;
        char name[32];
        snprintf(name, sizeof name, "%06llu.sst", (unsigned long long)numbers[i]);
        if ((rc = move_to_lost(r, name)) != KV_OK)
            break;
        r->rep->tables_lost++;
        note(r, "%s: moved to %s/: %s", name, KV_LOST_DIR, why);
    }
    free(marks);
    return rc;
}

/* ---- 4. the seed -------------------------------------------------------------------- */

/* Does f's filter answer the store's Gets, which hash the user key with
 * the database's seed? A table without a filter always does. */
static int filter_fits(const struct found *f, uint64_t seed)
{
    return f->filter_hash == KV_SST_FILTER_HASH_NONE ||
           (f->filter_hash == KV_SST_FILTER_HASH_CALLER && f->seed == seed);
}

/* The seed of the newest table whose filter holds the store's hashes, or a
 * new random one when there is none; *mixed when some filter would not
 * answer with it (the tables are then merged, with new filters). */
static uint64_t choose_seed(const struct repair *r, int *mixed)
{
    const struct found *newest = NULL;
    for (size_t i = 0; i < r->nt; i++)
        if (r->t[i].filter_hash == KV_SST_FILTER_HASH_CALLER &&
            (!newest || r->t[i].meta.max_seq > newest->meta.max_seq))
            newest = &r->t[i];
    uint64_t seed = newest ? newest->seed : kv_db_random_seed();
    *mixed = 0;
    for (size_t i = 0; i < r->nt; i++)
        if (!filter_fits(&r->t[i], seed))
            *mixed = 1;
    return seed;
}

/* ---- 5. the logs -------------------------------------------------------------------- */

struct log_replay {
    kv_mem *mem;
    uint64_t next_seq; /* the sequence the next record must start at; 0 before the first */
    uint64_t max_seq;
    const char *bad;   /* why a record that passed its checksum was refused */
    struct kv_rt_list rts; /* its range deletes, keys copied: the table's range tombstones */
    int features;          /* a range delete, operand or timed entry was replayed */
};

static int log_entry(void *ctx, uint64_t seq, int kind, const uint8_t *key, size_t klen,
                     const uint8_t *val, size_t vlen)
{
    struct log_replay *x = ctx;
    if (seq > x->max_seq)
        x->max_seq = seq;
    if (kind > KV_KIND_BLOB)
        x->features = 1;
    if (kind == KV_KIND_RANGE_DEL)
        return kv_rt_list_add(&x->rts, seq, key, klen, val, vlen);
    return kv_mem_add(x->mem, 0, seq, kind, key, klen, val, vlen);
}

/* One record: its sequences must lie in 1..KV_MAX_SEQ and follow the
 * record before it in this log (the store numbers writes one after
 * another). Across logs nothing is required: with the manifest gone, the
 * tables may hold what lies between two logs. A refused record stops the
 * replay like damage does (recover.c, bad_sequence, says why a checksum is
 * no guard). */
static int log_record(void *ctx, const void *rec, size_t len)
{
    struct log_replay *x = ctx;
    if (len >= KV_BATCH_HEADER) {
        uint64_t seq = kv_get64(rec);
        uint32_t count = kv_get32((const uint8_t *)rec + 8);
        if (count && (seq == 0 || seq > KV_MAX_SEQ || count - 1 > KV_MAX_SEQ - seq)) {
            x->bad = "a record whose sequence numbers run outside 1..2^56-1";
            return 1;
        }
        if (count && x->next_seq && seq != x->next_seq) {
            x->bad = "a record whose sequence numbers do not follow the previous record's";
            return 1;
        }
        if (count)
            x->next_seq = seq + count;
    }
    int rc = kv_batch_iterate(rec, len, log_entry, x);
    if (rc == KV_ECORRUPT) {
        x->bad = "a record whose batch does not decode";
        return 1;
    }
    return rc;
}

/* Records a table this run wrote (t, one reference, dropped here). */
static int keep_written(struct repair *r, struct kv_table *t)
{
    struct found *f = found_add(r);
    int rc = KV_OK;
    if (!f) {
        rc = kv_error_set(KV_ENOMEM, "%s: kv_repair: out of memory", r->path);
    } else {
        f->meta = t->meta;
        f->meta.smallest = f->meta.largest = NULL;
        if (keep_key(&f->meta.smallest, &f->meta.smallest_len, t->meta.smallest,
                     t->meta.smallest_len) != KV_OK ||
            keep_key(&f->meta.largest, &f->meta.largest_len, t->meta.largest,
                     t->meta.largest_len) != KV_OK) {
            found_free(f);
            rc = kv_error_set(KV_ENOMEM, "%s: kv_repair: out of memory", r->path);
        } else {
            f->filter_hash = t->meta.filter_bits_per_key > 0 ? KV_SST_FILTER_HASH_CALLER
                                                             : KV_SST_FILTER_HASH_NONE;
            f->seed = r->db->seed;
            f->written = 1;
            r->nt++;
            r->rep->tables_written++;
            if (t->meta.max_seq > r->last_seq)
                r->last_seq = t->meta.max_seq;
        }
    }
    if (rc != KV_OK)
        atomic_store(&t->obsolete, 1); /* named nowhere: its file goes */
    kv_table_unref(t);
    return rc;
}

/* Replays the logs, oldest first, each into a level-0 table. *replayed
 * counts those read to their end (deleted once the new manifest is in);
 * the damaged one and those after it are moved to lost/ (their writes
 * after the damage would leave a hole if replayed). */
static int replay_logs(struct repair *r, size_t *replayed)
{
    *replayed = 0;
    int stopped = 0;
    for (size_t i = 0; i < r->nlogs; i++) {
        char name[32];
        snprintf(name, sizeof name, "%06llu.log", (unsigned long long)r->logs[i]);
        int rc;
        if (stopped) {
            if ((rc = move_to_lost(r, name)) != KV_OK)
                return rc;
            r->rep->logs_lost++;
            note(r, "%s: moved to %s/ unreplayed: it follows damage in an earlier log", name,
                 KV_LOST_DIR);
            continue;
        }
        char *p = kv_dbfile_path(r->path, r->logs[i], "log");
        struct log_replay x = {.rts = {.copy = 1}};
        if (!p || kv_mem_new(0, 0, &x.mem) != KV_OK) {
            free(p);
            return kv_error_set(KV_ENOMEM, "%s: kv_repair: out of memory", r->path);
        }
        kv_mem_set_comparator(x.mem, r->db->cmp);
        kv_wal_report wr;
        rc = kv_wal_replay(p, r->logs[i], log_record, &x, &wr);
        free(p);
        if (rc == 1)
            rc = KV_OK; /* log_record refused a record: like damage */
        struct kv_table *t = NULL;
        kv_rtset *rt = NULL;
        if (rc == KV_OK && x.rts.n)
            rc = kv_rtset_union(r->db->cmp, NULL, 0, x.rts.v, x.rts.n, NULL, NULL, &rt);
        if (rc == KV_OK)
            rc = kv_db_flush_memtable(r->db, x.mem, rt, x.max_seq, NULL, &t);
        kv_rtset_unref(rt);
        r->features |= x.features;
        kv_rt_list_free(&x.rts);
        kv_mem_free(x.mem);
        if (rc == KV_OK && t)
            rc = keep_written(r, t);
        if (rc != KV_OK)
            return rc;
        r->rep->records_recovered += wr.records;
        if (wr.tail_damaged || x.bad) {
            stopped = 1;
            if ((rc = move_to_lost(r, name)) != KV_OK)
                return rc;
            r->rep->logs_lost++;
            note(r, "%s: damaged at byte %llu (%s): %llu records replayed, then moved to %s/ "
                 "(%llu bytes not replayed)", name, (unsigned long long)wr.bytes_read,
                 x.bad ? x.bad : "a torn or damaged record", (unsigned long long)wr.records,
                 KV_LOST_DIR, (unsigned long long)wr.bytes_dropped);
        } else {
            r->logs[(*replayed)++] = r->logs[i];
            r->rep->logs_replayed++;
            note(r, "%s: replayed, %llu records%s", name, (unsigned long long)wr.records,
                 t ? " (into a new level-0 table)" : "");
        }
    }
    return KV_OK;
}

/* ---- 6. the layout ----------------------------------------------------------------- */

/* Whether two tables' user-key ranges meet, in the database's order. */
static int ranges_overlap(const kv_comparator *cmp, const kv_table_meta *a,
                          const kv_table_meta *b)
{
    return kv_sst_cmp(cmp, a->smallest, a->smallest_len, b->largest, b->largest_len) <= 0 &&
           kv_sst_cmp(cmp, b->smallest, b->smallest_len, a->largest, a->largest_len) <= 0;
}

/* Can the tables (sorted by number) stay as they are, all in level 0? A
 * Get asks level 0's tables highest number first and takes the first entry
 * it finds (version.c), so wherever two ranges overlap the higher number
 * must hold only newer sequences. A compaction writes old sequences under
 * new numbers, so a database where one ran below a level-0 table that was
 * flushed before it (over keys that table holds) is merged. O(n^2) in the
 * tables, each a comparison of two key ranges. */
static int keep_as_is(const struct repair *r)
{
    for (size_t j = 1; j < r->nt; j++)
        for (size_t i = 0; i < j; i++)
            if (r->t[j].meta.min_seq <= r->t[i].meta.max_seq &&
                ranges_overlap(r->db->cmp, &r->t[i].meta, &r->t[j].meta))
                return 0;
    return 1;
}

/* The level the merged tables go to, so that compaction has nothing to
 * move at once: the bottom level under dynamic level sizes (kv.h,
 * dynamic_level_bytes: the largest level is the bottom one), else the
 * first from 1 whose target size holds them. */
static uint32_t merge_level(const kv_db *db, uint64_t bytes)
{
    if (db->o.dynamic_level_bytes)
        return KV_LEVELS - 1;
    double target = (double)db->o.max_bytes_for_level_base;
    uint32_t level = 1;
    while (level < KV_LEVELS - 1 && (double)bytes > target) {
        level++;
        target *= 10;
    }
    return level;
}

/* What repair's merge carries from one entry to the next. */
struct rmerge {
    struct repair *r;
    struct kv_dropper drop; /* the shadowing rule (merge.h): no snapshot, everything merged */
    struct kv_builder b;    /* the output table being written, while building */
    int building;
    uint32_t level; /* of the outputs */
    double bits;    /* their filters' bits per key */
    struct {        /* the last write passed over: its value was not found */
        uint8_t *key;
        size_t len;
        uint64_t seq;
        int have;
    } lost;
    const struct kv_merge_source *s; /* the entry given to the dropper */
    struct blob_rec *target;         /* ... the record its blob reference names, or NULL */
    uint64_t blob;                   /* ... and that record's file */
    uint64_t hash;                   /* of the current user key */
    uint8_t *ikey;                   /* an entry made anew: its internal key */
    size_t icap;
};

/* Is the newest entry of a key, in s, one whose value lies in no readable
 * blob record? Then it is passed over as though it were not there (the
 * next older version, if any, is then the newest), and counted in
 * values_lost unless it is the same write as the one passed over before
 * (a copy of the entry in another table). *target: the record a readable
 * reference names. 1 passed over, 0 not, or an error. */
static int pass_over(struct repair *r, struct rmerge *g, const struct kv_merge_source *s,
                     kv_blob_ref *ref, struct blob_rec **target)
{
    if (s->kind != KV_KIND_BLOB)
        return 0;
    *target = NULL;
    int rc;
    if (kv_blob_ref_decode(s->val, s->vlen, ref) != KV_OK) /* lost: read_ref counted it */
        memset(ref, 0, sizeof *ref);
    else if ((rc = ref_target(r, ref, s->key, s->klen, target)) != KV_OK)
        return rc;
    if (*target)
        return 0;
    if (!g->lost.have || g->lost.seq != s->seq || g->lost.len != s->klen ||
        (s->klen && memcmp(s->key, g->lost.key, s->klen) != 0)) {
        if (keep_key(&g->lost.key, &g->lost.len, s->key, s->klen) != KV_OK)
            return KV_ENOMEM;
        g->lost.seq = s->seq;
        g->lost.have = 1;
        r->rep->values_lost++;
    }
    return 1;
}

/* The dropper's output: one entry into the table being written. */
static int merge_emit(void *ctx, const struct kv_dropper_out *e)
{
    struct rmerge *g = ctx;
    struct repair *r = g->r;
    if (!e->keep)
        return KV_OK; /* a dropped reference is not counted on its record */
    int rc;
    if (!g->building) {
        if ((rc = kv_builder_start(r->db, &g->b, g->level, g->bits, "kv: repair")) != KV_OK)
            return rc;
        g->building = 1;
    }
    if (e->same) {
        const struct kv_merge_source *s = g->s;
        rc = kv_builder_add(&g->b, s->ikey, s->ilen, s->key, s->klen, g->hash, s->seq, s->val,
                            s->vlen);
        if (rc == KV_OK && g->target) {
            kv_builder_note_blob(&g->b, g->blob);
            g->target->refs++;
        }
        return rc;
    }
    size_t klen = g->drop.len, need = 2 * klen + 2 + KV_IKEY_TRAILER;
    if (need > g->icap) {
        uint8_t *n = realloc(g->ikey, need);
        if (!n)
            return KV_ENOMEM;
        g->ikey = n;
        g->icap = need;
    }
    size_t plen = kv_ikey_put_prefix(g->ikey, g->drop.key, klen);
    kv_ikey_put_trailer(g->ikey + plen, e->seq, e->kind);
    return kv_builder_add(&g->b, g->ikey, plen + KV_IKEY_TRAILER, g->drop.key, klen, g->hash,
                          e->seq, e->val, e->vlen);
}

/* Nothing lies below repair's merge: it holds every table. */
static int merge_below(void *ctx, const uint8_t *key, size_t klen)
{
    (void)ctx, (void)key, (void)klen;
    return 0;
}

/* One entry of the merge, in internal-key order: the newest entry of each
 * user key is kept unless it is a tombstone (kv_dropper_add with no
 * snapshot and nothing below), or passed over (pass_over); operands stay
 * as they are (repair merges none), with what lies below them; range
 * tombstones are applied, and go (they cover nothing left). */
static int merge_entry(struct repair *r, struct rmerge *g, const struct kv_merge_source *s)
{
    kv_blob_ref ref = {0};
    struct blob_rec *target = NULL;
    int rc;
    if (!kv_dropper_shadowed(&g->drop, s->key, s->klen)) { /* the newest left of its key */
        if ((rc = pass_over(r, g, s, &ref, &target)) != 0)
            return rc > 0 ? KV_OK : rc;
        if (g->lost.have) {
            /* The write whose value was not found, found in another copy. */
            if (g->lost.seq == s->seq && g->lost.len == s->klen &&
                (!s->klen || memcmp(s->key, g->lost.key, s->klen) == 0))
                r->rep->values_lost--;
            g->lost.have = 0;
        }
    } else if (s->kind == KV_KIND_BLOB) { /* kept below an operand */
        if (kv_blob_ref_decode(s->val, s->vlen, &ref) != KV_OK)
            memset(&ref, 0, sizeof ref); /* its value is lost: it names no record */
        else if ((rc = ref_target(r, &ref, s->key, s->klen, &target)) != KV_OK)
            return rc;
    }
    if (!g->drop.have || g->drop.len != s->klen ||
        (s->klen && memcmp(s->key, g->drop.key, s->klen) != 0)) {
        /* A new key: the one before is settled, and the table may end. */
        if ((rc = kv_dropper_end(&g->drop)) != KV_OK)
            return rc;
        if (g->building && g->b.bytes >= r->db->o.target_file_size) {
            struct kv_table *t;
            g->building = 0;
            if ((rc = kv_builder_finish(&g->b, &t)) != KV_OK)
                return rc;
            if ((rc = keep_written(r, t)) != KV_OK)
                return rc;
        }
        g->hash = kv_hash_key(s->key, s->klen, r->db->seed);
    }
    g->s = s;
    g->target = target;
    g->blob = ref.number;
    return kv_dropper_add(&g->drop, s->key, s->klen, s->seq, s->kind, s->val, s->vlen);
}

/* The range tombstones of the n readers together (*out NULL: none). */
static int merge_ranges(struct repair *r, kv_sst_reader **rd, size_t n, kv_rtset **out)
{
    *out = NULL;
    kv_rtset **sets = calloc(n ? n : 1, sizeof *sets);
    if (!sets)
        return KV_ENOMEM;
    int rc = KV_OK;
    size_t k = 0;
    for (size_t i = 0; rc == KV_OK && i < n; i++) {
        const uint8_t *b;
        size_t len;
        kv_sst_reader_range_tombstones(rd[i], &b, &len);
        if (len && (rc = kv_rtset_decode(r->db->cmp, b, len, &sets[k])) == KV_OK && sets[k])
            k++;
    }
    if (rc == KV_OK && k)
        rc = kv_rtset_union(r->db->cmp, (const kv_rtset *const *)sets, k, NULL, 0, NULL, NULL, out);
    for (size_t i = 0; i < k; i++)
        kv_rtset_unref(sets[i]);
    free(sets);
    return rc;
}

/* Opens a reader on each of the n tables of r->t (rd[i]) and adds it to
 * the merge. */
static int open_inputs(struct repair *r, size_t n, kv_sst_reader **rd, struct kv_merge *mg)
{
    for (size_t i = 0; i < n; i++) {
        char *p = kv_dbfile_path(r->path, r->t[i].meta.number, "sst");
        int rc = p ? kv_sst_reader_open_cmp(p, NULL, r->db->files, r->t[i].meta.number, 0,
                                            r->db->tcmp, &rd[i])
                   : KV_ENOMEM;
        free(p);
        if (rc != KV_OK)
            return rc;
        kv_merge_add_reader(mg, rd[i]);
    }
    return KV_OK;
}

/* Merges every table of r->t into new tables of one level (disjoint
 * ranges, about target_file_size each) through the merging iterator
 * (merge.h): the newest entry of each user key, unless it is a tombstone
 * (the merge holds every table, so nothing older lies below it, and no
 * snapshot exists). An entry whose value lies in no readable blob record
 * is passed over (pass_over). Blob references are copied as they are
 * (kind KV_SST_KIND_BLOB), each counted on its record, and give the new
 * tables their blob ranges. The inputs stay in r->t, marked merged; the
 * outputs are appended. */
static int merge_tables(struct repair *r, size_t *nin)
{
    size_t n = *nin = r->nt;
    uint64_t bytes = 0, entries = 0;
    for (size_t i = 0; i < n; i++) {
        bytes += r->t[i].meta.file_size;
        entries += r->t[i].meta.entries;
    }
    /* Every entry under the horizon; no merge operator, filter or ttl. */
    struct rmerge g = {.r = r,
                       .drop = {.horizon = UINT64_MAX - 1,
                                .emit = merge_emit,
                                .below = merge_below}};
    g.drop.ctx = &g;
    kv_rtset *rt = NULL;
    g.level = merge_level(r->db, bytes);
    g.bits = kv_filter_bits(r->db, r->db->current, (int)g.level, entries, NULL, 0);
    /* The references are counted anew: the merge's outputs are what the
     * manifest will name. */
    for (size_t i = 0; i < r->nb; i++)
        for (size_t j = 0; j < r->b[i].nrec; j++)
            r->b[i].rec[j].refs = 0;
    unsigned long long mark = kv_error_mark();
    struct kv_merge mg;
    struct kv_merge_source *s;
    kv_sst_reader **rd = calloc(n ? n : 1, sizeof *rd);
    int rc = kv_merge_init(&mg, r->db->cmp, r->db->tcmp, n);
    if (rc == KV_OK && !rd)
        rc = KV_ENOMEM;
    if (rc == KV_OK && (rc = open_inputs(r, n, rd, &mg)) == KV_OK &&
        (rc = merge_ranges(r, rd, n, &rt)) == KV_OK)
        rc = kv_merge_first(&mg);
    g.drop.rt = rt;
    while (rc == KV_OK && (s = kv_merge_top(&mg)) != NULL)
        if ((rc = merge_entry(r, &g, s)) == KV_OK)
            rc = kv_merge_step(&mg);
    if (rc == KV_OK)
        rc = kv_dropper_end(&g.drop);
    if (rc == KV_OK && g.building) {
        struct kv_table *t;
        g.building = 0;
        if ((rc = kv_builder_finish(&g.b, &t)) == KV_OK)
            rc = keep_written(r, t);
    }
    if (g.building)
        kv_builder_abandon(&g.b);
    kv_merge_free(&mg);
    for (size_t i = 0; rd && i < n; i++)
        kv_sst_reader_close(rd[i]);
    free(rd);
    kv_dropper_free(&g.drop);
    kv_rtset_unref(rt);
    free(g.ikey);
    free(g.lost.key);
    if (rc == KV_ENOMEM)
        return kv_error_set(rc, "%s: kv_repair: out of memory", r->path);
    if (rc == KV_ECORRUPT && !kv_error_since(mark)) /* a key that no longer decodes */
        return kv_error_set(rc, "%s: a table changed while kv_repair read it", r->path);
    return rc;
}

/* Step 6: the tables (nread of them read, the rest from the logs) stay as
 * they are, or are merged (merge_tables; *nin: how many went in). Entries
 * whose values are lost must go, and a record two entries refer to must
 * end with one (each record has one reference, or garbage counts go
 * wrong): both take a merge, as do filters of `mixed` seeds. */
static int layout(struct repair *r, size_t nread, int mixed, size_t *nin)
{
    if (r->nt > 1)
        qsort(r->t, r->nt, sizeof *r->t, cmp_found);
    *nin = 0;
    if (!mixed && !r->lost_refs && !r->dup_refs && keep_as_is(r)) {
        r->rep->tables_kept = nread;
        if (r->nt)
            note(r, "all %zu tables go to level 0 as they are", r->nt);
        return KV_OK;
    }
    r->rep->rewritten = 1;
    r->rep->tables_merged = nread;
    const char *why = mixed          ? "their filters' seeds differ"
                      : r->lost_refs ? "entries whose values are lost must be dropped"
                      : r->dup_refs  ? "entries of two tables refer to the same blob record"
                                     : "their key and sequence ranges interleave";
    note(r, "%zu tables merged into new ones (a Get could not walk them as they are: %s)", r->nt,
         why);
    int rc = merge_tables(r, nin);
    if (rc == KV_OK && r->rep->values_lost)
        note(r,
             "%llu entries dropped: their values were in blob files that are missing or "
             "damaged",
             (unsigned long long)r->rep->values_lost);
    return rc;
}

/* ---- 7. the manifest ------------------------------------------------------------- */

/* The blob files the new manifest names: each readable one that a kept
 * entry refers to, with its garbage (the records no kept entry refers
 * to) in *put (*nput of them; the caller frees it). Those no kept entry
 * refers to are all garbage, which the store never names: they go to
 * lost/ (they may hold the values of a table that went there). */
static int blob_records(struct repair *r, kv_manifest_blob **put, size_t *nput)
{
    *put = NULL;
    *nput = 0;
    if (r->nb && !(*put = calloc(r->nb, sizeof **put)))
        return kv_error_set(KV_ENOMEM, "%s: kv_repair: out of memory", r->path);
    for (size_t i = 0; i < r->nb; i++) {
        const struct blob *b = &r->b[i];
        uint64_t used = 0, used_bytes = 0;
        for (size_t j = 0; j < b->nrec; j++)
            if (b->rec[j].refs) {
                used++;
                used_bytes += kv_blob_record_size(b->rec[j].klen, b->rec[j].vlen);
            }
        char name[32];
        snprintf(name, sizeof name, "%06llu.blob", (unsigned long long)b->number);
        if (!used) {
            int rc = move_to_lost(r, name);
            if (rc != KV_OK)
                return rc;
            r->rep->blobs_unused++;
            note(r, "%s: moved to %s/: no entry of the repaired tables refers to it", name,
                 KV_LOST_DIR);
            continue;
        }
        /* The scan found the records exactly the footer's, so their
         * sizes add up to record_bytes; a partial file's sound records
         * are at most the footer's count, and records inside a value
         * (forged) could add up to more bytes: garbage is then 0. */
        if (used_bytes > b->info.record_bytes)
            used_bytes = b->info.record_bytes;
        (*put)[(*nput)++] = (kv_manifest_blob){.number = b->number,
                                               .file_size = b->info.file_size,
                                               .records = b->info.records,
                                               .record_bytes = b->info.record_bytes,
                                               .garbage_records = b->info.records - used,
                                               .garbage_bytes = b->info.record_bytes - used_bytes};
        r->rep->blobs_kept++;
        note(r, "%s: kept, %llu of its %llu records referred to (%llu bytes of %llu)", name,
             (unsigned long long)used, (unsigned long long)b->info.records,
             (unsigned long long)used_bytes, (unsigned long long)b->info.record_bytes);
    }
    return KV_OK;
}

/* Writes the repaired manifest into <path>/repair.tmp/MANIFEST: the state,
 * the tables and the blob files, in one LMDB transaction, which LMDB syncs
 * before it returns, then the name of the key order (the options'
 * comparator: the caller vouches that it is the one the tables were
 * written in). This is the one place kv_repair makes a manifest. The
 * secret of keyed filters is not carried over: no table holds it, and
 * tables whose filters need it are merged under new filters
 * (filter_fits). */
static int write_manifest(struct repair *r, const kv_manifest_state *st,
                          const kv_table_meta *tables, size_t n, const kv_manifest_blob *blobs,
                          size_t nblobs)
{
    char *dir = kv_dbfile_join(r->path, KV_REPAIR_DIR);
    if (!dir)
        return kv_error_set(KV_ENOMEM, "%s: out of memory", r->path);
    /* The tables repair wrote were renamed in without a directory sync
     * (kv_builder_start): one sync makes their names durable first. */
    int rc = kv_file_sync_dir(r->path);
    if (rc == KV_OK && mkdir(dir, 0755) != 0)
        rc = kv_error_errno(errno, "%s: mkdir", dir);
    kv_manifest *m = NULL;
    if (rc == KV_OK)
        rc = kv_manifest_open(dir, 1, st, &m);
    if (rc == KV_OK)
        rc = kv_manifest_apply_blobs(m, st, NULL, 0, tables, n, blobs, nblobs, NULL, 0);
    if (rc == KV_OK)
        rc = kv_manifest_set_comparator(m, r->db->cmp ? r->db->cmp->name : KV_BYTEWISE_NAME);
    /* Range tombstones, operands or timed entries in the tables, or a merge
     * operator or ttl in the options: the features record (format version
     * 2), as kv_open writes it. The old manifest's record is not read (it
     * may be damaged): the options' merge operator names the database. */
    const kv_merge_operator *mo = r->db->o.merge_operator;
    const char *name = mo && mo->name ? mo->name : "";
    if (rc == KV_OK && (r->features || name[0] || r->db->o.ttl_seconds)) {
        kv_manifest_features f = {.ttl_seconds = r->db->o.ttl_seconds};
        snprintf(f.merge_name, sizeof f.merge_name, "%s", name);
        rc = kv_manifest_put_features(m, &f, KV_FORMAT_VERSION_FEATURES);
    }
    kv_manifest_close(m);
    free(dir);
    return rc;
}

/* Puts the manifest built aside in place: an old MANIFEST (whatever it
 * is) goes to lost/, LMDB's old lock file goes, and the new file is
 * renamed in (kv_file_rename syncs the directory). */
static int install_manifest(struct repair *r)
{
    size_t cap = strlen(r->path) + 64;
    char *from = malloc(cap), *to = malloc(cap), *lock = malloc(cap);
    int rc = KV_OK;
    if (!from || !to || !lock) {
        rc = kv_error_set(KV_ENOMEM, "%s: out of memory", r->path);
        goto out;
    }
    snprintf(from, cap, "%s/%s/%s", r->path, KV_REPAIR_DIR, KV_MANIFEST_FILE);
    snprintf(to, cap, "%s/%s", r->path, KV_MANIFEST_FILE);
    snprintf(lock, cap, "%s/%s-lock", r->path, KV_MANIFEST_FILE);
    struct stat st;
    int e = kv_dbfile_exists(to, &st);
    if (e < 0) {
        rc = e;
        goto out;
    }
    if (e == 1) {
        if ((rc = move_to_lost(r, KV_MANIFEST_FILE)) != KV_OK)
            goto out;
        note(r, "%s: the old manifest, moved to %s/", KV_MANIFEST_FILE, KV_LOST_DIR);
    }
    /* LMDB's lock file holds no data; a stale one would be reset anyway. */
    if ((e = kv_dbfile_exists(lock, &st)) == 1 && S_ISREG(st.st_mode) && unlink(lock) != 0)
        e = kv_error_errno(errno, "%s: unlink", lock);
    if (e < 0) {
        rc = e;
        goto out;
    }
    if ((rc = kv_file_rename(from, to)) != KV_OK)
        goto out;
    rc = kv_dbfile_clear_repair_dir(r->path);
out:
    free(from);
    free(to);
    free(lock);
    return rc;
}

/* ---- kv_repair ---------------------------------------------------------------------- */

/* A MANIFEST that still opens and names its key order must name ours:
 * tables read in another order would look damaged and go to lost/ one and
 * all. KV_EINVAL with both names; KV_OK when the names agree, and when the
 * manifest is missing, damaged or older than the record (repair cannot
 * tell then, and trusts the options). */
static int check_old_order(struct repair *r)
{
    kv_manifest *m = NULL;
    if (kv_manifest_open(r->path, 0, NULL, &m) != KV_OK)
        return KV_OK; /* its error text stays, unused: kv_repair returns none of it */
    char name[KV_MANIFEST_NAME_MAX + 1];
    int rc = kv_manifest_get_comparator(m, name);
    kv_manifest_close(m);
    if (rc != KV_OK)
        return KV_OK;
    const char *ours = r->db->cmp ? r->db->cmp->name : KV_BYTEWISE_NAME;
    if (strcmp(name, ours) != 0)
        return kv_error_set(KV_EINVAL, "%s: kv_repair: the database orders keys by comparator "
                            "\"%s\"; the options give \"%s\"", r->path, name, ours);
    return KV_OK;
}

static int repair_run(struct repair *r, const kv_options *o)
{
    struct stat st;
    if (stat(r->path, &st) != 0)
        return kv_error_errno(errno, "%s: stat", r->path);
    if (!S_ISDIR(st.st_mode))
        return kv_error_set(KV_EINVAL, "%s: not a directory", r->path);
    int rc = kv_db_bare(r->path, o, &r->db);
    if (rc != KV_OK)
        return rc;
    kv_db *db = r->db;
    db->next_file = 1;
    if (!(db->current = kv_version_edit(NULL, NULL, 0, NULL, 0, r->db->cmp)))
        return kv_error_set(KV_ENOMEM, "%s: out of memory", r->path);
    if ((rc = check_old_order(r)) != KV_OK || (rc = kv_dbfile_clear_repair_dir(r->path)) != KV_OK)
        return rc;

    /* 1, 2, 3: the directory, its blob files and its tables (whose
     * references are matched with the blob files' records). */
    uint64_t *numbers, *bnumbers;
    size_t nnumbers, nbnumbers;
    rc = list_dir(r, &numbers, &nnumbers, &bnumbers, &nbnumbers);
    if (rc == KV_OK)
        rc = read_blobs(r, bnumbers, nbnumbers);
    if (rc == KV_OK)
        rc = read_tables(r, numbers, nnumbers);
    r->rep->tables_found = nnumbers;
    r->rep->blobs_found = nbnumbers;
    r->rep->logs_found = r->nlogs;
    free(numbers);
    free(bnumbers);
    if (rc != KV_OK)
        return rc;
    size_t nread = r->nt;

    /* 4, 5: the seed, then the logs (their tables get it). */
    int mixed;
    db->seed = choose_seed(r, &mixed);
    if (mixed)
        note(r, "the tables' filters were built with different seeds (or hash other bytes): "
             "they are merged, with new filters");
    size_t nreplayed;
    if ((rc = replay_logs(r, &nreplayed)) != KV_OK)
        return rc;

    /* 6: as they are, or merged. */
    size_t nin = 0;
    if ((rc = layout(r, nread, mixed, &nin)) != KV_OK)
        return rc;

    /* 7: the blob files' garbage, then the manifest, built aside and
     * renamed into place. */
    kv_manifest_blob *put;
    size_t nput;
    if ((rc = blob_records(r, &put, &nput)) != KV_OK) {
        free(put);
        return rc;
    }
    /* log_number above every log: none is live, kv_open replays none. */
    kv_manifest_state ms = {.format_version = KV_FORMAT_VERSION, .next_file = db->next_file,
                            .last_seq = r->last_seq, .log_number = db->next_file,
                            .seed = db->seed};
    size_t nlive = r->nt - nin;
    kv_table_meta *live = nlive ? malloc(nlive * sizeof *live) : NULL;
    if (nlive && !live) {
        free(put);
        return kv_error_set(KV_ENOMEM, "%s: out of memory", r->path);
    }
    for (size_t i = nin; i < r->nt; i++)
        live[i - nin] = r->t[i].meta;
    rc = write_manifest(r, &ms, live, nlive, put, nput);
    free(live);
    free(put);
    if (rc == KV_OK)
        rc = install_manifest(r);
    if (rc != KV_OK)
        return rc;
    r->rep->last_seq = ms.last_seq;
    r->rep->next_file = ms.next_file;
    note(r, "new manifest: %zu tables, %zu blob files, last sequence %llu, next file %llu", nlive,
         nput, (unsigned long long)ms.last_seq, (unsigned long long)ms.next_file);

    /* Now that the manifest is in: the replayed logs and the merged tables
     * hold nothing it needs (best effort: kv_open deletes what is left). */
    for (size_t i = 0; i < nreplayed; i++) {
        char *p = kv_dbfile_path(r->path, r->logs[i], "log");
        if (p)
            unlink(p);
        free(p);
    }
    for (size_t i = 0; i < nin; i++) {
        char *p = kv_dbfile_path(r->path, r->t[i].meta.number, "sst");
        if (p)
            unlink(p);
        free(p);
    }
    return KV_OK;
}

int kv_repair_ex(const char *path, const kv_options *opts, kv_repair_report *report)
{
    unsigned long long mark = kv_error_mark();
    kv_repair_report own;
    kv_repair_report *rep = report ? report : &own;
    memset(rep, 0, sizeof *rep);
    kv_options o;
    int rc = kv_db_options(path, "kv_repair", opts, &o);
    if (rc != KV_OK)
        return rc;
    struct repair r = {.path = path, .rep = rep};
    rc = repair_run(&r, &o);
    for (size_t i = 0; i < r.nt; i++)
        found_free(&r.t[i]);
    free(r.t);
    for (size_t i = 0; i < r.nb; i++) {
        free(r.b[i].rec);
        free(r.b[i].idx);
        kv_blob_reader_close(r.b[i].rd);
    }
    free(r.scratch);
    free(r.b);
    free(r.logs);
    kv_db_free(r.db);
    if (!report)
        kv_repair_free(&own);
    if (rc != KV_OK && !kv_error_since(mark))
        kv_error_set(rc, "%s: kv_repair: %s", path, kv_strerror(rc));
    return rc;
}

int kv_repair(const char *path, const kv_options *opts)
{
    return kv_repair_ex(path, opts, NULL);
}

void kv_repair_free(kv_repair_report *report)
{
    if (!report)
        return;
    free(report->text);
    memset(report, 0, sizeof *report);
}
