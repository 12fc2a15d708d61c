/* test_conv.c — ag_conv2d: its values against a direct sum written here
 * (scattered from each input pixel, not gathered as the kernels do), its
 * gradients for x, w and b against central finite differences of that
 * sum, its use inside a recording, and its errors. The kernels' backends
 * against the CPU reference are in test_kernels.c; a backend without the
 * kernel is test_backend_caps.c's. */
#include <math.h>
#include <string.h>

#include "agt.h"

typedef struct geom_case {
  ag_conv2d_geom g;
  int64_t K, B;
  int bias;
} geom_case;

static int64_t out_len(int64_t n, int64_t k, int64_t s, int64_t p) { return (n + 2 * p - k) / s + 1; }

/* out[(k Ho + i) Wo + j, n] of x, w, b in double, from each input pixel to the outputs it reaches. */
static void direct(const geom_case *c, const double *x, const double *w, const double *b, double *out) {
  const ag_conv2d_geom *g = &c->g;
  const int64_t Ho = out_len(g->H, g->kh, g->stride, g->pad), Wo = out_len(g->W, g->kw, g->stride, g->pad);
  const int64_t rows = c->K * Ho * Wo, xr = g->C * g->H * g->W, wr = g->C * g->kh * g->kw;
  for (int64_t n = 0; n < c->B; n++)
    for (int64_t r = 0; r < rows; r++) out[n * rows + r] = b ? b[r / (Ho * Wo)] : 0.0;
  for (int64_t n = 0; n < c->B; n++)
    for (int64_t ch = 0; ch < g->C; ch++)
      for (int64_t h = 0; h < g->H; h++)
        for (int64_t q = 0; q < g->W; q++) {
          const double v = x[n * xr + (ch * g->H + h) * g->W + q];
          for (int64_t u = 0; u < g->kh; u++)
            for (int64_t t = 0; t < g->kw; t++) {
              const int64_t pi = h + g->pad - u, pj = q + g->pad - t; /* i * stride, j * stride */
              if (pi < 0 || pj < 0 || pi % g->stride || pj % g->stride) continue;
              const int64_t i = pi / g->stride, j = pj / g->stride;
              if (i >= Ho || j >= Wo) continue;
              for (int64_t k = 0; k < c->K; k++)
                out[n * rows + (k * Ho + i) * Wo + j] += w[k * wr + (ch * g->kh + u) * g->kw + t] * v;
            }
        }
}

/* sum(direct(x, w, b) .* R) */
static double weighted(const geom_case *c, const double *x, const double *w, const double *b, const double *R,
                       double *tmp, int64_t ny) {
  direct(c, x, w, b, tmp);
  double s = 0;
  for (int64_t i = 0; i < ny; i++) s += tmp[i] * R[i];
  return s;
}

static void check(const char *what, const geom_case *c, const float *got, const double *want, int64_t n,
                  double tol) {
  for (int64_t i = 0; i < n; i++)
    if (!(fabs(got[i] - want[i]) <= tol * (fabs(want[i]) > 1 ? fabs(want[i]) : 1)))
      fail_msg("%s of C%lld H%lld W%lld k%lldx%lld s%lld p%lld K%lld B%lld: element %lld is %.7g, want %.7g",
               what, (long long)c->g.C, (long long)c->g.H, (long long)c->g.W, (long long)c->g.kh,
               (long long)c->g.kw, (long long)c->g.stride, (long long)c->g.pad, (long long)c->K,
               (long long)c->B, (long long)i, (double)got[i], want[i]);
}

static const geom_case cases[] = {
    {{3, 5, 7, 3, 3, 1, 1}, 4, 2, 1},   {{1, 1, 1, 1, 1, 1, 0}, 1, 1, 1}, {{2, 9, 6, 4, 4, 2, 2}, 3, 3, 1},
    {{2, 13, 10, 3, 2, 4, 0}, 3, 1, 0}, {{5, 6, 8, 1, 1, 2, 0}, 6, 2, 1}, {{1, 11, 9, 8, 8, 4, 2}, 2, 2, 1},
    {{3, 4, 3, 5, 4, 1, 1}, 2, 1, 1},
};

