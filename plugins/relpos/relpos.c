/*
** relpos.c -- attention with relative positions, composed of core ops (so
** it runs on any backend and autograd differentiates it, tables included).
** Relative position of key j to query i: r = j - p with p = i + Lk - Lq
** (bottom-right, as causal).
**
** mode = "shaw"  (Shaw et al. 2018): learned tables rel_k [2K+1, dk] and
**   rel_v [2K+1, dv], shared by the heads, K = max_relative_position:
**     e_ij = (q_i . k_j + q_i . rel_k[clip(r)]) * scale
**     out_i = sum_j P_ij (v_j + rel_v[clip(r)])
**   computed as gather(q rel_k^T) and scatter_add(P) rel_v, so no
**   [Lq, Lk, d] tensor is built.
** mode = "t5"  (Raffel et al. 2020): a learned bias table [num_buckets, H]
**   indexed by T5's log-spaced bucket of r (bidirectional or not, exact
**   below num_buckets/2 (or /4 when bidirectional), log-spaced up to
**   max_distance), added to the scaled scores. (T5 itself uses scale=1:
**   pass scale=1 to the call to match it.)
** mode = "alibi"  (Press et al. 2022): no parameters; head h adds
**   -slope_h * |r| with the paper's slopes 2^(-8/n), 2^(-16/n), ...; for a
**   head count n that is not a power of 2, the slopes of the closest power
**   of 2 below, then every other slope of the next power of 2.
** With zero tables, shaw and t5 equal the standard variant exactly.
**
** On host memory a flash-style kernel (relpos_kernel.h) adds the relative
** terms per (i, j): O(L) memory, the logsumexp saved and the backward
** recomputing, table gradients summed per (b, h) in a fixed order. On
** other backends the same math is composed of core ops (gather /
** scatter_add / embedding), which materialises [B,H,Lq,Lk].
*/
#include "attn_common.h"
#include "ember_philox.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const em_attn_option_spec OPTIONS[] = {
  {.name = "mode", .type = EM_ATTN_OPT_STRING, .default_str = "shaw", .choices = "shaw|t5|alibi",
   .help = "Shaw learned key/value embeddings, T5 bucketed bias, or ALiBi slopes"},
  {.name = "max_relative_position", .type = EM_ATTN_OPT_INT, .default_num = 16, .bounded = true,
   .min = 0, .max = 1e6, .help = "shaw: relative positions are clipped to +-this"},
  {.name = "num_buckets", .type = EM_ATTN_OPT_INT, .default_num = 32, .bounded = true, .min = 2,
   .max = 1e6, .help = "t5: number of buckets"},
  {.name = "max_distance", .type = EM_ATTN_OPT_INT, .default_num = 128, .bounded = true, .min = 1,
   .max = 1e9, .help = "t5: distances from here on share the last bucket"},
  {.name = "bidirectional", .type = EM_ATTN_OPT_BOOL, .default_num = 1,
   .help = "t5: separate buckets for keys before and after the query"},
  {.name = "kernel", .type = EM_ATTN_OPT_STRING, .default_str = "auto", .choices = "auto|dense",
   .help = "auto: the host kernel on host memory; dense: core ops everywhere"},
};

static int mode_of(const em_attn_options *o) {
  const char *m = em_attn_opt_str(o, "mode");
  return strcmp(m, "shaw") == 0 ? 0 : strcmp(m, "t5") == 0 ? 1 : 2;
}

static em_status rp_check(const em_attn_options *o, const em_attn_dims *d) {
  (void)d;
  if (mode_of(o) == 1) {
    int64_t nb = em_attn_opt_int(o, "num_buckets");
    if (em_attn_opt_bool(o, "bidirectional") && nb < 4)
      return em_error(EM_ERR_ARG, "relpos t5: bidirectional needs num_buckets >= 4, got %lld", (long long)nb);
  }
  return EM_OK;
}

