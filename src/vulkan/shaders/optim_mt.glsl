// optim_mt.glsl — the multi-tensor kernels' argument block (k_optim.c's
// mt_args) and the chunk a work group takes.
//
// The block is 1 + 6 count 8-byte words: first[0 .. count], then n, p, g,
// m and v of each tensor (count words each; p: the parameter, AXPBY's y;
// g: the gradient, AXPBY's x; m, v: the moments). The tensors' elements
// are cut into chunks; tensor k's chunks are first[k] .. first[k + 1] - 1
// and first[count] is the total, so a chunk index names one tensor and a
// range of its elements.
//
// A work group copies the block into shared memory first, all its threads
// loading at once: the block lives in host-visible memory, and finding a
// chunk's tensor there would be a chain of dependent reads a chunk.
// Needs LOCAL (the local size) defined before it is included.
#define MT_MAX 48
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer MTWords { uint64_t w[]; };
shared uint64_t mt_w[1 + 6 * MT_MAX];
int mt_count;

// every thread of the work group calls it, in uniform control flow
void mt_load(uint64_t addr, int count) {
  mt_count = count;
  MTWords b = MTWords(addr);
  for (int i = int(gl_LocalInvocationID.x); i < 1 + 6 * count; i += LOCAL) mt_w[i] = b.w[i];
  barrier();
}

int64_t mt_first(int k) { return int64_t(mt_w[k]); }
int64_t mt_n(int k) { return int64_t(mt_w[mt_count + 1 + k]); }
uint64_t mt_p(int k) { return mt_w[2 * mt_count + 1 + k]; }
uint64_t mt_g(int k) { return mt_w[3 * mt_count + 1 + k]; }
uint64_t mt_m(int k) { return mt_w[4 * mt_count + 1 + k]; }
uint64_t mt_v(int k) { return mt_w[5 * mt_count + 1 + k]; }

// The tensor that holds chunk c (first[k] <= c < first[k + 1]), by bisection.
int mt_tensor(int64_t c) {
  int lo = 0, hi = mt_count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (mt_first(mid) <= c) lo = mid; else hi = mid - 1;
  }
  return lo;
}
