/*
** cpu_bgemm.c -- the bfloat16 products of the fused attention kernel's
** tiles: C[m,n] = alpha * op(A) op(B) + beta * C, on the calling thread,
** with C float32 and A, B each float32 or bfloat16. Both operands are
** rounded to bfloat16 (a float32 operand -- a probability or score
** gradient tile -- is rounded while packed), the products of two bfloat16
** values are exact in float32 and the sums are float32: what PyTorch's
** bf16 matmul computes, and what FlashAttention does with P.
**
** Why not oneDNN: a tile product is 64 x 128 x 32 multiply-adds, about
** 2 us of work, and a oneDNN primitive's execute costs as much again.
**
** Two paths, chosen once per process (cpu_bgemm_path says which):
**  - "avx512_bf16": vdpbf16ps, which multiplies pairs of bfloat16 along k
**    and adds both products into a float32 lane. A is packed as pairs
**    (a[i][2p], a[i][2p+1]) in blocks of 4 rows, B as [k/2][n][2]; a
**    micro-kernel keeps 4 rows x 64 columns of C in 16 registers.
**  - "plain": the same rounded operands widened to float32 and multiplied
**    by OpenBLAS's sgemm; any CPU. Taken when the CPU lacks AVX512_BF16,
**    when ONEDNN_MAX_CPU_ISA caps the machine below it (the tests emulate
**    older CPUs that way), or with EMBER_CPU_BF16_DOT=plain.
** Blocks of MC x NC x KC keep the packed operands on the stack (64 KiB).
*/
#include "cpu_internal.h"

#include <cblas.h>
#include <pthread.h>
#include <strings.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define BG_HAVE_X86 1
#define BG_TARGET __attribute__((target("avx512f,avx512bf16")))
#else
#define BG_HAVE_X86 0
#endif

enum { BG_MC = 64, BG_NC = 64, BG_KC = 256, BG_MR = 4 };

static pthread_once_t bg_once = PTHREAD_ONCE_INIT;
static bool bg_avx;

/* ONEDNN_MAX_CPU_ISA values that still allow AVX512_BF16. */
static bool isa_cap_allows_bf16(const char *cap) {
  static const char *const ok[] = {"ALL", "DEFAULT", "AVX512_CORE_BF16", "AVX512_CORE_FP16",
                                   "AVX512_CORE_AMX", "AVX512_CORE_AMX_FP16", "AVX10_1_512",
                                   "AVX10_1_512_AMX", "AVX10_1_512_AMX_FP16", NULL};
  for (int i = 0; ok[i]; i++)
    if (strcasecmp(cap, ok[i]) == 0) return true;
  return false;
}

static void bg_choose(void) {
#if BG_HAVE_X86
  const char *force = getenv("EMBER_CPU_BF16_DOT");
  const char *cap = getenv("ONEDNN_MAX_CPU_ISA");
  bg_avx = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16") &&
           !(force && strcmp(force, "plain") == 0) && !(cap && *cap && !isa_cap_allows_bf16(cap));
#else
  bg_avx = false;
#endif
}

const char *cpu_bgemm_path(void) {
  pthread_once(&bg_once, bg_choose);
  return bg_avx ? "avx512_bf16 (vdpbf16ps)" : "plain (bfloat16 values, float32 sgemm)";
}

/* Element (i, p) of op(X), as a float32 rounded to bfloat16's bits. */
static inline uint16_t bg_elem(const void *X, bool bf16, bool trans, int64_t ld, int64_t i,
                               int64_t p) {
  const int64_t at = trans ? p * ld + i : i * ld + p;
  return bf16 ? ((const uint16_t *)X)[at] : cpu_f32_to_bf16(((const float *)X)[at]);
}

