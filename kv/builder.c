/* builder.c - a table, and its filter, from a sorted stream of entries:
 * flushes (background.c), compactions (compact.c) and repair (repair.c) write
 * their tables through it.
 *
 * kv_builder_start names a new table file and picks its compression (the
 * bottom level and the levels from compression_min_level down are
 * compressed); kv_builder_add takes entries in internal-key order and
 * keeps the table's range and sequences; kv_builder_add_range takes range
 * tombstone fragments, which widen the range to [start of the first, end
 * of the last] and become the table's range tombstone block;
 * kv_builder_finish opens the finished table for reading. kv_filter_bits says how many filter bits
 * per key a new table gets (bloom_bits_per_key, or under
 * KV_FILTER_MONKEY its share of the tree's filter memory). With
 * prefix_len or range_filter_bits, each table also gets the scan filters
 * (doc/database.md, "Filters that gate scans"): its prefixes' hashes in
 * its point filter, and a range filter of its user keys. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "dbfiles.h"
#include "order.h"

/* ---- the filter each new table gets ---------------------------------------------------- */

double kv_filter_bits(kv_db *db, const struct kv_version *v, int level, uint64_t run_keys,
                      struct kv_table *const *gone, size_t ngone)
{
    return kv_filter_bits_run(db, v, level, 0, run_keys, gone, ngone);
}

/* One run of kv_filter_bits_run's tree: its level, id, keys and the
 * filter keys of its tables that stay. */
struct fb_run {
    int level;
    uint64_t id;
    uint64_t keys;
    double fkeys;
};

/* The deeper runs of v as the job leaves them into r[] (room for
 * v->nruns + 1): gone[] out, the output of run_keys keys in run `run` of
 * `level` (a run of its own when no such run is left). Returns how many;
 * adds the filter bits of the tables that stay to *held, their keys and
 * the output's to *after, and level 0's filter keys to *fkeys0. */
static size_t fb_runs(const struct kv_version *v, int level, uint64_t run, uint64_t run_keys,
                      struct kv_table *const *gone, size_t ngone, struct fb_run *r, double *held,
                      double *after, double *fkeys0, size_t *n0, uint64_t *seen0)
{
    size_t n = 0, mine = SIZE_MAX;
    for (size_t i = 0; i < v->n; i++) {
        const struct kv_table *t = v->tables[i];
        int l = (int)t->meta.level, left = 0;
        if (l == 0) {
            (*n0)++;
            *seen0 += t->meta.entries;
        }
        for (size_t g = 0; g < ngone; g++)
            left |= gone[g] == t;
        if (left)
            continue;
        *held += t->meta.filter_bits_per_key * (double)t->meta.filter_keys;
        *after += (double)t->meta.entries;
        if (l == 0) {
            *fkeys0 += (double)t->meta.filter_keys;
            continue;
        }
        if (!n || r[n - 1].level != l || r[n - 1].id != t->meta.run)
            r[n++] = (struct fb_run){l, t->meta.run, 0, 0};
        r[n - 1].keys += t->meta.entries;
        r[n - 1].fkeys += (double)t->meta.filter_keys;
    }
    *after += (double)run_keys;
    if (level == 0)
        return n;
    for (size_t k = 0; k < n && mine == SIZE_MAX; k++)
        if (r[k].level == level && r[k].id == run)
            mine = k;
    if (mine == SIZE_MAX) /* a run of its own: where it sorts does not matter */
        r[mine = n++] = (struct fb_run){level, run, 0, 0};
    r[mine].keys += run_keys;
    /* The output's run first: kv_filter_bits_run reads its bits at [0]. */
    struct fb_run tmp = r[0];
    r[0] = r[mine];
    r[mine] = tmp;
    return n;
}

