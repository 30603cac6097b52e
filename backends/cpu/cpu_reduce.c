/*
** cpu_reduce.c -- sum, mean, var, max and min along the middle dim of a
** contiguous [outer, n, inner] tensor.
**
** var is two-pass (mean first, then squared deviations), which is as
** accurate as Welford and simpler. float32 sums accumulate in double.
** The kernels are written once in cpu_reduce_tmpl.h for each dtype.
*/
#include "cpu_internal.h"
#include "cpu_bf16_avx512.h"

#include <omp.h>

/* Columns summed together by one pass over the rows: 32 double sums fill
** eight AVX-512 (sixteen AVX2) registers, so they stay there. */
#define CPU_COLSUM_W 32
#include <stdio.h>
#include <stdlib.h>


#define T float
#define ACC double
#define SUF f32
#define IS_FLOAT 1
#include "cpu_reduce_tmpl.h"
#undef T
#undef ACC
#undef SUF
#undef IS_FLOAT

#define T double
#define ACC double
#define SUF f64
#define IS_FLOAT 1
#include "cpu_reduce_tmpl.h"
#undef T
#undef ACC
#undef SUF
#undef IS_FLOAT

#define T int64_t
#define ACC uint64_t
#define SUF i64
#define IS_FLOAT 0
#include "cpu_reduce_tmpl.h"
#undef T
#undef ACC
#undef SUF
#undef IS_FLOAT

static const char *reduce_name(em_reduce_op op) {
  switch (op) {
    case EM_RED_SUM: return "sum";
    case EM_RED_MEAN: return "mean";
    case EM_RED_MAX: return "max";
    case EM_RED_MIN: return "min";
    case EM_RED_VAR: return "var";
    default: return "unknown";
  }
}

/* bfloat16 sums and means over the middle dim of [outer, n, inner > 1]
** (a bias's gradient under autocast), read in place: each element is
** widened in a register and added in double, exactly as the float32
** kernel adds the widened copy that cpu_reduce_bf16 would make (so the
** same bits), without writing and reading that copy. */
#define BF_IB CPU_COLSUM_W
CPU_VECTOR_CLONES_512 static void colsum_block_bf16(const uint16_t *restrict x, int64_t n, int64_t inner,
                                                    int64_t nb, double *restrict acc) {
  if (nb == CPU_COLSUM_W) { /* a whole block: the sums stay in registers */
    double a[CPU_COLSUM_W] = {0};
    for (int64_t j = 0; j < n; j++) {
      const uint16_t *row = x + j * inner;
      for (int i = 0; i < CPU_COLSUM_W; i++) a[i] += (double)em_bf16_to_f32(row[i]);
    }
    for (int i = 0; i < CPU_COLSUM_W; i++) acc[i] = a[i];
    return;
  }
  for (int64_t i = 0; i < nb; i++) acc[i] = 0;
  for (int64_t j = 0; j < n; j++) {
    const uint16_t *row = x + j * inner;
    for (int64_t i = 0; i < nb; i++) acc[i] += (double)em_bf16_to_f32(row[i]);
  }
}

#if CPU_BF16_AVX512
/* The same sums on AVX-512 for V * 8 whole columns (V = 4, 8 or 16: up to
** 128 columns, 16 registers of 8 double sums), each row's piece widened
** 8 at a time (bfloat16 -> float32 -> double, both exact) and added in
** the same order, so the same bits; GCC's clone of the loop above runs
** 256 bits wide and at half float32's speed. Every other add is an FMA by
** 1.0 (x * 1 is exact, so one rounding of x + a, the add's bits): the adds
** then share the FMA pipes with the add pipes, a quarter faster on Zen 4. */
#define COLSUM_BF16_AVX512(V)                                                                   \
  CPU_AVX512_TARGET static void colsum_bf16_avx512_##V(const uint16_t *restrict x, int64_t n,   \
                                                        int64_t inner, double *restrict acc) {  \
    __m512d a[V];                                                                               \
    const __m512d one = _mm512_set1_pd(1.0);                                                    \
    _Pragma("GCC unroll 16") for (int v = 0; v < V; v++) a[v] = _mm512_setzero_pd();            \
    for (int64_t j = 0; j < n; j++) {                                                           \
      const uint16_t *row = x + j * inner;                                                      \
      _Pragma("GCC unroll 16") for (int v = 0; v < V; v++) {                                    \
        const __m128i h = _mm_loadu_si128((const __m128i *)(row + 8 * v));                      \
        const __m256 f = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));  \
        a[v] = v & 1 ? _mm512_fmadd_pd(_mm512_cvtps_pd(f), one, a[v])                           \
                     : _mm512_add_pd(a[v], _mm512_cvtps_pd(f));                                 \
      }                                                                                         \
    }                                                                                           \
    _Pragma("GCC unroll 16") for (int v = 0; v < V; v++) _mm512_storeu_pd(acc + 8 * v, a[v]);   \
  }
