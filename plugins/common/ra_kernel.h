/*
** ra_kernel.h -- body of the host row-range attention kernel, included by
** rowattn.c once per element type: T is the type, RA_(name) suffixes names.
** Plain loops, llm.c style; one (b, h) pair per OpenMP task, so dk and dv
** are accumulated without races.
*/

/* Four partial sums so the compiler can keep them in one vector register
** (no -ffast-math needed); the order is fixed, so results are reproducible. */
static inline T RA_(dot)(const T *a, const T *b, int64_t n) {
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

/* y += a x */
static inline void RA_(axpy)(T *restrict y, T a, const T *restrict x, int64_t n) {
  for (int64_t d = 0; d < n; d++) y[d] += a * x[d];
}

/* The score of (i, j), or -INFINITY when masked. */
static inline double RA_(score)(const ra_ctx *x, const T *qi, const T *kj, int64_t b, int64_t h,
                               int64_t i, int64_t j) {
  const em_attn_call *c = x->c;
  if (c->causal && j > ac_qpos(c, i)) return -INFINITY;
  if (x->kp && x->kp[b * c->Lk + j]) return -INFINITY;
  int64_t mo = b * x->ms[0] + h * x->ms[1] + i * x->ms[2] + j * x->ms[3];
  if (x->mbool && !x->mbool[mo]) return -INFINITY;
  double s = (double)RA_(dot)(qi, kj, c->dims.dk) * c->scale;
  if (x->madd) s += (double)((const T *)x->madd)[mo];
  return s;
}

/* Dropout factor z for (b,h,i,j): 1/(1-p) if kept, else 0. */
static inline double RA_(drop)(const ra_ctx *x, int64_t b, int64_t h, int64_t i, int64_t j) {
  const em_attn_call *c = x->c;
  if (c->dropout_p <= 0) return 1.0;
  uint64_t idx = (uint64_t)(((b * c->H + h) * c->Lq + i) * c->Lk + j);
  return em_philox_uniform_at(c->seed, c->offset, idx) >= c->dropout_p ? 1.0 / (1.0 - c->dropout_p) : 0.0;
}

static em_status RA_(forward)(const ra_ctx *x, T *out, double *lse, T *w) {
  const em_attn_call *c = x->c;
  const T *q = em_data(c->q), *k = em_data(c->k), *v = em_data(c->v);
  const int64_t Lq = c->Lq, Lk = c->Lk, dk = c->dims.dk, dv = c->dims.dv, BH = c->B * c->H;
  int failed = 0;
#pragma omp parallel
  {
    T *acc = malloc((size_t)dv * sizeof *acc);
    int64_t lo[RA_MAX_RANGES], hi[RA_MAX_RANGES];
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
        int nr = x->rs->ranges(x->rs->ud, c, i, lo, hi);
        for (int r = 0; r < nr; r++) {
          int64_t end = hi[r];
          if (c->causal && end > ac_qpos(c, i) + 1) end = ac_qpos(c, i) + 1; /* skip masked keys */
          for (int64_t j = lo[r]; j < end; j++) {
            double s = RA_(score)(x, qi, k + (bh * Lk + j) * dk, b, h, i, j);
            if (s == -INFINITY) continue;
            if (s > m) { /* online softmax: rescale what we have */
              double corr = exp(m - s);
              l *= corr;
              for (int64_t d = 0; d < dv; d++) acc[d] *= (T)corr;
              m = s;
            }
            double p = exp(s - m);
            l += p;
            double pz = p * RA_(drop)(x, b, h, i, j);
            if (pz != 0) RA_(axpy)(acc, (T)pz, v + (bh * Lk + j) * dv, dv);
          }
        }
        T *oi = out + (bh * Lq + i) * dv;
        if (l == 0) { /* nothing visible: zero output, lse = -inf marks it */
          for (int64_t d = 0; d < dv; d++) oi[d] = 0;
          lse[bh * Lq + i] = -INFINITY;
          continue;
        }
        for (int64_t d = 0; d < dv; d++) oi[d] = (T)((double)acc[d] / l);
        double L = m + log(l);
        lse[bh * Lq + i] = L;
        if (w) { /* weights: probabilities before dropout, zeros elsewhere */
          T *wi = w + (bh * Lq + i) * Lk;
          for (int r = 0; r < nr; r++)
            for (int64_t j = lo[r]; j < hi[r]; j++) {
              double s = RA_(score)(x, qi, k + (bh * Lk + j) * dk, b, h, i, j);
              wi[j] = s == -INFINITY ? 0 : (T)exp(s - L);
            }
        }
      }
    }
    free(acc);
  }
  return failed ? em_error(EM_ERR_OOM, "attention: out of memory in the row kernel") : EM_OK;
}

