"""Zero copy between agrl and PyTorch, JAX and CuPy on the GPU: shared
pointers, device-to-device inputs with no bytes across the bus, the DLPack
stream handshake with a consumer on another stream, and exported tensors
that outlive everything agrl does afterwards.

Without a CUDA device these tests skip, unless AGRL_REQUIRE_GPU=1 (the GPU
script sets it), where a missing device or framework is a failure."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import agrl

REQUIRE = os.environ.get("AGRL_REQUIRE_GPU") == "1"


def _need_gpu():
    if agrl.cuda_device_count() == 0:
        if REQUIRE:
            pytest.fail("AGRL_REQUIRE_GPU=1 but agrl sees no CUDA device")
        pytest.skip("no CUDA device")


def _need(mod):
    _need_gpu()
    try:
        return __import__(mod)
    except ImportError as e:
        if REQUIRE:
            pytest.fail(f"{mod} is required on the GPU machine: {e}")
        pytest.skip(f"{mod} not installed")


FIELDS = {"obs": ((17,), "f32"), "action": ((6,), "f32"), "reward": ((1,), "f32"), "next_obs": ((17,), "f32"),
          "done": ((1,), "f32")}


def _filled(ctx, n=1000, cap=4096, seed=0, prioritized=False):
    rng = np.random.default_rng(seed)
    data = {k: rng.standard_normal((n,) + shape, dtype=np.float32) for k, (shape, _) in FIELDS.items()}
    rb = agrl.ReplayBuffer(ctx, cap, FIELDS, prioritized=prioritized, seed=seed)
    rb.add(**data)
    return rb, data


def test_torch_shares_memory_and_values():
    torch = _need("torch")
    ctx = agrl.Context("cuda")
    rb, data = _filled(ctx)
    s = rb.sample(256)
    idx = torch.from_dlpack(s["indices"])
    assert idx.device.type == "cuda" and idx.dtype == torch.int64  # indices are int64
    assert idx.data_ptr() == s["indices"].data_ptr
    host_idx = idx.cpu().numpy()
    for k in FIELDS:
        t = torch.from_dlpack(s[k])
        assert t.data_ptr() == s[k].data_ptr, k
        assert tuple(t.shape) == s[k].shape
        assert tuple(t.stride()) == s[k].strides
        np.testing.assert_array_equal(t.cpu().numpy(), data[k][host_idx])


def test_cupy_shares_memory_and_values():
    cupy = _need("cupy")
    ctx = agrl.Context("cuda")
    rb, data = _filled(ctx, seed=1)
    s = rb.sample(64)
    idx = cupy.asnumpy(cupy.from_dlpack(s["indices"]))
    for k in FIELDS:
        c = cupy.from_dlpack(s[k])
        assert c.data.ptr == s[k].data_ptr, k
        np.testing.assert_array_equal(cupy.asnumpy(c), data[k][idx])


def test_jax_shares_memory_of_packed_fields():
    jax = _need("jax")
    import jax.numpy as jnp

    if not any(d.platform == "gpu" for d in jax.devices()):
        if REQUIRE:
            pytest.fail("JAX sees no GPU")
        pytest.skip("JAX without a GPU")
    ctx = agrl.Context("cuda")
    rb, data = _filled(ctx, seed=2)
    s = rb.sample(128, contiguous=True)  # JAX takes compact arrays only
    idx = np.asarray(jnp.from_dlpack(s["indices"]))
    for k in FIELDS:
        a = jnp.from_dlpack(s[k])
        assert a.unsafe_buffer_pointer() == s[k].data_ptr, k
        np.testing.assert_array_equal(np.asarray(a), data[k][idx])
    # gathered rows of a buffer are compact too
    buf = agrl.Buffer(ctx, 3, 10)
    buf.write(np.arange(30, dtype=np.float32).reshape(10, 3))
    g = buf.get_rows([9, 0, 4])
    a = jax.dlpack.from_dlpack(g)
    assert a.unsafe_buffer_pointer() == g.data_ptr
    np.testing.assert_array_equal(np.asarray(a), np.arange(30, dtype=np.float32).reshape(10, 3)[[9, 0, 4]])


def test_device_inputs_cross_no_bytes():
    torch = _need("torch")
    ctx = agrl.Context("cuda")
    rb = agrl.ReplayBuffer(ctx, 1000, {"obs": ((4,), "f32"), "action": ((), "i32"), "reward": ((1,), "f32")},
                           prioritized=True)
    g = torch.Generator(device="cuda").manual_seed(0)
    obs = torch.randn(700, 4, device="cuda", generator=g)
    act = torch.randint(0, 3, (700,), device="cuda", dtype=torch.int32, generator=g)
    rew = torch.randn(700, 1, device="cuda", generator=g)
    ctx.reset_transfers()
    rb.add(obs=obs, action=act, reward=rew)
    rb.add(obs=obs[:400].contiguous(), action=act[:400].contiguous(), reward=rew[:400].contiguous())  # wraps
    assert ctx.transfer_totals()[0] == 0
    assert len(rb) == 1000 and rb.position == 100
    s = rb.sample(200)
    idx = torch.from_dlpack(s["indices"]).long()
    ref_obs = torch.cat([obs, obs[:400]])  # column j of the ring: transition j (j < 100: the wrapped ones)
    col = torch.arange(1000, device="cuda")
    src = torch.where(col < 100, col + 1000, col)
    expect = ref_obs[src[idx]]
    assert torch.equal(torch.from_dlpack(s["obs"]), expect)
    assert torch.equal(torch.from_dlpack(s["action"]), act.repeat(2)[src[idx]])  # int32, as added
    # device priorities from torch
    pr = torch.rand(200, device="cuda", generator=g) + 0.1
    rb.update_priorities(s["indices"], pr)
    ctx.reset_transfers()
    buf = agrl.Buffer(ctx, 4, 16, "f16")
    x = torch.randn(16, 4, device="cuda", generator=g)
    buf.write(x)
    assert ctx.transfer_totals()[0] == 0
    np.testing.assert_array_equal(buf.read(), x.cpu().numpy().astype(np.float16))


def test_consumer_stream_waits_for_agrl():
    torch = _need("torch")
    ctx = agrl.Context("cuda")
    n = 1 << 20
    rb = agrl.ReplayBuffer(ctx, n, {"x": ((64,), "f32")})
    big = torch.arange(n * 64, device="cuda", dtype=torch.float32).reshape(n, 64)
    torch.cuda.synchronize()
    other = torch.cuda.Stream()
    for rep in range(3):
        rb.add(x=big)  # 256 MB device to device, queued on agrl's stream
        s = rb.sample(4096)  # queued after it
        with torch.cuda.stream(other):
            x = torch.from_dlpack(s["x"])  # other waits on agrl's queue, no device-wide sync
            i = torch.from_dlpack(s["indices"]).long()
            y = x * 2.0
            ref = big[i] * 2.0
        other.synchronize()
        assert torch.equal(y, ref), rep


def test_exported_tensors_outlive_agrl():
    torch = _need("torch")
    ctx = agrl.Context("cuda")
    rb, data = _filled(ctx, seed=3)
    s = rb.sample(512)
    held = {k: torch.from_dlpack(v) for k, v in s.items()}
    idx = held["indices"].cpu().numpy()
    expect = {k: data[k][idx] for k in FIELDS}
    del s
    for _ in range(50):  # reuse of the workspace and of released blocks
        rb.sample(512)
        ctx.reset()
    rb.free()
    ctx.free()
    torch.cuda.synchronize()
    for k in FIELDS:
        np.testing.assert_array_equal(held[k].cpu().numpy(), expect[k])
    # a capsule never consumed, and one consumed after the context is gone
    ctx2 = agrl.Context("cuda")
    rb2, data2 = _filled(ctx2, seed=4)
    s2 = rb2.sample(8)
    cap = s2["obs"].__dlpack__(stream=1)
    del cap
    t = s2["obs"]
    rb2.free()
    ctx2.free()
    x = torch.from_dlpack(t)
    i = torch.from_dlpack(s2["indices"]).cpu().numpy()
    np.testing.assert_array_equal(x.cpu().numpy(), data2["obs"][i])


def test_interpreter_exit_with_live_exports():
    _need("torch")
    code = textwrap.dedent("""
        import agrl, numpy as np, torch
        ctx = agrl.Context("cuda")
        rb = agrl.ReplayBuffer(ctx, 100, {"x": ((3,), "f32")})
        rb.add(x=np.ones((10, 3), np.float32))
        keep = [torch.from_dlpack(rb.sample(4)["x"]) for _ in range(3)]
        caps = [rb.sample(2)["x"].__dlpack__(max_version=(1, 0)) for _ in range(3)]
        print("ok", float(keep[0].sum()))
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "ok 12.0" in r.stdout


