/*
** ember_hostdev.h -- EM_HOSTDEV, the qualifier of the header-only element
** rules that C, C++ and CUDA code all compile (ember_philox.h,
** ember_bf16.h): callable from host and device code under nvcc, a plain
** static inline function elsewhere.
*/
#ifndef EMBER_HOSTDEV_H
#define EMBER_HOSTDEV_H

#if defined(__CUDACC__)
#define EM_HOSTDEV __host__ __device__ __forceinline__
#else
#define EM_HOSTDEV static inline
#endif

#endif
