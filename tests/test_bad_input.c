/* test_bad_input.c — every bad argument of every call (S1, S5, S8, S9, S11).
 *
 * A table of bad calls. For each: the status, a message naming the problem,
 * and nothing changed: the buffers hold the same values, no memory was
 * allocated or released, no byte crossed the bus, and out-parameters are
 * untouched.
 */
#include <math.h>

#include "agt.h"

typedef struct fixture {
  ag_ctx *ctx, *other;
  ag_buffer *f32;   /* 3 x 10 */
  ag_buffer *u8;    /* 3 x 10 */
  ag_buffer *i32;   /* 3 x 10 */
  ag_buffer *freed; /* freed handle */
  ag_tensor *idx_f32, *idx_other, *idx_ok;
  ag_tensor *idx_2x2, *idx_gaps; /* i64 [2, 2], and a view of its first row */
  ag_replay *table;              /* one f32 field, 4 columns, empty */
  ag_per *per;                   /* on table */
  ag_rng *rng_other;
  ag_tensor *x11, *b23; /* f32 [1, 1] and [2, 3] */
  ag_tensor *out;       /* out-parameter sentinel */
  ag_buffer *bout;
  ag_ctx *cout;
  float data[3 * 4];
  float big[3 * 4];
  float small[2];
  int64_t idx[4];
  int32_t idx32[4];
} fixture;

#define SENTINEL_T ((ag_tensor *)(uintptr_t)0xABCD)
#define SENTINEL_B ((ag_buffer *)(uintptr_t)0xABCD)
#define SENTINEL_C ((ag_ctx *)(uintptr_t)0xABCD)

typedef struct bad_call {
  const char *what;
  ag_status expect;
  const char *part; /* a piece of the message */
  ag_status (*call)(fixture *f);
} bad_call;

