/* no_vulkan.c — linked instead of the Vulkan backend when Vulkan is not built. */
#include "base/backend.h"

const ag__backend *ag__vulkan_backend(void) { return NULL; }
int ag__vulkan_device_count(void) { return 0; }
uint32_t ag__vulkan_memory_objects(void *st, uint32_t limit) {
  (void)st, (void)limit;
  return 0;
}
int ag__vulkan_validation_total(int *states, char *last, size_t last_len) {
  *states = 0;
  if (last && last_len) last[0] = 0;
  return 0;
}
uint64_t ag__vulkan_encodes(const void *state) {
  (void)state;
  return 0;
}
