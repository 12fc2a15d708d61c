/* test_config_checks.c — every range agent.h and ac.h promise for
 * ag_dqn_create and ag_ac_create, tried at its boundary on both sides: the
 * last valid value makes an agent that holds it, the first invalid one is
 * refused with the promised status and a message naming the field and its
 * value, before anything is allocated (no host allocation, no device
 * allocation, *out not written). */
#include <float.h>
#include <limits.h>
#include <math.h>

#include "agt.h"
#include "agent/agent_internal.h"
#include "base/base.h"

typedef enum { F_INT, F_I64, F_F32 } ftype;

/* One value of one field: ok (1: accepted; 0: refused with `status`). */
typedef struct entry {
  const char *field;
  double v;
  int ok;
  ag_status status;
} entry;

#define OK(f, v) \
  { (f), (v), 1, AG_OK }
#define BAD(f, v) \
  { (f), (v), 0, AG_ERR_INVALID_ARG }
#define UNSUPPORTED(f, v) \
  { (f), (v), 0, AG_ERR_UNSUPPORTED }

/* "field = value" as the refusals print it. */
static void expected_text(char *buf, size_t n, const char *field, ftype t, double v) {
  if (t == F_F32)
    snprintf(buf, n, "%s = %g", field, (double)(float)v);
  else
    snprintf(buf, n, "%s = %lld", field, (long long)v);
}

static void set_value(void *p, ftype t, double v) {
  if (t == F_INT) *(int *)p = (int)v;
  if (t == F_I64) *(int64_t *)p = (int64_t)v;
  if (t == F_F32) *(float *)p = (float)v;
}

static double get_value(const void *p, ftype t) {
  if (t == F_INT) return *(const int *)p;
  if (t == F_I64) return (double)*(const int64_t *)p;
  return *(const float *)p;
}

/* Whether two values of a field are the same (NaN equals NaN). */
static int same(double a, double b) { return a == b || (isnan(a) && isnan(b)); }

/* The refusal of a create call: status and message, and neither memory
 * (host or device) nor *out touched. `call` runs with out pointing at a
 * sentinel and the host-allocation fault armed for the first allocation. */
typedef ag_status (*create_fn)(ag_ctx *ctx, void *arg, void **out);

static void assert_refused(ag_ctx *ctx, create_fn call, void *arg, ag_status status, const char *fn,
                           const char *text) {
  static int sentinel;
  void *out = &sentinel;
  ag_ctx_stats before, after;
  ag_ctx_get_stats(ctx, &before);
  ag__host_fault_arm(0); /* the first host allocation would fail */
  ag_status s = call(ctx, arg, &out);
  const int64_t pending = ag__host_fault_pending();
  ag__host_fault_arm(-1);
  ag_ctx_get_stats(ctx, &after);
  if (s != status)
    fail_msg("%s: expected %s for %s, got %s (%s)", fn, ag_status_name(status), text, ag_status_name(s),
             ag_last_error());
  if (strncmp(ag_last_error(), fn, strlen(fn)) || !strstr(ag_last_error(), text))
    fail_msg("%s: message \"%s\" does not name \"%s\"", fn, ag_last_error(), text);
  if (pending != 0) fail_msg("%s: %s was refused after a host allocation", fn, text);
  assert_ptr_equal(out, &sentinel);
  assert_int_equal(after.allocs, before.allocs);
  assert_int_equal(after.live_bytes, before.live_bytes);
}

/* ---- DQN ---- */

static ag_dqn_config dqn_base(void) {
  ag_dqn_config c = ag_dqn_defaults();
  c.n_hidden = 1;
  c.hidden[0] = 8;
  c.batch_size = 4;
  c.buffer_size = 16;
  return c;
}

