/*
** cpu_gemm.c -- batched row-major matrix multiply.
**
** Products go to OpenBLAS (cblas_sgemm/dgemm), which has fast paths for
** small matrices and threads big ones internally; the batch loop around
** it stays serial, because OpenBLAS's pthreads build must not be called
** from inside an OpenMP team. Only tiny products (up to 4x4x4, where the
** call itself is the cost) run plain loops, spread over the batch with
** OpenMP when there are enough of them.
*/
#include "cpu_internal.h"

#include <cblas.h>
#include <limits.h>

/* A product with m*n*k at most this (and every size at most this, for
** k = 0) uses loops: measured against OpenBLAS 0.3.21, the two are equal
** at 4x4x4 and BLAS is 1.5x faster at 8x8x8. */
#define SMALL_MNK 64

/* C = alpha * op(A) @ op(B) + beta * C for one small matrix; a row of
** C is accumulated in acc[] first. beta == 0 never reads C (BLAS rule). */
#define SMALL_GEMM(T)                                                            \
  static void small_gemm_##T(bool ta, bool tb, int64_t m, int64_t n, int64_t k,  \
                             T alpha, const T *a, int64_t lda, const T *b,       \
                             int64_t ldb, T beta, T *c, int64_t ldc) {           \
    T acc[SMALL_MNK];                                                            \
    for (int64_t i = 0; i < m; i++) {                                            \
      for (int64_t j = 0; j < n; j++) acc[j] = 0;                                \
      if (!tb) {                                                                 \
        for (int64_t p = 0; p < k; p++) {                                        \
          const T aip = ta ? a[p * lda + i] : a[i * lda + p];                    \
          const T *brow = b + p * ldb;                                           \
          for (int64_t j = 0; j < n; j++) acc[j] += aip * brow[j];               \
        }                                                                        \
      } else {                                                                   \
        for (int64_t j = 0; j < n; j++) {                                        \
          const T *bcol = b + j * ldb; /* row j of B is column j of op(B) */     \
          T sum = 0;                                                             \
          if (ta)                                                                \
            for (int64_t p = 0; p < k; p++) sum += a[p * lda + i] * bcol[p];     \
          else                                                                   \
            for (int64_t p = 0; p < k; p++) sum += a[i * lda + p] * bcol[p];     \
          acc[j] = sum;                                                          \
        }                                                                        \
      }                                                                          \
      T *crow = c + i * ldc;                                                     \
      if (beta == 0)                                                             \
        for (int64_t j = 0; j < n; j++) crow[j] = alpha * acc[j];                \
      else                                                                       \
        for (int64_t j = 0; j < n; j++) crow[j] = alpha * acc[j] + beta * crow[j]; \
    }                                                                            \
  }

SMALL_GEMM(float)
SMALL_GEMM(double)

static em_status check_ld(const char *what, int64_t ld, int64_t cols) {
  int64_t need = cols > 1 ? cols : 1;
  if (ld < need)
    return em_error(EM_ERR_ARG, "cpu gemm: %s is %lld, expected >= %lld (row-major, %lld columns)",
                    what, (long long)ld, (long long)need, (long long)cols);
  return EM_OK;
}

em_status cpu_gemm(int device, em_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                   double alpha, const void *a, int64_t lda, int64_t stride_a, const void *b,
                   int64_t ldb, int64_t stride_b, double beta, void *c, int64_t ldc,
                   int64_t stride_c, int64_t batch) {
  (void)device;
  if (dt != EM_F32 && dt != EM_F64) return cpu_bad_dtype("gemm", dt, "float32, float64");
  if (m < 0 || n < 0 || k < 0 || batch < 0)
    return em_error(EM_ERR_SHAPE, "cpu gemm: negative size m=%lld n=%lld k=%lld batch=%lld",
                    (long long)m, (long long)n, (long long)k, (long long)batch);
  if (m == 0 || n == 0 || batch == 0) return EM_OK;
  em_status s;
  if ((s = check_ld("lda", lda, ta ? m : k)) || (s = check_ld("ldb", ldb, tb ? k : n)) ||
      (s = check_ld("ldc", ldc, n)))
    return s;
  if (!c || (k > 0 && (!a || !b)))
    return em_error(EM_ERR_ARG, "cpu gemm: NULL matrix pointer for [%lld x %lld] @ [%lld x %lld]",
                    (long long)m, (long long)k, (long long)k, (long long)n);
  const bool small = m <= SMALL_MNK && n <= SMALL_MNK && k <= SMALL_MNK && m * n * k <= SMALL_MNK;
  if (!small && (m > INT_MAX || n > INT_MAX || k > INT_MAX || lda > INT_MAX || ldb > INT_MAX ||
                 ldc > INT_MAX))
    return em_error(EM_ERR_UNSUPPORTED,
                    "cpu gemm: sizes m=%lld n=%lld k=%lld exceed what BLAS takes (int)",
                    (long long)m, (long long)n, (long long)k);

  if (small) {
    /* only worth a thread team when the whole batch is big */
    const bool par = batch > 1 && batch * m * n * (k + 1) > 4 * CPU_PAR_MIN;
    if (dt == EM_F32)
      CPU_FOR(par, i, batch,
        small_gemm_float(ta, tb, m, n, k, (float)alpha, (const float *)a + i * stride_a, lda,
                         (const float *)b + i * stride_b, ldb, (float)beta,
                         (float *)c + i * stride_c, ldc););
    else
      CPU_FOR(par, i, batch,
        small_gemm_double(ta, tb, m, n, k, alpha, (const double *)a + i * stride_a, lda,
                          (const double *)b + i * stride_b, ldb, beta,
                          (double *)c + i * stride_c, ldc););
    return EM_OK;
  }

  const enum CBLAS_TRANSPOSE opa = ta ? CblasTrans : CblasNoTrans;
  const enum CBLAS_TRANSPOSE opb = tb ? CblasTrans : CblasNoTrans;
  for (int64_t i = 0; i < batch; i++) {
    if (dt == EM_F32)
      cblas_sgemm(CblasRowMajor, opa, opb, (int)m, (int)n, (int)k, (float)alpha,
                  (const float *)a + i * stride_a, (int)lda, (const float *)b + i * stride_b,
                  (int)ldb, (float)beta, (float *)c + i * stride_c, (int)ldc);
    else
      cblas_dgemm(CblasRowMajor, opa, opb, (int)m, (int)n, (int)k, alpha,
                  (const double *)a + i * stride_a, (int)lda, (const double *)b + i * stride_b,
                  (int)ldb, beta, (double *)c + i * stride_c, (int)ldc);
  }
  return EM_OK;
}
