/*
** ops_elementwise.c -- unary and binary elementwise ops, where and
** masked_fill; the in-place ops are ops_inplace.c's.
**
** Operands of different dtypes are promoted as in PyTorch (em_result_type
** below): the higher category wins (bool < int64 < float), within floats
** the wider; a 0-d tensor or a number decides only when its category is
** higher than the other operand's. A 0-d tensor also moves to the other
** operand's device, so that `x * loss` works whatever x is. Two bools add
** and take the maximum as a logical or, multiply and take the minimum as an
** and, and divide in the default dtype (em_default_dtype); subtraction with a bool and negation of one
** are refused (all as PyTorch).
**
** em_binary is the hottest function of the library (every `a + b` in Lua
** lands here), so its common case -- same shape, same dtype, contiguous --
** does no broadcasting work and allocates nothing but the result.
*/
#include "internal.h"

#include <math.h>

/* ------------------------------------------------------------------ */
/* Names and dtype rules                                               */
/* ------------------------------------------------------------------ */

static const char *const UNARY_NAMES[EM_NUNARY] = {
#define EM_X_(e, name, needs_x, needs_y) [e] = name,
  EM_UNARY_LIST(EM_X_)
#undef EM_X_
};

static const char *const BINARY_NAMES[EM_NBINARY] = {
#define EM_X_(e, name) [e] = name,
  EM_BINARY_LIST(EM_X_)
#undef EM_X_
};

const char *em_unary_name(em_unary_op op) {
  return (unsigned)op < EM_NUNARY ? UNARY_NAMES[op] : "invalid unary op";
}

const char *em_binary_name(em_binary_op op) {
  return (unsigned)op < EM_NBINARY ? BINARY_NAMES[op] : "invalid binary op";
}

static bool is_compare(em_binary_op op) { return op >= EM_EQ && op <= EM_GE; }
static bool is_logical(em_binary_op op) { return op >= EM_AND && op <= EM_XOR; }
/* The arithmetic ops: a result of the operands' dtype, and a gradient. */
static bool is_arith(em_binary_op op) { return op <= EM_MINIMUM || op == EM_FMOD; }

/* "float32 [2, 3]", the way dtype messages show an operand. */
const char *em__dt_shape(const em_tensor *t, char *buf, size_t n) {
  char sh[160];
  snprintf(buf, n, "%s %s", em_dtype_name(t->dtype), em_shape_str(t->ndim, t->shape, sh, sizeof sh));
  return buf;
}

static em_status unary_check(em_unary_op op, const em_tensor *x) {
  char d[200];
  if ((unsigned)op >= EM_NUNARY) return em_error(EM_ERR_ARG, "unary: invalid op %d", (int)op);
  if (op == EM_NOT) {
    if (x->dtype == EM_BOOL) return EM_OK;
    return em_error(EM_ERR_DTYPE, "logical_not: expected a bool tensor, got %s",
                    em__dt_shape(x, d, sizeof d));
  }
  if (em_dtype_is_float(x->dtype) || (x->dtype == EM_I64 && em_unary_takes_int64(op))) return EM_OK;
  if (op == EM_NEG && x->dtype == EM_BOOL) /* PyTorch's words; Lua has logical_not for its `~` */
    return em_error(EM_ERR_DTYPE, "neg: Negation, the `-` operator, on a bool tensor is not supported. If "
                    "you are trying to invert a mask, use logical_not() instead (got %s)",
                    em__dt_shape(x, d, sizeof d));
  return em_error(EM_ERR_DTYPE, "%s: expected a float tensor%s, got %s", UNARY_NAMES[op],
                  em_unary_takes_int64(op) ? " or int64" : "", em__dt_shape(x, d, sizeof d));
}

/* a and b already share dt. */
em_status em__binary_check(em_binary_op op, const em_tensor *a, const em_tensor *b) {
  em_dtype dt = a->dtype;
  char da[200], db[200];
  if (is_compare(op)) return EM_OK;
  if (is_logical(op)) {
    if (dt == EM_BOOL) return EM_OK;
    return em_error(EM_ERR_DTYPE, "%s: expected bool tensors, got %s and %s", BINARY_NAMES[op],
                    em__dt_shape(a, da, sizeof da), em__dt_shape(b, db, sizeof db));
  }
  if (dt == EM_BOOL)
    return em_error(EM_ERR_DTYPE,
                    "%s: not supported on two bool tensors, got %s and %s "
                    "(bools add, multiply, divide and take maximum/minimum as PyTorch's; for the "
                    "rest convert either side to int64 or float)",
                    BINARY_NAMES[op], em__dt_shape(a, da, sizeof da), em__dt_shape(b, db, sizeof db));
  return EM_OK;
}

