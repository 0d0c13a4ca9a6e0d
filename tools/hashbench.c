/* hashbench.c - filterbench --hashes: the hash shoot-out. Which hash, and
 * which way of deriving k probes from it, a Bloom filter can use.
 *
 *   filterbench --hashes [--keys N] [--absent N] [--bits_per_key B]
 *                        [--key_size S] [--key_shape random|sequential|both]
 *                        [--rounds R] [--seed X] [--json]
 *
 * Every contender fills a classic Bloom filter of the same m bits and k
 * probes (m = ceil(N B), k = round(B ln 2)) with the same N keys, then asks
 * it about A keys never added, and is timed doing so. Hashes: FNV-1a 64
 * (fnv1a), MurmurHash3 x64_128 (murmur3), XXH64 (xxh64) and XXH3-64 (xxh3)
 * from libxxhash, and SipHash-2-4 under a secret (siphash: kv's keyed
 * hash, through kv_bloom_hash of a keyed filter). Two ways to get k probes:
 *   - Kirsch-Mitzenmacher double hashing: one hash per key, split into h1
 *     and h2 (murmur3's two 64-bit halves; a 64-bit hash's two 32-bit
 *     halves), probe i at (h1 + i h2) mod m;
 *   - naive rehashing (rows named "naive", with the hash they rehash in
 *     `base`): probe i at hash(key || i) mod m, the key with the byte i
 *     appended, hashed again for every probe.
 * Two shapes of keys: S random bytes ("random"), and the integers 0 .. N-1
 * as 8 little-endian bytes ("sequential"; absent keys continue from N),
 * which differ in a few low bits only and so stress weak hashes.
 * Reported per contender: hash_ns (the hash alone, per key; k hashes for a
 * naive row), add_ns and query_ns (per key, whole operation), the measured
 * false-positive rate over the A absent keys and the expected (1 -
 * e^(-kN/m))^k. Every figure is the median over R rounds; a contender
 * that misses a key it added is a fault (exit 1). */
#include "hashbench.h"

#include <kv/bloom.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "bench_util.h"
#include "hashes.h"

#define MAX_KEY 256
#define MAX_NUM 1e12 /* the largest number an option takes */
#define MAX_ROUNDS 101

enum { H_FNV1A, H_MURMUR3, H_XXH64, H_XXH3, H_SIPHASH, H_COUNT };
static const char *const hash_names[H_COUNT] = {"fnv1a", "murmur3", "xxh64", "xxh3", "siphash"};

enum { SHAPE_RANDOM = 1, SHAPE_SEQUENTIAL = 2 };

struct hopts {
    uint64_t keys, absent, seed;
    double bits_per_key;
    size_t key_size;
    unsigned rounds;
    int json, shapes;
};

/* The keys of one shape: n fixed-size slots of `size` bytes each. */
struct keyset {
    uint8_t *present, *absent;
    size_t size;
    const char *shape;
};

/* The filter every contender fills: classic, m bits, k probes. */
struct bits {
    uint64_t *w;
    uint64_t m;
    unsigned k;
};

static volatile uint64_t sink; /* keeps hashes observable */

/* kv's keyed hash: kv_bloom_hash of a keyed filter (the secret is fixed:
 * this measures speed and spread, not secrecy). */
static kv_bloom *keyed;

/* ---- the hashes ------------------------------------------------------------ */

/* One 64-bit hash of the key (murmur3: its first half). */
static inline uint64_t hash64(int h, const uint8_t *key, size_t len)
{
    switch (h) {
    case H_FNV1A:
        return fnv1a64(key, len);
    case H_MURMUR3: {
        uint64_t o[2];
        murmur3_x64_128(key, len, 0, o);
        return o[0];
    }
    case H_XXH64:
        return XXH64(key, len, 0);
    case H_XXH3:
        return XXH3_64bits(key, len);
    default:
        return kv_bloom_hash(keyed, key, len);
    }
}

/* Kirsch-Mitzenmacher's two hashes of a key: murmur3's two halves, or a
 * 64-bit hash's low and high 32 bits. */
static inline void hash_pair(int h, const uint8_t *key, size_t len, uint64_t *h1, uint64_t *h2)
{
    if (h == H_MURMUR3) {
        uint64_t o[2];
        murmur3_x64_128(key, len, 0, o);
        *h1 = o[0];
        *h2 = o[1];
        return;
    }
    uint64_t x = hash64(h, key, len);
    *h1 = (uint32_t)x;
    *h2 = x >> 32;
}

/* ---- the two schemes ----------------------------------------------------------- */

