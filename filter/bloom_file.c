/* bloom_file.c - filters in files: kv_bloom_save and kv_bloom_load (the
 * encoding of bloom_codec.c in a file, replaced atomically), and the shared
 * filter of kv_bloom_open_shared, a header page and a bit array in a file
 * that many processes map at once. Both formats byte by byte:
 * doc/filter_format.md; offsets: filter_format.h.
 *
 * The shared file is never seen half made: a creator writes the whole file
 * under a name of its own, syncs it, and only then gives it the shared
 * name with link(2), which fails when the name exists. So of several
 * processes creating one path at once, one link wins and the others open
 * the winner's file; an opener never needs to wait for a "ready" flag.
 * Every field of the header is fixed at creation (and checksummed) except
 * the key counters, which the adds bump. */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* posix_fallocate, pread/pwrite, link under -std=c11 */
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bloom_impl.h"
#include "filter_format.h"
#include "util/coding.h"
#include "util/error.h"
#include "util/file.h"
#include "util/hash.h"

/* ---- save and load ----------------------------------------------------------- */

int kv_bloom_save(const kv_bloom *f, const char *path)
{
    if (!f || !path)
        return kv_error_set(KV_EINVAL, "kv_bloom_save: %s", !f ? "NULL filter" : "NULL path");
    size_t plen = strlen(path);
    if (plen == 0 || plen + 5 > PATH_MAX)
        return kv_error_set(KV_EINVAL, "%s: kv_bloom_save: empty or too long a path", path);
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    void *buf;
    size_t len;
    int rc = kv_bloom_encode(f, &buf, &len);
    if (rc != KV_OK)
        return kv_error_set(rc, "%s: kv_bloom_save: encoding the filter: %s", path,
                            kv_strerror(rc));
    /* A crash during an earlier save may have left the temporary file. */
    if (unlink(tmp) != 0 && errno != ENOENT) {
        rc = kv_error_errno(errno, "%s: removing a leftover temporary file", tmp);
        goto out_free_buf;
    }
    kv_file *fh;
    if ((rc = kv_file_create(tmp, &fh)) != KV_OK)
        goto out_free_buf;
    if ((rc = kv_file_append(fh, buf, len)) != KV_OK || (rc = kv_file_sync(fh)) != KV_OK) {
        kv_file_close(fh);
        goto out_unlink_tmp;
    }
    if ((rc = kv_file_close(fh)) != KV_OK)
        goto out_unlink_tmp;
    if ((rc = kv_file_rename(tmp, path)) == KV_OK)
        goto out_free_buf;
    /* The rename itself may have happened (only the directory sync
     * failed): then tmp is gone and path holds the new filter. */
out_unlink_tmp:
    unlink(tmp);
out_free_buf:
    kv_free(buf);
    return rc;
}

/* kv_bloom_load and kv_bloom_load_keyed (secret non-NULL). */
static int load(const char *path, const uint8_t *secret, kv_bloom **out)
{
    const char *fn = secret ? "kv_bloom_load_keyed" : "kv_bloom_load";
    if (!out)
        return kv_error_set(KV_EINVAL, "%s: NULL out", fn);
    *out = NULL;
    if (!path)
        return kv_error_set(KV_EINVAL, "%s: NULL path", fn);
    kv_file *fh;
    int rc = kv_file_open(path, &fh);
    if (rc != KV_OK)
        return rc;
    uint64_t size;
    uint8_t *buf = NULL;
    if ((rc = kv_file_size(fh, &size)) != KV_OK)
        goto out_close;
    /* No encoding is longer than the largest filter's; a longer file is
     * not one (and is not read into memory to find that out). */
    if (size < KV_BLOOM_FMT_HEADER + KV_BLOOM_FMT_CHECKSUM ||
        size > KV_BLOOM_FMT_HEADER + KV_BLOOM_MAX_BITS / 8 + KV_BLOOM_FMT_CHECKSUM ||
        size > SIZE_MAX) {
        rc = kv_error_set(KV_ECORRUPT, "%s: %llu bytes: not the length of a filter encoding",
                          path, (unsigned long long)size);
        goto out_close;
    }
    if ((rc = kv_file_read_alloc(fh, 0, (size_t)size, &buf, NULL)) != KV_OK)
        goto out_close;
    rc = secret ? kv_bloom_decode_keyed(buf, (size_t)size, secret, out)
                : kv_bloom_decode(buf, (size_t)size, out);
    if (rc == KV_ECORRUPT) {
        kv_error_set(rc, "%s: not a valid filter encoding (damaged, truncated or foreign)", path);
    } else if (rc == KV_EINVAL) {
        /* The decoder's reason: a keyed filter without its secret, an
         * unkeyed one with a secret, or another secret. */
        unsigned kind = buf[KV_BLOOM_FMT_OFF_HASH];
        if (!secret && kind == KV_BLOOM_FMT_HASH_SIPHASH24)
            kv_error_set(rc,
                         "%s: holds a keyed filter (SipHash-2-4): load it with "
                         "kv_bloom_load_keyed and the secret it was made with",
                         path);
        else if (secret && kind != KV_BLOOM_FMT_HASH_SIPHASH24)
            kv_error_set(rc, "%s: holds a filter that is not keyed: load it with kv_bloom_load",
                         path);
        else
            kv_error_set(rc, "%s: the secret is not the one the filter was made with", path);
    } else if (rc != KV_OK) {
        kv_error_set(rc, "%s: decoding the filter: %s", path, kv_strerror(rc));
    }
    free(buf);
out_close:
    kv_file_close(fh);
    return rc;
}

