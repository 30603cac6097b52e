/*
** relpos_kernel.h -- body of relpos's host kernel, included by
** relpos_host.c once per element type (T, RK_(name)). Flash-style like
** plugins/common/ra_kernel.h: online softmax per query row, lse saved,
** backward recomputes; the relative terms are added per (i, j):
**   shaw:  s += scale * q_i . rel_k[c(r)],  value v_j + rel_v[c(r)]
**   t5:    s += table[bucket(r), h]
**   alibi: s -= slope_h * |r|
** with r = j - (i + Lk - Lq). Memory O(L); time O(Lq * Lk).
*/

static inline T RK_(dot)(const T *a, const T *b, int64_t n) {
  T s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t d = 0;
  for (; d + 4 <= n; d += 4) {
    s0 += a[d] * b[d];
    s1 += a[d + 1] * b[d + 1];
    s2 += a[d + 2] * b[d + 2];
    s3 += a[d + 3] * b[d + 3];
  }
  for (; d < n; d++) s0 += a[d] * b[d];
  return (s0 + s1) + (s2 + s3);
}

static inline void RK_(axpy)(T *restrict y, T a, const T *restrict x, int64_t n) {
  for (int64_t d = 0; d < n; d++) y[d] += a * x[d];
}

/* Score of (i, j) or -INFINITY; *ri gets the table row (shaw: rel index,
** t5: bucket) for the backward. */
static inline double RK_(score)(const rk_ctx *x, const T *qi, const T *kj, int64_t b, int64_t h,
                               int64_t i, int64_t j, int64_t *ri) {
  const em_attn_call *c = x->c;
  int64_t pos = i + c->Lk - c->Lq, r = j - pos;
  if (c->causal && j > pos) return -INFINITY;
  if (x->kp && x->kp[b * c->Lk + j]) return -INFINITY;
  int64_t mo = b * x->ms[0] + h * x->ms[1] + i * x->ms[2] + j * x->ms[3];
  if (x->mbool && !x->mbool[mo]) return -INFINITY;
  double s = (double)RK_(dot)(qi, kj, c->dims.dk);
  *ri = x->rel_index[r + x->r0];
  if (x->mode == 0) s += (double)RK_(dot)(qi, (const T *)x->rk + *ri * c->dims.dk, c->dims.dk);
  s *= c->scale;
  if (x->mode == 1) s += (double)((const T *)x->tbl)[*ri * c->H + h];
  if (x->mode == 2) s -= x->slopes[h] * (double)(r < 0 ? -r : r);
  if (x->madd) s += (double)((const T *)x->madd)[mo];
  return s;
}

static inline double RK_(drop)(const rk_ctx *x, int64_t b, int64_t h, int64_t i, int64_t j) {
  const em_attn_call *c = x->c;
  if (c->dropout_p <= 0) return 1.0;
  uint64_t idx = (uint64_t)(((b * c->H + h) * c->Lq + i) * c->Lk + j);
  return em_philox_uniform_at(c->seed, c->offset, idx) >= c->dropout_p ? 1.0 / (1.0 - c->dropout_p) : 0.0;
}

static em_status RK_(forward)(const rk_ctx *x, T *out, double *lse, T *w) {
  const em_attn_call *c = x->c;
  const T *q = em_data(c->q), *k = em_data(c->k), *v = em_data(c->v), *rv = x->rv;
  const int64_t Lq = c->Lq, Lk = c->Lk, dk = c->dims.dk, dv = c->dims.dv, BH = c->B * c->H;
  int failed = 0;
#pragma omp parallel
  {
    T *acc = malloc((size_t)dv * sizeof *acc);
    if (!acc) {
#pragma omp atomic write
      failed = 1;
    }
#pragma omp for schedule(dynamic, 1)
    for (int64_t bh = 0; bh < BH; bh++) {
      if (!acc) continue;
      int64_t b = bh / c->H, h = bh % c->H;
      for (int64_t i = 0; i < Lq; i++) {
        const T *qi = q + (bh * Lq + i) * dk;
        double m = -INFINITY, l = 0;
        for (int64_t d = 0; d < dv; d++) acc[d] = 0;
        int64_t end = c->causal ? i + Lk - Lq + 1 : Lk;
        if (end > Lk) end = Lk;
        for (int64_t j = 0; j < end; j++) {
          int64_t ri = 0;
          double s = RK_(score)(x, qi, k + (bh * Lk + j) * dk, b, h, i, j, &ri);
          if (s == -INFINITY) continue;
          if (s > m) {
            double corr = exp(m - s);
            l *= corr;
            for (int64_t d = 0; d < dv; d++) acc[d] *= (T)corr;
            m = s;
          }
          double p = exp(s - m);
          l += p;
          double pz = p * RK_(drop)(x, b, h, i, j);
          if (pz != 0) {
            RK_(axpy)(acc, (T)pz, v + (bh * Lk + j) * dv, dv);
            if (x->mode == 0) RK_(axpy)(acc, (T)pz, rv + ri * dv, dv);
          }
        }
        T *oi = out + (bh * Lq + i) * dv;
        if (l == 0) {
          for (int64_t d = 0; d < dv; d++) oi[d] = 0;
          lse[bh * Lq + i] = -INFINITY;
          continue;
        }
        for (int64_t d = 0; d < dv; d++) oi[d] = (T)((double)acc[d] / l);
        double L = m + log(l);
        lse[bh * Lq + i] = L;
        if (w) {
          T *wi = w + (bh * Lq + i) * Lk;
          for (int64_t j = 0; j < Lk; j++) {
            int64_t ri = 0;
            double s = RK_(score)(x, qi, k + (bh * Lk + j) * dk, b, h, i, j, &ri);
            wi[j] = s == -INFINITY ? 0 : (T)exp(s - L);
          }
        }
      }
    }
    free(acc);
  }
  return failed ? em_error(EM_ERR_OOM, "out of memory in the relpos kernel") : EM_OK;
}

