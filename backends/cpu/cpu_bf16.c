/*
** cpu_bf16.c -- bfloat16 for the row kernels (reductions, softmax, layer
** norm, cross entropy, dropout, random draws): inputs are widened to
** float32 buffers, the float32 kernel runs (its sums accumulate in float32
** or double), and results are rounded once to bfloat16.
**
** Why widen instead of a bfloat16 instantiation of every template: these
** kernels read each input once or twice and do several operations per
** element, so the extra pass over a float32 copy costs little next to the
** kernel, and the float32 code (vectorised exp, chunked sums that give the
** same bits at any thread count) serves both dtypes. Elementwise ops,
** index adds and the optimizers, which are pure memory traffic, have their
** own bfloat16 instantiations instead (cpu_binary_tmpl.h, ...).
*/
#include "cpu_internal.h"

#include <stdlib.h>

/* The conversions of elements [lo, hi), as vector clones (CPU_FOR_RANGES). */
CPU_VECTOR_CLONES static void widen_range(float *restrict f, const uint16_t *restrict h, int64_t lo,
                                          int64_t hi) {
  for (int64_t i = lo; i < hi; i++) f[i] = cpu_bf16_to_f32(h[i]);
}

CPU_VECTOR_CLONES static void narrow_range(uint16_t *restrict h, const float *restrict f,
                                           int64_t lo, int64_t hi) {
  for (int64_t i = lo; i < hi; i++) h[i] = cpu_f32_to_bf16(f[i]);
}

/* n bfloat16 values (NULL passes through) as a new float32 buffer. */
static em_status widen(const char *kernel, const void *src, int64_t n, float **out) {
  *out = NULL;
  if (!src || n <= 0) return EM_OK;
  float *f = malloc((size_t)n * sizeof *f);
  if (!f)
    return em_error(EM_ERR_OOM, "cpu %s: out of memory widening %lld bfloat16 values", kernel,
                    (long long)n);
  cpu_bf16_widen(f, src, n);
  *out = f;
  return EM_OK;
}

void cpu_bf16_widen(float *dst, const uint16_t *src, int64_t n) {
  CPU_FOR_RANGES(n > CPU_PAR_MIN, n, lo, hi, widen_range(dst, src, lo, hi););
}

void cpu_bf16_narrow(uint16_t *dst, const float *src, int64_t n) {
  CPU_FOR_RANGES(n > CPU_PAR_MIN, n, lo, hi, narrow_range(dst, src, lo, hi););
}

static void narrow(void *dst, const float *src, int64_t n) {
  if (dst && src) cpu_bf16_narrow(dst, src, n);
}

/* A float32 result buffer for a bfloat16 output (NULL stays NULL). */
static em_status scratch(const char *kernel, const void *dst, int64_t n, float **out) {
  *out = NULL;
  if (!dst || n <= 0) return EM_OK;
  *out = malloc((size_t)n * sizeof **out);
  if (!*out)
    return em_error(EM_ERR_OOM, "cpu %s: out of memory for %lld float32 results", kernel,
                    (long long)n);
  return EM_OK;
}

em_status cpu_reduce_bf16(em_reduce_op op, void *out, int64_t *idx, const void *in,
                          int64_t outer, int64_t n, int64_t inner, int correction) {
  float *x = NULL, *y = NULL;
  em_status s = widen("reduce", in, outer * n * inner, &x);
  if (!s) s = scratch("reduce", out, outer * inner, &y);
  if (!s) s = cpu_reduce(0, op, EM_F32, y, idx, x, outer, n, inner, correction);
  if (!s) narrow(out, y, outer * inner);
  free(x);
  free(y);
  return s;
}

em_status cpu_softmax_bf16(void *out, const void *xin, int64_t rows, int64_t n, bool log) {
  float *x = NULL, *y = NULL;
  em_status s = widen("softmax", xin, rows * n, &x);
  if (!s) s = scratch("softmax", out, rows * n, &y);
  if (!s) s = cpu_softmax(0, EM_F32, y, x, rows, n, log);
  if (!s) narrow(out, y, rows * n);
  free(x);
  free(y);
  return s;
}

em_status cpu_softmax_backward_bf16(void *gx, const void *gy, const void *y, int64_t rows,
                                    int64_t n, bool log) {
  float *g = NULL, *yy = NULL, *r = NULL;
  em_status s = widen("softmax_backward", gy, rows * n, &g);
  if (!s) s = widen("softmax_backward", y, rows * n, &yy);
  if (!s) s = scratch("softmax_backward", gx, rows * n, &r);
  if (!s) s = cpu_softmax_backward(0, EM_F32, r, g, yy, rows, n, log);
  if (!s) narrow(gx, r, rows * n);
  free(g);
  free(yy);
  free(r);
  return s;
}

