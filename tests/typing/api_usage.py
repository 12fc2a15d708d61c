"""Every public call of agrl's Python package, in annotated user code.

A small program that uses the whole API as a user would: a context and its
counters, a raw buffer and its tensors, a replay table fed by hand, a frame
table of pixel observations, DQN on CartPole-v1, SAC and TD3 on Pendulum-v1,
the built-in environments, and the adapters for PyTorch, JAX,
Stable-Baselines3 and TorchRL.

``mypy --strict`` checks it against the package's annotations and the
extension's stub (scripts/python_test.sh), so a call whose types drift fails
there; tests/python/test_api_usage.py runs it on the CPU, the framework parts
only where those frameworks can be imported.

usage: python3 tests/typing/api_usage.py [PART ...]   (core, torch, jax, sb3, torchrl; default all)
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
from numpy.typing import NDArray

import agrl
import agrl.envs
from agrl.ac import ACConfig, ACOptions
from agrl.dqn import DQNConfig, DQNOptions
from agrl.replay import FieldSpec

OBS_DIM = 4  # CartPole-v1's observations
#: a DQN transition as a table of one's own holds it
FIELDS: Dict[str, FieldSpec] = {
    "obs": (OBS_DIM,),
    "action": ((1,), "i32"),
    "reward": 1,
    "next_obs": (OBS_DIM,),
    "done": 1,
}
# small networks and early updates: every call runs, in a moment
DQN_SMALL: DQNOptions = {"hidden": (32, 32), "batch_size": 32, "learning_starts": 64, "train_freq": 16,
                         "gradient_steps": 2, "target_update_interval": 100, "seed": 5}
AC_SMALL: ACOptions = {"hidden": (32, 32), "batch_size": 32, "learning_starts": 64, "seed": 2}


def transitions(rng: np.random.Generator, n: int) -> Dict[str, NDArray[Any]]:
    """n made-up CartPole transitions, one array a field."""
    return {
        "obs": rng.standard_normal((n, OBS_DIM)).astype(np.float32),
        "action": rng.integers(0, 2, (n, 1)).astype(np.int32),
        "reward": np.ones((n, 1), np.float32),
        "next_obs": rng.standard_normal((n, OBS_DIM)).astype(np.float32),
        "done": (rng.random((n, 1)) < 0.05).astype(np.float32),
    }


# ---- the module, the context, buffers and tensors ----

def versions() -> str:
    seeds: List[int] = [agrl.derive_seed(7, k) for k in range(3)]
    assert len(set(seeds)) == 3
    return (f"agrl {agrl.__version__} ({agrl.library_version()}), {agrl.cuda_device_count()} CUDA and "
            f"{agrl.vulkan_device_count()} Vulkan devices")


def context_calls(ctx: agrl.Context) -> None:
    device: str = ctx.device
    name: str = ctx.device_name
    stream: Optional[int] = ctx.stream  # None on the CPU
    assert device == "cpu" and name and stream is None and not ctx.closed
    free_bytes, total_bytes = ctx.mem_info()
    assert 0 <= free_bytes <= total_bytes
    ctx.reset_transfers()
    with agrl.Buffer(ctx, 2, 4) as scratch:
        scratch.write(np.zeros((4, 2), np.float32))
    per_op: Dict[str, Dict[str, int]] = ctx.transfers()
    up, down = ctx.transfer_totals()
    assert up >= 32 and down >= 0 and all(v["up_calls"] >= 0 for v in per_op.values())
    stats: Dict[str, int] = ctx.stats()
    assert stats["allocs"] >= stats["frees"]
    ctx.sync()
    ctx.reset()  # the workspace's temporaries
    ctx.set_device("cpu")  # tables move with their context (here: nowhere)
    ctx.stream_wait(0)  # the legacy default stream waits for the context's work
    ctx.wait_stream(0)  # and the context for that stream's


def buffer_calls(ctx: agrl.Context, rng: np.random.Generator) -> None:
    values = rng.standard_normal((8, 3)).astype(np.float32)
    with agrl.Buffer(ctx, 3, 8, "f32") as buf:
        assert (buf.rows, buf.capacity, buf.dtype, buf.where) == (3, 8, "f32", "host")
        buf.write(values)
        buf.write(values[:2], col_offset=6)
        buf.wait()
        whole: NDArray[Any] = buf.read()
        tail = buf.read(6, 2, "f32")
        assert np.array_equal(whole[6:], tail)
        generation: int = buf.generation
        buf.set_scale(2.0)
        assert buf.scale == 2.0 and generation >= 0
        rows: agrl.Tensor = buf.get_rows([0, 5, 5])
        tensor_calls(rows, 2 * values[[0, 5, 5]])
        ctx.inject_fault("download", 0)  # the next device-to-host copy fails
        try:
            buf.read()
        except agrl.DeviceError as e:
            assert e.status == "AG_ERR_DEVICE"
        else:
            raise AssertionError("the injected fault did not fail the read")


def tensor_calls(t: agrl.Tensor, want: NDArray[np.float32]) -> None:
    shape: Tuple[int, ...] = t.shape
    assert shape == want.shape and len(t) == want.shape[0]
    assert t.dtype == "f32" and t.device == "cpu" and t.strides == (3, 1) and t.data_ptr != 0
    assert t.__dlpack_device__() == (1, 0)  # kDLCPU, device 0
    shared: NDArray[Any] = np.from_dlpack(t)  # the tensor's memory, no copy
    copied: NDArray[Any] = t.numpy()
    as_array = np.asarray(t, dtype=np.float64)  # __array__
    nested: List[Any] = t.tolist()
    assert np.allclose(shared, want) and np.array_equal(shared, copied) and as_array.dtype == np.float64
    assert nested == copied.tolist()
    capsule = t.__dlpack__()  # what a framework's from_dlpack takes
    assert capsule is not None


def errors(ctx: agrl.Context) -> None:
    """Each failure raises the subclass of agrl.Error of its status, which
    also derives from the builtin exception of its kind."""
    caught: List[str] = []
    attempts: List[Tuple[type[agrl.Error], Callable[[], object]]] = [
        (agrl.InvalidArgError, lambda: ctx.set_device("tpu")),
        (agrl.ShapeError, lambda: agrl.ReplayBuffer(ctx, 4, {"x": 2}).add(x=[1.0, 2.0, 3.0])),
        (agrl.OutOfRangeError, lambda: agrl.make("CartPole-v1").step(5)),
        (agrl.UnsupportedError, lambda: agrl.Env("CartPole-v1", render_mode="human")),
        (agrl.IoError, lambda: agrl.ReplayBuffer.load(ctx, "/nonexistent/table.agrl")),
    ]
    for kind, call in attempts:
        try:
            call()
        except kind as e:
            caught.append(e.status)
    assert len(caught) == len(attempts), caught
    dead = agrl.ReplayBuffer(ctx, 4, {"x": 1})
    dead.free()
    try:
        len(dead)
    except agrl.FreedError as e:
        caught.append(e.status)
    kinds: List[type[agrl.Error]] = [agrl.NoDeviceError, agrl.OutOfMemoryError, agrl.StateError,
                                     agrl.InvalidatedError, agrl.TimeoutError]
    assert all(issubclass(k, agrl.Error) for k in kinds)
    assert issubclass(agrl.OutOfMemoryError, MemoryError) and issubclass(agrl.TimeoutError, TimeoutError)
    assert issubclass(agrl.OutOfRangeError, IndexError) and issubclass(agrl.IoError, OSError)


# ---- a replay table ----

def replay_calls(ctx: agrl.Context, rng: np.random.Generator, tmp: Path) -> None:
    with agrl.ReplayBuffer(ctx, 64, FIELDS, prioritized=True, alpha=0.6, beta=0.4, seed=1) as rb:
        one = transitions(rng, 1)
        rb.add(obs=one["obs"][0], action=1, reward=1.0, next_obs=one["next_obs"][0], done=0.0)  # one
        rb.add(transitions(rng, 40))  # a batch, as a dict
        assert (len(rb), rb.position, rb.capacity) == (41, 41, 64)
        assert rb.prioritized and rb.alpha is not None and rb.rows == 2 * OBS_DIM + 3
        rb.beta = 0.5
        shapes: Dict[str, Tuple[Tuple[int, ...], str]] = rb.fields
        assert shapes["action"] == ((1,), "i32")

        batch: Dict[str, agrl.Tensor] = rb.sample(16)
        obs: NDArray[Any] = np.from_dlpack(batch["obs"])
        indices = np.from_dlpack(batch["indices"])
        weights = np.from_dlpack(batch["weights"])
        assert obs.shape == (16, OBS_DIM) and indices.dtype == np.int64 and weights.max() <= 1.0

        # into arrays of one's own: the same dict comes back, filled
        out: Dict[str, NDArray[Any]] = {name: np.empty((16, *shape), np.int32 if dtype == "i32" else np.float32)
                                        for name, (shape, dtype) in rb.fields.items()}
        out["indices"] = np.empty(16, np.int64)
        filled: Dict[str, NDArray[Any]] = rb.sample(16, beta=0.6, out=out)
        assert filled is out

        rows = rb.gather(indices[:4])
        assert np.array_equal(np.from_dlpack(rows["obs"]), obs[:4])
        mine = rb.gather(indices[:16], out={k: v for k, v in out.items() if k != "indices"})
        assert mine["obs"].shape == (16, OBS_DIM)

        td_errors = np.abs(rng.standard_normal(16)).astype(np.float32)
        rb.update_priorities(indices, td_errors + 1e-3)
        mass: float = rb.total_priority()
        assert mass > 0

        path = tmp / "table.agrl"
        rb.save(path)
    again = agrl.ReplayBuffer.load(ctx, path, fields=FIELDS, seed=2)
    assert len(again) == 41 and again.fields["obs"] == ((OBS_DIM,), "f32") and "41/64" in repr(again)
    again.free()


def frame_calls(ctx: agrl.Context, rng: np.random.Generator, tmp: Path) -> None:
    """A frame table: 8 x 8 grey frames, stacks of 4, two copies."""
    fields: Dict[str, FieldSpec] = {"action": ((), "i64"), "reward": ((), "f32"), "terminated": ((), "u8"),
                                    "truncated": ((), "u8")}
    with agrl.FrameReplayBuffer(ctx, 256, 8, 8, 1, stack=4, n_envs=2, fields=fields, seed=1) as fb:
        n = 2 * 30  # 30 steps of the two copies, step by step
        first = np.zeros(n, dtype=bool)
        first[:2] = True
        fb.add(rng.integers(0, 256, (n, 8, 8), dtype=np.uint8), first, action=rng.integers(0, 4, n),
               reward=np.ones(n, np.float32), terminated=np.zeros(n, np.uint8), truncated=np.zeros(n, np.uint8))
        assert (fb.size, fb.position, fb.count, len(fb)) == (60, 60, 58, 58)
        assert fb.obs_shape == (4, 8, 8) and fb.sampleable(0) and not fb.sampleable(59)
        batch: Dict[str, agrl.Tensor] = fb.sample(16, "f32")
        obs: NDArray[Any] = np.from_dlpack(batch["obs"])
        assert obs.shape == (16, 4, 8, 8) and obs.dtype == np.float32
        idx = np.from_dlpack(batch["indices"])
        rows = fb.gather(idx[:4])
        assert np.array_equal(np.from_dlpack(rows["obs"]), (obs[:4] * 255).round().astype(np.uint8))
        target = fb.nstep(idx, 3, 0.99)
        assert np.from_dlpack(target["discount"]).shape == (16,)
        kept: Dict[str, NDArray[Any]] = {"obs": np.empty((16, 4, 8, 8), np.uint8),
                                         "next_obs": np.empty((16, 4, 8, 8), np.uint8),
                                         "action": np.empty(16, np.int64), "reward": np.empty(16, np.float32),
                                         "terminated": np.empty(16, np.uint8), "truncated": np.empty(16, np.uint8)}
        assert fb.sample(16, out=kept) is kept  # written in place
        path = tmp / "frames.agrl"
        fb.save(path)
    again = agrl.FrameReplayBuffer.load(ctx, path, fields=fields)
    assert again.count == 58 and again.fields["reward"] == ((), "f32") and "stack 4" in repr(again)
    again.free()


# ---- the built-in environments ----

def env_calls() -> None:
    env: agrl.Env = agrl.make("CartPole-v1")
    assert env.spec.id == "CartPole-v1" and env.spec.max_episode_steps == 500
    space = env.action_space
    assert isinstance(space, agrl.Discrete) and int(space.n) == 2
    obs_space: agrl.Box[np.float32] = env.observation_space
    assert obs_space.shape == (OBS_DIM,)
    obs, info = env.reset(seed=3)
    assert obs.dtype == np.float32 and info == {}
    state: bytes = env.get_state()
    after: List[float] = []
    for _ in range(5):
        next_obs, reward, terminated, truncated, _ = env.step(int(space.sample()))
        after.append(reward)
        if terminated or truncated:
            break
    env.set_state(state)  # back to where get_state() was: the same episode again
    replay, *_ = env.step(0)
    env.set_state(state)
    assert np.array_equal(replay, env.step(0)[0])
    env.render()  # nothing: agrl's environments do not render
    start = agrl.envs.evaluation_start(env, 12345, 0)  # what evaluate()'s episode 0 starts from
    assert np.asarray(start).shape == (OBS_DIM,)
    env.close()

    # the spaces agrl.envs uses when gymnasium is not installed (Gymnasium's interface)
    fallback_box = agrl.envs.FallbackBox(-1.0, 1.0, (2,), seed=0)
    fallback_discrete = agrl.envs.FallbackDiscrete(3, seed=0)
    assert fallback_box.sample() in fallback_box and fallback_box.is_bounded()
    assert int(fallback_discrete.sample()) in range(3) and fallback_discrete.contains(2)
    spec = agrl.envs.FallbackEnvSpec("CartPole-v1", max_episode_steps=500, kwargs={"name": "CartPole-v1"})
    assert spec.make().spec.id == "CartPole-v1"

    pendulum = agrl.make("pendulum")
    box = pendulum.action_space
    assert isinstance(box, agrl.Box) and box.shape == (1,) and float(box.high[0]) == 2.0
    pendulum.reset(seed=0)
    pendulum.step(np.array([0.5], np.float32))


# ---- DQN ----

def dqn_calls(ctx: agrl.Context, tmp: Path) -> None:
    env = agrl.make("CartPole-v1")
    defaults: DQNConfig = agrl.DQN.defaults()
    assert defaults["n_envs"] == 1 and isinstance(defaults["hidden"], tuple)
    with agrl.DQN.for_env(ctx, env, total_steps=2_000, **DQN_SMALL) as dqn:
        config: DQNConfig = dqn.config
        assert config["batch_size"] == 32 and (dqn.obs_dim, dqn.n_actions) == (OBS_DIM, 2)

        # a loop of one's own: act, step, store, train, target updates
        obs, _ = env.reset(seed=1)
        losses: List[float] = []
        for step in range(200):
            action = int(dqn.act(obs, True, step))  # an int for one observation
            next_obs, reward, terminated, truncated, _ = env.step(action)
            dqn.store(obs, action, reward, next_obs, terminated, truncated)
            obs = env.reset()[0] if terminated or truncated else next_obs
            if step >= 64 and step % 16 == 0:
                loss: Optional[float] = dqn.train(2)
                if loss is not None:
                    losses.append(loss)
                dqn.train(1, loss=False)  # None: no loss read back
            if step % 100 == 0:
                dqn.update_target()
        greedy = dqn.act(np.stack([obs, obs]), explore=False)  # an int32 array for a batch
        assert greedy.shape == (2,) and losses and dqn.stored == 200 and dqn.updates > 0
        eps: float = dqn.epsilon(100)
        assert 0.0 <= eps <= 1.0 and isinstance(dqn.fused, bool)

        def on_event(event: Dict[str, Any]) -> bool:
            """learn()'s callback: episodes, training phases, evaluations."""
            return bool(event["kind"] == "eval" and event["mean"] >= 500.0)  # stop once perfect

        result = dqn.learn(env, 400, on_event, checkpoint=tmp / "dqn.agrl", checkpoint_every=200,
                           eval_env=agrl.make("CartPole-v1"), eval_every=200, eval_episodes=2)
        steps: int = result["steps"]
        returns: List[float] = result["returns"]
        assert steps == 400 and all(r > 0 for r in returns) and len(result["evals"]) == 2
        mean, each = dqn.evaluate(env, episodes=2, seed=9)
        assert len(each) == 2 and mean == sum(each) / 2

        dqn.save(tmp / "dqn_whole.agrl")
        dqn.save_policy(tmp / "q.agrl")
    with agrl.DQN.load(ctx, tmp / "dqn.agrl") as resumed:  # the checkpoint: learn goes on from there
        more = resumed.learn(env, 500, resume=True)
        assert more["steps"] == 500
    fresh = agrl.DQN(ctx, OBS_DIM, 2, total_steps=1_000, hidden=[32, 32], per=True, per_alpha=0.5)
    fresh.set_beta(fresh.per_beta(500))  # prioritized replay's beta, annealed as learn anneals it
    fresh.load_policy(tmp / "q.agrl")  # the network alone, as `agrl eval --model` reads it
    whole = agrl.DQN.load("cpu", tmp / "dqn_whole.agrl")  # on a context of its own
    assert fresh.evaluate(env, 1, seed=3) == whole.evaluate(env, 1, seed=3)
    fresh.free()
    whole.free()
    whole.ctx.free()