static inline void set_bit(struct bits *b, uint64_t pos)
{
    b->w[pos >> 6] |= (uint64_t)1 << (pos & 63);
}

static inline int get_bit(const struct bits *b, uint64_t pos)
{
    return (int)(b->w[pos >> 6] >> (pos & 63)) & 1;
}

static inline void km_add(struct bits *b, int h, const uint8_t *key, size_t len)
{
    uint64_t h1, h2;
    hash_pair(h, key, len, &h1, &h2);
    for (unsigned i = 0; i < b->k; i++)
        set_bit(b, (h1 + i * h2) % b->m);
}

static inline int km_query(const struct bits *b, int h, const uint8_t *key, size_t len)
{
    uint64_t h1, h2;
    hash_pair(h, key, len, &h1, &h2);
    for (unsigned i = 0; i < b->k; i++)
        if (!get_bit(b, (h1 + i * h2) % b->m))
            return 0;
    return 1;
}

/* The naive scheme: probe i hashes key || i (one byte), so a key costs k
 * hashes; `buf` has room for the key and the byte. */
static inline void naive_add(struct bits *b, int h, const uint8_t *key, size_t len, uint8_t *buf)
{
    memcpy(buf, key, len);
    for (unsigned i = 0; i < b->k; i++) {
        buf[len] = (uint8_t)i;
        set_bit(b, hash64(h, buf, len + 1) % b->m);
    }
}

static inline int naive_query(const struct bits *b, int h, const uint8_t *key, size_t len,
                              uint8_t *buf)
{
    memcpy(buf, key, len);
    for (unsigned i = 0; i < b->k; i++) {
        buf[len] = (uint8_t)i;
        if (!get_bit(b, hash64(h, buf, len + 1) % b->m))
            return 0;
    }
    return 1;
}

/* ---- one contender ------------------------------------------------------------- */

struct result {
    int hash, naive;
    double t_hash[MAX_ROUNDS], t_add[MAX_ROUNDS], t_query[MAX_ROUNDS];
    uint64_t false_pos, missed;
};

/* One round of a contender: clears the bits, times the hashes alone, the
 * adds and the absent queries, then checks every added key. */
static void run_round(struct result *res, struct bits *b, const struct keyset *ks,
                      const struct hopts *o, unsigned r)
{
    uint8_t buf[MAX_KEY + 1];
    size_t sz = ks->size;
    int h = res->hash;
    memset(b->w, 0, (size_t)((b->m + 63) / 64) * 8);

    uint64_t acc = 0;
    double t0 = now_ns();
    if (res->naive) {
        for (uint64_t i = 0; i < o->absent; i++) {
            memcpy(buf, ks->absent + i * sz, sz);
            for (unsigned j = 0; j < b->k; j++) {
                buf[sz] = (uint8_t)j;
                acc += hash64(h, buf, sz + 1);
            }
        }
    } else {
        for (uint64_t i = 0; i < o->absent; i++) {
            uint64_t h1, h2;
            hash_pair(h, ks->absent + i * sz, sz, &h1, &h2);
            acc += h1 ^ h2;
        }
    }
    double t1 = now_ns();
    sink += acc;
    res->t_hash[r] = (t1 - t0) / (double)o->absent;

    t0 = now_ns();
    if (res->naive)
        for (uint64_t i = 0; i < o->keys; i++)
            naive_add(b, h, ks->present + i * sz, sz, buf);
    else
        for (uint64_t i = 0; i < o->keys; i++)
            km_add(b, h, ks->present + i * sz, sz);
    t1 = now_ns();
    res->t_add[r] = (t1 - t0) / (double)o->keys;

    uint64_t fp = 0;
    t0 = now_ns();
    if (res->naive)
        for (uint64_t i = 0; i < o->absent; i++)
            fp += (uint64_t)naive_query(b, h, ks->absent + i * sz, sz, buf);
    else
        for (uint64_t i = 0; i < o->absent; i++)
            fp += (uint64_t)km_query(b, h, ks->absent + i * sz, sz);
    t1 = now_ns();
    res->t_query[r] = (t1 - t0) / (double)o->absent;
    res->false_pos = fp; /* the same every round: the same keys, the same bits */

    uint64_t missed = 0;
    for (uint64_t i = 0; i < o->keys; i++)
        missed += res->naive ? !naive_query(b, h, ks->present + i * sz, sz, buf)
                             : !km_query(b, h, ks->present + i * sz, sz);
    res->missed += missed;
}

/* ---- keys -------------------------------------------------------------------- */

