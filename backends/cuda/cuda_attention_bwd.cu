/*
** cuda_attention_bwd.cu -- fused scaled-dot-product attention, backward
** (FlashAttention-2's order of work).
**
** The probabilities are recomputed from the saved lse, P = exp(S - lse),
** tile by tile; nothing of size Lq x Lk is stored. With Z the dropout
** factors, Pd = P * Z, D = rowsum(dO * O) (computed first, one warp per
** row) and dS = P * (Z * dO V^T - D):
**   dV = Pd^T dO,   dK = scale * dS^T Q,   dQ = scale * dS K.
** A block owns 64 keys of one (batch, head): it walks the query tiles that
** can see them (in causal mode from emc_causal_query_begin on), keeps dK
** and dV in registers, and adds its share of dQ into a float accumulator
** with atomicAdd (dq itself for float32; a scratch buffer, converted at
** the end, for bfloat16). Inside a block the score tile is key-major: the
** thread (tx, ty) owns keys ty + 16a and queries tx + 16b.
**
** Traced variants (XP instances, cuda_attention.cuh): dS is multiplied by
** the score gradient program's d/ds, its d/d(load) terms go into the
** learned captures' gradients by atomicAdd, and a kernel after the
** backward adds the sinks' share per row.
**
** Query tiles the mask's block map marks empty for the block's keys are
** skipped.
**
** Shaw's terms: the key term is q . (k + rel_k[row]) in S and dQ, the
** value term dO . (v + rel_v[row]) in dP, and the tables' gradients are
** sums over the tile's diagonals added with atomicAdd into float
** accumulators (cuda_attention.cuh): d rel_k[row] += scale * sum dS q,
** d rel_v[row] += sum Pd dO. Shared memory stays under the 48 KB of static
** allocation because the staged rows and the diagonal sums reuse PdT and
** As while those are free.
*/
#include "cuda_attention.cuh"

/* D[r] = sum_c dO[r, c] * O[r, c], one warp per row of [B*H*Lq, dv]. */
template <class T>
__global__ void attention_rowdot_kernel(int64_t rows, int64_t dv, const T *dout, const T *out,
                                        float *D) {
  EMC_ROW_LOOP(r, rows) {
    float acc = 0.0f;
    for (int64_t c = threadIdx.x; c < dv; c += blockDim.x)
      acc += (float)to_acc(dout[r * dv + c]) * (float)to_acc(out[r * dv + c]);
    acc = warp_sum(acc);
    if (threadIdx.x == 0) D[r] = acc;
  }
}

/* A traced score's backward at one element, with R the registers of its
** score gradient program: ds * d score/d(load g) into each learned
** capture's gradient at the load's element; returns the raw score's
** gradient, ds * d score/ds. */
static __device__ ATT_NOINLINE float att_xscore_grad(AttXDev *x, float ds, const double *R) {
  const AttXProg &P = x->prog[ATT_XSCORE_GRAD];
  const em_xins *ins = reinterpret_cast<const em_xins *>(x + 1) + P.ins0;
  for (int g = 0; g < P.n_grad; g++) {
    const em_xins &in = ins[P.grad_load[g]];
    float *G = x->g_caps[in.cap];
    if (!G) continue;
    const em_xcap *cp = &x->caps[in.cap];
    double idx[EM_EXPR_MAX_DIMS];
    for (int d = 0; d < cp->ndim; d++) idx[d] = R[in.arg[d]];
    const int64_t off = em_xcap_offset(cp, idx); /* checked when the program ran */
    if (off >= 0) atomicAdd(&G[off], ds * (float)R[P.out[2 + g]]);
  }
  return ds * (float)R[P.out[1]];
}

/* The sinks' gradient: row r's sink logit took exp(sink - lse_r) of the
** softmax, so d sink = -exp(sink - lse_r) D_r, added into the learned
** captures at the sink program's loads (sink gradient program: out[0]
** the sink, out[2+g] d sink/d(load g)). */
__global__ void attention_sink_grad_kernel(AttParams p, int64_t rows) {
  EMC_GRID_LOOP(r, rows) {
    const int64_t bh = r / p.Lq, i = r % p.Lq;
    double R[ATT_XMAX_INS];
    if (!att_xrun(p.x, ATT_XSINK_GRAD, bh / p.H + 1, bh % p.H + 1, i + p.shift + 1, 1, 0.0, R))
      continue;
    const AttXProg &P = p.x->prog[ATT_XSINK_GRAD];
    const em_xins *ins = reinterpret_cast<const em_xins *>(p.x + 1) + P.ins0;
    const float sink = (float)R[P.out[0]];
    const float dsink = -expf(sink - p.lse_in[r]) * p.D[r];
    for (int g = 0; g < P.n_grad; g++) {
      const em_xins &in = ins[P.grad_load[g]];
      float *G = p.x->g_caps[in.cap];
      if (!G) continue;
      const em_xcap *cp = &p.x->caps[in.cap];
      double idx[EM_EXPR_MAX_DIMS];
      for (int d = 0; d < cp->ndim; d++) idx[d] = R[in.arg[d]];
      const int64_t off = em_xcap_offset(cp, idx);
      if (off >= 0) atomicAdd(&G[off], dsink * (float)R[P.out[2 + g]]);
    }
  }
}

