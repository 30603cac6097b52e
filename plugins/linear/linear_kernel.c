/*
** linear_kernel.c -- the host kernel of linear attention (see linear.c):
** features per head, prefix sums for causal, the backward with suffix sums.
*/
#include "linear.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


void lin_state_free(void *p) {
  lin_state *st = p;
  if (!st) return;
  em_attn_call_drop(&st->c);
  free(st->w), free(st->den);
  em_release(st->out);
  free(st);
}

static void load_row(const em_tensor *t, int64_t row, int64_t n, double *dst) {
  if (t->dtype == EM_F32) {
    const float *p = (const float *)em_data(t) + row * n;
    for (int64_t i = 0; i < n; i++) dst[i] = p[i];
  } else {
    memcpy(dst, (const double *)em_data(t) + row * n, (size_t)n * sizeof *dst);
  }
}

static void store_row(em_tensor *t, int64_t row, int64_t n, const double *src) {
  if (t->dtype == EM_F32) {
    float *p = (float *)em_data(t) + row * n;
    for (int64_t i = 0; i < n; i++) p[i] = (float)src[i];
  } else {
    memcpy((double *)em_data(t) + row * n, src, (size_t)n * sizeof *src);
  }
}

/* w_r . x' for every r, x' = x * xs */
static void favor_proj(const lin_state *st, const double *x, int64_t d, double *proj) {
  for (int64_t r = 0; r < st->m; r++) {
    double s = 0;
    for (int64_t t = 0; t < d; t++) s += st->w[r * d + t] * x[t];
    proj[r] = s * st->xs;
  }
}

/* phi(x) into f; stab is subtracted in the exponent (favor). */
static void features(const lin_state *st, const double *x, int64_t d, double stab, double *proj, double *f) {
  if (!st->favor) {
    for (int64_t t = 0; t < d; t++) f[t] = x[t] > 0 ? x[t] + 1 : exp(x[t]);
    return;
  }
  double sq = 0;
  for (int64_t t = 0; t < d; t++) sq += x[t] * x[t];
  sq *= st->xs * st->xs * 0.5;
  favor_proj(st, x, d, proj);
  double inv = 1.0 / sqrt((double)st->m);
  for (int64_t r = 0; r < st->m; r++) f[r] = exp(proj[r] - sq - stab) * inv;
}

/* dx += J_phi(x)^T df, with f = phi(x). */
static void features_back(const lin_state *st, const double *x, int64_t d, const double *f,
                          const double *df, double *dx) {
  if (!st->favor) {
    for (int64_t t = 0; t < d; t++) dx[t] = df[t] * (x[t] > 0 ? 1 : f[t]);
    return;
  }
  /* dphi_r/dx' = phi_r (w_r - x'); dx = xs * dx' */
  double a = 0;
  for (int64_t t = 0; t < d; t++) dx[t] = 0;
  for (int64_t r = 0; r < st->m; r++) {
    double g = df[r] * f[r];
    a += g;
    for (int64_t t = 0; t < d; t++) dx[t] += g * st->w[r * d + t];
  }
  for (int64_t t = 0; t < d; t++) dx[t] = st->xs * (dx[t] - a * x[t] * st->xs);
}

/* The shifts are maxima of e_r(x) = w_r . x' - |x'|^2 / 2 over features
** (and keys); they are part of the function, so the backward goes through
** them too: dx -= (sum_r df_r phi_r) * de_{r*}/dx, with
** de_r/dx = xs w_r - xs^2 x. */
static void shift_back(const lin_state *st, const double *x, int64_t d, int64_t rstar, double coef,
                       double *dx) {
  for (int64_t t = 0; t < d; t++) dx[t] -= coef * (st->xs * st->w[rstar * d + t] - st->xs * st->xs * x[t]);
}

/* Last visible key of query i, or -1. */
static int64_t last_key(const em_attn_call *c, int64_t i) {
  if (!c->causal) return c->Lk - 1;
  int64_t p = em_attn_qpos(c, i);
  return p < c->Lk - 1 ? p : c->Lk - 1;
}

