#!/usr/bin/env bash
# Steps per second of examples/python/train_mujoco.py on one machine: one
# run alone, then N runs side by side sharing the device (each its own
# process and seed), for SAC and TD3 on HalfCheetah-v5. Evaluations and
# checkpoints are left out of the timed part (--eval-every and
# --checkpoint-every past the end; the final evaluation is 1 episode).
# usage: dev/mujoco_speed.sh OUTDIR [STEPS] [DEVICE] [N ...]   (defaults: 30000 cuda 4 8;
#   ALGOS="sac td3" by default)
set -u
out=${1:?usage: dev/mujoco_speed.sh OUTDIR [STEPS] [DEVICE] [N ...]}
steps=${2:-30000} dev=${3:-cuda}
shift $(( $# < 3 ? $# : 3 ))
shares=${*:-4 8}
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
run() { # algo seed dir
  python3 "$here/examples/python/train_mujoco.py" --algo "$1" --seed "$2" --steps "$steps" --device "$dev" \
    --eval-every $((steps * 10)) --checkpoint-every $((steps * 10)) --eval-episodes 1 --out "$3" > "$3.log" 2>&1
}
for algo in ${ALGOS:-sac td3}; do
  run $algo 101 "$out/${algo}_alone"
  echo "$algo alone: $(tail -1 "$out/${algo}_alone.log")"
  for n in $shares; do
    for i in $(seq "$n"); do run $algo $((200 + i)) "$out/${algo}_${n}_$i" & done
    wait
    python3 - "$out" "$algo" "$n" <<'PY'
import json, sys
out, algo, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
rates = []
for i in range(1, n + 1):
    s = json.load(open(f"{out}/{algo}_{n}_{i}/summary.json"))
    rates.append(s["steps"] / max(s["wall_s"], 0.1))
print(f"{algo} {n} sharing: {min(rates):.0f}-{max(rates):.0f} steps/s a run, {sum(rates):.0f} in all")
PY
  done
done
