"""agrl.DQN over a frame table (frame_stack): the stacks learn() acts on
against Gymnasium's FrameStackObservation(padding_type="reset") on the same
ale-py Pong episodes (sticky actions, truncations and resets included);
evaluate() against a greedy loop over that wrapper; a short learn on Pong
through AtariPreprocessing that saves (a version-4 DQN file read here with
numpy), loads and resumes; a resumed run on an environment with state that
equals the uninterrupted one; bad arguments refused naming them."""

import subprocess

import numpy as np
import pytest

import agrl
from refs import cli_or_skip, container_keys

gym = pytest.importorskip("gymnasium")
ale_py = pytest.importorskip("ale_py")
gym.register_envs(ale_py)

K = 4
SMALL = dict(frame_stack=K, conv=[(8, 4, 4)], hidden=[32], batch_size=16, buffer_size=2000, learning_starts=100,
             train_freq=4, gradient_steps=1, target_update_interval=100, n_step=1, lr=1e-4, seed=3)


class Downsample(gym.ObservationWrapper):
    """Pong's 210 x 160 grayscale screen, every 5th row and column: 42 x 32 uint8."""

    def __init__(self, env):
        super().__init__(env)
        self.observation_space = gym.spaces.Box(0, 255, (42, 32), np.uint8)

    def observation(self, obs):
        return np.ascontiguousarray(obs[::5, ::5])


def pong(max_steps=60):
    """ale-py's Pong in grayscale (v5: sticky actions, frameskip 4), small,
    its episodes truncated after max_steps steps."""
    env = gym.make("ALE/Pong-v5", obs_type="grayscale")
    return gym.wrappers.TimeLimit(Downsample(env), max_episode_steps=max_steps)


def test_learn_acts_on_the_stacks_of_frame_stack_observation():
    d = agrl.DQN.for_env("cpu", pong(), 300, **SMALL)
    assert d.config["obs_shape"] == (K, 42, 32) and d.obs_dim == K * 42 * 32
    seen, acts = [], []
    act = d.act_u8

    def spy(obs, explore=True, step=0):
        a = act(obs, explore, step)
        seen.append(np.array(obs))
        acts.append(int(a))
        return a

    d.act_u8 = spy
    res = d.learn(pong(), 300)
    assert res["steps"] == 300 and res["episodes"] == 5  # truncated every 60 steps
    # the same episodes through Gymnasium's stacking: the same seed and actions
    ref = gym.wrappers.FrameStackObservation(pong(), K, padding_type="reset")
    obs, _ = ref.reset(seed=agrl.derive_seed(SMALL["seed"], 0))
    for t, a in enumerate(acts):
        np.testing.assert_array_equal(seen[t], np.asarray(obs).reshape(-1), err_msg=f"step {t}")
        obs, _, term, trunc, _ = ref.step(a)
        if term or trunc:
            obs, _ = ref.reset()
    # transitions stored: every step's frame, and each episode's last observation
    assert d.stored == 300 + 5
    assert d.updates > 0


def test_evaluate_is_a_greedy_loop_over_frame_stack_observation():
    d = agrl.DQN.for_env("cpu", pong(40), 100, **SMALL)
    d.learn(pong(40), 150)
    mean, rets = d.evaluate(pong(40), 2, seed=9)
    ref = gym.wrappers.FrameStackObservation(pong(40), K, padding_type="reset")
    want = []
    for k in range(2):
        obs, _ = ref.reset(seed=agrl.derive_seed(9, k))
        ret, done = 0.0, False
        while not done:
            obs, r, term, trunc, _ = ref.step(int(d.act_u8(np.asarray(obs).reshape(-1), False)))
            ret += float(np.float32(r))
            done = term or trunc
        want.append(ret)
    assert rets == want and mean == sum(want) / 2


def atari(max_steps=None):
    pytest.importorskip("cv2")  # AtariPreprocessing resizes with OpenCV
    env = gym.make("ALE/Pong-v5", frameskip=1, max_episode_steps=max_steps)
    return gym.wrappers.AtariPreprocessing(env, frame_skip=4, screen_size=84, grayscale_obs=True, noop_max=30)


