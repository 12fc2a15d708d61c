/* k_optim.c — the Vulkan kernels ADAM_PREP, ADAM, SUMSQ, AXPBY, CONVERT and SET_I64. */
#include "base/base.h"
#include "vulkan/vk_internal.h"

/* none yet: each reports unsupported */
const ag__vk_kernel ag__vk_k_optim[] = {{AG__K_COUNT, NULL, NULL, NULL}};
const int ag__vk_n_optim = 0;
