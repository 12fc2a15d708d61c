"""The Python door: sampled fields in the dtype they were added with,
sample(out=) into the caller's arrays, gather, the framework modules
(agrl.torch, agrl.jax), Vulkan's host copies, and the objects' Python
manners (signatures, context managers, named errors, sizes checked before
anything is allocated). Every value is checked against a numpy reference
of what was added."""

import inspect
import os

import numpy as np
import pytest

import agrl

REQUIRE_GPU = os.environ.get("AGRL_REQUIRE_GPU") == "1"
REQUIRE_VULKAN = os.environ.get("AGRL_REQUIRE_VULKAN") == "1"
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    agrl.cuda_device_count() == 0 and not REQUIRE_GPU, reason="no CUDA device"))]
FIELDS = {"obs": ((3, 2), "f32"), "action": ((), "i64"), "reward": ((1,), "f32"), "flag": ((2,), "u8"),
          "code": ((1,), "i32")}
NP = {"f32": np.float32, "i64": np.int64, "u8": np.uint8, "i32": np.int32, "f16": np.float16}


def data(n, seed=0):
    g = np.random.default_rng(seed)
    return {"obs": g.standard_normal((n, 3, 2)).astype(np.float32),
            "action": g.integers(-5, 1 << 20, n).astype(np.int64),
            "reward": g.standard_normal((n, 1)).astype(np.float32),
            "flag": g.integers(0, 256, (n, 2)).astype(np.uint8),
            "code": g.integers(-(1 << 23), 1 << 23, (n, 1)).astype(np.int32)}


def filled(device, n=40, **kw):
    ctx = agrl.Context(device)
    rb = agrl.ReplayBuffer(ctx, n, FIELDS, **kw)
    d = data(n)
    rb.add(**d)
    return ctx, rb, d


def host(t):
    return np.asarray(t.numpy() if isinstance(t, agrl.Tensor) else t)


def check_rows(batch, d, idx):
    for name, (shape, dt) in FIELDS.items():
        a = host(batch[name])
        assert a.dtype == NP[dt], name
        assert a.shape == (len(idx),) + shape, name
        assert np.array_equal(a, d[name][idx].reshape(a.shape)), name


@pytest.mark.parametrize("device", DEVICES)
def test_sampled_fields_keep_their_dtypes_and_integers_are_exact(device):
    ctx, rb, d = filled(device)
    s = rb.sample(64)
    idx = host(s["indices"])
    assert idx.dtype == np.int64 and ((idx >= 0) & (idx < 40)).all()
    check_rows(s, d, idx)
    ctx.free()


@pytest.mark.parametrize("device", DEVICES)
def test_integer_storage_gives_full_range_integers_back_exactly(device):
    ctx = agrl.Context(device)
    rb = agrl.ReplayBuffer(ctx, 8, {"a": ((), "i64"), "b": ((2,), "i32")}, storage="i32")
    a = np.array([2**31 - 1, -2**31, 2**24 + 1, -(2**24) - 3, 0, 1, -1, 123456789], np.int64)
    b = np.stack([a[::-1], a], 1).astype(np.int32)
    rb.add(a=a, b=b)
    g = rb.gather(np.arange(8))
    assert host(g["a"]).dtype == np.int64 and np.array_equal(host(g["a"]), a)
    assert np.array_equal(host(g["b"]), b)
    ctx.free()


def test_an_integer_the_float_storage_cannot_hold_is_refused():
    ctx = agrl.Context("cpu")
    rb = agrl.ReplayBuffer(ctx, 8, {"a": ((), "i64")})  # f32 storage: integers up to 2^24
    rb.add(a=np.array([2**24]))
    with pytest.raises(agrl.OutOfRangeError, match="a"):
        rb.add(a=np.array([2**24 + 1]))
    assert len(rb) == 1  # nothing added
    assert host(rb.gather([0])["a"])[0] == 2**24
    ctx.free()


