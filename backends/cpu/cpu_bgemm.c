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
** Three paths, chosen once per process (cpu_bgemm_path says which):
**  - "amx": AMX tiles (TDPBF16PS) where the CPU and the OS have them
**    (cpu_bgemm_amx.c: the same packed B, never yet run on such a CPU;
**    EMBER_CPU_BF16_DOT=amx_emulated runs its driver on a C model of the
**    instructions, for the tests, and =avx512_bf16 skips it);
**  - "avx512_bf16": vdpbf16ps, which multiplies pairs of bfloat16 along k
**    and adds both products into a float32 lane. A is packed as pairs
**    (a[i][2p], a[i][2p+1]) (a bfloat16 row is that already, read in
**    place), B as [k/2][n][2]; a micro-kernel keeps 16 registers of C
**    (4 rows x 64 columns, or 8 x 32 for a 32-wide C).
**  - "plain": the same rounded operands widened to float32 and multiplied
**    by the float32 tile kernels (cpu_tile_gemm.c); any CPU. Taken when
**    the CPU lacks AVX512_BF16, when ONEDNN_MAX_CPU_ISA caps the machine
**    below it (the tests emulate older CPUs that way), or with
**    EMBER_CPU_BF16_DOT=plain.
** Blocks of MC x NC x KC keep the packed operands on the stack (64 KiB).
*/
#include "cpu_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <strings.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define BG_HAVE_X86 1
/* Every CPU with AVX512_BF16 (Cooper Lake, Sapphire Rapids, Zen 4) has
** AVX512BW and VL too: the packing's 16-bit permutes and masked loads. */
#define BG_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#else
#define BG_HAVE_X86 0
#endif

enum { BG_MC = 64, BG_NC = 64, BG_KC = 256 };

static pthread_once_t bg_once = PTHREAD_ONCE_INIT;
static bool bg_avx;
enum { BG_NO_AMX, BG_AMX, BG_AMX_EMULATED };
static int bg_amx;

/* ONEDNN_MAX_CPU_ISA values that still allow AVX512_BF16 (the first 6:
** AMX too). */
static const char *const isa_caps_bf16[] = {"ALL", "DEFAULT", "AVX512_CORE_AMX", "AVX512_CORE_AMX_FP16",
                                            "AVX10_1_512_AMX", "AVX10_1_512_AMX_FP16", "AVX512_CORE_BF16",
                                            "AVX512_CORE_FP16", "AVX10_1_512", NULL};

static bool isa_cap_allows(const char *cap, bool amx) {
  for (int i = 0; isa_caps_bf16[i] && (!amx || i < 6); i++)
    if (strcasecmp(cap, isa_caps_bf16[i]) == 0) return true;
  return false;
}

/* cpu_bgemm_path's words, set with bg_avx: the path and, when a variable
** chose it, which (no ';' inside: cpu_info's line uses it between parts). */
static char bg_desc[192];

