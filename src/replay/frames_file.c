/* frames_file.c — frame tables saved to and loaded from files.
 *
 * A frame file is an agrl container (docs/container.md) of kind "frames"
 * whose keys give the frame's shape, the stack, the copies and the ring's
 * counters, and whose one section "frames" holds the held columns of the
 * frame buffer [h*w*c + 1, size] u8 (frames and first flags); the table of
 * the scalar fields follows it as a replay file's image (replay_file.c),
 * as an agent's file carries its table. The frames go device -> file and
 * back in parts through the container's pipeline; the host copy of the
 * flags is taken from the parts as they pass, and the count of sampleable
 * entries recomputed. A prioritized table is version 2: key frames.alpha,
 * and its fields' table's image carries the sampler (leaves and largest
 * priority); on load the mask of the entries that may be sampled is made
 * again from the flags and the leaves of the others set to 0.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/agfile.h"
#include "replay/frames_internal.h"
#include "replay/replay_internal.h"

#define FRM_VERSION 2 /* the newest read; version 1: not prioritized */
#define FRM_MAX_CAPACITY ((int64_t)1 << 40)

#define CORRUPT(...) ag__fail(AG_ERR_IO, __VA_ARGS__)

/* ---- save ---- */

typedef struct frm_src {
  ag_ctx *ctx;
  const char *fn;
  const unsigned char *dev;
} frm_src;

static ag_status frm_fill(void *user, unsigned char *dst, uint64_t off, size_t len) {
  const frm_src *s = user;
  return ag__mem_download_copy(s->ctx, s->fn, dst, s->dev + off, len);
}

ag_status ag__frames_write(ag_frames *t, FILE *f, size_t part, const char *fn, const char *name) {
  ag_status s = ag__not_recording(t->ctx, fn);
  if (s) return s;
  ag_per *per = NULL;
  if ((s = ag__frames_check_sound(t, fn)) || (t->prioritized && (s = ag__frames_per(t, fn, &per))) ||
      (s = ag__store_ensure(t->ctx, &t->frames->store)))
    return s;
  ag__agf a;
  ag__agf_init(&a);
  ag__agf_set_str(&a, "kind", "frames");
  ag__agf_set_i64(&a, "frames.version", t->prioritized ? 2 : 1);
  ag__agf_set_i64(&a, "frames.height", t->h);
  ag__agf_set_i64(&a, "frames.width", t->w);
  ag__agf_set_i64(&a, "frames.channels", t->c);
  ag__agf_set_i64(&a, "frames.stack", t->stack);
  ag__agf_set_i64(&a, "frames.n_envs", t->n_envs);
  ag__agf_set_i64(&a, "frames.capacity", t->capacity);
  ag__agf_set_i64(&a, "frames.min_size", t->min_size);
  ag__agf_set_i64(&a, "frames.size", t->r->size);
  if (t->prioritized) ag__agf_set_f64(&a, "frames.alpha", (double)t->alpha);
  frm_src src = {t->ctx, fn, t->frames->store.ptr};
  const int64_t dims[2] = {t->hwc + 1, t->r->size};
  ag__agf_add_tensor(&a, "frames", AG_U8, 2, dims, frm_fill, &src);
  s = ag__agf_write(&a, f, part, fn, name);
  ag__agf_free(&a);
  if (!s) s = ag__replay_write(t->r, f, part, fn, name);
  return s;
}

ag_status ag_frames_save(const ag_frames *ct, const char *path) {
  static const char fn[] = "ag_frames_save";
  if (!ct || !path) return ag__fail(AG_ERR_INVALID_ARG, "%s: table and path must not be NULL", fn);
  if (!*path) return ag__fail(AG_ERR_INVALID_ARG, "%s: path is empty", fn);
  ag__afile a;
  ag_status s = ag__afile_open(&a, path, fn);
  if (s) return s;
  if ((s = ag__frames_write((ag_frames *)ct, a.f, AG_TRANSFER_PART_BYTES, fn, path))) {
    ag__afile_abort(&a);
    return s;
  }
  return ag__afile_commit(&a, fn);
}

/* ---- load ---- */

