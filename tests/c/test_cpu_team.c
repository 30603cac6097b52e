/*
** test_cpu_team.c -- the CPU backend's rule for using its thread team
** (backends/cpu/cpu_team.c): two slow starts in a row, right after other
** regions, make regions run on the calling thread (slow starts after an
** idle moment do not count), a probe comes back after the probe period,
** and one quick start restores the team; cpu_info's line says which holds; results
** do not depend on it. The lags are fed through the plugin's test export,
** so the test does not depend on how busy the machine is.
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

int main(int argc, char **argv) {
  unsetenv("EMBER_CPU_TEAM");
  void *h = backend_cpu_open(argc, argv);
  if (!h) return 1;
  *(void **)&feed_work = dlsym(h, "ember_cpu_team_feed");
  check(feed_work != NULL, "the plugin exports ember_cpu_team_feed");
  if (!feed_work) return backend_cpu_done(h);
  test_rule();
  test_same_results();
  return backend_cpu_done(h);
}