@pytest.mark.parametrize("device", ["cpu"])
def test_sample_out_writes_into_the_callers_numpy_arrays(device):
    ctx, rb, d = filled(device, prioritized=True)
    out = {k: np.zeros((16,) + s, NP[t]) for k, (s, t) in FIELDS.items()}
    out["indices"] = np.zeros(16, np.int64)
    out["weights"] = np.zeros(16, np.float32)
    seen = set()
    for _ in range(5):
        r = rb.sample(16, out=out)
        assert r is out
        idx = out["indices"].copy()
        check_rows(out, d, idx)
        assert np.all(out["weights"] > 0) and np.isclose(out["weights"].max(), 1.0)
        seen.add(tuple(idx))
    assert len(seen) > 1  # each call draws anew into the same arrays
    ctx.free()


def test_sample_out_takes_strided_views_other_dtypes_and_optional_entries():
    ctx, rb, d = filled("cpu")
    block = np.zeros((16, 32), np.float32)  # fields as views of one packed block
    # float64 is not an agrl dtype: refused, naming the entry
    with pytest.raises(agrl.InvalidArgError, match=r"out\['obs'\]"):
        rb.sample(16, out={"obs": np.zeros((16, 3, 2), np.float64), "action": np.zeros(16, np.int64),
                           "reward": block[:, 6:7], "flag": np.zeros((16, 2), np.uint8),
                           "code": np.zeros((16, 1), np.int32)})
    out = {"obs": np.zeros((16, 3, 2), np.float16), "action": np.zeros(16, np.int32),
           "reward": block[:, 6:7], "flag": np.zeros((16, 2), np.float32), "code": block[:, 8:9],
           "indices": np.zeros(16, np.int32)}
    rb.sample(16, out=out)
    idx = out["indices"].astype(np.int64)
    assert np.array_equal(out["obs"], d["obs"][idx].astype(np.float16))
    assert np.array_equal(out["action"], d["action"][idx].astype(np.int32))
    assert np.array_equal(block[:, 6:7], d["reward"][idx])
    assert np.array_equal(out["flag"], d["flag"][idx].astype(np.float32))
    assert np.array_equal(block[:, 8], d["code"][idx, 0].astype(np.float32))
    assert not block[:, 9:].any() and not block[:, 7].any()  # nothing written around the views
    ctx.free()


@pytest.mark.parametrize("bad,match", [
    (lambda o: o.pop("obs"), r"no array for field 'obs'"),
    (lambda o: o.update(extra=np.zeros(16, np.float32)), r"'extra'"),
    (lambda o: o.update(obs=np.zeros((15, 3, 2), np.float32)), r"out\['obs'\].*\(16"),
    (lambda o: o.update(obs=np.zeros((16, 6), np.float32)), r"out\['obs'\]"),
    (lambda o: o.update(indices=np.zeros(16, np.float32)), r"indices.*int32 or int64"),
    (lambda o: o.update(weights=np.zeros(16, np.float32)), r"not prioritized"),
])
def test_sample_out_refuses_bad_arrays_and_writes_nothing(bad, match):
    ctx, rb, d = filled("cpu")
    out = {k: np.full((16,) + s, 7, NP[t]) for k, (s, t) in FIELDS.items()}
    bad(out)
    before = {k: v.copy() for k, v in out.items()}
    with pytest.raises(agrl.Error, match=match):
        rb.sample(16, out=out)
    for k, v in out.items():
        assert np.array_equal(v, before[k]), k
    ctx.free()


def test_sample_out_refuses_a_read_only_array():
    ctx, rb, d = filled("cpu")
    out = {k: np.zeros((4,) + s, NP[t]) for k, (s, t) in FIELDS.items()}
    out["obs"].flags.writeable = False
    with pytest.raises((agrl.Error, BufferError, ValueError), match="read-only|readonly|writable|writeable"):
        rb.sample(4, out=out)
    ctx.free()


