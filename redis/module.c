/* module.c - kv_redis.so: a Redis module that answers RedisBloom's BF.*
 * commands with kv's blocked Bloom filters (chain.h), and the data type
 * that keeps them in Redis's keyspace: RDB, AOF rewrite, DUMP/RESTORE,
 * COPY, DEBUG DIGEST, MEMORY USAGE.
 *
 * Replies, errors and defaults are RedisBloom 2.6's (doc/redis.md lists
 * them); only the filter inside differs. Writes are replicated verbatim
 * when they changed something: a filter's answers depend only on the
 * commands applied to it, so a replica (or an AOF replay) that runs the
 * same commands holds the same bits.
 *
 * The command path is lean: no AutoMemory, no allocation per item. Items
 * are hashed BF_BATCH at a time into a stack array, then the filter probes
 * them with prefetching (kv_bloom_may_contain_batch; adds prefetch a few
 * items ahead), then the replies go out.
 *
 * Memory: the bit arrays are allocated by filter/ (aligned_alloc), not by
 * Redis's allocator, so Redis's used_memory does not count them; MEMORY
 * USAGE and BF.INFO Size do (mem_usage), and INFO kv-bloom gives their
 * total. Before a link is made, Redis's used memory plus every filter's
 * bits plus the link must fit under maxmemory (mem_room). A filter larger
 * than the machine's memory, or a large one that does not fit in the
 * memory free at the time, is refused too, before anything is
 * allocated. */
#define _DEFAULT_SOURCE /* sysconf(_SC_PHYS_PAGES) */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define REDISMODULE_MAIN
#include "redismodule.h"

#include "chain.h"

#define MODULE_NAME "kv-bloom"
#define MODULE_VERSION 1
/* The data type: 9 characters, and the RDB encoding version it writes. */
#define TYPE_NAME "kv-filter"
#define TYPE_ENCVER 1

#define DEFAULT_EXPANSION 2

static RedisModuleType *bf_type;
static double default_error = 0.01;
static long long default_capacity = 100;

static const char *const err_loading = "ERR filter is being loaded (BF.LOADCHUNK)";
static const char *const err_maxmemory =
    "ERR could not create filter: its bits would take memory past maxmemory";

/* A context for reading INFO memory outside a command (bf_mem_room). */
static RedisModuleCtx *info_ctx;

/* bf_mem_room: the bit arrays are allocated by filter/ (aligned_alloc),
 * which Redis's used_memory does not see; so before a link is made, Redis's
 * used memory plus every filter's bits plus the new link must stay within
 * maxmemory (when one is set). Called only when a link is about to be made,
 * never per item. */
static int mem_room(uint64_t bytes)
{
    /* Loading an RDB or AOF, and a replica applying its master's writes,
     * take what they are given (as Redis does with its own keys): refusing
     * there would stop a restart or make the replica differ. */
    if (RedisModule_GetContextFlags(info_ctx) &
        (REDISMODULE_CTX_FLAGS_LOADING | REDISMODULE_CTX_FLAGS_SLAVE))
        return KV_OK;
    RedisModuleServerInfoData *info = RedisModule_GetServerInfo(info_ctx, "memory");
    if (!info)
        return KV_OK;
    int err = 0;
    unsigned long long max = RedisModule_ServerInfoGetFieldUnsigned(info, "maxmemory", &err);
    unsigned long long used = err ? 0
                                  : RedisModule_ServerInfoGetFieldUnsigned(info, "used_memory",
                                                                           &err);
    RedisModule_FreeServerInfo(info_ctx, info);
    if (err || max == 0)
        return KV_OK;
    if (bytes > max || used + bf_filter_bytes > max - bytes)
        return KV_ENOSPC;
    return KV_OK;
}

static const char *create_error(int rc)
{
    return rc == KV_ENOSPC ? err_maxmemory : "ERR could not create filter";
}
static const char *const err_not_found = "ERR not found";

enum lookup { FOUND, MISSING, EMPTY, MISMATCH };

/* What the opened key holds: our filter (FOUND, *out set), nothing, or a
 * value of another type. */
static enum lookup get_chain(RedisModuleKey *key, bf_chain **out)
{
    *out = NULL;
    if (!key)
        return MISSING;
    int type = RedisModule_KeyType(key);
    if (type == REDISMODULE_KEYTYPE_EMPTY)
        return EMPTY;
    if (type != REDISMODULE_KEYTYPE_MODULE || RedisModule_ModuleTypeGetType(key) != bf_type)
        return MISMATCH;
    *out = RedisModule_ModuleTypeGetValue(key);
    return FOUND;
}

