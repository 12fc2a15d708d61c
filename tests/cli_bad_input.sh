#!/usr/bin/env bash
# Every flag that takes a value, of every subcommand, given each kind of bad
# value (none, the next flag, empty, wrong type, nan, inf, -inf, overflow,
# out of range): exit status 2, a first line of stderr "agrl CMD: FLAG ..."
# about that flag, and the usage; and an unknown flag or word for each
# subcommand. Prints the cases passed and failed; fails on any failure.
# usage: tests/cli_bad_input.sh PATH_TO_AGRL
set -u
case $1 in
  /*) AGRL=$1 ;;
  *) AGRL=$PWD/$1 ;;
esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1 # a run that wrongly starts writes here, not in the tree
pass=0
fails=0

# Flags put before the one under test, so that a bad value taken by mistake
# makes a short run that ends with status 0 or 1 (a failure here) instead of
# a long one.
declare -A CONTEXT=(
  [train]="--device cpu --steps 1 --quiet --learning-starts 0 --hidden 4 --out $work/accepted"
  [eval]="--device cpu --model $work/no-such-model.agrl --episodes 1"
  [bench]="--device cpu --filter no-such-row"
  [bench-dist]=""
  [demo]="--device cpu --capacity 100 --batch 4"
)

# The bad values of each kind of flag (besides none at all, and the next flag).
WORDS=("" abc nan inf -inf 99999999999999999999)
INTS=("" abc 12x 1.5 1e3 " 1" 0x10 nan inf -inf 99999999999999999999 -99999999999999999999 9223372036854775808)
FLOATS=("" abc 1x " 0.5" nan NaN -nan inf -inf infinity Infinity 1e999 -1e999 99999999999999999999)
DEVICES=("${WORDS[@]}" gpu cpu0 cuda: cuda:abc cuda:-1 cuda:1024 cuda:1.5 cuda:nan cuda:inf cuda:99999999999999999999 vulkan: vulkan:x vulkan:-1 vulkan:1024 vulkanx cudavulkan)
HIDDEN=("" abc nan inf -inf 99999999999999999999 0 -5 65537 "256," ",256" "256,,256" "," "256, 256" " 256" "256,abc"
        "256,nan" "1,2,3,4,5,6,7,8,9")
TEXTS=("") # a path or a text: only an empty one is bad

# check CMD FLAG VALUE...: agrl CMD CONTEXT FLAG VALUE... must fail as a usage error naming FLAG
check() {
  local cmd=$1 flag=$2
  shift 2
  local -a ctx
  read -r -a ctx <<<"${CONTEXT[$cmd]}"
  timeout 60 "$AGRL" "$cmd" "${ctx[@]}" "$flag" "$@" >"$work/out" 2>"$work/err"
  local rc=$? first
  first=$(head -n1 "$work/err")
  if [ $rc -eq 2 ] && [[ "$first" == "agrl $cmd: $flag "* || "$first" == "agrl $cmd: $flag:"* ]] &&
     grep -q "^usage: agrl $cmd" "$work/err"; then
    pass=$((pass + 1))
  else
    local shown
    shown=$(printf "'%s' " "$@")
    echo "FAIL: agrl $cmd $flag ${shown:-(no value)} -> rc $rc, first line: $first"
    fails=$((fails + 1))
  fi
}

# flag CMD FLAG KIND [LO HI | BAD...]: every bad value of KIND; an int flag
# also gets LO - 1 and HI + 1, a float flag the values past its range given
flag() {
  local cmd=$1 f=$2 kind=$3
  shift 3
  local -a bad
  case $kind in
    int)
      local lo=$1 hi=$2
      bad=("${INTS[@]}" $((lo - 1)))
      if [ "$hi" = 9223372036854775807 ]; then bad+=(9223372036854775808); else bad+=($((hi + 1))); fi
      ;;
    float) bad=("${FLOATS[@]}" "$@") ;;
    word) bad=("${WORDS[@]}" "$@") ;;
    device) bad=("${DEVICES[@]}") ;;
    hidden) bad=("${HIDDEN[@]}") ;;
    text) bad=("${TEXTS[@]}") ;;
  esac
  check "$cmd" "$f"          # no value
  check "$cmd" "$f" --bogus  # the next flag, not a value
  for v in "${bad[@]}"; do check "$cmd" "$f" "$v"; done
}

# ---- agrl train ----
flag train --algo word ppo DQN
flag train --env word nope
flag train --device device
flag train --steps int 1 100000000000
flag train --seed int 0 9223372036854775807
flag train --out text
flag train --n-envs int 1 4096
flag train --stop-at float -1e13 1e13 nonee None
flag train --gpus int 1 64
flag train --rank int 0 63
flag train --world int 1 64
flag train --id-file text
flag train --lr float 0 1e-10 10.5 -1
flag train --gamma float -0.1 1.5
flag train --batch int 1 1048576
flag train --buffer int 1 68719476736
flag train --learning-starts int 0 100000000000
flag train --train-freq int 1 100000000000
flag train --gradient-steps int 0 16777216
flag train --target-update int 1 100000000000
flag train --tau float 0 1.5 -0.5
flag train --hidden hidden
flag train --eps-fraction float -0.1 1.01
flag train --eps-start float -0.1 1.01
flag train --eps-end float -0.1 1.01
flag train --max-grad-norm float -1 1e10
flag train --per-alpha float -0.1 1.01
flag train --per-beta float -0.1 1.01
flag train --per-eps float 0 1.5
flag train --n-step int 1 64
flag train --checkpoint-every int 0 100000000000
flag train --keep int 1 1000000
flag train --eval-every int 0 100000000000
flag train --eval-episodes int 1 10000
flag train --stop-on word nope
flag train --actor-lr float 0 1e-10 10.5 -1
flag train --critic-lr float 0 1e-10 10.5 -1
flag train --policy-delay int 1 1000
flag train --alpha float 0 1e-10 1e6 -1
flag train --target-entropy float -1e7 1e7
flag train --expl-noise float -0.1 10.5
flag train --target-noise float -0.1 10.5
flag train --noise-clip float -0.1 10.5
flag train --noise-rho float -0.1 1 1.5
# ---- agrl eval ----
flag eval --model text
flag eval --env word nope
flag eval --episodes int 1 1000000
flag eval --seed int 0 9223372036854775807
flag eval --device device
# ---- agrl bench ----
flag bench --device device
flag bench --filter text
flag bench --iters int 1 1000000
flag bench --json text
# ---- agrl bench-dist ----
flag bench-dist --gpus int 1 64
flag bench-dist --shape word cartpol MUJOCO
flag bench-dist --batch int 1 1048576
flag bench-dist --updates int 1 1048576
flag bench-dist --reps int 1 1000
flag bench-dist --rank int 0 63
flag bench-dist --world int 1 64
flag bench-dist --id-file text
# ---- agrl demo ----
flag demo --device device
flag demo --capacity int 1 1099511627776
flag demo --batch int 1 16777216

# an unknown flag, and a word where a flag belongs, for each subcommand
for cmd in train eval bench bench-dist demo; do
  for x in --bogus -x bogus; do
    read -r -a ctx <<<"${CONTEXT[$cmd]}"
    timeout 60 "$AGRL" "$cmd" "${ctx[@]}" "$x" >"$work/out" 2>"$work/err"
    rc=$?
    first=$(head -n1 "$work/err")
    if [ $rc -eq 2 ] && [ "$first" = "agrl $cmd: unknown option '$x'" ] && grep -q "^usage: agrl $cmd" "$work/err"; then
      pass=$((pass + 1))
    else
      echo "FAIL: agrl $cmd $x -> rc $rc, first line: $first"
      fails=$((fails + 1))
    fi
  done
done

echo "$pass passed, $fails failed"
[ $fails -eq 0 ]
