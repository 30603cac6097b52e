/*
** cpu_attention_decl_tmpl.h -- the declared terms of the fused attention
** kernel (em_attention_args: rel_row, alibi_slopes, bias_table, rel_k,
** rel_v, the block mask and the table gradients) for one float type;
** included by cpu_attention_tmpl.h. See cpu_attention.c for the algorithm.
**
** Everything is indexed by n = r + Lk - 1 = j - i + Lq - 1, where r is the
** relative position of key j to query i. The scalar biases (ALiBi, the
** table) become, per head, one vector over n (rbias, [H][Lq+Lk-1]), so a
** score row adds a contiguous slice of it. Shaw's key term is the GEMM
** QR = scale * Q rel_k^T [BH*Lq, n_rel] made once per call, gathered by
** table row. The backward gathers dO rel_v^T (DR) the same way and
** scatters dS and the dropped P by table row into DSB and PB
** [BH*Lq, n_rel], written only by the owner of the query row; a bias
** table's gradient is dS summed along each diagonal n of a head (DVEC,
** [BH][n_r], the backward then gives each thread whole heads). So the
** table gradients are a few GEMMs and sums after the tiles, in a fixed
** order, and do not depend on the thread count.
*/

/* Table rows come in runs (a clipped distance, a T5 bucket: a few distinct
** rows over a whole tile), so gathers and scatters go run by run:
** c->run_end[n] is where the run holding n ends. row = rel_row + n0. */
static inline void FN(run_gather_add)(const att_ctx *c, int64_t n0, int64_t bc, const T *src, T *s) {
  const int64_t *row = c->a->rel_row + n0;
  for (int64_t jj = 0; jj < bc;) {
    int64_t e = c->run_end[n0 + jj] - n0;
    if (e > bc) e = bc;
    const T x = src[row[jj]];
    for (int64_t t = jj; t < e; t++) s[t] += x;
    jj = e;
  }
}

