/*
** cpu_bf16.c -- bfloat16 for the row kernels (reductions, softmax, layer
** norm, cross entropy, random draws): inputs are widened to
** float32 buffers, the float32 kernel runs (its sums accumulate in float32
** or double), and results are rounded once to bfloat16.
**
** Why widen instead of a bfloat16 instantiation of every template: these
** kernels read each input once or twice and do several operations per
** element, so the extra pass over a float32 copy costs little next to the
** kernel, and the float32 code (vectorised exp, chunked sums that give the
** same bits at any thread count) serves both dtypes. Elementwise ops,
** index adds, dropout and the optimizers, which are pure memory traffic,
** have their own bfloat16 instantiations instead (cpu_binary_tmpl.h,
** cpu_dropout_tmpl.h, ...).
*/
#include "cpu_internal.h"
#include "cpu_bf16_avx512.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

/* The conversions of elements [lo, hi), as vector clones (CPU_FOR_RANGES). */
CPU_VECTOR_CLONES static void widen_range(float *restrict f, const uint16_t *restrict h, int64_t lo,
                                          int64_t hi) {
  for (int64_t i = lo; i < hi; i++) f[i] = em_bf16_to_f32(h[i]);
}

int cpu_bf16_simd(void) {
  static atomic_int level = -1; /* threads that race here store the same value */
  int lv = atomic_load_explicit(&level, memory_order_relaxed);
  if (lv < 0) {
    int l = CPU_BF16_PLAIN;
#if CPU_BF16_AVX512
    if (__builtin_cpu_supports("avx512f"))
      l = __builtin_cpu_supports("avx512bf16") ? CPU_BF16_AVX512BF16 : CPU_BF16_AVX512F;
#endif
    /* a ONEDNN_MAX_CPU_ISA cap emulates an older CPU here too, as in
    ** cpu_bgemm.c and cpu_tile_gemm.c */
    const char *cap = getenv("ONEDNN_MAX_CPU_ISA");
    if (cap && *cap && strcasecmp(cap, "ALL") && strcasecmp(cap, "DEFAULT")) {
      if (strncasecmp(cap, "AVX512", 6) && strncasecmp(cap, "AVX10", 5)) l = CPU_BF16_PLAIN;
      else if (l == CPU_BF16_AVX512BF16 && strncasecmp(cap, "AVX10", 5) &&
               strcasecmp(cap, "AVX512_CORE_BF16") && strcasecmp(cap, "AVX512_CORE_FP16") &&
               strncasecmp(cap, "AVX512_CORE_AMX", 15))
        l = CPU_BF16_AVX512F;
    }
    const char *e = getenv("EMBER_CPU_BF16");
    if (e && strcmp(e, "plain") == 0) l = CPU_BF16_PLAIN;
    else if (e && strcmp(e, "avx512") == 0 && l > CPU_BF16_AVX512F) l = CPU_BF16_AVX512F;
    atomic_store_explicit(&level, l, memory_order_relaxed);
    lv = l;
  }
  return lv;
}

/* "avx512_bf16 (vcvtneps2bf16)", "avx512f (...)" or "plain (...)", and
** the variable that chose it when one did, for cpu_info. */
const char *cpu_bf16_path(char *buf, size_t n) {
  static const char *const what[] = {"plain (the scalar rule in vector clones)",
                                     "avx512f (integer rounding)", "avx512_bf16 (vcvtneps2bf16)"};
  const int lv = cpu_bf16_simd();
  const char *e = getenv("EMBER_CPU_BF16"), *cap = getenv("ONEDNN_MAX_CPU_ISA");
  if (e && *e && strcmp(e, "plain") && strcmp(e, "avx512"))
    snprintf(buf, n, "%s, EMBER_CPU_BF16=%.24s is not plain or avx512", what[lv], e);
  else if (e && *e)
    snprintf(buf, n, "%s, EMBER_CPU_BF16=%s", what[lv], e);
  else if (cap && *cap && strcasecmp(cap, "ALL") && strcasecmp(cap, "DEFAULT"))
    snprintf(buf, n, "%s, ONEDNN_MAX_CPU_ISA=%.24s", what[lv], cap);
  else
    snprintf(buf, n, "%s", what[lv]);
  return buf;
}

#if CPU_BF16_AVX512
/* em_f32_to_bf16 on 16 lanes at a time, the last ones masked: one vpmovdw
** a vector, half the time of the scalar rule's 256-bit build. */
#define ROUND_AVX512(NAME, TARGET, ROUND)                                                    \
  TARGET static void NAME(uint16_t *restrict h, const float *restrict f, int64_t n) {        \
    int64_t i = 0;                                                                           \
    for (; i + 16 <= n; i += 16)                                                             \
      _mm256_storeu_si256((__m256i *)(h + i), ROUND(_mm512_loadu_ps(f + i)));                \
    if (i < n) {                                                                             \
      const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);                                  \
      const __m512i r = _mm512_cvtepu16_epi32(ROUND(_mm512_maskz_loadu_ps(m, f + i)));        \
      _mm512_mask_cvtepi32_storeu_epi16(h + i, m, r);                                        \
    }                                                                                        \
  }
