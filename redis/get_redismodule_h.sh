#!/usr/bin/env bash
# get_redismodule_h.sh - puts Redis's module API header, redismodule.h, in
# CACHE_DIR, taken from Debian's redis source package (`apt-get source
# redis`). The header is Redis's file, not ours: it is never kept in this
# repository. CMake runs this at configure time when -DKV_REDIS=ON and no
# -DREDISMODULE_H_DIR= is given.
#
# apt-get runs with a private state under CACHE_DIR (as
# tests/compat/leveldb_c_test.sh does): the machine's own apt sources (one-line
# "deb" lines and deb822 stanzas of Types deb), given as deb-src, with their
# index lists kept there, so neither root nor a change to /etc/apt is needed.
# A header fetched before is reused without the network.
#
# Usage: redis/get_redismodule_h.sh CACHE_DIR
# On success prints the directory holding redismodule.h and exits 0; on
# failure says why on stderr and exits 1.
set -euo pipefail
if [ $# -ne 1 ]; then
    echo "usage: $0 CACHE_DIR" >&2
    exit 2
fi
mkdir -p "$1"
cache=$(cd "$1" && pwd)
say() { echo "get_redismodule_h: $*" >&2; }
fail() {
    say "$*"
    exit 1
}

if [ -f "$cache/include/redismodule.h" ] && [ -f "$cache/include/origin" ]; then
    echo "$cache/include"
    exit 0
fi
command -v apt-get >/dev/null || fail "no apt-get here to fetch Debian's redis source"
command -v dpkg-source >/dev/null ||
    fail "dpkg-source is missing (apt-get install dpkg-dev) to unpack Debian's redis source"
apt="$cache/apt"
rm -rf "$apt"
mkdir -p "$apt/sources.list.d" "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/src"
n=0
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    n=$((n + 1))
    sed -nE 's/^[[:space:]]*deb([[:space:]])/deb-src\1/p' "$f" >"$apt/sources.list.d/$n.list"
done
for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    n=$((n + 1))
    awk 'BEGIN { RS = ""; ORS = "\n\n" }
         /(^|\n)Types:[^\n]*[[:space:]]deb([[:space:]]|$)/ {
             sub(/(^|\n)Types:[^\n]*/, "\nTypes: deb-src"); sub(/^\n/, ""); print }' \
        "$f" >"$apt/sources.list.d/$n.sources"
done
opts=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$apt/sources.list.d"
    -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o Debug::NoLocking=1
    -o Acquire::Retries=0 -o Acquire::http::Timeout=20 -o APT::Sandbox::User=root -q)
say "fetching Debian's redis source (apt-get update, apt-get source) into $apt"
# A source without deb-src (a vendor's archive) fails its part of the
# update; what matters is whether redis's source can be had.
timeout 300 apt-get "${opts[@]}" update >"$apt/update.log" 2>&1 || true
if ! (cd "$apt/src" && timeout 300 apt-get "${opts[@]}" source redis) >"$apt/source.log" 2>&1; then
    tail -n 5 "$apt/update.log" "$apt/source.log" | sed 's/^/  /' >&2
    fail "apt-get source redis failed (no network, or no deb-src for redis): logs in $apt;" \
        "give the header's directory with -DREDISMODULE_H_DIR= instead"
fi
dir=$(find "$apt/src" -maxdepth 1 -type d -name 'redis-*' -print -quit)
[ -n "$dir" ] && [ -f "$dir/src/redismodule.h" ] || fail "the redis source in $apt/src has no src/redismodule.h"
dsc=$(find "$apt/src" -maxdepth 1 -name 'redis_*.dsc' -print -quit)
version=$(sed -n 's/^Version: //p' "$dsc")
mkdir -p "$cache/include"
cp "$dir/src/redismodule.h" "$cache/include/redismodule.h"
echo "redis $version, src/redismodule.h, from apt-get source redis" >"$cache/include/origin"
rm -rf "$apt/src" "$apt/cache"
say "fetched redismodule.h of redis $version"
echo "$cache/include"
