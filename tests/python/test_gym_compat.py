"""agrl.make's environments as Gymnasium environments, against Gymnasium
itself: their spaces are the spaces of Gymnasium's own environment of the
same id (bounds, shape, dtype, n), gymnasium's check_env accepts them with no
warning it does not give Gymnasium's own environment, their trajectories
equal those of Gymnasium's environment started from the same state (through
Gymnasium's wrappers and SyncVectorEnv too), and without gymnasium the
fallback spaces have the same bounds and behave as Gymnasium's spaces do.

The reference for a trajectory is GymTwin: gymnasium.make(id), whose every
reset puts the task's float64 state of agrl's start state (read from
agrl's state image, whose layout include/agrl/env.h documents) into
Gymnasium's environment, so that from there on every observation, reward
and flag is Gymnasium's own."""

import inspect
import json
import struct
import subprocess
import sys
import warnings

import numpy as np
import pytest

import agrl
from refs import subprocess_env

gym = pytest.importorskip("gymnasium")
from gymnasium.utils.env_checker import check_env  # noqa: E402
from gymnasium.utils.seeding import np_random  # noqa: E402

IDS = ["CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1", "MountainCarContinuous-v0"]
SHORT = {"CartPole-v1": "cartpole", "Acrobot-v1": "acrobot", "MountainCar-v0": "mountaincar",
         "Pendulum-v1": "pendulum", "MountainCarContinuous-v0": "mountaincar_continuous"}
# the number of doubles of each task's state (include/agrl/env.h): Gymnasium's state vector
STATE_DIM = {"CartPole-v1": 4, "Acrobot-v1": 4, "MountainCar-v0": 2, "Pendulum-v1": 2,
             "MountainCarContinuous-v0": 2}


def task_state(env, env_id):
    """The task's float64 state of agrl's env: the end of get_state() is the
    C library's image, 48 bytes of header then the doubles."""
    d = STATE_DIM[env_id]
    blob = env.get_state()
    image = blob[len(blob) - (48 + 8 * d):]
    assert image[:4] == b"AGES" and struct.unpack_from("<I", image, 36)[0] == d
    return np.array(struct.unpack_from(f"<{d}d", image, 48), dtype=np.float64)


def gym_observation(genv, env_id):
    """Gymnasium's observation of its environment's current state."""
    u = genv.unwrapped
    if env_id == "Acrobot-v1":
        return u._get_ob()
    if env_id == "Pendulum-v1":
        return u._get_obs()
    return np.array(u.state, dtype=np.float32)


class GymTwin(gym.Wrapper):
    """Gymnasium's own environment `env_id` (gymnasium.make: its TimeLimit,
    its checks) whose episodes start from agrl's start states for the same
    seed sequence: reset(seed=s) and reset() reset a twin agrl environment
    the same way and copy its start state into Gymnasium's."""

    def __init__(self, env_id):
        super().__init__(gym.make(env_id))
        self.env_id = env_id
        self.twin = agrl.make(env_id)

    def reset(self, *, seed=None, options=None):
        twin_obs, _ = self.twin.reset(seed=seed)
        _, info = self.env.reset(seed=seed)
        self.env.unwrapped.state = task_state(self.twin, self.env_id)
        obs = gym_observation(self.env, self.env_id)
        assert np.array_equal(obs, twin_obs) and obs.dtype == np.float32
        return obs, info


def policy(env_id, obs, rng, steer):
    """Random actions, or (steer) ones that end episodes early or hold them
    to the time limit; continuous ones reach past the bounds, to be clipped."""
    if env_id in ("Pendulum-v1", "MountainCarContinuous-v0"):
        reach = 3.0 if env_id == "Pendulum-v1" else 1.5
        if steer and env_id == "MountainCarContinuous-v0":
            return np.array([reach if obs[1] >= 0 else -reach], np.float32)
        return rng.uniform(-reach, reach, size=1).astype(np.float32)
    if not steer:
        return int(rng.integers(3 if env_id != "CartPole-v1" else 2))
    if env_id == "CartPole-v1":
        return int(obs[2] + 0.5 * obs[3] > 0) if rng.random() < 0.9 else int(rng.integers(2))
    if env_id == "Acrobot-v1":
        return 0 if obs[4] > 0 else 2  # torque against the first link's swing
    return 2 if obs[1] > 0 else 0  # MountainCar: pump energy


