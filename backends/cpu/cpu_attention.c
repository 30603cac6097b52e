/*
** cpu_attention.c -- fused scaled-dot-product attention, flash style.
**
** Forward (per batch*head and tile of br queries, in parallel): walk the
** key tiles of bc keys keeping, for each query row, the running max m, the
** running normaliser l and an unnormalised output row; when a new tile
** raises the max, the old sums are rescaled by exp(m_old - m_new) (the
** online softmax). At the end out = acc / l and lse = m + log(l) is saved.
** Nothing of size Lq x Lk is ever allocated: scratch is a few tiles per
** thread. The products on a tile (S = scale * Q K^T, acc += P V) are
** GEMMs on the calling thread: float32 on ember's own micro-kernels
** (cpu_tile_gemm.c; a call of few query rows, a decoding step, on
** cpu_tile_rows.c: see mmq_f32), float64 on OpenBLAS (see TILE_MNK for why
** it stays on one thread inside the OpenMP team), bfloat16 on cpu_bgemm.c
** (few rows: cpu_tile_rows.c's bf16 kernels, see mmq_bf16).
**
** Backward recomputes the probabilities from lse, P = exp(S - lse), tile
** by tile, and never writes the same memory from two threads (so no
** atomics, and results do not depend on the thread count):
**   per key tile:   dV += Pd^T dO,  dK += scale * dS^T Q
**   per query tile: dQ += scale * dS K
** with Pd = P * Z (dropout), dS = P * (Z * dO V^T - D), D = rowsum(dO * O).
** When there are at least as many heads as threads, each thread takes a
** whole head and does both in one pass over the tiles; otherwise key tiles
** and query tiles are two parallel passes, the second recomputing P and dS
** (the same products in the same order, so the same bits).
**
** Masking: key_padding (1 = padding) and bias (additive, -inf allowed) as
** given; causal is bottom-right aligned (key j is visible to query i iff
** j <= i + Lk - Lq), and key tiles that are entirely in the future of a
** query tile are skipped. A query row that sees no key at all gets a zero
** output, lse = +inf (so exp(s - lse) = 0 anywhere) and zero gradients.
**
** Dropout: element (b, h, i, j) is kept iff
**   em_philox_keep(seed, offset, ((b*H + h)*Lq + i)*Lk + j, threshold(p))
** and kept probabilities are scaled by 1 / (1 - p); the normaliser l
** counts every visible key, as dropout(softmax(S)) @ V does.
*/
/* FP exceptions are never unmasked here, so comparisons may be assumed not
** to trap: that lets GCC turn the selects in the row loops (exp, max) into
** vector blends. Values, NaN and inf are unchanged by this. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include "cpu_internal.h"
#include "cpu_expr_ops.h"
#include "cpu_vmath.h"
#include "ember_plugin.h"
#include "ember_philox.h"

#include <cblas.h>
#include <errno.h>
#include <limits.h>
#include <omp.h>
#include <stdlib.h>
#include <tgmath.h>


/* The tile-row helpers of the templates are always inlined: forward_tile
** and grad_tile are built once per ISA (CPU_VECTOR_CLONES_512), and a helper
** left out of line runs its baseline x86-64 build, unvectorised (an exp_row
** call once made the whole backward 1.2-1.6x slower at L = 4096). */
#define ATT_ROW static inline __attribute__((always_inline))

/* Registers of the traced programs hold this many keys (a tile row: bc
** and the forward's merged steps are at most 128). */
#define ATT_XCH 128

/* Values per hoisted register (cpu_xhoist): room for the diagonals of the
** widest score tile, br + ld - 1 (even: the int64 offsets after them stay
** aligned). */
#define ATT_HS(c) ((c)->br + (c)->ld)

/* How xrow (cpu_attention_expr_tmpl.h) treats the registers on the
** diagonals: computes them all, reads the hoisted ones, or computes only
** them (the hoisting pass). */
enum { XROW_ALL, XROW_HOISTED, XROW_DIAGONALS };

/* The first failure of a traced program (kind: 1 + the dim of a load's
** index out of range, or ATT_XERR_NAN), reported once the kernel ends. */
#define ATT_XERR_NAN 100
typedef struct att_xerr {
  int kind, cap;
  int64_t b, h, q, k;
  double idx;
} att_xerr;

/* Where a tensor's heads lie: its strides in elements over batch, head
** and row (the last dim has stride 1), from em_attention_args' strides or
** the contiguous layout. */
typedef struct att_lay {
  int64_t b, h, r;
} att_lay;

