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
 * agrl/nn.h), AGRLRPL1 (replay tables, alone or inside other files),
 * AGRLDQN1 (DQN agents, whose replay table follows as its own image),
 * AGRLACR1 (SAC/TD3 agents, likewise), AGRLSHD1 (replay shards, whose
 * local table follows as its own image), and the run states of training
 * loops that agents' files held (AGRLRUN1, AGRLRUNA).
 */
#include "base/agfile.h"

#include <errno.h>
#include <stdlib.h>

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

/* The first 16 bytes of a 0.1.0 replay or DQN file (magic, u32 version,
 * u32 header length) into fixed, the version checked: 1 is read, a newer
 * one is AG_ERR_UNSUPPORTED, 0 is corrupt. noun names the file's kind. */
static ag_status read_v1_start(FILE *f, uint64_t left, unsigned char fixed[16], const char *noun,
                               const char *fn, const char *name) {
  if (left < 16)
    return CORRUPT("%s: %s is truncated: %llu bytes, shorter than a %s header", fn, name,
                   (unsigned long long)left, noun);
  ag_status s = read_exact(f, fixed, 16, fn, name);
  if (s) return s;
  uint32_t version = ag__get32(fixed + 8);
  if (version > 1)
    return ag__fail(AG_ERR_UNSUPPORTED,
                    "%s: %s has format version %u; this library reads version 1 and the agrl container", fn,
                    name, (unsigned)version);
  if (version != 1)
    return CORRUPT("%s: %s is corrupt: format version %u (versions start at 1)", fn, name, (unsigned)version);
  return AG_OK;
}

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
    return CORRUPT("%s: %s is not an agrl MLP file (byte 7, 0x%02x, is not a version number)", fn, name,
                   hb[7]);
  }
  uint64_t fixed = version == 1 ? MLP_V1_FIXED : MLP_V2_FIXED;
  if (left < fixed)
    return CORRUPT("%s: %s is truncated: %llu bytes, shorter than the %llu-byte start of a version-%d header",
                   fn, name, (unsigned long long)left, (unsigned long long)fixed, version);
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
      return CORRUPT("%s: %s is corrupt: sizes[%d] = %lld, outside 1..%d", fn, name, i, (long long)v,
                     INT32_MAX);
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
  if ((s = ag__agf_check_length(left, total, 0, fn, name))) return s;

  a->format =
      version == 1 ? "AGRLMLP1 (agrl 0.1.0 model, version 1)" : "AGRLMLP2 (agrl 0.1.0 model, version 2)";
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

/* The whole header of a 0.1.0 replay, DQN, shard or SAC/TD3 file: its first
 * 16 bytes (read_v1_start), then its length (bytes 12..15) checked against
 * lo..hi with length % mod == rem and against the stream's, the rest read
 * and its CRC-32 (the last 4 bytes) checked; into *hb (the caller frees it)
 * and *hbytes. Nothing is allocated before the length is checked. */
static ag_status read_v1_header(FILE *f, uint64_t left, const char *noun, uint64_t lo, uint64_t hi,
                                uint64_t mod, uint64_t rem, const char *fn, const char *name,
                                unsigned char **hb, uint64_t *hbytes) {
  unsigned char fixed[16];
  *hb = NULL;
  ag_status s = read_v1_start(f, left, fixed, noun, fn, name);
  if (s) return s;
  const uint64_t n = ag__get32(fixed + 12);
  if (n < lo || n > hi || n % mod != rem)
    return CORRUPT("%s: %s is corrupt: the header length %llu is not a valid one", fn, name,
                   (unsigned long long)n);
  if (n > left)
    return CORRUPT("%s: %s is truncated: %llu bytes, shorter than its %llu-byte header", fn, name,
                   (unsigned long long)left, (unsigned long long)n);
  unsigned char *b = ag__malloc((size_t)n); /* no more than the file holds */
  if (!b) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  memcpy(b, fixed, 16);
  if (!(s = read_exact(f, b + 16, (size_t)n - 16, fn, name))) {
    uint32_t stored = ag__get32(b + n - 4), computed = ag__crc32_add(0, b, (size_t)n - 4);
    if (stored != computed)
      s = CORRUPT("%s: %s is corrupt: its header fails its CRC-32 check (stored %08x, computed %08x)", fn,
                  name, (unsigned)stored, (unsigned)computed);
  }
  if (s) {
    free(b);
    return s;
  }
  *hb = b;
  *hbytes = n;
  return AG_OK;
}

/* The end of reading a file whose header is a head (its table follows):
 * the stream back at the header's first byte. */
static ag_status back_to_head(ag__agf *a, FILE *f, ag_status s, const char *fn, const char *name) {
  if (!s && fseeko(f, a->base, SEEK_SET))
    s = ag__fail(AG_ERR_IO, "%s: %s: cannot seek: %s", fn, name, strerror(errno));
  return s;
}

/* ---- replay tables: AGRLRPL1 ----
 *   0 "AGRLRPL1"; 8 u32 version 1; 12 u32 H; 16 char[32] library version;
 *   48 u32 n_fields; 52 u32 storage; 56 i64 capacity, min_size, size,
 *   position, rows, part; 104 u32 sampler (0, 1 PER); 108 f32 alpha;
 *   112 f32 max priority; 116 u32 0; 120 u64 columns' offset, bytes;
 *   136 u64 leaves' offset, bytes; 152 u64 total; 160 fields: i64 width,
 *   u32 dtype, u32 name length, the name padded to 8 bytes; H-4 CRC-32.
 *   Then the columns [rows, size] and the leaves [size] f64, in parts of
 *   `part` bytes each followed by its CRC-32. */

#define RPL_FIXED 160
#define RPL_MAX_FIELDS 4096
#define RPL_MAX_NAME 1024
#define RPL_HEADER_MAX ((uint64_t)RPL_FIXED + (uint64_t)RPL_MAX_FIELDS * (16 + RPL_MAX_NAME) + 4)

static uint64_t rpl_entry_bytes(uint64_t n) { return 16 + ((n + 7) & ~(uint64_t)7); }
static uint64_t rpl_section_bytes(uint64_t n, uint64_t part) { return n + 4 * ((n + part - 1) / part); }

/* The layout of an old replay image: what the sections need, checked; the
 * values themselves are checked by the replay's loader from the keys. */
