/*
** ops_loss.c -- losses (cross_entropy, mse_loss) and dropout.
**
** cross_entropy is one recorded op that gives each row's loss (the kernel
** fuses log_softmax, label smoothing and ignore_index); the reduction on
** top is ordinary sum/div ops, which record their own backward. mse_loss
** is built from elementwise ops entirely.
*/
#include "internal.h"

#include <math.h>

static em_status check_reduction(const char *op, em_reduction r) {
  if (r != EM_REDUCE_MEAN && r != EM_REDUCE_SUM && r != EM_REDUCE_NONE)
    return em_error(EM_ERR_ARG, "%s: reduction must be mean, sum or none, got %d", op, (int)r);
  return EM_OK;
}

/* Applies the reduction to per-element losses; `count` divides for the
** mean. Takes ownership of `loss`. */
static em_status reduce_loss(em_tensor **out, em_tensor *loss, em_reduction r, double count) {
  if (r == EM_REDUCE_NONE) {
    *out = loss;
    return EM_OK;
  }
  em_tensor *sum = NULL;
  em_status s = em_sum(&sum, loss, 0, NULL, false);
  em_release(loss);
  if (s || r == EM_REDUCE_SUM) {
    *out = s ? NULL : sum;
    return s;
  }
  s = em_binary_scalar(out, EM_DIV, sum, count);
  em_release(sum);
  return s;
}

/* ---------------------------------------------------------------- */
/* cross_entropy                                                     */
/* ---------------------------------------------------------------- */

typedef struct ce_ctx {
  int64_t ignore_index;
  double smoothing;
} ce_ctx;

/* saved: logits (contiguous), lse [rows], target (contiguous). */
static em_status cross_entropy_backward(em_node *node, em_tensor *gy, em_tensor **gx) {
  const char *op = "cross_entropy backward";
  const ce_ctx *ctx = node->ctx;
  em_tensor *logits = node->saved[0], *lse = node->saved[1], *target = node->saved[2];
  int64_t rows = em_numel(lse), classes = logits->shape[logits->ndim - 1];
  em_tensor *dloss = NULL, *dlogits = NULL;
  em_status s;
  if ((s = em__contig(&dloss, gy))) return s;
  if ((s = em__new(&dlogits, logits->ndim, logits->shape, logits->dtype, logits->device, op)))
    goto fail;
  if (rows > 0) {
    s = em__be(logits)->cross_entropy_backward(logits->device.index, logits->dtype,
                                               em_data(dlogits), em_data(dloss), em_data(logits),
                                               em_data(lse), em_data(target), rows, classes,
                                               ctx->ignore_index, ctx->smoothing);
    if (s) {
      s = em__kernel_fail(op, s);
      goto fail;
    }
  }
  em_release(dloss);
  gx[0] = dlogits;
  return EM_OK;
fail:
  em_release(dloss);
  em_release(dlogits);
  return s;
}

static const em_opdef CROSS_ENTROPY_OP = {"cross_entropy", cross_entropy_backward, free};

/* Rows whose target is not ignore_index (counted on the host). */
static em_status count_kept(const em_tensor *target, int64_t ignore_index, int64_t *kept) {
  int64_t n = em_numel(target);
  *kept = 0;
  if (n == 0) return EM_OK;
  int64_t *host = malloc(sizeof(int64_t) * (size_t)n);
  if (!host)
    return em_error(EM_ERR_OOM, "cross_entropy: out of memory copying %lld targets",
                    (long long)n);
  em_status s = em_to_host(target, host);
  if (s) {
    free(host);
    return em__kernel_fail("cross_entropy", s);
  }
  for (int64_t i = 0; i < n; i++) *kept += host[i] != ignore_index;
  free(host);
  return EM_OK;
}

static em_status check_cross_entropy(const em_tensor *logits, const em_tensor *target,
                                     double smoothing, em_reduction red) {
  char b1[128], b2[128];
  EM_TRY(em__need_float("cross_entropy", logits, "logits"));
  if (target->dtype != EM_I64)
    return em_error(EM_ERR_DTYPE, "cross_entropy: target must be int64, got %s",
                    em_dtype_name(target->dtype));
  EM_TRY(em__same_device("cross_entropy", logits, target));
  em_shape_str(logits->ndim, logits->shape, b1, sizeof b1);
  em_shape_str(target->ndim, target->shape, b2, sizeof b2);
  if (logits->ndim == 2) {
    if (target->ndim != 1 || target->shape[0] != logits->shape[0])
      return em_error(EM_ERR_SHAPE, "cross_entropy: logits %s need target [%lld], got %s", b1,
                      (long long)logits->shape[0], b2);
  } else if (logits->ndim == 1) {
    if (target->ndim != 0)
      return em_error(EM_ERR_SHAPE, "cross_entropy: logits %s need a 0-d target, got %s", b1,
                      b2);
  } else {
    return em_error(EM_ERR_SHAPE, "cross_entropy: logits must be [N, C] or [C], got %s", b1);
  }
  if (logits->shape[logits->ndim - 1] < 1)
    return em_error(EM_ERR_SHAPE, "cross_entropy: logits %s have no classes", b1);
  if (!(smoothing >= 0 && smoothing <= 1))
    return em_error(EM_ERR_ARG, "cross_entropy: label_smoothing must be in [0, 1], got %g",
                    smoothing);
  return check_reduction("cross_entropy", red);
}

