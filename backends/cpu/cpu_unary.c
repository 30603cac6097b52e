/*
** cpu_unary.c -- unary elementwise ops and their derivatives.
**
** <tgmath.h> makes exp(x) call expf for a float x, so each op is written
** once for T = float and T = double. Constants go through K() so that a
** float expression stays in float.
*/
#include "cpu_internal.h"
#include "cpu_vmath.h"

#include <stdio.h>
#include <tgmath.h>

#define SQRT1_2 0.70710678118654752440     /* 1/sqrt(2) */
#define SQRT_2_PI 0.79788456080286535588   /* sqrt(2/pi) */
#define INV_SQRT_2PI 0.39894228040143267794 /* 1/sqrt(2*pi) */
#define GELU_KAPPA 0.044715

static const char *const unary_names[EM_NUNARY] = {
  "neg", "exp", "log", "sqrt", "rsqrt", "abs", "tanh", "sigmoid", "relu", "gelu", "gelu_tanh",
  "elu", "clamp", "pow_scalar", "affine", "silu", "sin", "cos", "not",
};

static const char *unary_name(em_unary_op op) {
  return (unsigned)op < EM_NUNARY ? unary_names[op] : "unknown";
}

typedef struct unary_ctx {
  em_unary_op op;
  double alpha, beta;
} unary_ctx;

/* out[i] = EXPR(x) over a run; out is contiguous, x may be strided. */
#define UN_RUN(TI, TO, EXPR)                                                    \
  do {                                                                          \
    TO *o_ = (TO *)p[0];                                                        \
    if (s[1] == (int64_t)sizeof(TI)) {                                          \
      const TI *X_ = (const TI *)p[1];                                          \
      for (int64_t i = 0; i < n; i++) { TI x = X_[i]; o_[i] = (EXPR); }         \
    } else {                                                                    \
      const char *px_ = p[1];                                                   \
      for (int64_t i = 0; i < n; i++, px_ += s[1]) {                            \
        TI x = *(const TI *)px_;                                                \
        o_[i] = (EXPR);                                                         \
      }                                                                         \
    }                                                                           \
  } while (0)

/* Numerically stable logistic function. */
#define SIGMOID(x) ((x) >= 0 ? K(1) / (K(1) + exp(-(x))) : exp(x) / (K(1) + exp(x)))

#define FLOAT_UNARY(T)                                                                  \
  const T a = (T)c->alpha, b = (T)c->beta;                                              \
  switch (c->op) {                                                                      \
    case EM_NEG: UN_RUN(T, T, -x); return;                                              \
    case EM_EXP: UN_RUN(T, T, exp(x)); return;                                          \
    case EM_LOG: UN_RUN(T, T, log(x)); return;                                          \
    case EM_SQRT: UN_RUN(T, T, sqrt(x)); return;                                        \
    case EM_RSQRT: UN_RUN(T, T, K(1) / sqrt(x)); return;                                \
    case EM_ABS: UN_RUN(T, T, fabs(x)); return;                                         \
    case EM_TANH: UN_RUN(T, T, tanh(x)); return;                                        \
    case EM_SIGMOID: UN_RUN(T, T, SIGMOID(x)); return;                                  \
    case EM_RELU: UN_RUN(T, T, x < 0 ? K(0) : x); /* NaN passes */ return;              \
    case EM_GELU: UN_RUN(T, T, K(0.5) * x * (K(1) + erf(x * K(SQRT1_2)))); return;      \
    case EM_GELU_TANH:                                                                  \
      UN_RUN(T, T, K(0.5) * x * (K(1) + tanh(K(SQRT_2_PI) * (x + K(GELU_KAPPA) * x * x * x)))); \
      return;                                                                           \
    case EM_ELU: UN_RUN(T, T, x > 0 ? x : a * (exp(x) - K(1))); return;                 \
    case EM_CLAMP: UN_RUN(T, T, x < a ? a : (x > b ? b : x)); return;                   \
    case EM_POW_SCALAR:                                                                 \
      if (a == K(2)) UN_RUN(T, T, x * x);                                               \
      else if (a == K(1)) UN_RUN(T, T, x);                                              \
      else UN_RUN(T, T, pow(x, a));                                                     \
      return;                                                                           \
    case EM_AFFINE: UN_RUN(T, T, a * x + b); return;                                    \
    case EM_SILU: UN_RUN(T, T, x * SIGMOID(x)); return;                                 \
    case EM_SIN: UN_RUN(T, T, sin(x)); return;                                          \
    case EM_COS: UN_RUN(T, T, cos(x)); return;                                          \
    default: return;                                                                    \
  }

static void unary_f64(char **p, const int64_t *s, int64_t n, void *vctx) {
  const unary_ctx *c = vctx;
#define K(v) ((double)(v))
  FLOAT_UNARY(double)
#undef K
}

/* Exact (erf) GELU in float32 through the vectorisable erfc: for x < 0,
** 1 + erf(x/sqrt2) = erfc(|x|/sqrt2) keeps the left tail's relative
** accuracy that 1 + erff(x) loses to cancellation. */
static inline float gelu_one_f32(float x) {
  const float e = cpu_erfc_pos_f32(fabsf(x) * (float)SQRT1_2);
  const float one_plus_erf = x < 0.0f ? e : 2.0f - e;
  return 0.5f * x * one_plus_erf;
}

