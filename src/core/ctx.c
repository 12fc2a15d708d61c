/* ctx.c — contexts: opening a backend, the memory wrappers every core file
 * uses (they count transfers and inject faults), transfer counters, and the
 * device switch (S18).
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
  if (*kind != AG_DEVICE_CUDA)
    return ag__fail(AG_ERR_INVALID_ARG,
                    "%s: device kind %d is not AG_DEVICE_CPU, AG_DEVICE_CUDA or AG_DEVICE_AUTO", fn,
                    (int)*kind);
  int n = ag__device_count(AG_DEVICE_CUDA);
  if (ag__backend_of(AG_DEVICE_CUDA) == NULL)
    return ag__fail(AG_ERR_NO_DEVICE, "%s: this agrl was built without CUDA", fn);
  if (*index < 0 || *index >= n)
    return ag__fail(AG_ERR_NO_DEVICE, "%s: CUDA device %d requested, %d present", fn, *index, n);
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
  const float one = 1.0f;
  if ((s = ag_tensor_create(ctx, 1, 1, AG_F32, &one, &ctx->one))) {
    ag_ctx_free(ctx);
    return s;
  }
  *out = ctx;
  return AG_OK;
}

void ag_ctx_free(ag_ctx *ctx) {
  if (!ctx) return;
  ctx->be->sync(ctx->st);
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
  return ctx->be->sync(ctx->st);
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

/* ---- transfer counters ---- */

void ag__xfer_add(ag_ctx *ctx, const char *op, uint64_t up, uint64_t down) {
  int i;
  for (i = 0; i < ctx->n_xfer; i++)
    if (ctx->xfer[i].op == op || strcmp(ctx->xfer[i].op, op) == 0) break;
  if (i == ctx->n_xfer) {
    if (ctx->n_xfer == AG__XFER_MAX)
      i = AG__XFER_MAX - 1; /* saturate into the last */
    else
      ctx->xfer[ctx->n_xfer++].op = op;
  }
  ag_xfer_entry *e = &ctx->xfer[i];
  e->up_bytes += up;
  e->down_bytes += down;
  e->up_calls += up ? 1 : 0;
  e->down_calls += down ? 1 : 0;
}

void ag_xfer_total(const ag_ctx *ctx, uint64_t *up_bytes, uint64_t *down_bytes) {
  uint64_t u = 0, d = 0;
  for (int i = 0; ctx && i < ctx->n_xfer; i++) {
    u += ctx->xfer[i].up_bytes;
    d += ctx->xfer[i].down_bytes;
  }
  if (up_bytes) *up_bytes = u;
  if (down_bytes) *down_bytes = d;
}

void ag_xfer_get(const ag_ctx *ctx, const char *op, uint64_t *up_bytes, uint64_t *down_bytes) {
  uint64_t u = 0, d = 0;
  for (int i = 0; ctx && op && i < ctx->n_xfer; i++)
    if (strcmp(ctx->xfer[i].op, op) == 0) {
      u = ctx->xfer[i].up_bytes;
      d = ctx->xfer[i].down_bytes;
    }
  if (up_bytes) *up_bytes = u;
  if (down_bytes) *down_bytes = d;
}

int ag_xfer_count(const ag_ctx *ctx) { return ctx ? ctx->n_xfer : 0; }

ag_status ag_xfer_entry_at(const ag_ctx *ctx, int i, ag_xfer_entry *out) {
  if (!ctx || !out) return ag__fail(AG_ERR_INVALID_ARG, "ag_xfer_entry_at: ctx and out must not be NULL");
  if (i < 0 || i >= ctx->n_xfer)
    return ag__fail(AG_ERR_OUT_OF_RANGE, "ag_xfer_entry_at: entry %d requested, %d recorded", i, ctx->n_xfer);
  *out = ctx->xfer[i];
  return AG_OK;
}

void ag_xfer_reset(ag_ctx *ctx) {
  if (!ctx) return;
  for (int i = 0; i < ctx->n_xfer; i++) {
    const char *op = ctx->xfer[i].op;
    memset(&ctx->xfer[i], 0, sizeof ctx->xfer[i]);
    ctx->xfer[i].op = op;
  }
}

void ag_ctx_get_stats(const ag_ctx *ctx, ag_ctx_stats *out) {
  if (!out) return;
  if (!ctx) {
    memset(out, 0, sizeof *out);
    return;
  }
  *out = ctx->stats;
  out->workspace_bytes = ctx->ws_main.total;
}

ag_status ag_ctx_inject_fault(ag_ctx *ctx, ag_fault kind, int64_t after) {
  if ((int)kind < 0 || kind >= AG_FAULT_COUNT_)
    return ag__fail(AG_ERR_INVALID_ARG, "ag_ctx_inject_fault: fault kind %d is unknown", (int)kind);
  if (kind == AG_FAULT_HOST_ALLOC) {
    ag__host_fault_arm(after);
    return AG_OK;
  }
  if (!ctx) return ag__fail(AG_ERR_INVALID_ARG, "ag_ctx_inject_fault: ctx is NULL");
  ctx->fault_after[kind] = after < 0 ? -1 : after;
  return AG_OK;
}

