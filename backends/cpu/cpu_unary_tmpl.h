/*
** cpu_unary_tmpl.h -- unary ops and their derivatives for one type;
** included by cpu_unary.c with T (the element type), SUF, and IS_FLOAT 1
** for float types, which get the ops and derivatives. Those compute in
** ACC, with LD(x) / ST(v) taking an element to ACC and back (identities
** for float and double; bfloat16 computes in float). The element rules
** themselves are core/include/ember_unary_rules.h's, which the CUDA
** kernels share; K() keeps a constant in ACC, so that a float expression
** stays in float.
**
** Runs are written once over an op function and always inlined into the
** dispatcher, where the op is a constant, so each case becomes a plain
** loop the compiler vectorises.
*/

#define FN(name) CPU_CAT(name, SUF)
#if !IS_FLOAT
#define ACC T
#define LD(x) (x)
#define ST(x) (x)
#endif
#define K(v) ((ACC)(v))

/* out[i] = f(x, a, b) over a run; out is contiguous, x may be strided. */
static inline __attribute__((always_inline)) void FN(un_run)(char **p, const int64_t *s,
                                                            int64_t n, ACC (*f)(ACC, ACC, ACC),
                                                            ACC a, ACC b) {
  T *o = (T *)p[0];
  if (s[1] == (int64_t)sizeof(T)) {
    const T *X = (const T *)p[1];
    for (int64_t i = 0; i < n; i++) o[i] = ST(f(LD(X[i]), a, b));
  } else {
    const char *px = p[1];
    for (int64_t i = 0; i < n; i++, px += s[1]) o[i] = ST(f(LD(*(const T *)px), a, b));
  }
}

#if IS_FLOAT

/* The ops' and derivatives' element rules, shared with the CUDA kernels;
** cpu_unary.c maps m_exp ... to <tgmath.h>'s type-generic functions. */
#include "ember_unary_rules.h"

CPU_VECTOR_CLONES_512 static void FN(unary_ops)(char **p, const int64_t *s, int64_t n, const unary_ctx *c) {
  const ACC a = (ACC)c->alpha, b = (ACC)c->beta;
  switch (c->op) {
    case EM_NEG: FN(un_run)(p, s, n, FN(u_neg), a, b); return;
    case EM_EXP: FN(un_run)(p, s, n, FN(u_exp), a, b); return;
    case EM_LOG: FN(un_run)(p, s, n, FN(u_log), a, b); return;
    case EM_SQRT: FN(un_run)(p, s, n, FN(u_sqrt), a, b); return;
    case EM_RSQRT: FN(un_run)(p, s, n, FN(u_rsqrt), a, b); return;
    case EM_ABS: FN(un_run)(p, s, n, FN(u_abs), a, b); return;
    case EM_TANH: FN(un_run)(p, s, n, FN(u_tanh), a, b); return;
    case EM_SIGMOID: FN(un_run)(p, s, n, FN(u_sigmoid), a, b); return;
    case EM_RELU: FN(un_run)(p, s, n, FN(u_relu), a, b); return;
    case EM_GELU: FN(un_run)(p, s, n, FN(u_gelu), a, b); return;
    case EM_GELU_TANH: FN(un_run)(p, s, n, FN(u_gelu_tanh), a, b); return;
    case EM_ELU: FN(un_run)(p, s, n, FN(u_elu), a, b); return;
    case EM_CLAMP: FN(un_run)(p, s, n, FN(u_clamp), a, b); return;
    case EM_POW_SCALAR:
      if (a == K(2)) FN(un_run)(p, s, n, FN(u_square), a, b);
      else if (a == K(1)) FN(un_run)(p, s, n, FN(u_ident), a, b);
      else FN(un_run)(p, s, n, FN(u_pow), a, b);
      return;
    case EM_AFFINE: FN(un_run)(p, s, n, FN(u_affine), a, b); return;
    case EM_SILU: FN(un_run)(p, s, n, FN(u_silu), a, b); return;
    case EM_SIN: FN(un_run)(p, s, n, FN(u_sin), a, b); return;
    case EM_COS: FN(un_run)(p, s, n, FN(u_cos), a, b); return;
    case EM_FLOOR: FN(un_run)(p, s, n, FN(u_floor), a, b); return;
    case EM_CEIL: FN(un_run)(p, s, n, FN(u_ceil), a, b); return;
    case EM_ROUND: FN(un_run)(p, s, n, FN(u_round), a, b); return;
    case EM_TRUNC: FN(un_run)(p, s, n, FN(u_trunc), a, b); return;
    case EM_SIGN: FN(un_run)(p, s, n, FN(u_sign), a, b); return;
    case EM_LOG1P: FN(un_run)(p, s, n, FN(u_log1p), a, b); return;
    case EM_EXPM1: FN(un_run)(p, s, n, FN(u_expm1), a, b); return;
    case EM_ERF: FN(un_run)(p, s, n, FN(u_erf), a, b); return;
    case EM_ATAN: FN(un_run)(p, s, n, FN(u_atan), a, b); return;
    case EM_ASIN: FN(un_run)(p, s, n, FN(u_asin), a, b); return;
    case EM_ACOS: FN(un_run)(p, s, n, FN(u_acos), a, b); return;
    case EM_ERFINV: FN(un_run)(p, s, n, FN(u_erfinv), a, b); return;
    case EM_LGAMMA: FN(un_run)(p, s, n, FN(u_lgamma), a, b); return;
    case EM_DIGAMMA: FN(un_run)(p, s, n, FN(u_digamma), a, b); return;
    default: return;
  }
}

