"""agrl.DQN: acting (ints in range, int32 arrays for batches, greedy
actions deterministic), storing, training (a finite loss, the update
count), the exploration schedule in closed form, save_policy / load_policy (a fresh DQN
takes the same greedy actions), and DQN.learn on the pure-Python CartPole
reaching exactly the episode returns of `agrl train` with the same seed
and configuration (random exploration and the training phases both)."""

import csv
import json
import math
import subprocess

import numpy as np
import pytest

import agrl
from pycartpole import PyCartPole
from refs import cli_or_skip, find_cli

SMALL = dict(hidden=[32, 32], batch_size=16, buffer_size=1000, seed=5)


def test_defaults_are_the_c_library_defaults():
    d = agrl.DQN.defaults()
    assert d["hidden"] == (256, 256) and d["batch_size"] == 128 and d["buffer_size"] == 100000
    assert d["learning_starts"] == 1000 and d["train_freq"] == 64 and d["gradient_steps"] == 64 and d["n_step"] == 5
    assert d["target_update_interval"] == 10 and d["tau"] == 1.0 and d["double_dqn"] and d["huber"]
    assert d["lr"] == pytest.approx(7e-4) and d["gamma"] == pytest.approx(0.99)
    assert d["eps_end"] == pytest.approx(0.01) and d["exploration_fraction"] == pytest.approx(0.16)
    q = agrl.DQN("cpu", 4, 2)
    # the defaults' 5-step target runs fused, as the one-step one does
    assert q.config == d and q.obs_dim == 4 and q.n_actions == 2 and q.fused is True
    assert agrl.DQN("cpu", 4, 2, n_step=1).fused is True
    assert agrl.DQN("cpu", 4, 2, n_step=1, fused=False).fused is False


BAD = [
    # every range of agent.h's ag_dqn_config, refused by ag_dqn_create itself (the message names field and value)
    (dict(n_step=0), r"n_step = 0"),
    (dict(n_step=-3), r"n_step = -3"),
    (dict(n_step=65), r"n_step = 65"),
    (dict(n_step=100), r"n_step = 100"),
    (dict(n_envs=0), r"n_envs = 0"),
    (dict(n_envs=-1), r"n_envs = -1"),
    (dict(n_envs=2**20 + 1), r"n_envs = 1048577"),
    (dict(lr=0), r"lr = 0"),
    (dict(lr=1e6), r"lr = 1e\+06"),
    (dict(lr=float("nan")), r"lr = nan"),
    (dict(max_grad_norm=-1), r"max_grad_norm = -1"),
    (dict(max_grad_norm=float("inf")), r"max_grad_norm = inf"),
    (dict(gamma=-0.5), r"gamma = -0.5"),
    (dict(learning_starts=-1), r"learning_starts = -1"),
    (dict(gradient_steps=-1), r"gradient_steps = -1"),
    (dict(target_update_interval=0), r"target_update_interval = 0"),
    (dict(exploration_fraction=1.5), r"exploration_fraction = 1.5"),
    (dict(eps_start=-0.5), r"eps_start = -0.5"),
    (dict(per_alpha=2), r"per_alpha = 2"),
    (dict(per_beta=-1), r"per_beta = -1"),
    (dict(per_eps=0), r"per_eps = 0"),
]


@pytest.mark.parametrize("cfg,match", BAD, ids=[f"{next(iter(c))}-{i}" for i, (c, _) in enumerate(BAD)])
def test_bad_config_is_refused_naming_the_field(cfg, match):
    with pytest.raises(agrl.InvalidArgError, match=r"^ag_dqn_create: " + match):
        agrl.DQN("cpu", 4, 2, **{**SMALL, **cfg})


