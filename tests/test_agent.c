/* test_agent.c — the replay table and DQN against host references.
 *
 * The DQN loss is recomputed here in double precision from the network's
 * parameters (read back) and the stored transitions; acting is compared
 * with a host forward pass; the epsilon schedule with its closed form.
 */
#include <math.h>

#include "agt.h"
#include "agent/agent_internal.h"
#include "nn/nn_internal.h"

/* ---- replay table ---- */

static void replay_fields_map_onto_rows_and_wrap(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const ag_field fields[3] = {{"obs", 3, AG_F32}, {"action", 1, AG_I64}, {"flag", 1, AG_U8}};
  ag_replay *r;
  agt_ok(ag_replay_create(ctx, fields, 3, 10, AG_F32, 4, &r));
  assert_int_equal(ag_replay_rows(r), 5);
  int64_t row0, width;
  agt_ok(ag_replay_field(r, "action", &row0, &width));
  assert_int_equal(row0, 3);
  assert_int_equal(width, 1);
  agt_err(ag_replay_field(r, "nope", &row0, &width), AG_ERR_INVALID_ARG, "no field 'nope'");
  /* 13 transitions in batches of 3 and 4: the ring wraps */
  float ref[10][5];
  int64_t t = 0;
  ag_rng *rng;
  agt_ok(ag_rng_create(ctx, 5, &rng));
  ag_tensor *batch;
  agt_err(ag_replay_sample(r, rng, 2, &batch, NULL), AG_ERR_STATE, "fewer than its minimum 4");
  for (int round = 0; round < 4; round++) {
    int k = round % 2 ? 4 : 3;
    float obs[4 * 3];
    int64_t act[4];
    uint8_t flag[4];
    for (int j = 0; j < k; j++, t++) {
      for (int e = 0; e < 3; e++) obs[j * 3 + e] = (float)(t * 10 + e);
      act[j] = t % 3;
      flag[j] = (uint8_t)(t % 2);
      int64_t col = t % 10;
      for (int e = 0; e < 3; e++) ref[col][e] = obs[j * 3 + e];
      ref[col][3] = (float)act[j];
      ref[col][4] = flag[j];
    }
    const void *data[3] = {obs, act, flag};
    agt_ok(ag_replay_add(r, data, k));
  }
  assert_int_equal(ag_replay_size(r), 10);
  assert_int_equal(ag_replay_position(r), 14 % 10);
  float got[50];
  agt_ok(ag_buffer_read(ag_replay_buffer(r), 0, 10, AG_F32, got, sizeof got));
  assert_memory_equal(got, ref, sizeof got);
  /* gather and field views */
  int64_t idx[3] = {9, 0, 4};
  ag_tensor *obs_v, *act_v;
  agt_ok(ag_replay_gather(r, idx, 3, &batch));
  agt_ok(ag_replay_view(r, batch, "obs", &obs_v));
  agt_ok(ag_replay_view(r, batch, "action", &act_v));
  ag_tensor *oc;
  agt_ok(ag_contiguous(obs_v, &oc));
  float og[9];
  agt_ok(ag_tensor_read(oc, og, sizeof og));
  for (int j = 0; j < 3; j++)
    for (int e = 0; e < 3; e++) assert_true(og[j * 3 + e] == ref[idx[j]][e]);
  /* device sampling stays inside the valid part */
  agt_ok(ag_replay_sample(r, rng, 256, &batch, NULL));
  float *s = agt_read_f32(batch);
  for (int j = 0; j < 256; j++) {
    int found = 0;
    for (int c = 0; c < 10; c++) found |= memcmp(s + j * 5, ref[c], sizeof ref[c]) == 0;
    assert_true(found);
  }
  free(s);
  /* bad input changes nothing */
  int64_t bad_act[1] = {0};
  uint8_t bad_flag[1] = {0};
  float bad_obs[3] = {0, 0, 0};
  const void *bad[3] = {bad_obs, bad_act, NULL};
  agt_err(ag_replay_add(r, bad, 1), AG_ERR_INVALID_ARG, "data for field 'flag' is NULL");
  (void)bad_flag;
  agt_err(ag_replay_gather(r, (int64_t[]){10}, 1, &batch), AG_ERR_OUT_OF_RANGE, "outside the 10 valid");
  assert_int_equal(ag_replay_position(r), 4);
  const ag_field dup[2] = {{"a", 1, AG_F32}, {"a", 2, AG_F32}};
  ag_replay *r2;
  agt_err(ag_replay_create(ctx, dup, 2, 10, AG_F32, 1, &r2), AG_ERR_INVALID_ARG, "'a' is used twice");
  ag_rng_free(rng);
  ag_replay_free(r);
  ag_ctx_free(ctx);
}

static void replay_u8_storage_refuses_values_that_do_not_fit(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const ag_field fields[1] = {{"frame", 4, AG_F32}};
  ag_replay *r;
  agt_ok(ag_replay_create(ctx, fields, 1, 8, AG_U8, 1, &r));
  float ok[4] = {0, 17, 255, 3}, bad[4] = {0, 17, 256, 3};
  const void *d1[1] = {ok}, *d2[1] = {bad};
  agt_ok(ag_replay_add(r, d1, 1));
  agt_err(ag_replay_add(r, d2, 1), AG_ERR_OUT_OF_RANGE, "value 256");
  assert_int_equal(ag_replay_size(r), 1);
  uint8_t got[4];
  agt_ok(ag_buffer_read(ag_replay_buffer(r), 0, 1, AG_U8, got, sizeof got));
  assert_int_equal(got[2], 255);
  ag_replay_free(r);
  ag_ctx_free(ctx);
}

/* ---- DQN ---- */

/* Host forward of an MLP (ReLU hidden, linear last) in double, after its
 * convolutions (ReLU after each; taps in the padding read 0). */
