/*
** gpu_vs_cpu_attention_decl.c -- the terms of declared attention variants
** in the fused kernels against the CPU backend's kernel, which is the
** reference design: ALiBi, a bias table indexed by T5 buckets
** (bidirectional or not) or by clipped distance, Shaw's key term with and
** without the value term, sliding windows, causal + window, block masks
** with global tokens, and cross-attention (Lq != Lk), alone and combined
** with padding and dropout. Forward out and lse, and every gradient (q, k,
** v and the tables) are compared, float32 and bfloat16 (the CPU computes in
** float32 on the same rounded inputs).
**
** Since em_attention_args ABI 6 only Shaw's terms reach a kernel as such
** (rel_row, rel_k, rel_v and their gradients); the core lowers ALiBi, bias
** tables, windows, blocks and global tokens to traced programs. So the
** other cases here build such programs themselves (em_expr_new: a score
** program with its gradient program for the biases, the table a learned
** capture whose gradient is d_caps; a mask program for the masks, written
** as ember_expr.h says: a window is and(q - k <= L, k - q <= R) on 1-based
** positions) at the same multi-tile sizes as before. The CUDA side also
** gets the mask's block map (made here from the program with em_expr_eval,
** at grains that do and do not divide the 64-wide tiles), so skipped and
** full tiles are checked against the CPU side, which gets no map and
** evaluates the mask everywhere. The core's own lowering of the declared
** variants is checked end to end by tests/cuda/emu_declared_fused.lua.
** Table rows come from the core's em_attn_rel_row, as the core computes
** them.
*/
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ember_attention.h"
#include "ember_expr.h"
#include "gpu_vs_cpu.h"

/* The score term of a case. */
typedef enum { T_NONE, T_ALIBI, T_TABLE, T_SHAW } term_kind;
/* The mask of a case, as a program on key-axis positions. */
typedef enum { M_NONE, M_WINDOW, M_BLOCKS } mask_kind;

typedef struct mask_spec {
  mask_kind kind;
  int64_t left, right;   /* WINDOW: q - left <= k <= q + right */
  int64_t block, local;  /* BLOCKS: |(k-1)//block - (q-1)//block| <= local */
  int64_t global;        /* positions 1..global see and are seen by all */
  int64_t grain;         /* the block map's cells (positions a side) */
} mask_spec;

typedef struct decl_case {
  const char *what;
  int64_t B, H, Lq, Lk, dk, dv;
  bool causal, pad;
  double p;
  term_kind term;
  em_attn_rel_kind rel;  /* TABLE and SHAW: how r becomes a row */
  int64_t max_distance, num_buckets;
  bool bidirectional, rel_v;
  mask_spec mask;
} decl_case;

/* Tolerances, |gpu - cpu| <= atol + rtol |cpu|: float32 out atol 2e-5 and
** rtol 10x that, lse 1e-5 + 1e-5, q/k/v gradients 2e-4 + 2e-4, tables
** 1e-3 + 1e-3 (sums over up to Lq*Lk scores, added in another order, by
** atomics on a GPU); bfloat16 out 2e-2 (+ 2e-1), gradients and tables
** 5e-2 + 5e-2 (only the outputs are rounded to bfloat16, as in the
** standard cases of gpu_vs_cpu_attention.c). */
#define TOL_F32_FWD 2e-5
#define TOL_F32_BWD 2e-4
#define TOL_F32_TAB 1e-3
#define TOL_BF16_FWD 2e-2
#define TOL_BF16_BWD 5e-2

/* ---- programs ---- */

typedef struct prog {
  em_xins ins[64];
  int n;
} prog;

/* Appends an instruction; returns its register. */
static int op(prog *p, int o, int a, int b) {
  em_xins x = {o, 0, {a, b, -1, -1}, 0};
  p->ins[p->n] = x;
  return p->n++;
}
static int cst(prog *p, double k) {
  em_xins x = {EM_XOP_CONST, 0, {-1, -1, -1, -1}, k};
  p->ins[p->n] = x;
  return p->n++;
}
static int load(prog *p, int cap, int a, int b) {
  em_xins x = {EM_XOP_LOAD, cap, {a, b, -1, -1}, 0};
  p->ins[p->n] = x;
  return p->n++;
}

