/* file.c - counted, fault-injectable file I/O on POSIX descriptors. */
#define _POSIX_C_SOURCE 200809L
#include "file.h"
#include "error.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct kv_file {
    int fd;
    kv_file_kind kind;
    uint64_t end; /* append position */
    int track;    /* its kv_file_track entry; -1 when not tracked */
    const uint8_t *map; /* kv_file_map: the file's first map_len bytes, or NULL */
    uint64_t map_len;
};

/* Calls per (file kind, op); [KV_FILE_KIND_ANY] counts every call. */
static _Atomic uint64_t op_calls[KV_FILE_KINDS][KV_FILE_OPS];
static _Atomic uint64_t read_bytes, write_bytes, opens, closes;
static _Atomic int64_t open_now;

/* Armed faults: fault_at[kind][op] is the call number (in that kind's
 * count) that fails with fault_kind[kind][op]. */
static _Atomic uint64_t fault_at[KV_FILE_KINDS][KV_FILE_OPS];
static _Atomic int fault_kind[KV_FILE_KINDS][KV_FILE_OPS];

void kv_file_inject_kind(kv_file_kind kind, kv_file_op op, uint64_t nth, kv_file_fault fault)
{
    if ((unsigned)op >= KV_FILE_OPS || (unsigned)kind >= KV_FILE_KINDS)
        return;
    atomic_store(&fault_kind[kind][op], KV_FAULT_NONE);
    if (fault == KV_FAULT_NONE || nth == 0)
        return;
    atomic_store(&fault_at[kind][op], atomic_load(&op_calls[kind][op]) + nth);
    atomic_store(&fault_kind[kind][op], fault);
}

void kv_file_inject(kv_file_op op, uint64_t nth, kv_file_fault fault)
{
    kv_file_inject_kind(KV_FILE_KIND_ANY, op, nth, fault);
}

uint64_t kv_file_calls(kv_file_kind kind, kv_file_op op)
{
    if ((unsigned)op >= KV_FILE_OPS || (unsigned)kind >= KV_FILE_KINDS)
        return 0;
    return atomic_load(&op_calls[kind][op]);
}

/* Counts call number n of (kind, op); the armed fault if this is its call. */
static kv_file_fault take_fault(kv_file_kind kind, kv_file_op op, uint64_t n)
{
    int fault = atomic_load(&fault_kind[kind][op]);
    if (fault != KV_FAULT_NONE && n == atomic_load(&fault_at[kind][op])) {
        int expected = fault;
        if (atomic_compare_exchange_strong(&fault_kind[kind][op], &expected, KV_FAULT_NONE))
            return (kv_file_fault)fault;
    }
    return KV_FAULT_NONE;
}

/* Counts a call of op on a file of `kind`; returns the fault to apply to
 * it, if any (one aimed at its kind first, then one aimed at any file). */
static kv_file_fault count_call(kv_file_kind kind, kv_file_op op)
{
    uint64_t any = atomic_fetch_add(&op_calls[KV_FILE_KIND_ANY][op], 1) + 1;
    uint64_t own = atomic_fetch_add(&op_calls[kind][op], 1) + 1;
    kv_file_fault f = take_fault(kind, op, own);
    return f != KV_FAULT_NONE ? f : take_fault(KV_FILE_KIND_ANY, op, any);
}

static int ends_with(const char *s, const char *end)
{
    size_t n = strlen(s), m = strlen(end);
    return n >= m && memcmp(s + n - m, end, m) == 0;
}

static kv_file_kind kind_of(const char *path)
{
    if (ends_with(path, ".log"))
        return KV_FILE_KIND_WAL;
    if (ends_with(path, ".sst") || ends_with(path, ".sst.tmp"))
        return KV_FILE_KIND_TABLE;
    return KV_FILE_KIND_OTHER;
}

/* ---- power-loss tracking (file.h, "power-loss simulation") --------------------
 *
 * track_mu serialises every change of the record within a process; a
 * directory sync holds it across its fsync, so no create or rename slips
 * in between the sync and the marking of what it covered. Whoever reads
 * the record after a SIGKILL may find the killed process mid-update: a
 * new name is written into a free slot before `cur` points at it, and an
 * entry is filled before `count` covers it (the signal fences keep the
 * compiler from reordering those stores). */
