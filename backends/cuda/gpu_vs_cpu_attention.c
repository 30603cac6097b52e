/*
** gpu_vs_cpu_attention.c -- the fused attention kernels, forward and
** backward, against the CPU backend's: causal with Lq != Lk, key padding
** (with fully masked rows), an additive bias broadcast over heads and
** holding -inf, dropout, head dims on both sides of 64 and dk != dv. The
** CUDA kernel takes float32 and bfloat16; bfloat16 is compared with the
** CPU in float32 on the same rounded inputs. Grouped heads (Hkv < H, MQA)
** are read in place by both.
*/
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gpu_vs_cpu.h"

typedef struct att_case {
  int64_t B, H, Lq, Lk, dk, dv;
  bool causal, pad, bias, masked_batch;
  double p;
  int64_t Hkv; /* k and v heads (0: H), read in place by both kernels */
} att_case;

/* Attention arguments for one side: dtype d, the sizes, device copies of
** q, k, v (host buffers in d) and room for out (d) and lse (float32); the
** rest zero, for the caller to fill. */
em_attention_args attn_args(side *sd, em_dtype d, int64_t B, int64_t H, int64_t Lq, int64_t Lk,
                            int64_t dk, int64_t dv, const void *q, const void *k, const void *v) {
  const size_t e = em_dtype_size(d);
  const int64_t BH = B * H;
  em_attention_args a;
  memset(&a, 0, sizeof a);
  a.dtype = d;
  a.B = B, a.H = H, a.Lq = Lq, a.Lk = Lk, a.dk = dk, a.dv = dv;
  a.q = dput(sd, q, (size_t)(BH * Lq * dk) * e);
  a.k = dput(sd, k, (size_t)(BH * Lk * dk) * e);
  a.v = dput(sd, v, (size_t)(BH * Lk * dv) * e);
  a.out = dput(sd, NULL, (size_t)(BH * Lq * dv) * e);
  a.lse = dput(sd, NULL, (size_t)(BH * Lq) * 4);
  return a;
}

