/*
** cuda_attention.cuh -- what the fused attention forward and backward
** kernels share: the tile geometry, the chunk loader, the mask rule, and
** the argument checks.
**
** A block has 16 x 16 threads and works on a 64 x 64 tile of scores. The
** thread (tx, ty) owns the tile cells (ty + 16a, tx + 16b) for a, b < 4:
** the 16 threads of a row share a half-warp, so row reductions are four
** shuffles. Head dimensions are consumed in chunks of 16 columns staged
** through shared memory as float; outputs keep, per thread, the columns
** chunk * 16 + tx, in registers sized by the template parameter NCH (the
** number of 16-column chunks of the largest head dim: 4 or 16).
**
** Masking (the rule of the CPU kernel and of plugins/standard): a score is
** masked when its key is padding (key_padding[b, j] != 0), or when causal
** and j > i + (Lk - Lq) (bottom-right alignment, emc_causal_visible). The
** additive bias may also hold -inf. A row with no visible key gets output
** 0 and lse = +inf, and then zero gradients.
**
** Declared terms (em_attention_args ABI 2). A 64 x 64 tile holds 127
** relative positions: cell (query qi, key kj) of the tile at (q0, k0) has
** r = k0 - q0 - (Lk - Lq) + t - 63 with t = kj - qi + 63, its diagonal.
** So each tile first puts, per diagonal, the table row (rowt) and the
** scalar bias (bvec: -slope_h |r| + table[row, h]) in shared memory, and
** Shaw's tables are staged 16 columns at a time as 127 rows (one per
** diagonal) next to the K/V chunks: the key term is q . (k + rel_k[row]),
** the value term sums P (v + rel_v[row]). The table gradients are sums over
** diagonals, merged over runs of equal rows (a clipped distance or a T5
** bucket covers most of a tile) and added with atomicAdd into float
** accumulators. The block mask skips tiles that no query of the query tile
** may see (emc_attn_tile_empty) and applies the element rule elsewhere.
*/
#ifndef EMBER_CUDA_ATTENTION_CUH
#define EMBER_CUDA_ATTENTION_CUH

#include "cuda_kernels.cuh"

#define ATT_BQ EMC_ATT_BQ /* 64 queries per tile */
#define ATT_BK EMC_ATT_BK /* 64 keys per tile */
#define ATT_DC 16         /* head-dim columns per staged chunk */
#define ATT_T 16          /* threads along each side of the block */
#define ATT_NREL (ATT_BQ + ATT_BK - 1) /* relative positions (diagonals) of a tile */

/* Everything a kernel needs, passed by value. Pointers are typed as the
** storage type inside the kernels. */
struct AttParams {
  int64_t B, H, Lq, Lk, dk, dv;
  const void *q, *k, *v, *dout;
  void *out, *dq, *dk_, *dv_;
  const float *lse_in;   /* backward */
  float *lse;            /* forward */
  const uint8_t *pad;
  const float *bias;
  int64_t bias_stride[4];
  bool causal;
  float scale;
  double dropout_p;
  float keep_scale;      /* 1 / (1 - p) */
  uint64_t seed, offset;
  float *D;              /* backward: rowsum(dO * O), [B*H*Lq] */
  float *dq_acc;         /* backward: float accumulator for dq */
  /* declared terms; the tables are in the storage type */
  const int64_t *rel_row; /* [Lq + Lk - 1] table row of r at r + Lk - 1, or NULL */
  const double *alibi;    /* [H] slopes, or NULL */
  const void *table, *rel_k, *rel_v;
  emc_blockmask mask;
  int64_t shift;          /* Lk - Lq: query i sits at key position i + shift */
  float *g_table, *g_rel_k, *g_rel_v; /* backward: float accumulators, or NULL */
};