static void host_forward(ag_mlp *m, const double *x, int64_t in, double *out) {
  double h[512], z[512];
  int64_t n = in;
  for (int64_t i = 0; i < n; i++) h[i] = x[i];
  const int nc = ag_mlp_n_conv(m);
  for (int l = 0; l < nc; l++) {
    ag_conv_layer c;
    int64_t sh[3];
    assert_int_equal(ag_mlp_conv(m, l, &c, sh), 0);
    const int64_t C = sh[0], H = sh[1], W = sh[2], k = c.kernel;
    const int64_t Ho = (H + 2 * c.pad - k) / c.stride + 1, Wo = (W + 2 * c.pad - k) / c.stride + 1;
    float *w = agt_read_f32(ag_mlp_params(m)[2 * l]), *bb = agt_read_f32(ag_mlp_params(m)[2 * l + 1]);
    for (int64_t f = 0; f < c.channels; f++)
      for (int64_t i = 0; i < Ho; i++)
        for (int64_t j = 0; j < Wo; j++) {
          double acc = bb[f];
          for (int64_t ch = 0; ch < C; ch++)
            for (int64_t u = 0; u < k; u++)
              for (int64_t v = 0; v < k; v++) {
                const int64_t r = i * c.stride + u - c.pad, q = j * c.stride + v - c.pad;
                if (r >= 0 && q >= 0 && r < H && q < W)
                  acc += (double)w[f * C * k * k + (ch * k + u) * k + v] * h[(ch * H + r) * W + q];
              }
          z[(f * Ho + i) * Wo + j] = acc > 0 ? acc : 0;
        }
    n = c.channels * Ho * Wo;
    for (int64_t r = 0; r < n; r++) h[r] = z[r];
    free(w), free(bb);
  }
  int L = ag_mlp_n_params(m) / 2;
  for (int l = nc; l < L; l++) {
    ag_tensor *W = ag_mlp_params(m)[2 * l], *b = ag_mlp_params(m)[2 * l + 1];
    int64_t o = ag_tensor_rows(W);
    float *w = agt_read_f32(W), *bb = agt_read_f32(b);
    for (int64_t r = 0; r < o; r++) {
      double acc = bb[r];
      for (int64_t k = 0; k < n; k++) acc += (double)w[k * o + r] * h[k];
      z[r] = l + 1 < L ? (acc > 0 ? acc : 0) : acc;
    }
    for (int64_t r = 0; r < o; r++) h[r] = z[r];
    n = o;
    free(w), free(bb);
  }
  for (int64_t r = 0; r < n; r++) out[r] = h[r];
}

static ag_dqn_config small_config(int double_dqn, int huber) {
  ag_dqn_config c = ag_dqn_defaults();
  c.n_step = 1; /* the one-step target, which the fused kernel computes */
  c.n_hidden = 2;
  c.hidden[0] = 16;
  c.hidden[1] = 8;
  c.batch_size = 4;
  c.buffer_size = 64;
  c.double_dqn = double_dqn;
  c.huber = huber;
  c.seed = 3;
  return c;
}

/* Hidden widths, batch and table size of a test network. */
static void set_shape(ag_dqn_config *c, int64_t h0, int64_t h1, int64_t batch, int64_t buffer) {
  c->hidden[0] = h0;
  c->hidden[1] = h1;
  c->batch_size = batch;
  c->buffer_size = buffer;
}

/* The loss on a batch equals the DQN target computed on the host:
 * y = r + gamma (1 - terminated) max_a Q'(s', a) (Double: Q'(s', argmax Q(s', .))). */
static void dqn_loss_matches_host_reference(void **state) {
  (void)state;
  for (int variant = 0; variant < 3; variant++) {
    ag_ctx *ctx = agt_ctx();
    ag_dqn_config cfg = small_config(variant == 1, variant != 2);
    ag_dqn *d;
    agt_ok(ag_dqn_create(ctx, 3, 2, 1000, &cfg, &d));
    agt_rng g = {17};
    float obs[20 * 3], next[20 * 3], rew[20];
    int32_t act[20];
    int term[20];
    for (int j = 0; j < 20; j++) {
      for (int e = 0; e < 3; e++)
        obs[j * 3 + e] = agt_uniform(&g, -2, 2), next[j * 3 + e] = agt_uniform(&g, -2, 2);
      act[j] = (int32_t)agt_below(&g, 2);
      rew[j] = agt_uniform(&g, -1, 1) * 5;
      term[j] = j % 3 == 0;
    }
    agt_ok(ag_dqn_store(d, obs, act, rew, next, term, 20));
    agt_ok(ag_dqn_train(d, 5, NULL)); /* Q moves away from the target */
    int64_t idx[6] = {0, 5, 7, 12, 19, 3};
    ag_tensor *batch, *loss;
    agt_ok(ag_replay_gather(ag_dqn_replay(d), idx, 6, &batch));
    agt_ok(ag_dqn_loss(d, batch, &loss));
    float lv;
    agt_ok(ag_tensor_read(loss, &lv, sizeof lv));
    double acc = 0;
    for (int j = 0; j < 6; j++) {
      int64_t t = idx[j];
      double x[3], xn[3], q[2], qn[2];
      for (int e = 0; e < 3; e++) x[e] = obs[t * 3 + e], xn[e] = next[t * 3 + e];
      double qo[2];
      host_forward(ag_dqn_q(d), x, 3, q);
      host_forward(ag_dqn_target(d), xn, 3, qn);
      host_forward(ag_dqn_q(d), xn, 3, qo);
      double best = variant == 1 ? qn[qo[1] > qo[0] ? 1 : 0] : fmax(qn[0], qn[1]);
      double y = rew[t] + 0.99 * (1 - term[t]) * best;
      double diff = q[act[t]] - y, ad = fabs(diff);
      acc += variant == 2 ? diff * diff : (ad <= 1 ? 0.5 * diff * diff : ad - 0.5);
    }
    acc /= 6;
    if (!(fabs(lv - acc) <= 1e-4 * (1 + fabs(acc))))
      fail_msg("variant %d: loss %.7g, host %.7g", variant, (double)lv, acc);
    assert_int_equal(ag_dqn_updates(d), 5);
    ag_dqn_free(d);
    ag_ctx_free(ctx);
  }
}

/* A DQN with convolutions over 2x5x4 images: the loss of gathered
 * transitions equals the host's Double-DQN Huber target, and the update,
 * which composes ops whatever cfg.fused says, moves Q towards it. */
