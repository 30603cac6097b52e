/*
** test_backend_cpu_rows.c -- reductions, softmax and layer norm, indexing
** and cross entropy: the kernels that work along rows.
** Checks the CPU backend plugin's kernels against straightforward
** reference loops (in double), and their error paths; backend_cpu.h has
** the harness.
*/
#include "backend_cpu.h"

/* ---- reductions ---- */

static void reduce_case(em_reduce_op op, em_dtype dt, int64_t outer, int64_t n, int64_t inner,
                        int corr) {
  static const char *names[] = {"sum", "mean", "max", "min", "var"};
  int64_t total = outer * n * inner;
  double *xd = xmalloc(total * 8), *want = xmalloc(outer * inner * 8),
         *wi = xmalloc(outer * inner * 8);
  void *x = rand_arr(dt, total, dt == EM_I64 ? -1000 : -2, dt == EM_I64 ? 1000 : 2, xd);
  void *out = xmalloc(outer * inner * 8);
  int64_t *idx = xmalloc(outer * inner * 8);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      double s = 0, best = xd[o * n * inner + i];
      int64_t bi = 0;
      for (int64_t j = 0; j < n; j++) {
        double v = xd[(o * n + j) * inner + i];
        s += v;
        if ((op == EM_RED_MAX && v > best) || (op == EM_RED_MIN && v < best)) best = v, bi = j;
      }
      double r = s;
      if (op == EM_RED_MEAN) r = s / n;
      if (op == EM_RED_MAX || op == EM_RED_MIN) r = best;
      if (op == EM_RED_VAR) {
        double m2 = 0, mu = s / n;
        for (int64_t j = 0; j < n; j++) m2 += pow(xd[(o * n + j) * inner + i] - mu, 2);
        r = m2 / (n - corr);
      }
      want[o * inner + i] = r;
      wi[o * inner + i] = (double)bi;
    }
  bool ext = op == EM_RED_MAX || op == EM_RED_MIN;
  em_status s = be->reduce(0, op, dt, out, ext ? idx : NULL, x, outer, n, inner, corr);
  double tol = dt == EM_F32 ? 2e-6 : 1e-12;
  int ok = s == EM_OK && close_to(names[op], out, dt, want, outer * inner, tol, tol);
  if (ok && ext) ok = close_to("argmax", idx, EM_I64, wi, outer * inner, 0, 0);
  check(ok, "reduce %s %s [%lld, %lld, %lld]%s", names[op], dtn(dt), (long long)outer, (long long)n,
        (long long)inner, op == EM_RED_VAR ? (corr ? " correction 1" : " correction 0") : "");
  free(xd);
  free(want);
  free(wi);
  free(x);
  free(out);
  free(idx);
}

