"""agrl's DQN learning an Atari game from pixels (the Nature DQN).

usage: python3 examples/python/train_atari.py [--env ALE/Pong-v5] [--steps 2500000] [--seed 1]
           [--dir runs/pong-1] [--resume] [--device auto|cpu|cuda] [--buffer-size 1000000] [--help]

Needs ale-py, gymnasium and OpenCV (pip install ale-py "gymnasium[other]").
The environment is ale-py's game made with frameskip=1 (v5's sticky
actions, repeat_action_probability=0.25, stay) inside Gymnasium's
AtariPreprocessing (frame_skip=4, screen_size=84, grayscale_obs=True,
noop_max=30): 84 x 84 uint8 frames. The agent is agrl.DQN with a frame
table (frame_stack=4): each step's frame is stored once as uint8 on the
device and the stacks of a batch are rebuilt there, so a buffer of a
million transitions takes 7.1 GB instead of the 113 GB of f32 stacks.

Defaults (the Nature DQN's network and schedule, Mnih et al. 2015, with
Adam as in most of today's reproductions):
  - conv 32 8x8 stride 4, 64 4x4 stride 2, 64 3x3 stride 1, then 512, ReLU;
  - Adam at lr 1e-4, batches of 32, a buffer of 1,000,000 transitions;
  - a training step every 4 environment steps, from step 80,000;
  - the target copied every 1,000 updates (agrl counts environment steps:
    target_update_interval = 4,000);
  - epsilon from 1 to 0.01 over the first 10% of --steps;
  - one-step targets, Huber loss, gradients clipped at norm 10, Double DQN
    (agrl's default; it only changes which action the target values);
    gamma 0.99; rewards as the game gives them (Pong's are -1, 0, 1).
The run keeps its checkpoint in DIR/agent.agrl (networks, Adam, the frame
table, the random streams, the loop's counters), every --checkpoint-every
steps and at the end; --resume continues from it on a new episode (ale-py's
state is not saved, so the episode in progress is dropped). At the end the
policy plays --eval-episodes episodes epsilon-greedy at 0.05 on episodes
seeded from --seed, and their mean return is printed.

A quick smoke run on the CPU (minutes; it learns nothing yet):
  python3 examples/python/train_atari.py --steps 4000 --buffer-size 20000 --learning-starts 1000 \\
      --checkpoint-every 2000 --eval-episodes 1 --dir /tmp/pong-smoke
"""
import argparse
import os
import sys
import time
from typing import Any, Dict, List

import numpy as np

import agrl


def make_env(name: str, gym: Any) -> Any:
    env = gym.make(name, frameskip=1)
    return gym.wrappers.AtariPreprocessing(env, frame_skip=4, screen_size=84, grayscale_obs=True, noop_max=30)


