/* agfile_legacy.c — the files of agrl 0.1.0, read into the container's form.
 *
 * The one place that knows the old layouts. Each is parsed into the keys
 * and sections that the container of the same kind has (docs/container.md
 * lists them), with each section's offset, length and check as the old
 * file has them; the loaders then take an old file as they take a new one.
 * As for the container, the whole header is checked against the limits and
 * the stream's length before anything is allocated.
 *
 * Formats read here: AGRLMLP1 and AGRLMLP2 (models, the layouts of 0.1.0's
 * agrl/nn.h).
 */
#include "base/agfile.h"

#include <errno.h>

#define CORRUPT(...) ag__fail(AG_ERR_IO, __VA_ARGS__)

static ag_status read_exact(FILE *f, void *dst, size_t n, const char *fn, const char *name) {
  if (fread(dst, 1, n, f) == n) return AG_OK;
  if (ferror(f)) return ag__fail(AG_ERR_IO, "%s: reading %s failed: %s", fn, name, strerror(errno));
  return ag__fail(AG_ERR_IO, "%s: %s is truncated: it ended before the length it had when the load began", fn,
                  name);
}

/* ---- models: AGRLMLP1, AGRLMLP2 ----
 *   0 "AGRLMLP" + '1' or '2'; 8 i32 n_sizes (2..64); 12 i32 hidden; 16 i32 last;
 *   version 2: 20 u32 reserved 0; then i64 sizes[n]; version 2: u32 CRC-32
 *   of the header; then W0, b0, W1, b1 ... as f32 (version 2: each followed
 *   by the CRC-32 of its bytes). */

#define MLP_MAX_SIZES 64
#define MLP_PART ((uint64_t)1 << 20) /* the old loader's part: 1 MB */
#define MLP_V1_FIXED 20
#define MLP_V2_FIXED 24

