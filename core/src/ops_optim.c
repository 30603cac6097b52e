/*
** ops_optim.c -- fused optimizer steps: em_adam_step, em_sgd_step; and
** em_sum_squares, the norm of the gradients that clip_grad_norm takes.
**
** The dispatch lives here, beside every other op's: the backend's fused
** kernel (adam_step / sgd_step are optional in the ABI) or, without one,
** the same update composed of core in-place ops. The Lua optimizers
** (lua/ember/optim/) call these through one binding function each.
*/
#include <math.h>
#include <string.h>

#include "ember_backend.h"
#include "internal.h"

/* Checks that t fits the parameter p: same shape, dtype and device. */
static em_status check_like(const char *op, const char *what, const em_tensor *t, const em_tensor *p,
                            bool need_contig) {
  char a[160], b[160];
  if (t->ndim != p->ndim || memcmp(t->shape, p->shape, sizeof(int64_t) * (size_t)p->ndim) != 0)
    return em_error(EM_ERR_SHAPE, "%s: %s has shape %s, the parameter %s", op, what,
                    em_shape_str(t->ndim, t->shape, a, sizeof a), em_shape_str(p->ndim, p->shape, b, sizeof b));
  if (t->dtype != p->dtype)
    return em_error(EM_ERR_DTYPE, "%s: %s is %s, the parameter %s", op, what, em_dtype_name(t->dtype),
                    em_dtype_name(p->dtype));
  if (!em_device_eq(t->device, p->device))
    return em_error(EM_ERR_DEVICE, "%s: %s is on %s, the parameter on %s", op, what,
                    em_device_str(t->device, a, sizeof a), em_device_str(p->device, b, sizeof b));
  if (need_contig && !em_is_contiguous(t)) return em_error(EM_ERR_ARG, "%s: %s must be contiguous", op, what);
  return EM_OK;
}

static em_status check_param(const char *op, const em_tensor *p) {
  if (p->dtype != EM_F32 && p->dtype != EM_F64 && p->dtype != EM_BF16)
    return em_error(EM_ERR_DTYPE, "%s: parameters must be float32, float64 or bfloat16, got %s", op,
                    em_dtype_name(p->dtype));
  if (!em_is_contiguous(p)) return em_error(EM_ERR_ARG, "%s: the parameter must be contiguous", op);
  return EM_OK;
}

/* ---------------------------------------------------------------- */
/* Adam / AdamW                                                      */
/* ---------------------------------------------------------------- */

/* The same update as the CPU backend's adam_step, from core ops. */
static em_status adam_composed(em_tensor *p, em_tensor *g, em_tensor *m, em_tensor *v, const em_adam_opts *a) {
  em_tensor *gg = NULL, *g2 = NULL, *den = NULL, *upd = NULL, *wdp = NULL, *d2 = NULL;
  em_status s = EM_OK;
  double bc1 = 1 - pow(a->beta1, (double)a->step), bc2s = sqrt(1 - pow(a->beta2, (double)a->step));
  if (a->weight_decay != 0 && a->decoupled) s = em_mul_scalar_(p, 1 - a->lr * a->weight_decay);
  if (!s && a->weight_decay != 0 && !a->decoupled) {
    s = em_binary_scalar(&wdp, EM_MUL, p, a->weight_decay);
    if (!s) s = em_add(&gg, g, wdp);
  } else if (!s) {
    gg = em_retain(g);
  }
  if (!s) s = em_mul_scalar_(m, a->beta1);
  if (!s) s = em_add_(m, gg, 1 - a->beta1);
  if (!s) s = em_mul(&g2, gg, gg);
  if (!s) s = em_mul_scalar_(v, a->beta2);
  if (!s) s = em_add_(v, g2, 1 - a->beta2);
  if (!s) s = em_unary(&den, EM_SQRT, v, 0, 0);
  if (!s) s = em_mul_scalar_(den, 1 / bc2s);
  if (!s) s = em_binary_scalar(&d2, EM_ADD, den, a->eps);
  if (!s) s = em_div(&upd, m, d2);
  if (!s) s = em_add_(p, upd, -a->lr / bc1);
  em_release(gg), em_release(g2), em_release(den), em_release(d2), em_release(upd), em_release(wdp);
  return s;
}

em_status em_adam_step(em_tensor *p, em_tensor *g, em_tensor *m, em_tensor *v, const em_adam_opts *a) {
  const char *op = a->decoupled ? "adamw_step" : "adam_step";
  EM_TRY(check_param(op, p));
  EM_TRY(check_like(op, "the gradient", g, p, false));
  EM_TRY(check_like(op, "exp_avg", m, p, true));
  EM_TRY(check_like(op, "exp_avg_sq", v, p, true));
  if (a->step < 1) return em_error(EM_ERR_ARG, "%s: step %lld, expected >= 1", op, (long long)a->step);
  if (!(a->beta1 >= 0 && a->beta1 < 1) || !(a->beta2 >= 0 && a->beta2 < 1))
    return em_error(EM_ERR_ARG, "%s: betas (%g, %g) must lie in [0, 1)", op, a->beta1, a->beta2);
  if (!(a->lr >= 0) || !(a->eps >= 0) || !(a->weight_decay >= 0))
    return em_error(EM_ERR_ARG, "%s: lr, eps and weight_decay must be >= 0, got %g, %g, %g", op, a->lr, a->eps,
                    a->weight_decay);
  const em_backend *be = em_backend_of(p);
  em_tensor *gc = NULL;
  EM_TRY(em_contiguous(&gc, g));
  em_tensor_written(p);
  em_status s;
  if (be->adam_step && !a->composed) {
    s = be->adam_step(p->device.index, p->dtype, em_numel(p), em_data(p), em_data(gc), em_data(m), em_data(v),
                      a->lr, a->beta1, a->beta2, a->eps, a->weight_decay, a->step, a->decoupled);
    if (s) s = em__kernel_fail(op, s);
  } else {
    bool prev = em_set_grad_enabled(false);
    s = adam_composed(p, gc, m, v, a);
    em_set_grad_enabled(prev);
  }
  em_release(gc);
  return s;
}

