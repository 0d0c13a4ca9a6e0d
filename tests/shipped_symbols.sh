#!/usr/bin/env bash
# shipped_symbols.sh - the shipped libraries carry no test machinery: no
# library given here may define a fault-injection or power-cut function
# (those live in tests/testing/, the kv_testing library). Every defined
# symbol counts, exported or hidden, global or local.
# Usage: tests/shipped_symbols.sh LIB...   (libkv.a, libkv.so)
set -euo pipefail
NM=${NM:-nm}
forbidden=(kv_file_inject kv_file_inject_kind kv_file_power_cut kv_file_track_begin
    kv_manifest_inject)

passed=0
failed=0
for lib in "$@"; do
    if ! syms=$("$NM" --defined-only "$lib" 2>/dev/null | awk 'NF >= 2 { print $NF }'); then
        echo "$lib: nm failed"
        failed=$((failed + 1))
        continue
    fi
    if [ -z "$syms" ]; then
        echo "$lib: no symbols at all (stripped?)"
        failed=$((failed + 1))
        continue
    fi
    bad=0
    for s in "${forbidden[@]}"; do
        if grep -qx -- "$s" <<<"$syms"; then
            echo "$lib: defines $s (test-only code in a shipped library)"
            bad=1
        fi
    done
    if [ "$bad" = 0 ]; then
        echo "$lib: none of ${forbidden[*]}"
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
    fi
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ] && [ "$passed" -gt 0 ]
