/*
** ops_view.c -- views (sharing storage) and the copies that change
** layout, dtype or device. Every view records a backward that maps the
** gradient back to the input's geometry.
*/
#include "internal.h"

/* ------------------------------------------------------------------ */
/* Backward helpers                                                    */
/* ------------------------------------------------------------------ */

/* Gradient of any op that only re-labels elements in order. */
static em_status reshape_backward(em_node *n, em_tensor *gy, em_tensor **gx) {
  return em_reshape(&gx[0], gy, n->in_ndim[0], n->in_shape[0]);
}
static const em_opdef VIEW_OP = {"view", reshape_backward, NULL};
static const em_opdef RESHAPE_OP = {"reshape", reshape_backward, NULL};
static const em_opdef SQUEEZE_OP = {"squeeze", reshape_backward, NULL};
static const em_opdef UNSQUEEZE_OP = {"unsqueeze", reshape_backward, NULL};

static em_status identity_backward(em_node *n, em_tensor *gy, em_tensor **gx) {
  (void)n;
  gx[0] = em_retain(gy);
  return EM_OK;
}
static const em_opdef CONTIGUOUS_OP = {"contiguous", identity_backward, NULL};

static em_status expand_backward(em_node *n, em_tensor *gy, em_tensor **gx) {
  return em_sum_to(&gx[0], gy, n->in_ndim[0], n->in_shape[0]);
}
static const em_opdef EXPAND_OP = {"expand", expand_backward, NULL};

/* Attaches a recorded op to a fresh result if the input needs grad. */
static em_status record1(em_tensor **out, em_tensor *y, const em_opdef *op, em_tensor *x, void *ctx,
                         void (*free_ctx)(void *)) {
  if (em_autograd_needed(1, &x)) {
    em_status s = em_autograd_record(y, op, 1, &x, 0, NULL, ctx);
    if (s != EM_OK) {
      em_release(y);
      return s;
    }
  } else if (ctx && free_ctx) {
    free_ctx(ctx);
  }
  *out = y;
  return EM_OK;
}

/* ------------------------------------------------------------------ */
/* view / reshape                                                      */
/* ------------------------------------------------------------------ */

/* Resolves one -1 and checks the element count. */
static em_status infer_shape(const char *op, const em_tensor *x, int ndim, const int64_t *in,
                             int64_t *shape) {
  int infer = -1;
  int64_t known = 1, numel = em_numel(x);
  if (ndim > EM_MAX_DIMS) return em_error(EM_ERR_SHAPE, "%s: at most %d dims", op, EM_MAX_DIMS);
  for (int i = 0; i < ndim; i++) {
    shape[i] = in[i];
    if (in[i] == -1) {
      if (infer >= 0) return em_error(EM_ERR_SHAPE, "%s: only one size may be -1", op);
      infer = i;
    } else if (in[i] < 0) {
      return em_error(EM_ERR_SHAPE, "%s: invalid size %lld at dim %d", op, (long long)in[i], i + 1);
    } else if (__builtin_mul_overflow(known, in[i], &known)) {
      known = -1; /* overflowed int64: no tensor has that many elements */
    }
  }
  if (known < 0) {
    char a[160];
    return em_error(EM_ERR_SHAPE, "%s: shape %s has more elements than an int64 can count", op,
                    em_shape_str(ndim, in, a, sizeof a));
  }
  if (infer >= 0 && known != 0 && numel % known == 0) shape[infer] = numel / known;
  if ((infer >= 0 && (known == 0 || numel % known != 0)) || em__numel_of(ndim, shape) != numel) {
    char a[160], b[160];
    return em_error(EM_ERR_SHAPE, "%s: shape %s is invalid for a tensor of shape %s (%lld elements)",
                    op, em_shape_str(ndim, in, a, sizeof a), em_shape_str(x->ndim, x->shape, b, sizeof b),
                    (long long)numel);
  }
  return EM_OK;
}

