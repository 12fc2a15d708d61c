/* export.c — blocks (memory that outlives the workspace and the context,
 * for results other frameworks hold), tensors over foreign memory, stream
 * ordering with other queues, and calls deferred until the queue is past.
 *
 * A context keeps a pool of released blocks of its current device. The pool
 * is reference counted: the context holds one reference while it is on the
 * device, every live block one. When the context leaves the device (a
 * switch, ag_ctx_free), the cached blocks are freed and the pool is closed;
 * blocks released later free their memory themselves, through the device's
 * handoff calls, which need no backend state. A block released with a
 * consumer's stream keeps a mark (an event) of that stream; whoever takes
 * the block next makes its queue wait for the marks first.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "agrl/export.h"
#include "core/internal.h"

#define AG__BLOCK_MARKS 4
#define AG__POOL_MAX_BLOCKS 64
#define AG__POOL_MAX_BYTES ((size_t)256 << 20)
#define AG__BLOCK_MIN ((size_t)4096)
#define AG__SPARE_MARKS 16

typedef struct ag__bpool {
  pthread_mutex_t mu;
  int refs;
  int open;
  const ag__handoff_ops *ops;
  ag_device_kind kind;
  int index;
  struct ag_block *cached;
  int n_cached;
  size_t cached_bytes;
  size_t total_bytes;           /* the device's memory, asked once */
  void *spare[AG__SPARE_MARKS]; /* marks whose waits are all queued, for reuse */
  int n_spare;
} ag__bpool;

struct ag_block {
  ag__bpool *pool;
  void *data;
  size_t size;
  int refs;
  void *marks[AG__BLOCK_MARKS];
  int n_marks;
  struct ag_block *next;
};

typedef struct ag__deferred {
  struct ag__deferred *next;
  void (*fn)(void *);
  void *arg;
  void *mark;
} ag__deferred;

/* ---- the pool ---- */

/* A mark of `stream`, from the spares when there are some; the lock is held. */
static void *mark_take(ag__bpool *p, void *stream) {
  void *reuse = p->n_spare ? p->spare[--p->n_spare] : NULL;
  return p->ops->mark(p->index, stream, reuse);
}

/* Gives back a mark whose waits are queued (or done); the lock is held. */
static void mark_give(ag__bpool *p, void *m) {
  if (!m) return;
  if (p->open && p->n_spare < AG__SPARE_MARKS)
    p->spare[p->n_spare++] = m;
  else
    p->ops->mark_free(m);
}

static void drop_marks(ag__bpool *p, ag_block *b) {
  for (int i = 0; i < b->n_marks; i++) {
    p->ops->host_wait(b->marks[i]);
    mark_give(p, b->marks[i]);
  }
  b->n_marks = 0;
}

/* Frees a block's memory and header; the pool's lock is held. */
static void destroy_block(ag__bpool *p, ag_block *b) {
  drop_marks(p, b);
  p->ops->free(p->index, b->data);
  free(b);
}

/* Drops one pool reference; the lock is held and is let go here. */
static void pool_unref_unlock(ag__bpool *p) {
  int last = --p->refs == 0;
  pthread_mutex_unlock(&p->mu);
  if (last) {
    pthread_mutex_destroy(&p->mu);
    free(p);
  }
}

static ag_status pool_get(ag_ctx *ctx, ag__bpool **out) {
  if (ctx->pool) {
    *out = ctx->pool;
    return AG_OK;
  }
  const ag__handoff_ops *ops = ag__handoff_of(ctx->kind);
  if (!ops)
    return ag__fail(AG_ERR_UNSUPPORTED, "ag_block_create: the %s device cannot hand out memory", ctx->desc);
  ag__bpool *p = ag__calloc(1, sizeof *p);
  if (!p) return ag__fail(AG_ERR_OUT_OF_MEMORY, "ag_block_create: out of host memory");
  if (pthread_mutex_init(&p->mu, NULL) != 0) {
    free(p);
    return ag__fail(AG_ERR_OUT_OF_MEMORY, "ag_block_create: cannot make a lock");
  }
  p->refs = 1;
  p->open = 1;
  p->ops = ops;
  p->kind = ctx->kind;
  p->index = ctx->index;
  size_t avail = 0;
  if (ctx->be->mem_info(ctx->st, &avail, &p->total_bytes) != AG_OK) p->total_bytes = 0;
  ag_clear_error();
  ctx->pool = p;
  *out = p;
  return AG_OK;
}

