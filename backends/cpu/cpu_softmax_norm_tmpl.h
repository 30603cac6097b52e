/*
** cpu_softmax_norm_tmpl.h -- softmax and layer norm for one float type;
** included by cpu_softmax_norm.c with T (float or double) and SUF set.
** Each kernel is a function of one row, run over the rows by CPU_FOR.
** Row sums accumulate in double; EXP_T is the exponential for T (set by
** cpu_softmax_norm.c).
*/

#define FN(name) CPU_CAT(name, SUF)

CPU_VECTOR_CLONES_512 static void FN(softmax_row)(T *yr, const T *xr, int64_t n, bool log_) {
  /* subtracting the row max keeps exp() from overflowing */
  const T mx = CPU_CAT(cpu_max, SUF)(xr, n);
  if (log_) {
    const double sum = CPU_CAT(cpu_sum_exp, SUF)(xr, n, mx);
    const T shift = mx + (T)log(sum); /* logsumexp of the row */
    for (int64_t j = 0; j < n; j++) yr[j] = xr[j] - shift;
  } else {
    /* the exponentials first (a loop that vectorises), then their sum in order */
    for (int64_t j = 0; j < n; j++) yr[j] = EXP_T(xr[j] - mx);
    const T inv = (T)(1.0 / CPU_CAT(cpu_sum, SUF)(yr, n));
    for (int64_t j = 0; j < n; j++) yr[j] *= inv;
  }
}

static void FN(softmax)(T *out, const T *x, int64_t rows, int64_t n, bool log_) {
  CPU_FOR(rows * n > CPU_PAR_MIN, r, rows, FN(softmax_row)(out + r * n, x + r * n, n, log_););
}

/* softmax:     gx = y * (gy - sum(gy * y))
** log_softmax: gx = gy - exp(y) * sum(gy) */
CPU_VECTOR_CLONES_512 static void FN(softmax_backward_row)(T *d, const T *g, const T *yr, int64_t n, bool log_) {
  double sum = 0;
  if (log_) {
    for (int64_t j = 0; j < n; j++) sum += (double)g[j];
    const T s = (T)sum;
    for (int64_t j = 0; j < n; j++) d[j] = g[j] - EXP_T(yr[j]) * s;
  } else {
    for (int64_t j = 0; j < n; j++) sum += (double)g[j] * (double)yr[j];
    const T s = (T)sum;
    for (int64_t j = 0; j < n; j++) d[j] = yr[j] * (g[j] - s);
  }
}

static void FN(softmax_backward)(T *gx, const T *gy, const T *y, int64_t rows, int64_t n,
                                 bool log_) {
  CPU_FOR(rows * n > CPU_PAR_MIN, r, rows,
          FN(softmax_backward_row)(gx + r * n, gy + r * n, y + r * n, n, log_););
}

/* Layer norm of a row, or with centred false RMS norm (mu = 0: x scaled
** by 1/sqrt(mean(x^2) + eps), Zhang and Sennrich 2019), which is the same
** computation without the mean. */
CPU_VECTOR_CLONES_512 static void FN(layer_norm_row)(T *yr, T *mean, T *rstd, const T *xr,
                                                 const T *w, const T *b, int64_t n, double eps,
                                                 bool centred) {
  const double mu = centred ? CPU_CAT(cpu_sum, SUF)(xr, n) / (double)n : 0.0;
  /* two passes: the variance never goes negative */
  const double m2 = CPU_CAT(cpu_sqdev, SUF)(xr, n, mu);
  const double rs = 1.0 / sqrt(m2 / (double)n + eps);
  if (mean) *mean = (T)mu;
  if (rstd) *rstd = (T)rs;
  const T tmu = (T)mu, trs = (T)rs;
  if (w && b)
    for (int64_t j = 0; j < n; j++) yr[j] = (xr[j] - tmu) * trs * w[j] + b[j];
  else if (w)
    for (int64_t j = 0; j < n; j++) yr[j] = (xr[j] - tmu) * trs * w[j];
  else if (b)
    for (int64_t j = 0; j < n; j++) yr[j] = (xr[j] - tmu) * trs + b[j];
  else
    for (int64_t j = 0; j < n; j++) yr[j] = (xr[j] - tmu) * trs;
}

static void FN(layer_norm)(T *y, T *mean, T *rstd, const T *x, const T *w, const T *b,
                           int64_t rows, int64_t n, double eps, bool centred) {
  CPU_FOR(rows * n > CPU_PAR_MIN, r, rows,
          FN(layer_norm_row)(y + r * n, mean ? mean + r : NULL, rstd ? rstd + r : NULL, x + r * n,
                             w, b, n, eps, centred););
}

