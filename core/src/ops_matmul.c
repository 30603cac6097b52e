/*
** ops_matmul.c -- matmul with torch.matmul's semantics, and bmm.
**
** Every product is one call to the backend's batched gemm. An operand is
** read in place when its matrices are row-major or column-major (a
** transposed view is just gemm's transpose flag) and its batch dims step
** through memory with one stride (0 for a broadcast operand); otherwise it
** is copied. A batched left operand times a plain matrix, the Linear-layer
** case, becomes one tall gemm.
*/
#include "internal.h"

/* How gemm reads one operand. */
typedef struct gemm_operand {
  em_tensor *hold; /* keeps a copy alive, or NULL when reading the tensor itself */
  const void *data;
  bool trans;
  int64_t ld, bstride;
} gemm_operand;

static int64_t max1(int64_t v) { return v > 1 ? v : 1; }

/* t is seen as [batch..., r, c] with its batch dims right-aligned against
** the broadcast batch shape (nbatch, bshape). True when gemm can read it
** as it is. */
static bool gemm_layout(const em_tensor *t, int nbatch, const int64_t *bshape, gemm_operand *g) {
  int nd = t->ndim, tb = nd - 2;
  int64_t r = t->shape[nd - 2], c = t->shape[nd - 1];
  int64_t sr = t->stride[nd - 2], sc = t->stride[nd - 1];
  if ((c <= 1 || sc == 1) && (r <= 1 || sr >= max1(c))) {
    g->trans = false;
    g->ld = r <= 1 ? max1(c) : sr;
  } else if ((r <= 1 || sr == 1) && (c <= 1 || sc >= max1(r))) {
    g->trans = true;
    g->ld = c <= 1 ? max1(r) : sc;
  } else {
    return false;
  }
  /* One stride must walk all the batch dims that are not 1. */
  int64_t step = 0, expect = -1;
  for (int i = nbatch - 1; i >= 0; i--) {
    if (bshape[i] == 1) continue;
    int j = i - (nbatch - tb);
    int64_t st = j < 0 || t->shape[j] == 1 ? 0 : t->stride[j];
    if (expect < 0)
      step = st;
    else if (st != expect)
      return false;
    expect = st * bshape[i];
  }
  g->bstride = step;
  g->data = em_data(t);
  return true;
}

/* Fills g for t, copying t when its layout does not suit gemm: first to
** contiguous, then, if its batch dims still do not step evenly (a partly
** broadcast batch), expanded to the full batch shape. */
static em_status gemm_operand_of(const char *op, em_tensor *t, int nbatch, const int64_t *bshape,
                                 gemm_operand *g) {
  g->hold = NULL;
  if (gemm_layout(t, nbatch, bshape, g)) return EM_OK;
  em_tensor *c;
  EM_TRY(em__contig(&c, t));
  if (gemm_layout(c, nbatch, bshape, g)) {
    g->hold = c;
    return EM_OK;
  }
  em_release(c);
  int64_t shape[EM_MAX_DIMS];
  int nd = nbatch + 2;
  memcpy(shape, bshape, (size_t)nbatch * sizeof *shape);
  shape[nbatch] = t->shape[t->ndim - 2];
  shape[nbatch + 1] = t->shape[t->ndim - 1];
  EM_TRY(em__new(&c, nd, shape, t->dtype, t->device, op));
  em_kview dst, src;
  em_kview_of(c, &dst);
  em__kview_bcast(t, nd, shape, &src);
  em_status s = em__be(t)->copy(t->device.index, &dst, &src);
  if (s || !gemm_layout(c, nbatch, bshape, g)) {
    em_release(c);
    return s ? em__kernel_fail(op, s) : em_error(EM_ERR_BACKEND, "%s: internal layout error", op);
  }
  g->hold = c;
  return EM_OK;
}

/* A 1-d operand as a matrix: [1, k] on the left, [k, 1] on the right. */
static em_status promote(em_tensor *x, bool left, em_tensor **out) {
  if (x->ndim >= 2) {
    *out = em_retain(x);
    return EM_OK;
  }
  int64_t k = x->shape[0], st = x->stride[0];
  int64_t shape[2] = {left ? 1 : k, left ? k : 1};
  int64_t stride[2] = {left ? k * st : st, left ? st : 1};
  return em__alias(out, x, 2, shape, stride, x->offset);
}