static void dqn_with_convolutions_matches_host_reference(void **state) {
  (void)state;
  enum { C = 2, H = 5, W = 4, OD = C * H * W, NA = 3, N = 24 };
  ag_ctx *ctx = agt_ctx();
  ag_dqn_config cfg = small_config(1, 1);
  cfg.n_conv = 2;
  cfg.conv[0] = (ag_conv_layer){3, 3, 1, 1};
  cfg.conv[1] = (ag_conv_layer){2, 2, 2, 0};
  cfg.obs_shape[0] = C, cfg.obs_shape[1] = H, cfg.obs_shape[2] = W;
  cfg.n_hidden = 1;
  cfg.hidden[0] = 6;
  ag_dqn *d;
  agt_err(ag_dqn_create(ctx, OD + 1, NA, 1000, &cfg, &d), AG_ERR_INVALID_ARG, "does not hold obs_dim = 41");
  agt_ok(ag_dqn_create(ctx, OD, NA, 1000, &cfg, &d));
  assert_int_equal(ag_dqn_fused(d), 0);
  assert_int_equal(ag_mlp_in(ag_dqn_q(d)), OD);
  assert_int_equal(ag_mlp_n_conv(ag_dqn_target(d)), 2);
  agt_rng g = {23};
  float *obs = malloc(sizeof(float) * N * OD), *next = malloc(sizeof(float) * N * OD), rew[N];
  assert_true(obs && next);
  int32_t act[N];
  int term[N];
  for (int j = 0; j < N; j++) {
    for (int e = 0; e < OD; e++)
      obs[j * OD + e] = agt_uniform(&g, -2, 2), next[j * OD + e] = agt_uniform(&g, -2, 2);
    act[j] = (int32_t)agt_below(&g, NA);
    rew[j] = agt_uniform(&g, -1, 1) * 3;
    term[j] = j % 4 == 0;
  }
  agt_ok(ag_dqn_store(d, obs, act, rew, next, term, N));
  agt_ok(ag_dqn_train(d, 4, NULL));
  const int64_t idx[5] = {1, 4, 9, 17, 23};
  double host_loss[2];
  for (int round = 0; round < 2; round++) {
    ag_tensor *batch, *loss;
    agt_ok(ag_replay_gather(ag_dqn_replay(d), idx, 5, &batch));
    agt_ok(ag_dqn_loss(d, batch, &loss));
    float lv;
    agt_ok(ag_tensor_read(loss, &lv, sizeof lv));
    double acc = 0;
    for (int j = 0; j < 5; j++) {
      const int64_t t = idx[j];
      double x[OD], xn[OD], q[NA], qn[NA], qo[NA];
      for (int e = 0; e < OD; e++) x[e] = obs[t * OD + e], xn[e] = next[t * OD + e];
      host_forward(ag_dqn_q(d), x, OD, q);
      host_forward(ag_dqn_target(d), xn, OD, qn);
      host_forward(ag_dqn_q(d), xn, OD, qo);
      int best = 0;
      for (int a = 1; a < NA; a++) best = qo[a] > qo[best] ? a : best;
      const double y = rew[t] + 0.99 * (1 - term[t]) * qn[best], diff = q[act[t]] - y, ad = fabs(diff);
      acc += ad <= 1 ? 0.5 * diff * diff : ad - 0.5;
    }
    acc /= 5;
    if (!(fabs(lv - acc) <= 1e-4 * (1 + fabs(acc))))
      fail_msg("round %d: loss %.7g, host %.7g", round, (double)lv, acc);
    host_loss[round] = acc;
    ag_ctx_reset(ctx);
    if (round == 0) agt_ok(ag_dqn_train(d, 40, NULL)); /* batches of the 24 transitions */
  }
  assert_true(host_loss[1] < host_loss[0]); /* the target network stayed: the updates fit Q to it */
  free(obs), free(next);
  ag_dqn_free(d);
  ag_ctx_free(ctx);
}

/* Two DQNs of one configuration but for cfg.fused: d[0] fused, d[1] on
 * the composed ops. */
static void fused_and_composed(ag_ctx *ctx, ag_dqn_config cfg, int64_t od, int64_t na, ag_dqn *d[2]) {
  for (int k = 0; k < 2; k++) {
    cfg.fused = 1 - k;
    agt_ok(ag_dqn_create(ctx, od, na, 1000, &cfg, &d[k]));
  }
  assert_int_equal(ag_dqn_fused(d[0]), agt_fused_dqn());
  assert_int_equal(ag_dqn_fused(d[1]), 0);
}

/* The fused update (one AG__K_QGRAD call) gives the loss and gradients of
 * the composed ops (sample, gather, forward, TD target, loss, autograd) on
 * the same sampled batch: two DQNs of one seed, fused and not, trained side
 * by side. Shapes: a small net with a batch under one tile, and one whose
 * layers are wider than a block's threads with a batch of 45 (tiles and
 * gradient chunks with a remainder), one whose sizes are multiples of 4
 * with a batch of 100 (the GPU's 16-byte copies, several chunks and a
 * partial one), and one whose widths are not (70, 33: the GPU's copies of
 * single floats, the bias's input inside a copy) with 10 actions (the
 * output layer in two groups of actions); networks of 1, 2 and 4 layers
 * (on the GPU: no forward or backward kernel; one forward kernel and no
 * backward one; three forward and two backward), and 3-layer ones with 37
 * and 40 inputs (layer 0's gradient in two tiles of inputs); each with max
 * / double DQN targets and Huber / MSE losses. */