/* The captures of the score programs: ALiBi's slopes [H]; a table's rows
** [Lq + Lk - 1] (int64, 0-based, at r + Lk - 1) and the table [n_rel, H]. */
enum { CAP_SLOPES = 0, CAP_ROWS = 0, CAP_TABLE = 1 };

/* The score program of an ALiBi or table case (s - slope_h |k - q| or
** s + table[rows[k - q + Lk], h], 1-based) and its gradient program
** (out[0] the score, out[1] d/ds = 1, out[2] d/d table load: 1). */
static em_status score_programs(const decl_case *c, em_expr **score, em_expr **grad) {
  prog p = {.n = 0};
  const int s = op(&p, EM_XOP_S, -1, -1), h = op(&p, EM_XOP_H, -1, -1);
  const int q = op(&p, EM_XOP_Q, -1, -1), k = op(&p, EM_XOP_K, -1, -1);
  const int r = op(&p, EM_XOP_SUB, k, q);
  int out, tab = -1;
  if (c->term == T_ALIBI) {
    const int slope = load(&p, CAP_SLOPES, h, -1);
    out = op(&p, EM_XOP_SUB, s, op(&p, EM_XOP_MUL, slope, op(&p, EM_XOP_ABS, r, -1)));
  } else {
    const int row = load(&p, CAP_ROWS, op(&p, EM_XOP_ADD, r, cst(&p, (double)c->Lk)), -1);
    tab = load(&p, CAP_TABLE, op(&p, EM_XOP_ADD, row, cst(&p, 1)), h);
    out = op(&p, EM_XOP_ADD, s, tab);
  }
  const int one = cst(&p, 1);
  const int32_t outs[3] = {out, one, one}, grad_load[1] = {tab};
  const int n_caps = c->term == T_ALIBI ? 1 : 2, cap_ndim[2] = {1, 2};
  const int n_grad = c->term == T_TABLE ? 1 : 0;
  /* the score program: the instructions up to its output */
  em_status st = em_expr_new(score, out + 1, p.ins, 1, outs, 0, NULL, n_caps, cap_ndim);
  return st ? st : em_expr_new(grad, p.n, p.ins, 2 + n_grad, outs, n_grad, grad_load, n_caps, cap_ndim);
}

/* The mask program of a case: the window or the blocks, or'ed with the
** global positions. */
static em_status mask_program(const mask_spec *m, em_expr **mask) {
  prog p = {.n = 0};
  const int q = op(&p, EM_XOP_Q, -1, -1), k = op(&p, EM_XOP_K, -1, -1);
  int out;
  if (m->kind == M_WINDOW) {
    out = op(&p, EM_XOP_AND, op(&p, EM_XOP_LE, op(&p, EM_XOP_SUB, q, k), cst(&p, (double)m->left)),
             op(&p, EM_XOP_LE, op(&p, EM_XOP_SUB, k, q), cst(&p, (double)m->right)));
  } else {
    const int one = cst(&p, 1), blk = cst(&p, (double)m->block);
    const int bq = op(&p, EM_XOP_IDIV, op(&p, EM_XOP_SUB, q, one), blk);
    const int bk = op(&p, EM_XOP_IDIV, op(&p, EM_XOP_SUB, k, one), blk);
    out = op(&p, EM_XOP_LE, op(&p, EM_XOP_ABS, op(&p, EM_XOP_SUB, bk, bq), -1), cst(&p, (double)m->local));
  }
  if (m->global > 0) {
    const int g = cst(&p, (double)m->global);
    out = op(&p, EM_XOP_OR, out, op(&p, EM_XOP_OR, op(&p, EM_XOP_LE, q, g), op(&p, EM_XOP_LE, k, g)));
  }
  const int32_t outs[1] = {out};
  return em_expr_new(mask, p.n, p.ins, 1, outs, 0, NULL, 0, NULL);
}

