/* kvtool - look inside a kv database or one SSTable, check it, and edit it
 * from the shell: kv's counterpart of LevelDB's and RocksDB's sst_dump and
 * ldb.
 *
 *   kvtool sst dump|props|verify FILE ...
 *   kvtool blob dump|verify FILE ...
 *   kvtool db explain|info|verify|get|put|delete|scan|stats|property|size|compact|repair|destroy DIR ...
 *
 * `kvtool --help` lists the commands; `kvtool <group> <command> --help`
 * describes one. Keys and values print escaped (printable ASCII as is; '\',
 * '"' and every other byte as \xNN) or, with --hex, as 0x-prefixed hex, so
 * binary data never garbles a terminal; keys given on the command line take
 * the same forms, so any key round-trips. Exit status: 0 success; 1 the
 * command failed (a line on stderr says why: a missing key, a problem found
 * by verify, an error from kv); 2 bad usage.
 *
 * Built on the public headers only: the store through kv.h (kv_explain_get
 * and kv_inspect exist for this tool), tables through sstable.h (the
 * store's internal keys through kv_sst_store_key_decode/_encode, a table's
 * filter through kv_sst_reader_filter_info), blob files and the references
 * tables keep to them through sstable.h's "blob files" (kv_blob_ref_decode,
 * kv_blob_reader_open, kv_blob_scan, kv_blob_read), filters through
 * bloom.h. It decodes no file format itself; it knows only the sizes of a
 * blob file's header and footer (BLOB_HEADER, BLOB_FOOTER), to say where a
 * reference may point in a file it cannot open.
 *
 * `db info` and `db verify` never open the database: kv_open recovers (it
 * replays the logs into a new table and deletes files the manifest does not
 * name), which would change what is inspected and destroy the evidence of
 * a crash. They use kv_inspect instead, which reads the manifest and lists
 * the directory under the database's lock, and read each table file
 * directly. The other db commands open the database with kv_open. */
#define _POSIX_C_SOURCE 200809L
#include <kv/kv.h>
#include <kv/sstable.h>

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define EXIT_FAIL 1
#define EXIT_USAGE 2

/* Levels of a database (kv_stats.level_tables has one slot per level). */
#define LEVELS 7
/* Bytes of the block cache for reading one table or every table of a database. */
#define CACHE_BYTES ((size_t)32 << 20)
/* A blob file's header and footer (doc/blob_format.md): its records lie in
 * [BLOB_HEADER, file size - BLOB_FOOTER). */
#define BLOB_HEADER 32
#define BLOB_FOOTER 32
/* Bad blob references of one table printed by db verify; the rest are counted. */
#define REF_PROBLEMS_SHOWN 5

#define PLURAL(n) ((n) == 1 ? "" : "s")

/* --hex: print keys and values as hex, and read them as hex. */
static int hex_mode;

/* ---- messages ------------------------------------------------------------------------ */

/* The command being run ("sst dump"), for messages. */
static char cmd_name[64] = "";

static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "kvtool: %s%s", cmd_name, cmd_name[0] ? ": " : "");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return EXIT_FAIL;
}

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

/* The name of a kv_status code, as status.h spells it. */
static const char *code_name(int rc)
{
    switch (rc) {
    case KV_OK: return "KV_OK";
    case KV_NOTFOUND: return "KV_NOTFOUND";
    case KV_EINVAL: return "KV_EINVAL";
    case KV_ENOMEM: return "KV_ENOMEM";
    case KV_ECORRUPT: return "KV_ECORRUPT";
    case KV_EIO: return "KV_EIO";
    case KV_EBUSY: return "KV_EBUSY";
    case KV_ENOSPC: return "KV_ENOSPC";
    case KV_EPERM: return "KV_EPERM";
    }
    return "KV_E?";
}

/* A call of kv failed with rc: one line naming what it was about (a
 * directory or file), the code, and kv's text for it (kv_error_text: the
 * file at fault and why), e.g.
 *   kvtool: db get: /d: KV_EIO (I/O error): /d/LOCK: open: Is a directory */
static int kv_fail(const char *what, int rc)
{
    const char *text = kv_error_text();
    if (!text[0])
        return fail("%s: %s (%s)", what, code_name(rc), kv_strerror(rc));
    return fail("%s: %s (%s): %s", what, code_name(rc), kv_strerror(rc), text);
}

/* ---- bytes: printing and parsing ------------------------------------------------------ */

/* Bytewise, then shorter first: the order of keys in kv. */
static int key_cmp(const void *a, size_t alen, const void *b, size_t blen)
{
    size_t n = alen < blen ? alen : blen;
    int c = n ? memcmp(a, b, n) : 0;
    if (c)
        return c;
    return alen < blen ? -1 : alen > blen;
}

static int key_eq(const void *a, size_t alen, const void *b, size_t blen)
{
    return key_cmp(a, alen, b, blen) == 0;
}

/* Bytes as the user sees them: "escaped" in quotes, or 0x-hex. */
static void put_str(FILE *f, const void *p, size_t n)
{
    const uint8_t *b = p;
    if (hex_mode) {
        fputs("0x", f);
        for (size_t i = 0; i < n; i++)
            fprintf(f, "%02x", b[i]);
        return;
    }
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        if (b[i] >= 0x20 && b[i] < 0x7F && b[i] != '\\' && b[i] != '"')
            fputc(b[i], f);
        else
            fprintf(f, "\\x%02x", b[i]);
    }
    fputc('"', f);
}

/* The same without quotes (the value printed by `db get`). */
static void put_bare(FILE *f, const void *p, size_t n)
{
    const uint8_t *b = p;
    if (hex_mode) {
        put_str(f, p, n);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (b[i] >= 0x20 && b[i] < 0x7F && b[i] != '\\' && b[i] != '"')
            fputc(b[i], f);
        else
            fprintf(f, "\\x%02x", b[i]);
    }
}

static int hex_digit(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* A key or value from the command line: with --hex, hex digits (0x
 * optional); else the text with \xNN and \\ escapes. *out is malloc'd (at
 * least one byte). 0, or -1 with a message printed. */
static int parse_bytes(const char *what, const char *s, uint8_t **out, size_t *len)
{
    size_t n = strlen(s);
    uint8_t *b = malloc(n + 1);
    size_t m = 0;
    if (!b)
        return fail("out of memory"), -1;
    if (hex_mode) {
        if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
            s += 2;
        for (; *s; s += 2) {
            int hi = hex_digit(s[0]), lo = hi < 0 ? -1 : hex_digit(s[1]);
            if (hi < 0 || lo < 0) {
                free(b);
                return fail("%s: not hex (--hex wants pairs of hex digits, 0x optional)", what),
                       -1;
            }
            b[m++] = (uint8_t)(hi << 4 | lo);
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            if (s[i] != '\\') {
                b[m++] = (uint8_t)s[i];
                continue;
            }
            if (s[i + 1] == '\\') {
                b[m++] = '\\';
                i++;
            } else if (s[i + 1] == 'x' && hex_digit(s[i + 2]) >= 0 && hex_digit(s[i + 3]) >= 0) {
                b[m++] = (uint8_t)(hex_digit(s[i + 2]) << 4 | hex_digit(s[i + 3]));
                i += 3;
            } else {
                free(b);
                return fail("%s: bad escape at byte %zu (use \\xNN or \\\\)", what, i), -1;
            }
        }
    }
    *out = b;
    *len = m;
    return 0;
}

static int parse_count(const char *what, const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-')
        return fail("%s: not a count: %s", what, s), -1;
    *out = v;
    return 0;
}

/* ---- the store's keys ---------------------------------------------------------------- */

/* A store table's key decoded (kv_sst_store_key_decode): the user key goes
 * to `user`, the caller's buffer, at least as long as the stored key. */
struct ikey {
    uint8_t *user;
    kv_sst_store_key k;
};

/* 1 when k (n bytes) is a store key, decoded into *out; else 0. */
static int ikey_decode(const uint8_t *k, size_t n, struct ikey *out)
{
    return kv_sst_store_key_decode(k, n, out->user, n, &out->k) == KV_OK;
}

/* ---- one table ---------------------------------------------------------------------- */

struct table {
    const char *path;
    kv_sst_reader *r;
    kv_sst_properties p;
    int store; /* its keys are the store's internal keys */
};

/* The one-line reason a table call failed: the reader's own message (file
 * and offset) for damage and I/O errors. */
/* snprintf that may cut the text short to fit: a long path in a message
 * buffer is fine cut. */
static void fit(char *buf, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, n, fmt, ap);
    va_end(ap);
}

static void table_error(char *buf, size_t n, const char *path, int rc)
{
    /* Table calls explain every error from the file (status.h). */
    if (rc == KV_NOTFOUND)
        fit(buf, n, "%s: no such file", path);
    else if (rc == KV_EINVAL || rc == KV_ENOMEM || !kv_sst_error_text()[0])
        fit(buf, n, "%s: %s (%s)", path, code_name(rc), kv_strerror(rc));
    else
        fit(buf, n, "%s: %s (%s): %s", path, code_name(rc), kv_strerror(rc),
            kv_sst_error_text());
}

static int table_open(const char *path, kv_sst_cache *cache, uint64_t id, struct table *t,
                      char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    t->path = path;
    int rc = kv_sst_reader_open(path, cache, id, &t->r);
    if (rc != KV_OK) {
        table_error(err, errlen, path, rc);
        return rc;
    }
    kv_sst_reader_properties(t->r, &t->p);
    /* The store writes caller-hashed filters, and notes starting "kv: ";
     * a table without a filter is known by its note alone. */
    t->store = t->p.filter_hash == KV_SST_FILTER_HASH_CALLER ||
               t->p.filter_hash == KV_SST_FILTER_HASH_KEYED ||
               strncmp(t->p.note, "kv: ", 4) == 0;
    return KV_OK;
}

static void table_close(struct table *t)
{
    kv_sst_reader_close(t->r);
    t->r = NULL;
}

