/* test_vulkan_mem.c — the Vulkan backend's memory and transfers, through
 * its vtable (base/backend.h), with the Khronos validation layer on.
 *
 * Uploads and downloads of sizes across the staging parts (so the two
 * parts and their fences take turns), copies and zeroings at offsets that
 * are not multiples of 4 inside an allocation, the bytes around them left
 * alone, refusals of ranges outside an allocation, and the memory report;
 * every byte compared with the host's pattern. The suballocator: its free
 * ranges against a map of every byte; 10,000 small buffers held in a few
 * memory objects, each one's bytes read back by a kernel (its device
 * address) and by a copy (its buffer and offset), after frees in random
 * order and reuse; and the refusal past the memory-object limit (lowered by
 * the test hook). The validation layer must report no error. Without a usable Vulkan device the test exits 77
 * (skipped), or fails with AGRL_REQUIRE_VULKAN=1.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agrl/agrl.h"
#include "base/backend.h"
#include "base/kernels.h"
#ifdef AGRL_WITH_VULKAN
#include "vulkan/vk_internal.h"
#endif

static unsigned char pattern(size_t i) { return (unsigned char)((i * 2654435761u) >> 13); }

typedef struct io {
  unsigned char *host;
} io;

static void fill(void *dst, size_t off, size_t len, void *user) {
  memcpy(dst, ((io *)user)->host + off, len);
}

static void drain(const void *src, size_t off, size_t len, void *user) {
  memcpy(((io *)user)->host + off, src, len);
}

static const ag__backend *be;
static void *st;

static uint64_t lcg(uint64_t *x) {
  *x = *x * 6364136223846793005ull + 1442695040888963407ull;
  return *x >> 33;
}

#ifdef AGRL_WITH_VULKAN
/* The free ranges of r against the map of taken bytes (taken[i] for byte
 * start + i): sorted, disjoint, not touching, every byte of them free, and
 * as many bytes as the map has free. */
static void ranges_match(const ag__vk_ranges *r, const unsigned char *taken, size_t live,
                         uint64_t live_bytes) {
  uint64_t free_bytes = 0, map_free = 0;
  for (uint64_t i = 0; i < r->size; i++) map_free += !taken[i];
  for (size_t k = 0; k < r->n; k++) {
    const ag__vk_range f = r->at[k];
    assert_true(f.len > 0 && f.off >= r->start && f.off + f.len <= r->start + r->size);
    if (k) assert_true(r->at[k - 1].off + r->at[k - 1].len < f.off); /* apart, in order */
    for (uint64_t i = f.off; i < f.off + f.len; i++)
      if (taken[i - r->start]) fail_msg("byte %llu is in a free range and taken", (unsigned long long)i);
    free_bytes += f.len;
  }
  assert_int_equal(free_bytes, map_free);
  assert_int_equal(r->taken, live);
  assert_int_equal(r->used, live_bytes);
}

/* Random takes (sizes 1..3000, alignments 1 to 1024) and gives over a
 * region that starts off alignment: each take aligned, inside, over free
 * bytes only; each refusal only where the map has no aligned run that
 * long; once everything is back, the region is one free range again. */