/* grk, grv (shaw) or gtbl (t5) get each (b, h)'s table gradients in its
** own slice ([BH, ...], zeroed by the caller), which the caller sums in
** order: the result does not depend on the thread schedule. */
static em_status RK_(backward)(const rk_ctx *x, const T *dout, const T *out, const double *lse,
                               T *dq, T *dk_, T *dv_, T *grk, T *grv, T *gtbl) {
  const em_attn_call *c = x->c;
  const T *q = em_data(c->q), *k = em_data(c->k), *v = em_data(c->v), *rk = x->rk, *rv = x->rv;
  const int64_t Lq = c->Lq, Lk = c->Lk, dk = c->dims.dk, dv = c->dims.dv, BH = c->B * c->H;
  const int64_t nrk = x->mode == 0 ? x->ntab * dk : 0, nrv = x->mode == 0 ? x->ntab * dv : 0;
  const int64_t ntb = x->mode == 1 ? x->ntab * c->H : 0;
  int failed = 0;
#pragma omp parallel
  {
    T *gq = malloc((size_t)dk * sizeof *gq), *vr = malloc((size_t)dv * sizeof *vr);
    T *gk = calloc((size_t)(Lk * dk), sizeof *gk), *gv = calloc((size_t)(Lk * dv), sizeof *gv);
    bool ok = gq && vr && gk && gv;
    if (!ok) {
#pragma omp atomic write
      failed = 1;
    }
#pragma omp for schedule(dynamic, 1)
    for (int64_t bh = 0; bh < BH; bh++) {
      if (!ok) continue;
      int64_t b = bh / c->H, h = bh % c->H;
      T *trk = grk + bh * nrk, *trv = grv + bh * nrv, *ttb = gtbl + bh * ntb;
      memset(gk, 0, (size_t)(Lk * dk) * sizeof *gk);
      memset(gv, 0, (size_t)(Lk * dv) * sizeof *gv);
      for (int64_t i = 0; i < Lq; i++) {
        const T *qi = q + (bh * Lq + i) * dk, *gi = dout + (bh * Lq + i) * dv;
        double L = lse[bh * Lq + i];
        for (int64_t d = 0; d < dk; d++) gq[d] = 0;
        if (L != -INFINITY) {
          double D = (double)RK_(dot)(gi, out + (bh * Lq + i) * dv, dv);
          int64_t end = c->causal ? i + Lk - Lq + 1 : Lk;
          if (end > Lk) end = Lk;
          for (int64_t j = 0; j < end; j++) {
            const T *kj = k + (bh * Lk + j) * dk, *vj = v + (bh * Lk + j) * dv;
            int64_t ri = 0;
            double s = RK_(score)(x, qi, kj, b, h, i, j, &ri);
            if (s == -INFINITY) continue;
            double p = exp(s - L), z = RK_(drop)(x, b, h, i, j), dp = 0;
            if (z != 0) {
              if (x->mode == 0) {
                for (int64_t d = 0; d < dv; d++) vr[d] = vj[d] + rv[ri * dv + d];
                dp = (double)RK_(dot)(gi, vr, dv) * z;
                RK_(axpy)(trv + ri * dv, (T)(p * z), gi, dv);
              } else {
                dp = (double)RK_(dot)(gi, vj, dv) * z;
              }
              RK_(axpy)(gv + j * dv, (T)(p * z), gi, dv);
            }
            double dsraw = p * (dp - D);
            T ds = (T)(dsraw * c->scale);
            RK_(axpy)(gq, ds, kj, dk);
            RK_(axpy)(gk + j * dk, ds, qi, dk);
            if (x->mode == 0) {
              RK_(axpy)(gq, ds, rk + ri * dk, dk);
              RK_(axpy)(trk + ri * dk, ds, qi, dk);
            } else if (x->mode == 1) {
              ttb[ri * c->H + h] += (T)dsraw;
            }
          }
        }
        memcpy(dq + (bh * Lq + i) * dk, gq, (size_t)dk * sizeof *gq);
      }
      memcpy(dk_ + bh * Lk * dk, gk, (size_t)(Lk * dk) * sizeof *gk);
      memcpy(dv_ + bh * Lk * dv, gv, (size_t)(Lk * dv) * sizeof *gv);
    }
    free(gq), free(vr), free(gk), free(gv);
  }
  return failed ? em_error(EM_ERR_OOM, "out of memory in the relpos kernel backward") : EM_OK;
}
