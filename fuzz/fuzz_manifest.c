/* fuzz_manifest.c - libFuzzer target: the input is a set of manifest
 * records, put raw into a fresh LMDB manifest and then read by the store.
 *
 * The record decoders of kv/manifest.c are static, so they are reached the
 * way the store reaches them: the records are written straight into the
 * LMDB file (named databases "meta" and "tables", doc/manifest.md), then
 * kv_manifest_open + kv_manifest_load read them.
 *
 * Input: a flags byte, then records, each
 *     sel: u8   klen: u8   vlen: u16le   key: u8[klen]   value: u8[vlen]
 * (cut short at the end of the input). sel bit 0: 0 the "meta" database,
 * 1 "tables"; sel bit 1: replace the key by the one the value belongs
 * under ("state" in meta; in tables, the value's number, bytes 8..15, as 8
 * bytes big-endian), so that the fuzzer need not guess it. Flags bit 0:
 * rewrite each value's trailing checksum to the right one (the state's
 * when it is 48 bytes; a table's over all but its last 8 bytes), so that
 * the fuzzer gets past the checksum to the other rules. Flags bit 1: also
 * open the database with kv_open, write and read a key, close it.
 *
 * Checked against a decoding done here from doc/manifest.md alone, over
 * what LMDB actually stored:
 * - kv_manifest_open fails with KV_ECORRUPT exactly when there is no state
 *   record; kv_manifest_load returns KV_ECORRUPT, with an error text that
 *   names the MANIFEST, exactly when the state or any table record breaks
 *   a rule of the document, else KV_OK with the same state and the same
 *   tables, field for field, in number order;
 * - when it loads, the same state and tables written back with
 *   kv_manifest_apply (remove all, add all) load the same again, and the
 *   records LMDB then holds are the ones read, byte for byte (a version 1
 *   table record comes back as version 2, with its checksum);
 * - kv_inspect agrees with kv_manifest_load, and lists the tables in
 *   search order (level, level 0 newest first, deeper levels by key);
 * - with flags bit 1, kv_open succeeds exactly when the manifest loads,
 *   names no table (none of their files exist) and has format version 1
 *   or 2 (other "meta" records may also refuse it: check_open says how);
 *   a key written is then read back.
 * A mismatch traps; so does any crash, leak or sanitizer report.
 *
 * Each input gets a new directory (fuzz_tmp.h), removed at its end. Seeds:
 * corpus/manifest, written by gen_seeds.c (see README.md). */
#define _POSIX_C_SOURCE 200809L
#include <lmdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <kv/kv.h>

#include "../kv/manifest.h"
#include "fuzz_tmp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define STATE_SIZE 48
#define TABLE_FIXED 80
#define MAP_SIZE (16u << 20)
#define LEVELS 7                            /* a table's level is 0..6 */
#define MAX_SEQ (((uint64_t)1 << 56) - 1)   /* the last sequence number */
#define MAX_NEXT_FILE ((uint64_t)1 << 63)    /* the last file number (2^63 - 1), plus one */

/* ---- little helpers ------------------------------------------------------------- */

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static void put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

static void put_be64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (56 - 8 * i));
}

static int key_cmp(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    return c ? c : (alen > blen) - (alen < blen);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    CHECK(p != NULL);
    return p;
}

/* ---- what LMDB holds -------------------------------------------------------------- */

struct blob {
    uint8_t *key, *val;
    size_t klen, vlen;
};

struct stored {
    struct blob state;     /* val NULL: no "state" key */
    size_t nother_meta;    /* records in "meta" other than "state" */
    struct blob *tables;   /* in LMDB's key order */
    size_t ntables;
};

static void stored_free(struct stored *s)
{
    free(s->state.key);
    free(s->state.val);
    for (size_t i = 0; i < s->ntables; i++) {
        free(s->tables[i].key);
        free(s->tables[i].val);
    }
    free(s->tables);
    memset(s, 0, sizeof *s);
}

static void copy_blob(struct blob *b, const MDB_val *k, const MDB_val *v)
{
    b->klen = k->mv_size;
    b->vlen = v->mv_size;
    b->key = xmalloc(b->klen);
    b->val = xmalloc(b->vlen);
    memcpy(b->key, k->mv_data, b->klen);
    memcpy(b->val, v->mv_data, b->vlen);
}

/* flags: MDB_RDONLY or 0. No sync: the store opens the same file next,
 * through the page cache. */