# ---- SAC and TD3 ----

def actor_critic_calls(ctx: agrl.Context, tmp: Path) -> None:
    env = agrl.make("Pendulum-v1")
    sac_defaults: ACConfig = agrl.SAC.defaults()
    assert sac_defaults["target_entropy"] is None  # -act_dim
    with agrl.SAC.for_env(ctx, env, total_steps=1_000, **AC_SMALL) as sac:
        obs, _ = env.reset(seed=0)
        for step in range(100):
            action: NDArray[np.float32] = sac.act_random() if step < 64 else sac.act(obs)
            next_obs, reward, terminated, truncated, _ = env.step(action)
            sac.store(obs, action, reward, next_obs, terminated, truncated)
            obs = next_obs
        losses: Optional[Tuple[float, float]] = sac.train(4)
        assert losses is not None and sac.updates == 4 and sac.stored == 100
        some = sac.act_random(3)
        batch = sac.act(np.stack([obs, obs]), explore=False)
        assert some.shape == (3, 1) and batch.shape == (2, 1)
        assert np.all(some >= sac.low) and np.all(some <= sac.high) and sac.algo == "sac"
        temperature: float = sac.alpha()
        assert temperature > 0 and sac.config["autotune"] and (sac.obs_dim, sac.act_dim) == (3, 1)
        assert isinstance(sac.fused, bool)
        result = sac.learn(env, 200)
        assert result["steps"] == 200
        mean, returns = sac.evaluate(env, episodes=1, seed=4)
        assert len(returns) == 1 and mean < 0
        sac.save(tmp / "sac.agrl")
        sac.save_policy(tmp / "actor.agrl")
        sac.load_policy(tmp / "actor.agrl")
    with agrl.SAC.load(ctx, tmp / "sac.agrl") as again:
        assert again.updates > 0 and again.config["batch_size"] == 32

    td3_defaults: ACConfig = agrl.TD3.defaults()
    td3 = agrl.TD3(ctx, 3, 1, -2.0, 2.0, total_steps=1_000, hidden=(32, 32), batch_size=32,
                   policy_delay=2, expl_noise=td3_defaults["expl_noise"])
    obs, _ = env.reset(seed=1)
    actions = td3.act_random(40)
    for a in actions:
        next_obs, reward, terminated, truncated, _ = env.step(a)
        td3.store(obs, a, reward, next_obs, terminated, truncated)
        obs = next_obs
    td3.train(2, losses=False)
    assert td3.evaluate(env, 1)[0] < 0 and td3.learn(env, 50)["steps"] == 50
    td3.save(tmp / "td3.agrl")
    td3.save_policy(tmp / "td3_actor.agrl")
    td3.load_policy(tmp / "td3_actor.agrl")
    td3.free()
    with agrl.Context("cpu") as other, agrl.TD3.load(other, tmp / "td3.agrl") as loaded:
        assert loaded.algo == "td3" and loaded.config["policy_delay"] == 2


