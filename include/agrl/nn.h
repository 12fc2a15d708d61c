/* agrl/nn.h — layers, MLPs, optimizers, target networks.
 *
 * Parameters are persistent tensors that require gradients: they survive
 * ag_ctx_reset() and move with the context on a device switch, like
 * buffers (S17, S18). Initialisation is seeded and draws the same numbers on
 * every device. Free modules and optimizers before their context, and an
 * optimizer before the parameters it steps (it keeps their handles).
 *
 * Errors common to the calls below: AG_ERR_STATE for a call that allocates
 * persistent memory or moves host data while a step is being recorded;
 * AG_ERR_OUT_OF_MEMORY and AG_ERR_DEVICE from the device, also when a
 * parameter left on the host by a device switch is uploaded at its use.
 */
#ifndef AGRL_NN_H
#define AGRL_NN_H

#include <stdint.h>

#include "agrl/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ag_act { AG_ACT_NONE = 0, AG_ACT_RELU = 1, AG_ACT_TANH = 2, AG_ACT_SIGMOID = 3 } ag_act;

/* Applies an activation (AG_ACT_NONE returns x itself, no copy).
 * Errors: AG_ERR_INVALID_ARG: an unknown act, x or out NULL; those of
 * ag_relu, ag_tanh and ag_sigmoid. */
AG_API ag_status ag_activate(ag_tensor *x, ag_act act, ag_tensor **out);

/* ---- MLP: Linear layers W [out, in], b [out, 1], y = act(W x + b) ----
 * sizes = {in, h1, ..., out} (n_sizes >= 2). Hidden layers use `hidden`,
 * the last layer `last`. Weights and biases are uniform in
 * [-1/sqrt(in), 1/sqrt(in)] (PyTorch's nn.Linear default), drawn from a
 * Philox stream of `seed`. */
typedef struct ag_mlp ag_mlp;

/* sizes: n_sizes values (copied). The MLP owns its parameters; free it with
 * ag_mlp_free. Errors: AG_ERR_INVALID_ARG: ctx, sizes or out NULL,
 * n_sizes < 2, a size outside 1..2^31-1, an unknown activation. */
AG_API ag_status ag_mlp_create(ag_ctx *ctx, const int64_t *sizes, int n_sizes, ag_act hidden, ag_act last,
                               uint64_t seed, ag_mlp **out);
/* NULL is accepted. */
AG_API void ag_mlp_free(ag_mlp *m);
/* y [out, n] = mlp(x [in, n]), f32 temporaries. x may be a row view (e.g.
 * the obs rows of a gathered batch). Errors: AG_ERR_INVALID_ARG: m, x or
 * out NULL, x of another context; AG_ERR_FREED: x released by
 * ag_ctx_reset; AG_ERR_SHAPE: x not f32 or without `in` rows;
 * AG_ERR_UNSUPPORTED: n beyond 2^31. On error the layers already computed
 * stay queued into temporaries; nothing else changes. */
AG_API ag_status ag_mlp_forward(ag_mlp *m, ag_tensor *x, ag_tensor **out);
AG_API int ag_mlp_n_params(const ag_mlp *m);
/* Parameters in order W0, b0, W1, b1, ... (owned by the MLP). */
AG_API ag_tensor *const *ag_mlp_params(const ag_mlp *m);
AG_API int64_t ag_mlp_in(const ag_mlp *m);
AG_API int64_t ag_mlp_out(const ag_mlp *m);

/* ---- convolutional networks: conv layers in front of an MLP ----
 * A network over image observations: x [C*H*W, n] (one column a sample,
 * channels first, each channel row by row: the bytes of a [n, C, H, W]
 * array in C order, as ag_conv2d takes it) goes through n_conv
 * convolutions, each followed by the `hidden` activation, and the last
 * one's output (flat already, [K*Ho*Wo, n]) through the linear layers of
 * sizes {K*Ho*Wo, fc[0], ..., fc[n_fc-1]} as an MLP's (hidden activations,
 * then `last`). Convolution i has conv[i].channels filters of
 * kernel x kernel taps, stride and zero padding pad on both axes (the
 * geometry and arithmetic of ag_conv2d); its weight is [C_i*k*k, K_i] (the
 * bytes of PyTorch's Conv2d weight [K_i, C_i, k, k]) and its bias [K_i, 1],
 * both uniform in [-1/sqrt(C_i*k*k), 1/sqrt(C_i*k*k)] (PyTorch's Conv2d
 * default), drawn from the same Philox stream of `seed` as the linear
 * layers, before them. The result is an ag_mlp: every ag_mlp_* call takes
 * it, ag_mlp_in is C*H*W, and ag_mlp_params lists the convolutions'
 * parameters (w0, b0, w1, b1, ...) before the linear layers'.
 * E.g. the Nature DQN: in_shape {4, 84, 84}, conv {{32, 8, 4, 0}, {64, 4,
 * 2, 0}, {64, 3, 1, 0}}, fc {512, n_actions}. */
