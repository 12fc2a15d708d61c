"""agrl.SAC and agrl.TD3 learning on vector environments and on Gymnasium's
MuJoCo tasks: the transitions learn() stores from a SyncVectorEnv or
AsyncVectorEnv (both autoreset modes, episodes ending mid-run) equal those
a NumPy loop over single copies records for the same seeds and actions,
read back from the saved agent's replay table; a SAME_STEP vector of agrl's
pendulums gives exactly the episodes, losses and updates of `agrl train
--n-envs N` (its n-step walks striding over the copies); the refusals of a
vector of other than n_envs copies and of the autoreset modes learn does
not take, before the environment is touched; and a Hopper-v5 run split in
two through a checkpoint equal, bit for bit, to one uninterrupted run."""

import os

import numpy as np
import pytest

import agrl
from refs import read_container
from test_ac import _cli_run

gym = pytest.importorskip("gymnasium")
mujoco = pytest.importorskip("mujoco")
Mode = gym.vector.AutoresetMode


def table_of(agent, tmp_path):
    """The agent's replay table as rows (obs, action in [-1, 1], reward,
    next_obs, terminated, truncated), parsed from the table's container at
    the end of its saved file (refs.read_container)."""
    path = tmp_path / "agent.agrl"
    agent.save(path)
    raw = path.read_bytes()
    tail = tmp_path / "table.agrl"
    tail.write_bytes(raw[raw.index(b"AGRLFILE", 8):])
    keys, sections = read_container(tail)
    assert keys["kind"] == "replay" and keys["replay.position"] == keys["replay.size"]  # no wrap here
    width = sum(keys["replay.widths"])
    rows = sections["columns"][1].reshape(keys["replay.size"], width)
    cuts = np.cumsum((0,) + keys["replay.widths"])
    return [rows[:, cuts[k]:cuts[k + 1]] for k in range(6)]


def hopper(i, limit=6):
    # short episodes: a fall (terminated) or the time limit (truncated), at other steps in each copy
    return gym.make("Hopper-v5", max_episode_steps=limit + 5 * i)


def reference_rows(agent, n, seed, vsteps, mode):
    """The transitions of n single Hopper copies (copy i reset with
    seed + i, then without a seed) stepped with the actions agent's twin
    draws (act_random(n) per step), in the order learn stores them: per
    vector step the copies' transitions in copy order. NEXT_STEP: the step
    after a copy's episode ended resets it and holds no transition."""
    envs = [hopper(i) for i in range(n)]
    obs = [np.asarray(e.reset(seed=seed + i)[0], np.float32) for i, e in enumerate(envs)]
    pending = [False] * n
    rows = []
    for _ in range(vsteps):
        acts = agent.act_random(n)
        for i, e in enumerate(envs):
            if pending[i]:
                obs[i], pending[i] = np.asarray(e.reset()[0], np.float32), False
                continue
            nxt, r, term, trunc, _ = e.step(acts[i])
            nxt = np.asarray(nxt, np.float32)
            rows.append((obs[i], acts[i], np.float32(r), nxt, term, trunc))
            if term or trunc:
                if mode == Mode.SAME_STEP:
                    nxt = np.asarray(e.reset()[0], np.float32)
                else:
                    pending[i] = True
            obs[i] = nxt
    return rows


@pytest.mark.parametrize("cls", [agrl.SAC, agrl.TD3])
@pytest.mark.parametrize("kind,mode", [("sync", Mode.NEXT_STEP), ("sync", Mode.SAME_STEP),
                                       ("async", Mode.NEXT_STEP), ("async", Mode.SAME_STEP)])
