"""A CleanRL-style DQN on CartPole-v1 in three variants that differ only in
the replay buffer, run one after the other in one invocation: environment
steps per second of each and the ratios.

usage: python3 bench/python/bench_train.py [--device cpu|cuda] [--steps 20000] [--seed 0] [--repeats 1]
           [--env auto|agrl|gymnasium] [--buffers agrl,torchrl,sb3] [--json FILE]

The loop is CleanRL's dqn.py (one environment): epsilon-greedy acting with
a torch Q-network (4-120-84-2) on the device, one transition stored a step,
a training step every `train_frequency` steps once past `learning_starts`
(a batch of 128, TD target from the target network, MSE, Adam), a hard
target copy every `target_network_frequency` steps. CleanRL's settings
(lr 2.5e-4, buffer 10,000, gamma 0.99, target every 500 steps, epsilon 1 ->
0.05 over half the run, train every 10 steps), except learning_starts: 1,000
instead of 10,000, so that a short run spends most of its steps training.

The variants:
  agrl     agrl.ReplayBuffer on the device; add() of host values, sample()
           read by torch through torch.from_dlpack (no copy)
  torchrl  TensorDictReplayBuffer(storage=LazyTensorStorage(10000, device=D));
           add(TensorDict of the step), sample()
  sb3      stable_baselines3's ReplayBuffer(device=D) as CleanRL uses it
           (handle_timeout_termination=False)

Each variant is seeded alike (torch, numpy, random, the environment), and
timed from its first reset to its last step (acting, stepping, storing,
training); the device is synchronised at the end. --repeats N runs each
variant N times, interleaved, and reports the median rate. A short untimed warm-up
(one forward/backward on the device) comes first so that the first variant
does not pay for torch's start-up.
"""
import argparse
import json
import logging
import os
import random
import sys
import time
import warnings

import numpy as np

HP = dict(learning_rate=2.5e-4, buffer_size=10_000, gamma=0.99, tau=1.0, target_network_frequency=500,
          batch_size=128, start_e=1.0, end_e=0.05, exploration_fraction=0.5, learning_starts=1000,
          train_frequency=10)
BUFFERS = ("agrl", "torchrl", "sb3")


def linear_schedule(start_e, end_e, duration, t):
    slope = (end_e - start_e) / duration
    return max(slope * t + start_e, end_e)


def make_env(kind):
    """(env, name): gymnasium's CartPole-v1, or agrl's (same dynamics)."""
    if kind in ("auto", "gymnasium"):
        try:
            import gymnasium as gym
            return gym.make("CartPole-v1"), f"gymnasium {gym.__version__} CartPole-v1"
        except ImportError:
            if kind == "gymnasium":
                raise
    import agrl
    return agrl.make("CartPole-v1"), "agrl CartPole-v1"


# ------------------------------------------------------------- the buffers
# Each: add(obs, next_obs, action, reward, done) with host values of one step;
# sample(B) -> (obs, actions (B,1) int64, next_obs, dones (B,1) f32, rewards (B,1) f32) torch tensors on D.

class AgrlBuffer:
    def __init__(self, torch, dev, obs_dim, size, seed):
        import agrl
        self.torch = torch
        self.ctx = agrl.Context(dev)
        self.rb = agrl.ReplayBuffer(self.ctx, size, {"obs": (obs_dim,), "action": ((1,), "i32"), "reward": (1,),
                                                     "next_obs": (obs_dim,), "done": (1,)}, seed=seed)
        self.version = agrl.library_version()

    def add(self, obs, next_obs, action, reward, done):
        self.rb.add(obs=obs, next_obs=next_obs, action=action, reward=reward, done=done)

    def sample(self, b):
        f = self.torch.from_dlpack
        s = self.rb.sample(b)
        return (f(s["obs"]), f(s["action"]).long(), f(s["next_obs"]), f(s["done"]), f(s["reward"]))

    def sync(self):
        self.ctx.sync()


class TorchRLBuffer:
    def __init__(self, torch, dev, obs_dim, size, seed):
        logging.getLogger("torchrl").setLevel(logging.WARNING)
        import torchrl
        from tensordict import TensorDict
        from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer
        logging.getLogger("torchrl").setLevel(logging.WARNING)  # its import sets INFO
        self.torch, self.TD = torch, TensorDict
        self.rb = TensorDictReplayBuffer(storage=LazyTensorStorage(size, device=torch.device(dev)))
        self.version = torchrl.__version__

    def add(self, obs, next_obs, action, reward, done):
        t = self.torch
        self.rb.add(self.TD({"obs": t.as_tensor(obs), "next_obs": t.as_tensor(next_obs),
                             "action": t.tensor([action], dtype=t.int64), "reward": t.tensor([reward], dtype=t.float32),
                             "done": t.tensor([done], dtype=t.float32)}, batch_size=[]))

    def sample(self, b):
        s = self.rb.sample(b)
        return s["obs"], s["action"], s["next_obs"], s["done"], s["reward"]

    def sync(self):
        pass


