"""agrl.ReplayBuffer against a ring simulated in numpy: add (one transition,
a batch, wrapping around the capacity), len / capacity / position, uniform
sampling (every sampled row is the row added at its index), storage dtypes,
and prioritized sampling: total_priority = sum p^alpha, weights
(N P(i))^-beta / max, new transitions at the largest priority, and the
stratified draw's counts within 2 of B P(i)."""

import numpy as np
import pytest

import agrl
from refs import bf16_round

FIELDS = {"obs": ((3,), "f32"), "action": ((1,), "i32"), "reward": ((1,), "f32"), "img": ((2, 2), "u8")}


class Ring:
    """What the table must hold: a numpy copy of each field, written as a ring."""

    def __init__(self, cap):
        self.cap, self.pos, self.size = cap, 0, 0
        self.data = {k: np.zeros((cap,) + shape, np.float64) for k, (shape, _) in FIELDS.items()}

    def add(self, batch):
        k = len(batch["obs"])
        for j in range(k):
            for name, v in batch.items():
                self.data[name][(self.pos + j) % self.cap] = v[j]
        self.pos = (self.pos + k) % self.cap
        self.size = min(self.cap, self.size + k)


def _batch(rng, k):
    return {"obs": rng.standard_normal((k, 3)).astype(np.float32),
            "action": rng.integers(-5, 100, (k, 1)).astype(np.int32),
            "reward": rng.standard_normal(k).astype(np.float32),  # (k,) for a (1,) field
            "img": rng.integers(0, 256, (k, 2, 2)).astype(np.uint8)}


def _check_sample(rb, ring, B, storage="f32"):
    """Each field comes back in the dtype it was added with, packed on its
    own (B, *shape); indices are int64."""
    s = rb.sample(B)
    idx = np.from_dlpack(s["indices"])
    assert idx.shape == (B,) and idx.dtype == np.int64
    assert ((idx >= 0) & (idx < ring.size)).all()
    for name, (shape, dtype) in FIELDS.items():
        t = s[name]
        assert t.shape == (B,) + shape and t.dtype == dtype
        want = ring.data[name][idx].astype(np.float32)
        if storage == "f16":
            want = want.astype(np.float16).astype(np.float32)
        elif storage == "bf16":
            want = bf16_round(want)
        a = np.from_dlpack(t)
        assert a.dtype == np.dtype(agrl_to_numpy[dtype]) and a.flags.c_contiguous
        assert np.array_equal(a, want.astype(a.dtype)), name
    return idx


agrl_to_numpy = {"f32": np.float32, "i32": np.int32, "i64": np.int64, "u8": np.uint8, "f16": np.float16}


def test_add_one_then_batches_then_wrap(ctx, rng):
    cap = 8
    rb = agrl.ReplayBuffer(ctx, cap, FIELDS, seed=7)
    ring = Ring(cap)
    assert (len(rb), rb.capacity, rb.position, rb.rows) == (0, cap, 0, 3 + 1 + 1 + 4)
    assert not rb.prioritized
    # one transition, each field of its own shape
    one = _batch(rng, 1)
    rb.add(obs=one["obs"][0], action=int(one["action"][0, 0]), reward=float(one["reward"][0]), img=one["img"][0])
    ring.add(one)
    assert (len(rb), rb.position) == (1, 1)
    _check_sample(rb, ring, 16)
    for k in (3, 2, 5, 8, 1, 7):  # the third batch wraps, the fourth fills the table exactly
        b = _batch(rng, k)
        rb.add(**b)
        ring.add(b)
        assert (len(rb), rb.position, rb.capacity) == (ring.size, ring.pos, cap)
        seen = _check_sample(rb, ring, 256)
        assert set(seen.tolist()) == set(range(ring.size))  # 256 uniform draws reach all of <= 8 slots


def test_add_accepts_a_dict_and_lists(ctx):
    rb = agrl.ReplayBuffer(ctx, 4, {"o": 2, "a": ((1,), "i32")})
    rb.add({"o": [1.5, 2.5], "a": 3})
    rb.add(o=[[0, 1], [2, 3]], a=[[4], [5]])
    rb.add(o=[np.float32(7), np.float64(8)], a=[np.int64(6)])
    s = rb.sample(64)
    idx = np.from_dlpack(s["indices"])
    want_o = np.array([[1.5, 2.5], [0, 1], [2, 3], [7, 8]], np.float32)
    want_a = np.array([[3], [4], [5], [6]], np.int32)
    assert np.array_equal(np.from_dlpack(s["o"]), want_o[idx])
    assert np.array_equal(np.from_dlpack(s["a"]), want_a[idx])


@pytest.mark.parametrize("storage", ["f16", "bf16", "i32", "u8"])
def test_storage_dtypes(ctx, rng, storage):
    cap = 16
    if storage in ("i32", "u8"):  # integer storage holds whole numbers exactly
        fields = {"obs": ((3,), "f32"), "action": ((1,), "i32"), "reward": ((1,), "f32"), "img": ((2, 2), "u8")}
        rb = agrl.ReplayBuffer(ctx, cap, fields, storage=storage)
        ring = Ring(cap)
        b = _batch(rng, cap)
        hi = 256 if storage == "u8" else 1000
        b["obs"] = rng.integers(0, hi, (cap, 3)).astype(np.float32)
        b["reward"] = rng.integers(0, hi, cap).astype(np.float32)
        b["action"] = np.abs(b["action"])
        rb.add(**b)
        ring.add(b)
        _check_sample(rb, ring, 64)
    else:
        rb = agrl.ReplayBuffer(ctx, cap, FIELDS, storage=storage)
        ring = Ring(cap)
        b = _batch(rng, cap)
        b["action"] = rng.integers(0, 200, (cap, 1)).astype(np.int32)  # exact in 16 bits
        rb.add(**b)
        ring.add(b)
        _check_sample(rb, ring, 64, storage)


