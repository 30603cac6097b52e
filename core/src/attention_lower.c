/*
** attention_lower.c -- a declaration's terms as traced programs.
**
** A C variant declares its changes to attention as data (em_attn_decl in
** ember_attention.h): an ALiBi bias, a bias table indexed by a relative
** position's row (T5's buckets, clipped distances), a window or block mask
** with global tokens. Kernels do not know those words: the core writes
** each as the same kind of program a variant written in Lua brings
** (ember_expr.h), and the kernels run programs. So a backend implements
** one mechanism, not a list of terms, and a new term is a program, not a
** field of em_attention_args in every backend. (Shaw's q . rel_k and
** P . rel_v terms are vectors, not functions of (s, b, h, q, k): they stay
** the one explicit extension, ember_backend.h.)
**
** The programs do not depend on option values or sizes: those come in
** small captured tensors (the window's sides, the table's rows of each
** relative position, Lk), so one program per kind of term serves every
** instance and every call -- one JIT compile, one block-map rule. The
** table rows are made here per call with the double-precision rule of
** em_attn_rel_row, so checkpoints and fixtures see exactly the rows they
** always did.
*/
#include "internal.h"
#include "ember_attention.h"

#include <pthread.h>

/* A program under construction: append an instruction, get its register. */
#define LW_MAX_INS 48

typedef struct lw_prog {
  em_xins ins[LW_MAX_INS];
  int n;
} lw_prog;

static int lw_op(lw_prog *p, int op, int a, int b) {
  em_xins *x = &p->ins[p->n];
  memset(x, 0, sizeof *x);
  x->op = op, x->arg[0] = a, x->arg[1] = b;
  return p->n++;
}

static int lw_const(lw_prog *p, double k) {
  const int r = lw_op(p, EM_XOP_CONST, 0, 0);
  p->ins[r].k = k;
  return r;
}

/* LOAD cap[i0] (i1 < 0) or cap[i0][i1]. */
static int lw_load(lw_prog *p, int cap, int i0, int i1) {
  const int r = lw_op(p, EM_XOP_LOAD, i0, i1);
  p->ins[r].cap = cap;
  return r;
}

/* The bias's captures (kinds of em_attn_bias_kind that are programs). */
enum { LW_NONE, LW_ALIBI, LW_TABLE, LW_NBIAS };
static const int lw_bias_caps[LW_NBIAS] = {0, 1, 3};

/* s - slopes[h] * |k - q|; captures: slopes [H]. */
static int lw_alibi(lw_prog *p, int *load) {
  const int d = lw_op(p, EM_XOP_SUB, lw_op(p, EM_XOP_K, 0, 0), lw_op(p, EM_XOP_Q, 0, 0));
  const int slope = lw_load(p, 0, lw_op(p, EM_XOP_H, 0, 0), -1);
  *load = -1;
  return lw_op(p, EM_XOP_SUB, lw_op(p, EM_XOP_S, 0, 0), lw_op(p, EM_XOP_MUL, slope, lw_op(p, EM_XOP_ABS, d, 0)));
}

/* s + table[rows[k - q + Lk] + 1][h]; captures: table [n, H], rows
** [Lq + Lk - 1] (0-based table rows of r = k - q at r + Lk - 1), Lk [1]. */
static int lw_table(lw_prog *p, int *load) {
  const int one = lw_const(p, 1);
  const int d = lw_op(p, EM_XOP_SUB, lw_op(p, EM_XOP_K, 0, 0), lw_op(p, EM_XOP_Q, 0, 0));
  const int at = lw_op(p, EM_XOP_ADD, d, lw_load(p, 2, one, -1));
  const int row = lw_op(p, EM_XOP_ADD, lw_load(p, 1, at, -1), one);
  *load = lw_load(p, 0, row, lw_op(p, EM_XOP_H, 0, 0));
  return lw_op(p, EM_XOP_ADD, lw_op(p, EM_XOP_S, 0, 0), *load);
}

