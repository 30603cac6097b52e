/*
** ember_backend.h -- the compute-backend plugin ABI.
**
** A backend is a dlopen plugin (see ember_plugin.h) whose init returns a
** const em_backend *. The core never touches tensor memory itself: it asks
** the backend to allocate, copy and run kernels. All data pointers given to
** a kernel are device pointers of that backend (host pointers for the CPU
** backend, whose `host_memory` is true), already offset to element 0.
**
** Kernels return EM_OK or an error status after setting a message with
** em_error() (plugins link libember). A kernel never aborts or exits.
** Unless a field says "optional", it must be set.
**
** Layout conventions. "contiguous" means row-major with no gaps. Many
** kernels see their data as [outer, n, inner] (a contiguous tensor reduced
** or indexed along one middle dim). Index arrays are int64, 0-based; the
** kernel checks their range and fails with EM_ERR_INDEX naming the value.
**
** Adding a field: append it at the end and bump EM_BACKEND_ABI_VERSION.
*/
#ifndef EMBER_BACKEND_H
#define EMBER_BACKEND_H

#include "ember.h"
#include "ember_expr.h"

#ifdef __cplusplus
extern "C" {
#endif

#define EM_BACKEND_ABI_VERSION 14

/* A strided view handed to kernels. */
typedef struct em_kview {
  void *data;                     /* element 0 */
  em_dtype dtype;
  int ndim;
  int64_t shape[EM_MAX_DIMS];
  int64_t stride[EM_MAX_DIMS];    /* in elements; 0 for broadcast dims */
} em_kview;

/* Names, sizes and derivative needs for kernels' checks and messages,
** from the lists in ember.h (inline, so a plugin needs nothing from
** libember but em_error). The core checks these before calling a kernel;
** a kernel checks them again because it may be called directly. */
static inline const char *em_kernel_dtype_name(em_dtype dt) {
  static const char *const names[EM_NDTYPES] = {
#define EM_X_(e, name, size) name,
    EM_DTYPE_LIST(EM_X_)
#undef EM_X_
  };
  return (unsigned)dt < EM_NDTYPES ? names[dt] : "invalid dtype";
}

static inline size_t em_kernel_dtype_size(em_dtype dt) {
  static const unsigned char sizes[EM_NDTYPES] = {
#define EM_X_(e, name, size) size,
    EM_DTYPE_LIST(EM_X_)
#undef EM_X_
  };
  return (unsigned)dt < EM_NDTYPES ? sizes[dt] : 0;
}

static inline const char *em_kernel_unary_name(em_unary_op op) {
  static const char *const names[EM_NUNARY] = {
#define EM_X_(e, name, needs_x, needs_y) name,
    EM_UNARY_LIST(EM_X_)
#undef EM_X_
  };
  return (unsigned)op < EM_NUNARY ? names[op] : "unknown";
}

static inline const char *em_kernel_binary_name(em_binary_op op) {
  static const char *const names[EM_NBINARY] = {
#define EM_X_(e, name) name,
    EM_BINARY_LIST(EM_X_)
#undef EM_X_
  };
  return (unsigned)op < EM_NBINARY ? names[op] : "unknown";
}

/* Whether unary_backward of `op` reads the forward input x / output y. */
static inline bool em_unary_grad_needs_x(em_unary_op op) {
  static const bool needs[EM_NUNARY] = {
#define EM_X_(e, name, needs_x, needs_y) needs_x,
    EM_UNARY_LIST(EM_X_)
#undef EM_X_
  };
  return (unsigned)op < EM_NUNARY && needs[op];
}

static inline bool em_unary_grad_needs_y(em_unary_op op) {
  static const bool needs[EM_NUNARY] = {
#define EM_X_(e, name, needs_x, needs_y) needs_y,
    EM_UNARY_LIST(EM_X_)
#undef EM_X_
  };
  return (unsigned)op < EM_NUNARY && needs[op];
}

/* Whether unary `op` is defined on int64 as well as on the float dtypes
** (negation and abs wrap at INT64_MIN; floor, ceil, round and trunc are
** the identity; sign is -1, 0 or 1). */
static inline bool em_unary_takes_int64(em_unary_op op) {
  return op == EM_NEG || op == EM_ABS || op == EM_FLOOR || op == EM_CEIL || op == EM_ROUND ||
         op == EM_TRUNC || op == EM_SIGN;
}

typedef enum em_reduce_op {
  EM_RED_SUM = 0, EM_RED_MEAN, EM_RED_MAX, EM_RED_MIN,
  EM_RED_VAR   /* uses `correction` */
} em_reduce_op;

typedef enum em_random_kind {
  EM_RAND_UNIFORM = 0, /* a = low, b = high */
  EM_RAND_NORMAL       /* a = mean, b = std */
} em_random_kind;

/* Arguments of the optional fused attention kernels. q, k, v, out, dout
** and the gradients are contiguous [B,H,L,d], unless their strides say
** otherwise (q_stride ... dv_stride, at the end). lse is [B,H,Lq] in the
** compute dtype (float32 for bf16 inputs). */
typedef struct em_attention_args {
  em_dtype dtype;
  int64_t B, H, Lq, Lk, dk, dv;
  const void *q, *k, *v;
  void *out;                   /* forward: written */
  void *lse;                   /* forward: written; backward: read. The compute
                                  dtype: q's, float32 when q is bfloat16 */
  const uint8_t *key_padding;  /* [B,Lk], 1 = padding; NULL if none */
  const void *bias;            /* additive mask, dtype of lse; NULL if none */
  /* bfloat16 q, k, v (and tables, out, gradients): the kernel computes
  ** scores, softmax and sums in float32, products from bfloat16 operands */
  int64_t bias_stride[4];      /* strides over B,H,Lq,Lk (0 = broadcast) */
  bool causal;                 /* bottom-right aligned: key j visible to
                                  query i iff j <= i + (Lk - Lq) */
  double scale;
  double dropout_p;            /* 0 for none */
  uint64_t seed, offset;       /* Philox stream for dropout */
  /* backward only */
  const void *dout;
  void *dq, *dk_, *dv_;        /* written (not accumulated) */

  /* ---- Shaw's relative-position vectors (Shaw et al. 2018), the one
  ** term that is not a function of (s, b, h, q, k) and so not a program:
  ** s += scale * q_i . rel_k[rel_row(r)], out_i += sum_j P_ij rel_v[rel_row(r)],
  ** r = j - (i + Lk - Lq). Every other declared term (ALiBi, bias tables,
  ** windows, blocks, global tokens) reaches the kernel as the programs
  ** below, lowered by the core (attention_lower.c). A kernel without it
  ** returns EM_ERR_UNSUPPORTED when rel_k is set; the core composes. */
  const int64_t *rel_row;      /* [Lq + Lk - 1]: table row of r at r + Lk - 1; NULL: none */
  int64_t n_rel;               /* rows of rel_k and rel_v */
  const void *rel_k;           /* [n_rel, dk], q's dtype */
  const void *rel_v;           /* [n_rel, dv], or NULL */
  /* backward: their gradients (written, not accumulated; NULL = not wanted) */
  void *d_rel_k, *d_rel_v;

  /* ---- a traced variant (ember_expr.h, em_attn_mods in ember_attention.h),
  ** NULL when none. A kernel that does not run programs returns
  ** EM_ERR_UNSUPPORTED when one is set. */
  const em_expr *score_mod, *score_grad, *mask_mod, *sink, *sink_grad;
  int n_caps;
  const em_xcap *caps;         /* float ones in the compute dtype, or int64 */
  void *const *d_caps;         /* backward: gradients of captures (compute dtype, their
                                  shapes; written, not accumulated); NULL entries: not wanted */
  /* The mask program's tiles (EM_XTILE_*) on a grid of map_grain positions:
  ** cell (b, h, iq, jk) at block_map[b*map_sb + h*map_sh + iq*map_nk + jk]
  ** covers queries [iq*g, iq*g+g) and keys [jk*g, jk*g+g); map_sb or map_sh
  ** is 0 when the mask reads no batch or head. NULL: every tile partial. */
  const uint8_t *block_map;
  int64_t map_grain, map_nq, map_nk, map_sb, map_sh;

  /* Grouped-query attention: k and v have Hkv heads (H % Hkv == 0) and
  ** query head h reads kv head h / (H / Hkv), in place. 0 or H: none. The
  ** backward still writes dk_ and dv_ per query head, [B,H,Lk,d]; the core
  ** sums each group. A kernel without it returns EM_ERR_UNSUPPORTED. */
  int64_t Hkv;

  /* Rows of k's and v's storage per kv head (ABI 4): kv head g's key j is
  ** at k + (g * kv_rows + j) * dk, and the same for v. 0 or Lk: contiguous.
  ** Larger in a forward without backward over a KV cache's filled part (a
  ** narrow of buffers [B, Hkv, capacity, d]), which is read in place
  ** instead of copied at every decoding step. Set only for a backend with
  ** host memory (the CPU kernel); the others get contiguous k and v. */
  int64_t kv_rows;

  /* ---- heads where they lie (ABI 9), read by a backend that sets
  ** em_backend.attention_strided_heads (others always get the layouts
  ** above, these left 0). Each tensor's strides in elements over its
  ** batch, head and row dims, in that order; its last dim has stride 1:
  ** element (b, h, i, x) of q is at q + b*q_stride[0] + h*q_stride[1] +
  ** i*q_stride[2] + x. All three 0: the contiguous layout above (k and v
  ** with kv_rows). k_stride and v_stride step over kv heads (Hkv of them),
  ** dk_stride and dv_stride over the backward's per-query-head gradients
  ** ([B,H,Lk,d]). Inputs may overlap themselves and each other, with 0
  ** strides; out, dq, dk_ and dv_ do not. nn.MultiHeadAttention's heads
  ** are transposed views of [B,L,H,d] (strides L*H*d, d, H*d), or of one
  ** fused projection [B,L,3*H*d]; the core hands out out, dq, dk_ and dv_
  ** laid out as [B,L,H,d], so that merging the heads back is a view. */
  int64_t q_stride[3];
  int64_t k_stride[3];
  int64_t v_stride[3];
  int64_t out_stride[3];       /* forward: written there; backward: read */
  int64_t dout_stride[3];      /* backward only */
  int64_t dq_stride[3];        /* backward only: written there */
  int64_t dk_stride[3];        /* backward only: written there */
  int64_t dv_stride[3];        /* backward only: written there */
} em_attention_args;

/* A 2-d convolution (cross-correlation, as torch.nn.functional.conv2d):
** x [N, C, H, W], w [O, C/groups, kh, kw], b [O], y [N, O, Ho, Wo], all
** contiguous and of one dtype; Ho = (H + pad[0] + pad[1] - dilation[0] *
** (kh - 1) - 1) / stride[0] + 1, Wo likewise with pad[2], pad[3]. The core
** has checked the sizes (Ho, Wo >= 1, groups dividing C and O). A 1-d
** convolution comes as H = kh = 1. */
typedef struct em_conv_args {
  em_dtype dtype;
  int64_t N, C, H, W, O, kh, kw, Ho, Wo;
  int64_t stride[2], dilation[2];
  int64_t pad[4];              /* top, bottom, left, right */
  int64_t groups;
} em_conv_args;

/* A dense linear-algebra factorization or solve (em_linalg, ABI 12) over
** `batch` matrices, each handed over contiguous and ROW-major: a is
** [batch, m, n], b (SOLVE, TRSOLVE) [batch, n, k]; outputs row-major too:
**   CHOLESKY  a [n, n] symmetric (lower triangle read) -> L [n, n] lower, zeros above
**   LU        a [m, n] -> LU [m, n] (L unit lower below the diagonal, U on and above),
**             pivots int64 [min(m, n)] 1-based as LAPACK's getrf and torch's
**   SOLVE     a [n, n], b [n, k] -> x [n, k] with a x = b (LU with partial pivoting)
**   TRSOLVE   a [n, n] triangular (upper or lower, unit diagonal or not), b [n, k] -> x [n, k]
**   QR        a [m, n] -> Q [m, r], R [r, n], r = min(m, n) (reduced; R's
**             diagonal has LAPACK's signs, as torch)
**   EIGH      a [n, n] symmetric (lower triangle read) -> w [n] ascending, V [n, n]
**             whose columns are the eigenvectors
**   SVD       a [m, n] -> U [m, r], S [r] descending, Vh [r, n] (reduced)
** A numerical failure is no error: the kernel stops at the first failing
** matrix and reports it in info[0] (its index in the batch, -1 when every
** one succeeded) and info[1] (LAPACK's positive info: the order of the
** minor that is not positive-definite, the 1-based zero pivot of U or of
** the triangle, the count of eigen/singular values that did not converge);
** the core words the error. LU completes a singular matrix (info[1] its
** first zero pivot). */
typedef struct em_linalg_args {
  em_linalg_op op;
  em_dtype dtype;              /* EM_F32 or EM_F64 */
  int64_t batch, m, n, k;      /* k: b's columns (SOLVE, TRSOLVE) */
  bool upper;                  /* TRSOLVE: a is upper triangular (else lower) */
  bool unitriangular;          /* TRSOLVE: a's diagonal is taken as ones */
  bool full;                   /* QR: complete, Q [m, m] and R [m, n]; SVD: full
                               ** matrices, U [m, m] and Vh [n, n] */
} em_linalg_args;

typedef struct em_backend {
  uint32_t abi_version;  /* EM_BACKEND_ABI_VERSION, checked again on init */
  uint32_t struct_size;  /* sizeof(em_backend) as the plugin was built */
  const char *name;      /* the device type users write: "cpu", "cuda" */
  bool host_memory;      /* data pointers are host pointers */

  /* ---- devices ---- */
  /* Number of usable devices (0 is allowed: the backend is listed but has
  ** no devices; a plugin may instead fail init with "no CUDA device"). */
  int (*device_count)(void);
  /* optional: a name such as "NVIDIA H200" into buf. */
  em_status (*device_name)(int device, char *buf, size_t n);

  /* ---- memory ---- */
  /* nbytes may be 0 (return a valid unique pointer or NULL). OOM is
  ** EM_ERR_OOM with the size in the message. */
  em_status (*alloc)(int device, size_t nbytes, void **ptr);
  void (*free)(int device, void *ptr, size_t nbytes);
  em_status (*copy_h2d)(int device, void *dst, const void *host_src, size_t nbytes);
  em_status (*copy_d2h)(int device, void *host_dst, const void *src, size_t nbytes);
  /* Between two devices of this backend (or the same one). */
  em_status (*copy_d2d)(int dst_device, void *dst, int src_device, const void *src, size_t nbytes);
  /* Waits for all queued work on the device. */
  em_status (*synchronize)(int device);
  /* optional: bytes held by live tensors and by the allocator's cache. */
  em_status (*memory_stats)(int device, size_t *in_use, size_t *cached);
  /* optional: gives cached blocks back to the driver. */
  em_status (*empty_cache)(int device);
  /* optional: threads for CPU kernels. */
  void (*set_num_threads)(int n);
  /* optional */
  int (*get_num_threads)(void);

  /* ---- elementwise ---- */
  /* dst[i] = (dst dtype) src[i]; same shape, any strides, any dtypes. */
  em_status (*copy)(int device, const em_kview *dst, const em_kview *src);
  em_status (*fill)(int device, const em_kview *dst, double value);
  /* out contiguous, x same shape any strides; same dtype (bool for NOT). */
  em_status (*unary)(int device, em_unary_op op, const em_kview *out, const em_kview *x,
                     double alpha, double beta);
  /* gx = dL/dx from gy, with x the input and y the output of the forward;
  ** all contiguous, n elements. */
  em_status (*unary_backward)(int device, em_unary_op op, em_dtype dt, int64_t n, void *gx,
                              const void *gy, const void *x, const void *y,
                              double alpha, double beta);
  /* out contiguous; a and b have out's ndim and shape, with 0 strides where
  ** broadcast; a and b share a dtype; out is bool for comparisons. */
  em_status (*binary)(int device, em_binary_op op, const em_kview *out, const em_kview *a,
                      const em_kview *b);
  /* out = cond ? a : b; cond bool; like binary for shapes. */
  em_status (*where)(int device, const em_kview *out, const em_kview *cond, const em_kview *a,
                     const em_kview *b);

  /* ---- reductions ---- */
  /* in contiguous [outer, n, inner] -> out [outer, inner]. For MAX/MIN,
  ** idx (int64, may be NULL) gets the first position of the extreme. */
  em_status (*reduce)(int device, em_reduce_op op, em_dtype dt, void *out, int64_t *idx,
                      const void *in, int64_t outer, int64_t n, int64_t inner, int correction);

  /* ---- matrix multiply ---- */
  /* Row-major, batched: for each b < batch,
  **   C_b[m,n] = alpha * op(A_b)[m,k] @ op(B_b)[k,n] + beta * C_b
  ** with op = transpose when ta/tb; A_b = a + b*stride_a (elements). */
  em_status (*gemm)(int device, em_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                    double alpha, const void *a, int64_t lda, int64_t stride_a,
                    const void *b, int64_t ldb, int64_t stride_b, double beta,
                    void *c, int64_t ldc, int64_t stride_c, int64_t batch);

  /* ---- softmax and normalisation (contiguous [rows, n]) ---- */
  em_status (*softmax)(int device, em_dtype dt, void *out, const void *x, int64_t rows,
                       int64_t n, bool log);
  /* y is the forward output (softmax or log_softmax). */
  em_status (*softmax_backward)(int device, em_dtype dt, void *gx, const void *gy,
                                const void *y, int64_t rows, int64_t n, bool log);
  /* w, b may be NULL; mean and rstd get [rows]. */
  em_status (*layer_norm)(int device, em_dtype dt, void *y, void *mean, void *rstd,
                          const void *x, const void *w, const void *b, int64_t rows,
                          int64_t n, double eps);
  /* dx always; dw and db (may be NULL) are overwritten, not accumulated. */
  em_status (*layer_norm_backward)(int device, em_dtype dt, void *dx, void *dw, void *db,
                                   const void *dy, const void *x, const void *mean,
                                   const void *rstd, const void *w, int64_t rows, int64_t n);

  /* ---- indexing (contiguous data, [outer, n, inner] views) ---- */
  /* out[o,j,i] = in[o, idx[j], i], j < nidx, idx[j] < n_in. */
  em_status (*index_select)(int device, em_dtype dt, void *out, const void *in,
                            const int64_t *idx, int64_t nidx, int64_t outer, int64_t n_in,
                            int64_t inner);
  /* out[o, idx[j], i] += src[o, j, i]. */
  em_status (*index_add)(int device, em_dtype dt, void *out, const void *src,
                         const int64_t *idx, int64_t nidx, int64_t outer, int64_t n_out,
                         int64_t inner);
  /* out[o,j,i] = in[o, idx[o,j,i], i]; idx and out are [outer, n_idx, inner]. */
  em_status (*gather)(int device, em_dtype dt, void *out, const void *in, const int64_t *idx,
                      int64_t outer, int64_t n_in, int64_t n_idx, int64_t inner);
  /* out[o, idx[o,j,i], i] += src[o,j,i]. */
  em_status (*scatter_add)(int device, em_dtype dt, void *out, const void *src,
                           const int64_t *idx, int64_t outer, int64_t n_out, int64_t n_idx,
                           int64_t inner);

  /* ---- losses ---- */
  /* logits [rows, classes]; loss and lse get [rows]. loss is the smoothed
  ** NLL of each row, 0 where target == ignore_index. A target outside
  ** [0, classes) that is not ignore_index is EM_ERR_INDEX. */
  em_status (*cross_entropy)(int device, em_dtype dt, void *loss, void *lse, const void *logits,
                             const int64_t *target, int64_t rows, int64_t classes,
                             int64_t ignore_index, double smoothing);
  /* dlogits[r,:] = dloss[r] * d loss[r] / d logits[r,:]. */
  em_status (*cross_entropy_backward)(int device, em_dtype dt, void *dlogits, const void *dloss,
                                      const void *logits, const void *lse,
                                      const int64_t *target, int64_t rows, int64_t classes,
                                      int64_t ignore_index, double smoothing);

  /* ---- random (Philox4x32-10, see ember_philox.h) ---- */
  /* out contiguous float; element i draws from counter offset + i. */
  em_status (*random)(int device, em_random_kind kind, const em_kview *out, double a, double b,
                      uint64_t seed, uint64_t offset);
  /* mask[i] = keep ? 1/(1-p) : 0 with keep = uniform(i) >= p; out = x*mask. */
  em_status (*dropout)(int device, em_dtype dt, void *out, void *mask, const void *x, int64_t n,
                       double p, uint64_t seed, uint64_t offset);

  /* ---- optional fused kernels ---- */
  /* optional: one Adam/AdamW step over n elements, in place. `step` is
  ** 1-based. decoupled selects AdamW (weight decay on the parameter). */
  em_status (*adam_step)(int device, em_dtype dt, int64_t n, void *param, const void *grad,
                         void *m, void *v, double lr, double beta1, double beta2, double eps,
                         double weight_decay, int64_t step, bool decoupled);
  /* optional: SGD with momentum (buf may be NULL when momentum == 0). */
  em_status (*sgd_step)(int device, em_dtype dt, int64_t n, void *param, const void *grad,
                        void *buf, double lr, double momentum, double dampening,
                        double weight_decay, bool nesterov, bool first_step);
  /* optional: flash-style attention forward writing out and lse. */
  em_status (*attention_forward)(int device, const em_attention_args *args);
  /* optional: backward from dout, out and lse, writing dq, dk_, dv_. */
  em_status (*attention_backward)(int device, const em_attention_args *args);
  /* optional: a line saying what computes dtype dt's products and kernels
  ** on this device (for the CPU: the library and the instruction set it
  ** runs on, "onednn brg:avx512_core_amx_bf16"), for ember.cpu_info(). */
  em_status (*kernel_info)(int device, em_dtype dt, char *buf, size_t n);

  /* ---- convolution (ABI 4) ---- */
  /* optional: y = conv(x, w) + b (b may be NULL). A backend that has no
  ** kernel for the call (a dtype, a size) returns EM_ERR_UNSUPPORTED and
  ** the caller composes it from the other kernels. */
  em_status (*conv2d)(int device, const em_conv_args *a, void *y, const void *x, const void *w,
                      const void *b);
  /* optional, with conv2d: from dy [N, O, Ho, Wo] and the forward's x and
  ** w, writes (not accumulates) dx, dw and db; a NULL one is not wanted. */
  em_status (*conv2d_backward)(int device, const em_conv_args *a, void *dx, void *dw, void *db,
                               const void *dy, const void *x, const void *w);

  /* ---- grouped-query attention (ABI 5) ---- */
  /* The fused kernels read grouped heads in place (em_attention_args.Hkv:
  ** query head h reads kv head h / (H / Hkv)); without it, a grouped call
  ** is composed with k and v repeated to H heads. */
  bool attention_grouped_kv;

  /* ---- RMS normalisation (ABI 7) ---- */
  /* optional: y = x / sqrt(mean(x^2) + eps) * w over the rows of a
  ** contiguous [rows, n] x (w may be NULL); rstd gets each row's
  ** 1/sqrt(mean(x^2) + eps) ([rows], float32 for bfloat16 x, as
  ** layer_norm's). Without it, or when it returns EM_ERR_UNSUPPORTED, the
  ** caller composes the norm from the other kernels (nn.RMSNorm). */
  em_status (*rms_norm)(int device, em_dtype dt, void *y, void *rstd, const void *x,
                        const void *w, int64_t rows, int64_t n, double eps);
  /* optional, with rms_norm: dx always; dw (may be NULL) is overwritten. */
  em_status (*rms_norm_backward)(int device, em_dtype dt, void *dx, void *dw, const void *dy,
                                 const void *x, const void *rstd, const void *w, int64_t rows,
                                 int64_t n);

  /* ---- rotary positions (ABI 8) ---- */
  /* optional: rotary position embedding, rotate-half form (GPT-NeoX,
  ** Llama). x and out are [..., L, d] views of one shape and dtype, unit
  ** stride in the last dim, d = 2h; cos and sin are contiguous [L, h] of
  ** that dtype. For every row at position l < L and j < h:
  **   out[j]     = x[j] cos[l,j] - x[j+h] sin[l,j]
  **   out[j + h] = x[j+h] cos[l,j] + x[j] sin[l,j]
  ** inverse rotates by minus the angles (the backward). bfloat16 computes
  ** in float32 and rounds once. Without it, or when it returns
  ** EM_ERR_UNSUPPORTED, the caller composes the rotation from the other
  ** kernels. */
  em_status (*rope)(int device, const em_kview *out, const em_kview *x, const void *cos,
                    const void *sin, bool inverse);

  /* ---- a product with a bias (ABI 9) ---- */
  /* optional: C[m,n] = op(A)[m,k] @ op(B)[k,n] + bias[n] (every row gets
  ** the contiguous bias, of dtype dt), one matrix, as gemm's arguments.
  ** A library that adds the bias in the product's own pass (oneDNN's
  ** matmul) saves a pass over C; bfloat16 rounds once, after both.
  ** Without it the caller fills C with the bias and runs gemm with
  ** beta = 1. */
  em_status (*gemm_bias)(int device, em_dtype dt, bool ta, bool tb, int64_t m, int64_t n,
                         int64_t k, const void *a, int64_t lda, const void *b, int64_t ldb,
                         const void *bias, void *c, int64_t ldc);

  /* ---- attention on heads where they lie (ABI 9) ---- */
  /* The fused attention kernels read and write the strided layouts of
  ** em_attention_args (q_stride ... dv_stride); without it the core gives
  ** them contiguous copies, as before. */
  bool attention_strided_heads;
  /* ---- the norm of gradients (ABI 9) ---- */
  /* optional: *out = the sum of x[i]^2 over a contiguous x of n elements,
  ** accumulated in float64 in an order that does not depend on the thread
  ** count (clip_grad_norm). Without it the caller squares and sums with
  ** the other kernels. */
  em_status (*sum_squares)(int device, em_dtype dt, const void *x, int64_t n, double *out);

  /* ---- float32 beside bfloat16 (ABI 9) ---- */
  /* binary's add and sub take one bfloat16 operand beside a float32 one
  ** (out float32), widening it as read: what a cast to float32 and the
  ** float32 op give, without the cast's pass. Without it the caller casts
  ** first (an autocast residual, x + block(x), pays a pass more). */
  bool binary_mixed_bf16;

  /* ---- binary ops past the first ones (ABI 10) ---- */
  /* binary runs EM_FMOD (float32, float64, bfloat16, int64; an int64 zero
  ** divisor is an error). The core never hands binary an op whose flag is
  ** unset: fmod on such a backend is an EM_ERR_UNSUPPORTED error naming it. */
  bool binary_fmod;

  /* ---- a convolution keeping its input for the weight gradient (ABI 11) ---- */
  /* optional, the three together: the weight gradient reads the forward's
  ** x again, and a backend that runs the convolution on x in a layout of
  ** its own (oneDNN's blocked nChw16c) would reorder it twice. With these
  ** the core, when the weight needs a gradient, gives the forward a buffer
  ** of *bytes (0: nothing to keep for this call; the plain kernels run) to
  ** which conv2d_keep writes x in that layout beside y (what conv2d does
  ** otherwise); conv2d_backward_kept reads it where conv2d_backward would
  ** reorder x (x is given too, and may be read instead). The buffer is
  ** opaque to the core, which holds it in the autograd node until the
  ** node's saved tensors are freed: one activation per layer. bias says
  ** whether the forward has a bias. */
  em_status (*conv2d_keep_bytes)(int device, const em_conv_args *a, bool bias, size_t *bytes);
  em_status (*conv2d_keep)(int device, const em_conv_args *a, void *y, void *xk, const void *x,
                           const void *w, const void *b);
  em_status (*conv2d_backward_kept)(int device, const em_conv_args *a, void *dx, void *dw, void *db,
                                    const void *dy, const void *x, const void *xk, const void *w);

  /* ---- dense linear algebra (ABI 12) ---- */
  /* optional: the factorizations and solves of em_linalg_args (float32 and
  ** float64; the core has checked the sizes, none is 0), outputs in
  ** out[0..2] in the order listed there, b NULL unless SOLVE or TRSOLVE.
  ** Without it ember.linalg on the backend is an EM_ERR_UNSUPPORTED error
  ** naming it (the CPU backend runs LAPACK; the CUDA plugin has none). */
  em_status (*linalg)(int device, const em_linalg_args *a, void *const *out, const void *x,
                      const void *b, int64_t info[2]);

  /* ---- gated activations (ABI 13) ---- */
  /* optional, the two together: out = act(gate) * up over n contiguous
  ** elements of dt (float32, float64, bfloat16), act EM_SILU (SwiGLU) or
  ** EM_GELU (exact; GeGLU), computed in float for bfloat16 and rounded
  ** once; its backward dgate = dout * up * act'(gate) and dup = dout *
  ** act(gate), either output NULL when not wanted. One pass each where
  ** unary then mul (and their gradients) make five. Without them the core
  ** composes those. */
  em_status (*gated)(int device, em_unary_op act, em_dtype dt, int64_t n, void *out,
                     const void *gate, const void *up);
  em_status (*gated_backward)(int device, em_unary_op act, em_dtype dt, int64_t n, void *dgate,
                              void *dup, const void *dout, const void *gate, const void *up);

  /* ---- what computes one product (ABI 14) ---- */
  /* optional: the library (and instruction set) gemm with these arguments
  ** runs on, by the rule gemm dispatches by ("onednn brg:avx512_core",
  ** "openblas 0.3.21 sgemm, core Cooperlake"), a string that lives as long
  ** as the plugin; NULL when it cannot say. The profiler's "computed by"
  ** of each product; without it, kernel_info's gemm part. */
  const char *(*gemm_route)(int device, em_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                            int64_t batch);
} em_backend;

/* The backends the core knows, by slot (see em_device.backend). */
EM_API int em_backend_count(void);
EM_API const em_backend *em_backend_get(int slot);
/* Slot of the loaded backend with that name, or an EM_ERR_DEVICE /
** EM_ERR_PLUGIN error that says where we looked. */
EM_API em_status em_backend_find(const char *name, int *slot);
/* The backend of a tensor's device. */
EM_API const em_backend *em_backend_of(const em_tensor *t);
/* Fills a kernel view for a tensor. */
EM_API void em_kview_of(const em_tensor *t, em_kview *kv);

#ifdef __cplusplus
}
#endif
#endif
