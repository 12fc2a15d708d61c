"""JAX peer for the GPU sample + gather row (see README.md for the definition).

usage: python3 bench/peers/jax_replay.py [cpu|cuda]

Rows (impl: work):
  jax_jit  sample_gather_mujoco_b256: one jitted call draws 256 indices
           with jax.random.randint (the key split inside, as a training
           loop carries it) and takes those rows of a (1M, 42) f32 buffer

Compiled before timing (in the check), never inside a timed repetition.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peerlib as pl  # noqa: E402

CAP = pl.CAPACITY
B = 256
ROWS = 42


def main():
    dev = pl.device_arg()
    jax, device = pl.import_jax("jax_jit", dev)
    if jax is None:
        return
    jnp = jax.numpy
    import numpy as np

    buf = jax.device_put(jnp.arange(CAP * ROWS, dtype=jnp.float32).reshape(CAP, ROWS) / ROWS, device)

    @jax.jit
    def sample(key, buf):
        key, sub = jax.random.split(key)
        idx = jax.random.randint(sub, (B,), 0, CAP)
        return key, jnp.take(buf, idx, axis=0), idx

    # Check: the rows returned are the buffer's rows at the indices drawn.
    key = jax.device_put(jax.random.PRNGKey(0), device)
    _, rows, idx = sample(key, buf)
    idx = np.asarray(idx)
    want = (idx[:, None] * ROWS + np.arange(ROWS)[None, :]).astype(np.float32) / ROWS
    if rows.shape != (B, ROWS) or idx.min() < 0 or idx.max() >= CAP or \
            not np.allclose(np.asarray(rows), want, rtol=1e-6):
        pl.absent("jax_jit", "sample_gather_mujoco_b256: check failed")
        return

    state = {"key": key}

    def body(i):
        state["key"], out, _ = sample(state["key"], buf)
        return out

    iters = pl.auto_iters(body, pl.jax_sync)
    pl.row("jax_jit", "sample_gather_mujoco_b256", pl.measure(body, iters, pl.jax_sync),
           "jax.random.randint + take, one jit call")


if __name__ == "__main__":
    main()
