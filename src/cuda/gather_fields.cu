/* gather_fields.cu — GATHER_FIELDS and SCATTER_FIELDS (kernels.h): the
 * fields of a batch from the replay table into up to 40 regions of any
 * dtype (another framework's tensors), and transitions from such regions
 * into the table, each in one launch.
 *
 * The grid is cut into consecutive ranges of blocks, one range a region
 * (the host works them out: AG__FW_BLOCK threads for each item a region
 * has, at most ag__cuda_grid's count, the rest in grid-stride loops), so
 * that a block finds its region by a scan of the ranges that every thread
 * of it does alike, and all of its threads take the same branch of the
 * dtypes. Within a region thread t takes item t of the region's flat
 * order (transition j = t / width, element e = t - j width): consecutive
 * threads write consecutive elements of the region (contiguous when ld =
 * width) and read runs of `width` consecutive rows of a column of the
 * table. The common case, f32 columns into f32 regions, is a load, a
 * product (skipped at a scale of 1) and a store; other dtypes convert by
 * base/convert.h, as the CPU reference does, for the same bits.
 */
#include "base/convert.h"
#include "base/kernels.h"
#include "cuda/cuda_internal.h"

#define AG__FW_BLOCK 256

/* The ranges of blocks: region d takes blocks first[d] .. first[d + 1] - 1. */
typedef struct ag__fw_plan {
  uint32_t first[AG__GF_MAX + 1];
} ag__fw_plan;

static_assert(AG__GF_MAX == AG__SF_MAX, "one plan serves both kernels");
static_assert(sizeof(ag__gather_fields_args) + sizeof(ag__fw_plan) <= 4000, "kernel parameters fit 4 KB");
static_assert(sizeof(ag__scatter_fields_args) + sizeof(ag__fw_plan) <= 4000, "kernel parameters fit 4 KB");

/* The region of this block (n >= 1 regions). */
__device__ __forceinline__ int ag__fw_region(const ag__fw_plan &pl, int n) {
  int d = 0;
  while (d + 1 < n && blockIdx.x >= pl.first[d + 1]) d++;
  return d;
}

/* Item t of a region of `width` items a transition: its transition and element. */
__device__ __forceinline__ void ag__fw_split(int64_t t, int64_t width, bool narrow, int64_t *j, int64_t *e) {
  if (width == 1) {
    *j = t, *e = 0;
  } else if (narrow) { /* 32-bit division: the region has fewer than 2^32 items */
    const uint32_t q = (uint32_t)t / (uint32_t)width;
    *j = q, *e = t - (int64_t)q * width;
  } else {
    *j = t / width, *e = t - *j * width;
  }
}

/* One value of a field (the CPU reference's gf_value). */
__device__ __forceinline__ void ag__gf_value(void *p, ag_dtype dt, int64_t k, const void *src, ag_dtype st,
                                             int64_t i, float scale) {
  if (scale == 1.0f && ag__dtype_is_int(st) && ag__dtype_is_int(dt)) {
    ag__store_int(p, dt, k, ag__value_int(src, st, i));
    return;
  }
  const float v = ag__value_f32(src, st, i);
  ag__store_f32(p, dt, k, scale == 1.0f ? v : v * scale);
}

__global__ void __launch_bounds__(AG__FW_BLOCK)
    ag__gather_fields_kernel(ag__gather_fields_args a, ag__fw_plan pl) {
  ag__pdl_wait();
  const int d = ag__fw_region(pl, a.n_dst);
  const ag__gf_dst o = a.dst[d];
  const int64_t total = a.n * o.width, stride = (int64_t)(pl.first[d + 1] - pl.first[d]) * AG__FW_BLOCK;
  const bool narrow = total <= (int64_t)UINT32_MAX;
  const bool copy = o.row0 >= 0 && a.src_dtype == AG_F32 && o.dtype == AG_F32;
  for (int64_t t = (int64_t)(blockIdx.x - pl.first[d]) * AG__FW_BLOCK + threadIdx.x; t < total; t += stride) {
    int64_t j, e;
    ag__fw_split(t, o.width, narrow, &j, &e);
    const int64_t c = ag__clamp_index(ag__index_at(a.idx, a.idx_dtype, j * a.idx_stride), a.capacity);
    if (copy) {
      const float v = __ldg((const float *)a.src + c * a.rows + o.row0 + e);
      ((float *)o.p)[j * o.ld + e] = a.scale == 1.0f ? v : v * a.scale;
    } else if (o.row0 == AG__GF_INDICES) {
      ag__store_int(o.p, o.dtype, j * o.ld, c);
    } else if (o.row0 == AG__GF_WEIGHTS) {
      ag__store_f32(o.p, o.dtype, j * o.ld, a.weights[j]);
    } else {
      ag__gf_value(o.p, o.dtype, j * o.ld + e, a.src, a.src_dtype, c * a.rows + o.row0 + e, a.scale);
    }
  }
}