#define AG_MAX_CONV 8

typedef struct ag_conv_layer {
  int64_t channels; /* K: filters, 1..2^31-1 */
  int64_t kernel;   /* k x k taps, 1..65535 */
  int64_t stride;   /* 1..65535 */
  int64_t pad;      /* zeros on each side, 0..65535 */
} ag_conv_layer;

/* in_shape {C, H, W}; conv: n_conv layers (copied); fc: n_fc sizes (copied).
 * Errors: AG_ERR_INVALID_ARG: ctx, in_shape, conv, fc or out NULL; n_conv
 * outside 1..AG_MAX_CONV; n_fc < 1 or n_fc + 1 > 64; C, H, W or an fc size
 * outside 1..2^31-1; a layer's channels, kernel, stride or pad outside its
 * range above; a kernel larger than the padded image it meets (the message
 * names the layer and the image); an unknown activation;
 * AG_ERR_UNSUPPORTED: a layer's image or im2col matrix beyond ag_conv2d's
 * limits (2^31 - 1 values). Nothing is allocated before the checks. */
AG_API ag_status ag_mlp_create_conv(ag_ctx *ctx, const int64_t in_shape[3], const ag_conv_layer *conv,
                                    int n_conv, const int64_t *fc, int n_fc, ag_act hidden, ag_act last,
                                    uint64_t seed, ag_mlp **out);
/* The network's convolutions: their count (0 for an MLP or m NULL), and
 * layer i's description (i in 0 .. n_conv-1; returns 0, or -1 leaving *out
 * untouched for m NULL or i out of range) and its input shape {C, H, W}
 * (in_shape of layer 0 is the network's). */
AG_API int ag_mlp_n_conv(const ag_mlp *m);
AG_API int ag_mlp_conv(const ag_mlp *m, int i, ag_conv_layer *out, int64_t in_shape[3]);

/* Target networks: dst = src (hard copy), or dst = tau * src + (1 - tau) * dst
 * (Polyak averaging). The networks must have the same sizes (and the same
 * convolutions over the same input shape). Queued; recordable.
 * Errors: AG_ERR_INVALID_ARG: dst or src NULL, MLPs of different contexts,
 * tau outside [0, 1]; AG_ERR_SHAPE: different sizes or convolutions. */
AG_API ag_status ag_mlp_copy(ag_mlp *dst, const ag_mlp *src);
AG_API ag_status ag_mlp_polyak(ag_mlp *dst, const ag_mlp *src, float tau);

/* ---- model files ----
 * ag_mlp_save writes sizes, activations and parameter values to `path` in
 * the format below. The file is written beside `path` under a
 * temporary name, flushed to disk and renamed over `path`: on any failure
 * (a full disk, a failed download, no memory) `path` keeps its old bytes
 * and the temporary is removed. Errors: AG_ERR_INVALID_ARG (m or path
 * NULL, path empty), AG_ERR_IO (the directory cannot be written),
 * AG_ERR_UNSUPPORTED (more than 64 sizes), AG_ERR_STATE (a parameter holds
 * a NaN or an infinity, which load would refuse; or a step is being
 * recorded), AG_ERR_OUT_OF_MEMORY (host), the status of a failed download.
 *
 * The file is an agrl container (docs/container.md: a header of typed keys
 * and a table of named sections, each section in parts of at most 1 MB
 * each followed by its CRC-32, the header with its own CRC-32) of kind
 * "mlp": keys mlp.version = 3, mlp.sizes (i64 array {in, h1, ..., out},
 * 2..64 of them, each 1..2^31-1), mlp.hidden and mlp.last (ag_act: 0 none,
 * 1 relu, 2 tanh, 3 sigmoid); sections W0, b0, W1, b1, ..., in that order,
 * f32 tensors W_l [sizes[l+1], sizes[l]] (column-major: element (r, c) at
 * value c * sizes[l+1] + r) and b_l [sizes[l+1], 1]. A network with
 * convolutions (ag_mlp_create_conv) is mlp.version = 4, with two more keys,
 * mlp.in_shape (i64 array {C, H, W}) and mlp.conv (i64 array of 4 values a
 * layer, 1..AG_MAX_CONV layers: channels, kernel, stride, pad), and the
 * sections conv0.w [C_0*k*k, K_0], conv0.b [K_0, 1], conv1.w, ... before
 * W0; mlp.sizes[0] is then the last convolution's output K*Ho*Wo.
 * Files of agrl 0.1.0 ("AGRLMLP2", and the older "AGRLMLP1" without CRCs)
 * are still read.
 *
 * ag_mlp_load creates an MLP on ctx from such a file. It checks the whole
 * header before it allocates anything, so a file can make it allocate no
 * more than the values it holds (and as much again for their gradients); it
 * refuses, with AG_ERR_IO and a message saying that the file is truncated
 * or corrupt and what is wrong:
 *   - a file that is not an agrl container of kind "mlp" nor an old model
 *     file (a newer container or mlp.version: AG_ERR_UNSUPPORTED);
 *   - a header that breaks the container's rules (docs/container.md), fails
 *     its CRC-32, or whose sections do not end where the file ends
 *     ("truncated", "trailing bytes");
 *   - n_sizes outside 2..64, an activation code outside 0..3, a size outside
 *     1..2^31-1, sections that are not the parameters the sizes describe;
 *   - convolutions that ag_mlp_create_conv would refuse, or whose output is
 *     not mlp.sizes[0], or their keys in a file of version 3 or below;
 *   - a part (old files: a parameter) that fails its CRC-32;
 *   - a NaN or an infinity among the values.
 * Version-1 files get every check but the CRCs, which they do not have.
 * The values go to the device in parts of at most 1 MB through one host
 * buffer. On failure nothing stays allocated and *out is not written.
 * Other errors: AG_ERR_INVALID_ARG (ctx, path or out NULL), AG_ERR_IO (the
 * file cannot be opened or read, or is not a regular file), AG_ERR_STATE
 * (a step is being recorded), AG_ERR_OUT_OF_MEMORY when a valid model does
 * not fit on the device, AG_ERR_DEVICE. The caller owns the MLP. */
