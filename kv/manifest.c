/* manifest.c - the LMDB-backed catalogue: value codecs and transactions.
 * Byte layouts: doc/manifest.md. */
#define _POSIX_C_SOURCE 200809L
#include "manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dbfiles.h"  /* KV_DBFILE_MAX_NUMBER */
#include "memtable.h" /* KV_MAX_SEQ */
#include "util/coding.h"
#include "util/error.h"
#include "util/file.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#define REC_VERSION 1
#define TABLE_REC_VERSION 2 /* 1: byte 2 is reserved (zero); 2: byte 2 holds flags */
#define TABLE_REC_BLOBS 3   /* 2 and the blob file range: written when a table has one */
#define TABLE_BLOB_FIXED 96 /* version 3's fields before the two keys */
#define TABLE_REC_RUN 4     /* 3 and the sorted run: written when a table's run is not 0 */
#define TABLE_RUN_FIXED 104 /* version 4's fields before the two keys */
#define KIND_BLOB 4
#define BLOB_REC_VERSION 1
#define BLOB_LEN 64         /* 8 bytes of head, 48 of fields, 8 of checksum */
#define KIND_STATE 1
#define KIND_TABLE 2
#define KIND_COMPARATOR 3
#define COMPARATOR_REC_VERSION 1
#define COMPARATOR_KEY "comparator"
#define COMPARATOR_FIXED 4 /* version, kind, length, reserved */
#define STATE_LEN 48       /* 40 bytes of fields, 8 of checksum */
#define TABLE_FIXED 80     /* fields before the two keys */
#define CHECKSUM_LEN 8
#define INITIAL_MAP (16u << 20)
#define LMDB_MAGIC 0xBEEFC0DEu /* MDB_MAGIC, little-endian on the machines we run on */

/* One LMDB environment per MANIFEST file per process (the registry
 * below), shared by every kv_manifest of that file in the process: the
 * writer's and each read-only handle's. LMDB's locks are the process's
 * (fcntl record locks, which a close of any descriptor of the file drops),
 * so a second environment on the same files in one process would
 * re-initialise the lock file under the first and lose its reader slots. */
struct kv_menv {
    dev_t dev; /* of the MANIFEST file: the registry's key */
    ino_t ino;
    pid_t pid;  /* the process that opened it: a child forked since never shares it
                * (LMDB's environments do not survive fork) */
    int refs;   /* [registry_mu] kv_manifest handles on it */
    int rdonly; /* opened MDB_RDONLY: no write transaction is possible */
    int nolock; /* ... and MDB_NOLOCK: the lock file could not be opened
                         * for writing, so no writer can exist */
    MDB_env *env;
    MDB_dbi meta, tables;
    MDB_dbi blobs;  /* valid when have_blobs: a manifest made before blob
                     * files has none until a commit names one */
    _Atomic int have_blobs;
    size_t mapsize; /* [mu] */
    /* Write transactions, named-database opens and map growth, one at a
     * time: the flush thread's commits, kv_manifest_put_features from a
     * writer (kv_db_note_features), a reader's first look at "blobs". */
    pthread_mutex_t mu;
    /* Read transactions hold it shared while they read pages; a remap
     * (mdb_env_set_mapsize: map growth, or adopting another process's
     * growth) holds it exclusive, after mu. A pin (kv_manifest_pin) keeps
     * its transaction past the read but reads no page after it, so a
     * remap under it is harmless. */
    pthread_rwlock_t map;
    struct kv_menv *next; /* [registry_mu] */
};

static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static struct kv_menv *registry; /* [registry_mu] */

/* A file the writer no longer names, waiting for the readers of older
 * manifest states (kv_manifest_unlink). */
struct deferred_unlink {
    char *path;
    uint64_t txn; /* removed by the commit of this LMDB transaction */
};

struct kv_manifest {
    struct kv_menv *e;
    MDB_env *env; /* e->env */
    int read_only;
    char path[PATH_MAX]; /* <dir>/MANIFEST, for error texts */
    /* [e->mu] The least format version a state record is written with: raised
     * by kv_manifest_put_features, so that a commit whose state was taken
     * before it never writes the version back down. */
    uint32_t format_floor;
    /* [e->mu] The LMDB transaction id of the last kv_manifest_apply through
     * this handle; before the first, the environment's last at open. */
    uint64_t last_txn;
    pthread_mutex_t dmu;        /* the deferred list */
    struct deferred_unlink *dl; /* [dmu] */
    size_t ndl, dlcap;          /* [dmu] */
};

/* A read transaction kept open (manifest.h, kv_manifest_pin). */
struct kv_manifest_pin {
    _Atomic int refs;
    MDB_txn *txn;
    uint64_t id;
};

/* Table keys in LMDB are the number big-endian, so LMDB's byte order is
 * number order. */
static void table_key(uint64_t number, uint8_t k[8])
{
    for (int i = 0; i < 8; i++)
        k[i] = (uint8_t)(number >> (56 - 8 * i));
}

static uint64_t be64(const uint8_t *k)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | k[i];
    return v;
}

static int from_mdb(int rc)
{
    switch (rc) {
    case MDB_SUCCESS:
        return KV_OK;
    case MDB_NOTFOUND:
        return KV_NOTFOUND;
    case ENOMEM:
        return KV_ENOMEM;
    case ENOSPC:
    case MDB_MAP_FULL:
        return KV_ENOSPC;
    case MDB_INVALID:
    case MDB_CORRUPTED:
    case MDB_PAGE_NOTFOUND:
    case MDB_VERSION_MISMATCH:
        return KV_ECORRUPT;
    case ENOENT:
        return KV_NOTFOUND;
    case EACCES:
    case EPERM:
    case EROFS:
        return KV_EPERM;
    default:
        return KV_EIO;
    }
}

/* An LMDB error as a kv_status, with its text: "<path>: <what>: <LMDB's
 * reason>". */
static int mdb_fail(const char *path, const char *what, int rc)
{
    return kv_error_set(from_mdb(rc), "%s: %s: %s", path, what, mdb_strerror(rc));
}

/* ---- value codecs ------------------------------------------------------------- */

static void encode_state(const kv_manifest_state *s, uint8_t out[STATE_LEN])
{
    memset(out, 0, STATE_LEN);
    out[0] = REC_VERSION;
    out[1] = KIND_STATE;
    kv_put32(out + 4, s->format_version);
    kv_put64(out + 8, s->next_file);
    kv_put64(out + 16, s->last_seq);
    kv_put64(out + 24, s->log_number);
    kv_put64(out + 32, s->seed);
    kv_put64(out + 40, XXH3_64bits(out, 40));
}

/* The decoders return KV_OK, or KV_ECORRUPT with *why saying what is wrong. */
static int decode_state(const MDB_val *v, kv_manifest_state *s, const char **why)
{
    const uint8_t *p = v->mv_data;
    if (v->mv_size != STATE_LEN)
        *why = "not 48 bytes long";
    else if (p[0] != REC_VERSION || p[1] != KIND_STATE)
        *why = "unknown version or kind";
    else if (p[2] || p[3])
        *why = "reserved bytes not zero";
    else if (kv_get64(p + 40) != XXH3_64bits(p, 40))
        *why = "checksum mismatch";
    else if (kv_get64(p + 16) > KV_MAX_SEQ)
        *why = "last_seq beyond the last sequence number (2^56 - 1)";
    else if (kv_get64(p + 8) > KV_DBFILE_MAX_NUMBER + 1)
        *why = "next_file beyond the last file number (2^63 - 1) and one";
    else {
        s->format_version = kv_get32(p + 4);
        s->next_file = kv_get64(p + 8);
        s->last_seq = kv_get64(p + 16);
        s->log_number = kv_get64(p + 24);
        s->seed = kv_get64(p + 32);
        return KV_OK;
    }
    return KV_ECORRUPT;
}

/* A table of a sorted run other than 0 (lazy leveling) is written as
 * version 4, with its run and the blob file range (zeros: none); else one
 * that refers to blob files as version 3, with their range; any other as
 * version 2, as before blob files. A database that never made a run
 * writes the bytes it wrote before runs. */
static size_t table_fixed(const kv_table_meta *t)
{
    if (t->run)
        return TABLE_RUN_FIXED;
    return t->blob_lo || t->blob_hi ? TABLE_BLOB_FIXED : TABLE_FIXED;
}

static size_t table_len(const kv_table_meta *t)
{
    return table_fixed(t) + t->smallest_len + t->largest_len + CHECKSUM_LEN;
}