/* A view with the last two dims swapped (no autograd; for backward). */
static em_status swap_last(em_tensor *x, em_tensor **out) {
  int64_t shape[EM_MAX_DIMS], stride[EM_MAX_DIMS];
  int n = x->ndim;
  memcpy(shape, x->shape, (size_t)n * sizeof *shape);
  memcpy(stride, x->stride, (size_t)n * sizeof *stride);
  shape[n - 2] = x->shape[n - 1], shape[n - 1] = x->shape[n - 2];
  stride[n - 2] = x->stride[n - 1], stride[n - 1] = x->stride[n - 2];
  return em__alias(out, x, n, shape, stride, x->offset);
}

/* t with a new shape of the same numel, through a contiguous copy if needed. */
static em_status reshaped(em_tensor *t, int ndim, const int64_t *shape, em_tensor **out) {
  em_tensor *c;
  int64_t stride[EM_MAX_DIMS], s = 1;
  for (int i = ndim - 1; i >= 0; i--) stride[i] = s, s *= max1(shape[i]);
  EM_TRY(em__contig(&c, t));
  em_status st = em__alias(out, c, ndim, shape, stride, c->offset);
  em_release(c);
  return st;
}

static em_status matmul_impl(const char *op, em_tensor **out, em_tensor *a, em_tensor *b);

/* saved: a, b. gA = gY @ B^T and gB = A^T @ gY, summed over the batch
** dims that the operand was broadcast along. */
static em_status matmul_backward(em_node *n, em_tensor *gy, em_tensor **gx) {
  em_tensor *a = n->saved[0], *b = n->saved[1];
  em_tensor *A = NULL, *B = NULL, *G = NULL, *T = NULL, *P = NULL, *R = NULL, *U = NULL, *V = NULL;
  int nbatch = gy->ndim - (a->ndim >= 2) - (b->ndim >= 2);
  int64_t shape[EM_MAX_DIMS], stride[EM_MAX_DIMS];
  em_status s;
  /* gy as [batch..., m, n]: put back the dims a 1-d operand dropped. */
  memcpy(shape, gy->shape, (size_t)nbatch * sizeof *shape);
  memcpy(stride, gy->stride, (size_t)nbatch * sizeof *stride);
  int j = nbatch;
  shape[nbatch] = a->ndim >= 2 ? a->shape[a->ndim - 2] : 1;
  stride[nbatch] = a->ndim >= 2 ? gy->stride[j++] : 1;
  shape[nbatch + 1] = b->ndim >= 2 ? b->shape[b->ndim - 1] : 1;
  stride[nbatch + 1] = b->ndim >= 2 ? gy->stride[j++] : 1;
  if ((s = promote(a, true, &A)) || (s = promote(b, false, &B)) ||
      (s = em__alias(&G, gy, nbatch + 2, shape, stride, gy->offset)))
    goto done;
  if (n->needs_grad[0]) {
    if ((s = swap_last(B, &T)) || (s = matmul_impl("matmul backward", &P, G, T)) ||
        (s = em_sum_to(&R, P, A->ndim, A->shape)) || (s = reshaped(R, a->ndim, a->shape, &gx[0])))
      goto done;
    em_release(T), em_release(P), em_release(R);
    T = P = R = NULL;
  }
  if (n->needs_grad[1]) {
    if (B->ndim == 2 && nbatch > 0) {
      /* b was shared by every batch (whose dims are all a's): one
      ** [k, rows] @ [rows, n] product instead of a batch and a sum. */
      int64_t k = A->shape[A->ndim - 1], nn = shape[nbatch + 1];
      int64_t rows = em__numel_of(nbatch + 1, shape);
      int64_t sa[2] = {rows, k}, sg[2] = {rows, nn};
      if ((s = reshaped(A, 2, sa, &U)) || (s = reshaped(G, 2, sg, &V)) || (s = swap_last(U, &T)) ||
          (s = matmul_impl("matmul backward", &P, T, V)))
        goto done;
    } else if ((s = swap_last(A, &T)) || (s = matmul_impl("matmul backward", &P, T, G))) {
      goto done;
    }
    if ((s = em_sum_to(&R, P, B->ndim, B->shape)) || (s = reshaped(R, b->ndim, b->shape, &gx[1])))
      goto done;
  }
done:
  em_release(A), em_release(B), em_release(G), em_release(T);
  em_release(P), em_release(R), em_release(U), em_release(V);
  return s;
}

