/*
** cpu_rope.c -- rotary position embedding, rotate-half form (GPT-NeoX,
** Llama): ember_backend.h's rope.
**
** One pass from a strided x to a strided out. The composed form (x * cos +
** [x2, x1] * sin) was a cat, two products and a sum forward, and their
** backward: six full-size temporaries and a copy of the transposed heads,
** 1.2 ms of a KJV layer's 3 per step. float32 computes exactly the
** composed form's products and sums (no FMA contraction), so the same
** bits; bfloat16 widens, computes in float32 and rounds once, where the
** composed form rounded after each of its four ops.
*/
#include "cpu_internal.h"

#include "cpu_bf16_avx512.h"
#include "ember_bf16.h"

/* One row of d = 2h elements at one position: out = the rotation of x by
** the angles whose cosines and sines are c[0..h) and sn * s[0..h) (sn = -1
** rotates back: the backward). ST is the storage type, CT the type the
** products are computed in. */
#define ROPE_ROW(SUF, ST, CT, LOAD, STORE)                                                        \
  CPU_VECTOR_CLONES_512 static void rope_row_##SUF(ST *restrict out, const ST *restrict x,      \
                                                   const ST *restrict c, const ST *restrict s,  \
                                                   int64_t h, CT sn) {                          \
    for (int64_t j = 0; j < h; j++) {                                                            \
      const CT x1 = LOAD(x[j]), x2 = LOAD(x[j + h]), cj = LOAD(c[j]), sj = sn * LOAD(s[j]);      \
      out[j] = STORE(x1 * cj - x2 * sj);                                                         \
      out[j + h] = STORE(x2 * cj + x1 * sj);                                                     \
    }                                                                                            \
  }

#define SAME(v) (v)
ROPE_ROW(f32, float, float, SAME, SAME)
ROPE_ROW(f64, double, double, SAME, SAME)
ROPE_ROW(bf16, uint16_t, float, em_bf16_to_f32, em_f32_to_bf16)
#undef SAME

/* Where rows go in a view: the element offset of each row (rows in the
** order of the view's leading dims, the last dim left out), found once by
** division for a chunk's first row and then stepped like an odometer:
** rows are 32 elements at a head dim of 32, and four divisions a row were
** a third of the kernel. */
typedef struct rope_rows {
  int64_t idx[EM_MAX_DIMS], off;
} rope_rows;

static inline void rows_start(rope_rows *r, const em_kview *v, int64_t row) {
  r->off = 0;
  for (int d = v->ndim - 2; d >= 0; d--) {
    r->idx[d] = row % v->shape[d];
    r->off += r->idx[d] * v->stride[d];
    row /= v->shape[d];
  }
}

static inline void rows_next(rope_rows *r, const em_kview *v) {
  for (int d = v->ndim - 2; d >= 0; d--) {
    r->off += v->stride[d];
    if (++r->idx[d] < v->shape[d]) return;
    r->off -= r->idx[d] * v->stride[d];
    r->idx[d] = 0;
  }
}

/* One call's operands. */
typedef struct rope_job {
  const em_kview *out, *x;
  const char *cos, *sin;
  int64_t h;
  float sn;
} rope_job;

/* Rows [r0, r1): FN(out, x, c, s) for each, with the row's element
** pointers and the tables' row for its position. */
#define ROPE_ROWS(J, R0, R1, ST, FN)                                                            \
  do {                                                                                          \
    const int nd_ = (J)->x->ndim;                                                               \
    rope_rows ro_, rx_;                                                                         \
    rows_start(&ro_, (J)->out, R0);                                                             \
    rows_start(&rx_, (J)->x, R0);                                                               \
    for (int64_t r_ = R0; r_ < R1; r_++, rows_next(&ro_, (J)->out), rows_next(&rx_, (J)->x)) {  \
      const int64_t l_ = rx_.idx[nd_ - 2];                                                      \
      ST *o = (ST *)(J)->out->data + ro_.off;                                                   \
      const ST *xi = (const ST *)(J)->x->data + rx_.off;                                        \
      const ST *c = (const ST *)(J)->cos + l_ * (J)->h, *s = (const ST *)(J)->sin + l_ * (J)->h; \
      FN;                                                                                       \
    }                                                                                           \
  } while (0)

static void rope_chunk(const rope_job *j, int64_t r0, int64_t r1) {
  const int64_t h = j->h;
  switch (j->x->dtype) {
    case EM_F32: ROPE_ROWS(j, r0, r1, float, rope_row_f32(o, xi, c, s, h, j->sn)); break;
    case EM_F64: ROPE_ROWS(j, r0, r1, double, rope_row_f64(o, xi, c, s, h, j->sn)); break;
    default: ROPE_ROWS(j, r0, r1, uint16_t, rope_row_bf16(o, xi, c, s, h, j->sn)); break;
  }
}

