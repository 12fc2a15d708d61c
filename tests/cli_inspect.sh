#!/usr/bin/env bash
# agrl inspect on one file of each kind: the files of agrl 0.1.0 in
# tests/data/legacy/, the files this library writes (make_legacy makes
# them) and a checkpoint's agent and cli state: the printed format and
# kind, and a key with its value where the keys are listed; a file that is
# not agrl's and a missing one fail with 1, no FILE with 2.
# usage: tests/cli_inspect.sh PATH_TO_AGRL PATH_TO_MAKE_LEGACY
set -u
agrl=$1
make_legacy=$2
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
pass=0

# expect FILE PATTERN...: agrl inspect FILE exits 0 and prints every PATTERN (grep -E) on a line
expect() {
  local file=$1 out
  shift
  if ! out=$("$agrl" inspect "$file" 2>&1); then
    echo "FAIL: agrl inspect $file exited with an error: $out"
    fails=$((fails + 1))
    return
  fi
  for p in "$@"; do
    if ! grep -Eq -- "$p" <<<"$out"; then
      echo "FAIL: agrl inspect $file: no line matches '$p'; it printed:"
      echo "$out"
      fails=$((fails + 1))
      return
    fi
  done
  pass=$((pass + 1))
}

L=$here/data/legacy
expect "$L/mlp_v2.agrl" '^format: AGRLMLP2' '^kind: mlp$' '^  mlp\.version +i64 +2$' '^  mlp\.sizes +i64\[3\] +3 5 2$' \
  '^  W0 +f32 +\[5, 3\] +60 '
expect "$L/mlp_v1.agrl" '^format: AGRLMLP1' '^kind: mlp$' '^  mlp\.version +i64 +1$'
expect "$L/replay_per.agrl" '^format: AGRLRPL1' '^kind: replay$' '^  replay\.capacity +i64 +24$' \
  '^  replay\.sampler +string +"per"$' '^  leaves +f64 +\[24\] +192 '
expect "$L/dqn.agrl" '^format: AGRLDQN1' '^kind: dqn$' '^  dqn\.version +i64 +1$' '^  dqn\.updates +i64 +5$' \
  '^  run_state +u8 +blob +7 ' '^then, from byte [0-9]+: its replay table$' '^format: AGRLRPL1'
expect "$L/td3.agrl" '^format: AGRLACR1' '^kind: ac$' '^  ac\.version +i64 +1$' '^  ac\.algo +string +"td3"$' \
  '^  ac\.updates +i64 +3$' '^  actor\.W0 +f32 +\[6, 3\] +72 ' '^  run_state +u8 +blob +7 ' \
  '^then, from byte [0-9]+: its replay table$' '^format: AGRLRPL1'
expect "$L/shard.agrl" '^format: AGRLSHD1' '^kind: shard$' '^  shard\.version +i64 +1$' '^  shard\.rank +i64 +1$' \
  '^  shard\.world +i64 +2$' '^  shard\.widths +i64\[3\] +3 1 1$' '^sections \(0\):$' \
  '^then, from byte 140: its replay table$' '^format: AGRLRPL1' '^  replay\.capacity +i64 +8$'

"$make_legacy" "$work" 2>/dev/null || { echo "FAIL: make_legacy $work"; exit 1; }
expect "$work/mlp_v2.agrl" '^format: agrl container 1$' '^kind: mlp$' '^  mlp\.version +i64 +3$' '^  b1 +f32 +\[2, 1\] +8 '
expect "$work/replay_per.agrl" '^format: agrl container 1$' '^kind: replay$' '^  replay\.version +i64 +2$' \
  '^  replay\.field\.0 +string +"obs"$' '^  columns +f16 +\[5, 24\] +240 '
expect "$work/dqn.agrl" '^format: agrl container 1$' '^kind: dqn$' '^  dqn\.version +i64 +2$' \
  '^  dqn\.updates +i64 +5$' '^  adam\.state +f32 ' '^  target\.b0 +f32 ' '^  run_state +u8 +blob +7 ' \
  '^then, from byte [0-9]+: its replay table$' '^  replay\.version +i64 +2$'
