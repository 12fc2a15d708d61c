#!/usr/bin/env bash
# A/B of `agrl bench` rows: builds the tree in OLD_SRC (an exported older
# commit) beside the current build, runs both binaries' benchmarks in turn,
# ROUNDS times each, alternating, and prints every row's median time before
# and after with the change in percent (the smaller of each row's runs).
# usage: dev/ab_bench.sh OLD_SRC CURRENT_BUILD DEVICE [ROUNDS]   (AB_FILTER=TEXT: only those rows)
set -u
old=$1 cur=$2 dev=${3:-cuda} rounds=${4:-2}
export PATH=/usr/local/cuda/bin:$PATH
here=$(cd "$(dirname "$0")/.." && pwd)
cmake -S "$old" -B /tmp/ab-old -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DAGRL_TESTS=OFF \
  -DAGRL_DEPS_PREFIX="$here/.deps" > /tmp/ab-old.log 2>&1 && cmake --build /tmp/ab-old -j"$(nproc)" --target agrl_cli >> /tmp/ab-old.log 2>&1 ||
  { tail -20 /tmp/ab-old.log; exit 1; }
rm -f /tmp/ab-*.jsonl
for r in $(seq "$rounds"); do
  /tmp/ab-old/agrl bench --device "$dev" ${AB_FILTER:+--filter "$AB_FILTER"} --json /tmp/ab-old-$r.jsonl > /dev/null 2>&1
  "$cur/agrl" bench --device "$dev" ${AB_FILTER:+--filter "$AB_FILTER"} --json /tmp/ab-new-$r.jsonl > /dev/null 2>&1
done
python3 - "$rounds" <<'PY'
import json, sys
rounds = int(sys.argv[1])
def rows(which):
    best = {}
    for r in range(1, rounds + 1):
        try:
            for line in open(f"/tmp/ab-{which}-{r}.jsonl"):
                if line.strip():
                    o = json.loads(line)
                    best[o["work"]] = min(best.get(o["work"], 1e30), o["us"])
        except OSError:
            pass
    return best
old, new = rows("old"), rows("new")
import statistics
def spread(which, w):
    v = []
    for r in range(1, rounds + 1):
        try:
            for line in open(f"/tmp/ab-{which}-{r}.jsonl"):
                if line.strip() and json.loads(line)["work"] == w:
                    v.append(json.loads(line)["us"])
        except OSError:
            pass
    return f"{min(v):.1f}-{max(v):.1f}" if v else "-"
print(f"{'work':42} {'before us':>10} {'after us':>10} {'change':>8}   before range   after range")
worst = 0
for w in old:
    if w in new:
        ch = 100 * (new[w] - old[w]) / old[w]
        worst = max(worst, ch)
        print(f"{w:42} {old[w]:10.2f} {new[w]:10.2f} {ch:+7.1f}%   {spread('old', w):>12}   {spread('new', w):>12}")
print(f"largest slowdown: {worst:+.1f}% (the better of {rounds} runs each)")
PY
