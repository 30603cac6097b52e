/*
** test_ops_conv.c -- em_conv2d on the CPU backend's kernel (oneDNN's
** convolution primitives) against direct loops in double precision:
** forward, and the input, weight and bias gradients of one backward with
** an irregular upstream gradient, over strides, asymmetric padding,
** dilation, groups, a 1-d shape (height 1) and no bias; bfloat16 under
** autocast; float64 declined with EM_ERR_UNSUPPORTED (the caller composes
** it: nn/_conv.lua, whose float64 gradchecks are in nn_conv_spec.lua); the
** route counts; bad calls named. float32 sums of at most a few hundred
** products here: 1e-5 relative.
*/
#include "ember.h"
#include "tap.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static em_device cpu;

typedef struct conv_case {
  const char *name;
  int64_t N, C, H, W, O, kh, kw, stride[2], pad[4], dil[2], groups;
  bool bias;
} conv_case;

static int64_t out_size(int64_t n, int64_t k, int64_t s, int64_t lo, int64_t hi, int64_t d) {
  return (n + lo + hi - d * (k - 1) - 1) / s + 1;
}

static double *irregular(int64_t n, double seed) {
  double *v = malloc(sizeof(double) * (size_t)n);
  for (int64_t i = 0; i < n; i++) v[i] = sin(1.3 * (double)i + seed) + 0.05 * (double)(i % 7);
  return v;
}

static em_tensor *f32(int ndim, const int64_t *shape, const double *v, bool grad) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  float *f = malloc(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++) f[i] = (float)v[i];
  em_tensor *t = NULL;
  if (em_from_host(&t, ndim, shape, EM_F32, f, cpu)) {
    printf("# from_host failed: %s\n", em_error_message());
    exit(2);
  }
  free(f);
  if (grad) em_set_requires_grad(t, true);
  return t;
}

/* max |got - want| / max |want| over n values of t (any float dtype). */
static double rel_err(em_tensor *t, const double *want, int64_t n) {
  if (!t || em_numel(t) != n) return INFINITY;
  em_tensor *c = NULL;
  if (em_to_dtype(&c, t, EM_F64)) return INFINITY;
  double *got = malloc(sizeof(double) * (size_t)n), err = 0, scale = 1e-30;
  em_to_host(c, got);
  em_release(c);
  for (int64_t i = 0; i < n; i++) {
    err = fmax(err, fabs(got[i] - want[i]));
    scale = fmax(scale, fabs(want[i]));
  }
  free(got);
  return err / scale;
}

/* y, dx, dw, db of case c by direct loops, from x, w, b and dy. */
static void reference(const conv_case *c, int64_t Ho, int64_t Wo, const double *x, const double *w,
                      const double *b, const double *dy, double *y, double *dx, double *dw,
                      double *db) {
  const int64_t cg = c->C / c->groups, og = c->O / c->groups;
  memset(dx, 0, sizeof(double) * (size_t)(c->N * c->C * c->H * c->W));
  memset(dw, 0, sizeof(double) * (size_t)(c->O * cg * c->kh * c->kw));
  memset(db, 0, sizeof(double) * (size_t)c->O);
  for (int64_t n = 0; n < c->N; n++)
    for (int64_t o = 0; o < c->O; o++)
      for (int64_t i = 0; i < Ho; i++)
        for (int64_t j = 0; j < Wo; j++) {
          const int64_t yi = ((n * c->O + o) * Ho + i) * Wo + j;
          double acc = c->bias ? b[o] : 0;
          db[o] += dy[yi];
          for (int64_t ci = 0; ci < cg; ci++)
            for (int64_t p = 0; p < c->kh; p++)
              for (int64_t q = 0; q < c->kw; q++) {
                const int64_t h = i * c->stride[0] - c->pad[0] + p * c->dil[0];
                const int64_t v = j * c->stride[1] - c->pad[2] + q * c->dil[1];
                if (h < 0 || h >= c->H || v < 0 || v >= c->W) continue;
                const int64_t ch = (o / og) * cg + ci;
                const int64_t xi = ((n * c->C + ch) * c->H + h) * c->W + v;
                const int64_t wi = ((o * cg + ci) * c->kh + p) * c->kw + q;
                acc += x[xi] * w[wi];
                dx[xi] += dy[yi] * w[wi];
                dw[wi] += dy[yi] * x[xi];
              }
          y[yi] = acc;
        }
}

