"""JAX peer for the DQN update rows (see README.md for the definition).

usage: python3 bench/peers/jax_dqn.py [cpu|cuda]

The same update as torch_dqn.py, in plain jnp (MLPs initialised as
PyTorch's nn.Linear: W, b ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in))), with
optax.adam (or an equivalent Adam in jnp when optax is missing). Impls:

  jax_jit    one jitted update per call; the PRNG key is split inside
  jax_fused  FUSED updates in one jitted lax.scan; the row reports the
             call time / FUSED, i.e. per update

Compilation happens before timing (in the correctness check), never inside
a timed repetition. Prints one JSON line per row, a "check" line with the
loss of the 200th update from seed 0 per shape, absent lines otherwise.
"""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peerlib as pl  # noqa: E402

SEED = 0
FUSED = 1000  # updates per jax_fused call
IMPLS = ["jax_jit", "jax_fused"]


class JnpAdam:
    """Adam as optax.adam computes it (bias-corrected, eps outside the sqrt),
    with the same init/update interface; used only when optax is missing."""

    def __init__(self, jax, lr, b1, b2, eps):
        self.jax, self.lr, self.b1, self.b2, self.eps = jax, lr, b1, b2, eps

    def init(self, params):
        jnp, tm = self.jax.numpy, self.jax.tree_util.tree_map
        zeros = tm(jnp.zeros_like, params)
        return (jnp.zeros((), jnp.int32), zeros, tm(jnp.zeros_like, params))

    def update(self, grads, state, params=None):
        jnp, tm = self.jax.numpy, self.jax.tree_util.tree_map
        count, mu, nu = state
        count = count + 1
        mu = tm(lambda m, g: self.b1 * m + (1 - self.b1) * g, mu, grads)
        nu = tm(lambda v, g: self.b2 * v + (1 - self.b2) * g * g, nu, grads)
        c1 = 1 - self.b1 ** count.astype(jnp.float32)
        c2 = 1 - self.b2 ** count.astype(jnp.float32)
        upd = tm(lambda m, v: -self.lr * (m / c1) / (jnp.sqrt(v / c2) + self.eps), mu, nu)
        return upd, (count, mu, nu)


def make_optimizer(jax):
    """optax.adam with the shared hyper-parameters, else JnpAdam; and a note."""
    b1, b2 = pl.BETAS
    try:
        import optax
        return optax.adam(pl.LR, b1=b1, b2=b2, eps=pl.EPS), "optax.adam"
    except Exception:
        return JnpAdam(jax, pl.LR, b1, b2, pl.EPS), "Adam in jnp (no optax)"


def init_mlp(jax, key, sizes):
    """[(W, b), ...] with nn.Linear's default bounds."""
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        key, kw, kb = jax.random.split(key, 3)
        bound = 1.0 / math.sqrt(fan_in)
        params.append((jax.random.uniform(kw, (fan_in, fan_out), minval=-bound, maxval=bound),
                       jax.random.uniform(kb, (fan_out,), minval=-bound, maxval=bound)))
    return params


def mlp(jax, params, x):
    for w, b in params[:-1]:
        x = jax.nn.relu(x @ w + b)
    w, b = params[-1]
    return x @ w + b


def make_buffer(jax, spec, device, seed=SEED):
    """(CAPACITY, rows) f32 on the device: normal, then the action column a
    uniform index stored as float, the done column Bernoulli(DONE_P)."""
    jnp = jax.numpy
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(seed + 100), 3)
    n_act = spec["sizes"][-1]

    @jax.jit
    def build():
        buf = jax.random.normal(k1, (pl.CAPACITY, spec["rows"]), jnp.float32)
        buf = buf.at[:, spec["act"]].set(
            jax.random.randint(k2, (pl.CAPACITY,), 0, n_act).astype(jnp.float32))
        return buf.at[:, spec["done"]].set(
            jax.random.bernoulli(k3, pl.DONE_P, (pl.CAPACITY,)).astype(jnp.float32))

    with jax.default_device(device):
        return jax.block_until_ready(build())


