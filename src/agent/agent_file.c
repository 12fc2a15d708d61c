/* agent_file.c — what the files of whole agents (dqn_file.c, ac_file.c)
 * share: a header with its tensor table and CRC-32, sections of values in
 * parts of at most AG_TRANSFER_PART_BYTES each followed by its CRC-32, and
 * the agent's replay table in its own file image at the end (replay_file.c:
 * an agrl container, or the AGRLRPL1 image of agrl 0.1.0).
 * Values are little-endian in the file whatever the host's order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent_internal.h"
#include "replay/replay_internal.h"

/* Values of n elements of es bytes between host order and the file's
 * (little-endian), in place. */
static void swap_order(unsigned char *p, size_t n, size_t es) {
  const uint16_t one = 1;
  unsigned char little;
  memcpy(&little, &one, 1);
  if (little) return;
  for (size_t i = 0; i < n; i++, p += es)
    for (size_t a = 0, b = es - 1; a < b; a++, b--) {
      unsigned char t = p[a];
      p[a] = p[b];
      p[b] = t;
    }
}

uint64_t ag__parts_bytes(uint64_t n) {
  return n + 4 * (n ? (n + AG_TRANSFER_PART_BYTES - 1) / AG_TRANSFER_PART_BYTES : 1);
}

void ag__parts_write(FILE *f, const void *data, size_t n, int *wrote) {
  const unsigned char *buf = data;
  for (size_t off = 0; off < n && *wrote; off += AG_TRANSFER_PART_BYTES) {
    size_t len = n - off < AG_TRANSFER_PART_BYTES ? n - off : AG_TRANSFER_PART_BYTES;
    unsigned char c[4];
    ag__put32(c, ag__crc32_add(0, buf + off, len));
    *wrote = fwrite(buf + off, 1, len, f) == len && fwrite(c, 1, 4, f) == 4;
  }
  if (n == 0 && *wrote) { /* an empty section still has its CRC */
    unsigned char c[4];
    ag__put32(c, 0);
    *wrote = fwrite(c, 1, 4, f) == 4;
  }
}

ag_status ag__parts_read(FILE *f, void *data, size_t n, const char *fn, const char *path, const char *what) {
  unsigned char *buf = data;
  size_t off = 0;
  do {
    size_t len = n - off < AG_TRANSFER_PART_BYTES ? n - off : AG_TRANSFER_PART_BYTES;
    unsigned char c[4];
    if (fread(buf + off, 1, len, f) != len || fread(c, 1, 4, f) != 4)
      return ag__fail(AG_ERR_IO, "%s: %s is truncated in %s", fn, path, what);
    if (ag__get32(c) != ag__crc32_add(0, buf + off, len))
      return ag__fail(AG_ERR_IO, "%s: %s: %s fail their CRC-32 (the file is damaged)", fn, path, what);
    off += len;
  } while (off < n);
  return AG_OK;
}

static size_t tensor_bytes(const ag_tensor *t) {
  return (size_t)ag_tensor_numel(t) * ag_dtype_size(ag_tensor_dtype(t));
}

size_t ag__tensors_most(ag_tensor *const *ts, int T, size_t least) {
  size_t most = least > 8 ? least : 8;
  for (int i = 0; i < T; i++)
    if (tensor_bytes(ts[i]) > most) most = tensor_bytes(ts[i]);
  return most;
}

void ag__entries_put(unsigned char *e, ag_tensor *const *ts, int T) {
  for (int i = 0; i < T; i++, e += AG__ENTRY) {
    ag__put64(e, (uint64_t)ag_tensor_rows(ts[i]));
    ag__put64(e + 8, (uint64_t)ag_tensor_cols(ts[i]));
    ag__put32(e + 16, (uint32_t)ag_tensor_dtype(ts[i]));
    ag__put32(e + 20, 0);
  }
}

