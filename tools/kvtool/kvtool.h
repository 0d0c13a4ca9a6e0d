/* kvtool.h - what kvtool's files share: the exit codes, the parsed command
 * line, messages, printing and parsing keys, one open table and its check.
 * Private to kvtool; main.c says what the tool does and which file holds what. */
#ifndef KVTOOL_H
#define KVTOOL_H

#define _POSIX_C_SOURCE 200809L
#include <kv/kv.h>
#include <kv/sstable.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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

/* Parsed command line. */
struct opts {
    int help, create;
    const char *from, *to, *limit, *number, *prefix_len;
    const char *pos[3];
    int npos;
};

/* ---- main.c: messages, bytes ------------------------------------------------------------ */

/* --hex: print keys and values as hex, and read them as hex. */
extern int hex_mode;
/* The command being run ("sst dump"), for messages. */
extern char cmd_name[64];

/* "kvtool: CMD: " and the message on stderr; returns EXIT_FAIL. */
int fail(const char *fmt, ...);
/* The name of a kv_status code, as status.h spells it. */
const char *code_name(int rc);
/* A call of kv about `what` (a directory or file) failed with rc; returns EXIT_FAIL. */
int kv_fail(const char *what, int rc);

/* Bytewise, then shorter first: the order of keys in kv. */
int key_cmp(const void *a, size_t alen, const void *b, size_t blen);
int key_eq(const void *a, size_t alen, const void *b, size_t blen);
/* Bytes as the user sees them: "escaped" in quotes, or 0x-hex (--hex). */
void put_str(FILE *f, const void *p, size_t n);
/* The same without quotes (the value printed by `db get`). */
void put_bare(FILE *f, const void *p, size_t n);
/* A key or value from the command line into a malloc'd *out; 0, or -1 with a message. */
int parse_bytes(const char *what, const char *s, uint8_t **out, size_t *len);
/* A decimal count; 0, or -1 with a message. */
int parse_count(const char *what, const char *s, uint64_t *out);

/* ---- sst.c: one table -------------------------------------------------------------------- */

/* A store table's key decoded (kv_sst_store_key_decode): the user key goes
 * to `user`, the caller's buffer, at least as long as the stored key. */
struct ikey {
    uint8_t *user;
    kv_sst_store_key k;
};

struct table {
    const char *path;
    kv_sst_reader *r;
    kv_sst_properties p;
    int store; /* its keys are the store's internal keys */
};

/* 1 when k (n bytes) is a store key, decoded into *out; else 0. */
int ikey_decode(const uint8_t *k, size_t n, struct ikey *out);
/* snprintf that may cut the text short to fit. */
void fit(char *buf, size_t n, const char *fmt, ...);
/* The one-line reason a table or blob file call failed. */
void table_error(char *buf, size_t n, const char *path, int rc);
/* Opens path as *t; KV_OK, or the code with the reason in err. */
int table_open(const char *path, kv_sst_cache *cache, uint64_t id, struct table *t, char *err,
               size_t errlen);
void table_close(struct table *t);
const char *layout_name(int layout);

int sst_dump(struct opts *o);
int sst_props(struct opts *o);
int sst_verify(struct opts *o);

/* ---- blob.c ---------------------------------------------------------------------------- */

/* A kv_blob_scan callback that counts the records (ctx: a uint64_t). */
int count_record(void *ctx, const void *key, size_t klen, const void *val, size_t vlen,
                 const kv_blob_ref *ref);

int blob_dump(struct opts *o);
int blob_verify(struct opts *o);

/* ---- db.c ------------------------------------------------------------------------------ */

/* Why a database could not be opened or inspected, on stderr; returns EXIT_FAIL. */
int db_error(const char *dir, int rc);
/* kv_inspect, its failure said (db_error); 0 or EXIT_FAIL. */
int inspect(const char *dir, kv_dir_info **info);
/* dir/NNNNNN.sst (six digits at least, as the store names its tables). */
void table_path(char *buf, size_t n, const char *dir, uint64_t number);
/* What a file the manifest does not name is, or NULL for the others. */
const char *file_kind_note(int kind);
/* Share of part in whole as a percentage; 0 for an empty whole. */
double percent(uint64_t part, uint64_t whole);

int db_explain(struct opts *o);
int db_info(struct opts *o);
int db_get(struct opts *o);
int db_put(struct opts *o);
int db_delete(struct opts *o);
int db_scan(struct opts *o);
int db_stats(struct opts *o);
int db_property(struct opts *o);
int db_size(struct opts *o);
int db_compact(struct opts *o);
int db_repair(struct opts *o);
int db_destroy(struct opts *o);
int db_checkpoint(struct opts *o);

/* ---- verify.c: checking a table, db verify ----------------------------------------------- */

/* What check_table learnt. */
struct table_check {
    uint64_t entries;
    uint64_t filter_keys;  /* distinct consecutive filter hashes */
    uint64_t lookups;      /* keys looked up through the filter */
    int filter_checked;    /* the filter's hashes could be recomputed */
    uint8_t *first, *last; /* user keys (store) or keys */
    size_t first_len, last_len;
    uint64_t min_seq, max_seq;
    uint64_t blob_refs; /* entries of kind KV_SST_KIND_BLOB */
};

/* The blob files db verify checks references against (verify.c). */
struct blob_set;

/* Checks one open table (verify.c says what); 0, or -1 with the problem
 * in err. With bs, every blob reference is checked against it too. */
int check_table(struct table *t, struct table_check *c, struct blob_set *bs, char *err, size_t n);
void check_free(struct table_check *c);

int db_verify(struct opts *o);

#endif
