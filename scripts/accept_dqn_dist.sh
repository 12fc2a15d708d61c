#!/usr/bin/env bash
# Data-parallel DQN against one GPU: `agrl train --gpus G` (one process per
# GPU, batch and replay table split over them, gradients all-reduced through
# NCCL) and `agrl train --gpus 1` on CartPole-v1, the same configuration,
# 100,000 environment steps (of the whole group), seeds 0-9 (SEEDS=...).
# Prints the step at which each run solved it (mean return of the last 20
# episodes >= 475; in a group, of the last 20 / G of each rank's). Passes
# when the G-GPU runs solve as many seeds as the one-GPU runs, give or take
# one (one seed in ten is within the seed-to-seed noise of either).
# usage: [SEEDS="0 1 ..."] scripts/accept_dqn_dist.sh [AGRL] [G] [OUTDIR]
set -u
AGRL=${1:-build/agrl}
G=${2:-2}
OUT=${3:-$(mktemp -d)}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
declare -A solved=([1]=0 [$G]=0)
printf "%-5s %-6s %-8s %-10s %-8s %-10s\n" gpus seed solved at_step wall_s steps/s
SEEDS=${SEEDS:-0 1 2 3 4 5 6 7 8 9}
n=$(wc -w <<<"$SEEDS")
for seed in $SEEDS; do
  for g in 1 "$G"; do
    d="$OUT/g$g-seed$seed"
    timeout 300 "$AGRL" train --algo dqn --env cartpole --device cuda --gpus "$g" --steps 100000 --seed $seed --quiet \
      --out "$d" >"$d.log" 2>&1 || { echo "gpus $g seed $seed: training failed"; tail -5 "$d.log"; }
    s="$d/summary.json"
    at=$(grep -o '"solved_at_step": -\?[0-9]*' "$s" 2>/dev/null | grep -o -- '-\?[0-9]*$')
    wall=$(grep -o '"wall_s": [0-9.]*' "$s" 2>/dev/null | grep -o '[0-9.]*$')
    sps=$(grep -o '"steps_per_s": [0-9.]*' "$s" 2>/dev/null | grep -o '[0-9.]*$')
    if [ "${at:--1}" -ge 0 ]; then solved[$g]=$((solved[$g] + 1)); ok=yes; else ok=no; fi
    printf "%-5s %-6s %-8s %-10s %-8s %-10s\n" "$g" $seed $ok "${at:--}" "${wall:--}" "${sps:--}"
    rm -f "$d/q_network.agrl"
  done
done
echo "one GPU: ${solved[1]} of $n seeds solved; $G GPUs (data-parallel): ${solved[$G]} of $n"
[ "${solved[$G]}" -ge $((solved[1] - 1)) ]
