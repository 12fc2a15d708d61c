/* test_capture.c — recordings (S15, S19), device RNG, replay = eager steps.
 *
 * The step under test gathers a batch from a buffer by indices (an input
 * tensor, or drawn on the device), runs an MLP, an MSE loss, backward and
 * Adam: the shape of a DQN update. Run as `test_capture cpu` or `... cuda`.
 */
#include <math.h>

#include "agt.h"
#include "base/backend.h" /* ag__vulkan_encodes */
#include "base/philox.h"
#include "core/internal.h"    /* the context's backend state */
#include "cpu/cpu_internal.h" /* ag__cpu_vector_paths: both CPU paths */

enum { ROWS = 6, CAP = 5000, B = 64 };

typedef struct world {
  ag_ctx *ctx;
  ag_buffer *buf;
  ag_mlp *net;
  ag_optim *opt;
  ag_rng *rng;
  ag_tensor *idx; /* input: B indices */
  int use_rng;
  int host_indices_inside; /* misuse: host indices inside the step */
} world;

static ag_status step(ag_ctx *ctx, void *user) {
  world *w = user;
  ag_tensor *idx = w->idx, *batch, *obs, *target, *pred, *loss;
  ag_status s;
  if (w->host_indices_inside) {
    int64_t h[2] = {1, 2};
    return ag_get_rows(w->buf, h, 2, &batch);
  }
  if (w->use_rng && (s = ag_randint(w->rng, CAP, B, AG_I32, &idx))) return s;
  if ((s = ag_get_rows_dev(w->buf, idx, &batch))) return s; /* [6, B] */
  if ((s = ag_slice_rows(batch, 0, 4, &obs))) return s;     /* [4, B] view */
  if ((s = ag_slice_rows(batch, 4, 2, &target))) return s;  /* [2, B] view */
  if ((s = ag_mlp_forward(w->net, obs, &pred))) return s;   /* [2, B] */
  if ((s = ag_mse_loss(pred, target, &loss))) return s;
  if ((s = ag_optim_zero_grad(w->opt))) return s;
  if ((s = ag_backward(loss))) return s;
  (void)ctx;
  return ag_optim_step(w->opt);
}

static void world_new(world *w, ag_device_kind kind, int use_rng) {
  memset(w, 0, sizeof *w);
  agt_ok(ag_ctx_create(&w->ctx, kind, 0));
  agt_ok(ag_buffer_create(w->ctx, ROWS, CAP, AG_F32, &w->buf));
  agt_rng g = {404};
  float *d = malloc(ROWS * CAP * sizeof *d);
  for (int j = 0; j < CAP; j++) {
    float x[4];
    for (int k = 0; k < 4; k++) d[j * ROWS + k] = x[k] = agt_uniform(&g, -1, 1);
    d[j * ROWS + 4] = 0.5f * x[0] - x[1] + 0.25f * x[2] * x[3];
    d[j * ROWS + 5] = x[2] * x[2] - 0.3f;
  }
  agt_ok(ag_buffer_write(w->buf, d, AG_F32, ROWS, CAP, 0));
  free(d);
  const int64_t sizes[4] = {4, 32, 32, 2};
  agt_ok(ag_mlp_create(w->ctx, sizes, 4, AG_ACT_RELU, AG_ACT_NONE, 77, &w->net));
  ag_adam_config cfg = ag_adam_defaults();
  cfg.lr = 3e-3f;
  cfg.max_grad_norm = 10.0f;
  agt_ok(ag_adam_create(w->ctx, ag_mlp_params(w->net), ag_mlp_n_params(w->net), &cfg, &w->opt));
  agt_ok(ag_rng_create(w->ctx, 1234, &w->rng));
  agt_ok(ag_tensor_create(w->ctx, B, 1, AG_I32, NULL, &w->idx));
  w->use_rng = use_rng;
}

static void world_free(world *w) {
  ag_optim_free(w->opt);
  ag_mlp_free(w->net);
  ag_rng_free(w->rng);
  ag_ctx_free(w->ctx);
}

static void host_indices(int it, int32_t *idx) {
  agt_rng g = {(uint64_t)(1000 + it)};
  for (int j = 0; j < B; j++) idx[j] = (int32_t)agt_below(&g, CAP);
}

/* Step `it` with the same host indices: eagerly on e, replayed on r (its
 * indices set through the recording's named input "idx"). */
