"""Shared helpers for the peer benchmark scripts in bench/peers/.

Every peer script prints JSON lines on stdout, one object a line, flushed
after each, in one of three forms:

  a timed row   {"impl": I, "work": W, "us": median, "min": lo, "max": hi, "note": N}
  an absent     {"impl": I, "absent": "why"}          (a package or device missing)
  a check       {"impl": I, "check": C, "value": V, ...}  (information, no "work" key)

Timing is the same as agrl's bench/bench.h: a row runs its body `iters` times
(calls pipelined, as a training loop issues them), then waits for the device
once; the time per call is the wall time over `iters`. Two warm-up
repetitions, then nine timed ones; the median, min and max are reported.
"""
import json
import math
import os
import sys
import time

REPS = 9     # timed repetitions of a row
WARMUP = 2   # untimed repetitions before them


def emit(obj):
    """Prints one JSON object on its own line and flushes stdout."""
    print(json.dumps(obj), flush=True)


def absent(impls, why):
    """Says that an implementation (or each of a list of them) cannot run
    here; the caller then skips it. Absent lines carry no "work" key: name
    the work in `why` when only one row is missing."""
    for impl in ([impls] if isinstance(impls, str) else impls):
        emit({"impl": impl, "absent": why})


def check(impl, name, value, **extra):
    """An informational line (no "work" key, so no table takes it for a row)."""
    emit({"impl": impl, "check": name, "value": value, **extra})


def summarize(vals):
    """Median (mean of the middle two when even, as bench.h), min and max."""
    v = sorted(vals)
    n = len(v)
    med = v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])
    return med, v[0], v[-1]


def measure(body, iters, sync, reps=REPS, warmup=WARMUP, per_call=1):
    """Times `body`: `iters` calls, then one `sync(last result)`.

    body(i) is called with the iteration number and may return a value;
    sync receives the value of the last call (JAX's block_until_ready needs
    it; torch.cuda.synchronize ignores it). `per_call` divides the time
    further when one call does several units of work (a fused loop).
    Returns (median, min, max) in microseconds per unit.
    """
    vals = []
    for r in range(-warmup, reps):
        t0 = time.perf_counter()
        out = None
        for i in range(iters):
            out = body(i)
        sync(out)
        dt = time.perf_counter() - t0
        if r >= 0:
            vals.append(dt * 1e6 / (iters * per_call))
    return summarize(vals)


def auto_iters(body, sync, target_s=0.2, lo=1, hi=20000):
    """Chooses `iters` so that one repetition lasts about `target_s` seconds:
    times one call, then a few, and scales (the calls double as warm-up)."""
    sync(body(0))
    n, dt = 1, 0.0
    while True:
        t0 = time.perf_counter()
        out = None
        for i in range(n):
            out = body(i)
        sync(out)
        dt = time.perf_counter() - t0
        if dt > 0.02 or n >= hi:
            break
        n *= 4
    return int(max(lo, min(hi, round(target_s * n / max(dt, 1e-9)))))


def row(impl, work, stats, note="", **extra):
    """Prints one timed row."""
    med, lo, hi = stats
    emit({"impl": impl, "work": work, "us": round(med, 3), "min": round(lo, 3),
          "max": round(hi, 3), "note": note, **extra})


def device_arg(argv=None, default="cuda"):
    """The device named on the command line: the first of 'cpu'/'cuda' found
    among the arguments (alone or as --device X), else `default`."""
    argv = sys.argv[1:] if argv is None else argv
    for i, a in enumerate(argv):
        if a in ("cpu", "cuda"):
            return a
        if a == "--device" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--device="):
            return a.split("=", 1)[1]
    return default


def finite(x):
    """True when the float x is neither NaN nor infinite."""
    return math.isfinite(float(x))


# ------------------------------------------------------------ DQN definition
# Shared by torch_dqn.py and jax_dqn.py (see README.md): a replay buffer of
# CAPACITY transitions, one transition a row of `rows` f32, fields at fixed
# columns; the action index is stored as a float at column `act`.

CAPACITY = 1_000_000
GAMMA = 0.99
LR, BETAS, EPS = 1e-3, (0.9, 0.999), 1e-8
DONE_P = 0.05  # P(done = 1) in the synthetic buffer

DQN_SHAPES = {
    # cartpole: obs[0:4], action[4], reward[5], next_obs[6:10], done[10]
    "4_128_128_2_b128": dict(rows=11, obs=(0, 4), act=4, rew=5, nobs=(6, 10), done=10,
                             sizes=(4, 128, 128, 2), batch=128),
    # mujoco: obs[0:17], action[17:23] (index at 17), reward[23], next_obs[24:41], done[41]
    "17_256_256_6_b256": dict(rows=42, obs=(0, 17), act=17, rew=23, nobs=(24, 41), done=41,
                              sizes=(17, 256, 256, 6), batch=256),
}


def dqn_work(shape):
    """The work name of a DQN update row for a shape key of DQN_SHAPES."""
    return "dqn_update_" + shape


# ---------------------------------------------------------------- torch side

def import_torch(impl, dev):
    """Imports torch and checks the device; prints an absent line and returns
    None when either is missing, else returns the torch module."""
    try:
        import torch
    except Exception as e:  # ImportError, or a broken install
        absent(impl, f"torch does not import: {type(e).__name__}: {e}")
        return None
    if dev == "cuda" and not torch.cuda.is_available():
        absent(impl, "no CUDA device for torch")
        return None
    return torch


def torch_sync(torch, dev):
    """A sync(last) function for measure(): waits for the CUDA stream."""
    if dev == "cuda":
        return lambda _last=None: torch.cuda.synchronize()
    return lambda _last=None: None


# ------------------------------------------------------------------ JAX side

def import_jax(impl, dev):
    """Imports JAX for the device ('cpu' or 'cuda') and returns (jax, device)
    or (None, None) after printing an absent line.

    For 'cpu' the CPU platform is forced before the import (no GPU is
    initialised); GPU memory is allocated on demand, not preallocated, so
    that agrl and the other peers run beside it in the same invocation
    (set XLA_PYTHON_CLIENT_PREALLOCATE yourself to change it).
    """
    if dev == "cpu":
        os.environ["JAX_PLATFORMS"] = "cpu"
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    try:
        import jax
    except Exception as e:
        absent(impl, f"jax does not import: {type(e).__name__}: {e}")
        return None, None
    try:
        device = jax.devices("cpu" if dev == "cpu" else "gpu")[0]
    except Exception as e:
        absent(impl, f"no {dev} device for jax: {type(e).__name__}: {e}")
        return None, None
    return jax, device


def jax_sync(last):
    """A sync(last) function for measure(): blocks on the last result."""
    import jax
    jax.block_until_ready(last)


def make_mlp(torch, sizes, device):
    """Linear-ReLU-...-Linear with PyTorch's default initialisation."""
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers).to(device)
