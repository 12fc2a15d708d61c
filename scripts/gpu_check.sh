#!/usr/bin/env bash
# On a machine with a GPU: builds agrl with CUDA for sm_90, runs every test
# (a GPU test that would skip fails here: AGRL_REQUIRE_GPU=1), the DQN
# acceptance on the GPU beside a PyTorch DQN, the benchmarks beside their
# peers, and the CUDA tests under compute-sanitizer.
# usage: scripts/gpu_check.sh OUTDIR [step ...]
#   steps: env build test python train bench sanitize dist cpubench memcheck accept sweep vkbench door (default:
#   all but cpubench, memcheck, accept, sweep and vkbench; memcheck: a few tests of sanitize's memcheck;
#   accept: learning rows of scripts/accept.sh (on AGRL_ACCEPT_DEVICE, default cuda); sweep: dev/sweep.sh;
#   vkbench: the Vulkan rows beside the CUDA ones and PyTorch eager; vktest: the vulkan tests alone
#   (AGRL_VKTEST_REGEX: those matching); vkprobe: dev/vk_latency.c;
#   dist: the several-GPU tests, DQN acceptance and scaling, on every GPU present;
#   python: AGRL_PYTEST=0 runs no tests, AGRL_PYTEST_K=EXPR those -k EXPR selects,
#   AGRL_PY_MEMCHECK=0 leaves out the tests under compute-sanitizer;
#   door: after python, the Python door's rows beside their peers (bench_replay.py --only door,...),
#   and the thread and door tests on CUDA under compute-sanitizer;
#   peers: SB3's DQN and SAC trained with SB3's buffer and agrl's (bench_sb3.py, one process a
#   seed and algorithm, side by side: AGRL_SB3_SEEDS, AGRL_SB3_STEPS_DQN, AGRL_SB3_STEPS_SAC), and
#   TorchRL's SAC step with its storage and agrl's (bench_torchrl.py))
# Everything lands in OUTDIR/results.tgz, packed again after each step so a
# run cut short still brings back what it did. Expects .deps/
# (scripts/fetch_gpu_deps.sh) where cmocka and cblas.h are missing, and
# .whl/ (scripts/fetch_gpu_deps.sh: the peers' wheels, and scikit-build-core
# and pytest for the Python package, which is built there with no network).
set -u
FINAL=${1:?usage: gpu_check.sh OUTDIR [steps]}
shift
STEPS=${*:-env build test python train bench sanitize dist}
cd "$(dirname "$0")/.."
ROOT=$(pwd)
OUT=$(mktemp -d /tmp/agrl_gpu.XXXXXX)
pack() { mkdir -p "$FINAL"; tar czf "$FINAL/results.tgz" -C "$OUT" . 2>/dev/null; }
trap pack EXIT
DEPS=$ROOT/.deps
BUILD=$ROOT/build-gpu
export PATH=/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=$DEPS/usr/lib/x86_64-linux-gnu:$DEPS/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
# Vulkan: the loader, headers, glslc and validation layer from .deps (packed),
# over NVIDIA's ICD, wherever the driver put its manifest
VKDEPS=/tmp/agrl_vkdeps
VK_CMAKE=()
VK_PIP=()
if [ -f "$DEPS/vulkan.tar.xz" ]; then
  mkdir -p "$VKDEPS" && tar -xJf "$DEPS/vulkan.tar.xz" -C "$VKDEPS"
  export PATH=$VKDEPS/usr/bin:$PATH
  export LD_LIBRARY_PATH=$VKDEPS/usr/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH
  export VK_ADD_LAYER_PATH=$VKDEPS/usr/share/vulkan/explicit_layer.d
  VK_CMAKE=(-DVulkan_INCLUDE_DIR="$VKDEPS/usr/include" -DVulkan_LIBRARY="$VKDEPS/usr/lib/x86_64-linux-gnu/libvulkan.so.1"
            -DGLSLC="$VKDEPS/usr/bin/glslc")
  VK_PIP=(-C cmake.define.Vulkan_INCLUDE_DIR="$VKDEPS/usr/include"
          -C cmake.define.Vulkan_LIBRARY="$VKDEPS/usr/lib/x86_64-linux-gnu/libvulkan.so.1"
          -C cmake.define.GLSLC="$VKDEPS/usr/bin/glslc")