static inline void FN(run_scatter_add)(const att_ctx *c, int64_t n0, int64_t bc, const T *p, T *dst) {
  const int64_t *row = c->a->rel_row + n0;
  for (int64_t jj = 0; jj < bc;) {
    int64_t e = c->run_end[n0 + jj] - n0;
    if (e > bc) e = bc;
    T sum[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t t = jj;
    for (; t + 8 <= e; t += 8)
      for (int x = 0; x < 8; x++) sum[x] += p[t + x];
    for (; t < e; t++) sum[0] += p[t];
    dst[row[jj]] += ((sum[0] + sum[1]) + (sum[2] + sum[3])) + ((sum[4] + sum[5]) + (sum[6] + sum[7]));
    jj = e;
  }
}

/* Adds the declared biases and applies the block mask to the score tile
** (rows of S have stride c->bc). */
static inline void FN(decl_scores)(const att_ctx *c, int64_t bh, int64_t i0, int64_t br,
                                   int64_t j0, int64_t bc, T *S) {
  const em_attention_args *a = c->a;
  const int64_t h = bh % a->H, Lq = a->Lq, ld = c->bc;
  if (c->rbias) {
    const T *rb = (const T *)c->rbias + h * c->n_r;
    for (int64_t ii = 0; ii < br; ii++) {
      const T *b = rb + (j0 - (i0 + ii) + Lq - 1);
      T *s = S + ii * ld;
      for (int64_t jj = 0; jj < bc; jj++) s[jj] += b[jj];
    }
  }
  if (c->QR) {
    for (int64_t ii = 0; ii < br; ii++) {
      const T *qr = (const T *)c->QR + (bh * Lq + i0 + ii) * a->n_rel;
      FN(run_gather_add)(c, j0 - (i0 + ii) + Lq - 1, bc, qr, S + ii * ld);
    }
  }
  if (a->mask_kind && att_tile_class(c, i0, br, j0, bc) == ATT_TILE_PARTIAL)
    for (int64_t ii = 0; ii < br; ii++) {
      /* hidden: keys outside the band [lo, hi], unless global */
      const int64_t p = i0 + ii + c->shift;
      if (p < a->global) continue;
      int64_t lo, hi;
      att_band(a, p, &lo, &hi);
      const int64_t g = a->global > j0 ? a->global - j0 : 0; /* tile keys [0, g) are global */
      int64_t e1 = lo - j0 < bc ? lo - j0 : bc, b2 = hi + 1 - j0;
      b2 = b2 < g ? g : b2;
      T *s = S + ii * ld;
      for (int64_t jj = g; jj < e1; jj++) s[jj] = -INFINITY;
      for (int64_t jj = b2 < 0 ? 0 : b2; jj < bc; jj++) s[jj] = -INFINITY;
    }
}

/* Forward, Shaw's output term: PBt[ii][row(r)] += the dropped probability
** of (i0 + ii, j0 + jj), for one row of the tile. */
static inline void FN(decl_scatter_row)(const att_ctx *c, int64_t i, int64_t j0, int64_t bc,
                                        const T *p, T *pb) {
  FN(run_scatter_add)(c, j0 - i + c->a->Lq - 1, bc, p, pb);
}

/* Backward, dP gets Shaw's value term: ds[jj] += (dO_i . rel_v[row]). */
static inline void FN(decl_dp_row)(const att_ctx *c, int64_t bh, int64_t i, int64_t j0,
                                   int64_t bc, T *ds) {
  const em_attention_args *a = c->a;
  FN(run_gather_add)(c, j0 - i + a->Lq - 1, bc, (const T *)c->DR + (bh * a->Lq + i) * a->n_rel, ds);
}

/* Backward, by the owner of query rows [i0, i0+br): scatters the tile's dS
** and dropped P by table row into DSB and PB. */
static inline void FN(decl_accumulate)(const att_ctx *c, int64_t bh, int64_t i0, int64_t br,
                                       int64_t j0, int64_t bc, const T *P, const T *dS) {
  const em_attention_args *a = c->a;
  if (c->DVEC)
    for (int64_t ii = 0; ii < br; ii++) {
      T *d = (T *)c->DVEC + bh * c->n_r + (j0 - (i0 + ii) + a->Lq - 1);
      const T *ds = dS + ii * c->bc;
      for (int64_t jj = 0; jj < bc; jj++) d[jj] += ds[jj];
    }
  if (!c->DSB && !c->PB) return;
  for (int64_t ii = 0; ii < br; ii++) {
    const int64_t i = i0 + ii, n0 = j0 - i + a->Lq - 1;
    if (c->DSB)
      FN(run_scatter_add)(c, n0, bc, dS + ii * c->bc, (T *)c->DSB + (bh * a->Lq + i) * a->n_rel);
    if (c->PB)
      FN(run_scatter_add)(c, n0, bc, P + ii * c->bc, (T *)c->PB + (bh * a->Lq + i) * a->n_rel);
  }
}

/* Frees what decl_prepare made. */
static void FN(decl_release)(att_ctx *c) {
  free(c->rbias), free(c->QR), free(c->DR), free(c->DSB), free(c->PB), free(c->run_end);
  free(c->DVEC);
  c->rbias = c->QR = c->DR = c->DSB = c->PB = c->DVEC = NULL;
  c->run_end = NULL;
}

/* Makes the per-call arrays of the declared terms: rbias, QR, and in the
** backward DR, DSB and PB. */
static em_status FN(decl_prepare)(att_ctx *c, bool backward) {
  const em_attention_args *a = c->a;
  const int64_t H = a->H, Lq = a->Lq, Lk = a->Lk, BH = a->B * H, nrel = a->n_rel;
  const int64_t rows = BH * Lq;
  c->n_r = Lq + Lk - 1;
  bool ok = true;
  if (a->rel_row) {
    ok = (c->run_end = malloc((size_t)c->n_r * sizeof(int64_t))) != NULL;
    for (int64_t n = c->n_r - 1; ok && n >= 0; n--)
      c->run_end[n] = n + 1 < c->n_r && a->rel_row[n + 1] == a->rel_row[n] ? c->run_end[n + 1] : n + 1;
  }
  if (ok && (a->alibi_slopes || (a->bias_table && a->rel_row))) {
    T *rb = malloc((size_t)(H * c->n_r) * sizeof(T));
    ok = rb != NULL;
    for (int64_t h = 0; ok && h < H; h++)
      for (int64_t n = 0; n < c->n_r; n++) {
        const int64_t r = n - (Lk - 1);
        double b = 0;
        if (a->alibi_slopes) b -= a->alibi_slopes[h] * (double)(r < 0 ? -r : r);
        if (a->bias_table && a->rel_row) b += (double)((const T *)a->bias_table)[a->rel_row[n] * H + h];
        rb[h * c->n_r + n] = (T)b;
      }
    c->rbias = rb;
  }
  if (ok && a->rel_k && a->rel_row) {
    ok = (c->QR = malloc((size_t)(rows * nrel) * sizeof(T))) != NULL;
    if (ok)
      FN(gemm)(false, true, rows, nrel, a->dk, (T)a->scale, a->q, a->dk, a->rel_k, a->dk, 0,
               c->QR, nrel);
  }
  if (ok && backward && a->rel_v && a->rel_row) {
    ok = (c->DR = malloc((size_t)(rows * nrel) * sizeof(T))) != NULL;
    if (ok)
      FN(gemm)(false, true, rows, nrel, a->dv, 1, a->dout, a->dv, a->rel_v, a->dv, 0, c->DR, nrel);
  }
  /* the table's gradient sums dS along diagonals: per head, over n (the
  ** backward then runs a head per thread, which owns that vector); Shaw's
  ** key term needs dS by (query row, table row) for dQ as well */
  if (ok && backward && a->d_bias_table && a->rel_row)
    ok = (c->DVEC = calloc((size_t)(BH * c->n_r), sizeof(T))) != NULL;
  if (ok && backward && a->rel_k && a->rel_row)
    ok = (c->DSB = calloc((size_t)(rows * nrel), sizeof(T))) != NULL;
  if (ok && backward && a->rel_v && a->d_rel_v && a->rel_row)
    ok = (c->PB = calloc((size_t)(rows * nrel), sizeof(T))) != NULL;
  if (!ok) {
    FN(decl_release)(c);
    return em_error(EM_ERR_OOM, "cpu attention: out of memory for the declared terms (%lld rows x %lld)",
                    (long long)rows, (long long)nrel);
  }
  return EM_OK;
}

/* After the tiles: Shaw's share of dQ, and the table gradients. */
static void FN(decl_finish)(const att_ctx *c) {
  const em_attention_args *a = c->a;
  const int64_t H = a->H, Lq = a->Lq, BH = a->B * H, nrel = a->n_rel, rows = BH * Lq;
  const T scale = (T)a->scale;
  if (c->DSB && a->rel_k) {
    /* s = scale * q . (k + rel_k[row]): dq += scale * DSB rel_k, d rel_k = scale * DSB^T Q */
    FN(gemm)(false, false, rows, a->dk, nrel, scale, c->DSB, nrel, a->rel_k, a->dk, 1, a->dq, a->dk);
    if (a->d_rel_k)
      FN(gemm)(true, false, nrel, a->dk, rows, scale, c->DSB, nrel, a->q, a->dk, 0, a->d_rel_k, a->dk);
  }
  if (c->PB && a->d_rel_v)
    FN(gemm)(true, false, nrel, a->dv, rows, 1, c->PB, nrel, a->dout, a->dv, 0, a->d_rel_v, a->dv);
  if (c->DVEC && a->d_bias_table) {
    T *g = a->d_bias_table;
    for (int64_t x = 0; x < nrel * H; x++) g[x] = 0;
    for (int64_t bh = 0; bh < BH; bh++) {
      const int64_t h = bh % H;
      const T *d = (const T *)c->DVEC + bh * c->n_r;
      for (int64_t n = 0; n < c->n_r; n++) g[a->rel_row[n] * H + h] += d[n];
    }
  }
}