def test_gather_reads_given_rows_and_checks_host_indices():
    ctx, rb, d = filled("cpu")
    idx = np.array([39, 0, 17, 17, 5])
    g = rb.gather(idx)
    check_rows(g, d, idx)
    assert np.array_equal(host(g["indices"]), idx)
    out = {k: np.zeros((5,) + s, NP[t]) for k, (s, t) in FIELDS.items()}
    assert rb.gather(idx, out=out) is out
    check_rows(out, d, idx)
    with pytest.raises(agrl.OutOfRangeError, match=r"indices\[1\] = 40"):
        rb.gather([3, 40])
    with pytest.raises(agrl.OutOfRangeError, match=r"indices\[0\] = -1"):
        rb.gather([-1])
    with pytest.raises(agrl.InvalidArgError, match="0 indices"):
        rb.gather([])
    ctx.free()


@pytest.mark.parametrize("device", DEVICES)
def test_agrl_torch_batches_are_torch_tensors(device):
    torch = pytest.importorskip("torch")
    import agrl.torch as at
    ctx = agrl.Context(device)
    rb = at.ReplayBuffer(ctx, 40, FIELDS, prioritized=True)
    d = data(40)
    rb.add(**{k: torch.as_tensor(v, device=device) for k, v in d.items()})  # device to device
    s = rb.sample(32)
    assert all(isinstance(v, torch.Tensor) and v.device.type == device for v in s.values())
    assert s["action"].dtype == torch.int64 and s["code"].dtype == torch.int32 and s["flag"].dtype == torch.uint8
    check_rows({k: v.cpu().numpy() for k, v in s.items()}, d, s["indices"].cpu().numpy())
    out = rb.empty_batch(32)
    assert set(out) == set(FIELDS) | {"indices", "weights"}
    assert rb.sample(32, out=out) is out
    check_rows({k: v.cpu().numpy() for k, v in out.items()}, d, out["indices"].cpu().numpy())
    total = rb.total_priority()
    rb.update_priorities(out["indices"], torch.full((32,), 5.0, device=device))
    assert rb.total_priority() > total
    ctx.free()


@pytest.mark.parametrize("device", DEVICES)
def test_new_tensor_batches_stay_right_when_their_blocks_come_back(device):
    """Batches as new tensors, many in a row: the pool hands the same few
    blocks back, and on CUDA a block seen before gets its draw and gather
    recorded; every batch still holds the rows of its indices, as the table
    holds them after adds between batches, the draws differ, and beta
    changed between batches is the one its weights use."""
    torch = pytest.importorskip("torch")
    import agrl.torch as at
    ctx = agrl.Context(device)
    rb = at.ReplayBuffer(ctx, 40, FIELDS, prioritized=True, alpha=1.0, seed=3)
    d = data(40)
    rb.add(**d)
    rb.update_priorities(np.arange(40), np.linspace(0.5, 4.0, 40).astype(np.float32))
    kept, draws = [], set()
    for k in range(60):
        if k == 30:  # the ring now holds 20 new rows over the oldest
            d2 = data(20, seed=5)
            rb.add(**d2)
            d = {key: np.concatenate([d2[key], d[key][20:]]) for key in d}
        beta = 0.0 if k < 45 else 1.0
        s = rb.sample(16, beta=beta)
        idx = s["indices"].cpu().numpy()
        check_rows({key: v.cpu().numpy() for key, v in s.items()}, d, idx)
        w = s["weights"].cpu().numpy()
        if beta == 0.0:
            assert np.all(w == 1.0), k
        elif len(set(idx.tolist())) > 1:
            assert w.min() < 1.0, k
        draws.add(tuple(idx.tolist()))
        if k % 3 == 0:
            kept.append(s)  # held: its block is not handed back
        if len(kept) > 4:
            kept.pop(0)
    assert len(draws) > 50
    ctx.free()