def evaluate(dqn: agrl.DQN, env: Any, episodes: int, seed: int, epsilon: float) -> List[float]:
    """Episodes k = 0.. seeded with derive_seed(seed, k), epsilon-greedy at
    `epsilon` from a generator of that seed too: the same episodes and draws
    for the same network."""
    st = dqn.frame_stack_of()
    returns = []
    for k in range(episodes):
        s = agrl.derive_seed(seed, k)
        rng = np.random.default_rng(s)
        obs, _ = env.reset(seed=s)
        st.reset(st.frame(obs, "evaluate"))
        ret, done = 0.0, False
        while not done:
            if rng.random() < epsilon:
                action = int(rng.integers(dqn.n_actions))
            else:
                action = int(dqn.act_u8(st.obs(), False))
            obs, r, term, trunc, _ = env.step(action)
            st.push(st.frame(obs, "evaluate"))
            ret += float(r)
            done = term or trunc
        returns.append(ret)
    return returns


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--env", default="ALE/Pong-v5", help="an ale-py game id (ALE/Pong-v5)")
    ap.add_argument("--steps", type=int, default=2_500_000, help="environment steps (2,500,000: 10M frames)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dir", default=None, help="where the checkpoint goes (default runs/<game>-<seed>)")
    ap.add_argument("--resume", action="store_true", help="continue the run of DIR/agent.agrl")
    ap.add_argument("--device", default="auto", help="auto (the GPU when there is one), cpu, cuda, cuda:N")
    ap.add_argument("--buffer-size", type=int, default=1_000_000, help="transitions kept (1,000,000: 7.1 GB)")
    ap.add_argument("--learning-starts", type=int, default=80_000)
    ap.add_argument("--checkpoint-every", type=int, default=250_000, help="environment steps between checkpoints")
    ap.add_argument("--eval-episodes", type=int, default=10)
    args = ap.parse_args()
    if args.steps < 1 or args.seed < 0 or args.buffer_size < 32 or args.learning_starts < 0:
        ap.error("--steps >= 1, --seed >= 0, --buffer-size >= 32 and --learning-starts >= 0")
    if args.checkpoint_every < 0 or args.eval_episodes < 0:
        ap.error("--checkpoint-every and --eval-episodes must be >= 0")
    try:
        import ale_py
        import gymnasium as gym
    except ImportError as e:
        print(f"train_atari: {e} (pip install ale-py \"gymnasium[other]\")", file=sys.stderr)
        return 2
    gym.register_envs(ale_py)
    try:
        env = make_env(args.env, gym)
    except gym.error.DependencyNotInstalled as e:  # AtariPreprocessing's OpenCV
        print(f"train_atari: {e}", file=sys.stderr)
        return 2
    run_dir = args.dir or os.path.join("runs", f"{args.env.split('/')[-1].split('-')[0].lower()}-{args.seed}")
    os.makedirs(run_dir, exist_ok=True)
    path = os.path.join(run_dir, "agent.agrl")
    ctx = agrl.Context(args.device)
    if args.resume:
        dqn = agrl.DQN.load(ctx, path)
        print(f"resuming the run of {path} ({dqn.updates} updates so far) on a new episode")
    else:
        dqn = agrl.DQN.for_env(
            ctx, env, total_steps=args.steps, seed=args.seed, frame_stack=4,
            conv=[(32, 8, 4), (64, 4, 2), (64, 3, 1)], hidden=[512], lr=1e-4, batch_size=32,
            buffer_size=args.buffer_size, learning_starts=args.learning_starts, train_freq=4, gradient_steps=1,
            target_update_interval=4000, exploration_fraction=0.1, eps_start=1.0, eps_end=0.01, n_step=1,
            gamma=0.99, max_grad_norm=10.0, double_dqn=True, huber=True)
    print(f"{args.env} (ale-py {ale_py.__version__}, gymnasium {gym.__version__}) on {ctx.device_name}: "
          f"{args.steps} steps, seed {args.seed}, buffer {dqn.config['buffer_size']}, checkpoint {path}",
          flush=True)

    t0 = time.perf_counter()
    state: Dict[str, float] = {"next": 0.0, "loss": float("nan")}

    def progress(ev: Dict[str, Any]) -> bool:
        if ev["kind"] == "phase":
            state["loss"] = ev["loss"]
        if ev["kind"] == "episode" and ev["step"] >= state["next"]:
            state["next"] = ev["step"] + max(args.steps / 100, 1)
            dt = time.perf_counter() - t0
            print(f"  step {ev['step']:8d}  episodes {ev['episodes']:5d}  return {ev['return']:6.1f}  mean (last 20) "
                  f"{ev['mean_return']:6.1f}  epsilon {ev['epsilon']:.3f}  updates {ev['updates']:7d}  loss "
                  f"{state['loss']:.4f}  {dt:7.0f} s", flush=True)
        return False

    result = dqn.learn(env, args.steps, progress, resume="new_episode" if args.resume else False,
                       checkpoint=path, checkpoint_every=args.checkpoint_every)
    dt = time.perf_counter() - t0
    last = result["returns"][-20:]
    print(f"trained to step {result['steps']}: {dqn.updates} updates in {dt:.0f} s; mean return of the last "
          f"{len(last)} episodes {sum(last) / len(last) if last else float('nan'):.1f}; checkpoint {path}")
    if args.eval_episodes:
        eval_env = make_env(args.env, gym)
        rets = evaluate(dqn, eval_env, args.eval_episodes, agrl.derive_seed(args.seed, 0xE7A15EED), 0.05)
        print(f"evaluation, epsilon 0.05, {len(rets)} episodes: mean return {sum(rets) / len(rets):.1f} "
              f"({', '.join(f'{r:g}' for r in rets)})")
        eval_env.close()
    env.close()
    ctx.free()
    return 0


if __name__ == "__main__":
    sys.exit(main())