def test_stored_transitions_are_a_numpy_loops(cls, kind, mode, tmp_path):
    n, vsteps, seed = 3, 60, 7
    make = gym.vector.SyncVectorEnv if kind == "sync" else gym.vector.AsyncVectorEnv
    env = make([lambda i=i: hopper(i) for i in range(n)], autoreset_mode=mode)
    cfg = dict(hidden=[8], batch_size=8, buffer_size=1000, learning_starts=10 ** 6, seed=11)
    a = cls.for_env("cpu", env, **cfg)
    events = []
    res = a.learn(env, n * vsteps, callback=lambda ev: events.append(ev) and False)
    env.close()
    assert res["steps"] == n * vsteps and a.updates == 0
    twin = cls.for_env("cpu", gym.vector.SyncVectorEnv([lambda: hopper(0)] * n), **cfg)
    want = reference_rows(twin, n, agrl.derive_seed(11, 0), vsteps, mode)
    got = table_of(a, tmp_path)
    ends = [w for w in want if w[4] or w[5]]
    assert len(ends) >= 6 and any(w[4] for w in want) and any(w[5] and not w[4] for w in want)
    # SAME_STEP: a transition of every copy at every step; NEXT_STEP: none at a copy's reset step
    assert a.stored == len(want) and (a.stored == n * vsteps) == (mode == Mode.SAME_STEP)
    np.testing.assert_array_equal(got[0], np.stack([w[0] for w in want]))
    np.testing.assert_allclose(got[1], np.stack([w[1] for w in want]), rtol=0, atol=2e-7)  # [-1, 1] both
    np.testing.assert_array_equal(got[2][:, 0], np.array([w[2] for w in want], np.float32))
    np.testing.assert_array_equal(got[3], np.stack([w[3] for w in want]))
    np.testing.assert_array_equal(got[4][:, 0], [float(w[4]) for w in want])
    np.testing.assert_array_equal(got[5][:, 0], [float(w[5]) for w in want])
    # the episodes that ended, in the order they ended, with their returns and lengths
    eps = [e for e in events if e["kind"] == "episode"]
    assert len(eps) == len(ends) == res["episodes"]
    per_copy = {i: [] for i in range(n)}
    for e in eps:
        per_copy[e["copy"]].append((e["return"], e["length"]))
    assert sum(len(v) for v in per_copy.values()) == len(ends) and all(per_copy.values())


class AgrlVector:
    """n copies of an agrl environment as Gymnasium's SAME_STEP vector,
    seeded as agrl's C vector (ag_vec_env_create(name, n, seed)): copy i's
    episode k starts from derive_seed(derive_seed(derive_seed(seed, i), k))
    (agrl.Env.reset(seed=derive_seed(seed, i)), then reset())."""

    metadata = {"autoreset_mode": "SameStep"}

    def __init__(self, name, n, seed):
        self.envs = [agrl.make(name) for _ in range(n)]
        self.num_envs, self.seed = n, seed
        self.single_observation_space = self.envs[0].observation_space
        self.single_action_space = self.envs[0].action_space

    def reset(self, *, seed=None):
        assert seed == agrl.derive_seed(self.seed, 0)  # what learn() passes
        return np.stack([e.reset(seed=agrl.derive_seed(self.seed, i))[0] for i, e in enumerate(self.envs)]), {}

    def step(self, actions):
        out = [e.step(a) for e, a in zip(self.envs, actions)]
        obs = np.stack([o[0] for o in out])
        term, trunc = np.array([o[2] for o in out]), np.array([o[3] for o in out])
        final = np.full(self.num_envs, None, object)
        for i in np.flatnonzero(term | trunc):
            final[i] = obs[i].copy()
            obs[i] = self.envs[i].reset()[0]
        return obs, np.array([o[1] for o in out]), term, trunc, {"final_obs": final, "_final_obs": term | trunc}


