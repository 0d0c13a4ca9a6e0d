/* blob.c - blob files: values kept apart from the tables, one record each
 * (key, value, checksum), written once in order and read by reference.
 * Layout: doc/blob_format.md; constants: blob_format.h.
 *
 * The writer appends through the file layer (util/file.h), so the tests'
 * fault injection reaches its writes and its sync. The reader keeps one
 * descriptor of its own for its whole life and reads with pread/preadv
 * only: any number of threads read through it at once, and a value goes
 * from the file straight into the caller's buffer in one preadv (the file
 * layer has no scatter read). Nothing read from a file is trusted: every
 * length is checked against the file's records before it is used. */
#define _GNU_SOURCE /* preadv */
#include <kv/sstable.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "blob_format.h"

_Static_assert(KV_BLOB_KEY_MAX == KV_BLOB_MAX_KEY, "sstable.h and blob_format.h agree");
#include "reader.h" /* kv_sst_fail */
#include "util/coding.h"
#include "util/error.h"
#include "util/file.h"

/* Records are appended in pieces of up to OUT_BUF bytes (as a table is,
 * writer.c): a value of OUT_BUF bytes or more goes to the file as it is. */
#define OUT_BUF ((size_t)256 << 10)

/* Written bytes are handed to the disk every WRITEBACK_STEP bytes
 * (kv_file_start_writeback), so that finish's sync waits for the last
 * step only. */
#define WRITEBACK_STEP ((uint64_t)1 << 20)

/* kv_blob_scan reads the file in windows of SCAN_BUF bytes; a record
 * larger than that is read whole into a buffer grown to its size. */
#define SCAN_BUF ((size_t)1 << 20)

/* kv_blob_read's record head and key go to a buffer on the stack up to
 * this size, else to one from the heap. */
#define READ_STACK 256u

_Static_assert(KV_BLOB_RECORD_OVERHEAD == 17, "doc/blob_format.md gives 17");
_Static_assert(KV_BLOB_MAX_VALUE == UINT32_MAX, "a record's vlen is a u32");

/* ---- references ----------------------------------------------------------------- */

size_t kv_blob_ref_encode(const kv_blob_ref *ref, uint8_t *out)
{
    if (!ref || !out)
        return 0;
    size_t n = kv_put_varint(out, ref->number);
    n += kv_put_varint(out + n, ref->offset);
    n += kv_put_varint(out + n, ref->size);
    return n;
}

/* One varint from [*p, end), in its shortest form only: a longer one (a
 * last byte of 0 after others) is a different encoding of the same value,
 * which no writer makes. */
static int get_varint_exact(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    const uint8_t *start = *p;
    if (!kv_get_varint(p, end, v))
        return 0;
    return *p - start == 1 || (*p)[-1] != 0;
}

int kv_blob_ref_decode(const void *p, size_t n, kv_blob_ref *ref)
{
    if (!ref || (n && !p))
        return KV_EINVAL;
    const uint8_t *q = p, *end = q + n;
    kv_blob_ref r;
    if (!n || !get_varint_exact(&q, end, &r.number) || !get_varint_exact(&q, end, &r.offset) ||
        !get_varint_exact(&q, end, &r.size) || q != end || r.size > KV_BLOB_MAX_VALUE)
        return KV_ECORRUPT;
    *ref = r;
    return KV_OK;
}

uint64_t kv_blob_record_size(size_t klen, uint64_t vlen)
{
    uint64_t fixed = KV_BLOB_RECORD_OVERHEAD + (uint64_t)klen;
    if (fixed < klen || vlen > UINT64_MAX - fixed)
        return UINT64_MAX; /* no record is that large; cannot fail */
    return fixed + vlen;
}

/* ---- writer ------------------------------------------------------------------------ */

struct kv_blob_writer {
    char *path;
    kv_file *file;
    uint64_t number;
    uint64_t offset;       /* bytes of the file so far (those in out[] included) */
    uint64_t written_back; /* bytes handed to kv_file_start_writeback */
    uint64_t records, record_bytes;
    uint8_t *out;          /* bytes not yet appended: up to OUT_BUF */
    size_t out_len;
    int rc;                /* the first write error; every later call returns it */
};

static void writer_free(kv_blob_writer *w)
{
    free(w->out);
    free(w->path);
    free(w);
}

