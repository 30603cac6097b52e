/*
** cpu_fault.c -- fault injection for tests: the N-th allocation of the CPU
** backend fails as if memory ran out, so a test can check that every such
** failure becomes a clean error that leaks nothing (tests/lua/
** fault_injection_spec.lua). Off unless armed; armed, it costs one atomic
** decrement per allocation.
**   EMBER_CPU_FAIL_ALLOC=N      the N-th allocation after the plugin loads fails
**   ember_cpu_fail_alloc(n)     exported: the n-th allocation from now fails
**                               (n <= 0 disarms); returns the number of
**                               allocations since the previous call
*/
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "ember_plugin.h"

static atomic_llong countdown; /* > 0: that many allocations to go; the last fails */
static atomic_llong allocs;

EM_PLUGIN_EXPORT long long ember_cpu_fail_alloc(long long n);

EM_PLUGIN_EXPORT long long ember_cpu_fail_alloc(long long n) {
  atomic_store(&countdown, n > 0 ? n : 0);
  return atomic_exchange(&allocs, 0);
}

/* Called by cpu_alloc: should this allocation fail? */
bool cpu_fault_alloc_hit(void);

bool cpu_fault_alloc_hit(void) {
  atomic_fetch_add_explicit(&allocs, 1, memory_order_relaxed);
  if (atomic_load_explicit(&countdown, memory_order_relaxed) <= 0) return false;
  return atomic_fetch_sub(&countdown, 1) == 1;
}

__attribute__((constructor)) static void cpu_fault_from_env(void) {
  const char *s = getenv("EMBER_CPU_FAIL_ALLOC");
  if (s && *s) atomic_store(&countdown, atoll(s));
}
