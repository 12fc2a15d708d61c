"""agrl.FrameReplayBuffer against an independent reference.

The reference (`Ref`) keeps every entry ever added, in order, and applies
agrl/frames.h's rules itself: which entries are held, which may be sampled,
and the stacks (an episode's first frame repeated into the older slots).
Every stack the table gives is compared with it bit for bit, as uint8 and
as float32 v / 255; the Gymnasium wrapper FrameStackObservation(padding_type=
"reset") over a small environment of known frames is a second reference.

The CUDA tests skip without a device, unless AGRL_REQUIRE_GPU=1 (the GPU
script sets it), where a missing device or torch is a failure. On Vulkan
(where a device is found) only the refusal of sample(out=) runs here; the C
tests check Vulkan's stacks."""

import math
import os

import numpy as np
import pytest

import agrl

REQUIRE = os.environ.get("AGRL_REQUIRE_GPU") == "1"
FIELDS = {"action": ((), "i64"), "reward": ((), "f32"), "aux": ((2,), "f32")}


class Ref:
    """The table as frames.h describes it, from the raw entries."""

    def __init__(self, capacity, h, w, c, stack, n_envs):
        self.capacity, self.h, self.w, self.c, self.k, self.n = capacity, h, w, c, stack, n_envs
        self.frames, self.first, self.fields = [], [], []

    def add(self, frames, first, fields):
        for j in range(len(frames)):
            self.frames.append(np.asarray(frames[j]).reshape(self.h, self.w, self.c))
            self.first.append(bool(first[j]))
            self.fields.append({k: np.asarray(v[j]) for k, v in fields.items()})

    @property
    def total(self):
        return len(self.frames)

    def held(self, g):
        return max(0, self.total - self.capacity) <= g < self.total

    def entry_of_slot(self, x):
        """The global entry held in ring slot x, or None."""
        t = self.total
        if t == 0:
            return None
        g = (t - 1) - ((t - 1 - x) % self.capacity)
        return g if self.held(g) else None

    def sampleable(self, g):
        if g is None or not self.held(g):
            return False
        nxt = g + self.n
        if nxt >= self.total or self.first[nxt]:
            return False
        cur = g
        for _ in range(self.k - 1):
            if self.first[cur]:
                return True
            if not self.held(cur - self.n) or cur - self.n < 0:
                return False
            cur -= self.n
        return True

    def stack_at(self, g):
        slots = [None] * self.k
        cur = g
        for i in range(self.k - 1, -1, -1):
            slots[i] = self.frames[cur]
            if i > 0 and not self.first[cur]:
                cur -= self.n
        # [k*c, h, w]: slot-major, each slot's channels together
        return np.concatenate([s.transpose(2, 0, 1) for s in slots], axis=0)

    def valid_slots(self):
        return [x for x in range(self.capacity) if self.sampleable(self.entry_of_slot(x))]

    def transition(self, x):
        g = self.entry_of_slot(x)
        return self.stack_at(g), self.stack_at(g + self.n), self.fields[g]


def np_of(t):
    """A host numpy copy of a batch array (numpy imports only host memory:
    a device tensor comes over through its framework's .cpu())."""
    if hasattr(t, "cpu"):
        t = t.cpu()
    return np.from_dlpack(t)


def random_episodes(rng, steps, n_envs, p_end=0.15):
    """first flags for steps * n_envs entries: each copy's episodes end at
    random (the entry after an episode's last observation is flagged)."""
    first = np.zeros((steps, n_envs), dtype=bool)
    first[0] = True
    first[1:] = rng.random((steps - 1, n_envs)) < p_end
    return first.reshape(-1)


def fill(buf, ref, rng, steps, chunks=1, first=None):
    h, w, c, n = ref.h, ref.w, ref.c, ref.n
    if first is None:
        first = random_episodes(rng, steps, n)
    for part in np.array_split(np.arange(steps), chunks):
        if len(part) == 0:
            continue
        lo, hi = part[0] * n, (part[-1] + 1) * n
        N = hi - lo
        frames = rng.integers(0, 256, size=(N, h, w, c), dtype=np.uint8)
        fields = {"action": rng.integers(0, 1000, size=N),
                  "reward": rng.standard_normal(N).astype(np.float32),
                  "aux": rng.standard_normal((N, 2)).astype(np.float32)}
        buf.add(frames if c > 1 else frames[..., 0], first[lo:hi], **fields)
        ref.add(frames, first[lo:hi], fields)


def check_against(buf, ref, dtype="u8"):
    valid = ref.valid_slots()
    assert [x for x in range(buf.capacity) if buf.sampleable(x)] == valid
    assert buf.count == len(valid) == len(buf)
    assert buf.size == min(ref.total, ref.capacity)
    assert buf.position == ref.total % ref.capacity
    if not valid:
        return
    b = buf.gather(np.array(valid, dtype=np.int64), dtype)
    obs, nobs = np_of(b["obs"]), np_of(b["next_obs"])
    assert obs.shape == (len(valid), ref.k * ref.c, ref.h, ref.w)
    for j, x in enumerate(valid):
        o, no, f = ref.transition(x)
        if dtype == "f32":
            o, no = o.astype(np.float32) / np.float32(255), no.astype(np.float32) / np.float32(255)
        assert obs.dtype == o.dtype
        np.testing.assert_array_equal(obs[j], o)
        np.testing.assert_array_equal(nobs[j], no)
        assert np_of(b["action"])[j] == f["action"]
        assert np_of(b["reward"])[j] == f["reward"]
        np.testing.assert_array_equal(np_of(b["aux"])[j], f["aux"])
    np.testing.assert_array_equal(np_of(b["indices"]), valid)


