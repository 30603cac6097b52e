/*
** cpu_loss.c -- cross entropy over the rows of [rows, classes] logits,
** with ignore_index and label smoothing, as PyTorch defines them:
**
**   logp = log_softmax(logits row)
**   loss = (1 - eps) * (-logp[target]) + eps * mean over classes of (-logp)
**        = lse - (1 - eps) * x[target] - eps * mean(x)
**
** and 0 for a row whose target is ignore_index. The reduction (mean over
** the kept rows, or sum) is the core's business.
*/
#include "cpu_internal.h"
#include "cpu_vmath.h"

#include <tgmath.h>

static em_status check_args(const char *kernel, em_dtype dt, const int64_t *target, int64_t rows,
                            int64_t classes, int64_t ignore_index, double smoothing) {
  if (dt != EM_F32 && dt != EM_F64 && dt != EM_BF16)
    return cpu_bad_dtype(kernel, dt, "float32, float64, bfloat16");
  if (rows < 0 || classes < 0)
    return em_error(EM_ERR_SHAPE, "cpu %s: bad sizes rows=%lld classes=%lld", kernel,
                    (long long)rows, (long long)classes);
  if (!(smoothing >= 0 && smoothing <= 1))
    return em_error(EM_ERR_ARG, "cpu %s: label smoothing %g, expected within [0, 1]", kernel,
                    smoothing);
  for (int64_t r = 0; r < rows; r++) {
    int64_t t = target[r];
    if (t != ignore_index && (t < 0 || t >= classes))
      return em_error(EM_ERR_INDEX,
                      "cpu %s: target %lld of row %lld is out of range for %lld classes "
                      "(ignore_index is %lld)",
                      kernel, (long long)t, (long long)r, (long long)classes,
                      (long long)ignore_index);
  }
  return EM_OK;
}

/* EXP_T as in cpu_softmax_norm.c: cpu_exp_f32 for float32 rows. */
#define T float
#define SUF f32
#define EXP_T cpu_exp_f32
#include "cpu_loss_tmpl.h"
#undef EXP_T
#undef T
#undef SUF

#define T double
#define SUF f64
#define EXP_T exp
#include "cpu_loss_tmpl.h"
#undef EXP_T
#undef T
#undef SUF

em_status cpu_cross_entropy(int device, em_dtype dt, void *loss, void *lse, const void *logits,
                            const int64_t *target, int64_t rows, int64_t classes,
                            int64_t ignore_index, double smoothing) {
  (void)device;
  em_status s =
      check_args("cross_entropy", dt, target, rows, classes, ignore_index, smoothing);
  if (s) return s;
  if (rows > 0 && classes == 0)
    return em_error(EM_ERR_SHAPE, "cpu cross_entropy: %lld rows of 0 classes", (long long)rows);
  if (dt == EM_BF16)
    return cpu_cross_entropy_bf16(loss, lse, logits, target, rows, classes, ignore_index,
                                  smoothing);
  if (dt == EM_F32)
    ce_forward_f32(loss, lse, logits, target, rows, classes, ignore_index, smoothing);
  else
    ce_forward_f64(loss, lse, logits, target, rows, classes, ignore_index, smoothing);
  return EM_OK;
}

em_status cpu_cross_entropy_backward(int device, em_dtype dt, void *dlogits, const void *dloss,
                                     const void *logits, const void *lse, const int64_t *target,
                                     int64_t rows, int64_t classes, int64_t ignore_index,
                                     double smoothing) {
  (void)device;
  em_status s =
      check_args("cross_entropy_backward", dt, target, rows, classes, ignore_index, smoothing);
  if (s) return s;
  if (rows > 0 && classes > 0 && (!dloss || !lse))
    return em_error(EM_ERR_ARG,
                    "cpu cross_entropy_backward: needs dloss and the forward's lse, got NULL");
  if (dt == EM_BF16)
    return cpu_cross_entropy_backward_bf16(dlogits, dloss, logits, lse, target, rows, classes,
                                           ignore_index, smoothing);
  if (dt == EM_F32)
    ce_backward_f32(dlogits, dloss, logits, lse, target, rows, classes, ignore_index, smoothing);
  else
    ce_backward_f64(dlogits, dloss, logits, lse, target, rows, classes, ignore_index, smoothing);
  return EM_OK;
}