/* ---- the calls ---- */
#define F(name) static ag_status name(fixture *f)
F(create_ctx_null) { return ag_buffer_create(NULL, 3, 10, AG_F32, &f->bout); }
F(create_out_null) { return ag_buffer_create(f->ctx, 3, 10, AG_F32, NULL); }
F(create_rows_zero) { return ag_buffer_create(f->ctx, 0, 10, AG_F32, &f->bout); }
F(create_rows_negative) { return ag_buffer_create(f->ctx, -5, 10, AG_F32, &f->bout); }
F(create_cap_zero) { return ag_buffer_create(f->ctx, 3, 0, AG_F32, &f->bout); }
F(create_cap_negative) { return ag_buffer_create(f->ctx, 3, -1, AG_F32, &f->bout); }
F(create_dtype_i64) { return ag_buffer_create(f->ctx, 3, 10, AG_I64, &f->bout); }
F(create_dtype_unknown) { return ag_buffer_create(f->ctx, 3, 10, (ag_dtype)99, &f->bout); }
F(create_overflow) { return ag_buffer_create(f->ctx, INT64_MAX / 2, 4, AG_F32, &f->bout); }
F(create_too_big) { return ag_buffer_create(f->ctx, 1, (int64_t)1 << 50, AG_U8, &f->bout); }
F(write_null_buf) { return ag_buffer_write(NULL, f->data, AG_F32, 3, 1, 0); }
F(write_freed) { return ag_buffer_write(f->freed, f->data, AG_F32, 3, 1, 0); }
F(write_wrong_rows) { return ag_buffer_write(f->f32, f->data, AG_F32, 2, 1, 0); }
F(write_rows_zero) { return ag_buffer_write(f->f32, f->data, AG_F32, 0, 1, 0); }
F(write_k_negative) { return ag_buffer_write(f->f32, f->data, AG_F32, 3, -1, 0); }
F(write_offset_negative) { return ag_buffer_write(f->f32, f->data, AG_F32, 3, 1, -1); }
F(write_offset_at_capacity) { return ag_buffer_write(f->f32, f->data, AG_F32, 3, 1, 10); }
F(write_range_past_end) { return ag_buffer_write(f->f32, f->data, AG_F32, 3, 3, 8); }
F(write_offset_huge) { return ag_buffer_write(f->f32, f->data, AG_F32, 3, 1, INT64_MAX); }
F(write_k_huge) { return ag_buffer_write(f->f32, f->data, AG_F32, 3, INT64_MAX, 1); }
F(write_data_null) { return ag_buffer_write(f->f32, NULL, AG_F32, 3, 2, 0); }
F(write_dtype_mismatch) { return ag_buffer_write(f->f32, f->data, AG_I32, 3, 1, 0); }
F(write_u8_from_f16) { return ag_buffer_write(f->u8, f->data, AG_F16, 3, 1, 0); }
F(write_u8_too_large) {
  f->big[4] = 256.0f;
  return ag_buffer_write(f->u8, f->big, AG_F32, 3, 4, 0);
}
F(write_u8_negative) {
  f->big[5] = -1.0f;
  return ag_buffer_write(f->u8, f->big, AG_F32, 3, 4, 0);
}
F(write_u8_nan) {
  f->big[2] = NAN;
  return ag_buffer_write(f->u8, f->big, AG_F32, 3, 4, 0);
}
F(write_i32_too_large) {
  f->big[7] = 3e9f;
  return ag_buffer_write(f->i32, f->big, AG_F32, 3, 4, 0);
}
F(write_i32_inf) {
  f->big[0] = INFINITY;
  return ag_buffer_write(f->i32, f->big, AG_F32, 3, 4, 0);
}
F(read_null_buf) { return ag_buffer_read(NULL, 0, 1, AG_F32, f->data, sizeof f->data); }
F(read_freed) { return ag_buffer_read(f->freed, 0, 1, AG_F32, f->data, sizeof f->data); }
F(read_out_null) { return ag_buffer_read(f->f32, 0, 1, AG_F32, NULL, 12); }
F(read_out_small) { return ag_buffer_read(f->f32, 0, 1, AG_F32, f->small, sizeof f->small); }
F(read_k_negative) { return ag_buffer_read(f->f32, 0, -2, AG_F32, f->data, sizeof f->data); }
F(read_offset_negative) { return ag_buffer_read(f->f32, -1, 1, AG_F32, f->data, sizeof f->data); }
F(read_range_past_end) { return ag_buffer_read(f->f32, 5, 6, AG_F32, f->data, sizeof f->data); }
F(read_dtype_mismatch) { return ag_buffer_read(f->f32, 0, 1, AG_I32, f->data, sizeof f->data); }
F(rows_null_buf) { return ag_get_rows(NULL, f->idx, 2, &f->out); }
F(rows_freed) { return ag_get_rows(f->freed, f->idx, 2, &f->out); }
F(rows_empty) { return ag_get_rows(f->f32, f->idx, 0, &f->out); }
F(rows_n_negative) { return ag_get_rows(f->f32, f->idx, -3, &f->out); }
F(rows_idx_null) { return ag_get_rows(f->f32, NULL, 2, &f->out); }
F(rows_idx_negative) {
  f->idx[1] = -1;
  return ag_get_rows(f->f32, f->idx, 2, &f->out);
}
F(rows_idx_capacity) {
  f->idx[2] = 10;
  return ag_get_rows(f->f32, f->idx, 4, &f->out);
}
F(rows_idx_huge) {
  f->idx[0] = (int64_t)1 << 40;
  return ag_get_rows(f->f32, f->idx, 1, &f->out);
}
F(rows_i32_idx_capacity) {
  f->idx32[3] = 10;
  return ag_get_rows_i32(f->f32, f->idx32, 4, &f->out);
}
F(rows_i32_idx_negative) {
  f->idx32[0] = INT32_MIN;
  return ag_get_rows_i32(f->f32, f->idx32, 4, &f->out);
}
F(rows_out_null) { return ag_get_rows(f->f32, f->idx, 2, NULL); }
F(rows_dev_idx_null) { return ag_get_rows_dev(f->f32, NULL, &f->out); }
F(rows_dev_idx_f32) { return ag_get_rows_dev(f->f32, f->idx_f32, &f->out); }
F(rows_dev_other_ctx) { return ag_get_rows_dev(f->f32, f->idx_other, &f->out); }
F(rows_dev_freed) { return ag_get_rows_dev(f->freed, f->idx_ok, &f->out); }
F(rows_dev_out_null) { return ag_get_rows_dev(f->f32, f->idx_ok, NULL); }
F(rows_dev_idx_gaps) { return ag_get_rows_dev(f->f32, f->idx_gaps, &f->out); }
F(scale_nan) { return ag_buffer_set_scale(f->u8, NAN); }
F(scale_inf) { return ag_buffer_set_scale(f->u8, -INFINITY); }
F(scale_freed) { return ag_buffer_set_scale(f->freed, 0.5f); }
F(info_null) { return ag_buffer_get_info(f->f32, NULL); }
F(wait_null) { return ag_buffer_wait(NULL); }
F(ctx_out_null) { return ag_ctx_create(NULL, AG_DEVICE_CPU, 0); }
F(ctx_bad_kind) { return ag_ctx_create(&f->cout, (ag_device_kind)7, 0); }
F(ctx_bad_index) { return ag_ctx_create(&f->cout, AG_DEVICE_CUDA, 99); }
F(ctx_switch_bad_kind) { return ag_ctx_set_device(f->ctx, (ag_device_kind)-3, 0); }
F(ctx_switch_bad_index) { return ag_ctx_set_device(f->ctx, AG_DEVICE_CUDA, 99); }
F(tensor_rows_zero) { return ag_tensor_create(f->ctx, 0, 3, AG_F32, NULL, &f->out); }
F(tensor_bad_dtype) { return ag_tensor_create(f->ctx, 2, 3, (ag_dtype)42, NULL, &f->out); }
F(tensor_read_small) { return ag_tensor_read(f->idx_ok, f->small, 1); }
F(tensor_read_null) { return ag_tensor_read(NULL, f->data, sizeof f->data); }
F(tensor_write_size) { return ag_tensor_write(f->idx_ok, f->data, 3); }
F(fault_bad_kind) { return ag_ctx_inject_fault(f->ctx, (ag_fault)9, 0); }
F(per_sample_rng_other) {
  ag_tensor *w = SENTINEL_T;
  ag_status s = ag_per_sample(f->per, f->rng_other, 2, 0.5f, &f->out, &w);
  return w == SENTINEL_T ? s : AG_OK;
}
F(per_update_idx_other) { return ag_per_update(f->per, f->idx_other, f->idx_f32); }
F(per_update_prio_other) { return ag_per_update(f->per, f->idx_ok, f->idx_other); }
F(bias_act_none_b_larger) { return ag_bias_act(f->x11, f->b23, AG_BIAS_NONE, &f->out); }
F(bias_act_relu_b_larger) { return ag_bias_act(f->x11, f->b23, AG_BIAS_RELU, &f->out); }
F(activate_none_null) { return ag_activate(NULL, AG_ACT_NONE, &f->out); }
#undef F

