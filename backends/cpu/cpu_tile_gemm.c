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
#include "cpu_internal.h"
#include "ember_plugin.h"

#include <cblas.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TG_X86 1
#define TG_AVX2 __attribute__((target("avx2,fma")))
#define TG_AVX512 __attribute__((target("avx512f,avx2,fma")))
#else
#define TG_X86 0
#endif
#define TG_INLINE static inline __attribute__((always_inline))

/* k is summed in chunks of KC: a packed panel is KC x 32 floats (32 KiB). */
enum { TG_KC = 256 };

enum { TG_PLAIN, TG_AVX2_PATH, TG_AVX512_PATH, TG_BLAS };
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

/* Can this CPU run path p? */
static bool tg_runs(int p) {
  if (p == TG_PLAIN || p == TG_BLAS) return true;
#if TG_X86
  if (p == TG_AVX2_PATH) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (p == TG_AVX512_PATH) return __builtin_cpu_supports("avx512f");
#endif
  return false;
}

static int tg_parse(const char *s) {
  for (int p = 0; p < 4; p++)
    if (strcasecmp(s, tg_names[p]) == 0) return p;
  return -1;
}

static void tg_choose(void) {
  static const char *const what[] = {"GNU C vectors, 4x8 blocks", "ember's 6x16 FMA tiles",
                                     "ember's 8x32 FMA tiles", "OpenBLAS sgemm"};
  const char *force = getenv("EMBER_CPU_TILE_GEMM");
  const int best = tg_best(), asked = force && *force ? tg_parse(force) : -1;
  tg_path = asked >= 0 && tg_runs(asked) ? asked : best;
  if (!force || !*force)
    snprintf(tg_desc, sizeof tg_desc, "%s (%s)", tg_names[tg_path], what[tg_path]);
  else if (asked == tg_path) /* no ';' inside: cpu_info's line uses it between its parts */
    snprintf(tg_desc, sizeof tg_desc, "%s (%s, forced by EMBER_CPU_TILE_GEMM)", tg_names[tg_path], what[tg_path]);
  else
    snprintf(tg_desc, sizeof tg_desc, "%s (%s, EMBER_CPU_TILE_GEMM=%.24s %s)", tg_names[tg_path],
             what[tg_path], force, asked < 0 ? "is not avx512, avx2, plain or blas" : "does not run on this CPU");
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

/* ---- few rows: products read straight from B's rows (cpu_tile_rows) ----
**
** A decoding step multiplies one query row (a few with GQA or a short
** chunk) by every cached key: packing K^T there costs more than the
** product. Here each element is summed in a fixed order that does not
** depend on the ISA, the shape or the element's place, so avx512 and avx2
** give the same bits (plain C too where its compiler contracts to FMA):
**  - dot (tb): lane i of 16 sums a_p b_p for p = i mod 16 in order (one
**    FMA each), lanes l[i] + l[i+8] folded, then
**    ((f0+f1)+(f2+f3)) + ((f4+f5)+(f6+f7)); C = alpha * s (+ beta * C);
**  - axpy: four partial sums over k = u mod 4 (one FMA each, in order),
**    ((s0+s1)+(s2+s3)); C = alpha * s (+ beta * C). Four chains, not one:
**    a single row's single chain waited on each FMA's latency.
** Neither is cpu_tile_gemm's order, so results agree with it within
** float32 rounding, not to the bit. */

/* The four sums of f[0..4) (8 lanes each), one per vector, each as
** ((l0+l1)+(l2+l3)) + ((l4+l5)+(l6+l7)). */
TG_AVX2 TG_INLINE __m128 tg_hsum4(__m256 f0, __m256 f1, __m256 f2, __m256 f3) {
  const __m256 u = _mm256_hadd_ps(_mm256_hadd_ps(f0, f1), _mm256_hadd_ps(f2, f3));
  return _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1));
}

/* C[0..nj) = alpha * s (+ beta * C by one FMA), nj <= 4. */
TG_AVX2 TG_INLINE void tg_store4(float *C, __m128 s, int nj, float alpha, float beta) {
  __m128 x = _mm_mul_ps(_mm_set1_ps(alpha), s);
  if (nj == 4) {
    if (beta != 0) x = _mm_fmadd_ps(_mm_set1_ps(beta), _mm_loadu_ps(C), x);
    _mm_storeu_ps(C, x);
    return;
  }
  float t[4];
  _mm_storeu_ps(t, x);
  for (int j = 0; j < nj; j++) C[j] = beta != 0 ? fmaf(beta, C[j], t[j]) : t[j];
}