@pytest.mark.parametrize("dtype", ["u8", "f32"])
@pytest.mark.parametrize("c", [1, 3])
def test_stacks_match_the_reference(ctx, rng, dtype, c):
    buf = agrl.FrameReplayBuffer(ctx, 64, 5, 7, c, stack=4, fields=FIELDS)
    ref = Ref(64, 5, 7, c, 4, 1)
    fill(buf, ref, rng, 50, chunks=3)
    check_against(buf, ref, dtype)


@pytest.mark.parametrize("n_envs", [1, 3])
def test_ring_wrap_and_interleaved_copies(ctx, rng, n_envs):
    cap = 30 * n_envs
    buf = agrl.FrameReplayBuffer(ctx, cap, 3, 4, 2, stack=3, n_envs=n_envs, fields=FIELDS)
    ref = Ref(cap, 3, 4, 2, 3, n_envs)
    for round_ in range(5):  # 5 * 23 steps: the ring wraps several times, in calls of varied sizes
        fill(buf, ref, rng, 23, chunks=1 + round_)
        check_against(buf, ref)
    assert ref.total > 3 * cap


def test_long_episode_across_the_wrap(ctx, rng):
    """No first flag but the first: after the wrap, the entries just after
    the write head cannot build their stacks and are never sampled."""
    buf = agrl.FrameReplayBuffer(ctx, 16, 2, 2, 1, stack=4, fields=FIELDS)
    ref = Ref(16, 2, 2, 1, 4, 1)
    first = np.zeros(40, dtype=bool)
    first[0] = True
    fill(buf, ref, rng, 40, chunks=4, first=first)
    check_against(buf, ref)
    assert buf.count == 16 - 1 - 3  # the newest entry, and 3 whose stacks reach overwritten frames


def test_sampled_batches_are_sampleable_transitions(ctx, rng):
    buf = agrl.FrameReplayBuffer(ctx, 48, 4, 4, 1, stack=4, n_envs=2, fields=FIELDS, seed=7)
    ref = Ref(48, 4, 4, 1, 4, 2)
    fill(buf, ref, rng, 41, chunks=2, first=random_episodes(rng, 41, 2, p_end=0.3))
    valid = set(ref.valid_slots())
    assert 0 < len(valid) < 48
    for _ in range(50):
        b = buf.sample(64, "f32")
        idx = np_of(b["indices"])
        assert set(idx.tolist()) <= valid
        obs, nobs = np_of(b["obs"]), np_of(b["next_obs"])
        for j, x in enumerate(idx):
            o, no, f = ref.transition(int(x))
            np.testing.assert_array_equal(obs[j], o.astype(np.float32) / np.float32(255))
            np.testing.assert_array_equal(nobs[j], no.astype(np.float32) / np.float32(255))
            assert np_of(b["action"])[j] == f["action"]


def test_uniform_sampling(ctx, rng):
    """Each sampleable transition drawn about equally often: a chi-square
    statistic within a generous bound (8 standard deviations)."""
    buf = agrl.FrameReplayBuffer(ctx, 64, 2, 2, 1, stack=4, fields=FIELDS, seed=3)
    ref = Ref(64, 2, 2, 1, 4, 1)
    fill(buf, ref, rng, 90, chunks=2, first=random_episodes(rng, 90, 1, p_end=0.2))
    valid = ref.valid_slots()
    draws = np.concatenate([np_of(buf.sample(1000)["indices"]) for _ in range(40)])
    counts = np.bincount(draws, minlength=64)
    assert counts[[x for x in range(64) if x not in valid]].sum() == 0
    expected = len(draws) / len(valid)
    chi2 = float((((counts[valid] - expected) ** 2) / expected).sum())
    dof = len(valid) - 1
    assert chi2 < dof + 8 * math.sqrt(2 * dof), (chi2, dof)


def test_save_load_round_trip(ctx, rng, tmp_path):
    buf = agrl.FrameReplayBuffer(ctx, 40, 3, 5, 2, stack=3, n_envs=2, fields=FIELDS, seed=11)
    ref = Ref(40, 3, 5, 2, 3, 2)
    fill(buf, ref, rng, 27, chunks=3)
    path = tmp_path / "frames.agrl"
    buf.save(path)
    loaded = agrl.FrameReplayBuffer.load(ctx, path, fields=FIELDS, seed=11)
    assert (loaded.height, loaded.width, loaded.channels, loaded.stack, loaded.n_envs, loaded.capacity) == (
        3, 5, 2, 3, 2, 40)
    assert loaded.fields == buf.fields
    check_against(loaded, ref)
    same = agrl.FrameReplayBuffer.load(ctx, path, fields=FIELDS, seed=11)
    a, b = buf.sample(16), same.sample(16)  # the same seed draws the same transitions
    np.testing.assert_array_equal(np_of(a["indices"]), np_of(b["indices"]))
    np.testing.assert_array_equal(np_of(a["obs"]), np_of(b["obs"]))
    plain = agrl.FrameReplayBuffer.load(ctx, path)
    assert plain.fields["aux"] == ((2,), "f32") and plain.fields["action"] == ((1,), "i64")
    # the loaded table goes on as the original would
    fill(loaded, ref, rng, 9)
    check_against(loaded, ref)


