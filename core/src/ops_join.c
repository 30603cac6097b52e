/*
** ops_join.c -- joining tensors (cat, stack) and cutting them (split,
** chunk).
**
** cat copies each piece straight into its slot of the result with the
** backend's strided copy; its backward hands each input the matching
** narrow of the gradient. split and chunk return narrow views, which
** record their own backward.
*/
#include "internal.h"

typedef struct cat_ctx {
  int dim; /* normalised dim the pieces were joined along */
} cat_ctx;

/* Checks that xs[i] can be joined with xs[0] along d: same ndim, device,
** and sizes on every other dim (on every dim when d is -1); dtypes may
** differ (em_cat promotes them, as torch.cat). Positions in messages are
** 1-based. */
static em_status check_joinable(const char *op, int n, em_tensor *const *xs, int d) {
  const em_tensor *a = xs[0];
  char b1[128], b2[128];
  for (int i = 1; i < n; i++) {
    const em_tensor *b = xs[i];
    if (!em_device_eq(a->device, b->device))
      return em_error(EM_ERR_DEVICE, "%s: tensor %d is on %s but tensor 1 is on %s", op, i + 1,
                      em_device_str(b->device, b1, sizeof b1),
                      em_device_str(a->device, b2, sizeof b2));
    bool ok = b->ndim == a->ndim;
    int bad = -1;
    for (int k = 0; ok && k < a->ndim; k++)
      if (k != d && a->shape[k] != b->shape[k]) {
        ok = false;
        bad = k;
      }
    if (!ok) {
      em_shape_str(a->ndim, a->shape, b1, sizeof b1);
      em_shape_str(b->ndim, b->shape, b2, sizeof b2);
      if (bad < 0)
        return em_error(EM_ERR_SHAPE, "%s: tensor 1 has %d dims but tensor %d has %d: %s vs %s",
                        op, a->ndim, i + 1, b->ndim, b1, b2);
      return em_error(EM_ERR_SHAPE, "%s: tensors 1 and %d differ at dim %d (of %d): %s vs %s",
                      op, i + 1, bad + 1, a->ndim, b1, b2);
    }
  }
  return EM_OK;
}

/* Each input gets the slice of the gradient its piece was copied into. */
static em_status cat_backward(em_node *node, em_tensor *gy, em_tensor **gx) {
  const cat_ctx *ctx = node->ctx;
  int64_t start = 0;
  for (int i = 0; i < node->n_inputs; i++) {
    int64_t len = node->in_shape[i][ctx->dim];
    if (node->needs_grad[i]) {
      em_status s = em_narrow(&gx[i], gy, ctx->dim, start, len);
      if (s) {
        for (int j = 0; j < i; j++) {
          em_release(gx[j]);
          gx[j] = NULL;
        }
        return s;
      }
    }
    start += len;
  }
  return EM_OK;
}

static const em_opdef CAT_OP = {"cat", cat_backward, free};

em_status em_cat(em_tensor **out, int n, em_tensor *const *xs, int dim) {
  const char *op = "cat";
  int d;
  *out = NULL;
  if (n < 1 || !xs) return em_error(EM_ERR_ARG, "cat: needs at least 1 tensor, got %d", n);
  for (int i = 0; i < n; i++)
    if (!xs[i]) return em_error(EM_ERR_ARG, "cat: tensor %d is missing", i + 1);
  if (xs[0]->ndim == 0)
    return em_error(EM_ERR_SHAPE, "cat: cannot join scalars (0-d tensors); use stack");
  EM_TRY(em__dim(op, dim, xs[0]->ndim, &d));
  EM_TRY(check_joinable(op, n, xs, d));
  /* Pieces of several dtypes join in their common one (torch.cat's type
  ** promotion): the others are converted first (differentiably). */
  const em_tensor *widest = xs[0];
  bool mixed = false;
  for (int i = 1; i < n; i++) {
    if (xs[i]->dtype != xs[0]->dtype) mixed = true;
    if (em_result_type(widest, xs[i]) != widest->dtype) widest = xs[i];
  }
  if (mixed) {
    em_tensor **conv = calloc((size_t)n, sizeof *conv);
    if (!conv) return em_error(EM_ERR_OOM, "cat: out of memory for %d tensors", n);
    em_status s = EM_OK;
    for (int i = 0; i < n && !s; i++) s = em_to_dtype(&conv[i], xs[i], widest->dtype);
    if (!s) s = em_cat(out, n, conv, dim);
    em_free_list(conv, n);
    return s;
  }

  int64_t shape[EM_MAX_DIMS];
  memcpy(shape, xs[0]->shape, sizeof shape);
  shape[d] = 0;
  for (int i = 0; i < n; i++) shape[d] += xs[i]->shape[d];
  em_tensor *y;
  EM_TRY(em__new(&y, xs[0]->ndim, shape, xs[0]->dtype, xs[0]->device, op));

  /* Copy piece i into y's rows [start, start + len) along d. */
  const em_backend *be = em__be(y);
  size_t elsize = em_dtype_size(y->dtype);
  int64_t start = 0;
  em_status s = EM_OK;
  for (int i = 0; i < n && !s; i++) {
    const em_tensor *x = xs[i];
    if (em_numel(x) > 0) {
      em_kview dst, src;
      em_kview_of(y, &dst);
      dst.data = (char *)dst.data + (size_t)(start * y->stride[d]) * elsize;
      dst.shape[d] = x->shape[d];
      em_kview_of(x, &src);
      s = be->copy(y->device.index, &dst, &src);
      if (s) s = em__kernel_fail(op, s);
    }
    start += x->shape[d];
  }
  if (!s && em_autograd_needed(n, xs)) {
    cat_ctx *ctx = malloc(sizeof *ctx);
    if (!ctx) s = em_error(EM_ERR_OOM, "cat: out of memory for the autograd context");
    else {
      ctx->dim = d;
      s = em_autograd_record(y, &CAT_OP, n, xs, 0, NULL, ctx);
    }
  }
  if (s) {
    em_release(y);
    return s;
  }
  *out = y;
  return EM_OK;
}

