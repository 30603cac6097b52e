/*
** ops_reduce.c -- sum, mean, var, max/min (values and indices), their
** all-element forms, and sum_to (the autograd helper for broadcasting).
**
** The backend reduces a contiguous [outer, n, inner] block over n. A
** reduction over several dims is cut into runs of adjacent reduced dims
** (adjacent dims of a contiguous tensor merge into one), and each run is
** one kernel call, innermost run first. var cannot be chained that way, so
** when it reduces more than one run the reduced dims are first copied to
** the end.
*/
#include "internal.h"

#include <math.h>

/* What a sum/mean/var did, for its backward: which input dims were
** reduced and which of those the output kept as size 1. */
typedef struct reduce_ctx {
  bool red[EM_MAX_DIMS];
  bool keep[EM_MAX_DIMS];
  int correction;
  int64_t count; /* input elements per output element */
  int dim;       /* max/min: the reduced dim */
} reduce_ctx;

static const char *dt_shape(const em_tensor *t, char *buf, size_t n) {
  char sh[160];
  snprintf(buf, n, "%s %s", em_dtype_name(t->dtype), em_shape_str(t->ndim, t->shape, sh, sizeof sh));
  return buf;
}

static em_status need_float(const char *op, const em_tensor *x) {
  char d[200];
  if (em_dtype_is_float(x->dtype)) return EM_OK;
  return em_error(EM_ERR_DTYPE, "%s: expected a float tensor, got %s (convert it first, e.g. x:double())", op,
                  dt_shape(x, d, sizeof d));
}

/* Marks the dims named in dims[] (all when ndims == 0); a 0-d tensor
** accepts dim 0 / -1 and has nothing to reduce. */
static em_status parse_dims(const char *op, const em_tensor *x, int ndims, const int *dims, bool *red) {
  memset(red, 0, EM_MAX_DIMS * sizeof *red);
  if (ndims < 0 || ndims > EM_MAX_DIMS || (ndims > 0 && !dims))
    return em_error(EM_ERR_ARG, "%s: bad list of %d dims", op, ndims);
  if (ndims == 0) {
    for (int d = 0; d < x->ndim; d++) red[d] = true;
    return EM_OK;
  }
  for (int i = 0; i < ndims; i++) {
    int d;
    EM_TRY(em__dim(op, dims[i], x->ndim, &d));
    if (x->ndim == 0) continue;
    if (red[d]) return em_error(EM_ERR_ARG, "%s: dim %d appears more than once", op, d + 1);
    red[d] = true;
  }
  return EM_OK;
}

/* The output shape: reduced dims dropped, or kept as 1 where keep[d]. */
static int reduced_shape(const em_tensor *x, const bool *red, const bool *keep, int64_t *shape) {
  int n = 0;
  for (int d = 0; d < x->ndim; d++)
    if (!red[d])
      shape[n++] = x->shape[d];
    else if (keep[d])
      shape[n++] = 1;
  return n;
}

/* The groups of a contiguous tensor's dims: size-1 dims are dropped and
** adjacent dims of the same kind merged. */
typedef struct groups {
  int n;
  int64_t size[EM_MAX_DIMS + 1];
  bool red[EM_MAX_DIMS + 1];
} groups;

static void groups_of(const em_tensor *x, const bool *red, groups *g) {
  g->n = 0;
  for (int d = 0; d < x->ndim; d++) {
    if (x->shape[d] == 1) continue;
    if (g->n > 0 && g->red[g->n - 1] == red[d]) {
      g->size[g->n - 1] *= x->shape[d];
    } else {
      g->size[g->n] = x->shape[d];
      g->red[g->n++] = red[d];
    }
  }
}

static void groups_remove(groups *g, int i, int count) {
  for (int j = i; j + count < g->n; j++) {
    g->size[j] = g->size[j + count];
    g->red[j] = g->red[j + count];
  }
  g->n -= count;
}