/* PyTorch refuses subtraction with a bool operand (a tensor or, for two
** bools, a Python bool), in these words; Lua's `~` and `^` are not
** tensor operators, so the advice names the functions. */
em_status em__bool_sub_check(const em_tensor *a, const em_tensor *b) {
  bool ba = a && a->dtype == EM_BOOL, bb = b && b->dtype == EM_BOOL;
  if (ba && bb)
    return em_error(EM_ERR_DTYPE, "sub: Subtraction, the `-` operator, with two bool tensors is not "
                    "supported. Use logical_xor() instead");
  if (ba || bb)
    return em_error(EM_ERR_DTYPE, "sub: Subtraction, the `-` operator, with a bool tensor is not "
                    "supported. If you are trying to invert a mask, use logical_not() instead");
  return EM_OK;
}

/* A one-dim view of all n elements of a contiguous tensor: kernels run it
** as one loop. */
void em__kview_flat(const em_tensor *t, int64_t n, em_kview *kv) {
  kv->data = em_data(t);
  kv->dtype = t->dtype;
  kv->ndim = 1;
  kv->shape[0] = n;
  kv->stride[0] = 1;
}

static bool same_shape(const em_tensor *a, const em_tensor *b) {
  if (a->ndim != b->ndim) return false;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i]) return false;
  return true;
}

/* The result dtype of a op b (torch.result_type): between two dimensioned
** tensors (or two 0-d ones) em_promote_types (dtype.c); a 0-d tensor
** against a dimensioned one decides only when its category is higher
** (int64 [n] * float64 [] is float64, float32 [n] * float64 [] is float32). */
em_dtype em_result_type(const em_tensor *a, const em_tensor *b) {
  if ((a->ndim == 0) != (b->ndim == 0)) {
    const em_tensor *z = a->ndim == 0 ? a : b, *d = a->ndim == 0 ? b : a;
    return em_can_cast(z->dtype, d->dtype) ? d->dtype : z->dtype;
  }
  return em_promote_types(a->dtype, b->dtype);
}

/* Gives a and b a common dtype (em_result_type) and device (a 0-d operand
** moves to the other's). *pa and *pb are new references. */
em_status em__unify(const char *op, em_tensor *a, em_tensor *b, em_tensor **pa, em_tensor **pb) {
  em_tensor *x = em_retain(a), *y = em_retain(b), *t;
  em_status s = EM_OK;
  *pa = *pb = NULL;
  (void)op;
  if (x->dtype != y->dtype) {
    /* under autocast, bfloat16 with float32 computes in float32 (any shapes) */
    em_dtype dt = em__autocast_promotes(x->dtype, y->dtype) ? EM_F32 : em_result_type(x, y);
    if (x->dtype != dt && (s = em_to_dtype(&t, x, dt)) == EM_OK) em_release(x), x = t;
    if (s == EM_OK && y->dtype != dt && (s = em_to_dtype(&t, y, dt)) == EM_OK) em_release(y), y = t;
  }
  if (s == EM_OK && !em_device_eq(x->device, y->device)) {
    if (x->ndim == 0 && y->ndim != 0) {
      s = em_to_device(&t, x, y->device);
      if (s == EM_OK) em_release(x), x = t;
    } else if (y->ndim == 0 && x->ndim != 0) {
      s = em_to_device(&t, y, x->device);
      if (s == EM_OK) em_release(y), y = t;
    } else {
      s = em__same_device(op, x, y);
    }
  }
  if (s != EM_OK) {
    em_release(x);
    em_release(y);
    return s;
  }
  *pa = x;
  *pb = y;
  return EM_OK;
}

/* Reduces a gradient shaped like the output to input i's shape. Takes g. */
static em_status grad_to_input(em_node *n, int i, em_tensor *g, em_tensor **gx) {
  if (!g) return EM_OK;
  em_status s = em_sum_to(&gx[i], g, n->in_ndim[i], n->in_shape[i]);
  em_release(g);
  return s;
}

/* ------------------------------------------------------------------ */
/* Unary                                                               */
/* ------------------------------------------------------------------ */

typedef struct unary_ctx { double alpha, beta; } unary_ctx;

static em_status unary_backward(em_node *n, em_tensor *gy, em_tensor **gx);

/* One opdef per op, so that the backward finds its op from the pointer. */
static const em_opdef UNARY_DEFS[EM_NUNARY] = {
#define EM_X_(e, name, needs_x, needs_y) [e] = {name, unary_backward, free},
  EM_UNARY_LIST(EM_X_)
#undef EM_X_
};

/* The kernel wants x, y and gy contiguous; saved views may not be. */
static em_status unary_backward(em_node *n, em_tensor *gy, em_tensor **gx) {
  em_unary_op op = (em_unary_op)(n->op - UNARY_DEFS);
  const unary_ctx *c = n->ctx;
  em_tensor *x = NULL, *y = NULL, *g = NULL, *r = NULL;
  em_status s;
  if (!n->needs_grad[0]) return EM_OK;
  if ((s = em__contig(&x, n->saved[0])) || (s = em__contig(&y, n->saved[1])) ||
      (s = em__contig(&g, gy)) ||
      (s = em__new(&r, x->ndim, x->shape, x->dtype, x->device, UNARY_NAMES[op])))
    goto done;
  s = em__be(x)->unary_backward(x->device.index, op, x->dtype, em_numel(x), em_data(r), em_data(g),
                                em_data(x), em_data(y), c->alpha, c->beta);
  if (s) {
    s = em__kernel_fail(UNARY_NAMES[op], s);
    goto done;
  }
  gx[0] = r;
  r = NULL;
done:
  em_release(x);
  em_release(y);
  em_release(g);
  em_release(r);
  return s;
}

