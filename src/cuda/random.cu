/* random.cu — RANDINT and RANDN (kernels.h): uniform integers and standard
 * normal values from Philox4x32-10.
 *
 * One block: every thread reads the stream's counter, draws its share, and
 * after a barrier thread 0 advances the counter in device memory, so a
 * recorded step draws new numbers at every replay with no host involvement.
 * The values are the CPU's bits: the same Philox (base/philox.h) and, for
 * RANDN, the same Box-Muller steps (base/normal.h, whose products are
 * __dmul_rn here and never fused, whatever --fmad says).
 */
#include "base/normal.h"
#include "base/philox.h"
#include "cuda/cuda_internal.h"

#define AG__RAND_BLOCK 256
#define AG__RANDN_BLOCK 512

__global__ void ag__randint_kernel(ag__randint_args a) {
  ag__pdl_wait();
  const uint64_t base = *a.counter;
  const int64_t bound = a.bound_dev ? *a.bound_dev : a.bound_const;
  for (int64_t i = threadIdx.x; i < a.n; i += blockDim.x)
    ag__index_put(a.out, a.out_dtype, i, ag__philox_below(a.seed, base + (uint64_t)i, bound));
  __syncthreads();
  if (threadIdx.x == 0) *a.counter = base + (uint64_t)a.n;
}

__global__ void __launch_bounds__(AG__RANDN_BLOCK) ag__randn_kernel(ag__randn_args a) {
  ag__pdl_wait();
  const uint64_t base = *a.counter;
  for (int64_t i = threadIdx.x; i < a.n; i += blockDim.x)
    a.out[i] = ag__normal_of(ag__philox_u64(a.seed, base + (uint64_t)i));
  __syncthreads();
  if (threadIdx.x == 0) *a.counter = base + (uint64_t)a.n;
}

ag_status ag__cuda_randint(ag__cuda_state *st, const void *args) {
  const ag__randint_args *a = (const ag__randint_args *)args;
  ag__launch(ag__randint_kernel, 1, AG__RAND_BLOCK, 0, st->stream, *a);
  return ag__cuda_check_launch("cuda: randint kernel");
}

ag_status ag__cuda_randn(ag__cuda_state *st, const void *args) {
  const ag__randn_args *a = (const ag__randn_args *)args;
  ag__launch(ag__randn_kernel, 1, AG__RANDN_BLOCK, 0, st->stream, *a);
  return ag__cuda_check_launch("cuda: randn kernel");
}