/* RedisBloom's error for a key that is not a filter (FOUND: it exists). */
static int reply_lookup(RedisModuleCtx *ctx, enum lookup st)
{
    switch (st) {
    case MISMATCH:
        return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    case FOUND:
        return RedisModule_ReplyWithError(ctx, "ERR item exists");
    default:
        return RedisModule_ReplyWithError(ctx, err_not_found);
    }
}

static int is_resp3(RedisModuleCtx *ctx)
{
    return (RedisModule_GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_RESP3) != 0;
}

/* RESP3 clients get booleans, RESP2 ones 1 and 0, as from RedisBloom. */
static void reply_bool(RedisModuleCtx *ctx, int resp3, int v)
{
    if (resp3)
        RedisModule_ReplyWithBool(ctx, v);
    else
        RedisModule_ReplyWithLongLong(ctx, v);
}

static int arg_is(RedisModuleString *s, const char *word)
{
    size_t n;
    const char *p = RedisModule_StringPtrLen(s, &n);
    return n == strlen(word) && strncasecmp(p, word, n) == 0;
}

static void hash_items(RedisModuleString **items, size_t n, uint64_t *h)
{
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *p = RedisModule_StringPtrLen(items[i], &len);
        h[i] = bf_hash(p, len);
    }
}

/* ---- BF.EXISTS, BF.MEXISTS ----------------------------------------------------- */

static int exists_common(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, int multi)
{
    if (multi ? argc < 3 : argc != 3)
        return RedisModule_WrongArity(ctx);
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ);
    bf_chain *c;
    enum lookup st = get_chain(key, &c);
    if (c && c->load) {
        RedisModule_CloseKey(key);
        return RedisModule_ReplyWithError(ctx, err_loading);
    }
    int resp3 = is_resp3(ctx);
    size_t n = (size_t)argc - 2;
    if (multi)
        RedisModule_ReplyWithArray(ctx, (long)n);
    /* A missing key, or one of another type, holds nothing (RedisBloom). */
    if (st != FOUND) {
        for (size_t i = 0; i < n; i++)
            reply_bool(ctx, resp3, 0);
        RedisModule_CloseKey(key);
        return REDISMODULE_OK;
    }
    uint64_t h[BF_BATCH];
    uint8_t out[BF_BATCH];
    for (size_t at = 0; at < n; at += BF_BATCH) {
        size_t m = n - at < BF_BATCH ? n - at : BF_BATCH;
        hash_items(argv + 2 + at, m, h);
        bf_chain_exists(c, h, m, out);
        for (size_t i = 0; i < m; i++)
            reply_bool(ctx, resp3, out[i]);
    }
    RedisModule_CloseKey(key);
    return REDISMODULE_OK;
}

static int cmd_exists(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    return exists_common(ctx, argv, argc, 0);
}

static int cmd_mexists(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    return exists_common(ctx, argv, argc, 1);
}

/* ---- BF.ADD, BF.MADD, BF.INSERT ------------------------------------------------ */

typedef struct {
    long long capacity;
    double error;
    long long expansion;
    int nonscaling;
    int create; /* 0: NOCREATE */
    int multi;  /* reply with an array */
} insert_opts;

static const char *add_error(int rc)
{
    if (rc == KV_ENOSPC)
        return "ERR problem inserting into filter: a new sub-filter would take memory past "
               "maxmemory";
    return rc == BF_FULL ? "ERR non scaling filter is full" : "ERR problem inserting into filter";
}

