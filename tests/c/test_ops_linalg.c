/*
** test_ops_linalg.c -- em_linalg on the CPU backend's LAPACK kernel
** (em_backend.linalg): each op's outputs rebuild its input (L L^T = A,
** P L U = A, A X = B, Q R = A with Q^T Q = I, V diag(w) V^T = A with w
** ascending, U diag(S) Vh = A with S descending), float32 and float64,
** a batch of two; the numerical failures worded as torch's with the batch
** element, or handed back by info (torch's *_ex); bad dtypes and shapes
** refused; an empty batch. Values against PyTorch: tests/lua/linalg_spec.lua.
*/
#include "ember.h"
#include "tap.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static em_device cpu;

/* a fixed spread of values in [-1.5, -0.5] and [0.5, 1.5] */
static double weight(int64_t i) {
  uint64_t z = (uint64_t)i * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z ^= z >> 31;
  double u = (double)(z >> 11) / 9007199254740992.0;
  return (z & 1) ? 0.5 + u : -0.5 - u;
}

/* a tensor's values as doubles, malloc'd */
static double *host(const em_tensor *t) {
  double *v = malloc(sizeof(double) * (size_t)(em_numel(t) > 0 ? em_numel(t) : 1));
  em_tensor *c = NULL;
  if (!v || em_to_dtype(&c, (em_tensor *)t, EM_F64) || em_to_host(c, v)) {
    printf("# host failed: %s\n", em_error_message());
    exit(2);
  }
  em_release(c);
  return v;
}

static em_tensor *make(em_dtype dt, int nd, const int64_t *shape, const double *v) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++) n *= shape[i];
  em_tensor *d = NULL, *t = NULL;
  if (em_from_host(&d, nd, shape, EM_F64, v, cpu) || (dt != EM_F64 && em_to_dtype(&t, d, dt))) {
    printf("# make failed: %s\n", em_error_message());
    exit(2);
  }
  if (dt == EM_F64) return d;
  em_release(d);
  return t;
}

/* max |x - y| over n values */
static double maxdiff(const double *x, const double *y, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(x[i] - y[i]));
  return m;
}

/* c [m, p] = a [m, k] b [k, p], row-major; tb: b is given as [p, k] (b^T) */
static void mm(double *c, const double *a, const double *b, int m, int k, int p, bool tb) {
  for (int i = 0; i < m; i++)
    for (int j = 0; j < p; j++) {
      double s = 0;
      for (int l = 0; l < k; l++) s += a[i * k + l] * (tb ? b[j * k + l] : b[l * p + j]);
      c[i * p + j] = s;
    }
}

/* two symmetric positive-definite 4 x 4 matrices: M M^T + 4 I */
static void spd(double *a) {
  for (int e = 0; e < 2; e++) {
    double m[16];
    for (int i = 0; i < 16; i++) m[i] = weight(e * 16 + i);
    mm(a + 16 * e, m, m, 4, 4, 4, true);
    for (int i = 0; i < 4; i++) a[16 * e + 5 * i] += 4;
  }
}

