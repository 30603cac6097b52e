/*
** cuda_index.cu -- index_select, index_add, gather and scatter_add over
** contiguous [outer, n, inner] views, with int64 0-based indices.
**
** Indices live on the device, so their range is checked there: a first
** kernel scans them and records the first bad value it meets in a flag,
** the host waits for it (one synchronisation per op) and fails with
** EM_ERR_INDEX before any output is written. Accumulating ops use
** atomicAdd, so float sums of repeated indices may differ from the CPU's
** in the last bits (order of addition).
*/
#include "cuda_kernels.cuh"

__global__ void check_index_kernel(const int64_t *idx, int64_t count, int64_t size,
                                   int64_t *flag) {
  EMC_GRID_LOOP(e, count) {
    int64_t v = idx[e];
    if (v < 0 || v >= size) {
      if (atomicCAS((unsigned long long *)flag, 0ull, 1ull) == 0ull) flag[1] = v;
    }
  }
}

/* Scans count indices against [0, size); an error names op and the value. */
static em_status check_indices(emc_device *d, const char *op, const int64_t *idx, int64_t count,
                               int64_t size) {
  if (count == 0) return EM_OK;
  int64_t *flag = NULL;
  em_status s = emc_flag_new(d, op, &flag);
  if (s) return s;
  auto k = check_index_kernel;
  EMC_LAUNCH(k, emc_grid(emc_blocks_for(count, EMC_THREADS)), EMC_THREADS, d->stream, idx, count,
             size, flag);
  if ((s = emc_launch_status(op))) {
    emc_scratch_free(d, flag);
    return s;
  }
  return emc_flag_check(d, flag, op, size);
}

static em_status check_sizes(const char *op, int64_t a, int64_t b, int64_t c, int64_t e) {
  if (a < 0 || b < 0 || c < 0 || e < 0)
    return em_error(EM_ERR_SHAPE, "%s: negative size (%lld, %lld, %lld, %lld)", op, (long long)a,
                    (long long)b, (long long)c, (long long)e);
  return EM_OK;
}

/* ---- copies by index: any dtype, moved as words of its size --------- */

/* out[o,j,i] = in[o, idx[j], i]                  (per_row false)
** out[o,j,i] = in[o, idx[o,j,i], i]              (per_row true: gather) */
template <class W>
__global__ void select_kernel(W *out, const W *in, const int64_t *idx, int64_t outer, int64_t n_in,
                              int64_t n_idx, int64_t inner, bool per_element) {
  int64_t total = outer * n_idx * inner;
  EMC_GRID_LOOP(e, total) {
    int64_t i = e % inner, t = e / inner, j = t % n_idx, o = t / n_idx;
    int64_t v = per_element ? idx[e] : idx[j];
    out[e] = in[(o * n_in + v) * inner + i];
  }
}

template <class W>
static void launch_select(emc_device *d, void *out, const void *in, const int64_t *idx,
                          int64_t outer, int64_t n_in, int64_t n_idx, int64_t inner,
                          bool per_element) {
  auto k = select_kernel<W>;
  EMC_LAUNCH(k, emc_grid(emc_blocks_for(outer * n_idx * inner, EMC_THREADS)), EMC_THREADS,
             d->stream, (W *)out, (const W *)in, idx, outer, n_in, n_idx, inner, per_element);
}

static em_status run_select(const char *op, int device, em_dtype dt, void *out, const void *in,
                            const int64_t *idx, int64_t outer, int64_t n_in, int64_t n_idx,
                            int64_t inner, bool per_element) {
  em_status s = check_sizes(op, outer, n_in, n_idx, inner);
  if (s) return s;
  int64_t total = outer * n_idx * inner;
  if (total == 0) return EM_OK;
  emc_device *d = NULL;
  if ((s = emc_device_get(device, op, &d))) return s;
  int64_t count = per_element ? total : n_idx;
  if ((s = check_indices(d, op, idx, count, n_in))) return s;
  switch (em_dtype_size(dt)) {
    case 1: launch_select<uint8_t>(d, out, in, idx, outer, n_in, n_idx, inner, per_element); break;
    case 2: launch_select<uint16_t>(d, out, in, idx, outer, n_in, n_idx, inner, per_element); break;
    case 4: launch_select<uint32_t>(d, out, in, idx, outer, n_in, n_idx, inner, per_element); break;
    case 8: launch_select<uint64_t>(d, out, in, idx, outer, n_in, n_idx, inner, per_element); break;
    default: return emc_bad_dtype(op, dt, "float32, float64, int64, bool, bfloat16");
  }
  return emc_launch_status(op);
}