def test_nstep_against_the_walk(ctx, rng):
    fields = {"reward": ((), "f32"), "terminated": ((), "u8"), "truncated": ((), "u8")}
    buf = agrl.FrameReplayBuffer(ctx, 64, 2, 2, 1, stack=2, fields=fields)
    N = 40
    first = np.zeros(N, dtype=bool)
    first[[0, 13, 27]] = True
    term = np.zeros(N, dtype=np.uint8)
    term[11] = 1  # the transition into entry 12, the episode's last observation
    trunc = np.zeros(N, dtype=np.uint8)
    trunc[25] = 1
    reward = rng.standard_normal(N).astype(np.float32)
    buf.add(rng.integers(0, 256, (N, 2, 2), dtype=np.uint8), first, reward=reward, terminated=term, truncated=trunc)
    idx = np.array([x for x in range(N) if buf.sampleable(x)])
    r = buf.nstep(idx, 3, 0.9, truncated="truncated")
    ret, disc, last = np_of(r["return"]), np_of(r["discount"]), np_of(r["last"])
    for j, x in enumerate(idx):
        g, acc, c = np.float32(1), np.float32(0), x
        for k in range(3):
            acc = np.float32(acc + g * reward[c])
            if term[c]:
                g = np.float32(0)
                break
            g = np.float32(g * np.float32(0.9))
            if trunc[c] or k == 2 or c + 2 >= N:  # the walk never reaches the newest entry
                break
            c += 1
        assert ret[j] == acc and disc[j] == g and last[j] == c, (x, ret[j], acc, disc[j], g, last[j], c)


class _Frames:
    """A small Gymnasium environment whose frames are known: pixel values
    encode the episode and the step; episodes end after `length` steps,
    terminated or truncated by turns."""

    def __new__(cls, h, w, c, lengths):
        gym = pytest.importorskip("gymnasium")

        class Env(gym.Env):
            def __init__(self):
                shape = (h, w, c) if c > 1 else (h, w)
                self.observation_space = gym.spaces.Box(0, 255, shape, np.uint8)
                self.action_space = gym.spaces.Discrete(3)
                self.episode, self.t = -1, 0

            def frame(self):
                base = (self.episode * 37 + self.t * 5) % 256
                f = (base + np.arange(h * w * c)).reshape(h, w, c) % 256
                return f.astype(np.uint8) if c > 1 else f[..., 0].astype(np.uint8)

            def reset(self, *, seed=None, options=None):
                super().reset(seed=seed)
                self.episode, self.t = self.episode + 1, 0
                return self.frame(), {}

            def step(self, action):
                self.t += 1
                end = self.t >= lengths[self.episode % len(lengths)]
                odd = self.episode % 2 == 1
                return self.frame(), float(self.t + action), end and not odd, end and odd, {}

        return Env()


@pytest.mark.parametrize("c", [1, 3])
def test_matches_gymnasium_frame_stack(ctx, c):
    """Observations of FrameStackObservation(padding_type="reset") over an
    environment of known frames are what the table rebuilds, for every
    transition: obs, next_obs (the terminal observation included), fields."""
    gym = pytest.importorskip("gymnasium")
    from gymnasium.wrappers import FrameStackObservation

    k, h, w = 4, 3, 4
    raw = _Frames(h, w, c, lengths=[2, 6, 1, 9, 3])
    env = FrameStackObservation(raw, k, padding_type="reset")
    buf = agrl.FrameReplayBuffer(ctx, 256, h, w, c, stack=k,
                                 fields={"action": ((), "i64"), "reward": ((), "f32"), "terminated": ((), "u8"),
                                         "truncated": ((), "u8")})
    expected = {}  # entry -> (stacked obs, stacked next obs, action, reward)
    entry = 0
    for ep in range(8):
        obs, _ = env.reset()
        frame = raw.frame()
        first = True
        while True:
            action = (entry * 7) % 3
            nobs, reward, term, trunc, _ = env.step(action)
            # entry: the frame of obs, flagged first at the episode's start, and the transition taken from it
            buf.add(frame, [first], action=[action], reward=[reward], terminated=[term], truncated=[trunc])
            expected[entry] = (obs, nobs, action, reward)
            entry += 1
            first = False
            frame = raw.frame()
            obs = nobs
            if term or trunc:
                # the episode's last observation: an entry of its own, never sampled
                buf.add(frame, [False], action=[0], reward=[0.0], terminated=[0], truncated=[0])
                entry += 1
                break
    assert gym is not None
    # the newest entry (the last episode's last observation) is never sampled
    valid = [x for x in range(entry) if buf.sampleable(x)]
    assert valid == sorted(expected)
    b = buf.gather(valid)
    for j, x in enumerate(valid):
        o, no, a, r = expected[x]
        o, no = np.asarray(o), np.asarray(no)
        if c > 1:  # the wrapper's (k, h, w, c) as the table's (k * c, h, w)
            o = o.transpose(0, 3, 1, 2).reshape(k * c, h, w)
            no = no.transpose(0, 3, 1, 2).reshape(k * c, h, w)
        np.testing.assert_array_equal(np_of(b["obs"])[j], o)
        np.testing.assert_array_equal(np_of(b["next_obs"])[j], no)
        assert np_of(b["action"])[j] == a and np_of(b["reward"])[j] == np.float32(r)


