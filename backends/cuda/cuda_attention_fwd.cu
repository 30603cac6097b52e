/*
** cuda_attention_fwd.cu -- fused scaled-dot-product attention, forward,
** flash style (online softmax, O(L) memory).
**
** A block owns 64 queries of one (batch, head) and walks the key tiles:
**   S = scale * Q K^T + bias, masked scores -inf       (64 x 64, registers)
**   per row: m_new = max(m, rowmax S), r = exp(m - m_new),
**            P = exp(S - m_new), l = l * r + rowsum P, O = O * r + Z(P) V
** with Z the dropout factor of each probability (the normaliser l counts
** every visible key, as dropout(softmax(S)) V). At the end out = O / l and
** lse = m + log l. In causal mode the key loop stops at the last key any
** query of the tile can see (emc_causal_key_end), so tiles wholly in the
** future are never touched. Shaw's key term adds rel_k (staged per tile
** diagonal) to the key in q . k, its value term rel_v to the value in P V.
** A traced variant's programs (XP instances: also the core's lowering of
** ALiBi, bias tables, windows, blocks and global tokens) change each
** visible score, hide keys and start each row with its sink logit; key
** tiles the mask's block map marks empty for the whole query tile are
** skipped (cuda_attention.cuh). Inputs may be bfloat16; everything is
** computed in float. See cuda_attention.cuh for the thread layout, the
** mask rule and the layout of Shaw's tables.
*/
#include "cuda_attention.cuh"

template <class T, int NCH, bool XP>
__global__ void __launch_bounds__(ATT_T *ATT_T)
attention_forward_kernel(AttParams p, int64_t q_tiles) {
  __shared__ float Qs[ATT_BQ][ATT_DC + 1];
  __shared__ float Ks[ATT_BK][ATT_DC + 1];
  __shared__ float Vs[ATT_BK][ATT_DC + 1];
  __shared__ float Ps[ATT_BQ][ATT_BK + 1];
  __shared__ float Xs[ATT_NREL][ATT_DC + 1]; /* rel_k or rel_v chunk, by diagonal */
  __shared__ int rowt[ATT_NREL];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t bh = blockIdx.x / q_tiles, q0 = (blockIdx.x % q_tiles) * ATT_BQ;
  const int64_t b = bh / p.H, h = bh % p.H;
  const T *Q = (const T *)p.q + bh * p.Lq * p.dk;
  const T *K = (const T *)p.k + att_kvh(p, bh) * p.Lk * p.dk;
  const T *V = (const T *)p.v + att_kvh(p, bh) * p.Lk * p.dv;

  float o[4][NCH], m[4], l[4];
  double R[XP ? ATT_XMAX_INS : 1]; /* a traced program's registers */
#pragma unroll
  for (int a = 0; a < 4; a++) {
    m[a] = -INFINITY;
    l[a] = 0.0f;
    /* a sink starts the row as one more logit, without a value */
    const int64_t i = q0 + ty + 16 * a;
    if (XP && p.x_sink && i < p.Lq && att_xrun(p.x, ATT_XSINK, b + 1, h + 1, i + p.shift + 1, 1, 0.0, R)) {
      m[a] = (float)att_xout(p.x, ATT_XSINK, 0, R);
      l[a] = m[a] == -INFINITY ? 0.0f : 1.0f;
    }
#pragma unroll
    for (int c = 0; c < NCH; c++) o[a][c] = 0.0f;
  }

  const int64_t kend = p.causal ? emc_causal_key_end(q0, ATT_BQ, p.Lq, p.Lk) : p.Lk;
  for (int64_t k0 = 0; k0 < kend; k0 += ATT_BK) {
    const int xt = XP ? att_xtile(p, bh, q0, k0) : EM_XTILE_FULL;
    if (xt == EM_XTILE_EMPTY) continue; /* the traced mask's map: uniform over the block */
    __syncthreads(); /* the previous tile's readers of Ps, Xs, rowt are done */
    if (p.rel_row) {
      att_tile_rel(p, q0, k0, rowt);
      __syncthreads();
    }
    /* S = Q K^T over the head dim, 16 columns at a time. */
    float s[4][4];
#pragma unroll
    for (int a = 0; a < 4; a++)
#pragma unroll
      for (int c = 0; c < 4; c++) s[a][c] = 0.0f;
    for (int64_t c0 = 0; c0 < p.dk; c0 += ATT_DC) {
      __syncthreads();
      att_load_chunk<T>(Qs, Q, p.Lq, p.dk, q0, c0);
      att_load_chunk<T>(Ks, K, p.Lk, p.dk, k0, c0);
      if (p.rel_k) att_load_rel<T>(Xs, p.rel_k, p.dk, rowt, c0);
      __syncthreads();
      /* Shaw: s = q . (k + rel_k[row(i, j)]), diagonal kj - qi + 63 */
      att_chunk_dot<false>(s, Qs, Ks, p.rel_k ? Xs : nullptr);
    }
    /* Scale, programs, bias and masks, then the online softmax of each row. */
#pragma unroll
    for (int a = 0; a < 4; a++) {
      const int64_t i = q0 + ty + 16 * a;
      float tile_max = -INFINITY;
#pragma unroll
      for (int c = 0; c < 4; c++) {
        const int64_t j = k0 + tx + 16 * c;
        s[a][c] = att_masked(p, b, i, j) ? -INFINITY
                  : XP ? att_xscore<false>(p, s[a][c], b, h, i, j, xt == EM_XTILE_PARTIAL, R)
                       : att_score(p, s[a][c], b, h, i, j);
        tile_max = fmaxf(tile_max, s[a][c]);
      }
      const float m_new = fmaxf(m[a], att_row_max(tile_max));
      const float r = emc_online_rescale(m[a], m_new), base = emc_online_base(m_new);
      float row = 0.0f;
#pragma unroll
      for (int c = 0; c < 4; c++) {
        float pr = expf(s[a][c] - base);
        row += pr;
        Ps[ty + 16 * a][tx + 16 * c] = pr * att_dropout(p, bh, i, k0 + tx + 16 * c);
      }
      l[a] = l[a] * r + att_row_sum(row);
      m[a] = m_new;
#pragma unroll
      for (int c = 0; c < NCH; c++) o[a][c] *= r;
    }
    __syncthreads();
    /* O += P V, 16 value columns at a time; the thread's column is ch*16+tx. */
#pragma unroll
    for (int ch = 0; ch < NCH; ch++) {
      if (ch * ATT_DC >= p.dv) break; /* the same for every thread */
      __syncthreads();
      att_load_chunk<T>(Vs, V, p.Lk, p.dv, k0, ch * ATT_DC);
      if (p.rel_v) att_load_rel<T>(Xs, p.rel_v, p.dv, rowt, ch * ATT_DC);
      __syncthreads();
      if (p.rel_v) {
        /* Shaw: O += P (v + rel_v[row(i, j)]) */
#pragma unroll 8
        for (int c = 0; c < ATT_BK; c++) {
          const float vv = Vs[c][tx];
#pragma unroll
          for (int a = 0; a < 4; a++)
            o[a][ch] += Ps[ty + 16 * a][c] * (vv + Xs[c - ty - 16 * a + ATT_BQ - 1][tx]);
        }
        continue;
      }
#pragma unroll 8
      for (int c = 0; c < ATT_BK; c++) {
        const float vv = Vs[c][tx];
#pragma unroll
        for (int a = 0; a < 4; a++) o[a][ch] += Ps[ty + 16 * a][c] * vv;
      }
    }
  }

  /* out = O / l (0 for a row with nothing visible), lse = m + log l. */
  T *out = (T *)p.out + bh * p.Lq * p.dv;
#pragma unroll
  for (int a = 0; a < 4; a++) {
    const int64_t i = q0 + ty + 16 * a;
    if (i >= p.Lq) continue;
    const float inv = l[a] > 0.0f ? 1.0f / l[a] : 0.0f;
#pragma unroll
    for (int ch = 0; ch < NCH; ch++) {
      const int64_t col = ch * ATT_DC + tx;
      if (col < p.dv) out[i * p.dv + col] = from_acc<T>(o[a][ch] * inv);
    }
    if (tx == 0) p.lse[bh * p.Lq + i] = emc_attn_lse(m[a], l[a]);
  }
}