/* Where the CPU has AMX-BF16 (and the OS its tile state) AMX, else
** vdpbf16ps with AVX512_BF16, else plain; EMBER_CPU_BF16_DOT names one
** (plain, avx512_bf16, amx or amx_emulated) and ONEDNN_MAX_CPU_ISA caps
** them as it caps oneDNN. */
static void bg_choose(void) {
  const char *force = getenv("EMBER_CPU_BF16_DOT");
  const char *cap = getenv("ONEDNN_MAX_CPU_ISA");
  if (force && !*force) force = NULL;
  const bool known = !force || !strcmp(force, "plain") || !strcmp(force, "avx512_bf16") || !strcmp(force, "amx") ||
                     !strcmp(force, "amx_emulated");
  const bool forced_plain = force && !strcmp(force, "plain");
  char amx_why[96] = "";
  bg_avx = false, bg_amx = BG_NO_AMX;
#if BG_HAVE_X86
  const bool hw = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
  const bool capped = cap && *cap && !isa_cap_allows(cap, false);
  bg_avx = hw && !forced_plain && !capped;
  if (bg_avx) { /* and AMX unless one of the variables says no */
    if (force && !strcmp(force, "avx512_bf16")) snprintf(amx_why, sizeof amx_why, "EMBER_CPU_BF16_DOT=avx512_bf16");
    else if (cap && *cap && !isa_cap_allows(cap, true)) snprintf(amx_why, sizeof amx_why, "ONEDNN_MAX_CPU_ISA=%.24s", cap);
    else if (cpu_bgemm_amx_usable(amx_why, sizeof amx_why)) bg_amx = BG_AMX;
  }
  if (bg_amx) snprintf(bg_desc, sizeof bg_desc, "amx (tdpbf16ps tiles)");
  else if (bg_avx) snprintf(bg_desc, sizeof bg_desc, "avx512_bf16 (vdpbf16ps%s%s)", *amx_why ? ", no amx: " : "", amx_why);
  else if (hw && forced_plain) snprintf(bg_desc, sizeof bg_desc, "plain (bfloat16 values, float32 tile gemm, EMBER_CPU_BF16_DOT=plain)");
  else if (hw && capped) snprintf(bg_desc, sizeof bg_desc, "plain (bfloat16 values, float32 tile gemm, ONEDNN_MAX_CPU_ISA=%.24s)", cap);
  else
#endif
    snprintf(bg_desc, sizeof bg_desc, "plain (bfloat16 values, float32 tile gemm)");
  if (force && !strcmp(force, "amx_emulated")) { /* any CPU: the tests' way to the AMX driver */
    bg_amx = BG_AMX_EMULATED;
    snprintf(bg_desc, sizeof bg_desc, "amx emulated (tdpbf16ps tiles modelled in C, EMBER_CPU_BF16_DOT=amx_emulated)");
  }
  if (!known || (force && !strcmp(force, "amx") && bg_amx != BG_AMX)) {
    const size_t k = strlen(bg_desc) - 1; /* before the ')' */
    snprintf(bg_desc + k, sizeof bg_desc - k, ", EMBER_CPU_BF16_DOT=%.16s %s)", force,
             known ? "is not available here" : "is not plain, avx512_bf16, amx or amx_emulated");
  }
}

bool cpu_bgemm_dp(void) {
  pthread_once(&bg_once, bg_choose);
  return bg_avx;
}

const char *cpu_bgemm_path(void) {
  pthread_once(&bg_once, bg_choose);
  return bg_desc;
}

/* Element (i, p) of op(X), as a float32 rounded to bfloat16's bits. */
static inline uint16_t bg_elem(const void *X, bool bf16, bool trans, int64_t ld, int64_t i,
                               int64_t p) {
  const int64_t at = trans ? p * ld + i : i * ld + p;
  return bf16 ? ((const uint16_t *)X)[at] : em_f32_to_bf16(((const float *)X)[at]);
}

#if BG_HAVE_X86
/* A pair of bfloat16 read where a bfloat16 array has it (2-byte aligned). */
typedef uint32_t bg_u32 __attribute__((aligned(2), may_alias));

/* n float32 -> bfloat16 (round to nearest even, as vcvtneps2bf16), the
** last part of 16 by masked loads and stores: a probability tile's rows
** of 10 keys went one element at a time. */
BG_TARGET static void bg_cvt_row(uint16_t *dst, const float *src, int64_t n) {
  for (int64_t x = 0; x < n; x += 16) {
    const __mmask16 m = n - x >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - x)) - 1);
    _mm256_mask_storeu_epi16(dst + x, m, (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, src + x)));
  }
}

/* dst[2j] = r0[j], dst[2j + 1] = r1[j] (0 where r1 is NULL) for j < n, and
** zeros for n <= j < npad (npad a multiple of 16): two rows interleaved as
** the pairs vdpbf16ps takes, 32 columns a step by 16-bit permutes, the
** last step's loads masked (nothing past n is read). Element by element it
** was most of packing a small head's tiles (V and dO rows of 16-32 columns). */
BG_TARGET static void bg_pair_rows(uint16_t *dst, const uint16_t *r0, const uint16_t *r1, int64_t n,
                                   int64_t npad) {
  const __m512i lo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6, 37,
                                      5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
  const __m512i hi = _mm512_set_epi16(63, 31, 62, 30, 61, 29, 60, 28, 59, 27, 58, 26, 57, 25, 56, 24, 55, 23, 54, 22,
                                      53, 21, 52, 20, 51, 19, 50, 18, 49, 17, 48, 16);
  for (int64_t j = 0; j < npad; j += 32) {
    const int64_t left = n - j;
    const __mmask32 m = left >= 32 ? (__mmask32)0xffffffffu : left <= 0 ? 0 : (__mmask32)((1u << left) - 1);
    const __m512i a = _mm512_maskz_loadu_epi16(m, r0 + j);
    const __m512i b = r1 ? _mm512_maskz_loadu_epi16(m, r1 + j) : _mm512_setzero_si512();
    _mm512_storeu_si512((void *)(dst + 2 * j), _mm512_permutex2var_epi16(a, lo, b));
    if (npad - j > 16) _mm512_storeu_si512((void *)(dst + 2 * j + 32), _mm512_permutex2var_epi16(a, hi, b));
  }
}

