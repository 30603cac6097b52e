/*
** cpu_unary.c -- unary elementwise ops and their derivatives.
**
** The element rules are core/include/ember_unary_rules.h's (shared with
** the CUDA kernels); cpu_unary_tmpl.h runs them for each dtype. Exact
** GELU in float32 and bfloat16 has its own vectorisable loops here.
*/
#include "cpu_internal.h"
#include "cpu_vmath.h"

#include <stdio.h>
#include <tgmath.h>

/* The math of ember_unary_rules.h: type-generic, so the float copy of a
** rule calls the float function and the double copy the double one.
** float's e^x is cpu_exp_any_f32, straight-line code within 2 ulp, so that
** exp, sigmoid, SiLU and ELU (and their derivatives) vectorise: with
** glibc's expf, a call per element, SiLU and its derivative were 44% of a
** Llama training step. Likewise float's tanh is cpu_tanh_f32 (within 5
** ulp; glibc's tanhf took 14 ns an element). nearbyint rounds halves to
** even in the default mode and, unlike rint, raises no inexact flag. */
#define m_exp(x) _Generic((x), float: cpu_exp_any_f32, default: exp)(x)
#define m_log log
#define m_sqrt sqrt
#define m_fabs fabs
#define m_tanh(x) _Generic((x), float: cpu_tanh_f32, default: tanh)(x)
#define m_erf erf
#define m_pow pow
#define m_sin sin
#define m_cos cos
#define m_floor floor
#define m_ceil ceil
#define m_rint nearbyint
#define m_trunc trunc
#define m_log1p log1p
#define m_expm1 expm1
#define m_atan atan
#define m_asin asin
#define m_acos acos
/* glibc's lgamma also writes the global signgam (unused here) */
#define m_lgamma lgamma
#define m_erfc erfc

static const char *unary_name(em_unary_op op) { return em_kernel_unary_name(op); }

typedef struct unary_ctx {
  em_unary_op op;
  double alpha, beta;
} unary_ctx;

#define T float
#define ACC float
#define LD(x) (x)
#define ST(x) (x)
#define SUF f32
#define IS_FLOAT 1
#include "cpu_unary_tmpl.h"
#undef T
#undef ACC
#undef SUF
#undef IS_FLOAT

#define T double
#define ACC double
#define SUF f64
#define IS_FLOAT 1
#include "cpu_unary_tmpl.h"
#undef T
#undef ACC
#undef SUF
#undef IS_FLOAT
#undef LD
#undef ST

/* bfloat16 computes in float: one rounding per result. Its strided
** forward runs are this copy of the loops; contiguous ones and the
** derivatives go through the float32 loops (unary_bf16 below). */
#define T uint16_t
#define ACC float
#define LD(x) em_bf16_to_f32(x)
#define ST(x) em_f32_to_bf16(x)
#define SUF bf16
#define IS_FLOAT 1
#define UNARY_GRAD_VIA_F32 1
#include "cpu_unary_tmpl.h"
#undef T
#undef ACC
#undef SUF
#undef IS_FLOAT
#undef LD
#undef ST
#undef UNARY_GRAD_VIA_F32

#define T int64_t
#define SUF i64
#define IS_FLOAT 0
#include "cpu_unary_tmpl.h"
#undef T
#undef SUF
#undef IS_FLOAT

#define T uint8_t
#define SUF u8
#define IS_FLOAT 0
#include "cpu_unary_tmpl.h"
#undef T
#undef SUF
#undef IS_FLOAT

static void unary_f64(char **p, const int64_t *s, int64_t n, void *vctx) {
  unary_ops_f64(p, s, n, vctx);
}

/* Exact (erf) GELU in float32 through cpu_vmath.h's normal CDF, whose left
** tail is a product (not 1 + erf(x), which cancels), so it keeps its
** relative accuracy. bfloat16 computes it in float32 too (libm's erff, a
** call per element, made bfloat16 GELU 7x slower than float32's). */
static inline float gelu_cdf_f32(float x) { return cpu_normal_cdf_f32(x); }

