/*
** cpu_attention.c -- fused scaled-dot-product attention, flash style.
**
** Forward (per batch*head and tile of BR queries, in parallel): walk the
** key tiles of BC keys keeping, for each query row, the running max m, the
** running normaliser l and an unnormalised output row; when a new tile
** raises the max, the old sums are rescaled by exp(m_old - m_new) (the
** online softmax). At the end out = acc / l and lse = m + log(l) is saved.
** Nothing of size Lq x Lk is ever allocated: scratch is a few tiles per
** thread.
**
** Backward recomputes the probabilities from lse, P = exp(S - lse), tile
** by tile, in two passes that never write the same memory from two
** threads (so no atomics, and results do not depend on the thread count):
**   pass 1, over key tiles:   dV = Pd^T dO,  dK = scale * dS^T Q
**   pass 2, over query tiles: dQ = scale * dS K
** with Pd = P * Z (dropout), dS = P * (Z * dO V^T - D), D = rowsum(dO * O).
**
** Masking: key_padding (1 = padding) and bias (additive, -inf allowed) as
** given; causal is bottom-right aligned (key j is visible to query i iff
** j <= i + Lk - Lq), and key tiles that are entirely in the future of a
** query tile are skipped. A query row that sees no key at all gets a zero
** output, lse = +inf (so exp(s - lse) = 0 anywhere) and zero gradients.
**
** Dropout: element (b, h, i, j) is kept iff
**   em_philox_uniform_at(seed, offset, ((b*H + h)*Lq + i)*Lk + j) >= p
** and kept probabilities are scaled by 1 / (1 - p); the normaliser l
** counts every visible key, as dropout(softmax(S)) @ V does.
*/
#include "cpu_internal.h"
#include "ember_philox.h"

#include <stdlib.h>
#include <tgmath.h>

#define CPU_CAT2(a, b) a##_##b
#define CPU_CAT(a, b) CPU_CAT2(a, b)

/* Tile sizes: queries per work item, keys per inner step. */
#define BR 32
#define BC 64

typedef struct att_ctx {
  const em_attention_args *a;
  int64_t shift;  /* Lk - Lq, the causal diagonal's offset */
  bool parallel;  /* enough work to wake the thread team */
  double *D;      /* backward: rowsum(dO * O), [B*H*Lq] */
} att_ctx;

#define T float
#define SUF f32
#include "cpu_attention_tmpl.h"
#undef T
#undef SUF

#define T double
#define SUF f64
#include "cpu_attention_tmpl.h"
#undef T
#undef SUF

static em_status check_args(const char *kernel, const em_attention_args *a, bool backward) {
  if (!a) return em_error(EM_ERR_ARG, "cpu %s: args is NULL", kernel);
  if (a->dtype != EM_F32 && a->dtype != EM_F64)
    return cpu_bad_dtype(kernel, a->dtype, "float32, float64");
  if (a->B < 0 || a->H < 0 || a->Lq < 0 || a->Lk < 0 || a->dk < 0 || a->dv < 0)
    return em_error(EM_ERR_SHAPE,
                    "cpu %s: negative size B=%lld H=%lld Lq=%lld Lk=%lld dk=%lld dv=%lld", kernel,
                    (long long)a->B, (long long)a->H, (long long)a->Lq, (long long)a->Lk,
                    (long long)a->dk, (long long)a->dv);
  /* every index below, up to ((b*H+h)*Lq+i)*Lk+j, must fit in int64 */
  double cells = (double)a->B * (double)a->H * ((double)a->Lq + 1) * ((double)a->Lk + 1) *
                 ((double)a->dk + (double)a->dv + 1);
  if (cells > 4e18)
    return em_error(EM_ERR_SHAPE, "cpu %s: sizes B=%lld H=%lld Lq=%lld Lk=%lld are too large",
                    kernel,
                    (long long)a->B, (long long)a->H, (long long)a->Lq, (long long)a->Lk);
  if (!(a->dropout_p >= 0 && a->dropout_p <= 1))
    return em_error(EM_ERR_ARG, "cpu %s: dropout probability %g, expected within [0, 1]", kernel,
                    a->dropout_p);
  if (a->B * a->H == 0) return EM_OK;
  if (!a->q || !a->k || !a->v || !a->out || !a->lse)
    return em_error(EM_ERR_ARG, "cpu %s: q, k, v, out and lse must not be NULL", kernel);
  if (backward && (!a->dout || !a->dq || !a->dk_ || !a->dv_))
    return em_error(EM_ERR_ARG, "cpu %s: dout, dq, dk_ and dv_ must not be NULL", kernel);
  return EM_OK;
}

static att_ctx make_ctx(const em_attention_args *a) {
  att_ctx c;
  c.a = a;
  c.shift = a->Lk - a->Lq;
  double work = (double)a->B * a->H * a->Lq * a->Lk * (double)(a->dk + a->dv);
  c.parallel = work > 65536.0;
  c.D = NULL;
  return c;
}

em_status cpu_attention_forward(int device, const em_attention_args *args) {
  (void)device;
  em_status s = check_args("attention_forward", args, false);
  if (s || args->B * args->H == 0) return s;
  att_ctx c = make_ctx(args);
  return args->dtype == EM_F32 ? forward_f32(&c) : forward_f64(&c);
}

em_status cpu_attention_backward(int device, const em_attention_args *args) {
  (void)device;
  em_status s = check_args("attention_backward", args, true);
  if (s || args->B * args->H == 0) return s;
  att_ctx c = make_ctx(args);
  return args->dtype == EM_F32 ? backward_f32(&c) : backward_f64(&c);
}
