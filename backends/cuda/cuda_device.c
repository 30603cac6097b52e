/*
** cuda_device.c -- devices, CUDA errors as ember errors, and device memory
** through the caching allocator (cuda_cache.c).
**
** A device is set up on first use: its stream, its block cache and its
** pinned staging buffers (its cuBLAS handle waits for the first matmul,
** cuda_gemm.c). Setting up touches the
** driver, so it happens under a lock and only once.
*/
#include "cuda_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static emc_device devices[EMC_MAX_DEVICES];
static pthread_mutex_t devices_lock = PTHREAD_MUTEX_INITIALIZER;
static int count_cache = -1;
/* The device made current on this thread by emc_device_get (-1: none). */
static _Thread_local int current_device = -1;

/* ------------------------------------------------------------------ */
/* Errors                                                              */
/* ------------------------------------------------------------------ */

em_status emc_cuda_error(cudaError_t e, const char *op) {
  /* Clears the error if it is not sticky, so the next op starts clean. */
  (void)cudaGetLastError();
  if (e == cudaErrorMemoryAllocation)
    return em_error(EM_ERR_OOM, "%s: CUDA out of memory (%s)", op, cudaGetErrorString(e));
  return em_error(EM_ERR_BACKEND, "%s: %s", op, cudaGetErrorString(e));
}

em_status emc_launch_status(const char *op) {
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? EM_OK : emc_cuda_error(e, op);
}

/* ------------------------------------------------------------------ */
/* Devices                                                             */
/* ------------------------------------------------------------------ */

int emc_device_count(void) {
  int n = __atomic_load_n(&count_cache, __ATOMIC_ACQUIRE);
  if (n >= 0) return n;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    n = 0;
  }
  if (n > EMC_MAX_DEVICES) n = EMC_MAX_DEVICES;
  __atomic_store_n(&count_cache, n, __ATOMIC_RELEASE);
  return n;
}

em_status emc_device_name(int device, char *buf, size_t n) {
  int count = emc_device_count();
  if (device < 0 || device >= count)
    return em_error(EM_ERR_DEVICE, "cuda device_name: no CUDA device %d (%d device%s)", device,
                    count, count == 1 ? "" : "s");
  struct cudaDeviceProp prop;
  EMC_CHECK(cudaGetDeviceProperties(&prop, device), "cuda device_name");
  if (n) snprintf(buf, n, "%s", prop.name);
  return EM_OK;
}

static int raw_alloc(void *ud, size_t n, void **ptr) {
  (void)ud;
  cudaError_t e = cudaMalloc(ptr, n);
  if (e != cudaSuccess) (void)cudaGetLastError();
  return (int)e;
}

static void raw_free(void *ud, void *ptr) {
  (void)ud;
  if (cudaFree(ptr) != cudaSuccess) (void)cudaGetLastError();
}

/* Undoes a partial setup (d->ready is false). */
static void device_teardown(emc_device *d) {
  for (int k = 0; k < 2; k++) {
    if (d->staged[k]) cudaEventDestroy(d->staged[k]);
    if (d->staging[k]) cudaFreeHost(d->staging[k]);
    d->staged[k] = NULL;
    d->staging[k] = NULL;
  }
  emc_blas_destroy(d);
  if (d->stream) cudaStreamDestroy(d->stream);
  d->stream = NULL;
  (void)cudaGetLastError();
}

static em_status device_setup(emc_device *d, int index, const char *op) {
  memset(d, 0, sizeof *d);
  d->index = index;
  cudaError_t e;
  if ((e = cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking)) != cudaSuccess)
    goto cuda_fail;
  if ((e = cudaDeviceGetAttribute(&d->sm_count, cudaDevAttrMultiProcessorCount, index)) !=
      cudaSuccess)
    goto cuda_fail;
  for (int k = 0; k < 2; k++) {
    if ((e = cudaMallocHost(&d->staging[k], EMC_STAGING_BYTES)) != cudaSuccess) goto cuda_fail;
    if ((e = cudaEventCreateWithFlags(&d->staged[k], cudaEventDisableTiming)) != cudaSuccess)
      goto cuda_fail;
  }
  pthread_mutex_init(&d->staging_lock, NULL);
  emc_cache_init(&d->cache, raw_alloc, raw_free, d);
  d->ready = true;
  return EM_OK;
cuda_fail:
  device_teardown(d);
  return emc_cuda_error(e, op);
}

em_status emc_device_get(int device, const char *op, emc_device **out) {
  int count = emc_device_count();
  if (device < 0 || device >= count)
    return em_error(EM_ERR_DEVICE, "%s: no CUDA device %d (this machine has %d)", op, device,
                    count);
  if (current_device != device) {
    EMC_CHECK(cudaSetDevice(device), op);
    current_device = device;
  }
  emc_device *d = &devices[device];
  if (!__atomic_load_n(&d->ready, __ATOMIC_ACQUIRE)) {
    pthread_mutex_lock(&devices_lock);
    em_status s = d->ready ? EM_OK : device_setup(d, device, op);
    pthread_mutex_unlock(&devices_lock);
    if (s) return s;
  }
  *out = d;
  return EM_OK;
}

