/*
** backend_cpu.h -- what the CPU backend's test programs share
** (test_backend_cpu_*.c, one per family of kernels): loading the plugin,
** the check() lines, random inputs and the comparison with reference
** values, which are loops in double.
**
**   test_backend_cpu_FAMILY path/to/ember_backend_cpu.so
**
** Prints "ok N - name" / "not ok N - name" per check and "N passed, M
** failed" at the end; exits 1 on any failure. Linked with libember,
** whose em_error the plugin reports its errors through.
** Functions are static inline so that a program may leave some unused.
*/
#ifndef EMBER_TEST_BACKEND_CPU_H
#define EMBER_TEST_BACKEND_CPU_H

#include "ember.h"
#include "ember_backend.h"
#include "ember_bf16.h"
#include "ember_plugin.h"

#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const em_backend *be;
static int n_pass, n_fail;

__attribute__((format(printf, 2, 3))) static inline void check(int ok, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf(ok ? "ok %d - " : "not ok %d - ", n_pass + n_fail + 1);
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  if (ok)
    n_pass++;
  else
    n_fail++;
}

/* ---- helpers ---- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static inline double urand(void) { /* [-1, 1) */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (double)(rng_state >> 11) / 4503599627370496.0 - 1.0;
}

static inline void *xmalloc(size_t n) {
  void *p = calloc(n ? n : 1, 1);
  if (!p) {
    fprintf(stderr, "out of memory\n");
    exit(2);
  }
  return p;
}

static inline size_t esize(em_dtype dt) {
  return dt == EM_F32 ? 4 : dt == EM_BOOL ? 1 : dt == EM_BF16 ? 2 : 8;
}

/* Random array of n values of dtype dt, scaled, also returned as doubles. */
static inline void *rand_arr(em_dtype dt, int64_t n, double lo, double hi, double *copy) {
  void *p = xmalloc((size_t)n * esize(dt));
  for (int64_t i = 0; i < n; i++) {
    double v = lo + (hi - lo) * (urand() + 1) / 2;
    if (dt == EM_F32) {
      ((float *)p)[i] = (float)v;
      v = ((float *)p)[i];
    } else if (dt == EM_F64)
      ((double *)p)[i] = v;
    else if (dt == EM_I64) {
      ((int64_t *)p)[i] = (int64_t)floor(v);
      v = floor(v);
    } else if (dt == EM_BOOL) {
      ((uint8_t *)p)[i] = v > 0;
      v = v > 0;
    }
    if (copy) copy[i] = v;
  }
  return p;
}

/* bf16 arrays of n random values; `copy` (may be NULL) gets the rounded values. */
static inline uint16_t *rand_bf16(int64_t n, double *copy) {
  uint16_t *p = xmalloc((size_t)n * 2);
  for (int64_t i = 0; i < n; i++) {
    p[i] = em_f32_to_bf16((float)urand());
    if (copy) copy[i] = em_bf16_to_f32(p[i]);
  }
  return p;
}

static inline double get(const void *p, em_dtype dt, int64_t i) {
  switch (dt) {
    case EM_F32: return ((const float *)p)[i];
    case EM_F64: return ((const double *)p)[i];
    case EM_I64: return (double)((const int64_t *)p)[i];
    case EM_BOOL: return ((const uint8_t *)p)[i];
    default: return NAN;
  }
}

/* All |got - want| <= atol + rtol * |want| (NaN matches NaN, inf matches inf). */
static inline int close_to(const char *name, const void *got, em_dtype dt, const double *want, int64_t n,
                    double atol, double rtol) {
  for (int64_t i = 0; i < n; i++) {
    double g = get(got, dt, i), w = want[i];
    int ok = (isnan(w) && isnan(g)) || (isinf(w) && g == w) ||
             (isfinite(w) && fabs(g - w) <= atol + rtol * fabs(w));
    if (!ok) {
      printf("# %s: element %lld is %.17g, expected %.17g\n", name, (long long)i, g, w);
      return 0;
    }
  }
  return 1;
}

static inline em_kview kv(void *data, em_dtype dt, int ndim, const int64_t *shape) {
  em_kview v;
  memset(&v, 0, sizeof v);
  v.data = data;
  v.dtype = dt;
  v.ndim = ndim;
  int64_t st = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    v.shape[d] = shape[d];
    v.stride[d] = st;
    st *= shape[d];
  }
  return v;
}

static inline em_kview kvs(void *data, em_dtype dt, int ndim, const int64_t *shape,
                    const int64_t *stride) {
  em_kview v = kv(data, dt, ndim, shape);
  for (int d = 0; d < ndim; d++) v.stride[d] = stride[d];
  return v;
}

static inline int msg_has(const char *a, const char *b) {
  const char *m = em_error_message();
  return strstr(m, a) && (!b || strstr(m, b));
}

static inline const char *dtn(em_dtype dt) {
  return dt == EM_F32 ? "f32" : dt == EM_F64 ? "f64" : dt == EM_I64 ? "i64" : "bool";
}

/* Loads the plugin named by argv[1] into `be`: its handle, or NULL after
** saying why on stderr. */
static inline void *backend_cpu_open(int argc, char **argv) {
  setvbuf(stdout, NULL, _IONBF, 0);
  if (argc < 2) {
    fprintf(stderr, "usage: %s path/to/ember_backend_cpu.so\n", argv[0]);
    return NULL;
  }
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "cannot load %s: %s\n", argv[1], dlerror());
    return NULL;
  }
  em_plugin_init_fn init = (em_plugin_init_fn)dlsym(h, EM_PLUGIN_INIT_SYMBOL);
  char err[256] = "";
  be = init ? init(err, sizeof err) : NULL;
  if (!be) {
    fprintf(stderr, "ember_plugin_init failed: %s\n", err);
    dlclose(h);
    return NULL;
  }
  return h;
}

/* The closing line; unloads the plugin. The exit status: 1 on any failure. */
static inline int backend_cpu_done(void *h) {
  printf("%d passed, %d failed\n", n_pass, n_fail);
  dlclose(h);
  return n_fail ? 1 : 0;
}

#endif
