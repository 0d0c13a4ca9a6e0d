#!/usr/bin/env bash
# run.sh - set up a fresh Debian machine for kv, build, and run something.
#
#   tools/run.sh bench   install what is missing, build, run the main job:
#                        kvbench's default run (options after "bench" go to
#                        kvbench, e.g. tools/run.sh bench --num=100000 --json)
#   tools/run.sh test    install what is missing, build with warnings as
#                        errors, the Redis module (-DKV_REDIS=ON) and the
#                        Python binding (-DKV_PYTHON=ON), run every test
#                        (ctest)
#
# Missing Debian packages are installed with apt-get: directly as root, with
# sudo otherwise; if neither is possible the script names the packages and
# stops. It says what it installed and what it built.
# Environment: BUILD_DIR (default: build), JOBS (default: number of CPUs),
# EXTRA_PACKAGES (more Debian packages to install, e.g. for CI's fuzzers).
set -euo pipefail

cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
PACKAGES=(cmake pkg-config gcc libc6-dev make liblmdb-dev libzstd-dev libxxhash-dev check)
# The Redis module (redis/, -DKV_REDIS=ON in `test`): the server, redis-cli
# and redis-py for its tests, hiredis for redis/bench, dpkg-dev to unpack
# Debian's redis source for redismodule.h.
PACKAGES+=(redis-server redis-tools python3-redis libhiredis-dev dpkg-dev)
# The differential tests (tests/diff/) run kv's LevelDB drop-in beside
# Debian's real LevelDB.
PACKAGES+=(libleveldb-dev)
# The Python binding (python/, -DKV_PYTHON=ON in `test`): its headers and
# build tools, venv for the install check of .ci/run, pytest for its tests.
PACKAGES+=(python3-dev python3-setuptools python3-pip python3-venv python3-pytest)
# shellcheck disable=SC2206 # word splitting is the point
PACKAGES+=(${EXTRA_PACKAGES:-})

say() { printf 'kv: %s\n' "$*"; }

install_missing() {
    local missing=()
    if command -v dpkg-query >/dev/null 2>&1; then
        for p in "${PACKAGES[@]}"; do
            dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
                missing+=("$p")
        done
    else
        # Not Debian: check for the tools and pkg-config modules themselves.
        command -v cmake >/dev/null 2>&1 || missing+=(cmake)
        command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
        for m in lmdb:liblmdb-dev libzstd:libzstd-dev libxxhash:libxxhash-dev check:check; do
            pkg-config --exists "${m%%:*}" 2>/dev/null || missing+=("${m#*:}")
        done
        if ((${#missing[@]})); then
            say "missing: ${missing[*]} (Debian package names); install them and run again"
            exit 1
        fi
    fi
    if ((${#missing[@]} == 0)); then
        say "dependencies: all present (${PACKAGES[*]})"
        return
    fi
    local apt=(apt-get -y -q install --no-install-recommends "${missing[@]}")
    local env=(env DEBIAN_FRONTEND=noninteractive)
    say "installing missing packages: ${missing[*]}"
    if [ "$(id -u)" -eq 0 ]; then
        "${env[@]}" apt-get -q update && "${env[@]}" "${apt[@]}"
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        sudo "${env[@]}" apt-get -q update && sudo "${env[@]}" "${apt[@]}"
    else
        say "cannot install packages: not root and sudo is unavailable or asks for a password"
        say "run as root: apt-get install ${missing[*]}"
        exit 1
    fi
    say "installed: ${missing[*]}"
}

build() {
    say "configuring $BUILD_DIR/ ($*)"
    cmake -S . -B "$BUILD_DIR" "$@" >/dev/null
    say "building in $BUILD_DIR/ with $JOBS jobs"
    cmake --build "$BUILD_DIR" -j "$JOBS"
}

case "${1:-}" in
bench)
    install_missing
    build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKV_WERROR=OFF
    say "running the benchmark: $BUILD_DIR/tools/kvbench ${*:2}"
    "$BUILD_DIR/tools/kvbench" "${@:2}"
    ;;
test)
    install_missing
    build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKV_WERROR=ON -DKV_REDIS=ON -DKV_PYTHON=ON
    say "running the tests"
    (cd "$BUILD_DIR" && ctest --output-on-failure -j "$JOBS")
    say "all tests passed"
    ;;
*)
    echo "usage: tools/run.sh bench [kvbench options] | tools/run.sh test" >&2
    exit 2
    ;;
esac