static void step_both(world *e, world *r, ag_capture *cap, int it) {
  int32_t idx[B];
  host_indices(it, idx);
  agt_ok(ag_tensor_write(e->idx, idx, sizeof idx));
  agt_ok(step(e->ctx, e));
  ag_ctx_reset(e->ctx);
  if (!ag_capture_input(cap, "idx")) agt_ok(ag_capture_add_input(cap, "idx", r->idx));
  agt_ok(ag_capture_set_input(cap, "idx", idx, sizeof idx));
  agt_ok(ag_capture_replay(cap));
}

static void read_params(world *w, float *out, int *n_out) {
  int n = 0;
  for (int k = 0; k < ag_mlp_n_params(w->net); k++) {
    ag_tensor *p = ag_mlp_params(w->net)[k];
    agt_ok(ag_tensor_read(p, out + n, (size_t)ag_tensor_numel(p) * sizeof(float)));
    n += (int)ag_tensor_numel(p);
  }
  *n_out = n;
}

static void compare_params(world *a, world *b, double tol) {
  static float pa[8192], pb[8192];
  int na, nb;
  read_params(a, pa, &na);
  read_params(b, pb, &nb);
  assert_int_equal(na, nb);
  if (tol == 0) {
    assert_memory_equal(pa, pb, (size_t)na * sizeof(float));
    return;
  }
  for (int i = 0; i < na; i++)
    if (fabsf(pa[i] - pb[i]) > tol * (1 + fabsf(pb[i])))
      fail_msg("param %d: %.8g vs %.8g", i, (double)pa[i], (double)pb[i]);
}

/* A captured step replayed N times gives the parameters of N eager steps
 * (bitwise on the CPU, within rounding on CUDA), with indices from an input
 * tensor written before each replay, and with indices drawn on the device. */
static void replay_equals_eager_steps(void **state) {
  (void)state;
  for (int use_rng = 0; use_rng < 2; use_rng++) {
    world e, r;
    world_new(&e, agt_kind, use_rng);
    world_new(&r, agt_kind, use_rng);
    ag_capture *cap;
    agt_ok(ag_capture_create(r.ctx, step, &r, &cap));
    for (int it = 0; it < 100; it++) step_both(&e, &r, cap, it);
    compare_params(&e, &r, agt_kind == AG_DEVICE_CPU ? 0.0 : 1e-5);
    int64_t steps;
    agt_ok(ag_optim_steps(r.opt, &steps));
    assert_int_equal(steps, 100);
    ag_capture_info info;
    agt_ok(ag_capture_get_info(cap, &info));
    assert_int_equal(info.records, 1);
    assert_int_equal(info.replays, 100);
    printf("  %s indices: the recorded step has %d nodes and reads %d objects\n",
           use_rng ? "device" : "input", info.nodes, info.reads);
    ag_capture_free(cap);
    world_free(&e);
    world_free(&r);
  }
}

/* Replays allocate nothing and, with indices drawn on the device, move no
 * byte across the bus. */
static void replay_allocates_nothing_and_moves_no_bytes(void **state) {
  (void)state;
  world w;
  world_new(&w, agt_kind, 1);
  ag_capture *cap;
  agt_ok(ag_capture_create(w.ctx, step, &w, &cap));
  agt_ok(ag_capture_replay(cap));
  agt_ok(ag_ctx_sync(w.ctx));
  ag_ctx_stats s0, s1;
  uint64_t up0, down0, up1, down1;
  ag_ctx_get_stats(w.ctx, &s0);
  ag_xfer_total(w.ctx, &up0, &down0);
  for (int i = 0; i < 100; i++) agt_ok(ag_capture_replay(cap));
  ag_ctx_get_stats(w.ctx, &s1);
  ag_xfer_total(w.ctx, &up1, &down1);
  assert_int_equal(s1.allocs, s0.allocs);
  assert_int_equal(s1.syncs, s0.syncs);
  assert_int_equal(up1, up0);
  assert_int_equal(down1, down0);
  assert_int_equal(s1.replays - s0.replays, 100);
  ag_capture_free(cap);
  world_free(&w);
}

/* On Vulkan a recording is a command buffer encoded once: a replay encodes
 * no command on the host, whether the indices come from an input written
 * before it or are drawn on the device, with eager work queued between
 * replays and replays queued behind replays still running. The replayed
 * steps still give the parameters of as many eager steps. */
