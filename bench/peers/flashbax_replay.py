"""Flashbax peer for the GPU replay rows (see README.md for the definitions).

usage: python3 bench/peers/flashbax_replay.py [cpu|cuda]

Flashbax (InstaDeep's JAX replay buffers) stores a transition as a pytree;
here a dict of the mujoco fields obs f32[17], action f32[6], reward f32[],
next_obs f32[17], done f32[] (42 f32). Its flat buffers are trajectory
buffers of shape [add_batch_size, time]; both buffers below are made with
one row (add_batch_size None) and a time axis of CAP transitions, filled
with random values by one jitted add of a CAP-long sequence before timing.

Rows (impl: work):
  flashbax_flat  sample_gather_mujoco_b256: make_flat_buffer, full; one jit
                 call splits the key and runs buffer.sample, which returns
                 256 (first, second) pairs of consecutive transitions, i.e.
                 2 x 42 f32 a sample (obs/next_obs of step t and of t + 1)
  flashbax_per   per_sample_b256_1m: make_prioritised_flat_buffer (priority
                 exponent 0.6), full, random priorities; one jit call splits
                 the key and runs buffer.sample (sum-tree stratified sampling,
                 the pairs as above, indices and probabilities)
  flashbax_per   per_update_b256: one jit call of buffer.set_priorities of
                 256 indices/values (16 prepared sets in turn), state donated

The prioritised buffer is made with device="gpu" on cuda (Flashbax then sets
priorities with a bincount over the whole tree and a level-by-level scatter)
and device="cpu" on cpu (a lax.scan over the 256 values). Every row is
checked once (which also compiles it) before it is timed.
"""
import contextlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peerlib as pl  # noqa: E402

CAP = pl.CAPACITY  # transitions (and sum-tree items)
B = 256
ALPHA = 0.6        # priority exponent
SETS = 16          # prepared index/value sets for the update row
IMPLS = ["flashbax_flat", "flashbax_per"]
VERSION = {"flashbax": "?"}  # set in main(), named in the notes
FIELDS = (("obs", (17,)), ("action", (6,)), ("reward", ()), ("next_obs", (17,)), ("done", ()))


def time_sampling(impl, work, sample, state, key, note):
    """Times sample(state, key) -> (key, batch), the key carried from call to
    call as a training loop carries it."""
    st = {"key": key}

    def body(i):
        st["key"], out = sample(state, st["key"])
        return out

    iters = pl.auto_iters(body, pl.jax_sync)
    pl.row(impl, work, pl.measure(body, iters, pl.jax_sync), note)


def host_data(np, cap):
    """CAP random transitions on the host, one array per field."""
    rng = np.random.default_rng(0)
    data = {name: rng.standard_normal((cap, *shape), dtype=np.float32) for name, shape in FIELDS}
    data["done"] = (rng.random(cap) < 0.05).astype(np.float32)
    return data


def row_finder(np, data):
    """Maps an obs row back to its time index: the bits of obs[0:2] as one
    uint64 key (random normals: unique), looked up in a sorted copy."""
    bits = np.ascontiguousarray(data["obs"][:, :2]).view(np.uint64)[:, 0]
    order = np.argsort(bits)
    keys = bits[order]

    def find(obs):
        q = np.ascontiguousarray(np.asarray(obs)[:, :2]).view(np.uint64)[:, 0]
        pos = np.minimum(np.searchsorted(keys, q), len(keys) - 1)
        return np.where(keys[pos] == q, order[pos], -1)

    return find


def pairs_match(np, data, pair, t, keep=None):
    """True when pair.first is transition t and pair.second transition t + 1,
    field by field, bit for bit (t must be a valid start: no wrap). `keep`
    (a mask) limits the comparison to some of the B samples."""
    cap = len(data["obs"])
    t = np.asarray(t)
    keep = np.ones(t.shape, bool) if keep is None else keep
    if t.shape != (B,) or not keep.any():
        return False
    t = t[keep]
    if t.min() < 0 or t.max() >= cap - 1:
        return False
    return all(np.array_equal(np.asarray(pair.first[name])[keep], data[name][t]) and
               np.array_equal(np.asarray(pair.second[name])[keep], data[name][t + 1])
               for name, _ in FIELDS)


def fill(jax, buffer, data, device):
    """init from one zero transition, then one jitted add (state donated) of
    the whole CAP-long sequence: the buffer is full after it."""
    jnp = jax.numpy
    with jax.default_device(device):
        state = buffer.init({name: jnp.zeros(shape, jnp.float32) for name, shape in FIELDS})
    seq = jax.device_put(data, device)
    state = jax.jit(buffer.add, donate_argnums=0)(state, seq)
    del seq
    return state


