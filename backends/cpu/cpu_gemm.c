/*
** cpu_gemm.c -- batched row-major matrix multiply.
**
** Products go to OpenBLAS (cblas_sgemm/dgemm) for its packed kernels, but
** OpenBLAS runs single-threaded (ember_plugin_init): we split the work
** over our own OpenMP team instead, by batch when there are enough
** products and otherwise into row (or column) blocks of each product.
** Two thread pools on the same cores fought: OpenBLAS's idle workers spin
** on sched_yield for a while after every call, while our OpenMP kernels
** that follow want those cores; a quarter of a char-LM step went to the
** scheduler. Only tiny products (up to 4x4x4, where the call itself is the
** cost) run plain loops.
*/
#include "cpu_internal.h"

#include <cblas.h>
#include <limits.h>
#include <omp.h>
#include <stdlib.h>

/* A product with m*n*k at most this (and every size at most this, for
** k = 0) uses loops: measured against OpenBLAS 0.3.21, the two are equal
** at 4x4x4 and BLAS is 1.5x faster at 8x8x8. */
#define SMALL_MNK 64

#define T float
#define SUF float
#include "cpu_gemm_tmpl.h"
#undef T
#undef SUF

#define T double
#define SUF double
#include "cpu_gemm_tmpl.h"
#undef T
#undef SUF

/* Below this m*n*k (over the whole batch) a product stays on the calling
** thread: OpenBLAS's own bound for splitting one (65536 *
** GEMM_MULTITHREAD_THRESHOLD). */
#define GEMM_PAR_MNK (65536.0 * 4)

typedef struct gemm_args {
  em_dtype dt;
  bool ta, tb;
  int64_t m, n, k;
  double alpha, beta;
  const void *a;
  int64_t lda, stride_a;
  const void *b;
  int64_t ldb, stride_b;
  void *c;
  int64_t ldc, stride_c;
} gemm_args;

/* Rows [r0, r1) and columns [c0, c1) of product i's C: rows of C come from
** rows of op(A) (columns of A when it is transposed), columns of C from
** columns of op(B) (rows of B when transposed). */
static void gemm_block(const gemm_args *g, int64_t i, int64_t r0, int64_t r1, int64_t c0,
                       int64_t c1) {
  const int64_t a_off = i * g->stride_a + (g->ta ? r0 : r0 * g->lda);
  const int64_t b_off = i * g->stride_b + (g->tb ? c0 * g->ldb : c0);
  const int64_t c_off = i * g->stride_c + r0 * g->ldc + c0;
  const enum CBLAS_TRANSPOSE opa = g->ta ? CblasTrans : CblasNoTrans;
  const enum CBLAS_TRANSPOSE opb = g->tb ? CblasTrans : CblasNoTrans;
  const int m = (int)(r1 - r0), n = (int)(c1 - c0), k = (int)g->k;
  if (g->dt == EM_F32)
    cblas_sgemm(CblasRowMajor, opa, opb, m, n, k, (float)g->alpha, (const float *)g->a + a_off,
                (int)g->lda, (const float *)g->b + b_off, (int)g->ldb, (float)g->beta,
                (float *)g->c + c_off, (int)g->ldc);
  else
    cblas_dgemm(CblasRowMajor, opa, opb, m, n, k, g->alpha, (const double *)g->a + a_off,
                (int)g->lda, (const double *)g->b + b_off, (int)g->ldb, g->beta,
                (double *)g->c + c_off, (int)g->ldc);
}

/* C = beta * C for k == 0 products (beta == 0 never reads C). */
static void bf16_scale_c(int64_t m, int64_t n, double beta, void *c, int64_t ldc,
                         int64_t stride_c, int64_t batch) {
  uint16_t *C = c;
  for (int64_t i = 0; i < batch; i++)
    for (int64_t r = 0; r < m; r++)
      for (int64_t j = 0; j < n; j++) {
        uint16_t *x = C + i * stride_c + r * ldc + j;
        *x = beta == 0 ? 0 : em_f32_to_bf16((float)beta * em_bf16_to_f32(*x));
      }
}

/* Which library multiplies float32 (see the README's "Matrix products"):
** a fixed rule on the shape, never a timing at run time. On a quiet
** machine of this kind oneDNN's f32 matmul ran 1.3-1.8x OpenBLAS's sgemm
** at 1024^3 and 4096 x {128..512} x {128..512} (the table; our
** scripts/bench/matmul.lua runs, on a heavily shared 2-core machine, were
** too noisy to refine it); below about 2^21 multiply-adds per call
** the fixed cost of running a primitive (memory objects, the stream) is a
** large share, so small products stay on OpenBLAS on our team.
** EMBER_CPU_SGEMM=openblas or onednn forces one, for tests and benchmarks. */
#define DNNL_F32_MIN_MNK (1 << 21)