static void vulkan_replay_encodes_nothing(void **state) {
  (void)state;
  if (agt_kind != AG_DEVICE_VULKAN) {
    printf("  (Vulkan only)\n");
    return;
  }
  for (int use_rng = 0; use_rng < 2; use_rng++) {
    world e, r;
    world_new(&e, agt_kind, use_rng);
    world_new(&r, agt_kind, use_rng);
    ag_capture *cap;
    const uint64_t before = ag__vulkan_encodes(r.ctx->st);
    agt_ok(ag_capture_create(r.ctx, step, &r, &cap));
    ag_capture_info info;
    agt_ok(ag_capture_get_info(cap, &info));
    const uint64_t recorded = ag__vulkan_encodes(r.ctx->st);
    assert_true(info.nodes > 0);
    /* each recorded command encoded at the record (besides the eager work the record queues first) */
    assert_true(recorded - before >= (uint64_t)info.nodes);
    step_both(&e, &r, cap, 0);
    uint64_t replay_encodes = 0;
    for (int it = 1; it < 40; it++) {
      int32_t idx[B];
      host_indices(it, idx);
      agt_ok(ag_tensor_write(e.idx, idx, sizeof idx));
      agt_ok(step(e.ctx, &e));
      ag_ctx_reset(e.ctx);
      agt_ok(ag_capture_set_input(cap, "idx", idx, sizeof idx));
      const uint64_t w = ag__vulkan_encodes(r.ctx->st); /* the write's copy, if queued */
      agt_ok(ag_capture_replay(cap));
      agt_ok(ag_capture_replay(cap)); /* the same indices again, behind the last replay */
      replay_encodes += ag__vulkan_encodes(r.ctx->st) - w;
      agt_ok(ag_tensor_write(e.idx, idx, sizeof idx));
      agt_ok(step(e.ctx, &e));
      ag_ctx_reset(e.ctx);
      if (it % 8 == 0) { /* eager work on the replaying context between replays: a read */
        static float p[8192];
        int n;
        read_params(&r, p, &n);
      }
    }
    assert_int_equal(replay_encodes, 0);
    compare_params(&e, &r, 1e-5);
    int64_t steps;
    agt_ok(ag_optim_steps(r.opt, &steps));
    assert_int_equal(steps, 1 + 2 * 39);
    agt_ok(ag_capture_get_info(cap, &info));
    assert_int_equal(info.records, 1);
    assert_int_equal(info.replays, 1 + 2 * 39);
    printf("  %s indices: %d commands encoded once; %llu encoded by %d replays after the first\n",
           use_rng ? "device" : "input", info.nodes, (unsigned long long)replay_encodes, 2 * 39);
    ag_capture_free(cap);
    world_free(&e);
    world_free(&r);
  }
}

/* S15: freeing a buffer or a parameter that a recording reads invalidates
 * it; the recording lists what it reads. */
static void freeing_what_a_recording_reads_invalidates_it(void **state) {
  (void)state;
  for (int what = 0; what < 2; what++) {
    world w;
    world_new(&w, agt_kind, 1);
    ag_capture *cap;
    agt_ok(ag_capture_create(w.ctx, step, &w, &cap));
    ag_capture_info info;
    agt_ok(ag_capture_get_info(cap, &info));
    int saw_buffer = 0, saw_param = 0;
    for (int i = 0; i < info.reads; i++) {
      ag_buffer *b;
      ag_tensor *t;
      agt_ok(ag_capture_read_at(cap, i, &b, &t));
      saw_buffer |= b == w.buf;
      saw_param |= t == ag_mlp_params(w.net)[0];
    }
    assert_true(saw_buffer && saw_param);
    agt_ok(ag_capture_replay(cap));
    if (what == 0) {
      ag_buffer_free(w.buf);
    } else {
      ag_mlp_free(w.net);
      w.net = NULL;
    }
    agt_err(ag_capture_replay(cap), AG_ERR_INVALIDATED, "has been freed");
    agt_err(ag_capture_set_input(cap, "nope", &what, sizeof what), AG_ERR_INVALID_ARG,
            "no input named 'nope'");
    agt_ok(ag_capture_get_info(cap, &info));
    assert_false(info.valid);
    ag_capture_free(cap);
    if (!w.net) ag_optim_free(w.opt), w.opt = NULL;
    world_free(&w);
  }
}

