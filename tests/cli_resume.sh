#!/usr/bin/env bash
# A training run checkpointed and resumed writes the logs an uninterrupted
# run writes, byte for byte:
#   1. resumed from an older checkpoint of a finished run (a crash's case);
#   2. stopped by SIGTERM part-way (a checkpoint is written, exit 143), then
#      `agrl train --resume DIR`;
#   3. --keep keeps the newest checkpoints only; a checkpoint directory is
#      always complete; bad --resume arguments are refused;
#   4. --eval-every's evaluations (eval.csv) resume alike too, and with
#      --stop-on eval the last one equals `agrl eval` of the saved network on
#      the evaluation's seed;
#   5. cases 1 and 2 for --algo sac and --algo td3 on Pendulum (the same
#      policy.agrl too), and a damaged agent file refused naming ag_ac_load;
#   6. a checkpoint holds the command's state as one cli.agrl; a checkpoint
#      of agrl 0.1.0 (args, cli.state and the logs as files, made from it by
#      cli_ckpt_tool.py) resumes to the same logs; a damaged cli.agrl (cut,
#      a byte flipped, a key missing) is refused with a message, exit 1,
#      and the run's files stay as they were.
#   7. case 2 for a DQN with a convolution on breakout-minatar.
# usage: cli_resume.sh AGRL [cpu|cuda|vulkan]
set -uo pipefail
agrl=$1
dev=${2:-cpu}
if [ "$dev" != cpu ] && ! "$agrl" demo --device "$dev" >/dev/null 2>&1; then
  req=AGRL_REQUIRE_GPU
  [ "$dev" = vulkan ] && req=AGRL_REQUIRE_VULKAN
  if [ "${!req:-0}" = 1 ]; then
    echo "cli_resume.$dev: FAILED: $req=1 but no $dev device is usable"
    exit 1
  fi
  echo "cli_resume.$dev: skipped (no $dev device)"
  exit 77
fi
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # what, command...
  local what=$1
  shift
  if "$@"; then echo "ok: $what"; else
    echo "FAIL: $what"
    fail=1
  fi
}
same_logs() { # dirA dirB [rows of losses.csv more than: 20]
  cmp -s "$1/episodes.csv" "$2/episodes.csv" && cmp -s "$1/losses.csv" "$2/losses.csv" &&
    cmp -s "$1/eval.csv" "$2/eval.csv" && [ "$(wc -l <"$1/eval.csv")" -gt 3 ] &&
    [ "$(wc -l <"$1/episodes.csv")" -gt 50 ] && [ "$(wc -l <"$1/losses.csv")" -gt "${3:-20}" ]
}
# interrupted by SIGTERM once a first checkpoint exists, then resumed:
# interrupt_resume WHAT REF OUT MIN_LOSS_ROWS RUN... (the run without --out)
interrupt_resume() {
  local what=$1 ref=$2 out=$3 rows=$4
  shift 4
  "$@" --out "$out" >"$out.log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 1200); do
    ls "$out/checkpoints" 2>/dev/null | grep -q '^ckpt-' && break
    sleep 0.025
  done
  kill -TERM "$pid"
  wait "$pid"
  local rc=$?
  check "$what: SIGTERM: exit status 143 (got $rc)" [ "$rc" = 143 ]
  local at
  at=$(sed -n 's/.*interrupted by signal 15 at step \([0-9]*\).*/\1/p' "$out.log")
  check "$what: SIGTERM: the step is reported ($at)" [ -n "$at" ]
  check "$what: SIGTERM: a checkpoint at that step" [ -d "$out/checkpoints/ckpt-$(printf %012d "${at:-0}")" ]
  "$agrl" train --resume "$out" --quiet >"$out.log2" 2>&1
  check "$what: resume of the interrupted run exits 0" [ $? = 0 ]
  grep -q "resumed from $out/checkpoints/ckpt-" "$out.log2"
  check "$what: it resumed from the newest checkpoint" [ $? = 0 ]
  check "$what: interrupted at step $at and resumed: the same logs" same_logs "$ref" "$out" "$rows"
}

run=("$agrl" train --env cartpole --steps 20000 --seed 7 --n-envs 3 --quiet --learning-starts 500
  --train-freq 64 --gradient-steps 32 --batch 64 --hidden 128,128 --buffer 8000 --stop-at none
  --eval-every 4000 --eval-episodes 3 --device "$dev")

# the reference: one uninterrupted run
"${run[@]}" --out "$tmp/a" >"$tmp/a.log" 2>&1 || { cat "$tmp/a.log"; exit 1; }