static size_t round_size(size_t bytes) {
  size_t n = AG__BLOCK_MIN;
  while (n < bytes && n <= SIZE_MAX / 2) n *= 2;
  return n < bytes ? bytes : n;
}

ag_status ag_block_create(ag_ctx *ctx, size_t bytes, ag_block **out) {
  if (!ctx || !out) return ag__fail(AG_ERR_INVALID_ARG, "ag_block_create: ctx and out must not be NULL");
  if (bytes == 0) return ag__fail(AG_ERR_INVALID_ARG, "ag_block_create: bytes = 0");
  ag_status s = ag__not_recording(ctx, "ag_block_create");
  if (s) return s;
  ag__bpool *p = NULL;
  if ((s = pool_get(ctx, &p))) return s;
  if (p->total_bytes && bytes > p->total_bytes)
    return ag__fail(AG_ERR_INVALID_ARG,
                    "ag_block_create: %zu bytes (%.1f MB) is more than the %s has (%.1f MB)", bytes,
                    AG__MB(bytes), ctx->desc, AG__MB(p->total_bytes));

  /* a cached block of the size (up to twice it), its consumers' work waited for on our queue */
  ag_block *b = NULL;
  pthread_mutex_lock(&p->mu);
  for (ag_block **pp = &p->cached; *pp; pp = &(*pp)->next)
    if ((*pp)->size >= bytes && (*pp)->size / 2 <= bytes) {
      b = *pp;
      *pp = b->next;
      p->n_cached--;
      p->cached_bytes -= b->size;
      break;
    }
  pthread_mutex_unlock(&p->mu);
  if (b) {
    void *queue = ctx->be->native_stream(ctx->st);
    s = AG_OK;
    for (int i = 0; i < b->n_marks; i++) {
      if (!s) s = p->ops->wait(queue, b->marks[i]);
      if (s) p->ops->host_wait(b->marks[i]); /* the queued wait failed: wait here */
    }
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < b->n_marks; i++) mark_give(p, b->marks[i]);
    pthread_mutex_unlock(&p->mu);
    b->n_marks = 0;
    ag_clear_error();
  } else {
    if (ag__fault_fires(ctx, AG_FAULT_ALLOC))
      return ag__fail(AG_ERR_OUT_OF_MEMORY,
                      "ag_block_create: the %s device could not allocate %.1f MB (injected fault)",
                      ctx->be->name, AG__MB(bytes));
    b = ag__calloc(1, sizeof *b);
    if (!b) return ag__fail(AG_ERR_OUT_OF_MEMORY, "ag_block_create: out of host memory");
    b->size = round_size(bytes);
    s = p->ops->alloc(p->index, b->size, &b->data);
    if (s) {
      char why[512];
      snprintf(why, sizeof why, "%s", ag_last_error());
      free(b);
      return ag__fail(s, "ag_block_create: %.1f MB on %s: %s", AG__MB(bytes), ctx->desc, why);
    }
    ctx->stats.allocs++;
  }
  pthread_mutex_lock(&p->mu);
  p->refs++;
  pthread_mutex_unlock(&p->mu);
  b->pool = p;
  b->refs = 1;
  b->next = NULL;
  *out = b;
  return AG_OK;
}

void ag_block_retain(ag_block *b) {
  if (!b) return;
  pthread_mutex_lock(&b->pool->mu);
  b->refs++;
  pthread_mutex_unlock(&b->pool->mu);
}

void ag_block_release(ag_block *b, void *stream) {
  if (!b) return;
  ag__bpool *p = b->pool;
  pthread_mutex_lock(&p->mu);
  if (stream && p->kind != AG_DEVICE_CPU) {
    if (b->n_marks == AG__BLOCK_MARKS) { /* full: wait for the oldest here */
      p->ops->host_wait(b->marks[0]);
      mark_give(p, b->marks[0]);
      memmove(b->marks, b->marks + 1, (AG__BLOCK_MARKS - 1) * sizeof b->marks[0]);
      b->n_marks--;
    }
    void *m = mark_take(p, stream); /* NULL: it waited for the stream instead */
    if (m) b->marks[b->n_marks++] = m;
  }
  if (--b->refs > 0) {
    pthread_mutex_unlock(&p->mu);
    return;
  }
  if (p->open && p->n_cached < AG__POOL_MAX_BLOCKS && p->cached_bytes + b->size <= AG__POOL_MAX_BYTES) {
    b->next = p->cached;
    p->cached = b;
    p->n_cached++;
    p->cached_bytes += b->size;
  } else {
    destroy_block(p, b);
  }
  pool_unref_unlock(p);
}

