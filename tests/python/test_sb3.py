"""agrl.sb3.ReplayBuffer against Stable-Baselines3's own ReplayBuffer fed the
same steps: the stored transitions, the samples (shapes, dtypes, devices and
every sampled row), timeouts, VecNormalize, pickling, and SB3's DQN and SAC
training with it. On the CPU, and on CUDA too where torch and agrl see a
device."""

import io
import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="agrl.sb3 needs torch")
sb3 = pytest.importorskip("stable_baselines3", reason="agrl.sb3 needs stable_baselines3")
gym = pytest.importorskip("gymnasium", reason="agrl.sb3 needs gymnasium")

from gymnasium import spaces  # noqa: E402
from stable_baselines3.common.buffers import ReplayBuffer as SB3Buffer  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize  # noqa: E402

import agrl  # noqa: E402
import agrl.sb3  # noqa: E402

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() and agrl.cuda_device_count() > 0 else [])

OBS = {
    "vec": spaces.Box(-2.0, 2.0, (5,), np.float32),
    "img": spaces.Box(0, 255, (4, 12, 12), np.uint8),
    "disc": spaces.Discrete(7),
    "f64": spaces.Box(-2.0, 2.0, (3,), np.float64),
}
ACT = {
    "discrete": spaces.Discrete(4),
    "box": spaces.Box(-1.0, 1.0, (2,), np.float32),
}
# (optimize_memory_usage, handle_timeout_termination): SB3 refuses both on
MODES = [(False, True), (False, False), (True, False)]


def _value(space, n, rng):
    """n environments' values of a space, as a VecEnv hands them over."""
    if isinstance(space, spaces.Discrete):
        return rng.integers(0, space.n, size=n).astype(np.int64)
    if space.dtype == np.uint8:
        return rng.integers(0, 256, size=(n, *space.shape), dtype=np.uint8)
    return rng.standard_normal((n, *space.shape)).astype(space.dtype)


def _step(rng, obs_space, act_space, n, p_done=0.35, p_trunc=0.4):
    done = rng.random(n) < p_done
    trunc = rng.random(n) < p_trunc
    infos = [{"TimeLimit.truncated": bool(t)} if (t or rng.random() < 0.5) else {} for t in trunc]
    return (
        _value(obs_space, n, rng),
        _value(obs_space, n, rng),
        _value(act_space, n, rng),
        rng.standard_normal(n).astype(np.float32),
        done,
        infos,
    )


def _pair(obs_space, act_space, size, n_envs, opt, handle, device, **kw):
    a = agrl.sb3.ReplayBuffer(
        size, obs_space, act_space, device=device, n_envs=n_envs, optimize_memory_usage=opt,
        handle_timeout_termination=handle, **kw,
    )
    s = SB3Buffer(
        size, obs_space, act_space, device=device, n_envs=n_envs, optimize_memory_usage=opt,
        handle_timeout_termination=handle,
    )
    return a, s


def _feed(a, s, steps, rng):
    for _ in range(steps):
        data = _step(rng, s.observation_space, s.action_space, s.n_envs)
        a.add(*data)
        s.add(*data)
    assert (a.pos, a.full, a.size()) == (s.pos, s.full, s.size())


def _np(t):
    if not isinstance(t, torch.Tensor):
        t = torch.from_dlpack(t)
    return t.cpu().numpy()


def _stored(s, arr):
    """What agrl returns for SB3's stored values: float64 observations are
    kept as float32."""
    return arr.astype(np.float32).astype(np.float64) if arr.dtype == np.float64 else arr


def _valid(s):
    """SB3's sampleable (step row, env) pairs."""
    rows = list(range(s.buffer_size)) if s.full else list(range(s.pos))
    if s.optimize_memory_usage and s.full:
        rows.remove(s.pos)
    return {(r, e) for r in rows for e in range(s.n_envs)}


def _next_obs(s, rows, envs):
    if s.optimize_memory_usage:
        return s.observations[(rows + 1) % s.buffer_size, envs]
    return s.next_observations[rows, envs]


