/* filterbench - speed and accuracy of kv's Bloom filters (after RocksDB's
 * filter_bench).
 *
 *   filterbench [--keys N] [--bits_per_key B] [--layout blocked|classic|both]
 *               [--key_size S] [--threads T] [--rounds R] [--seed X]
 *               [--absent N] [--json] [--baseline libbloom]
 *   filterbench --mixed ...    threads adding and querying one filter (filterbench_mixed.c)
 *   filterbench --hashes ...   the hash shoot-out (hashbench.c)
 *   filterbench --range ...    the range filter over empty ranges (filterbench_range.c)
 *
 * For each layout it builds a filter of N keys, then times adds, queries of
 * present keys, queries of absent keys, and batched queries; it reports the
 * measured false-positive rate over the absent keys next to the expected
 * one. Each figure is the median over R rounds, and the layouts (and the
 * libbloom baseline, when built with -DKV_BENCH_LIBBLOOM=ON) take turns
 * within every round, so that a noisy machine slows them all alike.
 *
 * Keys are S random bytes from splitmix64, generated before any timing (as
 * RocksDB's filter_bench does), so that the timings hold the filter's work
 * and not the generator's: present keys come from one stream, absent keys
 * from another, so no absent key was added (two random 16-byte keys collide
 * with probability 2^-128).
 * With --threads T > 1, adds are also timed on T threads at once, two ways,
 * each filling one filter with the N keys:
 *   - partitioned: thread t adds the keys of part t of the filter
 *     (kv_bloom_partition), as a parallel build would hand them out; no two
 *     threads write one cache line, and each owns its regions, so adds stay
 *     plain stores. Reported as add_ns_mt and add_scaling = add_ns /
 *     add_ns_mt (the throughput ratio to one thread).
 *   - interleaved: thread t adds keys [tN/T, (t+1)N/T), which spread over the
 *     whole filter; the threads' adds are shared ones (a lock per block, an
 *     atomic OR per classic bit) and the lines they write move between
 *     cores. Reported as add_ns_mt_interleaved and add_scaling_interleaved.
 * A classic filter is one region: its parts only split the keys evenly.
 * Each thread is pinned to a CPU of its own (as far as there are CPUs), and
 * the clock starts once all of them are running.
 *
 * --kinds [--fpr P] compares the kinds of filter instead, each sized for a
 * target FPR P (default 0.01): a blocked Bloom filter for N keys, a
 * counting filter for N keys, a scalable filter started at N keys (one
 * stage) and at N/100 keys (grown 100x to N, seven stages), and a rotating
 * filter of 4 generations of N/4 keys (the window holds all N). It times
 * adds, queries of present and absent keys, and (counting) removes of all
 * N keys, and reports bytes per key and the measured FPR beside the target
 * and the filter's expected FPR (see run_kinds).
 *
 *   filterbench --mixed [--threads T] [--ops N] ... [--json]
 *
 * times T threads doing 50% adds and 50% queries on one filter, lock-free
 * against the same filter behind a mutex and behind a read-write lock
 * (filterbench_mixed.c). */
#include <kv/bloom.h>
#include <kv/counting_bloom.h>
#include <kv/rotating_bloom.h>
#include <kv/scalable_bloom.h>

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef KV_WITH_LIBBLOOM
#include <bloom.h>
#endif

#include "bench_util.h"
#include "filterbench_mixed.h"
#include "filterbench_range.h"
#include "hashbench.h"

#define MAX_KEY 256
#define MAX_NUM 1e15 /* the largest whole number an option takes */
#define MAX_ROUNDS 101
#define BATCH 1024

struct options {
    uint64_t keys, absent, seed;
    double bits_per_key;
    int layouts[2], nlayouts;
    size_t key_size;
    unsigned threads, rounds;
    int json, libbloom;
    int kinds;  /* --kinds: the kinds of filter (run_kinds) */
    double fpr; /* --fpr: their target FPR */
};

/* ---- keys ------------------------------------------------------------------ */

/* Key i of a stream: stream 0 holds the present keys, stream 1 the absent. */
static inline void make_key(uint64_t seed, int stream, uint64_t i, uint8_t *key, size_t size)
{
    uint64_t base = splitmix64(seed ^ ((uint64_t)stream << 63) ^ i);
    for (size_t off = 0; off < size; off += 8) {
        uint64_t w = splitmix64(base + off);
        size_t n = size - off < 8 ? size - off : 8;
        memcpy(key + off, &w, n);
    }
}

/* ---- what is measured ------------------------------------------------------ */

enum { M_ADD, M_ADD_MT, M_ADD_MIX, M_PRESENT, M_ABSENT, M_HASH_SINGLE, M_BATCH, M_COUNT };

/* One contender: a kv layout, or libbloom (layout -1). */
struct subject {
    const char *name;
    int layout;
    double t[M_COUNT][MAX_ROUNDS];
    uint64_t false_pos, bytes;
    unsigned k;
    double expected_fpr;
    int failed;
    uint8_t *part_keys[64]; /* --threads: thread t's keys, part_n[t] of them */
    uint64_t part_n[64];
};

static volatile uint64_t sink; /* keeps results observable */

