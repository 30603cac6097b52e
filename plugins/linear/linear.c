/*
** linear.c -- linear attention (Katharopoulos et al. 2020):
**
**   out_i = phi(q_i)^T S_i / (phi(q_i) . z_i + eps),
**   S_i = sum_{j visible} phi(k_j) v_j^T,   z_i = sum_{j visible} phi(k_j)
**
** Feature maps (option feature_map):
**   "elu"    phi(x) = elu(x) + 1 (the paper's); the scale is not used.
**   "favor"  Performer FAVOR+ (Choromanski et al. 2021): positive orthogonal
**            random features, phi(x)_r = exp(w_r . x' - |x'|^2 / 2) / sqrt(m)
**            with x' = x * sqrt(scale), so phi(q).phi(k) estimates
**            exp(scale * q.k). W [num_features, dk] is a buffer drawn at
**            construction from the seeded generator (state_dict key
**            "linear.features"); redraw=true draws fresh features at every
**            training forward.
**
** Causal (bottom-right aligned) keeps running prefix sums S, z while the
** queries advance, so no L x L matrix exists, and memory is O(L) (plus
** O(L m) feature rows per head while a head is computed). The backward
** recomputes the features, runs the prefix sums again for dq and suffix
** sums over the queries for dk and dv. Key padding zeroes a key's features.
** A query that sees no key (or only padding) gets 0: its numerator is 0.
** That kernel needs host memory; on other backends (or with
** kernel="composed") the same function runs as core ops, causal by a
** chunked prefix sum (see "composed path" below).
** Arbitrary attn masks and dropout do not factor through the features:
** the variant does not declare them, so the core refuses them.
*/
#include "ember_attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const em_attn_option_spec OPTIONS[] = {
  {.name = "feature_map", .type = EM_ATTN_OPT_STRING, .default_str = "elu", .choices = "elu|favor",
   .help = "elu+1 (Katharopoulos) or FAVOR+ positive orthogonal random features (Performer)"},
  {.name = "eps", .type = EM_ATTN_OPT_FLOAT, .default_num = 1e-6, .bounded = true, .min = 0, .max = 1,
   .help = "added to the denominator"},
  {.name = "num_features", .type = EM_ATTN_OPT_INT, .default_num = 64, .bounded = true, .min = 1,
   .max = 65536, .help = "favor: number of random features m"},
  {.name = "redraw", .type = EM_ATTN_OPT_BOOL, .default_num = 0,
   .help = "favor: draw fresh random features at every training forward"},
  {.name = "kernel", .type = EM_ATTN_OPT_STRING, .default_str = "auto", .choices = "auto|host|composed",
   .help = "host kernel, or core ops (any backend); auto = host kernel on host memory"},
  {.name = "chunk", .type = EM_ATTN_OPT_INT, .default_num = 64, .bounded = true, .min = 1, .max = 65536,
   .help = "composed causal path: keys per block of the chunked prefix sum"},
};

static bool is_favor(const em_attn_options *o) { return strcmp(em_attn_opt_str(o, "feature_map"), "favor") == 0; }

/* ---- random features ----------------------------------------------------- */

/* m x d positive orthogonal random features into w (host, double): blocks
** of d orthonormal rows (Gram-Schmidt on Gaussian rows), each row scaled by
** the norm of an independent Gaussian d-vector. */
static em_status draw_features(int64_t m, int64_t d, double *w) {
  em_device cpu;
  em_status s = em_cpu_device(&cpu);
  if (s != EM_OK) return s;
  int64_t n = m * d * 2;
  em_tensor *g = NULL;
  double *buf = malloc((size_t)n * sizeof *buf);
  if (!buf) return em_error(EM_ERR_OOM, "out of memory for %lld random features", (long long)m);
  s = em_normal(&g, 1, &n, 0, 1, EM_F64, cpu);
  if (s == EM_OK) s = em_to_host(g, buf);
  em_release(g);
  if (s != EM_OK) {
    free(buf);
    return s;
  }
  const double *gauss = buf, *norms = buf + m * d;
  for (int64_t r = 0; r < m; r++) {
    double *row = w + r * d;
    memcpy(row, gauss + r * d, (size_t)d * sizeof *row);
    int64_t first = r - r % d; /* orthogonal to the earlier rows of its block */
    for (int64_t p = first; p < r; p++) {
      double dot = 0;
      for (int64_t t = 0; t < d; t++) dot += row[t] * w[p * d + t];
      for (int64_t t = 0; t < d; t++) row[t] -= dot * w[p * d + t];
    }
    double nr = 0, ng = 0;
    for (int64_t t = 0; t < d; t++) nr += row[t] * row[t], ng += norms[r * d + t] * norms[r * d + t];
    nr = sqrt(nr), ng = sqrt(ng);
    for (int64_t t = 0; t < d; t++) row[t] = nr > 0 ? row[t] / nr * ng : 0;
  }
  free(buf);
  return EM_OK;
}

