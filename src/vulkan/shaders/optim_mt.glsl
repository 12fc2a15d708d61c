// optim_mt.glsl — the multi-tensor kernels' argument block (k_optim.c's
// mt_args) and the chunk a work group takes.
//
// The block is 1 + 6 count 8-byte words: first[0 .. count], then n, p, g,
// m and v of each tensor (count words each; p: the parameter, AXPBY's y;
// g: the gradient, AXPBY's x; m, v: the moments). The tensors' elements
// are cut into chunks; tensor k's chunks are first[k] .. first[k + 1] - 1
// and first[count] is the total, so a chunk index names one tensor and a
// range of its elements.
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer MTWords { uint64_t w[]; };

struct MT {
  MTWords b;
  int count;
};

MT mt_of(uint64_t addr, int count) { return MT(MTWords(addr), count); }
int64_t mt_first(MT t, int k) { return int64_t(t.b.w[k]); }
int64_t mt_n(MT t, int k) { return int64_t(t.b.w[t.count + 1 + k]); }
uint64_t mt_p(MT t, int k) { return t.b.w[2 * t.count + 1 + k]; }
uint64_t mt_g(MT t, int k) { return t.b.w[3 * t.count + 1 + k]; }
uint64_t mt_m(MT t, int k) { return t.b.w[4 * t.count + 1 + k]; }
uint64_t mt_v(MT t, int k) { return t.b.w[5 * t.count + 1 + k]; }

// The tensor that holds chunk c (first[k] <= c < first[k + 1]), by bisection.
int mt_tensor(MT t, int64_t c) {
  int lo = 0, hi = t.count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (mt_first(t, mid) <= c) lo = mid; else hi = mid - 1;
  }
  return lo;
}
