/*
** test_cpu_team.c -- the CPU backend's rule for using its thread team
** (backends/cpu/cpu_team.c): two slow starts in a row, right after other
** regions, make regions run on the calling thread (slow starts after an
** idle moment do not count), a probe comes back after the probe period,
** and one quick start restores the team; cpu_info's line says which holds; results
** do not depend on it. The lags are fed through the plugin's test export,
** so the test does not depend on how busy the machine is. oneDNN's
** convolutions, whose barriers wait for a descheduled worker, run on one
** thread while the state is contended, with the team's results.
*/
#include "backend_cpu.h"

#include <time.h>

static int (*feed_work)(uint64_t lag_ns, double work, int hot);

/* A region of elementwise work (0) begun right after the last one. */
static int feed(uint64_t lag_ns) { return feed_work(lag_ns, 0, 1); }
/* The same after an idle moment (the worker asleep). */
static int feed_cold(uint64_t lag_ns) { return feed_work(lag_ns, 0, 0); }

static void team_line(char *buf, size_t n) {
  buf[0] = 0;
  be->kernel_info(0, EM_F32, buf, n);
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static void test_rule(void) {
  const uint64_t slow = 100000, quick = 1000; /* ns */
  char line[2048];
  feed(slow); /* maybe the first region ever (libgomp creating its threads): not counted */
  check(feed(quick) == 1, "a quick start: the team runs");
  check(feed_cold(slow) == 1, "a slow start after an idle moment (a sleeping worker's wake-up) does not count");
  check(feed_cold(slow) == 1 && feed(quick) == 1, "nor does a second one: only starts while the worker spins say contention");
  check(feed(slow) == 1, "one slow start is not enough to leave the team");
  check(feed(quick) == 1 && feed(slow) == 1, "slow starts must come in a row");
  check(feed(slow) == 0, "two slow starts in a row: regions run on the calling thread");
  check(feed(0) == 0 && feed(0) == 0, "and keep doing so until the probe period passes");
  check(feed_work(0, 1e9, 1) == 1, "except a large region (a fused attention call), which keeps the team");
  check(feed(0) == 0, "without using up the probe");
  team_line(line, sizeof line);
  check(strstr(line, "; team: adaptive, now serial") != NULL, "cpu_info says so: %s",
        strstr(line, "; team: ") ? strstr(line, "; team: ") : line);
  sleep_ms(120); /* the probe period is 50 ms */
  check(feed(0) == 1 && feed(0) == 1, "after the probe period two regions in a row try the team");
  check(feed(0) == 0, "one probe per period");
  check(feed(quick) == 1 && feed(0) == 1, "a quick start ends the serial state");
  team_line(line, sizeof line);
  check(strstr(line, "; team: adaptive, now parallel") != NULL, "cpu_info says parallel again");
}

/* A sum long enough to be split into chunks gives the same bits on the
** team and on the calling thread (the chunks combine in order). */
static void test_same_results(void) {
  const int64_t n = 1 << 20;
  float *x = xmalloc(n * sizeof *x);
  for (int64_t i = 0; i < n; i++) x[i] = (float)((i * 7919 % 1000) - 500) * 1e-3f;
  float par = 0, ser = 0;
  feed(1000);
  em_status s1 = be->reduce(0, EM_RED_SUM, EM_F32, &par, NULL, x, 1, n, 1, 0);
  feed(100000);
  feed(100000); /* serial now */
  em_status s2 = be->reduce(0, EM_RED_SUM, EM_F32, &ser, NULL, x, 1, n, 1, 0);
  check(s1 == EM_OK && s2 == EM_OK && memcmp(&par, &ser, sizeof par) == 0,
        "a long sum: the same bits on the team (%.9g) and serially (%.9g)", (double)par, (double)ser);
  feed(1000);
  free(x);
}

/* The serial-convolution count in cpu_info's team line. */
static unsigned long long serial_convs(void) {
  char line[2048];
  team_line(line, sizeof line);
  const char *at = strstr(line, " regions and ");
  unsigned long long n = 0;
  if (!at || sscanf(at, " regions and %llu convolutions", &n) != 1) return ~0ull;
  return n;
}

/* One convolution's forward and backward (float32, 3x3 stride 2 on 24
** channels, Sort-of-CLEVR's stem), into out [y | dx | dw | db]. */
static em_status conv_run(const em_conv_args *a, const float *x, const float *w, const float *b,
                          const float *dy, float *out) {
  const int64_t ny = a->N * a->O * a->Ho * a->Wo, nx = a->N * a->C * a->H * a->W;
  const int64_t nw = a->O * a->C * a->kh * a->kw;
  em_status s = be->conv2d(0, a, out, x, w, b);
  if (!s) s = be->conv2d_backward(0, a, out + ny, out + ny + nx, out + ny + nx + nw, dy, x, w);
  return s;
}

static void test_conv_serial(void) {
  if (!be->conv2d || !be->conv2d_backward) return;
  em_conv_args a = {EM_F32, 8, 24, 19, 19, 24, 3, 3, 10, 10, {2, 2}, {1, 1}, {1, 1, 1, 1}, 1};
  const int64_t ny = a.N * a.O * a.Ho * a.Wo, nx = a.N * a.C * a.H * a.W, nw = a.O * a.C * 9;
  const int64_t nout = ny + nx + nw + a.O;
  float *x = xmalloc(nx * 4), *w = xmalloc(nw * 4), *b = xmalloc(a.O * 4), *dy = xmalloc(ny * 4);
  float *team = xmalloc(nout * 4), *ser = xmalloc(nout * 4);
  for (int64_t i = 0; i < nx; i++) x[i] = (float)((i * 7919 % 1000) - 500) * 1e-3f;
  for (int64_t i = 0; i < nw; i++) w[i] = (float)((i * 104729 % 997) - 498) * 1e-3f;
  for (int64_t i = 0; i < a.O; i++) b[i] = (float)i * 0.01f;
  for (int64_t i = 0; i < ny; i++) dy[i] = (float)((i * 31 % 211) - 105) * 1e-2f;
  feed(1000); /* parallel */
  const unsigned long long before = serial_convs();
  em_status s1 = conv_run(&a, x, w, b, dy, team);
  check(s1 == EM_OK && serial_convs() == before, "a convolution on an idle machine runs on the team (%llu -> %llu serial)",
        before, serial_convs());
  feed(100000);
  feed(100000); /* serial now */
  em_status s2 = conv_run(&a, x, w, b, dy, ser);
  const unsigned long long after = serial_convs();
  check(s2 == EM_OK && after != ~0ull && after >= before + 2,
        "while contended, its forward and backward run on one thread (cpu_info: %llu -> %llu)", before, after);
  double worst = 0;
  for (int64_t i = 0; i < nout; i++) {
    const double d = fabs((double)team[i] - ser[i]) / fmax(1, fabs((double)team[i]));
    worst = d > worst ? d : worst;
  }
  check(s1 == EM_OK && s2 == EM_OK && worst < 1e-5, "with the team's results (largest difference %.3g)", worst);
  feed(1000);
  free(x), free(w), free(b), free(dy), free(team), free(ser);
}

int main(int argc, char **argv) {
  unsetenv("EMBER_CPU_TEAM");
  void *h = backend_cpu_open(argc, argv);
  if (!h) return 1;
  *(void **)&feed_work = dlsym(h, "ember_cpu_team_feed");
  check(feed_work != NULL, "the plugin exports ember_cpu_team_feed");
  if (!feed_work) return backend_cpu_done(h);
  test_rule();
  test_same_results();
  test_conv_serial();
  return backend_cpu_done(h);
}