static inline float gelu_one_f32(float x) { return x * gelu_cdf_f32(x); }

static inline float gelu_one_ab_f32(float x, float a, float b) {
  (void)a, (void)b;
  return gelu_one_f32(x);
}

/* d/dx x Phi(x) = Phi(x) + x phi(x), from cdf = Phi(x). The density's
** exponential is the one inside cpu_normal_cdf_f32: once inlined, GCC
** computes it once for both. */
static inline float gelu_grad_cdf_f32(float v, float cdf) {
  const float pdf = (float)EM_INV_SQRT_2PI * cpu_gauss_f32(v);
  return fmaf(v, pdf, cdf);
}

static inline float gelu_grad_one_f32(float v) { return gelu_grad_cdf_f32(v, gelu_cdf_f32(v)); }

CPU_VECTOR_CLONES_512 static void gelu_f32(float *y, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = gelu_one_f32(x[i]);
}


CPU_VECTOR_CLONES_512 static void gelu_grad_f32(float *gx, const float *gy, const float *x,
                                                int64_t n) {
  for (int64_t i = 0; i < n; i++) gx[i] = gy[i] * gelu_grad_one_f32(x[i]);
}


CPU_VECTOR_CLONES_512 static void widen_run(float *dst, const uint16_t *src, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = em_bf16_to_f32(src[i]);
}

/* A contiguous bfloat16 run goes through the float32 loops a chunk at a
** time (widened on the stack, computed in place, rounded once): the same
** float computation and rounding as the bfloat16 copies of the loops, which
** spilled registers in their AVX-512 build and ran SiLU at a third of
** float32's speed (GELU's own bfloat16 loops ran at half of float32's). */
enum { BF_UNARY_CHUNK = 1024 };

static void gelu_bf16(uint16_t *y, const uint16_t *x, int64_t n) {
  float buf[BF_UNARY_CHUNK];
  for (int64_t i0 = 0; i0 < n; i0 += BF_UNARY_CHUNK) {
    const int64_t m = n - i0 < BF_UNARY_CHUNK ? n - i0 : BF_UNARY_CHUNK;
    widen_run(buf, x + i0, m);
    gelu_f32(buf, buf, m);
    cpu_bf16_round(y + i0, buf, m);
  }
}

static void gelu_grad_bf16(uint16_t *gx, const uint16_t *gy, const uint16_t *x, int64_t n) {
  float g[BF_UNARY_CHUNK], xf[BF_UNARY_CHUNK];
  for (int64_t i0 = 0; i0 < n; i0 += BF_UNARY_CHUNK) {
    const int64_t m = n - i0 < BF_UNARY_CHUNK ? n - i0 : BF_UNARY_CHUNK;
    widen_run(g, gy + i0, m);
    widen_run(xf, x + i0, m);
    gelu_grad_f32(g, g, xf, m);
    cpu_bf16_round(gx + i0, g, m);
  }
}

/* GELU's derivative (float32 or bfloat16) over blocks spread across the
** OpenMP team. */
static void gelu_grad_par(em_dtype dt, void *gx, const void *gy, const void *x, int64_t n) {
  const int64_t block = 4096, nblk = (n + block - 1) / block;
  CPU_FOR(n > CPU_PAR_MIN, b, nblk, {
    const int64_t lo = b * block, len = n - lo < block ? n - lo : block;
    if (dt == EM_F32)
      gelu_grad_f32((float *)gx + lo, (const float *)gy + lo, (const float *)x + lo, len);
    else
      gelu_grad_bf16((uint16_t *)gx + lo, (const uint16_t *)gy + lo, (const uint16_t *)x + lo, len);
  });
}

