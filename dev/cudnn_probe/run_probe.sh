#!/usr/bin/env bash
# On the GPU machine, from the repository root: agrl built, then ag_conv2d's
# per-layer times on CUDA (dev/conv_time) and cuDNN's algorithms in the same
# shapes (dev/cudnn_probe), into $OUT (default /tmp/out).
set -u
O=${OUT:-/tmp/out}
mkdir -p "$O"
AGRL_PYTEST=0 AGRL_PY_BENCHES=none bash scripts/gpu_check.sh "$O/x" env build 2>&1 | tail -3
export PATH=/usr/local/cuda/bin:$PATH
D=$PWD/.deps
export LD_LIBRARY_PATH=$D/usr/lib/x86_64-linux-gnu:$D/usr/lib/x86_64-linux-gnu/openblas-pthread
cc -O2 -Iinclude -Idev dev/conv_time/conv_time.c -o build-gpu/conv_time -Lbuild-gpu -lagrl -Wl,-rpath,"$PWD/build-gpu" -lm
build-gpu/conv_time 30 cuda | tee "$O/conv_time.txt"
nvcc -O2 -arch=sm_90 dev/cudnn_probe/cudnn_probe.cu -o build-gpu/cudnn_probe -lcudnn &&
  build-gpu/cudnn_probe 32 15 | tee "$O/cudnn_probe.txt"
