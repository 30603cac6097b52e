/*
** ember_bf16.h -- the bfloat16 storage rule, header-only so that core, the
** CPU backend, the CUDA plugin's host code and its emulator, the
** distributed reductions and the tests round the very same way.
**
** A bfloat16 is the top 16 bits of a float32. Narrowing rounds to nearest,
** ties to even (as PyTorch and the CUDA intrinsic __float2bfloat16); a NaN
** stays a NaN, made quiet so that rounding cannot carry it into infinity.
** CUDA device code converts with the intrinsics, which follow this rule.
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

#endif
