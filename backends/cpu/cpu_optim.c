/*
** cpu_optim.c -- fused optimizer steps, element by element, in place.
** Each element's update is computed in double and stored back.
**
** Adam / AdamW, as torch.optim.Adam and AdamW (amsgrad off):
**   g = grad (+ wd * param for Adam)          param *= 1 - lr * wd (AdamW)
**   m = b1 * m + (1 - b1) * g                 v = b2 * v + (1 - b2) * g^2
**   param -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
**
** The sum of squares (clip_grad_norm's norm of the gradients): in double,
** chunk by chunk, the chunks' sums added in order, so the result does not
** depend on the thread count.
**
** SGD, as torch.optim.SGD:
**   d = grad + wd * param
**   with momentum: buf = d on the first step, else momentum * buf + (1 - dampening) * d;
**                  d = nesterov ? d + momentum * buf : buf
**   param -= lr * d
*/
#include "cpu_internal.h"
#include "cpu_vmath.h"

#include <math.h>
#include <stdlib.h>

#define OPTIM_PAR_MIN 16384

#define T float
#define SUF f32
#define LD(x) ((double)(x))
#define ST(d) ((float)(d))
#include "cpu_optim_tmpl.h"
#undef T
#undef SUF
#undef LD
#undef ST

#define T double
#define SUF f64
#define LD(x) (x)
#define ST(d) (d)
#include "cpu_optim_tmpl.h"
#undef T
#undef SUF
#undef LD
#undef ST

/* bfloat16 parameters and moments, updated in double, rounded once */
#define T uint16_t
#define SUF bf16
#define LD(x) ((double)em_bf16_to_f32(x))
#define ST(d) em_f32_to_bf16((float)(d))
#include "cpu_optim_tmpl.h"
#undef T
#undef SUF
#undef LD
#undef ST

em_status cpu_adam_step(int device, em_dtype dt, int64_t n, void *param, const void *grad,
                        void *m, void *v, double lr, double beta1, double beta2, double eps,
                        double weight_decay, int64_t step, bool decoupled) {
  (void)device;
  const char *kernel = decoupled ? "adamw_step" : "adam_step";
  if (dt != EM_F32 && dt != EM_F64 && dt != EM_BF16)
    return cpu_bad_dtype(kernel, dt, "float32, float64, bfloat16");
  if (step < 1)
    return em_error(EM_ERR_ARG, "cpu %s: step %lld, expected >= 1 (steps count from 1)", kernel,
                    (long long)step);
  if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
    return em_error(EM_ERR_ARG, "cpu %s: betas (%g, %g), expected within [0, 1)", kernel, beta1,
                    beta2);
  if (n < 0) return em_error(EM_ERR_SHAPE, "cpu %s: n = %lld", kernel, (long long)n);
  if (n == 0) return EM_OK;
  if (!param || !grad || !m || !v)
    return em_error(EM_ERR_ARG, "cpu %s: param, grad, m and v must not be NULL", kernel);
  const double bc1 = 1 - pow(beta1, (double)step);
  const double bc2_sqrt = sqrt(1 - pow(beta2, (double)step));
  const double step_size = lr / bc1;
  const double decay = 1 - lr * weight_decay;
  if (dt == EM_BF16)
    adam_bf16(n, param, grad, m, v, beta1, beta2, eps, weight_decay, decoupled, step_size,
              bc2_sqrt, decay);
  else if (dt == EM_F32)
    adam_f32(n, param, grad, m, v, beta1, beta2, eps, weight_decay, decoupled, step_size,
             bc2_sqrt, decay);
  else
    adam_f64(n, param, grad, m, v, beta1, beta2, eps, weight_decay, decoupled, step_size,
             bc2_sqrt, decay);
  return EM_OK;
}

em_status cpu_sgd_step(int device, em_dtype dt, int64_t n, void *param, const void *grad,
                       void *buf, double lr, double momentum, double dampening,
                       double weight_decay, bool nesterov, bool first_step) {
  (void)device;
  if (dt != EM_F32 && dt != EM_F64 && dt != EM_BF16)
    return cpu_bad_dtype("sgd_step", dt, "float32, float64, bfloat16");
  if (nesterov && (momentum <= 0 || dampening != 0))
    return em_error(EM_ERR_ARG,
                    "cpu sgd_step: nesterov needs momentum > 0 and dampening 0, got momentum %g, "
                    "dampening %g",
                    momentum, dampening);
  if (n < 0) return em_error(EM_ERR_SHAPE, "cpu sgd_step: n = %lld", (long long)n);
  if (n == 0) return EM_OK;
  if (!param || !grad)
    return em_error(EM_ERR_ARG, "cpu sgd_step: param and grad must not be NULL");
  if (momentum != 0 && !buf)
    return em_error(EM_ERR_ARG, "cpu sgd_step: momentum %g needs a momentum buffer, got NULL",
                    momentum);
  if (dt == EM_BF16)
    sgd_bf16(n, param, grad, buf, lr, momentum, dampening, weight_decay, nesterov, first_step);
  else if (dt == EM_F32)
    sgd_f32(n, param, grad, buf, lr, momentum, dampening, weight_decay, nesterov, first_step);
  else
    sgd_f64(n, param, grad, buf, lr, momentum, dampening, weight_decay, nesterov, first_step);
  return EM_OK;
}

/* Chunks of this many elements are summed apart (over the team) and
** their sums added in order. */
#define SUMSQ_CHUNK 65536

em_status cpu_sum_squares(int device, em_dtype dt, const void *x, int64_t n, double *out) {
  (void)device;
  if (dt != EM_F32 && dt != EM_F64 && dt != EM_BF16)
    return cpu_bad_dtype("sum_squares", dt, "float32, float64, bfloat16");
  if (n < 0 || !out || (n > 0 && !x))
    return em_error(EM_ERR_ARG, "cpu sum_squares: n = %lld, x %s, out %s", (long long)n,
                    x ? "set" : "NULL", out ? "set" : "NULL");
  const int64_t nchunk = (n + SUMSQ_CHUNK - 1) / SUMSQ_CHUNK;
  double small[8], *part = nchunk <= 8 ? small : malloc((size_t)nchunk * sizeof *part);
  if (!part) return em_error(EM_ERR_OOM, "cpu sum_squares: out of memory for %lld partial sums", (long long)nchunk);
  CPU_FOR(n > OPTIM_PAR_MIN, c, nchunk, {
    const int64_t lo = c * SUMSQ_CHUNK, hi = n - lo < SUMSQ_CHUNK ? n : lo + SUMSQ_CHUNK;
    part[c] = dt == EM_F32   ? sumsq_range_f32(x, lo, hi)
              : dt == EM_F64 ? sumsq_range_f64(x, lo, hi)
                             : sumsq_range_bf16(x, lo, hi);
  });
  double s = 0;
  for (int64_t c = 0; c < nchunk; c++) s += part[c];
  if (part != small) free(part);
  *out = s;
  return EM_OK;
}