static int make_keys(struct keyset *ks, int shape, const struct hopts *o)
{
    ks->shape = shape == SHAPE_RANDOM ? "random" : "sequential";
    ks->size = shape == SHAPE_RANDOM ? o->key_size : 8;
    ks->present = malloc((size_t)o->keys * ks->size);
    ks->absent = malloc((size_t)o->absent * ks->size);
    if (!ks->present || !ks->absent)
        return -1;
    for (int stream = 0; stream < 2; stream++) {
        uint8_t *dst = stream ? ks->absent : ks->present;
        uint64_t n = stream ? o->absent : o->keys;
        for (uint64_t i = 0; i < n; i++) {
            uint8_t *key = dst + i * ks->size;
            if (shape == SHAPE_SEQUENTIAL) {
                uint64_t v = stream ? o->keys + i : i; /* absent keys follow the present */
                for (int b = 0; b < 8; b++)
                    key[b] = (uint8_t)(v >> (8 * b));
                continue;
            }
            uint64_t base = splitmix64(o->seed ^ ((uint64_t)stream << 63) ^ i);
            for (size_t off = 0; off < ks->size; off += 8) {
                uint64_t w = splitmix64(base + off);
                size_t c = ks->size - off < 8 ? ks->size - off : 8;
                memcpy(key + off, &w, c);
            }
        }
    }
    return 0;
}

/* ---- report ------------------------------------------------------------------- */

static void report(struct result *res, unsigned nres, const struct keyset *ks,
                   const struct bits *b, const struct hopts *o, double expected)
{
    for (unsigned i = 0; i < nres; i++) {
        struct result *s = &res[i];
        double th = median(s->t_hash, o->rounds), ta = median(s->t_add, o->rounds),
               tq = median(s->t_query, o->rounds);
        double fpr = (double)s->false_pos / (double)o->absent;
        const char *name = s->naive ? "naive" : hash_names[s->hash];
        if (o->json) {
            printf("{\"name\":\"%s\",\"base\":\"%s\",\"scheme\":\"%s\",\"key_shape\":\"%s\","
                   "\"key_size\":%zu,\"keys\":%llu,\"absent\":%llu,\"bits_per_key\":%g,"
                   "\"m\":%llu,\"k\":%u,\"hash_ns\":%.3f,\"add_ns\":%.3f,\"query_ns\":%.3f,"
                   "\"fpr\":%.6f,\"expected_fpr\":%.6f,\"fpr_ratio\":%.3f,\"missed\":%llu,"
                   "\"ok\":%s}\n",
                   name, hash_names[s->hash], s->naive ? "naive" : "kirsch-mitzenmacher",
                   ks->shape, ks->size, (unsigned long long)o->keys,
                   (unsigned long long)o->absent, o->bits_per_key, (unsigned long long)b->m,
                   b->k, th, ta, tq, fpr, expected, fpr / expected,
                   (unsigned long long)s->missed, s->missed ? "false" : "true");
        } else {
            printf("%-11s %-8s %-8s %-6s %8.1f %8.1f %8.1f %9.4f %9.4f %7.2f%s\n", ks->shape,
                   name, hash_names[s->hash], s->naive ? "naive" : "km", th, ta, tq, 100 * fpr,
                   100 * expected, fpr / expected, s->missed ? "  FAILED: missed keys" : "");
        }
    }
}

/* ---- command line --------------------------------------------------------------- */

static void usage(FILE *to)
{
    fprintf(to, "usage: filterbench --hashes [--keys N] [--absent N] [--bits_per_key B]\n"
                "                   [--key_size S] [--key_shape random|sequential|both]\n"
                "                   [--rounds R] [--seed X] [--json]\n"
                "defaults: --keys 1000000 --absent 1000000 --bits_per_key 10 --key_size 16\n"
                "          --key_shape both --rounds 3\n");
}

