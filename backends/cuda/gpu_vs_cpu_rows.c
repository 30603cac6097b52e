/*
** gpu_vs_cpu_rows.c -- row kernels (softmax, layer_norm, cross_entropy),
** indexing, random numbers, dropout and optimizer steps: the CUDA backend
** against the CPU backend.
*/
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gpu_vs_cpu.h"

#define EXACT 1e-300, 0.0

/* Tolerances by dtype: float64, float32, bfloat16 (against float32). */
static double tol_of(em_dtype dt) { return dt == EM_F64 ? 1e-11 : dt == EM_F32 ? 2e-5 : 2e-2; }

/* A host array in the CPU side's dtype: bf16 data widened to float32. */
static void *cpu_view(em_dtype dt, void *h, int64_t n) {
  return dt == EM_BF16 ? (void *)bf16_widen(h, n) : h;
}
static void cpu_view_free(em_dtype dt, void *c) {
  if (dt == EM_BF16) free(c);
}

/* ------------------------------------------------------------------ */
/* softmax                                                             */
/* ------------------------------------------------------------------ */

static void softmax_case(em_dtype dt, int64_t rows, int64_t n, bool log_) {
  em_dtype cdt = dt == EM_BF16 ? EM_F32 : dt;
  int64_t t = rows * n;
  void *x = host_rand(dt, t, -4, 4), *gy = host_rand(dt, t, -1, 1);
  void *xc = cpu_view(dt, x, t), *gyc = cpu_view(dt, gy, t);
  void *y[2] = {malloc(t * 8), malloc(t * 8)}, *gx[2] = {malloc(t * 8), malloc(t * 8)};
  em_status sf[2], sb[2];
  for (int k = 0; k < 2; k++) {
    side sd = {.be = k ? g_cpu : g_gpu};
    em_dtype d = k ? cdt : dt;
    size_t e = em_dtype_size(d);
    void *dx = dput(&sd, k ? xc : x, t * e), *dy = dput(&sd, NULL, t * e);
    void *dgy = dput(&sd, k ? gyc : gy, t * e), *dgx = dput(&sd, NULL, t * e);
    sf[k] = sd.be->softmax(0, d, dy, dx, rows, n, log_);
    sb[k] = sd.be->softmax_backward(0, d, dgx, dgy, dy, rows, n, log_);
    dget(&sd, y[k], dy, t * e);
    dget(&sd, gx[k], dgx, t * e);
    side_free(&sd);
  }
  double tol = tol_of(dt);
  char name[96];
  snprintf(name, sizeof name, "%s %s [%lld, %lld]", log_ ? "log_softmax" : "softmax",
           em_dtype_name(dt), (long long)rows, (long long)n);
  expect_close(name, sf[0], sf[1], compare(dt, y[0], cdt, y[1], t, tol * 1e-2, tol));
  snprintf(name, sizeof name, "%s_backward %s [%lld, %lld]", log_ ? "log_softmax" : "softmax",
           em_dtype_name(dt), (long long)rows, (long long)n);
  expect_close(name, sb[0], sb[1], compare(dt, gx[0], cdt, gx[1], t, tol * (dt == EM_BF16 ? 2 : 0.1), tol * 2));
  cpu_view_free(dt, xc), cpu_view_free(dt, gyc);
  free(x), free(gy), free(y[0]), free(y[1]), free(gx[0]), free(gx[1]);
}

/* ------------------------------------------------------------------ */
/* layer_norm                                                          */
/* ------------------------------------------------------------------ */

