/* nstep.h — the n-step return of one sampled transition (AG__K_NSTEP),
 * written once for the CPU reference and the CUDA kernel, so that both
 * backends give the same bits.
 *
 * Write order: the ring writes column pos next, so with `size` valid
 * columns the rank of column x, (x - pos) mod capacity, runs from 0 (the
 * next to be overwritten) to capacity - 1 (the newest), and x holds a
 * transition when its rank is at least capacity - size (while the table
 * fills, pos = size and these are columns 0 .. size-1). From column c the
 * walk may go on to c + stride (mod capacity) when c holds a transition
 * and rank(c) + stride < capacity: the next column was written after c,
 * and the step does not reach across the write head, the wrap included.
 *
 * The arithmetic is f32, in the order k = 0, 1, ...: gamma^k by repeated
 * products, the return by sums of gamma^k * reward, each product and sum
 * rounded on its own (on the device __fmul_rn / __fadd_rn, which are never
 * contracted into a fused multiply-add). The CPU backend runs its kernels
 * flushing subnormal floats (cpu_backend.c): for values that never become
 * subnormal the two backends agree bit for bit. */
#ifndef AGRL_BASE_NSTEP_H
#define AGRL_BASE_NSTEP_H

#include <stdint.h>

#include "base/base.h"
#include "base/convert.h"
#include "base/hd.h"
#include "base/kernels.h"

AG__HD float ag__nstep_mul(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

AG__HD float ag__nstep_add(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

/* The ring as the kernel takes it from the device: size in 0..capacity,
 * pos in 0..capacity-1 (values outside are clamped: no read leaves the
 * table whatever the device holds). */
AG__HD void ag__nstep_ring(int64_t size_raw, int64_t pos_raw, int64_t capacity, int64_t *size, int64_t *pos) {
  *size = size_raw < 0 ? 0 : (size_raw > capacity ? capacity : size_raw);
  *pos = ag__clamp_index(pos_raw, capacity);
}

/* Transition j: from c_0 = the clamped index, steps k = 0, 1, ...:
 *   R += gamma^k * reward[c_k] * scale;
 *   terminated[c_k] set: discount 0, stop;
 *   truncated[c_k] set: discount gamma^(k+1), stop;
 *   k = n - 1: discount gamma^n, stop;
 *   c_{k+1} = c_k + stride (mod capacity) not reachable (above): discount
 *   gamma^(k+1), stop;
 * last = the column of the last step taken (its next_obs bootstraps). */
AG__HD void ag__nstep_walk(const ag__nstep_args *a, int64_t size, int64_t pos, int64_t j) {
  const int64_t cap = a->capacity;
  int64_t c = ag__clamp_index(ag__index_at(a->idx, a->idx_dtype, j * a->idx_stride), cap);
  const int64_t rank = c >= pos ? c - pos : c - pos + cap;
  /* the steps the ring allows from c: all k with rank + k * stride < capacity */
  const int64_t reach = rank >= cap - size ? (cap - 1 - rank) / a->stride + 1 : 1;
  float ret = 0.0f, g = 1.0f, discount = 0.0f;
  for (int k = 0;; k++) {
    const int64_t e = c * a->rows;
    const float r = ag__nstep_mul(ag__value_f32(a->table, a->dtype, e + a->rew_row), a->scale);
    ret = ag__nstep_add(ret, ag__nstep_mul(g, r));
    const float next = ag__nstep_mul(g, a->gamma);
    if (ag__value_f32(a->table, a->dtype, e + a->term_row) != 0.0f) {
      discount = 0.0f;
      break;
    }
    if ((a->trunc_row >= 0 && ag__value_f32(a->table, a->dtype, e + a->trunc_row) != 0.0f) || k + 1 >= a->n ||
        k + 1 >= reach) {
      discount = next;
      break;
    }
    c += a->stride;
    if (c >= cap) c -= cap;
    g = next;
  }
  a->ret[j] = ret;
  a->discount[j] = discount;
  a->last[j] = c;
}

#endif /* AGRL_BASE_NSTEP_H */