/* Strides for viewing x with `shape` without a copy (PyTorch's rule:
** each group of new dims must fall inside one stride-contiguous chunk of
** old dims). Returns false when impossible. */
static bool view_strides(const em_tensor *x, int ndim, const int64_t *shape, int64_t *stride) {
  if (em_numel(x) == 0 || em_is_contiguous(x)) {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
      stride[i] = s;
      s *= shape[i] ? shape[i] : 1;
    }
    return true;
  }
  int view_d = ndim - 1;
  int64_t chunk_base_stride = x->ndim ? x->stride[x->ndim - 1] : 1;
  int64_t tensor_numel = 1, view_numel = 1;
  for (int d = x->ndim - 1; d >= 0; d--) {
    tensor_numel *= x->shape[d];
    if (d == 0 || (x->shape[d - 1] != 1 && x->stride[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        stride[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        view_d--;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_base_stride = x->stride[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

em_status em_view(em_tensor **out, em_tensor *x, int ndim, const int64_t *shape) {
  int64_t sh[EM_MAX_DIMS], st[EM_MAX_DIMS];
  *out = NULL;
  EM_TRY(infer_shape("view", x, ndim, shape, sh));
  if (!view_strides(x, ndim, sh, st)) {
    char a[160], b[160];
    return em_error(EM_ERR_SHAPE,
                    "view: cannot view a non-contiguous tensor of shape %s as %s; use reshape() or "
                    "contiguous() first", em_shape_str(x->ndim, x->shape, a, sizeof a),
                    em_shape_str(ndim, sh, b, sizeof b));
  }
  em_tensor *y;
  EM_TRY(em__alias(&y, x, ndim, sh, st, x->offset));
  return record1(out, y, &VIEW_OP, x, NULL, NULL);
}

em_status em_reshape(em_tensor **out, em_tensor *x, int ndim, const int64_t *shape) {
  int64_t sh[EM_MAX_DIMS], st[EM_MAX_DIMS];
  *out = NULL;
  EM_TRY(infer_shape("reshape", x, ndim, shape, sh));
  em_tensor *y;
  if (view_strides(x, ndim, sh, st)) {
    EM_TRY(em__alias(&y, x, ndim, sh, st, x->offset));
  } else {
    em_tensor *c;
    EM_TRY(em__contig(&c, x));
    int64_t cs[EM_MAX_DIMS];
    view_strides(c, ndim, sh, cs);
    em_status s = em__alias(&y, c, ndim, sh, cs, c->offset);
    em_release(c);
    EM_TRY(s);
  }
  return record1(out, y, &RESHAPE_OP, x, NULL, NULL);
}

em_status em_flatten(em_tensor **out, em_tensor *x, int start_dim, int end_dim) {
  int s, e;
  *out = NULL;
  if (x->ndim == 0) return em_reshape(out, x, 1, (int64_t[]){1});
  EM_TRY(em__dim("flatten", start_dim, x->ndim, &s));
  EM_TRY(em__dim("flatten", end_dim, x->ndim, &e));
  if (s > e) return em_error(EM_ERR_ARG, "flatten: start dim %d comes after end dim %d", s + 1, e + 1);
  int64_t sh[EM_MAX_DIMS];
  int n = 0;
  for (int i = 0; i < s; i++) sh[n++] = x->shape[i];
  int64_t m = 1;
  for (int i = s; i <= e; i++) m *= x->shape[i];
  sh[n++] = m;
  for (int i = e + 1; i < x->ndim; i++) sh[n++] = x->shape[i];
  return em_reshape(out, x, n, sh);
}

/* ------------------------------------------------------------------ */
/* transpose / permute                                                 */
/* ------------------------------------------------------------------ */

typedef struct { int ndim; int perm[EM_MAX_DIMS]; } perm_ctx;

static em_status permute_backward(em_node *n, em_tensor *gy, em_tensor **gx) {
  const perm_ctx *c = n->ctx;
  int inv[EM_MAX_DIMS];
  for (int i = 0; i < c->ndim; i++) inv[c->perm[i]] = i;
  return em_permute(&gx[0], gy, c->ndim, inv);
}
static const em_opdef PERMUTE_OP = {"permute", permute_backward, free};

em_status em_permute(em_tensor **out, em_tensor *x, int ndim, const int *perm) {
  *out = NULL;
  if (ndim != x->ndim)
    return em_error(EM_ERR_SHAPE, "permute: got %d dims for a %d-d tensor", ndim, x->ndim);
  int p[EM_MAX_DIMS];
  bool seen[EM_MAX_DIMS] = {0};
  int64_t sh[EM_MAX_DIMS], st[EM_MAX_DIMS];
  for (int i = 0; i < ndim; i++) {
    EM_TRY(em__dim("permute", perm[i], ndim, &p[i]));
    if (seen[p[i]]) return em_error(EM_ERR_ARG, "permute: dim %d repeated", p[i] + 1);
    seen[p[i]] = true;
    sh[i] = x->shape[p[i]];
    st[i] = x->stride[p[i]];
  }
  em_tensor *y;
  EM_TRY(em__alias(&y, x, ndim, sh, st, x->offset));
  perm_ctx *c = NULL;
  if (em_autograd_needed(1, &x)) {
    c = malloc(sizeof *c);
    if (!c) {
      em_release(y);
      return em_error(EM_ERR_OOM, "permute: out of memory");
    }
    c->ndim = ndim;
    memcpy(c->perm, p, sizeof p);
  }
  return record1(out, y, &PERMUTE_OP, x, c, free);
}

em_status em_transpose(em_tensor **out, em_tensor *x, int d0, int d1) {
  int a, b, perm[EM_MAX_DIMS];
  *out = NULL;
  if (x->ndim == 0) return em_error(EM_ERR_SHAPE, "transpose: a 0-d tensor has no dims to swap");
  EM_TRY(em__dim("transpose", d0, x->ndim, &a));
  EM_TRY(em__dim("transpose", d1, x->ndim, &b));
  for (int i = 0; i < x->ndim; i++) perm[i] = i;
  perm[a] = b;
  perm[b] = a;
  return em_permute(out, x, x->ndim, perm);
}

/* ------------------------------------------------------------------ */
/* narrow / slice / select: the gradient lands in a zero tensor        */
/* ------------------------------------------------------------------ */

typedef struct { int dim; int64_t start, step; bool drop; } region_ctx;

/* gy into the region of z (shaped like the input) that the forward
** selected: copied, or added when `add`. */
static em_status region_put(const em_node *n, em_tensor *z, em_tensor *gy, bool add) {
  const region_ctx *c = n->ctx;
  em_tensor *part = NULL, *g = gy;
  int64_t sh[EM_MAX_DIMS], st[EM_MAX_DIMS];
  memcpy(sh, z->shape, sizeof sh);
  memcpy(st, z->stride, sizeof st);
  sh[c->dim] = c->drop ? 1 : gy->shape[c->dim];
  st[c->dim] *= c->step;
  em_status s = em__alias(&part, z, z->ndim, sh, st, z->offset + c->start * z->stride[c->dim]);
  if (s == EM_OK && c->drop) s = em_unsqueeze(&g, gy, c->dim);
  if (s == EM_OK) s = add ? em_add_(part, g, 1.0) : em_copy_(part, g);
  if (g != gy) em_release(g);
  em_release(part);
  return s;
}

static em_status region_backward(em_node *n, em_tensor *gy, em_tensor **gx) {
  em_tensor *z;
  EM_TRY(em_zeros(&z, n->in_ndim[0], n->in_shape[0], gy->dtype, gy->device));
  em_status s = region_put(n, z, gy, false);
  if (s != EM_OK) {
    em_release(z);
    return s;
  }
  gx[0] = z;
  return EM_OK;
}
static const em_opdef NARROW_OP = {"narrow", region_backward, free};
static const em_opdef SELECT_OP = {"select", region_backward, free};
static const em_opdef SLICE_OP = {"slice", region_backward, free};

/* Whether narrow node n's region of `to`'s pending gradient is still the
** zero it was made, by to's record of the pieces written since; records
** n's region when it is. */
static bool piece_is_fresh(const em_node *n, em_node *to) {
  const region_ctx *c = n->ctx;
  if (n->op != &NARROW_OP || c->step != 1 || to->n_pieces <= 0 || to->piece_dim != c->dim)
    return false;
  const int64_t lo = c->start, hi = lo + n->out_shape[c->dim];
  for (int i = 0; i < to->n_pieces; i++)
    if (lo < to->piece_hi[i] && to->piece_lo[i] < hi) return false;
  if (to->n_pieces == EM_NODE_PIECES) return false;
  to->piece_lo[to->n_pieces] = lo, to->piece_hi[to->n_pieces] = hi, to->n_pieces++;
  return true;
}

/* For the backward engine: n's output gradient gy goes straight into the
** pending gradient of n's input (node `to`) when n is a narrow, select or
** slice (*done). Pieces of one tensor -- chunk and split, a joined q/k/v
** projection cut in three -- then cost their own size each, not a zero
** tensor of the whole and a sum of wholes per piece: the first piece makes
** the zero tensor and copies itself in, and the others are copied too
** while their regions are untouched (to's record of the pieces), else
** added. Only a contiguous pending gradient that nothing else holds is
** written in place. */
em_status em__region_accumulate(em_node *n, em_tensor *gy, em_node *to, bool *done) {
  *done = false;
  if (n->op != &NARROW_OP && n->op != &SELECT_OP && n->op != &SLICE_OP) return EM_OK;
  if (!n->ctx) return EM_OK;
  em_tensor *a = to->pending_grad;
  const region_ctx *c = n->ctx;
  if (!a && n->op == &NARROW_OP && c->step == 1) {
    /* the first piece: a whole whose other regions are left unset until
    ** other pieces fill them or em__settle_pieces zeroes them (pieces
    ** that cover the whole, q, k and v, never pay for a zero fill) */
    EM_TRY(em__new(&a, n->in_ndim[0], n->in_shape[0], gy->dtype, gy->device, "narrow backward"));
    em_status s = region_put(n, a, gy, false);
    if (s != EM_OK) {
      em_release(a);
      return s;
    }
    to->pending_grad = a;
    to->piece_dim = c->dim, to->n_pieces = 1, to->pieces_unset = true;
    to->piece_lo[0] = c->start, to->piece_hi[0] = c->start + n->out_shape[c->dim];
    *done = true;
    return EM_OK;
  }
  if (!a) return EM_OK; /* select, slice: region_backward's zero whole */
  if (a->refcount != 1 || a->storage->refcount != 1 || !em_is_contiguous(a) ||
      a->dtype != gy->dtype || a->device.backend != gy->device.backend || a->device.index != gy->device.index ||
      a->ndim != n->in_ndim[0])
    return EM_OK;
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] != n->in_shape[0][d]) return EM_OK;
  const bool fresh = piece_is_fresh(n, to);
  if (!fresh) { /* this region now holds a sum: the record no longer says where zeros are */
    EM_TRY(em__settle_pieces(to));
    to->n_pieces = 0;
  }
  EM_TRY(region_put(n, a, gy, !fresh));
  *done = true;
  return EM_OK;
}

em_status em__settle_pieces(em_node *n) {
  if (!n->pieces_unset) return EM_OK;
  n->pieces_unset = false;
  em_tensor *a = n->pending_grad;
  if (!a) return EM_OK;
  /* the gaps between the recorded pieces, in order along piece_dim */
  int64_t lo[EM_NODE_PIECES], hi[EM_NODE_PIECES];
  const int k = n->n_pieces, d = n->piece_dim;
  for (int i = 0; i < k; i++) {
    int j = i;
    while (j > 0 && lo[j - 1] > n->piece_lo[i]) lo[j] = lo[j - 1], hi[j] = hi[j - 1], j--;
    lo[j] = n->piece_lo[i], hi[j] = n->piece_hi[i];
  }
  int64_t at = 0;
  for (int i = 0; i <= k; i++) {
    const int64_t end = i < k ? lo[i] : a->shape[d];
    if (end > at) {
      em_tensor *gap = NULL;
      em_status s = em_narrow(&gap, a, d, at, end - at);
      if (s == EM_OK) s = em_fill_(gap, 0.0);
      em_release(gap);
      if (s != EM_OK) return s;
    }
    if (i < k && hi[i] > at) at = hi[i];
  }
  return EM_OK;
}

static em_status region(em_tensor **out, em_tensor *x, const em_opdef *op, int d, int64_t start,
                        int64_t len, int64_t step, bool drop) {
  int64_t sh[EM_MAX_DIMS], st[EM_MAX_DIMS];
  int n = 0;
  for (int i = 0; i < x->ndim; i++) {
    if (i == d && drop) continue;
    sh[n] = i == d ? len : x->shape[i];
    /* With one element or none the stride is never used; skipping the
    ** product avoids overflow for a step far past the size. */
    st[n] = i == d && len > 1 ? x->stride[i] * step : x->stride[i];
    n++;
  }
  em_tensor *y;
  EM_TRY(em__alias(&y, x, n, sh, st, x->offset + start * x->stride[d]));
  region_ctx *c = NULL;
  if (em_autograd_needed(1, &x)) {
    if (!(c = malloc(sizeof *c))) {
      em_release(y);
      return em_error(EM_ERR_OOM, "%s: out of memory", op->name);
    }
    *c = (region_ctx){d, start, step, drop};
  }
  return record1(out, y, op, x, c, free);
}

em_status em_narrow(em_tensor **out, em_tensor *x, int dim, int64_t start, int64_t length) {
  int d;
  *out = NULL;
  if (x->ndim == 0) return em_error(EM_ERR_SHAPE, "narrow: cannot narrow a 0-d tensor");
  EM_TRY(em__dim("narrow", dim, x->ndim, &d));
  if (start < 0) start += x->shape[d];
  if (start < 0 || length < 0 || start > x->shape[d] || length > x->shape[d] - start)
    return em_error(EM_ERR_INDEX,
                    "narrow: range start %lld, length %lld is out of bounds for dim %d of size %lld",
                    (long long)start + (start < INT64_MAX), (long long)length, d + 1,
                    (long long)x->shape[d]);
  return region(out, x, &NARROW_OP, d, start, length, 1, false);
}

em_status em_slice(em_tensor **out, em_tensor *x, int dim, int64_t start, int64_t end, int64_t step) {
  int d;
  *out = NULL;
  if (x->ndim == 0) return em_error(EM_ERR_SHAPE, "slice: cannot slice a 0-d tensor");
  EM_TRY(em__dim("slice", dim, x->ndim, &d));
  if (step <= 0) return em_error(EM_ERR_ARG, "slice: step must be positive, got %lld", (long long)step);
  int64_t size = x->shape[d];
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = start < 0 ? 0 : start > size ? size : start;
  end = end < start ? start : end > size ? size : end;
  /* ceil((end - start) / step) without end - start + step overflowing */
  return region(out, x, &SLICE_OP, d, start, end > start ? (end - start - 1) / step + 1 : 0, step, false);
}

em_status em_select(em_tensor **out, em_tensor *x, int dim, int64_t index) {
  int d;
  *out = NULL;
  if (x->ndim == 0) return em_error(EM_ERR_SHAPE, "select: cannot index a 0-d tensor");
  EM_TRY(em__dim("select", dim, x->ndim, &d));
  int64_t i = index < 0 ? index + x->shape[d] : index;
  if (i < 0 || i >= x->shape[d])
    return em_error(EM_ERR_INDEX, "select: index %lld is out of range for dim %d of size %lld",
                    (long long)(index >= 0 && index < INT64_MAX ? index + 1 : index), d + 1,
                    (long long)x->shape[d]);
  return region(out, x, &SELECT_OP, d, i, 1, 1, true);
}

/* ------------------------------------------------------------------ */
/* expand / squeeze / unsqueeze                                        */
/* ------------------------------------------------------------------ */

em_status em_expand(em_tensor **out, em_tensor *x, int ndim, const int64_t *shape) {
  int64_t sh[EM_MAX_DIMS], st[EM_MAX_DIMS];
  *out = NULL;
  if (ndim < x->ndim || ndim > EM_MAX_DIMS) {
    char a[160], b[160];
    return em_error(EM_ERR_SHAPE, "expand: cannot expand %s to %s (fewer dims)",
                    em_shape_str(x->ndim, x->shape, a, sizeof a), em_shape_str(ndim, shape, b, sizeof b));
  }
  int lead = ndim - x->ndim;
  for (int i = 0; i < ndim; i++) {
    int64_t have = i < lead ? 1 : x->shape[i - lead];
    int64_t want = shape[i] == -1 && i >= lead ? have : shape[i];
    if (want < 0) { /* -1 keeps a size, and a new leading dim has none to keep */
      char a[160], b[160];
      return em_error(EM_ERR_SHAPE, "expand: cannot expand %s to %s (size %lld at dim %d: %s)",
                      em_shape_str(x->ndim, x->shape, a, sizeof a), em_shape_str(ndim, shape, b, sizeof b),
                      (long long)shape[i], i + 1,
                      shape[i] == -1 ? "-1 is not allowed in a new leading dim" : "sizes must be >= 0, or -1 to keep one");
    }
    if (have != want && have != 1) {
      char a[160], b[160];
      return em_error(EM_ERR_SHAPE, "expand: cannot expand %s to %s (size %lld at dim %d is not 1)",
                      em_shape_str(x->ndim, x->shape, a, sizeof a), em_shape_str(ndim, shape, b, sizeof b),
                      (long long)have, i + 1);
    }
    sh[i] = want;
    st[i] = i < lead || (have == 1 && want != 1) ? 0 : x->stride[i - lead];
  }
  if (em__numel_of(ndim, sh) < 0) {
    char a[160], b[160];
    return em_error(EM_ERR_SHAPE, "expand: cannot expand %s to %s: more than 2^40 elements",
                    em_shape_str(x->ndim, x->shape, a, sizeof a), em_shape_str(ndim, sh, b, sizeof b));
  }
  em_tensor *y;
  EM_TRY(em__alias(&y, x, ndim, sh, st, x->offset));
  return record1(out, y, &EXPAND_OP, x, NULL, NULL);
}

em_status em_squeeze(em_tensor **out, em_tensor *x, int dim) {
  int64_t sh[EM_MAX_DIMS], st[EM_MAX_DIMS];
  int n = 0, d = -1;
  *out = NULL;
  if (dim != EM_ALL_DIMS && x->ndim > 0) {
    EM_TRY(em__dim("squeeze", dim, x->ndim, &d));
    if (x->shape[d] != 1) /* as PyTorch: squeezing a non-1 dim is a no-op */
      d = -2;
  }
  for (int i = 0; i < x->ndim; i++) {
    bool drop = dim == EM_ALL_DIMS ? x->shape[i] == 1 : i == d;
    if (drop) continue;
    sh[n] = x->shape[i];
    st[n] = x->stride[i];
    n++;
  }
  em_tensor *y;
  EM_TRY(em__alias(&y, x, n, sh, st, x->offset));
  return record1(out, y, &SQUEEZE_OP, x, NULL, NULL);
}

em_status em_unsqueeze(em_tensor **out, em_tensor *x, int dim) {
  int64_t sh[EM_MAX_DIMS], st[EM_MAX_DIMS];
  int d;
  *out = NULL;
  if (x->ndim == EM_MAX_DIMS) return em_error(EM_ERR_SHAPE, "unsqueeze: already %d dims", EM_MAX_DIMS);
  EM_TRY(em__dim("unsqueeze", dim, x->ndim + 1, &d));
  for (int i = 0, j = 0; i <= x->ndim; i++) {
    if (i == d) {
      sh[i] = 1;
      st[i] = j < x->ndim ? x->stride[j] * x->shape[j] : 1;
      continue;
    }
    sh[i] = x->shape[j];
    st[i] = x->stride[j];
    j++;
  }
  em_tensor *y;
  EM_TRY(em__alias(&y, x, x->ndim + 1, sh, st, x->offset));
  return record1(out, y, &UNSQUEEZE_OP, x, NULL, NULL);
}

/* ------------------------------------------------------------------ */
/* contiguous, clone, dtype and device changes, detach                 */
/* ------------------------------------------------------------------ */

em_status em_contiguous(em_tensor **out, em_tensor *x) {
  *out = NULL;
  if (em_is_contiguous(x)) {
    *out = em_retain(x);
    return EM_OK;
  }
  em_tensor *y;
  EM_TRY(em__contig(&y, x));
  return record1(out, y, &CONTIGUOUS_OP, x, NULL, NULL);
}

/* A fresh contiguous copy of x with dtype dt on device dev. */
static em_status copy_to(em_tensor **out, em_tensor *x, em_dtype dt, em_device dev, const char *op) {
  em_tensor *y;
  EM_TRY(em__new(&y, x->ndim, x->shape, dt, dev, op));
  em_status s = EM_OK;
  if (em_device_eq(x->device, dev)) {
    em_kview d, src;
    em_kview_of(y, &d);
    em_kview_of(x, &src);
    s = em__be(x)->copy(dev.index, &d, &src);
    if (s != EM_OK) s = em__kernel_fail(op, s);
  } else {
    /* Across devices: same dtype, contiguous, then through the host when
    ** the backends differ. */
    em_tensor *c = NULL;
    s = x->dtype == dt ? em__contig(&c, x) : copy_to(&c, x, dt, x->device, op);
    size_t nbytes = (size_t)em_numel(y) * em_dtype_size(dt);
    const em_backend *bs = em__be(x), *bd = em__be(y); /* y is on dev; em__be: profiled too */
    if (s == EM_OK && nbytes) {
      if (x->device.backend == dev.backend) {
        s = bd->copy_d2d(dev.index, em_data(y), x->device.index, em_data(c), nbytes);
      } else if (bs->host_memory) {
        s = bd->copy_h2d(dev.index, em_data(y), em_data(c), nbytes);
      } else if (bd->host_memory) {
        s = bs->copy_d2h(x->device.index, em_data(y), em_data(c), nbytes);
      } else {
        void *tmp = malloc(nbytes);
        s = tmp ? bs->copy_d2h(x->device.index, tmp, em_data(c), nbytes)
                : em_error(EM_ERR_OOM, "%s: no host memory for staging %zu bytes", op, nbytes);
        if (s == EM_OK) s = bd->copy_h2d(dev.index, em_data(y), tmp, nbytes);
        free(tmp);
      }
      if (s != EM_OK) s = em__kernel_fail(op, s);
    }
    em_release(c);
  }
  if (s != EM_OK) {
    em_release(y);
    return s;
  }
  *out = y;
  return EM_OK;
}

static em_status clone_backward(em_node *n, em_tensor *gy, em_tensor **gx) {
  (void)n;
  return em_clone(&gx[0], gy);
}
static const em_opdef CLONE_GRAD_OP = {"clone", clone_backward, NULL};

em_status em_clone(em_tensor **out, em_tensor *x) {
  em_tensor *y;
  *out = NULL;
  EM_TRY(copy_to(&y, x, x->dtype, x->device, "clone"));
  return record1(out, y, &CLONE_GRAD_OP, x, NULL, NULL);
}

static em_status to_dtype_backward(em_node *n, em_tensor *gy, em_tensor **gx) {
  return em_to_dtype(&gx[0], gy, n->in_dtype[0]);
}
static const em_opdef TO_DTYPE_OP = {"to_dtype", to_dtype_backward, NULL};

em_status em_to_dtype(em_tensor **out, em_tensor *x, em_dtype dt) {
  *out = NULL;
  if ((unsigned)dt >= EM_NDTYPES) return em_error(EM_ERR_DTYPE, "to: invalid dtype %d", (int)dt);
  if (x->dtype == dt) {
    *out = em_retain(x);
    return EM_OK;
  }
  em_tensor *y;
  EM_TRY(copy_to(&y, x, dt, x->device, "to"));
  if (!em_dtype_is_float(dt)) { /* integer results carry no gradient */
    *out = y;
    return EM_OK;
  }
  return record1(out, y, &TO_DTYPE_OP, x, NULL, NULL);
}

typedef struct { em_device dev; } device_ctx;

static em_status to_device_backward(em_node *n, em_tensor *gy, em_tensor **gx) {
  return em_to_device(&gx[0], gy, ((device_ctx *)n->ctx)->dev);
}
static const em_opdef TO_DEVICE_OP = {"to_device", to_device_backward, free};

em_status em_to_device(em_tensor **out, em_tensor *x, em_device dev) {
  *out = NULL;
  if (!em_backend_get(dev.backend)) return em_error(EM_ERR_DEVICE, "to: no backend in slot %d", dev.backend);
  if (em_device_eq(x->device, dev)) {
    *out = em_retain(x);
    return EM_OK;
  }
  em_tensor *y;
  EM_TRY(copy_to(&y, x, x->dtype, dev, "to"));
  device_ctx *c = NULL;
  if (em_autograd_needed(1, &x)) {
    if (!(c = malloc(sizeof *c))) {
      em_release(y);
      return em_error(EM_ERR_OOM, "to: out of memory");
    }
    c->dev = x->device;
  }
  return record1(out, y, &TO_DEVICE_OP, x, c, free);
}

em_status em_detach(em_tensor **out, em_tensor *x) {
  return em__alias(out, x, x->ndim, x->shape, x->stride, x->offset);
}