/* Copies x (contiguous, grouped as g) so that the reduced groups come
** last; g becomes [kept, reduced]. */
static em_status reduced_last(em_tensor **cur, groups *g) {
  int64_t st[EM_MAX_DIMS], shape[EM_MAX_DIMS], stride[EM_MAX_DIMS], kept = 1, reduced = 1, s = 1;
  int n = 0;
  for (int i = g->n - 1; i >= 0; i--) st[i] = s, s *= g->size[i];
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < g->n; i++)
      if (g->red[i] == (pass == 1)) {
        shape[n] = g->size[i];
        stride[n++] = st[i];
        *(pass ? &reduced : &kept) *= g->size[i];
      }
  em_tensor *v, *c;
  EM_TRY(em__alias(&v, *cur, n, shape, stride, (*cur)->offset));
  em_status e = em__contig(&c, v);
  em_release(v);
  if (e) return e;
  em_release(*cur);
  *cur = c;
  g->n = 0;
  if (kept > 1) g->size[g->n] = kept, g->red[g->n++] = false;
  g->size[g->n] = reduced, g->red[g->n++] = true;
  return EM_OK;
}

/* Reduces contiguous, non-empty xc over the dims flagged in red into a new
** tensor of shape (ondim, oshape). */
static em_status reduce_runs(const char *op, em_reduce_op rop, em_tensor *xc, const bool *red,
                             int ondim, const int64_t *oshape, int correction, em_tensor **out) {
  groups g;
  int nr = 0;
  em_status s = EM_OK;
  em_tensor *cur = em_retain(xc), *dst;
  groups_of(xc, red, &g);
  for (int i = 0; i < g.n; i++) nr += g.red[i];
  if (rop == EM_RED_VAR && nr > 1) {
    s = reduced_last(&cur, &g);
    nr = 1;
  }
  if (nr == 0) { /* only size-1 dims reduced: one pass with n = 1 */
    g.size[g.n] = 1;
    g.red[g.n++] = true;
    nr = 1;
  }
  const em_backend *be = em__be(xc);
  while (!s && nr > 0) {
    int i = g.n - 1;
    while (!g.red[i]) i--;
    int64_t outer = 1, inner = 1;
    for (int j = 0; j < i; j++) outer *= g.size[j];
    for (int j = i + 1; j < g.n; j++) inner *= g.size[j];
    int64_t flat = outer * inner;
    s = nr == 1 ? em__new(&dst, ondim, oshape, xc->dtype, xc->device, op)
                : em__new(&dst, 1, &flat, xc->dtype, xc->device, op);
    if (s) break;
    s = be->reduce(xc->device.index, rop, xc->dtype, em_data(dst), NULL, em_data(cur), outer,
                   g.size[i], inner, correction);
    em_release(cur);
    cur = dst;
    if (s) {
      s = em__kernel_fail(op, s);
      break;
    }
    /* The kept groups around the reduced one are now adjacent: merge. */
    if (i > 0 && i + 1 < g.n) {
      g.size[i - 1] *= g.size[i + 1];
      groups_remove(&g, i, 2);
    } else {
      groups_remove(&g, i, 1);
    }
    nr--;
  }
  if (s) {
    em_release(cur);
    return s;
  }
  *out = cur;
  return EM_OK;
}

/* ------------------------------------------------------------------ */
/* sum, mean, var                                                      */
/* ------------------------------------------------------------------ */

/* gy (shaped like the reduction's output) broadcast back to the input's
** shape (ndim, shape), as a new contiguous tensor. */
static em_status expand_back(em_tensor **out, em_tensor *gy, const reduce_ctx *c, int ndim,
                             const int64_t *shape) {
  em_tensor *r;
  EM_TRY(em__new(&r, ndim, shape, gy->dtype, gy->device, "backward"));
  em_kview dst, src;
  em_kview_of(r, &dst);
  src.data = em_data(gy);
  src.dtype = gy->dtype;
  src.ndim = ndim;
  for (int d = 0, j = 0; d < ndim; d++) {
    src.shape[d] = shape[d];
    if (c->red[d]) {
      src.stride[d] = 0;
      j += c->keep[d];
    } else {
      src.stride[d] = gy->stride[j++];
    }
  }
  em_status s = em__be(gy)->copy(gy->device.index, &dst, &src);
  if (s) {
    em_release(r);
    return em__kernel_fail("backward", s);
  }
  *out = r;
  return EM_OK;
}