/* The file's configuration and size, checked against each other and the
 * limits; then the one section. */
static ag_status describe(const ag__agf *a, const char *fn, const char *name, ag_frames_config *c,
                          int64_t *size) {
  int64_t version, stack;
  ag_status s = ag__agf_check_kind(a, "frames", FRM_VERSION, &version, fn, name);
  if (s || (s = ag__agf_get_i64(a, "frames.height", 1, INT32_MAX, &c->height, fn, name)) ||
      (s = ag__agf_get_i64(a, "frames.width", 1, INT32_MAX, &c->width, fn, name)) ||
      (s = ag__agf_get_i64(a, "frames.channels", 1, INT32_MAX, &c->channels, fn, name)) ||
      (s = ag__agf_get_i64(a, "frames.stack", 1, AG_FRAMES_MAX_STACK, &stack, fn, name)) ||
      (s = ag__agf_get_i64(a, "frames.capacity", 1, FRM_MAX_CAPACITY, &c->capacity, fn, name)) ||
      (s = ag__agf_get_i64(a, "frames.n_envs", 1, c->capacity, &c->n_envs, fn, name)) ||
      (s = ag__agf_get_i64(a, "frames.min_size", 1, c->capacity, &c->min_size, fn, name)) ||
      (s = ag__agf_get_i64(a, "frames.size", 0, c->capacity, size, fn, name)))
    return s;
  c->stack = (int)stack;
  c->prioritized = version >= 2;
  if (c->prioritized) {
    double alpha;
    if ((s = ag__agf_get_f64(a, "frames.alpha", &alpha, fn, name))) return s;
    c->alpha = (float)alpha;
    if (!(alpha >= 0.0 && alpha <= 1.0) || (double)c->alpha != alpha)
      return CORRUPT("%s: %s is corrupt: frames.alpha = %g, outside [0, 1] or not an f32", fn, name, alpha);
  }
  const int64_t hw = c->height * c->width; /* < 2^62 */
  if (hw > INT32_MAX / c->channels || hw * c->channels > INT32_MAX - 2)
    return CORRUPT("%s: %s is corrupt: a frame of %lld x %lld x %lld is larger than 2^31 - 2 bytes", fn, name,
                   (long long)c->height, (long long)c->width, (long long)c->channels);
  if (a->n_sections != 1)
    return CORRUPT("%s: %s is corrupt: %d sections, where a frame table has 1", fn, name, a->n_sections);
  const int64_t dims[2] = {hw * c->channels + 1, *size};
  int at;
  return ag__agf_want_section(a, "frames", AG_U8, 2, dims, &at, fn, name);
}

int ag__frames_image_differs(FILE *f, uint64_t left, const ag_frames_config *want) {
  ag__agf a;
  ag_frames_config c;
  int64_t size = 0;
  const off_t at = ftello(f);
  int differs = 0; /* a header that cannot be read is the loader's to refuse */
  memset(&c, 0, sizeof c);
  ag__agf_init(&a);
  if (at >= 0 && !ag__agf_read_head(&a, f, left, "ag_frames_load", "the table"))
    differs = describe(&a, "ag_frames_load", "the table", &c, &size) || c.height != want->height ||
              c.width != want->width || c.channels != want->channels || c.stack != want->stack ||
              c.n_envs != want->n_envs || c.capacity != want->capacity || c.min_size != want->min_size ||
              c.prioritized != want->prioritized || (c.prioritized && c.alpha != want->alpha);
  ag__agf_free(&a); /* a failed read may leave a part of the form */
  if (at >= 0) (void)fseeko(f, at, SEEK_SET);
  return differs;
}

/* The load's sink: the frames to the device, the flags (every fr-th byte,
 * from byte fr - 1 on) into the host copy as they pass. */
typedef struct frm_dst {
  ag_frames *t;
  const char *fn;
} frm_dst;

static ag_status frm_take(void *user, int sec, unsigned char *buf, uint64_t off, size_t len) {
  frm_dst *d = user;
  ag_frames *t = d->t;
  (void)sec;
  const uint64_t fr = (uint64_t)t->hwc + 1;
  for (uint64_t b = (fr - 1 + fr - off % fr) % fr; b < len; b += fr) t->first[(off + b) / fr] = buf[b] != 0;
  return ag__mem_upload_copy(t->ctx, d->fn, (unsigned char *)t->frames->store.ptr + off, buf, len);
}