__global__ void __launch_bounds__(AG__FW_BLOCK)
    ag__scatter_fields_kernel(ag__scatter_fields_args a, ag__fw_plan pl) {
  ag__pdl_wait();
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    if (a.size_dev) *a.size_dev = a.size_value;
    if (a.pos_dev) *a.pos_dev = a.pos_value;
  }
  if (a.n_src < 1) return;
  const int s = ag__fw_region(pl, a.n_src);
  const ag__sf_src in = a.src[s];
  const int64_t total = a.k * in.width, stride = (int64_t)(pl.first[s + 1] - pl.first[s]) * AG__FW_BLOCK;
  const bool narrow = total <= (int64_t)UINT32_MAX;
  const bool copy = in.dtype == AG_F32 && a.dst_dtype == AG_F32;
  for (int64_t t = (int64_t)(blockIdx.x - pl.first[s]) * AG__FW_BLOCK + threadIdx.x; t < total; t += stride) {
    int64_t j, e;
    ag__fw_split(t, in.width, narrow, &j, &e);
    int64_t col = a.pos + j; /* pos < capacity, j < k <= capacity */
    if (col >= a.capacity) col -= a.capacity;
    const int64_t to = col * a.rows + in.row0 + e, from = j * in.ld + e;
    if (copy)
      ((float *)a.dst)[to] = __ldg((const float *)in.p + from);
    else
      ag__convert_one(a.dst, a.dst_dtype, to, in.p, in.dtype, from);
  }
}

/* The ranges of blocks for regions of items[0 .. n-1] items; returns the grid (0: nothing to do). */
static unsigned plan_of(const ag__cuda_state *st, const int64_t *items, int n, ag__fw_plan *pl) {
  uint64_t next = 0;
  for (int d = 0; d < n; d++) {
    pl->first[d] = (uint32_t)next;
    next += items[d] > 0 ? ag__cuda_grid(st, items[d], AG__FW_BLOCK) : 0;
  }
  for (int d = n; d <= AG__GF_MAX; d++) pl->first[d] = (uint32_t)next;
  return (unsigned)next;
}

static ag_status launched(cudaError_t e, const char *what) {
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return ag__cuda_fail(e, what);
  }
  return ag__cuda_check_launch(what);
}

ag_status ag__cuda_gather_fields(ag__cuda_state *st, const void *args) {
  const ag__gather_fields_args *a = (const ag__gather_fields_args *)args;
  if (a->n_dst < 1 || a->n_dst > AG__GF_MAX || a->n < 1) return AG_OK;
  int64_t items[AG__GF_MAX];
  for (int d = 0; d < a->n_dst; d++) items[d] = a->n * a->dst[d].width;
  ag__fw_plan pl;
  const unsigned grid = plan_of(st, items, a->n_dst, &pl);
  if (!grid) return AG_OK;
  return launched(ag__launch_one(st, ag__gather_fields_kernel, grid, AG__FW_BLOCK, *a, pl),
                  "cuda: gather_fields kernel");
}

ag_status ag__cuda_scatter_fields(ag__cuda_state *st, const void *args) {
  const ag__scatter_fields_args *a = (const ag__scatter_fields_args *)args;
  const int n = a->n_src < 0 ? 0 : a->n_src > AG__SF_MAX ? AG__SF_MAX : a->n_src;
  int64_t items[AG__SF_MAX];
  for (int s = 0; s < n; s++) items[s] = a->k * a->src[s].width;
  ag__fw_plan pl;
  unsigned grid = plan_of(st, items, n, &pl);
  if (!grid && !a->size_dev && !a->pos_dev) return AG_OK;
  ag__scatter_fields_args b = *a;
  if (!grid) b.n_src = 0, grid = 1; /* the size and the position only */
  b.n_src = b.n_src > AG__SF_MAX ? AG__SF_MAX : b.n_src;
  return launched(ag__launch_one(st, ag__scatter_fields_kernel, grid, AG__FW_BLOCK, b, pl),
                  "cuda: scatter_fields kernel");
}
