#!/usr/bin/env bash
# Builds agrl with CUDA for sm_90, runs every test (a GPU test that would skip
# fails here: AGRL_REQUIRE_GPU=1), runs the CUDA tests under
# compute-sanitizer, and runs the benchmarks beside their peers.
# usage: scripts/gpu_check.sh OUTDIR [step ...]   steps: env build test sanitize bench train (default all)
# Results and logs go to OUTDIR/results.tgz. Expects .deps/ (scripts/fetch_gpu_deps.sh)
# where cmocka and cblas.h are not installed.
set -u
FINAL=${1:?usage: gpu_check.sh OUTDIR [steps]}
shift
# everything is written under OUT, then packed into FINAL/results.tgz
# (the device tool brings back only a few files)
OUT=$(mktemp -d /tmp/agrl_gpu.XXXXXX)
pack() { mkdir -p "$FINAL"; tar czf "$FINAL/results.tgz" -C "$OUT" . ; }
trap pack EXIT
STEPS=${*:-env build test sanitize bench train}
cd "$(dirname "$0")/.."
ROOT=$(pwd)
DEPS=$ROOT/.deps
BUILD=$ROOT/build-gpu
export PATH=/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=$DEPS/usr/lib/x86_64-linux-gnu:$DEPS/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
# Python packages the machine lacks (cpprb, gymnasium), carried as wheels in .whl
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
status=0
has() { case " $STEPS " in *" $1 "*) return 0;; esac; return 1; }

if has env; then
  { date; nvidia-smi -L; nvcc --version | tail -1; cmake --version | head -1;
    ldconfig -p | grep -i -E 'openblas|cmocka' ; python3 -c 'import torch, jax; print("torch", torch.__version__, "jax", jax.__version__)';
    which compute-sanitizer; } > "$OUT/env.txt" 2>&1
  cat "$OUT/env.txt"
fi
if has build; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DAGRL_DEPS_PREFIX="$DEPS" > "$OUT/build.log" 2>&1 &&
  cmake --build "$BUILD" -j"$(nproc)" >> "$OUT/build.log" 2>&1 || { echo "BUILD FAILED"; tail -40 "$OUT/build.log"; exit 1; }
  echo "build ok"
fi
if has test; then
  AGRL_REQUIRE_GPU=1 ctest --test-dir "$BUILD" -j4 -V -LE slow > "$OUT/ctest.log" 2>&1 || status=1
  grep -E "tests passed|tests failed|Failed|\*\*\*|Skipped" "$OUT/ctest.log" | tail -25
  # cmocka's own counts, per CTest test (device)
  python3 scripts/count_tests.py "$OUT/ctest.log" | tee "$OUT/test_counts.txt"
fi
if has sanitize; then
  for t in buffer switch bad_input graph capture; do
    compute-sanitizer --tool memcheck --leak-check full --error-exitcode 3 \
      "$BUILD/tests/test_$t" cuda > "$OUT/memcheck_$t.log" 2>&1
    echo "memcheck $t: rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/memcheck_$t.log" | tail -1)"
  done
fi
if has bench; then
  python3 bench/compare.py "$BUILD" cuda --json "$OUT/bench_cuda.json" 2>"$OUT/bench_stderr.log" | tee "$OUT/bench_cuda.txt"
  python3 bench/compare.py "$BUILD" cpu --json "$OUT/bench_cpu.json" 2>>"$OUT/bench_stderr.log" | tee "$OUT/bench_cpu.txt"
fi
if has train; then
  # DQN on CartPole with the update replayed as a CUDA graph, then the same on the CPU
  for dev in cuda cpu; do
    "$BUILD/agrl" train --device $dev --steps 100000 --seed 0 --quiet --out "$OUT/train_$dev" > "$OUT/train_$dev.txt" 2>&1
    cat "$OUT/train_$dev.txt"
  done
fi
exit $status
