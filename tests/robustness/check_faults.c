/* check_faults.c - faults injected through the file layer and the manifest
 * (issue 7) by the kv_testing library (tests/testing/testing.h): EIO,
 * ENOSPC and short transfers on the n-th call of each kind (log append,
 * log sync, table write, table sync, directory sync, table read, log
 * read, blob file write and sync) and LMDB's failures on the n-th manifest
 * commit (EIO, ENOSPC, MDB_MAP_FULL), for every n up to where the workload
 * ends. (A blob file's reads are not the file layer's: the reader keeps a
 * descriptor of its own and reads it with preadv, sstable/blob.c, so no
 * fault can be aimed at them here.)
 *
 * The workload is fixed (seeded): a fresh database with a 64 KiB memtable;
 * puts, overwrites, deletes and batches, every 8th of them synced through
 * the per-call API, reads along the way, kv_flush, a kv_compact_range over
 * part of the keys, a close and reopen (the log is replayed, the tables are
 * opened), more writes, a kv_compact_range over everything, one last put,
 * a read of every key and a close. A model follows it: a write is
 * acknowledged when its call returned KV_OK.
 *
 * Each (kind, op, fault) is first measured: the workload runs without a
 * fault and kv_file_calls (kv_manifest_commits) says how many calls of that
 * kind it made. Then for n = 1 .. that count (every n, or a stride when the
 * count is large; KV_FAULTS_FULL=1 runs every n) the workload runs on a
 * fresh database with the fault armed on the n-th call, and:
 *
 *  - every public call returns KV_OK, KV_NOTFOUND (a get) or exactly the
 *    error the fault maps to (EIO: KV_EIO; ENOSPC: KV_ENOSPC, but KV_EIO on
 *    a read or a directory sync; a short write: KV_EIO; a short table read:
 *    KV_ECORRUPT, a short log read: KV_EIO; a manifest EIO/ENOSPC:
 *    KV_EIO/KV_ENOSPC; MDB_MAP_FULL: nothing, the map grows);
 *  - once a write, kv_flush or kv_compact_range of a session (an open
 *    handle) has failed, the store either refuses every later one with the
 *    same error until it is closed and opened again, or keeps working;
 *    which one is asserted per fault (see `policy` below); reads go on
 *    either way;
 *  - a failed sync (log or table) is never retried in that session: after
 *    the n-th sync failed, the session makes no further sync of that kind
 *    (the lesson of PostgreSQL's fsync failure);
 *  - a failed open returns the error, and the next open (the fault spent)
 *    succeeds; the session after the one the fault hit works without error;
 *  - after every open, each key holds its last acknowledged value (deleted
 *    keys absent) or the value of a write that failed; a write refused
 *    after an earlier error is never applied; a failed batch is applied
 *    whole or not at all;
 *  - at the end (fault disarmed) the database opens, holds exactly that,
 *    an iterator walks exactly it, it closes with KV_OK, and
 *    `kvtool db verify` passes on it.
 *
 * Strides: a kind with more calls than KV_FAULTS_RUNS (default 80) runs
 * n = 1, 1 + s, 1 + 2s, ... and the last call, with s = ceil(calls / 80);
 * KV_FAULTS_FULL=1 runs every n (about 3 minutes on tmpfs).
 *
 * The run ends with a table of the faults injected per kind and what the
 * store did (the figures of doc/reliability.md). The databases live under
 * $KV_FAULTS_TMPDIR, else /dev/shm (tmpfs: fsync costs nothing there, and
 * the faults, not the disk, are under test), else $TMPDIR, else /tmp.
 * kvtool is found beside this program (../tools/kvtool) or through
 * $KVTOOL; without it, db verify is replaced by kv_inspect's view (every
 * live table present at its recorded size, nothing left over), and the
 * table says so. */
#define _XOPEN_SOURCE 700
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <kv/kv.h>
#include <lmdb.h>

#include "../kv/manifest.h"
#include "testing.h" /* kv_testing: fault injection, I/O counters */

#include "fixture.h"

/* ---- the faults ------------------------------------------------------------------- */

/* What the store must do after the fault hits an open database. */
enum {
    STICKY,   /* the failed call's error; every later write, flush and compaction
               * refused with it until reopen */
    READ,     /* a get that fails: only that get; a background read (compaction,
               * a new table's open): STICKY */
    EITHER,   /* directory sync: the write that made a new log fails alone and the
               * store keeps working; a table's rename: STICKY */
    RECOVERS, /* a full disk (ENOSPC from a write): later calls are refused with
               * the same error until the handle retries by itself (100 ms on),
               * then accepted; a retry may come before any call sees it */
    INVISIBLE /* MDB_MAP_FULL: no error at all, the map grows */
};

struct combo {
    const char *name;
    int manifest;       /* 1: kv_manifest_inject; 0: kv_file_inject_kind */
    kv_file_kind kind;
    kv_file_op op;
    int fault;          /* kv_file_fault, or the LMDB error */
    int expect;         /* the KV_E... every failing call returns */
    int policy;
};

