/* kernels.h — the kernels every backend provides, and their arguments.
 *
 * The core calls a kernel as be->run(st, AG__K_x, &args, sizeof args). The
 * arguments are plain values and device pointers (no host pointers that must
 * stay alive), so that a backend can record a call and replay it later: the
 * CPU backend keeps a copy of the arguments in its plan, the CUDA backend's
 * stream capture bakes them into the graph. The CPU implementation in
 * src/cpu/cpu_kernels.c is the reference each CUDA kernel is tested against.
 *
 * Matrices are f32, column-major with a leading dimension: element (r, c) of
 * an ag__mat m is m.p[c * m.ld + r]. An operand of 1 row (or 1 column) is
 * broadcast along that axis to the output's shape.
 *
 * This header is included from C and from CUDA C++.
 */
#ifndef AGRL_CORE_KERNELS_H
#define AGRL_CORE_KERNELS_H

#include <stdint.h>

#include "agrl/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ag__kernel_id {
  AG__K_GATHER = 0,
  AG__K_GEMM,
  AG__K_MAP,
  AG__K_MAP2,
  AG__K_REDUCE,
  AG__K_PICK,
  AG__K_PICK_BWD,
  AG__K_FILL,
  AG__K_COPY,
  AG__K_ADAM_PREP,
  AG__K_ADAM,
  AG__K_SUMSQ,
  AG__K_AXPBY,
  AG__K_RANDINT,
  AG__K_TD_TARGET,
  AG__K_LOSS,
  AG__K_PER_SET,
  AG__K_PER_FILL,
  AG__K_PER_SAMPLE,
  AG__K_QGRAD,
  AG__K_CONVERT,
  AG__K_SET_I64,
  AG__K_NSTEP,
  AG__K_RANDN,
  AG__K_ACGRAD,
  AG__K_GATHER_FIELDS,
  AG__K_SCATTER_FIELDS,
  AG__K_FRAME_STACK,
  AG__K_CONV2D,
  AG__K_COUNT
} ag__kernel_id;

typedef struct ag__mat {
  float *p;
  int64_t rows, cols, ld;
} ag__mat;

/* AG__K_GATHER: dst[r, j] = (f32) src[r, clamp(idx[j], 0, capacity-1)] * scale
 *   src [rows, capacity] src_dtype, idx [n] idx_dtype (AG_I32 / AG_I64),
 *   dst [rows, n] f32 contiguous */
typedef struct ag__gather_args {
  const void *src;
  ag_dtype src_dtype;
  int64_t rows;
  int64_t capacity;
  const void *idx;
  ag_dtype idx_dtype;
  int64_t n;
  float scale;
  float *dst;
} ag__gather_args;

/* AG__K_GEMM: C [m, n] = alpha * op(A) op(B) + beta * C
 *   op(A) [m, k] (A stored [k, m] when trans_a), op(B) [k, n] (B [n, k] when trans_b).
 *   beta = 0 never reads C. */
typedef struct ag__gemm_args {
  int trans_a, trans_b;
  int64_t m, n, k;
  float alpha, beta;
  const float *a;
  int64_t lda;
  const float *b;
  int64_t ldb;
  float *c;
  int64_t ldc;
} ag__gemm_args;

/* Unary functions: y = f(x; p0, p1). */
typedef enum ag__map_op {
  AG__MAP_IDENT = 0, /* x */
  AG__MAP_AFFINE,    /* p0 * x + p1 */
  AG__MAP_RELU,      /* max(x, 0) */
  AG__MAP_TANH,
  AG__MAP_SIGMOID, /* 1 / (1 + exp(-x)) */
  AG__MAP_EXP,
  AG__MAP_LOG,
  AG__MAP_SQUARE, /* x * x */
  AG__MAP_ABS,
  AG__MAP_HUBER, /* |x| <= p0 ? x^2 / 2 : p0 * (|x| - p0 / 2) */
  AG__MAP_CLAMP, /* x < p0 ? p0 : (x > p1 ? p1 : x): min(max(x, p0), p1), NaN kept */
  AG__MAP_COUNT
} ag__map_op;

/* AG__K_MAP: out (+)= f(x), elementwise over out's shape (x broadcast).
 *   accumulate = 0: out = f(x); 1: out += f(x) */
typedef struct ag__map_args {
  ag__map_op op;
  float p0, p1;
  ag__mat x;
  ag__mat out;
  int accumulate;
} ag__map_args;

/* Binary functions: y = alpha * f(a, b; p0, p1). min and max take a on a
 * tie and wherever a is NaN (so a NaN in either operand gives NaN); their
 * masks say where they took a (ag__max_takes_a, ag__min_takes_a). */