/* Appends what out[] holds to the file. */
static int out_flush(kv_blob_writer *w)
{
    if (w->out_len == 0)
        return KV_OK;
    int rc = kv_file_append(w->file, w->out, w->out_len);
    if (rc != KV_OK)
        return rc;
    w->out_len = 0;
    if (w->offset - w->written_back >= WRITEBACK_STEP) {
        kv_file_start_writeback(w->file, w->written_back, w->offset - w->written_back);
        w->written_back = w->offset;
    }
    return KV_OK;
}

/* Appends len bytes through out[]; counts them in offset. */
static int out_write(kv_blob_writer *w, const void *p, size_t len)
{
    int rc = KV_OK;
    if (w->out_len + len > OUT_BUF)
        rc = out_flush(w);
    if (rc == KV_OK && len >= OUT_BUF) {
        w->offset += len; /* so that out_flush's writeback step sees them next time */
        return kv_file_append(w->file, p, len);
    }
    if (rc == KV_OK && len) {
        memcpy(w->out + w->out_len, p, len);
        w->out_len += len;
        w->offset += len;
    }
    return rc;
}

int kv_blob_writer_new(const char *path, uint64_t number, kv_blob_writer **out)
{
    if (!out)
        return kv_error_set(KV_EINVAL, "kv_blob_writer_new: out is NULL");
    *out = NULL;
    if (!path)
        return kv_error_set(KV_EINVAL, "kv_blob_writer_new: path is NULL");
    kv_blob_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(path)) || !(w->out = malloc(OUT_BUF))) {
        if (w)
            writer_free(w);
        return kv_error_set(KV_ENOMEM, "%s: out of memory for a blob writer", path);
    }
    w->number = number;
    int rc = kv_file_create(path, &w->file); /* O_EXCL: EEXIST is KV_EINVAL, with text */
    if (rc != KV_OK) {
        writer_free(w);
        return rc;
    }
    uint8_t h[KV_BLOB_HEADER];
    memcpy(h + KV_BLOB_HEADER_OFF_MAGIC, KV_BLOB_HEADER_MAGIC, 8);
    kv_put32(h + KV_BLOB_HEADER_OFF_VERSION, KV_BLOB_VERSION);
    kv_put32(h + KV_BLOB_HEADER_OFF_FLAGS, 0);
    kv_put64(h + KV_BLOB_HEADER_OFF_NUMBER, number);
    kv_put64(h + KV_BLOB_HEADER_OFF_CHECKSUM, XXH3_64bits(h, KV_BLOB_HEADER_OFF_CHECKSUM));
    (void)out_write(w, h, sizeof h); /* into out[]: cannot fail */
    *out = w;
    return KV_OK;
}

int kv_blob_writer_add(kv_blob_writer *w, const void *key, size_t klen, const void *val,
                       size_t vlen, kv_blob_ref *ref)
{
    if (!w || !ref || (klen && !key) || (vlen && !val))
        return kv_error_set(KV_EINVAL, "kv_blob_writer_add: %s",
                            !w ? "w is NULL" : !ref ? "ref is NULL" : "NULL key or value with a length");
    if (klen > KV_BLOB_MAX_KEY || (uint64_t)vlen > KV_BLOB_MAX_VALUE)
        return kv_error_set(KV_EINVAL, "%s: key of %zu bytes or value of %zu bytes, over a blob "
                            "record's %zu and %llu", w->path, klen, vlen, KV_BLOB_MAX_KEY,
                            (unsigned long long)KV_BLOB_MAX_VALUE);
    if (w->rc != KV_OK)
        return w->rc; /* its text is the failed write's */
    uint8_t head[KV_BLOB_RECORD_HEAD], sum[KV_BLOB_RECORD_CHECKSUM];
    kv_put32(head + KV_BLOB_RECORD_OFF_KLEN, (uint32_t)klen);
    kv_put32(head + KV_BLOB_RECORD_OFF_VLEN, (uint32_t)vlen);
    head[KV_BLOB_RECORD_OFF_COMPRESSION] = KV_BLOB_RAW;
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, head, sizeof head);
    XXH3_64bits_update(&st, key, klen);
    XXH3_64bits_update(&st, val, vlen);
    kv_put64(sum, XXH3_64bits_digest(&st));
    uint64_t start = w->offset;
    int rc = out_write(w, head, sizeof head);
    if (rc == KV_OK)
        rc = out_write(w, key, klen);
    if (rc == KV_OK)
        rc = out_write(w, val, vlen);
    if (rc == KV_OK)
        rc = out_write(w, sum, sizeof sum);
    if (rc != KV_OK)
        return w->rc = rc;
    ref->number = w->number;
    ref->offset = start;
    ref->size = vlen;
    w->records++;
    w->record_bytes += kv_blob_record_size(klen, vlen);
    return KV_OK;
}

