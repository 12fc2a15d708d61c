/* agrl/graph.h — operations on tensors, with reverse-mode gradients.
 *
 * Every op issues its kernel on the context's queue at once and returns a
 * temporary tensor (released by ag_ctx_reset). When an input requires a
 * gradient (a parameter, or a result computed from one) and no no-grad scope
 * is open, the op is written on the context's tape, and ag_backward() walks
 * the tape in reverse. Buffer gathers (ag_get_rows) never require gradients.
 *
 * Shapes: tensors are rows x cols, column by column. A batch of n vectors of
 * d features is [d, n] (one column a sample, like a buffer). Binary ops
 * broadcast an operand of 1 row, 1 column, or 1 x 1 to the other's shape.
 * All ops take f32 tensors, except the index arguments of ag_pick and
 * ag_td_target (i32, i64, or f32 holding whole numbers) and the slices and
 * ag_detach (any dtype). Ops are recordable.
 *
 * Errors of every op: AG_ERR_INVALID_ARG: an operand or out NULL, operands
 * of different contexts; AG_ERR_FREED: an operand released by
 * ag_ctx_reset; AG_ERR_SHAPE: an operand that is not f32 where f32 is
 * taken; AG_ERR_OUT_OF_MEMORY (the workspace, the tape); the errors of
 * uploading a persistent operand that a device switch left on the host;
 * AG_ERR_DEVICE. Each op below lists only its own others.
 * On error an op returns a status, writes nothing to *out, and queues
 * nothing, but for one case: when the tape cannot grow (out of host
 * memory) the op's kernel is queued already, into a temporary no one sees.
 */
#ifndef AGRL_GRAPH_H
#define AGRL_GRAPH_H

#include "agrl/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ag_axis {
  AG_AXIS_ROWS = 0, /* reduce down each column: [r, c] -> [1, c] */
  AG_AXIS_COLS = 1, /* reduce along each row:   [r, c] -> [r, 1] */
  AG_AXIS_ALL = 2   /* everything:              [r, c] -> [1, 1] */
} ag_axis;

/* ---- gradients ---- */

/* Makes a persistent tensor a leaf that receives gradients (a parameter):
 * allocates its gradient, zero-filled, owned by t. on = 0 stops it (the
 * gradient is kept). Only persistent f32 tensors can require gradients.
 * Errors: AG_ERR_INVALID_ARG: t NULL, a temporary or a gradient;
 * AG_ERR_SHAPE: t not f32; AG_ERR_STATE while a step is being recorded
 * (a new gradient); AG_ERR_OUT_OF_MEMORY. */
AG_API ag_status ag_tensor_set_requires_grad(ag_tensor *t, int on);
AG_API int ag_tensor_requires_grad(const ag_tensor *t);
/* The gradient tensor (persistent for parameters and owned by t, temporary
 * otherwise), or NULL. */
AG_API ag_tensor *ag_tensor_grad(const ag_tensor *t);
/* Sets the gradients of n parameters to zero (queued; n = 0 does nothing).
 * Errors: AG_ERR_INVALID_ARG: n < 0, params NULL for n > 0, a tensor
 * without a gradient; AG_ERR_FREED. */
AG_API ag_status ag_zero_grad(ag_tensor *const *params, int n);

/* Reverse mode from a [1, 1] loss: d loss / d x is added to the gradient
 * of every parameter x the loss depends on (accumulated: zero them between
 * steps). The tape is kept until ag_ctx_reset(); backward twice adds twice.
 * Errors found before any gradient is written (bad loss, a reset tape)
 * change nothing. A failure while the gradients are being written (no
 * memory for a temporary, a device error) leaves every parameter the loss
 * reaches as after ag_zero_grad: what they had accumulated is dropped, and
 * a retry of the backward computes them afresh.
 * Errors: AG_ERR_INVALID_ARG: loss NULL, or not computed from a tensor that
 * requires a gradient; AG_ERR_FREED; AG_ERR_SHAPE: loss not [1, 1] f32;
 * AG_ERR_STATE: the tape was reset since the loss was computed;
 * AG_ERR_OUT_OF_MEMORY; AG_ERR_DEVICE. */