def test_add_forms(ctx, rng):
    """One frame (h, w) or (h, w, 1) and scalars when n_envs is 1; (n_envs,
    h, w, c) for one step of several copies; a dict of fields."""
    buf = agrl.FrameReplayBuffer(ctx, 16, 2, 3, 1, stack=2, fields={"reward": ((), "f32")})
    f = rng.integers(0, 256, (4, 2, 3), dtype=np.uint8)
    buf.add(f[0], [True], reward=1.0)
    buf.add(f[1][..., None], False, reward=np.float32(2))
    buf.add(f[2:], np.array([0, 0]), {"reward": np.array([3.0, 4.0])})
    assert buf.size == 4 and buf.count == 3
    b = buf.gather([0, 1, 2])
    np.testing.assert_array_equal(np_of(b["reward"]), [1, 2, 3])
    np.testing.assert_array_equal(np_of(b["next_obs"])[2], np.stack([f[2], f[3]]))
    two = agrl.FrameReplayBuffer(ctx, 16, 2, 3, 2, n_envs=2, stack=2, fields={"reward": ((), "f32")})
    two.add(rng.integers(0, 256, (2, 2, 3, 2), dtype=np.uint8), [1, 1], reward=[0.0, 1.0])
    assert two.size == 2 and two.position == 2 and two.count == 0


def test_frames_from_other_dtypes(ctx):
    """Integer and float frames holding whole numbers 0..255 are taken; a
    value outside is refused naming it."""
    buf = agrl.FrameReplayBuffer(ctx, 8, 1, 2, 1, stack=1, fields={"r": ((), "f32")})
    buf.add(np.array([[[3, 255]], [[0, 1]]], dtype=np.int32), [1, 0], r=[0, 0])
    buf.add(np.array([[[7.0, 8.0]]], dtype=np.float32), [0], r=[0])
    np.testing.assert_array_equal(np_of(buf.gather([0, 1])["next_obs"]), [[[[0, 1]]], [[[7, 8]]]])
    with pytest.raises(agrl.OutOfRangeError, match="frames: value 256"):
        buf.add(np.array([[[256, 0]]], dtype=np.int32), [0], r=[0])
    with pytest.raises(agrl.OutOfRangeError, match="frames: value 0.5"):
        buf.add(np.array([[[0.5, 0]]]), [0], r=[0])


def test_lifetime_and_repr(ctx, rng):
    with agrl.FrameReplayBuffer(ctx, 8, 2, 2, stack=2) as buf:
        assert buf.fields == {"action": ((), "i64"), "reward": ((), "f32"), "terminated": ((), "u8"),
                              "truncated": ((), "u8")}
        assert buf.obs_shape == (2, 2, 2)
        assert repr(buf) == "<agrl.FrameReplayBuffer 2x2x1 stack 2, 0/8 entries (0 sampleable), 1 envs on cpu>"
    assert repr(buf) == "<agrl.FrameReplayBuffer (freed)>"
    with pytest.raises(agrl.FreedError):
        buf.sample(1)
    other = agrl.FrameReplayBuffer("cpu", 8, 2, 2)
    assert other.ctx.device == "cpu"
    other.free()
    with pytest.raises(agrl.FreedError):
        len(other)


def _twins(ctx, rng, n_envs=2, c=2):
    """Two tables of one seed given the same adds: the same draws, one
    sampled with out=, the other without."""
    bufs = [agrl.FrameReplayBuffer(ctx, 40, 3, 4, c, stack=3, n_envs=n_envs, fields=FIELDS, seed=8) for _ in range(2)]
    ref = Ref(40, 3, 4, c, 3, n_envs)
    state = rng.bit_generator.state
    fill(bufs[0], ref, rng, 30, chunks=3)
    rng.bit_generator.state = state
    fill(bufs[1], Ref(40, 3, 4, c, 3, n_envs), rng, 30, chunks=3)
    return bufs, ref


def _numpy_out(B, buf, odt, action=np.int64, reward=np.float32, indices=np.int64):
    shape = (B, *buf.obs_shape)
    out = {"obs": np.full(shape, 7, odt), "next_obs": np.full(shape, 7, odt),
           "action": np.zeros(B, action), "reward": np.zeros(B, reward), "aux": np.zeros((B, 2), np.float32)}
    if indices is not None:
        out["indices"] = np.zeros(B, indices)
    return out


@pytest.mark.parametrize("dtype", ["u8", "f32"])
def test_out_is_written_in_place_as_the_copying_sample(ctx, rng, dtype):
    (copying, inplace), ref = _twins(ctx, rng)
    odt = np.uint8 if dtype == "u8" else np.float32
    for B, idt in ((16, np.int64), (5, np.int32), (1, None)):
        out = _numpy_out(B, inplace, odt, action=np.int32, reward=np.float16, indices=idt)
        keep = {k: v for k, v in out.items()}
        got = inplace.sample(B, dtype, out=out)
        assert got is out and all(out[k] is keep[k] for k in keep)  # the caller's arrays themselves
        want = copying.sample(B, dtype)
        for key in ("obs", "next_obs", "aux"):
            np.testing.assert_array_equal(out[key], np_of(want[key]))
        np.testing.assert_array_equal(out["action"], np_of(want["action"]).astype(np.int32))
        np.testing.assert_array_equal(out["reward"], np_of(want["reward"]).astype(np.float16))
        idx = np_of(want["indices"])
        if idt is not None:
            assert out["indices"].dtype == idt
            np.testing.assert_array_equal(out["indices"], idx)
        for j, x in enumerate(idx.tolist()):  # and the episodes' stacks
            o, no, f = ref.transition(x)
            scale = 1 if dtype == "u8" else np.float32(255)
            np.testing.assert_array_equal(out["obs"][j], o / scale if dtype == "f32" else o)
            np.testing.assert_array_equal(out["next_obs"][j], no / scale if dtype == "f32" else no)
            assert out["action"][j] == f["action"]


