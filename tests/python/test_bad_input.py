"""Bad input from Python: each case asserts the exception's type (agrl's
exceptions subclass agrl.Error and the matching builtin), a part of its
message, and that nothing changed: buffers read back the same, replay
tables keep their length, position, contents and total priority, the DQN
its stored count, update count and greedy actions, environments their
state, the context its live bytes, and a Tensor taken before stays intact.
Wrong dtypes and values, shapes, layouts, Python types, sizes, indices,
freed objects, devices, fields, sampling and priority arguments, DQN
options, actions, seeds and DLPack requests are covered."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import agrl
from pycartpole import PyCartPole
from refs import subprocess_env

FIELDS = {"obs": ((4,), "f32"), "action": ((1,), "i32"), "reward": ((1,), "f32")}
NO_GPU = agrl.cuda_device_count() == 0


class World:
    """One of everything, in a known state."""

    def __init__(self):
        rng = np.random.default_rng(7)
        self.ctx = agrl.Context("cpu")
        self.buf_data = rng.standard_normal((6, 4)).astype(np.float32)
        self.buf = agrl.Buffer(self.ctx, 4, 6)
        self.buf.write(self.buf_data)
        self.u8_data = rng.integers(0, 256, (6, 4)).astype(np.uint8)
        self.u8 = agrl.Buffer(self.ctx, 4, 6, "u8")
        self.u8.write(self.u8_data)
        self.i32_data = rng.integers(-(2**31), 2**31, (6, 4)).astype(np.int32)
        self.i32 = agrl.Buffer(self.ctx, 4, 6, "i32")
        self.i32.write(self.i32_data)
        self.rb_data = {"obs": rng.standard_normal((5, 4)).astype(np.float32),
                        "action": rng.integers(0, 3, (5, 1)).astype(np.int32),
                        "reward": rng.standard_normal((5, 1)).astype(np.float32)}
        self.rb = agrl.ReplayBuffer(self.ctx, 8, FIELDS, seed=1)
        self.rb.add(**self.rb_data)
        self.per = agrl.ReplayBuffer(self.ctx, 8, FIELDS, prioritized=True, seed=2)
        self.per.add(**self.rb_data)
        self.per.update_priorities([0, 1, 2, 3, 4], [0.5, 1.0, 2.0, 3.0, 4.0])
        self.total = self.per.total_priority()
        self.rbmin = agrl.ReplayBuffer(self.ctx, 8, {"x": 1}, min_size=6)
        self.rbmin.add(x=np.arange(5, dtype=np.float32))
        self.dqn = agrl.DQN(self.ctx, 4, 2, hidden=[16], batch_size=8, buffer_size=64, seed=0)
        self.dqn.store(rng.standard_normal((4, 4)), [0, 1, 1, 0], [1.0, 0.0, 1.0, 0.0], rng.standard_normal((4, 4)),
                       [0, 0, 0, 1])
        self.probe = rng.standard_normal((16, 4)).astype(np.float32)
        self.greedy = self.dqn.act(self.probe, explore=False)
        self.env, self.twin = agrl.make("CartPole-v1"), PyCartPole()
        self.env.reset(seed=5)
        self.twin.reset(seed=5)
        for a in (0, 1, 1):
            self.env.step(a)
            self.twin.step(a)
        self.pend, self.pend_twin = agrl.make("Pendulum-v1"), agrl.make("Pendulum-v1")
        self.pend.reset(seed=1)
        self.pend_twin.reset(seed=1)
        self.tensor = self.buf.get_rows([0, 1, 2, 3, 4, 5])
        self.caps = []
        self.freed = set()
        self.live = self.ctx.stats()["live_bytes"]

    def free(self, what):
        getattr(self, what).free()
        self.freed.add(what)

    def _check_table(self, rb, data):
        s = rb.sample(64)
        idx = np.from_dlpack(s["indices"])
        assert ((idx >= 0) & (idx < 5)).all()
        for name in FIELDS:
            assert np.array_equal(np.from_dlpack(s[name]), data[name][idx].astype(np.float32))

    def check_unchanged(self):
        assert np.array_equal(np.from_dlpack(self.tensor), self.buf_data)  # always: its own block
        if "ctx" in self.freed:
            assert self.ctx.closed
            return
        if not self.freed:
            assert self.ctx.stats()["live_bytes"] == self.live  # nothing leaked, nothing freed
        assert self.ctx.device == "cpu"
        if "buf" not in self.freed:
            assert np.array_equal(self.buf.read(), self.buf_data) and self.buf.scale == 1.0
            assert (self.buf.rows, self.buf.capacity, self.buf.dtype, self.buf.where) == (4, 6, "f32", "host")
        assert np.array_equal(self.u8.read(), self.u8_data)
        assert np.array_equal(self.i32.read(), self.i32_data)
        if "rb" not in self.freed:
            assert (len(self.rb), self.rb.position, self.rb.capacity) == (5, 5, 8)
            self._check_table(self.rb, self.rb_data)
        assert (len(self.per), self.per.position) == (5, 5) and self.per.beta == 0.4
        assert self.per.total_priority() == self.total
        self._check_table(self.per, self.rb_data)
        assert len(self.rbmin) == 5
        if "dqn" not in self.freed:
            assert (self.dqn.stored, self.dqn.updates) == (4, 0)
            assert np.array_equal(self.dqn.act(self.probe, explore=False), self.greedy)
        o1, r1, t1, tr1, _ = self.env.step(1)
        o2, r2, t2, tr2, _ = self.twin.step(1)
        assert np.array_equal(o1, o2) and (r1, t1, tr1) == (r2, t2, tr2)
        assert np.array_equal(self.pend.step([0.3])[0], self.pend_twin.step([0.3])[0])


def freed(what, call):
    def case(w):
        w.free(what)
        call(w)
    return case


E = agrl
C = pytest.param
CASES = [
    # ---- Buffer(ctx, rows, capacity, dtype) ----
    C(lambda w: agrl.Buffer(w.ctx, -1, 10), E.InvalidArgError, r"rows = -1 must be a positive", id="buffer-rows-neg"),
    C(lambda w: agrl.Buffer(w.ctx, 0, 10), E.InvalidArgError, r"rows = 0", id="buffer-rows-zero"),
    C(lambda w: agrl.Buffer(w.ctx, 10, -1), E.InvalidArgError, r"capacity = -1", id="buffer-cap-neg"),
    C(lambda w: agrl.Buffer(w.ctx, 10, 2**62), E.OutOfMemoryError, r"overflow", id="buffer-cap-2^62"),
    C(lambda w: agrl.Buffer(w.ctx, 2**40, 2**40), E.OutOfMemoryError, r"1099511627776 x 1099511627776 values",
      id="buffer-2^80-values"),
    C(lambda w: agrl.Buffer(w.ctx, 10, 2**64), E.InvalidArgError, r"Buffer: capacity = 18446744073709551616 is outside", id="buffer-cap-2^64"),
    C(lambda w: agrl.Buffer(w.ctx, 1.5, 10), TypeError, r"Buffer: rows must be an int, not float", id="buffer-rows-float"),
    C(lambda w: agrl.Buffer(w.ctx, "3", 10), TypeError, r"Buffer: rows must be an int, not str", id="buffer-rows-str"),
    C(lambda w: agrl.Buffer(w.ctx, 3, 10, "f64"), E.InvalidArgError, r"dtype 'f64' is not one of", id="buffer-f64"),
    C(lambda w: agrl.Buffer(w.ctx, 3, 10, "i64"), E.InvalidArgError, r"cannot store a buffer", id="buffer-i64"),
    C(lambda w: agrl.Buffer(w.ctx, 3, 10, object()), E.InvalidArgError, r"is not one of", id="buffer-dtype-object"),
    C(lambda w: agrl.Buffer("cpu", 3, 10), TypeError, r"ctx must be an agrl.Context", id="buffer-ctx-str"),
    C(lambda w: agrl.Buffer(None, 3, 10), TypeError, r"not NoneType", id="buffer-ctx-none"),
    # ---- Buffer.write ----
    C(lambda w: w.buf.write("abcd"), TypeError, r"expected an array .* got str", id="write-str"),
    C(lambda w: w.buf.write(None), TypeError, r"got None", id="write-none"),
    C(lambda w: w.buf.write({"a": 1}), TypeError, r"got dict", id="write-dict"),
    C(lambda w: w.buf.write(object()), TypeError, r"got object", id="write-object"),
    C(lambda w: w.buf.write(np.zeros((2, 5), np.float32)), E.ShapeError, r"must be \(k, 4\) or \(4,\)",
      id="write-rows"),
    C(lambda w: w.buf.write(np.zeros((2, 2, 4), np.float32)), E.ShapeError, r"got 3 dimensions", id="write-rank3"),
    C(lambda w: w.buf.write(np.zeros(5, np.float32)), E.ShapeError, r"got 1 dimensions", id="write-vector-5"),
    C(lambda w: w.buf.write(np.zeros((3, 8), np.float32)[:, ::2]), E.ShapeError, r"not C-contiguous",
      id="write-noncontiguous"),
    C(lambda w: w.buf.write(np.zeros((3, 4), np.float32)[::-1]), E.ShapeError, r"negative strides",
      id="write-negative-stride"),
    C(lambda w: w.buf.write(np.asfortranarray(np.zeros((3, 4), np.float32))), E.ShapeError, r"not C-contiguous",
      id="write-fortran"),
    C(lambda w: w.buf.write(np.ones((2, 4), np.float32), 5), E.OutOfRangeError,
      r"columns 5\.\.6 are outside the buffer \(capacity 6\)", id="write-past-end"),
    C(lambda w: w.buf.write(np.ones((1, 4), np.float32), -1), E.OutOfRangeError, r"col_offset = -1",
      id="write-offset-neg"),
    C(lambda w: w.buf.write(np.ones((7, 4), np.float32)), E.OutOfRangeError, r"outside the buffer",
      id="write-too-many"),
    C(lambda w: w.buf.write(np.ones((1, 4)), 1.5), TypeError, r"Buffer.write: col_offset must be an int", id="write-offset-float"),
    C(lambda w: w.buf.write(np.array(["a", "b", "c", "d"])), TypeError, r"not a number", id="write-unicode-array"),
    C(lambda w: w.buf.write(np.ones(4, np.complex64)), TypeError, r"complex64|'Zf' is not a number", id="write-complex"),
    C(lambda w: w.buf.write([[1, 2, 3], [4, 5]]), E.ShapeError, r"not rectangular", id="write-ragged-list"),
    C(lambda w: w.buf.write([["a", 1, 2, 3]]), TypeError, r"expected numbers, got str", id="write-list-of-str"),
    C(lambda w: w.buf.write([[1, 2, 3, None]]), TypeError, r"got NoneType", id="write-list-with-none"),
    C(lambda w: w.buf.set_scale(float("inf")), E.InvalidArgError, r"not finite", id="scale-inf"),
    C(lambda w: w.buf.set_scale("2"), TypeError, r"set_scale: scale must be a number", id="scale-str"),
    C(lambda w: w.u8.write([[1, 2, 3, 256]]), E.OutOfRangeError, r"value 256 at position 3 does not fit u8",
      id="u8-256"),
    C(lambda w: w.u8.write([[1, 2, 3, -1]]), E.OutOfRangeError, r"value -1 .* does not fit u8", id="u8-neg"),
    C(lambda w: w.u8.write(np.array([[1, 2, 3, 1.5]])), E.OutOfRangeError,
      r"value 1\.5 at position 3 is not a whole number that fits u8", id="u8-fraction"),
    C(lambda w: w.u8.write(np.array([[0, 0, 0, np.nan]], np.float32)), E.OutOfRangeError, r"value nan",
      id="u8-nan"),
    C(lambda w: w.i32.write(np.array([[0, 0, 0, 2**31]], np.int64)), E.OutOfRangeError, r"does not fit i32",
      id="i32-2^31"),
    C(lambda w: w.i32.write(np.array([[0, 0, 0, 0.25]])), E.OutOfRangeError, r"value 0\.25 .* fits i32",
      id="i32-fraction"),
    C(lambda w: w.i32.write(np.array([[0, 0, 0, np.inf]])), E.OutOfRangeError, r"value inf", id="i32-inf"),
    C(lambda w: w.i32.write([[0, 0, 0, 2**70]]), OverflowError, r"too large|too big", id="i32-2^70"),
    # ---- Buffer.read ----
    C(lambda w: w.buf.read(-1), E.OutOfRangeError, r"columns -1\.\.5 are outside", id="read-offset-neg"),
    C(lambda w: w.buf.read(0, 7), E.OutOfRangeError, r"capacity 6", id="read-too-many"),
    C(lambda w: w.buf.read(0, -1), E.InvalidArgError, r"k = -1 must not be negative", id="read-k-neg"),
    C(lambda w: w.buf.read(dtype="u8"), E.ShapeError, r"cannot be read as u8", id="read-as-u8"),
    C(lambda w: w.buf.read(dtype="f64"), E.InvalidArgError, r"dtype 'f64'", id="read-as-f64"),
    C(lambda w: w.buf.read("0"), TypeError, r"Buffer.read: col_offset must be an int", id="read-offset-str"),
    # ---- Buffer.get_rows ----
    C(lambda w: w.buf.get_rows([]), E.InvalidArgError, r"at least one index", id="rows-empty"),
    C(lambda w: w.buf.get_rows([0, 6]), E.OutOfRangeError, r"idx\[1\] = 6 is outside 0\.\.5", id="rows-past-end"),
    C(lambda w: w.buf.get_rows([-1]), E.OutOfRangeError, r"idx\[0\] = -1 is outside", id="rows-neg"),
    C(lambda w: w.buf.get_rows(np.array([2, 2**40])), E.OutOfRangeError, r"outside 0\.\.5", id="rows-huge"),
    C(lambda w: w.buf.get_rows([[0]]), E.ShapeError, r"one-dimensional", id="rows-2d"),
    C(lambda w: w.buf.get_rows([0.5]), E.OutOfRangeError, r"value 0\.5 .* not a whole number", id="rows-fraction"),
    C(lambda w: w.buf.get_rows("0"), TypeError, r"got str", id="rows-str"),
    C(lambda w: w.buf.get_rows(None), TypeError, r"got None", id="rows-none"),
    C(lambda w: w.buf.get_rows(np.array([1, 2], np.uint64) << np.uint64(63)), E.OutOfRangeError, r"fits i64",
      id="rows-u64"),
    # ---- freed objects ----
    C(freed("buf", lambda w: w.buf.read()), E.FreedError, r"has been freed", id="freed-buf-read"),
    C(freed("buf", lambda w: w.buf.write(np.zeros(4))), E.FreedError, r"has been freed", id="freed-buf-write"),
    C(freed("buf", lambda w: w.buf.get_rows([0])), E.FreedError, r"has been freed", id="freed-buf-rows"),
    C(freed("buf", lambda w: w.buf.wait()), E.FreedError, r"has been freed", id="freed-buf-wait"),
    C(freed("rb", lambda w: w.rb.sample(1)), E.FreedError, r"freed", id="freed-rb-sample"),
    C(freed("rb", lambda w: w.rb.add(**w.rb_data)), E.FreedError, r"freed", id="freed-rb-add"),
    C(freed("rb", lambda w: len(w.rb)), E.FreedError, r"freed", id="freed-rb-len"),
    C(freed("rb", lambda w: w.rb.position), E.FreedError, r"freed", id="freed-rb-position"),
    C(freed("dqn", lambda w: w.dqn.train(1)), E.FreedError, r"DQN has been freed", id="freed-dqn-train"),
    C(freed("dqn", lambda w: w.dqn.act(np.zeros(4))), E.FreedError, r"DQN has been freed", id="freed-dqn-act"),
    C(freed("ctx", lambda w: w.buf.read()), E.FreedError, r"context has been freed", id="freed-ctx-buf-read"),
    C(freed("ctx", lambda w: w.u8.write([1, 2, 3, 4])), E.FreedError, r"context", id="freed-ctx-buf-write"),
    C(freed("ctx", lambda w: w.rb.add(**w.rb_data)), E.FreedError, r"freed", id="freed-ctx-rb-add"),
    C(freed("ctx", lambda w: w.rb.sample(2)), E.FreedError, r"freed", id="freed-ctx-rb-sample"),
    C(freed("ctx", lambda w: w.per.total_priority()), E.FreedError, r"freed", id="freed-ctx-per-total"),
    C(freed("ctx", lambda w: len(w.rb)), E.FreedError, r"freed", id="freed-ctx-rb-len"),
    C(freed("ctx", lambda w: w.dqn.act(w.probe)), E.FreedError, r"freed", id="freed-ctx-dqn-act"),
    C(freed("ctx", lambda w: w.dqn.store(np.zeros(4), 0, 0.0, np.zeros(4), 0)), E.FreedError, r"freed",
      id="freed-ctx-dqn-store"),
    C(freed("ctx", lambda w: agrl.Buffer(w.ctx, 2, 2)), E.FreedError, r"context has been freed",
      id="freed-ctx-new-buffer"),
    C(freed("ctx", lambda w: agrl.ReplayBuffer(w.ctx, 4, FIELDS)), E.FreedError, r"context has been freed",
      id="freed-ctx-new-replay"),
    C(freed("ctx", lambda w: agrl.DQN(w.ctx, 4, 2)), E.FreedError, r"context has been freed", id="freed-ctx-new-dqn"),
    C(freed("ctx", lambda w: w.ctx.sync()), E.FreedError, r"context has been freed", id="freed-ctx-sync"),
    C(freed("ctx", lambda w: w.ctx.transfers()), E.FreedError, r"context has been freed", id="freed-ctx-transfers"),
    C(freed("ctx", lambda w: w.ctx.set_device("cpu")), E.FreedError, r"context has been freed",
      id="freed-ctx-set-device"),
    C(freed("ctx", lambda w: w.ctx.device), E.FreedError, r"context has been freed", id="freed-ctx-device"),
    # ---- devices ----
    C(lambda w: agrl.Context("gpu"), E.InvalidArgError, r"device 'gpu' is not", id="device-gpu"),
    C(lambda w: agrl.Context("cuda:x"), E.InvalidArgError, r"device 'cuda:x'", id="device-cuda-x"),
    C(lambda w: agrl.Context("cuda:-1"), E.InvalidArgError, r"device 'cuda:-1'", id="device-cuda-neg"),
    C(lambda w: agrl.Context("cuda:"), E.InvalidArgError, r"device 'cuda:'", id="device-cuda-colon"),
    C(lambda w: agrl.Context("vulkan:x"), E.InvalidArgError, r"device .vulkan:x.", id="device-vulkan-x"),
    C(lambda w: agrl.Context("vulkan:-1"), E.InvalidArgError, r"device .vulkan:-1.", id="device-vulkan-neg"),
    C(lambda w: agrl.Context("vulkanx"), E.InvalidArgError, r"device .vulkanx.", id="device-vulkan-suffix"),
    C(lambda w: agrl.Context(""), E.InvalidArgError, r"device ''", id="device-empty"),
    C(lambda w: agrl.Context("cuda:+1"), E.InvalidArgError, r"device 'cuda:\+1'", id="device-cuda-plus"),
    C(lambda w: agrl.Context("cuda: 1"), E.InvalidArgError, r"device 'cuda: 1'", id="device-cuda-blank"),
    C(lambda w: agrl.Context("cuda:1x"), E.InvalidArgError, r"device 'cuda:1x'", id="device-cuda-trailing"),
    C(lambda w: agrl.Context("cuda:1024"), E.InvalidArgError, r"device 'cuda:1024'", id="device-cuda-1024"),
    C(lambda w: agrl.Context("vulkan:99999999999999999999"), E.InvalidArgError, r"device 'vulkan:9+'",
      id="device-vulkan-huge"),
    C(lambda w: agrl.Context("CPU"), E.InvalidArgError, r"device 'CPU'", id="device-upper-case"),
    C(lambda w: agrl.Context("cpu\0x"), E.InvalidArgError, r"device 'cpu", id="device-nul-inside"),
    C(lambda w: agrl.Context(0), TypeError, r"device must be a string", id="device-int"),
    C(lambda w: w.ctx.set_device("tpu"), E.InvalidArgError, r"device 'tpu'", id="set-device-tpu"),
    C(lambda w: agrl.Context("cuda"), E.NoDeviceError, r"(?i)cuda|device", id="device-cuda-absent",
      marks=pytest.mark.skipif(not NO_GPU, reason="a CUDA device is present")),
    C(lambda w: w.ctx.set_device("cuda:0"), E.NoDeviceError, r"(?i)cuda|device", id="set-device-cuda-absent",
      marks=pytest.mark.skipif(not NO_GPU, reason="a CUDA device is present")),
    # ---- ReplayBuffer(...) ----
    C(lambda w: agrl.ReplayBuffer(w.ctx, 0, FIELDS), E.InvalidArgError, r"capacity = 0", id="replay-cap-zero"),
    C(lambda w: agrl.ReplayBuffer(w.ctx, -1, FIELDS), E.InvalidArgError, r"capacity = -1", id="replay-cap-neg"),
    C(lambda w: agrl.ReplayBuffer(w.ctx, 2**62, FIELDS), E.OutOfMemoryError, r"overflow", id="replay-cap-2^62"),
    C(lambda w: agrl.ReplayBuffer(w.ctx, 8, {}), TypeError, r"non-empty dict", id="replay-no-fields"),
    C(lambda w: agrl.ReplayBuffer(w.ctx, 8, [("obs", 4)]), TypeError, r"dict", id="replay-fields-list"),
    C(lambda w: agrl.ReplayBuffer(w.ctx, 8, {"obs": (0,)}), E.InvalidArgError, r"dimension of size 0",
      id="replay-width-zero"),
    C(lambda w: agrl.ReplayBuffer(w.ctx, 8, {"obs": (4, -2)}), E.InvalidArgError, r"size -2", id="replay-width-neg"),
    C(lambda w: agrl.ReplayBuffer(w.ctx, 8, {"obs": (4.0,)}), TypeError, r"sizes must be ints",
      id="replay-width-float"),
    C(lambda w: agrl.ReplayBuffer(w.ctx, 8, {"obs": ((4,), "f64")}), E.InvalidArgError, r"dtype 'f64'",
      id="replay-field-f64"),
    C(lambda w: agrl.ReplayBuffer(w.ctx, 8, {"": 1}), E.InvalidArgError, r"non-empty strings", id="replay-name-empty"),
    C(lambda w: agrl.ReplayBuffer(w.ctx, 8, {3: 1}), E.InvalidArgError, r"non-empty strings", id="replay-name-int"),
    C(lambda w: agrl.ReplayBuffer(w.ctx, 8, FIELDS, storage="i64"), E.InvalidArgError, r"cannot store",
      id="replay-storage-i64"),
    C(lambda w: agrl.ReplayBuffer(w.ctx, 8, FIELDS, min_size=9), E.InvalidArgError, r"min_size = 9",
      id="replay-min-size"),
    C(lambda w: agrl.ReplayBuffer(w.ctx, 8, FIELDS, prioritized=True, alpha=2), E.InvalidArgError, r"alpha = 2",
      id="replay-alpha"),
    C(lambda w: agrl.ReplayBuffer(w.ctx, 8, FIELDS, beta=-0.5), E.InvalidArgError, r"beta = -0\.5 is outside",
      id="replay-beta"),
    C(lambda w: agrl.ReplayBuffer(w.ctx, 8, FIELDS, seed=-1), E.InvalidArgError, r"ReplayBuffer: seed = -1 is outside 0 \.\. 2\^64-1", id="replay-seed-neg"),
    C(lambda w: agrl.ReplayBuffer(w.ctx, 8, FIELDS, seed="1"), TypeError, r"ReplayBuffer: seed must be an int", id="replay-seed-str"),
    C(lambda w: agrl.ReplayBuffer("gpu", 8, FIELDS), E.InvalidArgError, r"device 'gpu'", id="replay-ctx-gpu"),
    # ---- ReplayBuffer.add ----
    C(lambda w: w.rb.add(obs=np.zeros(4), action=1), E.InvalidArgError, r"field 'reward' is missing",
      id="add-missing"),
    C(lambda w: w.rb.add(obs=np.zeros(4), action=1, reward=0.0, done=1), E.InvalidArgError,
      r"has no field 'done'", id="add-unknown"),
    C(lambda w: w.rb.add(obs=np.zeros(4), action=1, rewards=0.0), E.InvalidArgError, r"(missing|no field)",
      id="add-misspelt"),
    C(lambda w: w.rb.add(obs=np.zeros((2, 4)), action=[1, 2, 0], reward=[1.0, 2.0]), E.ShapeError,
      r"field 'action' has 3 transitions, field 'obs' 2", id="add-batch-mismatch"),
    C(lambda w: w.rb.add(obs=np.zeros((3, 4)), action=[1, 2, 0], reward=[1.0, 2.0]), E.ShapeError,
      r"field 'reward' has 2 transitions", id="add-batch-mismatch-last"),
    C(lambda w: w.rb.add(obs=np.zeros(3), action=1, reward=0.0), E.ShapeError,
      r"field 'obs': shape does not match", id="add-obs-width"),
    C(lambda w: w.rb.add(obs=np.zeros((2, 2, 4)), action=[1, 2], reward=[0.0, 0.0]), E.ShapeError,
      r"field 'obs'", id="add-obs-rank"),
    C(lambda w: w.rb.add(obs=np.zeros(4), action=1.5, reward=0.0), E.OutOfRangeError,
      r"field 'action': value 1\.5 .* not a whole number that fits i32", id="add-action-fraction"),
    C(lambda w: w.rb.add(obs=np.zeros(4), action=2**40, reward=0.0), E.OutOfRangeError, r"does not fit i32",
      id="add-action-2^40"),
    C(lambda w: w.rb.add(obs="abcd", action=1, reward=0.0), TypeError, r"field 'obs': expected an array",
      id="add-obs-str"),
    C(lambda w: w.rb.add(obs=None, action=1, reward=0.0), TypeError, r"field 'obs': expected an array, got None",
      id="add-obs-none"),
    C(lambda w: w.rb.add(obs=np.zeros((3, 8), np.float32)[:, ::2], action=[0, 0, 0], reward=[0.0] * 3),
      E.ShapeError, r"not C-contiguous", id="add-noncontiguous"),
    C(lambda w: w.rb.add(obs=np.zeros((3, 4), np.float32)[::-1], action=[0, 0, 0], reward=[0.0] * 3), E.ShapeError,
      r"negative strides", id="add-negative-stride"),
    C(lambda w: w.rb.add(np.zeros(4), 1, 0.0), TypeError, r"keywords", id="add-positional"),
    C(lambda w: w.rb.add(), E.InvalidArgError, r"field 'obs' is missing", id="add-nothing"),
    C(lambda w: w.rb.add(obs=np.zeros((9, 4)), action=np.zeros(9, np.int32), reward=np.zeros(9)), E.OutOfRangeError,
      r"9 transitions do not fit a table of 8", id="add-more-than-capacity"),
    # ---- sample ----
    C(lambda w: w.rb.sample(0), E.InvalidArgError, r"B = 0 must be positive", id="sample-0"),
    C(lambda w: w.rb.sample(-3), E.InvalidArgError, r"B = -3 must be positive", id="sample-neg"),
    C(lambda w: w.rb.sample("3"), TypeError, r"batch_size must be an int, not str", id="sample-str"),
    C(lambda w: w.rb.sample(3.0), TypeError, r"not float", id="sample-float"),
    C(lambda w: w.rb.sample(None), TypeError, r"not NoneType", id="sample-none"),
    C(lambda w: w.rb.sample(2**40), E.InvalidArgError, r"too large", id="sample-huge"),
    C(lambda w: w.rb.sample(), TypeError, r"batch_size", id="sample-no-args"),
    C(lambda w: w.rb.sample(4, size=2), TypeError, r"unexpected .* 'size'", id="sample-bad-keyword"),
    C(lambda w: w.rbmin.sample(2), E.StateError, r"holds 5 transitions, fewer than its minimum 6",
      id="sample-before-min-size"),
    C(lambda w: w.per.sample(4, beta=2.0), E.InvalidArgError, r"beta = 2", id="sample-beta-keyword"),
    C(lambda w: w.per.sample(4, 1.5), E.InvalidArgError, r"beta = 1\.5", id="sample-beta"),
    C(lambda w: setattr(w.per, "beta", 1.5), E.InvalidArgError, r"beta = 1\.5 is outside", id="set-beta"),
    C(lambda w: setattr(w.per, "beta", "x"), TypeError, r"beta must be a number", id="set-beta-str"),
    # ---- priorities ----
    C(lambda w: w.rb.update_priorities([0], [1.0]), E.StateError, r"without prioritized=True",
      id="priorities-uniform"),
    C(lambda w: w.rb.total_priority(), E.StateError, r"without prioritized=True", id="total-uniform"),
    C(lambda w: w.per.update_priorities([0, 1], [1.0]), E.ShapeError, r"2 indices and 1 priorities",
      id="priorities-lengths"),
    C(lambda w: w.per.update_priorities([0, 1], [1.0, -1.0]), E.InvalidArgError,
      r"priorities\[1\] = -1 must be finite and >= 0", id="priorities-negative"),
    C(lambda w: w.per.update_priorities([0], [np.nan]), E.InvalidArgError, r"nan", id="priorities-nan"),
    C(lambda w: w.per.update_priorities([0], [np.inf]), E.InvalidArgError, r"inf", id="priorities-inf"),
    C(lambda w: w.per.update_priorities([5], [1.0]), E.OutOfRangeError, r"idx\[0\] = 5 is outside the 5 valid",
      id="priorities-index-past-size"),
    C(lambda w: w.per.update_priorities([-1], [1.0]), E.OutOfRangeError, r"idx\[0\] = -1", id="priorities-index-neg"),
    C(lambda w: w.per.update_priorities([], []), E.InvalidArgError, r"n >= 1", id="priorities-empty"),
    C(lambda w: w.per.update_priorities([0.5], [1.0]), E.OutOfRangeError, r"0\.5", id="priorities-index-fraction"),
    C(lambda w: w.per.update_priorities("0", [1.0]), TypeError, r"got str", id="priorities-index-str"),
    C(lambda w: w.per.update_priorities([0]), TypeError, r"missing required argument 'priorities'", id="priorities-one-arg"),
    # ---- DQN(...) ----
    C(lambda w: agrl.DQN(w.ctx, 4, 2, foo=1), E.InvalidArgError, r"unknown option 'foo'", id="dqn-unknown-option"),
    C(lambda w: agrl.DQN(w.ctx, 4, 2, lr=-1), E.InvalidArgError, r"lr = -1", id="dqn-lr"),
    C(lambda w: agrl.DQN(w.ctx, 4, 2, gamma=2), E.InvalidArgError, r"gamma = 2", id="dqn-gamma"),
    C(lambda w: agrl.DQN(w.ctx, 4, 2, batch_size=0), E.InvalidArgError, r"batch_size = 0", id="dqn-batch"),
    C(lambda w: agrl.DQN(w.ctx, 4, 2, hidden=[0]), E.InvalidArgError, r"hidden\[0\] = 0", id="dqn-hidden-0"),
    C(lambda w: agrl.DQN(w.ctx, 4, 2, hidden=[8] * 9), E.InvalidArgError, r"at most 8", id="dqn-hidden-9"),
    C(lambda w: agrl.DQN(w.ctx, 4, 2, hidden=5), TypeError, r"sequence", id="dqn-hidden-int"),
    C(lambda w: agrl.DQN(w.ctx, 4, 2, batch_size=1.5), TypeError, r"batch_size must be an int", id="dqn-batch-float"),
    C(lambda w: agrl.DQN(w.ctx, 4, 2, lr="x"), TypeError, r"DQN: lr must be a number", id="dqn-lr-str"),
    C(lambda w: agrl.DQN(w.ctx, 4, 2, tau=0), E.InvalidArgError, r"tau = 0", id="dqn-tau"),
    C(lambda w: agrl.DQN(w.ctx, 4, 2, eps_end=1.5), E.InvalidArgError, r"eps_end", id="dqn-eps-end"),
    C(lambda w: agrl.DQN(w.ctx, 4, 2, buffer_size=10, batch_size=20), E.InvalidArgError,
      r"buffer_size = 10 is smaller than batch_size", id="dqn-buffer-batch"),
    C(lambda w: agrl.DQN(w.ctx, 4, 2, train_freq=0), E.InvalidArgError, r"train_freq", id="dqn-train-freq"),
    C(lambda w: agrl.DQN(w.ctx, 0, 2), E.InvalidArgError, r"obs_dim = 0", id="dqn-obs-dim"),
    C(lambda w: agrl.DQN(w.ctx, 4, 1), E.InvalidArgError, r"n_actions = 1", id="dqn-n-actions"),
    C(lambda w: agrl.DQN(w.ctx, 4, 2, total_steps=0), E.InvalidArgError, r"total_steps = 0", id="dqn-total-steps"),
    C(lambda w: agrl.DQN(w.ctx, 4, 2, seed=-1), E.InvalidArgError, r"DQN: seed = -1 is outside", id="dqn-seed"),
    C(lambda w: agrl.DQN("gpu", 4, 2), E.InvalidArgError, r"device 'gpu'", id="dqn-ctx-gpu"),
    # ---- DQN calls ----
    C(lambda w: w.dqn.act(np.zeros(5)), E.ShapeError, r"expected \(n, 4\) or \(4,\)", id="act-obs-width"),
    C(lambda w: w.dqn.act(np.zeros((2, 2, 4))), E.ShapeError, r"expected \(n, 4\)", id="act-obs-rank"),
    C(lambda w: w.dqn.act(np.zeros((0, 4))), E.InvalidArgError, r"no observations", id="act-no-obs"),
    C(lambda w: w.dqn.act("abcd"), TypeError, r"got str", id="act-str"),
    C(lambda w: w.dqn.act(None), TypeError, r"got None", id="act-none"),
    C(lambda w: w.dqn.act(np.zeros((3, 8))[:, ::2]), E.ShapeError, r"not C-contiguous", id="act-noncontiguous"),
    C(lambda w: w.dqn.store(np.zeros(4), 2, 1.0, np.zeros(4), 0), E.OutOfRangeError,
      r"actions\[0\] = 2 is outside 0\.\.1", id="store-action-2"),
    C(lambda w: w.dqn.store(np.zeros(4), -1, 1.0, np.zeros(4), 0), E.OutOfRangeError, r"actions\[0\] = -1",
      id="store-action-neg"),
    C(lambda w: w.dqn.store(np.zeros((2, 4)), [0, 5], [1.0, 1.0], np.zeros((2, 4)), [0, 0]), E.OutOfRangeError,
      r"actions\[1\] = 5", id="store-batch-action-5"),
    C(lambda w: w.dqn.store(np.zeros(4), 0.5, 1.0, np.zeros(4), 0), E.OutOfRangeError, r"value 0\.5",
      id="store-action-fraction"),
    C(lambda w: w.dqn.store(np.zeros(4), 1, 1.0, np.zeros(4), 2), E.OutOfRangeError, r"terminated\[0\] = 2",
      id="store-terminated-2"),
    C(lambda w: w.dqn.store(np.zeros(4), 1, 1.0, np.zeros(5), 0), E.ShapeError, r"next_obs", id="store-next-obs"),
    C(lambda w: w.dqn.store(np.zeros((2, 4)), [1, 0], [1.0], np.zeros((2, 4)), [0, 0]), E.ShapeError,
      r"reward: 1 values for 2 transitions", id="store-rewards"),
    C(lambda w: w.dqn.store(np.zeros((2, 4)), [1, 0], [1.0, 0.0], np.zeros((3, 4)), [0, 0]), E.ShapeError,
      r"different shapes", id="store-obs-next-obs"),
    C(lambda w: w.dqn.store(np.zeros(4), None, 1.0, np.zeros(4), 0), TypeError, r"action: expected an array",
      id="store-action-none"),
    C(lambda w: w.dqn.train(-1), E.InvalidArgError, r"n < 0", id="train-neg"),
    C(lambda w: w.dqn.train(1), E.StateError, r"fewer than its minimum 8", id="train-too-few"),
    C(lambda w: w.dqn.train("1"), TypeError, r"DQN.train: gradient_steps must be an int", id="train-str"),
    C(lambda w: w.dqn.load_policy("/nonexistent/q.agrl"), E.IoError, r"cannot open", id="load-missing"),
    C(lambda w: w.dqn.save_policy("/nonexistent/dir/q.agrl"), E.IoError, r"cannot create", id="save-bad-dir"),
    C(lambda w: w.dqn.load_policy(3.5), TypeError, r"os.PathLike", id="load-float"),
    C(lambda w: agrl.DQN.load(w.ctx, "/nonexistent/d.agrl"), E.IoError, r"cannot open", id="dqn-load-missing"),
    C(lambda w: w.dqn.save("/nonexistent/dir/d.agrl"), E.IoError, r"cannot create", id="dqn-save-bad-dir"),
    C(lambda w: agrl.DQN.load(w.ctx, 3.5), TypeError, r"os.PathLike", id="dqn-load-float"),
    # ---- environments ----
    C(lambda w: w.env.step(2), E.OutOfRangeError, r"action 2 is outside 0\.\.1", id="step-2"),
    C(lambda w: w.env.step(-1), E.OutOfRangeError, r"action -1 is outside", id="step-neg"),
    C(lambda w: w.env.step(0.5), E.InvalidArgError, r"action 0\.5 is not a whole number", id="step-half"),
    C(lambda w: w.env.step(np.float64(0.9999999999)), E.InvalidArgError, r"not a whole number", id="step-almost-1"),
    C(lambda w: w.env.step(np.nan), E.InvalidArgError, r"nan", id="step-nan"),
    C(lambda w: w.env.step(2.0), E.OutOfRangeError, r"action 2 is outside", id="step-2.0"),
    C(lambda w: w.env.step("a"), TypeError, r"got str", id="step-str"),
    C(lambda w: w.env.step(None), TypeError, r"got None", id="step-none"),
    C(lambda w: w.env.step([0, 1]), E.ShapeError, r"has 2 values, the environment takes 1", id="step-two-values"),
    C(lambda w: w.env.step(2**70), OverflowError, r"too big", id="step-huge-int"),
    C(lambda w: w.pend.step([np.nan]), E.InvalidArgError, r"not a finite number", id="pendulum-nan"),
    C(lambda w: w.pend.step([1.0, 2.0]), E.ShapeError, r"has 2 values", id="pendulum-two-values"),
    C(lambda w: w.env.reset(seed=-1), E.InvalidArgError, r"seed must be an int in 0 \.\. 2\^64-1, not -1",
      id="reset-seed-neg"),
    C(lambda w: w.env.reset(seed=2**64), E.InvalidArgError, r"not 18446744073709551616", id="reset-seed-2^64"),
    C(lambda w: w.env.reset(seed=1.5), E.InvalidArgError, r"not 1\.5", id="reset-seed-float"),
    C(lambda w: w.env.reset(seed="1"), E.InvalidArgError, r"not '1'", id="reset-seed-str"),
    C(lambda w: w.env.reset(seed=True), E.InvalidArgError, r"not True", id="reset-seed-bool"),
    C(lambda w: w.env.reset(seed=np.int64(-3)), E.InvalidArgError, r"not np.int64\(-3\)|not -3",
      id="reset-seed-numpy-neg"),
    C(lambda w: agrl.make("nope"), E.InvalidArgError, r"unknown environment \"nope\"; known: cartpole",
      id="make-unknown"),
    C(lambda w: agrl.make(3), TypeError, r"name must be a string", id="make-int"),
    C(lambda w: agrl.derive_seed(-1, 0), E.InvalidArgError, r"derive_seed: seed = -1 is outside", id="derive-seed-neg"),
    C(lambda w: agrl.derive_seed("1", 0), TypeError, r"derive_seed: seed must be an int", id="derive-seed-str"),
    C(lambda w: agrl.derive_seed(0, 2**64), E.InvalidArgError, r"derive_seed: index = 18446744073709551616 is outside", id="derive-seed-index-2^64"),
    # ---- DLPack requests agrl cannot meet ----
    C(lambda w: w.tensor.__dlpack__(stream=0), BufferError, r"stream=None only", id="dlpack-stream-0"),
    C(lambda w: w.tensor.__dlpack__(copy=True), BufferError, r"copy=True is not supported", id="dlpack-copy"),
    C(lambda w: w.tensor.__dlpack__(dl_device=(2, 0)), BufferError, r"exported to \(2, 0\)", id="dlpack-cuda"),
    C(lambda w: w.tensor.__dlpack__(stream="s"), TypeError, r"stream must be None or an int", id="dlpack-stream-str"),
    C(lambda w: w.tensor.__dlpack__(max_version="1.0"), TypeError, r"max_version must be a tuple",
      id="dlpack-version-str"),
    C(lambda w: w.tensor.__dlpack__(None), TypeError, r"keyword arguments only", id="dlpack-positional"),
    C(lambda w: w.tensor.__dlpack__(dl_device=[1, 0]), TypeError, r"dl_device must be a tuple",
      id="dlpack-device-list"),
    # ---- producers that break the DLPack protocol ----
    C(lambda w: w.buf.write(Producer(device=[1, 0])), TypeError, r"did not return a tuple", id="producer-device-list"),
    C(lambda w: w.buf.write(Producer(capsule="x")), TypeError, r"did not return a DLPack capsule",
      id="producer-not-a-capsule"),
    C(lambda w: w.buf.write(Producer(device=(7, 0))), E.InvalidArgError, r"DLPack device type 7",
      id="producer-device-7"),
    C(lambda w: w.buf.write(Producer(device=(2, 0))), E.InvalidArgError, r"cuda:0 is not taken here|on cuda:0",
      id="producer-cuda-array"),
    C(lambda w: w.buf.write(Producer(error=RuntimeError("producer failed"))), RuntimeError, r"producer failed",
      id="producer-raises"),
]


class Producer:
    """An object with __dlpack__ that misbehaves as told."""

    def __init__(self, device=(1, 0), capsule=None, error=None):
        self.device, self.capsule, self.error = device, capsule, error

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, **kwargs):
        if self.error:
            raise self.error
        return self.capsule if self.capsule is not None else np.zeros(4, np.float32).__dlpack__(**kwargs)


@pytest.fixture
def world():
    w = World()
    yield w
    if not w.ctx.closed:
        w.ctx.free()


@pytest.mark.parametrize("call,exc,match", CASES)
def test_bad_input(world, call, exc, match):
    if issubclass(exc, agrl.Error):
        assert exc is not agrl.Error
    with pytest.raises(exc, match=match) as info:
        call(world)
    if isinstance(info.value, agrl.Error):
        assert info.value.status.startswith("AG_ERR_")
    world.check_unchanged()


def test_there_are_enough_cases():
    assert len(CASES) >= 60


@pytest.mark.parametrize("exc,builtin,status", [
    (agrl.InvalidArgError, ValueError, "AG_ERR_INVALID_ARG"), (agrl.ShapeError, ValueError, "AG_ERR_SHAPE"),
    (agrl.OutOfRangeError, IndexError, "AG_ERR_OUT_OF_RANGE"),
    (agrl.OutOfMemoryError, MemoryError, "AG_ERR_OUT_OF_MEMORY"), (agrl.IoError, OSError, "AG_ERR_IO"),
    (agrl.UnsupportedError, NotImplementedError, "AG_ERR_UNSUPPORTED"),
    (agrl.TimeoutError, TimeoutError, "AG_ERR_TIMEOUT"), (agrl.FreedError, RuntimeError, "AG_ERR_FREED"),
    (agrl.StateError, RuntimeError, "AG_ERR_STATE"), (agrl.NoDeviceError, RuntimeError, "AG_ERR_NO_DEVICE"),
    (agrl.DeviceError, RuntimeError, "AG_ERR_DEVICE"), (agrl.InvalidatedError, RuntimeError, "AG_ERR_INVALIDATED"),
])
def test_exception_classes(exc, builtin, status):
    assert issubclass(exc, agrl.Error) and issubclass(exc, builtin) and issubclass(agrl.Error, RuntimeError)
    assert exc.status == status
    with pytest.raises(builtin):  # code that catches the builtin catches agrl's
        raise exc("x")


def test_the_world_check_catches_a_change(world):
    """The check that every case ends with is not vacuous."""
    world.buf.write(np.zeros(4, np.float32), 2)
    with pytest.raises(AssertionError):
        world.check_unchanged()
    w2 = World()
    w2.rb.add(**{k: v[:1] for k, v in w2.rb_data.items()})
    with pytest.raises(AssertionError):
        w2.check_unchanged()
    w3 = World()
    w3.env.step(0)
    with pytest.raises(AssertionError):
        w3.check_unchanged()
    for w in (w2, w3):
        w.ctx.free()


def test_garbage_never_crashes(tmp_path):
    """garbage_calls.py: every call with garbage arguments, and every method
    after the context is freed, raises an exception (never SystemError) and
    the interpreter exits normally."""
    script = Path(__file__).with_name("garbage_calls.py")
    r = subprocess.run([sys.executable, "-X", "dev", str(script)], cwd=tmp_path, env=subprocess_env(),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().splitlines()[-1] == "done 0", r.stdout[-3000:]
