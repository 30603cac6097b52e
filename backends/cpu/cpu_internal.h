/*
** cpu_internal.h -- what the CPU backend's files share: the kernel entry
** points (one file per concept), dtype helpers and the strided iterator.
** Nothing here is exported from the plugin (-fvisibility=hidden).
*/
#ifndef EMBER_CPU_INTERNAL_H
#define EMBER_CPU_INTERNAL_H

#include "ember.h"
#include "ember_backend.h"
#include "ember_bf16.h"

#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* Elementwise work below this many elements runs on the calling thread:
** waking an OpenMP team costs microseconds, a 16-element add a few ns. */
#define CPU_PAR_MIN 32768

/* cpu_team.c: whether a parallel region of `work` (multiply-adds or
** elements; 0 for an elementwise region) should use the team now (not
** while other processes keep the CPUs busy, unless the work is large or
** a periodic probe is due), the clock it measures with, and what a region
** saw: the time its first worker took to start (0: the team had one
** thread). */
bool cpu_team_go(double work);
/* Whether the machine is contended now (adaptive mode): regions that
** cannot be split by work, as oneDNN's convolutions, then run on one
** thread, and say so through cpu_team_count_serial_conv (for cpu_info). */
bool cpu_team_contended(void);
void cpu_team_count_serial_conv(void);
uint64_t cpu_team_now(void);
void cpu_team_note(uint64_t t0, uint64_t lag_ns);
void cpu_team_describe(char *buf, size_t n);

/* Inside a parallel region begun at T0 (cpu_team_now()): thread 1 records
** in LAG how long it took to start. One writer, read after the region. */
#define CPU_TEAM_MARK(T0, LAG)                                                \
  do {                                                                        \
    if (omp_get_thread_num() == 1) (LAG) = cpu_team_now() - (T0);             \
  } while (0)

/* for (int64_t VAR = 0; VAR < N; VAR++) { body }, spread over the OpenMP
** team when PAR is true (and cpu_team_go agrees for WORK, the region's
** elements or multiply-adds, 0 when small) and on the calling thread
** otherwise. A plain `if()` clause on the pragma is not enough: libgomp
** still builds a team of one, which costs more than a whole small kernel.
** The body may use `continue`, and commas. */
#define CPU_FOR(PAR, VAR, N, ...) CPU_FOR_W(PAR, 0, VAR, N, __VA_ARGS__)
#define CPU_FOR_W(PAR, WORK, VAR, N, ...)                                     \
  do {                                                                        \
    const int64_t cpu_for_n_ = (N);                                           \
    if ((PAR) && cpu_team_go(WORK)) {                                         \
      const uint64_t cpu_for_t0_ = cpu_team_now();                            \
      uint64_t cpu_for_lag_ = 0;                                              \
      _Pragma("omp parallel")                                                 \
      {                                                                       \
        CPU_TEAM_MARK(cpu_for_t0_, cpu_for_lag_);                             \
        _Pragma("omp for schedule(static)")                                   \
        for (int64_t VAR = 0; VAR < cpu_for_n_; VAR++) { __VA_ARGS__ }        \
      }                                                                       \
      cpu_team_note(cpu_for_t0_, cpu_for_lag_);                               \
    } else {                                                                  \
      for (int64_t VAR = 0; VAR < cpu_for_n_; VAR++) { __VA_ARGS__ }          \
    }                                                                         \
  } while (0)