static const struct combo combos[] = {
    {"WAL append EIO", 0, KV_FILE_KIND_WAL, KV_FILE_WRITE, KV_FAULT_EIO, KV_EIO, STICKY},
    {"WAL append ENOSPC", 0, KV_FILE_KIND_WAL, KV_FILE_WRITE, KV_FAULT_ENOSPC, KV_ENOSPC, RECOVERS},
    {"WAL append short", 0, KV_FILE_KIND_WAL, KV_FILE_WRITE, KV_FAULT_SHORT, KV_EIO, STICKY},
    {"WAL sync EIO", 0, KV_FILE_KIND_WAL, KV_FILE_SYNC, KV_FAULT_EIO, KV_EIO, STICKY},
    {"WAL sync ENOSPC", 0, KV_FILE_KIND_WAL, KV_FILE_SYNC, KV_FAULT_ENOSPC, KV_EIO, STICKY},
    {"table write EIO", 0, KV_FILE_KIND_TABLE, KV_FILE_WRITE, KV_FAULT_EIO, KV_EIO, STICKY},
    {"table write ENOSPC", 0, KV_FILE_KIND_TABLE, KV_FILE_WRITE, KV_FAULT_ENOSPC, KV_ENOSPC,
     RECOVERS},
    {"table write short", 0, KV_FILE_KIND_TABLE, KV_FILE_WRITE, KV_FAULT_SHORT, KV_EIO, STICKY},
    {"table sync EIO", 0, KV_FILE_KIND_TABLE, KV_FILE_SYNC, KV_FAULT_EIO, KV_EIO, STICKY},
    {"table sync ENOSPC", 0, KV_FILE_KIND_TABLE, KV_FILE_SYNC, KV_FAULT_ENOSPC, KV_EIO, STICKY},
    {"dir sync EIO", 0, KV_FILE_KIND_DIR, KV_FILE_SYNC, KV_FAULT_EIO, KV_EIO, STICKY},
    {"table read EIO", 0, KV_FILE_KIND_TABLE, KV_FILE_READ, KV_FAULT_EIO, KV_EIO, READ},
    {"table read short", 0, KV_FILE_KIND_TABLE, KV_FILE_READ, KV_FAULT_SHORT, KV_ECORRUPT, READ},
    {"WAL read EIO", 0, KV_FILE_KIND_WAL, KV_FILE_READ, KV_FAULT_EIO, KV_EIO, READ},
    {"WAL read short", 0, KV_FILE_KIND_WAL, KV_FILE_READ, KV_FAULT_SHORT, KV_EIO, READ},
    {"blob write EIO", 0, KV_FILE_KIND_BLOB, KV_FILE_WRITE, KV_FAULT_EIO, KV_EIO, STICKY},
    {"blob write ENOSPC", 0, KV_FILE_KIND_BLOB, KV_FILE_WRITE, KV_FAULT_ENOSPC, KV_ENOSPC,
     RECOVERS},
    {"blob write short", 0, KV_FILE_KIND_BLOB, KV_FILE_WRITE, KV_FAULT_SHORT, KV_EIO, STICKY},
    {"blob sync EIO", 0, KV_FILE_KIND_BLOB, KV_FILE_SYNC, KV_FAULT_EIO, KV_EIO, STICKY},
    {"manifest commit EIO", 1, KV_FILE_KIND_ANY, KV_FILE_OPS, EIO, KV_EIO, STICKY},
    {"manifest commit ENOSPC", 1, KV_FILE_KIND_ANY, KV_FILE_OPS, ENOSPC, KV_ENOSPC, RECOVERS},
    {"manifest MDB_MAP_FULL", 1, KV_FILE_KIND_ANY, KV_FILE_OPS, MDB_MAP_FULL, KV_OK, INVISIBLE},
};
#define NCOMBOS ((int)(sizeof combos / sizeof combos[0]))

static uint64_t calls_of(const struct combo *c)
{
    return c->manifest ? kv_manifest_commits() : kv_file_calls(c->kind, c->op);
}

static void arm(const struct combo *c, uint64_t n)
{
    if (c->manifest)
        kv_manifest_inject(n, c->fault);
    else
        kv_file_inject_kind(c->kind, c->op, n, (kv_file_fault)c->fault);
}

static void disarm(const struct combo *c)
{
    if (c->manifest)
        kv_manifest_inject(0, 0);
    else
        kv_file_inject_kind(c->kind, c->op, 0, KV_FAULT_NONE);
}

/* ---- the workload ----------------------------------------------------------------- */

#define NKEYS 160
#define MAXB 6 /* entries in a batch */

enum { S_OPEN, S_PUT, S_DEL, S_BATCH, S_GET, S_CHECK_ALL, S_FLUSH, S_COMPACT, S_REOPEN, S_CLOSE };

struct entry {
    int key;
    int32_t vid; /* the value's id; -1: a delete */
};

struct step {
    int type;
    int sync;
    int n;                  /* entries (1 for a put or delete) */
    struct entry e[MAXB];
    int lo, hi;             /* S_COMPACT: key range; -1: open */
};

static struct step steps[1400];
static int nsteps;
static int32_t next_vid;

static uint64_t rng = 7;
static unsigned rnd(unsigned n)
{
    rng = splitmix(rng);
    return (unsigned)(rng % n);
}

