"""agrl.SAC and agrl.TD3: the configuration as the C library holds it and
its refusals; actions inside the bounds, the deterministic action equal to
a NumPy forward pass of the saved actor (its file parsed by its documented
format), SAC's exploration distributed as its squashed Gaussian and TD3's as
its noise; storing (bad actions refused, nothing stored), training (refused
before a batch is stored, losses, the delayed actor, alpha) and learning a
known best action; save_policy / load_policy; evaluate() equal to the C
evaluation and to `agrl eval`; learn() on agrl's pendulum reaching exactly
the episodes, losses and evaluations of `agrl train --algo sac|td3` with the
same seed and options, and on Gymnasium's Pendulum-v1 (vector environments
and MuJoCo: test_ac_vector.py). On the CPU, and on
the GPU when there is one (with AGRL_REQUIRE_GPU=1 its absence fails)."""

import csv
import json
import math
import os
import subprocess

import numpy as np
import pytest

import agrl
from refs import cli_or_skip, find_cli, read_container

REQUIRE = os.environ.get("AGRL_REQUIRE_GPU") == "1"
REQUIRE_VULKAN = os.environ.get("AGRL_REQUIRE_VULKAN") == "1"
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    agrl.cuda_device_count() == 0 and not REQUIRE, reason="no CUDA device")),
    pytest.param("vulkan", marks=pytest.mark.skipif(
        agrl.vulkan_device_count() == 0 and not REQUIRE_VULKAN, reason="no Vulkan device"))]
ALGOS = [agrl.SAC, agrl.TD3]
SMALL = dict(hidden=[32, 32], batch_size=32, buffer_size=2000, seed=5)
LOW, HIGH = np.array([-2.0, 0.0, 5.0], np.float32), np.array([2.0, 1.0, 7.0], np.float32)


# ---- references ----

def load_mlp(path):
    """agrl's model file (the container of docs/container.md, kind "mlp",
    refs.read_container: CRCs checked) as the activations and the
    (W [out, in], b [out]) of each layer, in float64."""
    keys, secs = read_container(path)
    assert keys["kind"] == "mlp" and keys["mlp.version"] == 3
    sizes = keys["mlp.sizes"]
    assert len(secs) == 2 * (len(sizes) - 1)
    layers = []
    for i in range(len(sizes) - 1):
        fan_in, fan_out = sizes[i], sizes[i + 1]
        (wd, w), (bd, b) = secs[f"W{i}"], secs[f"b{i}"]
        assert wd == (fan_out, fan_in) and bd == (fan_out, 1)
        w, b = w.astype(np.float64), b.astype(np.float64)
        layers.append((w.reshape(fan_in, fan_out).T, b))  # column-major [out, in]
    return keys["mlp.hidden"], keys["mlp.last"], layers


def forward(layers, x):
    """ReLU hidden layers and a linear last one, in float64: (n, in) -> (n, out)."""
    h = np.asarray(x, np.float64).T
    for i, (w, b) in enumerate(layers):
        h = w @ h + b[:, None]
        if i < len(layers) - 1:
            h = np.maximum(h, 0.0)
    return h.T


def actor_of(agent, tmp_path):
    path = tmp_path / "actor.agrl"
    agent.save_policy(path)
    hidden_act, last_act, layers = load_mlp(path)
    assert (hidden_act, last_act) == (1, 0)  # ReLU, then none
    out = 2 * agent.act_dim if agent.algo == "sac" else agent.act_dim
    assert layers[0][0].shape[1] == agent.obs_dim and layers[-1][0].shape[0] == out
    return layers


def to_bounds(agent, y):
    lo, hi = agent.low.astype(np.float64), agent.high.astype(np.float64)
    return np.clip(lo + (y + 1.0) * 0.5 * (hi - lo), lo, hi)


def to_unit(agent, a):
    lo, hi = agent.low.astype(np.float64), agent.high.astype(np.float64)
    return 2.0 * (np.asarray(a, np.float64) - lo) / (hi - lo) - 1.0


def fill(agent, rng, n):
    agent.store(rng.standard_normal((n, agent.obs_dim)), rng.uniform(agent.low, agent.high, (n, agent.act_dim)),
                rng.standard_normal(n), rng.standard_normal((n, agent.obs_dim)),
                (rng.random(n) < 0.1).astype(np.int32))


# ---- configuration ----