def test_config_boundaries_are_accepted():
    for cfg in (dict(n_step=1), dict(n_step=64), dict(n_envs=1), dict(n_envs=2**20), dict(max_grad_norm=0.0),
                dict(gamma=0.0), dict(gamma=1.0), dict(per_eps=1.0)):
        q = agrl.DQN("cpu", 4, 2, **{**SMALL, **cfg})
        k, v = next(iter(cfg.items()))
        assert q.config[k] == v


def test_act(rng):
    q = agrl.DQN("cpu", 6, 5, **SMALL)
    a = q.act(rng.standard_normal(6).astype(np.float32))
    assert type(a) is int and 0 <= a < 5
    obs = rng.standard_normal((300, 6)).astype(np.float32)
    acts = q.act(obs, explore=True, step=0)  # epsilon 1: uniform over the actions
    assert isinstance(acts, np.ndarray) and acts.dtype == np.int32 and acts.shape == (300,)
    assert acts.min() >= 0 and acts.max() <= 4 and len(set(acts.tolist())) == 5
    g1, g2 = q.act(obs, explore=False), q.act(obs.astype(np.float64), False)
    assert np.array_equal(g1, g2)  # greedy: a function of the observation
    assert all(q.act(obs[i], False) == g1[i] for i in range(0, 300, 37))


def test_epsilon_schedule():
    total = 10000
    q = agrl.DQN("cpu", 4, 2, total_steps=total, exploration_fraction=0.2, eps_start=1.0, eps_end=0.1,
                 hidden=[8])
    end = 0.2 * total
    for step in (0, 1, 500, 1000, 1999, 2000, 5000, 9999):
        want = 0.1 if step >= end else 1.0 + (0.1 - 1.0) * step / end
        assert q.epsilon(step) == pytest.approx(want, abs=1e-6)


def test_store_and_train(rng):
    q = agrl.DQN("cpu", 4, 2, **SMALL)
    assert q.stored == 0 and q.updates == 0
    q.store(np.zeros(4, np.float32), 1, 1.0, np.ones(4, np.float32), 0)  # one transition
    assert q.stored == 1
    n = 40
    q.store(rng.standard_normal((n, 4)), rng.integers(0, 2, n), rng.standard_normal(n),
            rng.standard_normal((n, 4)), rng.integers(0, 2, n).astype(np.int32))
    assert q.stored == n + 1
    loss = q.train(10)
    assert isinstance(loss, float) and math.isfinite(loss) and loss >= 0
    assert q.updates == 10
    assert q.train(0) is None and q.updates == 10
    assert q.train(3, loss=False) is None and q.updates == 13
    q.update_target()


def test_training_changes_the_greedy_policy(rng):
    q = agrl.DQN("cpu", 4, 2, lr=1e-2, **SMALL)
    obs = rng.standard_normal((64, 4)).astype(np.float32)
    # action 1 pays 1, action 0 pays -1, every transition terminal: Q(s, 1) > Q(s, 0) after training
    q.store(obs, np.tile([0, 1], 32), np.tile([-1.0, 1.0], 32), obs, np.ones(64, np.int32))
    first = q.train(1)
    for _ in range(20):
        last = q.train(10)
    assert last < first
    assert (q.act(obs, explore=False) == 1).all()


def test_save_load_round_trip(tmp_path, rng):
    src = agrl.DQN("cpu", 4, 3, **SMALL)
    n = 64
    src.store(rng.standard_normal((n, 4)), rng.integers(0, 3, n), rng.standard_normal(n),
              rng.standard_normal((n, 4)), np.zeros(n, np.int32))
    src.train(20)
    path = tmp_path / "q.agrl"
    src.save_policy(str(path))
    assert path.stat().st_size > 0
    obs = rng.standard_normal((500, 4)).astype(np.float32)
    want = src.act(obs, explore=False)
    dst = agrl.DQN("cpu", 4, 3, **{**SMALL, "seed": 99})
    assert not np.array_equal(dst.act(obs, explore=False), want)  # differently initialised
    dst.load_policy(path)  # a path-like works too
    assert np.array_equal(dst.act(obs, explore=False), want)
    assert repr(dst) == "<agrl.DQN 4 -> 3, 0 updates on cpu>"


