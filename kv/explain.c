/* explain.c - kv_explain_get: one Get, step by step, for tools (kvtool db
 * explain). The walk is kv_get's own (kv_db_get_traced in get.c: same hash,
 * same memtables, same tables in the same order, same filter and block
 * lookups, same counters), run with a trace; this file turns the trace into
 * the one block the caller frees: the header struct, then the steps, then
 * the bytes they point to (key ranges, the value). kv_explain_seek does the
 * same for a range query: a real iterator's seek_first, its merge's gate
 * tracing each memtable and table (merge.h). */
#include "db.h"

#include <stdlib.h>
#include <string.h>

#include "merge.h"
#include "order.h"
#include "util/error.h"

/* The result block: header, steps, key ranges, value. */
static kv_explain *explain_block(const struct kv_get_step *steps, size_t n, const void *val,
                                 size_t vlen)
{
    size_t bytes = sizeof(kv_explain) + n * sizeof(kv_explain_step) + vlen + 1;
    for (size_t i = 0; i < n; i++)
        if (steps[i].meta)
            bytes += steps[i].meta->smallest_len + steps[i].meta->largest_len;
    kv_explain *x = calloc(1, bytes);
    if (!x)
        return NULL;
    x->steps = (kv_explain_step *)(x + 1);
    x->nsteps = n;
    uint8_t *q = (uint8_t *)(x->steps + n);
    for (size_t i = 0; i < n; i++) {
        kv_explain_step *s = &x->steps[i];
        *s = steps[i].s;
        const kv_table_meta *m = steps[i].meta;
        if (!m)
            continue;
        if (m->smallest_len)
            memcpy(q, m->smallest, m->smallest_len);
        s->smallest = q;
        s->smallest_len = m->smallest_len;
        q += m->smallest_len;
        if (m->largest_len)
            memcpy(q, m->largest, m->largest_len);
        s->largest = q;
        s->largest_len = m->largest_len;
        q += m->largest_len;
    }
    if (vlen)
        memcpy(q, val, vlen);
    x->value = q;
    x->value_len = vlen;
    return x;
}

int kv_explain_get(kv_db *db, const void *key, size_t klen, kv_explain **out)
{
    if (out)
        *out = NULL;
    if (!db || !out)
        return kv_db_einval(db, "kv_explain_get", "%s is NULL", db ? "out" : "db");
    if (klen && !key)
        return kv_db_einval(db, "kv_explain_get", "NULL key with length %zu", klen);
    if (klen > KV_MAX_KEY_SIZE)
        return kv_db_einval(db, "kv_explain_get", "key of %zu bytes, over KV_MAX_KEY_SIZE (%zu)",
                            klen, KV_MAX_KEY_SIZE);
    unsigned long long mark = kv_error_mark();
    struct kv_get_trace tr = {0};
    void *val = NULL;
    size_t vlen = 0;
    int rc = kv_db_get_traced(db, key, klen, &val, &vlen, &tr);
    int err = KV_OK;
    /* A table that failed is the Get's answer, shown as its last step; an
     * error of the walk itself (out of memory) is this call's. */
    if (rc != KV_OK && rc != KV_NOTFOUND &&
        (!tr.nsteps || tr.steps[tr.nsteps - 1].s.outcome != KV_EXPLAIN_FAILED)) {
        err = rc;
        goto out_free;
    }
    kv_explain *x = explain_block(tr.steps, tr.nsteps, rc == KV_OK ? val : NULL,
                                  rc == KV_OK ? vlen : 0);
    if (!x) {
        err = KV_ENOMEM;
        goto out_free;
    }
    x->result = rc;
    x->hash = tr.hash;
    x->snapshot = tr.snapshot;
    x->live_tables = tr.live_tables;
    if (rc != KV_OK)
        x->value = NULL;
    *out = x;

out_free:
    kv_free(val);
    free(tr.steps);
    kv_version_unref(tr.version);
    return kv_db_fail(db, "kv_explain_get", mark, err);
}

int kv_explain_seek(kv_db *db, const void *lower, size_t llen, const void *upper, size_t ulen,
                    kv_explain **out)
{
    if (out)
        *out = NULL;
    if (!db || !out)
        return kv_db_einval(db, "kv_explain_seek", "%s is NULL", db ? "out" : "db");
    /* A NULL bound is open whatever its length, as for kv_iter_set_bounds. */
    llen = lower ? llen : 0;
    ulen = upper ? ulen : 0;
    if (lower && upper && kv_sst_cmp(db->cmp, lower, llen, upper, ulen) > 0)
        return kv_db_einval(db, "kv_explain_seek", "lower bound above upper bound");
    /* A real iterator, positioned as kv_iter_seek_first positions one: the
     * same gate, counters and block reads, with the trace on. */
    unsigned long long mark = kv_error_mark();
    kv_iter *it;
    int err = kv_iter_new(db, NULL, &it);
    if (err != KV_OK)
        return kv_db_fail(db, "kv_explain_seek", mark, err);
    struct kv_merge_trace tr = {0};
    uint64_t snap = 0;
    size_t live = 0;
    if ((err = kv_iter_set_bounds(it, lower, llen, upper, ulen)) != KV_OK)
        goto out_free;
    kv_iter_seek_first_traced(it, &tr, &snap, &live);
    if ((err = tr.err) != KV_OK || (!kv_iter_valid(it) && (err = kv_iter_status(it)) != KV_OK))
        goto out_free;
    size_t klen = 0;
    const void *key = kv_iter_key(it, &klen);
    kv_explain *x = explain_block(tr.steps, tr.n, key, klen);
    if (!x) {
        err = KV_ENOMEM;
        goto out_free;
    }
    x->result = key ? KV_OK : KV_NOTFOUND;
    /* The prefix filter's hash, where the bounds make a filter prefix
     * (iter.c's rule); else 0. */
    size_t p = db->o.prefix_len;
    x->hash = p && lower && upper && llen >= p && ulen >= p && memcmp(lower, upper, p) == 0
                  ? kv_prefix_hash(db, lower, llen)
                  : 0;
    x->snapshot = snap;
    x->live_tables = live;
    if (!key)
        x->value = NULL;
    *out = x;

out_free:
    free(tr.steps);
    kv_iter_free(it);
    return kv_db_fail(db, "kv_explain_seek", mark, err);
}
