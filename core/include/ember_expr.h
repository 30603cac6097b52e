/*
** ember_expr.h -- traced attention modifications: the program format and
** its element rules, shared by the core (block maps, checks), the CPU
** kernel (a vectorised interpreter over tile rows) and any other backend.
**
** A variant written in Lua (lua/ember/variant.lua) is traced once per
** instance: its score and mask functions run on symbolic values and the
** expression graph is lowered to a program, a list of instructions in SSA
** form (instruction i writes register i; operands name earlier registers).
** The kernel runs a program for one query row and a run of keys at a time:
** registers that do not depend on the key are computed once per row
** (em_expr.kvar says which), the others as vectors over the keys.
** Registers that depend on q and k only through k - q (em_expr.dvar: a
** relative position's bucket, a distance's bias, a window's test) are the
** same along each diagonal of a tile, so a kernel may compute them once per
** diagonal -- br + bc - 1 values for br * bc scores -- and read them in
** each row at its offset.
**
** Values. Every register holds a number of the kernel's compute type
** (float32 or float64); booleans are 0 and 1; indices are 1-based
** integers, as everywhere in ember's Lua API. b, h, q and k are the batch,
** head, query and key positions, 1-based; q is the query's position on
** the key axis (i + Lk - Lq + 1, bottom-right aligned, as causal masking),
** so q - k is the relative position and a KV-cached decoding step sees the
** same values as the full pass.
**
** Captures. EM_XOP_LOAD reads element [arg0][arg1].. of captured tensor
** `cap` (1-based indices, checked: a kernel that meets an index out of
** range stops and reports it). Captures are the variant's tables (learned
** ones get gradients) and the call's own tensors (document ids ...).
*/
#ifndef EMBER_EXPR_H
#define EMBER_EXPR_H

#include <math.h>
#include <stdint.h>

#include "ember.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The element functions below (em_xeval1, em_xcap_offset, em_xcap_read)
** are also compiled for the GPU by nvcc, so that the CUDA kernel's
** interpreter applies these rules rather than a copy of them. */
#if defined(__CUDACC__)
#define EM_XHD __host__ __device__
#else
#define EM_XHD
#endif

/* The operations, with their element rules below (EM_XRULE_*). */
#define EM_XOPS(X)                                                        \
  X(CONST, 0) X(S, 0) X(B, 0) X(H, 0) X(Q, 0) X(K, 0)                     \
  X(ADD, 2) X(SUB, 2) X(MUL, 2) X(DIV, 2) X(IDIV, 2) X(MOD, 2) X(POW, 2)  \
  X(MIN, 2) X(MAX, 2) X(LT, 2) X(LE, 2) X(EQ, 2) X(NE, 2) X(AND, 2)       \
  X(OR, 2) X(NEG, 1) X(ABS, 1) X(FLOOR, 1) X(CEIL, 1) X(EXP, 1) X(LOG, 1) \
  X(TANH, 1) X(SQRT, 1) X(SIGMOID, 1) X(NOT, 1) X(SIGN, 1) X(WHERE, 3)    \
  X(LOAD, -1)

typedef enum em_xop {
#define EM_XOP_ENUM(name, arity) EM_XOP_##name,
  EM_XOPS(EM_XOP_ENUM)
#undef EM_XOP_ENUM
  EM_XOP_COUNT
} em_xop;

/* Operands of each op (-1: LOAD, which takes its capture's ndim). */
static inline int em_xop_arity(int op) {
  static const signed char arity[] = {
#define EM_XOP_ARITY(name, n) n,
    EM_XOPS(EM_XOP_ARITY)
#undef EM_XOP_ARITY
  };
  return op >= 0 && op < EM_XOP_COUNT ? arity[op] : -2;
}

#define EM_EXPR_MAX_DIMS 4     /* indices of one load */
#define EM_EXPR_MAX_CAPS 8     /* captured tensors of one variant */
#define EM_EXPR_MAX_INS 512    /* instructions of one program */
#define EM_EXPR_MAX_OUT 10     /* outputs of one program */

typedef struct em_xins {
  int32_t op;                        /* em_xop */
  int32_t cap;                       /* LOAD: the capture */
  int32_t arg[EM_EXPR_MAX_DIMS];     /* operand registers (LOAD: the indices) */
  double k;                          /* CONST: the value */
} em_xins;

/* One program: n instructions, outputs out[0..n_out). What each output
** means is the program's role (em_attn_mods in ember_attention.h). */
typedef struct em_expr {
  int n;
  const em_xins *ins;
  const uint8_t *kvar;               /* [n]: 1 when register i depends on the key */
  const uint8_t *dvar;               /* [n]: 1 when it depends on q and k only through k - q */
  int n_out;
  int32_t out[EM_EXPR_MAX_OUT];
  /* score gradient programs: out[2 + g] is d score / d (the load
  ** instruction grad_load[g]), for the loads of learned captures */
  int n_grad;
  int32_t grad_load[EM_EXPR_MAX_OUT - 2];
  uint32_t deps;                     /* EM_XDEP_* of out[0] */
  int refs;                          /* owners: em_expr_new gives 1, em_expr_retain adds one,
                                        em_expr_free drops one and frees the program at 0 */
} em_expr;

/* What a register depends on (em_expr.deps: the block map is made per
** batch or per head only when the mask reads them). */
#define EM_XDEP_B (1u << 0)
#define EM_XDEP_H (1u << 1)
#define EM_XDEP_Q (1u << 2)
#define EM_XDEP_K (1u << 3)
#define EM_XDEP_S (1u << 4)
#define EM_XDEP_REL (1u << 5)   /* k - q (or q - k) itself, not q or k alone */

