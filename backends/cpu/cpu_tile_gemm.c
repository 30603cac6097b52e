/*
** cpu_tile_gemm.c -- the fused attention kernel's float32 tile products on
** ember's own register-blocked micro-kernels: C[m,n] = alpha * op(A) op(B)
** + beta * C, row-major, on the calling thread (issue 25, item 2).
**
** Why our own: the tiles are small (64 x 128 x 32 for S = Q K^T at head dim
** 32, 64 x 32 x 128 for P V) and every one went through cblas_sgemm, whose
** speed depends on the core OpenBLAS guessed for the CPU (Debian's 0.3.21
** ran an Intel AVX-512 Xeon as Prescott, 6x slow). Here the hot loop is
** ours, picked once per process by cpuid.
**
** Paths (cpu_tile_gemm_path names the one chosen):
**  - "avx512": 8 rows x 32 columns of C in 16 zmm accumulators; each k
**    step loads two vectors of op(B) and broadcasts 8 values of op(A).
**  - "avx2": the same with FMA on ymm, 6 rows x 16 columns (12 accumulators).
**  - "plain": 4 x 8 blocks in GNU C vectors, any CPU (only when asked).
**  - "blas": cblas_sgemm, as before: on a CPU without AVX2+FMA (tg_best),
**    or when asked, for comparing.
** EMBER_CPU_TILE_GEMM=avx512|avx2|plain|blas forces one; a path the CPU
** lacks falls back to the best it has, and the name says so. Like
** cpu_bgemm.c, a ONEDNN_MAX_CPU_ISA cap below AVX-512 (AVX2) also caps
** this choice, so that the tests can emulate an older CPU.
** There is no AMX path: AMX has no float32 tiles (bfloat16 and int8
** only), and no machine of this project has exposed it to run one on; a
** CPU with AMX takes the avx512 path (an open part of issue 25).
**
** op(A) is never packed: the micro-kernel broadcasts its elements from
** where they are (a row of A, or with A transposed a column, both cheap
** to step through). op(B) is read in place when it is B itself and a
** panel is whole; a transposed B (S = Q K^T, dP = dO V^T) or a partial
** panel is packed, KC deep, into [kc][panel width] on the stack, the
** transposition by 8 x 8 register transposes.
**
** Every element of C is the same float32 sum, whatever the path among
** avx512 and avx2, the tile's shape and where the element lies in it: one
** fused multiply-add per k in order, in chunks of KC (alpha applied per
** chunk), then alpha * sum (+ beta * C by one more FMA). So a query tile's
** scores, recomputed by the backward with other tile widths, have the
** forward's bits. The plain path rounds each product where the compiler
** does not contract it into an FMA (x86-64's baseline), so it may differ
** in the last bits; so may OpenBLAS.
*/
#include "cpu_tile_gemm.h"
#include "ember_plugin.h"

#include <cblas.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>


/* k is summed in chunks of KC: a packed panel is KC x 32 floats (32 KiB). */
enum { TG_KC = 256 };

static const char *const tg_names[] = {"plain", "avx2", "avx512", "blas"};

static pthread_once_t tg_once = PTHREAD_ONCE_INIT;
static int tg_path;
static char tg_desc[160];