def gym_action(a):
    return a if isinstance(a, np.ndarray) else int(a)


def assert_same_step(s1, s2, where):
    (o1, r1, t1, tr1, _), (o2, r2, t2, tr2, _) = s1, s2
    assert o1.dtype == np.float32 and o1.shape == o2.shape, where
    assert np.array_equal(o1, o2), (where, o1, o2)
    assert r1 == float(np.float32(r2)), (where, r1, r2)  # agrl's rewards are float32
    assert (t1, tr1) == (bool(t2), bool(tr2)), where
    assert type(t1) is bool and type(tr1) is bool


# ---- classes and spaces ----

def test_env_is_a_gymnasium_env_with_gymnasium_spaces():
    assert issubclass(agrl.Env, gym.Env)
    assert agrl.Box is gym.spaces.Box and agrl.Discrete is gym.spaces.Discrete
    for env_id in IDS:
        env = agrl.make(env_id)
        assert isinstance(env, gym.Env) and env.unwrapped is env
        assert type(env.observation_space) is gym.spaces.Box
        assert type(env.action_space) in (gym.spaces.Box, gym.spaces.Discrete)
        assert isinstance(env.spec, gym.envs.registration.EnvSpec)


@pytest.mark.parametrize("env_id", IDS)
def test_spaces_equal_gymnasium_spaces(env_id):
    ref = gym.make(env_id)
    for name in (env_id, SHORT[env_id]):
        env = agrl.make(name)
        for mine, theirs in ((env.observation_space, ref.observation_space), (env.action_space, ref.action_space)):
            assert type(mine) is type(theirs) and mine == theirs
            assert mine.shape == theirs.shape and mine.dtype == theirs.dtype
            if isinstance(theirs, gym.spaces.Box):  # exactly, infinities included (== is allclose)
                assert mine.low.dtype == theirs.low.dtype and np.array_equal(mine.low, theirs.low)
                assert mine.high.dtype == theirs.high.dtype and np.array_equal(mine.high, theirs.high)
                assert np.array_equal(mine.bounded_below, theirs.bounded_below)
                assert np.array_equal(mine.bounded_above, theirs.bounded_above)
            else:
                assert mine.n == theirs.n and mine.start == theirs.start


def test_cartpole_bounds_are_twice_the_termination_thresholds():
    high = agrl.make("CartPole-v1").observation_space.high
    assert high.tolist() == [np.float32(4.8), np.inf, np.float32(0.41887903), np.inf]
    assert high[2] == np.float32(2 * gym.make("CartPole-v1").unwrapped.theta_threshold_radians)


@pytest.mark.parametrize("env_id", IDS)
def test_spec_matches_gymnasium_registry(env_id):
    spec, ref = agrl.make(SHORT[env_id]).spec, gym.spec(env_id)
    assert (spec.id, spec.max_episode_steps, spec.reward_threshold) == (
        ref.id, ref.max_episode_steps, ref.reward_threshold)
    assert spec.nondeterministic is False


