/* registry.c — the device kinds, one row each: their names and the backend
 * this build has for them; and the device names parsed from the rows. */
#include <string.h>

#include "core/internal.h"

typedef struct backend_row {
  ag_device_kind kind;
  const char *name;                /* in messages */
  const char *key;                 /* in device names: "cuda" of "cuda:N" */
  int numbered;                    /* whether a device name may give an index */
  const ag__backend *(*get)(void); /* NULL when not built */
  int (*count)(void);
  const ag__handoff_ops *(*handoff)(void);
} backend_row;

static int one(void) { return 1; }
static const ag__handoff_ops *no_handoff(void) { return NULL; }

static const backend_row rows[] = {
    {AG_DEVICE_CPU, "CPU", "cpu", 0, ag__cpu_backend, one, ag__cpu_handoff},
    {AG_DEVICE_CUDA, "CUDA", "cuda", 1, ag__cuda_backend, ag__cuda_device_count, ag__cuda_handoff},
    {AG_DEVICE_VULKAN, "Vulkan", "vulkan", 1, ag__vulkan_backend, ag__vulkan_device_count, no_handoff},
};
#define N_ROWS (sizeof rows / sizeof rows[0])

static const backend_row *row_of(ag_device_kind kind) {
  for (size_t i = 0; i < N_ROWS; i++)
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

/* Fails for a name that does not parse (why: "" or ": the reason"), listing the names the rows give:
 * "auto, cpu, cuda, cuda:N, vulkan or vulkan:N". */
static ag_status bad_name(const char *name, const char *why) {
  int total = 1, at = 1;
  for (size_t i = 0; i < N_ROWS; i++) total += 1 + rows[i].numbered;
  char list[256] = "auto";
  size_t len = strlen(list);
  for (size_t i = 0; i < N_ROWS; i++)
    for (int numbered = 0; numbered <= rows[i].numbered && len < sizeof list; numbered++, at++)
      len += (size_t)snprintf(list + len, sizeof list - len, "%s%s%s", at == total - 1 ? " or " : ", ",
                              rows[i].key, numbered ? ":N" : "");
  return ag__fail(AG_ERR_INVALID_ARG,
                  "ag_device_parse: '%.64s%s' is not a device name%s (%s, N decimal digits from 0 to %d)",
                  name, strlen(name) > 64 ? "..." : "", why, list, AG_DEVICE_INDEX_MAX);
}

ag_status ag_device_parse(const char *name, ag_device_kind *kind, int *index) {
  if (!name || !kind || !index)
    return ag__fail(AG_ERR_INVALID_ARG, "ag_device_parse: name, kind and index must not be NULL");
  if (strcmp(name, "auto") == 0) {
    *kind = AG_DEVICE_AUTO;
    *index = 0;
    return AG_OK;
  }
  for (size_t i = 0; i < N_ROWS; i++) {
    const size_t n = strlen(rows[i].key);
    if (strncmp(name, rows[i].key, n) != 0) continue;
    const char *p = name + n;
    if (*p == '\0') {
      *kind = rows[i].kind;
      *index = 0;
      return AG_OK;
    }
    if (*p != ':' || !rows[i].numbered) continue; /* another row's key may begin like this one */
    int v = 0;
    if (*++p == '\0') return bad_name(name, ": no index after ':'");
    for (; *p >= '0' && *p <= '9'; p++) {
      v = v * 10 + (*p - '0');
      if (v > AG_DEVICE_INDEX_MAX) break;
    }
    if (v > AG_DEVICE_INDEX_MAX) return bad_name(name, ": the index is too large");
    if (*p != '\0') return bad_name(name, ": the index is not decimal digits alone");
    *kind = rows[i].kind;
    *index = v;
    return AG_OK;
  }
  return bad_name(name, "");
}

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
  for (size_t i = 0; i < N_ROWS; i++) {
    const ag__backend *be = rows[i].get();
    size_t n = be && be->scratch ? be->scratch(NULL, id, args, size) : 0;
    most = n > most ? n : most;
  }
  return most;
}