def test_out_takes_torch_tensors_in_place(ctx, rng):
    torch = pytest.importorskip("torch")
    import agrl.torch

    (copying, _), ref = _twins(ctx, rng, n_envs=1, c=1)
    buf = agrl.torch.FrameReplayBuffer(ctx, 40, 3, 4, 1, stack=3, n_envs=1, fields=FIELDS, seed=8)
    frames = np.stack(ref.frames)[..., 0]
    buf.add(frames, np.array(ref.first), action=np.array([f["action"] for f in ref.fields]),
            reward=np.array([f["reward"] for f in ref.fields]), aux=np.stack([f["aux"] for f in ref.fields]))
    out = buf.empty_batch(12, "f32")
    ptrs = {k: v.data_ptr() for k, v in out.items()}
    assert buf.sample(12, "f32", out=out) is out
    assert {k: v.data_ptr() for k, v in out.items()} == ptrs
    want = copying.sample(12, "f32")
    for key in out:
        np.testing.assert_array_equal(out[key].numpy(), np_of(want[key]))


def test_out_bad_arrays_are_refused_naming_them_and_change_nothing(ctx, rng):
    (copying, inplace), _ = _twins(ctx, rng)
    B = 6
    good = _numpy_out(B, inplace, np.uint8)
    before = {k: v.copy() for k, v in good.items()}

    def bad(key, value):
        out = dict(good)
        out[key] = value
        return out

    no_next = {k: v for k, v in good.items() if k != "next_obs"}
    no_aux = {k: v for k, v in good.items() if k != "aux"}
    wide = np.zeros((B, 2 * inplace.obs_shape[0], 3, 4), np.uint8)[:, ::2]  # every other plane: not contiguous
    ro = np.zeros((B, *inplace.obs_shape), np.uint8)
    ro.flags.writeable = False
    cases = [
        (bad("obs", np.zeros((B, 5, 3, 4), np.uint8)), agrl.ShapeError, r"out\['obs'\].*\(6, 6, 3, 4\)"),
        (bad("obs", np.zeros((B + 1, *inplace.obs_shape), np.uint8)), agrl.ShapeError, r"out\['obs'\]"),
        (bad("next_obs", np.zeros((B, *inplace.obs_shape), np.float32)), agrl.InvalidArgError,
         r"out\['next_obs'\].*float32.*dtype='u8'"),
        (bad("obs", wide), agrl.ShapeError, r"out\['obs'\]"),
        (bad("obs", ro), agrl.InvalidArgError, r"out\['obs'\].*read-only"),
        (bad("aux", np.zeros((B, 3), np.float32)), agrl.ShapeError, r"out\['aux'\]"),
        (bad("reward", np.zeros(B, np.float64)), agrl.InvalidArgError, r"out\['reward'\].*dtype"),
        (bad("indices", np.zeros(B, np.float32)), agrl.InvalidArgError, r"out\['indices'\].*int32 or int64"),
        (bad("nope", np.zeros(B)), agrl.InvalidArgError, "out has 'nope'"),
        (no_next, agrl.InvalidArgError, "no array for 'next_obs'"),
        (no_aux, agrl.InvalidArgError, "no array for field 'aux'"),
        (bad("obs", [[0]]), TypeError, r"out\['obs'\]"),
    ]
    for out, exc, match in cases:
        with pytest.raises(exc, match=match):
            inplace.sample(B, out=out)
    with pytest.raises(TypeError, match="out must be a dict"):
        inplace.sample(B, out=[good["obs"]])
    with pytest.raises(agrl.InvalidArgError, match="stream is taken with out= only"):
        inplace.sample(B, stream=-1)
    for k, v in good.items():  # nothing written
        np.testing.assert_array_equal(v, before[k])
    # nothing drawn: the next batch is the twin's next
    inplace.sample(B, out=good)
    np.testing.assert_array_equal(good["indices"], np_of(copying.sample(B)["indices"]))


@pytest.mark.skipif(agrl.vulkan_device_count() == 0, reason="no Vulkan device")
def test_out_on_vulkan_is_unsupported(rng):
    ctx = agrl.Context("vulkan")
    buf = agrl.FrameReplayBuffer(ctx, 40, 3, 4, 2, stack=3, n_envs=2, fields=FIELDS, seed=8)
    fill(buf, Ref(40, 3, 4, 2, 3, 2), rng, 30, chunks=3)
    with pytest.raises(agrl.UnsupportedError, match="out= arrays"):
        buf.sample(4, out=_numpy_out(4, buf, np.uint8))
    ctx.free()


# ---- bad arguments: each refused naming the argument, before anything is made ----

def _new(**kw):
    args = dict(ctx="cpu", capacity=16, height=2, width=2, channels=1)
    args.update(kw)
    return agrl.FrameReplayBuffer(**args)