static void dqn_fused_update_matches_composed_ops(void **state) {
  (void)state;
  for (int shape = 0; shape < 8; shape++)
    for (int variant = 0; variant < 3; variant++) {
      ag_ctx *ctx = agt_ctx();
      ag_dqn_config cfg = small_config(variant == 1, variant != 2);
      int64_t od = 3, na = 2, n = 20;
      if (shape == 1) set_shape(&cfg, 300, 40, 45, 200), od = 5, na = 3, n = 150;
      if (shape == 2) set_shape(&cfg, 64, 32, 100, 300), od = 8, na = 4, n = 250;
      if (shape == 3) set_shape(&cfg, 70, 33, 37, 200), od = 5, na = 10, n = 120;
      if (shape == 4) cfg.n_hidden = 0, cfg.batch_size = 30, od = 6, na = 3, n = 60;
      if (shape == 5) cfg.n_hidden = 1, set_shape(&cfg, 40, 0, 50, 200), od = 4, na = 5, n = 90;
      if (shape == 6)
        cfg.n_hidden = 3, set_shape(&cfg, 48, 33, 70, 200), cfg.hidden[2] = 20, od = 40, na = 4, n = 120;
      if (shape == 7) set_shape(&cfg, 50, 30, 90, 200), od = 37, na = 3, n = 150;
      ag_dqn *d[2];
      fused_and_composed(ctx, cfg, od, na, d);
      agt_rng g = {29 + (uint64_t)variant};
      float *obs = malloc(sizeof(float) * (size_t)(n * od)), *next = malloc(sizeof(float) * (size_t)(n * od));
      float *rew = malloc(sizeof(float) * (size_t)n);
      int32_t *act = malloc(sizeof(int32_t) * (size_t)n);
      int *term = malloc(sizeof(int) * (size_t)n);
      for (int64_t j = 0; j < n; j++) {
        for (int64_t e = 0; e < od; e++)
          obs[j * od + e] = agt_uniform(&g, -2, 2), next[j * od + e] = agt_uniform(&g, -2, 2);
        act[j] = (int32_t)agt_below(&g, (uint64_t)na);
        rew[j] = agt_uniform(&g, -1, 1) * 5;
        term[j] = j % 3 == 0;
      }
      for (int k = 0; k < 2; k++) agt_ok(ag_dqn_store(d[k], obs, act, rew, next, term, (int)n));
      for (int step = 0; step < 3; step++) {
        float loss[2];
        for (int k = 0; k < 2; k++) agt_ok(ag_dqn_train(d[k], 1, &loss[k]));
        double tol =
            step == 0 ? 1e-5 : 1e-3; /* later steps start from parameters Adam moved apart by rounding */
        if (!(fabs(loss[0] - loss[1]) <= tol * (1 + fabs(loss[1])))) /* NaN fails too */
          fail_msg("shape %d variant %d step %d: fused loss %.8g, composed %.8g", shape, variant, step,
                   (double)loss[0], (double)loss[1]);
        if (step > 0) continue;
        for (int p = 0; p < ag_mlp_n_params(ag_dqn_q(d[0])); p++) {
          float *ga = agt_read_f32(ag_tensor_grad(ag_mlp_params(ag_dqn_q(d[0]))[p]));
          float *gb = agt_read_f32(ag_tensor_grad(ag_mlp_params(ag_dqn_q(d[1]))[p]));
          ag_tensor *t = ag_mlp_params(ag_dqn_q(d[0]))[p];
          int64_t m = ag_tensor_rows(t) * ag_tensor_cols(t);
          double scale = 0, nonzero = 0;
          for (int64_t e = 0; e < m; e++) scale = fmax(scale, fabs(gb[e])), nonzero += gb[e] != 0;
          assert_true(nonzero > 0); /* the loss reaches every parameter tensor */
          for (int64_t e = 0; e < m; e++)
            if (!(fabs(ga[e] - gb[e]) <= 1e-5 * scale + 1e-9))
              fail_msg("shape %d variant %d: gradient of parameter %d [%lld] fused %.8g, composed %.8g",
                       shape, variant, p, (long long)e, (double)ga[e], (double)gb[e]);
          free(ga), free(gb);
        }
      }
      free(obs), free(next), free(rew), free(act), free(term);
      for (int k = 0; k < 2; k++) ag_dqn_free(d[k]);
      ag_ctx_free(ctx);
    }
}

/* Without clipping the fused call applies Adam itself (on the GPU inside
 * its gradient kernel, tile by tile). Networks of 3 and 4 layers, 34 inputs
 * in the last (layer 0's gradient in two tiles). Two updates checked against Adam's
 * closed form computed on the host from the parameters before and the
 * gradients the update wrote: m_t = b1 m + (1 - b1) g, v_t likewise with
 * g^2, p -= lr (m_t / (1 - b1^t)) / (sqrt(v_t / (1 - b2^t)) + eps). */
static void dqn_fused_update_applies_adam_itself(void **state) {
  (void)state;
  for (int shape = 0; shape < 3; shape++) {
    ag_ctx *ctx = agt_ctx();
    ag_dqn_config cfg = small_config(shape == 1, 1);
    cfg.max_grad_norm = 0.0f;
    cfg.lr = 1e-2f;
    int64_t od = 3, na = 2, n = 40;
    if (shape == 1) set_shape(&cfg, 70, 33, 37, 200), od = 5, na = 3, n = 120;
    if (shape == 2)
      cfg.n_hidden = 3, set_shape(&cfg, 40, 24, 50, 200), cfg.hidden[2] = 12, od = 34, na = 3, n = 120;
    ag_dqn *d;
    agt_ok(ag_dqn_create(ctx, od, na, 1000, &cfg, &d));
    assert_int_equal(ag_dqn_fused(d), agt_fused_dqn());
    agt_rng g = {71 + (uint64_t)shape};
    float *obs = malloc(sizeof(float) * (size_t)(n * od)), *rew = malloc(sizeof(float) * (size_t)n);
    int32_t *act = malloc(sizeof(int32_t) * (size_t)n);
    int *term = malloc(sizeof(int) * (size_t)n);
    for (int64_t j = 0; j < n * od; j++) obs[j] = agt_uniform(&g, -2, 2);
    for (int64_t j = 0; j < n; j++)
      act[j] = (int32_t)agt_below(&g, (uint64_t)na), rew[j] = agt_uniform(&g, -3, 3), term[j] = j % 4 == 0;
    agt_ok(ag_dqn_store(d, obs, act, rew, obs, term,
                        (int)(n - 1))); /* next obs: the same rows (any values do) */
    ag_mlp *q = ag_dqn_q(d);
    const int np = ag_mlp_n_params(q);
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8, lr = cfg.lr;
    enum { MAXP = 8 }; /* 4 layers: W and b each */
    assert_true(np <= MAXP);
    double *m[MAXP], *v[MAXP];
    float *p0[MAXP];
    for (int k = 0; k < np; k++) {
      ag_tensor *t = ag_mlp_params(q)[k];
      size_t len = (size_t)(ag_tensor_rows(t) * ag_tensor_cols(t));
      m[k] = calloc(len, sizeof(double)), v[k] = calloc(len, sizeof(double));
      p0[k] = agt_read_f32(t);
    }
    for (int step = 1; step <= 2; step++) {
      agt_ok(ag_dqn_train(d, 1, NULL));
      double moved = 0;
      for (int k = 0; k < np; k++) {
        ag_tensor *t = ag_mlp_params(q)[k];
        int64_t len = ag_tensor_rows(t) * ag_tensor_cols(t);
        float *gr = agt_read_f32(ag_tensor_grad(t)), *p1 = agt_read_f32(t);
        for (int64_t e = 0; e < len; e++) {
          m[k][e] = b1 * m[k][e] + (1 - b1) * gr[e];
          v[k][e] = b2 * v[k][e] + (1 - b2) * (double)gr[e] * gr[e];
          const double want =
              p0[k][e] - lr * (m[k][e] / (1 - pow(b1, step))) / (sqrt(v[k][e] / (1 - pow(b2, step))) + eps);
          moved = fmax(moved, fabs(want - p0[k][e]));
          if (!(fabs(p1[e] - want) <= 1e-6 + 1e-6 * fabs(want))) /* NaN fails too */
            fail_msg(
                "shape %d step %d: parameter %d [%lld] is %.9g, Adam gives %.9g (was %.9g, gradient %.6g)",
                shape, step, k, (long long)e, (double)p1[e], want, (double)p0[k][e], (double)gr[e]);
        }
        free(gr), free(p0[k]);
        p0[k] = p1;
      }
      assert_true(moved > 0.5 * lr); /* the step moved the parameters: the check above is not vacuous */
    }
    for (int k = 0; k < np; k++) free(m[k]), free(v[k]), free(p0[k]);
    free(obs), free(rew), free(act), free(term);
    ag_dqn_free(d);
    ag_ctx_free(ctx);
  }
}