#if BG_HAVE_X86
/* A rows [i0, i0+mc) x k [p0, p0+kc) as pairs: Ap[((ib * kh) + p) * 4 + r]
** holds rows i0 + 4 ib + r, k 2p and 2p+1 (zero past the edges). */
static void bg_pack_a(uint32_t *Ap, const void *A, bool bf, bool ta, int64_t lda, int64_t i0,
                      int64_t mc, int64_t p0, int64_t kc) {
  const int64_t kh = (kc + 1) / 2, mb = (mc + BG_MR - 1) / BG_MR;
  for (int64_t ib = 0; ib < mb; ib++)
    for (int r = 0; r < BG_MR; r++) {
      const int64_t i = ib * BG_MR + r;
      uint32_t *dst = Ap + ib * kh * BG_MR + r;
      if (i >= mc) {
        for (int64_t p = 0; p < kh; p++) dst[p * BG_MR] = 0;
        continue;
      }
      for (int64_t p = 0; p < kh; p++) {
        const int64_t k0 = 2 * p;
        const uint32_t lo = bg_elem(A, bf, ta, lda, i0 + i, p0 + k0);
        const uint32_t hi = k0 + 1 < kc ? bg_elem(A, bf, ta, lda, i0 + i, p0 + k0 + 1) : 0;
        dst[p * BG_MR] = lo | hi << 16;
      }
    }
}

/* B k [p0, p0+kc) x columns [j0, j0+nc) as Bp[(p * npad + j) * 2 + t] =
** B(p0 + 2p + t, j0 + j), npad = nc rounded up to 16 (zeros past the edges). */
static void bg_pack_b(uint16_t *Bp, const void *B, bool bf, bool tb, int64_t ldb, int64_t p0,
                      int64_t kc, int64_t j0, int64_t nc) {
  const int64_t kh = (kc + 1) / 2, npad = (nc + 15) / 16 * 16;
  for (int64_t p = 0; p < kh; p++) {
    uint16_t *dst = Bp + p * npad * 2;
    for (int t = 0; t < 2; t++) {
      const int64_t kk = 2 * p + t;
      if (kk >= kc) {
        for (int64_t j = 0; j < npad; j++) dst[j * 2 + t] = 0;
        continue;
      }
      for (int64_t j = 0; j < nc; j++) dst[j * 2 + t] = bg_elem(B, bf, !tb, ldb, j0 + j, p0 + kk);
      for (int64_t j = nc; j < npad; j++) dst[j * 2 + t] = 0;
    }
  }
}

/* 4 rows x nv*16 columns of C from packed A (kh pairs) and B (row stride
** npad pairs); stores rows < mr and columns < ncols. */
BG_TARGET static inline __attribute__((always_inline)) void
bg_micro(const uint32_t *Ap, const uint16_t *Bp, int64_t kh, int64_t npad, const int nv, int mr,
         int64_t ncols, float alpha, float beta, float *C, int64_t ldc) {
  __m512 acc[BG_MR][4];
#pragma GCC unroll 4
  for (int r = 0; r < BG_MR; r++)
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++) acc[r][v] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kh; p++) {
    const uint16_t *b = Bp + p * npad * 2;
    __m512bh bv[4];
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++) bv[v] = (__m512bh)_mm512_loadu_si512(b + 32 * v);
#pragma GCC unroll 4
    for (int r = 0; r < BG_MR; r++) {
      const __m512bh a = (__m512bh)_mm512_set1_epi32((int)Ap[p * BG_MR + r]);
#pragma GCC unroll 4
      for (int v = 0; v < nv; v++) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], a, bv[v]);
    }
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++) {
      const int64_t left = ncols - 16 * v;
      const __mmask16 mk = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
      float *c = C + r * ldc + 16 * v;
      __m512 x = _mm512_mul_ps(va, acc[r][v]);
      if (beta != 0) x = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mk, c), x);
      _mm512_mask_storeu_ps(c, mk, x);
    }
}

