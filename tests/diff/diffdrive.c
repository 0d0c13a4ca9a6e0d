/* diffdrive.c - runs two difftest programs on the same seeds, compares
 * their transcripts line by line, and shrinks a divergence to a short
 * sequence of operations that still shows it.
 *
 *   diffdrive --a PROG --b PROG [--seeds 1,2,3] [--ops N] [--reverse]
 *   diffdrive --metamorphic PROG [--seeds ...] [--ops N] [--reverse]
 *   options: --minimize-runs N (default 400; 0: do not shrink)
 *            --minimize-seconds N (default 300) --keep-going
 *            --b-arg ARG (one more argument for side b alone: --inject
 *            plants a bug, for the driver's own test); --arg ARG (one more
 *            for both: --raw-repair)
 *
 * With --a/--b both programs get "--seed S --ops N [--reverse]"; with
 * --metamorphic PROG, "PROG --config 0" is compared with "PROG --config i"
 * for every other option set PROG has (PROG --configs). The two run at
 * once, their outputs read a line from each in turn, so the transcripts are
 * never stored; each gets a scratch directory of its own (--dir, under
 * $TMPDIR or /tmp), removed when it ends, stopped or not. Each transcript
 * ends with a line "exit N" for the program's status, so a crash or a
 * refused open is a difference too; a program that exits
 * 77 at once (a configuration this machine cannot run) is skipped, saying
 * so.
 *
 * At the first difference diffdrive prints the lines before it, the two
 * that differ and a few after, stops both programs, then shrinks: the
 * operations up to the one that differed are cut down by delta debugging
 * (Zeller's ddmin: drop chunks of the list while the two still differ,
 * halving the chunks) with each trial replayed through --only FILE. It
 * prints the shrunk sequence (PROG --print), the difference it shows, and
 * the command that replays it; the list is kept in diff-seed<S>.ops.
 * Without --keep-going it stops at the first seed that diverges.
 * Exit: 0 no difference; 1 a difference; 2 bad usage or a program that
 * could not run. */
#define _XOPEN_SOURCE 700 /* mkdtemp, nftw */
#include <ftw.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CONTEXT 8
#define SHRINK_WINDOW ((uint64_t)4 << 20)
#define MAX_ARGS 18

/* One side of a comparison: the program and its arguments. */
struct side {
    const char *argv[MAX_ARGS + 1];
    int argc;
    pid_t pid;
    FILE *out;
    char dir[512]; /* the program's scratch directory (--dir), ours to remove */
};

static int reverse;
static uint64_t nops = 20000;
static long minimize_runs = 400;
static long minimize_seconds = 300;
static int quiet;            /* trials while shrinking: no output */
static const char *b_arg;    /* --b-arg: one more argument for side b alone */
static const char *both_arg; /* --arg: one more argument for both sides */

static void side_init(struct side *s, const char *prog, uint64_t seed, int config, const char *only,
                      uint64_t ops, const char *extra)
{
    static char buf[8][32];
    static int b;
    s->argc = 0;
    s->argv[s->argc++] = prog;
    s->argv[s->argc++] = "--seed";
    snprintf(buf[b % 8], 32, "%" PRIu64, seed);
    s->argv[s->argc++] = buf[b++ % 8];
    s->argv[s->argc++] = "--ops";
    snprintf(buf[b % 8], 32, "%" PRIu64, ops);
    s->argv[s->argc++] = buf[b++ % 8];
    if (config >= 0) {
        s->argv[s->argc++] = "--config";
        snprintf(buf[b % 8], 32, "%d", config);
        s->argv[s->argc++] = buf[b++ % 8];
    }
    if (reverse)
        s->argv[s->argc++] = "--reverse";
    if (only) {
        s->argv[s->argc++] = "--only";
        s->argv[s->argc++] = only;
    }
    if (extra)
        s->argv[s->argc++] = extra;
    if (both_arg)
        s->argv[s->argc++] = both_arg;
    s->argv[s->argc] = NULL;
}

