/*
** gpu_vs_cpu_ops.c -- memory and transfers, elementwise ops, reductions
** and matmul: the CUDA backend against the CPU backend.
**
** Each test runs the kernel on both backends (index 0 the GPU, 1 the CPU)
** from the same host inputs and compares the host copies of the outputs.
*/
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gpu_vs_cpu.h"

#define EXACT 1e-300, 0.0 /* atol, rtol: any difference fails */

static const em_dtype ALL[5] = {EM_F32, EM_F64, EM_I64, EM_BOOL, EM_BF16};

/* ------------------------------------------------------------------ */
/* memory and transfers (GPU side only)                                */
/* ------------------------------------------------------------------ */

void test_memory(void) {
  const em_backend *be = g_gpu;
  size_t in0 = 0, c0 = 0, in1 = 0, c1 = 0;
  void *p = NULL;
  em_status s = be->memory_stats(0, &in0, &c0);
  s = s ? s : be->alloc(0, 100000, &p);
  s = s ? s : be->memory_stats(0, &in1, &c1);
  expect(!s && in1 >= in0 + 100000, "memory: alloc of 100000 bytes shows in memory_stats (%zu -> %zu)",
         in0, in1);
  be->free(0, p, 100000);
  be->memory_stats(0, &in1, &c1);
  expect(in1 == in0 && c1 >= c0 + 100000, "memory: a freed block is cached (in use %zu, cached %zu)",
         in1, c1);
  void *q = NULL;
  be->alloc(0, 100000, &q);
  size_t in2, c2;
  be->memory_stats(0, &in2, &c2);
  expect(q == p && c2 == c0, "memory: the next alloc of that size reuses the cached block");
  be->free(0, q, 100000);
  s = be->empty_cache(0);
  be->memory_stats(0, &in2, &c2);
  expect(!s && c2 == 0, "memory: empty_cache leaves nothing cached (%zu)", c2);
  void *huge = NULL;
  s = be->alloc(0, (size_t)1 << 50, &huge);
  expect(s == EM_ERR_OOM && !huge, "memory: a 1 PiB alloc is EM_ERR_OOM: %s", em_error_message());
  s = be->alloc(be->device_count() + 3, 16, &huge);
  expect(s == EM_ERR_DEVICE, "memory: a device that does not exist is EM_ERR_DEVICE: %s",
         em_error_message());

  /* Two 20 MB round trips back to back: more than the two 8 MB staging
  ** buffers, so buffer reuse and draining are exercised. */
  size_t n = 20u << 20;
  unsigned char *a = malloc(n), *b = malloc(n), *ra = malloc(n), *rb = malloc(n), *rc = malloc(n);
  for (size_t i = 0; i < n; i++) a[i] = (unsigned char)(i * 7 + 1), b[i] = (unsigned char)(i * 13 + 5);
  void *da = NULL, *db = NULL, *dc = NULL;
  s = be->alloc(0, n, &da);
  s = s ? s : be->alloc(0, n, &db);
  s = s ? s : be->alloc(0, n, &dc);
  s = s ? s : be->copy_h2d(0, da, a, n);
  s = s ? s : be->copy_h2d(0, db, b, n);
  memset(a, 0, 4096); /* the copies must not read the caller's memory later */
  s = s ? s : be->copy_d2d(0, dc, 0, da, n);
  s = s ? s : be->copy_d2h(0, ra, da, n);
  s = s ? s : be->copy_d2h(0, rb, db, n);
  s = s ? s : be->copy_d2h(0, rc, dc, n);
  s = s ? s : be->synchronize(0);
  for (size_t i = 0; i < 4096; i++) a[i] = (unsigned char)(i * 7 + 1);
  expect(!s && !memcmp(a, ra, n) && !memcmp(b, rb, n) && !memcmp(a, rc, n),
         "transfers: 20 MB h2d, d2d and d2h round trips are exact");
  be->free(0, da, n);
  be->free(0, db, n);
  be->free(0, dc, n);
  free(a), free(b), free(ra), free(rb), free(rc);
}

