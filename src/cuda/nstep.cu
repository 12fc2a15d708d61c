/* nstep.cu — NSTEP (kernels.h): the n-step returns of sampled transitions,
 * one thread a transition walking the table with the CPU's own code
 * (base/nstep.h), so both give the same bits. The ring's size and position
 * are read on the device by every thread, after the kernel before it has
 * finished (a recorded step replayed after more adds reads the ring as it
 * is then).
 */
#include "base/nstep.h"
#include "cuda/cuda_internal.h"

#define AG__NSTEP_BLOCK 128

__global__ void __launch_bounds__(AG__NSTEP_BLOCK) ag__nstep_kernel(ag__nstep_args a) {
  ag__pdl_wait();
  int64_t size, pos;
  ag__nstep_ring(*a.size_dev, *a.pos_dev, a.capacity, &size, &pos);
  for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < a.B;
       j += (int64_t)gridDim.x * blockDim.x)
    ag__nstep_walk(&a, size, pos, j);
}

ag_status ag__cuda_nstep(ag__cuda_state *st, const void *args) {
  const ag__nstep_args *a = (const ag__nstep_args *)args;
  const cudaError_t e =
      ag__launch_one(st, ag__nstep_kernel, ag__cuda_grid(st, a->B, AG__NSTEP_BLOCK), AG__NSTEP_BLOCK, *a);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return ag__cuda_fail(e, "cuda: nstep kernel");
  }
  return ag__cuda_check_launch("cuda: nstep kernel");
}
