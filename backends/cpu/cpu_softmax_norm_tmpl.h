/*
** cpu_softmax_norm_tmpl.h -- softmax and layer norm for one float type;
** included by cpu_softmax_norm.c with T (float or double) and SUF set.
** Softmax's kernels are functions of one row, run over the rows by
** CPU_FOR; the norms' of a block of LN_BLOCK rows.
** Row sums accumulate in double; EXP_T is the exponential for T (set by
** cpu_softmax_norm.c).
*/

#define FN(name) CPU_CAT(name, SUF)

CPU_VECTOR_CLONES_512 static void FN(softmax_row)(T *yr, const T *xr, int64_t n, bool log_) {
  /* subtracting the row max keeps exp() from overflowing */
  const T mx = CPU_CAT(cpu_max, SUF)(xr, n);
  if (log_) {
    const double sum = CPU_CAT(cpu_sum_exp, SUF)(xr, n, mx);
    /* (x - max) - log(sum), as PyTorch: x - (max + log(sum)) rounds log(sum)
    ** away where |max| dwarfs it ([1e8, 1e8] gave 0, not -log 2) */
    const T lsum = (T)log(sum);
    for (int64_t j = 0; j < n; j++) yr[j] = (xr[j] - mx) - lsum;
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

/* Layer norm, or with centred false RMS norm (mu = 0: x scaled by
** 1/sqrt(mean(x^2) + eps), Zhang and Sennrich 2019), which is the same
** computation without the mean.
**
** The rows go LN_R at a time through the statistics: each row's sums are
** those of cpu_sum and cpu_sqdev (cpu_vmath.h: CPU_LANES double lanes,
** added up lane 0 first, then the tail), so the bits are a single row's,
** but the rows' chains of adds, the lanes' sum, the division and the
** square root overlap instead of waiting on each other (one row at a time,
** a [4096, 128] forward spent most of its time on that latency: 0.15 ->
** 0.11 ms on a Zen 4 core, RMS norm 0.094 -> 0.071). ln_rows is inlined
** with NR a constant: LN_R for rows up to LN_SHORT, else 1, and 1 for a
** block's last rows. tests/c/test_backend_cpu_rows.c checks the bits
** against the order written out plainly, across these boundaries. */
enum { FN(LN_R) = 8, FN(LN_RB) = 4, FN(LN_BLOCK) = 32, FN(LN_SHORT) = 256 };

/* the row kernels, at both vector widths */
#define LN_V 8
#define VN(name) CPU_CAT(CPU_CAT(name, v8), SUF)
#define LN_ATTR LN_WIDE_ATTR
#define LN_INNER_ATTR LN_WIDE_ATTR /* inlined into LN_ATTR's functions only */
#include "cpu_norm_rows_tmpl.h"
#undef LN_V
#undef VN
#undef LN_ATTR
#undef LN_INNER_ATTR
#define LN_V 4
#define VN(name) CPU_CAT(CPU_CAT(name, v4), SUF)
#define LN_ATTR CPU_VECTOR_CLONES
#define LN_INNER_ATTR
#include "cpu_norm_rows_tmpl.h"
#undef LN_V
#undef VN
#undef LN_ATTR
#undef LN_INNER_ATTR

static void FN(layer_norm)(T *y, T *mean, T *rstd, const T *x, const T *w, const T *b,
                           int64_t rows, int64_t n, double eps, bool centred) {
  const int64_t nblk = (rows + FN(LN_BLOCK) - 1) / FN(LN_BLOCK);
  const bool wide = ln_wide();
  CPU_FOR(rows * n > CPU_PAR_MIN, blk, nblk,
    const int64_t r0 = blk * FN(LN_BLOCK);
    const int64_t r1 = rows - r0 < FN(LN_BLOCK) ? rows : r0 + FN(LN_BLOCK);
    if (wide) FN(layer_norm_block_v8)(y, mean, rstd, x, w, b, r0, r1, n, eps, centred);
    else FN(layer_norm_block_v4)(y, mean, rstd, x, w, b, r0, r1, n, eps, centred););
}

/* dw = sum over rows of dy * xhat, db = sum over rows of dy: the running
** sums aw, ab (doubles) of the columns [j0, j0 + nb) carried on over the
** rows [r0, r1), in a pass of their own (on a team, or past LN_FUSE_MAX
** columns; a team of one carries them along with dx, ln_dx_rows). Each
** column is summed over the rows in order, so neither the block width nor
** where the row ranges split changes the bits. mean is NULL for RMS norm
** (mu = 0). A whole block keeps its sums in registers (a
** constant trip count); with a variable one they went through memory on
** every row, and the pass took 60% of a [4096, 128] layer norm's backward.
** Vector clones: called from a CPU_FOR body, which is built for the
** baseline (cpu_internal.h). */
enum { FN(LN_CB) = 32, FN(LN_FUSE_MAX) = 1024 };
#define LN_DWDB_ROWS(NB, MU)                                                  \
  for (int64_t r = r0; r < r1; r++) {                                         \
    const T *xr = x + r * n + j0, *dyr = dy + r * n + j0;                     \
    const T mu = (MU), rs = rstd[r];                                          \
    _Pragma("GCC unroll 32")                                                  \
    for (int64_t j = 0; j < (NB); j++) {                                      \
      aw[j] += (double)(dyr[j] * ((xr[j] - mu) * rs));                        \
      ab[j] += (double)dyr[j];                                                \
    }                                                                         \
  }
CPU_VECTOR_CLONES_512 static void FN(layer_norm_dwdb_block)(double *restrict aw_io,
                                                          double *restrict ab_io,
                                                          const T *restrict dy, const T *restrict x,
                                                          const T *restrict mean,
                                                          const T *restrict rstd, int64_t r0,
                                                          int64_t r1, int64_t n, int64_t j0,
                                                          int64_t nb) {
  double aw[FN(LN_CB)], ab[FN(LN_CB)];
  for (int64_t j = 0; j < nb; j++) aw[j] = aw_io[j], ab[j] = ab_io[j];
  if (nb == FN(LN_CB) && mean) LN_DWDB_ROWS(FN(LN_CB), mean[r])
  else if (nb == FN(LN_CB)) LN_DWDB_ROWS(FN(LN_CB), (T)0)
  else LN_DWDB_ROWS(nb, mean ? mean[r] : (T)0)
  for (int64_t j = 0; j < nb; j++) aw_io[j] = aw[j], ab_io[j] = ab[j];
}
#undef LN_DWDB_ROWS

/* mean NULL: RMS norm's backward. dx goes by blocks of rows; on a team of
** one (the CPUs busy, one thread, or a small tensor) the blocks run in
** order, so the dx pass also carries dw and db on over its rows, reading
** dy and x once (a second pass read them again from L3: a [4096, 512]
** backward 0.84 -> 0.65 ms on a Zen 4 core; a pass of its own per block,
** from L2, then cost a fifth of a [4096, 128] one: 0.162 -> 0.134 ms
** without it). On a team, or past LN_FUSE_MAX columns (the sums live on
** the stack), dw and db go by column blocks afterwards, each over all the
** rows: the same order either way. */
static void FN(layer_norm_backward)(T *dx, T *dw, T *db, const T *dy, const T *x, const T *mean,
                                    const T *rstd, const T *w, int64_t rows, int64_t n) {
  const bool par = rows * n > CPU_PAR_MIN, sums = dw || db;
  const bool can_fuse = sums && n <= FN(LN_FUSE_MAX), wide = ln_wide();
  double aw[FN(LN_FUSE_MAX)], ab[FN(LN_FUSE_MAX)];
  if (can_fuse)
    for (int64_t j = 0; j < n; j++) aw[j] = 0, ab[j] = 0;
  int fused = 0; /* written by the only thread, when there is one */
  const int64_t nrb = (rows + FN(LN_BLOCK) - 1) / FN(LN_BLOCK);
  CPU_FOR(par, rb, nrb,
    const int64_t r0 = rb * FN(LN_BLOCK);
    const int64_t r1 = rows - r0 < FN(LN_BLOCK) ? rows : r0 + FN(LN_BLOCK);
    const bool fuse = can_fuse && omp_get_num_threads() == 1;
    if (fuse) fused = 1;
    double *cw = fuse ? aw : NULL, *cb = fuse && db ? ab : NULL;
    if (wide) FN(layer_norm_dx_block_v8)(dx, dy, x, mean, rstd, w, r0, r1, n, cw, cb);
    else FN(layer_norm_dx_block_v4)(dx, dy, x, mean, rstd, w, r0, r1, n, cw, cb););
  if (!sums) return;
  if (fused || rows == 0) {
    for (int64_t j = 0; j < n; j++) {
      if (dw) dw[j] = (T)aw[j];
      if (db) db[j] = (T)ab[j];
    }
    return;
  }
  const int64_t nblk = (n + FN(LN_CB) - 1) / FN(LN_CB);
  CPU_FOR(par, blk, nblk,
    const int64_t j0 = blk * FN(LN_CB), nb = n - j0 < FN(LN_CB) ? n - j0 : FN(LN_CB);
    double bw[FN(LN_CB)] = {0}, bb[FN(LN_CB)] = {0};
    FN(layer_norm_dwdb_block)(bw, bb, dy, x, mean, rstd, 0, rows, n, j0, nb);
    for (int64_t j = 0; j < nb; j++) {
      if (dw) dw[j0 + j] = (T)bw[j];
      if (db) db[j0 + j] = (T)bb[j];
    });
}

#undef FN
