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
** Shaw's relative-position vectors (em_attention_args rel_row, rel_k,
** rel_v), the one declared term that reaches the kernel as such (ALiBi,
** bias tables, windows, blocks and global tokens come lowered by the core
** into the traced programs below). A 64 x 64 tile holds 127 relative
** positions: cell (query qi, key kj) of the tile at (q0, k0) has
** r = k0 - q0 - (Lk - Lq) + t - 63 with t = kj - qi + 63, its diagonal.
** So each tile first puts, per diagonal, the table row (rowt) in shared
** memory, and the tables are staged 16 columns at a time as 127 rows (one
** per diagonal) next to the K/V chunks: the key term is q . (k + rel_k[row]),
** the value term sums P (v + rel_v[row]). Their gradients are sums over
** diagonals, merged over runs of equal rows (a clipped distance covers
** most of a tile) and added with atomicAdd into float accumulators.
**
** Traced variants (ember_expr.h: programs written in Lua, lowered by
** lua/ember/variant.lua). The programs, the capture descriptors and an
** error record are copied to the device per call (AttXDev, a few KB; the
** captures' data is already there). Each thread runs a program per score
** it owns, scalar, with the registers in local memory, through
** ember_expr.h's element functions (em_xeval1, em_xcap_offset,
** em_xcap_read), in double as the core's reference does: the score program
** on s = scale * q.k first, then the bias, padding, causal rule and the
** mask program hide keys; the sink program starts each row's online
** softmax (m = sink, l = 1). The backward multiplies dS by d score/ds and
** adds dS * d score/d(load) into the learned captures' float gradients
** with atomicAdd; the sinks' gradient, -exp(sink - lse) D per row, is a
** kernel of its own. The mask's block map (made by the core on the host)
** skips empty tiles and the mask on full ones: a 64 x 64 tile combines
** the map's cells it covers (emc_attn_map_tile, cuda_plan.h). A load
** out of range or a NaN score is recorded (the first one) in the device
** record, which the host reads back after the kernel and reports; the
** score becomes -inf meanwhile. Programs are at most ATT_XMAX_INS
** instructions (registers are a local array): a longer one is
** EM_ERR_UNSUPPORTED, and the caller runs the variant densely.
** These are separate template instances (XP), so standard attention and
** Shaw's terms run kernels without the interpreter.
*/
#ifndef EMBER_CUDA_ATTENTION_CUH
#define EMBER_CUDA_ATTENTION_CUH

#include <stdlib.h>
#include <string.h>

#include "cuda_kernels.cuh"

#define ATT_BQ EMC_ATT_BQ /* 64 queries per tile */
#define ATT_BK EMC_ATT_BK /* 64 keys per tile */
#define ATT_DC 16         /* head-dim columns per staged chunk */
#define ATT_T 16          /* threads along each side of the block */
#define ATT_NREL (ATT_BQ + ATT_BK - 1) /* relative positions (diagonals) of a tile */
#define ATT_XMAX_INS 64 /* instructions of a traced program on this kernel (registers per thread) */

/* The interpreter stays out of line: the score loops are unrolled 16 ways. */
#ifdef EMC_EMU
#define ATT_NOINLINE
#else
#define ATT_NOINLINE __noinline__
#endif

/* A traced variant's programs (the em_attention_args fields of the same
** names), in the order of AttXDev.prog. */
enum { ATT_XSCORE, ATT_XSCORE_GRAD, ATT_XMASK, ATT_XSINK, ATT_XSINK_GRAD, ATT_XPROGS };
/* The first failure of a program (as the CPU kernel's att_xerr): kind is
** 1 + the dim of a load's index out of range, or ATT_XERR_NAN. */
#define ATT_XERR_NAN 100
struct AttXErr {
  int kind, cap;
  long long b, h, q, k;
  double idx;
};
/* One program: its instructions start at ins0 of the shared array. */
struct AttXProg {
  int n, n_out, n_grad, ins0;
  int32_t out[EM_EXPR_MAX_OUT];
  int32_t grad_load[EM_EXPR_MAX_OUT - 2];
};
/* What the device reads of a traced variant, in one buffer followed by the
** instructions of every program (em_xins[]). */
struct AttXDev {
  AttXErr err;                       /* zero when uploaded; the kernels write it */
  em_xcap caps[EM_EXPR_MAX_CAPS];    /* data on the device (name: host, unread) */
  float *g_caps[EM_EXPR_MAX_CAPS];   /* backward: learned captures' gradients, or NULL */
  AttXProg prog[ATT_XPROGS];         /* n == 0: no such program */
};