static const em_opdef MATMUL_OP = {"matmul", matmul_backward, NULL};

static em_status check_operands(const char *op, const em_tensor *a, const em_tensor *b) {
  char sa[160], sb[160];
  if (a->ndim == 0 || b->ndim == 0)
    return em_error(EM_ERR_SHAPE, "%s: both operands need at least 1 dim, got shapes %s and %s", op,
                    em_shape_str(a->ndim, a->shape, sa, sizeof sa),
                    em_shape_str(b->ndim, b->shape, sb, sizeof sb));
  if (a->dtype != b->dtype)
    return em_error(EM_ERR_DTYPE, "%s: dtype mismatch: %s %s vs %s %s", op, em_dtype_name(a->dtype),
                    em_shape_str(a->ndim, a->shape, sa, sizeof sa), em_dtype_name(b->dtype),
                    em_shape_str(b->ndim, b->shape, sb, sizeof sb));
  if (!em_dtype_is_float(a->dtype) && a->dtype != EM_I64)
    return em_error(EM_ERR_DTYPE, "%s: expected float or int64 tensors, got %s %s and %s %s", op,
                    em_dtype_name(a->dtype), em_shape_str(a->ndim, a->shape, sa, sizeof sa),
                    em_dtype_name(b->dtype), em_shape_str(b->ndim, b->shape, sb, sizeof sb));
  return em__same_device(op, a, b);
}

/* int64 operands (torch multiplies them on the CPU; there is no integer
** gemm): y [batch..., m, n] summed over k as rank-1 products, a's column j
** [..., m, 1] times b's row j [..., 1, n] broadcast, so exact (wrapping on
** overflow as torch's). a as [..., m, k] and b as [..., k, n] (a 1-d one
** made a row or a column); *out is then viewed as oshape. */
static em_status matmul_int(const char *op, em_tensor **out, em_tensor *a, em_tensor *b, int nbatch,
                            const int64_t *bshape, int ond, const int64_t *oshape) {
  const int64_t k = a->shape[a->ndim - 1];
  int64_t sa[2] = {1, k}, sb[2] = {k, 1}, yshape[EM_MAX_DIMS + 2];
  em_tensor *A = NULL, *B = NULL, *y = NULL, *col = NULL, *row = NULL, *p = NULL;
  em_status s = a->ndim == 1 ? em_reshape(&A, a, 2, sa) : em_reshape(&A, a, a->ndim, a->shape);
  if (!s) s = b->ndim == 1 ? em_reshape(&B, b, 2, sb) : em_reshape(&B, b, b->ndim, b->shape);
  if (s) goto done;
  memcpy(yshape, bshape, (size_t)nbatch * sizeof *yshape);
  yshape[nbatch] = A->shape[A->ndim - 2];
  yshape[nbatch + 1] = B->shape[B->ndim - 1];
  if ((s = em_zeros(&y, nbatch + 2, yshape, EM_I64, a->device))) goto done;
  for (int64_t j = 0; j < k && !s; j++) {
    if (!(s = em_narrow(&col, A, A->ndim - 1, j, 1)) && !(s = em_narrow(&row, B, B->ndim - 2, j, 1)) &&
        !(s = em_binary(&p, EM_MUL, col, row)))
      s = em_add_(y, p, 1.0);
    em_release(col), em_release(row), em_release(p);
    col = row = p = NULL;
  }
  if (!s) s = em_reshape(out, y, ond, oshape);
done:
  (void)op; /* the inner ops' errors (out of memory) name themselves */
  em_release(A), em_release(B), em_release(y);
  return s;
}

