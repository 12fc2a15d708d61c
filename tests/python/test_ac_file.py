"""agrl.SAC / agrl.TD3 save() and load(), and a resumed learn(): the
reference is the agent that was saved (or the run that was not
interrupted). A loaded agent has the saved configuration, sizes, bounds,
counters and networks (the saved policy files compare byte for byte) and
acts, stores and trains exactly as the saved one goes on to (the same
exploring, deterministic and random actions, the same losses); learn()
stopped at a checkpoint and resumed on a new environment reports the
uninterrupted run's events from there on and ends with its networks.
Damaged files, a file of the other algorithm and a DQN's file raise agrl's
exception classes naming the path. On the CPU, and on the GPU when there
is one (with AGRL_REQUIRE_GPU=1 its absence fails)."""

import os

import numpy as np
import pytest

import agrl
from agent_files import check_loads_on_the_cpu

REQUIRE = os.environ.get("AGRL_REQUIRE_GPU") == "1"
REQUIRE_VULKAN = os.environ.get("AGRL_REQUIRE_VULKAN") == "1"
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    agrl.cuda_device_count() == 0 and not REQUIRE, reason="no CUDA device")),
    pytest.param("vulkan", marks=pytest.mark.skipif(
        agrl.vulkan_device_count() == 0 and not REQUIRE_VULKAN, reason="no Vulkan device"))]
ALGOS = [agrl.SAC, agrl.TD3]
CFG = dict(hidden=[32, 16], batch_size=32, buffer_size=500, learning_starts=200, seed=7, noise_rho=0.5)
LOW, HIGH = np.array([-2.0], np.float32), np.array([2.0], np.float32)


def fill(agent, rng, n):
    agent.store(rng.standard_normal((n, 3)).astype(np.float32),
                rng.uniform(-2, 2, (n, 1)).astype(np.float32), rng.standard_normal(n).astype(np.float32),
                rng.standard_normal((n, 3)).astype(np.float32), (rng.random(n) < 0.1).astype(np.int32),
                (rng.random(n) < 0.05).astype(np.int32))


def same_policy(a, b, tmp_path):
    a.save_policy(tmp_path / "pa.agrl")
    b.save_policy(tmp_path / "pb.agrl")
    return (tmp_path / "pa.agrl").read_bytes() == (tmp_path / "pb.agrl").read_bytes()


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("device", DEVICES)
def test_loaded_agent_goes_on_as_the_saved_one(tmp_path, device, algo):
    a = algo(device, 3, 1, LOW, HIGH, 4000, **CFG)
    rng = np.random.default_rng(1)
    fill(a, rng, 400)
    fill(a, rng, 300)  # the ring wrapped
    a.train(9)  # TD3: the next update is a critic-only one
    obs = rng.standard_normal((4, 3)).astype(np.float32)
    a.act(obs, True)  # the acting stream moved, the correlated noise of 4 copies kept
    a.act_random(3)  # and the host stream
    path = tmp_path / "agent.agrl"
    a.save(path)
    b = algo.load(device, path)
    assert type(b) is algo and b.algo == a.algo
    assert b.config == a.config and b.total_steps == 4000 and b.updates == a.updates == 9
    assert b.stored == a.stored == 500 and (b.obs_dim, b.act_dim) == (3, 1)
    assert np.array_equal(b.low, LOW) and np.array_equal(b.high, HIGH)
    assert same_policy(a, b, tmp_path) and a.alpha() == b.alpha()
    for r in range(3):
        o = rng.standard_normal((4, 3)).astype(np.float32)
        assert np.array_equal(a.act(o, True), b.act(o, True))
        assert np.array_equal(a.act(o, False), b.act(o, False))
        assert np.array_equal(a.act_random(4), b.act_random(4))
        fill(a, np.random.default_rng(10 + r), 40)
        fill(b, np.random.default_rng(10 + r), 40)
        la, lb = a.train(1), b.train(1)
        assert np.array_equal(la, lb, equal_nan=True)  # bit for bit, TD3's actor loss the saved one's
        la, lb = a.train(6), b.train(6)
        assert la == lb and not np.isnan(la[1])
    assert same_policy(a, b, tmp_path) and a.alpha() == b.alpha()


def test_saved_on_one_device_loads_on_the_cpu(tmp_path):
    check_loads_on_the_cpu(tmp_path, lambda dev: agrl.TD3(dev, 3, 1, LOW, HIGH, 4000, **CFG), fill, 3, same_policy)