uint64_t kv_blob_writer_size(const kv_blob_writer *w)
{
    return w ? w->offset : 0;
}

int kv_blob_writer_finish(kv_blob_writer *w, kv_blob_file_info *info)
{
    if (info)
        memset(info, 0, sizeof *info);
    if (!w)
        return kv_error_set(KV_EINVAL, "kv_blob_writer_finish: w is NULL");
    int rc = w->rc;
    if (rc == KV_OK) {
        uint8_t f[KV_BLOB_FOOTER];
        memcpy(f + KV_BLOB_FOOTER_OFF_MAGIC, KV_BLOB_FOOTER_MAGIC, 8);
        kv_put64(f + KV_BLOB_FOOTER_OFF_RECORDS, w->records);
        kv_put64(f + KV_BLOB_FOOTER_OFF_BYTES, w->record_bytes);
        kv_put64(f + KV_BLOB_FOOTER_OFF_CHECKSUM, XXH3_64bits(f, KV_BLOB_FOOTER_OFF_CHECKSUM));
        rc = out_write(w, f, sizeof f);
    }
    if (rc == KV_OK)
        rc = out_flush(w);
    /* fdatasync: the file is new, so its size changed, and fdatasync
     * writes the size with the data (the directory entry is the caller's
     * to sync). */
    if (rc == KV_OK)
        rc = kv_file_datasync(w->file);
    int crc = kv_file_close(w->file);
    w->file = NULL;
    if (rc == KV_OK)
        rc = crc;
    if (rc != KV_OK) {
        unlink(w->path); /* never a half-written blob file */
    } else if (info) {
        info->number = w->number;
        info->file_size = w->offset;
        info->records = w->records;
        info->record_bytes = w->record_bytes;
    }
    writer_free(w);
    return rc;
}

void kv_blob_writer_abandon(kv_blob_writer *w)
{
    if (!w)
        return;
    kv_file_close(w->file);
    unlink(w->path);
    writer_free(w);
}

/* ---- reader ------------------------------------------------------------------------ */

/* An open blob file. Fixed once kv_blob_reader_open returns: threads share
 * it, and read its descriptor with pread/preadv only (no file position). */
struct kv_blob_reader {
    char *path;
    /* The descriptor; in a pool (kv_blob_reader_open_pooled), -1 while the
     * pool has it closed. Readers pin it (users) before they read it: the
     * pool closes only a descriptor no thread has pinned (pin, evict). */
    _Atomic int fd;
    _Atomic int users;
    _Atomic int used;          /* read since the pool's hand last passed (CLOCK) */
    kv_blob_files *pool;       /* NULL: the descriptor stays open */
    kv_blob_reader *prev, *next; /* [pool->mu] the pool's ring */
    kv_blob_file_info info;
    uint64_t data_end; /* records lie in [KV_BLOB_HEADER, data_end) */
};

/* ---- pool of descriptors ------------------------------------------------------------ */

struct kv_blob_files {
    pthread_mutex_t mu;
    size_t max_open;
    size_t open_now;          /* [mu] descriptors open */
    kv_blob_reader *hand;     /* [mu] the CLOCK's hand on the ring of readers */
};

int kv_blob_files_new(size_t max_open, kv_blob_files **out)
{
    if (!out || !max_open)
        return kv_error_set(KV_EINVAL, "kv_blob_files_new: %s", !out ? "out is NULL" : "max_open is 0");
    kv_blob_files *f = calloc(1, sizeof *f);
    if (!f || pthread_mutex_init(&f->mu, NULL) != 0) {
        free(f);
        return kv_error_set(KV_ENOMEM, "kv_blob_files_new: out of memory");
    }
    f->max_open = max_open;
    *out = f;
    return KV_OK;
}

void kv_blob_files_free(kv_blob_files *f)
{
    if (!f)
        return;
    pthread_mutex_destroy(&f->mu);
    free(f);
}