def test_metadata_render_mode_and_close():
    env = agrl.make("CartPole-v1")
    assert env.metadata["render_modes"] == [] and env.render_mode is None
    assert env.render() is None
    with pytest.raises(agrl.UnsupportedError, match="render_mode 'human'"):
        agrl.Env("CartPole-v1", render_mode="human")
    with pytest.raises(agrl.UnsupportedError, match="do not render"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # gymnasium.make's own word on the mode
        gym.make(env.spec, render_mode="rgb_array")
    env.close()
    env.close()


# ---- Gymnasium's checker ----

def warning_texts(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return {str(w.message) for w in caught}


@pytest.mark.parametrize("env_id", IDS)
def test_check_env_passes(env_id):
    env = agrl.make(env_id)
    mine = warning_texts(lambda: check_env(env))  # the render and close checks included
    # the warnings Gymnasium's own environment gets (infinite bounds, an
    # unnormalized action range) are about the task; no other may appear
    theirs = warning_texts(lambda: check_env(gym.make(env_id).unwrapped, skip_render_check=True))
    assert mine <= theirs, mine - theirs
    assert all("infinity" in w or "symmetric and normalized" in w for w in mine), mine


@pytest.mark.parametrize("env_id", IDS)
def test_gymnasium_make_of_the_spec(env_id):
    """gymnasium.make(env.spec) makes the same environment with Gymnasium's
    TimeLimit (at the same limit), OrderEnforcing and PassiveEnvChecker,
    which find nothing to warn about."""
    spec = agrl.make(env_id).spec
    made = warning_texts(lambda: gym.make(spec))
    assert made == set()
    wrapped = gym.make(spec)
    assert isinstance(wrapped.unwrapped, agrl.Env)
    assert wrapped.spec.max_episode_steps == gym.spec(env_id).max_episode_steps
    ref = GymTwin(env_id)
    rng = np.random.default_rng(5)
    texts = warning_texts(lambda: run_pair(wrapped, ref, env_id, rng, episodes=2, seed=17))
    assert texts == set()


def run_pair(env, ref, env_id, rng, episodes, seed, check=assert_same_step):
    """Plays `episodes` episodes of env and ref with the same actions,
    checking every step; returns the number of terminations and truncations."""
    ends = [0, 0]
    o1, _ = env.reset(seed=seed)
    o2, _ = ref.reset(seed=seed)
    for episode in range(episodes):
        if episode:
            o1, _ = env.reset()
            o2, _ = ref.reset()
        assert np.array_equal(o1, o2)
        steer = episode % 2 == 1
        for t in range(10000):
            a = policy(env_id, o2[-1] if o2.ndim == 2 else o2, rng, steer)  # the last frame of a stack
            s1, s2 = env.step(a), ref.step(gym_action(a))
            check(s1, s2, (env_id, episode, t))
            o2 = s2[0]
            if s1[2] or s1[3]:
                ends[0] += s1[2]
                ends[1] += s1[3] and not s1[2]
                break
    return ends


# ---- trajectories ----

@pytest.mark.parametrize("env_id", IDS)
def test_trajectories_match_gymnasium(env_id):
    rng = np.random.default_rng(IDS.index(env_id))
    env = agrl.make(env_id)
    ends = run_pair(env, GymTwin(env_id), env_id, rng, episodes=6, seed=2024)
    if env_id == "Pendulum-v1":
        assert ends == [0, 6]  # never terminates
    else:
        assert ends[0] >= 1 and ends[1] >= 1, ends  # both ways of ending were compared


@pytest.mark.parametrize("env_id", IDS)
def test_observations_are_float32_inside_gymnasium_space(env_id):
    env, space = agrl.make(env_id), gym.make(env_id).observation_space
    rng = np.random.default_rng(1)
    seen = 0
    for seed in range(4):
        obs, _ = env.reset(seed=seed)
        while True:
            assert type(obs) is np.ndarray and obs.dtype == np.float32 and obs.shape == space.shape
            assert space.contains(obs), obs
            seen += 1
            obs, _, term, trunc, _ = env.step(policy(env_id, obs, rng, seed % 2 == 1))
            if term or trunc:
                assert space.contains(obs), obs  # a terminal observation too
                break
    assert seen > 100


# ---- seeds and actions ----

def test_reset_seeds_np_random_as_gymnasium_does():
    """reset(seed=s) puts in np_random the generator Gymnasium's Env.reset
    makes of s (Gymnasium's own CartPole then draws its start state from it,
    agrl's does not)."""
    env = agrl.make("CartPole-v1")
    ref = gym.make("CartPole-v1").unwrapped
    for seed in (0, 123, 2**63 + 5):
        env.reset(seed=seed)
        gym.Env.reset(ref, seed=seed)
        assert env.np_random.bit_generator.state == ref.np_random.bit_generator.state
        assert env.np_random_seed == ref.np_random_seed == seed
        before = env.np_random.bit_generator.state
        env.reset()  # no seed: the generator goes on
        assert env.np_random.bit_generator.state == before
    env.reset(seed=np.uint64(9))  # numpy's ints too
    assert env.np_random.bit_generator.state == np_random(9)[0].bit_generator.state
    state = env.np_random.bit_generator.state
    with pytest.raises(agrl.InvalidArgError):
        env.reset(seed=-1)
    with pytest.raises(agrl.InvalidArgError, match="options"):
        env.reset(seed=4, options={"low": -0.1, "high": 0.1})
    assert env.np_random.bit_generator.state == state  # a refused reset changed nothing
    obs, info = env.reset(seed=9, options={})
    assert info == {} and np.array_equal(obs, agrl.make("CartPole-v1").reset(seed=9)[0])


def test_discrete_actions_accept_ints_and_numpy_integers():
    env, ref = agrl.make("CartPole-v1"), GymTwin("CartPole-v1")
    env.reset(seed=11)
    ref.reset(seed=11)
    actions = [1, 0, np.int64(1), np.int32(0), np.uint8(1), np.int16(0), np.array(1), np.array(0, np.int8),
               env.action_space.sample(), np.int64(1)]
    for a in actions:
        assert a in env.action_space and a in ref.action_space
        assert_same_step(env.step(a), ref.step(int(a)), repr(a))


def test_box_actions_accept_arrays_of_the_space_shape():
    env, ref = agrl.make("Pendulum-v1"), GymTwin("Pendulum-v1")
    env.reset(seed=3)
    ref.reset(seed=3)
    for a in (np.array([0.5], np.float32), np.array([-2.0], np.float32), np.array([7.0], np.float32),
              np.array([1.25]), [0.75], env.action_space.sample()):
        assert_same_step(env.step(a), ref.step(np.asarray(a, np.float32)), repr(a))


@pytest.mark.parametrize("env_id,action,error,message", [
    ("CartPole-v1", 2, agrl.OutOfRangeError, r"step: action 2 is outside 0\.\.1"),
    ("CartPole-v1", np.int64(-1), agrl.OutOfRangeError, r"step: action -1 is outside 0\.\.1"),
    ("Acrobot-v1", np.array(3), agrl.OutOfRangeError, r"step: action 3 is outside 0\.\.2"),
    ("MountainCar-v0", 1.5, agrl.InvalidArgError, r"step: action 1\.5 is not a whole number"),
    ("CartPole-v1", [0, 1], agrl.ShapeError, r"step: the action has 2 values, the environment takes 1"),
    ("CartPole-v1", "left", TypeError, r"step: action"),
    ("Pendulum-v1", np.array([0.1, 0.2], np.float32), agrl.ShapeError, r"step: the action has 2 values"),
    ("Pendulum-v1", np.array([np.nan], np.float32), agrl.InvalidArgError, r"action\[0\] = nan is not a finite"),
    ("MountainCarContinuous-v0", [np.inf], agrl.InvalidArgError, r"action\[0\] = inf is not a finite"),
])
def test_out_of_space_actions_raise_naming_the_action(env_id, action, error, message):
    env = agrl.make(env_id)
    env.reset(seed=1)
    before = env.get_state()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Box.contains warns of its cast of a list
        assert action not in gym.make(env_id).action_space  # Gymnasium's space refuses it too
    with pytest.raises(error, match=message):
        env.step(action)
    assert env.get_state() == before  # and nothing moved


# ---- Gymnasium's wrappers ----

@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_record_episode_statistics_matches_gymnasium(env_id):
    env = gym.wrappers.RecordEpisodeStatistics(agrl.make(env_id))
    ref = gym.wrappers.RecordEpisodeStatistics(GymTwin(env_id))
    rng = np.random.default_rng(3)
    stats = []

    def check(s1, s2, where):
        assert_same_step(s1, s2, where)
        if s1[2] or s1[3]:
            e1, e2 = s1[4]["episode"], s2[4]["episode"]
            assert e1["l"] == e2["l"] and e1["r"] == pytest.approx(e2["r"], rel=1e-6), (e1, e2)
            stats.append((float(e1["r"]), int(e1["l"])))
        else:
            assert "episode" not in s1[4]

    run_pair(env, ref, env_id, rng, episodes=3, seed=8, check=check)
    assert len(stats) == 3 and len(env.return_queue) == 3 and list(env.length_queue) == [s[1] for s in stats]


def test_time_limit_shortens_episodes_like_gymnasium():
    env = gym.wrappers.TimeLimit(agrl.make("MountainCar-v0"), max_episode_steps=50)
    ref = gym.wrappers.TimeLimit(GymTwin("MountainCar-v0"), max_episode_steps=50)
    lengths = []

    def check(s1, s2, where):
        assert_same_step(s1, s2, where)
        if s1[2] or s1[3]:
            lengths.append((where[2] + 1, s1[3]))

    run_pair(env, ref, "MountainCar-v0", np.random.default_rng(0), episodes=2, seed=1, check=check)
    assert lengths == [(50, True), (50, True)]
    assert env.spec.max_episode_steps == 50


def test_a_longer_time_limit_keeps_the_task_limit_like_gymnasium_make():
    """agrl's environments truncate at spec.max_episode_steps as
    gymnasium.make's do, so a TimeLimit of 1000 over either ends CartPole's
    balanced episode on step 500."""
    env = gym.wrappers.TimeLimit(agrl.make("CartPole-v1"), max_episode_steps=1000)
    ref = gym.wrappers.TimeLimit(GymTwin("CartPole-v1"), max_episode_steps=1000)
    env.reset(seed=0)
    ref.reset(seed=0)
    for t in range(1, 1001):
        obs = ref.unwrapped.state
        a = int(obs[2] + 0.5 * obs[3] > 0)
        s1, s2 = env.step(a), ref.step(a)
        assert_same_step(s1, s2, t)
        if s1[2] or s1[3]:
            break
    assert t == 500 and s1[3] and not s1[2]


def test_frame_stack_observation_matches_gymnasium():
    env = gym.wrappers.FrameStackObservation(agrl.make("Acrobot-v1"), 4)
    ref = gym.wrappers.FrameStackObservation(GymTwin("Acrobot-v1"), 4)
    assert env.observation_space == ref.observation_space and env.observation_space.shape == (4, 6)
    assert np.array_equal(env.observation_space.high, ref.observation_space.high)

    def check(s1, s2, where):
        assert_same_step(s1, s2, where)
        assert s1[0].shape == (4, 6) and s1[0] in ref.observation_space

    run_pair(env, ref, "Acrobot-v1", np.random.default_rng(2), episodes=2, seed=4, check=check)


def test_normalize_observation_matches_gymnasium():
    env = gym.wrappers.NormalizeObservation(agrl.make("CartPole-v1"))
    ref = gym.wrappers.NormalizeObservation(GymTwin("CartPole-v1"))
    ends = run_pair(env, ref, "CartPole-v1", np.random.default_rng(6), episodes=3, seed=30)
    assert sum(ends) == 3
    assert np.array_equal(env.obs_rms.mean, ref.obs_rms.mean) and env.obs_rms.count == ref.obs_rms.count


def test_sync_vector_env_matches_gymnasium():
    n = 4
    venv = gym.vector.SyncVectorEnv([lambda: agrl.make("CartPole-v1")] * n)
    vref = gym.vector.SyncVectorEnv([lambda: GymTwin("CartPole-v1")] * n)
    own = gym.make_vec("CartPole-v1", n, vectorization_mode="sync")
    assert venv.single_observation_space == own.single_observation_space
    assert venv.observation_space == own.observation_space and venv.action_space == own.action_space
    obs, _ = venv.reset(seed=40)
    ref_obs, _ = vref.reset(seed=40)
    assert obs.shape == (n, 4) and obs.dtype == np.float32 and np.array_equal(obs, ref_obs)
    for i in range(n):  # copy i was reset with seed 40 + i
        assert np.array_equal(obs[i], agrl.make("CartPole-v1").reset(seed=40 + i)[0])
    rng = np.random.default_rng(7)
    ended = 0
    for t in range(400):
        a = rng.integers(2, size=n)
        o1, r1, t1, tr1, _ = venv.step(a)
        o2, r2, t2, tr2, _ = vref.step(a)
        assert np.array_equal(o1, o2) and np.array_equal(r1, r2.astype(np.float32).astype(np.float64)), t
        assert np.array_equal(t1, t2) and np.array_equal(tr1, tr2), t
        ended += int(np.sum(t1 | tr1))
    assert ended > 10  # autoresets were compared
    venv.close()


# ---- Stable-Baselines3 ----

@pytest.mark.parametrize("env_id", IDS)
def test_stable_baselines3_check_env_accepts_them(env_id):
    try:
        from stable_baselines3.common.env_checker import check_env as sb3_check_env
    except ImportError as e:
        pytest.skip(f"stable-baselines3 (with torch) is not installed: {e}")
    mine = warning_texts(lambda: sb3_check_env(agrl.make(env_id), warn=True))
    # no warning beyond those for Gymnasium's own environment (Pendulum's range of +-2)
    theirs = warning_texts(lambda: sb3_check_env(gym.make(env_id).unwrapped, warn=True))
    assert mine <= theirs, mine - theirs


# ---- without gymnasium ----

def probes_box(space):
    return [np.zeros(space.shape, np.float32), np.zeros(space.shape, np.float64), space.high.copy(),
            space.high * 2, np.zeros(space.shape[0] + 1, np.float32), [0.0] * space.shape[0],
            np.full(space.shape, np.nan, np.float32), "x"]


def probes_discrete(n):
    return [0, n - 1, n, -1, True, np.int64(1), np.int32(n), np.array(1), np.array([1]), 1.0, np.float32(0),
            None, "1"]


def test_fallback_spaces_behave_like_gymnasium_spaces():
    from agrl.envs import FallbackBox, FallbackDiscrete

    cases = [(-1.0, 2.0, (3,)), (np.array([-4.8, -np.inf, -0.4, -np.inf], np.float32),
                                 np.array([4.8, np.inf, 0.4, np.inf], np.float32), None),
             (np.array([0.0, -np.inf], np.float32), np.array([np.inf, 5.0], np.float32), None),
             # all four kinds of interval: bounded, above only, below only, neither
             (np.array([-1.0, -np.inf, 0.5, -np.inf], np.float32), np.array([1.0, 5.0, np.inf, np.inf], np.float32),
              None),
             (np.array([-2.0], np.float32), np.array([2.0], np.float32), None)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Box.contains warns of its casts
        for low, high, shape in cases:
            mine, theirs = FallbackBox(low, high, shape, np.float32), gym.spaces.Box(low, high, shape, np.float32)
            assert mine.shape == theirs.shape and mine.dtype == theirs.dtype
            assert np.array_equal(mine.low, theirs.low) and np.array_equal(mine.high, theirs.high)
            assert mine.low.dtype == theirs.low.dtype == np.float32
            assert np.array_equal(mine.bounded_below, theirs.bounded_below)
            assert np.array_equal(mine.bounded_above, theirs.bounded_above)
            assert all(mine.is_bounded(m) == theirs.is_bounded(m) for m in ("both", "below", "above"))
            assert mine.seed(21) == theirs.seed(21) == 21
            for _ in range(20):  # the same draws from the same seed
                x, y = mine.sample(), theirs.sample()
                assert x.dtype == y.dtype and np.array_equal(x, y) and x in theirs
            for p in probes_box(theirs):
                assert mine.contains(p) == theirs.contains(p), p
            assert repr(mine) == repr(theirs)
        for n in (2, 3):
            mine, theirs = FallbackDiscrete(n, seed=5), gym.spaces.Discrete(n, seed=5)
            assert (mine.n, mine.start, mine.shape) == (theirs.n, theirs.start, theirs.shape)
            assert mine.dtype == theirs.dtype == np.int64
            assert type(mine.n) is type(theirs.n) is np.int64
            draws = [mine.sample() for _ in range(50)]
            assert draws == [theirs.sample() for _ in range(50)] and type(draws[0]) is np.int64
            mask = np.array([0] * (n - 1) + [1], np.int8)
            assert mine.sample(mask=mask) == theirs.sample(mask=mask) == n - 1
            if "probability" in inspect.signature(theirs.sample).parameters:  # gymnasium >= 1.1
                p = np.full(n, 1.0 / n)
                draws = [mine.sample(probability=p) for _ in range(9)]
                assert draws == [theirs.sample(probability=p) for _ in range(9)]
            for x in probes_discrete(n):
                assert mine.contains(x) == theirs.contains(x), x
            assert repr(mine) == repr(theirs)


BLOCKED_CHILD = r"""
import json, sys

class NoGymnasium:
    def find_spec(self, name, path=None, target=None):
        if name == "gymnasium" or name.startswith("gymnasium."):
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None

sys.meta_path.insert(0, NoGymnasium())
try:
    import gymnasium  # noqa: F401
    sys.exit("gymnasium was not blocked")
except ImportError:
    pass
import numpy as np
import agrl
from agrl import envs

out = {"bases": [c.__module__ + "." + c.__name__ for c in agrl.Env.__mro__],
       "box": agrl.Box is envs.FallbackBox, "discrete": agrl.Discrete is envs.FallbackDiscrete, "envs": {}}
for env_id in json.loads(sys.argv[1]):
    env = agrl.make(env_id)
    o, a = env.observation_space, env.action_space
    rec = {"obs": [o.low.tolist(), o.high.tolist(), list(o.shape), str(o.dtype), str(o.low.dtype)],
           "spec": [env.spec.id, env.spec.max_episode_steps, env.spec.reward_threshold],
           "render": [env.metadata["render_modes"], env.render_mode, env.render()]}
    if isinstance(a, envs.FallbackDiscrete):
        rec["act"] = ["discrete", int(a.n), int(a.start), str(a.dtype)]
    else:
        rec["act"] = ["box", a.low.tolist(), a.high.tolist(), list(a.shape), str(a.dtype)]
    o.seed(3)
    a.seed(3)
    rec["obs_samples"] = [o.sample().tolist() for _ in range(3)]
    rec["act_samples"] = [np.asarray(a.sample()).tolist() for _ in range(5)]
    obs, info = env.reset(seed=5)
    rec["np_random"] = env.np_random.integers(1 << 30, size=4).tolist()
    rec["np_random_seed"] = env.np_random_seed
    first, inside, steps, end = obs.tolist(), True, 0, None
    while end is None:
        inside &= obs.dtype == np.float32 and obs.shape == o.shape and obs in o
        obs, r, term, trunc, info = env.step(a.sample())
        steps += 1
        if term or trunc:
            inside &= obs in o
            end = [bool(term), bool(trunc)]
    rec["episode"] = [first, bool(inside), steps, end, info]
    out["envs"][env_id] = rec
print(json.dumps(out))
"""


def test_without_gymnasium_the_fallback_has_gymnasium_bounds_and_works():
    r = subprocess.run([sys.executable, "-c", BLOCKED_CHILD, json.dumps(IDS)], env=subprocess_env(),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    assert not any(b.startswith("gymnasium") for b in out["bases"]) and out["box"] and out["discrete"]
    for env_id in IDS:
        rec, ref = out["envs"][env_id], gym.make(env_id)
        o = ref.observation_space
        assert rec["obs"] == [o.low.tolist(), o.high.tolist(), list(o.shape), "float32", "float32"]
        spec = gym.spec(env_id)
        assert rec["spec"] == [spec.id, spec.max_episode_steps, spec.reward_threshold]
        assert rec["render"] == [[], None, None]
        a = ref.action_space
        if isinstance(a, gym.spaces.Discrete):
            assert rec["act"] == ["discrete", int(a.n), int(a.start), "int64"]
        else:
            assert rec["act"] == ["box", a.low.tolist(), a.high.tolist(), list(a.shape), "float32"]
        o.seed(3)
        a.seed(3)  # the fallback spaces draw what Gymnasium's draw
        assert rec["obs_samples"] == [o.sample().tolist() for _ in range(3)]
        assert rec["act_samples"] == [np.asarray(a.sample()).tolist() for _ in range(5)]
        # reset(seed=5) seeds np_random as Gymnasium's Env.reset does
        assert rec["np_random"] == np_random(5)[0].integers(1 << 30, size=4).tolist()
        assert rec["np_random_seed"] == 5
        first, inside, steps, end, info = rec["episode"]
        assert first == agrl.make(env_id).reset(seed=5)[0].tolist()
        assert inside and 1 <= steps <= spec.max_episode_steps and any(end) and info == {}