template <class T, int NCH>
static void launch_forward(emc_device *d, const AttParams &p) {
  int64_t q_tiles = emc_attn_tiles(p.Lq, ATT_BQ);
  auto k = p.x ? attention_forward_kernel<T, NCH, true> : attention_forward_kernel<T, NCH, false>;
  EMC_LAUNCH(k, emc_grid(p.B * p.H * q_tiles), dim3(ATT_T, ATT_T), d->stream, p, q_tiles);
}

template <class T>
static void launch_forward_t(emc_device *d, const AttParams &p) {
  switch (att_nch(p.dk, p.dv)) {
    case 4: launch_forward<T, 4>(d, p); break;
    default: launch_forward<T, 16>(d, p); break;
  }
}

extern "C" em_status emc_attention_forward(int device, const em_attention_args *args) {
  const char *kernel = "attention_forward";
  AttParams p;
  em_status s = att_prepare(kernel, args, false, &p);
  if (s || p.B * p.H * p.Lq == 0) return s;
  if (p.B * p.H * emc_attn_tiles(p.Lq, ATT_BQ) > 0x7fffffffLL)
    return em_error(EM_ERR_UNSUPPORTED, "cuda %s: B*H*Lq/64 = %lld blocks exceed the grid limit",
                    kernel, (long long)(p.B * p.H * emc_attn_tiles(p.Lq, ATT_BQ)));
  emc_device *d = NULL;
  if ((s = emc_device_get(device, kernel, &d))) return s;
  void *xbuf = NULL;
  if ((s = att_xupload(d, kernel, args, NULL, &p, &xbuf))) return s;
  if (args->dtype == EM_F32) launch_forward_t<float>(d, p);
  else launch_forward_t<bf16_t>(d, p);
  s = emc_launch_status(kernel);
  if (xbuf) {
    if (!s) s = att_xreport(d, kernel, args, (const AttXDev *)xbuf);
    emc_scratch_free(d, xbuf);
  }
  return s;
}