/* CPU_FOR_RANGES(PAR, N, LO, HI, body): the body once per chunk [LO, HI)
** of [0, N) (CPU_RANGE elements), the chunks spread like CPU_FOR's. For a
** body that calls a CPU_VECTOR_CLONES function: OpenMP moves a parallel
** loop's body into a function of its own, which target_clones does not
** clone, so a loop written straight into CPU_FOR runs the x86-64 baseline
** build (Adam's double sqrt and division one at a time, a derivative
** called through a pointer per element); a call from there to a cloned
** function runs the machine's vector build. */
#define CPU_RANGE 4096
#define CPU_FOR_RANGES(PAR, N, LO, HI, ...)                                    \
  do {                                                                        \
    const int64_t cpu_rn_ = (N);                                              \
    CPU_FOR_W(PAR, (double)cpu_rn_, cpu_rt_, (cpu_rn_ + CPU_RANGE - 1) / CPU_RANGE, \
      const int64_t LO = cpu_rt_ * CPU_RANGE;                                 \
      const int64_t HI = cpu_rn_ - LO < CPU_RANGE ? cpu_rn_ : LO + CPU_RANGE; \
      __VA_ARGS__);                                                           \
  } while (0)

/* Hot loops are compiled twice, for x86-64-v3 (AVX2 with FMA) and for the
** x86-64 baseline, and the loader picks one per machine (GCC function
** multiversioning). The same operations run in the same order either way
** (no FMA contraction, no reassociation), so both give bit-identical
** results. A loop that wants a fused multiply-add writes fmaf: one
** instruction in the vector clones, libm's correctly rounded fmaf in the
** baseline, the same bits in both. */
/* CPU_VECTOR_CLONES_512 adds an AVX-512 clone (the attention kernel's row
** loops): wider vectors run the same operations per lane, so the same bits. */
#ifndef CPU_VECTOR_CLONES /* -DCPU_VECTOR_CLONES= builds the baseline only */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#define CPU_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#define CPU_VECTOR_CLONES_512 __attribute__((target_clones("avx512f", "arch=x86-64-v3", "default")))
#else
#define CPU_VECTOR_CLONES
#endif
#endif
#ifndef CPU_VECTOR_CLONES_512
#define CPU_VECTOR_CLONES_512 CPU_VECTOR_CLONES
#endif
/* Whether this CPU runs the x86-64-v3 clones (what cpu_info reports as
** "avx2"); clang (the fuzz build) has no "x86-64-v3" for the builtin, and
** AVX2 with FMA stands in for it there. */
#if defined(__clang__)
#define CPU_HAS_X86_64_V3() (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
#else
#define CPU_HAS_X86_64_V3() __builtin_cpu_supports("x86-64-v3")
#endif

/* CPU_CAT(name, SUF) -> name_SUF: how the *_tmpl.h files, included once per
** dtype with SUF set, name their functions. */
#define CPU_CAT2(a, b) a##_##b
#define CPU_CAT(a, b) CPU_CAT2(a, b)

/* ---- dtypes ---- */

/* The name of a dtype, for messages (kept local so the plugin needs only
** em_error from libember). */
const char *cpu_dtype_name(em_dtype dt);
/* Bytes per element, 0 for an invalid dtype. */
size_t cpu_dtype_size(em_dtype dt);
/* EM_ERR_DTYPE "kernel: dtype X is not supported (supported: list)". */
em_status cpu_bad_dtype(const char *kernel, em_dtype dt, const char *supported);


/* double -> int64 without undefined behaviour: truncates toward zero,
** saturates out-of-range values, NaN gives 0. */
static inline int64_t cpu_f64_to_i64(double x) {
  if (x != x) return 0;
  if (x >= 9223372036854775807.0) return INT64_MAX;
  if (x <= -9223372036854775808.0) return INT64_MIN;
  return (int64_t)x;
}

/* ---- strided iteration over several same-shaped views ---- */

#define CPU_MAX_OPS 4

/* Operands share `shape`; strides are in BYTES so operands of different
** dtypes (copy with a cast, where's bool condition) walk together. Size-1
** dims are dropped and dims that are contiguous for every operand are
** merged, so most tensors become one long run. */
typedef struct cpu_iter {
  int ndim; /* >= 1 after init */
  int nops;
  int64_t numel;
  int64_t shape[EM_MAX_DIMS];
  int64_t stride[CPU_MAX_OPS][EM_MAX_DIMS];
  char *data[CPU_MAX_OPS];
} cpu_iter;

