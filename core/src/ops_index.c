/*
** ops_index.c -- ops that pick elements by int64 index: embedding,
** index_select, gather, scatter_add and one_hot.
**
** The kernels see contiguous data as [outer, n, inner] around the indexed
** dim and check every index against n, failing with EM_ERR_INDEX; we only
** prefix their message with the op's name. Backward passes are the dual
** kernels: selecting rows is undone by adding rows (index_add), gathering
** by scattering (scatter_add).
*/
#include "internal.h"

typedef struct index_ctx {
  int dim; /* normalised dim the index runs along */
} index_ctx;

static em_status new_ctx(index_ctx **out, const char *op, int dim) {
  *out = malloc(sizeof **out);
  if (!*out) return em_error(EM_ERR_OOM, "%s: out of memory for the autograd context", op);
  (*out)->dim = dim;
  return EM_OK;
}

static em_status need_index(const char *op, const em_tensor *x, const em_tensor *index) {
  if (index->dtype != EM_I64)
    return em_error(EM_ERR_DTYPE, "%s: index must be int64, got %s", op,
                    em_dtype_name(index->dtype));
  return em__same_device(op, x, index);
}

/* A tensor needs at least one dim to be indexed along one. */
static em_status need_dims(const char *op, const em_tensor *x, const char *what) {
  if (x->ndim == 0)
    return em_error(EM_ERR_SHAPE, "%s: %s must have at least 1 dim, got a scalar", op, what);
  return EM_OK;
}

/* ---------------------------------------------------------------- */
/* embedding                                                         */
/* ---------------------------------------------------------------- */

/* The gradient of a row gather: zeros shaped like the input, with gy's
** slices added back at the gathered positions along dim (index_add).
** Shared by embedding (dim 0 of a 2-D weight) and index_select. */
static em_status gather_rows_backward(const char *op, em_node *node, int dim, em_tensor *gy,
                                      em_tensor **gx) {
  em_tensor *index = node->saved[0], *g = NULL, *gyc = NULL;
  int64_t outer, n, inner, nidx = em_numel(index);
  em_status s;
  if ((s = em_zeros(&g, node->in_ndim[0], node->in_shape[0], gy->dtype, gy->device))) return s;
  if ((s = em__contig(&gyc, gy))) goto fail;
  em__split_dims(g->ndim, g->shape, dim, &outer, &n, &inner);
  if (nidx > 0 && outer > 0 && inner > 0) {
    s = em__be(g)->index_add(g->device.index, g->dtype, em_data(g), em_data(gyc),
                             em_data(index), nidx, outer, n, inner);
    if (s) {
      s = em__kernel_fail(op, s);
      goto fail;
    }
  }
  em_release(gyc);
  gx[0] = g;
  return EM_OK;
fail:
  em_release(gyc);
  em_release(g);
  return s;
}

/* saved: index (contiguous). inputs: weight. */
static em_status embedding_backward(em_node *node, em_tensor *gy, em_tensor **gx) {
  return gather_rows_backward("embedding backward", node, 0, gy, gx);
}

static const em_opdef EMBEDDING_OP = {"embedding", embedding_backward, NULL};

em_status em_embedding(em_tensor **out, em_tensor *weight, em_tensor *index) {
  char buf[128];
  *out = NULL;
  if (weight->ndim != 2)
    return em_error(EM_ERR_SHAPE, "embedding: weight must be 2-D [rows, dim], got %s",
                    em_shape_str(weight->ndim, weight->shape, buf, sizeof buf));
  EM_TRY(need_index("embedding", weight, index));
  if (index->ndim + 1 > EM_MAX_DIMS)
    return em_error(EM_ERR_SHAPE, "embedding: index has %d dims, at most %d allowed",
                    index->ndim, EM_MAX_DIMS - 1);
  int64_t shape[EM_MAX_DIMS];
  memcpy(shape, index->shape, sizeof(int64_t) * (size_t)index->ndim);
  shape[index->ndim] = weight->shape[1];
  int64_t nidx = em_numel(index);

  em_tensor *wc = NULL, *ic = NULL, *y = NULL;
  em_status s;
  if ((s = em__contig(&wc, weight))) goto done;
  if ((s = em__contig(&ic, index))) goto done;
  if ((s = em__new(&y, index->ndim + 1, shape, weight->dtype, weight->device, "embedding")))
    goto done;
  if (nidx > 0) {
    s = em__be(weight)->index_select(weight->device.index, weight->dtype, em_data(y),
                                     em_data(wc), em_data(ic), nidx, 1, weight->shape[0],
                                     weight->shape[1]);
    if (s) {
      s = em__kernel_fail("embedding", s);
      goto done;
    }
  }
  if (em_autograd_needed(1, &weight))
    s = em_autograd_record(y, &EMBEDDING_OP, 1, &weight, 1, &ic, NULL);
done:
  em_release(wc);
  em_release(ic);
  if (s) em_release(y);
  else *out = y;
  return s;
}

