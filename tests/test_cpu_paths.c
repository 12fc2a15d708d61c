/* test_cpu_paths.c — the CPU backend's fast paths against its reference.
 *
 * Every kernel that has a fast path (cpu_fast.c) runs through the backend
 * on the same inputs with the reference forced and with the fast path on
 * each of its ways: the vector code where the processor has it and the
 * portable code (ag__cpu_vector_paths), and for gathers the split over the
 * helper threads, one thread, and at most two (ag__cpu_gather_threads).
 * Shapes of 1, odd sizes, and sizes on each side of the fast paths'
 * thresholds (16 KB gathers, 32-column parts, 16..256-row columns, vectors
 * of 4 and 8 Philox blocks and 8 tree lanes, chunks of 64 blocks, 128
 * samples and 1024 leaves), every dtype each kernel takes, values that
 * round, overflow and are not numbers. The results must be the same bits
 * (maps: a NaN where the reference has one, whatever its payload), except
 * PER_SAMPLE's weights: within 4e-7 of the reference's, relative to the
 * weight, and the same bits on every fast way.
 *
 * The pool is started with 4 threads (AGRL_THREADS) so that gathers are
 * split on machines of fewer cores too.
 */
#include <fenv.h>
#include <math.h>

#include "agt.h"
#include "base/backend.h"
#include "base/kernels.h"
#include "base/per_tree.h"
#include "base/scalar_ops.h"
#include "cpu/cpu_internal.h"

/* ---- the paths ---- */

typedef struct path {
  const char *name;
  int reference, vector, threads;
} path;

/* The reference first: the others are compared with it. */
static const path paths[] = {
    {"reference", 1, 1, 0},
    {"fast", 0, 1, 0},
    {"fast, portable", 0, 0, 0},
    {"fast, one thread", 0, 1, 1},
    {"fast, at most two threads", 0, 1, 2},
    {"fast, portable, at most two threads", 0, 0, 2},
};
enum {
  N_PATHS = sizeof paths / sizeof paths[0],
  N_PLAIN = 3
}; /* N_PLAIN: the ways of a kernel without threads */

static const ag__backend *be;
static void *st;
static int env_forced; /* what the switch said before any test set it */

static int setup(void **state) {
  (void)state;
  char desc[128];
  be = ag__cpu_backend();
  return be->open(0, &st, desc, sizeof desc) == AG_OK ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  be->close(st);
  ag__cpu_force_reference(env_forced);
  ag__cpu_vector_paths = 1;
  ag__cpu_gather_threads = 0;
  return 0;
}

/* Kernel `id` on path p, through the backend (its flush to zero included). */
static void run_path(const path *p, ag__kernel_id id, const void *args, size_t size) {
  ag__cpu_force_reference(p->reference);
  ag__cpu_vector_paths = p->vector;
  ag__cpu_gather_threads = p->threads;
  const ag_status s = be->run(st, id, args, size);
  ag__cpu_force_reference(0);
  ag__cpu_vector_paths = 1;
  ag__cpu_gather_threads = 0;
  if (s != AG_OK)
    fail_msg("%s: kernel %d returned %s: %s", p->name, (int)id, ag_status_name(s), ag_last_error());
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  assert_non_null(p);
  return p;
}

static uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float float_of(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Floats: mostly in [-4, 4], with zeros of both signs, infinities, NaNs
 * (quiet, with a payload, signalling), subnormals (which the backend's
 * kernels take as zero), tiny ones, and values large enough to overflow exp
 * and squares. */
static float any_float(agt_rng *g) {
  switch (agt_below(g, 25)) {
    case 0: return 0.0f;
    case 1: return -0.0f;
    case 2: return INFINITY;
    case 3: return -INFINITY;
    case 4: return float_of(0x7fc00000u | (uint32_t)agt_below(g, 1 << 20)); /* quiet NaN, a payload */
    case 5: return float_of(0x7f800001u);                                   /* signalling NaN */
    case 6:
      return float_of((uint32_t)agt_below(g, 0x800000)) * (agt_below(g, 2) ? 1.0f : -1.0f); /* subnormal */
    case 7: return agt_uniform(g, -1e-30f, 1e-30f);
    case 8: return agt_uniform(g, -200.0f, 200.0f);
    case 9: return agt_uniform(g, -1e38f, 1e38f);
    default: return agt_uniform(g, -4.0f, 4.0f);
  }
}

/* ---- the switch ---- */

/* AGRL_CPU_REFERENCE (read by the first kernel; here, before any test)
 * and ag__cpu_force_reference. */
static void the_switch_follows_the_environment_then_the_call(void **state) {
  (void)state;
  const char *env = getenv("AGRL_CPU_REFERENCE");
  assert_int_equal(env_forced, env && *env && strcmp(env, "0") != 0);
  ag__cpu_force_reference(1);
  assert_int_equal(ag__cpu_reference_forced(), 1);
  ag__cpu_force_reference(0);
  assert_int_equal(ag__cpu_reference_forced(), 0);
  /* every kernel with a fast path goes through a dispatcher */
  for (int k = 0; k < AG__K_COUNT; k++) {
    assert_non_null(ag__cpu_ref_kernels[k]);
    if (ag__cpu_fast_kernels[k])
      assert_true(ag__cpu_kernels[k] != ag__cpu_ref_kernels[k] &&
                  ag__cpu_kernels[k] != ag__cpu_fast_kernels[k]);
    else
      assert_true(ag__cpu_kernels[k] == ag__cpu_ref_kernels[k]);
  }
}

/* ---- GATHER ---- */

static void fill_table(agt_rng *g, void *t, ag_dtype dt, size_t n) {
  for (size_t i = 0; i < n; i++) switch (dt) {
      case AG_F32: ((float *)t)[i] = any_float(g); break;
      case AG_F16:
      case AG_BF16: ((uint16_t *)t)[i] = (uint16_t)agt_next(g); break; /* every pattern */
      case AG_U8: ((uint8_t *)t)[i] = (uint8_t)agt_next(g); break;
      case AG_I32: ((int32_t *)t)[i] = (int32_t)agt_next(g); break;
      case AG_I64: ((int64_t *)t)[i] = (int64_t)agt_next(g) >> agt_below(g, 64); break;
      default: fail_msg("dtype %d", (int)dt);
    }
}

/* One gather on every path, against the reference's bits. */
static void check_gather(agt_rng *g, const void *table, ag_dtype dt, int64_t rows, int64_t cap, int64_t n,
                         ag_dtype idx_dt, float scale) {
  void *idx = xmalloc((size_t)n * 8);
  for (int64_t j = 0; j < n; j++) {
    const int64_t c = agt_below(g, 20) == 0 ? agt_below(g, 7) - 3 + (agt_below(g, 2) ? cap : 0) /* clamped */
                                            : agt_below(g, cap);
    if (idx_dt == AG_I32)
      ((int32_t *)idx)[j] = (int32_t)c;
    else
      ((int64_t *)idx)[j] = c;
  }
  const size_t bytes = (size_t)(rows * n) * sizeof(float);
  float *got[N_PATHS];
  for (int p = 0; p < N_PATHS; p++) {
    got[p] = xmalloc(bytes);
    memset(got[p], 0xa5, bytes); /* every element must be written */
    ag__gather_args a = {table, dt, rows, cap, idx, idx_dt, n, scale, got[p]};
    run_path(&paths[p], AG__K_GATHER, &a, sizeof a);
  }
  for (int p = 1; p < N_PATHS; p++)
    for (int64_t e = 0; e < rows * n; e++)
      if (bits_of(got[p][e]) != bits_of(got[0][e]))
        fail_msg(
            "gather %s rows %lld batch %lld idx %s scale %g, %s: column %lld row %lld is %08x, the "
            "reference %08x",
            ag_dtype_name(dt), (long long)rows, (long long)n, ag_dtype_name(idx_dt), (double)scale,
            paths[p].name, (long long)(e / rows), (long long)(e % rows), bits_of(got[p][e]),
            bits_of(got[0][e]));
  for (int p = 0; p < N_PATHS; p++) free(got[p]);
  free(idx);
}

/* Rows around the 16..256 of the inline copies and the 16 floats of a
 * vector; batches of 1, odd ones, around 2 x 32 columns and around 16 KB. */
static void gathers_are_the_references_bits_on_every_path(void **state) {
  (void)state;
  static const int64_t rows_list[] = {1, 3, 15, 16, 17, 31, 42, 64, 255, 256, 257, 1024};
  static const ag_dtype dts[] = {AG_F32, AG_F16, AG_BF16, AG_U8, AG_I32, AG_I64};
  agt_rng g = {2024};
  int runs = 0;
  for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
    for (size_t r = 0; r < sizeof rows_list / sizeof rows_list[0]; r++) {
      const int64_t rows = rows_list[r], cap = 700;
      const size_t es = ag_dtype_size(dts[d]);
      void *table = xmalloc((size_t)(rows * cap) * es);
      fill_table(&g, table, dts[d], (size_t)(rows * cap));
      const int64_t split = (int64_t)((16384 + rows * es - 1) / (rows * es)); /* columns of 16 KB */
      const int64_t ns[] = {1, 2, 31, 63, 64, 65, 97, split - 1, split, split + 1};
      for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        if (ns[k] < 1) continue;
        check_gather(&g, table, dts[d], rows, cap, ns[k], k % 2 ? AG_I32 : AG_I64, 1.0f);
        check_gather(&g, table, dts[d], rows, cap, ns[k], k % 2 ? AG_I64 : AG_I32, k % 3 ? 0.25f : -3.0f);
        runs += 2;
      }
      free(table);
    }
  print_message("%d gathers, each on %d paths\n", runs, (int)N_PATHS);
}

/* ---- MAP, MAP2 ---- */

/* A matrix of rows x cols with a leading dimension of rows + pad. */
typedef struct hmat {
  float *p;
  ag__mat m;
} hmat;

static hmat hmat_new(agt_rng *g, int64_t rows, int64_t cols, int64_t pad) {
  hmat h;
  const int64_t n = (rows + pad) * cols;
  h.p = xmalloc((size_t)n * sizeof(float));
  for (int64_t i = 0; i < n; i++) h.p[i] = any_float(g);
  h.m = (ag__mat){h.p, rows, cols, rows + pad};
  return h;
}

/* The same bits, or a NaN for a NaN (its payload may follow the operand
 * order the compiler picked for a vector). */
static int same_value(float a, float b) { return bits_of(a) == bits_of(b) || (a != a && b != b); }

/* Operand shapes: the output's, a broadcast row (1 x cols), a broadcast
 * column (rows x 1), one value. */
