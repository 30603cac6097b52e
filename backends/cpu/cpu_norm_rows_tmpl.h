/*
** cpu_norm_rows_tmpl.h -- layer norm's and RMS norm's row kernels (the
** forward, and the backward's dx) for one float type T and one vector
** width: included by cpu_softmax_norm_tmpl.h with LN_V doubles a vector
** (8 for the AVX-512 build, 4 for AVX2 and the baseline: GCC lowers an
** 8-double vector to AVX2 badly, a [4096, 512] forward 0.6 -> 2.8 ms, and
** a 4-double one on AVX-512 lost a third of the gain), LN_ATTR the
** functions' target, LN_INNER_ATTR that of the inlined helpers (the
** AVX-512 build's, where they use its intrinsics; none for the clones) and
** VN(name) their names. The bits do not depend on the width: each lane
** adds the same elements in the same order.
*/

/* CPU_LANES (16) lanes as LN_NV vectors of LN_V doubles, written with
** GCC's vector extensions: left to itself GCC vectorised the plain loops
** across the rows (shuffles everywhere). Lane k of vector q is lane
** q * LN_V + k of cpu_sum: the same operations per lane. */
#define LN_NV (CPU_LANES / LN_V)
typedef double VN(vd) __attribute__((vector_size(LN_V * 8)));
typedef T VN(vt) __attribute__((vector_size(LN_V * sizeof(T))));

/* V[k] = (double)(E) for k < LN_V, element by element: GCC 12 makes one
** vcvtps2pd of that, where __builtin_convertvector gave two halves and a
** spill (and a function returning a vector changes the ABI between the
** clones, -Wpsabi) */
#define LN_WIDEN(V, k_, E)                                                   \
  for (int k_ = 0; k_ < LN_V; k_++) (V)[k_] = (double)(E)

/* ACC += A * B on vectors of doubles that hold widened floats: their
** product is exact in double (24 + 24 bits of 53), so one fused multiply-add
** rounds as the multiply and the add do (one rounding, of the add). The
** AVX-512 build of float32 rows takes the FMA (the separate multiply was a
** fifth of the backward's sums); every other build, and float64 rows,
** whose products round, multiply and add. */
#if LN_V == 8 && LN_EXACT_PRODUCTS && CPU_BF16_AVX512
#define LN_MADD(ACC, A, B) ((ACC) = _mm512_fmadd_pd((A), (B), (ACC)))
#else
#define LN_MADD(ACC, A, B) ((ACC) += (A) * (B))
#endif

/* s[r] = cpu_sum of row r (mu NULL) or cpu_sqdev of row r about mu[r];
** about 0 where centred is false (RMS norm: x^2 exactly, LN_MADD) */
CPU_VMATH_INLINE LN_INNER_ATTR void VN(ln_sum_rows)(double *s, const T *x, int64_t n, int NR,
                                                    const double *mu, bool centred) {
  VN(vd) acc[FN(LN_R)][LN_NV];
  for (int r = 0; r < NR; r++)
    for (int q = 0; q < LN_NV; q++) acc[r][q] = (VN(vd)){0};
  int64_t j = 0;
  for (; j + CPU_LANES <= n; j += CPU_LANES)
    _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++)
      _Pragma("GCC unroll 4") for (int q = 0; q < LN_NV; q++) {
        const T *xr = x + r * n + j + q * LN_V;
        VN(vd) a;
        LN_WIDEN(a, k, xr[k]);
        if (mu && !centred) {
          LN_MADD(acc[r][q], a, a);
        } else if (mu) {
          a -= mu[r];
          acc[r][q] += a * a;
        } else {
          acc[r][q] += a;
        }
      }
  for (int r = 0; r < NR; r++) s[r] = 0;
  for (int q = 0; q < LN_NV; q++)
    for (int k = 0; k < LN_V; k++)
      for (int r = 0; r < NR; r++) s[r] += acc[r][q][k];
  for (int r = 0; r < NR; r++)
    for (int64_t i = j; i < n; i++) {
      const double v = (double)x[r * n + i];
      s[r] += mu ? (v - mu[r]) * (v - mu[r]) : v;
    }
}

