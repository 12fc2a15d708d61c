/* test_randn.c — ag_randn: standard normal values on the device.
 *
 * The values are checked against a Box-Muller written here in double with
 * libm, from the same Philox draws recomputed on the host (base/philox.h),
 * within 1 ulp of float (the header promises 1; 2 would be the usual
 * bound); against the shared code of both backends (base/normal.h) bit for
 * bit, which on CUDA is the check that the GPU gives the CPU's bits; their
 * moments over a million draws; the counter: one value a number, two calls
 * as one of both sizes, no overlap with ag_randint, fresh values at every
 * replay of a recording; and bad arguments, which change nothing. Run as
 * `test_randn cpu` or `test_randn cuda`.
 */
#include <math.h>

#include "agt.h"
#include "base/normal.h"
#include "base/philox.h"
#include "graph/graph_internal.h" /* ag__rng_counter_tensor */

/* Box-Muller of one draw as the header states it, in double with libm:
 * u1 = (low 32 bits + 1/2) 2^-32, u2 = (high 32 bits + 1/2) 2^-32,
 * z = sqrt(-2 ln u1) cos(2 pi u2). The angle is first taken to the nearest
 * quarter turn (u2 - q/4 is exact), so that libm's sin and cos keep their
 * relative accuracy near the cosine's zeros, where 2 pi u2 rounded would
 * not. */
static double box_muller(uint64_t bits) {
  const double u1 = ((double)(bits & 0xffffffffu) + 0.5) / 4294967296.0;
  const double u2 = ((double)(bits >> 32) + 0.5) / 4294967296.0;
  const double q = floor(4.0 * u2 + 0.5), x = 2.0 * M_PI * (u2 - q / 4.0);
  const int quarter = (int)q & 3;
  const double c = quarter == 0 ? cos(x) : quarter == 1 ? -sin(x) : quarter == 2 ? -cos(x) : sin(x);
  return sqrt(-2.0 * log(u1)) * c;
}

/* |got - want| in ulps of float at want. */
static double ulps(float got, double want) {
  const double ulp = ldexp(1.0, ilogb((float)want) - 23);
  return fabs((double)got - want) / ulp;
}

static uint32_t bits_of(float f) {
  uint32_t b;
  memcpy(&b, &f, sizeof b);
  return b;
}

static uint64_t counter_of(ag_rng *rng) {
  int64_t c;
  agt_ok(ag_tensor_read(ag__rng_counter_tensor(rng), &c, sizeof c));
  return (uint64_t)c;
}

/* Values first .. first + n - 1 of stream `seed` in got: the shared code's
 * bits, and within 1 ulp of the libm reference. */
static void expect_stream(const char *what, const float *got, int64_t n, uint64_t seed, uint64_t first) {
  for (int64_t i = 0; i < n; i++) {
    const uint64_t bits = ag__philox_u64(seed, first + (uint64_t)i);
    const float want = ag__normal_of(bits);
    if (bits_of(got[i]) != bits_of(want))
      fail_msg("%s: value %lld (counter %llu) is %.9g (%08x), the shared code's %.9g (%08x)", what,
               (long long)i, (unsigned long long)(first + (uint64_t)i), (double)got[i], bits_of(got[i]),
               (double)want, bits_of(want));
    const double e = ulps(got[i], box_muller(bits));
    if (!(e <= 1.0))
      fail_msg("%s: value %lld is %.9g, %.2f ulp from Box-Muller's %.17g", what, (long long)i, (double)got[i],
               e, box_muller(bits));
  }
}

/* The shared code on the host, at the draws where it could go wrong: the
 * smallest and largest uniforms (the radius' ends, 6.77 and 2^-16), angles
 * next to each quarter turn (values near 0 that need their relative
 * accuracy), mantissas about sqrt(2) (the logarithm's two branches), and
 * 2^20 draws of the stream. */
