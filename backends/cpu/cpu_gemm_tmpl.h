/*
** cpu_gemm_tmpl.h -- the plain-loop product for tiny matrices, for one
** float type; included by cpu_gemm.c with T (float or double) and SUF set.
*/

#define FN(name) CPU_CAT(name, SUF)

/* C = alpha * op(A) @ op(B) + beta * C for one small matrix; a row of
** C is accumulated in acc[] first. beta == 0 never reads C (BLAS rule). */
static void FN(small_gemm)(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha,
                           const T *a, int64_t lda, const T *b, int64_t ldb, T beta, T *c,
                           int64_t ldc) {
  T acc[SMALL_MNK];
  for (int64_t i = 0; i < m; i++) {
    for (int64_t j = 0; j < n; j++) acc[j] = 0;
    if (!tb) {
      for (int64_t p = 0; p < k; p++) {
        const T aip = ta ? a[p * lda + i] : a[i * lda + p];
        const T *brow = b + p * ldb;
        for (int64_t j = 0; j < n; j++) acc[j] += aip * brow[j];
      }
    } else {
      for (int64_t j = 0; j < n; j++) {
        const T *bcol = b + j * ldb; /* row j of B is column j of op(B) */
        T sum = 0;
        if (ta)
          for (int64_t p = 0; p < k; p++) sum += a[p * lda + i] * bcol[p];
        else
          for (int64_t p = 0; p < k; p++) sum += a[i * lda + p] * bcol[p];
        acc[j] = sum;
      }
    }
    T *crow = c + i * ldc;
    if (beta == 0)
      for (int64_t j = 0; j < n; j++) crow[j] = alpha * acc[j];
    else
      for (int64_t j = 0; j < n; j++) crow[j] = alpha * acc[j] + beta * crow[j];
  }
}

#undef FN