static em_status rp_init_params(const em_attn_options *o, const em_attn_dims *d, em_dtype dt,
                                em_device dev, int *n, em_attn_param *params) {
  *n = 0;
  int mode = mode_of(o);
  if (mode == 0) {
    int64_t R = 2 * em_attn_opt_int(o, "max_relative_position") + 1;
    int64_t sk[2] = {R, d->dk}, sv[2] = {R, d->dv};
    em_status s = em_normal(&params[0].tensor, 2, sk, 0, 0.02, dt, dev);
    if (s == EM_OK) s = em_normal(&params[1].tensor, 2, sv, 0, 0.02, dt, dev);
    if (s != EM_OK) {
      em_release(params[0].tensor), params[0].tensor = NULL;
      return s;
    }
    params[0].name = "rel_k", params[0].learned = true;
    params[1].name = "rel_v", params[1].learned = true;
    *n = 2;
  } else if (mode == 1) {
    int64_t sh[2] = {em_attn_opt_int(o, "num_buckets"), d->heads};
    em_status s = em_normal(&params[0].tensor, 2, sh, 0, 0.02, dt, dev);
    if (s != EM_OK) return s;
    params[0].name = "bias", params[0].learned = true;
    *n = 1;
  }
  return EM_OK;
}

#define EM_TRY_RK(expr)              \
  do {                               \
    em_status rk_s_ = (expr);        \
    if (rk_s_ != EM_OK) return rk_s_; \
  } while (0)

/* T5's relative_position_bucket (as in the reference implementation). */
static int64_t t5_bucket(int64_t rel, int64_t nb, int64_t max_distance, bool bidirectional) {
  int64_t ret = 0, n;
  if (bidirectional) {
    nb /= 2;
    if (rel > 0) ret += nb;
    n = rel < 0 ? -rel : rel;
  } else {
    n = rel < 0 ? -rel : 0;
  }
  int64_t max_exact = nb / 2;
  if (n < max_exact) return ret + n;
  int64_t large = max_exact + (int64_t)(log((double)n / (double)max_exact) /
                                        log((double)max_distance / (double)max_exact) *
                                        (double)(nb - max_exact));
  if (large > nb - 1) large = nb - 1;
  return ret + large;
}

/* ALiBi slope of head h of n (the paper's schedule). */
static double alibi_slope(int64_t h, int64_t n) {
  int64_t p = 1;
  while (p * 2 <= n) p *= 2;
  if (h < p) return pow(2.0, -8.0 / (double)p * (double)(h + 1));
  /* the rest: every other slope of 2p, starting at the first */
  return pow(2.0, -8.0 / (double)(2 * p) * (double)(2 * (h - p) + 1));
}

/* An int64 [Lq, Lk] tensor of f(r) for r = j - p. */
static em_status rel_index(const em_attn_call *c, const em_attn_options *o, int mode, em_tensor **out) {
  int64_t *idx = malloc((size_t)(c->Lq * c->Lk) * sizeof *idx);
  if (!idx) return em_error(EM_ERR_OOM, "out of memory");
  int64_t K = em_attn_opt_int(o, "max_relative_position"), nb = em_attn_opt_int(o, "num_buckets");
  int64_t md = em_attn_opt_int(o, "max_distance");
  bool bi = em_attn_opt_bool(o, "bidirectional");
  for (int64_t i = 0; i < c->Lq; i++)
    for (int64_t j = 0; j < c->Lk; j++) {
      int64_t r = j - ac_qpos(c, i);
      idx[i * c->Lk + j] = mode == 0 ? (r < -K ? -K : r > K ? K : r) + K : t5_bucket(r, nb, md, bi);
    }
  int64_t shape[2] = {c->Lq, c->Lk};
  em_status s = em_from_host(out, 2, shape, EM_I64, idx, c->q->device);
  free(idx);
  return s;
}