static struct step *add_step(int type)
{
    ck_assert_int_lt(nsteps, (int)(sizeof steps / sizeof steps[0]));
    struct step *s = &steps[nsteps++];
    memset(s, 0, sizeof *s);
    s->type = type;
    s->lo = s->hi = -1;
    return s;
}

/* n mutations (puts, overwrites, deletes, batches), a get now and then. */
static void add_mutations(int n)
{
    for (int i = 0; i < n; i++) {
        unsigned r = rnd(100);
        struct step *s;
        if (r < 65) {
            s = add_step(S_PUT);
            s->n = 1;
            s->e[0] = (struct entry){(int)rnd(NKEYS), next_vid++};
        } else if (r < 80) {
            s = add_step(S_DEL);
            s->n = 1;
            s->e[0] = (struct entry){(int)rnd(NKEYS), -1};
        } else {
            s = add_step(S_BATCH);
            s->n = 2 + (int)rnd(MAXB - 1);
            int base = (int)rnd(NKEYS);
            for (int j = 0; j < s->n; j++) /* distinct keys */
                s->e[j] = (struct entry){(base + 7 * j) % NKEYS,
                                         rnd(5) == 0 ? -1 : next_vid++};
        }
        s->sync = i % 8 == 7;
        if (i % 20 == 10)
            add_step(S_GET)->e[0].key = (int)rnd(NKEYS);
    }
}

static void make_workload(void)
{
    if (nsteps)
        return;
    add_step(S_OPEN);
    add_mutations(260);
    add_step(S_FLUSH);
    for (int i = 0; i < 10; i++)
        add_step(S_GET)->e[0].key = (int)rnd(NKEYS);
    struct step *s = add_step(S_COMPACT);
    s->lo = NKEYS / 4;
    s->hi = 3 * NKEYS / 4;
    add_step(S_CHECK_ALL);
    add_mutations(90); /* in the log when it closes: replayed by the reopen */
    add_step(S_REOPEN);
    add_step(S_CHECK_ALL);
    add_mutations(260);
    add_step(S_COMPACT);
    s = add_step(S_PUT); /* a write after everything: refused or not */
    s->n = 1;
    s->e[0] = (struct entry){0, next_vid++};
    add_step(S_CHECK_ALL);
    add_step(S_CLOSE);
}

/* The value of id vid: "v<vid>|" and bytes from vid, 24 to 1123 bytes. */
static size_t value_of(int32_t vid, uint8_t *buf)
{
    size_t len = 24 + (size_t)(splitmix((uint64_t)vid * 31 + 5) % 1100);
    int h = snprintf((char *)buf, 32, "v%08d|", (int)vid);
    uint64_t x = (uint64_t)vid;
    for (size_t i = (size_t)h; i < len; i++) {
        x = splitmix(x);
        buf[i] = (uint8_t)(x & 0x7f); /* half compressible, like real data */
    }
    return len;
}

/* ---- the model -------------------------------------------------------------------- */

#define MAXM 8

struct keystate {
    int32_t acked;            /* last acknowledged: a value id, or -1 (absent) */
    int nm;                   /* failed writes after it that may have applied */
    int32_t maybe[MAXM];      /* their value ids (-1: a delete) */
    int maybe_step[MAXM];     /* and their steps (batch atomicity) */
};

/* ---- one run ---------------------------------------------------------------------- */

enum { W_WRITE, W_FLUSH, W_GET, W_OPEN, W_CLOSE, W_NONE };

struct run {
    const struct combo *c;
    char path[700];
    kv_db *db;
    struct keystate keys[NKEYS];
    /* the session (one handle, or one failed open) */
    int sess_err;             /* first failed write/flush/compact, or 0 */
    int sess_get_failed;      /* a get failed in it */
    int sess_errors;          /* any error in it (close included) */
    uint64_t fire_at;         /* calls_of() at which the fault fires */
    int fired_before_sess;    /* the fault had fired before this session began */
    int final;                /* the check after the run: no fault, no error */
    /* outcomes */
    int fired;
    int first_where;          /* where the first error came out */
    int refused;              /* writes/flushes refused after an error */
    int accepted_after;       /* ... accepted after an error in the same session */
    int open_failed;
    int gets_failed;
    int maybe_applied;        /* failed writes found applied after reopen */
    int lost;                 /* acknowledged writes missing or wrong after reopen */
    int sync_retried;         /* syncs of the faulted kind after a failed sync */
    int verify_failed;
    int errors;               /* violations */
    char msg[1200];           /* the first violations */
};

static void violation(struct run *r, const char *fmt, ...)
{
    r->errors++;
    size_t used = strlen(r->msg);
    if (used + 2 >= sizeof r->msg)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->msg + used, sizeof r->msg - used, fmt, ap);
    va_end(ap);
    used = strlen(r->msg);
    if (used + 2 < sizeof r->msg)
        strcat(r->msg, "; ");
}

