/* snapshot.c — copies of persistent tensors kept on the device, so that a
 * call that changes several of them in steps (a run of recorded updates)
 * can put them back when a later step fails. */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

void ag__snapshot_free(ag__snapshot *sn) {
  for (int i = 0; i < sn->n; i++) ag_tensor_free(sn->copy[i]);
  free(sn->copy);
  free(sn->src);
  memset(sn, 0, sizeof *sn);
}

/* Whether the copies fit the tensors (same list, same shapes). */
static int matches(const ag__snapshot *sn, ag_tensor *const *ts, int n) {
  if (sn->n != n) return 0;
  for (int i = 0; i < n; i++)
    if (sn->src[i] != ts[i] || sn->copy[i]->store.bytes != ts[i]->store.bytes) return 0;
  return 1;
}

ag_status ag__snapshot_take(ag__snapshot *sn, ag_tensor *const *ts, int n, const char *fn) {
  if (n < 1) return AG_OK;
  ag_ctx *ctx = ts[0]->ctx;
  ag_status s;
  if (!matches(sn, ts, n)) {
    ag__snapshot fresh = {0, NULL, NULL};
    fresh.src = ag__malloc((size_t)n * sizeof *fresh.src);
    fresh.copy = ag__calloc((size_t)n, sizeof *fresh.copy);
    s = fresh.src && fresh.copy ? AG_OK : ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    for (int i = 0; i < n && !s; i++) {
      if (!(ts[i]->flags & AG__T_PERSISTENT)) {
        s = ag__fail(AG_ERR_INVALID_ARG, "%s: only persistent tensors can be kept", fn);
        break;
      }
      fresh.src[i] = ts[i];
      s = ag_tensor_create(ctx, ts[i]->rows, ts[i]->cols, ts[i]->dtype, NULL, &fresh.copy[i]);
      if (!s) fresh.n = i + 1;
    }
    if (s) {
      if (!fresh.src || !fresh.copy) fresh.n = 0;
      ag__snapshot_free(&fresh);
      return s;
    }
    ag__snapshot_free(sn);
    *sn = fresh;
  }
  /* every tensor resident first: past this loop only the device can fail */
  for (int i = 0; i < n; i++) {
    if ((s = ag__store_ensure(ctx, &ts[i]->store)) || (s = ag__store_ensure(ctx, &sn->copy[i]->store)))
      return s;
  }
  for (int i = 0; i < n; i++)
    if ((s = ctx->be->copy(ctx->st, sn->copy[i]->store.ptr, ts[i]->store.ptr, ts[i]->store.bytes))) return s;
  return AG_OK;
}

ag_status ag__snapshot_restore(ag__snapshot *sn) {
  if (sn->n < 1) return AG_OK;
  ag_ctx *ctx = sn->src[0]->ctx;
  ag_status s;
  for (int i = 0; i < sn->n; i++)
    if ((s = ag__store_ensure(ctx, &sn->src[i]->store)) || (s = ag__store_ensure(ctx, &sn->copy[i]->store)))
      return s;
  for (int i = 0; i < sn->n; i++)
    if ((s = ctx->be->copy(ctx->st, sn->src[i]->store.ptr, sn->copy[i]->store.ptr, sn->src[i]->store.bytes)))
      return s;
  return AG_OK;
}
