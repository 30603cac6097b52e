/*
** cpu_attention_tmpl.h -- flash-style attention for one float type;
** included by cpu_attention.c with T (float or double) and SUF set.
** See cpu_attention.c for the algorithm and the masking rules.
**
** Every product is a GEMM on a tile (mm_SUF, on the calling thread);
** the loops here only mask, exponentiate and rescale tile rows.
*/

#define FN(name) CPU_CAT(name, SUF)

/* The sum of sixteen lanes, as a tree written out: as a loop it went
** through the stack, one lane at a time (a fifth of the forward's row work). */
ATT_ROW T FN(sum16)(const T *s) {
  const T even = ((s[0] + s[8]) + (s[4] + s[12])) + ((s[2] + s[10]) + (s[6] + s[14]));
  const T odd = ((s[1] + s[9]) + (s[5] + s[13])) + ((s[3] + s[11]) + (s[7] + s[15]));
  return even + odd;
}

#include "cpu_attention_decl_tmpl.h"
#include "cpu_attention_expr_tmpl.h"

/* S[ii][jj] = scale * q_i . k_j + bias[i,j] for query rows [i0, i0+br)
** and keys [j0, j0+bc) of head bh, row stride c->ld; -inf where the key is
** padding or in the causal future. A traced score program changes the
** product first (raw, when not NULL, keeps it); a traced mask hides keys
** last. X: the thread's program registers; dsc and raw: the backward's
** tiles (xscore_tile), NULL in the forward. */
ATT_ROW void FN(scores)(const att_ctx *c, int64_t bh, int64_t i0, int64_t br, int64_t j0,
                        int64_t bc, T *S, T *X, T *dsc, T *raw) {
  const em_attention_args *a = c->a;
  const int64_t dk = a->dk, b = bh / a->H, h = bh % a->H, ld = c->ld;
  const ST *q = (const ST *)a->q + att_row(c, &c->q, bh, i0);
  const ST *k = (const ST *)a->k + att_kv_row(c, &c->k, bh, j0);
  FN(mmq)(c, true, br, bc, dk, (T)a->scale, q, true, c->q.r, k, true, c->k.r, 0, S, ld);
  if (a->score_mod) FN(xscore_tile)(c, bh, i0, br, j0, bc, S, X, dsc, raw);
  const T *bias = a->bias;
  const uint8_t *pad = a->key_padding ? a->key_padding + b * a->Lk + j0 : NULL;
  for (int64_t ii = 0; ii < br; ii++) {
    const int64_t i = i0 + ii;
    T *s = S + ii * ld;
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
  FN(decl_scores)(c, bh, i0, br, j0, bc, S);
  if (a->mask_mod) FN(xmask_tile)(c, bh, i0, br, j0, bc, S, X);
}

/* keep[jj]: is element (query i, key j0 + jj) of head bh kept by dropout?
** Consecutive counters of the stream rule, drawn vectorised. */
ATT_ROW void FN(keep_row)(const att_ctx *c, int64_t bh, int64_t i, int64_t j0, int64_t bc,
                          uint8_t *keep) {
  const em_attention_args *a = c->a;
  const uint64_t e = (uint64_t)((bh * a->Lq + i) * a->Lk + j0);
  cpu_dropout_keep(keep, a->seed, a->offset, e, bc, em_philox_keep_threshold(a->dropout_p));
}

/* Keys [0, end) can be visible to some query in [i0, i0+br). */
static int64_t FN(key_end)(const att_ctx *c, int64_t i0, int64_t br) {
  int64_t lk = c->a->Lk;
  if (!c->a->causal) return lk;
  int64_t end = i0 + br - 1 + c->shift + 1;
  return end < 0 ? 0 : (end > lk ? lk : end);
}

/* The length a tile row s[0..n) is worked in: n rounded up to 16, the
** padding -inf (a max passes it over, exp makes it 0), where the last
** block is at least half full; else n (a short tail, one element at a
** time). The rows of the tiles are c->ld wide, a multiple of 16 at least
** n, so the room is there. A tail of 9-10 keys one by one (a scalar exp
** each, a max whose lanes went through the stack) was most of a small
** head's row work (10 or 25 keys); a block of 16 for a tail of 1 (17
** keys, fashion_vit's) made that row's exponentials twice as many. */
ATT_ROW int64_t FN(pad16)(T *restrict s, int64_t n) {
  if (n % 16 < 8) return n;
  const int64_t n16 = (n + 15) / 16 * 16;
  for (int64_t j = n; j < n16; j++) s[j] = (T)-INFINITY;
  return n16;
}

/* max of s[0..n), -inf for n == 0, NaNs passed over (cpu_vmath.h's rule);
** s is a tile row (pad16). */
ATT_ROW T FN(row_max)(T *restrict s, int64_t n) { return FN(att_max)(s, FN(pad16)(s, n)); }

/* p[0..n) = exp(p - shift), returning their sum. -inf gives 0; p is a
** tile row (pad16: its padding becomes 0). The sum is taken in the same
** pass, in sixteen lanes added in a fixed order (the same bits in every
** clone): a second pass of row_sum, one chain of vector adds, was a tenth
** of the forward's row work. */
ATT_ROW T FN(exp_row)(T *restrict p, int64_t n, T shift) {
  T sum[16] = {0};
  const int64_t m = FN(pad16)(p, n);
  int64_t jj = 0;
  for (; jj + 16 <= m; jj += 16)
    for (int x = 0; x < 16; x++) {
      const T e = FN(att_exp)(p[jj + x] - shift);
      p[jj + x] = e;
      sum[x] += e;
    }
  for (; jj < m; jj++) {
    p[jj] = FN(att_exp)(p[jj] - shift);
    sum[0] += p[jj];
  }
  return FN(sum16)(sum);
}

/* ---- forward ---- */

/* One query tile of one head: online softmax over the key tiles, with
** scratch S [br][bc], acc [br][dv], m and l [br]. */
CPU_VECTOR_CLONES_512 static void FN(forward_tile)(const att_ctx *c, int64_t bh, int64_t qt, T *S,
                                               T *acc, T *m, T *l, T *pbt, T *X) {
  const em_attention_args *a = c->a;
  const int64_t dv = a->dv, Lq = a->Lq, Lk = a->Lk, BR = c->br, BC = c->bc, LD = c->ld;
  const int64_t i0 = qt * BR, br = Lq - i0 < BR ? Lq - i0 : BR;
  const ST *v_bh = (const ST *)a->v + att_kv_row(c, &c->v, bh, 0);
  const bool dropout = a->dropout_p > 0;
  const T inv_keep = (T)(1.0 / (1.0 - a->dropout_p));

  for (int64_t ii = 0; ii < br; ii++) { /* a sink starts each row as one more logit, without a value */
    m[ii] = FN(xsink)(c, bh, i0 + ii, X);
    l[ii] = m[ii] == -INFINITY ? 0 : 1;
  }
  for (int64_t x = 0; x < br * dv; x++) acc[x] = 0;
  const int64_t nrel = a->n_rel;
  if (pbt)
    for (int64_t x = 0; x < br * nrel; x++) pbt[x] = 0;

  FN(decl_rows)(c, bh, i0, br, false);
  const int64_t j_end = FN(key_end)(c, i0, br);
  for (int64_t j0 = 0, w; j0 < j_end; j0 += w) {
    w = BC;
    if (att_tile_empty(c, bh, i0, br, j0, Lk - j0 < BC ? Lk - j0 : BC)) continue;
    /* one step over the kept tiles that follow, as far as the scratch allows */
    while (w + BC <= LD && j0 + w < j_end &&
           !att_tile_empty(c, bh, i0, br, j0 + w, Lk - j0 - w < BC ? Lk - j0 - w : BC))
      w += BC;
    /* up to the causal frontier, not the tile's end: at L = 128 a causal
    ** head's first query tile would otherwise score all 128 keys to mask
    ** half of them (masked keys add exact zeros, so the bits are the same) */
    const int64_t bc = j_end - j0 < w ? j_end - j0 : w;
    FN(scores)(c, bh, i0, br, j0, bc, S, X, NULL, NULL);
    for (int64_t ii = 0; ii < br; ii++) {
      T *s = S + ii * LD, *o = acc + ii * dv;
      /* a uniform row's Shaw key term is the constant x, left out of s */
      const int64_t u = FN(uniform_row)(c, i0 + ii, j0, bc);
      const T x = FN(uniform_score)(c, i0 + ii, u);
      const T mx = FN(row_max)(s, bc) + x;
      const T m_new = mx > m[ii] ? mx : m[ii];
      if (m_new == -INFINITY) { /* nothing visible yet: this row adds nothing */
        for (int64_t jj = 0; jj < bc; jj++) s[jj] = 0;
        continue;
      }
      /* 0 when m was -inf; 1, without an exp, when the max holds (most tiles) */
      const T corr = m_new == m[ii] ? 1 : FN(att_exp)(m[ii] - m_new);
      if (corr != 1) {
        l[ii] *= corr;
        for (int64_t x = 0; x < dv; x++) o[x] *= corr;
        if (pbt)
          for (int64_t x = 0; x < nrel; x++) pbt[ii * nrel + x] *= corr;
      }
      /* the normaliser counts dropped keys too */
      const T sum = FN(exp_row)(s, bc, m_new - x);
      l[ii] += sum;
      if (dropout) {
        uint8_t keep[128]; /* bc <= 128 (make_ctx) */
        FN(keep_row)(c, bh, i0 + ii, j0, bc, keep);
        for (int64_t jj = 0; jj < bc; jj++) s[jj] = keep[jj] ? s[jj] * inv_keep : 0;
      }
      if (pbt && u >= 0 && !dropout) pbt[ii * nrel + u] += sum; /* Shaw's output term, folded */
      else if (pbt) FN(decl_scatter_row)(c, i0 + ii, j0, bc, s, pbt + ii * nrel);
      m[ii] = m_new;
    }
    FN(mmq)(c, false, br, dv, bc, 1, S, false, LD, v_bh + j0 * c->v.r, true, c->v.r, 1, acc, dv);
  }
  /* Shaw's output term: acc += (P summed by table row) rel_v */
  if (pbt) FN(mm)(false, false, br, dv, nrel, 1, pbt, false, nrel, a->rel_v, true, dv, 1, acc, dv);

  ST *out = (ST *)a->out + att_row(c, &c->o, bh, i0);
  T *lse = (T *)a->lse + bh * Lq + i0;
  for (int64_t ii = 0; ii < br; ii++) {
    ST *orow = out + ii * c->o.r;
    const T *o = acc + ii * dv;
    if (l[ii] > 0) {
      const T inv = 1 / l[ii];
      for (int64_t x = 0; x < dv; x++) orow[x] = FN(to_st)(o[x] * inv);
      lse[ii] = m[ii] + log(l[ii]);
    } else { /* every key masked: zero output, lse = +inf makes exp(s - lse) = 0 */
      for (int64_t x = 0; x < dv; x++) orow[x] = FN(to_st)(0);
      lse[ii] = INFINITY;
    }
  }
}

/* Work item t (a head and a query tile) with one thread's scratch. */
static void FN(forward_item)(const att_ctx *c, int64_t t, int64_t nqt, T *S) {
  T *acc = S + c->br * c->ld, *m = acc + c->br * c->a->dv, *l = m + c->br;
  const int64_t npb = c->a->rel_v && c->a->rel_row ? c->br * c->a->n_rel : 0;
  T *pbt = npb ? l + c->br : NULL; /* [br, n_rel] */
  T *X = c->xregs ? l + c->br + npb : NULL;
  FN(forward_tile)(c, t / nqt, t % nqt, S, acc, m, l, pbt, X);
}

static em_status FN(forward)(att_ctx *c) {
  const em_attention_args *a = c->a;
  const int64_t nqt = (a->Lq + c->br - 1) / c->br, items = a->B * a->H * nqt;
  const int64_t npb = a->rel_v && a->rel_row ? c->br * a->n_rel : 0;
  const size_t per_thread =
      (size_t)(c->br * c->ld + c->br * a->dv + 2 * c->br + npb + c->xregs + 1) * sizeof(T);
  em_status ds = FN(decl_prepare)(c, false);
  if (ds != EM_OK) return ds;
  FN(xdiag_prepare)(c, false);
  int failed = 0;
  if (c->parallel) {
    const uint64_t t0 = cpu_team_now();
    uint64_t lag = 0;
    const int64_t chunk = att_batch_chunk(c, a->H * nqt);
#pragma omp parallel
    {
      CPU_TEAM_MARK(t0, lag);
      T *S = cpu_scratch_alloc(per_thread);
      if (!S) __atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
#pragma omp for schedule(dynamic, chunk)
      for (int64_t t = 0; t < items; t++)
        if (S) FN(forward_item)(c, t, nqt, S);
      cpu_scratch_free(S, per_thread);
    }
    cpu_team_note(t0, lag);
  } else {
    T *S = cpu_scratch_alloc(per_thread);
    failed = !S;
    for (int64_t t = 0; t < items && S; t++) FN(forward_item)(c, t, nqt, S);
    cpu_scratch_free(S, per_thread);
  }
  FN(xdiag_release)(c);
  FN(decl_release)(c);
  if (failed)
    return em_error(EM_ERR_OOM,
                    "cpu attention_forward: out of memory for %zu bytes of tile scratch",
                    per_thread);
  return EM_OK;
}

/* ---- backward ---- */

/* For query rows [i0, i0+br) and keys [j0, j0+bc) of head bh, leaves in P
** the dropped-out probabilities Pd = P * Z (Z = keep / (1 - p)) and in dS
** the score gradients dS = P * (Z * dO V^T - D), where D = rowsum(dO * O)
** was computed upfront. Both tiles have row stride c->ld. */
CPU_VECTOR_CLONES_512 static void FN(grad_tile)(const att_ctx *c, int64_t bh, int64_t i0, int64_t br,
                                            int64_t j0, int64_t bc, T *P, T *dS, bool owner, T *X) {
  const em_attention_args *a = c->a;
  const int64_t Lq = a->Lq, dv = a->dv, ld = c->ld;
  const T *lse = (const T *)a->lse + bh * Lq;
  const double *D = c->D + bh * Lq;
  const bool dropout = a->dropout_p > 0;
  const T inv_keep = (T)(1.0 / (1.0 - a->dropout_p));

  /* a traced score: d score/ds [br][ld], and the raw scores when learned tables need them */
  T *dsc = a->score_grad && !c->x_additive ? X + c->xregs : NULL;
  T *raw = a->score_grad && c->xg && owner && !c->x_diag_grad ? X + c->xregs + c->br * ld : NULL;
  const bool diag_grad = a->score_grad && c->xg && owner && c->x_diag_grad; /* no raw scores needed */
  /* an additive score (d/ds = 1) runs its plain program: the same scores, no d/ds tile */
  FN(scores)(c, bh, i0, br, j0, bc, P, X, dsc, raw);
  FN(mmq)(c, true, br, bc, dv, 1, (const ST *)a->dout + att_row(c, &c->go, bh, i0), true, c->go.r,
         (const ST *)a->v + att_kv_row(c, &c->v, bh, j0), true, c->v.r, 0, dS, ld);
  const FN(xview) xv = raw || diag_grad
                           ? FN(xview_tile)(c, CPU_XJIT_SCATTER, a->score_grad, bh, i0, br, j0, bc, X, true)
                           : (FN(xview)){0};
  for (int64_t ii = 0; ii < br; ii++) {
    const int64_t i = i0 + ii;
    T *p = P + ii * ld, *ds = dS + ii * ld;
    if (isinf(lse[i])) { /* a fully masked row takes no part */
      for (int64_t jj = 0; jj < bc; jj++) p[jj] = ds[jj] = 0;
      continue;
    }
    /* a uniform row's Shaw terms are constants (see uniform_row) */
    const int64_t u = FN(uniform_row)(c, i, j0, bc);
    (void)FN(exp_row)(p, bc, lse[i] - FN(uniform_score)(c, i, u)); /* 0 for masked keys */
    const T y = c->DR ? FN(decl_dp_row)(c, i, u, j0, bc, ds) : 0; /* dP's value term, when uniform */
    const T Di = (T)D[i];
    if (dropout) {
      uint8_t keep[128]; /* bc <= 128 (make_ctx) */
      FN(keep_row)(c, bh, i, j0, bc, keep);
      for (int64_t jj = 0; jj < bc; jj++) {
        const T z = keep[jj] ? inv_keep : 0;
        ds[jj] = p[jj] * (z * (ds[jj] + y) - Di);
        p[jj] *= z;
      }
    } else {
      for (int64_t jj = 0; jj < bc; jj++) ds[jj] = p[jj] * (ds[jj] - (Di - y));
    }
    if (raw) FN(xscore_scatter_row)(c, bh, i, j0, bc, raw + ii * ld, ds, X, &xv, ii, br);
    /* the tables' gradients do not read s: ds stands in for it where the
    ** diagonals' view is off (a load out of range, which the row reports) */
    if (diag_grad && !FN(xdiag_grad_row)(c, ds, &xv, ii, br, bc))
      FN(xscore_scatter_row)(c, bh, i, j0, bc, ds, ds, X, &xv, ii, br);
    if (dsc)
      for (int64_t jj = 0; jj < bc; jj++) ds[jj] *= dsc[ii * ld + jj];
    /* a uniform row's part of decl_accumulate: its sums go to table row u */
    if (owner && u >= 0 && (c->DSB || c->PB))
      FN(decl_uniform_sums)(c, i, u, c->DSB ? FN(row_sum)(ds, bc) : 0, c->PB ? FN(row_sum)(p, bc) : 0);
  }
  FN(xscatter_flush)(c, bh, br, bc, &xv);
  /* the owner of these query rows sums them by table row (Shaw's terms) */
  if (owner) FN(decl_accumulate)(c, bh, i0, br, j0, bc, P, dS);
}

/* Gradients are summed over tiles in T. Where the storage type is T
** (float32, float64) the sums go straight into the caller's dq, dk and dv;
** for bfloat16 they go into a thread's float32 scratch, rounded into the
** caller's tensors once a block of rows is final (store_grad). A whole
** float32 copy of the three gradients, zeroed, summed and rounded in
** passes of its own, was a tenth of a block-sparse backward. */
#define ATT_DIRECT (sizeof(ST) == sizeof(T))

/* rows x n of src (row stride n) into dst (row stride ld). Only bfloat16
** storage comes here (ATT_DIRECT otherwise). Strided rows are rounded
** here, by to_st (the rule cpu_bf16_round follows): a call per row of 32
** was a tenth of a bfloat16 backward. */
CPU_VECTOR_CLONES_512 static void FN(store_grad)(ST *restrict dst, int64_t ld, const T *restrict src,
                                                 int64_t rows, int64_t n) {
  if (ld == n) {
    cpu_bf16_round((uint16_t *)dst, (const float *)src, rows * n);
    return;
  }
  for (int64_t r = 0; r < rows; r++)
    for (int64_t x = 0; x < n; x++) dst[r * ld + x] = FN(to_st)(src[r * n + x]);
}

/* Zeroes rows x n at p, row stride ld. */
ATT_ROW void FN(zero_rows)(T *p, int64_t ld, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t x = 0; x < n; x++) p[r * ld + x] = 0;
}