static em_status matmul_impl(const char *op, em_tensor **out, em_tensor *a, em_tensor *b) {
  char sa[160], sb[160];
  if (!out || !a || !b) return em_error(EM_ERR_ARG, "%s: NULL argument", op);
  *out = NULL;
  EM_TRY(check_operands(op, a, b));
  int64_t m = a->ndim >= 2 ? a->shape[a->ndim - 2] : 1, k = a->shape[a->ndim - 1];
  int64_t kb = b->ndim >= 2 ? b->shape[b->ndim - 2] : b->shape[0];
  int64_t n = b->ndim >= 2 ? b->shape[b->ndim - 1] : 1;
  if (k != kb)
    return em_error(EM_ERR_SHAPE, "%s: shapes %s and %s cannot be multiplied (%lld != %lld)", op,
                    em_shape_str(a->ndim, a->shape, sa, sizeof sa),
                    em_shape_str(b->ndim, b->shape, sb, sizeof sb), (long long)k, (long long)kb);
  int na = a->ndim > 2 ? a->ndim - 2 : 0, nbb = b->ndim > 2 ? b->ndim - 2 : 0, nbatch;
  int64_t bshape[EM_MAX_DIMS], oshape[EM_MAX_DIMS];
  if (em__broadcast_shape(op, na, a->shape, nbb, b->shape, &nbatch, bshape))
    return em_error(EM_ERR_SHAPE, "%s: the batch dims of %s and %s cannot be broadcast", op,
                    em_shape_str(a->ndim, a->shape, sa, sizeof sa),
                    em_shape_str(b->ndim, b->shape, sb, sizeof sb));
  int ond = nbatch;
  memcpy(oshape, bshape, (size_t)nbatch * sizeof *oshape);
  if (a->ndim >= 2) oshape[ond++] = m;
  if (b->ndim >= 2) oshape[ond++] = n;
  if (a->dtype == EM_I64) return matmul_int(op, out, a, b, nbatch, bshape, ond, oshape);
  em_tensor *y, *A = NULL, *B = NULL;
  gemm_operand ga = {0}, gb = {0};
  EM_TRY(em__new(&y, ond, oshape, a->dtype, a->device, op));
  int64_t batch = em__numel_of(nbatch, bshape);
  em_status s = EM_OK;
  const em_backend *be = em__be(a);
  if (batch * m * n == 0) {
    /* nothing to compute */
  } else if (k == 0) {
    s = em_fill_(y, 0.0);
  } else if (!(s = promote(a, true, &A)) && !(s = promote(b, false, &B)) &&
             !(s = gemm_operand_of(op, A, nbatch, bshape, &ga)) &&
             !(s = gemm_operand_of(op, B, nbatch, bshape, &gb))) {
    int64_t rows = m;
    /* A batch of row-major matrices stacked evenly times one shared
    ** matrix is a single tall product. */
    if (batch > 1 && gb.bstride == 0 && !ga.trans &&
        (ga.bstride == m * ga.ld || (m == 1 && ga.bstride >= max1(k)))) {
      if (m == 1) ga.ld = ga.bstride;
      rows = m * batch;
      batch = 1;
    }
    s = be->gemm(a->device.index, a->dtype, ga.trans, gb.trans, rows, n, k, 1.0, ga.data, ga.ld,
                 ga.bstride, gb.data, gb.ld, gb.bstride, 0.0, em_data(y), max1(n), m * n, batch);
    if (s) s = em__kernel_fail(op, s);
  }
  em_release(ga.hold), em_release(gb.hold), em_release(A), em_release(B);
  em_tensor *in[2] = {a, b};
  if (!s && em_autograd_needed(2, in)) s = em_autograd_record(y, &MATMUL_OP, 2, in, 2, in, NULL);
  if (s) {
    em_release(y);
    return s;
  }
  *out = y;
  return EM_OK;
}