BG_TARGET static void bg_block(const uint32_t *Ap, const uint16_t *Bp, int64_t mc, int64_t nc,
                               int64_t kc, float alpha, float beta, float *C, int64_t ldc) {
  const int64_t kh = (kc + 1) / 2, npad = (nc + 15) / 16 * 16;
  for (int64_t ib = 0; ib * BG_MR < mc; ib++) {
    const int mr = mc - ib * BG_MR < BG_MR ? (int)(mc - ib * BG_MR) : BG_MR;
    const uint32_t *a = Ap + ib * kh * BG_MR;
    float *c = C + ib * BG_MR * ldc;
    for (int64_t j = 0; j < nc; j += 64) {
      const int64_t cols = nc - j < 64 ? nc - j : 64;
      const uint16_t *b = Bp + j * 2;
      switch ((cols + 15) / 16) { /* constant nv: the accumulators stay in registers */
        case 4: bg_micro(a, b, kh, npad, 4, mr, cols, alpha, beta, c + j, ldc); break;
        case 3: bg_micro(a, b, kh, npad, 3, mr, cols, alpha, beta, c + j, ldc); break;
        case 2: bg_micro(a, b, kh, npad, 2, mr, cols, alpha, beta, c + j, ldc); break;
        default: bg_micro(a, b, kh, npad, 1, mr, cols, alpha, beta, c + j, ldc); break;
      }
    }
  }
}
#endif

/* The plain path's packing: op(X) rows [i0, i0+r) x [p0, p0+cols), as
** float32 values of bfloat16, row-major with stride cols. */
static void bg_pack_f32(float *dst, const void *X, bool bf, bool trans, int64_t ld, int64_t i0,
                        int64_t rows, int64_t p0, int64_t cols) {
  for (int64_t i = 0; i < rows; i++)
    for (int64_t p = 0; p < cols; p++)
      dst[i * cols + p] = cpu_bf16_to_f32(bg_elem(X, bf, trans, ld, i0 + i, p0 + p));
}

void cpu_bgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const void *A,
               bool a_bf16, int64_t lda, const void *B, bool b_bf16, int64_t ldb, float beta,
               float *C, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) C[i * ldc + j] = beta == 0 ? 0 : beta * C[i * ldc + j];
    return;
  }
  pthread_once(&bg_once, bg_choose);
  for (int64_t j0 = 0; j0 < n; j0 += BG_NC) {
    const int64_t nc = n - j0 < BG_NC ? n - j0 : BG_NC;
    for (int64_t p0 = 0; p0 < k; p0 += BG_KC) {
      const int64_t kc = k - p0 < BG_KC ? k - p0 : BG_KC;
      const float be = p0 == 0 ? beta : 1;
#if BG_HAVE_X86
      if (bg_avx) {
        uint16_t Bp[BG_KC * BG_NC];
        uint32_t Ap[BG_MC * BG_KC / 2];
        bg_pack_b(Bp, B, b_bf16, tb, ldb, p0, kc, j0, nc);
        for (int64_t i0 = 0; i0 < m; i0 += BG_MC) {
          const int64_t mc = m - i0 < BG_MC ? m - i0 : BG_MC;
          bg_pack_a(Ap, A, a_bf16, ta, lda, i0, mc, p0, kc);
          bg_block(Ap, Bp, mc, nc, kc, alpha, be, C + i0 * ldc + j0, ldc);
        }
        continue;
      }
#endif
      float Bf[BG_KC * BG_NC / 2], Af[BG_MC * BG_KC / 2]; /* KC/2 deep: 64 KiB */
      for (int64_t q0 = p0; q0 < p0 + kc; q0 += BG_KC / 2) {
        const int64_t qc = p0 + kc - q0 < BG_KC / 2 ? p0 + kc - q0 : BG_KC / 2;
        const float bq = q0 == p0 ? be : 1;
        bg_pack_f32(Bf, B, b_bf16, !tb, ldb, j0, nc, q0, qc); /* [nc][qc]: B^T */
        for (int64_t i0 = 0; i0 < m; i0 += BG_MC) {
          const int64_t mc = m - i0 < BG_MC ? m - i0 : BG_MC;
          bg_pack_f32(Af, A, a_bf16, ta, lda, i0, mc, q0, qc);
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)mc, (int)nc, (int)qc, alpha,
                      Af, (int)qc, Bf, (int)qc, bq, C + i0 * ldc + j0, (int)ldc);
        }
      }
    }
  }
}