class Events:
    def __init__(self):
        self.ev = []

    def __call__(self, ev):
        self.ev.append(tuple(sorted((k, repr(v)) for k, v in ev.items())))  # NaN losses compare as text


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("device", DEVICES)
def test_resumed_learn_equals_the_uninterrupted_run(tmp_path, device, algo):
    kw = dict(CFG, train_freq=2)
    ref = Events()
    a = algo(device, 3, 1, LOW, HIGH, 2600, **kw)
    a.learn(agrl.make("Pendulum-v1"), 2600, ref, eval_env=agrl.make("Pendulum-v1"), eval_every=1000,
            eval_episodes=1)
    assert len(ref.ev) > 14
    # stopped at 1700 with checkpoints every 500, then resumed from its file
    part = Events()
    path = tmp_path / "run.agrl"
    b = algo(device, 3, 1, LOW, HIGH, 2600, **kw)
    out = b.learn(agrl.make("Pendulum-v1"), 1700, part, checkpoint=path, checkpoint_every=500,
                  eval_env=agrl.make("Pendulum-v1"), eval_every=1000, eval_episodes=1)
    assert out["steps"] == 1700
    n = len(part.ev)
    assert part.ev == ref.ev[:n]
    c = algo.load(device, path)
    rest = Events()
    out = c.learn(agrl.make("Pendulum-v1"), 2600, rest, resume=True, eval_env=agrl.make("Pendulum-v1"),
                  eval_every=1000, eval_episodes=1)
    assert out["steps"] == 2600
    assert rest.ev == ref.ev[n:]
    assert c.updates == a.updates and same_policy(a, c, tmp_path)
    # a periodic checkpoint (at 1500) resumes too; the file is rewritten at each
    d = algo(device, 3, 1, LOW, HIGH, 2600, **kw)
    d.learn(agrl.make("Pendulum-v1"), 1600, None, checkpoint=path, checkpoint_every=500,
            eval_env=agrl.make("Pendulum-v1"), eval_every=1000, eval_episodes=1)
    e = algo.load(device, path)
    rest = Events()
    e.learn(agrl.make("Pendulum-v1"), 2600, rest, resume=True, eval_env=agrl.make("Pendulum-v1"),
            eval_every=1000, eval_episodes=1)
    k = next(i for i, ev in enumerate(ref.ev) if int(dict(ev)["step"]) > 1600)
    assert rest.ev == ref.ev[k:]
    assert same_policy(a, e, tmp_path)


def test_refusals(tmp_path):
    s = agrl.SAC("cpu", 3, 1, LOW, HIGH, 1000, **CFG)
    with pytest.raises(agrl.StateError, match="holds no run"):
        s.learn(agrl.make("Pendulum-v1"), 100, resume=True)
    with pytest.raises(agrl.InvalidArgError, match="checkpoint"):
        s.learn(agrl.make("Pendulum-v1"), 100, checkpoint_every=10)
    good = tmp_path / "sac.agrl"
    s.save(good)
    with pytest.raises(agrl.InvalidArgError, match="holds a SAC agent"):
        agrl.TD3.load("cpu", good)
    raw = good.read_bytes()
    cases = {"truncated.agrl": raw[:len(raw) // 2], "flipped.agrl": raw[:100] + bytes([raw[100] ^ 1]) + raw[101:],
             "trailing.agrl": raw + b"\0", "junk.agrl": b"AGRLACR1" + bytes(900)}
    for name, data in cases.items():
        p = tmp_path / name
        p.write_bytes(data)
        with pytest.raises(agrl.IoError, match="ag_ac_load") as e:
            agrl.SAC.load("cpu", p)
        assert str(p) in str(e.value)
    newer = bytearray(raw)
    newer[8] = 2
    (tmp_path / "v2.agrl").write_bytes(bytes(newer))
    with pytest.raises(agrl.UnsupportedError, match="version 2"):
        agrl.SAC.load("cpu", tmp_path / "v2.agrl")
    q = agrl.DQN("cpu", 4, 2, 1000, hidden=[8], batch_size=4, buffer_size=8)
    q.save(tmp_path / "dqn.agrl")
    with pytest.raises(agrl.IoError, match="not a SAC/TD3 file"):
        agrl.TD3.load("cpu", tmp_path / "dqn.agrl")
    with pytest.raises(agrl.IoError, match="not a DQN file"):
        agrl.DQN.load("cpu", good)
    with pytest.raises(agrl.IoError, match="nothing-here"):
        agrl.SAC.load("cpu", tmp_path / "nothing-here.agrl")
