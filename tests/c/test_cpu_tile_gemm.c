/*
** test_cpu_tile_gemm.c -- the fused attention's float32 tile products
** (backends/cpu/cpu_tile_gemm.c) on every path this CPU runs (avx512,
** avx2, plain, and blas as the yardstick), through the plugin's exported
** ember_cpu_tile_gemm: against a double-precision reference on random
** shapes with odd tails (m, n, k in 1..130 and the attention tile shapes),
** every transpose, alpha and beta (beta = 0 over NaN), ld > width, and
** cells outside C untouched. avx512 and avx2 must give the same bits
** (cpu_tile_gemm.c promises it). The same for cpu_tile_rows (few rows,
** B's rows read in place). A path the CPU lacks is reported as
** skipped; a path that runs and is wrong fails.
**
**   test_cpu_tile_gemm path/to/ember_backend_cpu.so
*/
#include "backend_cpu.h"

#include <dlfcn.h>

typedef int (*tile_gemm_fn)(const char *path, int ta, int tb, int64_t m, int64_t n, int64_t k,
                            float alpha, const float *A, int64_t lda, const float *B,
                            int64_t ldb, float beta, float *C, int64_t ldc);
static tile_gemm_fn tile_gemm;
typedef int (*tile_rows_fn)(const char *path, int tb, int64_t m, int64_t n, int64_t k, float alpha,
                            const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                            float *C, int64_t ldc);
static tile_rows_fn tile_rows;

static const char *const paths[] = {"avx512", "avx2", "plain", "blas"};
enum { NPATH = 4 };
static bool runs[NPATH];
static int bad[NPATH], cases;

/* One product on every path; a wrong path is counted in bad[] and its first cases printed. */
static void one_case(bool rows, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                     float beta, int64_t pad) {
  const int64_t lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
  const int64_t na = (ta ? k : m) * lda, nb = (tb ? n : k) * ldb, nc = m * ldc + 7;
  float *A = xmalloc((size_t)(na ? na : 1) * 4), *B = xmalloc((size_t)(nb ? nb : 1) * 4);
  float *C0 = xmalloc((size_t)nc * 4), *C = xmalloc((size_t)nc * 4), *first = xmalloc((size_t)nc * 4);
  double *want = xmalloc((size_t)nc * 8), *mag = xmalloc((size_t)nc * 8);
  for (int64_t i = 0; i < na; i++) A[i] = (float)urand();
  for (int64_t i = 0; i < nb; i++) B[i] = (float)urand();
  for (int64_t i = 0; i < nc; i++) C0[i] = (float)urand();
  if (beta == 0) /* beta = 0 must not read C: NaN may not leak */
    for (int64_t i = 0; i < nc; i += 5) C0[i] = NAN;
  for (int64_t i = 0; i < nc; i++) want[i] = C0[i], mag[i] = 0;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double s = 0, a = 0;
      for (int64_t p = 0; p < k; p++) {
        const double x = A[ta ? p * lda + i : i * lda + p], y = B[tb ? j * ldb + p : p * ldb + j];
        s += x * y, a += fabs(x * y);
      }
      const double c = C0[i * ldc + j];
      want[i * ldc + j] = alpha * s + (beta == 0 ? 0 : beta * c);
      mag[i * ldc + j] = fabs(alpha) * a + (beta == 0 ? 0 : fabs(beta * c));
    }
  bool have_first = false;
  cases++;
  for (int q = 0; q < NPATH; q++) {
    if (!runs[q]) continue;
    memcpy(C, C0, (size_t)nc * 4);
    bool ok = rows ? tile_rows(paths[q], tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc) == 0
                   : tile_gemm(paths[q], ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc) == 0;
    for (int64_t i = 0; i < nc && ok; i++) {
      const bool inside = i / ldc < m && i % ldc < n;
      if (!inside) ok = memcmp(&C[i], &C0[i], 4) == 0; /* NaN included: untouched */
      else ok = fabs(C[i] - want[i]) <= 4e-6 * (mag[i] + 1e-30) * (1 + sqrt((double)k));
    }
    /* avx512 and avx2: the same bits */
    if (ok && q < 2 && have_first) ok = memcmp(C, first, (size_t)nc * 4) == 0;
    if (ok && q < 2 && !have_first) memcpy(first, C, (size_t)nc * 4), have_first = true;
    if (!ok) {
      if (bad[q]++ < 5)
        printf("# %s%s wrong: ta=%d tb=%d m=%lld n=%lld k=%lld alpha=%g beta=%g pad=%lld\n",
               rows ? "rows " : "", paths[q], ta, tb, (long long)m, (long long)n, (long long)k, alpha, beta,
               (long long)pad);
    }
  }
  free(A), free(B), free(C0), free(C), free(first), free(want), free(mag);
}