static MDB_env *env_open(const char *file, unsigned flags)
{
    MDB_env *env;
    CHECK(mdb_env_create(&env) == MDB_SUCCESS);
    CHECK(mdb_env_set_maxdbs(env, 2) == MDB_SUCCESS);
    CHECK(mdb_env_set_mapsize(env, MAP_SIZE) == MDB_SUCCESS);
    CHECK(mdb_env_open(env, file, MDB_NOSUBDIR | MDB_NOSYNC | flags, 0644) == MDB_SUCCESS);
    return env;
}

/* Reads back the "state" value and every record of "tables". */
static void read_stored(MDB_env *env, struct stored *s)
{
    memset(s, 0, sizeof *s);
    MDB_txn *txn;
    MDB_dbi meta, tables;
    MDB_cursor *cur;
    MDB_val k = {5, "state"}, v;
    CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn) == MDB_SUCCESS);
    CHECK(mdb_dbi_open(txn, "meta", 0, &meta) == MDB_SUCCESS);
    int rc = mdb_get(txn, meta, &k, &v);
    CHECK(rc == MDB_SUCCESS || rc == MDB_NOTFOUND);
    if (rc == MDB_SUCCESS)
        copy_blob(&s->state, &k, &v);
    MDB_stat st;
    CHECK(mdb_stat(txn, meta, &st) == MDB_SUCCESS);
    s->nother_meta = st.ms_entries - (rc == MDB_SUCCESS);
    rc = mdb_dbi_open(txn, "tables", 0, &tables);
    CHECK(rc == MDB_SUCCESS || rc == MDB_NOTFOUND);
    if (rc == MDB_SUCCESS) {
        CHECK(mdb_cursor_open(txn, tables, &cur) == MDB_SUCCESS);
        size_t cap = 0;
        for (MDB_cursor_op op = MDB_FIRST; mdb_cursor_get(cur, &k, &v, op) == MDB_SUCCESS;
             op = MDB_NEXT) {
            if (s->ntables == cap) {
                cap = cap ? 2 * cap : 8;
                s->tables = realloc(s->tables, cap * sizeof *s->tables);
                CHECK(s->tables != NULL);
            }
            copy_blob(&s->tables[s->ntables++], &k, &v);
        }
        mdb_cursor_close(cur);
    }
    mdb_txn_abort(txn);
}

/* Puts the input's records into a new manifest file, and reads back what
 * LMDB made of them into *s. */
static void write_records(const char *file, const uint8_t *data, size_t size, struct stored *s)
{
    MDB_env *env = env_open(file, 0);
    MDB_txn *txn;
    MDB_dbi dbi[2];
    CHECK(mdb_txn_begin(env, NULL, 0, &txn) == MDB_SUCCESS);
    CHECK(mdb_dbi_open(txn, "meta", MDB_CREATE, &dbi[0]) == MDB_SUCCESS);
    CHECK(mdb_dbi_open(txn, "tables", MDB_CREATE, &dbi[1]) == MDB_SUCCESS);
    int fix = size > 0 && (data[0] & 1);
    size_t pos = 1;
    uint8_t *val = xmalloc(65536);
    while (pos + 4 <= size) {
        int sel = data[pos];
        size_t klen = data[pos + 1], vlen = (size_t)data[pos + 2] | (size_t)data[pos + 3] << 8;
        pos += 4;
        if (klen > size - pos)
            klen = size - pos;
        const uint8_t *key = data + pos;
        pos += klen;
        if (vlen > size - pos)
            vlen = size - pos;
        memcpy(val, data + pos, vlen);
        pos += vlen;
        int db = sel & 1;
        uint8_t kb[8];
        if ((sel & 2) && db == 0) {
            key = (const uint8_t *)"state";
            klen = 5;
        } else if ((sel & 2) && vlen >= 16) {
            put_be64(kb, le64(val + 8));
            key = kb;
            klen = 8;
        }
        if (fix && db == 0 && vlen == STATE_SIZE)
            put_le64(val + 40, XXH3_64bits(val, 40));
        else if (fix && db == 1 && vlen >= 8)
            put_le64(val + vlen - 8, XXH3_64bits(val, vlen - 8));
        MDB_val k = {klen, (void *)key}, v = {vlen, val};
        int rc = mdb_put(txn, dbi[db], &k, &v, 0);
        CHECK(rc == MDB_SUCCESS || rc == MDB_BAD_VALSIZE); /* LMDB refuses empty keys */
    }
    free(val);
    CHECK(mdb_txn_commit(txn) == MDB_SUCCESS);
    read_stored(env, s);
    mdb_env_close(env);
}