static void test_reduce(void) {
  const int64_t shapes[][3] = {{3, 7, 1}, {2, 9, 70}, {1, 100000, 1}, {4, 50, 300}, {5, 1, 3}};
  for (int op = EM_RED_SUM; op <= EM_RED_VAR; op++)
    for (int s = 0; s < 5; s++) {
      reduce_case(op, EM_F32, shapes[s][0], shapes[s][1], shapes[s][2], 1);
      if (s < 3)
        reduce_case(op, EM_F64, shapes[s][0], shapes[s][1], shapes[s][2], op == EM_RED_VAR ? 0 : 1);
      if (s < 3 && (op == EM_RED_SUM || op == EM_RED_MAX || op == EM_RED_MIN))
        reduce_case(op, EM_I64, shapes[s][0], shapes[s][1], shapes[s][2], 0);
    }
  double x[5] = {1, NAN, 3, NAN, 0}, v;
  int64_t i;
  check(be->reduce(0, EM_RED_MAX, EM_F64, &v, &i, x, 1, 5, 1, 0) == EM_OK && isnan(v) && i == 1,
        "max returns the first NaN and its position");
  check(be->reduce(0, EM_RED_MAX, EM_F64, &v, &i, x, 1, 0, 1, 0) == EM_ERR_SHAPE,
        "max over an empty dim is an error");
  check(be->reduce(0, EM_RED_MEAN, EM_I64, &v, NULL, x, 1, 5, 1, 0) == EM_ERR_DTYPE &&
            msg_has("mean", "int64"),
        "mean of int64 names kernel and dtype: %s", em_error_message());
  /* the chunked parallel sum does not depend on the thread count */
  int64_t n = 300000;
  double *big = rand_arr(EM_F64, n, -1, 1, NULL), s1, s2;
  be->set_num_threads(1);
  be->reduce(0, EM_RED_SUM, EM_F64, &s1, NULL, big, 1, n, 1, 0);
  be->set_num_threads(2);
  be->reduce(0, EM_RED_SUM, EM_F64, &s2, NULL, big, 1, n, 1, 0);
  check(s1 == s2, "sum of 300000 is the same with 1 and 2 threads");
  free(big);
  /* bfloat16 sums and means over a middle dim (read in place, widened in
  ** registers) equal the float32 kernel on the widened copy, rounded once:
  ** whole blocks of 32 columns and a ragged one, one and several slices;
  ** the AVX-512 path's groups of 128, 64 and 32 columns and a scalar tail
  ** ({1, 40, 300}: 128 + 128 + 32 + 12), with NaN, inf and inf - inf in
  ** some columns and sums that only the rows' order gives (in double,
  ** a bfloat16 column sums exactly unless its magnitudes are far apart);
  ** EMBER_CPU_BF16=avx512/plain runs the other paths */
  const int64_t bshapes[][3] = {{1, 300, 70}, {3, 17, 32}, {2, 5, 200}, {1, 40, 300}, {2, 33, 128}, {1, 9, 512}};
  for (int op = EM_RED_SUM; op <= EM_RED_MEAN; op++)
    for (int s = 0; s < 6; s++) {
      const int64_t o = bshapes[s][0], n2 = bshapes[s][1], in = bshapes[s][2];
      double *xd = xmalloc(o * n2 * in * 8);
      uint16_t *xb = rand_bf16(o * n2 * in, xd), *yb = xmalloc(o * in * 2);
      float *xf = xmalloc(o * n2 * in * 4), *yf = xmalloc(o * in * 4);
      for (int64_t k = 0; k < o * n2 * in; k++) xf[k] = em_bf16_to_f32(xb[k]) * 100; /* away from 0 */
      if (s == 3) { /* NaN (a payload), inf, inf - inf; and 1e30 + 1 - 1e30, 0 in this order only */
        xf[5 * in + 7] = NAN, xf[9 * in + 200] = INFINITY;
        xf[10 * in + 201] = -INFINITY, xf[11 * in + 201] = INFINITY;
        for (int64_t c = 100; c < 300; c += 50) xf[c] = 1e30f, xf[in + c] = 1, xf[2 * in + c] = -1e30f;
      }
      for (int64_t k = 0; k < o * n2 * in; k++) xb[k] = em_f32_to_bf16(xf[k]), xf[k] = em_bf16_to_f32(xb[k]);
      em_status st = be->reduce(0, op, EM_BF16, yb, NULL, xb, o, n2, in, 0);
      st = st ? st : be->reduce(0, op, EM_F32, yf, NULL, xf, o, n2, in, 0);
      int64_t bad = 0;
      for (int64_t k = 0; k < o * in; k++) bad += yb[k] != em_f32_to_bf16(yf[k]);
      check(st == EM_OK && bad == 0, "bf16 %s over [%lld, %lld, %lld]: %lld of %lld differ from float32 rounded once",
            op == EM_RED_SUM ? "sum" : "mean", (long long)o, (long long)n2, (long long)in, (long long)bad,
            (long long)(o * in));
      free(xd), free(xb), free(yb), free(xf), free(yf);
    }
}

/* ---- softmax and layer norm ---- */

static void ref_softmax_row(const double *x, int64_t n, bool log_, double *y) {
  double mx = -INFINITY, s = 0;
  for (int64_t j = 0; j < n; j++) mx = fmax(mx, x[j]);
  for (int64_t j = 0; j < n; j++) s += exp(x[j] - mx);
  for (int64_t j = 0; j < n; j++) y[j] = log_ ? x[j] - mx - log(s) : exp(x[j] - mx) / s;
}