/* The generated keys: key i of a set is at keys + i * key_size. */
static uint8_t *present_keys, *absent_keys;

static inline const uint8_t *pkey(const struct options *o, uint64_t i)
{
    return present_keys + i * o->key_size;
}

static inline const uint8_t *akey(const struct options *o, uint64_t i)
{
    return absent_keys + i * o->key_size;
}

static uint8_t *gen_keys(const struct options *o, int stream, uint64_t n)
{
    uint8_t *k = malloc(n * o->key_size);
    for (uint64_t i = 0; k && i < n; i++)
        make_key(o->seed, stream, i, k + i * o->key_size, o->key_size);
    return k;
}

/* The threads of one timed fill start together: each says it is ready and
 * waits for go, which the timer sets once all are (so thread start-up is
 * not timed, nor a thread that has not started yet). */
struct start_gate {
    _Atomic unsigned ready;
    _Atomic int go;
};

struct add_job {
    kv_bloom *f;
    const struct options *o;
    const uint8_t *keys; /* n keys of o->key_size bytes */
    uint64_t n;
    struct start_gate *gate; /* NULL: start at once */
};

/* The timed loops keep what they use in locals, so that the compiler need
 * not reload it from memory around every call: the loop's own cost, paid
 * alike by every contender, stays a few instructions. */
static void *add_keys(void *arg)
{
    const struct add_job *j = arg;
    if (j->gate) {
        atomic_fetch_add(&j->gate->ready, 1);
        while (!atomic_load_explicit(&j->gate->go, memory_order_acquire))
            ;
    }
    kv_bloom *f = j->f;
    size_t size = j->o->key_size;
    const uint8_t *end = j->keys + j->n * size;
    for (const uint8_t *k = j->keys; k < end; k += size)
        kv_bloom_add(f, k, size);
    return NULL;
}

/* How many of the n keys f answers "maybe" for. */
static uint64_t query_keys(const kv_bloom *f, const uint8_t *keys, uint64_t n, size_t size)
{
    uint64_t hits = 0;
    for (const uint8_t *k = keys, *end = keys + n * size; k < end; k += size)
        hits += (uint64_t)kv_bloom_may_contain(f, k, size);
    return hits;
}

/* Runs the jobs, each on a thread of its own pinned to a CPU of its own
 * (one job: on this thread); returns the wall-clock ns from the moment all
 * have started, or -1. */
