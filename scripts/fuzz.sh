#!/usr/bin/env bash
# Fuzzes what agrl reads from outside: builds the libFuzzer harnesses of
# tests/fuzz with clang, ASan and UBSan into build-fuzz/ (no CUDA), then runs
# each on a copy of its seed corpus (tests/fuzz/corpus/NAME) for its share
# of SECONDS (default 60, all harnesses together: fuzz_load, the one
# harness of every loader, gets it all). Fails on any crash,
# sanitizer finding, leak, input slower than 10 s, single allocation past
# 256 MB or RSS past 2 GB; the input that did it is left in
# build-fuzz/artifacts/NAME/.
# AGRL_FUZZ_BUILD=DIR builds and works in DIR instead of build-fuzz/.
# usage: scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
total=${1:-60}
case "$total" in '' | *[!0-9]* | 0) echo "usage: scripts/fuzz.sh [SECONDS > 0]" >&2; exit 2 ;; esac
scripts/deps.sh
bd=${AGRL_FUZZ_BUILD:-build-fuzz}
cc=$(command -v clang-14 || command -v clang || true)
[ -n "$cc" ] || { echo "fuzz: clang not found (apt-get install clang-14 libclang-rt-14-dev)" >&2; exit 1; }

mkdir -p $bd
{ cmake -S . -B $bd -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DAGRL_FUZZ=ON -DAGRL_CUDA=OFF -DAGRL_TESTS=OFF -DAGRL_WERROR=ON &&
  cmake --build $bd -j"$(nproc)" --target fuzzers; } > $bd/build.log 2>&1 ||
  { tail -40 $bd/build.log >&2; echo "fuzz: the build failed ($bd/build.log)" >&2; exit 1; }

harnesses=()
for src in tests/fuzz/fuzz_*.c; do
  name=$(basename "$src" .c)
  harnesses+=("${name#fuzz_}")
done
per=$((total / ${#harnesses[@]}))
[ "$per" -ge 1 ] || per=1

status=0
for name in "${harnesses[@]}"; do
  bin=$bd/tests/fuzz/fuzz_$name
  work=$bd/corpus/$name          # the fuzzer adds to a copy, never to the seeds
  art=$bd/artifacts/$name
  log=$bd/fuzz_$name.log
  rm -rf "$work" "$art"
  mkdir -p "$work" "$art"
  cp -R "tests/fuzz/corpus/$name/." "$work/"
  echo "== fuzz_$name: ${per} s on $(ls "$work" | wc -l) seeds"
  rc=0
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0:abort_on_error=0 \
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "$bin" -max_total_time="$per" -timeout=10 -malloc_limit_mb=256 -rss_limit_mb=2048 \
      -detect_leaks=1 -max_len=65536 -print_final_stats=1 -artifact_prefix="$art/" \
      "$work" > "$log" 2>&1 || rc=$?
  grep -E "^stat::(number_of_executed_units|peak_rss_mb|new_units_added)" "$log" || true
  if [ "$rc" != 0 ] || ls "$art" | grep -q .; then
    echo "FAIL: fuzz_$name exited with $rc; the input is in $art/, the log in $log:" >&2
    grep -E "ERROR|SUMMARY|runtime error|out-of-memory|timeout|leak|fuzz_$name:" "$log" | head -20 >&2
    status=1
  fi
done
exit "$status"