/* ---------------------------------------------------------------- */
/* index_select                                                      */
/* ---------------------------------------------------------------- */

/* saved: index (contiguous, 1-D or 0-d). inputs: x. */
static em_status index_select_backward(em_node *node, em_tensor *gy, em_tensor **gx) {
  const index_ctx *ctx = node->ctx;
  return gather_rows_backward("index_select backward", node, ctx->dim, gy, gx);
}

static const em_opdef INDEX_SELECT_OP = {"index_select", index_select_backward, free};

em_status em_index_select(em_tensor **out, em_tensor *x, int dim, em_tensor *index) {
  const char *op = "index_select";
  char buf[128];
  int d;
  *out = NULL;
  EM_TRY(need_dims(op, x, "input"));
  EM_TRY(em__dim(op, dim, x->ndim, &d));
  EM_TRY(need_index(op, x, index));
  if (index->ndim > 1)
    return em_error(EM_ERR_SHAPE, "index_select: index must be 1-D, got %s",
                    em_shape_str(index->ndim, index->shape, buf, sizeof buf));
  int64_t nidx = em_numel(index), shape[EM_MAX_DIMS], outer, n, inner;
  memcpy(shape, x->shape, sizeof shape);
  shape[d] = nidx;
  em__split_dims(x->ndim, x->shape, d, &outer, &n, &inner);

  em_tensor *xc = NULL, *ic = NULL, *y = NULL;
  em_status s;
  if ((s = em__contig(&xc, x))) goto done;
  if ((s = em__contig(&ic, index))) goto done;
  if ((s = em__new(&y, x->ndim, shape, x->dtype, x->device, op))) goto done;
  /* Indices are checked even when there is nothing to copy, unless there
  ** are no rows to check them against. */
  if (nidx > 0 && outer > 0) {
    s = em__be(x)->index_select(x->device.index, x->dtype, em_data(y), em_data(xc),
                                em_data(ic), nidx, outer, n, inner);
    if (s) {
      s = em__kernel_fail(op, s);
      goto done;
    }
  }
  if (em_autograd_needed(1, &x)) {
    index_ctx *ctx;
    if ((s = new_ctx(&ctx, op, d))) goto done;
    s = em_autograd_record(y, &INDEX_SELECT_OP, 1, &x, 1, &ic, ctx);
  }
done:
  em_release(xc);
  em_release(ic);
  if (s) em_release(y);
  else *out = y;
  return s;
}

/* ---------------------------------------------------------------- */
/* gather and scatter_add                                            */
/* ---------------------------------------------------------------- */

/* index must have x's ndim and x's sizes on every dim but d. */
static em_status check_gather_index(const char *op, const em_tensor *x, int d,
                                    const em_tensor *index) {
  char b1[128], b2[128];
  bool ok = index->ndim == x->ndim;
  for (int k = 0; ok && k < x->ndim; k++) ok = k == d || index->shape[k] == x->shape[k];
  if (!ok)
    return em_error(EM_ERR_SHAPE,
                    "%s: index %s must have the shape of input %s except at dim %d",
                    op, em_shape_str(index->ndim, index->shape, b1, sizeof b1),
                    em_shape_str(x->ndim, x->shape, b2, sizeof b2), d + 1);
  return EM_OK;
}

/* Runs the gather kernel: y = x gathered along d by the contiguous ic. */
static em_status run_gather(const char *op, em_tensor *y, em_tensor *xc, int d, em_tensor *ic) {
  int64_t outer, n_in, inner;
  em__split_dims(xc->ndim, xc->shape, d, &outer, &n_in, &inner);
  int64_t n_idx = ic->shape[d];
  if (outer == 0 || n_idx == 0 || inner == 0) return EM_OK;
  em_status s = em__be(xc)->gather(xc->device.index, xc->dtype, em_data(y), em_data(xc),
                                   em_data(ic), outer, n_in, n_idx, inner);
  return s ? em__kernel_fail(op, s) : EM_OK;
}

