/* ctx.c — contexts: creating one on a device of the registry, freeing it,
 * its queue, host memory and workspace reset, and the device switch (S18).
 * The memory wrappers, the kernel call and the counters are in memory.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

int ag_cuda_device_count(void) { return ag__device_count(AG_DEVICE_CUDA); }

/* Resolves AUTO and checks that the device exists. */
static ag_status resolve_device(const char *fn, ag_device_kind *kind, int *index) {
  if (*kind == AG_DEVICE_AUTO) {
    *kind = ag__device_count(AG_DEVICE_CUDA) > 0 ? AG_DEVICE_CUDA : AG_DEVICE_CPU;
    if (*kind == AG_DEVICE_CPU) *index = 0;
  }
  if (*kind == AG_DEVICE_CPU) {
    *index = 0;
    return AG_OK;
  }
  const char *name = ag__device_kind_name(*kind);
  if (!name || *kind == AG_DEVICE_AUTO)
    return ag__fail(
        AG_ERR_INVALID_ARG,
        "%s: device kind %d is not AG_DEVICE_CPU, AG_DEVICE_CUDA, AG_DEVICE_VULKAN or AG_DEVICE_AUTO", fn,
        (int)*kind);
  if (ag__backend_of(*kind) == NULL)
    return ag__fail(AG_ERR_NO_DEVICE, "%s: this agrl was built without %s", fn, name);
  const int n = ag__device_count(*kind);
  if (*index < 0 || *index >= n)
    return ag__fail(AG_ERR_NO_DEVICE, "%s: %s device %d requested, %d present", fn, name, *index, n);
  return AG_OK;
}

ag_status ag_ctx_create(ag_ctx **out, ag_device_kind kind, int index) {
  if (!out) return ag__fail(AG_ERR_INVALID_ARG, "ag_ctx_create: out is NULL");
  ag_status s = resolve_device("ag_ctx_create", &kind, &index);
  if (s) return s;
  ag_ctx *ctx = ag__calloc(1, sizeof *ctx);
  if (!ctx) return ag__fail(AG_ERR_OUT_OF_MEMORY, "ag_ctx_create: out of host memory");
  ctx->be = ag__backend_of(kind);
  s = ctx->be->open(index, &ctx->st, ctx->desc, sizeof ctx->desc);
  if (s) {
    free(ctx);
    return s;
  }
  ctx->kind = kind;
  ctx->index = index;
  ctx->stores.next = ctx->stores.prev = &ctx->stores;
  ctx->ws = &ctx->ws_main;
  for (int i = 0; i < AG_FAULT_COUNT_; i++) ctx->fault_after[i] = -1;
  *out = ctx;
  return AG_OK;
}

void ag_ctx_free(ag_ctx *ctx) {
  if (!ctx) return;
  ctx->be->sync(ctx->st);
  ag__blocks_leave(ctx);
  if (ctx->hooks) ctx->hooks->free_all(ctx);
  /* owners of live stores: persistent tensors are freed with their header */
  while (ctx->stores.next != &ctx->stores) {
    ag__store *s = ctx->stores.next;
    if (s->owner_kind == AG__OWNER_TENSOR) {
      ag_tensor *t = (ag_tensor *)s->owner;
      ag_tensor_free(t->flags & AG__T_IS_GRAD ? t->base : t); /* a gradient goes with its tensor */
    } else {
      ag_buffer_free((ag_buffer *)s->owner);
    }
  }
  for (ag_buffer *b = ctx->handles; b;) {
    ag_buffer *next = b->next_handle;
    free(b);
    b = next;
  }
  ag__ws_destroy(ctx, &ctx->ws_main);
  ctx->be->close(ctx->st);
  free(ctx);
}

ag_device_kind ag_ctx_device(const ag_ctx *ctx) { return ctx ? ctx->kind : AG_DEVICE_CPU; }
int ag_ctx_device_index(const ag_ctx *ctx) { return ctx ? ctx->index : 0; }
const char *ag_ctx_device_name(const ag_ctx *ctx) { return ctx ? ctx->desc : "(null)"; }
void *ag_ctx_native_stream(const ag_ctx *ctx) { return ctx ? ctx->be->native_stream(ctx->st) : NULL; }

