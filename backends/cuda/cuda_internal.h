/*
** cuda_internal.h -- what the files of the CUDA backend share (C and CUDA).
**
** One emc_device per GPU, set up on first use: the stream every kernel
** and copy of that device is queued on (so the caching allocator can
** reuse blocks in stream order), the block cache, the pinned staging
** buffers for host transfers, and (from the first matmul) the cuBLAS
** handle bound to the stream.
**
** Each em_backend entry point has an emc_ function here; cuda_plugin.c
** puts them in the vtable. Kernels live in the .cu files.
*/
#ifndef EMBER_CUDA_INTERNAL_H
#define EMBER_CUDA_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "cuda_cache.h"
#include "cuda_plan.h"
#include "ember_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define EMC_MAX_DEVICES 16
/* Bytes of each of the two pinned staging buffers of a device. */
#define EMC_STAGING_BYTES ((size_t)8 << 20)

typedef struct emc_device {
  bool ready;
  int index;
  int sm_count;
  cudaStream_t stream;
  cublasHandle_t blas;     /* NULL until the first matmul */
  emc_cache cache;
  /* Host transfers go through two pinned buffers used in turn; event k
  ** is recorded after the copy reading or filling buffer k was queued. */
  pthread_mutex_t staging_lock;
  void *staging[2];
  cudaEvent_t staged[2];
  int next_staging;        /* the buffer the next h2d chunk uses */
} emc_device;

/* ---- devices (cuda_device.c) ---- */

/* The number of devices, cached after the first call (0 on any error). */
int emc_device_count(void);
em_status emc_device_name(int device, char *buf, size_t n);
/* Makes `device` current on this thread and returns its state, setting it
** up on first use. The error names `op`. */
em_status emc_device_get(int device, const char *op, emc_device **out);
/* Releases every device's resources (plugin fini). */
void emc_devices_shutdown(void);

/* A CUDA failure as an ember error: "op: <CUDA's message>", EM_ERR_OOM
** for cudaErrorMemoryAllocation, EM_ERR_BACKEND otherwise. */
em_status emc_cuda_error(cudaError_t e, const char *op);
/* A cuBLAS status as an ember error (cuda_gemm.c). */
em_status emc_blas_error(cublasStatus_t s, const char *op);
/* The status of the last launch on this thread, as above. */
em_status emc_launch_status(const char *op);

#define EMC_CHECK(call, op)                                  \
  do {                                                       \
    cudaError_t emc_e_ = (call);                             \
    if (emc_e_ != cudaSuccess) return emc_cuda_error(emc_e_, op); \
  } while (0)

/* ---- memory (cuda_device.c) ---- */

em_status emc_alloc(int device, size_t nbytes, void **ptr);
void emc_free(int device, void *ptr, size_t nbytes);
em_status emc_memory_stats(int device, size_t *in_use, size_t *cached);
em_status emc_empty_cache(int device);
/* Temporary device memory for a kernel (stream ordered: free it right
** after queuing the kernels that use it). */
em_status emc_scratch(emc_device *d, size_t nbytes, const char *op, void **ptr);
void emc_scratch_free(emc_device *d, void *ptr);
/* Index checks: kernels store the first bad index into a two-word flag
** (flag[0] = 1, flag[1] = the value). */
em_status emc_flag_new(emc_device *d, const char *op, int64_t **flag);
/* Waits for the kernel, copies the flag into host[2] and frees it. */
em_status emc_flag_fetch(emc_device *d, int64_t *flag, const char *op, int64_t host[2]);
/* Waits for the kernel, frees the flag and reports EM_ERR_INDEX:
** "op: index V is out of range for a dim of size N". */
em_status emc_flag_check(emc_device *d, int64_t *flag, const char *op, int64_t size);

/* ---- transfers (cuda_transfer.c) ---- */

em_status emc_copy_h2d(int device, void *dst, const void *src, size_t nbytes);
em_status emc_copy_d2h(int device, void *dst, const void *src, size_t nbytes);
em_status emc_copy_d2d(int dst_device, void *dst, int src_device, const void *src, size_t nbytes);
em_status emc_synchronize(int device);

/* ---- matrix multiply (cuda_gemm.c) ---- */

