/*
** cpu_softmax_norm.c -- softmax, log_softmax, layer norm and RMS norm over
** the rows of a contiguous [rows, n] tensor, forward and backward.
**
** softmax subtracts the row max before exp(); log_softmax is x minus the
** row max, minus the log of the exponentials' sum; layer norm uses a
** two-pass variance. The kernels are in cpu_softmax_norm_tmpl.h, written
** once for float and double.
*/
#include "cpu_internal.h"
#include "cpu_bf16_avx512.h"
#include "cpu_vmath.h"

#include <tgmath.h>

/* The norms' row kernels come at two vector widths (cpu_norm_rows_tmpl.h):
** 8 doubles built for AVX-512 and run where cpu_bf16_simd finds it (so
** EMBER_CPU_BF16=plain and a ONEDNN_MAX_CPU_ISA cap below AVX-512 run the
** other: ctest's *_bf16_plain runs of test_backend_cpu_rows), 4 doubles in
** the AVX2 and baseline clones. The same bits either way. */
#if CPU_BF16_AVX512
#define LN_WIDE_ATTR CPU_AVX512_TARGET
static bool ln_wide(void) { return cpu_bf16_simd() >= CPU_BF16_AVX512F; }
#else
#define LN_WIDE_ATTR __attribute__((unused))
static bool ln_wide(void) { return false; }
#endif

/* EXP_T: float32 rows use cpu_exp_f32 (within 2 ulp of expf), which
** vectorises; libm's expf is a call per element, and a softmax row spent
** nearly all its time there. float64 keeps libm's exp. */
#define T float
#define SUF f32
#define EXP_T cpu_exp_f32
#define LN_EXACT_PRODUCTS 1 /* a product of two floats is exact in double */
#include "cpu_softmax_norm_tmpl.h"
#undef T
#undef SUF
#undef EXP_T
#undef LN_EXACT_PRODUCTS
#define LN_EXACT_PRODUCTS 0

#define T double
#define SUF f64
#define EXP_T exp
#include "cpu_softmax_norm_tmpl.h"
#undef T
#undef SUF
#undef EXP_T
#undef LN_EXACT_PRODUCTS

static em_status check_rows(const char *kernel, em_dtype dt, int64_t rows, int64_t n) {
  if (dt != EM_F32 && dt != EM_F64 && dt != EM_BF16)
    return cpu_bad_dtype(kernel, dt, "float32, float64, bfloat16");
  if (rows < 0 || n < 0)
    return em_error(EM_ERR_SHAPE, "cpu %s: bad sizes rows=%lld n=%lld", kernel, (long long)rows,
                    (long long)n);
  return EM_OK;
}

em_status cpu_softmax(int device, em_dtype dt, void *out, const void *x, int64_t rows, int64_t n,
                      bool log) {
  (void)device;
  em_status s = check_rows(log ? "log_softmax" : "softmax", dt, rows, n);
  if (s) return s;
  if (dt == EM_BF16) return cpu_softmax_bf16(out, x, rows, n, log);
  if (dt == EM_F32) softmax_f32(out, x, rows, n, log);
  else softmax_f64(out, x, rows, n, log);
  return EM_OK;
}

em_status cpu_softmax_backward(int device, em_dtype dt, void *gx, const void *gy, const void *y,
                               int64_t rows, int64_t n, bool log) {
  (void)device;
  em_status s = check_rows(log ? "log_softmax_backward" : "softmax_backward", dt, rows, n);
  if (s) return s;
  if (dt == EM_BF16) return cpu_softmax_backward_bf16(gx, gy, y, rows, n, log);
  if (dt == EM_F32) softmax_backward_f32(gx, gy, y, rows, n, log);
  else softmax_backward_f64(gx, gy, y, rows, n, log);
  return EM_OK;
}

/* Layer norm, or RMS norm with centred false (mean NULL, b NULL): the
** kernels of both (ember_backend.h's layer_norm and rms_norm). */
em_status cpu_norm(const char *kernel, em_dtype dt, void *y, void *mean, void *rstd, const void *x,
                   const void *w, const void *b, int64_t rows, int64_t n, double eps, bool centred) {
  em_status s = check_rows(kernel, dt, rows, n);
  if (s) return s;
  if (n == 0 && rows > 0) return em_error(EM_ERR_SHAPE, "cpu %s: cannot normalise rows of size 0", kernel);
  if (!(eps >= 0)) return em_error(EM_ERR_ARG, "cpu %s: eps %g, expected >= 0", kernel, eps);
  if (dt == EM_BF16) return cpu_norm_bf16(kernel, y, mean, rstd, x, w, b, rows, n, eps, centred);
  if (dt == EM_F32) layer_norm_f32(y, mean, rstd, x, w, b, rows, n, eps, centred);
  else layer_norm_f64(y, mean, rstd, x, w, b, rows, n, eps, centred);
  return EM_OK;
}

/* The backward of cpu_norm: mean NULL (and db NULL) for RMS norm. */
em_status cpu_norm_backward(const char *kernel, em_dtype dt, void *dx, void *dw, void *db,
                            const void *dy, const void *x, const void *mean, const void *rstd,
                            const void *w, int64_t rows, int64_t n) {
  em_status s = check_rows(kernel, dt, rows, n);
  if (s) return s;
  if (rows > 0 && n > 0 && !rstd)
    return em_error(EM_ERR_ARG, "cpu %s: needs the forward's rstd, got NULL", kernel);
  if (dt == EM_BF16) return cpu_norm_backward_bf16(kernel, dx, dw, db, dy, x, mean, rstd, w, rows, n);
  if (dt == EM_F32) layer_norm_backward_f32(dx, dw, db, dy, x, mean, rstd, w, rows, n);
  else layer_norm_backward_f64(dx, dw, db, dy, x, mean, rstd, w, rows, n);
  return EM_OK;
}

em_status cpu_layer_norm(int device, em_dtype dt, void *y, void *mean, void *rstd, const void *x,
                         const void *w, const void *b, int64_t rows, int64_t n, double eps) {
  (void)device;
  return cpu_norm("layer_norm", dt, y, mean, rstd, x, w, b, rows, n, eps, true);
}

em_status cpu_layer_norm_backward(int device, em_dtype dt, void *dx, void *dw, void *db,
                                  const void *dy, const void *x, const void *mean,
                                  const void *rstd, const void *w, int64_t rows, int64_t n) {
  (void)device;
  if (rows > 0 && n > 0 && !mean)
    return em_error(EM_ERR_ARG, "cpu layer_norm_backward: needs the forward's mean and rstd, got NULL");
  return cpu_norm_backward("layer_norm_backward", dt, dx, dw, db, dy, x, mean, rstd, w, rows, n);
}

em_status cpu_rms_norm(int device, em_dtype dt, void *y, void *rstd, const void *x, const void *w,
                       int64_t rows, int64_t n, double eps) {
  (void)device;
  return cpu_norm("rms_norm", dt, y, NULL, rstd, x, w, NULL, rows, n, eps, false);
}

em_status cpu_rms_norm_backward(int device, em_dtype dt, void *dx, void *dw, const void *dy,
                                const void *x, const void *rstd, const void *w, int64_t rows,
                                int64_t n) {
  (void)device;
  return cpu_norm_backward("rms_norm_backward", dt, dx, dw, NULL, dy, x, NULL, rstd, w, rows, n);
}
