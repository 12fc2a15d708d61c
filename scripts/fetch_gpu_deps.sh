#!/usr/bin/env bash
# Unpacks Debian's cmocka and OpenBLAS -dev packages into .deps/ (ignored by
# git) for the GPU machine, which has neither cmocka nor cblas.h. Pass .deps
# in the device call's carry list; scripts/gpu_check.sh uses it.
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
