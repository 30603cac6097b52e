/*
** emu/cuda_emu.cpp -- the CPU emulation of CUDA used to test the ember
** CUDA backend without a GPU (see cuda_emu.h): the fiber scheduler, the
** runtime calls (device memory is host memory, streams run in order at
** once) and a naive cuBLAS gemm.
*/
#include "cuda_emu.h"

#include <stdio.h>
#include <stdlib.h>
#include <ucontext.h>

#include <vector>

#include "cublas_v2.h"

uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

/* ------------------------------------------------------------------ */
/* Fibers                                                              */
/* ------------------------------------------------------------------ */

namespace {

enum State { RUNNABLE, AT_BLOCK_BARRIER, AT_WARP_BARRIER, FINISHED };

struct Fiber {
  ucontext_t ctx;
  char *stack = nullptr;
  State state = FINISHED;
  /* a pending warp barrier: a shuffle (kind >= 0) or __syncwarp (-1) */
  int kind = -1, arg = 0, width = 32;
  unsigned mask = 0xffffffffu; /* the lanes named by the pending _sync call */
  uint64_t value = 0, result = 0;
};

const size_t kStack = 256 * 1024;
std::vector<Fiber> fibers;
ucontext_t scheduler;
int current = -1;
const std::function<void()> *running_body;
cudaError_t sticky_error = cudaSuccess;
bool launch_failed = false;

void fiber_main() {
  (*running_body)();
  fibers[current].state = FINISHED;
  /* returning resumes uc_link, the scheduler */
}

void wait_at(State s) {
  Fiber &f = fibers[current];
  f.state = s;
  swapcontext(&f.ctx, &scheduler);
}

void fail(const char *why) {
  if (!launch_failed)
    fprintf(stderr, "cuda emulator: launch failure in block (%u,%u,%u): %s\n", blockIdx.x,
            blockIdx.y, blockIdx.z, why);
  launch_failed = true;
}

void set_thread_index(int t) {
  threadIdx.x = (unsigned)t % blockDim.x;
  threadIdx.y = ((unsigned)t / blockDim.x) % blockDim.y;
  threadIdx.z = (unsigned)t / (blockDim.x * blockDim.y);
}

/* Completes the warp barriers of warp w whose lanes are all there. A
** barrier is the set of lanes of one mask: it completes when every lane
** the mask names waits at a warp barrier with that mask. The rules of
** shfl.sync / bar.warp.sync are checked (cuda_emu.h). */
bool release_warp(int w, int nthreads) {
  int first = w * 32, last = first + 32 < nthreads ? first + 32 : nthreads;
  int lanes = last - first;
  unsigned present = lanes == 32 ? 0xffffffffu : ((1u << lanes) - 1u);
  bool released = false;
  for (int t = first; t < last; t++) {
    const Fiber &f = fibers[t];
    if (f.state != AT_WARP_BARRIER) continue;
    const unsigned m = f.mask;
    if (!(m & (1u << (t - first)))) {
      fail("a warp shuffle or __syncwarp whose mask does not name the calling lane");
      return false;
    }
    if (m & ~present) {
      fail("a warp shuffle or __syncwarp whose mask names lanes past the end of the block");
      return false;
    }
    bool all = true;
    for (int u = first; u < last; u++) {
      if (!(m & (1u << (u - first)))) continue;
      const Fiber &g = fibers[u];
      if (g.state == FINISHED) {
        fail("a warp shuffle or __syncwarp that some lanes of its mask never reach (they returned)");
        return false;
      }
      if (g.state != AT_WARP_BARRIER) all = false; /* still running, or at a block barrier */
      else if (g.mask != m) {
        fail("lanes of one warp wait at warp barriers with overlapping but different masks");
        return false;
      }
    }
    if (!all) continue;
    for (int u = first; u < last; u++) {
      Fiber &g = fibers[u];
      if (!(m & (1u << (u - first)))) continue;
      int lane = u - first, src = lane;
      int seg = lane / g.width * g.width; /* shuffles act within width-lane segments */
      if (g.kind == EMU_SHFL_XOR) src = seg + ((lane - seg) ^ g.arg);
      else if (g.kind == EMU_SHFL_DOWN) src = (lane - seg) + g.arg < g.width ? lane + g.arg : lane;
      else if (g.kind == EMU_SHFL_IDX) src = seg + (g.arg % g.width);
      if (src < 0 || src >= lanes) src = lane;
      if (g.kind >= 0 && !(m & (1u << src))) {
        fail("a warp shuffle reads a lane that is not in its mask (undefined on a GPU)");
        return false;
      }
      g.result = fibers[first + src].value;
    }
    for (int u = first; u < last; u++)
      if (m & (1u << (u - first))) fibers[u].state = RUNNABLE;
    released = true;
  }
  return released;
}

void run_block(int nthreads) {
  if ((int)fibers.size() < nthreads) fibers.resize(nthreads);
  for (int t = 0; t < nthreads; t++) {
    Fiber &f = fibers[t];
    if (!f.stack) f.stack = (char *)malloc(kStack);
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack;
    f.ctx.uc_stack.ss_size = kStack;
    f.ctx.uc_link = &scheduler;
    makecontext(&f.ctx, fiber_main, 0);
    f.state = RUNNABLE;
  }
  for (unsigned pass = 0;; pass++) {
    for (int k = 0; k < nthreads; k++) {
      int t = pass % 2 ? nthreads - 1 - k : k;
      if (fibers[t].state != RUNNABLE) continue;
      current = t;
      set_thread_index(t);
      swapcontext(&scheduler, &fibers[t].ctx);
    }
    int finished = 0, at_block = 0;
    for (int t = 0; t < nthreads; t++) {
      if (fibers[t].state == FINISHED) finished++;
      else if (fibers[t].state == AT_BLOCK_BARRIER) at_block++;
    }
    if (finished == nthreads) return;
    bool released = false;
    for (int w = 0; w * 32 < nthreads; w++) released |= release_warp(w, nthreads);
    if (launch_failed) return;
    if (!released && at_block > 0 && at_block + finished == nthreads) {
      if (finished) {
        fail("__syncthreads reached by some threads after others of the block returned");
        return;
      }
      for (int t = 0; t < nthreads; t++) fibers[t].state = RUNNABLE;
      released = true;
    }
    if (!released) {
      fail("deadlock: threads wait at different barriers (divergent __syncthreads?)");
      return;
    }
  }
}

} // namespace