/* Checks that the views share a shape (error names `op`) and coalesces. */
em_status cpu_iter_init(cpu_iter *it, const char *op, int nops, const em_kview *const *views);
/* True when every operand is a dense run (one dim, stride == elsize). */
static inline int cpu_iter_dense(const cpu_iter *it, const size_t *elsize) {
  if (it->ndim != 1) return 0;
  for (int k = 0; k < it->nops; k++)
    if (it->stride[k][0] != (int64_t)elsize[k]) return 0;
  return 1;
}

/* Processes one run of n elements: p[k] points at operand k's first
** element, s[k] is its byte stride along the run. */
typedef void (*cpu_loop_fn)(char **p, const int64_t *s, int64_t n, void *ctx);
/* Calls fn over every run, in parallel when numel is large. */
void cpu_iter_run(const cpu_iter *it, cpu_loop_fn fn, void *ctx);

/* ---- kernels, by file ---- */

/* cpu_elementwise.c */
em_status cpu_copy(int device, const em_kview *dst, const em_kview *src);
em_status cpu_fill(int device, const em_kview *dst, double value);
em_status cpu_binary(int device, em_binary_op op, const em_kview *out, const em_kview *a,
                     const em_kview *b);
em_status cpu_where(int device, const em_kview *out, const em_kview *cond, const em_kview *a,
                    const em_kview *b);

/* cpu_unary.c */
em_status cpu_unary(int device, em_unary_op op, const em_kview *out, const em_kview *x,
                    double alpha, double beta);
em_status cpu_unary_backward(int device, em_unary_op op, em_dtype dt, int64_t n, void *gx,
                             const void *gy, const void *x, const void *y, double alpha,
                             double beta);
/* out = act(gate) * up and its gradients (cpu_unary.c; em_backend.gated) */
em_status cpu_gated(int device, em_unary_op act, em_dtype dt, int64_t n, void *out,
                    const void *gate, const void *up);
em_status cpu_gated_backward(int device, em_unary_op act, em_dtype dt, int64_t n, void *dgate,
                             void *dup, const void *dout, const void *gate, const void *up);

/* cpu_reduce.c */
em_status cpu_reduce(int device, em_reduce_op op, em_dtype dt, void *out, int64_t *idx,
                     const void *in, int64_t outer, int64_t n, int64_t inner, int correction);

/* cpu_gemm.c */
em_status cpu_gemm(int device, em_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                   double alpha, const void *a, int64_t lda, int64_t stride_a, const void *b,
                   int64_t ldb, int64_t stride_b, double beta, void *c, int64_t ldc,
                   int64_t stride_c, int64_t batch);
/* The library cpu_gemm takes for such a product (ember_backend.h's gemm_route). */
const char *cpu_gemm_route(int device, em_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                           int64_t batch);
em_status cpu_gemm_bias(int device, em_dtype dt, bool ta, bool tb, int64_t m, int64_t n,
                        int64_t k, const void *a, int64_t lda, const void *b, int64_t ldb,
                        const void *bias, void *c, int64_t ldc);

/* Whether a float32 product goes to oneDNN rather than OpenBLAS, and the
** rule in words: cpu_info's "gemm: ...; gemv: ..." parts, `impl` naming
** oneDNN's implementation. */
bool cpu_gemm_f32_uses_dnnl(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t batch);
const char *cpu_gemm_f32_parts(const char *impl, char *buf, size_t n);
/* cpu_blas.c: checks the core OpenBLAS chose against this CPU and has it
** choose again when the core is older and the user did not set one (at
** plugin init, before any product); cpu_blas_info says what runs and why. */
void cpu_blas_configure(void);
const char *cpu_blas_info(char *buf, size_t n);