static void test_square(em_dtype dt, double tol) {
  const char *dn = em_dtype_name(dt);
  char name[96];
  double av[32], bv[16], r[32];
  spd(av);
  for (int i = 0; i < 16; i++) bv[i] = weight(100 + i);
  const int64_t sa[3] = {2, 4, 4}, sb[3] = {2, 4, 2};
  em_tensor *a = make(dt, 3, sa, av), *b = make(dt, 3, sb, bv), *o[3];

  snprintf(name, sizeof name, "cholesky %s: L lower, L L^T = A", dn);
  CHECK_OK(em_linalg(o, EM_LINALG_CHOLESKY, a, NULL, 0, NULL, NULL), name);
  double *l = host(o[0]);
  bool lower = o[1] == NULL && o[0]->ndim == 3;
  for (int e = 0; e < 2; e++) {
    mm(r + 16 * e, l + 16 * e, l + 16 * e, 4, 4, 4, true);
    for (int i = 0; i < 4; i++)
      for (int j = i + 1; j < 4; j++) lower = lower && l[16 * e + 4 * i + j] == 0;
  }
  CHECK(lower && maxdiff(r, av, 32) < tol, name);
  free(l), em_release(o[0]);

  snprintf(name, sizeof name, "eigh %s: w ascending, V diag(w) V^T = A", dn);
  CHECK_OK(em_linalg(o, EM_LINALG_EIGH, a, NULL, 0, NULL, NULL), name);
  double *w = host(o[0]), *v = host(o[1]), vw[32];
  bool asc = o[0]->ndim == 2 && o[0]->shape[1] == 4;
  for (int e = 0; e < 2; e++) {
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 4; j++) vw[16 * e + 4 * i + j] = v[16 * e + 4 * i + j] * w[4 * e + j];
    mm(r + 16 * e, vw + 16 * e, v + 16 * e, 4, 4, 4, true);
    for (int i = 0; i < 3; i++) asc = asc && w[4 * e + i] < w[4 * e + i + 1];
  }
  CHECK(asc && maxdiff(r, av, 32) < tol, name);
  free(w), free(v), em_release(o[0]), em_release(o[1]);

  snprintf(name, sizeof name, "solve %s: A X = B", dn);
  CHECK_OK(em_linalg(o, EM_LINALG_SOLVE, a, b, 0, NULL, NULL), name);
  double *x = host(o[0]);
  for (int e = 0; e < 2; e++) mm(r + 8 * e, av + 16 * e, x + 8 * e, 4, 4, 2, false);
  CHECK(maxdiff(r, bv, 16) < tol, name);
  free(x), em_release(o[0]);

  snprintf(name, sizeof name, "solve_triangular %s: upper, lower and unit diagonal", dn);
  bool tri = true;
  for (int f = 0; f < 4; f++) {
    CHECK_OK(em_linalg(o, EM_LINALG_TRSOLVE, a, b, f, NULL, NULL), name);
    x = host(o[0]);
    double t[32];
    for (int e = 0; e < 2; e++)
      for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
          const bool keep = (f & EM_LINALG_UPPER) ? j >= i : j <= i;
          t[16 * e + 4 * i + j] = i == j && (f & EM_LINALG_UNIT) ? 1 : keep ? av[16 * e + 4 * i + j] : 0;
        }
    for (int e = 0; e < 2; e++) mm(r + 8 * e, t + 16 * e, x + 8 * e, 4, 4, 2, false);
    tri = tri && maxdiff(r, bv, 16) < tol;
    free(x), em_release(o[0]);
  }
  CHECK(tri, name);

  snprintf(name, sizeof name, "lu %s: P L U = A, 1-based int64 pivots", dn);
  CHECK_OK(em_linalg(o, EM_LINALG_LU, a, NULL, 0, NULL, NULL), name);
  double *lu = host(o[0]);
  int64_t piv[8];
  bool ok = o[1]->dtype == EM_I64 && em_to_host(o[1], piv) == EM_OK;
  for (int e = 0; ok && e < 2; e++) {
    double L[16], U[16], pa[16];
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 4; j++) {
        L[4 * i + j] = i == j ? 1 : j < i ? lu[16 * e + 4 * i + j] : 0;
        U[4 * i + j] = j >= i ? lu[16 * e + 4 * i + j] : 0;
      }
    mm(r, L, U, 4, 4, 4, false);
    memcpy(pa, av + 16 * e, sizeof pa); /* apply the row swaps to A */
    for (int i = 0; i < 4; i++) {
      int p = (int)piv[4 * e + i] - 1;
      ok = ok && p >= i && p < 4;
      for (int j = 0; ok && j < 4; j++) {
        double s = pa[4 * i + j];
        pa[4 * i + j] = pa[4 * p + j], pa[4 * p + j] = s;
      }
    }
    ok = ok && maxdiff(r, pa, 16) < tol;
  }
  CHECK(ok, name);
  free(lu), em_release(o[0]), em_release(o[1]);
  em_release(a), em_release(b);
}

