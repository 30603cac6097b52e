/*
** gpu_vs_cpu.c -- runs every kernel of the CUDA backend and of the CPU
** backend on the same fresh random inputs and compares the results.
**
**   gpu_vs_cpu [--cuda PLUGIN.so] [--cpu PLUGIN.so] [--seed N]
**
** Both plugins are dlopen()ed directly (not through ember's loader), so
** the CUDA plugin may also be the emulated build (emu/). Where the CPU
** backend has no bfloat16 kernel, the CUDA bfloat16 result is compared with
** the CPU float32 result on the same bfloat16-rounded inputs, with a
** bfloat16-sized tolerance. Exit status: 0 all passed, 1 a failure, 77
** skipped (no CUDA device: the reason is printed). The last line is
** "N passed, M failed".
*/
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember_backend.h"
#include "ember_plugin.h"
#include "gpu_vs_cpu.h"

int g_passed, g_failed;
const em_backend *g_gpu, *g_cpu;

/* ------------------------------------------------------------------ */
/* random numbers and bfloat16                                         */
/* ------------------------------------------------------------------ */

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
void rng_seed(uint64_t s) { rng_state = s ? s : 1; }
static uint64_t rng_next(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}
double rng_u(void) { return (double)(rng_next() >> 11) / 9007199254740992.0; }
int64_t rng_int(int64_t n) { return (int64_t)(rng_next() % (uint64_t)n); }

/* n random values in [lo, hi) of dtype dt (bool: 0/1, int64: floor). */
void *host_rand(em_dtype dt, int64_t n, double lo, double hi) {
  void *p = malloc((size_t)(n > 0 ? n : 1) * em_dtype_size(dt));
  for (int64_t i = 0; i < n; i++) {
    double v = lo + (hi - lo) * rng_u();
    switch (dt) {
      case EM_F32: ((float *)p)[i] = (float)v; break;
      case EM_F64: ((double *)p)[i] = v; break;
      case EM_I64: ((int64_t *)p)[i] = (int64_t)floor(v); break;
      case EM_BOOL: ((uint8_t *)p)[i] = v >= (lo + hi) / 2; break;
      case EM_BF16: ((uint16_t *)p)[i] = em_f32_to_bf16((float)v); break;
      default: break;
    }
  }
  return p;
}

double host_get(em_dtype dt, const void *p, int64_t i) {
  switch (dt) {
    case EM_F32: return ((const float *)p)[i];
    case EM_F64: return ((const double *)p)[i];
    case EM_I64: return (double)((const int64_t *)p)[i];
    case EM_BOOL: return ((const uint8_t *)p)[i];
    case EM_BF16: return em_bf16_to_f32(((const uint16_t *)p)[i]);
    default: return NAN;
  }
}

/* bf16 data as float32 (for the CPU side of a bfloat16 comparison). */
float *bf16_widen(const uint16_t *h, int64_t n) {
  float *f = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
  for (int64_t i = 0; i < n; i++) f[i] = em_bf16_to_f32(h[i]);
  return f;
}

/* ------------------------------------------------------------------ */
/* device buffers                                                      */
/* ------------------------------------------------------------------ */

void *dput(side *s, const void *host, size_t bytes) {
  void *p = NULL;
  if (s->n >= SIDE_MAX) return NULL;
  em_status st = s->be->alloc(0, bytes, &p);
  if (st) {
    printf("  %s alloc of %zu bytes failed: %s\n", s->be->name, bytes, em_error_message());
    return NULL;
  }
  if (host && bytes) s->be->copy_h2d(0, p, host, bytes);
  else if (bytes) {
    void *z = calloc(1, bytes);
    s->be->copy_h2d(0, p, z, bytes);
    free(z);
  }
  s->ptr[s->n] = p;
  s->bytes[s->n++] = bytes;
  return p;
}

void dget(side *s, void *host, const void *dev, size_t bytes) {
  if (bytes && s->be->copy_d2h(0, host, dev, bytes))
    printf("  %s copy_d2h failed: %s\n", s->be->name, em_error_message());
}

void side_free(side *s) {
  for (int i = 0; i < s->n; i++) s->be->free(0, s->ptr[i], s->bytes[i]);
  s->n = 0;
}

em_kview kview(void *data, em_dtype dt, int ndim, const int64_t *shape, const int64_t *stride) {
  em_kview v;
  memset(&v, 0, sizeof v);
  v.data = data;
  v.dtype = dt;
  v.ndim = ndim;
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    v.shape[d] = shape[d];
    v.stride[d] = stride ? stride[d] : s;
    s *= shape[d];
  }
  return v;
}

