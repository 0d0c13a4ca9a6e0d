/* kvcrash - the crash test: a child process runs a random workload on a
 * database from several threads and is killed with SIGKILL at a random
 * moment; the parent reopens the database and checks every key against an
 * exact model of what the child had acknowledged and what it had in
 * flight. The same database goes on to the next cycle, so the state (and
 * every recovery) accumulates.
 *
 *   kvcrash [--cycles N] [--seconds S] [--seed X] [--dir D] [--kvtool PATH] [--power-loss]
 *           [--verbose]
 *
 * One cycle
 *
 *  1. The parent forks a child. The child opens the database with a
 *     64 KiB memtable, 64 KiB output tables, a 256 KiB level 1, level-0
 *     compaction at 2 tables and 1 KiB blocks, so that flushes and
 *     compactions never stop; compression (zstd or none) and the filter
 *     layout (blocked or classic) change from cycle to cycle. Values of
 *     min_blob_size bytes or more go to blob files (doc/database.md, "Blob
 *     files"): 512 in most cycles, 128 in one in eight (values the tables
 *     held move out as compactions rewrite them), none in one in eight
 *     (new values stay in the tables; the blob files already written are
 *     read, and their garbage still counted); blob_gc_threshold 0.2 and
 *     64 KiB blob files, so that compactions relocate values and the idle
 *     thread collects garbage within a cycle. It runs:
 *     - 3 writer threads. Writer t owns the 2,048 keys "w<t>/<5 digits>"
 *       (some end in binary bytes, NUL included) and runs its own numbered
 *       sequence of operations 0, 1, 2, ...: puts and overwrites (one value
 *       in ten up to 1.5 KiB, one in twenty 600 bytes to 4 KiB, the rest
 *       under 150 bytes), merges (see "Merges"), deletes, range deletes of
 *       1 to 48 of its keys (one in eight up to 400), batches of 2 to 24
 *       puts, merges, deletes and range deletes (a key may appear twice in
 *       one; the later wins), large puts of 2 to 16 KiB. They go through
 *       kv_put, kv_merge, kv_delete, kv_delete_range, kv_write and
 *       kv_write_opts.
 *     - 1 maintenance thread: kv_flush, kv_compact_range over everything
 *       and over part of one writer's keys, at random intervals; after
 *       each it reports kv_stats's blob figures (bytes written to blob
 *       files, bytes relocated) for the summary.
 *     - 1 reader thread: gets and short scans; every value it reads must
 *       be one that some writer wrote (see "Values").
 *     - 1 checkpoint thread: up to CKPTS kv_checkpoint calls, 20 to 120 ms
 *       apart, each into a new directory of <dir>/ckpt (see "Checkpoints").
 *     Each cycle is a sync cycle (every write syncs), a non-sync cycle, or
 *     a mixed one (one write in four syncs, through kv_write_opts).
 *     The child runs 1, 2 or 4 background jobs, and leveled or lazy
 *     leveling in blocks of three cycles (runs_per_level 2, 3 or 4,
 *     drawn each cycle). In one cycle in three the writers keep quiet
 *     spells (nothing written in the last 60 ms of every 200) under
 *     idle_compaction_ms 10, so that the idle merges run, and are killed,
 *     within the cycle.
 *
 *  2. The child reports through a pipe, in 16-byte records (a write of at
 *     most PIPE_BUF bytes to a pipe is atomic, so the threads' records
 *     never interleave): READY once kv_open returned; SENT(thread, op)
 *     just before each call and ACKED(thread, op) once it returned KV_OK;
 *     FAILED(thread, op, code) when it returned anything else (the child
 *     then exits: no error is expected). A writer runs one operation at a
 *     time, so at the kill writer t has acknowledged its operations
 *     0 .. a-1, has at most one, number a, in flight (SENT without ACKED),
 *     and never began any later one. The parent checks that the records
 *     come in this order.
 *
 *  3. The parent kills the child with SIGKILL 5 to 600 ms after READY; in
 *     one cycle in ten, and always in the first, it kills it 0 to 15 ms
 *     after the fork instead: often inside kv_open, which in the first
 *     cycle is creating the database and later is recovering it.
 *
 *  4. Before anything recovers, kv_inspect lists the crashed database:
 *     every table and blob file the manifest names must be on disk with
 *     its recorded size (until one kv_open has returned, a kill inside the
 *     first may leave no database yet: see inspect_crashed). `kvtool db
 *     verify` reports the files a crash leaves for the next open to delete
 *     (tables and blob files the manifest does not name, .sst.tmp, logs
 *     older than the live one) as problems, so it runs on the crashed
 *     database only when kv_inspect found none of those, and must then
 *     exit 0 (it reads every value a table refers to back from its blob
 *     file, and checks each blob file's garbage against the references).
 *
 *  5. In one cycle in eight, a second child opens the crashed database
 *     (recovery; background compaction on) and is killed 0 to 40 ms
 *     later: the parent's own open then recovers a database whose
 *     recovery crashed.
 *
 *  6. The parent opens the database (kv_open must succeed) with
 *     compaction and blob garbage collection out of reach, checks it
 *     (below) and closes it (kv_close
 *     must return KV_OK); then `kvtool db verify` must exit 0 on it: the
 *     tables it checks are exactly those the crash left plus the one
 *     recovery wrote, and after a clean close the manifest and the
 *     directory must agree. The next cycle's child opens what is left.

 * What is checked
 *
 *  The workload is a pure function of --seed, the cycle and the thread,
 *  so from the op numbers alone the parent replays every writer's
 *  operations (keys, values, kinds) and knows each key's exact state:
 *  - Every acknowledged operation is there, in sync, non-sync and mixed
 *    cycles alike: a SIGKILL is a crash of the process, which kv.h
 *    promises an acknowledged write survives even without sync. (The
 *    machine-crash contract of non-sync writes, a prefix with no holes,
 *    is weaker and implied: nothing acknowledged is missing at all.)
 *  - A writer's operation in flight at the kill is there wholly or not at
 *    all: every key of a batch shows the batch's result, or every key
 *    shows the state before it. Which one is counted ("applied", "not
 *    applied"; "indistinguishable" when the operation only deleted keys
 *    that were absent already), and the model follows what was found.
 *  - Nothing that was never sent appears: every key's value must be
 *    exactly the bytes of its last acknowledged write, or of the write in
 *    flight; a deleted key must be absent.
 *  - Every one of the 6,144 keys is read with kv_get; then a forward and a
 *    backward scan must return exactly the present keys of the model, in
 *    order, with their values, and no other key.
 *  - Nothing fails: no write, flush, compaction or read in the child, no
 *    open or close in the parent.
 *  - `kvtool db verify` exits 0 (step 4 and 6), when --kvtool is given.
 *  - The workload wrote blob files: a run of 10 cycles or more whose
 *    children wrote no byte to one fails, since it would no longer test
 *    them.
 *
 * Checkpoints
 *
 *  The child's checkpoint thread sends CKPT_BEGIN(k) just before
 *  kv_checkpoint and CKPT_DONE(k) once it returned KV_OK. In the pipe's
 *  order, writer t had acknowledged ops 0 .. lo-1 before the call began and
 *  had sent only ops 0 .. hi-1 when it returned. After the kill (and the
 *  power cut, with --power-loss), before the database itself is recovered,
 *  every checkpoint whose CKPT_DONE arrived must open (kv_open recovers it)
 *  and hold, for each writer t, exactly the state after ops 0 .. s-1 of this
 *  cycle for some s in [lo, hi] (on top of the state the cycle began from),
 *  every value read back from its tables, blob files or replayed logs; it
 *  must close cleanly. A checkpoint the kill interrupted is ignored. Then
 *  <dir>/ckpt is removed (the names differ from cycle to cycle).
 *
 * Power loss (--power-loss)
 *
 *  A SIGKILL loses nothing the kernel has; a machine crash loses what was
 *  not synced. With --power-loss the parent maps a kv_file_track record
 *  (tests/testing/testing.h) shared with every child, and the testing
 *  library's I/O table, under the file layer of every process (the
 *  workload child, the recovery child, the parent's own recovery),
 *  records in it, per file it creates, the bytes written, the
 *  bytes its last successful fsync/fdatasync covered and whether a
 *  directory sync made its name (creation, rename) durable. After each
 *  kill (step 3, and step 5's) the parent cuts the power: a file whose
 *  creation is not durable is deleted, a rename that is not is undone,
 *  every other file is cut back to its synced length; in a quarter of
 *  the cycles a file may keep a random part of its unsynced tail, and in
 *  another quarter the end of that part may read as zeros. The manifest
 *  (LMDB, synced at each commit) and files made before are left alone.
 *  A blob file is fdatasynced and its directory synced before the
 *  manifest commit that names it, so every blob file the manifest names
 *  must be whole after the cut (step 4), and every value is read back.
 *  Then the checks change (check_power):
 *  - Every operation acknowledged with sync is there, and so is every
 *    operation of the other writers that happened before it.
 *  - Of the rest, writer t keeps a prefix 0 .. s-1 of the operations it
 *    sent: each key of it is exactly its state after that prefix (so a
 *    batch is whole or absent, and nothing never sent appears).
 *  - No holes across writers: when writer t had acknowledged operation A
 *    before writer u sent B (A's ACKED record precedes B's SENT in the
 *    pipe), A committed first, so if B survived A must have.
 *  - Writes of earlier cycles, found after their own recovery, are
 *    durable: none may be lost.
 *  The summary then counts the power cuts, the files removed, renamed
 *  back, truncated, with kept or zeroed tails, and the acknowledged
 *  non-sync writes lost (allowed). KVCRASH_TRACE=1 prints the record
 *  before each cut.
 *
 * Values: "c<cycle> t<thread> o<op> e<entry> k<key>|" followed by filler
 * bytes (half a repeated letter, half pseudo-random) derived from --seed
 * and that header, so any value names the write that made it and its
 * exact bytes can be recomputed: the reader thread checks what it reads
 * that way, and a failure message says which write a wrong value came
 * from.
 *
 * Merges: every open names the merge operator "kvcrash.trailer". An
 * operand is a trailer "{M n<count> h<hash> c<cycle> t<thread> o<op>
 * e<entry> k<key>}" for itself alone; a merged value is the put's value
 * (none when the key was absent) followed by one trailer for all the
 * operands since: their count, a hash of them in order that groups freely
 * (full or partial merges give the same bytes) and the newest one's write.
 * So a key's state is its last put or deletion and the operands after it,
 * and a lost, repeated or reordered operand, or one applied across a
 * deletion or range deletion, shows.
 *
 * The first cycle that breaks a rule stops the run with one line per
 * violation: the cycle, the key, the states the model allows and what was
 * found. A run that passes, stops at --seconds or is interrupted (SIGINT,
 * SIGTERM) ends with the summary line of figures ("kvcrash: ok: ..." or
 * "kvcrash: interrupted: ..."; with --power-loss a line of power-cut
 * figures before it). Exit status: 0 every cycle passed; 1 a rule was
 * broken or the test could not run (the directory is then kept and its
 * path printed); 2 bad usage; 130 interrupted. A run is deterministic from
 * --seed except for when the kill lands. */
#define _XOPEN_SOURCE 700
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <kv/kv.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testing.h" /* the power-loss simulation (kv_testing) */

#define EXIT_FAIL 1
#define EXIT_USAGE 2
#define EXIT_INTERRUPTED 130

/* ---- the workload's shape ---------------------------------------------------------- */

#define WRITERS 3                  /* threads 0 .. WRITERS-1 */
#define MAINT WRITERS              /* the flush/compaction thread */
#define READER (WRITERS + 1)       /* the reader thread */
#define THREADS (WRITERS + 2)
#define CKPT_THREAD 0xfe           /* the checkpoint thread, in records */
#define CKPTS 4                    /* checkpoints per cycle, at most */
#define KEYS 2048                  /* per writer */
#define MAX_ENTRIES 24             /* per batch */
#define KEY_CAP 16
#define HDR_CAP 96                 /* a value's header, NUL included */
#define TRAIL_CAP 96               /* a merge trailer, NUL included */
#define VALUE_CAP (HDR_CAP + 16384 + TRAIL_CAP)

/* Cycle kinds. */
enum { MODE_SYNC, MODE_NOSYNC, MODE_MIXED };
static const char *const mode_name[] = {"sync", "non-sync", "mixed"};

/* ---- small helpers ------------------------------------------------------------------- */

static uint64_t mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

struct rng {
    uint64_t s;
};

static uint64_t rnd(struct rng *r)
{
    r->s += 0x9E3779B97F4A7C15ull;
    return mix64(r->s);
}

static uint32_t below(struct rng *r, uint32_t n)
{
    return (uint32_t)(rnd(r) % n);
}

/* The generator of one thread in one cycle. */
static struct rng thread_rng(uint64_t seed, uint32_t cycle, unsigned thread)
{
    struct rng r = {mix64(seed ^ mix64(((uint64_t)cycle << 8 | thread) + 0x5eed))};
    return r;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Escapes bytes for a message: printable ASCII as is, '\', '"' and every
 * other byte as \xNN; longer input is cut with "...". */
static const char *esc(const void *p, size_t n, char *out, size_t cap)
{
    const uint8_t *b = p;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (o + 8 >= cap) {
            memcpy(out + o, "...", 4);
            return out;
        }
        if (b[i] >= 0x20 && b[i] < 0x7f && b[i] != '\\' && b[i] != '"')
            out[o++] = (char)b[i];
        else
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", b[i]);
    }
    out[o] = 0;
    return out;
}

/* ---- keys and values --------------------------------------------------------------------
 *
 * Key `idx` of writer t: "w<t>/<idx as 5 digits>", then NUL and one byte when
 * idx % 5 == 1, then 0xff 0xfe when idx % 7 == 3. Bytewise order is (t, idx). */