#if !UNARY_GRAD_VIA_F32 /* bfloat16's derivatives run the float32 loops (cpu_unary.c) */
/* ---- derivatives: gx = f(g, x, y, a, b) (the d_ rules of
** ember_unary_rules.h); all arrays contiguous, x or y NULL when the op
** does not read it. */

/* One loop per combination of the operands present: a test of X or Y
** inside the loop is control flow, which keeps GCC from vectorising it. */
static inline __attribute__((always_inline)) void FN(grad_run)(
    int64_t lo, int64_t hi, T *GX, const T *GY, const T *X, const T *Y,
    ACC (*f)(ACC, ACC, ACC, ACC, ACC), ACC a, ACC b) {
  if (X && Y)
    for (int64_t i = lo; i < hi; i++) GX[i] = ST(f(LD(GY[i]), LD(X[i]), LD(Y[i]), a, b));
  else if (X)
    for (int64_t i = lo; i < hi; i++) GX[i] = ST(f(LD(GY[i]), LD(X[i]), K(0), a, b));
  else if (Y)
    for (int64_t i = lo; i < hi; i++) GX[i] = ST(f(LD(GY[i]), K(0), LD(Y[i]), a, b));
  else
    for (int64_t i = lo; i < hi; i++) GX[i] = ST(f(LD(GY[i]), K(0), K(0), a, b));
}

/* Elements [lo, hi) of op's derivative: a vector clone, with f inlined
** into each case's loop (see CPU_FOR_RANGES). */
CPU_VECTOR_CLONES_512 static void FN(grad_range)(em_unary_op op, int64_t lo, int64_t hi, T *gx,
                                             const T *gy, const T *x, const T *y, ACC a, ACC b) {
#define GRAD_CASE(OP, F) \
  case OP: FN(grad_run)(lo, hi, gx, gy, x, y, FN(F), a, b); break;
  switch (op) {
    GRAD_CASE(EM_NEG, d_neg)
    GRAD_CASE(EM_EXP, d_exp)
    GRAD_CASE(EM_LOG, d_log)
    GRAD_CASE(EM_SQRT, d_sqrt)
    GRAD_CASE(EM_RSQRT, d_rsqrt)
    GRAD_CASE(EM_ABS, d_abs)
    GRAD_CASE(EM_TANH, d_tanh)
    GRAD_CASE(EM_SIGMOID, d_sigmoid)
    GRAD_CASE(EM_RELU, d_relu)
    GRAD_CASE(EM_GELU, d_gelu)
    GRAD_CASE(EM_GELU_TANH, d_gelu_tanh)
    GRAD_CASE(EM_ELU, d_elu)
    GRAD_CASE(EM_CLAMP, d_clamp)
    case EM_POW_SCALAR:
      if (a == K(0)) FN(grad_run)(lo, hi, gx, gy, x, y, FN(d_zero), a, b);
      else FN(grad_run)(lo, hi, gx, gy, x, y, FN(d_pow), a, b);
      break;
    GRAD_CASE(EM_AFFINE, d_affine)
    GRAD_CASE(EM_SILU, d_silu)
    GRAD_CASE(EM_SIN, d_sin)
    GRAD_CASE(EM_COS, d_cos)
    GRAD_CASE(EM_FLOOR, d_zero) /* piecewise constant: PyTorch's zero gradient */
    GRAD_CASE(EM_CEIL, d_zero)
    GRAD_CASE(EM_ROUND, d_zero)
    GRAD_CASE(EM_TRUNC, d_zero)
    GRAD_CASE(EM_SIGN, d_zero)
    GRAD_CASE(EM_LOG1P, d_log1p)
    GRAD_CASE(EM_EXPM1, d_expm1)
    GRAD_CASE(EM_ERF, d_erf)
    GRAD_CASE(EM_ATAN, d_atan)
    GRAD_CASE(EM_ASIN, d_asin)
    GRAD_CASE(EM_ACOS, d_acos)
    GRAD_CASE(EM_ERFINV, d_erfinv)
    GRAD_CASE(EM_LGAMMA, d_lgamma)
    GRAD_CASE(EM_DIGAMMA, d_digamma)
    default: break;
#undef GRAD_CASE
  }
}

static void FN(unary_grad)(em_unary_op op, int64_t n, T *gx, const T *gy, const T *x,
                           const T *y, double alpha, double beta) {
  const ACC a = (ACC)alpha, b = (ACC)beta;
  CPU_FOR_RANGES(n > CPU_PAR_MIN, n, lo, hi, FN(grad_range)(op, lo, hi, gx, gy, x, y, a, b););
}
#endif /* !UNARY_GRAD_VIA_F32 */

#endif /* IS_FLOAT */

#if !IS_FLOAT
#undef ACC
#undef LD
#undef ST
#endif
#undef K
#undef FN
