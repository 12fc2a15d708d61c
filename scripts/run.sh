#!/usr/bin/env bash
# The main job: installs what is missing, builds agrl, runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh build -DCMAKE_BUILD_TYPE=Release >/dev/null
./build/agrl demo "$@"
