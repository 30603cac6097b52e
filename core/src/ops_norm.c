/*
** ops_norm.c -- layer normalisation and RMS normalisation over the last
** `nnorm` dims.
**
** The input is seen as [rows, n] with n the product of the normalised
** dims. The kernel also writes each row's 1/std (and for layer norm its
** mean), which the backward reuses instead of recomputing them. RMS norm
** is layer norm without centring and without a bias; its kernels are
** optional (a backend without them makes em_rms_norm return
** EM_ERR_UNSUPPORTED, and nn.RMSNorm composes it then).
*/
#include "internal.h"

/* Statistics of bf16 inputs are kept in float32, as the kernels compute. */
static em_dtype stat_dtype(em_dtype dt) { return dt == EM_BF16 ? EM_F32 : dt; }

/* Checks that an affine parameter (weight or bias) is shaped like the
** normalised dims of x and matches its dtype and device. */
static em_status check_param(const char *op, const em_tensor *x, int nnorm, const em_tensor *p,
                             const char *what) {
  char b1[128], b2[128], b3[128];
  const int64_t *want = x->shape + (x->ndim - nnorm);
  bool same = p->ndim == nnorm;
  for (int i = 0; same && i < nnorm; i++) same = p->shape[i] == want[i];
  if (!same)
    return em_error(EM_ERR_SHAPE,
                    "%s: %s has shape %s, expected %s (the last %d dims of input %s)", op, what,
                    em_shape_str(p->ndim, p->shape, b1, sizeof b1),
                    em_shape_str(nnorm, want, b2, sizeof b2), nnorm,
                    em_shape_str(x->ndim, x->shape, b3, sizeof b3));
  if (p->dtype != x->dtype)
    return em_error(EM_ERR_DTYPE, "%s: %s is %s but input is %s", op, what,
                    em_dtype_name(p->dtype), em_dtype_name(x->dtype));
  return em__same_device(op, x, p);
}

/* saved: x (contiguous), mean (NULL for RMS norm), rstd, weight
** (contiguous, or NULL). inputs: x, then weight if given, then bias if
** given (never for RMS norm). */
static em_status norm_backward(em_node *node, em_tensor *gy, em_tensor **gx) {
  em_tensor *x = node->saved[0], *mean = node->saved[1], *rstd = node->saved[2];
  em_tensor *w = node->saved[3];
  const bool centred = mean != NULL;
  const char *op = centred ? "layer_norm backward" : "rms_norm backward";
  int has_w = w != NULL, has_b = node->n_inputs - 1 - has_w;
  int iw = has_w ? 1 : -1;          /* input slot of the weight, -1 if none */
  int ib = has_b ? 1 + has_w : -1;  /* input slot of the bias */
  bool want_w = iw > 0 && node->needs_grad[iw];
  bool want_b = ib > 0 && node->needs_grad[ib];
  int64_t rows = rstd->shape[0];
  int64_t n = rows > 0 ? em_numel(x) / rows : 0;
  em_tensor *dy = NULL, *dx = NULL, *dw = NULL, *db = NULL;
  em_status s;

  /* Zeros, so that an empty input still gives well-defined dw and db. */
  if (want_w && (s = em_zeros(&dw, node->in_ndim[iw], node->in_shape[iw], x->dtype, x->device)))
    goto fail;
  if (want_b && (s = em_zeros(&db, node->in_ndim[ib], node->in_shape[ib], x->dtype, x->device)))
    goto fail;
  if ((s = em__new(&dx, x->ndim, x->shape, x->dtype, x->device, op))) goto fail;
  if ((s = em__contig(&dy, gy))) goto fail;
  if (rows > 0 && n > 0) {
    const em_backend *be = em__be(x);
    void *pw = w ? em_data(w) : NULL, *pdw = dw ? em_data(dw) : NULL;
    if (centred)
      s = be->layer_norm_backward(x->device.index, x->dtype, em_data(dx), pdw, db ? em_data(db) : NULL,
                                  em_data(dy), em_data(x), em_data(mean), em_data(rstd), pw, rows, n);
    else
      s = be->rms_norm_backward(x->device.index, x->dtype, em_data(dx), pdw, em_data(dy), em_data(x),
                                em_data(rstd), pw, rows, n);
    if (s) {
      s = em__kernel_fail(op, s);
      goto fail;
    }
  }
  em_release(dy);
  if (node->needs_grad[0]) gx[0] = dx;
  else em_release(dx);
  if (want_w) gx[iw] = dw;
  if (want_b) gx[ib] = db;
  return EM_OK;
fail:
  em_release(dy);
  em_release(dx);
  em_release(dw);
  em_release(db);
  return s;
}

static const em_opdef LAYER_NORM_OP = {"layer_norm", norm_backward, NULL};
static const em_opdef RMS_NORM_OP = {"rms_norm", norm_backward, NULL};