BAD_NEW = [
    (dict(capacity=0), agrl.InvalidArgError, "capacity = 0"),
    (dict(capacity=2.0), TypeError, "capacity must be an int"),
    (dict(capacity=True), TypeError, "capacity must be an int"),
    (dict(height=0), agrl.InvalidArgError, "height = 0"),
    (dict(width=-3), agrl.InvalidArgError, "width = -3"),
    (dict(channels=0), agrl.InvalidArgError, "channels = 0"),
    (dict(height=2**31), agrl.InvalidArgError, "height = 2147483648"),
    (dict(height=2**16, width=2**16), agrl.InvalidArgError, "a frame of 65536 x 65536 x 1"),
    (dict(stack=0), agrl.InvalidArgError, "stack = 0"),
    (dict(stack=65), agrl.InvalidArgError, "stack = 65"),
    (dict(stack="4"), TypeError, "stack must be an int"),
    (dict(n_envs=0), agrl.InvalidArgError, "n_envs = 0"),
    (dict(n_envs=17), agrl.InvalidArgError, "n_envs = 17"),
    (dict(min_size=0), agrl.InvalidArgError, "min_size = 0"),
    (dict(min_size=17), agrl.InvalidArgError, "min_size = 17"),
    (dict(seed=-1), agrl.InvalidArgError, "seed = -1"),
    (dict(seed=2**64), agrl.InvalidArgError, "seed = 18446744073709551616"),
    (dict(fields={}), TypeError, "fields must be a non-empty dict"),
    (dict(fields={"obs": 1}), agrl.InvalidArgError, "cannot be called 'obs'"),
    (dict(fields={"first": 1}), agrl.InvalidArgError, "cannot be called 'first'"),
    (dict(fields={"r": ((), "f64")}), agrl.InvalidArgError, "dtype 'f64'"),
    (dict(storage="f64"), agrl.InvalidArgError, "storage: dtype 'f64'"),
    (dict(ctx=3), TypeError, "ctx must be an agrl.Context"),
    (dict(ctx="tpu"), agrl.InvalidArgError, "tpu"),
]


@pytest.mark.parametrize("kw,exc,msg", BAD_NEW, ids=[next(iter(k)) + "-" + m[:12] for k, e, m in BAD_NEW])
def test_bad_constructor_arguments(kw, exc, msg):
    with pytest.raises(exc, match=msg.replace("(", r"\(").replace(".", r"\.")):
        _new(**kw)


@pytest.fixture
def small(ctx, rng):
    buf = agrl.FrameReplayBuffer(ctx, 16, 2, 3, 1, stack=2, n_envs=2, fields={"reward": ((), "f32")})
    buf.add(rng.integers(0, 256, (8, 2, 3), dtype=np.uint8), [1, 1, 0, 0, 0, 0, 0, 0], reward=np.zeros(8))
    return buf


F = np.zeros((2, 2, 3), np.uint8)
BAD_CALLS = [
    (lambda b: b.add(np.zeros((2, 3, 2), np.uint8), [0, 0], reward=[0, 0]), agrl.ShapeError, "frames must be"),
    (lambda b: b.add(np.zeros((3, 2, 3), np.uint8), [0, 0, 0], reward=[0, 0, 0]), agrl.ShapeError,
     "not a whole number of steps of n_envs = 2"),
    (lambda b: b.add(F, [0], reward=[0, 0]), agrl.ShapeError, "first has 1 flags"),
    (lambda b: b.add(F, [0, 0], reward=[0]), agrl.ShapeError, "the fields have 1 transitions, frames 2"),
    (lambda b: b.add(F, [0, 0]), agrl.InvalidArgError, "field 'reward' is missing"),
    (lambda b: b.add(F, [0, 0], reward=[0, 0], bonus=[0, 0]), agrl.InvalidArgError, "no field 'bonus'"),
    (lambda b: b.add(F, reward=[0, 0]), TypeError, "missing required argument 'first'"),
    (lambda b: b.add(F, [0, 0], {"reward": [0, 0]}, reward=[0, 0]), TypeError, "keywords or one dict"),
    (lambda b: b.add(np.zeros((18, 2, 3), np.uint8), np.zeros(18), reward=np.zeros(18)), agrl.OutOfRangeError,
     "do not fit"),
    (lambda b: b.add("frames", [0, 0], reward=[0, 0]), TypeError, "frames: expected an array"),
    (lambda b: b.sample(0), agrl.InvalidArgError, "batch_size = 0"),
    (lambda b: b.sample(2**31), agrl.InvalidArgError, "batch_size = 2147483648"),
    (lambda b: b.sample(4, "i32"), agrl.InvalidArgError, "dtype must be 'u8'"),
    (lambda b: b.sample(4, "f64"), agrl.InvalidArgError, "sample: dtype"),
    (lambda b: b.sample("4"), TypeError, "batch_size must be an int"),
    (lambda b: b.gather([0, 7]), agrl.OutOfRangeError, r"indices\[1\] = 7 is not a transition"),
    (lambda b: b.gather([99]), agrl.OutOfRangeError, r"indices\[0\] = 99"),
    (lambda b: b.gather([[0]]), agrl.ShapeError, "one-dimensional"),
    (lambda b: b.gather([]), agrl.InvalidArgError, "0 indices"),
    (lambda b: b.gather([0], dtype="bf16"), agrl.InvalidArgError, "dtype must be"),
    (lambda b: b.nstep([0], 0, 0.9, "reward", "reward"), agrl.InvalidArgError, "n"),
    (lambda b: b.nstep([0], 2, 1.5, "reward", "reward"), agrl.InvalidArgError, "gamma"),
    (lambda b: b.nstep([0], 2, 0.9, "nope", "reward"), agrl.InvalidArgError, "nope"),
    (lambda b: b.nstep([0], 2, 0.9, "reward", 3), TypeError, "terminated must be a str"),
    (lambda b: b.sampleable("0"), TypeError, "index must be an int"),
    (lambda b: b.save(3), TypeError, "path must be a path"),
]


