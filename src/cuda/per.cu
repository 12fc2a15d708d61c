/* per.cu — PER_SET, PER_FILL and PER_SAMPLE (kernels.h): the sum tree of
 * prioritized replay on the device. Each is one block: the tree is updated
 * level by level with a barrier between levels (a parent is summed only
 * after all its children are written), and sampling walks the tree with one
 * thread a sample. The tree code is shared with the CPU (core/per_tree.h).
 */
#include "core/per_tree.h"
#include "cuda/cuda_internal.h"

#define AG__PER_BLOCK 256
#define AG__PER_FULL 0xffffffffu
/* PER_SET's tables: one a level, twice the leaves of a pass (at most half
 * full, so that a probe ends soon); keys are node indices (< 2^31). */
#define AG__PER_HASH_BITS 9
#define AG__PER_HASH (1 << AG__PER_HASH_BITS)
#define AG__PER_EMPTY 0xffffffffu

__device__ __forceinline__ int64_t ag_per_index(const void *idx, ag_dtype dt, int64_t j) {
  return dt == AG_I32 ? (int64_t)((const int32_t *)idx)[j] : ((const int64_t *)idx)[j];
}

__device__ __forceinline__ uint32_t ag_per_hash(uint32_t key) {
  return (key * 2654435761u) >> (32 - AG__PER_HASH_BITS);
}

/* Adds key to a level's table; true for the one thread that added it first. */
__device__ __forceinline__ bool ag_per_claim(uint32_t *tab, uint32_t key, uint32_t *slot) {
  for (uint32_t h = ag_per_hash(key);; h = (h + 1) & (AG__PER_HASH - 1)) {
    uint32_t old = atomicCAS(&tab[h], AG__PER_EMPTY, key);
    if (old == AG__PER_EMPTY || old == key) {
      *slot = h;
      return old == AG__PER_EMPTY;
    }
  }
}

/* The shared memory of PER_SET: the tables while the leaves are claimed, then
 * the children of each thread's node, a row a thread (17 doubles, so that a
 * half-warp reading its rows column by column hits 16 different bank pairs). */
union ag_per_set_smem {
  struct {
    uint32_t key[AG__PER_MAX_DEPTH * AG__PER_HASH];
    int last[AG__PER_HASH]; /* per leaf slot: the last thread that sets it */
  } h;
  double row[AG__PER_BLOCK][AG__PER_FAN + 1];
};

/* A pass takes a leaf a thread (j0 + t). Thread t claims its leaf and the
 * leaf's ancestor at every level in that level's table: the first claimant
 * of a node recomputes it, so each distinct node is summed once; the last
 * thread naming a leaf writes it (as the CPU's pass in order does). Then the
 * levels, bottom up, a barrier each: the 16 lanes of a half-warp load the 16
 * children of each of their threads' nodes (one coalesced 128-byte line
 * instead of 16 scattered loads a thread), through shared memory, and each
 * owner sums its row in ag__per_sum16's order, bit for bit the CPU's tree. */
__global__ void __launch_bounds__(AG__PER_BLOCK) ag_per_set_kernel(ag__per_set_args a) {
  ag__pdl_wait();
  __shared__ union ag_per_set_smem sm;
  const int t = (int)threadIdx.x, lane = t & 31, c = lane & 15, depth = a.depth;
  double *leaves = a.tree + ag__per_offset(depth - 1);
  float pmax = 0.0f;
  for (int64_t j0 = 0; j0 < a.n; j0 += AG__PER_BLOCK) {
    /* indices outside the table are skipped: a kernel cannot report them */
    const int64_t li = j0 + t < a.n ? ag_per_index(a.idx, a.idx_dtype, j0 + t) : -1;
    const bool in = li >= 0 && li < a.cols;
    uint32_t leaf = 0, own = 0, slot = 0; /* own: bit d = recomputes its node of level d */
    double v = 0.0;
    for (int i = t; i < depth * AG__PER_HASH; i += AG__PER_BLOCK) sm.h.key[i] = AG__PER_EMPTY;
    for (int i = t; i < AG__PER_HASH; i += AG__PER_BLOCK) sm.h.last[i] = -1;
    if (in) {
      float p = a.prio[(j0 + t) * a.prio_stride];
      p = p > 1e-12f ? p : 1e-12f;
      pmax = fmaxf(pmax, p);
      leaf = (uint32_t)li; /* < 2^31 columns */
      v = pow((double)p, (double)a.alpha);
    }
    __syncthreads(); /* the tables are empty (and the last pass's rows read) */
    if (in) {
      ag_per_claim(sm.h.key + (depth - 1) * AG__PER_HASH, leaf, &slot);
      atomicMax(&sm.h.last[slot], t);
      for (int d = depth - 2; d >= 0; d--) {
        uint32_t s;
        if (ag_per_claim(sm.h.key + d * AG__PER_HASH, leaf >> (4 * (depth - 1 - d)), &s)) own |= 1u << d;
      }
    }
    __syncthreads(); /* every claim is in */
    if (in && sm.h.last[slot] == t) leaves[leaf] = v;
    __syncthreads(); /* the leaves are written; the tables are dead (rows reuse them) */
    for (int d = depth - 2; d >= 0; d--) {
      const uint32_t node = leaf >> (4 * (depth - 1 - d));
      const double *ch = a.tree + ag__per_offset(d + 1);
      const uint32_t owners = (__ballot_sync(AG__PER_FULL, (own >> d) & 1u) >> (lane & 16)) & 0xffffu;
      const int base = t & ~15; /* this half-warp's first thread */
      double x[16];
#pragma unroll
      for (int r = 0; r < 16; r++) { /* all loads in flight before the first use */
        const uint32_t nr = __shfl_sync(AG__PER_FULL, node, r, 16);
        if ((owners >> r) & 1u) x[r] = ch[(int64_t)nr * AG__PER_FAN + c];
      }
#pragma unroll
      for (int r = 0; r < 16; r++)
        if ((owners >> r) & 1u) sm.row[base + r][c] = x[r];
      __syncwarp();
      if ((own >> d) & 1u) a.tree[ag__per_offset(d) + node] = ag__per_sum16(sm.row[t]);
      __syncthreads(); /* this level is written; the rows are read */
    }
    if (t == 0) ag__per_recompute_root(a.tree, depth);
  }
  /* state[0] = max(state[0], p): a warp's maximum, one atomic a warp
   * (non-negative floats order as their bits) */
  for (int o = 16; o > 0; o >>= 1) pmax = fmaxf(pmax, __shfl_xor_sync(AG__PER_FULL, pmax, o));
  if (lane == 0) atomicMax((unsigned int *)&a.state[0], __float_as_uint(pmax));
}

