/*
** matmul_peer.c -- the peers of ember's matmul, timed the way matmul.lua
** times ember: OpenBLAS's own threaded sgemm, and oneDNN's own matmul
** primitive in float32 and bfloat16 (created once, then executed), with
** the implementation oneDNN chose (the ISA it runs on).
** usage: ember_matmul_peer M N K REPEATS THREADS
**   -> lines "openblas_f32 <gflops>", "onednn_f32 <gflops> <impl>", "onednn_bf16 ..."
*/
#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void openblas_set_num_threads(int n);

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#define CHECK(x)                                                   \
  do {                                                             \
    if ((x) != dnnl_success) {                                     \
      fprintf(stderr, "oneDNN call failed: %s\n", #x);             \
      exit(1);                                                     \
    }                                                              \
  } while (0)

/* Best of reps seconds for oneDNN's matmul of row-major [m,k] @ [k,n]. */
static double onednn(dnnl_data_type_t t, int64_t m, int64_t n, int64_t k, int reps, char *impl,
                     size_t impl_len) {
  size_t es = t == dnnl_bf16 ? 2 : 4;
  void *a = calloc((size_t)(m * k), es), *b = calloc((size_t)(k * n), es),
       *c = calloc((size_t)(m * n), es);
  dnnl_engine_t eng;
  dnnl_stream_t st;
  CHECK(dnnl_engine_create(&eng, dnnl_cpu, 0));
  CHECK(dnnl_stream_create(&st, eng, dnnl_stream_default_flags));
  dnnl_memory_desc_t amd, bmd, cmd;
  dnnl_dims_t ad = {m, k}, bd = {k, n}, cd = {m, n};
  CHECK(dnnl_memory_desc_init_by_tag(&amd, 2, ad, t, dnnl_ab));
  CHECK(dnnl_memory_desc_init_by_tag(&bmd, 2, bd, t, dnnl_ab));
  CHECK(dnnl_memory_desc_init_by_tag(&cmd, 2, cd, t, dnnl_ab));
  dnnl_matmul_desc_t md;
  CHECK(dnnl_matmul_desc_init(&md, &amd, &bmd, NULL, &cmd));
  dnnl_primitive_desc_t pd;
  CHECK(dnnl_primitive_desc_create(&pd, &md, NULL, eng, NULL));
  const char *s = "";
  dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &s);
  snprintf(impl, impl_len, "%s", s);
  dnnl_primitive_t p;
  CHECK(dnnl_primitive_create(&p, pd));
  dnnl_memory_t ma, mb, mc;
  CHECK(dnnl_memory_create(&ma, &amd, eng, a));
  CHECK(dnnl_memory_create(&mb, &bmd, eng, b));
  CHECK(dnnl_memory_create(&mc, &cmd, eng, c));
  dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
  double best = 1e30;
  for (int r = 0; r <= reps; r++) { /* r == 0 warms up */
    double t0 = now();
    CHECK(dnnl_primitive_execute(p, st, 3, args));
    CHECK(dnnl_stream_wait(st));
    double dt = now() - t0;
    if (r > 0 && dt < best) best = dt;
  }
  dnnl_memory_destroy(ma);
  dnnl_memory_destroy(mb);
  dnnl_memory_destroy(mc);
  dnnl_primitive_destroy(p);
  dnnl_primitive_desc_destroy(pd);
  dnnl_stream_destroy(st);
  dnnl_engine_destroy(eng);
  free(a);
  free(b);
  free(c);
  return best;
}

int main(int argc, char **argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: %s M N K REPEATS THREADS\n", argv[0]);
    return 2;
  }
  int m = atoi(argv[1]), n = atoi(argv[2]), k = atoi(argv[3]), reps = atoi(argv[4]);
  int threads = atoi(argv[5]);
  openblas_set_num_threads(threads);
  omp_set_num_threads(threads);
  float *a = malloc((size_t)m * k * sizeof *a), *b = malloc((size_t)k * n * sizeof *b),
        *c = malloc((size_t)m * n * sizeof *c);
  if (!a || !b || !c) return 1;
  for (size_t i = 0; i < (size_t)m * k; i++) a[i] = (float)(i % 7) * 0.1f;
  for (size_t i = 0; i < (size_t)k * n; i++) b[i] = (float)(i % 5) * 0.2f;
  const double flop = 2.0 * m * (double)n * k;
  double best = 1e30;
  for (int r = 0; r <= reps; r++) {
    double t0 = now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
    double dt = now() - t0;
    if (r > 0 && dt < best) best = dt;
  }
  printf("openblas_f32 %.2f\n", flop / best * 1e-9);
  char impl[128];
  double t = onednn(dnnl_f32, m, n, k, reps, impl, sizeof impl);
  printf("onednn_f32 %.2f %s\n", flop / t * 1e-9, impl);
  t = onednn(dnnl_bf16, m, n, k, reps, impl, sizeof impl);
  printf("onednn_bf16 %.2f %s\n", flop / t * 1e-9, impl);
  free(a);
  free(b);
  free(c);
  return 0;
}
