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
/* Integer-only, so the AVX-512 clone gives the same bits: 8 64-bit
** multiplies per instruction instead of 4. */
CPU_VECTOR_CLONES_512 void cpu_dropout_keep(uint8_t *keep, uint64_t seed, uint64_t counter0, int64_t n,
                                        uint64_t threshold) {
  for (int64_t j = 0; j < n; j++) {
    const em_philox_block b = em_philox(seed, counter0 + (uint64_t)j);
    const uint64_t x = ((uint64_t)(b.w[0] >> 5) << 26) | (uint64_t)(b.w[1] >> 6);
    keep[j] = x >= threshold;
  }
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
