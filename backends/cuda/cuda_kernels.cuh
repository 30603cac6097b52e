/*
** cuda_kernels.cuh -- what the kernel files (.cu) share: element types and
** their conversions, math overloads for float and double, warp and block
** reductions, dtype dispatch and the launch macro.
**
** The same sources also build with a C++ compiler against emu/cuda_emu.h
** (EMC_EMU), which runs kernels on the CPU with one fiber per CUDA thread;
** so kernels use only what that header provides: static __shared__ arrays,
** __syncthreads, full-warp shuffles, atomicAdd/atomicCAS, and EMC_LAUNCH.
*/
#ifndef EMBER_CUDA_KERNELS_CUH
#define EMBER_CUDA_KERNELS_CUH

#ifdef EMC_EMU
#include "cuda_emu.h"
#else
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#endif

#include <stdint.h>
#include <stdio.h>

#include "cuda_internal.h"
#include "ember_bf16.h" /* host_bf16: fill values converted on the host */

typedef __nv_bfloat16 bf16_t;

#define EMC_FULL_MASK 0xffffffffu

/* Launch on the device's stream. KERNEL is a plain name: bind a template
** instance to a variable first (auto k = kernel<T>;). */
#ifdef EMC_EMU
#define EMC_LAUNCH(kernel, grid, block, stream, ...) \
  ((void)(stream), emu_launch(kernel, dim3(grid), dim3(block), __VA_ARGS__))
#else
#define EMC_LAUNCH(kernel, grid, block, stream, ...) \
  kernel<<<(grid), (block), 0, (stream)>>>(__VA_ARGS__)
#endif

/* The global index of this thread and the grid stride, in 64 bits. */
#define EMC_GRID_LOOP(i, n)                                                     \
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);     \
       i += (int64_t)gridDim.x * blockDim.x)

/* ------------------------------------------------------------------ */
/* Element types                                                       */
/* ------------------------------------------------------------------ */

/* Arithmetic type of each storage type: bfloat16 computes in float. */
template <class T> struct Acc { typedef float type; };
template <> struct Acc<double> { typedef double type; };

__device__ __forceinline__ float to_acc(float x) { return x; }
__device__ __forceinline__ double to_acc(double x) { return x; }
__device__ __forceinline__ float to_acc(bf16_t x) { return __bfloat162float(x); }

template <class T> __device__ __forceinline__ T from_acc(typename Acc<T>::type v);
template <> __device__ __forceinline__ float from_acc<float>(float v) { return v; }
template <> __device__ __forceinline__ double from_acc<double>(double v) { return v; }
/* Round to nearest even, as the CPU backend and PyTorch. */
template <> __device__ __forceinline__ bf16_t from_acc<bf16_t>(float v) { return __float2bfloat16(v); }

/* Casts between any two storage types, as the CPU backend's copy does:
** floats through double, integers and bools through int64, bool is
** "nonzero", float to int64 truncates and saturates (NaN gives 0), and
** anything to bfloat16 rounds through float. */
template <class D> __device__ __forceinline__ D cast_from_double(double x);
template <> __device__ __forceinline__ float cast_from_double<float>(double x) { return (float)x; }
template <> __device__ __forceinline__ double cast_from_double<double>(double x) { return x; }
template <> __device__ __forceinline__ bf16_t cast_from_double<bf16_t>(double x) {
  return __float2bfloat16((float)x);
}
template <> __device__ __forceinline__ int64_t cast_from_double<int64_t>(double x) {
  if (x != x) return 0;
  if (x >= 9223372036854775807.0) return INT64_MAX;
  if (x <= -9223372036854775808.0) return INT64_MIN;
  return (int64_t)x;
}
template <> __device__ __forceinline__ uint8_t cast_from_double<uint8_t>(double x) {
  return (uint8_t)(x != 0);
}

template <class D> __device__ __forceinline__ D cast_from_i64(int64_t x);
template <> __device__ __forceinline__ float cast_from_i64<float>(int64_t x) { return (float)x; }
template <> __device__ __forceinline__ double cast_from_i64<double>(int64_t x) { return (double)x; }
template <> __device__ __forceinline__ bf16_t cast_from_i64<bf16_t>(int64_t x) {
  return __float2bfloat16((float)x);
}
template <> __device__ __forceinline__ int64_t cast_from_i64<int64_t>(int64_t x) { return x; }
template <> __device__ __forceinline__ uint8_t cast_from_i64<uint8_t>(int64_t x) {
  return (uint8_t)(x != 0);
}

template <class D> __device__ __forceinline__ D cast_to(float x) { return cast_from_double<D>(x); }
template <class D> __device__ __forceinline__ D cast_to(double x) { return cast_from_double<D>(x); }
template <class D> __device__ __forceinline__ D cast_to(bf16_t x) {
  return cast_from_double<D>((double)__bfloat162float(x));
}
template <class D> __device__ __forceinline__ D cast_to(int64_t x) { return cast_from_i64<D>(x); }
template <class D> __device__ __forceinline__ D cast_to(uint8_t x) {
  return cast_from_i64<D>(x != 0);
}

/* ------------------------------------------------------------------ */
/* Math, overloaded so a kernel is written once for float and double    */
/* ------------------------------------------------------------------ */

#define EMC_MATH1(name, f32, f64)                                            \
  __device__ __forceinline__ float name(float x) { return f32(x); }         \
  __device__ __forceinline__ double name(double x) { return f64(x); }
