/* test_blas.c — the CPU backend's OpenBLAS: the kernels chosen from the
 * processor's feature flags, a user's OPENBLAS_CORETYPE left as it is, an
 * OpenBLAS loaded before agrl or not at all, and its sgemm against a plain
 * triple loop.
 *
 * The choice is made once per process, so the cases of the environment
 * run in child processes of this program (`test_blas cpu --child`: it
 * opens a CPU context and prints its name, then checks sgemm), each with
 * an environment of its own.
 */
#include <math.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dlfcn.h>

#include "agt.h"
#include "cpu/cpu_blas.h"

extern char **environ;
static const char *self; /* this program, for the children */

enum {
  YMM = AG__ISA_AVX | AG__ISA_OS_YMM,
  AVX2 = YMM | AG__ISA_AVX2 | AG__ISA_FMA,
  AVX512 = AVX2 | AG__ISA_AVX512F | AG__ISA_AVX512CD | AG__ISA_AVX512BW | AG__ISA_AVX512DQ |
           AG__ISA_AVX512VL | AG__ISA_OS_ZMM,
};

static void the_kernels_follow_the_feature_flags(void **state) {
  (void)state;
  static const struct {
    const char *what;
    unsigned isa;
    const char *core; /* NULL: OpenBLAS decides */
  } cases[] = {
      {"no flags (not x86)", 0, NULL},
      {"SSE only, e.g. a virtual machine's oldest model", AG__ISA_OS_YMM, NULL},
      {"AVX without AVX2 (Sandy Bridge)", YMM, NULL},
      {"AVX2 without FMA", YMM | AG__ISA_AVX2, NULL},
      {"FMA without AVX2 (Piledriver)", YMM | AG__ISA_FMA, NULL},
      {"AVX2+FMA, the OS without the YMM state", AVX2 & ~AG__ISA_OS_YMM, NULL},
      {"AVX2+FMA (Haswell, Zen 1-3, or any model behind a hidden name)", AVX2, "Haswell"},
      {"AVX-512 F and CD only (Knights Landing)", AVX2 | AG__ISA_AVX512F | AG__ISA_AVX512CD | AG__ISA_OS_ZMM,
       "Haswell"},
      {"AVX-512 without VL", AVX512 & ~AG__ISA_AVX512VL, "Haswell"},
      {"AVX-512, the OS without the ZMM state", AVX512 & ~AG__ISA_OS_ZMM, "Haswell"},
      {"AVX-512 F/CD/BW/DQ/VL (Skylake-SP and later, Zen 4)", AVX512, "SkylakeX"},
      {"AVX-512 without FMA reported", AVX512 & ~AG__ISA_FMA, NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const ag__blas_choice ch = ag__blas_choose(cases[i].isa, NULL);
    if ((ch.core == NULL) != (cases[i].core == NULL) || (ch.core && strcmp(ch.core, cases[i].core) != 0))
      fail_msg("%s: %s, expected %s", cases[i].what, ch.core ? ch.core : "none",
               cases[i].core ? cases[i].core : "none");
    assert_non_null(ch.why);
    if (ch.core) assert_non_null(strstr(ch.why, strcmp(ch.core, "SkylakeX") == 0 ? "AVX-512" : "AVX2+FMA"));
  }
  assert_string_equal(ag__blas_choose(AVX512 & ~AG__ISA_OS_ZMM, NULL).why, "AVX2+FMA, AVX-512 off in the OS");
  assert_string_equal(ag__blas_choose(AVX2 & ~AG__ISA_OS_YMM, NULL).why, "AVX off in the OS");
  assert_string_equal(ag__blas_choose(YMM, NULL).why, "no AVX2+FMA");
}

static void a_coretype_the_user_set_is_left_as_it_is(void **state) {
  (void)state;
  const unsigned sets[] = {0, AVX2, AVX512};
  for (size_t i = 0; i < 3; i++) {
    const ag__blas_choice ch = ag__blas_choose(sets[i], "Prescott");
    assert_null(ch.core);
    assert_string_equal(ch.why, "set by OPENBLAS_CORETYPE");
  }
  /* an empty value chooses nothing: agrl does */
  assert_string_equal(ag__blas_choose(AVX2, "").core, "Haswell");
}

/* Column-major element (r, c) of op(X) for X with leading dimension ld. */
static float op_at(const float *x, int ld, int trans, int r, int c) {
  return trans ? x[r * ld + c] : x[c * ld + r];
}

/* sgemm through ag__sgemm against a triple loop in double, over shapes
 * from 1x1x1 to the DQN's and every transposition, with padded leading
 * dimensions: the worst error relative to sum |alpha a b| + |beta c|
 * (INFINITY if the padding of C was written). Float sums of k terms in
 * any order are within k * 2^-24 of that: 1.5e-5 for the k of 256. */
#define SGEMM_TOL 1.6e-5
static double sgemm_worst(void) {
  static const int shapes[][3] = {{1, 1, 1},     {7, 5, 3},     {33, 17, 65},
                                  {2, 128, 256}, {256, 128, 4}, {256, 128, 256}};
  agt_rng rng = {0x9e3779b97f4a7c15ull};
  double worst = 0;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int t = 0; t < 4; t++) {
      const int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2], ta = t & 1, tb = t >> 1;
      const int lda = (ta ? k : m) + 3, ldb = (tb ? n : k) + 1, ldc = m + 2;
      const float alpha = 0.75f, beta = s % 2 ? -1.5f : 0.0f;
      float *a = malloc(sizeof(float) * (size_t)lda * (size_t)(ta ? m : k));
      float *b = malloc(sizeof(float) * (size_t)ldb * (size_t)(tb ? k : n));
      float *c = malloc(sizeof(float) * (size_t)ldc * (size_t)n);
      float *c0 = malloc(sizeof(float) * (size_t)ldc * (size_t)n);
      if (!a || !b || !c || !c0) abort();
      for (int e = 0; e < lda * (ta ? m : k); e++) a[e] = agt_uniform(&rng, -1, 1);
      for (int e = 0; e < ldb * (tb ? k : n); e++) b[e] = agt_uniform(&rng, -1, 1);
      for (int e = 0; e < ldc * n; e++) c0[e] = c[e] = agt_uniform(&rng, -1, 1);
      ag__sgemm(CblasColMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha,
                a, lda, b, ldb, beta, c, ldc);
      for (int j = 0; j < n; j++)
        for (int i = 0; i < ldc; i++) {
          if (i >= m) { /* the padding is not written */
            if (c[j * ldc + i] != c0[j * ldc + i]) worst = INFINITY;
            continue;
          }
          double ref = 0, mag = 0;
          for (int p = 0; p < k; p++) {
            const double v = (double)op_at(a, lda, ta, i, p) * op_at(b, ldb, tb, p, j);
            ref += v, mag += fabs(v);
          }
          ref = alpha * ref + (beta != 0 ? beta * (double)c0[j * ldc + i] : 0);
          mag = fabs(alpha) * mag + fabs(beta * (double)c0[j * ldc + i]) + 1e-30;
          const double err = fabs((double)c[j * ldc + i] - ref) / mag;
          if (err > worst) worst = err;
        }
      free(a), free(b), free(c), free(c0);
    }
  return worst;
}