static void test_softmax(void) {
  for (int lg = 0; lg < 2; lg++)
    for (int k = 0; k < 2; k++) {
      em_dtype dt = k ? EM_F64 : EM_F32;
      int64_t rows = 300, n = 130; /* big enough for the parallel path */
      double *xd = xmalloc(rows * n * 8), *want = xmalloc(rows * n * 8);
      void *x = rand_arr(dt, rows * n, -20, 20, xd), *y = xmalloc(rows * n * 8);
      for (int64_t r = 0; r < rows; r++) ref_softmax_row(xd + r * n, n, lg, want + r * n);
      check(be->softmax(0, dt, y, x, rows, n, lg) == EM_OK &&
                close_to("softmax", y, dt, want, rows * n, k ? 1e-14 : 1e-6, k ? 1e-13 : 1e-5),
            "%s %s [%lld, %lld]", lg ? "log_softmax" : "softmax", dtn(dt), (long long)rows,
            (long long)n);
      free(xd);
      free(want);
      free(x);
      free(y);
    }
  /* backward: central differences of sum(gy * f(x)) in f64 */
  for (int lg = 0; lg < 2; lg++) {
    enum { R = 3, N = 8 };
    double x[R * N], gy[R * N], y[R * N], gx[R * N], want[R * N], yp[N], ym[N];
    for (int i = 0; i < R * N; i++) x[i] = 2 * urand(), gy[i] = urand();
    be->softmax(0, EM_F64, y, x, R, N, lg);
    for (int r = 0; r < R; r++)
      for (int j = 0; j < N; j++) {
        double *row = x + r * N, h = 1e-6, save = row[j], lp = 0, lm = 0;
        row[j] = save + h;
        ref_softmax_row(row, N, lg, yp);
        row[j] = save - h;
        ref_softmax_row(row, N, lg, ym);
        row[j] = save;
        for (int c = 0; c < N; c++) lp += gy[r * N + c] * yp[c], lm += gy[r * N + c] * ym[c];
        want[r * N + j] = (lp - lm) / (2 * h);
      }
    check(be->softmax_backward(0, EM_F64, gx, gy, y, R, N, lg) == EM_OK &&
              close_to("softmax_backward", gx, EM_F64, want, R * N, 1e-8, 1e-6),
          "%s backward f64 vs central differences", lg ? "log_softmax" : "softmax");
  }
  double row[3] = {1000, 1000, -INFINITY}, out[3];
  check(be->softmax(0, EM_F64, out, row, 1, 3, false) == EM_OK && out[0] == 0.5 && out[2] == 0,
        "softmax of large values does not overflow");
}

/* y = (x - mean) / sqrt(var + eps) * w + b per row; loss = sum(y * R) */
static void ref_layer_norm(const double *x, const double *w, const double *b, int64_t rows,
                           int64_t n, double eps, double *y) {
  for (int64_t r = 0; r < rows; r++) {
    double mu = 0, var = 0;
    for (int64_t j = 0; j < n; j++) mu += x[r * n + j] / n;
    for (int64_t j = 0; j < n; j++) var += pow(x[r * n + j] - mu, 2) / n;
    for (int64_t j = 0; j < n; j++)
      y[r * n + j] = (x[r * n + j] - mu) / sqrt(var + eps) * (w ? w[j] : 1) + (b ? b[j] : 0);
  }
}

static double ln_loss(const double *x, const double *w, const double *b, int64_t rows, int64_t n,
                      const double *R, double *tmp) {
  ref_layer_norm(x, w, b, rows, n, 1e-5, tmp);
  double s = 0;
  for (int64_t i = 0; i < rows * n; i++) s += tmp[i] * R[i];
  return s;
}