static void *dqn_field(ag_dqn_config *c, const char *name, ftype *t) {
  static const struct {
    const char *name;
    size_t off;
    ftype t;
  } f[] = {
#define FIELD(n, t) {#n, offsetof(ag_dqn_config, n), t}
      FIELD(n_hidden, F_INT),
      FIELD(lr, F_F32),
      FIELD(gamma, F_F32),
      FIELD(batch_size, F_I64),
      FIELD(buffer_size, F_I64),
      FIELD(learning_starts, F_I64),
      FIELD(train_freq, F_I64),
      FIELD(gradient_steps, F_I64),
      FIELD(target_update_interval, F_I64),
      FIELD(tau, F_F32),
      FIELD(exploration_fraction, F_F32),
      FIELD(eps_start, F_F32),
      FIELD(eps_end, F_F32),
      FIELD(max_grad_norm, F_F32),
      FIELD(per, F_INT),
      FIELD(per_alpha, F_F32),
      FIELD(per_beta, F_F32),
      FIELD(per_eps, F_F32),
      FIELD(n_step, F_INT),
      FIELD(n_envs, F_I64),
      {"hidden[0]", offsetof(ag_dqn_config, hidden), F_I64},
      {"hidden[1]", offsetof(ag_dqn_config, hidden) + sizeof(int64_t), F_I64},
#undef FIELD
  };
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
    if (!strcmp(f[i].name, name)) {
      *t = f[i].t;
      return (char *)c + f[i].off;
    }
  fail_msg("no DQN field %s", name);
  return NULL;
}

typedef struct dqn_args {
  int64_t obs_dim, n_actions, total_steps;
  const ag_dqn_config *cfg;
} dqn_args;

static ag_status dqn_call(ag_ctx *ctx, void *arg, void **out) {
  const dqn_args *a = arg;
  return ag_dqn_create(ctx, a->obs_dim, a->n_actions, a->total_steps, a->cfg, (ag_dqn **)out);
}

/* A prioritized table is refused on a device without its kernels (a
 * Vulkan device without shaderFloat64): a valid per = 1 may meet that. */
static int per_unsupported_here(ag_status s) {
  return s == AG_ERR_UNSUPPORTED && strstr(ag_last_error(), "prioritized sampler's kernels");
}

