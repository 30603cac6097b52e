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

/* Where rows go in a view: the element offset of each row (rows in the
** order of the view's leading dims, the last dim left out), found once by
** division for a chunk's first row and then stepped like an odometer:
** rows are 32 elements at a head dim of 32, and four divisions a row were
** a third of the kernel. */
typedef struct rope_rows {
  int64_t idx[EM_MAX_DIMS], off;
} rope_rows;

static void rows_start(rope_rows *r, const em_kview *v, int64_t row) {
  r->off = 0;
  for (int d = v->ndim - 2; d >= 0; d--) {
    r->idx[d] = row % v->shape[d];
    r->off += r->idx[d] * v->stride[d];
    row /= v->shape[d];
  }
}

static void rows_next(rope_rows *r, const em_kview *v) {
  for (int d = v->ndim - 2; d >= 0; d--) {
    r->off += v->stride[d];
    if (++r->idx[d] < v->shape[d]) return;
    r->off -= r->idx[d] * v->stride[d];
    r->idx[d] = 0;
  }
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
  const size_t es = cpu_dtype_size(dt);
  const float sn = inverse ? -1.0f : 1.0f;
  /* 64 rows a chunk: one start by division, then steps */
  const int64_t chunks = (rows + 63) / 64;
  CPU_FOR_W(rows * h >= CPU_PAR_MIN, (double)(rows * h), t, chunks, {
    const int64_t r0 = t * 64, r1 = rows - r0 < 64 ? rows : r0 + 64;
    rope_rows ro, rx;
    rows_start(&ro, out, r0);
    rows_start(&rx, x, r0);
    for (int64_t r = r0; r < r1; r++, rows_next(&ro, out), rows_next(&rx, x)) {
      const int64_t l = rx.idx[nd - 2];
      char *o = (char *)out->data + ro.off * (int64_t)es;
      const char *xi = (const char *)x->data + rx.off * (int64_t)es;
      const char *c = (const char *)cos + l * h * (int64_t)es, *s = (const char *)sin + l * h * (int64_t)es;
      if (dt == EM_F32) rope_row_f32((float *)o, (const float *)xi, (const float *)c, (const float *)s, h, sn);
      else if (dt == EM_F64) rope_row_f64((double *)o, (const double *)xi, (const double *)c, (const double *)s, h, sn);
      else rope_row_bf16((uint16_t *)o, (const uint16_t *)xi, (const uint16_t *)c, (const uint16_t *)s, h, sn);
    }
  });
  return EM_OK;
}
