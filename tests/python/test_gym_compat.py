"""agrl's environments and spaces against Gymnasium itself: each
environment's spaces have the bounds, shapes and dtypes of Gymnasium's own
environment of the same id, its observations lie within them, and the
spaces agrl uses have the draws and membership of gymnasium.spaces."""

import inspect
import warnings

import numpy as np
import pytest

import agrl

gym = pytest.importorskip("gymnasium")

IDS = ["CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1", "MountainCarContinuous-v0"]
SHORT = {"CartPole-v1": "cartpole", "Acrobot-v1": "acrobot", "MountainCar-v0": "mountaincar",
         "Pendulum-v1": "pendulum", "MountainCarContinuous-v0": "mountaincar_continuous"}


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


# ---- observation spaces ----

@pytest.mark.parametrize("env_id", IDS)
def test_spaces_equal_gymnasium_spaces(env_id):
    ref = gym.make(env_id)
    for name in (env_id, SHORT[env_id]):
        env = agrl.make(name)
        for mine, theirs in ((env.observation_space, ref.observation_space), (env.action_space, ref.action_space)):
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




# ---- spaces ----

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