static ag_status mlp_read(ag__agf *a, FILE *f, uint64_t left, const char *fn, const char *name) {
  unsigned char hb[MLP_V2_FIXED + 8 * MLP_MAX_SIZES + 4];
  ag_status s = read_exact(f, hb, 8, fn, name);
  if (s) return s;
  int version;
  if (hb[7] == '1' || hb[7] == '2') {
    version = hb[7] - '0';
  } else if (hb[7] >= '3' && hb[7] <= '9') {
    return ag__fail(AG_ERR_UNSUPPORTED,
                    "%s: %s is an agrl MLP file of version %c, which this library cannot read "
                    "(it reads versions 1 and 2, and the agrl container)",
                    fn, name, hb[7]);
  } else {
    return CORRUPT("%s: %s is not an agrl MLP file (byte 7, 0x%02x, is not a version number)", fn, name, hb[7]);
  }
  uint64_t fixed = version == 1 ? MLP_V1_FIXED : MLP_V2_FIXED;
  if (left < fixed)
    return CORRUPT("%s: %s is truncated: %llu bytes, shorter than the %llu-byte start of a version-%d header", fn,
                   name, (unsigned long long)left, (unsigned long long)fixed, version);
  if ((s = read_exact(f, hb + 8, (size_t)fixed - 8, fn, name))) return s;
  int32_t n = (int32_t)ag__get32(hb + 8);
  if (n < 2 || n > MLP_MAX_SIZES)
    return CORRUPT("%s: %s is corrupt: n_sizes = %d, outside 2..%d", fn, name, (int)n, MLP_MAX_SIZES);
  uint64_t hbytes = fixed + 8 * (uint64_t)n + (version == 2 ? 4 : 0);
  if (left < hbytes)
    return CORRUPT("%s: %s is truncated: %llu bytes, shorter than the %llu-byte header of %d sizes", fn, name,
                   (unsigned long long)left, (unsigned long long)hbytes, (int)n);
  if ((s = read_exact(f, hb + fixed, (size_t)(hbytes - fixed), fn, name))) return s;
  if (version == 2) {
    uint32_t stored = ag__get32(hb + hbytes - 4), computed = ag__crc32_add(0, hb, (size_t)hbytes - 4);
    if (stored != computed)
      return CORRUPT("%s: %s is corrupt: its header fails its CRC-32 check (stored %08x, computed %08x)", fn,
                     name, (unsigned)stored, (unsigned)computed);
    if (ag__get32(hb + 20) != 0)
      return CORRUPT("%s: %s is corrupt: the reserved header word at byte 20 is %u, not 0", fn, name,
                     (unsigned)ag__get32(hb + 20));
  }
  int64_t sizes[MLP_MAX_SIZES];
  for (int i = 0; i < n; i++) {
    int64_t v = (int64_t)ag__get64(hb + fixed + 8 * i);
    if (v < 1 || v > INT32_MAX)
      return CORRUPT("%s: %s is corrupt: sizes[%d] = %lld, outside 1..%d", fn, name, i, (long long)v, INT32_MAX);
    sizes[i] = v;
  }
  /* < 2^62 bytes a weight matrix, at most 126 of them: the sum is checked step by step */
  uint64_t total = hbytes, per_crc = version == 2 ? 4 : 0;
  for (int k = 0; k < 2 * (n - 1); k++) {
    uint64_t count = (uint64_t)sizes[k / 2 + 1] * (uint64_t)(k % 2 ? 1 : sizes[k / 2]);
    if (count > (INT64_MAX - per_crc - total) / 4)
      return CORRUPT("%s: %s is corrupt: its sizes describe more than 2^63 bytes of parameters", fn, name);
    total += 4 * count + per_crc;
  }
  if (left < total)
    return CORRUPT("%s: %s is truncated: %llu bytes, where its header's sizes need %llu (%llu missing)", fn, name,
                   (unsigned long long)left, (unsigned long long)total, (unsigned long long)(total - left));
  if (left > total)
    return CORRUPT("%s: %s is corrupt: %llu trailing bytes follow the %llu bytes its header describes", fn, name,
                   (unsigned long long)(left - total), (unsigned long long)total);

  a->format = version == 1 ? "AGRLMLP1 (agrl 0.1.0 model, version 1)" : "AGRLMLP2 (agrl 0.1.0 model, version 2)";
  ag__agf_set_str(a, "kind", "mlp");
  ag__agf_set_i64(a, "mlp.version", version);
  ag__agf_set_i64(a, "mlp.hidden", (int32_t)ag__get32(hb + 12));
  ag__agf_set_i64(a, "mlp.last", (int32_t)ag__get32(hb + 16));
  ag__agf_set_i64s(a, "mlp.sizes", sizes, (uint32_t)n);
  uint64_t at = hbytes;
  for (int k = 0; k < 2 * (n - 1); k++) {
    char pname[16];
    snprintf(pname, sizeof pname, "%c%d", k % 2 ? 'b' : 'W', k / 2);
    int64_t dims[2] = {sizes[k / 2 + 1], k % 2 ? 1 : sizes[k / 2]};
    ag__agf_add_tensor(a, pname, AG_F32, 2, dims, NULL, NULL);
    if (a->failed) break;
    ag__agf_section *sec = &a->sections[a->n_sections - 1];
    sec->offset = at, sec->part = MLP_PART;
    sec->crc = version == 2 ? AG__AGF_CRC_WHOLE : AG__AGF_CRC_NONE;
    at += sec->bytes + per_crc;
  }
  if (a->failed) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  a->part = MLP_PART;
  a->total = total;
  return AG_OK;
}

ag_status ag__agf_legacy_read(ag__agf *a, FILE *f, uint64_t left, const unsigned char magic[8], int *known,
                              const char *fn, const char *name) {
  *known = 0;
  if (!memcmp(magic, "AGRLMLP", 7)) {
    *known = 1;
    return mlp_read(a, f, left, fn, name);
  }
  return AG_OK;
}