/* Side b: side_init, then --b-arg's argument. */
static void side_init_b(struct side *s, const char *prog, uint64_t seed, int config,
                        const char *only, uint64_t ops, const char *extra)
{
    side_init(s, prog, seed, config, only, ops, extra);
    if (b_arg) {
        s->argv[s->argc++] = b_arg;
        s->argv[s->argc] = NULL;
    }
}

/* The scratch directory goes with the program: a program stopped at a
 * difference (SIGKILL) cannot remove its own database. */
static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void side_start(struct side *s)
{
    const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(s->dir, sizeof s->dir, "%s/diffdrive.XXXXXX", tmp);
    if (!mkdtemp(s->dir)) {
        perror(s->dir);
        exit(2);
    }
    s->argv[s->argc] = "--dir";
    s->argv[s->argc + 1] = s->dir;
    s->argv[s->argc + 2] = NULL;
    int p[2];
    if (pipe(p) != 0) {
        perror("pipe");
        exit(2);
    }
    s->pid = fork();
    if (s->pid < 0) {
        perror("fork");
        exit(2);
    }
    if (s->pid == 0) {
        close(p[0]);
        dup2(p[1], 1);
        close(p[1]);
        if (quiet && !freopen("/dev/null", "w", stderr))
            _exit(2);
        execv(s->argv[0], (char *const *)s->argv);
        fprintf(stderr, "diffdrive: %s: cannot run it\n", s->argv[0]);
        _exit(2);
    }
    close(p[1]);
    s->out = fdopen(p[0], "r");
}

/* Stops the program (killed when `kill_it`) and returns its "exit N" line's
 * status: the exit code, or 128 + the signal. */
static int side_finish(struct side *s, int kill_it)
{
    if (kill_it)
        kill(s->pid, SIGKILL);
    fclose(s->out);
    int st;
    while (waitpid(s->pid, &st, 0) < 0)
        ;
    nftw(s->dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The next line of a side's transcript (without its newline), or, at its
 * end, "exit N". NULL after that. */
static char *next_line(struct side *s, char **buf, size_t *cap, int *ended)
{
    if (*ended)
        return NULL;
    ssize_t n = getline(buf, cap, s->out);
    if (n >= 0) {
        if (n > 0 && (*buf)[n - 1] == '\n')
            (*buf)[n - 1] = '\0';
        return *buf;
    }
    *ended = 1;
    int st = side_finish(s, 0);
    if (*cap < 32) {
        free(*buf);
        *cap = 32;
        *buf = malloc(*cap);
    }
    snprintf(*buf, *cap, "exit %d", st);
    return *buf;
}

/* The operation number a transcript line names ("#123 put ..."), or -1. */
static int64_t op_of(const char *line)
{
    if (line[0] != '#' || line[1] < '0' || line[1] > '9')
        return -1;
    return strtoll(line + 1, NULL, 10);
}

/* The outcome of one comparison. */
struct result {
    int differ;     /* 1: the transcripts differ */
    int skipped;    /* 1: side b exited 77 (its configuration cannot run here) */
    int64_t op;     /* the operation whose line differed (-1: none named) */
    uint64_t lines; /* lines that agreed */
};

/* Runs a and b at once and compares; prints the difference unless quiet. */
static struct result compare(struct side *a, struct side *b)
{
    struct result r = {0, 0, -1, 0};
    char *ring[CONTEXT] = {0};
    int64_t last_op = -1;
    side_start(a);
    side_start(b);
    char *la = NULL, *lb = NULL;
    size_t ca = 0, cb = 0;
    int ea = 0, eb = 0;
    for (;;) {
        char *x = next_line(a, &la, &ca, &ea);
        char *y = next_line(b, &lb, &cb, &eb);
        if (!x && !y)
            break;
        if (x && y && !strcmp(x, y)) {
            int64_t o = op_of(x);
            if (o >= 0)
                last_op = o;
            if (!quiet) {
                free(ring[r.lines % CONTEXT]);
                ring[r.lines % CONTEXT] = strdup(x);
            }
            r.lines++;
            continue;
        }
        if (y && !strcmp(y, "exit 77") && r.lines <= 1) {
            r.skipped = 1;
            if (!ea)
                side_finish(a, 1);
            break;
        }
        r.differ = 1;
        int64_t ox = x ? op_of(x) : -1, oy = y ? op_of(y) : -1;
        /* A line without a number continues the last operation (a
         * scan's pairs, the end of the transcript). */
        r.op = ox >= 0 && (oy < 0 || ox <= oy) ? ox : oy >= 0 ? oy : last_op;
        if (!quiet) {
            printf("  first difference after %" PRIu64 " equal lines (operation %" PRId64 "):\n",
                   r.lines, r.op);
            for (uint64_t i = r.lines > CONTEXT ? r.lines - CONTEXT : 0; i < r.lines; i++)
                printf("    = %s\n", ring[i % CONTEXT]);
            printf("    a %s\n    b %s\n", x ? x : "(ended)", y ? y : "(ended)");
            for (int i = 0; i < 3; i++) {
                char *x2 = next_line(a, &la, &ca, &ea);
                if (x2)
                    printf("    a %s\n", x2);
                char *y2 = next_line(b, &lb, &cb, &eb);
                if (y2)
                    printf("    b %s\n", y2);
            }
        }
        if (!ea)
            side_finish(a, 1);
        if (!eb)
            side_finish(b, 1);
        break;
    }
    for (int i = 0; i < CONTEXT; i++)
        free(ring[i]);
    free(la);
    free(lb);
    return r;
}

/* ---- shrinking ---------------------------------------------------------------------------- */

static const char *prog_a, *prog_b;
static int config_a = -1, config_b = -1;
static uint64_t cur_seed;
static long trials;
static time_t shrink_start;

static void write_ops(const char *path, const uint64_t *ops, size_t n)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(2);
    }
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%" PRIu64 "\n", ops[i]);
    fclose(f);
}