/* cpu_dnnl.c: the same contract as cpu_gemm, for bfloat16 and float32,
** through oneDNN's matmul (k >= 1). */
em_status cpu_dnnl_gemm(em_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                        double alpha, const void *a, int64_t lda, int64_t stride_a, const void *b,
                        int64_t ldb, int64_t stride_b, double beta, void *c, int64_t ldc,
                        int64_t stride_c, int64_t batch);
/* One product with a bias row: C = op(A) op(B) + bias (gemm_bias). */
em_status cpu_dnnl_gemm_bias(em_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                             const void *a, int64_t lda, const void *b, int64_t ldb,
                             const void *bias, void *c, int64_t ldc);
/* The implementation oneDNN picks for a product of dtype dt
** ("brg:avx512_core_amx", ...). */
em_status cpu_dnnl_impl(em_dtype dt, char *buf, size_t n);

/* cpu_conv.c: the backend's conv2d and conv2d_backward (ember_backend.h),
** on oneDNN's convolution primitives; float32 and bfloat16. */
em_status cpu_conv2d(int device, const em_conv_args *a, void *y, const void *x, const void *w,
                     const void *b);
em_status cpu_conv2d_backward(int device, const em_conv_args *a, void *dx, void *dw, void *db,
                              const void *dy, const void *x, const void *w);
/* conv2d_keep_bytes, conv2d_keep and conv2d_backward_kept: x kept in the
** forward's blocked layout for the weight gradient. */
em_status cpu_conv2d_keep_bytes(int device, const em_conv_args *a, bool bias, size_t *bytes);
em_status cpu_conv2d_keep(int device, const em_conv_args *a, void *y, void *xk, const void *x,
                          const void *w, const void *b);
em_status cpu_conv2d_backward_kept(int device, const em_conv_args *a, void *dx, void *dw, void *db,
                                   const void *dy, const void *x, const void *xk, const void *w);
/* cpu_linalg.c: em_backend.linalg on the LAPACK of the linked OpenBLAS. */
em_status cpu_linalg(int device, const em_linalg_args *a, void *const *out, const void *x, const void *b,
                     int64_t info[2]);
/* What runs them, for kernel_info's "conv: " ("onednn convolution up to
** avx512_core_bf16"): oneDNN picks each shape's kernel within that ISA;
** then what EMBER_CONV_LAYOUT forces, if set. */
void cpu_conv_describe(char *buf, size_t n);

/* cpu_backend.c: scratch memory for kernels, from the cache of large blocks
** that tensors use, so that a training loop does not page-fault fresh
** buffers in every step (a tenth of a bfloat16 step did). Free with the
** size it was asked for. NULL when out of memory. */
void *cpu_scratch_alloc(size_t nbytes);
void cpu_scratch_free(void *p, size_t nbytes);

/* cpu_bf16.c: bfloat16 through the float32 kernels (widen, run, round). */
/* n values converted, over the thread team when it pays. */
void cpu_bf16_widen(float *dst, const uint16_t *src, int64_t n);
void cpu_bf16_narrow(uint16_t *dst, const float *src, int64_t n);
/* dst[i] = em_f32_to_bf16(src[i]) for i < n, on the calling thread (AVX-512
** where the CPU has it). */
void cpu_bf16_round(uint16_t *dst, const float *src, int64_t n);
em_status cpu_reduce_bf16(em_reduce_op op, void *out, int64_t *idx, const void *in,
                          int64_t outer, int64_t n, int64_t inner, int correction);
em_status cpu_softmax_bf16(void *out, const void *x, int64_t rows, int64_t n, bool log);
em_status cpu_softmax_backward_bf16(void *gx, const void *gy, const void *y, int64_t rows,
                                    int64_t n, bool log);
/* cpu_norm and cpu_norm_backward on a float32 copy */
em_status cpu_norm_bf16(const char *kernel, void *y, void *mean, void *rstd, const void *x,
                        const void *w, const void *b, int64_t rows, int64_t n, double eps,
                        bool centred);
em_status cpu_norm_backward_bf16(const char *kernel, void *dx, void *dw, void *db, const void *dy,
                                 const void *x, const void *mean, const void *rstd,
                                 const void *w, int64_t rows, int64_t n);