static void test_layer_norm(void) {
  enum { R = 4, N = 10 };
  double x[R * N], w[N], b[N], Rg[R * N], y[R * N], want[R * N], mean[R], rstd[R], tmp[R * N];
  double dx[R * N], dw[N], db[N], wdx[R * N], wdw[N], wdb[N];
  for (int i = 0; i < R * N; i++) x[i] = 3 * urand() + 1, Rg[i] = urand();
  for (int j = 0; j < N; j++) w[j] = 1 + urand() / 2, b[j] = urand();
  for (int wb = 0; wb < 2; wb++) {
    const double *W = wb ? w : NULL, *B = wb ? b : NULL;
    ref_layer_norm(x, W, B, R, N, 1e-5, want);
    check(be->layer_norm(0, EM_F64, y, mean, rstd, x, W, B, R, N, 1e-5) == EM_OK &&
              close_to("layer_norm", y, EM_F64, want, R * N, 1e-12, 1e-12),
          "layer_norm f64 %s", wb ? "with weight and bias" : "without weight and bias");
    const double h = 1e-6;
    for (int i = 0; i < R * N; i++) {
      double s = x[i];
      x[i] = s + h;
      double lp = ln_loss(x, W, B, R, N, Rg, tmp);
      x[i] = s - h;
      double lm = ln_loss(x, W, B, R, N, Rg, tmp);
      x[i] = s;
      wdx[i] = (lp - lm) / (2 * h);
    }
    for (int j = 0; j < N; j++) {
      double s = w[j];
      w[j] = s + h;
      double lp = ln_loss(x, w, b, R, N, Rg, tmp);
      w[j] = s - h;
      double lm = ln_loss(x, w, b, R, N, Rg, tmp);
      w[j] = s;
      wdw[j] = (lp - lm) / (2 * h);
      s = b[j];
      b[j] = s + h;
      lp = ln_loss(x, w, b, R, N, Rg, tmp);
      b[j] = s - h;
      lm = ln_loss(x, w, b, R, N, Rg, tmp);
      b[j] = s;
      wdb[j] = (lp - lm) / (2 * h);
    }
    em_status s = be->layer_norm_backward(0, EM_F64, dx, wb ? dw : NULL, wb ? db : NULL, Rg, x,
                                          mean, rstd, W, R, N);
    int ok = s == EM_OK && close_to("layer_norm dx", dx, EM_F64, wdx, R * N, 1e-6, 1e-5);
    if (wb)
      ok = ok && close_to("dw", dw, EM_F64, wdw, N, 1e-6, 1e-5) &&
           close_to("db", db, EM_F64, wdb, N, 1e-6, 1e-5);
    check(ok, "layer_norm_backward f64 %s vs central differences", wb ? "dx, dw, db" : "dx");
  }
  /* big f32 case (parallel path) against the f64 kernel checked above */
  int64_t rows = 500, n = 96;
  double *xd = xmalloc(rows * n * 8), *yd = xmalloc(rows * n * 8), *dyd = xmalloc(rows * n * 8);
  double md[500], rd[500], *dxd = xmalloc(rows * n * 8), dwd[96], dbd[96], wd[96], bd[96];
  float *xf = rand_arr(EM_F32, rows * n, -2, 2, xd), *dyf = rand_arr(EM_F32, rows * n, -1, 1, dyd);
  float *wf = rand_arr(EM_F32, n, 0.5, 1.5, wd), *bf = rand_arr(EM_F32, n, -1, 1, bd);
  float *yf = xmalloc(rows * n * 4), mf[500], rf[500], *dxf = xmalloc(rows * n * 4), dwf[96],
        dbf[96];
  be->layer_norm(0, EM_F64, yd, md, rd, xd, wd, bd, rows, n, 1e-5);
  be->layer_norm_backward(0, EM_F64, dxd, dwd, dbd, dyd, xd, md, rd, wd, rows, n);
  int ok = be->layer_norm(0, EM_F32, yf, mf, rf, xf, wf, bf, rows, n, 1e-5) == EM_OK &&
           be->layer_norm_backward(0, EM_F32, dxf, dwf, dbf, dyf, xf, mf, rf, wf, rows, n) == EM_OK;
  ok = ok && close_to("ln y", yf, EM_F32, yd, rows * n, 1e-5, 1e-5) &&
       close_to("ln dx", dxf, EM_F32, dxd, rows * n, 1e-4, 1e-4) &&
       close_to("ln dw", dwf, EM_F32, dwd, n, 1e-3, 1e-4) &&
       close_to("ln db", dbf, EM_F32, dbd, n, 1e-3, 1e-4);
  check(ok, "layer_norm f32 [500, 96] forward and backward match f64");
  free(xd);
  free(yd);
  free(dyd);
  free(dxd);
  free(xf);
  free(dyf);
  free(wf);
  free(bf);
  free(yf);
  free(dxf);
}

/* The CPU kernels' exact order, written out plainly: every sum in double,
** in 16 interleaved lanes (lane k takes elements k, k + 16, ...) added up
** lane 0 first, then the tail; each column of dw and db over the rows in
** order. f32 rounds every float operation (a float op's result is the
** double result rounded once more: exact for + - * with float operands).
** The kernels may block, interleave and vectorise rows in any way that
** keeps this order, so their bits must match. */
static double rt_(double v, bool f32) { return f32 ? (double)(float)v : v; }

