#!/usr/bin/env python3
"""gen_env_vectors.py — writes tests/data/env_vectors.h: reference trajectories
of Gymnasium's classic-control environments for tests/test_env.c.

For each run: gym.make(id), reset, then overwrite env.unwrapped.state with a
known start state (so numpy's start-state generator does not matter), then
step a fixed action sequence (scripted policies that reach termination, or
time limits that reach truncation) and record, per step, the float32
observation, the reward (as float32, what agrl returns), every 10th float64
state (to catch differences hidden by the float32 rounding) and, for the last
step, the terminated / truncated flags (every earlier step has both 0: the
runs stop when the episode ends). The header also holds each environment's
spec from Gymnasium's registry.

Usage: python3 tests/gen/gen_env_vectors.py [OUTPUT]   (default: tests/data/env_vectors.h
next to this script). Installs gymnasium==1.0.0 and numpy with pip when they
are missing.
"""
import os
import subprocess
import sys

GYMNASIUM_VERSION = "1.0.0"
STATE_EVERY = 10  # the float64 state is recorded after every 10th step and the last one


def ensure_packages():
    try:
        import gymnasium  # noqa: F401
        import numpy  # noqa: F401

        if gymnasium.__version__ == GYMNASIUM_VERSION:
            return
        imported = True
    except ImportError:
        imported = False
    subprocess.check_call(
        [sys.executable, "-m", "pip", "install", "--quiet", f"gymnasium=={GYMNASIUM_VERSION}", "numpy"]
    )
    if imported:  # another gymnasium is loaded in this process: start again
        os.execv(sys.executable, [sys.executable] + sys.argv)


ensure_packages()

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

assert gym.__version__ == GYMNASIUM_VERSION, gym.__version__


def f32(v):
    """A C float literal that reads back as exactly np.float32(v)."""
    s = str(np.float32(v))
    if "inf" in s or "nan" in s:
        raise ValueError(f"non-finite value {v}")
    if "." not in s and "e" not in s:
        s += ".0"
    assert np.float32(float(s)) == np.float32(v), (s, v)
    return s + "f"


def f64(v):
    """A C double literal that reads back as exactly float(v) (hexadecimal)."""
    return float.hex(float(v))


# ---- scripted policies (on the float32 observation) --------------------------


def cartpole_balance(obs, t):
    x, x_dot, th, th_dot = (float(v) for v in obs)
    return int(th + 0.5 * th_dot + 0.05 * x + 0.2 * x_dot > 0)


def acrobot_pump(obs, t):
    return 2 if obs[5] > 0 else 0


def mountaincar_pump(obs, t):
    return 2 if obs[1] >= 0 else 0


def mountaincar_continuous_pump(force):
    """Bang-bang on the velocity's sign; force > 1 is clipped to 1 by the step."""
    return lambda obs, t: np.array([force if obs[1] >= 0 else -force], dtype=np.float32)


def scripted(actions, then):
    """The float32 actions given, one per step, then the policy `then`."""
    return lambda obs, t: np.array([actions[t]], dtype=np.float32) if t < len(actions) else then(obs, t)


def constant(a):
    return lambda obs, t: a


def random_discrete(n, seed):
    rng = np.random.default_rng(seed)
    return lambda obs, t: int(rng.integers(n))


def random_torque(seed, lo=-3.0, hi=3.0):
    rng = np.random.default_rng(seed)
    return lambda obs, t: np.array([rng.uniform(lo, hi)], dtype=np.float32)


def const_torque(u):
    return lambda obs, t: np.array([u], dtype=np.float32)


def observe(env):
    """The observation of the current state, as the environment computes it."""
    u = env.unwrapped
    if hasattr(u, "_get_ob"):
        return u._get_ob()
    if hasattr(u, "_get_obs"):
        return u._get_obs()
    return np.array(u.state, dtype=np.float32)


