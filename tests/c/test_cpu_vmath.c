/*
** test_cpu_vmath.c -- the CPU backend's branch-free float32 exp, log and tanh
** (backends/cpu/cpu_vmath.h), with tanh's polynomial part alone, which the fused attention kernel and the
** traced programs (interpreted and compiled alike) use: within 2 ulp of
** the double-precision result over the whole float range, subnormals
** included, and the special values as libm gives them.
*/
#include "tap.h"

#include "../../backends/cpu/cpu_vmath.h"

#include <float.h>
#include <stdbool.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* Distance in units in the last place of float between got and want. */
static double ulps(float got, double want) {
  const float w = (float)want;
  const float ulp = nextafterf(fabsf(w), INFINITY) - fabsf(w);
  return fabs((double)got - want) / (double)(ulp > 0 ? ulp : FLT_MIN);
}

static void test_log(void) {
  double worst = 0;
  float at = 0;
  int n = 0;
  /* every 1021st bit pattern of the positive floats, subnormals and all */
  for (uint32_t bits = 1; bits < 0x7f800000u; bits += 1021) {
    float x;
    memcpy(&x, &bits, sizeof x);
    const double e = ulps(cpu_log_f32(x), log((double)x));
    if (e > worst) worst = e, at = x;
    n++;
  }
  printf("# cpu_log_f32: worst %.2f ulp at %a over %d values\n", worst, at, n);
  CHECK(worst <= 2.0, "cpu_log_f32 within 2 ulp of log over the positive floats");
  CHECK(cpu_log_f32(1.0f) == 0.0f, "log 1 = 0");
  CHECK(cpu_log_f32(0.0f) == -INFINITY, "log 0 = -inf");
  CHECK(cpu_log_f32(INFINITY) == INFINITY, "log inf = inf");
  CHECK(isnan(cpu_log_f32(-1.0f)), "log of a negative number is NaN");
  CHECK(isnan(cpu_log_f32(-INFINITY)), "log -inf is NaN");
  CHECK(isnan(cpu_log_f32(NAN)), "log NaN is NaN");
}

static void test_exp(void) {
  double worst = 0;
  for (float x = -87.0f; x < 88.0f; x += 0.01171875f) {
    const double e = ulps(cpu_exp_f32(x), exp((double)x));
    if (e > worst) worst = e;
  }
  printf("# cpu_exp_f32: worst %.2f ulp on [-87, 88)\n", worst);
  CHECK(worst <= 2.0, "cpu_exp_f32 within 2 ulp of exp");
  CHECK(cpu_exp_f32(-INFINITY) == 0.0f, "exp -inf = 0");
  CHECK(isnan(cpu_exp_f32(NAN)), "exp NaN is NaN");
}

static void test_tanh(void) {
  double worst = 0, abs_worst = 0;
  bool bounded = true, odd = true;
  for (float x = -12.0f; x < 12.0f; x += 0.000244140625f) {
    const float y = cpu_tanh_f32(x);
    const double t = tanh((double)x);
    const double e = ulps(y, t);
    if (e > worst) worst = e;
    if (fabs(y - t) > abs_worst) abs_worst = fabs(y - t);
    bounded = bounded && fabsf(y) <= 1.0f;
    odd = odd && cpu_tanh_f32(-x) == -y;
  }
  printf("# cpu_tanh_f32: worst %.2f ulp, %.3g absolute on [-12, 12)\n", worst, abs_worst);
  CHECK(worst <= 5.0 && abs_worst <= 3e-7, "cpu_tanh_f32 within 5 ulp and 3e-7 of tanh");
  CHECK(bounded && odd, "cpu_tanh_f32 stays in [-1, 1] and is odd");
  CHECK(cpu_tanh_f32(1e-6f) == 1e-6f && cpu_tanh_f32(0.0f) == 0.0f, "tanh of a tiny x is x");
  CHECK(cpu_tanh_f32(INFINITY) == 1.0f && cpu_tanh_f32(-INFINITY) == -1.0f && cpu_tanh_f32(10.0f) == 1.0f,
        "tanh from 9 on, and of +-inf, is +-1");
  CHECK(isnan(cpu_tanh_f32(NAN)), "tanh NaN is NaN");
}

/* The division-free polynomial that cpu_tanh_f32 takes inside (-1, 1),
** and which compiled traced programs run alone on a row whose arguments
** all lie there: within 1.01 ulp of tanh there (every 61st float, the
** interval's two ends too), odd, and the whole rule's own result. */
static void test_tanh_small(void) {
  double worst = 0;
  bool same = true, odd = true;
  for (uint32_t bits = 0;; bits += 61) {
    float x;
    memcpy(&x, &bits, sizeof x);
    if (!(x < 1.0f)) x = nextafterf(1.0f, 0.0f);
    const float y = cpu_tanh_small_f32(x);
    const double e = ulps(y, tanh((double)x));
    if (e > worst) worst = e;
    same = same && cpu_tanh_small_ok(x) && cpu_tanh_f32(x) == y && cpu_tanh_f32(-x) == -y;
    odd = odd && cpu_tanh_small_f32(-x) == -y;
    if (x == nextafterf(1.0f, 0.0f)) break;
  }
  printf("# cpu_tanh_small_f32: worst %.3f ulp on (-1, 1)\n", worst);
  CHECK(worst <= 1.01, "cpu_tanh_small_f32 within 1.01 ulp of tanh on (-1, 1)");
  CHECK(same && odd, "cpu_tanh_f32 is the polynomial inside (-1, 1), and it is odd");
  CHECK(!cpu_tanh_small_ok(1.0f) && !cpu_tanh_small_ok(-1.0f) && !cpu_tanh_small_ok(NAN) &&
            !cpu_tanh_small_ok(INFINITY),
        "the polynomial's range ends before +-1, and excludes NaN and inf");
}

int main(void) {
  test_log();
  test_exp();
  test_tanh();
  test_tanh_small();
  return tap_done();
}
