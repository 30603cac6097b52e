/*
** ember_bf16.h -- the bfloat16 storage rule, header-only so that core, the
** CPU backend, the CUDA plugin's host code and its emulator, the
** distributed reductions and the tests round the very same way.
**
** A bfloat16 is the top 16 bits of a float32. Narrowing rounds to nearest,
** ties to even (as PyTorch and the CUDA intrinsic __float2bfloat16); a NaN
** stays a NaN, made quiet so that rounding cannot carry it into infinity.
** CUDA device code converts with the intrinsics, which follow this rule
** for numbers; a NaN comes out as the canonical 0x7fff there (sign and
** payload not kept), as the CUDA emulator reproduces -- still a NaN.
** It also holds the one float16 -> float32 widening, for files that store
** float16 (ember computes in none).
*/
#ifndef EMBER_BF16_H
#define EMBER_BF16_H

#include <stdint.h>
#include <string.h>

#include "ember_hostdev.h"

/* Widening is exact. */
EM_HOSTDEV float em_bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* A select, not a branch, so that loops of it vectorise (casts, the CPU's
** gradient rounding). */
EM_HOSTDEV uint16_t em_f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16, quiet = (u >> 16) | 0x40u;
  return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
}

/* IEEE binary16 (a file's float16: safetensors F16, torch's HalfStorage)
** -> binary32, exactly: subnormals, infinities and NaN payloads too. ember
** computes in no float16, so readers widen it once, here. */
EM_HOSTDEV float em_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
  float f;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (man << 13); /* rebias: -15 + 127 */
  } else {
    f = (float)man * 0x1p-24f; /* zero or subnormal: man * 2^-24, exact in float32 */
    return sign ? -f : f;
  }
  memcpy(&f, &bits, sizeof f);
  return f;
}

#endif