void *ag_block_data(const ag_block *b) { return b ? b->data : NULL; }
size_t ag_block_size(const ag_block *b) { return b ? b->size : 0; }

ag_device_kind ag_block_device(const ag_block *b, int *index) {
  if (index) *index = b ? b->pool->index : 0;
  return b ? b->pool->kind : AG_DEVICE_CPU;
}

/* ---- temporaries from a block ---- */

ag_status ag_ctx_use_block(ag_ctx *ctx, ag_block *b) {
  if (!ctx) return ag__fail(AG_ERR_INVALID_ARG, "ag_ctx_use_block: ctx is NULL");
  ag_status s = ag__not_recording(ctx, "ag_ctx_use_block");
  if (s) return s;
  if (b && (b->pool->kind != ctx->kind || b->pool->index != ctx->index))
    return ag__fail(AG_ERR_INVALID_ARG, "ag_ctx_use_block: the block is on another device than %s",
                    ctx->desc);
  if (b) ag_block_retain(b);
  ag_block_release(ctx->use_block, NULL);
  ctx->use_block = b;
  ctx->block_used = 0;
  return AG_OK;
}

size_t ag_ctx_block_used(const ag_ctx *ctx) { return ctx && ctx->use_block ? ctx->block_used : 0; }

ag_status ag__block_carve(ag_ctx *ctx, size_t bytes, void **out) {
  ag_block *b = ctx->use_block;
  size_t at = (ctx->block_used + 255) & ~(size_t)255;
  if (at > b->size || b->size - at < bytes)
    return ag__fail(AG_ERR_OUT_OF_MEMORY,
                    "a temporary of %zu bytes does not fit in the block in use (%zu of %zu bytes taken)",
                    bytes, at, b->size);
  *out = (char *)b->data + at;
  ctx->block_used = at + bytes;
  return AG_OK;
}

/* ---- tensors and foreign memory ---- */

ag_status ag_tensor_data(const ag_tensor *t, void **data, int64_t *ld) {
  if (!data) return ag__fail(AG_ERR_INVALID_ARG, "ag_tensor_data: data is NULL");
  ag_status s = ag__check_tensor(t, "ag_tensor_data", "t");
  if (s) return s;
  if ((s = ag__not_recording(t->ctx, "ag_tensor_data"))) return s;
  void *p = NULL;
  if ((s = ag__tensor_ptr((ag_tensor *)t, &p))) return s;
  *data = p;
  if (ld) *ld = t->ld;
  return AG_OK;
}

ag_status ag_tensor_wrap(ag_ctx *ctx, void *data, int64_t rows, int64_t cols, int64_t ld, ag_dtype dtype,
                         ag_tensor **out) {
  if (!ctx || !data || !out)
    return ag__fail(AG_ERR_INVALID_ARG, "ag_tensor_wrap: ctx, data and out must not be NULL");
  if (rows < 1 || cols < 1 || ld < rows)
    return ag__fail(AG_ERR_INVALID_ARG,
                    "ag_tensor_wrap: rows %lld, cols %lld, ld %lld (need rows, cols >= 1, ld >= rows)",
                    (long long)rows, (long long)cols, (long long)ld);
  size_t es = ag_dtype_size(dtype), bytes;
  if (!es || (int)dtype < 0 || dtype >= AG_DTYPE_COUNT_)
    return ag__fail(AG_ERR_INVALID_ARG, "ag_tensor_wrap: dtype %d is unknown", (int)dtype);
  if ((uintptr_t)data % es)
    return ag__fail(AG_ERR_INVALID_ARG, "ag_tensor_wrap: %p is not aligned to the %zu bytes of %s", data, es,
                    ag_dtype_name(dtype));
  if (!ag__mul3((uint64_t)ld, (uint64_t)cols, es, &bytes))
    return ag__fail(AG_ERR_INVALID_ARG, "ag_tensor_wrap: %lld x %lld values overflow", (long long)ld,
                    (long long)cols);
  return ag__tensor_view(ctx, rows, cols, ld, dtype, data, out);
}

/* ---- ordering with other streams ---- */

/* A mark of `stream` from the context's pool (NULL on the CPU, or when the
 * stream was waited for on the host instead), and its return. */
