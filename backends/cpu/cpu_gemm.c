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
#include <pthread.h>
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
  int64_t batch;
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

/* Matrix-vector products (m == 1 or n == 1: a decoding step's linear
** layers at B = 1) skip the matrix-matrix libraries. OpenBLAS 0.3.21's
** sgemm packs the whole matrix on every call (1 x 256 x 1024: 62 us,
** 16 GB/s, where sgemv takes 8 us), and oneDNN's bf16 matmul wakes its
** whole team for the smallest product (1 x 256 x 256: 61 us at 2 threads,
** 6 us at 1). float32 and float64 go to BLAS's gemv, bfloat16 to the loops
** below; the output vector is split over our team from GEMV_PAR_BYTES of
** matrix. Alone, with the matrix in cache, 1 x 256 x 256 f32 ran 4.1 us
** unsplit and 5.0 split in two (1 x 256 x 1024 14.0 and 10.9); in a
** decoding step, where a layer's weights have left the caches by the next
** token, splitting the 256 x 256 projections too took a d256 4-layer
** decoder from 0.64-0.76 to 0.48-0.62 ms a token at 128 cached keys and
** from 1.32-1.50 to 1.22-1.30 at 2048 (scripts/bench/kv_decode.lua,
** 512 KiB against 64 KiB, three interleaved rounds; 2 threads, Zen 4);
** 16 to 256 KiB were alike within the noise, and at 128 KiB three more
** runs gave 1.19-1.23 at 2048. */
#define GEMV_PAR_BYTES (1 << 17)

typedef struct gemv_args {
  em_dtype dt;
  bool trans;         /* y = M^T x instead of y = M x */
  int64_t rows, cols; /* of the stored row-major matrix M */
  double alpha, beta;
  const void *mat;
  int64_t ld;
  const void *x; /* float32 (widened) for a bfloat16 M */
  int64_t incx;
  void *y;
  int64_t incy;
  float *acc; /* bfloat16: y's float32 sums, one per output */
} gemv_args;

/* bfloat16 rows of M dotted with x: sixteen partial sums per row (lanes
** of one vector, so no reassociation is needed to vectorise), widened in
** registers. */
CPU_VECTOR_CLONES_512 static void bf16_dot_rows(const uint16_t *m, int64_t ld, int64_t lo,
                                                int64_t hi, int64_t cols, const float *x,
                                                float *acc) {
  for (int64_t r = lo; r < hi; r++) {
    const uint16_t *row = m + r * ld;
    float part[16] = {0}, sum = 0;
    int64_t c = 0;
    for (; c + 16 <= cols; c += 16)
      for (int l = 0; l < 16; l++) part[l] += em_bf16_to_f32(row[c + l]) * x[c + l];
    for (; c < cols; c++) sum += em_bf16_to_f32(row[c]) * x[c];
    for (int l = 0; l < 16; l++) sum += part[l];
    acc[r] = sum;
  }
}

/* Columns [lo, hi) of x^T M: each row of M scaled and added. */
CPU_VECTOR_CLONES_512 static void bf16_axpy_rows(const uint16_t *m, int64_t ld, int64_t rows,
                                                 int64_t lo, int64_t hi, const float *x,
                                                 float *acc) {
  for (int64_t c = lo; c < hi; c++) acc[c] = 0;
  for (int64_t r = 0; r < rows; r++) {
    const uint16_t *row = m + r * ld;
    const float xr = x[r];
    for (int64_t c = lo; c < hi; c++) acc[c] += xr * em_bf16_to_f32(row[c]);
  }
}