/* ag_dqn_train(d, n) replays a recording of 8 updates while 8 or more are
 * left, then single ones: 21 updates in one call (two recordings of 8 and
 * five single updates) give the same bits as 21 calls of one update (the
 * parameters, their gradients and the loss reported), for the fused update
 * with Adam inside it, the fused update with clipping (Adam after it) and
 * the composed ops; then calls of 8 and of 1 report their own last loss. */
static void dqn_train_many_equals_one_at_a_time(void **state) {
  (void)state;
  for (int variant = 0; variant < 3; variant++) {
    ag_ctx *ctx = agt_ctx();
    ag_dqn_config cfg = small_config(variant == 1, 1);
    if (variant == 0) cfg.max_grad_norm = 0.0f;
    cfg.fused = variant != 2;
    ag_dqn *d[2];
    for (int k = 0; k < 2; k++) agt_ok(ag_dqn_create(ctx, 3, 2, 1000, &cfg, &d[k]));
    assert_int_equal(ag_dqn_fused(d[0]), variant != 2 && agt_fused_dqn());
    agt_rng g = {41 + (uint64_t)variant};
    enum { N = 50 };
    float obs[N * 3], next[N * 3], rew[N];
    int32_t act[N];
    int term[N];
    for (int j = 0; j < N; j++) {
      for (int e = 0; e < 3; e++)
        obs[j * 3 + e] = agt_uniform(&g, -2, 2), next[j * 3 + e] = agt_uniform(&g, -2, 2);
      act[j] = (int32_t)agt_below(&g, 2);
      rew[j] = agt_uniform(&g, -1, 1) * 5;
      term[j] = j % 4 == 0;
    }
    for (int k = 0; k < 2; k++) agt_ok(ag_dqn_store(d[k], obs, act, rew, next, term, N));
    float loss[2];
    agt_ok(ag_dqn_train(d[0], 21, &loss[0]));
    for (int i = 0; i < 21; i++) agt_ok(ag_dqn_train(d[1], 1, &loss[1]));
    assert_int_equal(ag_dqn_updates(d[0]), 21);
    assert_int_equal(ag_dqn_updates(d[1]), 21);
    if (memcmp(&loss[0], &loss[1], sizeof(float)) != 0)
      fail_msg("variant %d: loss %.9g after 21 updates in one call, %.9g one at a time", variant,
               (double)loss[0], (double)loss[1]);
    for (int p = 0; p < ag_mlp_n_params(ag_dqn_q(d[0])); p++)
      for (int gr = 0; gr < 2; gr++) {
        ag_tensor *ta = ag_mlp_params(ag_dqn_q(d[0]))[p], *tb = ag_mlp_params(ag_dqn_q(d[1]))[p];
        float *va = agt_read_f32(gr ? ag_tensor_grad(ta) : ta),
              *vb = agt_read_f32(gr ? ag_tensor_grad(tb) : tb);
        const int64_t m = ag_tensor_rows(ta) * ag_tensor_cols(ta);
        for (int64_t e = 0; e < m; e++)
          if (memcmp(&va[e], &vb[e], sizeof(float)) != 0)
            fail_msg("variant %d: %s of parameter %d [%lld] is %.9g after one call, %.9g one at a time",
                     variant, gr ? "gradient" : "value", p, (long long)e, (double)va[e], (double)vb[e]);
        free(va), free(vb);
      }
    /* the loss reported is the last replayed recording's: 8 updates (the
     * chain alone, after a single one), then 1 */
    for (int n = 8; n >= 1; n -= 7) {
      agt_ok(ag_dqn_train(d[0], n, &loss[0]));
      for (int i = 0; i < n; i++) agt_ok(ag_dqn_train(d[1], 1, &loss[1]));
      if (memcmp(&loss[0], &loss[1], sizeof(float)) != 0)
        fail_msg("variant %d: loss %.9g after %d updates in one call, %.9g one at a time", variant,
                 (double)loss[0], n, (double)loss[1]);
    }
    for (int k = 0; k < 2; k++) ag_dqn_free(d[k]);
    ag_ctx_free(ctx);
  }
}

/* More actions than the fused call takes: the update runs on the composed ops. */
static void dqn_with_many_actions_uses_the_ops(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_dqn_config cfg = small_config(1, 1);
  ag_dqn *d;
  agt_ok(ag_dqn_create(ctx, 3, 70, 1000, &cfg, &d));
  assert_int_equal(ag_dqn_fused(d), 0);
  float obs[8 * 3] = {0}, rew[8] = {1, 0, 1, 0, 1, 0, 1, 0};
  int32_t act[8] = {0, 69, 0, 1, 0, 1, 0, 1};
  int term[8] = {0};
  agt_ok(ag_dqn_store(d, obs, act, rew, obs, term, 8));
  float loss;
  agt_ok(ag_dqn_train(d, 2, &loss));
  assert_true(isfinite(loss));
  assert_int_equal(ag_dqn_updates(d), 2);
  assert_int_equal(ag_dqn_fused(NULL), 0);
  ag_dqn_free(d);
  ag_ctx_free(ctx);
}

/* ---- n-step targets in the fused update ---- */

/* A ring of transitions written in order (transition t at column t % cap)
 * and its host mirror. n_envs copies step side by side: each store call
 * writes one step of every copy. Terminations and truncations fall on
 * various steps of the copies. */
typedef struct ring {
  int64_t cap, od, T; /* columns, observation width, transitions written */
  float *obs, *next, *rew;
  int32_t *act;
  int *term, *trunc;
} ring;