/* op(A) rows [i0, i0+mc) x k [p0, p0+kc) as pairs (k 2p, 2p+1): pair p of
** row i at *base + i * rs + p * ps. Non-transposed bfloat16 is read in
** place; other cases are packed into Ap (row-major pairs, or for a
** transposed A pair-major, so both packings read their source in order). */
BG_TARGET static const bg_u32 *bg_pack_a(uint32_t *Ap, const void *A, bool bf, bool ta,
                                         int64_t lda, int64_t i0, int64_t mc, int64_t p0,
                                         int64_t kc, int64_t *rs, int64_t *ps) {
  const int64_t kh = (kc + 1) / 2;
  if (!ta) {
    if (bf && kc % 2 == 0 && lda % 2 == 0) {
      *rs = lda / 2, *ps = 1;
      return (const bg_u32 *)((const uint16_t *)A + i0 * lda + p0);
    }
    for (int64_t i = 0; i < mc; i++) {
      uint16_t *d = (uint16_t *)(Ap + i * kh);
      if (bf) memcpy(d, (const uint16_t *)A + (i0 + i) * lda + p0, (size_t)kc * 2);
      else bg_cvt_row(d, (const float *)A + (i0 + i) * lda + p0, kc);
      if (kc % 2) d[kc] = 0;
    }
    *rs = kh, *ps = 1;
    return Ap;
  }
  const int64_t mp = (mc + 15) / 16 * 16;
  uint16_t lo[BG_MC], hi[BG_MC];
  for (int64_t p = 0; p < kh; p++) {
    const int64_t k0 = p0 + 2 * p;
    const bool has_hi = 2 * p + 1 < kc;
    uint16_t *pairs = (uint16_t *)(Ap + p * mp); /* pair i: (row k0, row k0 + 1) of column i */
    if (bf) {
      const uint16_t *r0 = (const uint16_t *)A + k0 * lda + i0;
      bg_pair_rows(pairs, r0, has_hi ? r0 + lda : NULL, mc, mp);
    } else {
      const float *r0 = (const float *)A + k0 * lda + i0;
      bg_cvt_row(lo, r0, mc);
      if (has_hi) bg_cvt_row(hi, r0 + lda, mc);
      bg_pair_rows(pairs, lo, has_hi ? hi : NULL, mc, mp);
    }
  }
  *rs = 1, *ps = mp;
  return Ap;
}

#if BG_HAVE_X86
/* r[0..16) := its transpose as a 16 x 16 matrix of 32-bit elements:
** pairs within 128-bit lanes (4 x 4 blocks), then the lanes across
** registers. */
BG_TARGET static inline __attribute__((always_inline)) void bg_tr16(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 8; i++) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  /* u[4g + c], lane L: column 4L + c of rows 4g .. 4g+3 */
  for (int g = 0; g < 4; g++) {
    u[4 * g + 0] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
    u[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
  }
  for (int c = 0; c < 4; c++) {
    const __m512i a = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x44), b = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xEE);
    const __m512i d = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x44), e = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xEE);
    r[c] = _mm512_shuffle_i32x4(a, d, 0x88);
    r[4 + c] = _mm512_shuffle_i32x4(a, d, 0xDD);
    r[8 + c] = _mm512_shuffle_i32x4(b, e, 0x88);
    r[12 + c] = _mm512_shuffle_i32x4(b, e, 0xDD);
  }
}