def test_free():
    q = agrl.DQN("cpu", 4, 2, hidden=[8])
    q.free()
    assert repr(q) == "<agrl.DQN (freed)>"
    with pytest.raises(agrl.FreedError):
        q.act(np.zeros(4))


def _cli_returns(tmp_path, steps, seed, flags):
    cli = cli_or_skip()
    out = tmp_path / "run"
    cmd = [cli, "train", "--env", "cartpole", "--device", "cpu", "--steps", str(steps), "--seed", str(seed),
           "--out", str(out), "--quiet", "--stop-at", "none", "--n-envs", "1"] + flags  # learn() steps one env
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    with open(out / "episodes.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    with open(out / "losses.csv", newline="") as f:
        phases = [(int(x["step"]), int(x["updates"]), x["loss"]) for x in csv.DictReader(f)]
    with open(out / "summary.json") as f:
        summary = json.load(f)
    assert [int(x["episode"]) for x in rows] == list(range(1, len(rows) + 1))
    return [float(x["return"]) for x in rows], [int(x["length"]) for x in rows], phases, summary


@pytest.mark.parametrize("seed,steps,config,flags", [
    # the CLI's (and ag_dqn_defaults') configuration, training from step 500 on
    (3, 3000, dict(learning_starts=500), ["--learning-starts", "500"]),
    # every option the CLI has, away from its default
    (11, 4000,
     dict(hidden=[64, 32], lr=1e-3, gamma=0.95, batch_size=32, buffer_size=2000, learning_starts=300,
          train_freq=64, gradient_steps=16, target_update_interval=50, tau=0.5, exploration_fraction=0.3,
          eps_start=0.9, eps_end=0.05, max_grad_norm=5.0, double_dqn=False, huber=False),
     ["--hidden", "64,32", "--lr", "0.001", "--gamma", "0.95", "--batch", "32", "--buffer", "2000",
      "--learning-starts", "300", "--train-freq", "64", "--gradient-steps", "16", "--target-update", "50",
      "--tau", "0.5", "--eps-fraction", "0.3", "--eps-start", "0.9", "--eps-end", "0.05",
      "--max-grad-norm", "5", "--no-double", "--mse"]),
    # prioritized replay, beta annealed in step with the CLI's loop
    (5, 3000, dict(hidden=[32, 32], batch_size=32, buffer_size=2000, learning_starts=300, train_freq=64,
                   gradient_steps=16, per=True, per_alpha=0.5, per_beta=0.3, per_eps=1e-4),
     ["--hidden", "32,32", "--batch", "32", "--buffer", "2000", "--learning-starts", "300", "--train-freq", "64",
      "--gradient-steps", "16", "--per", "--per-alpha", "0.5", "--per-beta", "0.3", "--per-eps", "0.0001"]),
])
def test_learn_matches_the_cli(tmp_path, seed, steps, config, flags):
    cli_ret, cli_len, cli_phases, summary = _cli_returns(tmp_path, steps, seed, flags)
    q = agrl.DQN(ctx="cpu", obs_dim=4, n_actions=2, total_steps=steps, seed=seed, **config)
    events = []
    res = q.learn(PyCartPole(), total_steps=steps, callback=lambda ev: events.append(ev) and False)
    assert res["steps"] == steps == summary["steps"]
    assert res["episodes"] == summary["episodes"]
    assert res["returns"] == cli_ret
    assert res["lengths"] == cli_len
    assert q.updates == summary["updates"] > 0  # training phases happened
    # every training phase at the same step, with the same update count and loss (as the CLI prints it)
    phases = [(e["step"], e["updates"], f"{e['loss']:.6g}") for e in events if e["kind"] == "phase"]
    assert len(phases) > 5 and phases == cli_phases
    assert [e["return"] for e in events if e["kind"] == "episode"] == cli_ret


def test_learn_callback_stops_the_run():
    q = agrl.DQN("cpu", 4, 2, hidden=[8], learning_starts=10, batch_size=8, train_freq=16, gradient_steps=1)
    res = q.learn(PyCartPole(), total_steps=5000, callback=lambda ev: ev["kind"] == "episode" and ev["episodes"] == 3)
    assert res["episodes"] == 3 and len(res["returns"]) == 3 and res["steps"] == sum(res["lengths"])


class Counted:
    """An environment that counts the calls made to it; with num_envs, one
    that says it is a vector of that many copies."""

    def __init__(self, env, num_envs=None):
        self.env, self.calls = env, 0
        if num_envs is not None:
            self.num_envs = num_envs

    def reset(self, **kw):
        self.calls += 1
        return self.env.reset(**kw)

    def step(self, action):
        self.calls += 1
        return self.env.step(action)


@pytest.mark.parametrize("n_step,n_envs,num_envs,match", [
    # 5-step returns over one environment's transitions stored one a step, walked 8 columns apart
    (5, 8, None, r"n_envs = 8, the environment 1 copy"),
    (2, 2, None, r"n_envs = 2, the environment 1 copy"),
    # a vector environment, of as many copies as n_envs or not, and one of a single copy
    (5, 4, 4, r"a vector of 4 copies \(num_envs\) and the DQN has n_envs = 4"),
    (5, 1, 4, r"a vector of 4 copies \(num_envs\) and the DQN has n_envs = 1"),
    (1, 3, 3, r"a vector of 3 copies \(num_envs\) and the DQN has n_envs = 3"),
    (5, 1, 1, r"a vector of 1 copy \(num_envs\)"),
])
def test_learn_refuses_copies_it_does_not_play(n_step, n_envs, num_envs, match):
    q = agrl.DQN("cpu", 4, 2, hidden=[8], n_step=n_step, n_envs=n_envs, learning_starts=0, batch_size=4)
    env = Counted(PyCartPole(), num_envs)
    with pytest.raises(agrl.InvalidArgError, match=r"^learn: .*" + match):
        q.learn(env, 100)
    assert env.calls == 0 and q.stored == 0 and q.updates == 0  # refused before anything moved


def test_learn_refuses_a_gymnasium_vector_env():
    gym = pytest.importorskip("gymnasium")
    vec = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(2)])
    q = agrl.DQN("cpu", 4, 2, hidden=[8], n_envs=2)
    with pytest.raises(agrl.InvalidArgError, match=r"a vector of 2 copies \(num_envs\) and the DQN has n_envs = 2"):
        q.learn(vec, 100)
    assert q.stored == 0
    vec.close()