static void layer_norm_case(em_dtype dt, int64_t rows, int64_t n, bool affine) {
  em_dtype cdt = dt == EM_BF16 ? EM_F32 : dt; /* also the dtype of mean and rstd */
  int64_t t = rows * n;
  void *x = host_rand(dt, t, -3, 5), *dy = host_rand(dt, t, -1, 1);
  void *w = host_rand(dt, n, 0.5, 1.5), *b = host_rand(dt, n, -1, 1);
  void *xc = cpu_view(dt, x, t), *dyc = cpu_view(dt, dy, t), *wc = cpu_view(dt, w, n),
       *bc = cpu_view(dt, b, n);
  void *y[2], *mean[2], *rstd[2], *dx[2], *dw[2], *db[2];
  em_status sf[2], sb[2];
  for (int k = 0; k < 2; k++) {
    side sd = {.be = k ? g_cpu : g_gpu};
    em_dtype d = k ? cdt : dt;
    size_t e = em_dtype_size(d), se = em_dtype_size(cdt);
    y[k] = malloc(t * 8), dx[k] = malloc(t * 8), mean[k] = malloc(rows * 8);
    rstd[k] = malloc(rows * 8), dw[k] = malloc(n * 8), db[k] = malloc(n * 8);
    void *gx = dput(&sd, k ? xc : x, t * e), *gy = dput(&sd, NULL, t * e);
    void *gm = dput(&sd, NULL, rows * se), *gr = dput(&sd, NULL, rows * se);
    void *gw = affine ? dput(&sd, k ? wc : w, n * e) : NULL;
    void *gb = affine ? dput(&sd, k ? bc : b, n * e) : NULL;
    void *gdy = dput(&sd, k ? dyc : dy, t * e), *gdx = dput(&sd, NULL, t * e);
    void *gdw = dput(&sd, NULL, n * e), *gdb = dput(&sd, NULL, n * e);
    sf[k] = sd.be->layer_norm(0, d, gy, gm, gr, gx, gw, gb, rows, n, 1e-5);
    sb[k] = sd.be->layer_norm_backward(0, d, gdx, gdw, gdb, gdy, gx, gm, gr, gw, rows, n);
    dget(&sd, y[k], gy, t * e);
    dget(&sd, mean[k], gm, rows * se);
    dget(&sd, rstd[k], gr, rows * se);
    dget(&sd, dx[k], gdx, t * e);
    dget(&sd, dw[k], gdw, n * e);
    dget(&sd, db[k], gdb, n * e);
    side_free(&sd);
  }
  double tol = tol_of(dt);
  char name[96];
  snprintf(name, sizeof name, "layer_norm %s [%lld, %lld]%s", em_dtype_name(dt), (long long)rows,
           (long long)n, affine ? " with weight and bias" : "");
  double wf = compare(dt, y[0], cdt, y[1], t, tol, tol);
  wf = fmax(wf, compare(cdt, mean[0], cdt, mean[1], rows, tol * 1e-2, tol * 1e-2));
  wf = fmax(wf, compare(cdt, rstd[0], cdt, rstd[1], rows, tol * 1e-2, tol * 1e-2));
  expect_close(name, sf[0], sf[1], wf);
  snprintf(name, sizeof name, "layer_norm_backward %s [%lld, %lld]%s", em_dtype_name(dt),
           (long long)rows, (long long)n, affine ? " with weight" : "");
  double wb = compare(dt, dx[0], cdt, dx[1], t, tol * 2, tol * 2);
  double big = dt == EM_BF16 ? 5 : 1; /* bf16 sums of thousands of rounded terms */
  wb = fmax(wb, compare(dt, dw[0], cdt, dw[1], n, tol * big, tol * big));
  wb = fmax(wb, compare(dt, db[0], cdt, db[1], n, tol * big, tol * big));
  expect_close(name, sb[0], sb[1], wb);
  cpu_view_free(dt, xc), cpu_view_free(dt, dyc), cpu_view_free(dt, wc), cpu_view_free(dt, bc);
  free(x), free(dy), free(w), free(b);
  for (int k = 0; k < 2; k++) free(y[k]), free(mean[k]), free(rstd[k]), free(dx[k]), free(dw[k]), free(db[k]);
}