static const char *layout_name(int layout)
{
    return layout == KV_BLOOM_BLOCKED ? "blocked" : layout == KV_BLOOM_CLASSIC ? "classic" : "?";
}

/* A table's key as dump shows it: for a store table, user key, sequence
 * and kind; else the key itself. */
static void put_table_key(FILE *f, const struct table *t, const uint8_t *k, size_t klen,
                          struct ikey *ik)
{
    if (t->store && ikey_decode(k, klen, ik)) {
        put_str(f, ik->user, ik->k.user_len);
        fprintf(f, " seq %" PRIu64 " %s", ik->k.sequence,
                ik->k.kind == KV_SST_KIND_PUT      ? "put"
                : ik->k.kind == KV_SST_KIND_DELETE ? "delete"
                : ik->k.kind == KV_SST_KIND_BLOB   ? "blob"
                                                   : "kind?");
        if (ik->k.kind != KV_SST_KIND_DELETE && ik->k.kind != KV_SST_KIND_PUT &&
            ik->k.kind != KV_SST_KIND_BLOB)
            fprintf(f, "%d", ik->k.kind);
    } else {
        put_str(f, k, klen);
        if (t->store)
            fputs(" (not a store key)", f);
    }
}

/* The value of a blob entry as dump shows it: the reference decoded,
 * "000007.blob offset 32 size 600", or the bytes when it does not decode. */