static void encode_table(const kv_table_meta *t, uint8_t *out)
{
    size_t fixed = table_fixed(t);
    memset(out, 0, fixed);
    out[0] = fixed == TABLE_FIXED        ? TABLE_REC_VERSION
             : fixed == TABLE_BLOB_FIXED ? TABLE_REC_BLOBS
                                         : TABLE_REC_RUN;
    out[1] = KIND_TABLE;
    out[2] = (uint8_t)t->flags;
    kv_put32(out + 4, t->level);
    kv_put64(out + 8, t->number);
    kv_put64(out + 16, t->file_size);
    kv_put64(out + 24, t->min_seq);
    kv_put64(out + 32, t->max_seq);
    kv_put64(out + 40, t->entries);
    kv_put32(out + 48, t->filter_layout);
    kv_put32(out + 52, t->filter_k);
    kv_put64(out + 56, kv_f64_bits(t->filter_bits_per_key)); /* IEEE 754 binary64 */
    kv_put64(out + 64, t->filter_keys);
    kv_put32(out + 72, (uint32_t)t->smallest_len);
    kv_put32(out + 76, (uint32_t)t->largest_len);
    if (fixed >= TABLE_BLOB_FIXED) {
        kv_put64(out + 80, t->blob_lo);
        kv_put64(out + 88, t->blob_hi);
    }
    if (fixed == TABLE_RUN_FIXED)
        kv_put64(out + 96, t->run);
    uint8_t *q = out + fixed;
    if (t->smallest_len)
        memcpy(q, t->smallest, t->smallest_len);
    q += t->smallest_len;
    if (t->largest_len)
        memcpy(q, t->largest, t->largest_len);
    q += t->largest_len;
    kv_put64(q, XXH3_64bits(out, (size_t)(q - out)));
}

static int decode_table(const MDB_val *k, const MDB_val *v, kv_table_meta *t, const char **why)
{
    const uint8_t *p = v->mv_data;
    memset(t, 0, sizeof *t);
    *why = NULL;
    if (k->mv_size != 8)
        *why = "key not 8 bytes long";
    else if (v->mv_size < TABLE_FIXED + CHECKSUM_LEN)
        *why = "shorter than 88 bytes";
    else if ((p[0] != 1 && p[0] != TABLE_REC_VERSION && p[0] != TABLE_REC_BLOBS &&
              p[0] != TABLE_REC_RUN) ||
             p[1] != KIND_TABLE)
        *why = "unknown version or kind";
    else if (p[0] == TABLE_REC_BLOBS && v->mv_size < TABLE_BLOB_FIXED + CHECKSUM_LEN)
        *why = "shorter than 104 bytes";
    else if (p[0] == TABLE_REC_RUN && v->mv_size < TABLE_RUN_FIXED + CHECKSUM_LEN)
        *why = "shorter than 112 bytes";
    /* Version 1 had no flags: its byte 2 must be zero, like any unknown bit. */
    else if (p[3] || (p[2] & ~(p[0] == 1 ? 0u : KV_TABLE_KNOWN_FLAGS)))
        *why = "unknown flags, or reserved byte not zero";
    if (*why)
        return KV_ECORRUPT;
    size_t fixed = p[0] == TABLE_REC_RUN     ? TABLE_RUN_FIXED
                   : p[0] == TABLE_REC_BLOBS ? TABLE_BLOB_FIXED
                                             : TABLE_FIXED;
    uint64_t slen = kv_get32(p + 72), llen = kv_get32(p + 76);
    size_t body = (size_t)(fixed + slen + llen);
    uint8_t kb[8];
    table_key(kv_get64(p + 8), kb);
    if (slen > KV_MANIFEST_MAX_KEY || llen > KV_MANIFEST_MAX_KEY ||
        v->mv_size != fixed + slen + llen + CHECKSUM_LEN)
        *why = "key lengths disagree with the record's length";
    else if (kv_get64(p + body) != XXH3_64bits(p, body))
        *why = "checksum mismatch";
    else if (memcmp(kb, k->mv_data, 8) != 0) /* the value belongs under its key */
        *why = "number differs from its key";
    /* A level past the last would sort after every level, where no search
     * and no compaction looks for it (a compaction then drops what its
     * older versions hid). */
    else if (kv_get32(p + 4) >= KV_MANIFEST_LEVELS)
        *why = "level beyond the last level (6)";
    else if (fixed == TABLE_BLOB_FIXED &&
             (!kv_get64(p + 80) || kv_get64(p + 80) > kv_get64(p + 88)))
        *why = "blob file range empty or reversed";
    /* Version 4: both zero (no blob file), or a range as version 3's. */
    else if (fixed == TABLE_RUN_FIXED && (kv_get64(p + 80) || kv_get64(p + 88)) &&
             (!kv_get64(p + 80) || kv_get64(p + 80) > kv_get64(p + 88)))
        *why = "blob file range empty or reversed";
    /* Run 0 is written as an older version; a level-0 table is its own run. */
    else if (fixed == TABLE_RUN_FIXED && (!kv_get64(p + 96) || !kv_get32(p + 4)))
        *why = "run 0 in a version 4 record, or a run in level 0";
    if (*why)
        return KV_ECORRUPT;
    if (fixed >= TABLE_BLOB_FIXED) {
        t->blob_lo = kv_get64(p + 80);
        t->blob_hi = kv_get64(p + 88);
    }
    if (fixed == TABLE_RUN_FIXED)
        t->run = kv_get64(p + 96);
    t->level = kv_get32(p + 4);
    t->number = kv_get64(p + 8);
    t->file_size = kv_get64(p + 16);
    t->min_seq = kv_get64(p + 24);
    t->max_seq = kv_get64(p + 32);
    t->entries = kv_get64(p + 40);
    t->filter_layout = kv_get32(p + 48);
    t->filter_k = kv_get32(p + 52);
    t->filter_bits_per_key = kv_bits_f64(kv_get64(p + 56));
    t->filter_keys = kv_get64(p + 64);
    t->flags = p[2];
    /* Keys are copied (at least one byte each, so empty keys are not NULL). */
    t->smallest = malloc(slen ? slen : 1);
    t->largest = malloc(llen ? llen : 1);
    if (!t->smallest || !t->largest) {
        free(t->smallest);
        free(t->largest);
        t->smallest = t->largest = NULL;
        return KV_ENOMEM;
    }
    memcpy(t->smallest, p + fixed, slen);
    memcpy(t->largest, p + fixed + slen, llen);
    t->smallest_len = slen;
    t->largest_len = llen;
    return KV_OK;
}

/* A blob record (doc/manifest.md, "blobs"): u8 version, u8 kind, 6
 * reserved zero bytes, then number, file_size, records, record_bytes,
 * garbage_records, garbage_bytes (u64 each), then the checksum. */
static void encode_blob(const kv_manifest_blob *b, uint8_t out[BLOB_LEN])
{
    memset(out, 0, BLOB_LEN);
    out[0] = BLOB_REC_VERSION;
    out[1] = KIND_BLOB;
    kv_put64(out + 8, b->number);
    kv_put64(out + 16, b->file_size);
    kv_put64(out + 24, b->records);
    kv_put64(out + 32, b->record_bytes);
    kv_put64(out + 40, b->garbage_records);
    kv_put64(out + 48, b->garbage_bytes);
    kv_put64(out + 56, XXH3_64bits(out, 56));
}

static int decode_blob(const MDB_val *k, const MDB_val *v, kv_manifest_blob *b, const char **why)
{
    const uint8_t *p = v->mv_data;
    uint8_t kb[8];
    *why = NULL;
    memset(b, 0, sizeof *b);
    if (k->mv_size != 8)
        *why = "key not 8 bytes long";
    else if (v->mv_size != BLOB_LEN)
        *why = "not 64 bytes long";
    else if (p[0] != BLOB_REC_VERSION || p[1] != KIND_BLOB)
        *why = "unknown version or kind";
    else if (p[2] || p[3] || p[4] || p[5] || p[6] || p[7])
        *why = "reserved bytes not zero";
    else if (kv_get64(p + 56) != XXH3_64bits(p, 56))
        *why = "checksum mismatch";
    else if ((table_key(kv_get64(p + 8), kb), memcmp(kb, k->mv_data, 8) != 0))
        *why = "number differs from its key";
    else if (kv_get64(p + 40) > kv_get64(p + 24) || kv_get64(p + 48) > kv_get64(p + 32) ||
             kv_get64(p + 32) > kv_get64(p + 16))
        *why = "garbage beyond its records, or records beyond the file";
    if (*why)
        return KV_ECORRUPT;
    b->number = kv_get64(p + 8);
    b->file_size = kv_get64(p + 16);
    b->records = kv_get64(p + 24);
    b->record_bytes = kv_get64(p + 32);
    b->garbage_records = kv_get64(p + 40);
    b->garbage_bytes = kv_get64(p + 48);
    return KV_OK;
}

/* ---- open / close ----------------------------------------------------------- */

/* LMDB keeps two meta pages and writes commit t to page t % 2, so on disk
 * they always hold consecutive transaction ids (both 0 before the first
 * commit). They carry no checksum: a flipped bit in the id would make LMDB
 * take the older page for the newer and open the state before the last
 * commit, silently. So before LMDB sees the file, the two ids are checked:
 * page i must hold an id of parity i and the two must differ by one. Both
 * must name the same page size: LMDB takes it from the newer page, and a
 * flipped bit there would make it read pages past the end of its map (a
 * SIGBUS). The rest of a meta page is LMDB's to judge (the magic, the
 * version, the map size; the roots lead to pages whose values carry our
 * checksums).
 * Offsets are those of LMDB 0.9's MDB_meta after the 16-byte page header:
 * magic at 16, the free DB's md_pad (the page size) at 40, mm_txnid at 144.
 * Sets *never_committed when both ids are 0 (a creation cut short).
 * KV_OK also when the pages are too damaged to read: LMDB refuses those. */