static em_status sum_backward(em_node *n, em_tensor *gy, em_tensor **gx) {
  if (!n->needs_grad[0]) return EM_OK;
  return expand_back(&gx[0], gy, n->ctx, n->in_ndim[0], n->in_shape[0]);
}

static em_status mean_backward(em_node *n, em_tensor *gy, em_tensor **gx) {
  const reduce_ctx *c = n->ctx;
  em_tensor *g;
  if (!n->needs_grad[0]) return EM_OK;
  EM_TRY(expand_back(&g, gy, c, n->in_ndim[0], n->in_shape[0]));
  /* Scaled in place: g is ours and contiguous. */
  em_kview k;
  em_kview_of(g, &k);
  em_status s = em_numel(g) ? em__be(g)->unary(g->device.index, EM_AFFINE, &k, &k,
                                                1.0 / (double)c->count, 0.0) : EM_OK;
  if (s) {
    em_release(g);
    return em__kernel_fail("mean backward", s);
  }
  gx[0] = g;
  return EM_OK;
}

/* saved: x. dvar/dx = 2 (x - mean) / (N - correction). */
static em_status var_backward(em_node *n, em_tensor *gy, em_tensor **gx) {
  const reduce_ctx *c = n->ctx;
  em_tensor *x = n->saved[0], *mean = NULL, *diff = NULL, *g = NULL, *prod = NULL;
  int dims[EM_MAX_DIMS], nd = 0;
  em_status s;
  if (!n->needs_grad[0]) return EM_OK;
  for (int d = 0; d < x->ndim; d++)
    if (c->red[d]) dims[nd++] = d;
  if (!(s = em_mean(&mean, x, nd, dims, true)) && !(s = em_sub(&diff, x, mean)) &&
      !(s = expand_back(&g, gy, c, x->ndim, x->shape)) && !(s = em_mul(&prod, diff, g)))
    s = em_unary(&gx[0], EM_AFFINE, prod, 2.0 / (double)(c->count - c->correction), 0.0);
  em_release(mean), em_release(diff), em_release(g), em_release(prod);
  return s;
}

static const em_opdef SUM_OP = {"sum", sum_backward, free};
static const em_opdef MEAN_OP = {"mean", mean_backward, free};
static const em_opdef VAR_OP = {"var", var_backward, free};

/* The shared body of sum, mean, var and sum_to. */
static em_status reduce_op(const char *op, em_reduce_op rop, em_tensor **out, em_tensor *x,
                           const bool *red, const bool *keep, int correction) {
  int64_t oshape[EM_MAX_DIMS], count = 1;
  int ondim = reduced_shape(x, red, keep, oshape);
  for (int d = 0; d < x->ndim; d++)
    if (red[d]) count *= x->shape[d];
  em_tensor *src = NULL, *y = NULL, *xc = NULL;
  em_status s;
  if (x->dtype == EM_BOOL && rop == EM_RED_SUM) /* counts trues, as int64 like PyTorch */
    s = em_to_dtype(&src, x, EM_I64);
  else
    src = em_retain(x), s = EM_OK;
  if (s) return s;
  if (em__numel_of(ondim, oshape) == 0 || count == 0) {
    /* Nothing to run: an empty result, or sums over nothing (0, NaN for
    ** mean and var as PyTorch). */
    s = em__new(&y, ondim, oshape, src->dtype, src->device, op);
    if (!s && count == 0) s = em_fill_(y, rop == EM_RED_SUM ? 0.0 : NAN);
  } else if (!(s = em__contig(&xc, src))) {
    s = reduce_runs(op, rop, xc, red, ondim, oshape, correction, &y);
  }
  em_release(xc);
  em_release(src);
  if (s) {
    em_release(y);
    return s;
  }
  if (em_dtype_is_float(x->dtype) && x->requires_grad && em_grad_enabled()) {
    reduce_ctx *c = calloc(1, sizeof *c);
    if (!c) s = em_error(EM_ERR_OOM, "%s: out of memory recording autograd", op);
    if (c) {
      memcpy(c->red, red, sizeof c->red);
      memcpy(c->keep, keep, sizeof c->keep);
      c->correction = correction;
      c->count = count;
      const em_opdef *def = rop == EM_RED_SUM ? &SUM_OP : rop == EM_RED_MEAN ? &MEAN_OP : &VAR_OP;
      s = em_autograd_record(y, def, 1, &x, rop == EM_RED_VAR, &x, c);
    }
    if (s) {
      em_release(y);
      return s;
    }
  }
  *out = y;
  return EM_OK;
}