CPU_VMATH_INLINE LN_INNER_ATTR void VN(ln_rows)(T *yr, T *mean, T *rstd, const T *xr,
                                                const T *w, const T *b, int64_t n, int NR,
                                                double eps, bool centred) {
  double mu[FN(LN_R)], s[FN(LN_R)], rs[FN(LN_R)];
  if (centred) {
    VN(ln_sum_rows)(s, xr, n, NR, NULL, true);
    for (int r = 0; r < NR; r++) mu[r] = s[r] / (double)n;
  } else {
    for (int r = 0; r < NR; r++) mu[r] = 0.0;
  }
  /* two passes: the variance never goes negative */
  VN(ln_sum_rows)(s, xr, n, NR, mu, centred);
  for (int r = 0; r < NR; r++) rs[r] = 1.0 / sqrt(s[r] / (double)n + eps);
  for (int r = 0; r < NR; r++) {
    if (mean) mean[r] = (T)mu[r];
    if (rstd) rstd[r] = (T)rs[r];
    const T tmu = (T)mu[r], trs = (T)rs[r];
    const T *x1 = xr + r * n;
    T *y1 = yr + r * n;
    if (w && b)
      for (int64_t j = 0; j < n; j++) y1[j] = (x1[j] - tmu) * trs * w[j] + b[j];
    else if (w)
      for (int64_t j = 0; j < n; j++) y1[j] = (x1[j] - tmu) * trs * w[j];
    else if (b)
      for (int64_t j = 0; j < n; j++) y1[j] = (x1[j] - tmu) * trs + b[j];
    else
      for (int64_t j = 0; j < n; j++) y1[j] = (x1[j] - tmu) * trs;
  }
}

/* rows [r0, r1) */
LN_ATTR static void VN(layer_norm_block)(T *y, T *mean, T *rstd, const T *x,
                                                     const T *w, const T *b, int64_t r0,
                                                     int64_t r1, int64_t n, double eps,
                                                     bool centred) {
  int64_t r = r0;
  /* long rows have latency enough to hide in their own chains: LN_R of
  ** them at a time lost at n = 512 (0.42 -> 0.46 ms a [4096, 512]) */
  if (n <= FN(LN_SHORT))
    for (; r + FN(LN_R) <= r1; r += FN(LN_R))
      VN(ln_rows)(y + r * n, mean ? mean + r : NULL, rstd ? rstd + r : NULL, x + r * n, w, b, n,
                  FN(LN_R), eps, centred);
  for (; r < r1; r++)
    VN(ln_rows)(y + r * n, mean ? mean + r : NULL, rstd ? rstd + r : NULL, x + r * n, w, b, n, 1,
                eps, centred);
}

/* With xhat = (x - mean) * rstd and g = dy * w:
**   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
** and for RMS norm (centred false, mu = 0) the same without mean(g).
** NR rows at once (LN_RB, or 1), as the forward: both sums in the lanes of
** cpu_sum, one order on every clone.
** aw non-NULL (a team of one, cpu_softmax_norm_tmpl.h): the running
** column sums of dw = sum of dy * xhat (aw) and db = sum of dy (ab, or
** NULL: RMS norm has no bias), carried on over these rows in order, in the
** same pass that reads dy and x for the row sums (a second pass over each
** block of rows, from L2, was a fifth of a [4096, 128] backward). Each
** column still adds its rows in order. */
CPU_VMATH_INLINE LN_INNER_ATTR void VN(ln_dx_rows)(T *dxr, const T *dyr, const T *xr,
                                                   const T *mean, const T *rstd, const T *w,
                                                   int64_t n, int NR, double *restrict aw,
                                                   double *restrict ab) {
  VN(vd) asg[FN(LN_RB)][LN_NV], asgx[FN(LN_RB)][LN_NV];
  T mu[FN(LN_RB)], rs[FN(LN_RB)];
  for (int r = 0; r < NR; r++) {
    mu[r] = mean ? mean[r] : (T)0;
    rs[r] = rstd[r];
    for (int h = 0; h < LN_NV; h++) asg[r][h] = asgx[r][h] = (VN(vd)){0};
  }
  int64_t j = 0;
  /* unswitched on w, on the column sums (SUMS 1: dw's, 2: dw's and db's)
  ** and on centring (RMS norm has no use for the sum of g: 0.123 -> 0.112
  ** ms a [4096, 128] backward), and unrolled, so that the sums stay in
  ** registers; the float products on vectors of T, then widened (GCC's SLP
  ** made a gather of scalar products out of the element-wise form) */
#define LN_DX_LANES(WEIGHT, SUMS, CENTRED)                                    \
  for (; j + CPU_LANES <= n; j += CPU_LANES)                                  \
    _Pragma("GCC unroll 4") for (int h = 0; h < LN_NV; h++) {                 \
      VN(vt) wv;                                                             \
      VN(vd) cw, cb;                                                         \
      if (WEIGHT) memcpy(&wv, w + j + LN_V * h, sizeof wv);                   \
      if (SUMS) {                                                             \
        memcpy(&cw, aw + j + LN_V * h, sizeof cw);                            \
        if (SUMS == 2) memcpy(&cb, ab + j + LN_V * h, sizeof cb);             \
      }                                                                       \
      _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++) {                  \
        const int64_t o = r * n + j + LN_V * h;                               \
        VN(vt) d, g, xh;                                                     \
        memcpy(&d, dyr + o, sizeof d);                                        \
        memcpy(&xh, xr + o, sizeof xh);                                       \
        g = d;                                                                \
        if (WEIGHT) g *= wv;                                                  \
        xh = (xh - mu[r]) * rs[r];                                            \
        VN(vd) gd, xd;                                                       \
        LN_WIDEN(gd, k, g[k]);                                               \
        LN_WIDEN(xd, k, xh[k]);                                              \
        if (CENTRED) asg[r][h] += gd;                                         \
        LN_MADD(asgx[r][h], gd, xd);                                          \
        if (SUMS) {                                                           \
          const VN(vt) p = d * xh;                                           \
          VN(vd) pd, dd;                                                     \
          LN_WIDEN(pd, k, p[k]);                                             \
          cw += pd;                                                           \
          if (SUMS == 2) {                                                    \
            LN_WIDEN(dd, k, d[k]);                                           \
            cb += dd;                                                         \
          }                                                                   \
        }                                                                     \
      }                                                                       \
      if (SUMS) {                                                             \
        memcpy(aw + j + LN_V * h, &cw, sizeof cw);                            \
        if (SUMS == 2) memcpy(ab + j + LN_V * h, &cb, sizeof cb);             \
      }                                                                       \
    }