static size_t key_make(unsigned t, uint32_t idx, uint8_t *k)
{
    size_t n = 0;
    k[n++] = 'w';
    k[n++] = (uint8_t)('0' + t);
    k[n++] = '/';
    for (uint32_t d = 10000; d; d /= 10)
        k[n++] = (uint8_t)('0' + idx / d % 10);
    if (idx % 5 == 1) {
        k[n++] = 0;
        k[n++] = (uint8_t)idx;
    }
    if (idx % 7 == 3) {
        k[n++] = 0xff;
        k[n++] = 0xfe;
    }
    return n;
}

/* The inverse: 0 with *t, *idx when k is exactly one of the keys. */
static int key_parse(const uint8_t *k, size_t n, unsigned *t, uint32_t *idx)
{
    if (n < 8 || k[0] != 'w' || k[1] < '0' || k[1] >= '0' + WRITERS || k[2] != '/')
        return -1;
    uint32_t v = 0;
    for (int i = 3; i < 8; i++) {
        if (k[i] < '0' || k[i] > '9')
            return -1;
        v = v * 10 + (uint32_t)(k[i] - '0');
    }
    if (v >= KEYS)
        return -1;
    uint8_t again[KEY_CAP];
    unsigned tt = (unsigned)(k[1] - '0');
    if (key_make(tt, v, again) != n || memcmp(again, k, n) != 0)
        return -1;
    *t = tt;
    *idx = v;
    return 0;
}

/* Who wrote a value. */
struct vid {
    uint32_t cycle;
    unsigned thread;
    uint64_t op;
    unsigned entry;
    uint32_t key;
    uint32_t pad; /* filler bytes after the header */
};

static size_t value_header(const struct vid *id, char *h)
{
    return (size_t)snprintf(h, HDR_CAP, "c%" PRIu32 " t%u o%" PRIu64 " e%u k%" PRIu32 "|",
                            id->cycle, id->thread, id->op, id->entry, id->key);
}

/* The value's bytes into v (VALUE_CAP); returns its length. */
static size_t value_make(uint64_t seed, const struct vid *id, uint8_t *v)
{
    size_t h = value_header(id, (char *)v);
    uint64_t x = mix64(seed ^ mix64(((uint64_t)id->cycle << 8 | id->thread) ^
                                    mix64(id->op * 64 + id->entry + ((uint64_t)id->key << 40))));
    uint32_t half = id->pad / 2;
    memset(v + h, 'a' + (int)(x % 26), half);
    for (uint32_t i = half; i < id->pad; i++) {
        if ((i - half) % 8 == 0)
            x = mix64(x);
        v[h + i] = (uint8_t)(x >> ((i - half) % 8 * 8));
    }
    return h + id->pad;
}

/* Reads a value's header: 0 with *id (pad from the length) when the value
 * starts with a well-formed header, in its canonical form. */
static int value_parse(const void *val, size_t len, struct vid *id)
{
    char h[HDR_CAP], again[HDR_CAP];
    const char *bar = memchr(val, '|', len < HDR_CAP - 1 ? len : HDR_CAP - 1);
    if (!bar)
        return -1;
    size_t hl = (size_t)(bar - (const char *)val) + 1;
    memcpy(h, val, hl);
    h[hl] = 0;
    unsigned long long op;
    unsigned c, t, e, k;
    if (sscanf(h, "c%u t%u o%llu e%u k%u|", &c, &t, &op, &e, &k) != 5 || t >= WRITERS)
        return -1;
    *id = (struct vid){c, t, op, e, k, (uint32_t)(len - hl)};
    if (value_header(id, again) != hl || memcmp(again, h, hl) != 0)
        return -1;
    return 0;
}

/* 0 when the bytes are exactly those of the write their header names. */
static int value_check(uint64_t seed, const void *val, size_t len, struct vid *id,
                       uint8_t *scratch)
{
    if (value_parse(val, len, id) != 0 || len > VALUE_CAP)
        return -1;
    return value_make(seed, id, scratch) == len && memcmp(scratch, val, len) == 0 ? 0 : -1;
}

/* ---- merges ----------------------------------------------------------------------------
 *
 * Merge operands and merged values carry a trailer, "{M n<count> h<hash>
 * c<cycle> t<thread> o<op> e<entry> k<key>}": how many operands were merged
 * since the key was last put or deleted, a hash of them in order, and the
 * newest one's write. An operand is the trailer of itself alone (count 1,
 * the hash of its write); a merged value is the put's value, if any, then
 * the trailer of every operand since. The hash of operands x1..xn is
 * x1 P^(n-1) + ... + xn (mod 2^64), so operands combine in any grouping
 * (full_merge onto a value, partial_merge of operands alone) into the same
 * bytes, and a lost, repeated or reordered operand changes them. */

#define MERGE_P 0x100000001B3ull

struct trail {
    uint32_t n;
    uint64_t h;
    struct vid last; /* pad unused */
};

static uint64_t pow_p(uint64_t k)
{
    uint64_t r = 1, b = MERGE_P;
    for (; k; k >>= 1, b *= b)
        if (k & 1)
            r *= b;
    return r;
}

/* The hash of one operand, from its write. */
static uint64_t operand_hash(uint64_t seed, const struct vid *id)
{
    return mix64(seed ^ mix64(((uint64_t)id->cycle << 8 | id->thread) ^
                              mix64(id->op * 64 + id->entry + ((uint64_t)id->key << 40) + 77)));
}

static size_t trail_make(const struct trail *m, char *out)
{
    return (size_t)snprintf(out, TRAIL_CAP,
                            "{M n%" PRIu32 " h%016" PRIx64 " c%" PRIu32 " t%u o%" PRIu64
                            " e%u k%" PRIu32 "}",
                            m->n, m->h, m->last.cycle, m->last.thread, m->last.op, m->last.entry,
                            m->last.key);
}

/* 1 with *m and *base (the bytes before it) when val ends with a trailer in
 * its canonical form, else 0. */
static int trail_split(const void *val, size_t len, size_t *base, struct trail *m)
{
    const char *v = val;
    if (len < 8 || v[len - 1] != '}')
        return 0;
    size_t from = len > TRAIL_CAP ? len - TRAIL_CAP : 0;
    for (size_t i = len - 3; i + 1 > from && i < len; i--) {
        if (v[i] != '{' || v[i + 1] != 'M' || v[i + 2] != ' ')
            continue;
        char t[TRAIL_CAP], again[TRAIL_CAP];
        size_t tl = len - i;
        if (tl >= TRAIL_CAP)
            return 0;
        memcpy(t, v + i, tl);
        t[tl] = 0;
        unsigned long long op, h;
        unsigned n, c, th, e, k;
        if (sscanf(t, "{M n%u h%llx c%u t%u o%llu e%u k%u}", &n, &h, &c, &th, &op, &e, &k) != 7)
            return 0;
        *m = (struct trail){n, h, {c, th, op, e, k, 0}};
        if (trail_make(m, again) != tl || memcmp(again, t, tl) != 0 || n == 0)
            return 0;
        *base = i;
        return 1;
    }
    return 0;
}

/* m, then the operands o (oldest first), in one trailer. */
static void trail_add(struct trail *m, const struct trail *o)
{
    m->h = m->h * pow_p(o->n) + o->h;
    m->n += o->n;
    m->last = o->last;
}

static int merge_full(void *state, const void *key, size_t klen, const void *existing,
                      size_t existing_len, const void *const *ops, const size_t *lens, size_t n,
                      void **result, size_t *result_len)
{
    (void)state, (void)key, (void)klen;
    struct trail m = {0}, o;
    size_t base = 0;
    if (existing && !trail_split(existing, existing_len, &base, &m))
        base = existing_len; /* a put's value: no operand yet */
    for (size_t i = 0; i < n; i++) {
        size_t ob;
        if (!trail_split(ops[i], lens[i], &ob, &o) || ob != 0)
            return -1; /* not an operand of this program */
        trail_add(&m, &o);
    }
    char *r = malloc(base + TRAIL_CAP);
    if (!r)
        return -1;
    if (base)
        memcpy(r, existing, base);
    *result_len = base + trail_make(&m, r + base);
    *result = r;
    return 0;
}

static int merge_partial(void *state, const void *key, size_t klen, const void *const *ops,
                         const size_t *lens, size_t n, void **result, size_t *result_len)
{
    (void)state, (void)key, (void)klen;
    struct trail m = {0}, o;
    for (size_t i = 0; i < n; i++) {
        size_t ob;
        if (!trail_split(ops[i], lens[i], &ob, &o) || ob != 0)
            return -1;
        trail_add(&m, &o);
    }
    char *r = malloc(TRAIL_CAP);
    if (!r)
        return -1;
    *result_len = trail_make(&m, r);
    *result = r;
    return 0;
}

static const kv_merge_operator merge_op = {"kvcrash.trailer", NULL, merge_full, merge_partial};

/* The operand a merge of write id writes, into o (TRAIL_CAP). */
static size_t operand_make(uint64_t seed, const struct vid *id, char *o)
{
    struct trail m = {1, operand_hash(seed, id), *id};
    m.last.pad = 0;
    return trail_make(&m, o);
}

/* 0 when val is a value some write of key idx of writer t made: a put's
 * value, then maybe a trailer whose newest operand is one of that key's. */
static int value_check_any(uint64_t seed, const void *val, size_t len, unsigned t, uint32_t idx,
                           uint32_t cycle, uint8_t *scratch)
{
    struct trail m;
    size_t base = len;
    struct vid id;
    if (trail_split(val, len, &base, &m) &&
        (m.last.thread != t || m.last.key != idx || m.last.cycle > cycle))
        return -1;
    if (base == 0 && base != len)
        return 0; /* operands alone */
    return value_check(seed, val, base, &id, scratch) == 0 && id.thread == t && id.key == idx &&
                   id.cycle <= cycle
               ? 0
               : -1;
}

/* ---- operations ------------------------------------------------------------------------- */

/* OP_INGEST: the entries (a range delete first, then puts, deletes and
 * merges of ascending keys) written by kv_table_writer into a table beside
 * the database and moved in with kv_ingest: all of it or none, as a batch
 * whose range delete comes first. */
enum { OP_PUT, OP_DELETE, OP_BATCH, OP_MERGE, OP_RANGE_DEL, OP_INGEST };
/* What an entry does. */
enum { E_PUT, E_DEL, E_MERGE, E_RANGE_DEL };
/* How an operation is submitted. */
enum {
    CALL_PLAIN,     /* kv_put or kv_delete: the database's sync option */
    CALL_WRITE,     /* kv_write: the database's sync option */
    CALL_WRITE_OPTS /* kv_write_opts with .sync */
};

struct entry {
    uint32_t key;
    uint32_t pad; /* a put's filler bytes */
    int what;     /* E_* */
    uint32_t end; /* E_RANGE_DEL: keys key .. end-1 (end <= KEYS) */
};

/* The keys an entry changes: lo .. hi-1. */
static void entry_keys(const struct entry *e, uint32_t *lo, uint32_t *hi)
{
    *lo = e->key;
    *hi = e->what == E_RANGE_DEL ? e->end : e->key + 1;
}

struct op {
    int kind, call, sync;
    unsigned n;
    struct entry e[MAX_ENTRIES];
};

/* A put's filler: one in ten up to 1.5 KiB, one in twenty 600 .. 4096
 * bytes (a blob file's, unless min_blob_size is off), the rest under 120. */
static uint32_t value_pad(struct rng *r)
{
    uint32_t x = below(r, 20);
    return x < 2 ? below(r, 1500) : x == 2 ? 600 + below(r, 3497) : below(r, 120);
}

/* A range delete of 1 .. 48 keys, one in eight of up to 400. */
static void range_next(struct rng *r, struct entry *e)
{
    e->what = E_RANGE_DEL;
    e->key = below(r, KEYS);
    uint32_t n = 1 + (below(r, 8) ? below(r, 48) : below(r, 400));
    e->end = e->key + n < KEYS ? e->key + n : KEYS;
}

/* An OP_INGEST: maybe a range delete, then 1 .. MAX_ENTRIES - 1 ascending
 * keys, each a put, a delete or a merge. */
static void ingest_next(struct rng *r, struct op *op)
{
    op->kind = OP_INGEST;
    unsigned j = 0;
    if (below(r, 3) == 0)
        range_next(r, &op->e[j++]);
    unsigned want = j + 1 + below(r, MAX_ENTRIES - 1 - j);
    for (uint32_t k = below(r, KEYS); j < want && k < KEYS; k += 1 + below(r, 40)) {
        struct entry *e = &op->e[j++];
        e->key = k;
        uint32_t w = below(r, 10);
        e->what = w < 2 ? E_DEL : w < 4 ? E_MERGE : E_PUT;
        e->pad = e->what == E_PUT ? value_pad(r) : 0;
    }
    op->n = j;
}

/* The next operation of a writer. A pure function of the generator, so the
 * parent replays it from the op number alone. In a sync cycle the
 * database is opened with sync on; otherwise with it off. */
static void op_next(struct rng *r, int mode, struct op *op)
{
    uint32_t x = below(r, 100);
    memset(op, 0, sizeof *op);
    if (x < 34 || x >= 97) {
        op->kind = OP_PUT;
        op->n = 1;
        op->e[0].key = below(r, KEYS);
        op->e[0].pad = x < 34 ? value_pad(r) : 2048 + below(r, 14336);
    } else if (x < 46) {
        op->kind = OP_MERGE;
        op->n = 1;
        op->e[0].key = below(r, KEYS);
        op->e[0].what = E_MERGE;
    } else if (x < 53) {
        op->kind = OP_DELETE;
        op->n = 1;
        op->e[0].key = below(r, KEYS);
        op->e[0].what = E_DEL;
    } else if (x < 57) {
        op->kind = OP_RANGE_DEL;
        op->n = 1;
        range_next(r, &op->e[0]);
    } else if (x < 60) {
        ingest_next(r, op);
    } else {
        op->kind = OP_BATCH;
        op->n = 2 + below(r, MAX_ENTRIES - 1);
        int run = (int)below(r, 2);
        uint32_t base = below(r, KEYS);
        for (unsigned j = 0; j < op->n; j++) {
            struct entry *e = &op->e[j];
            e->key = run ? (base + j) % KEYS : below(r, KEYS);
            if (j > 0 && below(r, 10) == 0)
                e->key = op->e[below(r, j)].key; /* the same key again */
            uint32_t w = below(r, 20);
            e->what = w < 3 ? E_DEL : w < 7 ? E_MERGE : w < 8 ? E_RANGE_DEL : E_PUT;
            if (e->what == E_RANGE_DEL)
                range_next(r, e);
            e->pad = e->what == E_PUT ? value_pad(r) : 0;
        }
    }
    op->sync = mode == MODE_SYNC ? 1 : mode == MODE_NOSYNC ? 0 : below(r, 4) == 0;
    if (mode == MODE_MIXED && op->sync)
        op->call = CALL_WRITE_OPTS;
    else if (op->kind != OP_BATCH)
        op->call = below(r, 3) ? CALL_PLAIN : CALL_WRITE_OPTS;
    else
        op->call = below(r, 2) ? CALL_WRITE : CALL_WRITE_OPTS;
}