static ag_status rpl_parse(ag__agf *a, const unsigned char *hb, uint64_t hbytes, uint64_t left,
                           const char *fn, const char *name) {
  const unsigned char *v = hb + 16;
  if (!memchr(v, 0, 32))
    return CORRUPT("%s: %s is corrupt: the library version at byte 16 has no end", fn, name);
  for (size_t i = strlen((const char *)v); i < 32; i++)
    if (v[i])
      return CORRUPT("%s: %s is corrupt: byte %zu after the library version is not 0", fn, name, 16 + i);
  uint64_t nf = ag__get32(hb + 48), st = ag__get32(hb + 52);
  if (nf < 1 || nf > AG__AGF_MAX_ARRAY)
    return CORRUPT("%s: %s is corrupt: n_fields = %llu, outside 1..%d", fn, name, (unsigned long long)nf,
                   AG__AGF_MAX_ARRAY);
  if (st > AG_I64)
    return CORRUPT("%s: %s is corrupt: storage dtype code %llu", fn, name, (unsigned long long)st);
  int64_t cap = (int64_t)ag__get64(hb + 56), size = (int64_t)ag__get64(hb + 72),
          rows = (int64_t)ag__get64(hb + 88);
  uint64_t part = ag__get64(hb + 96);
  if (part < AG__AGF_PART_MIN || part > AG__AGF_PART_MAX || part % AG__AGF_PART_MIN)
    return CORRUPT("%s: %s is corrupt: part length %llu is not a multiple of %d up to %zu", fn, name,
                   (unsigned long long)part, AG__AGF_PART_MIN, AG__AGF_PART_MAX);
  uint32_t sampler = ag__get32(hb + 104);
  if (sampler > 1)
    return CORRUPT("%s: %s is corrupt: sampler code %u is not 0 (none) or 1 (prioritized)", fn, name,
                   sampler);
  if (ag__get32(hb + 116))
    return CORRUPT("%s: %s is corrupt: the reserved header word at byte 116 is not 0", fn, name);
  if (cap < 1 || size < 0 || size > cap || rows < 1 || rows > (int64_t)1 << 42)
    return CORRUPT("%s: %s is corrupt: capacity %lld, size %lld, rows %lld", fn, name, (long long)cap,
                   (long long)size, (long long)rows);
  uint64_t es = ag_dtype_size((ag_dtype)st), cb = 0, lb = sampler ? 8 * (uint64_t)size : 0;
  if ((uint64_t)size > ((uint64_t)1 << 62) / es / (uint64_t)rows)
    return CORRUPT("%s: %s is corrupt: %lld rows of %lld columns exceed 2^62 bytes", fn, name,
                   (long long)rows, (long long)size);
  cb = (uint64_t)size * (uint64_t)rows * es;
  /* the fields: within the header, names without NUL and padded with 0 */
  int64_t w[AG__AGF_MAX_ARRAY], dt[AG__AGF_MAX_ARRAY];
  uint64_t at = RPL_FIXED;
  for (uint64_t i = 0; i < nf; i++) {
    if (at + 16 > hbytes - 4)
      return CORRUPT("%s: %s is corrupt: its header ends inside field %llu", fn, name, (unsigned long long)i);
    uint64_t n = ag__get32(hb + at + 12);
    if (n < 1 || n > RPL_MAX_NAME || at + rpl_entry_bytes(n) > hbytes - 4)
      return CORRUPT("%s: %s is corrupt: field %llu's name length %llu does not fit its header", fn, name,
                     (unsigned long long)i, (unsigned long long)n);
    const unsigned char *nm = hb + at + 16;
    if (memchr(nm, 0, n))
      return CORRUPT("%s: %s is corrupt: field %llu's name holds a NUL byte", fn, name,
                     (unsigned long long)i);
    for (uint64_t k = n; k < rpl_entry_bytes(n) - 16; k++)
      if (nm[k])
        return CORRUPT("%s: %s is corrupt: the padding after field %llu's name is not 0", fn, name,
                       (unsigned long long)i);
    w[i] = (int64_t)ag__get64(hb + at), dt[i] = ag__get32(hb + at + 8);
    at += rpl_entry_bytes(n);
  }
  if (at != hbytes - 4)
    return CORRUPT("%s: %s is corrupt: %llu header bytes follow the last field", fn, name,
                   (unsigned long long)(hbytes - 4 - at));
  uint64_t coff = ag__get64(hb + 120), loff = ag__get64(hb + 136), total = ag__get64(hb + 152);
  uint64_t want_loff = hbytes + rpl_section_bytes(cb, part),
           want_total = want_loff + rpl_section_bytes(lb, part);
  if (coff != hbytes || ag__get64(hb + 128) != cb || loff != want_loff || ag__get64(hb + 144) != lb ||
      total != want_total)
    return CORRUPT("%s: %s is corrupt: its section offsets and lengths do not match its sizes", fn, name);
  ag_status s = ag__agf_check_length(left, total, 0, fn, name);
  if (s) return s;

  a->format = "AGRLRPL1 (agrl 0.1.0 replay table)";
  ag__agf_set_str(a, "kind", "replay");
  ag__agf_set_i64(a, "replay.version", 1);
  ag__agf_set_i64(a, "replay.storage", (int64_t)st);
  ag__agf_set_i64(a, "replay.capacity", cap);
  ag__agf_set_i64(a, "replay.min_size", (int64_t)ag__get64(hb + 64));
  ag__agf_set_i64(a, "replay.size", size);
  ag__agf_set_i64(a, "replay.position", (int64_t)ag__get64(hb + 80));
  at = RPL_FIXED;
  for (uint64_t i = 0; i < nf; i++) {
    uint64_t n = ag__get32(hb + at + 12);
    char key[32], nm[RPL_MAX_NAME + 1];
    memcpy(nm, hb + at + 16, n), nm[n] = 0;
    snprintf(key, sizeof key, "replay.field.%llu", (unsigned long long)i);
    ag__agf_set_str(a, key, nm);
    at += rpl_entry_bytes(n);
  }
  ag__agf_set_i64s(a, "replay.widths", w, (uint32_t)nf);
  ag__agf_set_i64s(a, "replay.dtypes", dt, (uint32_t)nf);
  ag__agf_set_str(a, "replay.sampler", sampler ? "per" : "none");
  if (sampler) {
    ag__agf_set_f64(a, "replay.per.alpha", (double)ag__get_f32(hb + 108));
    ag__agf_set_f64(a, "replay.per.max_priority", (double)ag__get_f32(hb + 112));
  } else if (ag__get32(hb + 108) || ag__get32(hb + 112)) {
    return CORRUPT("%s: %s is corrupt: a table without a sampler has a non-zero alpha or max priority", fn,
                   name);
  }
  const int64_t cdims[2] = {rows, size}, ldims[1] = {size};
  ag__agf_add_tensor(a, "columns", (ag_dtype)st, 2, cdims, NULL, NULL);
  if (sampler) ag__agf_add_tensor(a, "leaves", AG__AGF_F64_DT, 1, ldims, NULL, NULL);
  if (a->failed) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  for (int i = 0; i < a->n_sections; i++) {
    ag__agf_section *sec = &a->sections[i];
    sec->offset = i ? loff : coff, sec->bytes = i ? lb : cb, sec->part = part, sec->crc = AG__AGF_CRC_PARTS;
  }
  a->part = part;
  a->total = total;
  return AG_OK;
}