extern "C" em_status emc_index_select(int device, em_dtype dt, void *out, const void *in,
                                      const int64_t *idx, int64_t nidx, int64_t outer,
                                      int64_t n_in, int64_t inner) {
  return run_select("cuda index_select", device, dt, out, in, idx, outer, n_in, nidx, inner, false);
}

extern "C" em_status emc_gather(int device, em_dtype dt, void *out, const void *in,
                                const int64_t *idx, int64_t outer, int64_t n_in, int64_t n_idx,
                                int64_t inner) {
  return run_select("cuda gather", device, dt, out, in, idx, outer, n_in, n_idx, inner, true);
}

/* ---- accumulation by index ------------------------------------------- */

__device__ __forceinline__ void atomic_add(float *p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(double *p, double v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(bf16_t *p, bf16_t v) { atomicAdd(p, v); }
/* Two's complement: adding as unsigned is adding as signed, wrapping. */
__device__ __forceinline__ void atomic_add(int64_t *p, int64_t v) {
  atomicAdd((unsigned long long *)p, (unsigned long long)v);
}

/* out[o, idx[j], i] += src[o,j,i]             (per_element false: index_add)
** out[o, idx[o,j,i], i] += src[o,j,i]         (per_element true: scatter_add) */
template <class T>
__global__ void add_kernel(T *out, const T *src, const int64_t *idx, int64_t outer, int64_t n_out,
                           int64_t n_idx, int64_t inner, bool per_element) {
  int64_t total = outer * n_idx * inner;
  EMC_GRID_LOOP(e, total) {
    int64_t i = e % inner, t = e / inner, j = t % n_idx, o = t / n_idx;
    int64_t v = per_element ? idx[e] : idx[j];
    atomic_add(&out[(o * n_out + v) * inner + i], src[e]);
  }
}

template <class T>
static void launch_add(emc_device *d, void *out, const void *src, const int64_t *idx,
                       int64_t outer, int64_t n_out, int64_t n_idx, int64_t inner,
                       bool per_element) {
  auto k = add_kernel<T>;
  EMC_LAUNCH(k, emc_grid(emc_blocks_for(outer * n_idx * inner, EMC_THREADS)), EMC_THREADS,
             d->stream, (T *)out, (const T *)src, idx, outer, n_out, n_idx, inner, per_element);
}

static em_status run_add(const char *op, int device, em_dtype dt, void *out, const void *src,
                         const int64_t *idx, int64_t outer, int64_t n_out, int64_t n_idx,
                         int64_t inner, bool per_element) {
  em_status s = check_sizes(op, outer, n_out, n_idx, inner);
  if (s) return s;
  if (dt != EM_F32 && dt != EM_F64 && dt != EM_BF16 && dt != EM_I64)
    return emc_bad_dtype(op, dt, "float32, float64, bfloat16, int64");
  int64_t total = outer * n_idx * inner;
  if (total == 0) return EM_OK;
  emc_device *d = NULL;
  if ((s = emc_device_get(device, op, &d))) return s;
  if ((s = check_indices(d, op, idx, per_element ? total : n_idx, n_out))) return s;
  switch (dt) {
    case EM_F32: launch_add<float>(d, out, src, idx, outer, n_out, n_idx, inner, per_element); break;
    case EM_F64: launch_add<double>(d, out, src, idx, outer, n_out, n_idx, inner, per_element); break;
    case EM_BF16: launch_add<bf16_t>(d, out, src, idx, outer, n_out, n_idx, inner, per_element); break;
    default: launch_add<int64_t>(d, out, src, idx, outer, n_out, n_idx, inner, per_element); break;
  }
  return emc_launch_status(op);
}

extern "C" em_status emc_index_add(int device, em_dtype dt, void *out, const void *src,
                                   const int64_t *idx, int64_t nidx, int64_t outer,
                                   int64_t n_out, int64_t inner) {
  return run_add("cuda index_add", device, dt, out, src, idx, outer, n_out, nidx, inner, false);
}

extern "C" em_status emc_scatter_add(int device, em_dtype dt, void *out, const void *src,
                                     const int64_t *idx, int64_t outer, int64_t n_out,
                                     int64_t n_idx, int64_t inner) {
  return run_add("cuda scatter_add", device, dt, out, src, idx, outer, n_out, n_idx, inner, true);
}