/* ---- one cycle's plan ----------------------------------------------------------------- */

struct plan {
    uint32_t cycle;
    int mode;
    int zstd, classic;     /* compression, filter layout of this cycle's opens */
    int early;             /* kill 0..15 ms after the fork, not after READY */
    unsigned kill_ms;      /* after READY (or after the fork when early) */
    int kill_recovery;     /* kill a second child in its kv_open */
    unsigned recovery_ms;
    int cut_flags;         /* --power-loss: kv_file_power_cut's flags */
    size_t min_blob;       /* kv_options.min_blob_size of the child's open */
    int jobs;              /* kv_options.max_background_jobs: 1, 2 or 4 */
    int lazy;              /* kv_options.compaction_style: lazy leveling */
    int runs;              /* its runs_per_level: 2, 3 or 4 */
    int quiet;             /* quiet spells: writers pause, idle_compaction_ms 10 */
};

static struct plan plan_make(uint64_t seed, uint32_t cycle)
{
    struct rng r = thread_rng(seed, cycle, 0xff);
    struct plan p = {.cycle = cycle};
    p.mode = (int)below(&r, 3);
    p.zstd = (int)below(&r, 2);
    p.classic = below(&r, 4) == 0;
    p.early = cycle == 0 || below(&r, 10) == 0;
    p.kill_ms = p.early ? below(&r, 16) : 5 + below(&r, 596);
    p.kill_recovery = below(&r, 8) == 0;
    p.recovery_ms = below(&r, 41);
    uint32_t cut = below(&r, 4); /* half the cuts to the synced length exactly */
    p.cut_flags = cut < 2 ? 0 : cut == 2 ? KV_CUT_KEEP_TAIL : KV_CUT_KEEP_TAIL | KV_CUT_ZERO_TAIL;
    uint32_t blob = below(&r, 8); /* drawn last: the draws above stay as they were */
    p.min_blob = blob == 0 ? KV_BLOB_NEVER : blob == 1 ? 128 : 512;
    p.jobs = 1 << below(&r, 3); /* drawn after the rest, which stay as they were */
    /* In blocks of three cycles, so that lazy leveling gathers runs in
     * several levels before a switch to leveled merges into them (a
     * compaction into a level of several runs must take, from every run,
     * each table its output reaches). */
    p.lazy = (int)((cycle / 3 + (seed & 1)) % 2);
    p.runs = 2 + (int)below(&r, 3); /* drawn last: the draws above stay as they were */
    p.quiet = below(&r, 3) == 0;
    return p;
}

static void db_options(const struct plan *p, kv_options *o)
{
    kv_options_init(o);
    o->sync = p->mode == MODE_SYNC;
    o->write_buffer_size = (size_t)64 << 10;
    o->target_file_size = (size_t)64 << 10;
    o->max_bytes_for_level_base = (size_t)256 << 10;
    o->l0_compaction_trigger = 2;
    o->block_size = 1024;
    o->block_cache_size = (size_t)256 << 10;
    o->compression = p->zstd ? KV_COMPRESSION_ZSTD : KV_COMPRESSION_NONE;
    o->filter_layout = p->classic ? KV_BLOOM_CLASSIC : KV_BLOOM_BLOCKED;
    o->min_blob_size = p->min_blob;
    o->blob_file_size = (size_t)64 << 10; /* the least: relocations cut files */
    o->blob_gc_threshold = 0.2;
    o->merge_operator = &merge_op;
    o->max_background_jobs = p->jobs; /* flushes and compactions at once */
    if (p->lazy) { /* tiered upper levels, slices into the deepest (doc/database.md) */
        o->compaction_style = KV_COMPACTION_LAZY_LEVELED;
        o->runs_per_level = p->runs;
    }
    if (p->quiet) /* the writers' quiet spells (quiet_spell) wake the idle merges */
        o->idle_compaction_ms = 10;
}

/* ---- the pipe's records ------------------------------------------------------------------
 *
 * 16 bytes: kind (1), thread (1), 2 zero bytes, code (int32), op or count
 * (uint64), in the machine's byte order (both ends are this program). */
#define REC_SIZE 16
enum {
    REC_READY = 1,
    REC_SENT,
    REC_ACKED,
    REC_FAILED,
    REC_READS,
    REC_BLOB_WRITTEN,
    REC_BLOB_RELOCATED,
    REC_IDLE
};
/* The checkpoint step's records (op: the checkpoint's number k). */
enum { REC_CKPT_BEGIN = 20, REC_CKPT_DONE };

/* ---- the child ------------------------------------------------------------------------- */

struct child {
    kv_db *db;
    uint64_t seed;
    struct plan plan;
    int fd;
    const char *path;  /* the database's */
    uint64_t start_ms; /* when kv_open returned (now_ms) */
};

static void child_send(int fd, int kind, unsigned thread, int32_t code, uint64_t op)
{
    uint8_t r[REC_SIZE] = {(uint8_t)kind, (uint8_t)thread};
    memcpy(r + 4, &code, 4);
    memcpy(r + 8, &op, 8);
    for (;;) {
        ssize_t n = write(fd, r, sizeof r);
        if (n == (ssize_t)sizeof r)
            return;
        if (n < 0 && errno == EINTR)
            continue;
        _exit(EXIT_FAIL); /* the parent is gone */
    }
}

/* Reports a failure and ends the child. */
static void child_fail(const struct child *c, unsigned thread, uint64_t op, int code)
{
    /* The text goes to stderr (the pipe carries the code alone): what the
     * failure was, for whoever reads the log of a run that failed. */
    const char *text = kv_error_text();
    fprintf(stderr, "kvcrash: child: thread %u op %" PRIu64 ": %s: %s\n", thread, op,
            kv_strerror(code), text && *text ? text : "(no text)");
    child_send(c->fd, REC_FAILED, thread, code, op);
    _exit(EXIT_FAIL);
}

static int op_run(kv_db *db, kv_batch *b, uint64_t seed, const struct vid *base,
                  const struct op *op, uint8_t *v)
{
    uint8_t k[KEY_CAP];
    uint8_t k2[KEY_CAP];
    char o[TRAIL_CAP];
    if (op->call == CALL_PLAIN) {
        const struct entry *e = &op->e[0];
        size_t kl = key_make(base->thread, e->key, k);
        struct vid id = *base;
        id.key = e->key;
        if (e->what == E_DEL)
            return kv_delete(db, k, kl);
        if (e->what == E_MERGE)
            return kv_merge(db, k, kl, o, operand_make(seed, &id, o));
        if (e->what == E_RANGE_DEL)
            return kv_delete_range(db, k, kl, k2, key_make(base->thread, e->end, k2));
        id.key = e->key;
        id.pad = e->pad;
        return kv_put(db, k, kl, v, value_make(seed, &id, v));
    }
    kv_batch_clear(b);
    for (unsigned j = 0; j < op->n; j++) {
        const struct entry *e = &op->e[j];
        size_t kl = key_make(base->thread, e->key, k);
        int rc;
        struct vid mid = *base;
        mid.entry = j;
        mid.key = e->key;
        if (e->what == E_DEL)
            rc = kv_batch_delete(b, k, kl);
        else if (e->what == E_MERGE)
            rc = kv_batch_merge(b, k, kl, o, operand_make(seed, &mid, o));
        else if (e->what == E_RANGE_DEL)
            rc = kv_batch_delete_range(b, k, kl, k2, key_make(base->thread, e->end, k2));
        else {
            struct vid id = *base;
            id.entry = j;
            id.key = e->key;
            id.pad = e->pad;
            rc = kv_batch_put(b, k, kl, v, value_make(seed, &id, v));
        }
        if (rc != KV_OK)
            return rc;
    }
    if (op->call == CALL_WRITE)
        return kv_write(db, b);
    kv_write_options wo = {.sync = op->sync};
    return kv_write_opts(db, &wo, b);
}

/* An OP_INGEST: its table at "<db>.ingest<t>.sst" (what a kill left there
 * first removed), then kv_ingest(move = 1). */
static int ingest_run(const struct child *c, const struct vid *base, const struct op *op,
                      uint8_t *v)
{
    char path[4300], tmp[4310];
    snprintf(path, sizeof path, "%s.ingest%u.sst", c->path, base->thread);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    unlink(path);
    unlink(tmp);
    kv_table_writer *w;
    int rc = kv_table_writer_open(path, NULL, &w);
    uint8_t k[KEY_CAP], k2[KEY_CAP];
    char o[TRAIL_CAP];
    for (unsigned j = 0; rc == KV_OK && j < op->n; j++) {
        const struct entry *e = &op->e[j];
        size_t kl = key_make(base->thread, e->key, k);
        struct vid id = *base;
        id.entry = j;
        id.key = e->key;
        if (e->what == E_RANGE_DEL) {
            rc = kv_table_writer_delete_range(w, k, kl, k2, key_make(base->thread, e->end, k2));
        } else if (e->what == E_DEL) {
            rc = kv_table_writer_delete(w, k, kl);
        } else if (e->what == E_MERGE) {
            rc = kv_table_writer_merge(w, k, kl, o, operand_make(c->seed, &id, o));
        } else {
            id.pad = e->pad;
            rc = kv_table_writer_put(w, k, kl, v, value_make(c->seed, &id, v));
        }
    }
    if (rc != KV_OK) {
        kv_table_writer_abandon(w);
        return rc;
    }
    if ((rc = kv_table_writer_finish(w)) != KV_OK)
        return rc;
    const char *paths[1] = {path};
    return kv_ingest(c->db, paths, 1, 1);
}

struct writer {
    const struct child *c;
    unsigned t;
};

/* A quiet cycle's writers write nothing, and its maintenance thread asks
 * for nothing, in the last 60 ms of every 200 after the open: with
 * idle_compaction_ms 10, the idle merges (level 0 down, the tiered levels'
 * runs into one) run within the cycle, and the kill lands in some of
 * them. */
static void quiet_spell(const struct child *c)
{
    uint64_t t = (now_ms() - c->start_ms) % 200;
    if (t >= 140)
        sleep_ms((unsigned)(200 - t));
}

static void *writer_main(void *arg)
{
    const struct writer *w = arg;
    const struct child *c = w->c;
    struct rng r = thread_rng(c->seed, c->plan.cycle, w->t);
    kv_batch *b = NULL;
    uint8_t *v = malloc(VALUE_CAP);
    if (kv_batch_new(&b) != KV_OK || !v)
        child_fail(c, w->t, 0, KV_ENOMEM);
    struct op op;
    for (uint64_t i = 0;; i++) {
        if (c->plan.quiet)
            quiet_spell(c);
        op_next(&r, c->plan.mode, &op);
        struct vid base = {c->plan.cycle, w->t, i, 0, 0, 0};
        child_send(c->fd, REC_SENT, w->t, 0, i);
        int rc = op.kind == OP_INGEST ? ingest_run(c, &base, &op, v)
                                      : op_run(c->db, b, c->seed, &base, &op, v);
        if (rc != KV_OK)
            child_fail(c, w->t, i, rc);
        child_send(c->fd, REC_ACKED, w->t, 0, i);
    }
    return NULL;
}

/* kv_flush, kv_compact_range over everything, or over part of one writer's
 * keys, every 0..30 ms. */
static void *maint_main(void *arg)
{
    const struct child *c = arg;
    struct rng r = thread_rng(c->seed, c->plan.cycle, MAINT);
    uint8_t lo[KEY_CAP], hi[KEY_CAP];
    for (uint64_t i = 0;; i++) {
        sleep_ms(below(&r, 31));
        if (c->plan.quiet)
            quiet_spell(c); /* its flushes and compactions would pre-empt the idle ones */
        uint32_t x = below(&r, 10);
        child_send(c->fd, REC_SENT, MAINT, 0, i);
        int rc;
        if (x < 4)
            rc = kv_flush(c->db);
        else if (x < 6)
            rc = kv_compact_range(c->db, NULL, 0, NULL, 0);
        else {
            unsigned t = below(&r, WRITERS);
            uint32_t a = below(&r, KEYS), n = below(&r, KEYS / 4);
            uint32_t z = a + n < KEYS ? a + n : KEYS - 1;
            rc = kv_compact_range(c->db, lo, key_make(t, a, lo), hi, key_make(t, z, hi));
        }
        if (rc != KV_OK)
            child_fail(c, MAINT, i, rc);
        child_send(c->fd, REC_ACKED, MAINT, 0, i);
        /* The blob figures since the open, for the summary. */
        struct kv_stats s;
        if (kv_stats(c->db, &s) == KV_OK) {
            child_send(c->fd, REC_BLOB_WRITTEN, MAINT, 0, s.blob_written_bytes);
            child_send(c->fd, REC_BLOB_RELOCATED, MAINT, 0, s.blob_relocated_bytes);
            child_send(c->fd, REC_IDLE, MAINT, 0, s.idle_compactions);
        }
    }
    return NULL;
}