def core(tmp: Path) -> None:
    print(versions())
    rng = np.random.default_rng(0)
    with agrl.Context("cpu") as ctx:
        context_calls(ctx)
        buffer_calls(ctx, rng)
        errors(ctx)
        replay_calls(ctx, rng, tmp)
        frame_calls(ctx, rng, tmp)
        env_calls()
        dqn_calls(ctx, tmp)
        actor_critic_calls(ctx, tmp)
    assert ctx.closed


# ---- the frameworks ----

def with_torch(tmp: Path) -> None:
    import torch
    import torch.utils.dlpack

    import agrl.torch

    ctx = agrl.Context("cpu")
    device: torch.device = agrl.torch.device_of(ctx)
    rb = agrl.torch.ReplayBuffer(ctx, 64, FIELDS, seed=3)
    n = 40
    rb.add(obs=torch.randn(n, OBS_DIM), action=torch.randint(0, 2, (n, 1), dtype=torch.int32),
           reward=torch.ones(n, 1), next_obs=torch.randn(n, OBS_DIM), done=torch.zeros(n, 1))
    batch: Dict[str, torch.Tensor] = rb.sample(8)
    assert batch["obs"].device == device and batch["action"].dtype == agrl.torch.TORCH_DTYPES["i32"]
    kept = rb.empty_batch(8)
    same = rb.sample(8, out=kept)  # written in place: no tensor made
    assert same is kept and kept["indices"].dtype == torch.int64
    rows = rb.gather(torch.tensor([0, 1, 2]))
    assert torch.equal(rows["obs"][0], rb.gather([0])["obs"][0])
    # any agrl.Tensor is a DLPack producer too
    raw = agrl.ReplayBuffer(ctx, 8, {"x": 2})
    raw.add(x=[[1.0, 2.0]])
    x = torch.utils.dlpack.from_dlpack(raw.sample(4)["x"])
    assert x.shape == (4, 2)
    if importlib.util.find_spec("tensordict") is not None:
        td = rb.sample(8, tensordict=True)
        assert td.batch_size == torch.Size([8])
    fb = agrl.torch.FrameReplayBuffer(ctx, 64, 4, 4, stack=2)
    fb.add(torch.zeros((10, 4, 4), dtype=torch.uint8), torch.tensor([True] + [False] * 9), action=torch.zeros(10),
           reward=torch.zeros(10), terminated=torch.zeros(10), truncated=torch.zeros(10))
    frames: Dict[str, torch.Tensor] = fb.sample(8)
    assert frames["obs"].shape == (8, 2, 4, 4) and frames["obs"].dtype == torch.uint8
    into = fb.empty_batch(8, "f32")
    assert fb.sample(8, "f32", out=into) is into
    ctx.free()


