#!/usr/bin/env bash
# layers.sh - the include rule of the library's four modules, checked on the
# source text: util <- filter <- sstable <- kv, arrows pointing down only.
#
# The build already refuses most wrong includes (a module's include path
# holds only its own exports and those of the modules below it). What a
# path cannot stop is a quoted include that walks out of its folder
# ("../kv/db.h"): this script refuses those, and any <kv/x.h>, "util/x.h" or
# "sstable/x.h" that names a module above the includer, or an internal
# header its module does not export. Usage: tests/layers.sh [SRCDIR]
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"

# The modules from the bottom up, and the public headers each one installs.
modules=(util filter sstable kv)
declare -A public=([status.h]=util [common.h]=util [bloom.h]=filter [counting_bloom.h]=filter
    [scalable_bloom.h]=filter [rotating_bloom.h]=filter [range_filter.h]=filter [sstable.h]=sstable
    [kv.h]=kv)
# The internal headers a module exports to the modules above it (as
# "module/x.h"; the top CMakeLists, kv_module's EXPORTS): all of util/'s,
# and these of sstable/.
declare -A exported=([sstable/internal.h]=sstable [sstable/order.h]=sstable)
rank() { local i; for i in "${!modules[@]}"; do if [ "${modules[$i]}" = "$1" ]; then echo "$i"; fi; done; }

bad=0
checked=0
for m in "${modules[@]}"; do
    mine=$(rank "$m")
    for f in "$m"/*.[ch]; do
        checked=$((checked + 1))
        while IFS= read -r line; do
            inc=$(sed -E 's/^#[[:space:]]*include[[:space:]]*[<"]([^">]*)[">].*/\1/' <<<"$line")
            owner=""
            case "$line" in
            *'"../'* | *'"/'*)
                echo "$f: leaves its folder: $line"; bad=1; continue ;;
            *'<kv/'*)
                owner=${public[${inc#kv/}]:-}
                if [ -z "$owner" ]; then echo "$f: no such public header: $line"; bad=1; continue; fi ;;
            *'"util/'*)
                owner=util ;;
            *'"sstable/'*)
                owner=${exported[$inc]:-}
                if [ -z "$owner" ]; then echo "$f: not exported by sstable/: $line"; bad=1; continue; fi ;;
            *'"'*)
                [ -e "$m/$inc" ] || { echo "$f: not a header of $m/: $line"; bad=1; }
                continue ;;
            *) continue ;;
            esac
            if [ "$(rank "$owner")" -gt "$mine" ]; then
                echo "$f: $m/ includes $owner/ above it: $line"; bad=1
            fi
        done < <(grep -E '^#[[:space:]]*include' "$f")
    done
done
if [ "$bad" = 0 ]; then
    echo "layers: $checked files of util/ filter/ sstable/ kv/ include only downwards"
    echo "1 passed, 0 failed"
else
    echo "0 passed, 1 failed"
fi
exit "$bad"