ROUND_AVX512(round_avx512, CPU_AVX512_TARGET, cpu_bf16x16_round)
ROUND_AVX512(round_avx512bf16, CPU_AVX512BF16_TARGET, cpu_bf16x16_round_hw)
#endif

CPU_VECTOR_CLONES static void round_plain(uint16_t *restrict h, const float *restrict f,
                                          int64_t n) {
  for (int64_t i = 0; i < n; i++) h[i] = em_f32_to_bf16(f[i]);
}

void cpu_bf16_round(uint16_t *dst, const float *src, int64_t n) {
#if CPU_BF16_AVX512
  const int simd = cpu_bf16_simd();
  if (simd != CPU_BF16_PLAIN) {
    if (simd == CPU_BF16_AVX512BF16) round_avx512bf16(dst, src, n);
    else round_avx512(dst, src, n);
    return;
  }
#endif
  round_plain(dst, src, n);
}

void cpu_bf16_widen(float *dst, const uint16_t *src, int64_t n) {
  CPU_FOR_RANGES(n > CPU_PAR_MIN, n, lo, hi, widen_range(dst, src, lo, hi););
}

void cpu_bf16_narrow(uint16_t *dst, const float *src, int64_t n) {
  CPU_FOR_RANGES(n > CPU_PAR_MIN, n, lo, hi, cpu_bf16_round(dst + lo, src + lo, hi - lo););
}

/* The float32 buffers of one call, released together (cpu_scratch). */
enum { BF_SCRATCH_MAX = 6 }; /* layer_norm_backward's six buffers */
typedef struct bf_scratch {
  float *p[BF_SCRATCH_MAX];
  size_t bytes[BF_SCRATCH_MAX];
  int n;
} bf_scratch;

/* A float32 buffer of n elements in sc, or NULL (with *s set) for lack of memory. */
static float *bf_take(bf_scratch *sc, const char *kernel, int64_t n, em_status *s) {
  if (sc->n == BF_SCRATCH_MAX) { /* a kernel here asks for more than it was sized for */
    *s = em_error(EM_ERR_BACKEND, "cpu %s: more than %d float32 buffers", kernel, BF_SCRATCH_MAX);
    return NULL;
  }
  float *f = cpu_scratch_alloc((size_t)n * sizeof *f);
  if (!f) {
    *s = em_error(EM_ERR_OOM, "cpu %s: out of memory for %lld float32 values", kernel, (long long)n);
    return NULL;
  }
  sc->p[sc->n] = f;
  sc->bytes[sc->n++] = (size_t)n * sizeof *f;
  return f;
}

/* n bfloat16 values (NULL passes through) widened into a buffer of sc. */
static em_status widen(bf_scratch *sc, const char *kernel, const void *src, int64_t n, float **out) {
  em_status s = EM_OK;
  *out = NULL;
  if (!src || n <= 0) return EM_OK;
  if ((*out = bf_take(sc, kernel, n, &s))) cpu_bf16_widen(*out, src, n);
  return s;
}

/* A float32 result buffer of sc for a bfloat16 output (NULL stays NULL). */
static em_status scratch(bf_scratch *sc, const char *kernel, const void *dst, int64_t n, float **out) {
  em_status s = EM_OK;
  *out = NULL;
  if (dst && n > 0) *out = bf_take(sc, kernel, n, &s);
  return s;
}

static void narrow(void *dst, const float *src, int64_t n) {
  if (dst && src) cpu_bf16_narrow(dst, src, n);
}

static em_status release(bf_scratch *sc, em_status s) {
  for (int i = 0; i < sc->n; i++) cpu_scratch_free(sc->p[i], sc->bytes[i]);
  return s;
}

em_status cpu_reduce_bf16(em_reduce_op op, void *out, int64_t *idx, const void *in,
                          int64_t outer, int64_t n, int64_t inner, int correction) {
  bf_scratch sc = {0};
  float *x = NULL, *y = NULL;
  em_status s = widen(&sc, "reduce", in, outer * n * inner, &x);
  if (!s) s = scratch(&sc, "reduce", out, outer * inner, &y);
  if (!s) s = cpu_reduce(0, op, EM_F32, y, idx, x, outer, n, inner, correction);
  if (!s) narrow(out, y, outer * inner);
  return release(&sc, s);
}

em_status cpu_softmax_bf16(void *out, const void *xin, int64_t rows, int64_t n, bool log) {
  bf_scratch sc = {0};
  float *x = NULL, *y = NULL;
  em_status s = widen(&sc, "softmax", xin, rows * n, &x);
  if (!s) s = scratch(&sc, "softmax", out, rows * n, &y);
  if (!s) s = cpu_softmax(0, EM_F32, y, x, rows, n, log);
  if (!s) narrow(out, y, rows * n);
  return release(&sc, s);
}

