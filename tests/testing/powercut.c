/* powercut.c - the power-loss record (testing.h, "power-loss simulation"):
 * what the I/O table (faults.c) tells it of each create, write, sync,
 * rename and directory sync, and the power cut that applies it.
 *
 * track_mu serialises every change of the record within a process; a
 * directory sync holds it across its fsync, so no create or rename slips
 * in between the sync and the marking of what it covered. Whoever reads
 * the record after a SIGKILL may find the killed process mid-update: a
 * new name is written into a free slot before `cur` points at it, and an
 * entry is filled before `count` covers it (the signal fences keep the
 * compiler from reordering those stores). */
#define _POSIX_C_SOURCE 200809L
#include "testing.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static kv_file_track *_Atomic track;
static pthread_mutex_t track_mu = PTHREAD_MUTEX_INITIALIZER;

void kv_file_track_begin(kv_file_track *t)
{
    kvt_install_io();
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

int kvt_track_create(const char *path)
{
    int e = -1;
    if (!track)
        return -1;
    pthread_mutex_lock(&track_mu);
    if (track) {
        track_bury(path);
        e = track_add(path, -1, 0);
    }
    pthread_mutex_unlock(&track_mu);
    return e;
}

void kvt_track_issue(int i, uint64_t end)
{
    if (i < 0 || !track)
        return;
    pthread_mutex_lock(&track_mu);
    kv_file_track_entry *e = &track->files[i];
    if (end > e->issued)
        e->issued = end;
    pthread_mutex_unlock(&track_mu);
}

void kvt_track_done(int i, uint64_t end)
{
    if (i < 0 || !track)
        return;
    pthread_mutex_lock(&track_mu);
    kv_file_track_entry *e = &track->files[i];
    if (end > e->done)
        e->done = end;
    pthread_mutex_unlock(&track_mu);
}

uint64_t kvt_track_sync_begin(int i)
{
    if (i < 0 || !track)
        return UINT64_MAX;
    pthread_mutex_lock(&track_mu);
    uint64_t d = track->files[i].done;
    pthread_mutex_unlock(&track_mu);
    return d;
}

void kvt_track_sync_done(int i, uint64_t upto)
{
    if (i < 0 || !track || upto == UINT64_MAX)
        return;
    pthread_mutex_lock(&track_mu);
    kv_file_track_entry *e = &track->files[i];
    if (e->synced == UINT64_MAX || upto > e->synced)
        e->synced = upto;
    pthread_mutex_unlock(&track_mu);
}

int kvt_track_lock(void)
{
    if (!track)
        return 0;
    pthread_mutex_lock(&track_mu);
    return 1;
}

void kvt_track_unlock(int locked)
{
    if (locked)
        pthread_mutex_unlock(&track_mu);
}

/* Every entry now named in `dir` keeps that name. */
void kvt_track_dir_synced(const char *dir)
{
    char d[PATH_MAX];
    if (!track)
        return;
    for (uint32_t i = 0; i < track->count; i++) {
        kv_file_track_entry *e = &track->files[i];
        if (e->durable == -2 || e->durable == e->cur)
            continue;
        if (dir_part(e->name[e->cur], d, sizeof d) == 0 && strcmp(d, dir) == 0)
            e->durable = e->cur;
    }
}

/* The new name is not yet durable. A file that is not tracked (made before
 * tracking began) gets an entry with its old name durable and nothing to
 * cut. */
void kvt_track_renamed(const char *from, const char *to)
{
    if (!track)
        return;
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