static const bad_call calls[] = {
    {"create: ctx NULL", AG_ERR_INVALID_ARG, "ctx is NULL", create_ctx_null},
    {"create: out NULL", AG_ERR_INVALID_ARG, "out is NULL", create_out_null},
    {"create: rows 0", AG_ERR_INVALID_ARG, "rows = 0 must be a positive", create_rows_zero},
    {"create: rows -5", AG_ERR_INVALID_ARG, "rows = -5", create_rows_negative},
    {"create: capacity 0", AG_ERR_INVALID_ARG, "capacity = 0 must be a positive", create_cap_zero},
    {"create: capacity -1", AG_ERR_INVALID_ARG, "capacity = -1", create_cap_negative},
    {"create: dtype i64", AG_ERR_INVALID_ARG, "dtype i64 (5) cannot store", create_dtype_i64},
    {"create: dtype 99", AG_ERR_INVALID_ARG, "dtype ? (99)", create_dtype_unknown},
    {"create: size overflow", AG_ERR_OUT_OF_MEMORY, "overflow", create_overflow},
    {"create: > 85% of free memory", AG_ERR_OUT_OF_MEMORY, "MB requested", create_too_big},
    {"write: buf NULL", AG_ERR_INVALID_ARG, "buf is NULL", write_null_buf},
    {"write: freed buffer", AG_ERR_FREED, "has been freed", write_freed},
    {"write: 2 rows for 3", AG_ERR_SHAPE, "data has 2 rows, the buffer has 3", write_wrong_rows},
    {"write: 0 rows", AG_ERR_SHAPE, "data has 0 rows", write_rows_zero},
    {"write: k -1", AG_ERR_INVALID_ARG, "k = -1", write_k_negative},
    {"write: offset -1", AG_ERR_OUT_OF_RANGE, "col_offset = -1", write_offset_negative},
    {"write: offset = capacity", AG_ERR_OUT_OF_RANGE, "columns 10..10 are outside the buffer (capacity 10)",
     write_offset_at_capacity},
    {"write: range past the end", AG_ERR_OUT_OF_RANGE, "columns 8..10 are outside the buffer (capacity 10)",
     write_range_past_end},
    {"write: offset INT64_MAX", AG_ERR_OUT_OF_RANGE, "outside the buffer", write_offset_huge},
    {"write: k INT64_MAX", AG_ERR_OUT_OF_RANGE, "outside the buffer", write_k_huge},
    {"write: data NULL", AG_ERR_INVALID_ARG, "data is NULL", write_data_null},
    {"write: i32 data to f32", AG_ERR_SHAPE, "data of dtype i32 cannot be written to a f32 buffer",
     write_dtype_mismatch},
    {"write: f16 data to u8", AG_ERR_SHAPE, "dtype f16", write_u8_from_f16},
    {"write: 256 into u8", AG_ERR_OUT_OF_RANGE, "value 256 at row 1 of data column 1 does not fit u8",
     write_u8_too_large},
    {"write: -1 into u8", AG_ERR_OUT_OF_RANGE, "value -1 at row 2 of data column 1", write_u8_negative},
    {"write: nan into u8", AG_ERR_OUT_OF_RANGE, "value nan at row 2 of data column 0", write_u8_nan},
    {"write: 3e9 into i32", AG_ERR_OUT_OF_RANGE, "does not fit i32", write_i32_too_large},
    {"write: inf into i32", AG_ERR_OUT_OF_RANGE, "value inf", write_i32_inf},
    {"read: buf NULL", AG_ERR_INVALID_ARG, "buf is NULL", read_null_buf},
    {"read: freed buffer", AG_ERR_FREED, "has been freed", read_freed},
    {"read: out NULL", AG_ERR_INVALID_ARG, "out is NULL", read_out_null},
    {"read: out too small", AG_ERR_INVALID_ARG, "out holds 8 bytes, 3 x 1 values of f32 need 12",
     read_out_small},
    {"read: k -2", AG_ERR_INVALID_ARG, "k = -2", read_k_negative},
    {"read: offset -1", AG_ERR_OUT_OF_RANGE, "col_offset = -1", read_offset_negative},
    {"read: range past the end", AG_ERR_OUT_OF_RANGE, "columns 5..10 are outside the buffer (capacity 10)",
     read_range_past_end},
    {"read: as i32", AG_ERR_SHAPE, "cannot be read as i32", read_dtype_mismatch},
    {"get_rows: buf NULL", AG_ERR_INVALID_ARG, "buf is NULL", rows_null_buf},
    {"get_rows: freed", AG_ERR_FREED, "has been freed", rows_freed},
    {"get_rows: empty", AG_ERR_INVALID_ARG, "idx is empty", rows_empty},
    {"get_rows: n -3", AG_ERR_INVALID_ARG, "idx is empty (n = -3)", rows_n_negative},
    {"get_rows: idx NULL", AG_ERR_INVALID_ARG, "idx is NULL", rows_idx_null},
    {"get_rows: idx -1", AG_ERR_OUT_OF_RANGE, "idx[1] = -1 is outside 0..9", rows_idx_negative},
    {"get_rows: idx = capacity", AG_ERR_OUT_OF_RANGE, "idx[2] = 10 is outside 0..9", rows_idx_capacity},
    {"get_rows: idx 2^40", AG_ERR_OUT_OF_RANGE, "idx[0] = 1099511627776 is outside", rows_idx_huge},
    {"get_rows_i32: idx = capacity", AG_ERR_OUT_OF_RANGE, "idx[3] = 10 is outside 0..9",
     rows_i32_idx_capacity},
    {"get_rows_i32: INT32_MIN", AG_ERR_OUT_OF_RANGE, "idx[0] = -2147483648", rows_i32_idx_negative},
    {"get_rows: out NULL", AG_ERR_INVALID_ARG, "out is NULL", rows_out_null},
    {"get_rows_dev: idx NULL", AG_ERR_INVALID_ARG, "idx is NULL", rows_dev_idx_null},
    {"get_rows_dev: f32 idx", AG_ERR_SHAPE, "idx has dtype f32; indices must be i32 or i64",
     rows_dev_idx_f32},
    {"get_rows_dev: other context", AG_ERR_INVALID_ARG, "another context", rows_dev_other_ctx},
    {"get_rows_dev: freed", AG_ERR_FREED, "has been freed", rows_dev_freed},
    {"get_rows_dev: out NULL", AG_ERR_INVALID_ARG, "out is NULL", rows_dev_out_null},
    {"get_rows_dev: idx a row view", AG_ERR_SHAPE, "idx is a view with gaps between its columns",
     rows_dev_idx_gaps},
    {"set_scale: nan", AG_ERR_INVALID_ARG, "scale nan is not finite", scale_nan},
    {"set_scale: -inf", AG_ERR_INVALID_ARG, "scale -inf is not finite", scale_inf},
    {"set_scale: freed", AG_ERR_FREED, "has been freed", scale_freed},
    {"get_info: out NULL", AG_ERR_INVALID_ARG, "must not be NULL", info_null},
    {"wait: buf NULL", AG_ERR_INVALID_ARG, "buf is NULL", wait_null},
    {"ctx_create: out NULL", AG_ERR_INVALID_ARG, "out is NULL", ctx_out_null},
    {"ctx_create: kind 7", AG_ERR_INVALID_ARG, "device kind 7", ctx_bad_kind},
    {"ctx_create: cuda 99", AG_ERR_NO_DEVICE, "CUDA", ctx_bad_index},
    {"set_device: kind -3", AG_ERR_INVALID_ARG, "device kind -3", ctx_switch_bad_kind},
    {"set_device: cuda 99", AG_ERR_NO_DEVICE, "CUDA", ctx_switch_bad_index},
    {"tensor_create: rows 0", AG_ERR_INVALID_ARG, "rows = 0 and cols = 3 must both be positive",
     tensor_rows_zero},
    {"tensor_create: dtype 42", AG_ERR_INVALID_ARG, "dtype 42 is unknown", tensor_bad_dtype},
    {"tensor_read: dst too small", AG_ERR_INVALID_ARG, "dst holds 1 bytes", tensor_read_small},
    {"tensor_read: t NULL", AG_ERR_INVALID_ARG, "t is NULL", tensor_read_null},
    {"tensor_write: wrong size", AG_ERR_SHAPE, "src holds 3 bytes", tensor_write_size},
    {"inject_fault: kind 9", AG_ERR_INVALID_ARG, "fault kind 9", fault_bad_kind},
    {"per_sample: rng of another context", AG_ERR_INVALID_ARG, "rng belongs to another context",
     per_sample_rng_other},
    {"per_update: idx of another context", AG_ERR_INVALID_ARG, "idx belongs to another context",
     per_update_idx_other},
    {"per_update: priorities of another context", AG_ERR_INVALID_ARG, "priorities belongs to another context",
     per_update_prio_other},
    {"bias_act: none, b larger than x", AG_ERR_SHAPE, "b [2, 3] must broadcast to x [1, 1]",
     bias_act_none_b_larger},
    {"bias_act: relu, b larger than x", AG_ERR_SHAPE, "b [2, 3] must broadcast to x [1, 1]",
     bias_act_relu_b_larger},
    {"activate: none, x NULL", AG_ERR_INVALID_ARG, "ag_activate: x is NULL", activate_none_null},
};