static ag_status rpl_read(ag__agf *a, FILE *f, uint64_t left, const char *fn, const char *name) {
  unsigned char *hb;
  uint64_t hbytes;
  ag_status s = read_v1_header(f, left, "replay file's", RPL_FIXED + 4 + 24, RPL_HEADER_MAX, 8, 4, fn, name,
                               &hb, &hbytes);
  if (s) return s;
  s = rpl_parse(a, hb, hbytes, left, fn, name);
  free(hb);
  return s;
}

/* ---- DQN agents: AGRLDQN1 ----
 *   0 "AGRLDQN1"; 8 u32 version 1; 12 u32 H = 488 + 24 T + 4; 16 char[32]
 *   library version; 48 u32 n_hidden (0..8); 52 u32 flags (1 double_dqn,
 *   2 huber, 4 fused, 8 per); 56 u64 hidden[8] (0 past n_hidden); 120 f32
 *   lr, gamma, tau, exploration_fraction, eps_start, eps_end, max_grad_norm;
 *   148 u32 0; 152 i64 batch_size, buffer_size, learning_starts, train_freq,
 *   gradient_steps, target_update_interval; 200 u64 seed; 208 i64 obs_dim,
 *   n_actions, total_steps, updates, updates_at_target; 248 u64 host rng;
 *   256 u64 R, the run state's bytes; 264 u32 T; 268 u32 0; 272 f32
 *   per_alpha, per_beta, per_eps, beta now; 288 u32 n_step; 292 u32 0;
 *   296 i64 n_envs; 304..487 0; 488 T entries of u64 rows, u64 cols, u32
 *   dtype, u32 0; H-4 CRC-32. Then each tensor's values and the run state,
 *   in parts of 16 MiB each followed by its CRC-32 (an empty run state: one
 *   CRC-32, 0), then the replay table's image. */

#define DQN_FIXED 488
#define DQN_MAX_TENSORS 256
#define DQN_PART ((uint64_t)AG__AGF_PART_MAX)
#define DQN_MAX_RUN ((uint64_t)1 << 30)

const char *ag__agf_dqn_section(int i, int L, char *buf) {
  static const char *const upd[4] = {"W%d", "grad.W%d", "b%d", "grad.b%d"};
  static const char *const mom[4] = {"adam.m.W%d", "adam.v.W%d", "adam.m.b%d", "adam.v.b%d"};
  static const char *const tgt[2] = {"target.W%d", "target.b%d"};
  if (i < 0 || L < 1) return NULL;
  if (i < 4 * L)
    snprintf(buf, 32, upd[i % 4], i / 4);
  else if (i == 4 * L)
    snprintf(buf, 32, "rng.counter");
  else if (i == 4 * L + 1)
    snprintf(buf, 32, "adam.state");
  else if (i < 8 * L + 2)
    snprintf(buf, 32, mom[(i - 4 * L - 2) % 4], (i - 4 * L - 2) / 4);
  else if (i < 10 * L + 2)
    snprintf(buf, 32, tgt[(i - 8 * L - 2) % 2], (i - 8 * L - 2) / 2);
  else
    return NULL;
  return buf;
}

static uint64_t dqn_parts(uint64_t n) { return n + 4 * (n ? (n + DQN_PART - 1) / DQN_PART : 1); }

