"""agrl.Buffer against numpy: write/read round trips for every storage dtype
(f16 and bf16 rounding checked bit for bit against numpy), get_rows with
host indices, and the seed's behaviours visible from Python: the column
layout (S1), zero fill (S2), a failed allocation (S4, injected), ranged
writes and reads (S5, S8), write ordering (S6), freeing (S9), checked
indices (S11), capacities beyond 2^24 (S12), bytes across the bus (S7, S14,
S20), lifetimes independent of the workspace (S17), generation and where
(S19, S21), failed transfers that change nothing, and Tensors that outlive
the workspace, the buffer and the context."""

import array

import numpy as np
import pytest

import agrl
from refs import bf16_round

NP_OF = {"f32": np.float32, "f16": np.float16, "u8": np.uint8, "i32": np.int32}
ELEM = {"f32": 4, "f16": 2, "bf16": 2, "u8": 1, "i32": 4}


def _values(dtype, rng, shape):
    if dtype == "u8":
        return rng.integers(0, 256, shape).astype(np.uint8)
    if dtype == "i32":
        v = rng.integers(-(2**31), 2**31, shape, dtype=np.int64).astype(np.int32)
        v.flat[:2] = [-(2**31), 2**31 - 1]
        return v
    v = (rng.standard_normal(shape) * 10).astype(np.float32)
    # values where rounding to 16 bits matters: ties, subnormals, overflow, specials
    specials = np.array([0.0, -0.0, 1.0 + 2.0**-11, 1.0 + 3 * 2.0**-11, 1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8,
                         65504.0, 65520.0, 1e5, 2.0**-24, 2.0**-25, 3 * 2.0**-26, 1e-30, 3.4e38, -np.inf, np.inf],
                        dtype=np.float32)
    v.flat[: specials.size] = specials
    return v


def _expected(dtype, v):
    """What the buffer holds for input v, as read back (bf16 reads as f32)."""
    if dtype == "f16":
        with np.errstate(over="ignore"):
            return v.astype(np.float16)
    if dtype == "bf16":
        return bf16_round(v)
    return v


