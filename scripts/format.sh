#!/usr/bin/env bash
# Formats the C, CUDA C and header files git tracks with the committed
# .clang-format (generated data under tests/data left alone).
# usage: scripts/format.sh          rewrite the files in place
#        scripts/format.sh --check  list the files that differ and fail if any does
set -euo pipefail
cd "$(dirname "$0")/.."
cf=$(command -v clang-format-14 || command -v clang-format || true)
[ -n "$cf" ] || { echo "format: clang-format not found (apt-get install clang-format)" >&2; exit 1; }
mapfile -t files < <(git ls-files '*.c' '*.h' '*.cu' | grep -v '^tests/data/')
if [ "${1:-}" = --check ]; then
  bad=0
  for f in "${files[@]}"; do
    if ! "$cf" --dry-run --Werror "$f" >/dev/null 2>&1; then
      echo "not formatted: $f (scripts/format.sh rewrites it)"
      bad=1
    fi
  done
  [ "$bad" = 0 ] && echo "format: ${#files[@]} files match .clang-format"
  exit "$bad"
fi
"$cf" -i "${files[@]}"