static int insert_common(RedisModuleCtx *ctx, RedisModuleString *keyname,
                         RedisModuleString **items, size_t n, const insert_opts *o)
{
    RedisModuleKey *key = RedisModule_OpenKey(ctx, keyname, REDISMODULE_READ | REDISMODULE_WRITE);
    bf_chain *c;
    enum lookup st = get_chain(key, &c);
    int changed = 0;
    if (st == EMPTY && o->create) {
        int rc = bf_chain_new((uint64_t)o->capacity, o->error, (uint64_t)o->expansion,
                              o->nonscaling, &c);
        if (rc != KV_OK) {
            RedisModule_CloseKey(key);
            return RedisModule_ReplyWithError(ctx, create_error(rc));
        }
        RedisModule_ModuleTypeSetValue(key, bf_type, c);
        changed = 1;
    } else if (st != FOUND) {
        RedisModule_CloseKey(key);
        return reply_lookup(ctx, st == MISMATCH ? MISMATCH : MISSING);
    } else if (c->load) {
        RedisModule_CloseKey(key);
        return RedisModule_ReplyWithError(ctx, err_loading);
    }
    int resp3 = is_resp3(ctx);
    uint64_t h[BF_BATCH];
    uint8_t out[BF_BATCH];
    int rc = KV_OK;
    if (n <= BF_BATCH) {
        /* The usual case: every answer is known before the reply starts,
         * so the array gets its exact length. */
        size_t done;
        hash_items(items, n, h);
        rc = bf_chain_add(c, h, n, out, &done);
        if (o->multi)
            RedisModule_ReplyWithArray(ctx, (long)(done + (rc != KV_OK)));
        for (size_t i = 0; i < done; i++) {
            reply_bool(ctx, resp3, out[i]);
            changed |= out[i];
        }
    } else {
        RedisModule_ReplyWithArray(ctx, REDISMODULE_POSTPONED_ARRAY_LEN);
        size_t replied = 0;
        for (size_t at = 0; at < n && rc == KV_OK; at += BF_BATCH) {
            size_t m = n - at < BF_BATCH ? n - at : BF_BATCH, done;
            hash_items(items + at, m, h);
            rc = bf_chain_add(c, h, m, out, &done);
            for (size_t i = 0; i < done; i++) {
                reply_bool(ctx, resp3, out[i]);
                changed |= out[i];
            }
            replied += done;
        }
        RedisModule_ReplySetArrayLength(ctx, (long)(replied + (rc != KV_OK)));
    }
    if (rc != KV_OK)
        RedisModule_ReplyWithError(ctx, add_error(rc));
    if (changed)
        RedisModule_ReplicateVerbatim(ctx);
    RedisModule_CloseKey(key);
    return REDISMODULE_OK;
}

static insert_opts default_opts(int multi)
{
    return (insert_opts){.capacity = default_capacity, .error = default_error,
                         .expansion = DEFAULT_EXPANSION, .nonscaling = 0, .create = 1,
                         .multi = multi};
}

static int cmd_add(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 3)
        return RedisModule_WrongArity(ctx);
    insert_opts o = default_opts(0);
    return insert_common(ctx, argv[1], argv + 2, 1, &o);
}

static int cmd_madd(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc < 3)
        return RedisModule_WrongArity(ctx);
    insert_opts o = default_opts(1);
    return insert_common(ctx, argv[1], argv + 2, (size_t)argc - 2, &o);
}

/* BF.INSERT key [CAPACITY c] [ERROR e] [EXPANSION n] [NOCREATE] [NONSCALING]
 * ITEMS item...: options in any order until ITEMS, checked as RedisBloom
 * checks them (its messages, its order). */
static int cmd_insert(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc < 4)
        return RedisModule_WrongArity(ctx);
    insert_opts o = default_opts(1);
    int items = -1, pos = 2;
    while (pos < argc && items < 0) {
        RedisModuleString *a = argv[pos];
        if (arg_is(a, "ITEMS")) {
            items = ++pos;
        } else if (arg_is(a, "ERROR")) {
            if (++pos == argc)
                return RedisModule_WrongArity(ctx);
            if (RedisModule_StringToDouble(argv[pos++], &o.error) != REDISMODULE_OK)
                return RedisModule_ReplyWithError(ctx, "Bad error rate");
        } else if (arg_is(a, "EXPANSION")) {
            if (++pos == argc)
                return RedisModule_WrongArity(ctx);
            if (RedisModule_StringToLongLong(argv[pos++], &o.expansion) != REDISMODULE_OK)
                return RedisModule_ReplyWithError(ctx, "Bad expansion");
        } else if (arg_is(a, "CAPACITY")) {
            if (++pos == argc)
                return RedisModule_WrongArity(ctx);
            if (RedisModule_StringToLongLong(argv[pos++], &o.capacity) != REDISMODULE_OK)
                return RedisModule_ReplyWithError(ctx, "Bad capacity");
        } else if (arg_is(a, "NOCREATE")) {
            o.create = 0;
            pos++;
        } else if (arg_is(a, "NONSCALING")) {
            o.nonscaling = 1;
            pos++;
        } else {
            return RedisModule_ReplyWithError(ctx, "Unknown argument received");
        }
    }
    if (items < 0 || items == argc)
        return RedisModule_WrongArity(ctx);
    if (!(o.error > 0 && o.error < 1) || o.capacity < 1 || o.expansion < 1)
        return RedisModule_ReplyWithError(ctx, "Bad argument received");
    return insert_common(ctx, argv[1], argv + items, (size_t)(argc - items), &o);
}

