/*
** test_backend_cpu_gemm.c -- matrix products, float and bfloat16.
** Checks the CPU backend plugin's kernels against straightforward
** reference loops (in double), and their error paths; backend_cpu.h has
** the harness.
*/
#include "backend_cpu.h"

/* ---- gemm ---- */

static void gemm_case(em_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t batch,
                      double beta) {
  int64_t lda = (ta ? m : k) + 1, ldb = (tb ? k : n) + 2, ldc = n + 3;
  int64_t sa = (ta ? k : m) * lda + 5, sb = (tb ? n : k) * ldb, sc = m * ldc + 1;
  double *ad = xmalloc(batch * sa * 8), *bd = xmalloc(batch * sb * 8),
         *cd = xmalloc(batch * sc * 8);
  void *a = rand_arr(dt, batch * sa, -1, 1, ad), *b = rand_arr(dt, batch * sb, -1, 1, bd);
  void *c = rand_arr(dt, batch * sc, -1, 1, cd);
  double *want = xmalloc(batch * sc * 8);
  memcpy(want, cd, batch * sc * 8);
  if (beta == 0) /* NaN in C must not leak through beta = 0 */
    for (int64_t i = 0; i < batch * sc; i += 3) {
      if (dt == EM_F32)
        ((float *)c)[i] = NAN;
      else
        ((double *)c)[i] = NAN;
      want[i] = NAN;
    }
  const double alpha = 0.75;
  for (int64_t q = 0; q < batch; q++)
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double s = 0;
        for (int64_t p = 0; p < k; p++)
          s += ad[q * sa + (ta ? p * lda + i : i * lda + p)] *
               bd[q * sb + (tb ? j * ldb + p : p * ldb + j)];
        double *w = &want[q * sc + i * ldc + j];
        *w = alpha * s + (beta == 0 ? 0 : beta * cd[q * sc + i * ldc + j]);
      }
  em_status s =
      be->gemm(0, dt, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch);
  double tol = dt == EM_F32 ? 1e-4 : 1e-12;
  check(s == EM_OK && close_to("gemm", c, dt, want, batch * sc, tol, tol),
        "gemm %s ta=%d tb=%d m=%lld n=%lld k=%lld batch=%lld beta=%g", dtn(dt), ta, tb,
        (long long)m, (long long)n, (long long)k, (long long)batch, beta);
  free(ad);
  free(bd);
  free(cd);
  free(a);
  free(b);
  free(c);
  free(want);
}

static void test_gemm(void) {
  for (int t = 0; t < 4; t++)
    for (int k = 0; k < 2; k++) {
      em_dtype dt = k ? EM_F64 : EM_F32;
      gemm_case(dt, t & 1, t & 2, 3, 5, 4, 3, 0.5);   /* plain loops */
      gemm_case(dt, t & 1, t & 2, 70, 300, 40, 2, 0); /* BLAS */
    }
  gemm_case(EM_F32, false, false, 64, 64, 64, 2, 0);
  gemm_case(EM_F64, true, false, 1, 1, 0, 1, 0.5);
  /* one product split over threads: into row blocks (tall C) and column
  ** blocks (wide C), under every transpose, with beta reading C */
  be->set_num_threads(3);
  for (int t = 0; t < 4; t++) {
    gemm_case(EM_F32, t & 1, t & 2, 301, 70, 40, 1, 0.5);
    gemm_case(EM_F64, t & 1, t & 2, 70, 301, 40, 1, 0.5);
  }
  /* matrix-vector products (gemv): one row or one column of C, strided
  ** x and y, small and split over threads, one product and a batch */
  for (int t = 0; t < 4; t++)
    for (int k = 0; k < 2; k++) {
      em_dtype dt = k ? EM_F64 : EM_F32;
      gemm_case(dt, t & 1, t & 2, 1, 37, 20, 1, 0);
      gemm_case(dt, t & 1, t & 2, 37, 1, 20, 3, 0.5);
      gemm_case(dt, t & 1, t & 2, 1, 301, 300, 1, 0.5);
      gemm_case(dt, t & 1, t & 2, 301, 1, 300, 2, 0);
      gemm_case(dt, t & 1, t & 2, 1, 150, 120, 5, 0);
    }
  be->set_num_threads(2);
  float z[4];
  check(
      be->gemm(0, EM_F32, false, false, 2, 2, 2, 1, z, 1, 0, z, 2, 0, 0, z, 2, 0, 1) == EM_ERR_ARG,
      "gemm with lda too small is an argument error");
  check(be->gemm(0, EM_I64, false, false, 2, 2, 2, 1, z, 2, 0, z, 2, 0, 0, z, 2, 0, 1) ==
                EM_ERR_DTYPE &&
            msg_has("gemm", "int64"),
        "gemm on int64 is a dtype error: %s", em_error_message());
}