fi
# NVIDIA's Vulkan driver lives in libGLX_nvidia, which needs GLVND's
# dispatch libraries: Debian's, unpacked into / when the machine lacks them
if ls "$DEPS"/gl/*.deb >/dev/null 2>&1 && ! ldconfig -p | grep -q libGLdispatch; then
  for f in "$DEPS"/gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
if [ -z "${VK_DRIVER_FILES:-}" ]; then
  for icd in /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json \
             /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; do
    [ -f "$icd" ] && { export VK_DRIVER_FILES=$icd; break; }
  done
fi
export NCCL_NVLS_ENABLE=0 # NVLink multicast stays off on shared machines
# NCCL: the CUDA toolkit's, else the one PyTorch's wheel brings
NCCL_ROOT=
if [ ! -f /usr/local/cuda/include/nccl.h ]; then
  NCCL_ROOT=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null)
  [ -n "$NCCL_ROOT" ] && export LD_LIBRARY_PATH=$NCCL_ROOT/lib:$LD_LIBRARY_PATH
fi
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
status=0
has() { case " $STEPS " in *" $1 "*) return 0;; esac; return 1; }
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }

if has env; then
  { date; nvidia-smi -L; nvcc --version | tail -1; cmake --version | head -1; nproc; grep -m1 "model name" /proc/cpuinfo;
    python3 -c 'import torch, jax; print("torch", torch.__version__, "jax", jax.__version__)'; } > "$OUT/env.txt" 2>&1
  cat "$OUT/env.txt"
fi
if has build; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DAGRL_DEPS_PREFIX="$DEPS" ${NCCL_ROOT:+-DNCCL_ROOT="$NCCL_ROOT"} "${VK_CMAKE[@]}" > "$OUT/build.log" 2>&1 &&
  cmake --build "$BUILD" -j"$(nproc)" >> "$OUT/build.log" 2>&1 || { echo "BUILD FAILED"; tail -40 "$OUT/build.log"; exit 1; }
  grep -E 'agrl: (CUDA|NCCL|Vulkan)' "$OUT/build.log"
  stamp "build ok"
fi
if has test; then
  # dist_mp takes most of every GPU's memory: it runs alone, in the dist step
  AGRL_REQUIRE_GPU=1 AGRL_REQUIRE_VULKAN=${AGRL_REQUIRE_VULKAN:-1} ctest --test-dir "$BUILD" -j4 -V -LE 'slow|valgrind' -E dist_mp > "$OUT/ctest.log" 2>&1 || status=1
  grep -E "tests passed|tests failed|\*\*\*Failed" "$OUT/ctest.log" | tail -25
  # the vulkan run of the resume test (slow on a software driver, not here)
  AGRL_REQUIRE_VULKAN=${AGRL_REQUIRE_VULKAN:-1} ctest --test-dir "$BUILD" -V -R '^cli_resume\.vulkan$' > "$OUT/ctest_vulkan_slow.log" 2>&1 || status=1
  grep -E "tests passed|tests failed|FAIL" "$OUT/ctest_vulkan_slow.log" | tail -3
  python3 scripts/count_tests.py "$OUT/ctest.log" | tee "$OUT/test_counts.txt"
  grep -E '(^|: )faults(\.cuda|\.cpu)?:' "$OUT/ctest.log" | tee "$OUT/fault_sweep.txt"
  stamp "tests done"; pack
  # the soak on the GPU, shortened (AGRL_SLOW=1 make test runs the whole one on the CPU);
  # AGRL_GPU_SOAK=0 leaves it out
  [ "${AGRL_GPU_SOAK:-1}" = 0 ] || AGRL_SOAK_ADDS=2000000 AGRL_SOAK_SAMPLES=200000 timeout 300 "$BUILD/tests/test_soak" cuda > "$OUT/soak_cuda.log" 2>&1 || status=1
  grep -E '^soak: RSS|PASSED|FAILED' "$OUT/soak_cuda.log"
  stamp "soak done"; pack
fi
# the Python benchmarks and example the python step runs: AGRL_PY_BENCHES (default all)
pybench() { case " ${AGRL_PY_BENCHES:-replay checkpoint train ac example} " in *" $1 "*) return 0;; esac; return 1; }
if has python; then
  # the package as a user installs it (pip install ., no network: the build
  # backend comes from .whl), then its tests with GPU skips turned into
  # failures, the lifetime tests under compute-sanitizer, and the benchmarks
  PYINC=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
  echo "$(python3 -V 2>&1), headers in $PYINC: $([ -f "$PYINC/Python.h" ] && echo present || echo MISSING)" | tee "$OUT/python_env.txt"
  python3 -m pip install --no-build-isolation --no-deps --no-index --no-cache-dir --upgrade --target /tmp/agrlpy \
    -C cmake.define.AGRL_DEPS_PREFIX="$DEPS" -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 \
    ${NCCL_ROOT:+-C cmake.define.NCCL_ROOT="$NCCL_ROOT"} "${VK_PIP[@]}" -C build-dir="$ROOT/build-gpu-py" . > "$OUT/pip_install.log" 2>&1 \
    || { echo "PIP INSTALL FAILED"; tail -30 "$OUT/pip_install.log"; status=1; }
  tail -2 "$OUT/pip_install.log"
  export PYTHONPATH=/tmp/agrlpy${PYTHONPATH:+:$PYTHONPATH} AGRL_CLI=/tmp/agrlpy/bin/agrl
  python3 -c 'import agrl; print("agrl", agrl.__version__, agrl.library_version(), "cuda devices:", agrl.cuda_device_count(), "vulkan devices:", agrl.vulkan_device_count())'
  # AGRL_PYTEST=0: the package's benchmarks only, without its tests
  if [ "${AGRL_PYTEST:-1}" != 0 ]; then
  # AGRL_PYTEST_K: only the tests pytest's -k expression selects
  AGRL_REQUIRE_GPU=1 AGRL_REQUIRE_VULKAN=${AGRL_REQUIRE_VULKAN:-1} timeout "${AGRL_PYTEST_TIMEOUT:-420}" python3 -m pytest tests/python -q -rs \
    -p no:cacheprovider ${AGRL_PYTEST_K:+-k "$AGRL_PYTEST_K"} > "$OUT/pytest_gpu.log" 2>&1 || status=1
  tail -4 "$OUT/pytest_gpu.log"
  stamp "pytest done"; pack
  # AGRL_PY_MEMCHECK=0 leaves the lifetime tests under compute-sanitizer out
  if [ "${AGRL_PY_MEMCHECK:-1}" != 0 ]; then
    AGRL_REQUIRE_GPU=1 timeout 300 compute-sanitizer --tool memcheck --error-exitcode 3 --target-processes all \
      python3 -m pytest tests/python/test_gpu_dlpack.py -q -p no:cacheprovider -k "outlive or interpreter_exit or consumer_stream" \
      > "$OUT/memcheck_python.log" 2>&1
    echo "memcheck python (lifetime, exit, streams): rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/memcheck_python.log" | tail -1)"
    stamp "python memcheck done"; pack
  fi
  fi
  if [ -f bench/python/bench_replay.py ] && pybench replay; then
    timeout 300 python3 bench/python/bench_replay.py --device cuda --cli "$BUILD/agrl" --json "$OUT/bench_python.json" \
      2>"$OUT/bench_python.err" | tee "$OUT/bench_python.txt"
    stamp "python bench done"; pack
  fi
  if [ -f bench/python/bench_checkpoint.py ] && pybench checkpoint; then
    timeout 240 python3 bench/python/bench_checkpoint.py --device cuda --json "$OUT/bench_python_checkpoint.json" \
      2>"$OUT/bench_python_checkpoint.err" | tee "$OUT/bench_python_checkpoint.txt"
    stamp "python checkpoint bench done"; pack
  fi
  if [ -f bench/python/bench_train.py ] && pybench train; then
    timeout 240 python3 bench/python/bench_train.py --device cuda --json "$OUT/bench_python_train.json" \
      2>"$OUT/bench_python_train.err" | tee "$OUT/bench_python_train.txt"
    stamp "python train bench done"; pack
  fi
  if [ -f bench/python/bench_ac.py ] && pybench ac; then
    # SAC/TD3 updates beside torch (eager, CUDA graph) and JAX (jit, scan), and SAC's training rate
    # AGRL_AC_BENCH_FLAGS: other flags (default: 10,000 training steps, 90 s a child)
    timeout 400 python3 bench/python/bench_ac.py --device cuda --cli "$BUILD/agrl" ${AGRL_AC_BENCH_FLAGS:---steps 10000 --timeout 90} \
      --json "$OUT/bench_python_ac.json" 2>"$OUT/bench_python_ac.err" | tee "$OUT/bench_python_ac.txt"
    stamp "python ac bench done"; pack
  fi
  if [ -f examples/python/dqn_torch.py ] && pybench example; then
    timeout 120 python3 examples/python/dqn_torch.py --device cuda --steps 20000 > "$OUT/example_dqn_torch.txt" 2>&1
    echo "examples/python/dqn_torch.py: rc=$? $(tail -1 "$OUT/example_dqn_torch.txt")"
  fi
fi
if has door; then
  # the batch as torch, CuPy and JAX hold it, beside the peers, with the C rows of the same work
  timeout 420 python3 bench/python/bench_replay.py --device cuda --cli "$BUILD/agrl" \
    --only "${AGRL_DOOR_ROWS:-sample,add_1,per,door}" --json "$OUT/bench_door.json" \
    2>"$OUT/bench_door.err" | tee "$OUT/bench_door.txt"
  stamp "door bench done"; pack
  timeout 300 compute-sanitizer --tool memcheck --error-exitcode 3 --target-processes all \
    python3 -m pytest tests/python/test_threads.py tests/python/test_door.py -q -p no:cacheprovider -k "cuda or thread" \
    > "$OUT/memcheck_threads.log" 2>&1
  echo "memcheck python (threads, door on cuda): rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/memcheck_threads.log" | tail -1) $(tail -1 "$OUT/memcheck_threads.log")"
  stamp "door done"; pack
fi
if has peers; then
  for algo in dqn sac; do
    steps=$([ $algo = dqn ] && echo "${AGRL_SB3_STEPS_DQN:-50000}" || echo "${AGRL_SB3_STEPS_SAC:-20000}")
    for seed in ${AGRL_SB3_SEEDS:-0 1 2}; do
      timeout "${AGRL_SB3_TIMEOUT:-400}" python3 bench/python/bench_sb3.py --device cuda --algos $algo --seeds $seed \
        --steps "$steps" --threads 1 --no-micro --json "$OUT/sb3_${algo}_$seed.json" > "$OUT/sb3_${algo}_$seed.txt" 2>&1 &
    done
  done
  timeout 300 python3 bench/python/bench_torchrl.py --device cuda --json "$OUT/bench_torchrl.json" \
    > "$OUT/bench_torchrl.txt" 2>&1
  tail -12 "$OUT/bench_torchrl.txt"
  wait
  for f in "$OUT"/sb3_*.txt; do echo "== $f"; tail -4 "$f"; done
  stamp "peers done"; pack
fi
if has train; then
  # acceptance on the GPU (the update replayed as a CUDA graph), then the same
  # 20k steps with agrl and with a PyTorch DQN of the same hyper-parameters
  timeout 150 scripts/accept_dqn.sh "$BUILD/agrl" cuda "$OUT/accept_cuda" | tee "$OUT/accept_cuda.txt"
  rm -f "$OUT"/accept_cuda/*/q_network.agrl
  "$BUILD/agrl" train --device cuda --steps 20000 --stop-at none --quiet --out "$OUT/rate_agrl_cuda" > "$OUT/rate_agrl_cuda.txt" 2>&1
  grep -o '"steps_per_s": [0-9.]*' "$OUT/rate_agrl_cuda/summary.json" | sed 's/^/agrl cuda 20k: /'
  timeout 60 python3 bench/peers/torch_dqn_train.py --device cuda --total-steps 20000 > "$OUT/rate_torch_cuda.txt" 2>"$OUT/rate_torch_cuda.err"
  tail -1 "$OUT/rate_torch_cuda.txt"
  stamp "train done"; pack
