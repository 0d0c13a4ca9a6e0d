/* memlimit.c - --memory_limit=BYTES: the engine runs with BYTES of memory,
 * its page cache included, so that a database larger than that is read
 * from the device. Tried in this order:
 *   1. cgroup v2, where the memory controller is on in the unified
 *      hierarchy: a child group "kvbench-<pid>" of the process's own group
 *      when that group hands the memory controller to its children
 *      ("memory" in its cgroup.subtree_control), else of the hierarchy's
 *      root when the root does; memory.max = BYTES; the process moves in.
 *   2. cgroup v1, where the memory controller is mounted on its own: a
 *      child "kvbench-<pid>" of the process's own memory group;
 *      memory.limit_in_bytes = BYTES; the process moves in.
 *   3. neither writable (no such hierarchy, not allowed, or the variable
 *      KVBENCH_NO_CGROUP set, which the tests use): kv and RocksDB read
 *      table data with O_DIRECT past the page cache, with a block cache of
 *      BYTES (unless --use_direct_reads or --cache_size was given: those
 *      stay as given); LevelDB and LMDB have no direct reads and are not
 *      limited, which the header and the JSON say.
 * The move happens before the database opens, while the process has one
 * thread; engines' threads and --scaling's child processes start inside
 * the group. The page cache pages the engine's files fill are charged to
 * the group (both versions), so the kernel evicts them past the limit.
 * At exit (memlimit_leave: teardown, also after SIGINT or SIGTERM) the
 * process moves back to the group it came from and the child is removed:
 * no controller is switched on anywhere and no other group is touched. A
 * process killed by SIGKILL leaves its empty child behind; `rmdir` removes
 * it. */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

/* Writes text to path (a cgroup control file): 0, or -1 with errno. */
static int put_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    int ok = fputs(text, f) >= 0;
    int e = errno;
    if (fclose(f) != 0 && ok) { /* the kernel's verdict comes with the write at close */
        ok = 0;
        e = errno;
    }
    errno = e;
    return ok ? 0 : -1;
}

/* Whether the file at path holds `word` as a whole word (space-separated). */
static int has_word(const char *path, const char *word)
{
    char line[1024];
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int found = 0;
    size_t n = strlen(word);
    while (!found && fgets(line, sizeof line, f))
        for (char *p = line; (p = strstr(p, word)) != NULL; p += n)
            if ((p == line || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\n' || !p[n]))
                found = 1;
    fclose(f);
    return found;
}

/* The mount point of the cgroup2 hierarchy (v2), or of the v1 hierarchy
 * that holds the memory controller, from /proc/self/mountinfo; only one
 * mounted at its root ("/"). 0, or -1 when there is none. */
static int find_mount(int v2, char *out, size_t n)
{
    FILE *f = fopen("/proc/self/mountinfo", "r");
    if (!f)
        return -1;
    char line[4096];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        /* id parent major:minor root mountpoint options [tags] - fstype source super */
        char root[1024], mnt[1024], fstype[64], super[1024] = "";
        const char *dash = strstr(line, " - ");
        if (!dash || sscanf(line, "%*s %*s %*s %1023s %1023s", root, mnt) != 2 ||
            sscanf(dash + 3, "%63s %*s %1023s", fstype, super) < 1 || strcmp(root, "/") != 0)
            continue;
        if (v2)
            found = !strcmp(fstype, "cgroup2");
        else if (!strcmp(fstype, "cgroup"))
            for (char *tok = strtok(super, ","); tok && !found; tok = strtok(NULL, ","))
                found = !strcmp(tok, "memory");
        if (found)
            snprintf(out, n, "%s", mnt);
    }
    fclose(f);
    return found ? 0 : -1;
}

/* The process's group (v2: the "0::" line; v1: the line whose controllers
 * include memory) from /proc/self/cgroup, "/" for the root. 0, or -1. */
static int own_group(int v2, char *out, size_t n)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f)
        return -1;
    char line[1024];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = 0;
        if (v2)
            found = !strcmp(line, "0") && c1[1] == 0;
        else
            for (char *tok = strtok(c1 + 1, ","); tok && !found; tok = strtok(NULL, ","))
                found = !strcmp(tok, "memory");
        if (found)
            snprintf(out, n, "%s", c2 + 1);
    }
    fclose(f);
    return found ? 0 : -1;
}

/* Makes the child group under parent, sets its limit (the file `limit`),
 * and moves the process in, from the group home. 0, or -1 (the child
 * removed again, errno kept). */
static int join_child(struct memlimit *m, const char *parent, const char *home, const char *limit,
                      uint64_t bytes)
{
    char path[600], text[32];
    if (snprintf(m->group, sizeof m->group, "%s/kvbench-%ld", parent, (long)getpid()) >=
            (int)sizeof m->group ||
        snprintf(m->home, sizeof m->home, "%s", home) >= (int)sizeof m->home) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (mkdir(m->group, 0755) != 0)
        return -1;
    snprintf(path, sizeof path, "%s/%s", m->group, limit);
    snprintf(text, sizeof text, "%llu", (unsigned long long)bytes);
    int rc = put_text(path, text);
    snprintf(path, sizeof path, "%s/cgroup.procs", m->group);
    snprintf(text, sizeof text, "%ld", (long)getpid());
    if (rc == 0)
        rc = put_text(path, text);
    if (rc != 0) {
        int e = errno;
        rmdir(m->group);
        m->group[0] = 0;
        errno = e;
    }
    return rc;
}

