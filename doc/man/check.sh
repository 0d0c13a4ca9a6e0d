#!/bin/sh
# check.sh - the man pages say what the tools' --help says, no more, no less.
#
#   doc/man/check.sh KVBENCH KVTOOL MANDIR
#
# KVBENCH and KVTOOL are the built programs, MANDIR the folder of kvbench.1
# and kvtool.1 (doc/man). It fails, naming each difference, unless
#   - every flag --help defines (a line "  --name...") is an entry of the man
#     page (a .TP item that starts with it), and every kvbench benchmark
#     --help lists is an entry too;
#   - every kvtool command of --help ("kvtool db get ...") is an entry, and
#     every --flag kvtool's --help mentions is an entry;
#   - every --flag the man page mentions anywhere, every benchmark entry and
#     every command entry is one that --help knows.
# ctest runs it as man_pages (root CMakeLists.txt).
set -eu

if [ $# -ne 3 ]; then
    echo "usage: $0 KVBENCH KVTOOL MANDIR" >&2
    exit 2
fi
kvbench=$1 kvtool=$2 mandir=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kv-mancheck.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
bad=0

# A man page as plain text: \- is -, \e is \, font changes are gone.
plain() {
    sed -e 's/\\-/-/g' -e 's/\\e/\\/g' -e 's/\\f[BIRP]//g' "$1"
}
# The first line of each .TP item (the term), with ".B " dropped.
terms() {
    plain "$1" | awk 'tp { sub(/^\.B[RI]? /, ""); print; tp = 0; next } /^\.TP/ { tp = 1 }'
}
# Lines of $1 missing from $2 (both files, one item a line), each reported as
# "$3: $4 <item>".
missing() {
    sort -u "$1" > "$tmp/a"
    sort -u "$2" > "$tmp/b"
    comm -23 "$tmp/a" "$tmp/b" > "$tmp/diff"
    while IFS= read -r item; do
        echo "$3: $4 $item"
        bad=1
    done < "$tmp/diff"
}

for f in "$mandir/kvbench.1" "$mandir/kvtool.1"; do
    [ -r "$f" ] || { echo "$0: cannot read $f" >&2; exit 2; }
done
"$kvbench" --help > "$tmp/kvbench.help" 2>&1 || { echo "$0: $kvbench --help failed" >&2; exit 2; }
"$kvtool" --help > "$tmp/kvtool.help" 2>&1 || { echo "$0: $kvtool --help failed" >&2; exit 2; }

# kvbench: the flags it defines, the benchmarks it lists, every flag it names.
sed -n 's/^  \(--[a-z_]*\).*/\1/p' "$tmp/kvbench.help" > "$tmp/help.flags"
sed -n 's/^      \([a-z][a-z]*\) .*/\1/p' "$tmp/kvbench.help" > "$tmp/help.benches"
grep -o -- '--[a-z_][a-z_]*' "$tmp/kvbench.help" > "$tmp/help.named" || true
terms "$mandir/kvbench.1" > "$tmp/man.terms"
sed -n 's/^\(--[a-z_]*\).*/\1/p' "$tmp/man.terms" > "$tmp/man.flags"
sed -n 's/^\([a-z][a-z]*\)$/\1/p' "$tmp/man.terms" > "$tmp/man.benches"
plain "$mandir/kvbench.1" | grep -o -- '--[a-z_][a-z_]*' > "$tmp/man.named" || true
missing "$tmp/help.flags" "$tmp/man.flags" kvbench.1 "no entry for the flag"
missing "$tmp/help.benches" "$tmp/man.benches" kvbench.1 "no entry for the benchmark"
missing "$tmp/man.named" "$tmp/help.named" kvbench.1 "names a flag kvbench --help does not know:"
missing "$tmp/man.benches" "$tmp/help.benches" kvbench.1 "has a benchmark kvbench --help does not list:"

# kvtool: its commands ("db get") and every flag its --help names.
sed -n -E 's/^  kvtool (sst|blob|db) ([a-z]+).*/\1 \2/p' "$tmp/kvtool.help" \
    > "$tmp/help.commands"
# ("kvtool db get DIR -- --key": after a bare --, a key, not a flag)
sed -e 's/ -- --[a-z_]*//g' "$tmp/kvtool.help" | grep -o -- '--[a-z_][a-z_]*' \
    > "$tmp/help.named" || true
terms "$mandir/kvtool.1" > "$tmp/man.terms"
sed -n -E 's/^(sst|blob|db) ([a-z]+).*/\1 \2/p' "$tmp/man.terms" > "$tmp/man.commands"
sed -n 's/^\(--[a-z_]*\).*/\1/p' "$tmp/man.terms" > "$tmp/man.flags"
plain "$mandir/kvtool.1" | grep -o -- '--[a-z_][a-z_]*' > "$tmp/man.named" || true
missing "$tmp/help.commands" "$tmp/man.commands" kvtool.1 "no entry for the command"
missing "$tmp/help.named" "$tmp/man.flags" kvtool.1 "no entry for the flag"
missing "$tmp/man.commands" "$tmp/help.commands" kvtool.1 "has a command kvtool --help does not list:"
missing "$tmp/man.named" "$tmp/help.named" kvtool.1 "names a flag kvtool --help does not know:"

if [ $bad -ne 0 ]; then
    echo "$0: the man pages and --help differ (fix doc/man/*.1)" >&2
    exit 1
fi
echo "man pages match --help: $(wc -l < "$tmp/help.flags") kvbench flags," \
    "$(sort -u "$tmp/help.benches" | wc -l) benchmarks; kvtool: $(wc -l < "$tmp/help.commands")" \
    "commands, $(sort -u "$tmp/help.named" | wc -l) flags"