static int check_meta_pages(const char *path, int *never_committed)
{
    *never_committed = 0;
    /* checked a moment ago: a regular file, not a link */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
        int rc = kv_error_errno(errno, "%s: open", path);
        return rc == KV_NOTFOUND ? KV_EIO : rc; /* it was there a moment ago */
    }
    uint8_t m0[152], m1[152];
    int rc = KV_OK;
    if (pread(fd, m0, sizeof m0, 0) == (ssize_t)sizeof m0 &&
        kv_get32(m0 + 16) == LMDB_MAGIC) {
        uint32_t psize = kv_get32(m0 + 40);
        if (psize >= 512 && psize <= 65536 && (psize & (psize - 1)) == 0 &&
            pread(fd, m1, sizeof m1, psize) == (ssize_t)sizeof m1 &&
            kv_get32(m1 + 16) == LMDB_MAGIC) {
            uint64_t t0 = kv_get64(m0 + 144), t1 = kv_get64(m1 + 144);
            if (kv_get32(m1 + 40) != psize)
                rc = KV_ECORRUPT;
            else if (t0 == 0 && t1 == 0)
                *never_committed = 1;
            else if ((t0 & 1) != 0 || (t1 & 1) != 1 || (t0 > t1 ? t0 - t1 : t1 - t0) != 1)
                rc = KV_ECORRUPT;
        }
    }
    close(fd);
    return rc;
}

/* Whether every page LMDB can reach from the newer meta page lies within
 * the file's `npages` pages: KV_OK, or KV_ECORRUPT naming the first that
 * does not. The meta page's last page number is no such bound: LMDB does
 * not write a page that a transaction allocated and freed again (a "loose"
 * page), so after a commit whose highest page was one, the file ends short
 * of it, and rightly (LMDB writes the page when it reuses it, and never
 * reads a free page). So the trees are walked: the free list's and the
 * main one's from the meta page, each named database's from the main
 * tree's leaves, and each large value's overflow pages. Offsets are LMDB
 * 0.9's: a page's flags at 10, its lower bound at 12 (an overflow page's
 * count at 12), its node offsets from 16; a node's child page (branch) or
 * data size (leaf) in its first six bytes, its flags at 4, key size at 6,
 * key and data from 8; an MDB_db's root at 40; the meta page's roots at
 * 80 (free list) and 128 (main), its transaction id at 144. A page that
 * is neither branch nor leaf is left to LMDB, which refuses it; only a
 * page past the end would fault (SIGBUS) in its map. */
static int check_reachable_pages(const char *path, uint32_t psize, uint64_t npages)
{
    enum { P_BRANCH = 1, P_LEAF = 2, P_LEAF2 = 0x20, F_BIGDATA = 1, F_SUBDATA = 2 };
    const uint64_t none = ~(uint64_t)0; /* P_INVALID: an empty tree */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return kv_error_errno(errno, "%s: open", path);
    uint8_t *page = malloc(psize), *seen = calloc((size_t)(npages + 7) / 8, 1);
    uint64_t *todo = malloc((size_t)(npages + 2) * sizeof *todo);
    size_t n = 0;
    int rc = page && seen && todo ? KV_OK : KV_ENOMEM;
    uint8_t m[2][152];
    if (rc == KV_OK && (pread(fd, m[0], sizeof m[0], 0) != (ssize_t)sizeof m[0] ||
                        pread(fd, m[1], sizeof m[1], psize) != (ssize_t)sizeof m[1]))
        rc = KV_ECORRUPT;
    if (rc == KV_OK) {
        const uint8_t *meta = kv_get64(m[1] + 144) > kv_get64(m[0] + 144) ? m[1] : m[0];
        todo[n++] = kv_get64(meta + 80);
        todo[n++] = kv_get64(meta + 128);
    }
    uint64_t bad = none;
    while (rc == KV_OK && n) {
        uint64_t pg = todo[--n];
        if (pg == none)
            continue;
        if (pg >= npages) {
            bad = pg;
            rc = KV_ECORRUPT;
            break;
        }
        if (seen[pg / 8] & (1u << (pg % 8)))
            continue; /* a cycle: LMDB's to refuse */
        seen[pg / 8] |= (uint8_t)(1u << (pg % 8));
        if (pread(fd, page, psize, (off_t)(pg * psize)) != (ssize_t)psize) {
            bad = pg;
            rc = KV_ECORRUPT;
            break;
        }
        unsigned flags = kv_get16(page + 10), lower = kv_get16(page + 12);
        if (!(flags & (P_BRANCH | P_LEAF)) || (flags & P_LEAF2) || lower < 16 || lower > psize)
            continue;
        for (unsigned i = 0; i < (lower - 16) / 2 && rc == KV_OK; i++) {
            unsigned off = kv_get16(page + 16 + 2 * i);
            if (off + 8 > psize)
                continue;
            const uint8_t *node = page + off;
            uint64_t lo = kv_get16(node), hi = kv_get16(node + 2), nf = kv_get16(node + 4);
            if (n == npages + 2) { /* more children than pages: a tree it is not */
                rc = KV_ECORRUPT;
                break;
            }
            if (flags & P_BRANCH) {
                todo[n++] = lo | hi << 16 | nf << 32;
                continue;
            }
            size_t data = (size_t)off + 8 + kv_get16(node + 6);
            if ((nf & F_BIGDATA) && data + 8 <= psize) {
                uint64_t first = kv_get64(page + data);
                uint8_t head[16];
                if (first >= npages ||
                    pread(fd, head, sizeof head, (off_t)(first * psize)) != (ssize_t)sizeof head ||
                    kv_get32(head + 12) > npages - first) {
                    bad = first;
                    rc = KV_ECORRUPT;
                }
            } else if ((nf & F_SUBDATA) && data + 48 <= psize) {
                todo[n++] = kv_get64(page + data + 40);
            }
        }
    }
    close(fd);
    free(page);
    free(seen);
    free(todo);
    if (rc == KV_ECORRUPT && bad == none)
        return kv_error_set(KV_ECORRUPT, "%s: its pages do not make a tree", path);
    if (rc == KV_ECORRUPT)
        return kv_error_set(KV_ECORRUPT, "%s: shorter than its pages say (page %llu is past "
                            "its %llu pages)", path, (unsigned long long)bad,
                            (unsigned long long)npages);
    return rc;
}

int kv_manifest_check(const char *dir, uint64_t *size)
{
    if (size)
        *size = 0;
    if (!dir)
        return KV_EINVAL;
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s-lock", dir, KV_MANIFEST_FILE) >= (int)sizeof path)
        return KV_EINVAL;
    int rc = kv_file_check(path, 0, NULL);
    if (rc != KV_OK && rc != KV_NOTFOUND)
        return rc;
    snprintf(path, sizeof path, "%s/%s", dir, KV_MANIFEST_FILE);
    return kv_file_check(path, 0, size);
}

/* Opens e's LMDB environment on path and checks, before any transaction,
 * that the file holds every page its meta page names. e->mapsize grows to
 * the map an earlier life left. flags: MDB_RDONLY and MDB_NOLOCK as the
 * opener needs. On error the environment is closed (e->env NULL), with
 * the error's text set. */