# 1. a finished run with checkpoints, resumed from its second newest one
"${run[@]}" --out "$tmp/b" --checkpoint-every 3000 --keep 2 >"$tmp/b.log" 2>&1
check "a run with --checkpoint-every exits 0" [ $? = 0 ]
check "--checkpoint-every changes nothing the run logs" same_logs "$tmp/a" "$tmp/b"
n=$(ls "$tmp/b/checkpoints" | grep -c '^ckpt-')
check "--keep 2 keeps 2 checkpoints (found $n)" [ "$n" = 2 ]
check "no temporary checkpoint is left" [ -z "$(ls -A "$tmp/b/checkpoints" | grep -v '^ckpt-')" ]
older=$(ls "$tmp/b/checkpoints" | sort | head -1)
for f in agent.agrl cli.agrl; do
  check "$older holds $f" [ -s "$tmp/b/checkpoints/$older/$f" ]
done
check "$older holds nothing else" [ "$(ls "$tmp/b/checkpoints/$older" | wc -l)" = 2 ]
rm -f "$tmp/b/episodes.csv" "$tmp/b/losses.csv"
"$agrl" train --resume "$tmp/b/checkpoints/$older" --quiet >"$tmp/b2.log" 2>&1
check "resume from $older exits 0" [ $? = 0 ]
check "resumed from $older: the same episodes.csv and losses.csv" same_logs "$tmp/a" "$tmp/b"

# 2. interrupted by SIGTERM once a first checkpoint exists, then resumed
interrupt_resume dqn "$tmp/a" "$tmp/c" 20 "${run[@]}" --checkpoint-every 6000

# 4. the last evaluation of a run stopped by it is agrl eval's mean of the same episodes
"$agrl" train --env cartpole --steps 30000 --seed 2 --quiet --learning-starts 500 --train-freq 64 \
  --gradient-steps 32 --batch 64 --hidden 64,64 --eval-every 3000 --eval-episodes 4 --stop-on eval \
  --stop-at 60 --device "$dev" --out "$tmp/e" >"$tmp/e.log" 2>&1
check "--stop-on eval exits 0" [ $? = 0 ]
eseed=$(sed -n 's/.*"eval_seed": \([0-9]*\).*/\1/p' "$tmp/e/summary.json")
last=$(tail -1 "$tmp/e/eval.csv" | cut -d, -f3)
want=$("$agrl" eval --model "$tmp/e/q_network.agrl" --env cartpole --episodes 4 --seed "$eseed" --device "$dev" |
  sed -n 's/^mean return over 4 greedy episodes: //p')
check "the last evaluation ($last) is agrl eval's mean ($want)" python3 -c \
  "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(a - b) > 1e-4 * max(1, abs(b)))" \
  "${last:-nan}" "${want:-0}"
check "it stopped at the evaluation that reached 60" grep -q '"eval_solved_at_step": [1-9]' "$tmp/e/summary.json"
"$agrl" train --stop-on eval >/dev/null 2>"$tmp/e4"
check "--stop-on eval without --eval-every: exit 2" [ $? = 2 ]

# 3. refusals
"$agrl" train --resume "$tmp/c" --steps 5 >/dev/null 2>"$tmp/e1"
check "--resume with another setting: exit 2" [ $? = 2 ]
check "  ... naming it" grep -q -- "not --steps" "$tmp/e1"
"$agrl" train --resume "$tmp/nothing" >/dev/null 2>"$tmp/e2"
check "--resume of a missing directory: exit 1" [ $? = 1 ]
mkdir -p "$tmp/d/checkpoints/ckpt-000000000001"
printf 'AGRLDQN1 damaged' >"$tmp/d/checkpoints/ckpt-000000000001/agent.agrl"
cp "$tmp/c/checkpoints/$(ls "$tmp/c/checkpoints" | head -1)/cli.agrl" "$tmp/d/checkpoints/ckpt-000000000001/"
"$agrl" train --resume "$tmp/d" --quiet >/dev/null 2>"$tmp/e3"
check "--resume of a damaged agent file: exit 1" [ $? = 1 ]
check "  ... saying why" grep -q "ag_dqn_load" "$tmp/e3"
"$agrl" train --checkpoint-every -1 >/dev/null 2>&1
check "--checkpoint-every -1: exit 2" [ $? = 2 ]
"$agrl" train --keep 0 >/dev/null 2>&1
check "--keep 0: exit 2" [ $? = 2 ]

# 6. a checkpoint of agrl 0.1.0 (its state in args, cli.state and the logs) resumes alike
old=$tmp/o/checkpoints/$older
mkdir -p "$tmp/o/checkpoints"
cp -R "$tmp/b/checkpoints/$older" "$old"
python3 "$here/cli_ckpt_tool.py" to-legacy "$old"
check "the 0.1.0 checkpoint holds args and cli.state, no cli.agrl" \
  [ -s "$old/args" -a -s "$old/cli.state" -a -s "$old/episodes.csv" -a ! -e "$old/cli.agrl" ]