static kv_file_track *_Atomic track;
static pthread_mutex_t track_mu = PTHREAD_MUTEX_INITIALIZER;

void kv_file_track_begin(kv_file_track *t)
{
    pthread_mutex_lock(&track_mu);
    if (t) {
        t->count = 0;
        t->overflow = 0;
    }
    track = t;
    pthread_mutex_unlock(&track_mu);
}

/* The directory part of path into dir (as kv_file_sync_dir_of names it). */
static int dir_part(const char *path, char *dir, size_t cap)
{
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(dir, cap, ".");
        return 0;
    }
    size_t n = (size_t)(slash - path);
    if (n >= cap)
        return -1;
    memcpy(dir, path, n);
    dir[n ? n : 1] = '\0';
    if (!n)
        dir[0] = '/';
    return 0;
}

/* Marks dead every live entry named `path` now (its file is replaced).
 * track_mu held. */
static void track_bury(const char *path)
{
    for (uint32_t i = 0; i < track->count; i++) {
        kv_file_track_entry *e = &track->files[i];
        if (e->durable != -2 && strcmp(e->name[e->cur], path) == 0)
            e->durable = -2;
    }
}

/* A new entry for `path`; -1 when it cannot be tracked. track_mu held. */
static int track_add(const char *path, int durable, uint64_t synced)
{
    uint32_t i = track->count;
    if (i >= KV_FILE_TRACK_FILES || strlen(path) >= KV_FILE_TRACK_NAME) {
        track->overflow++;
        return -1;
    }
    kv_file_track_entry *e = &track->files[i];
    e->issued = e->done = 0;
    e->synced = synced;
    e->cur = 0;
    e->durable = durable;
    strcpy(e->name[0], path);
    e->name[1][0] = e->name[2][0] = '\0';
    atomic_signal_fence(memory_order_seq_cst);
    track->count = i + 1;
    return (int)i;
}

/* A file was just created. */
static void track_create(kv_file *f, const char *path)
{
    f->track = -1;
    if (!track)
        return;
    pthread_mutex_lock(&track_mu);
    if (track) {
        track_bury(path);
        f->track = track_add(path, -1, 0);
    }
    pthread_mutex_unlock(&track_mu);
}

/* Before a write that will end at `end`. */
static void track_issue(kv_file *f, uint64_t end)
{
    if (f->track < 0 || !track)
        return;
    pthread_mutex_lock(&track_mu);
    kv_file_track_entry *e = &track->files[f->track];
    if (end > e->issued)
        e->issued = end;
    pthread_mutex_unlock(&track_mu);
}

/* After a write: the file now holds `end` bytes of this handle. */
static void track_done(kv_file *f, uint64_t end)
{
    if (f->track < 0 || !track)
        return;
    pthread_mutex_lock(&track_mu);
    kv_file_track_entry *e = &track->files[f->track];
    if (end > e->done)
        e->done = end;
    pthread_mutex_unlock(&track_mu);
}

/* What a sync starting now covers (UINT64_MAX: the file is not tracked). */
static uint64_t track_sync_begin(kv_file *f)
{
    if (f->track < 0 || !track)
        return UINT64_MAX;
    pthread_mutex_lock(&track_mu);
    uint64_t d = track->files[f->track].done;
    pthread_mutex_unlock(&track_mu);
    return d;
}

/* A sync that covered `upto` returned OK. */
static void track_sync_done(kv_file *f, uint64_t upto)
{
    if (f->track < 0 || !track || upto == UINT64_MAX)
        return;
    pthread_mutex_lock(&track_mu);
    kv_file_track_entry *e = &track->files[f->track];
    if (e->synced == UINT64_MAX || upto > e->synced)
        e->synced = upto;
    pthread_mutex_unlock(&track_mu);
}

/* A directory sync of `dir` returned OK: every entry now named in it keeps
 * that name. track_mu held (since before the sync began). */
