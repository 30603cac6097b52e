/*
** cpu_linalg_tmpl.h -- one dtype's em_backend.linalg (cpu_linalg.c
** includes it with T = float, L(x) = s##x and T = double, L(x) = d##x).
** Each matrix is copied into column-major scratch (LAPACK's layout), the
** routine runs there, and the outputs are copied back row-major: the
** copies are O(n^2) beside the O(n^3) factorization.
*/

/* column-major scratch c (ld rows) <- row-major x [rows, cols], and back */
static void LF(to_cm)(T *c, const T *x, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) c[i + j * rows] = x[i * cols + j];
}
static void LF(from_cm)(T *y, const T *c, int64_t ld, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) y[i * cols + j] = c[i + j * ld];
}

static em_status LF(run)(const em_linalg_args *a, void *const *out, const void *xv, const void *bv,
                         int64_t info[2]) {
  const T *x = xv, *b = bv;
  int m = (int)a->m, n = (int)a->n, k = (int)a->k, r = m < n ? m : n, lapack_info = 0;
  int lwork = -1, liwork = -1, iw1 = 0;
  const int64_t mn = a->m * a->n;
  /* QR complete: orgqr makes m columns of Q in A; SVD full: U [m, m], Vh [n, n] */
  const int qc = a->full ? m : r, ur = a->full ? m : r, vr = a->full ? n : r;
  T w1 = 0;
  T *A = malloc(sizeof(T) * (size_t)(a->op == EM_LINALG_QR && a->full && m > n ? a->m * a->m : mn)), *B = NULL, *V1 = NULL, *V2 = NULL, *work = NULL;
  int *iwork = NULL;
  em_status s = EM_OK;
  if (!A) goto oom;
  /* workspace sizes (LAPACK's queries) and the second operands */
  switch (a->op) {
  case EM_LINALG_LU:
  case EM_LINALG_SOLVE:
    if (!(iwork = malloc(sizeof(int) * (size_t)(r > 0 ? r : 1)))) goto oom;
    if (a->op == EM_LINALG_SOLVE && !(B = malloc(sizeof(T) * (size_t)(a->n * a->k)))) goto oom;
    break;
  case EM_LINALG_TRSOLVE:
    if (!(B = malloc(sizeof(T) * (size_t)(a->n * a->k)))) goto oom;
    break;
  case EM_LINALG_QR: {
    int lw2 = -1;
    T w2 = 0;
    if (!(V1 = malloc(sizeof(T) * (size_t)r))) goto oom; /* tau */
    L(geqrf_)(&m, &n, A, &m, V1, &w1, &lwork, &lapack_info);
    L(orgqr_)(&m, &qc, &r, A, &m, V1, &w2, &lw2, &lapack_info);
    lwork = (int)(w1 > w2 ? w1 : w2) + 1;
    break;
  }
  case EM_LINALG_EIGH:
    L(syevd_)("V", "L", &n, A, &n, NULL, &w1, &lwork, &iw1, &liwork, &lapack_info, 1, 1);
    lwork = (int)w1 + 1;
    liwork = iw1 + 1;
    if (!(iwork = malloc(sizeof(int) * (size_t)liwork))) goto oom;
    break;
  case EM_LINALG_SVD:
    if (!(V1 = malloc(sizeof(T) * (size_t)(a->m * ur))) || !(V2 = malloc(sizeof(T) * (size_t)(vr * a->n))) ||
        !(iwork = malloc(sizeof(int) * (size_t)(8 * r))))
      goto oom;
    L(gesdd_)(a->full ? "A" : "S", &m, &n, A, &m, NULL, V1, &m, V2, &vr, &w1, &lwork, iwork, &lapack_info, 1);
    lwork = (int)w1 + 1;
    break;
  default:
    break;
  }
  if (lwork > 0 && !(work = malloc(sizeof(T) * (size_t)lwork))) goto oom;

  info[0] = -1, info[1] = 0;
  for (int64_t e = 0; e < a->batch; e++) {
    LF(to_cm)(A, x + e * mn, a->m, a->n);
    lapack_info = 0;
    switch (a->op) {
    case EM_LINALG_CHOLESKY: {
      L(potrf_)("L", &n, A, &n, &lapack_info, 1);
      T *y = (T *)out[0] + e * mn;
      for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) y[i * n + j] = j <= i ? A[i + j * n] : 0;
      break;
    }
    case EM_LINALG_LU: {
      L(getrf_)(&m, &n, A, &m, iwork, &lapack_info);
      LF(from_cm)((T *)out[0] + e * mn, A, m, m, n);
      int64_t *p = (int64_t *)out[1] + e * r;
      for (int i = 0; i < r; i++) p[i] = iwork[i];
      if (lapack_info > 0 && info[0] < 0) info[0] = e, info[1] = lapack_info;
      lapack_info = 0; /* a singular LU is complete: go on */
      break;
    }
    case EM_LINALG_SOLVE:
      LF(to_cm)(B, b + e * a->n * a->k, n, k);
      L(getrf_)(&n, &n, A, &n, iwork, &lapack_info);
      if (!lapack_info) L(getrs_)("N", &n, &k, A, &n, iwork, B, &n, &lapack_info, 1);
      if (!lapack_info) LF(from_cm)((T *)out[0] + e * a->n * a->k, B, n, n, k);
      break;
    case EM_LINALG_TRSOLVE:
      LF(to_cm)(B, b + e * a->n * a->k, n, k);
      L(trtrs_)(a->upper ? "U" : "L", "N", a->unitriangular ? "U" : "N", &n, &k, A, &n, B, &n, &lapack_info,
                1, 1, 1);
      if (!lapack_info) LF(from_cm)((T *)out[0] + e * a->n * a->k, B, n, n, k);
      break;
    case EM_LINALG_QR: {
      L(geqrf_)(&m, &n, A, &m, V1, work, &lwork, &lapack_info);
      if (lapack_info) break;
      T *R = (T *)out[1] + e * qc * a->n;
      for (int64_t i = 0; i < qc; i++)
        for (int64_t j = 0; j < n; j++) R[i * n + j] = j >= i ? A[i + j * m] : 0;
      L(orgqr_)(&m, &qc, &r, A, &m, V1, work, &lwork, &lapack_info);
      if (!lapack_info) LF(from_cm)((T *)out[0] + e * a->m * qc, A, m, m, qc);
      break;
    }
    case EM_LINALG_EIGH:
      L(syevd_)("V", "L", &n, A, &n, (T *)out[0] + e * n, work, &lwork, iwork, &liwork, &lapack_info, 1, 1);
      if (!lapack_info) LF(from_cm)((T *)out[1] + e * mn, A, n, n, n);
      break;
    case EM_LINALG_SVD:
      L(gesdd_)(a->full ? "A" : "S", &m, &n, A, &m, (T *)out[1] + e * r, V1, &m, V2, &vr, work, &lwork, iwork,
                &lapack_info, 1);
      if (lapack_info) break;
      LF(from_cm)((T *)out[0] + e * a->m * ur, V1, m, m, ur);
      LF(from_cm)((T *)out[2] + e * vr * a->n, V2, vr, vr, n);
      break;
    }
    if (lapack_info < 0) {
      s = em_error(EM_ERR_BACKEND, "cpu linalg: LAPACK rejected argument %d (op %d)", -lapack_info, (int)a->op);
      break;
    }
    if (lapack_info > 0) {
      info[0] = e, info[1] = lapack_info;
      break;
    }
  }
  goto done;
oom:
  s = em_error(EM_ERR_OOM, "cpu linalg: out of memory for the LAPACK scratch (%lld by %lld matrices)",
               (long long)a->m, (long long)a->n);
done:
  free(A), free(B), free(V1), free(V2), free(work), free(iwork);
  return s;
}