class SB3Buffer:
    def __init__(self, torch, dev, obs_dim, size, seed):
        import stable_baselines3
        from gymnasium import spaces
        from stable_baselines3.common.buffers import ReplayBuffer
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.rb = ReplayBuffer(size, spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32), spaces.Discrete(2),
                                   device=dev, handle_timeout_termination=False)
        self.version = stable_baselines3.__version__

    def add(self, obs, next_obs, action, reward, done):
        self.rb.add(obs, next_obs, np.array([action]), np.array([reward]), np.array([done]), [{}])

    def sample(self, b):
        s = self.rb.sample(b)
        return s.observations, s.actions, s.next_observations, s.dones, s.rewards

    def sync(self):
        pass


MAKERS = {"agrl": AgrlBuffer, "torchrl": TorchRLBuffer, "sb3": SB3Buffer}


# --------------------------------------------------------------- the loop

def qnet(torch, obs_dim, n_actions):
    nn = torch.nn
    return nn.Sequential(nn.Linear(obs_dim, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, n_actions))


def train(torch, name, dev, steps, seed, env_kind):
    """One CleanRL DQN run with buffer `name`; returns a result dict."""
    F = torch.nn.functional
    hp = HP
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    env, env_name = make_env(env_kind)
    obs_dim, n_actions = env.observation_space.shape[0], env.action_space.n
    env.action_space.seed(seed)
    device = torch.device(dev)
    q_network = qnet(torch, obs_dim, n_actions).to(device)
    optimizer = torch.optim.Adam(q_network.parameters(), lr=hp["learning_rate"])
    target_network = qnet(torch, obs_dim, n_actions).to(device)
    target_network.load_state_dict(q_network.state_dict())
    rb = MAKERS[name](torch, dev, obs_dim, hp["buffer_size"], seed)
    returns, ep_ret, updates, loss_v = [], 0.0, 0, float("nan")
    sync = (lambda: torch.cuda.synchronize()) if dev == "cuda" else (lambda: None)
    sync()
    t0 = time.perf_counter()
    obs, _ = env.reset(seed=seed)
    for global_step in range(steps):
        epsilon = linear_schedule(hp["start_e"], hp["end_e"], hp["exploration_fraction"] * steps, global_step)
        if random.random() < epsilon:
            action = int(env.action_space.sample())
        else:
            q_values = q_network(torch.as_tensor(np.asarray(obs, np.float32), device=device))
            action = int(torch.argmax(q_values).item())
        next_obs, reward, terminated, truncated, _ = env.step(action)
        ep_ret += float(reward)
        rb.add(np.asarray(obs, np.float32), np.asarray(next_obs, np.float32), action, float(reward),
               float(terminated))
        if terminated or truncated:
            returns.append(ep_ret)
            ep_ret = 0.0
            obs, _ = env.reset()
        else:
            obs = next_obs
        if global_step > hp["learning_starts"]:
            if global_step % hp["train_frequency"] == 0:
                b_obs, b_act, b_next, b_done, b_rew = rb.sample(hp["batch_size"])
                with torch.no_grad():
                    target_max, _ = target_network(b_next).max(dim=1)
                    td_target = b_rew.flatten() + hp["gamma"] * target_max * (1 - b_done.flatten())
                old_val = q_network(b_obs).gather(1, b_act).squeeze()
                loss = F.mse_loss(td_target, old_val)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                updates += 1
                if updates % 100 == 0:
                    loss_v = loss.detach()
            if global_step % hp["target_network_frequency"] == 0:
                for tp, qp in zip(target_network.parameters(), q_network.parameters()):
                    tp.data.copy_(hp["tau"] * qp.data + (1.0 - hp["tau"]) * tp.data)
    rb.sync()
    sync()
    dt = time.perf_counter() - t0
    last = returns[-20:]
    return {"buffer": name, "version": rb.version, "env": env_name, "device": dev, "steps": steps,
            "seconds": round(dt, 3), "steps_per_s": round(steps / dt, 1), "updates": updates,
            "episodes": len(returns), "final_mean_return_20": round(sum(last) / len(last), 2) if last else None,
            "last_loss": float(loss_v)}