def test_short_learn_on_atari_pong_saves_loads_and_resumes(tmp_path):
    env = atari()
    nature = dict(SMALL, conv=[(32, 8, 4), (64, 4, 2), (64, 3, 1)], hidden=[512], per=True)
    d = agrl.DQN.for_env("cpu", env, 400, **nature)
    assert d.config["obs_shape"] == (K, 84, 84)
    path = tmp_path / "pong.agrl"
    res = d.learn(env, 300, checkpoint=path, checkpoint_every=150)
    assert res["steps"] == 300 and d.updates == (300 - 100) // 4  # at steps 104, 108, ..., 300
    # the DQN's container, then its frame table's, then that table's fields'
    raw = path.read_bytes()
    keys, total, _ = container_keys(raw)
    assert keys["kind"] == "dqn" and keys["dqn.version"] == 4 and keys["dqn.frame_stack"] == K
    assert list(keys["dqn.obs_shape"]) == [K, 84, 84]
    fk, ft, _ = container_keys(raw, total)
    assert fk["kind"] == "frames" and fk["frames.version"] == 2  # prioritized
    assert (fk["frames.height"], fk["frames.width"], fk["frames.channels"], fk["frames.stack"]) == (84, 84, 1, K)
    assert fk["frames.size"] == d.stored and fk["frames.capacity"] == nature["buffer_size"]
    rk, rt, _ = container_keys(raw, total + ft)
    assert rk["kind"] == "replay" and total + ft + rt == len(raw)
    e = agrl.DQN.load("cpu", path)
    assert e.config == d.config and e.updates == d.updates
    assert (e.stored, e.sampleable) == (d.stored, d.sampleable)
    # both go on with the same updates: the same losses and greedy actions
    assert e.train(3) == d.train(3)
    probe = np.random.default_rng(0).integers(0, 256, (5, e.obs_dim), dtype=np.uint8)
    np.testing.assert_array_equal(e.act_u8(probe, False), d.act_u8(probe, False))
    # Atari's state is not saved: resume=True is refused, a new episode goes on
    with pytest.raises(agrl.StateError, match="get_state"):
        e.learn(atari(), 400, resume=True)
    res = e.learn(atari(), 400, resume="new_episode")
    assert res["steps"] == 400 and e.updates > d.updates


