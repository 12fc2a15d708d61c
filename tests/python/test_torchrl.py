"""agrl.torchrl against TorchRL itself on the same data.

- contents: collector-like batches extended into agrl's storage and into
  TorchRL's TensorDictReplayBuffer(LazyTensorStorage) (wrapping around the
  capacity, and one add): the same returned indices, the extended
  TensorDict left as TorchRL leaves it, and every stored row read back
  equal, key by key (dtype, shape, value);
- samples: the keys, shapes, dtypes, devices and batch size of TorchRL's
  sample (uniform and prioritized), every sampled row equal to TorchRL's row
  at its index, and return_info's keys;
- loss modules: DQNLoss (QValueActor, uniform and prioritized) and SACLoss
  fed a sample, the loss and its gradients equal to those of the same rows
  read from TorchRL's buffer; update_tensordict_priority after DQNLoss gives
  the total priority of TorchRL's own sum tree after the same update;
- prioritized sampling: drawing frequencies within a few standard
  deviations of (p + eps)^alpha / sum (the closed form, which TorchRL's tree
  also holds), before and after update_priority, and new rows at the
  largest priority given so far; importance weights (N P(i))^-beta over the
  batch's largest;
- state_dict / load_state_dict and dumps / loads: every row, length,
  write count, ring position and total priority, and later extends landing
  where the original's do;
- empty(), TorchRL's own buffer classes and samplers over an AgrlStorage,
  explicit fields and dtypes, and the writes agrl refuses.

Skipped when torch, tensordict or torchrl do not import. On the CPU, and
on CUDA as well when torch and agrl both see a device.
"""

import copy
import io
import logging

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="agrl.torchrl needs torch")
pytest.importorskip("tensordict", reason="agrl.torchrl needs tensordict (pip install tensordict torchrl)")
pytest.importorskip("torchrl", reason="agrl.torchrl needs torchrl (pip install torchrl tensordict)")
logging.getLogger("torchrl").setLevel(logging.WARNING)

import agrl  # noqa: E402
import agrl.torchrl as atr  # noqa: E402
from tensordict import TensorDict  # noqa: E402
from torchrl.data import (  # noqa: E402
    LazyTensorStorage,
    RandomSampler,
    TensorDictPrioritizedReplayBuffer,
    TensorDictReplayBuffer,
)

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() and agrl.cuda_device_count() > 0 else [])
ALPHA, BETA, EPS = 0.7, 0.5, 1e-8
OBS, N_ACT = 4, 3


def batch(n, seed, device="cpu", one_hot=True, extra=False):
    """A collector's batch of n transitions (random values)."""
    g = torch.Generator().manual_seed(seed)
    if one_hot:
        action = torch.nn.functional.one_hot(torch.randint(0, N_ACT, (n,), generator=g), N_ACT)  # int64
    else:
        action = torch.rand(n, 2, generator=g) * 2 - 1
    done = torch.rand(n, 1, generator=g) < 0.2
    td = TensorDict({
        "observation": torch.randn(n, OBS, generator=g),
        "action": action,
        "next": {"observation": torch.randn(n, OBS, generator=g), "reward": torch.randn(n, 1, generator=g),
                 "done": done, "terminated": done & (torch.rand(n, 1, generator=g) < 0.5),
                 "truncated": done & (torch.rand(n, 1, generator=g) < 0.5)},
    }, batch_size=[n])
    if extra:
        td["pixels"] = torch.randint(0, 256, (n, 2, 3), generator=g, dtype=torch.uint8)
        td["collector", "traj_ids"] = torch.randint(0, 1000, (n,), generator=g)
        td["step_count"] = torch.randint(0, 100, (n, 1), generator=g, dtype=torch.int32)
        td["half"] = torch.randn(n, 2, generator=g).to(torch.float16)
        td["brain"] = torch.randn(n, 2, generator=g).to(torch.bfloat16)
    return td.to(device)


def leaves(td):
    return {k if isinstance(k, tuple) else (k,): v for k, v in td.items(include_nested=True, leaves_only=True)}