template <class T, int NCH, bool XP>
__global__ void __launch_bounds__(ATT_T *ATT_T)
attention_backward_kernel(AttParams p, int64_t k_tiles) {
  __shared__ float As[64][ATT_DC + 1];        /* chunks of K or V (key rows) */
  __shared__ float Bs[64][ATT_DC + 1];        /* chunks of Q or dO (query rows) */
  __shared__ float PdT[ATT_BK][ATT_BQ + 1];   /* dropped probabilities, key-major */
  __shared__ float dST[ATT_BK][ATT_BQ + 1];   /* dS, key-major */
  __shared__ float Ds[ATT_BQ], Ls[ATT_BQ];
  __shared__ int rowt[ATT_NREL];
  /* Shaw's staged rows (score and dQ phases) and the d rel_k diagonal sums
  ** live in PdT when it is not holding this tile's probabilities; the
  ** d rel_v sums in As, which the dV loop does not use. */
  float(*Xs)[ATT_DC + 1] = reinterpret_cast<float(*)[ATT_DC + 1]>(&PdT[0][0]);
  float(*Gv)[ATT_DC + 1] = As;
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * ATT_T + tx;
  const int64_t bh = blockIdx.x / k_tiles, k0 = (blockIdx.x % k_tiles) * ATT_BK;
  const int64_t b = bh / p.H, h = bh % p.H;
  const T *Q = (const T *)p.q + bh * p.Lq * p.dk;
  const T *K = (const T *)p.k + att_kvh(p, bh) * p.Lk * p.dk;
  const T *V = (const T *)p.v + att_kvh(p, bh) * p.Lk * p.dv;
  const T *dO = (const T *)p.dout + bh * p.Lq * p.dv;
  float *dQ = p.dq_acc + bh * p.Lq * p.dk;

  float dk[4][NCH], dv[4][NCH];
  double R[XP ? ATT_XMAX_INS : 1]; /* a traced program's registers */
#pragma unroll
  for (int a = 0; a < 4; a++)
#pragma unroll
    for (int c = 0; c < NCH; c++) dk[a][c] = dv[a][c] = 0.0f;

  int64_t qbegin = 0;
  if (p.causal) qbegin = emc_causal_query_begin(k0, p.Lq, p.Lk) / ATT_BQ * ATT_BQ;
  for (int64_t q0 = qbegin; q0 < p.Lq; q0 += ATT_BQ) {
    const int xt = XP ? att_xtile(p, bh, q0, k0) : EM_XTILE_FULL;
    if (xt == EM_XTILE_EMPTY) continue; /* the traced mask's map: uniform over the block */
    __syncthreads(); /* the previous tile is done with Ds, Ls, PdT, dST, rowt */
    if (tid < ATT_BQ) {
      int64_t i = q0 + tid;
      Ds[tid] = i < p.Lq ? p.D[bh * p.Lq + i] : 0.0f;
      Ls[tid] = i < p.Lq ? p.lse_in[bh * p.Lq + i] : INFINITY;
    }
    if (p.rel_row) {
      att_tile_rel(p, q0, k0, rowt);
      __syncthreads();
    }
    /* S^T = K Q^T and dP^T = V dO^T, key-major. */
    float s[4][4], dp[4][4];
#pragma unroll
    for (int a = 0; a < 4; a++)
#pragma unroll
      for (int c = 0; c < 4; c++) s[a][c] = dp[a][c] = 0.0f;
    for (int64_t c0 = 0; c0 < p.dk; c0 += ATT_DC) {
      __syncthreads();
      att_load_chunk<T>(As, K, p.Lk, p.dk, k0, c0);
      att_load_chunk<T>(Bs, Q, p.Lq, p.dk, q0, c0);
      if (p.rel_k) att_load_rel<T>(Xs, p.rel_k, p.dk, rowt, c0);
      __syncthreads();
      att_chunk_dot<true>(s, Bs, As, p.rel_k ? Xs : nullptr);
    }
    for (int64_t c0 = 0; c0 < p.dv; c0 += ATT_DC) {
      __syncthreads();
      att_load_chunk<T>(As, V, p.Lk, p.dv, k0, c0);
      att_load_chunk<T>(Bs, dO, p.Lq, p.dv, q0, c0);
      if (p.rel_v) att_load_rel<T>(Xs, p.rel_v, p.dv, rowt, c0);
      __syncthreads();
      att_chunk_dot<true>(dp, Bs, As, p.rel_v ? Xs : nullptr);
    }
    __syncthreads(); /* Ds and Ls are visible even when dk and dv are 0; Xs is read */
    /* P, Pd and dS for the tile. */
#pragma unroll
    for (int a = 0; a < 4; a++) {
      const int64_t j = k0 + ty + 16 * a;
#pragma unroll
      for (int c = 0; c < 4; c++) {
        const int qi = tx + 16 * c;
        const int64_t i = q0 + qi;
        float pr = 0.0f, z = 1.0f;
        if (!att_masked(p, b, i, j)) {
          float sc = XP ? att_xscore<true>(p, s[a][c], b, h, i, j, xt == EM_XTILE_PARTIAL, R)
                        : att_score(p, s[a][c], b, h, i, j);
          pr = expf(sc - Ls[qi]);
          z = att_dropout(p, bh, i, j);
        }
        PdT[ty + 16 * a][qi] = pr * z;
        float ds = pr * (dp[a][c] * z - Ds[qi]);
        if (XP && p.x_score_grad && ds != 0.0f) /* R holds the score gradient program's registers */
          ds = att_xscore_grad(p.x, ds, R);
        dST[ty + 16 * a][qi] = ds;
      }
    }
    __syncthreads();
    /* dV += Pd^T dO and dK += dS^T Q, 16 columns at a time (with the
    ** diagonal sums of Shaw's table gradients). */
#pragma unroll
    for (int ch = 0; ch < NCH; ch++) {
      if (ch * ATT_DC >= p.dv) break;
      __syncthreads();
      att_load_chunk<T>(Bs, dO, p.Lq, p.dv, q0, ch * ATT_DC);
      __syncthreads();
#pragma unroll 4
      for (int qi = 0; qi < ATT_BQ; qi++) {
        const float g = Bs[qi][tx];
#pragma unroll
        for (int a = 0; a < 4; a++) dv[a][ch] += PdT[ty + 16 * a][qi] * g;
      }
      if (p.g_rel_v) att_diag_scatter(PdT, Bs, rowt, Gv, ATT_BK, p.g_rel_v, p.dv, ch * ATT_DC, 1.0f);
    }
#pragma unroll
    for (int ch = 0; ch < NCH; ch++) {
      if (ch * ATT_DC >= p.dk) break;
      __syncthreads();
      att_load_chunk<T>(Bs, Q, p.Lq, p.dk, q0, ch * ATT_DC);
      __syncthreads();
#pragma unroll 4
      for (int qi = 0; qi < ATT_BQ; qi++) {
        const float qv = Bs[qi][tx];
#pragma unroll
        for (int a = 0; a < 4; a++) dk[a][ch] += dST[ty + 16 * a][qi] * qv;
      }
      if (p.g_rel_k) att_diag_scatter(dST, Bs, rowt, Xs, ATT_NREL, p.g_rel_k, p.dk, ch * ATT_DC, p.scale);
    }
    /* dQ += scale * dS K: here the thread owns queries ty + 16a. */
    for (int64_t c0 = 0; c0 < p.dk; c0 += ATT_DC) {
      __syncthreads();
      att_load_chunk<T>(As, K, p.Lk, p.dk, k0, c0);
      if (p.rel_k) att_load_rel<T>(Xs, p.rel_k, p.dk, rowt, c0);
      __syncthreads();
      const int64_t col = c0 + tx;
      if (p.rel_k) {
#pragma unroll
        for (int a = 0; a < 4; a++) {
          const int qi = ty + 16 * a;
          float acc = 0.0f;
#pragma unroll 8
          for (int kj = 0; kj < ATT_BK; kj++)
            acc += dST[kj][qi] * (As[kj][tx] + Xs[kj - qi + ATT_BQ - 1][tx]);
          if (q0 + qi < p.Lq && col < p.dk) atomicAdd(&dQ[(q0 + qi) * p.dk + col], acc * p.scale);
        }
        continue;
      }
#pragma unroll
      for (int a = 0; a < 4; a++) {
        const int qi = ty + 16 * a;
        float acc = 0.0f;
#pragma unroll 8
        for (int kj = 0; kj < ATT_BK; kj++) acc += dST[kj][qi] * As[kj][tx];
        if (q0 + qi < p.Lq && col < p.dk) atomicAdd(&dQ[(q0 + qi) * p.dk + col], acc * p.scale);
      }
    }
  }

  /* This block's keys: dK (scaled) and dV, written once. */
  T *gk = (T *)p.dk_ + bh * p.Lk * p.dk;
  T *gv = (T *)p.dv_ + bh * p.Lk * p.dv;
#pragma unroll
  for (int a = 0; a < 4; a++) {
    const int64_t j = k0 + ty + 16 * a;
    if (j >= p.Lk) continue;
#pragma unroll
    for (int ch = 0; ch < NCH; ch++) {
      const int64_t col = ch * ATT_DC + tx;
      if (col < p.dk) gk[j * p.dk + col] = from_acc<T>(dk[a][ch] * p.scale);
      if (col < p.dv) gv[j * p.dv + col] = from_acc<T>(dv[a][ch]);
    }
  }
}

