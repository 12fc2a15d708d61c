/* copy.c — the plain copies into transfer memory: the fill of every
 * unconverted upload, and a copy with non-temporal stores for staging memory
 * that a DMA engine reads next. */
#include <string.h>
#if defined(__x86_64__) || defined(__SSE2__)
#include <emmintrin.h>
#define AG__HAVE_SSE2 1
#endif

#include "base/base.h"

/* ---- plain copies into transfer memory ---- */

void ag__fill_copy(void *host_dst, size_t off, size_t len, void *user) {
  memcpy(host_dst, (const char *)user + off, len);
}

void ag__fill_copy_stream(void *host_dst, size_t off, size_t len, void *user) {
  ag__copy_stream(host_dst, (const char *)user + off, len);
}

/* The whole cache lines of dst are written with non-temporal stores, 64
 * bytes per step from unaligned loads; the partial lines at both ends with
 * memcpy. Short copies are a memcpy: they have no whole line to skip the
 * caches with, and a fence would cost more than it saves. */
void ag__copy_stream(void *dst, const void *src, size_t len) {
#ifdef AG__HAVE_SSE2
  if (len < 256) {
    memcpy(dst, src, len);
    return;
  }
  char *d = (char *)dst;
  const char *s = (const char *)src;
  size_t head = (64 - ((uintptr_t)d & 63)) & 63;
  memcpy(d, s, head);
  d += head;
  s += head;
  len -= head;
  size_t body = len & ~(size_t)63;
  for (size_t i = 0; i < body; i += 64) {
    __m128i a = _mm_loadu_si128((const __m128i *)(s + i));
    __m128i b = _mm_loadu_si128((const __m128i *)(s + i + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(s + i + 32));
    __m128i e = _mm_loadu_si128((const __m128i *)(s + i + 48));
    _mm_stream_si128((__m128i *)(d + i), a);
    _mm_stream_si128((__m128i *)(d + i + 16), b);
    _mm_stream_si128((__m128i *)(d + i + 32), c);
    _mm_stream_si128((__m128i *)(d + i + 48), e);
  }
  memcpy(d + body, s + body, len - body);
  _mm_sfence(); /* the streamed lines are in memory before anyone is told */
#else
  memcpy(dst, src, len);
#endif
}
