/*
** cuda_optim.cu -- fused optimizer steps, in place, one thread per element.
** Each element's update is computed in double and stored back, with the
** same formulas as cpu_optim.c (torch.optim.Adam / AdamW / SGD):
**
**   Adam / AdamW:
**     g = grad (+ wd * param for Adam)          param *= 1 - lr * wd (AdamW)
**     m = b1 * m + (1 - b1) * g                 v = b2 * v + (1 - b2) * g^2
**     param -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
**   SGD:
**     d = grad + wd * param
**     with momentum: buf = d on the first step, else momentum * buf + (1 - dampening) * d;
**                    d = nesterov ? d + momentum * buf : buf
**     param -= lr * d
** The bias corrections are computed once on the host.
*/
#include "cuda_kernels.cuh"

#include <math.h>

template <class T>
__global__ void adam_kernel(int64_t n, T *P, const T *G, T *M, T *V, double beta1, double beta2,
                            double eps, double weight_decay, bool decoupled, double step_size,
                            double bc2_sqrt, double decay) {
  EMC_GRID_LOOP(i, n) {
    double p = (double)to_acc(P[i]), g = (double)to_acc(G[i]);
    if (decoupled) p *= decay;
    else g += weight_decay * p;
    T mt = cast_from_double<T>(beta1 * (double)to_acc(M[i]) + (1 - beta1) * g);
    T vt = cast_from_double<T>(beta2 * (double)to_acc(V[i]) + (1 - beta2) * g * g);
    M[i] = mt; /* continue from the stored values, as PyTorch does */
    V[i] = vt;
    double mi = (double)to_acc(mt), vi = (double)to_acc(vt);
    P[i] = cast_from_double<T>(p - step_size * mi / (sqrt(vi) / bc2_sqrt + eps));
  }
}

template <class T>
static void launch_adam(emc_device *d, int64_t n, void *param, const void *grad, void *m, void *v,
                        double beta1, double beta2, double eps, double weight_decay,
                        bool decoupled, double step_size, double bc2_sqrt, double decay) {
  auto k = adam_kernel<T>;
  EMC_LAUNCH(k, emc_grid(emc_blocks_for(n, EMC_THREADS)), EMC_THREADS, d->stream, n, (T *)param,
             (const T *)grad, (T *)m, (T *)v, beta1, beta2, eps, weight_decay, decoupled,
             step_size, bc2_sqrt, decay);
}

extern "C" em_status emc_adam_step(int device, em_dtype dt, int64_t n, void *param,
                                   const void *grad, void *m, void *v, double lr, double beta1,
                                   double beta2, double eps, double weight_decay, int64_t step,
                                   bool decoupled) {
  const char *kernel = decoupled ? "adamw_step" : "adam_step";
  if (dt != EM_F32 && dt != EM_F64 && dt != EM_BF16)
    return emc_bad_dtype(kernel, dt, "float32, float64, bfloat16");
  if (step < 1)
    return em_error(EM_ERR_ARG, "cuda %s: step %lld, expected >= 1 (steps count from 1)", kernel,
                    (long long)step);
  if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
    return em_error(EM_ERR_ARG, "cuda %s: betas (%g, %g), expected within [0, 1)", kernel, beta1,
                    beta2);
  if (n < 0) return em_error(EM_ERR_SHAPE, "cuda %s: n = %lld", kernel, (long long)n);
  if (n == 0) return EM_OK;
  if (!param || !grad || !m || !v)
    return em_error(EM_ERR_ARG, "cuda %s: param, grad, m and v must not be NULL", kernel);
  emc_device *d = NULL;
  em_status s = emc_device_get(device, kernel, &d);
  if (s) return s;
  const double bc1 = 1 - pow(beta1, (double)step);
  const double bc2_sqrt = sqrt(1 - pow(beta2, (double)step));
  const double step_size = lr / bc1, decay = 1 - lr * weight_decay;
  EMC_SWITCH_FLOAT(dt, T, return emc_bad_dtype(kernel, dt, "float32, float64, bfloat16"),
                   launch_adam<T>(d, n, param, grad, m, v, beta1, beta2, eps, weight_decay,
                                  decoupled, step_size, bc2_sqrt, decay))
  return emc_launch_status(kernel);
}

template <class T>
__global__ void sgd_kernel(int64_t n, T *P, const T *G, T *BUF, double lr, double momentum,
                           double dampening, double weight_decay, bool nesterov, bool first_step) {
  EMC_GRID_LOOP(i, n) {
    double p = (double)to_acc(P[i]), d = (double)to_acc(G[i]);
    if (weight_decay != 0) d += weight_decay * p;
    if (momentum != 0) {
      double b = first_step ? d : momentum * (double)to_acc(BUF[i]) + (1 - dampening) * d;
      T bt = cast_from_double<T>(b);
      BUF[i] = bt;
      b = (double)to_acc(bt);
      d = nesterov ? d + momentum * b : b;
    }
    P[i] = cast_from_double<T>(p - lr * d);
  }
}

template <class T>
static void launch_sgd(emc_device *d, int64_t n, void *param, const void *grad, void *buf,
                       double lr, double momentum, double dampening, double weight_decay,
                       bool nesterov, bool first_step) {
  auto k = sgd_kernel<T>;
  EMC_LAUNCH(k, emc_grid(emc_blocks_for(n, EMC_THREADS)), EMC_THREADS, d->stream, n, (T *)param,
             (const T *)grad, (T *)buf, lr, momentum, dampening, weight_decay, nesterov,
             first_step);
}

extern "C" em_status emc_sgd_step(int device, em_dtype dt, int64_t n, void *param,
                                  const void *grad, void *buf, double lr, double momentum,
                                  double dampening, double weight_decay, bool nesterov,
                                  bool first_step) {
  const char *kernel = "sgd_step";
  if (dt != EM_F32 && dt != EM_F64 && dt != EM_BF16)
    return emc_bad_dtype(kernel, dt, "float32, float64, bfloat16");
  if (nesterov && (momentum <= 0 || dampening != 0))
    return em_error(EM_ERR_ARG,
                    "cuda sgd_step: nesterov needs momentum > 0 and dampening 0, got momentum %g, "
                    "dampening %g",
                    momentum, dampening);
  if (n < 0) return em_error(EM_ERR_SHAPE, "cuda sgd_step: n = %lld", (long long)n);
  if (n == 0) return EM_OK;
  if (!param || !grad) return em_error(EM_ERR_ARG, "cuda sgd_step: param and grad must not be NULL");
  if (momentum != 0 && !buf)
    return em_error(EM_ERR_ARG, "cuda sgd_step: momentum %g needs a momentum buffer, got NULL",
                    momentum);
  emc_device *d = NULL;
  em_status s = emc_device_get(device, kernel, &d);
  if (s) return s;
  EMC_SWITCH_FLOAT(dt, T, return emc_bad_dtype(kernel, dt, "float32, float64, bfloat16"),
                   launch_sgd<T>(d, n, param, grad, buf, lr, momentum, dampening, weight_decay,
                                 nesterov, first_step))
  return emc_launch_status(kernel);
}