/* ---- bfloat16 compute ---- */

/* bf16 products (oneDNN) and the float32 ones large enough for oneDNN,
** every transpose, alpha and beta, against double loops on the same
** (rounded) inputs. One rounding of a float32-accumulated result: within
** 2^-8 of the largest |C|. Also runs oneDNN's JIT under valgrind/ASan. */
static void bf16_case(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t batch) {
  /* padded leading dimensions: a gemv's x and y are strided */
  const int64_t lda = (ta ? m : k) + 1, ldb = (tb ? k : n) + 2, ldc = n + 3;
  const int64_t sa = (ta ? k : m) * lda, sb = (tb ? n : k) * ldb, sc = m * ldc;
  double *A = xmalloc(batch * sa * 8), *B = xmalloc(batch * sb * 8), *C0 = xmalloc(batch * sc * 8),
         *want = xmalloc(batch * sc * 8);
  uint16_t *a = rand_bf16(batch * sa, A), *b = rand_bf16(batch * sb, B),
           *c = rand_bf16(batch * sc, C0);
  double big = 0;
  for (int64_t q = 0; q < batch; q++)
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double acc = 0;
        for (int64_t p = 0; p < k; p++) {
          double x = ta ? A[q * sa + p * lda + i] : A[q * sa + i * lda + p];
          double y = tb ? B[q * sb + j * ldb + p] : B[q * sb + p * ldb + j];
          acc += x * y;
        }
        double v = 0.5 * acc + 0.25 * C0[q * sc + i * ldc + j];
        want[q * sc + i * ldc + j] = v;
        if (fabs(v) > big) big = fabs(v);
      }
  em_status s = be->gemm(0, EM_BF16, ta, tb, m, n, k, 0.5, a, lda, sa, b, ldb, sb, 0.25, c, ldc,
                         sc, batch);
  double worst = 0, gap = 0;
  for (int64_t q = 0; s == EM_OK && q < batch; q++)
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < ldc; j++) {
        const int64_t at = q * sc + i * ldc + j;
        if (j < n)
          worst = fmax(worst, fabs(em_bf16_to_f32(c[at]) - want[at]));
        else /* the padding between rows is never written */
          gap = fmax(gap, fabs(em_bf16_to_f32(c[at]) - C0[at]));
      }
  check(s == EM_OK && worst <= big / 256 && gap == 0,
        "bf16 gemm ta=%d tb=%d %lldx%lldx%lld batch %lld, alpha, beta: error %.3g of %.3g, padding "
        "moved %.3g (%s)", ta, tb, (long long)m, (long long)n, (long long)k, (long long)batch,
        worst, big, gap, s ? em_error_message() : "ok");
  free(A), free(B), free(C0), free(want), free(a), free(b), free(c);
}

static void test_bf16_gemm(void) {
  for (int t = 0; t < 4; t++) {
    bool ta = t & 1, tb = t & 2;
    bf16_case(ta, tb, 37, 45, 29, 3);
    /* gemv (our loops): one row or column of C, small and split over threads */
    bf16_case(ta, tb, 1, 45, 29, 3);
    bf16_case(ta, tb, 45, 1, 37, 2);
    bf16_case(ta, tb, 1, 400, 700, 2);
    bf16_case(ta, tb, 400, 1, 700, 1);
  }
  /* float32 at 160^3 (past the oneDNN threshold) */
  const int64_t N = 160;
  double *A = xmalloc(N * N * 8), *B = xmalloc(N * N * 8), *want = xmalloc(N * N * 8);
  float *a = rand_arr(EM_F32, N * N, -1, 1, A), *b = rand_arr(EM_F32, N * N, -1, 1, B);
  float *c = xmalloc(N * N * 4);
  for (int64_t i = 0; i < N; i++)
    for (int64_t j = 0; j < N; j++) {
      double acc = 0;
      for (int64_t p = 0; p < N; p++) acc += A[i * N + p] * B[j * N + p];
      want[i * N + j] = acc;
    }
  em_status s = be->gemm(0, EM_F32, false, true, N, N, N, 1, a, N, 0, b, N, 0, 0, c, N, 0, 1);
  check(s == EM_OK && close_to("f32 gemm 160^3", c, EM_F32, want, N * N, 1e-4, 1e-4),
        "float32 gemm 160^3, B transposed (oneDNN by the rule)");
  free(A), free(B), free(want), free(a), free(b), free(c);
}

