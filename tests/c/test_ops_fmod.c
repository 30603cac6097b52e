/*
** test_ops_fmod.c -- EM_FMOD (C's fmod, as torch.fmod) and
** em_floor_divide_int through libember on the CPU backend: exact values
** where a - trunc(a / b) b in float ops is not (torch.fmod's values, worked
** with PyTorch 1.13), the signs of zeros, NaN and infinities, int64 over
** the whole range (2^53 + 1, INT64_MIN % -1), a zero int64 divisor as an
** error, bfloat16 computed in float, and torch's gradient (1 for a,
** -trunc(a / b) for b) by a float64 gradcheck with broadcasting.
*/
#include "ember.h"
#include "gradcheck.h"
#include "tap.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static em_device cpu;

static em_tensor *make(em_dtype dt, int64_t n, const void *v) {
  em_tensor *t = NULL;
  if (em_from_host(&t, 1, &n, dt, v, cpu)) {
    printf("# from_host failed: %s\n", em_error_message());
    exit(2);
  }
  return t;
}

/* The bits of each element equal want's (as doubles: -0.0 is not 0.0, NaN is NaN). */
static bool same_bits(const em_tensor *t, int64_t n, const double *want) {
  double *got = gc_host(t);
  bool ok = got && em_numel(t) == n;
  for (int64_t i = 0; ok && i < n; i++)
    if (!(isnan(got[i]) && isnan(want[i])) && (got[i] != want[i] || signbit(got[i]) != signbit(want[i]))) {
      printf("# element %lld: got %a, want %a\n", (long long)i, got[i], want[i]);
      ok = false;
    }
  free(got);
  return ok;
}

static bool i64_is(const em_tensor *t, int64_t n, const int64_t *want) {
  if (!t || t->dtype != EM_I64 || em_numel(t) != n) return false;
  int64_t got[16];
  if (n > 16 || em_to_host(t, got) != EM_OK) return false;
  for (int64_t i = 0; i < n; i++)
    if (got[i] != want[i]) {
      printf("# element %lld: got %lld, want %lld\n", (long long)i, (long long)got[i], (long long)want[i]);
      return false;
    }
  return true;
}

