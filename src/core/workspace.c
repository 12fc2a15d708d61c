/* workspace.c — memory for temporary tensors (results of operations) and
 * the autograd tape.
 *
 * A workspace is a bump arena of device memory in chunks, slabs of tensor
 * headers and the tape. ag_ctx_reset() rewinds the context's workspace; when
 * the arena needed several chunks they are merged into one of the total size,
 * so a steady loop (a step, reset, the next step) allocates nothing after its
 * first pass. A recording owns a workspace of its own (ctx->ws points to it
 * while it records), allocated outside the stream order, whose addresses the
 * recorded kernels keep.
 */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

#define AG__WS_ALIGN 256u
#define AG__WS_MIN_CHUNK ((size_t)1 << 20)

static size_t align_up(size_t n) { return (n + AG__WS_ALIGN - 1) & ~(size_t)(AG__WS_ALIGN - 1); }

static ag_status add_chunk(ag_ctx *ctx, ag__workspace *ws, size_t size) {
  if (ws->n_chunks == ws->cap_chunks) {
    int cap = ws->cap_chunks ? 2 * ws->cap_chunks : 4;
    ag__chunk *c = ag__realloc(ws->chunks, (size_t)cap * sizeof *c);
    if (!c) return ag__fail(AG_ERR_OUT_OF_MEMORY, "workspace: out of host memory");
    ws->chunks = c;
    ws->cap_chunks = cap;
  }
  void *p = NULL;
  ag_status s =
      ws->is_static ? ctx->be->alloc_static(ctx->st, size, &p) : ag__mem_alloc(ctx, ctx->be, size, &p);
  if (s) {
    char why[512];
    strncpy(why, ag_last_error(), sizeof why - 1);
    why[sizeof why - 1] = '\0';
    return ag__fail(s, "workspace: the device (%s) could not allocate %.1f MB for temporary tensors: %s",
                    ctx->desc, AG__MB(size), why);
  }
  if (ws->is_static) ctx->stats.allocs++;
  ws->chunks[ws->n_chunks].ptr = p;
  ws->chunks[ws->n_chunks].size = size;
  ws->n_chunks++;
  ws->total += size;
  return AG_OK;
}

ag_status ag__ws_alloc(ag_ctx *ctx, size_t bytes, void **out) {
  if (ctx->use_block && ctx->ws == &ctx->ws_main) return ag__block_carve(ctx, bytes, out);
  ag__workspace *ws = ctx->ws;
  size_t need = align_up(bytes ? bytes : 1);
  while (ws->cur < ws->n_chunks) {
    ag__chunk *c = &ws->chunks[ws->cur];
    if (c->size - ws->used >= need) {
      *out = (char *)c->ptr + ws->used;
      ws->used += need;
      return AG_OK;
    }
    ws->cur++;
    ws->used = 0;
  }
  size_t size = ws->total > AG__WS_MIN_CHUNK ? ws->total : AG__WS_MIN_CHUNK;
  if (size < need) size = need;
  ag_status s = add_chunk(ctx, ws, size);
  if (s) return s; /* cur == n_chunks: the next call tries to grow again */
  ws->cur = ws->n_chunks - 1;
  *out = ws->chunks[ws->cur].ptr;
  ws->used = need;
  return AG_OK;
}

static void release_chunks(ag_ctx *ctx, ag__workspace *ws) {
  for (int i = 0; i < ws->n_chunks; i++) {
    if (ws->is_static) {
      ctx->be->release_static(ctx->st, ws->chunks[i].ptr);
      ctx->stats.frees++;
    } else {
      ag__mem_release(ctx, ctx->be, ws->chunks[i].ptr, ws->chunks[i].size);
    }
  }
  ws->n_chunks = 0;
  ws->total = 0;
  ws->cur = 0;
  ws->used = 0;
}

static void retire_headers(ag__workspace *ws) {
  for (ag__tensor_slab *sl = ws->slabs; sl; sl = sl->next) {
    int n = sl == ws->slab_cur ? ws->slab_used : AG__TENSOR_SLAB;
    for (int i = 0; i < n; i++) sl->items[i].flags = AG__T_FREED;
    if (sl == ws->slab_cur) break;
  }
  ws->slab_cur = ws->slabs;
  ws->slab_used = 0;
  ws->n_tape = 0;
}

void ag__ws_reset(ag_ctx *ctx, ag__workspace *ws) {
  retire_headers(ws);
  if (ws->n_chunks > 1) {
    size_t total = ws->total;
    release_chunks(ctx, ws);
    (void)add_chunk(ctx, ws, total); /* on failure the next alloc grows again */
  }
  ws->cur = 0;
  ws->used = 0;
}

void ag__ws_rewind(ag__workspace *ws) {
  retire_headers(ws);
  ws->cur = 0;
  ws->used = 0;
}

void ag__ws_destroy(ag_ctx *ctx, ag__workspace *ws) {
  retire_headers(ws);
  release_chunks(ctx, ws);
  free(ws->chunks);
  for (ag__tensor_slab *sl = ws->slabs; sl;) {
    ag__tensor_slab *next = sl->next;
    free(sl->items);
    free(sl);
    sl = next;
  }
  free(ws->tape);
  int is_static = ws->is_static;
  memset(ws, 0, sizeof *ws);
  ws->is_static = is_static;
}

int ag__tape_push(ag_ctx *ctx, const ag__node *n) {
  ag__workspace *ws = ctx->ws;
  if (ws->n_tape == ws->cap_tape) {
    int cap = ws->cap_tape ? 2 * ws->cap_tape : 64;
    ag__node *t = ag__realloc(ws->tape, (size_t)cap * sizeof *t);
    if (!t) return -1;
    ws->tape = t;
    ws->cap_tape = cap;
  }
  ws->tape[ws->n_tape] = *n;
  return ws->n_tape++;
}

ag_status ag__tensor_temp(ag_ctx *ctx, int64_t rows, int64_t cols, ag_dtype dtype, ag_tensor **out) {
  size_t bytes;
  if (!ag__mul3((uint64_t)rows, (uint64_t)cols, ag_dtype_size(dtype), &bytes))
    return ag__fail(AG_ERR_OUT_OF_MEMORY, "workspace: a %lld x %lld tensor does not fit in memory",
                    (long long)rows, (long long)cols);
  void *p = NULL;
  ag_status s = ag__ws_alloc(ctx, bytes, &p);
  if (s) return s; /* the arena bytes of a failed call are reclaimed at the next reset */
  return ag__tensor_view(ctx, rows, cols, rows, dtype, p, out);
}
