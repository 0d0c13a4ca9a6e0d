#!/usr/bin/env bash
# tools/format.sh - formats C files with clang-format and the repository's
# .clang-format (the house style as the code has it; tuned for clang-format 14).
#
#   tools/format.sh --check [FILE...]   lists each file whose formatting differs,
#                                       with a short diff; exits 1 if any does
#   tools/format.sh [FILE...]           rewrites those files in place
#
# With FILE arguments it formats those files whole. Without, it takes the
# lines of C files (*.c, *.h) changed since BASE, the commit issue 48 started
# from (git diff -U0 BASE, the working tree included, renames followed), and
# formats only those, with clang-format-diff: so the check grows with each
# change, and a file that was moved or touched in one function is never
# reformatted whole. CLANG_FORMAT names the binary (default: clang-format-14
# when installed, else clang-format); clang-format-diff comes with it.
#
# Exit status: 0 all formatted (or rewritten); 1 a file differs (--check),
# or clang-format is missing, or it failed; 2 bad usage.
set -euo pipefail

BASE=9f780d8            # main when issue 48 began
DIFF_LINES=20           # lines of diff shown per file by --check

root=$(cd "$(dirname "$0")/.." && pwd)
style="$root/.clang-format"

check=0
files=()
for a in "$@"; do
    case $a in
    --check) check=1 ;;
    -h | --help)
        sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    -*)
        echo "format.sh: unknown option $a (--check, --help)" >&2
        exit 2
        ;;
    *) files+=("$a") ;;
    esac
done

cf=${CLANG_FORMAT:-}
if [ -z "$cf" ]; then
    if command -v clang-format-14 >/dev/null 2>&1; then
        cf=clang-format-14
    else
        cf=clang-format
    fi
fi
if ! command -v "$cf" >/dev/null 2>&1; then
    echo "format.sh: $cf not found: Debian's package clang-format installs it" \
        "(apt-get install clang-format)" >&2
    exit 1
fi
version=$("$cf" --version | sed -n 's/.*clang-format version \([0-9]*\).*/\1/p')
if [ "$version" != 14 ]; then
    echo "format.sh: note: $cf is version ${version:-unknown}; .clang-format is tuned for 14," \
        "whose output CI checks" >&2
fi

if [ ${#files[@]} -eq 0 ]; then
    if ! git -C "$root" rev-parse -q --verify "$BASE^{commit}" >/dev/null; then
        echo "format.sh: the base commit $BASE is not in this clone (a shallow one?):" \
            "fetch the history or name the files" >&2
        exit 1
    fi
    cfd=${cf/clang-format/clang-format-diff}
    if ! command -v "$cfd" >/dev/null 2>&1; then
        echo "format.sh: $cfd not found: Debian's package clang-format installs it" >&2
        exit 1
    fi
    changed=$(cd "$root" && git diff -U0 --no-color -M "$BASE" -- '*.c' '*.h')
    if [ -z "$changed" ]; then
        echo "format.sh: no C lines changed since $BASE"
        exit 0
    fi
    nfiles=$(printf '%s\n' "$changed" | grep -c '^+++ b/' || true)
    if [ "$check" = 1 ]; then
        out=$(cd "$root" && printf '%s\n' "$changed" |
            "$cfd" -p1 -binary "$(command -v "$cf")" -style="file:$style")
        if [ -n "$out" ]; then
            printf '%s\n' "$out" | head -n 200
            n=$(printf '%s\n' "$out" | grep -c '^+++ ' || true)
            echo "format.sh: the lines changed since $BASE in $n file(s) are not formatted;" \
                "tools/format.sh (no arguments) rewrites them" >&2
            exit 1
        fi
        echo "format.sh: the lines changed since $BASE in $nfiles file(s) are formatted as" \
            ".clang-format says"
    else
        (cd "$root" && printf '%s\n' "$changed" |
            "$cfd" -p1 -i -binary "$(command -v "$cf")" -style="file:$style")
        echo "format.sh: formatted the lines changed since $BASE in $nfiles file(s)"
    fi
    exit 0
fi

differ=0
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
for f in "${files[@]}"; do
    if [ ! -f "$f" ]; then
        echo "format.sh: $f: no such file" >&2
        exit 1
    fi
    "$cf" --style="file:$style" "$f" >"$tmp"
    if cmp -s "$f" "$tmp"; then
        continue
    fi
    if [ "$check" = 1 ]; then
        differ=$((differ + 1))
        n=$(diff "$f" "$tmp" | grep -c '^>' || true)
        echo "${f#"$root"/}: not formatted ($n line(s) would change):"
        { diff -u "$f" "$tmp" || true; } | tail -n +3 | head -n "$DIFF_LINES" | sed 's/^/    /' ||
            true
    else
        cat "$tmp" >"$f"
        echo "formatted ${f#"$root"/}"
    fi
done
if [ "$differ" -gt 0 ]; then
    echo "format.sh: $differ file(s) not formatted; tools/format.sh [FILE...] rewrites them" >&2
    exit 1
fi
[ "$check" = 1 ] && echo "format.sh: ${#files[@]} file(s) formatted as .clang-format says"
exit 0
