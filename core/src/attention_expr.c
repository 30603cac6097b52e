/*
** attention_expr.c -- traced attention programs (ember_expr.h) on the
** core's side: checking a program and deriving what kernels need from it
** (which registers vary along the key axis, what the result depends on),
** a scalar reference evaluator, and the block map of a mask program.
**
** The block map classifies each cell of a grid of g x g (query, key)
** positions as empty, full or partial. It is FlexAttention's
** create_block_mask without its dense pass: the mask program is first
** evaluated on intervals (b, h fixed; q and k ranging over the cell), which
** proves most cells empty or full at the cost of one pass over the program
** -- a window, causal or prefix rule, a document mask whose ids are
** constant over the cell. Only cells the intervals cannot decide are
** evaluated element by element, stopping at the first element that
** disagrees with the first. A cell left partial is never wrong: the kernel
** evaluates the mask there. A cell where a load's indices may leave its
** captured tensor (the intervals cannot prove them inside) is evaluated
** element by element whatever the intervals decide, and an index out of
** range is the call's error: a cell classified empty on it would never
** reach the kernel's own check (probe 24: short document ids gave zero
** rows). In-range calls, whose index intervals are inside, pay nothing.
*/
#include "internal.h"
#include "ember_attention.h"

#include <math.h>
#include <pthread.h>

static bool bad_reg(int32_t r, int i) { return r < 0 || r >= i; }

/* k - q or q - k: the relative position, whatever q and k are apart */
static bool rel_pair(const em_xins *code, const em_xins *x) {
  const int a = code[x->arg[0]].op, b = code[x->arg[1]].op;
  return (a == EM_XOP_K && b == EM_XOP_Q) || (a == EM_XOP_Q && b == EM_XOP_K);
}

em_status em_expr_new(em_expr **out, int n, const em_xins *ins, int n_out, const int32_t *outs,
                      int n_grad, const int32_t *grad_load, int n_caps, const int *cap_ndim) {
  *out = NULL;
  if (n < 1 || n > EM_EXPR_MAX_INS || n_out < 1 || n_out > EM_EXPR_MAX_OUT || n_grad < 0 ||
      n_grad > EM_EXPR_MAX_OUT - 2 || n_caps < 0 || n_caps > EM_EXPR_MAX_CAPS)
    return em_error(EM_ERR_ARG, "attention program: %d instructions, %d outputs, %d gradients, %d captures",
                    n, n_out, n_grad, n_caps);
  /* a load reads cap_ndim[c] operands from arg[EM_EXPR_MAX_DIMS] */
  for (int c = 0; c < n_caps; c++)
    if (cap_ndim[c] < 0 || cap_ndim[c] > EM_EXPR_MAX_DIMS)
      return em_error(EM_ERR_ARG, "attention program: capture %d has %d dims (0 to %d)", c, cap_ndim[c],
                      EM_EXPR_MAX_DIMS);
  uint32_t *deps = calloc((size_t)n, sizeof *deps);
  em_expr *e = calloc(1, sizeof *e);
  em_xins *code = malloc((size_t)n * sizeof *code);
  uint8_t *kvar = malloc((size_t)n), *dvar = malloc((size_t)n);
  if (!deps || !e || !code || !kvar || !dvar) {
    free(deps), free(e), free(code), free(kvar), free(dvar);
    return em_error(EM_ERR_OOM, "attention program: out of memory");
  }
  memcpy(code, ins, (size_t)n * sizeof *code);
  em_status s = EM_OK;
  for (int i = 0; i < n && s == EM_OK; i++) {
    const em_xins *x = &code[i];
    int ar = em_xop_arity(x->op);
    if (ar == -2) {
      s = em_error(EM_ERR_ARG, "attention program: instruction %d has unknown op %d", i, x->op);
      break;
    }
    if (x->op == EM_XOP_LOAD) {
      if (x->cap < 0 || x->cap >= n_caps) {
        s = em_error(EM_ERR_ARG, "attention program: instruction %d loads capture %d of %d", i, x->cap, n_caps);
        break;
      }
      ar = cap_ndim[x->cap];
    }
    for (int a = 0; a < ar; a++)
      if (bad_reg(x->arg[a], i)) {
        s = em_error(EM_ERR_ARG, "attention program: instruction %d reads register %d", i, x->arg[a]);
        break;
      }
    if (s != EM_OK) break;
    switch (x->op) {
    case EM_XOP_B: deps[i] = EM_XDEP_B; break;
    case EM_XOP_H: deps[i] = EM_XDEP_H; break;
    case EM_XOP_Q: deps[i] = EM_XDEP_Q; break;
    case EM_XOP_K: deps[i] = EM_XDEP_K; break;
    case EM_XOP_S: deps[i] = EM_XDEP_S; break;
    default:
      if (x->op == EM_XOP_SUB && rel_pair(code, x)) deps[i] = EM_XDEP_REL;
      else
        for (int a = 0; a < ar; a++) deps[i] |= deps[x->arg[a]];
    }
    kvar[i] = (deps[i] & (EM_XDEP_K | EM_XDEP_S | EM_XDEP_REL)) != 0;
    dvar[i] = kvar[i] && !(deps[i] & (EM_XDEP_Q | EM_XDEP_K | EM_XDEP_S));
  }
  for (int o = 0; o < n_out && s == EM_OK; o++)
    if (bad_reg(outs[o], n)) s = em_error(EM_ERR_ARG, "attention program: output %d is register %d", o, outs[o]);
  for (int g = 0; g < n_grad && s == EM_OK; g++)
    if (bad_reg(grad_load[g], n) || code[grad_load[g]].op != EM_XOP_LOAD)
      s = em_error(EM_ERR_ARG, "attention program: gradient %d is not a load", g);
  if (s != EM_OK) {
    free(deps), free(e), free(code), free(kvar), free(dvar);
    return s;
  }
  e->refs = 1;
  e->n = n, e->ins = code, e->kvar = kvar, e->dvar = dvar, e->n_out = n_out, e->n_grad = n_grad;
  memcpy(e->out, outs, (size_t)n_out * sizeof *outs);
  if (n_grad) memcpy(e->grad_load, grad_load, (size_t)n_grad * sizeof *grad_load);
  e->deps = deps[outs[0]];
  free(deps);
  *out = e;
  return EM_OK;
}

