// optim_mt.glsl — the multi-tensor kernels' argument block (k_optim.c's
// mt_block, all 8-byte fields) and the chunk a work group takes.
//
// The tensors' elements are cut into chunks of MT_CHUNK; tensor k's chunks
// are first[k] .. first[k + 1] - 1 and first[count] is the total, so a
// chunk index names one tensor and a range of its elements.
#define MT_MAX 48
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer MT {
  int64_t first[MT_MAX + 1];
  int64_t n[MT_MAX];
  uint64_t p[MT_MAX]; // parameter (AXPBY: y)
  uint64_t g[MT_MAX]; // gradient (AXPBY: x)
  uint64_t m[MT_MAX]; // first moment
  uint64_t v[MT_MAX]; // second moment
};

// The tensor that holds chunk b (first[k] <= b < first[k + 1]), by bisection.
int mt_tensor(MT t, int count, int64_t b) {
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (t.first[mid] <= b) lo = mid; else hi = mid - 1;
  }
  return lo;
}
