/*
** sgemm_peer.c -- OpenBLAS's own sgemm, timed the same way as ember's
** matmul in matmul.lua, so the two GFLOP/s figures come from one run.
** usage: ember_sgemm_peer N REPEATS THREADS  -> prints "gflops <value>"
*/
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void openblas_set_num_threads(int n);

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1024;
  int reps = argc > 2 ? atoi(argv[2]) : 10;
  if (argc > 3) openblas_set_num_threads(atoi(argv[3]));
  size_t nn = (size_t)n * (size_t)n;
  float *a = malloc(nn * sizeof *a), *b = malloc(nn * sizeof *b), *c = malloc(nn * sizeof *c);
  if (!a || !b || !c) return 1;
  for (size_t i = 0; i < nn; i++) {
    a[i] = (float)(i % 7) * 0.1f;
    b[i] = (float)(i % 5) * 0.2f;
  }
  /* One warm-up call, then the best of `reps`, as matmul.lua does. */
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
  double best = 1e30;
  for (int r = 0; r < reps; r++) {
    double t0 = now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
    double dt = now() - t0;
    if (dt < best) best = dt;
  }
  printf("gflops %.2f\n", 2.0 * n * (double)n * n / best * 1e-9);
  free(a);
  free(b);
  free(c);
  return 0;
}
