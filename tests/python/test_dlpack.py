"""DLPack through numpy on the CPU: np.from_dlpack shares agrl's memory
(pointer equality, for gathered rows and for the field views of a sampled
batch with their row offsets), the views' shapes and byte strides, the
legacy and versioned capsules by name, capsules never consumed, the
device tuple, the refusals of __dlpack__ (BufferError), and inputs from
DLPack producers, the buffer protocol, lists and bool arrays."""

import array
import ctypes
import gc
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import agrl
from refs import subprocess_env

_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_is_valid.restype = ctypes.c_int
_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _capsule_name(cap):
    for name in (b"dltensor", b"dltensor_versioned", b"used_dltensor", b"used_dltensor_versioned"):
        if _is_valid(cap, name):
            return name.decode()
    return None


@pytest.fixture
def filled(ctx, rng):
    buf = agrl.Buffer(ctx, 6, 20)
    v = rng.standard_normal((20, 6)).astype(np.float32)
    buf.write(v)
    return buf, v


def test_from_dlpack_shares_memory(filled):
    buf, v = filled
    t = buf.get_rows([5, 0, 19])
    a = np.from_dlpack(t)
    assert a.ctypes.data == t.data_ptr
    assert a.shape == t.shape == (3, 6) and a.strides == (24, 4) and t.strides == (6, 1)
    assert np.array_equal(a, v[[5, 0, 19]])
    b = np.from_dlpack(t)
    assert b.ctypes.data == a.ctypes.data  # a second export: the same memory, no copy
    c = t.numpy()  # .numpy() is a copy
    assert c.ctypes.data != t.data_ptr and np.array_equal(c, a)


