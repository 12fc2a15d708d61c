#!/usr/bin/env bash
# Runs every test: installs what is missing, checks the formatting, then
#   1. a release build, the layer rule on its object files' symbols
#      (scripts/check_symbols.py, and a check that it fails on an upward
#      reference), the C example, all tests through CTest (CUDA tests skip without a GPU;
#      the vulkan ones run on Mesa's software driver with the validation layer);
#   2. a build with AddressSanitizer + UBSan, all tests again;
#   3. a build without CUDA and Vulkan, its CPU tests under valgrind memcheck (leaks and
#      invalid accesses are errors);
#   4. the libFuzzer harnesses (scripts/fuzz.sh), 75 s in all (15 s each);
#   5. the Python package: pip install . into a virtual environment, its
#      pytest suite and the examples (scripts/python_test.sh,
#      examples/python/quickstart.py); then the suite
#      again with the extension and the library built with ASan + UBSan.
# Tests labelled "slow" run only with AGRL_SLOW=1. Every build is made with
# -DAGRL_WERROR=ON (gcc; clang for the fuzzers): a warning fails the stage.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
echo "== format and layers"
scripts/format.sh --check | tail -3
python3 scripts/check_layers.py --table
# deps.sh installed Mesa's software Vulkan driver: the vulkan tests must run, not skip
export AGRL_REQUIRE_VULKAN="${AGRL_REQUIRE_VULKAN:-1}"
label_args=(-LE 'slow|valgrind')
[ "${AGRL_SLOW:-0}" = 1 ] && label_args=(-LE valgrind)
jobs=$(nproc)

echo "== release build"
scripts/build.sh build -DCMAKE_BUILD_TYPE=Release -DAGRL_WERROR=ON >/dev/null
python3 scripts/check_symbols.py --build build --table
# the symbol check must fail on a listing where base/ calls into core/
cat > build/upward.nm <<'EOF2'
CMakeFiles/agrl_obj.dir/src/core/buffer.c.o:0000000000000000 T ag_buffer_create
CMakeFiles/agrl_obj.dir/src/base/status.c.o:0000000000000000 T ag__fail
CMakeFiles/agrl_obj.dir/src/core/buffer.c.o:                 U ag__fail
CMakeFiles/agrl_obj.dir/src/base/pool.c.o:                 U ag_buffer_create
EOF2
if python3 scripts/check_symbols.py --listing build/upward.nm > build/upward.log; then
  echo "check_symbols.py passed a listing with an upward reference" >&2; exit 1
fi
grep -q "base/ uses ag_buffer_create, defined in core/" build/upward.log ||
  { cat build/upward.log >&2; echo "check_symbols.py did not name the upward reference" >&2; exit 1; }
sed -i '/pool.c.o/d' build/upward.nm   # the same listing without it passes
python3 scripts/check_symbols.py --listing build/upward.nm > build/upward.log ||
  { cat build/upward.log >&2; echo "check_symbols.py failed a listing without upward references" >&2; exit 1; }
echo "check_symbols.py: fails on an upward reference, passes without it"
# the README's examples are examples/c/quickstart.c and examples/python/quickstart.py, word for word
python3 -c 'import sys; r = open("README.md").read(); sys.exit(any(open(f).read() not in r for f in sys.argv[1:]))' \
  examples/c/quickstart.c examples/python/quickstart.py || { echo "README.md: its examples differ from examples/" >&2; exit 1; }
cc -std=c11 -Wall -Wextra -Werror -Iinclude examples/c/quickstart.c -Lbuild -lagrl -Wl,-rpath,"$PWD/build" \
  -o build/quickstart && build/quickstart
ctest --test-dir build -j"$jobs" --output-on-failure -V "${label_args[@]}" > build/ctest.log 2>&1 ||
  { grep -E "\*\*\*|Failed|FAIL|ERROR" build/ctest.log | head -60; exit 1; }
grep -E "tests passed|Skipped" build/ctest.log
python3 scripts/count_tests.py build/ctest.log
scripts/check_exports.sh build

echo "== AddressSanitizer + UBSan"
scripts/build.sh build-asan -DCMAKE_BUILD_TYPE=Debug -DAGRL_SANITIZE=ON -DAGRL_WERROR=ON >/dev/null
# the vulkan runs of the suites that drive the backend directly (the agents'
# long runs on a software Vulkan driver under ASan would take most of CI's time)
asan_vulkan='^(kernels|vulkan_mem|vulkan_nof64|buffer|switch|capture|graph|per|randn|bad_input|export)\.vulkan$'
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan -j"$jobs" --output-on-failure -LE 'slow|valgrind|vulkan'
ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan -j"$jobs" --output-on-failure -L vulkan -LE slow -R "$asan_vulkan"

echo "== valgrind memcheck (CPU tests, in a build without CUDA)"
# portable code: valgrind does not know every vector instruction of this machine
scripts/build.sh build-cpu -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAGRL_CUDA=OFF -DAGRL_VULKAN=OFF -DAGRL_NATIVE=OFF -DAGRL_WERROR=ON >/dev/null
ctest --test-dir build-cpu -j"$jobs" --output-on-failure -L valgrind

echo "== fuzzing (libFuzzer with ASan + UBSan, in build-fuzz)"
scripts/fuzz.sh 75
echo "== Python package (pip install ., pytest)"
scripts/python_test.sh
build/venv/bin/python examples/python/quickstart.py cpu
echo "== Python package under AddressSanitizer + UBSan"
# (without Vulkan: the vulkan cases ran in the suite above, and under ASan in C)
scripts/build.sh build-pyasan -DCMAKE_BUILD_TYPE=Debug -DAGRL_SANITIZE=ON -DAGRL_CUDA=OFF -DAGRL_VULKAN=OFF \
  -DAGRL_PYTHON=ON -DAGRL_TESTS=OFF -DAGRL_WERROR=ON >/dev/null
# the interpreter itself is not built with ASan: its allocations at exit are not this code's leaks
LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)" \
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  PYTHONPATH="$PWD/build-pyasan/python" AGRL_CLI="$PWD/build-pyasan/agrl" AGRL_REQUIRE_VULKAN=0 \
  build/venv/bin/python -m pytest tests/python -q -p no:cacheprovider | tail -2
echo "all test stages passed"