static void ranges_against_a_map(void **state) {
  (void)state;
  enum { SIZE = 65536, START = 100, LIVE = 512 };
  ag__vk_ranges r;
  assert_int_equal(ag__vk_ranges_init(&r, START, SIZE), AG_OK);
  unsigned char *taken = calloc(SIZE, 1);
  uint32_t *run = malloc(sizeof *run * (SIZE + 1));
  uint64_t off[LIVE], len[LIVE], x = 7, live_bytes = 0;
  size_t live = 0, refused = 0;
  assert_true(taken && run);
  uint64_t dummy = 0; /* bad arguments are refused and change nothing */
  assert_int_equal(ag__vk_ranges_take(&r, 0, 16, &dummy), AG_ERR_INVALID_ARG);
  assert_int_equal(ag__vk_ranges_take(&r, 64, 48, &dummy), AG_ERR_INVALID_ARG);
  assert_int_equal(ag__vk_ranges_take(&r, SIZE + 1, 1, &dummy), AG_ERR_OUT_OF_RANGE);
  ranges_match(&r, taken, 0, 0);
  for (int step = 0; step < 6000; step++) {
    const int give = live == LIVE || (live > 0 && lcg(&x) % 100 < (step < 3000 ? 35 : 60));
    if (give) {
      const size_t j = lcg(&x) % live;
      ag__vk_ranges_give(&r, off[j], len[j]);
      memset(taken + (off[j] - START), 0, len[j]);
      live_bytes -= len[j];
      off[j] = off[live - 1], len[j] = len[--live];
    } else {
      const uint64_t bytes = 1 + lcg(&x) % 3000, align = (uint64_t)1 << (lcg(&x) % 11);
      uint64_t o = 0;
      const ag_status got = ag__vk_ranges_take(&r, bytes, align, &o);
      if (got == AG_OK) {
        assert_true(o % align == 0 && o >= START && o + bytes <= START + SIZE);
        for (uint64_t i = o; i < o + bytes; i++)
          if (taken[i - START]) fail_msg("step %d: byte %llu handed out twice", step, (unsigned long long)i);
        memset(taken + (o - START), 1, bytes);
        off[live] = o, len[live++] = bytes;
        live_bytes += bytes;
      } else {
        assert_int_equal(got, AG_ERR_OUT_OF_RANGE);
        run[SIZE] = 0; /* the free run from each byte: none may hold an aligned take */
        for (size_t i = SIZE; i-- > 0;) run[i] = taken[i] ? 0 : run[i + 1] + 1;
        for (uint64_t a = (START + align - 1) / align * align; a < START + SIZE; a += align)
          if (run[a - START] >= bytes)
            fail_msg("step %d: %llu bytes refused, free at %llu", step, (unsigned long long)bytes,
                     (unsigned long long)a);
        refused++;
      }
    }
    ranges_match(&r, taken, live, live_bytes);
  }
  assert_true(refused > 0); /* the region filled up at times */
  while (live) {
    const size_t j = lcg(&x) % live;
    ag__vk_ranges_give(&r, off[j], len[j]);
    off[j] = off[live - 1], len[j] = len[--live];
  }
  assert_int_equal(r.n, 1);
  assert_int_equal(r.at[0].off, START);
  assert_int_equal(r.at[0].len, SIZE);
  assert_int_equal(r.taken, 0);
  ag__vk_ranges_free(&r);
  free(taken);
  free(run);
}
#endif /* AGRL_WITH_VULKAN */

static void down(const void *p, size_t n, unsigned char *out) {
  io d = {out};
  assert_int_equal(be->download(st, p, n, drain, &d), AG_OK);
}

