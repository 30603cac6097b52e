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

/* Element offset of row r (rows in the order of the view's leading dims,
** the last dim left out) in a view. */
static int64_t row_offset(const em_kview *v, int64_t r) {
  int64_t off = 0;
  for (int d = v->ndim - 2; d >= 0; d--) {
    const int64_t n = v->shape[d];
    off += (r % n) * v->stride[d];
    r /= n;
  }
  return off;
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
  const int64_t L = x->shape[nd - 2], h = x->shape[nd - 1] / 2;
  int64_t rows = 1;
  for (int d = 0; d < nd - 1; d++) rows *= x->shape[d];
  const size_t es = cpu_dtype_size(dt);
  const float sn = inverse ? -1.0f : 1.0f;
  /* rows of one position share the table's row; 64 rows a chunk keeps the
  ** offsets' divisions off the elements */
  const int64_t chunks = (rows + 63) / 64;
  CPU_FOR_W(rows * h >= CPU_PAR_MIN, (double)(rows * h), t, chunks, {
    const int64_t r0 = t * 64, r1 = rows - r0 < 64 ? rows : r0 + 64;
    for (int64_t r = r0; r < r1; r++) {
      const int64_t l = r % L;
      char *o = (char *)out->data + row_offset(out, r) * (int64_t)es;
      const char *xi = (const char *)x->data + row_offset(x, r) * (int64_t)es;
      const char *c = (const char *)cos + l * h * (int64_t)es, *s = (const char *)sin + l * h * (int64_t)es;
      if (dt == EM_F32) rope_row_f32((float *)o, (const float *)xi, (const float *)c, (const float *)s, h, sn);
      else if (dt == EM_F64) rope_row_f64((double *)o, (const double *)xi, (const double *)c, (const double *)s, h, sn);
      else rope_row_bf16((uint16_t *)o, (const uint16_t *)xi, (const uint16_t *)c, (const uint16_t *)s, h, sn);
    }
  });
  return EM_OK;
}