static ag_status dqn_parse(ag__agf *a, FILE *f, const unsigned char *hb, uint64_t hbytes, uint64_t left,
                           const char *fn, const char *name) {
  const unsigned char *v = hb + 16;
  if (!memchr(v, 0, 32))
    return CORRUPT("%s: %s is corrupt: the library version at byte 16 has no end", fn, name);
  uint32_t nh = ag__get32(hb + 48), flags = ag__get32(hb + 52), T = ag__get32(hb + 264);
  if (nh > 8 || flags > 15)
    return CORRUPT("%s: %s is corrupt: n_hidden %u or flags %u out of range", fn, name, nh, flags);
  int L = (int)nh + 1;
  if (T != (uint32_t)(10 * L + 2))
    return CORRUPT("%s: %s is corrupt: %u tensors, where %u hidden layers make %d", fn, name, T, nh,
                   10 * L + 2);
  int64_t sizes[10];
  sizes[0] = (int64_t)ag__get64(hb + 208);
  sizes[L] = (int64_t)ag__get64(hb + 216);
  for (uint32_t i = 0; i < 8; i++) {
    uint64_t h = ag__get64(hb + 56 + 8 * i);
    if (i >= nh && h) return CORRUPT("%s: %s is corrupt: an unused hidden size is not 0", fn, name);
    if (i < nh) sizes[i + 1] = (int64_t)h;
  }
  if (ag__get32(hb + 148) || ag__get32(hb + 268) || ag__get32(hb + 292))
    return CORRUPT("%s: %s is corrupt: reserved bytes are not 0", fn, name);
  for (int i = 304; i < DQN_FIXED; i++)
    if (hb[i]) return CORRUPT("%s: %s is corrupt: reserved byte %d is not 0", fn, name, i);
  uint64_t R = ag__get64(hb + 256);
  if (R > DQN_MAX_RUN) return CORRUPT("%s: %s is corrupt: the run state is longer than 2^30 bytes", fn, name);
  /* the tensors: known dtypes, sizes within 2^62 bytes each, reserved 0 */
  uint64_t at = hbytes;
  for (uint32_t i = 0; i < T; i++) {
    const unsigned char *e = hb + DQN_FIXED + 24 * (uint64_t)i;
    uint64_t r = ag__get64(e), c = ag__get64(e + 8), dt = ag__get32(e + 16);
    if (ag__get32(e + 20) || dt > AG_I64 || r < 1 || c < 1 || r > ((uint64_t)1 << 40) ||
        c > ((uint64_t)1 << 40) || c > AG__AGF_MAX_SECTION / 8 / r)
      return CORRUPT("%s: %s is corrupt: tensor %u's entry (%llu x %llu, dtype %llu)", fn, name, i,
                     (unsigned long long)r, (unsigned long long)c, (unsigned long long)dt);
    at += dqn_parts(r * c * ag__agf_dtype_size((ag_dtype)dt)); /* < 2^63 + 2^62: no overflow */
    if (at > left)
      return CORRUPT("%s: %s is truncated: %llu bytes, shorter than its tensors up to tensor %u", fn, name,
                     (unsigned long long)left, i);
  }
  uint64_t run_at = at;
  at += dqn_parts(R);
  if (left < at)
    return CORRUPT("%s: %s is truncated: %llu bytes, where its header describes %llu before its replay table",
                   fn, name, (unsigned long long)left, (unsigned long long)at);
  if (!R) { /* the CRC-32 of an empty run state: 0 */
    unsigned char c[4];
    if (fseeko(f, a->base + (int64_t)run_at, SEEK_SET) || fread(c, 1, 4, f) != 4 ||
        fseeko(f, a->base, SEEK_SET))
      return ag__fail(AG_ERR_IO, "%s: reading %s failed at its run state", fn, name);
    if (ag__get32(c)) return CORRUPT("%s: %s is corrupt: the empty run state's CRC-32 is not 0", fn, name);
  }

  a->format = "AGRLDQN1 (agrl 0.1.0 DQN agent)";
  ag__agf_set_str(a, "kind", "dqn");
  ag__agf_set_i64(a, "dqn.version", 1);
  ag__agf_set_str(a, "dqn.library", (const char *)v);
  ag__agf_set_i64s(a, "dqn.sizes", sizes, (uint32_t)(L + 1));
  static const char *const fl[4] = {"dqn.double_dqn", "dqn.huber", "dqn.fused", "dqn.per"};
  for (int i = 0; i < 4; i++) ag__agf_set_i64(a, fl[i], (flags >> i) & 1);
  static const char *const fs[7] = {
      "dqn.lr",        "dqn.gamma",   "dqn.tau",          "dqn.exploration_fraction",
      "dqn.eps_start", "dqn.eps_end", "dqn.max_grad_norm"};
  for (int i = 0; i < 7; i++) ag__agf_set_f64(a, fs[i], (double)ag__get_f32(hb + 120 + 4 * i));
  static const char *const is[6] = {"dqn.batch_size", "dqn.buffer_size",    "dqn.learning_starts",
                                    "dqn.train_freq", "dqn.gradient_steps", "dqn.target_update_interval"};
  for (int i = 0; i < 6; i++) ag__agf_set_i64(a, is[i], (int64_t)ag__get64(hb + 152 + 8 * i));
  ag__agf_set_i64(a, "dqn.n_step", (int64_t)ag__get32(hb + 288));
  ag__agf_set_i64(a, "dqn.n_envs", (int64_t)ag__get64(hb + 296));
  static const char *const ps[4] = {"dqn.per_alpha", "dqn.per_beta", "dqn.per_eps", "dqn.beta"};
  for (int i = 0; i < 4; i++) ag__agf_set_f64(a, ps[i], (double)ag__get_f32(hb + 272 + 4 * i));
  ag__agf_set_u64(a, "dqn.seed", ag__get64(hb + 200));
  ag__agf_set_i64(a, "dqn.total_steps", (int64_t)ag__get64(hb + 224));
  ag__agf_set_i64(a, "dqn.updates", (int64_t)ag__get64(hb + 232));
  ag__agf_set_i64(a, "dqn.updates_at_target", (int64_t)ag__get64(hb + 240));
  ag__agf_set_u64(a, "dqn.host_rng", ag__get64(hb + 248));
  at = hbytes;
  for (uint32_t i = 0; i < T && !a->failed; i++) {
    const unsigned char *e = hb + DQN_FIXED + 24 * (uint64_t)i;
    const int64_t dims[2] = {(int64_t)ag__get64(e), (int64_t)ag__get64(e + 8)};
    char nm[32];
    ag__agf_add_tensor(a, ag__agf_dqn_section((int)i, L, nm), (ag_dtype)ag__get32(e + 16), 2, dims, NULL,
                       NULL);
    if (a->failed) break;
    ag__agf_section *sec = &a->sections[a->n_sections - 1];
    sec->offset = at, sec->part = DQN_PART, sec->crc = AG__AGF_CRC_PARTS;
    at += dqn_parts(sec->bytes);
  }
  ag__agf_add_blob(a, "run_state", R, NULL, NULL);
  if (a->failed) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  ag__agf_section *sec = &a->sections[a->n_sections - 1];
  sec->offset = at, sec->part = DQN_PART, sec->crc = AG__AGF_CRC_PARTS;
  a->part = DQN_PART;
  a->total = at + dqn_parts(R);
  return AG_OK;
}

static ag_status dqn_read(ag__agf *a, FILE *f, uint64_t left, const char *fn, const char *name) {
  unsigned char *hb;
  uint64_t hbytes;
  ag_status s = read_v1_header(f, left, "DQN file's", DQN_FIXED + 4, DQN_FIXED + 24 * DQN_MAX_TENSORS + 4, 24,
                               (DQN_FIXED + 4) % 24, fn, name, &hb, &hbytes);
  if (s) return s;
  if (ag__get32(hb + 264) != (hbytes - DQN_FIXED - 4) / 24)
    s = CORRUPT("%s: %s is corrupt: its tensor count does not match its header length", fn, name);
  if (!s) s = dqn_parse(a, f, hb, hbytes, left, fn, name);
  free(hb);
  return back_to_head(a, f, s, fn, name);
}