/* Mean divides by the rows not ignored. When every row is ignored the
** mean is 0 with zero gradients (PyTorch gives NaN): a batch of padding
** should not poison a training run. */
static em_status cross_entropy_impl(em_tensor **out, em_tensor *logits, em_tensor *target,
                                    int64_t ignore_index, double label_smoothing,
                                    em_reduction red);

/* Runs in float32 under autocast (autocast.c). */
em_status em_cross_entropy(em_tensor **out, em_tensor *logits, em_tensor *target,
                           int64_t ignore_index, double label_smoothing, em_reduction red) {
  if (!out || !logits || !target) return em_error(EM_ERR_ARG, "cross_entropy: NULL argument");
  em_tensor *la;
  EM_TRY(em__autocast_op(EM_AC_CROSS_ENTROPY, 1, &logits, &la));
  em_status s = cross_entropy_impl(out, la, target, ignore_index, label_smoothing, red);
  em_release(la);
  return s;
}

static em_status cross_entropy_impl(em_tensor **out, em_tensor *logits, em_tensor *target,
                                    int64_t ignore_index, double label_smoothing,
                                    em_reduction red) {
  const char *op = "cross_entropy";
  *out = NULL;
  EM_TRY(check_cross_entropy(logits, target, label_smoothing, red));
  int64_t classes = logits->shape[logits->ndim - 1];
  int64_t rows = logits->ndim == 2 ? logits->shape[0] : 1;

  em_tensor *lc = NULL, *tc = NULL, *loss = NULL, *lse = NULL;
  em_status s;
  if ((s = em__contig(&lc, logits))) goto fail;
  if ((s = em__contig(&tc, target))) goto fail;
  /* One loss per row: [N], or a 0-d loss for a single [C] row. */
  if ((s = em__new(&loss, logits->ndim - 1, logits->shape, logits->dtype, logits->device, op)))
    goto fail;
  if ((s = em__new(&lse, 1, &rows, logits->dtype, logits->device, op))) goto fail;
  if (rows > 0) {
    s = em__be(lc)->cross_entropy(lc->device.index, lc->dtype, em_data(loss), em_data(lse),
                                  em_data(lc), em_data(tc), rows, classes, ignore_index,
                                  label_smoothing);
    if (s) {
      s = em__kernel_fail(op, s);
      goto fail;
    }
  }
  if (em_autograd_needed(1, &logits)) {
    ce_ctx *ctx = malloc(sizeof *ctx);
    if (!ctx) {
      s = em_error(EM_ERR_OOM, "cross_entropy: out of memory for the autograd context");
      goto fail;
    }
    ctx->ignore_index = ignore_index;
    ctx->smoothing = label_smoothing;
    em_tensor *saved[3] = {lc, lse, tc};
    if ((s = em_autograd_record(loss, &CROSS_ENTROPY_OP, 1, &logits, 3, saved, ctx))) goto fail;
  }
  int64_t kept = 0;
  if (red == EM_REDUCE_MEAN && (s = count_kept(tc, ignore_index, &kept))) goto fail;
  em_release(lc);
  em_release(tc);
  em_release(lse);
  return reduce_loss(out, loss, red, kept > 0 ? (double)kept : 1.0);
fail:
  em_release(lc);
  em_release(tc);
  em_release(loss);
  em_release(lse);
  return s;
}

/* ---------------------------------------------------------------- */
/* mse_loss                                                          */
/* ---------------------------------------------------------------- */

static em_status mse_loss_impl(em_tensor **out, em_tensor *input, em_tensor *target,
                               em_reduction red);