static void test_float_values(void) {
  /* torch.fmod(a, b), float64: exact where a - trunc(a/b)*b is not (7.5 % 0.1
  ** gave 0, 1e17 % 3.3 gave 0), a subnormal divisor (a / b overflows), the
  ** signs of zeros, b = +-inf (a itself), a = inf or b = 0 (NaN) */
  double a[] = {7.5, 1e17, 1.0, -5.5, 5.5, -0.0, 3.0, -3.0, 2.5, INFINITY, 1.0, -6.0};
  double b[] = {0.1, 3.3, 5e-324, 2.0, -2.0, 2.0, INFINITY, -INFINITY, 0.0, 2.0, NAN, 3.0};
  double want[12];
  for (int i = 0; i < 12; i++) want[i] = fmod(a[i], b[i]);
  em_tensor *ta = make(EM_F64, 12, a), *tb = make(EM_F64, 12, b), *y = NULL;
  CHECK_OK(em_binary(&y, EM_FMOD, ta, tb), "fmod float64");
  CHECK(y && y->dtype == EM_F64 && same_bits(y, 12, want) && want[0] == 0x1.999999999997cp-4,
        "fmod float64: C's fmod bits (7.5 % 0.1, subnormal divisor, -0.0, inf, NaN)");
  em_release(y), y = NULL;

  /* float32: the CPU's fast path and its fallbacks give fmodf's bits */
  float fa[] = {7.5f, 1e17f, 1.0f, -5.5f, 5.5f, -0.0f, 3.0f, -3.0f, 2.5f, INFINITY, 16777217.0f, -4.0f},
        fb[] = {0.1f, 3.3f, 1e-45f, 2.0f, -2.0f, 2.0f, INFINITY, -INFINITY, 0.0f, 2.0f, 1e-7f, 2.0f};
  double fw[12];
  for (int i = 0; i < 12; i++) fw[i] = fmodf(fa[i], fb[i]);
  em_tensor *ga = make(EM_F32, 12, fa), *gb = make(EM_F32, 12, fb);
  CHECK_OK(em_binary(&y, EM_FMOD, ga, gb), "fmod float32");
  CHECK(y && y->dtype == EM_F32 && same_bits(y, 12, fw), "fmod float32: fmodf's bits (signs of zeros, -4 % 2 = -0)");
  em_release(y), y = NULL;

  /* a number on either side (a 0-d tensor of the tensor's dtype) */
  CHECK_OK(em_binary_scalar(&y, EM_FMOD, ga, 2.0), "fmod(t, 2)");
  double w2[12];
  for (int i = 0; i < 12; i++) w2[i] = fmodf(fa[i], 2.0f);
  CHECK(y && y->dtype == EM_F32 && same_bits(y, 12, w2), "fmod(float32 t, 2) values");
  em_release(y), y = NULL;
  CHECK_OK(em_scalar_binary(&y, EM_FMOD, 7.0, gb), "fmod(7, t)");
  for (int i = 0; i < 12; i++) w2[i] = fmodf(7.0f, fb[i]);
  CHECK(y && y->dtype == EM_F32 && same_bits(y, 12, w2), "fmod(7, float32 t) values");
  em_release(y), y = NULL;

  /* bfloat16 computes in float and rounds once: 5.5 % 2 = 1.5, -7 % 3 = -1,
  ** 1 % 0.1 (bfloat16 0.10009765625) = 0.0991... rounded to 0.09912109375 */
  em_tensor *ha = NULL, *hb = NULL;
  double hav[] = {5.5, -7.0, 1.0}, hbv[] = {2.0, 3.0, 0.1};
  em_tensor *da = make(EM_F64, 3, hav), *db = make(EM_F64, 3, hbv);
  CHECK_OK(em_to_dtype(&ha, da, EM_BF16), "to bfloat16");
  CHECK_OK(em_to_dtype(&hb, db, EM_BF16), "to bfloat16");
  CHECK_OK(em_binary(&y, EM_FMOD, ha, hb), "fmod bfloat16");
  double hw[] = {1.5, -1.0, 0.09912109375}; /* torch: [1.5, -1.0, 0.0991] */
  CHECK(y && y->dtype == EM_BF16 && same_bits(y, 3, hw) && (float)hw[2] == fmodf(1.0f, 0.10009765625f),
        "fmod bfloat16 values (computed in float)");
  em_release(y);
  em_release(ha), em_release(hb), em_release(da), em_release(db);
  em_release(ta), em_release(tb), em_release(ga), em_release(gb);
}