em_status em_unary(em_tensor **out, em_unary_op op, em_tensor *x, double alpha, double beta) {
  if (!out || !x) return em_error(EM_ERR_ARG, "unary: NULL argument");
  *out = NULL;
  EM_TRY(unary_check(op, x));
  em_tensor *y;
  EM_TRY(em__new(&y, x->ndim, x->shape, x->dtype, x->device, UNARY_NAMES[op]));
  em_kview ky, kx;
  if (em_is_contiguous(x)) {
    int64_t n = em_numel(x);
    em__kview_flat(y, n, &ky);
    em__kview_flat(x, n, &kx);
  } else {
    em_kview_of(y, &ky);
    em_kview_of(x, &kx);
  }
  em_status s = em__be(x)->unary(x->device.index, op, &ky, &kx, alpha, beta);
  if (s) {
    em_release(y);
    return em__kernel_fail(UNARY_NAMES[op], s);
  }
  if (op != EM_NOT && x->requires_grad && em_grad_enabled()) {
    unary_ctx *c = malloc(sizeof *c);
    if (!c) {
      em_release(y);
      return em_error(EM_ERR_OOM, "%s: out of memory recording autograd", UNARY_NAMES[op]);
    }
    c->alpha = alpha;
    c->beta = beta;
    em_tensor *saved[2] = {x, y};
    s = em_autograd_record(y, &UNARY_DEFS[op], 1, &x, 2, saved, c);
    if (s) {
      em_release(y);
      return s;
    }
  }
  *out = y;
  return EM_OK;
}

/* ------------------------------------------------------------------ */
/* Binary: backward                                                    */
/* ------------------------------------------------------------------ */

static em_status add_backward(em_node *n, em_tensor *gy, em_tensor **gx) {
  em_status s = EM_OK;
  if (n->needs_grad[0]) s = em_sum_to(&gx[0], gy, n->in_ndim[0], n->in_shape[0]);
  if (!s && n->needs_grad[1]) s = em_sum_to(&gx[1], gy, n->in_ndim[1], n->in_shape[1]);
  return s;
}

static em_status sub_backward(em_node *n, em_tensor *gy, em_tensor **gx) {
  em_status s = EM_OK;
  em_tensor *t;
  if (n->needs_grad[0]) s = em_sum_to(&gx[0], gy, n->in_ndim[0], n->in_shape[0]);
  if (!s && n->needs_grad[1] && !(s = em_unary(&t, EM_NEG, gy, 0, 0))) s = grad_to_input(n, 1, t, gx);
  return s;
}

/* saved: a, b */
static em_status mul_backward(em_node *n, em_tensor *gy, em_tensor **gx) {
  em_status s = EM_OK;
  em_tensor *t;
  if (n->needs_grad[0] && !(s = em_mul(&t, gy, n->saved[1]))) s = grad_to_input(n, 0, t, gx);
  if (!s && n->needs_grad[1] && !(s = em_mul(&t, gy, n->saved[0]))) s = grad_to_input(n, 1, t, gx);
  return s;
}

/* saved: a, b. d/da = 1/b, d/db = -a/b^2 (PyTorch's formulas). */
static em_status div_backward(em_node *n, em_tensor *gy, em_tensor **gx) {
  em_tensor *a = n->saved[0], *b = n->saved[1], *t = NULL, *u = NULL, *v = NULL, *w = NULL;
  em_status s = EM_OK;
  if (n->needs_grad[0] && !(s = em_div(&t, gy, b))) s = grad_to_input(n, 0, t, gx);
  if (s || !n->needs_grad[1]) return s;
  t = NULL;
  if (!(s = em_mul(&t, gy, a)) && !(s = em_mul(&u, b, b)) && !(s = em_div(&v, t, u)) &&
      !(s = em_unary(&w, EM_NEG, v, 0, 0)))
    s = grad_to_input(n, 1, w, gx);
  em_release(t), em_release(u), em_release(v);
  return s;
}

/* d(a^b)/da = b * a^(b-1), taken as 0 where b == 0 (PyTorch). */
static em_status pow_grad_base(em_tensor *a, em_tensor *b, em_tensor *gy, em_tensor *zero,
                               em_tensor **out) {
  em_tensor *bm1 = NULL, *p = NULL, *d = NULL, *g = NULL, *b0 = NULL;
  em_status s;
  if (!(s = em_binary_scalar(&bm1, EM_SUB, b, 1.0)) && !(s = em_binary(&p, EM_POW, a, bm1)) &&
      !(s = em_mul(&d, p, b)) && !(s = em_mul(&g, d, gy)) &&
      !(s = em_binary_scalar(&b0, EM_EQ, b, 0.0)))
    s = em_where(out, b0, zero, g);
  em_release(bm1), em_release(p), em_release(d), em_release(g), em_release(b0);
  return s;
}