/* The best path this CPU (and a ONEDNN_MAX_CPU_ISA cap) allows. Without
** AVX2+FMA it is OpenBLAS: its hand-written kernels for those older
** cores (and for other architectures) beat our plain C loops, which ran at
** a quarter of OpenBLAS's speed on the Zen 4 (27 against 100 GFLOP/s on
** 64 x 128 x 32), and OpenBLAS knows the old cores; its misjudgements are
** of new ones. */
static int tg_best(void) {
#if TG_X86
  const char *cap = getenv("ONEDNN_MAX_CPU_ISA");
  const bool capped = cap && *cap && strcasecmp(cap, "ALL") && strcasecmp(cap, "DEFAULT");
  const bool cap512 = !capped || strncasecmp(cap, "AVX512", 6) == 0 || strncasecmp(cap, "AVX10", 5) == 0;
  const bool cap256 = cap512 || strncasecmp(cap, "AVX2", 4) == 0;
  if (cap512 && __builtin_cpu_supports("avx512f")) return TG_AVX512_PATH;
  if (cap256 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return TG_AVX2_PATH;
#endif
  return TG_BLAS;
}

bool cpu_tg_runs(int p) {
  if (p == TG_PLAIN || p == TG_BLAS) return true;
#if TG_X86
  if (p == TG_AVX2_PATH) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (p == TG_AVX512_PATH) return __builtin_cpu_supports("avx512f");
#endif
  return false;
}

int cpu_tg_parse(const char *s) {
  for (int p = 0; p < 4; p++)
    if (strcasecmp(s, tg_names[p]) == 0) return p;
  return -1;
}

static void tg_choose(void) {
  static const char *const what[] = {"GNU C vectors, 4x8 blocks", "ember's 6x16 FMA tiles",
                                     "ember's 8x32 FMA tiles", "OpenBLAS sgemm"};
  const char *force = getenv("EMBER_CPU_TILE_GEMM");
  const int best = tg_best(), asked = force && *force ? cpu_tg_parse(force) : -1;
  tg_path = asked >= 0 && cpu_tg_runs(asked) ? asked : best;
  if (!force || !*force)
    snprintf(tg_desc, sizeof tg_desc, "%s (%s)", tg_names[tg_path], what[tg_path]);
  else if (asked == tg_path) /* no ';' inside: cpu_info's line uses it between its parts */
    snprintf(tg_desc, sizeof tg_desc, "%s (%s, forced by EMBER_CPU_TILE_GEMM)", tg_names[tg_path], what[tg_path]);
  else
    snprintf(tg_desc, sizeof tg_desc, "%s (%s, EMBER_CPU_TILE_GEMM=%.24s %s)", tg_names[tg_path],
             what[tg_path], force, asked < 0 ? "is not avx512, avx2, plain or blas" : "does not run on this CPU");
}

int cpu_tg_path(void) {
  pthread_once(&tg_once, tg_choose);
  return tg_path;
}

const char *cpu_tile_gemm_path(void) {
  pthread_once(&tg_once, tg_choose);
  return tg_desc;
}

/* Rows [p0, p0+kc) x columns [j0, j0+nc) of op(B) into Bp[kc][w], zeros in
** columns [nc, w): a plain copy of B's rows, or for a transposed B
** (op(B)(p, j) = B[j][p]) one element at a time. */
static void tg_pack_b(float *restrict Bp, const float *restrict B, bool tb, int64_t ldb,
                      int64_t p0, int64_t kc, int64_t j0, int64_t nc, int64_t w) {
  for (int64_t p = 0; p < kc; p++) {
    float *d = Bp + p * w;
    if (tb)
      for (int64_t j = 0; j < nc; j++) d[j] = B[(j0 + j) * ldb + p0 + p];
    else
      memcpy(d, B + (p0 + p) * ldb + j0, (size_t)nc * sizeof *d);
    for (int64_t j = nc; j < w; j++) d[j] = 0;
  }
}

/* Row pointers of op(A) for rows [i0, i0+MR) at k = p0 (rows past mr point
** at row i0: computed, not stored) and the step between k's. */
TG_INLINE int64_t tg_rows(const float **ar, int MR, const float *A, bool ta, int64_t lda,
                          int64_t i0, int mr, int64_t p0) {
  for (int r = 0; r < MR; r++) {
    const int64_t i = i0 + (r < mr ? r : 0);
    ar[r] = ta ? A + p0 * lda + i : A + i * lda + p0;
  }
  return ta ? lda : 1;
}

/* ---- plain: any CPU ---- */

/* Four float lanes in GNU C's generic vectors: SSE on x86-64, NEON on
** arm64, scalar code elsewhere. Left to the auto-vectoriser, the same
** loops were shuffled lane by lane (1-3 GFLOP/s). */
typedef float tg_v4 __attribute__((vector_size(16)));

static void tg_plain(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                     const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                     float *C, int64_t ldc) {
  enum { MR = 4, NR = 8 }; /* 8 accumulators: SSE's 16 registers hold them */
  float Bp[TG_KC * NR] __attribute__((aligned(16)));
  for (int64_t p0 = 0; p0 < k; p0 += TG_KC) {
    const int64_t kc = k - p0 < TG_KC ? k - p0 : TG_KC;
    const float be = p0 == 0 ? beta : 1;
    for (int64_t j0 = 0; j0 < n; j0 += NR) {
      const int64_t nc = n - j0 < NR ? n - j0 : NR;
      tg_pack_b(Bp, B, tb, ldb, p0, kc, j0, nc, NR);
      for (int64_t i0 = 0; i0 < m; i0 += MR) {
        const int64_t mr = m - i0 < MR ? m - i0 : MR;
        const float *ar[MR];
        const int64_t aps = tg_rows(ar, MR, A, ta, lda, i0, (int)mr, p0);
        tg_v4 acc[MR][2] = {{{0}}};
        for (int64_t p = 0; p < kc; p++) {
          const tg_v4 b0 = *(const tg_v4 *)(Bp + p * NR), b1 = *(const tg_v4 *)(Bp + p * NR + 4);
          for (int r = 0; r < MR; r++) {
            const float a = ar[r][p * aps];
            acc[r][0] += a * b0, acc[r][1] += a * b1;
          }
        }
        for (int64_t r = 0; r < mr; r++) {
          float *c = C + (i0 + r) * ldc + j0;
          for (int64_t j = 0; j < nc; j++) {
            const float x = acc[r][j / 4][j % 4];
            c[j] = be == 0 ? alpha * x : alpha * x + be * c[j];
          }
        }
      }
    }
  }
}

#if TG_X86
/* ---- shared by the AVX2 and AVX-512 paths ---- */

/* r[0..8) := its 8 x 8 transpose. */
TG_AVX2 TG_INLINE void tg_tr8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int q = 0; q < 4; q++) {
    t[2 * q] = _mm256_unpacklo_ps(r[2 * q], r[2 * q + 1]);
    t[2 * q + 1] = _mm256_unpackhi_ps(r[2 * q], r[2 * q + 1]);
  }
  for (int h = 0; h < 2; h++) {
    u[4 * h + 0] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0x44);
    u[4 * h + 1] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0xEE);
    u[4 * h + 2] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0x44);
    u[4 * h + 3] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0xEE);
  }
  for (int q = 0; q < 4; q++) {
    r[q] = _mm256_permute2f128_ps(u[q], u[q + 4], 0x20);
    r[q + 4] = _mm256_permute2f128_ps(u[q], u[q + 4], 0x31);
  }
}

