/* kvtool - look inside a kv database or one SSTable, check it, and edit it
 * from the shell: kv's counterpart of LevelDB's and RocksDB's sst_dump and
 * ldb.
 *
 *   kvtool sst dump|props|verify FILE ...
 *   kvtool blob dump|verify FILE ...
 *   kvtool db explain|info|verify|get|put|delete|scan|stats|property|size|compact|repair|
 *              checkpoint|destroy DIR ...
 *
 * `kvtool --help` lists the commands; `kvtool <group> <command> --help`
 * describes one. Keys and values print escaped (printable ASCII as is; '\',
 * '"' and every other byte as \xNN) or, with --hex, as 0x-prefixed hex, so
 * binary data never garbles a terminal; keys given on the command line take
 * the same forms, so any key round-trips. Exit status: 0 success; 1 the
 * command failed (a line on stderr says why: a missing key, a problem found
 * by verify, an error from kv); 2 bad usage.
 *
 * Built on the public headers only: the store through kv.h (kv_explain_get,
 * kv_explain_seek and kv_inspect exist for this tool), tables through
 * sstable.h (the store's internal keys through kv_sst_store_key_decode/
 * _encode, a table's filter through kv_sst_reader_filter_info), blob files
 * and the references tables keep to them through sstable.h's "blob files"
 * (kv_blob_ref_decode, kv_blob_reader_open, kv_blob_scan, kv_blob_read),
 * filters through bloom.h. It decodes no file format itself; it knows only the sizes of a
 * blob file's header and footer (BLOB_HEADER, BLOB_FOOTER), to say where a
 * reference may point in a file it cannot open.
 *
 * `db info` and `db verify` never open the database: kv_open recovers (it
 * replays the logs into a new table and deletes files the manifest does not
 * name), which would change what is inspected and destroy the evidence of
 * a crash. They use kv_inspect instead, which reads the manifest and lists
 * the directory under the database's lock, and read each table file
 * directly. The other db commands open the database with kv_open: those
 * that only read (explain, get, scan, stats, property, size) as a read-only
 * handle (kv_options.read_only), which takes no lock and writes nothing, so
 * they work beside a writer; db info and db verify, beside a writer, read
 * under a pin of the manifest state instead of the lock (kv_inspect).
 *
 * Files: main.c the command line (usage, the command table, dispatch) and
 * what every command uses (messages, keys printed and parsed); sst.c one
 * table (sst dump, props, verify); blob.c one blob file (blob dump,
 * verify); db.c the database commands but verify; verify.c checking every
 * entry of a table (sst verify, db verify) and db verify. kvtool.h holds
 * what they share. */
#include "kvtool.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* --hex: print keys and values as hex, and read them as hex. */
int hex_mode;

/* ---- messages ------------------------------------------------------------------------ */

/* The command being run ("sst dump"), for messages. */
char cmd_name[64] = "";

int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "kvtool: %s%s", cmd_name, cmd_name[0] ? ": " : "");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return EXIT_FAIL;
}
/* The name of a kv_status code, as status.h spells it. */
const char *code_name(int rc)
{
    switch (rc) {
    case KV_OK: return "KV_OK";
    case KV_NOTFOUND: return "KV_NOTFOUND";
    case KV_EINVAL: return "KV_EINVAL";
    case KV_ENOMEM: return "KV_ENOMEM";
    case KV_ECORRUPT: return "KV_ECORRUPT";
    case KV_EIO: return "KV_EIO";
    case KV_EBUSY: return "KV_EBUSY";
    case KV_ENOSPC: return "KV_ENOSPC";
    case KV_EPERM: return "KV_EPERM";
    }
    return "KV_E?";
}

/* A call of kv failed with rc: one line naming what it was about (a
 * directory or file), the code, and kv's text for it (kv_error_text: the
 * file at fault and why), e.g.
 *   kvtool: db get: /d: KV_EIO (I/O error): /d/LOCK: open: Is a directory */