/* Everything a kernel needs, passed by value. Pointers are typed as the
** storage type inside the kernels. */
struct AttParams {
  int64_t B, H, Lq, Lk, dk, dv;
  int64_t Hkv;           /* k and v heads: H, or fewer read in place (grouped-query attention) */
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
  /* Shaw's tables, in the storage type */
  const int64_t *rel_row; /* [Lq + Lk - 1] table row of r at r + Lk - 1; NULL when
                             neither rel_k nor rel_v is set */
  const void *rel_k, *rel_v;
  int64_t shift;          /* Lk - Lq: query i sits at key position i + shift */
  float *g_rel_k, *g_rel_v; /* backward: float accumulators, or NULL */
  /* a traced variant: its programs on the device (NULL: none), which of
  ** them are set (read by the host-side launch and uniformly by blocks),
  ** and the mask's block map (NULL: every tile partial) */
  AttXDev *x;
  bool x_score, x_score_grad, x_mask, x_sink, x_sink_grad;
  const uint8_t *map;
  int64_t map_grain, map_nk, map_sb, map_sh;
};

/* The k/v head that (batch, query head) bh reads: bh itself, or with
** grouped heads head h / (H / Hkv) of its batch (the CPU kernel's rule,
** att_kvh). Its gradients are written per query head; the core sums each
** group (attention_sdpa.c). */
__host__ __device__ __forceinline__ int64_t att_kvh(const AttParams &p, int64_t bh) {
  if (p.Hkv == p.H) return bh;
  return (bh / p.H) * p.Hkv + (bh % p.H) / (p.H / p.Hkv);
}

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
** tile edge? (A mask program hides more: att_xscore.) */
__device__ __forceinline__ bool att_masked(const AttParams &p, int64_t b, int64_t i, int64_t j) {
  if (i >= p.Lq || j >= p.Lk) return true;
  if (p.pad && p.pad[b * p.Lk + j]) return true;
  return p.causal && !emc_causal_visible(i, j, p.Lq, p.Lk);
}

/* ---- traced programs ---- */

/* Records the first failure; later ones are dropped. */
__device__ __forceinline__ void att_xfail(AttXDev *x, int kind, int cap, int64_t b, int64_t h,
                                          int64_t q, int64_t k, double idx) {
  if (atomicCAS(&x->err.kind, 0, kind) != 0) return;
  x->err.cap = cap, x->err.b = b, x->err.h = h, x->err.q = q, x->err.k = k, x->err.idx = idx;
}

/* Register a of instruction i's operands (0 for an operand the op does not
** take: em_expr_new checks only those it takes). */
__device__ __forceinline__ double att_xreg(const double *R, int32_t a, int i) {
  return a >= 0 && a < i ? R[a] : 0.0;
}

/* Runs program pr for the element (b, h, q, k) (1-based; q on the key axis)
** with score s; the registers land in R. False when a load left its
** capture (recorded). */
static __device__ ATT_NOINLINE bool att_xrun(AttXDev *x, int pr, int64_t b, int64_t h, int64_t q,
                                      int64_t k, double s, double *R) {
  const AttXProg &P = x->prog[pr];
  const em_xins *ins = reinterpret_cast<const em_xins *>(x + 1) + P.ins0;
  for (int i = 0; i < P.n; i++) {
    const em_xins &in = ins[i];
    double v;
    switch (in.op) {
      case EM_XOP_CONST: v = in.k; break;
      case EM_XOP_S: v = s; break;
      case EM_XOP_B: v = (double)b; break;
      case EM_XOP_H: v = (double)h; break;
      case EM_XOP_Q: v = (double)q; break;
      case EM_XOP_K: v = (double)k; break;
      case EM_XOP_LOAD: {
        const em_xcap *cp = &x->caps[in.cap];
        double idx[EM_EXPR_MAX_DIMS];
        for (int d = 0; d < cp->ndim; d++) idx[d] = att_xreg(R, in.arg[d], i);
        const int64_t o = em_xcap_offset(cp, idx);
        if (o < 0) {
          int d = 0;
          while (d < cp->ndim - 1 && idx[d] >= 1 && idx[d] <= (double)cp->shape[d] && idx[d] == floor(idx[d])) d++;
          att_xfail(x, 1 + d, in.cap, b, h, q, k, idx[d]);
          return false;
        }
        v = em_xcap_read(cp, o);
        break;
      }
      default:
        v = em_xeval1(in.op, att_xreg(R, in.arg[0], i), att_xreg(R, in.arg[1], i), att_xreg(R, in.arg[2], i));
    }
    R[i] = v;
  }
  return true;
}

