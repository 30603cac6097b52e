/*
** cuda_loss.cu -- cross entropy with ignore_index and label smoothing.
**
** For a row with logits x, target t and smoothing e over C classes:
**   loss = (1 - e) * (lse - x[t]) + e * (lse - mean(x))
**   dloss/dx[c] = softmax(x)[c] - (1 - e) * [c == t] - e / C
** which is PyTorch's definition. lse is saved (in the logits' dtype, as
** the core allocates it) so the backward needs no second pass over rows.
*/
#include "cuda_kernels.cuh"

template <class T>
__global__ void __launch_bounds__(EMC_ROW_MAX_THREADS)
cross_entropy_kernel(int64_t rows, int64_t C, T *loss, T *lse, const T *logits,
                                     const int64_t *target, int64_t ignore_index, double smoothing,
                                     int64_t *flag) {
  typedef typename Acc<T>::type A;
  EMC_ROW_LOOP(row, rows) {
    const T *xr = logits + row * C;
    A mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < C; j += blockDim.x) {
      A v = to_acc(xr[j]);
      mx = v > mx ? v : mx;
    }
    mx = row_max(mx, (A)-INFINITY);
    double sum = 0, sumx = 0;
    for (int64_t j = threadIdx.x; j < C; j += blockDim.x) {
      A v = to_acc(xr[j]);
      sum += (double)m_exp(v - mx);
      sumx += (double)v;
    }
    sum = row_sum(sum);
    sumx = row_sum(sumx);
    if (threadIdx.x != 0) continue;
    double l = (double)mx + log(sum);
    lse[row] = cast_from_double<T>(l);
    int64_t t = target[row];
    double r = 0;
    if (t != ignore_index) {
      if (t < 0 || t >= C) {
        if (atomicCAS((unsigned long long *)flag, 0ull, 1ull) == 0ull) flag[1] = t;
      } else {
        double nll = l - (double)to_acc(xr[t]);
        r = (1.0 - smoothing) * nll + smoothing * (l - sumx / (double)C);
      }
    }
    loss[row] = cast_from_double<T>(r);
  }
}

template <class T>
__global__ void cross_entropy_backward_kernel(int64_t rows, int64_t C, T *dlogits, const T *dloss,
                                              const T *logits, const T *lse,
                                              const int64_t *target, int64_t ignore_index,
                                              double smoothing) {
  typedef typename Acc<T>::type A;
  const A keep = (A)(1.0 - smoothing), spread = (A)(smoothing / (double)C);
  EMC_GRID_LOOP(e, rows * C) {
    int64_t r = e / C, c = e % C, t = target[r];
    A g = 0;
    /* Ignored rows, and targets the forward rejected, get no gradient. */
    if (t != ignore_index && t >= 0 && t < C) {
      A p = m_exp(to_acc(logits[e]) - to_acc(lse[r]));
      g = to_acc(dloss[r]) * (p - (c == t ? keep : (A)0) - spread);
    }
    dlogits[e] = from_acc<T>(g);
  }
}

static em_status check_ce(const char *op, int64_t rows, int64_t classes, double smoothing) {
  if (rows < 0 || classes <= 0)
    return em_error(EM_ERR_SHAPE, "%s: bad sizes rows=%lld classes=%lld", op, (long long)rows,
                    (long long)classes);
  if (!(smoothing >= 0 && smoothing <= 1))
    return em_error(EM_ERR_ARG, "%s: label smoothing %g, expected a value in [0, 1]", op,
                    smoothing);
  return EM_OK;
}

template <class T>
static void launch_ce(emc_device *d, void *loss, void *lse, const void *logits,
                      const int64_t *target, int64_t rows, int64_t classes, int64_t ignore_index,
                      double smoothing, int64_t *flag) {
  emc_rows_plan p = emc_plan_rows(rows, classes);
  auto k = cross_entropy_kernel<T>;
  EMC_LAUNCH(k, emc_grid(p.blocks), dim3(p.threads_per_row, p.rows_per_block), d->stream, rows,
             classes, (T *)loss, (T *)lse, (const T *)logits, target, ignore_index, smoothing,
             flag);
}

extern "C" em_status emc_cross_entropy(int device, em_dtype dt, void *loss, void *lse,
                                       const void *logits, const int64_t *target, int64_t rows,
                                       int64_t classes, int64_t ignore_index, double smoothing) {
  const char *op = "cuda cross_entropy";
  em_status s = check_ce(op, rows, classes, smoothing);
  if (s || rows == 0) return s;
  if (dt != EM_F32 && dt != EM_F64 && dt != EM_BF16)
    return emc_bad_dtype("cross_entropy", dt, "float32, float64, bfloat16");
  emc_device *d = NULL;
  if ((s = emc_device_get(device, op, &d))) return s;
  int64_t *flag = NULL;
  if ((s = emc_flag_new(d, op, &flag))) return s;
  switch (dt) {
    case EM_F32: launch_ce<float>(d, loss, lse, logits, target, rows, classes, ignore_index, smoothing, flag); break;
    case EM_F64: launch_ce<double>(d, loss, lse, logits, target, rows, classes, ignore_index, smoothing, flag); break;
    default: launch_ce<bf16_t>(d, loss, lse, logits, target, rows, classes, ignore_index, smoothing, flag); break;
  }
  if ((s = emc_launch_status(op))) {
    emc_scratch_free(d, flag);
    return s;
  }
  int64_t h[2];
  if ((s = emc_flag_fetch(d, flag, op, h))) return s;
  if (h[0])
    return em_error(EM_ERR_INDEX,
                    "%s: target %lld is out of range for %lld classes (and is not ignore_index %lld)",
                    op, (long long)h[1], (long long)classes, (long long)ignore_index);
  return EM_OK;
}

template <class T>
static void launch_ce_backward(emc_device *d, void *dlogits, const void *dloss, const void *logits,
                               const void *lse, const int64_t *target, int64_t rows,
                               int64_t classes, int64_t ignore_index, double smoothing) {
  auto k = cross_entropy_backward_kernel<T>;
  EMC_LAUNCH(k, emc_grid(emc_blocks_for(rows * classes, EMC_THREADS)), EMC_THREADS, d->stream,
             rows, classes, (T *)dlogits, (const T *)dloss, (const T *)logits, (const T *)lse,
             target, ignore_index, smoothing);
}

extern "C" em_status emc_cross_entropy_backward(int device, em_dtype dt, void *dlogits,
                                                const void *dloss, const void *logits,
                                                const void *lse, const int64_t *target,
                                                int64_t rows, int64_t classes,
                                                int64_t ignore_index, double smoothing) {
  const char *op = "cuda cross_entropy_backward";
  em_status s = check_ce(op, rows, classes, smoothing);
  if (s || rows == 0) return s;
  emc_device *d = NULL;
  if ((s = emc_device_get(device, op, &d))) return s;
  EMC_SWITCH_FLOAT(dt, T, return emc_bad_dtype("cross_entropy_backward", dt, "float32, float64, bfloat16"),
                   launch_ce_backward<T>(d, dlogits, dloss, logits, lse, target, rows, classes,
                                         ignore_index, smoothing))
  return emc_launch_status(op);
}
