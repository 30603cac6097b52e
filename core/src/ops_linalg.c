/*
** ops_linalg.c -- em_linalg: dense factorizations and solves (Cholesky,
** LU, solve, triangular solve, QR, symmetric eigen, SVD) on the backend's
** optional linalg kernel (LAPACK on the CPU). The core checks dtypes and
** sizes, hands the kernel contiguous row-major batches and words a
** numerical failure as torch.linalg does, naming the batch element. No
** autograd here: lua/ember/linalg.lua records the gradients.
*/
#include <stdio.h>
#include <string.h>

#include "internal.h"

static const char *const DEFAULT_NAME[] = {
    [EM_LINALG_CHOLESKY] = "linalg.cholesky", [EM_LINALG_LU] = "linalg.lu_factor",
    [EM_LINALG_SOLVE] = "linalg.solve",       [EM_LINALG_TRSOLVE] = "linalg.solve_triangular",
    [EM_LINALG_QR] = "linalg.qr",             [EM_LINALG_EIGH] = "linalg.eigh",
    [EM_LINALG_SVD] = "linalg.svd",
};

/* torch's wording of a failure in batch element `elem` (0-based; named
** 1-based, as ember's indices, with the batch's size) and LAPACK info `info`. */
static em_status failure(const char *name, em_linalg_op op, int64_t batch, int64_t elem, int64_t info) {
  char where[64] = "";
  if (batch > 1) snprintf(where, sizeof where, " (Batch element %lld of %lld):", (long long)elem + 1, (long long)batch);
  switch (op) {
  case EM_LINALG_CHOLESKY:
    return em_error(EM_ERR_ARG,
                    "%s:%s The factorization could not be completed because the input is not "
                    "positive-definite (the leading minor of order %lld is not positive-definite).",
                    name, where, (long long)info);
  case EM_LINALG_LU:
  case EM_LINALG_SOLVE:
  case EM_LINALG_TRSOLVE:
    return em_error(EM_ERR_ARG,
                    "%s:%s The diagonal element %lld is zero, the %s could not be completed because "
                    "the input matrix is singular.",
                    name, where, (long long)info, op == EM_LINALG_LU ? "factorization" : "solve");
  case EM_LINALG_EIGH:
    return em_error(EM_ERR_ARG,
                    "%s:%s The algorithm failed to converge because the input matrix is "
                    "ill-conditioned or has too many repeated eigenvalues (error code: %lld).",
                    name, where, (long long)info);
  default:
    return em_error(EM_ERR_ARG,
                    "%s:%s The algorithm failed to converge because the input matrix is "
                    "ill-conditioned or has too many repeated singular values (error code: %lld).",
                    name, where, (long long)info);
  }
}