def test_sampled_fields_share_one_block_each_packed_in_its_dtype(ctx, rng):
    fields = {"obs": ((5,), "f32"), "act": ((1,), "i32"), "rew": ((1,), "f32"), "frame": ((2, 3), "u8")}
    np_dtypes = {"f32": np.float32, "i32": np.int32, "u8": np.uint8}
    rb = agrl.ReplayBuffer(ctx, 32, fields, seed=1)
    data = {"obs": rng.standard_normal((32, 5)).astype(np.float32), "act": rng.integers(0, 9, (32, 1)),
            "rew": rng.standard_normal((32, 1)).astype(np.float32),
            "frame": rng.integers(0, 256, (32, 2, 3)).astype(np.uint8)}
    rb.add(**data)
    B = 7
    s = rb.sample(B)
    idx = np.from_dlpack(s["indices"])
    assert idx.dtype == np.int64 and idx.strides == (8,)
    ptrs = []
    for name, (shape, dtype) in fields.items():
        t = s[name]
        a = np.from_dlpack(t)
        assert a.ctypes.data == t.data_ptr
        assert a.shape == (B,) + shape and a.dtype == np_dtypes[dtype]
        assert a.flags.c_contiguous  # each field packed on its own
        assert t.strides == tuple(x // a.itemsize for x in a.strides)
        assert np.array_equal(a, data[name][idx].astype(a.dtype))
        ptrs.append((t.data_ptr, a.nbytes))
    # one block: the fields in order, 256-byte aligned, none overlapping
    for (p0, n0), (p1, _) in zip(ptrs, ptrs[1:]):
        assert p1 >= p0 + n0 and p1 % 256 == 0 and p1 - p0 < n0 + 256
    assert s["indices"].data_ptr >= ptrs[-1][0] + ptrs[-1][1]


def test_capsules_legacy_and_versioned(filled):
    buf, _ = filled
    t = buf.get_rows([1, 2])
    assert _capsule_name(t.__dlpack__()) == "dltensor"
    assert _capsule_name(t.__dlpack__(max_version=(0, 8))) == "dltensor"
    assert _capsule_name(t.__dlpack__(max_version=(1, 0))) == "dltensor_versioned"
    assert _capsule_name(t.__dlpack__(max_version=(1, 3))) == "dltensor_versioned"
    assert "dltensor_versioned" in repr(t.__dlpack__(max_version=(1, 0)))
    assert _capsule_name(t.__dlpack__(stream=None, dl_device=(1, 0), copy=False)) == "dltensor"
    assert t.__dlpack_device__() == (1, 0)
    assert t.device == "cpu"


def test_unconsumed_capsules_are_freed(ctx):
    """Capsules dropped unconsumed (and numpy views let go) release their
    reference: the block goes back to the context, which reuses it for the
    next result instead of allocating; a live capsule keeps its block."""
    buf = agrl.Buffer(ctx, 256, 64)
    buf.write(np.ones((64, 256), np.float32))
    idx = list(range(64))
    t = buf.get_rows(idx)
    allocs = ctx.stats()["allocs"]
    for i in range(20000):
        cap = t.__dlpack__(max_version=(1, 0) if i % 2 else None)
        del cap
    a = np.from_dlpack(t)
    assert a.ctypes.data == t.data_ptr and (a == 1).all()
    del a, t
    gc.collect()
    t = buf.get_rows(idx)
    assert ctx.stats()["allocs"] == allocs  # the same block, reused
    cap = t.__dlpack__()
    del t
    gc.collect()
    buf.get_rows(idx)
    assert ctx.stats()["allocs"] == allocs + 1  # the capsule still holds the first block
    del cap
    gc.collect()
    buf.get_rows(idx)
    buf.get_rows(idx)
    assert ctx.stats()["allocs"] == allocs + 1


def test_block_outlives_tensor_through_a_capsule(ctx):
    buf = agrl.Buffer(ctx, 3, 4)
    buf.write(np.arange(12, dtype=np.float32).reshape(4, 3))
    t = buf.get_rows([3])
    cap = t.__dlpack__()
    a = np.from_dlpack(t)
    del t
    gc.collect()
    buf.free()
    ctx.free()
    assert np.array_equal(a, [[9, 10, 11]])
    del cap  # its destructor runs after the context is gone
    gc.collect()
    assert np.array_equal(a, [[9, 10, 11]])


@pytest.mark.parametrize("kwargs,match", [
    (dict(stream=0), "stream=None"),
    (dict(stream=1), "stream=None"),
    (dict(stream=-1), "stream=None"),
    (dict(copy=True), "copy=True"),
    (dict(dl_device=(2, 0)), r"\(2, 0\)"),
    (dict(dl_device=(1, 1)), r"\(1, 1\)"),
])
def test_dlpack_refusals_are_buffer_errors(filled, kwargs, match):
    buf, v = filled
    t = buf.get_rows([0, 1])
    with pytest.raises(BufferError, match=match):
        t.__dlpack__(**kwargs)
    assert np.array_equal(np.from_dlpack(t), v[[0, 1]])


def test_inputs_from_dlpack_producers(ctx, rng):
    """A numpy array (it has __dlpack__) and an agrl.Tensor are both inputs."""
    buf = agrl.Buffer(ctx, 4, 10)
    v = rng.standard_normal((3, 4)).astype(np.float32)
    assert hasattr(v, "__dlpack__")
    buf.write(v, 2)
    t = buf.get_rows([4, 3, 2])  # an agrl.Tensor written back into columns 7..9
    buf.write(t, 7)
    assert np.array_equal(buf.read(7, 3), v[::-1])
    f16 = agrl.Buffer(ctx, 4, 2, "f16")
    h = v[:2].astype(np.float16)
    f16.write(h)  # already the storage dtype: taken as is
    assert np.array_equal(f16.read().view(np.uint16), h.view(np.uint16))
    ro = v.copy()
    ro.flags.writeable = False  # a read-only array
    buf.write(ro, 0)
    assert np.array_equal(buf.read(0, 3), v)


def test_inputs_from_buffer_protocol_and_lists(ctx):
    buf = agrl.Buffer(ctx, 3, 6)
    buf.write(array.array("f", [1.5, 2.5, 3.5]), 0)
    buf.write(array.array("q", [4, 5, 6]), 1)
    buf.write(memoryview(np.array([[7, 8, 9]], np.int16)), 2)
    buf.write([10, 11.5, 12], 3)
    buf.write(((13, 14, 15), (16, 17, 18)), 4)
    want = np.array([[1.5, 2.5, 3.5], [4, 5, 6], [7, 8, 9], [10, 11.5, 12], [13, 14, 15], [16, 17, 18]],
                    np.float32)
    assert np.array_equal(buf.read(), want)


@pytest.mark.parametrize("storage", ["u8", "i32", "f32"])
def test_bool_arrays(ctx, storage):
    buf = agrl.Buffer(ctx, 4, 2, storage)
    buf.write(np.array([[True, False, False, True], [False, True, True, True]]))
    assert np.array_equal(buf.read(dtype="f32"), [[1, 0, 0, 1], [0, 1, 1, 1]])
    rb = agrl.ReplayBuffer(ctx, 4, {"done": ((1,), "u8"), "flag": ((1,), "i32")})
    rb.add(done=np.array([True, False]), flag=[True, False])
    s = rb.sample(32)
    idx = np.from_dlpack(s["indices"])
    assert np.array_equal(np.from_dlpack(s["done"])[:, 0], (idx == 0).astype(np.float32))
    assert np.array_equal(np.from_dlpack(s["flag"])[:, 0], (idx == 0).astype(np.float32))


def test_interpreter_exit_with_live_exports():
    """Tensors, numpy views and unconsumed capsules alive at exit: no crash."""
    code = textwrap.dedent("""
        import numpy as np, agrl
        ctx = agrl.Context("cpu")
        rb = agrl.ReplayBuffer(ctx, 64, {"x": 3}, prioritized=True)
        rb.add(x=np.ones((64, 3), np.float32))
        s = rb.sample(16)
        views = [np.from_dlpack(v) for v in s.values()]
        caps = [s["x"].__dlpack__(), s["x"].__dlpack__(max_version=(1, 0))]
        buf = agrl.Buffer(ctx, 2, 2)
        t = buf.get_rows([1])
        ctx.free()
        keep = (s, views, caps, t, rb, buf)
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-X", "dev", "-c", code], capture_output=True, text=True, timeout=60,
                       env=subprocess_env())
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