/* d(a^b)/db = a^b * log(a), taken as 0 where a == 0 and b >= 0 (PyTorch,
** instead of 0 * -inf). */
static em_status pow_grad_exponent(em_tensor *a, em_tensor *b, em_tensor *y, em_tensor *gy,
                                   em_tensor *zero, em_tensor **out) {
  em_tensor *la = NULL, *d = NULL, *g = NULL, *a0 = NULL, *bpos = NULL, *mask = NULL;
  em_status s;
  if (!(s = em_unary(&la, EM_LOG, a, 0, 0)) && !(s = em_mul(&d, la, y)) &&
      !(s = em_mul(&g, d, gy)) && !(s = em_binary_scalar(&a0, EM_EQ, a, 0.0)) &&
      !(s = em_binary_scalar(&bpos, EM_GE, b, 0.0)) && !(s = em_binary(&mask, EM_AND, a0, bpos)))
    s = em_where(out, mask, zero, g);
  em_release(la), em_release(d), em_release(g), em_release(a0), em_release(bpos), em_release(mask);
  return s;
}

/* saved: a, b, y = a^b */
static em_status pow_backward(em_node *n, em_tensor *gy, em_tensor **gx) {
  em_tensor *a = n->saved[0], *b = n->saved[1], *y = n->saved[2], *zero, *t;
  em_status s = EM_OK;
  EM_TRY(em__scalar(&zero, 0.0, a->dtype, a->device));
  if (n->needs_grad[0] && !(s = pow_grad_base(a, b, gy, zero, &t))) s = grad_to_input(n, 0, t, gx);
  if (!s && n->needs_grad[1] && !(s = pow_grad_exponent(a, b, y, gy, zero, &t)))
    s = grad_to_input(n, 1, t, gx);
  em_release(zero);
  return s;
}

/* saved: a, b. As PyTorch: ties split the gradient in half. `lose_a` is
** the comparison under which a was not chosen (LT for maximum). */
static em_status extremum_backward(em_node *n, em_tensor *gy, em_tensor **gx, em_binary_op lose_a) {
  em_tensor *a = n->saved[0], *b = n->saved[1], *half = NULL, *eq = NULL, *g = NULL;
  em_status s;
  if ((s = em_binary_scalar(&half, EM_MUL, gy, 0.5)) || (s = em_binary(&eq, EM_EQ, a, b)) ||
      (s = em_where(&g, eq, half, gy)))
    goto done;
  em_binary_op lose[2] = {lose_a, lose_a == EM_LT ? EM_GT : EM_LT};
  for (int i = 0; i < 2 && !s; i++) {
    em_tensor *m = NULL, *t = NULL;
    if (!n->needs_grad[i]) continue;
    if (!(s = em_binary(&m, lose[i], a, b)) && !(s = em_masked_fill(&t, g, m, 0.0)))
      s = grad_to_input(n, i, t, gx);
    em_release(m);
  }
done:
  em_release(half);
  em_release(eq);
  em_release(g);
  return s;
}

static em_status maximum_backward(em_node *n, em_tensor *gy, em_tensor **gx) {
  return extremum_backward(n, gy, gx, EM_LT);
}
static em_status minimum_backward(em_node *n, em_tensor *gy, em_tensor **gx) {
  return extremum_backward(n, gy, gx, EM_GT);
}

/* float32 with bfloat16 in one kernel (binary_mixed below): each input's
** gradient in its own dtype, as the cast's backward would give it. */
static em_status mixed_backward(em_node *n, em_tensor *gy, em_tensor **gx);
static const em_opdef MIXED_DEFS[2] = {{"add", mixed_backward, NULL}, {"sub", mixed_backward, NULL}};

static em_status mixed_backward(em_node *n, em_tensor *gy, em_tensor **gx) {
  const bool sub = n->op == &MIXED_DEFS[1];
  for (int i = 0; i < 2; i++) {
    if (!n->needs_grad[i]) continue;
    em_tensor *g = NULL, *c = NULL;
    em_status s = i == 1 && sub ? em_unary(&g, EM_NEG, gy, 0, 0) : (g = em_retain(gy), EM_OK);
    if (!s && g->dtype != n->in_dtype[i]) {
      s = em_to_dtype(&c, g, n->in_dtype[i]);
      em_release(g), g = c;
    }
    if (s) return s;
    gx[i] = g;
  }
  return EM_OK;
}