em_status em_linalg(em_tensor **out, em_linalg_op op, em_tensor *a, em_tensor *b, int flags,
                    const char *name, int64_t info[2]) {
  char b1[96], b2[96];
  out[0] = out[1] = out[2] = NULL;
  if ((unsigned)op > EM_LINALG_SVD) return em_error(EM_ERR_ARG, "linalg: unknown op %d", (int)op);
  if (!name) name = DEFAULT_NAME[op];
  if (!a) return em_error(EM_ERR_ARG, "%s: no input", name);
  const bool two = op == EM_LINALG_SOLVE || op == EM_LINALG_TRSOLVE;
  if (two && !b) return em_error(EM_ERR_ARG, "%s: no right-hand side", name);
  if (a->dtype != EM_F32 && a->dtype != EM_F64)
    return em_error(EM_ERR_DTYPE, "%s: expected a float32 or float64 tensor, got %s", name,
                    em_dtype_name(a->dtype));
  if (a->ndim < 2)
    return em_error(EM_ERR_SHAPE, "%s: the input must have at least 2 dimensions, got %s", name,
                    em_shape_str(a->ndim, a->shape, b1, sizeof b1));
  const int nd = a->ndim;
  const int64_t m = a->shape[nd - 2], n = a->shape[nd - 1];
  const bool square = op != EM_LINALG_LU && op != EM_LINALG_QR && op != EM_LINALG_SVD;
  if (square && m != n)
    return em_error(EM_ERR_SHAPE, "%s: A must be batches of square matrices, but they are %lld by %lld matrices",
                    name, (long long)m, (long long)n);
  int64_t batch = 1, k = 0;
  for (int i = 0; i < nd - 2; i++) batch *= a->shape[i];
  if (two) {
    if (b->dtype != a->dtype)
      return em_error(EM_ERR_DTYPE, "%s: expected B to have the dtype of A (%s), got %s", name,
                      em_dtype_name(a->dtype), em_dtype_name(b->dtype));
    EM_TRY(em__same_device(name, a, b));
    bool ok = b->ndim == nd && b->shape[nd - 2] == n;
    for (int i = 0; ok && i < nd - 2; i++) ok = b->shape[i] == a->shape[i];
    if (!ok)
      return em_error(EM_ERR_SHAPE, "%s: B %s does not fit A %s (expected [..., %lld, k] with A's batch dims)",
                      name, em_shape_str(b->ndim, b->shape, b1, sizeof b1),
                      em_shape_str(a->ndim, a->shape, b2, sizeof b2), (long long)n);
    k = b->shape[nd - 1];
  }
  const em_backend *be = em__be(a);
  if (!be->linalg)
    return em_error(EM_ERR_UNSUPPORTED, "%s: the '%s' backend has no linear algebra kernel (em_backend.linalg unset)",
                    name, be->name);

  /* the outputs' shapes: a's batch dims, then each output's own */
  const int64_t r = m < n ? m : n;
  const bool full = (flags & EM_LINALG_FULL) != 0;
  int64_t shp[3][EM_MAX_DIMS];
  int nout = 0, ndo[3];
  em_dtype dto[3] = {a->dtype, a->dtype, a->dtype};
#define OUT(d0, d1, two_d)                                                                          \
  do {                                                                                             \
    memcpy(shp[nout], a->shape, sizeof(int64_t) * (size_t)(nd - 2));                               \
    shp[nout][nd - 2] = (d0);                                                                      \
    if (two_d) shp[nout][nd - 1] = (d1);                                                           \
    ndo[nout++] = (two_d) ? nd : nd - 1;                                                           \
  } while (0)
  switch (op) {
  case EM_LINALG_CHOLESKY: OUT(n, n, true); break;
  case EM_LINALG_LU: OUT(m, n, true); OUT(r, 0, false); dto[1] = EM_I64; break;
  case EM_LINALG_SOLVE:
  case EM_LINALG_TRSOLVE: OUT(n, k, true); break;
  case EM_LINALG_QR:
    OUT(m, full ? m : r, true);
    OUT(full ? m : r, n, true);
    break;
  case EM_LINALG_EIGH: OUT(n, 0, false); OUT(n, n, true); break;
  case EM_LINALG_SVD:
    OUT(m, full ? m : r, true);
    OUT(r, 0, false);
    OUT(full ? n : r, n, true);
    break;
  }
#undef OUT
  em_tensor *ac = NULL, *bc = NULL, *o[3] = {NULL, NULL, NULL};
  int64_t inf[2] = {-1, 0};
  em_status s = EM_OK;
  for (int i = 0; i < nout && !s; i++) s = em__new(&o[i], ndo[i], shp[i], dto[i], a->device, name);
  const bool empty = batch == 0 || m == 0 || n == 0 || (two && k == 0);
  /* nothing to factor, but a complete Q or full U/Vh of a matrix with no
  ** columns has rows: zeros (torch gives the identity there) */
  for (int i = 0; i < nout && !s && empty; i++) s = em_fill_(o[i], 0);
  if (!s && !empty) {
    if (!(s = em__contig(&ac, a)) && two) s = em__contig(&bc, b);
    if (!s) {
      em_linalg_args args = {op, a->dtype, batch, m, n, k, (flags & EM_LINALG_UPPER) != 0,
                             (flags & EM_LINALG_UNIT) != 0, full};
      void *const po[3] = {o[0] ? em_data(o[0]) : NULL, o[1] ? em_data(o[1]) : NULL,
                           o[2] ? em_data(o[2]) : NULL};
      s = be->linalg(a->device.index, &args, po, em_data(ac), bc ? em_data(bc) : NULL, inf);
      if (s) s = em__kernel_fail(name, s);
    }
  }
  em_release(ac);
  em_release(bc);
  if (!s && inf[0] >= 0 && !info) s = failure(name, op, batch, inf[0], inf[1]);
  if (s) {
    for (int i = 0; i < 3; i++) em_release(o[i]);
    return s;
  }
  if (info) info[0] = inf[0], info[1] = inf[1];
  for (int i = 0; i < 3; i++) out[i] = o[i];
  return EM_OK;
}