CPU_VECTOR_CLONES static void gelu_f32(float *y, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = gelu_one_f32(x[i]);
}

/* d/dx x Phi(x) = Phi(x) + x phi(x) */
CPU_VECTOR_CLONES static void gelu_grad_f32(float *gx, const float *gy,
                                            const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    const float v = x[i];
    const float e = cpu_erfc_pos_f32(fabsf(v) * (float)SQRT1_2);
    const float cdf = 0.5f * (v < 0.0f ? e : 2.0f - e);
    const float pdf = (float)INV_SQRT_2PI * cpu_exp_f32(-0.5f * v * v);
    gx[i] = gy[i] * (cdf + v * pdf);
  }
}

/* gelu_grad_f32 over blocks spread across the OpenMP team. */
static void gelu_grad_f32_par(float *gx, const float *gy, const float *x, int64_t n) {
  const int64_t block = 4096, nblk = (n + block - 1) / block;
  CPU_FOR(n > CPU_PAR_MIN, b, nblk, {
    const int64_t lo = b * block, len = n - lo < block ? n - lo : block;
    gelu_grad_f32(gx + lo, gy + lo, x + lo, len);
  });
}

static void unary_f32(char **p, const int64_t *s, int64_t n, void *vctx) {
  const unary_ctx *c = vctx;
  if (c->op == EM_GELU) {
    if (s[1] == (int64_t)sizeof(float)) gelu_f32((float *)p[0], (const float *)p[1], n);
    else UN_RUN(float, float, gelu_one_f32(x));
    return;
  }
#define K(v) ((float)(v))
  FLOAT_UNARY(float)
#undef K
}

/* int64 negation and abs wrap for INT64_MIN instead of overflowing. */
static void unary_i64(char **p, const int64_t *s, int64_t n, void *vctx) {
  const unary_ctx *c = vctx;
  switch (c->op) {
    case EM_NEG: UN_RUN(int64_t, int64_t, (int64_t)(0u - (uint64_t)x)); return;
    case EM_ABS: UN_RUN(int64_t, int64_t, x < 0 ? (int64_t)(0u - (uint64_t)x) : x); return;
    default: return;
  }
}