int kv_fail(const char *what, int rc)
{
    const char *text = kv_error_text();
    if (!text[0])
        return fail("%s: %s (%s)", what, code_name(rc), kv_strerror(rc));
    return fail("%s: %s (%s): %s", what, code_name(rc), kv_strerror(rc), text);
}

/* ---- bytes: printing and parsing ------------------------------------------------------ */

/* Bytewise, then shorter first: the order of keys in kv. */
int key_cmp(const void *a, size_t alen, const void *b, size_t blen)
{
    size_t n = alen < blen ? alen : blen;
    int c = n ? memcmp(a, b, n) : 0;
    if (c)
        return c;
    return alen < blen ? -1 : alen > blen;
}

int key_eq(const void *a, size_t alen, const void *b, size_t blen)
{
    return key_cmp(a, alen, b, blen) == 0;
}

/* Bytes as the user sees them: "escaped" in quotes, or 0x-hex. */
void put_str(FILE *f, const void *p, size_t n)
{
    const uint8_t *b = p;
    if (hex_mode) {
        fputs("0x", f);
        for (size_t i = 0; i < n; i++)
            fprintf(f, "%02x", b[i]);
        return;
    }
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        if (b[i] >= 0x20 && b[i] < 0x7F && b[i] != '\\' && b[i] != '"')
            fputc(b[i], f);
        else
            fprintf(f, "\\x%02x", b[i]);
    }
    fputc('"', f);
}

/* The same without quotes (the value printed by `db get`). */
void put_bare(FILE *f, const void *p, size_t n)
{
    const uint8_t *b = p;
    if (hex_mode) {
        put_str(f, p, n);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (b[i] >= 0x20 && b[i] < 0x7F && b[i] != '\\' && b[i] != '"')
            fputc(b[i], f);
        else
            fprintf(f, "\\x%02x", b[i]);
    }
}

static int hex_digit(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* A key or value from the command line: with --hex, hex digits (0x
 * optional); else the text with \xNN and \\ escapes. *out is malloc'd (at
 * least one byte). 0, or -1 with a message printed. */
int parse_bytes(const char *what, const char *s, uint8_t **out, size_t *len)
{
    size_t n = strlen(s);
    uint8_t *b = malloc(n + 1);
    size_t m = 0;
    if (!b)
        return fail("out of memory"), -1;
    if (hex_mode) {
        if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
            s += 2;
        for (; *s; s += 2) {
            int hi = hex_digit(s[0]), lo = hi < 0 ? -1 : hex_digit(s[1]);
            if (hi < 0 || lo < 0) {
                free(b);
                return fail("%s: not hex (--hex wants pairs of hex digits, 0x optional)", what), -1;
            }
            b[m++] = (uint8_t)(hi << 4 | lo);
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            if (s[i] != '\\') {
                b[m++] = (uint8_t)s[i];
                continue;
            }
            if (s[i + 1] == '\\') {
                b[m++] = '\\';
                i++;
            } else if (s[i + 1] == 'x' && hex_digit(s[i + 2]) >= 0 && hex_digit(s[i + 3]) >= 0) {
                b[m++] = (uint8_t)(hex_digit(s[i + 2]) << 4 | hex_digit(s[i + 3]));
                i += 3;
            } else {
                free(b);
                return fail("%s: bad escape at byte %zu (use \\xNN or \\\\)", what, i), -1;
            }
        }
    }
    *out = b;
    *len = m;
    return 0;
}

int parse_count(const char *what, const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-')
        return fail("%s: not a count: %s", what, s), -1;
    *out = v;
    return 0;
}

/* ---- the command line ------------------------------------------------------------------- */

enum {
    OPT_FROM = 1,
    OPT_TO = 2,
    OPT_LIMIT = 4,
    OPT_CREATE = 8,
    OPT_NUMBER = 16,
    OPT_PREFIX_LEN = 32
};