em_status em_stack(em_tensor **out, int n, em_tensor *const *xs, int dim) {
  int d;
  *out = NULL;
  if (n < 1 || !xs) return em_error(EM_ERR_ARG, "stack: needs at least 1 tensor, got %d", n);
  for (int i = 0; i < n; i++)
    if (!xs[i]) return em_error(EM_ERR_ARG, "stack: tensor %d is missing", i + 1);
  if (xs[0]->ndim + 1 > EM_MAX_DIMS)
    return em_error(EM_ERR_SHAPE, "stack: tensors have %d dims, the result would exceed %d",
                    xs[0]->ndim, EM_MAX_DIMS);
  /* The new dim may go anywhere from before the first to after the last. */
  EM_TRY(em__dim("stack", dim, xs[0]->ndim + 1, &d));
  /* All shapes equal: no dim is exempt. */
  EM_TRY(check_joinable("stack", n, xs, -1));
  em_tensor **parts = calloc((size_t)n, sizeof *parts);
  if (!parts) return em_error(EM_ERR_OOM, "stack: out of memory for %d tensors", n);
  em_status s = EM_OK;
  for (int i = 0; i < n && !s; i++) s = em_unsqueeze(&parts[i], xs[i], d);
  if (!s) s = em_cat(out, n, parts, d);
  em_free_list(parts, n);
  return s;
}

/* `count` pieces of `size` along d, the last one shorter if need be and
** any beyond the end empty. */
static em_status split_views(const char *op, em_tensor ***outs, int *n, em_tensor *x,
                             int64_t size, int64_t count, int d) {
  int64_t len = x->shape[d];
  if (count > 1000000)
    return em_error(EM_ERR_ARG, "%s: would make %lld pieces of size %lld; too many", op,
                    (long long)count, (long long)size);
  em_tensor **list = calloc((size_t)count, sizeof *list);
  if (!list) return em_error(EM_ERR_OOM, "%s: out of memory for %lld pieces", op, (long long)count);
  for (int64_t i = 0; i < count; i++) {
    int64_t start = i * size < len ? i * size : len;
    int64_t piece = len - start < size ? len - start : size;
    em_status s = em_narrow(&list[i], x, d, start, piece);
    if (s) {
      em_free_list(list, (int)count);
      return s;
    }
  }
  *outs = list;
  *n = (int)count;
  return EM_OK;
}

em_status em_split(em_tensor ***outs, int *n, em_tensor *x, int64_t size, int dim) {
  int d;
  *outs = NULL;
  *n = 0;
  if (x->ndim == 0) return em_error(EM_ERR_SHAPE, "split: cannot split a scalar (0-d tensor)");
  EM_TRY(em__dim("split", dim, x->ndim, &d));
  if (size < 1) return em_error(EM_ERR_ARG, "split: piece size must be >= 1, got %lld",
                                (long long)size);
  /* An empty dim still gives one (empty) piece, as in PyTorch. */
  int64_t len = x->shape[d];
  /* ceil(len / size) written so that a huge size cannot overflow */
  return split_views("split", outs, n, x, size, len == 0 ? 1 : (len - 1) / size + 1, d);
}

em_status em_chunk(em_tensor ***outs, int *n, em_tensor *x, int64_t chunks, int dim) {
  int d;
  *outs = NULL;
  *n = 0;
  if (x->ndim == 0) return em_error(EM_ERR_SHAPE, "chunk: cannot chunk a scalar (0-d tensor)");
  EM_TRY(em__dim("chunk", dim, x->ndim, &d));
  if (chunks < 1)
    return em_error(EM_ERR_ARG, "chunk: number of chunks must be >= 1, got %lld",
                    (long long)chunks);
  /* As torch.chunk: pieces of ceil(len / chunks), so fewer than `chunks`
  ** pieces may come back; an empty dim gives `chunks` empty pieces. */
  int64_t len = x->shape[d];
  if (len == 0) return split_views("chunk", outs, n, x, 1, chunks, d);
  int64_t size = (len - 1) / chunks + 1; /* ceil, without len + chunks overflowing */
  return split_views("chunk", outs, n, x, size, (len - 1) / size + 1, d);
}

void em_free_list(em_tensor **list, int n) {
  if (!list) return;
  for (int i = 0; i < n; i++) em_release(list[i]);
  free(list);
}