static void test_rect(em_dtype dt, double tol) {
  const char *dn = em_dtype_name(dt);
  char name[96];
  double av[2 * 5 * 3], r[30];
  for (int i = 0; i < 30; i++) av[i] = weight(200 + i);
  for (int wide = 0; wide < 2; wide++) {
    const int m = wide ? 3 : 5, n = wide ? 5 : 3, k = 3;
    const int64_t sa[3] = {2, m, n};
    em_tensor *a = make(dt, 3, sa, av), *o[3];
    snprintf(name, sizeof name, "qr %s %dx%d: Q [m, k] orthonormal, R upper [k, n], Q R = A", dn, m, n);
    CHECK_OK(em_linalg(o, EM_LINALG_QR, a, NULL, 0, NULL, NULL), name);
    double *q = host(o[0]), *rr = host(o[1]), qtq[9];
    bool ok = o[0]->shape[2] == k && o[1]->shape[1] == k && o[1]->shape[2] == n;
    for (int e = 0; e < 2; e++) {
      mm(r + 15 * e, q + m * k * e, rr + k * n * e, m, k, n, false);
      for (int i = 0; i < k; i++)
        for (int j = 0; j < i; j++) ok = ok && rr[k * n * e + n * i + j] == 0;
      for (int i = 0; i < k; i++)
        for (int j = 0; j < k; j++) {
          double s = 0;
          for (int l = 0; l < m; l++) s += q[m * k * e + k * l + i] * q[m * k * e + k * l + j];
          qtq[3 * i + j] = s - (i == j);
        }
      ok = ok && maxdiff(qtq, (double[9]){0}, 9) < tol;
    }
    CHECK(ok && maxdiff(r, av, 30) < tol, name);
    free(q), free(rr), em_release(o[0]), em_release(o[1]);

    snprintf(name, sizeof name, "svd %s %dx%d: U diag(S) Vh = A, S descending", dn, m, n);
    CHECK_OK(em_linalg(o, EM_LINALG_SVD, a, NULL, 0, NULL, NULL), name);
    double *u = host(o[0]), *s = host(o[1]), *vh = host(o[2]);
    ok = o[0]->shape[2] == k && o[1]->shape[1] == k && o[2]->shape[1] == k && o[2]->shape[2] == n;
    for (int e = 0; e < 2; e++) {
      double us[15];
      for (int i = 0; i < m; i++)
        for (int j = 0; j < k; j++) us[k * i + j] = u[m * k * e + k * i + j] * s[k * e + j];
      mm(r + 15 * e, us, vh + k * n * e, m, k, n, false);
      ok = ok && s[k * e] > s[k * e + 1] && s[k * e + 1] > s[k * e + 2] && s[k * e + 2] > 0;
    }
    CHECK(ok && maxdiff(r, av, 30) < tol, name);
    free(u), free(s), free(vh), em_release(o[0]), em_release(o[1]), em_release(o[2]);
    em_release(a);
  }
}

