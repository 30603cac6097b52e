/*
** cpu_index.c -- index_select, index_add, gather and scatter_add over
** contiguous [outer, n, inner] views.
**
** Every index is checked before anything is written, so a bad index
** leaves the output untouched and the error names the value and the size.
** Selecting only moves elements, so it works for every dtype by size; the
** adding kernels do arithmetic and take float32, float64 and int64.
** The adds are parallel over (outer, column) pieces that no two threads
** share, so duplicate indices never race.
*/
#include "cpu_internal.h"

#include <stdio.h>

static em_status check_sizes(const char *kernel, int64_t a, int64_t b, int64_t c, int64_t d) {
  if (a < 0 || b < 0 || c < 0 || d < 0)
    return em_error(EM_ERR_SHAPE, "cpu %s: negative size (%lld, %lld, %lld, %lld)", kernel,
                    (long long)a, (long long)b, (long long)c, (long long)d);
  return EM_OK;
}

/* The first index outside [0, size), as EM_ERR_INDEX. */
static em_status check_index(const char *kernel, const int64_t *idx, int64_t count, int64_t size) {
  for (int64_t j = 0; j < count; j++)
    if (idx[j] < 0 || idx[j] >= size)
      return em_error(EM_ERR_INDEX,
                      "cpu %s: index %lld is out of range for a dim of size %lld "
                      "(at position %lld)",
                      kernel, (long long)idx[j], (long long)size, (long long)j);
  return EM_OK;
}

static em_status need_arith(const char *kernel, em_dtype dt) {
  if (dt == EM_F32 || dt == EM_F64 || dt == EM_I64 || dt == EM_BF16) return EM_OK;
  return cpu_bad_dtype(kernel, dt, "float32, float64, bfloat16, int64");
}

em_status cpu_index_select(int device, em_dtype dt, void *out, const void *in, const int64_t *idx,
                           int64_t nidx, int64_t outer, int64_t n_in, int64_t inner) {
  (void)device;
  size_t es = cpu_dtype_size(dt);
  if (!es) return cpu_bad_dtype("index_select", dt, "float32, float64, int64, bool, bfloat16");
  em_status s = check_sizes("index_select", nidx, outer, n_in, inner);
  if (!s) s = check_index("index_select", idx, nidx, n_in);
  if (s) return s;
  const size_t row = (size_t)inner * es;
  const int64_t total = outer * nidx;
  CPU_FOR(total * inner > CPU_PAR_MIN, t, total,
    int64_t o = t / nidx, j = t % nidx;
    memcpy((char *)out + (size_t)t * row,
           (const char *)in + (size_t)(o * n_in + idx[j]) * row, row););
  return EM_OK;
}

/* Columns per parallel piece of the adding kernels. */
#define COLS 64

static inline float plus_f32(float x, float y) { return x + y; }
static inline double plus_f64(double x, double y) { return x + y; }
/* int64 adds wrap instead of overflowing. */
static inline int64_t plus_i64(int64_t x, int64_t y) {
  return (int64_t)((uint64_t)x + (uint64_t)y);
}

#define T float
#define SUF f32
#define ADD plus_f32
#include "cpu_index_tmpl.h"
#undef T
#undef SUF
#undef ADD

#define T double
#define SUF f64
#define ADD plus_f64
#include "cpu_index_tmpl.h"
#undef T
#undef SUF
#undef ADD

/* bfloat16 adds in float, one rounding per add */
static inline uint16_t plus_bf16(uint16_t x, uint16_t y) {
  return em_f32_to_bf16(em_bf16_to_f32(x) + em_bf16_to_f32(y));
}
#define T uint16_t
#define SUF bf16
#define ADD plus_bf16
#include "cpu_index_tmpl.h"
#undef T
#undef SUF
#undef ADD

#define T int64_t
#define SUF i64
#define ADD plus_i64
#include "cpu_index_tmpl.h"
#undef T
#undef SUF
#undef ADD

/* gather by element size */
#define T uint8_t
#define SUF 1
#include "cpu_index_tmpl.h"
#undef T
#undef SUF

#define T uint16_t
#define SUF 2
#include "cpu_index_tmpl.h"
#undef T
#undef SUF

#define T uint32_t
#define SUF 4
#include "cpu_index_tmpl.h"
#undef T
#undef SUF

#define T uint64_t
#define SUF 8
#include "cpu_index_tmpl.h"
#undef T
#undef SUF

em_status cpu_index_add(int device, em_dtype dt, void *out, const void *src, const int64_t *idx,
                        int64_t nidx, int64_t outer, int64_t n_out, int64_t inner) {
  (void)device;
  em_status s = need_arith("index_add", dt);
  if (!s) s = check_sizes("index_add", nidx, outer, n_out, inner);
  if (!s) s = check_index("index_add", idx, nidx, n_out);
  if (s) return s;
  if (dt == EM_F32) index_add_f32(out, src, idx, nidx, outer, n_out, inner);
  else if (dt == EM_BF16) index_add_bf16(out, src, idx, nidx, outer, n_out, inner);
  else if (dt == EM_F64) index_add_f64(out, src, idx, nidx, outer, n_out, inner);
  else index_add_i64(out, src, idx, nidx, outer, n_out, inner);
  return EM_OK;
}

em_status cpu_gather(int device, em_dtype dt, void *out, const void *in, const int64_t *idx,
                     int64_t outer, int64_t n_in, int64_t n_idx, int64_t inner) {
  (void)device;
  em_status s = check_sizes("gather", outer, n_in, n_idx, inner);
  if (s) return s;
  const int64_t total = outer * n_idx * inner;
  if (!(s = check_index("gather", idx, total, n_in))) {
    switch (cpu_dtype_size(dt)) {
      case 1: gather_1(out, in, idx, n_in, n_idx, inner, total); break;
      case 2: gather_2(out, in, idx, n_in, n_idx, inner, total); break;
      case 4: gather_4(out, in, idx, n_in, n_idx, inner, total); break;
      case 8: gather_8(out, in, idx, n_in, n_idx, inner, total); break;
      default: return cpu_bad_dtype("gather", dt, "float32, float64, int64, bool, bfloat16");
    }
  }
  return s;
}

em_status cpu_scatter_add(int device, em_dtype dt, void *out, const void *src, const int64_t *idx,
                          int64_t outer, int64_t n_out, int64_t n_idx, int64_t inner) {
  (void)device;
  em_status s = need_arith("scatter_add", dt);
  if (!s) s = check_sizes("scatter_add", outer, n_out, n_idx, inner);
  if (!s) s = check_index("scatter_add", idx, outer * n_idx * inner, n_out);
  if (s) return s;
  if (dt == EM_F32) scatter_add_f32(out, src, idx, outer, n_out, n_idx, inner);
  else if (dt == EM_BF16) scatter_add_bf16(out, src, idx, outer, n_out, n_idx, inner);
  else if (dt == EM_F64) scatter_add_f64(out, src, idx, outer, n_out, n_idx, inner);
  else scatter_add_i64(out, src, idx, outer, n_out, n_idx, inner);
  return EM_OK;
}
