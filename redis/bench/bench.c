/* bench.c - items per second through redis-server for the BF.* commands:
 * kv's module beside RedisBloom, the go-zero Lua bitmap, and two ceilings.
 *
 *   bench --module build/redis/kv_redis.so [--redisbloom /tmp/rb/redisbloom.so]
 *         [--capacities 100000,20000000] [--rounds 3] [--min-items 5000000]
 *         [--lua-items 1000000] [--ceiling-items 10000000] [--window 100]
 *         [--server /usr/bin/redis-server] [--server-cpu 0] [--client-cpu 1]
 *         [--perf-dir DIR]
 *
 * One client, one connection, 100 commands in flight (--window), 100 items
 * per command, items of 16 bytes, error rate 0.01, NONSCALING filters.  For
 * every round and capacity it starts a fresh redis-server pinned to one CPU
 * (sched_setaffinity, as taskset does) and pins itself to the other, once per
 * contender, the module and RedisBloom taking turns, so that a noisy machine
 * slows both alike; figures are medians over the rounds.
 *
 * Phases, for the module and for RedisBloom:
 *   BF.MADD     fill a filter reserved for the capacity with exactly that
 *               many new items.  A capacity below --min-items is filled
 *               several times (a new key per pass, the previous one deleted
 *               inside the same pipeline) so that the timing is long enough;
 *               the working set stays one filter of that capacity.
 *   BF.MEXISTS  max(capacity, --min-items) queries on the last filter, half
 *               of them added items (any of the capacity, at random), half
 *               never added: every present one must answer 1 (a false
 *               negative fails the run), the absent ones give the measured
 *               false-positive rate.
 *   ceiling     BF.MEXISTS on a missing key: the command path without filter
 *               work.
 * Then memory per item: MEMORY USAGE of the full filter / capacity.
 *
 * The go-zero baseline runs on a server with no module: a bitmap of
 * m = -n ln(p) / ln(2)^2 bits (go-zero's NewFilter sizing; 9.6 bits per item
 * at 0.01) and k = round(m/n ln 2) = 7 bit offsets per item, computed by the
 * client (a 64-bit hash of the item and the probe number, modulo m), and a
 * Lua script of k SETBIT (add) or GETBIT with an early exit (query) per item,
 * one EVALSHA per 100 items.  It is timed over --lua-items items (it is 20-40
 * times slower; a 20M fill would take minutes): the bitmap is first filled
 * with random bits as if it held the other capacity - lua-items items, the
 * timed adds bring it to a full filter's density (half the bits set), and
 * the timed queries (half of them the added items) pay what they would on a
 * filter at capacity.  The same server gives
 * the core ceiling, SMISMEMBER on a missing key (the same request and reply
 * shape as BF.MEXISTS).
 *
 * Replies are counted as they are parsed (hiredis reader callbacks that keep
 * no objects), so that the client spends little per item; the server's CPU
 * use in each phase is printed beside it (near 100%: the server was the
 * limit, as it should be).
 *
 * --perf-dir DIR records each BF.MADD and BF.MEXISTS phase with
 * `perf record -g -p <redis-server pid>` into DIR/<who>-<capacity>-<phase>.data
 * (where a command's time goes; run it apart from the timed rounds, as perf
 * slows the server).
 *
 * Exit status 0 when every phase ran and every check held (no error reply,
 * no false negative, a false-positive rate below 5%); 1 otherwise; 2 on bad
 * arguments; 77 (a skip for ctest) when redis-server is not installed.  The performance targets of issue 31 are printed as met or
 * missed; they do not change the exit status.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <xxhash.h>

#define ITEM_LEN 16 /* bytes per item: 16 decimal digits of its index */
#define BATCH 100   /* items per BF.MADD / BF.MEXISTS / EVALSHA */
#define MAX_CAPS 8
#define MAX_ROUNDS 15
#define LUA_K 7 /* go-zero's k at 0.01: round(9.585 * ln 2) */
#define ERROR_RATE 0.01

enum contender { C_KV, C_RB, C_BARE, C_N };
static const char *const contender_name[C_N] = {"kv module", "RedisBloom", "no module"};

enum phase { P_MADD, P_MEXISTS, P_CEIL_BF, P_SMIS, P_LUA_ADD, P_LUA_QUERY, P_N };
static const char *const phase_name[P_N] = {"BF.MADD",
                                            "BF.MEXISTS",
                                            "BF.MEXISTS missing key",
                                            "SMISMEMBER missing key",
                                            "Lua bitmap add",
                                            "Lua bitmap query"};

struct opts {
    const char *module[C_N]; /* .so per contender; NULL: not run (C_BARE: none) */
    const char *server;
    uint64_t caps[MAX_CAPS];
    int ncaps;
    int rounds;
    uint64_t min_items, lua_items, ceiling_items;
    int window;
    int server_cpu, client_cpu;
    const char *perf_dir; /* perf record the filter phases into it; NULL: no */
};

/* ---- replies, counted by the reader as they arrive ------------------------
 * The load connection's reader builds no reply objects: every callback
 * returns the same dummy pointer, and integers inside an array are added up
 * by their position's parity (the request lays items out absent, present,
 * absent, ...).  One client thread, so a file-scope tally is enough. */
struct tally {
    uint64_t ints;      /* integers inside arrays */
    uint64_t ones_even; /* 1s at even positions (absent items in queries) */
    uint64_t ones_odd;  /* 1s at odd positions (present items) */
    uint64_t errors;    /* error replies, top-level or inside arrays */
    char first_error[160];
};
static struct tally g_tally;
static char g_dummy;