static void unary_f32(char **p, const int64_t *s, int64_t n, void *vctx) {
  const unary_ctx *c = vctx;
  if (c->op == EM_GELU) {
    if (s[1] == (int64_t)sizeof(float)) gelu_f32((float *)p[0], (const float *)p[1], n);
    else un_run_f32(p, s, n, gelu_one_ab_f32, 0, 0);
    return;
  }
  unary_ops_f32(p, s, n, c);
}

/* ReLU on bfloat16 bits. Its result is its input or zero, so widening,
** u_relu/d_relu in float32 and rounding back (what the loops above do,
** three passes through a stack buffer: 12 GB/s on a KJV FFN's [4096, 512])
** reduce to integer tests on the bits, 32 lanes to an AVX-512 register.
** Both keep the float path's bits exactly: round(widen(v)) is v but for a
** signalling NaN, which it quiets (bf16_pass); u_relu zeroes x < 0, the
** bits 0x8001..0xff80 (not -0, not a NaN); d_relu passes g where x > 0,
** the bits 0x0001..0x7f80, and is +0 elsewhere. */
/* em_f32_to_bf16(em_bf16_to_f32(v)) on the 16 bits: calling the rule
** itself ran the forward at half this speed (0.14 -> 0.28 ms); the test
** over every pattern holds the two together. */
static inline uint16_t bf16_pass(uint16_t v) {
  return (uint16_t)((v & 0x7fffu) > 0x7f80u ? v | 0x40u : v);
}

CPU_VECTOR_CLONES_512 static void relu_bits_bf16(uint16_t *restrict y, const uint16_t *restrict x,
                                                 int64_t n) {
  for (int64_t i = 0; i < n; i++)
    y[i] = (uint16_t)(x[i] - 0x8001u) <= 0x7f7fu ? 0 : bf16_pass(x[i]);
}

CPU_VECTOR_CLONES_512 static void relu_grad_bits_bf16(uint16_t *restrict gx,
                                                      const uint16_t *restrict gy,
                                                      const uint16_t *restrict x, int64_t n) {
  for (int64_t i = 0; i < n; i++) { /* gy read unconditionally: a select, not a branch */
    const uint16_t g = bf16_pass(gy[i]);
    gx[i] = (uint16_t)(x[i] - 1u) <= 0x7f7fu ? g : 0;
  }
}

static void unary_bf16(char **p, const int64_t *s, int64_t n, void *vctx) {
  const unary_ctx *c = vctx;
  const bool contiguous = s[1] == (int64_t)sizeof(uint16_t);
  if (c->op == EM_RELU && contiguous) {
    relu_bits_bf16((uint16_t *)p[0], (const uint16_t *)p[1], n);
    return;
  }
  if (c->op == EM_GELU) {
    if (contiguous) gelu_bf16((uint16_t *)p[0], (const uint16_t *)p[1], n);
    else un_run_bf16(p, s, n, gelu_one_ab_f32, 0, 0);
    return;
  }
  if (!contiguous) {
    unary_ops_bf16(p, s, n, c);
    return;
  }
  float buf[BF_UNARY_CHUNK];
  char *fp[2] = {(char *)buf, (char *)buf};
  const int64_t fs[2] = {sizeof(float), sizeof(float)};
  for (int64_t i0 = 0; i0 < n; i0 += BF_UNARY_CHUNK) {
    const int64_t m = n - i0 < BF_UNARY_CHUNK ? n - i0 : BF_UNARY_CHUNK;
    widen_run(buf, (const uint16_t *)p[1] + i0, m);
    unary_ops_f32(fp, fs, m, c);
    cpu_bf16_round((uint16_t *)p[0] + i0, buf, m);
  }
}