/* ALiBi bias [H, Lq, Lk] in q's dtype. */
static em_status alibi_bias(const em_attn_call *c, em_tensor **out) {
  int64_t n = c->H * c->Lq * c->Lk;
  double *b = malloc((size_t)n * sizeof *b);
  if (!b) return em_error(EM_ERR_OOM, "out of memory for a [%lld, %lld, %lld] ALiBi bias", (long long)c->H,
                          (long long)c->Lq, (long long)c->Lk);
  for (int64_t h = 0; h < c->H; h++) {
    double m = alibi_slope(h, c->H);
    for (int64_t i = 0; i < c->Lq; i++)
      for (int64_t j = 0; j < c->Lk; j++) {
        int64_t r = j - ac_qpos(c, i);
        b[(h * c->Lq + i) * c->Lk + j] = -m * (double)(r < 0 ? -r : r);
      }
  }
  int64_t shape[3] = {c->H, c->Lq, c->Lk};
  em_tensor *t = NULL;
  em_status s = em_from_host(&t, 3, shape, EM_F64, b, c->q->device);
  free(b);
  if (s == EM_OK) s = em_to_dtype(out, t, c->q->dtype);
  em_release(t);
  return s;
}

/* T5: table [nb, H] -> bias [H, Lq, Lk] (differentiable in the table). */
static em_status t5_bias(const em_attn_call *c, em_tensor **out) {
  em_tensor *idx = NULL, *e = NULL;
  em_status s = rel_index(c, c->options, 1, &idx);
  if (s == EM_OK) s = em_embedding(&e, c->params[0], idx); /* [Lq, Lk, H] */
  int perm[3] = {2, 0, 1};
  if (s == EM_OK) s = em_permute(out, e, 3, perm);
  em_release(idx), em_release(e);
  return s;
}

static em_status shaw(const em_attn_call *c, em_tensor **out, em_tensor **weights) {
  em_tensor *rel_k = c->params[0], *rel_v = c->params[1];
  int64_t R = rel_k->shape[0];
  em_tensor *idx2 = NULL, *idx = NULL, *kt = NULL, *qk = NULL, *rkt = NULL, *qr = NULL, *qrg = NULL;
  em_tensor *sum = NULL, *sc = NULL, *allowed = NULL, *p = NULL, *pd = NULL, *pv = NULL, *z = NULL;
  em_tensor *pb = NULL, *pbv = NULL;
  int64_t full[4] = {c->B, c->H, c->Lq, c->Lk}, zs[4] = {c->B, c->H, c->Lq, R};
  em_status s = rel_index(c, c->options, 0, &idx2);
  if (s == EM_OK) {
    em_tensor *e = NULL;
    s = em_expand(&e, idx2, 4, full);
    if (s == EM_OK) s = em_contiguous(&idx, e);
    em_release(e);
  }
  if (s == EM_OK) s = em_transpose(&kt, c->k, -2, -1);
  if (s == EM_OK) s = em_matmul(&qk, c->q, kt);               /* [B,H,Lq,Lk] */
  if (s == EM_OK) s = em_transpose(&rkt, rel_k, 0, 1);
  if (s == EM_OK) s = em_matmul(&qr, c->q, rkt);              /* [B,H,Lq,R] */
  if (s == EM_OK) s = em_gather(&qrg, qr, 3, idx);            /* [B,H,Lq,Lk] */
  if (s == EM_OK) s = em_add(&sum, qk, qrg);
  if (s == EM_OK) s = em_binary_scalar(&sc, EM_MUL, sum, c->scale);
  if (s == EM_OK) s = ac_allowed(c, NULL, &allowed);
  if (s == EM_OK) s = ac_softmax(c, sc, allowed, weights ? &p : NULL, &pd);
  if (s == EM_OK) s = em_matmul(&pv, pd, c->v);
  if (s == EM_OK) s = em_zeros(&z, 4, zs, c->q->dtype, c->q->device);
  if (s == EM_OK) s = em_scatter_add(&pb, z, 3, idx, pd);     /* P summed per relative position */
  if (s == EM_OK) s = em_matmul(&pbv, pb, rel_v);
  if (s == EM_OK) s = em_add(out, pv, pbv);
  em_release(idx2), em_release(idx), em_release(kt), em_release(qk), em_release(rkt), em_release(qr);
  em_release(qrg), em_release(sum), em_release(sc), em_release(allowed), em_release(pd);
  em_release(pv), em_release(z), em_release(pb), em_release(pbv);
  if (s != EM_OK) {
    em_release(p);
    return s;
  }
  if (weights) *weights = p;
  return EM_OK;
}


