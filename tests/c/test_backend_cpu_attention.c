/*
** test_backend_cpu_attention.c -- the attention kernel against naive attention
** in double, gradients included; every call again on strided heads (the
** same bits).
** Checks the CPU backend plugin's kernels against straightforward
** reference loops (in double), and their error paths; backend_cpu.h has
** the harness.
*/
#include "backend_cpu.h"
#include "ember_philox.h"

#include <dlfcn.h>

/* ---- attention ---- */

typedef struct att_case {
  const char *name;
  int64_t B, H, Lq, Lk, dk, dv;
  bool causal, pad, bias;
  double p;
  bool numeric; /* also check gradients by central differences */
} att_case;

typedef struct att_data {
  double *q, *k, *v, *bias, *dout; /* inputs */
  uint8_t *pad;
  int64_t bst[4];
  double scale;
} att_data;

/* n = B * heads * rows contiguous rows of d elements of size es, laid out
** anew as [B, rows, heads, d + 3]: the heads of a projection, with gaps of
** 3 elements (the byte 0x7f) after each row. st gets the strides over B,
** heads and rows (em_attention_args' q_stride, ...). src NULL: an output. */
static void *spread(const void *src, size_t es, int64_t B, int64_t heads, int64_t rows, int64_t d,
                    int64_t st[3]) {
  const int64_t w = d + 3;
  st[0] = rows * heads * w, st[1] = w, st[2] = heads * w;
  const size_t n = (size_t)(B * st[0] + 1) * es;
  unsigned char *buf = xmalloc(n);
  memset(buf, 0x7f, n);
  for (int64_t b = 0; src && b < B; b++)
    for (int64_t h = 0; h < heads; h++)
      for (int64_t i = 0; i < rows; i++)
        memcpy(buf + (size_t)(b * st[0] + h * st[1] + i * st[2]) * es,
               (const unsigned char *)src + (size_t)(((b * heads + h) * rows + i) * d) * es, (size_t)d * es);
  return buf;
}

/* Do the rows spread() laid out in buf hold the bits of the contiguous
** want, and its gaps still 0x7f? */
static bool same_as_spread(const void *buf, const void *want, size_t es, int64_t B, int64_t heads,
                           int64_t rows, int64_t d, const int64_t st[3]) {
  const unsigned char *p = buf;
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < heads; h++)
      for (int64_t i = 0; i < rows; i++) {
        const unsigned char *row = p + (size_t)(b * st[0] + h * st[1] + i * st[2]) * es;
        if (memcmp(row, (const unsigned char *)want + (size_t)(((b * heads + h) * rows + i) * d) * es,
                   (size_t)d * es))
          return false;
        for (size_t x = (size_t)d * es; x < (size_t)(d + 3) * es; x++)
          if (row[x] != 0x7f) return false;
      }
  return true;
}

/* The call a, run again with every tensor's heads where a projection's
** lie (spread: [B, L, H, d] with gaps), out and dout included: the same
** bits in out, lse and the three gradients, and nothing written in the gaps. */
static bool strided_same(const em_attention_args *a, size_t es) {
  em_attention_args t = *a;
  const int64_t B = a->B, H = a->H, Lq = a->Lq, Lk = a->Lk, dk = a->dk, dv = a->dv, nl = B * H * Lq;
  t.q = spread(a->q, es, B, H, Lq, dk, t.q_stride);
  t.k = spread(a->k, es, B, H, Lk, dk, t.k_stride);
  t.v = spread(a->v, es, B, H, Lk, dv, t.v_stride);
  t.dout = spread(a->dout, es, B, H, Lq, dv, t.dout_stride);
  t.out = spread(NULL, es, B, H, Lq, dv, t.out_stride);
  t.dq = spread(NULL, es, B, H, Lq, dk, t.dq_stride);
  t.dk_ = spread(NULL, es, B, H, Lk, dk, t.dk_stride);
  t.dv_ = spread(NULL, es, B, H, Lk, dv, t.dv_stride);
  t.lse = xmalloc((size_t)nl * es + 8);
  bool ok = be->attention_forward(0, &t) == EM_OK && be->attention_backward(0, &t) == EM_OK &&
            !memcmp(t.lse, a->lse, (size_t)nl * es) &&
            same_as_spread(t.out, a->out, es, B, H, Lq, dv, t.out_stride) &&
            same_as_spread(t.dq, a->dq, es, B, H, Lq, dk, t.dq_stride) &&
            same_as_spread(t.dk_, a->dk_, es, B, H, Lk, dk, t.dk_stride) &&
            same_as_spread(t.dv_, a->dv_, es, B, H, Lk, dv, t.dv_stride);
  free((void *)t.q), free((void *)t.k), free((void *)t.v), free((void *)t.dout);
  free(t.out), free(t.dq), free(t.dk_), free(t.dv_), free(t.lse);
  return ok;
}