/* bfloat16 derivatives through the float32 loops, as the forward: each
** range of CPU_FOR_RANGES (CPU_RANGE = 4096 elements) widened a chunk at a
** time on the stack, computed by grad_range_f32, rounded once. */
static void grad_range_bf16_via_f32(em_unary_op op, int64_t lo, int64_t hi, uint16_t *gx,
                                    const uint16_t *gy, const uint16_t *x, const uint16_t *y,
                                    float a, float b) {
  float g[BF_UNARY_CHUNK], xf[BF_UNARY_CHUNK], yf[BF_UNARY_CHUNK];
  for (int64_t i0 = lo; i0 < hi; i0 += BF_UNARY_CHUNK) {
    const int64_t m = hi - i0 < BF_UNARY_CHUNK ? hi - i0 : BF_UNARY_CHUNK;
    widen_run(g, gy + i0, m);
    if (x) widen_run(xf, x + i0, m);
    if (y) widen_run(yf, y + i0, m);
    grad_range_f32(op, 0, m, g, g, x ? xf : NULL, y ? yf : NULL, a, b);
    cpu_bf16_round(gx + i0, g, m);
  }
}

static void unary_grad_bf16_via_f32(em_unary_op op, int64_t n, uint16_t *gx, const uint16_t *gy,
                                    const uint16_t *x, const uint16_t *y, double alpha,
                                    double beta) {
  const float a = (float)alpha, b = (float)beta;
  CPU_FOR_RANGES(n > CPU_PAR_MIN, n, lo, hi, grad_range_bf16_via_f32(op, lo, hi, gx, gy, x, y, a, b););
}

/* int64 negation and abs wrap for INT64_MIN instead of overflowing;
** floor, ceil, round and trunc of an integer are the integer. */
static inline int64_t neg_i64(int64_t x, int64_t a, int64_t b) {
  (void)a, (void)b;
  return (int64_t)(0u - (uint64_t)x);
}
static inline int64_t abs_i64(int64_t x, int64_t a, int64_t b) {
  (void)a, (void)b;
  return x < 0 ? (int64_t)(0u - (uint64_t)x) : x;
}

static inline int64_t ident_i64(int64_t x, int64_t a, int64_t b) {
  (void)a, (void)b;
  return x;
}
static inline int64_t sign_i64(int64_t x, int64_t a, int64_t b) {
  (void)a, (void)b;
  return (x > 0) - (x < 0);
}

static void unary_i64(char **p, const int64_t *s, int64_t n, void *vctx) {
  const unary_ctx *c = vctx;
  switch (c->op) {
    case EM_NEG: un_run_i64(p, s, n, neg_i64, 0, 0); return;
    case EM_ABS: un_run_i64(p, s, n, abs_i64, 0, 0); return;
    case EM_SIGN: un_run_i64(p, s, n, sign_i64, 0, 0); return;
    case EM_FLOOR: case EM_CEIL: case EM_ROUND: case EM_TRUNC: un_run_i64(p, s, n, ident_i64, 0, 0); return;
    default: return;
  }
}

static inline uint8_t not_u8(uint8_t x, uint8_t a, uint8_t b) {
  (void)a, (void)b;
  return (uint8_t)(x == 0);
}

static void unary_not(char **p, const int64_t *s, int64_t n, void *vctx) {
  (void)vctx;
  un_run_u8(p, s, n, not_u8, 0, 0);
}

em_status cpu_unary(int device, em_unary_op op, const em_kview *out, const em_kview *x,
                    double alpha, double beta) {
  (void)device;
  if ((unsigned)op >= EM_NUNARY) return em_error(EM_ERR_ARG, "cpu unary: unknown op %d", (int)op);
  if (out->dtype != x->dtype)
    return em_error(EM_ERR_DTYPE, "cpu unary %s: output is %s and input %s, expected one dtype",
                    unary_name(op), cpu_dtype_name(out->dtype), cpu_dtype_name(x->dtype));
  cpu_loop_fn fn = NULL;
  if (op == EM_NOT) fn = x->dtype == EM_BOOL ? unary_not : NULL;
  else if (x->dtype == EM_F32) fn = unary_f32;
  else if (x->dtype == EM_F64) fn = unary_f64;
  else if (x->dtype == EM_BF16) fn = unary_bf16;
  else if (x->dtype == EM_I64 && em_unary_takes_int64(op)) fn = unary_i64;
  if (!fn) {
    char kernel[40];
    snprintf(kernel, sizeof kernel, "unary %s", unary_name(op));
    return cpu_bad_dtype(kernel, x->dtype,
                         op == EM_NOT                    ? "bool"
                         : em_unary_takes_int64(op)      ? "float32, float64, bfloat16, int64"
                                                         : "float32, float64, bfloat16");
  }
  cpu_iter it;
  const em_kview *v[2] = {out, x};
  em_status s = cpu_iter_init(&it, unary_name(op), 2, v);
  if (s) return s;
  unary_ctx c = {op, alpha, beta};
  cpu_iter_run(&it, fn, &c);
  return EM_OK;
}