/* saved: a, b. d/da = 1, d/db = -trunc(a / b) (PyTorch's formulas). */
static em_status fmod_backward(em_node *n, em_tensor *gy, em_tensor **gx) {
  em_tensor *q = NULL, *t = NULL, *u = NULL, *w = NULL;
  em_status s = EM_OK;
  if (n->needs_grad[0]) s = em_sum_to(&gx[0], gy, n->in_ndim[0], n->in_shape[0]);
  if (s || !n->needs_grad[1]) return s;
  if (!(s = em_div(&q, n->saved[0], n->saved[1])) && !(s = em_unary(&t, EM_TRUNC, q, 0, 0)) &&
      !(s = em_mul(&u, gy, t)) && !(s = em_unary(&w, EM_NEG, u, 0, 0)))
    s = grad_to_input(n, 1, w, gx);
  em_release(q), em_release(t), em_release(u);
  return s;
}

static const em_opdef BINARY_DEFS[EM_NBINARY] = {
  [EM_ADD] = {"add", add_backward, NULL},
  [EM_SUB] = {"sub", sub_backward, NULL},
  [EM_MUL] = {"mul", mul_backward, NULL},
  [EM_DIV] = {"div", div_backward, NULL},
  [EM_POW] = {"pow", pow_backward, NULL},
  [EM_MAXIMUM] = {"maximum", maximum_backward, NULL},
  [EM_MINIMUM] = {"minimum", minimum_backward, NULL},
  [EM_FMOD] = {"fmod", fmod_backward, NULL},
};

/* ------------------------------------------------------------------ */
/* Binary: forward                                                     */
/* ------------------------------------------------------------------ */

static em_status binary_record(em_tensor *y, em_binary_op op, em_tensor *a, em_tensor *b) {
  em_tensor *in[2] = {a, b}, *saved[3] = {a, b, y};
  int n_saved = op == EM_ADD || op == EM_SUB ? 0 : op == EM_POW ? 3 : 2;
  /* fmod needs a and b only for b's gradient */
  if (op == EM_FMOD && !b->requires_grad) n_saved = 0;
  /* mul needs each operand only for the other's gradient (div: a only
  ** for b's); not keeping the rest alive saves memory, e.g. for x * const. */
  if ((op == EM_MUL || op == EM_DIV) && !b->requires_grad) saved[0] = NULL;
  if (op == EM_MUL && !a->requires_grad) saved[1] = NULL;
  return em_autograd_record(y, &BINARY_DEFS[op], 2, in, n_saved, saved, NULL);
}

/* a + b or a - b of one shape, one float32 and one bfloat16, both
** contiguous, on a backend whose binary takes them so (binary_mixed_bf16):
** the float32 result in one pass. Under autocast that is every residual
** of a block whose output is bfloat16. */
static bool mixed_bf16(em_binary_op op, const em_tensor *a, const em_tensor *b) {
  return (op == EM_ADD || op == EM_SUB) &&
         ((a->dtype == EM_F32 && b->dtype == EM_BF16) || (a->dtype == EM_BF16 && b->dtype == EM_F32)) &&
         em_device_eq(a->device, b->device) && same_shape(a, b) && em_is_contiguous(a) &&
         em_is_contiguous(b) && em__be(a)->binary_mixed_bf16;
}

static em_status binary_mixed(em_tensor **out, em_binary_op op, em_tensor *a, em_tensor *b) {
  em_tensor *y;
  EM_TRY(em__new(&y, a->ndim, a->shape, EM_F32, a->device, BINARY_NAMES[op]));
  const int64_t n = em_numel(a);
  em_kview ky, ka, kb;
  em__kview_flat(y, n, &ky);
  em__kview_flat(a, n, &ka);
  em__kview_flat(b, n, &kb);
  em_status s = em__be(a)->binary(a->device.index, op, &ky, &ka, &kb);
  if (s) s = em__kernel_fail(BINARY_NAMES[op], s);
  em_tensor *in[2] = {a, b};
  if (!s && (a->requires_grad || b->requires_grad) && em_grad_enabled())
    s = em_autograd_record(y, &MIXED_DEFS[op == EM_SUB], 2, in, 0, NULL, NULL);
  if (s) {
    em_release(y);
    return s;
  }
  *out = y;
  return EM_OK;
}

/* The ops past the first ones run only on a backend that announces them
** (an older or smaller backend's binary would not know the op). */
static em_status backend_runs(em_binary_op op, const em_tensor *a) {
  const em_backend *be = em__be(a);
  if (op == EM_FMOD && !be->binary_fmod)
    return em_error(EM_ERR_UNSUPPORTED, "fmod: the '%s' backend has no fmod kernel (em_backend.binary_fmod "
                    "is not set); move the tensors to the cpu first", be->name);
  return EM_OK;
}