struct command {
    const char *group, *name;
    int (*run)(struct opts *o);
    int npos;         /* positional arguments */
    unsigned opts;    /* OPT_* it takes (--hex and --help: every command) */
    const char *args; /* synopsis after the name */
    const char *help; /* what --help adds */
};

static const struct command commands[] = {
    {"sst", "dump", sst_dump, 1, OPT_FROM | OPT_TO, "FILE [--from K] [--to K] [--hex]",
     "Prints every entry of one table, in order, one per line:\n"
     "  \"key\" => \"value\"                         a plain table\n"
     "  \"user key\" seq N put => \"value\"          a table written by the store\n"
     "  \"user key\" seq N delete                  ... a tombstone\n"
     "  \"user key\" seq N blob => 000007.blob offset O size S\n"
     "                                          ... a value kept in a blob file: the\n"
     "                                          reference (file, record offset, value bytes)\n"
     "--from K starts at the first key >= K, --to K stops before the first key >= K\n"
     "(user keys, for a store table)."},
    {"sst", "props", sst_props, 1, 0, "FILE",
     "Prints the table's properties (entries, blocks, sizes, key range, note) and its\n"
     "filter's parameters: layout, m (bits), k, n (keys), bits/key, fill (share of\n"
     "bits set), expected false-positive rate, bytes, seed (for a keyed filter, the check\n"
     "value of the database's secret; never the secret), and what its hashes are."},
    {"sst", "verify", sst_verify, 1, 0, "FILE",
     "Checks one table: every block's checksum and decoding, the index, keys in strictly\n"
     "increasing order, every entry found again by a point lookup with the filter\n"
     "answering \"maybe\" (no false negatives), the properties against the content;\n"
     "in a store table every entry's kind known and every blob entry's reference\n"
     "well formed (the blob files themselves: db verify, blob verify).\n"
     "Exits 1 with one line naming the file and what is wrong."},
    {"blob", "dump", blob_dump, 1, OPT_NUMBER, "FILE [--number N] [--hex]",
     "Prints every record of one blob file, in file order, one per line:\n"
     "  OFFSET: \"user key\" => N bytes\n"
     "(the offset a table's reference names, the key, the value's length). Each\n"
     "record's checksum is checked as it is read; a bad one ends the dump with exit 1.\n"
     "The header must hold the file's number, taken from its name <n>.blob, or\n"
     "given with --number N."},
    {"blob", "verify", blob_verify, 1, OPT_NUMBER, "FILE [--number N]",
     "Checks one blob file: its header (magic, version, number: from the name\n"
     "<n>.blob, or --number N) and footer (checksum, record count and bytes against\n"
     "the file's size), then every record (lengths, checksum), and that the records\n"
     "are exactly the footer's. Exits 1 with one line naming the file, the offset and\n"
     "what is wrong. (Whether tables refer to its records: db verify.)"},
    {"db", "explain", db_explain, 2, OPT_FROM | OPT_TO | OPT_PREFIX_LEN,
     "DIR KEY | DIR [--from K] [--to K] [--prefix_len N]",
     "With KEY: runs one Get and shows its life step by step: the memtables (their\n"
     "filter's answer), then each table whose key range holds the key (level, number,\n"
     "range), its filter's answer, the data block read (offset, bytes, block cache or\n"
     "disk), for a value kept in a blob file the blob read (file, bytes, offset), and\n"
     "the result.\n"
     "With --from K and/or --to K instead: one range query, an iterator bounded to\n"
     "[--from, --to) positioned at its first key (kv_explain_seek): the memtables,\n"
     "then each table checked (level, number, range) with its prefix filter's and\n"
     "range filter's answers (negative, maybe, not asked) and the range filter's\n"
     "expected false-positive rate for this width, whether the table was skipped or\n"
     "which data block was read, a false positive (a filter said maybe, the table held\n"
     "nothing in range), and the first key in range. The range filter is asked with\n"
     "both bounds; the prefix filter when both bounds share their first N bytes,\n"
     "where --prefix_len N is the kv_options.prefix_len to open with (default 0: the\n"
     "prefix filters are not asked)."},
    {"db", "info", db_info, 1, 0, "DIR",
     "Shows the manifest's counters (last sequence, next file, live log), each level\n"
     "and table (entries, bytes, sequences, key range, filter memory and parameters),\n"
     "each blob file (bytes, records, live and garbage bytes, garbage as a share of\n"
     "its record bytes: what blob_gc_threshold is compared with) with their total,\n"
     "and files the manifest does not name. Reads without opening the database, so\n"
     "nothing is recovered or deleted; beside a writer, the state it last committed."},
    {"db", "verify", db_verify, 1, 0, "DIR",
     "Checks a database without opening it (nothing is recovered or deleted): every\n"
     "live table is present with its recorded size and passes `sst verify`, agrees\n"
     "with its manifest record (range, sequences, entries, filter seed and parameters);\n"
     "levels 1+ hold disjoint ranges; every live blob file is present with its\n"
     "recorded size and passes `blob verify` with the manifest's record count and\n"
     "bytes; every blob reference in a table names a live blob file, lies within its\n"
     "records and reads back (checksum, key, length); per blob file the references\n"
     "are exactly its live records (count and bytes: records less garbage); files\n"
     "the manifest does not name are reported.\n"
     "Exits 1, naming each table or file at fault, on any problem."},
    {"db", "get", db_get, 2, 0, "DIR KEY", "Prints the key's value (escaped); exits 1 if absent."},
    {"db", "put", db_put, 3, OPT_CREATE, "DIR KEY VALUE [--create]",
     "Stores a value. --create makes the database if there is none."},
    {"db", "delete", db_delete, 2, 0, "DIR KEY", "Deletes a key (an absent key is fine)."},
    {"db", "scan", db_scan, 1, OPT_FROM | OPT_TO | OPT_LIMIT, "DIR [--from K] [--to K] [--limit N]",
     "Prints live pairs in key order, one per line: \"key\" => \"value\".\n"
     "--from K starts at the first key >= K, --to K stops before the first key >= K,\n"
     "--limit N prints at most N pairs."},
    {"db", "stats", db_stats, 1, 0, "DIR",
     "Opens the database and prints its statistics in Prometheus text format\n"
     "(counters start at the open; per-table filter figures included)."},
    {"db", "property", db_property, 2, 0, "DIR NAME",
     "Opens the database and prints one of its properties (kv_property):\n"
     "  kv.stats                     the levels table (tables, size, entries, filters and\n"
     "                               what they answered) and the store's counters\n"
     "  kv.sstables                  every live table by level: number, size, entries,\n"
     "                               sequences, key range\n"
     "  kv.num-files-at-level<N>     tables in level N (0..6)\n"
     "  kv.approximate-memory-usage  bytes of memtables, block cache, filters, indexes\n"
     "Exits 1 for a name that is not a property."},
    {"db", "size", db_size, 1, OPT_FROM | OPT_TO, "DIR [--from K] [--to K]",
     "Opens the database and prints the approximate bytes its tables take for the keys\n"
     "in [--from, --to) (kv_approximate_sizes: from the tables' indexes, no data read;\n"
     "writes still in the log count nothing). Without --from: from the first key;\n"
     "without --to: to past the last."},
    {"db", "compact", db_compact, 1, 0, "DIR",
     "Compacts every table down to the deepest level holding data and prints the\n"
     "tables per level afterwards."},
    {"db", "repair", db_repair, 1, 0, "DIR",
     "Rebuilds the manifest from the tables and logs in DIR (kv_repair): a database\n"
     "whose MANIFEST was lost or damaged opens again. Prints one line per thing done\n"
     "(tables read, tables moved to DIR/lost/ and why, logs replayed and records\n"
     "recovered, the new last sequence). Nothing is deleted that holds data the new\n"
     "manifest lacks: what cannot be used goes to DIR/lost/."},
    {"db", "checkpoint", db_checkpoint, 2, 0, "DIR NEWDIR",
     "Makes NEWDIR (which must not exist; its parent must) a database holding exactly\n"
     "what DIR holds (kv_checkpoint): tables and blob files hard-linked where NEWDIR is\n"
     "on the same file system, copied otherwise; the live logs copied; a fresh\n"
     "manifest; all synced. Prints the files, how many are links, the bytes copied\n"
     "and the time taken. A backup: a checkpoint on another file system (or one copied\n"
     "there), checked with `kvtool db verify NEWDIR` (doc/operations.md). DIR is\n"
     "opened read-only: it may be open in a writer meanwhile (NEWDIR holds what DIR\n"
     "held as kvtool opened it, the writer's log included), and nothing is written\n"
     "into it."},
    {"db", "destroy", db_destroy, 1, 0, "DIR",
     "Removes the database's files (kv_destroy): tables, blob files, logs, MANIFEST,\n"
     "LOCK; then DIR itself when nothing else is left in it. Other files, and\n"
     "DIR/lost/, stay."},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f)
{
    fputs("usage: kvtool sst|blob|db COMMAND ARGS... [--hex]\n", f);
    const char *group = "";
    for (size_t i = 0; i < NCOMMANDS; i++) {
        const struct command *c = &commands[i];
        if (strcmp(group, c->group) != 0) {
            group = c->group;
            fputs(strcmp(group, "sst") == 0    ? "\nOne table (an .sst file):\n"
                  : strcmp(group, "blob") == 0 ? "\nOne blob file (a .blob file: values kept "
                                                 "apart from the tables):\n"
                                               : "\nA database (a directory):\n",
                  f);
        }
        fprintf(f, "  kvtool %s %s %s\n", c->group, c->name, c->args);
    }
    fputs("\nKeys and values print as \"escaped\" strings: printable ASCII as is, \\ \" and\n"
          "other bytes as \\xNN. Give keys and values the same way (\\xNN, \\\\). With --hex\n"
          "they print as 0x-prefixed hex and are given as hex (0x optional).\n"
          "Exit status: 0 ok; 1 failed, key not found, or verify found a problem; 2 bad usage.\n"
          "A key that begins with -- goes after --: kvtool db get DIR -- --key.\n"
          "`kvtool sst|blob|db COMMAND --help` describes one command.\n",
          f);
}