/* Version 2: under the own group when it delegates memory, else under the root. */
static int try_v2(struct memlimit *m, uint64_t bytes)
{
    char mnt[1024], grp[1024], home[2100], sub[2200];
    if (find_mount(1, mnt, sizeof mnt) != 0 || own_group(1, grp, sizeof grp) != 0)
        return -1;
    snprintf(home, sizeof home, "%s%s", mnt, strcmp(grp, "/") ? grp : "");
    snprintf(sub, sizeof sub, "%s/cgroup.subtree_control", home);
    if (has_word(sub, "memory") && join_child(m, home, home, "memory.max", bytes) == 0)
        return 0;
    snprintf(sub, sizeof sub, "%s/cgroup.subtree_control", mnt);
    if (strcmp(grp, "/") && has_word(sub, "memory") &&
        join_child(m, mnt, home, "memory.max", bytes) == 0)
        return 0;
    return -1;
}

static int try_v1(struct memlimit *m, uint64_t bytes)
{
    char mnt[1024], grp[1024], home[2100];
    if (find_mount(0, mnt, sizeof mnt) != 0 || own_group(0, grp, sizeof grp) != 0)
        return -1;
    snprintf(home, sizeof home, "%s%s", mnt, strcmp(grp, "/") ? grp : "");
    return join_child(m, home, home, "memory.limit_in_bytes", bytes);
}

/* Whether engine e reads past the page cache in a fallback run. */
static int has_direct_reads(const struct bench_engine *e)
{
    return e == &bench_kv_engine || !strcmp(e->name, "rocksdb");
}

int memlimit_enter(struct ctx *c)
{
    struct options *o = &c->o;
    struct memlimit *m = &c->mem;
    m->mech = MEM_NONE;
    if (!o->memory_limit)
        return 0;
    const char *off = getenv("KVBENCH_NO_CGROUP");
    if (!(off && *off) && try_v2(m, o->memory_limit) == 0) {
        m->mech = MEM_CGROUP_V2;
        return 0;
    }
    if (!(off && *off) && try_v1(m, o->memory_limit) == 0) {
        m->mech = MEM_CGROUP_V1;
        return 0;
    }
    /* The fallback: what the engines themselves can hold to the limit
     * (an engine without direct reads keeps its cache as it was; under
     * --scaling and --timeline the settings are every engine's). */
    m->mech = MEM_DIRECT;
    if (!(o->nscaling || o->timeline) && !has_direct_reads(c->e))
        return 0;
    if (!o->use_direct_reads_set)
        o->use_direct_reads = 1;
    if (!o->cache_size_set)
        o->cache_size = (size_t)o->memory_limit;
    return 0;
}

void memlimit_leave(struct ctx *c)
{
    struct memlimit *m = &c->mem;
    if (m->mech != MEM_CGROUP_V1 && m->mech != MEM_CGROUP_V2)
        return;
    if (!m->group[0])
        return;
    char path[600], text[32];
    snprintf(path, sizeof path, "%s/cgroup.procs", m->home);
    snprintf(text, sizeof text, "%ld", (long)getpid());
    if (put_text(path, text) != 0)
        fprintf(stderr, "kvbench: cannot move back into %s: %s\n", m->home, strerror(errno));
    /* The group empties as the move completes; a few tries for a kernel
     * that is still taking the last thread out. */
    int rc = -1;
    for (int i = 0; i < 50 && (rc = rmdir(m->group)) != 0 && errno == EBUSY; i++) {
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (rc != 0)
        fprintf(stderr, "kvbench: cannot remove the cgroup %s: %s\n", m->group, strerror(errno));
    m->group[0] = 0;
}

const char *memlimit_mech_name(const struct ctx *c, const struct bench_engine *e)
{
    switch (c->mem.mech) {
    case MEM_CGROUP_V2: return "cgroup_v2";
    case MEM_CGROUP_V1: return "cgroup_v1";
    case MEM_DIRECT: return has_direct_reads(e) ? "direct_reads" : "not_limited";
    default: return "none";
    }
}

void memlimit_print(FILE *f, const struct ctx *c, int several)
{
    const struct options *o = &c->o;
    if (c->mem.mech == MEM_NONE)
        return;
    char lim[32], cache[32];
    human_bytes(lim, sizeof lim, (double)o->memory_limit);
    human_bytes(cache, sizeof cache, (double)o->cache_size);
    if (c->mem.mech == MEM_CGROUP_V2 || c->mem.mech == MEM_CGROUP_V1) {
        fprintf(f,
                "Memory:      %s for the whole process, page cache included: cgroup %s, %s of %s\n",
                lim, c->mem.mech == MEM_CGROUP_V2 ? "v2" : "v1",
                c->mem.mech == MEM_CGROUP_V2 ? "memory.max" : "memory.limit_in_bytes",
                c->mem.group);
        return;
    }
    int direct = several || has_direct_reads(c->e);
    fprintf(f, "Memory:      %s: no writable cgroup, so ", lim);
    if (direct)
        fprintf(f, "direct reads (%s) and a %s block cache (kv, RocksDB)",
                o->use_direct_reads ? "O_DIRECT" : "off: --use_direct_reads=0 given",
                o->cache_size ? cache : "no");
    if (several)
        fprintf(f, "; LevelDB and LMDB not limited (no direct reads)\n");
    else if (!direct)
        fprintf(f, "not limited: %s has no direct reads\n", c->e->name);
    else
        fprintf(f, "\n");
}