def _check_contents(a, s):
    """Every transition in agrl's tables equals SB3's at the same (row, env),
    and agrl holds exactly SB3's sampleable transitions."""
    n = len(a.table)
    idx = np.arange(n, dtype=np.int64)
    rows, envs = (_np(t) for t in a.positions(torch.from_numpy(idx)))
    pairs = set(zip(rows.tolist(), envs.tolist()))
    assert len(pairs) == n and pairs == _valid(s)
    g = {k: _np(v) for k, v in a.table.gather(idx).items()} if n else {}
    if n:
        np.testing.assert_array_equal(g["action"], s.actions[rows, envs])
        assert g["action"].dtype == s.actions.dtype
        np.testing.assert_array_equal(g["reward"][:, 0], s.rewards[rows, envs])
        np.testing.assert_array_equal(g["timeout"][:, 0], s.timeouts[rows, envs])
        # flags assigned through `dones` are kept beside the table (checked
        # through the read-back and the samples below)
        plain = ~np.isin(rows * s.n_envs + envs, list(a._forced))
        r, e = rows[plain], envs[plain]
        np.testing.assert_array_equal(g["done_raw"][plain, 0], s.dones[r, e])
        np.testing.assert_array_equal(g["done"][plain, 0], s.dones[r, e] * (1 - s.timeouts[r, e]))
    if a.obs_table is None:
        np.testing.assert_array_equal(g["obs"], _stored(s, s.observations[rows, envs]))
        np.testing.assert_array_equal(g["next_obs"], _stored(s, s.next_observations[rows, envs]))
    elif not s.optimize_memory_usage:
        o = {k: _np(v) for k, v in a.obs_table.gather(idx).items()} if n else {}
        if n:
            np.testing.assert_array_equal(o["obs"], _stored(s, s.observations[rows, envs]).astype(o["obs"].dtype))
            ref_next = _stored(s, s.next_observations[rows, envs])
            np.testing.assert_array_equal(o["next_obs"], ref_next.astype(o["obs"].dtype))
    else:  # one observation per step; row pos holds the last step's next observation
        m = len(a.obs_table)
        if m:
            cols = np.arange(m, dtype=np.int64)
            o = _np(a.obs_table.gather(cols)["obs"])
            orow, oenv = cols // s.n_envs, cols % s.n_envs
            keep = orow != s.pos
            np.testing.assert_array_equal(o[keep], s.observations[orow[keep], oenv[keep]].astype(o.dtype))
    # the read-back arrays, where SB3's hold written values
    rows_written = sorted({r for r, _ in _valid(s)})
    if s.optimize_memory_usage and (s.full or s.pos):
        obs_rows = sorted(set(rows_written) | {s.pos})
    else:
        obs_rows = rows_written
    np.testing.assert_array_equal(a.observations[obs_rows], _stored(s, s.observations[obs_rows]))
    if not s.optimize_memory_usage:
        np.testing.assert_array_equal(a.next_observations[rows_written], _stored(s, s.next_observations[rows_written]))
    for name in ("actions", "rewards", "dones", "timeouts"):
        np.testing.assert_array_equal(np.asarray(getattr(a, name))[rows_written], getattr(s, name)[rows_written])