/* <dir>/ckpt, where the checkpoints of a cycle go (<dir>/ckpt/c<cycle>k<k>).
 * A name is never used twice in a run: with --power-loss, the files the
 * parent's opens of a cycle's checkpoints create stay in the power-cut
 * record until the next cut, which would cut a file of the same path made
 * later (a link to one of the database's own files, say). */
static void ckpt_root(const char *db, char *out, size_t n)
{
    const char *slash = strrchr(db, '/');
    int len = slash ? (int)(slash - db) : 1;
    snprintf(out, n, "%.*s/ckpt", len, slash ? db : ".");
}

/* Up to CKPTS checkpoints, 20 .. 120 ms apart, while the others write. */
static void *ckpt_main(void *arg)
{
    const struct child *c = arg;
    struct rng r = thread_rng(c->seed, c->plan.cycle, CKPT_THREAD);
    char root[4200], dir[4300];
    ckpt_root(c->path, root, sizeof root);
    for (uint64_t k = 0; k < CKPTS; k++) {
        sleep_ms(20 + below(&r, 101));
        snprintf(dir, sizeof dir, "%s/c%" PRIu32 "k%" PRIu64, root, c->plan.cycle, k);
        child_send(c->fd, REC_CKPT_BEGIN, CKPT_THREAD, 0, k);
        int rc = kv_checkpoint(c->db, dir);
        if (rc != KV_OK)
            child_fail(c, CKPT_THREAD, k, rc);
        child_send(c->fd, REC_CKPT_DONE, CKPT_THREAD, 0, k);
    }
    return NULL;
}

/* Reads a value and checks that it is exactly what its header says, for
 * this key. -1 (with a message on stderr) when it is not. */
static int reader_check(const struct child *c, unsigned t, uint32_t idx, const void *val,
                        size_t len, uint8_t *scratch)
{
    char ek[80], ev[200];
    uint8_t k[KEY_CAP];
    if (value_check_any(c->seed, val, len, t, idx, c->plan.cycle, scratch) == 0)
        return 0;
    fprintf(stderr, "kvcrash: cycle %" PRIu32 ": the child's reader read key \"%s\": \"%s\" "
            "(%zu bytes), not a value written to that key\n", c->plan.cycle,
            esc(k, key_make(t, idx, k), ek, sizeof ek), esc(val, len, ev, sizeof ev), len);
    return -1;
}

/* Gets of random keys and scans of up to 32 keys, in bursts of 64 reads
 * 2 ms apart; each burst is reported as a REC_READS record. */
static void *reader_main(void *arg)
{
    const struct child *c = arg;
    struct rng r = thread_rng(c->seed, c->plan.cycle, READER);
    uint8_t *scratch = malloc(VALUE_CAP);
    if (!scratch)
        child_fail(c, READER, 0, KV_ENOMEM);
    uint8_t k[KEY_CAP];
    for (uint64_t burst = 0;; burst++) {
        uint64_t reads = 0;
        while (reads < 64) {
            unsigned t = below(&r, WRITERS);
            uint32_t idx = below(&r, KEYS);
            size_t kl = key_make(t, idx, k);
            if (below(&r, 8)) {
                void *val = NULL;
                size_t len = 0;
                int rc = kv_get(c->db, k, kl, &val, &len);
                if (rc == KV_OK && reader_check(c, t, idx, val, len, scratch) != 0)
                    child_fail(c, READER, burst, KV_ECORRUPT);
                kv_free(val);
                if (rc != KV_OK && rc != KV_NOTFOUND)
                    child_fail(c, READER, burst, rc);
                reads++;
                continue;
            }
            kv_iter *it = NULL;
            int rc = kv_iter_new(c->db, NULL, &it);
            if (rc != KV_OK)
                child_fail(c, READER, burst, rc);
            kv_iter_seek(it, k, kl);
            for (int n = 0; n < 32 && kv_iter_valid(it); n++, kv_iter_next(it)) {
                size_t ikl, ivl;
                const uint8_t *ik = kv_iter_key(it, &ikl);
                const void *iv = kv_iter_value(it, &ivl);
                unsigned it_t;
                uint32_t it_idx;
                if (key_parse(ik, ikl, &it_t, &it_idx) != 0 ||
                    reader_check(c, it_t, it_idx, iv, ivl, scratch) != 0)
                    child_fail(c, READER, burst, KV_ECORRUPT);
                reads++;
            }
            rc = kv_iter_status(it);
            kv_iter_free(it);
            if (rc != KV_OK)
                child_fail(c, READER, burst, rc);
        }
        child_send(c->fd, REC_READS, READER, 0, reads);
        sleep_ms(2);
    }
    return NULL;
}

/* The workload child: never returns. */
static void child_main(const char *path, uint64_t seed, const struct plan *p, int fd)
{
    struct child c = {NULL, seed, *p, fd, path, 0};
    kv_options o;
    db_options(p, &o);
    alarm(600); /* never outlive a parent that stopped killing */
    int rc = kv_open(path, &o, &c.db);
    if (rc != KV_OK)
        child_fail(&c, 0xff, 0, rc);
    c.start_ms = now_ms();
    child_send(fd, REC_READY, 0, 0, 0);
    static struct writer w[WRITERS];
    pthread_t th[THREADS];
    for (unsigned t = 0; t < WRITERS; t++) {
        w[t] = (struct writer){&c, t};
        if (pthread_create(&th[t], NULL, writer_main, &w[t]) != 0)
            child_fail(&c, t, 0, KV_ENOMEM);
    }
    pthread_t ckpt;
    if (pthread_create(&th[MAINT], NULL, maint_main, &c) != 0 ||
        pthread_create(&th[READER], NULL, reader_main, &c) != 0 ||
        pthread_create(&ckpt, NULL, ckpt_main, &c) != 0)
        child_fail(&c, MAINT, 0, KV_ENOMEM);
    for (;;)
        pause(); /* until killed */
}

/* ---- the parent: the run -------------------------------------------------------------- */

struct totals {
    uint32_t cycles, by_mode[3], early_kills, recovery_kills;
    uint64_t acked, maint_acked, child_reads;
    uint64_t inflight_applied, inflight_not, inflight_same;
    uint64_t key_reads, scanned;
    uint64_t verifies_before, verifies_after, leftover_cycles;
    uint64_t recovered_records, damaged_tails;
    uint64_t blob_written, blob_relocated;   /* by the children, as kv_stats counts */
    uint64_t blob_orphans, blob_files_max;   /* left by crashes; live at a crash, most */
    uint32_t blob_never_cycles, blob_128_cycles;
    uint64_t idle_compactions; /* in the children, as kv_stats counts */
    uint32_t quiet_cycles;     /* cycles with quiet spells */
    uint64_t checkpoints;      /* checkpoints that returned in the children, each checked */
    /* --power-loss */
    uint64_t power_cuts, sync_acked, lost_nosync;
    kv_file_cut_stats cut;
};

/* The state of one key: absent (never written, deleted or range-deleted)
 * or a value: a put's (based) and the operands merged since (mn of them,
 * their hash mh, the newest one's write); cycle, op and entry name the put,
 * or the delete. */
struct kstate {
    uint8_t written, present, based;
    uint16_t entry;
    uint32_t cycle, pad;
    uint64_t op;
    uint32_t mn, mcycle;
    uint16_t mentry;
    uint64_t mop, mh;
};

struct run {
    uint64_t seed;
    uint32_t cycles;
    double seconds;           /* 0: no budget */
    const char *kvtool;       /* NULL: no verify */
    int verbose;
    char dir[4096];           /* the work directory */
    char db[4200];            /* dir/db */
    char out[4200];           /* dir/kvtool.out */
    int made_dir;             /* remove dir itself at the end */
    int ever_opened;          /* some kv_open of the database has returned */
    struct kstate model[WRITERS][KEYS];
    struct totals tot;
    uint32_t cycle;           /* the one being run, for messages */
    int cycle_mode;
    unsigned violations;      /* in this cycle */
    uint8_t *vbuf;            /* VALUE_CAP */
    int power;                /* --power-loss */
    kv_file_track *track;     /* shared with the children (MAP_SHARED) */
};

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