expect "$work/td3.agrl" '^format: agrl container 1$' '^kind: ac$' '^  ac\.version +i64 +2$' \
  '^  ac\.sizes +i64\[4\] +3 6 3 2$' '^  ac\.low +f64\[2\] +-1 0$' '^  target\.actor\.b2 +f32 +\[2, 1\] +8 ' \
  '^  adam\.critic\.v\.q1\.W0 +f32 ' '^  noise +f32 +\[2, 0\] +0 ' '^  run_state +u8 +blob +7 ' \
  '^then, from byte [0-9]+: its replay table$' '^  replay\.version +i64 +2$'
expect "$work/shard.agrl" '^format: agrl container 1$' '^kind: shard$' '^  shard\.version +i64 +2$' \
  '^  shard\.capacity +i64 +16$' '^  shard\.position +i64 +10$' '^  shard\.dtypes +i64\[3\] +0 4 0$' \
  '^then, from byte [0-9]+: its replay table$' '^  replay\.version +i64 +2$' '^  columns +f32 +\[5, 5\] +100 '
# a frame table (the fuzz corpus's valid seed): its frames, then its fields' table
expect "$here/fuzz/corpus/load/frames_valid.agrl" '^format: agrl container 1$' '^kind: frames$' \
  '^  frames\.stack +i64 +4$' '^  frames +u8 +\[7, 7\] +49 ' '^then, from byte [0-9]+: its replay table$' \
  '^  replay\.field\.1 +string +"reward"$'

# a checkpoint's agent: its run state, a training loop's, printed after its table
"$agrl" train --env cartpole --steps 600 --seed 1 --quiet --learning-starts 100 --checkpoint-every 500 \
  --stop-at none --out "$work/run" >/dev/null 2>&1 || { echo "FAIL: agrl train for a checkpoint"; exit 1; }
ck=$(ls -d "$work"/run/checkpoints/ckpt-* | head -1)
expect "$ck/agent.agrl" '^kind: dqn$' '^then, from byte [0-9]+: its replay table$' \
  "^and, in its section run_state: a training loop's run state$" '^kind: run$' '^  run\.loop +string +"dqn"$' \
  '^  run\.step +i64 +[0-9]+$' '^  obs +f32 +\[[0-9]+, 4\] ' '^  env_state +u8 +blob +[0-9]+ '
expect "$L/dqn.agrl" "^its run_state: 7 bytes of the caller's"
# the checkpoint's own state of agrl train: kind cli, its settings and counters as keys, then its logs
expect "$ck/cli.agrl" '^format: agrl container 1$' '^kind: cli$' '^  cli\.version +i64 +1$' \
  '^  cli\.opts +i64 +[0-9]+$' '^  cli\.opt\.env +string +"cartpole"$' '^  cli\.opt\.steps +string +"600"$' \
  '^  cli\.rows +i64 +[0-9]+$' '^  cli\.best_mean +f64 ' '^  cli\.last\.step +i64 +[0-9]+$' '^sections \(2\):$' \
  '^  episodes\.csv +u8 +blob +[0-9]+ ' '^  losses\.csv +u8 +blob +[0-9]+ '

# refusals
printf 'not an agrl file at all' >"$work/junk"
"$agrl" inspect "$work/junk" >/dev/null 2>"$work/err"
rc=$?
if [ "$rc" = 1 ] && grep -q "is not an agrl file" "$work/err"; then pass=$((pass + 1)); else
  echo "FAIL: a file that is not agrl's: status $rc, $(cat "$work/err")"; fails=$((fails + 1)); fi
head -c 100 "$work/mlp_v2.agrl" >"$work/cut"
"$agrl" inspect "$work/cut" >/dev/null 2>"$work/err"
rc=$?
if [ "$rc" = 1 ] && grep -q "truncated" "$work/err"; then pass=$((pass + 1)); else
  echo "FAIL: a cut file: status $rc, $(cat "$work/err")"; fails=$((fails + 1)); fi
"$agrl" inspect "$work/missing" >/dev/null 2>&1
rc=$?
if [ "$rc" = 1 ]; then pass=$((pass + 1)); else echo "FAIL: a missing file: status $rc"; fails=$((fails + 1)); fi
"$agrl" inspect >/dev/null 2>&1
rc=$?
if [ "$rc" = 2 ]; then pass=$((pass + 1)); else echo "FAIL: no FILE: status $rc"; fails=$((fails + 1)); fi

echo "cli_inspect: $pass passed, $fails failed"
[ "$fails" = 0 ]