fi
if has accept; then
  # the learning rows on the GPU: AGRL_ACCEPT_ROWS (scripts/accept.sh's rows)
  # on AGRL_ACCEPT_SEEDS, AGRL_ACCEPT_JOBS runs at a time; the runs' networks
  # are left out of what comes back
  for row in ${AGRL_ACCEPT_ROWS:-sac-pendulum td3-pendulum}; do
    timeout "${AGRL_ACCEPT_TIMEOUT:-280}" scripts/accept.sh "$BUILD/agrl" "${AGRL_ACCEPT_DEVICE:-cuda}" "$row" --seeds "${AGRL_ACCEPT_SEEDS:-100-119}" \
      --jobs "${AGRL_ACCEPT_JOBS:-10}" --out "$OUT/accept" -- ${AGRL_ACCEPT_FLAGS:-} > "$OUT/accept_$row.txt" 2>&1
    tail -3 "$OUT/accept_$row.txt"
    find "$OUT/accept" -name '*.agrl' -delete
    stamp "accept $row done"; pack
  done
fi
if has sweep; then
  # a tuning sweep (dev/sweep.sh): AGRL_SWEEP_ROW on AGRL_SWEEP_SEEDS, the
  # flag sets of AGRL_SWEEP separated by '|'
  IFS='|' read -r -a sets <<<"${AGRL_SWEEP:-}"
  timeout "${AGRL_SWEEP_TIMEOUT:-400}" dev/sweep.sh "$BUILD/agrl" cuda "${AGRL_SWEEP_ROW:-dqn-cartpole}" \
    "${AGRL_SWEEP_SEEDS:-0-9}" "${AGRL_SWEEP_JOBS:-12}" "$OUT/sweep" "${sets[@]}" > "$OUT/sweep.txt" 2>&1
  cat "$OUT/sweep.txt"
  find "$OUT/sweep" -name '*.agrl' -delete
  stamp "sweep done"; pack