/* Rows [r0, r0 + 64) x columns [c0, c0 + 16) of a row-major [L, d] matrix
** into dst as float, zeros outside the matrix. */
template <class T>
__device__ __forceinline__ void att_load_chunk(float (*dst)[ATT_DC + 1], const T *src, int64_t L,
                                               int64_t d, int64_t r0, int64_t c0) {
  const int tid = threadIdx.y * ATT_T + threadIdx.x;
  for (int e = tid; e < 64 * ATT_DC; e += ATT_T * ATT_T) {
    int r = e / ATT_DC, c = e % ATT_DC;
    int64_t gr = r0 + r, gc = c0 + c;
    dst[r][c] = (gr < L && gc < d) ? (float)to_acc(src[gr * d + gc]) : 0.0f;
  }
}

/* Is score (i, j) of head bh hidden by padding, the causal rule or the
** tile edge? */
__device__ __forceinline__ bool att_masked(const AttParams &p, int64_t b, int64_t i, int64_t j) {
  if (i >= p.Lq || j >= p.Lk) return true;
  if (p.pad && p.pad[b * p.Lk + j]) return true;
  if (p.mask.kind && !emc_attn_allows(&p.mask, i + p.shift, j)) return true;
  return p.causal && !emc_causal_visible(i, j, p.Lq, p.Lk);
}

/* Is the tile at (q0, k0) hidden by the block mask for all its cells? The
** same answer for every thread of a block, so a kernel may skip it. */
__device__ __forceinline__ bool att_tile_skipped(const AttParams &p, int64_t q0, int64_t k0) {
  if (!p.mask.kind) return false;
  const int64_t q1 = (q0 + ATT_BQ < p.Lq ? q0 + ATT_BQ : p.Lq) - 1;
  const int64_t k1 = (k0 + ATT_BK < p.Lk ? k0 + ATT_BK : p.Lk) - 1;
  return emc_attn_tile_empty(&p.mask, q0 + p.shift, q1 + p.shift, k0, k1);
}

/* The tile's table row (-1 outside the sequences) and scalar bias of each
** diagonal t (see the top of this file). The caller synchronises after. */
template <class T>
__device__ __forceinline__ void att_tile_rel(const AttParams &p, int64_t h, int64_t q0, int64_t k0,
                                             int *rowt, float *bvec) {
  const int tid = threadIdx.y * ATT_T + threadIdx.x;
  for (int t = tid; t < ATT_NREL; t += ATT_T * ATT_T) {
    const int64_t r = k0 - q0 - p.shift + t - (ATT_BQ - 1), n = r + p.Lk - 1;
    int row = -1;
    double bias = 0;
    if (n >= 0 && n < p.Lq + p.Lk - 1) {
      if (p.rel_row) row = (int)p.rel_row[n];
      if (p.alibi) bias -= p.alibi[h] * (double)(r < 0 ? -r : r);
      if (p.table && row >= 0) bias += (double)to_acc(((const T *)p.table)[row * p.H + h]);
    }
    rowt[t] = row;
    bvec[t] = (float)bias;
  }
}

/* Columns [c0, c0 + 16) of a [n_rel, d] table at the tile's rows (rowt) as
** float, zeros outside. */
template <class T>
__device__ __forceinline__ void att_load_rel(float (*dst)[ATT_DC + 1], const void *table, int64_t d,
                                             const int *rowt, int64_t c0) {
  const int tid = threadIdx.y * ATT_T + threadIdx.x;
  for (int e = tid; e < ATT_NREL * ATT_DC; e += ATT_T * ATT_T) {
    const int t = e / ATT_DC, c = e % ATT_DC, row = rowt[t];
    const int64_t gc = c0 + c;
    dst[t][c] = row >= 0 && gc < d ? (float)to_acc(((const T *)table)[row * d + gc]) : 0.0f;
  }
}

/* Is diagonal t the first of a run of equal rows among [t0, t]? */
__device__ __forceinline__ bool att_run_start(const int *rowt, int t, int t0) {
  return rowt[t] >= 0 && (t == t0 || rowt[t - 1] != rowt[t]);
}