static int parse(int argc, char **argv, struct hopts *o)
{
    *o = (struct hopts){.keys = 1000000, .absent = 1000000, .seed = 42, .bits_per_key = 10,
                        .key_size = 16, .rounds = 3, .shapes = SHAPE_RANDOM | SHAPE_SEQUENTIAL};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--hashes"))
            continue;
        if (!strcmp(a, "--json")) {
            o->json = 1;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "filterbench: %s needs a value\n", a);
            return -1;
        }
        const char *v = argv[++i];
        uint64_t u;
        if (!strcmp(a, "--keys") && !parse_u64(v, MAX_NUM, &u) && u > 0)
            o->keys = u;
        else if (!strcmp(a, "--absent") && !parse_u64(v, MAX_NUM, &u) && u > 0)
            o->absent = u;
        else if (!strcmp(a, "--seed") && !parse_u64(v, MAX_NUM, &u))
            o->seed = u;
        else if (!strcmp(a, "--key_size") && !parse_u64(v, MAX_NUM, &u) && u >= 1 && u <= MAX_KEY)
            o->key_size = (size_t)u;
        else if (!strcmp(a, "--rounds") && !parse_u64(v, MAX_NUM, &u) && u >= 1 && u <= MAX_ROUNDS)
            o->rounds = (unsigned)u;
        else if (!strcmp(a, "--bits_per_key")) {
            char *end;
            o->bits_per_key = strtod(v, &end);
            if (*end || !(o->bits_per_key >= 1 && o->bits_per_key <= 64)) {
                fprintf(stderr, "filterbench: --hashes: --bits_per_key must be in [1, 64]\n");
                return -1;
            }
        } else if (!strcmp(a, "--key_shape")) {
            if (!strcmp(v, "random"))
                o->shapes = SHAPE_RANDOM;
            else if (!strcmp(v, "sequential"))
                o->shapes = SHAPE_SEQUENTIAL;
            else if (!strcmp(v, "both"))
                o->shapes = SHAPE_RANDOM | SHAPE_SEQUENTIAL;
            else {
                fprintf(stderr, "filterbench: --key_shape is random, sequential or both\n");
                return -1;
            }
        } else {
            fprintf(stderr, "filterbench: --hashes: bad argument: %s %s\n", a, v);
            usage(stderr);
            return -1;
        }
    }
    return 0;
}

int filterbench_hashes(int argc, char **argv)
{
    struct hopts o;
    if (parse(argc, argv, &o) != 0)
        return 2;
    static const uint8_t secret[KV_BLOOM_SECRET_BYTES] = {1, 2, 3, 4, 5, 6, 7, 8,
                                                          9, 10, 11, 12, 13, 14, 15, 16};
    if (kv_bloom_new_keyed(KV_BLOOM_CLASSIC, 64, 10, secret, &keyed) != KV_OK) {
        fprintf(stderr, "filterbench: out of memory\n");
        return 1;
    }
    struct bits b;
    b.m = (uint64_t)ceil((double)o.keys * o.bits_per_key);
    if (b.m < 64)
        b.m = 64;
    double kk = round(o.bits_per_key * log(2.0));
    b.k = kk < 1 ? 1 : kk > 30 ? 30 : (unsigned)kk;
    b.w = malloc((size_t)((b.m + 63) / 64) * 8);
    double expected = pow(1 - exp(-(double)b.k * (double)o.keys / (double)b.m), b.k);
    /* Every hash with Kirsch-Mitzenmacher, then every hash rehashed naively. */
    struct result *res = calloc(2 * H_COUNT, sizeof *res);
    if (!b.w || !res) {
        fprintf(stderr, "filterbench: out of memory\n");
        return 1;
    }
    unsigned nres = 0;
    for (int naive = 0; naive < 2; naive++)
        for (int h = 0; h < H_COUNT; h++)
            res[nres++] = (struct result){.hash = h, .naive = naive};
    if (!o.json) {
        printf("hash shoot-out: classic Bloom filter, m = %llu bits, k = %u, n = %llu keys "
               "(%g bits/key), %llu absent keys, median of %u rounds\n",
               (unsigned long long)b.m, b.k, (unsigned long long)o.keys, o.bits_per_key,
               (unsigned long long)o.absent, o.rounds);
        printf("%-11s %-8s %-8s %-6s %8s %8s %8s %9s %9s %7s\n", "keys", "name", "base", "scheme",
               "hash ns", "add ns", "query ns", "fpr %", "expect %", "ratio");
    }
    int failed = 0;
    for (int shape = SHAPE_RANDOM; shape <= SHAPE_SEQUENTIAL; shape <<= 1) {
        if (!(o.shapes & shape))
            continue;
        struct keyset ks;
        if (make_keys(&ks, shape, &o) != 0) {
            fprintf(stderr, "filterbench: out of memory\n");
            return 1;
        }
        for (unsigned i = 0; i < nres; i++)
            res[i].missed = 0;
        /* The contenders take turns within each round, rotating, so that a
         * noisy machine slows them all alike. */
        for (unsigned r = 0; r < o.rounds; r++)
            for (unsigned i = 0; i < nres; i++)
                run_round(&res[(i + r) % nres], &b, &ks, &o, r);
        report(res, nres, &ks, &b, &o, expected);
        for (unsigned i = 0; i < nres; i++)
            failed |= res[i].missed != 0;
        free(ks.present);
        free(ks.absent);
    }
    free(res);
    free(b.w);
    kv_bloom_free(keyed);
    return failed ? 1 : 0;
}
