/*
** test_ops_nn.c -- softmax, layer_norm, indexing, joining, losses,
** dropout and creation ops of libember on the CPU backend.
**
** Forward values are checked on small cases against numbers computed with
** PyTorch 1.13 (the expression is in a comment next to each). Every
** differentiable op gets a float64 central-difference gradient check
** (gradcheck.h), on several dims, layouts and options.
*/
#include "ember.h"
#include "ember_philox.h"
#include "gradcheck.h"
#include "tap.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static em_device cpu;

/* ---------------------------------------------------------------- */
/* Small helpers                                                     */
/* ---------------------------------------------------------------- */

static em_tensor *f64(int ndim, const int64_t *shape, const double *v) {
  em_tensor *t = NULL;
  if (em_from_host(&t, ndim, shape, EM_F64, v, cpu)) {
    printf("# from_host failed: %s\n", em_error_message());
    exit(2);
  }
  return t;
}

static em_tensor *i64(int ndim, const int64_t *shape, const int64_t *v) {
  em_tensor *t = NULL;
  if (em_from_host(&t, ndim, shape, EM_I64, v, cpu)) {
    printf("# from_host failed: %s\n", em_error_message());
    exit(2);
  }
  return t;
}

/* A float64 tensor of irregular values (no ties, no symmetry). */
static em_tensor *rand64(int ndim, const int64_t *shape, double seed, bool grad) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) v[i] = sin(1.7 * (double)i + seed) * 1.5 + 0.1 * (double)(i % 3);
  em_tensor *t = f64(ndim, shape, v);
  free(v);
  if (grad) em_set_requires_grad(t, true);
  return t;
}

/* A tensor's values as doubles (malloc'd; caller frees). */
static double *host(const em_tensor *t) {
  int64_t n = em_numel(t);
  double *out = malloc(sizeof(double) * (size_t)(n ? n : 1));
  em_tensor *c = NULL;
  if (t->dtype != EM_F64) {
    em_to_dtype(&c, (em_tensor *)t, EM_F64);
    em_to_host(c, out);
    em_release(c);
  } else {
    em_to_host(t, out);
  }
  return out;
}

static bool close_to(const em_tensor *t, const double *want, int64_t n, double tol) {
  if (!t || em_numel(t) != n) {
    printf("# numel %lld, want %lld\n", t ? (long long)em_numel(t) : -1LL, (long long)n);
    return false;
  }
  double *got = host(t);
  bool ok = true;
  for (int64_t i = 0; i < n; i++)
    if (!(fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i])))) {
      printf("# element %lld: got %.12g, want %.12g\n", (long long)i, got[i], want[i]);
      ok = false;
      break;
    }
  free(got);
  return ok;
}

static bool shape_is(const em_tensor *t, int ndim, const int64_t *shape) {
  if (!t || t->ndim != ndim) return false;
  for (int i = 0; i < ndim; i++)
    if (t->shape[i] != shape[i]) return false;
  return true;
}

/* The call failed with `code` and a message containing `part` (usable
** inside a larger condition, unlike CHECK_ERR). */
static bool fails_with(em_status s, em_status code, const char *part) {
  if (s == code && strstr(em_error_message(), part)) return true;
  printf("# status %d (%s), message \"%s\"; want %d and \"%s\"\n", (int)s, em_status_name(s),
         em_error_message(), (int)code, part);
  return false;
}

/* Frees a list of test inputs. */
static void release_all(int n, em_tensor **t) {
  for (int i = 0; i < n; i++) em_release(t[i]);
}

/* ---------------------------------------------------------------- */
/* softmax                                                           */
/* ---------------------------------------------------------------- */

static const int64_t S23[2] = {2, 3};
static const double X23[6] = {1, 2, 3, -1, 0, 4};

static em_status f_softmax(em_tensor **out, em_tensor *const *in, void *arg) {
  return em_softmax(out, in[0], *(int *)arg);
}
static em_status f_log_softmax(em_tensor **out, em_tensor *const *in, void *arg) {
  return em_log_softmax(out, in[0], *(int *)arg);
}

/* softmax(x^T, dim): the input to softmax is not contiguous. */
static em_status f_softmax_t(em_tensor **out, em_tensor *const *in, void *arg) {
  em_tensor *t = NULL;
  em_status s = em_transpose(&t, in[0], 0, 1);
  if (s) return s;
  s = em_softmax(out, t, *(int *)arg);
  em_release(t);
  return s;
}

