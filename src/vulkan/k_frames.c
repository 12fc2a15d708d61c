/* k_frames.c — the Vulkan kernel FRAME_STACK (shader frames_stack.comp): a frame table's stacked
 * observations, with the ring arithmetic of base/frames.h in GLSL (frames_ring.glsl), so that the
 * columns drawn and every byte and float of the stacks are the CPU's.
 *
 * Two dispatches: the columns (given ones clamped, or drawn: one work group that also moves the
 * counter on when B is small, else many groups and random_advance after them), then the stacks, a
 * work group per transition and half. Nothing of the ring or the counter is baked in: a recorded
 * call reads both on the device at each replay. */
#include "base/base.h"
#include "base/frames.h"
#include "vulkan/vk_internal.h"

#define LOCAL 256 /* the shader's local size */

/* Drawn columns of at most this many transitions are taken by one work group, which moves the
 * counter on itself. */
#ifndef FRAMES_ONE_GROUP
#define FRAMES_ONE_GROUP 256
#endif

/* The shader's pixel arithmetic takes h * w and c as 32-bit integers (a frame of at most 2^31 - 2
 * bytes, as ag_frames_create allows). */
static int frame_stack_ok(const vk_state *s, const void *args) {
  (void)s;
  const ag__frame_stack_args *a = args;
  if (a->h < 1 || a->w < 1 || a->c < 1 || a->h > INT32_MAX || a->w > INT32_MAX || a->c > INT32_MAX ||
      a->h * a->w > (INT32_MAX - 2) / a->c)
    return 0;
  return a->stack >= 1 && a->stack <= AG__FRAMES_MAX_STACK && a->capacity >= 1 && a->n_envs >= 1 &&
         a->n_envs <= a->capacity && (a->out_dtype == AG_U8 || a->out_dtype == AG_F32) &&
         (!a->idx || a->idx_dtype == AG_I32 || a->idx_dtype == AG_I64);
}

static ag_status run_frame_stack(vk_state *s, const void *args) {
  const ag__frame_stack_args *a = args;
  if (!frame_stack_ok(s, a))
    return ag__fail(AG_ERR_UNSUPPORTED, "vulkan: frame_stack's frame, stack, copies or dtypes");
  if (a->B <= 0) return AG_OK;
  ag__vk_pc_frames_stack pc = {ag__vk_addr(a->frames),
                               ag__vk_addr(a->size_dev),
                               ag__vk_addr(a->pos_dev),
                               ag__vk_addr(a->idx),
                               ag__vk_addr(a->counter),
                               ag__vk_addr(a->cols),
                               ag__vk_addr(a->obs),
                               ag__vk_addr(a->next_obs),
                               a->seed,
                               a->capacity,
                               a->n_envs,
                               a->B,
                               (int32_t)(a->h * a->w),
                               (int32_t)a->c,
                               a->stack,
                               (int32_t)a->idx_dtype,
                               (int32_t)a->out_dtype,
                               0};
  _Static_assert(sizeof pc <= AG__VK_PUSH_BYTES, "FRAME_STACK's push constants fit");
  const int pipe = ag__vk_pipe(s, AG__VK_PIPE_FRAMES_STACK);
  const int one = a->B <= FRAMES_ONE_GROUP;
  pc.phase = one ? 0 : 1;
  ag_status st = ag__vk_dispatch(s, pipe, &pc, sizeof pc, one ? 1 : ag__vk_groups(a->B, LOCAL), 1, 1);
  if (!st && !one && !a->idx) st = ag__vk_advance(s, a->counter, a->B * AG__FRAMES_TRIES);
  if (st) return st;
  pc.phase = 2;
  return ag__vk_dispatch(s, pipe, &pc, sizeof pc, ag__vk_groups(2 * a->B, 1), 1, 1);
}

const ag__vk_kernel ag__vk_k_frames[] = {
    {AG__K_FRAME_STACK, run_frame_stack, frame_stack_ok, NULL},
};
const int ag__vk_n_frames = (int)(sizeof ag__vk_k_frames / sizeof ag__vk_k_frames[0]);
