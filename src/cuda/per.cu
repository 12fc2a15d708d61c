/* per.cu — PER_SET, PER_FILL and PER_SAMPLE (kernels.h): the sum tree of
 * prioritized replay on the device. Each is one block: the tree is updated
 * level by level with a barrier between levels (a parent is summed only
 * after all its children are written), and sampling walks the tree with one
 * thread a sample. The tree code is shared with the CPU (core/per_tree.h).
 */
#include "base/per_tree.h"
#include "cuda/cuda_internal.h"

#define AG__PER_BLOCK 256 /* = 16^2: level 1 has a node a thread */
#define AG__PER_WARPS (AG__PER_BLOCK / 32)
#define AG__PER_FULL 0xffffffffu
/* Levels 0 and 1 (16 and 256 nodes) live in shared memory during PER_SET,
 * 17 doubles a row of 16 siblings so that threads reading different rows
 * column by column mostly hit different banks. */
#define AG__PER_ROW (AG__PER_FAN + 1)

/* Node i of a level in shared memory: row i / 16, column i % 16. */
__device__ __forceinline__ int ag_per_pad(uint32_t i) { return (int)(i + (i >> 4)); }

/* PER_SET over passes of 256 leaves in order (a leaf a thread, j0 + t), one
 * block; a pass is a short chain of latencies rather than of work:
 * - the index and the priority load together; the power (ag__per_pow)
 *   waits only on the priority;
 * - the last thread naming a leaf writes it (as the CPU's pass in order
 *   does): within a warp the highest lane of those naming it (match), across
 *   warps by order, warp 0 first, a barrier between warps (a store ordered
 *   after another one to the same place by a barrier lands after it);
 * - then the levels bottom up, one barrier each. Every thread with a valid
 *   leaf sums its ancestor of the level, whether or not another thread
 *   shares it: sharers read the same 16 children after the same barrier and
 *   write the same bits, so no thread needs to know who else shares a node.
 *   Levels 2 and below read their children from global memory, the 16
 *   lanes of a half-warp loading the 16 children of each of their threads'
 *   nodes (one coalesced 128-byte line a node) and passing them through
 *   shared memory; levels 0 and 1 are copies in shared memory (loaded once,
 *   written through), so that the last sums wait on no global load;
 * - the root is summed once, after the last pass.
 * A node is summed in ag__per_sum16's order everywhere: bit for bit the
 * CPU's tree from the same leaves. */
/* MASKED: the mask is read (a frame table's sampler); the plain tables'
 * updates run without its loads. */