/* AVX2: row a with keys b[0..nj) (nj <= 4), the 16 lanes as two ymm halves. */
TG_AVX2 static __m128 tg_dot4_avx2(const float *a, const float *b, int64_t ldb, int nj, int64_t k) {
  __m256 lo[4], hi[4];
  for (int j = 0; j < 4; j++) lo[j] = hi[j] = _mm256_setzero_ps();
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t p = 0; p < k; p += 16) {
    const int64_t left = k - p;
    const __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(left > 8 ? 8 : (int)left), lane);
    const __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(left > 16 ? 8 : left > 8 ? (int)left - 8 : 0), lane);
    const __m256 a0 = _mm256_maskload_ps(a + p, m0), a1 = _mm256_maskload_ps(a + p + 8, m1);
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
      if (j >= nj) break;
      lo[j] = _mm256_fmadd_ps(a0, _mm256_maskload_ps(b + j * ldb + p, m0), lo[j]);
      hi[j] = _mm256_fmadd_ps(a1, _mm256_maskload_ps(b + j * ldb + p + 8, m1), hi[j]);
    }
  }
  return tg_hsum4(_mm256_add_ps(lo[0], hi[0]), _mm256_add_ps(lo[1], hi[1]), _mm256_add_ps(lo[2], hi[2]),
                  _mm256_add_ps(lo[3], hi[3]));
}

TG_AVX2 static void tg_dot_avx2(int64_t m, int64_t n, int64_t k, float alpha, const float *A,
                                int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                                int64_t ldc) {
  for (int64_t j0 = 0; j0 < n; j0 += 4) {
    const int nj = n - j0 < 4 ? (int)(n - j0) : 4;
    for (int64_t r = 0; r < m; r++)
      tg_store4(C + r * ldc + j0, tg_dot4_avx2(A + r * lda, B + j0 * ldb, ldb, nj, k), nj, alpha, beta);
  }
}

/* 16 bfloat16 values from p as float32. */
TG_AVX512 TG_INLINE __m512 tg_wide16(const uint16_t *p) {
  const __m256i h = _mm256_loadu_si256((const __m256i *)p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* The same for the last, partial vector of a row: only `left` (< 16) of
** them, the rest 0 (a copy: no read past the row). */
TG_AVX512 static __m512 tg_wide16_part(const uint16_t *p, int64_t left) {
  uint16_t t[16] = {0};
  for (int64_t i = 0; i < left; i++) t[i] = p[i];
  return tg_wide16(t);
}

/* Full or partial, by `left`. */
#define TG_WIDE(P, LEFT) ((LEFT) >= 16 ? tg_wide16(P) : (LEFT) > 0 ? tg_wide16_part(P, LEFT) : _mm512_setzero_ps())

/* 16 elements of a row of B as float32: float32 itself (masked to mk) or,
** with BF, bfloat16 widened (the `left` of them; cpu_tile_rows_bf16). */
#define TG_ROW16(BF, P, MK, LEFT) \
  ((BF) ? TG_WIDE((const uint16_t *)(P), LEFT) : _mm512_maskz_loadu_ps(MK, (const float *)(P)))

/* C[0..nj) = alpha * (the 16 lanes of acc[j] summed, as tg_dot16's order
** says) (+ beta * C), nj <= 16. */
TG_AVX512 TG_INLINE void tg_store16(const __m512 acc[16], int nj, float alpha, float beta, float *C) {
#pragma GCC unroll 4
  for (int g = 0; g < 4; g++) {
    if (4 * g >= nj) break;
    __m256 f[4];
#pragma GCC unroll 4
    for (int x = 0; x < 4; x++) {
      const __m512 v = acc[4 * g + x];
      f[x] = _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    }
    tg_store4(C + 4 * g, tg_hsum4(f[0], f[1], f[2], f[3]), nj - 4 * g < 4 ? nj - 4 * g : 4, alpha, beta);
  }
}

/* AVX-512: row a with keys b[0..nj) (nj <= 16) into C[0..nj), one zmm
** accumulator per key. NQ > 0: k <= 16 * NQ, a held in NQ registers and
** each key's row read front to back; NQ == 0: any k, 16 at a time. */
TG_AVX512 TG_INLINE void tg_dot16(const float *a, const void *bv, int64_t ldb, int nj, int64_t k,
                                  const int NQ, const int BF, float alpha, float beta, float *C) {
  const size_t es = BF ? 2 : 4; /* element size of the keys: float32, or bfloat16 with BF */
  const char *b = (const char *)bv;
  __m512 acc[16];
#pragma GCC unroll 16
  for (int j = 0; j < 16; j++) acc[j] = _mm512_setzero_ps();
  if (NQ > 0) {
    __m512 av[4];
    __mmask16 mk[4];
#pragma GCC unroll 4
    for (int q = 0; q < NQ; q++) {
      const int64_t left = k - 16 * q;
      mk[q] = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
      av[q] = _mm512_maskz_loadu_ps(mk[q], a + 16 * q);
    }
#pragma GCC unroll 16
    for (int j = 0; j < 16; j++) {
      if (j >= nj) break;
#pragma GCC unroll 4
      for (int q = 0; q < NQ; q++) {
        acc[j] = _mm512_fmadd_ps(av[q], TG_ROW16(BF, b + (j * ldb + 16 * q) * es, mk[q], k - 16 * q), acc[j]);
      }
    }
  } else {
    for (int64_t p = 0; p < k; p += 16) {
      const __mmask16 mk = k - p >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (k - p)) - 1);
      const __m512 av = _mm512_maskz_loadu_ps(mk, a + p);
#pragma GCC unroll 16
      for (int j = 0; j < 16; j++)
        if (j < nj) acc[j] = _mm512_fmadd_ps(av, TG_ROW16(BF, b + (j * ldb + p) * es, mk, k - p), acc[j]);
    }
  }
  tg_store16(acc, nj, alpha, beta, C);
}