#if CPU_BF16_AVX512
/* bfloat16 rows on AVX-512, a chunk in one call (the row loop's clone
** above ran 256 bits wide at h = 16, with its constants set up and spilled
** once per 32-element row): 16 pairs at a time, the same float32 products
** and sums in the same order (no FMA), rounded by the rule (ROUND: the
** integer form, or AVX512_BF16's instruction with its denormal fix-up);
** the last h % 16 pairs by the scalar row. (Products of two bfloat16 are
** exact in float32, so only the sum rounds: an FMA would not change them.) */
#define ROPE_BF16_AVX512(NAME, TARGET, ROUND)                                                   \
  TARGET static void NAME(const rope_job *j, int64_t r0, int64_t r1) {                          \
    const int64_t h = j->h, hv = h & ~(int64_t)15;                                              \
    const __m512 sn = _mm512_set1_ps(j->sn);                                                    \
    ROPE_ROWS(j, r0, r1, uint16_t, {                                                            \
      for (int64_t k = 0; k < hv; k += 16) {                                                    \
        const __m512 x1 = cpu_bf16x16_widen(_mm256_loadu_si256((const __m256i *)(xi + k)));     \
        const __m512 x2 = cpu_bf16x16_widen(_mm256_loadu_si256((const __m256i *)(xi + h + k))); \
        const __m512 ck = cpu_bf16x16_widen(_mm256_loadu_si256((const __m256i *)(c + k)));      \
        const __m512 sk = _mm512_mul_ps(                                                        \
            sn, cpu_bf16x16_widen(_mm256_loadu_si256((const __m256i *)(s + k))));               \
        const __m512 y1 = _mm512_sub_ps(_mm512_mul_ps(x1, ck), _mm512_mul_ps(x2, sk));          \
        const __m512 y2 = _mm512_add_ps(_mm512_mul_ps(x2, ck), _mm512_mul_ps(x1, sk));          \
        _mm256_storeu_si256((__m256i *)(o + k), ROUND(y1));                                     \
        _mm256_storeu_si256((__m256i *)(o + h + k), ROUND(y2));                                 \
      }                                                                                         \
      if (hv < h) rope_row_bf16_tail(o, xi, c, s, h, hv, j->sn);                                \
    });                                                                                         \
  }

/* pairs [k0, h) of one row, as rope_row_bf16 computes them */
static void rope_row_bf16_tail(uint16_t *out, const uint16_t *x, const uint16_t *c,
                               const uint16_t *s, int64_t h, int64_t k0, float sn) {
  for (int64_t k = k0; k < h; k++) {
    const float x1 = em_bf16_to_f32(x[k]), x2 = em_bf16_to_f32(x[k + h]), ck = em_bf16_to_f32(c[k]),
                sk = sn * em_bf16_to_f32(s[k]);
    out[k] = em_f32_to_bf16(x1 * ck - x2 * sk);
    out[k + h] = em_f32_to_bf16(x2 * ck + x1 * sk);
  }
}

ROPE_BF16_AVX512(rope_chunk_bf16_avx512, CPU_AVX512_TARGET, cpu_bf16x16_round)
ROPE_BF16_AVX512(rope_chunk_bf16_avx512bf16, CPU_AVX512BF16_TARGET, cpu_bf16x16_round_hw)
#endif

/* The chunk function for dtype dt on this CPU. */
typedef void (*rope_chunk_fn)(const rope_job *j, int64_t r0, int64_t r1);
static rope_chunk_fn rope_pick(em_dtype dt) {
#if CPU_BF16_AVX512
  if (dt == EM_BF16 && cpu_bf16_simd() == CPU_BF16_AVX512BF16) return rope_chunk_bf16_avx512bf16;
  if (dt == EM_BF16 && cpu_bf16_simd() == CPU_BF16_AVX512F) return rope_chunk_bf16_avx512;
#else
  (void)dt;
#endif
  return rope_chunk;
}

em_status cpu_rope(int device, const em_kview *out, const em_kview *x, const void *cos,
                   const void *sin, bool inverse) {
  (void)device;
  const em_dtype dt = x->dtype;
  if (dt != EM_F32 && dt != EM_F64 && dt != EM_BF16)
    return cpu_bad_dtype("rope", dt, "float32, float64, bfloat16");
  const int nd = x->ndim;
  bool ok = nd >= 2 && out->ndim == nd && out->dtype == dt && x->stride[nd - 1] == 1 &&
            out->stride[nd - 1] == 1 && x->shape[nd - 1] % 2 == 0;
  for (int d = 0; ok && d < nd; d++) ok = out->shape[d] == x->shape[d];
  if (!ok)
    return em_error(EM_ERR_SHAPE, "cpu rope: x and out must be [..., L, d] views of one shape and "
                    "dtype, with an even d and unit stride in the last dim");
  const int64_t h = x->shape[nd - 1] / 2;
  int64_t rows = 1;
  for (int d = 0; d < nd - 1; d++) rows *= x->shape[d];
  const rope_job job = {out, x, cos, sin, h, inverse ? -1.0f : 1.0f};
  const rope_chunk_fn fn = rope_pick(dt);
  /* 64 rows a chunk: one start by division, then steps */
  const int64_t chunks = (rows + 63) / 64;
  CPU_FOR_W(rows * h >= CPU_PAR_MIN, (double)(rows * h), t, chunks, {
    const int64_t r0 = t * 64, r1 = rows - r0 < 64 ? rows : r0 + 64;
    fn(&job, r0, r1);
  });
  return EM_OK;
}