int ag__entries_check(const unsigned char *e, const int64_t (*want)[3], int T, uint64_t *bytes,
                      uint64_t *need) {
  for (int i = 0; i < T; i++, e += AG__ENTRY) {
    if ((int64_t)ag__get64(e) != want[i][0] || (int64_t)ag__get64(e + 8) != want[i][1] ||
        ag__get32(e + 16) != (uint32_t)want[i][2] || ag__get32(e + 20))
      return -1;
    uint64_t b = (uint64_t)want[i][0] * (uint64_t)want[i][1] * ag_dtype_size((ag_dtype)want[i][2]);
    *bytes += b;
    *need += ag__parts_bytes(b);
  }
  return 0;
}

int ag__entries_match(const unsigned char *e, ag_tensor *const *ts, int T) {
  for (int i = 0; i < T; i++, e += AG__ENTRY)
    if ((int64_t)ag__get64(e) != ag_tensor_rows(ts[i]) ||
        (int64_t)ag__get64(e + 8) != ag_tensor_cols(ts[i]) ||
        ag__get32(e + 16) != (uint32_t)ag_tensor_dtype(ts[i]))
      return 0;
  return 1;
}

ag_status ag__tensors_read(FILE *f, ag_tensor *const *ts, int T, unsigned char *buf, const char *fn,
                           const char *path) {
  ag_status s = AG_OK;
  for (int i = 0; !s && i < T; i++) {
    size_t es = ag_dtype_size(ag_tensor_dtype(ts[i])), n = (size_t)ag_tensor_numel(ts[i]);
    if (!(s = ag__parts_read(f, buf, n * es, fn, path, "a tensor's values"))) {
      swap_order(buf, n, es);
      s = ag_tensor_write(ts[i], buf, n * es);
    }
  }
  return s;
}

ag_status ag__agent_file_write(const char *path, const char *fn, const unsigned char *h, size_t H,
                               ag_tensor *const *ts, int T, const void *const *sec, const size_t *sec_n,
                               int ns, const ag_replay *table) {
  size_t most = ag__tensors_most(ts, T, 8);
  unsigned char *buf = ag__malloc(most);
  if (!buf) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory (%zu bytes)", fn, most);
  ag__afile a;
  ag_status s = ag__afile_open(&a, path, fn);
  if (s) {
    free(buf);
    return s;
  }
  int wrote = fwrite(h, 1, H, a.f) == H;
  for (int i = 0; i < T && !s && wrote; i++) {
    size_t es = ag_dtype_size(ag_tensor_dtype(ts[i])), n = (size_t)ag_tensor_numel(ts[i]);
    if ((s = ag_tensor_read(ts[i], buf, n * es))) break;
    swap_order(buf, n, es);
    ag__parts_write(a.f, buf, n * es, &wrote);
  }
  free(buf);
  for (int i = 0; i < ns && !s && wrote; i++) ag__parts_write(a.f, sec[i], sec_n[i], &wrote);
  if (!s && wrote) s = ag__replay_write(table, a.f, AG_TRANSFER_PART_BYTES, fn, path);
  return ag__afile_finish(&a, s, wrote, fn);
}

ag_status ag__file_bad(const ag__file_kind *k, const char *path, const char *what) {
  return ag__fail(AG_ERR_IO, "%s: %s is not %s file of this version: %s", k->fn, path, k->noun, what);
}