def test_defaults_are_the_c_library_defaults():
    for cls, delay in ((agrl.SAC, 1), (agrl.TD3, 2)):
        d = cls.defaults()
        assert d == agrl._agrl.ac_defaults(cls.__name__.lower())
        assert d["hidden"] == (256, 256) and d["batch_size"] == 256 and d["buffer_size"] == 1000000
        assert d["learning_starts"] == 1000 and d["train_freq"] == 1 and d["gradient_steps"] == 1
        assert d["policy_delay"] == delay and d["autotune"] is True and d["alpha"] == 1.0
        assert d["target_entropy"] is None and d["n_step"] == 1 and d["n_envs"] == 1 and d["seed"] == 0
        for k, v in dict(actor_lr=1e-3, critic_lr=1e-3, gamma=0.99, tau=0.005, expl_noise=0.1, target_noise=0.2,
                         noise_clip=0.5, noise_rho=0).items():
            assert d[k] == np.float32(v), k
        a = cls("cpu", 3, 1, -2, 2, buffer_size=1000)
        assert a.config == {**d, "buffer_size": 1000} and a.algo == cls.__name__.lower()
        assert (a.obs_dim, a.act_dim) == (3, 1) and a.low.tolist() == [-2.0] and a.high.tolist() == [2.0]


@pytest.mark.parametrize("cls", ALGOS)
def test_config_round_trip(cls):
    cfg = dict(hidden=[48, 24, 12], actor_lr=3e-4, critic_lr=2e-3, gamma=0.95, tau=0.02, batch_size=64,
               buffer_size=5000, learning_starts=123, train_freq=4, gradient_steps=3, policy_delay=3, alpha=0.3,
               autotune=False, target_entropy=-0.25, expl_noise=0.15, target_noise=0.3, noise_clip=0.4, noise_rho=0.75,
               n_step=3, n_envs=2, seed=2**64 - 1, fused=False)
    a = cls("cpu", 5, 2, [-1, -3], [1, 3], 777, **cfg)
    want = {k: (tuple(v) if k == "hidden" else v if isinstance(v, (bool, int)) else float(np.float32(v)))
            for k, v in cfg.items()}
    assert a.config == want == a._config()
    assert set(a.config) == set(cls.defaults())
    b = cls("cpu", 5, 2, [-1, -3], [1, 3], **a.config)  # what the library holds is accepted back
    assert b.config == a.config
    assert cls("cpu", 5, 2, -1, 1, target_entropy=None, buffer_size=500).config["target_entropy"] is None
    assert a.low.dtype == np.float32 and a.low.tolist() == [-1, -3] and a.high.tolist() == [1, 3]
    assert a.fused is False  # asked for the composed ops
    # the fused call where the backend has it: the CPU too (kernels.h's AG__K_ACGRAD)
    assert cls("cpu", 5, 2, -1, 1, buffer_size=500).fused is True


BAD = [
    (dict(algo="td3"), agrl.InvalidArgError, r"unknown option 'algo'"),
    (dict(lr=1e-3), agrl.InvalidArgError, r"unknown option 'lr'"),
    (dict(hidden=[]), agrl.InvalidArgError, r"n_hidden = 0"),
    (dict(hidden=[0]), agrl.InvalidArgError, r"hidden\[0\] = 0"),
    (dict(hidden=[8] * 9), agrl.InvalidArgError, r"at most 8"),
    (dict(hidden=8), TypeError, r"sequence"),
    (dict(actor_lr=0), agrl.InvalidArgError, r"actor_lr = 0"),
    (dict(critic_lr=11), agrl.InvalidArgError, r"critic_lr = 11"),
    (dict(actor_lr=float("nan")), agrl.InvalidArgError, r"actor_lr = nan"),
    (dict(gamma=1.5), agrl.InvalidArgError, r"gamma = 1.5"),
    (dict(tau=0), agrl.InvalidArgError, r"tau = 0"),
    (dict(batch_size=0), agrl.InvalidArgError, r"batch_size = 0"),
    (dict(batch_size=64, buffer_size=32), agrl.InvalidArgError, r"buffer_size = 32"),
    (dict(batch_size=1.5), TypeError, r"batch_size must be an int"),
    (dict(learning_starts=-1), agrl.InvalidArgError, r"learning_starts = -1"),
    (dict(train_freq=0), agrl.InvalidArgError, r"train_freq = 0"),
    (dict(gradient_steps=-1), agrl.InvalidArgError, r"gradient_steps = -1"),
    (dict(policy_delay=0), agrl.InvalidArgError, r"policy_delay = 0"),
    (dict(policy_delay=1001), agrl.InvalidArgError, r"policy_delay = 1001"),
    (dict(policy_delay=2**40), agrl.InvalidArgError, r"policy_delay"),
    (dict(alpha=0), agrl.InvalidArgError, r"alpha = 0"),
    (dict(alpha=1e7), agrl.InvalidArgError, r"alpha = 1e\+07"),
    (dict(target_entropy=float("inf")), agrl.InvalidArgError, r"target_entropy = inf must be finite"),
    (dict(target_entropy="x"), TypeError, r"target_entropy must be a number"),
    (dict(expl_noise=-0.1), agrl.InvalidArgError, r"expl_noise = -0.1"),
    (dict(target_noise=11), agrl.InvalidArgError, r"target_noise = 11"),
    (dict(noise_clip=float("nan")), agrl.InvalidArgError, r"noise_clip = nan"),
    (dict(noise_rho=1.0), agrl.InvalidArgError, r"noise_rho = 1 must be in \[0, 1\)"),
    (dict(noise_rho=-0.5), agrl.InvalidArgError, r"noise_rho = -0.5"),
    (dict(n_step=0), agrl.InvalidArgError, r"n_step = 0"),
    (dict(n_step=65), agrl.InvalidArgError, r"n_step = 65"),
    (dict(n_envs=0), agrl.InvalidArgError, r"n_envs = 0"),
    (dict(seed=-1), agrl.InvalidArgError, r"seed = -1 is outside 0 \.\. 2\^64-1"),
]


