/*
** gradcheck.h -- a float64 central-difference gradient check for the C
** tests (header only).
**
** For an op under test written as f(inputs) -> tensor, gradcheck() takes
** the scalar L = sum(f(inputs) * W), with W fixed pseudo-random weights of
** f's output shape (so every output element counts, each differently),
** runs em_backward on it, and compares each input's .grad, element by
** element, with (L(x + h) - L(x - h)) / 2h. Only inputs that require grad
** are checked; they must be float64 leaves (other inputs -- masks, index
** tensors, inputs deliberately without grad -- pass through untouched).
** Inputs are perturbed through em_copy_ under no-grad, so any layout and
** any device works. Mismatches are printed as "# ..." lines.
**
**   static em_status f_mul(em_tensor **out, em_tensor *const *in, void *ud) {
**     (void)ud; return em_mul(out, in[0], in[1]);
**   }
**   CHECK(gradcheck(f_mul, 2, in, NULL, NULL), "mul gradcheck");
*/
#ifndef EMBER_GRADCHECK_H
#define EMBER_GRADCHECK_H

#include "ember.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef em_status (*gc_fn)(em_tensor **out, em_tensor *const *in, void *ud);

/* Zero fields take the defaults: h 1e-6, atol 1e-6, rtol 1e-5. */
typedef struct gc_opts {
  double h, atol, rtol;
} gc_opts;

/* Weight i of W: irregular values in [-1.5, -0.5] u [0.5, 1.5]. */
static double gc_weight(int64_t i) {
  uint64_t z = (uint64_t)i * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  double u = (double)(z >> 11) / 9007199254740992.0; /* [0, 1) */
  return (z & 1) ? 0.5 + u : -0.5 - u;
}

/* A tensor's elements as doubles, malloc'd (NULL on failure). */
static double *gc_host(const em_tensor *t) {
  int64_t n = em_numel(t);
  double *v = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
  em_tensor *c = NULL;
  if (!v) return NULL;
  if (t->dtype != EM_F64) {
    if (em_to_dtype(&c, (em_tensor *)t, EM_F64) || em_to_host(c, v)) {
      em_release(c);
      free(v);
      return NULL;
    }
    em_release(c);
  } else if (em_to_host(t, v)) {
    free(v);
    return NULL;
  }
  return v;
}

/* L = sum(y * W) computed on the host, in double. */
static bool gc_loss(gc_fn f, em_tensor *const *in, void *ud, double *out) {
  em_tensor *y = NULL;
  if (f(&y, in, ud)) {
    printf("# gradcheck: forward failed: %s\n", em_error_message());
    return false;
  }
  double *v = gc_host(y), acc = 0;
  if (!v) {
    printf("# gradcheck: reading the output failed: %s\n", em_error_message());
    em_release(y);
    return false;
  }
  for (int64_t i = 0; i < em_numel(y); i++) acc += v[i] * gc_weight(i);
  free(v);
  em_release(y);
  *out = acc;
  return true;
}

/* Runs L through autograd; leaves the gradients in the inputs' .grad. */
static bool gc_backward(gc_fn f, int n, em_tensor *const *in, void *ud) {
  em_tensor *y = NULL, *w = NULL, *yw = NULL, *loss = NULL;
  bool ok = false;
  for (int i = 0; i < n; i++)
    if (in[i] && in[i]->grad) {
      em_release(in[i]->grad);
      in[i]->grad = NULL;
    }
  if (f(&y, in, ud)) {
    printf("# gradcheck: forward failed: %s\n", em_error_message());
    return false;
  }
  if (y->dtype != EM_F64 || !y->requires_grad) {
    printf("# gradcheck: the output must be float64 and require grad (dtype %s, requires_grad %d)\n",
           em_dtype_name(y->dtype), (int)y->requires_grad);
    em_release(y);
    return false;
  }
  int64_t ny = em_numel(y);
  double *wv = malloc(sizeof(double) * (size_t)(ny > 0 ? ny : 1));
  for (int64_t i = 0; i < ny; i++) wv[i] = gc_weight(i);
  if (em_from_host(&w, y->ndim, y->shape, EM_F64, wv, y->device) || em_mul(&yw, y, w) ||
      em_sum(&loss, yw, 0, NULL, false) || em_backward(loss, NULL, false))
    printf("# gradcheck: backward failed: %s\n", em_error_message());
  else
    ok = true;
  free(wv);
  em_release(y);
  em_release(w);
  em_release(yw);
  em_release(loss);
  return ok;
}

/* Sets element j of x (through em_copy_, under no-grad). */
static bool gc_set(em_tensor *x, double *xv, int64_t j, double value) {
  em_tensor *src = NULL;
  double keep = xv[j];
  xv[j] = value;
  bool ok = !em_from_host(&src, x->ndim, x->shape, EM_F64, xv, x->device) && !em_copy_(x, src);
  xv[j] = keep;
  em_release(src);
  if (!ok) printf("# gradcheck: perturbing an input failed: %s\n", em_error_message());
  return ok;
}

static bool gradcheck(gc_fn f, int n, em_tensor *const *in, void *ud, const gc_opts *opts) {
  double h = opts && opts->h > 0 ? opts->h : 1e-6;
  double atol = opts && opts->atol > 0 ? opts->atol : 1e-6;
  double rtol = opts && opts->rtol > 0 ? opts->rtol : 1e-5;
  bool ok = true, any = false;
  if (!gc_backward(f, n, in, ud)) return false;
  bool prev = em_set_grad_enabled(false);
  for (int k = 0; k < n && ok; k++) {
    em_tensor *x = in[k];
    if (!x || !x->requires_grad) continue;
    any = true;
    if (x->dtype != EM_F64 || x->grad_fn) {
      printf("# gradcheck: input %d must be a float64 leaf\n", k + 1);
      ok = false;
      break;
    }
    int64_t nx = em_numel(x);
    double *xv = gc_host(x), *g = x->grad ? gc_host(x->grad) : calloc((size_t)(nx ? nx : 1), sizeof *g);
    if (!xv || !g) {
      printf("# gradcheck: reading input %d or its gradient failed\n", k + 1);
      ok = false;
    }
    for (int64_t j = 0; ok && j < nx; j++) {
      double lp, lm, x0 = xv[j];
      ok = gc_set(x, xv, j, x0 + h) && gc_loss(f, in, ud, &lp) && gc_set(x, xv, j, x0 - h) &&
           gc_loss(f, in, ud, &lm) && gc_set(x, xv, j, x0);
      if (!ok) break;
      double num = (lp - lm) / (2 * h);
      if (!(fabs(num - g[j]) <= atol + rtol * fabs(num))) {
        printf("# gradcheck: input %d element %lld: autograd %.10g, numeric %.10g%s\n", k + 1,
               (long long)j, g[j], num, x->grad ? "" : " (no gradient reached the input)");
        ok = false;
      }
    }
    free(xv);
    free(g);
  }
  em_set_grad_enabled(prev);
  if (ok && !any) {
    printf("# gradcheck: no input requires grad, nothing was checked\n");
    ok = false;
  }
  return ok;
}

#endif