static void operand_shape(int kind, int64_t rows, int64_t cols, int64_t *r, int64_t *c) {
  *r = kind == 1 || kind == 3 ? 1 : rows;
  *c = kind == 2 || kind == 3 ? 1 : cols;
}

/* out0: the output before the call; x, y: the operands (y may be NULL). */
static void check_out(const char *what, const hmat *got, const hmat *ref, int p, const hmat *out0,
                      const ag__mat *x, const ag__mat *y) {
  const int64_t n = got->m.ld * got->m.cols;
  for (int64_t e = 0; e < n; e++)
    if (!same_value(got->p[e], ref->p[e])) {
      const int64_t c = e / got->m.ld, r = e % got->m.ld;
      const int inside = r < got->m.rows;
      fail_msg(
          "%s, %s: element %lld (column %lld, row %lld) is %08x (%g), the reference %08x (%g); it was %g, "
          "the operands %g, %g",
          what, paths[p].name, (long long)e, (long long)c, (long long)r, bits_of(got->p[e]),
          (double)got->p[e], bits_of(ref->p[e]), (double)ref->p[e], (double)out0->p[e],
          inside ? (double)ag__mat_at(*x, r, c) : 0.0, inside && y ? (double)ag__mat_at(*y, r, c) : 0.0);
    }
}

static const int64_t ew_rows[] = {1, 5, 8, 16, 17, 33, 100};

static void maps_are_the_references_bits(void **state) {
  (void)state;
  agt_rng g = {77};
  int runs = 0;
  for (int op = 0; op < AG__MAP_COUNT; op++)
    for (size_t r = 0; r < sizeof ew_rows / sizeof ew_rows[0]; r++)
      for (int kind = 0; kind < 4; kind++)
        for (int acc = 0; acc < 2; acc++) {
          const int64_t rows = ew_rows[r], cols = 1 + (int64_t)(r % 3), pad = (int64_t)(op + r) % 3;
          int64_t xr, xc;
          operand_shape(kind, rows, cols, &xr, &xc);
          hmat x = hmat_new(&g, xr, xc, pad), out0 = hmat_new(&g, rows, cols, pad), out[N_PLAIN];
          for (int p = 0; p < N_PLAIN; p++) {
            out[p] = out0;
            out[p].p = xmalloc((size_t)(out0.m.ld * cols) * sizeof(float));
            memcpy(out[p].p, out0.p, (size_t)(out0.m.ld * cols) * sizeof(float));
            out[p].m.p = out[p].p;
            ag__map_args a = {(ag__map_op)op, 1.5f, -0.25f, x.m, out[p].m, acc};
            run_path(&paths[p], AG__K_MAP, &a, sizeof a);
          }
          char what[128];
          snprintf(what, sizeof what, "map op %d, out %lld x %lld, x %lld x %lld, accumulate %d", op,
                   (long long)rows, (long long)cols, (long long)xr, (long long)xc, acc);
          for (int p = 1; p < N_PLAIN; p++) check_out(what, &out[p], &out[0], p, &out0, &x.m, NULL);
          for (int p = 0; p < N_PLAIN; p++) free(out[p].p);
          free(out0.p);
          free(x.p);
          runs++;
        }
  print_message("%d maps, each on %d paths\n", runs, (int)N_PLAIN);
}

static void map2s_are_the_references_bits(void **state) {
  (void)state;
  static const int kinds[][2] = {{0, 0}, {0, 1}, {1, 0}, {2, 0}, {0, 2}, {0, 3}, {3, 0}, {1, 2}, {3, 3}};
  agt_rng g = {78};
  int runs = 0;
  for (int op = 0; op < AG__MAP2_COUNT; op++)
    for (size_t r = 0; r < sizeof ew_rows / sizeof ew_rows[0]; r++)
      for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (int acc = 0; acc < 2; acc++) {
          const int64_t rows = ew_rows[r], cols = 1 + (int64_t)((r + k) % 3), pad = (int64_t)(op + k) % 3;
          int64_t ar, ac, br, bc;
          operand_shape(kinds[k][0], rows, cols, &ar, &ac);
          operand_shape(kinds[k][1], rows, cols, &br, &bc);
          hmat x = hmat_new(&g, ar, ac, pad), y = hmat_new(&g, br, bc, (pad + 1) % 3);
          hmat out0 = hmat_new(&g, rows, cols, pad), out[N_PLAIN];
          for (int p = 0; p < N_PLAIN; p++) {
            out[p] = out0;
            out[p].p = xmalloc((size_t)(out0.m.ld * cols) * sizeof(float));
            memcpy(out[p].p, out0.p, (size_t)(out0.m.ld * cols) * sizeof(float));
            out[p].m.p = out[p].p;
            ag__map2_args a = {(ag__map2_op)op, acc ? 0.75f : 1.0f, 1.0f, x.m, y.m, out[p].m, acc, 2.5f};
            run_path(&paths[p], AG__K_MAP2, &a, sizeof a);
          }
          char what[160];
          snprintf(what, sizeof what,
                   "map2 op %d, out %lld x %lld, a %lld x %lld, b %lld x %lld, accumulate %d", op,
                   (long long)rows, (long long)cols, (long long)ar, (long long)ac, (long long)br,
                   (long long)bc, acc);
          for (int p = 1; p < N_PLAIN; p++) check_out(what, &out[p], &out[0], p, &out0, &x.m, &y.m);
          for (int p = 0; p < N_PLAIN; p++) free(out[p].p);
          free(out0.p);
          free(x.p);
          free(y.p);
          runs++;
        }
  print_message("%d map2s, each on %d paths\n", runs, (int)N_PLAIN);
}