double kv_filter_bits_run(kv_db *db, const struct kv_version *v, int level, uint64_t run,
                          uint64_t run_keys, struct kv_table *const *gone, size_t ngone)
{
    double bits = db->o.bloom_bits_per_key;
    if (db->o.filter_policy != KV_FILTER_MONKEY || bits == 0)
        return bits;
    /* The runs a missing key probes: level 0's tables, each a run of its
     * own, then each sorted run of the deeper levels as the job leaves it
     * (the output in, gone[] out). Level 0 is counted as it stands on
     * average, not as it happens to be: l0_compaction_trigger / 2 tables
     * of a memtable's entries. It fills and empties every few seconds
     * while writes come, and the deeper levels' tables, which stay for
     * long, should not get fewer bits because it was full the moment
     * they were written. Each run gets bits by its share of the keys
     * (kv_bloom_allocate: its FPR in proportion to its keys), so the many
     * small runs of lazy leveling's upper levels get more bits per key
     * than the one large run of the last level (doc/filter_science.md). */
    uint64_t l0 = atomic_load_explicit(&db->l0_run_keys, memory_order_relaxed);
    double held = 0, after = 0, fkeys0 = 0;
    size_t n0 = 0;
    uint64_t seen0 = 0;
    struct fb_run stack_runs[32];
    struct fb_run *dr = v->nruns + 1 <= 32 ? stack_runs : malloc((v->nruns + 1) * sizeof *dr);
    if (!dr)
        return bits;
    size_t nd = fb_runs(v, level, run, run_keys, gone, ngone, dr, &held, &after, &fkeys0, &n0,
                        &seen0);
    if (!l0)
        l0 = level == 0 ? run_keys : n0 ? seen0 / n0 : 0; /* no flush yet since open */
    /* A level of one run counts as at least as large as the level above
     * it, as in a tree that has done growing. A young deepest level is
     * smaller, and would get the bits of a small run; but its tables stay
     * while it grows past the level above, and would keep them. */
    uint64_t lkeys[KV_LEVELS] = {0};
    size_t lruns[KV_LEVELS] = {0};
    for (size_t k = 0; k < nd; k++) {
        lkeys[dr[k].level] += dr[k].keys;
        lruns[dr[k].level]++;
    }
    for (int l = 2; l < KV_LEVELS; l++)
        if (lruns[l] == 1 && lkeys[l] && lkeys[l] < lkeys[l - 1]) {
            for (size_t k = 0; k < nd; k++)
                if (dr[k].level == l)
                    dr[k].keys = lkeys[l - 1];
            lkeys[l] = lkeys[l - 1];
        }
    size_t runs0 = db->o.l0_compaction_trigger / 2 > 0 ? (size_t)db->o.l0_compaction_trigger / 2
                                                       : 1;
    if (!l0)
        runs0 = 0;
    size_t nruns = runs0 + nd;
    uint64_t stack_keys[64];
    double stack_bits[64];
    uint64_t *rk = nruns <= 64 ? stack_keys : malloc(nruns * sizeof *rk);
    double *out = nruns <= 64 ? stack_bits : malloc(nruns * sizeof *out);
    if (rk && out && nruns) {
        for (size_t r = 0; r < runs0; r++)
            rk[r] = l0;
        for (size_t k = 0; k < nd; k++)
            rk[runs0 + k] = dr[k].keys;
        size_t mine = level == 0 ? 0 : runs0; /* fb_runs put the output's run first */
        if (kv_bloom_allocate((kv_bloom_layout)db->o.filter_layout, rk, nruns, bits, out) ==
            KV_OK) {
            /* Tables keep the bits the tree gave them when they were
             * written, and the tree has changed since; so the memory the
             * live filters hold drifts from what the allocation gives
             * them now. Each new table takes its share of the drift (the
             * drift per key), which brings the total back as the tables
             * are rewritten. */
            double ideal = runs0 ? fkeys0 * out[0] : 0;
            for (size_t k = 0; k < nd; k++)
                ideal += dr[k].fkeys * out[runs0 + k];
            double drift = after > 0 ? (ideal - held) / after : 0;
            if (drift > 2)
                drift = 2;
            if (drift < -2)
                drift = -2;
            bits = out[mine] > 0 && out[mine] + drift > 0 ? out[mine] + drift : out[mine];
        }
    }
    if (rk != stack_keys)
        free(rk);
    if (out != stack_bits)
        free(out);
    if (dr != stack_runs)
        free(dr);
    return bits;
}