/* The part of key tile [j0, j0 + w) that query rows [i0, i0+br) can see:
** keys [*ja, *jb), whole tiles of c->bc (the block mask's granule), the
** last one cut at the causal frontier; *ja == *jb when none. Backward tiles are c->ld
** wide, so a block mask's neighbouring kept tiles share one step. */
static void FN(tile_span)(const att_ctx *c, int64_t bh, int64_t i0, int64_t br, int64_t j0, int64_t w,
                          int64_t *ja, int64_t *jb) {
  const int64_t end = FN(key_end)(c, i0, br), stop = j0 + w < end ? j0 + w : end;
  int64_t lo = -1, hi = j0;
  for (int64_t g = j0; g < stop; g += c->bc) {
    const int64_t gw = j0 + w - g < c->bc ? j0 + w - g : c->bc;
    if (att_tile_empty(c, bh, i0, br, g, gw)) continue;
    if (lo < 0) lo = g;
    hi = g + gw < stop ? g + gw : stop;
  }
  *ja = lo < 0 ? j0 : lo;
  *jb = lo < 0 ? j0 : hi;
}

/* One key tile of one head: writes dK and dV of its keys, summing over the
** query tiles that can see them (in acc, [bc][dk + dv], unless ATT_DIRECT);
** gq, when not NULL, is the head's dQ sum (row stride ldq), which each
** tile's share is added to (the caller owns the whole head then, so nobody
** else writes there). */
static void FN(backward_kv)(const att_ctx *c, int64_t bh, int64_t kt, T *P, T *dS, T *gq, int64_t ldq,
                            T *acc, T *X) {
  const em_attention_args *a = c->a;
  const int64_t Lq = a->Lq, Lk = a->Lk, dk = a->dk, dv = a->dv, BR = c->br, LD = c->ld;
  const int64_t j0 = kt * LD, bc = Lk - j0 < LD ? Lk - j0 : LD;
  const T scale = (T)a->scale;
  const ST *q_bh = (const ST *)a->q + att_row(c, &c->q, bh, 0);
  const ST *do_bh = (const ST *)a->dout + att_row(c, &c->go, bh, 0);
  const ST *k_j = (const ST *)a->k + att_kv_row(c, &c->k, bh, j0);
  ST *out_k = (ST *)a->dk_ + att_row(c, &c->gk, bh, j0), *out_v = (ST *)a->dv_ + att_row(c, &c->gv, bh, j0);
  T *gk = ATT_DIRECT ? (T *)out_k : acc, *gv = ATT_DIRECT ? (T *)out_v : acc + bc * dk;
  const int64_t ldk = ATT_DIRECT ? c->gk.r : dk, ldv = ATT_DIRECT ? c->gv.r : dv;
  FN(zero_rows)(gk, ldk, bc, dk);
  FN(zero_rows)(gv, ldv, bc, dv);

  /* causal: query i sees key j0 only if i >= j0 - shift; start at the
  ** query tile holding that row, the tiles backward_q walks too */
  int64_t i_start = a->causal ? j0 - c->shift : 0;
  i_start = i_start < 0 ? 0 : i_start / BR * BR;
  for (int64_t i0 = i_start; i0 < Lq; i0 += BR) {
    const int64_t br = Lq - i0 < BR ? Lq - i0 : BR;
    int64_t ja, jb;
    FN(tile_span)(c, bh, i0, br, j0, bc, &ja, &jb);
    if (ja == jb) continue;
    const int64_t n = jb - ja, o = ja - j0;
    FN(grad_tile)(c, bh, i0, br, ja, n, P, dS, gq != NULL, X);
    FN(mm)(true, false, n, dv, br, 1, P, false, LD, do_bh + i0 * c->go.r, true, c->go.r, 1,
           gv + o * ldv, ldv);
    FN(mm)(true, false, n, dk, br, scale, dS, false, LD, q_bh + i0 * c->q.r, true, c->q.r, 1,
           gk + o * ldk, ldk);
    if (gq)
      FN(mm)(false, false, br, dk, n, scale, dS, false, LD, k_j + o * c->k.r, true, c->k.r, 1,
             gq + i0 * ldq, ldq);
  }
  if (!ATT_DIRECT) {
    FN(store_grad)(out_k, c->gk.r, gk, bc, dk);
    FN(store_grad)(out_v, c->gv.r, gv, bc, dv);
  }
}