/* Naive attention in double, one query row at a time; with grads != NULL
** also the analytic backward from dout. */
static void ref_attention(const att_case *c, const att_data *d, double *out, double *lse,
                          double **grads) {
  const int64_t Lq = c->Lq, Lk = c->Lk, dk = c->dk, dv = c->dv;
  double *s = xmalloc((Lk + 1) * 8), *pr = xmalloc((Lk + 1) * 8), *z = xmalloc((Lk + 1) * 8),
         *dp = xmalloc((Lk + 1) * 8);
  if (grads) {
    memset(grads[0], 0, c->B * c->H * Lq * dk * 8);
    memset(grads[1], 0, c->B * c->H * Lk * dk * 8);
    memset(grads[2], 0, c->B * c->H * Lk * dv * 8);
  }
  for (int64_t b = 0; b < c->B; b++)
    for (int64_t h = 0; h < c->H; h++)
      for (int64_t i = 0; i < Lq; i++) {
        int64_t bh = b * c->H + h;
        const double *qi = d->q + (bh * Lq + i) * dk;
        double mx = -INFINITY;
        for (int64_t j = 0; j < Lk; j++) {
          const double *kj = d->k + (bh * Lk + j) * dk;
          double dot = 0;
          for (int64_t x = 0; x < dk; x++) dot += qi[x] * kj[x];
          s[j] = dot * d->scale;
          if (c->bias)
            s[j] += d->bias[b * d->bst[0] + h * d->bst[1] + i * d->bst[2] + j * d->bst[3]];
          if ((c->pad && d->pad[b * Lk + j]) || (c->causal && j > i + Lk - Lq)) s[j] = -INFINITY;
          mx = fmax(mx, s[j]);
        }
        double *o = out + (bh * Lq + i) * dv;
        memset(o, 0, dv * 8);
        if (mx == -INFINITY) {
          lse[bh * Lq + i] = INFINITY;
          continue;
        }
        double sum = 0;
        for (int64_t j = 0; j < Lk; j++) sum += exp(s[j] - mx);
        lse[bh * Lq + i] = mx + log(sum);
        for (int64_t j = 0; j < Lk; j++) {
          pr[j] = exp(s[j] - mx) / sum;
          uint64_t e = (uint64_t)((bh * Lq + i) * Lk + j);
          z[j] = c->p > 0 ? (em_philox_keep(7, 11, e, em_philox_keep_threshold(c->p)) ? 1 / (1 - c->p) : 0) : 1;
          for (int64_t x = 0; x < dv; x++) o[x] += pr[j] * z[j] * d->v[(bh * Lk + j) * dv + x];
        }
        if (!grads) continue;
        const double *go = d->dout + (bh * Lq + i) * dv;
        double D = 0;
        for (int64_t j = 0; j < Lk; j++) {
          double t = 0;
          for (int64_t x = 0; x < dv; x++) t += go[x] * d->v[(bh * Lk + j) * dv + x];
          dp[j] = t * z[j];
          D += pr[j] * dp[j];
        }
        for (int64_t j = 0; j < Lk; j++) {
          double ds = pr[j] * (dp[j] - D) * d->scale;
          for (int64_t x = 0; x < dk; x++) {
            grads[0][(bh * Lq + i) * dk + x] += ds * d->k[(bh * Lk + j) * dk + x];
            grads[1][(bh * Lk + j) * dk + x] += ds * qi[x];
          }
          for (int64_t x = 0; x < dv; x++) grads[2][(bh * Lk + j) * dv + x] += pr[j] * z[j] * go[x];
        }
      }
  free(s);
  free(pr);
  free(z);
  free(dp);
}

static double att_loss(const att_case *c, const att_data *d, double *out, double *lse) {
  ref_attention(c, d, out, lse, NULL);
  double l = 0;
  for (int64_t i = 0; i < c->B * c->H * c->Lq * c->dv; i++) l += out[i] * d->dout[i];
  return l;
}