def assert_same(a, b, skip=(), device=None):
    """Same keys, dtypes, shapes and values (a on `device` when given)."""
    la, lb = leaves(a), leaves(b)
    la = {k: v for k, v in la.items() if k not in skip}
    lb = {k: v for k, v in lb.items() if k not in skip}
    assert sorted(la) == sorted(lb)
    assert a.batch_size == b.batch_size
    for k, va in la.items():
        vb = lb[k]
        assert va.dtype == vb.dtype, k
        assert va.shape == vb.shape, k
        if device is not None:
            assert va.device.type == torch.device(device).type, k
        assert torch.equal(va.cpu(), vb.cpu()), k


def ours(dev, cap, prioritized=False, **kw):
    st = atr.AgrlStorage(cap, device=dev, seed=11)
    if prioritized:
        return atr.TensorDictPrioritizedReplayBuffer(alpha=ALPHA, beta=BETA, eps=EPS, storage=st, **kw)
    return atr.TensorDictReplayBuffer(storage=st, **kw)


def tree_device(dev):
    """Where TorchRL's sum tree can be for storage on `dev`: the host when
    its extension has no tree for the device (the PyPI wheels may lack the
    CUDA one; it fails only when first used, so try one here)."""
    if dev == "cpu":
        return "cpu"
    from torchrl.data.replay_buffers.samplers import PrioritizedSampler
    try:
        PrioritizedSampler(4, ALPHA, BETA, device=dev)
        return dev
    except RuntimeError:
        return "cpu"


def theirs(dev, cap, prioritized=False, **kw):
    """TorchRL's buffer with its storage on `dev`."""
    if not prioritized:
        return TensorDictReplayBuffer(storage=LazyTensorStorage(cap, device=dev), **kw)
    return TensorDictPrioritizedReplayBuffer(alpha=ALPHA, beta=BETA, eps=EPS,
                                             storage=LazyTensorStorage(cap, device=dev),
                                             sampler_device=tree_device(dev), **kw)


def tree_probs(trb):
    """P(i) of TorchRL's own sum tree over its stored rows."""
    s = trb._sampler
    n = len(trb)
    leaf = torch.tensor([float(s._sum_tree[i]) for i in range(n)], dtype=torch.float64)
    return leaf / leaf.sum()


def read_all(rb):
    return [rb[i] for i in range(len(rb))]


# ------------------------------------------------------------------ contents


@pytest.mark.parametrize("dev", DEVICES)
def test_extend_contents_equal_lazytensorstorage(dev):
    cap = 16
    rb, trb = ours(dev, cap), theirs(dev, cap)
    for step, n in enumerate((5, 7, 9, 3, 16)):  # the third wraps, the last fills the whole ring again
        b = batch(n, step, dev, extra=True)
        mine, ref = b.clone(), b.clone()
        i1, i2 = rb.extend(mine), trb.extend(ref)
        assert torch.equal(i1.cpu(), i2.cpu())
        assert ("index" in mine.keys()) == ("index" in ref.keys())  # the caller's batch: as TorchRL leaves it
        if "index" in ref.keys():
            assert torch.equal(mine["index"].cpu(), ref["index"].cpu())
        assert (len(rb), rb.write_count) == (len(trb), trb.write_count)
        assert rb.storage.table.position == trb._writer._cursor
        for i in range(len(rb)):  # every stored row, read back one index at a time
            assert_same(rb[i], trb[i], device=dev)
        idx = torch.arange(len(rb)).flip(0)
        assert_same(rb.storage.get(idx), trb.storage.get(idx.to(dev)), device=dev)
    one = batch(1, 99, dev, extra=True)[0]
    rb.add(one.clone())
    trb.add(one.clone())
    assert (len(rb), rb.write_count) == (len(trb), trb.write_count)
    for i in range(len(rb)):
        assert_same(rb[i], trb[i], device=dev)
    assert_same(rb[-1], trb[-1])
    assert_same(rb[2:9], trb[2:9])
    assert_same(rb[np.array([3, 0, 3])], trb[np.array([3, 0, 3])])


