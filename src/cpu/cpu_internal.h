/* cpu_internal.h — shared by the CPU backend's files. */
#ifndef AGRL_CPU_INTERNAL_H
#define AGRL_CPU_INTERNAL_H

#include "base/kernels.h"

typedef ag_status (*ag__cpu_kernel_fn)(const void *args);

/* The reference kernels, indexed by ag__kernel_id. */
extern const ag__cpu_kernel_fn ag__cpu_kernels[AG__K_COUNT];

/* 1: kernels that have a vector path (AVX2 draws, AVX-512 prioritized
 * sampling) take it where the processor has the instructions; 0: the
 * portable path everywhere. Both give the same bits; tests run both. */
extern int ag__cpu_vector_paths;
/* Threads a CPU gather may split over (cpu_kernels.c): 0, the pool's; n > 0, at most n. */
extern int ag__cpu_gather_threads;

/* AG__K_QGRAD (cpu_qgrad.c). */
ag_status ag__cpu_qgrad(const void *args);

#endif /* AGRL_CPU_INTERNAL_H */