static void attention_case(const att_case *c, em_dtype dt) {
  const int64_t BH = c->B * c->H, nq = BH * c->Lq * c->dk, nk = BH * c->Lk * c->dk;
  const int64_t nv = BH * c->Lk * c->dv, no = BH * c->Lq * c->dv, nl = BH * c->Lq;
  void *q = host_rand(dt, nq, -1.5, 1.5), *k = host_rand(dt, nk, -1.5, 1.5);
  void *v = host_rand(dt, nv, -1, 1), *dout = host_rand(dt, no, -1, 1);
  uint8_t *pad = calloc((size_t)(c->B * c->Lk), 1);
  for (int64_t e = 0; e < c->B * c->Lk; e++) pad[e] = c->pad && rng_int(4) == 0;
  if (c->masked_batch)
    for (int64_t j = 0; j < c->Lk; j++) pad[(c->B - 1) * c->Lk + j] = 1; /* rows see nothing */
  /* bias [B, 1, Lq, Lk], broadcast over heads, with some -inf */
  int64_t nb = c->B * c->Lq * c->Lk;
  float *bias = host_rand(EM_F32, nb, -1, 1);
  for (int64_t e = 0; e < nb; e += 7) bias[e] = -INFINITY;
  em_dtype cdt = EM_F32;
  void *qc = q, *kc = k, *vc = v, *dc = dout;
  if (dt == EM_BF16) qc = bf16_widen(q, nq), kc = bf16_widen(k, nk), vc = bf16_widen(v, nv), dc = bf16_widen(dout, no);
  void *out[2], *lse[2], *dq[2], *dk[2], *dv[2];
  em_status sf[2], sb[2];
  for (int s = 0; s < 2; s++) {
    side sd = {.be = s ? g_cpu : g_gpu};
    em_dtype d = s ? cdt : dt;
    size_t e = em_dtype_size(d);
    out[s] = malloc(no * 4), lse[s] = malloc(nl * 4), dq[s] = malloc(nq * 4);
    dk[s] = malloc(nk * 4), dv[s] = malloc(nv * 4);
    em_attention_args a = attn_args(&sd, d, c->B, c->H, c->Lq, c->Lk, c->dk, c->dv, s ? qc : q, s ? kc : k,
                                    s ? vc : v);
    a.key_padding = c->pad || c->masked_batch ? dput(&sd, pad, c->B * c->Lk) : NULL;
    if (c->bias) {
      a.bias = dput(&sd, bias, nb * 4);
      a.bias_stride[0] = c->Lq * c->Lk, a.bias_stride[1] = 0;
      a.bias_stride[2] = c->Lk, a.bias_stride[3] = 1;
    }
    a.Hkv = c->Hkv; /* k and v hold B*H heads of which the first B*Hkv are read */
    a.causal = c->causal;
    a.scale = 1.0 / sqrt((double)c->dk);
    a.dropout_p = c->p;
    a.seed = 31337, a.offset = 99;
    sf[s] = sd.be->attention_forward(0, &a);
    a.dout = dput(&sd, s ? dc : dout, no * e);
    a.dq = dput(&sd, NULL, nq * e);
    a.dk_ = dput(&sd, NULL, nk * e);
    a.dv_ = dput(&sd, NULL, nv * e);
    sb[s] = sf[s] ? sf[s] : sd.be->attention_backward(0, &a);
    dget(&sd, out[s], a.out, no * e);
    dget(&sd, lse[s], a.lse, nl * 4);
    dget(&sd, dq[s], a.dq, nq * e);
    dget(&sd, dk[s], a.dk_, nk * e);
    dget(&sd, dv[s], a.dv_, nv * e);
    side_free(&sd);
  }
  char name[200];
  snprintf(name, sizeof name,
           "attention %s B=%lld H=%lld Hkv=%lld Lq=%lld Lk=%lld dk=%lld dv=%lld%s%s%s%s p=%.2f", em_dtype_name(dt),
           (long long)c->B, (long long)c->H, (long long)(c->Hkv ? c->Hkv : c->H), (long long)c->Lq, (long long)c->Lk,
           (long long)c->dk, (long long)c->dv, c->causal ? " causal" : "", c->pad ? " padding" : "",
           c->bias ? " bias" : "", c->masked_batch ? " masked-rows" : "", c->p);
  double ft = dt == EM_BF16 ? 2e-2 : 2e-5, bt = dt == EM_BF16 ? 5e-2 : 2e-4;
  double wf = fmax(compare(dt, out[0], cdt, out[1], no, ft, ft * 10),
                   compare(EM_F32, lse[0], EM_F32, lse[1], nl, 1e-5, 1e-5));
  char fwd[220], bwd[220];
  snprintf(fwd, sizeof fwd, "%s forward", name);
  snprintf(bwd, sizeof bwd, "%s backward", name);
  expect_close(fwd, sf[0], sf[1], wf);
  double wb = compare(dt, dq[0], cdt, dq[1], nq, bt, bt);
  wb = fmax(wb, compare(dt, dk[0], cdt, dk[1], nk, bt, bt));
  wb = fmax(wb, compare(dt, dv[0], cdt, dv[1], nv, bt, bt));
  expect_close(bwd, sb[0], sb[1], wb);
  if (c->masked_batch && !sf[0]) {
    /* the last batch sees no key: zeros and lse = +inf, never NaN */
    int64_t first = (c->B - 1) * c->H * c->Lq;
    bool ok = true;
    for (int64_t r = first; r < nl; r++) ok = ok && isinf(((float *)lse[0])[r]) && ((float *)lse[0])[r] > 0;
    for (int64_t e = first * c->dv; e < no; e++) ok = ok && host_get(dt, out[0], e) == 0;
    for (int64_t e = first * c->dk; e < nq; e++) ok = ok && host_get(dt, dq[0], e) == 0;
    expect(ok, "%s: fully masked rows give zero output, lse +inf, zero dq", name);
  }
  if (dt == EM_BF16) free(qc), free(kc), free(vc), free(dc);
  free(q), free(k), free(v), free(dout), free(pad), free(bias);
  for (int s = 0; s < 2; s++) free(out[s]), free(lse[s]), free(dq[s]), free(dk[s]), free(dv[s]);
}

void test_attention(void) {
  if (!g_gpu->attention_forward || !g_cpu->attention_forward) {
    expect(false, "attention: a backend has no fused attention kernel");
    return;
  }
  const att_case cases[] = {
    {2, 3, 70, 70, 16, 16, false, false, false, false, 0, 0},
    {1, 2, 100, 150, 32, 32, true, false, false, false, 0, 0},
    {2, 2, 150, 70, 64, 64, true, true, false, true, 0, 0},
    {1, 2, 65, 129, 24, 24, false, true, true, false, 0, 0},
    {1, 2, 130, 130, 40, 40, true, false, true, false, 0.2, 0},
    {1, 1, 3, 200, 8, 8, true, true, false, false, 0, 0},
    {1, 2, 70, 90, 40, 24, false, false, false, false, 0, 0},
    {1, 2, 80, 80, 96, 128, true, false, true, false, 0.1, 0},
    {1, 1, 64, 64, 200, 256, false, true, false, false, 0, 0},
    /* grouped-query attention: 4 query heads on 2 kv heads, and MQA */
    {2, 4, 70, 90, 32, 32, true, true, false, false, 0, 2},
    {1, 4, 1, 130, 16, 16, true, false, false, false, 0, 1},
    {1, 6, 65, 65, 24, 24, false, false, true, false, 0.1, 3},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    attention_case(&cases[i], EM_F32);
    attention_case(&cases[i], EM_BF16);
  }
  /* float64 is not fused on the GPU: a clear EM_ERR_UNSUPPORTED */
  em_attention_args a;
  memset(&a, 0, sizeof a);
  a.dtype = EM_F64;
  a.B = a.H = a.Lq = a.Lk = a.dk = a.dv = 1;
  em_status s = g_gpu->attention_forward(0, &a);
  expect(s == EM_ERR_UNSUPPORTED, "attention float64 on the GPU is EM_ERR_UNSUPPORTED: %s",
         em_error_message());
}