/* dq (or a gradient of Shaw's tables) = its float accumulator, in the storage type. */
template <class T>
__global__ void attention_dq_convert(int64_t n, const float *acc, T *dq) {
  EMC_GRID_LOOP(i, n) dq[i] = from_acc<T>(acc[i]);
}

template <class T, int NCH>
static void launch_backward(emc_device *d, const AttParams &p) {
  int64_t k_tiles = emc_attn_tiles(p.Lk, ATT_BK);
  auto k = p.x ? attention_backward_kernel<T, NCH, true> : attention_backward_kernel<T, NCH, false>;
  EMC_LAUNCH(k, emc_grid(p.B * p.H * k_tiles), dim3(ATT_T, ATT_T), d->stream, p, k_tiles);
}

/* The float accumulators of the backward: dq and the wanted gradients of
** Shaw's tables. float32 accumulates into the outputs themselves; bfloat16
** into scratch, converted at the end. */
enum { ATT_ACC_DQ, ATT_ACC_REL_K, ATT_ACC_REL_V, ATT_ACCS };
struct AttAccum {
  float *acc[ATT_ACCS];   /* NULL: not wanted */
  void *out[ATT_ACCS];    /* where they end up (storage type) */
  int64_t n[ATT_ACCS];    /* elements */
  void *scratch[ATT_ACCS];
};

