/* filterbench_mixed.c - filterbench --mixed: T threads share one filter,
 * each doing 50% adds and 50% queries, three ways:
 *   ours    kv_bloom_add and kv_bloom_may_contain as they are (shared adds
 *           take a block's lock or an atomic OR; queries lock nothing);
 *   mutex   the same calls, every one inside one pthread_mutex;
 *   rwlock  the same calls inside one pthread_rwlock: queries take it to
 *           read, adds to write (the usual "RWMutex around the filter").
 * For T = 1, 2, 4, ... up to --threads (default: the CPUs this process may
 * run on), it reports operations per second of all threads together and
 * the ratio of ours to each lock. A run's filter is made for --keys keys
 * and holds half of them before the clock starts (so queries meet a
 * filter at work, not an empty one); the run then does --ops operations in
 * all, split evenly among its threads, keys generated beforehand. Each
 * figure is the median of --rounds rounds, the three taking turns within
 * each round. After each run every key added must be found and counted,
 * else the row says FAILED and the exit code is 1.
 *
 * Kept apart from filterbench.c (which only hands it the arguments when
 * one of them is --mixed), so that the two modes change independently. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <kv/bloom.h>

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"
#include "filterbench_mixed.h"

#define KEY 16
#define MAX_THREADS 64
#define MAX_ROUNDS 101

enum { V_OURS, V_MUTEX, V_RWLOCK, V_COUNT };
static const char *const vname[V_COUNT] = {"ours", "mutex", "rwlock"};

struct mixed_options {
    uint64_t keys, ops, seed;
    double bits_per_key;
    int layouts[2], nlayouts;
    unsigned threads, rounds, cpus;
    int json;
};

/* Key i of stream s, 16 bytes. */
static void make_key(uint64_t seed, uint64_t s, uint64_t i, uint8_t *key)
{
    uint64_t a = splitmix64(seed ^ (s << 48) ^ i), b = splitmix64(a);
    memcpy(key, &a, 8);
    memcpy(key + 8, &b, 8);
}

/* The CPUs this process may run on. */
static unsigned cpus_allowed(void)
{
#if defined(__linux__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return (unsigned)CPU_COUNT(&set);
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1;
}

/* The CPU's name from /proc/cpuinfo, or "unknown CPU". */
static void cpu_name(char *out, size_t cap)
{
    snprintf(out, cap, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !colon)
            continue;
        colon += 1 + (colon[1] == ' ');
        colon[strcspn(colon, "\n")] = 0;
        snprintf(out, cap, "%s", colon);
        break;
    }
    fclose(f);
}

/* One run: the filter and its guard, shared by the threads. */
struct run {
    kv_bloom *f;
    int variant;
    pthread_mutex_t mu;
    pthread_rwlock_t rw;
    _Atomic unsigned ready;
    _Atomic int go;
};

struct worker {
    struct run *run;
    const uint8_t *keys; /* n keys: even-numbered ones are added, odd ones queried */
    uint64_t n, hits;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    struct run *r = w->run;
    atomic_fetch_add(&r->ready, 1);
    while (!atomic_load_explicit(&r->go, memory_order_acquire))
        ;
    kv_bloom *f = r->f;
    uint64_t hits = 0;
    const uint8_t *k = w->keys, *end = w->keys + w->n * KEY;
    switch (r->variant) {
    case V_OURS:
        for (; k < end; k += 2 * KEY) {
            kv_bloom_add(f, k, KEY);
            if (k + KEY < end)
                hits += (uint64_t)kv_bloom_may_contain(f, k + KEY, KEY);
        }
        break;
    case V_MUTEX:
        for (; k < end; k += 2 * KEY) {
            pthread_mutex_lock(&r->mu);
            kv_bloom_add(f, k, KEY);
            pthread_mutex_unlock(&r->mu);
            if (k + KEY < end) {
                pthread_mutex_lock(&r->mu);
                hits += (uint64_t)kv_bloom_may_contain(f, k + KEY, KEY);
                pthread_mutex_unlock(&r->mu);
            }
        }
        break;
    default:
        for (; k < end; k += 2 * KEY) {
            pthread_rwlock_wrlock(&r->rw);
            kv_bloom_add(f, k, KEY);
            pthread_rwlock_unlock(&r->rw);
            if (k + KEY < end) {
                pthread_rwlock_rdlock(&r->rw);
                hits += (uint64_t)kv_bloom_may_contain(f, k + KEY, KEY);
                pthread_rwlock_unlock(&r->rw);
            }
        }
        break;
    }
    w->hits = hits;
    return NULL;
}

/* Times one run of `variant` on T threads; returns ops/s, or -1 on a
 * fault (with *ok cleared when a key or a count was lost). */
