/*
** ember_unary_rules.h -- the element rules of the unary ops and of their
** derivatives, written once for the CPU backend (cpu_unary_tmpl.h) and the
** CUDA kernels (cuda_elementwise.cu), which gpu_vs_cpu compares.
**
** A template, so no include guard: the includer includes it once per
** compute type, having defined
**   ACC       the compute type (float or double; bfloat16 computes in float);
**   FN(name)  the name each function gets for that type (CPU: name_f32 ...;
**             C++: the name itself, so the types' copies are overloads);
**   m_exp, m_log, m_sqrt, m_fabs, m_tanh, m_erf, m_pow, m_sin, m_cos,
**   m_floor, m_ceil, m_rint (halves to even), m_trunc, m_log1p, m_expm1,
**   m_atan, m_asin, m_acos, m_lgamma, m_erfc
**             the math functions for ACC (C: <tgmath.h>'s; CUDA: the
**             overloads of cuda_kernels.cuh).
** Functions are static inline in C, __device__ __forceinline__ in CUDA
** and its emulator, so that each op is inlined into its loop or kernel:
** the CPU's loops vectorise only because they are.
**
** Ops: u_OP(x, a, b) with a = alpha and b = beta (unused by most).
** Derivatives: d_OP(g, x, y, a, b) = g times dOP/dx, PyTorch's formulas
** (torch/csrc/autograd/FunctionsManual.cpp), from the input x or the
** output y, whichever em_unary_grad_needs_x / _y names.
*/

#ifndef EM_UNARY_RULES_CONSTANTS
#define EM_UNARY_RULES_CONSTANTS
#define EM_SQRT1_2 0.70710678118654752440      /* 1/sqrt(2) */
#define EM_SQRT_2_PI 0.79788456080286535588    /* sqrt(2/pi) */
#define EM_INV_SQRT_2PI 0.39894228040143267794 /* 1/sqrt(2*pi) */
#define EM_GELU_KAPPA 0.044715
#endif

#if defined(__CUDACC__) || defined(EMC_EMU)
#define EM_UR_FN __device__ __forceinline__
#elif defined(__GNUC__)
/* Always inlined, so that each rule runs in the vector build of the
** (cloned) loop that calls it: an out-of-line copy is a baseline build,
** where cpu_vmath.h's fmaf is a libm call (GCC kept float's exp out of
** line once it grew). */
#define EM_UR_FN static inline __attribute__((always_inline))
#else
#define EM_UR_FN static inline
#endif
/* A constant in ACC, so that a float expression stays in float. */
#define EM_UR_K(v) ((ACC)(v))

/* The op and derivative functions share one signature per kind, so most
** ignore some parameters. */
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#endif

/* Numerically stable logistic function: e = e^-|x| is in (0, 1], so
** neither side overflows, and one exponential serves both (a select, not
** a branch, so the CPU's loops vectorise). */
EM_UR_FN ACC FN(em_sigmoid)(ACC x) {
  const ACC e = m_exp(-m_fabs(x));
  return x >= 0 ? EM_UR_K(1) / (EM_UR_K(1) + e) : e / (EM_UR_K(1) + e);
}

