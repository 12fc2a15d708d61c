// push.glsl — the push constants of every Vulkan kernel: one list of members a
// layout, which the shaders' push-constant blocks (P { AGPC_NAME(AGPC_FIELD) } p) and the
// C side (vk_push.h: a struct ag__vk_pc_name of the same members) both expand, so the
// two cannot differ. Only scalars of 4 and 8 bytes, 8-byte ones first: the C struct and
// the block then place each member at the same offset, with no padding between (its
// offsets are checked against the SPIR-V by tests/test_vulkan_mem.c). Names with no
// double underscore: GLSL reserves those.
#ifndef AGRL_VULKAN_PUSH_GLSL
#define AGRL_VULKAN_PUSH_GLSL

#define AGPC_FIELD(type, name) type name;

#define AGPC_COPY(F) F(uint64_t, x_p) F(uint64_t, out_p) F(int64_t, rows) F(int64_t, cols) \
  F(int64_t, x_ld) F(int64_t, out_ld) F(int, accumulate)
#define AGPC_FILL(F) F(uint64_t, out_p) F(int64_t, rows) F(int64_t, cols) F(int64_t, ld) \
  F(float, value)
#define AGPC_FRAMES_STACK(F) F(uint64_t, frames) F(uint64_t, size_dev) F(uint64_t, pos_dev) \
  F(uint64_t, idx) F(uint64_t, counter) F(uint64_t, cols) F(uint64_t, obs) F(uint64_t, next_obs) \
  F(uint64_t, seed) F(int64_t, capacity) F(int64_t, n_envs) F(int64_t, B) F(int, hw) F(int, c) \
  F(int, stack) F(int, idx_dtype) F(int, out_dtype) F(int, phase)
#define AGPC_GATHER(F) F(uint64_t, src_p) F(uint64_t, idx_p) F(uint64_t, dst_p) F(int64_t, rows) \
  F(int64_t, capacity) F(int64_t, n) F(float, scale) F(int, src_dtype) F(int, idx_dtype) \
  F(int, wide)
#define AGPC_LINALG_CONV2D(F) F(uint64_t, x_p) F(uint64_t, w_p) F(uint64_t, y_p) F(uint64_t, b_p) \
  F(int64_t, x_ld) F(int64_t, w_ld) F(int64_t, y_ld) F(int, C) F(int, H) F(int, W) F(int, K) \
  F(int, kh) F(int, kw) F(int, stride) F(int, pad) F(int, Ho) F(int, Wo) F(int, B) F(int, mode) \
  F(int, accumulate) F(int, has_b)
#define AGPC_LINALG_GEMM(F) F(uint64_t, a) F(uint64_t, b) F(uint64_t, c) F(int64_t, m) \
  F(int64_t, n) F(int64_t, k) F(int64_t, lda) F(int64_t, ldb) F(int64_t, ldc) F(float, alpha) \
  F(float, beta) F(int, trans_a) F(int, trans_b)
#define AGPC_LINALG_LOSS(F) F(uint64_t, pred) F(uint64_t, target) F(uint64_t, out_p) \
  F(uint64_t, dpred) F(int64_t, rows) F(int64_t, cols) F(int64_t, ld) F(int64_t, t_rows) \
  F(int64_t, t_cols) F(int64_t, t_ld) F(int64_t, d_ld) F(int64_t, step_r) F(int64_t, step_c) \
  F(float, delta) F(float, inv) F(int, kind) F(int, pass) F(int, grad)
#define AGPC_LINALG_PICK(F) F(uint64_t, x) F(uint64_t, idx) F(uint64_t, out_p) F(int64_t, x_ld) \
  F(int64_t, out_ld) F(int64_t, n) F(int64_t, limit) F(int64_t, idx_stride) F(int, axis) \
  F(int, idx_dtype) F(int, accumulate)
#define AGPC_LINALG_PICK_BWD(F) F(uint64_t, g) F(uint64_t, idx) F(uint64_t, dx) F(int64_t, g_rows) \
  F(int64_t, g_cols) F(int64_t, g_ld) F(int64_t, rows) F(int64_t, cols) F(int64_t, ld) \
  F(int64_t, idx_stride) F(int, axis) F(int, idx_dtype) F(int, accumulate)
#define AGPC_LINALG_REDUCE(F) F(uint64_t, x) F(uint64_t, out_p) F(uint64_t, arg) F(int64_t, rows) \
  F(int64_t, cols) F(int64_t, ld) F(int64_t, out_ld) F(int64_t, outer) F(int64_t, inner) \
  F(int64_t, step_r) F(int64_t, step_c) F(float, scale) F(int, op) F(int, axis) F(int, lanes) \
  F(int, arg_dtype) F(int, accumulate)