def with_jax(tmp: Path) -> None:
    import jax
    import jax.numpy as jnp

    import agrl.jax

    ctx = agrl.Context("cpu")
    assert agrl.jax.device_of(ctx).platform == "cpu"
    rb = agrl.jax.ReplayBuffer(ctx, 64, FIELDS, prioritized=True)
    rb.add(transitions(np.random.default_rng(1), 40))
    layout: List[Tuple[str, str, int, int, Tuple[int, ...]]] = rb.layout()
    assert {key for key, *_ in layout} >= {"obs", "indices", "weights"}

    @jax.jit
    def mean_reward(packed: Dict[str, jax.Array]) -> jax.Array:
        fields = rb.unpack(packed)  # slices and bit casts, inside the jitted function
        return jnp.mean(fields["reward"] * fields["weights"][:, None])

    packed: Dict[str, jax.Array] = rb.sample(16)
    assert float(mean_reward(packed)) > 0
    fields = rb.sample_fields(16)
    assert fields["obs"].shape == (16, OBS_DIM)
    fb = agrl.jax.FrameReplayBuffer(ctx, 64, 4, 4, stack=2)
    fb.add(np.zeros((10, 4, 4), np.uint8), [True] + [False] * 9, action=np.zeros(10), reward=np.zeros(10),
           terminated=np.zeros(10), truncated=np.zeros(10))
    frames: Dict[str, jax.Array] = fb.sample(8)
    assert frames["obs"].shape == (8, 2, 4, 4)
    ctx.free()