def test_wrong_device_is_refused():
    torch = _need("torch")
    ctx = agrl.Context("cpu")
    rb = agrl.ReplayBuffer(ctx, 10, {"x": ((2,), "f32")})
    with pytest.raises(agrl.InvalidArgError, match="on cuda:0, the context on cpu"):
        rb.add(x=torch.ones(3, 2, device="cuda"))
    assert len(rb) == 0
    gctx = agrl.Context("cuda")
    grb = agrl.ReplayBuffer(gctx, 10, {"x": ((2,), "f32")})
    with pytest.raises(agrl.ShapeError, match="not C-contiguous"):
        grb.add(x=torch.ones(2, 3, device="cuda").t())
    with pytest.raises(TypeError, match="float64"):
        grb.add(x=torch.ones(3, 2, device="cuda", dtype=torch.float64))
    assert len(grb) == 0


def test_torch_default_stream_is_ordered_with_agrl_without_events():
    """torch's default stream (the legacy one) and agrl's stream are ordered
    by the device: an add reads what torch wrote just before it, and torch
    reads a batch agrl wrote just before, with no synchronisation between
    them. Each step queues long work first, so a missing order shows."""
    torch = _need("torch")
    import agrl.torch as at

    ctx = agrl.Context("cuda")
    n = 1 << 18
    rb = at.ReplayBuffer(ctx, n, {"x": ((64,), "f32")}, seed=4)
    out = rb.empty_batch(2048)
    last = at.ReplayBuffer(ctx, 1, {"x": ((64,), "f32")}, seed=5)
    out8 = last.empty_batch(8)
    assert torch.cuda.current_stream().cuda_stream == 0
    for rep in range(4):
        base = torch.full((n, 64), float(rep), device="cuda")
        for _ in range(20):  # long work on the default stream before the add reads `big`
            base = base * 1.0001
        big = base + torch.arange(n, device="cuda", dtype=torch.float32).reshape(n, 1)
        rb.add(x=big)  # agrl's stream: after the default stream's work
        for _ in range(3):
            rb.add(x=big)  # more work on agrl's stream before the batch is written
        rb.sample(2048, out=out)
        y = out["x"] * 2.0  # the default stream: after agrl's draw
        i = out["indices"].long()
        assert torch.equal(y, big[i] * 2.0), rep
        one = (big[7 + rep] * 3.0).reshape(1, 64)  # on the default stream, just before the add
        last.add(x=one)  # one row, as an environment step adds it
        want = one.clone()
        del one  # torch may reuse its memory at once: agrl's read is ordered before
        junk = torch.full((64 * 64,), -1.0, device="cuda")
        last.sample(8, out=out8)  # a table of one transition: every draw is that row
        assert torch.equal(out8["x"], want.expand(8, 64)), rep
        del junk
    ctx.free()


