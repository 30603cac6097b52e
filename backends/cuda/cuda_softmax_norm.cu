/*
** cuda_softmax_norm.cu -- softmax / log_softmax and layer_norm, forward and
** backward, over the rows of a contiguous [rows, n] tensor.
**
** A row belongs to a warp (n <= 1024, eight rows to a block) or to a whole
** block (emc_plan_rows). Row sums accumulate in double, as the CPU
** backend's do. bfloat16 computes in float, and layer_norm's mean and rstd
** are float32 for bfloat16 input (the core allocates them so).
*/
#include "cuda_kernels.cuh"

/* ------------------------------------------------------------------ */
/* softmax                                                             */
/* ------------------------------------------------------------------ */

template <class T>
__global__ void __launch_bounds__(EMC_ROW_MAX_THREADS)
softmax_kernel(int64_t rows, int64_t n, T *out, const T *x, bool log_) {
  typedef typename Acc<T>::type A;
  EMC_ROW_LOOP(row, rows) {
    const T *xr = x + row * n;
    T *yr = out + row * n;
    /* subtracting the row max keeps exp() from overflowing */
    A mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      A v = to_acc(xr[j]);
      mx = v > mx ? v : mx;
    }
    mx = row_max(mx, (A)-INFINITY);
    double sum = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += (double)m_exp(to_acc(xr[j]) - mx);
    sum = row_sum(sum);
    if (log_) {
      const A lsum = (A)log(sum); /* (x - max) - log(sum), as the CPU kernel */
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
        yr[j] = from_acc<T>((to_acc(xr[j]) - mx) - lsum);
    } else {
      const A inv = (A)(1.0 / sum);
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
        yr[j] = from_acc<T>(m_exp(to_acc(xr[j]) - mx) * inv);
    }
  }
}

/* softmax:     gx = y * (gy - sum(gy * y))
** log_softmax: gx = gy - exp(y) * sum(gy) */
template <class T>
__global__ void __launch_bounds__(EMC_ROW_MAX_THREADS)
softmax_backward_kernel(int64_t rows, int64_t n, T *gx, const T *gy, const T *y,
                                        bool log_) {
  typedef typename Acc<T>::type A;
  EMC_ROW_LOOP(row, rows) {
    const T *g = gy + row * n, *yr = y + row * n;
    T *d = gx + row * n;
    double sum = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      sum += log_ ? (double)to_acc(g[j]) : (double)to_acc(g[j]) * (double)to_acc(yr[j]);
    const A s = (A)row_sum(sum);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      A gj = to_acc(g[j]), yj = to_acc(yr[j]);
      d[j] = from_acc<T>(log_ ? gj - m_exp(yj) * s : yj * (gj - s));
    }
  }
}

static em_status check_rows(const char *kernel, int64_t rows, int64_t n) {
  if (rows < 0 || n < 0)
    return em_error(EM_ERR_SHAPE, "cuda %s: bad sizes rows=%lld n=%lld", kernel, (long long)rows,
                    (long long)n);
  return EM_OK;
}

template <class T>
static void launch_softmax(emc_device *d, bool backward, int64_t rows, int64_t n, void *out,
                           const void *a, const void *b, bool log_) {
  emc_rows_plan p = emc_plan_rows(rows, n);
  dim3 block(p.threads_per_row, p.rows_per_block);
  if (backward) {
    auto k = softmax_backward_kernel<T>;
    EMC_LAUNCH(k, emc_grid(p.blocks), block, d->stream, rows, n, (T *)out, (const T *)a,
               (const T *)b, log_);
  } else {
    auto k = softmax_kernel<T>;
    EMC_LAUNCH(k, emc_grid(p.blocks), block, d->stream, rows, n, (T *)out, (const T *)a, log_);
  }
}

extern "C" em_status emc_softmax(int device, em_dtype dt, void *out, const void *x, int64_t rows,
                                 int64_t n, bool log_) {
  const char *kernel = log_ ? "log_softmax" : "softmax";
  em_status s = check_rows(kernel, rows, n);
  if (s || rows == 0 || n == 0) return s;
  emc_device *d = NULL;
  if ((s = emc_device_get(device, kernel, &d))) return s;
  EMC_SWITCH_FLOAT(dt, T, return emc_bad_dtype(kernel, dt, "float32, float64, bfloat16"),
                   launch_softmax<T>(d, false, rows, n, out, x, NULL, log_))
  return emc_launch_status(kernel);
}

extern "C" em_status emc_softmax_backward(int device, em_dtype dt, void *gx, const void *gy,
                                          const void *y, int64_t rows, int64_t n, bool log_) {
  const char *kernel = log_ ? "log_softmax_backward" : "softmax_backward";
  em_status s = check_rows(kernel, rows, n);
  if (s || rows == 0 || n == 0) return s;
  emc_device *d = NULL;
  if ((s = emc_device_get(device, kernel, &d))) return s;
  EMC_SWITCH_FLOAT(dt, T, return emc_bad_dtype(kernel, dt, "float32, float64, bfloat16"),
                   launch_softmax<T>(d, true, rows, n, gx, gy, y, log_))
  return emc_launch_status(kernel);
}