/* Per-thread scratch for one head. */
typedef struct scratch {
  double *fq, *fk; /* [Lq, m], [Lk, m] features */
  double *S, *z;   /* [m, dv], [m] */
  double *x, *proj, *g, *o, *tmp;
  int64_t *qstar;          /* favor: argmax feature of each query's shift */
  int64_t kstar_j, kstar_r; /* favor: the key and feature of the keys' shift */
} scratch;

static bool scratch_new(scratch *s, const em_attn_call *c, int64_t m) {
  int64_t d = c->dims.dk > c->dims.dv ? c->dims.dk : c->dims.dv, big = d > m ? d : m;
  memset(s, 0, sizeof *s);
  s->fq = malloc((size_t)(c->Lq * m) * sizeof(double));
  s->fk = malloc((size_t)(c->Lk * m) * sizeof(double));
  s->S = malloc((size_t)(m * c->dims.dv) * sizeof(double));
  s->z = malloc((size_t)m * sizeof(double));
  s->x = malloc((size_t)big * sizeof(double));
  s->proj = malloc((size_t)big * sizeof(double));
  s->g = malloc((size_t)big * sizeof(double));
  s->o = malloc((size_t)big * sizeof(double));
  s->tmp = malloc((size_t)big * sizeof(double));
  s->qstar = malloc((size_t)c->Lq * sizeof(int64_t));
  return s->qstar && s->fq && s->fk && s->S && s->z && s->x && s->proj && s->g && s->o && s->tmp;
}

static void scratch_free(scratch *s) {
  free(s->fq), free(s->fk), free(s->S), free(s->z), free(s->x), free(s->proj), free(s->g), free(s->o),
      free(s->tmp), free(s->qstar);
}

/* Features of head bh's queries and keys into s->fq, s->fk. */
static void head_features(const lin_state *st, scratch *s, int64_t bh) {
  const em_attn_call *c = &st->c;
  int64_t d = c->dims.dk, m = st->m, b = bh / c->H;
  const uint8_t *kp = c->key_padding ? em_data(c->key_padding) : NULL;
  double kstab = 0;
  s->kstar_j = -1, s->kstar_r = 0; /* no key shift unless set below */
  /* One shift for all keys of the head. It cancels in num/den except for
  ** eps, so in causal mode, where a later key must not reach an earlier
  ** query even through eps, keys get no shift: phi(k) <= exp(|w_r|^2 / 2)
  ** / sqrt(m) anyway, so it cannot overflow. */
  if (st->favor && !c->causal) {
    kstab = -INFINITY;
    for (int64_t j = 0; j < c->Lk; j++) {
      if (kp && kp[b * c->Lk + j]) continue;
      load_row(c->k, bh * c->Lk + j, d, s->x);
      double sq = 0;
      for (int64_t t = 0; t < d; t++) sq += s->x[t] * s->x[t];
      favor_proj(st, s->x, d, s->proj);
      for (int64_t r = 0; r < m; r++) {
        double e = s->proj[r] - sq * st->xs * st->xs * 0.5;
        if (e > kstab) kstab = e, s->kstar_j = j, s->kstar_r = r;
      }
    }
    if (kstab == -INFINITY) kstab = 0;
  }
  for (int64_t j = 0; j < c->Lk; j++) {
    double *f = s->fk + j * m;
    if (kp && kp[b * c->Lk + j]) {
      memset(f, 0, (size_t)m * sizeof *f);
      continue;
    }
    load_row(c->k, bh * c->Lk + j, d, s->x);
    features(st, s->x, d, kstab, s->proj, f);
  }
  for (int64_t i = 0; i < c->Lq; i++) {
    load_row(c->q, bh * c->Lq + i, d, s->x);
    double qstab = 0;
    if (st->favor) { /* per query: cancels exactly */
      double sq = 0;
      for (int64_t t = 0; t < d; t++) sq += s->x[t] * s->x[t];
      favor_proj(st, s->x, d, s->proj);
      qstab = -INFINITY;
      for (int64_t r = 0; r < m; r++) {
        double e = s->proj[r] - sq * st->xs * st->xs * 0.5;
        if (e > qstab) qstab = e, s->qstar[i] = r;
      }
    }
    features(st, s->x, d, qstab, s->proj, s->fq + i * m);
  }
}

