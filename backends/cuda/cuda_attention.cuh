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
*/
#ifndef EMBER_CUDA_ATTENTION_CUH
#define EMBER_CUDA_ATTENTION_CUH

#include "cuda_kernels.cuh"

#define ATT_BQ EMC_ATT_BQ /* 64 queries per tile */
#define ATT_BK EMC_ATT_BK /* 64 keys per tile */
#define ATT_DC 16         /* head-dim columns per staged chunk */
#define ATT_T 16          /* threads along each side of the block */

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
  return p.causal && !emc_causal_visible(i, j, p.Lq, p.Lk);
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
  /* The declared terms (ABI 2: relative tables, ALiBi, block masks) are
  ** not in these kernels yet: decline, and the core composes the call. */
  if (a->rel_row || a->alibi_slopes || a->bias_table || a->rel_k || a->rel_v || a->mask_kind ||
      a->global)
    return em_error(EM_ERR_UNSUPPORTED,
                    "cuda %s: declared score terms and block masks are not in the fused kernel yet; "
                    "use the unfused path",
                    kernel);
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
