/*
** cpu_vmath.h -- float32 exp and erfc written so that a loop calling them
** vectorises: no branches (only selects, which -fno-trapping-math lets
** GCC turn into blends) and no libm calls. glibc's expf and erff are a
** call per element: attention's softmax and exact GELU spent their time
** there.
**
** Accuracy (tests/c/test_backend_cpu.c checks GELU against double):
** cpu_exp_f32 is within 2 ulp of e^x; cpu_erfc_pos_f32 within 1.2e-7
** relative, which matters for GELU's left tail where 1 + erf(x) is tiny.
*/
#ifndef EMBER_CPU_VMATH_H
#define EMBER_CPU_VMATH_H

#include <stdint.h>
#include <string.h>

/* e^x for float32 in straight-line code (libm's expf is a call per
** element): Cephes' expf, within 2 ulp of the true value. x = n ln2 + r
** with |r| <= ln2/2, exp(r) by a degree-7 polynomial, 2^n by building the
** exponent bits. Below -87.3 (and at -inf) the result is 0, above 88 it
** saturates (every caller passes x <= 0, up to rounding), NaN gives NaN. */
static inline float cpu_exp_f32(float x) {
  const float lo = -87.3365447505f, hi = 88.0f;
  float xc = x > lo ? x : lo; /* NaN becomes lo here (no float->int UB below) */
  xc = xc < hi ? xc : hi;
  /* round(xc / ln2) with the 1.5 * 2^23 trick (exact without -ffast-math) */
  float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  /* ln2 split in two so that n * ln2_hi is exact */
  float r = (xc - n * 0.693359375f) + n * 2.12194440e-4f;
  float y = 1.9875691500e-4f;
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * (r * r) + r + 1.0f;
  int32_t bits = ((int32_t)n + 127) << 23;
  float pow2n;
  memcpy(&pow2n, &bits, sizeof pow2n);
  return x < lo ? 0.0f : (x == x ? y * pow2n : x); /* NaN stays NaN */
}

/* erfc(z) for z >= 0, by the Chebyshev fit in Numerical Recipes (erfcc):
** t = 1/(1 + z/2), erfc(z) = t exp(-z^2 + P(t)), relative error < 1.2e-7. */
static inline float cpu_erfc_pos_f32(float z) {
  const float t = 1.0f / (1.0f + 0.5f * z);
  float p = 0.17087277f;
  p = p * t - 0.82215223f;
  p = p * t + 1.48851587f;
  p = p * t - 1.13520398f;
  p = p * t + 0.27886807f;
  p = p * t - 0.18628806f;
  p = p * t + 0.09678418f;
  p = p * t + 0.37409196f;
  p = p * t + 1.00002368f;
  p = p * t - 1.26551223f;
  return t * cpu_exp_f32(p - z * z);
}

#endif
