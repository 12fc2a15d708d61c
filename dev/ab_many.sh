#!/usr/bin/env bash
# One `agrl bench` row across several source trees (exported commits): builds
# each tree's CLI, then runs the row ROUNDS times, the trees in turn each
# round, and prints each tree's runs and the smallest median; for bisecting
# a row that moved between two commits (dev/ab_bench.sh compares two trees
# over every row).
# usage: dev/ab_many.sh ROW DEVICE ROUNDS SRC... (env AB_PREFIX: a command put
#   before each run, e.g. "taskset -c 0-3"; AB_ENV: VAR=VALUE for the runs)
set -u
row=$1 dev=$2 rounds=$3
shift 3
export PATH=/usr/local/cuda/bin:$PATH
here=$(cd "$(dirname "$0")/.." && pwd)
bins=()
for src in "$@"; do
  b=/tmp/ab-many-$(basename "$src")
  cmake -S "$src" -B "$b" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DAGRL_TESTS=OFF \
    -DAGRL_DEPS_PREFIX="$here/.deps" > "$b.log" 2>&1 && cmake --build "$b" -j"$(nproc)" --target agrl_cli >> "$b.log" 2>&1 ||
    { echo "build of $src failed:"; tail -5 "$b.log"; continue; }
  bins+=("$b/agrl")
done
for r in $(seq "$rounds"); do
  for bin in "${bins[@]}"; do
    us=$(env ${AB_ENV:-} ${AB_PREFIX:-} "$bin" bench --device "$dev" --filter "$row" 2>/dev/null |
      awk -v w="$row" '$1 == w {print $2}')
    echo "$(basename "$(dirname "$bin")") $us"
  done
done | sort -k1,1 -s | awk '{v[$1] = v[$1] " " $2; if (!($1 in m) || $2 < m[$1]) m[$1] = $2}
  END {for (k in v) printf "%-40s best %8.2f  runs:%s\n", k, m[k], v[k]}'
