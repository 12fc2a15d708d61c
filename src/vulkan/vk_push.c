/* vk_push.c — each pipeline's push-constant layout (vk_push.h), from the
 * lists of push.glsl. */
#include "vulkan/vk_push.h"

#define AGPC_OFFSET(type, name) (uint16_t) offsetof(CUR, name),
#define AGPC_SIZE(type, name) (uint16_t)sizeof(((CUR *)0)->name),

#define CUR ag__vk_pc_copy
static const uint16_t off_copy[] = {AGPC_COPY(AGPC_OFFSET)}, size_copy[] = {AGPC_COPY(AGPC_SIZE)};
#undef CUR
#define CUR ag__vk_pc_fill
static const uint16_t off_fill[] = {AGPC_FILL(AGPC_OFFSET)}, size_fill[] = {AGPC_FILL(AGPC_SIZE)};
#undef CUR
#define CUR ag__vk_pc_frames_stack
static const uint16_t off_frames_stack[] = {AGPC_FRAMES_STACK(AGPC_OFFSET)},
                      size_frames_stack[] = {AGPC_FRAMES_STACK(AGPC_SIZE)};
#undef CUR
#define CUR ag__vk_pc_gather
static const uint16_t off_gather[] = {AGPC_GATHER(AGPC_OFFSET)}, size_gather[] = {AGPC_GATHER(AGPC_SIZE)};
#undef CUR
#define CUR ag__vk_pc_linalg_conv2d
static const uint16_t off_linalg_conv2d[] = {AGPC_LINALG_CONV2D(AGPC_OFFSET)},
                      size_linalg_conv2d[] = {AGPC_LINALG_CONV2D(AGPC_SIZE)};
#undef CUR
#define CUR ag__vk_pc_linalg_gemm
static const uint16_t off_linalg_gemm[] = {AGPC_LINALG_GEMM(AGPC_OFFSET)},
                      size_linalg_gemm[] = {AGPC_LINALG_GEMM(AGPC_SIZE)};
#undef CUR
#define CUR ag__vk_pc_linalg_loss
static const uint16_t off_linalg_loss[] = {AGPC_LINALG_LOSS(AGPC_OFFSET)},
                      size_linalg_loss[] = {AGPC_LINALG_LOSS(AGPC_SIZE)};
#undef CUR
#define CUR ag__vk_pc_linalg_pick
static const uint16_t off_linalg_pick[] = {AGPC_LINALG_PICK(AGPC_OFFSET)},
                      size_linalg_pick[] = {AGPC_LINALG_PICK(AGPC_SIZE)};
#undef CUR
#define CUR ag__vk_pc_linalg_pick_bwd
static const uint16_t off_linalg_pick_bwd[] = {AGPC_LINALG_PICK_BWD(AGPC_OFFSET)},
                      size_linalg_pick_bwd[] = {AGPC_LINALG_PICK_BWD(AGPC_SIZE)};
#undef CUR
#define CUR ag__vk_pc_linalg_reduce
static const uint16_t off_linalg_reduce[] = {AGPC_LINALG_REDUCE(AGPC_OFFSET)},
                      size_linalg_reduce[] = {AGPC_LINALG_REDUCE(AGPC_SIZE)};
#undef CUR
#define CUR ag__vk_pc_linalg_td
static const uint16_t off_linalg_td[] = {AGPC_LINALG_TD(AGPC_OFFSET)},
                      size_linalg_td[] = {AGPC_LINALG_TD(AGPC_SIZE)};
#undef CUR
#define CUR ag__vk_pc_map
static const uint16_t off_map[] = {AGPC_MAP(AGPC_OFFSET)}, size_map[] = {AGPC_MAP(AGPC_SIZE)};
#undef CUR
#define CUR ag__vk_pc_map2
static const uint16_t off_map2[] = {AGPC_MAP2(AGPC_OFFSET)}, size_map2[] = {AGPC_MAP2(AGPC_SIZE)};
#undef CUR
#define CUR ag__vk_pc_optim_adam
static const uint16_t off_optim_adam[] = {AGPC_OPTIM_ADAM(AGPC_OFFSET)},
                      size_optim_adam[] = {AGPC_OPTIM_ADAM(AGPC_SIZE)};
#undef CUR
#define CUR ag__vk_pc_optim_axpby
static const uint16_t off_optim_axpby[] = {AGPC_OPTIM_AXPBY(AGPC_OFFSET)},
                      size_optim_axpby[] = {AGPC_OPTIM_AXPBY(AGPC_SIZE)};
#undef CUR
#define CUR ag__vk_pc_optim_convert
static const uint16_t off_optim_convert[] = {AGPC_OPTIM_CONVERT(AGPC_OFFSET)},
                      size_optim_convert[] = {AGPC_OPTIM_CONVERT(AGPC_SIZE)};
#undef CUR
#define CUR ag__vk_pc_optim_prep
static const uint16_t off_optim_prep[] = {AGPC_OPTIM_PREP(AGPC_OFFSET)},
                      size_optim_prep[] = {AGPC_OPTIM_PREP(AGPC_SIZE)};
#undef CUR
#define CUR ag__vk_pc_optim_set_i64
static const uint16_t off_optim_set_i64[] = {AGPC_OPTIM_SET_I64(AGPC_OFFSET)},
                      size_optim_set_i64[] = {AGPC_OPTIM_SET_I64(AGPC_SIZE)};
#undef CUR
#define CUR ag__vk_pc_optim_sumsq
static const uint16_t off_optim_sumsq[] = {AGPC_OPTIM_SUMSQ(AGPC_OFFSET)},
                      size_optim_sumsq[] = {AGPC_OPTIM_SUMSQ(AGPC_SIZE)};