/* One query tile of one head: writes its dQ, summing over the key tiles in
** the order backward_kv adds them, with the same products, so both
** schedules give the same bits. */
static void FN(backward_q)(const att_ctx *c, int64_t bh, int64_t qt, T *P, T *dS, T *acc, T *X) {
  const em_attention_args *a = c->a;
  const int64_t Lq = a->Lq, Lk = a->Lk, dk = a->dk, BR = c->br, LD = c->ld;
  const int64_t i0 = qt * BR, br = Lq - i0 < BR ? Lq - i0 : BR;
  const ST *k_bh = (const ST *)a->k + att_kv_row(c, &c->k, bh, 0);
  ST *out_q = (ST *)a->dq + att_row(c, &c->gq, bh, i0);
  T *gq = ATT_DIRECT ? (T *)out_q : acc;
  const int64_t ldq = ATT_DIRECT ? c->gq.r : dk;
  FN(zero_rows)(gq, ldq, br, dk);
  const int64_t j_end = FN(key_end)(c, i0, br);
  for (int64_t j0 = 0; j0 < j_end; j0 += LD) {
    int64_t ja, jb;
    FN(tile_span)(c, bh, i0, br, j0, Lk - j0 < LD ? Lk - j0 : LD, &ja, &jb);
    if (ja == jb) continue;
    FN(grad_tile)(c, bh, i0, br, ja, jb - ja, P, dS, true, X);
    FN(mm)(false, false, br, dk, jb - ja, (T)a->scale, dS, false, LD, k_bh + ja * c->k.r, true, c->k.r,
           1, gq, ldq);
  }
  if (!ATT_DIRECT) FN(store_grad)(out_q, c->gq.r, gq, br, dk);
}