TG_AVX512 static void tg_dot_avx512(int64_t m, int64_t n, int64_t k, float alpha, const float *A,
                                    int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                                    int64_t ldc) {
  const int64_t nq = (k + 15) / 16;
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    const int nj = n - j0 < 16 ? (int)(n - j0) : 16;
    const float *b = B + j0 * ldb;
    for (int64_t r = 0; r < m; r++) {
      const float *a = A + r * lda;
      float *c = C + r * ldc + j0;
      switch (nq) { /* head dims up to 64 (16 * 4) keep q in registers */
        case 1: tg_dot16(a, b, ldb, nj, k, 1, 0, alpha, beta, c); break;
        case 2: tg_dot16(a, b, ldb, nj, k, 2, 0, alpha, beta, c); break;
        case 3: tg_dot16(a, b, ldb, nj, k, 3, 0, alpha, beta, c); break;
        case 4: tg_dot16(a, b, ldb, nj, k, 4, 0, alpha, beta, c); break;
        default: tg_dot16(a, b, ldb, nj, k, 0, 0, alpha, beta, c); break;
      }
    }
  }
}

/* AVX-512: one row of C, columns [x0, x0 + 16 NV) (masked past ncols); B
** float32, or bfloat16 with BF. */
TG_AVX512 TG_INLINE void tg_axpy5(const float *a, const void *Bv, int64_t ldb, int64_t k, int64_t x0,
                                  int64_t ncols, const int NV, const int BF, float alpha, float beta, float *C) {
  __mmask16 mk[4];
  int64_t left[4];
  for (int v = 0; v < NV; v++) {
    left[v] = ncols - x0 - 16 * v;
    mk[v] = left[v] >= 16 ? (__mmask16)0xffff : left[v] > 0 ? (__mmask16)((1u << left[v]) - 1) : 0;
  }
  __m512 acc[4][4];
#pragma GCC unroll 4
  for (int u = 0; u < 4; u++)
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) acc[u][v] = _mm512_setzero_ps();
  const size_t es = BF ? 2 : 4; /* element size of B */
  const char *b = (const char *)Bv + x0 * es;
  int64_t p = 0;
  for (; p + 4 <= k; p += 4)
#pragma GCC unroll 4
    for (int u = 0; u < 4; u++) {
      const __m512 av = _mm512_set1_ps(a[p + u]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; v++)
        acc[u][v] = _mm512_fmadd_ps(av, TG_ROW16(BF, b + ((p + u) * ldb + 16 * v) * es, mk[v], left[v]), acc[u][v]);
    }
