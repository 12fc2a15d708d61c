/* cpu_backend.c — the CPU backend: the readable reference for every kernel.
 *
 * Device memory is host memory; the queue is the caller's thread (work runs
 * at once, in call order), so ordering (S6) and deferred release (S9) hold
 * trivially. Every CUDA kernel is tested against the functions here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>

#include "core/internal.h"

static ag_status cpu_open(int index, void **st, char *desc, size_t desc_len) {
  (void)index;
  *st = NULL;
  snprintf(desc, desc_len, "cpu");
  return AG_OK;
}

static void cpu_close(void *st) { (void)st; }

/* MemAvailable from /proc/meminfo (what can be allocated without swapping). */
static int meminfo_available(size_t *avail) {
  FILE *f = fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char line[256];
  int ok = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned long long kb;
    if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
      *avail = (size_t)kb * 1024u;
      ok = 1;
      break;
    }
  }
  fclose(f);
  return ok;
}

static ag_status cpu_mem_info(void *st, size_t *free_bytes, size_t *total_bytes) {
  (void)st;
  struct sysinfo si;
  if (sysinfo(&si) != 0) return ag__fail(AG_ERR_DEVICE, "cpu: sysinfo failed");
  *total_bytes = (size_t)si.totalram * si.mem_unit;
  if (!meminfo_available(free_bytes)) *free_bytes = (size_t)si.freeram * si.mem_unit;
  return AG_OK;
}

static ag_status cpu_alloc(void *st, size_t bytes, void **out) {
  (void)st;
  size_t rounded = (bytes + 255u) & ~(size_t)255u;
  void *p = aligned_alloc(256, rounded ? rounded : 256);
  if (!p) return ag__fail(AG_ERR_OUT_OF_MEMORY, "cpu: could not allocate %.1f MB", AG__MB(bytes));
  *out = p;
  return AG_OK;
}

static void cpu_release(void *st, void *p) {
  (void)st;
  free(p);
}

static ag_status cpu_zero(void *st, void *dst, size_t bytes) {
  (void)st;
  memset(dst, 0, bytes);
  return AG_OK;
}

static ag_status cpu_upload(void *st, void *dst, size_t bytes, ag__fill_fn fill, void *user) {
  (void)st;
  fill(dst, 0, bytes, user);
  return AG_OK;
}

static ag_status cpu_download(void *st, const void *src, size_t bytes, ag__drain_fn drain, void *user) {
  (void)st;
  drain(src, 0, bytes, user);
  return AG_OK;
}

static ag_status cpu_copy(void *st, void *dst, const void *src, size_t bytes) {
  (void)st;
  memmove(dst, src, bytes);
  return AG_OK;
}

static ag_status cpu_sync(void *st) {
  (void)st;
  return AG_OK;
}

static void *cpu_native_stream(void *st) {
  (void)st;
  return NULL;
}

/* ---- kernels ---- */

/* dst [rows, n] f32 = src [rows, capacity] at clamped columns idx [n] */
static ag_status cpu_gather(void *st, const ag__gather_args *a) {
  (void)st;
  for (int64_t j = 0; j < a->n; j++) {
    int64_t c = ag__index_at(a->idx, a->idx_dtype, j);
    c = c < 0 ? 0 : (c >= a->capacity ? a->capacity - 1 : c); /* S13 */
    float *out = a->dst + j * a->rows;
    size_t base = (size_t)c * (size_t)a->rows;
    if (a->src_dtype == AG_F32 && a->scale == 1.0f) {
      memcpy(out, (const float *)a->src + base, (size_t)a->rows * sizeof(float));
    } else {
      for (int64_t r = 0; r < a->rows; r++) out[r] = ag__load_f32(a->src, a->src_dtype, base + (size_t)r) * a->scale;
    }
  }
  return AG_OK;
}

static const ag__backend cpu_backend = {
    .name = "cpu",
    .kind = AG_DEVICE_CPU,
    .open = cpu_open,
    .close = cpu_close,
    .mem_info = cpu_mem_info,
    .alloc = cpu_alloc,
    .release = cpu_release,
    .zero = cpu_zero,
    .upload = cpu_upload,
    .download = cpu_download,
    .copy = cpu_copy,
    .sync = cpu_sync,
    .native_stream = cpu_native_stream,
    .gather = cpu_gather,
};

const ag__backend *ag__cpu_backend(void) { return &cpu_backend; }