def _check_sample(a, s, B, device):
    x = a.sample(B)
    y = s.sample(B)
    for f in ("observations", "actions", "next_observations", "dones", "rewards"):
        u, v = getattr(x, f), getattr(y, f)
        assert (u.shape, u.dtype, u.device) == (v.shape, v.dtype, v.device), f
    assert x.discounts is None
    rows, envs = (_np(t) for t in a.positions(a.last_indices))
    assert set(zip(rows.tolist(), envs.tolist())) <= _valid(s)
    np.testing.assert_array_equal(_np(x.observations), _stored(s, s.observations[rows, envs]))
    np.testing.assert_array_equal(_np(x.next_observations), _stored(s, _next_obs(s, rows, envs)))
    np.testing.assert_array_equal(_np(x.actions), s.actions[rows, envs])
    np.testing.assert_array_equal(_np(x.rewards)[:, 0], s.rewards[rows, envs])
    np.testing.assert_array_equal(_np(x.dones)[:, 0], s.dones[rows, envs] * (1 - s.timeouts[rows, envs]))
    return rows, envs


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("stage", [None, 0, 5])
@pytest.mark.parametrize("opt,handle", MODES)
@pytest.mark.parametrize("n_envs", [1, 3])
@pytest.mark.parametrize("act", list(ACT))
@pytest.mark.parametrize("obs", list(OBS))
def test_contents_and_samples_match_sb3(obs, act, n_envs, opt, handle, stage, device):
    """stage: steps add() keeps on the host (None: the device's default)."""
    rng = np.random.default_rng(hash((obs, act, n_envs, opt, handle)) % 2**32)
    a, s = _pair(OBS[obs], ACT[act], 24, n_envs, opt, handle, device, seed=7, stage_steps=stage)
    with pytest.raises(agrl.Error):
        a.sample(4)
    bs = s.buffer_size
    # partly filled, exactly full, then wrapped around the ring twice over
    for steps in (3, bs - 3, 1, 2 * bs + 1):
        _feed(a, s, steps, rng)
        _check_sample(a, s, 64, device)
        _check_contents(a, s)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("opt,handle", MODES)
def test_sampling_covers_the_valid_transitions_uniformly(opt, handle, device):
    rng = np.random.default_rng(3)
    a, s = _pair(OBS["vec"], ACT["box"], 30, 3, opt, handle, device, seed=11)
    _feed(a, s, 27, rng)  # wrapped: pos 7
    valid = _valid(s)
    counts = {p: 0 for p in valid}
    B = 4096
    for _ in range(5):
        rows, envs = _check_sample(a, s, B, device)
        for p in zip(rows.tolist(), envs.tolist()):
            counts[p] += 1
    mean = 5 * B / len(valid)
    assert min(counts.values()) > 0.7 * mean and max(counts.values()) < 1.3 * mean


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("opt,handle", MODES)
def test_staged_steps_are_sampled(opt, handle, device):
    """Steps add() keeps on the host reach the device before a draw."""
    rng = np.random.default_rng(43)
    a, s = _pair(OBS["img"], ACT["box"], 100, 2, opt, handle, device, stage_steps=20)
    _feed(a, s, 7, rng)
    assert a._staged == 7
    rows, envs = _check_sample(a, s, 512, device)
    assert set(zip(rows.tolist(), envs.tolist())) == _valid(s)
    _feed(a, s, 23, rng)  # the stage filled after 20 and add() sent it
    assert a._staged == 3 and len(a._table) == 2 * 27
    _check_sample(a, s, 512, device)
    _check_contents(a, s)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("handle", [True, False])
def test_timeouts(handle, device):
    obs, act = OBS["vec"], ACT["discrete"]
    a, s = _pair(obs, act, 8, 4, False, handle, device)
    rng = np.random.default_rng(5)
    o, no, ac, r, _, _ = _step(rng, obs, act, 4)
    # env 0: terminated; 1: timed out (done and truncated); 2: running; 3: truncated flag without done
    done = np.array([True, True, False, False])
    infos = [{}, {"TimeLimit.truncated": True}, {"TimeLimit.truncated": False}, {"TimeLimit.truncated": True}]
    a.add(o, no, ac, r, done, infos)
    s.add(o, no, ac, r, done, infos)
    x = a.sample(256)
    rows, envs = (_np(t) for t in a.positions(a.last_indices))
    assert rows.tolist() == [0] * 256 and set(envs.tolist()) == {0, 1, 2, 3}
    expect = np.array([1.0, 0.0 if handle else 1.0, 0.0, 0.0], np.float32)
    np.testing.assert_array_equal(_np(x.dones)[:, 0], expect[envs])
    np.testing.assert_array_equal(expect, s.dones[0] * (1 - s.timeouts[0]))  # SB3 agrees
    np.testing.assert_array_equal(a.timeouts[0], s.timeouts[0])
    np.testing.assert_array_equal(np.asarray(a.dones)[0], s.dones[0])


