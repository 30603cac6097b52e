/*
** ops_conv.c -- 2-d convolution on the backend's kernel (conv2d and
** conv2d_backward of ember_backend.h: oneDNN's primitives on the CPU).
**
** The kernel is optional and may decline a call (a backend without one,
** float64, a size it has no kernel for): em_conv2d then returns
** EM_ERR_UNSUPPORTED, and the caller composes the convolution from core
** ops instead (nn.Conv2d: lua/ember/nn/_conv.lua), which works everywhere.
** So the backend is asked, not named. em_conv_route_counts tells which of
** the two routes ran, as em_attention_route_counts does for attention.
*/
#include "internal.h"

#include <stdatomic.h>

static _Atomic uint64_t route_kernel, route_composed;

void em_conv_route_counts(uint64_t *kernel, uint64_t *composed) {
  if (kernel) *kernel = atomic_load(&route_kernel);
  if (composed) *composed = atomic_load(&route_composed);
}

void em_conv_count_composed(void) { atomic_fetch_add(&route_composed, 1); }

/* saved: x and w (contiguous) and, where the backend keeps x in its own
** layout (conv2d_keep), that buffer; ctx: the em_conv_args; inputs x, w [, b]. */
static em_status conv2d_backward(em_node *node, em_tensor *gy, em_tensor **gx) {
  const char *op = "conv2d backward";
  const em_conv_args *a = node->ctx;
  em_tensor *x = node->saved[0], *w = node->saved[1], *xk = node->saved[2];
  const bool want_x = node->needs_grad[0], want_w = node->needs_grad[1];
  const bool want_b = node->n_inputs > 2 && node->needs_grad[2];
  em_tensor *dy = NULL, *dx = NULL, *dw = NULL, *db = NULL;
  em_status s;
  if (want_x && (s = em__new(&dx, x->ndim, x->shape, x->dtype, x->device, op))) goto fail;
  if (want_w && (s = em__new(&dw, w->ndim, w->shape, w->dtype, w->device, op))) goto fail;
  if (want_b && (s = em__new(&db, 1, &a->O, w->dtype, w->device, op))) goto fail;
  if ((s = em__contig(&dy, gy))) goto fail;
  const em_backend *be = em__be(x);
  void *pdx = dx ? em_data(dx) : NULL, *pdw = dw ? em_data(dw) : NULL, *pdb = db ? em_data(db) : NULL;
  if (xk)
    s = be->conv2d_backward_kept(x->device.index, a, pdx, pdw, pdb, em_data(dy), em_data(x),
                                 em_data(xk), em_data(w));
  else
    s = be->conv2d_backward(x->device.index, a, pdx, pdw, pdb, em_data(dy), em_data(x), em_data(w));
  if (s) {
    s = em__kernel_fail(op, s);
    goto fail;
  }
  em_release(dy);
  gx[0] = dx;
  gx[1] = dw;
  if (node->n_inputs > 2) gx[2] = db;
  return EM_OK;
fail:
  em_release(dy);
  em_release(dx);
  em_release(dw);
  em_release(db);
  return s;
}

static const em_opdef CONV2D_OP = {"conv2d", conv2d_backward, free};

/* The sizes of a call, or an error that names what is wrong. */
static em_status conv_args(em_conv_args *a, const em_tensor *x, const em_tensor *w,
                           const em_tensor *b, const int64_t stride[2], const int64_t pad[4],
                           const int64_t dilation[2], int64_t groups) {
  char b1[128], b2[128];
  EM_TRY(em__need_float("conv2d", x, "input"));
  if (x->ndim != 4 || w->ndim != 4)
    return em_error(EM_ERR_SHAPE, "conv2d: expected a 4-d input [N, C, H, W] and weight "
                    "[O, C/groups, kh, kw], got input %s and weight %s",
                    em_shape_str(x->ndim, x->shape, b1, sizeof b1),
                    em_shape_str(w->ndim, w->shape, b2, sizeof b2));
  if (w->dtype != x->dtype || (b && b->dtype != x->dtype))
    return em_error(EM_ERR_DTYPE, "conv2d: input is %s but weight is %s%s%s", em_dtype_name(x->dtype),
                    em_dtype_name(w->dtype), b ? " and bias " : "", b ? em_dtype_name(b->dtype) : "");
  EM_TRY(em__same_device("conv2d", x, w));
  if (b) EM_TRY(em__same_device("conv2d", x, b));
  for (int i = 0; i < 2; i++)
    if (stride[i] < 1 || dilation[i] < 1 || pad[2 * i] < 0 || pad[2 * i + 1] < 0)
      return em_error(EM_ERR_ARG, "conv2d: strides and dilations must be >= 1 and paddings >= 0, "
                      "got stride %lld, dilation %lld, padding %lld, %lld along dim %d",
                      (long long)stride[i], (long long)dilation[i], (long long)pad[2 * i],
                      (long long)pad[2 * i + 1], i + 3);
  const int64_t O = w->shape[0];
  if (groups < 1 || O % groups != 0 || x->shape[1] != w->shape[1] * groups)
    return em_error(EM_ERR_SHAPE, "conv2d: input %s does not fit weight %s with groups = %lld "
                    "(input channels must be weight.shape[2] * groups, and groups must divide "
                    "the output channels)", em_shape_str(x->ndim, x->shape, b1, sizeof b1),
                    em_shape_str(w->ndim, w->shape, b2, sizeof b2), (long long)groups);
  if (b && (b->ndim != 1 || b->shape[0] != O))
    return em_error(EM_ERR_SHAPE, "conv2d: bias has shape %s, expected [%lld]",
                    em_shape_str(b->ndim, b->shape, b1, sizeof b1), (long long)O);
  *a = (em_conv_args){.dtype = x->dtype, .N = x->shape[0], .C = x->shape[1], .H = x->shape[2],
                      .W = x->shape[3], .O = O, .kh = w->shape[2], .kw = w->shape[3],
                      .groups = groups};
  for (int i = 0; i < 2; i++) {
    a->stride[i] = stride[i], a->dilation[i] = dilation[i];
    a->pad[2 * i] = pad[2 * i], a->pad[2 * i + 1] = pad[2 * i + 1];
    const int64_t n = x->shape[2 + i] + pad[2 * i] + pad[2 * i + 1];
    const int64_t extent = dilation[i] * (w->shape[2 + i] - 1) + 1;
    if (n < extent)
      return em_error(EM_ERR_SHAPE, "conv2d: the kernel (extent %lld with dilation) is larger than "
                      "the padded input (%lld) along dim %d of input %s", (long long)extent,
                      (long long)n, i + 3, em_shape_str(x->ndim, x->shape, b1, sizeof b1));
    (i ? &a->Wo : &a->Ho)[0] = (n - extent) / stride[i] + 1;
  }
  return EM_OK;
}