/* ---- BF.RESERVE ------------------------------------------------------------------ */

/* BF.RESERVE key error_rate capacity [EXPANSION n] [NONSCALING] */
static int cmd_reserve(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc < 4 || argc > 7)
        return RedisModule_WrongArity(ctx);
    double error;
    if (RedisModule_StringToDouble(argv[2], &error) != REDISMODULE_OK)
        return RedisModule_ReplyWithError(ctx, "ERR bad error rate");
    if (!(error > 0 && error < 1))
        return RedisModule_ReplyWithError(ctx, "ERR (0 < error rate range < 1) ");
    long long capacity;
    if (RedisModule_StringToLongLong(argv[3], &capacity) != REDISMODULE_OK)
        return RedisModule_ReplyWithError(ctx, "ERR bad capacity");
    if (capacity <= 0)
        return RedisModule_ReplyWithError(ctx, "ERR (capacity should be larger than 0)");
    /* The options may come in either order; like RedisBloom, words other
     * than these two are ignored. */
    int nonscaling = 0, ex = -1;
    for (int i = 4; i < argc; i++) {
        if (arg_is(argv[i], "NONSCALING"))
            nonscaling = 1;
        else if (ex < 0 && arg_is(argv[i], "EXPANSION"))
            ex = i;
    }
    long long expansion = DEFAULT_EXPANSION;
    if (ex + 1 == argc)
        return RedisModule_ReplyWithError(ctx, "ERR no expansion");
    if (ex >= 0) {
        if (nonscaling)
            return RedisModule_ReplyWithError(ctx, "Nonscaling filters cannot expand");
        if (RedisModule_StringToLongLong(argv[ex + 1], &expansion) != REDISMODULE_OK)
            return RedisModule_ReplyWithError(ctx, "ERR bad expansion");
        if (expansion < 1)
            return RedisModule_ReplyWithError(ctx, "ERR expansion should be greater or equal to 1");
    }
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE);
    bf_chain *c;
    enum lookup st = get_chain(key, &c);
    if (st != EMPTY) {
        RedisModule_CloseKey(key);
        return reply_lookup(ctx, st);
    }
    int rc = bf_chain_new((uint64_t)capacity, error, (uint64_t)expansion, nonscaling, &c);
    if (rc != KV_OK) {
        RedisModule_CloseKey(key);
        return RedisModule_ReplyWithError(ctx, create_error(rc));
    }
    RedisModule_ModuleTypeSetValue(key, bf_type, c);
    RedisModule_CloseKey(key);
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

/* ---- BF.INFO, BF.CARD -------------------------------------------------------------- */

static void reply_map(RedisModuleCtx *ctx, int resp3, long pairs)
{
    if (resp3)
        RedisModule_ReplyWithMap(ctx, pairs);
    else
        RedisModule_ReplyWithArray(ctx, pairs * 2);
}

static int cmd_info(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 2 && argc != 3)
        return RedisModule_WrongArity(ctx);
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ);
    bf_chain *c;
    enum lookup st = get_chain(key, &c);
    RedisModule_CloseKey(key); /* the value stays: nothing runs meanwhile */
    if (st != FOUND)
        return reply_lookup(ctx, st);
    if (c->load)
        return RedisModule_ReplyWithError(ctx, err_loading);
    static const char *const names[5] = {"Capacity", "Size", "Number of filters",
                                         "Number of items inserted", "Expansion rate"};
    long long v[5] = {(long long)bf_chain_capacity(c), (long long)bf_chain_mem(c),
                      (long long)c->nlinks, (long long)c->items, (long long)c->expansion};
    int resp3 = is_resp3(ctx), from = 0, to = 5;
    if (argc == 3) {
        static const char *const words[5] = {"CAPACITY", "SIZE", "FILTERS", "ITEMS", "EXPANSION"};
        for (from = 0; from < 5 && !arg_is(argv[2], words[from]); from++)
            ;
        if (from == 5)
            return RedisModule_ReplyWithError(ctx, "Invalid information value");
        to = from + 1;
        /* One field: a one-element array in RESP2, a one-pair map in RESP3. */
        if (resp3)
            RedisModule_ReplyWithMap(ctx, 1);
        else
            RedisModule_ReplyWithArray(ctx, 1);
    } else {
        reply_map(ctx, resp3, 5);
    }
    for (int i = from; i < to; i++) {
        if (argc == 2 || resp3)
            RedisModule_ReplyWithSimpleString(ctx, names[i]);
        if (i == 4 && c->nonscaling)
            RedisModule_ReplyWithNull(ctx);
        else
            RedisModule_ReplyWithLongLong(ctx, v[i]);
    }
    return REDISMODULE_OK;
}

