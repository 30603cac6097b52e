/*
** cpu_tile_rows.c -- the fused attention kernel's products with few query
** rows (a decoding step: one row, a few with GQA or a short chunk), read
** straight from K's and V's rows instead of packed tiles (cpu_tile_gemm.c
** packs K^T per tile, which costs more than such a product). float32
** (cpu_tile_rows) and bfloat16 K and V (cpu_tile_rows_bf16), on the path
** cpu_tile_gemm.c chose for the process.
*/
#include "cpu_tile_gemm.h"
#include "ember_plugin.h"
#include "cpu_bf16_avx512.h"

#include <stdlib.h>
#include <string.h>

#if TG_X86
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
  if (cpu_tg_empty(m, n, k, beta, C, ldc)) return;
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
    case TG_BLAS: cpu_tg_run(path, false, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc); return;
    default: tg_rows_plain(tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc); return;
  }
}

void cpu_tile_rows(bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *A,
                   int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
  tg_rows_run(cpu_tg_path(), tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
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

/* ---- the same products on vdpbf16ps (where cpu_bgemm_dp) ----
**
** Where the tiles (cpu_bgemm.c) multiply with vdpbf16ps, so do these rows:
** one instruction adds a bfloat16 pair's two products into a float32 lane
** (the products exact, denormals flushed, as the tiles'), where the path
** above widens B's halves and needs two FMAs. A decoding step's attention
** at 2048 cached keys took 42 us for 8 heads on one thread that way. The
** sums run in this path's own order: a key's dot as 16 pair lanes folded
** by tg_hsum16x16; a V column's sum over four chains of key pairs. */
#define TG_DP __attribute__((target("avx512f,avx512bw,avx512bf16,avx2,fma")))

/* Lane j = the sum of v[j]'s 16 lanes: a transpose by halves (lanes 2 and
** 2 apart, then 64-bit pairs, then 128-bit quarters twice). */
TG_DP TG_INLINE __m512 tg_hsum16x16(const __m512 v[16]) {
  __m512 w[8], x[4];
#pragma GCC unroll 8
  for (int i = 0; i < 8; i++)
    w[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
#pragma GCC unroll 4
  for (int i = 0; i < 4; i++) {
    const __m512d a = _mm512_castps_pd(w[2 * i]), b = _mm512_castps_pd(w[2 * i + 1]);
    x[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  }
  const __m512 z0 = _mm512_add_ps(_mm512_shuffle_f32x4(x[0], x[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                  _mm512_shuffle_f32x4(x[0], x[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512 z1 = _mm512_add_ps(_mm512_shuffle_f32x4(x[2], x[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                  _mm512_shuffle_f32x4(x[2], x[3], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(z0, z1, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(z0, z1, _MM_SHUFFLE(3, 1, 3, 1)));
}

/* C[0..nj) = alpha * s (+ beta * C), nj <= 16. */
TG_DP TG_INLINE void tg_store_dp(float *C, __m512 s, int nj, float alpha, float beta) {
  const __mmask16 mk = (__mmask16)(nj >= 16 ? 0xffff : (1u << nj) - 1);
  s = _mm512_mul_ps(_mm512_set1_ps(alpha), s);
  if (beta != 0) s = _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(mk, C), s);
  _mm512_mask_storeu_ps(C, mk, s);
}

/* One key's dot with the row q (NP vectors of 16 pairs: k = 32 NP). */
TG_DP TG_INLINE __m512 tg_key_dp(const __m512bh q[2], const int NP, const uint16_t *b) {
  __m512 s = _mm512_dpbf16_ps(_mm512_setzero_ps(), q[0], (__m512bh)_mm512_loadu_si512((const void *)b));
  if (NP == 2) s = _mm512_dpbf16_ps(s, q[1], (__m512bh)_mm512_loadu_si512((const void *)(b + 32)));
  return s;
}

/* Row q with keys b[0..n): 16 at a time, the last block's missing keys
** zero (not read). */
TG_DP static void tg_dot_dp(const uint16_t *a, const int NP, const uint16_t *B, int64_t ldb, int64_t n,
                            float alpha, float beta, float *C) {
  __m512bh q[2];
  q[0] = (__m512bh)_mm512_loadu_si512((const void *)a);
  q[1] = NP == 2 ? (__m512bh)_mm512_loadu_si512((const void *)(a + 32)) : q[0];
  int64_t j0 = 0;
  for (; j0 + 16 <= n; j0 += 16) {
    __m512 acc[16];
    const uint16_t *b = B + j0 * ldb;
#pragma GCC unroll 16
    for (int j = 0; j < 16; j++) acc[j] = tg_key_dp(q, NP, b + j * ldb);
    tg_store_dp(C + j0, tg_hsum16x16(acc), 16, alpha, beta);
  }
  if (j0 < n) {
    __m512 acc[16];
    const int nj = (int)(n - j0);
    for (int j = 0; j < 16; j++) acc[j] = j < nj ? tg_key_dp(q, NP, B + (j0 + j) * ldb) : _mm512_setzero_ps();
    tg_store_dp(C + j0, tg_hsum16x16(acc), nj, alpha, beta);
  }
}

/* One row of C, columns [x0, x0 + 32 NV): sum over k of a[p] B[p][x],
** key pairs (p, p + 1) interleaved by vpunpck{l,h}wd into the pairs
** vdpbf16ps takes, with a's pair broadcast; four chains of pairs
** (t mod 4). a is k bfloat16 padded with a zero to even length. */
TG_DP TG_INLINE void tg_axpy_dp(const uint16_t *a, const uint16_t *B, int64_t ldb, int64_t k, int64_t x0,
                                const int NV, float alpha, float beta, float *C) {
  __m512 lo[4][2], hi[4][2];
#pragma GCC unroll 4
  for (int u = 0; u < 4; u++)
#pragma GCC unroll 2
    for (int v = 0; v < NV; v++) lo[u][v] = hi[u][v] = _mm512_setzero_ps();
  const uint16_t *b = B + x0;
  const int64_t pairs = k / 2;
  int64_t t = 0;
#define TG_PAIR(U, T_, ODD)                                                                          \
  do {                                                                                               \
    uint32_t w_;                                                                                     \
    memcpy(&w_, a + 2 * (T_), 4);                                                                    \
    const __m512bh av_ = (__m512bh)_mm512_set1_epi32((int)w_);                                       \
    const uint16_t *r0_ = b + 2 * (T_)*ldb;                                                          \
    for (int v = 0; v < NV; v++) {                                                                   \
      const __m512i e_ = _mm512_loadu_si512((const void *)(r0_ + 32 * v));                           \
      const __m512i o_ = (ODD) ? _mm512_setzero_si512() : _mm512_loadu_si512((const void *)(r0_ + ldb + 32 * v)); \
      lo[U][v] = _mm512_dpbf16_ps(lo[U][v], (__m512bh)_mm512_unpacklo_epi16(e_, o_), av_);          \
      hi[U][v] = _mm512_dpbf16_ps(hi[U][v], (__m512bh)_mm512_unpackhi_epi16(e_, o_), av_);          \
    }                                                                                                \
  } while (0)
  for (; t + 4 <= pairs; t += 4) {
    TG_PAIR(0, t, false);
    TG_PAIR(1, t + 1, false);
    TG_PAIR(2, t + 2, false);
    TG_PAIR(3, t + 3, false);
  }
  for (int u = 0; t < pairs; t++, u++) TG_PAIR(u, t, false);
  if (k % 2) TG_PAIR(3, pairs, true); /* the last key, paired with a zero */
#undef TG_PAIR
  /* lo's lane 4L + i holds column 8L + i of the 32, hi's column 8L + 4 + i */
  const __m512i c0 = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const __m512i c1 = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
#pragma GCC unroll 2
  for (int v = 0; v < NV; v++) {
    const __m512 sl = _mm512_add_ps(_mm512_add_ps(lo[0][v], lo[1][v]), _mm512_add_ps(lo[2][v], lo[3][v]));
    const __m512 sh = _mm512_add_ps(_mm512_add_ps(hi[0][v], hi[1][v]), _mm512_add_ps(hi[2][v], hi[3][v]));
    tg_store_dp(C + x0 + 32 * v, _mm512_permutex2var_ps(sl, c0, sh), 16, alpha, beta);
    tg_store_dp(C + x0 + 32 * v + 16, _mm512_permutex2var_ps(sl, c1, sh), 16, alpha, beta);
  }
}

/* Can tg_rows_dp take this product? Dots with a head dim of 32 or 64;
** sums of V's rows 32 columns at a time. */
static bool tg_dp_fits(bool tb, int64_t n, int64_t k) { return tb ? k == 32 || k == 64 : n % 32 == 0; }

/* One row: a (k bfloat16, padded with a zero to even length) times B. */
TG_DP static void tg_rows_dp(bool tb, int64_t n, int64_t k, float alpha, const uint16_t *a, const uint16_t *B,
                             int64_t ldb, float beta, float *c) {
  if (tb) {
    tg_dot_dp(a, k == 64 ? 2 : 1, B, ldb, n, alpha, beta, c);
    return;
  }
  for (int64_t x0 = 0; x0 < n; x0 += 64) {
    if (n - x0 >= 64) tg_axpy_dp(a, B, ldb, k, x0, 2, alpha, beta, c);
    else tg_axpy_dp(a, B, ldb, k, x0, 1, alpha, beta, c);
  }
}

/* A float32 row rounded to bfloat16 as cpu_bgemm.c rounds its operands. */
TG_DP static void tg_round_row(const float *x, int64_t k, uint16_t *out) {
  int64_t p = 0;
  for (; p + 16 <= k; p += 16) _mm256_storeu_si256((__m256i *)(out + p), cpu_bf16x16_round_hw(_mm512_loadu_ps(x + p)));
  for (; p < k; p++) out[p] = em_f32_to_bf16(x[p]);
}
#endif

/* The longest A row the bf16 rows path buffers (a dot's head dim is at
** most 64 there; an axpy's k is a key tile, at most 128). */
enum { TG_ROWS_BF16_K = 256 };

bool cpu_tile_rows_bf16(bool tb, int64_t m, int64_t n, int64_t k, float alpha, const void *A, bool a_bf16,
                        int64_t lda, const uint16_t *B, int64_t ldb, float beta, float *C, int64_t ldc) {
#if TG_X86
  if (cpu_tg_path() != TG_AVX512_PATH || k > TG_ROWS_BF16_K || (tb && k > 64)) return false;
  if (cpu_tg_empty(m, n, k, beta, C, ldc)) return true;
  if (cpu_bgemm_dp() && tg_dp_fits(tb, n, k)) {
    uint16_t a[TG_ROWS_BF16_K + 2];
    for (int64_t r = 0; r < m; r++) {
      if (a_bf16) memcpy(a, (const uint16_t *)A + r * lda, (size_t)k * 2);
      else tg_round_row((const float *)A + r * lda, k, a);
      a[k] = 0;
      tg_rows_dp(tb, n, k, alpha, a, B, ldb, beta, C + r * ldc);
    }
    return true;
  }
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

/* The same for cpu_tile_rows (tb: dot products with B's rows; else rows
** of A times B). */
EM_PLUGIN_EXPORT int ember_cpu_tile_rows(const char *path, int tb, int64_t m, int64_t n, int64_t k,
                                         float alpha, const float *A, int64_t lda, const float *B,
                                         int64_t ldb, float beta, float *C, int64_t ldc);

EM_PLUGIN_EXPORT int ember_cpu_tile_rows(const char *path, int tb, int64_t m, int64_t n, int64_t k,
                                         float alpha, const float *A, int64_t lda, const float *B,
                                         int64_t ldb, float beta, float *C, int64_t ldc) {
  const int p = path ? cpu_tg_parse(path) : -1;
  if (p < 0 || !cpu_tg_runs(p)) return -1;
  tg_rows_run(p, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
  return 0;
}

