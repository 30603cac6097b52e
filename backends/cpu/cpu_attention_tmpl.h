/*
** cpu_attention_tmpl.h -- flash-style attention for one float type;
** included by cpu_attention.c with T (float or double) and SUF set.
** See cpu_attention.c for the algorithm and the masking rules.
**
** Inner loops are written as axpy over contiguous rows (the key and value
** tiles are transposed into scratch first), so the compiler vectorises
** them without reassociating any sum. The two helpers below take four
** terms per pass over the destination row, adding them in the same order
** a one-term loop would, so blocking changes speed and never a result.
*/

#define FN(name) CPU_CAT(name, SUF)

/* s[0..bc) = sum over p < d of x[p] * t[p][0..bc), t with row stride BC. */
static inline void FN(vec_tile)(T *restrict s, const T *restrict x, int64_t d,
                                const T *restrict t, int64_t bc) {
  for (int64_t jj = 0; jj < bc; jj++) s[jj] = 0;
  int64_t p = 0;
  for (; p + 4 <= d; p += 4) {
    const T x0 = x[p], x1 = x[p + 1], x2 = x[p + 2], x3 = x[p + 3];
    const T *t0 = t + p * BC, *t1 = t0 + BC, *t2 = t1 + BC, *t3 = t2 + BC;
    for (int64_t jj = 0; jj < bc; jj++)
      s[jj] = s[jj] + x0 * t0[jj] + x1 * t1[jj] + x2 * t2[jj] + x3 * t3[jj];
  }
  for (; p < d; p++) {
    const T x0 = x[p], *t0 = t + p * BC;
    for (int64_t jj = 0; jj < bc; jj++) s[jj] = s[jj] + x0 * t0[jj];
  }
}

/* y[0..n) += a[t] * rows[t][0..n) for t = 0, 1, ..., cnt-1, in that order. */
static inline void FN(accumulate)(T *restrict y, int64_t n, int64_t cnt, const T *a,
                                  const T *const *rows) {
  int64_t t = 0;
  for (; t + 4 <= cnt; t += 4) {
    const T a0 = a[t], a1 = a[t + 1], a2 = a[t + 2], a3 = a[t + 3];
    const T *restrict r0 = rows[t], *restrict r1 = rows[t + 1];
    const T *restrict r2 = rows[t + 2], *restrict r3 = rows[t + 3];
    for (int64_t x = 0; x < n; x++) y[x] = y[x] + a0 * r0[x] + a1 * r1[x] + a2 * r2[x] + a3 * r3[x];
  }
  for (; t < cnt; t++) {
    const T a0 = a[t], *restrict r0 = rows[t];
    for (int64_t x = 0; x < n; x++) y[x] = y[x] + a0 * r0[x];
  }
}

/* Copies rows [j0, j0+bc) of a [L, d] matrix into t[d][BC] (transposed). */
static inline void FN(transpose_tile)(const T *x, int64_t d, int64_t j0, int64_t bc, T *t) {
  for (int64_t jj = 0; jj < bc; jj++) {
    const T *row = x + (j0 + jj) * d;
    for (int64_t c = 0; c < d; c++) t[c * BC + jj] = row[c];
  }
}

/* S[ii][jj] = scale * q_i . k_j + bias[i,j] for query rows [i0, i0+br)
** and the key tile [j0, j0+bc) whose transpose is Kt; -inf where the key
** is padding or in the causal future. */
static inline void FN(scores)(const att_ctx *c, int64_t bh, const T *q_bh, const T *Kt, int64_t i0,
                       int64_t br, int64_t j0, int64_t bc, T *S) {
  const em_attention_args *a = c->a;
  const int64_t dk = a->dk, b = bh / a->H, h = bh % a->H;
  const T scale = (T)a->scale;
  const T *bias = a->bias;
  const uint8_t *pad = a->key_padding ? a->key_padding + b * a->Lk + j0 : NULL;
  for (int64_t ii = 0; ii < br; ii++) {
    const int64_t i = i0 + ii;
    const T *qi = q_bh + i * dk;
    T *s = S + ii * BC;
    FN(vec_tile)(s, qi, dk, Kt, bc);
    for (int64_t jj = 0; jj < bc; jj++) s[jj] *= scale;
    if (bias) {
      const T *bp = bias + b * a->bias_stride[0] + h * a->bias_stride[1] + i * a->bias_stride[2] +
                    j0 * a->bias_stride[3];
      const int64_t bs = a->bias_stride[3];
      for (int64_t jj = 0; jj < bc; jj++) s[jj] += bp[jj * bs];
    }
    if (pad)
      for (int64_t jj = 0; jj < bc; jj++)
        if (pad[jj]) s[jj] = -INFINITY;
    if (a->causal) {
      /* key j is visible iff j <= i + shift */
      int64_t first_hidden = i + c->shift + 1 - j0;
      for (int64_t jj = first_hidden < 0 ? 0 : first_hidden; jj < bc; jj++) s[jj] = -INFINITY;
    }
  }
}