static void dqn_config_ranges_at_their_boundaries(void **state) {
  (void)state;
  const double tiny = 0x1p-149; /* the smallest positive float */
  const double below0 = -tiny, above1 = nextafterf(1.0f, 2.0f);
  const entry es[] = {
      OK("n_hidden", 0), OK("n_hidden", AG_DQN_MAX_HIDDEN), BAD("n_hidden", -1),
      BAD("n_hidden", AG_DQN_MAX_HIDDEN + 1), OK("hidden[0]", 1), BAD("hidden[0]", 0), BAD("hidden[0]", -5),
      OK("hidden[1]", 1), BAD("hidden[1]", 0),
      /* lr in (0, 1e6) */
      OK("lr", tiny), BAD("lr", 0), BAD("lr", -1), OK("lr", nextafterf(1e6f, 0.0f)), BAD("lr", 1e6),
      BAD("lr", INFINITY), BAD("lr", NAN),
      /* gamma in [0, 1] */
      OK("gamma", 0), BAD("gamma", below0), OK("gamma", 1), BAD("gamma", above1), BAD("gamma", NAN),
      OK("batch_size", 1), BAD("batch_size", 0), BAD("batch_size", -1),
      /* buffer_size >= batch_size (4) */
      OK("buffer_size", 4), BAD("buffer_size", 3), BAD("buffer_size", 0), OK("learning_starts", 0),
      BAD("learning_starts", -1), OK("train_freq", 1), BAD("train_freq", 0), OK("gradient_steps", 0),
      BAD("gradient_steps", -1), OK("target_update_interval", 1), BAD("target_update_interval", 0),
      /* tau in (0, 1] */
      OK("tau", tiny), BAD("tau", 0), OK("tau", 1), BAD("tau", above1), BAD("tau", NAN),
      /* [0, 1] */
      OK("exploration_fraction", 0), BAD("exploration_fraction", below0), OK("exploration_fraction", 1),
      BAD("exploration_fraction", above1), BAD("exploration_fraction", NAN), OK("eps_start", 0),
      BAD("eps_start", below0), OK("eps_start", 1), BAD("eps_start", above1), BAD("eps_start", NAN),
      OK("eps_end", 0), BAD("eps_end", below0), OK("eps_end", 1), BAD("eps_end", above1), BAD("eps_end", NAN),
      /* max_grad_norm >= 0 and finite (0: none) */
      OK("max_grad_norm", 0), BAD("max_grad_norm", below0), OK("max_grad_norm", FLT_MAX),
      BAD("max_grad_norm", INFINITY), BAD("max_grad_norm", NAN),
      /* per 0 or 1 */
      OK("per", 0), OK("per", 1), BAD("per", -1), BAD("per", 2),
      /* per_alpha, per_beta in [0, 1], per_eps in (0, 1] */
      OK("per_alpha", 0), BAD("per_alpha", below0), OK("per_alpha", 1), BAD("per_alpha", above1),
      BAD("per_alpha", NAN), OK("per_beta", 0), BAD("per_beta", below0), OK("per_beta", 1),
      BAD("per_beta", above1), BAD("per_beta", NAN), OK("per_eps", tiny), BAD("per_eps", 0), OK("per_eps", 1),
      BAD("per_eps", above1), BAD("per_eps", NAN),
      /* n_step in 1..64 */
      OK("n_step", 1), BAD("n_step", 0), BAD("n_step", -3), BAD("n_step", INT_MIN), OK("n_step", 64),
      BAD("n_step", 65), BAD("n_step", 100), BAD("n_step", INT_MAX),
      /* n_envs in 1..2^20 */
      OK("n_envs", 1), BAD("n_envs", 0), BAD("n_envs", -1), OK("n_envs", 1 << 20),
      BAD("n_envs", (1 << 20) + 1), BAD("n_envs", 0x1p62),
      /* prioritized replay's limit on the table (ag_per_create's), checked
       * before the table is made: 2^31 and 2^32 columns */
      UNSUPPORTED("buffer_size", 0x1p31), UNSUPPORTED("buffer_size", 0x1p32)};
  ag_ctx *ctx = agt_ctx();
  const uint64_t live = agt_live_bytes(ctx);
  int made = 0, refused = 0;
  for (size_t i = 0; i < sizeof es / sizeof es[0]; i++) {
    ag_dqn_config c = dqn_base();
    if (!strcmp(es[i].field, "n_hidden") && es[i].ok)
      for (int k = 0; k < AG_DQN_MAX_HIDDEN; k++) c.hidden[k] = 8;
    if (!strncmp(es[i].field, "hidden[1]", 9)) c.n_hidden = 2, c.hidden[1] = 8;
    if (es[i].status == AG_ERR_UNSUPPORTED) c.per = 1;
    ftype t = F_INT;
    void *p = dqn_field(&c, es[i].field, &t);
    set_value(p, t, es[i].v);
    dqn_args a = {3, 2, 100, &c};
    char text[96];
    expected_text(text, sizeof text, es[i].field, t, es[i].v);
    if (!es[i].ok) {
      assert_refused(ctx, dqn_call, &a, es[i].status, "ag_dqn_create", text);
      refused++;
      continue;
    }
    ag_dqn *d = NULL;
    ag_status s = ag_dqn_create(ctx, 3, 2, 100, &c, &d);
    if (c.per && per_unsupported_here(s)) continue;
    if (s) fail_msg("ag_dqn_create refused %s: %s", text, ag_last_error());
    ag_dqn_config got = *ag_dqn_get_config(d);
    if (!same(get_value(dqn_field(&got, es[i].field, &t), t), es[i].v))
      fail_msg("the DQN made with %s holds another value", text);
    ag_dqn_free(d);
    made++;
  }
  printf("  %d values accepted, %d refused\n", made, refused);
  assert_int_equal(agt_live_bytes(ctx), live);
  ag_ctx_free(ctx);
}

/* The sizes and pointers ag_dqn_create takes besides the configuration. */
static void dqn_sizes_and_pointers(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const ag_dqn_config c = dqn_base();
  const struct {
    int64_t od, na, total;
    int ok;
    const char *text;
  } cs[] = {{1, 2, 1, 1, ""},
            {0, 2, 1, 0, "obs_dim = 0"},
            {-1, 2, 1, 0, "obs_dim = -1"},
            {1, 1, 1, 0, "n_actions = 1"},
            {1, 2, 0, 0, "total_steps = 0"}};
  for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
    dqn_args a = {cs[i].od, cs[i].na, cs[i].total, &c};
    if (!cs[i].ok) {
      assert_refused(ctx, dqn_call, &a, AG_ERR_INVALID_ARG, "ag_dqn_create", cs[i].text);
      continue;
    }
    ag_dqn *d = NULL;
    agt_ok(ag_dqn_create(ctx, cs[i].od, cs[i].na, cs[i].total, &c, &d));
    ag_dqn_free(d);
  }
  ag_dqn *d = (ag_dqn *)&c;
  agt_err(ag_dqn_create(NULL, 3, 2, 10, &c, &d), AG_ERR_INVALID_ARG, "must not be NULL");
  agt_err(ag_dqn_create(ctx, 3, 2, 10, NULL, &d), AG_ERR_INVALID_ARG, "must not be NULL");
  agt_err(ag_dqn_create(ctx, 3, 2, 10, &c, NULL), AG_ERR_INVALID_ARG, "must not be NULL");
  assert_ptr_equal(d, (ag_dqn *)&c);
  ag_ctx_free(ctx);
}

