/*
** ops_inplace.c -- the in-place ops (copy_, fill_, add_, mul_scalar_): what
** autograd allows to be written in place, how such a write is recorded (a
** graph tensor written in place backpropagates, as in PyTorch), and the
** writes themselves, with ops_elementwise.c's promotion and checks.
*/
#include "internal.h"

#include <math.h>

/* ------------------------------------------------------------------ */
/* In place                                                            */
/* ------------------------------------------------------------------ */

/* The leaf that requiring-grad view t was taken from (w[1], w:narrow(...),
** views of views), or NULL: down single-input nodes to a leaf that shares
** t's memory (an op in between would have made new memory). */
static const em_tensor *viewed_leaf(const em_tensor *t) {
  const em_node *n = t->grad_fn;
  for (int depth = 0; n && n->n_inputs == 1 && depth < 64; depth++) {
    const em_tensor *leaf = n->edges[0].leaf;
    if (leaf) return leaf->storage == t->storage ? leaf : NULL;
    n = n->edges[0].fn;
  }
  return NULL;
}

/* In-place writes autograd records, as PyTorch's: with grad mode on, into
** a tensor of a graph (not a leaf that requires grad), or from a source that
** requires grad, where no other tensor shares dst's memory (a view of dst,
** a detach() of it or a tensor an op saved would keep the old values or
** history: refused by check_inplace). dst then takes the memory and history
** of the out-of-place result (record_inplace). */
static bool records_inplace(const em_tensor *dst, const em_tensor *src) {
  if (!em_grad_enabled() || (dst->requires_grad && !dst->grad_fn)) return false;
  if (!dst->grad_fn && !(src && src->requires_grad)) return false;
  return dst->storage && dst->storage->refcount - dst->storage->saved_refs == 1;
}

/* dst becomes val (a new reference: a fresh contiguous tensor of dst's
** shape, dtype and device, computed out of place from dst's old values):
** its memory and its history. The old memory stays with whatever val's op
** saved of dst, unchanged, so that op's gradient reads the old values.
** The new memory's version follows the old one's, so that caches keyed on
** (tensor, version) (autocast's casts) cannot take it for the old; val's
** node, which may have saved val itself, is told (its version check). */
static em_status record_inplace(const char *op, em_tensor *dst, em_tensor *val) {
  if (val->dtype != dst->dtype || val->ndim != dst->ndim ||
      memcmp(val->shape, dst->shape, sizeof(int64_t) * (size_t)dst->ndim) != 0 || !em_is_contiguous(val)) {
    char a[200], b[200];
    em_error(EM_ERR_AUTOGRAD, "%s: the result (%s) does not fit the destination (%s) in place", op,
             em__desc(val, a, sizeof a), em__desc(dst, b, sizeof b));
    em_release(val);
    return EM_ERR_AUTOGRAD;
  }
  em_storage *old = dst->storage;
  const uint64_t version = old->version + 1;
  for (int i = 0; val->grad_fn && i < val->grad_fn->n_saved; i++)
    if (val->grad_fn->saved[i] && val->grad_fn->saved[i]->storage == val->storage)
      val->grad_fn->saved_version[i] = version;
  val->storage->version = version;
  val->storage->refcount++;
  dst->storage = val->storage;
  dst->offset = val->offset;
  memcpy(dst->stride, val->stride, sizeof dst->stride);
  em__storage_release(old);
  if (val->grad_fn) em_node_retain(val->grad_fn);
  if (dst->grad_fn) em_node_release(dst->grad_fn);
  dst->grad_fn = val->grad_fn;
  dst->requires_grad = val->requires_grad;
  em_release(val);
  return EM_OK;
}

/* In-place ops are recorded only as records_inplace says, so with grad
** mode on they must not touch another tensor autograd cares about, nor
** take a gradient-carrying source. */
static em_status check_inplace(const char *op, const em_tensor *dst, const em_tensor *src) {
  char d[200];
  if (!em_grad_enabled()) return EM_OK;
  const em_tensor *leaf = dst->requires_grad && !dst->grad_fn ? dst : viewed_leaf(dst);
  if (leaf)
    return em_error(EM_ERR_AUTOGRAD,
                    "%s: %sa leaf tensor that requires grad (%s) is being used in an in-place "
                    "operation; do it with grad mode off (no_grad)", op, leaf == dst ? "" : "a view of ",
                    em__desc(leaf, d, sizeof d));
  if (dst->requires_grad)
    return em_error(EM_ERR_AUTOGRAD,
                    "%s: the tensor (%s) was made by '%s' and is part of an autograd graph, and other "
                    "tensors share its memory (views, detach(), or an op saved it for its gradient): the "
                    "in-place op cannot be recorded; use the out-of-place op", op,
                    em__desc(dst, d, sizeof d), dst->grad_fn->op->name);
  if (src && src->requires_grad)
    return em_error(EM_ERR_AUTOGRAD,
                    "%s: the source (%s) requires grad, but other tensors share the destination's "
                    "memory (views, detach(), or an op saved it): the in-place op cannot be recorded; "
                    "use the out-of-place op, or grad mode off", op, em__desc(src, d, sizeof d));
  return EM_OK;
}