/* ------------------------------------------------------------------ */
/* copy and fill                                                       */
/* ------------------------------------------------------------------ */

static void test_copy_fill(void) {
  const int64_t shape[3] = {3, 4, 5}, n = 60;
  const int64_t tstride[3] = {5, 15, 1}; /* a transpose of a [4,3,5] buffer */
  const int64_t bshape[3] = {3, 4, 5}, bstride[3] = {0, 1, 0};
  int bad = 0, total = 0;
  for (int si = 0; si < 5; si++)
    for (int di = 0; di < 5; di++) {
      em_dtype sdt = ALL[si], ddt = ALL[di];
      void *src = host_rand(sdt, n, -100, 100);
      void *out[2];
      em_status st[2];
      for (int k = 0; k < 2; k++) {
        side sd = {.be = k ? g_cpu : g_gpu};
        out[k] = malloc((size_t)n * em_dtype_size(ddt));
        void *ds = dput(&sd, src, (size_t)n * em_dtype_size(sdt));
        void *dd = dput(&sd, NULL, (size_t)n * em_dtype_size(ddt));
        em_kview vd = kview(dd, ddt, 3, shape, NULL), vs = kview(ds, sdt, 3, shape, tstride);
        st[k] = sd.be->copy(0, &vd, &vs);
        dget(&sd, out[k], dd, (size_t)n * em_dtype_size(ddt));
        side_free(&sd);
      }
      total++;
      if (st[0] || st[1] || compare(ddt, out[0], ddt, out[1], n, EXACT) > 1) {
        bad++;
        printf("  copy %s -> %s differs (status %d %d)\n", em_dtype_name(sdt), em_dtype_name(ddt),
               st[0], st[1]);
      }
      free(src), free(out[0]), free(out[1]);
    }
  expect(bad == 0, "copy: all %d dtype pairs from a transposed view are exact (%d differ)", total, bad);
  bad = 0;
  for (int di = 0; di < 5; di++) {
    em_dtype dt = ALL[di];
    void *src = host_rand(dt, 4, -5, 5), *out[2];
    em_status st[2], sf[2];
    for (int k = 0; k < 2; k++) {
      side sd = {.be = k ? g_cpu : g_gpu};
      out[k] = malloc((size_t)2 * n * em_dtype_size(dt));
      void *ds = dput(&sd, src, 4 * em_dtype_size(dt));
      void *dd = dput(&sd, NULL, (size_t)2 * n * em_dtype_size(dt));
      em_kview vd = kview(dd, dt, 3, bshape, NULL), vs = kview(ds, dt, 3, bshape, bstride);
      st[k] = sd.be->copy(0, &vd, &vs);
      em_kview vf = kview((char *)dd + n * em_dtype_size(dt), dt, 3, shape, NULL);
      sf[k] = sd.be->fill(0, &vf, -2.75);
      dget(&sd, out[k], dd, (size_t)2 * n * em_dtype_size(dt));
      side_free(&sd);
    }
    if (st[0] || st[1] || sf[0] || sf[1] || compare(dt, out[0], dt, out[1], 2 * n, EXACT) > 1) bad++;
    free(src), free(out[0]), free(out[1]);
  }
  expect(bad == 0, "copy from a broadcast view, and fill, in every dtype (%d differ)", bad);
}

/* ------------------------------------------------------------------ */
/* unary                                                               */
/* ------------------------------------------------------------------ */

static void unary_args(int op, double *lo, double *hi, double *alpha, double *beta) {
  *lo = -3, *hi = 3, *alpha = 0, *beta = 0;
  if (op == EM_LOG || op == EM_SQRT || op == EM_RSQRT || op == EM_POW_SCALAR) *lo = 0.1;
  if (op == EM_ELU) *alpha = 1.3;
  if (op == EM_CLAMP) *alpha = -0.5, *beta = 0.7;
  if (op == EM_POW_SCALAR) *alpha = 2.5;
  if (op == EM_AFFINE) *alpha = 1.5, *beta = -0.25;
}

