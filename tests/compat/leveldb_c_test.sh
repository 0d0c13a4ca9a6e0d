#!/usr/bin/env bash
# leveldb_c_test.sh - LevelDB 1.23's own C API test, db/c_test.c, built
# unchanged against kv's <leveldb/c.h> and libkv_leveldb, must print PASS.
#
# The file is LevelDB's, not ours: it is not in this repository. The script
# takes it from Debian's leveldb source package (`apt-get source leveldb`)
# and keeps it in CACHE_DIR, so later runs need no network. apt-get runs with
# a private state of its own under CACHE_DIR: the machine's own apt sources
# (deb lines, and .sources files of Types deb), given as deb-src, and their
# index lists there, so neither root nor a change to /etc/apt is needed.
# When the source cannot be had (no apt-get or dpkg-source, no network, no
# leveldb 1.23 in the archive) it says why and exits 77, which ctest shows
# as a skip (SKIP_RETURN_CODE). Anything else that goes wrong fails.
#
# It checks that what runs is ours: the preprocessor took leveldb/c.h from
# INCLUDE_DIR (not /usr/include/leveldb, which libleveldb-dev puts there),
# the program loads libkv_leveldb.so from LIB_DIR and no libleveldb.so, and
# every leveldb_ function it calls is defined there.
#
# Usage: tests/compat/leveldb_c_test.sh INCLUDE_DIR LIB_DIR CACHE_DIR
# Environment: CC (default cc), CFLAGS (added: e.g. the sanitizers').
set -euo pipefail
if [ $# -ne 3 ]; then
    echo "usage: $0 INCLUDE_DIR LIB_DIR CACHE_DIR" >&2
    exit 2
fi
inc=$(cd "$1" && pwd)
libdir=$(cd "$2" && pwd)
mkdir -p "$3"
cache=$(cd "$3" && pwd)
CC=${CC:-cc}
CFLAGS=${CFLAGS:-}
SKIP=77
say() { echo "leveldb_c_test: $*"; }
skip() {
    say "SKIPPED: $*"
    exit "$SKIP"
}

# ---- LevelDB's c_test.c, from the cache or from Debian --------------------------
fetch() {
    command -v apt-get >/dev/null || skip "no apt-get here to fetch Debian's leveldb source"
    command -v dpkg-source >/dev/null ||
        skip "dpkg-source is missing (apt-get install dpkg-dev) to unpack Debian's leveldb source"
    local apt="$cache/apt"
    rm -rf "$apt"
    mkdir -p "$apt/sources.list.d" "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/src"
    # The machine's sources, as deb-src. One-line form first.
    local n=0 f
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        n=$((n + 1))
        sed -nE 's/^[[:space:]]*deb([[:space:]])/deb-src\1/p' "$f" >"$apt/sources.list.d/$n.list"
    done
    # deb822 form: each stanza whose Types has deb gets Types: deb-src.
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        n=$((n + 1))
        awk 'BEGIN { RS = ""; ORS = "\n\n" }
             /(^|\n)Types:[^\n]*[[:space:]]deb([[:space:]]|$)/ {
                 sub(/(^|\n)Types:[^\n]*/, "\nTypes: deb-src"); sub(/^\n/, ""); print }' \
            "$f" >"$apt/sources.list.d/$n.sources"
    done
    local opts=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$apt/sources.list.d"
        -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o Debug::NoLocking=1
        -o Acquire::Retries=0 -o Acquire::http::Timeout=20 -o APT::Sandbox::User=root -q)
    # A source that has no deb-src (a vendor's archive) fails its part of
    # the update; what matters is whether leveldb's source can be had.
    say "fetching Debian's leveldb source (apt-get update, apt-get source) into $apt"
    timeout 300 apt-get "${opts[@]}" update >"$apt/update.log" 2>&1 || true
    if ! (cd "$apt/src" && timeout 300 apt-get "${opts[@]}" source leveldb) >"$apt/source.log" 2>&1; then
        tail -n 5 "$apt/update.log" "$apt/source.log" | sed 's/^/  /'
        skip "apt-get source leveldb failed (no network, or no deb-src for leveldb): logs in $apt"
    fi
    local dir
    dir=$(find "$apt/src" -maxdepth 1 -type d -name 'leveldb-*' -print -quit)
    [ -n "$dir" ] && [ -f "$dir/db/c_test.c" ] || {
        echo "leveldb_c_test: the leveldb source in $apt/src has no db/c_test.c" >&2
        exit 1
    }
    local dsc version
    dsc=$(find "$apt/src" -maxdepth 1 -name 'leveldb_*.dsc' -print -quit)
    version=$(sed -n 's/^Version: //p' "$dsc")
    case "$version" in
    1.23*) ;;
    *) skip "Debian's leveldb source is version $version, not 1.23: its c_test.c tests another API" ;;
    esac
    cp "$dir/db/c_test.c" "$cache/c_test.c.new"
    echo "leveldb $version, db/c_test.c, from apt-get source leveldb" >"$cache/c_test.origin"
    mv "$cache/c_test.c.new" "$cache/c_test.c"
    rm -rf "$apt/src" "$apt/cache"
}
if [ -f "$cache/c_test.c" ] && [ -f "$cache/c_test.origin" ]; then
    say "using $cache/c_test.c ($(cat "$cache/c_test.origin"), fetched before)"
