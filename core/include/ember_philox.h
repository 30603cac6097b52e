/*
** ember_philox.h -- Philox4x32-10 (Salmon et al., SC'11), header-only so the
** CPU backend and CUDA kernels draw the very same numbers.
**
** Stream rule (every backend follows it): element i of a draw with
** (seed, offset) uses the block philox(key = seed, counter = offset + i);
**   uniform: em_philox_uniform_at (53 bits from words 0,1), in double,
**            then scaled and cast to the tensor's dtype;
**   normal:  em_philox_normal_at (Box-Muller on words 0..3);
** except dropout, whose keep test needs 32 bits, not a block:
**   dropout: element i is kept iff em_philox_keep(i): word i % 4 of block
**            philox(seed, offset + i / 4) is at least ceil(p 2^32).
** One counter per element (per four elements for dropout) keeps indexing
** trivial in parallel kernels; a dropout of n elements uses n / 4 of the n
** counters the caller reserves, so streams never overlap either way.
*/
#ifndef EMBER_PHILOX_H
#define EMBER_PHILOX_H

#include <math.h>
#include <stdint.h>

#include "ember_hostdev.h"

typedef struct em_philox_block { uint32_t w[4]; } em_philox_block;

EM_HOSTDEV uint32_t em_mulhilo32(uint32_t a, uint32_t b, uint32_t *hi) {
  uint64_t p = (uint64_t)a * (uint64_t)b;
  *hi = (uint32_t)(p >> 32);
  return (uint32_t)p;
}

EM_HOSTDEV em_philox_block em_philox(uint64_t seed, uint64_t counter) {
  uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  for (int r = 0; r < 10; r++) {
    uint32_t hi0, hi1;
    uint32_t lo0 = em_mulhilo32(0xD2511F53u, c0, &hi0);
    uint32_t lo1 = em_mulhilo32(0xCD9E8D57u, c2, &hi1);
    uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0; c1 = lo1; c2 = n2; c3 = lo0;
    k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
  }
  em_philox_block b;
  b.w[0] = c0; b.w[1] = c1; b.w[2] = c2; b.w[3] = c3;
  return b;
}

/* [0,1) with 24 bits, exact in float32. */
EM_HOSTDEV float em_philox_uniform24(uint32_t w) { return (float)(w >> 8) * (1.0f / 16777216.0f); }

/* [0,1) with 53 bits, for float64. */
EM_HOSTDEV double em_philox_uniform53(uint32_t w0, uint32_t w1) {
  uint64_t x = ((uint64_t)(w0 >> 5) << 26) | (uint64_t)(w1 >> 6);
  return (double)x * (1.0 / 9007199254740992.0);
}

/* Uniform double in [0,1) for element `i` of a stream. */
EM_HOSTDEV double em_philox_uniform_at(uint64_t seed, uint64_t offset, uint64_t i) {
  em_philox_block b = em_philox(seed, offset + i);
  return em_philox_uniform53(b.w[0], b.w[1]);
}

/* Standard normal double for element `i`: Box-Muller with u1 from words
** 0,1 (the same bits as the element's uniform draw) and u2 from words 2,3. */
EM_HOSTDEV double em_philox_normal_at(uint64_t seed, uint64_t offset, uint64_t i) {
  em_philox_block b = em_philox(seed, offset + i);
  double u1 = em_philox_uniform53(b.w[0], b.w[1]);
  double u2 = em_philox_uniform53(b.w[2], b.w[3]);
  /* 1 - u1 is in (0,1], so the log is finite. */
  return sqrt(-2.0 * log(1.0 - u1)) * cos(6.283185307179586 * u2);
}

/* The keep test's threshold for drop probability p in [0, 1]: a 32-bit
** word w passes iff w >= it, which happens with probability 1 - p to
** within 2^-32 (2^32, which no word reaches, for p = 1). */
EM_HOSTDEV uint64_t em_philox_keep_threshold(double p) {
  if (!(p > 0)) return 0;
  if (p >= 1) return (uint64_t)1 << 32;
  return (uint64_t)ceil(p * 4294967296.0);
}

/* Dropout's keep test for element `i` of a stream: one Philox block
** serves four neighbouring elements (a quarter of the cost of a block
** each, which made the mask a tenth of a training step). */
EM_HOSTDEV int em_philox_keep(uint64_t seed, uint64_t offset, uint64_t i, uint64_t threshold) {
  em_philox_block b = em_philox(seed, offset + i / 4);
  return b.w[i % 4] >= threshold;
}

#endif