static void command_help(const struct command *c)
{
    printf("usage: kvtool %s %s %s\n\n%s\n", c->group, c->name, c->args, c->help);
    printf("\nOptions: --hex (keys and values as hex), --help.\n");
}

static int is_help(const char *a)
{
    return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0 || strcmp(a, "help") == 0;
}

/* The name of positional argument i (0-based) as the synopsis gives it
 * ("DIR", "KEY"): the i-th word of c->args not in brackets. */
static void pos_name(const struct command *c, int i, char *buf, size_t n)
{
    snprintf(buf, n, "argument %d", i + 1);
    const char *p = c->args;
    for (int k = 0; *p;) {
        size_t len = strcspn(p, " ");
        if (p[0] != '[' && k++ == i) {
            snprintf(buf, n, "%.*s", (int)len, p);
            return;
        }
        p += len + (p[len] == ' ');
    }
}

/* Positional arguments a command must be given: all of them, but db
 * explain's KEY, which --from/--to replace (db_explain wants one or the
 * other). */
static int npos_required(const struct command *c)
{
    return c->run == db_explain ? 1 : c->npos;
}

/* Options anywhere after the command name; `--` ends them. */
static int parse_args(const struct command *c, int argc, char **argv, struct opts *o)
{
    memset(o, 0, sizeof *o);
    int opts_done = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!opts_done && strcmp(a, "--") == 0) {
            opts_done = 1;
            continue;
        }
        if (opts_done || strncmp(a, "--", 2) != 0 || a[2] == '\0') {
            if (strcmp(a, "-h") == 0 && !opts_done) {
                o->help = 1;
                continue;
            }
            if (o->npos == c->npos) {
                fprintf(stderr,
                        "kvtool: %s: unexpected argument '%s': it takes %d (usage: "
                        "kvtool %s %s)\n",
                        cmd_name, a, c->npos, cmd_name, c->args);
                return EXIT_USAGE;
            }
            o->pos[o->npos++] = a;
            continue;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        const char *value = eq ? eq + 1 : NULL;
        unsigned flag = 0;
        const char **slot = NULL;
#define IS(s) (nlen == sizeof(s) - 1 && strncmp(name, s, nlen) == 0)
        if (IS("help"))
            o->help = 1;
        else if (IS("hex"))
            hex_mode = 1;
        else if (IS("create"))
            flag = OPT_CREATE, o->create = 1;
        else if (IS("from"))
            flag = OPT_FROM, slot = &o->from;
        else if (IS("to"))
            flag = OPT_TO, slot = &o->to;
        else if (IS("limit"))
            flag = OPT_LIMIT, slot = &o->limit;
        else if (IS("number"))
            flag = OPT_NUMBER, slot = &o->number;
        else if (IS("prefix_len"))
            flag = OPT_PREFIX_LEN, slot = &o->prefix_len;
        else {
            fprintf(stderr, "kvtool: %s: unknown option %s (see kvtool %s --help)\n", cmd_name, a,
                    cmd_name);
            return EXIT_USAGE;
        }
#undef IS
        if (flag && !(c->opts & flag)) {
            fprintf(stderr,
                    "kvtool: %s: %.*s is not an option of this command (see kvtool %s "
                    "--help)\n",
                    cmd_name, (int)nlen + 2, a, cmd_name);
            return EXIT_USAGE;
        }
        if (slot) {
            if (!value) {
                if (i + 1 == argc) {
                    fprintf(stderr, "kvtool: %s: %s needs a value\n", cmd_name, a);
                    return EXIT_USAGE;
                }
                value = argv[++i];
            }
            *slot = value;
        } else if (value) {
            fprintf(stderr, "kvtool: %s: %.*s takes no value\n", cmd_name, (int)nlen + 2, a);
            return EXIT_USAGE;
        }
    }
    if (!o->help && o->npos < npos_required(c)) {
        char name[32];
        pos_name(c, o->npos, name, sizeof name);
        fprintf(stderr, "kvtool: %s: missing %s (usage: kvtool %s %s)\n", cmd_name, name, cmd_name,
                c->args);
        return EXIT_USAGE;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (is_help(argv[1])) {
        usage(stdout);
        return 0;
    }
    const char *group = argv[1];
    if (strcmp(group, "sst") != 0 && strcmp(group, "blob") != 0 && strcmp(group, "db") != 0) {
        fprintf(stderr,
                "kvtool: unknown command group '%s': sst, blob or db (see kvtool "
                "--help)\n",
                group);
        return EXIT_USAGE;
    }
    if (argc < 3 || is_help(argv[2])) {
        usage(argc < 3 ? stderr : stdout);
        return argc < 3 ? EXIT_USAGE : 0;
    }
    const struct command *c = NULL;
    for (size_t i = 0; i < NCOMMANDS && !c; i++)
        if (strcmp(commands[i].group, group) == 0 && strcmp(commands[i].name, argv[2]) == 0)
            c = &commands[i];
    if (!c) {
        fprintf(stderr, "kvtool: unknown command '%s %s' (see kvtool --help)\n", group, argv[2]);
        return EXIT_USAGE;
    }
    snprintf(cmd_name, sizeof cmd_name, "%s %s", c->group, c->name);
    struct opts o;
    int rc = parse_args(c, argc - 3, argv + 3, &o);
    if (rc != 0)
        return rc;
    if (o.help) {
        command_help(c);
        return 0;
    }
    rc = c->run(&o);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "kvtool: %s: cannot write the output: %s\n", cmd_name, strerror(errno));
        return EXIT_FAIL;
    }
    return rc;
}
