/*
** gpu_vs_cpu_attention_decl.c -- the declared terms of the fused attention
** kernels (em_attention_args ABI 2) against the CPU backend's kernel, which
** is the reference design: ALiBi, a bias table indexed by T5 buckets
** (bidirectional or not) or by clipped distance, Shaw's key term with and
** without the value term, sliding windows, causal + window, block masks
** with global tokens, and cross-attention (Lq != Lk), alone and combined
** with padding and dropout. Forward out and lse, and every gradient (q, k,
** v and the tables) are compared, float32 and bfloat16 (the CPU computes in
** float32 on the same rounded inputs). The kernel arguments are expanded
** from an em_attn_decl with the core's own functions (em_attn_rel_row,
** em_attn_alibi_slope), as core/src/attention_sdpa.c does.
*/
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ember_attention.h"
#include "gpu_vs_cpu.h"

typedef struct decl_case {
  const char *what;
  int64_t B, H, Lq, Lk, dk, dv;
  bool causal, pad;
  double p;
  em_attn_bias_kind bias;
  em_attn_rel_kind rel;
  int64_t max_distance, num_buckets;
  bool bidirectional, rel_v;
  em_attn_block_mask mask;
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

static void decl_of(const decl_case *c, em_attn_decl *d) {
  em_attn_decl_init(d);
  d->bias = c->bias;
  d->rel = c->rel;
  d->max_distance = c->max_distance;
  d->num_buckets = c->num_buckets;
  d->bidirectional = c->bidirectional;
  if (c->bias == EM_ATTN_BIAS_TABLE) d->table_param = 0;
  if (c->bias == EM_ATTN_BIAS_SHAW) d->rel_k_param = 0, d->rel_v_param = c->rel_v ? 1 : -1;
  d->mask = c->mask;
}

static void decl_run(const decl_case *c, em_dtype dt) {
  em_attn_decl d;
  decl_of(c, &d);
  const int64_t BH = c->B * c->H, nq = BH * c->Lq * c->dk, nk = BH * c->Lk * c->dk;
  const int64_t nv = BH * c->Lk * c->dv, no = BH * c->Lq * c->dv, nl = BH * c->Lq;
  const int64_t nr = c->Lq + c->Lk - 1, nrel = em_attn_decl_rows(&d);
  const bool tables = c->bias == EM_ATTN_BIAS_TABLE || c->bias == EM_ATTN_BIAS_SHAW;
  /* the tables: [nrel, H] bias, [nrel, dk] rel_k, [nrel, dv] rel_v */
  const int64_t ntab[3] = {c->bias == EM_ATTN_BIAS_TABLE ? nrel * c->H : 0,
                           c->bias == EM_ATTN_BIAS_SHAW ? nrel * c->dk : 0,
                           c->bias == EM_ATTN_BIAS_SHAW && c->rel_v ? nrel * c->dv : 0};
  void *q = host_rand(dt, nq, -1.5, 1.5), *k = host_rand(dt, nk, -1.5, 1.5);
  void *v = host_rand(dt, nv, -1, 1), *dout = host_rand(dt, no, -1, 1);
  void *tab[3] = {NULL, NULL, NULL}, *tabc[3] = {NULL, NULL, NULL};
  for (int t = 0; t < 3; t++)
    if (ntab[t]) tab[t] = host_rand(dt, ntab[t], -0.8, 0.8);
  uint8_t *pad = calloc((size_t)(c->B * c->Lk), 1);
  for (int64_t e = 0; e < c->B * c->Lk; e++) pad[e] = c->pad && rng_int(5) == 0;
  int64_t *rows = malloc((size_t)nr * sizeof *rows);
  for (int64_t n = 0; n < nr; n++) rows[n] = tables ? em_attn_rel_row(&d, n - (c->Lk - 1)) : 0;
  double *slopes = malloc((size_t)c->H * sizeof *slopes);
  for (int64_t h = 0; h < c->H; h++) slopes[h] = em_attn_alibi_slope(h, c->H);
  const em_dtype cdt = EM_F32;
  void *qc = q, *kc = k, *vc = v, *dc = dout;
  if (dt == EM_BF16) {
    qc = bf16_widen(q, nq), kc = bf16_widen(k, nk), vc = bf16_widen(v, nv), dc = bf16_widen(dout, no);
    for (int t = 0; t < 3; t++)
      if (tab[t]) tabc[t] = bf16_widen(tab[t], ntab[t]);
  } else {
    for (int t = 0; t < 3; t++) tabc[t] = tab[t];
  }
  void *out[2], *lse[2], *dq[2], *dk[2], *dv[2], *gt[2][3];
  em_status sf[2], sb[2];
  for (int s = 0; s < 2; s++) {
    side sd = {.be = s ? g_cpu : g_gpu};
    const em_dtype dd = s ? cdt : dt;
    const size_t e = em_dtype_size(dd);
    out[s] = malloc(no * 4), lse[s] = malloc(nl * 4), dq[s] = malloc(nq * 4);
    dk[s] = malloc(nk * 4), dv[s] = malloc(nv * 4);
    em_attention_args a = attn_args(&sd, dd, c->B, c->H, c->Lq, c->Lk, c->dk, c->dv, s ? qc : q, s ? kc : k,
                                    s ? vc : v);
    a.key_padding = c->pad ? dput(&sd, pad, c->B * c->Lk) : NULL;
    a.causal = c->causal;
    a.scale = 1.0 / sqrt((double)c->dk);
    a.dropout_p = c->p;
    a.seed = 4242, a.offset = 7;
    if (tables) a.rel_row = dput(&sd, rows, nr * sizeof *rows), a.n_rel = nrel;
    if (c->bias == EM_ATTN_BIAS_ALIBI) a.alibi_slopes = dput(&sd, slopes, c->H * sizeof *slopes);
    const void *tp[3];
    for (int t = 0; t < 3; t++) tp[t] = ntab[t] ? dput(&sd, s ? tabc[t] : tab[t], ntab[t] * e) : NULL;
    a.bias_table = tp[0], a.rel_k = tp[1], a.rel_v = tp[2];
    a.mask_kind = (int)c->mask.kind;
    a.win_left = c->mask.left, a.win_right = c->mask.right;
    a.block = c->mask.kind == EM_ATTN_MASK_BLOCKS ? c->mask.block : 1;
    a.local = c->mask.local, a.global = c->mask.kind ? c->mask.global : 0;
    sf[s] = sd.be->attention_forward(0, &a);
    a.dout = dput(&sd, s ? dc : dout, no * e);
    a.dq = dput(&sd, NULL, nq * e);
    a.dk_ = dput(&sd, NULL, nk * e);
    a.dv_ = dput(&sd, NULL, nv * e);
    void *gp[3];
    for (int t = 0; t < 3; t++) gp[t] = ntab[t] ? dput(&sd, NULL, ntab[t] * e) : NULL;
    a.d_bias_table = gp[0], a.d_rel_k = gp[1], a.d_rel_v = gp[2];
    sb[s] = sf[s] ? sf[s] : sd.be->attention_backward(0, &a);
    dget(&sd, out[s], a.out, no * e);
    dget(&sd, lse[s], a.lse, nl * 4);
    dget(&sd, dq[s], a.dq, nq * e);
    dget(&sd, dk[s], a.dk_, nk * e);
    dget(&sd, dv[s], a.dv_, nv * e);
    for (int t = 0; t < 3; t++) {
      gt[s][t] = ntab[t] ? malloc(ntab[t] * 4) : NULL;
      if (gp[t]) dget(&sd, gt[s][t], gp[t], ntab[t] * e);
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
      if (ntab[t]) wt = fmax(wt, compare(dt, gt[0][t], cdt, gt[1][t], ntab[t], tt, tt));
    expect_close(tb, sb[0], sb[1], wt);
  }
  if (bf) {
    free(qc), free(kc), free(vc), free(dc);
    for (int t = 0; t < 3; t++) free(tabc[t]);
  }
  free(q), free(k), free(v), free(dout), free(pad), free(rows), free(slopes);
  for (int t = 0; t < 3; t++) free(tab[t]);
  for (int s = 0; s < 2; s++) {
    free(out[s]), free(lse[s]), free(dq[s]), free(dk[s]), free(dv[s]);
    for (int t = 0; t < 3; t++) free(gt[s][t]);
  }
}

#define NOMASK {EM_ATTN_MASK_NONE, 0, 0, 0, 0, 0}
#define WINDOW(l, r, g) {EM_ATTN_MASK_WINDOW, l, r, 0, 0, g}
#define BLOCKS(b, loc, g) {EM_ATTN_MASK_BLOCKS, 0, 0, b, loc, g}
#define BIAS(kind, rel, maxd, nb, bidir, relv) kind, rel, maxd, nb, bidir, relv

void test_attention_decl(void) {
  const decl_case cases[] = {
    {"alibi", 2, 3, 100, 100, 32, 32, false, false, 0,
     BIAS(EM_ATTN_BIAS_ALIBI, EM_ATTN_REL_CLIP, 0, 0, false, false), NOMASK},
    {"alibi cross", 1, 2, 70, 150, 16, 16, true, true, 0,
     BIAS(EM_ATTN_BIAS_ALIBI, EM_ATTN_REL_CLIP, 0, 0, false, false), NOMASK},
    {"t5 bidirectional", 1, 2, 130, 130, 16, 16, false, true, 0,
     BIAS(EM_ATTN_BIAS_TABLE, EM_ATTN_REL_T5, 20, 8, true, false), NOMASK},
    {"t5 unidirectional", 1, 3, 90, 90, 24, 24, true, false, 0,
     BIAS(EM_ATTN_BIAS_TABLE, EM_ATTN_REL_T5, 16, 6, false, false), NOMASK},
    {"clipped table cross", 1, 2, 80, 120, 16, 16, false, false, 0.1,
     BIAS(EM_ATTN_BIAS_TABLE, EM_ATTN_REL_CLIP, 5, 0, false, false), NOMASK},
    {"abs-clipped table", 2, 2, 65, 65, 16, 16, true, false, 0,
     BIAS(EM_ATTN_BIAS_TABLE, EM_ATTN_REL_ABS_CLIP, 7, 0, false, false), NOMASK},
    {"shaw rel_k+rel_v", 1, 2, 100, 100, 24, 40, false, false, 0,
     BIAS(EM_ATTN_BIAS_SHAW, EM_ATTN_REL_CLIP, 4, 0, false, true), NOMASK},
    {"shaw rel_k only cross", 1, 2, 70, 130, 16, 16, true, false, 0,
     BIAS(EM_ATTN_BIAS_SHAW, EM_ATTN_REL_CLIP, 16, 0, false, false), NOMASK},
    {"shaw dropout", 1, 1, 66, 66, 16, 16, false, true, 0.2,
     BIAS(EM_ATTN_BIAS_SHAW, EM_ATTN_REL_CLIP, 80, 0, false, true), NOMASK},
    {"shaw head dims > 64", 1, 1, 70, 70, 96, 80, true, false, 0,
     BIAS(EM_ATTN_BIAS_SHAW, EM_ATTN_REL_CLIP, 3, 0, false, true), NOMASK},
    {"sliding window", 1, 2, 200, 200, 16, 16, false, false, 0,
     BIAS(EM_ATTN_BIAS_NONE, EM_ATTN_REL_CLIP, 0, 0, false, false), WINDOW(20, 5, 0)},
    {"causal + window", 1, 2, 256, 256, 16, 16, true, true, 0,
     BIAS(EM_ATTN_BIAS_NONE, EM_ATTN_REL_CLIP, 0, 0, false, false), WINDOW(30, 0, 0)},
    {"blocks + global tokens", 1, 2, 200, 200, 16, 16, false, false, 0,
     BIAS(EM_ATTN_BIAS_NONE, EM_ATTN_REL_CLIP, 0, 0, false, false), BLOCKS(16, 1, 8)},
    {"window + global tokens", 1, 1, 192, 192, 16, 16, false, false, 0.1,
     BIAS(EM_ATTN_BIAS_NONE, EM_ATTN_REL_CLIP, 0, 0, false, false), WINDOW(10, 10, 5)},
    {"window cross + t5", 1, 2, 50, 200, 16, 16, false, false, 0,
     BIAS(EM_ATTN_BIAS_TABLE, EM_ATTN_REL_T5, 32, 10, true, false), WINDOW(8, 8, 0)},
    {"blocks cross (Lq > Lk) + alibi", 1, 2, 150, 90, 16, 16, true, false, 0,
     BIAS(EM_ATTN_BIAS_ALIBI, EM_ATTN_REL_CLIP, 0, 0, false, false), BLOCKS(20, 0, 3)},
    {"shaw + window", 1, 2, 150, 150, 16, 24, false, true, 0,
     BIAS(EM_ATTN_BIAS_SHAW, EM_ATTN_REL_CLIP, 6, 0, false, true), WINDOW(40, 12, 0)},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    decl_run(&cases[i], EM_F32);
    decl_run(&cases[i], EM_BF16);
  }
}