/* Forward values and the gradients of sum(out .* R) for x, w and b. */
static void conv2d_matches_direct_sum_and_finite_differences(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    const geom_case *c = &cases[k];
    const ag_conv2d_geom *g = &c->g;
    const int64_t Ho = out_len(g->H, g->kh, g->stride, g->pad), Wo = out_len(g->W, g->kw, g->stride, g->pad);
    const int64_t xr = g->C * g->H * g->W, wr = g->C * g->kh * g->kw, yr = c->K * Ho * Wo;
    const int64_t nx = xr * c->B, nw = wr * c->K, ny = yr * c->B;
    float *xf = malloc((size_t)nx * 4), *wf = malloc((size_t)nw * 4), *bf = malloc((size_t)c->K * 4);
    float *Rf = malloc((size_t)ny * 4), *got = malloc((size_t)(nx + nw + ny) * 4);
    double *xd = malloc((size_t)nx * 8), *wd = malloc((size_t)nw * 8), *bd = malloc((size_t)c->K * 8);
    double *Rd = malloc((size_t)ny * 8), *yd = malloc((size_t)ny * 8), *gd = malloc((size_t)(nx + nw) * 8);
    assert_true(xf && wf && bf && Rf && got && xd && wd && bd && Rd && yd && gd);
    agt_rng r = {77 + k};
    for (int64_t i = 0; i < nx; i++) xd[i] = xf[i] = agt_uniform(&r, -1, 1);
    for (int64_t i = 0; i < nw; i++) wd[i] = wf[i] = agt_uniform(&r, -1, 1);
    for (int64_t i = 0; i < c->K; i++) bd[i] = bf[i] = agt_uniform(&r, -1, 1);
    for (int64_t i = 0; i < ny; i++) Rd[i] = Rf[i] = agt_uniform(&r, -1, 1);
    ag_tensor *x, *w, *b = NULL, *R, *y, *prod, *loss;
    agt_ok(ag_tensor_create(ctx, xr, c->B, AG_F32, xf, &x));
    agt_ok(ag_tensor_create(ctx, wr, c->K, AG_F32, wf, &w));
    if (c->bias) agt_ok(ag_tensor_create(ctx, c->K, 1, AG_F32, bf, &b));
    agt_ok(ag_tensor_create(ctx, yr, c->B, AG_F32, Rf, &R));
    agt_ok(ag_tensor_set_requires_grad(x, 1));
    agt_ok(ag_tensor_set_requires_grad(w, 1));
    if (b) agt_ok(ag_tensor_set_requires_grad(b, 1));
    {
      agt_ok(ag_conv2d(x, g, w, b, &y));
      assert_int_equal(ag_tensor_rows(y), yr);
      assert_int_equal(ag_tensor_cols(y), c->B);
      agt_ok(ag_mul(y, R, &prod));
      agt_ok(ag_sum(prod, AG_AXIS_ALL, &loss));
      agt_ok(ag_backward(loss));
      direct(c, xd, wd, c->bias ? bd : NULL, yd);
      agt_ok(ag_tensor_read(y, got, (size_t)ny * 4));
      check("values", c, got, yd, ny, 1e-5);
      /* central differences of the double sum: exact for a function linear in each input */
      const double h = 0.5;
      double *vars[3] = {xd, wd, bd};
      const int64_t counts[3] = {nx, nw, c->K};
      ag_tensor *params[3] = {x, w, b};
      const char *names[3] = {"d/dx", "d/dw", "d/db"};
      for (int p = 0; p < (c->bias ? 3 : 2); p++) {
        for (int64_t i = 0; i < counts[p]; i++) {
          const double keep = vars[p][i];
          vars[p][i] = keep + h;
          const double up = weighted(c, xd, wd, c->bias ? bd : NULL, Rd, yd, ny);
          vars[p][i] = keep - h;
          const double down = weighted(c, xd, wd, c->bias ? bd : NULL, Rd, yd, ny);
          vars[p][i] = keep;
          gd[i] = (up - down) / (2 * h);
        }
        agt_ok(ag_tensor_read(ag_tensor_grad(params[p]), got, (size_t)counts[p] * 4));
        check(names[p], c, got, gd, counts[p], 1e-4);
      }
    }
    ag_tensor_free(x), ag_tensor_free(w), ag_tensor_free(b), ag_tensor_free(R);
    ag_ctx_reset(ctx);
    free(xf), free(wf), free(bf), free(Rf), free(got), free(xd), free(wd), free(bd), free(Rd), free(yd),
        free(gd);
  }
  ag_ctx_free(ctx);
}

/* A convolution feeds the next one (its output is [K*Ho*Wo, B], one
 * sample a column) and ReLU: the Nature DQN's stack keeps its shapes and
 * its gradient reaches the first layer's weights. */
static void conv2d_stacks_with_relu_in_nature_shapes(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const ag_conv2d_geom g1 = {4, 84, 84, 8, 8, 4, 0}, g2 = {32, 20, 20, 4, 4, 2, 0},
                       g3 = {64, 9, 9, 3, 3, 1, 0};
  const int64_t B = 2;
  ag_tensor *x, *w1, *w2, *w3, *y, *z, *loss;
  agt_ok(ag_full(ctx, 4 * 84 * 84, B, 0.5f, &x));
  float *v = malloc(64 * 64 * 9 * 4);
  assert_non_null(v);
  agt_rng r = {5};
  for (int i = 0; i < 64 * 64 * 9; i++) v[i] = agt_uniform(&r, -0.1f, 0.1f);
  agt_ok(ag_tensor_create(ctx, 4 * 64, 32, AG_F32, v, &w1));
  agt_ok(ag_tensor_create(ctx, 32 * 16, 64, AG_F32, v, &w2));
  agt_ok(ag_tensor_create(ctx, 64 * 9, 64, AG_F32, v, &w3));
  agt_ok(ag_tensor_set_requires_grad(w1, 1));
  agt_ok(ag_conv2d(x, &g1, w1, NULL, &y));
  agt_ok(ag_relu(y, &z));
  assert_int_equal(ag_tensor_rows(z), 32 * 20 * 20);
  agt_ok(ag_conv2d(z, &g2, w2, NULL, &y));
  agt_ok(ag_relu(y, &z));
  assert_int_equal(ag_tensor_rows(z), 64 * 9 * 9);
  agt_ok(ag_conv2d(z, &g3, w3, NULL, &y));
  assert_int_equal(ag_tensor_rows(y), 64 * 7 * 7);
  assert_int_equal(ag_tensor_cols(y), B);
  agt_ok(ag_sum(y, AG_AXIS_ALL, &loss));
  agt_ok(ag_backward(loss));
  float *gw = malloc(4 * 64 * 32 * 4);
  assert_non_null(gw);
  agt_ok(ag_tensor_read(ag_tensor_grad(w1), gw, 4 * 64 * 32 * 4));
  int nonzero = 0;
  for (int i = 0; i < 4 * 64 * 32; i++) nonzero += gw[i] != 0.0f && isfinite(gw[i]);
  assert_true(nonzero > 0);
  ag_tensor_free(w1), ag_tensor_free(w2), ag_tensor_free(w3);
  free(v), free(gw);
  ag_ctx_free(ctx);
}

