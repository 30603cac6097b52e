/*
** gpu_vs_cpu.h -- what the files of the gpu_vs_cpu program share: the two
** backends, host/device buffers, random inputs, comparison and reporting.
*/
#ifndef EMBER_GPU_VS_CPU_H
#define EMBER_GPU_VS_CPU_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "ember_backend.h"
#include "ember_bf16.h"

extern int g_passed, g_failed;
extern const em_backend *g_gpu, *g_cpu;

/* Device buffers of one backend, freed together. */
#define SIDE_MAX 48
typedef struct side {
  const em_backend *be;
  void *ptr[SIDE_MAX];
  size_t bytes[SIDE_MAX];
  int n;
} side;

/* A device copy of host (zeros when host is NULL). */
void *dput(side *s, const void *host, size_t bytes);
void dget(side *s, void *host, const void *dev, size_t bytes);
void side_free(side *s);
/* The attention tests' arguments for one side: sizes, device copies of q,
** k, v (host, in dtype d), room for out and lse; gpu_vs_cpu_attention.c. */
em_attention_args attn_args(side *sd, em_dtype d, int64_t B, int64_t H, int64_t Lq, int64_t Lk,
                            int64_t dk, int64_t dv, const void *q, const void *k, const void *v);
/* A view of dev data; stride NULL means contiguous. */
em_kview kview(void *data, em_dtype dt, int ndim, const int64_t *shape, const int64_t *stride);

void rng_seed(uint64_t s);
double rng_u(void);
int64_t rng_int(int64_t n);
void *host_rand(em_dtype dt, int64_t n, double lo, double hi);
double host_get(em_dtype dt, const void *p, int64_t i);
float *bf16_widen(const uint16_t *h, int64_t n);

double compare(em_dtype da, const void *a, em_dtype db, const void *b, int64_t n, double atol,
               double rtol);
void expect(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void expect_close(const char *name, em_status sg, em_status sc, double worst);

/* The test groups. */
void test_memory(void);
void test_elementwise(void);
void test_reduce(void);
void test_gemm(void);
void test_rows(void);
void test_index(void);
void test_random_optim(void);
void test_attention(void);
void test_attention_decl(void);

#endif