static em_status RA_(backward)(const ra_ctx *x, const T *dout, const T *out, const double *lse,
                               T *dq, T *dk_, T *dv_) {
  const em_attn_call *c = x->c;
  const T *q = em_data(c->q), *k = em_data(c->k), *v = em_data(c->v);
  const int64_t Lq = c->Lq, Lk = c->Lk, dk = c->dims.dk, dv = c->dims.dv, BH = c->B * c->H;
  int failed = 0;
#pragma omp parallel
  {
    /* Per-task accumulators: dq of one row, dk and dv of one head. */
    T *gq = malloc((size_t)dk * sizeof *gq);
    T *gk = calloc((size_t)(Lk * dk), sizeof *gk);
    T *gv = calloc((size_t)(Lk * dv), sizeof *gv);
    int64_t lo[RA_MAX_RANGES], hi[RA_MAX_RANGES];
    if (!gq || !gk || !gv) {
#pragma omp atomic write
      failed = 1;
    }
#pragma omp for schedule(dynamic, 1)
    for (int64_t bh = 0; bh < BH; bh++) {
      if (!gq || !gk || !gv) continue;
      int64_t b = bh / c->H, h = bh % c->H;
      memset(gk, 0, (size_t)(Lk * dk) * sizeof *gk);
      memset(gv, 0, (size_t)(Lk * dv) * sizeof *gv);
      for (int64_t i = 0; i < Lq; i++) {
        const T *qi = q + (bh * Lq + i) * dk, *gi = dout + (bh * Lq + i) * dv;
        const T *oi = out + (bh * Lq + i) * dv;
        T *dqi = dq + (bh * Lq + i) * dk;
        double L = lse[bh * Lq + i];
        for (int64_t d = 0; d < dk; d++) gq[d] = 0;
        if (L != -INFINITY) {
          double D = (double)RA_(dot)(gi, oi, dv); /* D_i = dout_i . out_i = sum_j P_ij dP_ij */
          int nr = x->rs->ranges(x->rs->ud, c, i, lo, hi);
          for (int r = 0; r < nr; r++) {
            int64_t end = hi[r];
            if (c->causal && end > ac_qpos(c, i) + 1) end = ac_qpos(c, i) + 1;
            for (int64_t j = lo[r]; j < end; j++) {
              const T *kj = k + (bh * Lk + j) * dk, *vj = v + (bh * Lk + j) * dv;
              double s = RA_(score)(x, qi, kj, b, h, i, j);
              if (s == -INFINITY) continue;
              double p = exp(s - L), z = RA_(drop)(x, b, h, i, j);
              double dp = 0;
              if (z != 0) {
                dp = (double)RA_(dot)(gi, vj, dv) * z;
                RA_(axpy)(gv + j * dv, (T)(p * z), gi, dv);
              }
              T ds = (T)(p * (dp - D) * c->scale);
              RA_(axpy)(gq, ds, kj, dk);
              RA_(axpy)(gk + j * dk, ds, qi, dk);
            }
          }
        }
        memcpy(dqi, gq, (size_t)dk * sizeof *gq);
      }
      memcpy(dk_ + bh * Lk * dk, gk, (size_t)(Lk * dk) * sizeof *gk);
      memcpy(dv_ + bh * Lk * dv, gv, (size_t)(Lk * dv) * sizeof *gv);
    }
    free(gq), free(gk), free(gv);
  }
  return failed ? em_error(EM_ERR_OOM, "attention: out of memory in the row kernel backward") : EM_OK;
}