/* ---- COPY ---- */

static void copies_are_the_references_bits(void **state) {
  (void)state;
  agt_rng g = {79};
  int runs = 0;
  for (size_t r = 0; r < sizeof ew_rows / sizeof ew_rows[0]; r++)
    for (int strided = 0; strided < 4; strided++) /* bit 0: x padded, bit 1: out padded */
      for (int acc = 0; acc < 2; acc++) {
        const int64_t rows = ew_rows[r], cols = 1 + (int64_t)(r % 4);
        hmat x = hmat_new(&g, rows, cols, strided & 1 ? 3 : 0),
             out0 = hmat_new(&g, rows, cols, strided & 2 ? 1 : 0);
        hmat out[N_PLAIN];
        for (int p = 0; p < N_PLAIN; p++) {
          out[p] = out0;
          out[p].p = xmalloc((size_t)(out0.m.ld * cols) * sizeof(float));
          memcpy(out[p].p, out0.p, (size_t)(out0.m.ld * cols) * sizeof(float));
          out[p].m.p = out[p].p;
          ag__copy_args a = {x.m, out[p].m, acc};
          run_path(&paths[p], AG__K_COPY, &a, sizeof a);
        }
        for (int p = 1; p < N_PLAIN; p++)
          if (memcmp(out[p].p, out[0].p, (size_t)(out0.m.ld * cols) * sizeof(float)) != 0)
            fail_msg("copy %lld x %lld, strides %d, accumulate %d, %s: not the reference's bits",
                     (long long)rows, (long long)cols, strided, acc, paths[p].name);
        for (int p = 0; p < N_PLAIN; p++) free(out[p].p);
        free(out0.p);
        free(x.p);
        runs++;
      }
  print_message("%d copies, each on %d paths\n", runs, (int)N_PLAIN);
}

/* ---- RANDINT ---- */

/* Counts around 4 and 8 blocks (8 and 16 draws) and 64-block chunks (128
 * draws), counters odd and even, the block number crossing 2^32, bounds
 * from below 1 to past 2^32 (the vector paths take 1 .. 2^32 - 1). */
static void draws_are_the_references_integers(void **state) {
  (void)state;
  static const int64_t ns[] = {1,  2,  3,   7,   8,   9,   15,  16,  17,  31,  32,   33,
                               63, 64, 127, 128, 129, 130, 255, 256, 257, 300, 1000, 4099};
  static const uint64_t counters[] = {0, 1, 77, ((uint64_t)1 << 33) - 5, ((uint64_t)1 << 33) - 6};
  static const int64_t bounds[] = {
      -3, 0, 1, 2, 7, 1000, 2147483647, 4294967295ll, 4294967296ll, (1ll << 40) + 3};
  int runs = 0;
  for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++)
    for (size_t c = 0; c < sizeof counters / sizeof counters[0]; c++)
      for (size_t b = 0; b < sizeof bounds / sizeof bounds[0]; b++)
        for (int dt = 0; dt < 2; dt++) {
          const ag_dtype out_dt = dt ? AG_I64 : AG_I32;
          const int64_t n = ns[k], bound = bounds[b];
          int64_t *out[N_PLAIN];
          uint64_t ctr[N_PLAIN];
          for (int p = 0; p < N_PLAIN; p++) {
            out[p] = xmalloc((size_t)n * 8);
            memset(out[p], 0x5a, (size_t)n * 8);
            ctr[p] = counters[c];
            ag__randint_args a = {
                0x1234abcd5678ef01ull + b, &ctr[p], (k + b) % 2 ? &bound : NULL, bound, n, out[p], out_dt};
            run_path(&paths[p], AG__K_RANDINT, &a, sizeof a);
          }
          for (int p = 1; p < N_PLAIN; p++) {
            if (ctr[p] != ctr[0])
              fail_msg("randint n %lld, %s: counter %llu, the reference's %llu", (long long)n, paths[p].name,
                       (unsigned long long)ctr[p], (unsigned long long)ctr[0]);
            if (memcmp(out[p], out[0], (size_t)n * 8) != 0)
              fail_msg("randint n %lld counter %llu bound %lld %s, %s: not the reference's draws",
                       (long long)n, (unsigned long long)counters[c], (long long)bound, ag_dtype_name(out_dt),
                       paths[p].name);
          }
          assert_true(ctr[0] == counters[c] + (uint64_t)n);
          for (int p = 0; p < N_PLAIN; p++) free(out[p]);
          runs++;
        }
  print_message("%d draws, each on %d paths\n", runs, (int)N_PLAIN);
}

/* ---- prioritized replay ---- */

typedef struct tree {
  int depth;
  int64_t size, leaves, cols; /* doubles, leaves, the table's columns */
  double *t;
} tree;

/* Makes every node above the leaves the sum of its children. */
static void tree_sum(tree *tr) {
  for (int d = tr->depth - 2; d >= 0; d--)
    for (int64_t node = 0; node < ag__per_offset(d + 1) - ag__per_offset(d); node++)
      ag__per_recompute(tr->t, d, node);
  ag__per_recompute_root(tr->t, tr->depth);
}