/* The limit of prioritized replay at its boundary, on the check alone (a
 * table of 2^31 - 1 columns is not made here): 2^31 - 1 passes, 2^31 is
 * refused; without per the check leaves the table's size to the table. */
static void dqn_per_capacity_limit(void **state) {
  (void)state;
  ag_dqn_config c = dqn_base();
  c.per = 1;
  c.buffer_size = INT32_MAX;
  agt_ok(ag__dqn_check_config(&c, "check"));
  c.buffer_size = (int64_t)INT32_MAX + 1;
  agt_err(ag__dqn_check_config(&c, "check"), AG_ERR_UNSUPPORTED, "buffer_size = 2147483648");
  c.per = 0;
  agt_ok(ag__dqn_check_config(&c, "check"));
}

/* ---- SAC and TD3 ---- */

enum { OD = 3, A = 1 };
static const float LOW[A] = {-2.0f}, HIGH[A] = {2.0f};

static ag_ac_config ac_base(ag_ac_algo algo) {
  ag_ac_config c = ag_ac_defaults(algo);
  c.n_hidden = 1;
  c.hidden[0] = 8;
  c.batch_size = 4;
  c.buffer_size = 16;
  return c;
}

static void *ac_field(ag_ac_config *c, const char *name, ftype *t) {
  static const struct {
    const char *name;
    size_t off;
    ftype t;
  } f[] = {
#define FIELD(n, t) {#n, offsetof(ag_ac_config, n), t}
      FIELD(n_hidden, F_INT),     FIELD(actor_lr, F_F32),
      FIELD(critic_lr, F_F32),    FIELD(gamma, F_F32),
      FIELD(tau, F_F32),          FIELD(batch_size, F_I64),
      FIELD(buffer_size, F_I64),  FIELD(learning_starts, F_I64),
      FIELD(train_freq, F_I64),   FIELD(gradient_steps, F_I64),
      FIELD(policy_delay, F_INT), FIELD(alpha, F_F32),
      FIELD(autotune, F_INT),     FIELD(target_entropy, F_F32),
      FIELD(expl_noise, F_F32),   FIELD(target_noise, F_F32),
      FIELD(noise_clip, F_F32),   FIELD(noise_rho, F_F32),
      FIELD(n_step, F_INT),       FIELD(n_envs, F_I64),
      FIELD(fused, F_INT),        {"hidden[0]", offsetof(ag_ac_config, hidden), F_I64},
#undef FIELD
  };
  if (!strcmp(name, "algo")) {
    *t = F_INT;
    assert_int_equal(sizeof c->algo, sizeof(int));
    return &c->algo;
  }
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
    if (!strcmp(f[i].name, name)) {
      *t = f[i].t;
      return (char *)c + f[i].off;
    }
  fail_msg("no actor-critic field %s", name);
  return NULL;
}

typedef struct ac_args {
  int64_t obs_dim, act_dim, total_steps;
  const float *low, *high;
  const ag_ac_config *cfg;
} ac_args;

static ag_status ac_call(ag_ctx *ctx, void *arg, void **out) {
  const ac_args *a = arg;
  return ag_ac_create(ctx, a->obs_dim, a->act_dim, a->low, a->high, a->total_steps, a->cfg, (ag_ac **)out);
}