/* A whole head in one pass: dQ is zeroed, then every key tile adds to it
** (acc: backward_kv's scratch, then the head's dQ sum unless ATT_DIRECT). */
static void FN(backward_head)(const att_ctx *c, int64_t bh, int64_t nkt, T *P, T *dS, T *acc, T *X) {
  const int64_t Lq = c->a->Lq, dk = c->a->dk;
  ST *out_q = (ST *)c->a->dq + att_row(c, &c->gq, bh, 0);
  T *gq = ATT_DIRECT ? (T *)out_q : acc + c->ld * (dk + c->a->dv);
  const int64_t ldq = ATT_DIRECT ? c->gq.r : dk;
  FN(zero_rows)(gq, ldq, Lq, dk);
  FN(decl_rows)(c, bh, 0, Lq, true);
  for (int64_t kt = 0; kt < nkt; kt++) FN(backward_kv)(c, bh, kt, P, dS, gq, ldq, acc, X);
  FN(decl_head_done)(c, bh, gq, ldq);
  if (!ATT_DIRECT) FN(store_grad)(out_q, c->gq.r, gq, Lq, dk);
}

/* D[r] = dO_r . O_r for rows [r0, r0 + n), in double. Eight partial sums
** added in a fixed order: a single running sum was a chain of dependent
** adds (1.9 ms at B*H*Lq = 32768, dv = 32, a tenth of a block-sparse
** backward); these vectorise, with the same bits in every clone. */
CPU_VECTOR_CLONES_512 static void FN(out_dots)(const att_ctx *c, const ST *restrict dO,
                                               const ST *restrict O, int64_t r0, int64_t n,
                                               int64_t dv, double *restrict D) {
  const int64_t Lq = c->a->Lq;
  /* row r is row i of head bh; the rows' addresses step by the row strides
  ** (a division per row was most of this loop's time at dv = 32) */
  int64_t bh = r0 / Lq, i = r0 % Lq;
  const ST *g = dO + att_row(c, &c->go, bh, i), *o = O + att_row(c, &c->o, bh, i);
  for (int64_t r = r0; r < r0 + n; r++) {
    double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t x = 0;
    for (; x + 8 <= dv; x += 8)
      for (int y = 0; y < 8; y++) s[y] += (double)FN(from_st)(g[x + y]) * (double)FN(from_st)(o[x + y]);
    for (; x < dv; x++) s[0] += (double)FN(from_st)(g[x]) * (double)FN(from_st)(o[x]);
    D[r] = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    if (++i < Lq) {
      g += c->go.r, o += c->o.r;
    } else if (r + 1 < r0 + n) {
      i = 0, bh++;
      g = dO + att_row(c, &c->go, bh, 0), o = O + att_row(c, &c->o, bh, 0);
    }
  }
}

