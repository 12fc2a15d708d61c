#!/usr/bin/env bash
# The shared library exports exactly the functions the public headers mark
# AG_API: no internal (ag__) name, nothing without the ag_ prefix, and no
# declared function missing.
# usage: scripts/check_exports.sh BUILD_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
lib=${1:?usage: check_exports.sh BUILD_DIR}/libagrl.so
exported=$(nm -D --defined-only "$lib" | awk '{print $3}' | sed 's/@.*//' | sort -u)
declared=$(grep -hoE 'AG_API [^;]*\bag_[a-z0-9_]+\(' include/agrl/*.h | grep -oE 'ag_[a-z0-9_]+\($' | tr -d '(' | sort -u)
bad=0
internal=$(grep -E '^ag__' <<<"$exported" || true)
foreign=$(grep -vE '^ag_' <<<"$exported" || true)
missing=$(comm -23 <(echo "$declared") <(echo "$exported"))
extra=$(comm -13 <(echo "$declared") <(echo "$exported") | grep -vE '^ag__' || true)
for what in internal foreign missing extra; do
  v=${!what}
  if [ -n "$v" ]; then
    echo "exports: $what: $(tr '\n' ' ' <<<"$v")"
    bad=1
  fi
done
[ "$bad" = 0 ] && echo "exports: $(wc -l <<<"$exported") symbols, each a public ag_ function of the headers; 0 ag__"
exit "$bad"