/* gemm_bias against the same product with C filled by the bias and beta = 1
** (what the core ran before gemm_bias): the bias joins the float32 sum the
** same way on every route (oneDNN's bias argument for bfloat16 and large
** float32, the fill and the product elsewhere), so the bits are equal. */
static void gemm_bias_case(em_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k) {
  const int64_t lda = (ta ? m : k) + 1, ldb = (tb ? k : n) + 2, ldc = n + 3, es = esize(dt);
  const int64_t na = (ta ? k : m) * lda, nb = (tb ? n : k) * ldb;
  void *a = dt == EM_BF16 ? (void *)rand_bf16(na, NULL) : rand_arr(dt, na, -1, 1, NULL);
  void *b = dt == EM_BF16 ? (void *)rand_bf16(nb, NULL) : rand_arr(dt, nb, -1, 1, NULL);
  void *bias = dt == EM_BF16 ? (void *)rand_bf16(n, NULL) : rand_arr(dt, n, -4, 4, NULL);
  char *c1 = calloc((size_t)(m * ldc), (size_t)es), *c2 = calloc((size_t)(m * ldc), (size_t)es);
  for (int64_t i = 0; i < m; i++) memcpy(c2 + i * ldc * es, bias, (size_t)(n * es));
  em_status s1 = be->gemm_bias(0, dt, ta, tb, m, n, k, a, lda, b, ldb, bias, c1, ldc);
  em_status s2 = be->gemm(0, dt, ta, tb, m, n, k, 1, a, lda, 0, b, ldb, 0, 1, c2, ldc, 0, 1);
  int differ = 0;
  for (int64_t i = 0; i < m; i++) differ += memcmp(c1 + i * ldc * es, c2 + i * ldc * es, (size_t)(n * es)) != 0;
  check(s1 == EM_OK && s2 == EM_OK && differ == 0,
        "gemm_bias %s ta=%d tb=%d %lldx%lldx%lld = C filled with the bias, beta = 1 (%d rows differ)",
        dt == EM_BF16 ? "bf16" : dt == EM_F32 ? "f32" : "f64", ta, tb, (long long)m, (long long)n,
        (long long)k, differ);
  free(a), free(b), free(bias), free(c1), free(c2);
}

static void test_gemm_bias(void) {
  const em_dtype dts[3] = {EM_BF16, EM_F32, EM_F64};
  for (int d = 0; d < 3; d++)
    for (int t = 0; t < 4; t++) {
      gemm_bias_case(dts[d], t & 1, t & 2, 300, 130, 70); /* oneDNN for bf16 and f32 */
      gemm_bias_case(dts[d], t & 1, t & 2, 5, 7, 3);      /* the small kernels */
      gemm_bias_case(dts[d], t & 1, t & 2, 1, 40, 33);    /* gemv */
    }
  float w[6] = {1, 2, 3, 4, 5, 6}, x[2] = {1, 1}, c[3];
  check(be->gemm_bias(0, EM_F32, false, true, 1, 3, 2, x, 2, w, 2, NULL, c, 3) == EM_ERR_ARG,
        "gemm_bias refuses a NULL bias");
}

/* The fused optimizers on bf16 parameters against the same step in f32:
** each stored value rounds once, so within 2^-8 of the largest |param|
** (near-zero results make an elementwise relative bound meaningless). */

int main(int argc, char **argv) {
  void *h = backend_cpu_open(argc, argv);
  if (!h) return 2;
  test_gemm();
  test_bf16_gemm();
  test_gemm_bias();
  return backend_cpu_done(h);
}