/* The kernel call of em_binary, once a and b share dtype and device: the
** result of op's dtype (bool for comparisons) and shape (broadcast). */
static em_status binary_run(em_tensor **out, em_binary_op op, em_tensor *a, em_tensor *b) {
  em_dtype odt = is_compare(op) ? EM_BOOL : a->dtype;
  em_tensor *y;
  em_kview ky, ka, kb;
  EM_TRY(backend_runs(op, a));
  if (same_shape(a, b)) {
    EM_TRY(em__new(&y, a->ndim, a->shape, odt, a->device, BINARY_NAMES[op]));
    if (em_is_contiguous(a) && em_is_contiguous(b)) {
      int64_t n = em_numel(a);
      em__kview_flat(y, n, &ky);
      em__kview_flat(a, n, &ka);
      em__kview_flat(b, n, &kb);
    } else {
      em_kview_of(y, &ky);
      em_kview_of(a, &ka);
      em_kview_of(b, &kb);
    }
  } else {
    int nd;
    int64_t shape[EM_MAX_DIMS];
    EM_TRY(em__broadcast_shape(BINARY_NAMES[op], a->ndim, a->shape, b->ndim, b->shape, &nd, shape));
    EM_TRY(em__new(&y, nd, shape, odt, a->device, BINARY_NAMES[op]));
    em_kview_of(y, &ky);
    em__kview_bcast(a, nd, shape, &ka);
    em__kview_bcast(b, nd, shape, &kb);
  }
  em_status s = em__be(a)->binary(a->device.index, op, &ky, &ka, &kb);
  if (s) {
    em_release(y);
    return em__kernel_fail(BINARY_NAMES[op], s);
  }
  *out = y;
  return EM_OK;
}

em_status em_binary(em_tensor **out, em_binary_op op, em_tensor *a, em_tensor *b) {
  if (!out || !a || !b || (unsigned)op >= EM_NBINARY)
    return em_error(EM_ERR_ARG, "binary: NULL argument or invalid op %d", (int)op);
  *out = NULL;
  if (op == EM_SUB) EM_TRY(em__bool_sub_check(a, b));
  if (mixed_bf16(op, a, b)) return binary_mixed(out, op, a, b);
  if (a->dtype != b->dtype || a->device.backend != b->device.backend ||
      a->device.index != b->device.index) {
    em_tensor *ua, *ub;
    EM_TRY(em__unify(BINARY_NAMES[op], a, b, &ua, &ub));
    em_status s = em_binary(out, op, ua, ub);
    em_release(ua);
    em_release(ub);
    return s;
  }
  /* two bools, as PyTorch: add and maximum are or, mul and minimum and */
  if (a->dtype == EM_BOOL && (op == EM_ADD || op == EM_MAXIMUM)) return em_binary(out, EM_OR, a, b);
  if (a->dtype == EM_BOOL && (op == EM_MUL || op == EM_MINIMUM)) return em_binary(out, EM_AND, a, b);
  if (op == EM_DIV && (a->dtype == EM_I64 || a->dtype == EM_BOOL)) { /* true division, as PyTorch: the default dtype */
    em_tensor *fa = NULL, *fb = NULL;
    em_status s = em_to_dtype(&fa, a, em_default_dtype());
    if (!s) s = em_to_dtype(&fb, b, em_default_dtype());
    if (!s) s = em_binary(out, op, fa, fb);
    em_release(fa), em_release(fb);
    return s;
  }
  EM_TRY(em__binary_check(op, a, b));
  em_tensor *y;
  em_status s;
  EM_TRY(binary_run(&y, op, a, b));
  if (is_arith(op) && (a->requires_grad || b->requires_grad) && em_grad_enabled() &&
      (s = binary_record(y, op, a, b))) {
    em_release(y);
    return s;
  }
  *out = y;
  return EM_OK;
}

/* The int64 kernels' EM_DIV floors (ember_backend.h); em_binary keeps
** EM_DIV true division, as PyTorch's `/`, so this is its one caller. */
em_status em_floor_divide_int(em_tensor **out, em_tensor *a, em_tensor *b) {
  char da[200], db[200];
  if (!out || !a || !b) return em_error(EM_ERR_ARG, "floor_divide: NULL argument");
  *out = NULL;
  if (a->dtype != EM_I64 || b->dtype != EM_I64)
    return em_error(EM_ERR_DTYPE, "floor_divide: expected two int64 tensors, got %s and %s",
                    em__dt_shape(a, da, sizeof da), em__dt_shape(b, db, sizeof db));
  em_tensor *ua, *ub;
  EM_TRY(em__unify("floor_divide", a, b, &ua, &ub));
  em_status s = binary_run(out, EM_DIV, ua, ub);
  em_release(ua);
  em_release(ub);
  return s;
}

em_status em_add(em_tensor **out, em_tensor *a, em_tensor *b) { return em_binary(out, EM_ADD, a, b); }
em_status em_sub(em_tensor **out, em_tensor *a, em_tensor *b) { return em_binary(out, EM_SUB, a, b); }
em_status em_mul(em_tensor **out, em_tensor *a, em_tensor *b) { return em_binary(out, EM_MUL, a, b); }
em_status em_div(em_tensor **out, em_tensor *a, em_tensor *b) { return em_binary(out, EM_DIV, a, b); }

