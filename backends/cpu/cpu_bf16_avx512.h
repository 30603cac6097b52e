/*
** cpu_bf16_avx512.h -- ember_bf16.h's rule on 16 lanes of AVX-512, for the
** bfloat16 loops that call it explicitly (casts, rope, column sums): GCC
** vectorises the scalar rule only to 256 bits and packs 32 -> 16 bits in
** four steps there. Each helper gives exactly em_bf16_to_f32's or
** em_f32_to_bf16's bits; callers ask cpu_bf16_simd() which they may use,
** and keep a scalar fallback.
*/
#ifndef EMBER_CPU_BF16_AVX512_H
#define EMBER_CPU_BF16_AVX512_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* cpu_bf16.c: what these helpers may use on this CPU, decided once:
** CPU_BF16_AVX512BF16 (both roundings), CPU_BF16_AVX512F (the integer
** rounding) or CPU_BF16_PLAIN (the callers' scalar loops, which the
** compiler vectorises in its clones). EMBER_CPU_BF16=avx512 or
** plain caps it (the tests run the other paths so; ctest's *_bf16_*
** runs), and so does a ONEDNN_MAX_CPU_ISA cap below AVX512_CORE_BF16 or
** below AVX-512 (the *_AVX512_CORE and *_AVX2 runs). */
enum { CPU_BF16_PLAIN, CPU_BF16_AVX512F, CPU_BF16_AVX512BF16 };
int cpu_bf16_simd(void);
/* Names the level (and the variable that chose it) into buf, for cpu_info. */
const char *cpu_bf16_path(char *buf, size_t n);

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CPU_BF16_AVX512 1
#define CPU_AVX512_TARGET __attribute__((target("avx512f")))
#define CPU_AVX512BF16_TARGET __attribute__((target("avx512f,avx512bf16")))


/* 16 bfloat16 (the 256 bits h) widened to float32: exact. */
CPU_AVX512_TARGET static inline __m512 cpu_bf16x16_widen(__m256i h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* em_f32_to_bf16 on 16 lanes, in integers: round to nearest even by
** adding 0x7fff plus the kept part's lowest bit, NaNs made quiet. */
CPU_AVX512_TARGET static inline __m256i cpu_bf16x16_round(__m512 f) {
  const __m512i u = _mm512_castps_si512(f), top = _mm512_srli_epi32(u, 16);
  __m512i r = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)),
                               _mm512_and_si512(top, _mm512_set1_epi32(1)));
  r = _mm512_srli_epi32(r, 16);
  const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(top, _mm512_set1_epi32(0x40)));
  return _mm512_cvtepi32_epi16(r);
}

/* The same with AVX512_BF16's vcvtneps2bf16, which rounds to nearest even
** and quiets NaNs as the rule does but flushes denormal inputs to zero:
** lanes with a denormal (nonzero, exponent 0) take the integer rounding
** instead (a branch that real data almost never takes). */
CPU_AVX512BF16_TARGET static inline __m256i cpu_bf16x16_round_hw(__m512 f) {
  const __m512i u = _mm512_castps_si512(f);
  const __m256i r = (__m256i)_mm512_cvtneps_pbh(f);
  const __mmask16 tiny = _mm512_cmplt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                 _mm512_set1_epi32(0x00800000));
  const __mmask16 zero = _mm512_testn_epi32_mask(u, _mm512_set1_epi32(0x7fffffff));
  if (__builtin_expect((tiny & ~zero) != 0, 0)) return cpu_bf16x16_round(f);
  return r;
}
#endif

#endif
