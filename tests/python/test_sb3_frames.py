"""agrl.sb3.ReplayBuffer(frame_stack=k): VecFrameStack's stacked image
observations kept one frame a step in a frame table, against SB3's own
ReplayBuffer(optimize_memory_usage=True) fed the same steps: every row SB3
may draw gives the same observation, next observation, action, reward and
done; sampled batches are rows SB3 may draw, with SB3's values; pickling;
and SB3's DQN training through it (its two learn() calls included, the
second of which sets a done through `dones`)."""

import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="agrl.sb3 needs torch")
sb3 = pytest.importorskip("stable_baselines3", reason="agrl.sb3 needs stable_baselines3")
gym = pytest.importorskip("gymnasium", reason="agrl.sb3 needs gymnasium")

from gymnasium import spaces  # noqa: E402
from stable_baselines3.common.buffers import ReplayBuffer as SB3Buffer  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv, VecFrameStack, VecTransposeImage  # noqa: E402

import agrl  # noqa: E402
import agrl.sb3  # noqa: E402

K = 4


class Pixels(gym.Env):
    """12 x 14 x C frames of random pixels (a new frame every step), episodes
    of 1 to 9 steps, terminated or truncated."""

    def __init__(self, seed, c=1):
        self.observation_space = spaces.Box(0, 255, (12, 14, c), np.uint8)
        self.action_space = spaces.Discrete(3)
        self.rng = np.random.default_rng(seed)
        self.left = 0

    def _frame(self):
        return self.rng.integers(0, 256, self.observation_space.shape, dtype=np.uint8)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.left = int(self.rng.integers(1, 10))
        return self._frame(), {}

    def step(self, action):
        self.left -= 1
        end = self.left <= 0
        return self._frame(), float(self.rng.standard_normal()), end and self.rng.random() < 0.5, end, {}


def make_env(n, channels_first=False, c=1, seed=0):
    venv = VecFrameStack(DummyVecEnv([lambda i=i: Pixels(seed + i, c) for i in range(n)]), K)
    return VecTransposeImage(venv) if channels_first else venv


def fill(env, bufs, steps, seed):
    """`steps` steps of random actions, from the environment's reset the
    first time, else from where the last call left it."""
    rng = np.random.default_rng(seed)
    obs = env.__dict__.get("_last_obs")
    if obs is None:
        obs = env.reset()
    for _ in range(steps):
        act = rng.integers(0, 3, size=env.num_envs)
        nobs, rew, done, infos = env.step(act)
        nxt = nobs.copy()
        for i, d in enumerate(done):
            if d:
                nxt[i] = infos[i]["terminal_observation"]
        for b in bufs:
            b.add(obs, nxt, act.reshape(-1, 1), rew, done, infos)
        obs = nobs
    env.__dict__["_last_obs"] = obs


def pair(env, bs, seed=1):
    kw = dict(device="cpu", n_envs=env.num_envs, optimize_memory_usage=True, handle_timeout_termination=False)
    ours = agrl.sb3.ReplayBuffer(bs, env.observation_space, env.action_space, frame_stack=K, seed=seed, **kw)
    ref = SB3Buffer(bs, env.observation_space, env.action_space, **kw)
    return ours, ref


def valid_rows(ref):
    """SB3's optimized buffer draws rows 0 .. pos-1, or every row but pos once full."""
    bs = ref.buffer_size
    return [r for r in range(bs) if r != ref.pos] if ref.full else list(range(ref.pos))


def check_rows(ours, ref):
    n = ref.n_envs
    newest = (ref.pos - 1) % ref.buffer_size
    rows = [r for r in valid_rows(ref) if r != newest]  # the newest step is drawn once the next is added
    assert rows
    state = np.random.get_state()
    a = ours._get_samples(np.array(rows))
    np.random.set_state(state)  # the same environments drawn
    b = ref._get_samples(np.array(rows))
    for x, y in zip(a, b):
        if x is None or y is None:  # fields SB3 leaves unset (n-step discounts)
            assert x is None and y is None
            continue
        assert x.shape == y.shape and x.dtype == y.dtype
        assert torch.equal(x, y)
    with pytest.raises(IndexError):
        ours._get_samples(np.array([newest]))
    assert n >= 1


@pytest.mark.parametrize("n_envs", [1, 3])
@pytest.mark.parametrize("channels_first", [False, True])
def test_rows_match_sb3(n_envs, channels_first):
    env = make_env(n_envs, channels_first, c=2 if channels_first else 1)
    ours, ref = pair(env, 30)
    assert ours.frame_table is not None and ours.obs_table is None
    for round_ in range(4):  # 4 * 17 steps: the 30-step ring wraps twice
        fill(env, [ours, ref], 17, seed=round_)
        check_rows(ours, ref)