/* A scalar converted to a non-float dtype must survive the conversion:
** `int_tensor + 0.5` would silently become `+ 0` otherwise. */
static em_status scalar_fits(const char *op, const em_tensor *a, double s) {
  char d[200];
  if (a->dtype == EM_I64 && (s != floor(s) || fabs(s) > 9.2e18))
    return em_error(EM_ERR_DTYPE, "%s: scalar %g is not an integer, but the tensor is %s "
                    "(convert the tensor to a float dtype)", op, s, em__dt_shape(a, d, sizeof d));
  if (a->dtype == EM_BOOL && s != 0.0 && s != 1.0)
    return em_error(EM_ERR_DTYPE, "%s: scalar %g cannot be compared with a bool tensor %s "
                    "(use 0 or 1, or convert the tensor)", op, s, em__dt_shape(a, d, sizeof d));
  return EM_OK;
}

/* A float32 scalar rounded as PyTorch rounds it before the op, so that a
** kernel computing in double gives the float32 op's correctly rounded result. */
double em__as_dtype(em_dtype dt, double s) { return dt == EM_F32 ? (double)(float)s : s; }

/* A number promotes an int64 or bool tensor as a Python scalar does in
** PyTorch (a number with an integral value counts as an integer): int64
** with a fraction, or int64 divided, becomes the default dtype
** (em_default_dtype: float32 unless set); bool in arithmetic becomes int64
** (integral) or the default dtype, and bool compared with anything but 0 or
** 1 becomes int64. A number never changes a float dtype. Returns the dtype
** to convert a to, or a's own. */
static em_dtype scalar_promote(em_binary_op op, const em_tensor *a, double s) {
  bool integral = s == floor(s) && fabs(s) <= 9.2e18;
  const em_dtype fl = em_default_dtype();
  if (a->dtype == EM_I64 && (!integral || op == EM_DIV) && !is_logical(op)) return fl;
  if (a->dtype == EM_BOOL && is_arith(op)) return integral && op != EM_DIV ? EM_I64 : fl;
  if (a->dtype == EM_BOOL && is_compare(op) && s != 0.0 && s != 1.0) return integral ? EM_I64 : fl;
  return a->dtype;
}

static em_status scalar_op(em_tensor **out, em_binary_op op, em_tensor *a, double s, bool scalar_first);

/* The scalar as a 0-d tensor of a's dtype, then the tensor op. Used for
** the ops no unary kernel covers. */
static em_status scalar_via_tensor(em_tensor **out, em_binary_op op, em_tensor *a, double s,
                                   bool scalar_first) {
  em_tensor *t;
  em_dtype dt = scalar_promote(op, a, s);
  if (dt != a->dtype) {
    EM_TRY(em_to_dtype(&t, a, dt));
    em_status st = scalar_op(out, op, t, s, scalar_first);
    em_release(t);
    return st;
  }
  EM_TRY(scalar_fits(BINARY_NAMES[op], a, s));
  EM_TRY(em__scalar(&t, s, a->dtype, a->device));
  em_status st = scalar_first ? em_binary(out, op, t, a) : em_binary(out, op, a, t);
  em_release(t);
  return st;
}

/* For float tensors, x+s, x-s, x*s, x/s and x^s are unary kernels: no 0-d
** tensor to allocate (on a GPU, no host-to-device copy either). */
em_status em_binary_scalar(em_tensor **out, em_binary_op op, em_tensor *a, double s) {
  if (!out || !a || (unsigned)op >= EM_NBINARY)
    return em_error(EM_ERR_ARG, "binary: NULL argument or invalid op %d", (int)op);
  *out = NULL;
  if (op == EM_SUB) EM_TRY(em__bool_sub_check(a, NULL));
  if (em_dtype_is_float(a->dtype)) {
    double v = em__as_dtype(a->dtype, s);
    switch (op) {
      case EM_ADD: return em_unary(out, EM_AFFINE, a, 1.0, v);
      case EM_SUB: return em_unary(out, EM_AFFINE, a, 1.0, -v);
      /* x * s + (-0.0): adding -0.0 keeps every product, -0.0 included
      ** (0 * -1 is -0, as PyTorch); + 0.0 would turn -0 into +0 */
      case EM_MUL: return em_unary(out, EM_AFFINE, a, v, -0.0);
      case EM_DIV: {
        /* x * (1/s), as PyTorch's CUDA kernels do, unless 1/s overflows
        ** (s is subnormal) in the tensor's dtype. */
        double r = 1.0 / v;
        if (v == 0.0 || (a->dtype == EM_F64 ? isfinite(r) : isfinite((float)r)))
          return em_unary(out, EM_AFFINE, a, r, -0.0);
        break;
      }
      case EM_POW: return em_unary(out, EM_POW_SCALAR, a, v, 0.0);
      default: break;
    }
  }
  return scalar_via_tensor(out, op, a, s, false);
}

static em_status scalar_op(em_tensor **out, em_binary_op op, em_tensor *a, double s, bool scalar_first) {
  return scalar_first ? em_scalar_binary(out, op, s, a) : em_binary_scalar(out, op, a, s);
}