static void ring_fill(ring *r, ag_dqn *const *d, int nd, int64_t na, int64_t envs, uint64_t seed) {
  agt_rng g = {seed};
  const int64_t cap = r->cap, od = r->od;
  r->obs = calloc((size_t)(cap * od), sizeof(float)), r->next = calloc((size_t)(cap * od), sizeof(float));
  r->rew = calloc((size_t)cap, sizeof(float)), r->act = calloc((size_t)cap, sizeof(int32_t));
  r->term = calloc((size_t)cap, sizeof(int)), r->trunc = calloc((size_t)cap, sizeof(int));
  float o[64], nx[64], rw[8];
  int32_t a[8];
  int te[8], tr[8];
  assert_true(envs <= 8 && envs * od <= 64);
  for (int64_t t0 = 0; t0 < r->T; t0 += envs) {
    for (int64_t i = 0; i < envs; i++) {
      const int64_t t = t0 + i, c = t % cap;
      for (int64_t e = 0; e < od; e++)
        o[i * od + e] = agt_uniform(&g, -2, 2), nx[i * od + e] = agt_uniform(&g, -2, 2);
      a[i] = (int32_t)agt_below(&g, na);
      rw[i] = agt_uniform(&g, -1, 1) * 3;
      te[i] = agt_below(&g, 9) == 0;
      tr[i] = !te[i] && agt_below(&g, 7) == 0;
      memcpy(r->obs + c * od, o + i * od, sizeof(float) * (size_t)od);
      memcpy(r->next + c * od, nx + i * od, sizeof(float) * (size_t)od);
      r->rew[c] = rw[i], r->act[c] = a[i], r->term[c] = te[i], r->trunc[c] = tr[i];
    }
    for (int k = 0; k < nd; k++) agt_ok(ag_dqn_store_ex(d[k], o, a, rw, nx, te, tr, (int)envs));
  }
}

static void ring_free(ring *r) {
  free(r->obs), free(r->next), free(r->rew), free(r->act), free(r->term), free(r->trunc);
}

/* The n-step walk of column c as agrl/replay.h states it: f32 sums and
 * repeated f32 products, stopped at a termination (discount 0), a
 * truncation, step n - 1, or before a column written after the write head
 * (rank(x) = (x - pos) mod cap; the walk goes on only while
 * rank(c_k) + stride < cap). */
static float ring_walk(const ring *r, int64_t c, int n, int64_t stride, float gamma, float *disc,
                       int64_t *last) {
  const int64_t cap = r->cap, pos = r->T % cap, size = r->T < cap ? r->T : cap;
  float R = 0.0f, g = 1.0f;
  for (int k = 0;; k++) {
    const float gr = g * r->rew[c];
    R = R + gr;
    g = g * gamma;
    if (r->term[c]) {
      *disc = 0.0f;
      break;
    }
    const int64_t rank = ((c - pos) % cap + cap) % cap;
    if (r->trunc[c] || k == n - 1 || rank < cap - size || rank + stride >= cap) {
      *disc = g;
      break;
    }
    c = (c + stride) % cap;
  }
  *last = c;
  return R;
}

/* With n-step returns the fused update (the draw of ag_replay_sample, the
 * walks of ag_replay_nstep, then one AG__K_QGRAD call) gives the composed
 * update's loss and gradients, and the same parameters after its step: two
 * DQNs of one seed, fused and not, side by side on a ring that wrapped,
 * with terminations and truncations, for 3- and 5-step returns of 1 and 3
 * environment copies, max and double DQN targets, Huber and MSE losses,
 * Adam after the call (clipping) and inside it (none). */
static void dqn_fused_nstep_update_matches_composed_ops(void **state) {
  (void)state;
  for (int c = 0; c < 12; c++) {
    const int n = c % 2 ? 5 : 3, variant = (c / 2) % 3;
    const int64_t envs = c / 6 ? 3 : 1;
    ag_ctx *ctx = agt_ctx();
    ag_dqn_config cfg = small_config(variant == 1, variant != 2);
    set_shape(&cfg, 24, 16, 40, 90);
    cfg.n_step = n;
    cfg.n_envs = envs;
    cfg.gamma = 0.9f;
    if (c % 4 == 1) cfg.max_grad_norm = 0.0f; /* Adam inside the fused call */
    const int64_t od = 4, na = 3;
    ag_dqn *d[2];
    fused_and_composed(ctx, cfg, od, na, d);
    ring r = {.cap = 90, .od = od, .T = 90 * 2 + 3 * envs};
    ring_fill(&r, d, 2, na, envs, 101 + (uint64_t)c);
    for (int step = 0; step < 3; step++) {
      ag_mlp *q[2] = {ag_dqn_q(d[0]), ag_dqn_q(d[1])};
      const int np = ag_mlp_n_params(q[0]);
      float *before[8];
      assert_true(np <= 8);
      for (int p = 0; p < np; p++) before[p] = agt_read_f32(ag_mlp_params(q[1])[p]);
      float loss[2];
      for (int k = 0; k < 2; k++) agt_ok(ag_dqn_train(d[k], 1, &loss[k]));
      const double tol = step == 0 ? 1e-5 : 1e-3; /* later: parameters Adam moved apart by rounding */
      if (!(fabs(loss[0] - loss[1]) <= tol * (1 + fabs(loss[1]))))
        fail_msg("case %d step %d: fused loss %.8g, composed %.8g", c, step, (double)loss[0],
                 (double)loss[1]);
      for (int p = 0; step == 0 && p < np; p++) {
        ag_tensor *ta = ag_mlp_params(q[0])[p], *tb = ag_mlp_params(q[1])[p];
        float *ga = agt_read_f32(ag_tensor_grad(ta)), *gb = agt_read_f32(ag_tensor_grad(tb));
        float *pa = agt_read_f32(ta), *pb = agt_read_f32(tb);
        const int64_t m = ag_tensor_rows(ta) * ag_tensor_cols(ta);
        double scale = 0, nonzero = 0, moved = 0;
        for (int64_t e = 0; e < m; e++) scale = fmax(scale, fabs(gb[e])), nonzero += gb[e] != 0;
        assert_true(nonzero > 0);
        for (int64_t e = 0; e < m; e++) {
          if (!(fabs(ga[e] - gb[e]) <= 1e-5 * scale + 1e-9))
            fail_msg("case %d: gradient of parameter %d [%lld] fused %.8g, composed %.8g", c, p, (long long)e,
                     (double)ga[e], (double)gb[e]);
          /* Adam's first step is about lr sign(g): the same where the
           * gradient's sign is sure, at most 2 lr apart where it is noise */
          const double dp = fabs((double)pa[e] - pb[e]);
          moved = fmax(moved, fabs((double)pb[e] - before[p][e]));
          if (fabs(gb[e]) > 1e-3 * scale ? !(dp <= 1e-6 + 1e-5 * fabs(pb[e])) : !(dp <= 2.01 * cfg.lr))
            fail_msg("case %d: parameter %d [%lld] after the step: fused %.9g, composed %.9g (gradient %.6g)",
                     c, p, (long long)e, (double)pa[e], (double)pb[e], (double)gb[e]);
        }
        assert_true(moved > 0.5 * cfg.lr);
        free(ga), free(gb), free(pa), free(pb);
      }
      for (int p = 0; p < np; p++) free(before[p]);
    }
    ring_free(&r);
    for (int k = 0; k < 2; k++) ag_dqn_free(d[k]);
    ag_ctx_free(ctx);
  }
}