/* The mask: window (p - left <= j <= p + right) or blocks (|j/block -
** p/block| <= local), each with or without global tokens (p < global or
** j < global: 1-based, q <= global or k <= global). Capture c: [3] int64
** {left, right, global} or {block, local, global}. */
static int lw_mask(lw_prog *p, int kind, bool global, int c) {
  const int q = lw_op(p, EM_XOP_Q, 0, 0), k = lw_op(p, EM_XOP_K, 0, 0);
  const int one = lw_const(p, 1), two = lw_const(p, 2), three = lw_const(p, 3);
  int in;
  if (kind == EM_ATTN_MASK_WINDOW) {
    const int l = lw_op(p, EM_XOP_LE, lw_op(p, EM_XOP_SUB, q, k), lw_load(p, c, one, -1));
    const int r = lw_op(p, EM_XOP_LE, lw_op(p, EM_XOP_SUB, k, q), lw_load(p, c, two, -1));
    in = lw_op(p, EM_XOP_AND, l, r);
  } else {
    const int blk = lw_load(p, c, one, -1);
    const int bq = lw_op(p, EM_XOP_IDIV, lw_op(p, EM_XOP_SUB, q, one), blk);
    const int bk = lw_op(p, EM_XOP_IDIV, lw_op(p, EM_XOP_SUB, k, one), blk);
    const int dist = lw_op(p, EM_XOP_ABS, lw_op(p, EM_XOP_SUB, bk, bq), 0);
    in = lw_op(p, EM_XOP_LE, dist, lw_load(p, c, two, -1));
  }
  if (!global) return in;
  const int g = lw_load(p, c, three, -1);
  const int any = lw_op(p, EM_XOP_OR, lw_op(p, EM_XOP_LE, q, g), lw_op(p, EM_XOP_LE, k, g));
  return lw_op(p, EM_XOP_OR, in, any);
}

/* The programs, made once per kind and kept for the process: a score and
** its gradient per bias kind; a mask per (kind, global, first capture). */
static struct {
  em_expr *score[LW_NBIAS], *grad[LW_NBIAS];
  em_expr *mask[3][2][LW_NBIAS];
} lw_progs;
static pthread_mutex_t lw_lock = PTHREAD_MUTEX_INITIALIZER;

static em_status lw_make_bias(int bias) {
  static const int ndim[LW_NBIAS][3] = {{0}, {1}, {2, 1, 1}};
  lw_prog p = {.n = 0};
  int load;
  const int out = bias == LW_ALIBI ? lw_alibi(&p, &load) : lw_table(&p, &load);
  const int one = lw_const(&p, 1);
  const int32_t outs[3] = {out, one, one}, gl[1] = {load};
  const int ng = load >= 0 ? 1 : 0;
  em_expr *score = NULL, *grad = NULL;
  em_status s = em_expr_new(&score, p.n, p.ins, 1, outs, 0, NULL, lw_bias_caps[bias], ndim[bias]);
  if (s == EM_OK) s = em_expr_new(&grad, p.n, p.ins, 2 + ng, outs, ng, gl, lw_bias_caps[bias], ndim[bias]);
  if (s != EM_OK) {
    em_expr_free(score);
    return s;
  }
  lw_progs.score[bias] = score, lw_progs.grad[bias] = grad; /* both or neither */
  return EM_OK;
}

static em_status lw_make_mask(int kind, bool global, int bias) {
  lw_prog p = {.n = 0};
  const int c = lw_bias_caps[bias];
  int ndim[EM_EXPR_MAX_CAPS] = {0};
  ndim[c] = 1; /* the bias's captures come first; the mask reads none of them */
  const int32_t out = lw_mask(&p, kind, global, c);
  return em_expr_new(&lw_progs.mask[kind][global][bias], p.n, p.ins, 1, &out, 0, NULL, c + 1, ndim);
}

/* The programs of a kind, made on first use. */
static em_status lw_programs(int bias, int kind, bool global) {
  pthread_mutex_lock(&lw_lock);
  em_status s = EM_OK;
  if (bias != LW_NONE && !lw_progs.score[bias]) s = lw_make_bias(bias);
  if (s == EM_OK && kind != EM_ATTN_MASK_NONE && !lw_progs.mask[kind][global][bias])
    s = lw_make_mask(kind, global, bias);
  pthread_mutex_unlock(&lw_lock);
  return s;
}

