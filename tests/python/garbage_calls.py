"""Calls every public function and method with garbage arguments, then
every method again after the context is freed; run in a subprocess by
test_bad_input.py, so that a crash fails a test instead of the run. Any
exception is fine but SystemError (a misuse of Python's C API); prints
"done N" with N the number of SystemErrors. Run it in a scratch directory:
save() with garbage names writes files."""

import gc

import numpy as np

import agrl

GARBAGE = [None, -1, 0, 1, 2**70, -2**70, 1.5, float("nan"), float("inf"), "x", "", b"ab", object(), [], [[]], {},
           (), (1, 2), [1, [2]], np.zeros(0), np.zeros((2, 3))[:, ::2], np.zeros((3,))[::-1],
           np.zeros((2,) * 9), np.array(["a"]), np.ones(3, np.complex128), np.ones(4, np.float16), np.array(True),
           np.int64(3), np.float32(0.5), memoryview(b"\x01\x02"), bytearray(4), range(3), type, agrl]
system_errors = []


def attempt(f, *a, **k):
    try:
        f(*a, **k)
    except SystemError as e:
        system_errors.append((getattr(f, "__qualname__", f), a, k, e))
    except BaseException:
        pass


ctx = agrl.Context("cpu")
buf = agrl.Buffer(ctx, 4, 8)
u8 = agrl.Buffer(ctx, 4, 8, "u8")
rb = agrl.ReplayBuffer(ctx, 8, {"o": 4, "a": ((1,), "i32")})
rb.add(o=np.zeros((4, 4)), a=[0, 1, 0, 1])
per = agrl.ReplayBuffer(ctx, 8, {"o": 4}, prioritized=True)
per.add(o=np.zeros((4, 4)))
dqn = agrl.DQN(ctx, 4, 2, hidden=[8], batch_size=2)
sac = agrl.SAC(ctx, 3, 1, -2, 2, hidden=[8], batch_size=2, buffer_size=16)
td3 = agrl.TD3(ctx, 3, 2, [-1, -1], [1, 1], hidden=[8], batch_size=2, buffer_size=16)
env = agrl.make("cartpole")
pend = agrl.make("pendulum")
t = buf.get_rows([0, 1])
CALLS = [
    buf.write, u8.write, buf.read, buf.get_rows, buf.set_scale, ctx.set_device, agrl.Context, rb.sample, per.sample,
    dqn.act, dqn.epsilon, dqn.train, dqn.save, dqn.load, env.step, pend.step, agrl.make,
    lambda g: env.reset(seed=g),
    lambda g: agrl.Buffer(ctx, g, 4), lambda g: agrl.Buffer(ctx, 4, g), lambda g: agrl.Buffer(ctx, 4, 4, g),
    lambda g: agrl.Buffer(g, 4, 4),
    lambda g: agrl.ReplayBuffer(ctx, g, {"o": 1}), lambda g: agrl.ReplayBuffer(ctx, 4, g),
    lambda g: agrl.ReplayBuffer(ctx, 4, {"o": g}), lambda g: agrl.ReplayBuffer(ctx, 4, {"o": ((2,), g)}),
    lambda g: agrl.ReplayBuffer(ctx, 4, {"o": 1}, storage=g), lambda g: agrl.ReplayBuffer(ctx, 4, {"o": 1}, min_size=g),
    lambda g: agrl.ReplayBuffer(ctx, 4, {"o": 1}, seed=g),
    lambda g: agrl.ReplayBuffer(ctx, 4, {"o": 1}, prioritized=True, alpha=g),
    lambda g: agrl._agrl._Replay(ctx, 4, g), lambda g: agrl._agrl._Replay(ctx, 4, [g]),
    lambda g: agrl._agrl._Replay(ctx, 4, [("o", g, "f32")]),
    lambda g: agrl.DQN(ctx, g, 2), lambda g: agrl.DQN(ctx, 4, 2, hidden=g), lambda g: agrl.DQN(ctx, 4, 2, lr=g),
    lambda g: agrl.DQN(ctx, 4, 2, batch_size=g), lambda g: agrl.DQN(ctx, 4, 2, seed=g),
    lambda g: agrl._agrl._DQN(ctx, 4, 2, 10, g),
    lambda g: rb.add(o=g, a=0), lambda g: rb.add(o=np.zeros(4), a=g), lambda g: rb.add(g),
    lambda g: per.update_priorities(g, [1.0]), lambda g: per.update_priorities([0], g),
    lambda g: per.sample(2, beta=g), lambda g: setattr(per, "beta", g),
    lambda g: dqn.store(g, 0, 0.0, np.zeros(4), 0), lambda g: dqn.store(np.zeros(4), g, 0.0, np.zeros(4), 0),
    lambda g: dqn.store(np.zeros(4), 0, g, np.zeros(4), 0), lambda g: dqn.store(np.zeros(4), 0, 0.0, np.zeros(4), g),
    lambda g: dqn.act(np.zeros(4), g), lambda g: dqn.act(np.zeros(4), True, g),
    sac.act, sac.act_random, sac.train, sac.save_policy, sac.load_policy, sac.evaluate, td3.act, td3.learn,
    agrl._agrl.ac_defaults, lambda g: sac.act(np.zeros(3), g), lambda g: sac.train(1, g),
    lambda g: sac.store(g, [0.0], 0.0, np.zeros(3), 0), lambda g: sac.store(np.zeros(3), g, 0.0, np.zeros(3), 0),
    lambda g: sac.store(np.zeros(3), [0.0], g, np.zeros(3), 0), lambda g: sac.store(np.zeros(3), [0.0], 0.0, g, 0),
    lambda g: sac.store(np.zeros(3), [0.0], 0.0, np.zeros(3), g),
    lambda g: td3.store(np.zeros(3), [0.0, 0.0], 0.0, np.zeros(3), 0, g),
    lambda g: sac._evaluate(pend._env, g, 0), lambda g: sac._evaluate(pend._env, 1, g), lambda g: sac._evaluate(g, 1, 0),
    lambda g: sac.evaluate(pend, g), lambda g: sac.evaluate(pend, 1, g),
    lambda g: agrl.SAC(ctx, g, 1, -1, 1, buffer_size=16), lambda g: agrl.SAC(ctx, 3, g, -1, 1, buffer_size=16),
    lambda g: agrl.SAC(ctx, 3, 1, g, 1, buffer_size=16), lambda g: agrl.TD3(ctx, 3, 2, [-1, -1], g, buffer_size=16),
    lambda g: agrl.SAC(ctx, 3, 1, -1, 1, g, buffer_size=16), lambda g: agrl.SAC(ctx, 3, 1, -1, 1, buffer_size=g),
    lambda g: agrl.TD3(ctx, 3, 1, -1, 1, hidden=g, buffer_size=16),
    lambda g: agrl.SAC(ctx, 3, 1, -1, 1, target_entropy=g, buffer_size=16),
    lambda g: agrl.TD3(ctx, 3, 1, -1, 1, policy_delay=g, buffer_size=16),
    lambda g: agrl.SAC(ctx, 3, 1, -1, 1, autotune=g, seed=g, buffer_size=16),
    lambda g: agrl.SAC.for_env(ctx, g), lambda g: agrl._agrl._AC(ctx, g, 3, 1, [-1], [1], 10, {"hidden": [8]}),
    lambda g: agrl._agrl._AC(ctx, "td3", 3, 1, [-1], [1], 10, g), lambda g: agrl._agrl._AC(g, "sac", 3, 1, [-1], [1]),
    lambda g: t.__dlpack__(stream=g), lambda g: t.__dlpack__(max_version=g), lambda g: t.__dlpack__(dl_device=g),
    lambda g: t.__dlpack__(copy=g), lambda g: t.__array__(g), lambda g: agrl.derive_seed(g, 0),
    lambda g: buf.read(0, g), lambda g: buf.read(0, 1, g), lambda g: buf.write(np.zeros(4), g),
    lambda g: ctx.inject_fault(g, 0), lambda g: ctx.inject_fault("alloc", g),
]
for f in CALLS:
    for g in GARBAGE:
        env.reset(seed=0)
        pend.reset(seed=0)
        attempt(f, g)

# every method and property of every object once its context is freed
ctx.free()
DUNDERS = ("__len__", "__dlpack__", "__dlpack_device__", "__repr__", "__array__", "__enter__", "__exit__")
for obj in (buf, u8, rb, per, dqn, sac, td3, ctx, t):
    for name in dir(obj):
        if name.startswith("__") and name not in DUNDERS:
            continue
        try:
            attr = getattr(obj, name)
        except SystemError as e:
            system_errors.append((name, e))
            continue
        except BaseException:
            continue
        if callable(attr):
            for args in ((), (0,), (1, 2), (np.zeros(4),)):
                attempt(attr, *args)
gc.collect()
for e in system_errors:
    print("SystemError:", e)
print("done", len(system_errors))