static void unary_not(char **p, const int64_t *s, int64_t n, void *vctx) {
  (void)vctx;
  UN_RUN(uint8_t, uint8_t, (uint8_t)(x == 0));
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
  else if (x->dtype == EM_I64 && (op == EM_NEG || op == EM_ABS)) fn = unary_i64;
  if (!fn) {
    char kernel[40];
    snprintf(kernel, sizeof kernel, "unary %s", unary_name(op));
    return cpu_bad_dtype(kernel, x->dtype,
                         op == EM_NOT                    ? "bool"
                         : op == EM_NEG || op == EM_ABS ? "float32, float64, int64"
                                                         : "float32, float64");
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

/* gx[i] = EXPR(g, x, y) with g = gy[i]; all arrays contiguous. */
#define GRAD_LOOP(T, EXPR)                                                      \
  do {                                                                          \
    CPU_FOR(n > CPU_PAR_MIN, i, n,                                              \
      const T g = GY[i];                                                        \
      const T x = X ? X[i] : K(0);                                              \
      const T y = Y ? Y[i] : K(0);                                              \
      (void)g;                                                                  \
      (void)x;                                                                  \
      (void)y;                                                                  \
      GX[i] = (EXPR););                                                         \
  } while (0)

/* The derivatives PyTorch uses (torch/csrc/autograd/FunctionsManual.cpp). */
#define FLOAT_UNARY_GRAD(T)                                                              \
  T *GX = gx;                                                                           \
  const T *GY = gy, *X = x, *Y = y;                                                     \
  const T a = (T)alpha, b = (T)beta;                                                    \
  switch (op) {                                                                         \
    case EM_NEG: GRAD_LOOP(T, -g); break;                                               \
    case EM_EXP: GRAD_LOOP(T, g * y); break;                                            \
    case EM_LOG: GRAD_LOOP(T, g / x); break;                                            \
    case EM_SQRT: GRAD_LOOP(T, g / (K(2) * y)); break;                                  \
    case EM_RSQRT: GRAD_LOOP(T, K(-0.5) * g * y * y * y); break;                        \
    case EM_ABS: GRAD_LOOP(T, x > 0 ? g : (x < 0 ? -g : K(0))); break;                  \
    case EM_TANH: GRAD_LOOP(T, g * (K(1) - y * y)); break;                              \
    case EM_SIGMOID: GRAD_LOOP(T, g * y * (K(1) - y)); break;                           \
    case EM_RELU: GRAD_LOOP(T, x > 0 ? g : K(0)); break;                                \
    case EM_GELU:                                                                       \
      GRAD_LOOP(T, g * (K(0.5) * (K(1) + erf(x * K(SQRT1_2))) +                         \
                        x * K(INV_SQRT_2PI) * exp(K(-0.5) * x * x)));                   \
      break;                                                                            \
    case EM_GELU_TANH:                                                                  \
      GRAD_LOOP(T, g * gelu_tanh_grad_##T(x));                                          \
      break;                                                                            \
    case EM_ELU: GRAD_LOOP(T, x > 0 ? g : g * a * exp(x)); break;                       \
    case EM_CLAMP: GRAD_LOOP(T, (x >= a && x <= b) ? g : K(0)); break;                  \
    case EM_POW_SCALAR:                                                                 \
      if (a == K(0)) GRAD_LOOP(T, K(0));                                                \
      else GRAD_LOOP(T, g * a * pow(x, a - K(1)));                                      \
      break;                                                                            \
    case EM_AFFINE: GRAD_LOOP(T, g * a); break;                                         \
    case EM_SILU: GRAD_LOOP(T, g * silu_grad_##T(x)); break;                            \
    case EM_SIN: GRAD_LOOP(T, g * cos(x)); break;                                       \
    case EM_COS: GRAD_LOOP(T, -g * sin(x)); break;                                      \
    default: break;                                                                     \
  }

#define K(v) ((float)(v))
static inline float gelu_tanh_grad_float(float x) {
  float inner = K(SQRT_2_PI) * (x + K(GELU_KAPPA) * x * x * x);
  float t = tanh(inner);
  return K(0.5) * (K(1) + t) +
         K(0.5) * x * (K(1) - t * t) * K(SQRT_2_PI) * (K(1) + K(3 * GELU_KAPPA) * x * x);
}
static inline float silu_grad_float(float x) {
  float sg = SIGMOID(x);
  return sg * (K(1) + x * (K(1) - sg));
}
static void unary_grad_f32(em_unary_op op, int64_t n, void *gx, const void *gy, const void *x,
                           const void *y, double alpha, double beta) {
  FLOAT_UNARY_GRAD(float)
}
#undef K

#define K(v) ((double)(v))
static inline double gelu_tanh_grad_double(double x) {
  double inner = K(SQRT_2_PI) * (x + K(GELU_KAPPA) * x * x * x);
  double t = tanh(inner);
  return K(0.5) * (K(1) + t) +
         K(0.5) * x * (K(1) - t * t) * K(SQRT_2_PI) * (K(1) + K(3 * GELU_KAPPA) * x * x);
}
static inline double silu_grad_double(double x) {
  double sg = SIGMOID(x);
  return sg * (K(1) + x * (K(1) - sg));
}
static void unary_grad_f64(em_unary_op op, int64_t n, void *gx, const void *gy, const void *x,
                           const void *y, double alpha, double beta) {
  FLOAT_UNARY_GRAD(double)
}
#undef K

/* Which forward tensors each derivative reads. */
static bool grad_needs_x(em_unary_op op) {
  switch (op) {
    case EM_LOG: case EM_ABS: case EM_RELU: case EM_GELU: case EM_GELU_TANH: case EM_ELU:
    case EM_CLAMP: case EM_POW_SCALAR: case EM_SILU: case EM_SIN: case EM_COS:
      return true;
    default:
      return false;
  }
}

static bool grad_needs_y(em_unary_op op) {
  return op == EM_EXP || op == EM_SQRT || op == EM_RSQRT || op == EM_TANH || op == EM_SIGMOID;
}

em_status cpu_unary_backward(int device, em_unary_op op, em_dtype dt, int64_t n, void *gx,
                             const void *gy, const void *x, const void *y, double alpha,
                             double beta) {
  (void)device;
  if ((unsigned)op >= EM_NUNARY)
    return em_error(EM_ERR_ARG, "cpu unary_backward: unknown op %d", (int)op);
  if (op == EM_NOT)
    return em_error(EM_ERR_ARG, "cpu unary_backward not: logical not has no derivative");
  if (dt != EM_F32 && dt != EM_F64) {
    char kernel[48];
    snprintf(kernel, sizeof kernel, "unary_backward %s", unary_name(op));
    return cpu_bad_dtype(kernel, dt, "float32, float64");
  }
  if (n < 0)
    return em_error(EM_ERR_ARG, "cpu unary_backward %s: n = %lld", unary_name(op), (long long)n);
  if (n == 0) return EM_OK;
  if (!gx || !gy)
    return em_error(EM_ERR_ARG, "cpu unary_backward %s: gx and gy must not be NULL",
                    unary_name(op));
  if (grad_needs_x(op) && !x)
    return em_error(EM_ERR_ARG, "cpu unary_backward %s: needs the forward input x, got NULL",
                    unary_name(op));
  if (grad_needs_y(op) && !y)
    return em_error(EM_ERR_ARG, "cpu unary_backward %s: needs the forward output y, got NULL",
                    unary_name(op));
  if (dt == EM_F32 && op == EM_GELU) gelu_grad_f32_par(gx, gy, x, n);
  else if (dt == EM_F32) unary_grad_f32(op, n, gx, gy, x, y, alpha, beta);
  else unary_grad_f64(op, n, gx, gy, x, y, alpha, beta);
  return EM_OK;
}