static void transfers(void **state) {
  (void)state;
  size_t free_b = 0, total = 0;
  assert_int_equal(be->mem_info(st, &free_b, &total), AG_OK);
  assert_true(total > 0 && free_b <= total);
  const size_t big = 2 * (size_t)AG_TRANSFER_PART_BYTES + 4099; /* three parts, the last short */
  void *a, *b, *c;
  assert_int_equal(be->alloc(st, big, &a), AG_OK);
  assert_int_equal(be->alloc(st, big, &b), AG_OK);
  assert_int_equal(be->alloc(st, 1000, &c), AG_OK);
  assert_true((uintptr_t)a % 256 == 0 && (uintptr_t)b % 256 == 0 && (uintptr_t)c % 256 == 0);
  size_t free2 = 0;
  assert_int_equal(be->mem_info(st, &free2, &total), AG_OK);
  assert_true(free2 <= free_b);
  unsigned char *src = malloc(big), *got = malloc(big);
  assert_true(src && got);
  for (size_t i = 0; i < big; i++) src[i] = pattern(i);
  io u = {src};
  assert_int_equal(be->upload(st, a, big, fill, &u), AG_OK);
  memset(src, 0xEE, big); /* the caller's memory is free once upload returns */
  down(a, big, got);
  for (size_t i = 0; i < big; i++)
    if (got[i] != pattern(i)) fail_msg("byte %zu of the upload is %d, not %d", i, got[i], pattern(i));
  /* b: a known background, then a copy from a + 4096 to b + 9 of n bytes */
  for (size_t i = 0; i < big; i++) src[i] = (unsigned char)(255 - pattern(i));
  assert_int_equal(be->upload(st, b, big, fill, &u), AG_OK);
  const size_t n = (size_t)AG_TRANSFER_PART_BYTES + 777;
  assert_int_equal(be->copy(st, (char *)b + 9, (const char *)a + 4096, n), AG_OK);
  /* zero 1001 bytes from b + 3 (not whole words) and 1 MB from b + 2^24 */
  assert_int_equal(be->zero(st, (char *)b + 3, 1001), AG_OK);
  assert_int_equal(be->zero(st, (char *)b + ((size_t)1 << 24), (size_t)1 << 20), AG_OK);
  down(b, big, got);
  for (size_t i = 0; i < big; i++) {
    unsigned char want = (unsigned char)(255 - pattern(i));
    if (i >= 9 && i < 9 + n) want = pattern(i - 9 + 4096);
    if (i >= 3 && i < 1004) want = 0;
    if (i >= ((size_t)1 << 24) && i < ((size_t)1 << 24) + ((size_t)1 << 20)) want = 0;
    if (got[i] != want) fail_msg("byte %zu of b is %d, not %d", i, got[i], want);
  }
  /* a small one, read back from an offset */
  for (size_t i = 0; i < 1000; i++) src[i] = (unsigned char)i;
  assert_int_equal(be->upload(st, c, 1000, fill, &u), AG_OK);
  down((char *)c + 500, 500, got);
  for (size_t i = 0; i < 500; i++) assert_int_equal(got[i], (unsigned char)(i + 500));
  /* ranges outside one allocation are refused, and change nothing */
  assert_int_equal(be->upload(st, (char *)c + 900, 200, fill, &u), AG_ERR_INVALID_ARG);
  assert_int_equal(be->copy(st, c, (const char *)a + big - 10, 100), AG_ERR_INVALID_ARG);
  assert_int_equal(be->zero(st, (void *)(uintptr_t)16, 4), AG_ERR_INVALID_ARG);
  down(c, 1000, got);
  for (size_t i = 0; i < 1000; i++) assert_int_equal(got[i], (unsigned char)i);
  assert_int_equal(be->sync(st), AG_OK);
  be->release(st, a);
  be->release(st, b);
  be->release(st, c);
  void *z;
  assert_int_equal(be->alloc(st, 0, &z), AG_OK); /* an empty allocation is one */
  be->release(st, z);
  assert_int_equal(be->run(st, AG__K_GEMM, NULL, 0), AG_ERR_INVALID_ARG); /* no arguments */
  ag__qgrad_args qa; /* the fused DQN kernel is not provided: the DQN composes its update */
  memset(&qa, 0, sizeof qa);
  assert_int_equal(be->supports(st, AG__K_QGRAD, &qa, sizeof qa), 0);
  assert_int_equal(be->run(st, AG__K_QGRAD, &qa, sizeof qa), AG_ERR_UNSUPPORTED);
  assert_int_equal(be->run(st, AG__K_COUNT, &qa, sizeof qa), AG_ERR_UNSUPPORTED);
  free(src);
  free(got);
  char last[512];
  int states = 0;
  const int errors = ag__vulkan_validation_total(&states, last, sizeof last);
  printf("vulkan_mem: validation layer over %d device states, %d errors\n", states, errors);
  if (errors) fail_msg("the validation layer reported %d errors; the last: %s", errors, last);
  const char *req = getenv("AGRL_REQUIRE_VULKAN");
  const int on = states > 0;
  if (req && *req && strcmp(req, "0") && !on) fail_msg("the validation layer is required and not installed");
}

/* Small uploads go straight into device memory the host can write when
 * nothing is queued, and are queued behind the work before them otherwise:
 * either way each command sees the bytes of the uploads issued before it
 * and none of those issued after. Rounds alternate an idle queue (after a
 * sync or a download) with a busy one (a copy or a zeroing just queued). */