static em_status reduce_public(const char *op, em_reduce_op rop, em_autocast_op ac,
                               em_tensor **out, em_tensor *x, int ndims, const int *dims,
                               int correction, bool keepdim) {
  bool red[EM_MAX_DIMS], keep[EM_MAX_DIMS];
  if (!out || !x) return em_error(EM_ERR_ARG, "%s: NULL argument", op);
  *out = NULL;
  if (rop != EM_RED_SUM) EM_TRY(need_float(op, x));
  EM_TRY(parse_dims(op, x, ndims, dims, red));
  for (int d = 0; d < EM_MAX_DIMS; d++) keep[d] = keepdim;
  em_tensor *xa; /* float32 under autocast (autocast.c) */
  EM_TRY(em__autocast_op(ac, 1, &x, &xa));
  em_status s = reduce_op(op, rop, out, xa, red, keep, correction);
  em_release(xa);
  return s;
}

em_status em_sum(em_tensor **out, em_tensor *x, int ndims, const int *dims, bool keepdim) {
  return reduce_public("sum", EM_RED_SUM, EM_AC_SUM, out, x, ndims, dims, 0, keepdim);
}

em_status em_mean(em_tensor **out, em_tensor *x, int ndims, const int *dims, bool keepdim) {
  return reduce_public("mean", EM_RED_MEAN, EM_AC_MEAN, out, x, ndims, dims, 0, keepdim);
}

em_status em_var(em_tensor **out, em_tensor *x, int ndims, const int *dims, int correction,
                 bool keepdim) {
  if (correction < 0)
    return em_error(EM_ERR_ARG, "var: correction must be >= 0, got %d", correction);
  return reduce_public("var", EM_RED_VAR, EM_AC_VAR, out, x, ndims, dims, correction, keepdim);
}

em_status em_sum_to(em_tensor **out, em_tensor *x, int ndim, const int64_t *shape) {
  bool red[EM_MAX_DIMS] = {false}, keep[EM_MAX_DIMS] = {false}, any = false;
  char a[160], b[160];
  if (!out || !x || (ndim > 0 && !shape)) return em_error(EM_ERR_ARG, "sum_to: NULL argument");
  *out = NULL;
  int lead = x->ndim - ndim;
  if (lead < 0) goto bad;
  for (int d = 0; d < x->ndim; d++) {
    if (d < lead) {
      red[d] = any = true;
    } else if (shape[d - lead] != x->shape[d]) {
      if (shape[d - lead] != 1) goto bad;
      red[d] = keep[d] = any = true;
    }
  }
  if (!any) {
    *out = em_retain(x);
    return EM_OK;
  }
  return reduce_op("sum_to", EM_RED_SUM, out, x, red, keep, 0);
bad:
  return em_error(EM_ERR_SHAPE, "sum_to: cannot reduce a tensor of shape %s to shape %s", 
                  em_shape_str(x->ndim, x->shape, a, sizeof a), em_shape_str(ndim, shape, b, sizeof b));
}

/* ------------------------------------------------------------------ */
/* max, min, argmax, argmin                                            */
/* ------------------------------------------------------------------ */