static void note_error(struct run *r, int where, int rc, const char *what)
{
    r->sess_errors++;
    if (r->first_where == W_NONE)
        r->first_where = where;
    if (r->final)
        violation(r, "%s returned %s after reopening without the fault", what, kv_strerror(rc));
    else if (r->fire_at == UINT64_MAX)
        violation(r, "%s returned %s without a fault", what, kv_strerror(rc));
    else if (rc != r->c->expect)
        violation(r, "%s returned %s, the fault gives %s", what, kv_strerror(rc),
                  r->c->expect ? kv_strerror(r->c->expect) : "no error");
}

/* A value read back: its id, after checking every byte. -2: not a value of
 * this workload. */
static int32_t decode(const void *v, size_t n)
{
    static uint8_t want[2048];
    const uint8_t *p = v;
    int32_t vid = 0;
    if (n < 10 || p[0] != 'v' || p[9] != '|')
        return -2;
    for (int i = 1; i < 9; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -2;
        vid = vid * 10 + (p[i] - '0');
    }
    if (vid >= next_vid)
        return -2;
    size_t len = value_of(vid, want);
    return len == n && memcmp(want, v, n) == 0 ? vid : -2;
}

static int candidate(const struct keystate *k, int32_t got)
{
    if (got == k->acked)
        return 1;
    for (int i = 0; i < k->nm; i++)
        if (k->maybe[i] == got)
            return 1;
    return 0;
}

/* A get of key k checked against the model: 1 read, 0 failed, and *got. */
static int checked_get(struct run *r, int k, int32_t *got)
{
    char key[16];
    key_of(key, sizeof key, "key", 5, k);
    void *v = NULL;
    size_t n = 0;
    int rc = kv_get(r->db, key, strlen(key), &v, &n);
    if (rc == KV_NOTFOUND) {
        *got = -1;
    } else if (rc == KV_OK) {
        *got = decode(v, n);
        kv_free(v);
    } else {
        r->gets_failed++;
        r->sess_get_failed = 1;
        note_error(r, W_GET, rc, "kv_get");
        if (r->c->policy != READ)
            violation(r, "a get failed (%s) under a fault that is not a read's",
                      kv_strerror(rc));
        return 0;
    }
    const struct keystate *s = &r->keys[k];
    if (!candidate(s, *got)) {
        violation(r, "%s: read %d, acknowledged %d%s", key, (int)*got, (int)s->acked,
                  s->nm ? " (or a failed write)" : "");
        r->lost++;
    }
    return 1;
}

/* After an open: every key read; failed writes found applied become the
 * acknowledged state (they are in a table now), those not found are gone
 * for good. A failed batch: all of its entries or none. */
static void resolve(struct run *r)
{
    int32_t got[NKEYS];
    int ok[NKEYS];
    for (int k = 0; k < NKEYS; k++)
        ok[k] = checked_get(r, k, &got[k]);
    /* batch atomicity: for each failed batch, its entries that tell (the
     * value differs from the acknowledged one) all applied or none */
    for (int k = 0; k < NKEYS; k++) {
        const struct keystate *s = &r->keys[k];
        for (int i = 0; i < s->nm; i++) {
            int st = s->maybe_step[i];
            if (steps[st].type != S_BATCH || steps[st].e[0].key != k)
                continue; /* each failed batch once */
            int applied = 0, missing = 0;
            for (int j = 0; j < steps[st].n; j++) {
                const struct entry *e = &steps[st].e[j];
                const struct keystate *t = &r->keys[e->key];
                if (!ok[e->key] || e->vid == t->acked)
                    continue;
                int last = -1; /* is this batch's entry the last failed write of its key? */
                for (int m = 0; m < t->nm; m++)
                    if (t->maybe_step[m] == st)
                        last = m;
                if (last != t->nm - 1)
                    continue;
                if (got[e->key] == e->vid)
                    applied++;
                else
                    missing++;
            }
            if (applied && missing)
                violation(r, "failed batch (step %d): %d entries applied, %d not", st, applied,
                          missing);
        }
    }
    for (int k = 0; k < NKEYS; k++) {
        struct keystate *s = &r->keys[k];
        if (!ok[k])
            continue;
        if (s->nm && got[k] != s->acked && candidate(s, got[k])) {
            r->maybe_applied++;
            s->acked = got[k];
        }
        s->nm = 0;
    }
}

/* The session ends (a close, or a failed open). */
static void end_session(struct run *r)
{
    uint64_t now = calls_of(r->c);
    if (!r->fired_before_sess && now >= r->fire_at) {
        /* the fault fired in this session */
        if (r->c->op == KV_FILE_SYNC && r->c->kind != KV_FILE_KIND_DIR && !r->c->manifest &&
            now != r->fire_at) {
            r->sync_retried++;
            violation(r, "%" PRIu64 " more syncs after the failed one", now - r->fire_at);
        }
        if (!r->sess_errors && r->c->policy != INVISIBLE && r->c->policy != RECOVERS)
            violation(r, "the fault fired and no call returned an error");
    } else if (!r->fired_before_sess && r->sess_errors) {
        violation(r, "errors in a session before the fault fired");
    } else if (r->fired_before_sess && r->sess_errors) {
        violation(r, "errors in a session after the fault was spent");
    }
    if (r->c->policy == INVISIBLE && r->sess_errors)
        violation(r, "an error under MDB_MAP_FULL (the map should grow)");
    r->fired_before_sess = now >= r->fire_at;
    r->sess_err = 0;
    r->sess_get_failed = 0;
    r->sess_errors = 0;
}

