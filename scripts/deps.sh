#!/usr/bin/env bash
# Installs what building and testing agrl needs on Debian/Ubuntu, when it is
# missing: a C compiler, CMake, cmocka, OpenBLAS (with cblas.h), valgrind,
# Python with matplotlib for the learning curves, clang-format for the
# format check, and clang with its
# libFuzzer and sanitizer runtimes for the fuzzing stage (scripts/fuzz.sh),
# and Vulkan: its loader and headers, glslc for the shaders, Mesa's
# software driver (lavapipe, so that the vulkan tests run on any machine)
# and the Khronos validation layer the tests turn on.
# The CUDA toolkit is used when present (nvcc on PATH or /usr/local/cuda).
set -euo pipefail
need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for p in build-essential cmake pkg-config libcmocka-dev libopenblas-dev zlib1g-dev valgrind python3 python3-dev python3-venv python3-matplotlib \
         clang-14 clang-format-14 libclang-rt-14-dev libvulkan-dev glslc mesa-vulkan-drivers vulkan-validationlayers; do
  have_pkg "$p" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then SUDO=sudo; else SUDO=; fi
  echo "installing: ${need[*]}"
  $SUDO apt-get update -qq
  # libclang-rt-14-dev is Debian 12's (and Ubuntu 23.04's) package of the
  # runtimes; earlier releases ship them inside clang-14's dependencies
  if ! apt-cache show libclang-rt-14-dev >/dev/null 2>&1; then
    kept=()
    for p in "${need[@]}"; do [ "$p" = libclang-rt-14-dev ] || kept+=("$p"); done
    need=("${kept[@]}")
  fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
# the learning curves need matplotlib in the python3 on PATH (or the system's)
if ! python3 -c 'import matplotlib' 2>/dev/null && ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  python3 -m pip install -q matplotlib || echo "deps: matplotlib could not be installed; curves will not be drawn"
fi