fi
if has bench; then
  timeout 190 python3 bench/compare.py "$BUILD" cuda --json "$OUT/bench_cuda.json" 2>"$OUT/bench_stderr.log" | tee "$OUT/bench_cuda.txt"
  stamp "bench done"; pack
fi
if has vktest; then
  # the vulkan runs alone (the test step runs them among the rest), the slow resume test with them
  AGRL_REQUIRE_VULKAN=1 timeout "${AGRL_VKTEST_TIMEOUT:-400}" ctest --test-dir "$BUILD" -j4 -V -L vulkan -LE valgrind -E '^soak\.' \
    -R "${AGRL_VKTEST_REGEX:-.}" \
    > "$OUT/ctest_vulkan.log" 2>&1 || status=1
  grep -E "tests passed|tests failed|\*\*\*Failed|validation layer" "$OUT/ctest_vulkan.log" | sort | uniq -c | tail -25
  stamp "vulkan tests done"; pack
fi
if has vkprobe && [ -f dev/vk_latency.c ]; then
  # a submit's and a fence's round trip on the driver (the fixed cost of a waited-for write)
  cc -O2 dev/vk_latency.c -o "$OUT/vk_latency" ${VK_CMAKE:+-I"$VKDEPS/usr/include" -L"$VKDEPS/usr/lib/x86_64-linux-gnu"} -l:libvulkan.so.1 \
    && timeout 60 "$OUT/vk_latency" | tee "$OUT/vk_latency.txt"
  rm -f "$OUT/vk_latency"
  if [ -f dev/vk_write_probe.c ]; then
    cc -O2 dev/vk_write_probe.c -Iinclude -I"$BUILD/include" "$BUILD/libagrl.so" -Wl,-rpath,"$BUILD" -o "$OUT/wp" \
      && for a in "vulkan 100000 1000" "vulkan 1000000 1000" "vulkan 1000000 1000000" "vulkan 100000 100000" "cuda 1000000 1000000"; do timeout 30 "$OUT/wp" $a; done | tee "$OUT/vk_write_probe.txt"
    rm -f "$OUT/wp"
  fi