static int cmd_card(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 2)
        return RedisModule_WrongArity(ctx);
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ);
    bf_chain *c;
    enum lookup st = get_chain(key, &c);
    RedisModule_CloseKey(key);
    if (st == MISSING || st == EMPTY)
        return RedisModule_ReplyWithLongLong(ctx, 0);
    if (st != FOUND)
        return reply_lookup(ctx, st);
    if (c->load)
        return RedisModule_ReplyWithError(ctx, err_loading);
    return RedisModule_ReplyWithLongLong(ctx, (long long)c->items);
}

/* ---- BF.SCANDUMP, BF.LOADCHUNK ------------------------------------------------------ */

/* SCANDUMP's work, shown by INFO kv-bloom (info_func): bytes of filter
 * memory the last call and the most expensive call read (copied or
 * hashed), and the calls. A data chunk reads its own bytes only; the
 * header hashes the links whose checksum is not kept (the newest). */
static unsigned long long dump_work_last, dump_work_max, dump_calls;

/* BF.SCANDUMP key iterator: iterator 0 gives (1, header); iterator i >= 1
 * the data chunk that starts at byte i - 1 of the data stream and the
 * iterator after it; past the end (0, ""). A data chunk is copied from the
 * one link it lies in: each call costs O(its chunk), never the whole
 * filter. A change to the filter after the header ends the dump (an error:
 * start again), since its chunks would mix two states. */
static int cmd_scandump(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 3)
        return RedisModule_WrongArity(ctx);
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ);
    bf_chain *c;
    enum lookup st = get_chain(key, &c);
    RedisModule_CloseKey(key);
    if (st != FOUND)
        return reply_lookup(ctx, st == MISMATCH ? MISMATCH : MISSING);
    long long iter;
    if (RedisModule_StringToLongLong(argv[2], &iter) != REDISMODULE_OK)
        return RedisModule_ReplyWithError(ctx, "Second argument must be numeric");
    if (c->load)
        return RedisModule_ReplyWithError(ctx, err_loading);
    uint8_t *buf = NULL;
    size_t len = 0;
    long long next = 0;
    int rc = KV_NOTFOUND;
    bf_dump_work = 0;
    if (iter == 0) {
        rc = bf_dump_header(c, &buf, &len);
        next = 1;
    } else if (iter > 0) {
        rc = bf_dump_chunk(c, (uint64_t)iter - 1, BF_CHUNK_MAX, &buf, &len, &next);
    }
    dump_calls++;
    dump_work_last = bf_dump_work;
    if (bf_dump_work > dump_work_max)
        dump_work_max = bf_dump_work;
    if (rc == KV_EBUSY)
        return RedisModule_ReplyWithError(ctx, "ERR the filter changed since this dump's "
                                               "header (iterator 0): start the dump again");
    if (rc != KV_OK && rc != KV_NOTFOUND)
        return RedisModule_ReplyWithError(ctx, "ERR could not dump the filter (out of memory)");
    RedisModule_ReplyWithArray(ctx, 2);
    if (rc == KV_NOTFOUND) {
        RedisModule_ReplyWithLongLong(ctx, 0);
        RedisModule_ReplyWithStringBuffer(ctx, "", 0);
    } else {
        RedisModule_ReplyWithLongLong(ctx, next);
        RedisModule_ReplyWithStringBuffer(ctx, (const char *)buf, len);
    }
    free(buf);
    return REDISMODULE_OK;
}

/* BF.LOADCHUNK key iterator data: iterator 1 with a header makes a new key
 * (which answers nothing until its data has all arrived); the data chunks
 * must then come in order. A chunk that fails its checks deletes the
 * key being loaded: no half-made filter is left behind. */