@pytest.mark.parametrize("algo,n,n_step,extra,flags", [
    ("sac", 3, 3, dict(train_freq=1, gradient_steps=2), ["--train-freq", "1", "--gradient-steps", "2"]),
    ("td3", 4, 1, dict(train_freq=6, gradient_steps=3), ["--train-freq", "6", "--gradient-steps", "3"]),
])
def test_a_vector_of_agrl_envs_is_agrl_train_n_envs(tmp_path, algo, n, n_step, extra, flags):
    steps, seed = 1800, 4
    cli_eps, cli_phases, _, summary = _cli_run(tmp_path, algo, steps, seed, [
        "--hidden", "32,32", "--batch", "32", "--learning-starts", "300", "--n-envs", str(n),
        "--n-step", str(n_step)] + flags)
    cls = agrl.SAC if algo == "sac" else agrl.TD3
    vec = AgrlVector("pendulum", n, seed)
    a = cls.for_env("cpu", vec, steps, seed=seed, hidden=[32, 32], batch_size=32, learning_starts=300,
                    n_step=n_step, **extra)
    assert a.config["n_envs"] == n
    events = []
    res = a.learn(vec, callback=lambda ev: events.append(ev) and False)
    assert res["steps"] == summary["steps"] and a.updates == summary["updates"] > 0
    eps = [(e["step"], f"{e['return']:.6g}", e["length"], f"{e['mean_return']:.6g}", e["updates"])
           for e in events if e["kind"] == "episode"]
    assert len(eps) >= steps // 200 - n and eps == [
        (int(r["step"]), r["return"], int(r["length"]), r["mean20"], int(r["updates"])) for r in cli_eps]
    phases = [(e["step"], e["updates"], f"{e['loss']:.6g}", f"{e['actor_loss']:.6g}")
              for e in events if e["kind"] == "phase"]
    assert len(phases) >= 1 and phases == [(int(r["step"]), int(r["updates"]), r["loss"], r["actor_loss"])
                                           for r in cli_phases]


class Probe:
    """A vector environment that counts the calls made to it."""

    def __init__(self, n, mode):
        self.num_envs, self.calls = n, 0
        self.metadata = {"autoreset_mode": mode}
        one = gym.make("Pendulum-v1")
        self.single_observation_space, self.single_action_space = one.observation_space, one.action_space

    def reset(self, **kw):
        self.calls += 1
        raise AssertionError("reset")

    def step(self, a):
        self.calls += 1
        raise AssertionError("step")


@pytest.mark.parametrize("n_envs,num_envs,mode,n_step,match", [
    (2, 3, Mode.NEXT_STEP, 1, r"a vector of 3 copies \(num_envs\) and the agent has n_envs = 2: make the agent "
                              r"with n_envs = num_envs"),
    (3, 3, Mode.DISABLED, 1, r"autoreset_mode is 'Disabled': learn takes NEXT_STEP"),
    (3, 3, "Sometimes", 1, r"autoreset_mode is 'Sometimes'"),
    (3, 3, Mode.NEXT_STEP, 2, r"n_step = 2 with the vector environment's autoreset_mode NEXT_STEP"),
])
def test_vectors_learn_does_not_take_are_refused_untouched(n_envs, num_envs, mode, n_step, match):
    env = Probe(num_envs, mode)
    a = agrl.SAC("cpu", 3, 1, -2, 2, hidden=[8], batch_size=8, buffer_size=500, n_envs=n_envs, n_step=n_step)
    with pytest.raises(agrl.InvalidArgError, match=r"^learn: .*" + match):
        a.learn(env, 50)
    assert env.calls == 0 and a.stored == 0 and a.updates == 0
    with pytest.raises(agrl.InvalidArgError, match=r"eval_env must be a single environment"):
        agrl.SAC("cpu", 3, 1, -2, 2, hidden=[8], batch_size=8, buffer_size=500).learn(
            gym.make("Pendulum-v1"), 50, eval_env=Probe(2, Mode.SAME_STEP), eval_every=10)


def make_hopper(kind):
    if kind == "single":
        return gym.make("Hopper-v5")
    return gym.make_vec("Hopper-v5", 3, vectorization_mode="sync", vector_kwargs={"autoreset_mode": Mode(kind)})