/* matmul and bmm run in the autocast dtype under autocast (autocast.c). */
static em_status matmul_autocast(const char *op, em_autocast_op ac_op, em_tensor **out,
                                 em_tensor *a, em_tensor *b) {
  if (!out || !a || !b) return em_error(EM_ERR_ARG, "%s: NULL argument", op);
  em_tensor *in[2] = {a, b}, *ac[2];
  EM_TRY(em__autocast_op(ac_op, 2, in, ac));
  em_status s = em__autocast_same_dtype(op, 2, in, ac);
  if (s == EM_OK) s = matmul_impl(op, out, ac[0], ac[1]);
  em_release(ac[0]);
  em_release(ac[1]);
  return s;
}

em_status em_matmul(em_tensor **out, em_tensor *a, em_tensor *b) {
  return matmul_autocast("matmul", EM_AC_MATMUL, out, a, b);
}

em_status em_bmm(em_tensor **out, em_tensor *a, em_tensor *b) {
  char sa[160], sb[160];
  if (!out || !a || !b) return em_error(EM_ERR_ARG, "bmm: NULL argument");
  *out = NULL;
  em_shape_str(a->ndim, a->shape, sa, sizeof sa);
  em_shape_str(b->ndim, b->shape, sb, sizeof sb);
  if (a->ndim != 3 || b->ndim != 3)
    return em_error(EM_ERR_SHAPE, "bmm: expected two 3-d tensors [B, n, m] and [B, m, p], got %s and %s",
                    sa, sb);
  if (a->shape[0] != b->shape[0])
    return em_error(EM_ERR_SHAPE, "bmm: batch sizes differ: %s and %s", sa, sb);
  return matmul_autocast("bmm", EM_AC_BMM, out, a, b);
}

/* ------------------------------------------------------------------ */
/* linear: y = x @ w^T + b (nn.Linear)                                 */
/* ------------------------------------------------------------------ */

/* x [..., k] as the matrix [rows, k], contiguous (a copy if it was not). */
static em_status rows_of(em_tensor *x, em_tensor **out) {
  const int64_t shape[2] = {em__numel_of(x->ndim - 1, x->shape), x->shape[x->ndim - 1]};
  return reshaped(x, 2, shape, out);
}

/* saved: x, w. dx = dy @ w, dw = dy^T @ x (as w is stored: [n, k], no
** transposed copy), db = the column sums of dy. */
static em_status linear_backward(em_node *n, em_tensor *gy, em_tensor **gx) {
  em_tensor *x = n->saved[0], *w = n->saved[1];
  const int64_t nout = w->shape[0];
  em_tensor *G = NULL, *X = NULL, *T = NULL, *P = NULL;
  em_status s;
  if ((s = rows_of(gy, &G))) goto done;
  if (n->needs_grad[0]) {
    if ((s = matmul_impl("linear backward", &P, G, w)) || (s = reshaped(P, x->ndim, x->shape, &gx[0])))
      goto done;
    em_release(P), P = NULL;
  }
  if (n->needs_grad[1]) {
    if ((s = rows_of(x, &X)) || (s = swap_last(G, &T)) || (s = matmul_impl("linear backward", &gx[1], T, X)))
      goto done;
  }
  if (n->n_inputs > 2 && n->needs_grad[2]) s = em_sum_to(&gx[2], G, 1, &nout);
done:
  em_release(G), em_release(X), em_release(T), em_release(P);
  return s;
}

static const em_opdef LINEAR_OP = {"linear", linear_backward, NULL};

static em_status linear_check(const em_tensor *x, const em_tensor *w, const em_tensor *b) {
  char sx[160], sw[160];
  if (w->ndim != 2)
    return em_error(EM_ERR_SHAPE, "linear: weight must be 2-d [out_features, in_features], got %s",
                    em_shape_str(w->ndim, w->shape, sw, sizeof sw));
  if (x->ndim < 1 || x->shape[x->ndim - 1] != w->shape[1])
    return em_error(EM_ERR_SHAPE, "linear: input %s does not end in in_features = %lld (weight %s)",
                    em_shape_str(x->ndim, x->shape, sx, sizeof sx), (long long)w->shape[1],
                    em_shape_str(w->ndim, w->shape, sw, sizeof sw));
  EM_TRY(check_operands("linear", x, w));
  if (!b) return EM_OK;
  if (b->ndim != 1 || b->shape[0] != w->shape[0])
    return em_error(EM_ERR_SHAPE, "linear: bias must be [out_features = %lld], got %s",
                    (long long)w->shape[0], em_shape_str(b->ndim, b->shape, sw, sizeof sw));
  return check_operands("linear", x, b);
}