/* ---- the records as doc/manifest.md describes them ---------------------------------- */

/* The state value: 48 bytes, version 1, kind 1, reserved zero, checksum,
 * last_seq at most 2^56 - 1, next_file at most 2^63. */
static int decode_state_doc(const struct blob *b, kv_manifest_state *s)
{
    const uint8_t *p = b->val;
    if (b->vlen != STATE_SIZE || p[0] != 1 || p[1] != 1 || p[2] != 0 || p[3] != 0 ||
        le64(p + 40) != XXH3_64bits(p, 40) || le64(p + 16) > MAX_SEQ ||
        le64(p + 8) > MAX_NEXT_FILE)
        return 0;
    s->format_version = le32(p + 4);
    s->next_file = le64(p + 8);
    s->last_seq = le64(p + 16);
    s->log_number = le64(p + 24);
    s->seed = le64(p + 32);
    return 1;
}

/* A table value under an 8-byte key: version 2 (or 1, whose byte 2 is
 * zero; or 3, with blob_lo and blob_hi at 80 and the keys 16 bytes on),
 * kind 2, only known flag bits, reserved byte zero, keys of at most 2^20
 * bytes, length 88 + S + L (104 + S + L for version 3), checksum, number
 * equal to the key, level 0..6, and for version 3 1 <= blob_lo <= blob_hi.
 * The keys point into the blob. */
static int decode_table_doc(const struct blob *b, kv_table_meta *t)
{
    const uint8_t *p = b->val;
    memset(t, 0, sizeof *t);
    if (b->klen != 8 || b->vlen < TABLE_FIXED + 8)
        return 0;
    if (p[1] != 2 || p[3] != 0)
        return 0;
    if (!((p[0] == 1 && p[2] == 0) ||
          ((p[0] == 2 || p[0] == 3) && (p[2] & ~KV_TABLE_KNOWN_FLAGS) == 0)))
        return 0;
    size_t fixed = p[0] == 3 ? TABLE_FIXED + 16 : TABLE_FIXED;
    if (b->vlen < fixed + 8)
        return 0;
    uint64_t s = le32(p + 72), l = le32(p + 76);
    if (s > (1u << 20) || l > (1u << 20) || b->vlen != fixed + s + l + 8)
        return 0;
    if (p[0] == 3) {
        t->blob_lo = le64(p + 80);
        t->blob_hi = le64(p + 88);
        if (!t->blob_lo || t->blob_lo > t->blob_hi)
            return 0;
    }
    if (le64(p + b->vlen - 8) != XXH3_64bits(p, b->vlen - 8))
        return 0;
    if (le64(p + 8) != be64(b->key) || le32(p + 4) >= LEVELS)
        return 0;
    t->flags = p[2];
    t->level = le32(p + 4);
    t->number = le64(p + 8);
    t->file_size = le64(p + 16);
    t->min_seq = le64(p + 24);
    t->max_seq = le64(p + 32);
    t->entries = le64(p + 40);
    t->filter_layout = le32(p + 48);
    t->filter_k = le32(p + 52);
    uint64_t bits = le64(p + 56);
    memcpy(&t->filter_bits_per_key, &bits, sizeof bits);
    t->filter_keys = le64(p + 64);
    t->smallest = (uint8_t *)p + fixed;
    t->smallest_len = (size_t)s;
    t->largest = (uint8_t *)p + fixed + s;
    t->largest_len = (size_t)l;
    return 1;
}

/* What kv_manifest_load should give. */
struct expect {
    int have_state; /* kv_manifest_open finds a state record */
    int other_meta; /* "meta" holds records besides "state" */
    int ok;         /* every record is sound */
    kv_manifest_state state;
    kv_table_meta *tables;
    size_t ntables;
};

static void expect_from(const struct stored *s, struct expect *e)
{
    memset(e, 0, sizeof *e);
    e->have_state = s->state.val != NULL;
    e->other_meta = s->nother_meta > 0;
    e->ok = e->have_state && decode_state_doc(&s->state, &e->state);
    e->tables = xmalloc(s->ntables * sizeof *e->tables);
    /* ... and no table holds a sequence beyond the state's last_seq. */
    for (size_t i = 0; e->ok && i < s->ntables; i++)
        e->ok = decode_table_doc(&s->tables[i], &e->tables[i]) &&
                e->tables[i].max_seq <= e->state.last_seq;
    e->ntables = e->ok ? s->ntables : 0;
}