static void *tally_string(const redisReadTask *t, char *s, size_t len)
{
    if (t->type == REDIS_REPLY_ERROR) {
        if (g_tally.errors++ == 0) {
            size_t n = len < sizeof g_tally.first_error - 1 ? len : sizeof g_tally.first_error - 1;
            memcpy(g_tally.first_error, s, n);
            g_tally.first_error[n] = '\0';
        }
    }
    return &g_dummy;
}

static void *tally_array(const redisReadTask *t, int n)
{
    (void)t;
    (void)n;
    return &g_dummy;
}

static void *tally_integer(const redisReadTask *t, long long v)
{
    if (t->parent) {
        g_tally.ints++;
        if (t->idx & 1)
            g_tally.ones_odd += (uint64_t)v;
        else
            g_tally.ones_even += (uint64_t)v;
    }
    return &g_dummy;
}

static void *tally_nil(const redisReadTask *t)
{
    (void)t;
    return &g_dummy;
}

static void tally_free(void *obj)
{
    (void)obj;
}

static redisReplyObjectFunctions tally_fns = {tally_string, tally_array, tally_integer, tally_nil,
                                              tally_free};

/* ---- small helpers ------------------------------------------------------- */

static int g_failed; /* a check failed somewhere: exit status 1 */

static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("bench: FAIL: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    g_failed = 1;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Item idx as 16 decimal digits, zero-padded. */
static void put_item(char *p, uint64_t idx)
{
    for (int i = ITEM_LEN - 1; i >= 0; i--) {
        p[i] = (char)('0' + idx % 10);
        idx /= 10;
    }
}

/* A request buffer, grown as needed. */
struct buf {
    char *p;
    size_t len, cap;
};

static void buf_reserve(struct buf *b, size_t more)
{
    if (b->len + more <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        fputs("bench: out of memory\n", stderr);
        exit(1);
    }
    b->p = p;
    b->cap = cap;
}

static void buf_raw(struct buf *b, const char *s, size_t n)
{
    buf_reserve(b, n);
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void buf_fmt(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    buf_reserve(b, (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* RESP: the array header, then bulk strings. */
static void resp_array(struct buf *b, int n)
{
    buf_fmt(b, "*%d\r\n", n);
}

static void resp_bulk(struct buf *b, const char *s, size_t n)
{
    buf_fmt(b, "$%zu\r\n", n);
    buf_raw(b, s, n);
    buf_raw(b, "\r\n", 2);
}

static void resp_str(struct buf *b, const char *s)
{
    resp_bulk(b, s, strlen(s));
}

static void resp_item(struct buf *b, uint64_t idx)
{
    buf_reserve(b, ITEM_LEN + 8);
    memcpy(b->p + b->len, "$16\r\n", 5);
    put_item(b->p + b->len + 5, idx);
    memcpy(b->p + b->len + 5 + ITEM_LEN, "\r\n", 2);
    b->len += ITEM_LEN + 7;
}

static void resp_u64(struct buf *b, uint64_t v)
{
    char s[24];
    int n = snprintf(s, sizeof s, "%" PRIu64, v);
    resp_bulk(b, s, (size_t)n);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, int n)
{
    double s[MAX_ROUNDS];
    if (n <= 0)
        return NAN;
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static void pin_to(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        fprintf(stderr, "bench: cannot pin to CPU %d: %s (timings unpinned)\n", cpu,
                strerror(errno));
}

/* ---- one redis-server ---------------------------------------------------- */

struct server {
    pid_t pid;
    int port;
    char dir[64];
    redisContext *ctl;  /* ordinary replies: setup, MEMORY USAGE, SCRIPT LOAD */
    redisContext *load; /* the timed pipeline, replies counted (tally_fns) */
};

static pid_t g_running = -1; /* killed at exit if a run stops early */

static void kill_running(void)
{
    if (g_running > 0) {
        kill(g_running, SIGKILL);
        waitpid(g_running, NULL, 0);
        g_running = -1;
    }
}

static void on_signal(int sig)
{
    (void)sig;
    kill_running();
    _exit(1);
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static void remove_dir(const char *dir)
{
    static const char *const files[] = {"redis.log", "dump.rdb", "temp.rdb"};
    char path[128];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
}

static void server_stop(struct server *s)
{
    if (s->ctl)
        redisFree(s->ctl);
    if (s->load)
        redisFree(s->load);
    s->ctl = s->load = NULL;
    if (s->pid > 0) {
        kill(s->pid, SIGTERM);
        int status;
        double give_up = now_s() + 10;
        while (waitpid(s->pid, &status, WNOHANG) == 0) {
            if (now_s() > give_up) {
                kill(s->pid, SIGKILL);
                waitpid(s->pid, &status, 0);
                break;
            }
            usleep(10000);
        }
        s->pid = -1;
        g_running = -1;
    }
    if (s->dir[0])
        remove_dir(s->dir);
    s->dir[0] = '\0';
}

static redisContext *connect_to(int port)
{
    struct timeval tv = {60, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, (struct timeval){2, 0});
    if (!c || c->err) {
        if (c)
            redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    return c;
}

/* Starts redis-server with module (NULL: none) pinned to o->server_cpu, in a
 * fresh directory, and connects both contexts.  Returns 0 or -1. */
static int server_start(const struct opts *o, const char *module, struct server *s)
{
    memset(s, 0, sizeof *s);
    s->pid = -1;
    snprintf(s->dir, sizeof s->dir, "/tmp/kv-redis-bench-XXXXXX");
    if (!mkdtemp(s->dir)) {
        fprintf(stderr, "bench: mkdtemp: %s\n", strerror(errno));
        s->dir[0] = '\0';
        return -1;
    }
    s->port = free_port();
    char port[16], log[96];
    snprintf(port, sizeof port, "%d", s->port);
    snprintf(log, sizeof log, "%s/redis.log", s->dir);
    const char *argv[32];
    int n = 0;
    argv[n++] = o->server;
    argv[n++] = "--port";
    argv[n++] = port;
    argv[n++] = "--bind";
    argv[n++] = "127.0.0.1";
    argv[n++] = "--dir";
    argv[n++] = s->dir;
    argv[n++] = "--logfile";
    argv[n++] = log;
    argv[n++] = "--save";
    argv[n++] = "";
    argv[n++] = "--appendonly";
    argv[n++] = "no";
    argv[n++] = "--daemonize";
    argv[n++] = "no";
    argv[n++] = "--protected-mode";
    argv[n++] = "no";
    if (module) {
        argv[n++] = "--loadmodule";
        argv[n++] = module;
    }
    argv[n] = NULL;

    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "bench: fork: %s\n", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* dies with the bench */
        if (o->server_cpu >= 0)
            pin_to(o->server_cpu);
        execv(o->server, (char *const *)argv);
        fprintf(stderr, "bench: exec %s: %s\n", o->server, strerror(errno));
        _exit(127);
    }
    s->pid = g_running = pid;

    double give_up = now_s() + 30;
    for (;;) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            fprintf(stderr, "bench: redis-server exited at start:\n");
            FILE *f = fopen(log, "r");
            char line[512];
            while (f && fgets(line, sizeof line, f))
                fputs(line, stderr);
            if (f)
                fclose(f);
            s->pid = g_running = -1;
            server_stop(s);
            return -1;
        }
        redisContext *c = connect_to(s->port);
        if (c) {
            redisReply *r = redisCommand(c, "PING");
            int up = r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0;
            if (r)
                freeReplyObject(r);
            if (up) {
                s->ctl = c;
                break;
            }
            redisFree(c);
        }
        if (now_s() > give_up) {
            fprintf(stderr, "bench: redis-server on port %d did not answer (see %s)\n", s->port,
                    log);
            server_stop(s);
            return -1;
        }
        usleep(20000);
    }
    s->load = connect_to(s->port);
    if (!s->load) {
        server_stop(s);
        return -1;
    }
    s->load->reader->fn = &tally_fns;
    return 0;
}

/* CPU seconds redis-server has used so far (utime + stime). */
static double server_cpu_s(const struct server *s)
{
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)s->pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return NAN;
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = '\0';
    char *p = strrchr(line, ')'); /* the command name may hold spaces */
    unsigned long long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return NAN;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* A command on the control connection that must not fail; returns the reply
 * (caller frees) or NULL after reporting. */
static redisReply *ctl_cmd(struct server *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(s->ctl, fmt, ap);
    va_end(ap);
    if (!r) {
        fail("control connection: %s", s->ctl->errstr);
        return NULL;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        fail("%s: %s", fmt, r->str);
        freeReplyObject(r);
        return NULL;
    }
    return r;
}

/* ---- the timed pipelines ------------------------------------------------- */

struct gen {
    enum phase phase;
    uint64_t cap; /* filter capacity */
    uint64_t cmds_per_pass;
    uint64_t lua_bits;    /* bitmap size, Lua phases */
    uint64_t lua_present; /* items added by the Lua add phase */
    char key[48];         /* the filter queried (BF.MEXISTS) */
    char sha[41];         /* the Lua script */
    uint64_t rng;
};

/* Appends the requests of unit j to b; returns how many commands. */
static int gen_unit(struct gen *g, uint64_t j, struct buf *b)
{
    int ncmd = 0;
    char key[48];
    switch (g->phase) {
    case P_MADD: {
        uint64_t pass = j / g->cmds_per_pass, i = j % g->cmds_per_pass;
        if (i == 0 && pass > 0) { /* a new filter: drop the last, reserve the next */
            snprintf(key, sizeof key, "bf:%" PRIu64, pass - 1);
            resp_array(b, 2);
            resp_str(b, "DEL");
            resp_str(b, key);
            snprintf(key, sizeof key, "bf:%" PRIu64, pass);
            resp_array(b, 5);
            resp_str(b, "BF.RESERVE");
            resp_str(b, key);
            resp_str(b, "0.01");
            resp_u64(b, g->cap);
            resp_str(b, "NONSCALING");
            ncmd += 2;
        }
        snprintf(key, sizeof key, "bf:%" PRIu64, pass);
        resp_array(b, 2 + BATCH);
        resp_str(b, "BF.MADD");
        resp_str(b, key);
        for (int s = 0; s < BATCH; s++)
            resp_item(b, i * BATCH + (uint64_t)s);
        return ncmd + 1;
    }
    case P_MEXISTS:
    case P_CEIL_BF:
    case P_SMIS:
        resp_array(b, 2 + BATCH);
        resp_str(b, g->phase == P_SMIS ? "SMISMEMBER" : "BF.MEXISTS");
        resp_str(b, g->phase == P_MEXISTS ? g->key : "missing");
        for (int s = 0; s < BATCH; s++) /* even: never added; odd: added */
            resp_item(b, s & 1 ? splitmix64(&g->rng) % g->cap
                               : g->cap + j * (BATCH / 2) + (uint64_t)s / 2);
        return 1;
    case P_LUA_ADD:
    case P_LUA_QUERY:
        resp_array(b, 4 + BATCH * LUA_K);
        resp_str(b, "EVALSHA");
        resp_str(b, g->sha);
        resp_str(b, "1");
        resp_str(b, "gozero");
        for (int s = 0; s < BATCH; s++) {
            uint64_t idx;
            if (g->phase == P_LUA_ADD)
                idx = j * BATCH + (uint64_t)s;
            else
                idx = s & 1 ? splitmix64(&g->rng) % g->lua_present
                            : g->cap + j * (BATCH / 2) + (uint64_t)s / 2;
            char item[ITEM_LEN];
            put_item(item, idx);
            /* go-zero: probe i hashes the item with i appended; here the probe
       * number seeds a 64-bit hash of the item. */
            for (int k = 0; k < LUA_K; k++)
                resp_u64(b, XXH3_64bits_withSeed(item, ITEM_LEN, (uint64_t)k) % g->lua_bits);
        }
        return 1;
    case P_N: break;
    }
    return 0;
}

struct result {
    double items_per_s;
    double server_cpu; /* fraction of one CPU */
    double client_cpu; /* this process's, fraction of one CPU */
    struct tally t;
    uint64_t items, commands;
};

static double self_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

/* Sends units [0, nunits) with at most o->window commands in flight and
 * reads every reply; items = nunits * BATCH. */
static int run_pipeline(const struct opts *o, struct server *s, struct gen *g, uint64_t nunits,
                        struct result *res)
{
    struct buf b = {0};
    redisContext *c = s->load;
    uint64_t j = 0, inflight = 0, commands = 0;
    memset(&g_tally, 0, sizeof g_tally);
    double cpu0 = server_cpu_s(s), self0 = self_cpu_s(), t0 = now_s();
    while (j < nunits || inflight > 0) {
        while (j < nunits && inflight < (uint64_t)o->window) {
            b.len = 0;
            int n = gen_unit(g, j++, &b);
            if (redisAppendFormattedCommand(c, b.p, b.len) != REDIS_OK) {
                fail("append: %s", c->errstr);
                free(b.p);
                return -1;
            }
            inflight += (uint64_t)n;
            commands += (uint64_t)n;
        }
        void *reply;
        if (redisGetReply(c, &reply) != REDIS_OK) {
            fail("%s: connection: %s", phase_name[g->phase], c->errstr);
            free(b.p);
            return -1;
        }
        inflight--;
    }
    double secs = now_s() - t0, cpu1 = server_cpu_s(s), self1 = self_cpu_s();
    free(b.p);
    res->t = g_tally;
    res->items = nunits * BATCH;
    res->commands = commands;
    res->items_per_s = (double)res->items / secs;
    res->server_cpu = (cpu1 - cpu0) / secs;
    res->client_cpu = (self1 - self0) / secs;
    if (g_tally.errors)
        fail("%s: %" PRIu64 " error replies, the first: %s", phase_name[g->phase], g_tally.errors,
             g_tally.first_error);
    return 0;
}

/* perf record on the server for one phase: started before it, stopped
 * (SIGINT, perf writes its file) after.  Returns perf's pid or -1. */
static pid_t perf_start(const struct opts *o, const struct server *s, enum contender who,
                        uint64_t cap, const char *phase)
{
    if (!o->perf_dir)
        return -1;
    char out[512], pid[16];
    snprintf(out, sizeof out, "%s/%s-%" PRIu64 "-%s.data", o->perf_dir,
             who == C_KV ? "kv" : "redisbloom", cap, phase);
    snprintf(pid, sizeof pid, "%d", (int)s->pid);
    pid_t p = fork();
    if (p == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        execlp("perf", "perf", "record", "-q", "-g", "-p", pid, "-o", out, (char *)NULL);
        _exit(127);
    }
    usleep(500000); /* let it attach before the phase starts */
    return p;
}

static void perf_stop(pid_t p)
{
    if (p <= 0)
        return;
    kill(p, SIGINT);
    waitpid(p, NULL, 0);
}

/* ---- the measurements ---------------------------------------------------- */

static double g_rate[C_N][P_N][MAX_CAPS][MAX_ROUNDS];
static double g_cpu[C_N][P_N][MAX_CAPS][MAX_ROUNDS];
static int g_have[C_N][P_N][MAX_CAPS];
static double g_fpr[C_N][MAX_CAPS], g_bytes_per_item[C_N][MAX_CAPS];
static uint64_t g_fn[C_N][MAX_CAPS];

static void record(enum contender who, enum phase p, int ci, int round, const struct result *r)
{
    g_rate[who][p][ci][round] = r->items_per_s;
    g_cpu[who][p][ci][round] = r->server_cpu;
    g_have[who][p][ci] = round + 1;
    printf("  round %d  %-10s %-24s %11.0f items/s  CPU: server %3.0f%%, client %3.0f%%\n",
           round + 1, contender_name[who], phase_name[p], r->items_per_s, r->server_cpu * 100,
           r->client_cpu * 100);
    fflush(stdout);
}

static uint64_t units_for(uint64_t items)
{
    return (items + BATCH - 1) / BATCH;
}

/* The module or RedisBloom: fill, query, ceiling, memory. */
static void run_filter(const struct opts *o, enum contender who, int ci, int round)
{
    struct server s;
    uint64_t cap = o->caps[ci];
    if (server_start(o, o->module[who], &s) != 0) {
        fail("%s: no server", contender_name[who]);
        return;
    }
    redisReply *r = ctl_cmd(&s, "BF.RESERVE bf:0 %f %llu NONSCALING", ERROR_RATE,
                            (unsigned long long)cap);
    if (!r)
        goto out;
    freeReplyObject(r);

    struct gen g = {.phase = P_MADD,
                    .cap = cap,
                    .cmds_per_pass = cap / BATCH,
                    .rng = 0x5eed0000u + (uint64_t)round};
    uint64_t passes = (o->min_items + cap - 1) / cap;
    struct result res;
    pid_t pf = perf_start(o, &s, who, cap, "madd");
    int rc = run_pipeline(o, &s, &g, passes * g.cmds_per_pass, &res);
    perf_stop(pf);
    if (rc != 0)
        goto out;
    /* every item of a pass is new to its filter: 1, or 0 for an item the
   * filter already claimed (a false positive at add time); never an error */
    if (res.t.ints != passes * cap)
        fail("%s BF.MADD: %" PRIu64 " item replies, expected %" PRIu64, contender_name[who],
             res.t.ints, passes * cap);
    record(who, P_MADD, ci, round, &res);

    snprintf(g.key, sizeof g.key, "bf:%" PRIu64, passes - 1);
    g.phase = P_MEXISTS;
    uint64_t qunits = units_for(cap > o->min_items ? cap : o->min_items);
    pf = perf_start(o, &s, who, cap, "mexists");
    rc = run_pipeline(o, &s, &g, qunits, &res);
    perf_stop(pf);
    if (rc != 0)
        goto out;
    uint64_t half = qunits * (BATCH / 2);
    g_fn[who][ci] += half - res.t.ones_odd;
    if (res.t.ones_odd != half)
        fail("%s BF.MEXISTS: %" PRIu64 " false negatives of %" PRIu64, contender_name[who],
             half - res.t.ones_odd, half);
    g_fpr[who][ci] = (double)res.t.ones_even / (double)half;
    if (g_fpr[who][ci] > 0.05)
        fail("%s BF.MEXISTS: false-positive rate %.4f", contender_name[who], g_fpr[who][ci]);
    record(who, P_MEXISTS, ci, round, &res);

    g.phase = P_CEIL_BF;
    if (run_pipeline(o, &s, &g, units_for(o->ceiling_items), &res) != 0)
        goto out;
    if (res.t.ones_odd + res.t.ones_even != 0)
        fail("%s: BF.MEXISTS on a missing key answered 1", contender_name[who]);
    record(who, P_CEIL_BF, ci, round, &res);

    r = ctl_cmd(&s, "MEMORY USAGE %s SAMPLES 0", g.key);
    if (r) {
        g_bytes_per_item[who][ci] = (double)r->integer / (double)cap;
        freeReplyObject(r);
    }
out:
    server_stop(&s);
}

/* Lua source, go-zero's two scripts made per-batch: ARGV holds LUA_K offsets
 * per item; the query answers 1/0 per item, stopping at an item's first 0. */
static const char lua_add[] =
    "for i = 1, #ARGV do redis.call('setbit', KEYS[1], ARGV[i], 1) end return #ARGV";
static const char lua_query[] =
    "local k, r = 7, {} "
    "for i = 0, #ARGV / k - 1 do "
    "  local hit = 1 "
    "  for j = 1, k do "
    "    if redis.call('getbit', KEYS[1], ARGV[i * k + j]) == 0 then hit = 0 break end "
    "  end "
    "  r[i + 1] = hit "
    "end return r";

static int load_script(struct server *s, const char *src, char sha[41])
{
    redisReply *r = ctl_cmd(s, "SCRIPT LOAD %s", src);
    if (!r)
        return -1;
    snprintf(sha, 41, "%s", r->str);
    freeReplyObject(r);
    return 0;
}

/* No module: the go-zero Lua bitmap, and SMISMEMBER on a missing key. */
static void run_bare(const struct opts *o, int ci, int round)
{
    struct server s;
    uint64_t cap = o->caps[ci];
    if (server_start(o, NULL, &s) != 0) {
        fail("no server for the Lua baseline");
        return;
    }
    struct gen g = {.cap = cap, .rng = 0x10a0000u + (uint64_t)round};
    struct result res;
    /* go-zero's sizing for cap items at 0.01: m = -n ln p / ln^2 2. */
    g.lua_bits = (uint64_t)(-(double)cap * log(ERROR_RATE) / (log(2) * log(2)));
    g.lua_present = o->lua_items < cap ? o->lua_items : cap;
    g.lua_present -= g.lua_present % BATCH;
    if (g.lua_present == 0)
        g.lua_present = BATCH;
    /* The bitmap as a filter that already holds cap - lua_present items: each
   * bit set with probability 1 - exp(-k n / m) (random bits, set by
   * comparing a random byte with that probability), so that after the
   * timed adds it is as full as a filter at capacity (half the bits set)
   * and a query costs what it would there.  The last bit is written first,
   * so the string has its full size before any timing, as go-zero's grows
   * to it on first use. */
    uint64_t bytes = (g.lua_bits + 7) / 8, chunk = 1 << 20;
    double density = 1 - exp(-(double)LUA_K * (double)(cap - g.lua_present) / (double)g.lua_bits);
    unsigned threshold = (unsigned)(density * 256 + 0.5);
    redisReply *r = ctl_cmd(&s, "SETBIT gozero %llu 0", (unsigned long long)(g.lua_bits - 1));
    if (!r)
        goto out;
    freeReplyObject(r);
    char *rnd = malloc(chunk);
    if (!rnd) {
        fail("out of memory");
        goto out;
    }
    for (uint64_t off = 0; threshold > 0 && off < bytes; off += chunk) {
        uint64_t n = bytes - off < chunk ? bytes - off : chunk;
        for (uint64_t i = 0; i < n; i++) {
            uint64_t v = splitmix64(&g.rng);
            unsigned char byte = 0;
            for (int bit = 0; bit < 8; bit++, v >>= 8)
                if ((v & 0xff) < threshold)
                    byte |= (unsigned char)(1u << bit);
            rnd[i] = (char)byte;
        }
        r = ctl_cmd(&s, "SETRANGE gozero %llu %b", (unsigned long long)off, rnd, (size_t)n);
        if (!r) {
            free(rnd);
            goto out;
        }
        freeReplyObject(r);
    }
    free(rnd);

    g.phase = P_LUA_ADD;
    if (load_script(&s, lua_add, g.sha) != 0 ||
        run_pipeline(o, &s, &g, g.lua_present / BATCH, &res) != 0)
        goto out;
    record(C_BARE, P_LUA_ADD, ci, round, &res);

    g.phase = P_LUA_QUERY;
    uint64_t qunits = g.lua_present / BATCH;
    if (load_script(&s, lua_query, g.sha) != 0 || run_pipeline(o, &s, &g, qunits, &res) != 0)
        goto out;
    if (res.t.ones_odd != qunits * (BATCH / 2))
        fail("Lua bitmap: %" PRIu64 " false negatives", qunits * (BATCH / 2) - res.t.ones_odd);
    g_fpr[C_BARE][ci] = (double)res.t.ones_even / (double)(qunits * (BATCH / 2));
    record(C_BARE, P_LUA_QUERY, ci, round, &res);

    g.phase = P_SMIS;
    if (run_pipeline(o, &s, &g, units_for(o->ceiling_items), &res) != 0)
        goto out;
    if (res.t.ones_odd + res.t.ones_even != 0)
        fail("SMISMEMBER on a missing key answered 1");
    record(C_BARE, P_SMIS, ci, round, &res);
    g_bytes_per_item[C_BARE][ci] = (double)bytes / (double)cap;
out:
    server_stop(&s);
}

/* ---- the report ---------------------------------------------------------- */

static int g_per_cpu; /* report items per server CPU-second instead of per second */

static double med(enum contender who, enum phase p, int ci)
{
    if (!g_per_cpu)
        return median(g_rate[who][p][ci], g_have[who][p][ci]);
    double v[MAX_ROUNDS];
    int n = 0;
    for (int r = 0; r < g_have[who][p][ci]; r++) /* a phase too short to see any CPU: left out */
        if (g_cpu[who][p][ci][r] > 0)
            v[n++] = g_rate[who][p][ci][r] / g_cpu[who][p][ci][r];
    return median(v, n);
}

static void fmt_rate(char *out, size_t n, double v)
{
    if (isnan(v))
        snprintf(out, n, "-");
    else if (v >= 1e6)
        snprintf(out, n, "%.2fM", v / 1e6);
    else
        snprintf(out, n, "%.0fk", v / 1e3);
}

static void row(const struct opts *o, const char *label, enum contender who, enum phase p)
{
    char cell[32];
    printf("| %s |", label);
    for (int ci = 0; ci < o->ncaps; ci++) {
        fmt_rate(cell, sizeof cell, med(who, p, ci));
        printf(" %s |", cell);
    }
    printf("\n");
}

static void ratio_row(const struct opts *o, const char *label, enum contender a, enum phase pa,
                      enum contender b, enum phase pb)
{
    printf("| %s |", label);
    for (int ci = 0; ci < o->ncaps; ci++) {
        double x = med(a, pa, ci), y = med(b, pb, ci);
        if (isnan(x) || isnan(y) || y == 0)
            printf(" - |");
        else
            printf(" %.2fx |", x / y);
    }
    printf("\n");
}

static void cap_label(char *out, size_t n, uint64_t cap)
{
    if (cap >= 1000000 && cap % 1000000 == 0)
        snprintf(out, n, "%" PRIu64 "M", cap / 1000000);
    else if (cap >= 1000 && cap % 1000 == 0)
        snprintf(out, n, "%" PRIu64 "k", cap / 1000);
    else
        snprintf(out, n, "%" PRIu64, cap);
}

/* One issue-31 target: the module's rate over another's, at least want. */
static void target(const struct opts *o, int ci, const char *what, enum contender b, enum phase pa,
                   enum phase pb, double want)
{
    double x = med(C_KV, pa, ci), y = med(b, pb, ci);
    char cap[24];
    if (isnan(x) || isnan(y))
        return;
    cap_label(cap, sizeof cap, o->caps[ci]);
    printf("  %-4s %-38s %6.2fx  (target >= %.1fx)  %s\n", cap, what, x / y, want,
           x / y >= want ? "met" : "MISSED");
}

static void rate_table(const struct opts *o)
{
    char cap[24];
    if (g_per_cpu)
        printf("\nitems per second of redis-server CPU time (items/s over the server's CPU use\n"
               "in the phase; steadier than items/s when other work shares the server's CPU),\n"
               "median of %d round%s\n\n| items/CPU-s |",
               o->rounds, o->rounds > 1 ? "s" : "");
    else
        printf("\nitems/s, median of %d round%s (one connection, %d commands in flight, %d items "
               "per command, error rate 0.01, NONSCALING)\n\n| items/s |",
               o->rounds, o->rounds > 1 ? "s" : "", o->window, BATCH);
    for (int ci = 0; ci < o->ncaps; ci++) {
        cap_label(cap, sizeof cap, o->caps[ci]);
        printf(" %s capacity |", cap);
    }
    printf("\n|---|");
    for (int ci = 0; ci < o->ncaps; ci++)
        printf("---|");
    printf("\n");
    if (o->module[C_KV]) {
        row(o, "kv module BF.MEXISTS", C_KV, P_MEXISTS);
        row(o, "kv module BF.MADD", C_KV, P_MADD);
    }
    if (o->module[C_RB]) {
        row(o, "RedisBloom BF.MEXISTS", C_RB, P_MEXISTS);
        row(o, "RedisBloom BF.MADD", C_RB, P_MADD);
    }
    row(o, "go-zero bitmap + Lua (k=7, one EVALSHA per 100 items), query", C_BARE, P_LUA_QUERY);
    row(o, "go-zero bitmap + Lua, add", C_BARE, P_LUA_ADD);
    if (o->module[C_RB])
        row(o, "ceiling: BF.MEXISTS on a missing key (RedisBloom)", C_RB, P_CEIL_BF);
    if (o->module[C_KV])
        row(o, "ceiling: BF.MEXISTS on a missing key (kv module)", C_KV, P_CEIL_BF);
    row(o, "ceiling: SMISMEMBER on a missing key", C_BARE, P_SMIS);
    if (o->module[C_KV] && o->module[C_RB]) {
        ratio_row(o, "kv / RedisBloom, BF.MEXISTS", C_KV, P_MEXISTS, C_RB, P_MEXISTS);
        ratio_row(o, "kv / RedisBloom, BF.MADD", C_KV, P_MADD, C_RB, P_MADD);
    }
    if (o->module[C_KV]) {
        ratio_row(o, "kv / Lua bitmap, query", C_KV, P_MEXISTS, C_BARE, P_LUA_QUERY);
        ratio_row(o, "kv / Lua bitmap, add", C_KV, P_MADD, C_BARE, P_LUA_ADD);
    }
}

static void report(const struct opts *o)
{
    char cap[24];
    g_per_cpu = 0;
    rate_table(o);
    g_per_cpu = 1;
    rate_table(o);
    g_per_cpu = 0;

    printf("\nmemory and accuracy (filter at capacity; false positives over the BF.MEXISTS\n"
           "phase's never-added items)\n\n"
           "| filter | capacity | MEMORY USAGE bytes/item | bits/item | false positives | "
           "false negatives |\n|---|---|---|---|---|---|\n");
    for (int ci = 0; ci < o->ncaps; ci++) {
        cap_label(cap, sizeof cap, o->caps[ci]);
        for (int who = 0; who < C_N; who++) {
            if (who != C_BARE && !o->module[who])
                continue;
            double bpi = g_bytes_per_item[who][ci];
            printf("| %s | %s | %.3f | %.2f | %.3f%% | %" PRIu64 " |\n",
                   who == C_BARE ? "go-zero bitmap" : contender_name[who], cap, bpi, bpi * 8,
                   g_fpr[who][ci] * 100, g_fn[who][ci]);
        }
    }

    double cpu_min = 2;
    for (int who = 0; who < C_N; who++)
        for (int p = 0; p < P_N; p++)
            for (int ci = 0; ci < o->ncaps; ci++)
                for (int r = 0; r < g_have[who][p][ci]; r++)
                    if (g_cpu[who][p][ci][r] < cpu_min)
                        cpu_min = g_cpu[who][p][ci][r];
    printf("\nlowest redis-server CPU use in any timed phase: %.0f%% of one CPU%s\n", cpu_min * 100,
           cpu_min < 0.9 ? " (below 90%: the client or the machine, not the server, set the pace)"
                         : "");

    if (o->module[C_KV]) {
        printf("\nissue 31 targets (module vs the others, same run):\n");
        for (int ci = 0; ci < o->ncaps; ci++) {
            int big = o->caps[ci] >= 10000000;
            for (g_per_cpu = 0; g_per_cpu < 2; g_per_cpu++) {
                const char *per = g_per_cpu ? " (per CPU-s)" : "";
                char what[64];
                if (o->module[C_RB]) {
                    snprintf(what, sizeof what, "BF.MEXISTS vs RedisBloom%s", per);
                    target(o, ci, what, C_RB, P_MEXISTS, P_MEXISTS, big ? 1.8 : 1.3);
                    snprintf(what, sizeof what, "BF.MADD vs RedisBloom%s", per);
                    target(o, ci, what, C_RB, P_MADD, P_MADD, big ? 1.6 : 1.2);
                }
                snprintf(what, sizeof what, "BF.MEXISTS vs Lua query%s", per);
                target(o, ci, what, C_BARE, P_MEXISTS, P_LUA_QUERY, 20);
                snprintf(what, sizeof what, "BF.MADD vs Lua add%s", per);
                target(o, ci, what, C_BARE, P_MADD, P_LUA_ADD, 20);
            }
            g_per_cpu = 0;
            cap_label(cap, sizeof cap, o->caps[ci]);
            if (o->module[C_RB] && g_bytes_per_item[C_RB][ci] > 0) {
                double m = g_bytes_per_item[C_KV][ci] / g_bytes_per_item[C_RB][ci];
                printf("  %-4s %-38s %6.2fx  (target <= 1.1x)  %s\n", cap,
                       "memory/item vs RedisBloom", m, m <= 1.1 ? "met" : "MISSED");
            }
            printf("  %-4s %-38s %6.3f%% (target <= 1.25%%)  %s\n", cap, "measured false positives",
                   g_fpr[C_KV][ci] * 100, g_fpr[C_KV][ci] <= 0.0125 ? "met" : "MISSED");
        }
    }
}

/* ---- arguments ----------------------------------------------------------- */

static void usage(void)
{
    fputs("usage: bench --module kv_redis.so [--redisbloom redisbloom.so]\n"
          "             [--capacities N,N...] [--rounds R] [--min-items N] [--lua-items N]\n"
          "             [--ceiling-items N] [--window W] [--server redis-server]\n"
          "             [--server-cpu C] [--client-cpu C]   (C = -1: unpinned)\n"
          "             [--perf-dir DIR]   (perf record the BF.MADD/BF.MEXISTS phases)\n",
          stderr);
    exit(2);
}

static uint64_t parse_u64(const char *s)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || v == 0) {
        fprintf(stderr, "bench: not a positive integer: %s\n", s);
        usage();
    }
    return v;
}

int main(int argc, char **argv)
{
    struct opts o = {.server = "/usr/bin/redis-server",
                     .rounds = 3,
                     .min_items = 5000000,
                     .lua_items = 1000000,
                     .ceiling_items = 10000000,
                     .window = 100,
                     .server_cpu = 0,
                     .client_cpu = 1};
    o.caps[0] = 100000;
    o.caps[1] = 20000000;
    o.ncaps = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            usage();
        i++;
        if (!strcmp(a, "--module"))
            o.module[C_KV] = v;
        else if (!strcmp(a, "--redisbloom"))
            o.module[C_RB] = v;
        else if (!strcmp(a, "--server"))
            o.server = v;
        else if (!strcmp(a, "--rounds"))
            o.rounds = (int)parse_u64(v);
        else if (!strcmp(a, "--min-items"))
            o.min_items = parse_u64(v);
        else if (!strcmp(a, "--lua-items"))
            o.lua_items = parse_u64(v);
        else if (!strcmp(a, "--ceiling-items"))
            o.ceiling_items = parse_u64(v);
        else if (!strcmp(a, "--window"))
            o.window = (int)parse_u64(v);
        else if (!strcmp(a, "--server-cpu"))
            o.server_cpu = atoi(v);
        else if (!strcmp(a, "--client-cpu"))
            o.client_cpu = atoi(v);
        else if (!strcmp(a, "--perf-dir"))
            o.perf_dir = v;
        else if (!strcmp(a, "--capacities")) {
            char tmp[256];
            snprintf(tmp, sizeof tmp, "%s", v);
            o.ncaps = 0;
            for (char *t = strtok(tmp, ","); t; t = strtok(NULL, ",")) {
                if (o.ncaps == MAX_CAPS)
                    usage();
                o.caps[o.ncaps++] = parse_u64(t);
            }
        } else
            usage();
    }
    if (!o.module[C_KV] && !o.module[C_RB])
        usage();
    if (o.rounds > MAX_ROUNDS || o.ncaps == 0)
        usage();
    for (int ci = 0; ci < o.ncaps; ci++)
        if (o.caps[ci] % BATCH) {
            fprintf(stderr, "bench: capacities must be multiples of %d\n", BATCH);
            return 2;
        }
    /* absolute paths: redis-server loads modules after moving to its --dir */
    static char abs_path[C_BARE][4096];
    for (int who = 0; who < C_BARE; who++) {
        if (!o.module[who])
            continue;
        if (!realpath(o.module[who], abs_path[who])) {
            fprintf(stderr, "bench: %s: %s\n", o.module[who], strerror(errno));
            return 2;
        }
        o.module[who] = abs_path[who];
    }
    if (access(o.server, X_OK) != 0) {
        printf("SKIP: %s: %s (apt-get install redis-server)\n", o.server, strerror(errno));
        return 77;
    }
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
        fprintf(stderr, "bench: one CPU: server and client unpinned\n");
        o.server_cpu = o.client_cpu = -1;
    }
    if (o.client_cpu >= 0)
        pin_to(o.client_cpu);
    atexit(kill_running);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGPIPE, SIG_IGN);

    printf("bench: server %s on CPU %d, client on CPU %d\n", o.server, o.server_cpu, o.client_cpu);
    for (int round = 0; round < o.rounds; round++)
        for (int ci = 0; ci < o.ncaps; ci++) {
            char cap[24];
            cap_label(cap, sizeof cap, o.caps[ci]);
            printf("round %d, capacity %s\n", round + 1, cap);
            /* the two modules take turns; which goes first alternates by round */
            enum contender first = round % 2 ? C_RB : C_KV, second = round % 2 ? C_KV : C_RB;
            if (o.module[first])
                run_filter(&o, first, ci, round);
            if (o.module[second])
                run_filter(&o, second, ci, round);
            run_bare(&o, ci, round);
        }
    for (int who = 0; who < C_BARE; who++)
        for (int ci = 0; ci < o.ncaps; ci++)
            if (o.module[who] && g_fn[who][ci])
                g_failed = 1;
    report(&o);
    return g_failed ? 1 : 0;
}
