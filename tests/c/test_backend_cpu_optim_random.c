/*
** test_backend_cpu_optim_random.c -- the optimizer steps (float and bfloat16) and
** the random draws (the Philox stream rule of ember_philox.h).
** Checks the CPU backend plugin's kernels against straightforward
** reference loops (in double), and their error paths; backend_cpu.h has
** the harness.
*/
#include "backend_cpu.h"
#include "ember_philox.h"

/* ---- random ---- */

static void test_random(void) {
  int64_t n = 1000, sh[1] = {1000};
  double *d = xmalloc(n * 8);
  float *f = xmalloc(n * 4);
  em_philox_block kat = em_philox(0, 0);
  check(kat.w[0] == 0x6627e8d5u && kat.w[1] == 0xe169c58du && kat.w[2] == 0xbc57ac4cu &&
            kat.w[3] == 0x9b00dbd8u,
        "Philox4x32-10 known answer (Random123, counter 0, key 0)");
  em_kview vd = kv(d, EM_F64, 1, sh), vf = kv(f, EM_F32, 1, sh);
  int ok = be->random(0, EM_RAND_UNIFORM, &vd, -2, 3, 42, 7) == EM_OK &&
           be->random(0, EM_RAND_UNIFORM, &vf, -2, 3, 42, 7) == EM_OK;
  for (int64_t i = 0; i < n && ok; i++) {
    double u = -2 + 5 * em_philox_uniform_at(42, 7, (uint64_t)i);
    ok = d[i] == u && f[i] == (float)u;
  }
  check(ok, "uniform f64 and f32 follow the stream rule exactly");
  ok = be->random(0, EM_RAND_NORMAL, &vd, 1, 2, 9, 123) == EM_OK &&
       be->random(0, EM_RAND_NORMAL, &vf, 1, 2, 9, 123) == EM_OK;
  for (int64_t i = 0; i < n && ok; i++) {
    double z = 1 + 2 * em_philox_normal_at(9, 123, (uint64_t)i);
    ok = d[i] == z && f[i] == (float)z;
  }
  check(ok, "normal f64 and f32 follow the stream rule exactly");
  int64_t big = 200000, bsh[1] = {200000};
  double *b = xmalloc(big * 8), m = 0, v = 0;
  em_kview vb = kv(b, EM_F64, 1, bsh);
  be->random(0, EM_RAND_NORMAL, &vb, 0, 1, 5, 0);
  for (int64_t i = 0; i < big; i++) m += b[i] / big;
  for (int64_t i = 0; i < big; i++) v += (b[i] - m) * (b[i] - m) / big;
  check(fabs(m) < 0.01 && fabs(v - 1) < 0.02, "normal draws: mean %.4f, variance %.4f", m, v);
  /* dropout */
  double *x = rand_arr(EM_F64, big, -1, 1, NULL), *out = xmalloc(big * 8), *mask = xmalloc(big * 8);
  ok = be->dropout(0, EM_F64, out, mask, x, big, 0.3, 77, 1000) == EM_OK;
  int64_t kept = 0;
  for (int64_t i = 0; i < big && ok; i++) {
    bool keep = em_philox_keep(77, 1000, (uint64_t)i, em_philox_keep_threshold(0.3));
    kept += keep;
    ok = mask[i] == (keep ? 1 / 0.7 : 0) && out[i] == (keep ? x[i] * (1 / 0.7) : 0);
  }
  check(ok && fabs((double)kept / big - 0.7) < 0.01, "dropout follows the stream rule, keeps %.4f",
        (double)kept / big);
  /* offsets whose low word wraps inside a vector of 16 counters, odd lengths */
  const uint64_t offs[3] = {0xFFFFFFF9ull, 0x1FFFFFFF3ull, 5};
  for (int t = 0; t < 3; t++) {
    const int64_t n = 1000 + 7 * t;
    ok = be->dropout(0, EM_F64, out, mask, x, n, 0.45, 0x123456789ull, offs[t]) == EM_OK;
    for (int64_t i = 0; i < n && ok; i++)
      ok = mask[i] == (em_philox_keep(0x123456789ull, offs[t], (uint64_t)i, em_philox_keep_threshold(0.45))
                           ? 1 / 0.55 : 0);
    check(ok, "dropout follows the stream rule across a 2^32 counter boundary (offset %#llx)",
          (unsigned long long)offs[t]);
  }
  ok = be->dropout(0, EM_F64, out, mask, x, big, 1, 77, 0) == EM_OK;
  for (int64_t i = 0; i < big && ok; i++) ok = out[i] == 0 && mask[i] == 0;
  check(ok, "dropout with p = 1 gives zeros");
  check(be->dropout(0, EM_F64, out, mask, x, big, 1.5, 77, 0) == EM_ERR_ARG,
        "dropout with p = 1.5 is an error");
  free(d);
  free(f);
  free(b);
  free(x);
  free(out);
  free(mask);
}

