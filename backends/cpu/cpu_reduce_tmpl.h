/*
** cpu_reduce_tmpl.h -- reductions for one dtype; included by cpu_reduce.c
** once per dtype with these macros set:
**   T         element type            ACC  accumulator type of sums
**   SUF       name suffix             IS_FLOAT  1 for float types
** Sums of float32 accumulate in double. int64 sums wrap (through uint64).
*/

#define FN(name) CPU_CAT(name, SUF)
#define CHUNK 16384 /* elements per parallel piece of one long row */

/* Sum of x[0..n), n <= 2048, in sixteen running sums added in a fixed
** order: the loop vectorises, with the same bits in every clone (four
** scalar chains ran at a fifth of memory speed). */
CPU_VECTOR_CLONES_512 static ACC FN(sum_block)(const T *restrict x, int64_t n) {
  ACC s[16] = {0};
  int64_t j = 0;
  for (; j + 16 <= n; j += 16)
    for (int y = 0; y < 16; y++) s[y] += (ACC)x[j + y];
  for (; j < n; j++) s[0] += (ACC)x[j];
  for (int w = 8; w >= 1; w /= 2)
    for (int y = 0; y < w; y++) s[y] += s[y + w];
  return s[0];
}

/* Sum of x[0..n), pairwise above a block size for accuracy on long rows. */
static ACC FN(sum_range)(const T *x, int64_t n) {
  if (n > 2048) {
    int64_t h = n / 2;
    return FN(sum_range)(x, h) + FN(sum_range)(x + h, n - h);
  }
  return FN(sum_block)(x, n);
}

#if IS_FLOAT
/* Sum of squared deviations from `mean` over x[0..n), n <= 2048, in eight
** running sums (as sum_block). */
CPU_VECTOR_CLONES_512 static double FN(sqdev_block)(const T *restrict x, int64_t n, double mean) {
  double s[8] = {0};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int y = 0; y < 8; y++) {
      const double d = (double)x[j + y] - mean;
      s[y] += d * d;
    }
  for (; j < n; j++) {
    const double d = (double)x[j] - mean;
    s[0] += d * d;
  }
  for (int w = 4; w >= 1; w /= 2)
    for (int y = 0; y < w; y++) s[y] += s[y + w];
  return s[0];
}

/* Sum of squared deviations from `mean` (the second pass of var). */
static double FN(sqdev_range)(const T *x, int64_t n, double mean) {
  if (n > 2048) {
    int64_t h = n / 2;
    return FN(sqdev_range)(x, h, mean) + FN(sqdev_range)(x + h, n - h, mean);
  }
  return FN(sqdev_block)(x, n, mean);
}
#endif

/* Is v a better extreme than the current best? The first NaN wins, as in
** torch.max; ties keep the earlier position. */
#if IS_FLOAT
#define BETTER(v, best, is_max) \
  ((best) == (best) && ((v) != (v) || ((is_max) ? (v) > (best) : (v) < (best))))
#else
#define BETTER(v, best, is_max) ((is_max) ? (v) > (best) : (v) < (best))
#endif

/* Extreme of x[0..n) (n >= 1) and its position. */
static void FN(ext_range)(const T *x, int64_t n, int is_max, T *best, int64_t *at) {
  T b = x[0];
  int64_t bi = 0;
  for (int64_t j = 1; j < n; j++)
    if (BETTER(x[j], b, is_max)) {
      b = x[j];
      bi = j;
    }
  *best = b;
  *at = bi;
}

/* Writes the result of one row x[0..n) (the inner == 1 layout). */
static void FN(reduce_row)(em_reduce_op op, const T *x, int64_t n, int correction, T *out,
                           int64_t *idx) {
  (void)correction;
  switch (op) {
    case EM_RED_SUM: *out = (T)FN(sum_range)(x, n); break;
#if IS_FLOAT
    case EM_RED_MEAN: *out = (T)((double)FN(sum_range)(x, n) / (double)n); break;
    case EM_RED_VAR: {
      double mean = (double)FN(sum_range)(x, n) / (double)n;
      double m2 = FN(sqdev_range)(x, n, mean);
      *out = (T)(m2 / (double)(n - correction > 0 ? n - correction : 0));
      break;
    }
#endif
    case EM_RED_MAX: case EM_RED_MIN: {
      T b;
      int64_t bi;
      FN(ext_range)(x, n, op == EM_RED_MAX, &b, &bi);
      *out = b;
      if (idx) *idx = bi;
      break;
    }
    default: break;
  }
}