def warm_up(torch, dev):
    """torch's first device work (context, kernels, cuBLAS, Adam) outside every timed run."""
    net = qnet(torch, 4, 2).to(dev)
    opt = torch.optim.Adam(net.parameters())
    x = torch.randn(128, 4, device=dev)
    for _ in range(3):
        loss = net(x).max(dim=1)[0].mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    net(x[0]).argmax().item()
    if dev == "cuda":
        torch.cuda.synchronize()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default=None, help="cuda when torch sees a GPU, else cpu")
    ap.add_argument("--steps", type=int, default=20_000, help="environment steps a variant (20,000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--env", choices=("auto", "agrl", "gymnasium"), default="auto",
                    help="auto: gymnasium's CartPole-v1 when it imports, else agrl's")
    ap.add_argument("--buffers", default=",".join(BUFFERS), help=f"comma-separated, of: {', '.join(BUFFERS)}")
    ap.add_argument("--repeats", type=int, default=1,
                    help="runs of each variant, interleaved (a, b, c, a, b, c, ...); the median rate is reported")
    ap.add_argument("--learning-starts", type=int, default=HP["learning_starts"])
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    names = [b.strip() for b in args.buffers.split(",") if b.strip()]
    bad = [b for b in names if b not in BUFFERS]
    if bad or args.steps < 1 or args.repeats < 1:
        ap.error(f"unknown buffers: {', '.join(bad)}" if bad else "--steps and --repeats must be at least 1")
    HP["learning_starts"] = args.learning_starts
    try:
        import torch
    except ImportError as e:
        print(f"bench_train: torch does not import ({e}); every variant needs it", file=sys.stderr)
        return 2
    dev = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if dev == "cuda" and not torch.cuda.is_available():
        print("bench_train: torch sees no CUDA device", file=sys.stderr)
        return 2
    warm_up(torch, dev)
    runs, absent = {n: [] for n in names}, []
    for rep in range(args.repeats):
        for name in names:
            if any(a["buffer"] == name for a in absent):
                continue
            print(f"[{name}] {args.steps} steps on {dev}" + (f", run {rep + 1}" if args.repeats > 1 else ""),
                  flush=True)
            try:
                r = train(torch, name, dev, args.steps, args.seed, args.env)
            except ImportError as e:
                absent.append({"buffer": name, "why": f"not installed: {type(e).__name__}: {e}"})
                print(f"  not installed: {e}")
                continue
            except Exception as e:
                absent.append({"buffer": name, "why": f"failed: {type(e).__name__}: {e}"[:500]})
                print(f"  failed: {type(e).__name__}: {e}")
                continue
            runs[name].append(r)
            print(f"  {r['steps_per_s']:.0f} steps/s ({r['seconds']:.1f} s, {r['updates']} updates, "
                  f"{r['episodes']} episodes, mean return of the last 20 {r['final_mean_return_20']})", flush=True)
    results = []
    for name in names:
        if runs[name]:  # the run of median rate (the same seed: the same returns every time)
            rs = sorted(runs[name], key=lambda r: r["steps_per_s"])
            r = dict(rs[len(rs) // 2])
            r["steps_per_s_all"] = [x["steps_per_s"] for x in runs[name]]
            results.append(r)

    env_name = results[0]["env"] if results else "?"
    print(f"\nCleanRL DQN on {env_name}, {args.steps} steps, device {dev}, torch {torch.__version__}; "
          "the variants differ only in the replay buffer")
    base = next((r for r in results if r["buffer"] == "agrl"), None)
    print(f"{'buffer':10} {'version':24} {'steps/s':>9} {'seconds':>8} {'updates':>8} {'return20':>9} {'agrl/this':>10}")
    for r in results:
        ratio = f"{base['steps_per_s'] / r['steps_per_s']:9.2f}x" if base else f"{'-':>10}"
        every = r["steps_per_s_all"]
        print(f"{r['buffer']:10} {r['version']:24} {r['steps_per_s']:9.0f} {r['seconds']:8.2f} {r['updates']:8d} "
              f"{str(r['final_mean_return_20']):>9} {ratio}"
              + (f"  (runs: {', '.join(f'{x:.0f}' for x in every)})" if len(every) > 1 else ""))
    for a in absent:
        print(f"{a['buffer']}: {a['why']}")
    if args.json:
        with open(args.json + ".tmp", "w") as fh:
            json.dump({"work": "train_cartpole_cleanrl_dqn", "device": dev, "steps": args.steps, "seed": args.seed,
                       "hyperparameters": HP, "results": results, "absent": absent,
                       "torch": torch.__version__}, fh, indent=1)
        os.replace(args.json + ".tmp", args.json)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
