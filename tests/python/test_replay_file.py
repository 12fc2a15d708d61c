"""ReplayBuffer.save / ReplayBuffer.load: the table comes back with its
contents, ring and prioritized sampler, so that the same sampling seed draws
the same batches; bad files raise and create nothing."""

import numpy as np
import pytest

import agrl

FIELDS = {"obs": ((2, 3), "f32"), "action": ((), "i32"), "reward": ((1,), "f32")}


def _table(ctx, prioritized, seed=5, cap=50):
    rb = agrl.ReplayBuffer(ctx, cap, FIELDS, prioritized=prioritized, seed=seed)
    rng = np.random.default_rng(1)
    for k in (30, 35):  # the second batch wraps
        rb.add(obs=rng.standard_normal((k, 2, 3), dtype=np.float32), action=rng.integers(0, 4, k),
               reward=rng.standard_normal((k, 1), dtype=np.float32))
    if prioritized:
        rb.update_priorities(np.arange(0, 50, 3), rng.uniform(0.1, 5.0, 17).astype(np.float32))
    return rb


def _draws(rb, n=3):
    return [{k: v.numpy() for k, v in rb.sample(16).items()} for _ in range(n)]


@pytest.mark.parametrize("prioritized", [False, True])
def test_round_trip_restores_contents_and_draws(tmp_path, prioritized):
    ctx = agrl.Context("cpu")
    rb = _table(ctx, prioritized)
    path = str(tmp_path / "t.rpl")
    rb.save(path)
    other = agrl.Context("cpu")
    back = agrl.ReplayBuffer.load(other, path, fields=FIELDS, seed=5)
    assert (len(back), back.capacity, back.position, back.prioritized) == (len(rb), rb.capacity, rb.position,
                                                                           prioritized)
    assert back.fields["obs"] == ((2, 3), "f32")
    if prioritized:
        assert back.total_priority() == rb.total_priority()
    a, b = _draws(rb), _draws(back)
    for x, y in zip(a, b):
        assert x.keys() == y.keys()
        for k in x:
            np.testing.assert_array_equal(x[k], y[k])
            assert x[k].shape == y[k].shape


def test_fields_without_shapes_come_back_flat(tmp_path):
    ctx = agrl.Context("cpu")
    rb = _table(ctx, False)
    rb.save(str(tmp_path / "t.rpl"))
    back = agrl.ReplayBuffer.load(ctx, str(tmp_path / "t.rpl"), seed=5)
    assert back.fields == {"obs": ((6,), "f32"), "action": ((1,), "i32"), "reward": ((1,), "f32")}
    s = back.sample(4)
    assert s["obs"].shape == (4, 6)
    with pytest.raises(agrl.ShapeError, match="must have 6 values"):
        agrl.ReplayBuffer.load(ctx, str(tmp_path / "t.rpl"), fields={"obs": (4,), "action": (), "reward": (1,)})
    with pytest.raises(agrl.ShapeError, match="the file's fields"):
        agrl.ReplayBuffer.load(ctx, str(tmp_path / "t.rpl"), fields={"obs": (6,)})


def test_bad_files_raise_and_create_nothing(tmp_path):
    ctx = agrl.Context("cpu")
    rb = _table(ctx, True)
    path = str(tmp_path / "t.rpl")
    rb.save(path)
    raw = open(path, "rb").read()
    live = ctx.stats()["live_bytes"]
    with pytest.raises(agrl.IoError):
        agrl.ReplayBuffer.load(ctx, str(tmp_path / "missing.rpl"))
    for bad in (raw[: len(raw) // 2], raw + b"x", raw[:40] + bytes([raw[40] ^ 1]) + raw[41:], b"not a table"):
        p = str(tmp_path / "bad.rpl")
        open(p, "wb").write(bad)
        with pytest.raises(agrl.Error, match="bad.rpl"):
            agrl.ReplayBuffer.load(ctx, p)
    assert ctx.stats()["live_bytes"] == live
    # a save that cannot be made leaves the earlier file as it was
    with pytest.raises(agrl.Error):
        rb.save(str(tmp_path / "no" / "such" / "dir.rpl"))
    with pytest.raises(agrl.Error):
        rb.save(str(tmp_path))  # a directory is in the way
    assert open(path, "rb").read() == raw
    with pytest.raises(TypeError):
        agrl.ReplayBuffer.load(ctx, 3)
    with pytest.raises(agrl.InvalidArgError, match="beta"):
        agrl.ReplayBuffer.load(ctx, path, beta=2.0)