def with_sb3(tmp: Path) -> None:
    import torch
    from stable_baselines3 import DQN as SB3DQN

    import agrl.sb3

    env = agrl.make("CartPole-v1")
    # SB3's own training with its replay buffer kept in agrl's tables
    model = SB3DQN("MlpPolicy", env, replay_buffer_class=agrl.sb3.ReplayBuffer, buffer_size=500,
                   learning_starts=50, batch_size=16, train_freq=8, device="cpu", seed=0)
    model.learn(150)
    assert isinstance(model.replay_buffer, agrl.sb3.ReplayBuffer) and model.replay_buffer.size() == model.num_timesteps
    # and by hand, with SB3's add/sample
    rb = agrl.sb3.ReplayBuffer(100, env.observation_space, env.action_space, "cpu", seed=1)
    obs, _ = env.reset(seed=0)
    for _ in range(20):
        action = np.array([env.action_space.sample()])
        next_obs, reward, terminated, truncated, _ = env.step(int(action[0]))
        rb.add(obs[None], next_obs[None], action, np.array([reward]), np.array([terminated]),
               [{"TimeLimit.truncated": truncated}])
        obs = env.reset()[0] if terminated or truncated else next_obs
    samples = rb.sample(8)
    observations: torch.Tensor = samples.observations
    assert observations.shape == (8, OBS_DIM) and rb.table.capacity == 100


