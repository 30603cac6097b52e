/*
** test_ops_core.c -- elementwise ops, reductions and matmul of libember on
** the CPU backend: forward values on small known cases (worked by hand or
** with PyTorch 1.13, the expression next to them), the errors for bad
** input, and a float64 central-difference gradient check (gradcheck.h) for
** every differentiable op.
*/
#include "ember.h"
#include "gradcheck.h"
#include "tap.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static em_device cpu;

/* ---------------------------------------------------------------- */
/* Helpers                                                           */
/* ---------------------------------------------------------------- */

#define SHAPE(...) (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}

static em_tensor *make(em_dtype dt, int ndim, const int64_t *shape, const void *v) {
  em_tensor *t = NULL;
  if (em_from_host(&t, ndim, shape, dt, v, cpu)) {
    printf("# from_host failed: %s\n", em_error_message());
    exit(2);
  }
  return t;
}

static em_tensor *f64(int ndim, const int64_t *shape, const double *v) { return make(EM_F64, ndim, shape, v); }
static em_tensor *f32(int ndim, const int64_t *shape, const float *v) { return make(EM_F32, ndim, shape, v); }
static em_tensor *i64(int ndim, const int64_t *shape, const int64_t *v) { return make(EM_I64, ndim, shape, v); }
static em_tensor *bools(int ndim, const int64_t *shape, const uint8_t *v) { return make(EM_BOOL, ndim, shape, v); }

/* Irregular float64 values (no ties), optionally shifted to be positive. */
static em_tensor *rnd(int ndim, const int64_t *shape, double seed, bool positive, bool grad) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) {
    v[i] = sin(1.3 * (double)i + seed) * 1.2 + 0.05 * (double)(i % 7);
    if (positive) v[i] = fabs(v[i]) + 0.3;
  }
  em_tensor *t = f64(ndim, shape, v);
  free(v);
  if (grad) em_set_requires_grad(t, true);
  return t;
}

static bool shape_is(const em_tensor *t, int ndim, const int64_t *shape) {
  if (!t || t->ndim != ndim) {
    printf("# ndim %d, want %d\n", t ? t->ndim : -1, ndim);
    return false;
  }
  for (int i = 0; i < ndim; i++)
    if (t->shape[i] != shape[i]) {
      printf("# size %lld at dim %d, want %lld\n", (long long)t->shape[i], i, (long long)shape[i]);
      return false;
    }
  return true;
}

/* Values (read as doubles) within tol; NaN matches NaN. */
static bool vals(const em_tensor *t, int64_t n, const double *want, double tol) {
  if (!t || em_numel(t) != n) {
    printf("# numel %lld, want %lld\n", t ? (long long)em_numel(t) : -1LL, (long long)n);
    return false;
  }
  double *got = gc_host(t);
  bool ok = got != NULL;
  for (int64_t i = 0; ok && i < n; i++)
    if (!(got[i] == want[i] || fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i])) ||
          (isnan(got[i]) && isnan(want[i])))) {
      printf("# element %lld: got %.10g, want %.10g\n", (long long)i, got[i], want[i]);
      ok = false;
    }
  free(got);
  return ok;
}
#define VALS(t, tol, ...) vals(t, sizeof((double[]){__VA_ARGS__}) / sizeof(double), (double[]){__VA_ARGS__}, tol)

static bool is(const em_tensor *t, em_dtype dt, int ndim, const int64_t *shape) {
  if (!t || t->dtype != dt) {
    printf("# dtype %s, want %s\n", t ? em_dtype_name(t->dtype) : "(null)", em_dtype_name(dt));
    return false;
  }
  return shape_is(t, ndim, shape);
}

static bool fails(em_status s, em_status code, const char *part) {
  if (s == code && strstr(em_error_message(), part)) return true;
  printf("# status %d (%s), message \"%s\"; want %d and \"%s\"\n", (int)s, em_status_name(s),
         em_error_message(), (int)code, part);
  return false;
}

/* Inline temporaries: tmp(x) registers x, pool_free() releases them all. */
static em_tensor *pool[256];
static int npool;
static em_tensor *tmp(em_tensor *t) {
  if (npool < 256) pool[npool++] = t;
  return t;
}
static void pool_free(void) {
  while (npool > 0) em_release(pool[--npool]);
}

#define REL(...)                                                          \
  do {                                                                    \
    em_tensor *rel_[] = {__VA_ARGS__};                                    \
    for (size_t i_ = 0; i_ < sizeof rel_ / sizeof rel_[0]; i_++) em_release(rel_[i_]); \
  } while (0)

/* ---------------------------------------------------------------- */
/* Elementwise forward                                               */
/* ---------------------------------------------------------------- */

static void test_binary_values(void) {
  em_tensor *a = f32(SHAPE(2, 3), (float[]){1, 2, 3, 4, 5, 6});
  em_tensor *b = f32(SHAPE(3), (float[]){10, 20, 30});
  em_tensor *c = f32(SHAPE(2, 1), (float[]){2, -1});
  em_tensor *y = NULL, *z = NULL, *t = NULL;

  CHECK_OK(em_add(&y, a, b), "add broadcast [2,3] + [3]");
  CHECK(is(y, EM_F32, SHAPE(2, 3)) && VALS(y, 0, 11, 22, 33, 14, 25, 36), "add broadcast values");
  em_release(y);
  CHECK_OK(em_sub(&y, a, a), "sub same shape");
  CHECK(VALS(y, 0, 0, 0, 0, 0, 0, 0), "sub values");
  em_release(y);
  CHECK_OK(em_mul(&y, c, b), "mul [2,1] * [3] broadcasts to [2,3]");
  CHECK(is(y, EM_F32, SHAPE(2, 3)) && VALS(y, 0, 20, 40, 60, -10, -20, -30), "mul outer broadcast values");
  em_release(y);
  CHECK_OK(em_div(&y, a, c), "div");
  CHECK(VALS(y, 1e-7, 0.5, 1, 1.5, -4, -5, -6), "div values");
  em_release(y);
  CHECK_OK(em_binary(&y, EM_POW, a, c), "pow");
  CHECK(VALS(y, 1e-7, 1, 4, 9, 0.25, 0.2, 1.0 / 6), "pow values");
  em_release(y);
  CHECK_OK(em_binary(&y, EM_MAXIMUM, a, tmp(f32(SHAPE(3), (float[]){2, 2, 2}))), "maximum");
  CHECK(VALS(y, 0, 2, 2, 3, 4, 5, 6), "maximum values");
  em_release(y);

  /* A transposed (non-contiguous) operand. */
  CHECK_OK(em_transpose(&t, a, 0, 1), "transpose for a strided operand");
  CHECK_OK(em_add(&y, t, t), "add of strided views");
  CHECK(is(y, EM_F32, SHAPE(3, 2)) && VALS(y, 0, 2, 8, 4, 10, 6, 12), "add of strided views values");
  em_release(y);
  CHECK_OK(em_mul(&y, t, tmp(f32(SHAPE(2), (float[]){1, 10}))), "mul strided view by a broadcast row");
  CHECK(VALS(y, 0, 1, 40, 2, 50, 3, 60), "strided broadcast values");
  em_release(y);
  em_release(t);

  /* Comparisons give bool. */
  CHECK_OK(em_binary(&y, EM_GT, a, tmp(f32(SHAPE(1), (float[]){3}))), "gt");
  CHECK(is(y, EM_BOOL, SHAPE(2, 3)) && VALS(y, 0, 0, 0, 0, 1, 1, 1), "gt gives bool");
  CHECK_OK(em_binary(&z, EM_LE, a, tmp(f32(SHAPE(1), (float[]){2}))), "le");
  CHECK_OK(em_binary(&t, EM_OR, y, z), "logical_or");
  CHECK(is(t, EM_BOOL, SHAPE(2, 3)) && VALS(t, 0, 1, 1, 0, 1, 1, 1), "logical_or values");
  em_release(t);
  CHECK_OK(em_binary(&t, EM_XOR, y, y), "logical_xor");
  CHECK(VALS(t, 0, 0, 0, 0, 0, 0, 0), "logical_xor values");
  em_release(t);
  CHECK(fails(em_binary(&t, EM_AND, a, a), EM_ERR_DTYPE, "logical_and: expected bool tensors"),
        "logical op on float is a dtype error");
  CHECK_OK(em_add(&t, y, z), "add of two bools"); /* PyTorch: bool, a logical or */
  CHECK(is(t, EM_BOOL, SHAPE(2, 3)) && VALS(t, 0, 1, 1, 0, 1, 1, 1), "add of two bools is their or");
  em_release(t);
  CHECK(fails(em_sub(&t, y, z), EM_ERR_DTYPE, "with two bool tensors is not supported"),
        "sub of two bools is a dtype error, in PyTorch's words");
  em_release(y);
  em_release(z);

  /* dtype rules */
  em_tensor *d = f64(SHAPE(3), (double[]){1, 2, 3});
  CHECK_OK(em_add(&y, a, d), "float32 [2, 3] + float64 [3] promotes");
  CHECK(is(y, EM_F64, SHAPE(2, 3)) && VALS(y, 0, 2, 4, 6, 5, 7, 9), "promoted to float64, as PyTorch");
  em_release(y);
  em_tensor *s64 = f64(0, NULL, (double[]){0.5});
  CHECK_OK(em_mul(&y, a, s64), "a 0-d float64 operand adopts float32");
  CHECK(is(y, EM_F32, SHAPE(2, 3)) && VALS(y, 0, 0.5, 1, 1.5, 2, 2.5, 3), "0-d adoption values");
  em_release(y);
  CHECK_OK(em_sub(&y, s64, a), "0-d on the left adopts too");
  CHECK(is(y, EM_F32, SHAPE(2, 3)) && VALS(y, 0, -0.5, -1.5, -2.5, -3.5, -4.5, -5.5), "0-d left values");
  em_release(y);
  CHECK(fails(em_add(&y, a, tmp(f32(SHAPE(4), (float[]){1, 2, 3, 4}))), EM_ERR_SHAPE, "[2, 3] and [4]"),
        "shape mismatch names both shapes");

  em_tensor *ia = i64(SHAPE(3), (int64_t[]){7, -2, 5}), *ib = i64(SHAPE(3), (int64_t[]){3, 4, -5});
  CHECK_OK(em_add(&y, ia, ib), "int64 add");
  CHECK(is(y, EM_I64, SHAPE(3)) && VALS(y, 0, 10, 2, 0), "int64 add values");
  em_release(y);
  CHECK_OK(em_binary(&y, EM_MINIMUM, ia, ib), "int64 minimum");
  CHECK(VALS(y, 0, 3, -2, -5), "int64 minimum values");
  em_release(y);
  CHECK_OK(em_div(&y, ia, ib), "int64 / int64 is true division");
  CHECK(is(y, EM_F32, SHAPE(3)) && VALS(y, 0, 7.0f / 3, -0.5, -1), "int64 division gives float32");
  em_release(y);
  CHECK_OK(em_mul(&y, ia, a), "int64 [3] * float32 [2, 3] promotes to float32");
  CHECK(is(y, EM_F32, SHAPE(2, 3)), "int64 with float32 is float32");
  em_release(y);
  REL(a, b, c, d, s64, ia, ib);
}

