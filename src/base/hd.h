/* hd.h — AG__HD marks small functions compiled for the host and the device. */
#ifndef AGRL_CORE_HD_H
#define AGRL_CORE_HD_H

#ifdef __CUDACC__
#define AG__HD __host__ __device__ __forceinline__
#else
#define AG__HD static inline
#endif

#endif /* AGRL_CORE_HD_H */
