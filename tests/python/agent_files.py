"""What the agent file tests (test_dqn_file.py, test_ac_file.py) share."""

import numpy as np

import agrl


def check_loads_on_the_cpu(tmp_path, make, fill, obs_dim, same_params=None):
    """An agent made by make(device) on the GPU when there is one (else the
    CPU), filled with 300 transitions (fill(agent, rng, n)) and trained 5
    updates, saved and loaded on the CPU: the same parameters bit for bit
    (same_params(a, b, tmp_path), where given), the same greedy actions (on
    the CPU bit for bit; from the GPU to float rounding, the other device's
    matrix products rounding their last bits otherwise), updates and stored
    count."""
    dev = "cuda" if agrl.cuda_device_count() else "cpu"
    a = make(dev)
    fill(a, np.random.default_rng(2), 300)
    a.train(5)
    a.save(tmp_path / "saved.agrl")
    b = type(a).load("cpu", tmp_path / "saved.agrl")
    o = np.random.default_rng(3).standard_normal((200, obs_dim)).astype(np.float32)
    if same_params:
        assert same_params(a, b, tmp_path)
    ya, yb = a.act(o, explore=False), b.act(o, explore=False)
    if dev == "cpu":
        assert np.array_equal(ya, yb)
    else:
        np.testing.assert_allclose(ya, yb, rtol=1e-5, atol=1e-6)
    assert b.updates == 5 and b.stored == 300