static void ac_config_ranges_at_their_boundaries(void **state) {
  (void)state;
  const double tiny = 0x1p-149;
  const double below0 = -tiny, above1 = nextafterf(1.0f, 2.0f), below1 = nextafterf(1.0f, 0.0f);
  const double above10 = nextafterf(10.0f, 11.0f);
  const entry es[] = {
      OK("algo", AG_AC_SAC), OK("algo", AG_AC_TD3), BAD("algo", -1), BAD("algo", 2),
      /* n_hidden in 1..8, hidden sizes in 1..2^31-1 */
      OK("n_hidden", 1), OK("n_hidden", AG_AC_MAX_HIDDEN), BAD("n_hidden", 0),
      BAD("n_hidden", AG_AC_MAX_HIDDEN + 1), OK("hidden[0]", 1), BAD("hidden[0]", 0),
      BAD("hidden[0]", 0x1p31),
      /* learning rates in (0, 10] */
      OK("actor_lr", tiny), BAD("actor_lr", 0), OK("actor_lr", 10), BAD("actor_lr", above10),
      BAD("actor_lr", NAN), OK("critic_lr", tiny), BAD("critic_lr", 0), OK("critic_lr", 10),
      BAD("critic_lr", above10), BAD("critic_lr", NAN),
      /* gamma in [0, 1], tau in (0, 1] */
      OK("gamma", 0), BAD("gamma", below0), OK("gamma", 1), BAD("gamma", above1), BAD("gamma", NAN),
      OK("tau", tiny), BAD("tau", 0), OK("tau", 1), BAD("tau", above1), BAD("tau", NAN),
      /* batch_size >= 1, buffer_size >= batch_size (4) */
      OK("batch_size", 1), BAD("batch_size", 0), OK("buffer_size", 4), BAD("buffer_size", 3),
      OK("learning_starts", 0), BAD("learning_starts", -1), OK("train_freq", 1), BAD("train_freq", 0),
      OK("gradient_steps", 0), BAD("gradient_steps", -1),
      /* policy_delay in 1..1000 */
      OK("policy_delay", 1), BAD("policy_delay", 0), OK("policy_delay", 1000), BAD("policy_delay", 1001),
      /* alpha in (0, 1e6) */
      OK("alpha", tiny), BAD("alpha", 0), OK("alpha", nextafterf(1e6f, 0.0f)), BAD("alpha", 1e6),
      BAD("alpha", NAN),
      /* autotune 0 or 1; target_entropy finite or NaN */
      OK("autotune", 0), OK("autotune", 1), BAD("autotune", -1), BAD("autotune", 2),
      OK("target_entropy", NAN), OK("target_entropy", FLT_MAX), OK("target_entropy", -FLT_MAX),
      BAD("target_entropy", INFINITY), BAD("target_entropy", -INFINITY),
      /* noise scales in [0, 10] */
      OK("expl_noise", 0), BAD("expl_noise", below0), OK("expl_noise", 10), BAD("expl_noise", above10),
      BAD("expl_noise", NAN), OK("target_noise", 0), BAD("target_noise", below0), OK("target_noise", 10),
      BAD("target_noise", above10), BAD("target_noise", NAN), OK("noise_clip", 0), BAD("noise_clip", below0),
      OK("noise_clip", 10), BAD("noise_clip", above10), BAD("noise_clip", NAN),
      /* noise_rho in [0, 1) */
      OK("noise_rho", 0), BAD("noise_rho", below0), OK("noise_rho", below1), BAD("noise_rho", 1),
      BAD("noise_rho", NAN),
      /* n_step in 1..64, n_envs in 1..2^20 */
      OK("n_step", 1), BAD("n_step", 0), BAD("n_step", -3), OK("n_step", 64), BAD("n_step", 65),
      OK("n_envs", 1), BAD("n_envs", 0), OK("n_envs", 1 << 20), BAD("n_envs", (1 << 20) + 1),
      /* fused 0 or 1 */
      OK("fused", 0), OK("fused", 1), BAD("fused", -1), BAD("fused", 2)};
  ag_ctx *ctx = agt_ctx();
  const uint64_t live = agt_live_bytes(ctx);
  int made = 0, refused = 0;
  for (int algo = 0; algo < 2; algo++)
    for (size_t i = 0; i < sizeof es / sizeof es[0]; i++) {
      ag_ac_config c = ac_base((ag_ac_algo)algo);
      if (!strcmp(es[i].field, "n_hidden") && es[i].ok)
        for (int k = 0; k < AG_AC_MAX_HIDDEN; k++) c.hidden[k] = 8;
      ftype t = F_INT;
      void *p = ac_field(&c, es[i].field, &t);
      set_value(p, t, es[i].v);
      ac_args a = {OD, A, 100, LOW, HIGH, &c};
      char text[96];
      expected_text(text, sizeof text, es[i].field, t, es[i].v);
      if (!es[i].ok) {
        assert_refused(ctx, ac_call, &a, es[i].status, "ag_ac_create", text);
        refused++;
        continue;
      }
      ag_ac *ac = NULL;
      if (ag_ac_create(ctx, OD, A, LOW, HIGH, 100, &c, &ac))
        fail_msg("ag_ac_create refused %s: %s", text, ag_last_error());
      ag_ac_config got = *ag_ac_get_config(ac);
      if (!same(get_value(ac_field(&got, es[i].field, &t), t), es[i].v))
        fail_msg("the agent made with %s holds another value", text);
      ag_ac_free(ac);
      made++;
    }
  printf("  %d values accepted, %d refused\n", made, refused);
  assert_int_equal(agt_live_bytes(ctx), live);
  ag_ctx_free(ctx);
}

