#!/usr/bin/env bash
# The Python package as a user gets it: `pip install .` into a fresh virtual
# environment (numpy, pytest, gymnasium, mypy, and torch, JAX, TorchRL and
# Stable-Baselines3 for the framework modules, from PyPI), then the pytest suite
# (tests/python; the GPU tests skip without a device; MinAtar 1.0.15 for the
# MinAtar games' reference, MuJoCo 4.0.1 for Gymnasium's MuJoCo tasks, ale-py and OpenCV for Atari) and the Gymnasium
# example for a few thousand steps, all from outside the source tree.
# usage: scripts/python_test.sh [VENV_DIR]   (default build/venv)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
VENV=${1:-$ROOT/build/venv}
rm -rf "$VENV"
if ! python3 -m venv "$VENV" 2>/dev/null; then
  if [ "$(id -u)" != 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get install -y -qq python3-venv >/dev/null
  python3 -m venv "$VENV"
fi
PY=$VENV/bin/python
"$PY" -m pip install -q --upgrade pip
"$PY" -m pip install -q numpy pytest gymnasium mypy==2.4.1  # mypy pinned: a release's new checks could change the verdict
# the reference that agrl's MinAtar games are compared with, step by step (tests/python/test_minatar.py)
"$PY" -m pip install -q "minatar==1.0.15"
# MuJoCo for SAC and TD3 on Gymnasium's MuJoCo tasks (tests/python/test_ac_vector.py), headless
"$PY" -m pip install -q "gymnasium[mujoco]" "mujoco==4.0.1"  # the extra brings imageio, which its MuJoCo tasks import
# Atari for the frame-table DQN (tests/python/test_dqn_frames.py): ale-py (ROMs included) and the
# OpenCV that Gymnasium's AtariPreprocessing resizes with
"$PY" -m pip install -q "ale-py==0.12.1" "opencv-python-headless==5.1.0.95"
# the frameworks agrl hands batches to and the libraries it drops into, at the
# versions of the GPU machine (torch 2.11, TorchRL 0.13.3 with tensordict
# 0.13.0, Stable-Baselines3 2.9.2) and JAX's newest for this Python, all on the
# CPU here: agrl.torch, agrl.jax, agrl.sb3 and agrl.torchrl are tested against
# them
"$PY" -m pip install -q "torch==2.11.0" "stable-baselines3==2.9.2" "tensordict==0.13.0" "torchrl==0.13.3" \
  "jax[cpu]==0.10.2"
echo "-- pip install ."
"$PY" -m pip install -C build-dir="$ROOT/build/py-wheel" "$ROOT" 2>&1 | tail -2
cd /tmp
"$PY" -c 'import agrl; print("agrl", agrl.__version__, "(" + agrl.library_version() + "), numpy only:", sorted(m for m in __import__("sys").modules if m in ("torch", "jax", "cupy")) == [])'
PATH=$VENV/bin:$PATH "$PY" -m pytest "$ROOT/tests/python" -q -p no:cacheprovider -rs
echo "-- examples/python/train_gymnasium.py (3000 steps)"
if [ -f "$ROOT/examples/python/train_gymnasium.py" ]; then
  "$PY" "$ROOT/examples/python/train_gymnasium.py" --steps 3000 | tail -2
fi
echo "-- mypy: the extension's stub, and --strict on the package, the examples and tests/typing"
# (mypy reads the frameworks installed above for agrl.torch, agrl.jax,
# agrl.sb3, agrl.torchrl and the code using them)
export MYPY_CACHE_DIR=$VENV/mypy-cache
"$PY" -m mypy.stubtest agrl._agrl
"$PY" -m mypy --strict -p agrl
"$PY" -m mypy --strict "$ROOT/examples/python" "$ROOT/tests/typing/api_usage.py"