static int do_open(struct run *r)
{
    r->db = NULL;
    kv_options o;
    kv_options_init(&o);
    o.write_buffer_size = 64 * 1024;
    o.block_cache_size = 0; /* every get reads its block from the file */
    int rc = kv_open(r->path, &o, &r->db);
    if (rc != KV_OK && r->final) {
        violation(r, "the database does not open without the fault: %s", kv_strerror(rc));
        r->db = NULL;
        return 0;
    }
    if (rc != KV_OK) {
        ck_assert_ptr_null(r->db);
        r->open_failed++;
        note_error(r, W_OPEN, rc, "kv_open");
        end_session(r);
        rc = kv_open(r->path, &o, &r->db); /* the fault is spent */
        if (rc != KV_OK) {
            violation(r, "the database does not open after a failed open: %s", kv_strerror(rc));
            r->db = NULL;
            return 0;
        }
    }
    return 1;
}

static void do_close(struct run *r)
{
    int rc = kv_close(r->db);
    r->db = NULL;
    if (rc != KV_OK) {
        note_error(r, W_CLOSE, rc, "kv_close");
        if (r->sess_err && rc != r->sess_err)
            violation(r, "kv_close returned %s, the session's error was %s", kv_strerror(rc),
                      kv_strerror(r->sess_err));
    }
    end_session(r);
}

/* A write, flush or compaction's outcome; entries apply to the model. */
static void write_done(struct run *r, int rc, const struct step *s, int idx, const char *what)
{
    if (rc == KV_OK) {
        if (r->sess_err || r->sess_get_failed)
            r->accepted_after++;
        if (r->sess_err && r->c->policy != EITHER && r->c->policy != RECOVERS)
            violation(r, "%s accepted after %s in the same session (not refused until reopen)",
                      what, kv_strerror(r->sess_err));
        for (int j = 0; s && j < s->n; j++) {
            r->keys[s->e[j].key].acked = s->e[j].vid;
            r->keys[s->e[j].key].nm = 0;
        }
        return;
    }
    note_error(r, s ? W_WRITE : W_FLUSH, rc, what);
    if (r->sess_get_failed && r->c->policy == READ)
        violation(r, "%s failed (%s) after a failed get: a failed read stopped writes", what,
                  kv_strerror(rc));
    if (r->sess_err) {
        r->refused++;
        if (rc != r->sess_err)
            violation(r, "%s refused with %s, the first error was %s", what, kv_strerror(rc),
                      kv_strerror(r->sess_err));
        return; /* refused: must never apply */
    }
    r->sess_err = rc;
    for (int j = 0; s && j < s->n; j++) {
        struct keystate *k = &r->keys[s->e[j].key];
        if (k->nm < MAXM) {
            k->maybe[k->nm] = s->e[j].vid;
            k->maybe_step[k->nm] = idx;
            k->nm++;
        }
    }
}

static void do_step(struct run *r, int idx)
{
    const struct step *s = &steps[idx];
    if (!r->db && s->type != S_OPEN)
        return;
    char key[16];
    uint8_t val[2048];
    int rc;
    switch (s->type) {
    case S_OPEN:
        do_open(r);
        break;
    case S_PUT:
    case S_DEL:
        key_of(key, sizeof key, "key", 5, s->e[0].key);
        if (!s->sync) {
            if (s->type == S_PUT) {
                size_t n = value_of(s->e[0].vid, val);
                rc = kv_put(r->db, key, strlen(key), val, n);
            } else {
                rc = kv_delete(r->db, key, strlen(key));
            }
            write_done(r, rc, s, idx, s->type == S_PUT ? "kv_put" : "kv_delete");
            break;
        }
        /* A synced put or delete goes through the per-call options. */
        /* fall through */
    case S_BATCH: {
        kv_batch *b;
        ck_assert_int_eq(kv_batch_new(&b), KV_OK);
        for (int j = 0; j < s->n; j++) {
            key_of(key, sizeof key, "key", 5, s->e[j].key);
            if (s->e[j].vid >= 0) {
                size_t n = value_of(s->e[j].vid, val);
                ck_assert_int_eq(kv_batch_put(b, key, strlen(key), val, n), KV_OK);
            } else {
                ck_assert_int_eq(kv_batch_delete(b, key, strlen(key)), KV_OK);
            }
        }
        kv_write_options wo = {.sync = s->sync};
        rc = kv_write_opts(r->db, &wo, b);
        kv_batch_free(b);
        write_done(r, rc, s, idx, s->sync ? "kv_write_opts (sync)" : "kv_write_opts");
        break;
    }
    case S_GET: {
        int32_t got;
        checked_get(r, s->e[0].key, &got);
        break;
    }
    case S_CHECK_ALL:
        for (int k = 0; k < NKEYS; k++) {
            int32_t got;
            checked_get(r, k, &got);
        }
        break;
    case S_FLUSH:
        write_done(r, kv_flush(r->db), NULL, idx, "kv_flush");
        break;
    case S_COMPACT: {
        char lo[16], hi[16];
        if (s->lo >= 0)
            key_of(lo, sizeof lo, "key", 5, s->lo);
        if (s->hi >= 0)
            key_of(hi, sizeof hi, "key", 5, s->hi);
        rc = kv_compact_range(r->db, s->lo >= 0 ? lo : NULL, s->lo >= 0 ? strlen(lo) : 0,
                              s->hi >= 0 ? hi : NULL, s->hi >= 0 ? strlen(hi) : 0);
        write_done(r, rc, NULL, idx, "kv_compact_range");
        break;
    }
    case S_REOPEN:
        do_close(r);
        if (do_open(r))
            resolve(r);
        break;
    case S_CLOSE:
        do_close(r);
        break;
    }
}

