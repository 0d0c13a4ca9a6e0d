/* recover.c - what kv_open does under the lock before the database takes
 * writes: opens the manifest and the live tables, deletes the files the
 * manifest does not name, replays the live logs, and keeps the recovery
 * report (kv_recovery_report).
 *
 * The replayed writes become one level-0 table, committed together with a
 * fresh log in one manifest transaction, after which the old logs go.
 * Replay stops at the first damage: a later log would leave a hole, so it
 * is dropped too, and every loss is a line of the report. */
#define _DEFAULT_SOURCE /* dirent */
#include "db.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "batch.h"
#include "dbfiles.h"
#include "order.h"
#include "util/error.h"

uint64_t kv_db_random_seed(void)
{
    uint64_t s = 0;
    if (getrandom(&s, sizeof s, 0) != (ssize_t)sizeof s)
        {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        s = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^ ((uint64_t)getpid() << 32);
    }
    return s;
}

int kv_db_secret_load(kv_db *db)
{
    uint8_t secret[KV_MANIFEST_SECRET];
    int have = 0;
    int rc = kv_manifest_secret_get(db->man, secret, &have);
    if (rc != KV_OK)
        return rc; /* KV_ECORRUPT: the text names the record */
    db->keyed = db->o.filter_keyed_hash;
    if (!have && db->keyed) {
        /* First keyed open: 16 bytes from the kernel's generator. No
         * fallback: a secret from the clock could be guessed. */
        if (getrandom(secret, sizeof secret, 0) != (ssize_t)sizeof secret) {
            int e = errno;
            return kv_error_errno(e, "%s: getrandom for the filter secret", db->path);
        }
        if ((rc = kv_manifest_secret_put(db->man, secret)) != KV_OK) {
            memset(secret, 0, sizeof secret);
            return rc;
        }
        have = 1;
    }
    if (have) {
        kv_sipkey_init(&db->sip, secret);
        db->secret_check = kv_bloom_secret_check(secret);
        db->have_secret = 1;
    }
    memset(secret, 0, sizeof secret);
    return KV_OK;
}

struct replay_ctx {
    kv_db *db;
    kv_mem *mem;
    uint64_t floor;    /* entries at or below this sequence are in tables */
    uint64_t max_seq;
    uint64_t next_seq; /* the sequence the next record must start at; 0 before the first */
    const char *bad;   /* why a record that passed its checksum was refused, or NULL */
    /* The range deletes replayed, their keys copied (a record's bytes go
     * with it): the memtable's tombstone set once the logs are read. */
    struct kv_rt_list rts;
};

static int replay_entry(void *ctx, uint64_t seq, int kind, const uint8_t *key, size_t klen,
                        const uint8_t *val, size_t vlen)
{
    struct replay_ctx *r = ctx;
    if (seq > r->max_seq)
        r->max_seq = seq;
    if (seq <= r->floor)
        return KV_OK;
    if (kind == KV_KIND_RANGE_DEL)
        return kv_rt_list_add(&r->rts, seq, key, klen, val, vlen);
    return kv_mem_add(r->mem, 0, seq, kind, key, klen, val, vlen); /* no filter: no hash */
}

/* The sequences of a record (a batch of `count` entries from `seq` on) are
 * sound when they continue the log: the store numbers its writes one after
 * another and never skips one, so the first record replayed starts at or
 * below the manifest's last_seq + 1 and every later one right after the
 * record before it, and none runs past KV_MAX_SEQ. A record that breaks
 * this (its checksum is no guard: anyone can compute one) would otherwise
 * make the memtable refuse an entry, and kv_open fail, or move last_seq to
 * the end of the sequence space, where every later write is refused. */
static const char *bad_sequence(const struct replay_ctx *r, uint64_t seq, uint32_t count)
{
    if (count == 0)
        return NULL; /* an empty batch holds no sequence */
    if (seq == 0 || seq > KV_MAX_SEQ || count - 1 > KV_MAX_SEQ - seq)
        return "a record whose sequence numbers run outside 1..2^56-1";
    if (r->next_seq ? seq != r->next_seq : seq > r->floor + 1)
        return "a record whose sequence numbers do not follow the previous record's";
    return NULL;
}