int kv_bloom_load(const char *path, kv_bloom **out)
{
    return load(path, NULL, out);
}

int kv_bloom_load_keyed(const char *path, const uint8_t secret[KV_BLOOM_SECRET_BYTES],
                        kv_bloom **out)
{
    if (!secret) {
        if (out)
            *out = NULL;
        return kv_error_set(KV_EINVAL, "kv_bloom_load_keyed: NULL secret");
    }
    return load(path, secret, out);
}

/* ---- the shared file ------------------------------------------------------------ */

/* The fixed fields of a shared file's header. */
struct shared_header {
    kv_bloom_layout layout;
    unsigned k;
    uint64_t seed, bits, expected_keys, data_len;
    double bits_per_key;
};

/* Bytes of bit array a filter of this layout and m has (bloom_codec.c's
 * rule), or 0 when m is not well formed. */
static uint64_t shared_data_len(unsigned layout, uint64_t m)
{
    if (m == 0 || m > KV_BLOOM_MAX_BITS)
        return 0;
    if (layout == KV_BLOOM_BLOCKED)
        return m % BLOCK_BITS ? 0 : m / 8;
    return (m + 63) / 64 * 8;
}

static void encode_header(uint8_t p[KV_BLOOM_SHM_HEADER], const struct shared_header *h)
{
    memset(p, 0, KV_BLOOM_SHM_HEADER);
    memcpy(p + KV_BLOOM_SHM_OFF_MAGIC, KV_BLOOM_SHM_MAGIC, 4);
    p[KV_BLOOM_SHM_OFF_VERSION] = KV_BLOOM_SHM_VERSION;
    p[KV_BLOOM_SHM_OFF_LAYOUT] = (uint8_t)h->layout;
    p[KV_BLOOM_SHM_OFF_HASH] = KV_BLOOM_FMT_HASH_XXH3_64;
    p[KV_BLOOM_SHM_OFF_K] = (uint8_t)h->k;
    kv_put64(p + KV_BLOOM_SHM_OFF_SEED, h->seed);
    kv_put64(p + KV_BLOOM_SHM_OFF_BITS, h->bits);
    kv_put64(p + KV_BLOOM_SHM_OFF_EXPECTED, h->expected_keys);
    kv_put64(p + KV_BLOOM_SHM_OFF_BPK, kv_f64_bits(h->bits_per_key));
    kv_put64(p + KV_BLOOM_SHM_OFF_DATA_OFF, KV_BLOOM_SHM_HEADER);
    kv_put64(p + KV_BLOOM_SHM_OFF_DATA_LEN, h->data_len);
    kv_put64(p + KV_BLOOM_SHM_OFF_CHECKSUM, XXH3_64bits(p, KV_BLOOM_SHM_OFF_CHECKSUM));
}