ag_status ag__frames_load_stream(ag_ctx *ctx, FILE *f, const char *name, size_t max_table_bytes,
                                 ag_frames **out) {
  static const char fn[] = "ag_frames_load";
  if (!ctx || !f || !out)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: ctx, the file and out must not be NULL", fn);
  if (!name) name = "the stream";
  uint64_t left = 0;
  ag_status s = ag__stream_left(f, fn, name, "a frame table", &left);
  if (s) return s;
  ag__agf a;
  ag_frames_config c;
  int64_t size = 0;
  memset(&c, 0, sizeof c);
  s = ag__agf_read_head(&a, f, left, fn, name);
  if (!s) s = describe(&a, fn, name, &c, &size);
  size_t bytes = 0; /* the frame buffer's: (h*w*c + 1) * capacity */
  if (!s && (!ag__mul3((uint64_t)(c.height * c.width * c.channels + 1), (uint64_t)c.capacity, 1, &bytes) ||
             (max_table_bytes && bytes > max_table_bytes)))
    s = ag__fail(AG_ERR_UNSUPPORTED,
                 "%s: the frames of %s (%lld columns) are larger than the limit of %zu bytes", fn, name,
                 (long long)c.capacity, max_table_bytes);
  ag_frames *t = NULL;
  if (!s && (s = ag__frames_alloc(ctx, &c, fn, &t))) {
    char why[512];
    snprintf(why, sizeof why, "%s", ag_last_error());
    s = ag__fail(s == AG_ERR_INVALID_ARG ? AG_ERR_IO : s, "%s: the frame table of %s cannot be made: %s", fn,
                 name, why);
  }
  if (!s && !(s = ag__store_ensure(ctx, &t->frames->store))) {
    frm_dst d = {t, fn};
    s = ag__agf_stream(&a, f, frm_take, &d, fn, name);
  }
  if (!s && fseeko(f, a.base + (off_t)a.total, SEEK_SET))
    s = ag__fail(AG_ERR_IO, "%s: %s: cannot seek to its fields' table: %s", fn, name, strerror(errno));
  const uint64_t rest = left - (s ? 0 : a.total);
  ag__agf_free(&a);
  if (!s) s = ag__replay_read(ctx, f, name, rest, max_table_bytes, fn, &t->r);
  if (!s && (t->r->capacity != t->capacity || t->r->size != size))
    s = CORRUPT("%s: %s is corrupt: its fields' table holds %lld of %lld entries, its frames %lld of %lld",
                fn, name, (long long)t->r->size, (long long)t->r->capacity, (long long)size,
                (long long)t->capacity);
  ag_per *per = s ? NULL : ag_replay_per(t->r);
  if (!s && !c.prioritized && per)
    s = CORRUPT("%s: %s is corrupt: its fields' table has a prioritized sampler", fn, name);
  if (!s && c.prioritized && (!per || ag_per_alpha(per) != c.alpha))
    s = CORRUPT("%s: %s is corrupt: its fields' table has %s, where frames.alpha is %g", fn, name,
                per ? "a prioritized sampler of another alpha" : "no prioritized sampler", (double)c.alpha);
  if (!s) s = ag__frames_set_walk_ring(t);
  if (!s && c.prioritized) s = ag__frames_per_attach(t, fn);
  if (s) {
    ag_frames_free(t);
    return s;
  }
  t->count = ag__frames_count_in(t, 0, t->capacity);
  *out = t;
  return AG_OK;
}

ag_status ag_frames_load(ag_ctx *ctx, const char *path, ag_frames **out) {
  static const char fn[] = "ag_frames_load";
  if (!ctx || !path || !out)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: ctx, path and out must not be NULL", fn);
  FILE *f;
  ag_status s = ag__open_read(path, fn, &f);
  if (s) return s;
  s = ag__frames_load_stream(ctx, f, path, 0, out);
  fclose(f);
  return s;
}