/* One unary op forward (and backward for floats) in dtype dt; bf16 on the
** GPU is compared with float32 on the CPU. */
static void unary_case(int op, em_dtype dt) {
  const int64_t shape[2] = {7, 9}, tstride[2] = {1, 7}, n = 63;
  double lo, hi, alpha, beta;
  unary_args(op, &lo, &hi, &alpha, &beta);
  em_dtype cdt = dt == EM_BF16 ? EM_F32 : dt; /* the CPU side's dtype */
  size_t ge = em_dtype_size(dt), ce = em_dtype_size(cdt);
  void *x = host_rand(dt, n, lo, hi), *gy = host_rand(dt, n, -1, 1);
  void *xc = dt == EM_BF16 ? bf16_widen(x, n) : x, *gyc = dt == EM_BF16 ? bf16_widen(gy, n) : gy;
  void *out[2] = {malloc(n * ge), malloc(n * ce)}, *gx[2] = {malloc(n * ge), malloc(n * ce)};
  em_status sf[2], sb[2] = {EM_OK, EM_OK};
  bool grad = op != EM_NOT && dt != EM_I64;
  for (int k = 0; k < 2; k++) {
    side sd = {.be = k ? g_cpu : g_gpu};
    em_dtype t = k ? cdt : dt;
    size_t e = em_dtype_size(t);
    void *dx = dput(&sd, k ? xc : x, n * e), *dy = dput(&sd, NULL, n * e);
    em_kview vo = kview(dy, t, 2, shape, NULL), vx = kview(dx, t, 2, shape, tstride);
    sf[k] = sd.be->unary(0, op, &vo, &vx, alpha, beta);
    dget(&sd, out[k], dy, n * e);
    if (grad) {
      /* the backward takes contiguous x: the transpose above is [9,7]-major */
      void *dgy = dput(&sd, k ? gyc : gy, n * e), *dgx = dput(&sd, NULL, n * e);
      void *dxc = dput(&sd, NULL, n * e);
      em_kview vxc = kview(dxc, t, 2, shape, NULL);
      sd.be->copy(0, &vxc, &vx);
      sb[k] = sd.be->unary_backward(0, op, t, n, dgx, dgy, dxc, dy, alpha, beta);
      dget(&sd, gx[k], dgx, n * e);
    }
    side_free(&sd);
  }
  double atol = dt == EM_F64 ? 1e-13 : (dt == EM_BF16 ? 2e-2 : 1e-6);
  double rtol = dt == EM_F64 ? 1e-12 : (dt == EM_BF16 ? 2e-2 : 1e-5);
  char name[80];
  snprintf(name, sizeof name, "unary %s %s", em_kernel_unary_name(op), em_dtype_name(dt));
  expect_close(name, sf[0], sf[1], compare(dt, out[0], cdt, out[1], n, atol, rtol));
  if (grad) {
    snprintf(name, sizeof name, "unary_backward %s %s", em_kernel_unary_name(op), em_dtype_name(dt));
    /* bf16: both sides use their own forward output, so allow more */
    expect_close(name, sb[0], sb[1],
                 compare(dt, gx[0], cdt, gx[1], n, dt == EM_BF16 ? 5e-2 : atol,
                         dt == EM_BF16 ? 5e-2 : rtol));
  }
  if (xc != x) free(xc);
  if (gyc != gy) free(gyc);
  free(x), free(gy), free(out[0]), free(out[1]), free(gx[0]), free(gx[1]);
}

/* ------------------------------------------------------------------ */
/* binary and where                                                    */
/* ------------------------------------------------------------------ */

static const char *const BINARY[EM_NBINARY] = {
  "add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge",
  "and", "or", "xor", "fmod"};

