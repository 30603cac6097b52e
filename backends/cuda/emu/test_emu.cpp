/*
** emu/test_emu.cpp -- the CUDA emulator refuses what a GPU refuses, or
** leaves undefined, rather than running it: launch limits (a grid of 0
** blocks, more than 65535 blocks in y or z, more than 1024 threads, a z
** dim over 64) and the rules of the _sync warp operations (a mask that
** does not name the caller, lanes of the mask that returned, a read from
** a lane outside the mask), while correct partial-warp shuffles pass;
** and it converts to bfloat16 as the device does (NaN -> 0x7fff).
** These are the mistakes that only show on the first run on hardware;
** the kernels of the backend are run by gpu_vs_cpu on this emulator, so
** making it strict makes them visible here.
*/
#include "cuda_emu.h"

#include <stdio.h>

static int failed = 0, passed = 0;

static void expect(bool ok, const char *what) {
  if (ok) {
    passed++;
  } else {
    failed++;
    printf("FAIL: %s\n", what);
  }
}

/* Sum over a warp with the full mask: every lane takes part. */
static void warp_sum_kernel(int *out) {
  int v = (int)threadIdx.x;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}

/* Lanes 16..31 return before a full-mask shuffle: a hang or garbage on a GPU. */
static void exited_lanes_kernel(int *out) {
  if (threadIdx.x >= 16) return;
  int v = __shfl_xor_sync(0xffffffffu, (int)threadIdx.x, 1);
  out[threadIdx.x] = v;
}

/* The low half shuffles among itself with mask 0xffff while the high half
** waits at the block barrier: correct. */
static void half_warp_kernel(int *out) {
  int v = (int)threadIdx.x;
  if (threadIdx.x < 16)
    for (int o = 8; o > 0; o >>= 1) v += __shfl_xor_sync(0x0000ffffu, v, o);
  __syncthreads();
  out[threadIdx.x] = v;
}

/* Every lane calls with mask 0xffff: lanes 16..31 are not in it (all
** read lane 0, which is). */
static void mask_not_self_kernel(int *out) {
  out[threadIdx.x] = __shfl_sync(0x0000ffffu, (int)threadIdx.x, 0);
}

/* The low half reads lane ^ 16, outside its mask. */
static void read_outside_kernel(int *out) {
  if (threadIdx.x < 16) out[threadIdx.x] = __shfl_xor_sync(0x0000ffffu, (int)threadIdx.x, 16);
}

static void noop_kernel(int *out) { (void)out; }

/* Launches and returns the error the launch left (cudaGetLastError). */
template <class K>
static cudaError_t launch(K kernel, dim3 grid, dim3 block, int *out) {
  (void)cudaGetLastError();
  emu_launch(kernel, grid, block, out);
  return cudaGetLastError();
}

int main(void) {
  static int out[4096];

  expect(launch(warp_sum_kernel, dim3(2), dim3(64), out) == cudaSuccess,
         "full-mask warp sum runs");
  expect(out[0] == 496 && out[63] == 32 * 32 + 496, "full-mask warp sum is the sum of the lanes");

  expect(launch(exited_lanes_kernel, dim3(1), dim3(32), out) == cudaErrorLaunchFailure,
         "a full-mask shuffle after lanes returned is a launch failure");
  expect(launch(half_warp_kernel, dim3(1), dim3(64), out) == cudaSuccess,
         "a half-warp shuffle with mask 0xffff while the rest waits at __syncthreads runs");
  expect(out[0] == 120 && out[15] == 120 && out[16] == 16 && out[40] == 40,
         "the half-warp shuffle sums lanes 0..15 only");
  expect(launch(mask_not_self_kernel, dim3(1), dim3(32), out) == cudaErrorLaunchFailure,
         "a shuffle whose mask does not name the calling lane is a launch failure");
  expect(launch(read_outside_kernel, dim3(1), dim3(32), out) == cudaErrorLaunchFailure,
         "a shuffle reading a lane outside its mask is a launch failure");

  expect(launch(noop_kernel, dim3(0), dim3(32), out) == cudaErrorInvalidConfiguration,
         "a grid of 0 blocks (an empty tensor) is an invalid configuration");
  expect(launch(noop_kernel, dim3(1, 65536), dim3(32), out) == cudaErrorInvalidConfiguration,
         "65536 blocks along y is an invalid configuration");
  expect(launch(noop_kernel, dim3(1, 1, 65536), dim3(32), out) == cudaErrorInvalidConfiguration,
         "65536 blocks along z is an invalid configuration");
  expect(launch(noop_kernel, dim3(1), dim3(2048), out) == cudaErrorInvalidConfiguration,
         "2048 threads per block is an invalid configuration");
  expect(launch(noop_kernel, dim3(1), dim3(1, 1, 128), out) == cudaErrorInvalidConfiguration,
         "a block 128 threads deep in z is an invalid configuration");
  expect(launch(noop_kernel, dim3(1, 65535, 1), dim3(32), out) == cudaSuccess,
         "65535 blocks along y is the limit, and runs");

  /* bfloat16 conversion as the device's cvt.rn.bf16.f32: nearest even, NaN -> 0x7fff */
  expect(__float2bfloat16(-NAN).x == 0x7fff && __float2bfloat16(NAN).x == 0x7fff,
         "a NaN converts to the canonical bfloat16 NaN 0x7fff, as on the device");
  expect(__float2bfloat16(1.0f).x == 0x3f80 && __float2bfloat16(1.00390625f).x == 0x3f80 &&
             __float2bfloat16(1.01171875f).x == 0x3f82,
         "float to bfloat16 rounds to nearest, ties to even");

  printf("test_cuda_emu: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