static int open_env(struct kv_menv *e, const char *path, int is_new, unsigned flags)
{
    int rc = mdb_env_create(&e->env);
    if (rc == MDB_SUCCESS)
        rc = mdb_env_set_maxdbs(e->env, 3);
    if (rc == MDB_SUCCESS)
        rc = mdb_env_set_mapsize(e->env, e->mapsize);
    /* Read-only handles pin manifest states with read transactions, one
     * slot each (kv_manifest_pin): room for many handles beside the writer.
     * The first opener of the lock file sizes it; later ones take its size. */
    if (rc == MDB_SUCCESS)
        rc = mdb_env_set_maxreaders(e->env, KV_MANIFEST_READERS);
    /* Durable defaults: only NOSUBDIR (a file, not a directory) and NOTLS
     * (read transactions not tied to threads: a pin outlives the call that
     * took it) are set. */
    if (rc == MDB_SUCCESS)
        rc = mdb_env_open(e->env, path, MDB_NOSUBDIR | MDB_NOTLS | flags, 0644);
    if (rc != MDB_SUCCESS) {
        if (e->env)
            mdb_env_close(e->env);
        e->env = NULL;
        /* An existing file whose meta page asks for an absurd map is damage. */
        if (rc == ENOMEM && !is_new)
            return kv_error_set(KV_ECORRUPT, "%s: its meta page asks for an impossible map",
                                path);
        return mdb_fail(path, "LMDB could not open it", rc);
    }
    /* The map may have grown beyond INITIAL_MAP in an earlier life. LMDB
     * reads pages through a memory map: a file shorter than its meta page
     * says would fault (SIGBUS) on the first page past its end, so that is
     * checked before any transaction. */
    MDB_envinfo info;
    MDB_stat ms;
    struct stat st;
    rc = mdb_env_info(e->env, &info);
    if (rc == MDB_SUCCESS)
        rc = mdb_env_stat(e->env, &ms);
    if (rc == MDB_SUCCESS && stat(path, &st) != 0)
        rc = EIO;
    if (rc == MDB_SUCCESS && (uint64_t)info.me_last_pgno + 1 > UINT64_MAX / ms.ms_psize)
        rc = MDB_CORRUPTED;
    if (rc == MDB_SUCCESS &&
        ((uint64_t)info.me_last_pgno + 1) * ms.ms_psize > (uint64_t)st.st_size) {
        /* Shorter than the last page number says: damage, unless every
         * page past the end is a free one (check_reachable_pages). */
        int prc = check_reachable_pages(path, ms.ms_psize, (uint64_t)st.st_size / ms.ms_psize);
        if (prc != KV_OK) {
            mdb_env_close(e->env);
            e->env = NULL;
            return prc;
        }
    }
    if (rc != MDB_SUCCESS) {
        mdb_env_close(e->env);
        e->env = NULL;
        return rc == MDB_CORRUPTED ? kv_error_set(KV_ECORRUPT, "%s: shorter than its pages say",
                                                  path)
                                   : mdb_fail(path, "LMDB could not read it", rc);
    }
    if (info.me_mapsize > e->mapsize)
        e->mapsize = info.me_mapsize;
    e->dev = st.st_dev;
    e->ino = st.st_ino;
    return KV_OK;
}

/* Opens the named databases ("blobs" only where the first commit of a
 * blob file made it). A writer does it in a write transaction, making
 * them when is_new and writing fresh as the state of a new manifest; a
 * read-only handle in a read transaction (it never begins a write one),
 * committed so that the handles stay. An LMDB code: MDB_INVALID for an existing
 * manifest without its databases or its state. */
static int open_dbs(struct kv_menv *e, int is_new, int read_only, const kv_manifest_state *fresh)
{
    MDB_txn *txn;
    int rc = mdb_txn_begin(e->env, NULL, read_only ? MDB_RDONLY : 0, &txn);
    if (rc != MDB_SUCCESS)
        return rc;
    unsigned flags = is_new ? MDB_CREATE : 0;
    rc = mdb_dbi_open(txn, "meta", flags, &e->meta);
    if (rc == MDB_SUCCESS)
        rc = mdb_dbi_open(txn, "tables", flags, &e->tables);
    if (rc == MDB_NOTFOUND) /* an existing manifest without its databases */
        rc = MDB_INVALID;
    if (rc == MDB_SUCCESS) { /* absent before blob files: made by the first commit of one */
        int b = mdb_dbi_open(txn, "blobs", flags, &e->blobs);
        if (b == MDB_SUCCESS)
            e->have_blobs = 1;
        else if (b != MDB_NOTFOUND)
            rc = b;
    }
    MDB_val k = {5, "state"}, v;
    int have = rc == MDB_SUCCESS ? mdb_get(txn, e->meta, &k, &v) : rc;
    if (have == MDB_NOTFOUND) {
        if (!is_new || read_only) {
            rc = MDB_INVALID; /* a manifest without state is not ours */
        } else {
            uint8_t buf[STATE_LEN];
            encode_state(fresh, buf);
            v.mv_size = STATE_LEN;
            v.mv_data = buf;
            rc = mdb_put(txn, e->meta, &k, &v, 0);
        }
    } else if (have != MDB_SUCCESS) {
        rc = have;
    }
    if (rc == MDB_SUCCESS)
        rc = mdb_txn_commit(txn);
    else
        mdb_txn_abort(txn);
    return rc;
}

static void menv_free(struct kv_menv *e)
{
    if (e->env)
        mdb_env_close(e->env);
    pthread_rwlock_destroy(&e->map);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

/* The registry's environment for the MANIFEST at path (of `size` bytes,
 * st_size 0 when it does not exist), one reference more; made and opened
 * when the process has none. A writer (read_only 0) on an environment a
 * read-only handle opened MDB_RDONLY: KV_EBUSY. Under registry_mu. */
static int menv_get(const char *path, int is_new, int read_only, const kv_manifest_state *fresh,
                    struct kv_menv **out)
{
    *out = NULL;
    struct stat st;
    if (!is_new && stat(path, &st) == 0) {
        for (struct kv_menv *e = registry; e; e = e->next) {
            if (e->dev != st.st_dev || e->ino != st.st_ino || e->pid != getpid())
                continue;
            if (e->rdonly && !read_only)
                return kv_error_set(KV_EBUSY,
                                    "%s: opened read-only in this process, where the "
                                    "file was not writable: close those handles first",
                                    path);
            e->refs++;
            *out = e;
            return KV_OK;
        }
    }
    struct kv_menv *e = calloc(1, sizeof *e);
    if (!e)
        return kv_error_set(KV_ENOMEM, "%s: out of memory", path);
    e->mapsize = INITIAL_MAP;
    if (pthread_mutex_init(&e->mu, NULL) != 0) {
        free(e);
        return kv_error_set(KV_ENOMEM, "%s: out of memory", path);
    }
    if (pthread_rwlock_init(&e->map, NULL) != 0) {
        pthread_mutex_destroy(&e->mu);
        free(e);
        return kv_error_set(KV_ENOMEM, "%s: out of memory", path);
    }
    /* A read-only handle opens the file for writing when it may (nothing is
     * written through it: no write transaction is ever begun), so that a
     * writer opened later in this process can share the environment; else
     * MDB_RDONLY; and where even the lock file cannot be opened for
     * writing (a read-only directory or file system), without LMDB's locks:
     * no writer can exist there. */
    unsigned flags = 0;
    if (read_only && access(path, W_OK) != 0)
        flags = MDB_RDONLY;
    int rc = open_env(e, path, is_new, flags);
    if (rc == KV_EPERM && read_only) {
        flags = MDB_RDONLY | MDB_NOLOCK;
        rc = open_env(e, path, is_new, flags);
    }
    e->rdonly = (flags & MDB_RDONLY) != 0;
    e->nolock = (flags & MDB_NOLOCK) != 0;
    if (rc != KV_OK) {
        menv_free(e);
        return rc;
    }
    if ((rc = open_dbs(e, is_new, read_only, fresh)) != MDB_SUCCESS) {
        menv_free(e);
        return mdb_fail(path, "LMDB could not read its state", rc);
    }
    e->refs = 1;
    e->pid = getpid();
    e->next = registry;
    registry = e;
    *out = e;
    return KV_OK;
}

static void menv_put(struct kv_menv *e)
{
    pthread_mutex_lock(&registry_mu);
    int last = --e->refs == 0;
    if (last)
        for (struct kv_menv **pp = &registry; *pp; pp = &(*pp)->next)
            if (*pp == e) {
                *pp = e->next;
                break;
            }
    pthread_mutex_unlock(&registry_mu);
    if (last)
        menv_free(e);
}

/* kv_manifest_open and kv_manifest_open_ro. */
static int manifest_open(const char *dir, int create, int read_only, const kv_manifest_state *fresh,
                         kv_manifest **out)
{
    if (!dir || !out || (create && !fresh) || (create && read_only))
        return KV_EINVAL;
    *out = NULL;
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, KV_MANIFEST_FILE) >= (int)sizeof path)
        return kv_error_set(KV_EINVAL, "%s: the path is too long", dir);
    /* Only a missing or empty file is made new: in a file that holds
     * anything, a missing part is damage, never a cue to start over. (The
     * caller decides whether a missing manifest may be created at all:
     * kv_open refuses when tables or logs are already there.) */
    uint64_t size;
    int is_new, crc = kv_manifest_check(dir, &size);
    if (crc == KV_OK)
        is_new = size == 0;
    else if (crc == KV_NOTFOUND)
        is_new = 1;
    else
        return crc;
    if (!is_new) {
        int never_committed, rc = check_meta_pages(path, &never_committed);
        /* Beside a live writer the two pages are read a moment apart, and
         * commits in between could make sound ids look apart by more than
         * one: a read-only open looks again before it calls that damage. */
        for (int i = 0; rc == KV_ECORRUPT && read_only && i < 3; i++) {
            struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
            rc = check_meta_pages(path, &never_committed);
        }
        if (rc != KV_OK)
            return rc;
        is_new = never_committed;
    }
    if (is_new && !create)
        return kv_error_set(KV_NOTFOUND, "%s: no manifest (and create is off)", path);

    kv_manifest *m = calloc(1, sizeof *m);
    if (!m)
        return kv_error_set(KV_ENOMEM, "%s: out of memory", path);
    snprintf(m->path, sizeof m->path, "%s", path);
    m->read_only = read_only;
    if (pthread_mutex_init(&m->dmu, NULL) != 0) {
        free(m);
        return kv_error_set(KV_ENOMEM, "%s: out of memory", path);
    }
    /* LMDB makes its lock file (MANIFEST-lock) before it reads the file:
     * one made here goes again when the open fails (a MANIFEST that is not
     * an LMDB file), so that a look at a directory leaves nothing. */
    char lock[PATH_MAX + 8];
    struct stat lst;
    snprintf(lock, sizeof lock, "%s-lock", path);
    int made_lock = lstat(lock, &lst) != 0 && errno == ENOENT;
    pthread_mutex_lock(&registry_mu);
    int rc = menv_get(path, is_new, read_only, fresh, &m->e);
    pthread_mutex_unlock(&registry_mu);
    if (rc != KV_OK && made_lock)
        unlink(lock);
    if (rc != KV_OK) {
        pthread_mutex_destroy(&m->dmu);
        free(m);
        return rc;
    }
    m->env = m->e->env;
    MDB_envinfo info;
    if (mdb_env_info(m->env, &info) == MDB_SUCCESS)
        m->last_txn = info.me_last_txnid;
    *out = m;
    return KV_OK;
}