/* Is element (query i, key j) of head bh kept by dropout? */
static inline bool FN(keep)(const att_ctx *c, int64_t bh, int64_t i, int64_t j) {
  const em_attention_args *a = c->a;
  uint64_t e = (uint64_t)((bh * a->Lq + i) * a->Lk + j);
  return em_philox_uniform_at(a->seed, a->offset, e) >= a->dropout_p;
}

/* Keys [0, end) can be visible to some query in [i0, i0+br). */
static int64_t FN(key_end)(const att_ctx *c, int64_t i0, int64_t br) {
  int64_t lk = c->a->Lk;
  if (!c->a->causal) return lk;
  int64_t end = i0 + br - 1 + c->shift + 1;
  return end < 0 ? 0 : (end > lk ? lk : end);
}

/* ---- forward ---- */

/* One query tile of one head: online softmax over the key tiles. */
CPU_VECTOR_CLONES static void FN(forward_tile)(const att_ctx *c, int64_t bh, int64_t qt, T *S,
                                               T *Kt, T *acc, T *m, T *l) {
  const em_attention_args *a = c->a;
  const int64_t dk = a->dk, dv = a->dv, Lq = a->Lq, Lk = a->Lk;
  const int64_t i0 = qt * BR, br = Lq - i0 < BR ? Lq - i0 : BR;
  const T *q_bh = (const T *)a->q + bh * Lq * dk;
  const T *k_bh = (const T *)a->k + bh * Lk * dk;
  const T *v_bh = (const T *)a->v + bh * Lk * dv;
  const bool dropout = a->dropout_p > 0;
  const T inv_keep = (T)(1.0 / (1.0 - a->dropout_p));
  const T *rows[BC];

  for (int64_t ii = 0; ii < br; ii++) {
    m[ii] = -INFINITY;
    l[ii] = 0;
  }
  for (int64_t x = 0; x < br * dv; x++) acc[x] = 0;

  const int64_t j_end = FN(key_end)(c, i0, br);
  for (int64_t j0 = 0; j0 < j_end; j0 += BC) {
    const int64_t bc = j_end - j0 < BC ? j_end - j0 : BC;
    FN(transpose_tile)(k_bh, dk, j0, bc, Kt);
    FN(scores)(c, bh, q_bh, Kt, i0, br, j0, bc, S);
    for (int64_t ii = 0; ii < br; ii++) {
      T *s = S + ii * BC, *o = acc + ii * dv;
      T mx = -INFINITY;
      for (int64_t jj = 0; jj < bc; jj++) mx = s[jj] > mx ? s[jj] : mx;
      const T m_new = mx > m[ii] ? mx : m[ii];
      if (m_new == -INFINITY) continue; /* nothing visible yet */
      const T corr = exp(m[ii] - m_new); /* 0 when m was -inf */
      if (corr != 1) {
        l[ii] *= corr;
        for (int64_t x = 0; x < dv; x++) o[x] *= corr;
      }
      /* the weights of the kept keys are packed into s (cnt <= jj) */
      int64_t cnt = 0;
      for (int64_t jj = 0; jj < bc; jj++) {
        T p = exp(s[jj] - m_new); /* 0 for masked keys */
        l[ii] += p;               /* the normaliser counts dropped keys too */
        if (p == 0) continue;
        if (dropout) {
          if (!FN(keep)(c, bh, i0 + ii, j0 + jj)) continue;
          p *= inv_keep;
        }
        s[cnt] = p;
        rows[cnt++] = v_bh + (j0 + jj) * dv;
      }
      FN(accumulate)(o, dv, cnt, s, rows);
      m[ii] = m_new;
    }
  }

  T *out = (T *)a->out + (bh * Lq + i0) * dv;
  T *lse = (T *)a->lse + bh * Lq + i0;
  for (int64_t ii = 0; ii < br; ii++) {
    T *orow = out + ii * dv;
    const T *o = acc + ii * dv;
    if (l[ii] > 0) {
      const T inv = 1 / l[ii];
      for (int64_t x = 0; x < dv; x++) orow[x] = o[x] * inv;
      lse[ii] = m[ii] + log(l[ii]);
    } else { /* every key masked: zero output, lse = +inf makes exp(s - lse) = 0 */
      for (int64_t x = 0; x < dv; x++) orow[x] = 0;
      lse[ii] = INFINITY;
    }
  }
}

