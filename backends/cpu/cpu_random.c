/*
** cpu_random.c -- uniform and normal draws and dropout, following the
** stream rule of ember_philox.h exactly, so that the CPU and the CUDA
** backends give the same numbers for the same (seed, offset):
**
**   element i uses the Philox block (key = seed, counter = offset + i);
**   uniform: lo + (hi - lo) * em_philox_uniform_at(...), in double, then
**            cast to the tensor's dtype;
**   normal:  mean + std * em_philox_normal_at(...);
**   dropout: element i is kept iff em_philox_uniform_at(...) >= p.
**
** Each element is independent, so the loops split freely over threads.
*/
#include "cpu_internal.h"
#include "ember_philox.h"

/* Philox costs tens of ns per element: threads pay off sooner than for adds. */
#define RAND_PAR_MIN 4096

static bool kview_contiguous(const em_kview *v) {
  int64_t want = 1;
  for (int d = v->ndim - 1; d >= 0; d--) {
    if (v->shape[d] != 1 && v->stride[d] != want) return false;
    want *= v->shape[d];
  }
  return true;
}

/* Dropout's keep test u >= p, done in integers: u = x / 2^53 with x the
** 53-bit integer em_philox_uniform53 builds, and p 2^53 is exact, so
** u >= p iff x >= ceil(p 2^53). With the Philox rounds unrolled, this loop
** over consecutive counters vectorises (the 32x32->64 multiplies map to
** vpmuludq); calling em_philox_uniform_at per element does not. Same bits,
** same stream as the rule above. The attention kernel draws its dropout
** through it too, a tile row at a time. */
static void dropout_keep_loop(uint8_t *keep, uint64_t seed, uint64_t counter0, int64_t n,
                              uint64_t threshold);

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define KEEP_AVX512 1
/* 32x32 -> 64 multiplies of 16 lanes by a constant: the low and high halves. */
__attribute__((target("avx512f"))) static inline void mulhilo16(__m512i m, __m512i c, __m512i *lo,
                                                                 __m512i *hi) {
  const __m512i pe = _mm512_mul_epu32(m, c);                         /* even lanes, 64-bit */
  const __m512i po = _mm512_mul_epu32(m, _mm512_srli_epi64(c, 32)); /* odd lanes */
  *lo = _mm512_mask_blend_epi32(0xAAAA, pe, _mm512_slli_epi64(po, 32));
  *hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(pe, 32), po);
}

/* The keep test for 16 consecutive counters at a time, Philox4x32-10 on 16
** lanes written out (GCC's own vectorisation of the loop below shuffles
** 64-bit lanes and runs at half this speed); the same integer operations,
** so the same bits. x >= t for the 53-bit x = (w0 >> 5) 2^26 + (w1 >> 6) is
** compared in its two halves. */
__attribute__((target("avx512f"))) static void dropout_keep_avx512(uint8_t *keep, uint64_t seed,
                                                                   uint64_t counter0, int64_t n,
                                                                   uint64_t threshold) {
  const __m512i M0 = _mm512_set1_epi32((int)0xD2511F53u), M1 = _mm512_set1_epi32((int)0xCD9E8D57u);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i tA = _mm512_set1_epi32((int)(uint32_t)(threshold >> 26));
  const __m512i tB = _mm512_set1_epi32((int)(uint32_t)(threshold & ((1u << 26) - 1)));
  const __m512i one = _mm512_set1_epi32(1);
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const uint64_t base = counter0 + (uint64_t)j;
    const __m512i blo = _mm512_set1_epi32((int)(uint32_t)base);
    __m512i c0 = _mm512_add_epi32(blo, lane);
    /* a lane whose low word wrapped carries into the high word */
    __m512i c1 = _mm512_mask_add_epi32(_mm512_set1_epi32((int)(uint32_t)(base >> 32)),
                                       _mm512_cmplt_epu32_mask(c0, blo),
                                       _mm512_set1_epi32((int)(uint32_t)(base >> 32)), one);
    __m512i c2 = _mm512_setzero_si512(), c3 = _mm512_setzero_si512();
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int r = 0; r < 10; r++) {
      __m512i lo0, hi0, lo1, hi1;
      mulhilo16(M0, c0, &lo0, &hi0);
      mulhilo16(M1, c2, &lo1, &hi1);
      c0 = _mm512_xor_si512(_mm512_xor_si512(hi1, c1), _mm512_set1_epi32((int)k0));
      c2 = _mm512_xor_si512(_mm512_xor_si512(hi0, c3), _mm512_set1_epi32((int)k1));
      c1 = lo1;
      c3 = lo0;
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const __m512i a = _mm512_srli_epi32(c0, 5), b = _mm512_srli_epi32(c1, 6);
    const __mmask16 k = _mm512_cmpgt_epu32_mask(a, tA) |
                        (_mm512_cmpeq_epi32_mask(a, tA) & _mm512_cmpge_epu32_mask(b, tB));
    _mm_storeu_si128((__m128i *)(keep + j), _mm512_cvtepi32_epi8(_mm512_maskz_mov_epi32(k, one)));
  }
  if (j < n) dropout_keep_loop(keep + j, seed, counter0 + (uint64_t)j, n - j, threshold);
}
#else
#define KEEP_AVX512 0
#endif

