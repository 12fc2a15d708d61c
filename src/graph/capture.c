/* capture.c — recordings of a step (ag_capture).
 *
 * A recording owns a workspace of its own, whose memory comes from outside
 * the stream order, so that the addresses baked into the recorded kernels
 * stay valid until the recording is freed. While it records, ctx->ws points
 * to that workspace and every store the step touches is noted with its
 * generation. A replay checks those notes: a freed store invalidates the
 * recording (S15); a store with a new generation, or a context on another
 * device, makes it record the step again first (S19).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agrl/capture.h"
#include "graph/graph_internal.h"

typedef struct capture_read {
  ag__store *store; /* NULL once released */
  uint64_t gen;
} capture_read;

typedef struct capture_input {
  char *name;
  ag_tensor *t;
} capture_input;

struct ag_capture {
  ag_ctx *ctx;
  capture_input *inputs;
  int n_inputs;
  ag_step_fn fn;
  void *user;
  void *rec; /* the backend's recording, NULL when it must be made (again) */
  int nodes;
  ag__workspace ws;
  capture_read *reads;
  int n_reads, cap_reads;
  int invalid;
  uint64_t epoch;
  int records;
  uint64_t replays;
  struct ag_capture *next;
};

/* ---- notes kept while recording ---- */

static void note_read(ag_ctx *ctx, ag__store *s) {
  ag_capture *c = ctx->recording;
  for (int i = 0; i < c->n_reads; i++)
    if (c->reads[i].store == s) return;
  if (c->n_reads == c->cap_reads) {
    int cap = c->cap_reads ? 2 * c->cap_reads : 16;
    capture_read *r = ag__realloc(c->reads, (size_t)cap * sizeof *r);
    if (!r) { /* without the note the recording could outlive the store: refuse it */
      c->invalid = 1;
      return;
    }
    c->reads = r;
    c->cap_reads = cap;
  }
  c->reads[c->n_reads].store = s;
  c->reads[c->n_reads].gen = s->gen;
  c->n_reads++;
}

static void forget(ag_ctx *ctx, ag__store *s) {
  for (ag_capture *c = ctx->captures; c; c = c->next)
    for (int i = 0; i < c->n_reads; i++)
      if (c->reads[i].store == s) {
        c->reads[i].store = NULL;
        c->invalid = 1;
      }
}

/* ---- making and dropping the backend recording ---- */

static void drop_recording(ag_capture *c) {
  ag_ctx *ctx = c->ctx;
  if (c->rec) {
    ctx->be->sync(ctx->st); /* no queued replay may still use it */
    ctx->be->record_free(ctx->st, c->rec);
    c->rec = NULL;
  }
  ag__ws_destroy(ctx, &c->ws);
  c->n_reads = 0;
  c->nodes = 0;
}

/* Every store resident first: uploads cannot happen inside a recording. */
static ag_status make_resident(ag_ctx *ctx) {
  for (ag__store *s = ctx->stores.next; s != &ctx->stores; s = s->next) {
    ag_status st = ag__store_ensure(ctx, s);
    if (st) return st;
  }
  return AG_OK;
}

/* The flags of the context's persistent tensors (which gradients are
 * stale): a step that is recorded sets them as its replay will leave them,
 * so a recording that fails must put them back. */
typedef struct saved_flags {
  ag_tensor *t;
  uint32_t flags;
} saved_flags;

static ag_status save_flags(ag_ctx *ctx, saved_flags **out, size_t *n_out) {
  size_t n = 0;
  for (ag__store *s = ctx->stores.next; s != &ctx->stores; s = s->next)
    n += s->owner_kind == AG__OWNER_TENSOR;
  saved_flags *v = ag__malloc((n ? n : 1) * sizeof *v);
  if (!v) return ag__fail(AG_ERR_OUT_OF_MEMORY, "ag_capture: out of host memory");
  size_t i = 0;
  for (ag__store *s = ctx->stores.next; s != &ctx->stores; s = s->next)
    if (s->owner_kind == AG__OWNER_TENSOR) {
      v[i].t = s->owner;
      v[i].flags = v[i].t->flags;
      i++;
    }
  *out = v;
  *n_out = n;
  return AG_OK;
}

static ag_status record_step(ag_capture *c);
static void free_all(ag_ctx *ctx);
static void release_backend(ag_ctx *ctx);
static const ag__capture_hooks capture_hooks = {note_read, forget, release_backend, free_all};

