/* k_random.c — the Vulkan kernels RANDINT, RANDN, NSTEP and the prioritized-replay tree (PER_SET, PER_FILL,
 * PER_SAMPLE). */
#include "base/base.h"
#include "vulkan/vk_internal.h"

/* none yet: each reports unsupported */
const ag__vk_kernel ag__vk_k_random[] = {{AG__K_COUNT, NULL, NULL, NULL}};
const int ag__vk_n_random = 0;
