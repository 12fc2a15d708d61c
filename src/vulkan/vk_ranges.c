/* vk_ranges.c — the free ranges of one block of device memory.
 *
 * The free ranges are kept sorted by offset, disjoint and never touching
 * (a range given back merges with the free neighbours it touches). Between
 * two free ranges lies at least one range in use, so there are at most
 * `taken + 1` of them: a take first makes room for `taken + 2` entries (the
 * most after it), and a give never needs memory. A take is first-fit. */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "vulkan/vk_internal.h"

ag_status ag__vk_ranges_init(ag__vk_ranges *r, uint64_t start, uint64_t size) {
  memset(r, 0, sizeof *r);
  r->at = ag__malloc(4 * sizeof *r->at);
  if (!r->at) return ag__fail(AG_ERR_OUT_OF_MEMORY, "vulkan: out of host memory");
  r->cap = 4;
  r->start = start, r->size = size;
  if (size) r->at[r->n++] = (ag__vk_range){start, size};
  return AG_OK;
}

void ag__vk_ranges_free(ag__vk_ranges *r) {
  free(r->at);
  memset(r, 0, sizeof *r);
}

ag_status ag__vk_ranges_take(ag__vk_ranges *r, uint64_t bytes, uint64_t align, uint64_t *off) {
  if (!bytes || !align || (align & (align - 1)))
    return ag__fail(AG_ERR_INVALID_ARG, "vulkan: a range of %llu bytes aligned to %llu",
                    (unsigned long long)bytes, (unsigned long long)align);
  size_t i = 0;
  uint64_t a = 0;
  for (; i < r->n; i++) { /* the first range that holds `bytes` from an aligned offset */
    const ag__vk_range *f = &r->at[i];
    a = (f->off + align - 1) & ~(align - 1);
    if (a >= f->off && a - f->off <= f->len && f->len - (a - f->off) >= bytes) break;
  }
  if (i == r->n) return AG_ERR_OUT_OF_RANGE; /* no room: the caller decides what to say */
  if (r->cap < r->taken + 2) {
    const size_t cap = 2 * (r->taken + 2);
    ag__vk_range *m = ag__realloc(r->at, cap * sizeof *m);
    if (!m) return ag__fail(AG_ERR_OUT_OF_MEMORY, "vulkan: out of host memory");
    r->at = m, r->cap = cap;
  }
  const ag__vk_range f = r->at[i];
  const ag__vk_range before = {f.off, a - f.off}, after = {a + bytes, f.off + f.len - (a + bytes)};
  const size_t keep = (before.len > 0) + (after.len > 0);
  memmove(&r->at[i + keep], &r->at[i + 1], (r->n - i - 1) * sizeof *r->at);
  r->n = r->n - 1 + keep;
  size_t k = i;
  if (before.len) r->at[k++] = before;
  if (after.len) r->at[k] = after;
  r->taken++;
  r->used += bytes;
  *off = a;
  return AG_OK;
}

void ag__vk_ranges_give(ag__vk_ranges *r, uint64_t off, uint64_t bytes) {
  size_t lo = 0, hi = r->n;
  while (lo < hi) { /* the first free range after off */
    const size_t mid = lo + (hi - lo) / 2;
    if (r->at[mid].off < off)
      lo = mid + 1;
    else
      hi = mid;
  }
  const int left = lo > 0 && r->at[lo - 1].off + r->at[lo - 1].len == off;
  const int right = lo < r->n && off + bytes == r->at[lo].off;
  if (left && right) { /* it joins its two neighbours */
    r->at[lo - 1].len += bytes + r->at[lo].len;
    memmove(&r->at[lo], &r->at[lo + 1], (r->n - lo - 1) * sizeof *r->at);
    r->n--;
  } else if (left) {
    r->at[lo - 1].len += bytes;
  } else if (right) {
    r->at[lo].off = off, r->at[lo].len += bytes;
  } else { /* room is there: see the header */
    memmove(&r->at[lo + 1], &r->at[lo], (r->n - lo) * sizeof *r->at);
    r->at[lo] = (ag__vk_range){off, bytes};
    r->n++;
  }
  r->taken--;
  r->used -= bytes;
}