/* ---- host kernel (route 1) ---------------------------------------------- */

typedef struct rk_ctx {
  const em_attn_call *c;
  int mode;                 /* 0 shaw, 1 t5, 2 alibi */
  const uint8_t *kp, *mbool;
  const void *madd;
  int64_t ms[4];
  const int64_t *rel_index; /* table row of r, at r + r0 */
  int64_t r0, ntab;         /* ntab: rows of rel_k/rel_v (shaw) or buckets (t5) */
  const void *rk, *rv, *tbl;
  const double *slopes;     /* alibi, [H] */
} rk_ctx;

#define T float
#define RK_(name) rk_##name##_f32
#include "relpos_kernel.h"
#undef T
#undef RK_
#define T double
#define RK_(name) rk_##name##_f64
#include "relpos_kernel.h"
#undef T
#undef RK_

typedef struct rk_saved {
  em_attn_call c;            /* kept copy (q, k, v, masks retained) */
  int mode;
  em_tensor *tab[2];         /* shaw: rel_k, rel_v; t5: table */
  int64_t *rel_index;
  double *slopes;
  int64_t r0, ntab;
  em_tensor *out, *lse;
} rk_saved;

static void rk_free(void *p) {
  rk_saved *s = p;
  if (!s) return;
  ac_call_drop(&s->c);
  em_release(s->tab[0]), em_release(s->tab[1]);
  free(s->rel_index), free(s->slopes);
  em_release(s->out), em_release(s->lse);
  free(s);
}

static void rk_ctx_of(rk_ctx *x, const rk_saved *s) {
  const em_attn_call *c = &s->c;
  memset(x, 0, sizeof *x);
  x->c = c, x->mode = s->mode;
  if (c->key_padding) x->kp = em_data(c->key_padding);
  if (c->mask) {
    if (c->mask->dtype == EM_BOOL) x->mbool = em_data(c->mask);
    else x->madd = em_data(c->mask);
    for (int d = 0; d < 4; d++) x->ms[d] = c->mask->stride[d];
  }
  x->rel_index = s->rel_index, x->r0 = s->r0, x->ntab = s->ntab, x->slopes = s->slopes;
  if (s->mode == 0) x->rk = em_data(s->tab[0]), x->rv = em_data(s->tab[1]);
  if (s->mode == 1) x->tbl = em_data(s->tab[0]);
}

static bool rp_can_forward(const em_attn_call *c) {
  return ac_host(c) && strcmp(em_attn_opt_str(c->options, "kernel"), "dense") != 0;
}