static void fill_buffer(ag_buffer *b, float base) {
  float v[30];
  for (int i = 0; i < 30; i++) v[i] = base + (float)i;
  agt_ok(ag_buffer_write(b, v, AG_F32, 3, 10, 0));
}

static void snapshot(fixture *f, float out[3][30]) {
  agt_ok(ag_buffer_read(f->f32, 0, 10, AG_F32, out[0], sizeof out[0]));
  agt_ok(ag_buffer_read(f->u8, 0, 10, AG_F32, out[1], sizeof out[1]));
  agt_ok(ag_buffer_read(f->i32, 0, 10, AG_F32, out[2], sizeof out[2]));
}

/* Each bad call: status, message, and no observable change. */
static void every_bad_input_is_an_error_that_changes_nothing(void **state) {
  (void)state;
  fixture f;
  memset(&f, 0, sizeof f);
  f.ctx = agt_ctx();
  agt_ok(ag_ctx_create(&f.other, AG_DEVICE_CPU, 0));
  agt_ok(ag_buffer_create(f.ctx, 3, 10, AG_F32, &f.f32));
  agt_ok(ag_buffer_create(f.ctx, 3, 10, AG_U8, &f.u8));
  agt_ok(ag_buffer_create(f.ctx, 3, 10, AG_I32, &f.i32));
  agt_ok(ag_buffer_create(f.ctx, 3, 10, AG_F32, &f.freed));
  ag_buffer_free(f.freed);
  fill_buffer(f.f32, 0.5f);
  fill_buffer(f.u8, 100.0f);
  fill_buffer(f.i32, -7.0f);
  const float fidx[2] = {0, 1};
  const int64_t iidx[2] = {0, 1};
  agt_ok(ag_tensor_create(f.ctx, 2, 1, AG_F32, fidx, &f.idx_f32));
  agt_ok(ag_tensor_create(f.other, 2, 1, AG_I64, iidx, &f.idx_other));
  agt_ok(ag_tensor_create(f.ctx, 2, 1, AG_I64, iidx, &f.idx_ok));
  const int64_t iidx4[4] = {0, 9, 1, 9};
  agt_ok(ag_tensor_create(f.ctx, 2, 2, AG_I64, iidx4, &f.idx_2x2));
  agt_ok(ag_slice_rows(f.idx_2x2, 0, 1, &f.idx_gaps)); /* [1, 2]: the values 0 and 1 */
  const ag_field x_field = {"x", 1, AG_F32};
  agt_ok(ag_replay_create(f.ctx, &x_field, 1, 4, AG_F32, 1, &f.table));
  agt_ok(ag_per_create(f.table, 0.5f, &f.per));
  agt_ok(ag_rng_create(f.other, 1, &f.rng_other));
  agt_ok(ag_tensor_create(f.ctx, 1, 1, AG_F32, NULL, &f.x11));
  agt_ok(ag_tensor_create(f.ctx, 2, 3, AG_F32, NULL, &f.b23));
  assert_true(sizeof calls / sizeof calls[0] >= 40);

  float before[3][30], after[3][30];
  snapshot(&f, before);
  for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
    const bad_call *c = &calls[i];
    for (int k = 0; k < 12; k++) f.data[k] = f.big[k] = (float)(k + 1);
    for (int k = 0; k < 4; k++) f.idx32[k] = (int32_t)(f.idx[k] = k);
    f.out = SENTINEL_T;
    f.bout = SENTINEL_B;
    f.cout = SENTINEL_C;
    ag_ctx_stats s0, s1;
    uint64_t up0, down0, up1, down1;
    ag_ctx_get_stats(f.ctx, &s0);
    ag_xfer_total(f.ctx, &up0, &down0);
    ag_clear_error();
    ag_status s = c->call(&f);
    if (s != c->expect)
      fail_msg("[%s] returned %s, expected %s (message: %s)", c->what, ag_status_name(s),
               ag_status_name(c->expect), ag_last_error());
    if (!strstr(ag_last_error(), c->part))
      fail_msg("[%s] message \"%s\" does not contain \"%s\"", c->what, ag_last_error(), c->part);
    ag_ctx_get_stats(f.ctx, &s1);
    ag_xfer_total(f.ctx, &up1, &down1);
    if (s1.allocs != s0.allocs || s1.frees != s0.frees || s1.live_bytes != s0.live_bytes)
      fail_msg("[%s] changed the memory: allocs %llu -> %llu, frees %llu -> %llu", c->what,
               (unsigned long long)s0.allocs, (unsigned long long)s1.allocs, (unsigned long long)s0.frees,
               (unsigned long long)s1.frees);
    if (up1 != up0 || down1 != down0) fail_msg("[%s] moved bytes across the bus", c->what);
    if (f.out != SENTINEL_T || f.bout != SENTINEL_B || f.cout != SENTINEL_C)
      fail_msg("[%s] wrote an out-parameter on error", c->what);
    assert_int_equal(ag_ctx_device(f.ctx), agt_kind);
    snapshot(&f, after);
    if (memcmp(before, after, sizeof before) != 0) fail_msg("[%s] changed a buffer", c->what);
  }
  printf("  %zu bad inputs checked\n", sizeof calls / sizeof calls[0]);
  ag_replay_free(f.table); /* and its prioritized sampler */
  ag_rng_free(f.rng_other);
  ag_ctx_free(f.other);
  ag_ctx_free(f.ctx);
}