/* ---- replay shards: AGRLSHD1 ----
 *   0 "AGRLSHD1"; 8 u32 version 1; 12 u32 H = 92 + 16 n_fields; 16 char[32]
 *   library version, NUL padded; 48 u32 rank; 52 u32 world; 56 i64
 *   capacity (global); 64 i64 position (global); 72 i64 size (global); 80
 *   u32 n_fields; 84 u32 0; 88 n_fields entries of i64 width, u32 host
 *   dtype, u32 0; H-4 CRC-32. Then the local table's image (AGRLRPL1, or a
 *   container) to the end of the file: a shard's header is always a head.
 *   Read as kind "shard", shard.version 1, without sections; the values
 *   are checked by the shard's loader from the keys. */

#define SHD_FIXED 88
#define SHD_ENTRY 16
#define SHD_OLD_MAX_FIELDS 4096 /* what 0.1.0 wrote at most; a table holds AG__AGF_MAX_ARRAY */

static ag_status shd_parse(ag__agf *a, const unsigned char *hb, uint64_t hbytes, const char *fn,
                           const char *name) {
  const unsigned char *v = hb + 16;
  if (!memchr(v, 0, 32))
    return CORRUPT("%s: %s is corrupt: the library version at byte 16 has no end", fn, name);
  for (size_t i = strlen((const char *)v); i < 32; i++)
    if (v[i])
      return CORRUPT("%s: %s is corrupt: byte %zu after the library version is not 0", fn, name, 16 + i);
  uint64_t nf = ag__get32(hb + 80);
  if (nf < 1 || nf > AG__AGF_MAX_ARRAY || hbytes != SHD_FIXED + SHD_ENTRY * nf + 4)
    return CORRUPT("%s: %s is corrupt: n_fields = %llu does not fit its %llu-byte header (1..%d fields)", fn,
                   name, (unsigned long long)nf, (unsigned long long)hbytes, AG__AGF_MAX_ARRAY);
  if (ag__get32(hb + 84))
    return CORRUPT("%s: %s is corrupt: the reserved header word at byte 84 is not 0", fn, name);
  int64_t w[AG__AGF_MAX_ARRAY], dt[AG__AGF_MAX_ARRAY];
  for (uint64_t i = 0; i < nf; i++) {
    const unsigned char *e = hb + SHD_FIXED + SHD_ENTRY * i;
    if (ag__get32(e + 12))
      return CORRUPT("%s: %s is corrupt: the reserved word of field %llu is not 0", fn, name,
                     (unsigned long long)i);
    w[i] = (int64_t)ag__get64(e), dt[i] = (int64_t)ag__get32(e + 8);
  }
  a->format = "AGRLSHD1 (agrl 0.1.0 replay shard)";
  ag__agf_set_str(a, "kind", "shard");
  ag__agf_set_i64(a, "shard.version", 1);
  ag__agf_set_str(a, "shard.library", (const char *)v);
  ag__agf_set_i64(a, "shard.rank", (int64_t)ag__get32(hb + 48));
  ag__agf_set_i64(a, "shard.world", (int64_t)ag__get32(hb + 52));
  ag__agf_set_i64(a, "shard.capacity", (int64_t)ag__get64(hb + 56));
  ag__agf_set_i64(a, "shard.position", (int64_t)ag__get64(hb + 64));
  ag__agf_set_i64(a, "shard.size", (int64_t)ag__get64(hb + 72));
  ag__agf_set_i64s(a, "shard.widths", w, (uint32_t)nf);
  ag__agf_set_i64s(a, "shard.dtypes", dt, (uint32_t)nf);
  if (a->failed) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  a->part = AG__AGF_PART_MAX; /* no sections; the table has its own */
  a->total = hbytes;
  return AG_OK;
}

static ag_status shd_read(ag__agf *a, FILE *f, uint64_t left, const char *fn, const char *name) {
  unsigned char *hb; /* at most 64 KiB */
  uint64_t hbytes;
  ag_status s =
      read_v1_header(f, left, "shard file's", SHD_FIXED + SHD_ENTRY + 4,
                     SHD_FIXED + SHD_ENTRY * SHD_OLD_MAX_FIELDS + 4, SHD_ENTRY, 12, fn, name, &hb, &hbytes);
  if (s) return s;
  s = shd_parse(a, hb, hbytes, fn, name);
  free(hb);
  return back_to_head(a, f, s, fn, name);
}

/* ---- SAC/TD3 agents: AGRLACR1 ----
 *   0 "AGRLACR1"; 8 u32 version 1; 12 u32 H = 896 + 24 T + 4; 16 char[32]
 *   library version; 48 u32 algo (0 SAC, 1 TD3), n_hidden (1..8),
 *   policy_delay, autotune; 64 u64 hidden[8] (0 past n_hidden); 128 f32
 *   actor_lr, critic_lr, gamma, tau, alpha, target_entropy, expl_noise,
 *   target_noise, noise_clip, noise_rho; 168 u32 n_step; 172 u32 flags (1:
 *   fused = 0); 176 i64 batch_size, buffer_size, learning_starts,
 *   train_freq, gradient_steps, n_envs; 224 u64 seed; 232 i64 obs_dim,
 *   act_dim, total_steps, updates, actor_updates; 272 u64 host rng; 280 u64
 *   the update and the acting streams' seeds; 296 i64 N, the correlated
 *   noise's values; 304 u64 R, the run state's bytes; 312 u32 T; 316 f32 the
 *   last actor update's loss; 320 f32 low[64], 576 f32 high[64] (0 past
 *   act_dim); 832..895 0; 896 T entries of u64 rows, u64 cols, u32 dtype,
 *   u32 0; H-4 CRC-32. Then each tensor's values, the N noise values (f32)
 *   and the run state, in parts of 16 MiB each followed by its CRC-32 (an
 *   empty one: one CRC-32, 0), then the replay table's image. */

#define AC_FIXED 896
#define AC_MAX_TENSORS 256
#define AC_MAX_ACT 64
#define AC_PART ((uint64_t)AG__AGF_PART_MAX)
#define AC_MAX_RUN ((uint64_t)1 << 30)