/* An expanded view has several elements in one memory location: writing
** it would make the result depend on the order of the writes. */
static em_status check_writable(const char *op, const em_tensor *dst) {
  char d[200];
  for (int i = 0; i < dst->ndim; i++)
    if (dst->shape[i] > 1 && dst->stride[i] == 0)
      return em_error(EM_ERR_ARG,
                      "%s: the destination (%s) is an expanded view whose elements share memory "
                      "(dim %d has stride 0); clone it first", op, em__desc(dst, d, sizeof d), i + 1);
  return EM_OK;
}

/* src must broadcast to exactly dst's shape. */
static em_status check_bcast_to(const char *op, const em_tensor *dst, const em_tensor *src) {
  int nd;
  int64_t shape[EM_MAX_DIMS];
  char a[160], b[160];
  em_status s = em__broadcast_shape(op, src->ndim, src->shape, dst->ndim, dst->shape, &nd, shape);
  if (s || nd != dst->ndim || memcmp(shape, dst->shape, (size_t)nd * sizeof shape[0]) != 0)
    return em_error(EM_ERR_SHAPE, "%s: source of shape %s cannot be broadcast to the destination's %s",
                    op, em_shape_str(src->ndim, src->shape, a, sizeof a),
                    em_shape_str(dst->ndim, dst->shape, b, sizeof b));
  return EM_OK;
}

/* A source that shares dst's storage is copied first, so that writing dst
** cannot change values still to be read. *out is a new reference. */
static em_status detach_source(em_tensor *dst, em_tensor *src, em_tensor **out) {
  if (src->storage != dst->storage) {
    *out = em_retain(src);
    return EM_OK;
  }
  return em__copy_of(out, src, "in-place");
}

em_status em_copy_(em_tensor *dst, em_tensor *src) {
  if (!dst || !src) return em_error(EM_ERR_ARG, "copy_: NULL argument");
  if (records_inplace(dst, src)) { /* dst = src, cast and broadcast, a fresh copy */
    EM_TRY(check_writable("copy_", dst));
    EM_TRY(check_bcast_to("copy_", dst, src));
    em_tensor *c = NULL, *e = NULL, *v = NULL;
    em_status s = src->dtype != dst->dtype ? em_to_dtype(&c, src, dst->dtype) : (c = em_retain(src), EM_OK);
    if (!s && !em_device_eq(c->device, dst->device)) {
      em_tensor *m = NULL;
      s = em_to_device(&m, c, dst->device);
      em_release(c);
      c = m;
    }
    if (!s) s = em_expand(&e, c, dst->ndim, dst->shape);
    if (!s) s = em_clone(&v, e);
    em_release(c), em_release(e);
    return s ? s : record_inplace("copy_", dst, v);
  }
  EM_TRY(check_inplace("copy_", dst, src));
  EM_TRY(check_writable("copy_", dst));
  em_tensor_written(dst);
  EM_TRY(check_bcast_to("copy_", dst, src));
  em_tensor *s1, *s2;
  if (!em_device_eq(src->device, dst->device))
    EM_TRY(em_to_device(&s1, src, dst->device));
  else
    s1 = em_retain(src);
  em_status s = detach_source(dst, s1, &s2);
  em_release(s1);
  if (s) return s;
  em_kview kd, ks;
  em_kview_of(dst, &kd);
  em__kview_bcast(s2, dst->ndim, dst->shape, &ks);
  s = em__be(dst)->copy(dst->device.index, &kd, &ks);
  em_release(s2);
  return s ? em__kernel_fail("copy_", s) : EM_OK;
}

em_status em_fill_(em_tensor *dst, double value) {
  if (!dst) return em_error(EM_ERR_ARG, "fill_: NULL argument");
  if (records_inplace(dst, NULL)) { /* dst = value everywhere: old values get a zero gradient */
    EM_TRY(check_writable("fill_", dst));
    em_tensor *all = NULL, *v = NULL;
    em_status s = em_full(&all, dst->ndim, dst->shape, 1, EM_BOOL, dst->device);
    if (!s) s = em_masked_fill(&v, dst, all, value);
    em_release(all);
    return s ? s : record_inplace("fill_", dst, v);
  }
  EM_TRY(check_inplace("fill_", dst, NULL));
  EM_TRY(check_writable("fill_", dst));
  em_tensor_written(dst);
  em_kview kd;
  em_kview_of(dst, &kd);
  em_status s = em__be(dst)->fill(dst->device.index, &kd, value);
  return s ? em__kernel_fail("fill_", s) : EM_OK;
}