/* One staged chunk of a thread's 4x4 register tile of scores (or of dP):
**   acc[a][c] += sum over the chunk's columns of Qc[query] * (Kc[key] + X[key - query + ATT_BQ - 1])
** for rows ty + 16a and columns tx + 16c of the tile, the keys along the
** columns (the forward's S) or, KEY_ROWS, along the rows (the backward's
** S^T and dP^T). X, Shaw's relative rows staged by diagonal, may be NULL. */
template <bool KEY_ROWS>
__device__ __forceinline__ void att_chunk_dot(float (&acc)[4][4], const float (*Qc)[ATT_DC + 1],
                                              const float (*Kc)[ATT_DC + 1],
                                              const float (*X)[ATT_DC + 1]) {
  const int tx = threadIdx.x, ty = threadIdx.y;
  if (X) {
#pragma unroll 4
    for (int kk = 0; kk < ATT_DC; kk++)
#pragma unroll
      for (int a = 0; a < 4; a++)
#pragma unroll
        for (int c = 0; c < 4; c++) {
          const int key = KEY_ROWS ? ty + 16 * a : tx + 16 * c;
          const int query = KEY_ROWS ? tx + 16 * c : ty + 16 * a;
          acc[a][c] += Qc[query][kk] * (Kc[key][kk] + X[key - query + ATT_BQ - 1][kk]);
        }
    return;
  }
  const float(*R)[ATT_DC + 1] = KEY_ROWS ? Kc : Qc, (*C)[ATT_DC + 1] = KEY_ROWS ? Qc : Kc;
#pragma unroll 4
  for (int kk = 0; kk < ATT_DC; kk++) {
    float rv[4], cv[4];
#pragma unroll
    for (int a = 0; a < 4; a++) rv[a] = R[ty + 16 * a][kk];
#pragma unroll
    for (int c = 0; c < 4; c++) cv[c] = C[tx + 16 * c][kk];
#pragma unroll
    for (int a = 0; a < 4; a++)
#pragma unroll
      for (int c = 0; c < 4; c++) acc[a][c] += rv[a] * cv[c];
  }
}

/* Backward, table gradients of Shaw's terms: for the key-major tile M
** [key][query] and the staged query rows Bq (16 columns from c0),
**   dst[rowt[t], c0 + col] += alpha * sum over the cells of diagonal t of M * Bq[query][col].
** G (cap rows of scratch) holds the diagonal sums of a pass of cap
** diagonals; runs of equal rows are summed before one atomicAdd each.
** Every thread of the block calls it; it ends synchronised. */
__device__ __forceinline__ void att_diag_scatter(const float (*M)[ATT_BQ + 1],
                                                 const float (*Bq)[ATT_DC + 1], const int *rowt,
                                                 float (*G)[ATT_DC + 1], int cap, float *dst,
                                                 int64_t ld, int64_t c0, float alpha) {
  const int tid = threadIdx.y * ATT_T + threadIdx.x;
  for (int t0 = 0; t0 < ATT_NREL; t0 += cap) {
    const int n = ATT_NREL - t0 < cap ? ATT_NREL - t0 : cap;
    for (int e = tid; e < n * ATT_DC; e += ATT_T * ATT_T) {
      const int t = t0 + e / ATT_DC, col = e % ATT_DC;
      /* key kj = qi + t - 63 must be in [0, 64) */
      const int qlo = t < ATT_BQ - 1 ? ATT_BQ - 1 - t : 0;
      const int qhi = t > ATT_BK - 1 ? ATT_NREL - 1 - t : ATT_BQ - 1;
      float acc = 0.0f;
      if (rowt[t] >= 0)
        for (int qi = qlo; qi <= qhi; qi++) acc += M[qi + t - (ATT_BQ - 1)][qi] * Bq[qi][col];
      G[e / ATT_DC][col] = acc;
    }
    __syncthreads();
    for (int e = tid; e < n * ATT_DC; e += ATT_T * ATT_T) {
      const int tl = e / ATT_DC, t = t0 + tl, col = e % ATT_DC;
      if (c0 + col >= ld || !att_run_start(rowt, t, t0)) continue;
      float sum = 0.0f;
      for (int u = tl; u < n && rowt[t0 + u] == rowt[t]; u++) sum += G[u][col];
      atomicAdd(&dst[(int64_t)rowt[t] * ld + c0 + col], alpha * sum);
    }
    __syncthreads();
  }
}

