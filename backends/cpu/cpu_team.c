/*
** cpu_team.c -- whether the next parallel region should use our OpenMP
** team, decided by how long the team took to start in recent ones.
**
** Why: on a machine where another process keeps a core busy, a region
** waits until the scheduler finds the worker a core, and the worker's
** spin afterwards (GOMP_SPINCOUNT) competes with the calling thread for
** the core it needs. Measured beside one busy process (2 cores, AMD EPYC
** VM, 64K-element ops): every cast, add or copy took 77-80 us instead of
** 3; a KV-cached decoding step 3.0 ms instead of 0.45; the seed
** classifier's step 43 ms against 31 on one thread. On an idle machine
** a region right after another starts in about 1 us (the worker still
** spinning), and two threads are faster; a worker that has gone to sleep
** takes a while to wake on an idle machine too (80 us on that VM). No
** fixed rule is right for both, and which one holds changes while a
** program runs, so it is measured: each region records when its first
** worker began (CPU_FOR and the kernels' own regions); two slow starts in
** a row (over TEAM_SLOW_NS) of regions begun while the worker still spins
** (TEAM_HOT_NS) mark the machine contended. Then regions too small to pay
** for such a start (TEAM_WORK_PER_NS) run on the calling thread (their
** results do not depend on the split), except a probe of two regions
** every TEAM_PROBE_NS, whose quick start ends the contended state.
**
** EMBER_CPU_TEAM=always keeps the team on for every region (the rule
** before this file); cpu_team_describe says what runs for ember.cpu_info.
** Products on oneDNN keep their own regions: they are large enough that
** a slow start costs a few percent of them. Its convolutions are the
** exception (cpu_team_contended, cpu_conv.c): their regions wait at
** barriers inside, each a wait for a descheduled worker, so while the
** state is contended they run on primitives made for one thread.
*/
#include "cpu_internal.h"
#include "ember_plugin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A start slower than this, right after another region, is a sign of
** contention: a spinning worker starts in about 1 us, a contended one in
** 30-80 or more. */
#define TEAM_SLOW_NS 25000u
/* Work (multiply-adds, or elements) for which a contended team still
** pays: the second thread saves about half the region's time alone, a
** slow start costs the start, so a region keeps the team when its work
** takes twice the recent starts alone. One unit of work (an element of an
** elementwise op, a multiply-add of the fused attention) took 0.05-0.08
** ns on one thread here; TEAM_WORK_PER_NS rounds that to 16 a ns, so the
** bar is 32 units per ns of the starts' average (2.5M at 80 us, 1M at
** 30), and at least TEAM_BIG_WORK_MIN. A fixed 512K let a decoding step's
** attention (1M) wake a sleeping worker every call: 232 us against 75 on
** one thread, on a VM whose idle wake-up takes 80 us. Regions that do not
** say their work (most CPU_FOR loops: rows of a softmax, blocks of a sum)
** count as small. */
#define TEAM_WORK_PER_NS 16.0
#define TEAM_BIG_WORK_MIN 524288.0
/* A region begun within this of the previous one's end finds the worker
** still spinning (GOMP_SPINCOUNT=3000). Measured on the seed classifier's
** step (AMD EPYC VM, 2 threads): idle, 7 of 275 such starts were slower
** than TEAM_SLOW_NS, and 151 of 394 later ones (a sleeping worker's
** wake-up, 80 us on that VM); beside a busy process 207 of 265 and 188 of
** 404. So only these starts count. */
#define TEAM_HOT_NS 20000u
/* How often a contended process tries its team again: two regions in a
** row (the second finds the worker awake, if the first woke it); a probe
** costs a slow start or two (about 80 us each) when the contention goes on. */
#define TEAM_PROBE_NS 50000000u

static int team_mode = -1;    /* -1 not read yet, 0 adaptive, 1 always */
static int team_started;      /* the first region (which creates the threads) ran */
static int team_slow_runs;    /* consecutive slow starts */
static int team_contended;    /* regions run serially, but for probes */
static uint64_t team_probe_at; /* when a contended process probes next */
static uint64_t team_switches; /* idle -> contended changes, for cpu_info */
static uint64_t team_serial;   /* regions run serially because of it */
static uint64_t team_lag_avg;  /* the recent starts, ns (each new one weighs 1/4) */
static uint64_t team_last_end; /* when the last region with the team ended */
static int team_probe_left;    /* regions of the current probe still to run with the team */
static uint64_t team_dnnl_serial; /* oneDNN convolutions run on one thread because of it */

uint64_t cpu_team_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int mode(void) {
  int m = __atomic_load_n(&team_mode, __ATOMIC_RELAXED);
  if (m < 0) {
    const char *e = getenv("EMBER_CPU_TEAM");
    m = e && strcmp(e, "always") == 0;
    __atomic_store_n(&team_mode, m, __ATOMIC_RELAXED);
  }
  return m;
}