static void put_blob_ref(FILE *f, const uint8_t *v, size_t vlen)
{
    kv_blob_ref ref;
    if (kv_blob_ref_decode(v, vlen, &ref) == KV_OK) {
        fprintf(f, "%06" PRIu64 ".blob offset %" PRIu64 " size %" PRIu64, ref.number, ref.offset,
                ref.size);
        return;
    }
    fputs("(not a blob reference) ", f);
    put_str(f, v, vlen);
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
    uint8_t *buf;    /* a value read back */
    size_t cap;
    uint64_t values; /* values read back through their references */
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
static void blob_ref_check(struct blob_set *bs, const char *path, uint64_t e,
                           const uint8_t *ukey, size_t ulen, const kv_blob_ref *ref)
{
    struct vblob *b = blob_find(bs, ref->number);
    if (!b) {
        ref_problem(bs, NULL, "%s: entry %" PRIu64 " refers to blob file %06" PRIu64
                    ".blob, which the manifest does not name", path, e, ref->number);
        return;
    }
    uint64_t rec = kv_blob_record_size(ulen, ref->size);
    uint64_t end = b->m->file_size > BLOB_FOOTER ? b->m->file_size - BLOB_FOOTER : 0;
    if (ref->offset < BLOB_HEADER || ref->offset > end || rec > end - ref->offset) {
        ref_problem(bs, b, "%s: entry %" PRIu64 " refers to a record of %" PRIu64 " bytes at "
                    "offset %" PRIu64 " of %06" PRIu64 ".blob, outside its records [%d, %" PRIu64
                    ")", path, e, rec, ref->offset, ref->number, BLOB_HEADER, end);
        return;
    }
    b->refs++;
    b->ref_bytes += rec;
    if (!b->r)
        return;
    if (ref->size > bs->cap) {
        uint8_t *nb = realloc(bs->buf, (size_t)ref->size);
        if (!nb) {
            ref_problem(bs, b, "%s: entry %" PRIu64 ": out of memory for its value of %" PRIu64
                        " bytes", path, e, ref->size);
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

/* What check_table learnt. */
struct table_check {
    uint64_t entries;
    uint64_t filter_keys;  /* distinct consecutive filter hashes */
    uint64_t lookups;      /* keys looked up through the filter */
    int filter_checked;    /* the filter's hashes could be recomputed */
    uint8_t *first, *last; /* user keys (store) or keys */
    size_t first_len, last_len;
    uint64_t min_seq, max_seq;
    uint64_t blob_refs;    /* entries of kind KV_SST_KIND_BLOB */
};

static void check_free(struct table_check *c)
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

/* Checks one open table: every block (checksum, decoding, order) through
 * kv_sst_verify and a walk; every key strictly above the one before; for a
 * store table every key well formed, of a known kind, and every blob
 * entry's value a reference that decodes; every key found again by a point
 * lookup, and the filter answering "maybe" for it (no false negative);
 * the properties against what the walk saw. 0, or -1 with the problem in
 * err (one line, naming the file). With bs (db verify), every reference
 * is also checked against the database's blob files (blob_ref_check),
 * whose problems are reported apart and do not stop the walk. */
static int check_table(struct table *t, struct table_check *c, struct blob_set *bs, char *err,
                       size_t n)
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
    /* The filter's hashes can be recomputed for whole-key filters, and for
     * the store's (the hash of the user key with the seed in filter_seed);
     * not for keyed filters, whose secret no table holds. */
    int has_filter = t->p.filter_bits > 0;
    c->filter_checked = has_filter && (t->p.filter_hash == KV_SST_FILTER_HASH_KEY ||
                                       (t->p.filter_hash == KV_SST_FILTER_HASH_CALLER && t->store));
    uint8_t *prev = NULL, *ubuf = NULL;
    size_t prev_len = 0, ucap = 0;
    uint64_t prev_hash = 0, raw_k = 0, raw_v = 0;
    int bad = 0;
    for (kv_sst_iter_seek_first(it); !bad && kv_sst_iter_valid(it); kv_sst_iter_next(it)) {
        size_t klen, vlen;
        const uint8_t *k = kv_sst_iter_key(it, &klen);
        const uint8_t *v = kv_sst_iter_value(it, &vlen);
        uint64_t e = c->entries++;
        raw_k += klen;
        raw_v += vlen;
        if (e > 0 && key_cmp(prev, prev_len, k, klen) >= 0) {
            snprintf(err, n, "%s: entry %" PRIu64 ": key not above the one before", t->path, e);
            bad = 1;
            break;
        }
        uint8_t *bigger = klen > ucap || !ubuf ? realloc(ubuf, klen ? klen : 1) : ubuf;
        if (keep(&prev, &prev_len, k, klen) != 0 || !bigger) {
            snprintf(err, n, "%s: out of memory", t->path);
            bad = 1;
            break;
        }
        ubuf = bigger;
        if (klen > ucap)
            ucap = klen;
        const uint8_t *ukey = k;
        size_t ulen = klen, plen = klen;
        if (t->store) {
            struct ikey ik = {.user = ubuf};
            if (!ikey_decode(k, klen, &ik)) {
                snprintf(err, n, "%s: entry %" PRIu64 ": not a store key (user key, 0x00 0x01, "
                         "8-byte trailer)", t->path, e);
                bad = 1;
                break;
            }
            if (ik.k.kind != KV_SST_KIND_DELETE && ik.k.kind != KV_SST_KIND_PUT &&
                ik.k.kind != KV_SST_KIND_BLOB) {
                snprintf(err, n, "%s: entry %" PRIu64 ": unknown kind %d", t->path, e, ik.k.kind);
                bad = 1;
                break;
            }
            if (ik.k.kind == KV_SST_KIND_BLOB) {
                kv_blob_ref ref;
                if (kv_blob_ref_decode(v, vlen, &ref) != KV_OK) {
                    snprintf(err, n, "%s: entry %" PRIu64 ": a blob entry whose value is not a "
                             "blob reference (%zu bytes)", t->path, e, vlen);
                    bad = 1;
                    break;
                }
                c->blob_refs++;
                if (bs)
                    blob_ref_check(bs, t->path, e, ik.user, ik.k.user_len, &ref);
            }
            if (ik.k.kind == KV_SST_KIND_DELETE && vlen) {
                snprintf(err, n, "%s: entry %" PRIu64 ": a tombstone with a value", t->path, e);
                bad = 1;
                break;
            }
            ukey = ik.user;
            ulen = ik.k.user_len;
            plen = ik.k.prefix_len;
            if (ik.k.sequence < c->min_seq)
                c->min_seq = ik.k.sequence;
            if (ik.k.sequence > c->max_seq)
                c->max_seq = ik.k.sequence;
        }
        if ((e == 0 && keep(&c->first, &c->first_len, ukey, ulen) != 0) ||
            keep(&c->last, &c->last_len, ukey, ulen) != 0) {
            snprintf(err, n, "%s: out of memory", t->path);
            bad = 1;
            break;
        }
        /* The filter hash of this entry, counted once per run of equal
         * hashes as the writer adds them. */
        uint64_t h = kv_sst_filter_hash(t->r, ukey, ulen);
        if (e == 0 || h != prev_hash)
            c->filter_keys++;
        prev_hash = h;
        /* A point lookup of this very entry: the filter must say "maybe",
         * and the entry must come back. */
        kv_sst_probe pr;
        void *got = NULL;
        size_t glen = 0;
        rc = kv_sst_seek_prefixed(t->r, k, klen, plen, c->filter_checked ? h : 0, &pr, &got, &glen,
                                  NULL, 0, NULL);
        if (c->filter_checked)
            c->lookups++;
        if (c->filter_checked && pr.filter_negative) {
            snprintf(err, n, "%s: entry %" PRIu64 ": the filter says absent for a key the table "
                     "holds (false negative)", t->path, e);
            bad = 1;
        } else if (rc == KV_OK && (glen != vlen || (vlen && memcmp(got, v, vlen) != 0))) {
            snprintf(err, n, "%s: entry %" PRIu64 ": a point lookup returns another value",
                     t->path, e);
            bad = 1;
        } else if (rc != KV_OK && (!has_filter || c->filter_checked)) {
            /* (With a filter of unknown hashes the lookup's filter answer
             * means nothing: only the walk counts.) */
            if (rc == KV_NOTFOUND)
                snprintf(err, n, "%s: entry %" PRIu64 ": a point lookup does not find it",
                         t->path, e);
            else
                table_error(err, n, t->path, rc);
            bad = 1;
        }
        kv_free(got);
    }
    if (!bad && (rc = kv_sst_iter_status(it)) != KV_OK) {
        table_error(err, n, t->path, rc);
        bad = 1;
    }
    kv_sst_iter_free(it);
    free(prev);
    free(ubuf);
    if (bad)
        return -1;

    /* The properties against the content. */
    const kv_sst_properties *p = &t->p;
    if (c->entries != p->entries || raw_k != p->raw_key_bytes || raw_v != p->raw_value_bytes) {
        snprintf(err, n, "%s: properties say %" PRIu64 " entries of %" PRIu64 "+%" PRIu64
                 " bytes, the blocks hold %" PRIu64 " of %" PRIu64 "+%" PRIu64, t->path,
                 p->entries, p->raw_key_bytes, p->raw_value_bytes, c->entries, raw_k, raw_v);
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
    if (has_filter && c->filter_checked && c->filter_keys != p->filter_keys) {
        snprintf(err, n, "%s: the filter holds %" PRIu64 " keys, the table %" PRIu64
                 " distinct ones", t->path, p->filter_keys, c->filter_keys);
        return -1;
    }
    if (!has_filter && (p->filter_keys || p->filter_k)) {
        snprintf(err, n, "%s: properties give filter parameters but there is no filter", t->path);
        return -1;
    }
    return 0;
}

/* ---- sst commands ------------------------------------------------------------------- */

/* Parsed command line. */
struct opts {
    int help, create;
    const char *from, *to, *limit, *number;
    const char *pos[3];
    int npos;
};

static int sst_dump(struct opts *o)
{
    char err[600];
    struct table t;
    if (table_open(o->pos[0], NULL, 1, &t, err, sizeof err) != KV_OK)
        return fail("%s", err);
    uint8_t *from = NULL, *to = NULL, *seek = NULL, *ubuf = NULL;
    size_t flen = 0, tlen = 0, slen = 0, ucap = 0;
    int status = EXIT_FAIL;
    kv_sst_iter *it = NULL;
    if ((o->from && parse_bytes("--from", o->from, &from, &flen) != 0) ||
        (o->to && parse_bytes("--to", o->to, &to, &tlen) != 0))
        goto out;
    int rc = kv_sst_iter_new(t.r, &it);
    if (rc != KV_OK) {
        fail("%s: %s (%s)", t.path, code_name(rc), kv_strerror(rc));
        goto out;
    }
    if (!from)
        kv_sst_iter_seek_first(it);
    else if (t.store) {
        /* Every stored key of a user key >= from sorts at or after from's
         * prefix, every smaller one before it. */
        size_t cap = KV_SST_STORE_KEY_MAX(flen);
        if (!(seek = malloc(cap))) {
            fail("out of memory");
            goto out;
        }
        if ((rc = kv_sst_store_key_encode(from, flen, 0, 0, 0, seek, cap, &slen)) != KV_OK) {
            fail("--from: a key of %zu bytes cannot be a store key: %s (%s)", flen,
                 code_name(rc), kv_strerror(rc));
            goto out;
        }
        kv_sst_iter_seek(it, seek, slen);
    } else
        kv_sst_iter_seek(it, from, flen);
    for (; kv_sst_iter_valid(it); kv_sst_iter_next(it)) {
        size_t klen, vlen;
        const uint8_t *k = kv_sst_iter_key(it, &klen);
        const uint8_t *v = kv_sst_iter_value(it, &vlen);
        if (klen > ucap) {
            uint8_t *nb = realloc(ubuf, klen);
            if (!nb) {
                fail("out of memory");
                goto out;
            }
            ubuf = nb;
            ucap = klen;
        }
        struct ikey ik = {.user = ubuf};
        int decoded = t.store && ikey_decode(k, klen, &ik);
        if (to && (decoded ? key_cmp(ik.user, ik.k.user_len, to, tlen)
                           : key_cmp(k, klen, to, tlen)) >= 0)
            break;
        put_table_key(stdout, &t, k, klen, &ik);
        if (decoded && ik.k.kind == KV_SST_KIND_BLOB) {
            fputs(" => ", stdout);
            put_blob_ref(stdout, v, vlen);
        } else if (!decoded || ik.k.kind != KV_SST_KIND_DELETE) {
            fputs(" => ", stdout);
            put_str(stdout, v, vlen);
        }
        fputc('\n', stdout);
    }
    if ((rc = kv_sst_iter_status(it)) != KV_OK) {
        char msg[600];
        table_error(msg, sizeof msg, t.path, rc);
        fflush(stdout);
        fail("%s", msg);
        goto out;
    }
    status = 0;
out:
    kv_sst_iter_free(it);
    table_close(&t);
    free(from);
    free(to);
    free(seek);
    free(ubuf);
    return status;
}

/* A stored key for props: decoded when it is a store key. */
static void put_prop_key(const struct table *t, const uint8_t *k, size_t klen)
{
    uint8_t *buf = malloc(klen ? klen : 1);
    struct ikey ik = {.user = buf};
    if (buf)
        put_table_key(stdout, t, k, klen, &ik);
    free(buf);
}

static int sst_props(struct opts *o)
{
    char err[600];
    struct table t;
    if (table_open(o->pos[0], NULL, 1, &t, err, sizeof err) != KV_OK)
        return fail("%s", err);
    const kv_sst_properties *p = &t.p;
    /* The filter as the reader holds it: open checked it (KV_NOTFOUND: none). */
    kv_bloom_info bi;
    int has_filter = kv_sst_reader_filter_info(t.r, &bi) == KV_OK;
    printf("%-18s %s\n", "file:", t.path);
    printf("%-18s %" PRIu64 "\n", "file size:", p->file_size);
    printf("%-18s %u\n", "format version:", (unsigned)p->format_version);
    printf("%-18s %s\n", "keys:",
           t.store ? "store (user key + sequence + kind)" : "plain");
    printf("%-18s %" PRIu64 "\n", "entries:", p->entries);
    printf("%-18s %" PRIu64 "\n", "raw key bytes:", p->raw_key_bytes);
    printf("%-18s %" PRIu64 "\n", "raw value bytes:", p->raw_value_bytes);
    printf("%-18s %" PRIu64 "\n", "data blocks:", p->data_blocks);
    printf("%-18s %" PRIu64 " raw, %" PRIu64 " stored\n", "data bytes:", p->data_raw_bytes,
           p->data_stored_bytes);
    printf("%-18s %s\n", "compression:",
           p->compression == KV_COMPRESSION_ZSTD ? "zstd" : p->compression ? "?" : "none");
    if (p->dict_bytes)
        printf("%-18s %zu bytes (zstd, trained on the table's blocks)\n", "dictionary:",
               p->dict_bytes);
    else
        printf("%-18s none\n", "dictionary:");
    printf("%-18s ", "smallest key:");
    put_prop_key(&t, p->smallest, p->smallest_len);
    printf("\n%-18s ", "largest key:");
    put_prop_key(&t, p->largest, p->largest_len);
    printf("\n%-18s ", "note:");
    put_str(stdout, p->note, strlen(p->note));
    fputc('\n', stdout);
    if (!has_filter) {
        printf("%-18s none\n", "filter:");
    } else {
        printf("%-18s %s\n", "filter:", layout_name(p->filter_layout));
        printf("  %-16s %" PRIu64 "\n", "m (bits):", bi.bits);
        printf("  %-16s %u\n", "k:", bi.k);
        printf("  %-16s %" PRIu64 "\n", "n (keys):", p->filter_keys);
        printf("  %-16s %.2f (setting %.2f)\n", "bits/key:",
               p->filter_keys ? (double)bi.bits / (double)p->filter_keys : 0.0,
               p->filter_bits_per_key);
        printf("  %-16s %.4f (%" PRIu64 " bits set)\n", "fill:", bi.fill, bi.bits_set);
        printf("  %-16s %.6f\n", "expected FPR:", p->filter_expected_fpr);
        printf("  %-16s %zu\n", "bytes:", p->filter_bytes);
        /* A keyed table records its secret's check value, never the secret. */
        printf("  %-16s 0x%016" PRIx64 "\n",
               p->filter_hash == KV_SST_FILTER_HASH_KEYED ? "secret check:" : "seed:",
               p->filter_seed);
        printf("  %-16s %s\n", "hashes:",
               p->filter_hash == KV_SST_FILTER_HASH_KEY      ? "XXH3-64 of each key"
               : p->filter_hash == KV_SST_FILTER_HASH_CALLER ? (t.store ? "XXH3-64 of each user key"
                                                                        : "given by the writer")
               : p->filter_hash == KV_SST_FILTER_HASH_KEYED
                   ? "SipHash-2-4 of each user key, under the database's secret (not in the table)"
                   : "?");
    }
    table_close(&t);
    return 0;
}

static int sst_verify(struct opts *o)
{
    char err[600];
    struct table t;
    kv_sst_cache *cache = NULL;
    int rc = kv_sst_cache_new(CACHE_BYTES, &cache);
    if (rc != KV_OK)
        return fail("a block cache of %zu bytes: %s (%s)", CACHE_BYTES, code_name(rc),
                    kv_strerror(rc));
    if (table_open(o->pos[0], cache, 1, &t, err, sizeof err) != KV_OK) {
        kv_sst_cache_free(cache);
        return fail("%s", err);
    }
    struct table_check c;
    int bad = check_table(&t, &c, NULL, err, sizeof err);
    if (!bad) {
        printf("%s: ok: %" PRIu64 " entries in %" PRIu64 " blocks, checksums good", t.path,
               c.entries, t.p.data_blocks);
        if (c.blob_refs)
            printf(", %" PRIu64 " blob reference%s that decode%s", c.blob_refs,
                   PLURAL(c.blob_refs), c.blob_refs == 1 ? "s" : "");
        if (c.filter_checked)
            printf(", the filter says maybe for all %" PRIu64 " keys", c.filter_keys);
        else
            printf(t.p.filter_bits ? ", filter not checked (its hashes are the writer's)"
                                   : ", no filter");
        fputc('\n', stdout);
    }
    check_free(&c);
    table_close(&t);
    kv_sst_cache_free(cache);
    return bad ? fail("%s", err) : 0;
}

/* ---- blob commands ---------------------------------------------------------------------- */

/* The number a blob file's header must hold: --number, else the <n> of
 * its name "<n>.blob" (as the store names them). 0, or -1 with a message. */
static int blob_number(const struct opts *o, uint64_t *out)
{
    const char *path = o->pos[0];
    if (o->number)
        return parse_count("--number", o->number, out);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t digits = strspn(base, "0123456789");
    char *end;
    errno = 0;
    unsigned long long v = digits ? strtoull(base, &end, 10) : 0;
    if (!digits || errno || strcmp(base + digits, ".blob") != 0) {
        fail("%s: the name does not give the file's number (<n>.blob); give it with --number N",
             path);
        return -1;
    }
    *out = v;
    return 0;
}

static int blob_open(const struct opts *o, kv_blob_reader **r)
{
    uint64_t number;
    if (blob_number(o, &number) != 0)
        return -1;
    int rc = kv_blob_reader_open(o->pos[0], number, r);
    if (rc != KV_OK) {
        char err[600];
        table_error(err, sizeof err, o->pos[0], rc);
        fail("%s", err);
        return -1;
    }
    return 0;
}

/* Counts the records kv_blob_scan walks (it checks each one). */
static int count_record(void *ctx, const void *key, size_t klen, const void *val, size_t vlen,
                        const kv_blob_ref *ref)
{
    (void)key, (void)klen, (void)val, (void)vlen, (void)ref;
    (*(uint64_t *)ctx)++;
    return 0;
}

/* blob dump: one line per record. */
static int print_record(void *ctx, const void *key, size_t klen, const void *val, size_t vlen,
                        const kv_blob_ref *ref)
{
    (void)ctx, (void)val;
    printf("%" PRIu64 ": ", ref->offset);
    put_str(stdout, key, klen);
    printf(" => %zu bytes\n", vlen);
    return 0;
}

static int blob_dump(struct opts *o)
{
    kv_blob_reader *r;
    if (blob_open(o, &r) != 0)
        return EXIT_FAIL;
    int rc = kv_blob_scan(r, print_record, NULL), status = 0;
    if (rc != KV_OK) {
        char err[600];
        table_error(err, sizeof err, o->pos[0], rc);
        fflush(stdout);
        status = fail("%s", err);
    }
    kv_blob_reader_close(r);
    return status;
}

static int blob_verify(struct opts *o)
{
    kv_blob_reader *r;
    if (blob_open(o, &r) != 0)
        return EXIT_FAIL;
    uint64_t walked = 0;
    int rc = kv_blob_scan(r, count_record, &walked), status = 0;
    if (rc != KV_OK) {
        char err[600];
        table_error(err, sizeof err, o->pos[0], rc);
        status = fail("%s", err);
    } else {
        kv_blob_file_info fi;
        kv_blob_reader_info(r, &fi);
        printf("%s: ok: blob file %" PRIu64 ", %" PRIu64 " record%s of %" PRIu64 " bytes in %"
               PRIu64 " bytes, header, footer and every record's checksum good\n", o->pos[0],
               fi.number, fi.records, PLURAL(fi.records), fi.record_bytes, fi.file_size);
    }
    kv_blob_reader_close(r);
    return status;
}

/* ---- db commands ------------------------------------------------------------------------ */

/* 1 when dir holds a manifest (so kv_open with create_if_missing off does
 * not leave a LOCK file in a directory that is not a database). */
static int is_database(const char *dir)
{
    char p[4096];
    struct stat st;
    return snprintf(p, sizeof p, "%s/MANIFEST", dir) < (int)sizeof p && stat(p, &st) == 0;
}

/* 1 when dir holds a table or log file by kv's names (a database whose
 * manifest was lost, when there is no MANIFEST). */
static int holds_kv_files(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent *de;
    int found = 0;
    while (!found && (de = readdir(d)) != NULL) {
        const char *dot = strrchr(de->d_name, '.');
        found = dot && (strcmp(dot, ".sst") == 0 || strcmp(dot, ".log") == 0);
    }
    closedir(d);
    return found;
}

static int db_error(const char *dir, int rc)
{
    if (rc == KV_EBUSY)
        return fail("%s: the database is open elsewhere (%s); close it first", dir,
                    code_name(rc));
    if (rc == KV_NOTFOUND && holds_kv_files(dir))
        return fail("%s: no MANIFEST beside table or log files: the manifest was lost "
                    "(kvtool db repair %s rebuilds it from them)", dir, dir);
    if (rc == KV_NOTFOUND)
        return fail("%s: no database there", dir);
    return kv_fail(dir, rc);
}

static int open_db(const char *dir, int create, kv_db **db)
{
    *db = NULL;
    if (!create && !is_database(dir))
        return db_error(dir, KV_NOTFOUND);
    kv_options o;
    kv_options_init(&o);
    o.create_if_missing = create;
    int rc = kv_open(dir, &o, db);
    return rc == KV_OK ? 0 : db_error(dir, rc);
}

static int close_db(const char *dir, kv_db *db, int status)
{
    int rc = kv_close(db);
    if (rc != KV_OK && status == 0) {
        char what[4200];
        fit(what, sizeof what, "%s: close", dir);
        return kv_fail(what, rc);
    }
    return status;
}

static const char *explain_outcome(const kv_explain_step *s)
{
    switch (s->outcome) {
    case KV_EXPLAIN_FOUND: return "found";
    case KV_EXPLAIN_DELETED: return "deleted (tombstone)";
    case KV_EXPLAIN_FAILED: return "failed";
    default: return s->false_positive ? "absent (a false positive)" : "absent";
    }
}

/* The value of the step's entry read from a blob file (its entry was a
 * reference): which file, where, how many bytes. */
static void put_blob_read(const kv_explain_step *s, size_t *reads, uint64_t *bytes)
{
    if (!s->blob_number)
        return;
    printf(": blob file %06" PRIu64 ".blob: %" PRIu64 " bytes at offset %" PRIu64, s->blob_number,
           s->blob_bytes, s->blob_offset);
    (*reads)++;
    *bytes += s->blob_bytes;
}

static int db_explain(struct opts *o)
{
    const char *dir = o->pos[0];
    uint8_t *key;
    size_t klen;
    if (parse_bytes("KEY", o->pos[1], &key, &klen) != 0)
        return EXIT_FAIL;
    kv_db *db;
    if (open_db(dir, 0, &db) != 0) {
        free(key);
        return EXIT_FAIL;
    }
    kv_explain *x;
    int rc = kv_explain_get(db, key, klen, &x);
    if (rc != KV_OK) {
        free(key);
        return close_db(dir, db, kv_fail(dir, rc));
    }
    printf("get ");
    put_str(stdout, key, klen);
    printf(": filter hash 0x%016" PRIx64 ", reading at sequence %" PRIu64 ", %zu live tables\n",
           x->hash, x->snapshot, x->live_tables);
    size_t probed = 0, negatives = 0, fps = 0, reads = 0, hits = 0, blob_reads = 0;
    uint64_t read_bytes = 0, blob_bytes = 0;
    for (size_t i = 0; i < x->nsteps; i++) {
        const kv_explain_step *s = &x->steps[i];
        printf("%3zu. ", i + 1);
        if (s->where != KV_EXPLAIN_TABLE) {
            /* A "no" spares the skiplist search; memtable_filter 0: no filter. */
            printf("%s: %s: %s",
                   s->where == KV_EXPLAIN_MEMTABLE ? "memtable" : "immutable memtable",
                   s->filter == KV_EXPLAIN_FILTER_NEGATIVE ? "filter negative"
                   : s->filter == KV_EXPLAIN_FILTER_MAYBE  ? "filter maybe"
                                                           : "no filter",
                   explain_outcome(s));
            if (s->outcome == KV_EXPLAIN_FOUND || s->outcome == KV_EXPLAIN_DELETED)
                printf(", seq %" PRIu64, s->seq);
            put_blob_read(s, &blob_reads, &blob_bytes);
            fputc('\n', stdout);
            continue;
        }
        probed++;
        printf("table %06" PRIu64 ".sst level %u [", s->number, s->level);
        put_str(stdout, s->smallest, s->smallest_len);
        fputs(" .. ", stdout);
        put_str(stdout, s->largest, s->largest_len);
        fputs("]: ", stdout);
        if (s->filter == KV_EXPLAIN_FILTER_NEGATIVE) {
            negatives++;
            fputs("filter negative", stdout);
        } else if (s->filter == KV_EXPLAIN_FILTER_MAYBE)
            fputs("filter maybe", stdout);
        else if (s->block != KV_EXPLAIN_BLOCK_NONE)
            fputs("no filter", stdout);
        else
            fputs("filter not asked (outside the table's range at this sequence)", stdout);
        if (s->block == KV_EXPLAIN_BLOCK_NONE)
            fputs(": no block read", stdout);
        else {
            printf(": data block at offset %" PRIu64 " (%" PRIu64 " bytes) %s", s->block_offset,
                   s->block_bytes,
                   s->block == KV_EXPLAIN_BLOCK_CACHE ? "from the block cache" : "read from disk");
            if (s->block == KV_EXPLAIN_BLOCK_CACHE)
                hits++;
            else {
                reads++;
                read_bytes += s->block_bytes;
            }
        }
        fps += (size_t)s->false_positive;
        printf(": %s", explain_outcome(s));
        if (s->outcome == KV_EXPLAIN_FOUND || s->outcome == KV_EXPLAIN_DELETED)
            printf(", seq %" PRIu64, s->seq);
        put_blob_read(s, &blob_reads, &blob_bytes);
        fputc('\n', stdout);
    }
    if (x->result == KV_OK) {
        fputs("result: found ", stdout);
        put_str(stdout, x->value, x->value_len);
        fputc('\n', stdout);
    } else if (x->result == KV_NOTFOUND) {
        int deleted = x->nsteps && x->steps[x->nsteps - 1].outcome == KV_EXPLAIN_DELETED;
        printf("result: not found%s\n", deleted ? " (deleted)" : "");
    } else
        printf("result: error: %s (%s)\n", code_name(x->result), kv_strerror(x->result));
    printf("summary: %zu of %zu live tables probed, %zu filter negative%s, %zu false "
           "positive%s, %zu data block%s read from disk (%" PRIu64 " bytes), %zu from the "
           "block cache",
           probed, x->live_tables, negatives, PLURAL(negatives), fps, PLURAL(fps), reads,
           PLURAL(reads), read_bytes, hits);
    if (blob_reads)
        printf(", %zu blob file read%s (%" PRIu64 " bytes)", blob_reads, PLURAL(blob_reads),
               blob_bytes);
    fputc('\n', stdout);
    int status = 0;
    if (x->result != KV_OK && x->result != KV_NOTFOUND) {
        fflush(stdout);
        status = kv_fail(dir, x->result);
    }
    kv_free(x);
    free(key);
    return close_db(dir, db, status);
}

static int db_get(struct opts *o)
{
    const char *dir = o->pos[0];
    uint8_t *key;
    size_t klen;
    if (parse_bytes("KEY", o->pos[1], &key, &klen) != 0)
        return EXIT_FAIL;
    kv_db *db;
    if (open_db(dir, 0, &db) != 0) {
        free(key);
        return EXIT_FAIL;
    }
    void *v;
    size_t vlen;
    int rc = kv_get(db, key, klen, &v, &vlen), status = 0;
    if (rc == KV_OK) {
        put_bare(stdout, v, vlen);
        fputc('\n', stdout);
        kv_free(v);
    } else if (rc == KV_NOTFOUND)
        status = fail("key not found");
    else
        status = kv_fail(dir, rc);
    free(key);
    return close_db(dir, db, status);
}

static int db_put(struct opts *o)
{
    const char *dir = o->pos[0];
    uint8_t *key, *val = NULL;
    size_t klen, vlen;
    if (parse_bytes("KEY", o->pos[1], &key, &klen) != 0)
        return EXIT_FAIL;
    if (parse_bytes("VALUE", o->pos[2], &val, &vlen) != 0) {
        free(key);
        return EXIT_FAIL;
    }
    kv_db *db;
    int status = open_db(dir, o->create, &db);
    if (status == 0) {
        int rc = kv_put(db, key, klen, val, vlen);
        if (rc != KV_OK)
            status = kv_fail(dir, rc);
        status = close_db(dir, db, status);
    }
    free(key);
    free(val);
    return status;
}

static int db_delete(struct opts *o)
{
    const char *dir = o->pos[0];
    uint8_t *key;
    size_t klen;
    if (parse_bytes("KEY", o->pos[1], &key, &klen) != 0)
        return EXIT_FAIL;
    kv_db *db;
    int status = open_db(dir, 0, &db);
    if (status == 0) {
        int rc = kv_delete(db, key, klen);
        if (rc != KV_OK)
            status = kv_fail(dir, rc);
        status = close_db(dir, db, status);
    }
    free(key);
    return status;
}

static int db_scan(struct opts *o)
{
    const char *dir = o->pos[0];
    uint8_t *from = NULL, *to = NULL;
    size_t flen = 0, tlen = 0;
    uint64_t limit = UINT64_MAX;
    int status = EXIT_FAIL;
    kv_db *db = NULL;
    kv_iter *it = NULL;
    if ((o->from && parse_bytes("--from", o->from, &from, &flen) != 0) ||
        (o->to && parse_bytes("--to", o->to, &to, &tlen) != 0) ||
        (o->limit && parse_count("--limit", o->limit, &limit) != 0) || open_db(dir, 0, &db) != 0)
        goto out;
    int rc = kv_iter_new(db, NULL, &it);
    if (rc != KV_OK) {
        kv_fail(dir, rc);
        goto out;
    }
    if (from)
        kv_iter_seek(it, from, flen);
    else
        kv_iter_seek_first(it);
    /* The iterator moves on only while more pairs are wanted, so that a
     * damaged block past the limit is not an error of this scan. */
    for (uint64_t n = 0; n < limit && kv_iter_valid(it);) {
        size_t klen, vlen;
        const void *k = kv_iter_key(it, &klen);
        const void *v = kv_iter_value(it, &vlen);
        if (to && key_cmp(k, klen, to, tlen) >= 0)
            break;
        put_str(stdout, k, klen);
        fputs(" => ", stdout);
        put_str(stdout, v, vlen);
        fputc('\n', stdout);
        if (++n < limit)
            kv_iter_next(it);
    }
    if ((rc = kv_iter_status(it)) != KV_OK) {
        fflush(stdout);
        kv_fail(dir, rc);
        goto out;
    }
    status = 0;
out:
    kv_iter_free(it);
    if (db)
        status = close_db(dir, db, status);
    free(from);
    free(to);
    return status;
}

static int db_stats(struct opts *o)
{
    const char *dir = o->pos[0];
    kv_db *db;
    if (open_db(dir, 0, &db) != 0)
        return EXIT_FAIL;
    char *text;
    int rc = kv_metrics_text(db, &text), status = 0;
    if (rc == KV_OK) {
        fputs(text, stdout);
        kv_free(text);
    } else
        status = kv_fail(dir, rc);
    return close_db(dir, db, status);
}

static int db_property(struct opts *o)
{
    const char *dir = o->pos[0];
    kv_db *db;
    if (open_db(dir, 0, &db) != 0)
        return EXIT_FAIL;
    char *text;
    int rc = kv_property(db, o->pos[1], &text), status = 0;
    if (rc == KV_OK) {
        fputs(text, stdout);
        size_t n = strlen(text);
        if (n == 0 || text[n - 1] != '\n') /* the one-number properties */
            fputc('\n', stdout);
        kv_free(text);
    } else
        status = kv_fail(dir, rc); /* KV_NOTFOUND: kv's text names the known properties */
    return close_db(dir, db, status);
}

static int db_size(struct opts *o)
{
    const char *dir = o->pos[0];
    uint8_t *from = NULL, *to = NULL;
    size_t flen = 0, tlen = 0;
    int status = EXIT_FAIL;
    kv_db *db = NULL;
    if ((o->from && parse_bytes("--from", o->from, &from, &flen) != 0) ||
        (o->to && parse_bytes("--to", o->to, &to, &tlen) != 0) || open_db(dir, 0, &db) != 0)
        goto out;
    /* No --to: no upper bound (a NULL limit). parse_bytes gives a buffer
     * even for an empty key, so --to "" is the empty range it says. */
    const void *starts[1] = {from}, *limits[1] = {to};
    size_t slens[1] = {flen}, llens[1] = {tlen};
    uint64_t bytes;
    int rc = kv_approximate_sizes(db, 1, starts, slens, limits, llens, &bytes);
    if (rc != KV_OK)
        kv_fail(dir, rc);
    else {
        printf("%" PRIu64 "\n", bytes);
        status = 0;
    }
out:
    if (db)
        status = close_db(dir, db, status);
    free(from);
    free(to);
    return status;
}

static int db_compact(struct opts *o)
{
    const char *dir = o->pos[0];
    kv_db *db;
    if (open_db(dir, 0, &db) != 0)
        return EXIT_FAIL;
    struct kv_stats before, after;
    int rc = kv_stats(db, &before);
    if (rc == KV_OK)
        rc = kv_compact_range(db, NULL, 0, NULL, 0);
    if (rc == KV_OK)
        rc = kv_stats(db, &after);
    int status = 0;
    if (rc != KV_OK)
        status = kv_fail(dir, rc);
    else {
        printf("compacted: %" PRIu64 " table%s (%" PRIu64 " bytes) before, %" PRIu64
               " table%s (%" PRIu64 " bytes) after\n",
               before.tables, PLURAL(before.tables), before.table_bytes, after.tables,
               PLURAL(after.tables), after.table_bytes);
        for (int l = 0; l < LEVELS; l++)
            if (after.level_tables[l])
                printf("level %d: %" PRIu64 " table%s, %" PRIu64 " bytes\n", l,
                       after.level_tables[l], PLURAL(after.level_tables[l]),
                       after.level_bytes[l]);
    }
    return close_db(dir, db, status);
}

static int db_repair(struct opts *o)
{
    const char *dir = o->pos[0];
    kv_repair_report rep;
    int rc = kv_repair_ex(dir, NULL, &rep);
    if (rep.text)
        fputs(rep.text, stdout);
    int status = 0;
    if (rc != KV_OK)
        status = rc == KV_EBUSY ? db_error(dir, rc) : kv_fail(dir, rc);
    else
        printf("repaired: %" PRIu64 " table%s found, %" PRIu64 " moved to lost/, %" PRIu64
               " kept as they were, %" PRIu64 " merged, %" PRIu64 " written; %" PRIu64
               " log%s found, %" PRIu64 " replayed, %" PRIu64 " moved to lost/, %" PRIu64
               " record%s recovered; last sequence %" PRIu64 "\n",
               rep.tables_found, PLURAL(rep.tables_found), rep.tables_lost, rep.tables_kept,
               rep.tables_merged, rep.tables_written, rep.logs_found, PLURAL(rep.logs_found),
               rep.logs_replayed, rep.logs_lost, rep.records_recovered,
               PLURAL(rep.records_recovered), rep.last_seq);
    kv_repair_free(&rep);
    return status;
}

static int db_destroy(struct opts *o)
{
    const char *dir = o->pos[0];
    int rc = kv_destroy(dir);
    if (rc != KV_OK)
        return rc == KV_EBUSY ? db_error(dir, rc) : kv_fail(dir, rc);
    struct stat st;
    if (stat(dir, &st) == 0)
        printf("destroyed: kv's files removed; %s stays (it holds other files)\n", dir);
    else
        printf("destroyed: %s removed\n", dir);
    return 0;
}

/* dir/NNNNNN.sst (six digits at least, as the store names its tables). */
static void table_path(char *buf, size_t n, const char *dir, uint64_t number)
{
    snprintf(buf, n, "%s/%06" PRIu64 ".sst", dir, number);
}

static int inspect(const char *dir, kv_dir_info **info)
{
    int rc = kv_inspect(dir, info);
    /* kv_inspect's text names the file at fault and what is wrong with it */
    return rc == KV_OK ? 0 : db_error(dir, rc);
}

static const char *file_kind_note(int kind)
{
    switch (kind) {
    case KV_FILE_ORPHAN:
        return "a table the manifest does not name (left by a crash; the next open deletes it)";
    case KV_FILE_TEMP:
        return "an unfinished table (left by a crash; the next open deletes it)";
    case KV_FILE_OLD_LOG:
        return "a log older than the live one (already in tables; the next open deletes it)";
    case KV_FILE_BLOB_ORPHAN:
        return "a blob file the manifest does not name (left by a crash; the next open "
               "deletes it)";
    default:
        return NULL;
    }
}

/* Share of part in whole as a percentage; 0 for an empty whole. */
static double percent(uint64_t part, uint64_t whole)
{
    return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

/* db info's blob files: one line each (size, records, live and garbage
 * bytes, garbage as a share of the record bytes, the share
 * blob_gc_threshold is compared with), then the totals. 0, or EXIT_FAIL
 * when one named by the manifest is not on disk (said on stderr). */
static int info_blobs(const char *dir, const kv_dir_info *info)
{
    uint64_t bytes = 0, records = 0, grecords = 0, rbytes = 0, gbytes = 0;
    for (size_t i = 0; i < info->nblobs; i++)
        bytes += info->blobs[i].file_size;
    printf("blob files:      %zu (%" PRIu64 " bytes)\n", info->nblobs, bytes);
    for (size_t i = 0; i < info->nblobs; i++) {
        const struct kv_dir_blob *b = &info->blobs[i];
        printf("  %06" PRIu64 ".blob  %" PRIu64 " bytes  %" PRIu64 " record%s (%" PRIu64
               " garbage)  %" PRIu64 " live bytes  %" PRIu64 " garbage bytes  %.2f%% garbage",
               b->number, b->file_size, b->records, PLURAL(b->records), b->garbage_records,
               b->record_bytes - b->garbage_bytes, b->garbage_bytes,
               percent(b->garbage_bytes, b->record_bytes));
        if (!b->present)
            fputs("  MISSING", stdout);
        else if (b->disk_size != b->file_size)
            printf("  %" PRIu64 " BYTES ON DISK", b->disk_size);
        fputc('\n', stdout);
        records += b->records;
        grecords += b->garbage_records;
        rbytes += b->record_bytes;
        gbytes += b->garbage_bytes;
    }
    if (info->nblobs)
        printf("blob total:      %" PRIu64 " record%s (%" PRIu64 " garbage), %" PRIu64
               " live bytes, %" PRIu64 " garbage bytes, %.2f%% garbage\n", records,
               PLURAL(records), grecords,
               rbytes - gbytes, gbytes, percent(gbytes, rbytes));
    int status = 0;
    for (size_t i = 0; i < info->nblobs; i++)
        if (!info->blobs[i].present) {
            fflush(stdout);
            status = fail("%s: blob file %06" PRIu64 ".blob is in the manifest but not on disk",
                          dir, info->blobs[i].number);
        }
    return status;
}

static int db_info(struct opts *o)
{
    const char *dir = o->pos[0];
    kv_dir_info *info;
    if (inspect(dir, &info) != 0)
        return EXIT_FAIL;
    int status = 0;
    printf("database:        %s\n", dir);
    printf("format version:  %u\n", (unsigned)info->format_version);
    printf("filter seed:     0x%016" PRIx64 "\n", info->seed);
    /* The secret's check value, never the secret. */
    if (info->has_filter_secret)
        printf("filter secret:   set (check 0x%016" PRIx64 "; keyed tables record it)\n",
               info->filter_secret_check);
    else
        printf("filter secret:   none\n");
    printf("last sequence:   %" PRIu64 "\n", info->last_seq);
    printf("next file:       %" PRIu64 "\n", info->next_file);
    printf("log number:      %" PRIu64 "\n", info->log_number);
    uint64_t log_bytes = 0;
    size_t logs = 0;
    for (size_t i = 0; i < info->nfiles; i++)
        if (info->files[i].kind == KV_FILE_LOG) {
            logs++;
            log_bytes += info->files[i].size;
        }
    printf("live logs:       %zu (%" PRIu64 " bytes%s)\n", logs, log_bytes,
           log_bytes ? " of writes not yet in tables: the next open replays them into one" : "");

    /* Per level, then per table; filter memory from each table's reader. */
    uint64_t total_bytes = 0, total_filter = 0, total_entries = 0;
    double missing_fp = 0; /* expected false positives of a missing key */
    for (size_t i = 0; i < info->ntables; i++)
        total_bytes += info->tables[i].file_size;
    printf("tables:          %zu (%" PRIu64 " bytes)\n", info->ntables, total_bytes);
    for (int l = 0; l < LEVELS; l++) {
        size_t nl = 0;
        uint64_t bytes = 0;
        for (size_t i = 0; i < info->ntables; i++)
            if (info->tables[i].level == (unsigned)l) {
                nl++;
                bytes += info->tables[i].file_size;
            }
        if (!nl)
            continue;
        printf("level %d: %zu table%s, %" PRIu64 " bytes\n", l, nl, nl == 1 ? "" : "s", bytes);
        /* The level's filters: bits per key over its filter keys, and the
         * expected FPR a missing key meets in it (each level-0 table is
         * probed; of a deeper level, the table whose range holds the key,
         * so its tables weigh by their share of the level's keys). */
        double lbits = 0, lkeys = 0, lfpr = 0, lentries = 0;
        for (size_t i = 0; i < info->ntables; i++) {
            const kv_dir_table *t = &info->tables[i];
            if (t->level != (unsigned)l)
                continue;
            printf("  %06" PRIu64 ".sst  %" PRIu64 " entries  %" PRIu64 " bytes  seq %" PRIu64
                   "..%" PRIu64 "  [", t->number, t->entries, t->file_size, t->min_seq,
                   t->max_seq);
            put_str(stdout, t->smallest, t->smallest_len);
            fputs(" .. ", stdout);
            put_str(stdout, t->largest, t->largest_len);
            fputs("]  ", stdout);
            total_entries += t->entries;
            char path[4096], err[600];
            table_path(path, sizeof path, dir, t->number);
            struct table tb;
            if (!t->present)
                printf("MISSING\n");
            else if (table_open(path, NULL, t->number, &tb, err, sizeof err) != KV_OK) {
                printf("UNREADABLE\n");
                fflush(stdout);
                status = fail("%s", err);
            } else {
                /* its compression, so that the levels' show (compression_min_level) */
                if (tb.p.compression == KV_COMPRESSION_ZSTD && tb.p.dict_bytes)
                    printf("zstd, dictionary %zu bytes  ", tb.p.dict_bytes);
                else
                    printf("%s  ", tb.p.compression == KV_COMPRESSION_ZSTD ? "zstd" : "raw");
                if (tb.p.filter_bits) {
                    printf("filter %zu bytes (%s, %.2f bits/key, k %u, %" PRIu64
                           " keys, expected FPR %.4f%%)\n",
                           tb.p.filter_bytes, layout_name(tb.p.filter_layout),
                           tb.p.filter_keys ? (double)tb.p.filter_bits / (double)tb.p.filter_keys
                                            : 0.0,
                           tb.p.filter_k, tb.p.filter_keys, 100 * tb.p.filter_expected_fpr);
                    total_filter += tb.p.filter_bytes;
                } else
                    printf("no filter\n");
                double fpr = tb.p.filter_bits ? tb.p.filter_expected_fpr : 1.0;
                lbits += (double)tb.p.filter_bits;
                lkeys += (double)tb.p.filter_keys;
                lfpr += l == 0 ? fpr : fpr * (double)t->entries;
                lentries += (double)t->entries;
                table_close(&tb);
            }
        }
        if (l > 0 && lentries > 0)
            lfpr /= lentries;
        missing_fp += lfpr;
        printf("  level %d filters: %.2f bits/key, expected FPR %.4f%%%s\n", l,
               lkeys > 0 ? lbits / lkeys : 0.0, 100 * lfpr,
               l == 0 ? " summed over its tables (a missing key probes each)" : "");
    }
    printf("total:           %" PRIu64 " entries, %" PRIu64 " bytes of tables, %" PRIu64
           " bytes of filters in memory when open\n", total_entries, total_bytes, total_filter);
    if (info->ntables)
        printf("missing key:     %.4f false positives expected per get (the levels' expected "
               "FPRs summed: one probe per level-0 table and per deeper level)\n",
               missing_fp);
    if (info_blobs(dir, info) != 0)
        status = EXIT_FAIL;
    for (size_t i = 0; i < info->nfiles; i++) {
        const char *note = file_kind_note(info->files[i].kind);
        if (note)
            printf("note: %s: %s\n", info->files[i].name, note);
        if (info->files[i].kind == KV_FILE_OTHER)
            printf("note: %s: not a database file\n", info->files[i].name);
    }
    for (size_t i = 0; i < info->ntables; i++)
        if (!info->tables[i].present) {
            fflush(stdout);
            status = fail("%s: table %06" PRIu64 ".sst is in the manifest but not on disk", dir,
                          info->tables[i].number);
        }
    kv_inspect_free(info);
    return status;
}

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
    if (c->entries && (!key_eq(c->first, c->first_len, m->smallest, m->smallest_len) ||
                       !key_eq(c->last, c->last_len, m->largest, m->largest_len)))
        problem("%s: its key range is not the one the manifest records", path);
    if (c->entries && (c->min_seq != m->min_seq || c->max_seq != m->max_seq))
        problem("%s: sequences %" PRIu64 "..%" PRIu64 ", the manifest records %" PRIu64
                "..%" PRIu64, path, c->min_seq, c->max_seq, m->min_seq, m->max_seq);
    if (c->entries && c->max_seq > info->last_seq)
        problem("%s: holds sequence %" PRIu64 ", above the manifest's last sequence %" PRIu64,
                path, c->max_seq, info->last_seq);
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
                       "without its filter until rewritten\n", path);
            else if (p->filter_seed != info->filter_secret_check)
                printf("%s: keyed filter of another secret (check 0x%016" PRIx64 ", the "
                       "database's 0x%016" PRIx64 "): read without its filter until "
                       "rewritten\n", path, p->filter_seed, info->filter_secret_check);
        } else if (p->filter_seed != info->seed) {
            problem("%s: filter seed 0x%016" PRIx64 ", the database's is 0x%016" PRIx64
                    " (every lookup would miss)", path, p->filter_seed, info->seed);
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
                "names it", path, m->records);
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
                "manifest records %" PRIu64 " of %" PRIu64 " in %" PRIu64, path, fi.records,
                fi.record_bytes, fi.file_size, m->records, m->record_bytes, m->file_size);
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
    uint64_t live = m->records - m->garbage_records, live_bytes = m->record_bytes - m->garbage_bytes;
    if (b->refs == live && b->ref_bytes == live_bytes)
        return;
    char path[4096];
    blob_path(path, sizeof path, dir, m->number);
    problem("%s: the tables refer to %" PRIu64 " of its records (%" PRIu64 " bytes), the manifest "
            "counts %" PRIu64 " live (%" PRIu64 " bytes: %" PRIu64 " records of %" PRIu64
            " bytes less %" PRIu64 " of %" PRIu64 " garbage)", path, b->refs, b->ref_bytes, live,
            live_bytes, m->records, m->record_bytes, m->garbage_records, m->garbage_bytes);
    b->problems++;
}

static int db_verify(struct opts *o)
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
    if (info->format_version != 1)
        problem("%s: format version %u, this kvtool reads version 1", dir,
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
            problem("%s: kv_inspect lists blob files out of order (%06" PRIu64 " after %06"
                    PRIu64 ")", dir, info->blobs[i].number, info->blobs[i - 1].number);
        verify_blob(dir, info, &bs.b[i]);
    }
    /* Every live table, and the references its entries hold. */
    uint64_t entries = 0;
    size_t unread = 0; /* tables whose entries were not all walked */
    for (size_t i = 0; i < info->ntables; i++) {
        const kv_dir_table *m = &info->tables[i];
        char path[4096], err[600];
        table_path(path, sizeof path, dir, m->number);
        if (!m->present) {
            problem("%s: missing: the manifest names it but it is not in the directory", path);
            unread++;
            continue;
        }
        if (m->disk_size != m->file_size) {
            problem("%s: %" PRIu64 " bytes on disk, %" PRIu64 " in the manifest", path,
                    m->disk_size, m->file_size);
            unread++;
            continue;
        }
        struct table t;
        if (table_open(path, cache, m->number, &t, err, sizeof err) != KV_OK) {
            problem("%s", err);
            unread++;
            continue;
        }
        struct table_check c;
        size_t before = problems;
        uint64_t values_before = bs.values;
        bs.table_bad = 0;
        if (check_table(&t, &c, &bs, err, sizeof err) != 0) {
            problem("%s", err);
            unread++;
        } else
            verify_record(path, info, m, &t, &c);
        if (bs.table_bad > REF_PROBLEMS_SHOWN)
            problem("%s: %zu more bad blob references", path, bs.table_bad - REF_PROBLEMS_SHOWN);
        if (problems == before) {
            printf("ok %06" PRIu64 ".sst level %u: %" PRIu64 " entries%s", m->number, m->level,
                   c.entries,
                   c.filter_checked ? ", filter says maybe for every key" : ", no filter");
            uint64_t read = bs.values - values_before;
            if (c.blob_refs == read && read)
                printf(", %" PRIu64 " value%s in blob files read back", read, PLURAL(read));
            else if (c.blob_refs) /* the rest are in files with problems of their own */
                printf(", %" PRIu64 " value%s in blob files, %" PRIu64 " read back", c.blob_refs,
                       PLURAL(c.blob_refs), read);
            fputc('\n', stdout);
            entries += c.entries;
        }
        check_free(&c);
        table_close(&t);
    }
    /* Levels below 0 hold disjoint ranges (tables are in search order). */
    for (size_t i = 1; i < info->ntables; i++) {
        const kv_dir_table *a = &info->tables[i - 1], *b = &info->tables[i];
        if (a->level == b->level && a->level > 0 &&
            key_cmp(a->largest, a->largest_len, b->smallest, b->smallest_len) >= 0)
            problem("%s: level %u: tables %06" PRIu64 ".sst and %06" PRIu64 ".sst overlap", dir,
                    a->level, a->number, b->number);
    }
    /* The blob files' garbage against the references found: only when
     * every table was walked whole, else the counts mean nothing. */
    uint64_t values = 0;
    for (size_t i = 0; i < bs.n; i++) {
        struct vblob *b = &bs.b[i];
        if (!unread)
            verify_blob_accounting(dir, b);
        if (!b->problems) {
            const struct kv_dir_blob *m = b->m;
            printf("ok %06" PRIu64 ".blob: %" PRIu64 " record%s, %" PRIu64 " live (%.2f%% of "
                   "its bytes garbage), checksums good%s\n", m->number, m->records,
                   PLURAL(m->records), b->refs,
                   percent(m->garbage_bytes, m->record_bytes),
                   unread ? "; live records not counted (a table was not read whole)"
                          : ", every live one referred to once");
        }
        values += b->refs;
        kv_blob_reader_close(b->r);
    }
    free(bs.b);
    free(bs.buf);
    kv_sst_cache_free(cache);
    size_t ntables = info->ntables, nblobs = info->nblobs;
    kv_inspect_free(info);
    if (problems)
        return fail("%s: %zu problem%s found", dir, problems, problems == 1 ? "" : "s");
    printf("%s: ok: %zu table%s, %" PRIu64 " entries, %zu blob file%s holding %" PRIu64
           " live value%s, manifest and directory agree\n", dir, ntables, PLURAL(ntables),
           entries, nblobs, PLURAL(nblobs), values, PLURAL(values));
    return 0;
}

