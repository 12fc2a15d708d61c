/* optim.cu — the multi-tensor kernels: SUMSQ, ADAM_PREP, ADAM, AXPBY.
 *
 * One launch covers every tensor of a parameter list: the tensors are passed
 * by value (pointers and lengths, kernels.h) and each block takes a chunk of
 * one tensor, found from a table of first blocks computed by the launcher.
 * The optimizer's step, bias corrections and clip coefficient live in device
 * memory (ADAM_PREP), so a recorded step needs no host value.
 */
#include "base/scalar_ops.h"
#include "cuda/cuda_internal.h"

#define AG__MT_BLOCK 256
#define AG__MT_PER 4                             /* elements a thread handles (ADAM) */
#define AG__MT_CHUNK (AG__MT_BLOCK * AG__MT_PER) /* elements a block handles */

typedef struct ag_mt_plan {
  int count;
  int first[AG__MT_MAX + 1]; /* first block of each tensor; first[count] = blocks */
} ag_mt_plan;

static ag_mt_plan plan_of(int count, const ag__mt_entry *t) {
  ag_mt_plan p;
  p.count = count;
  int b = 0;
  for (int k = 0; k < count; k++) {
    p.first[k] = b;
    b += (int)((t[k].n + AG__MT_CHUNK - 1) / AG__MT_CHUNK);
  }
  p.first[count] = b;
  return p;
}

/* The tensor of this block and the first element of its chunk. */
__device__ __forceinline__ void ag_mt_locate(const ag_mt_plan &p, int *k, int64_t *lo) {
  int b = blockIdx.x, kk = 0;
  while (kk + 1 < p.count && p.first[kk + 1] <= b) kk++;
  *k = kk;
  *lo = (int64_t)(b - p.first[kk]) * AG__MT_CHUNK;
}

/* One block, a fixed order of additions (each thread strides through the
 * tensors in turn, then a tree in shared memory): the norm, hence the clip
 * coefficient, is the same bits at every replay, so a seeded run repeats
 * itself. An atomic sum over blocks would not (the DQN's parameters are
 * ~10^5 values: one block reads them in a few microseconds). */