/* Runs the scatter_add kernel: y[.., ic[..], ..] += srcc[..] along d. */
static em_status run_scatter_add(const char *op, em_tensor *y, int d, em_tensor *ic,
                                 em_tensor *srcc) {
  int64_t outer, n_out, inner;
  em__split_dims(y->ndim, y->shape, d, &outer, &n_out, &inner);
  int64_t n_idx = ic->shape[d];
  if (outer == 0 || n_idx == 0 || inner == 0) return EM_OK;
  em_status s = em__be(y)->scatter_add(y->device.index, y->dtype, em_data(y), em_data(srcc),
                                        em_data(ic), outer, n_out, n_idx, inner);
  return s ? em__kernel_fail(op, s) : EM_OK;
}

/* saved: index (contiguous). inputs: x. */
static em_status gather_backward(em_node *node, em_tensor *gy, em_tensor **gx) {
  const index_ctx *ctx = node->ctx;
  em_tensor *g = NULL, *gyc = NULL;
  em_status s;
  if ((s = em_zeros(&g, node->in_ndim[0], node->in_shape[0], gy->dtype, gy->device))) return s;
  if ((s = em__contig(&gyc, gy))) goto fail;
  if ((s = run_scatter_add("gather backward", g, ctx->dim, node->saved[0], gyc))) goto fail;
  em_release(gyc);
  gx[0] = g;
  return EM_OK;
fail:
  em_release(gyc);
  em_release(g);
  return s;
}

static const em_opdef GATHER_OP = {"gather", gather_backward, free};

em_status em_gather(em_tensor **out, em_tensor *x, int dim, em_tensor *index) {
  const char *op = "gather";
  int d;
  *out = NULL;
  EM_TRY(need_dims(op, x, "input"));
  EM_TRY(em__dim(op, dim, x->ndim, &d));
  EM_TRY(need_index(op, x, index));
  EM_TRY(check_gather_index(op, x, d, index));

  em_tensor *xc = NULL, *ic = NULL, *y = NULL;
  em_status s;
  if ((s = em__contig(&xc, x))) goto done;
  if ((s = em__contig(&ic, index))) goto done;
  if ((s = em__new(&y, index->ndim, index->shape, x->dtype, x->device, op))) goto done;
  if ((s = run_gather(op, y, xc, d, ic))) goto done;
  if (em_autograd_needed(1, &x)) {
    index_ctx *ctx;
    if ((s = new_ctx(&ctx, op, d))) goto done;
    s = em_autograd_record(y, &GATHER_OP, 1, &x, 1, &ic, ctx);
  }
done:
  em_release(xc);
  em_release(ic);
  if (s) em_release(y);
  else *out = y;
  return s;
}

/* saved: index (contiguous). inputs: x, src. x's gradient passes through
** unchanged; src's is the gradient gathered where src was added. */
static em_status scatter_add_backward(em_node *node, em_tensor *gy, em_tensor **gx) {
  const index_ctx *ctx = node->ctx;
  if (node->needs_grad[0]) gx[0] = em_retain(gy);
  if (node->needs_grad[1]) {
    em_status s = em_gather(&gx[1], gy, ctx->dim, node->saved[0]);
    if (s) {
      em_release(gx[0]);
      gx[0] = NULL;
      return s;
    }
  }
  return EM_OK;
}

static const em_opdef SCATTER_ADD_OP = {"scatter_add", scatter_add_backward, free};