/* ---- the command line ------------------------------------------------------------------- */

enum { OPT_FROM = 1, OPT_TO = 2, OPT_LIMIT = 4, OPT_CREATE = 8, OPT_NUMBER = 16 };

struct command {
    const char *group, *name;
    int (*run)(struct opts *o);
    int npos;           /* positional arguments */
    unsigned opts;      /* OPT_* it takes (--hex and --help: every command) */
    const char *args;   /* synopsis after the name */
    const char *help;   /* what --help adds */
};

static const struct command commands[] = {
    {"sst", "dump", sst_dump, 1, OPT_FROM | OPT_TO, "FILE [--from K] [--to K] [--hex]",
     "Prints every entry of one table, in order, one per line:\n"
     "  \"key\" => \"value\"                         a plain table\n"
     "  \"user key\" seq N put => \"value\"          a table written by the store\n"
     "  \"user key\" seq N delete                  ... a tombstone\n"
     "  \"user key\" seq N blob => 000007.blob offset O size S\n"
     "                                          ... a value kept in a blob file: the\n"
     "                                          reference (file, record offset, value bytes)\n"
     "--from K starts at the first key >= K, --to K stops before the first key >= K\n"
     "(user keys, for a store table)."},
    {"sst", "props", sst_props, 1, 0, "FILE",
     "Prints the table's properties (entries, blocks, sizes, key range, note) and its\n"
     "filter's parameters: layout, m (bits), k, n (keys), bits/key, fill (share of\n"
     "bits set), expected false-positive rate, bytes, seed (for a keyed filter, the check\n"
     "value of the database's secret; never the secret), and what its hashes are."},
    {"sst", "verify", sst_verify, 1, 0, "FILE",
     "Checks one table: every block's checksum and decoding, the index, keys in strictly\n"
     "increasing order, every entry found again by a point lookup with the filter\n"
     "answering \"maybe\" (no false negatives), the properties against the content;\n"
     "in a store table every entry's kind known and every blob entry's reference\n"
     "well formed (the blob files themselves: db verify, blob verify).\n"
     "Exits 1 with one line naming the file and what is wrong."},
    {"blob", "dump", blob_dump, 1, OPT_NUMBER, "FILE [--number N] [--hex]",
     "Prints every record of one blob file, in file order, one per line:\n"
     "  OFFSET: \"user key\" => N bytes\n"
     "(the offset a table's reference names, the key, the value's length). Each\n"
     "record's checksum is checked as it is read; a bad one ends the dump with exit 1.\n"
     "The header must hold the file's number, taken from its name <n>.blob, or\n"
     "given with --number N."},
    {"blob", "verify", blob_verify, 1, OPT_NUMBER, "FILE [--number N]",
     "Checks one blob file: its header (magic, version, number: from the name\n"
     "<n>.blob, or --number N) and footer (checksum, record count and bytes against\n"
     "the file's size), then every record (lengths, checksum), and that the records\n"
     "are exactly the footer's. Exits 1 with one line naming the file, the offset and\n"
     "what is wrong. (Whether tables refer to its records: db verify.)"},
    {"db", "explain", db_explain, 2, 0, "DIR KEY",
     "Runs one Get and shows its life step by step: the memtables (their filter's\n"
     "answer), then each table whose key range holds the key (level, number, range),\n"
     "its filter's answer, the data block read (offset, bytes, block cache or disk),\n"
     "for a value kept in a blob file the blob read (file, bytes, offset), and the\n"
     "result."},
    {"db", "info", db_info, 1, 0, "DIR",
     "Shows the manifest's counters (last sequence, next file, live log), each level\n"
     "and table (entries, bytes, sequences, key range, filter memory and parameters),\n"
     "each blob file (bytes, records, live and garbage bytes, garbage as a share of\n"
     "its record bytes: what blob_gc_threshold is compared with) with their total,\n"
     "and files the manifest does not name. Reads without opening the database, so\n"
     "nothing is recovered or deleted; fails while the database is open elsewhere."},
    {"db", "verify", db_verify, 1, 0, "DIR",
     "Checks a database without opening it (nothing is recovered or deleted): every\n"
     "live table is present with its recorded size and passes `sst verify`, agrees\n"
     "with its manifest record (range, sequences, entries, filter seed and parameters);\n"
     "levels 1+ hold disjoint ranges; every live blob file is present with its\n"
     "recorded size and passes `blob verify` with the manifest's record count and\n"
     "bytes; every blob reference in a table names a live blob file, lies within its\n"
     "records and reads back (checksum, key, length); per blob file the references\n"
     "are exactly its live records (count and bytes: records less garbage); files\n"
     "the manifest does not name are reported.\n"
     "Exits 1, naming each table or file at fault, on any problem."},
    {"db", "get", db_get, 2, 0, "DIR KEY", "Prints the key's value (escaped); exits 1 if absent."},
    {"db", "put", db_put, 3, OPT_CREATE, "DIR KEY VALUE [--create]",
     "Stores a value. --create makes the database if there is none."},
    {"db", "delete", db_delete, 2, 0, "DIR KEY", "Deletes a key (an absent key is fine)."},
    {"db", "scan", db_scan, 1, OPT_FROM | OPT_TO | OPT_LIMIT,
     "DIR [--from K] [--to K] [--limit N]",
     "Prints live pairs in key order, one per line: \"key\" => \"value\".\n"
     "--from K starts at the first key >= K, --to K stops before the first key >= K,\n"
     "--limit N prints at most N pairs."},
    {"db", "stats", db_stats, 1, 0, "DIR",
     "Opens the database and prints its statistics in Prometheus text format\n"
     "(counters start at the open; per-table filter figures included)."},
    {"db", "property", db_property, 2, 0, "DIR NAME",
     "Opens the database and prints one of its properties (kv_property):\n"
     "  kv.stats                     the levels table (tables, size, entries, filters and\n"
     "                               what they answered) and the store's counters\n"
     "  kv.sstables                  every live table by level: number, size, entries,\n"
     "                               sequences, key range\n"
     "  kv.num-files-at-level<N>     tables in level N (0..6)\n"
     "  kv.approximate-memory-usage  bytes of memtables, block cache, filters, indexes\n"
     "Exits 1 for a name that is not a property."},
    {"db", "size", db_size, 1, OPT_FROM | OPT_TO, "DIR [--from K] [--to K]",
     "Opens the database and prints the approximate bytes its tables take for the keys\n"
     "in [--from, --to) (kv_approximate_sizes: from the tables' indexes, no data read;\n"
     "writes still in the log count nothing). Without --from: from the first key;\n"
     "without --to: to past the last."},
    {"db", "compact", db_compact, 1, 0, "DIR",
     "Compacts every table down to the deepest level holding data and prints the\n"
     "tables per level afterwards."},
    {"db", "repair", db_repair, 1, 0, "DIR",
     "Rebuilds the manifest from the tables and logs in DIR (kv_repair): a database\n"
     "whose MANIFEST was lost or damaged opens again. Prints one line per thing done\n"
     "(tables read, tables moved to DIR/lost/ and why, logs replayed and records\n"
     "recovered, the new last sequence). Nothing is deleted that holds data the new\n"
     "manifest lacks: what cannot be used goes to DIR/lost/."},
    {"db", "destroy", db_destroy, 1, 0, "DIR",
     "Removes the database's files (kv_destroy): tables, blob files, logs, MANIFEST,\n"
     "LOCK; then DIR itself when nothing else is left in it. Other files, and\n"
     "DIR/lost/, stay."},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f)
{
    fputs("usage: kvtool sst|blob|db COMMAND ARGS... [--hex]\n", f);
    const char *group = "";
    for (size_t i = 0; i < NCOMMANDS; i++) {
        const struct command *c = &commands[i];
        if (strcmp(group, c->group) != 0) {
            group = c->group;
            fputs(strcmp(group, "sst") == 0    ? "\nOne table (an .sst file):\n"
                  : strcmp(group, "blob") == 0 ? "\nOne blob file (a .blob file: values kept "
                                                 "apart from the tables):\n"
                                               : "\nA database (a directory):\n", f);
        }
        fprintf(f, "  kvtool %s %s %s\n", c->group, c->name, c->args);
    }
    fputs("\nKeys and values print as \"escaped\" strings: printable ASCII as is, \\ \" and\n"
          "other bytes as \\xNN. Give keys and values the same way (\\xNN, \\\\). With --hex\n"
          "they print as 0x-prefixed hex and are given as hex (0x optional).\n"
          "Exit status: 0 ok; 1 failed, key not found, or verify found a problem; 2 bad usage.\n"
          "A key that begins with -- goes after --: kvtool db get DIR -- --key.\n"
          "`kvtool sst|blob|db COMMAND --help` describes one command.\n", f);
}