/* "<pre><mid>W<l>" or "<pre><mid>b<l>": parameter j (0 .. 2L-1) of a network. */
static const char *ac_param(char *buf, const char *pre, const char *mid, int j) {
  snprintf(buf, 48, "%s%s%c%d", pre, mid, j % 2 ? 'b' : 'W', j / 2);
  return buf;
}

const char *ag__agf_ac_section(int i, int L, int td3, int alpha_opt, char *buf) {
  static const char *const nets[6] = {"actor.", "q0.", "q1.", "target.q0.", "target.q1.", "target.actor."};
  static const char *const one[3] = {"log_alpha", "rng.counter", "act_rng.counter"};
  static const char *const alpha[3] = {"adam.alpha.state", "adam.alpha.m.log_alpha",
                                       "adam.alpha.v.log_alpha"};
  const int P = 2 * L, nn = td3 ? 6 : 5;
  if (i < 0 || L < 1 || L > 64) return NULL;
  if (i < nn * P) return ac_param(buf, nets[i / P], "", i % P);
  i -= nn * P;
  const char *fixed = i < 3 ? one[i] : i == 3 ? "adam.actor.state" : NULL;
  if (fixed) {
    snprintf(buf, 48, "%s", fixed);
    return buf;
  }
  i -= 4;
  if (i < 2 * P) return ac_param(buf, i % 2 ? "adam.actor.v." : "adam.actor.m.", "", i / 2);
  i -= 2 * P;
  if (i == 0) {
    snprintf(buf, 48, "adam.critic.state");
    return buf;
  }
  i -= 1;
  if (i < 4 * P) /* critic 0's parameters, then critic 1's: a first and a second moment each */
    return ac_param(buf, i % 2 ? "adam.critic.v." : "adam.critic.m.", i / 2 < P ? "q0." : "q1.", i / 2 % P);
  i -= 4 * P;
  if (!alpha_opt || i >= 3) return NULL;
  snprintf(buf, 48, "%s", alpha[i]);
  return buf;
}

static uint64_t ac_parts(uint64_t n) { return n + 4 * (n ? (n + AC_PART - 1) / AC_PART : 1); }

/* Whether the empty section whose CRC-32 is at `at` has the CRC of nothing, 0. */
static ag_status ac_empty_crc(ag__agf *a, FILE *f, uint64_t at, const char *what, const char *fn,
                              const char *name) {
  unsigned char c[4];
  if (fseeko(f, a->base + (int64_t)at, SEEK_SET) || fread(c, 1, 4, f) != 4 || fseeko(f, a->base, SEEK_SET))
    return ag__fail(AG_ERR_IO, "%s: reading %s failed at its %s", fn, name, what);
  if (ag__get32(c)) return CORRUPT("%s: %s is corrupt: the empty %s's CRC-32 is not 0", fn, name, what);
  return AG_OK;
}