/* Inside a recording, calls that move host data or wait are refused, the
 * recording is not made, and the context stays usable. */
static void host_transfers_inside_a_recording_are_refused(void **state) {
  (void)state;
  world w;
  world_new(&w, agt_kind, 0);
  w.host_indices_inside = 1;
  ag_capture *cap = (ag_capture *)(uintptr_t)0x77;
  agt_err(ag_capture_create(w.ctx, step, &w, &cap), AG_ERR_STATE,
          "not allowed while a step is being recorded");
  assert_ptr_equal(cap, (ag_capture *)(uintptr_t)0x77);
  w.host_indices_inside = 0;
  int32_t idx[B];
  host_indices(0, idx);
  agt_ok(ag_tensor_write(w.idx, idx, sizeof idx));
  agt_ok(step(w.ctx, &w)); /* eager steps still work */
  agt_ok(ag_capture_create(w.ctx, step, &w, &cap));
  agt_ok(ag_capture_replay(cap));
  ag_capture_free(cap);
  world_free(&w);
}

/* S19: after a device switch and back, the next replay records again on the
 * new allocations; the result equals eager steps on the CPU throughout. */
static void recording_follows_device_switches(void **state) {
  (void)state;
  world r, e;
  world_new(&r, agt_kind, 0);
  world_new(&e, AG_DEVICE_CPU, 0);
  ag_capture *cap;
  agt_ok(ag_capture_create(r.ctx, step, &r, &cap));
  const ag_device_kind phases[3] = {agt_kind, AG_DEVICE_CPU, agt_kind};
  int it = 0;
  for (int ph = 0; ph < 3; ph++) {
    agt_ok(ag_ctx_set_device(r.ctx, phases[ph], 0));
    for (int k = 0; k < 10; k++, it++) step_both(&e, &r, cap, it);
  }
  ag_capture_info info;
  agt_ok(ag_capture_get_info(cap, &info));
  assert_int_equal(info.records, 3);
  compare_params(&e, &r, 1e-4);
  ag_capture_free(cap);
  world_free(&r);
  world_free(&e);
}