static void run_case(const conv_case *base, const char *layout) {
  conv_case cc = *base, *c = &cc;
  /* a batch of its own per layout: new shapes, so new primitives on it */
  c->N += layout ? (strcmp(layout, "plain") == 0 ? 1 : 2) : 0;
  const int64_t Ho = out_size(c->H, c->kh, c->stride[0], c->pad[0], c->pad[1], c->dil[0]);
  const int64_t Wo = out_size(c->W, c->kw, c->stride[1], c->pad[2], c->pad[3], c->dil[1]);
  const int64_t xs[4] = {c->N, c->C, c->H, c->W}, ws[4] = {c->O, c->C / c->groups, c->kh, c->kw};
  const int64_t ys[4] = {c->N, c->O, Ho, Wo};
  const int64_t nx = c->N * c->C * c->H * c->W, nw = ws[0] * ws[1] * ws[2] * ws[3];
  const int64_t ny = c->N * c->O * Ho * Wo;
  double *x = irregular(nx, 0.1), *w = irregular(nw, 1.7), *b = irregular(c->O, 2.9);
  double *dy = irregular(ny, 4.2);
  /* values exactly representable in float32, so the reference sees the same inputs */
  for (int64_t i = 0; i < nx; i++) x[i] = (float)x[i];
  for (int64_t i = 0; i < nw; i++) w[i] = (float)w[i];
  for (int64_t i = 0; i < c->O; i++) b[i] = (float)b[i];
  for (int64_t i = 0; i < ny; i++) dy[i] = (float)dy[i];
  double *y = malloc(sizeof(double) * (size_t)ny), *dx = malloc(sizeof(double) * (size_t)nx);
  double *dw = malloc(sizeof(double) * (size_t)nw), *db = malloc(sizeof(double) * (size_t)c->O);
  reference(c, Ho, Wo, x, w, b, dy, y, dx, dw, db);

  em_tensor *tx = f32(4, xs, x, true), *tw = f32(4, ws, w, true);
  em_tensor *tb = c->bias ? f32(1, &c->O, b, true) : NULL, *tdy = f32(4, ys, dy, false);
  em_tensor *ty = NULL;
  uint64_t k0, c0, k1, c1;
  em_conv_route_counts(&k0, &c0);
  em_status s = em_conv2d(&ty, tx, tw, tb, c->stride, c->pad, c->dil, c->groups);
  em_conv_route_counts(&k1, &c1);
  char nm[200], name[100];
  snprintf(name, sizeof name, "%s%s%s", c->name, layout ? ", layout " : "", layout ? layout : "");
  snprintf(nm, sizeof nm, "%s: forward runs on the kernel (%s)", name, s ? em_error_message() : "ok");
  CHECK(s == EM_OK && k1 == k0 + 1 && c1 == c0, nm);
  if (!s) {
    snprintf(nm, sizeof nm, "%s: output", name);
    CHECK(ty->ndim == 4 && ty->shape[2] == Ho && ty->shape[3] == Wo && rel_err(ty, y, ny) < 1e-5, nm);
    s = em_backward(ty, tdy, false);
    snprintf(nm, sizeof nm, "%s: backward (%s)", name, s ? em_error_message() : "ok");
    CHECK(s == EM_OK, nm);
    snprintf(nm, sizeof nm, "%s: grad x", name);
    CHECK(rel_err(tx->grad, dx, nx) < 1e-5, nm);
    snprintf(nm, sizeof nm, "%s: grad weight", name);
    CHECK(rel_err(tw->grad, dw, nw) < 1e-5, nm);
    if (tb) {
      snprintf(nm, sizeof nm, "%s: grad bias", name);
      CHECK(rel_err(tb->grad, db, c->O) < 1e-5, nm);
    }
  }
  em_release(ty), em_release(tx), em_release(tw), em_release(tb), em_release(tdy);
  free(x), free(w), free(b), free(dy), free(y), free(dx), free(dw), free(db);
}