static int64_t lw_clamp(int64_t x, int64_t cap) { return x > cap ? cap : x; }

/* A declaration's terms for one call, on the host: which programs, and
** the values of their small captures. */
typedef struct lw_terms {
  int bias, kind;
  int64_t w[3];       /* the mask's capture: {left, right, global} or {block, local, global} */
  double *slopes;     /* ALiBi: [H] */
  int64_t *rows, lk;  /* a table: the row of each relative position, [Lq + Lk - 1]; Lk */
} lw_terms;

static void lw_terms_free(lw_terms *t) { free(t->slopes), free(t->rows); }

static em_status lw_terms_of(const em_attn_call *c, const em_attn_decl *d, lw_terms *t) {
  memset(t, 0, sizeof *t);
  t->bias = d->bias == EM_ATTN_BIAS_ALIBI ? LW_ALIBI : d->bias == EM_ATTN_BIAS_TABLE ? LW_TABLE : LW_NONE;
  t->kind = (int)d->mask.kind;
  /* sizes past the sequence mean "everything": clamped there, so that no
  ** product of option values overflows and float32 registers hold them */
  const int64_t cap = (c->Lq > c->Lk ? c->Lq : c->Lk) + c->Lk + 1;
  const em_attn_block_mask *m = &d->mask;
  const bool win = t->kind == EM_ATTN_MASK_WINDOW;
  t->w[0] = lw_clamp(win ? m->left : m->block, cap);
  t->w[1] = lw_clamp(win ? m->right : m->local, cap);
  t->w[2] = t->kind == EM_ATTN_MASK_NONE ? 0 : lw_clamp(m->global, cap);
  if (t->bias == LW_ALIBI) {
    if (!(t->slopes = malloc((size_t)c->H * sizeof *t->slopes))) goto oom;
    for (int64_t h = 0; h < c->H; h++) t->slopes[h] = em_attn_alibi_slope(h, c->H);
  } else if (t->bias == LW_TABLE) {
    const int64_t nr = c->Lq + c->Lk - 1;
    if (!(t->rows = malloc((size_t)nr * sizeof *t->rows))) goto oom;
    for (int64_t n = 0; n < nr; n++) t->rows[n] = em_attn_rel_row(d, n - (c->Lk - 1));
    t->lk = c->Lk;
  }
  return lw_programs(t->bias, t->kind, t->w[2] > 0);
oom:
  lw_terms_free(t);
  return em_error(EM_ERR_OOM, "attention: out of memory");
}

/* A new int64 tensor of n values on q's device. */
static em_status lw_ints(em_tensor **t, const em_attn_call *c, int64_t n, const int64_t *v) {
  return em_from_host(t, 1, &n, EM_I64, v, c->q->device);
}