/* Philox4x32-10 against the known-answer vectors of its authors. */
static void philox_matches_known_answers(void **state) {
  (void)state;
  struct {
    uint32_t ctr[4], key[2], out[4];
  } kat[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (size_t i = 0; i < sizeof kat / sizeof kat[0]; i++) {
    ag__u32x4 c = {{kat[i].ctr[0], kat[i].ctr[1], kat[i].ctr[2], kat[i].ctr[3]}};
    ag__u32x4 r = ag__philox4x32_10(c, kat[i].key[0], kat[i].key[1]);
    for (int k = 0; k < 4; k++)
      if (r.v[k] != kat[i].out[k])
        fail_msg("vector %zu word %d: %08x, expected %08x", i, k, r.v[k], kat[i].out[k]);
  }
}

/* Device draws equal the host formula, stay below the bound (constant or
 * read on the device), and advance the counter. */
static void randint_stream(void) {
  ag_ctx *ctx = agt_ctx();
  ag_rng *rng;
  agt_ok(ag_rng_create(ctx, 99, &rng));
  ag_tensor *a, *b, *c, *bound;
  int64_t bv = 7;
  agt_ok(ag_tensor_create(ctx, 1, 1, AG_I64, &bv, &bound));
  agt_ok(ag_randint(rng, 1000003, 300, AG_I64, &a)); /* on the CPU: 8 blocks a vector, then 4, then one */
  agt_ok(ag_randint(rng, 50, 300, AG_I32, &b));
  agt_ok(ag_randint_dev(rng, bound, 1000, AG_I32, &c));
  int64_t va[300];
  int32_t vb[300], vc[1000];
  agt_ok(ag_tensor_read(a, va, sizeof va));
  agt_ok(ag_tensor_read(b, vb, sizeof vb));
  agt_ok(ag_tensor_read(c, vc, sizeof vc));
  int seen[7] = {0};
  for (int i = 0; i < 300; i++) {
    assert_int_equal(va[i], (int64_t)ag__scale_u64(ag__philox_u64(99, (uint64_t)i), 1000003));
    assert_int_equal(vb[i], (int32_t)ag__scale_u64(ag__philox_u64(99, 300 + (uint64_t)i), 50));
  }
  for (int i = 0; i < 1000; i++) {
    assert_true(vc[i] >= 0 && vc[i] < 7);
    seen[vc[i]]++;
  }
  /* a draw from an odd place of the stream, across many blocks */
  ag_tensor *d, *e;
  int32_t vd[5], ve[77];
  agt_ok(ag_randint(rng, 1000, 5, AG_I32, &d));
  agt_ok(ag_randint(rng, 1000, 77, AG_I32, &e));
  agt_ok(ag_tensor_read(d, vd, sizeof vd));
  agt_ok(ag_tensor_read(e, ve, sizeof ve));
  for (int i = 0; i < 5; i++)
    assert_int_equal(vd[i], (int32_t)ag__scale_u64(ag__philox_u64(99, 1600 + (uint64_t)i), 1000));
  for (int i = 0; i < 77; i++)
    assert_int_equal(ve[i], (int32_t)ag__scale_u64(ag__philox_u64(99, 1605 + (uint64_t)i), 1000));
  for (int k = 0; k < 7; k++) assert_true(seen[k] > 100); /* about 143 each */
  /* bounds about 2^32 (the CPU's vector draws take bounds below it, the rest
   * go a block at a time) */
  const int64_t edge[4] = {1, ((int64_t)1 << 32) - 1, (int64_t)1 << 32, 5000000000LL};
  uint64_t at = 1682;
  for (int q = 0; q < 4; q++) {
    ag_tensor *f;
    int64_t vf[45];
    agt_ok(ag_randint(rng, edge[q], 45, AG_I64, &f));
    agt_ok(ag_tensor_read(f, vf, sizeof vf));
    for (int i = 0; i < 45; i++)
      assert_int_equal(vf[i],
                       (int64_t)ag__scale_u64(ag__philox_u64(99, at + (uint64_t)i), (uint64_t)edge[q]));
    at += 45;
  }
  agt_ok(ag_rng_set_counter(rng, 0));
  agt_ok(ag_randint(rng, 1000003, 300, AG_I64, &a)); /* on the CPU: 8 blocks a vector, then 4, then one */
  int64_t again[300];
  agt_ok(ag_tensor_read(a, again, sizeof again));
  assert_memory_equal(again, va, sizeof va);
  agt_err(ag_randint(rng, 0, 5, AG_I32, &a), AG_ERR_INVALID_ARG, "bound = 0");
  agt_err(ag_randint(rng, 10, 0, AG_I32, &a), AG_ERR_INVALID_ARG, "n = 0");
  agt_err(ag_randint(rng, (int64_t)1 << 40, 4, AG_I32, &a), AG_ERR_INVALID_ARG, "does not fit i32");
  ag_rng_free(rng);
  ag_ctx_free(ctx);
}

static void randint_draws_the_philox_stream_on_the_device(void **state) {
  (void)state;
  randint_stream();
}

/* The same on the CPU's portable path (where the processor has a vector
 * path, the test above took it). */
static void randint_portable_path_draws_the_same_stream(void **state) {
  (void)state;
  ag__cpu_vector_paths = 0;
  randint_stream();
  ag__cpu_vector_paths = 1;
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(philox_matches_known_answers),
      cmocka_unit_test(randint_draws_the_philox_stream_on_the_device),
      cmocka_unit_test(randint_portable_path_draws_the_same_stream),
      cmocka_unit_test(replay_equals_eager_steps),
      cmocka_unit_test(replay_allocates_nothing_and_moves_no_bytes),
      cmocka_unit_test(vulkan_replay_encodes_nothing),
      cmocka_unit_test(freeing_what_a_recording_reads_invalidates_it),
      cmocka_unit_test(host_transfers_inside_a_recording_are_refused),
  };
  const struct CMUnitTest gpu_only[] = {
      cmocka_unit_test(recording_follows_device_switches),
  };
  int rc = agt_run(argc, argv, "capture", tests, sizeof tests / sizeof tests[0]);
  if (rc == 0 && agt_kind != AG_DEVICE_CPU)
    rc = agt_run(argc, argv, "capture_switch", gpu_only, sizeof gpu_only / sizeof gpu_only[0]);
  return rc;
}