/* ---- a recorded step ---- */

typedef struct rec_world {
  ag_tensor *x, *w, *b;
} rec_world;

static ag_status rec_step(ag_ctx *ctx, void *user) {
  rec_world *r = user;
  static const ag_conv2d_geom g = {3, 8, 7, 3, 3, 2, 1};
  ag_tensor *params[2] = {r->w, r->b}, *y, *z, *loss;
  ag_status s = ag_zero_grad(params, 2);
  if (!s) s = ag_conv2d(r->x, &g, r->w, r->b, &y);
  if (!s) s = ag_relu(y, &z);
  if (!s) s = ag_square(z, &y);
  if (!s) s = ag_sum(y, AG_AXIS_ALL, &loss);
  if (!s) s = ag_backward(loss);
  (void)ctx;
  return s;
}

/* A recorded step with a convolution reads the input's new values at each
 * replay, and gives the gradients that the same step run eagerly gives. */
static void conv2d_in_a_recording_replays_with_new_inputs(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  enum { XR = 3 * 8 * 7, B = 3, WR = 27, K = 4 };
  float xv[XR * B], wv[WR * K], bv[K], g_rec[WR * K + K], g_eager[WR * K + K];
  agt_rng r = {9};
  for (int i = 0; i < WR * K; i++) wv[i] = agt_uniform(&r, -0.5f, 0.5f);
  for (int i = 0; i < K; i++) bv[i] = agt_uniform(&r, -0.5f, 0.5f);
  rec_world rw;
  agt_ok(ag_tensor_create(ctx, XR, B, AG_F32, NULL, &rw.x));
  agt_ok(ag_tensor_create(ctx, WR, K, AG_F32, wv, &rw.w));
  agt_ok(ag_tensor_create(ctx, K, 1, AG_F32, bv, &rw.b));
  agt_ok(ag_tensor_set_requires_grad(rw.w, 1));
  agt_ok(ag_tensor_set_requires_grad(rw.b, 1));
  ag_capture *cap;
  agt_ok(ag_capture_create(ctx, rec_step, &rw, &cap));
  for (int it = 0; it < 3; it++) {
    for (int i = 0; i < XR * B; i++) xv[i] = agt_uniform(&r, -1, 1);
    agt_ok(ag_tensor_write(rw.x, xv, sizeof xv));
    agt_ok(ag_capture_replay(cap));
    agt_ok(ag_tensor_read(ag_tensor_grad(rw.w), g_rec, WR * K * 4));
    agt_ok(ag_tensor_read(ag_tensor_grad(rw.b), g_rec + WR * K, K * 4));
    agt_ok(rec_step(ctx, &rw));
    agt_ok(ag_tensor_read(ag_tensor_grad(rw.w), g_eager, WR * K * 4));
    agt_ok(ag_tensor_read(ag_tensor_grad(rw.b), g_eager + WR * K, K * 4));
    ag_ctx_reset(ctx);
    double most = 0;
    for (int i = 0; i < WR * K + K; i++) most = fmax(most, fabs((double)g_eager[i]));
    assert_true(most > 0);
    for (int i = 0; i < WR * K + K; i++)
      if (!(fabs((double)g_rec[i] - g_eager[i]) <= 1e-5 * fmax(1.0, most)))
        fail_msg("replay %d: gradient %d is %.7g, eager %.7g", it, i, (double)g_rec[i], (double)g_eager[i]);
  }
  ag_capture_free(cap);
  ag_tensor_free(rw.x), ag_tensor_free(rw.w), ag_tensor_free(rw.b);
  ag_ctx_free(ctx);
}

