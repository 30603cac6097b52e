/*
** example.c -- a minimal attention variant to copy. It is softmax attention
** with a temperature option, written with core ops only (so it runs on any
** backend) and with its own backward (route 1 of ember_attention.h).
**
** Build it out of tree against an installed ember (see the Makefile):
**   cc -std=c11 -shared -fPIC $(pkg-config --cflags ember) example.c \
**      -o ember_attn_example.so $(pkg-config --libs ember)
** then put the .so in a folder listed in EMBER_PLUGIN_PATH and check it:
**   ember scripts/check_plugin.lua example
**
**   out = softmax(q k^T * scale / temperature + masks) v
*/
#include <ember.h>
#include <ember_attention.h>
#include <math.h>
#include <stdlib.h>

/* 1. The options the variant accepts; the core checks them for us. */
static const em_attn_option_spec OPTIONS[] = {
  {.name = "temperature", .type = EM_ATTN_OPT_FLOAT, .default_num = 1.0, .bounded = true,
   .min = 1e-3, .max = 1e3, .help = "divides the scores"},
};

/* 2. What forward keeps for backward. */
typedef struct saved {
  em_tensor *q, *k, *v, *p; /* p: the attention probabilities [B,H,Lq,Lk] */
  double scale;             /* scale / temperature */
} saved;

static void free_saved(void *ptr) {
  saved *s = ptr;
  if (!s) return;
  em_release(s->q), em_release(s->k), em_release(s->v), em_release(s->p);
  free(s);
}

/* bool [B,1,1,Lk] or [Lq,Lk] masks combined into "allowed" (NULL: all). */
static em_status allowed_mask(const em_attn_call *c, em_tensor **out) {
  em_tensor *a = NULL, *t = NULL, *u = NULL;
  em_status s = EM_OK;
  *out = NULL;
  if (c->causal) { /* key j visible to query i iff j <= i + Lk - Lq */
    em_tensor *i = NULL, *j = NULL;
    int64_t si[2] = {c->Lq, 1}, sj[2] = {1, c->Lk};
    s = em_arange(&t, (double)(c->Lk - c->Lq), (double)c->Lk, 1, EM_I64, c->q->device);
    if (s == EM_OK) s = em_reshape(&i, t, 2, si);
    em_release(t), t = NULL;
    if (s == EM_OK) s = em_arange(&t, 0, (double)c->Lk, 1, EM_I64, c->q->device);
    if (s == EM_OK) s = em_reshape(&j, t, 2, sj);
    em_release(t), t = NULL;
    if (s == EM_OK) s = em_binary(&a, EM_LE, j, i);
    em_release(i), em_release(j);
  }
  if (s == EM_OK && c->key_padding) { /* true = padding */
    int64_t sh[4] = {c->B, 1, 1, c->Lk};
    s = em_unary(&t, EM_NOT, c->key_padding, 0, 0);
    if (s == EM_OK) s = em_reshape(&u, t, 4, sh);
    em_release(t), t = NULL;
    if (s == EM_OK && a) {
      s = em_binary(&t, EM_AND, a, u);
      em_release(a), em_release(u);
      a = t, t = NULL;
    } else if (s == EM_OK) {
      a = u;
    }
  }
  if (s != EM_OK) {
    em_release(a);
    return s;
  }
  *out = a;
  return EM_OK;
}