/* Pairs [0, kh) of n <= 16 rows of B (row stride ldb bfloat16) into B32[p *
** npad + j], j < 16 (zeros for j >= n), by 16 x 16 register transposes
** (pairs past the last whole 16 one by one). Row by row, the pairs were
** stored 4 bytes at a time npad apart: a transpose by scattered stores,
** two thirds of cpu_bgemm's own time in the bf16 MHA step at L256. A
** tile's last rows (10 or 25 keys) were copied into a zero-padded block
** first, which cost more than the transpose. */
BG_TARGET static void bg_pack_bt16(uint32_t *B32, const uint16_t *rows, int64_t ldb, int64_t kh,
                                   int64_t npad, int n) {
  int64_t p0 = 0;
  for (; p0 + 16 <= kh; p0 += 16) {
    __m512i r[16];
    for (int i = 0; i < 16; i++)
      r[i] = i < n ? _mm512_loadu_si512((const void *)(rows + i * ldb + 2 * p0)) : _mm512_setzero_si512();
    bg_tr16(r);
    for (int c = 0; c < 16; c++) _mm512_storeu_si512((void *)(B32 + (p0 + c) * npad), r[c]);
  }
  for (int64_t p = p0; p < kh; p++)
    for (int i = 0; i < 16; i++) B32[p * npad + i] = i < n ? *(const bg_u32 *)(rows + i * ldb + 2 * p) : 0;
}
#endif

/* op(B) k [p0, p0+kc) x columns [j0, j0+nc) as Bp[(p * npad + j) * 2 + t] =
** op(B)(p0 + 2p + t, j0 + j), npad = nc rounded up to 16 (zeros past the edges). */
static void bg_pack_b(uint16_t *Bp, const void *B, bool bf, bool tb, int64_t ldb, int64_t p0,
                      int64_t kc, int64_t j0, int64_t nc) {
  const int64_t kh = (kc + 1) / 2, npad = (nc + 15) / 16 * 16;
  if (bf && tb) { /* op(B)(k, j) = B[j][k]: a pair is two neighbours of row j */
    uint32_t *B32 = (uint32_t *)Bp;
    int64_t j = 0;
#if BG_HAVE_X86
    /* whole pairs of groups of 16 rows by register transposes (bg_avx:
    ** AVX-512 is here), the last group's missing rows zeros (the columns
    ** past nc) */
    if (bg_avx && kc % 2 == 0) {
      for (; j < nc; j += 16)
        bg_pack_bt16(B32 + j, (const uint16_t *)B + (j0 + j) * ldb + p0, ldb, kh, npad, nc - j < 16 ? (int)(nc - j) : 16);
      return;
    }
#endif
    for (; j < nc; j++) {
      const uint16_t *row = (const uint16_t *)B + (j0 + j) * ldb + p0;
      for (int64_t p = 0; p + 1 < kh || (p < kh && kc % 2 == 0); p++)
        B32[p * npad + j] = *(const bg_u32 *)(row + 2 * p);
      if (kc % 2) B32[(kh - 1) * npad + j] = row[kc - 1];
    }
    for (int64_t p = 0; p < kh; p++)
      for (int64_t jj = nc; jj < npad; jj++) B32[p * npad + jj] = 0;
    return;
  }
  if (bf) { /* op(B) = B: a pair comes from two rows */
    for (int64_t p = 0; p < kh; p++) {
      uint16_t *dst = Bp + p * npad * 2;
      const uint16_t *r0 = (const uint16_t *)B + (p0 + 2 * p) * ldb + j0, *r1 = r0 + ldb;
#if BG_HAVE_X86
      if (bg_avx) {
        bg_pair_rows(dst, r0, 2 * p + 1 < kc ? r1 : NULL, nc, npad);
        continue;
      }
#endif
      if (2 * p + 1 < kc)
        for (int64_t j = 0; j < nc; j++) dst[2 * j] = r0[j], dst[2 * j + 1] = r1[j];
      else
        for (int64_t j = 0; j < nc; j++) dst[2 * j] = r0[j], dst[2 * j + 1] = 0;
      for (int64_t j = nc; j < npad; j++) dst[2 * j] = dst[2 * j + 1] = 0;
    }
    return;
  }
  for (int64_t p = 0; p < kh; p++) { /* float32 B: not met in attention, kept simple */
    uint16_t *dst = Bp + p * npad * 2;
    for (int t = 0; t < 2; t++) {
      const int64_t kk = 2 * p + t;
      for (int64_t j = 0; j < npad; j++)
        dst[j * 2 + t] = kk < kc && j < nc ? bg_elem(B, bf, !tb, ldb, j0 + j, p0 + kk) : 0;
    }
  }
}