/* Outputs [lo, hi) of y: rows of M, or columns when transposed. */
static void gemv_block(const gemv_args *g, int64_t lo, int64_t hi) {
  if (g->dt == EM_BF16) {
    if (g->trans)
      bf16_axpy_rows(g->mat, g->ld, g->rows, lo, hi, g->x, g->acc);
    else
      bf16_dot_rows(g->mat, g->ld, lo, hi, g->cols, g->x, g->acc);
    uint16_t *y = g->y;
    for (int64_t j = lo; j < hi; j++) {
      uint16_t *yj = y + j * g->incy;
      const float old = g->beta == 0 ? 0 : (float)g->beta * em_bf16_to_f32(*yj);
      *yj = em_f32_to_bf16((float)g->alpha * g->acc[j] + old);
    }
    return;
  }
  const enum CBLAS_TRANSPOSE op = g->trans ? CblasTrans : CblasNoTrans;
  const int64_t moff = g->trans ? lo : lo * g->ld;
  const int rows = (int)(g->trans ? g->rows : hi - lo), cols = (int)(g->trans ? hi - lo : g->cols);
  if (g->dt == EM_F32)
    cblas_sgemv(CblasRowMajor, op, rows, cols, (float)g->alpha, (const float *)g->mat + moff,
                (int)g->ld, g->x, (int)g->incx, (float)g->beta, (float *)g->y + lo * g->incy,
                (int)g->incy);
  else
    cblas_dgemv(CblasRowMajor, op, rows, cols, g->alpha, (const double *)g->mat + moff,
                (int)g->ld, g->x, (int)g->incx, g->beta, (double *)g->y + lo * g->incy,
                (int)g->incy);
}

/* Product i of a batch as a gemv: C's one row is op(A)'s row times op(B)
** (y = op(B)^T x), C's one column is op(A) times op(B)'s column. */
static gemv_args gemv_of(const gemm_args *g, int64_t i) {
  const size_t es = cpu_dtype_size(g->dt);
  const char *a = (const char *)g->a + (size_t)(i * g->stride_a) * es;
  const char *b = (const char *)g->b + (size_t)(i * g->stride_b) * es;
  char *c = (char *)g->c + (size_t)(i * g->stride_c) * es;
  if (g->m == 1) /* x: A's row (a column of A when transposed) */
    return (gemv_args){g->dt, !g->tb, g->tb ? g->n : g->k, g->tb ? g->k : g->n, g->alpha,
                       g->beta, b, g->ldb, a, g->ta ? g->lda : 1, c, 1, NULL};
  return (gemv_args){g->dt, g->ta, g->ta ? g->k : g->m, g->ta ? g->m : g->k, g->alpha, g->beta,
                     a, g->lda, b, g->tb ? 1 : g->ldb, c, g->ldc, NULL};
}

/* A bfloat16 product's x widened into xf (k floats), its sums in acc. */
static gemv_args gemv_of_bf16(const gemm_args *g, int64_t i, float *xf, float *acc) {
  gemv_args v = gemv_of(g, i);
  const uint16_t *x = v.x;
  for (int64_t p = 0; p < g->k; p++) xf[p] = em_bf16_to_f32(x[p * v.incx]);
  v.x = xf, v.incx = 1, v.acc = acc;
  return v;
}

static em_status gemv_batch(const gemm_args *g) {
  const int nt = omp_get_max_threads();
  const int64_t out = g->m == 1 ? g->n : g->m;
  const bool bf16 = g->dt == EM_BF16;
  const double bytes = (double)g->k * out * cpu_dtype_size(g->dt);
  float *xf = NULL, *acc = NULL;
  const size_t scratch = (size_t)(g->k + out) * sizeof(float);
  if (bf16) {
    if (!(xf = cpu_scratch_alloc(scratch)))
      return em_error(EM_ERR_OOM, "cpu gemm: out of memory for a bfloat16 gemv");
    acc = xf + g->k;
  }
  const bool split = nt > 1 && bytes >= GEMV_PAR_BYTES;
  if (!split && nt > 1 && !bf16 && g->batch >= nt && bytes * g->batch >= GEMV_PAR_BYTES) {
    CPU_FOR_W(true, bytes * g->batch / 4, i, g->batch, { gemv_args v = gemv_of(g, i); gemv_block(&v, 0, out); });
    return EM_OK;
  }
  /* nt ranges of whole cache lines of y (or of its float32 sums) */
  const int64_t per = ((out + nt - 1) / nt + 15) / 16 * 16;
  for (int64_t i = 0; i < g->batch; i++) {
    const gemv_args v = bf16 ? gemv_of_bf16(g, i, xf, acc) : gemv_of(g, i);
    CPU_FOR_W(split, bytes / 4, w, split ? nt : 1, {
      const int64_t lo = split ? w * per : 0, hi = !split ? out : lo + per < out ? lo + per : out;
      if (lo < hi) gemv_block(&v, lo, hi);
    });
  }
  cpu_scratch_free(xf, scratch);
  return EM_OK;
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
  if (m == 1 || n == 1) return false; /* gemv streams the matrix once: 1.3x oneDNN at 1 x 4096^2 */
  return (double)m * (double)n * (double)k * (double)batch >= DNNL_F32_MIN_MNK;
}