static int replay_record(void *ctx, const void *rec, size_t len)
{
    struct replay_ctx *r = ctx;
    if (len >= KV_BATCH_HEADER) {
        uint64_t seq = kv_get64(rec);
        uint32_t count = kv_get32((const uint8_t *)rec + 8);
        if ((r->bad = bad_sequence(r, seq, count)) != NULL)
            return 1; /* stop: treat like a damaged tail */
        if (count)
            r->next_seq = seq + count;
    }
    int rc = kv_batch_iterate(rec, len, replay_entry, r);
    if (rc == KV_ECORRUPT) {
        r->bad = "a record whose batch does not decode";
        return 1; /* stop: treat like a damaged tail */
    }
    return rc;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Lists the directory: removes what kv_dbfile_classify calls orphan
 * tables, temporary files and old logs, collects the live logs (sorted),
 * and raises next_file above every number in use (a foreign number,
 * dbfiles.h, reads as 0: it raises nothing). */
static int scan_dir(kv_db *db, const kv_table_meta *tables, size_t ntables,
                    const kv_manifest_blob *blobs, size_t nblobs, uint64_t **logs,
                    size_t *nlogs)
{
    *logs = NULL;
    *nlogs = 0;
    size_t cap = 0;
    uint64_t open_txn = kv_manifest_last_txn(db->man); /* the state loaded */
    DIR *d = opendir(db->path);
    if (!d)
        return kv_error_errno(errno, "%s: opendir", db->path);
    struct dirent *de;
    int rc = KV_OK;
    while (rc == KV_OK && (de = readdir(d)) != NULL) {
        uint64_t n;
        int kind = kv_dbfile_classify(de->d_name, &db->state, tables, ntables, blobs, nblobs, &n);
        if (n + 1 > db->next_file)
            db->next_file = n + 1;
        if (kind == KV_FILE_LOG) {
            if (*nlogs == cap) {
                size_t nc = cap ? 2 * cap : 8;
                uint64_t *l = realloc(*logs, nc * sizeof *l);
                if (!l) {
                    rc = KV_ENOMEM;
                    break;
                }
                *logs = l;
                cap = nc;
            }
            (*logs)[(*nlogs)++] = n;
        } else if (kind == KV_FILE_ORPHAN || kind == KV_FILE_TEMP || kind == KV_FILE_OLD_LOG ||
                   kind == KV_FILE_BLOB_ORPHAN) {
            char *p = kv_dbfile_join(db->path, de->d_name);
            if (!p) {
                rc = KV_ENOMEM;
                break;
            }
            /* A table, blob file or log the manifest's state at open does
             * not name may still be named by an older state a read-only
             * handle pins: it waits for them (kv_manifest_unlink). A
             * temporary file no state ever named goes now. */
            kv_manifest_unlink(db->man, p, kind == KV_FILE_TEMP ? 0 : open_txn);
            free(p);
        }
    }
    closedir(d);
    if (*nlogs > 1)
        qsort(*logs, *nlogs, sizeof **logs, cmp_u64);
    return rc;
}

/* Appends a line to db->recovery_text (cut short when it is full). */
static void recovery_note(kv_db *db, const char *fmt, ...)
{
    size_t used = strlen(db->recovery_text);
    if (used + 1 >= sizeof db->recovery_text)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(db->recovery_text + used, sizeof db->recovery_text - used, fmt, ap);
    va_end(ap);
}

int kv_recovery_report(kv_db *db, char **text)
{
    if (!db || !text)
        return kv_db_einval(db, "kv_recovery_report", "%s is NULL", db ? "text" : "db");
    *text = strdup(db->recovery_text);
    return *text ? KV_OK
                 : kv_error_set(KV_ENOMEM, "%s: kv_recovery_report: out of memory", db->path);
}

/* Does the directory hold a table or a log (names "<digits>.sst" or
 * "<digits>.log")? */
static int dir_holds_data(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return 0;
    int found = 0;
    struct dirent *de;
    while (!found && (de = readdir(d)) != NULL) {
        uint64_t n;
        int kind = kv_dbfile_classify(de->d_name, NULL, NULL, 0, NULL, 0, &n);
        found = kind == KV_FILE_ORPHAN || kind == KV_FILE_LOG || kind == KV_FILE_BLOB_ORPHAN;
    }
    closedir(d);
    return found;
}

/* The key order the manifest names against the options' (kv.h,
 * comparator): equal names, or KV_EINVAL with both in the text. A
 * manifest without the record was made before comparators, bytewise;
 * unless it names no table yet (a database made now whose creation
 * stopped before the record was written, or an old one whose writes are
 * all still in its logs): nothing is in any order then, and it takes the
 * opener's, written now. */
static int check_comparator(kv_db *db, size_t ntables)
{
    const char *want = db->cmp ? db->cmp->name : KV_BYTEWISE_NAME;
    char have[KV_MANIFEST_NAME_MAX + 1];
    int rc = kv_manifest_get_comparator(db->man, have);
    if (rc == KV_NOTFOUND && ntables == 0)
        return kv_manifest_set_comparator(db->man, want);
    if (rc == KV_NOTFOUND)
        snprintf(have, sizeof have, "%s", KV_BYTEWISE_NAME);
    else if (rc != KV_OK)
        return rc;
    if (strcmp(have, want) != 0)
        return kv_error_set(KV_EINVAL,
                            "%s: the database orders keys by comparator \"%s\"; the options give "
                            "\"%s\"",
                            db->path, have, want);
    return KV_OK;
}

/* The merge operator's name and ttl_seconds against what the manifest
 * keeps (doc/manifest.md, "features"): another operator's name is
 * KV_EINVAL with both names (no operator is allowed: merges and reads of
 * operands then fail); a name or a ttl the record lacks is stored, which
 * marks the database as one an older kv must not open (format version 2). */
static int check_features(kv_db *db)
{
    kv_manifest_features f;
    int rc = kv_manifest_get_features(db->man, &f);
    if (rc != KV_OK && rc != KV_NOTFOUND)
        return rc;
    const kv_merge_operator *mo = db->o.merge_operator;
    const char *want = mo && mo->name && mo->name[0] ? mo->name : NULL;
    if (want && strlen(want) > KV_MANIFEST_NAME_MAX)
        return kv_error_set(KV_EINVAL, "%s: merge operator name of %zu bytes, over %u", db->path,
                            strlen(want), (unsigned)KV_MANIFEST_NAME_MAX);
    if (want && f.merge_name[0] && strcmp(f.merge_name, want) != 0)
        return kv_error_set(KV_EINVAL,
                            "%s: the database's merge operator is \"%s\"; the options give "
                            "\"%s\"",
                            db->path, f.merge_name, want);
    int change = 0;
    if (want && !f.merge_name[0]) {
        snprintf(f.merge_name, sizeof f.merge_name, "%s", want);
        change = 1;
    }
    if (db->o.ttl_seconds && db->o.ttl_seconds != f.ttl_seconds) {
        f.ttl_seconds = db->o.ttl_seconds;
        change = 1;
    }
    if (!change)
        return KV_OK;
    if ((rc = kv_manifest_put_features(db->man, &f, KV_FORMAT_VERSION_FEATURES)) == KV_OK)
        db->state.format_version = KV_FORMAT_VERSION_FEATURES;
    return rc;
}

int kv_db_note_features(kv_db *db)
{
    if (db->state.format_version >= KV_FORMAT_VERSION_FEATURES)
        return KV_OK;
    kv_manifest_features f;
    int rc = kv_manifest_get_features(db->man, &f);
    if (rc != KV_OK && rc != KV_NOTFOUND)
        return rc;
    if ((rc = kv_manifest_put_features(db->man, &f, KV_FORMAT_VERSION_FEATURES)) == KV_OK)
        db->state.format_version = KV_FORMAT_VERSION_FEATURES;
    return rc;
}

/* Phase 1, the manifest: opens it (a new database gets a random filter
 * seed), checks it against the options and the directory, loads the state
 * into db (seed, secret, next_file, last_seq), and hands out the tables and
 * blob files it names (the caller frees them, also on error: *metas and
 * *brecs are NULL then). */
static int open_manifest(kv_db *db, kv_table_meta **metas, size_t *nmetas, kv_manifest_blob **brecs,
                         size_t *nbrecs)
{
    *metas = NULL;
    *nmetas = 0;
    *brecs = NULL;
    *nbrecs = 0;
    uint64_t msize;
    int rc = kv_manifest_check(db->path, &msize);
    if (rc != KV_OK && rc != KV_NOTFOUND)
        return rc; /* a link, FIFO, device or directory: the text names it */
    int exists = rc == KV_OK && msize > 0;
    if (exists && db->o.error_if_exists)
        return kv_error_set(KV_EINVAL, "%s: a database exists there (error_if_exists is set)",
                            db->path);
    /* No manifest (or an empty one) beside tables or logs: the manifest was
     * lost. Starting afresh would delete every table as unnamed. */
    if (!exists && dir_holds_data(db->path))
        return kv_error_set(KV_ECORRUPT, "%s/%s: missing or empty beside table or log files "
                            "(kv_repair, or kvtool db repair, rebuilds it from them)",
                            db->path, KV_MANIFEST_FILE);
    if (!exists && !db->o.create_if_missing)
        return kv_error_set(KV_NOTFOUND, "%s: no database there (no %s; create_if_missing is 0)",
                            db->path, KV_MANIFEST_FILE);
    kv_manifest_state fresh = {.format_version = KV_FORMAT_VERSION, .next_file = 1,
                               .last_seq = 0, .log_number = 0, .seed = kv_db_random_seed()};
    /* kv_manifest_open explains its errors; damage gets the longer story. */
    unsigned long long mark = kv_error_mark();
    rc = kv_manifest_open(db->path, db->o.create_if_missing, &fresh, &db->man);
    if (rc == KV_ECORRUPT) {
        char why[256] = "";
        if (kv_error_since(mark))
            snprintf(why, sizeof why, " (%s)", kv_error_text());
        return kv_error_set(rc, "%s/%s: %s%s", db->path, KV_MANIFEST_FILE,
                            "damaged: LMDB refused it, or its meta pages, named databases or "
                            "state record are missing or bad", why);
    }
    if (rc != KV_OK)
        return rc;
    if ((rc = kv_manifest_load(db->man, &db->state, metas, nmetas)) != KV_OK) {
        /* KV_ECORRUPT: the load said which record and why. */
        if (rc != KV_ECORRUPT)
            kv_error_set(rc, "%s/%s: %s", db->path, KV_MANIFEST_FILE,
                         rc == KV_ENOMEM ? "out of memory reading it" : "LMDB could not read it");
        return rc;
    }
    if (db->state.format_version < KV_FORMAT_VERSION ||
        db->state.format_version > KV_FORMAT_VERSION_FEATURES)
        rc = kv_error_set(KV_ECORRUPT, "%s/%s: format version %u, this library reads %u to %u",
                          db->path, KV_MANIFEST_FILE, (unsigned)db->state.format_version,
                          (unsigned)KV_FORMAT_VERSION, (unsigned)KV_FORMAT_VERSION_FEATURES);
    if (rc == KV_OK)
        rc = check_comparator(db, *nmetas);
    if (rc == KV_OK)
        rc = check_features(db);
    if (rc == KV_OK) {
        db->seed = db->state.seed;
        rc = kv_db_secret_load(db);
    }
    if (rc == KV_OK) {
        db->next_file = db->state.next_file;
        db->last_seq = db->state.last_seq;
        rc = kv_manifest_load_blobs(db->man, brecs, nbrecs);
    }
    if (rc != KV_OK) {
        kv_manifest_free_tables(*metas, *nmetas);
        *metas = NULL;
        *nmetas = 0;
    }
    return rc;
}

/* Phase 3, the live files: opens the blob files and tables the manifest
 * names and makes them the first version (db->current). Takes metas and
 * brecs, which it frees whatever it returns. */
static int open_live(kv_db *db, kv_table_meta *metas, size_t nmetas, kv_manifest_blob *brecs,
                     size_t nbrecs)
{
    int rc = KV_OK;
    /* The live blob files. */
    struct kv_blob **blobs = nbrecs ? calloc(nbrecs, sizeof *blobs) : NULL;
    size_t nblobs = 0;
    if (nbrecs && !blobs)
        rc = KV_ENOMEM;
    for (size_t i = 0; rc == KV_OK && i < nbrecs; i++)
        if ((rc = kv_blob_open(db, &brecs[i], &blobs[nblobs])) == KV_OK)
            nblobs++;
    free(brecs);

    /* The live tables. */
    struct kv_table **open = rc == KV_OK && nmetas ? calloc(nmetas, sizeof *open) : NULL;
    size_t nopen = 0;
    if (rc == KV_OK && nmetas && !open)
        rc = KV_ENOMEM;
    for (size_t i = 0; i < nmetas; i++) {
        if (rc == KV_OK) {
            rc = kv_db_table_open(db, &metas[i], &open[nopen]);
            if (rc == KV_OK)
                nopen++;
        } else {
            free(metas[i].smallest);
            free(metas[i].largest);
        }
        metas[i].smallest = metas[i].largest = NULL;
    }
    free(metas);
    struct kv_blob_edit be = {blobs, nblobs, NULL, 0};
    if (rc == KV_OK &&
        !(db->current = kv_version_edit_blobs(NULL, NULL, 0, open, nopen, db->cmp, &be)))
        rc = KV_ENOMEM;
    for (size_t i = 0; i < nopen; i++)
        kv_table_unref(open[i]); /* the version holds them now */
    free(open);
    for (size_t i = 0; i < nblobs; i++)
        kv_blob_file_unref(blobs[i]);
    free(blobs);
    return rc;
}

/* Phase 4, the logs: replays the live logs (their numbers, oldest first)
 * into mem up to the first damage: after it, later logs would leave a
 * hole, so they are dropped too. Each loss is a line of the report;
 * db->last_seq moves on to the newest sequence replayed. */
static int replay_logs(kv_db *db, const uint64_t *logs, size_t nlogs, kv_mem *mem, kv_rtset **rt)
{
    struct replay_ctx rx = {.db = db,
                            .mem = mem,
                            .floor = db->state.last_seq,
                            .max_seq = db->state.last_seq,
                            .rts = {.copy = 1}};
    *rt = NULL;
    int rc = KV_OK, stopped = 0;
    for (size_t i = 0; rc == KV_OK && i < nlogs; i++) {
        char *p = kv_dbfile_path(db->path, logs[i], "log");
        if (!p) {
            rc = KV_ENOMEM;
            break;
        }
        if (stopped) {
            struct stat lst;
            uint64_t size = stat(p, &lst) == 0 ? (uint64_t)lst.st_size : 0;
            db->recovery_dropped += size;
            recovery_note(db, "%06llu.log: not replayed (it follows damage in an earlier "
                          "log): %llu bytes dropped\n", (unsigned long long)logs[i],
                          (unsigned long long)size);
            free(p);
            continue;
        }
        kv_wal_report rep;
        rc = kv_wal_replay(p, logs[i], replay_record, &rx, &rep);
        free(p);
        if (rc == 1)
            rc = KV_OK; /* replay_record stopped at a bad batch */
        db->recovered_records += rep.records;
        db->recovery_dropped += rep.bytes_dropped;
        if (rep.tail_damaged || rx.bad) {
            db->recovery_damaged++;
            stopped = 1;
            recovery_note(db, "%06llu.log: KV_ECORRUPT at byte %llu (%s): replay stopped after "
                          "%llu records, %llu bytes dropped\n", (unsigned long long)logs[i],
                          (unsigned long long)rep.bytes_read,
                          rx.bad ? rx.bad : "a torn or damaged record",
                          (unsigned long long)rep.records, (unsigned long long)rep.bytes_dropped);
        }
    }
    if (rx.max_seq > db->last_seq)
        db->last_seq = rx.max_seq;
    if (rc == KV_OK && rx.rts.n)
        rc = kv_rtset_union(db->cmp, NULL, 0, rx.rts.v, rx.rts.n, NULL, NULL, rt);
    kv_rt_list_free(&rx.rts);
    return rc;
}

/* Phase 5, the commit: what the logs held (mem) becomes a level-0 table,
 * committed in one manifest transaction with a fresh log (db->wal), after
 * which the old logs go; then the first memtable and view. */
static int commit_replayed(kv_db *db, const kv_mem *mem, const kv_rtset *rt)
{
    struct kv_table *t = NULL;
    struct kv_blob_out bo;
    kv_blob_out_init(&bo, db, UINT64_MAX);
    int rc = kv_db_flush_memtable(db, mem, rt, db->last_seq, &bo, &t);
    uint64_t wal_number = 0;
    if (rc == KV_OK)
        rc = kv_db_new_file_number(db, &wal_number);
    if (rc == KV_OK) {
        char *p = kv_dbfile_path(db->path, wal_number, "log");
        rc = p ? kv_wal_create(p, wal_number, &db->wal) : KV_ENOMEM;
        free(p);
    }
    kv_manifest_state ns = db->state;
    ns.last_seq = db->last_seq;
    ns.log_number = wal_number;
    struct kv_blob_out *outs[1] = {&bo};
    if (rc == KV_OK)
        rc = kv_db_commit_blobs(db, &ns, NULL, 0, t ? &t : NULL, t ? 1 : 0, outs, 1);
    kv_blob_out_free(&bo, rc == KV_OK);
    if (t) {
        if (rc != KV_OK)
            atomic_store(&t->obsolete, 1);
        kv_table_unref(t);
    }
    if (rc != KV_OK)
        return rc;
    db->wal_number = wal_number;
    kv_dbfile_remove_logs_below(db->path, &ns, db->man, kv_manifest_last_txn(db->man));
    if (!(db->mem = kv_memref_new(db)))
        return KV_ENOMEM;
    return kv_view_publish(db, NULL); /* the first view readers see */
}

int kv_db_recover(kv_db *db)
{
    /* 1. The manifest. */
    kv_table_meta *metas;
    kv_manifest_blob *brecs;
    size_t nmetas, nbrecs;
    int rc = open_manifest(db, &metas, &nmetas, &brecs, &nbrecs);
    if (rc != KV_OK)
        return rc;

    /* 2. Files on disk against the manifest. */
    uint64_t *logs = NULL;
    size_t nlogs = 0;
    rc = scan_dir(db, metas, nmetas, brecs, nbrecs, &logs, &nlogs);

    /* 3. The live blob files and tables: the first version. */
    if (rc == KV_OK) {
        rc = open_live(db, metas, nmetas, brecs, nbrecs);
    } else {
        kv_manifest_free_tables(metas, nmetas);
        free(brecs);
    }
    if (rc != KV_OK) {
        free(logs);
        return rc;
    }

    /* 4. The live logs, replayed. No Get ever reads this memtable (it
     * becomes a table before kv_open returns), so it has no filter. */
    kv_mem *mem;
    if ((rc = kv_mem_new(0, 0, &mem)) != KV_OK) {
        free(logs);
        return rc;
    }
    kv_mem_set_comparator(mem, db->cmp);
    kv_rtset *rt = NULL;
    rc = replay_logs(db, logs, nlogs, mem, &rt);
    free(logs);

    /* 5. What the logs held becomes a table, under one manifest commit
     * with a fresh log, so the old logs can go. */
    if (rc == KV_OK)
        rc = commit_replayed(db, mem, rt);
    kv_mem_free(mem);
    kv_rtset_unref(rt);
    return rc;
}