/* Backward, the bias table's gradient: dS summed along each diagonal of
** the key-major tile M (into dsum, 127 floats of shared memory), then by
** runs into dst[row, h] ([n_rel, H]). Ends synchronised. */
__device__ __forceinline__ void att_diag_table(const float (*M)[ATT_BQ + 1], const int *rowt,
                                               float *dsum, float *dst, int64_t H, int64_t h) {
  const int tid = threadIdx.y * ATT_T + threadIdx.x;
  for (int t = tid; t < ATT_NREL; t += ATT_T * ATT_T) {
    const int qlo = t < ATT_BQ - 1 ? ATT_BQ - 1 - t : 0;
    const int qhi = t > ATT_BK - 1 ? ATT_NREL - 1 - t : ATT_BQ - 1;
    float acc = 0.0f;
    for (int qi = qlo; qi <= qhi; qi++) acc += M[qi + t - (ATT_BQ - 1)][qi];
    dsum[t] = acc;
  }
  __syncthreads();
  for (int t = tid; t < ATT_NREL; t += ATT_T * ATT_T) {
    if (!att_run_start(rowt, t, 0)) continue;
    float sum = 0.0f;
    for (int u = t; u < ATT_NREL && rowt[u] == rowt[t]; u++) sum += dsum[u];
    atomicAdd(&dst[(int64_t)rowt[t] * H + h], sum);
  }
  __syncthreads();
}

/* scale * q.k + bias for a visible score. */
__device__ __forceinline__ float att_score(const AttParams &p, float dot, int64_t b, int64_t h,
                                           int64_t i, int64_t j) {
  float s = dot * p.scale;
  if (p.bias)
    s += p.bias[b * p.bias_stride[0] + h * p.bias_stride[1] + i * p.bias_stride[2] +
                j * p.bias_stride[3]];
  return s;
}

/* The dropout factor of probability (bh, i, j): 0 or 1 / (1 - p). */
__device__ __forceinline__ float att_dropout(const AttParams &p, int64_t bh, int64_t i, int64_t j) {
  if (p.dropout_p <= 0) return 1.0f;
  return emc_attn_keep(p.seed, p.offset, bh, i, j, p.Lq, p.Lk, p.dropout_p) ? p.keep_scale : 0.0f;
}

/* Sum and max over the 16 threads of a tile row (one half-warp). */
__device__ __forceinline__ float att_row_sum(float v) {
  for (int o = ATT_T / 2; o > 0; o >>= 1) v += __shfl_xor_sync(EMC_FULL_MASK, v, o);
  return v;
}
__device__ __forceinline__ float att_row_max(float v) {
  for (int o = ATT_T / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(EMC_FULL_MASK, v, o));
  return v;
}