/* Whether byte i of the header page is a key counter's (those change). */
static int in_counter(size_t i)
{
    return i >= KV_BLOOM_SHM_OFF_KEYS &&
           i < KV_BLOOM_SHM_OFF_KEYS + KV_BLOOM_SHM_STRIPES * KV_BLOOM_SHM_STRIPE_WORDS * 8 &&
           (i - KV_BLOOM_SHM_OFF_KEYS) % (KV_BLOOM_SHM_STRIPE_WORDS * 8) < 8;
}

/* Checks a header page read from a file of `file_size` bytes and fills *h:
 * KV_OK, or KV_ECORRUPT with the reason in kv_error_text. The checks, in
 * order (doc/filter_format.md): magic, version and hash kind; checksum;
 * layout and k; m and the bit array's offset and length; the file's
 * length; every other byte of the page zero. */
static int parse_header(const char *path, const uint8_t *p, uint64_t file_size,
                        struct shared_header *h)
{
    if (memcmp(p + KV_BLOOM_SHM_OFF_MAGIC, KV_BLOOM_SHM_MAGIC, 4) != 0)
        return kv_error_set(KV_ECORRUPT, "%s: not a shared filter file (bad magic)", path);
    if (p[KV_BLOOM_SHM_OFF_VERSION] != KV_BLOOM_SHM_VERSION ||
        p[KV_BLOOM_SHM_OFF_HASH] != KV_BLOOM_FMT_HASH_XXH3_64)
        return kv_error_set(KV_ECORRUPT, "%s: shared filter of unknown version %u or hash kind %u",
                            path, p[KV_BLOOM_SHM_OFF_VERSION], p[KV_BLOOM_SHM_OFF_HASH]);
    if (XXH3_64bits(p, KV_BLOOM_SHM_OFF_CHECKSUM) != kv_get64(p + KV_BLOOM_SHM_OFF_CHECKSUM))
        return kv_error_set(KV_ECORRUPT, "%s: shared filter header checksum mismatch", path);
    unsigned layout = p[KV_BLOOM_SHM_OFF_LAYOUT], k = p[KV_BLOOM_SHM_OFF_K];
    if (!kv_bloom_layout_ok((kv_bloom_layout)layout) || k < KV_BLOOM_MIN_K || k > KV_BLOOM_MAX_K)
        return kv_error_set(KV_ECORRUPT, "%s: shared filter header: layout %u, k %u", path,
                            layout, k);
    h->layout = (kv_bloom_layout)layout;
    h->k = k;
    h->seed = kv_get64(p + KV_BLOOM_SHM_OFF_SEED);
    h->bits = kv_get64(p + KV_BLOOM_SHM_OFF_BITS);
    h->expected_keys = kv_get64(p + KV_BLOOM_SHM_OFF_EXPECTED);
    h->bits_per_key = kv_bits_f64(kv_get64(p + KV_BLOOM_SHM_OFF_BPK));
    h->data_len = kv_get64(p + KV_BLOOM_SHM_OFF_DATA_LEN);
    uint64_t want = shared_data_len(layout, h->bits);
    if (want == 0 || h->data_len != want ||
        kv_get64(p + KV_BLOOM_SHM_OFF_DATA_OFF) != KV_BLOOM_SHM_HEADER)
        return kv_error_set(KV_ECORRUPT, "%s: shared filter header: %llu bits in %llu bytes at %llu",
                            path, (unsigned long long)h->bits, (unsigned long long)h->data_len,
                            (unsigned long long)kv_get64(p + KV_BLOOM_SHM_OFF_DATA_OFF));
    if (file_size != KV_BLOOM_SHM_HEADER + h->data_len)
        return kv_error_set(KV_ECORRUPT, "%s: shared filter file of %llu bytes, want %llu "
                            "(truncated or extended)", path, (unsigned long long)file_size,
                            (unsigned long long)(KV_BLOOM_SHM_HEADER + h->data_len));
    for (size_t i = KV_BLOOM_SHM_FIELDS; i < KV_BLOOM_SHM_HEADER; i++)
        if (p[i] && !in_counter(i))
            return kv_error_set(KV_ECORRUPT, "%s: shared filter header: byte %zu is not zero",
                                path, i);
    /* The key counters are taken as they are: their sum saturates at
     * 2^64 - 1 (kv_bloom_keys_added), and so does each counter an add
     * bumps (count_mapped). No bound is checked here: adds raise the
     * counters, so a file just under any bound would, after a few adds,
     * be one that kv itself wrote and no longer opened (fuzz_shared found
     * that with a bound of 2^64 - 1 on the sum). */
    return KV_OK;
}