/* ---- building one table --------------------------------------------------------------- */

int kv_builder_start(kv_db *db, struct kv_builder *b, uint32_t level, double bits_per_key,
                     const char *note)
{
    memset(b, 0, sizeof *b);
    b->db = db;
    pthread_mutex_lock(&db->mu);
    int rc = kv_db_new_file_number(db, &b->meta.number);
    /* The deepest level that holds data (none below this one) is
     * compressed whatever compression_min_level says: a small database
     * lives there alone (RocksDB's bottommost level). */
    int bottom = 1;
    for (int l = (int)level + 1; l < KV_LEVELS && bottom; l++)
        bottom = db->current->start[l + 1] == db->current->start[l];
    /* compression_min_level counts the levels from the base level down
     * (the levels above it are empty), as RocksDB's compression_per_level
     * does under dynamic level sizes. */
    struct kv_shape shape;
    kv_level_shape(db, db->current, &shape);
    int depth = level == 0 ? 0 : (int)level - shape.base + 1;
    pthread_mutex_unlock(&db->mu);
    if (rc != KV_OK)
        return rc;
    b->meta.level = level;
    b->meta.min_seq = UINT64_MAX;
    kv_sst_options so;
    kv_sst_options_init(&so);
    so.block_size = db->o.block_size;
    /* Upper levels, small and soon rewritten, may be kept raw (kv.h,
     * compression_min_level), unless they are the bottom. */
    so.compression = bottom || depth >= db->o.compression_min_level ? db->o.compression
                                                                    : KV_COMPRESSION_NONE;
    if (so.compression != KV_COMPRESSION_NONE && db->o.compressed_block_size)
        so.block_size = db->o.compressed_block_size;
    so.compression_level = db->o.compression_level;
    so.dict_bytes = db->o.compression_dict_bytes;
    so.bits_per_key = bits_per_key;
    so.filter_layout = (kv_bloom_layout)db->o.filter_layout;
    so.seed = db->seed;
    so.note = note;
    so.comparator = db->tcmp;
    /* The directory is synced once for all of a job's tables, before the
     * manifest names them (kv_db_commit_blobs; repair's write_manifest). */
    so.defer_dir_sync = 1;
    char *path = kv_dbfile_path(db->path, b->meta.number, "sst");
    if (!path)
        return KV_ENOMEM;
    rc = kv_sst_writer_new(path, &so, &b->w);
    free(path);
    /* A keyed database's tables record the secret's check, never the
     * secret; kv_builder_add's hashes are then kv_db_hash's SipHash. */
    if (rc == KV_OK && db->keyed)
        rc = kv_sst_writer_set_keyed(b->w, db->secret_check);
    /* Scan filters (doc/database.md, "Filters that gate scans"): prefixes
     * go into the point filter, so only a table with one holds them; the
     * range filter stands alone, its seed the point filter's. */
    if (rc == KV_OK && db->o.prefix_len && bits_per_key > 0 &&
        (rc = kv_sst_writer_set_prefix(b->w, db->o.prefix_len)) == KV_OK)
        b->scan |= KV_BUILD_PREFIX;
    if (rc == KV_OK && db->o.range_filter_bits > 0 &&
        (rc = kv_sst_writer_set_range_filter(b->w, db->o.range_filter_bits, db->seed)) == KV_OK)
        b->scan |= KV_BUILD_RANGE;
    if (rc != KV_OK && b->w) {
        kv_sst_writer_abandon(b->w);
        b->w = NULL;
    }
    return rc;
}

/* Sets *dst (a meta key with capacity *cap; NULL cap: exactly sized) to key. */
static int set_key(uint8_t **dst, size_t *dlen, size_t *cap, const uint8_t *key, size_t klen)
{
    if (!cap || klen + 1 > *cap) {
        uint8_t *n = realloc(*dst, klen + 1);
        if (!n)
            return KV_ENOMEM;
        *dst = n;
        if (cap)
            *cap = klen + 1;
    }
    if (klen)
        memcpy(*dst, key, klen);
    *dlen = klen;
    return KV_OK;
}