def test_min_size_gates_sampling(ctx):
    rb = agrl.ReplayBuffer(ctx, 10, {"x": 1}, min_size=3)
    rb.add(x=[1.0, 2.0])
    with pytest.raises(agrl.StateError, match="fewer than its minimum 3"):
        rb.sample(1)
    rb.add(x=3.0)
    assert sorted(set(np.from_dlpack(rb.sample(50)["x"]).ravel().tolist())) == [1.0, 2.0, 3.0]


def test_same_seed_same_draws(ctx):
    draws = []
    for _ in range(2):
        rb = agrl.ReplayBuffer(ctx, 100, {"x": 1}, seed=42)
        rb.add(x=np.arange(100, dtype=np.float32))
        draws.append([rb.sample(10)["indices"].tolist() for _ in range(3)])
    assert draws[0] == draws[1]
    rb = agrl.ReplayBuffer(ctx, 100, {"x": 1}, seed=43)
    rb.add(x=np.arange(100, dtype=np.float32))
    assert [rb.sample(10)["indices"].tolist() for _ in range(3)] != draws[0]


def _per(ctx, n, alpha, beta, cap=None):
    rb = agrl.ReplayBuffer(ctx, cap or n, {"x": 1}, prioritized=True, alpha=alpha, beta=beta, seed=3)
    rb.add(x=np.arange(n, dtype=np.float32))
    return rb


@pytest.mark.parametrize("alpha,beta", [(0.6, 0.4), (1.0, 1.0), (0.5, 0.0), (0.0, 0.7)])
def test_prioritized_weights_and_total(ctx, rng, alpha, beta):
    n = 50
    rb = _per(ctx, n, alpha, beta)
    assert rb.prioritized and rb.beta == beta
    assert rb.total_priority() == pytest.approx(n)  # new transitions: priority 1
    p = rng.uniform(0.1, 5.0, n)
    rb.update_priorities(np.arange(n), p.astype(np.float32))
    p32 = p.astype(np.float32).astype(np.float64)
    pa = p32**alpha
    assert rb.total_priority() == pytest.approx(pa.sum(), rel=1e-5)
    P = pa / pa.sum()
    for _ in range(3):
        s = rb.sample(32)
        idx = np.from_dlpack(s["indices"])
        w = np.from_dlpack(s["weights"])
        assert w.shape == (32,) and w.dtype == np.float32
        assert np.array_equal(np.from_dlpack(s["x"])[:, 0], idx.astype(np.float32))  # rows of their index
        ref = (n * P[idx]) ** -beta
        assert np.allclose(w, ref / ref.max(), rtol=2e-5, atol=0)
    # beta per call
    s = rb.sample(16, beta=1.0)
    idx = np.from_dlpack(s["indices"])
    ref = 1.0 / (n * P[idx])
    assert np.allclose(np.from_dlpack(s["weights"]), ref / ref.max(), rtol=2e-5)
    s = rb.sample(16, 0.0)
    assert np.array_equal(np.from_dlpack(s["weights"]), np.ones(16, np.float32))


def test_prioritized_partial_updates_and_new_transitions(ctx):
    rb = _per(ctx, 4, 0.5, 0.4, cap=6)
    rb.update_priorities(np.array([1, 3], np.int32), [4.0, 9.0])
    assert rb.total_priority() == pytest.approx(1 + 2 + 1 + 3)
    rb.update_priorities([0], [0.0])  # zero counts as 1e-12
    assert rb.total_priority() == pytest.approx(2 + 1 + 3, abs=1e-5)
    rb.add(x=[10.0, 11.0])  # new transitions get the largest priority seen: 9
    assert rb.total_priority() == pytest.approx(6 + 3 + 3, rel=1e-6)
    assert len(rb) == 6 and rb.position == 0


def test_stratified_counts_follow_priorities(ctx, rng):
    """One draw in each of B equal slices of the total: item i, an interval of
    length B P(i) slices, is drawn floor or ceil of that, within +-2."""
    n, B = 20, 20000
    rb = _per(ctx, n, 0.7, 0.4)
    p = rng.uniform(0.05, 3.0, n).astype(np.float32)
    rb.update_priorities(list(range(n)), p)
    pa = p.astype(np.float64) ** 0.7
    P = pa / pa.sum()
    idx = np.from_dlpack(rb.sample(B)["indices"])
    counts = np.bincount(idx, minlength=n)
    assert np.all(np.abs(counts - B * P) <= 2.0), (counts, B * P)


def test_beta_property(ctx):
    rb = _per(ctx, 4, 0.6, 0.4)
    rb.beta = 0.9
    assert rb.beta == 0.9
    with pytest.raises(agrl.InvalidArgError, match=r"beta = 1\.5 is outside \[0, 1\]"):
        rb.beta = 1.5
    assert rb.beta == 0.9


def test_repr_and_free(ctx):
    rb = agrl.ReplayBuffer("cpu", 5, {"x": 1})
    assert repr(rb) == "<agrl.ReplayBuffer 0/5 uniform on cpu>"
    rb.add(x=[1.0, 2.0])
    assert repr(rb) == "<agrl.ReplayBuffer 2/5 uniform on cpu>"
    s = rb.sample(3)
    rb.free()
    assert repr(rb) == "<agrl.ReplayBuffer (freed)>"
    with pytest.raises(agrl.FreedError):
        len(rb)
    assert set(np.from_dlpack(s["x"]).ravel().tolist()) <= {1.0, 2.0}  # results outlive the table