template <class T>
static em_status run_backward(emc_device *d, AttParams &p, const em_attention_args *a) {
  const char *kernel = "attention_backward";
  const int64_t rows = p.B * p.H * p.Lq;
  const bool is_float = sizeof(T) == sizeof(float);
  AttAccum ac = {};
  ac.out[ATT_ACC_DQ] = p.dq, ac.n[ATT_ACC_DQ] = rows * p.dk;
  if (a->d_rel_k && p.rel_k) ac.out[ATT_ACC_REL_K] = a->d_rel_k, ac.n[ATT_ACC_REL_K] = a->n_rel * p.dk;
  if (a->d_rel_v && p.rel_v) ac.out[ATT_ACC_REL_V] = a->d_rel_v, ac.n[ATT_ACC_REL_V] = a->n_rel * p.dv;
  void *D = NULL;
  em_status s = emc_scratch(d, (size_t)rows * sizeof(float), kernel, &D);
  cudaError_t e = cudaSuccess;
  for (int t = 0; t < ATT_ACCS && !s; t++) {
    if (!ac.out[t]) continue;
    if (is_float) ac.acc[t] = (float *)ac.out[t];
    else if (!(s = emc_scratch(d, (size_t)ac.n[t] * sizeof(float), kernel, &ac.scratch[t])))
      ac.acc[t] = (float *)ac.scratch[t];
    if (!s && e == cudaSuccess)
      e = cudaMemsetAsync(ac.acc[t], 0, (size_t)ac.n[t] * sizeof(float), d->stream);
  }
  p.D = (float *)D;
  p.dq_acc = ac.acc[ATT_ACC_DQ];
  p.g_rel_k = ac.acc[ATT_ACC_REL_K], p.g_rel_v = ac.acc[ATT_ACC_REL_V];
  /* a traced variant: the learned captures' gradients (float, the compute
  ** dtype) are sums of atomicAdds, so they start at zero */
  float *g_caps[EM_EXPR_MAX_CAPS] = {NULL};
  for (int c = 0; c < a->n_caps && a->d_caps && !s && e == cudaSuccess; c++) {
    if (!a->d_caps[c] || a->caps[c].dtype != EM_F32) continue;
    g_caps[c] = (float *)a->d_caps[c];
    e = cudaMemsetAsync(g_caps[c], 0, (size_t)att_xcap_numel(&a->caps[c]) * sizeof(float), d->stream);
  }
  void *xbuf = NULL;
  if (!s && e == cudaSuccess) s = att_xupload(d, kernel, a, g_caps, &p, &xbuf);
  if (!s && e == cudaSuccess) {
    emc_rows_plan rp = emc_plan_rows(rows, 32); /* a warp per row */
    auto kd = attention_rowdot_kernel<T>;
    EMC_LAUNCH(kd, emc_grid(rp.blocks), dim3(32, rp.rows_per_block), d->stream, rows, p.dv,
               (const T *)p.dout, (const T *)p.out, p.D);
    switch (att_nch(p.dk, p.dv)) {
      case 4: launch_backward<T, 4>(d, p); break;
      default: launch_backward<T, 16>(d, p); break;
    }
    if (p.x_sink_grad) {
      auto ks = attention_sink_grad_kernel;
      EMC_LAUNCH(ks, emc_grid(emc_blocks_for(rows, EMC_THREADS)), EMC_THREADS, d->stream, p, rows);
    }
    for (int t = 0; t < ATT_ACCS && !is_float; t++) {
      if (!ac.acc[t]) continue;
      auto kc = attention_dq_convert<T>;
      EMC_LAUNCH(kc, emc_grid(emc_blocks_for(ac.n[t], EMC_THREADS)), EMC_THREADS, d->stream,
                 ac.n[t], (const float *)ac.acc[t], (T *)ac.out[t]);
    }
  }
  if (!s && e == cudaSuccess) s = emc_launch_status(kernel);
  if (!s && e == cudaSuccess && xbuf) s = att_xreport(d, kernel, a, (const AttXDev *)xbuf);
  if (xbuf) emc_scratch_free(d, xbuf);
  if (D) emc_scratch_free(d, D); /* stream ordered */
  for (int t = 0; t < ATT_ACCS; t++)
    if (ac.scratch[t]) emc_scratch_free(d, ac.scratch[t]);
  if (s) return s;
  return e == cudaSuccess ? EM_OK : emc_cuda_error(e, kernel);
}

