/* blob.c - kvtool's commands on one blob file: blob dump, blob verify. */
#include "kvtool.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* The number a blob file's header must hold: --number, else the <n> of
 * its name "<n>.blob" (as the store names them). 0, or -1 with a message. */
static int blob_number(const struct opts *o, uint64_t *out)
{
    const char *path = o->pos[0];
    if (o->number)
        return parse_count("--number", o->number, out);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t digits = strspn(base, "0123456789");
    char *end;
    errno = 0;
    unsigned long long v = digits ? strtoull(base, &end, 10) : 0;
    if (!digits || errno || strcmp(base + digits, ".blob") != 0) {
        fail("%s: the name does not give the file's number (<n>.blob); give it with --number N",
             path);
        return -1;
    }
    *out = v;
    return 0;
}

static int blob_open(const struct opts *o, kv_blob_reader **r)
{
    uint64_t number;
    if (blob_number(o, &number) != 0)
        return -1;
    int rc = kv_blob_reader_open(o->pos[0], number, r);
    if (rc != KV_OK) {
        char err[600];
        table_error(err, sizeof err, o->pos[0], rc);
        fail("%s", err);
        return -1;
    }
    return 0;
}

/* Counts the records kv_blob_scan walks (it checks each one). */
int count_record(void *ctx, const void *key, size_t klen, const void *val, size_t vlen,
                 const kv_blob_ref *ref)
{
    (void)key, (void)klen, (void)val, (void)vlen, (void)ref;
    (*(uint64_t *)ctx)++;
    return 0;
}

/* blob dump: one line per record. */
static int print_record(void *ctx, const void *key, size_t klen, const void *val, size_t vlen,
                        const kv_blob_ref *ref)
{
    (void)ctx, (void)val;
    printf("%" PRIu64 ": ", ref->offset);
    put_str(stdout, key, klen);
    printf(" => %zu bytes\n", vlen);
    return 0;
}

int blob_dump(struct opts *o)
{
    kv_blob_reader *r;
    if (blob_open(o, &r) != 0)
        return EXIT_FAIL;
    int rc = kv_blob_scan(r, print_record, NULL), status = 0;
    if (rc != KV_OK) {
        char err[600];
        table_error(err, sizeof err, o->pos[0], rc);
        fflush(stdout);
        status = fail("%s", err);
    }
    kv_blob_reader_close(r);
    return status;
}

int blob_verify(struct opts *o)
{
    kv_blob_reader *r;
    if (blob_open(o, &r) != 0)
        return EXIT_FAIL;
    uint64_t walked = 0;
    int rc = kv_blob_scan(r, count_record, &walked), status = 0;
    if (rc != KV_OK) {
        char err[600];
        table_error(err, sizeof err, o->pos[0], rc);
        status = fail("%s", err);
    } else {
        kv_blob_file_info fi;
        kv_blob_reader_info(r, &fi);
        printf("%s: ok: blob file %" PRIu64 ", %" PRIu64 " record%s of %" PRIu64
               " bytes in %" PRIu64 " bytes, header, footer and every record's checksum good\n",
               o->pos[0], fi.number, fi.records, PLURAL(fi.records), fi.record_bytes, fi.file_size);
    }
    kv_blob_reader_close(r);
    return status;
}