/* tg_pack_b for a transposed B, 8 x 8 blocks through registers (a scalar
** transpose cost a quarter of the S = Q K^T product at head dim 32). */
TG_AVX2 static void tg_pack_bt(float *restrict Bp, const float *restrict B, int64_t ldb,
                               int64_t p0, int64_t kc, int64_t j0, int64_t nc, int64_t w) {
  int64_t j = 0;
  for (; j + 8 <= nc; j += 8) {
    const float *src = B + (j0 + j) * ldb + p0;
    int64_t p = 0;
    for (; p + 8 <= kc; p += 8) {
      __m256 r[8];
      for (int q = 0; q < 8; q++) r[q] = _mm256_loadu_ps(src + q * ldb + p);
      tg_tr8(r);
      for (int q = 0; q < 8; q++) _mm256_storeu_ps(Bp + (p + q) * w + j, r[q]);
    }
    for (; p < kc; p++)
      for (int q = 0; q < 8; q++) Bp[p * w + j + q] = src[q * ldb + p];
  }
  for (int64_t p = 0; p < kc; p++) {
    float *d = Bp + p * w;
    for (int64_t jj = j; jj < nc; jj++) d[jj] = B[(j0 + jj) * ldb + p0 + p];
    for (int64_t jj = nc; jj < w; jj++) d[jj] = 0;
  }
}

/* The panel of op(B) for k [p0, p0+kc) x columns [j0, j0+nc), w wide: B
** itself when it is not transposed and the panel is whole (row stride
** ldb), else packed into Bp (row stride w). */
TG_AVX2 TG_INLINE const float *tg_panel(float *Bp, const float *B, bool tb, int64_t ldb,
                                        int64_t p0, int64_t kc, int64_t j0, int64_t nc,
                                        int64_t w, int64_t *bs) {
  if (!tb && nc == w) {
    *bs = ldb;
    return B + p0 * ldb + j0;
  }
  if (tb) tg_pack_bt(Bp, B, ldb, p0, kc, j0, nc, w);
  else tg_pack_b(Bp, B, tb, ldb, p0, kc, j0, nc, w);
  *bs = w;
  return Bp;
}

/* ---- AVX2 + FMA: 6 x 16 ---- */