/* A tree over a table smaller than it: leaves of 1e-6 .. 1e6 (kind 0),
 * with zero leaves, empty nodes and subtrees (kind 1); kind 2 has only
 * zero leaves, kind 3 an infinite one (where the fast weights take the
 * reference's formula: a root of 0, one that is not finite). */
static tree tree_new(agt_rng *g, int depth, int kind) {
  tree tr = {depth, ag__per_offset(depth) + 1, ag__per_offset(depth) - ag__per_offset(depth - 1), 0, NULL};
  tr.cols = tr.leaves - tr.leaves / 5 - 3;
  tr.t = calloc((size_t)tr.size, sizeof(double));
  assert_non_null(tr.t);
  double *leaf = tr.t + ag__per_offset(depth - 1);
  for (int64_t i = 0; i < tr.cols; i++) {
    leaf[i] = kind == 2 ? 0.0 : exp(agt_uniform(g, -13.8f, 13.8f));
    if (kind == 1 && (agt_below(g, 5) == 0 || (i / 16) % 7 == 3 || (i / 256) % 5 == 2)) leaf[i] = 0.0;
  }
  if (kind == 3) leaf[agt_below(g, tr.cols)] = INFINITY;
  tree_sum(&tr);
  return tr;
}

static double *tree_copy(const tree *tr) {
  double *c = xmalloc((size_t)tr->size * sizeof(double));
  memcpy(c, tr->t, (size_t)tr->size * sizeof(double));
  return c;
}

/* Batches of 1, odd ones, around 8 lanes, 32 (insertion sort or radix) and
 * 1024 (a chunk), with repeats, indices outside the table, and one batch
 * of those alone; alpha 0, 1 (exact powers) and 0.6; priorities below the
 * clamp, a NaN, an infinity; every other batch under a mask of the
 * columns, whose masked leaves stay as they were. */
static void prioritized_updates_are_the_references_bits(void **state) {
  (void)state;
  static const int64_t ns[] = {1, 7, 8, 9, 31, 32, 33, 100, 1023, 1024, 1025, 3000};
  static const float alphas[] = {0.6f, 0.0f, 1.0f};
  agt_rng g = {80};
  int runs = 0;
  int64_t *idx = xmalloc(3000 * 8);
  float *prio = xmalloc(2 * 3000 * sizeof(float));
  uint8_t *mask = xmalloc((size_t)1 << 16);
  for (int depth = 1; depth <= 4; depth++)
    for (size_t k = 0; k <= sizeof ns / sizeof ns[0]; k++)
      for (size_t al = 0; al < sizeof alphas / sizeof alphas[0]; al++) {
        tree tr = tree_new(&g, depth, 1);
        const int outside = k == sizeof ns / sizeof ns[0]; /* the last batch: every index outside */
        const int64_t n = outside ? 40 : ns[k], stride = 1 + (int64_t)(k % 2);
        const ag_dtype idx_dt = (k + al) % 2 ? AG_I32 : AG_I64;
        const uint8_t *mk = (k + (size_t)depth) % 2 ? mask : NULL;
        for (int64_t c = 0; c < tr.cols; c++)
          mask[c] = (uint8_t)(agt_below(&g, 3) ? 1 + agt_below(&g, 255) : 0);
        int64_t hot[8];
        for (int h = 0; h < 8; h++) hot[h] = agt_below(&g, tr.cols);
        for (int64_t j = 0; j < n; j++) {
          const int64_t sel = agt_below(&g, 16);
          int64_t c = sel < 3 ? hot[agt_below(&g, 8)] : agt_below(&g, tr.cols);
          if (sel == 3 || outside)
            c = agt_below(&g, 2) ? -1 - agt_below(&g, 5) : tr.cols + agt_below(&g, 1000);
          if (idx_dt == AG_I32)
            ((int32_t *)idx)[j] = (int32_t)c;
          else
            idx[j] = c;
          const int64_t q = agt_below(&g, 40);
          prio[j * stride] = q == 0                 ? 1e-20f
                             : q == 1               ? NAN
                             : q == 2 && depth == 2 ? INFINITY
                                                    : agt_uniform(&g, 0.0f, 50.0f);
        }
        double *got[N_PLAIN];
        float stv[N_PLAIN];
        for (int p = 0; p < N_PLAIN; p++) {
          got[p] = tree_copy(&tr);
          stv[p] = 3.0f;
          ag__per_set_args a = {got[p], depth, alphas[al], &stv[p], idx, idx_dt,
                                n,      prio,  stride,     tr.cols, mk};
          run_path(&paths[p], AG__K_PER_SET, &a, sizeof a);
        }
        for (int p = 1; p < N_PLAIN; p++) {
          if (bits_of(stv[p]) != bits_of(stv[0]))
            fail_msg("per_set depth %d batch %lld, %s: state %g, the reference's %g", depth, (long long)n,
                     paths[p].name, (double)stv[p], (double)stv[0]);
          for (int64_t i = 0; i < tr.size; i++)
            if (memcmp(&got[p][i], &got[0][i], sizeof(double)) != 0)
              fail_msg(
                  "per_set depth %d batch %lld alpha %g idx %s stride %lld, %s: node %lld is %.17g, the "
                  "reference's %.17g",
                  depth, (long long)n, (double)alphas[al], ag_dtype_name(idx_dt), (long long)stride,
                  paths[p].name, (long long)i, got[p][i], got[0][i]);
        }
        if (outside) assert_memory_equal(got[0], tr.t, (size_t)tr.size * sizeof(double));
        const int64_t lo = ag__per_offset(depth - 1);
        for (int64_t c = 0; mk && c < tr.cols; c++)
          if (!mk[c] && memcmp(&got[0][lo + c], &tr.t[lo + c], sizeof(double)) != 0)
            fail_msg("per_set depth %d batch %lld: masked leaf %lld is %.17g, was %.17g", depth, (long long)n,
                     (long long)c, got[0][lo + c], tr.t[lo + c]);
        for (int p = 0; p < N_PLAIN; p++) free(got[p]);
        free(tr.t);
        runs++;
      }
  free(idx);
  free(prio);
  free(mask);
  print_message("%d updates, each on %d paths\n", runs, (int)N_PLAIN);
}