int kv_manifest_open(const char *dir, int create, const kv_manifest_state *fresh, kv_manifest **out)
{
    return manifest_open(dir, create, 0, fresh, out);
}

int kv_manifest_open_ro(const char *dir, kv_manifest **out)
{
    return manifest_open(dir, 0, 1, NULL, out);
}

int kv_manifest_read_only_fs(const kv_manifest *m)
{
    return m && m->e->nolock;
}

void kv_manifest_close(kv_manifest *m)
{
    if (!m)
        return;
    /* A last try; what is still held stays on disk, an orphan the next
     * writer's open finds (and defers the same way). */
    kv_manifest_retry_unlinks(m);
    for (size_t i = 0; i < m->ndl; i++)
        free(m->dl[i].path);
    free(m->dl);
    pthread_mutex_destroy(&m->dmu);
    menv_put(m->e);
    free(m);
}

/* ---- read transactions, pins and deferred unlinking ------------------------------- */

/* Begins a read transaction, holding e->map shared (read_end gives it
 * back). Adopts a map another process grew (MDB_MAP_RESIZED). An LMDB
 * code. */
static int read_begin(kv_manifest *m, MDB_txn **txn)
{
    struct kv_menv *e = m->e;
    for (int tries = 0;; tries++) {
        pthread_rwlock_rdlock(&e->map);
        int rc = mdb_txn_begin(e->env, NULL, MDB_RDONLY, txn);
        if (rc != MDB_MAP_RESIZED || tries == 8) {
            if (rc != MDB_SUCCESS)
                pthread_rwlock_unlock(&e->map);
            return rc;
        }
        pthread_rwlock_unlock(&e->map);
        pthread_mutex_lock(&e->mu);
        pthread_rwlock_wrlock(&e->map);
        rc = mdb_env_set_mapsize(e->env, 0); /* adopt the file's */
        pthread_rwlock_unlock(&e->map);
        pthread_mutex_unlock(&e->mu);
        if (rc != MDB_SUCCESS)
            return rc;
    }
}

/* Ends a read transaction of read_begin (keep: it stays open as a pin, no
 * page of it read again). */
static void read_end(kv_manifest *m, MDB_txn *txn, int keep)
{
    if (!keep)
        mdb_txn_abort(txn);
    pthread_rwlock_unlock(&m->e->map);
}

uint64_t kv_manifest_last_txn(kv_manifest *m)
{
    pthread_mutex_lock(&m->e->mu);
    uint64_t t = m->last_txn;
    pthread_mutex_unlock(&m->e->mu);
    return t;
}

/* mdb_reader_list's line for one slot: "<pid> <thread> <txnid>", the
 * txnid "-" for a free one. */
static int reader_line(const char *msg, void *ctx)
{
    uint64_t *oldest = ctx;
    int pid;
    size_t tid;
    unsigned long long txn;
    if (sscanf(msg, "%d %zx %llu", &pid, &tid, &txn) == 3 && txn < *oldest)
        *oldest = txn;
    return 0;
}

/* The oldest manifest state an LMDB reader slot holds, any process
 * (UINT64_MAX: none), after clearing the slots of dead processes. */
static uint64_t oldest_reader(kv_manifest *m)
{
    uint64_t oldest = UINT64_MAX;
    int dead;
    if (m->e->nolock)
        return oldest; /* no lock file: no reader slots, and no writer */
    mdb_reader_check(m->env, &dead);
    mdb_reader_list(m->env, reader_line, &oldest);
    return oldest;
}

void kv_manifest_unlink(kv_manifest *m, const char *path, uint64_t txn)
{
    pthread_mutex_lock(&m->dmu);
    if (txn == 0 || oldest_reader(m) >= txn) {
        pthread_mutex_unlock(&m->dmu);
        unlink(path);
        return;
    }
    char *copy = strdup(path);
    if (copy && m->ndl == m->dlcap) {
        size_t nc = m->dlcap ? 2 * m->dlcap : 16;
        struct deferred_unlink *d = realloc(m->dl, nc * sizeof *d);
        if (d) {
            m->dl = d;
            m->dlcap = nc;
        }
    }
    if (copy && m->ndl < m->dlcap) {
        m->dl[m->ndl].path = copy;
        m->dl[m->ndl].txn = txn;
        m->ndl++;
    } else {
        free(copy); /* out of memory: left on disk, an orphan for the next open */
    }
    pthread_mutex_unlock(&m->dmu);
}

void kv_manifest_retry_unlinks(kv_manifest *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->dmu);
    if (m->ndl) {
        uint64_t oldest = oldest_reader(m);
        size_t keep = 0;
        for (size_t i = 0; i < m->ndl; i++) {
            if (oldest >= m->dl[i].txn) {
                unlink(m->dl[i].path);
                free(m->dl[i].path);
            } else {
                m->dl[keep++] = m->dl[i];
            }
        }
        m->ndl = keep;
    }
    pthread_mutex_unlock(&m->dmu);
}

size_t kv_manifest_deferred(kv_manifest *m)
{
    pthread_mutex_lock(&m->dmu);
    size_t n = m->ndl;
    pthread_mutex_unlock(&m->dmu);
    return n;
}

void kv_manifest_pin_ref(kv_manifest_pin *p)
{
    atomic_fetch_add(&p->refs, 1);
}

void kv_manifest_pin_unref(kv_manifest_pin *p)
{
    if (p && atomic_fetch_sub(&p->refs, 1) == 1) {
        mdb_txn_abort(p->txn); /* gives its reader slot back: no page is read */
        free(p);
    }
}

uint64_t kv_manifest_pin_txn(const kv_manifest_pin *p)
{
    return p ? p->id : 0;
}

/* ---- load / apply ------------------------------------------------------------ */

void kv_manifest_free_tables(kv_table_meta *tables, size_t n)
{
    for (size_t i = 0; tables && i < n; i++) {
        free(tables[i].smallest);
        free(tables[i].largest);
    }
    free(tables);
}

/* ---- the comparator's name ---------------------------------------------------- */

int kv_manifest_get_comparator(kv_manifest *m, char name[KV_MANIFEST_NAME_MAX + 1])
{
    if (!m || !name)
        return KV_EINVAL;
    name[0] = '\0';
    MDB_txn *txn;
    int rc = read_begin(m, &txn);
    if (rc != MDB_SUCCESS)
        return mdb_fail(m->path, "LMDB could not read it", rc);
    MDB_val k = {sizeof COMPARATOR_KEY - 1, COMPARATOR_KEY}, v;
    rc = mdb_get(txn, m->e->meta, &k, &v);
    if (rc == MDB_NOTFOUND) {
        read_end(m, txn, 0);
        return KV_NOTFOUND;
    }
    if (rc != MDB_SUCCESS) {
        read_end(m, txn, 0);
        return mdb_fail(m->path, "LMDB could not read the comparator record", rc);
    }
    const uint8_t *p = v.mv_data;
    size_t len = v.mv_size >= COMPARATOR_FIXED ? p[2] : 0;
    const char *why = NULL;
    if (v.mv_size < COMPARATOR_FIXED + 1 + CHECKSUM_LEN ||
        v.mv_size != COMPARATOR_FIXED + len + CHECKSUM_LEN)
        why = "its length disagrees with the name's";
    else if (p[0] != COMPARATOR_REC_VERSION || p[1] != KIND_COMPARATOR)
        why = "unknown version or kind";
    else if (p[3])
        why = "reserved byte not zero";
    else if (kv_get64(p + COMPARATOR_FIXED + len) != XXH3_64bits(p, COMPARATOR_FIXED + len))
        why = "checksum mismatch";
    else if (memchr(p + COMPARATOR_FIXED, 0, len))
        why = "a 0x00 byte in the name";
    if (!why) {
        memcpy(name, p + COMPARATOR_FIXED, len);
        name[len] = '\0';
    }
    read_end(m, txn, 0);
    if (why)
        return kv_error_set(KV_ECORRUPT, "%s: comparator record: %s", m->path, why);
    return KV_OK;
}

