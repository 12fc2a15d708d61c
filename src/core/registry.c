/* registry.c — the backends this build has, by device kind: one row each. */
#include "core/internal.h"

typedef struct backend_row {
  ag_device_kind kind;
  const char *name;                /* in messages */
  const ag__backend *(*get)(void); /* NULL when not built */
  int (*count)(void);
  const ag__handoff_ops *(*handoff)(void);
} backend_row;

static int one(void) { return 1; }
static const ag__handoff_ops *no_handoff(void) { return NULL; }

static const backend_row rows[] = {
    {AG_DEVICE_CPU, "CPU", ag__cpu_backend, one, ag__cpu_handoff},
    {AG_DEVICE_CUDA, "CUDA", ag__cuda_backend, ag__cuda_device_count, ag__cuda_handoff},
    {AG_DEVICE_VULKAN, "Vulkan", ag__vulkan_backend, ag__vulkan_device_count, no_handoff},
};

static const backend_row *row_of(ag_device_kind kind) {
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
    if (rows[i].kind == kind) return &rows[i];
  return NULL;
}

const ag__backend *ag__backend_of(ag_device_kind kind) {
  const backend_row *r = row_of(kind);
  return r ? r->get() : NULL;
}

const char *ag__device_kind_name(ag_device_kind kind) {
  const backend_row *r = row_of(kind);
  return r ? r->name : NULL;
}

int ag_device_count(ag_device_kind kind) { return ag__device_count(kind); }

int ag__device_count(ag_device_kind kind) {
  const backend_row *r = row_of(kind);
  return r && r->get() ? r->count() : 0;
}

const ag__handoff_ops *ag__handoff_of(ag_device_kind kind) {
  const backend_row *r = row_of(kind);
  return r && r->get() ? r->handoff() : NULL;
}

const ag__backend *ag__host_backend(void) { return ag__cpu_backend(); }

int ag__kernel_supported(ag_ctx *ctx, ag__kernel_id id, const void *args, size_t size) {
  return !ctx->be->supports || ctx->be->supports(ctx->st, id, args, size);
}

size_t ag__kernel_scratch(ag_ctx *ctx, ag__kernel_id id, const void *args, size_t size) {
  return ctx->be->scratch ? ctx->be->scratch(ctx->st, id, args, size) : 0;
}

size_t ag__kernel_scratch_max(ag__kernel_id id, const void *args, size_t size) {
  size_t most = 0;
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    const ag__backend *be = rows[i].get();
    size_t n = be && be->scratch ? be->scratch(NULL, id, args, size) : 0;
    most = n > most ? n : most;
  }
  return most;
}
