/*
** cpu_vmath.h -- float32 exp and erfc written so that a loop calling them
** vectorises: no branches (only selects), no libm calls. glibc's expf and
** erff are scalar calls, and exact GELU spent most of its time in erff.
**
** Accuracy (checked against double in tests/c/test_backend_cpu.c):
** cpu_exp_neg_f32 is within 2 ulp of e^x; cpu_erfc_f32 within 1.2e-7
** relative, which matters for GELU's left tail where 1 + erf(x) is tiny.
*/
#ifndef EMBER_CPU_VMATH_H
#define EMBER_CPU_VMATH_H

#include <stdint.h>
#include <string.h>

/* e^x for x <= 0, clamped to [-87, 0]: below -87 (and for NaN) it returns
** e^-87 ~ 1.6e-38 instead of underflowing, and every caller multiplies by
** x, so a NaN still comes out NaN. x = n ln2 + r with |r| <= ln2/2, e^r by
** its degree-7 Taylor polynomial (truncation < 6e-9), 2^n built in the
** exponent bits.
**
** The clamp works on the bit pattern: OR-ing in the sign bit gives -|x|,
** and among negative floats a larger magnitude is a larger unsigned
** integer, so max(x, -87) is an unsigned min. A float compare-and-select
** here would let GCC fold the clamped constant through the polynomial on
** its own path, which splits the loop and stops it vectorising. */
static inline float cpu_exp_neg_f32(float x) {
  const uint32_t bits_minus_87 = 0xC2AE0000u;
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  u |= 0x80000000u;
  u = u < bits_minus_87 ? u : bits_minus_87;
  float xc;
  memcpy(&xc, &u, sizeof xc);
  /* round half away from zero; xc <= 0, so subtract 0.5 and truncate */
  const int32_t n = (int32_t)(xc * 1.44269504088896341f - 0.5f);
  const float fn = (float)n;
  /* ln2 split in two so that n * ln2_hi is exact */
  const float r = (xc - fn * 0.693359375f) + fn * 2.12194440e-4f;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const uint32_t scale_bits = (uint32_t)(n + 127) << 23; /* n in [-126, 0] */
  float scale;
  memcpy(&scale, &scale_bits, sizeof scale);
  return p * scale;
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
  return t * cpu_exp_neg_f32(p - z * z);
}

#endif