static ag_status ac_parse(ag__agf *a, FILE *f, const unsigned char *hb, uint64_t hbytes, uint64_t left,
                          const char *fn, const char *name) {
  const unsigned char *v = hb + 16;
  if (!memchr(v, 0, 32))
    return CORRUPT("%s: %s is corrupt: the library version at byte 16 has no end", fn, name);
  uint32_t algo = ag__get32(hb + 48), nh = ag__get32(hb + 52), autotune = ag__get32(hb + 60),
           flags = ag__get32(hb + 172), T = ag__get32(hb + 312);
  if (algo > 1 || nh < 1 || nh > 8 || autotune > 1 || flags > 1)
    return CORRUPT("%s: %s is corrupt: algo %u, n_hidden %u, autotune %u or flags %u out of range", fn, name,
                   algo, nh, autotune, flags);
  const int L = (int)nh + 1, td3 = algo == 1, alpha_opt = !td3 && autotune;
  char nm[48];
  uint32_t want_t = 0;
  while (ag__agf_ac_section((int)want_t, L, td3, alpha_opt, nm)) want_t++;
  if (T != want_t)
    return CORRUPT("%s: %s is corrupt: %u tensors, where its algo, %u hidden layers and autotune make %u", fn,
                   name, T, nh, want_t);
  int64_t sizes[10];
  for (uint32_t i = 0; i < 8; i++) {
    uint64_t h = ag__get64(hb + 64 + 8 * i);
    if (i >= nh && h) return CORRUPT("%s: %s is corrupt: an unused hidden size is not 0", fn, name);
    if (i < nh) sizes[i + 1] = (int64_t)h;
  }
  for (int i = 832; i < AC_FIXED; i++)
    if (hb[i]) return CORRUPT("%s: %s is corrupt: reserved byte %d is not 0", fn, name, i);
  const int64_t act = (int64_t)ag__get64(hb + 240), N = (int64_t)ag__get64(hb + 296);
  sizes[0] = (int64_t)ag__get64(hb + 232);
  sizes[L] = act;
  if (act < 1 || act > AC_MAX_ACT)
    return CORRUPT("%s: %s is corrupt: act_dim %lld, outside 1..%d", fn, name, (long long)act, AC_MAX_ACT);
  double low[AC_MAX_ACT], high[AC_MAX_ACT];
  for (int i = 0; i < AC_MAX_ACT; i++) {
    if (i >= act && (ag__get32(hb + 320 + 4 * i) || ag__get32(hb + 576 + 4 * i)))
      return CORRUPT("%s: %s is corrupt: an unused bound is not 0", fn, name);
    if (i < act)
      low[i] = (double)ag__get_f32(hb + 320 + 4 * i), high[i] = (double)ag__get_f32(hb + 576 + 4 * i);
  }
  if (N < 0 || N % act || N / act > INT32_MAX)
    return CORRUPT("%s: %s is corrupt: %lld correlated noise values are not a whole number of copies of %lld",
                   fn, name, (long long)N, (long long)act);
  uint64_t R = ag__get64(hb + 304);
  if (R > AC_MAX_RUN) return CORRUPT("%s: %s is corrupt: the run state is longer than 2^30 bytes", fn, name);
  /* the tensors: known dtypes, sizes within 2^62 bytes each, reserved 0 */
  uint64_t at = hbytes;
  for (uint32_t i = 0; i < T; i++) {
    const unsigned char *e = hb + AC_FIXED + 24 * (uint64_t)i;
    uint64_t r = ag__get64(e), c = ag__get64(e + 8), dt = ag__get32(e + 16);
    if (ag__get32(e + 20) || dt > AG_I64 || r < 1 || c < 1 || r > ((uint64_t)1 << 40) ||
        c > ((uint64_t)1 << 40) || c > AG__AGF_MAX_SECTION / 8 / r)
      return CORRUPT("%s: %s is corrupt: tensor %u's entry (%llu x %llu, dtype %llu)", fn, name, i,
                     (unsigned long long)r, (unsigned long long)c, (unsigned long long)dt);
    at += ac_parts(r * c * ag__agf_dtype_size((ag_dtype)dt)); /* < 2^63 + 2^62: no overflow */
    if (at > left)
      return CORRUPT("%s: %s is truncated: %llu bytes, shorter than its tensors up to tensor %u", fn, name,
                     (unsigned long long)left, i);
  }
  const uint64_t noise_at = at, run_at = noise_at + ac_parts(4 * (uint64_t)N), end = run_at + ac_parts(R);
  if (left < end)
    return CORRUPT("%s: %s is truncated: %llu bytes, where its header describes %llu before its replay table",
                   fn, name, (unsigned long long)left, (unsigned long long)end);
  ag_status s = N ? AG_OK : ac_empty_crc(a, f, noise_at, "correlated noise", fn, name);
  if (!s && !R) s = ac_empty_crc(a, f, run_at, "run state", fn, name);
  if (s) return s;

  a->format = "AGRLACR1 (agrl 0.1.0 SAC/TD3 agent)";
  ag__agf_set_str(a, "kind", "ac");
  ag__agf_set_i64(a, "ac.version", 1);
  ag__agf_set_str(a, "ac.library", (const char *)v);
  ag__agf_set_str(a, "ac.algo", td3 ? "td3" : "sac");
  ag__agf_set_i64s(a, "ac.sizes", sizes, (uint32_t)(L + 1));
  ag__agf_set_i64(a, "ac.policy_delay", (int64_t)ag__get32(hb + 56));
  ag__agf_set_i64(a, "ac.autotune", (int64_t)autotune);
  ag__agf_set_i64(a, "ac.fused", flags ? 0 : 1);
  static const char *const fs[10] = {"ac.actor_lr",   "ac.critic_lr",      "ac.gamma",      "ac.tau",
                                     "ac.alpha",      "ac.target_entropy", "ac.expl_noise", "ac.target_noise",
                                     "ac.noise_clip", "ac.noise_rho"};
  for (int i = 0; i < 10; i++) ag__agf_set_f64(a, fs[i], (double)ag__get_f32(hb + 128 + 4 * i));
  ag__agf_set_i64(a, "ac.n_step", (int64_t)ag__get32(hb + 168));
  static const char *const is[6] = {"ac.batch_size", "ac.buffer_size",    "ac.learning_starts",
                                    "ac.train_freq", "ac.gradient_steps", "ac.n_envs"};
  for (int i = 0; i < 6; i++) ag__agf_set_i64(a, is[i], (int64_t)ag__get64(hb + 176 + 8 * i));
  ag__agf_set_u64(a, "ac.seed", ag__get64(hb + 224));
  ag__agf_set_i64(a, "ac.total_steps", (int64_t)ag__get64(hb + 248));
  ag__agf_set_i64(a, "ac.updates", (int64_t)ag__get64(hb + 256));
  ag__agf_set_i64(a, "ac.actor_updates", (int64_t)ag__get64(hb + 264));
  ag__agf_set_f64(a, "ac.actor_loss", (double)ag__get_f32(hb + 316));
  ag__agf_set_u64(a, "ac.host_rng", ag__get64(hb + 272));
  ag__agf_set_u64(a, "ac.update_rng_seed", ag__get64(hb + 280));
  ag__agf_set_u64(a, "ac.act_rng_seed", ag__get64(hb + 288));
  ag__agf_set_f64s(a, "ac.low", low, (uint32_t)act);
  ag__agf_set_f64s(a, "ac.high", high, (uint32_t)act);
  ag__agf_set_i64(a, "ac.noise_copies", N / act);
  at = hbytes;
  for (uint32_t i = 0; i < T && !a->failed; i++) {
    const unsigned char *e = hb + AC_FIXED + 24 * (uint64_t)i;
    const int64_t dims[2] = {(int64_t)ag__get64(e), (int64_t)ag__get64(e + 8)};
    ag__agf_add_tensor(a, ag__agf_ac_section((int)i, L, td3, alpha_opt, nm), (ag_dtype)ag__get32(e + 16), 2,
                       dims, NULL, NULL);
    if (a->failed) break;
    ag__agf_section *sec = &a->sections[a->n_sections - 1];
    sec->offset = at, sec->part = AC_PART, sec->crc = AG__AGF_CRC_PARTS;
    at += ac_parts(sec->bytes);
  }
  const int64_t ndims[2] = {act, N / act};
  ag__agf_add_tensor(a, "noise", AG_F32, 2, ndims, NULL, NULL);
  ag__agf_add_blob(a, "run_state", R, NULL, NULL);
  if (a->failed) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  const uint64_t offs[2] = {noise_at, run_at};
  for (int k = 0; k < 2; k++) {
    ag__agf_section *sec = &a->sections[a->n_sections - 2 + k];
    sec->offset = offs[k], sec->part = AC_PART, sec->crc = AG__AGF_CRC_PARTS;
  }
  a->part = AC_PART;
  a->total = end;
  return AG_OK;
}

static ag_status ac_read(ag__agf *a, FILE *f, uint64_t left, const char *fn, const char *name) {
  unsigned char *hb;
  uint64_t hbytes;
  ag_status s = read_v1_header(f, left, "SAC/TD3 file's", AC_FIXED + 4, AC_FIXED + 24 * AC_MAX_TENSORS + 4,
                               24, (AC_FIXED + 4) % 24, fn, name, &hb, &hbytes);
  if (s) return s;
  if (ag__get32(hb + 312) != (hbytes - AC_FIXED - 4) / 24)
    s = CORRUPT("%s: %s is corrupt: its tensor count does not match its header length", fn, name);
  if (!s) s = ac_parse(a, f, hb, hbytes, left, fn, name);
  free(hb);
  return back_to_head(a, f, s, fn, name);
}