em_status cpu_cross_entropy_bf16(void *loss, void *lse, const void *logits,
                                 const int64_t *target, int64_t rows, int64_t classes,
                                 int64_t ignore_index, double smoothing);
em_status cpu_cross_entropy_backward_bf16(void *dlogits, const void *dloss, const void *logits,
                                          const void *lse, const int64_t *target, int64_t rows,
                                          int64_t classes, int64_t ignore_index,
                                          double smoothing);
em_status cpu_random_bf16(em_random_kind kind, void *out, int64_t n, double a, double b,
                          uint64_t seed, uint64_t offset);

/* cpu_random.c: keep[j] = (element first + j of the Philox stream at
** offset is kept by dropout: em_philox_keep), for n elements; vectorised. */
void cpu_dropout_keep(uint8_t *keep, uint64_t seed, uint64_t offset, uint64_t first, int64_t n,
                      uint64_t threshold);

/* cpu_bgemm.c: the fused attention kernel's bfloat16 tile products,
** C[m,n] = alpha * op(A) op(B) + beta * C on the calling thread; C float32,
** A and B float32 or bfloat16 (a_bf16, b_bf16), both rounded to bfloat16,
** float32 sums. cpu_bgemm_path names the path ("amx ...", "avx512_bf16
** ..." or "plain ..."); cpu_bgemm_dp is true on the first, where the attention's
** few-row products (cpu_tile_rows.c) take vdpbf16ps too. */
void cpu_bgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const void *A,
               bool a_bf16, int64_t lda, const void *B, bool b_bf16, int64_t ldb, float beta,
               float *C, int64_t ldc);
const char *cpu_bgemm_path(void);
bool cpu_bgemm_dp(void);
/* cpu_bgemm_amx.c: can this process run AMX tiles (CPU, XCR0, Linux's
** permission, asked for here)? If not, why (into why[n]). */
bool cpu_bgemm_amx_usable(char *why, size_t n);
/* Rows [i0, i0+mc) of one cpu_bgemm block (k [p0, p0+kc), Bp packed as
** cpu_bgemm packs B, zero up to whole chunks of 16 pairs) on AMX tiles,
** or with emulated on the C model of them. */
void cpu_bgemm_amx_block(bool emulated, const void *A, bool a_bf16, bool ta, int64_t lda,
                         int64_t i0, int64_t mc, int64_t p0, int64_t kc, const uint16_t *Bp,
                         int64_t nc, float alpha, float beta, float *C, int64_t ldc);