static void test_cases(void) {
  static const conv_case cases[] = {
    {"3x3 pad 1", 2, 3, 6, 5, 4, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true},
    {"stride 2, asymmetric padding", 2, 3, 7, 6, 4, 3, 2, {2, 3}, {0, 2, 1, 0}, {1, 1}, 1, true},
    {"dilation 2", 1, 2, 7, 7, 3, 3, 3, {1, 1}, {1, 1, 1, 1}, {2, 2}, 1, true},
    {"groups 2, no bias", 2, 4, 5, 5, 6, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2, false},
    {"depthwise", 2, 4, 5, 6, 4, 3, 3, {2, 1}, {1, 1, 0, 0}, {1, 1}, 4, true},
    {"1-d as height 1", 2, 3, 1, 9, 4, 1, 3, {1, 2}, {0, 0, 1, 1}, {1, 1}, 1, true},
    {"patch 4x4 stride 4", 2, 3, 8, 8, 5, 4, 4, {4, 4}, {0, 0, 0, 0}, {1, 1}, 1, true},
    {"32 channels", 2, 32, 6, 6, 16, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true},
  };
  /* few channels (under oneDNN's block of 16) have two layouts, oneDNN's
  ** blocked one and ember's plain one, and the first call times both
  ** (backends/cpu/cpu_conv.c); EMBER_CONV_LAYOUT forces one, so each is
  ** checked here whichever this machine picks */
  const char *layouts[3] = {NULL, "plain", "blocked"};
  const char *was = getenv("EMBER_CONV_LAYOUT");
  char *saved = was ? strdup(was) : NULL;
  const int threads = em_get_num_threads();
  for (int l = 0; l < 3; l++) {
    if (layouts[l]) setenv("EMBER_CONV_LAYOUT", layouts[l], 1);
    else unsetenv("EMBER_CONV_LAYOUT");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i], layouts[l]);
  }
  if (saved) setenv("EMBER_CONV_LAYOUT", saved, 1);
  else unsetenv("EMBER_CONV_LAYOUT");
  free(saved);
  /* small reorders run on the calling thread alone, then give the team back */
  CHECK(em_get_num_threads() == threads, "the thread count is kept across convolutions");
}

