/*
** cpu_vmath.h -- float32 exp and erfc written so that a loop calling them
** vectorises: no branches (only selects, which -fno-trapping-math lets
** GCC turn into blends) and no libm calls. glibc's expf and erff are a
** call per element: attention's softmax and exact GELU spent their time
** there.
**
** Accuracy (tests/c/test_backend_cpu.c checks GELU against double):
** cpu_exp_f32 is within 2 ulp of e^x; cpu_normal_cdf_f32 within about
** 1e-6 relative, which matters for GELU's left tail where 1 + erf(x) is
** tiny.
*/
#ifndef EMBER_CPU_VMATH_H
#define EMBER_CPU_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Always inlined, so that each runs the vector build of the clone that
** calls it (GCC kept cpu_sum_exp_f32 out of line: a baseline call; a traced
** program's loop with a log left out of line did not vectorise). */
#define CPU_VMATH_INLINE static inline __attribute__((always_inline))

/* e^r (= e^x 2^-n) for x = n ln2 + r, |r| <= ln2/2: the reduction and the
** polynomial that cpu_exp_f32, cpu_exp_any_f32 and cpu_exp_neg_f32 share;
** *n gets n. In fused multiply-adds: fmaf is one instruction in the vector
** clones (all built with FMA) and libm's correctly rounded fmaf in the
** baseline, so every clone, and a traced program compiled with other
** flags, gets the same bits; a third fewer instructions than a * b + c. */
CPU_VMATH_INLINE float cpu_exp_reduced_f32(float xc, float *n_out) {
  /* round(xc / ln2) with the 1.5 * 2^23 trick (exact without -ffast-math) */
  const float n = fmaf(xc, 1.44269504088896341f, 12582912.0f) - 12582912.0f;
  /* ln2 split in two so that n * ln2_hi is exact */
  const float r = fmaf(n, 2.12194440e-4f, fmaf(n, -0.693359375f, xc));
  float y = 1.9875691500e-4f;
  y = fmaf(y, r, 1.3981999507e-3f);
  y = fmaf(y, r, 8.3334519073e-3f);
  y = fmaf(y, r, 4.1665795894e-2f);
  y = fmaf(y, r, 1.6666665459e-1f);
  y = fmaf(y, r, 5.0000001201e-1f);
  *n_out = n;
  return fmaf(y, r * r, r + 1.0f);
}

/* 2^n for an integral float n in [-126, 127], from the exponent bits. */
CPU_VMATH_INLINE float cpu_pow2i_f32(float n) {
  const int32_t bits = ((int32_t)n + 127) << 23;
  float p;
  memcpy(&p, &bits, sizeof p);
  return p;
}

/* e^x for float32 in straight-line code (libm's expf is a call per
** element): Cephes' expf, within 2 ulp of the true value. x = n ln2 + r
** with |r| <= ln2/2, exp(r) by a degree-7 polynomial, 2^n by building the
** exponent bits. Below -87.3 (and at -inf) the result is 0, above 88 it
** saturates (every caller passes x <= 0, up to rounding), NaN gives NaN. */
CPU_VMATH_INLINE float cpu_exp_f32(float x) {
  const float lo = -87.3365447505f, hi = 88.0f;
  float xc = x > lo ? x : lo; /* NaN becomes lo here (no float->int UB below) */
  xc = xc < hi ? xc : hi;
  float n;
  const float y = cpu_exp_reduced_f32(xc, &n);
  return x < lo ? 0.0f : (x == x ? y * cpu_pow2i_f32(n) : x); /* NaN stays NaN */
}

/* e^x over the whole float range, for the unary ops (exp, sigmoid, SiLU,
** ELU), whose inputs may be large: the same reduction and polynomial
** (within 2 ulp), with 2^n built as two factors so that n runs from -150
** to 128: above ln(FLT_MAX) = 88.72 the product overflows to +inf, and
** below -87.3 it falls through the subnormals to 0, as expf does (where
** cpu_exp_f32 clamps at 88 and flushes below -87.3). */
CPU_VMATH_INLINE float cpu_exp_any_f32(float x) {
  const float lo = -104.0f, hi = 89.0f; /* e^-104 < FLT_TRUE_MIN / 2, e^89 > FLT_MAX */
  float xc = x > lo ? x : lo;           /* NaN becomes lo, as above */
  xc = xc < hi ? xc : hi;
  float n;
  const float y = cpu_exp_reduced_f32(xc, &n);
  const float n1 = (float)((int32_t)n >> 1); /* floor(n / 2): both halves in range */
  const float r = y * cpu_pow2i_f32(n1) * cpu_pow2i_f32(n - n1);
  return x == x ? r : x;
}

/* tanh x for float32 on |x| < 1 (cpu_tanh_small_ok): x + x^3 P(x^2), an
** odd polynomial of degree 15 fitted for relative error (Lawson-weighted
** least squares, coefficients rounded to float), within 1.01 ulp of tanh
** over every float in (-1, 1); tiny x gives x. No division: about a third
** of the rational form's cost, which is what lets a tile whose arguments
** all lie inside (-1, 1) -- a softcap's s / cap below the cap -- take only
** this form (cpu_expr_jit.c). Part of cpu_tanh_f32's rule, not a second
** rule: both evaluators pick it by the same test. */
#define CPU_TANH_SMALL_LIMIT 1.0f
CPU_VMATH_INLINE int cpu_tanh_small_ok(float x) { return fabsf(x) < CPU_TANH_SMALL_LIMIT; }
CPU_VMATH_INLINE float cpu_tanh_small_f32(float x) {
  const float x2 = x * x;
  float p = -3.625351237e-04f;
  p = fmaf(p, x2, 2.315504942e-03f);
  p = fmaf(p, x2, -7.965262979e-03f);
  p = fmaf(p, x2, 2.149943076e-02f);
  p = fmaf(p, x2, -5.388411134e-02f);
  p = fmaf(p, x2, 1.333241165e-01f);
  p = fmaf(p, x2, -3.333329856e-01f);
  return fmaf(x * x2, p, x);
}

/* tanh x for float32 in straight-line code: below 1 in magnitude the
** polynomial above; elsewhere a rational minimax form, x P(x^2) / Q(x^2)
** (degrees 13 and 6, Eigen's coefficients) on x clamped to +-7.905 (the
** form's range), +-1 from 9 on, where float's tanh is 1. Within 5 ulp
** (3e-7 absolute) of tanh, |result| <= 1, odd, NaN stays NaN;
** a third cheaper than 1 - 2 / (e^{2x} + 1) on the vectorised exp, and
** without that form's cancellation near 0 (traced programs' tanh, softcap). */
CPU_VMATH_INLINE float cpu_tanh_f32(float x) {
  const float c = 7.90531110763549805f;
  const float xc = x > c ? c : x < -c ? -c : x, x2 = xc * xc;
  /* fmaf, not a * b + c: one rounding whether or not a compiler contracts,
  ** so the interpreter's build and the compiled programs (other flags)
  ** give the same bits */
  float p = -2.76076847742355e-16f;
  p = fmaf(p, x2, 2.00018790482477e-13f);
  p = fmaf(p, x2, -8.60467152213735e-11f);
  p = fmaf(p, x2, 5.12229709037114e-08f);
  p = fmaf(p, x2, 1.48572235717979e-05f);
  p = fmaf(p, x2, 6.37261928875436e-04f);
  p = fmaf(p, x2, 4.89352455891786e-03f);
  float q = 1.19825839466702e-06f;
  q = fmaf(q, x2, 1.18534705686654e-04f);
  q = fmaf(q, x2, 2.26843463243900e-03f);
  q = fmaf(q, x2, 4.89352518554385e-03f);
  const float r = xc * p / q;
  return cpu_tanh_small_ok(x) ? cpu_tanh_small_f32(x) : fabsf(x) >= 9.0f ? copysignf(1.0f, x) : r;
}

/* ln x for float32 in straight-line code, for the same reason as
** cpu_exp_f32: Cephes' logf, within 2 ulp. x = m 2^e with m in
** [sqrt(1/2), sqrt(2)), ln(m) by a degree-9 polynomial in m - 1. Subnormal
** x is scaled by 2^23 first; 0 gives -inf, +inf gives +inf, negative
** numbers and NaN give NaN, all by selects. */
CPU_VMATH_INLINE float cpu_log_f32(float x) {
  const int sub = x < 1.17549435e-38f;
  const float xs = sub ? x * 8388608.0f : x;
  int32_t bits;
  memcpy(&bits, &xs, sizeof bits);
  float e = (float)(((bits >> 23) & 0xff) - 126) - (sub ? 23.0f : 0.0f);
  bits = (bits & 0x007fffff) | 0x3f000000; /* the mantissa as m in [0.5, 1) */
  float m;
  memcpy(&m, &bits, sizeof m);
  const int low = m < 0.707106781186547524f;
  e = low ? e - 1.0f : e;
  m = low ? m + m - 1.0f : m - 1.0f;
  const float z = m * m;
  float y = 7.0376836292e-2f;
  y = y * m - 1.1514610310e-1f;
  y = y * m + 1.1676998740e-1f;
  y = y * m - 1.2420140846e-1f;
  y = y * m + 1.4249322787e-1f;
  y = y * m - 1.6668057665e-1f;
  y = y * m + 2.0000714765e-1f;
  y = y * m - 2.4999993993e-1f;
  y = y * m + 3.3333331174e-1f;
  y = y * m * z;
  y += -2.12194440e-4f * e;
  y += -0.5f * z;
  float r = m + y + 0.693359375f * e;
  r = x == 0.0f ? -INFINITY : r;
  r = x == INFINITY ? INFINITY : r;
  return x < 0.0f || x != x ? NAN : r;
}

/* e^-w for w >= 0, the exponential of the normal density and tail:
** cpu_exp_f32's reduction and polynomial with only the checks a
** nonpositive exponent needs. e^-w is 0 past 87.34 (where cpu_exp_f32
** flushes too); NaN gives a finite value (its caller, cpu_gauss_f32, never
** passes one). */
CPU_VMATH_INLINE float cpu_exp_neg_f32(float w) {
  const float hi = 87.3365447505f;
  const float wc = w < hi ? w : hi; /* NaN becomes hi (no float->int UB below) */
  float n;
  const float y = cpu_exp_reduced_f32(-wc, &n);
  return w > hi ? 0.0f : y * cpu_pow2i_f32(n);
}

/* e^{-x^2/2}, the standard normal density times sqrt(2 pi). x^2 is split
** exactly (hi + lo by one fmaf), so that the tail keeps its relative
** accuracy where a rounded x^2 of 100 would move the result by 3e-6.
** |x| is clamped at 14, past float's last nonzero e^{-x^2/2} (13.3), so
** that the infinities (whose lo would be inf - inf) and NaN give 0. */
CPU_VMATH_INLINE float cpu_gauss_f32(float x) {
  const float a = fabsf(x) < 14.0f ? fabsf(x) : 14.0f;
  const float hi = a * a, lo = fmaf(a, a, -hi);
  const float e = cpu_exp_neg_f32(0.5f * hi);
  return fmaf(-0.5f * lo, e, e);
}

/* Phi(x), the standard normal CDF, 0.5 erfc(-x / sqrt2), in straight-line
** code for exact GELU. erfc(z) = t Q(t) e^{-z^2} with t = 1 / (1 + z/2):
** Q is a degree-8 polynomial fitted by least squares weighted for
** relative error (Chebyshev form, 4000 nodes, in double) to erfcx(z) / t
** for z in [0, 9.4], where float's erfc ends; evaluated in float it is
** within 4e-7 of erfcx. The factor
** e^{-z^2} is cpu_gauss_f32's, so a loop that wants the density as well
** (GELU's derivative) computes the exponential once after inlining. For
** x < 0 the tail is a product, not 1 - erf, so it keeps its relative
** accuracy (what GELU's left side needs); NaN gives NaN, -inf 0. */
CPU_VMATH_INLINE float cpu_normal_cdf_f32(float x) {
  const float t = 1.0f / fmaf(fabsf(x), 0.353553390593273762f, 1.0f); /* z/2 = |x|/(2 sqrt2) */
  float q = -5.9898097068e-02f;
  q = fmaf(q, t, 2.8843954206e-01f);
  q = fmaf(q, t, -4.9479252100e-01f);
  q = fmaf(q, t, 2.8624287248e-01f);
  q = fmaf(q, t, -3.1876623631e-02f);
  q = fmaf(q, t, 2.0473551750e-01f);
  q = fmaf(q, t, 2.4263226986e-01f);
  q = fmaf(q, t, 2.8243353963e-01f);
  q = fmaf(q, t, 2.8208348155e-01f);
  const float half_tail = 0.5f * t * q * cpu_gauss_f32(x); /* 0.5 erfc(|x| / sqrt2) */
  return x < 0.0f ? half_tail : (x == x ? 1.0f - half_tail : x);
}

/* Row reductions that vectorise and still give one answer on every ISA
** clone and thread count: CPU_LANES interleaved partials (lane k takes
** elements k, k + CPU_LANES, ...), written out so that GCC maps them to
** vector registers without reassociating anything, then combined in a
** fixed order, the tail last. A single running sum in double was the
** bottleneck of a softmax row (4 cycles of add latency per element). The
** maximum is exact in any order. */
#define CPU_LANES 16

CPU_VMATH_INLINE double cpu_sum_f32(const float *x, int64_t n) {
  double acc[CPU_LANES] = {0};
  int64_t j = 0;
  for (; j + CPU_LANES <= n; j += CPU_LANES)
    for (int k = 0; k < CPU_LANES; k++) acc[k] += (double)x[j + k];
  double sum = 0;
  for (int k = 0; k < CPU_LANES; k++) sum += acc[k];
  for (; j < n; j++) sum += (double)x[j];
  return sum;
}

CPU_VMATH_INLINE double cpu_sum_f64(const double *x, int64_t n) {
  double acc[CPU_LANES] = {0};
  int64_t j = 0;
  for (; j + CPU_LANES <= n; j += CPU_LANES)
    for (int k = 0; k < CPU_LANES; k++) acc[k] += x[j + k];
  double sum = 0;
  for (int k = 0; k < CPU_LANES; k++) sum += acc[k];
  for (; j < n; j++) sum += x[j];
  return sum;
}

/* sum of (x[j] - mu)^2 in double, in the lanes of cpu_sum_f32 (layer
** norm's second pass). */
CPU_VMATH_INLINE double cpu_sqdev_f32(const float *x, int64_t n, double mu) {
  double acc[CPU_LANES] = {0};
  int64_t j = 0;
  for (; j + CPU_LANES <= n; j += CPU_LANES)
    for (int k = 0; k < CPU_LANES; k++) {
      const double d = (double)x[j + k] - mu;
      acc[k] += d * d;
    }
  double sum = 0;
  for (int k = 0; k < CPU_LANES; k++) sum += acc[k];
  for (; j < n; j++) sum += ((double)x[j] - mu) * ((double)x[j] - mu);
  return sum;
}

CPU_VMATH_INLINE double cpu_sqdev_f64(const double *x, int64_t n, double mu) {
  double acc[CPU_LANES] = {0};
  int64_t j = 0;
  for (; j + CPU_LANES <= n; j += CPU_LANES)
    for (int k = 0; k < CPU_LANES; k++) {
      const double d = x[j + k] - mu;
      acc[k] += d * d;
    }
  double sum = 0;
  for (int k = 0; k < CPU_LANES; k++) sum += acc[k];
  for (; j < n; j++) sum += (x[j] - mu) * (x[j] - mu);
  return sum;
}

/* The largest element (-inf for n = 0); NaNs are skipped, as the plain
** loop `m = x > m ? x : m` skips them. A max reduction, which OpenMP's simd
** vectorises (vmaxps, whose unordered case keeps m): GCC 12 left the
** sixteen running maxima this was written as scalar vmaxss in every clone.
** Without OpenMP (the traced programs' compile) it is the plain loop; a max
** does not depend on the order. */
#ifdef _OPENMP
#define CPU_MAX_SIMD _Pragma("omp simd reduction(max : m)")
#else
#define CPU_MAX_SIMD
#endif
CPU_VMATH_INLINE float cpu_max_f32(const float *x, int64_t n) {
  float m = -__builtin_inff();
  CPU_MAX_SIMD
  for (int64_t j = 0; j < n; j++) m = x[j] > m ? x[j] : m;
  return m;
}

CPU_VMATH_INLINE double cpu_max_f64(const double *x, int64_t n) {
  double m = -__builtin_inf();
  CPU_MAX_SIMD
  for (int64_t j = 0; j < n; j++) m = x[j] > m ? x[j] : m;
  return m;
}

/* sum over j of e^(x[j] - mx), in double, for softmax and cross-entropy
** rows that have no output row to hold the exponentials: a chunk at a
** time into a buffer (a loop that vectorises), each chunk summed by
** cpu_sum_f32. */
#define CPU_EXP_CHUNK 256
CPU_VMATH_INLINE double cpu_sum_exp_f32(const float *x, int64_t n, float mx) {
  float buf[CPU_EXP_CHUNK];
  double sum = 0;
  for (int64_t j0 = 0; j0 < n; j0 += CPU_EXP_CHUNK) {
    const int64_t m = n - j0 < CPU_EXP_CHUNK ? n - j0 : CPU_EXP_CHUNK;
    for (int64_t j = 0; j < m; j++) buf[j] = cpu_exp_f32(x[j0 + j] - mx);
    sum += cpu_sum_f32(buf, m);
  }
  return sum;
}

/* The float64 twin: libm's exp, which has no vector form here. */
CPU_VMATH_INLINE double cpu_sum_exp_f64(const double *x, int64_t n, double mx) {
  double buf[CPU_EXP_CHUNK];
  double sum = 0;
  for (int64_t j0 = 0; j0 < n; j0 += CPU_EXP_CHUNK) {
    const int64_t m = n - j0 < CPU_EXP_CHUNK ? n - j0 : CPU_EXP_CHUNK;
    for (int64_t j = 0; j < m; j++) buf[j] = __builtin_exp(x[j0 + j] - mx);
    sum += cpu_sum_f64(buf, m);
  }
  return sum;
}

#endif