em_status lin_run(lin_state *st, em_tensor *out, em_tensor *weights) {
  const em_attn_call *c = &st->c;
  int64_t m = st->m, dv = c->dims.dv, BH = c->B * c->H;
  int failed = 0;
#pragma omp parallel
  {
    scratch s;
    bool ok = scratch_new(&s, c, m);
    if (!ok) {
#pragma omp atomic write
      failed = 1;
    }
#pragma omp for schedule(dynamic, 1)
    for (int64_t bh = 0; bh < BH; bh++) {
      if (!ok) continue;
      head_features(st, &s, bh);
      memset(s.S, 0, (size_t)(m * dv) * sizeof(double));
      memset(s.z, 0, (size_t)m * sizeof(double));
      int64_t next = 0; /* keys added so far */
      for (int64_t i = 0; i < c->Lq; i++) {
        for (int64_t last = last_key(c, i); next <= last; next++) { /* prefix sums */
          const double *f = s.fk + next * m;
          load_row(c->v, bh * c->Lk + next, dv, s.x);
          for (int64_t r = 0; r < m; r++) {
            s.z[r] += f[r];
            for (int64_t t = 0; t < dv; t++) s.S[r * dv + t] += f[r] * s.x[t];
          }
        }
        const double *a = s.fq + i * m;
        double den = st->eps;
        for (int64_t r = 0; r < m; r++) den += a[r] * s.z[r];
        for (int64_t t = 0; t < dv; t++) s.o[t] = 0;
        for (int64_t r = 0; r < m; r++)
          for (int64_t t = 0; t < dv; t++) s.o[t] += a[r] * s.S[r * dv + t];
        for (int64_t t = 0; t < dv; t++) s.o[t] = den > 0 ? s.o[t] / den : 0;
        st->den[bh * c->Lq + i] = den;
        store_row(out, bh * c->Lq + i, dv, s.o);
        if (weights) { /* the effective attention matrix, for inspection */
          for (int64_t j = 0; j < c->Lk; j++) {
            double w = 0;
            if (j <= last_key(c, i) && den > 0) {
              for (int64_t r = 0; r < m; r++) w += a[r] * s.fk[j * m + r];
              w /= den;
            }
            s.tmp[0] = w;
            store_row(weights, (bh * c->Lq + i) * c->Lk + j, 1, s.tmp);
          }
        }
      }
    }
    scratch_free(&s);
  }
  return failed ? em_error(EM_ERR_OOM, "out of memory in the linear attention kernel") : EM_OK;
}