def flat_row(jax, fbx, np, data, device):
    """flashbax_flat: sample_gather_mujoco_b256."""
    impl, work = "flashbax_flat", "sample_gather_mujoco_b256"
    cap = len(data["obs"])
    with contextlib.redirect_stdout(sys.stderr):  # keep stdout for JSON lines
        buffer = fbx.make_flat_buffer(max_length=cap, min_length=B, sample_batch_size=B,
                                      add_sequences=True, add_batch_size=None)
    state = fill(jax, buffer, data, device)
    if not (bool(state.is_full) and bool(buffer.can_sample(state))):
        pl.absent(impl, f"{work}: check failed (buffer not full after filling)")
        return

    @jax.jit
    def sample(state, key):
        key, sub = jax.random.split(key)
        return key, buffer.sample(state, sub).experience

    # Check: each sampled pair is a stored transition t and its successor t + 1.
    find = row_finder(np, data)
    key = jax.device_put(jax.random.PRNGKey(0), device)
    seen = set()
    for _ in range(8):
        key, pair = sample(state, key)
        t = find(pair.first["obs"])
        if not pairs_match(np, data, pair, t):
            pl.absent(impl, f"{work}: check failed (sampled rows are not stored pairs)")
            return
        seen.update(t.tolist())
    if len(seen) < 8 * B // 2:  # uniform over ~1M: almost no repeats
        pl.absent(impl, f"{work}: check failed (samples not spread: {len(seen)} distinct)")
        return

    time_sampling(impl, work, sample, state, key,
                  f"flashbax {VERSION['flashbax']}: jit(key split + make_flat_buffer.sample), "
                  f"1 x {cap} time axis, full; returns "
                  f"{B} (first, second) pairs of the 5 fields = 2 x 42 f32 each")