/* complete QR and full SVD of a tall 5 x 3 and a wide 3 x 5 matrix: square
** orthogonal Q, U, Vh; Q R = A with R [m, n]; the reduced outputs their
** leading columns (LAPACK's signs) */
static void test_full(void) {
  double av[15], r[25];
  for (int i = 0; i < 15; i++) av[i] = weight(300 + i);
  for (int wide = 0; wide < 2; wide++) {
    const int m = wide ? 3 : 5, n = wide ? 5 : 3;
    const int64_t sa[2] = {m, n};
    em_tensor *a = make(EM_F64, 2, sa, av), *o[3], *red[3];
    CHECK_OK(em_linalg(o, EM_LINALG_QR, a, NULL, EM_LINALG_FULL, NULL, NULL), "complete qr");
    CHECK_OK(em_linalg(red, EM_LINALG_QR, a, NULL, 0, NULL, NULL), "reduced qr");
    double *q = host(o[0]), *rr = host(o[1]), *q0 = host(red[0]), qtq[25];
    bool ok = o[0]->shape[0] == m && o[0]->shape[1] == m && o[1]->shape[0] == m && o[1]->shape[1] == n;
    mm(r, q, rr, m, m, n, false);
    mm(qtq, q, q, m, m, m, true);
    for (int i = 0; i < m; i++) qtq[i * m + i] -= 1;
    for (int i = 0; i < m; i++)
      for (int j = 0; j < (m < n ? m : n); j++) ok = ok && fabs(q[i * m + j] - q0[i * (m < n ? m : n) + j]) < 1e-12;
    CHECK(ok && maxdiff(r, av, m * n) < 1e-12 && maxdiff(qtq, (double[25]){0}, m * m) < 1e-12,
          wide ? "complete qr 3x5: Q R = A, Q orthogonal" : "complete qr 5x3: Q [5, 5] orthogonal, Q R = A");
    free(q), free(rr), free(q0), em_release(o[0]), em_release(o[1]), em_release(red[0]), em_release(red[1]);

    CHECK_OK(em_linalg(o, EM_LINALG_SVD, a, NULL, EM_LINALG_FULL, NULL, NULL), "full svd");
    double *u = host(o[0]), *s = host(o[1]), *vh = host(o[2]), uu[25], vv[25], us[15];
    ok = o[0]->shape[1] == m && o[2]->shape[0] == n && o[1]->shape[0] == 3;
    mm(uu, u, u, m, m, m, true);
    mm(vv, vh, vh, n, n, n, true);
    for (int i = 0; i < m; i++) uu[i * m + i] -= 1;
    for (int i = 0; i < n; i++) vv[i * n + i] -= 1;
    for (int i = 0; i < m; i++)
      for (int j = 0; j < 3; j++) us[3 * i + j] = u[m * i + j] * s[j];
    mm(r, us, vh, m, 3, n, false); /* the first 3 rows of Vh */
    ok = ok && maxdiff(uu, (double[25]){0}, m * m) < 1e-12 && maxdiff(vv, (double[25]){0}, n * n) < 1e-12;
    CHECK(ok && maxdiff(r, av, m * n) < 1e-12, wide ? "full svd 3x5: U, Vh orthogonal, U S Vh = A"
                                                   : "full svd 5x3: U [5, 5], Vh orthogonal, U S Vh = A");
    free(u), free(s), free(vh), em_release(o[0]), em_release(o[1]), em_release(o[2]);
    em_release(a);
  }
}