def _same_bits(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    if a.dtype.kind == "f":
        ai = a.view(np.uint16 if a.itemsize == 2 else np.uint32)
        bi = b.view(np.uint16 if b.itemsize == 2 else np.uint32)
        nan = np.isnan(a) & np.isnan(b)
        assert np.array_equal(ai[~nan], bi[~nan]), np.argwhere(ai != bi)[:5]
        assert np.array_equal(np.isnan(a), np.isnan(b))
    else:
        assert np.array_equal(a, b)


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16", "u8", "i32"])
def test_write_read_round_trip(ctx, rng, dtype):
    rows, cap = 7, 40
    buf = agrl.Buffer(ctx, rows, cap, dtype)
    assert (buf.rows, buf.capacity, buf.dtype) == (rows, cap, dtype)
    v = _values(dtype, rng, (cap, rows))
    buf.write(v)
    back = buf.read()
    assert back.shape == (cap, rows)
    if dtype == "bf16":
        assert back.dtype == np.float32
    else:
        assert back.dtype == NP_OF[dtype]
    _same_bits(back, _expected(dtype, v))
    # ranges: the values of columns 3..9, and one column as a vector
    _same_bits(buf.read(3, 7), _expected(dtype, v)[3:10])
    _same_bits(buf.read(cap - 1, 1), _expected(dtype, v)[cap - 1:])
    # read as f32 (every storage reads as f32 too)
    assert np.array_equal(buf.read(dtype="f32"), _expected(dtype, v).astype(np.float32), equal_nan=True)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_16_bit_rounding_of_many_values(ctx, rng, dtype):
    """Random bit patterns of f32 (all exponents): agrl's rounding equals numpy's."""
    n = 1 << 14
    bits = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    v = bits.view(np.float32).reshape(-1, 16)
    buf = agrl.Buffer(ctx, 16, v.shape[0], dtype)
    buf.write(v)
    _same_bits(buf.read(), _expected(dtype, v))


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16", "u8", "i32"])
def test_get_rows_gathers_columns_as_f32(ctx, rng, dtype):
    rows, cap = 5, 32
    buf = agrl.Buffer(ctx, rows, cap, dtype)
    v = _values(dtype, rng, (cap, rows))
    v = np.where(np.isfinite(v), v, 0).astype(v.dtype) if v.dtype.kind == "f" else v
    buf.write(v)
    ref = _expected(dtype, v).astype(np.float32)
    for idx in ([3, 0, 31, 3], np.array([7, 1, 2], dtype=np.int32), np.array([30, 29], dtype=np.int64),
                np.arange(cap)[::-1].copy(), (4, 5), [np.int64(9)]):
        t = buf.get_rows(idx)
        want = ref[np.asarray(idx, dtype=np.int64)]
        assert t.shape == want.shape and t.dtype == "f32"
        assert np.array_equal(np.from_dlpack(t), want)
        assert np.array_equal(t.numpy(), want)


def test_set_scale_applies_to_gathers(ctx):
    buf = agrl.Buffer(ctx, 3, 4, "u8")
    v = np.array([[0, 1, 255], [10, 20, 30], [5, 6, 7], [255, 254, 253]], dtype=np.uint8)
    buf.write(v)
    buf.set_scale(1 / 255)
    assert buf.scale == pytest.approx(1 / 255)
    got = np.from_dlpack(buf.get_rows([0, 3]))
    assert np.allclose(got, v[[0, 3]].astype(np.float32) * np.float32(1 / 255), rtol=1e-6, atol=0)
    assert np.array_equal(buf.read(), v)  # the stored bytes do not change


def test_column_layout_s1(ctx):
    """One column per item, its rows contiguous: writing the (k, rows) array
    [[0, 1, 2], [3, 4, 5]] at column 1 puts 0, 1, 2 in column 1."""
    buf = agrl.Buffer(ctx, 3, 4)
    buf.write(np.arange(6, dtype=np.float32).reshape(2, 3), 1)
    assert np.array_equal(buf.read(), np.array([[0, 0, 0], [0, 1, 2], [3, 4, 5], [0, 0, 0]], np.float32))
    t = buf.get_rows([2])
    assert t.shape == (1, 3) and t.strides == (3, 1)
    assert np.array_equal(np.from_dlpack(t), [[3, 4, 5]])
    # one vector of `rows` values is one column
    buf.write([9, 8, 7], 3)
    assert np.array_equal(buf.read(3, 1), [[9, 8, 7]])


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16", "u8", "i32"])
def test_new_buffer_is_zero_filled_s2(ctx, dtype):
    buf = agrl.Buffer(ctx, 9, 33, dtype)
    back = buf.read(dtype="f32")
    assert back.shape == (33, 9) and not back.any() and not np.signbit(back).any()


def test_writes_send_only_the_new_columns_s7(ctx, rng):
    for dtype in ("f32", "f16", "bf16", "u8", "i32"):
        rows, cap = 6, 1000
        buf = agrl.Buffer(ctx, rows, cap, dtype)
        for k, off in ((1, 0), (17, 500), (3, cap - 3)):
            ctx.reset_transfers()
            buf.write(_values(dtype, rng, (k, rows)), off)
            up, down = ctx.transfer_totals()
            assert (up, down) == (rows * k * ELEM[dtype], 0), dtype
            w = ctx.transfers()["ag_buffer_write"]
            assert (w["up_bytes"], w["up_calls"]) == (rows * k * ELEM[dtype], 1)


def test_reads_bring_back_only_the_columns_asked_for(ctx):
    buf = agrl.Buffer(ctx, 4, 100, "f16")
    ctx.reset_transfers()
    buf.read(10, 5)
    assert ctx.transfer_totals() == (0, 4 * 5 * 2)


def test_get_rows_sends_only_the_indices_s14(ctx):
    buf = agrl.Buffer(ctx, 64, 1000)
    for idx in ([1, 2, 3], np.arange(100, dtype=np.int32), np.arange(7, dtype=np.int64)):
        ctx.reset_transfers()
        buf.get_rows(idx)
        n = len(idx)
        assert ctx.transfer_totals() == (8 * n, 0)
        assert ctx.transfers()["ag_get_rows"]["up_bytes"] == 8 * n


def test_ring_write_wraps_with_two_writes_s5(ctx, rng):
    cap, rows = 10, 3
    buf = agrl.Buffer(ctx, rows, cap)
    ref = np.zeros((cap, rows), np.float32)
    pos = 0
    for k in (4, 4, 4, 7, 10, 1):
        v = rng.standard_normal((k, rows)).astype(np.float32)
        first = min(k, cap - pos)
        buf.write(v[:first], pos)
        if k > first:
            buf.write(v[first:], 0)
        for j in range(k):
            ref[(pos + j) % cap] = v[j]
        pos = (pos + k) % cap
        assert np.array_equal(buf.read(), ref)


def test_zero_columns_write_and_read(ctx):
    buf = agrl.Buffer(ctx, 4, 6)
    buf.write(np.arange(24, dtype=np.float32).reshape(6, 4))
    before = buf.read()
    ctx.reset_transfers()
    buf.write(np.zeros((0, 4), np.float32), 3)  # k = 0: a no-op
    assert ctx.transfer_totals() == (0, 0)
    assert np.array_equal(buf.read(), before)
    empty = buf.read(6, 0)
    assert empty.shape == (0, 4)


def test_range_checks_change_nothing_s5_s11(ctx, rng):
    buf = agrl.Buffer(ctx, 4, 6)
    v = rng.standard_normal((6, 4)).astype(np.float32)
    buf.write(v)
    ctx.reset_transfers()
    with pytest.raises(agrl.OutOfRangeError, match=r"columns 5\.\.6 are outside the buffer \(capacity 6\)"):
        buf.write(np.ones((2, 4), np.float32), 5)
    with pytest.raises(agrl.OutOfRangeError, match="col_offset = -1"):
        buf.write(np.ones((1, 4), np.float32), -1)
    with pytest.raises(agrl.OutOfRangeError, match="outside 0..5"):
        buf.get_rows([0, 6])
    with pytest.raises(agrl.OutOfRangeError, match="outside 0..5"):
        buf.get_rows([-1])
    with pytest.raises(agrl.InvalidArgError, match="at least one index"):
        buf.get_rows([])
    assert issubclass(agrl.OutOfRangeError, IndexError) and issubclass(agrl.OutOfRangeError, agrl.Error)
    assert ctx.transfer_totals() == (0, 0)  # a refused call sends nothing
    assert np.array_equal(buf.read(), v)


@pytest.mark.parametrize("rows,cap", [(0, 5), (-1, 10), (5, 0), (3, -7)])
def test_sizes_must_be_positive_s1(ctx, rows, cap):
    with pytest.raises(agrl.InvalidArgError, match="must be a positive whole number"):
        agrl.Buffer(ctx, rows, cap)
    with pytest.raises(TypeError):
        agrl.Buffer(ctx, 2.5, 3)


def test_free_then_use_raises_freed_s9(ctx):
    buf = agrl.Buffer(ctx, 2, 3)
    buf.write([[1, 2], [3, 4], [5, 6]])
    t = buf.get_rows([2, 0])
    assert buf.where == "host"  # a CPU context keeps the table in host memory
    buf.free()
    assert buf.where == "freed"
    for call in (buf.read, lambda: buf.write([1, 2]), lambda: buf.get_rows([0]), buf.wait,
                 lambda: buf.set_scale(2.0)):
        with pytest.raises(agrl.FreedError, match="freed"):
            call()
    buf.free()  # twice: a no-op
    assert issubclass(agrl.FreedError, agrl.Error)
    # the gathered result lives in its own block
    assert np.array_equal(np.from_dlpack(t), [[5, 6], [1, 2]])


def test_generation_and_where_s19_s21(ctx):
    a = agrl.Buffer(ctx, 2, 3)
    b = agrl.Buffer(ctx, 2, 3)
    assert a.where == b.where == "host"
    assert a.generation != b.generation  # every allocation its own number
    g = a.generation
    a.write([1.0, 2.0])
    a.get_rows([0])
    assert a.generation == g  # writes and reads do not reallocate
    a.free()
    c = agrl.Buffer(ctx, 2, 3)
    assert c.generation not in (g, b.generation)  # never reused, even if the memory is


def test_workspace_reset_keeps_buffers_and_tensors_s17(ctx, rng):
    buf = agrl.Buffer(ctx, 5, 20)
    v = rng.standard_normal((20, 5)).astype(np.float32)
    buf.write(v)
    t = buf.get_rows([19, 2, 2])
    ptr = t.data_ptr
    ctx.reset()
    more = [buf.get_rows(list(range(20))) for _ in range(5)]  # new temporaries after the reset
    ctx.reset()
    assert np.array_equal(buf.read(), v)
    assert t.data_ptr == ptr
    assert np.array_equal(np.from_dlpack(t), v[[19, 2, 2]])
    assert all(np.array_equal(np.from_dlpack(m), v) for m in more)


def test_tensor_outlives_buffer_and_context(rng):
    ctx = agrl.Context("cpu")
    buf = agrl.Buffer(ctx, 3, 10)
    v = rng.standard_normal((10, 3)).astype(np.float32)
    buf.write(v)
    t = buf.get_rows([4, 1, 7])
    arr = np.from_dlpack(t)
    buf.free()
    assert np.array_equal(np.from_dlpack(t), v[[4, 1, 7]])
    ctx.free()
    assert ctx.closed
    assert np.array_equal(np.from_dlpack(t), v[[4, 1, 7]])
    assert np.array_equal(t.numpy(), v[[4, 1, 7]]) and t.tolist() == v[[4, 1, 7]].tolist()
    del ctx, buf, t
    assert np.array_equal(arr, v[[4, 1, 7]])  # the numpy view keeps the block


def test_set_device_cpu_on_cpu_keeps_contents(ctx, rng):
    buf = agrl.Buffer(ctx, 4, 8, "bf16")
    v = rng.standard_normal((8, 4)).astype(np.float32)
    buf.write(v)
    g = buf.generation
    t = buf.get_rows([1, 2])
    ctx.reset_transfers()
    ctx.set_device("cpu")
    assert ctx.device == "cpu" and buf.where == "host" and buf.generation == g
    assert ctx.transfer_totals() == (0, 0)
    assert np.array_equal(buf.read(), bf16_round(v))
    assert np.array_equal(np.from_dlpack(t), bf16_round(v)[[1, 2]])


def test_inputs_other_than_numpy(ctx):
    buf = agrl.Buffer(ctx, 4, 6, "i32")
    buf.write(array.array("i", [1, -2, 3, -4]), 0)  # buffer protocol
    buf.write(array.array("d", [5, 6, 7, 8]), 1)  # doubles holding whole numbers
    buf.write([[9, 10, 11, 12], [13, 14, 15, 16]], 2)  # nested lists
    buf.write(np.array([True, False, True, True]), 4)  # bools are 0 / 1
    buf.write((np.int64(-1), 0, 2**31 - 1, -(2**31)), 5)  # tuples of numpy and Python ints
    want = np.array([[1, -2, 3, -4], [5, 6, 7, 8], [9, 10, 11, 12], [13, 14, 15, 16], [1, 0, 1, 1],
                     [-1, 0, 2**31 - 1, -(2**31)]], np.int32)
    assert np.array_equal(buf.read(), want)
    u8 = agrl.Buffer(ctx, 3, 2, "u8")
    u8.write(np.array([[True, True, False], [False, False, True]]))
    assert np.array_equal(u8.read(), [[1, 1, 0], [0, 0, 1]])


def test_f64_input_rounds_through_f32(ctx):
    """Host data of another dtype is converted to f32 first, then stored."""
    buf = agrl.Buffer(ctx, 3, 1)
    v = np.array([0.1, 1e-50, 1.0 + 2.0**-30])
    buf.write(v)
    assert np.array_equal(buf.read(), v.astype(np.float32)[None])


def test_dtype_names_are_accepted(ctx):
    for spec, name in (("float16", "f16"), (np.float16, "f16"), (np.dtype("uint8"), "u8"), ("int32", "i32"),
                       ("bfloat16", "bf16"), (np.float32, "f32"), ("float", "f32")):
        assert agrl.Buffer(ctx, 1, 1, spec).dtype == name


def test_context_reports_itself(ctx):
    assert ctx.device == "cpu" and not ctx.closed and ctx.stream is None
    assert "cpu" in ctx.device_name and "cpu" in repr(ctx)
    ctx.sync()
    st = ctx.stats()
    assert set(st) >= {"allocs", "frees", "live_bytes", "workspace_bytes"}
    with agrl.Context("cpu") as c2:
        b = agrl.Buffer(c2, 2, 2)
    assert c2.closed and b.where == "freed"
    with pytest.raises(agrl.FreedError):
        b.read()


def test_results_computed_before_a_write_keep_the_old_values_s6(ctx):
    buf = agrl.Buffer(ctx, 2, 3)
    buf.write([[1, 2], [3, 4], [5, 6]])
    before = buf.get_rows([1])
    src = np.array([9, 9], np.float32)
    buf.write(src, 1)
    src[:] = 0  # the caller's memory may be reused at once
    assert np.array_equal(np.from_dlpack(before), [[3, 4]])
    assert np.array_equal(np.from_dlpack(buf.get_rows([1])), [[9, 9]])


def test_capacities_beyond_2_to_the_24_s12(ctx):
    cap = 2**24 + 10
    buf = agrl.Buffer(ctx, 1, cap, "u8")
    buf.write([[7], [8]], 2**24 + 4)
    got = np.from_dlpack(buf.get_rows([2**24 + 5, 2**24 + 4, 2**24 + 9, 2**24 - 1, 0]))
    assert got.ravel().tolist() == [8, 7, 0, 0, 0]
    assert buf.read(2**24 + 3, 3).ravel().tolist() == [0, 7, 8]


def test_failed_allocation_names_the_size_and_leaks_nothing_s4(ctx):
    agrl.Buffer(ctx, 4, 4)
    before = ctx.stats()
    ctx.inject_fault("alloc", 0)
    with pytest.raises(agrl.OutOfMemoryError, match=r"3\.8 MB \(4000000 bytes\)"):
        agrl.Buffer(ctx, 1000, 1000)
    after = ctx.stats()
    assert (after["live_bytes"], after["allocs"]) == (before["live_bytes"], before["allocs"])
    assert agrl.Buffer(ctx, 1000, 1000).capacity == 1000  # the fault was used up


def test_failed_transfers_change_nothing(ctx, rng):
    buf = agrl.Buffer(ctx, 4, 6)
    v = rng.standard_normal((6, 4)).astype(np.float32)
    buf.write(v)
    ctx.inject_fault("upload", 0)
    with pytest.raises(agrl.DeviceError, match="upload of 32 bytes failed"):
        buf.write(np.zeros((2, 4), np.float32), 2)
    assert np.array_equal(buf.read(), v)
    ctx.inject_fault("download", 0)
    with pytest.raises(agrl.DeviceError, match="download of 96 bytes failed"):
        buf.read()
    assert np.array_equal(buf.read(), v)
    rb = agrl.ReplayBuffer(ctx, 8, {"x": 2})
    rb.add(x=[[1, 2], [3, 4]])
    ctx.inject_fault("upload", 0)
    with pytest.raises(agrl.DeviceError):
        rb.add(x=[[5, 6]])
    assert (len(rb), rb.position) == (2, 2)
    assert set(map(tuple, np.from_dlpack(rb.sample(64)["x"]).tolist())) == {(1.0, 2.0), (3.0, 4.0)}
    with pytest.raises(agrl.InvalidArgError, match="kind 'disk'"):
        ctx.inject_fault("disk", 0)