void __syncthreads() { wait_at(AT_BLOCK_BARRIER); }

void __syncwarp(unsigned mask) {
  fibers[current].kind = -1;
  fibers[current].mask = mask;
  wait_at(AT_WARP_BARRIER);
}

uint64_t emu_shuffle(unsigned mask, uint64_t bits, int kind, int arg, int width) {
  Fiber &f = fibers[current];
  f.mask = mask;
  f.kind = kind;
  f.arg = arg;
  f.width = width;
  f.value = bits;
  wait_at(AT_WARP_BARRIER);
  return fibers[current].result;
}

void emu_run_grid(dim3 grid, dim3 block, const std::function<void()> &body) {
  unsigned nthreads = block.x * block.y * block.z;
  /* The limits of every GPU since compute capability 3.0 (blocks past them
  ** are cudaErrorInvalidConfiguration at launch), and whole warps. */
  if (nthreads == 0 || nthreads > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64 ||
      nthreads % 32 != 0 || grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 ||
      grid.z > 65535 || grid.x > 0x7fffffffu) {
    fprintf(stderr, "cuda emulator: invalid launch grid (%u,%u,%u) block (%u,%u,%u)%s\n",
            grid.x, grid.y, grid.z, block.x, block.y, block.z,
            nthreads % 32 ? " (the emulator wants whole warps)" : "");
    sticky_error = cudaErrorInvalidConfiguration;
    return;
  }
  gridDim = grid;
  blockDim = block;
  running_body = &body;
  launch_failed = false;
  for (unsigned z = 0; z < grid.z; z++)
    for (unsigned y = 0; y < grid.y; y++)
      for (unsigned x = 0; x < grid.x; x++) {
        blockIdx.x = x;
        blockIdx.y = y;
        blockIdx.z = z;
        run_block((int)nthreads);
        if (launch_failed) {
          sticky_error = cudaErrorLaunchFailure;
          return;
        }
      }
}

/* ------------------------------------------------------------------ */
/* Runtime                                                             */
/* ------------------------------------------------------------------ */