/* ------------------------------------------------------------------ */
/* layer_norm                                                          */
/* ------------------------------------------------------------------ */

/* S is the type of mean and rstd: the compute type (float for bfloat16). */
template <class T>
__global__ void __launch_bounds__(EMC_ROW_MAX_THREADS)
layer_norm_kernel(int64_t rows, int64_t n, double eps, T *y,
                                  typename Acc<T>::type *mean, typename Acc<T>::type *rstd,
                                  const T *x, const T *w, const T *b) {
  typedef typename Acc<T>::type A;
  EMC_ROW_LOOP(row, rows) {
    const T *xr = x + row * n;
    T *yr = y + row * n;
    double sum = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += (double)to_acc(xr[j]);
    const double mu = row_sum(sum) / (double)n;
    double m2 = 0; /* two passes: the variance never goes negative */
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      double dv = (double)to_acc(xr[j]) - mu;
      m2 += dv * dv;
    }
    m2 = row_sum(m2);
    const double rs = 1.0 / sqrt(m2 / (double)n + eps);
    if (threadIdx.x == 0) {
      if (mean) mean[row] = (A)mu;
      if (rstd) rstd[row] = (A)rs;
    }
    const A tmu = (A)mu, trs = (A)rs;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      A v = (to_acc(xr[j]) - tmu) * trs;
      if (w) v = v * to_acc(w[j]);
      if (b) v = v + to_acc(b[j]);
      yr[j] = from_acc<T>(v);
    }
  }
}

/* With xhat = (x - mean) * rstd and g = dy * w:
**   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) */
template <class T>
__global__ void __launch_bounds__(EMC_ROW_MAX_THREADS)
layer_norm_dx_kernel(int64_t rows, int64_t n, T *dx, const T *dy, const T *x,
                                     const typename Acc<T>::type *mean,
                                     const typename Acc<T>::type *rstd, const T *w) {
  typedef typename Acc<T>::type A;
  EMC_ROW_LOOP(row, rows) {
    const T *xr = x + row * n, *dyr = dy + row * n;
    T *dxr = dx + row * n;
    const A mu = mean[row], rs = rstd[row];
    double sg = 0, sgx = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      A g = w ? to_acc(dyr[j]) * to_acc(w[j]) : to_acc(dyr[j]);
      sg += (double)g;
      sgx += (double)g * (double)((to_acc(xr[j]) - mu) * rs);
    }
    sg = row_sum(sg);
    sgx = row_sum(sgx);
    const A a = (A)(sg / (double)n), c = (A)(sgx / (double)n);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      A g = w ? to_acc(dyr[j]) * to_acc(w[j]) : to_acc(dyr[j]);
      dxr[j] = from_acc<T>(rs * (g - a - (to_acc(xr[j]) - mu) * rs * c));
    }
  }
}

/* dw = sum over rows of dy * xhat, db = sum over rows of dy: a reduction
** of [1, rows, n] planned like any other (columns along bx, rows along
** by). Split plans leave double partial sums in part[2][nsplit][n]. */
template <class T>
__global__ void __launch_bounds__(EMC_THREADS)
layer_norm_dwdb_kernel(emc_reduce_plan p, int64_t rows, int64_t n, const T *dy, const T *x,
                       const typename Acc<T>::type *mean, const typename Acc<T>::type *rstd,
                       T *dw, T *db, double *part) {
  typedef typename Acc<T>::type A;
  __shared__ double sw[EMC_THREADS], sb[EMC_THREADS];
  const int tx = threadIdx.x, ty = threadIdx.y, bx = p.bx, by = p.by;
  for (int64_t w = blockIdx.x; w < p.items; w += gridDim.x) {
    int64_t o, ib, s;
    emc_reduce_item(&p, w, &o, &ib, &s);
    const int64_t j = ib * bx + tx;
    double aw = 0, ab = 0;
    if (j < n) {
      int64_t r0 = s * p.chunk, r1 = r0 + p.chunk < rows ? r0 + p.chunk : rows;
      for (int64_t r = r0 + ty; r < r1; r += by) {
        A g = to_acc(dy[r * n + j]);
        aw += (double)(g * ((to_acc(x[r * n + j]) - mean[r]) * rstd[r]));
        ab += (double)g;
      }
    }
    sw[ty * bx + tx] = aw;
    sb[ty * bx + tx] = ab;
    __syncthreads();
    for (int half = by / 2; half > 0; half /= 2) {
      if (ty < half) {
        sw[ty * bx + tx] += sw[(ty + half) * bx + tx];
        sb[ty * bx + tx] += sb[(ty + half) * bx + tx];
      }
      __syncthreads();
    }
    if (ty == 0 && j < n) {
      if (p.nsplit > 1) {
        part[s * n + j] = sw[tx];
        part[(p.nsplit + s) * n + j] = sb[tx];
      } else {
        if (dw) dw[j] = cast_from_double<T>(sw[tx]);
        if (db) db[j] = cast_from_double<T>(sb[tx]);
      }
    }
    __syncthreads();
  }
}