@pytest.mark.parametrize("cls", ALGOS)
@pytest.mark.parametrize("cfg,exc,match", BAD, ids=[next(iter(c)) + "-" + str(i) for i, (c, _, _) in enumerate(BAD)])
def test_bad_config_is_refused(cls, cfg, exc, match):
    with pytest.raises(exc, match=match):
        cls("cpu", 3, 1, -1, 1, **{"buffer_size": 500, **cfg})


@pytest.mark.parametrize("cls", ALGOS)
def test_bad_sizes_and_bounds_are_refused(cls):
    E = agrl.InvalidArgError
    for args, exc, match in [
        ((0, 1, -1, 1), E, r"obs_dim = 0"),
        ((3, 0, -1, 1), E, r"act_dim = 0"),
        ((3, 65, -1, 1), E, r"act_dim = 65"),
        ((3, 2, [1, -1], [2, -1]), E, r"action 1's bounds \[-1, -1\]"),
        ((3, 1, -np.inf, 1), E, r"must be finite"),
        ((3, 1, -1, np.nan), E, r"must be finite"),
        ((3, 2, [-1, -1, -1], [1, 1]), agrl.ShapeError, r"low: 3 values for 2 actions"),
        ((3, 2, [-1, -1], [[1, 1]]), agrl.ShapeError, r"high: 2 values for 2 actions"),
    ]:
        with pytest.raises(exc, match=match):
            cls("cpu", *args, buffer_size=500)
    with pytest.raises(E, match=r"total_steps = 0"):
        cls("cpu", 3, 1, -1, 1, 0, buffer_size=500)
    with pytest.raises(TypeError, match=r"agrl.Context"):
        agrl._agrl._AC(object(), "sac", 3, 1, [-1], [1])
    with pytest.raises(E, match=r"neither 'sac' nor 'td3'"):
        agrl._agrl._AC(agrl.Context("cpu"), "ddpg", 3, 1, [-1], [1])
    with pytest.raises(E, match=r"neither 'sac' nor 'td3'"):
        agrl._agrl.ac_defaults("dqn")