static void test_softmax(void) {
  em_tensor *x = f64(2, S23, X23), *y = NULL;
  /* F.softmax(x, -1) */
  const double sm_last[6] = {0.09003057317038045, 0.2447284710547976, 0.6652409557748218,
                             0.006573263185309083, 0.0178679818703045, 0.9755587549443865};
  /* F.softmax(x, 0) */
  const double sm_first[6] = {0.8807970779778823, 0.8807970779778823, 0.2689414213699951,
                              0.11920292202211755, 0.11920292202211755, 0.7310585786300049};
  /* F.log_softmax(x, -1) */
  const double lsm[6] = {-2.4076059644443806, -1.4076059644443804, -0.4076059644443804,
                         -5.024744890138822, -4.024744890138822, -0.02474489013882259};
  CHECK(!em_softmax(&y, x, -1) && shape_is(y, 2, S23) && close_to(y, sm_last, 6, 1e-12),
        "softmax last dim values");
  em_release(y);
  CHECK(!em_softmax(&y, x, 0) && close_to(y, sm_first, 6, 1e-12) && em_is_contiguous(y),
        "softmax first dim values, contiguous result");
  em_release(y);
  CHECK(!em_log_softmax(&y, x, 1) && close_to(y, lsm, 6, 1e-12), "log_softmax values");
  em_release(y);

  em_tensor *xf = NULL;
  em_to_dtype(&xf, x, EM_F32);
  CHECK(!em_softmax(&y, xf, 1) && y->dtype == EM_F32 && close_to(y, sm_last, 6, 1e-6),
        "softmax float32");
  em_release(y);
  em_release(xf);

  em_tensor *s = NULL;
  double one = 1;
  em_from_host(&s, 0, NULL, EM_F64, &(double){3.5}, cpu);
  CHECK(!em_softmax(&y, s, 0) && y->ndim == 0 && close_to(y, &one, 1, 0),
        "softmax of a scalar is 1");
  em_release(y);
  em_release(s);

  CHECK(fails_with(em_softmax(&y, x, 2), EM_ERR_INDEX, "softmax: dim 3 out of range") && !y,
        "softmax bad dim error");
  em_tensor *xi = NULL;
  em_to_dtype(&xi, x, EM_I64);
  CHECK(fails_with(em_log_softmax(&y, xi, 0), EM_ERR_DTYPE, "log_softmax: input must be float"),
        "log_softmax int64 error");
  em_release(xi);
  em_release(x);

  const int64_t s3[3] = {2, 3, 4};
  int dims[3] = {0, 1, -1};
  for (int i = 0; i < 3; i++) {
    em_tensor *in[1] = {rand64(3, s3, 0.3 * i, true)};
    char name[64];
    snprintf(name, sizeof name, "softmax gradcheck dim %d", dims[i]);
    CHECK(gradcheck(f_softmax, 1, in, &dims[i], NULL), name);
    em_release(in[0]);
    in[0] = rand64(3, s3, 1.1 * i, true);
    snprintf(name, sizeof name, "log_softmax gradcheck dim %d", dims[i]);
    CHECK(gradcheck(f_log_softmax, 1, in, &dims[i], NULL), name);
    em_release(in[0]);
  }
  /* A non-contiguous input: softmax of a transposed view. */
  em_tensor *in[1] = {rand64(2, (int64_t[]){4, 3}, 0.7, true)};
  int d = 0;
  CHECK(gradcheck(f_softmax_t, 1, in, &d, NULL), "softmax gradcheck on a transposed view");
  em_release(in[0]);
  in[0] = rand64(2, (int64_t[]){4, 3}, 0.9, true);
  d = 1;
  CHECK(gradcheck(f_softmax_t, 1, in, &d, NULL), "softmax gradcheck on a transposed view, dim 2");
  em_release(in[0]);
}

/* ---------------------------------------------------------------- */
/* layer_norm                                                        */
/* ---------------------------------------------------------------- */

typedef struct ln_arg { int nnorm; bool w, b; } ln_arg;

static em_status f_layer_norm(em_tensor **out, em_tensor *const *in, void *arg) {
  const ln_arg *a = arg;
  return em_layer_norm(out, in[0], a->nnorm, a->w ? in[1] : NULL, a->b ? in[2] : NULL, 1e-5);
}

static void test_layer_norm(void) {
  em_tensor *x = f64(2, S23, X23), *y = NULL;
  const int64_t s3[1] = {3};
  em_tensor *w = f64(1, s3, (double[]){0.5, 1, 2}), *b = f64(1, s3, (double[]){0, 1, -1});
  /* F.layer_norm(x, (3,), w, b, 1e-5) */
  const double want[6] = {-0.6123678429541951, 1.0, 1.4494713718167804,
                          -0.4629095539120194, 0.5370904460879806, 1.7774573234721163};
  /* F.layer_norm(x, (2, 3), None, None, 1e-5) */
  const double want2[6] = {-0.2927695199943844, 0.2927695199943845, 0.8783085599831534,
                           -1.4638475999719223, -0.8783085599831533, 1.4638475999719223};
  CHECK(!em_layer_norm(&y, x, 1, w, b, 1e-5) && shape_is(y, 2, S23) && close_to(y, want, 6, 1e-9),
        "layer_norm values with weight and bias");
  em_release(y);
  CHECK(!em_layer_norm(&y, x, 2, NULL, NULL, 1e-5) && close_to(y, want2, 6, 1e-9),
        "layer_norm over 2 dims, no affine");
  em_release(y);
  em_tensor *w2 = f64(1, (int64_t[]){2}, (double[]){1, 2});
  CHECK(fails_with(em_layer_norm(&y, x, 1, w2, NULL, 1e-5), EM_ERR_SHAPE,
                   "layer_norm: weight has shape [2], expected [3]") && !y,
        "layer_norm weight shape error");
  CHECK(fails_with(em_layer_norm(&y, x, 3, NULL, NULL, 1e-5), EM_ERR_ARG,
                   "layer_norm: cannot normalise over the last 3 dims of input [2, 3]"),
        "layer_norm nnorm error");
  em_release(w2);
  em_release(x);
  em_release(w);
  em_release(b);

  const int64_t xs[3] = {2, 3, 4};
  ln_arg cases[] = {{1, true, true}, {2, true, true}, {1, false, false},
                          {1, false, true}, {1, true, false}, {3, true, true}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ln_arg *a = &cases[i];
    em_tensor *in[3] = {rand64(3, xs, 0.2 + (double)i, true),
                        a->w ? rand64(a->nnorm, xs + 3 - a->nnorm, 2.0, true) : NULL,
                        a->b ? rand64(a->nnorm, xs + 3 - a->nnorm, 3.0, true) : NULL};
    char name[96];
    snprintf(name, sizeof name, "layer_norm gradcheck nnorm %d%s%s", a->nnorm,
             a->w ? " weight" : "", a->b ? " bias" : "");
    CHECK(gradcheck(f_layer_norm, 3, in, a, NULL), name);
    release_all(3, in);
  }
}

