/* random.cu — RANDINT (kernels.h): uniform integers from Philox4x32-10.
 *
 * One block: every thread reads the stream's counter, draws its share, and
 * after a barrier thread 0 advances the counter in device memory, so a
 * recorded step draws new indices at every replay with no host involvement.
 */
#include "base/philox.h"
#include "cuda/cuda_internal.h"

#define AG__RAND_BLOCK 256

__global__ void ag__randint_kernel(ag__randint_args a) {
  ag__pdl_wait();
  const uint64_t base = *a.counter;
  const int64_t bound = a.bound_dev ? *a.bound_dev : a.bound_const;
  for (int64_t i = threadIdx.x; i < a.n; i += blockDim.x)
    ag__index_put(a.out, a.out_dtype, i, ag__philox_below(a.seed, base + (uint64_t)i, bound));
  __syncthreads();
  if (threadIdx.x == 0) *a.counter = base + (uint64_t)a.n;
}

ag_status ag__cuda_randint(ag__cuda_state *st, const void *args) {
  const ag__randint_args *a = (const ag__randint_args *)args;
  ag__launch(ag__randint_kernel, 1, AG__RAND_BLOCK, 0, st->stream, *a);
  return ag__cuda_check_launch("cuda: randint kernel");
}
