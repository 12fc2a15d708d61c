/* graph_internal.h — shared by graph.c (forward), autograd.c (backward),
 * the nn layer and the capture layer. */
#ifndef AGRL_GRAPH_GRAPH_INTERNAL_H
#define AGRL_GRAPH_GRAPH_INTERNAL_H

#include "agrl/graph.h"
#include "core/internal.h"
#include "base/kernels.h"

/* Tape ops: what a node's backward does (autograd.c). */
enum {
  AG__OP_MAP = 1, /* i[0]: ag__map_op, f: its parameters */
  AG__OP_ADD,
  AG__OP_SUB,
  AG__OP_MUL,
  AG__OP_DIV,
  AG__OP_MATMUL,   /* i: trans_a, trans_b */
  AG__OP_SUM,      /* i[0]: axis, f[0]: scale */
  AG__OP_MAX,      /* i[0]: axis, aux: argmax (i32) */
  AG__OP_PICK,     /* in[1]: the index tensor */
  AG__OP_VIEW,     /* i: r0, c0 in the base */
  AG__OP_CONCAT,   /* i[0]: 1 by rows, 0 by columns */
  AG__OP_BIAS_ACT, /* i[0]: ag_bias_act_kind */
  AG__OP_LOSS,     /* aux: d loss / d pred */
  AG__OP_MINIMUM,
  AG__OP_MAXIMUM,
  AG__OP_CONV2D /* in[2]: b or NULL; i: the geometry (ag__conv_pack) */
};

/* An f32 operand as a kernel matrix (persistent tensors made resident). */
ag_status ag__operand(ag_tensor *t, const char *fn, const char *what, ag__mat *m);
/* The matrix of a temporary (or any resident) tensor. */
ag__mat ag__mat_of_temp(ag_tensor *t);
int ag__needs_grad(const ag_tensor *t);
ag_status ag__tape(ag_ctx *ctx, int op, ag_tensor *out, ag_tensor *in0, ag_tensor *in1, const float f[2],
                   const int64_t i[2], void *aux);
/* The same for an op of three inputs (in2 may be NULL). */
ag_status ag__tape3(ag_ctx *ctx, int op, ag_tensor *out, ag_tensor *in0, ag_tensor *in1, ag_tensor *in2,
                    const float f[2], const int64_t i[2], void *aux);
ag_status ag__unary(ag_tensor *x, ag__map_op op, float p0, float p1, const char *fn, ag_tensor **out);
/* Writes the zeros that ag_zero_grad deferred, when nothing else did. */
ag_status ag__grad_materialize(ag_tensor *t);
ag_status ag__index_operand(ag_tensor *idx, int64_t n, const char *fn, const void **p, int64_t *stride);

/* A convolution's geometry in a tape node's two integers (H, W < 2^31;
 * kh, kw, stride, pad < 2^16, as ag_conv2d checks), and back into a
 * kernel's arguments, with C = the rows of x / (H W) and K = w's columns. */
static inline void ag__conv_pack(const ag__conv2d_args *a, int64_t i[2]) {
  i[0] = (int64_t)((uint64_t)a->H << 32 | (uint64_t)a->W);
  i[1] =
      (int64_t)((uint64_t)a->kh | (uint64_t)a->kw << 16 | (uint64_t)a->stride << 32 | (uint64_t)a->pad << 48);
}
static inline void ag__conv_unpack(const int64_t i[2], int64_t x_rows, int64_t K, ag__conv2d_args *a) {
  const uint64_t g0 = (uint64_t)i[0], g1 = (uint64_t)i[1];
  a->H = (int64_t)(g0 >> 32), a->W = (int64_t)(g0 & 0xffffffffu);
  a->kh = (int64_t)(g1 & 0xffff), a->kw = (int64_t)(g1 >> 16 & 0xffff);
  a->stride = (int64_t)(g1 >> 32 & 0xffff), a->pad = (int64_t)(g1 >> 48);
  a->C = x_rows / (a->H * a->W), a->K = K;
}

/* ---- the graph layer's state of a context (ctx->graph) ---- */

struct ag__graph_ctx {
  ag_tensor *one; /* 1 x 1 f32 holding 1: the seed of every backward */
};
/* The context's seed of backward passes, made (with ctx->graph) at the
 * first call: before a context's first backward or recording. */
ag_status ag__graph_one(ag_ctx *ctx, ag_tensor **one);
/* Frees ctx->graph (with the context, or after a failed first call). */
void ag__graph_drop(ag_ctx *ctx);
/* Makes the core call the graph layer's hooks on ctx (capture.c). */
void ag__graph_hook(ag_ctx *ctx);

/* ---- recordings (capture.c) ---- */

/* Makes recording c ready to replay (checks it, records it again if what
 * it reads moved), without running it; ag__capture_run then runs it and
 * can fail only on a device error. fn names the caller in messages. */
ag_status ag__capture_prepare(struct ag_capture *c, const char *fn);
ag_status ag__capture_run(struct ag_capture *c);
/* Whether c holds a recording that ag__capture_run may run. */
int ag__capture_ready(const struct ag_capture *c);

/* The seed of an RNG stream and the device address of its counter (u64). */
struct ag_rng;
uint64_t ag__rng_seed(const struct ag_rng *r);
ag_status ag__rng_counter(struct ag_rng *r, void **ptr);
/* The 1 x 1 i64 tensor that holds the stream's counter. */
ag_tensor *ag__rng_counter_tensor(const struct ag_rng *r);

/* Inside a recording of several steps: the next temporaries reuse the
 * recording's workspace from its start (the last step's temporaries are
 * dead once its kernels have run, which stream order guarantees). */
void ag__capture_rewind(ag_ctx *ctx);

#endif /* AGRL_GRAPH_GRAPH_INTERNAL_H */
