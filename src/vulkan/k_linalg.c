/* k_linalg.c — the Vulkan kernels GEMM, REDUCE, PICK, PICK_BWD, TD_TARGET and LOSS. */
#include "base/base.h"
#include "vulkan/vk_internal.h"

/* none yet: each reports unsupported */
const ag__vk_kernel ag__vk_k_linalg[] = {{AG__K_COUNT, NULL, NULL, NULL}};
const int ag__vk_n_linalg = 0;
