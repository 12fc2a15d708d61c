#!/usr/bin/env bash
# Tuning sweep: scripts/accept.sh for one row under several sets of extra
# train flags at once, each set on its own share of the jobs, then the
# solved counts side by side. Tune on seeds that acceptance does not use
# (acceptance: 100-119).
# usage: dev/sweep.sh AGRL DEVICE ROW SEEDS JOBS OUT 'FLAGS1' 'FLAGS2' ...
#   e.g. dev/sweep.sh build/agrl cuda dqn-cartpole 0-9 12 /tmp/sw '' '--n-step 3' '--lr 1e-3'
set -u
agrl=$1 device=$2 row=$3 seeds=$4 jobs=$5 out=$6
shift 6
here=$(cd "$(dirname "$0")/.." && pwd)
n=$#
per=$(((jobs + n - 1) / n))
k=0
for flags in "$@"; do
  # shellcheck disable=SC2086 # the set's flags are words
  "$here/scripts/accept.sh" "$agrl" "$device" "$row" --seeds "$seeds" --jobs "$per" --out "$out/c$k" -- $flags \
    >"$out.c$k.log" 2>&1 &
  k=$((k + 1))
done
mkdir -p "$out"
wait
k=0
for flags in "$@"; do
  line=$(grep -E "seeds solved within" "$out/c$k/$row/summary.txt" 2>/dev/null | head -1)
  wall=$(grep -E "wall time per seed" "$out/c$k/$row/summary.txt" 2>/dev/null | head -1)
  printf 'c%d [%s]: %s | %s\n' "$k" "${flags:-defaults}" "${line:-no summary}" "$wall"
  k=$((k + 1))
done | tee "$out/sweep.txt"