def run(name, env_id, start, policy, expect, max_steps=None):
    """One reference run; `expect` is "terminated", "truncated", or "none" for a
    run cut off after max_steps steps without the episode ending."""
    env = gym.make(env_id)
    env.reset(seed=0)
    env.unwrapped.state = np.array(start, dtype=np.float64)
    obs = observe(env)
    start_obs = obs
    actions, observations, rewards, states = [], [], [], []
    t = 0
    while True:
        a = policy(obs, t)
        obs, r, term, trunc, _ = env.step(a)
        actions.append(a)
        observations.append(np.asarray(obs, dtype=np.float32))
        rewards.append(np.float32(r))
        states.append([float(v) for v in env.unwrapped.state])
        t += 1
        if term or trunc or t == max_steps:
            break
    env.close()
    if expect == "terminated":
        assert term and not trunc, (name, t, term, trunc)
    elif expect == "truncated":
        assert trunc and not term, (name, t, term, trunc)
    else:
        assert not term and not trunc and t == max_steps, (name, t, term, trunc)
    continuous = isinstance(env.unwrapped.action_space, gym.spaces.Box)
    act = [float(np.asarray(a, dtype=np.float32).reshape(-1)[0]) if continuous else int(a) for a in actions]
    return dict(
        name=name,
        env=env_id,
        start=list(start),
        start_obs=np.asarray(start_obs, dtype=np.float32),
        continuous=continuous,
        actions=act,
        obs=np.stack(observations),
        rewards=rewards,
        states=[(i + 1, st) for i, st in enumerate(states) if (i + 1) % STATE_EVERY == 0 or i + 1 == len(states)],
        terminated=int(term),
        truncated=int(trunc),
    )


def mcc_step(start, actions, dtype=np.float64):
    """The unwrapped MountainCarContinuous state after stepping `actions` from
    `start` (float64, as run() sets it and reset() leaves it; float32, as a
    step leaves it), and whether the last step terminated, for the searches
    below."""
    env = gym.make("MountainCarContinuous-v0").unwrapped
    env.reset(seed=0)
    env.state = np.array(start, dtype=dtype)
    term = False
    for a in actions:
        _, _, term, _, _ = env.step(np.array([a], dtype=np.float32))
    return env.state, term


def bisect_up(lo, hi, f, up):
    """For up(f(x)) false below some x and true from there on: that x, to the
    last bit of lo's type (float64, or float32 for float32 bounds), in (lo, hi]."""
    for _ in range(200):
        mid = type(lo)((lo + hi) / 2)
        if mid == lo or mid == hi:
            break
        if up(f(mid)):
            hi = mid
        else:
            lo = mid
    return hi


def mcc_float32_goal_start():
    """Two actions after which the float32 position is exactly float32(0.45), a
    value below 0.45: numpy 2 compares a float32 with the Python float 0.45 in
    float32, so Gymnasium terminates there."""
    start, a1 = [0.41, 0.021], 0.0
    goal = np.float32(0.45)
    assert float(goal) < 0.45
    a2 = bisect_up(np.float32(-1.0), np.float32(1.0), lambda a: mcc_step(start, [a1, a])[0][0], lambda p: p >= goal)
    state, term = mcc_step(start, [a1, a2])
    assert state[0] == goal and term, (state, term)
    return start, [a1, float(a2)]


def mcc_float64_goal_start():
    """A float64 start whose first step ends just below 0.45 in float64, at a
    position that rounds to float32(0.45): the first step compares in float64, so
    Gymnasium goes on (and terminates on the next step)."""
    v0, a = 0.01, 0.5
    p0 = bisect_up(0.40, 0.45, lambda p: mcc_step([p, v0], [a])[1], lambda term: term)
    p0 = float(np.nextafter(p0, 0.0))  # the last start that does not terminate
    state, term = mcc_step([p0, v0], [a])
    assert state[0] == np.float32(0.45) and not term, (state, term)
    return [p0, v0], [a]


def mcc_float32_values_start():
    """A start of float32 values in a float64 state whose first step, computed
    in float64, ends elsewhere than the same values in a float32 state would
    (found by trying starts in turn)."""
    a = [0.5]
    for k in range(1000):
        start = [float(np.float32(-0.3 + 1e-4 * k)), float(np.float32(0.01))]
        if not np.array_equal(mcc_step(start, a)[0], mcc_step(start, a, np.float32)[0]):
            return start, a
    raise AssertionError("no start found")


def acrobot_start(values):
    """Acrobot's reset rounds its start state to float32; so do these."""
    return [float(np.float32(v)) for v in values]


