/*
** cpu_unary_tmpl.h -- unary ops and their derivatives for one type;
** included by cpu_unary.c with T and SUF set, and IS_FLOAT 1 for float
** and double, which get the ops and derivatives (<tgmath.h> makes exp(x)
** call expf for a float x). K() keeps a constant in T, so that a float
** expression stays in float.
**
** Runs are written once over an op function and always inlined into the
** dispatcher, where the op is a constant, so each case becomes a plain
** loop the compiler vectorises.
*/

#define FN(name) CPU_CAT(name, SUF)
#define K(v) ((T)(v))

/* out[i] = f(x, a, b) over a run; out is contiguous, x may be strided. */
static inline __attribute__((always_inline)) void FN(un_run)(char **p, const int64_t *s,
                                                            int64_t n, T (*f)(T, T, T), T a,
                                                            T b) {
  T *o = (T *)p[0];
  if (s[1] == (int64_t)sizeof(T)) {
    const T *X = (const T *)p[1];
    for (int64_t i = 0; i < n; i++) o[i] = f(X[i], a, b);
  } else {
    const char *px = p[1];
    for (int64_t i = 0; i < n; i++, px += s[1]) o[i] = f(*(const T *)px, a, b);
  }
}

#if IS_FLOAT

/* The op and derivative functions share one signature, so most ignore
** some parameters. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"

/* Numerically stable logistic function. */
static inline T FN(sigmoid)(T x) { return x >= 0 ? K(1) / (K(1) + exp(-x)) : exp(x) / (K(1) + exp(x)); }

/* The ops, f(x, a, b) with a = alpha and b = beta (unused by most). */
static inline T FN(u_neg)(T x, T a, T b) { return -x; }
static inline T FN(u_exp)(T x, T a, T b) { return exp(x); }
static inline T FN(u_log)(T x, T a, T b) { return log(x); }
static inline T FN(u_sqrt)(T x, T a, T b) { return sqrt(x); }
static inline T FN(u_rsqrt)(T x, T a, T b) { return K(1) / sqrt(x); }
static inline T FN(u_abs)(T x, T a, T b) { return fabs(x); }
static inline T FN(u_tanh)(T x, T a, T b) { return tanh(x); }
static inline T FN(u_sigmoid)(T x, T a, T b) { return FN(sigmoid)(x); }
/* NaN passes */
static inline T FN(u_relu)(T x, T a, T b) { return x < 0 ? K(0) : x; }
static inline T FN(u_gelu)(T x, T a, T b) {
  return K(0.5) * x * (K(1) + erf(x * K(SQRT1_2)));
}
static inline T FN(u_gelu_tanh)(T x, T a, T b) {
  return K(0.5) * x * (K(1) + tanh(K(SQRT_2_PI) * (x + K(GELU_KAPPA) * x * x * x)));
}
static inline T FN(u_elu)(T x, T a, T b) { return x > 0 ? x : a * (exp(x) - K(1)); }
static inline T FN(u_clamp)(T x, T a, T b) { return x < a ? a : (x > b ? b : x); }
static inline T FN(u_square)(T x, T a, T b) { return x * x; }
static inline T FN(u_ident)(T x, T a, T b) { return x; }
static inline T FN(u_pow)(T x, T a, T b) { return pow(x, a); }
static inline T FN(u_affine)(T x, T a, T b) { return a * x + b; }
static inline T FN(u_silu)(T x, T a, T b) { return x * FN(sigmoid)(x); }
static inline T FN(u_sin)(T x, T a, T b) { return sin(x); }
static inline T FN(u_cos)(T x, T a, T b) { return cos(x); }

#pragma GCC diagnostic pop

