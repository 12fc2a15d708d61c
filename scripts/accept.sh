#!/usr/bin/env bash
# Acceptance of one row of the learning table: `agrl train` for each seed of a
# range, J runs at a time, then a table per seed (solved, the step it was
# solved at, best and final mean, episodes, wall time, steps/s), the count of
# seeds solved against the row's target, and the median and max wall time.
# The table and the verdict also go to DIR/ROW/results.csv and summary.txt.
#
# usage: scripts/accept.sh AGRL DEVICE ROW [--seeds FIRST-LAST] [--jobs J]
#                          [--out DIR] [-- extra train flags]
# (scripts/accept.sh --help says what each takes)
set -u

# The defaults of `agrl train` were tuned on other seeds; acceptance runs on
# 20 seeds that took no part in that.
DEFAULT_SEEDS=100-119

# The mean of the last W episodes of an episodes.csv, for rows whose window is
# not the 20 of the run's own --stop-at: argv = CSV W THRESHOLD; prints the
# first step where the mean reached THRESHOLD (-1 if never), the best and the
# final mean ("-" before W episodes) and the number of episodes.
WINDOW_PY='
import csv, sys
path, w, thr = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
rets, solved, best, final = [], -1, None, None
with open(path, newline="") as f:
    for row in csv.DictReader(f):
        rets.append(float(row["return"]))
        if len(rets) < w:
            continue
        final = sum(rets[-w:]) / w
        best = final if best is None else max(best, final)
        if solved < 0 and final >= thr:
            solved = int(row["step"])
fmt = lambda x: "-" if x is None else "%.6g" % x
print(solved, fmt(best), fmt(final), len(rets))
'

usage() {
  cat <<EOF
usage: scripts/accept.sh AGRL DEVICE ROW [--seeds FIRST-LAST] [--jobs J]
                         [--out DIR] [-- extra train flags]
  AGRL    the agrl binary (build/agrl)
  DEVICE  what agrl train --device takes: cpu, cuda, cuda:N, auto
  ROW     dqn-cartpole, dqn-acrobot, dqn-mountaincar, sac-pendulum,
          td3-pendulum, sac-mountaincar-continuous
  --seeds FIRST-LAST  the seeds (or one seed S; default $DEFAULT_SEEDS)
  --jobs J            runs at a time (default: nproc on the CPU, 4 otherwise)
  --out DIR           DIR/ROW/sSEED/ holds each run, DIR/ROW/sSEED.log its
                      output, DIR/ROW/results.csv and summary.txt the table
                      (default runs/accept)
  -- FLAGS            given to every agrl train after the row's own flags,
                      so they override them (e.g. -- --steps 3000 --lr 1e-3)
Exit status: 0 when the target is met or the row has none, 1 when it is not
(or the row's algorithm is not available), 2 for a usage error.
EOF
}
die_usage() {
  echo "accept.sh: $*" >&2
  usage >&2
  exit 2
}

case "${1:-}" in -h | --help) usage; exit 0 ;; esac
[ $# -ge 3 ] || die_usage "needs AGRL DEVICE ROW"
agrl=$1 device=$2 row=$3
shift 3

seeds=$DEFAULT_SEEDS jobs='' out=runs/accept
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seeds) [ $# -ge 2 ] || die_usage "--seeds needs FIRST-LAST"; seeds=$2; shift 2 ;;
    --jobs) [ $# -ge 2 ] || die_usage "--jobs needs a count"; jobs=$2; shift 2 ;;
    --out) [ $# -ge 2 ] || die_usage "--out needs a directory"; out=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h | --help) usage; exit 0 ;;
    *) die_usage "unknown argument: $1" ;;
  esac
done

# The rows: algorithm, train flags, the window of the mean, the threshold it
# must reach and the target (seeds of 20; empty: informational).
case "$row" in
  dqn-cartpole) algo=dqn env=cartpole steps=50000 window=20 thr=475 target=19 ;;
  dqn-acrobot) algo=dqn env=acrobot steps=100000 window=20 thr=-100 target=19 ;;
  dqn-mountaincar) algo=dqn env=mountaincar steps=100000 window=20 thr=-110 target= ;;
  sac-pendulum) algo=sac env=pendulum steps=20000 window=10 thr=-200 target=19 ;;
  td3-pendulum) algo=td3 env=pendulum steps=20000 window=10 thr=-200 target=19 ;;
  sac-mountaincar-continuous) algo=sac env=mountaincar_continuous steps=100000 window=20 thr=90 target=15 ;;
  *) die_usage "unknown row: $row" ;;