/* ---------------------------------------------------------------- */
/* embedding, index_select, gather, scatter_add, one_hot             */
/* ---------------------------------------------------------------- */

static em_status f_embedding(em_tensor **out, em_tensor *const *in, void *arg) {
  (void)arg;
  return em_embedding(out, in[0], in[1]);
}
static em_status f_index_select(em_tensor **out, em_tensor *const *in, void *arg) {
  return em_index_select(out, in[0], *(int *)arg, in[1]);
}
static em_status f_gather(em_tensor **out, em_tensor *const *in, void *arg) {
  return em_gather(out, in[0], *(int *)arg, in[1]);
}
static em_status f_scatter_add(em_tensor **out, em_tensor *const *in, void *arg) {
  return em_scatter_add(out, in[0], *(int *)arg, in[1], in[2]);
}

static void test_index(void) {
  /* weight [4, 2]; index [2, 3] -> [2, 3, 2] */
  const int64_t ws[2] = {4, 2};
  em_tensor *w = f64(2, ws, (double[]){0, 1, 10, 11, 20, 21, 30, 31});
  em_tensor *idx = i64(2, S23, (int64_t[]){3, 0, 1, 1, 2, 3}), *y = NULL;
  const double want[12] = {30, 31, 0, 1, 10, 11, 10, 11, 20, 21, 30, 31};
  CHECK(!em_embedding(&y, w, idx) && shape_is(y, 3, (int64_t[]){2, 3, 2}) &&
            close_to(y, want, 12, 0),
        "embedding values");
  em_release(y);
  em_tensor *bad = i64(1, (int64_t[]){2}, (int64_t[]){1, 12});
  CHECK(fails_with(em_embedding(&y, w, bad), EM_ERR_INDEX, "embedding: ") &&
            strstr(em_error_message(), "12") && !y,
        "embedding index out of range error");
  em_release(bad);
  em_tensor *fidx = f64(1, (int64_t[]){2}, (double[]){1, 2});
  CHECK(fails_with(em_embedding(&y, w, fidx), EM_ERR_DTYPE,
                   "embedding: index must be int64, got float64"),
        "embedding float index error");
  CHECK(fails_with(em_embedding(&y, fidx, idx), EM_ERR_SHAPE, "embedding: weight must be 2-D"),
        "embedding 1-D weight error");
  em_release(fidx);

  /* index_select along dim 1 of [2, 3]: columns 2, 0, 2 */
  em_tensor *x = f64(2, S23, X23), *cols = i64(1, (int64_t[]){3}, (int64_t[]){2, 0, 2});
  CHECK(!em_index_select(&y, x, 1, cols) && shape_is(y, 2, (int64_t[]){2, 3}) &&
            close_to(y, (double[]){3, 1, 3, 4, -1, 4}, 6, 0),
        "index_select values");
  em_release(y);
  em_tensor *rows = i64(1, (int64_t[]){1}, (int64_t[]){2});
  CHECK(fails_with(em_index_select(&y, x, 0, rows), EM_ERR_INDEX, "index_select: "),
        "index_select out of range error");
  em_release(rows);

  /* gather along dim 1: torch.gather(x, 1, [[2,2],[0,1]]) */
  em_tensor *gi = i64(2, (int64_t[]){2, 2}, (int64_t[]){2, 2, 0, 1});
  CHECK(!em_gather(&y, x, 1, gi) && shape_is(y, 2, (int64_t[]){2, 2}) &&
            close_to(y, (double[]){3, 3, -1, 0}, 4, 0),
        "gather values");
  em_release(y);
  em_tensor *gbad = i64(2, (int64_t[]){3, 2}, (int64_t[]){0, 0, 0, 0, 0, 0});
  CHECK(fails_with(em_gather(&y, x, 1, gbad), EM_ERR_SHAPE,
                   "gather: index [3, 2] must have the shape"),
        "gather shape error");
  em_release(gbad);

  /* scatter_add: x + src at gi along dim 1 */
  em_tensor *src = f64(2, (int64_t[]){2, 2}, (double[]){100, 200, 1000, 2000});
  CHECK(!em_scatter_add(&y, x, 1, gi, src) && shape_is(y, 2, S23) &&
            close_to(y, (double[]){1, 2, 303, 999, 2000, 4}, 6, 0),
        "scatter_add values (out of place)");
  em_release(y);
  CHECK(close_to(x, X23, 6, 0), "scatter_add leaves its input alone");

  /* one_hot */
  CHECK(!em_one_hot(&y, cols, 4) && y->dtype == EM_I64 && shape_is(y, 2, (int64_t[]){3, 4}) &&
            close_to(y, (double[]){0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 1, 0}, 12, 0),
        "one_hot values");
  em_release(y);
  CHECK(!em_one_hot(&y, cols, -1) && shape_is(y, 2, (int64_t[]){3, 3}), "one_hot infers classes");
  em_release(y);
  CHECK(fails_with(em_one_hot(&y, cols, 2), EM_ERR_INDEX,
                   "one_hot: class out of range for 2 classes") &&
            !y,
        "one_hot class out of range error");
  em_tensor *neg = i64(1, (int64_t[]){1}, (int64_t[]){-1});
  CHECK(
      fails_with(em_one_hot(&y, neg, 3), EM_ERR_INDEX, "one_hot: class out of range for 3 classes"),
      "one_hot negative class error");
  em_release(neg);
  CHECK(fails_with(em_one_hot(&y, x, 3), EM_ERR_DTYPE, "one_hot: index must be int64, got float64"),
        "one_hot dtype error");

  /* Gradient checks; repeated indices make the backward accumulate. */
  em_tensor *in[3] = {rand64(2, ws, 0.5, true), idx, NULL};
  CHECK(gradcheck(f_embedding, 2, in, NULL, NULL), "embedding gradcheck (repeated rows)");
  em_release(in[0]);
  int d1 = 1, d0 = 0;
  in[0] = rand64(2, S23, 0.9, true);
  in[1] = cols;
  CHECK(gradcheck(f_index_select, 2, in, &d1, NULL), "index_select gradcheck dim 1");
  em_release(in[0]);
  em_tensor *r3 = i64(1, (int64_t[]){4}, (int64_t[]){1, 0, 1, 1});
  in[0] = rand64(3, (int64_t[]){2, 3, 2}, 0.4, true);
  in[1] = r3;
  CHECK(gradcheck(f_index_select, 2, in, &d0, NULL), "index_select gradcheck dim 0 of 3-d");
  em_release(in[0]);
  in[0] = rand64(2, S23, 1.3, true);
  in[1] = gi;
  CHECK(gradcheck(f_gather, 2, in, &d1, NULL), "gather gradcheck dim 1");
  em_release(in[0]);
  em_tensor *gi0 = i64(2, (int64_t[]){3, 3}, (int64_t[]){1, 0, 1, 1, 1, 0, 0, 0, 0});
  in[0] = rand64(2, S23, 1.9, true);
  in[1] = gi0;
  CHECK(gradcheck(f_gather, 2, in, &d0, NULL), "gather gradcheck dim 0, more rows than input");
  em_release(in[0]);
  in[0] = rand64(2, S23, 2.3, true);
  in[1] = gi;
  in[2] = rand64(2, (int64_t[]){2, 2}, 2.9, true);
  CHECK(gradcheck(f_scatter_add, 3, in, &d1, NULL), "scatter_add gradcheck (input and src)");
  em_release(in[0]);
  em_release(in[2]);
  em_release(gi0);
  em_release(r3);
  em_release(src);
  em_release(gi);
  em_release(cols);
  em_release(x);
  em_release(idx);
  em_release(w);
}

