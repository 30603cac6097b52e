/*
** attention_compose.c -- attention as a composition of core ops (any
** backend, differentiable through autograd): the composed route of every
** variant, including the composed fallback of a declaration (em_attn_decl)
** when the backend's fused kernel does not cover a call; and the helpers a
** variant uses for its own compositions and saved state.
*/
#include "internal.h"
#include "ember_attention.h"

#include <math.h>
#include <string.h>

void em_attn_call_keep(em_attn_call *dst, const em_attn_call *src) {
  *dst = *src;
  em_retain(dst->q), em_retain(dst->k), em_retain(dst->v);
  if (dst->key_padding) em_retain(dst->key_padding);
  if (dst->mask) em_retain(dst->mask);
  dst->options = NULL; /* owned by the module, may change before backward */
  dst->params = NULL;
  dst->n_params = 0;
}

void em_attn_call_drop(em_attn_call *c) {
  em_release(c->q), em_release(c->k), em_release(c->v);
  em_release(c->key_padding), em_release(c->mask);
  memset(c, 0, sizeof *c);
}

bool em_attn_on_host(const em_attn_call *c) { return em_backend_of(c->q)->host_memory; }

/* a AND b, either may be NULL; takes ownership of both. */
static em_status and_into(em_tensor **acc, em_tensor *b) {
  if (!b) return EM_OK;
  if (!*acc) {
    *acc = b;
    return EM_OK;
  }
  em_tensor *r = NULL;
  em_status s = em_binary(&r, EM_AND, *acc, b);
  em_release(*acc), em_release(b);
  *acc = r;
  return s;
}

/* Causal: [Lq, Lk] with j <= i + Lk - Lq. */
static em_status causal_mask(const em_attn_call *c, em_tensor **out) {
  em_tensor *i = NULL, *j = NULL, *i2 = NULL, *j2 = NULL;
  em_device dev = c->q->device;
  em_status s = em_arange(&i, (double)(c->Lk - c->Lq), (double)c->Lk, 1, EM_I64, dev);
  if (s == EM_OK) s = em_arange(&j, 0, (double)c->Lk, 1, EM_I64, dev);
  int64_t si[2] = {c->Lq, 1}, sj[2] = {1, c->Lk};
  if (s == EM_OK) s = em_reshape(&i2, i, 2, si);
  if (s == EM_OK) s = em_reshape(&j2, j, 2, sj);
  if (s == EM_OK) s = em_binary(out, EM_LE, j2, i2);
  em_release(i), em_release(j), em_release(i2), em_release(j2);
  return s;
}

em_status em_attn_allowed(const em_attn_call *c, em_tensor *extra, em_tensor **allowed) {
  *allowed = NULL;
  bool prev = em_set_grad_enabled(false);
  em_tensor *acc = NULL, *t = NULL;
  em_status s = EM_OK;
  if (c->causal && (s = causal_mask(c, &t)) == EM_OK) s = and_into(&acc, t);
  if (s == EM_OK && c->key_padding) {
    em_tensor *np = NULL;
    int64_t sh[4] = {c->B, 1, 1, c->Lk};
    s = em_unary(&np, EM_NOT, c->key_padding, 0, 0);
    if (s == EM_OK) s = em_reshape(&t, np, 4, sh);
    em_release(np);
    if (s == EM_OK) s = and_into(&acc, t);
  }
  if (s == EM_OK && c->mask && c->mask->dtype == EM_BOOL) s = and_into(&acc, em_retain(c->mask));
  if (s == EM_OK && extra) s = and_into(&acc, em_retain(extra));
  em_set_grad_enabled(prev);
  if (s != EM_OK) {
    em_release(acc);
    return s;
  }
  *allowed = acc;
  return EM_OK;
}

