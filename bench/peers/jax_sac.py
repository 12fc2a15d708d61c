"""JAX peer for the SAC and TD3 update rows (see README.md; the definition
is ac_defs.py's, the same update as torch_sac.py in pure functions).

usage: python3 bench/peers/jax_sac.py [cpu|cuda] [--algos sac,td3]
           [--impls jax-jit,jax-scan100] [--iters N] [--reps N] [--threads N]
           [--matmul-precision highest|high|default]

The state (actor, critics, targets, log alpha, the optax.adam states, the
PRNG key) is one pytree; an update is a pure function of it and of the
(100000, 9) f32 table on the device. Impls:

  jax-jit      one jitted update a call (TD3: two jitted functions, the
               critics' update and the critics + actor update, called in
               turn); the PRNG key is split inside; the state donated (GPU)
  jax-scan100  100 updates in one jitted lax.scan (TD3: 50 pairs); the row
               is the call time / 100

Matrix products are f32 (jax_default_matmul_precision "highest"), as
torch's and agrl's; on the GPU XLA may otherwise take TF32.
Compilation happens before timing (in the check), never inside a timed
repetition. A check line per algorithm gives the losses of
ac_defs.CHECK_UPDATES updates from ac_defs' weights with ac_defs' fixed
draws (torch_sac.py prints the same line; they must agree).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ac_defs as D  # noqa: E402
import peerlib as pl  # noqa: E402

IMPLS = ("jax-jit", "jax-scan100")


def make_adam(jax, lr):
    """optax.adam, or peers' jnp Adam (jax_dqn.JnpAdam) when optax is missing."""
    b1, b2 = D.BETAS
    try:
        import optax
        return optax.adam(lr, b1=b1, b2=b2, eps=D.ADAM_EPS), "optax.adam"
    except Exception:
        from jax_dqn import JnpAdam
        return JnpAdam(jax, lr, b1, b2, D.ADAM_EPS), "Adam in jnp (no optax)"


def mlp(jax, params, x):
    for w, b in params[:-1]:
        x = jax.nn.relu(x @ w + b)
    w, b = params[-1]
    return x @ w + b


