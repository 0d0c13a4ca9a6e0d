/* common.c - kvbench's small helpers: the clock, name hashing, formatting. */
#define _XOPEN_SOURCE 700
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

/* ---- small helpers --------------------------------------------------------------- */

double now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t proc_open_files(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return 0;
    uint64_t n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n ? n - 1 : 0; /* less the descriptor opendir itself holds */
}

uint64_t proc_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size, resident;
    int ok = f && fscanf(f, "%llu %llu", &size, &resident) == 2;
    if (f)
        fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return ok && page > 0 ? (uint64_t)resident * (uint64_t)page : 0;
}

uint64_t proc_rss_file_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size, resident, shared;
    int ok = f && fscanf(f, "%llu %llu %llu", &size, &resident, &shared) == 3;
    if (f)
        fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return ok && page > 0 ? (uint64_t)shared * (uint64_t)page : 0;
}

uint64_t proc_write_bytes(int *rusage)
{
    FILE *f = fopen("/proc/self/io", "r");
    char line[128];
    unsigned long long n;
    int ok = 0;
    while (f && !ok && fgets(line, sizeof line, f))
        ok = sscanf(line, "write_bytes: %llu", &n) == 1;
    if (f)
        fclose(f);
    *rusage = !ok;
    if (ok)
        return (uint64_t)n;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (uint64_t)ru.ru_oublock * 512;
}

int proc_read_calls(uint64_t *out)
{
    FILE *f = fopen("/proc/self/io", "r");
    char line[128];
    unsigned long long n;
    int ok = 0;
    while (f && !ok && fgets(line, sizeof line, f))
        ok = sscanf(line, "syscr: %llu", &n) == 1;
    if (f)
        fclose(f);
    *out = ok ? (uint64_t)n : 0;
    return ok ? 0 : -1;
}

int proc_read_bytes(uint64_t *out)
{
    FILE *f = fopen("/proc/self/io", "r");
    char line[128];
    unsigned long long n;
    int ok = 0;
    while (f && !ok && fgets(line, sizeof line, f))
        ok = sscanf(line, "read_bytes: %llu", &n) == 1;
    if (f)
        fclose(f);
    *out = ok ? (uint64_t)n : 0;
    return ok ? 0 : -1;
}

uint64_t dir_bytes(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    uint64_t sum = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char *p = dup_printf("%s/%s", dir, e->d_name);
        struct stat st;
        if (p && lstat(p, &st) == 0) {
            if (S_ISREG(st.st_mode))
                sum += (uint64_t)st.st_size;
            else if (S_ISDIR(st.st_mode))
                sum += dir_bytes(p);
        }
        free(p);
    }
    closedir(d);
    return sum;
}

uint64_t hash_name(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

char *dup_printf(const char *fmt, const char *a, const char *b)
{
    size_t n = strlen(fmt) + strlen(a) + strlen(b) + 1;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, fmt, a, b);
    return p;
}

FILE *open_csv_input(const char *flag, const char *path)
{
    /* O_NONBLOCK: a FIFO would wait in open for a writer; cleared once
     * the file is known to be a regular one. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC), fl;
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        fprintf(stderr, "kvbench: %s%s: %s\n", flag, path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        const char *what = S_ISFIFO(st.st_mode)   ? "a FIFO or pipe"
                           : S_ISDIR(st.st_mode)  ? "a directory"
                           : S_ISCHR(st.st_mode)  ? "a character device"
                           : S_ISBLK(st.st_mode)  ? "a block device"
                           : S_ISSOCK(st.st_mode) ? "a socket"
                                                  : "not a regular file";
        fprintf(stderr,
                "kvbench: %s%s: %s, not a regular file: give the CSV file that kvbench "
                "wrote\n",
                flag, path, what);
        close(fd);
        return NULL;
    }
    FILE *f = NULL;
    if ((fl = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0 ||
        !(f = fdopen(fd, "r"))) {
        fprintf(stderr, "kvbench: %s%s: %s\n", flag, path, strerror(errno));
        close(fd);
    }
    return f;
}

void human_bytes(char *buf, size_t n, double bytes)
{
    if (bytes >= 1024.0 * 1024 * 1024)
        snprintf(buf, n, "%.1f GB", bytes / (1024.0 * 1024 * 1024));
    else if (bytes >= 1024.0 * 1024)
        snprintf(buf, n, "%.1f MB", bytes / (1024.0 * 1024));
    else if (bytes >= 1024.0)
        snprintf(buf, n, "%.1f KB", bytes / 1024.0);
    else
        snprintf(buf, n, "%.0f bytes", bytes);
}

const char *layout_name(int layout)
{
    return layout == KV_BLOOM_CLASSIC ? "classic" : "blocked";
}