/* The bias joins the product: given to a backend's gemm_bias (oneDNN adds
** it in the matmul's own pass), else the product's C (y starts as b and
** the gemm adds to it, beta = 1); either way no add pass over the whole
** output, and a bfloat16 output is rounded once, after both. */
static em_status linear_impl(em_tensor **out, em_tensor *x, em_tensor *w, em_tensor *b) {
  EM_TRY(linear_check(x, w, b));
  const int64_t k = w->shape[1], nout = w->shape[0], rows = em__numel_of(x->ndim - 1, x->shape);
  int64_t oshape[EM_MAX_DIMS];
  memcpy(oshape, x->shape, (size_t)x->ndim * sizeof *oshape);
  oshape[x->ndim - 1] = nout;
  em_tensor *y = NULL, *X = NULL, *bc = NULL;
  gemm_operand gw = {0};
  em_status s;
  if ((s = em__new(&y, x->ndim, oshape, x->dtype, x->device, "linear"))) return s;
  const em_backend *be = em__be(x);
  const int64_t yshape[2] = {rows, nout};
  const bool fused_bias = b && be->gemm_bias && k > 0;
  if (rows * nout == 0 || fused_bias) {
    /* nothing to compute, or the bias goes to gemm_bias */
  } else if (b) { /* every row of y starts as b */
    em_kview dst, src;
    em_kview_of(y, &dst);
    dst.ndim = 2, dst.shape[0] = rows, dst.shape[1] = nout, dst.stride[0] = nout, dst.stride[1] = 1;
    em__kview_bcast(b, 2, yshape, &src);
    if ((s = be->copy(x->device.index, &dst, &src))) s = em__kernel_fail("linear", s);
  } else if (k == 0) {
    s = em_fill_(y, 0.0);
  }
  if (!s && rows * nout > 0 && k > 0 && !(s = rows_of(x, &X)) &&
      !(s = gemm_operand_of("linear", w, 0, yshape, &gw)) &&
      !(fused_bias && (s = em_contiguous(&bc, b)))) {
    /* op(B) = w^T: w's own layout, read the other way */
    if (fused_bias)
      s = be->gemm_bias(x->device.index, x->dtype, false, !gw.trans, rows, nout, k, em_data(X), k,
                        gw.data, gw.ld, em_data(bc), em_data(y), nout);
    else
      s = be->gemm(x->device.index, x->dtype, false, !gw.trans, rows, nout, k, 1.0, em_data(X), k,
                   0, gw.data, gw.ld, 0, b ? 1.0 : 0.0, em_data(y), nout, 0, 1);
    if (s) s = em__kernel_fail("linear", s);
  }
  em_release(X), em_release(gw.hold), em_release(bc);
  em_tensor *in[3] = {x, w, b};
  const int n_in = b ? 3 : 2;
  if (!s && em_autograd_needed(n_in, in)) s = em_autograd_record(y, &LINEAR_OP, n_in, in, 2, in, NULL);
  if (s) {
    em_release(y);
    return s;
  }
  *out = y;
  return EM_OK;
}

/* Runs in the autocast dtype under autocast, as matmul (autocast.c). */
em_status em_linear(em_tensor **out, em_tensor *x, em_tensor *w, em_tensor *b) {
  if (!out || !x || !w) return em_error(EM_ERR_ARG, "linear: NULL argument");
  *out = NULL;
  em_tensor *in[3] = {x, w, b}, *ac[3];
  EM_TRY(em__autocast_op(EM_AC_MATMUL, 3, in, ac));
  em_status s = em__autocast_same_dtype("linear", 3, in, ac);
  if (s == EM_OK) s = linear_impl(out, ac[0], ac[1], ac[2]);
  for (int i = 0; i < 3; i++) em_release(ac[i]);
  return s;
}