/* Batches of 1 to 1000 (around 8 lanes and 128-sample chunks), counters
 * odd, even and past 2^32, beta 0, 0.4 and 1, on the four kinds of tree.
 * The indices and the counter are the reference's; the weights are within
 * 4e-7 of its (the same bits where the tree takes the reference's formula)
 * and the same bits on every fast way. */
static void prioritized_samples_are_the_references_indices(void **state) {
  (void)state;
  static const int64_t Bs[] = {1, 7, 8, 9, 13, 127, 128, 129, 300, 1000};
  static const uint64_t counters[] = {77, 1000, ((uint64_t)1 << 33) + 1};
  static const float betas[] = {0.4f, 0.0f, 1.0f};
  agt_rng g = {81};
  int runs = 0;
  double worst = 0.0;
  for (int depth = 1; depth <= 4; depth++)
    for (int kind = 0; kind < 4; kind++) {
      tree tr = tree_new(&g, depth, kind);
      const int exact = kind >= 2;
      for (size_t b = 0; b < sizeof Bs / sizeof Bs[0]; b++)
        for (size_t be_ = 0; be_ < sizeof betas / sizeof betas[0]; be_++) {
          const int64_t B = Bs[b], size = tr.cols;
          int32_t *idx[N_PLAIN];
          float *w[N_PLAIN];
          uint64_t ctr[N_PLAIN];
          for (int p = 0; p < N_PLAIN; p++) {
            idx[p] = xmalloc((size_t)B * sizeof(int32_t));
            w[p] = xmalloc((size_t)B * sizeof(float));
            ctr[p] = counters[(b + be_) % 3];
            ag__per_sample_args a = {tr.t,   depth, betas[be_], 99 + (uint64_t)b, &ctr[p], &size, B,
                                     idx[p], w[p],  NULL};
            run_path(&paths[p], AG__K_PER_SAMPLE, &a, sizeof a);
          }
          for (int p = 1; p < N_PLAIN; p++) {
            assert_true(ctr[p] == ctr[0]);
            for (int64_t j = 0; j < B; j++) {
              if (idx[p][j] != idx[0][j])
                fail_msg(
                    "per_sample depth %d tree %d batch %lld, %s: sample %lld is leaf %d, the reference's %d",
                    depth, kind, (long long)B, paths[p].name, (long long)j, idx[p][j], idx[0][j]);
              const float r = w[0][j], f = w[p][j];
              const double err = r == f ? 0.0 : fabs((double)f - (double)r) / fabs((double)r);
              if (exact ? bits_of(f) != bits_of(r) : !(err <= 4e-7))
                fail_msg(
                    "per_sample depth %d tree %d batch %lld beta %g, %s: weight %lld is %.9g, the "
                    "reference's %.9g (%.3g apart)",
                    depth, kind, (long long)B, (double)betas[be_], paths[p].name, (long long)j, (double)f,
                    (double)r, err);
              if (err > worst) worst = err;
              if (bits_of(f) != bits_of(w[1][j]))
                fail_msg(
                    "per_sample depth %d tree %d batch %lld, %s: weight %lld is %.9g, the fast path's %.9g",
                    depth, kind, (long long)B, paths[p].name, (long long)j, (double)f, (double)w[1][j]);
            }
          }
          for (int p = 0; p < N_PLAIN; p++) free(idx[p]), free(w[p]);
          runs++;
        }
      free(tr.t);
    }
  print_message("%d samples, each on %d paths; weights at most %.3g apart (relative)\n", runs, (int)N_PLAIN,
                worst);
}

/* ---- FRAME_STACK ---- */

/* One frame table on the host: cap entries of h*w*c random bytes and a
 * first flag each (about one in six), size entries held, position pos. */
typedef struct ftable {
  int64_t h, w, c, cap, envs, size, pos;
  int stack;
  uint8_t *frames;
} ftable;

static ftable ftable_new(agt_rng *g, int64_t h, int64_t w, int64_t c, int stack, int64_t cap, int64_t envs,
                         int64_t size, int64_t pos) {
  ftable t = {h, w, c, cap, envs, size, pos, stack, NULL};
  const int64_t fr = h * w * c + 1;
  t.frames = xmalloc((size_t)(fr * cap));
  for (int64_t i = 0; i < fr * cap; i++) t.frames[i] = (uint8_t)agt_next(g);
  for (int64_t x = 0; x < cap; x++) t.frames[x * fr + fr - 1] = agt_below(g, 6) == 0;
  return t;
}

/* The kernel's arguments over t for B transitions: the columns given (idx
 * of idx_dt) or, idx NULL, drawn from *counter. */