static void test_dtypes(void) {
  const int64_t xs[4] = {1, 2, 5, 5}, ws[4] = {3, 2, 3, 3};
  const int64_t st[2] = {1, 1}, pad[4] = {1, 1, 1, 1}, dil[2] = {1, 1};
  double *xv = irregular(50, 0.3), *wv = irregular(54, 0.9);
  em_tensor *x = f32(4, xs, xv, false), *w = f32(4, ws, wv, false), *x64 = NULL, *w64 = NULL;
  em_tensor *y = NULL, *yb = NULL;
  CHECK_OK(em_to_dtype(&x64, x, EM_F64), "float64 input");
  CHECK_OK(em_to_dtype(&w64, w, EM_F64), "float64 weight");
  CHECK_ERR(em_conv2d(&y, x64, w64, NULL, st, pad, dil, 1), EM_ERR_UNSUPPORTED, "float64",
            "float64 is declined (the caller composes it)");
  CHECK(y == NULL, "no output when declined");
  CHECK_OK(em_conv2d(&y, x, w, NULL, st, pad, dil, 1), "float32 reference");
  bool was;
  em_dtype wdt;
  CHECK_OK(em_autocast_set(true, EM_BF16, &was, &wdt), "autocast on");
  em_status s = em_conv2d(&yb, x, w, NULL, st, pad, dil, 1);
  em_autocast_set(was, wdt, NULL, NULL);
  /* a CPU without a bfloat16 convolution in oneDNN (an older one, or
  ** valgrind, which hides AVX-512) declines: the module composes it */
  if (s == EM_ERR_UNSUPPORTED) {
    printf("# no bfloat16 convolution on this CPU: %s\n", em_error_message());
    CHECK(yb == NULL, "declined without an output (no bfloat16 kernel here)");
    s = EM_ERR_UNSUPPORTED;
  } else {
    if (s != EM_OK) printf("#   error %d: %s\n", (int)s, em_error_message());
    else if (yb->dtype != EM_BF16) printf("#   ran in %s\n", em_dtype_name(yb->dtype));
    CHECK(s == EM_OK && yb->dtype == EM_BF16, "under autocast the convolution runs in bfloat16");
  }
  if (!s && y) {
    double *want = malloc(sizeof(double) * 75);
    em_tensor *y64 = NULL;
    em_to_dtype(&y64, y, EM_F64);
    em_to_host(y64, want);
    CHECK(rel_err(yb, want, 75) < 2e-2, "bfloat16 within bfloat16's rounding of float32");
    em_release(y64);
    free(want);
  }
  em_release(x), em_release(w), em_release(x64), em_release(w64), em_release(y), em_release(yb);
  free(xv), free(wv);
}

/* The values of x, w, b and dy as bfloat16 gives them to the kernel, back
** in x, w, b and dy (for the reference); returns dy rounded to bfloat16,
** which the caller releases. */
static em_tensor *round_inputs_bf16(em_tensor *tx, double *x, em_tensor *tw, double *w, em_tensor *tb,
                                    double *b, em_tensor *tdy, double *dy) {
  const struct { em_tensor *t; double *v; } in[4] = {{tx, x}, {tw, w}, {tb, b}, {tdy, dy}};
  em_tensor *dyb = NULL;
  for (int i = 0; i < 4; i++) {
    em_tensor *r = NULL, *r64 = NULL;
    em_to_dtype(&r, in[i].t, EM_BF16);
    em_to_dtype(&r64, r, EM_F64);
    em_to_host(r64, in[i].v);
    if (i == 3) dyb = r;
    else em_release(r);
    em_release(r64);
  }
  return dyb;
}

