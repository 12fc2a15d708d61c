/* no_vulkan.c — linked instead of the Vulkan backend when Vulkan is not built. */
#include "base/backend.h"

const ag__backend *ag__vulkan_backend(void) { return NULL; }
int ag__vulkan_device_count(void) { return 0; }