static ag_status record(ag_capture *c) {
  saved_flags *flags = NULL;
  size_t n_flags = 0;
  ag_tensor *one = NULL; /* made now if need be: a step records no allocation */
  const int had = c->ctx->graph != NULL;
  ag_status s = ag__graph_one(c->ctx, &one);
  if (!s) s = save_flags(c->ctx, &flags, &n_flags);
  if (!s) {
    s = record_step(c);
    if (s)
      for (size_t i = 0; i < n_flags; i++) flags[i].t->flags = flags[i].flags;
    free(flags);
  }
  if (s && !had) ag__graph_drop(c->ctx); /* a failed call leaves the context as it was */
  return s;
}

static ag_status record_step(ag_capture *c) {
  ag_ctx *ctx = c->ctx;
  drop_recording(c);
  ag_status s = make_resident(ctx);
  if (s) return s;
  c->invalid = 0;
  ctx->ws = &c->ws;
  ctx->recording = c;
  int saved_no_grad = ctx->no_grad;
  if ((s = ctx->be->record_begin(ctx->st))) {
    ctx->ws = &ctx->ws_main;
    ctx->recording = NULL;
    return s;
  }
  ag_status fs = c->fn(ctx, c->user);
  char why[512] = "";
  if (fs) snprintf(why, sizeof why, "%s", ag_last_error());
  s = ctx->be->record_end(ctx->st, fs == AG_OK, &c->rec, &c->nodes);
  ctx->ws = &ctx->ws_main;
  ctx->recording = NULL;
  ctx->no_grad = saved_no_grad;
  if (fs) {
    c->rec = NULL;
    drop_recording(c);
    return ag__fail(fs, "ag_capture: the step failed while recording: %s", why);
  }
  if (s) {
    c->rec = NULL;
    drop_recording(c);
    return s;
  }
  if (c->invalid) {
    drop_recording(c);
    return ag__fail(AG_ERR_OUT_OF_MEMORY, "ag_capture: out of host memory for the recording's notes");
  }
  c->epoch = ctx->epoch;
  c->records++;
  ctx->stats.records++;
  return AG_OK;
}

ag_status ag_capture_create(ag_ctx *ctx, ag_step_fn fn, void *user, ag_capture **out) {
  static const char fn_name[] = "ag_capture_create";
  if (!ctx || !fn || !out)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: ctx, fn and out must not be NULL", fn_name);
  ag_status s = ag__not_recording(ctx, fn_name);
  if (s) return s;
  ag_capture *c = ag__calloc(1, sizeof *c);
  if (!c) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn_name);
  c->ctx = ctx;
  c->fn = fn;
  c->user = user;
  c->ws.is_static = 1;
  c->next = ctx->captures;
  ctx->captures = c;
  ctx->hooks = &capture_hooks;
  if ((s = record(c))) {
    ag_capture_free(c);
    return s;
  }
  *out = c;
  return AG_OK;
}

ag_status ag__capture_prepare(ag_capture *c, const char *fn) {
  if (!c) return ag__fail(AG_ERR_INVALID_ARG, "%s: cap is NULL", fn);
  ag_ctx *ctx = c->ctx;
  ag_status s = ag__not_recording(ctx, fn);
  if (s) return s;
  if (c->invalid)
    return ag__fail(AG_ERR_INVALIDATED,
                    "%s: the recording reads a buffer or tensor that has been freed; record the step again",
                    fn);
  int again = !c->rec || c->epoch != ctx->epoch;
  for (int i = 0; i < c->n_reads && !again; i++) {
    ag__store *st = c->reads[i].store;
    if ((s = ag__store_ensure(ctx, st))) return s;
    if (st->gen != c->reads[i].gen) again = 1; /* new memory: the recorded pointers are stale */
  }
  return again ? record(c) : AG_OK;
}

void ag__capture_rewind(ag_ctx *ctx) {
  if (ctx->recording) ag__ws_rewind(ctx->ws);
}

int ag__capture_ready(const ag_capture *c) { return c->rec != NULL && !c->invalid; }

ag_status ag__capture_run(ag_capture *c) {
  ag_status s = c->ctx->be->replay(c->ctx->st, c->rec);
  if (s) return s;
  c->replays++;
  c->ctx->stats.replays++;
  return AG_OK;
}

ag_status ag_capture_replay(ag_capture *c) {
  static const char fn[] = "ag_capture_replay";
  ag_status s = ag__capture_prepare(c, fn);
  if (s) return s;
  ag_ctx *ctx = c->ctx;
  if ((s = ctx->be->replay(ctx->st, c->rec))) return s;
  c->replays++;
  ctx->stats.replays++;
  return AG_OK;
}