/* Under mu: closes descriptors, least recently read first (a CLOCK over the
 * ring), until fewer than max_open are open, never one that a thread has
 * pinned nor `keep`'s. The pin protocol (pin below): a reader raises users,
 * then loads fd; the pool swaps fd to -1, then loads users, and puts the
 * descriptor back when users is not 0. Both are sequentially consistent, so
 * one of the two sees the other: either the pool sees the reader's pin and
 * keeps the descriptor, or the reader sees -1 and reopens under mu. When
 * every open descriptor is pinned, the pool stays over budget for now. */
static void make_room(kv_blob_files *f, const kv_blob_reader *keep)
{
    size_t looked = 0, limit = 2 * f->open_now + 2;
    while (f->open_now >= f->max_open && f->hand && looked++ < limit) {
        kv_blob_reader *r = f->hand;
        f->hand = r->next;
        if (r == keep || atomic_load(&r->fd) < 0)
            continue;
        if (atomic_exchange(&r->used, 0))
            continue; /* a second chance */
        int old = atomic_exchange(&r->fd, -1);
        if (old < 0)
            continue;
        if (atomic_load(&r->users) != 0) {
            atomic_store(&r->fd, old); /* in use: put it back */
            continue;
        }
        close(old);
        f->open_now--;
    }
}

static void count_open(kv_blob_files *f)
{
    f->open_now++;
}

/* Opens r's file again (the pool closed it); under mu. The file must be
 * the one opened first: a regular file of the same size. */
static int reopen(kv_blob_reader *r, int *fd)
{
    kv_blob_files *f = r->pool;
    pthread_mutex_lock(&f->mu);
    int rc = KV_OK, d = atomic_load(&r->fd);
    if (d < 0) {
        make_room(f, r);
        struct stat st;
        d = open(r->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (d < 0)
            rc = errno == ENOENT  ? kv_sst_fail(KV_ECORRUPT, r->path, 0, "gone when opened again")
                 : errno == ELOOP ? kv_sst_fail(KV_ECORRUPT, r->path, 0,
                                                "a symbolic link that loops, opened again")
                                  : kv_error_errno(errno, "%s: open (again)", r->path);
        else if (fstat(d, &st) != 0 || !S_ISREG(st.st_mode) ||
                 (uint64_t)st.st_size != r->info.file_size) {
            close(d);
            d = -1;
            rc = kv_sst_fail(KV_ECORRUPT, r->path, 0, "not the file it was when opened again");
        } else {
            atomic_store(&r->fd, d);
            count_open(f);
        }
    }
    pthread_mutex_unlock(&f->mu);
    *fd = d;
    return rc;
}

/* The descriptor to read r with, pinned until unpin. */
static int pin(const kv_blob_reader *cr, int *fd)
{
    kv_blob_reader *r = (kv_blob_reader *)cr; /* the pin counts are not its contents */
    if (!r->pool) {
        *fd = atomic_load_explicit(&r->fd, memory_order_relaxed);
        return KV_OK;
    }
    atomic_fetch_add(&r->users, 1);
    int d = atomic_load(&r->fd);
    if (d < 0) {
        int rc = reopen(r, &d);
        if (rc != KV_OK) {
            atomic_fetch_sub(&r->users, 1);
            return rc;
        }
    }
    atomic_store_explicit(&r->used, 1, memory_order_relaxed);
    *fd = d;
    return KV_OK;
}

static void unpin(const kv_blob_reader *cr)
{
    kv_blob_reader *r = (kv_blob_reader *)cr;
    if (r->pool)
        atomic_fetch_sub(&r->users, 1);
}

/* Reads, with preadv, the n iovecs' bytes (want in all) at off, resuming
 * after a short read (the kernel moves at most about 2 GiB per call, and
 * a signal may cut a read short) and EINTR. KV_OK; KV_ECORRUPT when the
 * file ends first; KV_EIO. *got: the bytes read. */
static int read_vec(const kv_blob_reader *r, struct iovec *iov, int n, uint64_t off, uint64_t want,
                    uint64_t *got)
{
    uint64_t done = 0;
    int fd, rc = pin(r, &fd);
    if (rc != KV_OK) {
        *got = 0;
        return rc;
    }
    while (done < want) {
        ssize_t k = preadv(fd, iov, n, (off_t)(off + done));
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            *got = done;
            kv_error_errno(errno, "%s: read of %llu bytes at offset %llu", r->path,
                           (unsigned long long)(want - done), (unsigned long long)(off + done));
            unpin(r);
            return KV_EIO; /* whatever errno said: the read failed */
        }
        if (k == 0)
            break;
        done += (uint64_t)k;
        size_t adv = (size_t)k;
        while (n > 0 && adv >= iov->iov_len) {
            adv -= iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (uint8_t *)iov->iov_base + adv;
            iov->iov_len -= adv;
        }
    }
    unpin(r);
    *got = done;
    if (done < want)
        return kv_sst_fail(KV_ECORRUPT, r->path, off + done,
                           "the file ends before offset %llu (read %llu of %llu bytes at %llu)",
                           (unsigned long long)(off + want), (unsigned long long)done,
                           (unsigned long long)want, (unsigned long long)off);
    return KV_OK;
}