def runs():
    rs = np.random.default_rng(20240601)
    out = []
    out.append(run("cartpole_push_right", "CartPole-v1", [0.01, -0.02, 0.03, 0.04], constant(1), "terminated"))
    out.append(run("cartpole_push_left", "CartPole-v1", list(rs.uniform(-0.05, 0.05, 4)), constant(0), "terminated"))
    out.append(run("cartpole_random", "CartPole-v1", list(rs.uniform(-0.05, 0.05, 4)), random_discrete(2, 1), "terminated"))
    out.append(run("cartpole_balance", "CartPole-v1", list(rs.uniform(-0.05, 0.05, 4)), cartpole_balance, "truncated"))
    out.append(run("acrobot_pump", "Acrobot-v1", acrobot_start(rs.uniform(-0.1, 0.1, 4)), acrobot_pump, "terminated"))
    out.append(run("acrobot_random", "Acrobot-v1", acrobot_start(rs.uniform(-0.1, 0.1, 4)), random_discrete(3, 5), "truncated"))
    # a state where numpy's scalar ** 2 (libm pow) and x * x give different
    # next states: found by searching random states, it pins the use of pow
    pow_start = [float.fromhex(h) for h in ("0x1.2976d4c308150p-3", "-0x1.582684f26aa10p-2", "-0x1.81c70e6951780p+0", "-0x1.357784640e3e8p+3")]
    rnd = random_discrete(3, 9)
    first_0 = lambda obs, t: 0 if t == 0 else rnd(obs, t)  # noqa: E731 (action 0 shows the difference)
    out.append(run("acrobot_pow_sensitive", "Acrobot-v1", pow_start, first_0, "terminated"))
    out.append(run("mountaincar_pump", "MountainCar-v0", [float(rs.uniform(-0.6, -0.4)), 0.0], mountaincar_pump, "terminated"))
    out.append(run("mountaincar_left_wall", "MountainCar-v0", [-1.1, -0.05], constant(0), "truncated"))
    out.append(run("mountaincar_idle", "MountainCar-v0", [-0.5, 0.0], constant(1), "truncated"))
    out.append(run("pendulum_random", "Pendulum-v1", [float(rs.uniform(-np.pi, np.pi)), float(rs.uniform(-1, 1))], random_torque(7), "truncated"))
    out.append(run("pendulum_spin", "Pendulum-v1", [3.0, 7.5], const_torque(2.0), "truncated"))
    mcc = "MountainCarContinuous-v0"
    out.append(run("mcc_pump", mcc, [float(rs.uniform(-0.6, -0.4)), 0.0], mountaincar_continuous_pump(1.0), "terminated"))
    out.append(run("mcc_pump_beyond_bounds", mcc, [float(rs.uniform(-0.6, -0.4)), 0.0], mountaincar_continuous_pump(1.5), "terminated"))
    out.append(run("mcc_random", mcc, [float(rs.uniform(-0.6, -0.4)), 0.0], random_torque(11), "truncated"))
    out.append(run("mcc_left_wall", mcc, [-1.1, -0.05], const_torque(-0.8), "none", max_steps=300))
    fast = [-0.9, 0.0695]  # the first step and the next one clip the velocity to 0.07
    assert mcc_step(fast, [1.0])[0][1] == np.float32(0.07) and mcc_step(fast, [1.0, 1.0])[0][1] == np.float32(0.07)
    out.append(run("mcc_past_max_speed", mcc, fast, mountaincar_continuous_pump(1.0), "terminated"))
    start, acts = mcc_float32_goal_start()
    out.append(run("mcc_goal_float32_compare", mcc, start, scripted(acts, constant(None)), "terminated"))
    start, acts = mcc_float32_values_start()
    out.append(run("mcc_float32_values_float64_state", mcc, start, scripted(acts, mountaincar_continuous_pump(1.0)), "terminated"))
    start, acts = mcc_float64_goal_start()
    out.append(run("mcc_goal_float64_first_step", mcc, start, scripted(acts, mountaincar_continuous_pump(1.0)), "terminated"))
    return out


def spec_of(env_id):
    env = gym.make(env_id)
    spec, space = env.spec, env.unwrapped.action_space
    d = dict(
        id=env_id,
        obs_dim=int(np.prod(env.observation_space.shape)),
        n_actions=int(space.n) if isinstance(space, gym.spaces.Discrete) else 0,
        act_dim=int(np.prod(space.shape)) if isinstance(space, gym.spaces.Box) else 0,
        act_low=[float(v) for v in space.low] if isinstance(space, gym.spaces.Box) else [],
        act_high=[float(v) for v in space.high] if isinstance(space, gym.spaces.Box) else [],
        max_episode_steps=int(spec.max_episode_steps),
        reward_threshold=spec.reward_threshold,
    )
    env.close()
    return d


def wrap(items, per_line, indent="    "):
    lines = []
    for i in range(0, len(items), per_line):
        lines.append(indent + ", ".join(items[i : i + per_line]) + ",")
    return "\n".join(lines)