/* ---------------------------------------------------------------- */
/* SGD                                                               */
/* ---------------------------------------------------------------- */

/* The same update as the CPU backend's sgd_step, from core ops. */
static em_status sgd_composed(em_tensor *p, em_tensor *g, em_tensor *buf, const em_sgd_opts *a) {
  em_tensor *d = NULL, *wdp = NULL, *nd = NULL;
  em_status s = EM_OK;
  if (a->weight_decay != 0) {
    s = em_binary_scalar(&wdp, EM_MUL, p, a->weight_decay);
    if (!s) s = em_add(&d, g, wdp);
  } else {
    d = em_retain(g);
  }
  if (!s && a->momentum != 0) {
    if (a->first_step) {
      s = em_copy_(buf, d);
    } else {
      s = em_mul_scalar_(buf, a->momentum);
      if (!s) s = em_add_(buf, d, 1 - a->dampening);
    }
    if (!s && a->nesterov) {
      s = em_clone(&nd, d);
      if (!s) s = em_add_(nd, buf, a->momentum);
    } else if (!s) {
      nd = em_retain(buf);
    }
    if (!s) {
      em_release(d);
      d = nd;
      nd = NULL;
    }
  }
  if (!s) s = em_add_(p, d, -a->lr);
  em_release(d), em_release(wdp), em_release(nd);
  return s;
}

em_status em_sgd_step(em_tensor *p, em_tensor *g, em_tensor *buf, const em_sgd_opts *a) {
  const char *op = "sgd_step";
  EM_TRY(check_param(op, p));
  EM_TRY(check_like(op, "the gradient", g, p, false));
  if (buf) EM_TRY(check_like(op, "momentum_buffer", buf, p, true));
  if (a->momentum != 0 && !buf)
    return em_error(EM_ERR_ARG, "%s: momentum %g needs a momentum buffer", op, a->momentum);
  if (a->nesterov && (a->momentum <= 0 || a->dampening != 0))
    return em_error(EM_ERR_ARG, "%s: nesterov needs momentum > 0 and dampening 0, got momentum %g, dampening %g",
                    op, a->momentum, a->dampening);
  if (!(a->lr >= 0) || !(a->momentum >= 0) || !(a->weight_decay >= 0))
    return em_error(EM_ERR_ARG, "%s: lr, momentum and weight_decay must be >= 0, got %g, %g, %g", op, a->lr,
                    a->momentum, a->weight_decay);
  const em_backend *be = em_backend_of(p);
  em_tensor *gc = NULL;
  EM_TRY(em_contiguous(&gc, g));
  em_tensor_written(p);
  em_status s;
  if (be->sgd_step && !a->composed) {
    s = be->sgd_step(p->device.index, p->dtype, em_numel(p), em_data(p), em_data(gc), buf ? em_data(buf) : NULL,
                     a->lr, a->momentum, a->dampening, a->weight_decay, a->nesterov, a->first_step);
    if (s) s = em__kernel_fail(op, s);
  } else {
    bool prev = em_set_grad_enabled(false);
    s = sgd_composed(p, gc, buf, a);
    em_set_grad_enabled(prev);
  }
  em_release(gc);
  return s;
}

/* ---------------------------------------------------------------- */
/* The sum of squares of a list of tensors                           */
/* ---------------------------------------------------------------- */

/* One tensor's sum of squares from core ops: x * x summed, in float32
** for float32 x, as clip_grad_norm composed it in Lua. */
static em_status sum_squares_composed(em_tensor *t, double *out) {
  em_tensor *sq = NULL, *sum = NULL;
  em_status s = em_mul(&sq, t, t);
  if (!s) s = em_sum(&sum, sq, 0, NULL, false);
  if (!s) s = em_item(sum, out);
  em_release(sq), em_release(sum);
  return s;
}

/* A KJV model's 69 gradients cost four Lua ops each (a square, a sum, a
** float64 cast, an add: 276 calls and two passes over each gradient, 1.5
** ms of a 55 ms step); here one C call, one pass per tensor. */
em_status em_sum_squares(double *out, int n, em_tensor *const *ts, bool composed) {
  if (!out || n < 0 || (n > 0 && !ts)) return em_error(EM_ERR_ARG, "sum_squares: NULL argument");
  *out = 0;
  double total = 0;
  for (int i = 0; i < n; i++) {
    em_tensor *t = ts[i];
    if (!t) return em_error(EM_ERR_ARG, "sum_squares: tensor %d is NULL", i + 1);
    if (t->dtype != EM_F32 && t->dtype != EM_F64 && t->dtype != EM_BF16)
      return em_error(EM_ERR_DTYPE, "sum_squares: tensor %d is %s, expected a floating dtype", i + 1,
                      em_dtype_name(t->dtype));
    const em_backend *be = em__be(t);
    double part = 0;
    em_status s;
    if (!composed && be->sum_squares && em_is_contiguous(t)) {
      s = be->sum_squares(t->device.index, t->dtype, em_data(t), em_numel(t), &part);
      if (s) s = em__kernel_fail("sum_squares", s);
    } else {
      s = sum_squares_composed(t, &part);
    }
    if (s) return s;
    total += part;
  }
  *out = total;
  return EM_OK;
}