const char *cpu_gemm_f32_parts(const char *impl, char *buf, size_t n) {
  const char *e = getenv("EMBER_CPU_SGEMM");
  switch (f32_forced()) {
    case 1: snprintf(buf, n, "gemm: openblas, forced by EMBER_CPU_SGEMM; gemv: openblas sgemv"); break;
    case 2: /* gemv too (cpu_gemm's dispatch) */
      snprintf(buf, n, "gemm: onednn %s, forced by EMBER_CPU_SGEMM; gemv: onednn %s, forced by EMBER_CPU_SGEMM", impl,
               impl);
      break;
    default:
      snprintf(buf, n, "gemm: onednn from 2^21 multiply-adds per call, openblas below and for gemv (onednn %s or "
               "openblas by shape)%s%.16s%s; gemv: openblas sgemv", impl, e && *e ? ", EMBER_CPU_SGEMM=" : "",
               e && *e ? e : "", e && *e ? " is not openblas or onednn" : "");
  }
  return buf;
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

static bool is_small(int64_t m, int64_t n, int64_t k) {
  return m <= SMALL_MNK && n <= SMALL_MNK && k <= SMALL_MNK && m * n * k <= SMALL_MNK;
}

/* The arguments' checks of gemm and gemm_bias (m, n, batch >= 1). */
static em_status gemm_check(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *a,
                            int64_t lda, const void *b, int64_t ldb, void *c, int64_t ldc) {
  em_status s;
  if ((s = check_ld("lda", lda, ta ? m : k)) || (s = check_ld("ldb", ldb, tb ? k : n)) ||
      (s = check_ld("ldc", ldc, n)))
    return s;
  if (!c || (k > 0 && (!a || !b)))
    return em_error(EM_ERR_ARG, "cpu gemm: NULL matrix pointer for [%lld x %lld] @ [%lld x %lld]",
                    (long long)m, (long long)k, (long long)k, (long long)n);
  if (!is_small(m, n, k) && (m > INT_MAX || n > INT_MAX || k > INT_MAX || lda > INT_MAX ||
                             ldb > INT_MAX || ldc > INT_MAX))
    return em_error(EM_ERR_UNSUPPORTED,
                    "cpu gemm: sizes m=%lld n=%lld k=%lld exceed what BLAS takes (int)",
                    (long long)m, (long long)n, (long long)k);
  return EM_OK;
}

static em_status check_sizes(em_dtype dt, int64_t m, int64_t n, int64_t k, int64_t batch) {
  if (dt != EM_F32 && dt != EM_F64 && dt != EM_BF16)
    return cpu_bad_dtype("gemm", dt, "float32, float64, bfloat16");
  if (m < 0 || n < 0 || k < 0 || batch < 0)
    return em_error(EM_ERR_SHAPE, "cpu gemm: negative size m=%lld n=%lld k=%lld batch=%lld",
                    (long long)m, (long long)n, (long long)k, (long long)batch);
  return EM_OK;
}

/* Who takes a product of k > 0: the one rule cpu_gemm dispatches by and
** cpu_gemm_route names. */
typedef enum { ROUTE_GEMV, ROUTE_ONEDNN, ROUTE_SMALL, ROUTE_BLAS, ROUTE_N } gemm_route;

static gemm_route route_of(em_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t batch) {
  if ((m == 1 || n == 1) && !(dt == EM_F32 && f32_forced() == 2)) return ROUTE_GEMV;
  if (dt == EM_BF16) return ROUTE_ONEDNN; /* widened to float32 where oneDNN has no kernel */
  if (is_small(m, n, k)) return ROUTE_SMALL;
  if (dt == EM_F32 && cpu_gemm_f32_uses_dnnl(ta, tb, m, n, k, batch)) return ROUTE_ONEDNN;
  return ROUTE_BLAS;
}

/* Each dtype's routes named once (oneDNN's implementation costs a
** primitive to ask). */
static pthread_once_t route_once = PTHREAD_ONCE_INIT;
static char route_names[3][ROUTE_N][160]; /* float32, float64, bfloat16 */

static int route_dtype(em_dtype dt) { return dt == EM_F32 ? 0 : dt == EM_F64 ? 1 : dt == EM_BF16 ? 2 : -1; }

static void route_fill(void) {
  char blas[512], impl[96];
  cpu_blas_info(blas, sizeof blas);
  const char *paren = strstr(blas, " (");
  const int bl = paren ? (int)(paren - blas) : (int)strlen(blas); /* "openblas 0.3.21, core Cooperlake" */
  static const em_dtype dts[3] = {EM_F32, EM_F64, EM_BF16};
  for (int d = 0; d < 3; d++) {
    char(*r)[160] = route_names[d];
    const char x = d == 1 ? 'd' : 's';
    snprintf(r[ROUTE_GEMV], sizeof r[0], "openblas %cgemv (%.*s)", x, bl, blas);
    snprintf(r[ROUTE_SMALL], sizeof r[0], "ember's small-product loops");
    const char *forced = d == 0 && f32_forced() ? ", forced by EMBER_CPU_SGEMM" : "";
    snprintf(r[ROUTE_BLAS], sizeof r[0], "openblas %cgemm (%.*s)%s", x, bl, blas, forced);
    if (d == 1) continue; /* float64: no oneDNN */
    if (cpu_dnnl_impl(dts[d], impl, sizeof impl)) snprintf(impl, sizeof impl, "?");
    if (d == 2 && strncmp(impl, "none", 4) == 0)
      snprintf(r[ROUTE_ONEDNN], sizeof r[0], "widened to float32 (oneDNN has no bfloat16 kernel for this CPU)");
    else
      snprintf(r[ROUTE_ONEDNN], sizeof r[0], "onednn %s%s", impl, forced);
    if (d == 2)
      snprintf(r[ROUTE_GEMV], sizeof r[0], "ember's bfloat16 rows, %s",
               __builtin_cpu_supports("avx512f") ? "avx512f" : __builtin_cpu_supports("avx2") ? "avx2" : "x86-64");
  }
}

const char *cpu_gemm_route(int device, em_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                           int64_t batch) {
  (void)device;
  const int d = route_dtype(dt);
  if (d < 0 || m <= 0 || n <= 0 || k <= 0 || batch <= 0) return NULL;
  pthread_once(&route_once, route_fill);
  return route_names[d][route_of(dt, ta, tb, m, n, k, batch)];
}

em_status cpu_gemm(int device, em_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                   double alpha, const void *a, int64_t lda, int64_t stride_a, const void *b,
                   int64_t ldb, int64_t stride_b, double beta, void *c, int64_t ldc,
                   int64_t stride_c, int64_t batch) {
  (void)device;
  em_status s;
  if ((s = check_sizes(dt, m, n, k, batch))) return s;
  if (m == 0 || n == 0 || batch == 0) return EM_OK;
  if ((s = gemm_check(ta, tb, m, n, k, a, lda, b, ldb, c, ldc))) return s;
  const bool small = is_small(m, n, k);

  if (dt == EM_BF16 && k == 0) {
    bf16_scale_c(m, n, beta, c, ldc, stride_c, batch);
    return EM_OK;
  }
  gemm_args g = {dt, ta, tb, m, n, k, alpha, beta, a, lda, stride_a, b, ldb, stride_b,
                 c, ldc, stride_c, batch};
  const gemm_route route = k > 0 ? route_of(dt, ta, tb, m, n, k, batch) : ROUTE_BLAS;
  if (route == ROUTE_GEMV) return gemv_batch(&g);
  if (dt == EM_BF16) {
    s = cpu_dnnl_gemm(dt, ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c,
                      ldc, stride_c, batch);
    if (s != EM_ERR_UNSUPPORTED) return s;
    return bf16_gemm_widened(ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c,
                             ldc, stride_c, batch);
  }
  if (dt == EM_F32 && route == ROUTE_ONEDNN) {
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

  const int nt = omp_get_max_threads();
  if (nt == 1 || (double)m * n * k * batch <= GEMM_PAR_MNK) {
    for (int64_t i = 0; i < batch; i++) gemm_block(&g, i, 0, m, 0, n);
  } else if (batch >= nt) {
    CPU_FOR_W(true, (double)m * n * k * batch, i, batch, gemm_block(&g, i, 0, m, 0, n););
  } else {
    /* nt blocks of each product: rows of C, or columns when C is wide */
    const bool by_rows = m >= n;
    const int64_t len = by_rows ? m : n, per = (len + nt - 1) / nt;
    CPU_FOR_W(true, (double)m * n * k * batch, w, batch * nt, {
      const int64_t i = w / nt, lo = (w % nt) * per, hi = lo + per < len ? lo + per : len;
      if (lo >= hi) continue;
      if (by_rows) gemm_block(&g, i, lo, hi, 0, n);
      else gemm_block(&g, i, 0, m, lo, hi);
    });
  }
  return EM_OK;
}

/* gemm_bias (ember_backend.h). Where oneDNN runs the product (bfloat16
** always, float32 by the rule above) it adds the bias in its own pass, the
** matmul's bias argument: for a KJV layer's [4096, 128] projections that
** is one pass over C fewer (0.035 ms of 0.33 each). Elsewhere (OpenBLAS,
** gemv, the small kernels, a CPU without oneDNN's bfloat16) C starts as
** the bias and the product is added to it (beta = 1): the same sum. */
em_status cpu_gemm_bias(int device, em_dtype dt, bool ta, bool tb, int64_t m, int64_t n,
                        int64_t k, const void *a, int64_t lda, const void *b, int64_t ldb,
                        const void *bias, void *c, int64_t ldc) {
  em_status s;
  if ((s = check_sizes(dt, m, n, k, 1))) return s;
  if (m == 0 || n == 0) return EM_OK;
  if ((s = gemm_check(ta, tb, m, n, k, a, lda, b, ldb, c, ldc))) return s;
  if (!bias) return em_error(EM_ERR_ARG, "cpu gemm_bias: NULL bias");
  const bool dnnl = k > 0 && m > 1 && n > 1 && !is_small(m, n, k) &&
                    (dt == EM_BF16 || (dt == EM_F32 && cpu_gemm_f32_uses_dnnl(ta, tb, m, n, k, 1)));
  if (dnnl) {
    s = cpu_dnnl_gemm_bias(dt, ta, tb, m, n, k, a, lda, b, ldb, bias, c, ldc);
    if (s != EM_ERR_UNSUPPORTED) return s;
  }
  const size_t es = cpu_dtype_size(dt), row = (size_t)n * es;
  CPU_FOR(m * n > CPU_PAR_MIN, i, m, memcpy((char *)c + (size_t)(i * ldc) * es, bias, row););
  return cpu_gemm(device, dt, ta, tb, m, n, k, 1.0, a, lda, 0, b, ldb, 0, 1.0, c, ldc, 0, 1);
}