/* Writes all of buf at off (retrying short writes and EINTR); 0 or -1
 * with errno set. */
static int pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
    const uint8_t *p = buf;
    while (len) {
        ssize_t n = pwrite(fd, p, len, off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = EIO;
            return -1;
        }
        p += n;
        len -= (size_t)n;
        off += n;
    }
    return 0;
}

/* Makes a whole shared filter file for `h` under a name of its own and
 * links it as `path`. KV_OK when this call created path; 1 when another
 * process's file got the name first (this one's is removed); else an
 * error. */
static int create_shared(const char *path, const struct shared_header *h)
{
    static _Atomic unsigned serial; /* tells apart two creations in one process */
    char tmp[PATH_MAX];
    int n = snprintf(tmp, sizeof tmp, "%s.%ld.%u.new", path, (long)getpid(),
                     atomic_fetch_add(&serial, 1));
    if (n < 0 || (size_t)n >= sizeof tmp)
        return kv_error_set(KV_EINVAL, "%s: path too long", path);
    int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0)
        return kv_error_errno(errno, "%s: create", tmp);
    int rc = KV_OK;
    uint64_t size = KV_BLOOM_SHM_HEADER + h->data_len;
    /* Reserve every block now: a page the mapping first writes later could
     * otherwise find the disk full, and that is a SIGBUS, not an error.
     * Where the file system cannot reserve, the file is only extended. */
    int e = posix_fallocate(fd, 0, (off_t)size);
    if (e == EOPNOTSUPP || e == EINVAL)
        e = ftruncate(fd, (off_t)size) == 0 ? 0 : errno;
    if (e) {
        rc = kv_error_errno(e, "%s: reserving %llu bytes", tmp, (unsigned long long)size);
        goto out_close;
    }
    uint8_t *page = malloc(KV_BLOOM_SHM_HEADER);
    if (!page) {
        rc = kv_error_set(KV_ENOMEM, "%s: no memory for the header", tmp);
        goto out_close;
    }
    encode_header(page, h);
    if (pwrite_all(fd, page, KV_BLOOM_SHM_HEADER, 0) != 0)
        rc = kv_error_errno(errno, "%s: write of the header", tmp);
    else if (fsync(fd) != 0)
        rc = kv_error_errno(errno, "%s: fsync", tmp);
    free(page);
out_close:
    if (close(fd) != 0 && rc == KV_OK)
        rc = kv_error_errno(errno, "%s: close", tmp);
    if (rc == KV_OK && link(tmp, path) != 0)
        rc = errno == EEXIST ? 1 : kv_error_errno(errno, "%s: link to %s", tmp, path);
    unlink(tmp);
    if (rc == KV_OK)
        rc = kv_file_sync_dir_of(path);
    return rc;
}

/* Checks the open shared file fd (of `path`) against the parameters asked
 * for, maps it and makes its filter. */
