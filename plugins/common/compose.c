/*
** compose.c -- attention as a composition of core ops (any backend,
** differentiable through autograd), and call bookkeeping.
*/
#include "attn_common.h"

#include <math.h>
#include <string.h>

void ac_call_keep(em_attn_call *dst, const em_attn_call *src) {
  *dst = *src;
  em_retain(dst->q), em_retain(dst->k), em_retain(dst->v);
  if (dst->key_padding) em_retain(dst->key_padding);
  if (dst->mask) em_retain(dst->mask);
  dst->options = NULL; /* owned by the module, may change before backward */
  dst->params = NULL;
  dst->n_params = 0;
}

void ac_call_drop(em_attn_call *c) {
  em_release(c->q), em_release(c->k), em_release(c->v);
  em_release(c->key_padding), em_release(c->mask);
  memset(c, 0, sizeof *c);
}

bool ac_host(const em_attn_call *c) { return em_backend_of(c->q)->host_memory; }

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

em_status ac_allowed(const em_attn_call *c, em_tensor *extra, em_tensor **allowed) {
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

em_status ac_softmax(const em_attn_call *c, em_tensor *scores, em_tensor *allowed,
                     em_tensor **probs, em_tensor **dropped) {
  if (probs) *probs = NULL;
  *dropped = NULL;
  em_tensor *s1 = em_retain(scores), *t = NULL;
  em_status s = EM_OK;
  if (c->mask && c->mask->dtype != EM_BOOL) {
    s = em_add(&t, s1, c->mask);
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
    s = em_dropout(dropped, p2, c->dropout_p, true);
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

em_status ac_dense(const em_attn_call *c, em_tensor *bias, em_tensor *extra_allowed,
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
  if (s == EM_OK) s = ac_allowed(c, extra_allowed, &allowed);
  if (s == EM_OK) s = ac_softmax(c, sc, allowed, weights ? &p : NULL, &pd);
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