__global__ void ag_per_fill_kernel(ag__per_fill_args a) {
  ag__pdl_wait();
  const double v = pow((double)a.state[0], (double)a.alpha);
  double *leaves = a.tree + ag__per_offset(a.depth - 1);
  for (int64_t i = threadIdx.x; i < a.k; i += blockDim.x) leaves[a.pos + i] = v;
  __syncthreads();
  int64_t lo = a.pos, hi = a.pos + a.k - 1;
  for (int d = a.depth - 2; d >= 0; d--) {
    lo /= AG__PER_FAN;
    hi /= AG__PER_FAN;
    for (int64_t node = lo + threadIdx.x; node <= hi; node += blockDim.x) ag__per_recompute(a.tree, d, node);
    __syncthreads();
  }
  if (threadIdx.x == 0) ag__per_recompute_root(a.tree, a.depth);
}

__global__ void ag_per_sample_kernel(ag__per_sample_args a) {
  ag__pdl_wait();
  __shared__ float red[AG__PER_BLOCK];
  const uint64_t base = *a.counter;
  const double root = a.tree[ag__per_offset(a.depth)];
  const double *leaves = a.tree + ag__per_offset(a.depth - 1);
  const int64_t size = *a.size_dev;
  float wmax = 0.0f;
  for (int64_t j = threadIdx.x; j < a.B; j += blockDim.x) {
    int64_t leaf = ag__per_find(a.tree, a.depth, ag__per_target(a.seed, base + (uint64_t)j, j, a.B, root));
    float w = ag__per_weight(leaves[leaf], root, size, a.beta);
    a.idx[j] = (int32_t)leaf;
    a.w[j] = w;
    wmax = w > wmax ? w : wmax;
  }
  red[threadIdx.x] = wmax;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
    __syncthreads();
  }
  const float m = red[0];
  for (int64_t j = threadIdx.x; j < a.B; j += blockDim.x) a.w[j] = m > 0.0f ? a.w[j] / m : 0.0f;
  __syncthreads();
  if (threadIdx.x == 0) *a.counter = base + (uint64_t)a.B;
}

ag_status ag__cuda_per_set(ag__cuda_state *st, const void *args) {
  ag__launch(ag_per_set_kernel, 1, AG__PER_BLOCK, 0, st->stream, *(const ag__per_set_args *)args);
  return ag__cuda_check_launch("cuda: per_set kernel");
}

ag_status ag__cuda_per_fill(ag__cuda_state *st, const void *args) {
  ag__launch(ag_per_fill_kernel, 1, AG__PER_BLOCK, 0, st->stream, *(const ag__per_fill_args *)args);
  return ag__cuda_check_launch("cuda: per_fill kernel");
}

ag_status ag__cuda_per_sample(ag__cuda_state *st, const void *args) {
  ag__launch(ag_per_sample_kernel, 1, AG__PER_BLOCK, 0, st->stream, *(const ag__per_sample_args *)args);
  return ag__cuda_check_launch("cuda: per_sample kernel");
}
