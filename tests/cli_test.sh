#!/usr/bin/env bash
# The command-line tool: bad flags and values give a one-line error, the
# usage and exit code 2; a short training run is deterministic on the CPU,
# writes its logs and network, and `agrl eval` loads the network; no shell
# ever reads --out (quotes, $(...), backticks, ; and newlines in it run
# nothing); a path of any length is used whole; the files of a run that
# failed or was stopped by a signal are written whole.
# (tests/cli_bad_input.sh tries every flag with every kind of bad value.)
# usage: tests/cli_test.sh PATH_TO_AGRL
set -u
case $1 in
  /*) AGRL=$1 ;;
  *) AGRL=$PWD/$1 ;;
esac
fails=0
pass=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1 # whatever a run writes by mistake lands here

expect_usage_error() { # expect_usage_error "what it names" args...
  local what=$1
  shift
  timeout 60 "$AGRL" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  local first
  first=$(head -n1 "$tmp/err")
  if [ $rc -ne 2 ] || ! grep -qF -- "$what" <<<"$first" || ! grep -q "^usage: agrl" "$tmp/err"; then
    echo "FAIL: agrl $* -> rc $rc, first line: $first"
    fails=$((fails + 1))
  else
    pass=$((pass + 1))
  fi
}

expect_usage_error "unknown option '--bogus'" train --bogus
expect_usage_error "--steps needs a positive whole number" train --steps -5
expect_usage_error "--steps needs a positive whole number" train --steps 12x
expect_usage_error "--device needs auto, cpu, cuda, cuda:N, vulkan or vulkan:N" train --device gpu
expect_usage_error "--algo needs dqn" train --algo ppo
expect_usage_error "unknown environment" train --env nope
expect_usage_error "DQN needs discrete actions" train --env pendulum
expect_usage_error "--lr needs a learning rate" train --lr 0
expect_usage_error "--gamma needs a discount" train --gamma 1.5
expect_usage_error "--hidden needs sizes like 256,256" train --hidden 256,,3
expect_usage_error "--seed needs a whole number" train --seed
expect_usage_error "--gpus 2 needs CUDA devices" train --gpus 2 --device cpu
expect_usage_error "must be a multiple of the number of GPUs" train --gpus 3 --batch 128 --device cuda
expect_usage_error "--gpus needs a number of GPUs" train --gpus 0
expect_usage_error "--world needs --rank" train --world 2 --device cuda --id-file /tmp/x
expect_usage_error "--shape needs cartpole or mujoco" bench-dist --shape nope
expect_usage_error "unknown option '--bogus'" bench-dist --bogus
expect_usage_error "--model FILE is required" eval
expect_usage_error "--episodes needs a positive number" eval --model x --episodes 0
expect_usage_error "unknown option '--nope'" bench --nope
expect_usage_error "unknown option '--x'" demo --x
expect_usage_error "unknown command 'frobnicate'" frobnicate
# eval's flags: an unknown one is unknown, a known one without its value says which value
expect_usage_error "agrl eval: unknown option '--bogus'" eval --bogus
expect_usage_error "agrl eval: unknown option '--bogus'" eval --model x --bogus 3
expect_usage_error "agrl eval: --model needs a path" eval --model
expect_usage_error "agrl eval: --model needs a path" eval --model --episodes 3
expect_usage_error "agrl eval: --episodes needs a positive number" eval --model x --episodes
# --hidden: an empty size (a trailing, leading or doubled comma) is an error
expect_usage_error "--hidden needs sizes like 256,256" train --hidden 256,
expect_usage_error "--hidden needs sizes like 256,256" train --hidden ,256
expect_usage_error "--hidden needs sizes like 256,256" train --hidden 256,,256
expect_usage_error "--hidden needs sizes like 256,256" train --hidden 1,2,3,4,5,6,7,8,9
# steps: at most 1e11, the documented maximum (2^40 was taken before)
expect_usage_error "--steps needs a positive whole number up to 100000000000" train --steps 1099511627776
expect_usage_error "--steps needs a positive whole number up to 100000000000" train --steps 100000000001
expect_usage_error "--train-freq needs a number of steps in 1..100000000000" train --train-freq 1099511627776
# a value that is the next flag is a missing value, not a directory named --quiet
expect_usage_error "--out needs a directory" train --out --quiet
expect_usage_error "--buffer (100) must hold at least --batch (128)" train --buffer 100
expect_usage_error "--rank is set by the launcher" train --rank 1

for cmd in train eval bench bench-dist demo; do
  if "$AGRL" $cmd --help | grep -q "^usage: agrl $cmd"; then pass=$((pass + 1)); else
    echo "FAIL: agrl $cmd --help"
    fails=$((fails + 1))
  fi
done
if "$AGRL" train --help | grep -q "at most 100000000000"; then pass=$((pass + 1)); else
  echo "FAIL: agrl train --help does not give the most steps"
  fails=$((fails + 1))
fi

# two short runs with one seed: identical episode and loss logs
for k in 1 2; do
  "$AGRL" train --device cpu --steps 6000 --seed 3 --hidden 32,32 --quiet --out "$tmp/run$k" >"$tmp/train$k.txt" 2>&1 ||
    { echo "FAIL: training run $k"; cat "$tmp/train$k.txt"; fails=$((fails + 1)); }
done
if cmp -s "$tmp/run1/episodes.csv" "$tmp/run2/episodes.csv" && cmp -s "$tmp/run1/losses.csv" "$tmp/run2/losses.csv" &&
   [ "$(wc -l <"$tmp/run1/episodes.csv")" -gt 20 ]; then
  pass=$((pass + 1))
else
  echo "FAIL: two CPU runs with seed 3 differ (or logged nothing)"
  fails=$((fails + 1))
fi
for f in episodes.csv losses.csv summary.json q_network.agrl; do
  if [ -s "$tmp/run1/$f" ]; then pass=$((pass + 1)); else
    echo "FAIL: $f missing"
    fails=$((fails + 1))
  fi
done
if "$AGRL" eval --model "$tmp/run1/q_network.agrl" --device cpu --episodes 3 | grep -q "mean return over 3 greedy episodes"; then
  pass=$((pass + 1))
else
  echo "FAIL: agrl eval of the trained network"
  fails=$((fails + 1))
fi

# sac and td3: a short run is deterministic on the CPU, writes its logs and
# policy, and `agrl eval` plays the policy; their flags and the DQN's are
# kept apart
for algo in sac td3; do
  for k in 1 2; do
    "$AGRL" train --algo $algo --device cpu --steps 600 --seed 5 --hidden 16 --batch 32 --learning-starts 200 \
      --quiet --out "$tmp/$algo$k" >"$tmp/$algo$k.txt" 2>&1 ||
      { echo "FAIL: $algo training run $k"; cat "$tmp/$algo$k.txt"; fails=$((fails + 1)); }
  done
  if cmp -s "$tmp/${algo}1/episodes.csv" "$tmp/${algo}2/episodes.csv" &&
     cmp -s "$tmp/${algo}1/losses.csv" "$tmp/${algo}2/losses.csv" && [ "$(wc -l <"$tmp/${algo}1/episodes.csv")" -eq 4 ] &&
     [ "$(head -n1 "$tmp/${algo}1/losses.csv")" = "step,updates,loss,mean20,actor_loss,alpha" ] &&
     grep -q "\"algo\": \"$algo\", \"env\": \"Pendulum-v1\"" "$tmp/${algo}1/summary.json" &&
     grep -q '"updates": 400,' "$tmp/${algo}1/summary.json"; then
    pass=$((pass + 1))
  else
    echo "FAIL: two $algo CPU runs with seed 5 differ, or their logs are not as expected"
    fails=$((fails + 1))
  fi
  if "$AGRL" eval --model "$tmp/${algo}1/policy.agrl" --env pendulum --device cpu --episodes 2 |
     grep -qE "mean return over 2 deterministic episodes: -[0-9]+\.[0-9]+$"; then
    pass=$((pass + 1))
  else
    echo "FAIL: agrl eval of the $algo policy"
    fails=$((fails + 1))
  fi
done
# MountainCarContinuous-v0's own defaults: correlated exploring noise
# (0.99) and 64-unit layers, the same run as those flags given, unlike
# independent noise; flags given win
mcc() { "$AGRL" train --algo sac --env mountaincar_continuous --device cpu --steps 1000 --seed 2 --batch 32 \
  --learning-starts 200 --quiet --out "$tmp/$1" "${@:2}" >"$tmp/$1.txt" 2>&1; }
mcc mcc_def && mcc mcc_flags --noise-rho 0.99 --hidden 64,64 && mcc mcc_white --noise-rho 0 --hidden 64,64
if cmp -s "$tmp/mcc_def/episodes.csv" "$tmp/mcc_flags/episodes.csv" &&
   ! cmp -s "$tmp/mcc_def/episodes.csv" "$tmp/mcc_white/episodes.csv" &&
   grep -q "MountainCarContinuous-v0's exploring noise correlated at 0.99, hidden layers 64,64" "$tmp/mcc_def.txt" &&
   grep -q "correlated at 0, hidden layers 64,64" "$tmp/mcc_white.txt"; then
  pass=$((pass + 1))
else
  echo "FAIL: MountainCarContinuous's SAC defaults are not --noise-rho 0.99 --hidden 64,64"
  head -c 600 "$tmp/mcc_def.txt" "$tmp/mcc_white.txt"
  fails=$((fails + 1))
fi
# a policy of Pendulum's 3 observations on CartPole's 4: refused, naming both
"$AGRL" eval --model "$tmp/sac1/policy.agrl" --env cartpole --device cpu --episodes 1 >"$tmp/out" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -q "the environment has 4 observations and 2 actions, the network 3 inputs" "$tmp/out"; then
  pass=$((pass + 1))
else
  echo "FAIL: agrl eval of a Pendulum policy on CartPole -> rc $rc: $(head -c 300 "$tmp/out")"
  fails=$((fails + 1))
fi
expect_usage_error "needs bounded continuous actions; CartPole-v1 has discrete ones" train --algo sac --env cartpole
expect_usage_error "--per is a DQN option, not one of td3" train --algo td3 --per
expect_usage_error "--eps-end is a DQN option, not one of sac" train --eps-end 0.1 --algo sac
expect_usage_error "--actor-lr is an option of sac and td3, not of dqn" train --actor-lr 1e-3
expect_usage_error "--checkpoint-every needs a number of steps" train --algo sac --checkpoint-every -1
expect_usage_error "--algo needs dqn, sac or td3" train --algo ppo

ok() { pass=$((pass + 1)); }
bad() {
  echo "FAIL: $*"
  fails=$((fails + 1))
}
# the files a run leaves in its directory, one a line, sorted
listing() { (cd "$1" && ls -A | LC_ALL=C sort); }
RUN=(train --steps 300 --device cpu --quiet --hidden 16 --learning-starts 100)
if python3 -c 'import matplotlib' 2>/dev/null || /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  files=$(printf '%s\n' episodes.csv learning_curve.png losses.csv q_network.agrl summary.json)
else
  files=$(printf '%s\n' episodes.csv losses.csv q_network.agrl summary.json)
fi

# No shell reads --out: runs in a fresh directory with quotes, spaces, $(...),
# backticks, ; and a newline in --out create nothing but their directories,
# each holding exactly the run's files (the curve too when matplotlib is
# there: its drawing gets the directory whole). The DQN's default 8 copies
# take 8 steps at a time: --steps 300 ends at 304.
inj=$tmp/inject
mkdir "$inj"
names=("q'uote" 'dq"uote' "sp ace" '$(touch X1)' '`touch X2`' 'semi;touch X3;' $'new\nline' "x';touch X4;'"
       'a"; touch X5; "b' $'all \' " $(touch X6) `touch X7`; touch X8 \n\tend')
for n in "${names[@]}"; do
  (cd "$inj" && "$AGRL" "${RUN[@]}" --out "$n") >"$tmp/inj.txt" 2>&1 || { bad "training with --out $(printf %q "$n")"; cat "$tmp/inj.txt"; }
  if [ -d "$inj/$n" ] && [ "$(listing "$inj/$n")" = "$files" ] && grep -q '"steps": 304,' "$inj/$n/summary.json"; then ok; else
    bad "--out $(printf %q "$n"): the directory holds [$(listing "$inj/$n" 2>&1 | tr '\n' ' ')]"
  fi
done
if [ "$(cd "$inj" && printf '%s\0' * | LC_ALL=C sort -z | tr '\0' '|')" = "$(printf '%s\0' "${names[@]}" | LC_ALL=C sort -z | tr '\0' '|')" ]; then
  ok
else
  bad "the runs with odd --out names left other files: $(cd "$inj" && printf '[%q] ' *)"
fi

# A path of more than 1023 bytes (it was cut at 1023 and the run wrote
# elsewhere) is used whole.
long=$tmp/long
L=$(printf 'L%.0s' $(seq 200))
p=$long/$L/$L/$L/$L/$L/$L
"$AGRL" "${RUN[@]}" --out "$p" >"$tmp/long.txt" 2>&1 || { bad "training with a long --out"; cat "$tmp/long.txt"; }
if [ ${#p} -gt 1023 ] && [ "$(listing "$p")" = "$files" ] && [ "$(find "$long" -type f | wc -l)" -eq "$(wc -l <<<"$files")" ]; then
  ok
else
  bad "a --out of ${#p} bytes: its files are not all in it, or are elsewhere: $(find "$long" -type f | head -3)"
fi
# one the system refuses: an error naming --out
p=$long/$(printf "$L/%.0s" $(seq 30))x
"$AGRL" "${RUN[@]}" --out "$p" >"$tmp/long.txt" 2>&1
rc=$?
if [ $rc -eq 1 ] && head -n1 "$tmp/long.txt" | grep -q "cannot create the --out directory .*File name too long"; then ok; else
  bad "a --out of ${#p} bytes -> rc $rc: $(head -c 200 "$tmp/long.txt")"
fi

# A run that fails after training (its network cannot be written) keeps the
# logs it wrote, whole; nothing is left under a temporary name.
d=$tmp/failed
mkdir -p "$d/q_network.agrl"
"$AGRL" "${RUN[@]}" --out "$d" >"$tmp/failed.txt" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -q "saving the network failed" "$tmp/failed.txt" && [ "$(wc -l <"$d/episodes.csv")" -gt 5 ] &&
   [ "$(head -n1 "$d/losses.csv")" = "step,updates,loss,mean20" ] && [ "$(listing "$d")" = "$(printf '%s\n' episodes.csv losses.csv q_network.agrl)" ]; then
  ok
else
  bad "a run whose network cannot be saved -> rc $rc, files [$(listing "$d" | tr '\n' ' ')]: $(tail -n2 "$tmp/failed.txt")"
fi
# one that fails before it logs anything leaves an earlier run's files as they were
d=$tmp/earlier
"$AGRL" "${RUN[@]}" --out "$d" >/dev/null 2>&1
cp "$d/episodes.csv" "$tmp/earlier.csv"
"$AGRL" "${RUN[@]}" --device cuda:1023 --out "$d" >"$tmp/earlier.txt" 2>&1
rc=$?
if [ $rc -eq 1 ] && cmp -s "$d/episodes.csv" "$tmp/earlier.csv" && [ "$(listing "$d")" = "$files" ]; then ok; else
  bad "a run that failed at the start -> rc $rc, changed the earlier run's files: [$(listing "$d" | tr '\n' ' ')]"
fi

# SIGTERM stops a run of the most steps (1e11) after the step in progress:
# it writes a checkpoint and its files whole and exits with 143. Its progress line gives the
# ETA in hours or days, not in millions of seconds.
d=$tmp/stopped
"$AGRL" train --steps 100000000000 --stop-at none --device cpu --hidden 16 --learning-starts 100 --out "$d" \
  >"$tmp/stopped.txt" 2>&1 &
pid=$!
for _ in $(seq 100); do
  [ -n "$(find "$d" -name 'losses.csv.tmp*' 2>/dev/null)" ] && break
  sleep 0.1
done
sleep 1
kill -TERM $pid
wait $pid
rc=$?
if [ $rc -eq 143 ] && grep -q '"interrupted": true' "$d/summary.json" && [ "$(wc -l <"$d/episodes.csv")" -gt 5 ] &&
   [ "$(listing "$d")" = "$(printf '%s\n' checkpoints $files | LC_ALL=C sort)" ] &&
   [ "$(ls "$d/checkpoints" | grep -c '^ckpt-')" = 1 ] && grep -q "interrupted by signal 15" "$tmp/stopped.txt" &&
   grep -q "^step .* | ETA  *[0-9.]*[hd]$" "$tmp/stopped.txt"; then
  ok
else
  bad "SIGTERM -> rc $rc, files [$(listing "$d" | tr '\n' ' ')]: $(tail -n3 "$tmp/stopped.txt")"
fi

# the steps a run reports are the steps it took: --n-envs 7 takes 7 at a
# time, so --steps 300 ends at 301 (it reported the step of the last event)
d=$tmp/steps
"$AGRL" "${RUN[@]}" --n-envs 7 --out "$d" >"$tmp/steps.txt" 2>&1
if grep -q '"steps": 301,' "$d/summary.json" && grep -q "^agrl train: 301 steps" "$tmp/steps.txt"; then ok; else
  bad "--steps 300 --n-envs 7: $(head -c 300 "$d/summary.json")"
fi

# --filter A,B runs the rows whose names contain A or B, in the bench's own
# order; an empty piece matches nothing
rows=$("$AGRL" bench --device cpu --filter cpu_add_1,cpu_per_update --iters 2 2>&1 | awk '$1 ~ /^cpu_/ && / us /{print $1}' | tr '\n' ' ')
if [ "$rows" = "cpu_per_update_b256 cpu_add_1_mujoco " ]; then ok; else bad "bench --filter cpu_add_1,cpu_per_update ran: $rows"; fi
rows=$("$AGRL" bench --device cpu --filter , --iters 2 2>&1 | awk '$1 ~ /^cpu_/ && / us /{print $1}' | tr '\n' ' ')
if [ -z "$rows" ]; then ok; else bad "bench --filter , ran: $rows"; fi

echo "$pass passed, $fails failed"
[ $fails -eq 0 ]