/* ------------------------------------------------------------------ */
/* derivatives                                                         */
/* ------------------------------------------------------------------ */

em_status cpu_unary_backward(int device, em_unary_op op, em_dtype dt, int64_t n, void *gx,
                             const void *gy, const void *x, const void *y, double alpha,
                             double beta) {
  (void)device;
  if ((unsigned)op >= EM_NUNARY)
    return em_error(EM_ERR_ARG, "cpu unary_backward: unknown op %d", (int)op);
  if (op == EM_NOT)
    return em_error(EM_ERR_ARG, "cpu unary_backward not: logical not has no derivative");
  if (dt != EM_F32 && dt != EM_F64 && dt != EM_BF16) {
    char kernel[48];
    snprintf(kernel, sizeof kernel, "unary_backward %s", unary_name(op));
    return cpu_bad_dtype(kernel, dt, "float32, float64, bfloat16");
  }
  if (n < 0)
    return em_error(EM_ERR_ARG, "cpu unary_backward %s: n = %lld", unary_name(op), (long long)n);
  if (n == 0) return EM_OK;
  if (!gx || !gy)
    return em_error(EM_ERR_ARG, "cpu unary_backward %s: gx and gy must not be NULL",
                    unary_name(op));
  if (em_unary_grad_needs_x(op) && !x)
    return em_error(EM_ERR_ARG, "cpu unary_backward %s: needs the forward input x, got NULL",
                    unary_name(op));
  if (em_unary_grad_needs_y(op) && !y)
    return em_error(EM_ERR_ARG, "cpu unary_backward %s: needs the forward output y, got NULL",
                    unary_name(op));
  if ((dt == EM_F32 || dt == EM_BF16) && op == EM_GELU) gelu_grad_par(dt, gx, gy, x, n);
  else if (dt == EM_F32) unary_grad_f32(op, n, gx, gy, x, y, alpha, beta);
  else if (dt == EM_BF16 && op == EM_RELU)
    CPU_FOR_RANGES(n > CPU_PAR_MIN, n, lo, hi,
                   relu_grad_bits_bf16((uint16_t *)gx + lo, (const uint16_t *)gy + lo,
                                       (const uint16_t *)x + lo, hi - lo););
  else if (dt == EM_BF16) unary_grad_bf16_via_f32(op, n, gx, gy, x, y, alpha, beta);
  else unary_grad_f64(op, n, gx, gy, x, y, alpha, beta);
  return EM_OK;
}

/* ------------------------------------------------------------------ */
/* gated activations: out = act(gate) * up (em_backend.gated)          */
/* ------------------------------------------------------------------ */

/* The activations and their derivatives, float32: SiLU by the shared
** rules, GELU by this file's erfc form (the unary op's own). Both come
** from one shared part, p = sigmoid(x) or Phi(x): act = x p, and the
** derivative from (x, p), so that the backward, which wants both, computes
** the exponential (or erfc) once. */
static inline float silu_part_f32(float x) { return em_sigmoid_f32(x); }
static inline float silu_grad_part_f32(float x, float sg) { return em_silu_grad_sg_f32(x, sg); }

