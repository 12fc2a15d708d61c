/* test_status.c — the status table, per-thread messages, dtype conversions,
 * device names. */
#include <math.h>
#include <pthread.h>

#include "agt.h"
#include "core/internal.h"

static void status_names_and_descriptions_come_from_one_table(void **state) {
  (void)state;
  assert_string_equal(ag_status_name(AG_OK), "AG_OK");
  assert_string_equal(ag_status_name(AG_ERR_FREED), "AG_ERR_FREED");
  assert_string_equal(ag_status_name((ag_status)-999), "AG_UNKNOWN_STATUS");
  assert_string_equal(ag_status_name((ag_status)-13), "AG_UNKNOWN_STATUS");
  assert_string_equal(ag_status_describe(AG_ERR_OUT_OF_MEMORY), "not enough memory");
  /* every code from 0 down to the last is named, and names are distinct */
  const char *seen[32];
  int n = 0;
  for (int v = 0; v >= -12; v--) {
    const char *name = ag_status_name((ag_status)v);
    assert_string_not_equal(name, "AG_UNKNOWN_STATUS");
    for (int k = 0; k < n; k++) assert_string_not_equal(seen[k], name);
    seen[n++] = name;
  }
}

static void *other_thread(void *arg) {
  (void)arg;
  ag_buffer *b = NULL;
  ag_buffer_create(NULL, 1, 1, AG_F32, &b); /* sets this thread's message */
  return (void *)(strstr(ag_last_error(), "ctx is NULL") ? (void *)1 : NULL);
}

static void last_error_is_per_thread(void **state) {
  (void)state;
  ag_clear_error();
  assert_string_equal(ag_last_error(), "");
  ag_buffer *b = NULL;
  agt_err(ag_buffer_create(NULL, 0, 1, AG_F32, &b), AG_ERR_INVALID_ARG, "ctx is NULL");
  ag_clear_error();
  pthread_t th;
  void *res = NULL;
  assert_int_equal(pthread_create(&th, NULL, other_thread, NULL), 0);
  assert_int_equal(pthread_join(th, &res), 0);
  assert_ptr_equal(res, (void *)1);
  assert_string_equal(ag_last_error(), ""); /* the other thread's failure is not ours */
}

/* Reference rounding of a finite double to `bits` significant bits with
 * minimum normal exponent emin and maximum exponent emax, subnormals
 * included (IEEE round to nearest even, the default rounding mode). */
static double ref_round(double x, int bits, int emin, int emax) {
  if (x == 0) return x;
  if (fabs(x) >= ldexp(2.0 - ldexp(1.0, -bits), emax)) return copysign(INFINITY, x);
  int e;
  frexp(x, &e); /* |x| = m * 2^e, 0.5 <= m < 1 */
  int exp = e - 1 < emin ? emin : e - 1;
  double q = ldexp(1.0, exp - (bits - 1));
  return nearbyint(x / q) * q;
}

static void f16_and_bf16_conversions_round_to_nearest_even(void **state) {
  (void)state;
  /* every f16 value survives f16 -> f32 -> f16 */
  for (uint32_t h = 0; h < 65536; h++) {
    float f = ag__f16_to_f32((uint16_t)h);
    if (isnan(f)) continue;
    assert_int_equal(ag__f32_to_f16(f), h);
    float b = ag__bf16_to_f32((uint16_t)h);
    if (isnan(b)) continue;
    assert_int_equal(ag__f32_to_bf16(b), h);
  }
  /* f32 -> f16 / bf16 against the double-precision reference, ties included */
  agt_rng g = {17};
  for (int i = 0; i < 200000; i++) {
    uint32_t bits = (uint32_t)agt_next(&g);
    float x;
    memcpy(&x, &bits, 4);
    if (i % 2) { /* inside the f16 range, subnormals included */
      x = ldexpf(agt_uniform(&g, 1.0f, 2.0f), (int)agt_below(&g, 44) - 27);
      memcpy(&bits, &x, 4);
      if (i % 4 == 1) bits = (bits & 0xffffe000u) | 0x1000u; /* an exact tie for f16 */
      if (i % 8 == 3) bits = (bits & 0xffff0000u) | 0x8000u; /* an exact tie for bf16 */
      memcpy(&x, &bits, 4);
    }
    if (!isfinite(x)) continue;
    double e16 = ref_round(x, 11, -14, 15);
    double got16 = ag__f16_to_f32(ag__f32_to_f16(x));
    if (!(got16 == e16)) fail_msg("f16(%a) = %a, expected %a", (double)x, got16, e16);
    double eb = ref_round(x, 8, -126, 127);
    double gotb = ag__bf16_to_f32(ag__f32_to_bf16(x));
    if (!(gotb == eb)) fail_msg("bf16(%a) = %a, expected %a", (double)x, gotb, eb);
  }
  assert_true(isnan(ag__f16_to_f32(ag__f32_to_f16(NAN))));
  assert_true(isnan(ag__bf16_to_f32(ag__f32_to_bf16(NAN))));
}

static void dtype_sizes_and_names(void **state) {
  (void)state;
  assert_int_equal(ag_dtype_size(AG_F32), 4);
  assert_int_equal(ag_dtype_size(AG_F16), 2);
  assert_int_equal(ag_dtype_size(AG_BF16), 2);
  assert_int_equal(ag_dtype_size(AG_U8), 1);
  assert_int_equal(ag_dtype_size(AG_I32), 4);
  assert_int_equal(ag_dtype_size(AG_I64), 8);
  assert_int_equal(ag_dtype_size((ag_dtype)77), 0);
  assert_string_equal(ag_dtype_name(AG_BF16), "bf16");
  assert_string_equal(ag_dtype_name((ag_dtype)77), "?");
  assert_non_null(strstr(ag_version(), AGRL_VERSION));
}