/* ------------------------------------------------------------------ */
/* comparing                                                           */
/* ------------------------------------------------------------------ */

/* The worst |a - b| / (atol + rtol |b|) over n elements; equal
** infinities and NaN in both places count as equal, NaN in one as inf. */
double compare(em_dtype da, const void *a, em_dtype db, const void *b, int64_t n, double atol,
               double rtol) {
  double worst = 0;
  for (int64_t i = 0; i < n; i++) {
    double x = host_get(da, a, i), y = host_get(db, b, i);
    double r;
    if (isnan(x) || isnan(y)) r = (isnan(x) && isnan(y)) ? 0 : INFINITY;
    else if (isinf(x) || isinf(y)) r = x == y ? 0 : INFINITY;
    else r = fabs(x - y) / (atol + rtol * fabs(y));
    if (r > worst) worst = r;
  }
  return worst;
}

void expect(bool ok, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("%s ", ok ? "ok  " : "FAIL");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  if (ok) g_passed++;
  else g_failed++;
}

/* A comparison within tolerance (worst <= 1) and both statuses OK. */
void expect_close(const char *name, em_status sg, em_status sc, double worst) {
  if (sg || sc) {
    expect(false, "%s: status gpu %d cpu %d (%s)", name, (int)sg, (int)sc, em_error_message());
    return;
  }
  expect(worst <= 1.0, "%s (worst error %.3g of tolerance)", name, worst);
}

/* ------------------------------------------------------------------ */
/* loading                                                             */
/* ------------------------------------------------------------------ */

/* The backend of a plugin file, or NULL with the reason in why. */
static const em_backend *load(const char *path, char *why, size_t n) {
  void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    snprintf(why, n, "dlopen: %s", dlerror());
    return NULL;
  }
  const em_plugin_info *info = dlsym(dl, EM_PLUGIN_INFO_SYMBOL);
  em_plugin_init_fn init = (em_plugin_init_fn)dlsym(dl, EM_PLUGIN_INIT_SYMBOL);
  if (!info || !init || info->abi_version != EM_BACKEND_ABI_VERSION ||
      info->kind != EM_PLUGIN_BACKEND) {
    snprintf(why, n, "not a backend plugin of ABI %d", EM_BACKEND_ABI_VERSION);
    return NULL;
  }
  why[0] = 0;
  const em_backend *be = init(why, n);
  return be; /* the handle stays open for the process */
}

int main(int argc, char **argv) {
  const char *cuda_path = EMBER_PLUGIN_BUILD_DIR "/ember_backend_cuda.so";
  const char *cpu_path = EMBER_PLUGIN_BUILD_DIR "/ember_backend_cpu.so";
  uint64_t seed = 1234;
  const char *only = NULL; /* run the test groups whose name contains this */
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--cuda") && i + 1 < argc) cuda_path = argv[++i];
    else if (!strcmp(argv[i], "--cpu") && i + 1 < argc) cpu_path = argv[++i];
    else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    else {
      fprintf(stderr, "usage: %s [--cuda PLUGIN.so] [--cpu PLUGIN.so] [--seed N] [--only GROUP]\n", argv[0]);
      return 2;
    }
  }
  char why[512];
  g_gpu = load(cuda_path, why, sizeof why);
  if (!g_gpu) {
    printf("SKIP: the CUDA backend did not load from %s: %s\n", cuda_path, why);
    printf("0 passed, 0 failed (skipped)\n");
    return 77;
  }
  g_cpu = load(cpu_path, why, sizeof why);
  if (!g_cpu) {
    printf("FAIL: the CPU backend did not load from %s: %s\n0 passed, 1 failed\n", cpu_path, why);
    return 1;
  }
  char name[256] = "?";
  if (g_gpu->device_name) g_gpu->device_name(0, name, sizeof name);
  printf("comparing %s (%s, %d device%s) with %s, seed %llu\n", cuda_path, name,
         g_gpu->device_count(), g_gpu->device_count() == 1 ? "" : "s", cpu_path,
         (unsigned long long)seed);
  rng_seed(seed);
  static const struct { const char *name; void (*run)(void); } groups[] = {
    {"memory", test_memory}, {"elementwise", test_elementwise}, {"reduce", test_reduce},
    {"gemm", test_gemm}, {"rows", test_rows}, {"index", test_index},
    {"random_optim", test_random_optim}, {"attention", test_attention},
    {"attention_decl", test_attention_decl},
  };
  for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++)
    if (!only || strstr(groups[i].name, only)) groups[i].run();
  printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