AG_API ag_status ag_mlp_save(const ag_mlp *m, const char *path);
AG_API ag_status ag_mlp_load(ag_ctx *ctx, const char *path, ag_mlp **out);

/* ---- optimizers over a list of parameters ---- */

typedef struct ag_optim ag_optim;

typedef struct ag_adam_config {
  float lr;            /* 1e-3 */
  float beta1, beta2;  /* 0.9, 0.999 */
  float eps;           /* 1e-8 */
  float weight_decay;  /* 0: L2 penalty added to the gradient, as torch.optim.Adam */
  float max_grad_norm; /* 0: no clipping; else the global norm is clipped first */
} ag_adam_config;

AG_API ag_adam_config ag_adam_defaults(void);

/* Adam with bias correction (Kingma & Ba), in the form of torch.optim.Adam.
 * Moments and the step count live on the device; a step is three kernels at
 * most (norm, prepare, update), whatever the number of parameters.
 * params: n persistent f32 tensors of ctx that require gradients (e.g.
 * ag_mlp_params); the array is copied, the tensors must outlive the
 * optimizer. Errors: AG_ERR_INVALID_ARG: ctx, params, cfg or out NULL,
 * n < 1, a parameter of another context or without a gradient, lr outside
 * (0, 1e6), beta1 or beta2 outside [0, 1), eps <= 0, weight_decay < 0,
 * max_grad_norm < 0; AG_ERR_FREED: a temporary released by ag_ctx_reset. */
AG_API ag_status ag_adam_create(ag_ctx *ctx, ag_tensor *const *params, int n, const ag_adam_config *cfg,
                                ag_optim **out);
/* Plain SGD: p -= lr * clip(g); max_grad_norm 0 disables clipping. params
 * and errors as for ag_adam_create (lr and max_grad_norm only). */
AG_API ag_status ag_sgd_create(ag_ctx *ctx, ag_tensor *const *params, int n, float lr, float max_grad_norm,
                               ag_optim **out);
/* One update from the parameters' gradients (queued; recordable).
 * Errors: AG_ERR_INVALID_ARG: o NULL. */
AG_API ag_status ag_optim_step(ag_optim *o);
/* Zeroes the gradients of the optimizer's parameters (queued; recordable).
 * Errors: AG_ERR_INVALID_ARG: o NULL. */
AG_API ag_status ag_optim_zero_grad(ag_optim *o);
/* Steps taken (read from the device: waits for the queue).
 * Errors: AG_ERR_INVALID_ARG: o or steps NULL; AG_ERR_STATE while a step is
 * being recorded; AG_ERR_DEVICE. */
AG_API ag_status ag_optim_steps(ag_optim *o, int64_t *steps);
AG_API void ag_optim_free(ag_optim *o); /* NULL is accepted */

#ifdef __cplusplus
}
#endif
#endif /* AGRL_NN_H */
