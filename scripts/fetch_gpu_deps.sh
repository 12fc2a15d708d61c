#!/usr/bin/env bash
# Unpacks Debian's cmocka and OpenBLAS -dev packages into .deps/ (ignored by
# git) for the GPU machine, which has neither cmocka nor cblas.h, and
# downloads the peers' wheels that machine lacks (CPython 3.12) into .whl/.
# Pass .deps and .whl in the device call's carry list; scripts/gpu_check.sh
# uses them (a missing wheel only makes its peer absent).
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .deps && mkdir -p .deps/debs
(cd .deps/debs && apt-get download libcmocka0 libcmocka-dev libopenblas-dev \
   libopenblas0-pthread libopenblas-pthread-dev)
for f in .deps/debs/*.deb; do dpkg -x "$f" .deps; done
rm -rf .deps/debs .deps/usr/share
find .deps -name '*.a' -delete
find .deps -name 'liblapack*' -delete
du -sh .deps
mkdir -p .whl
for w in cpprb==11.0.0 gymnasium==1.0.0 farama-notifications==0.0.6 cloudpickle==3.1.3 flashbax==0.1.3; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 -d .whl "$w" \
    || echo "fetch_gpu_deps: could not download $w (its peer will be absent)"
done
ls .whl