/* How a mask program treats a tile (the block map's cells). */
#define EM_XTILE_EMPTY 0   /* no key visible: skipped in forward and backward */
#define EM_XTILE_FULL 1    /* every key visible: the mask is not evaluated */
#define EM_XTILE_PARTIAL 2 /* the mask is evaluated per element */

/* A captured tensor as a kernel reads it: contiguous, row-major. */
typedef struct em_xcap {
  const void *data;
  em_dtype dtype;                    /* EM_F32, EM_F64 or EM_I64 */
  int ndim;
  int64_t shape[EM_EXPR_MAX_DIMS];
  const char *name;                  /* for messages */
} em_xcap;

/* ---- element rules: one definition each, for every evaluator ---- */
/* Integer division and modulo as Lua's // and % (floor, sign of b). */
#define EM_XRULE_IDIV(a, b) floor((a) / (b))
#define EM_XRULE_MOD(a, b) ((a) - floor((a) / (b)) * (b))
#define EM_XRULE_MIN(a, b) ((a) < (b) ? (a) : (b))
#define EM_XRULE_MAX(a, b) ((a) > (b) ? (a) : (b))
#define EM_XRULE_SIGMOID(a) (1 / (1 + exp(-(a))))
#define EM_XRULE_SIGN(a) ((a) > 0 ? 1 : (a) < 0 ? -1 : 0)
#define EM_XRULE_WHERE(c, a, b) ((c) != 0 ? (a) : (b))

/* A scalar evaluation of one binary or unary op in double (the core's
** reference evaluator and the block map use it, and the CUDA kernels per
** element; the CPU interpreter expands the same rules over vectors).
** Operands an op does not take are ignored. */
static inline EM_XHD double em_xeval1(int op, double a, double b, double c) {
  switch (op) {
  case EM_XOP_ADD: return a + b;
  case EM_XOP_SUB: return a - b;
  case EM_XOP_MUL: return a * b;
  case EM_XOP_DIV: return a / b;
  case EM_XOP_IDIV: return EM_XRULE_IDIV(a, b);
  case EM_XOP_MOD: return EM_XRULE_MOD(a, b);
  case EM_XOP_POW: return pow(a, b);
  case EM_XOP_MIN: return EM_XRULE_MIN(a, b);
  case EM_XOP_MAX: return EM_XRULE_MAX(a, b);
  case EM_XOP_LT: return a < b;
  case EM_XOP_LE: return a <= b;
  case EM_XOP_EQ: return a == b;
  case EM_XOP_NE: return a != b;
  case EM_XOP_AND: return a != 0 && b != 0;
  case EM_XOP_OR: return a != 0 || b != 0;
  case EM_XOP_NEG: return -a;
  case EM_XOP_ABS: return fabs(a);
  case EM_XOP_FLOOR: return floor(a);
  case EM_XOP_CEIL: return ceil(a);
  case EM_XOP_EXP: return exp(a);
  case EM_XOP_LOG: return log(a);
  case EM_XOP_TANH: return tanh(a);
  case EM_XOP_SQRT: return sqrt(a);
  case EM_XOP_SIGMOID: return EM_XRULE_SIGMOID(a);
  case EM_XOP_NOT: return a == 0;
  case EM_XOP_SIGN: return EM_XRULE_SIGN(a);
  case EM_XOP_WHERE: return EM_XRULE_WHERE(a, b, c);
  default: return NAN;
  }
}

/* The flat offset of a load from its 1-based indices, or -1 when one is
** out of range or not an integer (the kernels report it). */
static inline EM_XHD int64_t em_xcap_offset(const em_xcap *c, const double *idx) {
  int64_t off = 0;
  for (int d = 0; d < c->ndim; d++) {
    const double x = idx[d];
    if (!(x >= 1 && x <= (double)c->shape[d]) || x != floor(x)) return -1;
    off = off * c->shape[d] + (int64_t)x - 1;
  }
  return off;
}

/* Element `off` of a capture as double. */
static inline EM_XHD double em_xcap_read(const em_xcap *c, int64_t off) {
  return c->dtype == EM_F32   ? (double)((const float *)c->data)[off]
         : c->dtype == EM_F64 ? ((const double *)c->data)[off]
                              : (double)((const int64_t *)c->data)[off];
}

/* ---- the core's side (core/src/attention_expr.c) ---- */
/* Checks and copies a program: every operand names an earlier register,
** a load has its capture's ndim indices (cap_ndim[c]), outputs and
** gradient loads exist; derives kvar, dvar and deps. */
EM_API em_status em_expr_new(em_expr **out, int n, const em_xins *ins, int n_out, const int32_t *outs,
                             int n_grad, const int32_t *grad_load, int n_caps, const int *cap_ndim);
EM_API void em_expr_free(em_expr *e);
/* One more owner of e (NULL: nothing): an autograd node whose backward runs
** the program keeps it alive after the variant instance that made it is
** collected; em_expr_free(e) drops it. */
EM_API void em_expr_retain(const em_expr *e);
/* Output `out` of the program at one element, in double (regs: n doubles). */
EM_API double em_expr_eval(const em_expr *e, const em_xcap *caps, int out, double b, double h,
                           double q, double k, double s, double *regs);

#ifdef __cplusplus
}
#endif
#endif