/* ------------------------------------------------------------------ */
/* cross entropy                                                       */
/* ------------------------------------------------------------------ */

static void cross_entropy_case(em_dtype dt, int64_t rows, int64_t classes, double smoothing,
                               bool bad_target) {
  em_dtype cdt = dt == EM_BF16 ? EM_F32 : dt;
  int64_t t = rows * classes, ignore = 2;
  void *x = host_rand(dt, t, -3, 3), *dl = host_rand(dt, rows, 0.1, 1);
  void *xc = cpu_view(dt, x, t), *dlc = cpu_view(dt, dl, rows);
  int64_t *target = malloc(rows * 8);
  for (int64_t r = 0; r < rows; r++) target[r] = r % 5 == 0 ? ignore : rng_int(classes);
  if (bad_target) target[rows / 2] = classes;
  void *loss[2], *lse[2], *dx[2];
  em_status sf[2], sb[2] = {EM_OK, EM_OK};
  for (int k = 0; k < 2; k++) {
    side sd = {.be = k ? g_cpu : g_gpu};
    em_dtype d = k ? cdt : dt;
    size_t e = em_dtype_size(d);
    loss[k] = malloc(rows * 8), lse[k] = malloc(rows * 8), dx[k] = malloc(t * 8);
    void *gx = dput(&sd, k ? xc : x, t * e), *gt = dput(&sd, target, rows * 8);
    void *gl = dput(&sd, NULL, rows * e), *gs = dput(&sd, NULL, rows * e);
    void *gdl = dput(&sd, k ? dlc : dl, rows * e), *gdx = dput(&sd, NULL, t * e);
    sf[k] = sd.be->cross_entropy(0, d, gl, gs, gx, gt, rows, classes, ignore, smoothing);
    if (!bad_target)
      sb[k] = sd.be->cross_entropy_backward(0, d, gdx, gdl, gx, gs, gt, rows, classes, ignore,
                                            smoothing);
    dget(&sd, loss[k], gl, rows * e);
    dget(&sd, lse[k], gs, rows * e);
    dget(&sd, dx[k], gdx, t * e);
    side_free(&sd);
  }
  char name[112];
  if (bad_target) {
    expect(sf[0] == EM_ERR_INDEX && sf[1] == EM_ERR_INDEX,
           "cross_entropy %s: a target out of range is EM_ERR_INDEX on both (%d, %d)",
           em_dtype_name(dt), sf[0], sf[1]);
  } else {
    double tol = tol_of(dt);
    snprintf(name, sizeof name, "cross_entropy %s [%lld, %lld] smoothing %.2f, ignore_index",
             em_dtype_name(dt), (long long)rows, (long long)classes, smoothing);
    double w = fmax(compare(dt, loss[0], cdt, loss[1], rows, tol, tol),
                    compare(dt, lse[0], cdt, lse[1], rows, tol, tol));
    expect_close(name, sf[0], sf[1], w);
    snprintf(name, sizeof name, "cross_entropy_backward %s [%lld, %lld] smoothing %.2f",
             em_dtype_name(dt), (long long)rows, (long long)classes, smoothing);
    expect_close(name, sb[0], sb[1], compare(dt, dx[0], cdt, dx[1], t, tol * 0.1, tol * 5));
  }
  cpu_view_free(dt, xc), cpu_view_free(dt, dlc);
  free(x), free(dl), free(target);
  for (int k = 0; k < 2; k++) free(loss[k]), free(lse[k]), free(dx[k]);
}