/* Do the two still differ on just these operations? */
static int still_differs(const uint64_t *ops, size_t n, uint64_t total)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/diffdrive.%ld.ops", (long)getpid());
    write_ops(path, ops, n);
    struct side a, b;
    side_init(&a, prog_a, cur_seed, config_a, path, total, NULL);
    side_init_b(&b, prog_b, cur_seed, config_b, path, total, NULL);
    quiet = 1;
    struct result r = compare(&a, &b);
    quiet = 0;
    trials++;
    unlink(path);
    return r.differ;
}

static int budget_left(void)
{
    return trials < minimize_runs && time(NULL) - shrink_start < minimize_seconds;
}

/* ddmin on ops[0, *n): removes chunks (complements kept) while the
 * difference persists, chunks halving down to single operations. */
static void ddmin(uint64_t *ops, size_t *n, uint64_t total)
{
    uint64_t *tmp = malloc(*n * sizeof *tmp);
    size_t parts = 2;
    while (*n >= 2 && budget_left()) {
        size_t chunk = (*n + parts - 1) / parts;
        int reduced = 0;
        for (size_t start = 0; start < *n && budget_left(); start += chunk) {
            size_t end = start + chunk < *n ? start + chunk : *n;
            size_t m = 0;
            for (size_t i = 0; i < *n; i++)
                if (i < start || i >= end)
                    tmp[m++] = ops[i];
            if (m && still_differs(tmp, m, total)) {
                memcpy(ops, tmp, m * sizeof *ops);
                *n = m;
                parts = parts > 2 ? parts - 1 : 2;
                reduced = 1;
                break;
            }
        }
        if (!reduced) {
            if (parts >= *n)
                break;
            parts = parts * 2 < *n ? parts * 2 : *n;
        }
    }
    free(tmp);
}

/* A first cut before ddmin: every read (get, seek, step, scan) but the
 * last operation goes at once, when the two still differ without them.
 * Reads change nothing stored, so this usually holds and halves the list;
 * the kinds come from the program's own description (--print). */