template <bool MASKED>
__global__ void __launch_bounds__(AG__PER_BLOCK) ag__per_set_kernel(ag__per_set_args a) {
  ag__pdl_wait();
  /* the children of each thread's node, a row a thread (17 doubles, so that
   * a half-warp reading its rows column by column hits 16 bank pairs) */
  __shared__ double row[AG__PER_BLOCK][AG__PER_ROW];
  __shared__ double top0[AG__PER_FAN], top1[AG__PER_FAN * AG__PER_ROW];
  const int t = (int)threadIdx.x, lane = t & 31, warp = t >> 5, c = lane & 15, base = t & ~15;
  const int depth = a.depth;
  /* the levels kept in shared memory: 0 .. top-1 (for depths 1 and 2 the
   * leaves are among them) */
  const int top = depth < 2 ? depth : 2;
  const int64_t leaf_off = ag__per_offset(depth - 1);
  double *leaves = a.tree + leaf_off;
  /* levels 0 and 1, a node a thread, held in registers until the first
   * pass has its power: these loads overlap the pass's own */
  const double own0 = t < AG__PER_FAN ? a.tree[t] : 0.0, own1 = top > 1 ? a.tree[AG__PER_FAN + t] : 0.0;
  float pmax = 0.0f;
  for (int64_t j0 = 0; j0 < a.n; j0 += AG__PER_BLOCK) {
    const int64_t j = j0 + t;
    /* the priority does not wait for the index: a row j < n exists either way */
    const int64_t li = j < a.n ? ag__index_at(a.idx, a.idx_dtype, j) : -1;
    const float p = ag__per_clamp(j < a.n ? a.prio[j * a.prio_stride] : 1.0f);
    const double v = ag__per_pow(p, a.alpha);
    if (j0 == 0) {
      if (t < AG__PER_FAN) top0[t] = own0;
      if (top > 1) top1[ag_per_pad(t)] = own1;
    }
    /* indices outside the table (or masked) are skipped: a kernel cannot report them */
    const bool in = li >= 0 && li < a.cols && (!MASKED || a.mask[li] != 0); /* ag__per_takes */
    const uint32_t leaf = in ? (uint32_t)li : AG__PER_FULL; /* < 2^31 columns; invalid lanes match no leaf */
    if (in) pmax = fmaxf(pmax, p);
    /* every lane takes part in the match, valid or not; the highest lane
     * naming a leaf is the warp's last */
    const uint32_t same = __match_any_sync(AG__PER_FULL, leaf);
    const bool last = in && 31 - __clz(same) == lane;
    /* the previous pass's level 0 is summed (its rows of level 1 read), and
     * the first pass's copies of levels 0 and 1 are in */
    __syncthreads();
#pragma unroll 1
    for (int w = 0; w < AG__PER_WARPS; w++) {
      if (warp == w && last) {
        leaves[leaf] = v;
        if (depth == 1)
          top0[leaf] = v;
        else if (depth == 2)
          top1[ag_per_pad(leaf)] = v;
      }
      __syncthreads(); /* warp w's leaves land before warp w + 1's */
    }
    /* levels depth-2 .. 1 from their children in global memory */
    if (depth > 2) {
      const uint32_t owners = (__ballot_sync(AG__PER_FULL, in) >> (lane & 16)) & 0xffffu;
      uint32_t lf[16]; /* the leaves of this half-warp's threads */
#pragma unroll
      for (int r = 0; r < 16; r++) lf[r] = __shfl_sync(AG__PER_FULL, leaf, r, 16);
      int64_t ch_off = leaf_off; /* first node of level d + 1 */
      for (int d = depth - 2; d >= 1; d--) {
        const int sh = 4 * (depth - 1 - d);
        /* level d + 1 follows level d's 16^(d+1) nodes */
        const int64_t off = ch_off - ((int64_t)1 << (4 * (d + 1)));
        const double *ch = a.tree + ch_off + c;
        double x[16];
#pragma unroll
        for (int r = 0; r < 16; r++) /* all loads in flight before the first use */
          if ((owners >> r) & 1u) x[r] = ch[(int64_t)(lf[r] >> sh) * AG__PER_FAN];
#pragma unroll
        for (int r = 0; r < 16; r++)
          if ((owners >> r) & 1u) row[base + r][c] = x[r];
        __syncwarp();
        if (in) {
          const uint32_t node = leaf >> sh;
          const double sum = ag__per_sum16(row[t]);
          a.tree[off + node] = sum;
          if (d == 1) top1[ag_per_pad(node)] = sum;
        }
        __syncthreads(); /* this level is written; the rows are read */
        ch_off = off;
      }
    }
    /* level 0 from level 1 in shared memory */
    if (depth > 1 && in) {
      const uint32_t node = leaf >> (4 * (depth - 1));
      const double sum = ag__per_sum16(top1 + node * AG__PER_ROW);
      a.tree[node] = sum;
      top0[node] = sum;
    }
  }
  if (a.n <= 0 && t < AG__PER_FAN) top0[t] = own0;
  __syncthreads(); /* level 0 is final */
  if (t == 0) a.tree[ag__per_offset(depth)] = ag__per_sum16(top0);
  /* state[0] = max(state[0], p): a warp's maximum, one atomic a warp
   * (non-negative floats order as their bits) */
  for (int o = 16; o > 0; o >>= 1) pmax = fmaxf(pmax, __shfl_xor_sync(AG__PER_FULL, pmax, o));
  if (lane == 0) atomicMax((unsigned int *)&a.state[0], __float_as_uint(pmax));
}

__global__ void ag__per_fill_kernel(ag__per_fill_args a) {
  ag__pdl_wait();
  double *leaves = a.tree + ag__per_offset(a.depth - 1);
  if (a.mask) { /* a masking pass */
    for (int64_t i = threadIdx.x; i < a.k; i += blockDim.x)
      if (!a.mask[a.pos + i]) leaves[a.pos + i] = 0.0;
  } else {
    const double v = pow((double)a.state[0], (double)a.alpha);
    for (int64_t i = threadIdx.x; i < a.k; i += blockDim.x) leaves[a.pos + i] = v;
  }
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

__global__ void ag__per_sample_kernel(ag__per_sample_args a) {
  ag__pdl_wait();
  __shared__ float red[AG__PER_BLOCK];
  const uint64_t base = *a.counter;
  const double root = a.tree[ag__per_offset(a.depth)];
  const double *leaves = a.tree + ag__per_offset(a.depth - 1);
  const int64_t size = *a.size_dev;
  const float beta = ag__per_beta_of(a.beta, a.beta_dev);
  float wmax = 0.0f;
  for (int64_t j = threadIdx.x; j < a.B; j += blockDim.x) {
    int64_t leaf = ag__per_find(a.tree, a.depth, ag__per_target(a.seed, base + (uint64_t)j, j, a.B, root));
    float w = ag__per_weight(leaves[leaf], root, size, beta);
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
  const ag__per_set_args *a = (const ag__per_set_args *)args;
  if (a->mask)
    ag__launch(ag__per_set_kernel<true>, 1, AG__PER_BLOCK, 0, st->stream, *a);
  else
    ag__launch(ag__per_set_kernel<false>, 1, AG__PER_BLOCK, 0, st->stream, *a);
  return ag__cuda_check_launch("cuda: per_set kernel");
}

ag_status ag__cuda_per_fill(ag__cuda_state *st, const void *args) {
  ag__launch(ag__per_fill_kernel, 1, AG__PER_BLOCK, 0, st->stream, *(const ag__per_fill_args *)args);
  return ag__cuda_check_launch("cuda: per_fill kernel");
}

ag_status ag__cuda_per_sample(ag__cuda_state *st, const void *args) {
  ag__launch(ag__per_sample_kernel, 1, AG__PER_BLOCK, 0, st->stream, *(const ag__per_sample_args *)args);
  return ag__cuda_check_launch("cuda: per_sample kernel");
}