def test_recordings_do_not_stop_torch_on_the_default_stream():
    """A recording is captured on a stream of its own: a thread queueing
    torch work on the default stream meanwhile gets no capture error, and the
    recorded steps compute what unrecorded ones do."""
    torch = _need("torch")
    import threading

    ctx = agrl.Context("cuda")
    stop = threading.Event()
    errors = []

    def torch_loop():
        x = torch.zeros(1 << 16, device="cuda")
        k = 0
        try:
            while not stop.is_set():
                x = x + 1.0
                k += 1
            torch.cuda.synchronize()
            assert float(x[0]) == k
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    t = threading.Thread(target=torch_loop)
    t.start()
    try:
        g = np.random.default_rng(2)
        losses = []
        for seed in range(12):  # each agent records its update anew while torch runs
            d = agrl.DQN(ctx, 4, 2, batch_size=32, learning_starts=0, buffer_size=256, seed=seed, hidden=(16, 16))
            obs = g.standard_normal((64, 4)).astype(np.float32)
            d.store(obs, g.integers(0, 2, 64).astype(np.int32), g.standard_normal(64).astype(np.float32),
                    g.standard_normal((64, 4)).astype(np.float32), np.zeros(64, np.int32))
            losses.append(d.train(3))
            d.free()
    finally:
        stop.set()
        t.join()
    assert not errors, errors
    assert all(np.isfinite(v) for v in losses)
    ctx.free()