int kv_manifest_set_comparator(kv_manifest *m, const char *name)
{
    size_t len = name ? strlen(name) : 0;
    if (!m || len < 1 || len > KV_MANIFEST_NAME_MAX || m->read_only)
        return KV_EINVAL;
    uint8_t buf[COMPARATOR_FIXED + KV_MANIFEST_NAME_MAX + CHECKSUM_LEN];
    buf[0] = COMPARATOR_REC_VERSION;
    buf[1] = KIND_COMPARATOR;
    buf[2] = (uint8_t)len;
    buf[3] = 0;
    memcpy(buf + COMPARATOR_FIXED, name, len);
    kv_put64(buf + COMPARATOR_FIXED + len, XXH3_64bits(buf, COMPARATOR_FIXED + len));
    MDB_txn *txn;
    pthread_mutex_lock(&m->e->mu); /* write transactions one at a time */
    int rc = mdb_txn_begin(m->env, NULL, 0, &txn);
    if (rc == MDB_SUCCESS) {
        MDB_val k = {sizeof COMPARATOR_KEY - 1, COMPARATOR_KEY},
                v = {COMPARATOR_FIXED + len + CHECKSUM_LEN, buf};
        rc = mdb_put(txn, m->e->meta, &k, &v, 0);
        if (rc == MDB_SUCCESS)
            rc = mdb_txn_commit(txn);
        else
            mdb_txn_abort(txn);
    }
    pthread_mutex_unlock(&m->e->mu);
    return rc == MDB_SUCCESS ? KV_OK
                             : mdb_fail(m->path, "storing the comparator's name", rc);
}

/* Decodes one record of a named database into *out (an element of the
 * walk's array); sets *why when the record breaks a rule. */
typedef int record_decoder(const MDB_val *k, const MDB_val *v, void *out, const char **why);

static int decode_table_rec(const MDB_val *k, const MDB_val *v, void *out, const char **why)
{
    return decode_table(k, v, out, why);
}

static int decode_blob_rec(const MDB_val *k, const MDB_val *v, void *out, const char **why)
{
    return decode_blob(k, v, out, why);
}

/* Reads every record of `dbi` in key order into a growing array of
 * `size`-byte elements (*list, *n of them decoded). A record that breaks
 * a rule is KV_ECORRUPT, with text naming the MANIFEST, the `what` record
 * and the rule. On error *list holds the *n records decoded before it. */
static int read_records(kv_manifest *m, MDB_txn *txn, MDB_dbi dbi, const char *what,
                        record_decoder *decode, size_t size, void **list, size_t *n)
{
    size_t cap = 0;
    MDB_cursor *cur = NULL;
    int rc = mdb_cursor_open(txn, dbi, &cur), err = KV_OK;
    if (rc != MDB_SUCCESS)
        return from_mdb(rc);
    for (int op = MDB_FIRST; err == KV_OK; op = MDB_NEXT) {
        MDB_val k, v;
        rc = mdb_cursor_get(cur, &k, &v, (MDB_cursor_op)op);
        if (rc == MDB_NOTFOUND)
            break;
        if (rc != MDB_SUCCESS) {
            err = from_mdb(rc);
            break;
        }
        if (*n == cap) {
            size_t ncap = cap ? 2 * cap : 16;
            void *bigger = realloc(*list, ncap * size);
            if (!bigger) {
                err = KV_ENOMEM;
                break;
            }
            *list = bigger;
            cap = ncap;
        }
        const char *why = NULL;
        err = decode(&k, &v, (char *)*list + *n * size, &why);
        if (err == KV_ECORRUPT)
            kv_error_set(err, "%s: %s record %llu: %s", m->path, what,
                         (unsigned long long)(k.mv_size == 8 ? be64(k.mv_data) : 0), why);
        else if (err == KV_OK)
            (*n)++;
    }
    mdb_cursor_close(cur);
    return err;
}

/* The state and tables as txn sees them (kv_manifest_load). */
static int load_txn(kv_manifest *m, MDB_txn *txn, kv_manifest_state *state, kv_table_meta **tables,
                    size_t *ntables)
{
    MDB_val k = {5, "state"}, v;
    int rc = mdb_get(txn, m->e->meta, &k, &v);
    const char *why = NULL;
    int err = rc == MDB_SUCCESS ? decode_state(&v, state, &why) : from_mdb(rc);
    if (rc == MDB_NOTFOUND) {
        err = KV_ECORRUPT;
        why = "missing";
    }
    if (why)
        kv_error_set(err, "%s: state record: %s", m->path, why);
    else if (m->format_floor < state->format_version)
        m->format_floor = state->format_version; /* never written lower again */
    kv_table_meta *list = NULL;
    size_t n = 0;
    if (err == KV_OK)
        err = read_records(m, txn, m->e->tables, "table", decode_table_rec, sizeof *list,
                           (void **)&list, &n);
    /* Every sequence a table holds was made durable before it was named
     * (the same transaction raised last_seq): a table beyond last_seq
     * would hide writes the store numbers after it. */
    for (size_t i = 0; err == KV_OK && i < n; i++)
        if (list[i].max_seq > state->last_seq)
            err = kv_error_set(KV_ECORRUPT,
                               "%s: table record %llu: max_seq %llu beyond the state's "
                               "last_seq %llu",
                               m->path, (unsigned long long)list[i].number,
                               (unsigned long long)list[i].max_seq,
                               (unsigned long long)state->last_seq);
    if (err != KV_OK) {
        kv_manifest_free_tables(list, n);
        return err;
    }
    *tables = list;
    *ntables = n;
    return KV_OK;
}

int kv_manifest_load(kv_manifest *m, kv_manifest_state *state, kv_table_meta **tables,
                     size_t *ntables)
{
    if (!m || !state || !tables || !ntables)
        return KV_EINVAL;
    *tables = NULL;
    *ntables = 0;
    MDB_txn *txn;
    int rc = read_begin(m, &txn);
    if (rc != MDB_SUCCESS)
        return from_mdb(rc);
    int err = load_txn(m, txn, state, tables, ntables);
    read_end(m, txn, 0);
    return err;
}

/* The blob records as txn sees them (kv_manifest_load_blobs). */
static int load_blobs_txn(kv_manifest *m, MDB_txn *txn, kv_manifest_blob **blobs, size_t *nblobs)
{
    *blobs = NULL;
    *nblobs = 0;
    if (!m->e->have_blobs)
        return KV_OK;
    kv_manifest_blob *list = NULL;
    size_t n = 0;
    int err = read_records(m, txn, m->e->blobs, "blob", decode_blob_rec, sizeof *list,
                           (void **)&list, &n);
    if (err != KV_OK) {
        free(list);
        return err;
    }
    *blobs = list;
    *nblobs = n;
    return KV_OK;
}

int kv_manifest_load_blobs(kv_manifest *m, kv_manifest_blob **blobs, size_t *nblobs)
{
    if (!m || !blobs || !nblobs)
        return KV_EINVAL;
    *blobs = NULL;
    *nblobs = 0;
    if (!m->e->have_blobs)
        return KV_OK;
    MDB_txn *txn;
    int rc = read_begin(m, &txn);
    if (rc != MDB_SUCCESS)
        return from_mdb(rc);
    int err = load_blobs_txn(m, txn, blobs, nblobs);
    read_end(m, txn, 0);
    return err;
}

/* A read-only environment learns of "blobs" when a writer (another
 * process) made it after the open: its handle is opened in a read
 * transaction of its own, committed so that it stays. */
static void look_for_blobs(kv_manifest *m)
{
    struct kv_menv *e = m->e;
    if (e->have_blobs)
        return;
    pthread_mutex_lock(&e->mu);
    /* Not read_begin: its remap would take mu again. A map another process
     * grew fails the begin here; the pin's read_begin adopts it, and the
     * next load looks again. */
    pthread_rwlock_rdlock(&e->map);
    MDB_txn *txn;
    if (!e->have_blobs && mdb_txn_begin(e->env, NULL, MDB_RDONLY, &txn) == MDB_SUCCESS) {
        MDB_dbi dbi;
        if (mdb_dbi_open(txn, "blobs", 0, &dbi) == MDB_SUCCESS &&
            mdb_txn_commit(txn) == MDB_SUCCESS) {
            e->blobs = dbi;
            e->have_blobs = 1;
        } else {
            mdb_txn_abort(txn);
        }
    }
    pthread_rwlock_unlock(&e->map);
    pthread_mutex_unlock(&e->mu);
}