esac

if [[ $seeds =~ ^([0-9]+)-([0-9]+)$ ]]; then
  first=${BASH_REMATCH[1]} last=${BASH_REMATCH[2]}
elif [[ $seeds =~ ^[0-9]+$ ]]; then
  first=$seeds last=$seeds
else
  die_usage "--seeds wants FIRST-LAST: $seeds"
fi
first=$((10#$first)) last=$((10#$last))
[ "$first" -le "$last" ] || die_usage "--seeds $seeds: FIRST is above LAST"
if [ -z "$jobs" ]; then
  if [ "$device" = cpu ]; then jobs=$(nproc); else jobs=4; fi
fi
[[ $jobs =~ ^[0-9]+$ ]] || die_usage "--jobs wants a count >= 1: $jobs"
jobs=$((10#$jobs))
[ "$jobs" -ge 1 ] || die_usage "--jobs wants a count >= 1: $jobs"
[ -x "$agrl" ] || die_usage "not an executable: $agrl"
[ -n "$device" ] || die_usage "DEVICE is empty"

dir=$out/$row
mkdir -p "$dir" || exit 2

# A row of an algorithm the binary does not have is reported, not run.
if ! "$agrl" train --algo "$algo" --help >/dev/null 2>&1; then
  echo "$row: not available: agrl train has no --algo $algo yet" | tee "$dir/summary.txt"
  exit 1
fi

# The run's own --stop-at watches the mean of 20; a row of another window
# runs its whole length and the mean is computed from episodes.csv.
if [ "$window" = 20 ]; then stop=$thr; else stop=none; fi
row_flags=(--algo "$algo" --env "$env" --steps "$steps" --stop-at "$stop")

# The steps the runs get: the row's, or the last --steps among the extra flags.
for ((i = 0; i < ${#extra[@]}; i++)); do
  if [ "${extra[i]}" = --steps ] && [ $((i + 1)) -lt ${#extra[@]} ]; then steps=${extra[i + 1]}; fi
done

# The value of a number field of summary.json ("" when absent).
json_num() {
  grep -o "\"$2\": [-+0-9.eEinfa]*" "$1" 2>/dev/null | head -n 1 | sed 's/^[^:]*: //'
}

# Runs: J at a time (on the CPU each run keeps to one BLAS thread unless
# OPENBLAS_NUM_THREADS says otherwise, so nproc of them fill the cores).
# `wait -n` only frees a slot; every pid is then waited for by itself, so each
# run's exit status is its own (a status the shell no longer holds reads as
# 127: failed, never solved).
pids=()
# shellcheck disable=SC2317 # reached through the trap
stop_runs() {
  local p
  for p in $(jobs -rp); do kill -TERM "$p" 2>/dev/null; done
  wait
  echo "accept.sh: interrupted; the runs were stopped" >&2
  exit 130
}
trap stop_runs INT TERM

t0=$(date +%s)
echo "$row on $device: seeds $first-$last, $jobs at a time; runs and logs in $dir/" >&2
active=0
for ((s = first; s <= last; s++)); do
  if [ "$active" -ge "$jobs" ]; then
    wait -n
    active=$((active - 1))
  fi
  rm -f "$dir/s$s/summary.json" "$dir/s$s/episodes.csv"
  "$agrl" train "${row_flags[@]}" "${extra[@]}" --device "$device" --seed "$s" --quiet \
    --out "$dir/s$s" >"$dir/s$s.log" 2>&1 &
  pids[s]=$!
  active=$((active + 1))
done
rc=()
for ((s = first; s <= last; s++)); do
  wait "${pids[s]}"
  rc[s]=$?
done
trap - INT TERM
elapsed=$(($(date +%s) - t0))

# The table.
n=0 solved=0 failed=0
walls=()
why=()
lines=()
csv="seed,solved,solved_at_step,best_mean$window,final_mean$window,episodes,wall_s,steps_per_s,exit_status"
fmt='%-6s %-7s %-9s %-10s %-10s %-8s %-8s %s'
# shellcheck disable=SC2059 # the format is the constant above
header=$(printf "$fmt" seed solved at_step "best$window" "final$window" episodes wall_s steps/s)
for ((s = first; s <= last; s++)); do
  n=$((n + 1))
  js=$dir/s$s/summary.json
  at='' why[s]=''
  if [ "${rc[s]}" -ne 0 ]; then
    why[s]="agrl train exited with ${rc[s]}"
  elif [ ! -s "$js" ]; then
    why[s]="agrl train wrote no $js"
  else
    wall=$(json_num "$js" wall_s)
    sps=$(json_num "$js" steps_per_s)
    eps=$(json_num "$js" episodes)
    if [ "$window" = 20 ] && [ "$(json_num "$js" stop_at)" = "$thr" ]; then
      at=$(json_num "$js" solved_at_step)
      best=$(json_num "$js" best_mean20)
      final=$(json_num "$js" final_mean20)
      # before 20 episodes the summary's best is 0 and its final a shorter mean
      if [[ $eps =~ ^[0-9]+$ ]] && [ "$eps" -lt 20 ]; then best=- final=-; fi
    else
      # another window, or the extra flags moved --stop-at: from the episodes
      read -r at best final eps < <(python3 -c "$WINDOW_PY" "$dir/s$s/episodes.csv" "$window" "$thr")
      [ -n "${at:-}" ] || why[s]="the mean of $window could not be read from $dir/s$s/episodes.csv"
    fi
  fi
  if [ -n "${why[s]}" ]; then
    failed=$((failed + 1))
    ok=failed at=- best=- final=- eps=- wall=- sps=-
  else
    walls+=("$wall")
    if [[ $at =~ ^[0-9]+$ ]]; then
      ok=yes
      solved=$((solved + 1))
    else
      ok=no at=-
    fi
  fi
  # shellcheck disable=SC2059
  lines+=("$(printf "$fmt" "$s" "$ok" "$at" "$best" "$final" "$eps" "$wall" "$sps")")
  csv+=$'\n'"$s,$ok,$at,$best,$final,$eps,$wall,$sps,${rc[s]}"
done
printf '%s\n' "$csv" >"$dir/results.csv"

if [ -n "$target" ]; then
  need=$(((target * n + 19) / 20)) # the target's share of the seeds run
  if [ "$solved" -ge "$need" ]; then verdict=PASS; status=0; else verdict=FAIL; status=1; fi
  of="target $target of 20"
  [ "$n" -ne 20 ] && of+="; $need of these $n"
  verdict="($of): $verdict"
else
  verdict="(no target: informational)"
  status=0
fi
if [ ${#walls[@]} -gt 0 ]; then
  read -r wmed wmax < <(printf '%s\n' "${walls[@]}" | sort -g |
    awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.3f %.3f\n", m, v[NR] }')
else
  wmed=- wmax=-
fi

report() {
  echo "$row: agrl train ${row_flags[*]}${extra[*]:+ ${extra[*]}} --device $device"
  echo "solved: the mean return of the last $window training episodes >= $thr"
  echo "$header"
  printf '%s\n' "${lines[@]}"
  local f
  for ((f = first; f <= last; f++)); do
    if [ -n "${why[f]}" ]; then
      if [ "${rc[f]}" -eq 0 ]; then
        echo "seed $f failed: ${why[f]}"
      else
        echo "seed $f failed: ${why[f]} ($dir/s$f.log):"
        sed '/^usage: /,$d' "$dir/s$f.log" | tail -n 5 | sed 's/^/  /'
      fi
    fi
  done
  echo "$row on $device: $solved of $n seeds solved within $steps steps $verdict"
  echo "wall time per seed: median $wmed s, max $wmax s; all $n seeds: $elapsed s, $jobs at a time"
  [ "$failed" -eq 0 ] || echo "$failed of $n runs failed (not counted as solved)"
}
report | tee "$dir/summary.txt"
exit "$status"
