/*
** cpu_attention_decl_tmpl.h -- Shaw's relative-position terms in the fused
** attention kernel (em_attention_args: rel_row, rel_k, rel_v and their
** gradients), the one declared term that is not a program, for one float
** type; included by cpu_attention_tmpl.h. See cpu_attention.c for the
** algorithm. (ALiBi, bias tables and block masks come as programs, which
** the core lowers: cpu_attention_expr_tmpl.h runs them.)
**
** Everything is indexed by n = r + Lk - 1 = j - i + Lq - 1, where r is the
** relative position of key j to query i. Shaw's key term is the GEMM
** QR = scale * Q rel_k^T [Lq, n_rel] per thread, gathered by table row
** (each work item computes the rows of QR it owns). The
** backward (a head per thread) gathers dO rel_v^T (DR) the same way and
** scatters dS and the dropped P by table row into DSB and PB
** (a block of Lq rows per thread); at the end of a head, three GEMMs give its share of dQ
** and its parts of the Shaw tables' gradients (GK, GV), summed in head
** order after the tiles. So the table gradients are a few GEMMs and sums
** after the tiles, in a fixed order, and do not depend on the thread
** count.
*/

/* The sum of s[0..n), in 32 lanes added in a fixed order, so that it
** vectorises and gives the same bits with or without AVX2. Eight lanes were
** one chain of dependent vector adds, whose latency (with the tree at the
** end) was half of a Shaw backward's row work; 32 are two to four chains. */
ATT_ROW T FN(row_sum)(const T *restrict s, int64_t n) {
  T sum[32] = {0};
  int64_t jj = 0;
  for (; jj + 32 <= n; jj += 32)
    for (int x = 0; x < 32; x++) sum[x] += s[jj + x];
  for (; jj < n; jj++) sum[0] += s[jj];
  for (int x = 0; x < 16; x++) sum[x] += sum[x + 16];
  return FN(sum16)(sum);
}

/* Table rows come in runs (a clipped distance, a T5 bucket: a few distinct
** rows over most of a tile, single positions near the diagonal). Long runs
** (c->run_end[n]: where the run holding n ends) are done as one constant
** or one sum; between them (c->long_from[n]: the next position in a long
** run) element by element, so neither costs a branch per element. The
** positions between long runs are near the diagonal, where a table row is
** the distance itself (Shaw's clip, T5's exact buckets): there the row
** grows by one a position (c->step_end[n]: where that stretch ends), so
** the table's rows are read or written as one contiguous slice.
** row = rel_row + n0. */
#define ATT_LONG_RUN 16

ATT_ROW void FN(run_gather_add)(const att_ctx *c, int64_t n0, int64_t bc, const T *src, T *s) {
  const int64_t *row = c->a->rel_row + n0;
  for (int64_t jj = 0; jj < bc;) {
    int64_t ls = c->long_from[n0 + jj] - n0;
    if (ls > bc) ls = bc;
    for (int64_t t = jj; t < ls;) {
      int64_t e = c->step_end[n0 + t] - n0;
      if (e > ls) e = ls;
      const T *src_t = src + row[t]; /* row[x] = row[t] + (x - t) on [t, e) */
      for (int64_t x = t; x < e; x++) s[x] += src_t[x - t];
      t = e;
    }
    if (ls >= bc) break;
    int64_t e = c->run_end[n0 + ls] - n0;
    if (e > bc) e = bc;
    const T x = src[row[ls]];
    for (int64_t t = ls; t < e; t++) s[t] += x;
    jj = e;
  }
}

ATT_ROW void FN(run_scatter_add)(const att_ctx *c, int64_t n0, int64_t bc, const T *p, T *dst) {
  const int64_t *row = c->a->rel_row + n0;
  for (int64_t jj = 0; jj < bc;) {
    int64_t ls = c->long_from[n0 + jj] - n0;
    if (ls > bc) ls = bc;
    for (int64_t t = jj; t < ls;) {
      int64_t e = c->step_end[n0 + t] - n0;
      if (e > ls) e = ls;
      T *dst_t = dst + row[t]; /* as in run_gather_add */
      for (int64_t x = t; x < e; x++) dst_t[x - t] += p[x];
      t = e;
    }
    if (ls >= bc) break;
    int64_t e = c->run_end[n0 + ls] - n0;
    if (e > bc) e = bc;
    dst[row[ls]] += FN(row_sum)(p + ls, e - ls);
    jj = e;
  }
}