/* Work item t (a head and a query tile) with one thread's scratch:
** S [BR][BC], Kt [dk][BC], acc [BR][dv], m and l [BR]. */
static void FN(forward_item)(const att_ctx *c, int64_t t, int64_t nqt, T *S) {
  T *Kt = S + BR * BC, *acc = Kt + c->a->dk * BC, *m = acc + BR * c->a->dv, *l = m + BR;
  FN(forward_tile)(c, t / nqt, t % nqt, S, Kt, acc, m, l);
}

static em_status FN(forward)(const att_ctx *c) {
  const em_attention_args *a = c->a;
  const int64_t items = a->B * a->H * ((a->Lq + BR - 1) / BR), nqt = (a->Lq + BR - 1) / BR;
  const size_t per_thread = (size_t)(BR * BC + a->dk * BC + BR * a->dv + 2 * BR + 1) * sizeof(T);
  int failed = 0;
  if (c->parallel) {
#pragma omp parallel
    {
      T *S = malloc(per_thread);
      if (!S) __atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
#pragma omp for schedule(dynamic)
      for (int64_t t = 0; t < items; t++)
        if (S) FN(forward_item)(c, t, nqt, S);
      free(S);
    }
  } else {
    T *S = malloc(per_thread);
    failed = !S;
    for (int64_t t = 0; t < items && S; t++) FN(forward_item)(c, t, nqt, S);
    free(S);
  }
  if (failed)
    return em_error(EM_ERR_OOM,
                    "cpu attention_forward: out of memory for %zu bytes of tile scratch",
                    per_thread);
  return EM_OK;
}

/* ---- backward ---- */

/* For query rows [i0, i0+br) and key tile [j0, j0+bc) of head bh, from the
** transposed tiles Kt and Vt, leaves in P the dropped-out probabilities
** Pd = P * Z (Z = keep / (1 - p)) and in dS the score gradients
** dS = P * (Z * dO.v - D), where D = rowsum(dO * O) was computed upfront. */
static inline void FN(backward_tile)(const att_ctx *c, int64_t bh, const T *Kt, const T *Vt,
                                     int64_t i0, int64_t br, int64_t j0, int64_t bc, T *P,
                                     T *dS) {
  const em_attention_args *a = c->a;
  const int64_t Lq = a->Lq, dk = a->dk, dv = a->dv;
  const T *q_bh = (const T *)a->q + bh * Lq * dk;
  const T *do_bh = (const T *)a->dout + bh * Lq * dv;
  const T *lse = (const T *)a->lse + bh * Lq;
  const double *D = c->D + bh * Lq;
  const bool dropout = a->dropout_p > 0;
  const T inv_keep = (T)(1.0 / (1.0 - a->dropout_p));

  FN(scores)(c, bh, q_bh, Kt, i0, br, j0, bc, P);
  for (int64_t ii = 0; ii < br; ii++) {
    const int64_t i = i0 + ii;
    T *p = P + ii * BC, *ds = dS + ii * BC;
    if (isinf(lse[i])) { /* a fully masked row takes no part */
      for (int64_t jj = 0; jj < bc; jj++) p[jj] = ds[jj] = 0;
      continue;
    }
    /* ds = dO_i . v_j for each key, as an axpy over the tile */
    FN(vec_tile)(ds, do_bh + i * dv, dv, Vt, bc);
    const T li = lse[i], Di = (T)D[i];
    for (int64_t jj = 0; jj < bc; jj++) {
      const T pr = exp(p[jj] - li); /* 0 for masked keys */
      T z = 1;
      if (dropout) z = FN(keep)(c, bh, i, j0 + jj) ? inv_keep : 0;
      p[jj] = pr * z;
      ds[jj] = pr * (z * ds[jj] - Di);
    }
  }
}

