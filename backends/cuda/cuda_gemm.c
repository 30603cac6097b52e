/*
** cuda_gemm.c -- batched matrix multiply through cuBLAS.
**
** ember is row-major, cuBLAS column-major. A row-major matrix read as
** column-major is its transpose, so C = op(A) op(B) is computed as
** C^T = op(B)^T op(A)^T: swap the operands and m with n, keep the flags.
** bfloat16 goes through cublasGemmStridedBatchedEx with float accumulation.
** float32 uses TF32 tensor cores only when EMBER_CUDA_TF32=1 (cuda_device.c).
*/
#include "cuda_internal.h"

#include <limits.h>
#include <string.h>

/* The smallest legal leading dimension of a row-major matrix with `cols`
** columns (cuBLAS wants >= 1 even when a dim is 0). */
static int64_t min_ld(int64_t cols) { return cols > 1 ? cols : 1; }

/* k == 0: C = beta C, with beta == 0 writing zeros without reading C
** (BLAS semantics, so NaN in C does not survive). */
static em_status scale_c(int device, em_dtype dt, int64_t m, int64_t n, double beta, void *c,
                         int64_t ldc, int64_t stride_c, int64_t batch) {
  em_kview v;
  memset(&v, 0, sizeof v);
  v.data = c;
  v.dtype = dt;
  v.ndim = 3;
  v.shape[0] = batch, v.shape[1] = m, v.shape[2] = n;
  v.stride[0] = stride_c, v.stride[1] = ldc, v.stride[2] = 1;
  if (beta == 0) return emc_fill(device, &v, 0.0);
  return emc_unary(device, EM_AFFINE, &v, &v, beta, 0.0);
}

em_status emc_gemm(int device, em_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                   double alpha, const void *a, int64_t lda, int64_t stride_a, const void *b,
                   int64_t ldb, int64_t stride_b, double beta, void *c, int64_t ldc,
                   int64_t stride_c, int64_t batch) {
  const char *op = "cuda gemm";
  if (m < 0 || n < 0 || k < 0 || batch < 0)
    return em_error(EM_ERR_SHAPE, "%s: negative size m=%lld n=%lld k=%lld batch=%lld", op,
                    (long long)m, (long long)n, (long long)k, (long long)batch);
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX || batch > INT_MAX || lda > INT_MAX ||
      ldb > INT_MAX || ldc > INT_MAX)
    return em_error(EM_ERR_UNSUPPORTED,
                    "%s: sizes m=%lld n=%lld k=%lld batch=%lld exceed cuBLAS's 32-bit limit", op,
                    (long long)m, (long long)n, (long long)k, (long long)batch);
  if (m == 0 || n == 0 || batch == 0) return EM_OK;
  /* Stored shapes: A is [m,k] ([k,m] when ta), B [k,n] ([n,k] when tb), C
  ** [m,n]; a leading dim must cover a row (and be >= 1), as for BLAS. */
  int64_t need_a = min_ld(ta ? m : k), need_b = min_ld(tb ? k : n), need_c = min_ld(n);
  if (lda < need_a || ldb < need_b || ldc < need_c)
    return em_error(EM_ERR_ARG,
                    "%s: leading dimensions lda=%lld ldb=%lld ldc=%lld, expected >= %lld, %lld, "
                    "%lld (row-major, m=%lld n=%lld k=%lld, ta=%d tb=%d)",
                    op, (long long)lda, (long long)ldb, (long long)ldc, (long long)need_a,
                    (long long)need_b, (long long)need_c, (long long)m, (long long)n, (long long)k,
                    (int)ta, (int)tb);
  if (!c || (k > 0 && (!a || !b)))
    return em_error(EM_ERR_ARG, "%s: NULL matrix pointer for [%lld x %lld] @ [%lld x %lld]", op,
                    (long long)m, (long long)k, (long long)k, (long long)n);

  emc_device *d;
  em_status s = emc_device_get(device, op, &d);
  if (s) return s;
  if (k == 0) return scale_c(device, dt, m, n, beta, c, ldc, stride_c, batch);
  cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasStatus_t st;
  switch (dt) {
    case EM_F32: {
      float al = (float)alpha, be = (float)beta;
      st = cublasSgemmStridedBatched(d->blas, opb, opa, (int)n, (int)m, (int)k, &al, b, (int)ldb,
                                     stride_b, a, (int)lda, stride_a, &be, c, (int)ldc, stride_c,
                                     (int)batch);
      break;
    }
    case EM_F64:
      st = cublasDgemmStridedBatched(d->blas, opb, opa, (int)n, (int)m, (int)k, &alpha, b,
                                     (int)ldb, stride_b, a, (int)lda, stride_a, &beta, c,
                                     (int)ldc, stride_c, (int)batch);
      break;
    case EM_BF16: {
      float al = (float)alpha, be = (float)beta;
      st = cublasGemmStridedBatchedEx(d->blas, opb, opa, (int)n, (int)m, (int)k, &al, b,
                                      CUDA_R_16BF, (int)ldb, stride_b, a, CUDA_R_16BF, (int)lda,
                                      stride_a, &be, c, CUDA_R_16BF, (int)ldc, stride_c,
                                      (int)batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
      break;
    }
    default:
      return em_error(EM_ERR_DTYPE,
                      "%s: dtype %s is not supported (supported: float32, float64, bfloat16)", op,
                      em_dtype_name(dt));
  }
  if (st != CUBLAS_STATUS_SUCCESS) return emc_blas_error(st, op);
  return emc_launch_status(op);
}