em_status lin_backward_run(const lin_state *st, em_tensor *dout, em_tensor *dq, em_tensor *dk,
                                  em_tensor *dv_) {
  const em_attn_call *c = &st->c;
  int64_t m = st->m, dv = c->dims.dv, d = c->dims.dk, BH = c->B * c->H;
  int failed = 0;
#pragma omp parallel
  {
    scratch s;
    bool ok = scratch_new(&s, c, m);
    double *da = malloc((size_t)m * sizeof(double)), *u = malloc((size_t)dv * sizeof(double));
    double *T = malloc((size_t)(m * dv) * sizeof(double)), *wv = malloc((size_t)m * sizeof(double));
    double *r_i = malloc((size_t)c->Lq * sizeof(double));
    double *U = malloc((size_t)(c->Lq * dv) * sizeof(double));
    ok = ok && da && u && T && wv && r_i && U;
    if (!ok) {
#pragma omp atomic write
      failed = 1;
    }
#pragma omp for schedule(dynamic, 1)
    for (int64_t bh = 0; bh < BH; bh++) {
      if (!ok) continue;
      const uint8_t *kp = c->key_padding ? em_data(c->key_padding) : NULL;
      int64_t b = bh / c->H;
      head_features(st, &s, bh);
      /* Pass 1, queries ascending: prefix sums again; da_i = S u_i + z r_i,
      ** u_i = g_i / den_i, r_i = -(g_i . out_i) / den_i. */
      memset(s.S, 0, (size_t)(m * dv) * sizeof(double));
      memset(s.z, 0, (size_t)m * sizeof(double));
      int64_t next = 0;
      for (int64_t i = 0; i < c->Lq; i++) {
        for (int64_t last = last_key(c, i); next <= last; next++) {
          const double *f = s.fk + next * m;
          load_row(c->v, bh * c->Lk + next, dv, s.x);
          for (int64_t r = 0; r < m; r++) {
            s.z[r] += f[r];
            for (int64_t t = 0; t < dv; t++) s.S[r * dv + t] += f[r] * s.x[t];
          }
        }
        double den = st->den[bh * c->Lq + i];
        load_row(dout, bh * c->Lq + i, dv, s.g);
        load_row(st->out, bh * c->Lq + i, dv, s.o);
        double go = 0;
        for (int64_t t = 0; t < dv; t++) go += s.g[t] * s.o[t];
        double *ui = U + i * dv;
        for (int64_t t = 0; t < dv; t++) ui[t] = den > 0 ? s.g[t] / den : 0;
        r_i[i] = den > 0 ? -go / den : 0;
        for (int64_t r = 0; r < m; r++) {
          double acc = s.z[r] * r_i[i];
          for (int64_t t = 0; t < dv; t++) acc += s.S[r * dv + t] * ui[t];
          da[r] = acc;
        }
        load_row(c->q, bh * c->Lq + i, d, s.x);
        features_back(st, s.x, d, s.fq + i * m, da, s.tmp);
        if (st->favor) {
          double coef = 0;
          for (int64_t r = 0; r < m; r++) coef += da[r] * s.fq[i * m + r];
          shift_back(st, s.x, d, s.qstar[i], coef, s.tmp);
        }
        store_row(dq, bh * c->Lq + i, d, s.tmp);
      }
      /* Pass 2, keys descending: suffix sums over the queries that see key
      ** j: T = sum a_i u_i^T, w = sum a_i r_i; db_j = T v_j + w,
      ** dv_j = T^T b_j. */
      memset(T, 0, (size_t)(m * dv) * sizeof(double));
      memset(wv, 0, (size_t)m * sizeof(double));
      int64_t iq = c->Lq - 1;
      double kcoef = 0; /* favor: sum over keys of db_j . phi(k_j), for the shift */
      for (int64_t j = c->Lk - 1; j >= 0; j--) {
        for (; iq >= 0 && last_key(c, iq) >= j; iq--) {
          const double *a = s.fq + iq * m, *ui = U + iq * dv;
          for (int64_t r = 0; r < m; r++) {
            wv[r] += a[r] * r_i[iq];
            for (int64_t t = 0; t < dv; t++) T[r * dv + t] += a[r] * ui[t];
          }
        }
        const double *f = s.fk + j * m;
        load_row(c->v, bh * c->Lk + j, dv, s.x);
        for (int64_t t = 0; t < dv; t++) s.o[t] = 0;
        for (int64_t r = 0; r < m; r++) {
          double acc = wv[r];
          for (int64_t t = 0; t < dv; t++) {
            acc += T[r * dv + t] * s.x[t];
            s.o[t] += T[r * dv + t] * f[r];
          }
          da[r] = acc;
        }
        store_row(dv_, bh * c->Lk + j, dv, s.o);
        if (kp && kp[b * c->Lk + j]) {
          for (int64_t t = 0; t < d; t++) s.tmp[t] = 0;
        } else {
          load_row(c->k, bh * c->Lk + j, d, s.x);
          features_back(st, s.x, d, f, da, s.tmp);
          for (int64_t r = 0; st->favor && r < m; r++) kcoef += da[r] * f[r];
        }
        store_row(dk, bh * c->Lk + j, d, s.tmp);
      }
      if (st->favor && s.kstar_j >= 0) { /* the keys' shift depends on one key */
        int64_t js = s.kstar_j;
        load_row(c->k, bh * c->Lk + js, d, s.x);
        load_row(dk, bh * c->Lk + js, d, s.tmp);
        shift_back(st, s.x, d, s.kstar_r, kcoef, s.tmp);
        store_row(dk, bh * c->Lk + js, d, s.tmp);
      }
    }
    scratch_free(&s);
    free(da), free(u), free(T), free(wv), free(r_i), free(U);
  }
  return failed ? em_error(EM_ERR_OOM, "out of memory in the linear attention backward") : EM_OK;
}