/* Every bad argument is an error with a message, and no result is made. */
static void conv2d_bad_inputs_are_errors(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_tensor *x, *w, *b, *xi, *o = NULL;
  agt_ok(ag_tensor_create(ctx, 2 * 5 * 4, 3, AG_F32, NULL, &x));
  agt_ok(ag_tensor_create(ctx, 2 * 3 * 3, 6, AG_F32, NULL, &w));
  agt_ok(ag_tensor_create(ctx, 6, 1, AG_F32, NULL, &b));
  agt_ok(ag_tensor_create(ctx, 2 * 5 * 4, 3, AG_I32, NULL, &xi));
  const ag_conv2d_geom g = {2, 5, 4, 3, 3, 1, 0};
  ag_conv2d_geom e;
  agt_err(ag_conv2d(x, NULL, w, b, &o), AG_ERR_INVALID_ARG, "geom is NULL");
  agt_err(ag_conv2d(x, &g, w, b, NULL), AG_ERR_INVALID_ARG, "out is NULL");
  agt_err(ag_conv2d(NULL, &g, w, b, &o), AG_ERR_INVALID_ARG, "x");
  agt_err(ag_conv2d(xi, &g, w, b, &o), AG_ERR_SHAPE, "this op takes f32");
  e = g, e.C = 0;
  agt_err(ag_conv2d(x, &e, w, b, &o), AG_ERR_INVALID_ARG, "must be positive");
  e = g, e.stride = 0;
  agt_err(ag_conv2d(x, &e, w, b, &o), AG_ERR_INVALID_ARG, "stride = 0");
  e = g, e.kw = -3;
  agt_err(ag_conv2d(x, &e, w, b, &o), AG_ERR_INVALID_ARG, "kw = -3");
  e = g, e.pad = -1;
  agt_err(ag_conv2d(x, &e, w, b, &o), AG_ERR_INVALID_ARG, "pad = -1 not negative");
  e = g, e.H = 4;
  agt_err(ag_conv2d(x, &e, w, b, &o), AG_ERR_SHAPE, "x has 40 rows; C*H*W = 2*4*4 = 32");
  e = g, e.kh = 2;
  agt_err(ag_conv2d(x, &e, w, b, &o), AG_ERR_SHAPE, "w has 18 rows; C*kh*kw = 2*2*3 = 12");
  e = (ag_conv2d_geom){1, 2, 20, 3, 6, 1, 0}; /* x's 40 rows, w's 18 rows; a 3-row filter on 2 rows */
  agt_err(ag_conv2d(x, &e, w, b, &o), AG_ERR_SHAPE, "the 3x6 filter is larger than the 2x20 image");
  e = (ag_conv2d_geom){1, 2, 20, 3, 6, 1, 1}; /* padded, it fits */
  agt_ok(ag_conv2d(x, &e, w, NULL, &o));
  assert_int_equal(ag_tensor_rows(o), 6 * 2 * 17);
  o = NULL;
  e = g, e.pad = 70000;
  agt_err(ag_conv2d(x, &e, w, b, &o), AG_ERR_UNSUPPORTED, "at most 65535");
  e = (ag_conv2d_geom){(int64_t)1 << 40, (int64_t)1 << 40, 40, 1, 1, 1, 0};
  agt_err(ag_conv2d(x, &e, w, b, &o), AG_ERR_UNSUPPORTED, "beyond 2^31 - 1");
  ag_tensor *bw, *brow;
  agt_ok(ag_tensor_create(ctx, 5, 1, AG_F32, NULL, &bw));
  agt_ok(ag_tensor_create(ctx, 1, 6, AG_F32, NULL, &brow));
  agt_err(ag_conv2d(x, &g, w, bw, &o), AG_ERR_SHAPE, "b is [5, 1]; the bias of 6 filters is [6, 1]");
  agt_err(ag_conv2d(x, &g, w, brow, &o), AG_ERR_SHAPE, "b is [1, 6]");
  ag_ctx *other = agt_ctx();
  ag_tensor *wo;
  agt_ok(ag_tensor_create(other, 2 * 3 * 3, 6, AG_F32, NULL, &wo));
  agt_err(ag_conv2d(x, &g, wo, b, &o), AG_ERR_INVALID_ARG, "different contexts");
  assert_null(o);
  ag_tensor_free(wo);
  ag_ctx_free(other);
  ag_tensor_free(x), ag_tensor_free(w), ag_tensor_free(b), ag_tensor_free(xi), ag_tensor_free(bw);
  ag_tensor_free(brow);
  ag_ctx_free(ctx);
}

/* ---- networks with convolutions (ag_mlp_create_conv) ---- */

/* A network as the host reference sees it: in_shape, layers, activations,
 * and every parameter's values in double (ag_mlp_params' order). */
typedef struct cnet {
  int64_t in[3];
  int n_conv;
  ag_conv_layer conv[4];
  int n_fc;
  int64_t fc[4];
  ag_act hidden, last;
  double *p[16];
  int64_t np[16];
} cnet;

static double act_of(ag_act a, double v) {
  return a == AG_ACT_RELU      ? (v > 0 ? v : 0)
         : a == AG_ACT_TANH    ? tanh(v)
         : a == AG_ACT_SIGMOID ? 1 / (1 + exp(-v))
                               : v;
}

/* The network's output for one sample x (C*H*W values), gathered tap by
 * tap with the padding read as zeros; y gets fc[n_fc-1] values. */