static void test_scalar_ops(void) {
  em_tensor *a = f32(SHAPE(4), (float[]){1, 2, 4, -8}), *y = NULL;
  CHECK_OK(em_binary_scalar(&y, EM_ADD, a, 0.5), "x + s");
  CHECK(is(y, EM_F32, SHAPE(4)) && VALS(y, 0, 1.5, 2.5, 4.5, -7.5), "x + s values");
  em_release(y);
  CHECK_OK(em_binary_scalar(&y, EM_SUB, a, 1), "x - s");
  CHECK(VALS(y, 0, 0, 1, 3, -9), "x - s values");
  em_release(y);
  CHECK_OK(em_binary_scalar(&y, EM_MUL, a, -2), "x * s");
  CHECK(VALS(y, 0, -2, -4, -8, 16), "x * s values");
  em_release(y);
  CHECK_OK(em_binary_scalar(&y, EM_DIV, a, 4), "x / s");
  CHECK(VALS(y, 0, 0.25, 0.5, 1, -2), "x / s values");
  em_release(y);
  CHECK_OK(em_binary_scalar(&y, EM_POW, a, 2), "x ^ s");
  CHECK(VALS(y, 0, 1, 4, 16, 64), "x ^ s values");
  em_release(y);
  CHECK_OK(em_binary_scalar(&y, EM_MAXIMUM, a, 3), "maximum(x, s)");
  CHECK(VALS(y, 0, 3, 3, 4, 3), "maximum(x, s) values");
  em_release(y);
  CHECK_OK(em_binary_scalar(&y, EM_GE, a, 2), "x >= s");
  CHECK(is(y, EM_BOOL, SHAPE(4)) && VALS(y, 0, 0, 1, 1, 0), "x >= s values");
  em_release(y);
  CHECK_OK(em_scalar_binary(&y, EM_SUB, 2, a), "s - x");
  CHECK(VALS(y, 0, 1, 0, -2, 10), "s - x values");
  em_release(y);
  CHECK_OK(em_scalar_binary(&y, EM_DIV, 1, a), "s / x");
  CHECK(VALS(y, 0, 1, 0.5, 0.25, -0.125), "s / x values");
  em_release(y);
  CHECK_OK(em_scalar_binary(&y, EM_POW, 2, a), "s ^ x");
  CHECK(VALS(y, 1e-7, 2, 4, 16, 1.0 / 256), "s ^ x values");
  em_release(y);
  /* float32 rounding of the scalar as PyTorch: torch.tensor([1.], dtype=float32) + 0.1 */
  em_tensor *one = f32(SHAPE(1), (float[]){1});
  CHECK_OK(em_binary_scalar(&y, EM_ADD, one, 0.1), "x + 0.1 in float32");
  float got = 0;
  em_to_host(y, &got);
  CHECK(got == 1.0f + 0.1f, "x + 0.1 rounds like float32 arithmetic");
  em_release(y);

  /* Division by a subnormal: 1/s overflows float32, x / s need not. */
  em_tensor *small = f32(SHAPE(1), (float[]){1e-10f});
  CHECK_OK(em_binary_scalar(&y, EM_DIV, small, 1e-45), "x / subnormal");
  em_to_host(y, &got);
  CHECK(isfinite(got) && got > 7e34f && got < 7.2e34f, "x / subnormal stays finite");
  REL(y, small);

  em_tensor *ia = i64(SHAPE(3), (int64_t[]){1, 2, 3});
  CHECK_OK(em_binary_scalar(&y, EM_MUL, ia, 3), "int64 * 3");
  CHECK(is(y, EM_I64, SHAPE(3)) && VALS(y, 0, 3, 6, 9), "int64 * 3 values");
  em_release(y);
  CHECK_OK(em_scalar_binary(&y, EM_SUB, 10, ia), "10 - int64");
  CHECK(VALS(y, 0, 9, 8, 7), "10 - int64 values");
  em_release(y);
  CHECK_OK(em_binary_scalar(&y, EM_ADD, ia, 0.5), "int64 + 0.5 promotes");
  CHECK(is(y, EM_F32, SHAPE(3)) && VALS(y, 0, 1.5, 2.5, 3.5), "int64 + 0.5 is float32, as PyTorch");
  em_release(y);
  REL(a, one, ia);
}