/* ---- calls that need more than the fixture ---- */

/* A one-step environment whose second reset fails. */
typedef struct count_env {
  int resets;
} count_env;

static ag_status count_reset(void *state, uint64_t seed, float *obs) {
  count_env *e = state;
  (void)seed;
  if (++e->resets == 2) return AG_ERR_IO;
  obs[0] = 0.0f;
  return AG_OK;
}

static ag_status count_step(void *state, const float *action, float *obs, float *reward, int *terminated) {
  (void)state, (void)action;
  obs[0] = 0.0f;
  *reward = 1.0f;
  *terminated = 0;
  return AG_OK;
}

/* An episode that fails leaves mean and returns as they were, also the
 * returns of the episodes before it. */
static void q_evaluate_writes_nothing_on_error(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  const int64_t sizes[2] = {1, 2};
  ag_mlp *q;
  agt_ok(ag_mlp_create(ctx, sizes, 2, AG_ACT_RELU, AG_ACT_NONE, 1, &q));
  count_env st = {0};
  const ag_env_ops ops = {count_reset, count_step, NULL};
  const ag_env_spec spec = {"count", 1, 2, 0, NULL, NULL, 1, NAN, {0, 0, 0}};
  ag_env *env;
  agt_ok(ag_env_create_custom(&ops, &st, &spec, &env));
  double mean = -7.0, returns[3] = {-7.0, -7.0, -7.0};
  agt_err(ag_q_evaluate(q, env, 3, 0, &mean, returns), AG_ERR_IO,
          "the reset function of environment \"count\"");
  assert_true(mean == -7.0);
  for (int i = 0; i < 3; i++) assert_true(returns[i] == -7.0);
  agt_ok(ag_q_evaluate(q, env, 3, 0, &mean, returns)); /* resets 3, 4, 5 succeed */
  assert_true(mean == 1.0);
  for (int i = 0; i < 3; i++) assert_true(returns[i] == 1.0);
  ag_env_free(env);
  ag_mlp_free(q);
  ag_ctx_free(ctx);
}