/* Output o of the last run of program pr. */
__device__ __forceinline__ double att_xout(const AttXDev *x, int pr, int o, const double *R) {
  return R[x->prog[pr].out[o]];
}

/* The block map's class (EM_XTILE_*) of the tile at (q0, k0) of head bh:
** its cells combined (any grain works: a cell that is empty or full is so
** for the part of it inside the tile). */
__device__ __forceinline__ int att_xtile(const AttParams &p, int64_t bh, int64_t q0, int64_t k0) {
  if (!p.map) return p.x_mask ? EM_XTILE_PARTIAL : EM_XTILE_FULL;
  const uint8_t *m = p.map + (bh / p.H) * p.map_sb + (bh % p.H) * p.map_sh;
  const int64_t q1 = (q0 + ATT_BQ < p.Lq ? q0 + ATT_BQ : p.Lq) - 1;
  const int64_t k1 = (k0 + ATT_BK < p.Lk ? k0 + ATT_BK : p.Lk) - 1;
  return emc_attn_map_tile(m, p.map_nk, p.map_grain, q0, q1, k0, k1);
}

/* The score (i, j) of head (b, h) that padding and causality leave
** visible, with a traced variant: the score program on scale * q.k (or,
** with GRAD, the score gradient program, whose registers stay in R for the
** caller: out[1] d/ds, out[2+g] d/d load g), the bias, then the mask
** program where the tile is partial. -inf when hidden or failed. */
template <bool GRAD>
__device__ __forceinline__ float att_xscore(const AttParams &p, float dot, int64_t b, int64_t h,
                                            int64_t i, int64_t j, bool partial, double *R) {
  const int64_t q = i + p.shift + 1, k = j + 1;
  if (partial) { /* first, so that R keeps the score program's registers */
    if (!att_xrun(p.x, ATT_XMASK, b + 1, h + 1, q, k, 0.0, R)) return -INFINITY;
    if (att_xout(p.x, ATT_XMASK, 0, R) == 0) return -INFINITY;
  }
  float s = dot * p.scale;
  const int pr = GRAD && p.x_score_grad ? ATT_XSCORE_GRAD : ATT_XSCORE;
  if (p.x_score || (GRAD && p.x_score_grad)) {
    if (!att_xrun(p.x, pr, b + 1, h + 1, q, k, (double)s, R)) return -INFINITY;
    const double v = att_xout(p.x, pr, 0, R);
    if (v != v) {
      att_xfail(p.x, ATT_XERR_NAN, -1, b + 1, h + 1, q, k, 0.0);
      return -INFINITY;
    }
    s = (float)v;
  }
  if (p.bias)
    s += p.bias[b * p.bias_stride[0] + h * p.bias_stride[1] + i * p.bias_stride[2] +
                j * p.bias_stride[3]];
  return s;
}