/* The same test element by element; vectorised by GCC for AVX2. */
CPU_VECTOR_CLONES static void dropout_keep_loop(uint8_t *keep, uint64_t seed, uint64_t counter0,
                                                int64_t n, uint64_t threshold) {
  for (int64_t j = 0; j < n; j++) {
    const em_philox_block b = em_philox(seed, counter0 + (uint64_t)j);
    const uint64_t x = ((uint64_t)(b.w[0] >> 5) << 26) | (uint64_t)(b.w[1] >> 6);
    keep[j] = x >= threshold;
  }
}

void cpu_dropout_keep(uint8_t *keep, uint64_t seed, uint64_t counter0, int64_t n,
                      uint64_t threshold) {
#if KEEP_AVX512
  if (__builtin_cpu_supports("avx512f")) {
    dropout_keep_avx512(keep, seed, counter0, n, threshold);
    return;
  }
#endif
  dropout_keep_loop(keep, seed, counter0, n, threshold);
}

enum { DROP_BLOCK = 512 }; /* elements per keep[] block on the stack */

#define T float
#define SUF f32
#include "cpu_random_tmpl.h"
#undef T
#undef SUF

#define T double
#define SUF f64
#include "cpu_random_tmpl.h"
#undef T
#undef SUF

em_status cpu_random(int device, em_random_kind kind, const em_kview *out, double a, double b,
                     uint64_t seed, uint64_t offset) {
  (void)device;
  const char *kernel = kind == EM_RAND_UNIFORM ? "random uniform" : "random normal";
  if (kind != EM_RAND_UNIFORM && kind != EM_RAND_NORMAL)
    return em_error(EM_ERR_ARG, "cpu random: unknown kind %d", (int)kind);
  if (out->dtype != EM_F32 && out->dtype != EM_F64 && out->dtype != EM_BF16)
    return cpu_bad_dtype(kernel, out->dtype, "float32, float64, bfloat16");
  if (out->ndim < 0 || out->ndim > EM_MAX_DIMS)
    return em_error(EM_ERR_ARG, "cpu %s: ndim %d, expected 0..%d", kernel, out->ndim, EM_MAX_DIMS);
  if (!kview_contiguous(out))
    return em_error(EM_ERR_ARG, "cpu %s: the output must be contiguous", kernel);
  int64_t n = 1;
  for (int d = 0; d < out->ndim; d++) n *= out->shape[d];
  if (n <= 0) return EM_OK;
  if (out->dtype == EM_BF16) return cpu_random_bf16(kind, out->data, n, a, b, seed, offset);
  const double lo = a, span = b - a, mean = a, std = b;
  if (kind == EM_RAND_UNIFORM) {
    if (out->dtype == EM_F32) draw_uniform_f32(out->data, n, lo, span, seed, offset);
    else draw_uniform_f64(out->data, n, lo, span, seed, offset);
  } else {
    if (out->dtype == EM_F32) draw_normal_f32(out->data, n, mean, std, seed, offset);
    else draw_normal_f64(out->data, n, mean, std, seed, offset);
  }
  return EM_OK;
}

em_status cpu_dropout(int device, em_dtype dt, void *out, void *mask, const void *x, int64_t n,
                      double p, uint64_t seed, uint64_t offset) {
  (void)device;
  if (dt != EM_F32 && dt != EM_F64 && dt != EM_BF16)
    return cpu_bad_dtype("dropout", dt, "float32, float64, bfloat16");
  if (!(p >= 0 && p <= 1))
    return em_error(EM_ERR_ARG, "cpu dropout: probability %g, expected within [0, 1]", p);
  if (n < 0) return em_error(EM_ERR_SHAPE, "cpu dropout: n = %lld", (long long)n);
  if (n > 0 && out && !x)
    return em_error(EM_ERR_ARG, "cpu dropout: input x is NULL");
  if (n == 0) return EM_OK;
  if (p == 1) {
    /* nothing is kept (uniform draws are < 1); avoid 1/0 */
    size_t bytes = (size_t)n * cpu_dtype_size(dt);
    if (out) memset(out, 0, bytes); /* all-zero bits are 0.0 */
    if (mask) memset(mask, 0, bytes);
    return EM_OK;
  }
  if (dt == EM_BF16) return cpu_dropout_bf16(out, mask, x, n, p, seed, offset);
  if (dt == EM_F32) dropout_f32(out, mask, x, n, p, seed, offset);
  else dropout_f64(out, mask, x, n, p, seed, offset);
  return EM_OK;
}
