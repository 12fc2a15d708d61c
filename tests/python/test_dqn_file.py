"""agrl.DQN.save / agrl.DQN.load and a resumed learn(): the reference is the
DQN that was saved (or the run that was not interrupted). A loaded DQN has
the saved configuration and acts, stores and trains exactly as the saved one
goes on to (the same actions, losses and greedy choices); learn() stopped at
a checkpoint and resumed on a new environment reports the uninterrupted
run's events from there on; agrl.Env.get_state / set_state continue the
same episodes. On the CPU, and on the GPU when there is one (with
AGRL_REQUIRE_GPU=1 its absence fails)."""

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
CFG = dict(hidden=[32, 16], batch_size=32, buffer_size=700, learning_starts=200, train_freq=48,
           gradient_steps=12, target_update_interval=30, seed=7)


def fill(q, rng, n):
    q.store(rng.standard_normal((n, 4)).astype(np.float32), rng.integers(0, 2, n).astype(np.int32),
            rng.standard_normal(n).astype(np.float32), rng.standard_normal((n, 4)).astype(np.float32),
            (rng.random(n) < 0.1).astype(np.int32))


@pytest.mark.parametrize("device", DEVICES)
def test_loaded_dqn_goes_on_as_the_saved_one(tmp_path, device):
    a = agrl.DQN(device, 4, 2, 5000, **CFG)
    rng = np.random.default_rng(1)
    fill(a, rng, 600)
    fill(a, rng, 300)  # the ring wrapped
    a.train(20)
    a.update_target()
    obs = rng.standard_normal((9, 4)).astype(np.float32)
    a.act(obs, True, 100)  # the exploration stream moved
    path = tmp_path / "dqn.agrl"
    a.save(path)
    b = agrl.DQN.load(device, path)
    assert b.config == a.config and b.total_steps == 5000 and b.updates == a.updates == 20
    assert b.stored == a.stored == 700 and (b.obs_dim, b.n_actions) == (4, 2)
    for r in range(3):
        o = rng.standard_normal((7, 4)).astype(np.float32)
        assert np.array_equal(a.act(o, True, 300 + r), b.act(o, True, 300 + r))
        batch = np.random.default_rng(10 + r)
        fill(a, batch, 50)
        fill(b, np.random.default_rng(10 + r), 50)
        la, lb = a.train(10), b.train(10)
        assert la == lb  # bit for bit
        a.update_target()
        b.update_target()
    o = rng.standard_normal((500, 4)).astype(np.float32)
    assert np.array_equal(a.act(o, explore=False), b.act(o, explore=False))


def test_saved_on_one_device_loads_on_the_cpu(tmp_path):
    check_loads_on_the_cpu(tmp_path, lambda dev: agrl.DQN(dev, 4, 2, 5000, **CFG), fill, 4)


class Events:
    def __init__(self):
        self.ev = []

    def __call__(self, ev):
        self.ev.append(tuple(sorted(ev.items())))


@pytest.mark.parametrize("device", DEVICES)
def test_resumed_learn_equals_the_uninterrupted_run(tmp_path, device):
    ref = Events()
    a = agrl.DQN(device, 4, 2, 3000, **CFG)
    a.learn(agrl.make("CartPole-v1"), 3000, ref)
    assert len(ref.ev) > 40
    # stopped at 1700 with checkpoints every 500, then resumed from its file
    part = Events()
    path = tmp_path / "run.agrl"
    b = agrl.DQN(device, 4, 2, 3000, **CFG)
    out = b.learn(agrl.make("CartPole-v1"), 1700, part, checkpoint=path, checkpoint_every=500)
    assert out["steps"] == 1700
    n = len(part.ev)
    assert part.ev == ref.ev[:n]
    c = agrl.DQN.load(device, path)
    rest = Events()
    out = c.learn(agrl.make("CartPole-v1"), 3000, rest, resume=True)
    assert out["steps"] == 3000
    assert rest.ev == ref.ev[n:]
    # a periodic checkpoint (at 1500) resumes too; the file is rewritten at each
    d = agrl.DQN(device, 4, 2, 3000, **CFG)
    d.learn(agrl.make("CartPole-v1"), 1500, None, checkpoint=path, checkpoint_every=500)
    e = agrl.DQN.load(device, path)
    rest = Events()
    e.learn(agrl.make("CartPole-v1"), 3000, rest, resume=True)
    k = next(i for i, ev in enumerate(ref.ev) if dict(ev)["step"] > 1500)
    assert rest.ev == ref.ev[k:]


def test_resume_refusals(tmp_path):
    q = agrl.DQN("cpu", 4, 2, 1000, **CFG)
    with pytest.raises(agrl.StateError, match="holds no run"):
        q.learn(agrl.make("CartPole-v1"), 100, resume=True)
    with pytest.raises(agrl.InvalidArgError, match="checkpoint"):
        q.learn(agrl.make("CartPole-v1"), 100, checkpoint_every=10)

    class NoState:  # a Gymnasium-style environment without get_state
        def __init__(self):
            self.e = agrl.make("CartPole-v1")

        def reset(self, seed=None):
            return self.e.reset(seed=seed)

        def step(self, a):
            return self.e.step(a)

    q.learn(NoState(), 300, checkpoint=tmp_path / "n.agrl")
    r = agrl.DQN.load("cpu", tmp_path / "n.agrl")
    with pytest.raises(agrl.StateError, match="get_state"):
        r.learn(NoState(), 600, resume=True)
    (tmp_path / "bad.agrl").write_bytes(b"AGRLDQN1" + bytes(600))
    with pytest.raises(agrl.IoError, match="ag_dqn_load"):
        agrl.DQN.load("cpu", tmp_path / "bad.agrl")


def test_env_state_continues_the_same_episodes():
    rng = np.random.default_rng(4)
    a = agrl.make("CartPole-v1")
    a.reset(seed=3)
    for _ in range(40):
        _, _, term, trunc, _ = a.step(int(rng.integers(0, 2)))
        if term or trunc:
            a.reset()
    state = a.get_state()
    b = agrl.make("CartPole-v1")
    b.set_state(state)
    for _ in range(300):
        act = int(rng.integers(0, 2))
        ra, rb = a.step(act), b.step(act)
        assert np.array_equal(ra[0], rb[0]) and ra[1:4] == rb[1:4]
        if ra[2] or ra[3]:
            oa, ob = a.reset()[0], b.reset()[0]  # the same next seed
            assert np.array_equal(oa, ob)
    with pytest.raises(agrl.InvalidArgError):
        b.set_state(b"junk")
    with pytest.raises(agrl.Error):
        agrl.make("Acrobot-v1").set_state(state)  # another task's state
