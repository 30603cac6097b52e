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

/* The smallest legal leading dimension of a stored rows x cols row-major
** matrix (cuBLAS wants >= 1 even when a dim is 0). */
static int64_t min_ld(int64_t cols) { return cols > 1 ? cols : 1; }

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
  /* Stored shapes: A is [m,k] ([k,m] when ta), B [k,n] ([n,k] when tb), C [m,n]. */
  int64_t need_a = min_ld(ta ? m : k), need_b = min_ld(tb ? k : n), need_c = min_ld(n);
  if ((lda < need_a && (ta ? k : m) > 1) || (ldb < need_b && (tb ? n : k) > 1) ||
      (ldc < need_c && m > 1))
    return em_error(EM_ERR_ARG,
                    "%s: leading dimensions lda=%lld ldb=%lld ldc=%lld are too small for "
                    "m=%lld n=%lld k=%lld (ta=%d tb=%d)",
                    op, (long long)lda, (long long)ldb, (long long)ldc, (long long)m,
                    (long long)n, (long long)k, (int)ta, (int)tb);
  if (lda < need_a) lda = need_a; /* one row: the value is never used */
  if (ldb < need_b) ldb = need_b;
  if (ldc < need_c) ldc = need_c;

  emc_device *d;
  em_status s = emc_device_get(device, op, &d);
  if (s) return s;
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
