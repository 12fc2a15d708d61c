/* vk_internal.h — what the Vulkan backend's files share. */
#ifndef AGRL_VULKAN_VK_INTERNAL_H
#define AGRL_VULKAN_VK_INTERNAL_H

#include <stddef.h>

/* A compute shader's SPIR-V, embedded at build time (cmake/embed_spirv.cmake
 * from src/vulkan/shaders/NAME.comp). */
typedef struct ag__vk_shader {
  const char *name;
  const unsigned char *spv;
  size_t bytes;
} ag__vk_shader;
extern const ag__vk_shader ag__vk_shaders[];
extern const int ag__vk_n_shaders;

#endif /* AGRL_VULKAN_VK_INTERNAL_H */
