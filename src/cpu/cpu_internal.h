/* cpu_internal.h — shared by the CPU backend's files.
 *
 * Every kernel has a reference (cpu_kernels.c): portable C, one plain loop
 * nest per kernel, to be read against its contract in base/kernels.h. A
 * few kernels also have a fast path (cpu_fast.c, with the AVX2 / AVX-512
 * code in cpu_fast_x86.c): vector instructions, helper threads, prefetches,
 * chunked and sorted passes. The backend runs the fast path where there is
 * one, unless the reference is forced (AGRL_CPU_REFERENCE=1, or
 * ag__cpu_force_reference); tests/test_cpu_paths.c runs both and compares.
 */
#ifndef AGRL_CPU_INTERNAL_H
#define AGRL_CPU_INTERNAL_H

#include "base/kernels.h"

typedef ag_status (*ag__cpu_kernel_fn)(const void *args);

/* The kernels the backend runs, indexed by ag__kernel_id: the reference,
 * or for a kernel with a fast path its dispatcher (below). */
extern const ag__cpu_kernel_fn ag__cpu_kernels[AG__K_COUNT];
/* The reference of every kernel (cpu_kernels.c). */
extern const ag__cpu_kernel_fn ag__cpu_ref_kernels[AG__K_COUNT];
/* The fast paths (cpu_fast.c), NULL for a kernel that has none. Each gives
 * its reference's bits, except PER_SAMPLE's weights, which are within
 * 4e-7 of the reference's relative to the weight (cpu_fast.c says why),
 * CONV2D's sums, in float and in another order (cpu_conv.c), and ACGRAD's
 * values, within tests/test_kernels.c's tolerances of the reference's
 * (other orders of some sums, FMA; cpu_acgrad_fast.c). */
extern const ag__cpu_kernel_fn ag__cpu_fast_kernels[AG__K_COUNT];

/* The dispatchers of the kernels with a fast path (cpu_fast.c): the fast
 * path, or the reference while it is forced. */
ag_status ag__cpu_run_gather(const void *args);
ag_status ag__cpu_run_map(const void *args);
ag_status ag__cpu_run_map2(const void *args);
ag_status ag__cpu_run_copy(const void *args);
ag_status ag__cpu_run_randint(const void *args);
ag_status ag__cpu_run_per_set(const void *args);
ag_status ag__cpu_run_per_sample(const void *args);
ag_status ag__cpu_run_gather_fields(const void *args);
ag_status ag__cpu_run_scatter_fields(const void *args);
ag_status ag__cpu_run_conv2d(const void *args);
ag_status ag__cpu_run_frame_stack(const void *args);
ag_status ag__cpu_run_acgrad(const void *args);

/* 1: every kernel runs its reference; 0: the fast paths where there are
 * some. Until set, AGRL_CPU_REFERENCE decides (set and not "0": forced),
 * read once, by the first kernel the backend runs. */
void ag__cpu_force_reference(int on);
int ag__cpu_reference_forced(void);

/* Within the fast paths: 1, those that have a vector path (the AVX-512
 * column copies of a gather, AVX2 / AVX-512 draws, AVX-512 prioritized
 * replay) take it where the processor has the instructions; 0: their
 * portable C path everywhere. Both give the same bits; tests run both. */
extern int ag__cpu_vector_paths;
/* Threads a fast-path gather (GATHER, FRAME_STACK) may split over: 0, the
 * pool's; n > 0, at most n. */
extern int ag__cpu_gather_threads;

/* AG__K_QGRAD (cpu_qgrad.c): matrix products by CBLAS and plain loops, the
 * same on both paths. */
ag_status ag__cpu_qgrad(const void *args);
/* The scratch bytes it needs for these arguments (the layout cpu_qgrad.c describes). */
size_t ag__cpu_qgrad_scratch(const void *args);
/* AG__K_ACGRAD (cpu_acgrad.c, the reference) and its scratch bytes, which
 * its fast path (cpu_acgrad_fast.c) lays out the same way. */
ag_status ag__cpu_acgrad(const void *args);
size_t ag__cpu_acgrad_scratch(const void *args);
ag_status ag__cpu_fast_acgrad(const void *args);

/* AG__K_CONV2D's fast path (cpu_conv.c: im2col and CBLAS) and the scratch
 * bytes it needs (the reference needs none). */
ag_status ag__cpu_fast_conv2d(const void *args);
size_t ag__cpu_conv2d_scratch(const void *args);

/* AG__K_FRAME_STACK's first part, on both paths (cpu_kernels.c): the
 * columns a->cols (the given ones clamped, or drawn by base/frames.h from
 * the ring g) and the counter moved on. */
struct ag__frames_ring;
void ag__cpu_frame_columns(const ag__frame_stack_args *a, const struct ag__frames_ring *g);

/* The calling thread's floating-point mode (on x86 the MXCSR: rounding,
 * flush-to-zero and denormals-are-zero; elsewhere the rounding mode), and
 * setting it: what a task run on a helper thread takes from its caller, so
 * that its results are those of the caller's thread. */
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
static inline unsigned ag__cpu_fp_mode(void) { return _mm_getcsr(); }
static inline void ag__cpu_fp_set(unsigned m) { _mm_setcsr(m); }
#else
#include <fenv.h>
static inline unsigned ag__cpu_fp_mode(void) { return (unsigned)fegetround(); }
static inline void ag__cpu_fp_set(unsigned m) { fesetround((int)m); }
#endif

#endif /* AGRL_CPU_INTERNAL_H */