@pytest.mark.parametrize("call,exc,msg", BAD_CALLS, ids=[str(i) for i in range(len(BAD_CALLS))])
def test_bad_call_arguments(small, call, exc, msg):
    before = (small.size, small.position, small.count)
    with pytest.raises(exc, match=msg):
        call(small)
    assert (small.size, small.position, small.count) == before


def test_sample_before_any_transition(ctx):
    buf = agrl.FrameReplayBuffer(ctx, 8, 2, 2)
    with pytest.raises(agrl.StateError):
        buf.sample(1)
    buf = agrl.FrameReplayBuffer(ctx, 8, 2, 2, stack=1, fields={"r": ((), "f32")}, min_size=3)
    buf.add(np.zeros((3, 2, 2), np.uint8), [1, 0, 0], r=[0, 0, 0])
    assert buf.count == 2
    with pytest.raises(agrl.StateError, match="fewer than the minimum 3"):
        buf.sample(1)


def test_load_refusals(ctx, tmp_path):
    with pytest.raises(agrl.IoError):
        agrl.FrameReplayBuffer.load(ctx, tmp_path / "missing.agrl")
    rb = agrl.ReplayBuffer(ctx, 8, {"x": 1})
    rb.save(tmp_path / "replay.agrl")
    with pytest.raises(agrl.IoError, match="frames"):
        agrl.FrameReplayBuffer.load(ctx, tmp_path / "replay.agrl")
    buf = agrl.FrameReplayBuffer(ctx, 8, 2, 2)
    buf.save(tmp_path / "f.agrl")
    with pytest.raises(agrl.ShapeError, match="the file's fields"):
        agrl.FrameReplayBuffer.load(ctx, tmp_path / "f.agrl", fields={"x": 1})


def test_refused_device_frames_name_the_argument(ctx):
    torch = pytest.importorskip("torch")
    buf = agrl.FrameReplayBuffer(ctx, 8, 2, 2, stack=1, fields={"r": ((), "f32")})
    # torch CPU tensors are host arrays: taken
    buf.add(torch.zeros((2, 2, 2), dtype=torch.uint8), torch.tensor([True, False]), r=torch.zeros(2))
    assert buf.size == 2


# ---- torch ----

def test_torch_batches(ctx, rng):
    torch = pytest.importorskip("torch")
    import agrl.torch

    buf = agrl.torch.FrameReplayBuffer(ctx, 40, 3, 4, 1, stack=3, n_envs=2, fields=FIELDS, seed=2)
    ref = Ref(40, 3, 4, 1, 3, 2)
    fill(buf, ref, rng, 30, chunks=2)
    b = buf.sample(32)
    assert isinstance(b["obs"], torch.Tensor) and b["obs"].dtype == torch.uint8
    assert b["obs"].shape == (32, 3, 3, 4) and b["action"].dtype == torch.int64 and b["aux"].shape == (32, 2)
    for j, x in enumerate(b["indices"].tolist()):
        o, no, f = ref.transition(x)
        np.testing.assert_array_equal(b["obs"][j].numpy(), o)
        np.testing.assert_array_equal(b["next_obs"][j].numpy(), no)
        assert b["action"][j].item() == f["action"]
    out = buf.empty_batch(16, "f32")
    assert buf.sample(16, "f32", out=out) is out
    for j, x in enumerate(out["indices"].tolist()):
        np.testing.assert_array_equal(out["next_obs"][j].numpy(), ref.transition(x)[1] / np.float32(255))
        np.testing.assert_array_equal(out["aux"][j].numpy(), ref.transition(x)[2]["aux"])
    g = buf.gather(torch.tensor(ref.valid_slots()[:5]))
    np.testing.assert_array_equal(g["indices"].numpy(), ref.valid_slots()[:5])
    r = buf.nstep(g["indices"], 2, 0.5, "reward", "action")
    assert set(r) == {"return", "discount", "last"} and r["last"].dtype == torch.int64


def test_torch_add_takes_tensors(ctx, rng):
    torch = pytest.importorskip("torch")
    import agrl.torch

    buf = agrl.torch.FrameReplayBuffer(ctx, 16, 2, 2, 1, stack=2, fields={"r": ((), "f32")})
    frames = torch.arange(24, dtype=torch.uint8).reshape(6, 2, 2)
    buf.add(frames, torch.tensor([1, 0, 0, 0, 0, 0]), r=torch.arange(6, dtype=torch.float32))
    g = buf.gather([3])
    assert torch.equal(g["obs"][0], frames[2:4]) and g["r"].item() == 3.0


# ---- CUDA ----