/* Pass 1: one key tile of one head accumulates dK and dV over the queries. */
CPU_VECTOR_CLONES static void FN(backward_kv)(const att_ctx *c, int64_t bh, int64_t kt, T *P,
                                              T *dS, T *Kt, T *Vt, T *dK, T *dV) {
  const em_attention_args *a = c->a;
  const int64_t Lq = a->Lq, Lk = a->Lk, dk = a->dk, dv = a->dv;
  const int64_t j0 = kt * BC, bc = Lk - j0 < BC ? Lk - j0 : BC;
  const T *q_bh = (const T *)a->q + bh * Lq * dk;
  const T *do_bh = (const T *)a->dout + bh * Lq * dv;
  FN(transpose_tile)((const T *)a->k + bh * Lk * dk, dk, j0, bc, Kt);
  FN(transpose_tile)((const T *)a->v + bh * Lk * dv, dv, j0, bc, Vt);
  T wp[BR], ws[BR]; /* nonzero weights and their rows, packed */
  const T *rp[BR], *rs[BR];
  for (int64_t x = 0; x < bc * dk; x++) dK[x] = 0;
  for (int64_t x = 0; x < bc * dv; x++) dV[x] = 0;

  /* causal: query i sees key j0 only if i >= j0 - shift */
  int64_t i_start = a->causal ? j0 - c->shift : 0;
  if (i_start < 0) i_start = 0;
  for (int64_t i0 = i_start; i0 < Lq; i0 += BR) {
    const int64_t br = Lq - i0 < BR ? Lq - i0 : BR;
    FN(backward_tile)(c, bh, Kt, Vt, i0, br, j0, bc, P, dS);
    for (int64_t jj = 0; jj < bc; jj++) {
      int64_t np = 0, ns = 0;
      for (int64_t ii = 0; ii < br; ii++) {
        const T pd = P[ii * BC + jj], ds = dS[ii * BC + jj];
        if (pd != 0) {
          wp[np] = pd;
          rp[np++] = do_bh + (i0 + ii) * dv;
        }
        if (ds != 0) {
          ws[ns] = ds;
          rs[ns++] = q_bh + (i0 + ii) * dk;
        }
      }
      FN(accumulate)(dV + jj * dv, dv, np, wp, rp);
      FN(accumulate)(dK + jj * dk, dk, ns, ws, rs);
    }
  }
  const T scale = (T)a->scale;
  T *gk = (T *)a->dk_ + (bh * Lk + j0) * dk, *gv = (T *)a->dv_ + (bh * Lk + j0) * dv;
  for (int64_t x = 0; x < bc * dk; x++) gk[x] = dK[x] * scale;
  for (int64_t x = 0; x < bc * dv; x++) gv[x] = dV[x];
}

/* Pass 2: one query tile of one head accumulates dQ over the keys. */
CPU_VECTOR_CLONES static void FN(backward_q)(const att_ctx *c, int64_t bh, int64_t qt, T *P,
                                             T *dS, T *Kt, T *Vt, T *dQ) {
  const em_attention_args *a = c->a;
  const int64_t Lq = a->Lq, Lk = a->Lk, dk = a->dk, dv = a->dv;
  const int64_t i0 = qt * BR, br = Lq - i0 < BR ? Lq - i0 : BR;
  const T *k_bh = (const T *)a->k + bh * Lk * dk;
  T ws[BC];
  const T *rs[BC];
  for (int64_t x = 0; x < br * dk; x++) dQ[x] = 0;
  const int64_t j_end = FN(key_end)(c, i0, br);
  for (int64_t j0 = 0; j0 < j_end; j0 += BC) {
    const int64_t bc = j_end - j0 < BC ? j_end - j0 : BC;
    FN(transpose_tile)(k_bh, dk, j0, bc, Kt);
    FN(transpose_tile)((const T *)a->v + bh * Lk * dv, dv, j0, bc, Vt);
    FN(backward_tile)(c, bh, Kt, Vt, i0, br, j0, bc, P, dS);
    for (int64_t ii = 0; ii < br; ii++) {
      int64_t ns = 0;
      for (int64_t jj = 0; jj < bc; jj++) {
        const T ds = dS[ii * BC + jj];
        if (ds == 0) continue;
        ws[ns] = ds;
        rs[ns++] = k_bh + (j0 + jj) * dk;
      }
      FN(accumulate)(dQ + ii * dk, dk, ns, ws, rs);
    }
  }
  const T scale = (T)a->scale;
  T *gq = (T *)a->dq + (bh * Lq + i0) * dk;
  for (int64_t x = 0; x < br * dk; x++) gq[x] = dQ[x] * scale;
}