static void xmap_cache_forget(const em_expr *e);

void em_expr_retain(const em_expr *e) {
  if (e) ((em_expr *)e)->refs++; /* bookkeeping, not the program: const to its users */
}

void em_expr_free(em_expr *e) {
  if (!e || --e->refs > 0) return;
  xmap_cache_forget(e);
  free((void *)e->ins);
  free((void *)e->kvar);
  free((void *)e->dvar);
  free(e);
}

/* One instruction in double; LOAD reads its capture (NaN when out of range). */
static double eval_ins(const em_xins *x, const double *r, const em_xcap *caps, double b, double h,
                       double q, double k, double s) {
  switch (x->op) {
  case EM_XOP_CONST: return x->k;
  case EM_XOP_S: return s;
  case EM_XOP_B: return b;
  case EM_XOP_H: return h;
  case EM_XOP_Q: return q;
  case EM_XOP_K: return k;
  case EM_XOP_LOAD: {
    const em_xcap *c = &caps[x->cap];
    double idx[EM_EXPR_MAX_DIMS];
    for (int d = 0; d < c->ndim; d++) idx[d] = r[x->arg[d]];
    int64_t off = em_xcap_offset(c, idx);
    return off < 0 ? NAN : em_xcap_read(c, off);
  }
  default: { /* unary ops leave arg[1] and arg[2] at -1 */
    const int ar = em_xop_arity(x->op);
    return em_xeval1(x->op, r[x->arg[0]], ar > 1 ? r[x->arg[1]] : 0, ar > 2 ? r[x->arg[2]] : 0);
  }
  }
}

double em_expr_eval(const em_expr *e, const em_xcap *caps, int out, double b, double h, double q,
                    double k, double s, double *regs) {
  for (int i = 0; i < e->n; i++) regs[i] = eval_ins(&e->ins[i], regs, caps, b, h, q, k, s);
  return regs[e->out[out]];
}

/* ------------------------------------------------------------------ */
/* Interval evaluation                                                  */
/* ------------------------------------------------------------------ */

typedef struct ival { double lo, hi; } ival;