/* Checks shared by forward and backward; fills p. */
static em_status att_prepare(const char *kernel, const em_attention_args *a, bool backward,
                             AttParams *p) {
  if (!a) return em_error(EM_ERR_ARG, "cuda %s: args is NULL", kernel);
  /* traced variants (ember_expr.h) run composed on this backend for now */
  if (a->score_mod || a->mask_mod || a->sink)
    return em_error(EM_ERR_UNSUPPORTED, "cuda %s: traced attention programs are not run by this kernel",
                    kernel);
  if (a->dtype != EM_F32 && a->dtype != EM_BF16)
    return em_error(EM_ERR_UNSUPPORTED,
                    "cuda %s: dtype %s is not supported by the fused kernel (float32, bfloat16); "
                    "use the unfused path",
                    kernel, emc_dtype_name(a->dtype));
  if (a->B < 0 || a->H < 0 || a->Lq < 0 || a->Lk < 0 || a->dk < 0 || a->dv < 0)
    return em_error(EM_ERR_SHAPE,
                    "cuda %s: negative size B=%lld H=%lld Lq=%lld Lk=%lld dk=%lld dv=%lld", kernel,
                    (long long)a->B, (long long)a->H, (long long)a->Lq, (long long)a->Lk,
                    (long long)a->dk, (long long)a->dv);
  if ((a->bias_table || a->rel_k || a->rel_v) && !a->rel_row)
    return em_error(EM_ERR_ARG, "cuda %s: a table term without rel_row", kernel);
  /* table rows are int on the device (shared memory per tile) */
  if (a->rel_row && (a->n_rel <= 0 || a->n_rel > 0x3fffffffLL))
    return em_error(EM_ERR_ARG, "cuda %s: %lld table rows", kernel, (long long)a->n_rel);
  if (a->mask_kind < 0 || a->mask_kind > 2 || (a->mask_kind == 2 && a->block <= 0) ||
      a->win_left < 0 || a->win_right < 0 || a->local < 0 || a->global < 0)
    return em_error(EM_ERR_ARG, "cuda %s: bad block mask (kind %d, block %lld)", kernel,
                    a->mask_kind, (long long)a->block);
  if (a->dk > EMC_ATT_MAX_D || a->dv > EMC_ATT_MAX_D)
    return em_error(EM_ERR_UNSUPPORTED,
                    "cuda %s: head dims dk=%lld dv=%lld, the fused kernel takes at most %d; "
                    "use the unfused path",
                    kernel, (long long)a->dk, (long long)a->dv, EMC_ATT_MAX_D);
  double cells = (double)a->B * (double)a->H * ((double)a->Lq + 1) * ((double)a->Lk + 1) *
                 ((double)a->dk + (double)a->dv + 1);
  if (cells > 4e18)
    return em_error(EM_ERR_SHAPE, "cuda %s: sizes B=%lld H=%lld Lq=%lld Lk=%lld are too large",
                    kernel, (long long)a->B, (long long)a->H, (long long)a->Lq, (long long)a->Lk);
  if (!(a->dropout_p >= 0 && a->dropout_p <= 1))
    return em_error(EM_ERR_ARG, "cuda %s: dropout probability %g, expected within [0, 1]", kernel,
                    a->dropout_p);
  if (a->B * a->H * a->Lq > 0 && (!a->q || !a->k || !a->v || !a->out || !a->lse))
    return em_error(EM_ERR_ARG, "cuda %s: q, k, v, out and lse must not be NULL", kernel);
  if (backward && a->B * a->H > 0 && (!a->dout || !a->dq || !a->dk_ || !a->dv_))
    return em_error(EM_ERR_ARG, "cuda %s: dout, dq, dk_ and dv_ must not be NULL", kernel);
  *p = AttParams{};
  p->B = a->B;
  p->H = a->H;
  p->Lq = a->Lq;
  p->Lk = a->Lk;
  p->dk = a->dk;
  p->dv = a->dv;
  p->q = a->q;
  p->k = a->k;
  p->v = a->v;
  p->dout = a->dout;
  p->out = a->out;
  p->dq = a->dq;
  p->dk_ = a->dk_;
  p->dv_ = a->dv_;
  p->lse_in = (const float *)a->lse;
  p->lse = (float *)a->lse;
  p->pad = a->key_padding;
  p->bias = (const float *)a->bias;
  for (int k = 0; k < 4; k++) p->bias_stride[k] = a->bias_stride[k];
  p->causal = a->causal;
  p->scale = (float)a->scale;
  p->dropout_p = a->dropout_p;
  p->keep_scale = a->dropout_p < 1 ? (float)(1.0 / (1.0 - a->dropout_p)) : 0.0f;
  p->seed = a->seed;
  p->offset = a->offset;
  p->rel_row = a->rel_row;
  p->alibi = a->alibi_slopes;
  p->table = a->bias_table;
  p->rel_k = a->rel_k;
  p->rel_v = a->rel_v;
  p->mask = emc_blockmask{a->mask_kind, a->win_left, a->win_right, a->block, a->local, a->global};
  p->shift = a->Lk - a->Lq;
  return EM_OK;
}

/* The NCH instance for the larger head dim: 4 chunks up to 64 columns,
** else 16. (An 8-chunk instance would run at the same occupancy as the
** 16-chunk one -- one block per SM either way -- and cost compile time.) */
static inline int att_nch(int64_t dk, int64_t dv) {
  int64_t d = dk > dv ? dk : dv;
  return d <= 64 ? 4 : 16;
}

#endif
