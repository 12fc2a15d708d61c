/* cpu_internal.h — shared by the CPU backend's files. */
#ifndef AGRL_CPU_INTERNAL_H
#define AGRL_CPU_INTERNAL_H

#include "core/kernels.h"

typedef ag_status (*ag__cpu_kernel_fn)(const void *args);

/* The reference kernels, indexed by ag__kernel_id. */
extern const ag__cpu_kernel_fn ag__cpu_kernels[AG__K_COUNT];

/* AG__K_QGRAD (cpu_qgrad.c). */
ag_status ag__cpu_qgrad(const void *args);

#endif /* AGRL_CPU_INTERNAL_H */