static em_status rp_forward(const em_attn_call *c, em_tensor **out, em_tensor **weights, void **saved) {
  int mode = mode_of(c->options);
  if (c->n_params != (mode == 0 ? 2 : mode == 1 ? 1 : 0))
    return em_error(EM_ERR_ARG, "relpos %s: wrong number of tables (%d)", em_attn_opt_str(c->options, "mode"), c->n_params);
  rk_saved *s = calloc(1, sizeof *s);
  if (!s) return em_error(EM_ERR_OOM, "out of memory");
  s->mode = mode;
  ac_call_keep(&s->c, c);
  for (int i = 0; i < c->n_params; i++) s->tab[i] = em_retain(c->params[i]);
  /* r = j - p runs over [-(Lk-1), Lq-1] */
  int64_t nr = c->Lk + c->Lq - 1;
  s->r0 = c->Lk - 1;
  s->rel_index = calloc((size_t)nr, sizeof *s->rel_index);
  s->slopes = calloc((size_t)c->H, sizeof *s->slopes);
  em_status st = s->rel_index && s->slopes ? EM_OK : em_error(EM_ERR_OOM, "out of memory");
  if (st == EM_OK) {
    int64_t K = em_attn_opt_int(c->options, "max_relative_position"), nb = em_attn_opt_int(c->options, "num_buckets");
    int64_t md = em_attn_opt_int(c->options, "max_distance");
    bool bi = em_attn_opt_bool(c->options, "bidirectional");
    s->ntab = mode == 0 ? 2 * K + 1 : nb;
    for (int64_t n = 0; n < nr; n++) {
      int64_t r = n - s->r0;
      s->rel_index[n] = mode == 0 ? (r < -K ? -K : r > K ? K : r) + K : mode == 1 ? t5_bucket(r, nb, md, bi) : 0;
    }
    for (int64_t h = 0; h < c->H; h++) s->slopes[h] = alibi_slope(h, c->H);
    if (mode == 1 && c->params[0]->shape[1] != c->H)
      st = em_error(EM_ERR_SHAPE, "relpos t5: the bias table has %lld heads, q has %lld",
                    (long long)c->params[0]->shape[1], (long long)c->H);
  }
  int64_t oshape[4] = {c->B, c->H, c->Lq, c->dims.dv}, lshape[3] = {c->B, c->H, c->Lq};
  int64_t wshape[4] = {c->B, c->H, c->Lq, c->Lk};
  em_tensor *w = NULL;
  if (st == EM_OK) st = em_empty(&s->out, 4, oshape, c->q->dtype, c->q->device);
  if (st == EM_OK) st = em_empty(&s->lse, 3, lshape, EM_F64, c->q->device);
  if (st == EM_OK && weights) st = em_zeros(&w, 4, wshape, c->q->dtype, c->q->device);
  if (st == EM_OK) {
    rk_ctx x;
    rk_ctx_of(&x, s);
    st = c->q->dtype == EM_F32 ? rk_forward_f32(&x, em_data(s->out), em_data(s->lse), w ? em_data(w) : NULL)
                               : rk_forward_f64(&x, em_data(s->out), em_data(s->lse), w ? em_data(w) : NULL);
  }
  if (st != EM_OK) {
    em_release(w);
    rk_free(s);
    return st;
  }
  *out = em_retain(s->out);
  if (weights) *weights = w;
  if (c->need_grad) *saved = s;
  else rk_free(s);
  return EM_OK;
}

/* Sums BH slices of n elements of dt into a new tensor of `shape`. */
static em_status sum_slices(em_tensor **out, const void *slices, int64_t BH, int64_t n, int ndim,
                            const int64_t *shape, em_dtype dt, em_device dev) {
  EM_TRY_RK(em_zeros(out, ndim, shape, dt, dev));
  for (int64_t bh = 0; bh < BH; bh++)
    for (int64_t e = 0; e < n; e++) {
      if (dt == EM_F32) ((float *)em_data(*out))[e] += ((const float *)slices)[bh * n + e];
      else ((double *)em_data(*out))[e] += ((const double *)slices)[bh * n + e];
    }
  return EM_OK;
}