/* ---------------------------------------------------------------- */
/* cat, stack, split, chunk                                          */
/* ---------------------------------------------------------------- */

static em_status f_cat3(em_tensor **out, em_tensor *const *in, void *arg) {
  return em_cat(out, 3, in, *(int *)arg);
}
static em_status f_stack2(em_tensor **out, em_tensor *const *in, void *arg) {
  return em_stack(out, 2, in, *(int *)arg);
}
/* The second piece of split(x, 2, dim 1), times the first (both views). */
static em_status f_split(em_tensor **out, em_tensor *const *in, void *arg) {
  (void)arg;
  em_tensor **parts;
  int n;
  em_status s = em_split(&parts, &n, in[0], 2, 1);
  if (s) return s;
  s = em_mul(out, parts[1], parts[0]);
  em_free_list(parts, n);
  return s;
}

static void test_join(void) {
  em_tensor *a = f64(2, S23, X23), *b = f64(2, (int64_t[]){1, 3}, (double[]){7, 8, 9});
  em_tensor *xs[3] = {a, b, a}, *y = NULL;
  CHECK(!em_cat(&y, 3, xs, 0) && shape_is(y, 2, (int64_t[]){5, 3}) &&
            close_to(y, (double[]){1, 2, 3, -1, 0, 4, 7, 8, 9, 1, 2, 3, -1, 0, 4}, 15, 0),
        "cat dim 0 values");
  em_release(y);
  em_tensor *c = f64(2, (int64_t[]){2, 1}, (double[]){5, 6});
  em_tensor *ys[2] = {a, c};
  CHECK(!em_cat(&y, 2, ys, -1) && shape_is(y, 2, (int64_t[]){2, 4}) &&
            close_to(y, (double[]){1, 2, 3, 5, -1, 0, 4, 6}, 8, 0),
        "cat last dim values");
  em_release(y);
  em_tensor *d = f64(2, (int64_t[]){4, 5}, (double[20]){0});
  em_tensor *zs[2] = {a, d};
  CHECK(fails_with(em_cat(&y, 2, zs, 0), EM_ERR_SHAPE,
                   "cat: tensors 1 and 2 differ at dim 2 (of 2): [2, 3] vs [4, 5]") && !y,
        "cat shape error names dims 1-based");
  em_tensor *af = NULL;
  em_to_dtype(&af, a, EM_F32);
  em_tensor *ws[2] = {af, a};
  CHECK(!em_cat(&y, 2, ws, 0) && y->dtype == EM_F64 && shape_is(y, 2, (int64_t[]){4, 3}),
        "cat of float32 and float64 is float64 (torch.cat's type promotion)");
  em_release(y);
  em_release(af);

  em_tensor *pair[2] = {a, a};
  CHECK(!em_stack(&y, 2, pair, 1) && shape_is(y, 3, (int64_t[]){2, 2, 3}) &&
            close_to(y, (double[]){1, 2, 3, 1, 2, 3, -1, 0, 4, -1, 0, 4}, 12, 0),
        "stack dim 1 values");
  em_release(y);
  em_tensor *mix[2] = {a, b};
  CHECK(fails_with(em_stack(&y, 2, mix, 0), EM_ERR_SHAPE,
                   "stack: tensors 1 and 2 differ at dim 1 (of 2): [2, 3] vs [1, 3]"),
        "stack shape error");

  /* split/chunk of [2, 5] along dim 2 */
  em_tensor *x = rand64(2, (int64_t[]){2, 5}, 0.1, false), **parts = NULL;
  int n = 0;
  CHECK(!em_split(&parts, &n, x, 2, 1) && n == 3 && shape_is(parts[0], 2, (int64_t[]){2, 2}) &&
            shape_is(parts[2], 2, (int64_t[]){2, 1}) && parts[1]->storage == x->storage,
        "split sizes 2, 2, 1 as views");
  em_free_list(parts, n);
  CHECK(!em_chunk(&parts, &n, x, 3, 1) && n == 3 && parts[0]->shape[1] == 2 &&
            parts[2]->shape[1] == 1,
        "chunk into 3");
  em_free_list(parts, n);
  /* torch.chunk(torch.empty(6), 4) gives 3 pieces of 2 */
  em_tensor *six = rand64(1, (int64_t[]){6}, 0, false);
  CHECK(!em_chunk(&parts, &n, six, 4, 0) && n == 3 && parts[2]->shape[0] == 2,
        "chunk may give fewer pieces, as torch");
  em_free_list(parts, n);
  em_tensor *empty = rand64(1, (int64_t[]){0}, 0, false);
  CHECK(!em_chunk(&parts, &n, empty, 3, 0) && n == 3 && parts[2]->shape[0] == 0,
        "chunk of an empty dim gives empty pieces");
  em_free_list(parts, n);
  CHECK(fails_with(em_split(&parts, &n, x, 0, 1), EM_ERR_ARG, "split: piece size must be >= 1") &&
            !parts && n == 0,
        "split size 0 error");
  em_release(six);
  em_release(empty);
  em_release(x);

  /* gradients */
  int d1 = 1, d0 = 0;
  em_tensor *in[3] = {rand64(2, (int64_t[]){2, 3}, 0.1, true),
                      rand64(2, (int64_t[]){2, 1}, 0.2, false),
                      rand64(2, (int64_t[]){2, 2}, 0.3, true)};
  CHECK(gradcheck(f_cat3, 3, in, &d1, NULL), "cat gradcheck dim 2 (one input without grad)");
  CHECK(in[1]->grad == NULL, "cat: input without requires_grad gets no grad");
  release_all(3, in);
  em_tensor *in2[2] = {rand64(2, S23, 0.5, true), rand64(2, S23, 0.6, true)};
  CHECK(gradcheck(f_stack2, 2, in2, &d0, NULL), "stack gradcheck dim 1");
  release_all(2, in2);
  em_tensor *in3[1] = {rand64(2, (int64_t[]){3, 5}, 0.8, true)};
  CHECK(gradcheck(f_split, 1, in3, NULL, NULL), "split gradcheck (pieces are views)");
  release_all(1, in3);

  em_release(a);
  em_release(b);
  em_release(c);
  em_release(d);
}

