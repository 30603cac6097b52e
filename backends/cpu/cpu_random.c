/*
** cpu_random.c -- uniform and normal draws and dropout, following the
** stream rule of ember_philox.h exactly, so that the CPU and the CUDA
** backends give the same numbers for the same (seed, offset):
**
**   element i uses the Philox block (key = seed, counter = offset + i);
**   uniform: lo + (hi - lo) * em_philox_uniform_at(...), in double, then
**            cast to the tensor's dtype;
**   normal:  mean + std * em_philox_normal_at(...);
**   dropout: element i is kept iff em_philox_keep(...): word i % 4 of the
**            block at counter offset + i / 4 (ember_philox.h).
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

/* Dropout's keep test (em_philox_keep): one Philox block gives the four
** 32-bit words of elements 4c .. 4c + 3 of the stream, counter offset + c.
** The attention kernel draws its dropout through here too, a tile row at
** a time. Block by block in plain C (any start, any length); below, 16
** blocks (64 elements) at a time with AVX-512. */
static void dropout_keep_loop(uint8_t *keep, uint64_t seed, uint64_t offset, uint64_t first,
                              int64_t n, uint64_t threshold) {
  for (int64_t j = 0; j < n;) {
    const uint64_t e = first + (uint64_t)j;
    const em_philox_block b = em_philox(seed, offset + e / 4);
    for (unsigned w = (unsigned)(e % 4); w < 4 && j < n; w++, j++) keep[j] = b.w[w] >= threshold;
  }
}

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

/* keep[0..64) for the 16 blocks of counters c0 .. c0 + 15: Philox4x32-10
** on 16 lanes written out (the same integer operations as em_philox, so
** the same bits); lane b's four words are elements 4b .. 4b + 3, which
** one dword of bytes per lane stores in order. threshold < 2^32. */
__attribute__((target("avx512f"))) static void keep64_avx512(uint8_t *keep, uint64_t seed,
                                                             uint64_t c0, uint32_t threshold) {
  const __m512i M0 = _mm512_set1_epi32((int)0xD2511F53u), M1 = _mm512_set1_epi32((int)0xCD9E8D57u);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i blo = _mm512_set1_epi32((int)(uint32_t)c0), bhi = _mm512_set1_epi32((int)(uint32_t)(c0 >> 32));
  __m512i x0 = _mm512_add_epi32(blo, lane);
  /* a lane whose low word wrapped carries into the high word */
  __m512i x1 = _mm512_mask_add_epi32(bhi, _mm512_cmplt_epu32_mask(x0, blo), bhi, _mm512_set1_epi32(1));
  __m512i x2 = _mm512_setzero_si512(), x3 = _mm512_setzero_si512();
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  for (int r = 0; r < 10; r++) {
    __m512i lo0, hi0, lo1, hi1;
    mulhilo16(M0, x0, &lo0, &hi0);
    mulhilo16(M1, x2, &lo1, &hi1);
    x0 = _mm512_xor_si512(_mm512_xor_si512(hi1, x1), _mm512_set1_epi32((int)k0));
    x2 = _mm512_xor_si512(_mm512_xor_si512(hi0, x3), _mm512_set1_epi32((int)k1));
    x1 = lo1;
    x3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  const __m512i t = _mm512_set1_epi32((int)threshold), one = _mm512_set1_epi32(1);
  const __m512i b0 = _mm512_maskz_mov_epi32(_mm512_cmpge_epu32_mask(x0, t), one);
  const __m512i b1 = _mm512_maskz_mov_epi32(_mm512_cmpge_epu32_mask(x1, t), one);
  const __m512i b2 = _mm512_maskz_mov_epi32(_mm512_cmpge_epu32_mask(x2, t), one);
  const __m512i b3 = _mm512_maskz_mov_epi32(_mm512_cmpge_epu32_mask(x3, t), one);
  const __m512i bytes = _mm512_or_si512(_mm512_or_si512(b0, _mm512_slli_epi32(b1, 8)),
                                        _mm512_or_si512(_mm512_slli_epi32(b2, 16), _mm512_slli_epi32(b3, 24)));
  _mm512_storeu_si512(keep, bytes);
}
#else
#define KEEP_AVX512 0
#endif

void cpu_dropout_keep(uint8_t *keep, uint64_t seed, uint64_t offset, uint64_t first, int64_t n,
                      uint64_t threshold) {
  int64_t j = 0;
#if KEEP_AVX512
  if (threshold > 0xffffffffu) { /* p = 1: no word reaches it */
    memset(keep, 0, (size_t)(n > 0 ? n : 0));
    return;
  }
  if (__builtin_cpu_supports("avx512f")) {
    /* up to a block boundary one by one, then 64 elements at a time */
    j = (int64_t)((4 - first % 4) % 4);
    if (j > n) j = n;
    dropout_keep_loop(keep, seed, offset, first, j, threshold);
    for (; j + 64 <= n; j += 64)
      keep64_avx512(keep + j, seed, offset + (first + (uint64_t)j) / 4, (uint32_t)threshold);
  }
#endif
  dropout_keep_loop(keep + j, seed, offset, first + (uint64_t)j, n - j, threshold);
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

#define LD(v) (v)
#define ST(a) (a)
#define T float
#define A float
#define SUF f32
#include "cpu_dropout_tmpl.h"
#undef T
#undef A
#undef SUF

#define T double
#define A double
#define SUF f64
#include "cpu_dropout_tmpl.h"
#undef T
#undef A
#undef SUF
#undef LD
#undef ST

#define LD(v) em_bf16_to_f32(v)
#define ST(a) em_f32_to_bf16(a)
#define T uint16_t
#define A float
#define SUF bf16
#include "cpu_dropout_tmpl.h"
#undef T
#undef A
#undef SUF
#undef LD
#undef ST

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
  if (dt == EM_BF16) dropout_bf16(out, mask, x, n, p, seed, offset);
  else if (dt == EM_F32) dropout_f32(out, mask, x, n, p, seed, offset);
  else dropout_f64(out, mask, x, n, p, seed, offset);
  return EM_OK;
}