/* MR x NV*8 of C: acc = sum_p op(A)(r, p) * op(B)(p, :), then C = alpha *
** acc (+ beta * C); rows < mr and columns < ncols are stored. */
TG_AVX2 TG_INLINE void tg_micro2(const float *const *ar, int64_t aps, const float *b, int64_t bs,
                                 int64_t kc, const int MR, const int NV, int mr, int64_t ncols,
                                 float alpha, float beta, float *C, int64_t ldc) {
  __m256 acc[6][2];
#pragma GCC unroll 8
  for (int r = 0; r < MR; r++)
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++) acc[r][v] = _mm256_setzero_ps();
  for (int64_t p = 0; p < kc; p++) {
    __m256 bv[2];
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++) bv[v] = _mm256_loadu_ps(b + p * bs + 8 * v);
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++) {
      const __m256 av = _mm256_broadcast_ss(ar[r] + p * aps);
#pragma GCC unroll 8
      for (int v = 0; v < NV; v++) acc[r][v] = _mm256_fmadd_ps(av, bv[v], acc[r][v]);
    }
  }
  const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
#pragma GCC unroll 8
  for (int r = 0; r < MR; r++) {
    if (r >= mr) break;
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++) {
      float *c = C + r * ldc + 8 * v;
      const int64_t left = ncols - 8 * v;
      __m256 x = _mm256_mul_ps(va, acc[r][v]);
      if (left >= 8) {
        if (beta != 0) x = _mm256_fmadd_ps(vb, _mm256_loadu_ps(c), x);
        _mm256_storeu_ps(c, x);
      } else if (left > 0) {
        const __m256i mk = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)left), lane);
        if (beta != 0) x = _mm256_fmadd_ps(vb, _mm256_maskload_ps(c, mk), x);
        _mm256_maskstore_ps(c, mk, x);
      }
    }
  }
}

TG_AVX2 static void tg_avx2(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                            const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                            float *C, int64_t ldc) {
  enum { MR = 6, NR = 16 };
  float Bp[TG_KC * NR] __attribute__((aligned(32)));
  for (int64_t p0 = 0; p0 < k; p0 += TG_KC) {
    const int64_t kc = k - p0 < TG_KC ? k - p0 : TG_KC;
    const float be = p0 == 0 ? beta : 1;
    for (int64_t j0 = 0; j0 < n; j0 += NR) {
      const int64_t nc = n - j0 < NR ? n - j0 : NR;
      const int nv = nc > 8 ? 2 : 1;
      int64_t bs;
      const float *b = tg_panel(Bp, B, tb, ldb, p0, kc, j0, nc, 8 * nv, &bs);
      for (int64_t i0 = 0; i0 < m; i0 += MR) {
        const int mr = m - i0 < MR ? (int)(m - i0) : MR;
        const float *ar[MR];
        const int64_t aps = tg_rows(ar, MR, A, ta, lda, i0, mr, p0);
        float *c = C + i0 * ldc + j0;
        if (nv == 2 && mr == 1) tg_micro2(ar, aps, b, bs, kc, 1, 2, mr, nc, alpha, be, c, ldc);
        else if (nv == 2) tg_micro2(ar, aps, b, bs, kc, MR, 2, mr, nc, alpha, be, c, ldc);
        else if (mr == 1) tg_micro2(ar, aps, b, bs, kc, 1, 1, mr, nc, alpha, be, c, ldc);
        else tg_micro2(ar, aps, b, bs, kc, MR, 1, mr, nc, alpha, be, c, ldc);
      }
    }
  }
}

/* ---- AVX-512: 8 x 32 ---- */

TG_AVX512 TG_INLINE void tg_micro5(const float *const *ar, int64_t aps, const float *b, int64_t bs,
                                   int64_t kc, const int MR, const int NV, int mr, int64_t ncols,
                                   float alpha, float beta, float *C, int64_t ldc) {
  __m512 acc[8][2];
#pragma GCC unroll 8
  for (int r = 0; r < MR; r++)
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++) acc[r][v] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kc; p++) {
    __m512 bv[2];
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++) bv[v] = _mm512_loadu_ps(b + p * bs + 16 * v);
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++) {
      const __m512 av = _mm512_set1_ps(ar[r][p * aps]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; v++) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
    }
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 8
  for (int r = 0; r < MR; r++) {
    if (r >= mr) break;
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++) {
      const int64_t left = ncols - 16 * v;
      if (left <= 0) break;
      const __mmask16 mk = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
      float *c = C + r * ldc + 16 * v;
      __m512 x = _mm512_mul_ps(va, acc[r][v]);
      if (beta != 0) x = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mk, c), x);
      _mm512_mask_storeu_ps(c, mk, x);
    }
  }
}