void test_rows(void) {
  const int64_t shapes[][2] = {{37, 10}, {3, 1024}, {5, 5000}, {2, 9000}};
  const em_dtype dts[3] = {EM_F32, EM_F64, EM_BF16};
  for (int di = 0; di < 3; di++)
    for (int si = 0; si < 4; si++) {
      softmax_case(dts[di], shapes[si][0], shapes[si][1], false);
      softmax_case(dts[di], shapes[si][0], shapes[si][1], true);
    }
  for (int di = 0; di < 3; di++) {
    layer_norm_case(dts[di], 37, 48, true);
    layer_norm_case(dts[di], 37, 48, false);
    layer_norm_case(dts[di], 4, 3000, true);
    layer_norm_case(dts[di], 4096, 16, true); /* long columns: split dw/db sums */
    /* n >= 8192: a block of EMC_ROW_MAX_THREADS (1024) per row, n not a multiple of it */
    layer_norm_case(dts[di], 3, 9001, true);
  }
  for (int di = 0; di < 3; di++) {
    cross_entropy_case(dts[di], 50, 7, 0.0, false);
    cross_entropy_case(dts[di], 50, 7, 0.1, false);
    cross_entropy_case(dts[di], 6, 3000, 0.1, false);
    cross_entropy_case(dts[di], 3, 9001, 0.1, false); /* 1024 threads a row */
  }
  cross_entropy_case(EM_F32, 20, 7, 0.0, true);
}

/* ------------------------------------------------------------------ */
/* indexing                                                            */
/* ------------------------------------------------------------------ */

/* kind 0 index_select, 1 gather, 2 index_add, 3 scatter_add. */
static void index_case(int kind, em_dtype dt, int64_t outer, int64_t n_src, int64_t n_idx,
                       int64_t inner, bool bad) {
  static const char *const names[4] = {"index_select", "gather", "index_add", "scatter_add"};
  bool per_element = kind == 1 || kind == 3, adds = kind >= 2;
  /* select: in [outer, n_src, inner] -> out [outer, n_idx, inner];
  ** add: src [outer, n_idx, inner] into out [outer, n_src, inner]. */
  int64_t nin = outer * (adds ? n_idx : n_src) * inner, nout = outer * (adds ? n_src : n_idx) * inner;
  int64_t nidx = per_element ? outer * n_idx * inner : n_idx;
  void *in = host_rand(dt, nin, -50, 50), *init = host_rand(dt, nout, -5, 5);
  int64_t *idx = malloc(nidx * 8);
  for (int64_t j = 0; j < nidx; j++) idx[j] = rng_int(n_src); /* repeats on purpose */
  if (bad) idx[nidx / 2] = n_src + 3;
  void *out[2];
  em_status st[2];
  size_t e = em_dtype_size(dt);
  for (int k = 0; k < 2; k++) {
    side sd = {.be = k ? g_cpu : g_gpu};
    out[k] = malloc(nout * e);
    void *gi = dput(&sd, in, nin * e), *gx = dput(&sd, idx, nidx * 8);
    void *go = dput(&sd, adds ? init : NULL, nout * e);
    switch (kind) {
      case 0: st[k] = sd.be->index_select(0, dt, go, gi, gx, n_idx, outer, n_src, inner); break;
      case 1: st[k] = sd.be->gather(0, dt, go, gi, gx, outer, n_src, n_idx, inner); break;
      case 2: st[k] = sd.be->index_add(0, dt, go, gi, gx, n_idx, outer, n_src, inner); break;
      default: st[k] = sd.be->scatter_add(0, dt, go, gi, gx, outer, n_src, n_idx, inner); break;
    }
    dget(&sd, out[k], go, nout * e);
    side_free(&sd);
  }
  if (bad) {
    expect(st[0] == EM_ERR_INDEX && st[1] == EM_ERR_INDEX,
           "%s %s: an index out of range is EM_ERR_INDEX on both (%d, %d): %s", names[kind],
           em_dtype_name(dt), st[0], st[1], em_error_message());
  } else {
    char name[96];
    snprintf(name, sizeof name, "%s %s [%lld, %lld -> %lld, %lld]", names[kind], em_dtype_name(dt),
             (long long)outer, (long long)n_src, (long long)n_idx, (long long)inner);
    /* adds of floats may sum repeated indices in another order */
    double tol = adds && dt == EM_F32 ? 1e-5 : (adds && dt == EM_F64 ? 1e-12 : 0);
    expect_close(name, st[0], st[1],
                 tol > 0 ? compare(dt, out[0], dt, out[1], nout, tol, tol)
                         : compare(dt, out[0], dt, out[1], nout, EXACT));
  }
  free(in), free(init), free(idx), free(out[0]), free(out[1]);
}