static void FN(unary_ops)(char **p, const int64_t *s, int64_t n, const unary_ctx *c) {
  const T a = (T)c->alpha, b = (T)c->beta;
  switch (c->op) {
    case EM_NEG: FN(un_run)(p, s, n, FN(u_neg), a, b); return;
    case EM_EXP: FN(un_run)(p, s, n, FN(u_exp), a, b); return;
    case EM_LOG: FN(un_run)(p, s, n, FN(u_log), a, b); return;
    case EM_SQRT: FN(un_run)(p, s, n, FN(u_sqrt), a, b); return;
    case EM_RSQRT: FN(un_run)(p, s, n, FN(u_rsqrt), a, b); return;
    case EM_ABS: FN(un_run)(p, s, n, FN(u_abs), a, b); return;
    case EM_TANH: FN(un_run)(p, s, n, FN(u_tanh), a, b); return;
    case EM_SIGMOID: FN(un_run)(p, s, n, FN(u_sigmoid), a, b); return;
    case EM_RELU: FN(un_run)(p, s, n, FN(u_relu), a, b); return;
    case EM_GELU: FN(un_run)(p, s, n, FN(u_gelu), a, b); return;
    case EM_GELU_TANH: FN(un_run)(p, s, n, FN(u_gelu_tanh), a, b); return;
    case EM_ELU: FN(un_run)(p, s, n, FN(u_elu), a, b); return;
    case EM_CLAMP: FN(un_run)(p, s, n, FN(u_clamp), a, b); return;
    case EM_POW_SCALAR:
      if (a == K(2)) FN(un_run)(p, s, n, FN(u_square), a, b);
      else if (a == K(1)) FN(un_run)(p, s, n, FN(u_ident), a, b);
      else FN(un_run)(p, s, n, FN(u_pow), a, b);
      return;
    case EM_AFFINE: FN(un_run)(p, s, n, FN(u_affine), a, b); return;
    case EM_SILU: FN(un_run)(p, s, n, FN(u_silu), a, b); return;
    case EM_SIN: FN(un_run)(p, s, n, FN(u_sin), a, b); return;
    case EM_COS: FN(un_run)(p, s, n, FN(u_cos), a, b); return;
    default: return;
  }
}

/* ---- derivatives: gx = f(g, x, y, a, b), PyTorch's formulas
** (torch/csrc/autograd/FunctionsManual.cpp); all arrays contiguous, x or
** y NULL when the op does not read it. */

