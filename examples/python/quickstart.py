"""A prioritized replay table on the device, a batch, and a DQN on CartPole.
usage: python3 examples/python/quickstart.py [cpu|cuda|vulkan]   (after pip install .)"""
import sys

import numpy as np

import agrl

ctx = agrl.Context(sys.argv[1] if len(sys.argv) > 1 else "auto")  # the GPU when there is one
rb = agrl.ReplayBuffer(ctx, 100_000, {
    "obs": ((4,), "f32"), "action": ((), "i64"), "reward": ((1,), "f32"),
    "next_obs": ((4,), "f32"), "done": ((1,), "f32")}, prioritized=True)
obs = np.random.default_rng(0).standard_normal((64, 4), dtype=np.float32)
rb.add(obs=obs, action=np.arange(64), reward=np.ones((64, 1), np.float32),
       next_obs=obs, done=np.zeros((64, 1), np.float32))  # a batch of 64, one copy up
batch = rb.sample(32)  # agrl.Tensors on the device (DLPack); "indices" int64, "weights" f32
idx = batch["indices"].numpy()
assert (batch["obs"].numpy() == obs[idx]).all() and (batch["action"].numpy() == idx).all()
rb.update_priorities(idx, np.full(32, 2.0, np.float32))
dqn = agrl.DQN.for_env(ctx, agrl.make("CartPole-v1"), 3000, seed=0)
dqn.learn(agrl.make("CartPole-v1"), 3000)  # agrl's environments are gymnasium.Env
print(f"{ctx}: {len(rb)} transitions, batch of {len(idx)} checked; DQN: {dqn.evaluate(agrl.make('CartPole-v1'), 3)[0]:.1f}")