static void normal_values_are_box_muller_within_an_ulp(void **state) {
  (void)state;
  uint64_t edge[64];
  int n = 0;
  const uint32_t lows[] = {0,           1,           0x7fffffffu, 0x80000000u,
                           0xb504f333u, 0xb504f334u, 0xfffffffeu, 0xffffffffu};
  const uint32_t highs[] = {0,           0x3fffffffu, 0x40000000u, 0x7fffffffu,
                            0x80000000u, 0xbfffffffu, 0xc0000000u, 0xffffffffu};
  for (size_t i = 0; i < 8; i++) edge[n++] = ((uint64_t)highs[i] << 32) | lows[i];
  for (size_t i = 0; i < 8; i++) edge[n++] = ((uint64_t)highs[7 - i] << 32) | lows[i];
  double worst = 0, largest = 0;
  for (int64_t k = 0; k < n + (1 << 20); k++) {
    const uint64_t bits = k < n ? edge[k] : ag__philox_u64(0x5eed, (uint64_t)(k - n));
    const float z = ag__normal_of(bits);
    const double e = ulps(z, box_muller(bits));
    if (!(e <= 1.0))
      fail_msg("draw %016llx: %.9g is %.2f ulp from %.17g", (unsigned long long)bits, (double)z, e,
               box_muller(bits));
    worst = e > worst ? e : worst;
    largest = fabs(z) > largest ? fabs(z) : largest;
    assert_true(fabsf(z) <= 6.77f);
  }
  /* the largest value: the smallest u1 at the angle nearest 0 */
  assert_true(fabsf(ag__normal_of(0)) > 6.76f);
  print_message("%d edge draws and 2^20 of the stream: at most %.3f ulp from Box-Muller, |z| <= %.4f\n", n,
                worst, largest);
}

/* ag_randn's values, element (r, c) from counter c * rows + r, on the
 * device under test; on CUDA also the CPU backend's bits. */
static void randn_draws_box_muller_of_the_philox_stream(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_rng *rng;
  const uint64_t seed = 0x0123456789abcdefull;
  agt_ok(ag_rng_create(ctx, seed, &rng));
  ag_tensor *z;
  agt_ok(ag_randn(rng, 37, 29, &z)); /* past the GPU kernel's block of threads */
  assert_int_equal(ag_tensor_rows(z), 37);
  assert_int_equal(ag_tensor_cols(z), 29);
  assert_int_equal(ag_tensor_dtype(z), AG_F32);
  assert_false(ag_tensor_requires_grad(z));
  float *v = agt_read_f32(z);
  expect_stream("randn 37 x 29", v, 37 * 29, seed, 0);
  assert_true(counter_of(rng) == 37 * 29);
  if (agt_kind != AG_DEVICE_CPU) {
    ag_ctx *cpu;
    ag_rng *crng;
    ag_tensor *cz;
    agt_ok(ag_ctx_create(&cpu, AG_DEVICE_CPU, 0));
    agt_ok(ag_rng_create(cpu, seed, &crng));
    agt_ok(ag_randn(crng, 37, 29, &cz));
    float *cv = agt_read_f32(cz);
    assert_memory_equal(v, cv, 37 * 29 * sizeof(float));
    free(cv);
    ag_rng_free(crng);
    ag_ctx_free(cpu);
  }
  free(v);
  ag_rng_free(rng);
  ag_ctx_free(ctx);
}

/* A million values: mean 0, variance 1, third moment 0, fourth 3, and the
 * mass within 1 and beyond 3 standard deviations, each within 5 of its
 * standard errors. */
static void randn_moments_of_a_million_draws(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_rng *rng;
  agt_ok(ag_rng_create(ctx, 2024, &rng));
  ag_tensor *z;
  const int64_t rows = 1000, cols = 1000, n = rows * cols;
  agt_ok(ag_randn(rng, rows, cols, &z));
  float *v = agt_read_f32(z);
  double m1 = 0, m2 = 0, m3 = 0, m4 = 0, in1 = 0, out3 = 0;
  for (int64_t i = 0; i < n; i++) {
    const double x = v[i], x2 = x * x;
    m1 += x, m2 += x2, m3 += x2 * x, m4 += x2 * x2;
    in1 += fabs(x) < 1.0;
    out3 += fabs(x) > 3.0;
  }
  m1 /= n, m2 /= n, m3 /= n, m4 /= n, in1 /= n, out3 /= n;
  const double p1 = 0.682689492137086, p3 = 0.002699796063260;
  print_message("mean %.5f, variance %.5f, third %.5f, fourth %.4f, |z| < 1: %.5f, |z| > 3: %.6f\n", m1,
                m2 - m1 * m1, m3, m4, in1, out3);
  assert_true(fabs(m1) < 5 * sqrt(1.0 / n));
  assert_true(fabs(m2 - m1 * m1 - 1.0) < 5 * sqrt(2.0 / n));
  assert_true(fabs(m3) < 5 * sqrt(15.0 / n));
  assert_true(fabs(m4 - 3.0) < 5 * sqrt(96.0 / n));
  assert_true(fabs(in1 - p1) < 5 * sqrt(p1 * (1 - p1) / n));
  assert_true(fabs(out3 - p3) < 5 * sqrt(p3 * (1 - p3) / n));
  free(v);
  ag_rng_free(rng);
  ag_ctx_free(ctx);
}

