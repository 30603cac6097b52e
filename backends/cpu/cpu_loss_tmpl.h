/*
** cpu_loss_tmpl.h -- cross entropy forward and backward for one float
** type; included by cpu_loss.c with T (float or double) and SUF set.
** Row sums accumulate in double; EXP_T is the exponential for T (set by
** cpu_loss.c).
*/

#define FN(name) CPU_CAT(name, SUF)

/* One row's logsumexp and sum (a function of its own, so that it runs
** the machine's vector clone: a loop written inside CPU_FOR does not). */
CPU_VECTOR_CLONES_512 static double FN(ce_lse_row)(const T *x, int64_t classes, double *sumx_out) {
  const T mx = CPU_CAT(cpu_max, SUF)(x, classes);
  *sumx_out = CPU_CAT(cpu_sum, SUF)(x, classes);
  return (double)mx + log(CPU_CAT(cpu_sum_exp, SUF)(x, classes, mx));
}

static void FN(ce_forward)(T *L, T *LSE, const T *X, const int64_t *target, int64_t rows,
                           int64_t classes, int64_t ignore_index, double smoothing) {
  CPU_FOR(rows * classes > CPU_PAR_MIN, r, rows,
    const T *x = X + r * classes;
    double sumx;
    const double l = FN(ce_lse_row)(x, classes, &sumx);
    if (LSE) LSE[r] = (T)l;
    const int64_t t = target[r];
    if (t == ignore_index) {
      L[r] = 0;
      continue;
    }
    double v = (1 - smoothing) * (l - (double)x[t]);
    if (smoothing > 0) v += smoothing * (l - sumx / (double)classes);
    L[r] = (T)v;);
}

CPU_VECTOR_CLONES_512 static void FN(ce_grad_row)(T *g, const T *x, int64_t classes, T d, T l,
                                                  T uni) {
  for (int64_t c = 0; c < classes; c++) g[c] = d * (EXP_T(x[c] - l) - uni);
}

/* d loss / d x[c] = softmax(x)[c] - eps / C - (1 - eps) * [c == target] */
static void FN(ce_backward)(T *G, const T *DL, const T *X, const T *LSE, const int64_t *target,
                            int64_t rows, int64_t classes, int64_t ignore_index,
                            double smoothing) {
  const T uni = (T)(smoothing / (double)classes), hit = (T)(1 - smoothing);
  CPU_FOR(rows * classes > CPU_PAR_MIN, r, rows,
    const T *x = X + r * classes;
    T *g = G + r * classes;
    const int64_t t = target[r];
    if (t == ignore_index) {
      for (int64_t c = 0; c < classes; c++) g[c] = 0;
      continue;
    }
    FN(ce_grad_row)(g, x, classes, DL[r], LSE[r], uni);
    g[t] -= DL[r] * hit;);
}

#undef FN