/* Runs in float32 under autocast (autocast.c). */
em_status em_mse_loss(em_tensor **out, em_tensor *input, em_tensor *target, em_reduction red) {
  if (!out || !input || !target) return em_error(EM_ERR_ARG, "mse_loss: NULL argument");
  em_tensor *in[2] = {input, target}, *ac[2];
  EM_TRY(em__autocast_op(EM_AC_MSE_LOSS, 2, in, ac));
  em_status s = mse_loss_impl(out, ac[0], ac[1], red);
  em_release(ac[0]);
  em_release(ac[1]);
  return s;
}

static em_status mse_loss_impl(em_tensor **out, em_tensor *input, em_tensor *target,
                               em_reduction red) {
  char b1[128], b2[128];
  *out = NULL;
  EM_TRY(em__need_float("mse_loss", input, "input"));
  if (target->dtype != input->dtype)
    return em_error(EM_ERR_DTYPE, "mse_loss: target is %s but input is %s",
                    em_dtype_name(target->dtype), em_dtype_name(input->dtype));
  EM_TRY(em__same_device("mse_loss", input, target));
  bool same = input->ndim == target->ndim;
  for (int k = 0; same && k < input->ndim; k++) same = input->shape[k] == target->shape[k];
  if (!same)
    return em_error(EM_ERR_SHAPE, "mse_loss: input %s and target %s must have the same shape",
                    em_shape_str(input->ndim, input->shape, b1, sizeof b1),
                    em_shape_str(target->ndim, target->shape, b2, sizeof b2));
  EM_TRY(check_reduction("mse_loss", red));
  em_tensor *diff = NULL, *sq = NULL;
  EM_TRY(em_sub(&diff, input, target));
  em_status s = em_mul(&sq, diff, diff);
  em_release(diff);
  if (s) return s;
  return reduce_loss(out, sq, red, (double)em_numel(input));
}

/* ---------------------------------------------------------------- */
/* dropout                                                           */
/* ---------------------------------------------------------------- */

/* saved: mask (0 or 1/(1-p) per element). */
static em_status dropout_backward(em_node *node, em_tensor *gy, em_tensor **gx) {
  return em_mul(&gx[0], gy, node->saved[0]);
}

static const em_opdef DROPOUT_OP = {"dropout", dropout_backward, NULL};

/* Dropout of x on the Philox stream (seed, offset): element i of x, row
** major, is kept as ember_philox.h's em_philox_keep(i) says, the rule of
** the fused attention kernels' dropout too. draw: take a fresh stream of
** numel(x) counters from the global generator instead (em_dropout). */
static em_status dropout_on(em_tensor **out, em_tensor *x, double p, bool train, bool draw, uint64_t seed,
                            uint64_t offset) {
  const char *op = "dropout";
  *out = NULL;
  if (!(p >= 0 && p <= 1))
    return em_error(EM_ERR_ARG, "dropout: p must be in [0, 1], got %g", p);
  EM_TRY(em__need_float(op, x, "input"));
  if (!train || p == 0) {
    *out = em_retain(x);
    return EM_OK;
  }
  em_tensor *xc = NULL, *y = NULL, *mask = NULL;
  int64_t n = em_numel(x);
  em_status s;
  if (p == 1) {
    /* Everything dropped; the kernel's 1/(1-p) would be infinite. */
    if ((s = em_zeros(&y, x->ndim, x->shape, x->dtype, x->device))) goto fail;
    if ((s = em_zeros(&mask, x->ndim, x->shape, x->dtype, x->device))) goto fail;
  } else {
    if ((s = em__contig(&xc, x))) goto fail;
    if ((s = em__new(&y, x->ndim, x->shape, x->dtype, x->device, op))) goto fail;
    if ((s = em__new(&mask, x->ndim, x->shape, x->dtype, x->device, op))) goto fail;
    if (n > 0) {
      if (draw) seed = em_initial_seed(), offset = em_rng_advance((uint64_t)n);
      s = em__be(x)->dropout(x->device.index, x->dtype, em_data(y), em_data(mask), em_data(xc),
                             n, p, seed, offset);
      if (s) {
        s = em__kernel_fail(op, s);
        goto fail;
      }
    }
  }
  if (em_autograd_needed(1, &x) &&
      (s = em_autograd_record(y, &DROPOUT_OP, 1, &x, 1, &mask, NULL)))
    goto fail;
  em_release(xc);
  em_release(mask);
  *out = y;
  return EM_OK;
fail:
  em_release(xc);
  em_release(y);
  em_release(mask);
  return s;
}

em_status em_dropout(em_tensor **out, em_tensor *x, double p, bool train) {
  return dropout_on(out, x, p, train, true, 0, 0);
}

em_status em__dropout_at(em_tensor **out, em_tensor *x, double p, uint64_t seed, uint64_t offset) {
  return dropout_on(out, x, p, true, false, seed, offset);
}