#define AGPC_LINALG_TD(F) F(uint64_t, q) F(uint64_t, idx) F(uint64_t, reward) F(uint64_t, done) \
  F(uint64_t, out_p) F(int64_t, q_rows) F(int64_t, q_ld) F(int64_t, idx_stride) F(int64_t, r_cols) \
  F(int64_t, r_ld) F(int64_t, d_cols) F(int64_t, d_ld) F(int64_t, out_ld) F(int64_t, n) \
  F(float, gamma) F(int, idx_dtype)
#define AGPC_MAP(F) F(uint64_t, x_p) F(uint64_t, out_p) F(int64_t, x_rows) F(int64_t, x_cols) \
  F(int64_t, x_ld) F(int64_t, rows) F(int64_t, cols) F(int64_t, ld) F(float, p0) F(float, p1) \
  F(int, op) F(int, accumulate)
#define AGPC_MAP2(F) F(uint64_t, a_p) F(uint64_t, b_p) F(uint64_t, out_p) F(int64_t, a_rows) \
  F(int64_t, a_cols) F(int64_t, a_ld) F(int64_t, b_rows) F(int64_t, b_cols) F(int64_t, b_ld) \
  F(int64_t, rows) F(int64_t, cols) F(int64_t, ld) F(float, alpha) F(float, p0) F(float, p1) \
  F(int, op) F(int, accumulate)
#define AGPC_OPTIM_ADAM(F) F(uint64_t, args) F(uint64_t, state) F(float, lr) F(float, b1) \
  F(float, b2) F(float, eps) F(float, wd) F(int, sgd) F(int, count)
#define AGPC_OPTIM_AXPBY(F) F(uint64_t, args) F(float, a) F(float, b) F(int, count)
#define AGPC_OPTIM_CONVERT(F) F(uint64_t, src_p) F(uint64_t, dst_p) F(int64_t, src_ld) \
  F(int64_t, dst_ld) F(int64_t, rows) F(int64_t, cols) F(int64_t, words) F(int64_t, items) \
  F(int, src_dtype) F(int, dst_dtype)
#define AGPC_OPTIM_PREP(F) F(uint64_t, state) F(float, b1) F(float, b2) F(float, max_norm)
#define AGPC_OPTIM_SET_I64(F) F(uint64_t, dst) F(int64_t, value)
#define AGPC_OPTIM_SUMSQ(F) F(uint64_t, args) F(uint64_t, state) F(int, count)
#define AGPC_RANDOM_ADVANCE(F) F(uint64_t, counter) F(int64_t, n)
#define AGPC_RANDOM_NSTEP(F) F(uint64_t, table) F(uint64_t, size_dev) F(uint64_t, pos_dev) \
  F(uint64_t, idx) F(uint64_t, ret) F(uint64_t, discount) F(uint64_t, last) F(int64_t, rows) \
  F(int64_t, capacity) F(int64_t, idx_stride) F(int64_t, B) F(int64_t, stride) F(int, rew_row) \
  F(int, term_row) F(int, trunc_row) F(float, scale) F(float, gamma) F(int, n) F(int, dtype) \
  F(int, idx_dtype)
#define AGPC_RANDOM_PER_FILL(F) F(uint64_t, tree) F(uint64_t, state) F(uint64_t, mask) \
  F(int64_t, pos) F(int64_t, k) F(float, alpha) F(int, depth) F(int, s_begin) F(int, s_end)
#define AGPC_RANDOM_PER_SAMPLE(F) F(uint64_t, tree) F(uint64_t, counter) F(uint64_t, size_dev) \
  F(uint64_t, idx) F(uint64_t, w) F(uint64_t, beta_dev) F(uint64_t, seed) F(int64_t, B) \
  F(float, beta) F(int, depth) F(int, phase) F(int, has_beta_dev)
#define AGPC_RANDOM_PER_SET(F) F(uint64_t, tree) F(uint64_t, state) F(uint64_t, idx) \
  F(uint64_t, prio) F(uint64_t, mask) F(int64_t, n) F(int64_t, prio_stride) F(int64_t, limit) \
  F(float, alpha) F(int, depth) F(int, idx_dtype) F(int, s_begin) F(int, s_end)
#define AGPC_RANDOM_RANDINT(F) F(uint64_t, seed) F(uint64_t, counter) F(uint64_t, bound_dev) \
  F(uint64_t, out_p) F(int64_t, bound_const) F(int64_t, n) F(int, out_dtype) F(int, advance)
#define AGPC_RANDOM_RANDN(F) F(uint64_t, seed) F(uint64_t, counter) F(uint64_t, out_p) \
  F(int64_t, n) F(int, advance)
#define AGPC_ZERO(F) F(uint64_t, first_word) F(uint64_t, start) F(uint64_t, end)

#endif // AGRL_VULKAN_PUSH_GLSL