/* ---------------------------------------------------------------- */
/* losses                                                            */
/* ---------------------------------------------------------------- */

typedef struct ce_arg { int64_t ignore; double smoothing; em_reduction red; } ce_arg;

static em_status f_ce(em_tensor **out, em_tensor *const *in, void *arg) {
  const ce_arg *a = arg;
  return em_cross_entropy(out, in[0], in[1], a->ignore, a->smoothing, a->red);
}
static em_status f_mse(em_tensor **out, em_tensor *const *in, void *arg) {
  return em_mse_loss(out, in[0], in[1], *(em_reduction *)arg);
}

static void test_losses(void) {
  const int64_t ls[2] = {3, 4};
  const double lv[12] = {1, 2, 3, 0.5, 0, -1, 2, 1, 3, 1, 0, 0};
  em_tensor *logits = f64(2, ls, lv), *y = NULL;
  em_tensor *t = i64(1, (int64_t[]){3}, (int64_t[]){2, 0, -100});
  em_tensor *t2 = i64(1, (int64_t[]){3}, (int64_t[]){2, 0, 1});
  double v;
  /* F.cross_entropy(lg, [2, 0, -100]) with reductions mean, sum, none */
  CHECK(!em_cross_entropy(&y, logits, t, -100, 0, EM_REDUCE_MEAN) && y->ndim == 0 &&
            close_to(y, (double[]){1.4504815938590232}, 1, 1e-12),
        "cross_entropy mean skips ignored rows");
  em_release(y);
  CHECK(!em_cross_entropy(&y, logits, t, -100, 0, EM_REDUCE_SUM) &&
            close_to(y, (double[]){2.9009631877180464}, 1, 1e-12),
        "cross_entropy sum");
  em_release(y);
  CHECK(!em_cross_entropy(&y, logits, t, -100, 0, EM_REDUCE_NONE) &&
            shape_is(y, 1, (int64_t[]){3}) &&
            close_to(y, (double[]){0.4607734891568512, 2.4401896985611953, 0}, 3, 1e-12),
        "cross_entropy none");
  em_release(y);
  CHECK(!em_cross_entropy(&y, logits, t, -100, 0.1, EM_REDUCE_MEAN) &&
            close_to(y, (double[]){1.4942315938590232}, 1, 1e-12),
        "cross_entropy label smoothing with ignored row");
  em_release(y);
  CHECK(!em_cross_entropy(&y, logits, t2, -100, 0.2, EM_REDUCE_NONE) &&
            close_to(y, (double[]){0.7357734891568513, 2.340189698561195, 2.2109976232381756}, 3,
                     1e-12),
        "cross_entropy label smoothing per row");
  em_release(y);
  em_tensor *row = NULL, *t0 = i64(0, NULL, (int64_t[]){3});
  em_select(&row, logits, 0, 0);
  CHECK(!em_cross_entropy(&y, row, t0, -100, 0, EM_REDUCE_NONE) && y->ndim == 0 &&
            close_to(y, (double[]){2.960773489156851}, 1, 1e-12),
        "cross_entropy of one [C] row");
  em_release(y);
  em_release(t0);
  em_release(row);

  /* All rows ignored: 0 (PyTorch: NaN) and zero gradients. */
  em_tensor *all = i64(1, (int64_t[]){3}, (int64_t[]){-100, -100, -100});
  em_tensor *lg = rand64(2, ls, 0.4, true);
  CHECK(!em_cross_entropy(&y, lg, all, -100, 0, EM_REDUCE_MEAN) && !em_item(y, &v) && v == 0 &&
            !em_backward(y, NULL, false) && lg->grad &&
            close_to(lg->grad, (double[12]){0}, 12, 0),
        "cross_entropy all ignored gives 0 and zero grads");
  em_release(y);
  em_release(lg);
  em_release(all);

  em_tensor *tf = f64(1, (int64_t[]){3}, (double[]){0, 1, 2});
  CHECK(fails_with(em_cross_entropy(&y, logits, tf, -100, 0, EM_REDUCE_MEAN), EM_ERR_DTYPE,
                   "cross_entropy: target must be int64, got float64"),
        "cross_entropy float target error");
  em_release(tf);
  em_tensor *tbad = i64(1, (int64_t[]){3}, (int64_t[]){0, 4, 1});
  CHECK(fails_with(em_cross_entropy(&y, logits, tbad, -100, 0, EM_REDUCE_MEAN), EM_ERR_INDEX,
                   "cross_entropy: ") && !y,
        "cross_entropy target out of range error");
  em_release(tbad);
  em_tensor *tshort = i64(1, (int64_t[]){2}, (int64_t[]){0, 1});
  CHECK(fails_with(em_cross_entropy(&y, logits, tshort, -100, 0, EM_REDUCE_MEAN), EM_ERR_SHAPE,
                   "cross_entropy: logits [3, 4] need target [3], got [2]"),
        "cross_entropy target shape error");
  em_release(tshort);

  ce_arg cases[] = {{-100, 0, EM_REDUCE_MEAN}, {-100, 0, EM_REDUCE_SUM},
                          {-100, 0, EM_REDUCE_NONE}, {-100, 0.1, EM_REDUCE_MEAN},
                          {1, 0.3, EM_REDUCE_MEAN}, {0, 0.2, EM_REDUCE_NONE}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    /* t2 has no -100, which would be out of range unless ignored. */
    em_tensor *in[2] = {rand64(2, ls, 0.7 * (double)i, true), cases[i].ignore == -100 ? t : t2};
    char name[96];
    snprintf(name, sizeof name, "cross_entropy gradcheck ignore %lld smoothing %g reduction %d",
             (long long)cases[i].ignore, cases[i].smoothing, (int)cases[i].red);
    CHECK(gradcheck(f_ce, 2, in, &cases[i], NULL), name);
    em_release(in[0]);
  }

  /* mse: F.mse_loss(x, x * 0.5) = 1.2916666666666667, sum 7.75 */
  em_tensor *x = f64(2, S23, X23), *half = NULL;
  em_binary_scalar(&half, EM_MUL, x, 0.5);
  CHECK(!em_mse_loss(&y, x, half, EM_REDUCE_MEAN) &&
            close_to(y, (double[]){1.2916666666666667}, 1, 1e-12),
        "mse_loss mean");
  em_release(y);
  CHECK(!em_mse_loss(&y, x, half, EM_REDUCE_SUM) && close_to(y, (double[]){7.75}, 1, 1e-12),
        "mse_loss sum");
  em_release(y);
  em_tensor *b = f64(1, (int64_t[]){3}, (double[]){1, 2, 3});
  CHECK(fails_with(em_mse_loss(&y, x, b, EM_REDUCE_MEAN), EM_ERR_SHAPE,
                   "mse_loss: input [2, 3] and target [3] must have the same shape"),
        "mse_loss shape error");
  em_release(b);
  em_release(half);
  em_release(x);
  em_reduction reds[3] = {EM_REDUCE_MEAN, EM_REDUCE_SUM, EM_REDUCE_NONE};
  for (int i = 0; i < 3; i++) {
    em_tensor *in[2] = {rand64(2, S23, 0.1 * i, true), rand64(2, S23, 5.0 + i, true)};
    char name[64];
    snprintf(name, sizeof name, "mse_loss gradcheck reduction %d", i);
    CHECK(gradcheck(f_mse, 2, in, &reds[i], NULL), name);
    release_all(2, in);
  }
  em_release(t);
  em_release(t2);
  em_release(logits);
}