static ag__frame_stack_args frame_args(const ftable *t, int64_t B, const void *idx, ag_dtype idx_dt,
                                       uint64_t *counter, int64_t *cols, void *obs, void *next,
                                       ag_dtype out) {
  ag__frame_stack_args a;
  memset(&a, 0, sizeof a);
  a.frames = t->frames, a.h = t->h, a.w = t->w, a.c = t->c, a.capacity = t->cap, a.n_envs = t->envs;
  a.stack = t->stack, a.size_dev = &t->size, a.pos_dev = &t->pos, a.idx = idx, a.idx_dtype = idx_dt;
  a.seed = 99, a.counter = counter, a.B = B, a.cols = cols, a.obs = obs, a.next_obs = next, a.out_dtype = out;
  return a;
}

/* B stacks of t on every path (drawn, or at given i32 / i64 columns, some
 * outside the table): the columns, the counter and both stacks the
 * reference's bits. */
static void check_frame_stack(agt_rng *g, const ftable *t, int64_t B, ag_dtype idx_dt, ag_dtype out) {
  const int64_t D = t->stack * t->h * t->w * t->c;
  const size_t bytes = (size_t)(D * B) * ag_dtype_size(out);
  void *idx = NULL;
  if (idx_dt != AG_F32) { /* AG_F32: drawn */
    idx = xmalloc((size_t)B * 8);
    for (int64_t j = 0; j < B; j++) {
      const int64_t c =
          agt_below(g, 10) == 0 ? agt_below(g, 7) - 3 + (agt_below(g, 2) ? t->cap : 0) : agt_below(g, t->cap);
      if (idx_dt == AG_I32)
        ((int32_t *)idx)[j] = (int32_t)c;
      else
        ((int64_t *)idx)[j] = c;
    }
  }
  int64_t *cols[N_PATHS];
  uint8_t *obs[N_PATHS], *next[N_PATHS];
  uint64_t counter[N_PATHS];
  for (int p = 0; p < N_PATHS; p++) {
    cols[p] = xmalloc((size_t)B * 8);
    obs[p] = xmalloc(bytes), next[p] = xmalloc(bytes);
    memset(obs[p], 0xa5, bytes), memset(next[p], 0x5a, bytes); /* every element must be written */
    counter[p] = 1000;
    ag__frame_stack_args a =
        frame_args(t, B, idx, idx_dt, idx ? NULL : &counter[p], cols[p], obs[p], next[p], out);
    run_path(&paths[p], AG__K_FRAME_STACK, &a, sizeof a);
  }
  for (int p = 1; p < N_PATHS; p++) {
    char what[160];
    snprintf(what, sizeof what,
             "frame stack %lldx%lldx%lld stack %d, %lld copies, B %lld, %s columns, %s, %s", (long long)t->h,
             (long long)t->w, (long long)t->c, t->stack, (long long)t->envs, (long long)B,
             idx ? ag_dtype_name(idx_dt) : "drawn", ag_dtype_name(out), paths[p].name);
    if (counter[p] != counter[0])
      fail_msg("%s: the counter is %llu, the reference's %llu", what, (unsigned long long)counter[p],
               (unsigned long long)counter[0]);
    for (int64_t j = 0; j < B; j++)
      if (cols[p][j] != cols[0][j])
        fail_msg("%s: column %lld is %lld, the reference's %lld", what, (long long)j, (long long)cols[p][j],
                 (long long)cols[0][j]);
    for (size_t e = 0; e < bytes; e++)
      if (obs[p][e] != obs[0][e] || next[p][e] != next[0][e])
        fail_msg("%s: byte %zu of obs / next_obs is %02x / %02x, the reference's %02x / %02x", what, e,
                 obs[p][e], next[p][e], obs[0][e], next[0][e]);
  }
  for (int p = 0; p < N_PATHS; p++) free(cols[p]), free(obs[p]), free(next[p]);
  free(idx);
}

/* Frames of 1 and 3 channels, stacks of 1, 4 and 7, 1 and 3 copies, tables
 * filling and full (wrapped at several positions), batches on each side of
 * the split (64 KB of stacks). */
static void frame_stacks_are_the_references_bits_on_every_path(void **state) {
  (void)state;
  agt_rng g = {77};
  static const int64_t shapes[][3] = {{84, 84, 1}, {5, 7, 3}, {1, 1, 1}, {9, 4, 2}};
  static const int stacks[] = {1, 4, 7};
  static const int64_t envs[] = {1, 3};
  static const ag_dtype cols[] = {AG_F32, AG_I32, AG_I64}; /* AG_F32: drawn */
  int runs = 0;
  for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++)
    for (size_t k = 0; k < sizeof stacks / sizeof stacks[0]; k++)
      for (size_t e = 0; e < sizeof envs / sizeof envs[0]; e++)
        for (int fill = 0; fill < 2; fill++) {
          const int64_t cap = 60 + 3 * (int64_t)k, size = fill ? cap * 2 / 3 : cap;
          const int64_t pos = fill ? size : (int64_t)(sh * 17 + k * 5) % cap;
          ftable t =
              ftable_new(&g, shapes[sh][0], shapes[sh][1], shapes[sh][2], stacks[k], cap, envs[e], size, pos);
          const int64_t D = stacks[k] * shapes[sh][0] * shapes[sh][1] * shapes[sh][2];
          const int64_t split = (int64_t)(65536 / (2 * D)) + 1; /* u8 stacks of 64 KB and more */
          const int64_t Bs[] = {1, 2, 5, split - 1, split, 33};
          for (size_t b = 0; b < sizeof Bs / sizeof Bs[0]; b++) {
            if (Bs[b] < 1 || Bs[b] > 400) continue;
            check_frame_stack(&g, &t, Bs[b], cols[(b + sh) % 3], b % 2 ? AG_U8 : AG_F32);
            runs++;
          }
          free(t.frames);
        }
  print_message("%d frame stacks, each on %d paths\n", runs, (int)N_PATHS);
}