fi
if has vkbench; then
  # the Vulkan rows beside the CUDA backend's and PyTorch eager's, one invocation
  timeout 300 python3 bench/compare.py "$BUILD" vulkan --json "$OUT/bench_vulkan.json" 2>>"$OUT/bench_stderr.log" | tee "$OUT/bench_vulkan.txt"
  stamp "vulkan bench done"; pack
fi
if has cpubench; then
  # the CPU rows on this machine's processor, beside numpy, cpprb and PyTorch (one thread).
  # agrl chooses OpenBLAS's kernels from the processor's feature flags; the peers' own
  # OpenBLAS (numpy's wheel) chooses from the model, which a virtual machine may hide (then
  # its oldest kernels): they are given the kernels agrl chose, so both sides run the same
  name=$("$BUILD/agrl" bench --device cpu --filter cpu_add_1 --iters 3 2>&1 | grep -o 'cpu (OpenBLAS [^)]*)' | head -1)
  core=$(echo "$name" | grep -o 'OpenBLAS [A-Za-z0-9]*' | cut -d' ' -f2)
  [ -z "${OPENBLAS_CORETYPE:-}" ] && [ -n "$core" ] && export OPENBLAS_CORETYPE=$core
  echo "CPU rows: $name, OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}" | tee "$OUT/cpu_blas.txt"
  timeout 200 python3 bench/compare.py "$BUILD" cpu --json "$OUT/bench_cpu.json" 2>>"$OUT/bench_stderr.log" | tee "$OUT/bench_cpu.txt"
  stamp "cpu bench done"; pack