static void track_dir_synced(const char *dir)
{
    char d[PATH_MAX];
    for (uint32_t i = 0; i < track->count; i++) {
        kv_file_track_entry *e = &track->files[i];
        if (e->durable == -2 || e->durable == e->cur)
            continue;
        if (dir_part(e->name[e->cur], d, sizeof d) == 0 && strcmp(d, dir) == 0)
            e->durable = e->cur;
    }
}

/* `from` was just renamed to `to` (not yet durable). track_mu held. A file
 * that is not tracked (made before tracking began) gets an entry with its
 * old name durable and nothing to cut. */
static void track_renamed(const char *from, const char *to)
{
    kv_file_track_entry *e = NULL;
    for (uint32_t i = track->count; i-- > 0;) {
        kv_file_track_entry *x = &track->files[i];
        if (x->durable != -2 && strcmp(x->name[x->cur], from) == 0) {
            e = x;
            break;
        }
    }
    track_bury(to);
    if (!e) {
        int i = track_add(from, 0, UINT64_MAX);
        if (i < 0)
            return;
        e = &track->files[i];
    }
    if (strlen(to) >= KV_FILE_TRACK_NAME) {
        track->overflow++;
        return;
    }
    int s = 0;
    while (s == e->cur || s == e->durable)
        s++;
    strcpy(e->name[s], to);
    atomic_signal_fence(memory_order_seq_cst);
    e->cur = s;
}

void kv_file_counters(kv_file_stats *out)
{
    if (!out)
        return;
    for (int i = 0; i < KV_FILE_OPS; i++)
        out->calls[i] = atomic_load(&op_calls[KV_FILE_KIND_ANY][i]);
    out->read_bytes = atomic_load(&read_bytes);
    out->write_bytes = atomic_load(&write_bytes);
    out->opens = atomic_load(&opens);
    out->closes = atomic_load(&closes);
}

int64_t kv_file_open_count(void)
{
    return atomic_load(&open_now);
}

static int open_fd(const char *path, int flags, kv_file **out)
{
    if (!out)
        return KV_EINVAL;
    *out = NULL;
    if (!path)
        return KV_EINVAL;
    kv_file *f = calloc(1, sizeof *f); /* no mapping yet */
    if (!f)
        return KV_ENOMEM;
    f->fd = open(path, flags | O_CLOEXEC, 0644);
    if (f->fd < 0) {
        int rc = kv_errno_status(errno);
        free(f);
        return rc;
    }
    f->end = 0;
    f->track = -1;
    f->kind = kind_of(path);
    atomic_fetch_add(&opens, 1);
    atomic_fetch_add(&open_now, 1);
    *out = f;
    return KV_OK;
}

int kv_file_open(const char *path, kv_file **out)
{
    return open_fd(path, O_RDONLY, out);
}

int kv_file_create(const char *path, kv_file **out)
{
    int rc = open_fd(path, O_WRONLY | O_CREAT | O_EXCL, out);
    if (rc == KV_OK)
        track_create(*out, path);
    return rc;
}