typedef enum ag__map2_op {
  AG__MAP2_ADD = 0,     /* a + b */
  AG__MAP2_SUB,         /* a - b */
  AG__MAP2_MUL,         /* a * b */
  AG__MAP2_DIV,         /* a / b */
  AG__MAP2_MAX,         /* max(a, b): a >= b ? a : b */
  AG__MAP2_RELU_BWD,    /* b > 0 ? a : 0           (a: grad, b: input or output) */
  AG__MAP2_TANH_BWD,    /* a * (1 - b * b)          (b: tanh output) */
  AG__MAP2_SIGMOID_BWD, /* a * b * (1 - b)          (b: sigmoid output) */
  AG__MAP2_HUBER_BWD,   /* a * clamp(b, -p0, p0)    (b: input) */
  AG__MAP2_ABS_BWD,     /* a * sign(b) */
  AG__MAP2_ADD_RELU,    /* relu(a + b): a bias and its activation in one pass */
  AG__MAP2_ADD_TANH,    /* tanh(a + b) */
  AG__MAP2_ADD_SIGMOID, /* sigmoid(a + b) */
  AG__MAP2_MIN,         /* min(a, b): a <= b ? a : b */
  AG__MAP2_MAX_MASK,    /* 1 where max(a, b) takes a, else 0 */
  AG__MAP2_MIN_MASK,    /* 1 where min(a, b) takes a, else 0 */
  AG__MAP2_MASK_BWD,    /* b != 0 ? a : 0           (a: grad, b: a mask) */
  AG__MAP2_UNMASK_BWD,  /* b != 0 ? 0 : a */
  AG__MAP2_CLAMP_BWD,   /* p0 <= b <= p1 ? a : 0    (b: clamp's input; the ends pass) */
  AG__MAP2_COUNT
} ag__map2_op;

/* AG__K_MAP2: out (+)= alpha * f(a, b), a and b broadcast to out's shape. */
typedef struct ag__map2_args {
  ag__map2_op op;
  float alpha, p0;
  ag__mat a, b;
  ag__mat out;
  int accumulate;
  float p1; /* the second parameter (CLAMP_BWD's upper end) */
} ag__map2_args;

typedef enum ag__reduce_op { AG__RED_SUM = 0, AG__RED_MAX, AG__RED_COUNT } ag__reduce_op;

/* AG__K_REDUCE over x [rows, cols]:
 *   axis 0: out [1, cols] (down each column); axis 1: out [rows, 1]; axis 2: out [1, 1].
 *   SUM: out (+)= scale * sum.  MAX: out = max (accumulate ignored); when
 *   arg != NULL also arg[k] = index of the first maximum (axis 0: a row index,
 *   axis 1: a column index), of dtype arg_dtype (AG_I32 or AG_I64). Axis 2 MAX
 *   is not provided. */
typedef struct ag__reduce_args {
  ag__reduce_op op;
  int axis;
  float scale;
  ag__mat x;
  ag__mat out;
  void *arg;
  ag_dtype arg_dtype;
  int accumulate;
} ag__reduce_args;

/* AG__K_PICK, axis 0: out[0, j] = x[clamp(i_j, 0, rows-1), j] for x [rows, n], out [1, n];
 *   axis 1: out[j, 0] = x[j, clamp(i_j, 0, cols-1)] for x [n, cols], out [n, 1].
 *   i_j = idx[j * idx_stride] of idx_dtype (AG_I32, AG_I64, or AG_F32 holding
 *   whole numbers: truncated toward zero, NaN as 0). */
typedef struct ag__pick_args {
  int axis;
  ag__mat x;
  const void *idx;
  ag_dtype idx_dtype;
  int64_t idx_stride;
  ag__mat out;
  int accumulate;
} ag__pick_args;

/* AG__K_PICK_BWD, axis 0: dx[r, j] (+)= (r == clamp(i_j)) ? g[0, j] : 0, dx [rows, n];
 *   axis 1: dx[j, c] (+)= (c == clamp(i_j)) ? g[j, 0] : 0, dx [n, cols]. */
typedef struct ag__pick_bwd_args {
  int axis;
  ag__mat g;
  const void *idx;
  ag_dtype idx_dtype;
  int64_t idx_stride;
  ag__mat dx;
  int accumulate;
} ag__pick_bwd_args;

/* AG__K_FILL: out = value. */
typedef struct ag__fill_args {
  ag__mat out;
  float value;
} ag__fill_args;

/* AG__K_COPY: out (+)= x, same shape (no broadcast). */
typedef struct ag__copy_args {
  ag__mat x;
  ag__mat out;
  int accumulate;
} ag__copy_args;

