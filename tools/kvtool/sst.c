/* sst.c - kvtool's commands on one table (sst dump, props, verify), and the
 * table helpers the other commands share: open, close, the reason of an error. */
#include "kvtool.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- the store's keys ---------------------------------------------------------------------- */

/* 1 when k (n bytes) is a store key, decoded into *out; else 0. */
int ikey_decode(const uint8_t *k, size_t n, struct ikey *out)
{
    return kv_sst_store_key_decode(k, n, out->user, n, &out->k) == KV_OK;
}

/* ---- one table ----------------------------------------------------------------------------- */

/* snprintf that may cut the text short to fit: a long path in a message
 * buffer is fine cut. */
void fit(char *buf, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, n, fmt, ap);
    va_end(ap);
}

/* The one-line reason a table call failed: the reader's own message (file
 * and offset) for damage and I/O errors. */
void table_error(char *buf, size_t n, const char *path, int rc)
{
    /* Table calls explain every error from the file (status.h). */
    if (rc == KV_NOTFOUND)
        fit(buf, n, "%s: no such file", path);
    else if (rc == KV_EINVAL || rc == KV_ENOMEM || !kv_sst_error_text()[0])
        fit(buf, n, "%s: %s (%s)", path, code_name(rc), kv_strerror(rc));
    else
        fit(buf, n, "%s: %s (%s): %s", path, code_name(rc), kv_strerror(rc), kv_sst_error_text());
}

int table_open(const char *path, kv_sst_cache *cache, uint64_t id, struct table *t, char *err,
               size_t errlen)
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
               t->p.filter_hash == KV_SST_FILTER_HASH_KEYED || strncmp(t->p.note, "kv: ", 4) == 0;
    return KV_OK;
}

void table_close(struct table *t)
{
    kv_sst_reader_close(t->r);
    t->r = NULL;
}

const char *layout_name(int layout)
{
    return layout == KV_BLOOM_BLOCKED ? "blocked" : layout == KV_BLOOM_CLASSIC ? "classic" : "?";
}

/* The name dump gives a stored key's kind; NULL for one no store writes. */
static const char *kind_name(int kind)
{
    switch (kind) {
    case KV_SST_KIND_PUT: return "put";
    case KV_SST_KIND_DELETE: return "delete";
    case KV_SST_KIND_BLOB: return "blob";
    case KV_SST_KIND_MERGE: return "merge";
    case KV_SST_KIND_TPUT: return "tput";
    case KV_SST_KIND_TMERGE: return "tmerge";
    default: return NULL;
    }
}

/* A table's key as dump shows it: for a store table, user key, sequence
 * and kind; else the key itself. */
