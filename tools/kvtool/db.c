/* db.c - kvtool's database commands but db verify (verify.c): explain, info,
 * get, put, delete, scan, stats, property, size, compact, repair, checkpoint, destroy. */
#include "kvtool.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

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

int db_error(const char *dir, int rc)
{
    if (rc == KV_EBUSY)
        return fail("%s: the database is open elsewhere (%s); close it first", dir, code_name(rc));
    if (rc == KV_NOTFOUND && holds_kv_files(dir))
        return fail("%s: no MANIFEST beside table or log files: the manifest was lost "
                    "(kvtool db repair %s rebuilds it from them)",
                    dir, dir);
    if (rc == KV_NOTFOUND)
        return fail("%s: no database there", dir);
    return kv_fail(dir, rc);
}

/* Opens the database for a command that writes (put, delete, compact:
 * the writer's handle, so the LOCK; KV_EBUSY when it is open elsewhere) or
 * only reads (explain, get, scan, stats, property, size: a read-only handle,
 * kv_options.read_only, which takes no lock and writes nothing, so these
 * work on a database a writer holds open, and see what it wrote). */
static int open_db_as(const char *dir, int create, int read_only, size_t prefix_len, kv_db **db)
{
    *db = NULL;
    if (!create && !is_database(dir))
        return db_error(dir, KV_NOTFOUND);
    kv_options o;
    kv_options_init(&o);
    o.create_if_missing = create;
    o.read_only = read_only;
    o.prefix_len = prefix_len;
    int rc = kv_open(dir, &o, db);
    return rc == KV_OK ? 0 : db_error(dir, rc);
}

static int open_db(const char *dir, int create, kv_db **db)
{
    return open_db_as(dir, create, 0, 0, db);
}

static int open_read_only(const char *dir, kv_db **db)
{
    return open_db_as(dir, 0, 1, 0, db);
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
    case KV_EXPLAIN_RANGE_DELETED: return "deleted (range tombstone)";
    case KV_EXPLAIN_MERGED: return "merged";
    case KV_EXPLAIN_EXPIRED: return "expired (ttl)";
    default: return s->false_positive ? "absent (a false positive)" : "absent";
    }
}

/* What follows a step's outcome: the deciding entry's sequence (a range
 * tombstone's for _RANGE_DELETED) and the merge operands the step found. */