/* mr_c rows x nv*16 columns of C (mr_c * nv <= 16 accumulators): row r's
** pairs at a[r][p * ps], B packed with row stride npad pairs; stores rows
** < mr and columns < ncols. */
BG_TARGET static inline __attribute__((always_inline)) void
bg_micro(const bg_u32 *const *a, int64_t ps, const uint16_t *Bp, int64_t kh, int64_t npad,
         const int mr_c, const int nv, int mr, int64_t ncols, float alpha, float beta, float *C,
         int64_t ldc) {
  __m512 acc[8][4];
#pragma GCC unroll 8
  for (int r = 0; r < mr_c; r++)
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++) acc[r][v] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kh; p++) {
    const uint16_t *b = Bp + p * npad * 2;
    __m512bh bv[4];
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++) bv[v] = (__m512bh)_mm512_loadu_si512(b + 32 * v);
#pragma GCC unroll 8
    for (int r = 0; r < mr_c; r++) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32((int)a[r][p * ps]);
#pragma GCC unroll 4
      for (int v = 0; v < nv; v++) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], av, bv[v]);
    }
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 8
  for (int r = 0; r < mr_c; r++) {
    if (r >= mr) break;
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
}

/* Rows [i, i + MR) of the block against every column chunk of 64 (4
** vectors) or of the narrower rest; MR rows at a time, so that each
** micro-kernel holds 16 accumulators: 4 rows x 64 columns, or 8 rows x 32
** columns where C is 32 wide (the head dims of attention). */
BG_TARGET static void bg_block(const bg_u32 *Ab, int64_t rs, int64_t ps, const uint16_t *Bp,
                               int64_t mc, int64_t nc, int64_t kc, float alpha, float beta,
                               float *C, int64_t ldc) {
  const int64_t kh = (kc + 1) / 2, npad = (nc + 15) / 16 * 16;
  const int MR = nc <= 32 ? 8 : 4; /* every chunk has nv <= 2 when nc <= 32 */
  for (int64_t i = 0; i < mc; i += MR) {
    const int mr = mc - i < MR ? (int)(mc - i) : MR;
    /* a last block of few rows runs a micro-kernel of 2 or 4 rows, not MR:
    ** a small head's tiles (2 or 10 query rows) spent most of their
    ** products on copies of a row that were never stored */
    const int rows = mr <= 2 ? 2 : mr <= 4 ? 4 : MR;
    const bg_u32 *a[8];
    for (int r = 0; r < rows; r++) a[r] = Ab + (r < mr ? i + r : i) * rs; /* past mc: a copy, not stored */
    float *c = C + i * ldc;
    for (int64_t j = 0; j < nc; j += 64) {
      const int64_t cols = nc - j < 64 ? nc - j : 64;
      const uint16_t *b = Bp + j * 2;
      const int nv = (int)((cols + 15) / 16);
#define BG_MICRO(R, V) bg_micro(a, ps, b, kh, npad, R, V, mr, cols, alpha, beta, c + j, ldc)
      if (rows == 8) { /* constant sizes: the accumulators stay in registers */
        if (nv == 2) BG_MICRO(8, 2);
        else BG_MICRO(8, 1);
      } else if (rows == 4) {
        switch (nv) {
          case 4: BG_MICRO(4, 4); break;
          case 3: BG_MICRO(4, 3); break;
          case 2: BG_MICRO(4, 2); break;
          default: BG_MICRO(4, 1); break;
        }
      } else {
        switch (nv) {
          case 4: BG_MICRO(2, 4); break;
          case 3: BG_MICRO(2, 3); break;
          case 2: BG_MICRO(2, 2); break;
          default: BG_MICRO(2, 1); break;
        }
      }
#undef BG_MICRO
    }
  }
}
#endif

/* The plain path's packing: rows [r0, r0+nr) x columns [c0, c0+nc) of X as
** stored (row stride ld), as float32 values of bfloat16, into dst [nr][nc].
** The operands keep their layout (sgemm does the transposes), so every
** row is one contiguous conversion. */
static void bg_pack_f32(float *dst, const void *X, bool bf, int64_t ld, int64_t r0, int64_t nr,
                        int64_t c0, int64_t nc) {
  for (int64_t r = 0; r < nr; r++) {
    float *d = dst + r * nc;
    if (bf) {
      const uint16_t *src = (const uint16_t *)X + (r0 + r) * ld + c0;
      for (int64_t c = 0; c < nc; c++) d[c] = em_bf16_to_f32(src[c]);
    } else {
      const float *src = (const float *)X + (r0 + r) * ld + c0;
      for (int64_t c = 0; c < nc; c++) d[c] = em_bf16_to_f32(em_f32_to_bf16(src[c]));
    }
  }
}