def test_learn_with_one_step_targets_ignores_n_envs():
    """n_envs only spaces the n-step walk: with one-step targets learn takes
    it, and the run is the one of n_envs = 1, return for return."""
    runs = []
    for n_envs in (1, 8):
        q = agrl.DQN("cpu", 4, 2, total_steps=1200, hidden=[16], learning_starts=200, train_freq=32,
                     gradient_steps=8, batch_size=32, seed=6, n_step=1, n_envs=n_envs)
        res = q.learn(PyCartPole())
        runs.append((res["returns"], q.updates))
    assert runs[0] == runs[1] and len(runs[0][0]) > 10 and runs[0][1] > 0


def test_learn_on_a_builtin_env_equals_learn_on_the_python_one():
    runs = []
    for env in (agrl.make("CartPole-v1"), PyCartPole()):
        q = agrl.DQN("cpu", 4, 2, total_steps=1500, hidden=[16], learning_starts=200, train_freq=32,
                     gradient_steps=8, batch_size=32, seed=2)
        runs.append(q.learn(env)["returns"])
    assert runs[0] == runs[1] and len(runs[0]) > 10


def test_for_env_takes_the_sizes_of_agrl_spaces():
    q = agrl.DQN.for_env("cpu", agrl.make("CartPole-v1"), 1500, hidden=[16], learning_starts=200, train_freq=32,
                         gradient_steps=8, batch_size=32, seed=2)
    assert (q.obs_dim, q.n_actions, q.total_steps) == (4, 2, 1500)
    assert q.config["hidden"] == (16,) and q.config["seed"] == 2 and q.config["n_envs"] == 1
    by_hand = agrl.DQN("cpu", 4, 2, 1500, hidden=[16], learning_starts=200, train_freq=32, gradient_steps=8,
                       batch_size=32, seed=2)
    assert q.config == by_hand.config
    # the same DQN: the same run
    assert q.learn(agrl.make("CartPole-v1"))["returns"] == by_hand.learn(agrl.make("CartPole-v1"))["returns"]
    a = agrl.DQN.for_env(agrl.Context("cpu"), agrl.make("acrobot"), hidden=[8])
    assert (a.obs_dim, a.n_actions, a.total_steps) == (6, 3, 100000)