TG_AVX512 static void tg_avx512(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                                const float *A, int64_t lda, const float *B, int64_t ldb,
                                float beta, float *C, int64_t ldc) {
  enum { MR = 8, NR = 32 };
  float Bp[TG_KC * NR] __attribute__((aligned(64)));
  for (int64_t p0 = 0; p0 < k; p0 += TG_KC) {
    const int64_t kc = k - p0 < TG_KC ? k - p0 : TG_KC;
    const float be = p0 == 0 ? beta : 1;
    for (int64_t j0 = 0; j0 < n; j0 += NR) {
      const int64_t nc = n - j0 < NR ? n - j0 : NR;
      const int nv = nc > 16 ? 2 : 1;
      int64_t bs;
      const float *b = tg_panel(Bp, B, tb, ldb, p0, kc, j0, nc, 16 * nv, &bs);
      for (int64_t i0 = 0; i0 < m; i0 += MR) {
        const int mr = m - i0 < MR ? (int)(m - i0) : MR;
        const float *ar[MR];
        const int64_t aps = tg_rows(ar, MR, A, ta, lda, i0, mr, p0);
        float *c = C + i0 * ldc + j0;
        /* a short last block (a decoding step's one query row) computes
        ** only its rows: same sums per element, a quarter or an eighth of
        ** the FMAs */
        const int mk = mr == 1 ? 1 : mr <= 4 ? 4 : MR;
        if (nv == 2 && mk == 1) tg_micro5(ar, aps, b, bs, kc, 1, 2, mr, nc, alpha, be, c, ldc);
        else if (nv == 2 && mk == 4) tg_micro5(ar, aps, b, bs, kc, 4, 2, mr, nc, alpha, be, c, ldc);
        else if (nv == 2) tg_micro5(ar, aps, b, bs, kc, MR, 2, mr, nc, alpha, be, c, ldc);
        else if (mk == 1) tg_micro5(ar, aps, b, bs, kc, 1, 1, mr, nc, alpha, be, c, ldc);
        else if (mk == 4) tg_micro5(ar, aps, b, bs, kc, 4, 1, mr, nc, alpha, be, c, ldc);
        else tg_micro5(ar, aps, b, bs, kc, MR, 1, mr, nc, alpha, be, c, ldc);
      }
    }
  }
}

#endif

/* k == 0: C = beta * C (0 where beta is 0, even over NaN: BLAS's rule). */
static void tg_scale(int64_t m, int64_t n, float beta, float *C, int64_t ldc) {
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) C[i * ldc + j] = beta == 0 ? 0 : beta * C[i * ldc + j];
}

bool cpu_tg_empty(int64_t m, int64_t n, int64_t k, float beta, float *C, int64_t ldc) {
  if (m <= 0 || n <= 0) return true;
  if (k > 0) return false;
  tg_scale(m, n, beta, C, ldc);
  return true;
}

void cpu_tg_run(int path, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                   const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                   int64_t ldc) {
  if (cpu_tg_empty(m, n, k, beta, C, ldc)) return;
  switch (path) {
#if TG_X86
    case TG_AVX512_PATH: tg_avx512(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc); return;
    case TG_AVX2_PATH: tg_avx2(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc); return;
#endif
    case TG_BLAS:
      cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                  (int)m, (int)n, (int)k, alpha, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
      return;
    default: tg_plain(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc); return;
  }
}

void cpu_tile_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                   const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                   float *C, int64_t ldc) {
  pthread_once(&tg_once, tg_choose);
  cpu_tg_run(tg_path, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}


/* For tests/c/test_cpu_tile_gemm.c: one product on the named path
** ("avx512", "avx2", "plain", "blas"), whatever the process chose. Returns
** 0, or -1 when the name is unknown or this CPU cannot run the path. */
EM_PLUGIN_EXPORT int ember_cpu_tile_gemm(const char *path, int ta, int tb, int64_t m, int64_t n,
                                         int64_t k, float alpha, const float *A, int64_t lda,
                                         const float *B, int64_t ldb, float beta, float *C,
                                         int64_t ldc);

EM_PLUGIN_EXPORT int ember_cpu_tile_gemm(const char *path, int ta, int tb, int64_t m, int64_t n,
                                         int64_t k, float alpha, const float *A, int64_t lda,
                                         const float *B, int64_t ldb, float beta, float *C,
                                         int64_t ldc) {
  const int p = path ? cpu_tg_parse(path) : -1;
  if (p < 0 || !cpu_tg_runs(p)) return -1;
  cpu_tg_run(p, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
  return 0;
}