static void *ctx_mark(ag_ctx *ctx, void *stream) {
  ag__bpool *p = NULL;
  if (ctx->kind == AG_DEVICE_CPU) return NULL;
  if (pool_get(ctx, &p)) { /* no memory for the pool: a mark of its own */
    ag_clear_error();
    const ag__handoff_ops *ops = ag__handoff_of(ctx->kind);
    return ops ? ops->mark(ctx->index, stream, NULL) : NULL;
  }
  pthread_mutex_lock(&p->mu);
  void *m = mark_take(p, stream);
  pthread_mutex_unlock(&p->mu);
  return m;
}

static void ctx_mark_give(ag_ctx *ctx, void *m) {
  if (!m) return;
  if (!ctx->pool) {
    ag__handoff_of(ctx->kind)->mark_free(m);
    return;
  }
  pthread_mutex_lock(&ctx->pool->mu);
  mark_give(ctx->pool, m);
  pthread_mutex_unlock(&ctx->pool->mu);
}

static ag_status order(ag_ctx *ctx, void *stream, int ctx_waits, const char *fn) {
  if (!ctx) return ag__fail(AG_ERR_INVALID_ARG, "%s: ctx is NULL", fn);
  ag_status s = ag__not_recording(ctx, fn);
  if (s) return s;
  const ag__handoff_ops *ops = ag__handoff_of(ctx->kind);
  if (!ops || ctx->kind == AG_DEVICE_CPU) return AG_OK;
  void *queue = ctx->be->native_stream(ctx->st);
  void *from = ctx_waits ? stream : queue, *to = ctx_waits ? queue : stream;
  if (from == to || (ctx->be->ordered_with && ctx->be->ordered_with(ctx->st, stream))) return AG_OK;
  void *m = ctx_mark(ctx, from); /* NULL: waited on the host instead */
  s = ops->wait(to, m);
  ctx_mark_give(ctx, m); /* the wait is queued: the mark may be recorded again */
  if (s) {
    char why[512];
    snprintf(why, sizeof why, "%s", ag_last_error());
    return ag__fail(s, "%s: %s", fn, why);
  }
  return AG_OK;
}

ag_status ag_stream_wait_ctx(ag_ctx *ctx, void *stream) {
  return order(ctx, stream, 0, "ag_stream_wait_ctx");
}
ag_status ag_ctx_wait_stream(ag_ctx *ctx, void *stream) {
  return order(ctx, stream, 1, "ag_ctx_wait_stream");
}

/* ---- deferred calls ---- */

void ag__deferred_run(ag_ctx *ctx, int all) {
  const ag__handoff_ops *ops = ag__handoff_of(ctx->kind);
  ag__deferred **pp = &ctx->deferred;
  while (*pp) {
    ag__deferred *d = *pp;
    if (all || !ops || ops->done(d->mark)) {
      *pp = d->next;
      ctx_mark_give(ctx, d->mark);
      d->fn(d->arg);
      free(d);
    } else {
      pp = &d->next;
    }
  }
}

void ag_ctx_defer(ag_ctx *ctx, void (*fn)(void *), void *arg) {
  if (!fn) return;
  if (!ctx) {
    fn(arg);
    return;
  }
  ag__deferred_run(ctx, 0);
  void *m = ctx->recording ? NULL : ctx_mark(ctx, ctx->be->native_stream(ctx->st));
  ag__deferred *d = m ? ag__calloc(1, sizeof *d) : NULL;
  if (!d) { /* the CPU, no event or no memory: the queue is past (mark waited) or is waited for now */
    if (m) {
      ag__handoff_of(ctx->kind)->host_wait(m);
      ctx_mark_give(ctx, m);
    } else if (ctx->kind != AG_DEVICE_CPU && !ctx->recording)
      ctx->be->sync(ctx->st);
    fn(arg);
    return;
  }
  d->fn = fn;
  d->arg = arg;
  d->mark = m;
  d->next = ctx->deferred;
  ctx->deferred = d;
}

void ag__blocks_leave(ag_ctx *ctx) {
  ag__deferred_run(ctx, 1);
  ag_block_release(ctx->use_block, NULL);
  ctx->use_block = NULL;
  ctx->block_used = 0;
  ag__bpool *p = ctx->pool;
  if (!p) return;
  ctx->pool = NULL;
  pthread_mutex_lock(&p->mu);
  p->open = 0;
  while (p->cached) {
    ag_block *b = p->cached;
    p->cached = b->next;
    destroy_block(p, b); /* a cached block holds no reference on the pool */
  }
  p->n_cached = 0;
  p->cached_bytes = 0;
  while (p->n_spare) p->ops->mark_free(p->spare[--p->n_spare]);
  pool_unref_unlock(p);
}