/* Multi-tensor arguments: up to AG__MT_MAX tensors of n floats each. */
#define AG__MT_MAX 48

typedef struct ag__mt_entry {
  float *p; /* parameter (AXPBY: y) */
  float *g; /* gradient (AXPBY: x) */
  float *m; /* first moment */
  float *v; /* second moment */
  int64_t n;
} ag__mt_entry;

/* Optimizer state on the device (floats):
 *   [0] step t, [1] sum of squared gradients (SUMSQ accumulates, ADAM_PREP
 *   clears), [2] 1 - b1^t, [3] 1 - b2^t, [4] clip coefficient. */
enum { AG__OPT_T = 0, AG__OPT_SUMSQ, AG__OPT_BC1, AG__OPT_BC2, AG__OPT_COEF, AG__OPT_STATE_N };

/* AG__K_SUMSQ: state[SUMSQ] += sum over entries of g[i]^2. */
/* AG__K_ADAM_PREP (one thread): t += 1; BC1 = 1 - b1^t; BC2 = 1 - b2^t;
 *   COEF = max_norm > 0 ? min(1, max_norm / (sqrt(SUMSQ) + 1e-6)) : 1; SUMSQ = 0. */
/* AG__K_ADAM, elementwise: g = COEF * grad + wd * p; m = b1 m + (1-b1) g;
 *   v = b2 v + (1-b2) g^2; p -= lr * (m / BC1) / (sqrt(v / BC2) + eps).
 *   With prep set, ADAM_PREP's update is part of the call (one launch
 *   instead of two): the values are those ADAM_PREP would store, and the
 *   state holds them afterwards. */
typedef struct ag__adam_args {
  int sgd;  /* ADAM kernel as plain SGD: p -= lr * (COEF * grad + wd * p) */
  int prep; /* ADAM: do ADAM_PREP first */
  int count;
  ag__mt_entry t[AG__MT_MAX];
  float lr, b1, b2, eps, wd, max_norm;
  float *state;
  /* device scratch of the size the backend's scratch query asks for (a
   * backend may split a prep-fused launch over blocks that must agree on
   * which is last), zero-filled when made and zero again after every
   * launch; NULL when the query says 0 */
  float *scratch;
} ag__adam_args;

/* AG__K_AXPBY: y_i = a * x_i + b * y_i for every entry (y = p, x = g). */
typedef struct ag__axpby_args {
  int count;
  ag__mt_entry t[AG__MT_MAX];
  float a, b;
} ag__axpby_args;

/* AG__K_RANDINT: out[i] = floor(u_i * bound), u_i uniform in [0, 1) from
 *   Philox4x32-10 (philox.h) with key = seed and counter = (*counter + i);
 *   afterwards *counter += n. bound = *bound_dev when bound_dev != NULL
 *   (an AG_I64 on the device; values < 1 give 0), else bound_const.
 *   out: n values of out_dtype (AG_I32 / AG_I64). */
typedef struct ag__randint_args {
  uint64_t seed;
  uint64_t *counter;
  const int64_t *bound_dev;
  int64_t bound_const;
  int64_t n;
  void *out;
  ag_dtype out_dtype;
} ag__randint_args;

/* AG__K_TD_TARGET: out[0, j] = reward[0, j] + gamma * (1 - done[0, j]) * v_j,
 *   v_j = max_r q[r, j] when idx is NULL, else q[clamp(i_j), j] (i_j as in PICK).
 *   q [A, B], reward, done, out [1, B]. */
typedef struct ag__td_args {
  ag__mat q;
  const void *idx;
  ag_dtype idx_dtype;
  int64_t idx_stride;
  ag__mat reward, done;
  float gamma;
  ag__mat out;
} ag__td_args;

/* AG__K_LOSS: *out = mean over the elements of f(pred - target), f the MSE
 *   square (kind 0) or the Huber function of delta (kind 1); when dpred.p is
 *   not NULL also dpred = f'(pred - target) / n (contiguous, pred's shape). */
typedef struct ag__loss_args {
  int kind;
  float delta;
  ag__mat pred, target;
  float *out;
  ag__mat dpred;
} ag__loss_args;

/* ---- prioritized replay: a sum tree of fan-out 16 ----
 * Levels 0 .. depth-1 below the root; level d holds 16^(d+1) nodes at
 * tree[ag__per_offset(d)], the leaves (level depth-1) one per column; a node
 * is the sum of its 16 children (in ag__per_sum16's order, on every device);
 * the root, the sum of level 0, is tree[ag__per_offset(depth)]. Values are
 * doubles. state[0] is the largest priority seen (new columns get it). */