extern "C" em_status emc_attention_backward(int device, const em_attention_args *args) {
  const char *kernel = "attention_backward";
  AttParams p;
  em_status s = att_prepare(kernel, args, true, &p);
  if (s || p.B * p.H == 0) return s;
  emc_device *d = NULL;
  if ((s = emc_device_get(device, kernel, &d))) return s;
  if (p.Lq == 0 || p.Lk == 0) {
    /* No scores: every gradient is zero. */
    size_t el = em_dtype_size(args->dtype);
    size_t nq = (size_t)(p.B * p.H * p.Lq), nk = (size_t)(p.B * p.H * p.Lk);
    if (nq) EMC_CHECK(cudaMemsetAsync(p.dq, 0, nq * (size_t)p.dk * el, d->stream), kernel);
    if (nk) EMC_CHECK(cudaMemsetAsync(p.dk_, 0, nk * (size_t)p.dk * el, d->stream), kernel);
    if (nk) EMC_CHECK(cudaMemsetAsync(p.dv_, 0, nk * (size_t)p.dv * el, d->stream), kernel);
    /* and so are Shaw's tables' */
    void *g[2] = {p.rel_k ? args->d_rel_k : NULL, p.rel_v ? args->d_rel_v : NULL};
    const int64_t cols[2] = {p.dk, p.dv};
    for (int t = 0; t < 2; t++)
      if (g[t] && args->n_rel * cols[t] > 0)
        EMC_CHECK(cudaMemsetAsync(g[t], 0, (size_t)(args->n_rel * cols[t]) * el, d->stream), kernel);
    /* and the learned captures' (float: the compute dtype) */
    for (int c = 0; c < args->n_caps && args->d_caps; c++)
      if (args->d_caps[c] && att_xcap_numel(&args->caps[c]) > 0)
        EMC_CHECK(cudaMemsetAsync(args->d_caps[c], 0, (size_t)att_xcap_numel(&args->caps[c]) * sizeof(float),
                                  d->stream), kernel);
    return EM_OK;
  }
  if (p.B * p.H * emc_attn_tiles(p.Lk, ATT_BK) > 0x7fffffffLL)
    return em_error(EM_ERR_UNSUPPORTED, "cuda %s: B*H*Lk/64 = %lld blocks exceed the grid limit",
                    kernel, (long long)(p.B * p.H * emc_attn_tiles(p.Lk, ATT_BK)));
  if (args->dtype == EM_F32) return run_backward<float>(d, p, args);
  return run_backward<bf16_t>(d, p, args);
}