static double one_run(const struct mixed_options *o, int layout, int variant, unsigned T,
                      uint8_t *const *keys, const uint64_t *nkeys, int *ok)
{
    struct run r;
    memset(&r, 0, sizeof r);
    if (kv_bloom_new((kv_bloom_layout)layout, o->keys, o->bits_per_key, o->seed, &r.f) != KV_OK)
        return -1;
    r.variant = variant;
    pthread_mutex_init(&r.mu, NULL);
    pthread_rwlock_init(&r.rw, NULL);
    uint8_t key[KEY];
    for (uint64_t i = 0; i < o->keys / 2; i++) { /* the filter at work: half full */
        make_key(o->seed, 1000, i, key);
        kv_bloom_add(r.f, key, KEY);
    }
    pthread_t tid[MAX_THREADS];
    struct worker w[MAX_THREADS];
    unsigned started = 0;
    for (; started < T; started++) {
        w[started] = (struct worker){&r, keys[started], nkeys[started], 0};
        pthread_attr_t attr;
        pin_attr(&attr, started);
        int rc = pthread_create(&tid[started], &attr, work, &w[started]);
        pthread_attr_destroy(&attr);
        if (rc != 0)
            break;
    }
    while (atomic_load(&r.ready) < started)
        sched_yield();
    double t0 = now_ns();
    atomic_store_explicit(&r.go, 1, memory_order_release);
    for (unsigned t = 0; t < started; t++)
        pthread_join(tid[t], NULL);
    double ns = now_ns() - t0;
    /* Every add must be there and counted. */
    uint64_t ops = 0, added = 0, lost = 0;
    for (unsigned t = 0; t < started; t++) {
        ops += nkeys[t];
        added += (nkeys[t] + 1) / 2;
        for (uint64_t i = 0; i < nkeys[t]; i += 2)
            lost += !kv_bloom_may_contain(r.f, keys[t] + i * KEY, KEY);
    }
    kv_bloom_info info;
    kv_bloom_stats(r.f, &info);
    if (lost || info.keys_added != o->keys / 2 + added) {
        fprintf(stderr, "filterbench --mixed: %s, %u threads: %llu keys lost, %llu counted of %llu\n",
                vname[variant], T, (unsigned long long)lost, (unsigned long long)info.keys_added,
                (unsigned long long)(o->keys / 2 + added));
        *ok = 0;
    }
    kv_bloom_free(r.f);
    pthread_mutex_destroy(&r.mu);
    pthread_rwlock_destroy(&r.rw);
    if (started != T || ns <= 0)
        return -1;
    return (double)ops / (ns / 1e9);
}

/* Runs every thread count for one layout and prints its rows. */
static int bench_layout(const struct mixed_options *o, int layout)
{
    const char *lname = layout == KV_BLOOM_BLOCKED ? "blocked" : "classic";
    unsigned counts[16], nc = 0;
    for (unsigned t = 1; t < o->threads && nc < 15; t *= 2)
        counts[nc++] = t;
    counts[nc++] = o->threads;
    int failed = 0;
    for (unsigned c = 0; c < nc; c++) {
        unsigned T = counts[c];
        /* Thread t's keys: stream t, o->ops / T of them (the first
         * o->ops % T threads one more). */
        uint8_t *keys[MAX_THREADS];
        uint64_t nkeys[MAX_THREADS];
        for (unsigned t = 0; t < T; t++) {
            nkeys[t] = o->ops / T + (t < o->ops % T);
            keys[t] = malloc(nkeys[t] * KEY + 1);
            if (!keys[t]) {
                fprintf(stderr, "filterbench --mixed: out of memory\n");
                return -1;
            }
            for (uint64_t i = 0; i < nkeys[t]; i++)
                make_key(o->seed, t, i, keys[t] + i * KEY);
        }
        double v[V_COUNT][MAX_ROUNDS], med[V_COUNT];
        int ok = 1;
        for (unsigned r = 0; r < o->rounds; r++)
            for (unsigned i = 0; i < V_COUNT; i++) {
                unsigned variant = (i + r) % V_COUNT; /* none always goes first */
                v[variant][r] = one_run(o, layout, (int)variant, T, keys, nkeys, &ok);
                if (v[variant][r] < 0)
                    ok = 0;
            }
        for (unsigned i = 0; i < V_COUNT; i++)
            med[i] = median(v[i], o->rounds);
        for (unsigned t = 0; t < T; t++)
            free(keys[t]);
        failed |= !ok;
        if (o->json)
            printf("{\"mode\":\"mixed\",\"layout\":\"%s\",\"threads\":%u,\"cpus\":%u,"
                   "\"ops\":%llu,\"keys\":%llu,\"bits_per_key\":%g,\"rounds\":%u,"
                   "\"ours_ops_s\":%.0f,\"mutex_ops_s\":%.0f,\"rwlock_ops_s\":%.0f,"
                   "\"vs_mutex\":%.3f,\"vs_rwlock\":%.3f,\"ok\":%s}\n",
                   lname, T, o->cpus, (unsigned long long)o->ops, (unsigned long long)o->keys,
                   o->bits_per_key, o->rounds, med[V_OURS], med[V_MUTEX], med[V_RWLOCK],
                   med[V_OURS] / med[V_MUTEX], med[V_OURS] / med[V_RWLOCK],
                   ok ? "true" : "false");
        else
            printf("%-8s %7u %14.0f %14.0f %14.0f %9.2fx %9.2fx%s\n", lname, T, med[V_OURS],
                   med[V_MUTEX], med[V_RWLOCK], med[V_OURS] / med[V_MUTEX],
                   med[V_OURS] / med[V_RWLOCK], ok ? "" : "  FAILED");
        fflush(stdout);
    }
    return failed;
}