static void binary_case(int op, em_dtype dt) {
  /* a [4,1,6] and b [1,5,6] broadcast to [4,5,6] */
  const int64_t oshape[3] = {4, 5, 6}, as[3] = {6, 0, 1}, bs[3] = {0, 6, 1}, n = 120;
  bool cmp = op >= EM_EQ && op <= EM_GE;
  em_dtype cdt = dt == EM_BF16 ? EM_F32 : dt, odt = cmp ? EM_BOOL : dt, ocdt = cmp ? EM_BOOL : cdt;
  double lo = -3, hi = 3, blo = -3, bhi = 3;
  if (op == EM_POW) lo = 0.1, blo = -2, bhi = 2;
  if (dt == EM_I64) {
    lo = -50, hi = 50, blo = 1, bhi = 7;
    if (op == EM_POW) lo = -4, hi = 5, blo = 0, bhi = 5;
  }
  void *a = host_rand(dt, 24, lo, hi), *b = host_rand(dt, 30, blo, bhi);
  if (dt == EM_I64 && (op == EM_DIV || op == EM_FMOD))
    for (int i = 0; i < 30; i += 2) ((int64_t *)b)[i] = -((int64_t *)b)[i];
  if (dt != EM_BOOL && cmp) memcpy(b, a, 6 * em_dtype_size(dt)); /* some equal pairs */
  void *ac = dt == EM_BF16 ? bf16_widen(a, 24) : a, *bc = dt == EM_BF16 ? bf16_widen(b, 30) : b;
  void *out[2] = {malloc(n * 8), malloc(n * 8)};
  em_status st[2];
  for (int k = 0; k < 2; k++) {
    side sd = {.be = k ? g_cpu : g_gpu};
    em_dtype t = k ? cdt : dt, ot = k ? ocdt : odt;
    void *da = dput(&sd, k ? ac : a, 24 * em_dtype_size(t));
    void *db = dput(&sd, k ? bc : b, 30 * em_dtype_size(t));
    void *dout = dput(&sd, NULL, n * em_dtype_size(ot));
    em_kview vo = kview(dout, ot, 3, oshape, NULL), va = kview(da, t, 3, oshape, as),
             vb = kview(db, t, 3, oshape, bs);
    st[k] = sd.be->binary(0, op, &vo, &va, &vb);
    dget(&sd, out[k], dout, n * em_dtype_size(ot));
    side_free(&sd);
  }
  double tol = dt == EM_F64 ? 1e-13 : (dt == EM_BF16 ? 2e-2 : 1e-6);
  if (cmp || dt == EM_I64 || dt == EM_BOOL) tol = 1e-300;
  char name[80];
  snprintf(name, sizeof name, "binary %s %s (broadcast)", BINARY[op], em_dtype_name(dt));
  expect_close(name, st[0], st[1],
               compare(odt, out[0], ocdt, out[1], n, tol, cmp || dt == EM_I64 ? 0 : tol * 10));
  if (ac != a) free(ac), free(bc);
  free(a), free(b), free(out[0]), free(out[1]);
}