#define AG__PER_FAN 16

/* AG__K_PER_SET: leaf idx_j = prio_j ^ alpha (prio_j at prio[j * prio_stride],
 *   taken as at least 1e-12), for j < n with 0 <= idx_j < cols and, when
 *   mask is not NULL, mask[idx_j] != 0 (others are skipped); then the
 *   ancestors of those leaves, each once; state[0] = max(state[0], prio_j)
 *   over those j. With repeated indices the last one's value is kept (on
 *   every device). */
typedef struct ag__per_set_args {
  double *tree;
  int depth;
  float alpha;
  float *state;
  const void *idx;
  ag_dtype idx_dtype;
  int64_t n;
  const float *prio;
  int64_t prio_stride;
  int64_t cols;        /* the table's columns: other indices are skipped (memory safety) */
  const uint8_t *mask; /* NULL, or a byte per column: the columns whose byte is 0 are skipped */
} ag__per_set_args;

/* AG__K_PER_FILL: mask NULL: leaves pos .. pos+k-1 = state[0] ^ alpha;
 * mask not NULL (a byte per column): those of the leaves whose byte is 0
 * = 0, the others unchanged (a masking pass; state and alpha unread). Then
 * their ancestors. */
typedef struct ag__per_fill_args {
  double *tree;
  int depth;
  float alpha;
  const float *state;
  int64_t pos, k;
  const uint8_t *mask;
} ag__per_fill_args;

/* AG__K_PER_SAMPLE: for j < B, u_j = (j + v_j) / B * root with v_j uniform in
 *   [0, 1) (draw counter + j of the Philox stream `seed`, 53 bits); idx[j] =
 *   the leaf whose interval of the running sum holds u_j (descending the
 *   tree; a rounding overshoot takes the last non-zero child). w[j] =
 *   (size * leaf / root) ^ -beta divided by the largest w of the batch
 *   (size: *size_dev transitions). *counter += B afterwards. beta_dev, when
 *   not NULL, holds beta on the device instead (ag__per_beta_of). */
typedef struct ag__per_sample_args {
  const double *tree;
  int depth;
  float beta;
  uint64_t seed;
  uint64_t *counter;
  const int64_t *size_dev;
  int64_t B;
  int32_t *idx;
  float *w;
  const float *beta_dev;
} ag__per_sample_args;

/* ---- the batch of the fused updates (AG__K_QGRAD, AG__K_ACGRAD) ----
 * B transitions of an f32 table [rows, capacity] (times scale): the columns
 * idx[0..B-1] (clamped to the table) or, idx NULL, B columns drawn as
 * AG__K_RANDINT draws them (Philox stream seed, draws *counter + j, bound
 * *size_dev); the fields at rows obs_row (obs), act_row (the action),
 * rew_row, next_row (next obs), done_row (terminated 0 / 1). ret, disc and
 * last: the n-step walks of the given columns as AG__K_NSTEP makes them
 * ([B] each on the device; all three, with idx), or all NULL. */
typedef struct ag__batch_src {
  const float *table;
  int64_t rows, capacity;
  float scale;
  const int32_t *idx; /* or NULL: drawn */
  uint64_t seed;
  uint64_t *counter;
  const int64_t *size_dev;
  int64_t B;
  int64_t obs_row, act_row, rew_row, next_row, done_row;
  const float *ret, *disc;
  const int64_t *last;
} ag__batch_src;

/* ---- the DQN gradient of a small MLP in one call ----
 * AG__K_QGRAD: for the B transitions idx[0..B-1] (clamped to the table) of a
 * table of f32 columns [rows, capacity] (times scale) — or, when idx is
 * NULL, B columns drawn as AG__K_RANDINT draws them (Philox stream seed,
 * draws *counter + j, bound *size_dev; *counter += B afterwards) — with
 *   s = obs rows, a = action row (a whole number, as in PICK), r = reward,
 *   s' = next-obs rows, d = terminated (0 / 1):
 *   Q(x) = W_{L-1} relu(... relu(W_0 x + b_0) ...) + b_{L-1}   (w, b: online)
 *   Q'(x): the same with tw, tb (target); at most AG__QG_MAX_ACTIONS outputs
 *   y_j = r_j + gamma (1 - d_j) v_j,  v_j = max_a Q'(s'_j)[a]
 *         (double_dqn: Q'(s'_j)[argmax_a Q(s'_j)[a]], the first maximum)
 * With the n-step arrays ret, disc and last (all three or none; they need
 * idx, as AG__K_NSTEP makes them for given columns):
 *   y_j = ret[j] + disc[j] v_j, v_j as above at s'_j = the next-obs rows of
 *   column clamp(last[j], 0, capacity-1) instead of column idx[j]; gamma
 *   and the done row are not read (disc holds gamma^k and the termination).
 *   Without them the one-step target above, bit for bit as before.
 *   *loss = (1 / B) sum_j f(Q(s_j)[a_j] - y_j)   (f as in AG__K_LOSS: kind 0 MSE, 1 Huber of delta)
 * and the gradient of *loss with respect to w, b (y held constant) written
 * into gw, gb. The loss is summed in groups of AG__QG_LOSS_GROUP consecutive
 * transitions, in order, then over the groups in order (every backend sums
 * so, for the same rounding). ws: the scratch the backend's scratch query
 * asks for (bytes), on the device. With opt.on, the call applies an optimizer step
 * to the online network as one AG__K_ADAM launch with prep and no clipping
 * would (entries 2i = W_i with moments m[2i], v[2i], 2i + 1 = b_i), once the
 * gradients are written (a kernel less on the GPU, where each tile of a
 * gradient is final as soon as it is made). */