/* With xhat = (x - mean) * rstd and g = dy * w:
**   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
** and for RMS norm (centred false, mu = 0) the same without mean(g). */
CPU_VECTOR_CLONES_512 static void FN(layer_norm_dx_row)(T *dxr, const T *dyr, const T *xr, T mu,
                                                    T rs, const T *w, int64_t n, bool centred) {
  /* both sums in the lanes of cpu_sum (cpu_vmath.h): one order on every clone */
  double asg[CPU_LANES] = {0}, asgx[CPU_LANES] = {0};
  int64_t j = 0;
  for (; j + CPU_LANES <= n; j += CPU_LANES)
    for (int k = 0; k < CPU_LANES; k++) {
      const T g = w ? dyr[j + k] * w[j + k] : dyr[j + k];
      asg[k] += (double)g;
      asgx[k] += (double)g * (double)((xr[j + k] - mu) * rs);
    }
  double sg = 0, sgx = 0;
  for (int k = 0; k < CPU_LANES; k++) sg += asg[k], sgx += asgx[k];
  for (; j < n; j++) {
    const T g = w ? dyr[j] * w[j] : dyr[j];
    sg += (double)g;
    sgx += (double)g * (double)((xr[j] - mu) * rs);
  }
  const T a = centred ? (T)(sg / (double)n) : (T)0, c = (T)(sgx / (double)n);
  for (j = 0; j < n; j++) {
    T g = w ? dyr[j] * w[j] : dyr[j];
    dxr[j] = rs * (g - a - (xr[j] - mu) * rs * c);
  }
}

/* dw = sum over rows of dy * xhat, db = sum over rows of dy, for the
** columns [j0, j0 + nb): the block reads its piece of every row, so no two
** blocks collide and the sums do not depend on the thread count. mean is
** NULL for RMS norm (mu = 0). A whole block keeps its sums in registers (a
** constant trip count); with a variable one they went through memory on
** every row, and the pass took 60% of a [4096, 128] layer norm's backward.
** Vector clones: called from a CPU_FOR body, which is built for the
** baseline (cpu_internal.h). Each column is summed over the rows in order,
** so the block width does not change the bits. */
enum { FN(LN_CB) = 32 };
#define LN_DWDB_ROWS(NB, MU)                                                  \
  for (int64_t r = 0; r < rows; r++) {                                        \
    const T *xr = x + r * n + j0, *dyr = dy + r * n + j0;                     \
    const T mu = (MU), rs = rstd[r];                                          \
    _Pragma("GCC unroll 32")                                                  \
    for (int64_t j = 0; j < (NB); j++) {                                      \
      aw[j] += (double)(dyr[j] * ((xr[j] - mu) * rs));                        \
      ab[j] += (double)dyr[j];                                                \
    }                                                                         \
  }
CPU_VECTOR_CLONES_512 static void FN(layer_norm_dwdb_block)(T *restrict dw, T *restrict db,
                                                          const T *restrict dy, const T *restrict x,
                                                          const T *restrict mean,
                                                          const T *restrict rstd, int64_t rows,
                                                          int64_t n, int64_t j0, int64_t nb) {
  double aw[FN(LN_CB)] = {0}, ab[FN(LN_CB)] = {0};
  if (nb == FN(LN_CB) && mean) LN_DWDB_ROWS(FN(LN_CB), mean[r])
  else if (nb == FN(LN_CB)) LN_DWDB_ROWS(FN(LN_CB), (T)0)
  else LN_DWDB_ROWS(nb, mean ? mean[r] : (T)0)
  for (int64_t j = 0; j < nb; j++) {
    if (dw) dw[j0 + j] = (T)aw[j];
    if (db) db[j0 + j] = (T)ab[j];
  }
}
#undef LN_DWDB_ROWS

/* mean NULL: RMS norm's backward. */
static void FN(layer_norm_backward)(T *dx, T *dw, T *db, const T *dy, const T *x, const T *mean,
                                    const T *rstd, const T *w, int64_t rows, int64_t n) {
  const bool par = rows * n > CPU_PAR_MIN;
  CPU_FOR(par, r, rows,
          FN(layer_norm_dx_row)(dx + r * n, dy + r * n, x + r * n, mean ? mean[r] : (T)0, rstd[r],
                                w, n, mean != NULL););
  if (!dw && !db) return;
  const int64_t nblk = (n + FN(LN_CB) - 1) / FN(LN_CB);
  CPU_FOR(par, blk, nblk,
    const int64_t j0 = blk * FN(LN_CB);
    FN(layer_norm_dwdb_block)(dw, db, dy, x, mean, rstd, rows, n, j0,
                              n - j0 < FN(LN_CB) ? n - j0 : FN(LN_CB)););
}

#undef FN