static void test_binary_errors(void) {
  int64_t a[3] = {4, 5, 6}, b[3] = {1, 0, 2}, one = 3;
  const int ops[2] = {EM_DIV, EM_FMOD};
  for (int o = 0; o < 2; o++) {
    em_status st[2];
    for (int k = 0; k < 2; k++) {
      side sd = {.be = k ? g_cpu : g_gpu};
      void *da = dput(&sd, a, 24), *db = dput(&sd, b, 24), *dout = dput(&sd, NULL, 24);
      em_kview vo = kview(dout, EM_I64, 1, &one, NULL), va = kview(da, EM_I64, 1, &one, NULL),
               vb = kview(db, EM_I64, 1, &one, NULL);
      st[k] = sd.be->binary(0, ops[o], &vo, &va, &vb);
      side_free(&sd);
    }
    expect(st[0] == EM_ERR_ARG && st[1] == EM_ERR_ARG, "binary %s: int64 division by zero is an "
           "error on both (%d, %d)", BINARY[ops[o]], st[0], st[1]);
  }
  /* int64 fmod's edges: the sign of the dividend, INT64_MIN % -1 = 0 */
  int64_t x[4] = {INT64_MIN, -7, 7, INT64_MIN}, y[4] = {-1, 2, -2, 3}, four = 4, r[2][4];
  em_status st[2];
  for (int k = 0; k < 2; k++) {
    side sd = {.be = k ? g_cpu : g_gpu};
    void *dx = dput(&sd, x, 32), *dy = dput(&sd, y, 32), *dout = dput(&sd, NULL, 32);
    em_kview vo = kview(dout, EM_I64, 1, &four, NULL), vx = kview(dx, EM_I64, 1, &four, NULL),
             vy = kview(dy, EM_I64, 1, &four, NULL);
    st[k] = sd.be->binary(0, EM_FMOD, &vo, &vx, &vy);
    dget(&sd, r[k], dout, 32);
    side_free(&sd);
  }
  expect(st[0] == EM_OK && st[1] == EM_OK && memcmp(r[0], r[1], 32) == 0 && r[0][0] == 0 && r[0][1] == -1 &&
             r[0][2] == 1 && r[0][3] == INT64_MIN % 3,
         "binary fmod int64 edges agree (%d, %d): %lld %lld %lld %lld", st[0], st[1], (long long)r[0][0],
         (long long)r[0][1], (long long)r[0][2], (long long)r[0][3]);
}

static void test_where(void) {
  const int64_t shape[3] = {4, 5, 6}, cs[3] = {6, 0, 1}, as[3] = {0, 6, 1}, bs[3] = {5, 1, 0};
  const em_dtype dts[3] = {EM_F32, EM_I64, EM_BF16};
  for (int di = 0; di < 3; di++) {
    em_dtype dt = dts[di];
    void *c = host_rand(EM_BOOL, 24, 0, 1), *a = host_rand(dt, 30, -9, 9), *b = host_rand(dt, 20, -9, 9);
    void *out[2] = {malloc(120 * 8), malloc(120 * 8)};
    em_status st[2];
    for (int k = 0; k < 2; k++) {
      side sd = {.be = k ? g_cpu : g_gpu};
      size_t e = em_dtype_size(dt);
      void *dc = dput(&sd, c, 24), *da = dput(&sd, a, 30 * e), *db = dput(&sd, b, 20 * e);
      void *dout = dput(&sd, NULL, 120 * e);
      em_kview vo = kview(dout, dt, 3, shape, NULL), vc = kview(dc, EM_BOOL, 3, shape, cs),
               va = kview(da, dt, 3, shape, as), vb = kview(db, dt, 3, shape, bs);
      st[k] = sd.be->where(0, &vo, &vc, &va, &vb);
      dget(&sd, out[k], dout, 120 * e);
      side_free(&sd);
    }
    char name[64];
    snprintf(name, sizeof name, "where %s (broadcast)", em_dtype_name(dt));
    expect_close(name, st[0], st[1], compare(dt, out[0], dt, out[1], 120, EXACT));
    free(c), free(a), free(b), free(out[0]), free(out[1]);
  }
}

void test_elementwise(void) {
  test_copy_fill();
  for (int op = 0; op < EM_NUNARY; op++) {
    if (op == EM_NOT) {
      unary_case(op, EM_BOOL);
      continue;
    }
    unary_case(op, EM_F32);
    unary_case(op, EM_F64);
    unary_case(op, EM_BF16);
    if (em_unary_takes_int64(op)) unary_case(op, EM_I64);
  }
  for (int op = 0; op < EM_NBINARY; op++) {
    if (op >= EM_AND && op <= EM_XOR) {
      binary_case(op, EM_BOOL);
      continue;
    }
    binary_case(op, EM_F32);
    binary_case(op, EM_F64);
    binary_case(op, EM_I64);
    if (op <= EM_MINIMUM || op == EM_FMOD) binary_case(op, EM_BF16);
    if (op >= EM_MAXIMUM && op != EM_FMOD) binary_case(op, EM_BOOL);
  }
  test_binary_errors();
  test_where();
}

