#!/usr/bin/env bash
# Wall time of `agrl train` on CartPole-v1 (stops when the mean of the last
# 20 episodes reaches 475), one run at a time, for flag sets given as
# arguments ('' = the defaults): seeds FIRST..LAST from $SEEDS (default 0-4).
# usage: dev/cartpole_time.sh AGRL DEVICE OUTDIR 'FLAGS1' 'FLAGS2' ...
set -u
agrl=$1 device=$2 out=$3
shift 3
IFS=- read -r first last <<<"${SEEDS:-0-4}"
mkdir -p "$out"
k=0
for flags in "$@"; do
  for s in $(seq "$first" "$last"); do
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086 # the set's flags are words
    "$agrl" train --env cartpole --device "$device" --steps 50000 --seed "$s" --quiet $flags \
      --out "$out/c$k-s$s" >"$out/c$k-s$s.log" 2>&1
    t1=$(date +%s.%N)
    python3 - "$out/c$k-s$s/summary.json" "$k" "$s" "$t0" "$t1" "$flags" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("c%s [%s] seed %s: solved at %d, wall_s %.3f (process %.3f s), %.0f steps/s" % (
    sys.argv[2], sys.argv[6] or "defaults", sys.argv[3], d["solved_at_step"], d["wall_s"],
    float(sys.argv[5]) - float(sys.argv[4]), d["steps_per_s"]))
PY
  done
  k=$((k + 1))
done | tee "$out/times.txt"