@pytest.mark.parametrize("kind", ["single", "NextStep", "SameStep"])
def test_hopper_resumes_bit_for_bit(kind, tmp_path):
    cfg = dict(hidden=[16, 16], batch_size=16, learning_starts=300, seed=3)
    env = make_hopper(kind)
    whole = agrl.SAC.for_env("cpu", env, 1500, **cfg)
    ev1 = []
    r1 = whole.learn(env, callback=lambda e: ev1.append(e) and False, eval_env=gym.make("Hopper-v5"),
                     eval_every=500, eval_episodes=2)
    env.close()
    ckpt = tmp_path / "ckpt.agrl"
    env = make_hopper(kind)
    part = agrl.SAC.for_env("cpu", env, 1500, **cfg)
    ev2 = []
    r2 = part.learn(env, 600, checkpoint=ckpt, callback=lambda e: ev2.append(e) and False,
                    eval_env=gym.make("Hopper-v5"), eval_every=500, eval_episodes=2)
    part.learn(env, 900)  # the environment and agent move on; the checkpoint stays at step 600
    env.close()
    again = agrl.SAC.load("cpu", ckpt)
    env = make_hopper(kind)  # a new environment, put in the saved one's state
    r3 = again.learn(env, 1500, resume=True, callback=lambda e: ev2.append(e) and False,
                     eval_env=gym.make("Hopper-v5"), eval_every=500, eval_episodes=2)
    env.close()
    assert r2["steps"] == 600 and r3["steps"] == r1["steps"] == 1500 and again.updates == whole.updates > 0
    assert len(ev1) > 10 and ev1 == ev2
    assert r1["returns"] == r2["returns"] + r3["returns"] and r1["evals"] == r2["evals"] + r3["evals"]
    whole.save(tmp_path / "whole.agrl")
    again.save(tmp_path / "again.agrl")  # every parameter, moment, stream, the table and the run's record
    assert (tmp_path / "whole.agrl").read_bytes() == (tmp_path / "again.agrl").read_bytes()


def test_async_runs_checkpoint_but_do_not_resume(tmp_path):
    env = gym.make_vec("Pendulum-v1", 2, vectorization_mode="async")
    a = agrl.TD3.for_env("cpu", env, 100, hidden=[8], batch_size=8, learning_starts=50, seed=1)
    a.learn(env, checkpoint=tmp_path / "a.agrl")
    env.close()
    b = agrl.TD3.load("cpu", tmp_path / "a.agrl")
    env = gym.make_vec("Pendulum-v1", 2, vectorization_mode="async")
    with pytest.raises(agrl.StateError, match=r"AsyncVectorEnv's copies run in other processes"):
        b.learn(env, 200, resume=True)
    env.close()
    assert b.stored == 100


def test_an_environment_of_another_kind_is_refused_unchanged(tmp_path):
    env = gym.make("Walker2d-v5")
    a = agrl.SAC.for_env("cpu", env, 200, hidden=[8], batch_size=8, learning_starts=50, seed=1)
    a.learn(env, checkpoint=tmp_path / "a.agrl")
    b = agrl.SAC.load("cpu", tmp_path / "a.agrl")
    bare = gym.make("Walker2d-v5").unwrapped  # the same task without its wrappers
    bare.reset(seed=5)
    qpos = bare.data.qpos.copy()
    with pytest.raises(agrl.InvalidArgError, match=r"set_state: env has 1 layers .*, the state 4"):
        b.learn(bare, 400, resume=True)
    assert np.array_equal(bare.data.qpos, qpos)
    other = gym.make("HalfCheetah-v5")  # 17 observations and 6 actions in [-1, 1] too
    other.reset(seed=5)
    qpos = other.unwrapped.data.qpos.copy()
    with pytest.raises(agrl.InvalidArgError, match=r"env\[3\] is a HalfCheetahEnv, the state's Walker2dEnv"):
        b.learn(other, 400, resume=True)
    assert np.array_equal(other.unwrapped.data.qpos, qpos) and b.stored == 200 and b.updates == a.updates