/* Work item t of pass 1 (kv: a head and a key tile) or pass 2 (a head and
** a query tile), with one thread's scratch carved as described below. */
static void FN(backward_item)(const att_ctx *c, bool kv, int64_t t, int64_t ntiles, T *P,
                              int64_t rows) {
  const int64_t dk = c->a->dk, dv = c->a->dv;
  T *dS = P + BR * BC, *Kt = dS + BR * BC, *Vt = Kt + dk * BC, *acc1 = Vt + dv * BC;
  T *acc2 = acc1 + rows * dk;
  if (kv) FN(backward_kv)(c, t / ntiles, t % ntiles, P, dS, Kt, Vt, acc1, acc2);
  else FN(backward_q)(c, t / ntiles, t % ntiles, P, dS, Kt, Vt, acc1);
}

static em_status FN(backward)(att_ctx *c) {
  const em_attention_args *a = c->a;
  const int64_t BH = a->B * a->H, Lq = a->Lq, dv = a->dv;
  const int64_t nqt = (Lq + BR - 1) / BR, nkt = (a->Lk + BC - 1) / BC;

  /* D_i = dO_i . O_i, the row term of the softmax derivative. */
  double *D = malloc((size_t)(BH * Lq > 0 ? BH * Lq : 1) * sizeof(double));
  if (!D)
    return em_error(EM_ERR_OOM, "cpu attention_backward: out of memory for %lld row sums",
                    (long long)(BH * Lq));
  const T *O = a->out, *dO = a->dout;
  CPU_FOR(c->parallel, r, BH * Lq,
    double s = 0;
    for (int64_t x = 0; x < dv; x++) s += (double)dO[r * dv + x] * (double)O[r * dv + x];
    D[r] = s;);
  c->D = D;

  /* scratch: P and dS [BR][BC], Kt [dk][BC], Vt [dv][BC], then the
  ** accumulators: dK [BC][dk] (or dQ [BR][dk]) and dV [BC][dv] */
  const int64_t rows = BR > BC ? BR : BC;
  const size_t per_thread =
      (size_t)(2 * BR * BC + (a->dk + dv) * BC + rows * a->dk + BC * dv + 1) * sizeof(T);
  int failed = 0;
  if (c->parallel) {
#pragma omp parallel
    {
      T *P = malloc(per_thread);
      if (!P) __atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
#pragma omp for schedule(dynamic)
      for (int64_t t = 0; t < BH * nkt; t++)
        if (P) FN(backward_item)(c, true, t, nkt, P, rows);
#pragma omp for schedule(dynamic)
      for (int64_t t = 0; t < BH * nqt; t++)
        if (P) FN(backward_item)(c, false, t, nqt, P, rows);
      free(P);
    }
  } else {
    T *P = malloc(per_thread);
    failed = !P;
    for (int64_t t = 0; t < BH * nkt && P; t++) FN(backward_item)(c, true, t, nkt, P, rows);
    for (int64_t t = 0; t < BH * nqt && P; t++) FN(backward_item)(c, false, t, nqt, P, rows);
    free(P);
  }
  free(D);
  c->D = NULL;
  if (failed)
    return em_error(EM_ERR_OOM,
                    "cpu attention_backward: out of memory for %zu bytes of tile scratch",
                    per_thread);
  return EM_OK;
}

#undef FN
