#!/usr/bin/env bash
# Configures and builds agrl into DIR (default build/) with extra CMake args.
# usage: scripts/build.sh [DIR] [cmake args...]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
shift || true
[ -d /usr/local/cuda/bin ] && export PATH=/usr/local/cuda/bin:$PATH
cmake -S . -B "$dir" "$@" >/dev/null
cmake --build "$dir" -j"$(nproc)"