/* The block map of a mask program (it reads no batch, head or capture):
** each cell of g x g (queries x keys) empty, full or partial, from the
** program itself at every element, as the core makes it. */
static uint8_t *block_map(const em_expr *mask, int64_t Lq, int64_t Lk, int64_t g, int64_t *nq, int64_t *nk) {
  *nq = (Lq + g - 1) / g, *nk = (Lk + g - 1) / g;
  uint8_t *map = malloc((size_t)(*nq * *nk));
  double regs[64];
  for (int64_t iq = 0; iq < *nq; iq++)
    for (int64_t jk = 0; jk < *nk; jk++) {
      bool any = false, all = true;
      for (int64_t i = iq * g; i < (iq + 1) * g && i < Lq; i++)
        for (int64_t j = jk * g; j < (jk + 1) * g && j < Lk; j++) {
          const bool ok = em_expr_eval(mask, NULL, 0, 1, 1, (double)(i + Lk - Lq + 1), (double)(j + 1), 0, regs) != 0;
          any = any || ok, all = all && ok;
        }
      map[iq * *nk + jk] = !any ? EM_XTILE_EMPTY : all ? EM_XTILE_FULL : EM_XTILE_PARTIAL;
    }
  return map;
}

/* ---- one case ---- */

static void decl_run(const decl_case *c, em_dtype dt) {
  em_attn_decl d;
  em_attn_decl_init(&d);
  d.bias = c->term == T_SHAW ? EM_ATTN_BIAS_SHAW : c->term == T_TABLE ? EM_ATTN_BIAS_TABLE : EM_ATTN_BIAS_NONE;
  d.rel = c->rel;
  d.max_distance = c->max_distance;
  d.num_buckets = c->num_buckets;
  d.bidirectional = c->bidirectional;
  if (c->term == T_TABLE) d.table_param = 0;
  if (c->term == T_SHAW) d.rel_k_param = 0, d.rel_v_param = c->rel_v ? 1 : -1;
  const bool tables = c->term == T_TABLE || c->term == T_SHAW;
  const int64_t BH = c->B * c->H, nq = BH * c->Lq * c->dk, nk = BH * c->Lk * c->dk;
  const int64_t nv = BH * c->Lk * c->dv, no = BH * c->Lq * c->dv, nl = BH * c->Lq;
  const int64_t nr = c->Lq + c->Lk - 1, nrel = tables ? em_attn_decl_rows(&d) : 0;
  /* the tables: [nrel, H] bias (a float32 capture: the compute dtype),
  ** [nrel, dk] rel_k and [nrel, dv] rel_v (q's dtype) */
  const int64_t ntab[3] = {c->term == T_TABLE ? nrel * c->H : 0, c->term == T_SHAW ? nrel * c->dk : 0,
                           c->term == T_SHAW && c->rel_v ? nrel * c->dv : 0};
  const em_dtype tdt[3] = {EM_F32, dt, dt};
  void *q = host_rand(dt, nq, -1.5, 1.5), *k = host_rand(dt, nk, -1.5, 1.5);
  void *v = host_rand(dt, nv, -1, 1), *dout = host_rand(dt, no, -1, 1);
  void *tab[3] = {NULL, NULL, NULL}, *tabc[3] = {NULL, NULL, NULL};
  for (int t = 0; t < 3; t++)
    if (ntab[t]) tab[t] = host_rand(tdt[t], ntab[t], -0.8, 0.8);
  uint8_t *pad = calloc((size_t)(c->B * c->Lk), 1);
  for (int64_t e = 0; e < c->B * c->Lk; e++) pad[e] = c->pad && rng_int(5) == 0;
  int64_t *rows = malloc((size_t)nr * sizeof *rows);
  for (int64_t n = 0; n < nr; n++) rows[n] = tables ? em_attn_rel_row(&d, n - (c->Lk - 1)) : 0;
  float *slopes = malloc((size_t)c->H * sizeof *slopes);
  for (int64_t h = 0; h < c->H; h++) slopes[h] = (float)em_attn_alibi_slope(h, c->H);
  /* the programs, and the mask's block map */
  em_expr *xs = NULL, *xg = NULL, *xm = NULL;
  em_status ps = EM_OK;
  if (c->term == T_ALIBI || c->term == T_TABLE) ps = score_programs(c, &xs, &xg);
  if (!ps && c->mask.kind != M_NONE) ps = mask_program(&c->mask, &xm);
  int64_t map_nq = 0, map_nk = 0;
  uint8_t *map = xm ? block_map(xm, c->Lq, c->Lk, c->mask.grain, &map_nq, &map_nk) : NULL;
  const em_dtype cdt = EM_F32;
  void *qc = q, *kc = k, *vc = v, *dc = dout;
  if (dt == EM_BF16) {
    qc = bf16_widen(q, nq), kc = bf16_widen(k, nk), vc = bf16_widen(v, nv), dc = bf16_widen(dout, no);
    for (int t = 0; t < 3; t++) tabc[t] = tab[t] && tdt[t] == EM_BF16 ? bf16_widen(tab[t], ntab[t]) : tab[t];
  } else {
    for (int t = 0; t < 3; t++) tabc[t] = tab[t];
  }
  void *out[2], *lse[2], *dq[2], *dk[2], *dv[2], *gt[2][3];
  em_status sf[2], sb[2];
  for (int s = 0; s < 2; s++) {
    side sd = {.be = s ? g_cpu : g_gpu};
    const em_dtype dd = s ? cdt : dt;
    const size_t e = em_dtype_size(dd);
    const size_t te[3] = {sizeof(float), e, e};
    out[s] = malloc(no * 4), lse[s] = malloc(nl * 4), dq[s] = malloc(nq * 4);
    dk[s] = malloc(nk * 4), dv[s] = malloc(nv * 4);
    em_attention_args a = attn_args(&sd, dd, c->B, c->H, c->Lq, c->Lk, c->dk, c->dv, s ? qc : q, s ? kc : k,
                                    s ? vc : v);
    a.key_padding = c->pad ? dput(&sd, pad, c->B * c->Lk) : NULL;
    a.causal = c->causal;
    a.scale = 1.0 / sqrt((double)c->dk);
    a.dropout_p = c->p;
    a.seed = 4242, a.offset = 7;
    const void *tp[3];
    for (int t = 0; t < 3; t++) tp[t] = ntab[t] ? dput(&sd, s ? tabc[t] : tab[t], ntab[t] * te[t]) : NULL;
    /* Shaw's terms: explicit */
    if (c->term == T_SHAW) a.rel_row = dput(&sd, rows, nr * sizeof *rows), a.n_rel = nrel;
    a.rel_k = tp[1], a.rel_v = tp[2];
    /* the others: programs and their captures */
    em_xcap caps[2];
    memset(caps, 0, sizeof caps);
    if (c->term == T_ALIBI) {
      caps[0] = (em_xcap){dput(&sd, slopes, c->H * sizeof *slopes), EM_F32, 1, {c->H}, "slopes"};
      a.n_caps = 1;
    } else if (c->term == T_TABLE) {
      caps[0] = (em_xcap){dput(&sd, rows, nr * sizeof *rows), EM_I64, 1, {nr}, "rows"};
      caps[1] = (em_xcap){tp[0], EM_F32, 2, {nrel, c->H}, "table"};
      a.n_caps = 2;
    }
    a.caps = a.n_caps ? caps : NULL;
    a.score_mod = xs, a.score_grad = xg, a.mask_mod = xm;
    if (map && !s) { /* the GPU skips by the map; the CPU evaluates the mask everywhere */
      a.block_map = dput(&sd, map, (size_t)(map_nq * map_nk));
      a.map_grain = c->mask.grain, a.map_nq = map_nq, a.map_nk = map_nk, a.map_sb = a.map_sh = 0;
    }
    sf[s] = ps ? ps : sd.be->attention_forward(0, &a); /* a program refused: both sides fail */
    a.dout = dput(&sd, s ? dc : dout, no * e);
    a.dq = dput(&sd, NULL, nq * e);
    a.dk_ = dput(&sd, NULL, nk * e);
    a.dv_ = dput(&sd, NULL, nv * e);
    void *gp[3];
    for (int t = 0; t < 3; t++) gp[t] = ntab[t] ? dput(&sd, NULL, ntab[t] * te[t]) : NULL;
    void *d_caps[2] = {NULL, gp[0]}; /* the table's gradient (the rows have none) */
    if (c->term == T_TABLE) a.d_caps = d_caps;
    a.d_rel_k = gp[1], a.d_rel_v = gp[2];
    sb[s] = sf[s] ? sf[s] : sd.be->attention_backward(0, &a);
    dget(&sd, out[s], a.out, no * e);
    dget(&sd, lse[s], a.lse, nl * 4);
    dget(&sd, dq[s], a.dq, nq * e);
    dget(&sd, dk[s], a.dk_, nk * e);
    dget(&sd, dv[s], a.dv_, nv * e);
    for (int t = 0; t < 3; t++) {
      gt[s][t] = ntab[t] ? malloc(ntab[t] * 4) : NULL;
      if (gp[t]) dget(&sd, gt[s][t], gp[t], ntab[t] * te[t]);
    }
    side_free(&sd);
  }
  char name[240];
  snprintf(name, sizeof name, "attention %s %s B=%lld H=%lld Lq=%lld Lk=%lld dk=%lld dv=%lld%s%s p=%.2f",
           em_dtype_name(dt), c->what, (long long)c->B, (long long)c->H, (long long)c->Lq,
           (long long)c->Lk, (long long)c->dk, (long long)c->dv, c->causal ? " causal" : "",
           c->pad ? " padding" : "", c->p);
  const bool bf = dt == EM_BF16;
  const double ft = bf ? TOL_BF16_FWD : TOL_F32_FWD, bt = bf ? TOL_BF16_BWD : TOL_F32_BWD;
  const double tt = bf ? TOL_BF16_BWD : TOL_F32_TAB;
  double wf = fmax(compare(dt, out[0], cdt, out[1], no, ft, ft * 10),
                   compare(EM_F32, lse[0], EM_F32, lse[1], nl, 1e-5, 1e-5));
  char fwd[280], bwd[280], tb[280];
  snprintf(fwd, sizeof fwd, "%s forward", name);
  snprintf(bwd, sizeof bwd, "%s backward dq dk dv", name);
  snprintf(tb, sizeof tb, "%s backward tables", name);
  expect_close(fwd, sf[0], sf[1], wf);
  double wb = compare(dt, dq[0], cdt, dq[1], nq, bt, bt);
  wb = fmax(wb, compare(dt, dk[0], cdt, dk[1], nk, bt, bt));
  wb = fmax(wb, compare(dt, dv[0], cdt, dv[1], nv, bt, bt));
  expect_close(bwd, sb[0], sb[1], wb);
  if (tables) {
    double wt = 0;
    for (int t = 0; t < 3; t++)
      if (ntab[t]) wt = fmax(wt, compare(t ? dt : EM_F32, gt[0][t], cdt, gt[1][t], ntab[t], tt, tt));
    expect_close(tb, sb[0], sb[1], wt);
  }
  if (bf) {
    free(qc), free(kc), free(vc), free(dc);
    for (int t = 0; t < 3; t++)
      if (tabc[t] != tab[t]) free(tabc[t]);
  }
  free(q), free(k), free(v), free(dout), free(pad), free(rows), free(slopes), free(map);
  em_expr_free(xs), em_expr_free(xg), em_expr_free(xm);
  for (int t = 0; t < 3; t++) free(tab[t]);
  for (int s = 0; s < 2; s++) {
    free(out[s]), free(lse[s]), free(dq[s]), free(dk[s]), free(dv[s]);
    for (int t = 0; t < 3; t++) free(gt[s][t]);
  }
}