static float *to_f32(const double *x, int64_t n) {
  float *f = xmalloc(n * 4 + 4);
  for (int64_t i = 0; i < n; i++) f[i] = (float)x[i];
  return f;
}

/* n uniform float32 values in [lo, hi) (drawn in double, as the other cases). */
static float *rand_f32(int64_t n, double lo, double hi) {
  double *d = rand_arr(EM_F64, n, lo, hi, NULL);
  float *f = to_f32(d, n);
  free(d);
  return f;
}

static void attention_case(const att_case *c) {
  const int64_t BH = c->B * c->H, nq = BH * c->Lq * c->dk, nk = BH * c->Lk * c->dk,
                nv = BH * c->Lk * c->dv;
  const int64_t no = BH * c->Lq * c->dv, nl = BH * c->Lq, nb = c->H * c->Lq * c->Lk;
  att_data d;
  d.q = rand_arr(EM_F64, nq, -1.5, 1.5, NULL);
  d.k = rand_arr(EM_F64, nk, -1.5, 1.5, NULL);
  d.v = rand_arr(EM_F64, nv, -1, 1, NULL);
  d.dout = rand_arr(EM_F64, no, -1, 1, NULL);
  d.bias = rand_arr(EM_F64, nb + 1, -1, 1, NULL); /* [1,H,Lq,Lk], broadcast over B */
  for (int64_t i = 0; i < nb; i += 5) d.bias[i] = -INFINITY;
  d.bst[0] = 0, d.bst[1] = c->Lq * c->Lk, d.bst[2] = c->Lk, d.bst[3] = 1;
  d.pad = xmalloc(c->B * c->Lk + 1);
  for (int64_t b = 0; b < c->B; b++)
    for (int64_t j = 0; j < c->Lk; j++)
      d.pad[b * c->Lk + j] = b == 1 || j % 3 == 2; /* batch 1: all padding */
  d.scale = 1 / sqrt((double)c->dk ? (double)c->dk : 1);

  double *ro = xmalloc(no * 8), *rl = xmalloc(nl * 8),
         *g[3] = {xmalloc(nq * 8), xmalloc(nk * 8), xmalloc(nv * 8)};
  ref_attention(c, &d, ro, rl, g);

  em_attention_args a;
  memset(&a, 0, sizeof a);
  a.B = c->B, a.H = c->H, a.Lq = c->Lq, a.Lk = c->Lk, a.dk = c->dk, a.dv = c->dv;
  a.key_padding = c->pad ? d.pad : NULL;
  memcpy(a.bias_stride, d.bst, sizeof d.bst);
  a.causal = c->causal, a.scale = d.scale, a.dropout_p = c->p, a.seed = 7, a.offset = 11;
  for (int k = 0; k < 2; k++) {
    em_dtype dt = k ? EM_F64 : EM_F32;
    size_t es = esize(dt);
    a.dtype = dt;
    void *in[5];
    double *src[5] = {d.q, d.k, d.v, d.bias, d.dout};
    int64_t cnt[5] = {nq, nk, nv, nb, no};
    for (int t = 0; t < 5; t++) {
      if (dt == EM_F32)
        in[t] = to_f32(src[t], cnt[t]);
      else {
        in[t] = xmalloc(cnt[t] * 8 + 8);
        memcpy(in[t], src[t], cnt[t] * 8);
      }
    }
    a.q = in[0], a.k = in[1], a.v = in[2], a.bias = c->bias ? in[3] : NULL, a.dout = in[4];
    a.out = xmalloc(no * es + 8), a.lse = xmalloc(nl * es + 8);
    a.dq = xmalloc(nq * es + 8), a.dk_ = xmalloc(nk * es + 8), a.dv_ = xmalloc(nv * es + 8);
    double tol = dt == EM_F32 ? 2e-5 : 1e-12;
    em_status s = be->attention_forward(0, &a);
    check(s == EM_OK && close_to("attention out", a.out, dt, ro, no, tol, 10 * tol) &&
              close_to("attention lse", a.lse, dt, rl, nl, tol, tol),
          "attention_forward %s %s", dtn(dt), c->name);
    s = be->attention_backward(0, &a);
    check(s == EM_OK && close_to("attention dq", a.dq, dt, g[0], nq, 5 * tol, 10 * tol) &&
              close_to("attention dk", a.dk_, dt, g[1], nk, 5 * tol, 10 * tol) &&
              close_to("attention dv", a.dv_, dt, g[2], nv, 5 * tol, 10 * tol),
          "attention_backward %s %s", dtn(dt), c->name);
    check(strided_same(&a, es), "attention %s %s on strided heads: the same bits, no write past a row",
          dtn(dt), c->name);
    for (int t = 0; t < 5; t++) free(in[t]);
    free(a.out);
    free((void *)a.lse);
    free(a.dq);
    free(a.dk_);
    free(a.dv_);
  }
  if (c->numeric) { /* the reference's own gradients against central differences */
    double *arrs[3] = {d.q, d.k, d.v}, *tmp_o = xmalloc(no * 8), *tmp_l = xmalloc(nl * 8),
           worst = 0;
    int64_t cnt[3] = {nq, nk, nv};
    for (int t = 0; t < 3; t++)
      for (int64_t i = 0; i < cnt[t]; i++) {
        double sv = arrs[t][i], h = 1e-6;
        arrs[t][i] = sv + h;
        double lp = att_loss(c, &d, tmp_o, tmp_l);
        arrs[t][i] = sv - h;
        double lm = att_loss(c, &d, tmp_o, tmp_l);
        arrs[t][i] = sv;
        worst = fmax(worst, fabs((lp - lm) / (2 * h) - g[t][i]));
      }
    check(worst < 1e-6,
          "attention reference gradients %s match central differences (max error %.2g)", c->name,
          worst);
    free(tmp_o);
    free(tmp_l);
  }
  free(d.q);
  free(d.k);
  free(d.v);
  free(d.dout);
  free(d.bias);
  free(d.pad);
  free(ro);
  free(rl);
  free(g[0]);
  free(g[1]);
  free(g[2]);
}