@pytest.mark.skipif(agrl.cuda_device_count() == 0 and not REQUIRE_GPU, reason="no CUDA device")
def test_sample_out_inside_a_torch_cuda_graph_draws_anew_at_each_replay():
    torch = pytest.importorskip("torch")
    import agrl.torch as at
    ctx = agrl.Context("cuda")
    rb = at.ReplayBuffer(ctx, 40, FIELDS, seed=9)
    d = data(40)
    rb.add(**d)
    out = rb.empty_batch(16)
    rb.sample(16, out=out)  # the warm-up outside the capture records agrl's step
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        y = out["obs"] * 2.0
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        rb.sample(16, out=out)
        y = out["obs"] * 2.0 + out["reward"].reshape(16, 1, 1)
    draws = []
    for k in range(4):
        if k == 2:  # an add between replays is ordered with torch's stream
            d2 = data(40, seed=1)
            rb.add(**d2)
            d = {key: np.concatenate([d[key], d2[key]])[40:] for key in d}  # the ring now holds d2
        g.replay()
        torch.cuda.synchronize()
        idx = out["indices"].cpu().numpy()
        draws.append(tuple(idx))
        check_rows({k2: v.cpu().numpy() for k2, v in out.items()}, d, idx)
        want = d["obs"][idx] * 2.0 + d["reward"][idx].reshape(16, 1, 1)
        assert np.allclose(y.cpu().numpy(), want)
    assert len(set(draws)) == 4  # each replay drew anew
    ctx.free()


def test_agrl_torch_gives_a_tensordict_on_request():
    torch = pytest.importorskip("torch")
    tensordict = pytest.importorskip("tensordict")
    import agrl.torch as at
    ctx = agrl.Context("cpu")
    rb = at.ReplayBuffer(ctx, 40, FIELDS)
    d = data(40)
    rb.add(**d)
    td = rb.sample(8, tensordict=True)
    assert isinstance(td, tensordict.TensorDict) and td.batch_size == torch.Size([8])
    check_rows({k: td[k].numpy() for k in FIELDS}, d, td["indices"].numpy())
    ctx.free()


def test_agrl_jax_packed_batches_unpack_to_the_fields():
    jax = pytest.importorskip("jax")
    import agrl.jax as aj
    ctx = agrl.Context("cpu")
    rb = aj.ReplayBuffer(ctx, 40, FIELDS, prioritized=True)
    d = data(40)
    rb.add(**d)
    p = rb.sample(24)
    assert list(p) == ["bytes"] and p["bytes"].dtype == np.uint8 and p["bytes"].shape[0] == 24
    lay = rb.layout()
    assert p["bytes"].shape[1] % 8 == 0 and all(first % np.dtype(NP.get(dt, np.int32)).itemsize == 0
                                                 for _, dt, first, _, _ in lay)
    u = jax.jit(rb.unpack)(p)
    idx = np.asarray(u["indices"])
    for name, (shape, dt) in FIELDS.items():
        a = np.asarray(u[name])
        want = d[name][idx].reshape(a.shape)
        assert a.shape == (24,) + shape
        assert np.array_equal(a, want.astype(a.dtype)), name
    w = np.asarray(u["weights"])
    assert np.all(w > 0) and np.isclose(w.max(), 1.0)
    f = rb.sample_fields(5)
    check_rows({k: np.asarray(v).astype(NP[FIELDS[k][1]]) if k in FIELDS else v for k, v in f.items()}, d,
               np.asarray(f["indices"]))
    ctx.free()


@pytest.mark.skipif(agrl.vulkan_device_count() == 0 and not REQUIRE_VULKAN, reason="no Vulkan device")
def test_vulkan_samples_come_back_as_host_copies():
    ctx, rb, d = filled("vulkan", prioritized=True)
    s = rb.sample(32)
    assert all(t.device == "cpu" for t in s.values())  # copied to host memory
    check_rows(s, d, host(s["indices"]))
    g = rb.gather([3, 1, 39])
    check_rows(g, d, np.array([3, 1, 39]))
    with pytest.raises(agrl.UnsupportedError, match="Vulkan"):
        rb.sample(4, out={k: np.zeros((4,) + s, NP[t]) for k, (s, t) in FIELDS.items()})
    ctx.free()