/* bfloat16 under autocast on channels in whole blocks of 16, large enough
** that x, y, dy and dx go through cpu_conv.c's own NCHW <-> nChw16c
** transposer (blk16), on a height * width that leaves a tail (30 * 30 is
** not a multiple of 8): output and every gradient within bfloat16's
** rounding of the direct loops. */
static void test_bf16_blocks(void) {
  const conv_case c = {"bf16 blocks", 4, 32, 30, 30, 16, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true};
  const int64_t Ho = 30, Wo = 30, nx = 4 * 32 * 900, nw = 16 * 32 * 9, ny = 4 * 16 * 900;
  const int64_t xs[4] = {4, 32, 30, 30}, ws[4] = {16, 32, 3, 3}, ys[4] = {4, 16, 30, 30};
  double *x = irregular(nx, 0.4), *w = irregular(nw, 1.1), *b = irregular(16, 2.3), *dy = irregular(ny, 3.3);
  for (int64_t i = 0; i < nw; i++) w[i] *= 0.1;
  double *y = malloc(sizeof(double) * (size_t)ny), *dx = malloc(sizeof(double) * (size_t)nx);
  double *dw = malloc(sizeof(double) * (size_t)nw), *db = malloc(sizeof(double) * 16);
  /* the reference on the bfloat16-rounded inputs, as the kernel sees them */
  em_tensor *tx = f32(4, xs, x, true), *tw = f32(4, ws, w, true), *tb = f32(1, &c.O, b, true);
  em_tensor *dy32 = f32(4, ys, dy, false), *tdy = NULL, *ty = NULL;
  tdy = round_inputs_bf16(tx, x, tw, w, tb, b, dy32, dy);
  reference(&c, Ho, Wo, x, w, b, dy, y, dx, dw, db);
  bool was;
  em_dtype wdt;
  em_autocast_set(true, EM_BF16, &was, &wdt);
  em_status s = em_conv2d(&ty, tx, tw, tb, c.stride, c.pad, c.dil, 1);
  em_autocast_set(was, wdt, NULL, NULL);
  if (s == EM_ERR_UNSUPPORTED) {
    printf("ok - # SKIP no bfloat16 convolution on this CPU: %s\n", em_error_message());
  } else {
    CHECK(s == EM_OK && ty->dtype == EM_BF16, "bf16 blocks: runs in bfloat16");
    if (!s) {
      CHECK(rel_err(ty, y, ny) < 1e-2, "bf16 blocks: output");
      CHECK_OK(em_backward(ty, tdy, false), "bf16 blocks: backward");
      CHECK(rel_err(tx->grad, dx, nx) < 1e-2, "bf16 blocks: grad x");
      CHECK(rel_err(tw->grad, dw, nw) < 1e-2, "bf16 blocks: grad weight");
      CHECK(rel_err(tb->grad, db, 16) < 1e-2, "bf16 blocks: grad bias");
    }
  }
  em_release(ty), em_release(tx), em_release(tw), em_release(tb), em_release(tdy), em_release(dy32);
  free(x), free(w), free(b), free(dy), free(y), free(dx), free(dw), free(db);
}

/* bfloat16 under autocast with few input channels (a CoordConv stem's 5):
** oneDNN 2.6 has no direct bfloat16 weight gradient for it, so cpu_conv.c
** also times one in float32 (widened inputs, gradients rounded once).
** EMBER_CONV_LAYOUT=float32 forces that candidate on this shape's fresh
** cache entry, and again without it (a second shape) the timed pick: the
** weight and bias gradients within bfloat16's rounding of the direct loops
** on the rounded inputs, either way. */
static void few_channels_case(int64_t N, const char *force) {
  const conv_case c = {"bf16 few channels", N, 5, 15, 15, 8, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1, true};
  const int64_t Ho = 8, Wo = 8, nx = N * 5 * 225, nw = 8 * 5 * 9, ny = N * 8 * 64;
  const int64_t xs[4] = {N, 5, 15, 15}, ws[4] = {8, 5, 3, 3}, ys[4] = {N, 8, 8, 8};
  double *x = irregular(nx, 0.7), *w = irregular(nw, 1.3), *b = irregular(8, 2.1), *dy = irregular(ny, 2.9);
  double *y = malloc(sizeof(double) * (size_t)ny), *dx = malloc(sizeof(double) * (size_t)nx);
  double *dw = malloc(sizeof(double) * (size_t)nw), *db = malloc(sizeof(double) * 8);
  em_tensor *tx = f32(4, xs, x, false), *tw = f32(4, ws, w, true), *tb = f32(1, &c.O, b, true);
  em_tensor *dy32 = f32(4, ys, dy, false), *tdy = NULL, *ty = NULL;
  tdy = round_inputs_bf16(tx, x, tw, w, tb, b, dy32, dy);
  reference(&c, Ho, Wo, x, w, b, dy, y, dx, dw, db);
  const char *was_env = getenv("EMBER_CONV_LAYOUT");
  char *saved = was_env ? strdup(was_env) : NULL;
  if (force) setenv("EMBER_CONV_LAYOUT", force, 1);
  else unsetenv("EMBER_CONV_LAYOUT");
  bool was;
  em_dtype wdt;
  em_autocast_set(true, EM_BF16, &was, &wdt);
  em_status s = em_conv2d(&ty, tx, tw, tb, c.stride, c.pad, c.dil, 1);
  em_autocast_set(was, wdt, NULL, NULL);
  const char *how = force ? "float32 weight gradient (forced)" : "timed pick";
  char nm[4][96];
  const char *what[4] = {"runs in bfloat16", "output", "grad weight", "grad bias"};
  for (int i = 0; i < 4; i++) snprintf(nm[i], sizeof nm[i], "bf16 few channels, %s: %s", how, what[i]);
  if (s == EM_ERR_UNSUPPORTED) {
    printf("ok - # SKIP no bfloat16 convolution on this CPU: %s\n", em_error_message());
  } else {
    CHECK(s == EM_OK && ty->dtype == EM_BF16, nm[0]);
    if (!s) {
      CHECK(rel_err(ty, y, ny) < 1e-2, nm[1]);
      CHECK_OK(em_backward(ty, tdy, false), "bf16 few channels: backward");
      CHECK(tw->grad && tw->grad->dtype == EM_F32 && rel_err(tw->grad, dw, nw) < 1e-2, nm[2]);
      CHECK(tb->grad && rel_err(tb->grad, db, 8) < 1e-2, nm[3]);
    }
  }
  if (saved) setenv("EMBER_CONV_LAYOUT", saved, 1);
  else unsetenv("EMBER_CONV_LAYOUT");
  free(saved);
  em_release(ty), em_release(tx), em_release(tw), em_release(tb), em_release(tdy), em_release(dy32);
  free(x), free(w), free(b), free(dy), free(y), free(dx), free(dw), free(db);
}