def write_header(path, rs, specs):
    o = []
    o.append("/* env_vectors.h — reference trajectories from Gymnasium %s (numpy %s)." % (gym.__version__, np.__version__))
    o.append(" *")
    o.append(" * GENERATED by tests/gen/gen_env_vectors.py; do not edit. Each run sets the")
    o.append(" * unwrapped environment's state to `start` after a reset, then steps `actions`;")
    o.append(" * obs[t] and rewards[t] are what step t returned (rewards as float32); the last")
    o.append(" * step ended the episode with the flags given (both 0: the run was cut off),")
    o.append(" * every earlier step had both 0.")
    o.append(" * states: the unwrapped environment's float64 state after every %dth step and" % STATE_EVERY)
    o.append(" * after the last one, in hexadecimal (exact).")
    o.append(" */")
    o.append("#ifndef AGRL_TESTS_ENV_VECTORS_H")
    o.append("#define AGRL_TESTS_ENV_VECTORS_H")
    o.append("")
    o.append("#include <math.h>")
    o.append("")
    o.append("typedef struct env_ref_spec {")
    o.append("  const char *id;")
    o.append("  int obs_dim, n_actions, act_dim;")
    o.append("  float act_low[1], act_high[1];")
    o.append("  int max_episode_steps;")
    o.append("  float reward_threshold; /* NAN: none */")
    o.append("} env_ref_spec;")
    o.append("")
    o.append("typedef struct env_ref_run {")
    o.append("  const char *name, *env;")
    o.append("  double start[4];        /* the state written into env.unwrapped.state */")
    o.append("  const float *start_obs; /* obs_dim */")
    o.append("  int n_steps;")
    o.append("  const float *actions;   /* n_steps (discrete: the index) */")
    o.append("  const float *obs;       /* n_steps x obs_dim */")
    o.append("  const float *rewards;   /* n_steps */")
    o.append("  int terminated, truncated; /* of the last step */")
    o.append("  int n_states;")
    o.append("  const int *state_steps;   /* n_states step numbers (1-based) */")
    o.append("  const double *states;     /* n_states x state_dim: env.unwrapped.state after those steps */")
    o.append("} env_ref_run;")
    o.append("")
    o.append("static const env_ref_spec env_ref_specs[] = {")
    for s in specs:
        lo = f32(s["act_low"][0]) if s["act_low"] else "0"
        hi = f32(s["act_high"][0]) if s["act_high"] else "0"
        thr = "NAN" if s["reward_threshold"] is None else f32(s["reward_threshold"])
        o.append(
            '    {"%s", %d, %d, %d, {%s}, {%s}, %d, %s},'
            % (s["id"], s["obs_dim"], s["n_actions"], s["act_dim"], lo, hi, s["max_episode_steps"], thr)
        )
    o.append("};")
    o.append("")
    for r in rs:
        n = r["name"]
        acts = [f32(a) for a in r["actions"]] if r["continuous"] else [str(a) for a in r["actions"]]
        o.append("static const float %s_start_obs[] = {%s};" % (n, ", ".join(f32(v) for v in r["start_obs"])))
        o.append("static const float %s_actions[] = {\n%s\n};" % (n, wrap(acts, 12 if r["continuous"] else 30)))
        od = r["obs"].shape[1]
        o.append("static const float %s_obs[] = {\n%s\n};" % (n, wrap([f32(v) for v in r["obs"].reshape(-1)], od)))
        o.append("static const float %s_rewards[] = {\n%s\n};" % (n, wrap([f32(v) for v in r["rewards"]], 10)))
        o.append("static const int %s_state_steps[] = {\n%s\n};" % (n, wrap([str(t) for t, _ in r["states"]], 20)))
        sd = len(r["states"][0][1])
        o.append("static const double %s_states[] = {\n%s\n};" % (n, wrap([f64(v) for _, st in r["states"] for v in st], sd)))
        o.append("")
    o.append("static const env_ref_run env_ref_runs[] = {")
    for r in rs:
        n = r["name"]
        start = ", ".join(f64(v) for v in r["start"])
        o.append(
            '    {"%s", "%s", {%s}, %s_start_obs, %d, %s_actions, %s_obs, %s_rewards, %d, %d, %d, %s_state_steps, %s_states},'
            % (n, r["env"], start, n, len(r["actions"]), n, n, n, r["terminated"], r["truncated"], len(r["states"]), n, n)
        )
    o.append("};")
    o.append("")
    o.append("#endif /* AGRL_TESTS_ENV_VECTORS_H */")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(o) + "\n")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "data", "env_vectors.h")
    rs = runs()
    specs = [spec_of(i) for i in ("CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1", "MountainCarContinuous-v0")]
    write_header(os.path.normpath(path), rs, specs)
    for r in rs:
        end = "terminated" if r["terminated"] else "truncated" if r["truncated"] else "cut off"
        print("%-24s %-15s %4d steps, %s" % (r["name"], r["env"], len(r["actions"]), end))
    print("wrote", os.path.normpath(path), os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