typedef struct att_ctx {
  const em_attention_args *a;
  att_lay q, k, v, o, go;  /* q, k, v, out and dout */
  att_lay gq, gk, gv;      /* backward: dq, dk_ and dv_ (per query head) */
  int64_t shift;  /* Lk - Lq, the causal diagonal's offset */
  int64_t br, bc; /* tile sizes: queries per work item, keys per tile */
  int64_t ld;     /* row stride of the score scratch: the widest forward step (>= bc) */
  bool parallel;  /* enough work to wake the thread team */
  bool rows;      /* few query rows (a decoding step): mmq reads K and V rows in place (bf16: AVX-512) */
  double *D;      /* backward: rowsum(dO * O), [B*H*Lq] */
  /* Shaw's terms (cpu_attention_decl_tmpl.h), in the compute type */
  int64_t n_r;    /* Lq + Lk - 1 relative positions */
  void *QR;       /* [threads][Lq, n_rel] scale * Q rel_k^T, or NULL */
  void *DR;       /* backward: [threads][Lq, n_rel] dO rel_v^T, or NULL */
  void *DSB, *PB; /* backward: [threads][Lq, n_rel] dS and dropped P summed by table row */
  int64_t *run_end; /* [n_r]: end of the run of equal table rows holding n */
  int64_t *long_from; /* [n_r]: the next position in a long run (inside run_end's block) */
  int64_t *step_end;  /* [n_r]: end of the stretch from n where the row grows by 1 a position (same block) */
  void *GK, *GV;    /* backward: [BH][n_rel][dk or dv] per-head parts of Shaw's gradients */
  /* a traced variant (cpu_attention_expr_tmpl.h) */
  att_xerr *xerr;   /* the first failure */
  int64_t xregs;    /* scratch a thread needs for the programs, in compute-type elements */
  void *xg;         /* backward: [BH][xg_size] per-head sums of the learned captures' gradients */
  int64_t xg_size, xg_off[EM_EXPR_MAX_CAPS]; /* a capture's place in them, -1: none */
  bool x_additive;  /* the score program adds to s (d/ds is the constant 1) */
  int x_diag_bias;  /* the score is s +- a register on the diagonals: its root slot (xh[SCORE]), or -1 */
  bool x_diag_sub;  /* ... and it is s - that register */
  bool x_diag_grad; /* every learned load is on the diagonals with d score/d load = 1 (a bias table) */
  const cpu_xhoist *xh; /* [CPU_XJIT_ROLES]: each role's registers on the diagonals */
  int64_t xh_at;    /* where in a thread's registers a tile's own are (xview_tile) */
  void *xd[CPU_XJIT_ROLES]; /* each role's, for every diagonal of the call (xdiag_prepare), or NULL */
  int64_t *xdo;     /* the scatter's learned loads' offsets on every diagonal, or NULL */
  int64_t xd_n;     /* diagonals: Lq + Lk - 1 */
  size_t xd_bytes[CPU_XJIT_ROLES], xdo_bytes;
  /* the programs compiled to C (cpu_expr_jit.c), NULL where interpreted */
  cpu_xjit_fn xjit[CPU_XJIT_ROLES];     /* CPU_XJIT_SCORE, _GRAD, _MASK, _SCATTER */
  const void *xcap_data[EM_EXPR_MAX_CAPS];
  int64_t xcap_shape[EM_EXPR_MAX_CAPS * EM_EXPR_MAX_DIMS];
} att_ctx;

enum { ATT_TILE_EMPTY, ATT_TILE_FULL, ATT_TILE_PARTIAL };

/* Where row i of query head bh (batch bh / H, head bh % H) of a tensor
** laid out as l starts, in elements. */
static inline int64_t att_row(const att_ctx *c, const att_lay *l, int64_t bh, int64_t i) {
  return (bh / c->a->H) * l->b + (bh % c->a->H) * l->h + i * l->r;
}

/* Row j of the k or v head that query head bh reads: its own, or with
** grouped heads (Hkv < H) head h / (H / Hkv) of its batch, read in place. */
static inline int64_t att_kv_row(const att_ctx *c, const att_lay *l, int64_t bh, int64_t j) {
  const em_attention_args *a = c->a;
  const int64_t g = a->Hkv && a->Hkv != a->H ? a->H / a->Hkv : 1;
  return (bh / a->H) * l->b + ((bh % a->H) / g) * l->h + j * l->r;
}

/* The chunk of a parallel loop over work items grouped by head (per_head
** items of each head, heads in order): a whole batch's items when there
** are batches enough to go round, so that one thread takes all heads of a
** batch one after another and finds the neighbouring heads' rows, which
** come with its own where heads lie interleaved ([B, L, H, d]), in its
** cache; else single items. Each head is one thread's work either way: the
** same bits. */
static inline int64_t att_batch_chunk(const att_ctx *c, int64_t per_batch) {
  return c->a->B >= 2 * omp_get_max_threads() ? per_batch : 1;
}

/* A tensor's layout: its strides when given, else contiguous [B, heads,
** rows, d]. */
static inline att_lay att_lay_of(const int64_t st[3], int64_t heads, int64_t rows, int64_t d) {
  if (st[0] || st[1] || st[2]) return (att_lay){st[0], st[1], st[2]};
  return (att_lay){heads * rows * d, rows * d, d};
}