def test_for_env_refuses_what_is_not_a_discrete_space():
    with pytest.raises(agrl.InvalidArgError, match=r"^DQN.for_env: env.action_space Box\(-2.0, 2.0, \(1,\), "
                                                   r"float32\) is not Discrete"):
        agrl.DQN.for_env("cpu", agrl.make("pendulum"))

    class Spaces:
        def __init__(self, observation_space, action_space):
            self.observation_space, self.action_space = observation_space, action_space

    with pytest.raises(agrl.ShapeError, match=r"^DQN.for_env: observations of shape \(2, 3\), not \(obs_dim,\)"):
        agrl.DQN.for_env("cpu", Spaces(agrl.Box(-1, 1, (2, 3)), agrl.Discrete(2)))
    with pytest.raises(agrl.ShapeError, match=r"observations of shape \(\)"):
        agrl.DQN.for_env("cpu", Spaces(agrl.Discrete(5), agrl.Discrete(2)))
    with pytest.raises(agrl.InvalidArgError, match=r"env.action_space None is not Discrete"):
        agrl.DQN.for_env("cpu", Spaces(agrl.Box(-1, 1, (3,)), None))
    # the library's own refusal of one action
    with pytest.raises(agrl.InvalidArgError, match=r"n_actions = 1"):
        agrl.DQN.for_env("cpu", Spaces(agrl.Box(-1, 1, (3,)), agrl.Discrete(1)))


def test_for_env_on_gymnasium_spaces():
    gym = pytest.importorskip("gymnasium")
    q = agrl.DQN.for_env("cpu", gym.make("Acrobot-v1"), 2000, hidden=[8])
    assert (q.obs_dim, q.n_actions, q.total_steps, q.config["n_envs"]) == (6, 3, 2000, 1)
    # a vector environment: the sizes of one copy, n_envs its copies
    vec = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(3)])
    q = agrl.DQN.for_env("cpu", vec, hidden=[8], n_step=3)
    assert (q.obs_dim, q.n_actions, q.config["n_envs"], q.config["n_step"]) == (4, 2, 3, 3)
    assert agrl.DQN.for_env("cpu", vec, hidden=[8], n_envs=3).config["n_envs"] == 3
    with pytest.raises(agrl.InvalidArgError, match=r"n_envs = 2, but the vector environment has 3 copies"):
        agrl.DQN.for_env("cpu", vec, n_envs=2)
    # one step of every copy, stored side by side as n_envs says
    obs, _ = vec.reset(seed=1)
    act = q.act(obs, explore=True, step=0)
    nxt, rew, term, trunc, _ = vec.step(act)
    q.store(obs, act, rew, nxt, term.astype(np.int32), trunc.astype(np.int32))
    assert q.stored == 3
    vec.close()
    with pytest.raises(agrl.InvalidArgError, match=r"^DQN.for_env: env.action_space Box\(.*\) is not Discrete"):
        agrl.DQN.for_env("cpu", gym.make("Pendulum-v1"))
    pend = gym.vector.SyncVectorEnv([lambda: gym.make("Pendulum-v1") for _ in range(2)])
    with pytest.raises(agrl.InvalidArgError, match=r"env.single_action_space Box\(.*\) is not Discrete"):
        agrl.DQN.for_env("cpu", pend)
    pend.close()

    class Shifted:  # actions -1, 0, 1: not the DQN's 0 .. n-1
        observation_space = gym.spaces.Box(-1, 1, (3,))
        action_space = gym.spaces.Discrete(3, start=-1)

    with pytest.raises(agrl.InvalidArgError, match=r"env.action_space Discrete\(3, start=-1\) starts at -1"):
        agrl.DQN.for_env("cpu", Shifted())
    with pytest.raises(agrl.ShapeError, match=r"observations of shape \(2, 2\)"):
        Shifted.observation_space = gym.spaces.Box(-1, 1, (2, 2))
        Shifted.action_space = gym.spaces.Discrete(3)
        agrl.DQN.for_env("cpu", Shifted())