#define AG__SUMSQ_BLOCK 1024
__global__ void __launch_bounds__(AG__SUMSQ_BLOCK) ag__sumsq_kernel(ag__adam_args a) {
  ag__pdl_wait();
  __shared__ float red[AG__SUMSQ_BLOCK];
  float s = 0.0f;
  for (int k = 0; k < a.count; k++) {
    const ag__mt_entry e = a.t[k];
    for (int64_t i = threadIdx.x; i < e.n; i += AG__SUMSQ_BLOCK) s += e.g[i] * e.g[i];
  }
  red[threadIdx.x] = s;
  __syncthreads();
  for (int w = AG__SUMSQ_BLOCK / 2; w > 0; w >>= 1) {
    if ((int)threadIdx.x < w) red[threadIdx.x] += red[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) a.state[AG__OPT_SUMSQ] += red[0];
}

__global__ void ag__adam_prep_kernel(ag__adam_args a) {
  ag__pdl_wait();
  float v[4];
  ag__adam_values(a.state, a.b1, a.b2, a.max_norm, v);
  ag__adam_store(a.state, v);
}

/* With a.prep every block computes the step's values from the state (all
 * read it before any writes it), and the last block to finish stores them.
 * A thread takes AG__MT_PER elements a block's width apart and loads all of
 * them (gradient, parameter, moments) before it computes any: one round
 * trip to memory a launch, not one an element (the stores of one element
 * could alias the loads of the next, so the compiler keeps their order). */
__global__ void __launch_bounds__(AG__MT_BLOCK) ag__adam_kernel(ag__adam_args a, ag_mt_plan p) {
  ag__pdl_wait();
  int k;
  int64_t lo;
  ag_mt_locate(p, &k, &lo);
  const ag__mt_entry e = a.t[k];
  float g[AG__MT_PER], w[AG__MT_PER], m[AG__MT_PER], v[AG__MT_PER];
#pragma unroll
  for (int r = 0; r < AG__MT_PER; r++) {
    const int64_t i = lo + threadIdx.x + (int64_t)r * AG__MT_BLOCK;
    const bool in = i < e.n;
    g[r] = in ? e.g[i] : 0.0f;
    w[r] = in ? e.p[i] : 0.0f;
    m[r] = in && !a.sgd ? e.m[i] : 0.0f;
    v[r] = in && !a.sgd ? e.v[i] : 0.0f;
  }
  float pv[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  if (a.prep) ag__adam_values(a.state, a.b1, a.b2, a.max_norm, pv);
  const float bc1 = a.prep ? pv[1] : a.state[AG__OPT_BC1], bc2 = a.prep ? pv[2] : a.state[AG__OPT_BC2],
              coef = a.prep ? pv[3] : a.state[AG__OPT_COEF];
#pragma unroll
  for (int r = 0; r < AG__MT_PER; r++) {
    const int64_t i = lo + threadIdx.x + (int64_t)r * AG__MT_BLOCK;
    if (i >= e.n) continue;
    ag__adam_elem(a.sgd, a.lr, a.b1, a.b2, a.eps, a.wd, bc1, bc2, coef, g[r], &w[r], &m[r], &v[r]);
    e.p[i] = w[r];
    if (!a.sgd) e.m[i] = m[r], e.v[i] = v[r];
  }
  if (a.prep) {
    __shared__ bool last;
    __syncthreads(); /* every thread of the block has read the state */
    if (threadIdx.x == 0) {
      __threadfence();
      const float done = atomicAdd(&a.scratch[0], 1.0f); /* whole numbers: exact */
      last = done == (float)(p.first[p.count] - 1);
    }
    __syncthreads();
    if (last && threadIdx.x == 0) {
      ag__adam_store(a.state, pv);
      a.scratch[0] = 0.0f; /* zero again for the next launch */
    }
  }
}

__global__ void ag__axpby_kernel(ag__axpby_args a, ag_mt_plan p) {
  ag__pdl_wait();
  int k;
  int64_t lo;
  ag_mt_locate(p, &k, &lo);
  const ag__mt_entry e = a.t[k];
  int64_t hi = lo + AG__MT_CHUNK < e.n ? lo + AG__MT_CHUNK : e.n;
  for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) e.p[i] = a.a * e.g[i] + a.b * e.p[i];
}

ag_status ag__cuda_sumsq(ag__cuda_state *st, const void *args) {
  const ag__adam_args *a = (const ag__adam_args *)args;
  if (a->count > 0) ag__launch(ag__sumsq_kernel, 1, AG__SUMSQ_BLOCK, 0, st->stream, *a);
  return ag__cuda_check_launch("cuda: sumsq kernel");
}

ag_status ag__cuda_adam_prep(ag__cuda_state *st, const void *args) {
  ag__launch(ag__adam_prep_kernel, 1, 1, 0, st->stream, *(const ag__adam_args *)args);
  return ag__cuda_check_launch("cuda: adam_prep kernel");
}

ag_status ag__cuda_adam(ag__cuda_state *st, const void *args) {
  const ag__adam_args *a = (const ag__adam_args *)args;
  if (a->prep && !a->scratch)
    return ag__fail(AG_ERR_INVALID_ARG,
                    "cuda: a prep-fused adam launch needs the scratch its query asks for");
  ag_mt_plan p = plan_of(a->count, a->t);
  if (p.first[a->count] > 0)
    ag__launch(ag__adam_kernel, p.first[a->count], AG__MT_BLOCK, 0, st->stream, *a, p);
  return ag__cuda_check_launch("cuda: adam kernel");
}

ag_status ag__cuda_axpby(ag__cuda_state *st, const void *args) {
  const ag__axpby_args *a = (const ag__axpby_args *)args;
  ag_mt_plan p = plan_of(a->count, a->t);
  if (p.first[a->count] > 0)
    ag__launch(ag__axpby_kernel, p.first[a->count], AG__MT_BLOCK, 0, st->stream, *a, p);
  return ag__cuda_check_launch("cuda: axpby kernel");
}

size_t ag__cuda_adam_scratch(const void *args) {
  const ag__adam_args *a = (const ag__adam_args *)args;
  return a->prep ? sizeof(float) : 0; /* the count of blocks done (ag__adam_kernel) */
}
