/* version.c — the version string, with the backends this build has. */
#include "agrl/agrl.h"

#if defined(AGRL_WITH_CUDA) && defined(AGRL_WITH_VULKAN)
#define AGRL_BACKENDS " (cpu+cuda+vulkan)"
#elif defined(AGRL_WITH_CUDA)
#define AGRL_BACKENDS " (cpu+cuda)"
#elif defined(AGRL_WITH_VULKAN)
#define AGRL_BACKENDS " (cpu+vulkan)"
#else
#define AGRL_BACKENDS " (cpu)"
#endif

const char *ag_version(void) { return AGRL_VERSION AGRL_BACKENDS; }