/* saved: the indices. The gradient goes to the position that won. */
static em_status extreme_backward(em_node *n, em_tensor *gy, em_tensor **gx) {
  const reduce_ctx *c = n->ctx;
  em_tensor *idx = n->saved[0], *g = NULL, *r = NULL;
  int64_t outer, len, inner;
  em_status s;
  if (!n->needs_grad[0]) return EM_OK;
  em__split_dims(n->in_ndim[0], n->in_shape[0], c->dim, &outer, &len, &inner);
  if ((s = em__contig(&g, gy)) ||
      (s = em_zeros(&r, n->in_ndim[0], n->in_shape[0], gy->dtype, gy->device)))
    goto done;
  if (outer * inner > 0 &&
      (s = em__be(r)->scatter_add(r->device.index, r->dtype, em_data(r), em_data(g), em_data(idx),
                                  outer, len, 1, inner))) {
    s = em__kernel_fail(n->op->name, s);
    goto done;
  }
  gx[0] = r;
  r = NULL;
done:
  em_release(g);
  em_release(r);
  return s;
}

static const em_opdef MAX_OP = {"max", extreme_backward, free};
static const em_opdef MIN_OP = {"min", extreme_backward, free};

/* bool has no order kernel: reduce it as int64 and convert back. */
static em_status as_orderable(em_tensor *x, em_tensor **out) {
  if (x->dtype != EM_BOOL) {
    *out = em_retain(x);
    return EM_OK;
  }
  return em_to_dtype(out, x, EM_I64);
}

static em_status back_to_bool(em_tensor **t) {
  em_tensor *b;
  EM_TRY(em_to_dtype(&b, *t, EM_BOOL));
  em_release(*t);
  *t = b;
  return EM_OK;
}

static em_status extreme(const char *op, em_reduce_op rop, em_tensor **values, em_tensor **indices,
                         em_tensor *x, int dim, bool keepdim) {
  char d0[200];
  int d;
  if (values) *values = NULL;
  if (indices) *indices = NULL;
  if (!x || (!values && !indices)) return em_error(EM_ERR_ARG, "%s: NULL argument", op);
  EM_TRY(em__dim(op, dim, x->ndim, &d));
  int64_t outer, len, inner, oshape[EM_MAX_DIMS];
  em__split_dims(x->ndim, x->shape, d, &outer, &len, &inner);
  if (len == 0)
    return em_error(EM_ERR_SHAPE, "%s: cannot reduce over dim %d of size 0 (input %s)", op, d + 1,
                    dt_shape(x, d0, sizeof d0));
  int ondim = 0;
  for (int i = 0; i < x->ndim; i++)
    if (i != d)
      oshape[ondim++] = x->shape[i];
    else if (keepdim)
      oshape[ondim++] = 1;
  em_tensor *src = NULL, *xc = NULL, *v = NULL, *idx = NULL;
  em_status s;
  if ((s = as_orderable(x, &src)) || (s = em__contig(&xc, src)) ||
      (s = em__new(&v, ondim, oshape, src->dtype, src->device, op)) ||
      (s = em__new(&idx, ondim, oshape, EM_I64, src->device, op)))
    goto done;
  if (outer * inner > 0 &&
      (s = em__be(xc)->reduce(xc->device.index, rop, xc->dtype, em_data(v), em_data(idx),
                              em_data(xc), outer, len, inner, 0))) {
    s = em__kernel_fail(op, s);
    goto done;
  }
  if (x->dtype == EM_BOOL && values && (s = back_to_bool(&v))) goto done;
  if (values && x->requires_grad && em_grad_enabled()) {
    reduce_ctx *c = calloc(1, sizeof *c);
    if (!c) {
      s = em_error(EM_ERR_OOM, "%s: out of memory recording autograd", op);
      goto done;
    }
    c->dim = d;
    if ((s = em_autograd_record(v, rop == EM_RED_MAX ? &MAX_OP : &MIN_OP, 1, &x, 1, &idx, c)))
      goto done;
  }
  if (values) *values = v, v = NULL;
  if (indices) *indices = idx, idx = NULL;
done:
  em_release(src);
  em_release(xc);
  em_release(v);
  em_release(idx);
  return s;
}

em_status em_max(em_tensor **values, em_tensor **indices, em_tensor *x, int dim, bool keepdim) {
  return extreme("max", EM_RED_MAX, values, indices, x, dim, keepdim);
}

em_status em_min(em_tensor **values, em_tensor **indices, em_tensor *x, int dim, bool keepdim) {
  return extreme("min", EM_RED_MIN, values, indices, x, dim, keepdim);
}

