/*
** cpu_tile_gemm.h -- what cpu_tile_gemm.c (the fused attention kernel's
** float32 tile products) and cpu_tile_rows.c (its products with few query
** rows) share: the target attributes, the paths and the one choice of
** path per process, made in cpu_tile_gemm.c.
*/
#ifndef EMBER_CPU_TILE_GEMM_H
#define EMBER_CPU_TILE_GEMM_H

#include "cpu_internal.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TG_X86 1
#define TG_AVX2 __attribute__((target("avx2,fma")))
#define TG_AVX512 __attribute__((target("avx512f,avx2,fma")))
#else
#define TG_X86 0
#endif
#define TG_INLINE static inline __attribute__((always_inline))

enum { TG_PLAIN, TG_AVX2_PATH, TG_AVX512_PATH, TG_BLAS };

/* The path this process runs (chosen once: cpuid, EMBER_CPU_TILE_GEMM). */
int cpu_tg_path(void);
/* The path named s ("avx512", "avx2", "plain", "blas"), or -1. */
int cpu_tg_parse(const char *s);
/* Can this CPU run path p? */
bool cpu_tg_runs(int p);
/* An empty product (nothing to write, or k = 0: C = beta C); true when done. */
bool cpu_tg_empty(int64_t m, int64_t n, int64_t k, float beta, float *C, int64_t ldc);
/* C = alpha op(A) op(B) + beta C on path p. */
void cpu_tg_run(int p, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *A,
                int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

#endif