/* One long row split into fixed-size chunks reduced in parallel; partial
** results combine in chunk order, so the answer does not depend on the
** number of threads. */
static em_status FN(reduce_row_parallel)(em_reduce_op op, const T *x, int64_t n,
                                         int correction, T *out, int64_t *idx) {
  (void)correction;
  int64_t nch = (n + CHUNK - 1) / CHUNK;
  ACC *part = malloc((size_t)nch * sizeof(ACC));
  T *pbest = malloc((size_t)nch * sizeof(T));
  int64_t *pidx = malloc((size_t)nch * sizeof(int64_t));
  if (!part || !pbest || !pidx) {
    free(part);
    free(pbest);
    free(pidx);
    return em_error(EM_ERR_OOM, "cpu reduce: out of memory for %lld partial results",
                    (long long)nch);
  }
  if (op == EM_RED_MAX || op == EM_RED_MIN) {
    int is_max = op == EM_RED_MAX;
    CPU_FOR(true, c, nch, {
      int64_t j0 = c * CHUNK, len = n - j0 < CHUNK ? n - j0 : CHUNK;
      FN(ext_range)(x + j0, len, is_max, &pbest[c], &pidx[c]);
      pidx[c] += j0;
    });
    T b = pbest[0];
    int64_t bi = pidx[0];
    for (int64_t c = 1; c < nch; c++)
      if (BETTER(pbest[c], b, is_max)) {
        b = pbest[c];
        bi = pidx[c];
      }
    *out = b;
    if (idx) *idx = bi;
  } else {
    CPU_FOR(true, c, nch, {
      int64_t j0 = c * CHUNK, len = n - j0 < CHUNK ? n - j0 : CHUNK;
      part[c] = FN(sum_range)(x + j0, len);
    });
    ACC total = 0;
    for (int64_t c = 0; c < nch; c++) total += part[c];
    if (op == EM_RED_SUM) {
      *out = (T)total;
    }
#if IS_FLOAT
    else {
      double mean = (double)total / (double)n;
      if (op == EM_RED_MEAN) {
        *out = (T)mean;
      } else {
        CPU_FOR(true, c, nch, {
          int64_t j0 = c * CHUNK, len = n - j0 < CHUNK ? n - j0 : CHUNK;
          part[c] = FN(sqdev_range)(x + j0, len, mean);
        });
        double m2 = 0;
        for (int64_t c = 0; c < nch; c++) m2 += part[c];
        *out = (T)(m2 / (double)(n - correction > 0 ? n - correction : 0));
      }
    }
#endif
  }
  free(part);
  free(pbest);
  free(pidx);
  return EM_OK;
}

/* The [outer, n, inner > 1] layout: for each outer slice, a block of up to
** IB adjacent columns is reduced together, reading contiguous pieces. */
#define IB 64

/* acc[0..nb) = the column sums of n rows of stride inner (a bias's
** gradient): cloned, so the widening adds run as wide vectors; the same
** adds in the same order in every clone. */
CPU_VECTOR_CLONES_512 static void FN(colsum_block)(const T *restrict x, int64_t n, int64_t inner,
                                                   int64_t nb, ACC *restrict acc) {
  if (nb == CPU_COLSUM_W) { /* a whole block: the sums stay in registers */
    ACC a[CPU_COLSUM_W] = {0};
    for (int64_t j = 0; j < n; j++) {
      const T *row = x + j * inner;
      for (int i = 0; i < CPU_COLSUM_W; i++) a[i] += (ACC)row[i];
    }
    for (int i = 0; i < CPU_COLSUM_W; i++) acc[i] = a[i];
    return;
  }
  for (int64_t i = 0; i < nb; i++) acc[i] = 0;
  for (int64_t j = 0; j < n; j++) {
    const T *row = x + j * inner;
    for (int64_t i = 0; i < nb; i++) acc[i] += (ACC)row[i];
  }
}