/* 3. forward: grad mode is off and the inputs are detached, so plain core
** ops build nothing; we save what backward needs. */
static em_status forward(const em_attn_call *c, em_tensor **out, em_tensor **weights, void **sv) {
  double scale = c->scale / em_attn_opt_num(c->options, "temperature");
  em_tensor *kt = NULL, *qk = NULL, *sc = NULL, *allowed = NULL, *na = NULL, *m = NULL;
  em_tensor *valid = NULL, *inval = NULL, *sc2 = NULL, *p0 = NULL, *vf = NULL, *p = NULL;
  em_status s = em_transpose(&kt, c->k, -2, -1);
  if (s == EM_OK) s = em_matmul(&qk, c->q, kt);
  if (s == EM_OK) s = em_binary_scalar(&sc, EM_MUL, qk, scale);
  if (s == EM_OK) s = allowed_mask(c, &allowed);
  if (s == EM_OK && allowed) { /* forbidden scores become -inf */
    em_tensor *t = NULL;
    s = em_unary(&na, EM_NOT, allowed, 0, 0);
    if (s == EM_OK) s = em_masked_fill(&t, sc, na, -INFINITY);
    em_release(sc);
    sc = t;
  }
  /* Rows that see no key: softmax of zeros, then times 0 (never NaN). */
  if (s == EM_OK) s = em_max(&m, NULL, sc, -1, true);
  if (s == EM_OK) s = em_binary_scalar(&valid, EM_GT, m, -INFINITY);
  if (s == EM_OK) s = em_unary(&inval, EM_NOT, valid, 0, 0);
  if (s == EM_OK) s = em_masked_fill(&sc2, sc, inval, 0);
  if (s == EM_OK) s = em_softmax(&p0, sc2, -1);
  if (s == EM_OK) s = em_to_dtype(&vf, valid, c->q->dtype);
  if (s == EM_OK) s = em_mul(&p, p0, vf);
  if (s == EM_OK) s = em_matmul(out, p, c->v);
  em_release(kt), em_release(qk), em_release(sc), em_release(allowed), em_release(na);
  em_release(m), em_release(valid), em_release(inval), em_release(sc2), em_release(p0), em_release(vf);
  if (s != EM_OK) {
    em_release(p);
    return s;
  }
  if (weights) *weights = em_retain(p);
  saved *st = c->need_grad ? malloc(sizeof *st) : NULL;
  if (st) {
    st->q = em_retain(c->q), st->k = em_retain(c->k), st->v = em_retain(c->v);
    st->p = p, st->scale = scale;
    *sv = st;
  } else {
    em_release(p);
    if (c->need_grad) return em_error(EM_ERR_OOM, "example: out of memory");
  }
  return EM_OK;
}

/* 4. backward: with P = softmax(S), out = P v:
**   dv = P^T dout;  dP = dout v^T;  dS = P * (dP - rowsum(dP * P));
**   dq = scale dS k;  dk = scale dS^T q. */
static em_status backward(void *ptr, em_tensor *dout, const bool *needs, em_tensor **grads) {
  saved *st = ptr;
  (void)needs;
  em_tensor *pt = NULL, *vt = NULL, *dp = NULL, *pdp = NULL, *rs = NULL, *diff = NULL, *ds = NULL;
  em_tensor *ds2 = NULL, *dst = NULL;
  int last = -1;
  em_status s = em_transpose(&pt, st->p, -2, -1);
  if (s == EM_OK) s = em_matmul(&grads[2], pt, dout);
  if (s == EM_OK) s = em_transpose(&vt, st->v, -2, -1);
  if (s == EM_OK) s = em_matmul(&dp, dout, vt);
  if (s == EM_OK) s = em_mul(&pdp, dp, st->p);
  if (s == EM_OK) s = em_sum(&rs, pdp, 1, &last, true);
  if (s == EM_OK) s = em_sub(&diff, dp, rs);
  if (s == EM_OK) s = em_mul(&ds, st->p, diff);
  if (s == EM_OK) s = em_binary_scalar(&ds2, EM_MUL, ds, st->scale);
  if (s == EM_OK) s = em_matmul(&grads[0], ds2, st->k);
  if (s == EM_OK) s = em_transpose(&dst, ds2, -2, -1);
  if (s == EM_OK) s = em_matmul(&grads[1], dst, st->q);
  em_release(pt), em_release(vt), em_release(dp), em_release(pdp), em_release(rs);
  em_release(diff), em_release(ds), em_release(ds2), em_release(dst);
  return s; /* on failure the core releases whatever grads[] holds */
}

/* 5. The vtable and the two exported symbols. */
static const em_attention_variant EXAMPLE = {
  .abi_version = EM_ATTENTION_ABI_VERSION,
  .struct_size = sizeof(em_attention_variant),
  .name = "example",
  .version = "1.0",
  .description = "softmax attention with a temperature (the example to copy)",
  .caps = EM_ATTN_CAP_CAUSAL | EM_ATTN_CAP_KEY_PADDING | EM_ATTN_CAP_CROSS | EM_ATTN_CAP_WEIGHTS,
  .n_options = 1,
  .options = OPTIONS,
  .forward = forward,
  .backward = backward,
  .free_saved = free_saved,
};

EM_PLUGIN_EXPORT const em_plugin_info ember_plugin_info = {
  EM_ATTENTION_ABI_VERSION, EM_PLUGIN_ATTENTION, "example", "1.0",
  "softmax attention with a temperature (the example to copy)"};

EM_PLUGIN_EXPORT const void *ember_plugin_init(char *err, size_t errlen) {
  (void)err, (void)errlen;
  return &EXAMPLE;
}