#define NOMASK {M_NONE, 0, 0, 0, 0, 0, 0}
#define WINDOW(l, r, g, grain) {M_WINDOW, l, r, 0, 0, g, grain}
#define BLOCKS(b, loc, g, grain) {M_BLOCKS, 0, 0, b, loc, g, grain}
#define TERM(kind, rel, maxd, nb, bidir, relv) kind, rel, maxd, nb, bidir, relv

void test_attention_decl(void) {
  const decl_case cases[] = {
    {"alibi", 2, 3, 100, 100, 32, 32, false, false, 0,
     TERM(T_ALIBI, EM_ATTN_REL_CLIP, 0, 0, false, false), NOMASK},
    {"alibi cross", 1, 2, 70, 150, 16, 16, true, true, 0,
     TERM(T_ALIBI, EM_ATTN_REL_CLIP, 0, 0, false, false), NOMASK},
    {"t5 bidirectional", 1, 2, 130, 130, 16, 16, false, true, 0,
     TERM(T_TABLE, EM_ATTN_REL_T5, 20, 8, true, false), NOMASK},
    {"t5 unidirectional", 1, 3, 90, 90, 24, 24, true, false, 0,
     TERM(T_TABLE, EM_ATTN_REL_T5, 16, 6, false, false), NOMASK},
    {"clipped table cross", 1, 2, 80, 120, 16, 16, false, false, 0.1,
     TERM(T_TABLE, EM_ATTN_REL_CLIP, 5, 0, false, false), NOMASK},
    {"abs-clipped table", 2, 2, 65, 65, 16, 16, true, false, 0,
     TERM(T_TABLE, EM_ATTN_REL_ABS_CLIP, 7, 0, false, false), NOMASK},
    {"shaw rel_k+rel_v", 1, 2, 100, 100, 24, 40, false, false, 0,
     TERM(T_SHAW, EM_ATTN_REL_CLIP, 4, 0, false, true), NOMASK},
    {"shaw rel_k only cross", 1, 2, 70, 130, 16, 16, true, false, 0,
     TERM(T_SHAW, EM_ATTN_REL_CLIP, 16, 0, false, false), NOMASK},
    {"shaw dropout", 1, 1, 66, 66, 16, 16, false, true, 0.2,
     TERM(T_SHAW, EM_ATTN_REL_CLIP, 80, 0, false, true), NOMASK},
    {"shaw head dims > 64", 1, 1, 70, 70, 96, 80, true, false, 0,
     TERM(T_SHAW, EM_ATTN_REL_CLIP, 3, 0, false, true), NOMASK},
    {"sliding window", 1, 2, 200, 200, 16, 16, false, false, 0,
     TERM(T_NONE, EM_ATTN_REL_CLIP, 0, 0, false, false), WINDOW(20, 5, 0, 16)},
    {"causal + window", 1, 2, 256, 256, 16, 16, true, true, 0,
     TERM(T_NONE, EM_ATTN_REL_CLIP, 0, 0, false, false), WINDOW(30, 0, 0, 64)},
    {"blocks + global tokens", 1, 2, 200, 200, 16, 16, false, false, 0,
     TERM(T_NONE, EM_ATTN_REL_CLIP, 0, 0, false, false), BLOCKS(16, 1, 8, 16)},
    {"window + global tokens", 1, 1, 192, 192, 16, 16, false, false, 0.1,
     TERM(T_NONE, EM_ATTN_REL_CLIP, 0, 0, false, false), WINDOW(10, 10, 5, 40)},
    {"window cross + t5", 1, 2, 50, 200, 16, 16, false, false, 0,
     TERM(T_TABLE, EM_ATTN_REL_T5, 32, 10, true, false), WINDOW(8, 8, 0, 16)},
    {"blocks cross (Lq > Lk) + alibi", 1, 2, 150, 90, 16, 16, true, false, 0,
     TERM(T_ALIBI, EM_ATTN_REL_CLIP, 0, 0, false, false), BLOCKS(20, 0, 3, 8)},
    {"shaw + window", 1, 2, 150, 150, 16, 24, false, true, 0,
     TERM(T_SHAW, EM_ATTN_REL_CLIP, 6, 0, false, true), WINDOW(40, 12, 0, 32)},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    decl_run(&cases[i], EM_F32);
    decl_run(&cases[i], EM_BF16);
  }
}