static uint64_t xorshift(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* Many pairs against libm, bit for bit: random bit patterns with close
** exponents, multiples k b one ulp either side (quotients next to an
** integer, up to 2^60), signs mixed (the CPU's fast path and its fallback). */
static void test_many(void) {
  enum { N = 60000 };
  static double a[N], b[N], want[N];
  static float fa[N], fb[N];
  static double fw[N];
  uint64_t st = 0x9E3779B97F4A7C15ull;
#define NEXT() xorshift(&st)
  for (int i = 0; i < N; i++) {
    uint64_t ua = NEXT(), ub = NEXT();
    if (i % 2) { /* exponents up to 60 apart */
      int64_t eb = (int64_t)((ua >> 52) & 0x7ff) - (int64_t)(NEXT() % 61);
      ub = (ub & 0x800fffffffffffffull) | ((uint64_t)(eb < 0 ? 0 : eb) << 52);
    }
    memcpy(&a[i], &ua, 8), memcpy(&b[i], &ub, 8);
    if (i % 3 == 0) { /* a = k b, nudged */
      double k = (double)(NEXT() >> (4 + NEXT() % 60));
      b[i] = ldexp(1.0 + (double)(NEXT() >> 12) * 0x1p-52, (int)(NEXT() % 200) - 100);
      a[i] = k * b[i];
      a[i] = i % 2 ? nextafter(a[i], INFINITY) : nextafter(a[i], -INFINITY);
      if (NEXT() & 1) a[i] = -a[i];
      if (NEXT() & 1) b[i] = -b[i];
    }
    want[i] = fmod(a[i], b[i]);
    fa[i] = (float)a[i], fb[i] = (float)b[i];
    if (!(fb[i] != 0) || !isfinite(fa[i])) fa[i] = (float)(i % 1000) - 500.25f, fb[i] = 3.3f;
    fw[i] = fmodf(fa[i], fb[i]);
  }
#undef NEXT
  em_tensor *ta = make(EM_F64, N, a), *tb = make(EM_F64, N, b), *y = NULL;
  CHECK_OK(em_binary(&y, EM_FMOD, ta, tb), "fmod float64, many pairs");
  CHECK(y && same_bits(y, N, want), "fmod float64 gives libm's bits on 60000 pairs (quotients next to integers)");
  em_release(y), y = NULL;
  em_tensor *ga = make(EM_F32, N, fa), *gb = make(EM_F32, N, fb);
  CHECK_OK(em_binary(&y, EM_FMOD, ga, gb), "fmod float32, many pairs");
  CHECK(y && same_bits(y, N, fw), "fmod float32 gives fmodf's bits on 60000 pairs");
  em_release(y);
  em_release(ta), em_release(tb), em_release(ga), em_release(gb);
}

static void test_int64(void) {
  /* int64: C's %, the sign of the dividend; 2^53 + 1 exact (float64 rounds it
  ** to 2^53); INT64_MIN % -1 is 0, not a trap */
  int64_t a[] = {9007199254740993LL, -7, 7, -7, INT64_MIN, INT64_MIN, INT64_MAX, 0};
  int64_t b[] = {2, 2, -2, -2, -1, 3, 10, 5};
  int64_t want[] = {1, -1, 1, -1, 0, -2, 7, 0};
  em_tensor *ta = make(EM_I64, 8, a), *tb = make(EM_I64, 8, b), *y = NULL;
  CHECK_OK(em_binary(&y, EM_FMOD, ta, tb), "fmod int64");
  CHECK(i64_is(y, 8, want), "fmod int64: C's % over the whole range (2^53 + 1, INT64_MIN % -1)");
  em_release(y), y = NULL;
  CHECK_OK(em_binary_scalar(&y, EM_FMOD, ta, 2), "fmod(int64 t, 2)");
  int64_t w2[] = {1, -1, 1, -1, 0, 0, 1, 0};
  CHECK(i64_is(y, 8, w2), "fmod(int64 t, 2) stays int64 and exact");
  em_release(y), y = NULL;

  /* a zero divisor is an error naming the op, not SIGFPE */
  int64_t z[] = {1, 0, 2, 1, 1, 1, 1, 1};
  em_tensor *tz = make(EM_I64, 8, z);
  CHECK_ERR(em_binary(&y, EM_FMOD, ta, tz), EM_ERR_ARG, "integer division by zero",
            "fmod int64 by zero is an error");
  CHECK(y == NULL, "no result after the error");
  CHECK_ERR(em_binary_scalar(&y, EM_FMOD, ta, 0), EM_ERR_ARG, "fmod", "fmod(int64 t, 0) names fmod");

  /* floor division in int64: floor(a / b), exact */
  CHECK_OK(em_floor_divide_int(&y, ta, tb), "floor_divide int64");
  int64_t fw[] = {4503599627370496LL, -4, -4, 3, INT64_MIN, -3074457345618258603LL, 922337203685477580LL, 0};
  CHECK(i64_is(y, 8, fw), "floor_divide int64 floors, exact (2^53 + 1 // 2, -7 // 2 = -4)");
  em_release(y), y = NULL;
  CHECK_ERR(em_floor_divide_int(&y, ta, tz), EM_ERR_ARG, "division by zero", "floor_divide int64 by zero");
  em_tensor *f = NULL;
  CHECK_OK(em_to_dtype(&f, ta, EM_F32), "to float32");
  CHECK_ERR(em_floor_divide_int(&y, f, tb), EM_ERR_DTYPE, "expected two int64 tensors",
            "floor_divide_int refuses floats");
  em_release(f);

  /* two bools are refused, as the other arithmetic on bools */
  uint8_t bv[] = {1, 0};
  int64_t two = 2;
  em_tensor *b1 = NULL, *b2 = NULL;
  CHECK_OK(em_from_host(&b1, 1, &two, EM_BOOL, bv, cpu), "bools");
  CHECK_OK(em_from_host(&b2, 1, &two, EM_BOOL, bv, cpu), "bools");
  CHECK_ERR(em_binary(&y, EM_FMOD, b1, b2), EM_ERR_DTYPE, "fmod: not supported on two bool tensors",
            "fmod of two bools is a dtype error");
  em_release(b1), em_release(b2);
  em_release(ta), em_release(tb), em_release(tz);
}

static em_status f_fmod(em_tensor **out, em_tensor *const *in, void *ud) {
  (void)ud;
  return em_binary(out, EM_FMOD, in[0], in[1]);
}

/* Values whose quotients stay away from integers (fmod jumps there). */
static em_tensor *vals(int ndim, const int64_t *shape, const double *v, bool grad) {
  em_tensor *t = NULL;
  if (em_from_host(&t, ndim, shape, EM_F64, v, cpu)) exit(2);
  em_set_requires_grad(t, grad);
  return t;
}

static void test_grads(void) {
  /* a [2, 3] and b [3]: b's gradient sums over the broadcast dim */
  const int64_t sa[2] = {2, 3}, sb[1] = {3};
  const double av[6] = {5.3, -7.7, 2.45, -0.35, 9.9, -4.1}, bv[3] = {1.3, 2.1, -0.7};
  /* against torch's numbers: a.grad = 1, b.grad = -sum over rows of trunc(a / b),
  ** trunc(a / b) being [4, -3, -3] and [0, 4, 5] */
  em_tensor *a = vals(2, sa, av, true), *b = vals(1, sb, bv, true), *y = NULL, *l = NULL;
  CHECK_OK(em_binary(&y, EM_FMOD, a, b), "fmod forward");
  CHECK_OK(em_sum(&l, y, 0, NULL, false), "sum");
  CHECK_OK(em_backward(l, NULL, false), "fmod backward");
  CHECK(a->grad && b->grad && same_bits(a->grad, 6, (double[]){1, 1, 1, 1, 1, 1}) &&
            same_bits(b->grad, 3, (double[]){-4, -1, -2}),
        "fmod gradients are torch's (1 for a, -trunc(a / b) for b)");
  em_release(y), em_release(l), em_release(a), em_release(b);

  a = vals(2, sa, av, true), b = vals(1, sb, bv, true);
  em_tensor *in[2] = {a, b};
  CHECK(gradcheck(f_fmod, 2, in, NULL, NULL), "fmod gradcheck (float64, b broadcast)");
  /* only a requires grad (nothing saved), then only b */
  em_tensor *c = vals(1, sb, bv, false), *d = vals(2, sa, av, false);
  em_tensor *in2[2] = {a, c}, *in3[2] = {d, b};
  CHECK(gradcheck(f_fmod, 2, in2, NULL, NULL), "fmod gradcheck, only a requires grad");
  CHECK(gradcheck(f_fmod, 2, in3, NULL, NULL), "fmod gradcheck, only b requires grad");
  em_release(a), em_release(b), em_release(c), em_release(d);
}

int main(void) {
  if (em_cpu_device(&cpu) != EM_OK) {
    printf("not ok 1 - cpu backend: %s\n0 passed, 1 failed\n", em_error_message());
    return 1;
  }
  CHECK(strcmp(em_binary_name(EM_FMOD), "fmod") == 0 && EM_FMOD == EM_NBINARY - 1 && EM_XOR == 15,
        "fmod is the last binary op; the others keep their numbers");
  test_float_values();
  test_many();
  test_int64();
  test_grads();
  return tap_done();
}