static void small_uploads_keep_their_order(void **state) {
  (void)state;
  const size_t n = 48 << 10; /* under the inline limit */
  void *a, *b, *c;
  assert_int_equal(be->alloc(st, n, &a), AG_OK);
  assert_int_equal(be->alloc(st, n, &b), AG_OK);
  assert_int_equal(be->alloc(st, n, &c), AG_OK);
  unsigned char *src = malloc(n), *got = malloc(n), *want_a = malloc(n);
  assert_true(src && got && want_a);
  io u = {src};
  for (int r = 0; r < 24; r++) {
    for (size_t i = 0; i < n; i++) src[i] = (unsigned char)(pattern(i) + r);
    if (r % 2)
      assert_int_equal(be->sync(st), AG_OK); /* idle: written at once */
    else
      assert_int_equal(be->copy(st, c, b, n), AG_OK); /* busy: queued */
    assert_int_equal(be->upload(st, a, n, fill, &u), AG_OK);
    memset(src, 0xEE, n);
    assert_int_equal(be->copy(st, b, a, n), AG_OK); /* b: round r's bytes */
    for (size_t i = 0; i < n; i++) src[i] = (unsigned char)(pattern(i) * 3 + r);
    assert_int_equal(be->upload(st, a, n, fill, &u), AG_OK); /* behind the copy */
    assert_int_equal(be->zero(st, (char *)a + 100, 1000), AG_OK);
    for (size_t i = 0; i < 77; i++) src[i] = (unsigned char)(200 + i);
    assert_int_equal(be->upload(st, (char *)a + 500, 77, fill, &u), AG_OK); /* behind the zeroing */
    assert_int_equal(be->copy(st, c, a, n), AG_OK);
    for (size_t i = 0; i < n; i++) {
      want_a[i] = (unsigned char)(pattern(i) * 3 + r);
      if (i >= 100 && i < 1100) want_a[i] = 0;
      if (i >= 500 && i < 577) want_a[i] = (unsigned char)(200 + i - 500);
    }
    down(b, n, got);
    for (size_t i = 0; i < n; i++)
      if (got[i] != (unsigned char)(pattern(i) + r))
        fail_msg("round %d: byte %zu of the copy is %d", r, i, got[i]);
    down(c, n, got);
    if (memcmp(got, want_a, n)) fail_msg("round %d: the second copy is not the later uploads' bytes", r);
    /* idle now (a download waits): an upload is seen by the copy after it */
    for (size_t i = 0; i < n; i++) src[i] = (unsigned char)(pattern(i) ^ r);
    assert_int_equal(be->upload(st, c, n, fill, &u), AG_OK);
    assert_int_equal(be->copy(st, b, c, n), AG_OK);
    down(b, n, got);
    for (size_t i = 0; i < n; i++)
      if (got[i] != (unsigned char)(pattern(i) ^ r))
        fail_msg("round %d: byte %zu after the idle upload is %d", r, i, got[i]);
  }
  be->release(st, a);
  be->release(st, b);
  be->release(st, c);
  free(src);
  free(got);
  free(want_a);
}

#ifdef AGRL_WITH_VULKAN
/* Every kernel id of base/kernels.h has one entry in the Vulkan kernel
 * files' tables, or is listed as not provided (and has none); every
 * pipeline of the enum the shader build emits has its shader's SPIR-V, under
 * a name of its own. */
static void every_kernel_has_an_entry(void **state) {
  (void)state;
  const ag__vk_kernel *tabs[] = {ag__vk_k_elementwise, ag__vk_k_linalg, ag__vk_k_optim, ag__vk_k_random,
                                 ag__vk_k_frames};
  const int ns[] = {ag__vk_n_elementwise, ag__vk_n_linalg, ag__vk_n_optim, ag__vk_n_random, ag__vk_n_frames};
  int entries = 0;
  for (int id = 0; id < AG__K_COUNT; id++) {
    int found = 0, listed = 0;
    for (int t = 0; t < 5; t++)
      for (int i = 0; i < ns[t]; i++)
        if ((int)tabs[t][i].id == id) {
          found++;
          assert_non_null(tabs[t][i].run);
        }
    for (int i = 0; i < ag__vk_n_not_provided; i++) listed += (int)ag__vk_not_provided[i] == id;
    if (listed > 1 || (listed && found))
      fail_msg("kernel %d is listed as not on Vulkan and has %d entries", id, found);
    if (!listed && found != 1)
      fail_msg("kernel %d has %d Vulkan entries and is not listed as not on Vulkan", id, found);
    entries += found;
  }
  int all = 0; /* no entry for an id outside the enum */
  for (int t = 0; t < 5; t++) all += ns[t];
  assert_int_equal(all, entries);
  assert_int_equal(ag__vk_n_shaders, AG__VK_N_PIPES);
  for (int p = 0; p < AG__VK_N_PIPES; p++) {
    const ag__vk_shader *sh = &ag__vk_shaders[p];
    assert_non_null(sh->name);
    assert_true(sh->bytes >= 20 && sh->bytes % 4 == 0);
    uint32_t magic;
    memcpy(&magic, sh->spv, 4);
    assert_int_equal(magic, 0x07230203u); /* SPIR-V's */
    for (int q = 0; q < p; q++)
      if (!strcmp(ag__vk_shaders[q].name, sh->name))
        fail_msg("pipelines %d and %d are both %s", q, p, sh->name);
  }
  /* the enum names its shaders: a few by name */
  assert_string_equal(ag__vk_shaders[AG__VK_PIPE_COPY].name, "copy");
  assert_string_equal(ag__vk_shaders[AG__VK_PIPE_LINALG_GEMM_16].name, "linalg_gemm_16");
  assert_string_equal(ag__vk_shaders[AG__VK_PIPE_RANDOM_PER_SAMPLE].name, "random_per_sample");
}

