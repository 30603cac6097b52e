/*
** ops_rope.c -- rotary position embedding, rotate-half form (GPT-NeoX,
** Llama), over the last two dims [..., L, d] of x with the tables cos and
** sin [L, d/2]: nn.MultiHeadAttention's `rope`.
**
** The kernel reads x where it lies (a projection's heads are a transposed
** view) and writes a contiguous result. The backward is the rotation by
** minus the angles, written into a gradient laid out as x was (its dims in
** x's order, without x's gaps: [B,L,H,d] for the heads of a fused
** projection [B,L,3*H*d]), so that the view ops in front of it (transpose,
** reshape) pass it on without a copy. The kernel is optional: without it em_rope returns
** EM_ERR_UNSUPPORTED and the caller composes the rotation.
*/
#include "internal.h"

#include <stdlib.h>

/* The gradient's strides: x's layout, dense. */
typedef struct rope_layout {
  int64_t stride[EM_MAX_DIMS];
} rope_layout;

/* Strides of a dense tensor shaped like t with its dims in t's order
** (innermost: the smallest stride; of equal ones, the later dim): t's own
** strides when t is dense in some order of its dims. */
static void dense_layout(const em_tensor *t, int64_t *stride) {
  int64_t expect = 1;
  bool used[EM_MAX_DIMS] = {false};
  for (int k = 0; k < t->ndim; k++) { /* the dims from the innermost out */
    int best = -1;
    for (int i = t->ndim - 1; i >= 0; i--)
      if (!used[i] && (best < 0 || t->stride[i] < t->stride[best])) best = i;
    used[best] = true;
    stride[best] = expect;
    expect *= t->shape[best] > 1 ? t->shape[best] : 1;
  }
}

/* A new tensor shaped like x: with x's strides where layout says, else
** contiguous. */
static em_status new_like(em_tensor **out, const em_tensor *x, const rope_layout *layout,
                          const char *op) {
  if (!layout) return em__new(out, x->ndim, x->shape, x->dtype, x->device, op);
  em_tensor *buf;
  const int64_t n = em_numel(x);
  EM_TRY(em__new(&buf, 1, &n, x->dtype, x->device, op));
  em_status s = em__alias(out, buf, x->ndim, x->shape, layout->stride, 0);
  em_release(buf);
  return s;
}

static em_status run_kernel(const char *op, em_tensor *out, em_tensor *x, em_tensor *cos,
                            em_tensor *sin, bool inverse) {
  if (em_numel(x) == 0) return EM_OK;
  em_kview ko, kx;
  em_kview_of(out, &ko);
  em_kview_of(x, &kx);
  em_status s = em__be(x)->rope(x->device.index, &ko, &kx, em_data(cos), em_data(sin), inverse);
  return s ? em__kernel_fail(op, s) : EM_OK;
}

/* saved: cos, sin (contiguous); ctx: the gradient's layout, or NULL. */
static em_status rope_backward(em_node *node, em_tensor *gy, em_tensor **gx) {
  const char *op = "rope backward";
  em_tensor *dy = NULL, *dx = NULL;
  em_status s;
  if (gy->ndim > 0 && gy->stride[gy->ndim - 1] != 1) {
    if ((s = em__contig(&dy, gy))) return s;
  } else {
    dy = gy;
    em_retain(dy);
  }
  if ((s = new_like(&dx, dy, node->ctx, op)) == EM_OK)
    s = run_kernel(op, dx, dy, node->saved[0], node->saved[1], true);
  em_release(dy);
  if (s) {
    em_release(dx);
    return s;
  }
  gx[0] = dx;
  return EM_OK;
}

static const em_opdef ROPE_OP = {"rope", rope_backward, free};

static em_status check_table(const em_tensor *x, const em_tensor *t, const char *what) {
  char b1[128], b2[128];
  const int64_t L = x->shape[x->ndim - 2], h = x->shape[x->ndim - 1] / 2;
  if (t->ndim != 2 || t->shape[0] != L || t->shape[1] != h)
    return em_error(EM_ERR_SHAPE, "rope: %s has shape %s, expected [%lld, %lld] (positions, half "
                    "the last dim of input %s)", what, em_shape_str(t->ndim, t->shape, b1, sizeof b1),
                    (long long)L, (long long)h, em_shape_str(x->ndim, x->shape, b2, sizeof b2));
  if (t->dtype != x->dtype)
    return em_error(EM_ERR_DTYPE, "rope: %s is %s but input is %s", what, em_dtype_name(t->dtype),
                    em_dtype_name(x->dtype));
  if (t->requires_grad && em_grad_enabled())
    return em_error(EM_ERR_ARG, "rope: %s requires grad, but the tables take no gradient", what);
  return em__same_device("rope", x, t);
}

em_status em_rope(em_tensor **out, em_tensor *x, em_tensor *cos, em_tensor *sin) {
  if (!out || !x || !cos || !sin) return em_error(EM_ERR_ARG, "rope: NULL argument");
  *out = NULL;
  const em_backend *be = em__be(x);
  if (!be->rope)
    return em_error(EM_ERR_UNSUPPORTED, "rope: the %s backend has no rotary kernel", be->name);
  EM_TRY(em__need_float("rope", x, "input"));
  char b[128];
  if (x->ndim < 2 || x->shape[x->ndim - 1] % 2 != 0)
    return em_error(EM_ERR_SHAPE, "rope: input must be [..., positions, d] with an even d, got %s",
                    em_shape_str(x->ndim, x->shape, b, sizeof b));
  EM_TRY(check_table(x, cos, "cos"));
  EM_TRY(check_table(x, sin, "sin"));

  em_tensor *xc = NULL, *cc = NULL, *sc = NULL, *y = NULL;
  rope_layout *layout = NULL;
  em_status s;
  if (x->stride[x->ndim - 1] != 1) {
    if ((s = em__contig(&xc, x))) goto done;
  } else {
    xc = x;
    em_retain(xc);
  }
  if ((s = em__contig(&cc, cos)) || (s = em__contig(&sc, sin))) goto done;
  if ((s = em__new(&y, x->ndim, x->shape, x->dtype, x->device, "rope"))) goto done;
  if ((s = run_kernel("rope", y, xc, cc, sc, false))) goto done;
  if (em_autograd_needed(1, &x)) {
    if ((layout = malloc(sizeof *layout))) dense_layout(xc, layout->stride);
    em_tensor *saved[2] = {cc, sc};
    s = em_autograd_record(y, &ROPE_OP, 1, &x, 2, saved, layout);
  }
done:
  em_release(xc);
  em_release(cc);
  em_release(sc);
  if (s) em_release(y);
  else *out = y;
  return s;
}