def with_torchrl(tmp: Path) -> None:
    import torch
    from tensordict import TensorDict  # type: ignore[import-untyped]

    import agrl.torchrl

    n = 32
    data = TensorDict({"observation": torch.randn(n, OBS_DIM), "action": torch.randint(0, 2, (n, 1)),
                       "next": {"observation": torch.randn(n, OBS_DIM), "reward": torch.ones(n, 1),
                                "done": torch.zeros(n, 1, dtype=torch.bool)}}, batch_size=[n])
    storage = agrl.torchrl.AgrlStorage(100, device="cpu", seed=0)
    rb = agrl.torchrl.TensorDictReplayBuffer(storage=storage, batch_size=8)
    rb.extend(data)
    batch = rb.sample()
    assert batch["next", "observation"].shape == (8, OBS_DIM) and len(storage) == n

    prb = agrl.torchrl.TensorDictPrioritizedReplayBuffer(alpha=0.6, beta=0.4,
                                                        storage=agrl.torchrl.AgrlStorage(100), batch_size=8)
    prb.extend(data)
    drawn = prb.sample()
    drawn.set("td_error", torch.rand(8))
    prb.update_tensordict_priority(drawn)
    assert "priority_weight" in drawn.keys()

    # TorchRL's own buffer class, given agrl's storage and sampler
    from torchrl.data import TensorDictReplayBuffer  # type: ignore[import-untyped]

    plain = TensorDictReplayBuffer(storage=agrl.torchrl.AgrlStorage(100), sampler=agrl.torchrl.AgrlSampler(),
                                   collate_fn=agrl.torchrl.collate, batch_size=4)
    plain.extend(data)
    assert plain.sample()["observation"].shape == (4, OBS_DIM)
    sampler = agrl.torchrl.AgrlPrioritizedSampler(100, alpha=0.7, beta=0.5)
    weighted = TensorDictReplayBuffer(storage=agrl.torchrl.AgrlStorage(100), sampler=sampler,
                                      collate_fn=agrl.torchrl.collate, priority_key="td_error", batch_size=4)
    weighted.extend(data)
    assert "priority_weight" in weighted.sample().keys() and sampler.alpha == 0.7


#: name -> (the part, the modules it needs)
PARTS: Dict[str, Tuple[Callable[[Path], None], Tuple[str, ...]]] = {
    "core": (core, ()),
    "torch": (with_torch, ("torch",)),
    "jax": (with_jax, ("jax",)),
    "sb3": (with_sb3, ("torch", "stable_baselines3")),
    "torchrl": (with_torchrl, ("torch", "tensordict", "torchrl")),
}


def missing(part: str) -> List[str]:
    """The modules `part` needs that cannot be imported."""
    return [m for m in PARTS[part][1] if importlib.util.find_spec(m) is None]


def main(parts: Optional[Sequence[str]] = None) -> int:
    """Runs `parts` (default: all; a part whose framework is missing is
    skipped with a line saying so)."""
    with tempfile.TemporaryDirectory() as tmp:
        for part in PARTS if parts is None else parts:
            absent = missing(part)
            if absent:
                print(f"{part}: skipped ({', '.join(absent)} not installed)")
                continue
            PARTS[part][0](Path(tmp))
            print(f"{part}: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or None))