static double timed_adds(struct add_job *jobs, unsigned threads)
{
    if (threads == 1) {
        double t0 = now_ns();
        add_keys(&jobs[0]);
        return now_ns() - t0;
    }
    pthread_t tid[64];
    struct start_gate gate;
    atomic_init(&gate.ready, 0);
    atomic_init(&gate.go, 0);
    unsigned started = 0;
    for (; started < threads; started++) {
        pthread_attr_t attr;
        pin_attr(&attr, started);
        jobs[started].gate = &gate;
        int rc = pthread_create(&tid[started], &attr, add_keys, &jobs[started]);
        pthread_attr_destroy(&attr);
        if (rc != 0)
            break;
    }
    while (atomic_load(&gate.ready) < started)
        sched_yield(); /* this thread may share a CPU with one of them */
    double t0 = now_ns();
    atomic_store_explicit(&gate.go, 1, memory_order_release);
    for (unsigned i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    return started == threads ? now_ns() - t0 : -1;
}

static int new_filter(const struct subject *s, const struct options *o, kv_bloom **f)
{
    int rc = kv_bloom_new((kv_bloom_layout)s->layout, o->keys, o->bits_per_key, o->seed, f);
    if (rc != KV_OK)
        fprintf(stderr, "filterbench: kv_bloom_new: %s\n", kv_strerror(rc));
    return rc;
}

/* Hands the present keys out to o->threads threads by the part of f they
 * fall in, keeping their order: s->part_keys. 0, or -1 when out of memory. */
static int split_keys(struct subject *s, const struct options *o, const kv_bloom *f)
{
    unsigned T = o->threads;
    for (unsigned t = 0; t < T; t++)
        s->part_n[t] = 0;
    unsigned *part = malloc((o->keys ? o->keys : 1) * sizeof *part);
    if (!part)
        return -1;
    for (uint64_t i = 0; i < o->keys; i++) {
        part[i] = kv_bloom_partition(f, kv_bloom_hash(f, pkey(o, i), o->key_size), T);
        s->part_n[part[i]]++;
    }
    int rc = 0;
    for (unsigned t = 0; t < T; t++)
        if (!(s->part_keys[t] = malloc(s->part_n[t] * o->key_size + 1)))
            rc = -1;
    uint64_t fill[64] = {0};
    for (uint64_t i = 0; rc == 0 && i < o->keys; i++)
        memcpy(s->part_keys[part[i]] + fill[part[i]]++ * o->key_size, pkey(o, i), o->key_size);
    free(part);
    return rc;
}

/* Times T threads filling a new filter with all present keys: by part
 * (partitioned) or by index range (interleaved). Checks that no key and no
 * count was lost. Returns ns per key, or -1. */
static double threaded_adds(struct subject *s, const struct options *o, int partitioned)
{
    kv_bloom *f;
    if (new_filter(s, o, &f) != KV_OK)
        return -1;
    unsigned T = o->threads;
    if (partitioned && !s->part_keys[0] && split_keys(s, o, f) != 0) {
        fprintf(stderr, "filterbench: out of memory\n");
        kv_bloom_free(f);
        return -1;
    }
    struct add_job jobs[64];
    for (unsigned t = 0; t < T; t++) {
        uint64_t from = o->keys * t / T, to = o->keys * (t + 1) / T;
        jobs[t] = partitioned ? (struct add_job){f, o, s->part_keys[t], s->part_n[t], NULL}
                              : (struct add_job){f, o, pkey(o, from), to - from, NULL};
    }
    double t = timed_adds(jobs, T);
    kv_bloom_info info;
    kv_bloom_stats(f, &info);
    if (t < 0 || info.keys_added != o->keys) {
        fprintf(stderr, "filterbench: %s: multi-threaded adds lost count (%llu of %llu)\n",
                s->name, (unsigned long long)info.keys_added, (unsigned long long)o->keys);
        s->failed = 1;
    }
    uint64_t hits = query_keys(f, present_keys, o->keys, o->key_size); /* every thread's */
    if (hits != o->keys) {
        fprintf(stderr, "filterbench: %s: %llu keys lost by concurrent adds\n", s->name,
                (unsigned long long)(o->keys - hits));
        s->failed = 1;
    }
    kv_bloom_free(f);
    return t < 0 ? -1 : t / (double)o->keys;
}

/* One round for a kv layout. `hashes` holds the hashes of the first `nh`
 * absent keys, for the single-vs-batch comparison. */
static int round_kv(struct subject *s, const struct options *o, unsigned r, uint64_t *hashes,
                    size_t nh, uint8_t *answers)
{
    kv_bloom *f;
    if (new_filter(s, o, &f) != KV_OK)
        return -1;
    double n = (double)o->keys, na = (double)o->absent;

    struct add_job all = {f, o, present_keys, o->keys, NULL};
    s->t[M_ADD][r] = timed_adds(&all, 1) / n;

    double t0 = now_ns();
    uint64_t hits = query_keys(f, present_keys, o->keys, o->key_size);
    s->t[M_PRESENT][r] = (now_ns() - t0) / n;
    if (hits != o->keys) {
        fprintf(stderr, "filterbench: %s: %llu false negatives\n", s->name,
                (unsigned long long)(o->keys - hits));
        s->failed = 1;
    }

    t0 = now_ns();
    hits = query_keys(f, absent_keys, o->absent, o->key_size);
    s->t[M_ABSENT][r] = (now_ns() - t0) / na;
    s->false_pos = hits;

    /* Single queries and batches on the same precomputed hashes. */
    for (size_t i = 0; i < nh; i++)
        hashes[i] = kv_bloom_hash(f, akey(o, i), o->key_size);
    uint64_t acc = 0;
    t0 = now_ns();
    for (size_t i = 0; i < nh; i++)
        acc += (uint64_t)kv_bloom_may_contain_hash(f, hashes[i]);
    s->t[M_HASH_SINGLE][r] = (now_ns() - t0) / (double)nh;
    t0 = now_ns();
    for (size_t i = 0; i < nh; i += BATCH) {
        size_t len = nh - i < BATCH ? nh - i : BATCH;
        kv_bloom_may_contain_batch(f, hashes + i, len, answers);
        for (size_t j = 0; j < len; j++)
            acc -= answers[j];
    }
    s->t[M_BATCH][r] = (now_ns() - t0) / (double)nh;
    if (acc != 0) {
        fprintf(stderr, "filterbench: %s: batch and single queries disagree\n", s->name);
        s->failed = 1;
    }

    kv_bloom_info info;
    kv_bloom_stats(f, &info);
    s->k = info.k;
    s->bytes = info.bytes;
    s->expected_fpr = info.expected_fpr;
    if (info.keys_added != o->keys) {
        fprintf(stderr, "filterbench: %s: keys_added %llu, want %llu\n", s->name,
                (unsigned long long)info.keys_added, (unsigned long long)o->keys);
        s->failed = 1;
    }
    kv_bloom_free(f);

    if (o->threads > 1) {
        s->t[M_ADD_MT][r] = threaded_adds(s, o, 1);
        s->t[M_ADD_MIX][r] = threaded_adds(s, o, 0);
        if (s->t[M_ADD_MT][r] < 0 || s->t[M_ADD_MIX][r] < 0)
            return -1;
    }
    sink += acc;
    return 0;
}


#ifdef KV_WITH_LIBBLOOM
/* One round for libbloom, sized for the same bits per key: its bits-per-key
 * is -ln(error) / ln(2)^2, so error = exp(-B ln(2)^2). */
static int round_libbloom(struct subject *s, const struct options *o, unsigned r)
{
    struct bloom b;
    double ln2 = log(2.0);
    if (o->keys > 0x7fffffff || bloom_init(&b, (unsigned)o->keys, exp(-o->bits_per_key * ln2 * ln2)) != 0) {
        fprintf(stderr, "filterbench: libbloom cannot hold %llu keys\n", (unsigned long long)o->keys);
        return -1;
    }
    double n = (double)o->keys, na = (double)o->absent;
    int size = (int)o->key_size; /* locals, as in add_keys and query_keys */
    const uint8_t *end = present_keys + o->keys * o->key_size;
    double t0 = now_ns();
    for (const uint8_t *k = present_keys; k < end; k += size)
        bloom_add(&b, k, size);
    s->t[M_ADD][r] = (now_ns() - t0) / n;
    uint64_t hits = 0;
    t0 = now_ns();
    for (const uint8_t *k = present_keys; k < end; k += size)
        hits += (uint64_t)bloom_check(&b, k, size);
    s->t[M_PRESENT][r] = (now_ns() - t0) / n;
    if (hits != o->keys)
        s->failed = 1;
    hits = 0;
    end = absent_keys + o->absent * o->key_size;
    t0 = now_ns();
    for (const uint8_t *k = absent_keys; k < end; k += size)
        hits += (uint64_t)bloom_check(&b, k, size);
    s->t[M_ABSENT][r] = (now_ns() - t0) / na;
    s->false_pos = hits;
    s->k = (unsigned)b.hashes;
    s->bytes = (uint64_t)b.bytes;
    s->expected_fpr = kv_bloom_expected_fpr(KV_BLOOM_CLASSIC, (uint64_t)b.bits, o->keys, s->k);
    bloom_free(&b);
    return 0;
}
#endif

/* ---- report ---------------------------------------------------------------- */

static void report(struct subject *subj, unsigned ns, const struct options *o)
{
    double med[8][M_COUNT];
    for (unsigned i = 0; i < ns; i++)
        for (unsigned m = 0; m < M_COUNT; m++)
            med[i][m] = median(subj[i].t[m], o->rounds);
    const struct subject *base = NULL;
    unsigned bi = 0;
    for (unsigned i = 0; i < ns; i++)
        if (subj[i].layout < 0) {
            base = &subj[i];
            bi = i;
        }

    kv_bloom *probe = NULL;
    int avx512 = kv_bloom_new(KV_BLOOM_BLOCKED, 1, 10, 0, &probe) == KV_OK &&
                 kv_bloom_uses_avx512(probe);
    kv_bloom_free(probe);
    if (!o->json) {
        printf("filterbench: %llu keys of %zu bytes, %g bits/key, %llu absent keys, "
               "median of %u rounds; blocked probes: %s\n\n",
               (unsigned long long)o->keys, o->key_size, o->bits_per_key,
               (unsigned long long)o->absent, o->rounds,
               avx512 ? "AVX-512" : "portable code");
        printf("%-9s %3s %12s %8s %8s %9s %9s %9s %9s %9s\n", "layout", "k", "bytes", "bits/key",
               "add ns", "present", "absent", "batch ns", "fpr %", "expect %");
    }
    for (unsigned i = 0; i < ns; i++) {
        const struct subject *s = &subj[i];
        double fpr = o->absent ? (double)s->false_pos / (double)o->absent : 0;
        double bpk = o->keys ? (double)s->bytes * 8 / (double)o->keys : 0;
        int kv = s->layout >= 0;
        if (o->json) {
            printf("{\"layout\":\"%s\",\"keys\":%llu,\"bits_per_key\":%g,\"k\":%u,\"bytes\":%llu,"
                   "\"add_ns\":%.3f,\"query_present_ns\":%.3f,\"query_absent_ns\":%.3f,",
                   s->name, (unsigned long long)o->keys, o->bits_per_key, s->k,
                   (unsigned long long)s->bytes, med[i][M_ADD], med[i][M_PRESENT],
                   med[i][M_ABSENT]);
            if (kv)
                printf("\"batch_query_ns\":%.3f,\"single_hash_query_ns\":%.3f,"
                       "\"batch_speedup\":%.3f,",
                       med[i][M_BATCH], med[i][M_HASH_SINGLE],
                       med[i][M_HASH_SINGLE] / med[i][M_BATCH]);
            else
                printf("\"batch_query_ns\":null,");
            printf("\"fpr\":%.6g,\"expected_fpr\":%.6g,\"measured_bits_per_key\":%.4f,"
                   "\"key_size\":%zu,\"absent_keys\":%llu,\"rounds\":%u",
                   fpr, s->expected_fpr, bpk, o->key_size, (unsigned long long)o->absent,
                   o->rounds);
            if (s->layout == KV_BLOOM_BLOCKED)
                printf(",\"simd\":\"%s\"", avx512 ? "avx512" : "portable");
            if (kv && o->threads > 1)
                printf(",\"threads\":%u,\"add_ns_mt\":%.3f,\"add_scaling\":%.3f,"
                       "\"add_ns_mt_interleaved\":%.3f,\"add_scaling_interleaved\":%.3f",
                       o->threads, med[i][M_ADD_MT], med[i][M_ADD] / med[i][M_ADD_MT],
                       med[i][M_ADD_MIX], med[i][M_ADD] / med[i][M_ADD_MIX]);
            if (kv && base)
                printf(",\"speedup_vs_libbloom\":{\"add\":%.3f,\"query_present\":%.3f,"
                       "\"query_absent\":%.3f}",
                       med[bi][M_ADD] / med[i][M_ADD], med[bi][M_PRESENT] / med[i][M_PRESENT],
                       med[bi][M_ABSENT] / med[i][M_ABSENT]);
            printf(",\"ok\":%s}\n", s->failed ? "false" : "true");
            continue;
        }
        char batch[16] = "-";
        if (kv)
            snprintf(batch, sizeof batch, "%.2f", med[i][M_BATCH]);
        printf("%-9s %3u %12llu %8.2f %8.2f %9.2f %9.2f %9s %9.4f %9.4f%s\n", s->name, s->k,
               (unsigned long long)s->bytes, bpk, med[i][M_ADD], med[i][M_PRESENT],
               med[i][M_ABSENT], batch, 100 * fpr, 100 * s->expected_fpr,
               s->failed ? "  FAILED" : "");
    }
    if (o->json)
        return;
    printf("\n(ns per key; present/absent: one kv_bloom_may_contain per key, hashing "
           "included;\n batch: kv_bloom_may_contain_batch on precomputed hashes)\n");
    if (o->threads > 1)
        printf("(%u threads: partitioned, each adds the keys of its own part of the filter\n"
               " (kv_bloom_partition), plain stores like one thread's; interleaved, key ranges\n"
               " spread over the whole filter, shared adds: a lock per block, an atomic OR per\n"
               " classic bit)\n", o->threads);
    for (unsigned i = 0; i < ns; i++) {
        const struct subject *s = &subj[i];
        if (s->layout < 0)
            continue;
        printf("%s: batch %.2fx faster per key than single queries on the same hashes (%.2f ns)",
               s->name, med[i][M_HASH_SINGLE] / med[i][M_BATCH], med[i][M_HASH_SINGLE]);
        if (o->threads > 1)
            printf("\n%s: %u-thread adds %.2f ns/key partitioned, %.2fx the 1-thread "
                   "throughput; %.2f ns/key interleaved, %.2fx", s->name, o->threads,
                   med[i][M_ADD_MT], med[i][M_ADD] / med[i][M_ADD_MT], med[i][M_ADD_MIX],
                   med[i][M_ADD] / med[i][M_ADD_MIX]);
        printf("\n");
        if (base)
            printf("%s vs libbloom: add %.2fx, present %.2fx, absent %.2fx faster\n", s->name,
                   med[bi][M_ADD] / med[i][M_ADD], med[bi][M_PRESENT] / med[i][M_PRESENT],
                   med[bi][M_ABSENT] / med[i][M_ABSENT]);
    }
}

/* ---- --kinds: the counting, scalable and rotating filters -------------------- */

/* One kind of filter behind one interface: made for N keys at the target
 * FPR, then filled, queried and (counting) emptied by the timed loops. */
enum { K_BLOOM, K_COUNTING, K_SCALABLE_1X, K_SCALABLE_100X, K_ROTATING, K_COUNT };
static const char *const kind_name[K_COUNT] = {"bloom", "counting", "scalable-1x",
                                               "scalable-100x", "rotating"};

enum { KM_ADD, KM_PRESENT, KM_ABSENT, KM_REMOVE, KM_COUNT };

struct kind_result {
    double t[KM_COUNT][MAX_ROUNDS];
    uint64_t false_pos, bytes;
    double expected_fpr;
    unsigned parts; /* scalable: stages; rotating: generations */
    int failed;
};

static void *kind_new(int kind, const struct options *o)
{
    void *f = NULL;
    int rc;
    switch (kind) {
    case K_BLOOM:
        rc = kv_bloom_new_fpr(KV_BLOOM_BLOCKED, o->keys, o->fpr, o->seed, (kv_bloom **)&f);
        break;
    case K_COUNTING:
        rc = kv_counting_bloom_new(o->keys, o->fpr, o->seed, (kv_counting_bloom **)&f);
        break;
    case K_SCALABLE_1X:
    case K_SCALABLE_100X: {
        uint64_t initial = kind == K_SCALABLE_1X ? o->keys : (o->keys + 99) / 100;
        rc = kv_scalable_bloom_new(initial, o->fpr, o->seed, (kv_scalable_bloom **)&f);
        break;
    }
    default:
        rc = kv_rotating_bloom_new((o->keys + 3) / 4, 4, o->fpr, o->seed,
                                   (kv_rotating_bloom **)&f);
    }
    if (rc != KV_OK)
        fprintf(stderr, "filterbench: %s: %s (%s)\n", kind_name[kind], kv_strerror(rc),
                kv_error_text());
    return rc == KV_OK ? f : NULL;
}

/* Adds the n keys; returns how many adds failed. */
static uint64_t kind_add(int kind, void *f, const uint8_t *keys, uint64_t n, size_t size)
{
    uint64_t bad = 0;
    const uint8_t *end = keys + n * size;
    switch (kind) {
    case K_BLOOM:
        for (const uint8_t *k = keys; k < end; k += size)
            kv_bloom_add(f, k, size);
        break;
    case K_COUNTING:
        for (const uint8_t *k = keys; k < end; k += size)
            bad += kv_counting_bloom_add(f, k, size) != KV_OK;
        break;
    case K_SCALABLE_1X:
    case K_SCALABLE_100X:
        for (const uint8_t *k = keys; k < end; k += size)
            bad += kv_scalable_bloom_add(f, k, size) != KV_OK;
        break;
    default:
        for (const uint8_t *k = keys; k < end; k += size)
            bad += kv_rotating_bloom_add(f, k, size) != KV_OK;
    }
    return bad;
}

/* How many of the n keys the filter answers "maybe" for. */
static uint64_t kind_query(int kind, const void *f, const uint8_t *keys, uint64_t n, size_t size)
{
    uint64_t hits = 0;
    const uint8_t *end = keys + n * size;
    switch (kind) {
    case K_BLOOM:
        for (const uint8_t *k = keys; k < end; k += size)
            hits += (uint64_t)kv_bloom_may_contain(f, k, size);
        break;
    case K_COUNTING:
        for (const uint8_t *k = keys; k < end; k += size)
            hits += (uint64_t)kv_counting_bloom_may_contain(f, k, size);
        break;
    case K_SCALABLE_1X:
    case K_SCALABLE_100X:
        for (const uint8_t *k = keys; k < end; k += size)
            hits += (uint64_t)kv_scalable_bloom_may_contain(f, k, size);
        break;
    default:
        for (const uint8_t *k = keys; k < end; k += size)
            hits += (uint64_t)kv_rotating_bloom_may_contain(f, k, size);
    }
    return hits;
}

/* Size, expected FPR and parts of a filled filter, into r; then frees it. */
static void kind_describe_free(int kind, void *f, const struct options *o, struct kind_result *r)
{
    switch (kind) {
    case K_BLOOM: {
        kv_bloom_info info;
        kv_bloom_stats(f, &info);
        r->bytes = info.bytes;
        r->expected_fpr = info.expected_fpr;
        r->parts = 1;
        kv_bloom_free(f);
        break;
    }
    case K_COUNTING:
        /* Counted before the removes: what the queries met. */
        r->bytes = kv_counting_bloom_bytes(f);
        kv_counting_bloom_free(f);
        r->parts = 1;
        break;
    case K_SCALABLE_1X:
    case K_SCALABLE_100X:
        r->bytes = kv_scalable_bloom_bytes(f);
        r->expected_fpr = kv_scalable_bloom_expected_fpr(f);
        r->parts = kv_scalable_bloom_stages(f);
        if (kv_scalable_bloom_count(f) != o->keys)
            r->failed = 1;
        kv_scalable_bloom_free(f);
        break;
    default:
        r->bytes = kv_rotating_bloom_bytes(f);
        r->expected_fpr = kv_rotating_bloom_expected_fpr(f);
        r->parts = 4;
        if (kv_rotating_bloom_count(f) != o->keys)
            r->failed = 1;
        kv_rotating_bloom_free(f);
    }
}

/* One round of one kind: fill, query present and absent keys, and for the
 * counting filter remove every key (each must succeed, and the filter must
 * then be empty). */
static int kinds_round(int kind, const struct options *o, unsigned round, struct kind_result *r)
{
    void *f = kind_new(kind, o);
    if (!f)
        return -1;
    double n = (double)o->keys, na = (double)o->absent;
    double t0 = now_ns();
    uint64_t bad = kind_add(kind, f, present_keys, o->keys, o->key_size);
    r->t[KM_ADD][round] = (now_ns() - t0) / n;
    t0 = now_ns();
    uint64_t hits = kind_query(kind, f, present_keys, o->keys, o->key_size);
    r->t[KM_PRESENT][round] = (now_ns() - t0) / n;
    t0 = now_ns();
    r->false_pos = kind_query(kind, f, absent_keys, o->absent, o->key_size);
    r->t[KM_ABSENT][round] = (now_ns() - t0) / na;
    if (bad || hits != o->keys) {
        fprintf(stderr, "filterbench: %s: %llu failed adds, %llu false negatives\n",
                kind_name[kind], (unsigned long long)bad, (unsigned long long)(o->keys - hits));
        r->failed = 1;
    }
    if (kind == K_COUNTING) {
        r->expected_fpr = kv_counting_bloom_expected_fpr(f);
        const uint8_t *end = present_keys + o->keys * o->key_size;
        size_t size = o->key_size;
        bad = 0;
        t0 = now_ns();
        for (const uint8_t *k = present_keys; k < end; k += size)
            bad += kv_counting_bloom_remove(f, k, size) != KV_OK;
        r->t[KM_REMOVE][round] = (now_ns() - t0) / n;
        if (bad || kv_counting_bloom_count(f) != 0) {
            fprintf(stderr, "filterbench: counting: %llu failed removes\n",
                    (unsigned long long)bad);
            r->failed = 1;
        }
    }
    kind_describe_free(kind, f, o, r);
    return 0;
}

static void kinds_report(struct kind_result *res, const struct options *o)
{
    double med[K_COUNT][KM_COUNT];
    for (int i = 0; i < K_COUNT; i++)
        for (int m = 0; m < KM_COUNT; m++)
            med[i][m] = median(res[i].t[m], o->rounds);
    if (!o->json) {
        printf("filterbench --kinds: %llu keys of %zu bytes, target FPR %g, %llu absent keys, "
               "median of %u rounds\n\n",
               (unsigned long long)o->keys, o->key_size, o->fpr, (unsigned long long)o->absent,
               o->rounds);
        printf("%-14s %6s %12s %8s %8s %9s %9s %9s %9s %9s\n", "kind", "parts", "bytes",
               "bits/key", "add ns", "present", "absent", "remove", "fpr %", "expect %");
    }
    for (int i = 0; i < K_COUNT; i++) {
        const struct kind_result *r = &res[i];
        double fpr = (double)r->false_pos / (double)o->absent;
        double bpk = (double)r->bytes * 8 / (double)o->keys;
        if (o->json) {
            printf("{\"kind\":\"%s\",\"keys\":%llu,\"target_fpr\":%g,\"parts\":%u,\"bytes\":%llu,"
                   "\"bits_per_key\":%.4f,\"add_ns\":%.3f,\"query_present_ns\":%.3f,"
                   "\"query_absent_ns\":%.3f,",
                   kind_name[i], (unsigned long long)o->keys, o->fpr, r->parts,
                   (unsigned long long)r->bytes, bpk, med[i][KM_ADD], med[i][KM_PRESENT],
                   med[i][KM_ABSENT]);
            if (i == K_COUNTING)
                printf("\"remove_ns\":%.3f,", med[i][KM_REMOVE]);
            else
                printf("\"remove_ns\":null,");
            printf("\"fpr\":%.6g,\"expected_fpr\":%.6g,\"key_size\":%zu,\"absent_keys\":%llu,"
                   "\"rounds\":%u,\"ok\":%s}\n",
                   fpr, r->expected_fpr, o->key_size, (unsigned long long)o->absent, o->rounds,
                   r->failed ? "false" : "true");
            continue;
        }
        char remove[16] = "-";
        if (i == K_COUNTING)
            snprintf(remove, sizeof remove, "%.2f", med[i][KM_REMOVE]);
        printf("%-14s %6u %12llu %8.2f %8.2f %9.2f %9.2f %9s %9.4f %9.4f%s\n", kind_name[i],
               r->parts, (unsigned long long)r->bytes, bpk, med[i][KM_ADD], med[i][KM_PRESENT],
               med[i][KM_ABSENT], remove, 100 * fpr, 100 * r->expected_fpr,
               r->failed ? "  FAILED" : "");
    }
    if (!o->json)
        printf("\n(ns per key, hashing included; parts: stages of a scalable filter,\n"
               " generations of a rotating one; scalable-100x starts at keys/100 and grows;\n"
               " rotating: 4 generations of keys/4, the window holds every key)\n");
}

/* --kinds: every kind, taking turns within each round. 0, or 1 when a
 * filter could not be made or gave a wrong answer. */
static int run_kinds(const struct options *o)
{
    struct kind_result *res = calloc(K_COUNT, sizeof *res);
    if (!res) {
        fprintf(stderr, "filterbench: out of memory\n");
        return 1;
    }
    int rc = 0;
    for (unsigned r = 0; r < o->rounds && rc == 0; r++)
        for (int i = 0; i < K_COUNT && rc == 0; i++) {
            int kind = (i + (int)r) % K_COUNT; /* no kind always goes first */
            rc = kinds_round(kind, o, r, &res[kind]);
        }
    if (rc == 0)
        kinds_report(res, o);
    for (int i = 0; i < K_COUNT; i++)
        rc |= res[i].failed;
    free(res);
    return rc ? 1 : 0;
}

/* ---- command line ---------------------------------------------------------- */

static void usage(FILE *to)
{
    fprintf(to,
            "usage: filterbench [--keys N] [--bits_per_key B] [--layout blocked|classic|both]\n"
            "                   [--key_size S] [--threads T] [--rounds R] [--seed X]\n"
            "                   [--absent N] [--json] [--baseline libbloom]\n"
            "       filterbench --mixed [--threads T] [--ops N] [--keys N] ... (--mixed --help)\n"
            "       filterbench --hashes [--help]   (the hash shoot-out)\n"
            "       filterbench --range [--help]    (range filters over empty ranges)\n"
            "       filterbench --kinds [--fpr P] [--keys N] [--key_size S] [--rounds R]\n"
            "                   [--seed X] [--absent N] [--json]\n"
            "defaults: --keys 1000000 --bits_per_key 10 --layout both --key_size 16\n"
            "          --threads 1 --rounds 5 --absent max(keys, 1000000) --fpr 0.01\n");
}

static int parse_args(int argc, char **argv, struct options *o)
{
    int absent_set = 0;
    *o = (struct options){.keys = 1000000, .seed = 42, .bits_per_key = 10, .key_size = 16,
                          .threads = 1, .rounds = 5, .layouts = {0, 1}, .nlayouts = 2,
                          .fpr = 0.01};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--json")) {
            o->json = 1;
            continue;
        }
        if (!strcmp(a, "--kinds")) {
            o->kinds = 1;
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
        else if (!strcmp(a, "--absent") && !parse_u64(v, MAX_NUM, &u) && u > 0) {
            o->absent = u;
            absent_set = 1;
        } else if (!strcmp(a, "--seed") && !parse_u64(v, MAX_NUM, &u))
            o->seed = u;
        else if (!strcmp(a, "--key_size") && !parse_u64(v, MAX_NUM, &u) && u >= 1 && u <= MAX_KEY)
            o->key_size = (size_t)u;
        else if (!strcmp(a, "--threads") && !parse_u64(v, MAX_NUM, &u) && u >= 1 && u <= 64)
            o->threads = (unsigned)u;
        else if (!strcmp(a, "--rounds") && !parse_u64(v, MAX_NUM, &u) && u >= 1 && u <= MAX_ROUNDS)
            o->rounds = (unsigned)u;
        else if (!strcmp(a, "--fpr")) {
            char *end;
            o->fpr = strtod(v, &end);
            if (*end || !(o->fpr > 0 && o->fpr < 1)) {
                fprintf(stderr, "filterbench: --fpr must be in (0, 1)\n");
                return -1;
            }
        } else if (!strcmp(a, "--bits_per_key")) {
            char *end;
            o->bits_per_key = strtod(v, &end);
            if (*end || !(o->bits_per_key > 0 && o->bits_per_key <= 1000)) {
                fprintf(stderr, "filterbench: --bits_per_key must be in (0, 1000]\n");
                return -1;
            }
        } else if (!strcmp(a, "--layout")) {
            if (!strcmp(v, "blocked"))
                o->layouts[0] = KV_BLOOM_BLOCKED, o->nlayouts = 1;
            else if (!strcmp(v, "classic"))
                o->layouts[0] = KV_BLOOM_CLASSIC, o->nlayouts = 1;
            else if (!strcmp(v, "both"))
                o->layouts[0] = KV_BLOOM_BLOCKED, o->layouts[1] = KV_BLOOM_CLASSIC, o->nlayouts = 2;
            else {
                fprintf(stderr, "filterbench: --layout is blocked, classic or both\n");
                return -1;
            }
        } else if (!strcmp(a, "--baseline") && !strcmp(v, "libbloom")) {
#ifdef KV_WITH_LIBBLOOM
            o->libbloom = 1;
#else
            fprintf(stderr, "filterbench: built without libbloom; reconfigure with "
                            "-DKV_BENCH_LIBBLOOM=ON (needs libbloom-dev)\n");
            return -1;
#endif
        } else {
            fprintf(stderr, "filterbench: bad argument: %s %s\n", a, v);
            usage(stderr);
            return -1;
        }
    }
    if (!absent_set)
        o->absent = o->keys > 1000000 ? o->keys : 1000000;
    return 0;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mixed"))
            return filterbench_mixed(argc, argv);
        if (!strcmp(argv[i], "--hashes"))
            return filterbench_hashes(argc, argv);
        if (!strcmp(argv[i], "--range"))
            return filterbench_range(argc, argv);
    }
    struct options o;
    if (parse_args(argc, argv, &o) != 0)
        return 2;
    struct subject subj[3];
    unsigned ns = 0;
    for (int i = 0; i < o.nlayouts; i++) {
        memset(&subj[ns], 0, sizeof subj[ns]);
        subj[ns].layout = o.layouts[i];
        subj[ns++].name = o.layouts[i] == KV_BLOOM_BLOCKED ? "blocked" : "classic";
    }
    if (o.libbloom) {
        memset(&subj[ns], 0, sizeof subj[ns]);
        subj[ns].layout = -1;
        subj[ns++].name = "libbloom";
    }
    /* Hashes for the single-vs-batch comparison: enough queries to leave the
     * caches behind, bounded so that 100M-key runs stay within memory. */
    size_t nh = o.absent < 16000000 ? (size_t)o.absent : 16000000;
    uint64_t *hashes = malloc(nh * sizeof *hashes);
    uint8_t *answers = malloc(BATCH);
    present_keys = gen_keys(&o, 0, o.keys);
    absent_keys = gen_keys(&o, 1, o.absent);
    if (!hashes || !answers || !present_keys || !absent_keys) {
        fprintf(stderr, "filterbench: out of memory\n");
        return 1;
    }
    if (o.kinds) {
        int rc = run_kinds(&o);
        free(hashes);
        free(answers);
        free(present_keys);
        free(absent_keys);
        return rc;
    }
    for (unsigned r = 0; r < o.rounds; r++)
        for (unsigned i = 0; i < ns; i++) {
            /* Rotate the order each round: no contender always goes first. */
            struct subject *s = &subj[(i + r) % ns];
            int rc = 0;
#ifdef KV_WITH_LIBBLOOM
            if (s->layout < 0)
                rc = round_libbloom(s, &o, r);
            else
#endif
                rc = round_kv(s, &o, r, hashes, nh, answers);
            if (rc != 0)
                return 1;
        }
    report(subj, ns, &o);
    free(hashes);
    free(answers);
    free(present_keys);
    free(absent_keys);
    for (unsigned i = 0; i < ns; i++)
        for (unsigned t = 0; t < o.threads; t++)
            free(subj[i].part_keys[t]);
    int failed = 0;
    for (unsigned i = 0; i < ns; i++)
        failed |= subj[i].failed;
    return failed ? 1 : 0;
}