/* ag_dqn_store refuses an action or a terminated flag outside its range,
 * and stores nothing. */
static void dqn_store_checks_actions_and_flags(void **state) {
  (void)state;
  ag_ctx *ctx = agt_ctx();
  ag_dqn_config c = agt_dqn_config(8, 2, 4, 0, 1);
  ag_dqn *d;
  agt_ok(ag_dqn_create(ctx, 1, 2, 100, &c, &d));
  const float obs[2] = {0.5f, -0.5f}, rew[2] = {1.0f, 0.0f};
  const int32_t act[2] = {1, 0}, bad_act[2] = {0, 2};
  const int term[2] = {0, 1}, bad_term[2] = {0, 2};
  agt_err(ag_dqn_store(d, obs, bad_act, rew, obs, term, 2), AG_ERR_OUT_OF_RANGE,
          "actions[1] = 2 is outside 0..1");
  agt_err(ag_dqn_store(d, obs, act, rew, obs, bad_term, 2), AG_ERR_OUT_OF_RANGE,
          "terminated[1] = 2 is not 0 or 1");
  assert_int_equal(ag_replay_size(ag_dqn_replay(d)), 0);
  agt_ok(ag_dqn_store(d, obs, act, rew, obs, term, 2));
  assert_int_equal(ag_replay_size(ag_dqn_replay(d)), 2);
  ag_dqn_free(d);
  ag_ctx_free(ctx);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_bad_input_is_an_error_that_changes_nothing),
      cmocka_unit_test(q_evaluate_writes_nothing_on_error),
      cmocka_unit_test(dqn_store_checks_actions_and_flags),
  };
  return agt_run(argc, argv, "bad_input", tests, sizeof tests / sizeof tests[0]);
}
