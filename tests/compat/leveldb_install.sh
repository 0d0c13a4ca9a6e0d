#!/usr/bin/env bash
# leveldb_install.sh - the installed tree serves LevelDB's C API: after
# `cmake --install BUILD_DIR --prefix <scratch>`, the example program
# (tests/compat/compat_example.c, which includes only <leveldb/c.h>) builds and runs
#   1. with `pkg-config --cflags --libs kv-leveldb` (libkv_leveldb.so),
#   2. with `pkg-config --cflags --libs --static kv-leveldb` and -static
#      (libkv_leveldb.a, libkv.a and what they need),
#   3. from a CMake project: find_package(kv) and kv::leveldb.
# kv.pc is checked on the way, since kv-leveldb.pc requires it. Each build
# must take the installed <leveldb/c.h>, not one in /usr/include.
#
# Usage: tests/compat/leveldb_install.sh BUILD_DIR EXAMPLE_C
# Environment: CC (default cc), CMAKE (default cmake).
set -euo pipefail
if [ $# -ne 2 ]; then
    echo "usage: $0 BUILD_DIR EXAMPLE_C" >&2
    exit 2
fi
build=$1
example=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
CC=${CC:-cc}
CMAKE=${CMAKE:-cmake}
say() { echo "leveldb_install: $*"; }
fail() {
    echo "leveldb_install: $*" >&2
    exit 1
}

work=$(mktemp -d /tmp/kv_leveldb_install.XXXXXX)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
"$CMAKE" --install "$build" --prefix "$prefix" >"$work/install.log"
for f in include/leveldb/c.h include/leveldb/export.h include/kv/kv.h; do
    [ -f "$prefix/$f" ] || fail "$f not installed"
done
pc=$(find "$prefix" -name kv-leveldb.pc -print -quit)
[ -n "$pc" ] || fail "kv-leveldb.pc not installed"
export PKG_CONFIG_PATH
PKG_CONFIG_PATH=$(dirname "$pc")
libs=$(pkg-config --libs kv-leveldb)
say "pkg-config --libs kv-leveldb: $libs"
[[ " $libs " == *" -lkv_leveldb "* ]] || fail "no -lkv_leveldb in: $libs"
cflags=$(pkg-config --cflags kv-leveldb)

# The header a build would take: the installed one.
used=$(echo '#include <leveldb/c.h>' |
    "$CC" $cflags -E -H -x c - 2>&1 >/dev/null | awk '/leveldb\/c\.h$/ && !n++' | sed 's/^\.* *//')
[ "$(cd "$(dirname "$used")" && pwd)" = "$(cd "$prefix/include/leveldb" && pwd)" ] ||
    fail "<leveldb/c.h> resolves to $used, not the installed one"

# run <program> <what>: two phases of the example.
run() {
    "$1" batch >/dev/null || fail "$2: the example failed (batch)"
    "$1" snapshot >/dev/null || fail "$2: the example failed (snapshot)"
    say "$2: built and ran"
}

# 1. Shared, through pkg-config. The installed library must be the one
# loaded (rpath to the scratch prefix; no LD_LIBRARY_PATH).
libdir=$(pkg-config --variable=libdir kv-leveldb)
# shellcheck disable=SC2086 # pkg-config gives lists of flags
"$CC" -std=c11 -Wall -Werror $cflags "$example" -o "$work/ex_shared" $libs -Wl,-rpath,"$libdir"
loaded=$(ldd "$work/ex_shared")
grep -q "libkv_leveldb\.so.* => $(cd "$libdir" && pwd)/" <<<"$loaded" ||
    fail "ex_shared does not load libkv_leveldb.so from $libdir: $loaded"
run "$work/ex_shared" "pkg-config, shared"

# 2. Static, through pkg-config --static.
slibs=$(pkg-config --libs --static kv-leveldb)
# shellcheck disable=SC2086
"$CC" -std=c11 -Wall -Werror $cflags "$example" -o "$work/ex_static" $slibs -static
if ldd "$work/ex_static" >/dev/null 2>&1; then
    fail "ex_static is not a static program"
fi
run "$work/ex_static" "pkg-config --static, -static"

# 3. CMake: find_package(kv) gives kv::leveldb.
mkdir "$work/proj"
cp "$example" "$work/proj/example.c"
cat >"$work/proj/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.25)
project(uses_kv_leveldb LANGUAGES C)
find_package(kv REQUIRED)
add_executable(example example.c)
target_link_libraries(example PRIVATE kv::leveldb)
EOF
"$CMAKE" -S "$work/proj" -B "$work/proj/build" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_C_COMPILER="$CC" >"$work/cmake.log" 2>&1 || {
    cat "$work/cmake.log"
    fail "the CMake project did not configure"
}
"$CMAKE" --build "$work/proj/build" >"$work/build.log" 2>&1 || {
    cat "$work/build.log"
    fail "the CMake project did not build"
}
run "$work/proj/build/example" "CMake, kv::leveldb"
say "the installed tree works: pkg-config (shared, static) and find_package(kv)"