/* The push-constant block of SPIR-V module spv (bytes long): its members'
 * offsets and sizes (the Offset decorations, the widths of their scalar
 * types), at most max; -1 without one. */
static int spirv_push_block(const unsigned char *spv, size_t bytes, uint32_t *offset, uint32_t *size,
                            int max) {
  const size_t n = bytes / 4;
  uint32_t *w = malloc(bytes), ptr = 0, block = 0;
  assert_non_null(w);
  memcpy(w, spv, bytes);
  for (size_t i = 5; i < n; i += w[i] >> 16) /* the variable in PushConstant (storage class 9) */
    if ((w[i] & 0xffff) == 59 && w[i + 3] == 9) ptr = w[i + 1];
  for (size_t i = 5; i < n && ptr; i += w[i] >> 16) /* OpTypePointer ptr: the block's type */
    if ((w[i] & 0xffff) == 32 && w[i + 1] == ptr) block = w[i + 3];
  int members = -1;
  for (size_t i = 5; i < n && block; i += w[i] >> 16) {
    const uint32_t op = w[i] & 0xffff, len = w[i] >> 16;
    if (op == 30 && w[i + 1] == block) { /* OpTypeStruct: each member's scalar width */
      members = (int)len - 2;
      assert_true(members <= max);
      for (int m = 0; m < members; m++)
        for (size_t j = 5; j < n; j += w[j] >> 16)
          if (((w[j] & 0xffff) == 21 || (w[j] & 0xffff) == 22) && w[j + 1] == w[i + 2 + m])
            size[m] = w[j + 2] / 8;
    }
    if (op == 72 && w[i + 1] == block && w[i + 3] == 35 && w[i + 2] < (uint32_t)max) /* Offset */
      offset[w[i + 2]] = w[i + 4];
  }
  free(w);
  return members;
}

/* The text of shader `name` (src/vulkan/shaders/NAME.comp) and of the files
 * it includes, one after the other (NULL: not read). */
static char *shader_text(const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s.comp", AGRL_VK_SHADER_DIR, name);
  size_t len = 0, cap = 1 << 16;
  char *text = malloc(cap);
  assert_non_null(text);
  for (int file = 0; file < 8; file++) {
    FILE *f = fopen(path, "rb");
    if (!f) break;
    len += fread(text + len, 1, cap - len - 1, f);
    fclose(f);
    text[len] = 0;
    /* the next file: the file-th #include of the .comp (its first part) */
    const char *at = text;
    for (int k = 0; k <= file && at; k++) {
      at = strstr(at, "#include \"");
      if (at && k < file) at += 10;
    }
    if (!at) break;
    char inc[128];
    if (sscanf(at, "#include \"%127[^\"]\"", inc) != 1) break;
    snprintf(path, sizeof path, "%s/%s", AGRL_VK_SHADER_DIR, inc);
  }
  return text;
}

/* Every pipeline's push-constant block, as its SPIR-V lays it out, is the C
 * struct of its layout (vk_push.h), member for member: offset and size; its
 * shader declares it by that layout's list of push.glsl (so members of one
 * type cannot trade names, which the optimized SPIR-V no longer holds); and
 * a dispatch with another layout's struct is refused. */