static void cnet_forward(const cnet *m, const double *x, double *y) {
  int64_t C = m->in[0], H = m->in[1], W = m->in[2];
  double *h = malloc((size_t)(C * H * W) * 8);
  assert_non_null(h);
  memcpy(h, x, (size_t)(C * H * W) * 8);
  for (int l = 0; l < m->n_conv; l++) {
    const ag_conv_layer *c = &m->conv[l];
    const int64_t K = c->channels, k = c->kernel, Ho = out_len(H, k, c->stride, c->pad),
                  Wo = out_len(W, k, c->stride, c->pad);
    const double *w = m->p[2 * l], *b = m->p[2 * l + 1];
    double *o = malloc((size_t)(K * Ho * Wo) * 8);
    assert_non_null(o);
    for (int64_t f = 0; f < K; f++)
      for (int64_t i = 0; i < Ho; i++)
        for (int64_t j = 0; j < Wo; j++) {
          double s = b[f];
          for (int64_t ch = 0; ch < C; ch++)
            for (int64_t u = 0; u < k; u++)
              for (int64_t v = 0; v < k; v++) {
                const int64_t r = i * c->stride + u - c->pad, q = j * c->stride + v - c->pad;
                if (r < 0 || q < 0 || r >= H || q >= W) continue;
                s += w[f * C * k * k + (ch * k + u) * k + v] * h[(ch * H + r) * W + q];
              }
          o[(f * Ho + i) * Wo + j] = act_of(m->hidden, s);
        }
    free(h);
    h = o, C = K, H = Ho, W = Wo;
  }
  int64_t in = C * H * W;
  for (int l = 0; l < m->n_fc; l++) {
    const int64_t out = m->fc[l];
    const double *w = m->p[2 * (m->n_conv + l)], *b = m->p[2 * (m->n_conv + l) + 1];
    double *o = malloc((size_t)out * 8);
    assert_non_null(o);
    for (int64_t r = 0; r < out; r++) {
      double s = b[r];
      for (int64_t c = 0; c < in; c++) s += w[c * out + r] * h[c]; /* W [out, in], column-major */
      o[r] = act_of(l + 1 < m->n_fc ? m->hidden : m->last, s);
    }
    free(h);
    h = o, in = out;
  }
  memcpy(y, h, (size_t)in * 8);
  free(h);
}

/* The reference of an ag_mlp made by ag_mlp_create_conv with this description. */
static cnet cnet_read(const ag_mlp *a, const int64_t in[3], const ag_conv_layer *conv, int n_conv,
                      const int64_t *fc, int n_fc, ag_act hidden, ag_act last) {
  cnet m;
  memset(&m, 0, sizeof m);
  memcpy(m.in, in, sizeof m.in);
  m.n_conv = n_conv, m.n_fc = n_fc, m.hidden = hidden, m.last = last;
  memcpy(m.conv, conv, (size_t)n_conv * sizeof *conv);
  memcpy(m.fc, fc, (size_t)n_fc * sizeof *fc);
  assert_int_equal(ag_mlp_n_params(a), 2 * (n_conv + n_fc));
  for (int k = 0; k < 2 * (n_conv + n_fc); k++) {
    ag_tensor *t = ag_mlp_params(a)[k];
    m.np[k] = ag_tensor_rows(t) * ag_tensor_cols(t);
    float *v = agt_read_f32(t);
    m.p[k] = malloc((size_t)m.np[k] * 8);
    assert_non_null(m.p[k]);
    for (int64_t i = 0; i < m.np[k]; i++) m.p[k][i] = v[i];
    free(v);
  }
  return m;
}

static void cnet_free(cnet *m) {
  for (int k = 0; k < 16; k++) free(m->p[k]);
}

/* sum over the batch of out .* R, in double */
static double cnet_weighted(const cnet *m, const double *x, int64_t B, const double *R) {
  const int64_t xr = m->in[0] * m->in[1] * m->in[2], yr = m->fc[m->n_fc - 1];
  double y[16], s = 0;
  for (int64_t n = 0; n < B; n++) {
    cnet_forward(m, x + n * xr, y);
    for (int64_t r = 0; r < yr; r++) s += y[r] * R[n * yr + r];
  }
  return s;
}

static const int64_t net_in[3] = {2, 7, 6};
static const ag_conv_layer net_conv[2] = {{3, 3, 2, 1}, {4, 2, 1, 0}};
static const int64_t net_fc[2] = {5, 3};

/* The forward values of a ReLU network with two convolutions (padding,
 * strides) and two linear layers, against the host reference; its shapes. */