/* ---- a training loop's run state: AGRLRUN1 (the DQN's), AGRLRUNA (SAC's
 * and TD3's) ----
 * The bytes an agent's run state held in 0.1.0 (a blob of the agent's file):
 *   0 "AGRLRUN1" or "AGRLRUNA"; 8 u32 version 1; 12 u32 copies n; 16 u32
 *   obs_dim; 20 u32 0; 24 i64 step, episodes, since_train, since_target;
 *   56 i32 returns kept (0..20), the next slot (0..19); 64 20 x f64 the last
 *   returns; 224 f64 the mean reported; 232 u64 E, the environments'
 *   state's length; 240 i64 the step of the last evaluation; AGRLRUNA only:
 *   248 i64 the step of the last PHASE event, 256 f32 its critics' and
 *   actor's losses, 260 f32; then at F (248; AGRLRUNA 264) n x obs_dim f32
 *   the observations in hand and E bytes of the environments' state, to the
 *   end. No checksums (the agent file's parts had them).
 * Read as kind "run", run.version 1: the same keys and sections as the
 * container of learn.c; the loop checks their values. */

#define RUN_RECENT 20

static ag_status run_read(ag__agf *a, FILE *f, uint64_t left, int phase, const char *fn, const char *name) {
  const uint64_t F = phase ? 264 : 248;
  unsigned char h[264];
  if (left < F)
    return CORRUPT("%s: %s is truncated: %llu bytes, shorter than a run state's %llu", fn, name,
                   (unsigned long long)left, (unsigned long long)F);
  ag_status s = read_exact(f, h, (size_t)F, fn, name);
  if (s) return s;
  const uint32_t version = ag__get32(h + 8);
  if (version > 1)
    return ag__fail(AG_ERR_UNSUPPORTED, "%s: %s is a run state of format version %u (this library reads 1)",
                    fn, name, (unsigned)version);
  const uint64_t n = ag__get32(h + 12), od = ag__get32(h + 16), E = ag__get64(h + 232);
  if (version != 1 || ag__get32(h + 20) || n < 1 || od < 1)
    return CORRUPT("%s: %s is corrupt: its version, copies or observation width", fn, name);
  if (n > (left - F) / 4 / od || E != left - F - n * od * 4) /* n * od * 4 <= left - F: no overflow */
    return CORRUPT("%s: %s is corrupt: its lengths do not add up to its %llu bytes", fn, name,
                   (unsigned long long)left);
  const uint64_t ob = n * od * 4;
  a->format = phase ? "AGRLRUNA (agrl 0.1.0 run state)" : "AGRLRUN1 (agrl 0.1.0 run state)";
  ag__agf_set_str(a, "kind", "run");
  ag__agf_set_i64(a, "run.version", 1);
  ag__agf_set_str(a, "run.loop", phase ? "ac" : "dqn");
  ag__agf_set_i64(a, "run.n_envs", (int64_t)n);
  ag__agf_set_i64(a, "run.obs_dim", (int64_t)od);
  static const char *const counters[4] = {"run.step", "run.episodes", "run.since_train", "run.since_target"};
  for (int i = 0; i < 4; i++) ag__agf_set_i64(a, counters[i], (int64_t)ag__get64(h + 24 + 8 * i));
  ag__agf_set_i64(a, "run.returns_kept", (int32_t)ag__get32(h + 56));
  ag__agf_set_i64(a, "run.returns_next", (int32_t)ag__get32(h + 60));
  double r[RUN_RECENT];
  for (int i = 0; i < RUN_RECENT; i++) r[i] = ag__get_f64(h + 64 + 8 * i);
  ag__agf_set_f64s(a, "run.returns", r, RUN_RECENT);
  ag__agf_set_f64(a, "run.mean", ag__get_f64(h + 224));
  ag__agf_set_i64(a, "run.last_eval", (int64_t)ag__get64(h + 240));
  if (phase) {
    const double losses[2] = {ag__get_f32(h + 256), ag__get_f32(h + 260)};
    ag__agf_set_i64(a, "run.last_report", (int64_t)ag__get64(h + 248));
    ag__agf_set_f64s(a, "run.losses", losses, 2);
  }
  const int64_t dims[2] = {(int64_t)n, (int64_t)od};
  ag__agf_add_tensor(a, "obs", AG_F32, 2, dims, NULL, NULL);
  ag__agf_add_blob(a, "env_state", E, NULL, NULL);
  if (a->failed) return ag__fail(AG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  const uint64_t at[2] = {F, F + ob}, bytes[2] = {ob, E};
  for (int k = 0; k < 2; k++) {
    ag__agf_section *sec = &a->sections[a->n_sections - 2 + k];
    sec->offset = at[k], sec->bytes = bytes[k], sec->crc = AG__AGF_CRC_NONE, sec->part = AG__AGF_PART_MAX;
  }
  a->part = AG__AGF_PART_MAX;
  a->total = left;
  return AG_OK;
}

ag_status ag__agf_legacy_read(ag__agf *a, FILE *f, uint64_t left, int head, const unsigned char magic[8],
                              int *known, const char *fn, const char *name) {
  *known = 0;
  (void)head; /* the models and tables of 0.1.0 are whole files; a DQN's is always a head */
  if (!memcmp(magic, "AGRLDQN1", 8)) {
    *known = 1;
    return dqn_read(a, f, left, fn, name);
  }
  if (!memcmp(magic, "AGRLACR1", 8)) {
    *known = 1;
    return ac_read(a, f, left, fn, name);
  }
  if (!memcmp(magic, "AGRLMLP", 7)) {
    *known = 1;
    return mlp_read(a, f, left, fn, name);
  }
  if (!memcmp(magic, "AGRLRPL1", 8)) {
    *known = 1;
    return rpl_read(a, f, left, fn, name);
  }
  if (!memcmp(magic, "AGRLSHD1", 8)) { /* a shard's header is always a head: its table follows */
    *known = 1;
    return shd_read(a, f, left, fn, name);
  }
  if (!memcmp(magic, "AGRLRUN1", 8) || !memcmp(magic, "AGRLRUNA", 8)) { /* always a whole run state */
    *known = 1;
    return run_read(a, f, left, magic[7] == 'A', fn, name);
  }
  return AG_OK;
}