ag_status ag_ctx_sync(ag_ctx *ctx) {
  if (!ctx) return ag__fail(AG_ERR_INVALID_ARG, "ag_ctx_sync: ctx is NULL");
  ag_status s = ag__not_recording(ctx, "ag_ctx_sync");
  if (s) return s;
  ctx->stats.syncs++;
  s = ctx->be->sync(ctx->st);
  if (!s) ag__deferred_run(ctx, 1);
  return s;
}

ag_status ag_host_alloc(ag_ctx *ctx, size_t bytes, void **out) {
  if (!ctx || !out) return ag__fail(AG_ERR_INVALID_ARG, "ag_host_alloc: ctx and out must not be NULL");
  if (bytes == 0) return ag__fail(AG_ERR_INVALID_ARG, "ag_host_alloc: bytes = 0");
  size_t avail = 0, total = 0; /* more than the machine has is refused without asking the driver */
  if (ag__host_backend()->mem_info(NULL, &avail, &total) == AG_OK && bytes > total)
    return ag__fail(AG_ERR_OUT_OF_MEMORY,
                    "ag_host_alloc: %zu bytes (%.1f MB) is more than the host's %.1f MB of memory", bytes,
                    AG__MB(bytes), AG__MB(total));
  void *p = NULL;
  ag_status s = ctx->be->host_alloc(ctx->st, bytes, &p);
  if (s) {
    char why[512];
    snprintf(why, sizeof why, "%s", ag_last_error());
    return ag__fail(s, "ag_host_alloc: %zu bytes (%.1f MB) could not be allocated: %s", bytes, AG__MB(bytes),
                    why);
  }
  *out = p;
  return AG_OK;
}

void ag_host_free(ag_ctx *ctx, void *p) {
  if (ctx && p) ctx->be->host_free(ctx->st, p);
}

void ag_ctx_reset(ag_ctx *ctx) {
  if (ctx && !ctx->recording) ag__ws_reset(ctx, &ctx->ws_main);
}

ag_status ag_ctx_mem_info(ag_ctx *ctx, size_t *free_bytes, size_t *total_bytes) {
  if (!ctx || !free_bytes || !total_bytes)
    return ag__fail(AG_ERR_INVALID_ARG, "ag_ctx_mem_info: ctx, free_bytes and total_bytes must not be NULL");
  ag_status s = ag__not_recording(ctx, "ag_ctx_mem_info");
  if (s) return s;
  return ctx->be->mem_info(ctx->st, free_bytes, total_bytes);
}

ag_status ag_ctx_set_device(ag_ctx *ctx, ag_device_kind kind, int index) {
  if (!ctx) return ag__fail(AG_ERR_INVALID_ARG, "ag_ctx_set_device: ctx is NULL");
  ag_status s = resolve_device("ag_ctx_set_device", &kind, &index);
  if (s) return s;
  if ((s = ag__not_recording(ctx, "ag_ctx_set_device"))) return s;
  if (kind == ctx->kind && index == ctx->index) return AG_OK;

  /* open the new device first: if that fails, nothing has changed */
  const ag__backend *nbe = ag__backend_of(kind);
  void *nst = NULL;
  char ndesc[sizeof ctx->desc];
  s = nbe->open(index, &nst, ndesc, sizeof ndesc);
  if (s) return s;

  /* every resident value to the host; all or nothing */
  s = ag__stores_rescue(ctx);
  if (s) {
    nbe->close(nst);
    return s;
  }
  if (ctx->hooks) ctx->hooks->release_backend(ctx); /* recordings are made anew on the new device */
  ctx->be->sync(ctx->st);
  ag__blocks_leave(ctx); /* blocks handed out stay valid on the old device */
  ag__ws_destroy(ctx, &ctx->ws_main);
  ctx->be->close(ctx->st);
  ctx->epoch++;
  ctx->be = nbe;
  ctx->st = nst;
  ctx->kind = kind;
  ctx->index = index;
  memcpy(ctx->desc, ndesc, sizeof ndesc);
  /* the host copies are resident on the CPU; a device uploads them at next use */
  return AG_OK;
}