#undef CUR
#define CUR ag__vk_pc_random_advance
static const uint16_t off_random_advance[] = {AGPC_RANDOM_ADVANCE(AGPC_OFFSET)},
                      size_random_advance[] = {AGPC_RANDOM_ADVANCE(AGPC_SIZE)};
#undef CUR
#define CUR ag__vk_pc_random_nstep
static const uint16_t off_random_nstep[] = {AGPC_RANDOM_NSTEP(AGPC_OFFSET)},
                      size_random_nstep[] = {AGPC_RANDOM_NSTEP(AGPC_SIZE)};
#undef CUR
#define CUR ag__vk_pc_random_per_fill
static const uint16_t off_random_per_fill[] = {AGPC_RANDOM_PER_FILL(AGPC_OFFSET)},
                      size_random_per_fill[] = {AGPC_RANDOM_PER_FILL(AGPC_SIZE)};
#undef CUR
#define CUR ag__vk_pc_random_per_sample
static const uint16_t off_random_per_sample[] = {AGPC_RANDOM_PER_SAMPLE(AGPC_OFFSET)},
                      size_random_per_sample[] = {AGPC_RANDOM_PER_SAMPLE(AGPC_SIZE)};
#undef CUR
#define CUR ag__vk_pc_random_per_set
static const uint16_t off_random_per_set[] = {AGPC_RANDOM_PER_SET(AGPC_OFFSET)},
                      size_random_per_set[] = {AGPC_RANDOM_PER_SET(AGPC_SIZE)};
#undef CUR
#define CUR ag__vk_pc_random_randint
static const uint16_t off_random_randint[] = {AGPC_RANDOM_RANDINT(AGPC_OFFSET)},
                      size_random_randint[] = {AGPC_RANDOM_RANDINT(AGPC_SIZE)};
#undef CUR
#define CUR ag__vk_pc_random_randn
static const uint16_t off_random_randn[] = {AGPC_RANDOM_RANDN(AGPC_OFFSET)},
                      size_random_randn[] = {AGPC_RANDOM_RANDN(AGPC_SIZE)};
#undef CUR
#define CUR ag__vk_pc_zero
static const uint16_t off_zero[] = {AGPC_ZERO(AGPC_OFFSET)}, size_zero[] = {AGPC_ZERO(AGPC_SIZE)};
#undef CUR

#define LAYOUT(lower)                                                                     \
  {                                                                                       \
#lower, (int)(sizeof off_##lower / sizeof off_##lower[0]), off_##lower, size_##lower, \
        sizeof(ag__vk_pc_##lower)                                                         \
  }

const ag__vk_push_layout ag__vk_push[AG__VK_N_PIPES] = {
    [AG__VK_PIPE_COPY] = LAYOUT(copy),
    [AG__VK_PIPE_FILL] = LAYOUT(fill),
    [AG__VK_PIPE_FRAMES_STACK] = LAYOUT(frames_stack),
    [AG__VK_PIPE_GATHER] = LAYOUT(gather),
    [AG__VK_PIPE_LINALG_CONV2D] = LAYOUT(linalg_conv2d),
    [AG__VK_PIPE_LINALG_GEMM_16] = LAYOUT(linalg_gemm),
    [AG__VK_PIPE_LINALG_GEMM_32] = LAYOUT(linalg_gemm),
    [AG__VK_PIPE_LINALG_GEMM_64] = LAYOUT(linalg_gemm),
    [AG__VK_PIPE_LINALG_GEMM_M4] = LAYOUT(linalg_gemm),
    [AG__VK_PIPE_LINALG_GEMM_N4] = LAYOUT(linalg_gemm),
    [AG__VK_PIPE_LINALG_LOSS] = LAYOUT(linalg_loss),
    [AG__VK_PIPE_LINALG_PICK] = LAYOUT(linalg_pick),
    [AG__VK_PIPE_LINALG_PICK_BWD] = LAYOUT(linalg_pick_bwd),
    [AG__VK_PIPE_LINALG_REDUCE] = LAYOUT(linalg_reduce),
    [AG__VK_PIPE_LINALG_TD] = LAYOUT(linalg_td),
    [AG__VK_PIPE_MAP] = LAYOUT(map),
    [AG__VK_PIPE_MAP2] = LAYOUT(map2),
    [AG__VK_PIPE_OPTIM_ADAM] = LAYOUT(optim_adam),
    [AG__VK_PIPE_OPTIM_AXPBY] = LAYOUT(optim_axpby),
    [AG__VK_PIPE_OPTIM_CONVERT] = LAYOUT(optim_convert),
    [AG__VK_PIPE_OPTIM_PREP] = LAYOUT(optim_prep),
    [AG__VK_PIPE_OPTIM_SET_I64] = LAYOUT(optim_set_i64),
    [AG__VK_PIPE_OPTIM_SUMSQ] = LAYOUT(optim_sumsq),
    [AG__VK_PIPE_RANDOM_ADVANCE] = LAYOUT(random_advance),
    [AG__VK_PIPE_RANDOM_NSTEP] = LAYOUT(random_nstep),
    [AG__VK_PIPE_RANDOM_PER_FILL] = LAYOUT(random_per_fill),
    [AG__VK_PIPE_RANDOM_PER_SAMPLE] = LAYOUT(random_per_sample),
    [AG__VK_PIPE_RANDOM_PER_SET] = LAYOUT(random_per_set),
    [AG__VK_PIPE_RANDOM_RANDINT] = LAYOUT(random_randint),
    [AG__VK_PIPE_RANDOM_RANDN] = LAYOUT(random_randn),
    [AG__VK_PIPE_ZERO] = LAYOUT(zero),
};