static void same_state(const kv_manifest_state *a, const kv_manifest_state *b)
{
    CHECK(a->format_version == b->format_version && a->next_file == b->next_file &&
          a->last_seq == b->last_seq && a->log_number == b->log_number && a->seed == b->seed);
}

static void same_table(const kv_table_meta *a, const kv_table_meta *b)
{
    CHECK(a->number == b->number && a->level == b->level && a->file_size == b->file_size);
    CHECK(a->min_seq == b->min_seq && a->max_seq == b->max_seq && a->entries == b->entries);
    CHECK(a->filter_layout == b->filter_layout && a->filter_k == b->filter_k);
    CHECK(memcmp(&a->filter_bits_per_key, &b->filter_bits_per_key, sizeof(double)) == 0);
    CHECK(a->filter_keys == b->filter_keys && a->flags == b->flags);
    CHECK(a->blob_lo == b->blob_lo && a->blob_hi == b->blob_hi);
    CHECK(a->smallest != NULL && a->largest != NULL);
    CHECK(a->smallest_len == b->smallest_len && a->largest_len == b->largest_len);
    CHECK(a->smallest_len == 0 || memcmp(a->smallest, b->smallest, a->smallest_len) == 0);
    CHECK(a->largest_len == 0 || memcmp(a->largest, b->largest, a->largest_len) == 0);
}

/* Loads through the store and compares with the expectation. */
static void load_and_compare(kv_manifest *m, const struct expect *e)
{
    kv_manifest_state st;
    kv_table_meta *tables = (kv_table_meta *)1;
    size_t n = 99;
    int rc = kv_manifest_load(m, &st, &tables, &n);
    if (!e->ok) {
        CHECK(rc == KV_ECORRUPT && tables == NULL && n == 0);
        CHECK(strstr(kv_error_text(), "/MANIFEST: ") != NULL); /* names the file */
        return;
    }
    CHECK(rc == KV_OK && n == e->ntables && (n == 0) == (tables == NULL));
    same_state(&st, &e->state);
    for (size_t i = 0; i < n; i++) {
        same_table(&tables[i], &e->tables[i]);
        CHECK(i == 0 || tables[i - 1].number < tables[i].number);
    }
    kv_manifest_free_tables(tables, n);
}

/* After kv_manifest_apply wrote them back: the same bytes, version 1
 * table records turned into version 2 ones. */
static void same_records(const struct stored *before, const struct stored *after)
{
    CHECK(after->state.val != NULL && after->state.vlen == before->state.vlen);
    CHECK(memcmp(after->state.val, before->state.val, before->state.vlen) == 0);
    CHECK(after->ntables == before->ntables);
    for (size_t i = 0; i < before->ntables; i++) {
        const struct blob *a = &after->tables[i], *b = &before->tables[i];
        CHECK(a->klen == 8 && b->klen == 8 && memcmp(a->key, b->key, 8) == 0);
        CHECK(a->vlen == b->vlen);
        uint8_t *want = xmalloc(b->vlen);
        memcpy(want, b->val, b->vlen);
        if (want[0] == 1) {
            want[0] = 2;
            put_le64(want + b->vlen - 8, XXH3_64bits(want, b->vlen - 8));
        }
        CHECK(memcmp(a->val, want, b->vlen) == 0);
        free(want);
    }
}

/* kv_inspect's order: level, then level 0 newest first, deeper levels by
 * run (newest, the largest id, first), then smallest key. */
static int search_order_ok(const kv_dir_table *a, const kv_dir_table *b)
{
    if (a->level != b->level)
        return a->level < b->level;
    if (a->level == 0)
        return a->number > b->number;
    if (a->run != b->run)
        return a->run > b->run;
    return key_cmp(a->smallest, a->smallest_len, b->smallest, b->smallest_len) <= 0;
}