static int f32_forced(void) {
  static int forced = -1; /* -1 unknown, 0 the rule, 1 openblas, 2 onednn */
  if (forced < 0) {
    const char *e = getenv("EMBER_CPU_SGEMM");
    forced = e && strcmp(e, "openblas") == 0 ? 1 : e && strcmp(e, "onednn") == 0 ? 2 : 0;
  }
  return forced;
}

bool cpu_gemm_f32_uses_dnnl(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t batch) {
  (void)ta, (void)tb;
  const int forced = f32_forced();
  if (forced) return forced == 2;
  return (double)m * (double)n * (double)k * (double)batch >= DNNL_F32_MIN_MNK;
}

const char *cpu_gemm_f32_rule(void) {
  switch (f32_forced()) {
    case 1: return "openblas (EMBER_CPU_SGEMM)";
    case 2: return "onednn (EMBER_CPU_SGEMM)";
    default: return "onednn from 2^21 multiply-adds per call, openblas below";
  }
}

/* Elements from the first to one past the last of a batch of row-major
** matrices (rows x cols of op(X), stored transposed when t). */
static int64_t span(bool t, int64_t rows, int64_t cols, int64_t ld, int64_t stride,
                    int64_t batch) {
  const int64_t last = t ? (cols - 1) * ld + rows : (rows - 1) * ld + cols;
  return (batch - 1) * stride + last;
}

static float *widen_span(const uint16_t *x, int64_t n) {
  float *f = cpu_scratch_alloc((size_t)n * sizeof *f);
  if (f) cpu_bf16_widen(f, x, n);
  return f;
}

/* bfloat16 where oneDNN has no kernel (a CPU without AVX-512): the
** operands widened to float32 in their own layout, a float32 product,
** the result rounded once. Gaps between rows round-trip exactly. */
static em_status bf16_gemm_widened(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                                   double alpha, const void *a, int64_t lda, int64_t stride_a,
                                   const void *b, int64_t ldb, int64_t stride_b, double beta,
                                   void *c, int64_t ldc, int64_t stride_c, int64_t batch) {
  const int64_t na = span(ta, m, k, lda, stride_a, batch), nb = span(tb, k, n, ldb, stride_b, batch);
  const int64_t nc = span(false, m, n, ldc, stride_c, batch);
  float *fa = widen_span(a, na), *fb = widen_span(b, nb), *fc = widen_span(c, nc);
  em_status s = EM_OK;
  if (!fa || !fb || !fc)
    s = em_error(EM_ERR_OOM, "cpu gemm: out of memory widening a bfloat16 product");
  else
    s = cpu_gemm(0, EM_F32, ta, tb, m, n, k, alpha, fa, lda, stride_a, fb, ldb, stride_b, beta,
                 fc, ldc, stride_c, batch);
  if (!s) cpu_bf16_narrow(c, fc, nc);
  cpu_scratch_free(fa, (size_t)na * sizeof *fa);
  cpu_scratch_free(fb, (size_t)nb * sizeof *fb);
  cpu_scratch_free(fc, (size_t)nc * sizeof *fc);
  return s;
}

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
  if (dt != EM_F32 && dt != EM_F64 && dt != EM_BF16)
    return cpu_bad_dtype("gemm", dt, "float32, float64, bfloat16");
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

  if (dt == EM_BF16 && k == 0) {
    bf16_scale_c(m, n, beta, c, ldc, stride_c, batch);
    return EM_OK;
  }
  if (dt == EM_BF16) {
    s = cpu_dnnl_gemm(dt, ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c,
                      ldc, stride_c, batch);
    if (s != EM_ERR_UNSUPPORTED) return s;
    return bf16_gemm_widened(ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c,
                             ldc, stride_c, batch);
  }
  if (dt == EM_F32 && !small && cpu_gemm_f32_uses_dnnl(ta, tb, m, n, k, batch)) {
    s = cpu_dnnl_gemm(dt, ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c,
                      ldc, stride_c, batch);
    if (s != EM_ERR_UNSUPPORTED) return s;
  }

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

  gemm_args g = {dt, ta, tb, m, n, k, alpha, beta, a, lda, stride_a, b, ldb, stride_b,
                 c, ldc, stride_c};
  const int nt = omp_get_max_threads();
  if (nt == 1 || (double)m * n * k * batch <= GEMM_PAR_MNK) {
    for (int64_t i = 0; i < batch; i++) gemm_block(&g, i, 0, m, 0, n);
  } else if (batch >= nt) {
    CPU_FOR(true, i, batch, gemm_block(&g, i, 0, m, 0, n););
  } else {
    /* nt blocks of each product: rows of C, or columns when C is wide */
    const bool by_rows = m >= n;
    const int64_t len = by_rows ? m : n, per = (len + nt - 1) / nt;
    CPU_FOR(true, w, batch * nt, {
      const int64_t i = w / nt, lo = (w % nt) * per, hi = lo + per < len ? lo + per : len;
      if (lo >= hi) continue;
      if (by_rows) gemm_block(&g, i, lo, hi, 0, n);
      else gemm_block(&g, i, 0, m, lo, hi);
    });
  }
  return EM_OK;
}