static em_status lin_init_params(const em_attn_options *o, const em_attn_dims *d, em_dtype dt,
                                 em_device dev, int *n, em_attn_param *params) {
  *n = 0;
  if (!is_favor(o)) return EM_OK;
  int64_t m = em_attn_opt_int(o, "num_features"), shape[2] = {m, d->dk};
  double *w = malloc((size_t)(m * d->dk) * sizeof *w);
  if (!w) return em_error(EM_ERR_OOM, "out of memory");
  em_status s = draw_features(m, d->dk, w);
  em_tensor *t64 = NULL;
  if (s == EM_OK) s = em_from_host(&t64, 2, shape, EM_F64, w, dev);
  free(w);
  if (s == EM_OK) s = em_to_dtype(&params[0].tensor, t64, dt);
  em_release(t64);
  if (s != EM_OK) return s;
  params[0].name = "features";
  params[0].learned = false;
  *n = 1;
  return EM_OK;
}

/* ---- the kernel ---------------------------------------------------------- */

typedef struct lin_state {
  em_attn_call c;       /* kept: q, k, v, key padding */
  bool favor;
  int64_t m;            /* feature dim */
  double eps, xs;       /* xs = sqrt(scale) for favor */
  double *w;            /* favor features [m, dk] */
  double *den;          /* [B,H,Lq] */
  em_tensor *out;
} lin_state;

