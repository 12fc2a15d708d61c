/* store.c — persistent memory that follows its context across devices.
 *
 * A store is the memory of a buffer or a persistent tensor. It is resident
 * when it lives on the context's current backend; after a switch from a
 * device to the CPU it holds a host copy, which is resident there; after a
 * switch back to a device the host copy stays until the next use, which
 * uploads it in parts into a new allocation with a new generation (S18, S19).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/internal.h"

static _Atomic uint64_t ag__generation;

uint64_t ag__next_generation(void) { return atomic_fetch_add(&ag__generation, 1) + 1; }

static void link_store(ag_ctx *ctx, ag__store *s) {
  s->next = ctx->stores.next;
  s->prev = &ctx->stores;
  ctx->stores.next->prev = s;
  ctx->stores.next = s;
}

static void unlink_store(ag__store *s) {
  if (!s->next) return;
  s->prev->next = s->next;
  s->next->prev = s->prev;
  s->next = s->prev = NULL;
}

/* Checks the S3 guard: bytes must not exceed the usable share of free
 * memory. `hint` ends the message with what the caller can do about it. */
static ag_status check_free_memory(ag_ctx *ctx, size_t bytes, const char *op, const char *hint) {
  size_t free_b = 0, total_b = 0;
  if (ctx->be->mem_info(ctx->st, &free_b, &total_b) != AG_OK) return AG_OK; /* unknown: try */
  double usable = AG_BUFFER_MEM_SHARE * (double)free_b;
  if ((double)bytes > usable)
    return ag__fail(AG_ERR_OUT_OF_MEMORY,
                    "%s: %.1f MB requested, the device (%s) reports %.1f MB free, of which "
                    "%.1f MB (%d%%) may be used; %s",
                    op, AG__MB(bytes), ctx->desc, AG__MB(free_b), usable / (1024.0 * 1024.0),
                    (int)(AG_BUFFER_MEM_SHARE * 100 + 0.5), hint);
  return AG_OK;
}

/* Allocates `bytes` on ctx->be after the S3 guard; names the size on failure (S4). */
static ag_status alloc_guarded(ag_ctx *ctx, size_t bytes, const char *op, const char *hint, void **out) {
  ag_status s = check_free_memory(ctx, bytes, op, hint);
  if (s) return s;
  s = ag__mem_alloc(ctx, ctx->be, bytes, out);
  if (s) {
    char why[512];
    snprintf(why, sizeof why, "%s", ag_last_error());
    return ag__fail(s, "%s: the device (%s) could not allocate %.1f MB (%zu bytes): %s", op, ctx->desc,
                    AG__MB(bytes), bytes, why);
  }
  return AG_OK;
}

ag_status ag__store_init(ag_ctx *ctx, ag__store *s, size_t bytes, ag__owner_kind kind, void *owner,
                         const char *op) {
  void *p = NULL;
  ag_status st = ag__not_recording(ctx, op);
  if (st) return st;
  st = alloc_guarded(
      ctx, bytes, op,
      kind == AG__OWNER_BUFFER ? "reduce the capacity" : "ask for a smaller tensor or free device memory",
      &p);
  if (st) return st;
  st = ctx->be->zero(ctx->st, p, bytes);
  if (st) {
    ag__mem_release(ctx, ctx->be, p, bytes);
    return st;
  }
  s->ptr = p;
  s->on = ctx->be;
  s->bytes = bytes;
  s->gen = ag__next_generation();
  s->owner_kind = kind;
  s->owner = owner;
  link_store(ctx, s);
  return AG_OK;
}

ag_where ag__store_where(const ag_ctx *ctx, const ag__store *s) {
  if (!s->ptr) return AG_WHERE_FREED;
  if (s->on == ag__host_backend()) return AG_WHERE_HOST;
  (void)ctx;
  return AG_WHERE_DEVICE;
}

