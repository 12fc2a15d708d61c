#!/usr/bin/env bash
# Scaling of the data-parallel DQN update (sample + gather + update with the
# gradients all-reduced through NCCL, one recorded step) over 1 .. G GPUs:
#   weak:   the batch per GPU fixed (the global batch grows with G);
#   strong: the global batch fixed (split over the GPUs).
# usage: scripts/bench_dist.sh [AGRL] [G]
set -u
AGRL=${1:-build/agrl}
G=${2:-2}
export NCCL_NVLS_ENABLE=0
us() { grep -o '[0-9.]* us/update' | grep -o '^[0-9.]*'; }
row() { # shape gpus batch/gpu us/update note
  awk -v s="$1" -v g="$2" -v b="$3" -v t="$4" -v n="$5" \
    'BEGIN { printf "%-14s %-5d %-10d %-8d %-11.2f %-14.3g %s\n", s, g, b, g * b, t, 1e6 / t * g * b, n }'
}
printf "%-14s %-5s %-10s %-8s %-11s %-14s %s\n" shape gpus batch/gpu global us/update transitions/s scaling
for shape in cartpole mujoco; do
  if [ $shape = cartpole ]; then B=128; name=4-128-128-2; else B=256; name=17-256-256-6; fi
  t1=$("$AGRL" bench-dist --gpus 1 --shape $shape --batch $B | us)
  [ -n "$t1" ] || { echo "$name: the one-GPU run failed"; continue; }
  row $name 1 $B "$t1" "-"
  g=2
  while [ $g -le "$G" ]; do
    tw=$("$AGRL" bench-dist --gpus $g --shape $shape --batch $B | us)
    if [ -n "$tw" ]; then
      row $name $g $B "$tw" "$(awk -v a="$t1" -v b="$tw" -v g=$g 'BEGIN { printf "weak: %.2fx the transitions/s of one GPU (%.0f%% of linear)", g * a / b, 100 * a / b }')"
    else echo "$name gpus $g: failed"; fi
    if [ $((B % g)) -eq 0 ]; then
      ts=$("$AGRL" bench-dist --gpus $g --shape $shape --batch $((B / g)) | us)
      if [ -n "$ts" ]; then
        row $name $g $((B / g)) "$ts" "$(awk -v a="$t1" -v b="$ts" 'BEGIN { printf "strong: the same global batch %.2fx as fast as one GPU", a / b }')"
      else echo "$name gpus $g (strong): failed"; fi
    fi
    g=$((g * 2))
  done
done