static void put_table_key(FILE *f, const struct table *t, const uint8_t *k, size_t klen,
                          struct ikey *ik)
{
    if (t->store && ikey_decode(k, klen, ik)) {
        put_str(f, ik->user, ik->k.user_len);
        const char *name = kind_name(ik->k.kind);
        if (name)
            fprintf(f, " seq %" PRIu64 " %s", ik->k.sequence, name);
        else
            fprintf(f, " seq %" PRIu64 " kind?%d", ik->k.sequence, ik->k.kind);
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

/* The value of a timed entry (tput, tmerge) as dump shows it: the value,
 * then "written T", its write time (seconds since the epoch), from its last
 * KV_SST_TTL_STAMP bytes. */
static void put_timed(FILE *f, const uint8_t *v, size_t vlen)
{
    if (vlen < KV_SST_TTL_STAMP) {
        fputs("(no write time) ", f);
        put_str(f, v, vlen);
        return;
    }
    size_t n = vlen - KV_SST_TTL_STAMP;
    uint64_t stamp = 0;
    for (unsigned i = 0; i < KV_SST_TTL_STAMP; i++)
        stamp |= (uint64_t)v[n + i] << (8 * i);
    put_str(f, v, n);
    fprintf(f, " written %" PRIu64, stamp);
}

/* The table's range tombstone fragments that overlap [from, to) (NULL:
 * unbounded), one a line: range tombstone [start, end) seqs S1 S2 ...
 * (newest first). 0, or -1 after saying why. */
static int dump_range_tombstones(const struct table *t, const uint8_t *from, size_t flen,
                                 const uint8_t *to, size_t tlen)
{
    size_t count = kv_sst_range_tombstone_count(t->r);
    for (size_t i = 0; i < count; i++) {
        kv_sst_range_tombstone f;
        int rc = kv_sst_range_tombstone_get(t->r, i, &f);
        if (rc != KV_OK) {
            fflush(stdout);
            return fail("%s: range tombstone %zu: %s (%s)", t->path, i, code_name(rc),
                        kv_strerror(rc));
        }
        if ((from && key_cmp(f.end, f.end_len, from, flen) <= 0) ||
            (to && key_cmp(f.start, f.start_len, to, tlen) >= 0))
            continue;
        fputs("range tombstone [", stdout);
        put_str(stdout, f.start, f.start_len);
        fputs(", ", stdout);
        put_str(stdout, f.end, f.end_len);
        fputs(") seqs", stdout);
        for (size_t j = 0; j < f.nseq; j++)
            printf(" %" PRIu64, f.seqs[j]);
        fputc('\n', stdout);
    }
    return 0;
}

/* ---- sst commands -------------------------------------------------------------------------- */

int sst_dump(struct opts *o)
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
            fail("--from: a key of %zu bytes cannot be a store key: %s (%s)", flen, code_name(rc),
                 kv_strerror(rc));
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
        if (to &&
            (decoded ? key_cmp(ik.user, ik.k.user_len, to, tlen) : key_cmp(k, klen, to, tlen)) >= 0)
            break;
        put_table_key(stdout, &t, k, klen, &ik);
        if (decoded && ik.k.kind == KV_SST_KIND_BLOB) {
            fputs(" => ", stdout);
            put_blob_ref(stdout, v, vlen);
        } else if (decoded && (ik.k.kind == KV_SST_KIND_TPUT || ik.k.kind == KV_SST_KIND_TMERGE)) {
            fputs(" => ", stdout);
            put_timed(stdout, v, vlen);
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
    /* The range tombstones after the entries: they are kept apart from
     * them, in the table and in the store. */
    if (dump_range_tombstones(&t, from, flen, to, tlen) != 0)
        goto out;
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

int sst_props(struct opts *o)
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
    printf("%-18s %s\n", "keys:", t.store ? "store (user key + sequence + kind)" : "plain");
    printf("%-18s %" PRIu64 "\n", "entries:", p->entries);
    printf("%-18s %" PRIu64 "\n", "raw key bytes:", p->raw_key_bytes);
    printf("%-18s %" PRIu64 "\n", "raw value bytes:", p->raw_value_bytes);
    printf("%-18s %" PRIu64 "\n", "data blocks:", p->data_blocks);
    printf("%-18s %" PRIu64 " raw, %" PRIu64 " stored\n", "data bytes:", p->data_raw_bytes,
           p->data_stored_bytes);
    printf("%-18s %s\n", "compression:",
           p->compression == KV_COMPRESSION_ZSTD ? "zstd"
           : p->compression                      ? "?"
                                                 : "none");
    if (p->dict_bytes)
        printf("%-18s %zu bytes (zstd, trained on the table's blocks)\n",
               "dictionary:", p->dict_bytes);
    else
        printf("%-18s none\n", "dictionary:");
    size_t nrt = kv_sst_range_tombstone_count(t.r);
    if (nrt)
        printf("%-18s %zu fragment%s\n", "range tombstones:", nrt, PLURAL(nrt));
    else
        printf("%-18s none\n", "range tombstones:");
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
        printf("  %-16s %.2f (setting %.2f)\n",
               "bits/key:", p->filter_keys ? (double)bi.bits / (double)p->filter_keys : 0.0,
               p->filter_bits_per_key);
        printf("  %-16s %.4f (%" PRIu64 " bits set)\n", "fill:", bi.fill, bi.bits_set);
        printf("  %-16s %.6f\n", "expected FPR:", p->filter_expected_fpr);
        printf("  %-16s %zu\n", "bytes:", p->filter_bytes);
        /* A keyed table records its secret's check value, never the secret. */
        printf("  %-16s 0x%016" PRIx64 "\n",
               p->filter_hash == KV_SST_FILTER_HASH_KEYED ? "secret check:" : "seed:",
               p->filter_seed);
        printf("  %-16s %s\n", "hashes:",
               p->filter_hash == KV_SST_FILTER_HASH_KEY ? "XXH3-64 of each key"
               : p->filter_hash == KV_SST_FILTER_HASH_CALLER
                   ? (t.store ? "XXH3-64 of each user key" : "given by the writer")
               : p->filter_hash == KV_SST_FILTER_HASH_KEYED
                   ? "SipHash-2-4 of each user key, under the database's secret (not in the table)"
                   : "?");
        /* Prefix entries (format version 4) share the filter's bits and
         * are counted in its n. */
        if (p->prefix_keys)
            printf("  %-16s %" PRIu64 " of %zu bytes (counted in n)\n", "prefixes:", p->prefix_keys,
                   p->prefix_len);
        else
            printf("  %-16s none\n", "prefixes:");
    }
    if (p->range_filter_bytes) /* format version 4 */
        printf("%-18s %zu bytes, %" PRIu64 " keys, %.2f bits/key\n",
               "range filter:", p->range_filter_bytes, p->range_filter_keys, p->range_bits_per_key);
    else
        printf("%-18s none\n", "range filter:");
    table_close(&t);
    return 0;
}

int sst_verify(struct opts *o)
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
            printf(", %" PRIu64 " blob reference%s that decode%s", c.blob_refs, PLURAL(c.blob_refs),
                   c.blob_refs == 1 ? "s" : "");
        size_t nrt = kv_sst_range_tombstone_count(t.r);
        if (nrt)
            printf(", %zu range tombstone fragment%s in order", nrt, PLURAL(nrt));
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