static const ival ANY = {-INFINITY, INFINITY};
static ival iv(double lo, double hi) {
  if (isnan(lo) || isnan(hi)) return ANY;
  return (ival){lo, hi};
}
static ival hull4(double a, double b, double c, double d) {
  double lo = fmin(fmin(a, b), fmin(c, d)), hi = fmax(fmax(a, b), fmax(c, d));
  if (isnan(a) || isnan(b) || isnan(c) || isnan(d)) return ANY;
  return (ival){lo, hi};
}
static bool surely_true(ival a) { return a.lo > 0 || a.hi < 0; }
static bool surely_false(ival a) { return a.lo == 0 && a.hi == 0; }
static ival truth(bool t, bool f) { return t ? (ival){1, 1} : f ? (ival){0, 0} : (ival){0, 1}; }

/* Min and max of capture c over the box of indices lo..hi (1-based,
** inclusive), or ANY when the box is large or leaves the tensor. */
static ival load_range(const em_xcap *c, const ival *idx) {
  int64_t lo[EM_EXPR_MAX_DIMS], hi[EM_EXPR_MAX_DIMS];
  double cells = 1;
  for (int d = 0; d < c->ndim; d++) {
    if (!(idx[d].lo >= 1 && idx[d].hi <= (double)c->shape[d])) return ANY;
    lo[d] = (int64_t)ceil(idx[d].lo) - 1, hi[d] = (int64_t)floor(idx[d].hi) - 1;
    if (hi[d] < lo[d]) return ANY;
    cells *= (double)(hi[d] - lo[d] + 1);
  }
  if (cells > 4096) return ANY;
  int64_t at[EM_EXPR_MAX_DIMS];
  for (int d = 0; d < c->ndim; d++) at[d] = lo[d];
  double mn = INFINITY, mx = -INFINITY;
  for (;;) {
    int64_t off = 0;
    for (int d = 0; d < c->ndim; d++) off = off * c->shape[d] + at[d];
    double v = em_xcap_read(c, off);
    if (isnan(v)) return ANY;
    mn = fmin(mn, v), mx = fmax(mx, v);
    int d = c->ndim - 1;
    while (d >= 0 && at[d] == hi[d]) at[d] = lo[d], d--;
    if (d < 0) break;
    at[d]++;
  }
  return (ival){mn, mx};
}

/* Whether the box of indices idx (intervals) lies inside capture c. */
static bool box_inside(const em_xcap *c, const ival *idx) {
  for (int d = 0; d < c->ndim; d++)
    if (!(idx[d].lo >= 1 && idx[d].hi <= (double)c->shape[d])) return false;
  return true;
}