/* ---- ops ---- */
EM_UR_FN ACC FN(u_neg)(ACC x, ACC a, ACC b) { return -x; }
EM_UR_FN ACC FN(u_exp)(ACC x, ACC a, ACC b) { return m_exp(x); }
EM_UR_FN ACC FN(u_log)(ACC x, ACC a, ACC b) { return m_log(x); }
EM_UR_FN ACC FN(u_sqrt)(ACC x, ACC a, ACC b) { return m_sqrt(x); }
EM_UR_FN ACC FN(u_rsqrt)(ACC x, ACC a, ACC b) { return EM_UR_K(1) / m_sqrt(x); }
EM_UR_FN ACC FN(u_abs)(ACC x, ACC a, ACC b) { return m_fabs(x); }
EM_UR_FN ACC FN(u_tanh)(ACC x, ACC a, ACC b) { return m_tanh(x); }
EM_UR_FN ACC FN(u_sigmoid)(ACC x, ACC a, ACC b) { return FN(em_sigmoid)(x); }
/* NaN passes */
EM_UR_FN ACC FN(u_relu)(ACC x, ACC a, ACC b) { return x < 0 ? EM_UR_K(0) : x; }
EM_UR_FN ACC FN(u_gelu)(ACC x, ACC a, ACC b) {
  return EM_UR_K(0.5) * x * (EM_UR_K(1) + m_erf(x * EM_UR_K(EM_SQRT1_2)));
}
EM_UR_FN ACC FN(u_gelu_tanh)(ACC x, ACC a, ACC b) {
  return EM_UR_K(0.5) * x *
         (EM_UR_K(1) + m_tanh(EM_UR_K(EM_SQRT_2_PI) * (x + EM_UR_K(EM_GELU_KAPPA) * x * x * x)));
}
EM_UR_FN ACC FN(u_elu)(ACC x, ACC a, ACC b) { return x > 0 ? x : a * (m_exp(x) - EM_UR_K(1)); }
/* min(max(x, a), b), as torch.clamp: with a > b every element is b (and d_clamp is 0) */
EM_UR_FN ACC FN(u_clamp)(ACC x, ACC a, ACC b) {
  ACC lo = x < a ? a : x;
  return lo > b ? b : lo;
}
/* pow_scalar is u_square for a = 2, u_ident for a = 1 and u_pow otherwise
** (exact where pow need not be, and cheaper) */
EM_UR_FN ACC FN(u_square)(ACC x, ACC a, ACC b) { return x * x; }
EM_UR_FN ACC FN(u_ident)(ACC x, ACC a, ACC b) { return x; }
EM_UR_FN ACC FN(u_pow)(ACC x, ACC a, ACC b) { return m_pow(x, a); }
EM_UR_FN ACC FN(u_affine)(ACC x, ACC a, ACC b) { return a * x + b; }
EM_UR_FN ACC FN(u_silu)(ACC x, ACC a, ACC b) { return x * FN(em_sigmoid)(x); }
EM_UR_FN ACC FN(u_sin)(ACC x, ACC a, ACC b) { return m_sin(x); }
EM_UR_FN ACC FN(u_cos)(ACC x, ACC a, ACC b) { return m_cos(x); }
EM_UR_FN ACC FN(u_floor)(ACC x, ACC a, ACC b) { return m_floor(x); }
EM_UR_FN ACC FN(u_ceil)(ACC x, ACC a, ACC b) { return m_ceil(x); }
/* halves to even, as torch.round */
EM_UR_FN ACC FN(u_round)(ACC x, ACC a, ACC b) { return m_rint(x); }
EM_UR_FN ACC FN(u_trunc)(ACC x, ACC a, ACC b) { return m_trunc(x); }
EM_UR_FN ACC FN(u_sign)(ACC x, ACC a, ACC b) { return (ACC)((x > 0) - (x < 0)); }
EM_UR_FN ACC FN(u_log1p)(ACC x, ACC a, ACC b) { return m_log1p(x); }
EM_UR_FN ACC FN(u_expm1)(ACC x, ACC a, ACC b) { return m_expm1(x); }
EM_UR_FN ACC FN(u_erf)(ACC x, ACC a, ACC b) { return m_erf(x); }
EM_UR_FN ACC FN(u_atan)(ACC x, ACC a, ACC b) { return m_atan(x); }
EM_UR_FN ACC FN(u_asin)(ACC x, ACC a, ACC b) { return m_asin(x); }
EM_UR_FN ACC FN(u_acos)(ACC x, ACC a, ACC b) { return m_acos(x); }
EM_UR_FN ACC FN(u_lgamma)(ACC x, ACC a, ACC b) { return m_lgamma(x); }