static void sgemm_matches_a_triple_loop(void **state) {
  (void)state;
  agt_ok(ag__blas_load());
  const double worst = sgemm_worst();
  print_message("%s: worst relative error %.3g\n", ag__blas_desc(), worst);
  assert_true(worst < SGEMM_TOL);
}

/* Whether "K=V" entry e sets one of the variables of list (NULL-terminated "K=..."). */
static int sets_one_of(const char *e, const char *const *list) {
  for (; list && *list; list++) {
    const size_t k = (size_t)(strchr(*list, '=') - *list) + 1;
    if (strncmp(e, *list, k) == 0) return 1;
  }
  return 0;
}

/* Runs `self cpu --child` with this environment less OPENBLAS_CORETYPE,
 * AGRL_OPENBLAS and LD_PRELOAD, with `extra` (NULL-terminated "K=V") in
 * place of what it had of those, and returns what the child printed. */
static const char *child(const char *const *extra) {
  static const char *const ours[] = {"OPENBLAS_CORETYPE=", "AGRL_OPENBLAS=", "LD_PRELOAD=", NULL};
  static char out[2048];
  out[0] = '\0';
  char *envp[512];
  size_t n = 0;
  for (char **e = environ; *e && n < 480; e++)
    if (!sets_one_of(*e, ours) && !sets_one_of(*e, extra)) envp[n++] = *e;
  for (; extra && *extra; extra++) envp[n++] = (char *)*extra;
  envp[n] = NULL;
  int fd[2];
  assert_int_equal(pipe(fd), 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
  posix_spawn_file_actions_adddup2(&fa, fd[1], 2);
  posix_spawn_file_actions_addclose(&fa, fd[0]);
  char *const argv[] = {(char *)self, "cpu", "--child", NULL};
  pid_t pid;
  const int r = posix_spawn(&pid, self, &fa, NULL, argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  close(fd[1]);
  size_t got = 0;
  ssize_t k;
  while (r == 0 && got + 1 < sizeof out && (k = read(fd[0], out + got, sizeof out - 1 - got)) > 0)
    got += (size_t)k;
  out[got] = '\0';
  close(fd[0]);
  int st = 0;
  if (r == 0) waitpid(pid, &st, 0);
  if (r != 0 || !WIFEXITED(st)) fail_msg("%s --child did not run to its end (%d, %d): %s", self, r, st, out);
  return out;
}

static void the_backend_name_says_the_kernels_and_why(void **state) {
  (void)state;
  const char *out = child(NULL);
  /* the choice for the features the child sees (under valgrind this
   * process sees fewer: valgrind hides AVX-512, and the child runs natively) */
  unsigned isa = 0;
  const char *at = strstr(out, "isa: ");
  if (!at || sscanf(at, "isa: %u", &isa) != 1) fail_msg("the child gave no feature flags:\n%s", out);
  const ag__blas_choice ch = ag__blas_choose(isa, NULL);
  char want[128];
  if (ch.core)
    snprintf(want, sizeof want, "name: cpu (OpenBLAS %s, chosen from %s)\nsgemm: ok", ch.core, ch.why);
  else
    snprintf(want, sizeof want, ", its own choice: %s)\nsgemm: ok", ch.why);
  if (!strstr(out, want)) fail_msg("expected \"%s\" in:\n%s", want, out);
}

static void a_coretype_set_in_the_environment_is_what_runs(void **state) {
  (void)state;
  /* the kernels of old, which every x86-64 processor runs (on other
   * processors OpenBLAS takes its own: the name says it) */
  const char *const env[] = {"OPENBLAS_CORETYPE=Prescott", NULL};
  const char *out = child(env);
  if (!strstr(out, "set by OPENBLAS_CORETYPE)\nsgemm: ok")) fail_msg("%s", out);
#if defined(__x86_64__)
  if (!strstr(out, "name: cpu (OpenBLAS Prescott, set by OPENBLAS_CORETYPE)")) fail_msg("%s", out);
#endif
}

static void an_openblas_loaded_before_keeps_its_own_choice(void **state) {
  (void)state;
  void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    print_message("skipped: libopenblas.so.0 is not on the loader's path (%s)\n", dlerror());
    return;
  }
  dlclose(h);
  /* loaded before main; ASan would refuse a library ahead of its own */
  char asan[512];
  const char *prev = getenv("ASAN_OPTIONS");
  snprintf(asan, sizeof asan, "ASAN_OPTIONS=%s%sverify_asan_link_order=0", prev ? prev : "", prev ? ":" : "");
  const char *const env[] = {"LD_PRELOAD=libopenblas.so.0", asan, NULL};
  const char *out = child(env);
  if (!strstr(out, ", its own choice: loaded before agrl)\nsgemm: ok")) fail_msg("%s", out);
}

static void an_openblas_that_cannot_load_is_a_device_error(void **state) {
  (void)state;
  const char *const env[] = {"AGRL_OPENBLAS=/nonexistent/libopenblas.so.0", NULL};
  const char *out = child(env);
  if (!strstr(out,
              "error: AG_ERR_DEVICE: cpu: the OpenBLAS of AGRL_OPENBLAS cannot be loaded: "
              "/nonexistent/libopenblas.so.0"))
    fail_msg("%s", out);
}

/* The child: the processor features it sees, the CPU context's name, then
 * sgemm (or the failure). */
static int child_main(void) {
  printf("isa: %u\n", ag__cpu_isa());
  ag_ctx *ctx = NULL;
  const ag_status s = ag_ctx_create(&ctx, AG_DEVICE_CPU, 0);
  if (s != AG_OK) {
    printf("error: %s: %s\n", ag_status_name(s), ag_last_error());
    return 0;
  }
  printf("name: %s\n", ag_ctx_device_name(ctx));
  const double worst = sgemm_worst();
  if (worst < SGEMM_TOL)
    printf("sgemm: ok\n");
  else
    printf("sgemm: off by %.3g\n", worst);
  ag_ctx_free(ctx);
  return 0;
}

int main(int argc, char **argv) {
  self = argv[0];
  if (argc > 2 && strcmp(argv[2], "--child") == 0) return child_main();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_kernels_follow_the_feature_flags),
      cmocka_unit_test(a_coretype_the_user_set_is_left_as_it_is),
      cmocka_unit_test(sgemm_matches_a_triple_loop),
      cmocka_unit_test(the_backend_name_says_the_kernels_and_why),
      cmocka_unit_test(a_coretype_set_in_the_environment_is_what_runs),
      cmocka_unit_test(an_openblas_loaded_before_keeps_its_own_choice),
      cmocka_unit_test(an_openblas_that_cannot_load_is_a_device_error),
  };
  return agt_run(argc, argv, "blas", tests, sizeof tests / sizeof tests[0]);
}