/* Widens the table's range to hold [lo, hi] (user keys, inclusive). */
static int widen(struct kv_builder *b, const uint8_t *lo, size_t lolen, const uint8_t *hi,
                 size_t hilen)
{
    const kv_comparator *cmp = b->db->cmp;
    int rc = KV_OK;
    if (!b->have_range || kv_sst_cmp(cmp, lo, lolen, b->meta.smallest, b->meta.smallest_len) < 0)
        rc = set_key(&b->meta.smallest, &b->meta.smallest_len, NULL, lo, lolen);
    if (rc == KV_OK &&
        (!b->have_range || kv_sst_cmp(cmp, hi, hilen, b->meta.largest, b->meta.largest_len) > 0))
        rc = set_key(&b->meta.largest, &b->meta.largest_len, &b->largest_cap, hi, hilen);
    if (rc == KV_OK)
        b->have_range = 1;
    return rc;
}

/* The scan filters' part of an entry of user key ukey: its prefix's hash
 * when the prefix differs from the previous entry's, and the key itself
 * for the range filter (which passes a key equal to the last). */
static int scan_add(struct kv_builder *b, const uint8_t *ukey, size_t uklen)
{
    int rc = KV_OK;
    if (b->scan & KV_BUILD_PREFIX) {
        size_t n = uklen < b->db->o.prefix_len ? uklen : b->db->o.prefix_len;
        if (!b->have_pfx || n != b->pfxlen || (n && memcmp(ukey, b->pfx, n) != 0)) {
            if ((rc = set_key(&b->pfx, &b->pfxlen, &b->pfxcap, ukey, n)) != KV_OK)
                return rc;
            b->have_pfx = 1;
            rc = kv_sst_writer_add_prefix_hash(b->w, kv_prefix_hash(b->db, ukey, n));
        }
    }
    if (rc == KV_OK && (b->scan & KV_BUILD_RANGE))
        rc = kv_sst_writer_add_range_key(b->w, ukey, uklen);
    return rc;
}

int kv_builder_add(struct kv_builder *b, const uint8_t *ikey, size_t ilen, const uint8_t *ukey,
                   size_t uklen, uint64_t hash, uint64_t seq, const void *val, size_t vlen)
{
    int rc = kv_sst_writer_add_hashed(b->w, ikey, ilen, val, vlen, hash);
    if (rc != KV_OK)
        return rc;
    if (b->scan && (rc = scan_add(b, ukey, uklen)) != KV_OK)
        return rc;
    if (b->nrt) {
        /* Range tombstones reach past point keys: compare. */
        if ((rc = widen(b, ukey, uklen, ukey, uklen)) != KV_OK)
            return rc;
    } else {
        /* The range in user keys: the first key added, and the last. */
        if (!b->have_range &&
            (rc = set_key(&b->meta.smallest, &b->meta.smallest_len, NULL, ukey, uklen)) != KV_OK)
            return rc;
        if ((!b->have_range || uklen != b->meta.largest_len ||
             (uklen && memcmp(ukey, b->meta.largest, uklen) != 0)) &&
            (rc = set_key(&b->meta.largest, &b->meta.largest_len, &b->largest_cap, ukey, uklen)) !=
                KV_OK)
            return rc;
        b->have_range = 1;
    }
    if (seq < b->meta.min_seq)
        b->meta.min_seq = seq;
    if (seq > b->meta.max_seq)
        b->meta.max_seq = seq;
    b->meta.entries++;
    b->bytes += ilen + vlen;
    return KV_OK;
}