/* The tile's table row of each diagonal t (-1 outside the sequences; see
** the top of this file). The caller synchronises after. */
__device__ __forceinline__ void att_tile_rel(const AttParams &p, int64_t q0, int64_t k0, int *rowt) {
  const int tid = threadIdx.y * ATT_T + threadIdx.x;
  for (int t = tid; t < ATT_NREL; t += ATT_T * ATT_T) {
    const int64_t r = k0 - q0 - p.shift + t - (ATT_BQ - 1), n = r + p.Lk - 1;
    rowt[t] = n >= 0 && n < p.Lq + p.Lk - 1 ? (int)p.rel_row[n] : -1;
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

/* Elements of a capture. */
static inline int64_t att_xcap_numel(const em_xcap *c) {
  int64_t n = 1;
  for (int d = 0; d < c->ndim; d++) n *= c->shape[d];
  return n;
}

/* A traced variant's programs and captures as this kernel takes them. */
static em_status att_xcheck(const char *kernel, const em_attention_args *a) {
  const em_expr *progs[ATT_XPROGS] = {a->score_mod, a->score_grad, a->mask_mod, a->sink, a->sink_grad};
  static const char *const names[ATT_XPROGS] = {"score", "score gradient", "mask", "sink", "sink gradient"};
  bool any = false;
  for (int k = 0; k < ATT_XPROGS; k++) {
    const em_expr *e = progs[k];
    if (!e) continue;
    any = true;
    if (e->n > ATT_XMAX_INS)
      return em_error(EM_ERR_UNSUPPORTED,
                      "cuda %s: the %s program has %d instructions; the CUDA kernel runs at most %d",
                      kernel, names[k], e->n, ATT_XMAX_INS);
    if (e->n < 1 || !e->ins || e->n_out < 1 || e->n_out > EM_EXPR_MAX_OUT || e->n_grad < 0 ||
        e->n_grad > EM_EXPR_MAX_OUT - 2 || ((k == ATT_XSCORE_GRAD || k == ATT_XSINK_GRAD) && e->n_out < 2 + e->n_grad))
      return em_error(EM_ERR_ARG, "cuda %s: a malformed %s program", kernel, names[k]);
  }
  if (!any) return EM_OK;
  if (a->n_caps < 0 || a->n_caps > EM_EXPR_MAX_CAPS || (a->n_caps > 0 && !a->caps))
    return em_error(EM_ERR_ARG, "cuda %s: %d captured tensors", kernel, a->n_caps);
  for (int c = 0; c < a->n_caps; c++) {
    const em_xcap *x = &a->caps[c];
    if (x->dtype != EM_F32 && x->dtype != EM_I64)
      return em_error(EM_ERR_UNSUPPORTED, "cuda %s: captured tensor '%s' is %s (float32 or int64 expected)",
                      kernel, x->name ? x->name : "?", emc_dtype_name(x->dtype));
    if (x->ndim < 1 || x->ndim > EM_EXPR_MAX_DIMS)
      return em_error(EM_ERR_ARG, "cuda %s: captured tensor '%s' has %d dims", kernel,
                      x->name ? x->name : "?", x->ndim);
  }
  if (a->mask_mod && a->block_map && a->map_grain < 1)
    return em_error(EM_ERR_ARG, "cuda %s: block map grain %lld", kernel, (long long)a->map_grain);
  return EM_OK;
}

/* Checks shared by forward and backward; fills p. */
static em_status att_prepare(const char *kernel, const em_attention_args *a, bool backward,
                             AttParams *p) {
  if (!a) return em_error(EM_ERR_ARG, "cuda %s: args is NULL", kernel);
  em_status xs = att_xcheck(kernel, a);
  if (xs) return xs;
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
  const bool shaw = a->rel_k || a->rel_v;
  if (shaw && !a->rel_row)
    return em_error(EM_ERR_ARG, "cuda %s: Shaw's rel_k or rel_v without rel_row", kernel);
  /* table rows are int on the device (shared memory per tile) */
  if (shaw && (a->n_rel <= 0 || a->n_rel > 0x3fffffffLL))
    return em_error(EM_ERR_ARG, "cuda %s: %lld rows of rel_k and rel_v", kernel, (long long)a->n_rel);
  if (a->Hkv < 0 || (a->Hkv && a->H % a->Hkv))
    return em_error(EM_ERR_ARG, "cuda %s: %lld query heads are not a multiple of %lld key/value heads", kernel,
                    (long long)a->H, (long long)a->Hkv);
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
  p->Hkv = a->Hkv > 0 ? a->Hkv : a->H;
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
  p->rel_row = shaw ? a->rel_row : NULL;
  p->rel_k = a->rel_k;
  p->rel_v = a->rel_v;
  p->shift = a->Lk - a->Lq;
  p->x_score = a->score_mod, p->x_score_grad = a->score_grad, p->x_mask = a->mask_mod;
  p->x_sink = a->sink, p->x_sink_grad = a->sink_grad && a->sink_grad->n_grad > 0;
  if (a->mask_mod && a->block_map) {
    p->map = a->block_map;
    p->map_grain = a->map_grain, p->map_nk = a->map_nk, p->map_sb = a->map_sb, p->map_sh = a->map_sh;
  }
  return EM_OK;
}

/* The traced variant's programs, captures and (backward) the gradients'
** pointers to the device: one buffer from the scratch cache, *buf (free it
** with emc_scratch_free after the kernels are queued, once att_xreport has
** read it). Nothing to do without programs. */
static em_status att_xupload(emc_device *d, const char *kernel, const em_attention_args *a,
                             float *const *g_caps, AttParams *p, void **buf) {
  *buf = NULL;
  const em_expr *progs[ATT_XPROGS] = {a->score_mod, a->score_grad, a->mask_mod, a->sink, a->sink_grad};
  int n_ins = 0;
  for (int k = 0; k < ATT_XPROGS; k++) n_ins += progs[k] ? progs[k]->n : 0;
  if (n_ins == 0) return EM_OK;
  const size_t bytes = sizeof(AttXDev) + (size_t)n_ins * sizeof(em_xins);
  char *host = (char *)calloc(1, bytes);
  if (!host) return em_error(EM_ERR_OOM, "cuda %s: out of memory", kernel);
  AttXDev *x = (AttXDev *)host;
  em_xins *ins = (em_xins *)(x + 1);
  for (int c = 0; c < a->n_caps; c++) {
    x->caps[c] = a->caps[c];
    x->g_caps[c] = g_caps ? g_caps[c] : NULL;
  }
  int at = 0;
  for (int k = 0; k < ATT_XPROGS; k++) {
    const em_expr *e = progs[k];
    if (!e) continue;
    AttXProg *pr = &x->prog[k];
    pr->n = e->n, pr->n_out = e->n_out, pr->n_grad = e->n_grad, pr->ins0 = at;
    memcpy(pr->out, e->out, sizeof pr->out);
    memcpy(pr->grad_load, e->grad_load, sizeof pr->grad_load);
    memcpy(ins + at, e->ins, (size_t)e->n * sizeof(em_xins));
    at += e->n;
  }
  void *dev = NULL;
  em_status s = emc_scratch(d, bytes, kernel, &dev);
  if (!s) s = emc_copy_h2d(d->index, dev, host, bytes);
  free(host);
  if (s) {
    if (dev) emc_scratch_free(d, dev);
    return s;
  }
  p->x = (AttXDev *)dev;
  *buf = dev;
  return EM_OK;
}

/* Can the programs fail: does one load from a capture, or is there a
** score program (whose NaN is an error)? Only then do the kernels' callers
** wait for the device to read the error record. */
static bool att_xcan_fail(const em_attention_args *a) {
  const em_expr *progs[ATT_XPROGS] = {a->score_mod, a->score_grad, a->mask_mod, a->sink, a->sink_grad};
  if (a->score_mod || a->score_grad) return true;
  for (int k = 0; k < ATT_XPROGS; k++)
    for (int i = 0; progs[k] && i < progs[k]->n; i++)
      if (progs[k]->ins[i].op == EM_XOP_LOAD) return true;
  return false;
}

/* After the kernels: the programs' first failure, if any, as the error (this
** waits for the device, when a program can fail). */
static em_status att_xreport(emc_device *d, const char *kernel, const em_attention_args *a,
                             const AttXDev *dev) {
  if (!att_xcan_fail(a)) return EM_OK;
  AttXErr e;
  em_status s = emc_copy_d2h(d->index, &e, &dev->err, sizeof e);
  if (s || !e.kind) return s;
  if (e.kind == ATT_XERR_NAN)
    return em_error(EM_ERR_ARG, "cuda %s: the score function gave NaN at b=%lld h=%lld q=%lld k=%lld",
                    kernel, e.b, e.h, e.q, e.k);
  const int dim = e.kind - 1;
  const em_xcap *cp = e.cap >= 0 && e.cap < a->n_caps ? &a->caps[e.cap] : NULL;
  return em_error(EM_ERR_INDEX,
                  "cuda %s: index %g out of range for dim %d of captured tensor '%s' (size %lld) at "
                  "b=%lld h=%lld q=%lld k=%lld",
                  kernel, e.idx, dim + 1, cp && cp->name ? cp->name : "?",
                  (long long)(cp && dim < cp->ndim ? cp->shape[dim] : 0), e.b, e.h, e.q, e.k);
}

/* The NCH instance for the larger head dim: 4 chunks up to 64 columns,
** else 16. (An 8-chunk instance would run at the same occupancy as the
** 16-chunk one -- one block per SM either way -- and cost compile time.) */
static inline int att_nch(int64_t dk, int64_t dv) {
  int64_t d = dk > dv ? dk : dv;
  return d <= 64 ? 4 : 16;
}

#endif