def test_learn_evaluations_match_the_cli(tmp_path):
    """learn(eval_env=, eval_every=) evaluates at the steps and on the
    episodes of `agrl train --eval-every`: the same means as its eval.csv."""
    cli = find_cli()
    out = tmp_path / "run"
    flags = ["--hidden", "32,32", "--batch", "32", "--learning-starts", "300", "--train-freq", "64",
             "--gradient-steps", "16", "--eval-every", "1000", "--eval-episodes", "3", "--n-envs", "1"]
    r = subprocess.run([cli, "train", "--env", "cartpole", "--device", "cpu", "--steps", "4000", "--seed", "4",
                        "--out", str(out), "--quiet", "--stop-at", "none"] + flags,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    with open(out / "eval.csv", newline="") as f:
        want = [(int(x["step"]), x["mean"]) for x in csv.DictReader(f)]
    q = agrl.DQN("cpu", 4, 2, total_steps=4000, seed=4, hidden=[32, 32], batch_size=32, learning_starts=300,
                 train_freq=64, gradient_steps=16)
    res = q.learn(agrl.make("CartPole-v1"), 4000, eval_env=agrl.make("CartPole-v1"), eval_every=1000,
                  eval_episodes=3)
    assert len(want) == 4
    assert [(s, f"{m:.6g}") for s, m in res["evals"]] == want
    mean, rets = q.evaluate(agrl.make("CartPole-v1"), 3, agrl.derive_seed(4, 0xE7A15EED))
    assert len(rets) == 3 and f"{mean:.6g}" == want[-1][1]  # the last evaluation's network is the final one
    with pytest.raises(agrl.InvalidArgError, match="eval_env"):
        q.learn(agrl.make("CartPole-v1"), 10, eval_every=5)


def test_evaluate_plays_the_episodes_of_agrl_eval(tmp_path):
    """evaluate() on agrl's own environment plays the episodes `agrl eval
    --seed` plays (ag_q_evaluate's: episode k from seed derive_seed(seed, k))."""
    cli = cli_or_skip()
    q = agrl.DQN("cpu", 4, 2, hidden=[16], seed=3)
    path = tmp_path / "q.agrl"
    q.save_policy(path)
    r = subprocess.run([cli, "eval", "--model", str(path), "--env", "cartpole", "--episodes", "20", "--seed", "7",
                        "--device", "cpu"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    _, rets = q.evaluate(agrl.make("CartPole-v1"), 20, 7)
    assert r.stdout.splitlines()[:20] == [f"episode {k}: return {x:.1f}" for k, x in enumerate(rets)]
    assert len(set(rets)) > 1  # episodes of different starts