static double lanes_sum(const double *v, int64_t n) {
  double acc[16] = {0}, s = 0;
  int64_t j = 0;
  for (; j + 16 <= n; j += 16)
    for (int k = 0; k < 16; k++) acc[k] += v[j + k];
  for (int k = 0; k < 16; k++) s += acc[k];
  for (; j < n; j++) s += v[j];
  return s;
}

/* forward and backward of one row set; mu = NULL: RMS norm */
static void ref_norm_exact(bool f32, bool centred, const double *x, const double *w,
                           const double *b, const double *dy, int64_t rows, int64_t n,
                           double eps, double *y, double *mean, double *rstd, double *dx,
                           double *dw, double *db) {
  double *t = xmalloc(n * 8);
  for (int64_t r = 0; r < rows; r++) {
    const double *xr = x + r * n, *dyr = dy + r * n;
    double mu = 0;
    if (centred) mu = lanes_sum(xr, n) / (double)n;
    for (int64_t j = 0; j < n; j++) t[j] = (xr[j] - mu) * (xr[j] - mu);
    const double rs = 1.0 / sqrt(lanes_sum(t, n) / (double)n + eps);
    const double tmu = rt_(mu, f32), trs = rt_(rs, f32);
    mean[r] = tmu, rstd[r] = trs;
    for (int64_t j = 0; j < n; j++) {
      double v = rt_(rt_(xr[j] - tmu, f32) * trs, f32);
      if (w) v = rt_(v * w[j], f32);
      if (b) v = rt_(v + b[j], f32);
      y[r * n + j] = v;
    }
    /* dx from the stored (rounded) mean and rstd, as the backward gets them */
    for (int64_t j = 0; j < n; j++) t[j] = w ? rt_(dyr[j] * w[j], f32) : dyr[j];
    const double sg = lanes_sum(t, n);
    for (int64_t j = 0; j < n; j++) {
      const double xh = rt_(rt_(xr[j] - tmu, f32) * trs, f32);
      t[j] = (w ? rt_(dyr[j] * w[j], f32) : dyr[j]) * xh;
    }
    const double sgx = lanes_sum(t, n);
    const double a = centred ? rt_(sg / (double)n, f32) : 0, c = rt_(sgx / (double)n, f32);
    for (int64_t j = 0; j < n; j++) {
      const double g = w ? rt_(dyr[j] * w[j], f32) : dyr[j];
      const double xs = rt_(rt_(rt_(xr[j] - tmu, f32) * trs, f32) * c, f32);
      dx[r * n + j] = rt_(trs * rt_(rt_(g - a, f32) - xs, f32), f32);
    }
  }
  for (int64_t j = 0; j < n; j++) {
    double aw = 0, ab = 0;
    for (int64_t r = 0; r < rows; r++) {
      const double xh = rt_(rt_(x[r * n + j] - mean[r], f32) * rstd[r], f32);
      aw += rt_(dy[r * n + j] * xh, f32);
      ab += dy[r * n + j];
    }
    dw[j] = rt_(aw, f32), db[j] = rt_(ab, f32);
  }
  free(t);
}