int kv_builder_add_range(struct kv_builder *b, const kv_rt_fragment *f)
{
    if (!f->nseq)
        return KV_OK;
    if (b->nrt + f->nseq > b->rtcap) {
        size_t nc = b->rtcap ? 2 * b->rtcap : 16;
        while (nc < b->nrt + f->nseq)
            nc *= 2;
        kv_rt *n = realloc(b->rts, nc * sizeof *n);
        if (!n)
            return KV_ENOMEM;
        b->rts = n;
        b->rtcap = nc;
    }
    /* The end is exclusive, but the range holds it: over by one key at
     * most, which costs a probe, never a wrong answer (doc/database.md). */
    int rc = widen(b, f->start, f->slen, f->end, f->elen);
    if (rc != KV_OK)
        return rc;
    for (size_t i = 0; i < f->nseq; i++) {
        b->rts[b->nrt++] = (kv_rt){.start = f->start,
                                   .slen = f->slen,
                                   .end = f->end,
                                   .elen = f->elen,
                                   .seq = f->seqs[i]};
        if (f->seqs[i] < b->meta.min_seq)
            b->meta.min_seq = f->seqs[i];
        if (f->seqs[i] > b->meta.max_seq)
            b->meta.max_seq = f->seqs[i];
        b->bytes += f->slen + f->elen + 8;
    }
    return KV_OK;
}

/* Hands the range tombstones added to the writer as the table's block. */
static int put_ranges(struct kv_builder *b)
{
    if (!b->nrt)
        return KV_OK;
    kv_rtset *set = NULL;
    uint8_t *blk = NULL;
    size_t len = 0;
    int rc = kv_rtset_union(b->db->cmp, NULL, 0, b->rts, b->nrt, NULL, NULL, &set);
    if (rc == KV_OK && set && (rc = kv_rtset_encode(set, &blk, &len)) == KV_OK)
        rc = kv_sst_writer_set_range_tombstones(b->w, blk, len);
    free(blk);
    kv_rtset_unref(set);
    return rc;
}

void kv_builder_note_blob(struct kv_builder *b, uint64_t number)
{
    if (!b->meta.blob_lo || number < b->meta.blob_lo)
        b->meta.blob_lo = number;
    if (number > b->meta.blob_hi)
        b->meta.blob_hi = number;
}

void kv_builder_abandon(struct kv_builder *b)
{
    kv_sst_writer_abandon(b->w);
    free(b->meta.smallest);
    free(b->meta.largest);
    free(b->rts);
    free(b->pfx);
    memset(b, 0, sizeof *b);
}

int kv_builder_finish(struct kv_builder *b, struct kv_table **out)
{
    *out = NULL;
    uint64_t size = 0;
    int rc = put_ranges(b);
    if (rc != KV_OK) {
        kv_builder_abandon(b);
        return rc;
    }
    free(b->rts);
    b->rts = NULL;
    b->nrt = b->rtcap = 0;
    free(b->pfx);
    b->pfx = NULL;
    b->pfxcap = 0;
    rc = kv_sst_writer_finish(b->w, &size);
    b->w = NULL;
    if (rc != KV_OK) {
        kv_builder_abandon(b);
        return rc;
    }
    b->meta.file_size = size;
    kv_table_meta meta = b->meta;
    memset(&b->meta, 0, sizeof b->meta);
    rc = kv_db_table_open(b->db, &meta, out); /* takes the keys */
    if (rc != KV_OK) {
        char *p = kv_dbfile_path(b->db->path, meta.number, "sst");
        if (p)
            remove(p);
        free(p);
        return rc;
    }
    /* Its pages are in the page cache, just written: map them all now,
     * on this thread, rather than a page fault at a time in the Gets that
     * read the table first (a fault costs microseconds in a Get of less
     * than one; doc/database.md, "Get"). A table read with O_DIRECT
     * (use_direct_reads) is not mapped: nothing to do. */
    kv_sst_reader_prefault((*out)->reader);
    kv_sst_properties p;
    kv_sst_reader_properties((*out)->reader, &p);
    (*out)->meta.filter_layout = (uint32_t)p.filter_layout;
    (*out)->meta.filter_bits_per_key = p.filter_bits_per_key;
    (*out)->meta.filter_k = p.filter_k;
    (*out)->meta.filter_keys = p.filter_keys;
    return KV_OK;
}