static int read_at(const kv_blob_reader *r, void *buf, size_t len, uint64_t off)
{
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    uint64_t got;
    return read_vec(r, &iov, 1, off, len, &got);
}

void kv_blob_reader_close(kv_blob_reader *r)
{
    if (!r)
        return;
    kv_blob_files *f = r->pool;
    if (f) {
        pthread_mutex_lock(&f->mu);
        if (r->next == r)
            f->hand = NULL;
        else {
            r->prev->next = r->next;
            r->next->prev = r->prev;
            if (f->hand == r)
                f->hand = r->next;
        }
        if (atomic_load(&r->fd) >= 0)
            f->open_now--;
        pthread_mutex_unlock(&f->mu);
    }
    int fd = atomic_load(&r->fd);
    if (fd >= 0)
        close(fd);
    free(r->path);
    free(r);
}

/* Checks the header and footer (read into h and f) of a file of `size`
 * bytes that should be blob file `number`; fills r->info. */
static int check_ends(kv_blob_reader *r, const uint8_t *h, const uint8_t *f, uint64_t number,
                      uint64_t size)
{
    const char *p = r->path;
    uint64_t foff = size - KV_BLOB_FOOTER;
    if (memcmp(h + KV_BLOB_HEADER_OFF_MAGIC, KV_BLOB_HEADER_MAGIC, 8) != 0)
        return kv_sst_fail(KV_ECORRUPT, p, 0, "not a kv blob file (bad header magic)");
    if (XXH3_64bits(h, KV_BLOB_HEADER_OFF_CHECKSUM) != kv_get64(h + KV_BLOB_HEADER_OFF_CHECKSUM))
        return kv_sst_fail(KV_ECORRUPT, p, 0, "header checksum mismatch");
    if (kv_get32(h + KV_BLOB_HEADER_OFF_VERSION) != KV_BLOB_VERSION ||
        kv_get32(h + KV_BLOB_HEADER_OFF_FLAGS) != 0)
        return kv_sst_fail(KV_ECORRUPT, p, 0, "unknown blob format version %u or flags %#x",
                           kv_get32(h + KV_BLOB_HEADER_OFF_VERSION),
                           kv_get32(h + KV_BLOB_HEADER_OFF_FLAGS));
    if (kv_get64(h + KV_BLOB_HEADER_OFF_NUMBER) != number)
        return kv_sst_fail(KV_ECORRUPT, p, 0, "the header names blob file %llu, not %llu",
                           (unsigned long long)kv_get64(h + KV_BLOB_HEADER_OFF_NUMBER),
                           (unsigned long long)number);
    if (memcmp(f + KV_BLOB_FOOTER_OFF_MAGIC, KV_BLOB_FOOTER_MAGIC, 8) != 0)
        return kv_sst_fail(KV_ECORRUPT, p, foff, "no blob footer at the end (truncated?)");
    if (XXH3_64bits(f, KV_BLOB_FOOTER_OFF_CHECKSUM) != kv_get64(f + KV_BLOB_FOOTER_OFF_CHECKSUM))
        return kv_sst_fail(KV_ECORRUPT, p, foff, "footer checksum mismatch");
    uint64_t records = kv_get64(f + KV_BLOB_FOOTER_OFF_RECORDS);
    uint64_t bytes = kv_get64(f + KV_BLOB_FOOTER_OFF_BYTES);
    /* Every record takes at least KV_BLOB_RECORD_OVERHEAD bytes. */
    if (bytes != foff - KV_BLOB_HEADER || records > bytes / KV_BLOB_RECORD_OVERHEAD ||
        (records == 0) != (bytes == 0))
        return kv_sst_fail(KV_ECORRUPT, p, foff,
                           "footer says %llu records in %llu bytes; the file holds %llu between "
                           "header and footer", (unsigned long long)records,
                           (unsigned long long)bytes, (unsigned long long)(foff - KV_BLOB_HEADER));
    r->info.number = number;
    r->info.file_size = size;
    r->info.records = records;
    r->info.record_bytes = bytes;
    r->data_end = foff;
    return KV_OK;
}