@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("prioritized", [False, True])
def test_sample_layout_equals_torchrl(dev, prioritized):
    B = 32
    rb, trb = ours(dev, 64, prioritized), theirs(dev, 64, prioritized)
    data = batch(40, 1, dev)
    rb.extend(data.clone())
    trb.extend(data.clone())
    s, info = rb.sample(B, return_info=True)
    t, tinfo = trb.sample(B, return_info=True)
    assert s.batch_size == t.batch_size == torch.Size([B])
    assert s.device == torch.device(dev) if dev == "cpu" else s.device.type == "cuda"
    ls, lt = leaves(s), leaves(t)
    assert sorted(ls) == sorted(lt)
    for k in ls:
        assert (ls[k].dtype, ls[k].shape) == (lt[k].dtype, lt[k].shape), k
        assert ls[k].device.type == torch.device(dev).type, k
    assert s["index"].dtype == torch.int64
    assert sorted(info) == sorted(tinfo) == (["index", "priority_weight"] if prioritized else ["index"])
    assert torch.equal(info["index"], s["index"])
    # each sampled row is the row written at its index
    idx = s["index"].cpu()
    assert ((idx >= 0) & (idx < 40)).all()
    assert_same(s, data[idx], skip=[("index",), ("priority_weight",)])
    # the same batch through TorchRL's own sample path (no direct path when a transform is set)
    rb2 = ours(dev, 64, prioritized, transform=lambda td: td)
    rb2.extend(data.clone())
    s2 = rb2.sample(B)
    assert sorted(leaves(s2)) == sorted(ls)
    assert_same(s2, data[s2["index"].cpu()], skip=[("index",), ("priority_weight",)])


# ------------------------------------------------------------------ losses


def dqn_module(seed):
    from torchrl.data import OneHot
    from torchrl.modules import MLP, QValueActor
    from torchrl.objectives import DQNLoss

    torch.manual_seed(seed)
    actor = QValueActor(MLP(in_features=OBS, out_features=N_ACT, num_cells=[32]), in_keys=["observation"],
                        spec=OneHot(N_ACT))
    loss = DQNLoss(actor, action_space="one_hot", delay_value=False)
    loss.make_value_estimator(gamma=0.9)
    return loss


def grads(module):
    return [p.grad.detach().clone() for p in module.parameters() if p.grad is not None]


@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("prioritized", [False, True])
def test_dqn_loss_backward_and_priorities(dev, prioritized):
    rb, trb = ours(dev, 200, prioritized), theirs("cpu", 200, prioritized)
    for k in range(3):
        data = batch(60, 10 + k, dev)
        rb.extend(data.clone())
        trb.extend(data.clone().cpu())
    loss = dqn_module(0).to(dev)
    ref = copy.deepcopy(loss).cpu()
    s = rb.sample(64)
    out = loss(s)
    out["loss"].backward()
    g = grads(loss)
    assert g and all(torch.isfinite(x).all() for x in g) and any(x.abs().sum() > 0 for x in g)
    # the same rows from TorchRL's buffer (and, prioritized, the same weights) give the same loss
    rows = trb[s["index"].cpu()]
    if prioritized:
        rows["priority_weight"] = s["priority_weight"].cpu()
        assert "priority_weight" in s.keys()
    ref_out = ref(rows)
    ref_out["loss"].backward()
    assert torch.allclose(out["loss"].detach().cpu(), ref_out["loss"].detach(), rtol=1e-5, atol=1e-6)
    for a, b in zip(g, grads(ref)):
        assert torch.allclose(a.cpu(), b, rtol=1e-4, atol=1e-6)
    if not prioritized:
        return
    # DQNLoss wrote "td_error" into the sample; the buffer takes it as TorchRL's does
    assert "td_error" in s.keys()
    rb.update_tensordict_priority(s)
    rows["td_error"] = s["td_error"].detach().cpu()
    trb.update_tensordict_priority(rows)
    want = float(trb._sampler._sum_tree.query(0, len(trb)))
    assert rb.storage.table.total_priority() == pytest.approx(want, rel=1e-5)
    # new rows take the largest priority given so far (TorchRL's default priority)
    more = batch(7, 50, dev)
    rb.extend(more.clone())
    trb.extend(more.clone().cpu())
    want = float(trb._sampler._sum_tree.query(0, len(trb)))
    assert rb.storage.table.total_priority() == pytest.approx(want, rel=1e-5)
    assert float(rb.sampler._max_priority[0]) == pytest.approx(float(trb.sampler._max_priority[0]), rel=1e-6)