class Update:
    """The pure update functions of one algorithm."""

    def __init__(self, jax, algo, n_rows):
        self.jax, self.algo, self.n = jax, algo, n_rows
        self.sac = algo == "sac"
        self.opt_q, self.opt_note = make_adam(jax, D.CRITIC_LR)
        self.opt_pi, _ = make_adam(jax, D.ACTOR_LR)
        self.opt_alpha, _ = make_adam(jax, D.CRITIC_LR)

    def init(self, np, device, seed=D.SEED):
        jax, jnp = self.jax, self.jax.numpy
        p = D.init_params(np, self.algo, seed)
        conv = lambda layers: [(jnp.asarray(w), jnp.asarray(b)) for w, b in layers]  # noqa: E731
        actor, q = conv(p["actor"]), (conv(p["q1"]), conv(p["q2"]))
        st = dict(actor=actor, q=q, qt=jax.tree_util.tree_map(lambda x: x.copy(), q),
                  opt_pi=self.opt_pi.init(actor), opt_q=self.opt_q.init(q),
                  key=jax.random.PRNGKey(seed))
        if self.sac:
            st["log_alpha"] = jnp.asarray(float(np.log(D.ALPHA0)), jnp.float32)
            st["opt_alpha"] = self.opt_alpha.init(st["log_alpha"])
        else:
            st["actor_t"] = jax.tree_util.tree_map(lambda x: x.copy(), actor)
        return jax.device_put(st, device)

    def sample(self, actor, x, eps):
        jnp = self.jax.numpy
        out = mlp(self.jax, actor, x)
        mu, raw = out[:, :D.ACT], out[:, D.ACT:]
        log_std = D.LOG_STD_MIN + 0.5 * (D.LOG_STD_MAX - D.LOG_STD_MIN) * (jnp.tanh(raw) + 1.0)
        a = jnp.tanh(mu + jnp.exp(log_std) * eps)
        logp = jnp.sum(-0.5 * eps * eps - log_std - 0.5 * D.LOG_2PI - jnp.log(1.0 - a * a + 1e-6), axis=1)
        return a, logp

    def draws(self, key):
        jax = self.jax
        key, k1, k2, k3 = jax.random.split(key, 4)
        return key, (jax.random.randint(k1, (D.BATCH,), 0, self.n),
                     jax.random.normal(k2, (D.BATCH, D.ACT)), jax.random.normal(k3, (D.BATCH, D.ACT)))

    def step(self, st, table, draws, actor_too):
        """One update with the given draws; returns (state, (closs, aloss))."""
        jax, jnp = self.jax, self.jax.numpy
        tm, sg = jax.tree_util.tree_map, jax.lax.stop_gradient
        idx, eps_n, eps_p = draws
        b = jnp.take(table, idx, axis=0)
        obs, act = b[:, D.C_OBS[0]:D.C_OBS[1]], b[:, D.C_ACT[0]:D.C_ACT[1]]
        rew, nobs, term = b[:, D.C_REW], b[:, D.C_NOBS[0]:D.C_NOBS[1]], b[:, D.C_TERM]
        st = dict(st)
        if self.sac:
            alpha = jnp.exp(st["log_alpha"])
            na, nlp = self.sample(st["actor"], nobs, eps_n)
        else:
            noise = jnp.clip(eps_n * D.TARGET_NOISE, -D.NOISE_CLIP, D.NOISE_CLIP)
            na = jnp.clip(jnp.tanh(mlp(jax, st["actor_t"], nobs)) + noise, -1.0, 1.0)
        x = jnp.concatenate([nobs, na], 1)
        v = jnp.minimum(mlp(jax, st["qt"][0], x), mlp(jax, st["qt"][1], x))[:, 0]
        if self.sac:
            v = v - alpha * nlp
        y = sg(rew + D.GAMMA * (1.0 - term) * v)
        xq = jnp.concatenate([obs, act], 1)

        def closs_fn(q):
            return jnp.mean((mlp(jax, q[0], xq)[:, 0] - y) ** 2) + jnp.mean((mlp(jax, q[1], xq)[:, 0] - y) ** 2)

        closs, g = jax.value_and_grad(closs_fn)(st["q"])
        upd, st["opt_q"] = self.opt_q.update(g, st["opt_q"], st["q"])
        st["q"] = tm(lambda p, u: p + u, st["q"], upd)
        if not actor_too:
            return st, (closs, jnp.float32(jnp.nan))
        q = st["q"]

        def aloss_fn(actor):
            if self.sac:
                pa, lp = self.sample(actor, obs, eps_p)
                x = jnp.concatenate([obs, pa], 1)
                return jnp.mean(alpha * lp - jnp.minimum(mlp(jax, q[0], x), mlp(jax, q[1], x))[:, 0]), lp
            x = jnp.concatenate([obs, jnp.tanh(mlp(jax, actor, obs))], 1)
            return -jnp.mean(mlp(jax, q[0], x)), jnp.zeros(())

        (aloss, lp), g = jax.value_and_grad(aloss_fn, has_aux=True)(st["actor"])
        upd, st["opt_pi"] = self.opt_pi.update(g, st["opt_pi"], st["actor"])
        st["actor"] = tm(lambda p, u: p + u, st["actor"], upd)
        if self.sac:  # -log alpha * mean(log pi + target entropy)
            c = sg(jnp.mean(lp) + D.TARGET_ENTROPY)
            ga = jax.grad(lambda la: -la * c)(st["log_alpha"])
            upd, st["opt_alpha"] = self.opt_alpha.update(ga, st["opt_alpha"], st["log_alpha"])
            st["log_alpha"] = st["log_alpha"] + upd
        lerp = lambda t, p: t + D.TAU * (p - t)  # noqa: E731
        st["qt"] = tm(lerp, st["qt"], st["q"])
        if not self.sac:
            st["actor_t"] = tm(lerp, st["actor_t"], st["actor"])
        return st, (closs, aloss)

    def random_step(self, st, table, actor_too):
        st = dict(st)
        st["key"], d = self.draws(st["key"])
        return self.step(st, table, d, actor_too)

    def call(self, st, table):
        """One timed call: an update (SAC) or an update pair (TD3)."""
        if self.sac:
            return self.random_step(st, table, True)
        st, _ = self.random_step(st, table, False)
        return self.random_step(st, table, True)

    def fused(self, st, table):
        """FUSED updates in one lax.scan."""
        jax = self.jax
        per = 1 if self.sac else D.POLICY_DELAY_TD3
        st, losses = jax.lax.scan(lambda s, _: self.call(s, table), st, None, length=D.FUSED // per)
        return st, jax.tree_util.tree_map(lambda v: v[-1], losses)


def params_moved(jax, a, b):
    keys = ("actor", "q")
    la = jax.tree_util.tree_leaves([a[k] for k in keys])
    lb = jax.tree_util.tree_leaves([b[k] for k in keys])
    return any(bool((x != y).any()) for x, y in zip(la, lb))


def run_impl(jax, np, impl, work, fn, per_call, upd, table, device, args, note):
    """Compiles and checks fn(state, table) -> (state, (closs, aloss)), then times it."""
    jnp = jax.numpy
    state = {"st": upd.init(np, device)}
    before = jax.tree_util.tree_map(lambda x: jnp.array(x, copy=True), state["st"])
    try:
        state["st"], (c, a) = fn(state["st"], table)  # compiles
        c, a = float(c), float(a)
    except Exception as e:
        pl.absent(impl, f"{work}: failed: {type(e).__name__}: {e}"[:400])
        return
    if not (pl.finite(c) and pl.finite(a) and params_moved(jax, before, state["st"])):
        pl.absent(impl, f"{work}: check failed (losses {c}, {a}, or params did not move)")
        return

    def body(i):
        state["st"], out = fn(state["st"], table)
        return out

    iters = args.iters or pl.auto_iters(body, pl.jax_sync, hi=max(2, 20000 // per_call))
    pl.row(impl, work, pl.measure(body, iters, pl.jax_sync, reps=args.reps, per_call=per_call), note,
           updates_per_call=per_call, iters=iters)


def fixed_losses(jax, np, upd, table, device):
    st = upd.init(np, device)
    step = jax.jit(upd.step, static_argnums=(3,))
    out = []
    for k, d in enumerate(D.check_draws(np, table.shape[0]), 1):
        actor_too = D.is_actor_update(upd.algo, k)
        st, (c, a) = step(st, table, jax.device_put(d, device), actor_too)
        out.append([round(float(c), 6), round(float(a), 6) if actor_too else None])
    return out


def extra_args(ap):
    ap.add_argument("--matmul-precision", default="highest", choices=("highest", "high", "default"),
                    help="jax_default_matmul_precision (highest: f32 products, as torch and agrl; "
                         "default lets XLA take TF32 on the GPU)")


def main():
    args = D.peer_args(__doc__, IMPLS, "1: XLA's multi-threaded Eigen off on the CPU (0: XLA's default)",
                       extra_args)
    dev = args.device
    if dev == "cpu" and args.threads == 1:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false").strip()
    jax, device = pl.import_jax(args.impls, dev)
    if jax is None:
        return
    if args.matmul_precision != "default":
        jax.config.update("jax_default_matmul_precision", args.matmul_precision)
    prec = f"matmul precision {args.matmul_precision}"
    try:
        import numpy as np
    except Exception as e:
        pl.absent(args.impls, f"numpy does not import: {type(e).__name__}: {e}")
        return
    table = jax.device_put(D.table_rows(np, D.pendulum_transitions(np)), device)
    # the state is donated to each call (updated in place) on the GPU
    donate = (0,) if device.platform != "cpu" else ()
    for algo in args.algos:
        work = D.WORK[algo]
        upd = Update(jax, algo, table.shape[0])
        per = 1 if algo == "sac" else D.POLICY_DELAY_TD3
        if "jax-jit" in args.impls:
            if algo == "sac":
                one = jax.jit(upd.call, donate_argnums=donate)
            else:  # two jitted functions called in turn
                crit = jax.jit(lambda s, t: upd.random_step(s, t, False), donate_argnums=donate)
                both = jax.jit(lambda s, t: upd.random_step(s, t, True), donate_argnums=donate)

                def one(s, t, crit=crit, both=both):
                    s, _ = crit(s, t)
                    return both(s, t)
            run_impl(jax, np, "jax-jit", work, one, per, upd, table, device, args,
                     f"one jit call per update, {upd.opt_note}, {prec}"
                     + ("; critic and critic+actor updates in turn" if algo == "td3" else ""))
        if "jax-scan100" in args.impls:
            run_impl(jax, np, "jax-scan100", work, jax.jit(upd.fused, donate_argnums=donate), D.FUSED, upd,
                     table, device, args,
                     f"{D.FUSED} updates in one jit (lax.scan), time per update, {upd.opt_note}, {prec}")
        pl.check("jax-jit", f"{algo}_losses_fixed_draws", fixed_losses(jax, np, upd, table, device),
                 device=dev, updates=D.CHECK_UPDATES, jax=jax.__version__)


if __name__ == "__main__":
    main()