/* erfinv: Giles' approximation ("Approximating the erfinv function", GPU
** Computing Gems, 2011; relative error below 4e-7 in the centre, 1e-4 in the far
** tail), then three Newton steps, which bring double to its precision. erfinv(+-1) = +-inf,
** |y| > 1 gives NaN (the log of a negative number), as torch.erfinv. */
EM_UR_FN ACC FN(em_erfinv)(ACC y) {
  ACC w = -m_log((EM_UR_K(1) - y) * (EM_UR_K(1) + y)), p;
  if (w < EM_UR_K(5)) {
    w = w - EM_UR_K(2.5);
    p = EM_UR_K(2.81022636e-08);
    p = EM_UR_K(3.43273939e-07) + p * w;
    p = EM_UR_K(-3.5233877e-06) + p * w;
    p = EM_UR_K(-4.39150654e-06) + p * w;
    p = EM_UR_K(0.00021858087) + p * w;
    p = EM_UR_K(-0.00125372503) + p * w;
    p = EM_UR_K(-0.00417768164) + p * w;
    p = EM_UR_K(0.246640727) + p * w;
    p = EM_UR_K(1.50140941) + p * w;
  } else {
    w = m_sqrt(w) - EM_UR_K(3);
    p = EM_UR_K(-0.000200214257);
    p = EM_UR_K(0.000100950558) + p * w;
    p = EM_UR_K(0.00134934322) + p * w;
    p = EM_UR_K(-0.00367342844) + p * w;
    p = EM_UR_K(0.00573950773) + p * w;
    p = EM_UR_K(-0.0076224613) + p * w;
    p = EM_UR_K(0.00943887047) + p * w;
    p = EM_UR_K(1.00167406) + p * w;
    p = EM_UR_K(2.83297682) + p * w;
  }
  const ACC ay = m_fabs(y);
  if (ay == EM_UR_K(1)) return y / (EM_UR_K(1) - ay); /* +-inf */
  if (ay == EM_UR_K(0)) return y;                       /* +-0 keeps its sign, as torch */
  /* Newton on |y|: erf'(r) = 2/sqrt(pi) e^(-r^2); above 0.5 on
  ** erfc(r) = 1 - |y|, exact there, which keeps the tail's accuracy that
  ** erf(r), rounded near 1, loses (erfinv(1 - 1e-9) to 1e-16, not 1e-9) */
  ACC r = p * ay;
  for (int i = 0; i < 3; i++) { /* the tail's first guess is 1e-4 off */
    const ACC f = ay > EM_UR_K(0.5) ? (EM_UR_K(1) - ay) - m_erfc(r) : m_erf(r) - ay;
    r = r - f / (EM_UR_K(1.1283791670955126) * m_exp(-r * r));
  }
  return y < EM_UR_K(0) ? -r : r;
}
EM_UR_FN ACC FN(u_erfinv)(ACC x, ACC a, ACC b) { return FN(em_erfinv)(x); }

/* digamma, as torch's calc_digamma (aten/src/ATen/native/Math.h):
** digamma(+-0) = -+inf, NaN at the negative integers, the reflection
** digamma(1 - x) - pi / tan(pi x) below 0, the recurrence up to 10 and the
** asymptotic series there. */
EM_UR_FN ACC FN(em_digamma_pos)(ACC x) {
  ACC result = EM_UR_K(0);
  while (x < EM_UR_K(10)) {
    result -= EM_UR_K(1) / x;
    x += EM_UR_K(1);
  }
  const ACC z = EM_UR_K(1) / (x * x);
  const ACC poly =
      z * (EM_UR_K(8.33333333333333333333E-2) +
           z * (EM_UR_K(-8.33333333333333333333E-3) +
                z * (EM_UR_K(3.96825396825396825397E-3) +
                     z * (EM_UR_K(-4.16666666666666666667E-3) +
                          z * (EM_UR_K(7.57575757575757575758E-3) +
                               z * (EM_UR_K(-2.10927960927960927961E-2) +
                                    z * EM_UR_K(8.33333333333333333333E-2)))))));
  return result + m_log(x) - EM_UR_K(0.5) / x - poly;
}
EM_UR_FN ACC FN(em_digamma)(ACC x) {
  const ACC pi = EM_UR_K(3.14159265358979323846);
  if (x == EM_UR_K(0)) return -EM_UR_K(1) / x; /* 1/x is +inf for +0, -inf for -0 */
  if (x < EM_UR_K(0)) {
    if (x == m_trunc(x)) return (x - x) / (x - x); /* NaN */
    const ACC r = x - m_trunc(x); /* modf's fraction: pi / tan(pi r) = pi / tan(pi x) */
    return FN(em_digamma_pos)(EM_UR_K(1) - x) - pi * m_cos(pi * r) / m_sin(pi * r);
  }
  return FN(em_digamma_pos)(x);
}
/* trigamma, as torch's calc_trigamma: digamma's derivative */
EM_UR_FN ACC FN(em_trigamma)(ACC x) {
  const ACC pi = EM_UR_K(3.14159265358979323846);
  ACC sign = EM_UR_K(1), result = EM_UR_K(0);
  if (x < EM_UR_K(0.5)) {
    const ACC s = m_sin(pi * x);
    sign = EM_UR_K(-1);
    result -= pi * pi / (s * s);
    x = EM_UR_K(1) - x;
  }
  for (int i = 0; i < 6; i++) {
    result += EM_UR_K(1) / (x * x);
    x += EM_UR_K(1);
  }
  const ACC ixx = EM_UR_K(1) / (x * x);
  result += (EM_UR_K(1) + EM_UR_K(1) / (EM_UR_K(2) * x) +
             ixx * (EM_UR_K(1) / EM_UR_K(6) -
                    ixx * (EM_UR_K(1) / EM_UR_K(30) - ixx * (EM_UR_K(1) / EM_UR_K(42))))) /
            x;
  return sign * result;
}
EM_UR_FN ACC FN(u_digamma)(ACC x, ACC a, ACC b) { return FN(em_digamma)(x); }