static void push_layouts_match_the_shaders(void **state) {
  (void)state;
  for (int p = 0; p < AG__VK_N_PIPES; p++) {
    const ag__vk_shader *sh = &ag__vk_shaders[p];
    const ag__vk_push_layout *l = &ag__vk_push[p];
    uint32_t offset[64], size[64];
    memset(offset, 0xff, sizeof offset);
    memset(size, 0, sizeof size);
    const int members = spirv_push_block(sh->spv, sh->bytes, offset, size, 64);
    if (!l->name) fail_msg("pipeline %s has no push-constant layout in vk_push.c", sh->name);
    if (members != l->n)
      fail_msg("pipeline %s: the shader's block has %d members, layout %s %d", sh->name, members, l->name,
               l->n);
    for (int m = 0; m < members; m++)
      if (offset[m] != l->offset[m] || size[m] != l->size[m])
        fail_msg("pipeline %s: member %d at %u (%u bytes) in the shader, at %u (%u bytes) in C's %s",
                 sh->name, m, offset[m], size[m], l->offset[m], l->size[m], l->name);
    assert_true(l->bytes >= offset[members - 1] + size[members - 1] && l->bytes <= AG__VK_PUSH_BYTES);
    char *text = shader_text(sh->name), want[160], upper[64];
    size_t i = 0;
    for (; l->name[i] && i + 1 < sizeof upper; i++)
      upper[i] = (char)(l->name[i] >= 'a' && l->name[i] <= 'z' ? l->name[i] - 32 : l->name[i]);
    upper[i] = 0;
    snprintf(want, sizeof want, "layout(push_constant) uniform P { AGPC_%s(AGPC_FIELD) } p;", upper);
    const char *block = strstr(text, "layout(push_constant)");
    if (!block) fail_msg("shader %s (and its includes) declares no push constants", sh->name);
    if (strncmp(block, want, strlen(want)) != 0)
      fail_msg("shader %s declares its push constants otherwise than by layout %s: %.80s", sh->name, l->name,
               block);
    if (strstr(block + 1, "layout(push_constant)"))
      fail_msg("shader %s has a second push-constant block", sh->name);
    free(text);
  }
  vk_state *s = st;
  ag__vk_pc_fill fill_pc;
  memset(&fill_pc, 0, sizeof fill_pc);
  assert_int_equal(ag__vk_pipe(s, AG__VK_PIPE_COPY), AG__VK_PIPE_COPY);
  assert_int_equal(ag__vk_dispatch(s, AG__VK_PIPE_COPY, &fill_pc, sizeof fill_pc, 1, 1, 1),
                   AG_ERR_INVALID_ARG);
  assert_non_null(strstr(ag_last_error(), "layout copy"));
}

#endif /* AGRL_WITH_VULKAN */

static int by_address(const void *a, const void *b) {
  const uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
  return x < y ? -1 : x > y;
}

static void fill_floats(void *dst, size_t off, size_t len, void *user) {
  memcpy(dst, (const unsigned char *)user + off, len);
}

/* 10,000 buffers of 64 bytes (more than the 4,096 memory objects a device
 * need allow) in a few memory objects, apart and aligned; each one's floats
 * uploaded, copied by a kernel that reads its device address and by a
 * buffer copy, and read back. Half are freed in random order and 5,000 of
 * other sizes made in their room: the survivors keep their bytes. */
static void many_small_buffers(void **state) {
  (void)state;
  enum { N = 10000, K = 16, M = 5000, SLOT = 512 }; /* K floats a buffer; the reused ones up to SLOT */
  const uint32_t objects0 = ag__vulkan_memory_objects(st, 0);
  void **p = malloc(sizeof *p * N), **sorted = malloc(sizeof *p * N);
  size_t *n = malloc(sizeof *n * N); /* each buffer's floats */
  float *v = malloc(sizeof *v * (size_t)N * SLOT), *got = malloc(sizeof *got * (size_t)N * SLOT);
  assert_true(p && sorted && n && v && got);
  for (size_t i = 0; i < N; i++) {
    assert_int_equal(be->alloc(st, K * sizeof(float), &p[i]), AG_OK);
    n[i] = K;
    for (size_t k = 0; k < K; k++) v[i * SLOT + k] = (float)(i * K + k);
    assert_int_equal(be->upload(st, p[i], K * sizeof(float), fill_floats, &v[i * SLOT]), AG_OK);
  }
  const uint32_t objects = ag__vulkan_memory_objects(st, 0);
  printf("vulkan_mem: %d buffers of %zu bytes in %u more memory objects\n", N, K * sizeof(float),
         objects - objects0);
  assert_true(objects <= objects0 + 2);
  memcpy(sorted, p, sizeof *p * N);
  qsort(sorted, N, sizeof *sorted, by_address);
  for (size_t i = 0; i < N; i++) {
    assert_true((uintptr_t)sorted[i] % 256 == 0);
    if (i) assert_true((uintptr_t)sorted[i] - (uintptr_t)sorted[i - 1] >= K * sizeof(float));
  }
  /* a kernel copies each (by its address) into its slot of one buffer */
  void *all;
  const size_t all_bytes = sizeof(float) * (size_t)N * SLOT;
  assert_int_equal(be->alloc(st, all_bytes, &all), AG_OK);
  for (size_t i = 0; i < N; i++) {
    ag__copy_args a = {{p[i], K, 1, K}, {(float *)all + i * SLOT, K, 1, K}, 0};
    assert_int_equal(be->run(st, AG__K_COPY, &a, sizeof a), AG_OK);
  }
  io d = {(unsigned char *)got};
  assert_int_equal(be->download(st, all, all_bytes, drain, &d), AG_OK);
  for (size_t i = 0; i < N; i++)
    for (size_t k = 0; k < K; k++)
      if (got[i * SLOT + k] != v[i * SLOT + k])
        fail_msg("buffer %zu float %zu read by the kernel is %g, not %g", i, k, got[i * SLOT + k],
                 v[i * SLOT + k]);
  /* half freed in random order, then M of 1 to SLOT floats made and filled */
  uint64_t x = 12345;
  size_t *order = malloc(sizeof *order * N);
  assert_true(order != NULL);
  for (size_t i = 0; i < N; i++) order[i] = i;
  for (size_t i = N - 1; i > 0; i--) {
    const size_t j = lcg(&x) % (i + 1), t = order[i];
    order[i] = order[j], order[j] = t;
  }
  for (size_t i = 0; i < N / 2; i++) be->release(st, p[order[i]]);
  for (size_t i = 0; i < M; i++) {
    const size_t j = order[i];
    n[j] = 1 + lcg(&x) % SLOT;
    assert_int_equal(be->alloc(st, n[j] * sizeof(float), &p[j]), AG_OK);
    for (size_t k = 0; k < n[j]; k++) v[j * SLOT + k] = (float)(-(double)(j * SLOT + k));
    assert_int_equal(be->upload(st, p[j], n[j] * sizeof(float), fill_floats, &v[j * SLOT]), AG_OK);
  }
  assert_true(ag__vulkan_memory_objects(st, 0) <= objects0 + 3);
  /* every buffer, old and new, copied (by buffer and offset) into its slot */
  assert_int_equal(be->zero(st, all, all_bytes), AG_OK);
  for (size_t i = 0; i < N; i++)
    assert_int_equal(be->copy(st, (float *)all + i * SLOT, p[i], n[i] * sizeof(float)), AG_OK);
  assert_int_equal(be->download(st, all, all_bytes, drain, &d), AG_OK);
  for (size_t i = 0; i < N; i++)
    for (size_t k = 0; k < SLOT; k++) {
      const float want = k < n[i] ? v[i * SLOT + k] : 0.0f;
      if (got[i * SLOT + k] != want)
        fail_msg("buffer %zu float %zu after reuse is %g, not %g", i, k, got[i * SLOT + k], want);
    }
  for (size_t i = 0; i < N; i++) be->release(st, p[i]);
  be->release(st, all);
  assert_int_equal(be->sync(st), AG_OK);
  /* the blocks left empty are freed but for one */
  assert_true(ag__vulkan_memory_objects(st, 0) <= objects0 + 1);
  free(p);
  free(sorted);
  free(n);
  free(v);
  free(got);
  free(order);
}