static void mixed_usage(FILE *to)
{
    fprintf(to,
            "usage: filterbench --mixed [--threads T] [--ops N] [--keys N] [--bits_per_key B]\n"
            "                   [--layout blocked|classic|both] [--rounds R] [--seed X] [--json]\n"
            "defaults: --threads <CPUs> --ops 2000000 --keys 1000000 --bits_per_key 10\n"
            "          --layout blocked --rounds 3\n");
}

static int parse_mixed(int argc, char **argv, struct mixed_options *o)
{
    unsigned cpus = cpus_allowed();
    *o = (struct mixed_options){.keys = 1000000, .ops = 2000000, .seed = 42, .bits_per_key = 10,
                                .layouts = {KV_BLOOM_BLOCKED, KV_BLOOM_CLASSIC}, .nlayouts = 1,
                                .threads = cpus < MAX_THREADS ? cpus : MAX_THREADS,
                                .rounds = 3, .cpus = cpus};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--mixed"))
            continue;
        if (!strcmp(a, "--json")) {
            o->json = 1;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            mixed_usage(stdout);
            exit(0);
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "filterbench: %s needs a value\n", a);
            return -1;
        }
        const char *v = argv[++i];
        double d;
        if (!strcmp(a, "--threads") && !parse_num(v, 1, MAX_THREADS, &d) && d == floor(d))
            o->threads = (unsigned)d;
        else if (!strcmp(a, "--ops") && !parse_num(v, 2, 1e12, &d) && d == floor(d))
            o->ops = (uint64_t)d;
        else if (!strcmp(a, "--keys") && !parse_num(v, 1, 1e12, &d) && d == floor(d))
            o->keys = (uint64_t)d;
        else if (!strcmp(a, "--seed") && !parse_num(v, 0, 1e15, &d) && d == floor(d))
            o->seed = (uint64_t)d;
        else if (!strcmp(a, "--rounds") && !parse_num(v, 1, MAX_ROUNDS, &d) && d == floor(d))
            o->rounds = (unsigned)d;
        else if (!strcmp(a, "--bits_per_key") && !parse_num(v, 1e-9, 1000, &d))
            o->bits_per_key = d;
        else if (!strcmp(a, "--layout") && !strcmp(v, "blocked"))
            o->layouts[0] = KV_BLOOM_BLOCKED, o->nlayouts = 1;
        else if (!strcmp(a, "--layout") && !strcmp(v, "classic"))
            o->layouts[0] = KV_BLOOM_CLASSIC, o->nlayouts = 1;
        else if (!strcmp(a, "--layout") && !strcmp(v, "both"))
            o->layouts[0] = KV_BLOOM_BLOCKED, o->layouts[1] = KV_BLOOM_CLASSIC, o->nlayouts = 2;
        else {
            fprintf(stderr, "filterbench --mixed: bad argument: %s %s\n", a, v);
            mixed_usage(stderr);
            return -1;
        }
    }
    return 0;
}

int filterbench_mixed(int argc, char **argv)
{
    struct mixed_options o;
    if (parse_mixed(argc, argv, &o) != 0)
        return 2;
    if (!o.json) {
        char cpu[256];
        cpu_name(cpu, sizeof cpu);
        printf("filterbench --mixed: 50%% adds, 50%% queries of 16-byte keys, %llu ops per run "
               "split over the threads,\n on one filter made for %llu keys at %g bits/key "
               "holding %llu of them first; median of %u rounds\n"
               " %s, %u CPU%s this process may use%s\n\n",
               (unsigned long long)o.ops, (unsigned long long)o.keys, o.bits_per_key,
               (unsigned long long)(o.keys / 2), o.rounds, cpu, o.cpus, o.cpus == 1 ? "" : "s",
               o.threads > o.cpus ? " (more threads than CPUs: they take turns)" : "");
        printf("%-8s %7s %14s %14s %14s %10s %10s\n", "layout", "threads", "ours ops/s",
               "mutex ops/s", "rwlock ops/s", "vs mutex", "vs rwlock");
    }
    int failed = 0;
    for (int i = 0; i < o.nlayouts; i++) {
        int rc = bench_layout(&o, o.layouts[i]);
        if (rc < 0)
            return 1;
        failed |= rc;
    }
    if (!o.json)
        printf("\n(ops/s: all threads together; ours: kv_bloom_add / kv_bloom_may_contain as "
               "they are;\n mutex: each call inside one pthread_mutex; rwlock: queries under "
               "its read lock, adds under its write lock)\n");
    return failed ? 1 : 0;
}