/* ---- optimizers ---- */

static void test_optim(void) {
  enum { N = 50, STEPS = 5 };
  for (int dec = 0; dec < 2; dec++)
    for (int k = 0; k < 2; k++) {
      em_dtype dt = k ? EM_F64 : EM_F32;
      double p[N], m[N] = {0}, v[N] = {0}, g[STEPS][N];
      void *P = rand_arr(dt, N, -1, 1, p), *M = xmalloc(N * 8), *V = xmalloc(N * 8), *G[STEPS];
      for (int s = 0; s < STEPS; s++) G[s] = rand_arr(dt, N, -1, 1, g[s]);
      const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.1;
      em_status st = EM_OK;
      for (int s = 1; s <= STEPS && !st; s++) {
        st = be->adam_step(0, dt, N, P, G[s - 1], M, V, lr, b1, b2, eps, wd, s, dec);
        for (int i = 0; i < N; i++) { /* torch.optim.Adam / AdamW, written out */
          double gi = g[s - 1][i];
          if (dec)
            p[i] *= 1 - lr * wd;
          else
            gi += wd * p[i];
          m[i] = b1 * m[i] + (1 - b1) * gi;
          v[i] = b2 * v[i] + (1 - b2) * gi * gi;
          double mhat = m[i] / (1 - pow(b1, s)), vhat = v[i] / (1 - pow(b2, s));
          p[i] -= lr * mhat / (sqrt(vhat) + eps);
        }
      }
      double tol = dt == EM_F32 ? 1e-6 : 1e-13;
      check(st == EM_OK && close_to("adam p", P, dt, p, N, tol, tol) &&
                close_to("adam m", M, dt, m, N, tol, tol) &&
                close_to("adam v", V, dt, v, N, tol, tol),
            "%s %s: %d steps match the reference formula", dec ? "adamw_step" : "adam_step",
            dtn(dt), STEPS);
      free(P);
      free(M);
      free(V);
      for (int s = 0; s < STEPS; s++) free(G[s]);
    }
  check(be->adam_step(0, EM_F32, 1, (float[1]){0}, (float[1]){0}, (float[1]){0}, (float[1]){0}, 0.1,
                      0.9, 0.999, 1e-8, 0, 0, false) == EM_ERR_ARG,
        "adam_step with step 0 is an error");
  /* SGD: plain, momentum with dampening, nesterov */
  const double cfg[3][4] = {{0, 0, 0, 0}, {0.9, 0.1, 0.01, 0}, {0.9, 0, 0.01, 1}};
  for (int c = 0; c < 3; c++) {
    double p[N], buf[N], g[STEPS][N], mom = cfg[c][0], damp = cfg[c][1], wd = cfg[c][2], lr = 0.1;
    bool nest = cfg[c][3] != 0;
    double *P = rand_arr(EM_F64, N, -1, 1, p), *B = xmalloc(N * 8), *G[STEPS];
    for (int s = 0; s < STEPS; s++) G[s] = rand_arr(EM_F64, N, -1, 1, g[s]);
    em_status st = EM_OK;
    for (int s = 0; s < STEPS && !st; s++) {
      st =
          be->sgd_step(0, EM_F64, N, P, G[s], mom != 0 ? B : NULL, lr, mom, damp, wd, nest, s == 0);
      for (int i = 0; i < N; i++) { /* torch.optim.SGD, written out */
        double d = g[s][i] + wd * p[i];
        if (mom != 0) {
          buf[i] = s == 0 ? d : mom * buf[i] + (1 - damp) * d;
          d = nest ? d + mom * buf[i] : buf[i];
        }
        p[i] -= lr * d;
      }
    }
    check(st == EM_OK && close_to("sgd", P, EM_F64, p, N, 1e-14, 1e-14),
          "sgd_step momentum %g dampening %g nesterov %d", mom, damp, nest);
    free(P);
    free(B);
    for (int s = 0; s < STEPS; s++) free(G[s]);
  }
}

