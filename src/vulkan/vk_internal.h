/* vk_internal.h — what the Vulkan backend's files share.
 *
 * backend.c owns the device, memory, transfers and the queue; the kernel
 * files (k_*.c) each provide a table of kernels that encode their
 * arguments as push constants (and, when they do not fit, an argument
 * block) and queue dispatches through ag__vk_dispatch. */
#ifndef AGRL_VULKAN_VK_INTERNAL_H
#define AGRL_VULKAN_VK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "agrl/status.h"
#include "base/kernels.h"

/* A compute shader's SPIR-V, embedded at build time (cmake/embed_spirv.cmake
 * from src/vulkan/shaders/NAME.comp). */
typedef struct ag__vk_shader {
  const char *name;
  const unsigned char *spv;
  size_t bytes;
} ag__vk_shader;
extern const ag__vk_shader ag__vk_shaders[];
extern const int ag__vk_n_shaders;

typedef struct vk_state vk_state;

/* The push constants every pipeline takes (the least every device has). */
#define AG__VK_PUSH_BYTES 128

/* The pipeline of shader `name` (its file name without .comp; a string
 * literal), made at its first use; -1 when no such shader was built or it
 * cannot be made on this device. */
int ag__vk_pipe(vk_state *s, const char *name);

/* Queues (or, while recording, records) a dispatch of pipeline pipe over
 * gx * gy * gz work groups with `bytes` (at most AG__VK_PUSH_BYTES) of push
 * constants. Every dispatch comes after a barrier: it sees all the
 * transfers and dispatches queued before it, in full. */
ag_status ag__vk_dispatch(vk_state *s, int pipe, const void *push, size_t bytes, uint32_t gx, uint32_t gy,
                          uint32_t gz);

/* Work groups of `local` invocations to cover `items` (at least 1, at most
 * 65535: the shaders stride over the rest). */
uint32_t ag__vk_groups(int64_t items, int local);

/* Device-readable memory holding a copy of `bytes` of data (an argument
 * block too large for push constants), at 16-byte aligned *addr, kept
 * until the dispatches queued after it have run (while recording: for the
 * recording's life). */
ag_status ag__vk_args(vk_state *s, const void *data, size_t bytes, uint64_t *addr);

/* Whether the device runs shaders with 64-bit floats (shaderFloat64). */
int ag__vk_has_f64(const vk_state *s);

/* *counter += n on the device, by one invocation queued after the dispatches before it (a drawing
 * kernel of many work groups, all of which read the counter first). */
ag_status ag__vk_advance(vk_state *s, uint64_t *counter, int64_t n);

/* A kernel of base/kernels.h. supports NULL: it takes every argument the
 * header allows; scratch NULL: it needs none (bytes of device scratch, as
 * the backend vtable's scratch query). */
typedef struct ag__vk_kernel {
  ag__kernel_id id;
  ag_status (*run)(vk_state *s, const void *args);
  int (*supports)(const vk_state *s, const void *args);
  size_t (*scratch)(const void *args);
} ag__vk_kernel;

/* The kernel files' tables. */
extern const ag__vk_kernel ag__vk_k_elementwise[], ag__vk_k_linalg[], ag__vk_k_optim[], ag__vk_k_random[],
    ag__vk_k_frames[];
extern const int ag__vk_n_elementwise, ag__vk_n_linalg, ag__vk_n_optim, ag__vk_n_random, ag__vk_n_frames;

/* ---- the free ranges of a block of device memory (vk_ranges.c) ----
 * Ranges of [start, start + size) handed out first-fit and given back in
 * any order; free neighbours merge, so once every range is back the block
 * is one free range again. */
typedef struct ag__vk_range {
  uint64_t off, len;
} ag__vk_range;
typedef struct ag__vk_ranges {
  ag__vk_range *at; /* the free ranges, by offset, disjoint and not touching */
  size_t n, cap;
  size_t taken;  /* ranges handed out and not given back */
  uint64_t used; /* their bytes */
  uint64_t start, size;
} ag__vk_ranges;

/* One free range of size bytes from start (none when size is 0). */
ag_status ag__vk_ranges_init(ag__vk_ranges *r, uint64_t start, uint64_t size);
void ag__vk_ranges_free(ag__vk_ranges *r);
/* *off: the start, a multiple of align (a power of 2), of bytes (> 0) no
 * range handed out overlaps, now taken. AG_ERR_OUT_OF_RANGE, with no
 * message, when no free range holds them; AG_ERR_OUT_OF_MEMORY when the
 * host is out of memory; AG_ERR_INVALID_ARG for 0 bytes or an align that is
 * not a power of 2. A refusal changes nothing. */
ag_status ag__vk_ranges_take(ag__vk_ranges *r, uint64_t bytes, uint64_t align, uint64_t *off);
/* Gives back [off, off + bytes), a range take handed out; never fails. */
void ag__vk_ranges_give(ag__vk_ranges *r, uint64_t off, uint64_t bytes);

/* The address of a device pointer, as the shaders take it. */
static inline uint64_t ag__vk_addr(const void *p) { return (uint64_t)(uintptr_t)p; }

#endif /* AGRL_VULKAN_VK_INTERNAL_H */