static void conv_network_forward_matches_the_host_reference(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_mlp *m;
  agt_ok(ag_mlp_create_conv(ctx, net_in, net_conv, 2, net_fc, 2, AG_ACT_RELU, AG_ACT_NONE, 9, &m));
  assert_int_equal(ag_mlp_in(m), 2 * 7 * 6);
  assert_int_equal(ag_mlp_out(m), 3);
  assert_int_equal(ag_mlp_n_conv(m), 2);
  ag_conv_layer l;
  int64_t sh[3];
  assert_int_equal(ag_mlp_conv(m, 1, &l, sh), 0);
  assert_int_equal(l.channels, 4), assert_int_equal(l.kernel, 2);
  assert_int_equal(sh[0], 3), assert_int_equal(sh[1], 4),
      assert_int_equal(sh[2], 3); /* (7+2-3)/2+1, (6+2-3)/2+1 */
  assert_int_equal(ag_mlp_conv(m, 2, &l, sh), -1);
  assert_int_equal(ag_mlp_conv(NULL, 0, &l, sh), -1);
  /* conv0 w [2*3*3, 3], b [3, 1]; conv1 w [3*2*2, 4]; W0 [5, 4*3*2] */
  const int64_t dims[8][2] = {{18, 3}, {3, 1}, {12, 4}, {4, 1}, {5, 24}, {5, 1}, {3, 5}, {3, 1}};
  for (int k = 0; k < 8; k++) {
    assert_int_equal(ag_tensor_rows(ag_mlp_params(m)[k]), dims[k][0]);
    assert_int_equal(ag_tensor_cols(ag_mlp_params(m)[k]), dims[k][1]);
  }
  cnet ref = cnet_read(m, net_in, net_conv, 2, net_fc, 2, AG_ACT_RELU, AG_ACT_NONE);
  enum { B = 5, XR = 84 };
  float xf[XR * B], got[3 * B];
  double xd[XR * B], want[3];
  agt_rng r = {3};
  for (int i = 0; i < XR * B; i++) xd[i] = xf[i] = agt_uniform(&r, -2, 2);
  ag_tensor *x, *y;
  agt_ok(ag_tensor_create(ctx, XR, B, AG_F32, xf, &x));
  agt_ok(ag_mlp_forward(m, x, &y));
  assert_int_equal(ag_tensor_rows(y), 3);
  assert_int_equal(ag_tensor_cols(y), B);
  agt_ok(ag_tensor_read(y, got, sizeof got));
  for (int n = 0; n < B; n++) {
    cnet_forward(&ref, xd + n * XR, want);
    for (int k = 0; k < 3; k++)
      if (!(fabs(got[n * 3 + k] - want[k]) <= 1e-5 * (1 + fabs(want[k]))))
        fail_msg("sample %d output %d is %.7g, want %.7g", n, k, (double)got[n * 3 + k], want[k]);
  }
  /* a plain MLP's input check applies: x must have C*H*W rows */
  ag_tensor *xb;
  agt_ok(ag_tensor_create(ctx, XR - 1, B, AG_F32, NULL, &xb));
  agt_err(ag_mlp_forward(m, xb, &y), AG_ERR_SHAPE, "takes 84 inputs");
  ag_tensor_free(x), ag_tensor_free(xb);
  cnet_free(&ref);
  ag_mlp_free(m);
  ag_ctx_free(ctx);
}

/* The gradients of sum(out .* R) for every parameter and for the input,
 * through a tanh network (smooth, so central differences of the double
 * reference are exact to O(h^2)). */
static void conv_network_gradients_match_finite_differences(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_mlp *m;
  agt_ok(ag_mlp_create_conv(ctx, net_in, net_conv, 2, net_fc, 2, AG_ACT_TANH, AG_ACT_TANH, 21, &m));
  cnet ref = cnet_read(m, net_in, net_conv, 2, net_fc, 2, AG_ACT_TANH, AG_ACT_TANH);
  enum { B = 3, XR = 84, YR = 3 };
  float xf[XR * B], Rf[YR * B];
  double xd[XR * B], Rd[YR * B];
  agt_rng r = {11};
  for (int i = 0; i < XR * B; i++) xd[i] = xf[i] = agt_uniform(&r, -1, 1);
  for (int i = 0; i < YR * B; i++) Rd[i] = Rf[i] = agt_uniform(&r, -1, 1);
  ag_tensor *x, *R, *y, *prod, *loss;
  agt_ok(ag_tensor_create(ctx, XR, B, AG_F32, xf, &x));
  agt_ok(ag_tensor_set_requires_grad(x, 1));
  agt_ok(ag_tensor_create(ctx, YR, B, AG_F32, Rf, &R));
  agt_ok(ag_mlp_forward(m, x, &y));
  agt_ok(ag_mul(y, R, &prod));
  agt_ok(ag_sum(prod, AG_AXIS_ALL, &loss));
  agt_ok(ag_backward(loss));
  const double h = 1e-4;
  for (int k = -1; k < ag_mlp_n_params(m); k++) { /* -1: the input */
    ag_tensor *t = k < 0 ? x : ag_mlp_params(m)[k];
    double *v = k < 0 ? xd : ref.p[k];
    const int64_t n = ag_tensor_rows(t) * ag_tensor_cols(t);
    float *g = agt_read_f32(ag_tensor_grad(t));
    for (int64_t i = 0; i < n; i++) {
      const double keep = v[i];
      v[i] = keep + h;
      const double up = cnet_weighted(&ref, xd, B, Rd);
      v[i] = keep - h;
      const double down = cnet_weighted(&ref, xd, B, Rd);
      v[i] = keep;
      const double want = (up - down) / (2 * h);
      if (!(fabs(g[i] - want) <= 2e-4 * (1 + fabs(want))))
        fail_msg("gradient of %s%d element %lld is %.7g, want %.7g", k < 0 ? "x" : "param ", k, (long long)i,
                 (double)g[i], want);
    }
    free(g);
  }
  ag_tensor_free(x), ag_tensor_free(R);
  cnet_free(&ref);
  ag_mlp_free(m);
  ag_ctx_free(ctx);
}

