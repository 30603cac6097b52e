/*
** cpu_reduce.c -- sum, mean, var, max and min along the middle dim of a
** contiguous [outer, n, inner] tensor.
**
** var is two-pass (mean first, then squared deviations), which is as
** accurate as Welford and simpler. float32 sums accumulate in double.
** The kernels are written once in cpu_reduce_tmpl.h for each dtype.
*/
#include "cpu_internal.h"

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

static void colsum_bf16(em_reduce_op op, uint16_t *out, const uint16_t *in, int64_t outer, int64_t n,
                        int64_t inner) {
  const int64_t nblk = (inner + BF_IB - 1) / BF_IB, total = outer * n * inner;
  CPU_FOR(total > CPU_PAR_MIN && outer * nblk > 1, t, outer * nblk, {
    const int64_t o = t / nblk, i0 = (t % nblk) * BF_IB, nb = inner - i0 < BF_IB ? inner - i0 : BF_IB;
    double acc[BF_IB];
    colsum_block_bf16(in + o * n * inner + i0, n, inner, nb, acc);
    for (int64_t i = 0; i < nb; i++) {
      const float v = op == EM_RED_SUM ? (float)acc[i] : (float)(acc[i] / (double)n);
      out[o * inner + i0 + i] = em_f32_to_bf16(v);
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