/* Adds up the nsplit partial sums of each column, in piece order. */
template <class T>
__global__ void layer_norm_dwdb_finish(int64_t nsplit, int64_t n, const double *part, T *dw,
                                       T *db) {
  EMC_GRID_LOOP(j, n) {
    double aw = 0, ab = 0;
    for (int64_t s = 0; s < nsplit; s++) {
      aw += part[s * n + j];
      ab += part[(nsplit + s) * n + j];
    }
    if (dw) dw[j] = cast_from_double<T>(aw);
    if (db) db[j] = cast_from_double<T>(ab);
  }
}

template <class T>
static void launch_layer_norm(emc_device *d, void *y, void *mean, void *rstd, const void *x,
                              const void *w, const void *b, int64_t rows, int64_t n, double eps) {
  typedef typename Acc<T>::type A;
  emc_rows_plan p = emc_plan_rows(rows, n);
  auto k = layer_norm_kernel<T>;
  EMC_LAUNCH(k, emc_grid(p.blocks), dim3(p.threads_per_row, p.rows_per_block), d->stream, rows, n,
             eps, (T *)y, (A *)mean, (A *)rstd, (const T *)x, (const T *)w, (const T *)b);
}

extern "C" em_status emc_layer_norm(int device, em_dtype dt, void *y, void *mean, void *rstd,
                                    const void *x, const void *w, const void *b, int64_t rows,
                                    int64_t n, double eps) {
  const char *kernel = "layer_norm";
  em_status s = check_rows(kernel, rows, n);
  if (s || rows == 0 || n == 0) return s;
  emc_device *d = NULL;
  if ((s = emc_device_get(device, kernel, &d))) return s;
  EMC_SWITCH_FLOAT(dt, T, return emc_bad_dtype(kernel, dt, "float32, float64, bfloat16"),
                   launch_layer_norm<T>(d, y, mean, rstd, x, w, b, rows, n, eps))
  return emc_launch_status(kernel);
}

template <class T>
static em_status launch_layer_norm_backward(emc_device *d, void *dx, void *dw, void *db,
                                            const void *dy, const void *x, const void *mean,
                                            const void *rstd, const void *w, int64_t rows,
                                            int64_t n) {
  typedef typename Acc<T>::type A;
  const char *kernel = "layer_norm_backward";
  emc_rows_plan rp = emc_plan_rows(rows, n);
  auto kdx = layer_norm_dx_kernel<T>;
  EMC_LAUNCH(kdx, emc_grid(rp.blocks), dim3(rp.threads_per_row, rp.rows_per_block), d->stream,
             rows, n, (T *)dx, (const T *)dy, (const T *)x, (const A *)mean, (const A *)rstd,
             (const T *)w);
  if (!dw && !db) return emc_launch_status(kernel);
  emc_reduce_plan p;
  emc_plan_reduce(1, rows, n, d->sm_count, &p);
  double *part = NULL;
  if (p.nsplit > 1) {
    em_status s = emc_scratch(d, 2 * (size_t)p.nsplit * (size_t)n * sizeof(double), kernel,
                              (void **)&part);
    if (s) return s;
  }
  auto kw = layer_norm_dwdb_kernel<T>;
  EMC_LAUNCH(kw, emc_grid(p.grid), dim3(p.bx, p.by), d->stream, p, rows, n, (const T *)dy,
             (const T *)x, (const A *)mean, (const A *)rstd, (T *)dw, (T *)db, part);
  if (part) {
    auto kf = layer_norm_dwdb_finish<T>;
    EMC_LAUNCH(kf, emc_grid(emc_blocks_for(n, EMC_THREADS)), EMC_THREADS, d->stream, p.nsplit, n,
               (const double *)part, (T *)dw, (T *)db);
    emc_scratch_free(d, part);
  }
  return emc_launch_status(kernel);
}

extern "C" em_status emc_layer_norm_backward(int device, em_dtype dt, void *dx, void *dw,
                                             void *db, const void *dy, const void *x,
                                             const void *mean, const void *rstd, const void *w,
                                             int64_t rows, int64_t n) {
  const char *kernel = "layer_norm_backward";
  em_status s = check_rows(kernel, rows, n);
  if (s || n == 0) return s;
  if (!dx || !dy || !x || !mean || !rstd)
    return em_error(EM_ERR_ARG, "cuda layer_norm_backward: dx, dy, x, mean and rstd must not be NULL");
  emc_device *d = NULL;
  if ((s = emc_device_get(device, kernel, &d))) return s;
  if (rows == 0) { /* no rows: the parameter gradients are zero */
    size_t el = em_dtype_size(dt);
    if (dw) EMC_CHECK(cudaMemsetAsync(dw, 0, (size_t)n * el, d->stream), kernel);
    if (db) EMC_CHECK(cudaMemsetAsync(db, 0, (size_t)n * el, d->stream), kernel);
    return EM_OK;
  }
  EMC_SWITCH_FLOAT(dt, T, return emc_bad_dtype(kernel, dt, "float32, float64, bfloat16"),
                   return launch_layer_norm_backward<T>(d, dx, dw, db, dy, x, mean, rstd, w, rows,
                                                        n))
  return EM_OK;
}
