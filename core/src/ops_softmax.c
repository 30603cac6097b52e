/*
** ops_softmax.c -- softmax and log_softmax along any dim.
**
** The backend kernels work on a contiguous [rows, n] block whose rows are
** normalised. A dim other than the last is first swapped with the last one
** (a transposed contiguous copy), the kernel runs, and the result is
** swapped back. The swap is its own inverse, so one helper does both ways.
*/
#include "internal.h"

typedef struct softmax_ctx {
  int dim; /* normalised dim of the input */
} softmax_ctx;

/* x with dims d and last swapped, as a contiguous tensor (no autograd).
** Retains x itself when d already is the last dim and x is contiguous. */
static em_status swap_last_contig(em_tensor **out, em_tensor *x, int d) {
  int last = x->ndim - 1;
  if (x->ndim == 0 || d == last) return em__contig(out, x);
  int64_t shape[EM_MAX_DIMS], stride[EM_MAX_DIMS];
  memcpy(shape, x->shape, sizeof shape);
  memcpy(stride, x->stride, sizeof stride);
  shape[d] = x->shape[last];
  shape[last] = x->shape[d];
  stride[d] = x->stride[last];
  stride[last] = x->stride[d];
  em_tensor *swapped;
  EM_TRY(em__alias(&swapped, x, x->ndim, shape, stride, x->offset));
  em_status s = em__contig(out, swapped);
  em_release(swapped);
  return s;
}

/* Rows and row length of a contiguous tensor whose last dim is normalised
** (a 0-d tensor is one row of one element). */
static void rows_and_n(const em_tensor *t, int64_t *rows, int64_t *n) {
  if (t->ndim == 0) {
    *rows = 1;
    *n = 1;
    return;
  }
  *n = t->shape[t->ndim - 1];
  *rows = 1;
  for (int i = 0; i < t->ndim - 1; i++) *rows *= t->shape[i];
}

static em_status softmax_backward_common(em_node *node, em_tensor *gy, em_tensor **gx, bool log) {
  const char *op = log ? "log_softmax backward" : "softmax backward";
  const softmax_ctx *ctx = node->ctx;
  em_tensor *y = node->saved[0]; /* output, already in swapped layout */
  em_tensor *gyc = NULL, *gxc = NULL;
  int64_t rows, n;
  EM_TRY(swap_last_contig(&gyc, gy, ctx->dim));
  em_status s = em__new(&gxc, y->ndim, y->shape, y->dtype, y->device, op);
  if (s) goto done;
  rows_and_n(y, &rows, &n);
  if (rows > 0 && n > 0) {
    s = em__be(y)->softmax_backward(y->device.index, y->dtype, em_data(gxc), em_data(gyc),
                                    em_data(y), rows, n, log);
    if (s) {
      s = em__kernel_fail(op, s);
      goto done;
    }
  }
  s = swap_last_contig(&gx[0], gxc, ctx->dim);
done:
  em_release(gyc);
  em_release(gxc);
  return s;
}

static em_status softmax_backward(em_node *node, em_tensor *gy, em_tensor **gx) {
  return softmax_backward_common(node, gy, gx, false);
}

static em_status log_softmax_backward(em_node *node, em_tensor *gy, em_tensor **gx) {
  return softmax_backward_common(node, gy, gx, true);
}

static const em_opdef SOFTMAX_OP = {"softmax", softmax_backward, free};
static const em_opdef LOG_SOFTMAX_OP = {"log_softmax", log_softmax_backward, free};

static em_status softmax_forward(em_tensor **out, em_tensor *x, int dim, bool log) {
  const char *op = log ? "log_softmax" : "softmax";
  const em_opdef *def = log ? &LOG_SOFTMAX_OP : &SOFTMAX_OP;
  int d;
  *out = NULL;
  EM_TRY(em__need_float(op, x, "input"));
  /* A 0-d tensor takes dim 0 or -1, as in PyTorch. */
  EM_TRY(em__dim(op, dim, x->ndim > 0 ? x->ndim : 1, &d));

  em_tensor *xc = NULL, *yc = NULL, *y = NULL;
  int64_t rows, n;
  em_status s = swap_last_contig(&xc, x, d);
  if (s) return s;
  s = em__new(&yc, xc->ndim, xc->shape, xc->dtype, xc->device, op);
  if (s) goto fail;
  rows_and_n(xc, &rows, &n);
  if (rows > 0 && n > 0) {
    s = em__be(xc)->softmax(xc->device.index, xc->dtype, em_data(yc), em_data(xc), rows, n, log);
    if (s) {
      s = em__kernel_fail(op, s);
      goto fail;
    }
  }
  s = swap_last_contig(&y, yc, d);
  if (s) goto fail;

  if (em_autograd_needed(1, &x)) {
    softmax_ctx *ctx = malloc(sizeof *ctx);
    if (!ctx) {
      s = em_error(EM_ERR_OOM, "%s: out of memory for the autograd context", op);
      goto fail;
    }
    ctx->dim = d;
    /* Save the output in the swapped layout the kernel wants. */
    s = em_autograd_record(y, def, 1, &x, 1, &yc, ctx);
    if (s) goto fail;
  }
  em_release(xc);
  em_release(yc);
  *out = y;
  return EM_OK;
fail:
  em_release(xc);
  em_release(yc);
  em_release(y);
  return s;
}

/* Both run in float32 under autocast (autocast.c). */
static em_status softmax_autocast(em_tensor **out, em_tensor *x, int dim, bool log) {
  if (!out || !x) return em_error(EM_ERR_ARG, "%s: NULL argument", log ? "log_softmax" : "softmax");
  em_tensor *xa;
  EM_TRY(em__autocast_op(log ? EM_AC_LOG_SOFTMAX : EM_AC_SOFTMAX, 1, &x, &xa));
  em_status s = softmax_forward(out, xa, dim, log);
  em_release(xa);
  return s;
}

em_status em_softmax(em_tensor **out, em_tensor *x, int dim) {
  return softmax_autocast(out, x, dim, false);
}

em_status em_log_softmax(em_tensor **out, em_tensor *x, int dim) {
  return softmax_autocast(out, x, dim, true);
}