/* Where query row i's entries of QR, DR, DSB and PB are: each thread has a
** block of Lq rows (it owns one query tile in the forward, one head in the
** backward at a time), so these stay small and in cache. */
ATT_ROW int64_t FN(drow)(const att_ctx *c, int64_t i) {
  const int64_t tid = c->parallel ? omp_get_thread_num() : 0;
  return (tid * c->a->Lq + i) * c->a->n_rel;
}

/* Far from the diagonal a whole tile row has one clipped distance, so one
** table row u: Shaw's terms are then a constant per row (q_i . rel_k[u]
** for the scores, dO_i . rel_v[u] for dP) and a sum per row (of P, of dS).
** The row loops of forward_tile and grad_tile fold those in, which saves
** the gather and scatter passes over the tile; this returns u, or -1 where
** the row needs them. */
ATT_ROW int64_t FN(uniform_row)(const att_ctx *c, int64_t i, int64_t j0, int64_t bc) {
  if (!c->run_end || (!c->a->rel_k && !c->a->rel_v)) return -1;
  const int64_t n0 = j0 - i + c->a->Lq - 1;
  return c->run_end[n0] - n0 >= bc ? c->a->rel_row[n0] : -1;
}

/* What a row with uniform_row u adds to every score (0 without Shaw's key
** term or for u < 0, where decl_scores added it). */
ATT_ROW T FN(uniform_score)(const att_ctx *c, int64_t i, int64_t u) {
  return u >= 0 && c->QR ? ((const T *)c->QR)[FN(drow)(c, i) + u] : 0;
}

/* Adds Shaw's key term to the score tile (rows of S have stride c->ld). */
ATT_ROW void FN(decl_scores)(const att_ctx *c, int64_t bh, int64_t i0, int64_t br,
                             int64_t j0, int64_t bc, T *S) {
  (void)bh;
  const int64_t Lq = c->a->Lq, ld = c->ld;
  if (c->QR) {
    for (int64_t ii = 0; ii < br; ii++) {
      if (FN(uniform_row)(c, i0 + ii, j0, bc) >= 0) continue; /* the caller adds uniform_score */
      const T *qr = (const T *)c->QR + FN(drow)(c, i0 + ii);
      FN(run_gather_add)(c, j0 - (i0 + ii) + Lq - 1, bc, qr, S + ii * ld);
    }
  }
}

/* Forward, Shaw's output term: PBt[ii][row(r)] += the dropped probability
** of (i0 + ii, j0 + jj), for one row of the tile. */
ATT_ROW void FN(decl_scatter_row)(const att_ctx *c, int64_t i, int64_t j0, int64_t bc,
                                  const T *p, T *pb) {
  FN(run_scatter_add)(c, j0 - i + c->a->Lq - 1, bc, p, pb);
}

/* Backward, dP gets Shaw's value term: ds[jj] += (dO_i . rel_v[row]);
** for a uniform row (u >= 0) only returns that constant, for the caller to
** fold in. */
ATT_ROW T FN(decl_dp_row)(const att_ctx *c, int64_t i, int64_t u, int64_t j0, int64_t bc, T *ds) {
  const T *dr = (const T *)c->DR + FN(drow)(c, i);
  if (u >= 0) return dr[u];
  FN(run_gather_add)(c, j0 - i + c->a->Lq - 1, bc, dr, ds);
  return 0;
}

/* Backward, a uniform row's part of decl_accumulate: its sums of dS and of
** the dropped P go to table row u (grad_tile computes them). */
ATT_ROW void FN(decl_uniform_sums)(const att_ctx *c, int64_t i, int64_t u, T sum_ds, T sum_p) {
  if (c->DSB) ((T *)c->DSB)[FN(drow)(c, i) + u] += sum_ds;
  if (c->PB) ((T *)c->PB)[FN(drow)(c, i) + u] += sum_p;
}