/* Each f32 value of a stack is the caller's (float)v / 255.0f of the u8
 * stack's byte v, in the caller's rounding mode (nearest and downward), on
 * every path: the same division, whatever thread makes it. The frames hold
 * every byte value. */
static void frame_stacks_round_as_the_caller(void **state) {
  (void)state;
  agt_rng g = {78};
  ftable t = ftable_new(&g, 84, 84, 1, 4, 40, 2, 40, 11);
  for (int64_t x = 0; x < t.cap; x++)
    for (int64_t p = 0; p < 256; p++) t.frames[x * (84 * 84 + 1) + p] = (uint8_t)p;
  const int64_t B = 32, D = 4 * 84 * 84;
  int64_t *idx = xmalloc((size_t)B * 8), *cols = xmalloc((size_t)B * 8);
  for (int64_t j = 0; j < B; j++) idx[j] = agt_below(&g, t.cap);
  uint8_t *ob = xmalloc((size_t)(D * B)), *nb = xmalloc((size_t)(D * B));
  float *of = xmalloc((size_t)(D * B) * 4), *nf = xmalloc((size_t)(D * B) * 4);
  ag__frame_stack_args a = frame_args(&t, B, idx, AG_I64, NULL, cols, ob, nb, AG_U8);
  run_path(&paths[0], AG__K_FRAME_STACK, &a, sizeof a);
  static const int modes[] = {FE_TONEAREST, FE_DOWNWARD};
  static float want[2][256]; /* the caller's v / 255 in each mode */
  volatile float d = 255.0f; /* read after the mode is set: the divisions are made then */
  int differ = 0;
  for (int m = 0; m < 2; m++) {
    fesetround(modes[m]);
    const float den = d;
    for (int v = 0; v < 256; v++) want[m][v] = (float)v / den;
    fesetround(FE_TONEAREST);
  }
  for (int v = 0; v < 256; v++) differ += bits_of(want[0][v]) != bits_of(want[1][v]);
  /* the modes round some values apart, unless the processor's rounding
   * mode is not honoured where this runs (valgrind's emulation keeps
   * rounding to nearest): then only the nearest mode can be checked */
  const size_t n_modes = differ > 0 ? 2 : 1;
  if (!differ) print_message("the rounding mode is not honoured here: only round-to-nearest checked\n");
  for (size_t m = 0; m < n_modes; m++)
    for (int p = 0; p < N_PATHS; p++) {
      a = frame_args(&t, B, idx, AG_I64, NULL, cols, of, nf, AG_F32);
      for (int rep = 0; rep < 8; rep++) { /* back to back: the helpers, awake, take parts */
        memset(of, 0, (size_t)(D * B) * 4), memset(nf, 0, (size_t)(D * B) * 4);
        fesetround(modes[m]);
        run_path(&paths[p], AG__K_FRAME_STACK, &a, sizeof a);
        fesetround(FE_TONEAREST);
        for (int64_t e = 0; e < D * B; e++)
          if (bits_of(of[e]) != bits_of(want[m][ob[e]]) || bits_of(nf[e]) != bits_of(want[m][nb[e]]))
            fail_msg(
                "%s, rounding mode %zu: element %lld of obs / next_obs is %.9g / %.9g, v / 255 %.9g / %.9g",
                paths[p].name, m, (long long)e, (double)of[e], (double)nf[e], (double)want[m][ob[e]],
                (double)want[m][nb[e]]);
      }
    }
  free(t.frames), free(idx), free(cols), free(ob), free(nb), free(of), free(nf);
}

int main(int argc, char **argv) {
  setenv("AGRL_THREADS", "4", 1); /* read once, when the pool starts */
  env_forced = ag__cpu_reference_forced();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_switch_follows_the_environment_then_the_call),
      cmocka_unit_test(gathers_are_the_references_bits_on_every_path),
      cmocka_unit_test(maps_are_the_references_bits),
      cmocka_unit_test(map2s_are_the_references_bits),
      cmocka_unit_test(copies_are_the_references_bits),
      cmocka_unit_test(draws_are_the_references_integers),
      cmocka_unit_test(prioritized_updates_are_the_references_bits),
      cmocka_unit_test(prioritized_samples_are_the_references_indices),
      cmocka_unit_test(frame_stacks_are_the_references_bits_on_every_path),
      cmocka_unit_test(frame_stacks_round_as_the_caller),
  };
  if (argc > 1 && strcmp(argv[1], "cpu") != 0) {
    fprintf(stderr, "usage: %s cpu [TEST-NAME-PATTERN]\n", argv[0]);
    return 2;
  }
  if (argc > 2) cmocka_set_test_filter(argv[2]);
  return cmocka_run_group_tests_name("cpu_paths.cpu", tests, setup, teardown);
}