int kv_blob_reader_open(const char *path, uint64_t number, kv_blob_reader **out)
{
    if (!out)
        return kv_error_set(KV_EINVAL, "kv_blob_reader_open: out is NULL");
    *out = NULL;
    if (!path)
        return kv_error_set(KV_EINVAL, "kv_blob_reader_open: path is NULL");
    kv_blob_reader *r = calloc(1, sizeof *r);
    if (!r || !(r->path = strdup(path))) {
        free(r);
        return kv_error_set(KV_ENOMEM, "%s: out of memory opening it", path);
    }
    /* O_NONBLOCK: a FIFO would block the open until a writer came; it is
     * refused below, and the flag cleared for a regular file. */
    int rc = KV_OK, fl;
    struct stat st;
    memset(&st, 0, sizeof st);
    atomic_init(&r->fd, open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (r->fd < 0 && errno == ELOOP) /* a link to itself, or a chain too long: damage, said */
        rc = kv_error_set(KV_ECORRUPT, "%s: open: a symbolic link that loops", path);
    else if (r->fd < 0)
        rc = kv_error_errno(errno, "%s: open", path); /* ENOENT: KV_NOTFOUND */
    if (rc == KV_OK)
        rc = kv_file_check_fd(r->fd, path); /* KV_ECORRUPT, said, when not a regular file */
    if (rc == KV_OK &&
        ((fl = fcntl(r->fd, F_GETFL)) < 0 || fcntl(r->fd, F_SETFL, fl & ~O_NONBLOCK) != 0))
        rc = kv_error_errno(errno, "%s: fcntl (clearing O_NONBLOCK)", path);
    if (rc == KV_OK && fstat(r->fd, &st) != 0)
        rc = kv_error_errno(errno, "%s: fstat", path);
    if (rc == KV_OK && (uint64_t)st.st_size < KV_BLOB_HEADER + KV_BLOB_FOOTER)
        rc = kv_sst_fail(KV_ECORRUPT, path, 0, "file of %llu bytes is too small for a blob file",
                         (unsigned long long)st.st_size);
    if (rc == KV_OK) {
        uint64_t size = (uint64_t)st.st_size;
        uint8_t h[KV_BLOB_HEADER], f[KV_BLOB_FOOTER];
        if ((rc = read_at(r, h, sizeof h, 0)) == KV_OK &&
            (rc = read_at(r, f, sizeof f, size - KV_BLOB_FOOTER)) == KV_OK)
            rc = check_ends(r, h, f, number, size);
    }
    if (rc != KV_OK) {
        kv_blob_reader_close(r);
        return rc;
    }
    *out = r;
    return KV_OK;
}

int kv_blob_reader_open_pooled(const char *path, uint64_t number, kv_blob_files *pool,
                               kv_blob_reader **out)
{
    if (!pool) {
        if (out)
            *out = NULL;
        return kv_error_set(KV_EINVAL, "kv_blob_reader_open_pooled: pool is NULL");
    }
    kv_blob_reader *r;
    int rc = kv_blob_reader_open(path, number, &r);
    if (rc != KV_OK)
        return rc;
    pthread_mutex_lock(&pool->mu);
    make_room(pool, NULL);
    if (pool->hand) {
        r->next = pool->hand;
        r->prev = pool->hand->prev;
        r->prev->next = r;
        pool->hand->prev = r;
    } else {
        r->next = r->prev = r;
        pool->hand = r;
    }
    count_open(pool);
    r->pool = pool;
    pthread_mutex_unlock(&pool->mu);
    *out = r;
    return KV_OK;
}

void kv_blob_reader_info(const kv_blob_reader *r, kv_blob_file_info *out)
{
    if (!out)
        return;
    if (r)
        *out = r->info;
    else
        memset(out, 0, sizeof *out);
}

/* ---- reads ------------------------------------------------------------------------- */

int kv_blob_read(kv_blob_reader *r, const kv_blob_ref *ref, const void *key, size_t klen,
                 void *buf, size_t cap, uint64_t *bytes_read)
{
    if (bytes_read)
        *bytes_read = 0;
    if (!r || !ref || (klen && !key) || (cap && !buf))
        return kv_error_set(KV_EINVAL, "kv_blob_read: %s",
                            !r ? "r is NULL" : !ref ? "ref is NULL"
                            : klen && !key ? "NULL key with a length" : "NULL buf with a capacity");
    if (ref->size > cap)
        return kv_error_set(KV_ERANGE, "%s: value of %llu bytes at offset %llu, buffer of %zu",
                            r->path, (unsigned long long)ref->size,
                            (unsigned long long)ref->offset, cap);
    if (klen > KV_BLOB_MAX_KEY)
        return kv_error_set(KV_EINVAL, "%s: kv_blob_read: key of %zu bytes, over a blob record's %zu",
                            r->path, klen, KV_BLOB_MAX_KEY);
    const char *p = r->path;
    uint64_t off = ref->offset;
    if (ref->number != r->info.number)
        return kv_sst_fail(KV_ECORRUPT, p, off, "reference to blob file %llu, not this one (%llu)",
                           (unsigned long long)ref->number, (unsigned long long)r->info.number);
    /* The record the ref and key describe: wholly inside [header, footer).
     * ref->size <= cap, a size_t, so the sum cannot wrap on a 64-bit system;
     * kv_blob_record_size saturates where it would. */
    uint64_t rec = kv_blob_record_size(klen, ref->size);
    if (off < KV_BLOB_HEADER || off >= r->data_end || rec > r->data_end - off ||
        ref->size > KV_BLOB_MAX_VALUE)
        return kv_sst_fail(KV_ECORRUPT, p, off,
                           "reference to a record of %llu bytes outside the records [%u, %llu)",
                           (unsigned long long)rec, KV_BLOB_HEADER,
                           (unsigned long long)r->data_end);
    uint8_t small[READ_STACK], sum[KV_BLOB_RECORD_CHECKSUM];
    size_t hk = KV_BLOB_RECORD_HEAD + klen;
    uint8_t *head = hk <= sizeof small ? small : malloc(hk);
    if (!head)
        return kv_error_set(KV_ENOMEM, "%s: out of memory reading the record at %llu", p,
                            (unsigned long long)off);
    struct iovec iov[3] = {{.iov_base = head, .iov_len = hk},
                           {.iov_base = buf, .iov_len = (size_t)ref->size},
                           {.iov_base = sum, .iov_len = sizeof sum}};
    uint64_t got;
    int rc = read_vec(r, iov, 3, off, rec, &got);
    if (bytes_read)
        *bytes_read = got;
    if (rc != KV_OK)
        goto out_free;
    uint32_t sk = kv_get32(head + KV_BLOB_RECORD_OFF_KLEN), sv = kv_get32(head + KV_BLOB_RECORD_OFF_VLEN);
    if (sk != klen || sv != ref->size) {
        rc = kv_sst_fail(KV_ECORRUPT, p, off, "record of a %u-byte key and a %u-byte value, not "
                         "the reference's %zu and %llu", sk, sv, klen,
                         (unsigned long long)ref->size);
        goto out_free;
    }
    if (head[KV_BLOB_RECORD_OFF_COMPRESSION] != KV_BLOB_RAW) {
        rc = kv_sst_fail(KV_ECORRUPT, p, off, "unknown compression kind %u",
                         head[KV_BLOB_RECORD_OFF_COMPRESSION]);
        goto out_free;
    }
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, head, hk);
    XXH3_64bits_update(&st, buf, (size_t)ref->size);
    if (XXH3_64bits_digest(&st) != kv_get64(sum)) {
        rc = kv_sst_fail(KV_ECORRUPT, p, off, "record checksum mismatch");
        goto out_free;
    }
    if (klen && memcmp(head + KV_BLOB_RECORD_HEAD, key, klen) != 0)
        rc = kv_sst_fail(KV_ECORRUPT, p, off, "the record holds another key than the reference's");
out_free:
    if (head != small)
        free(head);
    return rc;
}