/* ---- bfloat16 optimizer steps ---- */

static void test_bf16_optim(void) {
  enum { N = 300 };
  double P[N], G[N], Z[N];
  uint16_t *p = rand_bf16(N, P), *g = rand_bf16(N, G), m[N] = {0}, v[N] = {0};
  float pf[N], gf[N], mf[N] = {0}, vf[N] = {0};
  for (int i = 0; i < N; i++) pf[i] = (float)P[i], gf[i] = (float)G[i], Z[i] = 0;
  em_status s1 = be->adam_step(0, EM_BF16, N, p, g, m, v, 1e-2, 0.9, 0.999, 1e-8, 0.01, 1, true);
  em_status s2 = be->adam_step(0, EM_F32, N, pf, gf, mf, vf, 1e-2, 0.9, 0.999, 1e-8, 0.01, 1, true);
  double worst = 0, big = 0;
  for (int i = 0; i < N; i++) big = fmax(big, fabs(pf[i]));
  for (int i = 0; i < N; i++) worst = fmax(worst, fabs(em_bf16_to_f32(p[i]) - pf[i]) / big);
  check(s1 == EM_OK && s2 == EM_OK && worst <= 1.0 / 256, "bf16 adamw step vs float32: %.3g", worst);
  uint16_t buf[N];
  s1 = be->sgd_step(0, EM_BF16, N, p, g, buf, 0.1, 0.9, 0, 0, false, true);
  s2 = be->sgd_step(0, EM_F32, N, pf, gf, vf, 0.1, 0.9, 0, 0, false, true);
  worst = 0;
  for (int i = 0; i < N; i++) worst = fmax(worst, fabs(em_bf16_to_f32(p[i]) - pf[i]) / big);
  check(s1 == EM_OK && s2 == EM_OK && worst <= 2.0 / 256, "bf16 sgd momentum step vs float32: %.3g", worst);
  (void)Z;
  free(p), free(g);
}

/* sum_squares against a float64 loop, across the chunk size (65536) and
** the vector lanes' tail; bfloat16 values widen exactly. */
static void test_sum_squares(void) {
  const int64_t sizes[] = {0, 1, 17, 65536, 65536 * 3 + 5};
  for (int si = 0; si < 5; si++) {
    const int64_t n = sizes[si];
    double *xd = xmalloc((size_t)(n + 1) * 8), want = 0, got[3] = {-1, -1, -1};
    float *xf = rand_arr(EM_F32, n + 1, -3, 3, xd);
    for (int64_t i = 0; i < n; i++) want += xd[i] * xd[i];
    uint16_t *xb = xmalloc((size_t)(n + 1) * 2);
    double wantb = 0;
    for (int64_t i = 0; i < n; i++) {
      xb[i] = em_f32_to_bf16(xf[i]);
      const double v = em_bf16_to_f32(xb[i]);
      wantb += v * v;
    }
    bool ok = be->sum_squares(0, EM_F32, xf, n, &got[0]) == EM_OK &&
              be->sum_squares(0, EM_F64, xd, n, &got[1]) == EM_OK &&
              be->sum_squares(0, EM_BF16, xb, n, &got[2]) == EM_OK;
    const double tol = 1e-12 * (want > 1 ? want : 1), tolb = 1e-12 * (wantb > 1 ? wantb : 1);
    check(ok && fabs(got[0] - want) <= tol && fabs(got[1] - want) <= tol && fabs(got[2] - wantb) <= tolb,
          "sum_squares n=%lld: f32 %.17g f64 %.17g bf16 %.17g (want %.17g, bf16 %.17g)", (long long)n,
          got[0], got[1], got[2], want, wantb);
    free(xd), free(xf), free(xb);
  }
  double out;
  check(be->sum_squares(0, EM_I64, NULL, 0, &out) == EM_ERR_DTYPE, "sum_squares refuses int64");
}

int main(int argc, char **argv) {
  void *h = backend_cpu_open(argc, argv);
  if (!h) return 2;
  test_random();
  test_optim();
  test_bf16_optim();
  test_sum_squares();
  return backend_cpu_done(h);
}