/* Layer norm and RMS norm, float32 and float64, forward and backward, bit
** for bit against ref_norm_exact: row counts around any row block (1 to
** 37, and 300 for the team) and n below, at and past the 16 lanes, past
** 256 (one row at a time) and past 1024 (dw and db by column blocks
** after dx, never carried along with it); on 1 thread (dw and db carried
** along with dx, block by block) and 2. */
static void test_norm_bits(void) {
  static const int64_t rows_[] = {1, 3, 4, 5, 7, 8, 9, 13, 16, 17, 31, 33, 37, 300};
  static const int64_t n_[] = {1, 5, 16, 17, 40, 100, 128, 130, 257, 512, 1040};
  int bad = 0, cases = 0;
  const int threads0 = be->get_num_threads ? be->get_num_threads() : 1;
  for (int th = 1; th <= 2; th++) {
    if (be->set_num_threads) be->set_num_threads(th);
    for (int d = 0; d < 2; d++) {
      const em_dtype dt = d ? EM_F64 : EM_F32;
      const bool f32 = !d;
      for (size_t ri = 0; ri < sizeof rows_ / sizeof *rows_; ri++)
        for (size_t ni = 0; ni < sizeof n_ / sizeof *n_; ni++)
          for (int centred = 0; centred < 2; centred++) {
            const int64_t rows = rows_[ri], n = n_[ni], rn = rows * n;
            if ((rows == 300 && n > 130) || (rows > 37 && n > 512) || (n > 512 && rows % 4 != 1))
              continue;
            double *xd = xmalloc(rn * 8), *dyd = xmalloc(rn * 8), *wd = xmalloc(n * 8),
                   *bd = xmalloc(n * 8);
            void *x = rand_arr(dt, rn, -3, 5, xd), *dy = rand_arr(dt, rn, -1, 1, dyd);
            void *w = rand_arr(dt, n, 0.5, 1.5, wd), *b = rand_arr(dt, n, -1, 1, bd);
            double *y = xmalloc(rn * 8), *dx = xmalloc(rn * 8), *mean = xmalloc(rows * 8),
                   *rstd = xmalloc(rows * 8), *dw = xmalloc(n * 8), *db = xmalloc(n * 8);
            double *wy = xmalloc(rn * 8), *wdx = xmalloc(rn * 8), *wmean = xmalloc(rows * 8),
                   *wrstd = xmalloc(rows * 8), *wdw = xmalloc(n * 8), *wdb = xmalloc(n * 8);
            /* with weight (and bias) on odd rows counts, without on even ones */
            const bool wb = rows % 2;
            ref_norm_exact(f32, centred, xd, wb ? wd : NULL, wb && centred ? bd : NULL, dyd, rows,
                           n, 1e-5, wy, wmean, wrstd, wdx, wdw, wdb);
            em_status s;
            if (centred)
              s = be->layer_norm(0, dt, y, mean, rstd, x, wb ? w : NULL, wb ? b : NULL, rows, n,
                                 1e-5);
            else
              s = be->rms_norm(0, dt, y, rstd, x, wb ? w : NULL, rows, n, 1e-5);
            if (s == EM_OK && centred)
              s = be->layer_norm_backward(0, dt, dx, dw, db, dy, x, mean, rstd, wb ? w : NULL, rows,
                                          n);
            else if (s == EM_OK)
              s = be->rms_norm_backward(0, dt, dx, dw, dy, x, rstd, wb ? w : NULL, rows, n);
            int ok = s == EM_OK && close_to("norm y", y, dt, wy, rn, 0, 0) &&
                     close_to("norm rstd", rstd, dt, wrstd, rows, 0, 0) &&
                     (!centred || close_to("norm mean", mean, dt, wmean, rows, 0, 0)) &&
                     close_to("norm dx", dx, dt, wdx, rn, 0, 0) &&
                     close_to("norm dw", dw, dt, wdw, n, 0, 0) &&
                     (!centred || close_to("norm db", db, dt, wdb, n, 0, 0));
            if (!ok && bad++ < 5)
              printf("# %s %s [%lld, %lld] on %d threads differs from the exact order\n",
                     centred ? "layer_norm" : "rms_norm", dtn(dt), (long long)rows, (long long)n,
                     th);
            cases++;
            free(xd), free(dyd), free(wd), free(bd), free(x), free(dy), free(w), free(b);
            free(y), free(dx), free(mean), free(rstd), free(dw), free(db);
            free(wy), free(wdx), free(wmean), free(wrstd), free(wdw), free(wdb);
          }
    }
  }
  if (be->set_num_threads) be->set_num_threads(threads0);
  check(bad == 0,
        "layer_norm and rms_norm f32/f64, 1 and 2 threads: %d cases bit for bit in the kernels' "
        "order (%d differ)",
        cases, bad);
}

/* ---- indexing ---- */