/* Destroys the device's cuBLAS handle, if it has one. */
void emc_blas_destroy(emc_device *d);
em_status emc_gemm(int device, em_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                   double alpha, const void *a, int64_t lda, int64_t stride_a, const void *b,
                   int64_t ldb, int64_t stride_b, double beta, void *c, int64_t ldc,
                   int64_t stride_c, int64_t batch);

/* ---- kernels (.cu files) ---- */

em_status emc_copy(int device, const em_kview *dst, const em_kview *src);
em_status emc_fill(int device, const em_kview *dst, double value);
em_status emc_unary(int device, em_unary_op op, const em_kview *out, const em_kview *x,
                    double alpha, double beta);
em_status emc_unary_backward(int device, em_unary_op op, em_dtype dt, int64_t n, void *gx,
                             const void *gy, const void *x, const void *y, double alpha,
                             double beta);
em_status emc_binary(int device, em_binary_op op, const em_kview *out, const em_kview *a,
                     const em_kview *b);
em_status emc_where(int device, const em_kview *out, const em_kview *cond, const em_kview *a,
                    const em_kview *b);
em_status emc_reduce(int device, em_reduce_op op, em_dtype dt, void *out, int64_t *idx,
                     const void *in, int64_t outer, int64_t n, int64_t inner, int correction);
em_status emc_softmax(int device, em_dtype dt, void *out, const void *x, int64_t rows,
                      int64_t n, bool log);
em_status emc_softmax_backward(int device, em_dtype dt, void *gx, const void *gy,
                               const void *y, int64_t rows, int64_t n, bool log);
em_status emc_layer_norm(int device, em_dtype dt, void *y, void *mean, void *rstd,
                         const void *x, const void *w, const void *b, int64_t rows, int64_t n,
                         double eps);
em_status emc_layer_norm_backward(int device, em_dtype dt, void *dx, void *dw, void *db,
                                  const void *dy, const void *x, const void *mean,
                                  const void *rstd, const void *w, int64_t rows, int64_t n);
em_status emc_index_select(int device, em_dtype dt, void *out, const void *in,
                           const int64_t *idx, int64_t nidx, int64_t outer, int64_t n_in,
                           int64_t inner);
em_status emc_index_add(int device, em_dtype dt, void *out, const void *src,
                        const int64_t *idx, int64_t nidx, int64_t outer, int64_t n_out,
                        int64_t inner);
em_status emc_gather(int device, em_dtype dt, void *out, const void *in, const int64_t *idx,
                     int64_t outer, int64_t n_in, int64_t n_idx, int64_t inner);
em_status emc_scatter_add(int device, em_dtype dt, void *out, const void *src,
                          const int64_t *idx, int64_t outer, int64_t n_out, int64_t n_idx,
                          int64_t inner);
em_status emc_cross_entropy(int device, em_dtype dt, void *loss, void *lse,
                            const void *logits, const int64_t *target, int64_t rows,
                            int64_t classes, int64_t ignore_index, double smoothing);
em_status emc_cross_entropy_backward(int device, em_dtype dt, void *dlogits, const void *dloss,
                                     const void *logits, const void *lse,
                                     const int64_t *target, int64_t rows, int64_t classes,
                                     int64_t ignore_index, double smoothing);
em_status emc_random(int device, em_random_kind kind, const em_kview *out, double a, double b,
                     uint64_t seed, uint64_t offset);
em_status emc_dropout(int device, em_dtype dt, void *out, void *mask, const void *x, int64_t n,
                      double p, uint64_t seed, uint64_t offset);
em_status emc_adam_step(int device, em_dtype dt, int64_t n, void *param, const void *grad,
                        void *m, void *v, double lr, double beta1, double beta2, double eps,
                        double weight_decay, int64_t step, bool decoupled);
em_status emc_sgd_step(int device, em_dtype dt, int64_t n, void *param, const void *grad,
                       void *buf, double lr, double momentum, double dampening,
                       double weight_decay, bool nesterov, bool first_step);
em_status emc_attention_forward(int device, const em_attention_args *args);
em_status emc_attention_backward(int device, const em_attention_args *args);

#ifdef __cplusplus
}
#endif
#endif
