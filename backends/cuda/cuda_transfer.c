/*
** cuda_transfer.c -- copies between host and device and between devices.
**
** Host memory given to us is pageable, which the GPU cannot read by DMA;
** so transfers go through two pinned staging buffers per device, used in
** turn: while the GPU copies one chunk, the host fills (or drains) the
** other. An h2d returns once its last chunk is queued (the staging buffer
** holds the data, the caller's memory is free); a d2h returns when the
** data has arrived.
*/
#include "cuda_internal.h"

#include <string.h>

static em_status check_args(const char *op, const void *dst, const void *src, size_t nbytes) {
  if (nbytes && (!dst || !src))
    return em_error(EM_ERR_ARG, "%s: NULL pointer for a copy of %zu bytes", op, nbytes);
  return EM_OK;
}

em_status emc_copy_h2d(int device, void *dst, const void *src, size_t nbytes) {
  const char *op = "cuda copy_h2d";
  em_status s = check_args(op, dst, src, nbytes);
  if (s || nbytes == 0) return s;
  emc_device *d = NULL;
  if ((s = emc_device_get(device, op, &d))) return s;
  cudaError_t e = cudaSuccess;
  pthread_mutex_lock(&d->staging_lock);
  for (size_t off = 0; off < nbytes && e == cudaSuccess; off += EMC_STAGING_BYTES) {
    size_t len = nbytes - off < EMC_STAGING_BYTES ? nbytes - off : EMC_STAGING_BYTES;
    int k = d->next_staging;
    d->next_staging ^= 1;
    /* The buffer's previous copy must have left it before we refill it. */
    if ((e = cudaEventSynchronize(d->staged[k])) != cudaSuccess) break;
    memcpy(d->staging[k], (const char *)src + off, len);
    e = cudaMemcpyAsync((char *)dst + off, d->staging[k], len, cudaMemcpyHostToDevice, d->stream);
    if (e == cudaSuccess) e = cudaEventRecord(d->staged[k], d->stream);
  }
  pthread_mutex_unlock(&d->staging_lock);
  return e == cudaSuccess ? EM_OK : emc_cuda_error(e, op);
}

em_status emc_copy_d2h(int device, void *dst, const void *src, size_t nbytes) {
  const char *op = "cuda copy_d2h";
  em_status s = check_args(op, dst, src, nbytes);
  if (s || nbytes == 0) return s;
  emc_device *d = NULL;
  if ((s = emc_device_get(device, op, &d))) return s;
  cudaError_t e = cudaSuccess;
  size_t chunks = (nbytes + EMC_STAGING_BYTES - 1) / EMC_STAGING_BYTES;
  pthread_mutex_lock(&d->staging_lock);
  /* Queue chunk i into buffer i % 2, then drain chunk i - 1 while it runs. */
  for (size_t i = 0; i <= chunks && e == cudaSuccess; i++) {
    if (i < chunks) {
      size_t off = i * EMC_STAGING_BYTES;
      size_t len = nbytes - off < EMC_STAGING_BYTES ? nbytes - off : EMC_STAGING_BYTES;
      int k = (int)(i % 2);
      e = cudaMemcpyAsync(d->staging[k], (const char *)src + off, len, cudaMemcpyDeviceToHost,
                          d->stream);
      if (e == cudaSuccess) e = cudaEventRecord(d->staged[k], d->stream);
      if (e != cudaSuccess) break;
    }
    if (i > 0) {
      size_t off = (i - 1) * EMC_STAGING_BYTES;
      size_t len = nbytes - off < EMC_STAGING_BYTES ? nbytes - off : EMC_STAGING_BYTES;
      int k = (int)((i - 1) % 2);
      if ((e = cudaEventSynchronize(d->staged[k])) != cudaSuccess) break;
      memcpy((char *)dst + off, d->staging[k], len);
    }
  }
  /* The next h2d must not refill a buffer before its d2h chunk is drained;
  ** both buffers are drained here, so it may start with either. */
  d->next_staging = 0;
  pthread_mutex_unlock(&d->staging_lock);
  return e == cudaSuccess ? EM_OK : emc_cuda_error(e, op);
}

em_status emc_copy_d2d(int dst_device, void *dst, int src_device, const void *src,
                       size_t nbytes) {
  const char *op = "cuda copy_d2d";
  em_status s = check_args(op, dst, src, nbytes);
  if (s || nbytes == 0) return s;
  emc_device *sd = NULL, *dd = NULL;
  if (dst_device == src_device) {
    if ((s = emc_device_get(dst_device, op, &dd))) return s;
    EMC_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, dd->stream), op);
    return EM_OK;
  }
  /* Across devices the copy runs on the destination's stream: first let the
  ** source's queued work finish (it may still be writing src), and wait
  ** for the copy at the end, since src's block may be reused on its own
  ** stream as soon as we return. */
  if ((s = emc_device_get(src_device, op, &sd))) return s;
  EMC_CHECK(cudaStreamSynchronize(sd->stream), op);
  if ((s = emc_device_get(dst_device, op, &dd))) return s;
  EMC_CHECK(cudaMemcpyPeerAsync(dst, dst_device, src, src_device, nbytes, dd->stream), op);
  EMC_CHECK(cudaStreamSynchronize(dd->stream), op);
  return EM_OK;
}

em_status emc_synchronize(int device) {
  emc_device *d = NULL;
  em_status s = emc_device_get(device, "cuda synchronize", &d);
  if (s) return s;
  EMC_CHECK(cudaStreamSynchronize(d->stream), "cuda synchronize");
  return EM_OK;
}
