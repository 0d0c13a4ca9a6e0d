/* benches.c - the databases a run uses, the benchmarks that are not
 * worker loops (compact, stats, nofilter) and the --benchmarks list. */
#define _XOPEN_SOURCE 700
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"

/* ---- databases ------------------------------------------------------------------------ */

/* The number of entries of directory dir (not "." and ".."), the first
 * in first[n]; -1 with errno when it cannot be read. */
static long dir_entries(const char *dir, char *first, size_t n)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    long count = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (count++ == 0)
            snprintf(first, n, "%s", de->d_name);
    }
    closedir(d);
    return count;
}

int check_db_dir(const struct ctx *c, const char *dir, const char *what, int keep)
{
    struct stat st;
    if (stat(dir, &st) != 0) {
        if (errno == ENOENT)
            return 0; /* the engine creates it */
        fprintf(stderr, "kvbench: %s%s: %s\n", what, dir, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        fprintf(stderr, "kvbench: %s%s is not a directory (%s): the database needs a directory "
                        "of its own\n", what, dir,
                S_ISREG(st.st_mode) ? "a regular file" : "a device, FIFO or socket");
        return -1;
    }
    if (keep)
        return 0; /* nothing there is deleted */
    char first[256] = "", why[768] = "";
    long n = dir_entries(dir, first, sizeof first);
    if (n < 0) {
        fprintf(stderr, "kvbench: %s%s: %s\n", what, dir, strerror(errno));
        return -1;
    }
    if (n == 0 || c->e->is_db(dir, why, sizeof why))
        return 0;
    fprintf(stderr, "kvbench: %s%s holds %ld file%s (\"%s\"%s) but no %s database it may reset "
                    "(%s): kvbench deletes no file it did not create; name an empty or new "
                    "directory, or add --use_existing_db to use this one as it is\n",
            what, dir, n, n == 1 ? "" : "s", first, n > 1 ? ", ..." : "", c->e->name, why);
    return -1;
}

int destroy_db(const struct ctx *c, const char *dir, int rmdir_too)
{
    struct stat st;
    if (stat(dir, &st) != 0 && errno == ENOENT)
        return 0;
    int rc = c->e->destroy(dir);
    if (rc != 0) {
        fprintf(stderr, "kvbench: cannot remove the %s database in %s: %s\n", c->e->name, dir,
                c->e->errstr(rc));
        return -1;
    }
    if (rmdir_too)
        rmdir(dir); /* fails, harmlessly, when other files remain or the engine removed it */
    return 0;
}

static int open_target(struct ctx *c, struct target *t)
{
    if (t->h)
        return 0;
    int rc = c->e->open(&t->cfg, t->path, &t->h);
    if (rc != 0) {
        t->h = NULL;
        fprintf(stderr, "kvbench: open %s: %s\n", t->path, c->e->errstr(rc));
        return -1;
    }
    return 0;
}

void close_target(const struct ctx *c, struct target *t)
{
    if (t->h)
        c->e->close(t->h);
    t->h = NULL;
}

/* A fresh, empty database at t->path. */
int reset_target(struct ctx *c, struct target *t)
{
    close_target(c, t);
    if (destroy_db(c, t->path, 0) != 0)
        return -1;
    return open_target(c, t);
}

/* ---- benchmarks that are not worker loops ----------------------------------------------- */

/* One call of `fn` (NULL: nothing to do) timed as the benchmark `name`. */
static int bench_maintenance(struct ctx *c, struct target *t, struct result *res,
                             const char *name, int (*fn)(void *db))
{
    memset(res, 0, sizeof *res);
    res->name = name;
    result_settings(res, t);
    struct bench_counters k0;
    int rc = c->e->counters(t->h, &k0), rusage;
    uint64_t written0 = proc_write_bytes(&rusage);
    double t0 = now_sec();
    if (rc == 0 && fn)
        rc = fn(t->h);
    res->seconds = now_sec() - t0;
    storage_figures(res, t, written0);
    res->ops = 1;
    if (rc == 0)
        rc = c->e->counters(t->h, &res->after);
    if (rc != 0)
        return engine_fail(c, name, t->path, rc);
    counters_delta(&res->delta, &k0, &res->after);
    return 0;
}

int bench_compact(struct ctx *c, struct target *t, struct result *res)
{
    return bench_maintenance(c, t, res, "compact", c->e->compact);
}

/* Closes the database, then times opening it again: what a restarted
 * program waits for before its first read. The close is not timed (it
 * waits for a running flush or compaction to stop). */
int bench_reopen(struct ctx *c, struct target *t, struct result *res)
{
    memset(res, 0, sizeof *res);
    res->name = "reopen";
    result_settings(res, t);
    int rusage; /* bytes_written: the close's (a last flush, a log) and the open's */
    uint64_t written0 = proc_write_bytes(&rusage);
    close_target(c, t);
    double t0 = now_sec();
    int rc = open_target(c, t);
    res->seconds = now_sec() - t0;
    storage_figures(res, t, written0);
    res->ops = 1;
    if (rc != 0)
        return rc; /* open_target said why */
    if ((rc = c->e->counters(t->h, &res->after)) != 0)
        return engine_fail(c, "reopen", t->path, rc);
    return 0;
}

int bench_wait_compaction(struct ctx *c, struct target *t, struct result *res)
{
    return bench_maintenance(c, t, res, "waitforcompaction", c->e->wait_compaction);
}

static void print_stats(const struct ctx *c, const struct result *r)
{
    FILE *f = c->text;
    const struct bench_counters *k = &r->after;
    char size[32], fsize[32];
    if (k->have_lmdb) {
        human_bytes(size, sizeof size, (double)k->lmdb_file_bytes);
        fprintf(f, "stats        : LMDB B-tree of %llu entries, depth %llu: %llu branch, %llu leaf, "
                   "%llu overflow pages of %llu bytes; %s of the file in use\n",
                (unsigned long long)k->lmdb_entries, (unsigned long long)k->lmdb_depth,
                (unsigned long long)k->lmdb_branch_pages, (unsigned long long)k->lmdb_leaf_pages,
                (unsigned long long)k->lmdb_overflow_pages, (unsigned long long)k->lmdb_page_size,
                size);
        fflush(f);
        return;
    }
    if (!k->have_tables) {
        fprintf(f, "stats        : (the %s engine reports no table statistics)\n", c->e->name);
        return;
    }
    human_bytes(size, sizeof size, (double)k->table_bytes);
    human_bytes(fsize, sizeof fsize, (double)k->filter_bytes);
    fprintf(f, "stats        : %llu tables (", (unsigned long long)k->tables);
    int first = 1;
    for (int l = 0; l < 7; l++)
        if (k->level_tables[l] || l == 0) {
            fprintf(f, "%sL%d %llu", first ? "" : ", ", l, (unsigned long long)k->level_tables[l]);
            first = 0;
        }
    fprintf(f, "), %s on disk; filters %s for %llu keys (%.2f bits/key)\n", size, fsize,
            (unsigned long long)k->filter_keys,
            k->filter_keys ? 8.0 * (double)k->filter_bytes / (double)k->filter_keys : 0.0);
    fprintf(f, "               %llu flushes, %llu compactions, write amplification %.2f, "
               "%llu stalls, %llu delayed writes (%.1f ms waiting)\n",
            (unsigned long long)k->flushes, (unsigned long long)k->compactions,
            k->write_amplification, (unsigned long long)k->stalls,
            (unsigned long long)k->slowdowns,
            (double)(k->stall_micros + k->slowdown_micros) / 1e3);
    if (c->e == &bench_kv_engine) { /* table bytes written into each level, and held */
        fprintf(f, "               written per level (held / target):");
        for (int l = 0; l < 7; l++)
            if (k->level_written[l] || k->level_bytes[l]) {
                char w[32], h[32], g[32];
                human_bytes(w, sizeof w, (double)k->level_written[l]);
                human_bytes(h, sizeof h, (double)k->level_bytes[l]);
                human_bytes(g, sizeof g, (double)k->level_target[l]);
                if (l)
                    fprintf(f, " L%d %s (%s / %s)", l, w, h, g);
                else
                    fprintf(f, " L%d %s (%s)", l, w, h);
            }
        fprintf(f, "; level 0 merges into L%llu\n", (unsigned long long)k->base_level);
        char tm[32], ib[32];
        human_bytes(tm, sizeof tm, (double)k->table_memory_bytes);
        human_bytes(ib, sizeof ib, (double)k->index_bytes);
        fprintf(f,
                "               table memory: %s of indexes and filters kept (indexes %s in "
                "all); %llu of %llu tables' indexes and %llu filters paged through the block "
                "cache (table_memory_budget)\n",
                tm, ib, (unsigned long long)k->tables_index_paged, (unsigned long long)k->tables,
                (unsigned long long)k->tables_filter_paged);
    }
    fflush(f);
}

/* After a fill and after waitforcompaction: each level as sorted runs,
 * the bytes it holds and its write amplification (bytes written into it
 * over the bytes the user wrote); how each engine counts them:
 * kvbench.h, bench_counters.have_levels. */
void print_levels(const struct ctx *c, const struct result *r)
{
    FILE *f = c->text;
    const struct bench_counters *k = &r->after;
    if (!k->have_levels) {
        fprintf(f, "    levels   : (the %s engine reports no levels)\n", c->e->name);
        return;
    }
    fprintf(f, "    levels   :");
    int any = 0;
    double sum = 0;
    for (int l = 0; l < 7; l++) {
        sum += k->level_write_amp[l];
        if (!k->level_runs[l] && !k->level_bytes[l] && k->level_write_amp[l] == 0)
            continue;
        char b[32];
        human_bytes(b, sizeof b, (double)k->level_bytes[l]);
        fprintf(f, "%s L%d %llu run%s %s w-amp %.2f", any ? ";" : "", l,
                (unsigned long long)k->level_runs[l], k->level_runs[l] == 1 ? "" : "s", b,
                k->level_write_amp[l]);
        any = 1;
    }
    fprintf(f, "%s (sum %.2f)\n", any ? "" : " empty", sum);
    fprintf(f, "               (%s)\n",
            c->e == &bench_kv_engine
                ? "kv_stats.level_runs, level_bytes, level_write_amp: bytes written into the "
                  "level / user bytes"
                : "RocksDB: runs = L0 files + 1 per non-empty deeper level, from its live files; "
                  "w-amp: flush.write.bytes (L0) and the LOG's compaction_finished "
                  "total_output_size by output_level, over its bytes.written");
    fflush(f);
}

int bench_stats(struct ctx *c, struct target *t, struct result *res)
{
    *res = (struct result){.name = "stats"};
    result_settings(res, t);
    int rc = c->e->counters(t->h, &res->after);
    if (rc != 0)
        return engine_fail(c, "stats", t->path, rc);
    int rusage; /* stats runs nothing: bytes_written 0 */
    proc_write_bytes(&rusage);
    res->written_by_rusage = rusage;
    res->db_bytes = dir_bytes(t->path);
    res->open_files = proc_open_files();
    res->rss_bytes = proc_rss_bytes();
    res->rss_file_bytes = proc_rss_file_bytes();
    print_stats(c, res);
    if (c->o.json)
        report_json(c, res, 1);
    return 0;
}

/* Copies every entry of `from` into `to` in batches. */
static int copy_db(struct ctx *c, struct target *from, struct target *to, uint64_t *copied)
{
    const struct bench_engine *e = c->e;
    /* 1000 entries of 1-MiB values would be a GiB: the bytes cap it too,
     * but an entry always fits */
    size_t unit = c->o.key_size + c->o.value_size + 64, cap = unit * COPY_BATCH;
    if (cap > COPY_BATCH_BYTES)
        cap = unit > COPY_BATCH_BYTES ? unit : COPY_BATCH_BYTES;
    uint8_t *buf = malloc(cap);
    struct bench_kv *kvs = malloc(COPY_BATCH * sizeof *kvs);
    void *it = NULL;
    int rc = buf && kvs ? e->iter_new(from->h, &it) : KV_ENOMEM;
    *copied = 0;
    if (rc == 0)
        e->iter_seek_first(it);
    while (rc == 0 && e->iter_valid(it)) {
        size_t n = 0, used = 0;
        while (n < COPY_BATCH && e->iter_valid(it)) {
            size_t kl, vl;
            const void *k = e->iter_key(it, &kl), *v = e->iter_value(it, &vl);
            if (used + kl + vl > cap) {
                if (n == 0) { /* larger than a whole batch: written on its own */
                    struct bench_kv one = {k, v, kl, vl};
                    rc = e->write(to->h, &one, 1, 0);
                    ++*copied;
                    e->iter_next(it);
                }
                break;
            }
            memcpy(buf + used, k, kl);
            memcpy(buf + used + kl, v, vl);
            kvs[n++] = (struct bench_kv){buf + used, buf + used + kl, kl, vl};
            used += kl + vl;
            e->iter_next(it);
        }
        if (rc == 0 && n) {
            rc = e->write(to->h, kvs, n, 0);
            *copied += n;
        }
        if (rc == 0 && stop_requested)
            rc = E_INTERRUPTED;
    }
    if (rc == 0 && it)
        rc = e->iter_status(it);
    if (it)
        e->iter_free(it);
    free(buf);
    free(kvs);
    return rc;
}

static void print_summary(const struct ctx *c, const struct result *with,
                          const struct result *without)
{
    FILE *f = c->text;
    double mw = with->ops ? with->seconds * 1e6 / (double)with->ops : 0;
    double mo = without->ops ? without->seconds * 1e6 / (double)without->ops : 0;
    char fmem[32];
    human_bytes(fmem, sizeof fmem, (double)with->after.filter_bytes);
    fprintf(f, "------------------------------------------------\n");
    fprintf(f, "What the filters saved, per missing-key get (readmissing, %llu gets each):\n",
            (unsigned long long)with->ops);
    char label[64];
    if (c->e == &bench_kv_engine)
        snprintf(label, sizeof label, "%g bits/key (%s)", with->bloom_bits,
                 layout_name(with->layout));
    else
        snprintf(label, sizeof label, "%g bits/key", with->bloom_bits);
    if (!with->after.have_filter_figures) { /* LevelDB: time alone */
        fprintf(f, "  %-24s %10s\n", "", "micros");
        fprintf(f, "  %-24s %10.3f\n", label, mw);
        fprintf(f, "  %-24s %10.3f\n", "filters off", mo);
        fprintf(f, "  %-24s %10.3f", "saved by the filters", mo - mw);
        if (mw > 0)
            fprintf(f, "  (%.1fx faster)", mo / mw);
        fprintf(f, "\n");
        fflush(f);
        return;
    }
    double sw = with->block_reads + with->cache_hits;
    double so = without->block_reads + without->cache_hits;
    /* kv: the device reads too (O_DIRECT: what the filters spare the disk) */
    int dev = with->after.have_device_reads && without->after.have_device_reads;
    fprintf(f, "  %-22s %14s %17s", "", "blocks sought", "data-block reads");
    if (dev)
        fprintf(f, " %13s", "device reads");
    fprintf(f, " %10s\n", "micros");
    fprintf(f, "  %-22s %14.4f %17.4f", label, sw, with->block_reads);
    if (dev)
        fprintf(f, " %13.4f", with->device_reads);
    fprintf(f, " %10.3f\n", mw);
    fprintf(f, "  %-22s %14.4f %17.4f", "filters off", so, without->block_reads);
    if (dev)
        fprintf(f, " %13.4f", without->device_reads);
    fprintf(f, " %10.3f\n", mo);
    fprintf(f, "  %-22s %14.4f %17.4f", "saved by the filters", so - sw,
            without->block_reads - with->block_reads);
    if (dev)
        fprintf(f, " %13.4f", without->device_reads - with->device_reads);
    fprintf(f, " %10.3f", mo - mw);
    if (mw > 0)
        fprintf(f, "  (%.1fx faster)", mo / mw);
    fprintf(f, "\n");
    if (dev && with->after.direct_reads && without->after.direct_reads)
        fprintf(f, "  on the device (O_DIRECT): %.4f reads and %.3f micros saved per get\n",
                without->device_reads - with->device_reads, mo - mw);
    else if (dev)
        fprintf(f, "  (reads went through the page cache: --use_direct_reads=%d%s)\n",
                c->o.use_direct_reads, c->o.use_direct_reads ? ", refused" : "");
    if (with->after.filter_keys)
        fprintf(f, "  filters cost %s of memory for %llu keys (%.2f bits/key)\n", fmem,
                (unsigned long long)with->after.filter_keys,
                8.0 * (double)with->after.filter_bytes / (double)with->after.filter_keys);
    fflush(f);
}

/* A second database with the same data and no filters: readmissing there,
 * then the comparison with the latest readmissing on the main database. */
static int bench_nofilter(struct ctx *c)
{
    if (c->e->no_filters) {
        fprintf(c->text, "nofilter     : skipped: %s has no filters\n", c->e->name);
        return 0;
    }
    if (c->main.cfg.bloom_bits == 0) {
        fprintf(c->text, "nofilter     : skipped: filters are already off (--bloom_bits=0)\n");
        return 0;
    }
    struct target t2 = {.cfg = c->main.cfg};
    t2.cfg.bloom_bits = 0;
    t2.cfg.prefix_len = 0; /* the prefixes live in the point filter; no scan filter either */
    t2.cfg.range_filter_bits = 0;
    t2.cfg.create = 1;
    t2.path = dup_printf("%s%s", c->main.path, ".nofilter");
    if (!t2.path) {
        fprintf(stderr, "kvbench: out of memory\n");
        return -1;
    }
    uint64_t copied = 0;
    double t0 = now_sec();
    /* A directory of the user's there is not emptied: checked like --db. */
    int rc = check_db_dir(c, t2.path, "nofilter: ", 0);
    if (rc == 0)
        rc = destroy_db(c, t2.path, 0);
    if (rc == 0)
        rc = open_target(c, &t2);
    if (rc == 0 && (rc = copy_db(c, &c->main, &t2, &copied)) != 0)
        rc = engine_fail(c, "nofilter", "copy", rc);
    if (rc == 0 && (rc = c->e->compact(t2.h)) != 0)
        rc = engine_fail(c, "nofilter", "compact", rc);
    if (rc == 0) {
        fprintf(c->text,
                "nofilter     : a second database with the same %llu keys and filters off "
                "(--bloom_bits=0), written and compacted in %.1f seconds\n",
                (unsigned long long)copied, now_sec() - t0);
        struct result r;
        rc = run_bench(c, bench_named("readmissing"), &t2, &r);
        if (rc == 0) {
            report(c, &r, bench_named("readmissing"));
            if (c->have_last_missing)
                print_summary(c, &c->last_missing, &r);
            else
                fprintf(c->text, "nofilter     : (run readmissing before nofilter to see "
                                 "what the filters saved)\n");
        }
    }
    close_target(c, &t2);
    if (destroy_db(c, t2.path, 1) != 0 && rc == 0)
        rc = -1;
    free(t2.path);
    return rc;
}

/* ---- the benchmark list ------------------------------------------------------------------ */

static int run_one(struct ctx *c, const struct bench_def *d)
{
    if (d->fresh && c->o.use_existing_db) {
        fprintf(c->text, "%-12s : skipped (--use_existing_db is set)\n", d->name);
        return 0;
    }
    /* An engine without a range delete or a merge operator (LevelDB, LMDB)
     * runs the rest of the list; nothing is emulated. */
    if ((!strcmp(d->name, "deleterange") && !c->e->delete_range) ||
        (!strcmp(d->name, "mergerandom") && !c->e->merge)) {
        fprintf(c->text, "%-12s : not supported by %s (it has no %s)\n", d->name, c->e->name,
                d->name[0] == 'd' ? "range delete" : "merge operator");
        return 0;
    }
    if (!strcmp(d->name, "fillbulk") && !c->e->bulk_open) {
        fprintf(c->text, "%-12s : not supported by %s (it has no table writer and ingest)\n",
                d->name, c->e->name);
        return 0;
    }
    int rc = d->fresh ? reset_target(c, &c->main) : open_target(c, &c->main);
    if (rc != 0)
        return rc;
    struct result r;
    if (!strcmp(d->name, "stats"))
        return bench_stats(c, &c->main, &r);
    if (!strcmp(d->name, "nofilter"))
        return bench_nofilter(c);
    if (!strcmp(d->name, "compact"))
        rc = bench_compact(c, &c->main, &r);
    else if (!strcmp(d->name, "waitforcompaction"))
        rc = bench_wait_compaction(c, &c->main, &r);
    else if (!strcmp(d->name, "reopen"))
        rc = bench_reopen(c, &c->main, &r);
    else if (!strcmp(d->name, "catchup"))
        rc = bench_catchup(c, &c->main, &r);
    else
        rc = run_bench(c, d, &c->main, &r);
    if (rc != 0)
        return rc;
    /* the level report after a fill from empty, and once compaction is done */
    r.show_levels = (d->fresh && d->kind == K_WRITE) || !strcmp(d->name, "waitforcompaction");
    report(c, &r, d);
    if (!strcmp(d->name, "readmissing") && r.bloom_bits > 0) {
        c->last_missing = r;
        c->have_last_missing = 1;
    }
    return 0;
}

int run_benchmarks(struct ctx *c)
{
    const char *p = c->o.benchmarks;
    int rc = 0;
    while (rc == 0 && *p) {
        size_t len = strcspn(p, ",");
        if (len) {
            rc = run_one(c, find_bench(p, len)); /* names were checked when parsed */
            if (stop_requested)
                rc = E_INTERRUPTED;
        }
        p += len + (p[len] == ',');
    }
    return rc;
}