static void test_index(void) {
  /* index_select: [2,5,3] -> [2,4,3] with idx {4,0,4,2} */
  int64_t idx[4] = {4, 0, 4, 2};
  double in[30], out[24], want[24], acc[30], wacc[30], src[24];
  for (int i = 0; i < 30; i++) in[i] = i, acc[i] = wacc[i] = 0.5 * i;
  for (int o = 0; o < 2; o++)
    for (int j = 0; j < 4; j++)
      for (int i = 0; i < 3; i++) {
        want[(o * 4 + j) * 3 + i] = in[(o * 5 + idx[j]) * 3 + i];
        src[(o * 4 + j) * 3 + i] = urand();
        wacc[(o * 5 + idx[j]) * 3 + i] += src[(o * 4 + j) * 3 + i];
      }
  check(be->index_select(0, EM_F64, out, in, idx, 4, 2, 5, 3) == EM_OK &&
            close_to("index_select", out, EM_F64, want, 24, 0, 0),
        "index_select f64 with a repeated index");
  check(be->index_add(0, EM_F64, acc, src, idx, 4, 2, 5, 3) == EM_OK &&
            close_to("index_add", acc, EM_F64, wacc, 30, 1e-15, 1e-15),
        "index_add f64 with a repeated index");
  int64_t bad[2] = {1, 5};
  check(be->index_select(0, EM_F64, out, in, bad, 2, 2, 5, 3) == EM_ERR_INDEX &&
            msg_has("index 5", "size 5"),
        "index_select out of range names index and size: %s", em_error_message());
  bad[1] = -1;
  check(be->index_add(0, EM_F64, acc, src, bad, 2, 2, 5, 3) == EM_ERR_INDEX &&
            msg_has("index -1", "size 5"),
        "index_add with a negative index: %s", em_error_message());
  uint8_t bin[5] = {1, 0, 1, 1, 0}, bout[4];
  check(be->index_select(0, EM_BOOL, bout, bin, idx, 4, 1, 5, 1) == EM_OK && bout[0] == 0 &&
            bout[1] == 1 && bout[3] == 1,
        "index_select on bool");

  /* embedding backward sized index_add (parallel path), f32 and i64 */
  int64_t V = 300, D = 130, T = 400, *tok = xmalloc(T * 8);
  for (int64_t t = 0; t < T; t++) tok[t] = (int64_t)((urand() + 1) / 2 * V) % V;
  double *g = xmalloc(T * D * 8), *wt = xmalloc(V * D * 8);
  float *gf = rand_arr(EM_F32, T * D, -1, 1, g), *wf = xmalloc(V * D * 4);
  for (int64_t t = 0; t < T; t++)
    for (int64_t i = 0; i < D; i++) wt[tok[t] * D + i] += g[t * D + i];
  check(be->index_add(0, EM_F32, wf, gf, tok, T, 1, V, D) == EM_OK &&
            close_to("index_add big", wf, EM_F32, wt, V * D, 1e-5, 1e-5),
        "index_add f32 [400 tokens x 130] into [300 x 130]");
  int64_t *gi = rand_arr(EM_I64, T * D, -50, 50, g), *wi = xmalloc(V * D * 8);
  memset(wt, 0, V * D * 8);
  for (int64_t t = 0; t < T; t++)
    for (int64_t i = 0; i < D; i++) wt[tok[t] * D + i] += g[t * D + i];
  check(be->index_add(0, EM_I64, wi, gi, tok, T, 1, V, D) == EM_OK &&
            close_to("index_add i64", wi, EM_I64, wt, V * D, 0, 0),
        "index_add i64");
  free(tok);
  free(g);
  free(wt);
  free(gf);
  free(wf);
  free(gi);
  free(wi);

  /* gather / scatter_add: in [2,5,4], idx [2,3,4] */
  int64_t gidx[24];
  double gin[40], gout[24], gwant[24], gsrc[24], sacc[40], swant[40];
  for (int i = 0; i < 40; i++) gin[i] = urand(), sacc[i] = swant[i] = i;
  for (int o = 0; o < 2; o++)
    for (int j = 0; j < 3; j++)
      for (int i = 0; i < 4; i++) {
        int t = (o * 3 + j) * 4 + i;
        gidx[t] = (o + j * 3 + i * 2) % 5;
        if (j == 2) gidx[t] = gidx[t - 4]; /* duplicates for scatter_add */
        gwant[t] = gin[(o * 5 + gidx[t]) * 4 + i];
        gsrc[t] = urand();
        swant[(o * 5 + gidx[t]) * 4 + i] += gsrc[t];
      }
  check(be->gather(0, EM_F64, gout, gin, gidx, 2, 5, 3, 4) == EM_OK &&
            close_to("gather", gout, EM_F64, gwant, 24, 0, 0),
        "gather f64 along a middle dim");
  check(be->scatter_add(0, EM_F64, sacc, gsrc, gidx, 2, 5, 3, 4) == EM_OK &&
            close_to("scatter_add", sacc, EM_F64, swant, 40, 1e-14, 1e-14),
        "scatter_add f64 with duplicates");
  gidx[13] = 9;
  check(be->gather(0, EM_F64, gout, gin, gidx, 2, 5, 3, 4) == EM_ERR_INDEX &&
            msg_has("index 9", "size 5"),
        "gather out of range names index and size: %s", em_error_message());
  memcpy(swant, sacc, sizeof sacc);
  check(be->scatter_add(0, EM_F64, sacc, gsrc, gidx, 2, 5, 3, 4) == EM_ERR_INDEX &&
            memcmp(swant, sacc, sizeof sacc) == 0,
        "scatter_add with a bad index fails and leaves the output alone");
  check(be->index_add(0, EM_BOOL, bout, bin, idx, 1, 1, 5, 1) == EM_ERR_DTYPE &&
            msg_has("index_add", "bool"),
        "index_add on bool names kernel and dtype: %s", em_error_message());
}