em_status em_attn_softmax(const em_attn_call *c, em_tensor *scores, em_tensor *allowed,
                     em_tensor **probs, em_tensor **dropped) {
  if (probs) *probs = NULL;
  *dropped = NULL;
  em_tensor *s1 = em_retain(scores), *t = NULL;
  em_status s = EM_OK;
  if (c->mask && c->mask->dtype != EM_BOOL) {
    /* a float mask of another dtype (float32 beside bfloat16 q) joins the
    ** scores in their dtype, as the fused kernel takes it: added as it is,
    ** it would promote the probabilities and fail the product with v */
    em_tensor *m = em_retain(c->mask), *mc = NULL;
    if (m->dtype != s1->dtype && (s = em_to_dtype(&mc, m, s1->dtype)) == EM_OK) em_release(m), m = mc;
    if (s == EM_OK) s = em_add(&t, s1, m);
    em_release(m);
    em_release(s1);
    s1 = t;
  }
  if (s == EM_OK && allowed) {
    em_tensor *na = NULL;
    bool prev = em_set_grad_enabled(false);
    s = em_unary(&na, EM_NOT, allowed, 0, 0);
    em_set_grad_enabled(prev);
    if (s == EM_OK) s = em_masked_fill(&t, s1, na, -INFINITY);
    em_release(na);
    em_release(s1);
    s1 = s == EM_OK ? t : NULL;
  }
  /* Rows that see nothing (max = -inf): softmax of zeros, then times 0. */
  em_tensor *m = NULL, *valid = NULL, *validf = NULL, *s2 = NULL, *p = NULL, *p2 = NULL;
  if (s == EM_OK) {
    bool prev = em_set_grad_enabled(false);
    s = em_max(&m, NULL, s1, -1, true);
    if (s == EM_OK) s = em_binary_scalar(&valid, EM_GT, m, -INFINITY);
    if (s == EM_OK) s = em_to_dtype(&validf, valid, scores->dtype);
    em_set_grad_enabled(prev);
  }
  if (s == EM_OK) {
    em_tensor *inval = NULL;
    bool prev = em_set_grad_enabled(false);
    s = em_unary(&inval, EM_NOT, valid, 0, 0);
    em_set_grad_enabled(prev);
    if (s == EM_OK) s = em_masked_fill(&s2, s1, inval, 0);
    em_release(inval);
  }
  if (s == EM_OK) s = em_softmax(&p, s2, -1);
  if (s == EM_OK) s = em_mul(&p2, p, validf);
  em_release(s1), em_release(m), em_release(valid), em_release(validf), em_release(s2), em_release(p);
  if (s != EM_OK) {
    em_release(p2);
    return s;
  }
  if (c->dropout_p > 0) {
    /* the call's stream (attention.c reserved it): the fused kernel's
    ** rule on the same row-major [B,H,Lq,Lk] grid, so need_weights and
    ** kernel = "composed" drop what the fused call drops */
    s = em__dropout_at(dropped, p2, c->dropout_p, c->seed, c->offset);
    if (s != EM_OK) {
      em_release(p2);
      return s;
    }
  } else {
    *dropped = em_retain(p2);
  }
  if (probs) *probs = p2;
  else em_release(p2);
  return EM_OK;
}

em_status em_attn_dense(const em_attn_call *c, em_tensor *bias, em_tensor *extra_allowed,
                   em_tensor **out, em_tensor **weights) {
  *out = NULL;
  if (weights) *weights = NULL;
  em_tensor *kt = NULL, *sc = NULL, *sc2 = NULL, *allowed = NULL, *p = NULL, *pd = NULL;
  em_status s = em_transpose(&kt, c->k, -2, -1);
  if (s == EM_OK) s = em_matmul(&sc, c->q, kt);
  if (s == EM_OK) s = em_binary_scalar(&sc2, EM_MUL, sc, c->scale);
  em_release(sc);
  sc = sc2, sc2 = NULL;
  if (s == EM_OK && bias) {
    s = em_add(&sc2, sc, bias);
    em_release(sc);
    sc = sc2, sc2 = NULL;
  }
  if (s == EM_OK) s = em_attn_allowed(c, extra_allowed, &allowed);
  if (s == EM_OK) s = em_attn_softmax(c, sc, allowed, weights ? &p : NULL, &pd);
  if (s == EM_OK) s = em_matmul(out, pd, c->v);
  em_release(kt), em_release(sc), em_release(allowed), em_release(pd);
  if (s != EM_OK) {
    em_release(p);
    em_release(*out);
    *out = NULL;
    return s;
  }
  if (weights) *weights = p;
  return EM_OK;
}