/* ---- scan -------------------------------------------------------------------------- */

/* A window of the file for kv_blob_scan: buf[0, have) holds the file's
 * bytes [pos, pos + have). */
struct window {
    uint8_t *buf;
    size_t cap, have;
    uint64_t pos;
};

/* Makes the window hold [off, off + n), off >= pos, with n bytes that lie
 * before data_end: keeps what it has of them, grows to n bytes when that is
 * more than it holds, and fills up to its capacity (or data_end). */
static int window_need(const kv_blob_reader *r, struct window *w, uint64_t off, uint64_t n)
{
    if (off + n <= w->pos + w->have)
        return KV_OK;
    if (n > SIZE_MAX)
        return kv_error_set(KV_ENOMEM, "%s: record of %llu bytes at offset %llu: too large "
                            "for memory", r->path, (unsigned long long)n, (unsigned long long)off);
    size_t keep = off < w->pos + w->have ? (size_t)(w->pos + w->have - off) : 0;
    if (keep)
        memmove(w->buf, w->buf + (off - w->pos), keep);
    w->pos = off;
    w->have = keep;
    if (n > w->cap) {
        uint8_t *b = realloc(w->buf, (size_t)n);
        if (!b)
            return kv_error_set(KV_ENOMEM, "%s: out of memory for the record of %llu bytes at "
                                "offset %llu", r->path, (unsigned long long)n,
                                (unsigned long long)off);
        w->buf = b;
        w->cap = (size_t)n;
    }
    uint64_t room = r->data_end - off < w->cap ? r->data_end - off : w->cap;
    size_t more = (size_t)room - keep;
    int rc = read_at(r, w->buf + keep, more, off + keep);
    if (rc == KV_OK)
        w->have += more;
    return rc;
}