static void test_unary_values(void) {
  em_tensor *x = f64(SHAPE(4), (double[]){-2, -0.5, 0.5, 3}), *y = NULL;
  struct { em_unary_op op; double a, b; double want[4]; } cases[] = {
    {EM_NEG, 0, 0, {2, 0.5, -0.5, -3}},
    {EM_EXP, 0, 0, {0.1353352832366127, 0.6065306597126334, 1.6487212707001282, 20.085536923187668}},
    {EM_ABS, 0, 0, {2, 0.5, 0.5, 3}},
    {EM_TANH, 0, 0, {-0.9640275800758169, -0.46211715726000974, 0.46211715726000974, 0.9950547536867305}},
    {EM_SIGMOID, 0, 0, {0.11920292202211755, 0.3775406687981454, 0.6224593312018546, 0.9525741268224334}},
    {EM_RELU, 0, 0, {0, 0, 0.5, 3}},
    /* torch.nn.functional.gelu(x) */
    {EM_GELU, 0, 0, {-0.04550026389635842, -0.15426876936299344, 0.34573123063700656, 2.99595030590511}},
    /* gelu(x, approximate='tanh') */
    {EM_GELU_TANH, 0, 0, {-0.04540230591222494, -0.15428599017485606, 0.34571400982514394, 2.996362607918227}},
    {EM_ELU, 1, 0, {-0.8646647167633873, -0.3934693402873666, 0.5, 3}},
    {EM_CLAMP, -1, 1, {-1, -0.5, 0.5, 1}},
    {EM_AFFINE, 2, 1, {-3, 0, 2, 7}},
    {EM_SILU, 0, 0, {-0.2384058440442351, -0.18877033439907268, 0.3112296656009273, 2.8577223804673}},
    {EM_SIN, 0, 0, {-0.9092974268256817, -0.479425538604203, 0.479425538604203, 0.1411200080598672}},
    {EM_COS, 0, 0, {-0.4161468365471424, 0.8775825618903728, 0.8775825618903728, -0.9899924966004454}},
    /* torch.expm1(x) (log1p below, on positive inputs) */
    {EM_EXPM1, 0, 0, {-0.8646647167633873, -0.3934693402873666, 0.6487212707001282, 19.085536923187668}},
    /* torch.erf(x) */
    {EM_ERF, 0, 0, {-0.9953222650189527, -0.5204998778130465, 0.5204998778130465, 0.9999779095030014}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char name[96];
    snprintf(name, sizeof name, "%s values", em_unary_name(cases[i].op));
    em_status s = em_unary(&y, cases[i].op, x, cases[i].a, cases[i].b);
    if (s) printf("# %s\n", em_error_message());
    CHECK(s == EM_OK && is(y, EM_F64, SHAPE(4)) && vals(y, 4, cases[i].want, 1e-12), name);
    em_release(y);
    y = NULL;
  }
  em_tensor *p = f64(SHAPE(3), (double[]){0.25, 1, 4});
  CHECK_OK(em_unary(&y, EM_LOG, p, 0, 0), "log");
  CHECK(VALS(y, 1e-12, -1.3862943611198906, 0, 1.3862943611198906), "log values");
  em_release(y);
  CHECK_OK(em_unary(&y, EM_SQRT, p, 0, 0), "sqrt");
  CHECK(VALS(y, 1e-12, 0.5, 1, 2), "sqrt values");
  em_release(y);
  /* torch.log1p: log(1 + x) without 1 + x's rounding (1e-20 is not lost) */
  em_tensor *q = f64(SHAPE(3), (double[]){1e-20, 1, 4});
  CHECK_OK(em_unary(&y, EM_LOG1P, q, 0, 0), "log1p");
  CHECK(VALS(y, 1e-12, 1e-20, 0.6931471805599453, 1.6094379124341003) &&
            fabs(((double *)em_data(y))[0] - 1e-20) < 1e-32,
        "log1p values");
  em_release(y);
  em_release(q);
  CHECK_OK(em_unary(&y, EM_RSQRT, p, 0, 0), "rsqrt");
  CHECK(VALS(y, 1e-12, 2, 1, 0.5), "rsqrt values");
  em_release(y);
  CHECK_OK(em_unary(&y, EM_POW_SCALAR, p, 1.5, 0), "pow scalar");
  CHECK(VALS(y, 1e-12, 0.125, 1, 8), "pow scalar values");
  em_release(y);

  em_tensor *t = NULL;
  CHECK_OK(em_unsqueeze(&t, x, 0), "unsqueeze");
  em_tensor *tt = NULL;
  CHECK_OK(em_expand(&tt, t, SHAPE(2, 4)), "expand");
  CHECK_OK(em_unary(&y, EM_NEG, tt, 0, 0), "unary on an expanded view");
  CHECK(is(y, EM_F64, SHAPE(2, 4)) && VALS(y, 0, 2, 0.5, -0.5, -3, 2, 0.5, -0.5, -3), "expanded view values");
  REL(y, t, tt);

  em_tensor *b = bools(SHAPE(3), (uint8_t[]){1, 0, 1});
  CHECK_OK(em_unary(&y, EM_NOT, b, 0, 0), "logical_not");
  CHECK(is(y, EM_BOOL, SHAPE(3)) && VALS(y, 0, 0, 1, 0), "logical_not values");
  em_release(y);
  CHECK(fails(em_unary(&y, EM_NOT, x, 0, 0), EM_ERR_DTYPE, "logical_not: expected a bool tensor"),
        "logical_not on float is a dtype error");
  em_tensor *ia = i64(SHAPE(3), (int64_t[]){-3, 0, 4});
  CHECK_OK(em_unary(&y, EM_ABS, ia, 0, 0), "abs on int64");
  CHECK(is(y, EM_I64, SHAPE(3)) && VALS(y, 0, 3, 0, 4), "abs on int64 values");
  em_release(y);
  CHECK_OK(em_unary(&y, EM_NEG, ia, 0, 0), "neg on int64");
  CHECK(is(y, EM_I64, SHAPE(3)) && VALS(y, 0, 3, 0, -4), "neg on int64 values");
  em_release(y);
  CHECK(fails(em_unary(&y, EM_RELU, ia, 0, 0), EM_ERR_DTYPE, "relu: expected a float tensor, got int64 [3]"),
        "relu on int64 is a dtype error");
  CHECK(fails(em_unary(&y, EM_EXP, ia, 0, 0), EM_ERR_DTYPE, "exp: expected a float tensor, got int64 [3]"),
        "exp on int64 is a dtype error");
  CHECK(strcmp(em_unary_name(EM_GELU_TANH), "gelu_tanh") == 0 && strcmp(em_binary_name(EM_GE), "ge") == 0 &&
        strcmp(em_binary_name(EM_MAXIMUM), "maximum") == 0, "op names");
  REL(x, p, b, ia);
}

static void test_where_masked(void) {
  em_tensor *cond = bools(SHAPE(2, 1), (uint8_t[]){1, 0});
  em_tensor *a = f32(SHAPE(3), (float[]){1, 2, 3}), *b = f32(0, NULL, (float[]){-1}), *y = NULL;
  CHECK_OK(em_where(&y, cond, a, b), "where broadcasts three ways");
  CHECK(is(y, EM_F32, SHAPE(2, 3)) && VALS(y, 0, 1, 2, 3, -1, -1, -1), "where values");
  em_release(y);
  CHECK(fails(em_where(&y, a, a, a), EM_ERR_DTYPE, "where: the condition must be bool"),
        "where needs a bool condition");
  em_tensor *x = f32(SHAPE(2, 3), (float[]){1, 2, 3, 4, 5, 6});
  em_tensor *m = bools(SHAPE(3), (uint8_t[]){0, 1, 0});
  CHECK_OK(em_masked_fill(&y, x, m, -INFINITY), "masked_fill with a broadcast mask");
  CHECK(is(y, EM_F32, SHAPE(2, 3)) && VALS(y, 0, 1, -INFINITY, 3, 4, -INFINITY, 6), "masked_fill values");
  em_release(y);
  CHECK(fails(em_masked_fill(&y, x, x, 0), EM_ERR_DTYPE, "mask must be bool"), "masked_fill needs a bool mask");
  em_tensor *m4 = bools(SHAPE(4), (uint8_t[]){0, 1, 0, 1});
  CHECK(fails(em_masked_fill(&y, x, m4, 0), EM_ERR_SHAPE, "masked_fill"), "masked_fill shape mismatch");
  REL(cond, a, b, x, m, m4);
}

static void test_inplace(void) {
  em_tensor *x = f32(SHAPE(2, 3), (float[]){1, 2, 3, 4, 5, 6}), *t = NULL;
  CHECK_OK(em_copy_(x, tmp(f64(SHAPE(3), (double[]){7, 8, 9}))), "copy_ broadcasts and converts dtype");
  CHECK(VALS(x, 0, 7, 8, 9, 7, 8, 9), "copy_ values");
  CHECK_OK(em_fill_(x, 2), "fill_");
  CHECK(VALS(x, 0, 2, 2, 2, 2, 2, 2), "fill_ values");
  em_tensor *r = f32(SHAPE(2, 1), (float[]){1, 10});
  CHECK_OK(em_add_(x, r, 0.5), "add_ with alpha and broadcast");
  CHECK(VALS(x, 0, 2.5, 2.5, 2.5, 7, 7, 7), "add_ values");
  CHECK_OK(em_add_(x, x, 1), "add_ of itself");
  CHECK(VALS(x, 0, 5, 5, 5, 14, 14, 14), "add_ of itself values");
  CHECK_OK(em_mul_scalar_(x, 2), "mul_scalar_");
  CHECK(VALS(x, 0, 10, 10, 10, 28, 28, 28), "mul_scalar_ values");
  /* Into a strided view: the column x[:, 1]. */
  CHECK_OK(em_select(&t, x, 1, 1), "select a column");
  CHECK_OK(em_add_(t, tmp(f32(SHAPE(2), (float[]){1, 2})), 1), "add_ into a strided view");
  CHECK_OK(em_mul_scalar_(t, -1), "mul_scalar_ into a strided view");
  CHECK(VALS(x, 0, 10, -11, 10, 28, -30, 28), "strided in-place values");
  CHECK(fails(em_add_(x, tmp(f32(SHAPE(4), (float[]){1, 2, 3, 4})), 1), EM_ERR_SHAPE, "add_: source of shape [4]"),
        "add_ with a source that does not broadcast");
  CHECK(fails(em_add_(x, tmp(f64(SHAPE(3), (double[]){1, 2, 3})), 1), EM_ERR_DTYPE, "add_: dtype mismatch"),
        "add_ dtype mismatch");
  em_tensor *ia = i64(SHAPE(2), (int64_t[]){1, 2});
  CHECK_OK(em_add_(ia, tmp(i64(SHAPE(2), (int64_t[]){5, 5})), 2), "int64 add_ with alpha 2");
  CHECK(VALS(ia, 0, 11, 12), "int64 add_ values");
  CHECK_OK(em_mul_scalar_(ia, 3), "int64 mul_scalar_");
  CHECK(VALS(ia, 0, 33, 36), "int64 mul_scalar_ values");

  em_tensor *row = NULL, *ex = NULL;
  em_reshape(&row, ia, SHAPE(1, 2));
  em_expand(&ex, row, SHAPE(3, 2));
  CHECK(fails(em_fill_(ex, 1), EM_ERR_ARG, "expanded view"), "in-place on an expanded view is an error");
  REL(row, ex);

  /* Autograd rules */
  em_tensor *w = f64(SHAPE(2), (double[]){1, 2});
  em_set_requires_grad(w, true);
  CHECK(fails(em_fill_(w, 0), EM_ERR_AUTOGRAD, "leaf tensor that requires grad"),
        "in-place on a leaf that requires grad is an error with grad mode on");
  CHECK(fails(em_add_(w, tmp(f64(SHAPE(2), (double[]){1, 1})), 1), EM_ERR_AUTOGRAD, "add_:"),
        "add_ on a leaf that requires grad is an error");
  bool prev = em_set_grad_enabled(false);
  CHECK_OK(em_add_(w, tmp(f64(SHAPE(2), (double[]){1, 1})), -0.5), "add_ on such a leaf under no-grad (optimizers)");
  em_set_grad_enabled(prev);
  CHECK(VALS(w, 0, 0.5, 1.5), "no-grad add_ values");
  em_tensor *v = NULL, *plain = f64(SHAPE(2), (double[]){0, 0});
  CHECK_OK(em_mul(&v, w, w), "a non-leaf");
  /* in place on a graph tensor nothing else shares: recorded, as PyTorch */
  CHECK_OK(em_mul_scalar_(v, 2), "in-place on a graph tensor alone is recorded");
  CHECK(VALS(v, 0, 0.5, 4.5) && v->grad_fn && v->requires_grad, "recorded mul_ values and history");
  CHECK_OK(em_copy_(plain, v), "copy_ from a tensor needing grad into a plain one is recorded");
  CHECK(VALS(plain, 0, 0.5, 4.5) && plain->grad_fn && plain->requires_grad, "recorded copy_ history");
  em_tensor *view = NULL;
  CHECK_OK(em_narrow(&view, v, 0, 0, 1), "a view of the graph tensor");
  CHECK(fails(em_mul_scalar_(v, 2), EM_ERR_AUTOGRAD, "other tensors share its memory"),
        "in-place on a graph tensor a view shares is an error");
  em_tensor *plain2 = f64(SHAPE(2), (double[]){0, 0}), *view2 = NULL;
  CHECK_OK(em_narrow(&view2, plain2, 0, 0, 1), "a view of a plain tensor");
  CHECK(fails(em_copy_(plain2, v), EM_ERR_AUTOGRAD, "source"), "copy_ from a tensor needing grad into a shared one is an error");
  REL(x, t, r, ia, w, v, plain, view, plain2, view2);
}

/* ---------------------------------------------------------------- */
/* Reductions forward                                                */
/* ---------------------------------------------------------------- */

static void test_reduce_values(void) {
  /* x = torch.arange(24.).reshape(2,3,4) */
  double xv[24];
  for (int i = 0; i < 24; i++) xv[i] = i;
  em_tensor *x = f64(SHAPE(2, 3, 4), xv), *y = NULL, *idx = NULL;
  CHECK_OK(em_sum(&y, x, 0, NULL, false), "sum all");
  CHECK(is(y, EM_F64, 0, NULL) && VALS(y, 0, 276), "sum all value");
  em_release(y);
  CHECK_OK(em_sum(&y, x, 1, (int[]){1}, false), "sum dim 1");
  CHECK(is(y, EM_F64, SHAPE(2, 4)) && VALS(y, 0, 12, 15, 18, 21, 48, 51, 54, 57), "sum dim 1 values");
  em_release(y);
  CHECK_OK(em_sum(&y, x, 2, (int[]){0, -1}, true), "sum dims 0 and -1, keepdim");
  CHECK(is(y, EM_F64, SHAPE(1, 3, 1)) && VALS(y, 0, 60, 92, 124), "sum dims 0,2 values");
  em_release(y);
  CHECK_OK(em_sum(&y, x, 2, (int[]){2, 1}, false), "sum dims 2 and 1 (adjacent, merged)");
  CHECK(is(y, EM_F64, SHAPE(2)) && VALS(y, 0, 66, 210), "sum dims 1,2 values");
  em_release(y);
  CHECK_OK(em_mean(&y, x, 2, (int[]){0, 2}, false), "mean dims 0 and 2");
  CHECK(is(y, EM_F64, SHAPE(3)) && VALS(y, 1e-12, 7.5, 11.5, 15.5), "mean values");
  em_release(y);
  /* x.var(dim=(0,2)) = tensor([42.5714, 42.5714, 42.5714]) (unbiased, 8 elements) */
  CHECK_OK(em_var(&y, x, 2, (int[]){0, 2}, 1, false), "var over two separated dims");
  CHECK(VALS(y, 1e-12, 298.0 / 7, 298.0 / 7, 298.0 / 7), "var unbiased values");
  em_release(y);
  CHECK_OK(em_var(&y, x, 1, (int[]){2}, 0, true), "var correction 0 keepdim");
  CHECK(is(y, EM_F64, SHAPE(2, 3, 1)) && VALS(y, 1e-12, 1.25, 1.25, 1.25, 1.25, 1.25, 1.25), "var biased values");
  em_release(y);
  CHECK(fails(em_sum(&y, x, 1, (int[]){3}, false), EM_ERR_INDEX, "sum: dim 4 out of range"), "bad dim");
  CHECK(fails(em_sum(&y, x, 2, (int[]){1, -2}, false), EM_ERR_ARG, "appears more than once"), "repeated dim");

  /* Strided input: the transpose of x's first matrix. */
  em_tensor *m = NULL, *mt = NULL;
  em_select(&m, x, 0, 0);
  em_transpose(&mt, m, 0, 1); /* [4,3] */
  CHECK_OK(em_sum(&y, mt, 1, (int[]){0}, false), "sum of a transposed view");
  CHECK(VALS(y, 0, 6, 22, 38), "transposed sum values");
  em_release(y);

  /* max / min with indices; ties go to the first position. */
  em_tensor *t = f32(SHAPE(2, 4), (float[]){3, 7, 7, 1, -2, -5, 0, -5});
  em_tensor *v = NULL;
  CHECK_OK(em_max(&v, &idx, t, 1, false), "max along dim 1");
  CHECK(is(v, EM_F32, SHAPE(2)) && VALS(v, 0, 7, 0) && is(idx, EM_I64, SHAPE(2)) && VALS(idx, 0, 1, 2),
        "max values and first index of ties");
  REL(v, idx);
  CHECK_OK(em_min(&v, &idx, t, -1, true), "min along the last dim, keepdim");
  CHECK(is(v, EM_F32, SHAPE(2, 1)) && VALS(v, 0, 1, -5) && VALS(idx, 0, 3, 1), "min values and index");
  REL(v, idx);
  CHECK_OK(em_max(&v, NULL, t, 0, false), "max values only");
  CHECK(VALS(v, 0, 3, 7, 7, 1), "max dim 0 values");
  em_release(v);
  CHECK_OK(em_argmax(&idx, t, 0, false), "argmax");
  CHECK(is(idx, EM_I64, SHAPE(4)) && VALS(idx, 0, 0, 0, 0, 0), "argmax values");
  em_release(idx);
  CHECK_OK(em_argmin(&idx, t, 1, false), "argmin");
  CHECK(VALS(idx, 0, 3, 1), "argmin values");
  em_release(idx);
  CHECK_OK(em_max_all(&v, t), "max_all");
  CHECK(is(v, EM_F32, 0, NULL) && VALS(v, 0, 7), "max_all value");
  em_release(v);
  CHECK_OK(em_min_all(&v, t), "min_all");
  CHECK(VALS(v, 0, -5), "min_all value");
  em_release(v);

  em_tensor *e = NULL;
  em_zeros(&e, SHAPE(2, 0), EM_F32, cpu);
  CHECK(fails(em_max(&v, &idx, e, 1, false), EM_ERR_SHAPE, "max: cannot reduce over dim 2 of size 0"),
        "max over an empty dim is an error");
  CHECK(fails(em_max_all(&v, e), EM_ERR_SHAPE, "max_all: the tensor is empty"), "max_all of empty");
  CHECK_OK(em_sum(&y, e, 1, (int[]){1}, false), "sum over an empty dim");
  CHECK(is(y, EM_F32, SHAPE(2)) && VALS(y, 0, 0, 0), "sum over nothing is 0");
  em_release(y);
  CHECK_OK(em_mean(&y, e, 1, (int[]){1}, false), "mean over an empty dim");
  CHECK(VALS(y, 0, NAN, NAN), "mean over nothing is NaN");
  em_release(y);
  CHECK_OK(em_max(&v, &idx, e, 0, false), "max over a non-empty dim of an empty tensor");
  CHECK(is(v, EM_F32, SHAPE(0)), "gives an empty result");
  REL(v, idx);

  em_tensor *ia = i64(SHAPE(3), (int64_t[]){4, -1, 9}), *bm = bools(SHAPE(4), (uint8_t[]){1, 0, 1, 1});
  CHECK_OK(em_sum(&y, ia, 0, NULL, false), "sum of int64");
  CHECK(is(y, EM_I64, 0, NULL) && VALS(y, 0, 12), "int64 sum");
  em_release(y);
  CHECK_OK(em_sum(&y, bm, 0, NULL, false), "sum of bool counts trues");
  CHECK(is(y, EM_I64, 0, NULL) && VALS(y, 0, 3), "bool sum is int64");
  em_release(y);
  CHECK_OK(em_max_all(&y, bm), "max_all of bool (any)");
  CHECK(is(y, EM_BOOL, 0, NULL) && VALS(y, 0, 1), "max_all of bool");
  em_release(y);
  CHECK(fails(em_mean(&y, ia, 0, NULL, false), EM_ERR_DTYPE, "mean: expected a float tensor, got int64 [3]"),
        "mean of int64 is a dtype error");
  CHECK(fails(em_var(&y, ia, 0, NULL, 1, false), EM_ERR_DTYPE, "var: expected a float"), "var of int64");

  /* sum_to */
  em_tensor *g = f64(SHAPE(2, 3), (double[]){1, 2, 3, 4, 5, 6});
  CHECK_OK(em_sum_to(&y, g, SHAPE(3)), "sum_to drops leading dims");
  CHECK(is(y, EM_F64, SHAPE(3)) && VALS(y, 0, 5, 7, 9), "sum_to [3] values");
  em_release(y);
  CHECK_OK(em_sum_to(&y, g, SHAPE(2, 1)), "sum_to keeps size-1 dims");
  CHECK(is(y, EM_F64, SHAPE(2, 1)) && VALS(y, 0, 6, 15), "sum_to [2,1] values");
  em_release(y);
  CHECK_OK(em_sum_to(&y, g, 0, NULL), "sum_to a scalar");
  CHECK(is(y, EM_F64, 0, NULL) && VALS(y, 0, 21), "sum_to [] value");
  em_release(y);
  CHECK_OK(em_sum_to(&y, g, SHAPE(2, 3)), "sum_to the same shape");
  CHECK(y == g, "sum_to the same shape returns the tensor itself");
  em_release(y);
  CHECK(fails(em_sum_to(&y, g, SHAPE(2)), EM_ERR_SHAPE, "sum_to: cannot reduce a tensor of shape [2, 3] to shape [2]"),
        "sum_to to an incompatible shape");
  REL(x, m, mt, t, e, ia, bm, g);
}

/* ---------------------------------------------------------------- */
/* matmul forward                                                    */
/* ---------------------------------------------------------------- */

/* Reference: a [.., m, k] @ b [.., k, n] on the host, batch dims broadcast
** (both already at least 2-d and with the same number of dims). */
static void ref_matmul(const em_tensor *a, const em_tensor *b, double *out) {
  int nd = a->ndim;
  double *av = gc_host(a), *bv = gc_host(b);
  int64_t m = a->shape[nd - 2], k = a->shape[nd - 1], n = b->shape[nd - 1];
  int64_t bs[EM_MAX_DIMS], batch = 1;
  for (int i = 0; i < nd - 2; i++) bs[i] = a->shape[i] > b->shape[i] ? a->shape[i] : b->shape[i], batch *= bs[i];
  for (int64_t p = 0; p < batch; p++) {
    int64_t ia = 0, ib = 0, rem = p, sa = 1, sb = 1;
    for (int i = nd - 3; i >= 0; i--) {
      int64_t c = rem % bs[i];
      rem /= bs[i];
      ia += (a->shape[i] == 1 ? 0 : c) * sa;
      ib += (b->shape[i] == 1 ? 0 : c) * sb;
      sa *= a->shape[i];
      sb *= b->shape[i];
    }
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double acc = 0;
        for (int64_t q = 0; q < k; q++) acc += av[ia * m * k + i * k + q] * bv[ib * k * n + q * n + j];
        out[p * m * n + i * n + j] = acc;
      }
  }
  free(av);
  free(bv);
}

