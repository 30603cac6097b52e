/*
** cuda_random.cu -- uniform and normal draws and dropout, following the
** Philox stream rule of ember_philox.h exactly (the header's functions are
** __host__ __device__), so a seed gives the same numbers as the CPU:
**   element i of a draw with (seed, offset) uses philox(seed, offset + i);
**   uniform: lo + (hi - lo) * em_philox_uniform_at(...), in double, then cast;
**   normal:  mean + std * em_philox_normal_at(...);
**   dropout: element i is kept iff em_philox_keep(...) (4 elements a block).
** "Element i" counts in row-major order over the output's shape.
*/
#include "cuda_kernels.cuh"

template <class T>
__global__ void random_kernel(emc_layout L, bool linear, int64_t n, T *out, int kind, double a,
                              double b, uint64_t seed, uint64_t offset) {
  EMC_GRID_LOOP(i, n) {
    int64_t at = linear ? i * L.stride[0][0] : emc_layout_offset(&L, 0, i);
    double v = kind == EM_RAND_UNIFORM ? a + (b - a) * em_philox_uniform_at(seed, offset, (uint64_t)i)
                                       : a + b * em_philox_normal_at(seed, offset, (uint64_t)i);
    out[at] = cast_from_double<T>(v);
  }
}

template <class T>
static void launch_random(emc_device *d, const emc_layout &L, bool linear, int64_t n, void *out,
                          int kind, double a, double b, uint64_t seed, uint64_t offset) {
  auto k = random_kernel<T>;
  EMC_LAUNCH(k, emc_grid(emc_blocks_for(n, EMC_THREADS)), EMC_THREADS, d->stream, L, linear, n,
             (T *)out, kind, a, b, seed, offset);
}

extern "C" em_status emc_random(int device, em_random_kind kind, const em_kview *out, double a,
                                double b, uint64_t seed, uint64_t offset) {
  const char *kernel = kind == EM_RAND_UNIFORM ? "random uniform" : "random normal";
  if (kind != EM_RAND_UNIFORM && kind != EM_RAND_NORMAL)
    return em_error(EM_ERR_ARG, "cuda random: unknown kind %d", (int)kind);
  if (out->ndim < 0 || out->ndim > EM_MAX_DIMS)
    return em_error(EM_ERR_ARG, "cuda %s: ndim %d, expected 0..%d", kernel, out->ndim, EM_MAX_DIMS);
  const int64_t *strides[1] = {out->stride};
  emc_layout L;
  int64_t n = emc_coalesce(out->ndim, out->shape, 1, strides, &L);
  if (n == 0) return EM_OK;
  emc_device *d = NULL;
  em_status s = emc_device_get(device, kernel, &d);
  if (s) return s;
  bool linear = emc_layout_is_linear(&L);
  EMC_SWITCH_FLOAT(out->dtype, T, return emc_bad_dtype(kernel, out->dtype, "float32, float64, bfloat16"),
                   launch_random<T>(d, L, linear, n, out->data, (int)kind, a, b, seed, offset))
  return emc_launch_status(kernel);
}

/* out = x * mask with mask = keep ? 1/(1-p) : 0; a dropped element is an
** exact 0 even where x is inf or NaN (as PyTorch and the CPU backend). */
template <class T>
__global__ void dropout_kernel(int64_t n, T *out, T *mask, const T *x, double p, uint64_t seed,
                               uint64_t offset) {
  typedef typename Acc<T>::type A;
  const T scale = cast_from_double<T>(1.0 / (1.0 - p));
  const T zero = cast_from_double<T>(0.0);
  const uint64_t threshold = em_philox_keep_threshold(p);
  EMC_GRID_LOOP(i, n) {
    bool keep = em_philox_keep(seed, offset, (uint64_t)i, threshold);
    if (mask) mask[i] = keep ? scale : zero;
    if (out) out[i] = keep ? from_acc<T>(to_acc(x[i]) * (A)to_acc(scale)) : zero;
  }
}

template <class T>
static void launch_dropout(emc_device *d, int64_t n, void *out, void *mask, const void *x, double p,
                           uint64_t seed, uint64_t offset) {
  auto k = dropout_kernel<T>;
  EMC_LAUNCH(k, emc_grid(emc_blocks_for(n, EMC_THREADS)), EMC_THREADS, d->stream, n, (T *)out,
             (T *)mask, (const T *)x, p, seed, offset);
}

extern "C" em_status emc_dropout(int device, em_dtype dt, void *out, void *mask, const void *x,
                                 int64_t n, double p, uint64_t seed, uint64_t offset) {
  const char *op = "cuda dropout";
  if (dt != EM_F32 && dt != EM_F64 && dt != EM_BF16)
    return emc_bad_dtype("dropout", dt, "float32, float64, bfloat16");
  if (!(p >= 0 && p <= 1))
    return em_error(EM_ERR_ARG, "cuda dropout: probability %g, expected within [0, 1]", p);
  if (n < 0) return em_error(EM_ERR_SHAPE, "cuda dropout: n = %lld", (long long)n);
  if (n > 0 && out && !x) return em_error(EM_ERR_ARG, "cuda dropout: input x is NULL");
  if (n == 0) return EM_OK;
  emc_device *d = NULL;
  em_status s = emc_device_get(device, op, &d);
  if (s) return s;
  if (p == 1) {
    /* nothing is kept (uniform draws are < 1); avoid 1/0 */
    size_t bytes = (size_t)n * em_dtype_size(dt);
    if (out) EMC_CHECK(cudaMemsetAsync(out, 0, bytes, d->stream), op);
    if (mask) EMC_CHECK(cudaMemsetAsync(mask, 0, bytes, d->stream), op);
    return EM_OK;
  }
  switch (dt) {
    case EM_F32: launch_dropout<float>(d, n, out, mask, x, p, seed, offset); break;
    case EM_F64: launch_dropout<double>(d, n, out, mask, x, p, seed, offset); break;
    default: launch_dropout<bf16_t>(d, n, out, mask, x, p, seed, offset); break;
  }
  return emc_launch_status(op);
}