/* Copies a contiguous result into dst (which was not contiguous). */
static em_status copy_back(const char *op, em_tensor *dst, em_tensor *tmp) {
  em_kview kd, ks;
  em_kview_of(dst, &kd);
  em_kview_of(tmp, &ks);
  em_status s = em__be(dst)->copy(dst->device.index, &kd, &ks);
  return s ? em__kernel_fail(op, s) : EM_OK;
}

em_status em_add_(em_tensor *dst, em_tensor *src, double alpha) {
  if (!dst || !src) return em_error(EM_ERR_ARG, "add_: NULL argument");
  if (records_inplace(dst, src)) { /* dst = dst + alpha * src */
    EM_TRY(check_writable("add_", dst));
    EM_TRY(check_bcast_to("add_", dst, src));
    em_tensor *b = NULL, *v = NULL;
    em_status s = alpha != 1.0 ? em_binary_scalar(&b, EM_MUL, src, alpha) : (b = em_retain(src), EM_OK);
    if (!s) s = em_binary(&v, EM_ADD, dst, b);
    em_release(b);
    return s ? s : record_inplace("add_", dst, v);
  }
  EM_TRY(check_inplace("add_", dst, src));
  EM_TRY(check_writable("add_", dst));
  em_tensor_written(dst);
  EM_TRY(check_bcast_to("add_", dst, src));
  em_tensor *u, *b, *scaled = NULL, *tmp = NULL;
  if (src->dtype != dst->dtype && src->ndim != 0) {
    char a1[200], a2[200];
    return em_error(EM_ERR_DTYPE, "add_: dtype mismatch: %s vs %s", em__dt_shape(dst, a1, sizeof a1),
                    em__dt_shape(src, a2, sizeof a2));
  }
  EM_TRY(em__unify("add_", dst, src, &u, &b));
  em_release(u); /* dst itself: unify leaves non-0-d operands alone */
  /* two bools add as PyTorch's, a logical or (a zero alpha adds nothing) */
  bool bools = dst->dtype == EM_BOOL && b->dtype == EM_BOOL;
  if (bools && alpha == 0.0) {
    em_release(b);
    return EM_OK;
  }
  em_status s = bools ? EM_OK : em__binary_check(EM_ADD, dst, b);
  if (!s && alpha != 1.0 && !bools) {
    s = em_binary_scalar(&scaled, EM_MUL, b, alpha);
    if (!s) em_release(b), b = scaled;
  }
  if (!s && b->storage == dst->storage) {
    s = detach_source(dst, b, &scaled);
    if (!s) em_release(b), b = scaled;
  }
  if (s) {
    em_release(b);
    return s;
  }
  em_kview ky, ka, kb;
  em_kview_of(dst, &ka);
  em__kview_bcast(b, dst->ndim, dst->shape, &kb);
  if (em_is_contiguous(dst)) {
    ky = ka; /* out aliases a element for element, which kernels allow */
  } else {
    s = em__new(&tmp, dst->ndim, dst->shape, dst->dtype, dst->device, "add_");
    if (!s) em_kview_of(tmp, &ky);
  }
  if (!s && (s = em__be(dst)->binary(dst->device.index, bools ? EM_OR : EM_ADD, &ky, &ka, &kb)))
    s = em__kernel_fail("add_", s);
  if (!s && tmp) s = copy_back("add_", dst, tmp);
  em_release(tmp);
  em_release(b);
  return s;
}

em_status em_mul_scalar_(em_tensor *dst, double s) {
  if (!dst) return em_error(EM_ERR_ARG, "mul_scalar_: NULL argument");
  if (records_inplace(dst, NULL)) { /* dst = dst * s */
    EM_TRY(check_writable("mul_", dst));
    em_tensor *v = NULL;
    EM_TRY(em_binary_scalar(&v, EM_MUL, dst, s));
    return record_inplace("mul_", dst, v);
  }
  EM_TRY(check_inplace("mul_", dst, NULL));
  EM_TRY(check_writable("mul_", dst));
  em_tensor_written(dst);
  em_tensor *y;
  if (!em_dtype_is_float(dst->dtype) || !em_is_contiguous(dst)) {
    /* Out of place, then back: not a hot path. */
    EM_TRY(em_binary_scalar(&y, EM_MUL, dst, s));
    em_status st = copy_back("mul_", dst, y);
    em_release(y);
    return st;
  }
  em_kview k;
  em__kview_flat(dst, em_numel(dst), &k);
  em_status st = em__be(dst)->unary(dst->device.index, EM_AFFINE, &k, &k, em__as_dtype(dst->dtype, s), -0.0); /* + -0.0 keeps 0 * -1 = -0 */
  return st ? em__kernel_fail("mul_", st) : EM_OK;
}