@pytest.mark.filterwarnings("ignore:No target network updater")
@pytest.mark.parametrize("dev", DEVICES)
def test_sac_loss_backward(dev):
    from tensordict.nn import NormalParamExtractor, TensorDictModule
    from torchrl.data import Bounded
    from torchrl.modules import MLP, ProbabilisticActor, TanhNormal, ValueOperator
    from torchrl.objectives import SACLoss

    torch.manual_seed(3)
    net = torch.nn.Sequential(MLP(in_features=OBS, out_features=4, num_cells=[32]), NormalParamExtractor())
    actor = ProbabilisticActor(TensorDictModule(net, in_keys=["observation"], out_keys=["loc", "scale"]),
                               in_keys=["loc", "scale"], distribution_class=TanhNormal,
                               spec=Bounded(-1.0, 1.0, (2,)), return_log_prob=True)
    q = ValueOperator(MLP(in_features=OBS + 2, out_features=1, num_cells=[32]), in_keys=["observation", "action"])
    loss = SACLoss(actor_network=actor, qvalue_network=q, num_qvalue_nets=2)
    loss.make_value_estimator(gamma=0.99)
    loss = loss.to(dev)
    ref = copy.deepcopy(loss).cpu()
    rb, trb = ours(dev, 100), theirs("cpu", 100)
    data = batch(80, 4, dev, one_hot=False)
    rb.extend(data.clone())
    trb.extend(data.clone().cpu())
    s = rb.sample(48)
    torch.manual_seed(9)
    out = loss(s)
    total = out["loss_actor"] + out["loss_qvalue"] + out["loss_alpha"]
    total.backward()
    torch.manual_seed(9)
    rows = trb[s["index"].cpu()]
    ref_out = ref(rows)
    ref_total = ref_out["loss_actor"] + ref_out["loss_qvalue"] + ref_out["loss_alpha"]
    ref_total.backward()
    assert torch.isfinite(total)
    g = grads(loss)
    assert g and any(x.abs().sum() > 0 for x in g)
    if dev == "cpu":  # the same draws of the policy's noise on the same device: the same numbers
        assert torch.allclose(total.detach(), ref_total.detach(), rtol=1e-5, atol=1e-6)
        for a, b in zip(g, grads(ref)):
            assert torch.allclose(a, b, rtol=1e-4, atol=1e-6)


# ------------------------------------------------------------------ prioritized sampling