/* Backward, by the owner of query rows [i0, i0+br): scatters the tile's dS
** and dropped P by table row into DSB and PB. */
ATT_ROW void FN(decl_accumulate)(const att_ctx *c, int64_t bh, int64_t i0, int64_t br,
                                 int64_t j0, int64_t bc, const T *P, const T *dS) {
  const em_attention_args *a = c->a;
  (void)bh;
  if (!c->DSB && !c->PB) return;
  for (int64_t ii = 0; ii < br; ii++) {
    const int64_t i = i0 + ii, n0 = j0 - i + a->Lq - 1;
    if (FN(uniform_row)(c, i, j0, bc) >= 0) continue; /* grad_tile added its sums */
    if (c->DSB)
      FN(run_scatter_add)(c, n0, bc, dS + ii * c->ld, (T *)c->DSB + FN(drow)(c, i));
    if (c->PB)
      FN(run_scatter_add)(c, n0, bc, P + ii * c->ld, (T *)c->PB + FN(drow)(c, i));
  }
}

/* By the owner of query rows [i0, i0+br) of head bh, before their tiles:
** QR = scale * Q rel_k^T and, in the backward, DR = dO rel_v^T. */
static void FN(decl_rows)(const att_ctx *c, int64_t bh, int64_t i0, int64_t br, bool backward) {
  const em_attention_args *a = c->a;
  const int64_t nrel = a->n_rel, d0 = FN(drow)(c, i0);
  if (c->QR)
    FN(mm)(false, true, br, nrel, a->dk, (T)a->scale, (const ST *)a->q + att_row(c, &c->q, bh, i0), true,
           c->q.r, a->rel_k, true, a->dk, 0, (T *)c->QR + d0, nrel);
  if (backward && c->DR)
    FN(mm)(false, true, br, nrel, a->dv, 1, (const ST *)a->dout + att_row(c, &c->go, bh, i0), true,
           c->go.r, a->rel_v, true, a->dv, 0, (T *)c->DR + d0, nrel);
  if (backward && c->DSB)
    for (int64_t x = 0; x < br * nrel; x++) ((T *)c->DSB)[d0 + x] = 0;
  if (backward && c->PB)
    for (int64_t x = 0; x < br * nrel; x++) ((T *)c->PB)[d0 + x] = 0;
}

/* Backward, by the owner of head bh after its tiles: Shaw's share of its
** dQ sum gq (row stride ldq; s = scale * q . (k + rel_k[row]): dq += scale
** * DSB rel_k) and its parts of the table gradients, d rel_k = scale *
** DSB^T Q, d rel_v = PB^T dO. */
static void FN(decl_head_done)(const att_ctx *c, int64_t bh, T *gq, int64_t ldq) {
  const em_attention_args *a = c->a;
  const int64_t Lq = a->Lq, nrel = a->n_rel;
  const T scale = (T)a->scale;
  if (!c->DSB) return;
  const T *dsb = (const T *)c->DSB + FN(drow)(c, 0);
  FN(mm)(false, false, Lq, a->dk, nrel, scale, dsb, false, nrel, a->rel_k, true, a->dk, 1, gq, ldq);
  if (c->GK)
    FN(mm)(true, false, nrel, a->dk, Lq, scale, dsb, false, nrel,
           (const ST *)a->q + att_row(c, &c->q, bh, 0), true, c->q.r, 0,
           (T *)c->GK + bh * nrel * a->dk, a->dk);
  if (c->GV && c->PB)
    FN(mm)(true, false, nrel, a->dv, Lq, 1, (const T *)c->PB + FN(drow)(c, 0), false, nrel,
           (const ST *)a->dout + att_row(c, &c->go, bh, 0), true, c->go.r, 0,
           (T *)c->GV + bh * nrel * a->dv, a->dv);
}

/* Frees what decl_prepare made. */
static void FN(decl_release)(att_ctx *c) {
  free(c->QR), free(c->DR), free(c->DSB), free(c->PB), free(c->run_end);
  free(c->GK), free(c->GV);
  c->QR = c->DR = c->DSB = c->PB = c->GK = c->GV = NULL;
  c->run_end = c->long_from = c->step_end = NULL;
}