static void test_failures(void) {
  double av[32], sing[16] = {1, 2, 3, 4, 2, 4, 6, 8, 0, 1, 0, 1, 1, 0, 0, 1};
  spd(av);
  for (int i = 0; i < 16; i++) av[16 + i] = -av[16 + i]; /* the second one is negative definite */
  const int64_t sa[3] = {2, 4, 4}, s2[2] = {4, 4}, sb[3] = {2, 4, 1};
  em_tensor *a = make(EM_F64, 3, sa, av), *o[3], *b = make(EM_F64, 3, sb, av);
  CHECK_ERR(em_linalg(o, EM_LINALG_CHOLESKY, a, NULL, 0, NULL, NULL), EM_ERR_ARG,
            "linalg.cholesky: (Batch element 2 of 2): The factorization could not be completed because the "
            "input is not positive-definite (the leading minor of order 1 is not positive-definite).",
            "cholesky: torch's words, naming the batch element");
  CHECK(o[0] == NULL, "cholesky: no output on failure");
  int64_t info[2];
  CHECK_OK(em_linalg(o, EM_LINALG_CHOLESKY, a, NULL, 0, NULL, info), "cholesky with info");
  CHECK(o[0] && info[0] == 1 && info[1] == 1, "cholesky with info: element 1 (0-based) fails at order 1");
  em_release(o[0]);
  em_tensor *s = make(EM_F64, 2, s2, sing), *sb1 = NULL;
  const int64_t sbs[2] = {4, 1};
  sb1 = make(EM_F64, 2, sbs, av);
  CHECK_ERR(em_linalg(o, EM_LINALG_SOLVE, s, sb1, 0, "linalg.inv", NULL), EM_ERR_ARG,
            "linalg.inv: The diagonal element 4 is zero, the solve could not be completed because the input "
            "matrix is singular.",
            "solve of a singular matrix: named by the caller's name, the zero pivot");
  CHECK_OK(em_linalg(o, EM_LINALG_LU, s, NULL, 0, NULL, info), "lu of a singular matrix completes");
  CHECK(info[0] == 0 && info[1] == 4, "lu of a singular matrix: its zero pivot in info");
  em_release(o[0]), em_release(o[1]);
  CHECK_ERR(em_linalg(o, EM_LINALG_LU, s, NULL, 0, NULL, NULL), EM_ERR_ARG, "the factorization could not",
            "lu without info: singular is an error");

  em_tensor *bf = NULL, *i64 = NULL, *v = NULL;
  em_to_dtype(&bf, a, EM_BF16);
  em_to_dtype(&i64, a, EM_I64);
  CHECK_ERR(em_linalg(o, EM_LINALG_EIGH, bf, NULL, 0, NULL, NULL), EM_ERR_DTYPE,
            "linalg.eigh: expected a float32 or float64 tensor, got bfloat16", "bfloat16 refused");
  CHECK_ERR(em_linalg(o, EM_LINALG_SVD, i64, NULL, 0, NULL, NULL), EM_ERR_DTYPE, "got int64", "int64 refused");
  const int64_t s34[2] = {3, 4}, s4[1] = {4};
  em_tensor *rect = make(EM_F64, 2, s34, av);
  v = make(EM_F64, 1, s4, av);
  CHECK_ERR(em_linalg(o, EM_LINALG_CHOLESKY, rect, NULL, 0, NULL, NULL), EM_ERR_SHAPE,
            "linalg.cholesky: A must be batches of square matrices, but they are 3 by 4 matrices", "non-square");
  CHECK_ERR(em_linalg(o, EM_LINALG_QR, v, NULL, 0, NULL, NULL), EM_ERR_SHAPE, "at least 2 dimensions", "1-d");
  CHECK_ERR(em_linalg(o, EM_LINALG_SOLVE, a, sb1, 0, NULL, NULL), EM_ERR_SHAPE, "does not fit A",
            "B without A's batch dims");
  CHECK_ERR(em_linalg(o, EM_LINALG_SOLVE, a, NULL, 0, NULL, NULL), EM_ERR_ARG, "no right-hand side", "no B");
  const int64_t se[3] = {0, 3, 3};
  em_tensor *empty = make(EM_F64, 3, se, av);
  CHECK_OK(em_linalg(o, EM_LINALG_SVD, empty, NULL, 0, NULL, NULL), "an empty batch");
  CHECK(o[0] && o[0]->shape[0] == 0 && o[1]->ndim == 2 && o[2]->shape[2] == 3, "an empty batch: empty outputs");
  for (int i = 0; i < 3; i++) em_release(o[i]);
  em_release(a), em_release(b), em_release(s), em_release(sb1), em_release(bf), em_release(i64);
  em_release(rect), em_release(v), em_release(empty);
}

int main(void) {
  if (em_cpu_device(&cpu) != EM_OK) {
    printf("not ok 1 - cpu backend: %s\n0 passed, 1 failed\n", em_error_message());
    return 1;
  }
  test_square(EM_F64, 1e-12);
  test_square(EM_F32, 1e-4);
  test_rect(EM_F64, 1e-12);
  test_rect(EM_F32, 1e-5);
  test_full();
  test_failures();
  return tap_done();
}
