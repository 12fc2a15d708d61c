/* memory.c — what every core call that touches a device goes through: the
 * counted memory wrappers (allocations, uploads, downloads, with the
 * injectable faults), the kernel call, the transfer counters and the
 * context's statistics. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

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
int ag__fault_fires(ag_ctx *ctx, ag_fault kind) {
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
  if (ag__fault_fires(ctx, AG_FAULT_ALLOC))
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
  if (ag__fault_fires(ctx, AG_FAULT_UPLOAD))
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
  if (ag__fault_fires(ctx, AG_FAULT_UPLOAD))
    return ag__fail(AG_ERR_DEVICE, "%s: upload of %zu bytes failed (injected fault)", op, total);
  for (int i = 0; i < n; i++) {
    if (parts[i].bytes == 0) continue;
    if ((s = ctx->be->upload(ctx->st, parts[i].dst, parts[i].bytes, parts[i].fill, parts[i].user))) return s;
    ag__xfer_add(ctx, op, parts[i].bytes, 0);
    if (landed) *landed = i + 1;
  }
  return AG_OK;
}

ag_status ag__mem_stage(ag_ctx *ctx, const char *op, size_t bytes, ag__fill_fn fill, void *user, void **dev) {
  ag_status s = ag__not_recording(ctx, op);
  if (s) return s;
  if (bytes == 0 || bytes > AG__STAGE_MAX)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: %zu bytes of inputs (1 to %zu)", op, bytes,
                    (size_t)AG__STAGE_MAX);
  if (!ctx->be->stage) return AG_ERR_UNSUPPORTED;
  if (ag__fault_fires(ctx, AG_FAULT_UPLOAD))
    return ag__fail(AG_ERR_DEVICE, "%s: upload of %zu bytes failed (injected fault)", op, bytes);
  if ((s = ctx->be->stage(ctx->st, bytes, fill, user, dev)) == AG_ERR_UNSUPPORTED) {
    ag_clear_error(); /* the memory is not mapped: the caller uploads */
    return s;
  }
  if (!s) ag__xfer_add(ctx, op, bytes, 0);
  return s;
}

ag_status ag__mem_stage_done(ag_ctx *ctx) {
  return ctx->be->stage_done ? ctx->be->stage_done(ctx->st) : AG_OK;
}

ag_status ag__mem_upload_copy(ag_ctx *ctx, const char *op, void *dst, const void *src, size_t bytes) {
  return ag__mem_upload(ctx, op, dst, bytes, ag__fill_copy, (void *)src);
}

ag_status ag__mem_download(ag_ctx *ctx, const char *op, const void *src, size_t bytes, ag__drain_fn drain,
                           void *user) {
  ag_status rs = ag__not_recording(ctx, op);
  if (rs) return rs;
  if (ag__fault_fires(ctx, AG_FAULT_DOWNLOAD))
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