static void drop_reads(uint64_t *ops, size_t *n, uint64_t total)
{
    static const char *const reads[] = {"get",  "seek", "seek_first", "seek_last",
                                        "next", "prev", "scan"};
    unsigned char *is_read = calloc(total, 1);
    struct side a;
    side_init(&a, prog_a, cur_seed, config_a, NULL, total, "--print");
    side_start(&a);
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, a.out) > 0) {
        int64_t o = op_of(line);
        char kind[32];
        if (o < 0 || (uint64_t)o >= total || sscanf(line, "%*s %31s", kind) != 1)
            continue;
        for (size_t i = 0; i < sizeof reads / sizeof reads[0]; i++)
            if (!strcmp(kind, reads[i]))
                is_read[o] = 1;
    }
    free(line);
    side_finish(&a, 1);
    uint64_t *kept = malloc(*n * sizeof *kept);
    size_t m = 0;
    for (size_t i = 0; i < *n; i++)
        if (!is_read[ops[i]] || i + 1 == *n)
            kept[m++] = ops[i];
    if (m < *n && still_differs(kept, m, total)) {
        memcpy(ops, kept, m * sizeof *ops);
        *n = m;
    }
    free(kept);
    free(is_read);
}

/* Shrinks the divergence at operation `op` of cur_seed and prints it. */
static void shrink(int64_t op)
{
    if (op < 0 || minimize_runs == 0)
        return;
    uint64_t total = (uint64_t)op + 1;
    /* A very long run shrinks from its last SHRINK_WINDOW operations, when
     * they alone still differ (the lists take 16 bytes an operation). */
    uint64_t first = total > SHRINK_WINDOW ? total - SHRINK_WINDOW : 0;
    size_t n = (size_t)(total - first);
    uint64_t *ops = malloc(n * sizeof *ops);
    if (!ops)
        return;
    for (size_t i = 0; i < n; i++)
        ops[i] = first + i;
    shrink_start = time(NULL);
    trials = 0;
    if (!still_differs(ops, n, total)) {
        printf("  shrinking: operations %" PRIu64 "..%" PRId64 " alone agree: %s\n", first, op,
               first ? "the difference needs an older history; not shrunk"
                     : "the difference depends on timing, not on the sequence");
        free(ops);
        return;
    }
    drop_reads(ops, &n, total);
    ddmin(ops, &n, total);
    char path[64];
    snprintf(path, sizeof path, "diff-seed%" PRIu64 ".ops", cur_seed);
    write_ops(path, ops, n);
    printf("  shrunk to %zu operation(s) of %" PRIu64 " in %ld trials (%lds)%s; kept in %s:\n", n,
           total, trials, (long)(time(NULL) - shrink_start), budget_left() ? "" : ", budget spent",
           path);
    fflush(stdout);
    struct side a;
    side_init(&a, prog_a, cur_seed, config_a, path, total, "--print");
    side_start(&a);
    char *line = NULL;
    size_t cap = 0;
    for (int i = 0; i < 60 && getline(&line, &cap, a.out) > 0; i++)
        printf("    %s", line);
    free(line);
    side_finish(&a, 1);
    printf("  the shrunk sequence's transcripts (--verbose):\n");
    fflush(stdout);
    struct side x, y;
    side_init(&x, prog_a, cur_seed, config_a, path, total, "--verbose");
    side_init_b(&y, prog_b, cur_seed, config_b, path, total, "--verbose");
    compare(&x, &y);
    char cfg[32] = "";
    if (config_b >= 0)
        snprintf(cfg, sizeof cfg, " --config %d", config_b);
    printf("  replay (each side, then compare): %s --seed %" PRIu64 " --ops %" PRIu64
           "%s%s%s%s%s%s --only %s\n",
           prog_b, cur_seed, total, cfg, reverse ? " --reverse" : "", b_arg ? " " : "",
           b_arg ? b_arg : "", both_arg ? " " : "", both_arg ? both_arg : "", path);
    free(ops);
}

