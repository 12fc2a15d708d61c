/* workspace.c — memory for temporary tensors (results of operations).
 *
 * A bump arena of device memory in chunks, and slabs of tensor headers.
 * ag_ctx_reset() rewinds both; when the arena needed several chunks, they are
 * merged into one of the total size, so that a steady loop (one step, reset,
 * the next step) allocates nothing after its first pass.
 */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

#define AG__WS_ALIGN 256u
#define AG__WS_MIN_CHUNK ((size_t)1 << 20)

static size_t align_up(size_t n) { return (n + AG__WS_ALIGN - 1) & ~(size_t)(AG__WS_ALIGN - 1); }

static ag_status add_chunk(ag_ctx *ctx, size_t size) {
  ag__arena *a = &ctx->ws;
  if (a->n_chunks == a->cap_chunks) {
    int cap = a->cap_chunks ? 2 * a->cap_chunks : 4;
    ag__chunk *c = realloc(a->chunks, (size_t)cap * sizeof *c);
    if (!c) return ag__fail(AG_ERR_OUT_OF_MEMORY, "workspace: out of host memory");
    a->chunks = c;
    a->cap_chunks = cap;
  }
  void *p = NULL;
  ag_status s = ag__mem_alloc(ctx, ctx->be, size, &p);
  if (s) {
    char why[512];
    strncpy(why, ag_last_error(), sizeof why - 1);
    why[sizeof why - 1] = '\0';
    return ag__fail(s, "workspace: the device (%s) could not allocate %.1f MB for temporary tensors: %s",
                    ctx->desc, AG__MB(size), why);
  }
  a->chunks[a->n_chunks].ptr = p;
  a->chunks[a->n_chunks].size = size;
  a->n_chunks++;
  a->total += size;
  return AG_OK;
}

ag_status ag__ws_alloc(ag_ctx *ctx, size_t bytes, void **out) {
  ag__arena *a = &ctx->ws;
  size_t need = align_up(bytes ? bytes : 1);
  while (a->cur < a->n_chunks) {
    ag__chunk *c = &a->chunks[a->cur];
    if (c->size - a->used >= need) {
      *out = (char *)c->ptr + a->used;
      a->used += need;
      return AG_OK;
    }
    a->cur++;
    a->used = 0;
  }
  size_t size = a->total > AG__WS_MIN_CHUNK ? a->total : AG__WS_MIN_CHUNK;
  if (size < need) size = need;
  ag_status s = add_chunk(ctx, size);
  if (s) return s; /* cur == n_chunks: the next call tries to grow again */
  a->cur = a->n_chunks - 1;
  *out = a->chunks[a->cur].ptr;
  a->used = need;
  return AG_OK;
}

static void release_chunks(ag_ctx *ctx) {
  ag__arena *a = &ctx->ws;
  for (int i = 0; i < a->n_chunks; i++) ag__mem_release(ctx, ctx->be, a->chunks[i].ptr, a->chunks[i].size);
  a->n_chunks = 0;
  a->total = 0;
  a->cur = 0;
  a->used = 0;
}

static void retire_headers(ag_ctx *ctx) {
  for (ag__tensor_slab *sl = ctx->slabs; sl; sl = sl->next) {
    int n = sl == ctx->slab_cur ? ctx->slab_used : AG__TENSOR_SLAB;
    for (int i = 0; i < n; i++) sl->items[i].flags = AG__T_FREED;
    if (sl == ctx->slab_cur) break;
  }
  ctx->slab_cur = ctx->slabs;
  ctx->slab_used = 0;
}

void ag__ws_reset(ag_ctx *ctx) {
  ag__arena *a = &ctx->ws;
  retire_headers(ctx);
  if (a->n_chunks > 1) {
    size_t total = a->total;
    release_chunks(ctx);
    (void)add_chunk(ctx, total); /* on failure the next alloc grows again */
  }
  a->cur = 0;
  a->used = 0;
}

void ag__ws_destroy(ag_ctx *ctx) {
  retire_headers(ctx);
  release_chunks(ctx);
  free(ctx->ws.chunks);
  memset(&ctx->ws, 0, sizeof ctx->ws);
  for (ag__tensor_slab *sl = ctx->slabs; sl;) {
    ag__tensor_slab *next = sl->next;
    free(sl->items);
    free(sl);
    sl = next;
  }
  ctx->slabs = ctx->slab_cur = NULL;
  ctx->slab_used = 0;
}

/* A zeroed header from the slabs, or NULL when host memory runs out. */
static ag_tensor *new_header(ag_ctx *ctx) {
  if (!ctx->slab_cur || ctx->slab_used == AG__TENSOR_SLAB) {
    ag__tensor_slab *next = ctx->slab_cur ? ctx->slab_cur->next : ctx->slabs;
    if (!next) {
      next = calloc(1, sizeof *next);
      if (next) next->items = calloc(AG__TENSOR_SLAB, sizeof *next->items);
      if (!next || !next->items) {
        free(next);
        return NULL;
      }
      if (ctx->slab_cur) ctx->slab_cur->next = next;
      else ctx->slabs = next;
    }
    ctx->slab_cur = next;
    ctx->slab_used = 0;
  }
  ag_tensor *t = &ctx->slab_cur->items[ctx->slab_used++];
  memset(t, 0, sizeof *t);
  return t;
}

ag_status ag__tensor_temp(ag_ctx *ctx, int64_t rows, int64_t cols, ag_dtype dtype, ag_tensor **out) {
  size_t bytes;
  if (!ag__mul3((uint64_t)rows, (uint64_t)cols, ag_dtype_size(dtype), &bytes))
    return ag__fail(AG_ERR_OUT_OF_MEMORY, "workspace: a %lld x %lld tensor does not fit in memory",
                    (long long)rows, (long long)cols);
  void *p = NULL;
  ag_status s = ag__ws_alloc(ctx, bytes, &p);
  if (s) return s;
  ag_tensor *t = new_header(ctx);
  if (!t) /* the arena bytes are reclaimed at the next reset */
    return ag__fail(AG_ERR_OUT_OF_MEMORY, "workspace: out of host memory for tensor headers");
  t->ctx = ctx;
  t->rows = rows;
  t->cols = cols;
  t->dtype = dtype;
  t->data = p;
  *out = t;
  return AG_OK;
}

ag_status ag__check_tensor(const ag_tensor *t, const char *fn, const char *what) {
  if (!t) return ag__fail(AG_ERR_INVALID_ARG, "%s: %s is NULL", fn, what);
  if (t->flags & AG__T_FREED)
    return ag__fail(AG_ERR_FREED, "%s: %s has been freed (or its workspace was reset)", fn, what);
  return AG_OK;
}

ag_status ag__tensor_ptr(ag_tensor *t, void **out) {
  if (t->flags & AG__T_PERSISTENT) {
    ag_status s = ag__store_ensure(t->ctx, &t->store);
    if (s) return s;
    *out = t->store.ptr;
  } else {
    *out = t->data;
  }
  return AG_OK;
}