/* mean and rstd are float32 for bfloat16 inputs (the core's stat dtype). */
em_status cpu_layer_norm_bf16(void *y, void *mean, void *rstd, const void *xin, const void *w,
                              const void *b, int64_t rows, int64_t n, double eps) {
  float *x = NULL, *wf = NULL, *bf = NULL, *yf = NULL;
  em_status s = widen("layer_norm", xin, rows * n, &x);
  if (!s) s = widen("layer_norm", w, n, &wf);
  if (!s) s = widen("layer_norm", b, n, &bf);
  if (!s) s = scratch("layer_norm", y, rows * n, &yf);
  if (!s) s = cpu_layer_norm(0, EM_F32, yf, mean, rstd, x, wf, bf, rows, n, eps);
  if (!s) narrow(y, yf, rows * n);
  free(x);
  free(wf);
  free(bf);
  free(yf);
  return s;
}

em_status cpu_layer_norm_backward_bf16(void *dx, void *dw, void *db, const void *dy,
                                       const void *xin, const void *mean, const void *rstd,
                                       const void *w, int64_t rows, int64_t n) {
  float *g = NULL, *x = NULL, *wf = NULL, *dxf = NULL, *dwf = NULL, *dbf = NULL;
  em_status s = widen("layer_norm_backward", dy, rows * n, &g);
  if (!s) s = widen("layer_norm_backward", xin, rows * n, &x);
  if (!s) s = widen("layer_norm_backward", w, n, &wf);
  if (!s) s = scratch("layer_norm_backward", dx, rows * n, &dxf);
  /* widened, not fresh: the kernel may add into dw and db */
  if (!s) s = widen("layer_norm_backward", dw, n, &dwf);
  if (!s) s = widen("layer_norm_backward", db, n, &dbf);
  if (!s) s = cpu_layer_norm_backward(0, EM_F32, dxf, dwf, dbf, g, x, mean, rstd, wf, rows, n);
  if (!s) {
    narrow(dx, dxf, rows * n);
    narrow(dw, dwf, n);
    narrow(db, dbf, n);
  }
  free(g);
  free(x);
  free(wf);
  free(dxf);
  free(dwf);
  free(dbf);
  return s;
}

em_status cpu_cross_entropy_bf16(void *loss, void *lse, const void *logits,
                                 const int64_t *target, int64_t rows, int64_t classes,
                                 int64_t ignore_index, double smoothing) {
  float *x = NULL, *l = NULL, *e = NULL;
  em_status s = widen("cross_entropy", logits, rows * classes, &x);
  if (!s) s = scratch("cross_entropy", loss, rows, &l);
  if (!s) s = scratch("cross_entropy", lse, rows, &e);
  if (!s)
    s = cpu_cross_entropy(0, EM_F32, l, e, x, target, rows, classes, ignore_index, smoothing);
  if (!s) {
    narrow(loss, l, rows);
    narrow(lse, e, rows);
  }
  free(x);
  free(l);
  free(e);
  return s;
}

em_status cpu_cross_entropy_backward_bf16(void *dlogits, const void *dloss, const void *logits,
                                          const void *lse, const int64_t *target, int64_t rows,
                                          int64_t classes, int64_t ignore_index,
                                          double smoothing) {
  float *dl = NULL, *x = NULL, *e = NULL, *g = NULL;
  em_status s = widen("cross_entropy_backward", dloss, rows, &dl);
  if (!s) s = widen("cross_entropy_backward", logits, rows * classes, &x);
  if (!s) s = widen("cross_entropy_backward", lse, rows, &e);
  if (!s) s = scratch("cross_entropy_backward", dlogits, rows * classes, &g);
  if (!s)
    s = cpu_cross_entropy_backward(0, EM_F32, g, dl, x, e, target, rows, classes, ignore_index,
                                   smoothing);
  if (!s) narrow(dlogits, g, rows * classes);
  free(dl);
  free(x);
  free(e);
  free(g);
  return s;
}

em_status cpu_dropout_bf16(void *out, void *mask, const void *xin, int64_t n, double p,
                           uint64_t seed, uint64_t offset) {
  float *x = NULL, *o = NULL, *m = NULL;
  em_status s = widen("dropout", xin, n, &x);
  if (!s) s = scratch("dropout", out, n, &o);
  if (!s) s = scratch("dropout", mask, n, &m);
  if (!s) s = cpu_dropout(0, EM_F32, o, m, x, n, p, seed, offset);
  if (!s) {
    narrow(out, o, n);
    narrow(mask, m, n);
  }
  free(x);
  free(o);
  free(m);
  return s;
}

/* A contiguous bfloat16 output of n elements, drawn in float32. */
em_status cpu_random_bf16(em_random_kind kind, void *out, int64_t n, double a, double b,
                          uint64_t seed, uint64_t offset) {
  float *f = NULL;
  em_status s = scratch("random", out, n, &f);
  if (s || !f) return s;
  em_kview v = {.data = f, .dtype = EM_F32, .ndim = 1, .shape = {n}, .stride = {1}};
  s = cpu_random(0, kind, &v, a, b, seed, offset);
  if (!s) narrow(out, f, n);
  free(f);
  return s;
}