# ---- acting ----

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("cls", ALGOS)
def test_fused_where_it_pays(cls, device, rng):
    """One fused call an update on CUDA, and on the CPU from 32 hidden units (SMALL's); the composed
    ops when asked, on Vulkan (no fused actor-critic kernel) and, on the CPU, for narrower networks; the
    same losses."""
    a = cls(device, 4, 3, LOW, HIGH, learning_starts=0, **SMALL)
    b = cls(device, 4, 3, LOW, HIGH, learning_starts=0, fused=False, **SMALL)
    assert a.fused is (device != "vulkan") and b.fused is False
    narrow = cls(device, 4, 3, LOW, HIGH, **dict(SMALL, hidden=[31, 16]))
    assert narrow.fused is (device == "cuda")
    for x in (a, b):
        fill(x, np.random.default_rng(3), 300)
    la, lb = np.array(a.train(4)), np.array(b.train(4))
    np.testing.assert_allclose(la, lb, rtol=2e-3, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("cls", ALGOS)
def test_actions_are_inside_the_bounds(cls, device, rng):
    a = cls(device, 4, 3, LOW, HIGH, expl_noise=2.0, **SMALL)  # TD3's noise reaches past the bounds
    obs = (rng.standard_normal((3000, 4)) * 30).astype(np.float32)  # saturating the actor as well
    for explore in (True, False):
        acts = a.act(obs, explore)
        assert acts.dtype == np.float32 and acts.shape == (3000, 3)
        assert (acts >= LOW).all() and (acts <= HIGH).all()
    one = a.act(obs[7])
    assert one.dtype == np.float32 and one.shape == (3,) and (one >= LOW).all() and (one <= HIGH).all()
    det = a.act(obs, explore=False)
    assert np.array_equal(det, a.act(obs.astype(np.float64), False))  # a function of the observation
    np.testing.assert_allclose(a.act(obs[11], False), det[11], rtol=0, atol=1e-6)
    e1, e2 = a.act(obs[:50]), a.act(obs[:50])
    assert not np.array_equal(e1, e2)  # the acting stream moves on
    r = a.act_random(20000)
    assert r.dtype == np.float32 and r.shape == (20000, 3) and (r >= LOW).all() and (r <= HIGH).all()
    u = to_unit(a, r)  # uniform in [-1, 1]: mean 0, variance 1/3
    assert np.abs(u.mean(0)).max() < 0.03 and np.abs(u.var(0) - 1 / 3).max() < 0.02
    assert a.act_random().shape == (3,)
    with pytest.raises(agrl.InvalidArgError, match=r"no observations"):
        a.act(np.zeros((0, 4), np.float32))
    with pytest.raises(agrl.ShapeError, match=r"expected \(n, 4\) or \(4,\)"):
        a.act(np.zeros((2, 5), np.float32))
    with pytest.raises(agrl.InvalidArgError, match=r"n = 0"):
        a.act_random(0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("cls", ALGOS)
def test_deterministic_action_is_the_saved_actors_forward_pass(cls, device, tmp_path, rng):
    a = cls(device, 4, 3, LOW, HIGH, learning_starts=0, **SMALL)
    fill(a, rng, 300)
    a.train(40)  # parameters away from their initial values
    layers = actor_of(a, tmp_path)
    obs = (rng.standard_normal((500, 4)) * 3).astype(np.float32)
    want = to_bounds(a, np.tanh(forward(layers, obs)[:, :3]))
    np.testing.assert_allclose(a.act(obs, explore=False), want, rtol=0, atol=2e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_sac_explores_with_its_squashed_gaussian(device, tmp_path, rng):
    a = agrl.SAC(device, 4, 2, [-1, -3], [1, 1], **SMALL)
    layers = actor_of(a, tmp_path)
    x = rng.standard_normal(4).astype(np.float32)
    out = forward(layers, x[None])[0]
    mu, std = out[:2], np.exp(-5.0 + 3.5 * (np.tanh(out[2:]) + 1.0))
    n = 40000
    u = np.arctanh(np.clip(to_unit(a, a.act(np.tile(x, (n, 1)), True)), -1 + 1e-6, 1 - 1e-6))
    assert np.all(np.abs(u.mean(0) - mu) < 5 * std / math.sqrt(n))
    np.testing.assert_allclose(u.std(0), std, rtol=0.03)
    assert abs(np.corrcoef(u.T)[0, 1]) < 0.03  # independent draws per action


@pytest.mark.parametrize("device", DEVICES)
def test_td3_explores_with_its_noise(device, rng):
    a = agrl.TD3(device, 4, 2, [-1, -3], [1, 1], expl_noise=0.15, **SMALL)
    obs = rng.standard_normal((40000, 4)).astype(np.float32)
    det = to_unit(a, a.act(obs, False))
    noise = to_unit(a, a.act(obs, True)) - det
    inside = np.abs(det).max(1) < 0.4  # the clip to the bounds 4 standard deviations away
    assert inside.sum() > 20000
    noise = noise[inside]
    assert np.abs(noise.mean(0)).max() < 5 * 0.15 / math.sqrt(len(noise))
    np.testing.assert_allclose(noise.std(0), 0.15, rtol=0.03)


# ---- storing and training ----

@pytest.mark.parametrize("cls", ALGOS)
def test_store(cls, rng):
    a = cls("cpu", 4, 3, LOW, HIGH, **SMALL)
    assert a.stored == 0
    a.store(np.zeros(4), [0.0, 0.5, 6.0], 1.0, np.ones(4), 0)  # one transition
    a.store(np.zeros(4), [100.0, -5, 0], 1.0, np.ones(4), 1, 1)  # outside the bounds: clipped, stored
    assert a.stored == 2
    fill(a, rng, 40)
    assert a.stored == 42
    n = 5
    good = (np.zeros((n, 4)), np.zeros((n, 3)) + 0.5, np.zeros(n), np.zeros((n, 4)), np.zeros(n, np.int32))
    for bad_action, match in ((np.nan, r"actions\[4\] = nan is not finite"), (np.inf, r"actions\[4\] = inf")):
        act = good[1].copy()
        act[1, 1] = bad_action
        with pytest.raises(agrl.OutOfRangeError, match=match):
            a.store(good[0], act, *good[2:])
        assert a.stored == 42  # nothing stored
    with pytest.raises(agrl.OutOfRangeError, match=r"not 0 or 1"):
        a.store(*good[:4], np.array([0, 0, 2, 0, 0], np.int32))
    with pytest.raises(agrl.OutOfRangeError, match=r"not 0 or 1"):
        a.store(*good, np.array([0, 0, 0, 0, -1]))
    with pytest.raises(agrl.ShapeError, match=r"action: 10 values for 5 transitions of 3 actions"):
        a.store(good[0], np.zeros((5, 2)), *good[2:])
    with pytest.raises(agrl.ShapeError, match=r"reward: 4 values for 5 transitions"):
        a.store(good[0], good[1], np.zeros(4), *good[3:])
    with pytest.raises(agrl.ShapeError, match=r"obs and next_obs"):
        a.store(good[0], good[1], good[2], np.zeros(4), good[4])
    assert a.stored == 42
    a.store(*good, np.ones(n, np.int32))
    assert a.stored == 47
    one = cls("cpu", 2, 1, -1, 1, **SMALL)  # one action: a batch's actions may be (n,)
    one.store(np.zeros((3, 2)), [0.1, 0.2, 0.3], [0, 0, 0], np.zeros((3, 2)), [0, 0, 1])
    assert one.stored == 3


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("cls", ALGOS)
def test_train(cls, device, rng):
    a = cls(device, 4, 3, LOW, HIGH, **SMALL)
    fill(a, rng, 31)
    with pytest.raises(agrl.StateError, match=r"holds 31 transitions, fewer than its minimum 32"):
        a.train(1)  # fewer than batch_size transitions
    assert a.updates == 0
    fill(a, rng, 1)
    c, al = a.train(1)
    assert math.isfinite(c) and c >= 0 and a.updates == 1
    if cls is agrl.TD3:  # policy_delay 2: the first update is the critics' alone
        assert math.isnan(al) and a.alpha() == 0.0
    else:
        assert math.isfinite(al) and a.alpha() < 1.0  # the temperature took a step (towards -act_dim)
    c, al = a.train(7)
    assert math.isfinite(c) and math.isfinite(al) and a.updates == 8
    assert a.train(0) is None and a.updates == 8
    assert a.train(3, losses=False) is None and a.updates == 11
    with pytest.raises(agrl.InvalidArgError, match=r"n < 0"):
        a.train(-1)


def test_sac_fixed_alpha():
    a = agrl.SAC("cpu", 4, 3, LOW, HIGH, autotune=False, alpha=0.25, **SMALL)
    fill(a, np.random.default_rng(3), 64)
    a.train(10)
    assert a.alpha() == pytest.approx(0.25, rel=1e-6)


@pytest.mark.parametrize("cls,extra", [(agrl.TD3, {}), (agrl.SAC, dict(autotune=False, alpha=0.01))])
def test_training_finds_the_best_action(cls, extra, rng):
    """One-step episodes with reward -4 (a - 0.5)^2: the learnt deterministic
    action is near 0.5 whatever the observation."""
    n = 2000
    obs = rng.standard_normal((n, 2)).astype(np.float32)
    act = rng.uniform(-1, 1, (n, 1)).astype(np.float32)
    a = cls("cpu", 2, 1, -1, 1, hidden=[64, 64], batch_size=128, buffer_size=n, actor_lr=3e-3, critic_lr=3e-3,
            seed=1, **extra)
    a.store(obs, act, -4 * (act[:, 0] - 0.5) ** 2, obs, np.ones(n, np.int32))
    first, _ = a.train(1)
    last, _ = a.train(1500)
    assert last < first / 10
    det = a.act(obs[:300], False)
    assert abs(det.mean() - 0.5) < 0.15 and det.std() < 0.1


# ---- policies ----

@pytest.mark.parametrize("cls", ALGOS)
def test_save_load_policy(cls, tmp_path, rng):
    src = cls("cpu", 4, 3, LOW, HIGH, **SMALL)
    fill(src, rng, 100)
    src.train(20)
    path = tmp_path / "policy.agrl"
    src.save_policy(str(path))
    obs = rng.standard_normal((300, 4)).astype(np.float32)
    want = src.act(obs, False)
    dst = cls("cpu", 4, 3, LOW, HIGH, **{**SMALL, "seed": 99})
    assert not np.array_equal(dst.act(obs, False), want)  # differently initialised
    dst.load_policy(path)  # a path-like works too
    assert np.array_equal(dst.act(obs, False), want)
    other = (agrl.TD3 if cls is agrl.SAC else agrl.SAC)("cpu", 4, 3, LOW, HIGH, **SMALL)
    with pytest.raises(agrl.ShapeError, match=r"the file holds a 4 -> (3|6) network, the actor is 4 -> (6|3)"):
        other.load_policy(path)
    with pytest.raises(agrl.ShapeError):
        cls("cpu", 4, 3, LOW, HIGH, **{**SMALL, "hidden": [16, 32]}).load_policy(path)
    with pytest.raises(agrl.IoError):
        dst.load_policy(tmp_path / "missing.agrl")
    assert repr(dst) == f"<agrl.{cls.__name__} 4 -> 3, 0 updates on cpu>"


class RawSeeded:
    """agrl's pendulum behind Gymnasium's API, reset(seed=s) starting the
    episode of seed s itself (not of the sequence s): what the C library's
    evaluation plays for derive_seed(seed, k)."""

    def __init__(self):
        self.env = agrl.make("pendulum")
        self.action_space = self.env.action_space

    def reset(self, seed=None):
        return self.env._env.reset(seed), {}

    def step(self, a):
        return self.env.step(a)


@pytest.mark.parametrize("cls", ALGOS)
def test_evaluate(cls, tmp_path, rng):
    a = cls("cpu", 3, 1, -2, 2, **SMALL)
    fill(a, rng, 100)
    a.train(10)
    mean, rets = a.evaluate(agrl.make("pendulum"), 3, 7)  # ag_ac_evaluate
    assert len(rets) == 3 and mean == pytest.approx(sum(rets) / 3) and all(-2000 < r < 0 for r in rets)
    pm, prets = a.evaluate(RawSeeded(), 3, 7)  # the loop in Python, act(explore=False) each step
    assert prets == pytest.approx(rets, rel=1e-9)
    with pytest.raises(agrl.InvalidArgError, match=r"episodes = 0"):
        a.evaluate(agrl.make("pendulum"), 0)
    with pytest.raises(agrl.ShapeError, match=r"action space"):
        a.evaluate(agrl.make("cartpole"), 1)
    cli = find_cli()
    if cli is None:
        return
    path = tmp_path / "policy.agrl"
    a.save_policy(path)
    r = subprocess.run([cli, "eval", "--model", str(path), "--env", "pendulum", "--episodes", "3", "--seed", "7",
                        "--device", "cpu"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[:3] == [f"episode {k}: return {x:.1f}" for k, x in enumerate(rets)]


def test_free():
    a = agrl.SAC("cpu", 3, 1, -2, 2, **SMALL)
    a.free()
    assert repr(a) == "<agrl.SAC (freed)>"
    with pytest.raises(agrl.FreedError, match=r"SAC agent has been freed"):
        a.act(np.zeros(3))
    ctx = agrl.Context("cpu")
    t = agrl.TD3(ctx, 3, 1, -2, 2, **SMALL)
    ctx.free()
    for f in (lambda: t.act(np.zeros(3)), lambda: t.train(1), lambda: t.act_random(), lambda: t.alpha(),
              lambda: t.store(np.zeros(3), [0.0], 0.0, np.zeros(3), 0), lambda: t.updates):
        with pytest.raises(agrl.FreedError):
            f()


# ---- the training loop, against agrl train ----

def _cli_run(tmp_path, algo, steps, seed, flags):
    cli = cli_or_skip()
    out = tmp_path / "run"
    cmd = [cli, "train", "--algo", algo, "--env", "pendulum", "--device", "cpu", "--steps", str(steps),
           "--seed", str(seed), "--out", str(out), "--quiet", "--stop-at", "none"] + flags
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr

    def rows(name):
        with open(out / name, newline="") as f:
            return list(csv.DictReader(f))

    with open(out / "summary.json") as f:
        summary = json.load(f)
    return rows("episodes.csv"), rows("losses.csv"), rows("eval.csv") if (out / "eval.csv").exists() else [], summary


LEARN_CASES = [
    # SAC: the defaults but for the sizes, training from step 400 on
    ("sac", 3, 2000, dict(hidden=[32, 32], batch_size=32, learning_starts=400),
     ["--hidden", "32,32", "--batch", "32", "--learning-starts", "400"]),
    # SAC: every option away from its default, a fixed temperature and 3-step returns
    ("sac", 8, 2600,
     dict(hidden=[24, 16], actor_lr=5e-4, critic_lr=2e-3, gamma=0.95, tau=0.02, batch_size=48, buffer_size=1500,
          learning_starts=300, train_freq=3, gradient_steps=2, alpha=0.2, autotune=False, n_step=3),
     ["--hidden", "24,16", "--actor-lr", "0.0005", "--critic-lr", "0.002", "--gamma", "0.95", "--tau", "0.02",
      "--batch", "48", "--buffer", "1500", "--learning-starts", "300", "--train-freq", "3", "--gradient-steps", "2",
      "--alpha", "0.2", "--no-autotune", "--n-step", "3"]),
    ("sac", 4, 1600, dict(hidden=[32], batch_size=32, learning_starts=200, alpha=0.5, target_entropy=-0.5,
                          policy_delay=2),
     ["--hidden", "32", "--batch", "32", "--learning-starts", "200", "--alpha", "0.5", "--target-entropy", "-0.5",
      "--policy-delay", "2"]),
    # TD3: its own options away from their defaults
    ("td3", 6, 2400,
     dict(hidden=[32, 32], actor_lr=2e-3, critic_lr=2e-3, batch_size=32, learning_starts=500,
          policy_delay=3, expl_noise=0.2, target_noise=0.3, noise_clip=0.4, train_freq=2, gradient_steps=2),
     ["--hidden", "32,32", "--lr", "0.002", "--batch", "32", "--learning-starts", "500", "--policy-delay", "3",
      "--expl-noise", "0.2", "--target-noise", "0.3", "--noise-clip", "0.4", "--train-freq", "2",
      "--gradient-steps", "2"]),
]


@pytest.mark.parametrize("algo,seed,steps,config,flags", LEARN_CASES)
def test_learn_matches_the_cli(tmp_path, algo, seed, steps, config, flags):
    cli_eps, cli_phases, _, summary = _cli_run(tmp_path, algo, steps, seed, flags)
    cls = agrl.SAC if algo == "sac" else agrl.TD3
    a = cls.for_env("cpu", agrl.make("pendulum"), steps, seed=seed, **config)
    events = []
    res = a.learn(agrl.make("pendulum"), callback=lambda ev: events.append(ev) and False)
    assert res["steps"] == steps == summary["steps"]
    assert res["episodes"] == summary["episodes"] == len(cli_eps) >= steps // 200
    assert a.updates == summary["updates"] > 0
    eps = [(e["step"], f"{e['return']:.6g}", e["length"], int(e["truncated"]), f"{e['mean_return']:.6g}",
            e["updates"]) for e in events if e["kind"] == "episode"]
    assert eps == [(int(r["step"]), r["return"], int(r["length"]), int(r["truncated"]), r["mean20"], int(r["updates"]))
                   for r in cli_eps]
    assert [f"{x:.6g}" for x in res["returns"]] == [r["return"] for r in cli_eps]
    phases = [(e["step"], e["updates"], f"{e['loss']:.6g}", f"{e['mean_return']:.6g}", f"{e['actor_loss']:.6g}",
               f"{e['alpha']:.6g}") for e in events if e["kind"] == "phase"]
    assert len(phases) >= 1 and phases == [(int(r["step"]), int(r["updates"]), r["loss"], r["mean20"],
                                            r["actor_loss"], r["alpha"]) for r in cli_phases]


def test_learn_evaluations_match_the_cli(tmp_path):
    flags = ["--hidden", "32,32", "--batch", "32", "--learning-starts", "300", "--eval-every", "500",
             "--eval-episodes", "2"]
    _, _, cli_evals, _ = _cli_run(tmp_path, "td3", 1500, 2, flags)
    a = agrl.TD3("cpu", 3, 1, -2, 2, 1500, seed=2, hidden=[32, 32], batch_size=32, learning_starts=300)
    res = a.learn(agrl.make("pendulum"), eval_env=agrl.make("Pendulum-v1"), eval_every=500, eval_episodes=2)
    want = [(int(r["step"]), r["mean"]) for r in cli_evals]
    assert len(want) == 3 and [(s, f"{m:.6g}") for s, m in res["evals"]] == want
    mean, _ = a.evaluate(agrl.make("pendulum"), 2, agrl.derive_seed(2, 0xE7A15EED))
    assert f"{mean:.6g}" == want[-1][1]  # the last evaluation's policy is the final one
    with pytest.raises(agrl.InvalidArgError, match=r"eval_env"):
        a.learn(agrl.make("pendulum"), 10, eval_every=5)


def test_learn_stops_and_checks_the_environment():
    a = agrl.SAC("cpu", 3, 1, -2, 2, hidden=[8], batch_size=8, learning_starts=50, buffer_size=500)
    res = a.learn(agrl.make("pendulum"), 5000, callback=lambda ev: ev["kind"] == "episode" and ev["episodes"] == 2)
    assert res["episodes"] == 2 and res["steps"] == 400 == sum(res["lengths"])
    with pytest.raises(agrl.ShapeError, match=r"action space"):
        a.learn(agrl.make("cartpole"), 10)  # discrete actions
    with pytest.raises(agrl.InvalidArgError, match=r"bounds"):
        agrl.SAC("cpu", 3, 1, -1, 1, buffer_size=500).learn(agrl.make("pendulum"), 10)
    with pytest.raises(agrl.ShapeError, match=r"observations are \(3,\), the agent's \(4,\)"):
        agrl.SAC("cpu", 4, 1, -2, 2, buffer_size=500).learn(agrl.make("pendulum"), 10)
    with pytest.raises(agrl.InvalidArgError, match=r"n_envs = 2, the environment 1 copy"):
        agrl.TD3("cpu", 3, 1, -2, 2, buffer_size=500, n_step=3, n_envs=2).learn(agrl.make("pendulum"), 10)
    with pytest.raises(agrl.InvalidArgError, match=r"total_steps = 0"):
        a.learn(agrl.make("pendulum"), 0)


class Counted:
    """An environment that counts the calls made to it; with num_envs, one
    that says it is a vector of that many copies."""

    def __init__(self, env, num_envs=None):
        self.env, self.calls = env, 0
        self.observation_space, self.action_space = env.observation_space, env.action_space
        if num_envs is not None:
            self.num_envs = num_envs

    def reset(self, **kw):
        self.calls += 1
        return self.env.reset(**kw)

    def step(self, action):
        self.calls += 1
        return self.env.step(action)


@pytest.mark.parametrize("cls", ALGOS)
@pytest.mark.parametrize("n_step,n_envs,num_envs,match", [
    # n-step returns over one environment's transitions, walked n_envs columns apart
    (3, 8, None, r"n_envs = 8, the environment 1 copy"),
    (2, 2, None, r"n_envs = 2, the environment 1 copy"),
    # a vector environment of other than n_envs copies, or one without the spaces of one copy
    (3, 4, 4, r"a vector environment of 4 copies \(num_envs\) without single_observation_space"),
    (1, 1, 2, r"a vector of 2 copies \(num_envs\) and the agent has n_envs = 1: make the agent with n_envs"),
])
def test_learn_refuses_copies_it_does_not_play(cls, n_step, n_envs, num_envs, match):
    a = cls("cpu", 3, 1, -2, 2, hidden=[8], batch_size=8, learning_starts=0, buffer_size=500, n_step=n_step,
            n_envs=n_envs)
    env = Counted(agrl.make("pendulum"), num_envs)
    with pytest.raises(agrl.InvalidArgError, match=r"^learn: .*" + match):
        a.learn(env, 50)
    assert env.calls == 0 and a.stored == 0 and a.updates == 0  # refused before anything moved


@pytest.mark.parametrize("cls", ALGOS)
def test_for_env_takes_the_sizes_and_bounds_of_the_spaces(cls):
    a = cls.for_env("cpu", agrl.make("pendulum"), 700, hidden=[8], buffer_size=500, seed=4)
    assert (a.obs_dim, a.act_dim, a.total_steps) == (3, 1, 700) and a.low.tolist() == [-2] and a.high.tolist() == [2]
    assert a.config == cls("cpu", 3, 1, -2, 2, 700, hidden=[8], buffer_size=500, seed=4).config
    with pytest.raises(agrl.InvalidArgError, match=rf"^{cls.__name__}.for_env: env.action_space Discrete\(2\) is "
                                                   r"not a 1-D Box"):
        cls.for_env("cpu", agrl.make("cartpole"))
    gym = pytest.importorskip("gymnasium")
    vec = gym.vector.SyncVectorEnv([lambda: gym.make("MountainCarContinuous-v0") for _ in range(2)])
    a = cls.for_env("cpu", vec, hidden=[8], buffer_size=500)
    assert (a.obs_dim, a.act_dim, a.config["n_envs"]) == (2, 1, 2)
    assert a.low.tolist() == [-1] and a.high.tolist() == [1]
    with pytest.raises(agrl.InvalidArgError, match=r"n_envs = 1, but the vector environment has 2 copies"):
        cls.for_env("cpu", vec, buffer_size=500, n_envs=1)
    # one step of every copy, stored side by side
    obs, _ = vec.reset(seed=3)
    act = a.act(obs, explore=True)
    nxt, rew, term, trunc, _ = vec.step(act)
    a.store(obs, act, rew, nxt, term.astype(np.int32), trunc.astype(np.int32))
    assert a.stored == 2
    vec.close()
    cart = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(2)])
    with pytest.raises(agrl.InvalidArgError, match=r"env.single_action_space Discrete\(2\) is not a 1-D Box"):
        cls.for_env("cpu", cart)
    cart.close()


@pytest.mark.parametrize("device", DEVICES)
def test_learn_on_gymnasium_pendulum(device):
    gym = pytest.importorskip("gymnasium")
    runs = []
    for _ in range(2):
        env = gym.make("Pendulum-v1")
        a = agrl.TD3.for_env(device, env, 800, hidden=[32, 32], batch_size=32, learning_starts=300, seed=9)
        assert (a.obs_dim, a.act_dim) == (3, 1) and a.low.tolist() == [-2.0] and a.high.tolist() == [2.0]
        res = a.learn(env)
        assert res["steps"] == 800 and res["lengths"] == [200] * 4 and a.updates == 500
        assert all(math.isfinite(r) and -2000 < r < 0 for r in res["returns"])
        mean, rets = a.evaluate(env, 2, 3)
        assert len(rets) == 2 and math.isfinite(mean)
        runs.append(res["returns"] + rets)
    if device == "cpu":
        assert runs[0] == runs[1]  # the seeds fix the run