/* How a traced mask's block map treats the tile: its cells combined. */
static inline int att_xmap_class(const em_attention_args *a, int64_t bh, int64_t i0, int64_t br,
                                 int64_t j0, int64_t bc) {
  const int64_t g = a->map_grain;
  const uint8_t *m = a->block_map + (bh / a->H) * a->map_sb + (bh % a->H) * a->map_sh;
  bool empty = true, full = true;
  for (int64_t iq = i0 / g; iq <= (i0 + br - 1) / g; iq++)
    for (int64_t jk = j0 / g; jk <= (j0 + bc - 1) / g; jk++) {
      const uint8_t v = m[iq * a->map_nk + jk];
      empty &= v == EM_XTILE_EMPTY, full &= v == EM_XTILE_FULL;
      if (!empty && !full) return ATT_TILE_PARTIAL;
    }
  return empty ? ATT_TILE_EMPTY : full ? ATT_TILE_FULL : ATT_TILE_PARTIAL;
}

/* How the mask program's block map treats query rows [i0, i0+br) x keys
** [j0, j0+bc) of head bh (full where there is no mask program). */
static inline int att_tile_class(const att_ctx *c, int64_t bh, int64_t i0, int64_t br, int64_t j0,
                                 int64_t bc) {
  const em_attention_args *a = c->a;
  return a->block_map ? att_xmap_class(a, bh, i0, br, j0, bc) : ATT_TILE_FULL;
}

/* Does the tile hold no visible element under the block map? */
static inline bool att_tile_empty(const att_ctx *c, int64_t bh, int64_t i0, int64_t br, int64_t j0,
                                  int64_t bc) {
  return c->a->block_map && att_tile_class(c, bh, i0, br, j0, bc) == ATT_TILE_EMPTY;
}

/* Tiles are sized so that br * bc * max(dk, dv) <= TILE_MNK (64 x 128 at
** head dim 32): small enough to stay in cache, and below the bound at
** which a threaded OpenBLAS would split a product (65536 *
** GEMM_MULTITHREAD_THRESHOLD), which it must never do inside an OpenMP
** team. (The backend now keeps OpenBLAS at one thread anyway.) */
#define TILE_MNK (65536.0 * 4)

/* C = alpha * op(A) op(B) + beta * C, row-major, on the calling thread.
** k == 0 leaves beta * C (BLAS rules, without its ld >= 1 complaints).
** Returns false when there is a product left for BLAS to do. */
static inline bool att_gemm_trivial(int64_t m, int64_t n, int64_t k, double beta, double *C,
                                    int64_t ldc) {
  if (m == 0 || n == 0) return true;
  if (k != 0) return false;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) C[i * ldc + j] = beta == 0 ? 0 : beta * C[i * ldc + j];
  return true;
}

/* float32 tiles run on ember's own micro-kernels (cpu_tile_gemm.c), so
** their speed no longer depends on the core OpenBLAS guessed. */
static inline void gemm_f32(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                            const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                            float *C, int64_t ldc) {
  cpu_tile_gemm(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* float64 stays on OpenBLAS's dgemm: it is for gradient checks, where the
** last bits matter and the speed does not. */
static inline void gemm_f64(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                            const double *A, int64_t lda, const double *B, int64_t ldb,
                            double beta, double *C, int64_t ldc) {
  if (att_gemm_trivial(m, n, k, beta, C, ldc)) return;
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              (int)m, (int)n, (int)k, alpha, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
}

/* float32 uses cpu_exp_f32 (cpu_vmath.h), which vectorises. */
static inline float att_exp_f32(float x) { return cpu_exp_f32(x); }

/* float64 keeps libm's exp: its callers want the last bits (gradient
** checks), not the speed. */
static inline double att_exp_f64(double x) { return exp(x); }

/* A tile row's max: cpu_vmath.h's rule (NaNs passed over), in T. */
ATT_ROW float att_max_f32(const float *s, int64_t n) { return cpu_max_f32(s, n); }
ATT_ROW double att_max_f64(const double *s, int64_t n) { return cpu_max_f64(s, n); }
ATT_ROW float att_max_bf16(const float *s, int64_t n) { return cpu_max_f32(s, n); }

/* The templates compute in T and read q, k, v, dout, out and Shaw's
** tables in the storage type ST (from_st/to_st); mm is a tile product
** whose operands are each ST (the flag true) or T. For float32 and
** float64 both types are one and mm is gemm_f32 / gemm_f64 above. For bfloat16, T is float32:
** scores, the online softmax, lse, the accumulators and every gradient
** are float32, and mm (cpu_bgemm.c) multiplies bfloat16 operands --
** probability and score-gradient tiles rounded to bfloat16 on the way --
** with float32 sums. The gradients are summed in float32 and rounded to
** bfloat16 once (store_grad in the template, backward_bf16_outer below for
** the tables). */
#define ATT_SAME_TYPE(SUF_, T_)                                                              \
  static inline T_ from_st_##SUF_(T_ x) { return x; }                                        \
  static inline T_ to_st_##SUF_(T_ x) { return x; }                                          \
  static inline void mm_##SUF_(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T_ alpha,  \
                               const void *A, bool as, int64_t lda, const void *B, bool bs,  \
                               int64_t ldb, T_ beta, T_ *C, int64_t ldc) {                    \
    (void)as, (void)bs;                                                                      \
    gemm_##SUF_(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);                       \
  }
ATT_SAME_TYPE(f32, float)
ATT_SAME_TYPE(f64, double)

static inline float from_st_bf16(uint16_t x) { return em_bf16_to_f32(x); }
static inline uint16_t to_st_bf16(float x) { return em_f32_to_bf16(x); }
static inline float att_exp_bf16(float x) { return cpu_exp_f32(x); }
static inline void mm_bf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                           const void *A, bool as, int64_t lda, const void *B, bool bs,
                           int64_t ldb, float beta, float *C, int64_t ldc) {
  cpu_bgemm(ta, tb, m, n, k, alpha, A, as, lda, B, bs, ldb, beta, C, ldc);
}