/* ------------------------------------------------------------------ */
/* reductions                                                          */
/* ------------------------------------------------------------------ */

static const char *const REDUCE[5] = {"sum", "mean", "max", "min", "var"};

static void reduce_case(int op, em_dtype dt, int64_t outer, int64_t n, int64_t inner, int special) {
  em_dtype cdt = dt == EM_BF16 ? EM_F32 : dt;
  int64_t total = outer * n * inner, m = outer * inner;
  void *x = host_rand(dt, total, dt == EM_I64 ? -1000 : -2, dt == EM_I64 ? 1000 : 2);
  if (special == 1 && dt != EM_I64) /* NaNs: the first one must win max and min */
    for (int64_t e = 0; e < total; e += 37) {
      if (dt == EM_F32) ((float *)x)[e] = NAN;
      else if (dt == EM_F64) ((double *)x)[e] = NAN;
      else ((uint16_t *)x)[e] = 0x7fc0;
    }
  if (special == 2) memset(x, 0, (size_t)total * em_dtype_size(dt)); /* ties: position 0 wins */
  void *xc = dt == EM_BF16 ? bf16_widen(x, total) : x;
  void *out[2] = {malloc(m * 8 + 8), malloc(m * 8 + 8)};
  int64_t *idx[2] = {malloc(m * 8 + 8), malloc(m * 8 + 8)};
  bool ext = op == EM_RED_MAX || op == EM_RED_MIN;
  em_status st[2];
  for (int k = 0; k < 2; k++) {
    side sd = {.be = k ? g_cpu : g_gpu};
    em_dtype t = k ? cdt : dt;
    void *dx = dput(&sd, k ? xc : x, total * em_dtype_size(t));
    void *dout = dput(&sd, NULL, m * em_dtype_size(t)), *didx = ext ? dput(&sd, NULL, m * 8) : NULL;
    st[k] = sd.be->reduce(0, op, t, dout, didx, dx, outer, n, inner, op == EM_RED_VAR ? 1 : 0);
    dget(&sd, out[k], dout, m * em_dtype_size(t));
    if (ext) dget(&sd, idx[k], didx, m * 8);
    side_free(&sd);
  }
  double tol = dt == EM_F64 ? 1e-12 : (dt == EM_BF16 ? 1e-2 : 2e-6);
  if (dt == EM_I64 || ext) tol = 1e-300;
  char name[96];
  snprintf(name, sizeof name, "reduce %s %s [%lld, %lld, %lld]%s", REDUCE[op], em_dtype_name(dt),
           (long long)outer, (long long)n, (long long)inner,
           special == 1 ? " with NaN" : special == 2 ? " all ties" : "");
  double w = compare(dt, out[0], cdt, out[1], m, tol, ext || dt == EM_I64 ? 0 : tol);
  if (ext && !st[0] && !st[1]) w = fmax(w, compare(EM_I64, idx[0], EM_I64, idx[1], m, EXACT));
  expect_close(name, st[0], st[1], w);
  if (xc != x) free(xc);
  free(x), free(out[0]), free(out[1]), free(idx[0]), free(idx[1]);
}