namespace {
const size_t kHeader = 64; /* allocation size kept in front of the block */
size_t memory_limit = 0, memory_used = 0;
int current_device = 0;

int emulated_devices() {
  const char *e = getenv("EMC_EMU_DEVICES");
  return e ? atoi(e) : 1;
}

cudaError_t result(cudaError_t e) {
  if (e != cudaSuccess && sticky_error == cudaSuccess) sticky_error = e;
  return e;
}
} // namespace

extern "C" {

void emu_set_memory_limit(size_t bytes) { memory_limit = bytes; }
size_t emu_memory_used(void) { return memory_used; }

const char *cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
  }
  return "unknown error";
}

cudaError_t cudaGetLastError(void) {
  cudaError_t e = sticky_error;
  sticky_error = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError(void) { return sticky_error; }

cudaError_t cudaGetDeviceCount(int *n) {
  *n = emulated_devices();
  return *n > 0 ? cudaSuccess : cudaErrorNoDevice;
}

cudaError_t cudaSetDevice(int d) {
  if (d < 0 || d >= emulated_devices()) return result(cudaErrorInvalidDevice);
  current_device = d;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int *d) {
  *d = current_device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d) {
  if (d < 0 || d >= emulated_devices()) return result(cudaErrorInvalidDevice);
  snprintf(p->name, sizeof p->name, "ember CUDA emulator %d", d);
  p->multiProcessorCount = 4;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr a, int d) {
  if (d < 0 || d >= emulated_devices()) return result(cudaErrorInvalidDevice);
  *v = a == cudaDevAttrMultiProcessorCount ? 4 : 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) { return sticky_error; }

cudaError_t cudaDeviceCanAccessPeer(int *can, int, int) {
  *can = 1;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void **p, size_t n) {
  *p = NULL;
  if (memory_limit && memory_used + n > memory_limit) return result(cudaErrorMemoryAllocation);
  char *b = (char *)malloc(n + kHeader);
  if (!b) return result(cudaErrorMemoryAllocation);
  memcpy(b, &n, sizeof n);
  memory_used += n;
  *p = b + kHeader;
  return cudaSuccess;
}

cudaError_t cudaFree(void *p) {
  if (!p) return cudaSuccess;
  char *b = (char *)p - kHeader;
  size_t n;
  memcpy(&n, b, sizeof n);
  memory_used -= n;
  free(b);
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void **p, size_t n) {
  *p = malloc(n ? n : 1);
  return *p ? cudaSuccess : result(cudaErrorMemoryAllocation);
}
cudaError_t cudaHostAlloc(void **p, size_t n, unsigned) { return cudaMallocHost(p, n); }
cudaError_t cudaFreeHost(void *p) {
  free(p);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind) {
  if (n && (!dst || !src)) return result(cudaErrorInvalidValue);
  if (n) memmove(dst, src, n);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind k,
                            cudaStream_t) {
  return cudaMemcpy(dst, src, n, k);
}
cudaError_t cudaMemcpyPeerAsync(void *dst, int, const void *src, int, size_t n, cudaStream_t) {
  return cudaMemcpy(dst, src, n, cudaMemcpyDeviceToDevice);
}
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t) {
  if (n && !p) return result(cudaErrorInvalidValue);
  if (n) memset(p, v, n);
  return cudaSuccess;
}

struct emu_stream { int unused; };
struct emu_event { int unused; };

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned) {
  *s = new emu_stream();
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  delete s;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) { return sticky_error; }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned) {
  *e = new emu_event();
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete e;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) { return cudaSuccess; }
cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }

/* ------------------------------------------------------------------ */
/* cuBLAS                                                              */
/* ------------------------------------------------------------------ */

struct emu_blas { int unused; };

const char *cublasGetStatusString(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

cublasStatus_t cublasCreate(cublasHandle_t *h) {
  *h = new emu_blas();
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t h) {
  delete h;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) { return CUBLAS_STATUS_SUCCESS; }

} // extern "C"

