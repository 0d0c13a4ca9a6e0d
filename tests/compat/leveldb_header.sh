#!/usr/bin/env bash
# leveldb_header.sh - kv's <leveldb/c.h> declares exactly what LevelDB
# 1.23's does: the same types, constants and function signatures, compared
# after the preprocessor (comments and layout aside, LEVELDB_EXPORT empty on
# both sides). LevelDB's header is the one Debian's libleveldb-dev installs
# (in SYSTEM_INCLUDE, default /usr/include); without it, or with another
# release of it, the script says so and exits 77 (a skip for ctest).
# Usage: tests/compat/leveldb_header.sh OUR_INCLUDE_DIR [SYSTEM_INCLUDE]
# Environment: CC (default cc).
set -euo pipefail
ours=$1
theirs=${2:-/usr/include}
CC=${CC:-cc}
db_h=$theirs/leveldb/db.h
if [ ! -f "$theirs/leveldb/c.h" ] || [ ! -f "$db_h" ]; then
    echo "leveldb_header: SKIPPED: no LevelDB header in $theirs (apt-get install libleveldb-dev)"
    exit 77
fi
major=$(sed -nE 's/.*kMajorVersion = ([0-9]+);.*/\1/p' "$db_h")
minor=$(sed -nE 's/.*kMinorVersion = ([0-9]+);.*/\1/p' "$db_h")
if [ "$major.$minor" != 1.23 ]; then
    echo "leveldb_header: SKIPPED: $theirs/leveldb is LevelDB $major.$minor, not 1.23"
    exit 77
fi
# Each declaration on a line of its own, whitespace folded, sorted.
decls() {
    echo '#include <leveldb/c.h>' | "$CC" -E -P -DLEVELDB_EXPORT= -I"$1" -x c - |
        tr -s ' \n\t' ' ' | sed 's/;/;\n/g' | sed 's/^ *//' | grep -v '^$' | sort
}
theirs_d=$(decls "$theirs")
ours_d=$(decls "$ours")
if [ "$theirs_d" != "$ours_d" ]; then
    echo "leveldb_header: $ours/leveldb/c.h differs from LevelDB 1.23's ($theirs/leveldb/c.h):"
    diff <(echo "$theirs_d") <(echo "$ours_d") || true
    exit 1
fi
n=$(grep -c 'leveldb_[a-z_]*(' <<<"$ours_d")
echo "leveldb_header: the same declarations as LevelDB 1.23's c.h ($n functions, their types and constants)"