static em_status conv2d_impl(em_tensor **out, em_tensor *x, em_tensor *w, em_tensor *b,
                             const int64_t stride[2], const int64_t pad[4],
                             const int64_t dilation[2], int64_t groups);

/* Runs in bfloat16 under autocast (autocast.c), the bias too. */
em_status em_conv2d(em_tensor **out, em_tensor *x, em_tensor *w, em_tensor *b,
                    const int64_t stride[2], const int64_t padding[4], const int64_t dilation[2],
                    int64_t groups) {
  if (!out || !x || !w || !stride || !padding || !dilation)
    return em_error(EM_ERR_ARG, "conv2d: NULL argument");
  *out = NULL;
  em_tensor *in[3] = {x, w, b}, *ac[3];
  EM_TRY(em__autocast_op(EM_AC_CONV, 3, in, ac));
  em_status s = em__autocast_same_dtype("conv2d", 3, in, ac);
  if (s == EM_OK) s = conv2d_impl(out, ac[0], ac[1], ac[2], stride, padding, dilation, groups);
  for (int i = 0; i < 3; i++) em_release(ac[i]);
  return s;
}

static em_status conv2d_impl(em_tensor **out, em_tensor *x, em_tensor *w, em_tensor *b,
                             const int64_t stride[2], const int64_t pad[4],
                             const int64_t dilation[2], int64_t groups) {
  em_conv_args a;
  EM_TRY(conv_args(&a, x, w, b, stride, pad, dilation, groups));
  const em_backend *be = em__be(x);
  if (!be->conv2d || !be->conv2d_backward)
    return em_error(EM_ERR_UNSUPPORTED, "conv2d: the %s backend has no convolution kernel", be->name);
  if (a.N == 0 || a.C == 0 || a.O == 0)
    return em_error(EM_ERR_UNSUPPORTED, "conv2d: empty tensors are left to the composition");
  em_tensor *xc = NULL, *wc = NULL, *bc = NULL, *y = NULL, *xk = NULL;
  em_conv_args *ctx = NULL;
  int64_t yshape[4] = {a.N, a.O, a.Ho, a.Wo};
  em_tensor *inputs[3] = {x, w, b};
  const int n_in = b ? 3 : 2;
  const bool grad = em_autograd_needed(n_in, inputs);
  em_status s;
  if ((s = em__contig(&xc, x)) || (s = em__contig(&wc, w)) || (b && (s = em__contig(&bc, b))))
    goto done;
  if ((s = em__new(&y, 4, yshape, x->dtype, x->device, "conv2d"))) goto done;
  /* The weight gradient reads x again: a backend that runs on its own
  ** layout of x keeps that copy (one activation per layer held by the
  ** node) rather than reordering x twice. Only when w needs a gradient. */
  size_t nk = 0;
  if (grad && w->requires_grad && be->conv2d_keep_bytes && be->conv2d_keep &&
      be->conv2d_backward_kept &&
      (s = be->conv2d_keep_bytes(x->device.index, &a, b != NULL, &nk)) == EM_OK && nk > 0) {
    const int64_t n = (int64_t)nk;
    s = em__new(&xk, 1, &n, EM_BOOL, x->device, "conv2d");
  }
  if (!s && xk)
    s = be->conv2d_keep(x->device.index, &a, em_data(y), em_data(xk), em_data(xc), em_data(wc),
                        bc ? em_data(bc) : NULL);
  else if (!s)
    s = be->conv2d(x->device.index, &a, em_data(y), em_data(xc), em_data(wc), bc ? em_data(bc) : NULL);
  if (s == EM_ERR_UNSUPPORTED) goto done; /* the backend's message says why */
  if (s) {
    s = em__kernel_fail("conv2d", s);
    goto done;
  }
  atomic_fetch_add(&route_kernel, 1);
  if (grad) {
    if (!(ctx = malloc(sizeof *ctx))) {
      s = em_error(EM_ERR_OOM, "conv2d: out of memory");
      goto done;
    }
    *ctx = a;
    em_tensor *saved[3] = {xc, wc, xk};
    s = em_autograd_record(y, &CONV2D_OP, n_in, inputs, 3, saved, ctx);
  }
done:
  em_release(xc);
  em_release(wc);
  em_release(bc);
  em_release(xk);
  if (s) em_release(y);
  else *out = y;
  return s;
}