def _need_cuda():
    if agrl.cuda_device_count() == 0:
        if REQUIRE:
            pytest.fail("AGRL_REQUIRE_GPU=1 but agrl sees no CUDA device")
        pytest.skip("no CUDA device: the CUDA frame tables are tested on the GPU machine (AGRL_REQUIRE_GPU=1)")
    try:
        import torch
    except ImportError as e:
        if REQUIRE:
            pytest.fail(f"torch is required on the GPU machine: {e}")
        pytest.skip("torch not installed")
    if not torch.cuda.is_available():
        if REQUIRE:
            pytest.fail("AGRL_REQUIRE_GPU=1 but torch sees no CUDA device")
        pytest.skip("torch sees no CUDA device")
    return torch


@pytest.mark.parametrize("dtype", ["u8", "f32"])
def test_cuda_matches_the_reference(rng, dtype):
    torch = _need_cuda()
    import agrl.torch

    ctx = agrl.Context("cuda")
    buf = agrl.torch.FrameReplayBuffer(ctx, 96, 5, 6, 2, stack=4, n_envs=3, fields=FIELDS, seed=9)
    ref = Ref(96, 5, 6, 2, 4, 3)
    for _ in range(3):
        fill(buf, ref, rng, 23, chunks=2)
        check_against(buf, ref, dtype)
    valid = set(ref.valid_slots())
    out = buf.empty_batch(64, dtype)
    for _ in range(5):
        b = buf.sample(64, dtype)
        assert b["obs"].device.type == "cuda"
        buf.sample(64, dtype, out=out)
        for batch in (b, out):
            idx = batch["indices"].cpu().tolist()
            assert set(idx) <= valid
            obs = batch["obs"].cpu().numpy()
            for j, x in enumerate(idx):
                o = ref.transition(x)[0]
                np.testing.assert_array_equal(obs[j], o if dtype == "u8" else o / np.float32(255))
    with pytest.raises(agrl.InvalidArgError, match=r"out\['obs'\].*not in the memory of the context"):
        buf.sample(64, dtype, out={k: v.cpu().numpy() for k, v in out.items()})  # host arrays, a CUDA table
    g = buf.gather(torch.tensor(sorted(valid)[:7], device="cuda"), dtype)
    assert g["next_obs"].device.type == "cuda"
    np.testing.assert_array_equal(g["indices"].cpu().numpy(), sorted(valid)[:7])
    ctx.free()


def test_jax_batches(ctx, rng):
    pytest.importorskip("jax")
    import agrl.jax

    buf = agrl.jax.FrameReplayBuffer(ctx, 32, 3, 2, 2, stack=2, fields=FIELDS, seed=4)
    ref = Ref(32, 3, 2, 2, 2, 1)
    fill(buf, ref, rng, 20)
    b = buf.sample(8)
    assert b["obs"].shape == (8, 4, 3, 2)
    for j, x in enumerate(np.asarray(b["indices"]).tolist()):
        o, no, f = ref.transition(x)
        np.testing.assert_array_equal(np.asarray(b["obs"][j]), o)
        np.testing.assert_array_equal(np.asarray(b["next_obs"][j]), no)
        np.testing.assert_array_equal(np.asarray(b["aux"][j]), f["aux"])
    g = buf.gather(ref.valid_slots()[:3], "f32")
    np.testing.assert_array_equal(np.asarray(g["obs"][0]), ref.transition(ref.valid_slots()[0])[0] / np.float32(255))


def test_threads_share_the_table(ctx, rng):
    """Adds on one thread while others sample and gather (the context's
    lock serializes the calls; the GIL is released in long ones): every
    batch is of sampleable transitions, and the table ends as the
    reference built from the same adds."""
    import threading

    buf = agrl.FrameReplayBuffer(ctx, 96, 8, 8, 1, stack=3, n_envs=2, fields=FIELDS, seed=12)
    ref = Ref(96, 8, 8, 1, 3, 2)
    fill(buf, ref, rng, 10)
    errors = []

    def sampler():
        try:
            for _ in range(200):
                b = buf.sample(16, "f32")
                obs = np_of(b["obs"])
                assert obs.shape == (16, 3, 8, 8) and obs.max() <= 1.0
        except Exception as e:  # reported on the main thread
            errors.append(e)

    threads = [threading.Thread(target=sampler) for _ in range(3)]
    for t in threads:
        t.start()
    for i in range(40):
        fill(buf, ref, np.random.default_rng(100 + i), 3)
    for t in threads:
        t.join()
    assert not errors, errors
    check_against(buf, ref)


@pytest.mark.skipif(agrl.vulkan_device_count() == 0 and os.environ.get("AGRL_REQUIRE_VULKAN") != "1",
                    reason="no Vulkan device")
def test_on_vulkan_tables_fill_and_batches_are_refused_as_replay_buffers_are():
    vk = agrl.Context("vulkan")
    rb = agrl.FrameReplayBuffer(vk, 50, 6, 5)
    n = 12
    first = np.zeros(n, np.uint8)
    first[0] = 1
    rb.add(np.arange(n * 30, dtype=np.uint8).reshape(n, 6, 5), first, action=np.zeros(n, np.int32),
           reward=np.ones(n, np.float32), terminated=np.zeros(n, bool), truncated=np.zeros(n, bool))
    assert len(rb) == n - 1 and rb.size == n
    with pytest.raises(agrl.UnsupportedError, match="cannot hand out memory"):
        rb.sample(4)