void test_reduce(void) {
  const int64_t shapes[][3] = {{3, 7, 5}, {2, 1000, 1}, {1, 300000, 1}, {5, 3000, 40}, {1, 5, 70}};
  for (int si = 0; si < 5; si++)
    for (int op = 0; op <= EM_RED_VAR; op++) {
      const int64_t *s = shapes[si];
      reduce_case(op, EM_F32, s[0], s[1], s[2], 0);
      reduce_case(op, EM_F64, s[0], s[1], s[2], 0);
      if (si < 2) reduce_case(op, EM_BF16, s[0], s[1], s[2], 0);
      if (op != EM_RED_MEAN && op != EM_RED_VAR) reduce_case(op, EM_I64, s[0], s[1], s[2], 0);
    }
  reduce_case(EM_RED_MAX, EM_F32, 4, 5000, 3, 1);
  reduce_case(EM_RED_MIN, EM_F64, 1, 200000, 1, 1);
  reduce_case(EM_RED_MAX, EM_F32, 3, 70000, 2, 2);
  reduce_case(EM_RED_MIN, EM_I64, 2, 9, 33, 2);
  reduce_case(EM_RED_SUM, EM_F32, 4, 0, 3, 0);
}

/* ------------------------------------------------------------------ */
/* matmul                                                              */
/* ------------------------------------------------------------------ */

static void gemm_case(em_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t kk,
                      int64_t batch, bool bcast_b, double alpha, double beta) {
  em_dtype cdt = dt == EM_BF16 ? EM_F32 : dt;
  int64_t sa = m * kk, sb = bcast_b ? 0 : kk * n, sc = m * n;
  int64_t na = sa * batch, nb = bcast_b ? kk * n : sb * batch, nc = sc * batch;
  void *a = host_rand(dt, na, -1, 1), *b = host_rand(dt, nb, -1, 1), *c = host_rand(dt, nc, -1, 1);
  void *ac = a, *bc = b, *cc = c;
  if (dt == EM_BF16) ac = bf16_widen(a, na), bc = bf16_widen(b, nb), cc = bf16_widen(c, nc);
  void *out[2] = {malloc(nc * 8), malloc(nc * 8)};
  em_status st[2];
  for (int k = 0; k < 2; k++) {
    side sd = {.be = k ? g_cpu : g_gpu};
    em_dtype t = k ? cdt : dt;
    size_t e = em_dtype_size(t);
    void *da = dput(&sd, k ? ac : a, na * e), *db = dput(&sd, k ? bc : b, nb * e);
    void *dc = dput(&sd, k ? cc : c, nc * e);
    int64_t lda = ta ? m : kk, ldb = tb ? kk : n;
    st[k] = sd.be->gemm(0, t, ta, tb, m, n, kk, alpha, da, lda > 1 ? lda : 1, sa, db,
                        ldb > 1 ? ldb : 1, sb, beta, dc, n, sc, batch);
    dget(&sd, out[k], dc, nc * e);
    side_free(&sd);
  }
  double tol = dt == EM_F64 ? 1e-12 : (dt == EM_BF16 ? 2e-2 : 2e-5);
  char name[128];
  snprintf(name, sizeof name, "gemm %s ta=%d tb=%d m=%lld n=%lld k=%lld batch=%lld%s", em_dtype_name(dt),
           ta, tb, (long long)m, (long long)n, (long long)kk, (long long)batch,
           bcast_b ? " (B broadcast)" : "");
  expect_close(name, st[0], st[1], compare(dt, out[0], cdt, out[1], nc, tol, tol));
  if (dt == EM_BF16) free(ac), free(bc), free(cc);
  free(a), free(b), free(c), free(out[0]), free(out[1]);
}

void test_gemm(void) {
  for (int t = 0; t < 4; t++) {
    gemm_case(EM_F32, t & 1, t & 2, 33, 17, 65, 3, false, 1.5, 0.5);
    gemm_case(EM_F64, t & 1, t & 2, 33, 17, 65, 3, t == 3, 1.0, 0.0);
    gemm_case(EM_BF16, t & 1, t & 2, 40, 24, 72, 2, false, 1.0, 0.0);
  }
  gemm_case(EM_F32, false, false, 256, 256, 256, 1, false, 1.0, 0.0);
  gemm_case(EM_F32, false, true, 5, 7, 0, 2, false, 1.0, 0.5); /* k = 0: C = beta C */
}