/* The fused call's n-step target against the host: given columns of a
 * wrapped ring of 3 copies whose walks end in a termination, a truncation,
 * n steps, the write head and across the wrap, the loss of ag__qlearn_step
 * with ag_replay_nstep's returns, discounts and last columns equals the
 * host's mean of f(Q(s)[a] - (R + discount V(s'_last))) in double, for max
 * and double DQN targets; the one-step loss of the same columns differs.
 * Incomplete or ill-shaped n-step arguments are refused. */
static void nstep_target_case(int variant) {
  ag_ctx *ctx = agt_ctx();
  ag_dqn_config cfg = small_config(variant, 1);
  const int n = 4;
  const int64_t envs = 3, od = 3, na = 2, cap = 48;
  set_shape(&cfg, 16, 8, 8, cap);
  cfg.n_step = n;
  cfg.n_envs = envs;
  cfg.gamma = 0.8f;
  ag_dqn *d;
  agt_ok(ag_dqn_create(ctx, od, na, 1000, &cfg, &d));
  assert_int_equal(ag_dqn_fused(d), agt_fused_dqn());
  ring r = {.cap = cap, .od = od, .T = cap + 30}; /* wrapped: the head at column 30 */
  ring_fill(&r, &d, 1, na, envs, 7 + (uint64_t)variant);
  agt_ok(ag_dqn_train(d, 3, NULL)); /* Q moves away from the target */
  /* columns next to the head (27..29: rank 45..47), past the wrap (46, 47),
   * and others; B = 12 (the last tile of the loss is whole) */
  enum { B = 12 };
  int32_t cols[B] = {27, 28, 29, 46, 47, 44, 0, 5, 13, 21, 33, 40};
  int seen_term = 0, seen_trunc = 0, seen_full = 0, seen_head = 0, seen_wrap = 0;
  float R[B], disc[B];
  int64_t last[B];
  for (int j = 0; j < B; j++) {
    R[j] = ring_walk(&r, cols[j], n, envs, cfg.gamma, &disc[j], &last[j]);
    const int64_t steps = ((last[j] - cols[j]) % cap + cap) % cap / envs + 1;
    seen_term |= disc[j] == 0.0f;
    seen_trunc |= disc[j] != 0.0f && r.trunc[last[j]];
    seen_full |= steps == n;
    seen_head |= disc[j] != 0.0f && !r.trunc[last[j]] && steps < n;
    seen_wrap |= last[j] < cols[j];
  }
  assert_true(seen_term && seen_trunc && seen_full && seen_head && seen_wrap); /* every way a walk ends */
  ag_tensor *idx, *ret, *dsc, *lst, *loss;
  agt_ok(ag_tensor_create(ctx, B, 1, AG_I32, cols, &idx));
  agt_ok(ag_replay_nstep(ag_dqn_replay(d), idx, n, cfg.gamma, envs, "reward", "terminated", "truncated", &ret,
                         &dsc, &lst));
  int64_t lg[B];
  agt_ok(ag_tensor_read(lst, lg, sizeof lg));
  assert_memory_equal(lg, last, sizeof lg);
  if (!agt_fused_dqn()) { /* the walks are checked; there is no fused call to check here */
    ag_tensor_free(idx);
    ring_free(&r);
    ag_dqn_free(d);
    ag_ctx_free(ctx);
    return;
  }
  ag_rng *rng;
  agt_ok(ag_rng_create(ctx, 1, &rng));
  ag__qlearn u;
  memset(&u, 0, sizeof u);
  u.src = ag__agent_batch(ag_dqn_replay(d), rng, B);
  u.q = ag_dqn_q(d), u.target = ag_dqn_target(d);
  u.gamma = cfg.gamma, u.double_dqn = variant, u.huber = 1, u.delta = 1.0f;
  u.src.idx = idx;
  float one;
  agt_ok(ag__qlearn_step(&u, &loss)); /* the one-step target of the same columns */
  agt_ok(ag_tensor_read(loss, &one, sizeof one));
  u.src.ret = ret, u.src.disc = dsc, u.src.last = lst;
  agt_ok(ag__qlearn_step(&u, &loss));
  float lv;
  agt_ok(ag_tensor_read(loss, &lv, sizeof lv));
  double acc = 0, acc1 = 0;
  for (int j = 0; j < B; j++) {
    const int64_t c0 = cols[j];
    double x[3], xn[3], xs[3], q[2], qn[2], qo[2];
    for (int e = 0; e < 3; e++)
      x[e] = r.obs[c0 * od + e], xn[e] = r.next[last[j] * od + e], xs[e] = r.next[c0 * od + e];
    host_forward(ag_dqn_q(d), x, od, q);
    for (int k = 0; k < 2; k++) { /* k 0: the n-step target at s'_last, 1: the one-step one */
      host_forward(ag_dqn_target(d), k ? xs : xn, od, qn);
      host_forward(ag_dqn_q(d), k ? xs : xn, od, qo);
      const double best = variant ? qn[qo[1] > qo[0] ? 1 : 0] : fmax(qn[0], qn[1]);
      const double y =
          k ? r.rew[c0] + (double)cfg.gamma * (1 - r.term[c0]) * best : R[j] + (double)disc[j] * best;
      const double diff = q[r.act[c0]] - y, ad = fabs(diff);
      *(k ? &acc1 : &acc) += ad <= 1 ? 0.5 * diff * diff : ad - 0.5;
    }
  }
  acc /= B, acc1 /= B;
  if (!(fabs(lv - acc) <= 1e-4 * (1 + fabs(acc))))
    fail_msg("variant %d: n-step loss %.7g, host %.7g", variant, (double)lv, acc);
  if (!(fabs(one - acc1) <= 1e-4 * (1 + fabs(acc1))))
    fail_msg("variant %d: one-step loss %.7g, host %.7g", variant, (double)one, acc1);
  assert_true(fabs(acc - acc1) > 1e-3 * (1 + fabs(acc))); /* the n-step target is another */
  /* refused: a part of the n-step arguments, no idx, wrong dtypes and lengths */
  ag_tensor *f32len, *shortl;
  agt_ok(ag_tensor_create(ctx, 1, B, AG_F32, NULL, &f32len));
  agt_ok(ag_tensor_create(ctx, 1, B - 1, AG_I64, NULL, &shortl));
  u.src.last = NULL;
  agt_err(ag__qlearn_step(&u, &loss), AG_ERR_INVALID_ARG, "ret, disc and last together");
  u.src.last = lst, u.src.idx = NULL;
  agt_err(ag__qlearn_step(&u, &loss), AG_ERR_INVALID_ARG, "and idx");
  u.src.idx = idx, u.src.last = f32len;
  agt_err(ag__qlearn_step(&u, &loss), AG_ERR_SHAPE, "last has dtype f32");
  u.src.last = shortl;
  agt_err(ag__qlearn_step(&u, &loss), AG_ERR_SHAPE, "last is [1, 11]");
  u.src.last = lst, u.src.idx = lst;
  agt_err(ag__qlearn_step(&u, &loss), AG_ERR_SHAPE, "idx has dtype i64");
  ag_tensor_free(f32len), ag_tensor_free(shortl), ag_tensor_free(idx);
  ag_rng_free(rng);
  ring_free(&r);
  ag_dqn_free(d);
  ag_ctx_free(ctx);
}

