/*
** emu/cuda_emu.h -- just enough of CUDA C++ to run the ember CUDA kernels
** on a CPU, for tests on machines without a GPU.
**
** Each CUDA thread of a block is a fiber; blocks run one after another.
** A fiber runs until it reaches __syncthreads, a warp shuffle or its end;
** the scheduler then releases a barrier once every thread it concerns has
** arrived. Passes alternate between ascending and descending thread order,
** so a missing __syncthreads shows up as a wrong result rather than
** happening to work. A barrier that cannot complete (divergent
** __syncthreads, a shuffle some lanes never reach) is reported as a
** launch failure, returned by the next cudaGetLastError.
**
** __shared__ becomes `static`: blocks never run concurrently, so one copy
** serves them all. Atomics are plain read-modify-writes (one OS thread).
**
** What this cannot show: speed, occupancy, register pressure, and races
** that depend on real concurrency between blocks.
*/
#ifndef EMC_EMU_CUDA_EMU_H
#define EMC_EMU_CUDA_EMU_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ember_bf16.h"

#include <functional>
#include <tuple>
#include <utility>

#include "cuda_runtime_api.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)

struct uint3 { unsigned x, y, z; };
struct dim3 {
  unsigned x, y, z;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

/* Set by the scheduler before it resumes a fiber. */
extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;

void __syncthreads();
void __syncwarp(unsigned mask = 0xffffffffu);

/* A shuffle moves 8 bytes; the scheduler picks each lane's source. The
** mask is checked as the hardware's rule (PTX shfl.sync / bar.warp.sync):
** the calling lane must be in it, every lane it names must reach the same
** call with the same mask, and a lane may only read a lane of the mask.
** Breaking it is undefined on a GPU (a hang, or garbage from a lane that
** is not there); here it is a launch failure. */
enum { EMU_SHFL_XOR, EMU_SHFL_DOWN, EMU_SHFL_IDX };
uint64_t emu_shuffle(unsigned mask, uint64_t bits, int kind, int arg, int width);

template <class T> T emu_shfl(unsigned mask, T v, int kind, int arg, int width) {
  static_assert(sizeof(T) <= 8, "shuffle of a value wider than 8 bytes");
  uint64_t b = 0;
  memcpy(&b, &v, sizeof v);
  b = emu_shuffle(mask, b, kind, arg, width);
  memcpy(&v, &b, sizeof v);
  return v;
}
template <class T> T __shfl_xor_sync(unsigned mask, T v, int m, int w = 32) {
  return emu_shfl(mask, v, EMU_SHFL_XOR, m, w);
}
template <class T> T __shfl_down_sync(unsigned mask, T v, unsigned d, int w = 32) {
  return emu_shfl(mask, v, EMU_SHFL_DOWN, (int)d, w);
}
template <class T> T __shfl_sync(unsigned mask, T v, int src, int w = 32) {
  return emu_shfl(mask, v, EMU_SHFL_IDX, src, w);
}

/* bfloat16 as the device converts it: ember_bf16.h's rounding (nearest,
** ties to even), except that a NaN becomes the canonical NaN 0x7fff, as
** sm_80+'s cvt.rn.bf16.f32 and cuda_bf16.hpp's fallback do (the CPU keeps
** the sign and payload): equal as values, not as bits. */
struct __nv_bfloat16 { uint16_t x; };
inline float __bfloat162float(__nv_bfloat16 h) { return em_bf16_to_f32(h.x); }
inline __nv_bfloat16 __float2bfloat16(float f) {
  __nv_bfloat16 h;
  h.x = f != f ? (uint16_t)0x7fffu : em_f32_to_bf16(f);
  return h;
}

inline float atomicAdd(float *p, float v) { float o = *p; *p = o + v; return o; }
inline double atomicAdd(double *p, double v) { double o = *p; *p = o + v; return o; }
inline int atomicAdd(int *p, int v) { int o = *p; *p = o + v; return o; }
inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v) {
  unsigned long long o = *p;
  *p = o + v;
  return o;
}
inline __nv_bfloat16 atomicAdd(__nv_bfloat16 *p, __nv_bfloat16 v) {
  __nv_bfloat16 o = *p;
  *p = __float2bfloat16(__bfloat162float(o) + __bfloat162float(v));
  return o;
}
inline unsigned long long atomicCAS(unsigned long long *p, unsigned long long cmp,
                                    unsigned long long v) {
  unsigned long long o = *p;
  if (o == cmp) *p = v;
  return o;
}
inline int atomicCAS(int *p, int cmp, int v) {
  int o = *p;
  if (o == cmp) *p = v;
  return o;
}

/* Runs body once per thread of every block of the grid. */
void emu_run_grid(dim3 grid, dim3 block, const std::function<void()> &body);

template <class... P, class... A>
void emu_launch(void (*kernel)(P...), dim3 grid, dim3 block, A &&...args) {
  std::tuple<typename std::decay<P>::type...> params(std::forward<A>(args)...);
  emu_run_grid(grid, block, [&] { std::apply(kernel, params); });
}

#endif