/* With the limit lowered to what is held plus one: one allocation that
 * needs a block of its own is made, the next is refused (AG_ERR_OUT_OF_MEMORY,
 * a message naming the limit, nothing held more), a small one still fits
 * the block there is; once the first is released (its last use still
 * queued), the second is made in its room and works. */
static void memory_object_limit(void **state) {
  (void)state;
  void *small0, *small1, *a, *b;
  assert_int_equal(be->alloc(st, 1000, &small0), AG_OK); /* a block of small ones is held */
  const uint32_t held = ag__vulkan_memory_objects(st, 0);
  ag__vulkan_memory_objects(st, held + 1);
  const size_t big = (size_t)80 << 20; /* above a quarter of the largest block: a block of its own */
  assert_int_equal(be->alloc(st, big, &a), AG_OK);
  assert_int_equal(ag__vulkan_memory_objects(st, 0), held + 1);
  b = NULL;
  assert_int_equal(be->alloc(st, big, &b), AG_ERR_OUT_OF_MEMORY);
  assert_null(b);
  assert_non_null(strstr(ag_last_error(), "maxMemoryAllocationCount"));
  assert_int_equal(ag__vulkan_memory_objects(st, 0), held + 1);
  assert_int_equal(be->alloc(st, 4096, &b), AG_OK);
  small1 = b;
  assert_int_equal(ag__vulkan_memory_objects(st, 0), held + 1);
  assert_int_equal(be->zero(st, a, big), AG_OK); /* still queued when a is released */
  be->release(st, a);
  assert_int_equal(be->alloc(st, big, &b), AG_OK);
  assert_int_equal(ag__vulkan_memory_objects(st, 0), held + 1);
  unsigned char in[4096], out[4096];
  for (size_t i = 0; i < sizeof in; i++) in[i] = pattern(i + 5);
  io u = {in}, d = {out};
  assert_int_equal(be->upload(st, (char *)b + big - sizeof in, sizeof in, fill, &u), AG_OK);
  assert_int_equal(be->download(st, (char *)b + big - sizeof in, sizeof in, drain, &d), AG_OK);
  assert_memory_equal(in, out, sizeof in);
  be->release(st, b);
  be->release(st, small0);
  be->release(st, small1);
  ag__vulkan_memory_objects(st, UINT32_MAX); /* the device's limit again */
  assert_int_equal(be->sync(st), AG_OK);
}