int kv_file_pread(kv_file *f, uint64_t off, void *buf, size_t len)
{
    if (!f || (len && !buf) || off > (uint64_t)INT64_MAX - len)
        return KV_EINVAL;
    kv_file_fault fault = count_call(f->kind, KV_FILE_READ);
    if (fault == KV_FAULT_EIO || fault == KV_FAULT_ENOSPC)
        return KV_EIO;
    uint8_t *p = buf;
    size_t want = fault == KV_FAULT_SHORT ? len / 2 : len;
    size_t got = 0;
    while (got < want) {
        ssize_t r = pread(f->fd, p + got, want - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return KV_EIO;
        if (r == 0)
            break;
        got += (size_t)r;
    }
    atomic_fetch_add(&read_bytes, got);
    return got == len ? KV_OK : KV_ECORRUPT; /* the file ends before len bytes */
}

int kv_file_map(kv_file *f, uint64_t len, const uint8_t **out)
{
    if (!f || !out || f->map || len == 0 || len > (uint64_t)SIZE_MAX / 2)
        return KV_EINVAL;
    *out = NULL;
    if (sizeof(void *) < 8)
        return KV_EINVAL; /* 32-bit address space: keep to pread */
    void *p = mmap(NULL, (size_t)len, PROT_READ, MAP_SHARED, f->fd, 0);
    if (p == MAP_FAILED)
        return errno == ENOMEM ? KV_ENOMEM : KV_EIO;
    f->map = p;
    f->map_len = len;
    *out = p;
    return KV_OK;
}

int kv_file_view(kv_file *f, uint64_t off, size_t len, const uint8_t **out)
{
    if (!f || !out || !f->map)
        return KV_EINVAL;
    *out = NULL;
    kv_file_fault fault = count_call(f->kind, KV_FILE_READ);
    if (fault == KV_FAULT_EIO || fault == KV_FAULT_ENOSPC)
        return KV_EIO;
    if (fault == KV_FAULT_SHORT || off > f->map_len || len > f->map_len - off)
        return KV_ECORRUPT; /* the file ends before len bytes */
    atomic_fetch_add_explicit(&read_bytes, len, memory_order_relaxed);
    *out = f->map + off;
    return KV_OK;
}

int kv_file_append(kv_file *f, const void *buf, size_t len)
{
    if (!f || (len && !buf))
        return KV_EINVAL;
    kv_file_fault fault = count_call(f->kind, KV_FILE_WRITE);
    if (fault == KV_FAULT_EIO)
        return KV_EIO;
    if (fault == KV_FAULT_ENOSPC)
        return KV_ENOSPC;
    const uint8_t *p = buf;
    size_t want = fault == KV_FAULT_SHORT ? len / 2 : len;
    size_t done = 0;
    track_issue(f, f->end + want);
    while (done < want) {
        ssize_t w = pwrite(f->fd, p + done, want - done, (off_t)(f->end + done));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return kv_errno_status(w < 0 ? errno : EIO);
        done += (size_t)w;
        track_done(f, f->end + done);
    }
    atomic_fetch_add(&write_bytes, done);
    f->end += done;
    return done == len ? KV_OK : KV_EIO;
}

int kv_file_sync(kv_file *f)
{
    if (!f)
        return KV_EINVAL;
    kv_file_fault fault = count_call(f->kind, KV_FILE_SYNC);
    if (fault != KV_FAULT_NONE)
        return fault == KV_FAULT_ENOSPC ? KV_ENOSPC : KV_EIO;
    uint64_t upto = track_sync_begin(f);
    if (fsync(f->fd) != 0)
        return kv_errno_status(errno);
    track_sync_done(f, upto);
    return KV_OK;
}

int kv_file_datasync(kv_file *f)
{
    if (!f)
        return KV_EINVAL;
    kv_file_fault fault = count_call(f->kind, KV_FILE_SYNC);
    if (fault != KV_FAULT_NONE)
        return fault == KV_FAULT_ENOSPC ? KV_ENOSPC : KV_EIO;
    uint64_t upto = track_sync_begin(f);
    if (fdatasync(f->fd) != 0)
        return kv_errno_status(errno);
    track_sync_done(f, upto);
    return KV_OK;
}

int kv_file_size(kv_file *f, uint64_t *size)
{
    struct stat st;
    if (!f || !size)
        return KV_EINVAL;
    if (fstat(f->fd, &st) != 0)
        return KV_EIO;
    *size = (uint64_t)st.st_size;
    return KV_OK;
}

int kv_file_close(kv_file *f)
{
    if (!f)
        return KV_OK;
    if (f->map)
        (void)munmap((void *)(uintptr_t)f->map, (size_t)f->map_len); /* cannot fail here */
    int rc = close(f->fd) == 0 ? KV_OK : KV_EIO;
    atomic_fetch_add(&closes, 1);
    atomic_fetch_sub(&open_now, 1);
    free(f);
    return rc;
}

int kv_file_sync_dir_of(const char *path)
{
    if (!path)
        return KV_EINVAL;
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!slash) {
        strcpy(dir, ".");
    } else {
        size_t n = (size_t)(slash - path);
        if (n >= sizeof dir)
            return KV_EINVAL;
        memcpy(dir, path, n);
        dir[n ? n : 1] = '\0';
        if (!n)
            dir[0] = '/';
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return kv_errno_status(errno);
    kv_file_fault fault = count_call(KV_FILE_KIND_DIR, KV_FILE_SYNC);
    int tracked = track != NULL;
    if (tracked)
        pthread_mutex_lock(&track_mu);
    int rc = fault != KV_FAULT_NONE ? KV_EIO : fsync(fd) == 0 ? KV_OK : kv_errno_status(errno);
    if (tracked) {
        if (rc == KV_OK && track)
            track_dir_synced(dir);
        pthread_mutex_unlock(&track_mu);
    }
    close(fd);
    return rc;
}

int kv_file_rename(const char *from, const char *to)
{
    if (!from || !to)
        return KV_EINVAL;
    int tracked = track != NULL;
    if (tracked)
        pthread_mutex_lock(&track_mu);
    int rc = rename(from, to) == 0 ? KV_OK : kv_errno_status(errno);
    if (tracked) {
        if (rc == KV_OK && track)
            track_renamed(from, to);
        pthread_mutex_unlock(&track_mu);
    }
    if (rc != KV_OK)
        return rc;
    return kv_file_sync_dir_of(to);
}

/* ---- the power cut ---------------------------------------------------------------- */

static uint64_t cut_rnd(uint64_t *s)
{
    uint64_t x = (*s += 0x9E3779B97F4A7C15ull);
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Zeroes bytes [from, to) of path. */
static int zero_range(const char *path, uint64_t from, uint64_t to)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    static const uint8_t zeros[4096];
    int rc = 0;
    while (from < to && rc == 0) {
        size_t n = to - from < sizeof zeros ? (size_t)(to - from) : sizeof zeros;
        ssize_t w = pwrite(fd, zeros, n, (off_t)from);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            rc = -1;
        else
            from += (uint64_t)w;
    }
    return close(fd) == 0 ? rc : -1;
}

int kv_file_power_cut(kv_file_track *t, uint64_t seed, int flags, kv_file_cut_stats *st)
{
    kv_file_cut_stats z = {0};
    if (!t)
        return KV_EINVAL;
    if (!st)
        st = &z;
    pthread_mutex_lock(&track_mu);
    int rc = t->overflow ? KV_EINVAL : KV_OK;
    uint32_t count = t->count < KV_FILE_TRACK_FILES ? t->count : KV_FILE_TRACK_FILES;
    for (uint32_t i = 0; i < count && rc == KV_OK; i++) {
        kv_file_track_entry *e = &t->files[i];
        if (e->durable == -2 || e->cur < 0 || e->cur > 2)
            continue;
        e->name[e->cur][KV_FILE_TRACK_NAME - 1] = '\0';
        const char *path = e->name[e->cur];
        struct stat sb;
        st->files++;
        if (lstat(path, &sb) != 0) {
            st->gone++;
            continue;
        }
        if (e->durable < 0) {
            if (unlink(path) != 0)
                rc = KV_EIO;
            st->removed++;
            continue;
        }
        if (e->durable != e->cur) {
            if (e->durable > 2 || rename(path, e->name[e->durable]) != 0) {
                rc = KV_EIO;
                continue;
            }
            path = e->name[e->durable];
            st->unrenamed++;
        }
        if (e->synced == UINT64_MAX)
            continue;
        uint64_t size = (uint64_t)sb.st_size;
        uint64_t keep = e->synced < size ? e->synced : size;
        uint64_t top = e->issued < size ? e->issued : size;
        if ((flags & KV_CUT_KEEP_TAIL) && top > keep && cut_rnd(&seed) % 2) {
            keep += cut_rnd(&seed) % (top - keep + 1);
            st->tails_kept++;
            if ((flags & KV_CUT_ZERO_TAIL) && keep > e->synced && cut_rnd(&seed) % 2) {
                uint64_t from = e->synced + cut_rnd(&seed) % (keep - e->synced);
                if (zero_range(path, from, keep) != 0)
                    rc = KV_EIO;
                st->zeroed++;
            }
        }
        if (keep < size) {
            if (truncate(path, (off_t)keep) != 0)
                rc = KV_EIO;
            st->truncated++;
            st->bytes_dropped += size - keep;
        }
    }
    t->count = 0;
    t->overflow = 0;
    pthread_mutex_unlock(&track_mu);
    return rc;
}
