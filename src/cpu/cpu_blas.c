/* cpu_blas.c — OpenBLAS, loaded with the kernels this processor can run.
 *
 * OpenBLAS (a DYNAMIC_ARCH build, as Debian's and Ubuntu's are) picks its
 * kernels once, in its library constructor, from the processor's vendor,
 * family and model, or from OPENBLAS_CORETYPE when that is set. A
 * processor whose model it does not know (a virtual machine that hides it,
 * a model newer than the library) gets its oldest x86-64 kernels
 * (Prescott, SSE3), with which the CPU DQN training loop ran 3 times
 * slower. A constructor of a linked library runs before any code of the
 * program, so setting the variable from agrl would come too late: agrl
 * does not link OpenBLAS. It loads it with dlopen at the CPU backend's
 * first use, after setting OPENBLAS_CORETYPE from the processor's feature
 * bits (CPUID, and XCR0 for what the operating system enabled), whatever
 * the model says, and calls cblas_sgemm through a pointer.
 *
 * The choice (ag__blas_choose):
 * - AVX-512 F, CD, BW, DQ and VL, with the ZMM state enabled: SkylakeX.
 *   Its kernels are built for Skylake-SP, which has these five;
 *   Cooperlake and Sapphire Rapids add bf16 kernels only, which agrl does
 *   not call, and older OpenBLAS builds do not know those names.
 * - else AVX2 and FMA, with the YMM state enabled: Haswell, on AMD too.
 *   OpenBLAS's Zen kernels are Haswell's with other block sizes, and on
 *   agrl's shapes Haswell's were the faster on a Zen 3 processor (the
 *   three products of a 256x256 layer's step for a batch of 128: 570 us
 *   against 605; of the 2-action output layer: 21 against 33).
 * - else none: OpenBLAS decides (a guess among older kernels is not worth
 *   making).
 * Only names DYNAMIC_ARCH builds have long known are set: a build told a
 * name it lacks takes Prescott (older ones) or its own choice. A value of
 * OPENBLAS_CORETYPE set by the user is left as it is, whatever it names
 * (one the processor cannot run is the user's to choose: SkylakeX kernels
 * die of SIGILL on a processor without AVX-512).
 *
 * What it deliberately avoids: OpenBLAS's internal entry points
 * (gotoblas_dynamic_init and the gotoblas tables are exported, but they
 * are no API and differ between versions), and keeping the variable set:
 * it is set just before dlopen and put back as it was just after, so child
 * processes and other libraries see the user's environment. setenv is not
 * safe while another thread reads the environment; this happens once,
 * under pthread_once, when the process opens its first CPU context (or
 * runs its first CPU matrix product), usually before it starts threads of
 * its own; agrl's helper threads read no variable after they start.
 *
 * Where the process has loaded this OpenBLAS already (a program linked
 * with -lopenblas, NumPy built against the system's OpenBLAS), dlopen
 * returns that copy, whose kernels are chosen: the backend's name says
 * so. A separate copy (NumPy's wheels bring their own, under another
 * name) is a separate library and changes nothing here.
 */
#include "cpu/cpu_blas.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#ifndef AGRL_OPENBLAS_PATH /* the file the build found (CMakeLists.txt) */
#define AGRL_OPENBLAS_PATH ""
#endif

enum { AVX512 = AG__ISA_AVX512F | AG__ISA_AVX512CD | AG__ISA_AVX512BW | AG__ISA_AVX512DQ | AG__ISA_AVX512VL };

unsigned ag__cpu_isa(void) {
  unsigned isa = 0;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
  if (c & bit_AVX) isa |= AG__ISA_AVX;
  if (c & bit_FMA) isa |= AG__ISA_FMA;
  if (c & bit_OSXSAVE) { /* XGETBV is there: which register states the OS saves */
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    if ((lo & 0x06u) == 0x06u) isa |= AG__ISA_OS_YMM; /* SSE, AVX */
    if ((lo & 0xe6u) == 0xe6u) isa |= AG__ISA_OS_ZMM; /* and opmask, ZMM_Hi256, Hi16_ZMM */
  }
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    if (b & (1u << 5)) isa |= AG__ISA_AVX2;
    if (b & (1u << 16)) isa |= AG__ISA_AVX512F;
    if (b & (1u << 17)) isa |= AG__ISA_AVX512DQ;
    if (b & (1u << 28)) isa |= AG__ISA_AVX512CD;
    if (b & (1u << 30)) isa |= AG__ISA_AVX512BW;
    if (b & (1u << 31)) isa |= AG__ISA_AVX512VL;
  }
#endif
  return isa;
}

ag__blas_choice ag__blas_choose(unsigned isa, const char *user_core) {
  ag__blas_choice ch = {NULL, NULL};
  const unsigned avx2 = AG__ISA_AVX | AG__ISA_AVX2 | AG__ISA_FMA | AG__ISA_OS_YMM;
  if (user_core && *user_core)
    ch.why = "set by OPENBLAS_CORETYPE";
  else if ((isa & (avx2 | AVX512 | AG__ISA_OS_ZMM)) == (avx2 | AVX512 | AG__ISA_OS_ZMM))
    ch.core = "SkylakeX", ch.why = "AVX-512F/CD/BW/DQ/VL";
  else if ((isa & avx2) == avx2)
    ch.core = "Haswell", ch.why = (isa & AVX512) == AVX512 ? "AVX2+FMA, AVX-512 off in the OS" : "AVX2+FMA";
  else if ((isa & (AG__ISA_AVX2 | AG__ISA_FMA)) == (AG__ISA_AVX2 | AG__ISA_FMA))
    ch.why = "AVX off in the OS";
  else
    ch.why = "no AVX2+FMA";
  return ch;
}