/* *maybe_oob is set when a load's indices may leave its capture: the cell
** is then checked element by element, whatever the intervals decide. */
static ival eval_ival(const em_xins *x, const ival *r, const em_xcap *caps, ival b, ival h, ival q,
                      ival k, bool *maybe_oob) {
  const ival a = r[x->arg[0] >= 0 ? x->arg[0] : 0], c = r[x->arg[1] >= 0 ? x->arg[1] : 0];
  switch (x->op) {
  case EM_XOP_CONST: return (ival){x->k, x->k};
  case EM_XOP_S: return ANY;
  case EM_XOP_B: return b;
  case EM_XOP_H: return h;
  case EM_XOP_Q: return q;
  case EM_XOP_K: return k;
  case EM_XOP_ADD: return iv(a.lo + c.lo, a.hi + c.hi);
  case EM_XOP_SUB: return iv(a.lo - c.hi, a.hi - c.lo);
  case EM_XOP_MUL: return hull4(a.lo * c.lo, a.lo * c.hi, a.hi * c.lo, a.hi * c.hi);
  case EM_XOP_DIV:
  case EM_XOP_IDIV: {
    if (c.lo <= 0 && c.hi >= 0) return ANY;
    ival d = hull4(a.lo / c.lo, a.lo / c.hi, a.hi / c.lo, a.hi / c.hi);
    return x->op == EM_XOP_DIV ? d : iv(floor(d.lo), floor(d.hi));
  }
  case EM_XOP_MOD:
    if (c.lo == c.hi && c.lo != 0 && isfinite(a.lo) && isfinite(a.hi) &&
        floor(a.lo / c.lo) == floor(a.hi / c.lo)) {
      const double f = floor(a.lo / c.lo) * c.lo;
      return iv(a.lo - f, a.hi - f);
    }
    return c.lo > 0 ? (ival){0, c.hi} : ANY;
  case EM_XOP_MIN: return iv(fmin(a.lo, c.lo), fmin(a.hi, c.hi));
  case EM_XOP_MAX: return iv(fmax(a.lo, c.lo), fmax(a.hi, c.hi));
  case EM_XOP_LT: return truth(a.hi < c.lo, a.lo >= c.hi);
  case EM_XOP_LE: return truth(a.hi <= c.lo, a.lo > c.hi);
  case EM_XOP_EQ: return truth(a.lo == a.hi && c.lo == c.hi && a.lo == c.lo, a.hi < c.lo || c.hi < a.lo);
  case EM_XOP_NE: return truth(a.hi < c.lo || c.hi < a.lo, a.lo == a.hi && c.lo == c.hi && a.lo == c.lo);
  case EM_XOP_AND: return truth(surely_true(a) && surely_true(c), surely_false(a) || surely_false(c));
  case EM_XOP_OR: return truth(surely_true(a) || surely_true(c), surely_false(a) && surely_false(c));
  case EM_XOP_NOT: return truth(surely_false(a), surely_true(a));
  case EM_XOP_NEG: return iv(-a.hi, -a.lo);
  case EM_XOP_ABS:
    if (a.lo >= 0) return a;
    if (a.hi <= 0) return iv(-a.hi, -a.lo);
    return iv(0, fmax(-a.lo, a.hi));
  case EM_XOP_FLOOR: return iv(floor(a.lo), floor(a.hi));
  case EM_XOP_CEIL: return iv(ceil(a.lo), ceil(a.hi));
  case EM_XOP_EXP: return iv(exp(a.lo), exp(a.hi));
  case EM_XOP_LOG: return a.lo < 0 ? ANY : iv(log(a.lo), log(a.hi));
  case EM_XOP_TANH: return iv(tanh(a.lo), tanh(a.hi));
  case EM_XOP_SQRT: return a.lo < 0 ? ANY : iv(sqrt(a.lo), sqrt(a.hi));
  case EM_XOP_SIGMOID: return iv(EM_XRULE_SIGMOID(a.lo), EM_XRULE_SIGMOID(a.hi));
  case EM_XOP_SIGN: return iv(EM_XRULE_SIGN(a.lo), EM_XRULE_SIGN(a.hi));
  case EM_XOP_WHERE: {
    const ival e = r[x->arg[2]];
    if (surely_true(a)) return c;
    if (surely_false(a)) return e;
    return iv(fmin(c.lo, e.lo), fmax(c.hi, e.hi));
  }
  case EM_XOP_LOAD: {
    ival idx[EM_EXPR_MAX_DIMS];
    for (int d = 0; d < caps[x->cap].ndim; d++) idx[d] = r[x->arg[d]];
    if (!box_inside(&caps[x->cap], idx)) *maybe_oob = true;
    return load_range(&caps[x->cap], idx);
  }
  default: return ANY; /* POW */
  }
}

/* The mask at one element, as em_expr_eval, but a load out of its
** capture is an error (the kernel's, with the same words): its value would
** be NaN, which a comparison turns into false, and a cell classified empty
** on it would never reach the kernel's own check -- silent zero rows. */
static em_status eval_checked(const em_expr *e, const em_xcap *caps, double b, double h, double q,
                              double k, double *regs, double *out) {
  for (int i = 0; i < e->n; i++) {
    const em_xins *x = &e->ins[i];
    if (x->op == EM_XOP_LOAD) {
      const em_xcap *c = &caps[x->cap];
      double idx[EM_EXPR_MAX_DIMS];
      for (int d = 0; d < c->ndim; d++) idx[d] = regs[x->arg[d]];
      const int64_t off = em_xcap_offset(c, idx);
      if (off < 0) {
        int d = 0;
        while (d < c->ndim - 1 && idx[d] >= 1 && idx[d] <= (double)c->shape[d] && idx[d] == floor(idx[d])) d++;
        return em_error(EM_ERR_INDEX,
                        "mask: index %g out of range for dim %d of captured tensor '%s' (size %lld) at "
                        "b=%g h=%g q=%g k=%g",
                        idx[d], d + 1, c->name ? c->name : "?", (long long)c->shape[d], b, h, q, k);
      }
      regs[i] = em_xcap_read(c, off);
    } else {
      regs[i] = eval_ins(x, regs, caps, b, h, q, k, 0);
    }
  }
  *out = regs[e->out[0]];
  return EM_OK;
}

