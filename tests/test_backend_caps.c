/* test_backend_caps.c — a backend that lacks a kernel: callers that find the
 * fused kernel unsupported compose the same work from other kernels.
 *
 * The context's backend is replaced by a copy whose supports() refuses
 * AG__K_QGRAD (the fused DQN update), as a new backend without that kernel
 * would. The DQN must then choose its composed ops by itself and train
 * exactly as a DQN configured without the fused update does. An op with
 * nothing to compose (ag_conv2d without AG__K_CONV2D) refuses instead. */
#include <math.h>

#include "agt.h"
#include "core/internal.h"
#include "nn/nn_internal.h"

static ag__backend masked;
static int (*real_supports)(void *, ag__kernel_id, const void *, size_t);

/* The kernel the masked backend refuses. */
static ag__kernel_id refused = AG__K_QGRAD;

/* Every kernel the real backend has, except `refused`. */
static int no_qgrad(void *st, ag__kernel_id id, const void *args, size_t size) {
  if (id == refused) return 0;
  return real_supports ? real_supports(st, id, args, size) : 1;
}

/* A context whose backend reports AG__K_QGRAD unsupported. */
static ag_ctx *masked_ctx(void) {
  ag_ctx *ctx = agt_ctx();
  masked = *ctx->be;
  real_supports = ctx->be->supports;
  masked.supports = no_qgrad;
  for (ag__store *s = ctx->stores.next; s != &ctx->stores; s = s->next)
    if (s->on == ctx->be) s->on = &masked;
  ctx->be = &masked;
  return ctx;
}

static void fill(ag_dqn *d) {
  agt_rng g = {5};
  for (int t = 0; t < 40; t++) {
    float o[4], no[4], r = agt_uniform(&g, -1, 1);
    for (int e = 0; e < 4; e++) o[e] = agt_uniform(&g, -1, 1), no[e] = agt_uniform(&g, -1, 1);
    int32_t a = (int32_t)agt_below(&g, 3);
    int term = agt_below(&g, 5) == 0;
    agt_ok(ag_dqn_store(d, o, &a, &r, no, &term, 1));
  }
}

static void without_the_fused_kernel_the_dqn_composes_its_update(void **state) {
  (void)state;
  for (int dbl = 0; dbl < 2; dbl++) {
    ag_dqn_config fused = agt_dqn_config(16, 8, 64, 21, 1), composed = fused;
    composed.fused = 0;
    fused.double_dqn = composed.double_dqn = dbl;
    ag_ctx *mc = masked_ctx(), *rc = agt_ctx();
    ag_dqn *m, *r, *f;
    agt_ok(ag_dqn_create(mc, 4, 3, 1000, &fused, &m));
    agt_ok(ag_dqn_create(rc, 4, 3, 1000, &composed, &r));
    agt_ok(ag_dqn_create(rc, 4, 3, 1000, &fused, &f));
    assert_int_equal(ag_dqn_fused(m), 0); /* asked for, not available: composed */
    assert_int_equal(ag_dqn_fused(r), 0);
    /* the same request where the backend has it (vulkan has no fused kernel) */
    assert_int_equal(ag_dqn_fused(f), agt_kind != AG_DEVICE_VULKAN);
    fill(m);
    fill(r);
    for (int k = 0; k < 3; k++) {
      float lm, lr;
      agt_ok(ag_dqn_train(m, 9, &lm));
      agt_ok(ag_dqn_train(r, 9, &lr));
      assert_true(lm == lr);
      assert_true(isfinite(lm));
    }
    assert_int_equal(ag_dqn_updates(m), 27);
    for (int i = 0; i < ag_mlp_n_params(ag_dqn_q(m)); i++) {
      float *a = agt_read_f32(ag_mlp_params(ag_dqn_q(m))[i]),
            *b = agt_read_f32(ag_mlp_params(ag_dqn_q(r))[i]);
      assert_memory_equal(a, b, (size_t)ag_tensor_numel(ag_mlp_params(ag_dqn_q(m))[i]) * sizeof(float));
      free(a);
      free(b);
    }
    /* the op itself refuses, and says why */
    ag__qlearn u;
    memset(&u, 0, sizeof u);
    u.src.table = ag_replay_buffer(ag_dqn_replay(m));
    u.src.size = ag_replay_size_tensor(ag_dqn_replay(m));
    agt_ok(ag_rng_create(mc, 1, &u.src.rng));
    u.src.B = 4;
    u.src.obs_row = 0, u.src.act_row = 4, u.src.rew_row = 5, u.src.next_row = 6, u.src.done_row = 10;
    u.q = ag_dqn_q(m);
    u.target = ag_dqn_target(m);
    u.gamma = 0.9f;
    u.delta = 1.0f;
    assert_int_equal(ag__qlearn_fusable(&u), 0);
    ag_tensor *loss = NULL;
    agt_err(ag__qlearn_step(&u, &loss), AG_ERR_UNSUPPORTED, "does not take the fused update");
    assert_null(loss);
    ag_rng_free(u.src.rng);
    ag_dqn_free(m);
    ag_dqn_free(r);
    ag_dqn_free(f);
    ag_ctx_free(mc);
    ag_ctx_free(rc);
  }
}