em_status cpu_softmax_backward_bf16(void *gx, const void *gy, const void *y, int64_t rows,
                                    int64_t n, bool log) {
  bf_scratch sc = {0};
  float *g = NULL, *yy = NULL, *r = NULL;
  em_status s = widen(&sc, "softmax_backward", gy, rows * n, &g);
  if (!s) s = widen(&sc, "softmax_backward", y, rows * n, &yy);
  if (!s) s = scratch(&sc, "softmax_backward", gx, rows * n, &r);
  if (!s) s = cpu_softmax_backward(0, EM_F32, r, g, yy, rows, n, log);
  if (!s) narrow(gx, r, rows * n);
  return release(&sc, s);
}

/* mean and rstd are float32 for bfloat16 inputs (the core's stat dtype). */
em_status cpu_norm_bf16(const char *kernel, void *y, void *mean, void *rstd, const void *xin,
                        const void *w, const void *b, int64_t rows, int64_t n, double eps,
                        bool centred) {
  bf_scratch sc = {0};
  float *x = NULL, *wf = NULL, *bf = NULL, *yf = NULL;
  em_status s = widen(&sc, kernel, xin, rows * n, &x);
  if (!s) s = widen(&sc, kernel, w, n, &wf);
  if (!s) s = widen(&sc, kernel, b, n, &bf);
  if (!s) s = scratch(&sc, kernel, y, rows * n, &yf);
  if (!s) s = cpu_norm(kernel, EM_F32, yf, mean, rstd, x, wf, bf, rows, n, eps, centred);
  if (!s) narrow(y, yf, rows * n);
  return release(&sc, s);
}

em_status cpu_norm_backward_bf16(const char *kernel, void *dx, void *dw, void *db, const void *dy,
                                 const void *xin, const void *mean, const void *rstd,
                                 const void *w, int64_t rows, int64_t n) {
  bf_scratch sc = {0};
  float *g = NULL, *x = NULL, *wf = NULL, *dxf = NULL, *dwf = NULL, *dbf = NULL;
  em_status s = widen(&sc, kernel, dy, rows * n, &g);
  if (!s) s = widen(&sc, kernel, xin, rows * n, &x);
  if (!s) s = widen(&sc, kernel, w, n, &wf);
  if (!s) s = scratch(&sc, kernel, dx, rows * n, &dxf);
  /* widened, not fresh: the kernel may add into dw and db */
  if (!s) s = widen(&sc, kernel, dw, n, &dwf);
  if (!s) s = widen(&sc, kernel, db, n, &dbf);
  if (!s) s = cpu_norm_backward(kernel, EM_F32, dxf, dwf, dbf, g, x, mean, rstd, wf, rows, n);
  if (!s) {
    narrow(dx, dxf, rows * n);
    narrow(dw, dwf, n);
    narrow(db, dbf, n);
  }
  return release(&sc, s);
}

em_status cpu_cross_entropy_bf16(void *loss, void *lse, const void *logits,
                                 const int64_t *target, int64_t rows, int64_t classes,
                                 int64_t ignore_index, double smoothing) {
  bf_scratch sc = {0};
  float *x = NULL, *l = NULL, *e = NULL;
  em_status s = widen(&sc, "cross_entropy", logits, rows * classes, &x);
  if (!s) s = scratch(&sc, "cross_entropy", loss, rows, &l);
  if (!s) s = scratch(&sc, "cross_entropy", lse, rows, &e);
  if (!s)
    s = cpu_cross_entropy(0, EM_F32, l, e, x, target, rows, classes, ignore_index, smoothing);
  if (!s) {
    narrow(loss, l, rows);
    narrow(lse, e, rows);
  }
  return release(&sc, s);
}

em_status cpu_cross_entropy_backward_bf16(void *dlogits, const void *dloss, const void *logits,
                                          const void *lse, const int64_t *target, int64_t rows,
                                          int64_t classes, int64_t ignore_index,
                                          double smoothing) {
  bf_scratch sc = {0};
  float *dl = NULL, *x = NULL, *e = NULL, *g = NULL;
  em_status s = widen(&sc, "cross_entropy_backward", dloss, rows, &dl);
  if (!s) s = widen(&sc, "cross_entropy_backward", logits, rows * classes, &x);
  if (!s) s = widen(&sc, "cross_entropy_backward", lse, rows, &e);
  if (!s) s = scratch(&sc, "cross_entropy_backward", dlogits, rows * classes, &g);
  if (!s)
    s = cpu_cross_entropy_backward(0, EM_F32, g, dl, x, e, target, rows, classes, ignore_index,
                                   smoothing);
  if (!s) narrow(dlogits, g, rows * classes);
  return release(&sc, s);
}

/* A contiguous bfloat16 output of n elements, drawn in float32. */
em_status cpu_random_bf16(em_random_kind kind, void *out, int64_t n, double a, double b,
                          uint64_t seed, uint64_t offset) {
  bf_scratch sc = {0};
  float *f = NULL;
  em_status s = scratch(&sc, "random", out, n, &f);
  if (s || !f) return s;
  em_kview v = {.data = f, .dtype = EM_F32, .ndim = 1, .shape = {n}, .stride = {1}};
  s = cpu_random(0, kind, &v, a, b, seed, offset);
  if (!s) narrow(out, f, n);
  return release(&sc, s);
}