AG_API ag_status ag_backward(ag_tensor *loss);

/* Between begin and end no op is taped and no result requires a gradient
 * (targets, acting). Scopes nest. */
AG_API void ag_no_grad_begin(ag_ctx *ctx);
AG_API void ag_no_grad_end(ag_ctx *ctx);

/* A view of x (any dtype, no copy) that never requires a gradient. */
AG_API ag_status ag_detach(ag_tensor *x, ag_tensor **out);

/* ---- linear algebra ---- */

/* out [m, n] = op(a) op(b); op(a) = a [m, k] or a^T (a [k, m]) when trans_a.
 * Errors: AG_ERR_SHAPE: the inner sizes differ; AG_ERR_UNSUPPORTED: m, n
 * or k beyond 2^31. */
AG_API ag_status ag_matmul(ag_tensor *a, int trans_a, ag_tensor *b, int trans_b, ag_tensor **out);

/* ---- convolution ---- */

/* The geometry of a 2-D convolution: an input image of C channels of H
 * rows by W columns, filters of kh x kw taps, the same stride and zero
 * padding (pad zeros on each side) on both axes. */
typedef struct ag_conv2d_geom {
  int64_t C, H, W;
  int64_t kh, kw;
  int64_t stride, pad;
} ag_conv2d_geom;

/* out [K*Ho*Wo, B] = the 2-D convolution (cross-correlation, as PyTorch's
 * conv2d) of each sample of x by K filters, plus b:
 *   out[(k*Ho + i)*Wo + j, n] = b[k] + sum over c < C, u < kh, v < kw of
 *     w[(c*kh + u)*kw + v, k] * x[(c*H + i*stride + u - pad)*W + j*stride + v - pad, n]
 * with the taps that fall outside the image (into the padding) reading 0;
 *   Ho = (H + 2 pad - kh) / stride + 1,  Wo = (W + 2 pad - kw) / stride + 1.
 * x [C*H*W, B] f32: one column a sample, channel by channel, each channel's
 *   image row by row (the bytes of a [B, C, H, W] array in C order, e.g. a
 *   PyTorch NCHW batch);
 * w [C*kh*kw, K] f32: one column a filter (the bytes of PyTorch's weight
 *   [K, C, kh, kw]);
 * b [K, 1] f32, or NULL for no bias;
 * out: one column a sample, channel by channel, row by row: flat already,
 *   and an input to the next convolution with geometry {K, Ho, Wo, ...}.
 * Activations are separate ops (ag_relu). Gradients flow to x, w and b.
 * Errors: AG_ERR_INVALID_ARG: geom NULL; C, H, W, kh, kw or stride < 1, or
 * pad < 0; AG_ERR_SHAPE: x has not C*H*W rows, w not C*kh*kw rows, b not
 * [K, 1], or a filter larger than the padded image (kh > H + 2 pad, kw > W
 * + 2 pad); AG_ERR_UNSUPPORTED: C*H*W, C*kh*kw, K*Ho*Wo or Ho*Wo*C*kh*kw
 * beyond 2^31 - 1, kh, kw, stride or pad beyond 65535, or a backend
 * without a convolution kernel (the CPU, CUDA and Vulkan backends have
 * one; the message names the backend). */
AG_API ag_status ag_conv2d(ag_tensor *x, const ag_conv2d_geom *geom, ag_tensor *w, ag_tensor *b,
                           ag_tensor **out);

/* ---- elementwise (broadcasting b, or a) ----
 * Errors: AG_ERR_SHAPE: the shapes do not broadcast; AG_ERR_INVALID_ARG: a
 * factor (s, a, b of ag_scale and ag_affine) that is not finite. */

