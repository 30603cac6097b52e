/*
** ra_kernel.h -- body of the host row-range attention kernel, included by
** rowattn.c once per element type: T is the type, RA_(name) suffixes names.
** Plain loops, llm.c style; one (b, h) pair per OpenMP task, so dk and dv
** are accumulated without races.
*/

/* The score of (i, j), or -INFINITY when masked. */
static inline double RA_(score)(const ra_ctx *x, const T *qi, const T *kj, int64_t b, int64_t h,
                               int64_t i, int64_t j) {
  const em_attn_call *c = x->c;
  if (c->causal && j > ac_qpos(c, i)) return -INFINITY;
  if (x->kp && x->kp[b * c->Lk + j]) return -INFINITY;
  int64_t mo = b * x->ms[0] + h * x->ms[1] + i * x->ms[2] + j * x->ms[3];
  if (x->mbool && !x->mbool[mo]) return -INFINITY;
  double s = 0;
  for (int64_t d = 0; d < c->dims.dk; d++) s += (double)qi[d] * (double)kj[d];
  s *= c->scale;
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
    double *acc = malloc((size_t)dv * sizeof *acc);
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
              for (int64_t d = 0; d < dv; d++) acc[d] *= corr;
              m = s;
            }
            double p = exp(s - m);
            l += p;
            double pz = p * RA_(drop)(x, b, h, i, j);
            if (pz != 0) {
              const T *vj = v + (bh * Lk + j) * dv;
              for (int64_t d = 0; d < dv; d++) acc[d] += pz * (double)vj[d];
            }
          }
        }
        T *oi = out + (bh * Lq + i) * dv;
        if (l == 0) { /* nothing visible: zero output, lse = -inf marks it */
          for (int64_t d = 0; d < dv; d++) oi[d] = 0;
          lse[bh * Lq + i] = -INFINITY;
          continue;
        }
        for (int64_t d = 0; d < dv; d++) oi[d] = (T)(acc[d] / l);
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
    /* Per-task accumulators in double: dq of one row, dk and dv of one head. */
    double *gq = malloc((size_t)dk * sizeof *gq);
    double *gk = calloc((size_t)(Lk * dk), sizeof *gk);
    double *gv = calloc((size_t)(Lk * dv), sizeof *gv);
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
          double D = 0; /* D_i = dout_i . out_i = sum_j P_ij dP_ij */
          for (int64_t d = 0; d < dv; d++) D += (double)gi[d] * (double)oi[d];
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
                for (int64_t d = 0; d < dv; d++) dp += (double)gi[d] * (double)vj[d];
                dp *= z;
                double pz = p * z;
                double *gvj = gv + j * dv;
                for (int64_t d = 0; d < dv; d++) gvj[d] += pz * (double)gi[d];
              }
              double ds = p * (dp - D) * c->scale;
              double *gkj = gk + j * dk;
              for (int64_t d = 0; d < dk; d++) {
                gq[d] += ds * (double)kj[d];
                gkj[d] += ds * (double)qi[d];
              }
            }
          }
        }
        for (int64_t d = 0; d < dk; d++) dqi[d] = (T)gq[d];
      }
      for (int64_t n = 0; n < Lk * dk; n++) dk_[bh * Lk * dk + n] = (T)gk[n];
      for (int64_t n = 0; n < Lk * dv; n++) dv_[bh * Lk * dv + n] = (T)gv[n];
    }
    free(gq), free(gk), free(gv);
  }
  return failed ? em_error(EM_ERR_OOM, "attention: out of memory in the row kernel backward") : EM_OK;
}