fi
if has dist; then
  NG=$(nvidia-smi -L | grep -c GPU)
  if [ "$NG" -ge 2 ]; then
    AGRL_REQUIRE_GPUS=$NG timeout 300 "$BUILD/tests/test_dist_mp" cuda "$NG" > "$OUT/dist_mp.log" 2>&1
    echo "dist_mp ($NG GPUs): rc=$?"; grep -E '^\[  (PASSED|FAILED)|FAILED|ERROR|rank [0-9]: a table' "$OUT/dist_mp.log" | head -20
    [ "$(grep -c 'PASSED  \] 8 test' "$OUT/dist_mp.log")" -eq "$NG" ] || status=1
    stamp "dist tests done"; pack
    timeout 200 scripts/bench_dist.sh "$BUILD/agrl" "$NG" 2>&1 | tee "$OUT/bench_dist.txt"
    stamp "dist bench done"; pack
    timeout 480 scripts/accept_dqn_dist.sh "$BUILD/agrl" "$NG" "$OUT/accept_dist" 2>&1 | tee "$OUT/accept_dist.txt"
    rm -rf "$OUT"/accept_dist/*/episodes.csv
    stamp "dist acceptance done"; pack
  else
    echo "dist: one GPU here; the several-GPU step needs two or more"
  fi
fi
if has memcheck; then
  # the memcheck of a few tests only (AGRL_MEMCHECK, default the newest kernels' callers)
  for t in ${AGRL_MEMCHECK:-nstep dqn_per per}; do
    timeout 120 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 3 \
      "$BUILD/tests/test_$t" cuda > "$OUT/memcheck_$t.log" 2>&1
    echo "memcheck $t: rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/memcheck_$t.log" | tail -1)"
  done
  pack
fi
if has sanitize; then
  for t in per buffer capture dist agent export kernels nstep dqn_per; do
    f=; [ "$t" = agent ] && f='dqn_*_matches_*' # the fused update and the loss (not the 12k-step run)
    timeout 90 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 3 \
      "$BUILD/tests/test_$t" cuda $f > "$OUT/memcheck_$t.log" 2>&1
    echo "memcheck $t: rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/memcheck_$t.log" | tail -1)"
  done
  # calls that fail change nothing, and the fault sweep (the device switch's
  # sites included), every 16th occurrence under the sanitizer
  timeout 120 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 3 \
    "$BUILD/tests/test_atomic" cuda > "$OUT/memcheck_atomic.log" 2>&1
  echo "memcheck atomic: rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/memcheck_atomic.log" | tail -1)"
  AGRL_FAULT_STRIDE=16 timeout 240 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 3 \
    "$BUILD/tests/test_faults" cuda > "$OUT/memcheck_faults.log" 2>&1
  echo "memcheck faults: rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/memcheck_faults.log" | tail -1)"
  grep -E '^faults' "$OUT/memcheck_faults.log"
  pack
  # the fused update's shared-memory traffic
  timeout 180 compute-sanitizer --tool racecheck --error-exitcode 3 "$BUILD/tests/test_agent" cuda 'dqn_fused*' \
    > "$OUT/racecheck_agent.log" 2>&1
  echo "racecheck agent (fused update): rc=$? $(grep -E 'RACECHECK SUMMARY' "$OUT/racecheck_agent.log" | tail -1)"
  stamp "sanitize done"
fi
exit $status