static void check_inspect(const char *dir, const struct expect *e)
{
    kv_dir_info *info;
    int rc = kv_inspect(dir, &info);
    if (!e->ok) {
        CHECK(rc == KV_ECORRUPT && info == NULL);
        return;
    }
    CHECK(rc == KV_OK);
    CHECK(info->format_version == e->state.format_version && info->next_file == e->state.next_file &&
          info->last_seq == e->state.last_seq && info->log_number == e->state.log_number &&
          info->seed == e->state.seed);
    CHECK(info->ntables == e->ntables);
    for (size_t i = 0; i < info->ntables; i++) {
        const kv_dir_table *t = &info->tables[i];
        CHECK(i == 0 || search_order_ok(&info->tables[i - 1], t));
        CHECK(!t->present); /* no table file exists */
        size_t j = 0;
        while (j < e->ntables && e->tables[j].number != t->number)
            j++;
        CHECK(j < e->ntables);
        const kv_table_meta *w = &e->tables[j];
        CHECK(t->level == w->level && t->file_size == w->file_size && t->entries == w->entries &&
              t->min_seq == w->min_seq && t->max_seq == w->max_seq &&
              t->filter_layout == (int)w->filter_layout && t->k == w->filter_k &&
              t->filter_keys == w->filter_keys && (!t->level || t->run == w->run));
        CHECK(t->smallest_len == w->smallest_len && t->largest_len == w->largest_len);
        CHECK(!t->smallest_len || memcmp(t->smallest, w->smallest, t->smallest_len) == 0);
        CHECK(!t->largest_len || memcmp(t->largest, w->largest, t->largest_len) == 0);
    }
    kv_inspect_free(info);
}

/* kv_open on the manifest alone: it opens when the manifest loads, names
 * no table and has format version 1 or 2 (2: the database used range
 * deletes, merges or a TTL; its "features" record may be absent); a
 * missing table file is KV_ECORRUPT, and so is a next_file of 2^63, which
 * leaves no number for the log (file numbers end at 2^63 - 1; a database
 * that used them all stays readable by kv_inspect, not writable). "meta"
 * records besides "state" (features, filter_secret, comparator, blobs)
 * have decoders of their own, not modelled here: with one present, the
 * open may also fail with KV_ECORRUPT or KV_EINVAL, never crash. */
static void check_open(const char *dir, const struct expect *e)
{
    kv_options o;
    kv_options_init(&o);
    o.create_if_missing = 0;
    kv_db *db;
    int rc = kv_open(dir, &o, &db);
    if (!e->ok || e->state.format_version < 1 || e->state.format_version > 2 || e->ntables > 0 ||
        e->state.next_file >= MAX_NEXT_FILE) {
        CHECK(rc == KV_ECORRUPT && db == NULL);
        return;
    }
    if (e->other_meta && (rc == KV_ECORRUPT || rc == KV_EINVAL)) {
        CHECK(db == NULL);
        return;
    }
    CHECK(rc == KV_OK);
    /* A state from a fuzzer may hold sequence numbers near their end, so
     * a write may be refused; one that is accepted is read back. */
    if (kv_put(db, "key", 3, "value", 5) == KV_OK) {
        void *v;
        size_t vlen;
        CHECK(kv_get(db, "key", 3, &v, &vlen) == KV_OK);
        CHECK(vlen == 5 && memcmp(v, "value", 5) == 0);
        kv_free(v);
    }
    kv_close(db);
}

/* ---- the target ------------------------------------------------------------------- */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fz_base[0])
        fz_init("manifest");
    const char *dir = fz_mkdir();
    char file[500];
    snprintf(file, sizeof file, "%s/%s", dir, KV_MANIFEST_FILE);

    struct stored before;
    write_records(file, data, size, &before);
    struct expect e;
    expect_from(&before, &e);

    kv_manifest *m;
    int rc = kv_manifest_open(dir, 0, NULL, &m);
    if (e.have_state) {
        CHECK(rc == KV_OK);
        load_and_compare(m, &e);
    } else {
        CHECK(rc == KV_ECORRUPT && m == NULL); /* a manifest without state is not ours */
    }
    if (e.ok) {
        uint64_t *numbers = xmalloc(e.ntables * sizeof *numbers);
        for (size_t i = 0; i < e.ntables; i++)
            numbers[i] = e.tables[i].number;
        CHECK(kv_manifest_apply(m, &e.state, numbers, e.ntables, e.tables, e.ntables) == KV_OK);
        free(numbers);
        load_and_compare(m, &e);
    }
    kv_manifest_close(m);
    if (e.ok) {
        struct stored after;
        MDB_env *env = env_open(file, MDB_RDONLY);
        read_stored(env, &after);
        mdb_env_close(env);
        same_records(&before, &after);
        stored_free(&after);
    }
    check_inspect(dir, &e);
    if (size > 0 && (data[0] & 2))
        check_open(dir, &e);
    free(e.tables);
    stored_free(&before);
    fz_done();
    return 0;
}