/* ---- verification ------------------------------------------------------------------ */

static char kvtool[1024];

static void find_kvtool(void)
{
    const char *e = getenv("KVTOOL");
    if (e && *e) {
        snprintf(kvtool, sizeof kvtool, "%s", e);
        return;
    }
    char self[900];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash)
        return;
    *slash = '\0';
    snprintf(kvtool, sizeof kvtool, "%s/../tools/kvtool", self);
    if (access(kvtool, X_OK) != 0)
        kvtool[0] = '\0';
}

/* `kvtool db verify <path>`: 1 passed. Its stderr goes into r->msg. */
static int kvtool_verify(struct run *r)
{
    char errpath[800];
    snprintf(errpath, sizeof errpath, "%s.verify", r->path);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int out = open("/dev/null", O_WRONLY);
        int err = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (out < 0 || err < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
            _exit(126);
        execl(kvtool, kvtool, "db", "verify", r->path, (char *)NULL);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        ck_assert_int_eq(errno, EINTR);
    int ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    if (!ok) {
        char text[400] = "";
        FILE *f = fopen(errpath, "r");
        if (f) {
            size_t n = fread(text, 1, sizeof text - 1, f);
            text[n] = '\0';
            fclose(f);
        }
        violation(r, "kvtool db verify failed (status %d): %s", st, text);
    }
    unlink(errpath);
    return ok;
}

/* Without kvtool: the directory as kv_inspect sees it: every live table
 * present with its recorded size, nothing left over. */
static int inspect_verify(struct run *r)
{
    kv_dir_info *info;
    int rc = kv_inspect(r->path, &info);
    if (rc != KV_OK) {
        violation(r, "kv_inspect: %s", kv_strerror(rc));
        return 0;
    }
    int ok = 1;
    for (size_t i = 0; i < info->ntables; i++)
        if (!info->tables[i].present || info->tables[i].disk_size != info->tables[i].file_size)
            ok = 0;
    for (size_t i = 0; i < info->nfiles; i++) {
        int k = info->files[i].kind;
        if (k == KV_FILE_ORPHAN || k == KV_FILE_TEMP || k == KV_FILE_OLD_LOG)
            ok = 0;
    }
    kv_inspect_free(info);
    if (!ok)
        violation(r, "kv_inspect: tables missing or files left over");
    return ok;
}

/* The fault disarmed: open, everything as the model says, an iterator
 * walks exactly it, close, db verify. */
static void final_check(struct run *r)
{
    r->final = 1;
    if (!do_open(r)) {
        r->lost++;
        return;
    }
    resolve(r);
    kv_iter *it;
    ck_assert_int_eq(kv_iter_new(r->db, NULL, &it), KV_OK);
    int seen = 0, present = 0;
    for (int k = 0; k < NKEYS; k++)
        present += r->keys[k].acked >= 0;
    for (kv_iter_seek_first(it); kv_iter_valid(it); kv_iter_next(it)) {
        size_t kl, vl;
        const char *k = kv_iter_key(it, &kl);
        const void *v = kv_iter_value(it, &vl);
        int key = -1;
        if (kl == 8 && memcmp(k, "key", 3) == 0) {
            key = 0;
            for (int i = 3; i < 8 && key >= 0; i++)
                key = k[i] >= '0' && k[i] <= '9' ? key * 10 + (k[i] - '0') : -1;
            if (key >= NKEYS)
                key = -1;
        }
        if (key < 0 || r->keys[key].acked < 0 || decode(v, vl) != r->keys[key].acked) {
            violation(r, "the iterator shows a pair the model does not hold");
            break;
        }
        seen++;
    }
    if (kv_iter_status(it) != KV_OK)
        violation(r, "iterator: %s", kv_strerror(kv_iter_status(it)));
    else if (seen != present)
        violation(r, "the iterator walked %d keys, the model holds %d", seen, present);
    kv_iter_free(it);
    int rc = kv_close(r->db);
    r->db = NULL;
    if (rc != KV_OK)
        violation(r, "kv_close after recovery: %s", kv_strerror(rc));
    int ok = kvtool[0] ? kvtool_verify(r) : inspect_verify(r);
    if (!ok)
        r->verify_failed++;
}

/* ---- a combination: measure, then every n ----------------------------------------------- */

static int run_seq, combo_index;

/* Runs the workload with the fault on call n (0: none); returns calls_of()
 * made by the workload. */
static uint64_t run_workload(const struct combo *c, uint64_t n, struct run *r)
{
    memset(r, 0, sizeof *r);
    r->c = c;
    r->first_where = W_NONE;
    snprintf(r->path, sizeof r->path, "%s/db%d-%d", test_root, combo_index, run_seq++);
    for (int k = 0; k < NKEYS; k++)
        r->keys[k].acked = -1;
    uint64_t base = calls_of(c);
    r->fire_at = n ? base + n : UINT64_MAX;
    if (n)
        arm(c, n);
    for (int i = 0; i < nsteps; i++)
        do_step(r, i);
    if (r->db) { /* a failed reopen left it closed: nothing to do */
        kv_close(r->db);
        r->db = NULL;
    }
    disarm(c);
    uint64_t made = calls_of(c) - base;
    r->fired = n && base + n <= calls_of(c);
    final_check(r);
    nftw(r->path, remove_one, 16, FTW_DEPTH | FTW_PHYS);
    return made;
}

struct tally {
    uint64_t calls, last_n, stride, runs, fired, open_failed, refused_runs, refused,
        kept_working, gets_failed, maybe_applied, lost, sync_retried, verify_failed,
        violations;
    uint64_t where[W_NONE + 1];
    double secs;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static unsigned max_runs(void)
{
    const char *e = getenv("KV_FAULTS_FULL");
    if (e && *e == '1')
        return 0;
    e = getenv("KV_FAULTS_RUNS");
    return e && atoi(e) > 0 ? (unsigned)atoi(e) : 80;
}

START_TEST(fault_combo)
{
    const struct combo *c = &combos[_i];
    combo_index = _i;
    make_workload();
    double t0 = now_s();
    struct run *r = malloc(sizeof *r);
    ck_assert_ptr_nonnull(r);
    struct tally t = {0};
    /* measure: no fault; the workload must pass its own checks */
    t.calls = run_workload(c, 0, r);
    ck_assert_msg(r->errors == 0, "%s, no fault: %s", c->name, r->msg);
    ck_assert_msg(t.calls > 0, "%s: the workload makes no such call", c->name);
    unsigned cap = max_runs();
    t.stride = cap && t.calls > cap ? (t.calls + cap - 1) / cap : 1;
    char first_msg[1400] = "";
    for (uint64_t n = 1;;) {
        run_workload(c, n, r);
        t.runs++;
        t.last_n = n;
        t.fired += r->fired != 0;
        t.open_failed += r->open_failed > 0;
        t.refused += (uint64_t)r->refused;
        t.refused_runs += r->refused > 0;
        t.kept_working += r->accepted_after > 0;
        t.gets_failed += (uint64_t)r->gets_failed;
        t.maybe_applied += (uint64_t)r->maybe_applied;
        t.lost += (uint64_t)r->lost;
        t.sync_retried += (uint64_t)r->sync_retried;
        t.verify_failed += (uint64_t)r->verify_failed;
        t.where[r->first_where]++;
        if (r->errors && !first_msg[0])
            snprintf(first_msg, sizeof first_msg, "n=%" PRIu64 ": %s", n, r->msg);
        t.violations += r->errors != 0;
        if (n >= t.calls)
            break;
        n = n + t.stride < t.calls ? n + t.stride : t.calls;
    }
    t.secs = now_s() - t0;
    free(r);

    /* one row for the table at the end */
    char row[1024], path[600];
    int len = snprintf(row, sizeof row,
                       "%d|%s|%" PRIu64 "|%" PRIu64 "|%" PRIu64 "|%" PRIu64 "|%" PRIu64
                       "|%" PRIu64 "|%" PRIu64 "|%" PRIu64 "|%" PRIu64 "|%" PRIu64 "|%" PRIu64
                       "|%" PRIu64 "|%" PRIu64 "|%" PRIu64 "|%" PRIu64 "|%" PRIu64 "|%" PRIu64
                       "|%" PRIu64 "|%" PRIu64 "|%.1f\n",
                       _i, c->name, t.calls, t.stride, t.runs, t.fired, t.where[W_WRITE],
                       t.where[W_FLUSH], t.where[W_GET], t.where[W_OPEN], t.where[W_CLOSE],
                       t.refused_runs, t.refused, t.kept_working, t.open_failed, t.gets_failed,
                       t.maybe_applied, t.lost, t.sync_retried, t.verify_failed, t.violations,
                       t.secs);
    snprintf(path, sizeof path, "%s/results", test_root);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, row, (size_t)len), len);
    close(fd);
    ck_assert_msg(t.violations == 0, "%s: %" PRIu64 " of %" PRIu64 " runs broke the contract; %s",
                  c->name, t.violations, t.runs, first_msg);
    ck_assert_msg(t.fired > 0, "%s: the fault never fired", c->name);
}
END_TEST