/* The counter moves on by rows * cols: two calls give one call of both
 * sizes, the first's values first; ag_randint and ag_randn of one stream
 * take consecutive counter values and never the same; a stream set to a
 * counter draws from there (across the 2^32 of a block number's low word). */
static void randn_takes_one_counter_value_a_number(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_rng *one, *two;
  const uint64_t seed = 77;
  agt_ok(ag_rng_create(ctx, seed, &one));
  agt_ok(ag_rng_create(ctx, seed, &two));
  ag_tensor *a, *b, *whole;
  agt_ok(ag_randn(one, 3, 5, &a));
  agt_ok(ag_randn(one, 7, 1, &b));
  assert_true(counter_of(one) == 22);
  agt_ok(ag_randn(two, 22, 1, &whole));
  float va[15], vb[7], vw[22];
  agt_ok(ag_tensor_read(a, va, sizeof va));
  agt_ok(ag_tensor_read(b, vb, sizeof vb));
  agt_ok(ag_tensor_read(whole, vw, sizeof vw));
  assert_memory_equal(va, vw, sizeof va);
  assert_memory_equal(vb, vw + 15, sizeof vb);
  /* interleaved with uniform integers: 5 integers, then 4 values, then 3 integers */
  ag_tensor *i1, *z, *i2;
  agt_ok(ag_randint(one, 1000, 5, AG_I64, &i1));
  agt_ok(ag_randn(one, 2, 2, &z));
  agt_ok(ag_randint(one, 1000, 3, AG_I64, &i2));
  assert_true(counter_of(one) == 22 + 5 + 4 + 3);
  int64_t vi1[5], vi2[3];
  float vz[4];
  agt_ok(ag_tensor_read(i1, vi1, sizeof vi1));
  agt_ok(ag_tensor_read(z, vz, sizeof vz));
  agt_ok(ag_tensor_read(i2, vi2, sizeof vi2));
  for (int i = 0; i < 5; i++)
    assert_int_equal(vi1[i], (int64_t)ag__scale_u64(ag__philox_u64(seed, 22 + (uint64_t)i), 1000));
  expect_stream("randn between randints", vz, 4, seed, 27);
  for (int i = 0; i < 3; i++)
    assert_int_equal(vi2[i], (int64_t)ag__scale_u64(ag__philox_u64(seed, 31 + (uint64_t)i), 1000));
  /* an odd counter, with draws across a block number's 32 bits */
  const uint64_t at = ((uint64_t)1 << 33) - 7;
  agt_ok(ag_rng_set_counter(one, at));
  ag_tensor *c;
  agt_ok(ag_randn(one, 5, 3, &c));
  float vc[15];
  agt_ok(ag_tensor_read(c, vc, sizeof vc));
  expect_stream("randn from counter 2^33 - 7", vc, 15, seed, at);
  assert_true(counter_of(one) == at + 15);
  /* set back to 0: the first values again */
  agt_ok(ag_rng_set_counter(one, 0));
  agt_ok(ag_randn(one, 3, 5, &a));
  agt_ok(ag_tensor_read(a, vw, sizeof va));
  assert_memory_equal(va, vw, sizeof va);
  ag_rng_free(one);
  ag_rng_free(two);
  ag_ctx_free(ctx);
}

typedef struct draw_step {
  ag_rng *rng;
  ag_tensor *idx, *z; /* the recording's temporaries, written at each replay */
} draw_step;

static ag_status draws(ag_ctx *ctx, void *user) {
  draw_step *d = user;
  ag_status s = ag_randint(d->rng, 1000, 5, AG_I32, &d->idx);
  (void)ctx;
  return s ? s : ag_randn(d->rng, 4, 8, &d->z);
}

