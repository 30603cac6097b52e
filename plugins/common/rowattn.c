/*
** rowattn.c -- the host row-range attention kernel (see attn_common.h) and
** the route-1 glue (saved state, backward) for variants built on it.
*/
#include "attn_common.h"
#include "ember_philox.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* What the kernel reads besides q, k, v: masks as raw pointers. */
typedef struct ra_ctx {
  const em_attn_call *c;
  const ra_spec *rs;
  const uint8_t *kp;      /* [B,Lk] or NULL */
  const uint8_t *mbool;   /* bool attn mask or NULL */
  const void *madd;       /* additive attn mask or NULL */
  int64_t ms[4];          /* attn mask strides over B,H,Lq,Lk */
} ra_ctx;

#define T float
#define RA_(name) ra_##name##_f32
#include "ra_kernel.h"
#undef T
#undef RA_
#define T double
#define RA_(name) ra_##name##_f64
#include "ra_kernel.h"
#undef T
#undef RA_

static void ctx_init(ra_ctx *x, const em_attn_call *c, const ra_spec *rs) {
  memset(x, 0, sizeof *x);
  x->c = c, x->rs = rs;
  if (c->key_padding) x->kp = em_data(c->key_padding);
  if (c->mask) {
    if (c->mask->dtype == EM_BOOL) x->mbool = em_data(c->mask);
    else x->madd = em_data(c->mask);
    for (int d = 0; d < 4; d++) x->ms[d] = c->mask->stride[d];
  }
}

em_status ra_forward(const em_attn_call *c, const ra_spec *rs, em_tensor *out, em_tensor *lse,
                     em_tensor *weights) {
  ra_ctx x;
  ctx_init(&x, c, rs);
  if (c->q->dtype == EM_F32)
    return ra_forward_f32(&x, em_data(out), em_data(lse), weights ? em_data(weights) : NULL);
  return ra_forward_f64(&x, em_data(out), em_data(lse), weights ? em_data(weights) : NULL);
}

em_status ra_backward(const em_attn_call *c, const ra_spec *rs, em_tensor *dout, em_tensor *out,
                      em_tensor *lse, em_tensor *dq, em_tensor *dk, em_tensor *dv) {
  ra_ctx x;
  ctx_init(&x, c, rs);
  if (c->q->dtype == EM_F32)
    return ra_backward_f32(&x, em_data(dout), em_data(out), em_data(lse), em_data(dq), em_data(dk),
                           em_data(dv));
  return ra_backward_f64(&x, em_data(dout), em_data(out), em_data(lse), em_data(dq), em_data(dk),
                         em_data(dv));
}

/* ---- route-1 glue ------------------------------------------------------- */

typedef struct ra_saved {
  em_attn_call c;     /* kept copy: q, k, v, masks retained */
  ra_spec rs;
  em_tensor *out, *lse;
  void *ud;           /* owned copy of the range data */
} ra_saved;

void ra_free_saved(void *p) {
  ra_saved *s = p;
  if (!s) return;
  ac_call_drop(&s->c);
  em_release(s->out), em_release(s->lse);
  free(s->ud);
  free(s);
}

em_status ra_run_forward(const em_attn_call *c, ra_range_fn ranges, const void *ud, size_t ud_size,
                         em_tensor **out, em_tensor **weights, void **saved) {
  int64_t oshape[4] = {c->B, c->H, c->Lq, c->dims.dv}, lshape[3] = {c->B, c->H, c->Lq};
  int64_t wshape[4] = {c->B, c->H, c->Lq, c->Lk};
  em_tensor *o = NULL, *lse = NULL, *w = NULL;
  em_status s = em_empty(&o, 4, oshape, c->q->dtype, c->q->device);
  if (s == EM_OK) s = em_empty(&lse, 3, lshape, EM_F64, c->q->device);
  if (s == EM_OK && weights) s = em_zeros(&w, 4, wshape, c->q->dtype, c->q->device);
  ra_spec rs = {ranges, ud};
  if (s == EM_OK) s = ra_forward(c, &rs, o, lse, w);
  ra_saved *sv = NULL;
  if (s == EM_OK && c->need_grad) {
    sv = calloc(1, sizeof *sv);
    if (!sv || (ud_size && !(sv->ud = malloc(ud_size)))) {
      free(sv);
      sv = NULL;
      s = em_error(EM_ERR_OOM, "attention: out of memory");
    } else {
      if (ud_size) memcpy(sv->ud, ud, ud_size);
      ac_call_keep(&sv->c, c);
      sv->rs.ranges = ranges;
      sv->rs.ud = sv->ud;
      sv->out = em_retain(o);
      sv->lse = em_retain(lse);
    }
  }
  em_release(lse);
  if (s != EM_OK) {
    em_release(o), em_release(w);
    return s;
  }
  *out = o;
  if (weights) *weights = w;
  *saved = sv;
  return EM_OK;
}

em_status ra_run_backward(void *p, em_tensor *dout, const bool *needs, em_tensor **grads) {
  ra_saved *sv = p;
  (void)needs; /* one pass computes all three */
  if (!sv) return em_error(EM_ERR_AUTOGRAD, "attention: backward without saved state");
  em_attn_call *c = &sv->c;
  em_tensor *dq = NULL, *dk = NULL, *dv = NULL;
  em_status s = em_empty(&dq, 4, c->q->shape, c->q->dtype, c->q->device);
  if (s == EM_OK) s = em_empty(&dk, 4, c->k->shape, c->k->dtype, c->k->device);
  if (s == EM_OK) s = em_empty(&dv, 4, c->v->shape, c->v->dtype, c->v->device);
  if (s == EM_OK) s = ra_backward(c, &sv->rs, dout, sv->out, sv->lse, dq, dk, dv);
  if (s != EM_OK) {
    em_release(dq), em_release(dk), em_release(dv);
    return s;
  }
  grads[0] = dq, grads[1] = dk, grads[2] = dv;
  return EM_OK;
}