AG_API ag_status ag_add(ag_tensor *a, ag_tensor *b, ag_tensor **out);        /* a + b */
AG_API ag_status ag_sub(ag_tensor *a, ag_tensor *b, ag_tensor **out);        /* a - b */
AG_API ag_status ag_mul(ag_tensor *a, ag_tensor *b, ag_tensor **out);        /* a * b */
AG_API ag_status ag_div(ag_tensor *a, ag_tensor *b, ag_tensor **out);        /* a / b */
AG_API ag_status ag_scale(ag_tensor *x, float s, ag_tensor **out);           /* s * x */
AG_API ag_status ag_affine(ag_tensor *x, float a, float b, ag_tensor **out); /* a * x + b */
AG_API ag_status ag_relu(ag_tensor *x, ag_tensor **out);
AG_API ag_status ag_tanh(ag_tensor *x, ag_tensor **out);
AG_API ag_status ag_sigmoid(ag_tensor *x, ag_tensor **out);
AG_API ag_status ag_exp(ag_tensor *x, ag_tensor **out);
AG_API ag_status ag_log(ag_tensor *x, ag_tensor **out);
AG_API ag_status ag_square(ag_tensor *x, ag_tensor **out);
AG_API ag_status ag_abs(ag_tensor *x, ag_tensor **out);
/* Elementwise Huber of x: |x| <= delta ? x^2 / 2 : delta * (|x| - delta / 2)
 * (ag_huber_loss's terms before the mean). Errors: those of the unary ops;
 * AG_ERR_INVALID_ARG: delta not positive and finite. */
AG_API ag_status ag_huber(ag_tensor *x, float delta, ag_tensor **out);
/* min(max(x, lo), hi) elementwise (a NaN stays NaN). The gradient is 1
 * where lo <= x <= hi, the ends included (as PyTorch's clamp has it), and
 * 0 elsewhere. Errors: those of the unary ops; AG_ERR_INVALID_ARG: lo or
 * hi not finite, lo > hi (lo = hi is a constant). */
AG_API ag_status ag_clamp(ag_tensor *x, float lo, float hi, ag_tensor **out);
/* Elementwise min and max of a and b, broadcasting like ag_add. The value
 * and the gradient come from a where a <= b (min) or a >= b (max), ties
 * included, and from b elsewhere; a NaN in either operand gives NaN, with
 * the gradient to the NaN (to a when both are). The gradient of a
 * broadcast operand is summed over the broadcast axis, as for ag_add.
 * Errors: those of the binary ops (AG_ERR_SHAPE: the shapes do not
 * broadcast). */
AG_API ag_status ag_minimum(ag_tensor *a, ag_tensor *b, ag_tensor **out);
AG_API ag_status ag_maximum(ag_tensor *a, ag_tensor *b, ag_tensor **out);

/* act(x + b) in one pass (b broadcast, typically a bias [r, 1]); act is
 * AG_BIAS_NONE, AG_BIAS_RELU, AG_BIAS_TANH or AG_BIAS_SIGMOID. Errors:
 * AG_ERR_INVALID_ARG: an unknown act; AG_ERR_SHAPE: b does not broadcast
 * to x's shape. */
typedef enum ag_bias_act_kind {
  AG_BIAS_NONE = 0,
  AG_BIAS_RELU = 1,
  AG_BIAS_TANH = 2,
  AG_BIAS_SIGMOID = 3
} ag_bias_act_kind;
AG_API ag_status ag_bias_act(ag_tensor *x, ag_tensor *b, ag_bias_act_kind act, ag_tensor **out);

/* ---- reductions ----
 * Errors: AG_ERR_INVALID_ARG: an axis that is not an ag_axis (for ag_max
 * and ag_argmax: not AG_AXIS_ROWS or AG_AXIS_COLS). */

AG_API ag_status ag_sum(ag_tensor *x, ag_axis axis, ag_tensor **out);
AG_API ag_status ag_mean(ag_tensor *x, ag_axis axis, ag_tensor **out);
/* Maximum along AG_AXIS_ROWS or AG_AXIS_COLS; the gradient flows to the
 * first maximum. */