em_status em_scalar_binary(em_tensor **out, em_binary_op op, double s, em_tensor *a) {
  if (!out || !a || (unsigned)op >= EM_NBINARY)
    return em_error(EM_ERR_ARG, "binary: NULL argument or invalid op %d", (int)op);
  *out = NULL;
  if (op == EM_SUB) EM_TRY(em__bool_sub_check(NULL, a));
  if (em_dtype_is_float(a->dtype)) {
    double v = em__as_dtype(a->dtype, s);
    switch (op) {
      case EM_ADD: return em_unary(out, EM_AFFINE, a, 1.0, v);
      case EM_SUB: return em_unary(out, EM_AFFINE, a, -1.0, v);
      case EM_MUL: return em_unary(out, EM_AFFINE, a, v, -0.0);
      default: break;
    }
  }
  return scalar_via_tensor(out, op, a, s, true);
}

/* ------------------------------------------------------------------ */
/* where and masked_fill                                               */
/* ------------------------------------------------------------------ */

/* saved: cond. Each side gets gy where it was chosen, 0 elsewhere. */
static em_status where_backward(em_node *n, em_tensor *gy, em_tensor **gx) {
  em_tensor *cond = n->saved[0], *zero, *t;
  em_status s = EM_OK;
  EM_TRY(em__scalar(&zero, 0.0, gy->dtype, gy->device));
  if (n->needs_grad[0] && !(s = em_where(&t, cond, gy, zero))) s = grad_to_input(n, 0, t, gx);
  if (!s && n->needs_grad[1] && !(s = em_where(&t, cond, zero, gy))) s = grad_to_input(n, 1, t, gx);
  em_release(zero);
  return s;
}
static const em_opdef WHERE_OP = {"where", where_backward, NULL};

static em_status need_bool(const char *op, const em_tensor *t, const char *what) {
  char d[200];
  if (t->dtype == EM_BOOL) return EM_OK;
  return em_error(EM_ERR_DTYPE, "%s: %s must be bool, got %s", op, what, em__dt_shape(t, d, sizeof d));
}

/* out = cond ? a : b; the three broadcast; a, b share dtype and device. */
static em_status where_kernel(const char *op, em_tensor **out, em_tensor *cond, em_tensor *a,
                              em_tensor *b) {
  int n1, nd;
  int64_t s1[EM_MAX_DIMS], shape[EM_MAX_DIMS];
  EM_TRY(em__same_device(op, cond, a));
  EM_TRY(em__broadcast_shape(op, cond->ndim, cond->shape, a->ndim, a->shape, &n1, s1));
  EM_TRY(em__broadcast_shape(op, n1, s1, b->ndim, b->shape, &nd, shape));
  em_tensor *y;
  EM_TRY(em__new(&y, nd, shape, a->dtype, a->device, op));
  em_kview ky, kc, ka, kb;
  em_kview_of(y, &ky);
  em__kview_bcast(cond, nd, shape, &kc);
  em__kview_bcast(a, nd, shape, &ka);
  em__kview_bcast(b, nd, shape, &kb);
  em_status s = em__be(a)->where(a->device.index, &ky, &kc, &ka, &kb);
  if (s) {
    em_release(y);
    return em__kernel_fail(op, s);
  }
  *out = y;
  return EM_OK;
}

em_status em_where(em_tensor **out, em_tensor *cond, em_tensor *a, em_tensor *b) {
  if (!out || !cond || !a || !b) return em_error(EM_ERR_ARG, "where: NULL argument");
  *out = NULL;
  EM_TRY(need_bool("where", cond, "the condition"));
  em_tensor *ua, *ub, *y;
  EM_TRY(em__unify("where", a, b, &ua, &ub));
  em_status s = where_kernel("where", &y, cond, ua, ub);
  em_tensor *in[2] = {ua, ub};
  if (!s && em_autograd_needed(2, in) && (s = em_autograd_record(y, &WHERE_OP, 2, in, 1, &cond, NULL)))
    em_release(y);
  em_release(ua);
  em_release(ub);
  if (!s) *out = y;
  return s;
}

/* saved: mask */
static em_status masked_fill_backward(em_node *n, em_tensor *gy, em_tensor **gx) {
  em_tensor *t;
  if (!n->needs_grad[0]) return EM_OK;
  EM_TRY(em_masked_fill(&t, gy, n->saved[0], 0.0));
  return grad_to_input(n, 0, t, gx);
}
static const em_opdef MASKED_FILL_OP = {"masked_fill", masked_fill_backward, NULL};

em_status em_masked_fill(em_tensor **out, em_tensor *x, em_tensor *mask, double value) {
  if (!out || !x || !mask) return em_error(EM_ERR_ARG, "masked_fill: NULL argument");
  *out = NULL;
  EM_TRY(need_bool("masked_fill", mask, "the mask"));
  em_tensor *v, *y;
  EM_TRY(em__scalar(&v, value, x->dtype, x->device));
  em_status s = where_kernel("masked_fill", &y, mask, v, x);
  em_release(v);
  if (s) return s;
  if (em_autograd_needed(1, &x) && (s = em_autograd_record(y, &MASKED_FILL_OP, 1, &x, 1, &mask, NULL))) {
    em_release(y);
    return s;
  }
  *out = y;
  return EM_OK;
}