#pragma GCC unroll 4
  for (int u = 0; u < 3; u++) {
    if (p + u >= k) break;
    const __m512 av = _mm512_set1_ps(a[p + u]);
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++)
      acc[u][v] = _mm512_fmadd_ps(av, TG_ROW16(BF, b + ((p + u) * ldb + 16 * v) * es, mk[v], left[v]), acc[u][v]);
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 4
  for (int v = 0; v < NV; v++) {
    const __m512 sum = _mm512_add_ps(_mm512_add_ps(acc[0][v], acc[1][v]), _mm512_add_ps(acc[2][v], acc[3][v]));
    float *c = C + x0 + 16 * v;
    __m512 x = _mm512_mul_ps(va, sum);
    if (beta != 0) x = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mk[v], c), x);
    _mm512_mask_storeu_ps(c, mk[v], x);
  }
}

TG_AVX512 static void tg_axpy_avx512(int64_t m, int64_t n, int64_t k, float alpha, const float *A,
                                     int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                                     int64_t ldc) {
  for (int64_t r = 0; r < m; r++)
    for (int64_t x0 = 0; x0 < n; x0 += 64) {
      const int64_t w = n - x0; /* 16 columns a vector: as few as cover them (head dim 32: 2) */
      const float *a = A + r * lda;
      float *c = C + r * ldc;
      if (w > 48) tg_axpy5(a, B, ldb, k, x0, n, 4, 0, alpha, beta, c);
      else if (w > 32) tg_axpy5(a, B, ldb, k, x0, n, 3, 0, alpha, beta, c);
      else if (w > 16) tg_axpy5(a, B, ldb, k, x0, n, 2, 0, alpha, beta, c);
      else tg_axpy5(a, B, ldb, k, x0, n, 1, 0, alpha, beta, c);
    }
}

/* AVX2: the same sums, 16 columns (2 ymm) at a time. */
TG_AVX2 static void tg_axpy_avx2(int64_t m, int64_t n, int64_t k, float alpha, const float *A,
                                 int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                                 int64_t ldc) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t r = 0; r < m; r++)
    for (int64_t x0 = 0; x0 < n; x0 += 16) {
      const float *a = A + r * lda, *b = B + x0;
      __m256i mk[2];
      for (int v = 0; v < 2; v++) {
        const int64_t left = n - x0 - 8 * v;
        mk[v] = _mm256_cmpgt_epi32(_mm256_set1_epi32(left >= 8 ? 8 : left > 0 ? (int)left : 0), lane);
      }
      __m256 acc[4][2];
      for (int u = 0; u < 4; u++) acc[u][0] = acc[u][1] = _mm256_setzero_ps();
      for (int64_t p = 0; p < k; p++) {
        const int u = (int)(p & 3);
        const __m256 av = _mm256_broadcast_ss(a + p);
        acc[u][0] = _mm256_fmadd_ps(av, _mm256_maskload_ps(b + p * ldb, mk[0]), acc[u][0]);
        acc[u][1] = _mm256_fmadd_ps(av, _mm256_maskload_ps(b + p * ldb + 8, mk[1]), acc[u][1]);
      }
      for (int v = 0; v < 2; v++) {
        const __m256 sum = _mm256_add_ps(_mm256_add_ps(acc[0][v], acc[1][v]), _mm256_add_ps(acc[2][v], acc[3][v]));
        float *c = C + r * ldc + x0 + 8 * v;
        __m256 x = _mm256_mul_ps(_mm256_set1_ps(alpha), sum);
        if (beta != 0) x = _mm256_fmadd_ps(_mm256_set1_ps(beta), _mm256_maskload_ps(c, mk[v]), x);
        _mm256_maskstore_ps(c, mk[v], x);
      }
    }
}
#endif

/* k == 0: C = beta * C (0 where beta is 0, even over NaN: BLAS's rule). */
static void tg_scale(int64_t m, int64_t n, float beta, float *C, int64_t ldc) {
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) C[i * ldc + j] = beta == 0 ? 0 : beta * C[i * ldc + j];
}