static int attach_shared(int fd, const char *path, const struct shared_header *want,
                         kv_bloom **out)
{
    int rc = kv_file_check_fd(fd, path);
    if (rc != KV_OK)
        return rc;
    struct stat st;
    if (fstat(fd, &st) != 0)
        return kv_error_errno(errno, "%s: fstat", path);
    uint64_t size = (uint64_t)st.st_size;
    if (size < KV_BLOOM_SHM_HEADER)
        return kv_error_set(KV_ECORRUPT, "%s: %llu bytes, shorter than a shared filter's "
                            "header (%u)", path, (unsigned long long)size, KV_BLOOM_SHM_HEADER);
    uint8_t *page = malloc(KV_BLOOM_SHM_HEADER);
    if (!page)
        return kv_error_set(KV_ENOMEM, "%s: no memory for the header", path);
    ssize_t got;
    do
        got = pread(fd, page, KV_BLOOM_SHM_HEADER, 0);
    while (got < 0 && errno == EINTR);
    struct shared_header h = {0};
    if (got < 0)
        rc = kv_error_errno(errno, "%s: read of the header", path);
    else if (got < (ssize_t)KV_BLOOM_SHM_HEADER)
        rc = kv_error_set(KV_ECORRUPT, "%s: the header ends early", path);
    else
        rc = parse_header(path, page, size, &h);
    free(page);
    if (rc != KV_OK)
        return rc;
    if (want->expected_keys &&
        (h.layout != want->layout || h.expected_keys != want->expected_keys ||
         kv_f64_bits(h.bits_per_key) != kv_f64_bits(want->bits_per_key) ||
         h.seed != want->seed))
        return kv_error_set(KV_EINVAL, "%s: holds a %s filter for %llu keys at %g bits/key, "
                            "seed %llu; asked for a %s filter for %llu keys at %g bits/key, "
                            "seed %llu", path, h.layout == KV_BLOOM_BLOCKED ? "blocked" : "classic",
                            (unsigned long long)h.expected_keys, h.bits_per_key,
                            (unsigned long long)h.seed,
                            want->layout == KV_BLOOM_BLOCKED ? "blocked" : "classic",
                            (unsigned long long)want->expected_keys, want->bits_per_key,
                            (unsigned long long)want->seed);
    if (size > SIZE_MAX)
        return kv_error_set(KV_ENOMEM, "%s: too large to map", path);
    void *map = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED)
        return kv_error_errno(errno, "%s: mmap of %llu bytes", path, (unsigned long long)size);
    uint8_t *base = map;
    rc = kv_bloom_alloc_mapped(h.layout, h.bits, h.k, h.seed, map, (size_t)size,
                               (_Atomic uint64_t *)(void *)(base + KV_BLOOM_SHM_HEADER),
                               (_Atomic uint64_t *)(void *)(base + KV_BLOOM_SHM_OFF_KEYS), out);
    if (rc != KV_OK) {
        munmap(map, (size_t)size);
        return kv_error_set(rc, "%s: no memory for the filter", path);
    }
    return KV_OK;
}

int kv_bloom_open_shared(const char *path, kv_bloom_layout layout, uint64_t expected_keys,
                         double bits_per_key, uint64_t seed, kv_bloom **out)
{
    if (!out)
        return kv_error_set(KV_EINVAL, "kv_bloom_open_shared: NULL out");
    *out = NULL;
    if (!path || !*path)
        return kv_error_set(KV_EINVAL, "kv_bloom_open_shared: NULL or empty path");
    struct shared_header want = {.layout = layout, .seed = seed,
                                 .expected_keys = expected_keys, .bits_per_key = bits_per_key};
    if (expected_keys) {
        if (kv_bloom_size(layout, expected_keys, bits_per_key, &want.bits, &want.k) != KV_OK)
            return kv_error_set(KV_EINVAL, "%s: kv_bloom_open_shared: bad layout %d or "
                                "bits_per_key %g for %llu keys", path, (int)layout,
                                bits_per_key, (unsigned long long)expected_keys);
        want.data_len = shared_data_len(layout, want.bits);
    }
    /* Open the file, or make it and open it. A creator that loses the race
     * for the name opens the winner's file; the bound only stops a loop
     * with someone who keeps deleting the file. */
    for (int attempt = 0; attempt < 100; attempt++) {
        int fd = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK);
        if (fd >= 0) {
            int rc = attach_shared(fd, path, &want, out);
            close(fd); /* the mapping stays */
            return rc;
        }
        if (errno == EISDIR)
            return kv_error_set(KV_ECORRUPT, "%s: not a regular file (a directory)", path);
        if (errno != ENOENT)
            return kv_error_errno(errno, "%s: open", path);
        /* ENOENT with the name present: a symbolic link whose target is
         * missing. Creating (link(2) onto the name) would fail with EEXIST
         * for ever; say so at once. */
        struct stat ls;
        if (lstat(path, &ls) == 0 && S_ISLNK(ls.st_mode))
            return kv_error_set(KV_EINVAL,
                                "%s: a symbolic link to a file that does not exist "
                                "(a dangling link): create its target or remove the link",
                                path);
        if (!expected_keys)
            return kv_error_set(KV_NOTFOUND, "%s: no shared filter there (expected_keys 0 "
                                "opens an existing one only)", path);
        int rc = create_shared(path, &want);
        if (rc < 0)
            return rc;
    }
    return kv_error_set(KV_EIO, "%s: the file keeps disappearing between create and open", path);
}