AG_API ag_status ag_max(ag_tensor *x, ag_axis axis, ag_tensor **out);
/* Index of the first maximum along AG_AXIS_ROWS ([1, c] of row indices) or
 * AG_AXIS_COLS ([r, 1] of column indices), as AG_I32 or AG_I64; no gradient.
 * Errors: AG_ERR_INVALID_ARG: idx_dtype not AG_I32 or AG_I64. */
AG_API ag_status ag_argmax(ag_tensor *x, ag_axis axis, ag_dtype idx_dtype, ag_tensor **out);

/* ---- selection, slicing, joining ---- */

/* Q(s, a): out [1, n] with out[0, j] = x[idx_j, j] for x [r, n], idx holding
 * n indices (i32 / i64 / f32 whole numbers; a row, a column, or a packed
 * tensor of any shape). Indices are clamped to 0..r-1 on the device.
 * Errors: AG_ERR_SHAPE: idx of another dtype, not n indices, or a view with
 * gaps that is neither a row nor a column. */
AG_API ag_status ag_pick(ag_tensor *x, ag_tensor *idx, ag_tensor **out);
/* Views (no copy, any dtype): rows r0 .. r0+n-1, or columns c0 .. c0+n-1,
 * of x. Errors: AG_ERR_OUT_OF_RANGE: n < 1, or the range is not inside x. */
AG_API ag_status ag_slice_rows(ag_tensor *x, int64_t r0, int64_t n, ag_tensor **out);
AG_API ag_status ag_slice_cols(ag_tensor *x, int64_t c0, int64_t n, ag_tensor **out);
/* A contiguous copy of x (for views that are passed where rows must be packed). */
AG_API ag_status ag_contiguous(ag_tensor *x, ag_tensor **out);
/* [ra + rb, n] from a [ra, n] over b [rb, n]; [r, na + nb] side by side.
 * Errors: AG_ERR_SHAPE: the columns (rows) differ. */
AG_API ag_status ag_concat_rows(ag_tensor *a, ag_tensor *b, ag_tensor **out);
AG_API ag_status ag_concat_cols(ag_tensor *a, ag_tensor *b, ag_tensor **out);

/* ---- losses: [1, 1] means over all elements ----
 * Errors: AG_ERR_SHAPE: pred and target differ in shape. */

AG_API ag_status ag_mse_loss(ag_tensor *pred, ag_tensor *target, ag_tensor **out);
/* Huber: |d| <= delta ? d^2 / 2 : delta * (|d| - delta / 2), d = pred - target
 * (PyTorch's smooth_l1_loss for delta = 1). Errors: AG_ERR_INVALID_ARG:
 * delta not positive and finite. */
AG_API ag_status ag_huber_loss(ag_tensor *pred, ag_tensor *target, float delta, ag_tensor **out);

/* ---- reinforcement learning ---- */

/* The Q-learning target, without gradient: out [1, B] with
 * out_j = reward_j + gamma * (1 - done_j) * v_j, where v_j = max_a q_next[a, j],
 * or q_next[idx_j, j] when idx is given (Double DQN: idx = argmax of the
 * online network). q_next [A, B]; reward, done: [1, B] (row views of a
 * batch are fine); idx as for ag_pick. Errors: AG_ERR_INVALID_ARG: gamma
 * not finite; AG_ERR_SHAPE: reward or done not [1, B], idx as for ag_pick. */
AG_API ag_status ag_td_target(ag_tensor *q_next, ag_tensor *idx, ag_tensor *reward, ag_tensor *done,
                              float gamma, ag_tensor **out);

/* ---- values ---- */

/* A temporary rows x cols f32 tensor filled with `value`.
 * Errors: AG_ERR_INVALID_ARG: ctx or out NULL, rows or cols < 1. */
AG_API ag_status ag_full(ag_ctx *ctx, int64_t rows, int64_t cols, float value, ag_tensor **out);

#ifdef __cplusplus
}
#endif
#endif /* AGRL_GRAPH_H */