namespace {
/* Column-major C = alpha op(A) op(B) + beta C, accumulating in double.
** LD reads element i of a matrix as double, ST writes one. */
template <class LD, class ST>
cublasStatus_t gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                    double alpha, int lda, long long sa, int ldb, long long sb, double beta,
                    int ldc, long long sc, int batch, LD ldA, LD ldB, LD ldC, ST stC) {
  if (m < 0 || n < 0 || k < 0 || batch < 0) return CUBLAS_STATUS_INVALID_VALUE;
  if (ldc < (m > 1 ? m : 1)) return CUBLAS_STATUS_INVALID_VALUE;
  if (lda < ((ta == CUBLAS_OP_N ? m : k) > 1 ? (ta == CUBLAS_OP_N ? m : k) : 1))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (ldb < ((tb == CUBLAS_OP_N ? k : n) > 1 ? (tb == CUBLAS_OP_N ? k : n) : 1))
    return CUBLAS_STATUS_INVALID_VALUE;
  for (int b = 0; b < batch; b++)
    for (int j = 0; j < n; j++)
      for (int i = 0; i < m; i++) {
        double acc = 0;
        for (int p = 0; p < k; p++) {
          long long ai = ta == CUBLAS_OP_N ? i + (long long)p * lda : p + (long long)i * lda;
          long long bi = tb == CUBLAS_OP_N ? p + (long long)j * ldb : j + (long long)p * ldb;
          acc += ldA(b * sa + ai) * ldB(b * sb + bi);
        }
        long long ci = b * sc + i + (long long)j * ldc;
        double old = beta != 0 ? ldC(ci) : 0.0; /* beta 0 ignores C, even NaN */
        stC(ci, alpha * acc + beta * old);
      }
  return CUBLAS_STATUS_SUCCESS;
}
} // namespace

extern "C" {

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t, cublasOperation_t ta,
                                         cublasOperation_t tb, int m, int n, int k,
                                         const float *alpha, const float *A, int lda,
                                         long long sa, const float *B, int ldb, long long sb,
                                         const float *beta, float *C, int ldc, long long sc,
                                         int batch) {
  auto la = [=](long long i) { return (double)A[i]; };
  auto lb = [=](long long i) { return (double)B[i]; };
  auto lc = [=](long long i) { return (double)C[i]; };
  std::function<double(long long)> fa = la, fb = lb, fc = lc;
  return gemm(ta, tb, m, n, k, *alpha, lda, sa, ldb, sb, *beta, ldc, sc, batch, fa, fb, fc,
              [=](long long i, double v) { C[i] = (float)v; });
}

cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t, cublasOperation_t ta,
                                         cublasOperation_t tb, int m, int n, int k,
                                         const double *alpha, const double *A, int lda,
                                         long long sa, const double *B, int ldb, long long sb,
                                         const double *beta, double *C, int ldc, long long sc,
                                         int batch) {
  std::function<double(long long)> fa = [=](long long i) { return A[i]; };
  std::function<double(long long)> fb = [=](long long i) { return B[i]; };
  std::function<double(long long)> fc = [=](long long i) { return C[i]; };
  return gemm(ta, tb, m, n, k, *alpha, lda, sa, ldb, sb, *beta, ldc, sc, batch, fa, fb, fc,
              [=](long long i, double v) { C[i] = v; });
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t, cublasOperation_t ta,
                                          cublasOperation_t tb, int m, int n, int k,
                                          const void *alpha, const void *A, cudaDataType at,
                                          int lda, long long sa, const void *B, cudaDataType bt,
                                          int ldb, long long sb, const void *beta, void *C,
                                          cudaDataType ct, int ldc, long long sc, int batch,
                                          cublasComputeType_t compute, cublasGemmAlgo_t) {
  if (at != CUDA_R_16BF || bt != CUDA_R_16BF || ct != CUDA_R_16BF ||
      compute != CUBLAS_COMPUTE_32F)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  const __nv_bfloat16 *a = (const __nv_bfloat16 *)A, *b = (const __nv_bfloat16 *)B;
  __nv_bfloat16 *c = (__nv_bfloat16 *)C;
  std::function<double(long long)> fa = [=](long long i) { return (double)__bfloat162float(a[i]); };
  std::function<double(long long)> fb = [=](long long i) { return (double)__bfloat162float(b[i]); };
  std::function<double(long long)> fc = [=](long long i) { return (double)__bfloat162float(c[i]); };
  return gemm(ta, tb, m, n, k, *(const float *)alpha, lda, sa, ldb, sb, *(const float *)beta,
              ldc, sc, batch, fa, fb, fc,
              [=](long long i, double v) { c[i] = __float2bfloat16((float)v); });
}

} // extern "C"