/* One loop per activation, each inlined where the activation is a
** constant, as un_run: plain loops the compiler vectorises. dgate or dup
** NULL: that output is not wanted. */
static inline __attribute__((always_inline)) void gated_run_f32(float *o, const float *g,
                                                               const float *u, int64_t n,
                                                               float (*part)(float)) {
  for (int64_t i = 0; i < n; i++) o[i] = g[i] * part(g[i]) * u[i];
}

static inline __attribute__((always_inline)) void gated_grad_run_f32(
    float *dg, float *du, const float *dy, const float *g, const float *u, int64_t n,
    float (*part)(float), float (*grad_part)(float, float)) {
  if (dg && du)
    for (int64_t i = 0; i < n; i++) {
      const float p = part(g[i]);
      dg[i] = dy[i] * u[i] * grad_part(g[i], p);
      du[i] = dy[i] * (g[i] * p);
    }
  else if (dg)
    for (int64_t i = 0; i < n; i++) dg[i] = dy[i] * u[i] * grad_part(g[i], part(g[i]));
  else
    for (int64_t i = 0; i < n; i++) du[i] = dy[i] * (g[i] * part(g[i]));
}

CPU_VECTOR_CLONES_512 static void gated_f32(em_unary_op act, float *o, const float *g,
                                            const float *u, int64_t n) {
  if (act == EM_SILU) gated_run_f32(o, g, u, n, silu_part_f32);
  else gated_run_f32(o, g, u, n, gelu_cdf_f32);
}

CPU_VECTOR_CLONES_512 static void gated_grad_f32(em_unary_op act, float *dg, float *du,
                                                 const float *dy, const float *g,
                                                 const float *u, int64_t n) {
  if (act == EM_SILU) gated_grad_run_f32(dg, du, dy, g, u, n, silu_part_f32, silu_grad_part_f32);
  else gated_grad_run_f32(dg, du, dy, g, u, n, gelu_cdf_f32, gelu_grad_cdf_f32);
}

/* float64 by the shared rules (exact GELU through erf, as the unary op). */
static void gated_f64(em_unary_op act, double *o, const double *g, const double *u, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    o[i] = (act == EM_SILU ? u_silu_f64(g[i], 0, 0) : u_gelu_f64(g[i], 0, 0)) * u[i];
}

static void gated_grad_f64(em_unary_op act, double *dg, double *du, const double *dy,
                           const double *g, const double *u, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    const double a = act == EM_SILU ? u_silu_f64(g[i], 0, 0) : u_gelu_f64(g[i], 0, 0);
    const double da = act == EM_SILU ? d_silu_f64(1, g[i], 0, 0, 0) : d_gelu_f64(1, g[i], 0, 0, 0);
    if (dg) dg[i] = dy[i] * u[i] * da;
    if (du) du[i] = dy[i] * a;
  }
}

/* bfloat16 through the float32 loops a chunk at a time, widened on the
** stack and rounded once, as the unary ops (see BF_UNARY_CHUNK). */
static void gated_range_bf16(em_unary_op act, int64_t lo, int64_t hi, uint16_t *o,
                             const uint16_t *g, const uint16_t *u) {
  float gf[BF_UNARY_CHUNK], uf[BF_UNARY_CHUNK];
  for (int64_t i0 = lo; i0 < hi; i0 += BF_UNARY_CHUNK) {
    const int64_t m = hi - i0 < BF_UNARY_CHUNK ? hi - i0 : BF_UNARY_CHUNK;
    widen_run(gf, g + i0, m);
    widen_run(uf, u + i0, m);
    gated_f32(act, gf, gf, uf, m);
    cpu_bf16_round(o + i0, gf, m);
  }
}