class Images:
    """A deterministic Gymnasium-style environment of 6 x 5 x 2 uint8 images
    (a drifting pattern; reward 1 for action 1 when the pattern's phase is
    even) whose state can be read and set; episodes of 7..12 steps, ended by
    termination or truncation in turn."""

    def __init__(self):
        self.observation_space = gym.spaces.Box(0, 255, (6, 5, 2), np.uint8)
        self.action_space = gym.spaces.Discrete(3)
        self.rng = np.random.default_rng(0)
        self.t = self.phase = self.len = self.n = 0

    def _obs(self):
        y, x, c = np.meshgrid(np.arange(6), np.arange(5), np.arange(2), indexing="ij")
        return ((y * 31 + x * 17 + c * 101 + self.phase * 13) % 256).astype(np.uint8)

    def reset(self, seed=None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.t, self.phase, self.len = 0, int(self.rng.integers(0, 50)), int(self.rng.integers(7, 13))
        return self._obs(), {}

    def step(self, a):
        self.phase += int(a) + 1
        self.t += 1
        end = self.t >= self.len
        self.n += end
        r = float(a == 1 and self.phase % 2 == 0)
        return self._obs(), r, end and self.n % 2 == 1, end and self.n % 2 == 0, {}

    def get_state(self):
        import pickle
        return pickle.dumps((self.rng.bit_generator.state, self.t, self.phase, self.len, self.n))

    def set_state(self, b):
        import pickle
        st, self.t, self.phase, self.len, self.n = pickle.loads(b)
        self.rng.bit_generator.state = st


def test_resume_continues_the_uninterrupted_run(tmp_path):
    cfg = dict(frame_stack=3, hidden=[16], batch_size=8, buffer_size=300, learning_starts=40, train_freq=4,
               gradient_steps=2, target_update_interval=30, n_step=3, seed=5)
    env = Images()
    ref = []
    d = agrl.DQN.for_env("cpu", env, 600, **cfg)
    assert d.config["obs_shape"] == (6, 6, 5)
    d.learn(env, 600, ref.append)
    part = []
    a = agrl.DQN.for_env("cpu", Images(), 600, **cfg)
    path = tmp_path / "run.agrl"
    a.learn(Images(), 250, part.append, checkpoint=path)
    b = agrl.DQN.load("cpu", path)
    rest = []
    b.learn(Images(), 600, rest.append, resume=True)  # its state from the checkpoint
    assert part + rest == ref
    assert any(ev["kind"] == "phase" for ev in rest) and any(ev["kind"] == "episode" for ev in rest)


def test_agrl_inspect_prints_the_three_parts_of_a_frame_dqn(tmp_path):
    cli = cli_or_skip()
    d = agrl.DQN.for_env("cpu", Images(), 100, frame_stack=2, hidden=[8], batch_size=4, buffer_size=50)
    d.learn(Images(), 30)
    d.save(tmp_path / "f.agrl")
    raw = (tmp_path / "f.agrl").read_bytes()
    _, total, _ = container_keys(raw)
    _, ft, _ = container_keys(raw, total)
    out = subprocess.run([cli, "inspect", str(tmp_path / "f.agrl")], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    for want in ("kind: dqn", "  dqn.frame_stack    i64       2", f"then, from byte {total}: its frame table",
                 "kind: frames", f"then, from byte {total + ft}: its frame table's fields", "kind: replay"):
        assert any(line.rstrip() == want.rstrip() or line.split() == want.split() for line in lines), want


def test_bad_arguments_are_refused_naming_them(tmp_path):
    env = pong()
    with pytest.raises(agrl.InvalidArgError, match="frame_stack"):
        agrl.DQN.for_env("cpu", env, 100)  # images need a frame table
    with pytest.raises(agrl.InvalidArgError, match="frame_stack"):
        agrl.DQN.for_env("cpu", agrl.make("CartPole-v1"), 100, frame_stack=4)
    with pytest.raises(agrl.InvalidArgError, match="obs_shape"):
        agrl.DQN.for_env("cpu", env, 100, **dict(SMALL, obs_shape=(4, 32, 42)))
    with pytest.raises(agrl.InvalidArgError, match="frame_stack = 65"):
        agrl.DQN("cpu", 65 * 4, 3, 100, frame_stack=65, obs_shape=(65, 2, 2))
    with pytest.raises(agrl.InvalidArgError, match="multiple of k"):
        agrl.DQN("cpu", 3 * 4, 3, 100, frame_stack=2, obs_shape=(3, 2, 2))
    d = agrl.DQN.for_env("cpu", env, 100, **SMALL)
    frame = np.zeros((42, 32), np.uint8)
    with pytest.raises(agrl.StateError, match="store_frames"):
        d.store(np.zeros(d.obs_dim, np.float32), 0, 0.0, np.zeros(d.obs_dim, np.float32), 0)
    with pytest.raises(agrl.ShapeError, match="frames"):
        d.store_frames(np.zeros((41, 32), np.uint8), 1, 0, 0.0, 0)
    with pytest.raises(agrl.ShapeError, match="action"):
        d.store_frames(np.stack([frame, frame]), [1, 0], [0], [0.0, 0.0], [0, 0])
    with pytest.raises(agrl.OutOfRangeError, match="actions"):
        d.store_frames(frame, 1, 7, 0.0, 0)
    with pytest.raises(agrl.ShapeError, match="act_u8"):
        d.act_u8(np.zeros(10, np.uint8))
    assert d.stored == 0
    with pytest.raises(agrl.InvalidArgError, match="resume"):
        d.learn(env, 10, resume="bogus")

    class Floats(gym.ObservationWrapper):
        def observation(self, obs):
            return obs.astype(np.float32)

    with pytest.raises(agrl.InvalidArgError, match="uint8"):
        d.learn(Floats(pong()), 10)
    with pytest.raises(agrl.InvalidArgError, match="n_envs"):
        agrl.DQN.for_env("cpu", env, 100, **dict(SMALL, n_envs=2)).learn(pong(), 10)
    r = agrl.DQN("cpu", 4, 2, 100, hidden=[8])
    with pytest.raises(agrl.StateError, match="frame_stack = 0"):
        r.store_frames(np.zeros(4, np.uint8), 1, 0, 0.0, 0)
    with pytest.raises(agrl.StateError, match="frame_stack"):
        r.frame_stack_of()
    n = agrl.DQN.for_env("cpu", env, 100, **dict(SMALL, n_step=3))
    n.learn(pong(), 20, checkpoint=tmp_path / "n.agrl")
    with pytest.raises(agrl.InvalidArgError, match="n_step"):
        agrl.DQN.load("cpu", tmp_path / "n.agrl").learn(pong(), 40, resume="new_episode")