/* ---- derivatives ---- */
EM_UR_FN ACC FN(em_gelu_tanh_grad)(ACC x) {
  ACC inner = EM_UR_K(EM_SQRT_2_PI) * (x + EM_UR_K(EM_GELU_KAPPA) * x * x * x);
  ACC t = m_tanh(inner);
  return EM_UR_K(0.5) * (EM_UR_K(1) + t) + EM_UR_K(0.5) * x * (EM_UR_K(1) - t * t) *
                                               EM_UR_K(EM_SQRT_2_PI) *
                                               (EM_UR_K(1) + EM_UR_K(3 * EM_GELU_KAPPA) * x * x);
}

/* SiLU's derivative from sg = sigmoid(x): a fused SwiGLU backward has sg
** for SiLU itself, x * sg, and computes the exponential once. */
EM_UR_FN ACC FN(em_silu_grad_sg)(ACC x, ACC sg) { return sg * (EM_UR_K(1) + x * (EM_UR_K(1) - sg)); }
EM_UR_FN ACC FN(em_silu_grad)(ACC x) { return FN(em_silu_grad_sg)(x, FN(em_sigmoid)(x)); }

EM_UR_FN ACC FN(d_neg)(ACC g, ACC x, ACC y, ACC a, ACC b) { return -g; }
EM_UR_FN ACC FN(d_exp)(ACC g, ACC x, ACC y, ACC a, ACC b) { return g * y; }
EM_UR_FN ACC FN(d_log)(ACC g, ACC x, ACC y, ACC a, ACC b) { return g / x; }
EM_UR_FN ACC FN(d_sqrt)(ACC g, ACC x, ACC y, ACC a, ACC b) { return g / (EM_UR_K(2) * y); }
EM_UR_FN ACC FN(d_rsqrt)(ACC g, ACC x, ACC y, ACC a, ACC b) {
  return EM_UR_K(-0.5) * g * y * y * y;
}
EM_UR_FN ACC FN(d_abs)(ACC g, ACC x, ACC y, ACC a, ACC b) {
  return x > 0 ? g : (x < 0 ? -g : EM_UR_K(0));
}
EM_UR_FN ACC FN(d_tanh)(ACC g, ACC x, ACC y, ACC a, ACC b) { return g * (EM_UR_K(1) - y * y); }
EM_UR_FN ACC FN(d_sigmoid)(ACC g, ACC x, ACC y, ACC a, ACC b) {
  return g * y * (EM_UR_K(1) - y);
}
EM_UR_FN ACC FN(d_relu)(ACC g, ACC x, ACC y, ACC a, ACC b) { return x > 0 ? g : EM_UR_K(0); }
EM_UR_FN ACC FN(d_gelu)(ACC g, ACC x, ACC y, ACC a, ACC b) {
  return g * (EM_UR_K(0.5) * (EM_UR_K(1) + m_erf(x * EM_UR_K(EM_SQRT1_2))) +
              x * EM_UR_K(EM_INV_SQRT_2PI) * m_exp(EM_UR_K(-0.5) * x * x));
}
EM_UR_FN ACC FN(d_gelu_tanh)(ACC g, ACC x, ACC y, ACC a, ACC b) {
  return g * FN(em_gelu_tanh_grad)(x);
}
EM_UR_FN ACC FN(d_elu)(ACC g, ACC x, ACC y, ACC a, ACC b) { return x > 0 ? g : g * a * m_exp(x); }
EM_UR_FN ACC FN(d_clamp)(ACC g, ACC x, ACC y, ACC a, ACC b) {
  return (x >= a && x <= b) ? g : EM_UR_K(0);
}
/* pow_scalar's for a = 0 (x^0 is constant), and the piecewise constant
** ops' (floor, ceil, round, trunc, sign): PyTorch's zero gradient */
EM_UR_FN ACC FN(d_zero)(ACC g, ACC x, ACC y, ACC a, ACC b) { return EM_UR_K(0); }
EM_UR_FN ACC FN(d_pow)(ACC g, ACC x, ACC y, ACC a, ACC b) {
  return g * a * m_pow(x, a - EM_UR_K(1));
}
EM_UR_FN ACC FN(d_affine)(ACC g, ACC x, ACC y, ACC a, ACC b) { return g * a; }
EM_UR_FN ACC FN(d_silu)(ACC g, ACC x, ACC y, ACC a, ACC b) { return g * FN(em_silu_grad)(x); }
EM_UR_FN ACC FN(d_sin)(ACC g, ACC x, ACC y, ACC a, ACC b) { return g * m_cos(x); }
EM_UR_FN ACC FN(d_cos)(ACC g, ACC x, ACC y, ACC a, ACC b) { return -g * m_sin(x); }
EM_UR_FN ACC FN(d_log1p)(ACC g, ACC x, ACC y, ACC a, ACC b) { return g / (EM_UR_K(1) + x); }
EM_UR_FN ACC FN(d_expm1)(ACC g, ACC x, ACC y, ACC a, ACC b) { return g * (y + EM_UR_K(1)); }
/* d erf / dx = 2 / sqrt(pi) * e^(-x^2) */
EM_UR_FN ACC FN(d_erf)(ACC g, ACC x, ACC y, ACC a, ACC b) {
  return g * EM_UR_K(1.1283791670955126) * m_exp(-x * x);
}
EM_UR_FN ACC FN(d_atan)(ACC g, ACC x, ACC y, ACC a, ACC b) { return g / (EM_UR_K(1) + x * x); }
/* asin, acos: PyTorch's g / sqrt(1 - x^2) (infinite at +-1, NaN outside) */
EM_UR_FN ACC FN(d_asin)(ACC g, ACC x, ACC y, ACC a, ACC b) {
  return g / m_sqrt(EM_UR_K(1) - x * x);
}
EM_UR_FN ACC FN(d_acos)(ACC g, ACC x, ACC y, ACC a, ACC b) {
  return -g / m_sqrt(EM_UR_K(1) - x * x);
}
/* d erfinv / dy = sqrt(pi) / 2 * e^(erfinv(y)^2) */
EM_UR_FN ACC FN(d_erfinv)(ACC g, ACC x, ACC y, ACC a, ACC b) {
  return g * EM_UR_K(0.88622692545275801365) * m_exp(y * y);
}
EM_UR_FN ACC FN(d_lgamma)(ACC g, ACC x, ACC y, ACC a, ACC b) { return g * FN(em_digamma)(x); }
EM_UR_FN ACC FN(d_digamma)(ACC g, ACC x, ACC y, ACC a, ACC b) { return g * FN(em_trigamma)(x); }

#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

#undef EM_UR_FN
#undef EM_UR_K