static em_status norm_impl(const char *op, em_tensor **out, em_tensor *x, int nnorm,
                           em_tensor *weight, em_tensor *bias, double eps, bool centred);

/* Runs in float32 under autocast (autocast.c). */
em_status em_layer_norm(em_tensor **out, em_tensor *x, int nnorm, em_tensor *weight,
                        em_tensor *bias, double eps) {
  if (!out || !x) return em_error(EM_ERR_ARG, "layer_norm: NULL argument");
  em_tensor *in[3] = {x, weight, bias}, *ac[3];
  EM_TRY(em__autocast_op(EM_AC_LAYER_NORM, 3, in, ac));
  em_status s = norm_impl("layer_norm", out, ac[0], nnorm, ac[1], ac[2], eps, true);
  for (int i = 0; i < 3; i++) em_release(ac[i]);
  return s;
}

/* Runs in float32 under autocast, as layer_norm. */
em_status em_rms_norm(em_tensor **out, em_tensor *x, int nnorm, em_tensor *weight, double eps) {
  if (!out || !x) return em_error(EM_ERR_ARG, "rms_norm: NULL argument");
  *out = NULL;
  const em_backend *be = em__be(x);
  if (!be->rms_norm || !be->rms_norm_backward)
    return em_error(EM_ERR_UNSUPPORTED, "rms_norm: the %s backend has no RMS norm kernel", be->name);
  em_tensor *in[2] = {x, weight}, *ac[2];
  EM_TRY(em__autocast_op(EM_AC_LAYER_NORM, 2, in, ac));
  em_status s = norm_impl("rms_norm", out, ac[0], nnorm, ac[1], NULL, eps, false);
  for (int i = 0; i < 2; i++) em_release(ac[i]);
  return s;
}

static em_status norm_impl(const char *op, em_tensor **out, em_tensor *x, int nnorm,
                           em_tensor *weight, em_tensor *bias, double eps, bool centred) {
  char buf[128];
  *out = NULL;
  EM_TRY(em__need_float(op, x, "input"));
  if (nnorm < 1 || nnorm > x->ndim)
    return em_error(EM_ERR_ARG, "%s: cannot normalise over the last %d dims of input %s "
                    "(expected 1..%d)", op, nnorm, em_shape_str(x->ndim, x->shape, buf, sizeof buf),
                    x->ndim);
  if (!(eps >= 0))
    return em_error(EM_ERR_ARG, "%s: eps must be >= 0, got %g", op, eps);
  if (weight) EM_TRY(check_param(op, x, nnorm, weight, "weight"));
  if (bias) EM_TRY(check_param(op, x, nnorm, bias, "bias"));

  int64_t rows = 1, n = 1;
  for (int i = 0; i < x->ndim; i++) {
    if (i < x->ndim - nnorm) rows *= x->shape[i];
    else n *= x->shape[i];
  }
  em_tensor *xc = NULL, *wc = NULL, *bc = NULL, *y = NULL, *mean = NULL, *rstd = NULL;
  em_status s;
  if ((s = em__contig(&xc, x))) goto done;
  if (weight && (s = em__contig(&wc, weight))) goto done;
  if (bias && (s = em__contig(&bc, bias))) goto done;
  if ((s = em__new(&y, x->ndim, x->shape, x->dtype, x->device, op))) goto done;
  if (centred && (s = em__new(&mean, 1, &rows, stat_dtype(x->dtype), x->device, op))) goto done;
  if ((s = em__new(&rstd, 1, &rows, stat_dtype(x->dtype), x->device, op))) goto done;
  if (rows > 0 && n > 0) {
    const em_backend *be = em__be(x);
    void *pw = wc ? em_data(wc) : NULL;
    if (centred)
      s = be->layer_norm(x->device.index, x->dtype, em_data(y), em_data(mean), em_data(rstd),
                         em_data(xc), pw, bc ? em_data(bc) : NULL, rows, n, eps);
    else
      s = be->rms_norm(x->device.index, x->dtype, em_data(y), em_data(rstd), em_data(xc), pw, rows,
                       n, eps);
    if (s) {
      s = em__kernel_fail(op, s);
      goto done;
    }
  }
  em_tensor *inputs[3];
  int n_in = 0;
  inputs[n_in++] = x;
  if (weight) inputs[n_in++] = weight;
  if (bias) inputs[n_in++] = bias;
  if (em_autograd_needed(n_in, inputs)) {
    em_tensor *saved[4] = {xc, mean, rstd, wc};
    s = em_autograd_record(y, centred ? &LAYER_NORM_OP : &RMS_NORM_OP, n_in, inputs, 4, saved, NULL);
  }
done:
  em_release(xc);
  em_release(wc);
  em_release(bc);
  em_release(mean);
  em_release(rstd);
  if (s) em_release(y);
  else *out = y;
  return s;
}