def test_samples_are_sb3_rows():
    env = make_env(2)
    ours, ref = pair(env, 40, seed=5)
    fill(env, [ours, ref], 73, seed=3)
    valid = set(valid_rows(ref)) - {(ref.pos - 1) % ref.buffer_size}
    seen = set()
    for _ in range(20):
        s = ours.sample(64)
        rows, envs = ours.positions(ours.last_indices)
        for j, (r, e) in enumerate(zip(rows.tolist(), envs.tolist())):
            assert r in valid
            seen.add(r)
            want_obs = ref.observations[r, e]
            want_next = ref.observations[(r + 1) % ref.buffer_size, e]
            assert np.array_equal(s.observations[j].numpy(), want_obs)
            assert np.array_equal(s.next_observations[j].numpy(), want_next)
            assert s.actions[j].item() == ref.actions[r, e, 0]
            assert s.rewards[j, 0].item() == ref.rewards[r, e]
            assert s.dones[j, 0].item() == ref.dones[r, e]
    assert seen == valid


def test_pickle_round_trip():
    env = make_env(2, channels_first=True)
    ours, ref = pair(env, 25)
    fill(env, [ours, ref], 40, seed=8)
    again = pickle.loads(pickle.dumps(ours))
    check_rows(again, ref)
    fill(env, [again, ref], 9, seed=9)  # it goes on from where it was
    check_rows(again, ref)


def test_refusals():
    env = make_env(1)
    space, act = env.observation_space, env.action_space
    with pytest.raises(ValueError, match="optimize_memory_usage=True"):
        agrl.sb3.ReplayBuffer(10, space, act, "cpu", frame_stack=K)
    with pytest.raises(ValueError, match="not 4 stacked frames"):
        agrl.sb3.ReplayBuffer(10, spaces.Box(0, 255, (12, 14, 5), np.uint8), act, "cpu", optimize_memory_usage=True,
                              handle_timeout_termination=False, frame_stack=K)
    with pytest.raises(ValueError, match="uint8 Box"):
        agrl.sb3.ReplayBuffer(10, spaces.Box(0, 1, (12, 14, 4), np.float32), act, "cpu", optimize_memory_usage=True,
                              handle_timeout_termination=False, frame_stack=K)
    ours = agrl.sb3.ReplayBuffer(10, space, act, "cpu", optimize_memory_usage=True, handle_timeout_termination=False,
                                 frame_stack=K)
    obs = np.random.default_rng(0).integers(1, 256, (1, 12, 14, K), dtype=np.uint8)  # no zero padding: not a reset
    with pytest.raises(ValueError, match="environment 0 is not the stack"):
        ours.add(obs, obs, np.zeros((1, 1)), np.zeros(1), np.zeros(1), [{}])
    with pytest.raises(NotImplementedError, match="frame_table"):
        ours.observations


def test_dqn_trains_through_it():
    """SB3's DQN with VecFrameStack observations: its adds pass the buffer's
    check of every stack, and afterwards every row agrees with SB3's buffer
    fed the same adds (and the done that the second learn() sets)."""
    from stable_baselines3 import DQN

    class Shadowed(agrl.sb3.ReplayBuffer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.shadow = SB3Buffer(*args, **{k: v for k, v in kwargs.items() if k not in ("frame_stack", "seed")})

        def add(self, *args):
            super().add(*args)
            self.shadow.add(*args)

        @property
        def dones(self):
            outer = self

            class Both:
                def __setitem__(self, key, value):
                    agrl.sb3.ReplayBuffer.dones.fget(outer)[key] = value
                    outer.shadow.dones[key] = value

            return Both()

    env = make_env(2, channels_first=True)
    model = DQN("MlpPolicy", env, buffer_size=120, learning_starts=40, batch_size=16, train_freq=4,
                optimize_memory_usage=True, replay_buffer_class=Shadowed,
                replay_buffer_kwargs={"frame_stack": K, "handle_timeout_termination": False},
                policy_kwargs={"net_arch": [16]}, seed=0, device="cpu")
    model.learn(300)
    with pytest.warns(UserWarning, match="truncated"):
        model.learn(40)  # reset_num_timesteps: SB3 sets the last step's done through `dones`
    rb = model.replay_buffer
    assert isinstance(rb, Shadowed) and rb.full and rb._forced
    check_rows(rb, rb.shadow)