COLSUM_BF16_AVX512(4)
COLSUM_BF16_AVX512(8)
COLSUM_BF16_AVX512(16)
#endif

/* Blocks of BF_IB columns go to the threads in groups of up to four (one
** pass over the rows reads up to 256 contiguous bytes of each); a
** column's sum is the same whatever its group. */
static void colsum_bf16(em_reduce_op op, uint16_t *out, const uint16_t *in, int64_t outer, int64_t n,
                        int64_t inner) {
  const int64_t nblk = (inner + BF_IB - 1) / BF_IB, total = outer * n * inner;
  const bool par = total > CPU_PAR_MIN && outer * nblk > 1;
  const int64_t team = par ? omp_get_max_threads() : 1;
  const bool simd = cpu_bf16_simd() != CPU_BF16_PLAIN;
  /* blocks a group: the most (up to 4) for which the busiest thread has
  ** the fewest blocks (n = 384: 3, four groups, not two threads with 8
  ** and 4 blocks) */
  int64_t g = 1, best = INT64_MAX;
  for (int64_t k = simd ? 4 : 1; k >= 1; k--) {
    const int64_t groups = outer * ((nblk + k - 1) / k), load = (groups + team - 1) / team * k;
    if (load < best) best = load, g = k;
  }
  const int64_t ngrp = (nblk + g - 1) / g;
  CPU_FOR(par, t, outer * ngrp, {
    const int64_t o = t / ngrp, c0 = (t % ngrp) * g * BF_IB;
    const int64_t nc = inner - c0 < g * BF_IB ? inner - c0 : g * BF_IB;
    const uint16_t *x = in + o * n * inner + c0;
    double acc[4 * BF_IB];
    int64_t i = 0;
#if CPU_BF16_AVX512
    if (simd) {
      for (; nc - i >= 128; i += 128) colsum_bf16_avx512_16(x + i, n, inner, acc + i);
      for (; nc - i >= 64; i += 64) colsum_bf16_avx512_8(x + i, n, inner, acc + i);
      for (; nc - i >= 32; i += 32) colsum_bf16_avx512_4(x + i, n, inner, acc + i);
    }
#endif
    for (; i < nc; i += BF_IB)
      colsum_block_bf16(x + i, n, inner, nc - i < BF_IB ? nc - i : BF_IB, acc + i);
    for (int64_t k = 0; k < nc; k++) {
      const float v = op == EM_RED_SUM ? (float)acc[k] : (float)(acc[k] / (double)n);
      out[o * inner + c0 + k] = em_f32_to_bf16(v);
    }
  });
}

em_status cpu_reduce(int device, em_reduce_op op, em_dtype dt, void *out, int64_t *idx,
                     const void *in, int64_t outer, int64_t n, int64_t inner, int correction) {
  (void)device;
  const char *name = reduce_name(op);
  if ((unsigned)op > EM_RED_VAR) return em_error(EM_ERR_ARG, "cpu reduce: unknown op %d", (int)op);
  if (outer < 0 || n < 0 || inner < 0)
    return em_error(EM_ERR_SHAPE, "cpu reduce %s: bad sizes outer=%lld n=%lld inner=%lld", name,
                    (long long)outer, (long long)n, (long long)inner);
  if (outer == 0 || inner == 0) return EM_OK;
  if (n == 0 && (op == EM_RED_MAX || op == EM_RED_MIN))
    return em_error(EM_ERR_SHAPE, "cpu reduce %s: cannot take the %s of an empty dim (size 0)",
                    name, name);
  if (correction < 0)
    return em_error(EM_ERR_ARG, "cpu reduce var: correction %d, expected >= 0", correction);
  switch (dt) {
    case EM_F32: return reduce_f32(op, out, idx, in, outer, n, inner, correction);
    case EM_F64: return reduce_f64(op, out, idx, in, outer, n, inner, correction);
    case EM_BF16:
      if (inner > 1 && (op == EM_RED_SUM || op == EM_RED_MEAN)) {
        colsum_bf16(op, out, in, outer, n, inner);
        return EM_OK;
      }
      return cpu_reduce_bf16(op, out, idx, in, outer, n, inner, correction);
    case EM_I64:
      if (op == EM_RED_MEAN || op == EM_RED_VAR) break;
      return reduce_i64(op, out, idx, in, outer, n, inner, correction);
    default: break;
  }
  char kernel[32];
  snprintf(kernel, sizeof kernel, "reduce %s", name);
  return cpu_bad_dtype(kernel, dt,
                       op == EM_RED_MEAN || op == EM_RED_VAR ? "float32, float64, bfloat16"
                                                             : "float32, float64, bfloat16, int64");
}
