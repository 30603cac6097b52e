/*
** cpu_loss_tmpl.h -- cross entropy forward and backward for one float
** type; included by cpu_loss.c with T (float or double) and SUF set.
** Row sums accumulate in double; <tgmath.h> picks expf for float.
*/

#define FN(name) CPU_CAT(name, SUF)

static void FN(ce_forward)(T *L, T *LSE, const T *X, const int64_t *target, int64_t rows,
                           int64_t classes, int64_t ignore_index, double smoothing) {
  CPU_FOR(rows * classes > CPU_PAR_MIN, r, rows,
    const T *x = X + r * classes;
    T mx = -INFINITY;
    for (int64_t c = 0; c < classes; c++) mx = x[c] > mx ? x[c] : mx;
    double sum = 0, sumx = 0;
    for (int64_t c = 0; c < classes; c++) {
      sum += (double)exp(x[c] - mx);
      sumx += (double)x[c];
    }
    const double l = (double)mx + log(sum);
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
    const T d = DL[r], l = LSE[r];
    for (int64_t c = 0; c < classes; c++) g[c] = d * (exp(x[c] - l) - uni);
    g[t] -= d * hit;);
}

#undef FN