static int cmd_loadchunk(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 4)
        return RedisModule_WrongArity(ctx);
    long long iter;
    if (RedisModule_StringToLongLong(argv[2], &iter) != REDISMODULE_OK)
        return RedisModule_ReplyWithError(ctx, "ERR Second argument must be numeric");
    size_t len;
    const uint8_t *data = (const uint8_t *)RedisModule_StringPtrLen(argv[3], &len);
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE);
    bf_chain *c;
    enum lookup st = get_chain(key, &c);
    const char *why = NULL;
    if (st == EMPTY && iter == 1) {
        int rc = bf_load_begin(data, len, &c, &why);
        if (rc != KV_OK) {
            RedisModule_CloseKey(key);
            return RedisModule_ReplyWithError(ctx,
                                              rc == KV_ENOMEM || rc == KV_EINVAL || rc == KV_ENOSPC
                                                  ? create_error(rc)
                                                  : why);
        }
        RedisModule_ModuleTypeSetValue(key, bf_type, c);
    } else if (st != FOUND) {
        RedisModule_CloseKey(key);
        return reply_lookup(ctx, st == MISMATCH ? MISMATCH : MISSING);
    } else if (!c->load) {
        /* A complete filter is never overwritten chunk by chunk. */
        RedisModule_CloseKey(key);
        return RedisModule_ReplyWithError(ctx, "ERR received bad data: the filter is complete");
    } else if (bf_load_chunk(c, iter, data, len, &why) != KV_OK) {
        RedisModule_DeleteKey(key);
        RedisModule_CloseKey(key);
        RedisModule_ReplicateVerbatim(ctx); /* the replicas drop it too */
        return RedisModule_ReplyWithError(ctx, why ? why : "ERR could not load the filter");
    }
    RedisModule_CloseKey(key);
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

/* ---- the data type --------------------------------------------------------------------- */

/* RDB value, encoding version 1 (doc/redis.md): the header chunk as a
 * string, the number of data pieces, and each piece as a string (piece i
 * is link i's kv_bloom encoding; a chain being loaded adds the part of the
 * next link received so far). */
static void type_rdb_save(RedisModuleIO *io, void *value)
{
    bf_chain *c = value;
    uint8_t *buf;
    size_t len;
    if (bf_dump_header(c, &buf, &len) != KV_OK) {
        /* Out of memory: nothing sensible to write. A short value makes the
         * RDB fail to load rather than load a wrong filter. */
        RedisModule_LogIOError(io, "warning", "kv_redis: out of memory saving a filter");
        RedisModule_SaveStringBuffer(io, "", 0);
        return;
    }
    RedisModule_SaveStringBuffer(io, (const char *)buf, len);
    free(buf);
    uint32_t n = bf_dump_npieces(c);
    RedisModule_SaveUnsigned(io, n);
    for (uint32_t i = 0; i < n; i++) {
        if (bf_dump_piece(c, i, &buf, &len) != KV_OK) {
            RedisModule_LogIOError(io, "warning", "kv_redis: out of memory saving a filter");
            RedisModule_SaveStringBuffer(io, "", 0);
            continue;
        }
        RedisModule_SaveStringBuffer(io, (const char *)buf, len);
        free(buf);
    }
}

static void *type_rdb_load(RedisModuleIO *io, int encver)
{
    if (encver != TYPE_ENCVER) {
        RedisModule_LogIOError(io, "warning",
                               "kv_redis: a " TYPE_NAME " value of RDB encoding version %d, which "
                               "this module cannot read (it reads version %d): refusing it",
                               encver, TYPE_ENCVER);
        return NULL;
    }
    size_t len;
    char *hdr = RedisModule_LoadStringBuffer(io, &len);
    if (RedisModule_IsIOError(io)) {
        if (hdr)
            RedisModule_Free(hdr);
        return NULL;
    }
    bf_chain *c;
    const char *why;
    int rc = bf_load_begin((const uint8_t *)hdr, len, &c, &why);
    RedisModule_Free(hdr);
    if (rc != KV_OK) {
        RedisModule_LogIOError(io, "warning", "kv_redis: bad " TYPE_NAME " value in RDB: %s", why);
        return NULL;
    }
    uint64_t n = RedisModule_LoadUnsigned(io);
    for (uint64_t i = 0; i < n && !RedisModule_IsIOError(io); i++) {
        char *piece = RedisModule_LoadStringBuffer(io, &len);
        if (RedisModule_IsIOError(io)) {
            if (piece)
                RedisModule_Free(piece);
            break;
        }
        rc = bf_load_feed(c, bf_dump_data_len(c), (const uint8_t *)piece, len, &why);
        RedisModule_Free(piece);
        if (rc != KV_OK) {
            RedisModule_LogIOError(io, "warning", "kv_redis: bad " TYPE_NAME " value in RDB: %s",
                                   rc == KV_ENOMEM ? "out of memory" : why);
            bf_chain_free(c);
            return NULL;
        }
    }
    if (RedisModule_IsIOError(io)) {
        bf_chain_free(c);
        return NULL;
    }
    return c;
}

/* AOF rewrite: the commands that rebuild this exact filter, BF.LOADCHUNK
 * of its header and of its data in chunks (as SCANDUMP gives them). */