static void put_step_tail(const kv_explain_step *s)
{
    if (s->outcome != KV_EXPLAIN_ABSENT && s->outcome != KV_EXPLAIN_FAILED)
        printf(", seq %" PRIu64, s->seq);
    if (s->merge_operands)
        printf(", %zu merge operand%s", s->merge_operands, s->merge_operands == 1 ? "" : "s");
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

/* A filter's answer in an explained seek. */
static const char *filter_answer(int f)
{
    return f == KV_EXPLAIN_FILTER_NEGATIVE ? "negative"
           : f == KV_EXPLAIN_FILTER_MAYBE  ? "maybe"
                                           : "not asked";
}

/* One table step of an explained seek: the table, both filters' answers
 * (with the range filter's expected FPR for the query's width when it was
 * asked), then skipped, the data block read, or nothing read. */
static void put_seek_table(const kv_explain_step *s, size_t *reads, uint64_t *bytes, size_t *hits)
{
    printf("table %06" PRIu64 ".sst level %u [", s->number, s->level);
    put_str(stdout, s->smallest, s->smallest_len);
    fputs(" .. ", stdout);
    put_str(stdout, s->largest, s->largest_len);
    printf("]: prefix filter %s, range filter %s", filter_answer(s->filter),
           filter_answer(s->range_filter));
    if (s->range_filter != KV_EXPLAIN_FILTER_NOT_ASKED)
        printf(" (expected FPR %.4g%%)", 100 * s->range_expected_fpr);
    if (s->filter == KV_EXPLAIN_FILTER_NEGATIVE || s->range_filter == KV_EXPLAIN_FILTER_NEGATIVE)
        fputs(": skipped, nothing read", stdout);
    else if (s->block == KV_EXPLAIN_BLOCK_NONE)
        fputs(": no block read", stdout);
    else {
        const char *from = s->block == KV_EXPLAIN_BLOCK_CACHE ? "from the block cache"
                                                              : "read from disk";
        if (s->block_bytes) /* which block, when the seek recorded it */
            printf(": data block at offset %" PRIu64 " (%" PRIu64 " bytes) %s", s->block_offset,
                   s->block_bytes, from);
        else
            printf(": a data block %s", from);
        if (s->block == KV_EXPLAIN_BLOCK_CACHE)
            (*hits)++;
        else {
            (*reads)++;
            *bytes += s->block_bytes;
        }
    }
}

/* A bound of an explained seek, or what an open one stands for. */
static void put_bound(const uint8_t *b, size_t n, const char *open)
{
    if (b)
        put_str(stdout, b, n);
    else
        fputs(open, stdout);
}

/* db explain DIR --from K --to K: one range query (kv_explain_seek), each
 * source it met, each table's filters and what was read, the first key. */
static int explain_range(struct opts *o)
{
    const char *dir = o->pos[0];
    uint8_t *lo = NULL, *hi = NULL;
    size_t llen = 0, hlen = 0;
    uint64_t plen = 0;
    kv_db *db = NULL;
    kv_explain *x = NULL;
    int status = EXIT_FAIL;
    if ((o->from && parse_bytes("--from", o->from, &lo, &llen) != 0) ||
        (o->to && parse_bytes("--to", o->to, &hi, &hlen) != 0) ||
        (o->prefix_len && parse_count("--prefix_len", o->prefix_len, &plen) != 0) ||
        open_db_as(dir, 0, 1, (size_t)plen, &db) != 0)
        goto out;
    int rc = kv_explain_seek(db, lo, llen, hi, hlen, &x);
    if (rc != KV_OK) {
        status = close_db(dir, db, kv_fail(dir, rc));
        db = NULL;
        goto out;
    }
    fputs("seek [", stdout);
    put_bound(lo, llen, "the first key");
    fputs(", ", stdout);
    put_bound(hi, hlen, "past the last key");
    printf("): reading at sequence %" PRIu64 ", %zu live tables, prefix_len %" PRIu64 "\n",
           x->snapshot, x->live_tables, plen);
    size_t checked = 0, pskips = 0, rskips = 0, fps = 0, reads = 0, hits = 0;
    uint64_t read_bytes = 0;
    for (size_t i = 0; i < x->nsteps; i++) {
        const kv_explain_step *s = &x->steps[i];
        printf("%3zu. ", i + 1);
        if (s->where != KV_EXPLAIN_TABLE)
            fputs(s->where == KV_EXPLAIN_MEMTABLE ? "memtable" : "immutable memtable", stdout);
        else {
            checked++;
            pskips += s->filter == KV_EXPLAIN_FILTER_NEGATIVE;
            rskips += s->filter != KV_EXPLAIN_FILTER_NEGATIVE &&
                      s->range_filter == KV_EXPLAIN_FILTER_NEGATIVE;
            fps += (size_t)s->false_positive;
            put_seek_table(s, &reads, &read_bytes, &hits);
        }
        printf(": %s", explain_outcome(s));
        put_step_tail(s);
        fputc('\n', stdout);
    }
    if (x->result == KV_OK) {
        fputs("result: first key ", stdout);
        put_str(stdout, x->value, x->value_len);
        fputc('\n', stdout);
    } else if (x->result == KV_NOTFOUND)
        fputs("result: no key in the range\n", stdout);
    else
        printf("result: error: %s (%s)\n", code_name(x->result), kv_strerror(x->result));
    printf("summary: %zu of %zu live tables checked, %zu skipped by the prefix filter, %zu by "
           "the range filter, %zu false positive%s, %zu data block%s read from disk",
           checked, x->live_tables, pskips, rskips, fps, PLURAL(fps), reads, PLURAL(reads));
    if (read_bytes)
        printf(" (%" PRIu64 " bytes)", read_bytes);
    printf(", %zu from the block cache\n", hits);
    status = 0;
    if (x->result != KV_OK && x->result != KV_NOTFOUND) {
        fflush(stdout);
        status = kv_fail(dir, x->result);
    }
out:
    kv_free(x);
    free(lo);
    free(hi);
    return db ? close_db(dir, db, status) : status;
}

int db_explain(struct opts *o)
{
    int range = o->from || o->to;
    if (range == (o->npos == 2) || (o->prefix_len && !range)) {
        fprintf(stderr, "kvtool: %s: %s (see kvtool %s --help)\n", cmd_name,
                range          ? "a KEY, or --from/--to for a range: not both"
                : o->npos == 2 ? "--prefix_len goes with --from/--to"
                               : "missing KEY (or --from/--to for a range)",
                cmd_name);
        return EXIT_USAGE;
    }
    if (range)
        return explain_range(o);
    const char *dir = o->pos[0];
    uint8_t *key;
    size_t klen;
    if (parse_bytes("KEY", o->pos[1], &key, &klen) != 0)
        return EXIT_FAIL;
    kv_db *db;
    if (open_read_only(dir, &db) != 0) {
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
            put_step_tail(s);
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
        put_step_tail(s);
        put_blob_read(s, &blob_reads, &blob_bytes);
        fputc('\n', stdout);
    }
    if (x->result == KV_OK) {
        fputs("result: found ", stdout);
        put_str(stdout, x->value, x->value_len);
        fputc('\n', stdout);
    } else if (x->result == KV_NOTFOUND) {
        int last = x->nsteps ? x->steps[x->nsteps - 1].outcome : KV_EXPLAIN_ABSENT;
        printf("result: not found%s\n", last == KV_EXPLAIN_DELETED         ? " (deleted)"
                                        : last == KV_EXPLAIN_RANGE_DELETED ? " (range deleted)"
                                        : last == KV_EXPLAIN_EXPIRED       ? " (expired)"
                                                                           : "");
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

int db_get(struct opts *o)
{
    const char *dir = o->pos[0];
    uint8_t *key;
    size_t klen;
    if (parse_bytes("KEY", o->pos[1], &key, &klen) != 0)
        return EXIT_FAIL;
    kv_db *db;
    if (open_read_only(dir, &db) != 0) {
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

int db_put(struct opts *o)
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

int db_delete(struct opts *o)
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

int db_scan(struct opts *o)
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
        (o->limit && parse_count("--limit", o->limit, &limit) != 0) ||
        open_read_only(dir, &db) != 0)
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

int db_stats(struct opts *o)
{
    const char *dir = o->pos[0];
    kv_db *db;
    if (open_read_only(dir, &db) != 0)
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

int db_property(struct opts *o)
{
    const char *dir = o->pos[0];
    kv_db *db;
    if (open_read_only(dir, &db) != 0)
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

int db_size(struct opts *o)
{
    const char *dir = o->pos[0];
    uint8_t *from = NULL, *to = NULL;
    size_t flen = 0, tlen = 0;
    int status = EXIT_FAIL;
    kv_db *db = NULL;
    if ((o->from && parse_bytes("--from", o->from, &from, &flen) != 0) ||
        (o->to && parse_bytes("--to", o->to, &to, &tlen) != 0) || open_read_only(dir, &db) != 0)
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

int db_compact(struct opts *o)
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
        for (int l = 0; l < LEVELS; l++) {
            if (!after.level_tables[l])
                continue;
            printf("level %d: %" PRIu64 " table%s, %" PRIu64 " bytes", l, after.level_tables[l],
                   PLURAL(after.level_tables[l]), after.level_bytes[l]);
            /* Sorted runs of a deeper level: shown when several (lazy leveling). */
            if (l > 0 && after.level_runs[l] > 1)
                printf(", %" PRIu64 " runs", after.level_runs[l]);
            printf("\n");
        }
    }
    return close_db(dir, db, status);
}

int db_repair(struct opts *o)
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

int db_destroy(struct opts *o)
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

/* db checkpoint: kv_checkpoint through a read-only handle (what DIR holds
 * as it opens, a live writer's logs included; nothing written into DIR),
 * then what NEWDIR holds: its files, and of those the ones linked to the
 * source's (a link count above 1) and the bytes of the rest (copies: the
 * logs always, everything across file systems). */
int db_checkpoint(struct opts *o)
{
    const char *dir = o->pos[0], *to = o->pos[1];
    kv_db *db = NULL;
    if (open_read_only(dir, &db) != 0)
        return EXIT_FAIL;
    struct timespec t0, t1;
    int rc;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rc = kv_checkpoint(db, to);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (rc != KV_OK)
        return close_db(dir, db, kv_fail(to, rc));
    uint64_t files = 0, linked = 0, copied = 0;
    DIR *d = opendir(to);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        char p[4200];
        struct stat st;
        if (e->d_name[0] == '.')
            continue;
        fit(p, sizeof p, "%s/%s", to, e->d_name);
        if (stat(p, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        files++;
        if (st.st_nlink > 1)
            linked++;
        else
            copied += (uint64_t)st.st_size;
    }
    if (d)
        closedir(d);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    printf("checkpoint: %s: %" PRIu64 " file%s, %" PRIu64 " linked, %" PRIu64
           " bytes copied, %.1f ms\n",
           to, files, PLURAL(files), linked, copied, ms);
    return close_db(dir, db, 0);
}

/* dir/NNNNNN.sst (six digits at least, as the store names its tables). */
void table_path(char *buf, size_t n, const char *dir, uint64_t number)
{
    snprintf(buf, n, "%s/%06" PRIu64 ".sst", dir, number);
}

int inspect(const char *dir, kv_dir_info **info)
{
    int rc = kv_inspect(dir, info);
    /* kv_inspect's text names the file at fault and what is wrong with it */
    return rc == KV_OK ? 0 : db_error(dir, rc);
}

const char *file_kind_note(int kind)
{
    switch (kind) {
    case KV_FILE_ORPHAN:
        return "a table the manifest does not name (left by a crash; the next open deletes it)";
    case KV_FILE_TEMP: return "an unfinished table (left by a crash; the next open deletes it)";
    case KV_FILE_OLD_LOG:
        return "a log older than the live one (already in tables; the next open deletes it)";
    case KV_FILE_BLOB_ORPHAN:
        return "a blob file the manifest does not name (left by a crash; the next open "
               "deletes it)";
    default: return NULL;
    }
}

/* Share of part in whole as a percentage; 0 for an empty whole. */
double percent(uint64_t part, uint64_t whole)
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
               " live bytes, %" PRIu64 " garbage bytes, %.2f%% garbage\n",
               records, PLURAL(records), grecords, rbytes - gbytes, gbytes,
               percent(gbytes, rbytes));
    int status = 0;
    for (size_t i = 0; i < info->nblobs; i++)
        if (!info->blobs[i].present) {
            fflush(stdout);
            status = fail("%s: blob file %06" PRIu64 ".blob is in the manifest but not on disk",
                          dir, info->blobs[i].number);
        }
    return status;
}

/* db info's first lines: the manifest's counters and the live logs. */
static void info_counters(const char *dir, const kv_dir_info *info)
{
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
    /* The error state (a failed fsync, a full disk) belongs to the handle
     * that met it and is never written to the directory. */
    printf("background error: none on disk (a live handle's is kv_stats' background_error, "
           "kv_background_error in kvtool db stats)\n");
}

/* The filters of one level, summed over its tables as db info reads them. */
struct level_filters {
    double bits, keys; /* filter bits and keys */
    double fpr;        /* level 0: the tables' expected FPRs summed; deeper: weighted by entries */
    double entries;
};

/* Totals of db info over every table. */
struct info_totals {
    uint64_t bytes, filter, entries;
    int status; /* EXIT_FAIL once a table could not be read */
};

/* One table's line of db info (level l): its numbers and range, then what
 * its reader says (compression, filter), or MISSING or UNREADABLE. */
static void info_table(const char *dir, int l, const kv_dir_table *t, struct level_filters *lf,
                       struct info_totals *tot)
{
    printf("  %06" PRIu64 ".sst  %" PRIu64 " entries  %" PRIu64 " bytes  seq %" PRIu64 "..%" PRIu64
           "  [",
           t->number, t->entries, t->file_size, t->min_seq, t->max_seq);
    put_str(stdout, t->smallest, t->smallest_len);
    fputs(" .. ", stdout);
    put_str(stdout, t->largest, t->largest_len);
    fputs("]  ", stdout);
    tot->entries += t->entries;
    char path[4096], err[600];
    table_path(path, sizeof path, dir, t->number);
    struct table tb;
    if (!t->present) {
        printf("MISSING\n");
        return;
    }
    if (table_open(path, NULL, t->number, &tb, err, sizeof err) != KV_OK) {
        printf("UNREADABLE\n");
        fflush(stdout);
        tot->status = fail("%s", err);
        return;
    }
    /* its compression, so that the levels' show (compression_min_level) */
    if (tb.p.compression == KV_COMPRESSION_ZSTD && tb.p.dict_bytes)
        printf("zstd, dictionary %zu bytes  ", tb.p.dict_bytes);
    else
        printf("%s  ", tb.p.compression == KV_COMPRESSION_ZSTD ? "zstd" : "raw");
    if (tb.p.filter_bits) {
        printf("filter %zu bytes (%s, %.2f bits/key, k %u, %" PRIu64
               " keys, expected FPR %.4f%%)\n",
               tb.p.filter_bytes, layout_name(tb.p.filter_layout),
               tb.p.filter_keys ? (double)tb.p.filter_bits / (double)tb.p.filter_keys : 0.0,
               tb.p.filter_k, tb.p.filter_keys, 100 * tb.p.filter_expected_fpr);
        tot->filter += tb.p.filter_bytes;
    } else
        printf("no filter\n");
    double fpr = tb.p.filter_bits ? tb.p.filter_expected_fpr : 1.0;
    lf->bits += (double)tb.p.filter_bits;
    lf->keys += (double)tb.p.filter_keys;
    lf->fpr += l == 0 ? fpr : fpr * (double)t->entries;
    lf->entries += (double)t->entries;
    table_close(&tb);
}

/* Level l of db info: its tables and its filters. Returns the expected FPR
 * a missing key meets in it (each level-0 table is probed; of a deeper
 * level, the table whose range holds the key, so its tables weigh by
 * their share of the level's keys); 0 for an empty level. */
static double info_level(const char *dir, const kv_dir_info *info, int l, struct info_totals *tot)
{
    size_t nl = 0;
    uint64_t bytes = 0;
    for (size_t i = 0; i < info->ntables; i++)
        if (info->tables[i].level == (unsigned)l) {
            nl++;
            bytes += info->tables[i].file_size;
        }
    if (!nl)
        return 0;
    printf("level %d: %zu table%s, %" PRIu64 " bytes\n", l, nl, nl == 1 ? "" : "s", bytes);
    /* The level's filters: bits per key over its filter keys, and the
     * expected FPR a missing key meets in it. */
    struct level_filters lf = {0};
    for (size_t i = 0; i < info->ntables; i++)
        if (info->tables[i].level == (unsigned)l)
            info_table(dir, l, &info->tables[i], &lf, tot);
    if (l > 0 && lf.entries > 0)
        lf.fpr /= lf.entries;
    printf("  level %d filters: %.2f bits/key, expected FPR %.4f%%%s\n", l,
           lf.keys > 0 ? lf.bits / lf.keys : 0.0, 100 * lf.fpr,
           l == 0 ? " summed over its tables (a missing key probes each)" : "");
    return lf.fpr;
}

int db_info(struct opts *o)
{
    const char *dir = o->pos[0];
    kv_dir_info *info;
    if (inspect(dir, &info) != 0)
        return EXIT_FAIL;
    info_counters(dir, info);

    /* Per level, then per table; filter memory from each table's reader. */
    struct info_totals tot = {0};
    double missing_fp = 0; /* expected false positives of a missing key */
    for (size_t i = 0; i < info->ntables; i++)
        tot.bytes += info->tables[i].file_size;
    printf("tables:          %zu (%" PRIu64 " bytes)\n", info->ntables, tot.bytes);
    for (int l = 0; l < LEVELS; l++)
        missing_fp += info_level(dir, info, l, &tot);
    printf("total:           %" PRIu64 " entries, %" PRIu64 " bytes of tables, %" PRIu64
           " bytes of filters in memory when open\n",
           tot.entries, tot.bytes, tot.filter);
    if (info->ntables)
        printf("missing key:     %.4f false positives expected per get (the levels' expected "
               "FPRs summed: one probe per level-0 table and per deeper level)\n",
               missing_fp);
    int status = tot.status;
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