/* ---------------------------------------------------------------- */
/* dropout                                                           */
/* ---------------------------------------------------------------- */

/* Re-seeds before each call so every evaluation draws the same mask. */
static em_status f_dropout(em_tensor **out, em_tensor *const *in, void *arg) {
  em_manual_seed(1234);
  return em_dropout(out, in[0], *(double *)arg, true);
}

static void test_dropout(void) {
  const int64_t n = 20000;
  em_tensor *x = NULL, *y = NULL, *y2 = NULL;
  em_ones(&x, 1, &n, EM_F64, cpu);
  CHECK(!em_dropout(&y, x, 0.5, false) && y == x, "dropout in eval mode is the identity");
  em_release(y);
  CHECK(!em_dropout(&y, x, 0, true) && y == x, "dropout with p = 0 is the identity");
  em_release(y);
  em_manual_seed(7);
  CHECK(!em_dropout(&y, x, 0.25, true), "dropout p = 0.25 runs");
  double *v = host(y);
  int64_t kept = 0;
  bool values_ok = true;
  for (int64_t i = 0; i < n; i++) {
    if (v[i] != 0) kept++;
    if (v[i] != 0 && fabs(v[i] - 1 / 0.75) > 1e-12) values_ok = false;
  }
  free(v);
  CHECK(values_ok, "dropout scales kept values by 1/(1-p)");
  CHECK(fabs((double)kept / (double)n - 0.75) < 0.02, "dropout keeps about 1-p");
  em_manual_seed(7);
  em_dropout(&y2, x, 0.25, true);
  double *a = host(y), *b = host(y2);
  CHECK(memcmp(a, b, sizeof(double) * (size_t)n) == 0, "dropout is reproducible after manual_seed");
  free(a);
  free(b);
  em_release(y);
  em_release(y2);
  CHECK(!em_dropout(&y, x, 1, true) && shape_is(y, 1, &n),
        "dropout p = 1 runs");
  v = host(y);
  bool zeros = true;
  for (int64_t i = 0; i < n; i++) zeros = zeros && v[i] == 0;
  free(v);
  CHECK(zeros, "dropout p = 1 gives zeros");
  em_release(y);
  CHECK(
      fails_with(em_dropout(&y, x, 1.5, true), EM_ERR_ARG, "dropout: p must be in [0, 1], got 1.5"),
      "dropout p error");
  em_release(x);

  double ps[2] = {0.3, 1};
  for (int i = 0; i < 2; i++) {
    em_tensor *in[1] = {rand64(2, (int64_t[]){3, 4}, 0.2, true)};
    char name[64];
    snprintf(name, sizeof name, "dropout gradcheck p = %g", ps[i]);
    CHECK(gradcheck(f_dropout, 1, in, &ps[i], NULL), name);
    em_release(in[0]);
  }
}