static void FN(reduce_block)(em_reduce_op op, const T *x, int64_t n, int64_t inner, int64_t nb,
                             int correction, T *out, int64_t *idx) {
  if (op == EM_RED_MAX || op == EM_RED_MIN) {
    int is_max = op == EM_RED_MAX;
    T best[IB];
    int64_t at[IB];
    for (int64_t i = 0; i < nb; i++) {
      best[i] = x[i];
      at[i] = 0;
    }
    for (int64_t j = 1; j < n; j++) {
      const T *row = x + j * inner;
      for (int64_t i = 0; i < nb; i++)
        if (BETTER(row[i], best[i], is_max)) {
          best[i] = row[i];
          at[i] = j;
        }
    }
    for (int64_t i = 0; i < nb; i++) {
      out[i] = best[i];
      if (idx) idx[i] = at[i];
    }
    return;
  }
  ACC acc[IB];
  for (int64_t i0 = 0; i0 < nb; i0 += CPU_COLSUM_W)
    FN(colsum_block)(x + i0, n, inner, nb - i0 < CPU_COLSUM_W ? nb - i0 : CPU_COLSUM_W, acc + i0);
  if (op == EM_RED_SUM) {
    for (int64_t i = 0; i < nb; i++) out[i] = (T)acc[i];
    return;
  }
#if IS_FLOAT
  double mean[IB];
  for (int64_t i = 0; i < nb; i++) mean[i] = (double)acc[i] / (double)n;
  if (op == EM_RED_MEAN) {
    for (int64_t i = 0; i < nb; i++) out[i] = (T)mean[i];
    return;
  }
  double m2[IB];
  for (int64_t i = 0; i < nb; i++) m2[i] = 0;
  for (int64_t j = 0; j < n; j++) {
    const T *row = x + j * inner;
    for (int64_t i = 0; i < nb; i++) {
      double d = (double)row[i] - mean[i];
      m2[i] += d * d;
    }
  }
  double div = (double)(n - correction > 0 ? n - correction : 0);
  for (int64_t i = 0; i < nb; i++) out[i] = (T)(m2[i] / div);
#else
  (void)correction;
#endif
}

static em_status FN(reduce)(em_reduce_op op, T *out, int64_t *idx, const T *in, int64_t outer,
                            int64_t n, int64_t inner, int correction) {
  int64_t total = outer * n * inner;
  if (inner == 1) {
    /* few long rows: split each row instead of spreading the rows */
    if (total > CPU_PAR_MIN && n >= 2 * CHUNK && outer < 2 * (int64_t)omp_get_max_threads()) {
      for (int64_t o = 0; o < outer; o++) {
        em_status s = FN(reduce_row_parallel)(op, in + o * n, n, correction, out + o,
                                              idx ? idx + o : NULL);
        if (s) return s;
      }
      return EM_OK;
    }
    CPU_FOR(total > CPU_PAR_MIN && outer > 1, o, outer,
            FN(reduce_row)(op, in + o * n, n, correction, out + o, idx ? idx + o : NULL););
    return EM_OK;
  }
  int64_t nblk = (inner + IB - 1) / IB;
  CPU_FOR(total > CPU_PAR_MIN && outer * nblk > 1, t, outer * nblk,
    int64_t o = t / nblk, i0 = (t % nblk) * IB;
    int64_t nb = inner - i0 < IB ? inner - i0 : IB;
    FN(reduce_block)(op, in + o * n * inner + i0, n, inner, nb, correction,
                     out + o * inner + i0, idx ? idx + o * inner + i0 : NULL););
  return EM_OK;
}
#undef IB
#undef CHUNK
#undef BETTER
#undef FN