ag_status ag_capture_replay_on(ag_capture *c, void *stream) {
  static const char fn[] = "ag_capture_replay_on";
  ag_status s = ag__capture_prepare(c, fn);
  if (s) return s;
  ag_ctx *ctx = c->ctx;
  s = ctx->be->replay_on ? ctx->be->replay_on(ctx->st, c->rec, stream) : ctx->be->replay(ctx->st, c->rec);
  if (s) return s;
  c->replays++;
  ctx->stats.replays++;
  return AG_OK;
}

void ag_capture_free(ag_capture *c) {
  if (!c) return;
  ag_ctx *ctx = c->ctx;
  drop_recording(c);
  for (ag_capture **p = &ctx->captures; *p; p = &(*p)->next)
    if (*p == c) {
      *p = c->next;
      break;
    }
  for (int i = 0; i < c->n_inputs; i++) free(c->inputs[i].name);
  free(c->inputs);
  free(c->reads);
  free(c);
}

static void free_all(ag_ctx *ctx) {
  while (ctx->captures) ag_capture_free(ctx->captures);
  ag__graph_drop(ctx);
}

void ag__graph_hook(ag_ctx *ctx) { ctx->hooks = &capture_hooks; }

static void release_backend(ag_ctx *ctx) {
  for (ag_capture *c = ctx->captures; c; c = c->next) {
    /* keep the notes: a freed store must still invalidate */
    int n = c->n_reads;
    drop_recording(c);
    c->n_reads = n;
  }
}

/* ---- named inputs ---- */

ag_tensor *ag_capture_input(const ag_capture *c, const char *name) {
  for (int i = 0; c && name && i < c->n_inputs; i++)
    if (strcmp(c->inputs[i].name, name) == 0) return c->inputs[i].t;
  return NULL;
}

ag_status ag_capture_add_input(ag_capture *c, const char *name, ag_tensor *t) {
  static const char fn[] = "ag_capture_add_input";
  if (!c || !name || !name[0])
    return ag__fail(AG_ERR_INVALID_ARG, "%s: cap and a non-empty name are required", fn);
  ag_status s = ag__check_tensor(t, fn, "t");
  if (s) return s;
  if (!(t->flags & AG__T_PERSISTENT) || t->ctx != c->ctx)
    return ag__fail(AG_ERR_INVALID_ARG,
                    "%s: input '%s' must be a persistent tensor of the recording's context", fn, name);
  if (ag_capture_input(c, name))
    return ag__fail(AG_ERR_INVALID_ARG, "%s: the input '%s' is named already", fn, name);
  capture_input *in = ag__realloc(c->inputs, (size_t)(c->n_inputs + 1) * sizeof *in);
  char *copy = ag__malloc(strlen(name) + 1);
  if (in) c->inputs = in;
  if (!in || !copy) {
    free(copy);
    return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
  strcpy(copy, name);
  c->inputs[c->n_inputs].name = copy;
  c->inputs[c->n_inputs].t = t;
  c->n_inputs++;
  return AG_OK;
}

ag_status ag_capture_set_input(ag_capture *c, const char *name, const void *data, size_t bytes) {
  ag_tensor *t = ag_capture_input(c, name);
  if (!t)
    return ag__fail(AG_ERR_INVALID_ARG, "ag_capture_set_input: the recording has no input named '%s'",
                    name ? name : "(null)");
  return ag_tensor_write(t, data, bytes);
}

ag_status ag_capture_get_info(const ag_capture *c, ag_capture_info *out) {
  if (!c || !out) return ag__fail(AG_ERR_INVALID_ARG, "ag_capture_get_info: cap and out must not be NULL");
  out->nodes = c->nodes;
  out->reads = c->n_reads;
  out->records = c->records;
  out->replays = c->replays;
  out->workspace_bytes = c->ws.total;
  out->valid = !c->invalid;
  return AG_OK;
}

ag_status ag_capture_read_at(const ag_capture *c, int i, ag_buffer **buf, ag_tensor **tensor) {
  if (!c || !buf || !tensor)
    return ag__fail(AG_ERR_INVALID_ARG, "ag_capture_read_at: arguments must not be NULL");
  if (i < 0 || i >= c->n_reads)
    return ag__fail(AG_ERR_OUT_OF_RANGE, "ag_capture_read_at: read %d requested, the recording has %d", i,
                    c->n_reads);
  ag__store *s = c->reads[i].store;
  if (!s) return ag__fail(AG_ERR_FREED, "ag_capture_read_at: read %d has been freed", i);
  *buf = NULL;
  *tensor = NULL;
  if (s->owner_kind == AG__OWNER_BUFFER)
    *buf = s->owner;
  else
    *tensor = s->owner;
  return AG_OK;
}