/* ---------------------------------------------------------------- */
/* arange and random numbers                                         */
/* ---------------------------------------------------------------- */

static void test_create(void) {
  em_tensor *y = NULL;
  /* torch.arange(0, 1, 0.3), torch.arange(5, 0, -2) */
  CHECK(!em_arange(&y, 0, 1, 0.3, EM_F32, cpu) && y->dtype == EM_F32 &&
            close_to(y, (double[]){0, 0.3, 0.6, 0.9}, 4, 1e-7),
        "arange float32 values");
  em_release(y);
  CHECK(!em_arange(&y, 5, 0, -2, EM_I64, cpu) && y->dtype == EM_I64 &&
            close_to(y, (double[]){5, 3, 1}, 3, 0),
        "arange int64 with a negative step");
  em_release(y);
  CHECK(!em_arange(&y, 2, 2, 1, EM_F64, cpu) && shape_is(y, 1, (int64_t[]){0}), "arange empty");
  em_release(y);
  CHECK(fails_with(em_arange(&y, 0, 3, 0, EM_F32, cpu), EM_ERR_ARG, "arange: step must not be 0"),
        "arange step 0 error");
  CHECK(fails_with(em_arange(&y, 0, 3, -1, EM_F32, cpu), EM_ERR_ARG,
                   "arange: step -1 never reaches end 3"),
        "arange wrong direction error");
  CHECK(fails_with(em_arange(&y, 0, 3, 1, EM_BOOL, cpu), EM_ERR_DTYPE, "arange: dtype must be"),
        "arange bool error");

  em_manual_seed(5);
  CHECK(em_initial_seed() == 5 && em_rng_advance(10) == 0 && em_rng_advance(3) == 10 &&
            em_rng_advance(0) == 13,
        "manual_seed resets the counter, advance reserves");

  const int64_t n = 20000;
  em_manual_seed(9);
  CHECK(!em_uniform(&y, 1, &n, 2, 3, EM_F64, cpu), "uniform runs");
  double *v = host(y), mean = 0, sq = 0;
  bool in_range = true;
  for (int64_t i = 0; i < n; i++) {
    in_range = in_range && v[i] >= 2 && v[i] < 3;
    mean += v[i] / (double)n;
  }
  CHECK(in_range && fabs(mean - 2.5) < 0.01, "uniform in [2, 3) with mean 2.5");
  CHECK(fabs(v[0] - (2 + em_philox_uniform_at(9, 0, 0))) < 1e-12 &&
            fabs(v[n - 1] - (2 + em_philox_uniform_at(9, 0, (uint64_t)n - 1))) < 1e-12,
        "uniform follows the Philox stream rule");
  CHECK(em_rng_advance(0) == (uint64_t)n, "uniform advanced the counter by numel");
  em_tensor *y2 = NULL;
  em_manual_seed(9);
  em_uniform(&y2, 1, &n, 2, 3, EM_F64, cpu);
  double *v2 = host(y2);
  CHECK(memcmp(v, v2, sizeof(double) * (size_t)n) == 0,
        "uniform is reproducible after manual_seed");
  free(v2);
  em_release(y2);
  em_uniform(&y2, 1, &n, 2, 3, EM_F64, cpu);
  v2 = host(y2);
  CHECK(memcmp(v, v2, sizeof(double) * (size_t)n) != 0, "the next draw differs");
  free(v2);
  em_release(y2);
  free(v);
  em_release(y);

  CHECK(!em_normal(&y, 1, &n, 1, 2, EM_F32, cpu) && y->dtype == EM_F32, "normal runs");
  v = host(y);
  mean = 0;
  for (int64_t i = 0; i < n; i++) mean += v[i] / (double)n;
  for (int64_t i = 0; i < n; i++) sq += (v[i] - mean) * (v[i] - mean) / (double)n;
  CHECK(fabs(mean - 1) < 0.05 && fabs(sqrt(sq) - 2) < 0.05, "normal has mean 1 and std 2");
  free(v);
  em_release(y);
  CHECK(fails_with(em_normal(&y, 1, &n, 0, -1, EM_F32, cpu), EM_ERR_ARG,
                   "normal: need a finite mean and std >= 0"),
        "normal negative std error");
  CHECK(fails_with(em_uniform(&y, 1, &n, 0, 1, EM_I64, cpu), EM_ERR_DTYPE,
                   "uniform: dtype must be a float type, got int64"),
        "uniform int64 error");
}