static void dqn_fused_nstep_target_matches_host(void **state) {
  (void)state;
  nstep_target_case(0); /* max_a Q'(s'_last) */
  nstep_target_case(1); /* double DQN */
}

/* Greedy actions are the host argmax of Q; epsilon decays linearly. */
static void dqn_acts_greedily_and_epsilon_decays_linearly(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_dqn_config cfg = small_config(0, 1);
  cfg.exploration_fraction = 0.5f;
  cfg.eps_start = 1.0f;
  cfg.eps_end = 0.1f;
  ag_dqn *d;
  agt_ok(ag_dqn_create(ctx, 3, 2, 1000, &cfg, &d));
  assert_float_equal(ag_dqn_epsilon(d, 0), 1.0f, 1e-6);
  assert_float_equal(ag_dqn_epsilon(d, 250), 0.55f, 1e-6);
  assert_float_equal(ag_dqn_epsilon(d, 500), 0.1f, 1e-6);
  assert_float_equal(ag_dqn_epsilon(d, 900), 0.1f, 1e-6);
  agt_rng g = {4};
  float obs[30 * 3];
  for (int i = 0; i < 90; i++) obs[i] = agt_uniform(&g, -3, 3);
  int32_t a[30];
  agt_ok(ag_dqn_act(d, obs, 30, 0, 0, a));
  for (int j = 0; j < 30; j++) {
    double x[3] = {obs[j * 3], obs[j * 3 + 1], obs[j * 3 + 2]}, q[2];
    host_forward(ag_dqn_q(d), x, 3, q);
    assert_int_equal(a[j], q[1] > q[0] ? 1 : 0);
  }
  /* fully random at epsilon 1: both actions appear, in range */
  int32_t r[200];
  float many[200 * 3] = {0};
  agt_ok(ag_dqn_act(d, many, 200, 0, 1, r));
  int ones = 0;
  for (int j = 0; j < 200; j++) {
    assert_true(r[j] == 0 || r[j] == 1);
    ones += r[j];
  }
  assert_true(ones > 60 && ones < 140);
  agt_err(ag_dqn_store(d, obs, (int32_t[]){2}, obs, obs, (int[]){0}, 1), AG_ERR_OUT_OF_RANGE,
          "actions[0] = 2");
  ag_dqn_free(d);
  ag_ctx_free(ctx);
}

/* Two runs with one seed on the CPU give identical episodes; the agent
 * improves on CartPole within a short run. */
typedef struct log {
  double ret[4096];
  int n;
} log_t;

static int record_episode(const ag_train_event *ev, void *user) {
  log_t *l = user;
  if (ev->kind == AG_TRAIN_EPISODE && l->n < 4096) l->ret[l->n++] = ev->episode_return;
  return 0;
}

static void dqn_learn_is_deterministic_and_improves(void **state) {
  (void)state;
  static log_t logs[2];
  for (int k = 0; k < 2; k++) {
    ag_ctx *ctx = agt_ctx();
    ag_vec_env *env;
    agt_ok(ag_vec_env_create("cartpole", 2, 11, &env));
    ag_dqn_config cfg = ag_dqn_defaults(); /* small, so that it runs under valgrind too */
    cfg.n_envs = 2;                        /* the defaults' n-step returns walk each copy's column */
    cfg.hidden[0] = cfg.hidden[1] = 32;
    cfg.batch_size = 32;
    cfg.train_freq = 256;
    cfg.gradient_steps = 64;
    cfg.lr = 2e-3f;
    cfg.seed = 11;
    ag_dqn *d;
    agt_ok(ag_dqn_create(ctx, 4, 2, 12000, &cfg, &d));
    logs[k].n = 0;
    agt_ok(ag_dqn_learn(d, env, 12000, record_episode, &logs[k]));
    ag_dqn_free(d);
    ag_vec_env_free(env);
    ag_ctx_free(ctx);
  }
  assert_int_equal(logs[0].n, logs[1].n);
  /* the same bits on every run, on the GPU too (no atomic sums in the update) */
  assert_memory_equal(logs[0].ret, logs[1].ret, (size_t)logs[0].n * sizeof(double));
  double first = 0, last = 0;
  int n = logs[0].n;
  for (int i = 0; i < 20; i++) first += logs[0].ret[i] / 20, last += logs[0].ret[n - 20 + i] / 20;
  printf("  %d episodes; mean return of the first 20: %.1f, of the last 20: %.1f\n", n, first, last);
  assert_true(last > 2 * first);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(replay_fields_map_onto_rows_and_wrap),
      cmocka_unit_test(replay_u8_storage_refuses_values_that_do_not_fit),
      cmocka_unit_test(dqn_loss_matches_host_reference),
      cmocka_unit_test(dqn_with_convolutions_matches_host_reference),
      cmocka_unit_test(dqn_fused_update_matches_composed_ops),
      cmocka_unit_test(dqn_fused_update_applies_adam_itself),
      cmocka_unit_test(dqn_train_many_equals_one_at_a_time),
      cmocka_unit_test(dqn_with_many_actions_uses_the_ops),
      cmocka_unit_test(dqn_fused_nstep_update_matches_composed_ops),
      cmocka_unit_test(dqn_fused_nstep_target_matches_host),
      cmocka_unit_test(dqn_acts_greedily_and_epsilon_decays_linearly),
      cmocka_unit_test(dqn_learn_is_deterministic_and_improves),
  };
  return agt_run(argc, argv, "agent", tests, sizeof tests / sizeof tests[0]);
}