EMC_MATH1(m_exp, expf, exp)
EMC_MATH1(m_log, logf, log)
EMC_MATH1(m_sqrt, sqrtf, sqrt)
EMC_MATH1(m_tanh, tanhf, tanh)
EMC_MATH1(m_erf, erff, erf)
EMC_MATH1(m_sin, sinf, sin)
EMC_MATH1(m_log1p, log1pf, log1p)
EMC_MATH1(m_expm1, expm1f, expm1)
EMC_MATH1(m_cos, cosf, cos)
EMC_MATH1(m_fabs, fabsf, fabs)
EMC_MATH1(m_floor, floorf, floor)
EMC_MATH1(m_ceil, ceilf, ceil)
EMC_MATH1(m_rint, rintf, rint) /* halves to even */
EMC_MATH1(m_trunc, truncf, trunc)
EMC_MATH1(m_atan, atanf, atan)
EMC_MATH1(m_asin, asinf, asin)
EMC_MATH1(m_acos, acosf, acos)
EMC_MATH1(m_lgamma, lgammaf, lgamma)
EMC_MATH1(m_erfc, erfcf, erfc)
#undef EMC_MATH1
__device__ __forceinline__ float m_pow(float x, float y) { return powf(x, y); }
__device__ __forceinline__ double m_pow(double x, double y) { return pow(x, y); }
__device__ __forceinline__ float m_fmod(float x, float y) { return fmodf(x, y); }
__device__ __forceinline__ double m_fmod(double x, double y) { return fmod(x, y); }

/* ------------------------------------------------------------------ */
/* Reductions inside a warp and a block                                 */
/* ------------------------------------------------------------------ */

template <class A> __device__ __forceinline__ A warp_sum(A v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(EMC_FULL_MASK, v, o);
  return v;
}

/* fmax ignores a NaN operand; callers that must propagate NaN do so
** through the values computed from the max. */
template <class A> __device__ __forceinline__ A warp_max(A v) {
  for (int o = 16; o > 0; o >>= 1) {
    A w = __shfl_xor_sync(EMC_FULL_MASK, v, o);
    v = w > v ? w : v;
  }
  return v;
}

/* Sum over the whole block (blockDim.y == 1); every thread gets it. The
** first barrier keeps a previous call's readers from seeing new values. */
template <class A> __device__ A block_sum(A v) {
  __shared__ A part[32];
  v = warp_sum(v);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) part[warp] = v;
  __syncthreads();
  v = lane < (int)(blockDim.x >> 5) ? part[lane] : (A)0;
  return warp_sum(v);
}

template <class A> __device__ A block_max(A v, A lowest) {
  __shared__ A part[32];
  v = warp_max(v);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) part[warp] = v;
  __syncthreads();
  v = lane < (int)(blockDim.x >> 5) ? part[lane] : lowest;
  return warp_max(v);
}

/* Row kernels (emc_rows_plan): a row is handled by a warp (blockDim.x ==
** 32, several rows per block along y) or by the whole block. */
template <class A> __device__ __forceinline__ A row_sum(A v) {
  return blockDim.x == 32 ? warp_sum(v) : block_sum(v);
}
template <class A> __device__ __forceinline__ A row_max(A v, A lowest) {
  return blockDim.x == 32 ? warp_max(v) : block_max(v, lowest);
}

/* Rows of a row kernel: the same for every thread of a row group, so the
** barriers inside block reductions are reached by the whole block. */
#define EMC_ROW_LOOP(row, rows)                                                  \
  for (int64_t row = (int64_t)blockIdx.x * blockDim.y + threadIdx.y; row < (rows); \
       row += (int64_t)gridDim.x * blockDim.y)

/* ------------------------------------------------------------------ */
/* Dispatch                                                            */
/* ------------------------------------------------------------------ */

/* Runs the body (the last arguments, so template commas are fine) with T
** bound to the storage type of dt; DEFAULT runs for other dtypes. */
#define EMC_CASE(DT, TYPE, T, ...) \
  case DT: {                       \
    typedef TYPE T;                \
    __VA_ARGS__;                   \
  } break;
#define EMC_SWITCH_ALL(dt, T, DEFAULT, ...)        \
  switch (dt) {                                    \
    EMC_CASE(EM_F32, float, T, __VA_ARGS__)        \
    EMC_CASE(EM_F64, double, T, __VA_ARGS__)       \
    EMC_CASE(EM_I64, int64_t, T, __VA_ARGS__)      \
    EMC_CASE(EM_BOOL, uint8_t, T, __VA_ARGS__)     \
    EMC_CASE(EM_BF16, bf16_t, T, __VA_ARGS__)      \
    default: DEFAULT;                              \
  }
#define EMC_SWITCH_FLOAT(dt, T, DEFAULT, ...)      \
  switch (dt) {                                    \
    EMC_CASE(EM_F32, float, T, __VA_ARGS__)        \
    EMC_CASE(EM_F64, double, T, __VA_ARGS__)       \
    EMC_CASE(EM_BF16, bf16_t, T, __VA_ARGS__)      \
    default: DEFAULT;                              \
  }

/* ------------------------------------------------------------------ */
/* Host helpers                                                        */
/* ------------------------------------------------------------------ */

static inline const char *emc_dtype_name(em_dtype dt) { return em_kernel_dtype_name(dt); }

/* EM_ERR_DTYPE "cuda <kernel>: dtype X is not supported (supported: ...)". */
static inline em_status emc_bad_dtype(const char *kernel, em_dtype dt, const char *supported) {
  return em_error(EM_ERR_DTYPE, "cuda %s: dtype %s is not supported (supported: %s)", kernel,
                  emc_dtype_name(dt), supported);
}

/* Grid size as the dim3 a launch takes (plans keep 64-bit counts). */
static inline unsigned emc_grid(int64_t blocks) { return (unsigned)blocks; }

#endif