static void test_bf16_few_channels(void) {
  few_channels_case(3, "float32");
  few_channels_case(4, NULL);
}

static void test_errors(void) {
  const int64_t xs[4] = {2, 4, 5, 5}, ws[4] = {6, 2, 3, 3}, bs[1] = {5}, x3[3] = {4, 5, 5};
  const int64_t st[2] = {1, 1}, pad[4] = {0, 0, 0, 0}, dil[2] = {1, 1}, dil3[2] = {3, 1};
  const int64_t st0[2] = {0, 1};
  double *v = irregular(200, 0.5);
  em_tensor *x = f32(4, xs, v, false), *w = f32(4, ws, v, false), *b = f32(1, bs, v, false);
  em_tensor *xb = f32(3, x3, v, false), *y = NULL;
  CHECK_ERR(em_conv2d(&y, x, w, NULL, st, pad, dil, 3), EM_ERR_SHAPE,
            "conv2d: input [2, 4, 5, 5] does not fit weight [6, 2, 3, 3] with groups = 3",
            "groups that do not fit the channels");
  CHECK_ERR(em_conv2d(&y, x, w, NULL, st, pad, dil3, 2), EM_ERR_SHAPE,
            "is larger than the padded input (5) along dim 3", "a kernel larger than the padded input");
  CHECK_ERR(em_conv2d(&y, x, w, b, st, pad, dil, 2), EM_ERR_SHAPE, "bias has shape [5], expected [6]",
            "a bias of the wrong size");
  CHECK_ERR(em_conv2d(&y, xb, w, NULL, st, pad, dil, 2), EM_ERR_SHAPE, "expected a 4-d input",
            "a 3-d input");
  CHECK_ERR(em_conv2d(&y, x, w, NULL, st0, pad, dil, 2), EM_ERR_ARG, "strides and dilations must be >= 1",
            "stride 0");
  CHECK(y == NULL, "no output after errors");
  em_release(x), em_release(w), em_release(b), em_release(xb);
  free(v);
}

int main(void) {
  if (em_cpu_device(&cpu)) {
    printf("not ok 1 - cpu device: %s\n", em_error_message());
    return 1;
  }
  test_cases();
  test_dtypes();
  test_bf16_blocks();
  test_bf16_few_channels();
  test_errors();
  return tap_done();
}