/* ---- main ------------------------------------------------------------------------------------ */

static void usage(void)
{
    fprintf(stderr, "usage: diffdrive (--a PROG --b PROG | --metamorphic PROG) [--seeds 1,2,3] "
                    "[--ops N] [--reverse] [--minimize-runs N] [--minimize-seconds N] "
                    "[--keep-going] [--arg ARG] [--b-arg ARG]\n");
    exit(2);
}

/* How many option sets PROG has (PROG --configs). */
static int config_count(const char *prog)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' --configs 2>/dev/null", prog);
    FILE *p = popen(cmd, "r");
    int n = 0;
    if (!p || fscanf(p, "%d", &n) != 1)
        n = 0;
    if (p)
        pclose(p);
    return n;
}

int main(int argc, char **argv)
{
    const char *meta = NULL, *seeds = "1";
    int keep_going = 0;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "--a") && v)
            prog_a = argv[++i];
        else if (!strcmp(o, "--b") && v)
            prog_b = argv[++i];
        else if (!strcmp(o, "--metamorphic") && v)
            meta = argv[++i];
        else if (!strcmp(o, "--seeds") && v)
            seeds = argv[++i];
        else if (!strcmp(o, "--ops") && v)
            nops = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(o, "--minimize-runs") && v)
            minimize_runs = atol(argv[++i]);
        else if (!strcmp(o, "--minimize-seconds") && v)
            minimize_seconds = atol(argv[++i]);
        else if (!strcmp(o, "--arg") && v)
            both_arg = argv[++i];
        else if (!strcmp(o, "--b-arg") && v)
            b_arg = argv[++i];
        else if (!strcmp(o, "--reverse"))
            reverse = 1;
        else if (!strcmp(o, "--keep-going"))
            keep_going = 1;
        else
            usage();
    }
    if (!meta && (!prog_a || !prog_b))
        usage();
    int configs = 1;
    if (meta) {
        prog_a = prog_b = meta;
        configs = config_count(meta);
        if (configs < 2) {
            fprintf(stderr, "diffdrive: %s --configs: no option sets\n", meta);
            return 2;
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    uint64_t pairs = 0, diverged = 0, skipped = 0, lines = 0, diffed = 0;
    time_t t0 = time(NULL);
    char *list = strdup(seeds);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        cur_seed = strtoull(tok, NULL, 0);
        for (int c = 1; c < (meta ? configs : 2); c++) {
            config_a = meta ? 0 : -1;
            config_b = meta ? c : -1;
            struct side a, b;
            side_init(&a, prog_a, cur_seed, config_a, NULL, nops, NULL);
            side_init_b(&b, prog_b, cur_seed, config_b, NULL, nops, NULL);
            time_t t = time(NULL);
            printf("seed %" PRIu64 "%s", cur_seed, reverse ? " (reverse order)" : "");
            if (meta)
                printf(", config 0 vs %d", c);
            printf(", %" PRIu64 " operations:\n", nops);
            struct result r = compare(&a, &b);
            if (r.skipped) {
                printf("  skipped: this configuration cannot run here (its reason above)\n");
                skipped++;
                continue;
            }
            pairs++;
            lines += r.lines;
            /* Operations compared: all of them, or those before the one
             * that differed. */
            diffed += r.differ && r.op >= 0 ? (uint64_t)r.op : nops;
            if (!r.differ) {
                printf("  same (%" PRIu64 " lines, %lds)\n", r.lines, (long)(time(NULL) - t));
                continue;
            }
            diverged++;
            shrink(r.op);
            if (!keep_going)
                goto done;
        }
    }
done:
    free(list);
    printf("diffdrive: %" PRIu64 " comparison(s) of %" PRIu64 " operations each (%" PRIu64
           " operations diffed, %" PRIu64 " transcript lines), %" PRIu64 " skipped, %" PRIu64
           " diverged, %lds\n",
           pairs, nops, diffed, lines, skipped, diverged, (long)(time(NULL) - t0));
    return diverged ? 1 : 0;
}