else
    fetch
    say "fetched $cache/c_test.c ($(cat "$cache/c_test.origin"))"
fi

# ---- build it against our header and libkv_leveldb ----------------------------------
work=$(mktemp -d /tmp/kv_leveldb_c_test.XXXXXX)
trap 'rm -rf "$work"' EXIT
# shellcheck disable=SC2086 # CFLAGS is a list of flags
used=$("$CC" $CFLAGS -I"$inc" -E -H "$cache/c_test.c" 2>&1 >/dev/null | awk '/leveldb\/c\.h$/ && !n++' |
    sed 's/^\.* *//' || true)
if [ -z "$used" ] || [ "$(cd "$(dirname "$used")" && pwd)/c.h" != "$inc/leveldb/c.h" ]; then
    echo "leveldb_c_test: c_test.c would include $used, not $inc/leveldb/c.h" >&2
    exit 1
fi
# c_test.c is LevelDB's code, built as LevelDB builds it: its warnings are
# not ours to fix, so no -Werror here.
# shellcheck disable=SC2086
"$CC" -std=gnu11 $CFLAGS -I"$inc" "$cache/c_test.c" -o "$work/c_test" \
    -L"$libdir" -Wl,-rpath,"$libdir" -lkv_leveldb -w

# ---- it is ours that runs ----------------------------------------------------------
libs=$(ldd "$work/c_test")
if ! grep -q "libkv_leveldb\.so.* => $libdir/libkv_leveldb\.so" <<<"$libs"; then
    echo "leveldb_c_test: c_test does not load $libdir/libkv_leveldb.so:" >&2
    echo "$libs" >&2
    exit 1
fi
if grep -q 'libleveldb\.so' <<<"$libs"; then
    echo "leveldb_c_test: c_test loads LevelDB's own library:" >&2
    echo "$libs" >&2
    exit 1
fi
wanted=$(nm -D --undefined-only "$work/c_test" | awk '$NF ~ /^leveldb_/ { print $NF }' | sort)
defined=$(nm -D --defined-only "$libdir/libkv_leveldb.so" | awk '$NF ~ /^leveldb_/ { print $NF }' |
    sort)
missing=$(comm -23 <(echo "$wanted") <(echo "$defined"))
if [ -n "$missing" ]; then
    echo "leveldb_c_test: libkv_leveldb.so lacks: $missing" >&2
    exit 1
fi
say "c_test calls $(echo "$wanted" | wc -l) leveldb_ functions, all from $libdir/libkv_leveldb.so"

# ---- run it -----------------------------------------------------------------------
# Its database lives in $TEST_TMPDIR (leveldb_env_get_test_directory).
mkdir "$work/db"
if ! TEST_TMPDIR="$work/db" "$work/c_test" >"$work/out" 2>&1; then
    cat "$work/out"
    echo "leveldb_c_test: c_test failed" >&2
    exit 1
fi
cat "$work/out"
if [ "$(tail -1 "$work/out")" != PASS ]; then
    echo "leveldb_c_test: c_test exited 0 but did not print PASS last" >&2
    exit 1
fi
say "LevelDB's c_test passes against libkv_leveldb"
