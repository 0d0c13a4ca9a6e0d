/* fuzz_ingest.c - libFuzzer target: the input is a file handed to
 * kv_ingest.
 *
 * Each input gets a small database in a new directory (fuzz_tmp.h), with
 * a uint64-add merge operator: keys "k00" .. "k39" put, flushed to a
 * table, and every third of them put again into the memtable, so that an
 * ingested table may overlap both. The input is written to a file beside
 * them and given to kv_ingest (moved when its length is odd, else copied).
 * Checked: every call returns (no crash, leak or sanitizer report); a
 * refusal is KV_ECORRUPT (its text naming the file), KV_EINVAL or
 * KV_ENOMEM, and leaves the database as it was: the same entries in a full
 * scan, before and after a reopen, and no table counted as ingested; an
 * ingest that succeeds leaves a database that scans, compacts and reopens
 * without a crash (a merge operand of the input that is not 8 bytes makes
 * reads of its key fail, which is its right). Seeds: corpus/ingest,
 * written by gen_seeds.c. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <kv/kv.h>

#include "fuzz_tmp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A new database's filter seed comes from getrandom: fixed here, so that a
 * run depends on its input alone (as fuzz_api does). */
ssize_t getrandom(void *buf, size_t len, unsigned int flags)
{
    memset(buf, 0x5a, len);
    (void)flags;
    return (ssize_t)len;
}

static kv_db *open_small(const char *dir)
{
    kv_options o;
    kv_options_init(&o);
    o.create_if_missing = 1;
    o.write_buffer_size = 64 << 10;
    o.target_file_size = 64 << 10;
    o.idle_compaction_ms = 0;
    o.merge_operator = kv_merge_uint64_add();
    kv_db *db = NULL;
    CHECK(kv_open(dir, &o, &db) == KV_OK);
    return db;
}

/* A digest of every entry a scan sees; *rc the scan's status. */
static uint64_t digest(kv_db *db, int *rc)
{
    kv_iter *it;
    CHECK(kv_iter_new(db, NULL, &it) == KV_OK);
    XXH64_state_t *s = XXH64_createState();
    CHECK(s != NULL);
    XXH64_reset(s, 0);
    for (kv_iter_seek_first(it); kv_iter_valid(it); kv_iter_next(it)) {
        size_t kl, vl;
        const void *k = kv_iter_key(it, &kl), *v = kv_iter_value(it, &vl);
        uint64_t lens[2] = {kl, vl};
        XXH64_update(s, lens, sizeof lens);
        XXH64_update(s, k, kl);
        XXH64_update(s, v, vl);
    }
    *rc = kv_iter_status(it);
    kv_iter_free(it);
    uint64_t d = XXH64_digest(s);
    XXH64_freeState(s);
    return d;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int init;
    if (!init) {
        fz_init("ingest");
        init = 1;
    }
    const char *dir = fz_mkdir();
    kv_db *db = open_small(dir);
    char k[8];
    uint64_t one = 1;
    for (int i = 0; i < 40; i++) {
        snprintf(k, sizeof k, "k%02d", i);
        CHECK(kv_put(db, k, 3, &one, sizeof one) == KV_OK);
    }
    CHECK(kv_flush(db) == KV_OK);
    for (int i = 0; i < 40; i += 3) {
        snprintf(k, sizeof k, "k%02d", i);
        CHECK(kv_put(db, k, 3, &one, sizeof one) == KV_OK);
    }
    int rc;
    uint64_t before = digest(db, &rc);
    CHECK(rc == KV_OK);
    char path[512];
    snprintf(path, sizeof path, "%s/input.ingest", dir);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    CHECK(fwrite(data, 1, size, f) == size);
    CHECK(fclose(f) == 0);
    const char *paths[1] = {path};
    rc = kv_ingest(db, paths, 1, (int)(size & 1));
    if (rc != KV_OK) {
        CHECK(rc == KV_ECORRUPT || rc == KV_EINVAL || rc == KV_ENOMEM);
        CHECK(rc != KV_ECORRUPT || strstr(kv_error_text(), "input.ingest") != NULL);
        CHECK(access(path, F_OK) == 0); /* not moved */
        struct kv_stats st;
        CHECK(kv_stats(db, &st) == KV_OK);
        CHECK(st.ingested_tables == 0);
        CHECK(digest(db, &rc) == before && rc == KV_OK);
        CHECK(kv_close(db) == KV_OK);
        db = open_small(dir);
        CHECK(digest(db, &rc) == before && rc == KV_OK);
    } else {
        digest(db, &rc);
        kv_compact_range(db, NULL, 0, NULL, 0);
        digest(db, &rc);
        kv_close(db); /* a failed merge in the compaction may stay its error */
        db = open_small(dir);
        digest(db, &rc);
    }
    kv_close(db);
    fz_done();
    return 0;
}