/* ---- the table ------------------------------------------------------------------------ */

static void print_table(void)
{
    char path[600];
    snprintf(path, sizeof path, "%s/results", test_root);
    FILE *f = fopen(path, "r");
    if (!f) {
        printf("faults: no results\n");
        return;
    }
    char rows[NCOMBOS][1024], prose[NCOMBOS][512];
    memset(prose, 0, sizeof prose);
    int have[NCOMBOS] = {0};
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        int i = atoi(line);
        if (i >= 0 && i < NCOMBOS) {
            snprintf(rows[i], sizeof rows[i], "%s", line);
            have[i] = 1;
        }
    }
    fclose(f);
    printf("\nFault injection (tests/robustness/check_faults.c): one fresh database per n; the "
           "fault on "
           "the n-th call of its kind.\n"
           "db verify: %s\n\n",
           kvtool[0] ? kvtool : "kvtool not found: kv_inspect's view checked instead");
    printf("%-23s %6s %6s %5s %5s | %-27s | %7s %7s %5s %5s %5s | %5s %4s %5s %6s %4s %5s\n",
           "fault", "calls", "stride", "runs", "fired", "first error from: w/f/g/o/c",
           "refused", "(runs)", "kept", "openf", "getf", "mayap", "lost", "retry", "verify",
           "bad", "secs");
    for (int i = 0; i < NCOMBOS; i++) {
        if (!have[i]) {
            printf("%-23s  (did not finish)\n", combos[i].name);
            continue;
        }
        char name[64];
        unsigned long long v[20];
        double secs;
        char *p = strchr(rows[i], '|');
        char *q = p ? strchr(p + 1, '|') : NULL;
        if (!p || !q)
            continue;
        snprintf(name, sizeof name, "%.*s", (int)(q - p - 1), p + 1);
        int got = sscanf(q + 1,
                         "%llu|%llu|%llu|%llu|%llu|%llu|%llu|%llu|%llu|%llu|%llu|%llu|%llu|%llu|"
                         "%llu|%llu|%llu|%llu|%llu|%lf",
                         &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9],
                         &v[10], &v[11], &v[12], &v[13], &v[14], &v[15], &v[16], &v[17], &v[18],
                         &secs);
        if (got != 20)
            continue;
        char from[40];
        snprintf(from, sizeof from, "%llu/%llu/%llu/%llu/%llu", v[4], v[5], v[6], v[7], v[8]);
        printf("%-23s %6llu %6llu %5llu %5llu | %-27s | %7llu %7llu %5llu %5llu %5llu | %5llu "
               "%4llu %5llu %6llu %4llu %5.1f\n",
               name, v[0], v[1], v[2], v[3], from, v[10], v[9], v[11], v[12], v[13], v[14],
               v[15], v[16], v[17], v[18], secs);
        snprintf(prose[i], sizeof prose[i],
                 "%s: n=1..%llu %s%llu%s, %llu injected; writes refused until reopen: %llu "
                 "runs (%llu refusals); kept working: %llu; open failed: %llu; failed gets: "
                 "%llu; unacknowledged writes applied: %llu; acknowledged lost after reopen: "
                 "%llu; syncs retried: %llu; db verify failed: %llu",
                 name, v[0], v[1] > 1 ? "(stride " : "(every n, ", v[1] > 1 ? v[1] : v[2],
                 v[1] > 1 ? ")" : " runs)", v[3], v[9], v[10], v[11], v[12], v[13], v[14],
                 v[15], v[16], v[17]);
    }
    printf("\n");
    for (int i = 0; i < NCOMBOS; i++)
        if (prose[i][0])
            printf("%s\n", prose[i]);
    printf("\ncalls: calls of that kind in the fault-free workload (n runs 1..calls by stride, "
           "and the last); fired: runs where the n-th call happened.\n"
           "first error from: the call that first returned an error: write (put/delete/batch) / "
           "flush or compact_range / get / open / close.\n"
           "refused: writes, flushes and compactions refused after the first error of their "
           "session (runs: runs with at least one);\n"
           "kept: runs where writes were accepted again in the same session; openf: runs where "
           "kv_open failed (the next open succeeded);\n"
           "getf: gets that failed; mayap: failed (unacknowledged) writes found applied after "
           "reopen; lost: acknowledged writes lost or wrong;\n"
           "retry: syncs after a failed sync in the same session; verify: db verify failures; "
           "bad: runs that broke the contract.\n");
}

static double run_t0;

/* After the run: the table of what each combination saw, and its time. */
static void report(void)
{
    print_table();
    printf("\nfaults: %.1f s\n", now_s() - run_t0);
}

Suite *test_suite(void)
{
    /* tmpfs when there is one: the faults are what is tested, and a synced
     * write costs a real disk milliseconds, ten times the whole suite */
    const char *t = getenv("KV_FAULTS_TMPDIR");
    if ((!t || !*t) && access("/dev/shm", W_OK | X_OK) == 0)
        t = "/dev/shm";
    test_set_base(t); /* none: $TMPDIR, or /tmp */
    find_kvtool();
    Suite *s = suite_create("faults");
    TCase *tc = tcase_create("faults");
    tcase_set_timeout(tc, 1100);
    tcase_add_loop_test(tc, fault_combo, 0, NCOMBOS);
    suite_add_tcase(s, tc);
    test_at_end(report);
    run_t0 = now_s();
    return s;
}
