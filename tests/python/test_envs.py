"""The built-in environments against references written from their
documentation: agrl.derive_seed against splitmix64 in Python, agrl.make's
CartPole-v1 against the pure-Python PyCartPole (same start states, the same
trajectories bit for bit, for several seeds and random actions, over
episode sequences), PyCartPole against Gymnasium's CartPole-v1 from the
same state, and the spaces and specs of the four environments."""

import numpy as np
import pytest

import agrl
from pycartpole import PyCartPole, SplitMix64, derive_seed, mix64, start_state


def test_derive_seed_matches_splitmix64():
    # splitmix64's first output from 0 (its published test vector)
    assert mix64(0x9E3779B97F4A7C15) == 0xE220A8397B1DCDAF
    for seed in (0, 1, 12345, 2**63, 2**64 - 1):
        for index in (0, 1, 2, 1000, 2**64 - 1):
            assert agrl.derive_seed(seed, index) == derive_seed(seed, index)
    assert len({agrl.derive_seed(7, k) for k in range(1000)}) == 1000


def test_uniform_draws():
    r = SplitMix64(5)
    xs = [r.uniform(-0.05, 0.05) for _ in range(10000)]
    assert all(-0.05 <= x < 0.05 for x in xs)
    assert abs(np.mean(xs)) < 0.002


@pytest.mark.parametrize("seed", [0, 1, 7, 123456789, 2**64 - 1])
def test_start_states(seed):
    env = agrl.make("CartPole-v1")
    obs, info = env.reset(seed=seed)
    assert info == {} and obs.dtype == np.float32 and obs.shape == (4,)
    assert np.array_equal(obs, np.array(start_state(derive_seed(seed, 0)), np.float32))
    for k in range(1, 4):  # reset() goes on to episode k of the sequence
        obs, _ = env.reset()
        assert np.array_equal(obs, np.array(start_state(derive_seed(seed, k)), np.float32))
    obs, _ = env.reset(seed=seed)  # a seed starts the sequence again
    assert np.array_equal(obs, np.array(start_state(derive_seed(seed, 0)), np.float32))
    obs, _ = env.reset(seed=np.uint64(seed))  # numpy's ints too
    assert np.array_equal(obs, np.array(start_state(derive_seed(seed, 0)), np.float32))


@pytest.mark.parametrize("seed", [0, 3, 99, 2024])
def test_cartpole_trajectories_match_python(seed):
    rng = np.random.default_rng(seed)
    env, ref = agrl.make("CartPole-v1"), PyCartPole()
    o1, _ = env.reset(seed=seed)
    o2, _ = ref.reset(seed=seed)
    steps = truncations = 0
    for episode in range(6):
        if episode:
            o1, _ = env.reset()
            o2, _ = ref.reset()
        assert np.array_equal(o1, o2)
        # mostly-balancing actions make some episodes long enough to truncate
        push = episode % 2 == 1
        while True:
            a = int(o2[2] + 0.5 * o2[3] > 0) if push and rng.random() < 0.9 else int(rng.integers(2))
            o1, r1, t1, tr1, i1 = env.step(a)
            o2, r2, t2, tr2, _ = ref.step(a)
            steps += 1
            assert np.array_equal(o1, o2), (episode, steps)
            assert (r1, t1, tr1) == (r2, t2, tr2) and i1 == {}
            assert type(t1) is bool and type(tr1) is bool
            if t1 or tr1:
                truncations += tr1
                break
    assert steps > 200
    if seed == 0:
        assert truncations >= 1  # the 500-step limit was met and agrees


def test_numpy_and_float_actions_are_accepted():
    env, ref = agrl.make("cartpole"), PyCartPole()
    env.reset(seed=11)
    ref.reset(seed=11)
    for a in (np.int64(1), np.array(0), 1.0, np.float32(0), np.array([1], np.int32), True):
        o1 = env.step(a)[0]
        o2 = ref.step(int(np.asarray(a).reshape(())))[0]
        assert np.array_equal(o1, o2)


