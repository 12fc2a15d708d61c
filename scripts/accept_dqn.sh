#!/usr/bin/env bash
# Acceptance of the main job: `agrl train --algo dqn --env cartpole` with its
# defaults reaches a mean return >= 475 over the last 20 episodes within
# 100,000 environment steps for at least 4 of 5 seeds. Prints the step at
# which each seed solved it and the wall time.
# usage: scripts/accept_dqn.sh [AGRL] [DEVICE] [OUTDIR]
set -u
AGRL=${1:-build/agrl}
DEV=${2:-cpu}
OUT=${3:-$(mktemp -d)}
mkdir -p "$OUT"
solved=0
printf "%-6s %-10s %-12s %-10s %-10s\n" seed solved at_step wall_s steps/s
for seed in 0 1 2 3 4; do
  "$AGRL" train --algo dqn --env cartpole --device "$DEV" --steps 100000 --seed $seed --quiet \
    --out "$OUT/seed$seed" >"$OUT/seed$seed.log" 2>&1 || { echo "seed $seed: training failed"; cat "$OUT/seed$seed.log"; }
  s="$OUT/seed$seed/summary.json"
  at=$(grep -o '"solved_at_step": -\?[0-9]*' "$s" | grep -o -- '-\?[0-9]*$')
  wall=$(grep -o '"wall_s": [0-9.]*' "$s" | grep -o '[0-9.]*$')
  sps=$(grep -o '"steps_per_s": [0-9.]*' "$s" | grep -o '[0-9.]*$')
  if [ "${at:--1}" -ge 0 ]; then solved=$((solved + 1)); ok=yes; else ok=no; fi
  printf "%-6s %-10s %-12s %-10s %-10s\n" $seed $ok "${at:--}" "$wall" "$sps"
done
echo "$solved of 5 seeds solved CartPole-v1 (mean20 >= 475) within 100000 steps on $DEV"
[ $solved -ge 4 ]