static void gated_grad_range_bf16(em_unary_op act, int64_t lo, int64_t hi, uint16_t *dg,
                                  uint16_t *du, const uint16_t *dy, const uint16_t *g,
                                  const uint16_t *u) {
  float yf[BF_UNARY_CHUNK], gf[BF_UNARY_CHUNK], uf[BF_UNARY_CHUNK];
  float dgf[BF_UNARY_CHUNK], duf[BF_UNARY_CHUNK];
  for (int64_t i0 = lo; i0 < hi; i0 += BF_UNARY_CHUNK) {
    const int64_t m = hi - i0 < BF_UNARY_CHUNK ? hi - i0 : BF_UNARY_CHUNK;
    widen_run(yf, dy + i0, m);
    widen_run(gf, g + i0, m);
    widen_run(uf, u + i0, m);
    gated_grad_f32(act, dg ? dgf : NULL, du ? duf : NULL, yf, gf, uf, m);
    if (dg) cpu_bf16_round(dg + i0, dgf, m);
    if (du) cpu_bf16_round(du + i0, duf, m);
  }
}

static em_status gated_check(const char *kernel, em_unary_op act, em_dtype dt, int64_t n) {
  if (act != EM_SILU && act != EM_GELU)
    return em_error(EM_ERR_ARG, "cpu %s: the activation must be silu or gelu, got op %d", kernel,
                    (int)act);
  if (dt != EM_F32 && dt != EM_F64 && dt != EM_BF16)
    return cpu_bad_dtype(kernel, dt, "float32, float64, bfloat16");
  if (n < 0) return em_error(EM_ERR_ARG, "cpu %s: n = %lld", kernel, (long long)n);
  return EM_OK;
}

em_status cpu_gated(int device, em_unary_op act, em_dtype dt, int64_t n, void *out,
                    const void *gate, const void *up) {
  (void)device;
  em_status s = gated_check("gated", act, dt, n);
  if (s || n == 0) return s;
  if (!out || !gate || !up) return em_error(EM_ERR_ARG, "cpu gated: NULL pointer");
  if (dt == EM_F32)
    CPU_FOR_RANGES(n > CPU_PAR_MIN, n, lo, hi,
                   gated_f32(act, (float *)out + lo, (const float *)gate + lo,
                             (const float *)up + lo, hi - lo););
  else if (dt == EM_BF16)
    CPU_FOR_RANGES(n > CPU_PAR_MIN, n, lo, hi,
                   gated_range_bf16(act, lo, hi, out, gate, up););
  else
    CPU_FOR_RANGES(n > CPU_PAR_MIN, n, lo, hi,
                   gated_f64(act, (double *)out + lo, (const double *)gate + lo,
                             (const double *)up + lo, hi - lo););
  return EM_OK;
}

em_status cpu_gated_backward(int device, em_unary_op act, em_dtype dt, int64_t n, void *dgate,
                             void *dup, const void *dout, const void *gate, const void *up) {
  (void)device;
  em_status s = gated_check("gated_backward", act, dt, n);
  if (s || n == 0 || (!dgate && !dup)) return s;
  if (!dout || !gate || !up) return em_error(EM_ERR_ARG, "cpu gated_backward: NULL pointer");
  if (dt == EM_F32)
    CPU_FOR_RANGES(n > CPU_PAR_MIN, n, lo, hi,
                   gated_grad_f32(act, dgate ? (float *)dgate + lo : NULL,
                                  dup ? (float *)dup + lo : NULL, (const float *)dout + lo,
                                  (const float *)gate + lo, (const float *)up + lo, hi - lo););
  else if (dt == EM_BF16)
    CPU_FOR_RANGES(n > CPU_PAR_MIN, n, lo, hi,
                   gated_grad_range_bf16(act, lo, hi, dgate, dup, dout, gate, up););
  else
    CPU_FOR_RANGES(n > CPU_PAR_MIN, n, lo, hi,
                   gated_grad_f64(act, dgate ? (double *)dgate + lo : NULL,
                                  dup ? (double *)dup + lo : NULL, (const double *)dout + lo,
                                  (const double *)gate + lo, (const double *)up + lo, hi - lo););
  return EM_OK;
}