static void type_aof_rewrite(RedisModuleIO *aof, RedisModuleString *keyname, void *value)
{
    bf_chain *c = value;
    uint8_t *buf;
    size_t len;
    if (bf_dump_header(c, &buf, &len) != KV_OK) {
        RedisModule_LogIOError(aof, "warning", "kv_redis: out of memory rewriting the AOF");
        return;
    }
    RedisModule_EmitAOF(aof, "BF.LOADCHUNK", "slb", keyname, 1LL, (const char *)buf, len);
    free(buf);
    if (!c->load) {
        /* Chunks served as SCANDUMP serves them: the whole rewrite of a
         * filter is one pass over its bits. */
        long long next = 1;
        for (;;) {
            int rc = bf_dump_chunk(c, (uint64_t)next - 1, BF_CHUNK_MAX, &buf, &len, &next);
            if (rc == KV_NOTFOUND)
                return;
            if (rc != KV_OK) {
                RedisModule_LogIOError(aof, "warning", "kv_redis: out of memory rewriting the AOF");
                return;
            }
            RedisModule_EmitAOF(aof, "BF.LOADCHUNK", "slb", keyname, next, (const char *)buf, len);
            free(buf);
        }
    }
    /* A chain being loaded: the bytes it has received, as they came. */
    uint64_t offset = 0;
    uint32_t n = bf_dump_npieces(c);
    for (uint32_t i = 0; i < n; i++) {
        uint8_t *piece;
        size_t plen;
        if (bf_dump_piece(c, i, &piece, &plen) != KV_OK) {
            RedisModule_LogIOError(aof, "warning", "kv_redis: out of memory rewriting the AOF");
            return;
        }
        for (size_t at = 0; at < plen; at += BF_CHUNK_MAX) {
            size_t m = plen - at < BF_CHUNK_MAX ? plen - at : BF_CHUNK_MAX;
            long long next;
            if (bf_dump_frame(c, offset, piece + at, m, &buf, &len, &next) != KV_OK) {
                free(piece);
                RedisModule_LogIOError(aof, "warning", "kv_redis: out of memory rewriting the AOF");
                return;
            }
            RedisModule_EmitAOF(aof, "BF.LOADCHUNK", "slb", keyname, next, (const char *)buf, len);
            free(buf);
            offset += m;
        }
        free(piece);
    }
}

static void type_free(void *value)
{
    bf_chain_free(value);
}

static size_t type_mem_usage(const void *value)
{
    return bf_chain_mem(value);
}

static void *type_copy(RedisModuleString *fromkey, RedisModuleString *tokey, const void *value)
{
    (void)fromkey;
    (void)tokey;
    bf_chain *c;
    return bf_chain_copy(value, &c) == KV_OK ? c : NULL;
}

/* DEBUG DIGEST: the bytes RDB would hold, so two servers agree exactly
 * when their filters are the same. */
static void type_digest(RedisModuleDigest *md, void *value)
{
    bf_chain *c = value;
    uint8_t *buf;
    size_t len;
    if (bf_dump_header(c, &buf, &len) == KV_OK) {
        RedisModule_DigestAddStringBuffer(md, (const char *)buf, len);
        free(buf);
    }
    uint32_t n = bf_dump_npieces(c);
    for (uint32_t i = 0; i < n; i++) {
        if (bf_dump_piece(c, i, &buf, &len) == KV_OK) {
            RedisModule_DigestAddStringBuffer(md, (const char *)buf, len);
            free(buf);
        }
    }
    RedisModule_DigestEndSequence(md);
}

/* ---- INFO ---------------------------------------------------------------------------------- */

/* INFO kv-bloom (the fields are named kv-bloom_<name>). */
static void info_func(RedisModuleInfoCtx *ctx, int for_crash_report)
{
    (void)for_crash_report;
    RedisModule_InfoAddSection(ctx, NULL);
    RedisModule_InfoAddFieldULongLong(ctx, "filter_bytes", bf_filter_bytes);
    RedisModule_InfoAddFieldULongLong(ctx, "scandump_calls", dump_calls);
    RedisModule_InfoAddFieldULongLong(ctx, "scandump_last_bytes", dump_work_last);
    RedisModule_InfoAddFieldULongLong(ctx, "scandump_max_bytes", dump_work_max);
}

/* ---- loading the module ---------------------------------------------------------------- */

#define BAIL(...)                                                                                  \
    do {                                                                                           \
        RedisModule_Log(ctx, "warning", __VA_ARGS__);                                              \
        return REDISMODULE_ERR;                                                                    \
    } while (0)