static em_status rp_backward(void *p, em_tensor *dout, const bool *needs, em_tensor **grads) {
  rk_saved *s = p;
  (void)needs;
  if (!s) return em_error(EM_ERR_AUTOGRAD, "backward without saved state");
  const em_attn_call *c = &s->c;
  int64_t BH = c->B * c->H, dk = c->dims.dk, dv = c->dims.dv;
  int64_t nrk = s->mode == 0 ? s->ntab * dk : 0, nrv = s->mode == 0 ? s->ntab * dv : 0;
  int64_t ntb = s->mode == 1 ? s->ntab * c->H : 0;
  size_t es = em_dtype_size(c->q->dtype);
  void *grk = calloc((size_t)(BH * nrk + 1), es), *grv = calloc((size_t)(BH * nrv + 1), es);
  void *gtb = calloc((size_t)(BH * ntb + 1), es);
  em_tensor *dq = NULL, *dk_ = NULL, *dvt = NULL, *t0 = NULL, *t1 = NULL;
  em_status st = grk && grv && gtb ? EM_OK : em_error(EM_ERR_OOM, "out of memory");
  if (st == EM_OK) st = em_empty(&dq, 4, c->q->shape, c->q->dtype, c->q->device);
  if (st == EM_OK) st = em_empty(&dk_, 4, c->k->shape, c->k->dtype, c->k->device);
  if (st == EM_OK) st = em_empty(&dvt, 4, c->v->shape, c->v->dtype, c->v->device);
  if (st == EM_OK) {
    rk_ctx x;
    rk_ctx_of(&x, s);
    if (c->q->dtype == EM_F32)
      st = rk_backward_f32(&x, em_data(dout), em_data(s->out), em_data(s->lse), em_data(dq), em_data(dk_),
                           em_data(dvt), grk, grv, gtb);
    else
      st = rk_backward_f64(&x, em_data(dout), em_data(s->out), em_data(s->lse), em_data(dq), em_data(dk_),
                           em_data(dvt), grk, grv, gtb);
  }
  if (st == EM_OK && s->mode == 0) {
    st = sum_slices(&t0, grk, BH, nrk, 2, s->tab[0]->shape, c->q->dtype, c->q->device);
    if (st == EM_OK) st = sum_slices(&t1, grv, BH, nrv, 2, s->tab[1]->shape, c->q->dtype, c->q->device);
  } else if (st == EM_OK && s->mode == 1) {
    st = sum_slices(&t0, gtb, BH, ntb, 2, s->tab[0]->shape, c->q->dtype, c->q->device);
  }
  free(grk), free(grv), free(gtb);
  if (st != EM_OK) {
    em_release(dq), em_release(dk_), em_release(dvt), em_release(t0), em_release(t1);
    return st;
  }
  grads[0] = dq, grads[1] = dk_, grads[2] = dvt;
  grads[3] = t0, grads[4] = t1; /* NULL beyond the variant's tables */
  return EM_OK;
}

/* ---- composed of core ops (route 2, any backend) ------------------------ */

static em_status rp_compose(const em_attn_call *c, em_tensor **out, em_tensor **weights) {
  int mode = mode_of(c->options);
  if (mode == 0) {
    if (c->n_params != 2) return em_error(EM_ERR_ARG, "relpos shaw needs its rel_k and rel_v tables");
    return shaw(c, out, weights);
  }
  if (mode == 1 && c->n_params != 1) return em_error(EM_ERR_ARG, "relpos t5 needs its bias table");
  em_tensor *bias = NULL;
  em_status s = mode == 1 ? t5_bias(c, &bias) : alibi_bias(c, &bias);
  if (s == EM_OK) s = ac_dense(c, bias, NULL, out, weights);
  em_release(bias);
  return s;
}

static const em_attention_variant RELPOS = {
  .abi_version = EM_ATTENTION_ABI_VERSION,
  .struct_size = sizeof(em_attention_variant),
  .name = "relpos",
  .version = "1.0",
  .description = "relative positions: Shaw (learned key/value tables), T5 buckets, ALiBi",
  .caps = EM_ATTN_CAP_ALL,
  .n_options = (int)(sizeof OPTIONS / sizeof OPTIONS[0]),
  .options = OPTIONS,
  .check = rp_check,
  .init_params = rp_init_params,
  .forward = rp_forward,
  .backward = rp_backward,
  .free_saved = rk_free,
  .compose = rp_compose,
  .can_forward = rp_can_forward,
};

EM_PLUGIN_EXPORT const em_plugin_info ember_plugin_info = {
  EM_ATTENTION_ABI_VERSION, EM_PLUGIN_ATTENTION, "relpos", "1.0",
  "relative-position attention: Shaw 2018, T5 bucketed bias, ALiBi"};

EM_PLUGIN_EXPORT const void *ember_plugin_init(char *err, size_t errlen) {
  (void)err, (void)errlen;
  return &RELPOS;
}