em_status em_scatter_add(em_tensor **out, em_tensor *x, int dim, em_tensor *index,
                         em_tensor *src) {
  const char *op = "scatter_add";
  char b1[128], b2[128];
  int d;
  *out = NULL;
  EM_TRY(need_dims(op, x, "input"));
  EM_TRY(em__dim(op, dim, x->ndim, &d));
  EM_TRY(need_index(op, x, index));
  EM_TRY(check_gather_index(op, x, d, index));
  if (src->dtype != x->dtype)
    return em_error(EM_ERR_DTYPE, "scatter_add: src is %s but input is %s",
                    em_dtype_name(src->dtype), em_dtype_name(x->dtype));
  EM_TRY(em__same_device(op, x, src));
  bool same = src->ndim == index->ndim;
  for (int k = 0; same && k < src->ndim; k++) same = src->shape[k] == index->shape[k];
  if (!same)
    return em_error(EM_ERR_SHAPE, "scatter_add: src %s must have the shape of index %s",
                    em_shape_str(src->ndim, src->shape, b1, sizeof b1),
                    em_shape_str(index->ndim, index->shape, b2, sizeof b2));

  em_tensor *ic = NULL, *srcc = NULL, *y = NULL;
  em_status s;
  if ((s = em__contig(&ic, index))) goto done;
  if ((s = em__contig(&srcc, src))) goto done;
  if ((s = em__new(&y, x->ndim, x->shape, x->dtype, x->device, op))) goto done;
  if (em_numel(x) > 0) {
    em_kview dst, from;
    em_kview_of(y, &dst);
    em_kview_of(x, &from);
    if ((s = em__be(x)->copy(x->device.index, &dst, &from))) {
      s = em__kernel_fail(op, s);
      goto done;
    }
  }
  if ((s = run_scatter_add(op, y, d, ic, srcc))) goto done;
  em_tensor *inputs[2] = {x, src};
  if (em_autograd_needed(2, inputs)) {
    index_ctx *ctx;
    if ((s = new_ctx(&ctx, op, d))) goto done;
    s = em_autograd_record(y, &SCATTER_ADD_OP, 2, inputs, 1, &ic, ctx);
  }
done:
  em_release(ic);
  em_release(srcc);
  if (s) em_release(y);
  else *out = y;
  return s;
}

/* ---------------------------------------------------------------- */
/* one_hot                                                           */
/* ---------------------------------------------------------------- */

/* The largest class in index plus one, read on the host (PyTorch's
** num_classes = -1). */
static em_status infer_classes(const em_tensor *index, int64_t *classes) {
  int64_t n = em_numel(index);
  if (n == 0)
    return em_error(EM_ERR_ARG, "one_hot: cannot infer the number of classes from an empty index; "
                    "give num_classes");
  int64_t *host = malloc(sizeof(int64_t) * (size_t)n);
  if (!host) return em_error(EM_ERR_OOM, "one_hot: out of memory copying %lld indices",
                             (long long)n);
  em_status s = em_to_host(index, host);
  if (s) {
    free(host);
    return em__kernel_fail("one_hot", s);
  }
  int64_t max = host[0];
  for (int64_t i = 1; i < n; i++)
    if (host[i] > max) max = host[i];
  free(host);
  *classes = max + 1;
  return EM_OK;
}

/* out[..., c] = (index[...] == c), built by scatter-adding ones into zeros,
** so that the kernel checks the class range on any backend. */
em_status em_one_hot(em_tensor **out, const em_tensor *index, int64_t num_classes) {
  const char *op = "one_hot";
  *out = NULL;
  if (index->dtype != EM_I64)
    return em_error(EM_ERR_DTYPE, "one_hot: index must be int64, got %s",
                    em_dtype_name(index->dtype));
  if (index->ndim + 1 > EM_MAX_DIMS)
    return em_error(EM_ERR_SHAPE, "one_hot: index has %d dims, at most %d allowed", index->ndim,
                    EM_MAX_DIMS - 1);
  if (num_classes < 0) EM_TRY(infer_classes(index, &num_classes));
  if (num_classes == 0 && em_numel(index) > 0)
    return em_error(EM_ERR_ARG, "one_hot: num_classes must be positive, got 0");

  int64_t shape[EM_MAX_DIMS], n = em_numel(index), col[2] = {n, 1};
  memcpy(shape, index->shape, sizeof(int64_t) * (size_t)index->ndim);
  shape[index->ndim] = num_classes;
  em_tensor *y = NULL, *ic = NULL, *ones = NULL;
  em_status s;
  if ((s = em_zeros(&y, index->ndim + 1, shape, EM_I64, index->device))) goto done;
  if (n == 0) goto done;
  if ((s = em_ones(&ones, 2, col, EM_I64, index->device))) goto done;
  if ((s = em__contig(&ic, (em_tensor *)index))) goto done;
  /* Seen as [n, classes] with the index as an [n, 1] column. */
  s = em__be(y)->scatter_add(y->device.index, EM_I64, em_data(y), em_data(ones), em_data(ic), n,
                             num_classes, 1, 1);
  if (s == EM_ERR_INDEX) {
    /* Say it in one_hot's terms; the kernel's message has the value. */
    char why[256];
    snprintf(why, sizeof why, "%s", em_error_message());
    s = em_error(EM_ERR_INDEX, "one_hot: class out of range for %lld classes (%s)",
                 (long long)num_classes, why);
  } else if (s) {
    s = em__kernel_fail(op, s);
  }
done:
  em_release(ic);
  em_release(ones);
  if (s) em_release(y);
  else *out = y;
  return s;
}