/* cpu_tile_rows (a decoding step's few query rows, K and V read in place):
** the dot products S = alpha Q K^T and the sums acc = P V + beta acc, on
** row counts 1..9, key counts across the 16- and 4-key groups, head dims
** with every tail of 16 lanes and beyond one chunk (256). */
static void rows_cases(void) {
  const int64_t d[] = {1, 7, 8, 15, 16, 17, 31, 32, 33, 64, 80, 128, 300};
  for (int64_t m = 1; m <= 9; m += 2)
    for (size_t x = 0; x < sizeof d / sizeof d[0]; x++) {
      one_case(true, false, true, m, 128, d[x], 0.125f, 0, 0);          /* S = scale Q K^T */
      one_case(true, false, true, m, 1 + (d[x] * 5) % 37, d[x], 1, -0.5f, 3); /* key tails */
      one_case(true, false, false, m, d[x], 128, 1, 1, 0);              /* acc += P V */
      one_case(true, false, false, m, d[x], 1 + (d[x] * 3) % 300, 0.5f, 0, 2);
    }
  one_case(true, false, false, 3, 70, 600, 0.5f, 1, 1); /* k beyond one chunk */
  one_case(true, false, true, 2, 5, 0, 1, 0, 1);        /* k == 0 */
}

int main(int argc, char **argv) {
  void *h = backend_cpu_open(argc, argv);
  if (!h) return 1;
  *(void **)&tile_gemm = dlsym(h, "ember_cpu_tile_gemm");
  check(tile_gemm != NULL, "the plugin exports ember_cpu_tile_gemm");
  *(void **)&tile_rows = dlsym(h, "ember_cpu_tile_rows");
  check(tile_rows != NULL, "the plugin exports ember_cpu_tile_rows");
  if (!tile_gemm || !tile_rows) return backend_cpu_done(h);
  float z = 0;
  for (int q = 0; q < NPATH; q++) {
    runs[q] = tile_gemm(paths[q], 0, 0, 1, 1, 1, 1, &z, 1, &z, 1, 0, &z, 1) == 0;
    printf("# path %s: %s\n", paths[q], runs[q] ? "runs on this CPU" : "skipped (this CPU lacks it)");
  }
  check(runs[2] && runs[3], "plain and blas run on any CPU");
  check(tile_gemm("amx", 0, 0, 1, 1, 1, 1, &z, 1, &z, 1, 0, &z, 1) == -1, "an unknown path is refused");

  /* the attention kernel's shapes (head dims 32, 64, 80, 128; tiles of
  ** 64 x 128, 64 x 64, 16 x 16), then random ones with odd tails */
  const int64_t d[] = {32, 64, 80, 128};
  for (int t = 0; t < 4; t++)
    for (int x = 0; x < 4; x++) {
      one_case(false, false, true, 64, 128, d[x], 0.125f, 0, 0);   /* S = scale Q K^T */
      one_case(false, false, false, 64, d[x], 128, 1, 1, 0);       /* acc += P V, dQ */
      one_case(false, true, false, 128, d[x], 64, 0.125f, 1, 0);   /* dK, dV */
      one_case(false, t & 1, t & 2, 16, 16, d[x], 1, 0.5f, 3);
    }
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++)
      for (int64_t m = 1; m <= 17; m += 3) /* every row tail of 8 and 6 */
        for (int64_t n = 1; n <= 40; n += 3)  /* column tails of 32, 16 and 8 */
          one_case(false, ta, tb, m, n, 1 + (m * 7 + n) % 19, 0.75f, (n % 3) ? 0 : -0.5f, m % 2);
  for (int r = 0; r < 300; r++) {
    const int64_t m = 1 + (int64_t)((urand() + 1) * 65), n = 1 + (int64_t)((urand() + 1) * 65),
                  k = 1 + (int64_t)((urand() + 1) * 65);
    const float betas[] = {0, 1, 0.5f, -2};
    one_case(false, urand() > 0, urand() > 0, m, n, k, (float)(urand() * 2), betas[r % 4], r % 3 ? 0 : 1 + r % 5);
  }
  /* k beyond one chunk (256): alpha is applied chunk by chunk */
  for (int t = 0; t < 4; t++) one_case(false, t & 1, t & 2, 37, 45, 600, 0.5f, 1, 2);
  /* k == 0: C = beta C, and 0 over NaN where beta is 0 */
  one_case(false, false, false, 5, 7, 0, 1, 0, 1);
  one_case(false, true, true, 5, 7, 0, 1, 0.5f, 1);
  rows_cases();
  for (int q = 0; q < NPATH; q++)
    if (runs[q]) check(bad[q] == 0, "path %s: %d of %d products right", paths[q], cases - bad[q], cases);
  return backend_cpu_done(h);
}