/* A DQN made where the fused kernel runs, whose context then moves to a
 * backend without it (as a device switch would: the recordings are made
 * again), goes on with the composed ops, exactly as a composed DQN would. */
static void a_backend_change_drops_the_fused_update(void **state) {
  (void)state;
  ag_dqn_config fused = agt_dqn_config(16, 8, 64, 23, 1), composed = fused;
  composed.fused = 0;
  ag_ctx *mc = agt_ctx(), *rc = agt_ctx();
  ag_dqn *m, *r;
  agt_ok(ag_dqn_create(mc, 4, 3, 1000, &fused, &m));
  agt_ok(ag_dqn_create(rc, 4, 3, 1000, &composed, &r));
  if (agt_kind == AG_DEVICE_VULKAN) { /* no fused kernel to drop there */
    assert_int_equal(ag_dqn_fused(m), 0);
    printf("backend_caps: a_backend_change_drops_the_fused_update: nothing to drop on vulkan\n");
    ag_dqn_free(m);
    ag_dqn_free(r);
    ag_ctx_free(mc);
    ag_ctx_free(rc);
    return;
  }
  assert_int_equal(ag_dqn_fused(m), 1);
  fill(m);
  fill(r);
  /* the context moves to the masked backend; its recordings are stale */
  masked = *mc->be;
  real_supports = mc->be->supports;
  masked.supports = no_qgrad;
  for (ag__store *s = mc->stores.next; s != &mc->stores; s = s->next)
    if (s->on == mc->be) s->on = &masked;
  mc->be = &masked;
  mc->epoch++;
  float lm, lr;
  agt_ok(ag_dqn_train(m, 9, &lm));
  agt_ok(ag_dqn_train(r, 9, &lr));
  assert_int_equal(ag_dqn_fused(m), 0);
  assert_true(lm == lr);
  ag_dqn_free(m);
  ag_dqn_free(r);
  ag_ctx_free(mc);
  ag_ctx_free(rc);
}

/* A backend without AG__K_CONV2D: ag_conv2d refuses with a message and
 * makes nothing. */
static void without_the_convolution_kernel_conv2d_refuses(void **state) {
  (void)state;
  refused = AG__K_CONV2D;
  ag_ctx *ctx = masked_ctx();
  ag_tensor *x, *w, *y = NULL;
  agt_ok(ag_tensor_create(ctx, 2 * 4 * 4, 3, AG_F32, NULL, &x));
  agt_ok(ag_tensor_create(ctx, 2 * 3 * 3, 5, AG_F32, NULL, &w));
  const ag_conv2d_geom g = {2, 4, 4, 3, 3, 1, 1};
  const uint64_t before = agt_live_bytes(ctx);
  agt_err(ag_conv2d(x, &g, w, NULL, &y), AG_ERR_UNSUPPORTED, "has no convolution kernel");
  assert_null(y);
  assert_int_equal(agt_live_bytes(ctx), before);
  ag_tensor_free(x);
  ag_tensor_free(w);
  ag_ctx_free(ctx);
  refused = AG__K_QGRAD;
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(without_the_fused_kernel_the_dqn_composes_its_update),
                                     cmocka_unit_test(a_backend_change_drops_the_fused_update),
                                     cmocka_unit_test(without_the_convolution_kernel_conv2d_refuses)};
  return agt_run(argc, argv, "backend_caps", tests, sizeof tests / sizeof tests[0]);
}
