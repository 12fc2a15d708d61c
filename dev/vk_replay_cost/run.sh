#!/usr/bin/env bash
# Builds vk_replay_cost.c against two builds of libagrl.a (an older one and
# the current one) and runs them in turn, ROUNDS times each, for each step
# size K; prints each run's line, then the ratio old / new of the medians.
# usage: dev/vk_replay_cost/run.sh OLD_LIBAGRL_A NEW_LIBAGRL_A [ROUNDS] [K...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
old=$1 new=$2 rounds=${3:-3}
shift 3 || shift $#
ks=${*:-"16 64 256"}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for v in old new; do
  lib=$old
  [ $v = new ] && lib=$new
  cc -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -I"$here/../../include" "$here/vk_replay_cost.c" "$lib" \
    -ldl -lm -lz -lvulkan -lpthread -o "$tmp/$v"
done
for k in $ks; do
  for v in old new; do : >"$tmp/$v.$k"; done
  for ((r = 0; r < rounds; r++)); do
    for v in old new; do
      line=$("$tmp/$v" "$k" 200)
      echo "$v: $line"
      echo "$line" >>"$tmp/$v.$k"
    done
  done
  python3 - "$tmp/old.$k" "$tmp/new.$k" "$k" <<'PY'
import re, statistics, sys
def med(path, i):
    return statistics.median(float(re.findall(r"([0-9.]+) us", l)[i]) for l in open(path))
k = sys.argv[3]
for i, what in enumerate(("replay call", "replay + sync")):
    o, n = med(sys.argv[1], i), med(sys.argv[2], i)
    print(f"K={k} {what}: old {o:.2f} us, new {n:.2f} us, old/new {o / n:.2f}x")
PY
done