int kv_blob_scan(kv_blob_reader *r, kv_blob_visit_fn *fn, void *ctx)
{
    if (!r || !fn)
        return kv_error_set(KV_EINVAL, "kv_blob_scan: %s", !r ? "r is NULL" : "fn is NULL");
    const char *p = r->path;
    struct window w = {.buf = malloc(SCAN_BUF), .cap = SCAN_BUF, .pos = KV_BLOB_HEADER};
    if (!w.buf)
        return kv_error_set(KV_ENOMEM, "%s: out of memory for a scan", p);
    uint64_t off = KV_BLOB_HEADER, count = 0;
    int rc = KV_OK;
    while (rc == KV_OK && off < r->data_end) {
        uint64_t left = r->data_end - off;
        if (left < KV_BLOB_RECORD_OVERHEAD) {
            rc = kv_sst_fail(KV_ECORRUPT, p, off, "%llu bytes before the footer, too few for a "
                             "record", (unsigned long long)left);
            break;
        }
        if ((rc = window_need(r, &w, off, KV_BLOB_RECORD_HEAD)) != KV_OK)
            break;
        const uint8_t *h = w.buf + (off - w.pos);
        uint32_t klen = kv_get32(h + KV_BLOB_RECORD_OFF_KLEN), vlen = kv_get32(h + KV_BLOB_RECORD_OFF_VLEN);
        uint64_t rec = kv_blob_record_size(klen, vlen);
        if (klen > KV_BLOB_MAX_KEY || rec > left) {
            rc = kv_sst_fail(KV_ECORRUPT, p, off, "record of a %u-byte key and a %u-byte value "
                             "passes the footer at %llu", klen, vlen,
                             (unsigned long long)r->data_end);
            break;
        }
        if (h[KV_BLOB_RECORD_OFF_COMPRESSION] != KV_BLOB_RAW) {
            rc = kv_sst_fail(KV_ECORRUPT, p, off, "unknown compression kind %u",
                             h[KV_BLOB_RECORD_OFF_COMPRESSION]);
            break;
        }
        if ((rc = window_need(r, &w, off, rec)) != KV_OK)
            break;
        h = w.buf + (off - w.pos);
        size_t body = (size_t)rec - KV_BLOB_RECORD_CHECKSUM;
        if (XXH3_64bits(h, body) != kv_get64(h + body)) {
            rc = kv_sst_fail(KV_ECORRUPT, p, off, "record checksum mismatch");
            break;
        }
        kv_blob_ref ref = {.number = r->info.number, .offset = off, .size = vlen};
        count++;
        off += rec;
        rc = fn(ctx, h + KV_BLOB_RECORD_HEAD, klen, h + KV_BLOB_RECORD_HEAD + klen, vlen, &ref);
    }
    free(w.buf);
    if (rc == KV_OK && count != r->info.records)
        rc = kv_sst_fail(KV_ECORRUPT, p, r->data_end, "%llu records, the footer says %llu",
                         (unsigned long long)count, (unsigned long long)r->info.records);
    return rc;
}