em_status em__attn_lower(const em_attn_call *c, const em_attn_decl *d, em__attn_lowered *lo) {
  memset(lo, 0, sizeof *lo);
  em_attn_mods *m = &lo->mods;
  if (d->bias != EM_ATTN_BIAS_ALIBI && d->bias != EM_ATTN_BIAS_TABLE && d->mask.kind == EM_ATTN_MASK_NONE)
    return EM_OK;
  lw_terms t;
  EM_TRY(lw_terms_of(c, d, &t));
  em_status s = EM_OK;
  if (t.bias == LW_ALIBI) {
    s = em_from_host(&lo->own[0], 1, &c->H, EM_F64, t.slopes, c->q->device);
    m->cap_param[0] = -1, m->cap_name[0] = "ALiBi slopes", m->cap_ndim[0] = 1;
  } else if (t.bias == LW_TABLE) {
    s = lw_ints(&lo->own[1], c, c->Lq + c->Lk - 1, t.rows);
    if (s == EM_OK) s = lw_ints(&lo->own[2], c, 1, &t.lk);
    m->cap_param[0] = d->table_param, m->cap_name[0] = "bias table", m->cap_ndim[0] = 2;
    m->cap_param[1] = -1, m->cap_name[1] = "table rows", m->cap_ndim[1] = 1;
    m->cap_param[2] = -1, m->cap_name[2] = "Lk", m->cap_ndim[2] = 1;
  }
  m->n_caps = lw_bias_caps[t.bias];
  if (s == EM_OK && t.kind != EM_ATTN_MASK_NONE) {
    const int i = m->n_caps++;
    s = lw_ints(&lo->own[i], c, 3, t.w);
    m->cap_param[i] = -1, m->cap_ndim[i] = 1;
    m->cap_name[i] = t.kind == EM_ATTN_MASK_WINDOW ? "window" : "blocks";
    m->mask = lw_progs.mask[t.kind][t.w[2] > 0][t.bias];
  }
  for (int i = 0; i < m->n_caps; i++) m->cap_input[i] = lo->own[i];
  if (t.bias != LW_NONE) m->score = lw_progs.score[t.bias], m->score_grad = lw_progs.grad[t.bias];
  lw_terms_free(&t);
  if (s != EM_OK) em__attn_lowered_free(lo);
  return s;
}

void em__attn_lowered_free(em__attn_lowered *lo) {
  for (int i = 0; i < EM_EXPR_MAX_CAPS; i++) em_release(lo->own[i]), lo->own[i] = NULL;
  lo->mods.n_caps = 0;
}

/* The mask program with its capture first (the one a declaration without
** a bias gets), on the window or blocks of w. */
static double lw_eval_mask(const em_expr *e, const int64_t *w, int64_t q, int64_t k, double *regs) {
  const em_xcap cap = {.data = w, .dtype = EM_I64, .ndim = 1, .shape = {3}, .name = "mask"};
  return em_expr_eval(e, &cap, 0, 1, 1, (double)q, (double)k, 0, regs);
}

em_status em__attn_lowered_dense(const em_attn_call *c, const em_attn_decl *d, uint8_t *mask, double *bias) {
  lw_terms t;
  EM_TRY(lw_terms_of(c, d, &t));
  em_status s = lw_programs(LW_NONE, t.kind, t.w[2] > 0);
  double regs[LW_MAX_INS];
  const int64_t shift = c->Lk - c->Lq;
  if (s == EM_OK && mask)
    for (int64_t i = 0; i < c->Lq; i++)
      for (int64_t j = 0; j < c->Lk; j++)
        mask[i * c->Lk + j] = t.kind == EM_ATTN_MASK_NONE ||
                              lw_eval_mask(lw_progs.mask[t.kind][t.w[2] > 0][LW_NONE], t.w, i + shift + 1, j + 1, regs) != 0;
  if (s == EM_OK && bias && t.bias == LW_ALIBI) {
    const em_xcap cap = {.data = t.slopes, .dtype = EM_F64, .ndim = 1, .shape = {c->H}, .name = "ALiBi slopes"};
    for (int64_t h = 0; h < c->H; h++)
      for (int64_t i = 0; i < c->Lq; i++)
        for (int64_t j = 0; j < c->Lk; j++)
          bias[(h * c->Lq + i) * c->Lk + j] =
            em_expr_eval(lw_progs.score[LW_ALIBI], &cap, 0, 1, (double)(h + 1), (double)(i + shift + 1), (double)(j + 1), 0, regs);
  }
  lw_terms_free(&t);
  return s;
}

bool em_attn_mask_allows(const em_attn_block_mask *m, int64_t p, int64_t j) {
  if (m->kind == EM_ATTN_MASK_NONE) return true;
  const bool win = m->kind == EM_ATTN_MASK_WINDOW;
  const int64_t w[3] = {win ? m->left : m->block, win ? m->right : m->local, m->global};
  if (lw_programs(LW_NONE, m->kind, m->global > 0) != EM_OK) return false;
  double regs[LW_MAX_INS];
  return lw_eval_mask(lw_progs.mask[m->kind][m->global > 0][LW_NONE], w, p + 1, j + 1, regs) != 0;
}