#define AG__QG_MAX_LAYERS 9
#define AG__QG_MAX_ACTIONS 64
#define AG__QG_LOSS_GROUP 2

/* The optimizer step inside AG__K_QGRAD (values, not a pointer to another
 * call's arguments, so that a recorded call holds all it reads). */
typedef struct ag__qgrad_step {
  int on, sgd;
  float lr, b1, b2, eps, wd;
  float *state; /* AG__OPT_STATE_N floats, as AG__K_ADAM's */
  float *m[2 * AG__QG_MAX_LAYERS], *v[2 * AG__QG_MAX_LAYERS];
} ag__qgrad_step;

typedef struct ag__qgrad_args {
  ag__batch_src src;
  int L; /* layers: sizes[0] inputs .. sizes[L] actions */
  int64_t sizes[AG__QG_MAX_LAYERS + 1];
  const float *w[AG__QG_MAX_LAYERS], *b[AG__QG_MAX_LAYERS];   /* online, W_i [sizes[i+1], sizes[i]] */
  const float *tw[AG__QG_MAX_LAYERS], *tb[AG__QG_MAX_LAYERS]; /* target */
  float *gw[AG__QG_MAX_LAYERS], *gb[AG__QG_MAX_LAYERS];
  float gamma;
  int double_dqn;
  int kind;
  float delta;
  float *ws;
  float *loss;
  ag__qgrad_step opt;
} ag__qgrad_args;

/* ---- a SAC or TD3 update of small MLPs in one call ----
 * AG__K_ACGRAD: one update of ac.c's agent (its composed ops are the
 * reference: agent/ac.c's header gives the policies and targets) for the
 * B transitions idx[0..B-1] (clamped to the table) of an f32 table [rows,
 * capacity] (times scale), or, idx NULL, B columns drawn as AG__K_RANDINT
 * draws them (seed, draws *counter + j, bound *size_dev):
 *   s = rows obs_row .. + S, a = the A rows that follow them (act_row =
 *   obs_row + S), r = rew_row, s' = next_row .. + S, d = done_row;
 *   with ret, disc, last (all three, with idx): y = ret + disc V(s' of
 *   column last[j]), else y = r + gamma (1 - d) V(s').
 * Every network is an MLP of L layers, sizes {in, hidden[0..L-2], out},
 * ReLU hidden layers, linear output, W_i [sizes[i+1], sizes[i]] stored
 * with ld = sizes[i+1]: the actor S -> 2A (SAC: means, then the raw log
 * standard deviations) or A (TD3), the critics and their targets S + A -> 1.
 * The standard normals the call needs are draws of the same stream after
 * the B indices (idx NULL) or from *counter (idx given): the smoothing or
 * sampling normals of a' ([A, B] column by column), then (SAC, actor) the
 * policy's on s; *counter moves past them at the end.
 * The call: the critics' loss sum_k mean_j (Q_k(s_j, a_j) - y_j)^2 into
 * *closs, its gradient into q[k].gw/gb and opt_critic's step (entries 2i,
 * 2i+1 = W_i, b_i of critic 0, then 2L + ... of critic 1); with targets,
 * qt[k] = tau q[k] + (1 - tau) qt[k] after it. With actor: the actor's loss
 * (SAC: mean(alpha log pi - min_k Q_k(s, a~)); TD3: -mean Q_0(s, a(s)))
 * on the updated critics into *aloss, its gradient into actor.gw/gb and
 * opt_actor's step; TD3: actor_t = tau actor + (1 - tau) actor_t after;
 * SAC with autotune: d/d log alpha of -log alpha mean(log pi + target
 * entropy) into *log_alpha_grad and opt_alpha's step on *log_alpha. alpha
 * = exp(*log_alpha) as the call finds it, in both losses. Sums run in a
 * fixed order: a replay gives the same bits. ws: the scratch the
 * backend's query asks for. B is at most AG__AC_MAX_TILED and a hidden
 * layer at most AG__AC_MAX_WIDTH wide (the callers compose larger ones). */