/* ---- cross entropy ---- */

static double ref_ce_row(const double *x, int64_t C, int64_t t, double eps) {
  double mx = -INFINITY, s = 0, sum_nlogp = 0;
  for (int64_t c = 0; c < C; c++) mx = fmax(mx, x[c]);
  for (int64_t c = 0; c < C; c++) s += exp(x[c] - mx);
  double lse = mx + log(s);
  for (int64_t c = 0; c < C; c++) sum_nlogp += -(x[c] - lse);
  return (1 - eps) * -(x[t] - lse) + eps * sum_nlogp / C;
}

static void test_cross_entropy(void) {
  enum { R = 6, C = 5 };
  int64_t tgt[R] = {0, 4, -100, 2, 2, 1};
  for (int k = 0; k < 4; k++) {
    em_dtype dt = k & 1 ? EM_F64 : EM_F32;
    double eps = k & 2 ? 0.1 : 0, xd[R * C], want[R], wlse[R];
    void *x = rand_arr(dt, R * C, -4, 4, xd), *loss = xmalloc(R * 8), *lse = xmalloc(R * 8);
    for (int r = 0; r < R; r++) {
      double mx = -INFINITY, s = 0;
      for (int c = 0; c < C; c++) mx = fmax(mx, xd[r * C + c]);
      for (int c = 0; c < C; c++) s += exp(xd[r * C + c] - mx);
      wlse[r] = mx + log(s);
      want[r] = tgt[r] == -100 ? 0 : ref_ce_row(xd + r * C, C, tgt[r], eps);
    }
    double tol = dt == EM_F32 ? 1e-5 : 1e-13;
    check(be->cross_entropy(0, dt, loss, lse, x, tgt, R, C, -100, eps) == EM_OK &&
              close_to("ce loss", loss, dt, want, R, tol, tol) &&
              close_to("ce lse", lse, dt, wlse, R, tol, tol),
          "cross_entropy %s smoothing %g with an ignored row", dtn(dt), eps);
    if (dt == EM_F64) {
      double dloss[R], g[R * C], wg[R * C], h = 1e-6;
      for (int r = 0; r < R; r++) dloss[r] = urand();
      for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) {
          double *row = xd + r * C, s = row[c];
          row[c] = s + h;
          double lp = tgt[r] == -100 ? 0 : ref_ce_row(row, C, tgt[r], eps);
          row[c] = s - h;
          double lm = tgt[r] == -100 ? 0 : ref_ce_row(row, C, tgt[r], eps);
          row[c] = s;
          wg[r * C + c] = dloss[r] * (lp - lm) / (2 * h);
        }
      check(be->cross_entropy_backward(0, dt, g, dloss, x, lse, tgt, R, C, -100, eps) == EM_OK &&
                close_to("ce grad", g, EM_F64, wg, R * C, 1e-8, 1e-6),
            "cross_entropy_backward f64 smoothing %g vs central differences", eps);
    }
    free(x);
    free(loss);
    free(lse);
  }
  int64_t badt[2] = {1, 5};
  double x[10] = {0}, l[2], s[2];
  check(be->cross_entropy(0, EM_F64, l, s, x, badt, 2, 5, -100, 0) == EM_ERR_INDEX &&
            msg_has("target 5", "5 classes"),
        "cross_entropy target out of range: %s", em_error_message());
}

int main(int argc, char **argv) {
  void *h = backend_cpu_open(argc, argv);
  if (!h) return 2;
  test_reduce();
  test_softmax();
  test_layer_norm();
  test_norm_bits();
  test_index();
  test_cross_entropy();
  return backend_cpu_done(h);
}