static void test_attention(void) {
  const att_case cases[] = {
      {"plain B2 H3 Lq5 Lk7", 2, 3, 5, 7, 4, 6, false, false, false, 0, true},
      {"causal Lq5 < Lk7", 2, 2, 5, 7, 4, 3, true, false, false, 0, true},
      {"causal Lq7 > Lk5 (fully masked rows)", 1, 2, 7, 5, 3, 4, true, false, false, 0, true},
      {"padding + bias with -inf (fully masked rows)", 2, 2, 4, 6, 4, 4, false, true, true, 0,
       true},
      {"causal + padding + bias + dropout 0.25", 2, 2, 6, 6, 4, 5, true, true, true, 0.25, true},
      {"Lk = 0 (every row masked)", 1, 1, 3, 0, 4, 4, false, false, false, 0, false},
      {"tiles Lq70 Lk130 causal + padding + bias", 2, 2, 70, 130, 16, 8, true, true, true, 0,
       false},
      {"tiles Lq100 Lk40 causal + dropout 0.1", 1, 3, 100, 40, 8, 8, true, false, false, 0.1,
       false},
      {"tiles Lq65 Lk129 plain d=32", 1, 2, 65, 129, 32, 32, false, false, false, 0, false},
      /* rows of 131 keys start between Philox blocks (4 elements each), and
      ** a tile row of 128 takes the 64-at-a-time keep path after that */
      {"tiles Lq9 Lk131 dropout 0.3", 1, 2, 9, 131, 8, 8, false, false, false, 0.3, false},
      /* Lq <= 2: float32 takes the rows path (cpu_tile_rows) by default */
      {"rows Lq1 Lk200 causal + padding + bias", 2, 3, 1, 200, 20, 12, true, true, true, 0, false},
      {"rows Lq2 Lk131 causal + dropout 0.2", 2, 2, 2, 131, 32, 40, true, false, false, 0.2, false},
      {"rows Lq2 Lk9 padding (fully masked batch)", 2, 2, 2, 9, 5, 3, false, true, false, 0, true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) attention_case(&cases[i]);
  em_attention_args a;
  memset(&a, 0, sizeof a);
  a.dtype = EM_I64, a.B = a.H = a.Lq = a.Lk = a.dk = a.dv = 1; /* bfloat16 is computed (attention_bf16_spec.lua) */
  check(be->attention_forward(0, &a) == EM_ERR_DTYPE && msg_has("attention_forward", "bfloat16"),
        "attention on int64 is a dtype error naming the supported ones: %s", em_error_message());
}

/* ---- few query rows (a decoding step): cpu_tile_rows against the tiles ---- */

typedef int64_t (*rows_limit_fn)(int64_t);

typedef struct rows_case {
  int64_t H, Hkv, Lq, Lk, kv_rows, dk, dv;
  bool causal, pad, bias;
  double p;
} rows_case;

/* The largest |x - y| over n floats relative to max(1, |y|), and whether any bits differ. */
static double rel_diff(const float *x, const float *y, int64_t n, bool *differ) {
  double worst = 0;
  for (int64_t i = 0; i < n; i++) {
    if (isinf(y[i]) && x[i] == y[i]) continue;
    worst = fmax(worst, fabs((double)x[i] - y[i]) / fmax(1, fabs((double)y[i])));
    if (memcmp(&x[i], &y[i], 4)) *differ = true;
  }
  return worst;
}

/* n floats as bfloat16 (rounded), in a new array. */
static uint16_t *to_bf16(const float *x, int64_t n) {
  uint16_t *y = xmalloc(n * 2 + 2);
  for (int64_t i = 0; i < n; i++) y[i] = em_f32_to_bf16(x[i]);
  return y;
}

/* Widens a bfloat16 result in place of a float32 one: res holds n bf16 values;
** a new float array replaces it. */
static void widen_result(float **res, int64_t n) {
  const uint16_t *h = (const uint16_t *)*res;
  float *w = xmalloc(n * 4 + 4);
  for (int64_t i = 0; i < n; i++) w[i] = em_bf16_to_f32(h[i]);
  free(*res);
  *res = w;
}

/* One call with few query rows, run with the rows path off (the packed
** tiles) and on: outputs, lse and the backward's gradients agree within
** float32 rounding -- bfloat16's (4 of its ulps) when dt is bfloat16,
** whose outputs are rounded after sums that differ in their last float32
** bits -- and some bits differ (the rows path ran: its dot products sum in
** another order). K and V sit in a cache's buffers of kv_rows rows per
** head, the rows past Lk NaN (never read), read by Hkv heads. */
static bool rows_case_run(rows_limit_fn limit, const rows_case *c, em_dtype dt, bool *differ) {
  const int64_t B = 2, H = c->H, Hkv = c->Hkv, Lq = c->Lq, Lk = c->Lk, R = c->kv_rows;
  const int64_t nq = B * H * Lq * c->dk, nk = B * Hkv * R * c->dk, nv = B * Hkv * R * c->dv;
  const int64_t no = B * H * Lq * c->dv, nl = B * H * Lq, nb = H * Lq * Lk;
  float *q = rand_f32(nq, -1.5, 1.5), *k = rand_f32(nk, -1.5, 1.5);
  float *v = rand_f32(nv, -1, 1), *dout = rand_f32(no, -1, 1);
  float *bias = rand_f32(nb, -1, 1);
  for (int64_t i = 0; i < nb; i += 7) bias[i] = -INFINITY;
  for (int64_t g = 0; g < B * Hkv; g++)
    for (int64_t j = Lk; j < R; j++) {
      for (int64_t x = 0; x < c->dk; x++) k[(g * R + j) * c->dk + x] = NAN;
      for (int64_t x = 0; x < c->dv; x++) v[(g * R + j) * c->dv + x] = NAN;
    }
  uint8_t *pad = xmalloc(B * Lk + 1);
  for (int64_t j = 0; j < B * Lk; j++) pad[j] = j < 5 || j % 11 == 3; /* left padding and holes */
  const bool bf = dt == EM_BF16;
  uint16_t *hq = bf ? to_bf16(q, nq) : NULL, *hk = bf ? to_bf16(k, nk) : NULL;
  uint16_t *hv = bf ? to_bf16(v, nv) : NULL, *hdo = bf ? to_bf16(dout, no) : NULL;
  em_attention_args a;
  memset(&a, 0, sizeof a);
  a.dtype = dt, a.B = B, a.H = H, a.Hkv = Hkv, a.Lq = Lq, a.Lk = Lk, a.kv_rows = R, a.dk = c->dk, a.dv = c->dv;
  a.q = bf ? (void *)hq : q, a.k = bf ? (void *)hk : k, a.v = bf ? (void *)hv : v;
  a.dout = bf ? (void *)hdo : dout;
  a.bias = c->bias ? bias : NULL, a.key_padding = c->pad ? pad : NULL;
  a.bias_stride[0] = 0, a.bias_stride[1] = Lq * Lk, a.bias_stride[2] = Lk, a.bias_stride[3] = 1;
  a.causal = c->causal, a.scale = 1 / sqrt((double)c->dk), a.dropout_p = c->p, a.seed = 3, a.offset = 5;
  float *res[2][5];
  /* dk_ and dv_ are per query head, [B, H, Lk, d]: the core sums each group */
  const int64_t cnt[5] = {no, nl, nq, B * H * Lk * c->dk, B * H * Lk * c->dv};
  bool ok = true;
  for (int run = 0; run < 2; run++) {
    limit(run ? 4 : 0);
    for (int t = 0; t < 5; t++) res[run][t] = xmalloc(cnt[t] * 4 + 4);
    a.out = res[run][0], a.lse = res[run][1], a.dq = res[run][2], a.dk_ = res[run][3], a.dv_ = res[run][4];
    ok &= be->attention_forward(0, &a) == EM_OK && be->attention_backward(0, &a) == EM_OK;
  }
  limit(4);
  double worst = 0;
  for (int run = 0; run < 2 && bf; run++)
    for (int t = 0; t < 5; t++)
      if (t != 1) widen_result(&res[run][t], cnt[t]); /* lse is float32 */
  for (int t = 0; t < 5 && ok; t++) worst = fmax(worst, rel_diff(res[1][t], res[0][t], cnt[t], differ));
  ok &= worst < (bf ? 4 * 0x1p-8 : 2e-5);
  if (!ok) printf("# rows %s H%lld/%lld Lq%lld Lk%lld dk%lld dv%lld: largest difference %.3g\n", em_dtype_name(dt),
                  (long long)H, (long long)Hkv, (long long)Lq, (long long)Lk, (long long)c->dk, (long long)c->dv, worst);
  for (int run = 0; run < 2; run++)
    for (int t = 0; t < 5; t++) free(res[run][t]);
  free(q), free(k), free(v), free(dout), free(bias), free(pad);
  free(hq), free(hk), free(hv), free(hdo);
  return ok;
}

static void test_rows_path(void *h) {
  rows_limit_fn limit;
  *(void **)&limit = dlsym(h, "ember_cpu_attention_rows");
  check(limit != NULL, "the plugin exports ember_cpu_attention_rows");
  if (!limit) return;
  const int64_t before = limit(-1);
  const rows_case cases[] = {
      {8, 8, 1, 2048, 2100, 32, 32, true, false, false, 0},  /* the MHA decoding step */
      {8, 2, 1, 300, 333, 32, 32, true, true, false, 0},     /* GQA, left padding */
      {4, 1, 3, 300, 300, 20, 24, true, true, true, 0},      /* MQA, 3 rows, head dims with tails */
      {4, 4, 4, 130, 200, 64, 100, false, true, true, 0},    /* 4 rows, bias, dv past 64 */
      {2, 2, 2, 257, 300, 80, 17, true, false, true, 0.2},   /* dropout, dk past 64 */
      {2, 1, 1, 50, 64, 300, 8, false, false, false, 0},     /* dk past one chunk of 256 */
  };
  const int n = (int)(sizeof cases / sizeof cases[0]);
  for (int d = 0; d < 2; d++) {
    const em_dtype dt = d ? EM_BF16 : EM_F32;
    int good = 0;
    bool differ = false;
    for (int i = 0; i < n; i++) good += rows_case_run(limit, &cases[i], dt, &differ);
    check(good == n, "few query rows, %s: the rows path == the packed tiles within its rounding (%d of %d cases, "
          "forward and backward)", em_dtype_name(dt), good, n);
    /* bfloat16 rows need AVX-512 (cpu_tile_rows_bf16); elsewhere both runs are the tiles */
    if (dt == EM_F32 || __builtin_cpu_supports("avx512f"))
      check(differ, "%s: the rows path ran (its sums differ from the tiles' in some last bits)", em_dtype_name(dt));
  }
  limit(before);
}

int main(int argc, char **argv) {
  void *h = backend_cpu_open(argc, argv);
  if (!h) return 2;
  test_attention();
  test_rows_path(h);
  return backend_cpu_done(h);
}