/* out_dots for rows [i0, i0 + n) of every head of batch b, a row's heads
** one after another: the order they lie in when heads are interleaved
** ([B,L,H,d]), so the rows stream in as a contiguous tensor's do. */
CPU_VECTOR_CLONES_512 static void FN(out_dots_by_row)(const att_ctx *c, const ST *restrict dO,
                                                      const ST *restrict O, int64_t b, int64_t i0,
                                                      int64_t n, int64_t dv, double *restrict D) {
  const int64_t H = c->a->H, Lq = c->a->Lq;
  for (int64_t i = i0; i < i0 + n; i++)
    for (int64_t h = 0; h < H; h++) {
      const ST *g = dO + b * c->go.b + h * c->go.h + i * c->go.r, *o = O + b * c->o.b + h * c->o.h + i * c->o.r;
      double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      int64_t x = 0;
      for (; x + 8 <= dv; x += 8)
        for (int y = 0; y < 8; y++) s[y] += (double)FN(from_st)(g[x + y]) * (double)FN(from_st)(o[x + y]);
      for (; x < dv; x++) s[0] += (double)FN(from_st)(g[x]) * (double)FN(from_st)(o[x]);
      D[(b * H + h) * Lq + i] = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    }
}

static em_status FN(backward)(att_ctx *c) {
  const em_attention_args *a = c->a;
  const int64_t BH = a->B * a->H, Lq = a->Lq, dv = a->dv;
  const int64_t nqt = (Lq + c->br - 1) / c->br, nkt = (a->Lk + c->ld - 1) / c->ld;

  /* D_i = dO_i . O_i, the row term of the softmax derivative. */
  const size_t d_bytes = (size_t)(BH * Lq > 0 ? BH * Lq : 1) * sizeof(double);
  double *D = cpu_scratch_alloc(d_bytes);
  if (!D)
    return em_error(EM_ERR_OOM, "cpu attention_backward: out of memory for %lld row sums",
                    (long long)(BH * Lq));
  const int64_t rows = BH * Lq, chunks = (rows + 63) / 64;
  if (c->go.h < c->go.r && c->o.h < c->o.r) { /* heads lie inside rows ([B,L,H,d]): rows in memory order */
    const int64_t nb = (Lq + 63) / 64;
    CPU_FOR(c->parallel, t, a->B * nb,
      FN(out_dots_by_row)(c, a->dout, a->out, t / nb, t % nb * 64, Lq - t % nb * 64 < 64 ? Lq - t % nb * 64 : 64, dv, D););
  } else {
    CPU_FOR(c->parallel, t, chunks,
      FN(out_dots)(c, a->dout, a->out, t * 64, rows - t * 64 < 64 ? rows - t * 64 : 64, dv, D););
  }
  c->D = D;
  em_status ds = FN(decl_prepare)(c, true);
  if (ds == EM_OK) ds = FN(xprepare)(c);
  if (ds == EM_OK) FN(xdiag_prepare)(c, true);
  if (ds != EM_OK) {
    FN(decl_release)(c);
    cpu_scratch_free(D, d_bytes);
    c->D = NULL;
    return ds;
  }

  /* With a head per thread at least, each head runs in one pass (dQ built
  ** alongside dK and dV). With fewer heads than threads, two passes split
  ** finer without write races: key tiles (dK, dV), then query tiles (dQ),
  ** which recomputes the probabilities once more. Same bits either way. */
  const bool per_head = !c->parallel || BH >= omp_get_max_threads() || c->QR || c->xg;
  const int64_t n_acc = ATT_DIRECT ? 0 : c->ld * (a->dk + a->dv) + (per_head ? Lq : c->br) * a->dk;
  /* a traced score keeps its raw tile after the program registers */
  const int64_t n_x = c->xregs ? c->xregs + (a->score_grad ? (c->xg ? 2 : 1) * c->br * c->ld : 0) : 0;
  const size_t per_thread = (size_t)(2 * c->br * c->ld + n_acc + n_x + 1) * sizeof(T);
  int failed = 0;
  if (c->parallel) {
    const uint64_t t0 = cpu_team_now();
    uint64_t lag = 0;
    const int64_t chunk = att_batch_chunk(c, a->H);
#pragma omp parallel
    {
      CPU_TEAM_MARK(t0, lag);
      T *P = cpu_scratch_alloc(per_thread);
      if (!P) __atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
      T *dS = P ? P + c->br * c->ld : NULL, *acc = P ? dS + c->br * c->ld : NULL;
      T *X = P && n_x ? acc + n_acc : NULL;
      if (per_head) {
#pragma omp for schedule(dynamic, chunk)
        for (int64_t t = 0; t < BH; t++)
          if (P) FN(backward_head)(c, t, nkt, P, dS, acc, X);
      } else {
#pragma omp for schedule(dynamic)
        for (int64_t t = 0; t < BH * nkt; t++)
          if (P) FN(backward_kv)(c, t / nkt, t % nkt, P, dS, NULL, 0, acc, X);
#pragma omp for schedule(dynamic)
        for (int64_t t = 0; t < BH * nqt; t++)
          if (P) FN(backward_q)(c, t / nqt, t % nqt, P, dS, acc, X);
      }
      cpu_scratch_free(P, per_thread);
    }
    cpu_team_note(t0, lag);
  } else {
    T *P = cpu_scratch_alloc(per_thread);
    failed = !P;
    for (int64_t t = 0; t < BH && P; t++)
      FN(backward_head)(c, t, nkt, P, P + c->br * c->ld, P + 2 * c->br * c->ld,
                        n_x ? P + 2 * c->br * c->ld + n_acc : NULL);
    cpu_scratch_free(P, per_thread);
  }
  if (!failed) FN(decl_finish)(c);
  if (!failed) FN(xfinish)(c);
  FN(xdiag_release)(c);
  FN(xrelease)(c);
  FN(decl_release)(c);
  cpu_scratch_free(D, d_bytes);
  c->D = NULL;
  if (failed)
    return em_error(EM_ERR_OOM,
                    "cpu attention_backward: out of memory for %zu bytes of tile scratch",
                    per_thread);
  return EM_OK;
}

#undef ATT_DIRECT
#undef FN