ag_status ag__header_read(ag_ctx *ctx, FILE *f, const char *path, const void *out_arg, const ag__file_kind *k,
                          uint64_t *len, unsigned char **out, uint32_t *T) {
  const char *fn = k->fn;
  if (!ctx || !f || !path || !out_arg)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: ctx, path and out must not be NULL", fn);
  ag_status s = ag__not_recording(ctx, fn);
  if (!s) s = ag__stream_left(f, fn, path, k->noun, len);
  if (s) return s;
  unsigned char *h = ag__malloc(k->fixed);
  if (!h) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  size_t got = *len < k->fixed ? (size_t)*len : k->fixed;
  if (*len < 8 || fread(h, 1, got, f) < (*len < 8 ? *len : 8)) s = ag__file_bad(k, path, "truncated");
  if (!s && memcmp(h, k->magic, 8))
    s = ag__fail(AG_ERR_IO, "%s: %s is not %s file (no %.8s magic)", fn, path, k->noun, k->magic);
  if (!s && *len < k->fixed) s = ag__file_bad(k, path, "truncated in its header");
  uint32_t version = s ? 0 : ag__get32(h + 8), H = s ? 0 : ag__get32(h + 12);
  *T = s ? 0 : ag__get32(h + k->t_at);
  if (!s && version > k->version)
    s = ag__fail(AG_ERR_UNSUPPORTED, "%s: %s has format version %u; this library reads version %u", fn, path,
                 version, k->version);
  if (!s && version == 0) s = ag__file_bad(k, path, "format version 0");
  if (!s && (*T > k->max_t || H != k->fixed + AG__ENTRY * (uint64_t)*T + 4))
    s = ag__file_bad(k, path, "a header length or tensor count out of range");
  if (!s && *len < H) s = ag__file_bad(k, path, "truncated in its header");
  unsigned char *all = s ? NULL : ag__realloc(h, H);
  if (!s && !all) s = ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  if (all) h = all;
  if (!s && fread(h + k->fixed, 1, H - k->fixed, f) != H - k->fixed)
    s = ag__file_bad(k, path, "truncated in its header");
  if (!s && ag__get32(h + H - 4) != ag__crc32_add(0, h, H - 4))
    s = ag__file_bad(k, path, "its header fails its CRC-32 (the file is damaged)");
  if (s) {
    free(h);
    return s;
  }
  *out = h;
  return AG_OK;
}

ag_status ag__agent_table_read(ag_ctx *ctx, FILE *f, const char *path, size_t max_bytes,
                               const ag__file_kind *k, const ag_replay *mine, int64_t capacity,
                               ag_replay **out) {
  const char *fn = k->fn;
  char other[128];
  snprintf(other, sizeof other, "its replay table is not %s (fields, storage, capacity or sampler)", k->own);
  ag_per *mp = ag_replay_per(mine);
  uint64_t left = 0;
  ag_status s = ag__stream_left(f, fn, path, k->noun, &left);
  /* the image's header against the agent's table before anything is made for it */
  if (!s && ag__replay_image_differs(f, left, mine, capacity)) s = ag__file_bad(k, path, other);
  ag_replay *r = NULL;
  if (!s && (s = ag__replay_read(ctx, f, path, left, max_bytes, fn, &r))) {
    char why[512]; /* the table's refusal, as this call's */
    snprintf(why, sizeof why, "%s", ag_last_error());
    return ag__fail(s, "%s: the replay table in %s: %s", fn, path, why);
  }
  if (s) return s;
  /* the table must be the one the agent makes, of the file's capacity */
  ag_per *rp = ag_replay_per(r);
  int same = ag_replay_n_fields(r) == ag_replay_n_fields(mine) &&
             ag_replay_storage(r) == ag_replay_storage(mine) && ag_replay_capacity(r) == capacity &&
             ag_replay_min_size(r) == ag_replay_min_size(mine) && (rp != NULL) == (mp != NULL) &&
             (!rp || ag__per_alpha(rp) == ag__per_alpha(mp));
  for (int i = 0; same && i < ag_replay_n_fields(r); i++) {
    ag_field a, b;
    same = !ag_replay_field_at(r, i, &a) && !ag_replay_field_at(mine, i, &b) && a.width == b.width &&
           a.dtype == b.dtype && !strcmp(a.name, b.name);
  }
  if (!same) {
    ag_replay_free(r);
    return ag__file_bad(k, path, other);
  }
  *out = r;
  return AG_OK;
}

ag_status ag__run_state_set(void **state, size_t *len, const void *data, size_t n, const char *fn) {
  if (n > AG__MAX_RUN_STATE)
    return ag__fail(AG_ERR_INVALID_ARG, "%s: n = %zu bytes is more than 2^30", fn, n);
  void *p = NULL;
  if (n) {
    if (!(p = ag__malloc(n))) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    memcpy(p, data, n);
  }
  free(*state);
  *state = p;
  *len = n;
  return AG_OK;
}
