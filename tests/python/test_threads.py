"""Several Python threads on one context at once: adds, samples, gathers
and a DQN's training (which runs with the GIL released) interleave, and
every method takes the context's lock, so no value is wrong or lost.

Each transition carries an id and a payload computed from it; the table
is large enough that nothing is overwritten, so at the end it holds every
id exactly once with its payload, and every row sampled along the way was
whole. The DQN trained among the other threads gives the same losses, bit
for bit, as the same DQN trained alone. Runs on the CPU, and on CUDA when
a device is present (AGRL_THREAD_DEVICES chooses)."""

import os
import threading
import time

import numpy as np
import pytest

import agrl

WIDTH = 8


def payload(ids):
    ids = np.asarray(ids, np.int64)
    k = np.arange(WIDTH, dtype=np.int64)
    return ((ids[:, None] * 7919 + k * 104729) % 65521).astype(np.float32)  # exact in f32


def devices():
    want = os.environ.get("AGRL_THREAD_DEVICES")
    if want:
        return want.split(",")
    return ["cpu"] + (["cuda"] if agrl.cuda_device_count() > 0 else [])


def fill_dqn(d, seed):
    g = np.random.default_rng(seed)
    obs = g.standard_normal((64, 4)).astype(np.float32)
    nxt = g.standard_normal((64, 4)).astype(np.float32)
    d.store(obs, g.integers(0, 2, 64).astype(np.int32), g.standard_normal(64).astype(np.float32), nxt,
            (g.random(64) < 0.1).astype(np.int32))


def dqn_losses(d, rounds):
    return [d.train(4) for _ in range(rounds)]


@pytest.mark.parametrize("device", devices())
def test_threads_share_a_context_without_losing_or_tearing_values(device):
    if device == "cuda" and agrl.cuda_device_count() == 0:
        pytest.skip("no CUDA device")
    ctx = agrl.Context(device)
    n_adders, per_adder = 4, 3000
    rb = agrl.ReplayBuffer(ctx, n_adders * per_adder, {"id": ((), "i64"), "x": ((WIDTH,), "f32")}, seed=3)
    rb.add(id=np.array([0]), x=payload([0]))  # id 0 first: samplers never wait on an empty table
    cfg = dict(batch_size=32, learning_starts=0, buffer_size=1000, seed=11, hidden=(32, 32))
    dqn = agrl.DQN(ctx, 4, 2, **cfg)
    fill_dqn(dqn, 5)
    errors = []
    seen_ids = []
    done = threading.Event()

    def adder(t):
        g = np.random.default_rng(100 + t)
        start = 1 + t * per_adder
        ids = np.arange(start, start + per_adder - (1 if t == n_adders - 1 else 0))
        at = 0
        while at < len(ids):
            k = int(g.integers(1, 33))
            chunk = ids[at:at + k]
            rb.add(id=chunk, x=payload(chunk))
            at += k

    def sampler(t):
        try:
            while not done.is_set():
                s = rb.sample(64)
                ids = np.asarray(s["id"].numpy())
                x = s["x"].numpy()
                if not np.array_equal(x, payload(ids)):
                    errors.append(f"sampler {t}: a torn row")
                seen_ids.append(ids)
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    losses = []

    def trainer():
        try:
            losses.extend(dqn_losses(dqn, 40))
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    threads = [threading.Thread(target=adder, args=(t,)) for t in range(n_adders)]
    samplers = [threading.Thread(target=sampler, args=(t,)) for t in range(2)]
    train = threading.Thread(target=trainer)
    for th in samplers + threads + [train]:
        th.start()
    for th in threads + [train]:
        th.join()
    done.set()
    for th in samplers:
        th.join()
    assert errors == []
    # every id once, with its payload
    n = len(rb)
    assert n == n_adders * per_adder
    g = rb.gather(np.arange(n))
    ids = np.asarray(g["id"].numpy())
    assert np.array_equal(np.sort(ids), np.arange(n))
    assert np.array_equal(g["x"].numpy(), payload(ids))
    assert sum(len(s) for s in seen_ids) > 0
    # the DQN among the threads trained as it does alone
    ref_ctx = agrl.Context(device)
    ref = agrl.DQN(ref_ctx, 4, 2, **cfg)
    fill_dqn(ref, 5)
    assert losses == dqn_losses(ref, 40)
    ref_ctx.free()
    ctx.free()


def test_a_thread_waits_for_the_lock_with_the_gil_released():
    """While one thread is inside a long call on a context (the lock held,
    the GIL released), a thread that calls the same context waits for the
    call to end, and other Python threads keep running meanwhile."""
    ctx = agrl.Context("cpu")
    d = agrl.DQN(ctx, 4, 2, batch_size=64, learning_starts=0, hidden=(256, 256), seed=1)
    fill_dqn(d, 2)
    ticks = [0]
    stop = threading.Event()

    def counter():
        while not stop.is_set():
            ticks[0] += 1

    c = threading.Thread(target=counter)
    c.start()
    t = threading.Thread(target=lambda: d.train(300))
    t.start()
    time.sleep(0.05)  # train holds the lock now (300 updates take far longer)
    n0 = ticks[0]
    updates = d.updates  # waits for the lock: for train to end
    n1 = ticks[0]
    t.join()
    stop.set()
    c.join()
    assert updates == 300  # it waited for the whole call
    assert n1 - n0 > 1000  # and the counter ran while it waited: the GIL was free
    ctx.free()