/* The cell (b, h, queries [i0, i1), keys [j0, j1)) by its elements: stops
** at the first element that differs from the first, unless every element's
** loads must be checked (check_all). */
static em_status cell_by_elements(const em_expr *e, const em_xcap *caps, double b, double h,
                                  int64_t shift, int64_t i0, int64_t i1, int64_t j0, int64_t j1,
                                  bool check_all, double *regs, uint8_t *cls) {
  int first = -1;
  bool partial = false;
  for (int64_t i = i0; i < i1; i++)
    for (int64_t j = j0; j < j1; j++) {
      double v = 0;
      EM_TRY(eval_checked(e, caps, b, h, (double)(i + shift + 1), (double)(j + 1), regs, &v));
      const int t = v != 0 && !isnan(v);
      if (isnan(v)) partial = true; /* the kernel meets it and reports it */
      if (first < 0) first = t;
      else if (t != first) partial = true;
      if (partial && !check_all) {
        *cls = EM_XTILE_PARTIAL;
        return EM_OK;
      }
    }
  *cls = partial ? EM_XTILE_PARTIAL : first ? EM_XTILE_FULL : EM_XTILE_EMPTY;
  return EM_OK;
}

em_status em__xmap_build(const em_expr *e, const em_xcap *caps, int64_t B, int64_t H, int64_t Lq,
                         int64_t Lk, int64_t grain, em_tensor **map, int64_t *nq, int64_t *nk,
                         int64_t *sb, int64_t *sh) {
  *map = NULL;
  *nq = (Lq + grain - 1) / grain, *nk = (Lk + grain - 1) / grain;
  const int64_t Bm = e->deps & EM_XDEP_B ? B : 1, Hm = e->deps & EM_XDEP_H ? H : 1;
  const int64_t cells = *nq * *nk;
  *sh = Hm > 1 ? cells : 0;
  *sb = Bm > 1 ? Hm * cells : 0;
  int64_t shape[1] = {Bm * Hm * cells};
  em_device cpu;
  EM_TRY(em_cpu_device(&cpu));
  EM_TRY(em_empty(map, 1, shape, EM_BOOL, cpu)); /* bytes: EM_XTILE_* */
  uint8_t *m = em_data(*map);
  ival *r = malloc((size_t)e->n * sizeof *r);
  double *regs = malloc((size_t)e->n * sizeof *regs);
  if (!r || !regs) {
    free(r), free(regs);
    em_release(*map);
    *map = NULL;
    return em_error(EM_ERR_OOM, "attention: out of memory for the block map");
  }
  const int64_t shift = Lk - Lq;
  for (int64_t b = 0; b < Bm; b++)
    for (int64_t h = 0; h < Hm; h++)
      for (int64_t iq = 0; iq < *nq; iq++) {
        const int64_t i0 = iq * grain, i1 = i0 + grain < Lq ? i0 + grain : Lq;
        const ival qi = {(double)(i0 + shift + 1), (double)(i1 - 1 + shift + 1)};
        for (int64_t jk = 0; jk < *nk; jk++) {
          const int64_t j0 = jk * grain, j1 = j0 + grain < Lk ? j0 + grain : Lk;
          const ival ki = {(double)(j0 + 1), (double)j1};
          const ival bi = {(double)(b + 1), (double)(b + 1)}, hi = {(double)(h + 1), (double)(h + 1)};
          bool maybe_oob = false;
          for (int i = 0; i < e->n; i++) r[i] = eval_ival(&e->ins[i], r, caps, bi, hi, qi, ki, &maybe_oob);
          const ival o = r[e->out[0]];
          uint8_t cls = surely_true(o) ? EM_XTILE_FULL : surely_false(o) ? EM_XTILE_EMPTY : EM_XTILE_PARTIAL;
          if (cls == EM_XTILE_PARTIAL || maybe_oob) {
            em_status s = cell_by_elements(e, caps, (double)(b + 1), (double)(h + 1), shift, i0, i1, j0, j1,
                                           maybe_oob, regs, &cls);
            if (s != EM_OK) {
              free(r), free(regs);
              em_release(*map);
              *map = NULL;
              return s;
            }
          }
          m[b * *sb + h * *sh + iq * *nk + jk] = cls;
        }
      }
  free(r), free(regs);
  return EM_OK;
}