/* cpu_tile_gemm.c: the fused attention kernel's float32 tile products,
** C[m,n] = alpha * op(A) op(B) + beta * C on the calling thread, on
** ember's own micro-kernels (AVX-512, AVX2+FMA or plain C, by cpuid;
** EMBER_CPU_TILE_GEMM forces one, or OpenBLAS's sgemm). k == 0 leaves
** beta * C. cpu_tile_gemm_path names the path ("avx512 (...)", ...). */
void cpu_tile_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                   const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                   float *C, int64_t ldc);
const char *cpu_tile_gemm_path(void);
/* The same products for a few rows of A (a decoding step's query rows),
** B's rows read in place instead of packed: tb, C = alpha * A B^T + beta
** * C as dot products of A's rows with B's rows; else C = alpha * A B +
** beta * C as B's rows scaled and summed. Sums in their own fixed order
** (cpu_tile_gemm.c): within float32 rounding of cpu_tile_gemm, not its
** bits. On the ISA cpu_tile_gemm runs (on OpenBLAS, the same products). */
void cpu_tile_rows(bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *A,
                   int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
/* The same with B in bfloat16 and A float32 (rounded to bfloat16 first)
** or bfloat16 (a_bf16); false when this CPU or size has no such path (the
** caller then runs the tile product). */
bool cpu_tile_rows_bf16(bool tb, int64_t m, int64_t n, int64_t k, float alpha, const void *A, bool a_bf16,
                        int64_t lda, const uint16_t *B, int64_t ldb, float beta, float *C, int64_t ldc);

/* cpu_softmax_norm.c */
em_status cpu_softmax(int device, em_dtype dt, void *out, const void *x, int64_t rows, int64_t n,
                      bool log);
em_status cpu_softmax_backward(int device, em_dtype dt, void *gx, const void *gy, const void *y,
                               int64_t rows, int64_t n, bool log);
em_status cpu_layer_norm(int device, em_dtype dt, void *y, void *mean, void *rstd, const void *x,
                         const void *w, const void *b, int64_t rows, int64_t n, double eps);
em_status cpu_layer_norm_backward(int device, em_dtype dt, void *dx, void *dw, void *db,
                                  const void *dy, const void *x, const void *mean,
                                  const void *rstd, const void *w, int64_t rows, int64_t n);
em_status cpu_rms_norm(int device, em_dtype dt, void *y, void *rstd, const void *x, const void *w,
                       int64_t rows, int64_t n, double eps);
em_status cpu_rms_norm_backward(int device, em_dtype dt, void *dx, void *dw, const void *dy,
                                const void *x, const void *rstd, const void *w, int64_t rows,
                                int64_t n);
em_status cpu_rope(int device, const em_kview *out, const em_kview *x, const void *cos,
                   const void *sin, bool inverse);
/* Layer norm, or RMS norm with centred false (mean and b NULL). */
em_status cpu_norm(const char *kernel, em_dtype dt, void *y, void *mean, void *rstd, const void *x,
                   const void *w, const void *b, int64_t rows, int64_t n, double eps, bool centred);
/* cpu_norm's backward: mean NULL (and db NULL) for RMS norm. */
em_status cpu_norm_backward(const char *kernel, em_dtype dt, void *dx, void *dw, void *db,
                            const void *dy, const void *x, const void *mean, const void *rstd,
                            const void *w, int64_t rows, int64_t n);

/* cpu_index.c */
em_status cpu_index_select(int device, em_dtype dt, void *out, const void *in, const int64_t *idx,
                           int64_t nidx, int64_t outer, int64_t n_in, int64_t inner);
em_status cpu_index_add(int device, em_dtype dt, void *out, const void *src, const int64_t *idx,
                        int64_t nidx, int64_t outer, int64_t n_out, int64_t inner);
em_status cpu_gather(int device, em_dtype dt, void *out, const void *in, const int64_t *idx,
                     int64_t outer, int64_t n_in, int64_t n_idx, int64_t inner);
em_status cpu_scatter_add(int device, em_dtype dt, void *out, const void *src, const int64_t *idx,
                          int64_t outer, int64_t n_out, int64_t n_idx, int64_t inner);

/* cpu_loss.c */
em_status cpu_cross_entropy(int device, em_dtype dt, void *loss, void *lse, const void *logits,
                            const int64_t *target, int64_t rows, int64_t classes,
                            int64_t ignore_index, double smoothing);
em_status cpu_cross_entropy_backward(int device, em_dtype dt, void *dlogits, const void *dloss,
                                     const void *logits, const void *lse, const int64_t *target,
                                     int64_t rows, int64_t classes, int64_t ignore_index,
                                     double smoothing);

/* cpu_random.c */
em_status cpu_random(int device, em_random_kind kind, const em_kview *out, double a, double b,
                     uint64_t seed, uint64_t offset);
em_status cpu_dropout(int device, em_dtype dt, void *out, void *mask, const void *x, int64_t n,
                      double p, uint64_t seed, uint64_t offset);

/* cpu_optim.c */
em_status cpu_sum_squares(int device, em_dtype dt, const void *x, int64_t n, double *out);
em_status cpu_adam_step(int device, em_dtype dt, int64_t n, void *param, const void *grad,
                        void *m, void *v, double lr, double beta1, double beta2, double eps,
                        double weight_decay, int64_t step, bool decoupled);
em_status cpu_sgd_step(int device, em_dtype dt, int64_t n, void *param, const void *grad,
                       void *buf, double lr, double momentum, double dampening,
                       double weight_decay, bool nesterov, bool first_step);

/* cpu_attention.c */
em_status cpu_attention_forward(int device, const em_attention_args *args);
em_status cpu_attention_backward(int device, const em_attention_args *args);


/* cpu_expr_jit.c: a traced variant's programs compiled to C. A tile
** function runs rows [i_begin, br) of a score tile (S, row stride ld;
** D: the backward's d score/ds tile or NULL) and returns -1, or the first
** row it left for the interpreter to run and report (a bad index, a NaN). */
enum { CPU_XJIT_SCORE, CPU_XJIT_GRAD, CPU_XJIT_MASK, CPU_XJIT_SCATTER, CPU_XJIT_ROLES };
#define CPU_XJIT_MAX_COLS 256

/* A program's registers that are the same along each diagonal k - q of a
** score tile (em_expr.dvar: a relative position's bucket and its table
** entry, a distance's bias, a window's test). A tile computes them once
** per diagonal, br + bc - 1 values for br * bc scores, into
** Hb[slot * hs + t] with t = (k - q) - (k0 - q_last) (the tile's first key
** against its last query row), so row ii reads them contiguously from
** Hb + (br - 1 - ii). The roots are the ones a row reads: outputs and
** operands of the rest. A learned load on the diagonals (gslot) has its
** gradient summed per diagonal in the tile, then added to its table once
** per diagonal, as the built-in relative-position terms do. n_roots and
** n_gd 0: nothing is hoisted (made by cpu_xhoist_plan, cpu_attention.c). */
typedef struct cpu_xhoist {
  int n_roots, n_gd;
  bool reads_b, reads_h;               /* they depend on the batch, the head */
  int16_t slot[EM_EXPR_MAX_INS];       /* register -> root slot, -1: not a root */
  int8_t gslot[EM_EXPR_MAX_OUT - 2];   /* gradient g -> its diagonal sums' slot, -1: per element */
} cpu_xhoist;
void cpu_xhoist_plan(const em_expr *p, const em_xcap *caps, bool scatter, cpu_xhoist *h);

/* Hb, hs: the hoisted registers (cpu_xhoist), or NULL where the program
** has none. */
typedef int64_t (*cpu_xjit_fn)(const void *const *cap, const int64_t *shape, int64_t b, int64_t h,
                               int64_t q0, int64_t k0, int64_t i_begin, int64_t br, int64_t bc,
                               int64_t ld, void *S, void *D, const void *Hb, int64_t hs);
/* The backward's scatter of one row into the learned captures' per-head
** sums G[cap] (NULL: not wanted), and of the loads on the diagonals into
** their per-diagonal sums acc[gslot * as + hoff + jj] (hoff: the row's
** offset, br - 1 - ii); stored in fns[CPU_XJIT_SCATTER] as a cpu_xjit_fn
** and cast back to this type to be called. */
typedef void (*cpu_xjit_scatter_fn)(const void *const *cap, const int64_t *shape, int64_t b, int64_t h,
                                    int64_t q, int64_t k0, int64_t bc, const void *raw, const void *ds,
                                    void *const *G, const void *Hb, int64_t hs, int64_t hoff, void *acc,
                                    int64_t as);
/* fns[role] for progs[role] (score, score gradient, mask, and the
** gradient program again for the scatter; NULL where absent), generated
** with plans[role]'s hoisted registers; false (all NULL) when they run
** interpreted. */
bool cpu_xjit_get(const em_expr *const *progs, const cpu_xhoist *plans, bool f64, const em_xcap *caps,
                  cpu_xjit_fn *fns);
void cpu_xjit_count(bool compiled);
void cpu_xjit_info(char *buf, size_t n);

#endif