def per_rows(jax, fbx, np, data, device, dev, stage):
    """flashbax_per: per_sample_b256_1m, then per_update_b256 (same state).
    stage["work"] names the row in progress (for the caller's absent line)."""
    impl = "flashbax_per"
    jnp = jax.numpy
    cap = len(data["obs"])
    fdev = "gpu" if dev == "cuda" else "cpu"
    stage["work"] = "per_sample_b256_1m, per_update_b256"
    with contextlib.redirect_stdout(sys.stderr):
        buffer = fbx.make_prioritised_flat_buffer(
            max_length=cap, min_length=B, sample_batch_size=B, add_sequences=True,
            add_batch_size=None, priority_exponent=ALPHA, device=fdev)
    from flashbax.buffers import sum_tree

    def leaves(state, idx):
        """The sum tree's leaves (p^a) at item indices, as f64 on the host."""
        return np.asarray(sum_tree.get_batch(state.sum_tree_state, jnp.asarray(idx)), np.float64)

    state = fill(jax, buffer, data, device)
    # Items are start times of (t, t + 1) pairs: cap - 1 valid ones (the last
    # would wrap to the first); give them random positive priorities.
    rng = np.random.default_rng(1)
    prio = (rng.random(cap - 1, dtype=np.float32) + 1e-3).astype(np.float32)
    set_prio = jax.jit(buffer.set_priorities, donate_argnums=0)
    state = set_prio(state, jax.device_put(np.arange(cap - 1, dtype=np.int32), device),
                     jax.device_put(prio, device))
    # Check the fill: full, the leaves hold p^a (0 for the wrapping last item), the
    # root near their sum. Flashbax 0.1.x keeps the tree in f32 and updates
    # it by deltas, so the root drifts from the sum of the leaves (about 5e-4
    # relative here on the cpu); more than 1% fails.
    want = prio.astype(np.float64) ** ALPHA
    leaf = leaves(state, np.arange(cap, dtype=np.int32))
    root = float(state.sum_tree_state.nodes[0])
    if not (bool(state.is_full) and bool(buffer.can_sample(state))
            and np.allclose(leaf[:-1], want, rtol=1e-5) and leaf[-1] == 0
            and abs(root - leaf.sum()) <= 1e-2 * leaf.sum()):
        pl.absent(impl, f"{stage['work']}: check failed (fill: root {root}, "
                        f"sum of leaves {leaf.sum():.3f})")
        return

    # ---- per_sample_b256_1m
    work = stage["work"] = "per_sample_b256_1m"

    @jax.jit
    def sample(state, key):
        key, sub = jax.random.split(key)
        return key, buffer.sample(state, sub)

    # Check: the pairs stored at the indices, the probabilities leaf / root, a
    # preference for high priorities (priority-weighted mean > mean). Draws
    # past the last valid item are counted, not failed while under 1%: when
    # the drifted root exceeds the sum of the leaves, the top stratum can land
    # on a zero padding leaf (flashbax issue #52; the f64 tree of PR #58 is not
    # in 0.1.3). That costs no time; it is reported in a check line.
    key = jax.device_put(jax.random.PRNGKey(0), device)
    draws, past, ok = [], 0, True
    for _ in range(40):
        key, s = sample(state, key)
        idx = np.asarray(s.indices)
        valid = (idx >= 0) & (idx < cap - 1)
        past += int((~valid).sum())
        ok = ok and pairs_match(np, data, s.experience, idx, valid)
        ok = ok and np.allclose(np.asarray(s.probabilities)[valid], leaf[idx[valid]] / root,
                                rtol=1e-4)
        draws.append(idx[valid])
    draws = np.concatenate(draws)
    pl.check(impl, "per_sample_draws_past_last_item", past, draws=40 * B,
             tree_root=round(root, 3), leaf_sum=round(float(leaf.sum()), 3))
    if not ok or past > 40 * B // 100 or float(prio[draws].mean()) <= float(prio.mean()):
        pl.absent(impl, f"{work}: check failed ({past} of {40 * B} draws past the last item)")
    else:
        time_sampling(impl, work, sample, state, key,
                      f"flashbax {VERSION['flashbax']}: jit(key split + "
                      f"make_prioritised_flat_buffer.sample), alpha {ALPHA}, "
                      f"{cap - 1} valid items, full: f32 sum-tree stratified sample + {B} "
                      f"(first, second) pairs (2 x 42 f32) + probabilities")

    # ---- per_update_b256
    work = stage["work"] = "per_update_b256"
    sets = [(jax.device_put(rng.integers(0, cap - 1, B, dtype=np.int32), device),
             jax.device_put((rng.random(B, dtype=np.float32) + 1e-3).astype(np.float32), device))
            for _ in range(SETS)]
    # Check: the leaves written hold val^a (indices drawn once; a repeated one
    # keeps one of its values), the others are untouched, and the root moves
    # by the change of the leaves.
    idx, val = (np.asarray(a) for a in sets[0])
    uniq, cnt = np.unique(idx, return_counts=True)
    once = np.isin(idx, uniq[cnt == 1])
    other = np.setdiff1d(np.arange(0, cap - 1, 997), idx).astype(np.int32)
    before, root0 = leaves(state, uniq), float(state.sum_tree_state.nodes[0])
    state = set_prio(state, *sets[0])  # compiles; the old state is donated
    after, root1 = leaves(state, uniq), float(state.sum_tree_state.nodes[0])
    moved = (root1 - root0) - (after - before).sum()
    if not (np.allclose(leaves(state, idx[once]), val[once].astype(np.float64) ** ALPHA, rtol=1e-5)
            and np.allclose(leaves(state, other), want[other], rtol=1e-5)
            and abs(moved) <= 1e-4 * root0):
        pl.absent(impl, f"{work}: check failed")
        return

    st = {"state": state}  # carried: each call donates the one before

    def upd(i):
        st["state"] = set_prio(st["state"], *sets[i % SETS])
        return st["state"].sum_tree_state.nodes

    iters = pl.auto_iters(upd, pl.jax_sync)
    how = ("bincount over all items + level-by-level scatter-add" if fdev == "gpu"
           else "lax.scan of 256 leaf-to-root updates")
    pl.row(impl, work, pl.measure(upd, iters, pl.jax_sync),
           f"flashbax {VERSION['flashbax']}: jit(buffer.set_priorities) of {B}, state "
           f"donated, {SETS} sets in turn; "
           f"device={fdev!r}: p^{ALPHA}, {how}")


def main():
    dev = pl.device_arg()
    jax, device = pl.import_jax(IMPLS, dev)
    if jax is None:
        return
    try:
        with contextlib.redirect_stdout(sys.stderr):
            import flashbax as fbx
    except Exception as e:
        pl.absent(IMPLS, f"flashbax does not import: {type(e).__name__}: {e}")
        return
    import numpy as np
    try:
        from importlib.metadata import version
        VERSION["flashbax"] = version("flashbax")
    except Exception:
        VERSION["flashbax"] = getattr(fbx, "__version__", "?")

    data = host_data(np, CAP)
    stage = {}
    for impl, work, run in (
            ("flashbax_flat", "sample_gather_mujoco_b256",
             lambda: flat_row(jax, fbx, np, data, device)),
            ("flashbax_per", "per_sample_b256_1m, per_update_b256",
             lambda: per_rows(jax, fbx, np, data, device, dev, stage))):
        try:
            run()
        except Exception as e:  # an API that changed, a device out of memory
            work = stage.pop("work", work)
            pl.absent(impl, f"{work}: failed: {type(e).__name__}: {e}"[:500])


if __name__ == "__main__":
    main()