/* ---------------------------------------------------------------- */
/* Edge cases: empty tensors, large values, more layouts             */
/* ---------------------------------------------------------------- */

static em_status f_sum_layer_norm_t(em_tensor **out, em_tensor *const *in, void *arg) {
  /* layer_norm of a transposed (non-contiguous) view */
  (void)arg;
  em_tensor *t = NULL;
  em_status s = em_transpose(&t, in[0], 0, 1);
  if (s) return s;
  s = em_layer_norm(out, t, 1, in[1], in[2], 1e-5);
  em_release(t);
  return s;
}

static void test_edges(void) {
  em_tensor *y = NULL;
  /* softmax([1000, 1000, -1000]) = [0.5, 0.5, 0] without overflow */
  em_tensor *big = f64(1, (int64_t[]){3}, (double[]){1000, 1000, -1000});
  CHECK(!em_softmax(&y, big, 0) && close_to(y, (double[]){0.5, 0.5, 0}, 3, 1e-12),
        "softmax of large values is stable");
  em_release(y);
  CHECK(!em_log_softmax(&y, big, 0) &&
            close_to(y, (double[]){-M_LN2, -M_LN2, -2000 - M_LN2}, 3, 1e-12),
        "log_softmax of large values is stable");
  em_release(y);
  em_release(big);

  /* Empty tensors go through without kernels and with empty gradients. */
  const int64_t e03[2] = {0, 3};
  em_tensor *e = rand64(2, e03, 0, true), *w = rand64(1, (int64_t[]){3}, 1, true), *sum = NULL;
  CHECK(!em_softmax(&y, e, 1) && shape_is(y, 2, e03), "softmax of [0, 3]");
  em_release(y);
  CHECK(!em_layer_norm(&y, e, 1, w, NULL, 1e-5) && shape_is(y, 2, e03) &&
            !em_sum(&sum, y, 0, NULL, false) && !em_backward(sum, NULL, false) && w->grad &&
            close_to(w->grad, (double[3]){0}, 3, 0),
        "layer_norm of [0, 3] gives a zero weight gradient");
  em_release(sum);
  em_release(y);
  em_tensor *ei = i64(1, (int64_t[]){0}, NULL);
  em_tensor *tab = rand64(2, (int64_t[]){4, 2}, 0, false);
  CHECK(!em_embedding(&y, tab, ei) && shape_is(y, 2, (int64_t[]){0, 2}),
        "embedding of an empty index");
  em_release(y);
  em_tensor *lg = rand64(2, (int64_t[]){0, 4}, 0, false);
  double v = -1;
  CHECK(!em_cross_entropy(&y, lg, ei, -100, 0, EM_REDUCE_MEAN) && !em_item(y, &v) && v == 0,
        "cross_entropy of 0 rows is 0");
  em_release(y);
  em_tensor *a = rand64(2, (int64_t[]){2, 3}, 0, false),
            *z = rand64(2, (int64_t[]){2, 0}, 0, false);
  em_tensor *pair[2] = {z, a};
  double *av = host(a);
  CHECK(!em_cat(&y, 2, pair, 1) && shape_is(y, 2, (int64_t[]){2, 3}) && close_to(y, av, 6, 0),
        "cat with an empty piece");
  free(av);
  em_release(y);
  release_all(8, (em_tensor *[]){e, w, ei, tab, lg, a, z, NULL});

  /* More layouts for the gradient checks. */
  int d1 = 1, d0 = 0;
  em_tensor *gi = i64(3, (int64_t[]){2, 2, 2}, (int64_t[]){2, 0, 1, 1, 0, 0, 2, 1});
  em_tensor *in[3] = {rand64(3, (int64_t[]){2, 3, 2}, 0.6, true), gi, NULL};
  CHECK(gradcheck(f_gather, 2, in, &d1, NULL), "gather gradcheck dim 2 of 3-d");
  em_release(in[0]);
  em_tensor *si = i64(3, (int64_t[]){2, 2, 2}, (int64_t[]){1, 0, 1, 1, 0, 0, 0, 1});
  in[0] = rand64(3, (int64_t[]){2, 2, 2}, 0.8, true);
  in[1] = si;
  in[2] = rand64(3, (int64_t[]){2, 2, 2}, 1.8, true);
  CHECK(gradcheck(f_scatter_add, 3, in, &d0, NULL), "scatter_add gradcheck dim 1 of 3-d");
  em_release(in[0]);
  em_release(in[2]);
  em_release(gi);
  em_release(si);
  em_tensor *ln[3] = {rand64(2, (int64_t[]){4, 3}, 0.3, true), rand64(1, (int64_t[]){4}, 0.4, true),
                      rand64(1, (int64_t[]){4}, 0.5, true)};
  CHECK(gradcheck(f_sum_layer_norm_t, 3, ln, NULL, NULL),
        "layer_norm gradcheck on a transposed view");
  release_all(3, ln);
}

/* ---------------------------------------------------------------- */

int main(void) {
  if (em_cpu_device(&cpu)) {
    printf("not ok 1 - cpu device: %s\n", em_error_message());
    return 1;
  }
  /* Before anything seeds: the fixed default seed. */
  CHECK(em_initial_seed() == UINT64_C(0x853c49e6748fea9b), "default seed");
  test_softmax();
  test_layer_norm();
  test_index();
  test_join();
  test_losses();
  test_dropout();
  test_create();
  test_edges();
  return tap_done();
}