#define AG__AC_MAX_LAYERS 9
#define AG__AC_MAX_TILED ((int64_t)65535 * 32) /* the largest B */
#define AG__AC_MAX_WIDTH 16384                 /* the widest hidden layer */

typedef struct ag__ac_net {
  float *w[AG__AC_MAX_LAYERS], *b[AG__AC_MAX_LAYERS];
  float *gw[AG__AC_MAX_LAYERS], *gb[AG__AC_MAX_LAYERS]; /* NULL for a target */
} ag__ac_net;

/* An optimizer's step (AG__K_ADAM with prep, no clipping, over the
 * entries in the order above); m[e], v[e]: entry e's moments. */
typedef struct ag__ac_opt {
  int sgd;
  float lr, b1, b2, eps, wd;
  float *state;
  float *m[4 * AG__AC_MAX_LAYERS], *v[4 * AG__AC_MAX_LAYERS];
} ag__ac_opt;

typedef struct ag__acgrad_args {
  ag__batch_src src;
  int td3, actor, targets, autotune;
  int L;
  int64_t S, A;
  int64_t hidden[AG__AC_MAX_LAYERS - 1];
  ag__ac_net pi, pi_t, q[2], qt[2]; /* pi_t: TD3's target actor */
  ag__ac_opt opt_critic, opt_actor, opt_alpha;
  float *log_alpha, *log_alpha_grad;
  float gamma, tau, target_entropy, target_noise, noise_clip;
  float *ws;
  float *closs, *aloss;
} ag__acgrad_args;

/* AG__K_CONVERT: dst[r, c] = (dst_dtype) src[r, c] for r < rows, c < cols,
 * element (r, c) at src[c * src_ld + r] and dst[c * dst_ld + r], by the
 * rules of base/convert.h (device data bound for integer storage
 * saturates). Any two dtypes of ag_dtype. */
typedef struct ag__convert_args {
  const void *src;
  ag_dtype src_dtype;
  int64_t src_ld;
  void *dst;
  ag_dtype dst_dtype;
  int64_t dst_ld;
  int64_t rows, cols;
} ag__convert_args;

/* AG__K_SET_I64: *dst = value (a counter on the device, set with no transfer). */
typedef struct ag__set_i64_args {
  int64_t *dst;
  int64_t value;
} ag__set_i64_args;

/* AG__K_NSTEP: the n-step returns of the B transitions at columns
 * c = clamp(idx[j * idx_stride], 0, capacity-1) of a replay table (columns
 * [rows, capacity] of dtype), walking columns c, c + stride, ... (mod
 * capacity) as base/nstep.h's ag__nstep_walk states it, with the ring's
 * size = *size_dev and position = *pos_dev read on the device:
 *   ret[j] = sum over the steps taken of gamma^k * reward (times scale),
 *   discount[j] = 0 (terminated) or gamma^(steps taken), last[j] = the last
 *   column taken. A flag row is set where its stored value is not 0;
 *   trunc_row < 0: no truncation flags. */
typedef struct ag__nstep_args {
  const void *table;
  ag_dtype dtype;
  int64_t rows, capacity;
  float scale;
  int64_t rew_row, term_row, trunc_row;
  const int64_t *size_dev, *pos_dev;
  const void *idx;
  ag_dtype idx_dtype;
  int64_t idx_stride;
  int64_t B;
  int n; /* steps, 1 .. AG__NSTEP_MAX */
  float gamma;
  int64_t stride; /* 1 .. capacity */
  float *ret, *discount;
  int64_t *last;
} ag__nstep_args;
#define AG__NSTEP_MAX 64

/* AG__K_RANDN: out[i] = a standard normal value made by Box-Muller from
 *   draw *counter + i of the Philox stream `seed` alone (64 bits: the low 32
 *   give the radius, the high 32 the angle; base/normal.h), for i < n;
 *   afterwards *counter += n. The same bits on every backend. out: n f32. */
typedef struct ag__randn_args {
  uint64_t seed;
  uint64_t *counter;
  int64_t n;
  float *out;
} ag__randn_args;

