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
*/
#include "attn_common.h"

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
  .compose = rp_compose,
};

EM_PLUGIN_EXPORT const em_plugin_info ember_plugin_info = {
  EM_ATTENTION_ABI_VERSION, EM_PLUGIN_ATTENTION, "relpos", "1.0",
  "relative-position attention: Shaw 2018, T5 bucketed bias, ALiBi"};

EM_PLUGIN_EXPORT const void *ember_plugin_init(char *err, size_t errlen) {
  (void)err, (void)errlen;
  return &RELPOS;
}