static bool matmul_matches(em_tensor *a, em_tensor *b) {
  em_tensor *y = NULL;
  if (em_matmul(&y, a, b)) {
    printf("# matmul failed: %s\n", em_error_message());
    return false;
  }
  int64_t n = em_numel(y);
  double *want = malloc(sizeof(double) * (size_t)(n ? n : 1));
  ref_matmul(a, b, want);
  bool ok = vals(y, n, want, 1e-12);
  free(want);
  em_release(y);
  return ok;
}

static void test_matmul_values(void) {
  em_tensor *a = f32(SHAPE(2, 3), (float[]){1, 2, 3, 4, 5, 6});
  em_tensor *b = f32(SHAPE(3, 2), (float[]){1, 0, 0, 1, 1, 1});
  em_tensor *v3 = f32(SHAPE(3), (float[]){1, -1, 2}), *v2 = f32(SHAPE(2), (float[]){3, 1});
  em_tensor *y = NULL;
  CHECK_OK(em_matmul(&y, a, b), "matmul 2-d");
  CHECK(is(y, EM_F32, SHAPE(2, 2)) && VALS(y, 0, 4, 5, 10, 11), "matmul 2-d values");
  em_release(y);
  CHECK_OK(em_matmul(&y, v3, v3), "matmul 1-d . 1-d");
  CHECK(is(y, EM_F32, 0, NULL) && VALS(y, 0, 6), "dot value");
  em_release(y);
  CHECK_OK(em_matmul(&y, a, v3), "matmul 2-d x 1-d");
  CHECK(is(y, EM_F32, SHAPE(2)) && VALS(y, 0, 5, 11), "matrix-vector values");
  em_release(y);
  CHECK_OK(em_matmul(&y, v2, a), "matmul 1-d x 2-d");
  CHECK(is(y, EM_F32, SHAPE(3)) && VALS(y, 0, 7, 11, 15), "vector-matrix values");
  em_release(y);

  CHECK(fails(em_matmul(&y, a, a), EM_ERR_SHAPE, "matmul: shapes [2, 3] and [2, 3] cannot be multiplied (3 != 2)"),
        "matmul shape mismatch message");
  em_tensor *c45 = NULL;
  em_zeros(&c45, SHAPE(4, 5), EM_F32, cpu);
  em_tensor *c23 = NULL;
  em_zeros(&c23, SHAPE(2, 3), EM_F32, cpu);
  CHECK(fails(em_matmul(&y, c23, c45), EM_ERR_SHAPE, "matmul: shapes [2, 3] and [4, 5] cannot be multiplied (3 != 4)"),
        "matmul mismatch message as specified");
  em_tensor *ia = i64(SHAPE(2, 2), (int64_t[]){1, 2, 3, 4});
  CHECK_OK(em_matmul(&y, ia, ia), "int64 matmul (exact, as torch's on the CPU)");
  CHECK(is(y, EM_I64, SHAPE(2, 2)) && VALS(y, 0, 7, 10, 15, 22), "int64 matmul values");
  em_release(y);
  em_tensor *bm = NULL;
  em_to_dtype(&bm, ia, EM_BOOL);
  CHECK(fails(em_matmul(&y, bm, bm), EM_ERR_DTYPE, "matmul: expected float or int64 tensors, got bool"),
        "bool matmul is a dtype error");
  em_release(bm);
  em_tensor *d = f64(SHAPE(3, 2), (double[]){1, 2, 3, 4, 5, 6});
  CHECK(fails(em_matmul(&y, a, d), EM_ERR_DTYPE, "matmul: dtype mismatch"), "matmul dtype mismatch");
  em_tensor *s = f32(0, NULL, (float[]){2});
  CHECK(fails(em_matmul(&y, s, a), EM_ERR_SHAPE, "at least 1 dim"), "matmul of a 0-d tensor");
  em_tensor *b3 = NULL, *b4 = NULL;
  em_zeros(&b3, SHAPE(2, 3, 4), EM_F32, cpu);
  em_zeros(&b4, SHAPE(3, 4, 5), EM_F32, cpu);
  CHECK(fails(em_matmul(&y, b3, b4), EM_ERR_SHAPE, "batch dims of [2, 3, 4] and [3, 4, 5]"),
        "matmul batch dims that do not broadcast");
  CHECK(fails(em_bmm(&y, a, b), EM_ERR_SHAPE, "bmm: expected two 3-d tensors"), "bmm needs 3-d");
  CHECK(fails(em_bmm(&y, b3, b4), EM_ERR_SHAPE, "bmm: batch sizes differ"), "bmm batch mismatch");

  /* k == 0 gives zeros; empty m gives an empty result. */
  em_tensor *e1 = NULL, *e2 = NULL;
  em_zeros(&e1, SHAPE(2, 0), EM_F64, cpu);
  em_zeros(&e2, SHAPE(0, 3), EM_F64, cpu);
  CHECK_OK(em_matmul(&y, e1, e2), "matmul with k = 0");
  CHECK(is(y, EM_F64, SHAPE(2, 3)) && VALS(y, 0, 0, 0, 0, 0, 0, 0), "k = 0 gives zeros");
  em_release(y);
  CHECK_OK(em_matmul(&y, e2, tmp(rnd(SHAPE(3, 4), 1, false, false))), "matmul with m = 0");
  CHECK(is(y, EM_F64, SHAPE(0, 4)), "m = 0 gives [0, 4]");
  em_release(y);
  REL(a, b, v3, v2, c45, c23, ia, d, s, b3, b4, e1, e2);

  /* Against the host reference: batches, broadcasting, strided operands. */
  struct { int na; int64_t sa[4]; int nb; int64_t sb[4]; const char *name; } cases[] = {
    {3, {4, 2, 3}, 2, {3, 5}, "batched x matrix (one tall gemm)"},
    {2, {2, 3}, 3, {4, 3, 5}, "matrix x batched"},
    {3, {4, 2, 3}, 3, {4, 3, 5}, "batched x batched"},
    {4, {2, 1, 2, 3}, 3, {3, 3, 4}, "broadcast batch dims"},
    {4, {2, 3, 1, 3}, 2, {3, 2}, "batched with m = 1 x matrix"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    em_tensor *x = rnd(cases[i].na, cases[i].sa, (double)i, false, false);
    em_tensor *w = rnd(cases[i].nb, cases[i].sb, 10.0 + (double)i, false, false);
    /* The reference wants equal ndims: view the lower-rank one with leading 1s. */
    em_tensor *xr = NULL, *wr = NULL;
    int nd = cases[i].na > cases[i].nb ? cases[i].na : cases[i].nb;
    int64_t sx[4], sw[4];
    for (int j = 0; j < nd; j++) {
      sx[j] = j < nd - cases[i].na ? 1 : cases[i].sa[j - (nd - cases[i].na)];
      sw[j] = j < nd - cases[i].nb ? 1 : cases[i].sb[j - (nd - cases[i].nb)];
    }
    em_reshape(&xr, x, nd, sx);
    em_reshape(&wr, w, nd, sw);
    em_tensor *y2 = NULL;
    bool ok = em_matmul(&y2, x, w) == EM_OK;
    int64_t n = ok ? em_numel(y2) : 0;
    double *want = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (ok) ref_matmul(xr, wr, want);
    ok = ok && vals(y2, n, want, 1e-12);
    free(want);
    CHECK(ok, cases[i].name);
    REL(x, w, xr, wr, y2);
  }
  /* Transposed and sliced operands (gemm's transpose flags, leading dims). */
  em_tensor *p = rnd(SHAPE(5, 4), 3, false, false), *q = rnd(SHAPE(3, 5), 4, false, false);
  em_tensor *pt = NULL, *qt = NULL, *pn = NULL, *pc = NULL, *qc = NULL;
  em_transpose(&pt, p, 0, 1); /* [4,5], column-major */
  em_transpose(&qt, q, 0, 1); /* [5,3] */
  em_contiguous(&pc, pt);
  em_contiguous(&qc, qt);
  em_tensor *y1 = NULL, *y2 = NULL;
  em_matmul(&y1, pt, qt);
  em_matmul(&y2, pc, qc);
  double *w2 = y2 ? gc_host(y2) : NULL;
  CHECK(y1 && w2 && matmul_matches(pc, qc) && vals(y1, 12, w2, 1e-12), "matmul of transposed views");
  free(w2);
  REL(y1, y2);
  em_narrow(&pn, p, 1, 1, 3); /* [5,3] with leading dim 4 */
  em_tensor *pnc = NULL;
  em_contiguous(&pnc, pn);
  y1 = y2 = NULL;
  em_matmul(&y1, q, pn);
  em_matmul(&y2, q, pnc);
  w2 = y2 ? gc_host(y2) : NULL;
  CHECK(y1 && w2 && vals(y1, 9, w2, 1e-12), "matmul of a column slice (leading dim > cols)");
  free(w2);
  REL(y1, y2, p, q, pt, qt, pn, pc, qc, pnc);

  em_tensor *ba = rnd(SHAPE(3, 2, 4), 5, false, false), *bb = rnd(SHAPE(3, 4, 2), 6, false, false);
  em_tensor *r1 = NULL;
  CHECK_OK(em_bmm(&r1, ba, bb), "bmm");
  CHECK(is(r1, EM_F64, SHAPE(3, 2, 2)) && matmul_matches(ba, bb), "bmm values");
  REL(ba, bb, r1);
}

/* ---------------------------------------------------------------- */
/* Gradient checks                                                   */
/* ---------------------------------------------------------------- */

typedef struct { em_unary_op op; double a, b; } unary_arg;
static em_status f_unary(em_tensor **out, em_tensor *const *in, void *ud) {
  const unary_arg *u = ud;
  return em_unary(out, u->op, in[0], u->a, u->b);
}
static em_status f_binary(em_tensor **out, em_tensor *const *in, void *ud) {
  return em_binary(out, *(em_binary_op *)ud, in[0], in[1]);
}
typedef struct { em_binary_op op; double s; bool first; } scalar_arg;
static em_status f_scalar(em_tensor **out, em_tensor *const *in, void *ud) {
  const scalar_arg *a = ud;
  return a->first ? em_scalar_binary(out, a->op, a->s, in[0]) : em_binary_scalar(out, a->op, in[0], a->s);
}
static em_status f_where(em_tensor **out, em_tensor *const *in, void *ud) {
  (void)ud;
  return em_where(out, in[2], in[0], in[1]);
}
static em_status f_masked_fill(em_tensor **out, em_tensor *const *in, void *ud) {
  (void)ud;
  return em_masked_fill(out, in[0], in[1], 3.5);
}
typedef struct { int kind, nd, dims[4], correction; bool keep; } reduce_arg;
static em_status f_reduce(em_tensor **out, em_tensor *const *in, void *ud) {
  const reduce_arg *r = ud;
  switch (r->kind) {
    case 0: return em_sum(out, in[0], r->nd, r->dims, r->keep);
    case 1: return em_mean(out, in[0], r->nd, r->dims, r->keep);
    case 2: return em_var(out, in[0], r->nd, r->dims, r->correction, r->keep);
    case 3: return em_max(out, NULL, in[0], r->dims[0], r->keep);
    case 4: return em_min(out, NULL, in[0], r->dims[0], r->keep);
    case 5: return em_max_all(out, in[0]);
    default: return em_min_all(out, in[0]);
  }
}
static em_status f_sum_to(em_tensor **out, em_tensor *const *in, void *ud) {
  (void)ud;
  return em_sum_to(out, in[0], 2, (int64_t[]){1, 3});
}
static em_status f_matmul(em_tensor **out, em_tensor *const *in, void *ud) {
  (void)ud;
  return em_matmul(out, in[0], in[1]);
}
/* matmul of the transposes, so that gemm runs with its transpose flags. */
static em_status f_matmul_tt(em_tensor **out, em_tensor *const *in, void *ud) {
  em_tensor *at = NULL, *bt = NULL;
  (void)ud;
  em_status s = em_transpose(&at, in[0], -1, -2);
  if (!s) s = em_transpose(&bt, in[1], -1, -2);
  if (!s) s = em_matmul(out, at, bt);
  em_release(at);
  em_release(bt);
  return s;
}
static em_status f_bmm(em_tensor **out, em_tensor *const *in, void *ud) {
  (void)ud;
  return em_bmm(out, in[0], in[1]);
}

static void test_unary_grads(void) {
  unary_arg cases[] = {
    {EM_NEG, 0, 0},  {EM_EXP, 0, 0},       {EM_LOG, 0, 0},     {EM_SQRT, 0, 0},
    {EM_RSQRT, 0, 0}, {EM_ABS, 0, 0},      {EM_TANH, 0, 0},    {EM_SIGMOID, 0, 0},
    {EM_RELU, 0, 0}, {EM_GELU, 0, 0},      {EM_GELU_TANH, 0, 0}, {EM_ELU, 1.3, 0},
    {EM_CLAMP, -0.4, 0.7}, {EM_POW_SCALAR, 2.5, 0}, {EM_AFFINE, -1.5, 0.25}, {EM_SILU, 0, 0},
    {EM_SIN, 0, 0},  {EM_COS, 0, 0},  {EM_LOG1P, 0, 0}, {EM_EXPM1, 0, 0}, {EM_ERF, 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    em_unary_op op = cases[i].op;
    bool positive = op == EM_LOG || op == EM_SQRT || op == EM_RSQRT || op == EM_POW_SCALAR || op == EM_LOG1P;
    em_tensor *x = rnd(SHAPE(3, 4), 0.37 * (double)i, positive, true);
    char name[96];
    snprintf(name, sizeof name, "%s gradcheck", em_unary_name(op));
    CHECK(gradcheck(f_unary, 1, &x, &cases[i], NULL), name);
    em_release(x);
  }
}

static em_status f_tanh_of_transpose(em_tensor **out, em_tensor *const *in, void *ud) {
  em_tensor *t = NULL;
  (void)ud;
  em_status s = em_transpose(&t, in[0], 0, 1);
  if (!s) s = em_unary(out, EM_SIGMOID, t, 0, 0);
  em_release(t);
  return s;
}

static void test_binary_grads(void) {
  struct { em_binary_op op; int na; int64_t sa[3]; int nb; int64_t sb[3]; bool pos; } cases[] = {
    {EM_ADD, 2, {2, 3}, 2, {2, 3}, false},  {EM_ADD, 2, {2, 3}, 1, {3}, false},
    {EM_SUB, 2, {2, 1}, 2, {1, 3}, false},  {EM_MUL, 3, {2, 1, 3}, 2, {4, 1}, false},
    {EM_MUL, 2, {2, 3}, 0, {0}, false},     {EM_DIV, 2, {2, 3}, 1, {3}, true},
    {EM_DIV, 1, {3}, 2, {2, 3}, true},      {EM_POW, 2, {2, 3}, 1, {3}, true},
    {EM_MAXIMUM, 2, {2, 3}, 1, {3}, false}, {EM_MINIMUM, 2, {3, 1}, 1, {2}, false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    em_tensor *in[2] = {rnd(cases[i].na, cases[i].sa, 0.3 + (double)i, cases[i].pos, true),
                        rnd(cases[i].nb, cases[i].sb, 7.1 + (double)i, cases[i].pos, true)};
    char name[128];
    snprintf(name, sizeof name, "%s gradcheck (%d-d with %d-d)", em_binary_name(cases[i].op),
             cases[i].na, cases[i].nb);
    CHECK(gradcheck(f_binary, 2, in, &cases[i].op, NULL), name);
    REL(in[0], in[1]);
  }
  /* Only one operand requiring grad (the other is not saved for backward). */
  em_binary_op ops1[2] = {EM_MUL, EM_DIV};
  for (int k = 0; k < 4; k++) {
    em_tensor *in[2] = {rnd(SHAPE(2, 3), 1, true, k % 2 == 0), rnd(SHAPE(3), 2, true, k % 2 == 1)};
    char name[96];
    snprintf(name, sizeof name, "%s gradcheck, only operand %d requires grad", em_binary_name(ops1[k / 2]),
             k % 2 + 1);
    CHECK(gradcheck(f_binary, 2, in, &ops1[k / 2], NULL), name);
    REL(in[0], in[1]);
  }
  /* pow where the base is 0 and the exponent 0: gradients are 0, not NaN. */
  em_tensor *a = f64(SHAPE(2), (double[]){0, 2}), *b = f64(SHAPE(2), (double[]){0, 3});
  em_tensor *y = NULL, *l = NULL;
  em_set_requires_grad(a, true);
  em_set_requires_grad(b, true);
  em_binary(&y, EM_POW, a, b);
  em_sum(&l, y, 0, NULL, false);
  CHECK_OK(em_backward(l, NULL, false), "pow backward at 0^0");
  /* torch: a.grad = [0, 12], b.grad = [0, 8 log 2] */
  CHECK(a->grad && b->grad && VALS(a->grad, 1e-12, 0, 12) && VALS(b->grad, 1e-12, 0, 8 * log(2.0)),
        "pow gradients at 0^0 follow PyTorch");
  REL(a, b, y, l);
  /* maximum with ties splits the gradient (PyTorch). */
  a = f64(SHAPE(3), (double[]){1, 2, 3});
  b = f64(SHAPE(3), (double[]){1, 5, 0});
  em_set_requires_grad(a, true);
  em_set_requires_grad(b, true);
  y = l = NULL;
  em_binary(&y, EM_MAXIMUM, a, b);
  em_sum(&l, y, 0, NULL, false);
  CHECK_OK(em_backward(l, NULL, false), "maximum backward with a tie");
  CHECK(VALS(a->grad, 0, 0.5, 0, 1) && VALS(b->grad, 0, 0.5, 1, 0), "maximum ties share the gradient");
  REL(a, b, y, l);

  scalar_arg sc[] = {{EM_ADD, 0.7, false}, {EM_SUB, 2, false}, {EM_MUL, -1.5, false},
                     {EM_DIV, 3, false},   {EM_POW, 3, false}, {EM_SUB, 2, true},
                     {EM_DIV, 2, true},    {EM_POW, 1.7, true}, {EM_MAXIMUM, 0.1, false}};
  for (size_t i = 0; i < sizeof sc / sizeof sc[0]; i++) {
    em_tensor *x = rnd(SHAPE(2, 3), 0.5 * (double)i, sc[i].op == EM_DIV && sc[i].first, true);
    char name[96];
    snprintf(name, sizeof name, "%s %s gradcheck", sc[i].first ? "scalar" : "tensor", em_binary_name(sc[i].op));
    CHECK(gradcheck(f_scalar, 1, &x, &sc[i], NULL), name);
    em_release(x);
  }

  em_tensor *x = rnd(SHAPE(3, 2), 4, false, true);
  CHECK(gradcheck(f_tanh_of_transpose, 1, &x, NULL, NULL), "sigmoid gradcheck on a transposed view");
  em_release(x);
  /* where and masked_fill */
  em_tensor *w[3] = {rnd(SHAPE(2, 3), 1, false, true), rnd(SHAPE(3), 2, false, true),
                     bools(SHAPE(2, 1), (uint8_t[]){1, 0})};
  CHECK(gradcheck(f_where, 3, w, NULL, NULL), "where gradcheck (broadcast operands)");
  em_release(w[2]);
  w[2] = bools(SHAPE(2, 3), (uint8_t[]){1, 0, 0, 1, 1, 0});
  CHECK(gradcheck(f_where, 3, w, NULL, NULL), "where gradcheck (full condition)");
  REL(w[0], w[1], w[2]);
  em_tensor *mf[2] = {rnd(SHAPE(2, 3), 3, false, true), bools(SHAPE(3), (uint8_t[]){0, 1, 1})};
  CHECK(gradcheck(f_masked_fill, 2, mf, NULL, NULL), "masked_fill gradcheck");
  REL(mf[0], mf[1]);
}

static void test_reduce_grads(void) {
  reduce_arg cases[] = {
    {0, 0, {0}, 0, false},     {0, 1, {1}, 0, false},       {0, 2, {0, 2}, 0, true},
    {0, 2, {2, 0}, 0, false},  {1, 0, {0}, 0, false},       {1, 1, {-1}, 0, true},
    {1, 2, {0, 2}, 0, false},  {2, 0, {0}, 1, false},       {2, 1, {1}, 1, true},
    {2, 2, {0, 2}, 1, false},  {2, 1, {2}, 0, false},       {3, 1, {1}, 0, false},
    {3, 1, {0}, 0, true},      {4, 1, {2}, 0, false},       {5, 0, {0}, 0, false},
    {6, 0, {0}, 0, false},
  };
  const char *kinds[] = {"sum", "mean", "var", "max", "min", "max_all", "min_all"};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    em_tensor *x = rnd(SHAPE(2, 3, 4), 0.21 * (double)i, false, true);
    char name[128];
    snprintf(name, sizeof name, "%s gradcheck (%d dims%s%s, case %zu)", kinds[cases[i].kind], cases[i].nd,
             cases[i].keep ? ", keepdim" : "", cases[i].kind == 2 && cases[i].correction == 0 ? ", biased" : "", i);
    CHECK(gradcheck(f_reduce, 1, &x, &cases[i], NULL), name);
    em_release(x);
  }
  em_tensor *x = rnd(SHAPE(2, 3), 1, false, true);
  CHECK(gradcheck(f_sum_to, 1, &x, NULL, NULL), "sum_to gradcheck");
  em_release(x);

  /* max_all with ties: the gradient is shared evenly (PyTorch). */
  x = f64(SHAPE(4), (double[]){3, 1, 3, 2});
  em_set_requires_grad(x, true);
  em_tensor *y = NULL;
  em_max_all(&y, x);
  CHECK_OK(em_backward(y, NULL, false), "max_all backward with ties");
  CHECK(x->grad && VALS(x->grad, 0, 0.5, 0, 0.5, 0), "max_all ties share the gradient");
  REL(x, y);
  /* max along a dim with ties: the first position gets it. */
  x = f64(SHAPE(2, 2), (double[]){3, 3, 1, 2});
  em_set_requires_grad(x, true);
  y = NULL;
  em_tensor *l = NULL;
  em_max(&y, NULL, x, 1, false);
  em_sum(&l, y, 0, NULL, false);
  CHECK_OK(em_backward(l, NULL, false), "max backward with ties");
  CHECK(x->grad && VALS(x->grad, 0, 1, 0, 0, 1), "max ties: gradient to the first index");
  REL(x, y, l);
}

static void test_matmul_grads(void) {
  struct { int na; int64_t sa[4]; int nb; int64_t sb[4]; const char *name; } cases[] = {
    {2, {2, 3}, 2, {3, 4}, "matmul gradcheck 2-d"},
    {1, {3}, 1, {3}, "matmul gradcheck dot"},
    {1, {3}, 2, {3, 2}, "matmul gradcheck vector x matrix"},
    {2, {2, 3}, 1, {3}, "matmul gradcheck matrix x vector"},
    {3, {2, 2, 3}, 2, {3, 2}, "matmul gradcheck batched x matrix"},
    {2, {2, 3}, 3, {2, 3, 2}, "matmul gradcheck matrix x batched"},
    {4, {2, 1, 2, 3}, 3, {3, 3, 2}, "matmul gradcheck broadcast batches"},
    {3, {2, 2, 3}, 1, {3}, "matmul gradcheck batched x vector"},
    {1, {3}, 3, {2, 3, 2}, "matmul gradcheck vector x batched"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    em_tensor *in[2] = {rnd(cases[i].na, cases[i].sa, 0.7 * (double)i, false, true),
                        rnd(cases[i].nb, cases[i].sb, 3.3 + (double)i, false, true)};
    CHECK(gradcheck(f_matmul, 2, in, NULL, NULL), cases[i].name);
    REL(in[0], in[1]);
  }
  em_tensor *in[2] = {rnd(SHAPE(2, 4, 3), 1, false, true), rnd(SHAPE(2, 5, 4), 2, false, true)};
  CHECK(gradcheck(f_matmul_tt, 2, in, NULL, NULL), "matmul gradcheck on transposed views");
  REL(in[0], in[1]);
  em_tensor *bi[2] = {rnd(SHAPE(2, 3, 4), 4, false, true), rnd(SHAPE(2, 4, 2), 5, false, true)};
  CHECK(gradcheck(f_bmm, 2, bi, NULL, NULL), "bmm gradcheck");
  REL(bi[0], bi[1]);
}

/* ---------------------------------------------------------------- */
/* Speed of the small-add fast path (reported, not asserted: the     */
/* tests also run under valgrind and sanitizers).                    */
/* ---------------------------------------------------------------- */

static void report_add_speed(void) {
  float v[16] = {0};
  em_tensor *a = f32(SHAPE(16), v), *b = f32(SHAPE(16), v), *c = NULL;
  const int n = 200000;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < n; i++) {
    em_add(&c, a, b);
    em_release(c);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double ns = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / n;
  printf("# em_add of two 16-element float32 tensors: %.0f ns per call\n", ns);
  REL(a, b);
}

int main(void) {
  if (em_cpu_device(&cpu) != EM_OK) {
    printf("not ok 1 - cpu backend: %s\n0 passed, 1 failed\n", em_error_message());
    return 1;
  }
  test_binary_values();
  test_scalar_ops();
  test_unary_values();
  test_where_masked();
  test_inplace();
  test_reduce_values();
  test_matmul_values();
  pool_free();
  test_unary_grads();
  test_binary_grads();
  test_reduce_grads();
  test_matmul_grads();
  report_add_speed();
  return tap_done();
}