/* The relaxed atomics keep concurrent callers (user threads, a region's
** nested call) free of data races; the state is a hint, so an occasional
** lost update only delays a switch by a region. */
bool cpu_team_contended(void) {
  return mode() != 1 && __atomic_load_n(&team_contended, __ATOMIC_RELAXED);
}

void cpu_team_count_serial_conv(void) { __atomic_add_fetch(&team_dnnl_serial, 1, __ATOMIC_RELAXED); }

bool cpu_team_go(double work) {
  if (mode() == 1 || !__atomic_load_n(&team_contended, __ATOMIC_RELAXED)) return true;
  const double bar = 2 * TEAM_WORK_PER_NS * (double)__atomic_load_n(&team_lag_avg, __ATOMIC_RELAXED);
  if (work >= (bar > TEAM_BIG_WORK_MIN ? bar : TEAM_BIG_WORK_MIN)) return true;
  if (__atomic_load_n(&team_probe_left, __ATOMIC_RELAXED) > 0) {
    __atomic_sub_fetch(&team_probe_left, 1, __ATOMIC_RELAXED);
    return true;
  }
  const uint64_t now = cpu_team_now();
  if (now >= __atomic_load_n(&team_probe_at, __ATOMIC_RELAXED)) {
    __atomic_store_n(&team_probe_at, now + TEAM_PROBE_NS, __ATOMIC_RELAXED);
    __atomic_store_n(&team_probe_left, 1, __ATOMIC_RELAXED);
    return true;
  }
  __atomic_add_fetch(&team_serial, 1, __ATOMIC_RELAXED);
  return false;
}

void cpu_team_note(uint64_t t0, uint64_t lag_ns) {
  const uint64_t last_end = __atomic_exchange_n(&team_last_end, cpu_team_now(), __ATOMIC_RELAXED);
  if (lag_ns == 0) return; /* a team of one: nothing was measured */
  /* the first region's start is libgomp creating its threads */
  if (!__atomic_exchange_n(&team_started, 1, __ATOMIC_RELAXED)) return;
  const uint64_t avg = __atomic_load_n(&team_lag_avg, __ATOMIC_RELAXED);
  __atomic_store_n(&team_lag_avg, avg ? (3 * avg + lag_ns) / 4 : lag_ns, __ATOMIC_RELAXED);
  /* a worker idle for longer than it spins is asleep, and waking it is
  ** slow on an idle machine too: only a start right after another region
  ** (the worker still spinning) says whether the CPUs are contended */
  if (last_end == 0 || t0 < last_end || t0 - last_end > TEAM_HOT_NS) return;
  if (lag_ns < TEAM_SLOW_NS) {
    __atomic_store_n(&team_slow_runs, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&team_contended, 0, __ATOMIC_RELAXED);
    return;
  }
  if (__atomic_add_fetch(&team_slow_runs, 1, __ATOMIC_RELAXED) >= 2 &&
      !__atomic_load_n(&team_contended, __ATOMIC_RELAXED)) {
    __atomic_store_n(&team_probe_at, cpu_team_now() + TEAM_PROBE_NS, __ATOMIC_RELAXED);
    __atomic_store_n(&team_contended, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&team_switches, 1, __ATOMIC_RELAXED);
  }
}

void cpu_team_describe(char *buf, size_t n) {
  if (mode() == 1) {
    snprintf(buf, n, "always (EMBER_CPU_TEAM=always)");
    return;
  }
  /* a team of one thread runs everything serially, whatever the CPUs do
  ** (it said "now parallel" after ember.set_num_threads(1)) */
  const char *now = omp_get_max_threads() == 1 ? "serial: one thread"
                    : __atomic_load_n(&team_contended, __ATOMIC_RELAXED) ? "serial: the CPUs are contended"
                                                                         : "parallel";
  snprintf(buf, n, "adaptive, now %s (%llu switches to serial, %llu regions and %llu convolutions run serially)", now,
           (unsigned long long)__atomic_load_n(&team_switches, __ATOMIC_RELAXED),
           (unsigned long long)__atomic_load_n(&team_serial, __ATOMIC_RELAXED),
           (unsigned long long)__atomic_load_n(&team_dnnl_serial, __ATOMIC_RELAXED));
}

EM_PLUGIN_EXPORT int ember_cpu_team_feed(uint64_t lag_ns, double work, int hot);
/* For tests: notes a region's start lag (0: none), begun right at the
** last region's end (hot) or a second after it, and returns whether the
** next region of `work` would use the team (cpu_team_go, probes included).
** The start is given, not timed, so a slow run (valgrind) is the same. */
EM_PLUGIN_EXPORT int ember_cpu_team_feed(uint64_t lag_ns, double work, int hot) {
  const uint64_t last = __atomic_load_n(&team_last_end, __ATOMIC_RELAXED);
  cpu_team_note(hot ? last : last + 1000000000u, lag_ns);
  return cpu_team_go(work);
}