/* ------------------------------------------------------------------ */
/* Declarations: the shared arithmetic and the composed fallback       */
/* ------------------------------------------------------------------ */

void em_attn_decl_init(em_attn_decl *d) {
  memset(d, 0, sizeof *d);
  d->table_param = d->rel_k_param = d->rel_v_param = -1;
}

int64_t em_attn_decl_rows(const em_attn_decl *d) {
  if (d->bias != EM_ATTN_BIAS_TABLE && d->bias != EM_ATTN_BIAS_SHAW) return 0;
  switch (d->rel) {
  case EM_ATTN_REL_CLIP: return 2 * d->max_distance + 1;
  case EM_ATTN_REL_ABS_CLIP: return d->max_distance + 1;
  default: return d->num_buckets;
  }
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

int64_t em_attn_rel_row(const em_attn_decl *d, int64_t r) {
  const int64_t K = d->max_distance;
  switch (d->rel) {
  case EM_ATTN_REL_CLIP: return (r < -K ? -K : r > K ? K : r) + K;
  case EM_ATTN_REL_ABS_CLIP: {
    const int64_t a = r < 0 ? -r : r;
    return a > K ? K : a;
  }
  default: return t5_bucket(r, d->num_buckets, d->max_distance, d->bidirectional);
  }
}

double em_attn_alibi_slope(int64_t h, int64_t n) {
  int64_t p = 1;
  while (p * 2 <= n) p *= 2;
  if (h < p) return pow(2.0, -8.0 / (double)p * (double)(h + 1));
  /* the rest: every other slope of 2p, starting at the first */
  return pow(2.0, -8.0 / (double)(2 * p) * (double)(2 * (h - p) + 1));
}

/* An int64 [Lq, Lk] tensor of the table row of every (i, j). */
static em_status rel_rows(const em_attn_call *c, const em_attn_decl *d, em_tensor **out) {
  int64_t *idx = malloc((size_t)(c->Lq * c->Lk) * sizeof *idx);
  if (!idx) return em_error(EM_ERR_OOM, "attention: out of memory for [%lld, %lld] table rows",
                            (long long)c->Lq, (long long)c->Lk);
  for (int64_t i = 0; i < c->Lq; i++)
    for (int64_t j = 0; j < c->Lk; j++) idx[i * c->Lk + j] = em_attn_rel_row(d, j - em_attn_qpos(c, i));
  int64_t shape[2] = {c->Lq, c->Lk};
  em_status s = em_from_host(out, 2, shape, EM_I64, idx, c->q->device);
  free(idx);
  return s;
}

/* ALiBi bias [H, Lq, Lk] in q's dtype: the kernels' program evaluated
** densely (attention_lower.c), not a copy of its rule. */
static em_status alibi_bias(const em_attn_call *c, const em_attn_decl *d, em_tensor **out) {
  int64_t n = c->H * c->Lq * c->Lk;
  double *b = malloc((size_t)n * sizeof *b);
  if (!b) return em_error(EM_ERR_OOM, "out of memory for a [%lld, %lld, %lld] ALiBi bias", (long long)c->H,
                          (long long)c->Lq, (long long)c->Lk);
  em_status s = em__attn_lowered_dense(c, d, NULL, b);
  int64_t shape[3] = {c->H, c->Lq, c->Lk};
  em_tensor *t = NULL;
  if (s == EM_OK) s = em_from_host(&t, 3, shape, EM_F64, b, c->q->device);
  free(b);
  if (s == EM_OK) s = em_to_dtype(out, t, c->q->dtype);
  em_release(t);
  return s;
}

/* The block mask as a bool [Lq, Lk] tensor (true = may attend), or NULL. */
static em_status block_allowed(const em_attn_call *c, const em_attn_decl *d, em_tensor **out) {
  *out = NULL;
  if (d->mask.kind == EM_ATTN_MASK_NONE && d->mask.global <= 0) return EM_OK;
  uint8_t *m = malloc((size_t)(c->Lq * c->Lk) + 1);
  if (!m) return em_error(EM_ERR_OOM, "attention: out of memory for a [%lld, %lld] pattern",
                          (long long)c->Lq, (long long)c->Lk);
  /* the kernels' mask program, evaluated densely (attention_lower.c) */
  em_status s = em__attn_lowered_dense(c, d, m, NULL);
  int64_t shape[2] = {c->Lq, c->Lk};
  if (s == EM_OK) s = em_from_host(out, 2, shape, EM_BOOL, m, c->q->device);
  free(m);
  return s;
}

/* Shaw et al.: scores gain scale * q . rel_k[row], the output
** sum_j P_ij rel_v[row], as gather(q rel_k^T) and scatter_add(P) rel_v, so
** no [Lq, Lk, d] tensor is built. */
static em_status shaw(const em_attn_call *c, const em_attn_decl *d, em_tensor *allowed,
                      em_tensor **out, em_tensor **weights) {
  em_tensor *rel_k = c->params[d->rel_k_param];
  em_tensor *rel_v = d->rel_v_param >= 0 ? c->params[d->rel_v_param] : NULL;
  int64_t R = rel_k->shape[0];
  em_tensor *idx2 = NULL, *idx = NULL, *kt = NULL, *qk = NULL, *rkt = NULL, *qr = NULL, *qrg = NULL;
  em_tensor *sum = NULL, *sc = NULL, *al = NULL, *p = NULL, *pd = NULL, *pv = NULL, *z = NULL;
  em_tensor *pb = NULL, *pbv = NULL;
  int64_t full[4] = {c->B, c->H, c->Lq, c->Lk}, zs[4] = {c->B, c->H, c->Lq, R};
  em_status s = rel_rows(c, d, &idx2);
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
  if (s == EM_OK) s = em_attn_allowed(c, allowed, &al);
  if (s == EM_OK) s = em_attn_softmax(c, sc, al, weights ? &p : NULL, &pd);
  if (s == EM_OK) s = em_matmul(rel_v ? &pv : out, pd, c->v);
  if (rel_v) {
    if (s == EM_OK) s = em_zeros(&z, 4, zs, c->q->dtype, c->q->device);
    if (s == EM_OK) s = em_scatter_add(&pb, z, 3, idx, pd);   /* P summed per table row */
    if (s == EM_OK) s = em_matmul(&pbv, pb, rel_v);
    if (s == EM_OK) s = em_add(out, pv, pbv);
  }
  em_release(idx2), em_release(idx), em_release(kt), em_release(qk), em_release(rkt), em_release(qr);
  em_release(qrg), em_release(sum), em_release(sc), em_release(al), em_release(pd);
  em_release(pv), em_release(z), em_release(pb), em_release(pbv);
  if (s != EM_OK) {
    em_release(p);
    return s;
  }
  if (weights) *weights = p;
  return EM_OK;
}

em_status em_attn_compose_decl(const em_attn_call *c, const em_attn_decl *d, em_tensor **out,
                               em_tensor **weights) {
  *out = NULL;
  if (weights) *weights = NULL;
  em_tensor *allowed = NULL, *bias = NULL;
  em_status s = block_allowed(c, d, &allowed);
  if (s == EM_OK && d->bias == EM_ATTN_BIAS_SHAW) {
    s = shaw(c, d, allowed, out, weights);
    em_release(allowed);
    return s;
  }
  if (s == EM_OK && d->bias == EM_ATTN_BIAS_ALIBI) s = alibi_bias(c, d, &bias);
  if (s == EM_OK && d->bias == EM_ATTN_BIAS_TABLE) {
    /* table [n, H] -> bias [H, Lq, Lk], differentiable in the table */
    em_tensor *idx = NULL, *e = NULL;
    s = rel_rows(c, d, &idx);
    if (s == EM_OK) s = em_embedding(&e, c->params[d->table_param], idx); /* [Lq, Lk, H] */
    int perm[3] = {2, 0, 1};
    if (s == EM_OK) s = em_permute(&bias, e, 3, perm);
    em_release(idx), em_release(e);
  }
  if (s == EM_OK) s = em_attn_dense(c, bias, allowed, out, weights);
  em_release(allowed), em_release(bias);
  return s;
}