/* ---- replay fields moved to and from other memory in one launch ----
 * Both kernels read or write a replay table [rows, capacity] (column c's
 * rows contiguous: element (r, c) at table[c * rows + r]) and, on the other
 * side, up to 40 regions of any dtype each, so that a batch leaves the
 * table for another framework's tensors (every field in its own dtype),
 * or arrives from them, in one launch. Conversions follow base/convert.h
 * (the device rules of AG__K_CONVERT): floating values round to nearest
 * even, and bound for an integer dtype also saturate (NaN: 0). A backend
 * may lack them (Vulkan does): the callers (replay.c) compose the same
 * work from AG__K_GATHER, AG__K_CONVERT and the like. */
#define AG__GF_MAX 40
#define AG__GF_INDICES (-1) /* a destination's row0: the clamped indices */
#define AG__GF_WEIGHTS (-2) /* a destination's row0: the weights */

/* One destination of AG__K_GATHER_FIELDS: element e (< width) of
 * transition j at p[j * ld + e] (ld >= width), of dtype. */
typedef struct ag__gf_dst {
  int64_t row0, width;
  void *p;
  ag_dtype dtype;
  int64_t ld;
} ag__gf_dst;

/* AG__K_GATHER_FIELDS: for the n transitions j, c_j = clamp(idx[j *
 * idx_stride], 0, capacity-1) (idx_dtype AG_I32 / AG_I64), and each
 * destination d of dst[0 .. n_dst-1] (n_dst in 0 .. AG__GF_MAX):
 *   row0 >= 0: p[j * ld + e] = (dtype) v for e < width (row0 + width <=
 *     rows), v = (f32) src[c_j * rows + row0 + e] * scale, the product
 *     skipped when scale is 1 (the value as stored); except that an
 *     integer src_dtype (u8, i32) with a scale of 1 bound for an integer
 *     dtype goes across as an integer, exactly (never through f32);
 *   row0 = AG__GF_INDICES (width 1, dtype AG_I32 / AG_I64): p[j * ld] = c_j;
 *   row0 = AG__GF_WEIGHTS (width 1, weights not NULL): p[j * ld] = (dtype)
 *     weights[j].
 * The destinations must not overlap the table, the indices, the weights
 * or each other (two may hold the same field in different dtypes). */
typedef struct ag__gather_fields_args {
  const void *src;
  ag_dtype src_dtype;
  int64_t rows, capacity;
  float scale;
  const void *idx;
  ag_dtype idx_dtype;
  int64_t idx_stride;
  int64_t n;
  const float *weights; /* n values, stride 1; may be NULL */
  int n_dst;
  ag__gf_dst dst[AG__GF_MAX];
} ag__gather_fields_args;

#define AG__SF_MAX 40

/* One source of AG__K_SCATTER_FIELDS: element e (< width) of transition j
 * at p[j * ld + e] (ld >= width), of dtype; it goes to rows row0 ..
 * row0 + width - 1 of the table (row0 + width <= rows). */
typedef struct ag__sf_src {
  const void *p;
  ag_dtype dtype;
  int64_t ld;
  int64_t row0, width;
} ag__sf_src;

/* AG__K_SCATTER_FIELDS: for the k transitions j (k in 0 .. capacity) and
 * each source s of src[0 .. n_src-1] (n_src in 0 .. AG__SF_MAX):
 *   dst[col_j * rows + row0 + e] = (dst_dtype) p[j * ld + e], e < width,
 *   col_j = (pos + j) mod capacity (pos in 0 .. capacity-1: the ring's
 *   wrap is the kernel's own);
 * then *size_dev = size_value when size_dev is not NULL, and *pos_dev =
 * pos_value when pos_dev is not NULL (each stored once). The sources must
 * not overlap the table, nor two of them go to the same row. */
typedef struct ag__scatter_fields_args {
  void *dst;
  ag_dtype dst_dtype;
  int64_t rows, capacity;
  int64_t pos, k;
  int n_src;
  ag__sf_src src[AG__SF_MAX];
  int64_t *size_dev;
  int64_t size_value;
  int64_t *pos_dev;
  int64_t pos_value;
} ag__scatter_fields_args;