int kv_manifest_pin_load(kv_manifest *m, kv_manifest_pin **pin, kv_manifest_state *state,
                         kv_table_meta **tables, size_t *ntables, kv_manifest_blob **blobs,
                         size_t *nblobs)
{
    if (!m || !pin || !state || !tables || !ntables || !blobs || !nblobs)
        return KV_EINVAL;
    *pin = NULL;
    *tables = NULL;
    *blobs = NULL;
    *ntables = *nblobs = 0;
    kv_manifest_pin *p = calloc(1, sizeof *p);
    if (!p)
        return kv_error_set(KV_ENOMEM, "%s: out of memory", m->path);
    look_for_blobs(m);
    int rc = read_begin(m, &p->txn);
    if (rc != MDB_SUCCESS) {
        free(p);
        return rc == MDB_READERS_FULL
                   ? kv_error_set(KV_EBUSY,
                                  "%s: every LMDB reader slot is taken (%d): too many "
                                  "read-only handles or states pinned",
                                  m->path, KV_MANIFEST_READERS)
                   : mdb_fail(m->path, "LMDB could not begin a read", rc);
    }
    int err = load_txn(m, p->txn, state, tables, ntables);
    if (err == KV_OK && (err = load_blobs_txn(m, p->txn, blobs, nblobs)) != KV_OK) {
        kv_manifest_free_tables(*tables, *ntables);
        *tables = NULL;
        *ntables = 0;
    }
    p->id = mdb_txn_id(p->txn);
    read_end(m, p->txn, err == KV_OK);
    if (err != KV_OK) {
        free(p);
        return err;
    }
    atomic_init(&p->refs, 1);
    *pin = p;
    return KV_OK;
}

/* The test hook (manifest.h): the module's one global. */
static kv_manifest_commit_hook *_Atomic commit_hook;

void kv_manifest_set_commit_hook(kv_manifest_commit_hook *hook)
{
    atomic_store(&commit_hook, hook);
}

/* 0, or the error the test hook makes this commit attempt fail with. */
static int commit_fault(void)
{
    kv_manifest_commit_hook *hook = atomic_load_explicit(&commit_hook, memory_order_acquire);
    return hook ? hook() : 0;
}

/* One attempt at the transaction; MDB_MAP_FULL makes the caller grow the
 * map and try again. */
static int apply_once(kv_manifest *m, const kv_manifest_state *state, const uint64_t *remove,
                      size_t nremove, const kv_table_meta *add, size_t nadd,
                      const kv_manifest_blob *put, size_t nput, const uint64_t *bremove,
                      size_t nbremove, int *kv_err)
{
    MDB_txn *txn;
    int rc = mdb_txn_begin(m->env, NULL, 0, &txn);
    if (rc != MDB_SUCCESS)
        return rc;
    uint8_t sbuf[STATE_LEN];
    kv_manifest_state st = *state;
    if (st.format_version < m->format_floor)
        st.format_version = m->format_floor;
    encode_state(&st, sbuf);
    MDB_val k = {5, "state"}, v = {STATE_LEN, sbuf};
    rc = mdb_put(txn, m->e->meta, &k, &v, 0);
    for (size_t i = 0; rc == MDB_SUCCESS && i < nremove; i++) {
        uint8_t kb[8];
        table_key(remove[i], kb);
        k.mv_size = 8;
        k.mv_data = kb;
        rc = mdb_del(txn, m->e->tables, &k, NULL);
        if (rc == MDB_NOTFOUND)
            *kv_err = KV_EINVAL;
    }
    for (size_t i = 0; rc == MDB_SUCCESS && i < nadd; i++) {
        size_t len = table_len(&add[i]);
        uint8_t kb[8], *buf = malloc(len);
        if (!buf) {
            *kv_err = KV_ENOMEM;
            rc = ENOMEM;
            break;
        }
        encode_table(&add[i], buf);
        table_key(add[i].number, kb);
        k.mv_size = 8;
        k.mv_data = kb;
        v.mv_size = len;
        v.mv_data = buf;
        rc = mdb_put(txn, m->e->tables, &k, &v, MDB_NOOVERWRITE);
        free(buf);
        if (rc == MDB_KEYEXIST)
            *kv_err = KV_EINVAL;
    }
    /* The blobs database, made by the first transaction that needs it
     * (its handle is kept only once that transaction commits). */
    MDB_dbi blobs = m->e->blobs;
    int made = 0;
    if (rc == MDB_SUCCESS && (nput || nbremove) && !m->e->have_blobs) {
        rc = mdb_dbi_open(txn, "blobs", MDB_CREATE, &blobs);
        made = rc == MDB_SUCCESS;
    }
    for (size_t i = 0; rc == MDB_SUCCESS && i < nbremove; i++) {
        uint8_t kb[8];
        table_key(bremove[i], kb);
        k.mv_size = 8;
        k.mv_data = kb;
        rc = mdb_del(txn, blobs, &k, NULL);
        if (rc == MDB_NOTFOUND)
            *kv_err = KV_EINVAL;
    }
    for (size_t i = 0; rc == MDB_SUCCESS && i < nput; i++) {
        uint8_t kb[8], buf[BLOB_LEN];
        encode_blob(&put[i], buf);
        table_key(put[i].number, kb);
        k.mv_size = 8;
        k.mv_data = kb;
        v.mv_size = BLOB_LEN;
        v.mv_data = buf;
        rc = mdb_put(txn, blobs, &k, &v, 0);
    }
    if (rc == MDB_SUCCESS && (rc = commit_fault()) == 0) {
        uint64_t id = mdb_txn_id(txn);
        rc = mdb_txn_commit(txn);
        if (rc == MDB_SUCCESS)
            m->last_txn = id; /* the files this change removed wait for readers older */
        if (rc == MDB_SUCCESS && made) {
            m->e->blobs = blobs;
            m->e->have_blobs = 1;
        }
        return rc;
    }
    mdb_txn_abort(txn);
    return rc;
}

/* The file's path, for error texts. */
static const char *manifest_path(kv_manifest *m)
{
    const char *p = NULL;
    return mdb_env_get_path(m->env, &p) == MDB_SUCCESS && p ? p : KV_MANIFEST_FILE;
}

int kv_manifest_apply(kv_manifest *m, const kv_manifest_state *state, const uint64_t *remove,
                      size_t nremove, const kv_table_meta *add, size_t nadd)
{
    return kv_manifest_apply_blobs(m, state, remove, nremove, add, nadd, NULL, 0, NULL, 0);
}

int kv_manifest_apply_blobs(kv_manifest *m, const kv_manifest_state *state,
                            const uint64_t *remove, size_t nremove, const kv_table_meta *add,
                            size_t nadd, const kv_manifest_blob *put, size_t nput,
                            const uint64_t *bremove, size_t nbremove)
{
    if (!m || !state || (nremove && !remove) || (nadd && !add) || (nput && !put) ||
        (nbremove && !bremove))
        return KV_EINVAL;
    for (size_t i = 0; i < nput; i++)
        if (put[i].garbage_records > put[i].records || put[i].garbage_bytes > put[i].record_bytes ||
            put[i].record_bytes > put[i].file_size)
            return KV_EINVAL;
    for (size_t i = 0; i < nadd; i++)
        if (add[i].smallest_len > KV_MANIFEST_MAX_KEY || add[i].largest_len > KV_MANIFEST_MAX_KEY ||
            (add[i].smallest_len && !add[i].smallest) || (add[i].largest_len && !add[i].largest))
            return KV_EINVAL;
    if (m->read_only)
        return kv_error_set(KV_EINVAL, "%s: commit: opened read-only", m->path);
    pthread_mutex_lock(&m->e->mu);
    int ret;
    for (;;) {
        int kv_err = KV_OK;
        int rc = apply_once(m, state, remove, nremove, add, nadd, put, nput, bremove, nbremove,
                            &kv_err);
        if (rc == MDB_SUCCESS) {
            ret = KV_OK;
            break;
        }
        if (kv_err == KV_ENOMEM) {
            ret = kv_error_set(kv_err, "%s: commit: out of memory", manifest_path(m));
            break;
        }
        if (kv_err != KV_OK) {
            ret = kv_error_set(kv_err, "%s: commit: %s", manifest_path(m),
                               "a table or blob file to remove is not there, or a table to add "
                               "is there already");
            break;
        }
        if (rc != MDB_MAP_FULL || m->e->mapsize >= ((size_t)1 << 40)) {
            ret = mdb_fail(manifest_path(m), "commit", rc);
            break;
        }
        /* Grow the map and try again; no transaction is open here. */
        m->e->mapsize *= 2;
        pthread_rwlock_wrlock(&m->e->map);
        rc = mdb_env_set_mapsize(m->env, m->e->mapsize);
        pthread_rwlock_unlock(&m->e->map);
        if (rc != MDB_SUCCESS) {
            ret = mdb_fail(manifest_path(m), "growing the map", rc);
            break;
        }
    }
    pthread_mutex_unlock(&m->e->mu);
    /* Files an earlier change removed may be free to go now. */
    if (ret == KV_OK)
        kv_manifest_retry_unlinks(m);
    return ret;
}

/* ---- the features record: merge operator name, ttl_seconds ------------------------ */

/* The `features` value (doc/manifest.md): u8 version (1), u8 kind (5), u8
 * N, u8 reserved, u64le ttl_seconds, N bytes of the merge operator's name,
 * u64le XXH3-64 of the bytes before it. */