void test_index(void) {
  const em_dtype sel[4] = {EM_F32, EM_I64, EM_BOOL, EM_BF16}, add[3] = {EM_F32, EM_F64, EM_I64};
  for (int i = 0; i < 4; i++) {
    index_case(0, sel[i], 3, 10, 7, 5, false);
    index_case(1, sel[i], 3, 10, 7, 5, false);
  }
  index_case(0, EM_F32, 1, 50000, 300, 64, false); /* an embedding lookup */
  for (int i = 0; i < 3; i++) {
    index_case(2, add[i], 3, 10, 25, 5, false);
    index_case(3, add[i], 3, 10, 25, 5, false);
  }
  for (int kind = 0; kind < 4; kind++) index_case(kind, EM_F32, 2, 6, 4, 3, true);
}

/* ------------------------------------------------------------------ */
/* random, dropout, optimizers                                         */
/* ------------------------------------------------------------------ */

static void random_case(em_random_kind kind, em_dtype dt) {
  em_dtype cdt = dt == EM_BF16 ? EM_F32 : dt;
  const int64_t shape[2] = {33, 31}, n = 33 * 31;
  void *out[2] = {malloc(n * 8), malloc(n * 8)};
  em_status st[2];
  for (int k = 0; k < 2; k++) {
    side sd = {.be = k ? g_cpu : g_gpu};
    em_dtype d = k ? cdt : dt;
    void *g = dput(&sd, NULL, n * em_dtype_size(d));
    em_kview v = kview(g, d, 2, shape, NULL);
    st[k] = sd.be->random(0, kind, &v, kind == EM_RAND_UNIFORM ? -2 : 0.5,
                          kind == EM_RAND_UNIFORM ? 3 : 2, 987654321ull, 4242);
    dget(&sd, out[k], g, n * em_dtype_size(d));
    side_free(&sd);
  }
  char name[64];
  snprintf(name, sizeof name, "random %s %s (same Philox stream)",
           kind == EM_RAND_UNIFORM ? "uniform" : "normal", em_dtype_name(dt));
  double tol = dt == EM_F64 ? 1e-13 : dt == EM_F32 ? 1e-6 : 1e-2;
  expect_close(name, st[0], st[1], compare(dt, out[0], cdt, out[1], n, tol, tol));
  free(out[0]), free(out[1]);
}

static void dropout_case(em_dtype dt, double p) {
  em_dtype cdt = dt == EM_BF16 ? EM_F32 : dt;
  int64_t n = 5000;
  void *x = host_rand(dt, n, -2, 2), *xc = cpu_view(dt, x, n);
  void *out[2] = {malloc(n * 8), malloc(n * 8)}, *mask[2] = {malloc(n * 8), malloc(n * 8)};
  em_status st[2];
  for (int k = 0; k < 2; k++) {
    side sd = {.be = k ? g_cpu : g_gpu};
    em_dtype d = k ? cdt : dt;
    size_t e = em_dtype_size(d);
    void *gx = dput(&sd, k ? xc : x, n * e), *go = dput(&sd, NULL, n * e), *gm = dput(&sd, NULL, n * e);
    st[k] = sd.be->dropout(0, d, go, gm, gx, n, p, 77, 1000);
    dget(&sd, out[k], go, n * e);
    dget(&sd, mask[k], gm, n * e);
    side_free(&sd);
  }
  char name[64];
  snprintf(name, sizeof name, "dropout %s p=%.2f (mask and output)", em_dtype_name(dt), p);
  double tol = dt == EM_BF16 ? 1e-2 : 1e-300;
  double w = fmax(compare(dt, out[0], cdt, out[1], n, tol, dt == EM_BF16 ? tol : 0),
                  compare(dt, mask[0], cdt, mask[1], n, tol, dt == EM_BF16 ? tol : 0));
  expect_close(name, st[0], st[1], w);
  cpu_view_free(dt, xc);
  free(x), free(out[0]), free(out[1]), free(mask[0]), free(mask[1]);
}