/* ------------------------------------------------------------------ */
/* The block map cache                                                  */
/* ------------------------------------------------------------------ */

/* A training loop calls a variant with the same shapes, and a mask that
** reads tensors (document ids) mostly with the same data: maps are kept
** per program, shape and content of the captures the mask reads (a hash
** of their bytes, which costs O(B*L), not O(L^2)). A freed program's
** entries go with it (its address may be reused). */
#define XMAP_CACHE 8

typedef struct xmap_entry {
  const em_expr *e;
  int64_t B, H, Lq, Lk, grain, nq, nk, sb, sh;
  uint64_t hash;
  em_tensor *map;
} xmap_entry;

static xmap_entry xmap_cache[XMAP_CACHE];
static int xmap_next;
static pthread_mutex_t xmap_lock = PTHREAD_MUTEX_INITIALIZER;

static void xmap_cache_forget(const em_expr *e) {
  pthread_mutex_lock(&xmap_lock);
  for (int i = 0; i < XMAP_CACHE; i++)
    if (xmap_cache[i].e == e) {
      em_release(xmap_cache[i].map);
      memset(&xmap_cache[i], 0, sizeof xmap_cache[i]);
    }
  pthread_mutex_unlock(&xmap_lock);
}

/* FNV-1a over the shapes and bytes of the captures e loads. */
static uint64_t xmap_hash(const em_expr *e, const em_xcap *caps) {
  uint64_t h = 1469598103934665603ull;
  bool seen[EM_EXPR_MAX_CAPS] = {false};
  for (int i = 0; i < e->n; i++) {
    if (e->ins[i].op != EM_XOP_LOAD || seen[e->ins[i].cap]) continue;
    const em_xcap *c = &caps[e->ins[i].cap];
    seen[e->ins[i].cap] = true;
    int64_t n = 1;
    for (int d = 0; d < c->ndim; d++) {
      n *= c->shape[d];
      h = (h ^ (uint64_t)c->shape[d]) * 1099511628211ull;
    }
    const size_t bytes = (size_t)n * (c->dtype == EM_F32 ? 4 : 8);
    const unsigned char *p = c->data;
    for (size_t k = 0; k < bytes; k++) h = (h ^ p[k]) * 1099511628211ull;
  }
  return h;
}

em_status em__xmap_get(const em_expr *e, const em_xcap *caps, int64_t B, int64_t H, int64_t Lq,
                       int64_t Lk, int64_t grain, em_tensor **map, int64_t *nq, int64_t *nk,
                       int64_t *sb, int64_t *sh) {
  const uint64_t hash = xmap_hash(e, caps);
  pthread_mutex_lock(&xmap_lock);
  for (int i = 0; i < XMAP_CACHE; i++) {
    const xmap_entry *x = &xmap_cache[i];
    if (x->e == e && x->B == B && x->H == H && x->Lq == Lq && x->Lk == Lk && x->grain == grain &&
        x->hash == hash && x->map) {
      *map = em_retain(x->map);
      *nq = x->nq, *nk = x->nk, *sb = x->sb, *sh = x->sh;
      pthread_mutex_unlock(&xmap_lock);
      return EM_OK;
    }
  }
  pthread_mutex_unlock(&xmap_lock);
  EM_TRY(em__xmap_build(e, caps, B, H, Lq, Lk, grain, map, nq, nk, sb, sh));
  pthread_mutex_lock(&xmap_lock);
  xmap_entry *x = &xmap_cache[xmap_next];
  xmap_next = (xmap_next + 1) % XMAP_CACHE;
  em_release(x->map);
  *x = (xmap_entry){e, B, H, Lq, Lk, grain, *nq, *nk, *sb, *sh, hash, em_retain(*map)};
  pthread_mutex_unlock(&xmap_lock);
  return EM_OK;
}
