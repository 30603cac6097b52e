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
  if (dt == EM_F32 || dt == EM_F64 || dt == EM_I64) return EM_OK;
  return cpu_bad_dtype(kernel, dt, "float32, float64, int64");
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

#define INDEX_ADD(T, ADD)                                                           \
  do {                                                                           \
    T *o_ = out;                                                                 \
    const T *s_ = src;                                                           \
    CPU_FOR(outer * nidx * inner > CPU_PAR_MIN, t, outer * nblk,                 \
      int64_t o = t / nblk, i0 = (t % nblk) * COLS;                              \
      int64_t nb = inner - i0 < COLS ? inner - i0 : COLS;                        \
      for (int64_t j = 0; j < nidx; j++) {                                       \
        T *dst = o_ + (o * n_out + idx[j]) * inner + i0;                         \
        const T *from = s_ + (o * nidx + j) * inner + i0;                        \
        for (int64_t i = 0; i < nb; i++) dst[i] = ADD(dst[i], from[i]);             \
      });                                                                        \
  } while (0)

#define PLUS(x, y) ((x) + (y))
/* int64 adds wrap instead of overflowing. */
#define PLUS_I64(x, y) ((int64_t)((uint64_t)(x) + (uint64_t)(y)))

em_status cpu_index_add(int device, em_dtype dt, void *out, const void *src, const int64_t *idx,
                        int64_t nidx, int64_t outer, int64_t n_out, int64_t inner) {
  (void)device;
  em_status s = need_arith("index_add", dt);
  if (!s) s = check_sizes("index_add", nidx, outer, n_out, inner);
  if (!s) s = check_index("index_add", idx, nidx, n_out);
  if (s) return s;
  const int64_t nblk = (inner + COLS - 1) / COLS;
  if (dt == EM_F32) INDEX_ADD(float, PLUS);
  else if (dt == EM_F64) INDEX_ADD(double, PLUS);
  else INDEX_ADD(int64_t, PLUS_I64);
  return EM_OK;
}

/* out[o,j,i] = in[o, idx[o,j,i], i], by element size. */
#define GATHER(T)                                                                \
  do {                                                                           \
    T *o_ = out;                                                                 \
    const T *in_ = in;                                                           \
    CPU_FOR(total > CPU_PAR_MIN, t, total,                                       \
      int64_t i = t % inner, o = t / (n_idx * inner);                            \
      o_[t] = in_[(o * n_in + idx[t]) * inner + i];);                            \
  } while (0)

em_status cpu_gather(int device, em_dtype dt, void *out, const void *in, const int64_t *idx,
                     int64_t outer, int64_t n_in, int64_t n_idx, int64_t inner) {
  (void)device;
  em_status s = check_sizes("gather", outer, n_in, n_idx, inner);
  if (s) return s;
  const int64_t total = outer * n_idx * inner;
  if (!(s = check_index("gather", idx, total, n_in))) {
    switch (cpu_dtype_size(dt)) {
      case 1: GATHER(uint8_t); break;
      case 2: GATHER(uint16_t); break;
      case 4: GATHER(uint32_t); break;
      case 8: GATHER(uint64_t); break;
      default: return cpu_bad_dtype("gather", dt, "float32, float64, int64, bool, bfloat16");
    }
  }
  return s;
}

/* out[o, idx[o,j,i], i] += src[o,j,i]; each piece owns columns (o, i). */
#define SCATTER_ADD(T, ADD)                                                         \
  do {                                                                           \
    T *o_ = out;                                                                 \
    const T *s_ = src;                                                           \
    CPU_FOR(outer * n_idx * inner > CPU_PAR_MIN, t, outer * nblk,                \
      int64_t o = t / nblk, i0 = (t % nblk) * COLS;                              \
      int64_t nb = inner - i0 < COLS ? inner - i0 : COLS;                        \
      for (int64_t j = 0; j < n_idx; j++) {                                      \
        const int64_t *ix = idx + (o * n_idx + j) * inner + i0;                  \
        const T *from = s_ + (o * n_idx + j) * inner + i0;                       \
        T *base = o_ + o * n_out * inner + i0;                                   \
        for (int64_t i = 0; i < nb; i++)                                         \
          base[ix[i] * inner + i] = ADD(base[ix[i] * inner + i], from[i]);       \
      });                                                                        \
  } while (0)

em_status cpu_scatter_add(int device, em_dtype dt, void *out, const void *src, const int64_t *idx,
                          int64_t outer, int64_t n_out, int64_t n_idx, int64_t inner) {
  (void)device;
  em_status s = need_arith("scatter_add", dt);
  if (!s) s = check_sizes("scatter_add", outer, n_out, n_idx, inner);
  if (!s) s = check_index("scatter_add", idx, outer * n_idx * inner, n_out);
  if (s) return s;
  const int64_t nblk = (inner + COLS - 1) / COLS;
  if (dt == EM_F32) SCATTER_ADD(float, PLUS);
  else if (dt == EM_F64) SCATTER_ADD(double, PLUS);
  else SCATTER_ADD(int64_t, PLUS_I64);
  return EM_OK;
}