def test_optimize_with_timeouts_is_refused_as_sb3_does():
    with pytest.raises(ValueError):
        SB3Buffer(8, OBS["vec"], ACT["box"], "cpu", optimize_memory_usage=True, handle_timeout_termination=True)
    with pytest.raises(ValueError):
        agrl.sb3.ReplayBuffer(8, OBS["vec"], ACT["box"], "cpu", optimize_memory_usage=True,
                              handle_timeout_termination=True)


class _OwnNormalize(VecNormalize):
    """A VecNormalize whose normalization is not VecNormalize's own: agrl
    must call it on host copies."""

    def normalize_obs(self, obs):
        return super().normalize_obs(obs) * 2.0

    def normalize_reward(self, reward):
        return super().normalize_reward(reward) - 1.0


def _vec_normalize(cls, obs_space, norm_obs, norm_reward, rng):
    env_fn = lambda: gym.make("Pendulum-v1")  # noqa: E731
    env = cls(DummyVecEnv([env_fn]), norm_obs=norm_obs, norm_reward=norm_reward, clip_obs=1.5, clip_reward=2.0)
    if norm_obs:
        env.obs_rms.mean = rng.standard_normal(obs_space.shape)
        env.obs_rms.var = rng.random(obs_space.shape) + 0.1
    env.ret_rms.var = np.float64(3.7)
    return env


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("cls", [VecNormalize, _OwnNormalize])
@pytest.mark.parametrize("norm_obs,norm_reward", [(True, True), (True, False), (False, True), (False, False)])
@pytest.mark.parametrize("obs", ["vec", "img"])
def test_vec_normalize_as_sb3(obs, norm_obs, norm_reward, cls, device):
    rng = np.random.default_rng(9)
    space = OBS[obs]
    a, s = _pair(space, ACT["box"], 40, 2, False, True, device)
    _feed(a, s, 25, rng)
    env = _vec_normalize(cls, space, norm_obs, norm_reward, rng)
    x = a.sample(128, env=env)
    rows, envs = (_np(t) for t in a.positions(a.last_indices))
    ref_obs = s._normalize_obs(s.observations[rows, envs], env)
    ref_next = s._normalize_obs(s.next_observations[rows, envs], env)
    ref_rew = s._normalize_reward(s.rewards[rows, envs].reshape(-1, 1), env)
    y = s.sample(128, env=env)
    for got, ref, other in ((x.observations, ref_obs, y.observations),
                            (x.next_observations, ref_next, y.next_observations), (x.rewards, ref_rew, y.rewards)):
        assert (got.dtype, got.shape, got.device) == (other.dtype, other.shape, other.device)
        np.testing.assert_array_equal(_np(got), ref)  # bit for bit


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("opt,handle", MODES)
@pytest.mark.parametrize("obs", ["vec", "img"])
def test_pickle_round_trip_keeps_the_ring(obs, opt, handle, device):
    rng = np.random.default_rng(13)
    a, s = _pair(OBS[obs], ACT["discrete"], 24, 3, opt, handle, device, seed=1)
    _feed(a, s, 11, rng)  # wrapped: pos 3
    a.dones[1] = True
    s.dones[1] = True
    b = pickle.loads(pickle.dumps(a))
    assert isinstance(b, agrl.sb3.ReplayBuffer) and b is not a
    assert (b.pos, b.full, b.buffer_size, b.n_envs, b.device) == (a.pos, a.full, a.buffer_size, a.n_envs, a.device)
    _check_contents(b, s)
    _check_sample(b, s, 64, device)
    _feed(b, s, 4, rng)  # the ring goes on where it was
    _check_contents(b, s)
    _check_sample(b, s, 64, device)