void emc_devices_shutdown(void) {
  pthread_mutex_lock(&devices_lock);
  for (int i = 0; i < EMC_MAX_DEVICES; i++) {
    emc_device *d = &devices[i];
    if (!d->ready) continue;
    /* The process may be exiting with the CUDA runtime already torn
    ** down; then these calls fail harmlessly. */
    if (cudaSetDevice(i) == cudaSuccess) cudaStreamSynchronize(d->stream);
    emc_cache_destroy(&d->cache);
    device_teardown(d);
    pthread_mutex_destroy(&d->staging_lock);
    d->ready = false;
  }
  current_device = -1;
  pthread_mutex_unlock(&devices_lock);
}

/* ------------------------------------------------------------------ */
/* Memory                                                              */
/* ------------------------------------------------------------------ */

/* The cache's return code as an ember error. */
static em_status alloc_error(int rc, int device, size_t nbytes, const char *op) {
  double mib = (double)nbytes / (1024.0 * 1024.0);
  if (rc == -1)
    return em_error(EM_ERR_OOM, "%s: %zu bytes (%.1f MiB) is too large for CUDA device %d", op,
                    nbytes, mib, device);
  if (rc == -2)
    return em_error(EM_ERR_OOM, "%s: host out of memory for the allocator's bookkeeping", op);
  (void)cudaGetLastError();
  if (rc == (int)cudaErrorMemoryAllocation) {
    size_t in_use = 0, cached = 0;
    emc_cache_stats(&devices[device].cache, &in_use, &cached);
    return em_error(EM_ERR_OOM,
                    "%s: CUDA out of memory allocating %zu bytes (%.1f MiB) on device %d "
                    "(%.1f MiB in use by tensors, %.1f MiB cached)",
                    op, nbytes, mib, device, (double)in_use / 1048576.0,
                    (double)cached / 1048576.0);
  }
  return em_error(EM_ERR_BACKEND, "%s: cudaMalloc of %zu bytes: %s", op, nbytes,
                  cudaGetErrorString((cudaError_t)rc));
}

em_status emc_alloc(int device, size_t nbytes, void **ptr) {
  emc_device *d = NULL;
  *ptr = NULL;
  em_status s = emc_device_get(device, "cuda alloc", &d);
  if (s) return s;
  int rc = emc_cache_alloc(&d->cache, nbytes, ptr);
  return rc ? alloc_error(rc, device, nbytes, "cuda alloc") : EM_OK;
}

void emc_free(int device, void *ptr, size_t nbytes) {
  (void)nbytes; /* the cache knows each block's size class */
  if (!ptr || device < 0 || device >= emc_device_count()) return;
  emc_device *d = &devices[device];
  if (d->ready) emc_cache_free(&d->cache, ptr);
}

em_status emc_memory_stats(int device, size_t *in_use, size_t *cached) {
  emc_device *d = NULL;
  em_status s = emc_device_get(device, "cuda memory_stats", &d);
  if (s) return s;
  emc_cache_stats(&d->cache, in_use, cached);
  return EM_OK;
}

em_status emc_empty_cache(int device) {
  emc_device *d = NULL;
  em_status s = emc_device_get(device, "cuda empty_cache", &d);
  if (s) return s;
  /* cudaFree waits for the device, so no queued kernel still uses them. */
  emc_cache_empty(&d->cache);
  return EM_OK;
}

em_status emc_scratch(emc_device *d, size_t nbytes, const char *op, void **ptr) {
  int rc = emc_cache_alloc(&d->cache, nbytes, ptr);
  return rc ? alloc_error(rc, d->index, nbytes, op) : EM_OK;
}

void emc_scratch_free(emc_device *d, void *ptr) { emc_cache_free(&d->cache, ptr); }

em_status emc_flag_new(emc_device *d, const char *op, int64_t **flag) {
  void *p = NULL;
  em_status s = emc_scratch(d, 2 * sizeof(int64_t), op, &p);
  if (s) return s;
  cudaError_t e = cudaMemsetAsync(p, 0, 2 * sizeof(int64_t), d->stream);
  if (e != cudaSuccess) {
    emc_scratch_free(d, p);
    return emc_cuda_error(e, op);
  }
  *flag = p;
  return EM_OK;
}

em_status emc_flag_fetch(emc_device *d, int64_t *flag, const char *op, int64_t host[2]) {
  host[0] = host[1] = 0;
  cudaError_t e = cudaMemcpyAsync(host, flag, 2 * sizeof(int64_t), cudaMemcpyDeviceToHost,
                                  d->stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(d->stream);
  emc_scratch_free(d, flag);
  return e == cudaSuccess ? EM_OK : emc_cuda_error(e, op);
}

em_status emc_flag_check(emc_device *d, int64_t *flag, const char *op, int64_t size) {
  int64_t h[2];
  em_status s = emc_flag_fetch(d, flag, op, h);
  if (s) return s;
  if (h[0])
    return em_error(EM_ERR_INDEX, "%s: index %lld is out of range for a dim of size %lld", op,
                    (long long)h[1], (long long)size);
  return EM_OK;
}