def make_update(jax, spec, opt):
    """update(carry, buf) -> (carry, loss); carry = (params, target params,
    optimizer state, PRNG key). Pure, so it can be jitted or scanned."""
    jnp = jax.numpy
    s = spec

    def loss_fn(params, tparams, batch):
        obs = batch[:, s["obs"][0]:s["obs"][1]]
        action = batch[:, s["act"]].astype(jnp.int32)
        reward = batch[:, s["rew"]]
        next_obs = batch[:, s["nobs"][0]:s["nobs"][1]]
        done = batch[:, s["done"]]
        q_next = jnp.max(mlp(jax, tparams, next_obs), axis=1)
        y = jax.lax.stop_gradient(reward + pl.GAMMA * (1.0 - done) * q_next)
        q = jnp.take_along_axis(mlp(jax, params, obs), action[:, None], axis=1)[:, 0]
        d = jnp.abs(q - y)  # Huber, delta 1, mean (= torch smooth_l1_loss)
        return jnp.mean(jnp.where(d < 1.0, 0.5 * d * d, d - 0.5))

    def update(carry, buf):
        params, tparams, opt_state, key = carry
        key, sub = jax.random.split(key)
        idx = jax.random.randint(sub, (s["batch"],), 0, pl.CAPACITY)
        batch = buf[idx]
        loss, grads = jax.value_and_grad(loss_fn)(params, tparams, batch)
        updates, opt_state = opt.update(grads, opt_state, params)
        params = jax.tree_util.tree_map(lambda p, u: p + u, params, updates)
        return (params, tparams, opt_state, key), loss

    return update


def init_carry(jax, spec, opt, device, seed=SEED):
    """Fresh online (= target) parameters, Adam state and key on the device."""
    k_init, k_run = jax.random.split(jax.random.PRNGKey(seed))
    params = init_mlp(jax, k_init, spec["sizes"])
    tparams = jax.tree_util.tree_map(lambda x: x.copy(), params)
    carry = (params, tparams, opt.init(params), k_run)
    return jax.device_put(carry, device)


def params_moved(jax, before, after):
    leaves = zip(jax.tree_util.tree_leaves(before), jax.tree_util.tree_leaves(after))
    return any(bool((a != b).any()) for a, b in leaves)


def run_impl(jax, impl, work, step, per_call, spec, opt, buf, device, note):
    """Compiles and checks `step` (carry, buf) -> (carry, loss), then times it."""
    state = {"carry": init_carry(jax, spec, opt, device)}
    before = jax.tree_util.tree_map(lambda x: x.copy(), state["carry"][0])
    state["carry"], loss = step(state["carry"], buf)  # compiles
    loss = float(loss)
    if not (pl.finite(loss) and params_moved(jax, before, state["carry"][0])):
        pl.absent(impl, f"{work}: check failed (loss {loss}, or params did not move)")
        return

    def body(i):
        state["carry"], loss = step(state["carry"], buf)
        return loss

    iters = pl.auto_iters(body, pl.jax_sync, hi=20000 // per_call + 1)
    pl.row(impl, work, pl.measure(body, iters, pl.jax_sync, per_call=per_call), note)


def main():
    dev = pl.device_arg()
    jax, device = pl.import_jax(IMPLS, dev)
    if jax is None:
        return
    opt, opt_note = make_optimizer(jax)
    # Buffers given to a jitted function are donated (updated in place), except
    # on CPU backends old enough not to support donation.
    donate = (0,) if device.platform != "cpu" else ()

    for shape, spec in pl.DQN_SHAPES.items():
        work = pl.dqn_work(shape)
        buf = make_buffer(jax, spec, device)
        update = make_update(jax, spec, opt)

        step = jax.jit(update, donate_argnums=donate)
        run_impl(jax, "jax_jit", work, step, 1, spec, opt, buf, device,
                 f"one jit call per update, {opt_note}")

        def fused(carry, buf, update=update):
            carry, losses = jax.lax.scan(lambda c, _: update(c, buf), carry, None, length=FUSED)
            return carry, losses[-1]

        run_impl(jax, "jax_fused", work, jax.jit(fused, donate_argnums=donate), FUSED,
                 spec, opt, buf, device,
                 f"{FUSED} updates in one jit (lax.scan), time per update, {opt_note}")

        # Information: the loss returned by the 200th update from seed 0.
        carry = init_carry(jax, spec, opt, device)
        for _ in range(200):
            carry, loss = step(carry, buf)
        pl.check("jax_jit", "loss_of_update_200_" + shape, round(float(loss), 6),
                 seed=SEED, device=dev)
        del buf


if __name__ == "__main__":
    main()