/* An empty product (nothing to write, or k = 0: C = beta C); true when done. */
static bool tg_empty(int64_t m, int64_t n, int64_t k, float beta, float *C, int64_t ldc) {
  if (m <= 0 || n <= 0) return true;
  if (k > 0) return false;
  tg_scale(m, n, beta, C, ldc);
  return true;
}

static void tg_run(int path, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                   const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                   int64_t ldc) {
  if (tg_empty(m, n, k, beta, C, ldc)) return;
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
  tg_run(tg_path, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}


/* Plain C: the same orders (without FMA where the compiler does not
** contract: the last bits may differ). */
static void tg_rows_plain(bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *A,
                          int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                          int64_t ldc) {
  for (int64_t r = 0; r < m; r++)
    for (int64_t j = 0; j < n; j++) {
      float s;
      if (tb) {
        float l[16] = {0}, f[8];
        for (int64_t p = 0; p < k; p++) l[p % 16] += A[r * lda + p] * B[j * ldb + p];
        for (int i = 0; i < 8; i++) f[i] = l[i] + l[i + 8];
        s = ((f[0] + f[1]) + (f[2] + f[3])) + ((f[4] + f[5]) + (f[6] + f[7]));
      } else {
        float u[4] = {0};
        for (int64_t p = 0; p < k; p++) u[p % 4] += A[r * lda + p] * B[p * ldb + j];
        s = (u[0] + u[1]) + (u[2] + u[3]);
      }
      float *c = C + r * ldc + j;
      *c = beta != 0 ? alpha * s + beta * *c : alpha * s;
    }
}

static void tg_rows_run(int path, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                        const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                        float *C, int64_t ldc) {
  if (tg_empty(m, n, k, beta, C, ldc)) return;
  switch (path) {
#if TG_X86
    case TG_AVX512_PATH:
      if (tb) tg_dot_avx512(m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
      else tg_axpy_avx512(m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
      return;
    case TG_AVX2_PATH:
      if (tb) tg_dot_avx2(m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
      else tg_axpy_avx2(m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
      return;
#endif
    case TG_BLAS: tg_run(path, false, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc); return;
    default: tg_rows_plain(tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc); return;
  }
}

void cpu_tile_rows(bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *A,
                   int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
  pthread_once(&tg_once, tg_choose);
  tg_rows_run(tg_path, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* ---- few rows with bfloat16 keys and values (cpu_tile_rows_bf16) ----
**
** The same two products for the kernel's bfloat16 path (a decoding step
** under ember.autocast: its cache holds bfloat16 K and V), B's bfloat16
** rows widened in registers as they are read. A (a query row, dO, or P)
** is first made float32 in a row buffer, rounded to bfloat16 when it was
** float32, as cpu_bgemm.c rounds it: so both operands are bfloat16 values,
** their products exact, the sums float32 in the orders of the float32
** rows path above. AVX-512 only; elsewhere the tile path runs. */

#if TG_X86

/* Whole 512-bit loads of 32 bfloat16 values split into the even ones
** (shifted up) and the odd ones (masked): no widening shuffle. A product
** then pairs even with even and odd with odd, and its sums run in that
** order (a head dim of 32 or 64, or 32-column blocks of V). */
TG_AVX512 TG_INLINE void tg_split32(const uint16_t *p, __m512 *even, __m512 *odd) {
  const __m512i x = _mm512_loadu_si512((const void *)p);
  *even = _mm512_castsi512_ps(_mm512_slli_epi32(x, 16));
  *odd = _mm512_castsi512_ps(_mm512_and_si512(x, _mm512_set1_epi32((int)0xffff0000u)));
}

/* Row a (k = 32 NP floats) with keys b[0..nj): lane i sums a[2i] b[2i] and
** a[2i+1] b[2i+1] of each 32, then the lanes are summed as tg_dot16's. */
TG_AVX512 TG_INLINE void tg_dot32_bf16(const float *a, const uint16_t *b, int64_t ldb, int nj, const int NP,
                                       float alpha, float beta, float *C) {
  const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i io = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  __m512 qe[2], qo[2], acc[16];
#pragma GCC unroll 2
  for (int q = 0; q < NP; q++) {
    const __m512 lo = _mm512_loadu_ps(a + 32 * q), hi = _mm512_loadu_ps(a + 32 * q + 16);
    qe[q] = _mm512_permutex2var_ps(lo, ie, hi);
    qo[q] = _mm512_permutex2var_ps(lo, io, hi);
  }
#pragma GCC unroll 16
  for (int j = 0; j < 16; j++) {
    acc[j] = _mm512_setzero_ps();
    if (j >= nj) continue;
#pragma GCC unroll 2
    for (int q = 0; q < NP; q++) {
      __m512 ke, ko;
      tg_split32(b + j * ldb + 32 * q, &ke, &ko);
      acc[j] = _mm512_fmadd_ps(qe[q], ke, acc[j]);
      acc[j] = _mm512_fmadd_ps(qo[q], ko, acc[j]);
    }
  }
  tg_store16(acc, nj, alpha, beta, C);
}

/* One row of C, columns [x0, x0 + 32 NV) (all inside it): four partial
** sums over k = u mod 4 as tg_axpy5's, even and odd columns apart, then
** put back in order. */
TG_AVX512 TG_INLINE void tg_axpy32_bf16(const float *a, const uint16_t *B, int64_t ldb, int64_t k, int64_t x0,
                                        const int NV, float alpha, float beta, float *C) {
  __m512 ae[4][2], ao[4][2];
#pragma GCC unroll 4
  for (int u = 0; u < 4; u++)
#pragma GCC unroll 2
    for (int v = 0; v < NV; v++) ae[u][v] = ao[u][v] = _mm512_setzero_ps();
  const uint16_t *b = B + x0;
  int64_t p = 0;
  for (; p + 4 <= k; p += 4)
#pragma GCC unroll 4
    for (int u = 0; u < 4; u++) {
      const __m512 av = _mm512_set1_ps(a[p + u]);
#pragma GCC unroll 2
      for (int v = 0; v < NV; v++) {
        __m512 e, o;
        tg_split32(b + (p + u) * ldb + 32 * v, &e, &o);
        ae[u][v] = _mm512_fmadd_ps(av, e, ae[u][v]);
        ao[u][v] = _mm512_fmadd_ps(av, o, ao[u][v]);
      }
    }
#pragma GCC unroll 4
  for (int u = 0; u < 3; u++) {
    if (p + u >= k) break;
    const __m512 av = _mm512_set1_ps(a[p + u]);
#pragma GCC unroll 2
    for (int v = 0; v < NV; v++) {
      __m512 e, o;
      tg_split32(b + (p + u) * ldb + 32 * v, &e, &o);
      ae[u][v] = _mm512_fmadd_ps(av, e, ae[u][v]);
      ao[u][v] = _mm512_fmadd_ps(av, o, ao[u][v]);
    }
  }
  const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 2
  for (int v = 0; v < NV; v++) {
    const __m512 se = _mm512_add_ps(_mm512_add_ps(ae[0][v], ae[1][v]), _mm512_add_ps(ae[2][v], ae[3][v]));
    const __m512 so = _mm512_add_ps(_mm512_add_ps(ao[0][v], ao[1][v]), _mm512_add_ps(ao[2][v], ao[3][v]));
    float *c = C + x0 + 32 * v;
    __m512 x0v = _mm512_mul_ps(va, _mm512_permutex2var_ps(se, lo, so));
    __m512 x1v = _mm512_mul_ps(va, _mm512_permutex2var_ps(se, hi, so));
    if (beta != 0) {
      x0v = _mm512_fmadd_ps(vb, _mm512_loadu_ps(c), x0v);
      x1v = _mm512_fmadd_ps(vb, _mm512_loadu_ps(c + 16), x1v);
    }
    _mm512_storeu_ps(c, x0v);
    _mm512_storeu_ps(c + 16, x1v);
  }
}

TG_AVX512 static void tg_rows_bf16_avx512(bool tb, int64_t n, int64_t k, float alpha, const float *a,
                                          const uint16_t *B, int64_t ldb, float beta, float *c) {
  if (tb && (k == 32 || k == 64)) {
    for (int64_t j0 = 0; j0 < n; j0 += 16) {
      const int nj = n - j0 < 16 ? (int)(n - j0) : 16;
      if (k == 32) tg_dot32_bf16(a, B + j0 * ldb, ldb, nj, 1, alpha, beta, c + j0);
      else tg_dot32_bf16(a, B + j0 * ldb, ldb, nj, 2, alpha, beta, c + j0);
    }
    return;
  }
  if (!tb && n % 32 == 0) {
    for (int64_t x0 = 0; x0 < n; x0 += 64) {
      if (n - x0 >= 64) tg_axpy32_bf16(a, B, ldb, k, x0, 2, alpha, beta, c);
      else tg_axpy32_bf16(a, B, ldb, k, x0, 1, alpha, beta, c);
    }
    return;
  }
  if (tb) {
    const int64_t nq = (k + 15) / 16;
    for (int64_t j0 = 0; j0 < n; j0 += 16) {
      const uint16_t *b = B + j0 * ldb;
      const int nj = n - j0 < 16 ? (int)(n - j0) : 16;
      switch (nq) { /* k <= 64 here (cpu_tile_rows_bf16) */
        case 1: tg_dot16(a, b, ldb, nj, k, 1, 1, alpha, beta, c + j0); break;
        case 2: tg_dot16(a, b, ldb, nj, k, 2, 1, alpha, beta, c + j0); break;
        case 3: tg_dot16(a, b, ldb, nj, k, 3, 1, alpha, beta, c + j0); break;
        default: tg_dot16(a, b, ldb, nj, k, 4, 1, alpha, beta, c + j0); break;
      }
    }
    return;
  }
  for (int64_t x0 = 0; x0 < n; x0 += 64) {
    const int64_t w = n - x0;
    if (w > 48) tg_axpy5(a, B, ldb, k, x0, n, 4, 1, alpha, beta, c);
    else if (w > 32) tg_axpy5(a, B, ldb, k, x0, n, 3, 1, alpha, beta, c);
    else if (w > 16) tg_axpy5(a, B, ldb, k, x0, n, 2, 1, alpha, beta, c);
    else tg_axpy5(a, B, ldb, k, x0, n, 1, 1, alpha, beta, c);
  }
}
#endif

/* The longest A row the bf16 rows path buffers (a dot's head dim is at
** most 64 there; an axpy's k is a key tile, at most 128). */
enum { TG_ROWS_BF16_K = 256 };

bool cpu_tile_rows_bf16(bool tb, int64_t m, int64_t n, int64_t k, float alpha, const void *A, bool a_bf16,
                        int64_t lda, const uint16_t *B, int64_t ldb, float beta, float *C, int64_t ldc) {
  pthread_once(&tg_once, tg_choose);
#if TG_X86
  if (tg_path != TG_AVX512_PATH || k > TG_ROWS_BF16_K || (tb && k > 64)) return false;
  if (tg_empty(m, n, k, beta, C, ldc)) return true;
  float a[TG_ROWS_BF16_K];
  for (int64_t r = 0; r < m; r++) {
    if (a_bf16) {
      const uint16_t *ar = (const uint16_t *)A + r * lda;
      for (int64_t p = 0; p < k; p++) a[p] = em_bf16_to_f32(ar[p]);
    } else { /* rounded as cpu_bgemm.c packs a float32 operand */
      const float *ar = (const float *)A + r * lda;
      for (int64_t p = 0; p < k; p++) a[p] = em_bf16_to_f32(em_f32_to_bf16(ar[p]));
    }
    tg_rows_bf16_avx512(tb, n, k, alpha, a, B, ldb, beta, C + r * ldc);
  }
  return true;
#else
  (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)A, (void)a_bf16, (void)lda, (void)B, (void)ldb,
      (void)beta, (void)C, (void)ldc;
  return false;
#endif
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
  const int p = path ? tg_parse(path) : -1;
  if (p < 0 || !tg_runs(p)) return -1;
  tg_run(p, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
  return 0;
}

/* The same for cpu_tile_rows (tb: dot products with B's rows; else rows
** of A times B). */
EM_PLUGIN_EXPORT int ember_cpu_tile_rows(const char *path, int tb, int64_t m, int64_t n, int64_t k,
                                         float alpha, const float *A, int64_t lda, const float *B,
                                         int64_t ldb, float beta, float *C, int64_t ldc);

EM_PLUGIN_EXPORT int ember_cpu_tile_rows(const char *path, int tb, int64_t m, int64_t n, int64_t k,
                                         float alpha, const float *A, int64_t lda, const float *B,
                                         int64_t ldb, float beta, float *C, int64_t ldc) {
  const int p = path ? tg_parse(path) : -1;
  if (p < 0 || !tg_runs(p)) return -1;
  tg_rows_run(p, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
  return 0;
}