static void device_names_parse_by_one_grammar(void **state) {
  (void)state;
  static const struct {
    const char *name;
    ag_device_kind kind;
    int index;
  } good[] = {
      {"auto", AG_DEVICE_AUTO, 0},
      {"cpu", AG_DEVICE_CPU, 0},
      {"cuda", AG_DEVICE_CUDA, 0},
      {"cuda:0", AG_DEVICE_CUDA, 0},
      {"cuda:7", AG_DEVICE_CUDA, 7},
      {"cuda:1023", AG_DEVICE_CUDA, 1023},
      {"cuda:007", AG_DEVICE_CUDA, 7},
      {"vulkan", AG_DEVICE_VULKAN, 0},
      {"vulkan:0", AG_DEVICE_VULKAN, 0},
      {"vulkan:12", AG_DEVICE_VULKAN, 12},
      {"vulkan:1023", AG_DEVICE_VULKAN, 1023},
  };
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    ag_device_kind kind = (ag_device_kind)77;
    int index = -5;
    agt_ok(ag_device_parse(good[i].name, &kind, &index));
    if (kind != good[i].kind || index != good[i].index)
      fail_msg("'%s' parsed as kind %d index %d, not %d %d", good[i].name, (int)kind, index,
               (int)good[i].kind, good[i].index);
  }
  assert_int_equal(AG_DEVICE_INDEX_MAX, 1023);
  static const char *const bad[] = {
      "",
      "cuda:",
      "cuda:-1",
      "cuda:+1",
      "cuda: 1",
      "cuda:1 ",
      "cuda:1x",
      "cuda:1024",
      "cuda:0x1",
      "cuda:1.0",
      "cuda::1",
      "cudax",
      "cudavulkan",
      "CUDA",
      "Cuda:0",
      " cuda",
      "cuda ",
      "vulkan:",
      "vulkan:-0",
      "vulkanx",
      "vulkan:1024",
      "vulkan:99999999999999999999",
      "cpu:0",
      "cpu:",
      "cpux",
      "CPU",
      "auto:0",
      "autox",
      "gpu",
      "cuda:1:2",
      "cuda,0",
      "0",
      ":0",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ag_device_kind kind = (ag_device_kind)77;
    int index = -5;
    ag_clear_error();
    ag_status s = ag_device_parse(bad[i], &kind, &index);
    if (s != AG_ERR_INVALID_ARG)
      fail_msg("'%s' gave %s (kind %d, index %d), not AG_ERR_INVALID_ARG", bad[i], ag_status_name(s),
               (int)kind, index);
    assert_int_equal(kind, 77); /* the outputs are left as they were */
    assert_int_equal(index, -5);
    char quoted[64];
    snprintf(quoted, sizeof quoted, "'%s'", bad[i]);
    if (!strstr(ag_last_error(), quoted) || !strstr(ag_last_error(), "ag_device_parse"))
      fail_msg("the message for '%s' does not name it: %s", bad[i], ag_last_error());
    if (!strstr(ag_last_error(), "auto, cpu, cuda, cuda:N, vulkan or vulkan:N") ||
        !strstr(ag_last_error(), "0 to 1023"))
      fail_msg("the message for '%s' does not give the grammar: %s", bad[i], ag_last_error());
  }
  ag_device_kind kind = (ag_device_kind)77;
  int index = -5;
  agt_err(ag_device_parse("cuda:1024", &kind, &index), AG_ERR_INVALID_ARG, "too large");
  agt_err(ag_device_parse("vulkan:99999999999999999999", &kind, &index), AG_ERR_INVALID_ARG, "too large");
  agt_err(ag_device_parse("cuda:", &kind, &index), AG_ERR_INVALID_ARG, "no index");
  agt_err(ag_device_parse("cuda:+1", &kind, &index), AG_ERR_INVALID_ARG, "decimal digits alone");
  agt_err(ag_device_parse(NULL, &kind, &index), AG_ERR_INVALID_ARG, "must not be NULL");
  agt_err(ag_device_parse("cpu", NULL, &index), AG_ERR_INVALID_ARG, "must not be NULL");
  agt_err(ag_device_parse("cpu", &kind, NULL), AG_ERR_INVALID_ARG, "must not be NULL");
  agt_err(ag_device_parse("cuda:1", NULL, NULL), AG_ERR_INVALID_ARG, "must not be NULL");
  assert_int_equal(kind, 77);
  assert_int_equal(index, -5);
  /* a long name is cut in the message */
  char longname[300];
  memset(longname, 'c', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  agt_err(ag_device_parse(longname, &kind, &index), AG_ERR_INVALID_ARG, "...' is not a device name");
  assert_true(strlen(ag_last_error()) < 250);
  /* a context's device name ("cpu (...)") begins with a name that parses to its device */
  ag_ctx *ctx = agt_ctx();
  char first[64];
  snprintf(first, sizeof first, "%s", ag_ctx_device_name(ctx));
  first[strcspn(first, " ")] = '\0';
  agt_ok(ag_device_parse(first, &kind, &index));
  assert_int_equal(kind, ag_ctx_device(ctx));
  assert_int_equal(index, ag_ctx_device_index(ctx));
  ag_ctx_free(ctx);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(status_names_and_descriptions_come_from_one_table),
      cmocka_unit_test(last_error_is_per_thread),
      cmocka_unit_test(f16_and_bf16_conversions_round_to_nearest_even),
      cmocka_unit_test(dtype_sizes_and_names),
      cmocka_unit_test(device_names_parse_by_one_grammar),
  };
  return agt_run(argc, argv, "status", tests, sizeof tests / sizeof tests[0]);
}