def test_step_after_the_end_is_refused():
    env = agrl.make("CartPole-v1")
    env.reset(seed=0)
    while True:
        obs, _, term, trunc, _ = env.step(1)
        if term or trunc:
            break
    with pytest.raises(agrl.StateError):
        env.step(0)
    with pytest.raises(agrl.StateError, match="reset"):
        agrl.make("CartPole-v1").step(0)


def test_cartpole_python_matches_gymnasium():
    gym = pytest.importorskip("gymnasium")
    genv = gym.make("CartPole-v1").unwrapped
    rng = np.random.default_rng(1)
    compared = 0
    for seed in range(25):
        ref = PyCartPole()
        ref.reset(seed=seed)
        genv.reset(seed=seed)
        genv.state = np.array(ref.state, dtype=np.float64)  # Gymnasium from the same start state
        while True:
            a = int(rng.integers(2))
            og, rg, tg, _, _ = genv.step(a)
            op, rp, tp, _, _ = ref.step(a)
            compared += 1
            assert np.array_equal(og, op) and list(genv.state) == ref.state
            assert (float(rg), tg) == (rp, tp)
            if tg:
                break
    assert compared > 300


def test_agrl_matches_gymnasium_from_agrl_start_states():
    gym = pytest.importorskip("gymnasium")
    genv = gym.make("CartPole-v1").unwrapped
    env = agrl.make("CartPole-v1")
    for seed in (4, 5, 6):
        obs, _ = env.reset(seed=seed)
        genv.reset(seed=0)
        genv.state = np.array(start_state(derive_seed(seed, 0)), dtype=np.float64)
        for a in [0, 1] * 100:
            o1, r1, t1, _, _ = env.step(a)
            og, rg, tg, _, _ = genv.step(a)
            assert np.array_equal(o1, og) and (r1, t1) == (float(rg), tg)
            if t1:
                break


@pytest.mark.parametrize("name,obs_dim,n,steps", [
    ("CartPole-v1", 4, 2, 500), ("cartpole", 4, 2, 500), ("Acrobot-v1", 6, 3, 500), ("acrobot", 6, 3, 500),
    ("MountainCar-v0", 2, 3, 200), ("mountaincar", 2, 3, 200),
])
def test_discrete_specs(name, obs_dim, n, steps):
    env = agrl.make(name)
    assert env.observation_space.shape == (obs_dim,) and env.observation_space.dtype == np.float32
    assert isinstance(env.action_space, agrl.Discrete) and env.action_space.n == n
    assert env.spec.max_episode_steps == steps and env.unwrapped is env
    obs, _ = env.reset(seed=0)
    assert obs.shape == (obs_dim,)
    ret, length, done = 0.0, 0, False
    while not done:  # every episode ends by the time limit at the latest
        obs, r, term, trunc, _ = env.step(env.action_space.sample())
        ret, length, done = ret + r, length + 1, term or trunc
    assert 1 <= length <= steps and (trunc or term)
    assert env.action_space.contains(n - 1) and not env.action_space.contains(n)


def test_pendulum_spec_and_clipping():
    env = agrl.make("Pendulum-v1")
    assert isinstance(env.action_space, agrl.Box) and env.action_space.shape == (1,)
    assert env.action_space.low[0] == -2 and env.action_space.high[0] == 2
    a, b = agrl.make("pendulum"), agrl.make("pendulum")
    a.reset(seed=3)
    b.reset(seed=3)
    # torques are clipped to [-2, 2]: 5 acts as 2
    assert np.array_equal(a.step([5.0])[0], b.step(np.array([2.0], np.float32))[0])
    assert np.array_equal(a.step(-7.0)[0], b.step([-2.0])[0])


def test_sequences_of_different_seeds_differ():
    env = agrl.make("cartpole")
    firsts = {tuple(env.reset(seed=s)[0].tolist()) for s in range(50)}
    assert len(firsts) == 50