rm -f "$tmp/b/episodes.csv" "$tmp/b/losses.csv" "$tmp/b/eval.csv"
"$agrl" train --resume "$old" --quiet >"$tmp/o.log" 2>&1
check "resume from a checkpoint of agrl 0.1.0 exits 0" [ $? = 0 ]
check "  ... and writes the same logs" same_logs "$tmp/a" "$tmp/b"
# a damaged cli.agrl: refused, and the run's files (in --out, $tmp/b) are left as they were
sum_b=$(cat "$tmp/b/"*.csv "$tmp/b/summary.json" | cksum)
for how in cut flip key; do
  bad=$tmp/bad-$how/checkpoints/$older
  mkdir -p "$(dirname "$bad")"
  cp -R "$tmp/b/checkpoints/$older" "$bad"
  python3 "$here/cli_ckpt_tool.py" damage "$tmp/b/checkpoints/$older/cli.agrl" "$how" "$bad/cli.agrl"
  "$agrl" train --resume "$tmp/bad-$how" --quiet >/dev/null 2>"$tmp/e5"
  check "--resume of a cli.agrl $how: exit 1" [ $? = 1 ]
  check "  ... saying why ($(head -c 160 "$tmp/e5"))" grep -q "^agrl train: --resume: .*cli.agrl is \(truncated\|corrupt\)" "$tmp/e5"
  check "  ... and the run's files are as they were" [ "$(cat "$tmp/b/"*.csv "$tmp/b/summary.json" | cksum)" = "$sum_b" ]
done
grep -q "key 'cli.rows' is missing" "$tmp/e5"
check "  ... a missing key is named" [ $? = 0 ]

# 5. SAC and TD3
for algo in sac td3; do
  run=("$agrl" train --algo "$algo" --env pendulum --steps 12000 --seed 5 --n-envs 2 --quiet
    --learning-starts 500 --hidden 64,64 --batch 64 --buffer 6000 --stop-at none --eval-every 3000
    --eval-episodes 2 --device "$dev")
  a=$tmp/$algo-a b=$tmp/$algo-b c=$tmp/$algo-c
  # the reference: one uninterrupted run
  "${run[@]}" --out "$a" >"$a.log" 2>&1 || { cat "$a.log"; exit 1; }

  # 1. a finished run with checkpoints, resumed from its second newest one
  "${run[@]}" --out "$b" --checkpoint-every 2500 --keep 2 >"$b.log" 2>&1
  check "$algo: a run with --checkpoint-every exits 0" [ $? = 0 ]
  check "$algo: --checkpoint-every changes nothing the run logs" same_logs "$a" "$b" 10
  n=$(ls "$b/checkpoints" | grep -c '^ckpt-')
  check "$algo: --keep 2 keeps 2 checkpoints (found $n)" [ "$n" = 2 ]
  check "$algo: no temporary checkpoint is left" [ -z "$(ls -A "$b/checkpoints" | grep -v '^ckpt-')" ]
  older=$(ls "$b/checkpoints" | sort | head -1)
  for f in agent.agrl cli.agrl; do
    check "$algo: $older holds $f" [ -s "$b/checkpoints/$older/$f" ]
  done
  rm -f "$b/episodes.csv" "$b/losses.csv" "$b/eval.csv" "$b/policy.agrl"
  "$agrl" train --resume "$b/checkpoints/$older" --quiet >"$b.log2" 2>&1
  check "$algo: resume from $older exits 0" [ $? = 0 ]
  check "$algo: resumed from $older: the same episodes.csv, losses.csv and eval.csv" same_logs "$a" "$b" 10
  check "$algo: ... and the same policy.agrl" cmp -s "$a/policy.agrl" "$b/policy.agrl"

  # 2. interrupted by SIGTERM once a first checkpoint exists, then resumed
  interrupt_resume "$algo" "$a" "$c" 10 "${run[@]}" --checkpoint-every 4000
  check "$algo: ... and the same policy.agrl" cmp -s "$a/policy.agrl" "$c/policy.agrl"

  # 3. a damaged agent file
  d=$tmp/$algo-d/checkpoints/ckpt-000000000001
  mkdir -p "$d"
  printf 'AGRLACR1 damaged' >"$d/agent.agrl"
  cp "$b/checkpoints/$older/cli.agrl" "$d/"
  "$agrl" train --resume "$tmp/$algo-d" --quiet >/dev/null 2>"$tmp/e3"
  check "$algo: --resume of a damaged agent file: exit 1" [ $? = 1 ]
  check "$algo:   ... saying why" grep -q "ag_ac_load" "$tmp/e3"
done
# 7. a DQN with a convolution on a MinAtar game (its defaults: one 16x3
#    convolution, one update a step): interrupted and resumed alike
mrun=("$agrl" train --env breakout-minatar --steps 4000 --seed 3 --quiet --learning-starts 500 --stop-at none
  --eval-every 1000 --eval-episodes 2 --device "$dev")
"${mrun[@]}" --out "$tmp/m" >"$tmp/m.log" 2>&1
check "minatar: the reference run exits 0" [ $? = 0 ]
check "minatar: the run's network has a convolution" grep -q "mlp.conv" <("$agrl" inspect "$tmp/m/q_network.agrl")
interrupt_resume minatar "$tmp/m" "$tmp/m2" 20 "${mrun[@]}" --checkpoint-every 1500

exit $fail
