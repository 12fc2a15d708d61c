/* vk_push.h — the push constants of the Vulkan kernels as C structs.
 *
 * ag__vk_pc_NAME is the struct of push.glsl's AGPC_NAME list, the list the
 * shader's block expands: the kernel files fill these structs (in the
 * list's order) and ag__vk_dispatch checks that their size is the size of
 * the pipeline's layout (ag__vk_push). */
#ifndef AGRL_VULKAN_VK_PUSH_H
#define AGRL_VULKAN_VK_PUSH_H

#include <stddef.h>
#include <stdint.h>

#include "vulkan/shaders/push.glsl"
#include "vulkan/vk_pipes.h"

_Static_assert(sizeof(int) == 4, "push.glsl's int is 32 bits, as GLSL's");

typedef struct ag__vk_pc_copy {
  AGPC_COPY(AGPC_FIELD)
} ag__vk_pc_copy;
typedef struct ag__vk_pc_fill {
  AGPC_FILL(AGPC_FIELD)
} ag__vk_pc_fill;
typedef struct ag__vk_pc_frames_stack {
  AGPC_FRAMES_STACK(AGPC_FIELD)
} ag__vk_pc_frames_stack;
typedef struct ag__vk_pc_gather {
  AGPC_GATHER(AGPC_FIELD)
} ag__vk_pc_gather;
typedef struct ag__vk_pc_linalg_conv2d {
  AGPC_LINALG_CONV2D(AGPC_FIELD)
} ag__vk_pc_linalg_conv2d;
typedef struct ag__vk_pc_linalg_gemm {
  AGPC_LINALG_GEMM(AGPC_FIELD)
} ag__vk_pc_linalg_gemm;
typedef struct ag__vk_pc_linalg_loss {
  AGPC_LINALG_LOSS(AGPC_FIELD)
} ag__vk_pc_linalg_loss;
typedef struct ag__vk_pc_linalg_pick {
  AGPC_LINALG_PICK(AGPC_FIELD)
} ag__vk_pc_linalg_pick;
typedef struct ag__vk_pc_linalg_pick_bwd {
  AGPC_LINALG_PICK_BWD(AGPC_FIELD)
} ag__vk_pc_linalg_pick_bwd;
typedef struct ag__vk_pc_linalg_reduce {
  AGPC_LINALG_REDUCE(AGPC_FIELD)
} ag__vk_pc_linalg_reduce;
typedef struct ag__vk_pc_linalg_td {
  AGPC_LINALG_TD(AGPC_FIELD)
} ag__vk_pc_linalg_td;
typedef struct ag__vk_pc_map {
  AGPC_MAP(AGPC_FIELD)
} ag__vk_pc_map;
typedef struct ag__vk_pc_map2 {
  AGPC_MAP2(AGPC_FIELD)
} ag__vk_pc_map2;
typedef struct ag__vk_pc_optim_adam {
  AGPC_OPTIM_ADAM(AGPC_FIELD)
} ag__vk_pc_optim_adam;
typedef struct ag__vk_pc_optim_axpby {
  AGPC_OPTIM_AXPBY(AGPC_FIELD)
} ag__vk_pc_optim_axpby;
typedef struct ag__vk_pc_optim_convert {
  AGPC_OPTIM_CONVERT(AGPC_FIELD)
} ag__vk_pc_optim_convert;
typedef struct ag__vk_pc_optim_prep {
  AGPC_OPTIM_PREP(AGPC_FIELD)
} ag__vk_pc_optim_prep;
typedef struct ag__vk_pc_optim_set_i64 {
  AGPC_OPTIM_SET_I64(AGPC_FIELD)
} ag__vk_pc_optim_set_i64;
typedef struct ag__vk_pc_optim_sumsq {
  AGPC_OPTIM_SUMSQ(AGPC_FIELD)
} ag__vk_pc_optim_sumsq;
typedef struct ag__vk_pc_random_advance {
  AGPC_RANDOM_ADVANCE(AGPC_FIELD)
} ag__vk_pc_random_advance;
typedef struct ag__vk_pc_random_nstep {
  AGPC_RANDOM_NSTEP(AGPC_FIELD)
} ag__vk_pc_random_nstep;
typedef struct ag__vk_pc_random_per_fill {
  AGPC_RANDOM_PER_FILL(AGPC_FIELD)
} ag__vk_pc_random_per_fill;
typedef struct ag__vk_pc_random_per_sample {
  AGPC_RANDOM_PER_SAMPLE(AGPC_FIELD)
} ag__vk_pc_random_per_sample;
typedef struct ag__vk_pc_random_per_set {
  AGPC_RANDOM_PER_SET(AGPC_FIELD)
} ag__vk_pc_random_per_set;
typedef struct ag__vk_pc_random_randint {
  AGPC_RANDOM_RANDINT(AGPC_FIELD)
} ag__vk_pc_random_randint;
typedef struct ag__vk_pc_random_randn {
  AGPC_RANDOM_RANDN(AGPC_FIELD)
} ag__vk_pc_random_randn;
typedef struct ag__vk_pc_zero {
  AGPC_ZERO(AGPC_FIELD)
} ag__vk_pc_zero;

/* A pipeline's push-constant layout, as C lays it out: each member's offset
 * and size, in the list's order, and the struct's size. */
typedef struct ag__vk_push_layout {
  const char *name; /* push.glsl's AGPC_NAME, in lower case */
  int n;
  const uint16_t *offset, *size;
  size_t bytes;
} ag__vk_push_layout;

/* Each pipeline's (vk_push.c). */
extern const ag__vk_push_layout ag__vk_push[AG__VK_N_PIPES];

#endif /* AGRL_VULKAN_VK_PUSH_H */