em_status em_argmax(em_tensor **out, em_tensor *x, int dim, bool keepdim) {
  if (!out) return em_error(EM_ERR_ARG, "argmax: NULL argument");
  return extreme("argmax", EM_RED_MAX, NULL, out, x, dim, keepdim);
}

em_status em_argmin(em_tensor **out, em_tensor *x, int dim, bool keepdim) {
  if (!out) return em_error(EM_ERR_ARG, "argmin: NULL argument");
  return extreme("argmin", EM_RED_MIN, NULL, out, x, dim, keepdim);
}

/* ------------------------------------------------------------------ */
/* max_all, min_all                                                    */
/* ------------------------------------------------------------------ */

/* saved: x, y. As PyTorch, the gradient is shared evenly by all the
** elements equal to the result (NaN counting as equal to a NaN result). */
static em_status extreme_all_backward(em_node *n, em_tensor *gy, em_tensor **gx) {
  em_tensor *x = n->saved[0], *y = n->saved[1];
  em_tensor *eq = NULL, *xn = NULL, *yn = NULL, *nn = NULL, *mask = NULL, *maskf = NULL,
            *cnt = NULL, *g = NULL;
  em_status s;
  if (!n->needs_grad[0]) return EM_OK;
  if (!(s = em_binary(&eq, EM_EQ, x, y)) && !(s = em_binary(&xn, EM_NE, x, x)) &&
      !(s = em_binary(&yn, EM_NE, y, y)) && !(s = em_binary(&nn, EM_AND, xn, yn)) &&
      !(s = em_binary(&mask, EM_OR, eq, nn)) && !(s = em_to_dtype(&maskf, mask, x->dtype)) &&
      !(s = em_sum(&cnt, maskf, 0, NULL, false)) && !(s = em_div(&g, gy, cnt)))
    s = em_mul(&gx[0], maskf, g);
  em_release(eq), em_release(xn), em_release(yn), em_release(nn);
  em_release(mask), em_release(maskf), em_release(cnt), em_release(g);
  return s;
}

static const em_opdef MAX_ALL_OP = {"max_all", extreme_all_backward, NULL};
static const em_opdef MIN_ALL_OP = {"min_all", extreme_all_backward, NULL};

static em_status extreme_all(const char *op, em_reduce_op rop, em_tensor **out, em_tensor *x) {
  char d[200];
  if (!out || !x) return em_error(EM_ERR_ARG, "%s: NULL argument", op);
  *out = NULL;
  int64_t numel = em_numel(x);
  if (numel == 0)
    return em_error(EM_ERR_SHAPE, "%s: the tensor is empty (%s); there is no %s", op,
                    dt_shape(x, d, sizeof d), rop == EM_RED_MAX ? "maximum" : "minimum");
  em_tensor *src = NULL, *xc = NULL, *y = NULL;
  em_status s;
  if ((s = as_orderable(x, &src)) || (s = em__contig(&xc, src)) ||
      (s = em__new(&y, 0, NULL, src->dtype, src->device, op)))
    goto done;
  if ((s = em__be(xc)->reduce(xc->device.index, rop, xc->dtype, em_data(y), NULL, em_data(xc), 1,
                              numel, 1, 0))) {
    s = em__kernel_fail(op, s);
    goto done;
  }
  if (x->dtype == EM_BOOL && (s = back_to_bool(&y))) goto done;
  if (x->requires_grad && em_grad_enabled()) {
    em_tensor *saved[2] = {x, y};
    if ((s = em_autograd_record(y, rop == EM_RED_MAX ? &MAX_ALL_OP : &MIN_ALL_OP, 1, &x, 2, saved,
                                NULL)))
      goto done;
  }
  *out = y;
  y = NULL;
done:
  em_release(src);
  em_release(xc);
  em_release(y);
  return s;
}

em_status em_max_all(em_tensor **out, em_tensor *x) { return extreme_all("max_all", EM_RED_MAX, out, x); }
em_status em_min_all(em_tensor **out, em_tensor *x) { return extreme_all("min_all", EM_RED_MIN, out, x); }