@pytest.mark.parametrize("call,match", [
    (lambda c: agrl.ReplayBuffer(c, 2**70, {"x": 1}), r"ReplayBuffer: capacity = 1180591620717411303424"),
    (lambda c: agrl.ReplayBuffer(c, 10, {"x": 1}, seed=2**64), r"ReplayBuffer: seed = 18446744073709551616"),
    (lambda c: agrl.ReplayBuffer(c, 10, {"x": 1}, seed=-1), r"ReplayBuffer: seed = -1"),
    (lambda c: agrl.ReplayBuffer(c, 10, {"x": 1}, min_size=2**63), r"ReplayBuffer: min_size"),
    (lambda c: agrl.Buffer(c, 2**64, 4), r"Buffer: rows = 18446744073709551616"),
    (lambda c: agrl.DQN(c, 4, 2, buffer_size=2**64), r"DQN: buffer_size = 18446744073709551616"),
    (lambda c: agrl.DQN(c, 4, 2, seed=2**64), r"DQN: seed = 18446744073709551616"),
    (lambda c: agrl.DQN(c, 4, 2, n_step=2**40), r"DQN: n_step = 1099511627776"),
    (lambda c: agrl.SAC(c, 3, 1, [-1], [1], buffer_size=-2**64), r"SAC: buffer_size = -18446744073709551616"),
    (lambda c: agrl.derive_seed(2**64, 0), r"derive_seed: seed = 18446744073709551616"),
])
def test_every_bad_number_names_its_argument(call, match):
    ctx = agrl.Context("cpu")
    with pytest.raises(agrl.InvalidArgError, match=match):
        call(ctx)
    ctx.free()


def test_a_prioritized_table_too_large_is_refused_before_anything_is_allocated():
    ctx = agrl.Context("cpu")
    before = ctx.stats()
    with pytest.raises(agrl.UnsupportedError, match="beyond prioritized replay's 2147483647"):
        agrl.ReplayBuffer(ctx, 2**32, {"x": ((), "f32")}, prioritized=True)
    with pytest.raises(agrl.InvalidArgError, match="alpha"):
        agrl.ReplayBuffer(ctx, 2**20, {"x": 1}, prioritized=True, alpha=1.5)
    after = ctx.stats()
    assert (after["allocs"], after["live_bytes"]) == (before["allocs"], before["live_bytes"])
    ctx.free()


def public_objects():
    import agrl.replay
    for name in ("Context", "Buffer", "Tensor", "ReplayBuffer", "DQN", "SAC", "TD3"):
        yield getattr(agrl, name)


def test_every_c_method_has_a_signature():
    missing = []
    for cls in public_objects():
        for name, member in inspect.getmembers(cls):
            if name.startswith("__") and name not in ("__dlpack__", "__enter__", "__exit__", "__array__"):
                continue
            if callable(member) and not isinstance(member, type):
                try:
                    inspect.signature(member)
                except (ValueError, TypeError):
                    missing.append(f"{cls.__name__}.{name}")
    for fn in (agrl.derive_seed, agrl.library_version, agrl.cuda_device_count, agrl.vulkan_device_count):
        inspect.signature(fn)
    assert missing == []
    assert str(inspect.signature(agrl.ReplayBuffer.sample)).startswith("(self, /, batch_size, beta=None")
    assert str(inspect.signature(agrl.Context)) == "(device=None)"


def test_every_object_with_free_is_a_context_manager():
    with agrl.Context("cpu") as ctx:
        with agrl.Buffer(ctx, 2, 4) as b:
            b.write(np.ones((4, 2), np.float32))
        with pytest.raises(agrl.FreedError):
            b.read()
        with agrl.ReplayBuffer(ctx, 8, {"x": 1}) as rb:
            rb.add(x=[1.0, 2.0])
        with pytest.raises(agrl.FreedError):
            len(rb)
        with agrl.DQN(ctx, 4, 2) as dqn:
            assert dqn.stored == 0
        with pytest.raises(agrl.FreedError):
            dqn.stored
        with agrl.SAC(ctx, 3, 1, [-2.0], [2.0]) as sac:
            assert sac.stored == 0
        with pytest.raises(agrl.FreedError):
            sac.stored
    assert ctx.closed