def counts(rb, n, draws, B=256):
    c = torch.zeros(n, dtype=torch.float64)
    for _ in range(draws // B):
        c += torch.bincount(rb.sample(B)["index"].cpu(), minlength=n).double()
    return c


def assert_frequencies(c, p):
    """Counts within 5 standard deviations (binomial) of the probabilities p."""
    n = c.sum()
    sd = torch.sqrt(n * p * (1 - p))
    assert (c - n * p).abs().max() <= (5 * sd + 2).max(), (c / n, p)


@pytest.mark.parametrize("dev", DEVICES)
def test_prioritized_frequencies_follow_update_priority(dev):
    n = 10
    rb, trb = ours(dev, 32, True), theirs("cpu", 32, True)
    data = batch(n, 5, dev)
    rb.extend(data.clone())
    trb.extend(data.clone().cpu())
    uniform = counts(rb, n, 25_600)  # all at priority 1: uniform
    assert_frequencies(uniform, torch.full((n,), 1.0 / n, dtype=torch.float64))
    p = torch.tensor([0.1, 0.5, 1.0, 2.0, 4.0, 0.2, 3.0, 0.05, 1.5, 0.8])
    idx = torch.arange(n)
    rb.update_priority(idx.to(dev), p.to(dev))
    trb.update_priority(idx, p)
    closed = (p.double() + EPS) ** ALPHA
    closed /= closed.sum()
    assert torch.allclose(tree_probs(trb), closed, rtol=1e-5)  # TorchRL's tree holds the closed form
    assert rb.storage.table.total_priority() == pytest.approx(float(((p.double() + EPS) ** ALPHA).sum()), rel=1e-6)
    assert_frequencies(counts(rb, n, 102_400), closed)
    # a second update moves the draws: row 4 nearly never, row 7 most
    p2 = p.clone()
    p2[4], p2[7] = 0.0, 10.0
    rb.update_priority(torch.tensor([4, 7], device=dev), torch.tensor([0.0, 10.0], device=dev))
    trb.update_priority(torch.tensor([4, 7]), torch.tensor([0.0, 10.0]))
    closed2 = (p2.double() + EPS) ** ALPHA
    closed2 /= closed2.sum()
    assert torch.allclose(tree_probs(trb), closed2, rtol=1e-5)
    c2 = counts(rb, n, 102_400)
    assert_frequencies(c2, closed2)
    assert c2[4] == 0 and c2[7] == c2.max()


@pytest.mark.parametrize("dev", DEVICES)
def test_new_rows_take_the_largest_priority_given(dev):
    """New rows come in at the largest priority given so far, which counts
    the 1 of the first rows written (TorchRL's default priority): 1 while
    every priority given is below it, the largest once one is above."""
    rb, trb = ours(dev, 32, True), theirs("cpu", 32, True)
    data = batch(6, 6, dev)
    rb.extend(data.clone())
    trb.extend(data.clone().cpu())
    p = torch.tensor([0.1, 0.3, 0.05, 0.2, 0.4, 0.15])
    rb.update_priority(torch.arange(6, device=dev), p.to(dev))
    trb.update_priority(torch.arange(6), p)
    more = batch(4, 7, dev)
    rb.extend(more.clone())
    trb.extend(more.clone().cpu())
    want = torch.cat([p, torch.full((4,), 1.0)]).double()
    closed = (want + EPS) ** ALPHA
    closed /= closed.sum()
    assert torch.allclose(tree_probs(trb), closed, rtol=1e-5)
    assert rb.storage.table.total_priority() == pytest.approx(float(((want + EPS) ** ALPHA).sum()), rel=1e-6)
    assert_frequencies(counts(rb, 10, 51_200), closed)
    # one priority above 1: the next rows come in at it, through a single add too
    rb.update_priority(torch.tensor([2], device=dev), torch.tensor([2.5], device=dev))
    trb.update_priority(torch.tensor([2]), torch.tensor([2.5]))
    rb.add(batch(1, 8, dev)[0])
    trb.add(batch(1, 8, "cpu")[0])
    rb.extend(batch(3, 9, dev))
    trb.extend(batch(3, 9, "cpu"))
    want = torch.cat([p, torch.full((4,), 1.0), torch.full((4,), 2.5)]).double()
    want[2] = 2.5
    closed = (want + EPS) ** ALPHA
    closed /= closed.sum()
    assert torch.allclose(tree_probs(trb), closed, rtol=1e-5)
    assert rb.storage.table.total_priority() == pytest.approx(float(((want + EPS) ** ALPHA).sum()), rel=1e-6)
    assert float(rb.sampler._max_priority[0]) == float(trb.sampler._max_priority[0]) == 2.5
    assert_frequencies(counts(rb, 14, 51_200), closed)


@pytest.mark.parametrize("dev", DEVICES)
def test_importance_weights(dev):
    n = 12
    rb = ours(dev, 16, True)
    rb.extend(batch(n, 9, dev))
    p = torch.linspace(0.1, 3.0, n)
    rb.update_priority(torch.arange(n), p)
    P = (p.double() + EPS) ** ALPHA
    P /= P.sum()
    for beta in (BETA, 1.0, 0.0):
        rb.sampler.beta = beta
        s = rb.sample(64)
        w, i = s["priority_weight"].cpu().double(), s["index"].cpu()
        assert s["priority_weight"].dtype == torch.float32
        want = (n * P[i]) ** -beta
        want /= want.max()  # agrl: over the batch's largest weight
        assert torch.allclose(w, want, rtol=1e-5)
        # TorchRL's (P(i) / min P)^-beta differ by one factor within the batch
        torchrl_w = (P[i] / P.min()) ** -beta
        ratio = w / torchrl_w
        assert torch.allclose(ratio, ratio[0].expand_as(ratio), rtol=1e-5)


# ------------------------------------------------------------------ state


def fill_for_state(rb, trb, dev, prioritized):
    for k, n in enumerate((9, 12, 5)):  # wraps a ring of 20
        data = batch(n, 20 + k, dev, extra=True)
        rb.extend(data.clone())
        trb.extend(data.clone().cpu())
    if prioritized:
        idx = torch.tensor([0, 3, 7, 11])
        p = torch.tensor([0.5, 2.0, 0.25, 1.5])
        rb.update_priority(idx, p)
        trb.update_priority(idx, p)


def assert_same_buffer(a, b):
    assert (len(a), a.storage.table.position) == (len(b), b.storage.table.position)
    for x, y in zip(read_all(a), read_all(b)):
        assert_same(x, y)
    if a.storage.table.prioritized:
        assert a.storage.table.total_priority() == b.storage.table.total_priority()
        assert float(a.sampler._max_priority[0]) == float(b.sampler._max_priority[0])
        assert (a.sampler.alpha, a.sampler.beta) == (b.sampler.alpha, b.sampler.beta)


def continue_both(a, b, trb, dev):
    """Later extends land in the same rows of both, and as in TorchRL's."""
    more = batch(6, 77, dev, extra=True)
    a.extend(more.clone())
    b.extend(more.clone())
    trb.extend(more.clone().cpu())
    assert_same_buffer(a, b)
    for i in range(len(a)):
        assert_same(a[i], trb[i])
    assert a.sample(8).batch_size == b.sample(8).batch_size == torch.Size([8])


@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("prioritized", [False, True])
def test_state_dict_round_trip(dev, prioritized):
    rb, trb = ours(dev, 20, prioritized), theirs("cpu", 20, prioritized)
    fill_for_state(rb, trb, dev, prioritized)
    buf = io.BytesIO()
    torch.save(rb.state_dict(), buf)
    buf.seek(0)
    back = ours(dev, 20, prioritized)
    back.load_state_dict(torch.load(buf, weights_only=False))
    assert_same_buffer(back, rb)
    tback = theirs("cpu", 20, prioritized)
    tback.load_state_dict(trb.state_dict())
    assert (len(back), back.write_count, back.writer._cursor) == (len(tback), tback.write_count, tback.writer._cursor)
    if prioritized:
        assert back.storage.table.total_priority() == pytest.approx(
            float(trb._sampler._sum_tree.query(0, len(trb))), rel=1e-6)
    continue_both(rb, back, trb, dev)
    # an empty buffer's state loads as empty
    fresh = ours(dev, 20, prioritized)
    fresh.load_state_dict(ours(dev, 20, prioritized).state_dict())
    assert len(fresh) == 0
    with pytest.raises(ValueError):
        ours(dev, 21, prioritized).load_state_dict(rb.state_dict())


@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("prioritized", [False, True])
def test_dumps_loads_round_trip(dev, prioritized, tmp_path):
    rb, trb = ours(dev, 20, prioritized), theirs("cpu", 20, prioritized)
    fill_for_state(rb, trb, dev, prioritized)
    rb.dumps(tmp_path / "rb")
    assert (tmp_path / "rb" / "storage" / "table.agrl").is_file()
    back = ours(dev, 20, prioritized)
    back.loads(tmp_path / "rb")
    assert_same_buffer(back, rb)
    trb.dumps(tmp_path / "trb")
    tback = theirs("cpu", 20, prioritized)
    tback.loads(tmp_path / "trb")
    assert (len(back), back.write_count, back.writer._cursor) == (len(tback), tback.write_count, tback.writer._cursor)
    continue_both(rb, back, trb, dev)


@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("prioritized", [False, True])
def test_empty(dev, prioritized):
    rb, trb = ours(dev, 16, prioritized), theirs("cpu", 16, prioritized)
    rb.extend(batch(10, 1, dev))
    rb.empty()
    trb.empty()
    assert (len(rb), rb.write_count) == (0, 0)
    with pytest.raises(RuntimeError):
        rb.sample(4)
    if prioritized:
        assert rb.sampler._max_priority[0] is None and trb.sampler._max_priority[0] is None
    data = batch(5, 2, dev)
    assert torch.equal(rb.extend(data.clone()).cpu(), trb.extend(data.clone().cpu()))
    for i in range(5):
        assert_same(rb[i], trb[i])
    assert len(rb) == 5 and rb.sample(4)["index"].max() < 5
    if prioritized:
        assert float(rb.sampler._max_priority[0]) == float(trb.sampler._max_priority[0]) == 1.0
        assert rb.storage.table.total_priority() == pytest.approx(5.0)


# ------------------------------------------------------------------ TorchRL's own classes


@pytest.mark.parametrize("dev", DEVICES)
def test_torchrl_classes_and_samplers_over_agrl_storage(dev):
    data = batch(30, 3, dev)
    for sampler in (atr.AgrlSampler(), RandomSampler()):  # one agrl call; TorchRL's draw + agrl's gather
        st = atr.AgrlStorage(50, device=dev, seed=1)
        rb = TensorDictReplayBuffer(storage=st, sampler=sampler, collate_fn=atr.collate, batch_size=16)
        assert rb.extend(data.clone()).tolist() == list(range(30))
        s = rb.sample()
        assert s.batch_size == torch.Size([16]) and s["index"].dtype == torch.int64
        assert_same(s, data[s["index"].cpu()], skip=[("index",)])
        it = iter(rb)
        assert next(it).batch_size == torch.Size([16])
    # isinstance holds for TorchRL's classes, and for its prioritized sampler
    prb = ours(dev, 8, True)
    assert isinstance(prb, TensorDictPrioritizedReplayBuffer) and isinstance(prb, TensorDictReplayBuffer)
    from torchrl.data.replay_buffers.samplers import PrioritizedSampler
    assert isinstance(prb.sampler, PrioritizedSampler)
    # a transform runs on TorchRL's path
    rb = ours(dev, 50, transform=lambda td: td.set("doubled", td["observation"] * 2))
    rb.extend(data.clone())
    s = rb.sample(8)
    assert torch.equal(s["doubled"], s["observation"] * 2)


# ------------------------------------------------------------------ fields, dtypes, refusals


@pytest.mark.parametrize("dev", DEVICES)
def test_fields_dtypes_and_refusals(dev):
    data = batch(6, 4, dev, extra=True)
    rb = ours(dev, 8)
    rb.extend(data.clone())
    f = rb.storage.fields
    assert f[("next", "done")] == ((1,), torch.bool) and f[("collector", "traj_ids")] == ((), torch.int64)
    assert f[("half",)] == ((2,), torch.float16) and f[("brain",)] == ((2,), torch.bfloat16)
    assert f[("pixels",)] == ((2, 3), torch.uint8) and ("index",) not in f
    assert_same(rb[:], data, skip=[("index",)], device=dev)
    # explicit fields: a subset; the other keys of later writes are left out
    spec = {"observation": ((OBS,), torch.float32), ("next", "reward"): ((1,), torch.float32)}
    sub = atr.TensorDictReplayBuffer(storage=atr.AgrlStorage(8, device=dev, fields=spec))
    sub.extend(data.clone())
    got = sub[:]
    assert sorted(leaves(got)) == [("index",), ("next", "reward"), ("observation",)]
    assert torch.equal(got["next", "reward"], data["next", "reward"])
    # a template TensorDict gives the fields as well
    tmpl = atr.AgrlStorage(8, device=dev, fields=data[0].select("observation", "action"))
    assert tmpl.fields == {("observation",): ((OBS,), torch.float32), ("action",): ((N_ACT,), torch.int64)}
    # refused: float64, missing keys, wrong shapes, writes at given rows
    with pytest.raises(TypeError):
        ours(dev, 8).extend(TensorDict({"x": torch.zeros(3, 2, dtype=torch.float64)}, [3]))
    with pytest.raises(KeyError):
        rb.extend(data.clone().exclude(("next", "reward")))
    bad = data.clone()
    bad["observation"] = torch.zeros(6, OBS + 1, device=dev)
    with pytest.raises(ValueError):
        rb.extend(bad)
    with pytest.raises(NotImplementedError):
        rb[0] = data[0].clone()
    # a refused write leaves the buffer as it was: the next one lands where it should
    assert (len(rb), rb.write_count, rb.writer._cursor) == (6, 6, 6)
    assert rb.extend(data[:1].clone()).tolist() == [6]
    assert_same(rb[6], data[0], skip=[("index",)])
    with pytest.raises(TypeError):
        atr.TensorDictReplayBuffer(storage=LazyTensorStorage(8))
    with pytest.raises(RuntimeError):
        ours(dev, 8).sample(4)
    with pytest.raises(IndexError):
        rb[7]
    # alpha is the table's once it is made; beta may move
    prb = ours(dev, 8, True)
    prb.extend(batch(3, 1, dev))
    with pytest.raises(NotImplementedError):
        prb.sampler.alpha = 0.3
    prb.sampler.beta = 0.9
    assert prb.sampler.beta == 0.9