static void command_help(const struct command *c)
{
    printf("usage: kvtool %s %s %s\n\n%s\n", c->group, c->name, c->args, c->help);
    printf("\nOptions: --hex (keys and values as hex), --help.\n");
}

static int is_help(const char *a)
{
    return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0 || strcmp(a, "help") == 0;
}

/* The name of positional argument i (0-based) as the synopsis gives it
 * ("DIR", "KEY"): the i-th word of c->args not in brackets. */
static void pos_name(const struct command *c, int i, char *buf, size_t n)
{
    snprintf(buf, n, "argument %d", i + 1);
    const char *p = c->args;
    for (int k = 0; *p;) {
        size_t len = strcspn(p, " ");
        if (p[0] != '[' && k++ == i) {
            snprintf(buf, n, "%.*s", (int)len, p);
            return;
        }
        p += len + (p[len] == ' ');
    }
}

/* Options anywhere after the command name; `--` ends them. */
static int parse_args(const struct command *c, int argc, char **argv, struct opts *o)
{
    memset(o, 0, sizeof *o);
    int opts_done = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!opts_done && strcmp(a, "--") == 0) {
            opts_done = 1;
            continue;
        }
        if (opts_done || strncmp(a, "--", 2) != 0 || a[2] == '\0') {
            if (strcmp(a, "-h") == 0 && !opts_done) {
                o->help = 1;
                continue;
            }
            if (o->npos == c->npos) {
                fprintf(stderr, "kvtool: %s: unexpected argument '%s': it takes %d (usage: "
                        "kvtool %s %s)\n", cmd_name, a, c->npos, cmd_name, c->args);
                return EXIT_USAGE;
            }
            o->pos[o->npos++] = a;
            continue;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        const char *value = eq ? eq + 1 : NULL;
        unsigned flag = 0;
        const char **slot = NULL;
#define IS(s) (nlen == sizeof(s) - 1 && strncmp(name, s, nlen) == 0)
        if (IS("help"))
            o->help = 1;
        else if (IS("hex"))
            hex_mode = 1;
        else if (IS("create"))
            flag = OPT_CREATE, o->create = 1;
        else if (IS("from"))
            flag = OPT_FROM, slot = &o->from;
        else if (IS("to"))
            flag = OPT_TO, slot = &o->to;
        else if (IS("limit"))
            flag = OPT_LIMIT, slot = &o->limit;
        else if (IS("number"))
            flag = OPT_NUMBER, slot = &o->number;
        else {
            fprintf(stderr, "kvtool: %s: unknown option %s (see kvtool %s --help)\n", cmd_name,
                    a, cmd_name);
            return EXIT_USAGE;
        }
#undef IS
        if (flag && !(c->opts & flag)) {
            fprintf(stderr, "kvtool: %s: %.*s is not an option of this command (see kvtool %s "
                    "--help)\n", cmd_name, (int)nlen + 2, a, cmd_name);
            return EXIT_USAGE;
        }
        if (slot) {
            if (!value) {
                if (i + 1 == argc) {
                    fprintf(stderr, "kvtool: %s: %s needs a value\n", cmd_name, a);
                    return EXIT_USAGE;
                }
                value = argv[++i];
            }
            *slot = value;
        } else if (value) {
            fprintf(stderr, "kvtool: %s: %.*s takes no value\n", cmd_name, (int)nlen + 2, a);
            return EXIT_USAGE;
        }
    }
    if (!o->help && o->npos < c->npos) {
        char name[32];
        pos_name(c, o->npos, name, sizeof name);
        fprintf(stderr, "kvtool: %s: missing %s (usage: kvtool %s %s)\n", cmd_name, name,
                cmd_name, c->args);
        return EXIT_USAGE;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (is_help(argv[1])) {
        usage(stdout);
        return 0;
    }
    const char *group = argv[1];
    if (strcmp(group, "sst") != 0 && strcmp(group, "blob") != 0 && strcmp(group, "db") != 0) {
        fprintf(stderr, "kvtool: unknown command group '%s': sst, blob or db (see kvtool "
                "--help)\n", group);
        return EXIT_USAGE;
    }
    if (argc < 3 || is_help(argv[2])) {
        usage(argc < 3 ? stderr : stdout);
        return argc < 3 ? EXIT_USAGE : 0;
    }
    const struct command *c = NULL;
    for (size_t i = 0; i < NCOMMANDS && !c; i++)
        if (strcmp(commands[i].group, group) == 0 && strcmp(commands[i].name, argv[2]) == 0)
            c = &commands[i];
    if (!c) {
        fprintf(stderr, "kvtool: unknown command '%s %s' (see kvtool --help)\n", group, argv[2]);
        return EXIT_USAGE;
    }
    snprintf(cmd_name, sizeof cmd_name, "%s %s", c->group, c->name);
    struct opts o;
    int rc = parse_args(c, argc - 3, argv + 3, &o);
    if (rc != 0)
        return rc;
    if (o.help) {
        command_help(c);
        return 0;
    }
    rc = c->run(&o);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "kvtool: %s: cannot write the output: %s\n", cmd_name, strerror(errno));
        return EXIT_FAIL;
    }
    return rc;
}