ag_status ag__store_ensure(ag_ctx *ctx, ag__store *s) {
  if (ctx->recording) ctx->hooks->note_read(ctx, s);
  if (s->on == ctx->be) return AG_OK;
  /* a host copy (after a switch) goes up in parts into a new allocation */
  void *p = NULL;
  ag_status st =
      alloc_guarded(ctx, s->bytes, "upload", "free device memory, or keep the context on the CPU", &p);
  if (st) return st;
  for (size_t off = 0; off < s->bytes; off += AG_TRANSFER_PART_BYTES) {
    size_t len = s->bytes - off < AG_TRANSFER_PART_BYTES ? s->bytes - off : AG_TRANSFER_PART_BYTES;
    st = ag__mem_upload_copy(ctx, "upload", (char *)p + off, (const char *)s->ptr + off, len);
    if (st) {
      ag__mem_release(ctx, ctx->be, p, s->bytes);
      return st;
    }
  }
  ag__mem_release(ctx, s->on, s->ptr, s->bytes);
  s->ptr = p;
  s->on = ctx->be;
  s->gen = ag__next_generation();
  return AG_OK;
}

void ag__store_release(ag_ctx *ctx, ag__store *s) {
  if (ctx->captures) ctx->hooks->forget(ctx, s);
  if (s->ptr) ag__mem_release(ctx, s->on, s->ptr, s->bytes);
  s->ptr = NULL;
  unlink_store(s);
}

ag_status ag__stores_rescue(ag_ctx *ctx) {
  const ag__backend *cpu = ag__host_backend();
  if (ctx->be == cpu) return AG_OK;
  ag_status st = AG_OK;
  /* pass 1: a host copy of every resident store, in parts */
  ag__store *s;
  void **copies = NULL;
  size_t n = 0, i = 0;
  for (s = ctx->stores.next; s != &ctx->stores; s = s->next) n++;
  if (n) {
    copies = ag__calloc(n, sizeof *copies);
    if (!copies) return ag__fail(AG_ERR_OUT_OF_MEMORY, "device switch: out of host memory");
  }
  for (s = ctx->stores.next; s != &ctx->stores && st == AG_OK; s = s->next, i++) {
    if (s->on == cpu) continue; /* already a host copy */
    st = ag__mem_alloc(ctx, cpu, s->bytes, &copies[i]);
    if (st) {
      st = ag__fail(st, "device switch aborted: no host memory for a %.1f MB copy of a %s", AG__MB(s->bytes),
                    s->owner_kind == AG__OWNER_BUFFER ? "buffer" : "tensor");
      break;
    }
    for (size_t off = 0; off < s->bytes; off += AG_TRANSFER_PART_BYTES) {
      size_t len = s->bytes - off < AG_TRANSFER_PART_BYTES ? s->bytes - off : AG_TRANSFER_PART_BYTES;
      st = ag__mem_download_copy(ctx, "rescue", (char *)copies[i] + off, (const char *)s->ptr + off, len);
      if (st) {
        char why[512];
        snprintf(why, sizeof why, "%s", ag_last_error());
        st = ag__fail(st,
                      "device switch aborted: copying a %.1f MB %s to the host failed at byte %zu "
                      "(%s); every value stays on %s",
                      AG__MB(s->bytes), s->owner_kind == AG__OWNER_BUFFER ? "buffer" : "tensor", off, why,
                      ctx->desc);
        break;
      }
    }
  }
  /* pass 2: commit (release device memory) or roll back (drop the copies) */
  i = 0;
  for (s = ctx->stores.next; s != &ctx->stores; s = s->next, i++) {
    if (!copies || !copies[i]) continue;
    if (st == AG_OK) {
      ag__mem_release(ctx, s->on, s->ptr, s->bytes);
      s->ptr = copies[i];
      s->on = cpu;
      s->gen = ag__next_generation();
    } else {
      ag__mem_release(ctx, cpu, copies[i], s->bytes);
    }
  }
  free(copies);
  return st;
}