/* A context on the device: tensors made and read back, an op on the device,
 * one whose kernel is not provided refused. */
static void context(void **state) {
  (void)state;
  assert_true(ag_device_count(AG_DEVICE_VULKAN) >= 1);
  assert_int_equal(ag_device_count(AG_DEVICE_AUTO), 0);
  ag_ctx *ctx = NULL;
  assert_int_equal(ag_ctx_create(&ctx, AG_DEVICE_VULKAN, ag_device_count(AG_DEVICE_VULKAN)),
                   AG_ERR_NO_DEVICE);
  assert_null(ctx);
  assert_true(strstr(ag_last_error(), "Vulkan device") != NULL);
  assert_int_equal(ag_ctx_create(&ctx, AG_DEVICE_VULKAN, 0), AG_OK);
  assert_int_equal(ag_ctx_device(ctx), AG_DEVICE_VULKAN);
  assert_true(strncmp(ag_ctx_device_name(ctx), "vulkan:0", 8) == 0);
  float v[300], back[300];
  for (int i = 0; i < 300; i++) v[i] = (float)i * 0.5f - 7.0f;
  ag_tensor *t, *z, *u = NULL;
  assert_int_equal(ag_tensor_create(ctx, 30, 10, AG_F32, v, &t), AG_OK);
  assert_int_equal(ag_tensor_read(t, back, sizeof back), AG_OK);
  assert_memory_equal(v, back, sizeof v);
  assert_int_equal(ag_tensor_create(ctx, 30, 10, AG_F32, NULL, &z), AG_OK);
  assert_int_equal(ag_tensor_read(z, back, sizeof back), AG_OK);
  for (int i = 0; i < 300; i++) assert_true(back[i] == 0.0f);
  assert_int_equal(ag_add(t, t, &u), AG_OK); /* MAP2 on the device */
  assert_int_equal(ag_tensor_read(u, back, sizeof back), AG_OK);
  for (int i = 0; i < 300; i++) assert_true(back[i] == v[i] + v[i]);
  ag_tensor *m = NULL; /* GEMM: t^T t, [10, 10], against the host's sums */
  assert_int_equal(ag_matmul(t, 1, t, 0, &m), AG_OK);
  float mm[100];
  assert_int_equal(ag_tensor_read(m, mm, sizeof mm), AG_OK);
  for (int i = 0; i < 10; i++)
    for (int j = 0; j < 10; j++) {
      double want = 0;
      for (int r = 0; r < 30; r++) want += (double)v[i * 30 + r] * v[j * 30 + r];
      assert_true(fabs(mm[j * 10 + i] - want) <= 1e-5 * fabs(want) + 1e-3);
    }
  ag_ctx_free(ctx);
}

int main(int argc, char **argv) {
  (void)argc, (void)argv;
  const char *req = getenv("AGRL_REQUIRE_VULKAN");
  setenv("AGRL_VK_VALIDATION", "1", 0); /* before the first instance: the process keeps one */
  be = ag__vulkan_backend();
  if (!be || ag__vulkan_device_count() < 1) {
    printf("vulkan_mem: no usable Vulkan device (%s): skipped\n", be ? "none found" : "built without Vulkan");
    return req && *req && strcmp(req, "0") ? 1 : 77;
  }
  char desc[256];
  if (be->open(0, &st, desc, sizeof desc) != AG_OK) {
    printf("vulkan_mem: opening device 0 failed\n");
    return 1;
  }
  printf("vulkan_mem: %s\n", desc);
  /* the validation layer's errors are counted at the end of transfers */
  const struct CMUnitTest tests[] = {
#ifdef AGRL_WITH_VULKAN
      cmocka_unit_test(ranges_against_a_map),
      cmocka_unit_test(every_kernel_has_an_entry),
      cmocka_unit_test(push_layouts_match_the_shaders),
#endif
      cmocka_unit_test(small_uploads_keep_their_order),
      cmocka_unit_test(many_small_buffers),
      cmocka_unit_test(memory_object_limit),
      cmocka_unit_test(transfers),
      cmocka_unit_test(context)};
  const int r = cmocka_run_group_tests_name("vulkan_mem", tests, NULL, NULL);
  be->close(st);
  return r;
}