#define FEATURES_KEY "features"
#define FEATURES_REC_VERSION 1
#define KIND_FEATURES 5
#define FEATURES_FIXED 12

int kv_manifest_get_features(kv_manifest *m, kv_manifest_features *f)
{
    if (!m || !f)
        return KV_EINVAL;
    memset(f, 0, sizeof *f);
    MDB_txn *txn;
    int rc = read_begin(m, &txn);
    if (rc != MDB_SUCCESS)
        return mdb_fail(m->path, "LMDB could not read it", rc);
    MDB_val k = {sizeof FEATURES_KEY - 1, FEATURES_KEY}, v;
    rc = mdb_get(txn, m->e->meta, &k, &v);
    if (rc != MDB_SUCCESS) {
        read_end(m, txn, 0);
        return rc == MDB_NOTFOUND
                   ? KV_NOTFOUND
                   : mdb_fail(m->path, "LMDB could not read the features record", rc);
    }
    const uint8_t *p = v.mv_data;
    size_t len = v.mv_size >= FEATURES_FIXED ? p[2] : 0;
    const char *why = NULL;
    if (v.mv_size != FEATURES_FIXED + len + CHECKSUM_LEN)
        why = "its length disagrees with the name's";
    else if (p[0] != FEATURES_REC_VERSION || p[1] != KIND_FEATURES)
        why = "unknown version or kind";
    else if (p[3])
        why = "reserved byte not zero";
    else if (kv_get64(p + FEATURES_FIXED + len) != XXH3_64bits(p, FEATURES_FIXED + len))
        why = "checksum mismatch";
    else if (memchr(p + FEATURES_FIXED, 0, len))
        why = "a 0x00 byte in the name";
    if (!why) {
        f->ttl_seconds = kv_get64(p + 4);
        memcpy(f->merge_name, p + FEATURES_FIXED, len);
        f->merge_name[len] = '\0';
    }
    read_end(m, txn, 0);
    if (why)
        return kv_error_set(KV_ECORRUPT, "%s: features record: %s", m->path, why);
    return KV_OK;
}

/* One attempt at kv_manifest_put_features's transaction. */
static int put_features_once(kv_manifest *m, const uint8_t *buf, size_t len, uint32_t version)
{
    MDB_txn *txn;
    int rc = mdb_txn_begin(m->env, NULL, 0, &txn);
    if (rc != MDB_SUCCESS)
        return rc;
    MDB_val k = {sizeof FEATURES_KEY - 1, FEATURES_KEY}, v = {len, (void *)buf};
    rc = mdb_put(txn, m->e->meta, &k, &v, 0);
    /* The state as it stands, its format version raised. */
    MDB_val sk = {5, "state"}, sv;
    if (rc == MDB_SUCCESS)
        rc = mdb_get(txn, m->e->meta, &sk, &sv);
    if (rc == MDB_SUCCESS) {
        kv_manifest_state st;
        const char *why = NULL;
        if (decode_state(&sv, &st, &why) != KV_OK) {
            mdb_txn_abort(txn);
            return MDB_CORRUPTED;
        }
        if (st.format_version < version)
            st.format_version = version;
        uint8_t sbuf[STATE_LEN];
        encode_state(&st, sbuf);
        sv.mv_size = STATE_LEN;
        sv.mv_data = sbuf;
        rc = mdb_put(txn, m->e->meta, &sk, &sv, 0);
    }
    if (rc == MDB_SUCCESS && (rc = commit_fault()) == 0)
        return mdb_txn_commit(txn);
    mdb_txn_abort(txn);
    return rc;
}

int kv_manifest_put_features(kv_manifest *m, const kv_manifest_features *f, uint32_t version)
{
    size_t len = f ? strlen(f->merge_name) : 0;
    if (!m || !f || len > KV_MANIFEST_NAME_MAX || m->read_only)
        return KV_EINVAL;
    uint8_t buf[FEATURES_FIXED + KV_MANIFEST_NAME_MAX + CHECKSUM_LEN];
    buf[0] = FEATURES_REC_VERSION;
    buf[1] = KIND_FEATURES;
    buf[2] = (uint8_t)len;
    buf[3] = 0;
    kv_put64(buf + 4, f->ttl_seconds);
    memcpy(buf + FEATURES_FIXED, f->merge_name, len);
    kv_put64(buf + FEATURES_FIXED + len, XXH3_64bits(buf, FEATURES_FIXED + len));
    pthread_mutex_lock(&m->e->mu);
    int rc;
    for (;;) {
        rc = put_features_once(m, buf, FEATURES_FIXED + len + CHECKSUM_LEN, version);
        if (rc != MDB_MAP_FULL || m->e->mapsize >= ((size_t)1 << 40))
            break;
        m->e->mapsize *= 2;
        pthread_rwlock_wrlock(&m->e->map);
        rc = mdb_env_set_mapsize(m->env, m->e->mapsize);
        pthread_rwlock_unlock(&m->e->map);
        if (rc != MDB_SUCCESS)
            break;
    }
    if (rc == MDB_SUCCESS && m->format_floor < version)
        m->format_floor = version;
    pthread_mutex_unlock(&m->e->mu);
    return rc == MDB_SUCCESS ? KV_OK : mdb_fail(m->path, "storing the features record", rc);
}

/* ---- the filter secret ----------------------------------------------------------- */

/* The `filter_secret` value (doc/manifest.md): u8 version (1), u8 kind
 * (1: a SipHash-2-4 key), the 16 secret bytes, u64le XXH3-64 of the 18
 * bytes before it. */
#define SECRET_KEY "filter_secret"
#define SECRET_REC_VERSION 1
#define SECRET_KIND_SIPHASH24 1
#define SECRET_LEN (2 + KV_MANIFEST_SECRET + CHECKSUM_LEN)

int kv_manifest_secret_get(kv_manifest *m, uint8_t secret[KV_MANIFEST_SECRET], int *have)
{
    if (!m || !secret || !have)
        return KV_EINVAL;
    *have = 0;
    MDB_txn *txn;
    int rc = read_begin(m, &txn);
    if (rc != MDB_SUCCESS)
        return mdb_fail(m->path, "reading the filter secret", rc);
    MDB_val k = {sizeof SECRET_KEY - 1, SECRET_KEY}, v;
    rc = mdb_get(txn, m->e->meta, &k, &v);
    int err = KV_OK;
    if (rc == MDB_NOTFOUND) {
        err = KV_OK; /* never made: the database has not been keyed */
    } else if (rc != MDB_SUCCESS) {
        err = mdb_fail(m->path, "reading the filter secret", rc);
    } else {
        const uint8_t *p = v.mv_data;
        const char *why = NULL;
        if (v.mv_size != SECRET_LEN)
            why = "not 26 bytes long";
        else if (p[0] != SECRET_REC_VERSION || p[1] != SECRET_KIND_SIPHASH24)
            why = "unknown version or kind";
        else if (kv_get64(p + 2 + KV_MANIFEST_SECRET) != XXH3_64bits(p, 2 + KV_MANIFEST_SECRET))
            why = "checksum mismatch";
        if (why) {
            /* The text never holds the secret's bytes. */
            err = kv_error_set(KV_ECORRUPT, "%s: filter_secret record: %s", m->path, why);
        } else {
            memcpy(secret, p + 2, KV_MANIFEST_SECRET);
            *have = 1;
        }
    }
    read_end(m, txn, 0);
    return err;
}

int kv_manifest_secret_put(kv_manifest *m, const uint8_t secret[KV_MANIFEST_SECRET])
{
    if (!m || !secret || m->read_only)
        return KV_EINVAL;
    uint8_t buf[SECRET_LEN];
    buf[0] = SECRET_REC_VERSION;
    buf[1] = SECRET_KIND_SIPHASH24;
    memcpy(buf + 2, secret, KV_MANIFEST_SECRET);
    kv_put64(buf + 2 + KV_MANIFEST_SECRET, XXH3_64bits(buf, 2 + KV_MANIFEST_SECRET));
    MDB_txn *txn;
    pthread_mutex_lock(&m->e->mu); /* write transactions one at a time */
    int rc = mdb_txn_begin(m->env, NULL, 0, &txn);
    if (rc == MDB_SUCCESS) {
        MDB_val k = {sizeof SECRET_KEY - 1, SECRET_KEY}, v = {SECRET_LEN, buf};
        /* Never replaced: a second secret would hide the keys of every
         * table written under the first from their filters. */
        rc = mdb_put(txn, m->e->meta, &k, &v, MDB_NOOVERWRITE);
        if (rc == MDB_SUCCESS)
            rc = mdb_txn_commit(txn);
        else
            mdb_txn_abort(txn);
    }
    pthread_mutex_unlock(&m->e->mu);
    memset(buf, 0, sizeof buf);
    if (rc == MDB_KEYEXIST)
        return kv_error_set(KV_EINVAL, "%s: the filter secret is already set", m->path);
    return rc == MDB_SUCCESS ? KV_OK : mdb_fail(m->path, "storing the filter secret", rc);
}
