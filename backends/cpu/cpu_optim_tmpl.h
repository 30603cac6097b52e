/*
** cpu_optim_tmpl.h -- the fused Adam and SGD steps for one storage type;
** included by cpu_optim.c with T (the element type), SUF, and LD(x) / ST(d)
** (an element to double, a double to an element). Each element's update is
** computed in double.
*/

#define FN(name) CPU_CAT(name, SUF)

/* Elements [lo, hi) of the Adam step (a vector clone: see CPU_FOR_RANGES;
** sqrt and division are correctly rounded in every build, so the same bits). */
CPU_VECTOR_CLONES_512 static void FN(adam_range)(int64_t lo, int64_t hi, T *restrict P,
                                                 const T *restrict G, T *restrict M,
                                                 T *restrict V, double beta1, double beta2,
                                                 double eps, double weight_decay, bool decoupled,
                                                 double step_size, double bc2_sqrt, double decay) {
  for (int64_t i = lo; i < hi; i++) {
    double p = LD(P[i]), g = LD(G[i]);
    if (decoupled) p *= decay;
    else g += weight_decay * p;
    double mi = beta1 * LD(M[i]) + (1 - beta1) * g;
    double vi = beta2 * LD(V[i]) + (1 - beta2) * g * g;
    M[i] = ST(mi); /* continue from the stored values, as PyTorch does */
    V[i] = ST(vi);
    mi = LD(M[i]);
    vi = LD(V[i]);
    P[i] = ST(p - step_size * mi / (sqrt(vi) / bc2_sqrt + eps));
  }
}

static void FN(adam)(int64_t n, T *P, const T *G, T *M, T *V, double beta1, double beta2,
                     double eps, double weight_decay, bool decoupled, double step_size,
                     double bc2_sqrt, double decay) {
  CPU_FOR_RANGES(n > OPTIM_PAR_MIN, n, lo, hi,
    FN(adam_range)(lo, hi, P, G, M, V, beta1, beta2, eps, weight_decay, decoupled, step_size,
                   bc2_sqrt, decay););
}

CPU_VECTOR_CLONES_512 static void FN(sgd_range)(int64_t lo, int64_t hi, T *restrict P,
                                                const T *restrict G, T *restrict BUF, double lr,
                                                double momentum, double dampening,
                                                double weight_decay, bool nesterov,
                                                bool first_step) {
  for (int64_t i = lo; i < hi; i++) {
    double p = LD(P[i]), d = LD(G[i]);
    if (weight_decay != 0) d += weight_decay * p;
    if (momentum != 0) {
      double b = first_step ? d : momentum * LD(BUF[i]) + (1 - dampening) * d;
      BUF[i] = ST(b);
      b = LD(BUF[i]);
      d = nesterov ? d + momentum * b : b;
    }
    P[i] = ST(p - lr * d);
  }
}

/* The sum of x[i]^2 over [lo, hi) in double, in CPU_LANES interleaved
** partials added in one order at the end: the same bits on every clone. */
CPU_VECTOR_CLONES_512 static double FN(sumsq_range)(const T *restrict X, int64_t lo, int64_t hi) {
  double acc[CPU_LANES] = {0};
  int64_t i = lo;
  for (; i + CPU_LANES <= hi; i += CPU_LANES)
    for (int k = 0; k < CPU_LANES; k++) {
      const double x = LD(X[i + k]);
      acc[k] += x * x;
    }
  double s = 0;
  for (int k = 0; k < CPU_LANES; k++) s += acc[k];
  for (; i < hi; i++) s += LD(X[i]) * LD(X[i]);
  return s;
}

static void FN(sgd)(int64_t n, T *P, const T *G, T *BUF, double lr, double momentum,
                    double dampening, double weight_decay, bool nesterov, bool first_step) {
  CPU_FOR_RANGES(n > OPTIM_PAR_MIN, n, lo, hi,
    FN(sgd_range)(lo, hi, P, G, BUF, lr, momentum, dampening, weight_decay, nesterov,
                  first_step););
}

#undef FN