/* A broken rule: one line, counted; at most 20 lines are printed per cycle. */
static void violation(struct run *run, const char *fmt, ...)
{
    if (run->violations++ >= 20) {
        if (run->violations == 21)
            fprintf(stderr, "kvcrash: cycle %" PRIu32 ": (more violations not shown)\n",
                    run->cycle);
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "kvcrash: cycle %" PRIu32 " (%s): ", run->cycle, mode_name[run->cycle_mode]);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* The test itself could not go on (a system call failed). */
static void trouble(struct run *run, const char *what)
{
    violation(run, "%s: %s", what, strerror(errno));
}

/* What the pipe told the parent in one cycle. */
struct cyc {
    int ready;
    uint64_t ready_at;
    uint64_t sent[THREADS], acked[THREADS];
    int failed, fail_code;
    unsigned fail_thread;
    uint64_t fail_op;
    uint64_t reads;
    uint64_t blob_written, blob_relocated; /* the child's last report */
    uint64_t idle;                         /* its idle compactions, as last reported */
    int bad_order;
    uint8_t carry[REC_SIZE];
    size_t have;
    /* hb[t][op * WRITERS + u]: how many operations writer u had acknowledged
     * when writer t sent op (the pipe's order): those happened before it. */
    uint32_t *hb[WRITERS];
    uint64_t hb_cap[WRITERS];
    int hb_oom;
    /* Checkpoint k: the writers' acknowledged ops when it began (ck_lo),
     * their sent ops when it returned (ck_hi, once ck_done). */
    uint64_t ck_lo[CKPTS][WRITERS], ck_hi[CKPTS][WRITERS];
    int ck_done[CKPTS];
    unsigned ck_begun;
};

static void take_record(struct run *run, struct cyc *c, const uint8_t *r)
{
    unsigned t = r[1];
    int32_t code;
    uint64_t op;
    memcpy(&code, r + 4, 4);
    memcpy(&op, r + 8, 8);
    switch (r[0]) {
    case REC_READY:
        c->ready = 1;
        c->ready_at = now_ms();
        return;
    case REC_READS:
        c->reads += op;
        return;
    case REC_BLOB_WRITTEN:
        c->blob_written = op;
        return;
    case REC_BLOB_RELOCATED:
        c->blob_relocated = op;
        return;
    case REC_IDLE: c->idle = op; return;
    case REC_CKPT_BEGIN:
        if (op == c->ck_begun && op < CKPTS) {
            memcpy(c->ck_lo[op], c->acked, sizeof c->ck_lo[op]);
            c->ck_begun++;
            return;
        }
        break;
    case REC_CKPT_DONE:
        if (op + 1 == c->ck_begun && !c->ck_done[op]) {
            memcpy(c->ck_hi[op], c->sent, sizeof c->ck_hi[op]);
            c->ck_done[op] = 1;
            return;
        }
        break;
    case REC_FAILED:
        if (!c->failed) {
            c->failed = 1;
            c->fail_thread = t;
            c->fail_op = op;
            c->fail_code = code;
        }
        return;
    case REC_SENT:
        if (t < MAINT + 1 && op == c->sent[t] && c->sent[t] == c->acked[t]) {
            if (t < WRITERS && op >= c->hb_cap[t]) {
                uint64_t cap = c->hb_cap[t] ? c->hb_cap[t] * 2 : 1024;
                uint32_t *n = realloc(c->hb[t], cap * WRITERS * sizeof *n);
                if (!n) {
                    c->hb_oom = 1;
                    return;
                }
                c->hb[t] = n;
                c->hb_cap[t] = cap;
            }
            if (t < WRITERS)
                for (unsigned u = 0; u < WRITERS; u++)
                    c->hb[t][op * WRITERS + u] = (uint32_t)c->acked[u];
            c->sent[t]++;
            return;
        }
        break;
    case REC_ACKED:
        if (t < MAINT + 1 && op == c->acked[t] && c->acked[t] + 1 == c->sent[t]) {
            c->acked[t]++;
            return;
        }
        break;
    }
    if (!c->bad_order++)
        violation(run, "the child's records are out of order: kind %u thread %u op %" PRIu64,
                  r[0], t, op);
}

/* Reads what is there (poll said so) or, with `all`, up to the end of the
 * pipe. Returns 1 at the end of the pipe. */
static int read_records(struct run *run, struct cyc *c, int fd, int all)
{
    uint8_t buf[8192];
    do {
        memcpy(buf, c->carry, c->have);
        ssize_t n = read(fd, buf + c->have, sizeof buf - c->have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return 1;
        size_t len = c->have + (size_t)n, off = 0;
        for (; off + REC_SIZE <= len; off += REC_SIZE)
            take_record(run, c, buf + off);
        c->have = len - off;
        memcpy(c->carry, buf + off, c->have);
    } while (all);
    return 0;
}

/* Waits for the pipe until `deadline` (ms) or, with want_ready, until READY.
 * Returns 1 when the pipe ended (the child exited by itself). */
static int wait_records(struct run *run, struct cyc *c, int fd, uint64_t deadline,
                        int want_ready)
{
    for (;;) {
        uint64_t t = now_ms();
        if (t >= deadline || interrupted || (want_ready && c->ready))
            return 0;
        struct pollfd pfd = {fd, POLLIN, 0};
        int n = poll(&pfd, 1, (int)(deadline - t));
        if (n > 0 && read_records(run, c, fd, 0))
            return 1;
    }
}

/* Kills and reaps a child. Returns its wait status. */
static int kill_child(pid_t pid)
{
    int st = 0;
    kill(pid, SIGKILL);
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return st;
}

static const char *thread_name(unsigned t, char *buf, size_t n)
{
    if (t < WRITERS)
        snprintf(buf, n, "writer %u", t);
    else if (t == MAINT)
        snprintf(buf, n, "maintenance thread");
    else if (t == CKPT_THREAD)
        snprintf(buf, n, "checkpoint thread");
    else
        snprintf(buf, n, "reader");
    return buf;
}

/* ---- the parent: checking -------------------------------------------------------------- */

/* A state of key idx of writer t in words, for messages. */
static const char *state_text(const struct kstate *s, unsigned t, uint32_t idx, char *buf,
                              size_t n)
{
    char h[HDR_CAP];
    if (!s->written)
        snprintf(buf, n, "absent (never written)");
    else if (!s->present)
        snprintf(buf, n, "absent (deleted by cycle %" PRIu32 " op %" PRIu64 ")", s->cycle, s->op);
    else {
        struct vid id = {s->cycle, t, s->op, s->entry, idx, s->pad};
        size_t o = 0;
        if (s->based)
            o = (size_t)snprintf(buf, n,
                                 "the value of cycle %" PRIu32 " op %" PRIu64
                                 " entry %u (%zu bytes)",
                                 s->cycle, s->op, (unsigned)s->entry,
                                 value_header(&id, h) + s->pad);
        if (s->mn && o < n)
            snprintf(buf + o, n - o,
                     "%s%" PRIu32 " merge operands (hash %016" PRIx64
                     "), the newest of cycle %" PRIu32 " op %" PRIu64 " entry %u",
                     s->based ? " and " : "", s->mn, s->mh, s->mcycle, s->mop, (unsigned)s->mentry);
    }
    return buf;
}

/* A merged value, in words: 1 when val is one. */
static int merged_text(struct run *run, const void *val, size_t len, char *buf, size_t n)
{
    struct trail m;
    size_t base;
    struct vid id;
    if (!trail_split(val, len, &base, &m))
        return 0;
    size_t o = 0;
    if (base && value_check(run->seed, val, base, &id, run->vbuf) == 0)
        o = (size_t)snprintf(buf, n,
                             "the value of cycle %" PRIu32 " writer %u op %" PRIu64
                             " entry %u key %" PRIu32 " and ",
                             id.cycle, id.thread, id.op, id.entry, id.key);
    else if (base)
        o = (size_t)snprintf(buf, n, "%zu bytes that no write made and ", base);
    snprintf(buf + o, n - o,
             "%" PRIu32 " merge operands (hash %016" PRIx64 "), the newest of "
             "cycle %" PRIu32 " writer %u op %" PRIu64 " entry %u key %" PRIu32,
             m.n, m.h, m.last.cycle, m.last.thread, m.last.op, m.last.entry, m.last.key);
    return 1;
}

/* What was found, in words. */
static const char *found_text(struct run *run, int rc, const void *val, size_t len, char *buf,
                              size_t n)
{
    struct vid id;
    char e[120];
    if (rc == KV_NOTFOUND)
        snprintf(buf, n, "absent");
    else if (rc != KV_OK)
        snprintf(buf, n, "error %s", kv_strerror(rc));
    else if (value_check(run->seed, val, len, &id, run->vbuf) == 0)
        snprintf(buf, n, "the value of cycle %" PRIu32 " writer %u op %" PRIu64
                 " entry %u key %" PRIu32 " (%zu bytes)", id.cycle, id.thread, id.op, id.entry,
                 id.key, len);
    else if (merged_text(run, val, len, buf, n))
        ;
    else
        snprintf(buf, n, "%zu bytes that no write made: \"%s\"", len, esc(val, len, e, sizeof e));
    return buf;
}

/* The bytes of present state s of key idx of writer t into v (VALUE_CAP). */
static size_t state_value(uint64_t seed, const struct kstate *s, unsigned t, uint32_t idx,
                          uint8_t *v)
{
    size_t n = 0;
    if (s->based) {
        struct vid id = {s->cycle, t, s->op, s->entry, idx, s->pad};
        n = value_make(seed, &id, v);
    }
    if (s->mn) {
        struct trail m = {s->mn, s->mh, {s->mcycle, t, s->mop, s->mentry, idx, 0}};
        n += trail_make(&m, (char *)v + n);
    }
    return n;
}

/* Entry j of write (cycle, op) of writer t applied to key idx's state. */
static void key_apply(uint64_t seed, struct kstate *s, uint32_t cycle, uint64_t op, unsigned j,
                      const struct entry *e, unsigned t, uint32_t idx)
{
    if (e->what != E_MERGE) {
        *s = (struct kstate){.written = 1,
                             .present = e->what == E_PUT,
                             .based = e->what == E_PUT,
                             .entry = (uint16_t)j,
                             .cycle = cycle,
                             .pad = e->pad,
                             .op = op};
        return;
    }
    if (!s->present)
        *s = (struct kstate){.written = 1, .present = 1};
    struct vid id = {cycle, t, op, j, idx, 0};
    s->mh = s->mh * MERGE_P + operand_hash(seed, &id);
    s->mn++;
    s->mcycle = cycle;
    s->mop = op;
    s->mentry = (uint16_t)j;
}

/* 1 when the read (rc, val, len) is exactly state s of key idx of writer t. */
static int state_is(struct run *run, const struct kstate *s, unsigned t, uint32_t idx, int rc,
                    const void *val, size_t len)
{
    if (!s->present)
        return rc == KV_NOTFOUND;
    if (rc != KV_OK)
        return 0;
    size_t want = state_value(run->seed, s, t, idx, run->vbuf);
    return want == len && memcmp(run->vbuf, val, len) == 0;
}

/* 1 when a and b read the same (absent, or the same bytes). */
static int kstate_eq(const struct kstate *a, const struct kstate *b)
{
    if (a->present != b->present)
        return 0;
    if (!a->present)
        return 1;
    if (a->based != b->based || a->mn != b->mn)
        return 0;
    if (a->based &&
        (a->cycle != b->cycle || a->op != b->op || a->entry != b->entry || a->pad != b->pad))
        return 0;
    return !a->mn ||
           (a->mh == b->mh && a->mcycle == b->mcycle && a->mop == b->mop && a->mentry == b->mentry);
}

static void state_apply(uint64_t seed, struct kstate *m, unsigned t, uint32_t cycle, uint64_t op,
                        const struct op *o)
{
    for (unsigned j = 0; j < o->n; j++) {
        uint32_t lo, hi;
        entry_keys(&o->e[j], &lo, &hi);
        for (uint32_t idx = lo; idx < hi; idx++)
            key_apply(seed, &m[idx], cycle, op, j, &o->e[j], t, idx);
    }
}

/* One writer's keys after the crash: its acknowledged operations 0..acked-1
 * are in the model already (applied by the caller); `in` (or NULL) was in
 * flight. Reads every key, decides whether `in` was applied, and brings
 * the model up to date. */
static void check_writer(struct run *run, kv_db *db, unsigned t, const struct op *in,
                         uint64_t in_op)
{
    struct kstate *m = run->model[t];
    /* The state after `in`: a key whose state it changes is "touched". */
    static struct kstate post[KEYS];
    memcpy(post, m, sizeof post);
    if (in)
        state_apply(run->seed, post, t, run->cycle, in_op, in);
    int applied = 0, not_applied = 0;
    uint32_t applied_key = 0, not_key = 0;
    uint8_t k[KEY_CAP];
    char ek[80], s1[200], s2[200], s3[300];
    for (uint32_t idx = 0; idx < KEYS; idx++) {
        size_t kl = key_make(t, idx, k);
        void *val = NULL;
        size_t len = 0;
        int rc = kv_get(db, k, kl, &val, &len);
        run->tot.key_reads++;
        if (kstate_eq(&m[idx], &post[idx])) {
            if (!state_is(run, &m[idx], t, idx, rc, val, len))
                violation(run, "key \"%s\": expected %s, got %s", esc(k, kl, ek, sizeof ek),
                          state_text(&m[idx], t, idx, s1, sizeof s1),
                          found_text(run, rc, val, len, s3, sizeof s3));
        } else {
            int is_pre = state_is(run, &m[idx], t, idx, rc, val, len);
            int is_post = state_is(run, &post[idx], t, idx, rc, val, len);
            if (!is_pre && !is_post)
                violation(run,
                          "key \"%s\" (writer %u's op %" PRIu64 " was in flight): expected "
                          "%s (before it) or %s (after it), got %s",
                          esc(k, kl, ek, sizeof ek), t, in_op,
                          state_text(&m[idx], t, idx, s1, sizeof s1),
                          state_text(&post[idx], t, idx, s2, sizeof s2),
                          found_text(run, rc, val, len, s3, sizeof s3));
            else if (is_post && !is_pre && !applied++)
                applied_key = idx;
            else if (is_pre && !is_post && !not_applied++)
                not_key = idx;
        }
        kv_free(val);
    }
    if (!in)
        return;
    if (applied && not_applied) {
        char ek2[80];
        uint8_t k2[KEY_CAP];
        violation(run, "writer %u's op %" PRIu64 " (a batch of %u, in flight) is half applied: "
                  "key \"%s\" shows it, key \"%s\" does not", t, in_op, in->n,
                  esc(k, key_make(t, applied_key, k), ek, sizeof ek),
                  esc(k2, key_make(t, not_key, k2), ek2, sizeof ek2));
        return;
    }
    if (applied) {
        run->tot.inflight_applied++;
        memcpy(m, post, sizeof post);
    } else if (not_applied)
        run->tot.inflight_not++;
    else
        run->tot.inflight_same++; /* deletes of absent keys: no trace either way */
}

/* The next present key of the model from (t, idx) on, going up (dir 1) or
 * down (-1): 0 with *t, *idx, or -1 when there is none. */
static int model_next(const struct run *run, int dir, int *t, int32_t *idx)
{
    for (; *t >= 0 && *t < WRITERS; *t += dir, *idx = dir > 0 ? 0 : KEYS - 1)
        for (; *idx >= 0 && *idx < KEYS; *idx += dir)
            if (run->model[*t][*idx].present)
                return 0;
    return -1;
}

/* A full scan, forward or backward, must give exactly the model's present
 * keys, in order, with their values. */
static void check_scan(struct run *run, kv_db *db, int dir)
{
    const char *way = dir > 0 ? "forward" : "backward";
    kv_iter *it = NULL;
    int rc = kv_iter_new(db, NULL, &it);
    if (rc != KV_OK) {
        violation(run, "kv_iter_new: %s", kv_strerror(rc));
        return;
    }
    int t = dir > 0 ? 0 : WRITERS - 1;
    int32_t idx = dir > 0 ? 0 : KEYS - 1;
    char ek[80], ek2[80], s1[200], s3[300];
    uint8_t k[KEY_CAP];
    if (dir > 0)
        kv_iter_seek_first(it);
    else
        kv_iter_seek_last(it);
    for (; kv_iter_valid(it); dir > 0 ? kv_iter_next(it) : kv_iter_prev(it)) {
        size_t ikl, ivl;
        const uint8_t *ik = kv_iter_key(it, &ikl);
        const void *iv = kv_iter_value(it, &ivl);
        run->tot.scanned++;
        if (model_next(run, dir, &t, &idx) != 0) {
            violation(run, "%s scan: key \"%s\" after the last key of the model", way,
                      esc(ik, ikl, ek, sizeof ek));
            break;
        }
        size_t kl = key_make((unsigned)t, (uint32_t)idx, k);
        if (kl != ikl || memcmp(k, ik, kl) != 0) {
            violation(run, "%s scan: got key \"%s\", expected key \"%s\"", way,
                      esc(ik, ikl, ek, sizeof ek), esc(k, kl, ek2, sizeof ek2));
            break;
        }
        const struct kstate *s = &run->model[t][idx];
        if (!state_is(run, s, (unsigned)t, (uint32_t)idx, KV_OK, iv, ivl))
            violation(run, "%s scan: key \"%s\": expected %s, got %s", way,
                      esc(k, kl, ek, sizeof ek), state_text(s, (unsigned)t, (uint32_t)idx, s1, sizeof s1),
                      found_text(run, KV_OK, iv, ivl, s3, sizeof s3));
        idx += dir;
    }
    if ((rc = kv_iter_status(it)) != KV_OK)
        violation(run, "%s scan: %s", way, kv_strerror(rc));
    else if (!run->violations && model_next(run, dir, &t, &idx) == 0)
        violation(run, "%s scan: ended before key \"%s\"", way,
                  esc(k, key_make((unsigned)t, (uint32_t)idx, k), ek, sizeof ek));
    kv_iter_free(it);
}

/* ---- the parent: checking after a power cut ---------------------------------------------
 *
 * A power cut keeps, of writer t's operations 0 .. sent-1, a prefix
 * 0 .. s-1 (a writer runs one operation at a time, so its operations are
 * in the database's sequence order). From the keys alone the parent finds
 * every s that explains them all (several when an operation left no
 * trace); the rules are then:
 *  - sync: s covers every operation acknowledged with sync;
 *  - nothing never sent: s <= sent;
 *  - no holes across writers: if writer u's operation B survived and
 *    writer t had acknowledged its operation A before u sent B (the
 *    pipe's order: A's ACKED record came before B's SENT), then A came
 *    first in the sequence order and must survive too;
 *  - batches all or nothing: a prefix keeps an operation whole, so a
 *    half batch fits no prefix.
 * The least s per writer that obeys all that is found by raising each s
 * until every rule holds (they only ever ask for more). */


/* The least admissible prefix >= from (up to n); -1 when there is none. */
static int64_t adm_from(const uint8_t *adm, uint64_t from, uint64_t n)
{
    for (uint64_t s = from; s <= n; s++)
        if (adm[s])
            return (int64_t)s;
    return -1;
}

/* The admissible prefixes, as a short list, for messages. */
static const char *adm_text(const uint8_t *adm, uint64_t n, char *buf, size_t cap)
{
    size_t o = 0;
    unsigned shown = 0;
    buf[0] = 0;
    for (uint64_t s = 0; s <= n && o + 40 < cap; s++) {
        if (!adm[s])
            continue;
        uint64_t e = s;
        while (e < n && adm[e + 1])
            e++;
        if (shown++ == 6) {
            o += (size_t)snprintf(buf + o, cap - o, ", ...");
            break;
        }
        if (e == s)
            o += (size_t)snprintf(buf + o, cap - o, "%s%" PRIu64, o ? ", " : "", s);
        else
            o += (size_t)snprintf(buf + o, cap - o, "%s%" PRIu64 "..%" PRIu64, o ? ", " : "", s, e);
        s = e;
    }
    if (!shown)
        snprintf(buf, cap, "none");
    return buf;
}

struct pw {
    uint64_t n, lo;      /* sent; the least s the sync rule allows */
    struct op *ops;      /* 0 .. n-1, replayed */
    struct kstate *found;
    uint8_t *bad;        /* key read as bytes no write made (reported already) */
    uint8_t *adm;        /* adm[s]: the keys are exactly the state after ops 0..s-1 */
    int32_t *cnt;
};

/* Reports why no prefix of writer t explains its keys: the keys that
 * differ from the nearest prefix in [lo, hi]. */
static void report_prefix(struct run *run, const struct cyc *c, unsigned t, const struct pw *w,
                          uint64_t lo, uint64_t hi, const char *why)
{
    uint64_t best = lo;
    int32_t run_sum = 0, best_sum = -1;
    for (uint64_t s = 0; s <= w->n; s++) {
        run_sum += w->cnt[s];
        if (s >= lo && s <= hi && run_sum > best_sum) {
            best_sum = run_sum;
            best = s;
        }
    }
    char al[200];
    violation(run, "writer %u: %s; its keys fit the states after its first s operations only "
              "for s in {%s}; the nearest allowed one, s = %" PRIu64 " (of %" PRIu64 " sent), "
              "differs in %d keys:", t, why, adm_text(w->adm, w->n, al, sizeof al), best, w->n,
              KEYS - best_sum);
    static struct kstate m[KEYS];
    memcpy(m, run->model[t], sizeof m);
    for (uint64_t i = 0; i < best; i++)
        state_apply(run->seed, m, t, run->cycle, i, &w->ops[i]);
    uint8_t k[KEY_CAP];
    char ek[80], s1[200], s3[300];
    unsigned shown = 0;
    for (uint32_t idx = 0; idx < KEYS && shown < 8; idx++) {
        if (w->bad[idx] || kstate_eq(&m[idx], &w->found[idx]))
            continue;
        shown++;
        state_text(&w->found[idx], t, idx, s3, sizeof s3);
        char ops[200] = "none";
        size_t o = 0;
        for (uint64_t i = 0; i < w->n && o + 40 < sizeof ops; i++)
            for (unsigned j = 0; j < w->ops[i].n; j++) {
                static const char *const what[] = {"", " delete", " merge", " range delete"};
                uint32_t from, to;
                entry_keys(&w->ops[i].e[j], &from, &to);
                if (idx >= from && idx < to) {
                    o += (size_t)snprintf(ops + o, sizeof ops - o, "%s%" PRIu64 "%s%s",
                                          o ? ", " : "", i, what[w->ops[i].e[j].what],
                                          i < c->acked[t] ? "" : " (in flight)");
                    break;
                }
            }
        violation(run, "  key \"%s\": expected %s, got %s; this cycle's ops on it: %s",
                  esc(k, key_make(t, idx, k), ek, sizeof ek),
                  state_text(&m[idx], t, idx, s1, sizeof s1), s3, ops);
    }
}

/* The state a value read for key idx of writer t stands for: 0 with *s,
 * or -1 when no writes of that key make it. */
static int value_state(struct run *run, const void *val, size_t len, unsigned t, uint32_t idx,
                       struct kstate *s)
{
    struct trail m;
    size_t base = len;
    struct vid id;
    *s = (struct kstate){.written = 1, .present = 1};
    if (trail_split(val, len, &base, &m)) {
        if (m.last.thread != t || m.last.key != idx)
            return -1;
        s->mn = m.n;
        s->mh = m.h;
        s->mcycle = m.last.cycle;
        s->mop = m.last.op;
        s->mentry = (uint16_t)m.last.entry;
    }
    if (base) {
        if (value_check(run->seed, val, base, &id, run->vbuf) != 0 || id.thread != t ||
            id.key != idx)
            return -1;
        s->based = 1;
        s->cycle = id.cycle;
        s->op = id.op;
        s->entry = (uint16_t)id.entry;
        s->pad = id.pad;
    }
    return 0;
}

/* Reads writer t's keys and works out which prefixes explain them. */
static int power_writer(struct run *run, kv_db *db, unsigned t, struct pw *w)
{
    uint8_t k[KEY_CAP];
    char ek[80], s3[300];
    for (uint32_t idx = 0; idx < KEYS; idx++) {
        size_t kl = key_make(t, idx, k);
        void *val = NULL;
        size_t len = 0;
        int rc = kv_get(db, k, kl, &val, &len);
        run->tot.key_reads++;
        if (rc == KV_NOTFOUND)
            w->found[idx] = (struct kstate){0};
        else if (rc == KV_OK && value_state(run, val, len, t, idx, &w->found[idx]) == 0)
            ;
        else {
            w->bad[idx] = 1;
            violation(run, "key \"%s\": got %s", esc(k, kl, ek, sizeof ek),
                      found_text(run, rc, val, len, s3, sizeof s3));
        }
        kv_free(val);
    }
    if (run->violations)
        return -1;
    /* cnt: a difference array over s = 0..n of the keys whose state after
     * ops 0..s-1 is what was found. */
    static struct kstate st[KEYS];
    static uint64_t start[KEYS];
    memcpy(st, run->model[t], sizeof st);
    memset(start, 0, sizeof start);
    memset(w->cnt, 0, (w->n + 2) * sizeof *w->cnt);
    for (uint64_t i = 0; i < w->n; i++) {
        const struct op *o = &w->ops[i];
        for (unsigned j = 0; j < o->n; j++) {
            uint32_t lo, hi;
            entry_keys(&o->e[j], &lo, &hi);
            for (uint32_t key = lo; key < hi; key++) {
                if (start[key] <= i) { /* the state held for s = start .. i */
                    if (kstate_eq(&st[key], &w->found[key])) {
                        w->cnt[start[key]]++;
                        w->cnt[i + 1]--;
                    }
                    start[key] = i + 1;
                }
                key_apply(run->seed, &st[key], run->cycle, i, j, &o->e[j], t, key);
            }
        }
    }
    for (uint32_t key = 0; key < KEYS; key++)
        if (kstate_eq(&st[key], &w->found[key])) {
            w->cnt[start[key]]++;
            w->cnt[w->n + 1]--;
        }
    int32_t sum = 0;
    for (uint64_t s = 0; s <= w->n; s++) {
        sum += w->cnt[s];
        w->adm[s] = sum == KEYS;
    }
    return 0;
}

/* The whole check after a power cut; brings the model up to date. */
static void check_power(struct run *run, kv_db *db, const struct cyc *c, const struct plan *p,
                        uint64_t *applied, uint64_t *not_applied)
{
    struct pw w[WRITERS];
    uint64_t s[WRITERS];
    memset(w, 0, sizeof w);
    for (unsigned t = 0; t < WRITERS && !run->violations; t++) {
        w[t].n = c->sent[t];
        w[t].ops = malloc((w[t].n + 1) * sizeof *w[t].ops);
        w[t].found = calloc(KEYS, sizeof *w[t].found);
        w[t].bad = calloc(KEYS, 1);
        w[t].adm = calloc(w[t].n + 1, 1);
        w[t].cnt = calloc(w[t].n + 2, sizeof *w[t].cnt);
        if (!w[t].ops || !w[t].found || !w[t].bad || !w[t].adm || !w[t].cnt) {
            violation(run, "out of memory");
            break;
        }
        struct rng r = thread_rng(run->seed, p->cycle, t);
        for (uint64_t i = 0; i < w[t].n; i++) {
            op_next(&r, p->mode, &w[t].ops[i]);
            if (i < c->acked[t] && w[t].ops[i].sync) {
                w[t].lo = i + 1;
                run->tot.sync_acked++;
            }
        }
        power_writer(run, db, t, &w[t]);
    }
    for (unsigned t = 0; t < WRITERS && !run->violations; t++) {
        int64_t a = adm_from(w[t].adm, w[t].lo, w[t].n);
        if (a < 0) {
            char why[160];
            snprintf(why, sizeof why, "no prefix keeps its %" PRIu64 " operations up to the last "
                     "one acknowledged with sync", w[t].lo);
            report_prefix(run, c, t, &w[t], w[t].lo, w[t].n, why);
        }
        s[t] = (uint64_t)a;
    }
    for (int changed = 1; changed && !run->violations;) {
        changed = 0;
        for (unsigned u = 0; u < WRITERS && !run->violations; u++) {
            if (s[u] == 0)
                continue;
            const uint32_t *row = &c->hb[u][(s[u] - 1) * WRITERS];
            for (unsigned t = 0; t < WRITERS && !run->violations; t++) {
                if (t == u || s[t] >= row[t])
                    continue;
                int64_t a = adm_from(w[t].adm, row[t], w[t].n);
                if (a < 0) {
                    char why[300];
                    snprintf(why, sizeof why, "a hole: writer %u's op %" PRIu64 " survived, and "
                             "it was sent after writer %u had acknowledged its op %" PRIu64
                             ", which is lost", u, s[u] - 1, t, (uint64_t)row[t] - 1);
                    report_prefix(run, c, t, &w[t], row[t], w[t].n, why);
                    break;
                }
                s[t] = (uint64_t)a;
                changed = 1;
            }
        }
    }
    if (!run->violations) {
        for (unsigned t = 0; t < WRITERS; t++) {
            for (uint64_t i = 0; i < s[t]; i++)
                state_apply(run->seed, run->model[t], t, run->cycle, i, &w[t].ops[i]);
            uint64_t acked = c->acked[t];
            run->tot.lost_nosync += acked - (s[t] < acked ? s[t] : acked);
            if (c->sent[t] > acked) {
                if (s[t] > acked)
                    (*applied)++;
                else if (s[t] == acked && w[t].adm[acked + 1])
                    run->tot.inflight_same++;
                else
                    (*not_applied)++;
            }
        }
    }
    for (unsigned t = 0; t < WRITERS; t++) {
        free(w[t].ops);
        free(w[t].found);
        free(w[t].bad);
        free(w[t].adm);
        free(w[t].cnt);
    }
}

/* ---- the parent: the checkpoints ---------------------------------------------------------- */

static int remove_one(const char *p, const struct stat *sb, int flag, struct FTW *f);

/* Removes <dir>/ckpt and what it holds; makes it again when `make`. */
static int ckpt_reset(struct run *run, int make)
{
    char root[4200];
    ckpt_root(run->db, root, sizeof root);
    struct stat sb;
    if (stat(root, &sb) == 0)
        nftw(root, remove_one, 16, FTW_DEPTH | FTW_PHYS);
    if (make && mkdir(root, 0755) != 0) {
        trouble(run, "mkdir of the checkpoints' directory");
        return -1;
    }
    return 0;
}

/* Every checkpoint of the cycle that returned: it opens and holds, for each
 * writer, the state after a prefix of its ops within the cut's bounds (see
 * "Checkpoints"). run->model is still the state the cycle began from. */
static void check_checkpoints(struct run *run, const struct cyc *c, const struct plan *p)
{
    char root[4200], dir[4300];
    ckpt_root(run->db, root, sizeof root);
    kv_options o;
    db_options(p, &o);
    for (unsigned k = 0; k < c->ck_begun && !run->violations; k++) {
        if (!c->ck_done[k])
            continue; /* the kill came inside the call */
        snprintf(dir, sizeof dir, "%s/c%" PRIu32 "k%u", root, p->cycle, k);
        kv_db *db = NULL;
        int rc = kv_open(dir, &o, &db);
        if (rc != KV_OK) {
            violation(run, "checkpoint %u: kv_open: %s (%s)", k, kv_strerror(rc), kv_error_text());
            return;
        }
        for (unsigned t = 0; t < WRITERS && !run->violations; t++) {
            struct pw w = {.n = c->ck_hi[k][t]};
            w.ops = malloc((w.n + 1) * sizeof *w.ops);
            w.found = calloc(KEYS, sizeof *w.found);
            w.bad = calloc(KEYS, 1);
            w.adm = calloc(w.n + 1, 1);
            w.cnt = calloc(w.n + 2, sizeof *w.cnt);
            if (!w.ops || !w.found || !w.bad || !w.adm || !w.cnt) {
                violation(run, "out of memory");
            } else {
                struct rng r = thread_rng(run->seed, p->cycle, t);
                for (uint64_t i = 0; i < w.n; i++)
                    op_next(&r, p->mode, &w.ops[i]);
                if (power_writer(run, db, t, &w) != 0)
                    violation(run, "checkpoint %u: writer %u: values no write made (above)", k, t);
                else if (adm_from(w.adm, c->ck_lo[k][t], w.n) < 0) {
                    char why[200];
                    snprintf(why, sizeof why,
                             "checkpoint %u holds no cut between its %" PRIu64
                             " ops acknowledged before the call and the %" PRIu64
                             " sent when it returned",
                             k, c->ck_lo[k][t], w.n);
                    report_prefix(run, c, t, &w, c->ck_lo[k][t], w.n, why);
                }
            }
            free(w.ops);
            free(w.found);
            free(w.bad);
            free(w.adm);
            free(w.cnt);
        }
        if ((rc = kv_close(db)) != KV_OK && !run->violations)
            violation(run, "checkpoint %u: kv_close: %s", k, kv_strerror(rc));
        run->tot.checkpoints++;
    }
}

/* The power cut, applied by the parent to the files of a child it killed. */
static int power_cut(struct run *run, const struct plan *p, unsigned salt)
{
    kv_file_cut_stats st = {0};
    if (getenv("KVCRASH_TRACE")) /* what the record holds, before the cut */
        for (uint32_t i = 0; i < run->track->count; i++) {
            const kv_file_track_entry *e = &run->track->files[i];
            fprintf(stderr, "kvcrash: cycle %" PRIu32 " cut %u: %s (durable name: %s) written %"
                    PRIu64 "/%" PRIu64 " synced %" PRIu64 "\n", p->cycle, salt, e->name[e->cur],
                    e->durable == -2 ? "dead" : e->durable < 0 ? "none" : e->name[e->durable],
                    e->done, e->issued, e->synced);
        }
    int rc = kv_file_power_cut(run->track, mix64(run->seed ^ mix64((uint64_t)p->cycle << 8 | salt)),
                               p->cut_flags, &st);
    if (rc != KV_OK) {
        violation(run, "the power cut failed: %s (%s)", kv_strerror(rc),
                  rc == KV_EINVAL ? "more files than the record holds" : "a file could not be cut");
        return -1;
    }
    kv_file_cut_stats *a = &run->tot.cut;
    a->files += st.files;
    a->removed += st.removed;
    a->unrenamed += st.unrenamed;
    a->truncated += st.truncated;
    a->tails_kept += st.tails_kept;
    a->zeroed += st.zeroed;
    a->bytes_dropped += st.bytes_dropped;
    a->gone += st.gone;
    run->tot.power_cuts++;
    return 0;
}

/* Runs `kvtool db verify` on the database: 0 when it exits 0. */
static int run_verify(struct run *run, const char *when)
{
    pid_t pid = fork();
    if (pid < 0) {
        trouble(run, "fork");
        return -1;
    }
    if (pid == 0) {
        int fd = open(run->out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
            _exit(126);
        execl(run->kvtool, run->kvtool, "db", "verify", run->db, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        return 0;
    violation(run, "kvtool db verify %s failed (%s %d); its output:", when,
              WIFEXITED(st) ? "exit status" : "signal",
              WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    FILE *f = fopen(run->out, "r");
    if (f) {
        char line[1024];
        while (fgets(line, sizeof line, f))
            fprintf(stderr, "  %s", line);
        fclose(f);
    }
    return -1;
}

/* Looks at the crashed database without recovering it. Returns 1 when it
 * holds files a crash leaves behind (db verify reports them), 0 when not,
 * -1 when there is no database yet or a rule was broken.
 *
 * Until some kv_open has returned, a kill may land inside the very first
 * one: before the manifest exists (kv_inspect: KV_NOTFOUND), or after LMDB
 * made the file but before the database's first state record committed,
 * which kv_inspect reports as KV_ECORRUPT (a manifest without state is not
 * a kv manifest; kv_open with create_if_missing makes it one). Neither is
 * a database yet, and the parent's kv_open must then create it. */
/* What a crash left for the next open to delete, and what is live. */
struct leftovers {
    unsigned orphans, blob_orphans, temps, old_logs;
    size_t blobs; /* live blob files */
};

static int inspect_crashed(struct run *run, struct leftovers *l, int *inspect_rc)
{
    kv_dir_info *info = NULL;
    int rc = kv_inspect(run->db, &info);
    *inspect_rc = rc;
    memset(l, 0, sizeof *l);
    if (!run->ever_opened && (rc == KV_NOTFOUND || rc == KV_ECORRUPT))
        return -1;
    if (rc != KV_OK) {
        violation(run, "kv_inspect of the crashed database: %s", kv_strerror(rc));
        return -1;
    }
    for (size_t i = 0; i < info->ntables; i++) {
        const kv_dir_table *tb = &info->tables[i];
        if (!tb->present)
            violation(run, "the manifest names table %06" PRIu64 ".sst, which is not on disk",
                      tb->number);
        else if (tb->disk_size != tb->file_size)
            violation(run, "table %06" PRIu64 ".sst has %" PRIu64 " bytes, the manifest says %"
                      PRIu64, tb->number, tb->disk_size, tb->file_size);
    }
    /* A blob file is synced, and its directory, before the commit that
     * names it: no crash (or power cut) may take it or cut it short. */
    for (size_t i = 0; i < info->nblobs; i++) {
        const struct kv_dir_blob *b = &info->blobs[i];
        if (!b->present)
            violation(run, "the manifest names blob file %06" PRIu64 ".blob, which is not on disk",
                      b->number);
        else if (b->disk_size != b->file_size)
            violation(run, "blob file %06" PRIu64 ".blob has %" PRIu64 " bytes, the manifest says %"
                      PRIu64, b->number, b->disk_size, b->file_size);
    }
    l->blobs = info->nblobs;
    for (size_t i = 0; i < info->nfiles; i++) {
        l->orphans += info->files[i].kind == KV_FILE_ORPHAN;
        l->blob_orphans += info->files[i].kind == KV_FILE_BLOB_ORPHAN;
        l->temps += info->files[i].kind == KV_FILE_TEMP;
        l->old_logs += info->files[i].kind == KV_FILE_OLD_LOG;
    }
    kv_inspect_free(info);
    return l->orphans + l->blob_orphans + l->temps + l->old_logs > 0;
}

/* Opens the crashed database in a second child and kills it 0..40 ms later,
 * most often inside kv_open's recovery. */
static void kill_recovery(struct run *run, const struct plan *p)
{
    pid_t pid = fork();
    if (pid < 0) {
        trouble(run, "fork");
        return;
    }
    if (pid == 0) {
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        alarm(600);
        kv_options o;
        db_options(p, &o);
        kv_db *db = NULL;
        int rc = kv_open(run->db, &o, &db);
        if (rc != KV_OK) {
            fprintf(stderr, "kvcrash: cycle %" PRIu32 ": the recovery child's kv_open: %s\n",
                    p->cycle, kv_strerror(rc));
            _exit(EXIT_FAIL);
        }
        for (;;)
            pause();
    }
    sleep_ms(p->recovery_ms);
    int st = kill_child(pid);
    if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL)
        violation(run, "the recovery child ended by itself (%s %d)",
                  WIFEXITED(st) ? "exit status" : "signal",
                  WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    run->tot.recovery_kills++;
}

/* One cycle (c zeroed by the caller). 0 when every rule held. */
static int cycle_body(struct run *run, uint32_t cycle, struct cyc *cp)
{
    struct plan p = plan_make(run->seed, cycle);
    run->cycle = cycle;
    run->cycle_mode = p.mode;
    run->violations = 0;
    struct cyc *c = cp;

    /* 1-3: the child, its records, the kill. */
    if (ckpt_reset(run, 1) != 0)
        return -1;
    int fds[2];
    if (pipe(fds) != 0) {
        trouble(run, "pipe");
        return -1;
    }
    uint64_t forked = now_ms();
    pid_t pid = fork();
    if (pid < 0) {
        trouble(run, "fork");
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        close(fds[0]);
        child_main(run->db, run->seed, &p, fds[1]);
    }
    close(fds[1]);
    int ended = 0;
    if (p.early)
        ended = wait_records(run, c, fds[0], forked + p.kill_ms, 0);
    else {
        ended = wait_records(run, c, fds[0], forked + 120000, 1);
        if (!ended && c->ready)
            ended = wait_records(run, c, fds[0], c->ready_at + p.kill_ms, 0);
    }
    uint64_t killed_at = now_ms();
    int st = kill_child(pid);
    read_records(run, c, fds[0], 1);
    close(fds[0]);
    if (interrupted)
        return -1;
    char tn[40];
    if (c->failed && c->fail_thread == 0xff)
        violation(run, "in the child, kv_open failed: %s", kv_strerror(c->fail_code));
    else if (c->failed)
        violation(run, "in the child, %s op %" PRIu64 " failed: %s",
                  thread_name(c->fail_thread, tn, sizeof tn), c->fail_op,
                  c->fail_code == KV_ECORRUPT && c->fail_thread == READER
                      ? "it read a wrong value (above)" : kv_strerror(c->fail_code));
    else if (ended || !WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL)
        violation(run, "the child ended by itself (%s %d)",
                  WIFEXITED(st) ? "exit status" : "signal",
                  WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    else if (!p.early && !c->ready)
        violation(run, "the child's kv_open did not return within 120 s");
    else if (c->hb_oom)
        violation(run, "out of memory for the child's records");
    if (run->violations)
        return -1;

    /* --power-loss: the machine goes down with the child. */
    if (run->power && power_cut(run, &p, 1) != 0)
        return -1;

    run->ever_opened |= c->ready;

    /* 4: the crashed database as it is. */
    struct leftovers left;
    int inspect_rc = KV_OK;
    int leftovers = inspect_crashed(run, &left, &inspect_rc);
    if (run->violations)
        return -1;
    run->tot.leftover_cycles += leftovers == 1;
    run->tot.blob_orphans += left.blob_orphans;
    if (left.blobs > run->tot.blob_files_max)
        run->tot.blob_files_max = left.blobs;
    if (leftovers == 0 && run->kvtool) {
        if (run_verify(run, "on the crashed database") != 0)
            return -1;
        run->tot.verifies_before++;
    }

    /* 5: a crash inside recovery. */
    if (p.kill_recovery) {
        kill_recovery(run, &p);
        if (run->violations || (run->power && power_cut(run, &p, 2) != 0))
            return -1;
    }

    /* The checkpoints the child took, before the model moves on. */
    check_checkpoints(run, c, &p);
    if (run->violations || ckpt_reset(run, 0) != 0)
        return -1;

    /* 6: recover and check, with compaction out of reach so that the
     * tables kvtool verifies are the crash's and recovery's own. */
    kv_options o;
    db_options(&p, &o);
    o.l0_compaction_trigger = o.l0_slowdown_trigger = o.l0_stop_trigger = 1 << 20;
    o.max_bytes_for_level_base = (size_t)1 << 40;
    o.blob_gc_threshold = 1; /* no file is past it: the idle thread rewrites nothing */
    kv_db *db = NULL;
    int rc = kv_open(run->db, &o, &db);
    if (rc != KV_OK) {
        violation(run, "kv_open after the crash: %s", kv_strerror(rc));
        return -1;
    }
    run->ever_opened = 1;
    struct kv_stats s = {0};
    kv_stats(db, &s);
    run->tot.recovered_records += s.recovered_records;
    run->tot.damaged_tails += s.recovery_tail_damaged;
    uint64_t acked = 0, in_flight = 0;
    uint64_t before_applied = run->tot.inflight_applied, before_not = run->tot.inflight_not;
    if (run->power) {
        check_power(run, db, c, &p, &run->tot.inflight_applied, &run->tot.inflight_not);
        for (unsigned t = 0; t < WRITERS; t++) {
            acked += c->acked[t];
            in_flight += c->sent[t] > c->acked[t];
        }
    }
    for (unsigned t = 0; t < WRITERS && !run->power; t++) {
        struct rng r = thread_rng(run->seed, cycle, t);
        struct op op;
        for (uint64_t i = 0; i < c->acked[t]; i++) {
            op_next(&r, p.mode, &op);
            state_apply(run->seed, run->model[t], t, cycle, i, &op);
        }
        int has_in = c->sent[t] > c->acked[t];
        if (has_in)
            op_next(&r, p.mode, &op);
        check_writer(run, db, t, has_in ? &op : NULL, c->acked[t]);
        acked += c->acked[t];
        in_flight += (uint64_t)has_in;
    }
    if (!run->violations)
        check_scan(run, db, 1);
    if (!run->violations)
        check_scan(run, db, -1);
    if ((rc = kv_close(db)) != KV_OK)
        violation(run, "kv_close after the check: %s", kv_strerror(rc));
    if (run->violations)
        return -1;
    if (run->kvtool) {
        if (run_verify(run, "after recovery") != 0)
            return -1;
        run->tot.verifies_after++;
    }

    run->tot.cycles++;
    run->tot.by_mode[p.mode]++;
    run->tot.early_kills += (uint32_t)p.early;
    run->tot.acked += acked;
    run->tot.maint_acked += c->acked[MAINT];
    run->tot.child_reads += c->reads;
    run->tot.blob_written += c->blob_written;
    run->tot.blob_relocated += c->blob_relocated;
    run->tot.blob_never_cycles += p.min_blob == KV_BLOB_NEVER;
    run->tot.blob_128_cycles += p.min_blob == 128;
    run->tot.idle_compactions += c->idle;
    run->tot.quiet_cycles += (uint32_t)p.quiet;
    if (run->verbose) {
        uint64_t present = 0;
        char open_took[40] = "killed in kv_open", crashed[160];
        if (c->ready)
            snprintf(open_took, sizeof open_took, "kv_open took %" PRIu64 " ms",
                     c->ready_at - forked);
        for (unsigned t = 0; t < WRITERS; t++)
            for (uint32_t i = 0; i < KEYS; i++)
                present += run->model[t][i].present;
        if (inspect_rc != KV_OK)
            snprintf(crashed, sizeof crashed, "no database yet (kv_inspect: %s)",
                     kv_strerror(inspect_rc));
        else
            snprintf(crashed, sizeof crashed, "left %u orphan tables, %u orphan blob files, "
                     "%u .tmp, %u old logs; %zu live blob files", left.orphans,
                     left.blob_orphans, left.temps, left.old_logs, left.blobs);
        char style[64];
        if (p.lazy)
            snprintf(style, sizeof style, "lazy leveled (K %d)", p.runs);
        else
            snprintf(style, sizeof style, "leveled");
        if (p.quiet)
            strncat(style, ", quiet spells", sizeof style - strlen(style) - 1);
        printf("cycle %" PRIu32 ": %s, %s, %s filters, %d jobs, %s; %s; killed %s + %" PRIu64
               " ms; %" PRIu64 " writes acknowledged (%" PRIu64 " / %" PRIu64 " / %" PRIu64
               "), %" PRIu64 " in flight (%" PRIu64 " applied, %" PRIu64 " not), %" PRIu64
               " flushes/compactions, %" PRIu64 " child reads; %s%s; %" PRIu64
               " log records replayed%s; %" PRIu64 " keys present\n",
               cycle, mode_name[p.mode], p.zstd ? "zstd" : "no compression",
               p.classic ? "classic" : "blocked", p.jobs, style, open_took,
               p.early ? "fork" : "open", killed_at - (p.early || !c->ready ? forked : c->ready_at),
               acked, c->acked[0], c->acked[1], c->acked[2], in_flight,
               run->tot.inflight_applied - before_applied, run->tot.inflight_not - before_not,
               c->acked[MAINT], c->reads, crashed, p.kill_recovery ? "; recovery killed" : "",
               s.recovered_records, s.recovery_tail_damaged ? " (damaged tail)" : "", present);
        fflush(stdout);
    }
    return 0;
}

/* One cycle. 0 when every rule held. */
static int cycle_run(struct run *run, uint32_t cycle)
{
    struct cyc c;
    memset(&c, 0, sizeof c);
    int rc = cycle_body(run, cycle, &c);
    for (unsigned t = 0; t < WRITERS; t++)
        free(c.hb[t]);
    return rc;
}

/* ---- the command line --------------------------------------------------------------------- */

static const char usage_text[] =
    "usage: kvcrash [--cycles N] [--seconds S] [--seed X] [--dir D] [--kvtool PATH] "
    "[--power-loss]\n"
    "               [--verbose]\n"
    "\n"
    "The crash test. Each cycle forks a child that runs a random workload on one\n"
    "database (3 writer threads: puts, overwrites, merges, deletes, range deletes,\n"
    "batches of them all; 1 thread of kv_flush and kv_compact_range; 1 reader)\n"
    "with a tiny memtable, so flushes and\n"
    "compactions never stop (values of 512 bytes or more go to blob files, whose\n"
    "garbage is collected past 20%), and reports every write to the parent through a pipe\n"
    "before it starts and after it is acknowledged. The parent kills it with\n"
    "SIGKILL at a random moment, reopens the database and checks every key against\n"
    "its model: every acknowledged write is there (sync or not: a SIGKILL is a\n"
    "process crash), the write in flight is there wholly or not at all, nothing\n"
    "never sent appears, values are exactly the bytes written, scans agree; then\n"
    "`kvtool db verify` must pass. The next cycle goes on with the same database.\n"
    "\n"
    "  --cycles N     kill cycles to run (default 100)\n"
    "  --seconds S    stop after S seconds even if cycles remain (default: no limit)\n"
    "  --seed X       the workload's seed, decimal or 0x hex (default: from the clock);\n"
    "                 a run repeats from it except for where the kills land\n"
    "  --dir D        work directory, created if missing; the database is D/db, which\n"
    "                 must not exist (default: a new directory under $TMPDIR or /tmp,\n"
    "                 removed after a successful run; kept, and named, after a failure)\n"
    "  --kvtool PATH  run PATH db verify on the crashed database (when it holds no\n"
    "                 crash leftovers, which verify reports) and after each recovery\n"
    "  --power-loss   a machine crash, not only a process crash: the file layer records\n"
    "                 what was synced, and after each kill every file loses what was\n"
    "                 written since its last sync (or part of it), and files whose\n"
    "                 creation or rename no directory sync made durable are removed or\n"
    "                 renamed back. Then: every write acknowledged with sync is there;\n"
    "                 of the others a prefix survives, with no hole in the order the\n"
    "                 child's records prove (a write acknowledged before another was\n"
    "                 sent came first); batches whole or absent; nothing never sent\n"
    "  --verbose      one line per cycle\n"
    "  --help         this text\n"
    "\n"
    "Exit status: 0 every cycle passed; 1 a rule was broken (one line per violation:\n"
    "cycle, key, expected, got) or the test could not run; 2 bad usage; 130 interrupted.\n";

/* "kvcrash: <what><arg> (kvcrash --help)"; returns EXIT_USAGE. */
static int usage_error(const char *what, const char *arg)
{
    fprintf(stderr, "kvcrash: %s%s (kvcrash --help)\n", what, arg);
    return EXIT_USAGE;
}

static int parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s || *s == '-')
        return -1;
    char *end;
    errno = 0;
    int hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
    unsigned long long v = strtoull(s, &end, hex ? 16 : 10);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

static int remove_one(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb;
    (void)flag;
    (void)f;
    return remove(p);
}

/* Removes what the run made: the database and kvtool's output, and the
 * directory when kvcrash created it. */
static void cleanup(struct run *run)
{
    if (run->made_dir)
        nftw(run->dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
    else {
        struct stat sb;
        if (stat(run->db, &sb) == 0)
            nftw(run->db, remove_one, 16, FTW_DEPTH | FTW_PHYS);
        ckpt_reset(run, 0);
        remove(run->out);
    }
}

/* The summary: four lines of figures (five with --power-loss). */
static void summary(const struct run *run, double secs, const char *status)
{
    const struct totals *t = &run->tot;
    printf("kvcrash: blob files: %" PRIu64 " bytes written to them in the children, %" PRIu64
           " of them values relocated (compactions and garbage collection past "
           "blob_gc_threshold 0.2); up to %" PRIu64 " live at a crash; %" PRIu64
           " left by crashes for the next open to delete; min_blob_size 512 / 128 / off in %"
           PRIu32 " / %" PRIu32 " / %" PRIu32 " cycles\n",
           t->blob_written, t->blob_relocated, t->blob_files_max, t->blob_orphans,
           t->cycles - t->blob_128_cycles - t->blob_never_cycles, t->blob_128_cycles,
           t->blob_never_cycles);
    if (run->power) {
        const kv_file_cut_stats *k = &t->cut;
        printf("kvcrash: power loss: %" PRIu64 " power cuts over %" PRIu64 " tracked files: %"
               PRIu64 " removed (creation not durable), %" PRIu64 " renames undone, %" PRIu64
               " truncated (%" PRIu64 " bytes dropped), %" PRIu64 " kept part of an unsynced tail (%"
               PRIu64 " ending in zeros), %" PRIu64 " already deleted; %" PRIu64
               " sync-acknowledged writes verified, %" PRIu64
               " acknowledged non-sync writes lost (allowed)\n",
               t->power_cuts, k->files, k->removed, k->unrenamed, k->truncated, k->bytes_dropped,
               k->tails_kept, k->zeroed, k->gone, t->sync_acked, t->lost_nosync);
    }
    printf("kvcrash: checkpoints: %" PRIu64 " taken in the children while they wrote, each "
           "opened after the crash and found to hold exactly its cut\n",
           t->checkpoints);
    printf("kvcrash: idle merges: %" PRIu64 " idle compactions in the children; %" PRIu32
           " cycles with quiet spells\n",
           t->idle_compactions, t->quiet_cycles);
    printf("kvcrash: %s: %" PRIu32 " cycles (%" PRIu32 " sync, %" PRIu32 " non-sync, %" PRIu32
           " mixed; %" PRIu32 " killed at the fork, %" PRIu32 " recoveries killed%s) in %.1f s; %"
           PRIu64 " acknowledged writes, %" PRIu64 " verified present, %" PRIu64 " flushes/compactions; in flight at "
           "the kill: %" PRIu64 " applied, %" PRIu64 " not applied, %" PRIu64
           " indistinguishable; %" PRIu64 " gets and %" PRIu64 " scanned keys checked, %" PRIu64
           " reads checked in the child; %" PRIu64 " log records replayed, %" PRIu64
           " damaged log tails; %" PRIu64 " kvtool verifies (%" PRIu64 " before recovery, %"
           PRIu64 " after), %" PRIu64 " of the crashes left files for the next open to delete;"
           " seed 0x%016" PRIx64 "\n",
           status, t->cycles, t->by_mode[MODE_SYNC], t->by_mode[MODE_NOSYNC], t->by_mode[MODE_MIXED],
           t->early_kills, t->recovery_kills, run->power ? ", power cut at every kill" : "", secs,
           t->acked, t->acked - t->lost_nosync, t->maint_acked,
           t->inflight_applied, t->inflight_not, t->inflight_same, t->key_reads, t->scanned,
           t->child_reads, t->recovered_records, t->damaged_tails,
           t->verifies_before + t->verifies_after, t->verifies_before, t->verifies_after,
           t->leftover_cycles, run->seed);
}

int main(int argc, char **argv)
{
    static struct run run;
    run.cycles = 100;
    run.seed = mix64((uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32));
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        char name[32];
        const char *eq = strchr(a, '=');
        size_t nl = eq ? (size_t)(eq - a) : strlen(a);
        if (nl >= sizeof name)
            return usage_error("unknown option ", a);
        memcpy(name, a, nl);
        name[nl] = 0;
        int takes = !strcmp(name, "--cycles") || !strcmp(name, "--seconds") ||
                    !strcmp(name, "--seed") || !strcmp(name, "--dir") ||
                    !strcmp(name, "--kvtool");
        if (takes) {
            v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
            if (!v)
                return usage_error(name, " needs a value");
        } else if (eq)
            return usage_error(name, " takes no value");
        uint64_t n;
        if (!strcmp(name, "--help") || !strcmp(name, "-h")) {
            fputs(usage_text, stdout);
            return 0;
        } else if (!strcmp(name, "--verbose"))
            run.verbose = 1;
        else if (!strcmp(name, "--power-loss"))
            run.power = 1;
        else if (!strcmp(name, "--cycles")) {
            if (parse_u64(v, &n) || n < 1 || n > UINT32_MAX)
                return usage_error("--cycles: not a count from 1: ", v);
            run.cycles = (uint32_t)n;
        } else if (!strcmp(name, "--seconds")) {
            char *end;
            errno = 0;
            double d = strtod(v, &end);
            if (errno || *end || !(d > 0) || d > 1e9)
                return usage_error("--seconds: not a positive number: ", v);
            run.seconds = d;
        } else if (!strcmp(name, "--seed")) {
            if (parse_u64(v, &n))
                return usage_error("--seed: not a number: ", v);
            run.seed = n;
        } else if (!strcmp(name, "--dir"))
            dir = v;
        else if (!strcmp(name, "--kvtool")) {
            if (access(v, X_OK) != 0)
                return usage_error("--kvtool: cannot run ", v);
            run.kvtool = v;
        } else
            return usage_error("unknown option ", a);
    }

    if (dir) {
        if (strlen(dir) > 4000)
            return usage_error("--dir: path too long: ", dir);
        snprintf(run.dir, sizeof run.dir, "%s", dir);
        if (mkdir(run.dir, 0755) == 0)
            run.made_dir = 1;
        else if (errno != EEXIST) {
            fprintf(stderr, "kvcrash: %s: %s\n", run.dir, strerror(errno));
            return EXIT_FAIL;
        }
    } else {
        const char *tmp = getenv("TMPDIR");
        if (!tmp || !*tmp)
            tmp = "/tmp";
        snprintf(run.dir, sizeof run.dir, "%.4000s/kvcrash-XXXXXX", tmp);
        if (!mkdtemp(run.dir)) {
            fprintf(stderr, "kvcrash: mkdtemp %s: %s\n", run.dir, strerror(errno));
            return EXIT_FAIL;
        }
        run.made_dir = 1;
    }
    snprintf(run.db, sizeof run.db, "%s/db", run.dir);
    snprintf(run.out, sizeof run.out, "%s/kvtool.out", run.dir);
    struct stat sb;
    if (stat(run.db, &sb) == 0) {
        fprintf(stderr, "kvcrash: %s exists; give --dir a directory without a db in it "
                "(kvcrash --help)\n", run.db);
        return EXIT_USAGE;
    }
    run.vbuf = malloc(VALUE_CAP);
    if (!run.vbuf) {
        fprintf(stderr, "kvcrash: out of memory\n");
        return EXIT_FAIL;
    }
    if (run.power) {
        /* The file layer's record of what is durable, shared with every
         * child (they inherit it and the tracking) and read after a kill. */
        void *m = mmap(NULL, sizeof *run.track, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                       -1, 0);
        if (m == MAP_FAILED) {
            fprintf(stderr, "kvcrash: mmap: %s\n", strerror(errno));
            return EXIT_FAIL;
        }
        run.track = m;
        kv_file_track_begin(run.track);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    printf("kvcrash: seed 0x%016" PRIx64 ", %" PRIu32 " cycles%s%s, database %s\n", run.seed,
           run.cycles, run.power ? ", power loss" : "",
           run.kvtool ? ", kvtool db verify" : ", no kvtool", run.db);
    fflush(stdout);
    uint64_t start = now_ms();
    int failed = 0, out_of_time = 0;
    for (uint32_t cycle = 0; cycle < run.cycles && !interrupted; cycle++) {
        if (run.seconds > 0 && (double)(now_ms() - start) / 1000.0 >= run.seconds) {
            out_of_time = 1;
            break;
        }
        if (cycle_run(&run, cycle) != 0) {
            failed = !interrupted;
            break;
        }
    }
    double secs = (double)(now_ms() - start) / 1000.0;
    free(run.vbuf);
    if (interrupted) {
        fprintf(stderr, "kvcrash: interrupted after %" PRIu32 " cycles; %s\n", run.tot.cycles,
                run.made_dir ? "removing the directory" : "removing the database");
        summary(&run, secs, "interrupted");
        cleanup(&run);
        return EXIT_INTERRUPTED;
    }
    const struct totals *t = &run.tot;
    if (failed) {
        fprintf(stderr, "kvcrash: FAILED in cycle %" PRIu32 " after %" PRIu32
                " good cycles (seed 0x%016" PRIx64 "); the database is kept in %s\n",
                run.cycle, t->cycles, run.seed, run.db);
        return EXIT_FAIL;
    }
    if (t->quiet_cycles >= 10 && t->idle_compactions == 0) {
        summary(&run, secs, "FAILED");
        fprintf(stderr,
                "kvcrash: FAILED: in %" PRIu32 " cycles with quiet spells the children "
                "ran no idle compaction: the workload no longer tests them; the database is "
                "kept in %s\n",
                t->quiet_cycles, run.db);
        return EXIT_FAIL;
    }
    if (t->cycles >= 10 && t->blob_written == 0) {
        summary(&run, secs, "FAILED");
        fprintf(stderr, "kvcrash: FAILED: in %" PRIu32 " cycles the children wrote nothing to "
                "blob files: the workload no longer tests them; the database is kept in %s\n",
                t->cycles, run.db);
        return EXIT_FAIL;
    }
    if (out_of_time)
        printf("kvcrash: stopped by --seconds %g: %" PRIu32 " of %" PRIu32 " cycles ran\n",
               run.seconds, t->cycles, run.cycles);
    summary(&run, secs, "ok");
    cleanup(&run);
    return 0;
}
