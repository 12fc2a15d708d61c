/* nn_internal.h — what the nn layer shares with the layers above it: the
 * optimizer's internals and the fused Q-learning update, the one op in
 * front of AG__K_QGRAD. */
#ifndef AGRL_NN_NN_INTERNAL_H
#define AGRL_NN_NN_INTERNAL_H

#include "agrl/nn.h"
#include "graph/graph_internal.h"

/* An Adam optimizer whose whole step is one AG__K_ADAM launch with its
 * preparation and no gradient norm (no clipping): a kernel that makes the
 * gradients can apply the step itself (AG__K_QGRAD's opt). */
struct ag_optim;
int ag__optim_fusable(const struct ag_optim *o);
/* That launch's arguments (prep = 1). */
ag_status ag__optim_step_args(struct ag_optim *o, ag__adam_args *a);
/* The tensors a step changes besides the parameters (moments, step count):
 * writes up to max of them into out and returns how many there are. */
int ag__optim_state(const struct ag_optim *o, ag_tensor **out, int max);

/* ---- the batch of a fused update (qlearn.c) ----
 * table  f32 buffer [rows, capacity] holding the transitions column by
 *        column, the fields at rows obs_row, act_row, rew_row, next_row,
 *        done_row (terminated 0 / 1)
 * size   [1, 1] i64 on the device: the valid columns, the draws' bound
 * rng    the stream the B indices are drawn from (as ag_randint_dev)
 * idx    NULL (the B indices drawn in the call), or the B columns as an
 *        i32 [1, B] or [B, 1] tensor on the device (clamped to the table;
 *        rng is then not drawn from)
 * ret, disc, last  NULL, or (all three, with idx) the n-step walks of those
 *        columns as ag_replay_nstep makes them: f32, f32 and i64, [1, B] or
 *        [B, 1] */
typedef struct ag__fused_batch {
  ag_buffer *table;
  ag_tensor *size;
  struct ag_rng *rng;
  int64_t B;
  int64_t obs_row, act_row, rew_row, next_row, done_row;
  ag_tensor *idx;               /* NULL: drawn */
  ag_tensor *ret, *disc, *last; /* NULL: the one-step target */
} ag__fused_batch;

/* Its device addresses and rows, as the fused kernels' arguments hold them
 * (checked: an f32 table not freed, B >= 1, the n-step arrays all three
 * with idx, shapes and residency); fails without changing anything. */
ag_status ag__fused_batch_ptrs(const ag__fused_batch *b, const char *fn, ag__batch_src *p);

/* The device address of t, a [1, B] or [B, 1] tensor of dtype on ctx whose
 * B values lie one after another (what a fused kernel reads as an array);
 * what names it in the message. */
ag_status ag__vec_ptr(ag_ctx *ctx, ag_tensor *t, int64_t B, ag_dtype dtype, const char *fn, const char *what,
                      const void **out);

/* ---- the fused Q-learning update (qlearn.c) ----
 * The DQN loss of B transitions drawn on the device from a replay table's
 * buffer, and its gradient, in one kernel call (AG__K_QGRAD, kernels.h):
 *   src    the batch (ag__fused_batch); act_row holds the action taken
 *   q, target  MLPs of the same sizes {in, h1, ..., actions}, ReLU hidden
 *          layers and a linear output layer
 *   y_j = r_j + gamma (1 - d_j) max_a target(s'_j)[a]   (double_dqn: target
 *          at the argmax of q(s'_j)), loss = mean_j f(q(s_j)[a_j] - y_j),
 *          f Huber (of delta) or, huber = 0, the square; with the n-step
 *          walks y_j = ret_j + disc_j max_a target(s'_j)[a] (double DQN
 *          alike) with s'_j the next_obs of column last_j, and gamma and
 *          done_row are not used
 * The gradients of q's parameters are written (not added to); with opt,
 * the optimizer's step follows in the same call. *loss is a [1, 1] f32
 * temporary. Recordable. */
typedef struct ag__qlearn {
  ag__fused_batch src;
  ag_mlp *q, *target;
  float gamma;
  int double_dqn, huber;
  float delta;
  struct ag_optim *opt; /* NULL: the gradients only; else ag__optim_fusable(opt) */
} ag__qlearn;

/* Whether the update can be one fused call on the table's context now: the
 * networks' shapes and activations, an f32 table, and a backend that takes
 * AG__K_QGRAD with these arguments (supports). When not, the caller
 * composes the same update from ops (sample, forward, target, loss,
 * backward). */
int ag__qlearn_fusable(const ag__qlearn *u);
/* Queues the call (fails with AG_ERR_UNSUPPORTED when not fusable). */
ag_status ag__qlearn_step(const ag__qlearn *u, ag_tensor **loss);

/* ---- the fused SAC/TD3 update (acstep.c) ----
 * One update of agent/ac.c's SAC or TD3 agent in one kernel call
 * (AG__K_ACGRAD, kernels.h, which gives the losses, targets and steps):
 *   src    the batch (ag__fused_batch); the action's A rows follow the
 *          observation's (act_row = obs_row + S)
 *   pi     the actor S -> hidden -> 2A (SAC) or A (TD3); pi_t TD3's target
 *   q, qt  the critics and their targets S + A -> hidden -> 1, the same
 *          hidden sizes; ReLU hidden layers, linear outputs everywhere
 *   opt_critic  over q[0]'s then q[1]'s layers; opt_actor over pi's (with
 *          actor); opt_alpha over log_alpha (SAC, actor, autotune); each
 *          ag__optim_fusable
 *   actor  0: the critics' step only; targets: the critics' Polyak step
 * The gradients are written (not added to). *closs and *aloss (with actor)
 * are [1, 1] f32 temporaries. Recordable. */
typedef struct ag__acstep {
  ag__fused_batch src;
  int64_t A;
  int td3, actor, targets, autotune;
  ag_mlp *pi, *pi_t, *q[2], *qt[2];
  struct ag_optim *opt_critic, *opt_actor, *opt_alpha;
  ag_tensor *log_alpha;
  float gamma, tau, target_entropy, target_noise, noise_clip;
} ag__acstep;

/* Whether the update can be one fused call on the table's context now. */
int ag__acstep_fusable(const ag__acstep *u);
/* Queues the call (AG_ERR_UNSUPPORTED when not fusable). */
ag_status ag__acstep_run(const ag__acstep *u, ag_tensor **closs, ag_tensor **aloss);

/* The shapes of the convolutions of a network over in_shape, checked as
 * ag_mlp_create_conv checks them (its errors, named for fn): shape[i] the
 * input {C, H, W} of layer i, shape[n_conv] the last one's output. */
ag_status ag__conv_shapes(const int64_t in_shape[3], const ag_conv_layer *conv, int n_conv,
                          int64_t (*shape)[3], const char *fn);
/* The [rows, cols] of each parameter of a network (ag_mlp_params' order)
 * of n_conv convolutions of shapes `shape` and linear layers of sizes;
 * writes the first max and returns how many there are. */
int ag__net_dims(const ag_conv_layer *conv, const int64_t (*shape)[3], int n_conv, const int64_t *sizes,
                 int n_sizes, int64_t (*dims)[2], int max);
/* An MLP's activations (hidden layers, last layer). */
void ag__mlp_acts(const ag_mlp *m, ag_act *hidden, ag_act *last);

#endif /* AGRL_NN_NN_INTERNAL_H */
