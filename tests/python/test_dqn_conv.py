"""agrl.DQN with convolutions over image observations: the configuration
read back, the image shape taken from an agrl environment, greedy actions
equal to the argmax of PyTorch's conv2d/linear forward of the saved policy
file (parsed here with numpy, CRCs checked), and bad settings refused with
an error naming them."""

import numpy as np
import pytest

import agrl
from refs import read_container

torch = pytest.importorskip("torch")


def torch_q(path, obs):
    """Q-values of the policy file at `path` for flat observations, with
    torch's conv2d (weights [K, C, k, k], as agrl stores them) and linear layers."""
    keys, secs = read_container(path)
    assert keys["kind"] == "mlp" and keys["mlp.version"] == 4
    C, H, W = keys["mlp.in_shape"]
    conv = keys["mlp.conv"]
    x = torch.tensor(obs, dtype=torch.float64).reshape(-1, C, H, W)
    for i in range(len(conv) // 4):
        K, k, s, p = conv[4 * i:4 * i + 4]
        (rows, cols), w = secs[f"conv{i}.w"]
        assert cols == K and rows == x.shape[1] * k * k
        wt = torch.tensor(w, dtype=torch.float64).reshape(K, x.shape[1], k, k)
        b = torch.tensor(secs[f"conv{i}.b"][1], dtype=torch.float64)
        x = torch.relu(torch.nn.functional.conv2d(x, wt, b, stride=s, padding=p))
    x = x.reshape(x.shape[0], -1)
    n = len(keys["mlp.sizes"]) - 1
    for l in range(n):
        (out, inp), w = secs[f"W{l}"]
        wt = torch.tensor(w, dtype=torch.float64).reshape(inp, out).T  # column-major [out, in]
        x = x @ wt.T + torch.tensor(secs[f"b{l}"][1], dtype=torch.float64)
        if l + 1 < n:
            x = torch.relu(x)
    return x.numpy()


def test_conv_dqn_acts_as_torch_computes_its_network(ctx, tmp_path):
    env = agrl.make("breakout-minatar")
    assert env.unwrapped.image_shape == (4, 10, 10)
    q = agrl.DQN.for_env(ctx, env, 5000, conv=[(8, 3), (4, 2, 2, 1)], hidden=[16], batch_size=8,
                         buffer_size=500, seed=3)
    assert q.config["conv"] == ((8, 3, 1, 0), (4, 2, 2, 1))
    assert q.config["obs_shape"] == (4, 10, 10)
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=1)
    for t in range(200):  # a table of real transitions, then some updates
        a = int(rng.integers(3))
        nxt, r, term, trunc, _ = env.step(a)
        q.store(obs, a, r, nxt, term, trunc)
        obs = nxt if not (term or trunc) else env.reset(seed=2 + t)[0]
    assert np.isfinite(q.train(20))
    path = tmp_path / "q.agrl"
    q.save_policy(str(path))
    batch = np.stack([env.reset(seed=100 + i)[0] for i in range(6)] +
                     [rng.integers(0, 2, 400).astype(np.float32) for _ in range(10)])
    want = torch_q(str(path), batch)
    got = q.act(batch, explore=False)
    for i, a in enumerate(got):
        assert want[i, a] >= want[i].max() - 1e-5, (i, a, want[i])
    # the saved policy loads into a fresh DQN of the same shape with the same actions
    fresh = agrl.DQN.for_env(ctx, env, 5000, conv=[(8, 3), (4, 2, 2, 1)], hidden=[16], seed=99)
    fresh.load_policy(str(path))
    assert np.array_equal(fresh.act(batch, explore=False), got)


def test_conv_dqn_saves_and_loads_whole(ctx, tmp_path):
    env = agrl.make("space_invaders-minatar")
    q = agrl.DQN.for_env(ctx, env, 5000, conv=[(4, 3)], hidden=[8], batch_size=4, buffer_size=100, seed=1)
    obs, _ = env.reset(seed=0)
    for t in range(40):
        nxt, r, term, trunc, _ = env.step(t % 4)
        q.store(obs, t % 4, r, nxt, term, trunc)
        obs = nxt if not (term or trunc) else env.reset(seed=t)[0]
    q.train(3)
    q.save(tmp_path / "d.agrl")
    back = agrl.DQN.load(ctx, tmp_path / "d.agrl")
    assert back.config["conv"] == ((4, 3, 1, 0),) and back.config["obs_shape"] == (6, 10, 10)
    la, lb = q.train(5), back.train(5)
    assert la == lb


@pytest.mark.parametrize("opts, part", [
    (dict(conv=[(16,)]), "conv"),
    (dict(conv=[(16, 3, 1, 0, 0)]), "conv"),
    (dict(conv="16x3"), "conv"),
    (dict(conv=[(0, 3)]), "conv[0]"),
    (dict(conv=[(16, 11)]), "larger than the 10x10 image"),
    (dict(conv=[(16, 3)], obs_shape=(4, 10, 9)), "obs_shape"),
    (dict(conv=[(16, 3)], obs_shape=(4, 10)), "obs_shape"),
    (dict(conv=[(2, 1)] * 9), "at most 8"),
])
def test_bad_convolutions_are_refused_naming_them(ctx, opts, part):
    env = agrl.make("breakout-minatar")
    with pytest.raises((agrl.InvalidArgError, TypeError, OverflowError)) as e:
        agrl.DQN.for_env(ctx, env, 1000, **opts)
    assert part in str(e.value)


def test_conv_needs_an_image_shape(ctx):
    with pytest.raises(agrl.InvalidArgError, match="conv needs obs_shape"):
        agrl.DQN.for_env(ctx, agrl.make("cartpole"), 1000, conv=[(4, 1)])
    # given explicitly, a 4-value vector is a 1x2x2 image
    q = agrl.DQN.for_env(ctx, agrl.make("cartpole"), 1000, conv=[(4, 2)], obs_shape=(1, 2, 2))
    assert q.act(np.zeros(4, np.float32), explore=False) in (0, 1)