/* True when an injected fault of `kind` fires now. */
static int fault_fires(ag_ctx *ctx, ag_fault kind) {
  int64_t *a = &ctx->fault_after[kind];
  if (*a < 0) return 0;
  if (*a == 0) {
    *a = -1;
    return 1;
  }
  (*a)--;
  return 0;
}

/* ---- memory wrappers ---- */

ag_status ag__mem_alloc(ag_ctx *ctx, const ag__backend *be, size_t bytes, void **out) {
  if (fault_fires(ctx, AG_FAULT_ALLOC))
    return ag__fail(AG_ERR_OUT_OF_MEMORY, "the %s device could not allocate %.1f MB (injected fault)",
                    be->name, AG__MB(bytes));
  void *st = be == ctx->be ? ctx->st : NULL;
  ag_status s = be->alloc(st, bytes, out);
  if (s) return s;
  ctx->stats.allocs++;
  ctx->stats.live_bytes += bytes;
  return AG_OK;
}

void ag__mem_release(ag_ctx *ctx, const ag__backend *be, void *p, size_t bytes) {
  if (!p) return;
  be->release(be == ctx->be ? ctx->st : NULL, p);
  ctx->stats.frees++;
  ctx->stats.live_bytes -= bytes;
}

ag_status ag__run(ag_ctx *ctx, ag__kernel_id id, const void *args, size_t size) {
  ctx->stats.kernels++;
  return ctx->be->run(ctx->st, id, args, size);
}

ag_status ag__not_recording(ag_ctx *ctx, const char *fn) {
  if (!ctx->recording) return AG_OK;
  return ag__fail(AG_ERR_STATE,
                  "%s: not allowed while a step is being recorded (a recording moves no host data and "
                  "never waits; give inputs as device tensors written before ag_capture_replay)",
                  fn);
}

ag_status ag__mem_upload(ag_ctx *ctx, const char *op, void *dst, size_t bytes, ag__fill_fn fill, void *user) {
  ag_status rs = ag__not_recording(ctx, op);
  if (rs) return rs;
  if (fault_fires(ctx, AG_FAULT_UPLOAD))
    return ag__fail(AG_ERR_DEVICE, "%s: upload of %zu bytes failed (injected fault)", op, bytes);
  ag_status s = ctx->be->upload(ctx->st, dst, bytes, fill, user);
  if (s == AG_OK) ag__xfer_add(ctx, op, bytes, 0);
  return s;
}

ag_status ag__mem_upload_parts(ag_ctx *ctx, const char *op, const ag__upload_part *parts, int n,
                               int *landed) {
  if (landed) *landed = 0;
  ag_status s = ag__not_recording(ctx, op);
  if (s) return s;
  size_t total = 0;
  for (int i = 0; i < n; i++) total += parts[i].bytes;
  if (fault_fires(ctx, AG_FAULT_UPLOAD))
    return ag__fail(AG_ERR_DEVICE, "%s: upload of %zu bytes failed (injected fault)", op, total);
  for (int i = 0; i < n; i++) {
    if (parts[i].bytes == 0) continue;
    if ((s = ctx->be->upload(ctx->st, parts[i].dst, parts[i].bytes, parts[i].fill, parts[i].user))) return s;
    ag__xfer_add(ctx, op, parts[i].bytes, 0);
    if (landed) *landed = i + 1;
  }
  return AG_OK;
}

ag_status ag__mem_upload_copy(ag_ctx *ctx, const char *op, void *dst, const void *src, size_t bytes) {
  return ag__mem_upload(ctx, op, dst, bytes, ag__fill_copy, (void *)src);
}

ag_status ag__mem_download(ag_ctx *ctx, const char *op, const void *src, size_t bytes, ag__drain_fn drain,
                           void *user) {
  ag_status rs = ag__not_recording(ctx, op);
  if (rs) return rs;
  if (fault_fires(ctx, AG_FAULT_DOWNLOAD))
    return ag__fail(AG_ERR_DEVICE, "%s: download of %zu bytes failed (injected fault)", op, bytes);
  ctx->stats.syncs++;
  ag_status s = ctx->be->download(ctx->st, src, bytes, drain, user);
  if (s == AG_OK) ag__xfer_add(ctx, op, 0, bytes);
  return s;
}

static void drain_copy(const void *host_src, size_t off, size_t len, void *user) {
  memcpy((char *)user + off, host_src, len);
}

ag_status ag__mem_download_copy(ag_ctx *ctx, const char *op, void *dst, const void *src, size_t bytes) {
  return ag__mem_download(ctx, op, src, bytes, drain_copy, dst);
}