static void lin_state_free(void *p) {
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

static em_status lin_run(lin_state *st, em_tensor *out, em_tensor *weights) {
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

static em_status lin_backward_run(const lin_state *st, em_tensor *dout, em_tensor *dq, em_tensor *dk,
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

/* ---- composed path: core ops only, so any backend ------------------------ */

/* The same function as the host kernel, written with differentiable core
** ops (autograd records them; no backward to write). Causal attention
** runs as a chunked prefix sum: the key axis is cut into blocks of `chunk`
** keys; a block's queries see the earlier blocks through the running sums
** S = sum phi(k) v^T [m, dv] and z = sum phi(k) [m], and their own block
** through a chunk x chunk lower-triangular product. No L x L tensor exists
** (unless weights are asked for): memory is O(L m + (L / chunk) m dv). */

/* References taken while composing, released together. */
typedef struct tlist {
  int n, cap;
  em_tensor **t;
} tlist;

static em_tensor *keep(tlist *l, em_tensor *t) {
  if (!t) return NULL;
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 64;
    em_tensor **nt = realloc(l->t, (size_t)cap * sizeof *nt);
    if (!nt) return NULL; /* the caller releases t and reports OOM */
    l->t = nt, l->cap = cap;
  }
  return l->t[l->n++] = t;
}

static void drop_all(tlist *l) {
  for (int i = 0; i < l->n; i++) em_release(l->t[i]);
  free(l->t);
  l->n = l->cap = 0, l->t = NULL;
}

/* Runs one core op producing *out, and files the result in the list. */
#define OP(l, out, call)                                                  \
  do {                                                                    \
    if (s == EM_OK) {                                                     \
      em_tensor *op_r_ = NULL;                                            \
      em_tensor **op_out_ = &op_r_;                                       \
      s = call;                                                           \
      if (s == EM_OK && !keep(l, op_r_)) {                                \
        em_release(op_r_);                                                \
        s = em_error(EM_ERR_OOM, "linear attention: out of memory");     \
      }                                                                   \
      (out) = s == EM_OK ? op_r_ : NULL;                                  \
    }                                                                     \
  } while (0)
#define R op_out_ /* the result slot inside OP */

/* phi(x) as core ops. Queries (is_key false) subtract their own max
** exponent per row (favor); keys subtract one per head, over the visible
** keys, except in causal mode (see head_features). pad4 is [B,1,Lk,1]
** bool (padding) or NULL. */
static em_status compose_features(tlist *l, const em_attn_call *c, em_tensor *W, double xs, em_tensor *x,
                                  bool is_key, em_tensor *pad4, em_tensor **phi) {
  em_status s = EM_OK;
  em_tensor *f = NULL;
  if (!W) { /* elu(x) + 1 */
    em_tensor *e = NULL;
    OP(l, e, em_unary(R, EM_ELU, x, 1.0, 0));
    OP(l, f, em_binary_scalar(R, EM_ADD, e, 1.0));
  } else {
    em_tensor *xp = NULL, *wt = NULL, *proj = NULL, *sq = NULL, *half = NULL, *e = NULL, *stab = NULL;
    const int last = 3;
    OP(l, xp, em_binary_scalar(R, EM_MUL, x, xs));
    OP(l, wt, em_transpose(R, W, 0, 1));
    OP(l, proj, em_matmul(R, xp, wt)); /* [B,H,L,m] */
    OP(l, sq, em_mul(R, xp, xp));
    OP(l, sq, em_sum(R, sq, 1, &last, true));
    OP(l, half, em_binary_scalar(R, EM_MUL, sq, 0.5));
    OP(l, e, em_sub(R, proj, half));
    if (!is_key) {
      OP(l, stab, em_max(R, NULL, e, 3, true));
    } else if (!c->causal) {
      em_tensor *em = e, *none = NULL;
      if (pad4) OP(l, em, em_masked_fill(R, e, pad4, -INFINITY));
      OP(l, stab, em_max(R, NULL, em, 3, true));
      OP(l, stab, em_max(R, NULL, stab, 2, true)); /* [B,H,1,1] */
      OP(l, none, em_binary_scalar(R, EM_EQ, stab, -INFINITY)); /* every key padding */
      OP(l, stab, em_masked_fill(R, stab, none, 0));
    }
    if (stab) OP(l, e, em_sub(R, e, stab));
    OP(l, f, em_unary(R, EM_EXP, e, 0, 0));
    OP(l, f, em_binary_scalar(R, EM_MUL, f, 1.0 / sqrt((double)W->shape[0])));
  }
  if (is_key && pad4) OP(l, f, em_masked_fill(R, f, pad4, 0));
  *phi = f;
  return s;
}

/* The favor features [m, dk] for this call, in q's dtype and device. */
static em_status compose_weights_of(tlist *l, const em_attn_call *c, em_tensor **W) {
  *W = NULL;
  if (!is_favor(c->options)) return EM_OK;
  int64_t m = em_attn_opt_int(c->options, "num_features"), dk = c->dims.dk, shape[2] = {m, dk};
  em_status s = EM_OK;
  if (c->training && em_attn_opt_bool(c->options, "redraw")) {
    double *w = malloc((size_t)(m * dk) * sizeof *w);
    if (!w) return em_error(EM_ERR_OOM, "out of memory");
    em_tensor *t64 = NULL;
    s = draw_features(m, dk, w);
    OP(l, t64, em_from_host(R, 2, shape, EM_F64, w, c->q->device));
    free(w);
    OP(l, *W, em_to_dtype(R, t64, c->q->dtype));
    return s;
  }
  if (c->n_params < 1 || c->params[0]->shape[0] != m || c->params[0]->shape[1] != dk)
    return em_error(EM_ERR_ARG, "favor features buffer missing or not [%lld, %lld]", (long long)m,
                    (long long)dk);
  OP(l, *W, em_detach(R, c->params[0]));
  return s;
}

/* Causal numerator [B,H,Lk,dv] and denominator [B,H,Lk,1] (without eps)
** for queries placed at key positions 0..Lk-1 (fq [B,H,Lk,m]). */
static em_status compose_causal(tlist *l, const em_attn_call *c, em_tensor *fq, em_tensor *fk, em_tensor *v,
                                int64_t chunk, em_tensor **num, em_tensor **den) {
  const int64_t Lk = c->Lk, nb = (Lk + chunk - 1) / chunk;
  em_status s = EM_OK;
  em_tensor **nums = calloc((size_t)(2 * nb), sizeof *nums), **dens = nums ? nums + nb : NULL;
  double *tri = malloc((size_t)(chunk * chunk) * sizeof *tri);
  if (!nums || !tri) {
    free(nums), free(tri);
    return em_error(EM_ERR_OOM, "linear attention: out of memory for %lld blocks", (long long)nb);
  }
  for (int64_t i = 0; i < chunk; i++)
    for (int64_t j = 0; j < chunk; j++) tri[i * chunk + j] = j <= i;
  int64_t tshape[2] = {chunk, chunk};
  em_tensor *tri64 = NULL, *trit = NULL, *Sp = NULL, *zp = NULL;
  OP(l, tri64, em_from_host(R, 2, tshape, EM_F64, tri, c->q->device));
  OP(l, trit, em_to_dtype(R, tri64, c->q->dtype));
  free(tri);
  const int rows = 2, feat = 3;
  for (int64_t b = 0; b < nb && s == EM_OK; b++) {
    const int64_t t0 = b * chunk, n = Lk - t0 < chunk ? Lk - t0 : chunk;
    em_tensor *Q = NULL, *K = NULL, *V = NULL, *Kt = NULL, *A = NULL, *tr = NULL, *nb_ = NULL, *db = NULL;
    OP(l, Q, em_narrow(R, fq, 2, t0, n));
    OP(l, K, em_narrow(R, fk, 2, t0, n));
    OP(l, V, em_narrow(R, v, 2, t0, n));
    OP(l, Kt, em_transpose(R, K, 2, 3));
    OP(l, tr, n == chunk ? em_detach(R, trit) : em_narrow(R, trit, 0, 0, n));
    if (n != chunk) OP(l, tr, em_narrow(R, tr, 1, 0, n));
    OP(l, A, em_matmul(R, Q, Kt)); /* [B,H,n,n], within the block */
    OP(l, A, em_mul(R, A, tr));
    OP(l, nb_, em_matmul(R, A, V));
    OP(l, db, em_sum(R, A, 1, &feat, true));
    if (b > 0) { /* the earlier blocks, through the running sums */
      em_tensor *pn = NULL, *pd = NULL;
      OP(l, pn, em_matmul(R, Q, Sp));
      OP(l, nb_, em_add(R, nb_, pn));
      OP(l, pd, em_mul(R, Q, zp));
      OP(l, pd, em_sum(R, pd, 1, &feat, true));
      OP(l, db, em_add(R, db, pd));
    }
    em_tensor *kv = NULL, *ks = NULL;
    OP(l, kv, em_matmul(R, Kt, V)); /* [B,H,m,dv] */
    OP(l, ks, em_sum(R, K, 1, &rows, true)); /* [B,H,1,m] */
    if (b == 0) {
      Sp = kv, zp = ks;
    } else {
      OP(l, Sp, em_add(R, Sp, kv));
      OP(l, zp, em_add(R, zp, ks));
    }
    nums[b] = nb_, dens[b] = db;
  }
  OP(l, *num, em_cat(R, (int)nb, nums, 2));
  OP(l, *den, em_cat(R, (int)nb, dens, 2));
  free(nums);
  return s;
}

static em_status lin_compose(const em_attn_call *c, em_tensor **out, em_tensor **weights) {
  const int64_t B = c->B, H = c->H, Lq = c->Lq, Lk = c->Lk, dv = c->dims.dv;
  const double eps = em_attn_opt_num(c->options, "eps");
  const int last = 3, rows = 2;
  tlist l = {0};
  em_status s = EM_OK;
  em_tensor *W = NULL, *pad4 = NULL, *fq = NULL, *fk = NULL, *num = NULL, *den = NULL, *o = NULL;
  if (Lk == 0) { /* no key at all: zeros, attached to nothing */
    int64_t oshape[4] = {B, H, Lq, dv}, wshape[4] = {B, H, Lq, 0};
    s = em_zeros(out, 4, oshape, c->q->dtype, c->q->device);
    if (s == EM_OK && weights && c->need_weights) s = em_zeros(weights, 4, wshape, c->q->dtype, c->q->device);
    return s;
  }
  s = compose_weights_of(&l, c, &W);
  if (c->key_padding) {
    int64_t pshape[4] = {B, 1, Lk, 1};
    OP(&l, pad4, em_view(R, c->key_padding, 4, pshape));
  }
  if (s == EM_OK) s = compose_features(&l, c, W, sqrt(c->scale), c->q, false, NULL, &fq);
  if (s == EM_OK) s = compose_features(&l, c, W, sqrt(c->scale), c->k, true, pad4, &fk);
  if (!c->causal) {
    em_tensor *fkt = NULL, *S = NULL, *z = NULL, *qz = NULL;
    OP(&l, fkt, em_transpose(R, fk, 2, 3));
    OP(&l, S, em_matmul(R, fkt, c->v)); /* [B,H,m,dv] */
    OP(&l, z, em_sum(R, fk, 1, &rows, true)); /* [B,H,1,m] */
    OP(&l, num, em_matmul(R, fq, S));
    OP(&l, qz, em_mul(R, fq, z));
    OP(&l, den, em_sum(R, qz, 1, &last, true));
  } else {
    /* query i sits at key position i + Lk - Lq: pad the queries to the key
    ** axis (shift > 0), or drop those that see no key (shift < 0) */
    const int64_t shift = Lk - Lq;
    em_tensor *fqp = fq;
    if (shift > 0) {
      int64_t zshape[4] = {B, H, shift, fq ? fq->shape[3] : 0};
      em_tensor *zq = NULL;
      OP(&l, zq, em_zeros(R, 4, zshape, c->q->dtype, c->q->device));
      em_tensor *parts[2] = {zq, fq};
      OP(&l, fqp, em_cat(R, 2, parts, 2));
    } else if (shift < 0) {
      OP(&l, fqp, em_narrow(R, fq, 2, -shift, Lk));
    }
    const int64_t chunk = em_attn_opt_int(c->options, "chunk");
    if (s == EM_OK) s = compose_causal(&l, c, fqp, fk, c->v, chunk, &num, &den);
    if (shift > 0) {
      OP(&l, num, em_narrow(R, num, 2, shift, Lq));
      OP(&l, den, em_narrow(R, den, 2, shift, Lq));
    } else if (shift < 0) { /* the dropped queries: numerator and denominator 0 */
      int64_t nshape[4] = {B, H, -shift, dv}, dshape[4] = {B, H, -shift, 1};
      em_tensor *zn = NULL, *zd = NULL;
      OP(&l, zn, em_zeros(R, 4, nshape, c->q->dtype, c->q->device));
      OP(&l, zd, em_zeros(R, 4, dshape, c->q->dtype, c->q->device));
      em_tensor *np[2] = {zn, num}, *dp[2] = {zd, den};
      OP(&l, num, em_cat(R, 2, np, 2));
      OP(&l, den, em_cat(R, 2, dp, 2));
    }
  }
  /* out = num / (den + eps), and 0 where that is 0 (eps = 0, nothing seen) */
  em_tensor *zero = NULL;
  OP(&l, den, em_binary_scalar(R, EM_ADD, den, eps));
  OP(&l, zero, em_binary_scalar(R, EM_EQ, den, 0));
  OP(&l, den, em_masked_fill(R, den, zero, 1));
  OP(&l, o, em_div(R, num, den));
  if (weights && c->need_weights && s == EM_OK) { /* the effective attention matrix, for inspection */
    em_tensor *fkt = NULL, *A = NULL, *allowed = NULL, *hidden = NULL;
    OP(&l, fkt, em_transpose(R, fk, 2, 3));
    OP(&l, A, em_matmul(R, fq, fkt));
    if (s == EM_OK && (s = em_attn_allowed(c, NULL, &allowed)) == EM_OK && allowed) {
      if (!keep(&l, allowed)) {
        em_release(allowed);
        s = em_error(EM_ERR_OOM, "linear attention: out of memory");
      }
      OP(&l, hidden, em_unary(R, EM_NOT, allowed, 0, 0));
      OP(&l, A, em_masked_fill(R, A, hidden, 0));
    }
    OP(&l, A, em_div(R, A, den));
    if (s == EM_OK) s = em_detach(weights, A);
  }
  if (s == EM_OK) *out = em_retain(o);
  drop_all(&l);
  return s;
}

#undef R
#undef OP

/* ---- vtable functions ---------------------------------------------------- */

/* The host kernel, unless kernel="composed" or the tensors are elsewhere
** (kernel="host" there: forward explains). */
static bool lin_can_forward(const em_attn_call *c) {
  const char *k = em_attn_opt_str(c->options, "kernel");
  if (strcmp(k, "composed") == 0) return false;
  return strcmp(k, "host") == 0 || em_attn_on_host(c);
}

static em_status lin_forward(const em_attn_call *c, em_tensor **out, em_tensor **weights, void **saved) {
  if (!em_attn_on_host(c))
    return em_error(EM_ERR_UNSUPPORTED,
                    "linear attention: kernel=\"host\" needs host memory (kernel=\"auto\" composes core ops elsewhere)");
  lin_state *st = calloc(1, sizeof *st);
  if (!st) return em_error(EM_ERR_OOM, "out of memory");
  em_attn_call_keep(&st->c, c);
  st->favor = is_favor(c->options);
  st->eps = em_attn_opt_num(c->options, "eps");
  st->xs = sqrt(c->scale);
  st->m = st->favor ? em_attn_opt_int(c->options, "num_features") : c->dims.dk;
  em_status s = EM_OK;
  st->den = malloc((size_t)(c->B * c->H * c->Lq) * sizeof *st->den);
  if (!st->den) s = em_error(EM_ERR_OOM, "out of memory");
  if (s == EM_OK && st->favor) {
    int64_t n = st->m * c->dims.dk;
    if (!(st->w = malloc((size_t)n * sizeof *st->w))) s = em_error(EM_ERR_OOM, "out of memory");
    else if (c->training && em_attn_opt_bool(c->options, "redraw")) s = draw_features(st->m, c->dims.dk, st->w);
    else if (c->n_params < 1 || c->params[0]->shape[0] != st->m || c->params[0]->shape[1] != c->dims.dk)
      s = em_error(EM_ERR_ARG, "favor features buffer missing or not [%lld, %lld]", (long long)st->m,
                   (long long)c->dims.dk);
    else {
      em_tensor *f64 = NULL;
      s = em_to_dtype(&f64, c->params[0], EM_F64);
      if (s == EM_OK) s = em_to_host(f64, st->w);
      em_release(f64);
    }
  }
  int64_t oshape[4] = {c->B, c->H, c->Lq, c->dims.dv}, wshape[4] = {c->B, c->H, c->Lq, c->Lk};
  em_tensor *w = NULL;
  if (s == EM_OK) s = em_empty(&st->out, 4, oshape, c->q->dtype, c->q->device);
  if (s == EM_OK && weights) s = em_empty(&w, 4, wshape, c->q->dtype, c->q->device);
  if (s == EM_OK) s = lin_run(st, st->out, w);
  if (s != EM_OK) {
    em_release(w);
    lin_state_free(st);
    return s;
  }
  *out = em_retain(st->out);
  if (weights) *weights = w;
  if (c->need_grad) *saved = st;
  else lin_state_free(st);
  return EM_OK;
}

static em_status lin_backward(void *p, em_tensor *dout, const bool *needs, em_tensor **grads) {
  lin_state *st = p;
  (void)needs;
  if (!st) return em_error(EM_ERR_AUTOGRAD, "backward without saved state");
  const em_attn_call *c = &st->c;
  em_tensor *dq = NULL, *dk = NULL, *dv = NULL;
  em_status s = em_empty(&dq, 4, c->q->shape, c->q->dtype, c->q->device);
  if (s == EM_OK) s = em_empty(&dk, 4, c->k->shape, c->k->dtype, c->k->device);
  if (s == EM_OK) s = em_empty(&dv, 4, c->v->shape, c->v->dtype, c->v->device);
  if (s == EM_OK) s = lin_backward_run(st, dout, dq, dk, dv);
  if (s != EM_OK) {
    em_release(dq), em_release(dk), em_release(dv);
    return s;
  }
  grads[0] = dq, grads[1] = dk, grads[2] = dv; /* the features buffer gets no gradient */
  return EM_OK;
}

static const em_attention_variant LINEAR = {
  .abi_version = EM_ATTENTION_ABI_VERSION,
  .struct_size = sizeof(em_attention_variant),
  .name = "linear",
  .version = "1.0",
  .description = "linear attention: elu+1 (Katharopoulos 2020) or FAVOR+ (Performer); O(L) memory",
  .caps = EM_ATTN_CAP_KEY_PADDING | EM_ATTN_CAP_CAUSAL | EM_ATTN_CAP_WEIGHTS | EM_ATTN_CAP_CROSS,
  .n_options = (int)(sizeof OPTIONS / sizeof OPTIONS[0]),
  .options = OPTIONS,
  .init_params = lin_init_params,
  .forward = lin_forward,
  .backward = lin_backward,
  .free_saved = lin_state_free,
  .compose = lin_compose,
  .can_forward = lin_can_forward,
};

EM_PLUGIN_EXPORT const em_plugin_info ember_plugin_info = {
  EM_ATTENTION_ABI_VERSION, EM_PLUGIN_ATTENTION, "linear", "1.0",
  "linear attention (elu+1 or FAVOR+ random features), causal by prefix sums, O(L) memory"};

EM_PLUGIN_EXPORT const void *ember_plugin_init(char *err, size_t errlen) {
  (void)err, (void)errlen;
  return &LINEAR;
}