static inline __attribute__((always_inline)) void FN(grad_run)(int64_t n, T *GX, const T *GY,
                                                              const T *X, const T *Y,
                                                              T (*f)(T, T, T, T, T), T a, T b) {
  CPU_FOR(n > CPU_PAR_MIN, i, n,
    const T x = X ? X[i] : K(0);
    const T y = Y ? Y[i] : K(0);
    GX[i] = f(GY[i], x, y, a, b););
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"

static inline T FN(gelu_tanh_grad)(T x) {
  T inner = K(SQRT_2_PI) * (x + K(GELU_KAPPA) * x * x * x);
  T t = tanh(inner);
  return K(0.5) * (K(1) + t) +
         K(0.5) * x * (K(1) - t * t) * K(SQRT_2_PI) * (K(1) + K(3 * GELU_KAPPA) * x * x);
}

static inline T FN(silu_grad)(T x) {
  T sg = FN(sigmoid)(x);
  return sg * (K(1) + x * (K(1) - sg));
}

static inline T FN(d_neg)(T g, T x, T y, T a, T b) { return -g; }
static inline T FN(d_exp)(T g, T x, T y, T a, T b) { return g * y; }
static inline T FN(d_log)(T g, T x, T y, T a, T b) { return g / x; }
static inline T FN(d_sqrt)(T g, T x, T y, T a, T b) {
  return g / (K(2) * y);
}
static inline T FN(d_rsqrt)(T g, T x, T y, T a, T b) {
  return K(-0.5) * g * y * y * y;
}
static inline T FN(d_abs)(T g, T x, T y, T a, T b) {
  return x > 0 ? g : (x < 0 ? -g : K(0));
}
static inline T FN(d_tanh)(T g, T x, T y, T a, T b) {
  return g * (K(1) - y * y);
}
static inline T FN(d_sigmoid)(T g, T x, T y, T a, T b) {
  return g * y * (K(1) - y);
}
static inline T FN(d_relu)(T g, T x, T y, T a, T b) {
  return x > 0 ? g : K(0);
}
static inline T FN(d_gelu)(T g, T x, T y, T a, T b) {
  return g * (K(0.5) * (K(1) + erf(x * K(SQRT1_2))) +
              x * K(INV_SQRT_2PI) * exp(K(-0.5) * x * x));
}
static inline T FN(d_gelu_tanh)(T g, T x, T y, T a, T b) {
  return g * FN(gelu_tanh_grad)(x);
}
static inline T FN(d_elu)(T g, T x, T y, T a, T b) {
  return x > 0 ? g : g * a * exp(x);
}
static inline T FN(d_clamp)(T g, T x, T y, T a, T b) {
  return (x >= a && x <= b) ? g : K(0);
}
static inline T FN(d_zero)(T g, T x, T y, T a, T b) { return K(0); }
static inline T FN(d_pow)(T g, T x, T y, T a, T b) {
  return g * a * pow(x, a - K(1));
}
static inline T FN(d_affine)(T g, T x, T y, T a, T b) { return g * a; }
static inline T FN(d_silu)(T g, T x, T y, T a, T b) {
  return g * FN(silu_grad)(x);
}
static inline T FN(d_sin)(T g, T x, T y, T a, T b) { return g * cos(x); }
static inline T FN(d_cos)(T g, T x, T y, T a, T b) { return -g * sin(x); }

#pragma GCC diagnostic pop

static void FN(unary_grad)(em_unary_op op, int64_t n, T *gx, const T *gy, const T *x,
                           const T *y, double alpha, double beta) {
  const T a = (T)alpha, b = (T)beta;
  switch (op) {
    case EM_NEG: FN(grad_run)(n, gx, gy, x, y, FN(d_neg), a, b); break;
    case EM_EXP: FN(grad_run)(n, gx, gy, x, y, FN(d_exp), a, b); break;
    case EM_LOG: FN(grad_run)(n, gx, gy, x, y, FN(d_log), a, b); break;
    case EM_SQRT: FN(grad_run)(n, gx, gy, x, y, FN(d_sqrt), a, b); break;
    case EM_RSQRT: FN(grad_run)(n, gx, gy, x, y, FN(d_rsqrt), a, b); break;
    case EM_ABS: FN(grad_run)(n, gx, gy, x, y, FN(d_abs), a, b); break;
    case EM_TANH: FN(grad_run)(n, gx, gy, x, y, FN(d_tanh), a, b); break;
    case EM_SIGMOID: FN(grad_run)(n, gx, gy, x, y, FN(d_sigmoid), a, b); break;
    case EM_RELU: FN(grad_run)(n, gx, gy, x, y, FN(d_relu), a, b); break;
    case EM_GELU: FN(grad_run)(n, gx, gy, x, y, FN(d_gelu), a, b); break;
    case EM_GELU_TANH: FN(grad_run)(n, gx, gy, x, y, FN(d_gelu_tanh), a, b); break;
    case EM_ELU: FN(grad_run)(n, gx, gy, x, y, FN(d_elu), a, b); break;
    case EM_CLAMP: FN(grad_run)(n, gx, gy, x, y, FN(d_clamp), a, b); break;
    case EM_POW_SCALAR:
      if (a == K(0)) FN(grad_run)(n, gx, gy, x, y, FN(d_zero), a, b);
      else FN(grad_run)(n, gx, gy, x, y, FN(d_pow), a, b);
      break;
    case EM_AFFINE: FN(grad_run)(n, gx, gy, x, y, FN(d_affine), a, b); break;
    case EM_SILU: FN(grad_run)(n, gx, gy, x, y, FN(d_silu), a, b); break;
    case EM_SIN: FN(grad_run)(n, gx, gy, x, y, FN(d_sin), a, b); break;
    case EM_COS: FN(grad_run)(n, gx, gy, x, y, FN(d_cos), a, b); break;
    default: break;
  }
}

#endif /* IS_FLOAT */

#undef K
#undef FN