/* A product whose A is the tile's query rows (S = scale Q K^T, acc += P V,
** dO V^T). With few rows (c->rows, float32 only) the tile's share of
** packing K^T outweighs its arithmetic -- a third of a decoding step at
** 2048 cached keys -- so they run on cpu_tile_rows: dot products with K's
** rows and sums of V's rows, read where they lie. The choice is the
** call's (Lq), so the backward recomputes the forward's scores. */
static inline void mmq_f32(const att_ctx *c, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                           const void *A, bool as, int64_t lda, const void *B, bool bs,
                           int64_t ldb, float beta, float *C, int64_t ldc) {
  if (c->rows) cpu_tile_rows(tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
  else mm_f32(false, tb, m, n, k, alpha, A, as, lda, B, bs, ldb, beta, C, ldc);
}
static inline void mmq_f64(const att_ctx *c, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                           const void *A, bool as, int64_t lda, const void *B, bool bs,
                           int64_t ldb, double beta, double *C, int64_t ldc) {
  (void)c;
  mm_f64(false, tb, m, n, k, alpha, A, as, lda, B, bs, ldb, beta, C, ldc);
}
static inline void mmq_bf16(const att_ctx *c, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                            const void *A, bool as, int64_t lda, const void *B, bool bs,
                            int64_t ldb, float beta, float *C, int64_t ldc) {
  if (c->rows && bs && cpu_tile_rows_bf16(tb, m, n, k, alpha, A, as, lda, B, ldb, beta, C, ldc)) return;
  mm_bf16(false, tb, m, n, k, alpha, A, as, lda, B, bs, ldb, beta, C, ldc);
}

/* The most query rows (Lq) that take cpu_tile_rows: EMBER_CPU_ATTENTION_ROWS
** (0 turns the path off), else ATT_ROWS_DEFAULT (at 4 rows the tiles were
** faster again: 221-272 against 306-312 us for 8 heads x 2048 keys, each
** row re-reading K and V; at 1 and 2 rows the rows path won); the tests set it through
** ember_cpu_attention_rows to compare both paths in one process. */
#define ATT_ROWS_DEFAULT 2
static int64_t att_rows_max = -1;

/* EMBER_CPU_ATTENTION_ROWS when it is a whole number >= 0 (into *rows):
** another value is named by cpu_info and leaves the default, as the other
** variables' unknown values do (it turned the path off, read as 0). */
bool cpu_attention_rows_env(int64_t *rows);
bool cpu_attention_rows_env(int64_t *rows) {
  const char *e = getenv("EMBER_CPU_ATTENTION_ROWS");
  if (!e || !*e) return false;
  char *end;
  errno = 0;
  const long long n = strtoll(e, &end, 10);
  if (end == e || *end || errno || n < 0) return false;
  if (rows) *rows = n;
  return true;
}

static int64_t att_rows_limit(void) {
  int64_t n = __atomic_load_n(&att_rows_max, __ATOMIC_RELAXED);
  if (n >= 0) return n;
  if (!cpu_attention_rows_env(&n)) n = ATT_ROWS_DEFAULT;
  __atomic_store_n(&att_rows_max, n, __ATOMIC_RELAXED);
  return n;
}

EM_PLUGIN_EXPORT int64_t ember_cpu_attention_rows(int64_t max_rows);
/* Sets the limit (max_rows >= 0) and returns the one before. */
EM_PLUGIN_EXPORT int64_t ember_cpu_attention_rows(int64_t max_rows) {
  const int64_t old = att_rows_limit();
  if (max_rows >= 0) __atomic_store_n(&att_rows_max, max_rows, __ATOMIC_RELAXED);
  return old;
}

#define T float
#define ST float
#define SUF f32
#include "cpu_attention_tmpl.h"
#undef T
#undef ST
#undef SUF

#define T double
#define ST double
#define SUF f64
#include "cpu_attention_tmpl.h"
#undef T
#undef ST
#undef SUF

#define T float
#define ST uint16_t
#define SUF bf16
#include "cpu_attention_tmpl.h"
#undef T
#undef ST
#undef SUF

/* What of program p a tile computes once per diagonal (cpu_xhoist). A
** program whose diagonal registers are only k - q itself gains nothing and
** gets an empty plan. */
void cpu_xhoist_plan(const em_expr *p, const em_xcap *caps, bool scatter, cpu_xhoist *h) {
  h->n_roots = h->n_gd = 0;
  for (int i = 0; i < EM_EXPR_MAX_INS; i++) h->slot[i] = -1;
  for (int g = 0; g < EM_EXPR_MAX_OUT - 2; g++) h->gslot[g] = -1;
  if (!p || !p->dvar) return;
  bool worth = false;
  for (int i = 0; i < p->n; i++) worth |= p->dvar[i] && p->ins[i].op != EM_XOP_SUB;
  if (!worth) return;
  bool root[EM_EXPR_MAX_INS] = {false};
  for (int i = 0; i < p->n; i++) {
    const em_xins *x = &p->ins[i];
    if (p->dvar[i]) continue;
    const int ar = x->op == EM_XOP_LOAD ? caps[x->cap].ndim : em_xop_arity(x->op);
    for (int a = 0; a < ar; a++) root[x->arg[a]] |= p->dvar[x->arg[a]];
  }
  for (int o = 0; o < p->n_out; o++) root[p->out[o]] |= p->dvar[p->out[o]];
  for (int i = 0; i < p->n; i++)
    if (root[i]) h->slot[i] = (int16_t)h->n_roots++;
  if (scatter)
    for (int g = 0; g < p->n_grad; g++)
      if (p->dvar[p->grad_load[g]]) h->gslot[g] = (int8_t)h->n_gd++;
  /* whether the registers on the diagonals read b or h (a call's table of
  ** them is then made per batch or per head) */
  bool rb[EM_EXPR_MAX_INS], rh[EM_EXPR_MAX_INS];
  h->reads_b = h->reads_h = false;
  for (int i = 0; i < p->n; i++) {
    const em_xins *x = &p->ins[i];
    const int ar = x->op == EM_XOP_LOAD ? caps[x->cap].ndim : em_xop_arity(x->op);
    rb[i] = x->op == EM_XOP_B, rh[i] = x->op == EM_XOP_H;
    for (int a = 0; a < ar; a++) rb[i] |= rb[x->arg[a]], rh[i] |= rh[x->arg[a]];
    if (p->dvar[i]) h->reads_b |= rb[i], h->reads_h |= rh[i];
  }
}

/* The compiled forms of the call's programs (all interpreted when one
** cannot be compiled: each tile then runs one evaluator). */
static void xjit_prepare(att_ctx *c) {
  const em_attention_args *a = c->a;
  for (int r = 0; r < CPU_XJIT_ROLES; r++) c->xjit[r] = NULL;
  if (!a->score_mod && !a->mask_mod) return;
  /* an empty capture's stand-in: a compiled load clamps a bad index to the
  ** first element (and leaves the row to the interpreter, which reports it),
  ** so that element must exist */
  static const double empty_cap[1];
  for (int i = 0; i < a->n_caps && i < EM_EXPR_MAX_CAPS; i++) {
    int64_t numel = 1;
    for (int d = 0; d < a->caps[i].ndim; d++) numel *= a->caps[i].shape[d];
    c->xcap_data[i] = numel > 0 ? a->caps[i].data : (const void *)empty_cap;
    for (int d = 0; d < EM_EXPR_MAX_DIMS; d++)
      c->xcap_shape[i * EM_EXPR_MAX_DIMS + d] = d < a->caps[i].ndim ? a->caps[i].shape[d] : 1;
  }
  /* the scatter whenever there are learned loads: the forward's and the
  ** backward's calls then share one compiled source */
  const em_expr *g = a->score_grad;
  const em_expr *const progs[CPU_XJIT_ROLES] = {a->score_mod, g, a->mask_mod, g && g->n_grad ? g : NULL};
  const bool all = cpu_xjit_get(progs, c->xh, a->dtype == EM_F64, a->caps, c->xjit);
  cpu_xjit_count(all);
}

/* bfloat16 backward: dq, dk and dv are summed in float32 scratch and
** rounded by the templates (store_grad); the tables' gradients, summed over
** heads and tiles, get float32 buffers here, rounded into the caller's
** bfloat16 tensors once at the end. */
static em_status backward_bf16_outer(att_ctx *c) {
  const em_attention_args *a = c->a;
  const int64_t nrel = a->n_rel;
  const int64_t n[2] = {a->d_rel_k ? nrel * a->dk : 0, a->d_rel_v ? nrel * a->dv : 0};
  void *const dst[2] = {a->d_rel_k, a->d_rel_v};
  const int64_t total = n[0] + n[1];
  if (total == 0) return backward_bf16(c);
  float *buf = cpu_scratch_alloc((size_t)total * sizeof(float));
  if (!buf)
    return em_error(EM_ERR_OOM,
                    "cpu attention_backward: out of memory for %lld float32 table gradients",
                    (long long)total);
  float *g[2];
  int64_t off = 0;
  for (int t = 0; t < 2; t++) g[t] = dst[t] ? buf + off : NULL, off += n[t];
  em_attention_args w = *a;
  w.d_rel_k = g[0], w.d_rel_v = g[1];
  c->a = &w;
  em_status s = backward_bf16(c);
  c->a = a;
  if (s == EM_OK)
    for (int t = 0; t < 2; t++)
      if (g[t]) cpu_bf16_narrow(dst[t], g[t], n[t]);
  cpu_scratch_free(buf, (size_t)total * sizeof(float));
  return s;
}

static em_status check_args(const char *kernel, const em_attention_args *a, bool backward) {
  if (!a) return em_error(EM_ERR_ARG, "cpu %s: args is NULL", kernel);
  if (a->dtype != EM_F32 && a->dtype != EM_F64 && a->dtype != EM_BF16)
    return cpu_bad_dtype(kernel, a->dtype, "float32, float64, bfloat16");
  if (a->B < 0 || a->H < 0 || a->Lq < 0 || a->Lk < 0 || a->dk < 0 || a->dv < 0)
    return em_error(EM_ERR_SHAPE,
                    "cpu %s: negative size B=%lld H=%lld Lq=%lld Lk=%lld dk=%lld dv=%lld", kernel,
                    (long long)a->B, (long long)a->H, (long long)a->Lq, (long long)a->Lk,
                    (long long)a->dk, (long long)a->dv);
  /* every index below, up to ((b*H+h)*Lq+i)*Lk+j, must fit in int64 */
  double cells = (double)a->B * (double)a->H * ((double)a->Lq + 1) * ((double)a->Lk + 1) *
                 ((double)a->dk + (double)a->dv + 1);
  if (cells > 4e18)
    return em_error(EM_ERR_SHAPE, "cpu %s: sizes B=%lld H=%lld Lq=%lld Lk=%lld are too large",
                    kernel,
                    (long long)a->B, (long long)a->H, (long long)a->Lq, (long long)a->Lk);
  if (!(a->dropout_p >= 0 && a->dropout_p <= 1))
    return em_error(EM_ERR_ARG, "cpu %s: dropout probability %g, expected within [0, 1]", kernel,
                    a->dropout_p);
  if (a->B * a->H == 0) return EM_OK;
  if (a->rel_row && (a->n_rel <= 0 || a->n_rel > INT_MAX / 2))
    return em_error(EM_ERR_ARG, "cpu %s: %lld table rows", kernel, (long long)a->n_rel);
  if ((a->rel_k || a->rel_v) && !a->rel_row)
    return em_error(EM_ERR_ARG, "cpu %s: a Shaw table without rel_row", kernel);
  /* relative rows and the QR / DSB arrays are indexed by int64 products of
  ** the sizes checked above, and GEMM'd over B*H*Lq rows (int) */
  if (a->rel_row && (double)a->B * a->H * a->Lq > INT_MAX)
    return em_error(EM_ERR_UNSUPPORTED, "cpu %s: B*H*Lq = %g rows with table terms exceed int",
                    kernel, (double)a->B * a->H * a->Lq);
  if (a->dk > INT_MAX / 2 || a->dv > INT_MAX / 2)
    return em_error(EM_ERR_UNSUPPORTED,
                    "cpu %s: head dims dk=%lld dv=%lld exceed what BLAS takes (int)", kernel,
                    (long long)a->dk, (long long)a->dv);
  if (a->Hkv < 0 || (a->Hkv && a->H % a->Hkv))
    return em_error(EM_ERR_ARG, "cpu %s: %lld query heads are not a multiple of %lld key/value heads",
                    kernel, (long long)a->H, (long long)a->Hkv);
  if (a->kv_rows && a->kv_rows < a->Lk)
    return em_error(EM_ERR_ARG, "cpu %s: k and v hold %lld rows per head, fewer than Lk = %lld", kernel,
                    (long long)a->kv_rows, (long long)a->Lk);
  if ((a->score_mod && !a->score_grad) || (a->sink && !a->sink_grad) ||
      a->n_caps < 0 || a->n_caps > EM_EXPR_MAX_CAPS || (a->n_caps && !a->caps) ||
      (a->block_map && a->map_grain < 1))
    return em_error(EM_ERR_ARG, "cpu %s: bad traced programs (score without its gradient, captures, map)",
                    kernel);
  const int64_t *st[8] = {a->q_stride, a->k_stride, a->v_stride, a->out_stride,
                          a->dout_stride, a->dq_stride, a->dk_stride, a->dv_stride};
  for (int t = 0; t < 8; t++)
    if (st[t][0] < 0 || st[t][1] < 0 || st[t][2] < 0)
      return em_error(EM_ERR_ARG, "cpu %s: negative strides (%lld, %lld, %lld)", kernel,
                      (long long)st[t][0], (long long)st[t][1], (long long)st[t][2]);
  if (!a->q || !a->k || !a->v || !a->out || !a->lse)
    return em_error(EM_ERR_ARG, "cpu %s: q, k, v, out and lse must not be NULL", kernel);
  if (backward && (!a->dout || !a->dq || !a->dk_ || !a->dv_))
    return em_error(EM_ERR_ARG, "cpu %s: dout, dq, dk_ and dv_ must not be NULL", kernel);
  return EM_OK;
}

/* xh: the caller's room for the programs' plans (cpu_xhoist). */
static att_ctx make_ctx(const em_attention_args *a, cpu_xhoist *xh) {
  att_ctx c;
  c.a = a;
  /* k and v: Lk rows per head, or a KV cache's capacity (kv_rows: its
  ** filled part read in place) */
  const int64_t hkv = a->Hkv ? a->Hkv : a->H, kvr = a->kv_rows > 0 ? a->kv_rows : a->Lk;
  c.q = att_lay_of(a->q_stride, a->H, a->Lq, a->dk);
  c.k = att_lay_of(a->k_stride, hkv, kvr, a->dk);
  c.v = att_lay_of(a->v_stride, hkv, kvr, a->dv);
  c.o = att_lay_of(a->out_stride, a->H, a->Lq, a->dv);
  c.go = att_lay_of(a->dout_stride, a->H, a->Lq, a->dv);
  c.gq = att_lay_of(a->dq_stride, a->H, a->Lq, a->dk);
  c.gk = att_lay_of(a->dk_stride, a->H, a->Lk, a->dk);
  c.gv = att_lay_of(a->dv_stride, a->H, a->Lk, a->dv);
  c.shift = a->Lk - a->Lq;
  double work = (double)a->B * a->H * a->Lq * a->Lk * (double)(a->dk + a->dv);
  c.parallel = work > 65536.0 && cpu_team_go(work);
  c.rows = (a->dtype == EM_F32 || a->dtype == EM_BF16) && a->Lq <= att_rows_limit();
  c.D = NULL;
  c.n_r = 0;
  c.QR = c.DR = c.DSB = c.PB = NULL;
  c.run_end = c.long_from = c.step_end = NULL;
  c.GK = c.GV = NULL;
  c.xerr = NULL, c.xg = NULL, c.xg_size = 0;
  c.x_additive = false;
  if (a->score_grad && a->score_grad->n_out > 1) {
    const em_xins *d = &a->score_grad->ins[a->score_grad->out[1]];
    c.x_additive = d->op == EM_XOP_CONST && d->k == 1;
  }
  for (int i = 0; i < EM_EXPR_MAX_CAPS; i++) c.xg_off[i] = -1;
  int xn = 0;
  const em_expr *progs[5] = {a->score_mod, a->score_grad, a->mask_mod, a->sink, a->sink_grad};
  for (int i = 0; i < 5; i++)
    if (progs[i] && progs[i]->n > xn) xn = progs[i]->n;
  /* n registers, three broadcast buffers, the int64 offsets */
  c.xregs = xn ? (int64_t)(xn + 3) * ATT_XCH + ATT_XCH * 8 / (int64_t)sizeof(float) : 0;
  const em_expr *const roles[CPU_XJIT_ROLES] = {a->score_mod, a->score_grad, a->mask_mod, a->score_grad};
  for (int r = 0; r < CPU_XJIT_ROLES; r++) cpu_xhoist_plan(roles[r], a->caps, r == CPU_XJIT_SCATTER, &xh[r]);
  c.xh = xh;
  /* s + d or s - d, d a register on the diagonals: a bias table (T5,
  ** clipped distances), ALiBi's s - slope * |k - q|, a Lua variant's
  ** s + bias of k - q. The tiles add or subtract the diagonals' values as
  ** a vector, not through the program (xscore_tile); s - d is s + (-d) in
  ** IEEE arithmetic, so the bits are the program's. */
  c.x_diag_bias = -1, c.x_diag_sub = false;
  if (a->score_mod) {
    const em_xins *ins = a->score_mod->ins, *o = &ins[a->score_mod->out[0]];
    const bool binary = o->op == EM_XOP_ADD || o->op == EM_XOP_SUB; /* only then is arg[1] an operand */
    const bool s0 = binary && ins[o->arg[0]].op == EM_XOP_S, s1 = binary && ins[o->arg[1]].op == EM_XOP_S;
    if ((o->op == EM_XOP_ADD && (s0 || s1)) || (o->op == EM_XOP_SUB && s0 && !s1)) {
      c.x_diag_bias = xh[CPU_XJIT_SCORE].slot[s0 ? o->arg[1] : o->arg[0]];
      c.x_diag_sub = o->op == EM_XOP_SUB;
    }
  }
  /* then the backward sums dS along the diagonals for the tables, without
  ** the program (grad_tile) */
  const em_expr *g = a->score_grad;
  c.x_diag_grad = g && g->n_grad > 0;
  for (int i = 0; c.x_diag_grad && i < g->n_grad; i++) {
    const em_xins *d = &g->ins[g->out[2 + i]];
    c.x_diag_grad = d->op == EM_XOP_CONST && d->k == 1 && xh[CPU_XJIT_SCATTER].gslot[i] >= 0;
  }
  for (int r = 0; r < CPU_XJIT_ROLES; r++) c.xd[r] = NULL, c.xd_bytes[r] = 0;
  c.xdo = NULL, c.xdo_bytes = 0, c.xd_n = 0;
  xjit_prepare(&c);
  /* largest tiles (64 x 128, halving bc then br down to 16) whose products
  ** stay on one BLAS thread */
  const double d = (double)(a->dk > a->dv ? a->dk : a->dv > 0 ? a->dv : 1);
  c.br = 64, c.bc = 128;
  while (c.bc > 16 && c.br * c.bc * d > TILE_MNK) c.bc /= 2;
  while (c.br > 16 && c.br * c.bc * d > TILE_MNK) c.br /= 2;
  /* a mask program keeps a band of keys, mostly: narrower key tiles follow
  ** it closer (a 64 + 64 window touches 3-4 tiles of 64 keys, not 2-3 of
  ** 128), and the block map's cells are 16 positions a side.
  ** The forward joins neighbouring kept tiles into steps of the full width
  ** (c.ld): the row maxima and sums, and each product's setup, then come
  ** once per 128 keys where the band allows, as in standard attention. */
  c.ld = c.bc;
  if (a->block_map && c.bc > 64) c.bc = 64;
  /* head dims beyond 1024: BLAS would thread each product, so the tiles
  ** run one after another on the calling thread */
  if (c.br * c.bc * d > TILE_MNK) c.parallel = false;
  /* the hoisted registers after the rest: one role's roots at a time, then
  ** the scatter's per-diagonal sums and their int64 offsets */
  c.xh_at = c.xregs;
  int64_t roots = 0;
  for (int r = 0; r < CPU_XJIT_ROLES; r++) roots = xh[r].n_roots > roots ? xh[r].n_roots : roots;
  if (c.xregs) c.xregs += (roots + 3 * (int64_t)xh[CPU_XJIT_SCATTER].n_gd) * ATT_HS(&c);
  return c;
}

/* A traced program's failure as the kernel's error. */
static em_status xerr_status(const char *kernel, const em_attention_args *a, const att_xerr *e) {
  if (e->kind == ATT_XERR_NAN)
    return em_error(EM_ERR_ARG, "cpu %s: the score function gave %s at b=%lld h=%lld q=%lld k=%lld",
                    kernel, e->idx != e->idx ? "NaN" : "+inf", (long long)e->b, (long long)e->h, (long long)e->q, (long long)e->k);
  const em_xcap *cp = &a->caps[e->cap];
  const int d = e->kind - 1;
  return em_error(EM_ERR_INDEX,
                  "cpu %s: index %g out of range for dim %d of captured tensor '%s' (size %lld) at "
                  "b=%lld h=%lld q=%lld k=%lld",
                  kernel, e->idx, d + 1, cp->name ? cp->name : "?", (long long)(d < cp->ndim ? cp->shape[d] : 0),
                  (long long)e->b, (long long)e->h, (long long)e->q, (long long)e->k);
}

em_status cpu_attention_forward(int device, const em_attention_args *args) {
  (void)device;
  em_status s = check_args("attention_forward", args, false);
  if (s || args->B * args->H == 0) return s;
  cpu_xhoist xh[CPU_XJIT_ROLES];
  att_ctx c = make_ctx(args, xh);
  att_xerr xe = {0};
  c.xerr = &xe;
  s = args->dtype == EM_F32 ? forward_f32(&c)
      : args->dtype == EM_BF16 ? forward_bf16(&c) : forward_f64(&c);
  if (s == EM_OK && xe.kind) s = xerr_status("attention_forward", args, &xe);
  return s;
}

em_status cpu_attention_backward(int device, const em_attention_args *args) {
  (void)device;
  em_status s = check_args("attention_backward", args, true);
  if (s || args->B * args->H == 0) return s;
  cpu_xhoist xh[CPU_XJIT_ROLES];
  att_ctx c = make_ctx(args, xh);
  att_xerr xe = {0};
  c.xerr = &xe;
  s = args->dtype == EM_F32 ? backward_f32(&c)
      : args->dtype == EM_BF16 ? backward_bf16_outer(&c) : backward_f64(&c);
  if (s == EM_OK && xe.kind) s = xerr_status("attention_backward", args, &xe);
  return s;
}