/* A recorded step of 5 integers and 4 x 8 values draws the stream's next
 * 37 numbers at every replay, on the device (no transfer), with the
 * integers first; an eager draw afterwards goes on from there. */
static void randn_in_a_recording_draws_fresh_values_at_every_replay(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  draw_step d = {NULL, NULL, NULL};
  const uint64_t seed = 4242;
  agt_ok(ag_rng_create(ctx, seed, &d.rng));
  ag_capture *cap;
  agt_ok(ag_capture_create(ctx, draws, &d, &cap));
  assert_true(counter_of(d.rng) == 0); /* recording runs nothing */
  float prev[32];
  for (int k = 0; k < 4; k++) {
    ag_ctx_stats st0, st1;
    ag_ctx_get_stats(ctx, &st0);
    agt_ok(ag_capture_replay(cap));
    ag_ctx_get_stats(ctx, &st1);
    assert_true(st1.kernels == st0.kernels); /* the replay is the recording, nothing issued anew */
    int32_t idx[5];
    float z[32];
    agt_ok(ag_tensor_read(d.idx, idx, sizeof idx));
    agt_ok(ag_tensor_read(d.z, z, sizeof z));
    const uint64_t first = (uint64_t)k * 37;
    for (int i = 0; i < 5; i++)
      assert_int_equal(idx[i], (int32_t)ag__scale_u64(ag__philox_u64(seed, first + (uint64_t)i), 1000));
    expect_stream("a replay's values", z, 32, seed, first + 5);
    if (k > 0) assert_memory_not_equal(z, prev, sizeof z);
    memcpy(prev, z, sizeof z);
    assert_true(counter_of(d.rng) == first + 37);
  }
  ag_tensor *after;
  agt_ok(ag_randn(d.rng, 2, 1, &after));
  float va[2];
  agt_ok(ag_tensor_read(after, va, sizeof va));
  expect_stream("an eager draw after the replays", va, 2, seed, 4 * 37);
  ag_capture_free(cap);
  ag_rng_free(d.rng);
  ag_ctx_free(ctx);
}

/* Bad arguments: the status and message; *out untouched, no kernel
 * queued, the counter where it was. */
static void randn_bad_arguments_change_nothing(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_rng *rng;
  agt_ok(ag_rng_create(ctx, 9, &rng));
  agt_ok(ag_rng_set_counter(rng, 100));
  ag_tensor *o = (ag_tensor *)(uintptr_t)0x1234;
  ag_ctx_stats before, after;
  ag_ctx_get_stats(ctx, &before);
  agt_err(ag_randn(NULL, 2, 2, &o), AG_ERR_INVALID_ARG, "ag_randn: rng and out must not be NULL");
  agt_err(ag_randn(rng, 2, 2, NULL), AG_ERR_INVALID_ARG, "rng and out must not be NULL");
  agt_err(ag_randn(rng, 0, 2, &o), AG_ERR_INVALID_ARG, "rows = 0 and cols = 2 must both be positive");
  agt_err(ag_randn(rng, 3, -1, &o), AG_ERR_INVALID_ARG, "rows = 3 and cols = -1 must both be positive");
  agt_err(ag_randn(rng, INT64_MAX, 4, &o), AG_ERR_OUT_OF_MEMORY, "does not fit in memory");
  ag_ctx_get_stats(ctx, &after);
  assert_ptr_equal(o, (ag_tensor *)(uintptr_t)0x1234);
  assert_true(after.kernels == before.kernels);
  assert_true(counter_of(rng) == 100);
  ag_tensor *z;
  agt_ok(ag_randn(rng, 1, 1, &z)); /* and the stream goes on from 100 */
  float v;
  agt_ok(ag_tensor_read(z, &v, sizeof v));
  expect_stream("the draw after the errors", &v, 1, 9, 100);
  ag_rng_free(rng);
  ag_ctx_free(ctx);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(normal_values_are_box_muller_within_an_ulp),
      cmocka_unit_test(randn_draws_box_muller_of_the_philox_stream),
      cmocka_unit_test(randn_moments_of_a_million_draws),
      cmocka_unit_test(randn_takes_one_counter_value_a_number),
      cmocka_unit_test(randn_in_a_recording_draws_fresh_values_at_every_replay),
      cmocka_unit_test(randn_bad_arguments_change_nothing),
  };
  return agt_run(argc, argv, "randn", tests, sizeof tests / sizeof tests[0]);
}