#define LN_DX_SUMS(WEIGHT, CENTRED)                                           \
  if (aw && ab)                                                               \
    LN_DX_LANES(WEIGHT, 2, CENTRED)                                           \
  else if (aw)                                                                \
    LN_DX_LANES(WEIGHT, 1, CENTRED)                                           \
  else                                                                        \
    LN_DX_LANES(WEIGHT, 0, CENTRED)
  if (w && mean)
    LN_DX_SUMS(1, 1)
  else if (w)
    LN_DX_SUMS(1, 0)
  else if (mean)
    LN_DX_SUMS(0, 1)
  else
    LN_DX_SUMS(0, 0)
#undef LN_DX_LANES
#undef LN_DX_SUMS
  double sg[FN(LN_RB)], sgx[FN(LN_RB)];
  for (int r = 0; r < NR; r++) sg[r] = 0, sgx[r] = 0;
  for (int h = 0; h < LN_NV; h++)
    for (int k = 0; k < LN_V; k++)
      for (int r = 0; r < NR; r++) sg[r] += asg[r][h][k], sgx[r] += asgx[r][h][k];
  for (int r = 0; r < NR; r++)
    for (int64_t i = j; i < n; i++) {
      const T d = dyr[r * n + i], g = w ? d * w[i] : d;
      const T xh = (xr[r * n + i] - mu[r]) * rs[r];
      sg[r] += (double)g;
      sgx[r] += (double)g * (double)xh;
      if (aw) aw[i] += (double)(d * xh);
      if (aw && ab) ab[i] += (double)d;
    }
  for (int r = 0; r < NR; r++) {
    const T a = mean ? (T)(sg[r] / (double)n) : (T)0, c = (T)(sgx[r] / (double)n);
    const T m = mu[r], s = rs[r];
    const T *x1 = xr + r * n, *dy1 = dyr + r * n;
    T *dx1 = dxr + r * n;
    for (int64_t i = 0; i < n; i++) {
      T g = w ? dy1[i] * w[i] : dy1[i];
      dx1[i] = s * (g - a - (x1[i] - m) * s * c);
    }
  }
}

/* rows [r0, r1); mean NULL: RMS norm; aw NULL, or dw's (and ab db's, or
** NULL) running column sums (ln_dx_rows) */
LN_ATTR static void VN(layer_norm_dx_block)(T *dx, const T *dy, const T *x,
                                                        const T *mean, const T *rstd, const T *w,
                                                        int64_t r0, int64_t r1, int64_t n,
                                                        double *aw, double *ab) {
  int64_t r = r0;
  for (; n <= FN(LN_SHORT) && r + FN(LN_RB) <= r1; r += FN(LN_RB))
    VN(ln_dx_rows)(dx + r * n, dy + r * n, x + r * n, mean ? mean + r : NULL, rstd + r, w, n,
                   FN(LN_RB), aw, ab);
  for (; r < r1; r++)
    VN(ln_dx_rows)(dx + r * n, dy + r * n, x + r * n, mean ? mean + r : NULL, rstd + r, w, n, 1,
                   aw, ab);
}

#undef LN_NV
#undef LN_WIDEN
#undef LN_MADD