/* Three steps of Adam, AdamW or SGD (kind 0, 1, 2: momentum with dampening,
** 3: nesterov) from the same state. */
static void optim_case(int kind, em_dtype dt) {
  static const char *const names[4] = {"adam_step", "adamw_step", "sgd_step momentum",
                                       "sgd_step nesterov"};
  em_dtype cdt = dt == EM_BF16 ? EM_F32 : dt;
  int64_t n = 3000;
  void *p = host_rand(dt, n, -1, 1), *g = host_rand(dt, n, -1, 1);
  void *pc = cpu_view(dt, p, n), *gc = cpu_view(dt, g, n);
  void *res[2] = {malloc(n * 8), malloc(n * 8)}, *st1[2] = {malloc(n * 8), malloc(n * 8)};
  em_status st[2] = {EM_OK, EM_OK};
  for (int k = 0; k < 2; k++) {
    side sd = {.be = k ? g_cpu : g_gpu};
    em_dtype d = k ? cdt : dt;
    size_t e = em_dtype_size(d);
    void *gp = dput(&sd, k ? pc : p, n * e), *gg = dput(&sd, k ? gc : g, n * e);
    void *gm = dput(&sd, NULL, n * e), *gv = dput(&sd, NULL, n * e);
    for (int step = 1; step <= 3 && !st[k]; step++) {
      if (kind < 2)
        st[k] = sd.be->adam_step(0, d, n, gp, gg, gm, gv, 1e-2, 0.9, 0.999, 1e-8, 0.01, step,
                                 kind == 1);
      else
        st[k] = sd.be->sgd_step(0, d, n, gp, gg, gm, 0.1, 0.9, kind == 3 ? 0 : 0.1, 0.001,
                                kind == 3, step == 1);
    }
    dget(&sd, res[k], gp, n * e);
    dget(&sd, st1[k], gm, n * e);
    side_free(&sd);
  }
  char name[64];
  snprintf(name, sizeof name, "%s %s (3 steps: parameters and state)", names[kind], em_dtype_name(dt));
  double tol = dt == EM_F64 ? 1e-12 : dt == EM_F32 ? 1e-6 : 2e-2;
  double w = fmax(compare(dt, res[0], cdt, res[1], n, tol, tol),
                  compare(dt, st1[0], cdt, st1[1], n, tol, tol));
  expect_close(name, st[0], st[1], w);
  cpu_view_free(dt, pc), cpu_view_free(dt, gc);
  free(p), free(g), free(res[0]), free(res[1]), free(st1[0]), free(st1[1]);
}

void test_random_optim(void) {
  const em_dtype dts[3] = {EM_F32, EM_F64, EM_BF16};
  for (int i = 0; i < 3; i++) {
    random_case(EM_RAND_UNIFORM, dts[i]);
    random_case(EM_RAND_NORMAL, dts[i]);
    dropout_case(dts[i], 0.3);
  }
  dropout_case(EM_F32, 0.0);
  dropout_case(EM_F32, 1.0);
  bool have = g_gpu->adam_step && g_cpu->adam_step && g_gpu->sgd_step && g_cpu->sgd_step;
  if (!have) {
    printf("note: the CPU backend has no fused optimizer kernels, optimizer steps not compared\n");
    return;
  }
  for (int kind = 0; kind < 4; kind++)
    for (int i = 0; i < 3; i++) optim_case(kind, dts[i]);
}