/* One block of k [p0, p0+kc) x columns [j0, j0+nc) on AMX tiles (its own
** frame: the other paths' buffers are not on the stack beside its). */
static __attribute__((noinline)) void bg_amx_blocks(bool ta, bool tb, int64_t m, float alpha, const void *A,
                                                    bool a_bf16, int64_t lda, const void *B, bool b_bf16,
                                                    int64_t ldb, float beta, float *C, int64_t ldc, int64_t p0,
                                                    int64_t kc, int64_t j0, int64_t nc) {
  uint16_t Bp[BG_KC * BG_NC] __attribute__((aligned(64)));
  bg_pack_b(Bp, B, b_bf16, tb, ldb, p0, kc, j0, nc);
  /* the tiles read whole chunks of 16 pairs: zeros past k */
  const int64_t kh = (kc + 1) / 2, khp = (kh + 15) / 16 * 16, npad = (nc + 15) / 16 * 16;
  memset(Bp + kh * npad * 2, 0, (size_t)((khp - kh) * npad * 2) * sizeof *Bp);
  for (int64_t i0 = 0; i0 < m; i0 += BG_MC) {
    const int64_t mc = m - i0 < BG_MC ? m - i0 : BG_MC;
    cpu_bgemm_amx_block(bg_amx == BG_AMX_EMULATED, A, a_bf16, ta, lda, i0, mc, p0, kc, Bp, nc, alpha, beta,
                        C + i0 * ldc, ldc);
  }
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
      if (bg_amx) {
        bg_amx_blocks(ta, tb, m, alpha, A, a_bf16, lda, B, b_bf16, ldb, be, C + j0, ldc, p0, kc, j0, nc);
        continue;
      }
#if BG_HAVE_X86
      if (bg_avx) {
        uint16_t Bp[BG_KC * BG_NC];
        uint32_t Ap[BG_MC * BG_KC / 2];
        bg_pack_b(Bp, B, b_bf16, tb, ldb, p0, kc, j0, nc);
        for (int64_t i0 = 0; i0 < m; i0 += BG_MC) {
          const int64_t mc = m - i0 < BG_MC ? m - i0 : BG_MC;
          int64_t rs, ps;
          const bg_u32 *Ab = bg_pack_a(Ap, A, a_bf16, ta, lda, i0, mc, p0, kc, &rs, &ps);
          bg_block(Ab, rs, ps, Bp, mc, nc, kc, alpha, be, C + i0 * ldc + j0, ldc);
        }
        continue;
      }
#endif
      float Bf[BG_KC * BG_NC / 2], Af[BG_MC * BG_KC / 2]; /* KC/2 deep: 64 KiB */
      for (int64_t q0 = p0; q0 < p0 + kc; q0 += BG_KC / 2) {
        const int64_t qc = p0 + kc - q0 < BG_KC / 2 ? p0 + kc - q0 : BG_KC / 2;
        const float bq = q0 == p0 ? be : 1;
        if (tb) bg_pack_f32(Bf, B, b_bf16, ldb, j0, nc, q0, qc); /* [nc][qc] */
        else bg_pack_f32(Bf, B, b_bf16, ldb, q0, qc, j0, nc);    /* [qc][nc] */
        for (int64_t i0 = 0; i0 < m; i0 += BG_MC) {
          const int64_t mc = m - i0 < BG_MC ? m - i0 : BG_MC;
          if (ta) bg_pack_f32(Af, A, a_bf16, lda, q0, qc, i0, mc); /* [qc][mc] */
          else bg_pack_f32(Af, A, a_bf16, lda, i0, mc, q0, qc);    /* [mc][qc] */
          cpu_tile_gemm(ta, tb, mc, nc, qc, alpha, Af, ta ? mc : qc, Bf, tb ? qc : nc, bq,
                        C + i0 * ldc + j0, ldc);
        }
      }
    }
  }
}
