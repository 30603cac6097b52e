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

template <class T, int NCH>
__global__ void __launch_bounds__(ATT_T *ATT_T)
attention_backward_kernel(AttParams p, int64_t k_tiles) {
  __shared__ float As[64][ATT_DC + 1];        /* chunks of K or V (key rows) */
  __shared__ float Bs[64][ATT_DC + 1];        /* chunks of Q or dO (query rows) */
  __shared__ float PdT[ATT_BK][ATT_BQ + 1];   /* dropped probabilities, key-major */
  __shared__ float dST[ATT_BK][ATT_BQ + 1];   /* dS, key-major */
  __shared__ float Ds[ATT_BQ], Ls[ATT_BQ];
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * ATT_T + tx;
  const int64_t bh = blockIdx.x / k_tiles, k0 = (blockIdx.x % k_tiles) * ATT_BK;
  const int64_t b = bh / p.H, h = bh % p.H;
  const T *Q = (const T *)p.q + bh * p.Lq * p.dk;
  const T *K = (const T *)p.k + bh * p.Lk * p.dk;
  const T *V = (const T *)p.v + bh * p.Lk * p.dv;
  const T *dO = (const T *)p.dout + bh * p.Lq * p.dv;
  float *dQ = p.dq_acc + bh * p.Lq * p.dk;

  float dk[4][NCH], dv[4][NCH];
#pragma unroll
  for (int a = 0; a < 4; a++)
#pragma unroll
    for (int c = 0; c < NCH; c++) dk[a][c] = dv[a][c] = 0.0f;

  int64_t qbegin = 0;
  if (p.causal) qbegin = emc_causal_query_begin(k0, p.Lq, p.Lk) / ATT_BQ * ATT_BQ;
  for (int64_t q0 = qbegin; q0 < p.Lq; q0 += ATT_BQ) {
    __syncthreads(); /* the previous tile is done with Ds, Ls, PdT, dST */
    if (tid < ATT_BQ) {
      int64_t i = q0 + tid;
      Ds[tid] = i < p.Lq ? p.D[bh * p.Lq + i] : 0.0f;
      Ls[tid] = i < p.Lq ? p.lse_in[bh * p.Lq + i] : INFINITY;
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
      __syncthreads();
#pragma unroll 4
      for (int kk = 0; kk < ATT_DC; kk++)
#pragma unroll
        for (int a = 0; a < 4; a++)
#pragma unroll
          for (int c = 0; c < 4; c++) s[a][c] += As[ty + 16 * a][kk] * Bs[tx + 16 * c][kk];
    }
    for (int64_t c0 = 0; c0 < p.dv; c0 += ATT_DC) {
      __syncthreads();
      att_load_chunk<T>(As, V, p.Lk, p.dv, k0, c0);
      att_load_chunk<T>(Bs, dO, p.Lq, p.dv, q0, c0);
      __syncthreads();
#pragma unroll 4
      for (int kk = 0; kk < ATT_DC; kk++)
#pragma unroll
        for (int a = 0; a < 4; a++)
#pragma unroll
          for (int c = 0; c < 4; c++) dp[a][c] += As[ty + 16 * a][kk] * Bs[tx + 16 * c][kk];
    }
    __syncthreads(); /* Ds and Ls are visible even when dk and dv are 0 */
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
          pr = expf(att_score(p, s[a][c], b, h, i, j) - Ls[qi]);
          z = att_dropout(p, bh, i, j);
        }
        PdT[ty + 16 * a][qi] = pr * z;
        dST[ty + 16 * a][qi] = pr * (dp[a][c] * z - Ds[qi]);
      }
    }
    __syncthreads();
    /* dV += Pd^T dO and dK += dS^T Q, 16 columns at a time. */
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
    }
    /* dQ += scale * dS K: here the thread owns queries ty + 16a. */
    for (int64_t c0 = 0; c0 < p.dk; c0 += ATT_DC) {
      __syncthreads();
      att_load_chunk<T>(As, K, p.Lk, p.dk, k0, c0);
      __syncthreads();
      const int64_t col = c0 + tx;
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

/* dq = the float accumulator, in the storage type. */
template <class T>
__global__ void attention_dq_convert(int64_t n, const float *acc, T *dq) {
  EMC_GRID_LOOP(i, n) dq[i] = from_acc<T>(acc[i]);
}

template <class T, int NCH>
static void launch_backward(emc_device *d, const AttParams &p) {
  int64_t k_tiles = emc_attn_tiles(p.Lk, ATT_BK);
  auto k = attention_backward_kernel<T, NCH>;
  EMC_LAUNCH(k, emc_grid(p.B * p.H * k_tiles), dim3(ATT_T, ATT_T), d->stream, p, k_tiles);
}

template <class T>
static em_status run_backward(emc_device *d, AttParams &p) {
  const char *kernel = "attention_backward";
  const int64_t rows = p.B * p.H * p.Lq;
  const size_t dq_bytes = (size_t)rows * (size_t)p.dk * sizeof(float);
  const bool is_float = sizeof(T) == sizeof(float);
  void *D = NULL, *acc = NULL;
  em_status s = emc_scratch(d, (size_t)rows * sizeof(float), kernel, &D);
  if (s) return s;
  if (!is_float && (s = emc_scratch(d, dq_bytes, kernel, &acc))) {
    emc_scratch_free(d, D);
    return s;
  }
  p.D = (float *)D;
  p.dq_acc = is_float ? (float *)p.dq : (float *)acc;
  cudaError_t e = cudaMemsetAsync(p.dq_acc, 0, dq_bytes, d->stream);
  if (e == cudaSuccess) {
    emc_rows_plan rp = emc_plan_rows(rows, 32); /* a warp per row */
    auto kd = attention_rowdot_kernel<T>;
    EMC_LAUNCH(kd, emc_grid(rp.blocks), dim3(32, rp.rows_per_block), d->stream, rows, p.dv,
               (const T *)p.dout, (const T *)p.out, p.D);
    switch (att_nch(p.dk, p.dv)) {
      case 4: launch_backward<T, 4>(d, p); break;
      default: launch_backward<T, 16>(d, p); break;
    }
    if (!is_float) {
      auto kc = attention_dq_convert<T>;
      int64_t n = rows * p.dk;
      EMC_LAUNCH(kc, emc_grid(emc_blocks_for(n, EMC_THREADS)), EMC_THREADS, d->stream, n,
                 (const float *)acc, (T *)p.dq);
    }
  }
  emc_scratch_free(d, D); /* stream ordered */
  if (acc) emc_scratch_free(d, acc);
  return e == cudaSuccess ? emc_launch_status(kernel) : emc_cuda_error(e, kernel);
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
    return EM_OK;
  }
  if (p.B * p.H * emc_attn_tiles(p.Lk, ATT_BK) > 0x7fffffffLL)
    return em_error(EM_ERR_UNSUPPORTED, "cuda %s: B*H*Lk/64 = %lld blocks exceed the grid limit",
                    kernel, (long long)(p.B * p.H * emc_attn_tiles(p.Lk, ATT_BK)));
  if (args->dtype == EM_F32) return run_backward<float>(d, p);
  return run_backward<bf16_t>(d, p);
}