/* Load arguments, as RedisBloom's: ERROR_RATE e and INITIAL_SIZE n set the
 * defaults of filters that BF.ADD, BF.MADD and BF.INSERT create. */
static int parse_args(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc % 2)
        BAIL("Invalid number of arguments passed");
    for (int i = 0; i < argc; i += 2) {
        if (arg_is(argv[i], "INITIAL_SIZE")) {
            long long v;
            if (RedisModule_StringToLongLong(argv[i + 1], &v) != REDISMODULE_OK)
                BAIL("Invalid argument for 'INITIAL_SIZE'");
            if (v <= 0)
                BAIL("INITIAL_SIZE must be > 0");
            default_capacity = v;
        } else if (arg_is(argv[i], "ERROR_RATE")) {
            double d;
            if (RedisModule_StringToDouble(argv[i + 1], &d) != REDISMODULE_OK)
                BAIL("Invalid argument for 'ERROR_RATE'");
            if (!(d > 0))
                BAIL("ERROR_RATE must be > 0");
            if (!(d < 1))
                BAIL("ERROR_RATE must be < 1");
            default_error = d;
        } else {
            BAIL("Unrecognized option");
        }
    }
    return REDISMODULE_OK;
}

__attribute__((visibility("default"))) int RedisModule_OnLoad(RedisModuleCtx *ctx,
                                                              RedisModuleString **argv, int argc);

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (RedisModule_Init(ctx, MODULE_NAME, MODULE_VERSION, REDISMODULE_APIVER_1) != REDISMODULE_OK)
        return REDISMODULE_ERR;
    /* RESP3 booleans and maps came with Redis 7.0: an older server lacks
     * these entry points (they would be NULL calls later). */
    if (!RedisModule_ReplyWithBool || !RedisModule_ReplyWithMap || !RedisModule_ReplicateVerbatim)
        BAIL("kv_redis needs Redis 7.0 or later");
    if (parse_args(ctx, argv, argc) != REDISMODULE_OK)
        return REDISMODULE_ERR;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0)
        bf_max_bytes = (uint64_t)pages * (uint64_t)page;
    /* RDB loads check RedisModule_IsIOError instead of letting Redis exit
     * on a short read, so a damaged value is refused with a log line. */
    RedisModule_SetModuleOptions(ctx, REDISMODULE_OPTIONS_HANDLE_IO_ERRORS);

    static const struct {
        const char *name;
        RedisModuleCmdFunc fn;
        const char *flags;
    } cmds[] = {
        {"bf.reserve", cmd_reserve, "write deny-oom"},
        {"bf.add", cmd_add, "write deny-oom"},
        {"bf.madd", cmd_madd, "write deny-oom"},
        {"bf.insert", cmd_insert, "write deny-oom"},
        {"bf.loadchunk", cmd_loadchunk, "write deny-oom"},
        {"bf.exists", cmd_exists, "readonly fast"},
        {"bf.mexists", cmd_mexists, "readonly fast"},
        {"bf.info", cmd_info, "readonly fast"},
        {"bf.card", cmd_card, "readonly fast"},
        {"bf.scandump", cmd_scandump, "readonly fast"},
    };
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
        if (RedisModule_CreateCommand(ctx, cmds[i].name, cmds[i].fn, cmds[i].flags, 1, 1, 1) !=
            REDISMODULE_OK)
            BAIL("kv_redis: could not register %s", cmds[i].name);

    RedisModuleTypeMethods tm = {
        .version = REDISMODULE_TYPE_METHOD_VERSION,
        .rdb_load = type_rdb_load,
        .rdb_save = type_rdb_save,
        .aof_rewrite = type_aof_rewrite,
        .mem_usage = type_mem_usage,
        .digest = type_digest,
        .free = type_free,
        .copy = type_copy,
    };
    bf_type = RedisModule_CreateDataType(ctx, TYPE_NAME, TYPE_ENCVER, &tm);
    if (!bf_type)
        BAIL("kv_redis: could not create the data type " TYPE_NAME);
    if (RedisModule_RegisterInfoFunc(ctx, info_func) != REDISMODULE_OK)
        BAIL("kv_redis: could not register its INFO section");
    if (RedisModule_GetDetachedThreadSafeContext && RedisModule_GetServerInfo) {
        info_ctx = RedisModule_GetDetachedThreadSafeContext(ctx);
        bf_mem_room = mem_room;
    }
    return REDISMODULE_OK;
}