/* AG__K_FRAME_STACK: the stacked observations of B transitions of a frame
 * table (agrl/frames.h), rebuilt from its frames as base/frames.h states it.
 *   frames [fr = h*w*c + 1, capacity] u8: column x holds the frame of entry
 *   x (h x w x c, c fastest) and, in its last row, the entry's first flag;
 *   the ring's size = *size_dev and position = *pos_dev read on the device.
 * First the columns: idx != NULL: cols[j] = clamp(idx[j], 0, capacity-1);
 * idx NULL: cols[j] drawn (ag__frames_draw: Philox stream seed, draws
 * *counter + j * AG__FRAMES_TRIES + t), and afterwards *counter +=
 * B * AG__FRAMES_TRIES. Then, for each j, stack slot i (0 = oldest), channel
 * ch, pixel (y, x):
 *   obs[j * D + (i * c + ch) * h * w + y * w + x] = frame(src_i)[(y * w + x) * c + ch]
 * with D = stack * c * h * w, src_i the walk of ag__frames_walk from cols[j]
 * (obs) or from cols[j] + n_envs (next_obs), converted to out_dtype: AG_U8
 * as stored, AG_F32 as v / 255.0f. cols: [B] i64 (written). */
typedef struct ag__frame_stack_args {
  const uint8_t *frames;
  int64_t h, w, c, capacity, n_envs;
  int stack;
  const int64_t *size_dev, *pos_dev;
  const void *idx; /* NULL: drawn */
  ag_dtype idx_dtype;
  uint64_t seed;
  uint64_t *counter;
  int64_t B;
  int64_t *cols;
  void *obs, *next_obs;
  ag_dtype out_dtype;
} ag__frame_stack_args;
#define AG__FRAMES_TRIES 64

/* ---- 2-D convolution of a batch (cross-correlation, as deep learning has it) ----
 * AG__K_CONV2D over B = y.cols samples. A sample is a column of C*H*W
 * values: channel c's H x W image row by row, pixel (c, h, v) at row
 * (c * H + h) * W + v. The K filters are the columns of w [C*kh*kw, K]:
 * tap (c, u, v) of filter k at w[(c * kh + u) * kw + v, k] (the bytes of a
 * [K, C, kh, kw] array in C order). The output of a sample is a column of
 * K*Ho*Wo values, Ho = (H + 2 pad - kh) / stride + 1, Wo = (W + 2 pad -
 * kw) / stride + 1, output (k, i, j) at row (k * Ho + i) * Wo + j:
 *   y[k, i, j] = b[k] + sum_{c, u, v} w[(c, u, v), k] x[c, i*stride + u - pad, j*stride + v - pad]
 * (taps outside the image read 0). Each mode writes one output, (+)= by
 * accumulate, and reads the others:
 *   AG__CONV_FWD:   y (+)= the sum above, + b[k] when b is not NULL (x, w read)
 *   AG__CONV_BWD_X: x (+)= d sum / d x of the sum weighted by y (y holds
 *                   the output's gradient; w read; b unused)
 *   AG__CONV_BWD_W: w (+)= d sum / d w weighted by y, over the whole
 *                   batch (x and y read; b unused)
 *   AG__CONV_BWD_B: b[k] (+)= the sum of y's rows of filter k over the
 *                   batch (y read; x, w unused, b not NULL)
 * x [C*H*W, B], w [C*kh*kw, K], y [K*Ho*Wo, B] with any ld >= rows; b: K
 * floats, contiguous. ws: the scratch the backend's query asks for (bytes),
 * or NULL when it asks for none. Sizes positive, pad >= 0, Ho, Wo >= 1;
 * each product of sizes fits in 31 bits (a BLAS int). */
typedef enum ag__conv_mode { AG__CONV_FWD = 0, AG__CONV_BWD_X, AG__CONV_BWD_W, AG__CONV_BWD_B } ag__conv_mode;

typedef struct ag__conv2d_args {
  ag__conv_mode mode;
  int accumulate;
  int64_t C, H, W, K, kh, kw, stride, pad;
  ag__mat x, w, y;
  float *b;
  float *ws;
} ag__conv2d_args;

/* The output sizes of a convolution along one axis: (n + 2 pad - k) / stride + 1. */
static inline int64_t ag__conv_out(int64_t n, int64_t k, int64_t stride, int64_t pad) {
  return (n + 2 * pad - k) / stride + 1;
}

/* A convolution's output image Ho x Wo, its P = Ho*Wo pixels and the Q =
 * C*kh*kw taps of a filter (the sizes of a sample's patch matrix). */
typedef struct ag__conv_dims {
  int64_t Ho, Wo, P, Q;
} ag__conv_dims;

static inline ag__conv_dims ag__conv_dims_of(const ag__conv2d_args *a) {
  ag__conv_dims d;
  d.Ho = ag__conv_out(a->H, a->kh, a->stride, a->pad);
  d.Wo = ag__conv_out(a->W, a->kw, a->stride, a->pad);
  d.P = d.Ho * d.Wo;
  d.Q = a->C * a->kh * a->kw;
  return d;
}

#ifdef __cplusplus
}
#endif
#endif /* AGRL_CORE_KERNELS_H */