/* Makes the per-call arrays of Shaw's terms: QR, and in the backward DR,
** DSB and PB. */
static em_status FN(decl_prepare)(att_ctx *c, bool backward) {
  const em_attention_args *a = c->a;
  const int64_t H = a->H, Lq = a->Lq, Lk = a->Lk, BH = a->B * H, nrel = a->n_rel;
  const int64_t rows = BH * Lq;
  c->n_r = Lq + Lk - 1;
  bool ok = true;
  if (a->rel_row) {
    /* run_end, long_from, step_end and (scratch) run starts, [n_r] each */
    const int64_t nr = c->n_r, *row = a->rel_row;
    ok = (c->run_end = malloc((size_t)(4 * nr) * sizeof(int64_t))) != NULL;
    if (ok) {
      int64_t *end = c->run_end, *from = end + nr, *step = from + nr, *start = step + nr;
      for (int64_t n = nr - 1; n >= 0; n--)
        step[n] = n + 1 < nr && row[n + 1] == row[n] + 1 ? step[n + 1] : n + 1;
      c->step_end = step;
      for (int64_t n = 0; n < nr; n++) start[n] = n > 0 && row[n - 1] == row[n] ? start[n - 1] : n;
      for (int64_t n = nr - 1; n >= 0; n--) end[n] = n + 1 < nr && row[n + 1] == row[n] ? end[n + 1] : n + 1;
      for (int64_t n = nr - 1; n >= 0; n--)
        from[n] = end[n] - start[n] >= ATT_LONG_RUN ? n : n + 1 < nr ? from[n + 1] : nr;
      c->long_from = from;
    }
  }
  /* QR, DR, DSB, PB: a block of Lq rows per thread (see drow), filled by
  ** the owner of the rows (decl_rows) */
  const int64_t trows = (c->parallel ? omp_get_max_threads() : 1) * Lq;
  if (ok && a->rel_k && a->rel_row) ok = (c->QR = malloc((size_t)(trows * nrel) * sizeof(T))) != NULL;
  if (ok && backward && a->rel_v && a->rel_row)
    ok = (c->DR = malloc((size_t)(trows * nrel) * sizeof(T))) != NULL;
  /* Shaw's table gradients per head, summed in head order at the end */
  if (ok && backward && a->rel_k && a->rel_row && a->d_rel_k)
    ok = (c->GK = malloc((size_t)(BH * nrel * a->dk) * sizeof(T))) != NULL;
  if (ok && backward && a->rel_v && a->rel_row && a->d_rel_v)
    ok = (c->GV = malloc((size_t)(BH * nrel * a->dv) * sizeof(T))) != NULL;
  /* Shaw's key term needs dS by (query row, table row) for dQ as well */
  if (ok && backward && a->rel_k && a->rel_row)
    ok = (c->DSB = malloc((size_t)(trows * nrel) * sizeof(T))) != NULL;
  if (ok && backward && a->rel_v && a->d_rel_v && a->rel_row)
    ok = (c->PB = malloc((size_t)(trows * nrel) * sizeof(T))) != NULL;
  if (!ok) {
    FN(decl_release)(c);
    return em_error(EM_ERR_OOM, "cpu attention: out of memory for the declared terms (%lld rows x %lld)",
                    (long long)rows, (long long)nrel);
  }
  return EM_OK;
}

/* After the tiles: the table gradients. */
static void FN(decl_finish)(const att_ctx *c) {
  const em_attention_args *a = c->a;
  const int64_t H = a->H, BH = a->B * H, nrel = a->n_rel;
  /* the heads' parts of Shaw's table gradients, in head order */
  const void *parts[2] = {c->GK, c->GV};
  void *dst[2] = {a->d_rel_k, a->d_rel_v};
  const int64_t n[2] = {nrel * a->dk, nrel * a->dv};
  for (int t = 0; t < 2; t++) {
    if (!parts[t] || !dst[t]) continue;
    T *g = dst[t];
    const T *pt = parts[t];
    for (int64_t x = 0; x < n[t]; x++) g[x] = 0;
    for (int64_t bh = 0; bh < BH; bh++)
      for (int64_t x = 0; x < n[t]; x++) g[x] += pt[bh * n[t] + x];
  }
}
