/* agrl/nn.h — layers, MLPs, optimizers, target networks.
 *
 * Parameters are persistent tensors that require gradients: they survive
 * ag_ctx_reset() and move with the context on a device switch, like
 * buffers (S17, S18). Initialisation is seeded and draws the same numbers on
 * every device. Free modules and optimizers before their context.
 */
#ifndef AGRL_NN_H
#define AGRL_NN_H

#include <stdint.h>

#include "agrl/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ag_act {
  AG_ACT_NONE = 0,
  AG_ACT_RELU = 1,
  AG_ACT_TANH = 2,
  AG_ACT_SIGMOID = 3
} ag_act;

/* Applies an activation (AG_ACT_NONE returns x itself). */
ag_status ag_activate(ag_tensor *x, ag_act act, ag_tensor **out);

/* ---- MLP: Linear layers W [out, in], b [out, 1], y = act(W x + b) ----
 * sizes = {in, h1, ..., out} (n_sizes >= 2). Hidden layers use `hidden`,
 * the last layer `last`. Weights and biases are uniform in
 * [-1/sqrt(in), 1/sqrt(in)] (PyTorch's nn.Linear default), drawn from a
 * Philox stream of `seed`. */
typedef struct ag_mlp ag_mlp;

ag_status ag_mlp_create(ag_ctx *ctx, const int64_t *sizes, int n_sizes, ag_act hidden, ag_act last,
                        uint64_t seed, ag_mlp **out);
void ag_mlp_free(ag_mlp *m);
/* y [out, n] = mlp(x [in, n]). x may be a row view (e.g. the obs rows of a
 * gathered batch). */
ag_status ag_mlp_forward(ag_mlp *m, ag_tensor *x, ag_tensor **out);
int ag_mlp_n_params(const ag_mlp *m);
/* Parameters in order W0, b0, W1, b1, ... (owned by the MLP). */
ag_tensor *const *ag_mlp_params(const ag_mlp *m);
int64_t ag_mlp_in(const ag_mlp *m);
int64_t ag_mlp_out(const ag_mlp *m);

/* Target networks: dst = src (hard copy), or dst = tau * src + (1 - tau) * dst
 * (Polyak averaging). The MLPs must have the same sizes. Queued. */
ag_status ag_mlp_copy(ag_mlp *dst, const ag_mlp *src);
ag_status ag_mlp_polyak(ag_mlp *dst, const ag_mlp *src, float tau);

/* Saves sizes, activations and parameter values to a file ("AGRLMLP1"
 * header, little-endian); load creates an MLP on ctx from such a file. */
ag_status ag_mlp_save(const ag_mlp *m, const char *path);
ag_status ag_mlp_load(ag_ctx *ctx, const char *path, ag_mlp **out);

/* ---- optimizers over a list of parameters ---- */

typedef struct ag_optim ag_optim;

typedef struct ag_adam_config {
  float lr;            /* 1e-3 */
  float beta1, beta2;  /* 0.9, 0.999 */
  float eps;           /* 1e-8 */
  float weight_decay;  /* 0: L2 penalty added to the gradient, as torch.optim.Adam */
  float max_grad_norm; /* 0: no clipping; else the global norm is clipped first */
} ag_adam_config;

ag_adam_config ag_adam_defaults(void);

/* Adam with bias correction (Kingma & Ba), in the form of torch.optim.Adam.
 * Moments and the step count live on the device; a step is three kernels at
 * most (norm, prepare, update), whatever the number of parameters. */
ag_status ag_adam_create(ag_ctx *ctx, ag_tensor *const *params, int n, const ag_adam_config *cfg,
                         ag_optim **out);
/* Plain SGD: p -= lr * clip(g); max_grad_norm 0 disables clipping. */
ag_status ag_sgd_create(ag_ctx *ctx, ag_tensor *const *params, int n, float lr, float max_grad_norm,
                        ag_optim **out);
/* One update from the parameters' gradients (queued; recordable). */
ag_status ag_optim_step(ag_optim *o);
/* Zeroes the gradients of the optimizer's parameters (queued; recordable). */
ag_status ag_optim_zero_grad(ag_optim *o);
/* Steps taken (read from the device: waits for the queue). */
ag_status ag_optim_steps(ag_optim *o, int64_t *steps);
void ag_optim_free(ag_optim *o);

#ifdef __cplusplus
}
#endif
#endif /* AGRL_NN_H */