/* The sizes, bounds and pointers ag_ac_create takes besides the
 * configuration. */
static void ac_sizes_bounds_and_pointers(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const ag_ac_config c = ac_base(AG_AC_SAC);
  float lo[65], hi[65];
  for (int i = 0; i < 65; i++) lo[i] = -1.0f, hi[i] = 1.0f;
  const float one = 1.0f, up = nextafterf(1.0f, 2.0f), nan_ = NAN, inf = INFINITY, ninf = -INFINITY;
  const struct {
    int64_t od, ad, total;
    const float *low, *high;
    int ok;
    const char *text;
  } cs[] = {{1, 1, 1, lo, hi, 1, ""},
            {1, 64, 1, lo, hi, 1, ""},
            {1, 1, 1, &one, &up, 1, ""},
            {0, 1, 1, lo, hi, 0, "obs_dim = 0"},
            {(int64_t)INT32_MAX + 1, 1, 1, lo, hi, 0, "obs_dim = 2147483648"},
            {1, 0, 1, lo, hi, 0, "act_dim = 0"},
            {1, 65, 1, lo, hi, 0, "act_dim = 65"},
            {1, 1, 0, lo, hi, 0, "total_steps = 0"},
            {1, 1, 1, &one, &one, 0, "bounds [1, 1]"},
            {1, 1, 1, &up, &one, 0, "bounds"},
            {1, 1, 1, &nan_, &one, 0, "bounds [nan, 1]"},
            {1, 1, 1, &ninf, &one, 0, "bounds [-inf, 1]"},
            {1, 1, 1, lo, &inf, 0, "bounds [-1, inf]"}};
  for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
    ac_args a = {cs[i].od, cs[i].ad, cs[i].total, cs[i].low, cs[i].high, &c};
    if (!cs[i].ok) {
      assert_refused(ctx, ac_call, &a, AG_ERR_INVALID_ARG, "ag_ac_create", cs[i].text);
      continue;
    }
    ag_ac *ac = NULL;
    agt_ok(ag_ac_create(ctx, cs[i].od, cs[i].ad, cs[i].low, cs[i].high, cs[i].total, &c, &ac));
    ag_ac_free(ac);
  }
  ag_ac *ac = (ag_ac *)&c;
  agt_err(ag_ac_create(NULL, OD, A, LOW, HIGH, 10, &c, &ac), AG_ERR_INVALID_ARG, "must not be NULL");
  agt_err(ag_ac_create(ctx, OD, A, NULL, HIGH, 10, &c, &ac), AG_ERR_INVALID_ARG, "must not be NULL");
  agt_err(ag_ac_create(ctx, OD, A, LOW, NULL, 10, &c, &ac), AG_ERR_INVALID_ARG, "must not be NULL");
  agt_err(ag_ac_create(ctx, OD, A, LOW, HIGH, 10, NULL, &ac), AG_ERR_INVALID_ARG, "must not be NULL");
  agt_err(ag_ac_create(ctx, OD, A, LOW, HIGH, 10, &c, NULL), AG_ERR_INVALID_ARG, "must not be NULL");
  assert_ptr_equal(ac, (ag_ac *)&c);
  ag_ctx_free(ctx);
}

/* The upper limit of a hidden size, on the check alone (a layer of
 * 2^31 - 1 is not made here). */
static void ac_hidden_limit(void **state) {
  (void)state;
  ag_ac_config c = ac_base(AG_AC_SAC);
  c.hidden[0] = INT32_MAX;
  agt_ok(ag__ac_check_config(&c, "check"));
  c.hidden[0] = (int64_t)INT32_MAX + 1;
  agt_err(ag__ac_check_config(&c, "check"), AG_ERR_INVALID_ARG, "hidden[0] = 2147483648");
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(dqn_config_ranges_at_their_boundaries),
      cmocka_unit_test(dqn_sizes_and_pointers),
      cmocka_unit_test(dqn_per_capacity_limit),
      cmocka_unit_test(ac_config_ranges_at_their_boundaries),
      cmocka_unit_test(ac_sizes_bounds_and_pointers),
      cmocka_unit_test(ac_hidden_limit),
  };
  return agt_run(argc, argv, "config_checks", tests, sizeof tests / sizeof tests[0]);
}
