#!/usr/bin/env bash
# A/B of the CUDA training rate: builds the tree in OLD_SRC (an exported
# older commit) beside the current build, then runs the 20k-step CartPole
# training with each binary in turn, REPS times, and prints steps/s.
# usage: dev/ab_train.sh OLD_SRC CURRENT_BUILD [REPS]
set -u
old=$1 cur=$2 reps=${3:-3}
export PATH=/usr/local/cuda/bin:$PATH
cmake -S "$old" -B /tmp/ab-old -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DAGRL_TESTS=OFF \
  -DAGRL_DEPS_PREFIX="$(pwd)/.deps" > /tmp/ab-old.log 2>&1 && cmake --build /tmp/ab-old -j"$(nproc)" --target agrl_cli >> /tmp/ab-old.log 2>&1 ||
  { tail -20 /tmp/ab-old.log; exit 1; }
for r in $(seq "$reps"); do
  for which in old new; do
    bin=/tmp/ab-old/agrl; [ $which = new ] && bin=$cur/agrl
    "$bin" train --device cuda --steps 20000 --stop-at none --quiet --out /tmp/ab-$which > /tmp/ab-$which.txt 2>&1
    echo "$which run $r: $(grep -o '"steps_per_s": [0-9.]*' /tmp/ab-$which/summary.json)"
  done
done