@pytest.mark.parametrize("device", DEVICES)
def test_device_change_moves_the_tables(device):
    rng = np.random.default_rng(17)
    a, s = _pair(OBS["img"], ACT["box"], 16, 2, True, False, device)
    _feed(a, s, 11, rng)
    a.device = torch.device("cpu")
    _check_contents(a, s)
    x = a.sample(32)
    assert x.observations.device == torch.device("cpu")
    s.device = torch.device("cpu")
    _check_sample(a, s, 32, "cpu")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("opt,handle", MODES)
def test_dones_assignment_as_setup_learn_does(opt, handle, device):
    rng = np.random.default_rng(19)
    a, s = _pair(OBS["vec"], ACT["discrete"], 12, 2, opt, handle, device)
    _feed(a, s, 9, rng)  # wrapped: pos 3
    last = (s.pos - 1) % s.buffer_size
    for buf in (a, s):
        buf.dones[last] = True  # OffPolicyAlgorithm._setup_learn
        buf.dones[0, 1] = 0.0
    held = sorted({r for r, _ in _valid(s)})
    np.testing.assert_array_equal(np.asarray(a.dones)[held], s.dones[held])
    assert np.asarray(a.dones)[last].tolist() == [1.0, 1.0]
    _check_sample(a, s, 512, device)
    _feed(a, s, 6, rng)  # rows written again: the assignment is gone in both
    held = sorted({r for r, _ in _valid(s)})
    np.testing.assert_array_equal(np.asarray(a.dones)[held], s.dones[held])
    assert not a._forced
    _check_sample(a, s, 512, device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("opt,handle", MODES)
def test_get_samples_at_given_rows(opt, handle, device):
    rng = np.random.default_rng(23)
    a, s = _pair(OBS["img"], ACT["box"], 21, 3, opt, handle, device)
    _feed(a, s, 10, rng)  # wrapped
    rows = np.array(sorted({r for r, _ in _valid(s)}) * 3, dtype=np.int64)
    np.random.seed(4)
    x = a._get_samples(rows)
    np.random.seed(4)
    y = s._get_samples(rows)  # the same environments drawn by numpy
    for f in ("observations", "actions", "next_observations", "dones", "rewards"):
        u, v = getattr(x, f), getattr(y, f)
        assert (u.shape, u.dtype, u.device) == (v.shape, v.dtype, v.device), f
        np.testing.assert_array_equal(_np(u), _np(v), err_msg=f)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("opt,handle", MODES)
@pytest.mark.parametrize("obs", ["vec", "img"])
def test_reuse_batches(obs, opt, handle, device):
    rng = np.random.default_rng(29)
    a, s = _pair(OBS[obs], ACT["discrete"], 24, 2, opt, handle, device, reuse_batches=True)
    _feed(a, s, 17, rng)
    x = a.sample(32)
    ptr = x.actions.data_ptr()
    _check_sample(a, s, 32, device)
    assert a.sample(32).actions.data_ptr() == ptr  # the same tensors, written again
    _check_sample(a, s, 64, device)


@pytest.mark.parametrize("device", DEVICES)
def test_fresh_batches_by_default(device):
    rng = np.random.default_rng(31)
    a, s = _pair(OBS["img"], ACT["box"], 24, 2, False, True, device)
    _feed(a, s, 17, rng)
    x = a.sample(32)
    keep = {f: getattr(x, f).clone() for f in x._fields[:5]}
    for _ in range(3):
        a.sample(32)
    for f, v in keep.items():
        assert torch.equal(getattr(x, f), v), f  # a kept batch is not overwritten


@pytest.mark.parametrize("device", DEVICES)
def test_reset(device):
    rng = np.random.default_rng(37)
    a, s = _pair(OBS["vec"], ACT["box"], 10, 1, False, True, device)
    _feed(a, s, 13, rng)
    a.reset()
    s.reset()
    assert (a.pos, a.full, a.size(), len(a.table)) == (0, False, 0, 0)
    _feed(a, s, 4, rng)
    _check_sample(a, s, 64, device)  # only the new transitions are drawn


class _Teed(agrl.sb3.ReplayBuffer):
    """agrl's buffer that also hands every add to an SB3 buffer."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.shadow = SB3Buffer(*args, **kwargs)

    def add(self, *args, **kwargs):
        self.shadow.add(*args, **kwargs)
        super().add(*args, **kwargs)


@pytest.mark.parametrize("device", DEVICES)
def test_dqn_cartpole_trains_with_it(device, tmp_path):
    from stable_baselines3 import DQN

    model = DQN(
        "MlpPolicy", "CartPole-v1", learning_starts=500, buffer_size=1500, batch_size=64, train_freq=4,
        target_update_interval=250, replay_buffer_class=_Teed, device=device, seed=0,
    )
    model.learn(2500)
    rb = model.replay_buffer
    assert isinstance(rb, agrl.sb3.ReplayBuffer) and rb.full  # wrapped around
    assert model._n_updates > 400
    _check_contents(rb, rb.shadow)
    _check_sample(rb, rb.shadow, 64, device)
    # save_replay_buffer / load_replay_buffer, then training goes on
    path = tmp_path / "rb.pkl"
    model.save_replay_buffer(path)
    shadow = rb.shadow
    model.load_replay_buffer(path)
    assert model.replay_buffer is not rb
    _check_contents(model.replay_buffer, shadow)
    model.learn(300, reset_num_timesteps=False)
    _check_contents(model.replay_buffer, model.replay_buffer.shadow)


@pytest.mark.parametrize("device", DEVICES)
def test_sac_pendulum_trains_with_it(device):
    from stable_baselines3 import SAC

    model = SAC("MlpPolicy", "Pendulum-v1", learning_starts=100, buffer_size=400, batch_size=32,
                replay_buffer_class=_Teed, device=device, seed=0, policy_kwargs={"net_arch": [32, 32]})
    model.learn(500)
    rb = model.replay_buffer
    assert rb.full and model._n_updates >= 390
    _check_contents(rb, rb.shadow)
    _check_sample(rb, rb.shadow, 32, device)


@pytest.mark.parametrize("device", DEVICES)
def test_optimized_memory_learn_twice_truncates_the_last_step(device):
    """optimize_memory_usage: a second learn() marks the last stored step done
    (SB3's _setup_learn), in agrl's buffer as in SB3's."""
    from stable_baselines3 import DQN

    model = DQN("MlpPolicy", "CartPole-v1", learning_starts=50, buffer_size=300, optimize_memory_usage=True,
                replay_buffer_class=_Teed, replay_buffer_kwargs={"handle_timeout_termination": False},
                device=device, seed=1)
    model.learn(120)
    rb = model.replay_buffer
    last = (rb.pos - 1) % rb.buffer_size
    with pytest.warns(UserWarning, match="truncated"):
        model.learn(1, reset_num_timesteps=True)
    rb.shadow.dones[last] = True  # what SB3 wrote into the buffer it trains with
    assert np.asarray(rb.dones)[last].tolist() == [1.0]
    _check_contents(rb, rb.shadow)
    _check_sample(rb, rb.shadow, 256, device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("opt,handle", [(False, True), (True, False)])
def test_atari_frames(opt, handle, device):
    """Stacked 84x84 u8 frames stay u8 (a table of u8 storage) and come back
    as SB3's uint8 observations."""
    rng = np.random.default_rng(41)
    space = spaces.Box(0, 255, (4, 84, 84), np.uint8)
    a, s = _pair(space, spaces.Discrete(6), 40, 1, opt, handle, device)
    assert a.obs_table is not None and a.obs_table.fields["obs"] == ((4, 84, 84), "u8")
    _feed(a, s, 47, rng)
    _check_contents(a, s)
    _check_sample(a, s, 32, device)