/* Initial values: each layer uniform within 1/sqrt(fan_in) (conv: C*k*k),
 * spread over that range, the same for the same seed and not for another;
 * copy and Polyak averaging between two such networks, and a plain MLP of
 * the same linear sizes refused as a different shape. */
static void conv_network_init_copy_and_polyak(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_mlp *a, *a2, *b, *plain;
  agt_ok(ag_mlp_create_conv(ctx, net_in, net_conv, 2, net_fc, 2, AG_ACT_RELU, AG_ACT_NONE, 5, &a));
  agt_ok(ag_mlp_create_conv(ctx, net_in, net_conv, 2, net_fc, 2, AG_ACT_RELU, AG_ACT_NONE, 5, &a2));
  agt_ok(ag_mlp_create_conv(ctx, net_in, net_conv, 2, net_fc, 2, AG_ACT_RELU, AG_ACT_NONE, 6, &b));
  const double fan[8] = {18, 18, 12, 12, 24, 24, 5, 5};
  for (int k = 0; k < 8; k++) {
    ag_tensor *t = ag_mlp_params(a)[k];
    const int64_t n = ag_tensor_rows(t) * ag_tensor_cols(t);
    float *va = agt_read_f32(t), *va2 = agt_read_f32(ag_mlp_params(a2)[k]),
          *vb = agt_read_f32(ag_mlp_params(b)[k]);
    const double bound = 1 / sqrt(fan[k]);
    double lo = 1, hi = -1;
    int differ = 0;
    for (int64_t i = 0; i < n; i++) {
      assert_true(fabs(va[i]) <= bound);
      lo = va[i] < lo ? va[i] : lo, hi = va[i] > hi ? va[i] : hi;
      differ += va[i] != vb[i];
    }
    assert_memory_equal(va, va2, (size_t)n * 4);
    assert_true(differ > 0);
    if (n >= 12) assert_true(hi - lo > bound); /* spread over the range, not clustered */
    free(va), free(va2), free(vb);
  }
  /* b = 0.25 a + 0.75 b, then a copy */
  float *before[8];
  for (int k = 0; k < 8; k++) before[k] = agt_read_f32(ag_mlp_params(b)[k]);
  agt_ok(ag_mlp_polyak(b, a, 0.25f));
  for (int k = 0; k < 8; k++) {
    ag_tensor *t = ag_mlp_params(b)[k];
    const int64_t n = ag_tensor_rows(t) * ag_tensor_cols(t);
    float *vb = agt_read_f32(t), *va = agt_read_f32(ag_mlp_params(a)[k]);
    for (int64_t i = 0; i < n; i++) assert_true(fabs(vb[i] - (0.25 * va[i] + 0.75 * before[k][i])) <= 1e-6);
    free(vb), free(va), free(before[k]);
  }
  agt_ok(ag_mlp_copy(b, a));
  for (int k = 0; k < 8; k++) {
    ag_tensor *t = ag_mlp_params(b)[k];
    const int64_t n = ag_tensor_rows(t) * ag_tensor_cols(t);
    float *vb = agt_read_f32(t), *va = agt_read_f32(ag_mlp_params(a)[k]);
    assert_memory_equal(vb, va, (size_t)n * 4);
    free(vb), free(va);
  }
  const int64_t sizes[3] = {24, 5, 3};
  agt_ok(ag_mlp_create(ctx, sizes, 3, AG_ACT_RELU, AG_ACT_NONE, 5, &plain));
  agt_err(ag_mlp_copy(plain, a), AG_ERR_SHAPE, "different sizes or convolutions");
  ag_conv_layer other[2] = {net_conv[0], {4, 2, 1, 0}};
  other[0].pad = 0; /* unpadded, the first layer gives a 3x2 image and the second 2x1 */
  ag_mlp *c;
  agt_ok(ag_mlp_create_conv(ctx, net_in, other, 2, net_fc, 2, AG_ACT_RELU, AG_ACT_NONE, 5, &c));
  agt_err(ag_mlp_polyak(c, a, 0.5f), AG_ERR_SHAPE, "different sizes or convolutions");
  ag_mlp_free(a), ag_mlp_free(a2), ag_mlp_free(b), ag_mlp_free(plain), ag_mlp_free(c);
  ag_ctx_free(ctx);
}

/* Every bad description is refused with its status and a message naming
 * the fault, before anything is allocated. */