typedef void (*sgemm_fn)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint, blasint,
                         blasint, float, const float *, blasint, const float *, blasint, float, float *,
                         blasint);

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static sgemm_fn blas_sgemm;
static ag_status blas_status;
static char blas_msg[512];  /* the failure's message, given again by each later call */
static char blas_desc[100]; /* within the backend's name, "cpu (...)" */

/* dlopen of the first of names[0..n) that loads (with RTLD_NOLOAD in
 * mode: that is loaded already); the dlerror() of each that did not,
 * appended to err. */
static void *open_first(const char *const *names, int n, int mode, const char **which, char *err,
                        size_t len) {
  for (int i = 0; i < n; i++) {
    if (!*names[i]) continue;
    void *h = dlopen(names[i], mode);
    if (h) {
      *which = names[i];
      return h;
    }
    const char *e = dlerror();
    const size_t used = strlen(err);
    snprintf(err + used, len - used, "%s%s", used ? "; " : "", e ? e : names[i]);
  }
  return NULL;
}

static void blas_init(void) {
  const char *own = getenv("AGRL_OPENBLAS");
  const char *const names[] = {own && *own ? own : "libopenblas.so.0", own && *own ? "" : AGRL_OPENBLAS_PATH};
  const char *which = NULL, *user = getenv("OPENBLAS_CORETYPE");
  const int user_set = user != NULL, user_empty = user && !*user;
  char err[400] = "";
  const ag__blas_choice ch = ag__blas_choose(ag__cpu_isa(), user);
  void *h = open_first(names, 2, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD, &which, err, sizeof err);
  const int before = h != NULL; /* loaded already: its constructor has chosen */
  const int set = !before && ch.core;
  if (set) setenv("OPENBLAS_CORETYPE", ch.core, 1);
  if (!h) {
    err[0] = '\0';
    h = open_first(names, 2, RTLD_NOW | RTLD_LOCAL, &which, err, sizeof err);
  }
  char *(*corename)(void) = NULL;
  if (h) {
    blas_sgemm = (sgemm_fn)dlsym(h, "cblas_sgemm");
    corename = (char *(*)(void))dlsym(h, "openblas_get_corename");
    void (*threads)(int) = (void (*)(int))dlsym(h, "openblas_set_num_threads");
    /* RL matrices are small: BLAS threads cost more than they give. The
     * variable OPENBLAS_NUM_THREADS, when set, is left to decide. */
    if (threads && !getenv("OPENBLAS_NUM_THREADS")) threads(1);
  }
  const char *core = corename ? corename() : NULL;
  if (set) { /* the environment as the user had it */
    if (user_empty)
      setenv("OPENBLAS_CORETYPE", "", 1);
    else if (!user_set)
      unsetenv("OPENBLAS_CORETYPE");
  }
  if (!h || !blas_sgemm) {
    blas_sgemm = NULL;
    blas_status = AG_ERR_DEVICE;
    if (!h && own && *own)
      snprintf(blas_msg, sizeof blas_msg, "cpu: the OpenBLAS of AGRL_OPENBLAS cannot be loaded: %s", err);
    else if (!h)
      snprintf(
          blas_msg, sizeof blas_msg,
          "cpu: OpenBLAS cannot be loaded (%s); install libopenblas0 or name the library in AGRL_OPENBLAS",
          err);
    else
      snprintf(blas_msg, sizeof blas_msg, "cpu: %s has no cblas_sgemm", which);
    return;
  }
  if (!core) /* another CBLAS, named by AGRL_OPENBLAS */
    snprintf(blas_desc, sizeof blas_desc, "CBLAS of %s", which);
  else if (before)
    snprintf(blas_desc, sizeof blas_desc, "OpenBLAS %s, its own choice: loaded before agrl", core);
  else if (!ch.core)
    snprintf(blas_desc, sizeof blas_desc, "OpenBLAS %s, %s%s", core,
             user_set && !user_empty ? "" : "its own choice: ", ch.why);
  else if (strcmp(core, ch.core) == 0)
    snprintf(blas_desc, sizeof blas_desc, "OpenBLAS %s, chosen from %s", core, ch.why);
  else /* a build without DYNAMIC_ARCH, or without that core */
    snprintf(blas_desc, sizeof blas_desc, "OpenBLAS %s, not the %s asked from %s", core, ch.core, ch.why);
}

ag_status ag__blas_load(void) {
  pthread_once(&blas_once, blas_init);
  return blas_status ? ag__fail(blas_status, "%s", blas_msg) : AG_OK;
}

const char *ag__blas_desc(void) {
  pthread_once(&blas_once, blas_init);
  return blas_desc;
}

void ag__sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, blasint m, blasint n,
               blasint k, float alpha, const float *a, blasint lda, const float *b, blasint ldb, float beta,
               float *c, blasint ldc) {
  pthread_once(&blas_once, blas_init);
  if (!blas_sgemm) {
    fprintf(stderr, "agrl: %s\n", blas_msg);
    abort();
  }
  blas_sgemm(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