static void conv_network_bad_descriptions_are_errors(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_ctx_stats st0, st1;
  ag_ctx_get_stats(ctx, &st0);
  ag_mlp *m = NULL;
  ag_conv_layer c[9];
  for (int i = 0; i < 9; i++) c[i] = (ag_conv_layer){2, 1, 1, 0};
  const int64_t fc[1] = {3}, in[3] = {1, 8, 8};
  agt_err(ag_mlp_create_conv(NULL, in, c, 1, fc, 1, AG_ACT_RELU, AG_ACT_NONE, 0, &m), AG_ERR_INVALID_ARG,
          "must not be NULL");
  agt_err(ag_mlp_create_conv(ctx, NULL, c, 1, fc, 1, AG_ACT_RELU, AG_ACT_NONE, 0, &m), AG_ERR_INVALID_ARG,
          "must not be NULL");
  agt_err(ag_mlp_create_conv(ctx, in, NULL, 1, fc, 1, AG_ACT_RELU, AG_ACT_NONE, 0, &m), AG_ERR_INVALID_ARG,
          "must not be NULL");
  agt_err(ag_mlp_create_conv(ctx, in, c, 1, NULL, 1, AG_ACT_RELU, AG_ACT_NONE, 0, &m), AG_ERR_INVALID_ARG,
          "must not be NULL");
  agt_err(ag_mlp_create_conv(ctx, in, c, 1, fc, 1, AG_ACT_RELU, AG_ACT_NONE, 0, NULL), AG_ERR_INVALID_ARG,
          "must not be NULL");
  agt_err(ag_mlp_create_conv(ctx, in, c, 0, fc, 1, AG_ACT_RELU, AG_ACT_NONE, 0, &m), AG_ERR_INVALID_ARG,
          "n_conv = 0 must be in 1..8");
  agt_err(ag_mlp_create_conv(ctx, in, c, 9, fc, 1, AG_ACT_RELU, AG_ACT_NONE, 0, &m), AG_ERR_INVALID_ARG,
          "n_conv = 9");
  agt_err(ag_mlp_create_conv(ctx, in, c, 1, fc, 0, AG_ACT_RELU, AG_ACT_NONE, 0, &m), AG_ERR_INVALID_ARG,
          "n_fc = 0");
  agt_err(ag_mlp_create_conv(ctx, in, c, 1, fc, 64, AG_ACT_RELU, AG_ACT_NONE, 0, &m), AG_ERR_INVALID_ARG,
          "n_fc = 64");
  agt_err(ag_mlp_create_conv(ctx, (const int64_t[3]){1, 0, 8}, c, 1, fc, 1, AG_ACT_RELU, AG_ACT_NONE, 0, &m),
          AG_ERR_INVALID_ARG, "in_shape = {1, 0, 8}");
  agt_err(ag_mlp_create_conv(ctx, (const int64_t[3]){1, 8, (int64_t)1 << 31}, c, 1, fc, 1, AG_ACT_RELU,
                             AG_ACT_NONE, 0, &m),
          AG_ERR_INVALID_ARG, "in_shape");
  const ag_conv_layer bad[5] = {{0, 3, 1, 0}, {2, 0, 1, 0}, {2, 3, 0, 0}, {2, 3, 1, -1}, {2, 70000, 1, 0}};
  for (int i = 0; i < 5; i++)
    agt_err(ag_mlp_create_conv(ctx, in, &bad[i], 1, fc, 1, AG_ACT_RELU, AG_ACT_NONE, 0, &m),
            AG_ERR_INVALID_ARG, "conv[0] = {channels");
  /* the second layer meets a 3x3 image: a 4x4 kernel there is refused, padded by 1 it is not */
  ag_conv_layer two[2] = {{2, 3, 2, 0}, {2, 4, 1, 0}};
  agt_err(ag_mlp_create_conv(ctx, in, two, 2, fc, 1, AG_ACT_RELU, AG_ACT_NONE, 0, &m), AG_ERR_INVALID_ARG,
          "conv[1]'s 4x4 kernel is larger than the 3x3 image it meets, padded by 0");
  agt_err(ag_mlp_create_conv(ctx, in, c, 1, (const int64_t[1]){0}, 1, AG_ACT_RELU, AG_ACT_NONE, 0, &m),
          AG_ERR_INVALID_ARG, "sizes[1] = 0");
  agt_err(ag_mlp_create_conv(ctx, in, c, 1, fc, 1, (ag_act)7, AG_ACT_NONE, 0, &m), AG_ERR_INVALID_ARG,
          "activation 7 is unknown");
  agt_err(ag_mlp_create_conv(ctx, (const int64_t[3]){1, 65536, 65536}, c, 1, fc, 1, AG_ACT_RELU, AG_ACT_NONE,
                             0, &m),
          AG_ERR_UNSUPPORTED, "beyond 2^31 - 1 values");
  assert_null(m);
  ag_ctx_get_stats(ctx, &st1);
  assert_int_equal(st1.allocs, st0.allocs);
  two[1].pad = 1;
  agt_ok(ag_mlp_create_conv(ctx, in, two, 2, fc, 1, AG_ACT_RELU, AG_ACT_NONE, 0, &m));
  assert_int_equal(ag_mlp_in(m), 64);
  ag_mlp_free(m);
  ag_ctx_free(ctx);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(conv2d_matches_direct_sum_and_finite_differences),
      cmocka_unit_test(conv2d_stacks_with_relu_in_nature_shapes),
      cmocka_unit_test(conv2d_in_a_recording_replays_with_new_inputs),
      cmocka_unit_test(conv2d_bad_inputs_are_errors),
      cmocka_unit_test(conv_network_forward_matches_the_host_reference),
      cmocka_unit_test(conv_network_gradients_match_finite_differences),
      cmocka_unit_test(conv_network_init_copy_and_polyak),
      cmocka_unit_test(conv_network_bad_descriptions_are_errors),
  };
  return agt_run(argc, argv, "conv", tests, sizeof tests / sizeof tests[0]);
}
